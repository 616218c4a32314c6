/**
 * @file scan.h
 * Walking a source tree and signing its files with worker threads: the one
 * code path shared by `imatch scan`, `imatch lexicon build` and the daemon's
 * full scans (DESIGN §4: "One code path").
 *
 * The source is reached only through a directory fd (openat/fstatat/
 * fdopendir on dup'ed fds), never by absolute path, so it works when the
 * filesystem is mounted over the source itself. Symbolic links are not
 * followed. Names beginning with '.' are skipped unless im_params.hidden.
 * Paths left out by im_params.scope or a .imatchignore (scope.h) are
 * skipped and counted; an excluded directory is not entered.
 * Paths handed to callbacks are relative to the source, without a leading
 * "./", components joined with '/'. They may contain any byte but NUL.
 *
 * The walk visits the names of a directory in byte order (files handed on
 * as they come, subdirectories after), so two walks of an unchanged tree see
 * the same sequence. Deep trees do not exhaust file descriptors: only the 32
 * innermost directories on the current path keep an fd open; the others are
 * reopened below their nearest open ancestor with im_open_beneath() (no
 * symlink followed, nothing outside reached) when the walk comes back to
 * them and must still be the same (st_dev, st_ino), else they count as an
 * error. A scan holds at most that many plus one per queued file (128),
 * and one per directory of a file that could not be opened as one until
 * the walking thread has stat'ed it (im_scan_sign()).
 * Another imatchfs mount inside the tree is not entered (counts->mounts).
 *
 * Thread-safety: the functions are reentrant. Callbacks named "walker" run in
 * the calling thread; "result" callbacks run in any of the scan's threads
 * (the calling one included) but never two at once (the scanner serializes
 * them), in no particular order.
 */
#ifndef IM_SCAN_H
#define IM_SCAN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "lexicon.h"
#include "params.h"
#include "sig.h"

/** What a walk or scan saw. All counters start at zero in the caller. */
struct im_scan_counts {
	uint64_t files;	 /**< regular files found (want() may leave some out) */
	uint64_t dirs;	 /**< directories entered (the root included) */
	uint64_t hidden; /**< names skipped because they begin with '.' */
	uint64_t other;	 /**< symlinks, devices, sockets, fifos: skipped */
	uint64_t errors; /**< entries or directories that could not be read */
	uint64_t mounts; /**< imatchfs mounts inside the tree: not entered */
	uint64_t excluded; /**< files and directories left out by the scope
			      (scope.h): excludes, includes, .imatchignore */
	uint64_t bytes;	   /**< scans: st_size of the texts read (signed or
			        rejected; binary files are only sniffed) */
	uint64_t by_status[IM_DOC_STATUS_COUNT]; /**< scans: results per
						    enum im_doc_status */
	/** Sign scans: files read, per format (enum im_format; binary and
	 *  failed files under the format they were sniffed as). */
	uint64_t by_format[IM_FMT_COUNT];
	/** Sign scans: IM_DOC_FAILED files per enum im_extract_fail. */
	uint64_t by_fail[IM_XF_COUNT];
	/** Scans: texts read with more than IM_TERMS_MAX unique terms, kept
	 *  as a sample of them (text.h); an exact copy given a result read
	 *  before is not counted again. */
	uint64_t sampled;
};

/** Called by the walker for each directory (the root is ""), before its files. */
typedef int (*im_walk_dir_cb)(const char *path, const struct stat *st,
			      void *arg);
/** Called by the walker for each regular file. Non-zero stops the walk. */
typedef int (*im_walk_file_cb)(const char *path, const struct stat *st,
			       void *arg);

