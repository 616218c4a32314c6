/**
 * @file state.h
 * The signature cache the daemon keeps in its state directory, so that a
 * restart re-reads only the files whose size, mtime, inode or ctime changed
 * (DESIGN §4).
 *
 * One file holds, for every file of the source, its path (relative to the
 * source), size, mtime in nanoseconds, inode number, a fingerprint of its
 * ctime (im_state_ctime_fold()) and its struct im_doc_sigs (its size and
 * mtime_ns are the entry's). The ctime is what tells a file rewritten in
 * place with its size kept and its old mtime put back (`cp -p`, `touch -d`)
 * from the one that was read: no user can set it, and every write and
 * utimensat(2) moves it. The file starts with
 * a magic, a version and a 64-bit "key" that fingerprints everything a
 * signature depends on (the signing parameters and the lexicon's bytes, see
 * im_state_key()); a cache whose key differs from the running daemon's was
 * made with other parameters and must not be reused, except for the entries
 * no lexicon or signing parameter changes (a binary file's, a file too big
 * to read's, a failed extraction's), when its "files key" (what those
 * depend on, im_state_files_key()) is the daemon's: im_state_load_files().
 * The file ends with an XXH3-64 checksum of every byte before it.
 *
 * Crash safety: im_state_writer_commit() writes PATH.tmp.PID, fsyncs it,
 * renames it over PATH and fsyncs the directory, so a crash at any point
 * leaves either the old file or the new one; a leftover PATH.tmp.* from a
 * crash is never read. Loading refuses a truncated, corrupt or unknown-version
 * file with a reason, and never deletes or rewrites it.
 *
 * Layout (little-endian):
 *   "IMSTATE\0"  u32 version  u32 ncoords_max  u64 key  u64 files_key
 *   u64 count
 *   count × { u32 path_len, path bytes, u64 size, i64 mtime_ns, u64 ino,
 *             u32 ctime_fold, u8 status, u8 ncoords, u8 exact_valid,
 *             u32 err_format, u32 valid, u32 unique_terms, 16 bytes exact,
 *             IM_SKETCH_RECORD bytes of sketch (im_sketch_encode()),
 *             u64 numbers, 20 bytes for each set bit of valid }
 *   u64 xxh3_64(all of the above)
 * err_format holds err in its low 24 bits (an errno, or the failure reason)
 * and the document's format (enum im_format) in its top 8.
 *
 * Memory: a loaded cache is the file mapped read-only plus about 10.8 bytes
 * per entry (two hash slots, by path and by inode, each holding the entry's
 * 4-byte offset, 8 past 4 GiB, at a load of 3/4, and the offset of every
 * 64th entry for im_state_at());
 * entries are decoded on demand, and
 * im_state_free() gives everything back to the system. The pages the load
 * read to check the file are left to the page cache (MADV_DONTNEED): only
 * what is read afterwards is resident.
 *
 * Thread-safety: a struct im_state is immutable once loaded and may be read
 * by any number of threads. A writer is used by one thread at a time.
 */
#ifndef IM_STATE_H
#define IM_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "params.h"
#include "sig.h"

/* 2: the sketch joined each entry. 3: the sketch verifies with a map.
 * 4: the files key. 5: the ctime's fingerprint. 6: the figures
 * (im_doc_sigs.numbers), which removal compares. 7: a sketch of up to
 * IM_SKETCH_TINY terms keeps their hashes, not map bits, and densified
 * bins are remixed (an older sketch would be misread). 8: a tiny sketch
 * keeps 32-bit fingerprints, of up to 26 terms, not 13 hashes of 64 bits.
 * 9: a tiny sketch holds up to 83 terms in fingerprints as wide as fit,
 * led by the term's map position (a sketch of 8 would be misread). */
#define IM_STATE_VERSION 9

/** One cached file, decoded by im_state_find() / im_state_at(). */
struct im_state_entry {
	const char *path; /**< into the loaded file: NOT NUL-terminated */
	size_t path_len;
	uint64_t size;
	int64_t mtime_ns;
	uint64_t ino;
	uint32_t ctime_fold; /**< im_state_ctime_fold() of the file read */
	struct im_doc_sigs d;
};

struct im_state;

/* ---- Files ----------------------------------------------------------------- */

/**
 * The fingerprint of @p st's ctime an entry keeps: the two halves of the
 * nanoseconds since the epoch folded by XOR into 32 bits. Two ctimes less
 * than 2^32 ns (4.29 s) apart with the same high half always differ in it;
 * others collide at a rate of 2^-32, and a collision matters only for a
 * file that also kept its size, mtime and inode. Never fails.
 */
