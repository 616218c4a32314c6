/**
 * @file exact.h
 * The exact-copy tier, size first (DESIGN §3.7; issue 8 item 1): two files
 * can only be byte-identical if they have the same size, so a file whose size
 * no other file has needs no hash. Documents are hashed anyway, in the read
 * that extracts their text; a binary file (one no extractor reads) is read
 * only as far as sniffing needs when im_params.defer_binary is set, and
 * hashed here once a second file of its size turns up.
 *
 * Deferring never changes a result: byte-identical files are sniffed alike,
 * so a deferred file can only be identical to another file of its size; once
 * two files share a size the deferred ones among them are hashed and linked
 * as before. A file deleted later is not taken out of the counts: a size
 * once seen twice keeps hashing its newcomers (harmless, and it keeps the
 * table free of per-file state).
 *
 * Cost: struct im_sizes holds one entry per distinct size (24 bytes, open
 * addressing), nothing per file. im_exact_fill() makes one pass over an index
 * and reads only the deferred files whose size is shared.
 *
 * Thread-safety: im_exact_hash_at() is reentrant. A struct im_sizes is not
 * locked: one thread at a time (the daemon holds its tree lock).
 * im_exact_fill() must be the only user of the index while it runs its puts.
 */
#ifndef IM_EXACT_H
#define IM_EXACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sig.h"

struct im_index;

/* ---- Which files ------------------------------------------------------------ */

/** Whether @p d takes part in the exact tier: read (signed, rejected,
 *  binary or failed extraction) and not empty. */
bool im_exact_tier(const struct im_doc_sigs *d);

/** Whether @p d is in the tier but was not hashed (a binary file read only
 *  for sniffing under im_params.defer_binary). */
bool im_exact_deferred(const struct im_doc_sigs *d);

/* ---- Hashing one file -------------------------------------------------------- */

/**
 * Hash the bytes of @p path below @p dirfd (im_open_beneath(): no symlink
 * followed) into @p exact, the same XXH3-128 (canonical) the signer gives, if
 * the file still has @p size and @p mtime_ns, the values it was signed with.
 *
 * @param bytes  if not NULL, receives the bytes read.
 * @return 0; -ESTALE when the file changed (size, mtime, or its length while
 *         read); -ENOMEM; or the errno of open or read.
 */
int im_exact_hash_at(int dirfd, const char *path, uint64_t size,
		     int64_t mtime_ns, uint8_t exact[16], uint64_t *bytes);

/** A file as it was seen (walked): what im_exact_hash_seen_at() checks
 *  before it reads. */
struct im_exact_seen {
	uint64_t size;
	int64_t mtime_ns;
	int64_t ctime_ns; /**< 0: not checked */
	uint64_t dev;	  /**< with ino */
	uint64_t ino;	  /**< 0: dev and ino not checked */
};

/** The head block: same-size files are told apart by their first
 *  IM_EXACT_HEAD bytes before any is read whole. */
#define IM_EXACT_HEAD 4096

/**
 * Hash the first @p limit bytes of @p path below @p dirfd (no symlink
 * followed), if it is still the regular file @p seen describes: the same
 * size and mtime, and ctime, device and inode where @p seen gives them.
 *
 * A file of at most @p limit bytes is read to its end, and refused if its
 * length is not @p seen->size: *exact is then the XXH3-128 of the whole
 * file, as im_exact_hash_at() gives it. A longer file yields the XXH3-128
 * of its first @p limit bytes, fit only to tell files apart (two files
 * whose heads differ are not copies); equal heads prove nothing.
 *
 * @param buf      the caller's read buffer, @p bufsize bytes (at least
 *                 IM_EXACT_HEAD); afterwards it holds the first
 *                 min(size, limit) bytes when those fit in it.
 * @param bytes    if not NULL, receives the bytes read.
 * @return 0; -ESTALE when the file is not as seen (or its length changed
 *         while read); -EINVAL if @p bufsize < IM_EXACT_HEAD; or the errno
 *         of open or read. Reentrant: one buffer per thread.
 */
int im_exact_hash_seen_at(int dirfd, const char *path,
			  const struct im_exact_seen *seen, uint64_t limit,
			  void *buf, size_t bufsize, uint8_t exact[16],
			  uint64_t *bytes);

/** The XXH3-128 (canonical) of @p len bytes at @p buf: the hash
 *  im_exact_hash_at() gives of a file holding them. */
void im_exact_hash_buf(const void *buf, size_t len, uint8_t exact[16]);

/* ---- Counting sizes ------------------------------------------------------------ */

/** No id: a file whose hash is already known. */
#define IM_SIZES_NONE UINT64_MAX

struct im_sizes;

/** An empty table. @return 0 or -ENOMEM; free with im_sizes_free(). */
int im_sizes_new(struct im_sizes **out);
void im_sizes_free(struct im_sizes *t);

/**
 * Count one file of the tier with @p size (not 0). @p id is the caller's
 * name for it when its hash was deferred (IM_SIZES_NONE when it is hashed).
 * @p todo[0 .. *n) receives the ids to hash now: this file's when its size
 * was seen before, and the one deferred file that had the size alone until
 * now. Each id is handed out once.
 *
 * @return 0 or -ENOMEM (the table unchanged, *n 0).
 */
int im_sizes_add(struct im_sizes *t, uint64_t size, uint64_t id,
		 uint64_t todo[2], size_t *n);

/** How many files were counted with @p size. */
uint64_t im_sizes_count(const struct im_sizes *t, uint64_t size);

/** Distinct sizes held. */
size_t im_sizes_len(const struct im_sizes *t);

/* ---- After a scan ------------------------------------------------------------- */

/** What im_exact_fill() did. */
struct im_exact_stats {
	uint64_t deferred; /**< tier files found unhashed */
	uint64_t hashed;   /**< of those, hashed: their size is shared */
	uint64_t bytes;	   /**< bytes read to hash them */
	uint64_t changed;  /**< changed or unreadable since the scan: left
			        unhashed */
};

/**
 * Complete the tier of @p idx after a scan with im_params.defer_binary:
 * hash every deferred document whose size another document of the tier has
 * and put it again with its hash; the others stay unhashed (no file can be
 * identical to them). Paths are relative to @p dirfd.
 *
 * @param st  may be NULL.
 * @return 0 or -ENOMEM (documents already put again stay).
 */
int im_exact_fill(struct im_index *idx, int dirfd, struct im_exact_stats *st);

#endif