struct im_walk_ops {
	im_walk_dir_cb dir;   /**< may be NULL */
	im_walk_file_cb file; /**< may be NULL */
	void *arg;
	/** A directory to leave out (e.g. the state directory): st_dev/st_ino,
	 *  both 0 for none. */
	dev_t skip_dev;
	ino_t skip_ino;
	/** If not NULL or "": walk only this directory below @p dirfd (paths
	 *  still relative to @p dirfd), with the .imatchignore files of its
	 *  parents applied (im_scope_open_dir()); nothing when it is excluded. */
	const char *under;
	/** May be NULL: a directory (or an entry of one, or a .imatchignore)
	 *  that could not be opened or read, with its errno; as
	 *  im_scan_ops.unreadable, counted in errors. */
	void (*unreadable)(const char *path, int err, void *arg);
	/** Walk the root's own files only: @c dir is called for the root,
	 *  then for each subdirectory the walk would enter (hidden names,
	 *  scope, mounts and the skipped directory left out as always), which
	 *  is not entered. Walks of those subdirectories (@c under) then count
	 *  together what one walk of the whole tree counts. */
	bool one_level;
};

/**
 * Walk the tree under @p dirfd (not closed; its offset is not used) depth
 * first, directories in no particular order.
 *
 * @return 0, a callback's non-zero value, -ENOMEM, or a negative errno if
 *         @p dirfd itself (or ops->under) cannot be opened as a
 *         directory. Unreadable
 *         subdirectories and entries are counted in @p counts->errors, not
 *         fatal.
 */
int im_walk(int dirfd, const struct im_params *p, const struct im_walk_ops *ops,
	    struct im_scan_counts *counts);

struct im_scan_ops {
	/** Walker thread: return false to leave a file out (served from a
	 *  cache, say). NULL means every file. */
	bool (*want)(const char *path, const struct stat *st, void *arg);
	/** Worker thread, serialized: one signed (or skipped) file. @p st is the
	 *  fstat of the opened file when it could be opened, else the walker's
	 *  (im_params.size_only: perhaps its st_mode and st_size alone). */
	void (*result)(const char *path, const struct stat *st,
		       const struct im_doc_sigs *d, void *arg);
	/** Walker thread, may be NULL: each directory, as im_walk_ops.dir. */
	im_walk_dir_cb dir;
	/** Walker thread, may be NULL: a directory (or an entry of one) that
	 *  could not be opened or read, with its errno; counted in errors,
	 *  never delivered to result(). */
	void (*unreadable)(const char *path, int err, void *arg);
	void *arg;
	dev_t skip_dev;
	ino_t skip_ino;
	/** If not NULL and set to true by another thread, the scan stops early. */
	const volatile bool *cancel;

	/* im_scan_first() only. */
	/** Called once, in the calling thread, with the lexicon just built
	 *  (the scan hands it out in *lex; it may be kept from here on),
	 *  before any result. Non-zero stops the scan with that value and the
	 *  lexicon is freed. May be NULL. */
	int (*lexicon)(const struct im_lexicon *lex, void *arg);
	/** Where term ids spill past spill_budget (NULL: $TMPDIR, else
	 *  /tmp). A state directory is a good place. */
	const char *spill_dir;
	/** Bytes of term ids and results kept in memory while the lexicon
	 *  does not exist, over all workers (0: IM_SCAN_SPILL_BUDGET). */
	size_t spill_budget;
	/** If fewer than two documents have a term (no lexicon), deliver
	 *  every file's result all the same, counted as im_scan_sign() counts:
	 *  a text unsigned (IM_DOC_REJECTED, no coordinate, with its exact
	 *  hash and sketch), anything else as read. False: deliver none. */
	bool unsigned_results;
};

/** im_scan_first()'s default memory before spilling: 256 MiB. */
#define IM_SCAN_SPILL_BUDGET ((size_t)256 << 20)

/**
 * The threads a -j @p threads means: @p threads itself, or one per online
 * CPU for 0, at most @p cap. Thread-safe.
 */
unsigned im_scan_threads(unsigned threads, unsigned cap);

/** The most threads a scan (and the daemon's signing) runs. */
#define IM_SCAN_MAX_THREADS 256

