/**
 * @file stage.h
 * The files that the batch stages exchange (/work/shared/SCALE.md): one
 * versioned, checksummed container for every kind of stage output, written
 * by one `imatch` process and read by the next, possibly on another machine.
 *
 * Layout (all integers little-endian):
 *
 *     0  magic "IMSTAGE\0"                       8 bytes
 *     8  version (IM_STAGE_VERSION)              u32
 *    12  kind (enum im_stage_kind)               u32
 *    16  part, nparts                            2 x u32
 *    24  key                                     u64
 *    32  records, each: u32 len, len bytes of payload
 *   end  count of records                        u64
 *        meta[IM_STAGE_META]                     IM_STAGE_META x u64
 *        XXH3_64bits of every byte before it     u64
 *
 * The key fingerprints what the content depends on (the parameters, the
 * lexicon), so that outputs of different runs are never mixed: readers that
 * combine files require equal keys. The meta words are kind-specific totals
 * known only once the records are written (so they sit in the trailer and
 * the file is written in one pass); each kind documents its own.
 *
 * Crash safety: a writer streams into PATH.tmp.PID and renames it over PATH
 * on commit, so a killed task leaves no file at PATH and a retried task
 * simply writes it again. The file is not fsync'ed: a stage output is always
 * recomputable, and a file torn by a power loss fails its checksum, so the
 * driver reruns the task that made it instead of trusting it.
 *
 * Memory: a writer holds a 64 KiB buffer; a reader maps the file read-only
 * and decodes records from the mapping. Neither opening (the checksum reads
 * every byte) nor a pass of im_stage_next() keeps more than about a MiB of a
 * file resident: the reader gives back the pages behind it, so a process
 * that streams many large files (the components stage, which must hold at
 * most 64 bytes per document) holds only its own state. Reading a page
 * again, as random access into records does, faults it in from the page
 * cache; im_stage_read() copies a record without the mapping.
 *
 * Thread-safety: a writer or reader belongs to one thread at a time;
 * different ones are independent.
 */
#ifndef IM_STAGE_H
#define IM_STAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* 2: key records name their holder only (its signatures stay in the
 * records). 3: coordinate keys are IM_KEY_COORD_LEN (4) bytes, not 8.
 * 4: band keys are IM_SKETCH_BAND_BYTES (3) bytes, not 4. 5: sketches
 * verify with a map (sketch.h). 6: key runs name their shard and links
 * files their partition, records fingerprint their list (stages given a
 * partial or mismatched set refuse it); 16 meta words, not 8. 7: document
 * records keep a fingerprint of the ctime (for `imatch state import`).
 * 8: document records keep the figures (im_doc_sigs.numbers). 9: tiny
 * sketches keep their terms' hashes and densified bins are remixed
 * (sketch.h), so band keys and records of 8 do not compare with 9's.
 * 10: tiny sketches keep 32-bit fingerprints of up to 26 terms, so a
 * record of 9 would be misread. 11: tiny sketches keep fingerprints of up
 * to 83 terms as wide as fit, led by the term's map position, so a record
 * of 10 would be misread. */
#define IM_STAGE_VERSION 11
#define IM_STAGE_META	 16
/** Most partitions a shuffle may use. */
#define IM_STAGE_MAX_PARTS 4096

enum im_stage_kind {
	IM_STAGE_MANIFEST = 1, /**< `imatch ls`: files of a tree */
	IM_STAGE_DF = 2,       /**< `imatch df`: document frequencies */
	IM_STAGE_RECORDS = 3,  /**< `imatch sign --records`: documents */
	IM_STAGE_KEYS = 4,     /**< `imatch sign --records`: candidate keys */
	IM_STAGE_LINKS = 5,    /**< `imatch links`: links from key groups */
	IM_STAGE_CLUSTERS = 6, /**< `imatch components`: clusters */
	IM_STAGE_EXPORT = 7,   /**< `imatch export --part`: output, in part */
};

