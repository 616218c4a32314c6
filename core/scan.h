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
 * Paths handed to callbacks are relative to the source, without a leading
 * "./", components joined with '/'. They may contain any byte but NUL.
 *
 * Thread-safety: the functions are reentrant. Callbacks named "walker" run in
 * the calling thread; "result" callbacks run in worker threads but never two
 * at once (the scanner serializes them), in no particular order.
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
	uint64_t files;    /**< regular files handed on */
	uint64_t dirs;     /**< directories entered (the root included) */
	uint64_t hidden;   /**< names skipped because they begin with '.' */
	uint64_t other;    /**< symlinks, devices, sockets, fifos: skipped */
	uint64_t errors;   /**< entries or directories that could not be read */
	uint64_t bytes;    /**< bytes of the files that were read */
	uint64_t by_status[5]; /**< results per enum im_doc_status */
};

/** Called by the walker for each directory (the root is ""), before its files. */
typedef int (*im_walk_dir_cb)(const char *path, const struct stat *st, void *arg);
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
};

/**
 * Walk the tree under @p dirfd (not closed; its offset is not used) depth
 * first, directories in no particular order.
 *
 * @return 0, a callback's non-zero value, or -ENOMEM. Unreadable
 *         subdirectories are counted in @p counts->errors, not fatal.
 */
int im_walk(int dirfd, const struct im_params *p, const struct im_walk_ops *ops,
	    struct im_scan_counts *counts);

struct im_scan_ops {
	/** Walker thread: return false to leave a file out (served from a
	 *  cache, say). NULL means every file. */
	bool (*want)(const char *path, const struct stat *st, void *arg);
	/** Worker thread, serialized: one signed (or skipped) file. @p st is the
	 *  fstat of the opened file when it could be opened, else the walker's. */
	void (*result)(const char *path, const struct stat *st,
		       const struct im_doc_sigs *d, void *arg);
	/** Walker thread, may be NULL: each directory, as im_walk_ops.dir. */
	im_walk_dir_cb dir;
	void *arg;
	dev_t skip_dev;
	ino_t skip_ino;
	/** If not NULL and set to true by another thread, the scan stops early. */
	const volatile bool *cancel;
};

/**
 * Walk and sign every file with @p threads workers (0 = one per online CPU).
 *
 * @return 0, -ECANCELED, or -ENOMEM.
 */
int im_scan_sign(int dirfd, const struct im_lexicon *lex,
		 const struct im_params *p, unsigned threads,
		 const struct im_scan_ops *ops, struct im_scan_counts *counts);

/**
 * Walk and count document frequencies for building a lexicon, with
 * @p threads workers (each with its own struct im_df, merged at the end).
 * The caller owns *out (im_df_free()).
 *
 * @return 0, -ECANCELED, or -ENOMEM.
 */
int im_scan_df(int dirfd, const struct im_params *p, unsigned threads,
	       const volatile bool *cancel, struct im_df **out,
	       struct im_scan_counts *counts);

#endif