/**
 * Walk and sign every file with @p threads workers (0 = one per online CPU),
 * each with its own struct im_signer. The calling thread walks and is one of
 * them: alone it reads each file as it finds it; with others it reads the
 * oldest queued file whenever the queue is full, and helps empty the queue
 * after the walk. A file is opened by the worker relative to an fd of its
 * own directory, so no path is resolved twice; without ops->want, a file
 * its directory entry says regular is opened without a stat of the name
 * first, and only what could not be opened as one is stat'ed (counts and
 * results as if the walk had stat'ed every name; with several threads,
 * the walking thread stats those later, and walks a directory found so
 * after the walk). The results
 * (and @p counts) are the same whatever @p threads is; only the order of the
 * result calls differs. The results and @p counts are updated under one
 * mutex, so ops->result may touch them without locking. The workers share
 * one table of every lexicon term's coordinates (im_sig_masks(), 4 bytes a
 * term), made before the walk and freed at the end.
 *
 * @return 0, -ECANCELED, -ENOMEM, -EINVAL if im_params_check(@p p) fails,
 *         or a negative errno if @p dirfd cannot be opened as a directory.
 *         Threads that cannot be started leave the work to fewer.
 */
int im_scan_sign(int dirfd, const struct im_lexicon *lex,
		 const struct im_params *p, unsigned threads,
		 const struct im_scan_ops *ops, struct im_scan_counts *counts);

/**
 * Walk and count document frequencies for building a lexicon, with
 * @p threads workers (each with its own struct im_df, merged at the end).
 * Terms come from im_signer_terms_at(), the signing path's own extraction;
 * documents with no term at all (empty, binary, unreadable) are not counted
 * in N. The caller owns *out (im_df_free()); *out is NULL on failure.
 * Of @p ops (may be NULL) only cancel, skip_dev and skip_ino are used, so
 * that the statistics come from exactly the files a signing scan reads.
 *
 * @return as im_scan_sign().
 */
int im_scan_df(int dirfd, const struct im_params *p, unsigned threads,
	       const struct im_scan_ops *ops, struct im_df **out,
	       struct im_scan_counts *counts);

/**
 * A first scan, in one pass: walk, read and tokenize every file once, count
 * document frequencies, build the lexicon from them (im_lexicon_build() with
 * @p p's nidf window and secondary cap), then sign each text from what was
 * kept of it. The results, their statuses and @p counts are exactly those of
 * im_scan_df() + im_lexicon_build() + im_scan_sign() over an unchanged tree,
 * without reading any file twice; ops->want, ops->dir and ops->cancel work
 * as there.
 *
 * Each worker keeps, per file, its result so far (about 350 bytes), its path
 * and, for a text, the ids of its unique terms in the worker's struct im_df
 * (4 bytes per term; im_df_add_ids()), so the lexicon's terms are found
 * again by number, never by hash alone: equal results whatever the term
 * hashes do. Past ops->spill_budget these go to an unnamed file in
 * ops->spill_dir (spool.h). After the walk the workers' counts are merged,
 * the lexicon is built and handed to ops->lexicon, and the same workers sign
 * what they kept, each with a table from its own ids to term numbers; every
 * result is delivered then (serialized, as im_scan_sign() does).
 *
 * If fewer than two documents have a term, no lexicon can be built: *lex is
 * NULL and the return value is 0: no result is delivered and @p counts are
 * what im_scan_df() gives; with ops->unsigned_results every result is
 * delivered (texts unsigned), counted as delivered, and the return value is
 * as while signing. Otherwise the caller owns *lex (im_lexicon_free()).
 *
 * @return as im_scan_sign(); also a negative errno from the spill file
 *         (creating or writing it), -EAGAIN if a lock cannot be made,
 *         ops->lexicon's value, or what
 *         im_lexicon_build() returns other than -EINVAL. Once ops->lexicon
 *         accepted the lexicon, *lex is set whatever the return value (a
 *         scan cancelled while signing still built it; the caller owns it);
 *         before that, *lex is NULL on failure.
 */
int im_scan_first(int dirfd, const struct im_params *p, unsigned threads,
		  const struct im_scan_ops *ops, struct im_lexicon **lex,
		  struct im_scan_counts *counts);

#endif