/** The fixed part of a stage file, as written or read. */
struct im_stage_header {
	uint32_t kind; /**< enum im_stage_kind */
	uint32_t part; /**< this file's partition, < nparts */
	uint32_t nparts;
	uint64_t key;
};

/** The kind's name ("manifest", "df", ...), or NULL for an unknown kind. */
const char *im_stage_kind_name(uint32_t kind);

/**
 * The partition of a key hash among @p nparts (1..IM_STAGE_MAX_PARTS): the
 * high 32 bits scaled to the range, so that every partition count splits
 * the hash space evenly. Never fails.
 */
static inline uint32_t im_stage_part_of(uint64_t hash, uint32_t nparts)
{
	return (uint32_t)(((hash >> 32) * nparts) >> 32);
}

/* ---- Writing ------------------------------------------------------------- */

struct im_stage_writer;

/**
 * Start writing a stage file at @p path (into PATH.tmp.PID until committed).
 *
 * @return 0, -EINVAL for an unknown kind or part >= nparts, -ENOMEM, or the
 *         open's negative errno. The caller frees with im_stage_writer_free().
 */
int im_stage_writer_new(const char *path, const struct im_stage_header *h,
			struct im_stage_writer **out);

/**
 * Append one record. A write error is remembered and returned here and by
 * im_stage_writer_commit().
 *
 * @return 0, -EFBIG for a payload of 4 GiB or more, or a negative errno.
 */
int im_stage_writer_add(struct im_stage_writer *w, const void *payload,
			size_t len);

/** Set meta word @p i (< IM_STAGE_META) of the trailer; 0 unless set. */
void im_stage_writer_set_meta(struct im_stage_writer *w, unsigned i,
			      uint64_t v);

/**
 * Write the trailer and rename the file into place. After it the writer is
 * only good for im_stage_writer_free().
 *
 * @return 0 or a negative errno (then nothing is left at the temporary
 *         name and PATH is untouched).
 */
int im_stage_writer_commit(struct im_stage_writer *w);

/** Free; an uncommitted file is removed. Accepts NULL. */
void im_stage_writer_free(struct im_stage_writer *w);

/* ---- Reading ------------------------------------------------------------- */

struct im_stage_reader;

/**
 * Open and verify a stage file: magic, version, checksum, and that the
 * records fill the file exactly and number what the trailer says. Nothing is
 * handed out from a file that fails any check.
 *
 * @param why  if not NULL, receives a one-line reason on failure, without
 *             the path: "not an imatch stage file", "unsupported version N
 *             (made by an older|a newer imatch: ...)",
 *             "unknown kind N", "truncated", "bad checksum", "corrupt: ...",
 *             "not a regular file", or strerror() of the open's error.
 * @return 0, -EINVAL for a file that fails a check, -ENOMEM, or the open's
 *         negative errno. The caller frees with im_stage_reader_free().
 */
int im_stage_open(const char *path, struct im_stage_reader **out, char *why,
		  size_t why_len);

void im_stage_reader_free(struct im_stage_reader *r);

const struct im_stage_header *im_stage_header(const struct im_stage_reader *r);
/** The path the reader was opened with, for messages; owned by @p r. */
const char *im_stage_path(const struct im_stage_reader *r);
uint64_t im_stage_count(const struct im_stage_reader *r);
uint64_t im_stage_meta(const struct im_stage_reader *r, unsigned i);

/**
 * The next record's payload, borrowed from the mapping (valid until the
 * reader is freed). @return true, or false after the last record.
 */
bool im_stage_next(struct im_stage_reader *r, const uint8_t **payload,
		   size_t *len);

/** Start again from the first record. */
void im_stage_rewind(struct im_stage_reader *r);

/**
 * Give back all pages of the mapping (madvise MADV_DONTNEED): reading on
 * faults them in again from the page cache. Opening and im_stage_next()
 * already give back what they passed; this is for pages that random access
 * into borrowed payloads brought in. Never fails.
 */
void im_stage_drop(struct im_stage_reader *r);