static inline uint32_t im_state_ctime_fold(const struct stat *st)
{
	uint64_t ns = (uint64_t)st->st_ctim.tv_sec * 1000000000u +
		      (uint64_t)st->st_ctim.tv_nsec;

	return (uint32_t)ns ^ (uint32_t)(ns >> 32);
}

/**
 * Whether @p e describes the file @p st shows: the same size, mtime,
 * inode and ctime (im_state_ctime_fold()). Then reading the file again
 * would give e->d; whether e->d may be used at all (its status, the
 * cache's key) is the caller's to judge. Never fails.
 */
static inline bool im_state_entry_fits(const struct im_state_entry *e,
				       const struct stat *st)
{
	return e->size == (uint64_t)st->st_size &&
	       e->mtime_ns == (int64_t)st->st_mtim.tv_sec * 1000000000 +
				      st->st_mtim.tv_nsec &&
	       e->ino == (uint64_t)st->st_ino &&
	       e->ctime_fold == im_state_ctime_fold(st);
}

/**
 * Whether @p e agrees with the limit @p max_size (0: none) its file is read
 * under: an entry says IM_DOC_TOO_BIG exactly when the file is over it. The
 * cache's keys leave max_size out (im_state_key()), so that a new limit
 * costs a read of the files it moves across only; an entry that disagrees
 * is not used. Never fails.
 */
static inline bool im_state_entry_within(const struct im_state_entry *e,
					 uint64_t max_size)
{
	bool over = max_size && e->size > max_size;

	return over == (e->d.status == IM_DOC_TOO_BIG);
}

/**
 * Whether an entry of @p status (enum im_doc_status) holds what no lexicon
 * or signing parameter changes: a binary file's, a file too big to read's,
 * a failed extraction's. The files key alone covers those
 * (im_state_files_key(), im_state_load_files()).
 */
static inline bool im_state_lexicon_free(int status)
{
	return status == IM_DOC_BINARY || status == IM_DOC_TOO_BIG ||
	       status == IM_DOC_FAILED;
}

/* ---- Keys ---------------------------------------------------------------- */

/**
 * The fingerprint of what signatures depend on: every signing parameter of
 * @p p (not the ones that only choose files, like hidden, nor max_size,
 * which each entry is checked against: im_state_entry_within()), the -o
 * filter list (a filter makes a document of a file), and @p lex_key, the
 * hash of the lexicon's bytes (im_state_file_key()). Never fails.
 */
uint64_t im_state_key(const struct im_params *p, uint64_t lex_key);

/**
 * The key of the batch stages' records and candidate keys
 * (tools/cmd_cluster.c): im_state_key() with max_size in it, since a stage
 * file does not say under which limit its files were found too big, and
 * files of two limits must not mix. (The same value im_state_key() had
 * while it held max_size.) Never fails.
 */
uint64_t im_state_stage_key(const struct im_params *p, uint64_t lex_key);

/**
 * The lex_key of a tree that has no lexicon (fewer than two documents with
 * a term): its cache holds no signature, only what no lexicon changes (the
 * exact hashes of binary files, statuses), and a tree that gets a lexicon
 * takes those entries alone from it.
 */
#define IM_STATE_NO_LEXICON 0

/**
 * The fingerprint of what a binary file's, a too big file's and a failed
 * extraction's entries depend on: the -o filter list (and the format; the
 * limit of a too big one is checked per entry, im_state_entry_within()).
 * Never fails.
 */
uint64_t im_state_files_key(const struct im_params *p);

/**
 * XXH3-64 of the whole content of the file at @p path.
 * @return 0 or a negative errno from open/read, -ENOMEM.
 */
int im_state_file_key(const char *path, uint64_t *out);

/* ---- Loading ------------------------------------------------------------- */

/**
 * Load the cache at @p path. The caller owns *out (im_state_free()).
 *
 * @param key  the running key; a file with another key is refused with
 *             -ESTALE (it is valid, only not usable).
 * @param why  if not NULL, receives a one-line reason on failure
 *             ("truncated", "truncated while read" (cut short under the
 *             load, see im_state_damaged()), "bad checksum", "not an
 *             imatchfs state file", "unsupported version N", "made by an
 *             older imatchfs (version N)", "made with other parameters or
 *             another lexicon", or strerror).
 * @return 0; -ENOENT (or another open error) when there is no file;
 *         -EINVAL for a corrupt file or one of a newer version; -ESTALE
 *         for another key or an older version; -ENOMEM.
 */