/**
 * Copy the @p len bytes of a payload that im_stage_next() handed out
 * (@p payload, or a pointer into it) into @p buf with pread() on the file
 * instead of through the mapping, so that nothing of it becomes resident:
 * for random reads of a large file, where each page touched through the
 * mapping would stay (with the pages the kernel maps around it). The first
 * call opens the file again by its path and keeps the descriptor until
 * im_stage_reader_free().
 *
 * @return 0, -EINVAL for bytes outside the records, -ESTALE when the file
 *         at the path is no longer the one opened (another file, even of
 *         the same size), or the open's or read's negative errno (-EIO for
 *         a short read).
 */
int im_stage_read(struct im_stage_reader *r, const uint8_t *payload, size_t len,
		  void *buf);

/* ---- Partition buffers ---------------------------------------------------
 *
 * The map side of a shuffle: items of one fixed size collected per
 * partition, to be sorted and written as one run each.
 */

struct im_stage_parts {
	uint32_t nparts;
	size_t item; /**< bytes per item */
	struct im_stage_part {
		void *v; /**< n items */
		size_t n, cap;
	} * p;
};

/** @return 0 or -ENOMEM. Release with im_stage_parts_release(). */
int im_stage_parts_init(struct im_stage_parts *pp, uint32_t nparts,
			size_t item);
/** Copy @p item into partition @p part (< nparts). @return 0 or -ENOMEM. */
int im_stage_parts_push(struct im_stage_parts *pp, uint32_t part,
			const void *item);
void im_stage_parts_release(struct im_stage_parts *pp);

/* ---- Merging sorted runs -------------------------------------------------
 *
 * The reduce side of a shuffle: records of several runs, each sorted by
 * @p cmp, handed out in one sorted sequence (a binary heap over the runs'
 * current records; ties go to the run given first).
 */

/** Compare two payloads; the order the runs are sorted in. */
typedef int (*im_stage_cmp_fn)(const uint8_t *a, size_t alen, const uint8_t *b,
			       size_t blen);

struct im_stage_merge;

/**
 * Merge @p n runs (borrowed; they must outlive the merge and not be read
 * meanwhile). @return 0 or -ENOMEM.
 */
int im_stage_merge_new(struct im_stage_reader *const *runs, size_t n,
		       im_stage_cmp_fn cmp, struct im_stage_merge **out);

/**
 * The next record in order, borrowed as im_stage_next() says, and in
 * *@p run the index of the run it came from (may be NULL).
 *
 * @return 1, 0 after the last, or -EINVAL when run *@p run is out of
 *         order.
 */
int im_stage_merge_next(struct im_stage_merge *m, const uint8_t **payload,
			size_t *len, size_t *run);

void im_stage_merge_free(struct im_stage_merge *m);

/* ---- Payload encoding ----------------------------------------------------
 *
 * Records are built into a caller-owned byte buffer and decoded with a
 * bounds-checked cursor: a short payload sets the cursor's error flag and
 * yields zeros instead of reading past the record.
 */

struct im_stage_buf {
	uint8_t *p;
	size_t len, cap;
	bool oom; /**< an append failed: the content is incomplete */
};

void im_stage_buf_put(struct im_stage_buf *b, const void *src, size_t n);
void im_stage_buf_u32(struct im_stage_buf *b, uint32_t v);
void im_stage_buf_u64(struct im_stage_buf *b, uint64_t v);
void im_stage_buf_release(struct im_stage_buf *b);

struct im_stage_cur {
	const uint8_t *p, *end;
	bool bad; /**< a read went past the end */
};

static inline struct im_stage_cur im_stage_cur(const uint8_t *p, size_t len)
{
	return (struct im_stage_cur){p, p + len, false};
}

/** @return @p n bytes, or NULL (and bad set) if fewer remain. */
const uint8_t *im_stage_get(struct im_stage_cur *c, size_t n);
uint32_t im_stage_get_u32(struct im_stage_cur *c);
uint64_t im_stage_get_u64(struct im_stage_cur *c);

/** Bytes not yet read. */
static inline size_t im_stage_left(const struct im_stage_cur *c)
{
	return (size_t)(c->end - c->p);
}

#endif