int im_state_load(const char *path, uint64_t key, struct im_state **out,
		  char *why, size_t why_len);

/**
 * im_state_load(), and also a cache of another key whose files key is
 * @p files_key (not 0): that one is loaded *partial* (im_state_partial()),
 * and only its entries with status IM_DOC_BINARY, IM_DOC_TOO_BIG or
 * IM_DOC_FAILED may be used; @p why then still says why the rest may not.
 * @return as im_state_load(); 0 for a partial cache too.
 */
int im_state_load_files(const char *path, uint64_t key, uint64_t files_key,
			struct im_state **out, char *why, size_t why_len);

/** Whether @p st was loaded by its files key alone. */
bool im_state_partial(const struct im_state *st);

/**
 * Whether @p st's file was cut short under it (another program truncated
 * it in place). A read of the missing pages raises SIGBUS; this module
 * handles it (a process-wide SIGBUS handler, installed at the first load,
 * which passes any other SIGBUS on to the disposition before it): the
 * mapping then reads as zeros, and im_state_find(), im_state_find_moved(),
 * im_state_at() and im_state_each_path() find nothing, as in an empty
 * cache. Up to 16 loaded caches are guarded at once; more are read as
 * before.
 */
bool im_state_damaged(const struct im_state *st);

/** The key and the files key @p st was written with (0 for a files key
 *  never set); each pointer may be NULL. */
void im_state_keys(const struct im_state *st, uint64_t *key,
		   uint64_t *files_key);

void im_state_free(struct im_state *st);

/** Entries held. */
size_t im_state_count(const struct im_state *st);

/**
 * Decode the entry for @p path into *out (its path borrowed from @p st).
 * @return 0, or -ENOENT if @p path is not cached.
 */
int im_state_find(const struct im_state *st, const char *path,
		  struct im_state_entry *out);

/**
 * Decode into *out an entry of inode @p ino whose path ends in the component
 * @p name: the file of a directory renamed or moved since (same inode, same
 * name, another path). The caller checks it with im_state_entry_fits() as for
 * im_state_find(). @return 0, or -ENOENT.
 */
int im_state_find_moved(const struct im_state *st, uint64_t ino,
			const char *name, struct im_state_entry *out);

/** Decode the @p i-th entry, in file order (walking up to 63 entries
 *  before it). @return 0 or -ENOENT. */
int im_state_at(const struct im_state *st, size_t i,
		struct im_state_entry *out);

/**
 * Call @p fn with the path of every entry (borrowed from @p st, NOT
 * NUL-terminated: @p len bytes) and its index for im_state_at(), in file
 * order, until @p fn returns non-zero. Nothing else is decoded, so a pass
 * over every path costs little more than reading them.
 * @return the last value @p fn returned, or 0.
 */
int im_state_each_path(const struct im_state *st,
		       int (*fn)(const char *path, size_t len, size_t i,
				 void *arg),
		       void *arg);

/* ---- Writing ------------------------------------------------------------- */

struct im_state_writer;

/**
 * Start a new cache image with key @p key, built in memory. Nothing touches
 * the disk before im_state_writer_commit().
 *
 * @return 0 or -ENOMEM. The caller frees with im_state_writer_free().
 */
int im_state_writer_new(uint64_t key, struct im_state_writer **out);

/** Write @p files_key (im_state_files_key()) in the image's header, so that
 *  a daemon of other signing parameters may use its files' entries
 *  (im_state_load_files()); without it, none may. */
void im_state_writer_set_files_key(struct im_state_writer *w,
				   uint64_t files_key);

/** Append one entry (copies everything); @p ctime_fold is
 *  im_state_ctime_fold() of the file as it was read. @return 0, -EINVAL
 *  for an empty @p path, or -ENOMEM. */
int im_state_writer_add(struct im_state_writer *w, const char *path,
			uint64_t size, int64_t mtime_ns, uint64_t ino,
			uint32_t ctime_fold, const struct im_doc_sigs *d);

/**
 * Write the image to @p path crash-safely (tmp, fsync, rename, fsync dir).
 * The writer stays usable only for im_state_writer_free().
 *
 * @return 0 or a negative errno from the failing call (the old file, if any,
 *         is then untouched and the tmp file removed).
 */
int im_state_writer_commit(struct im_state_writer *w, const char *path);

void im_state_writer_free(struct im_state_writer *w);

#endif
