/**
 * @file stage_rec.h
 * The payloads of the stage files (stage.h) that the tools define
 * themselves: the manifest of `imatch ls`, the document frequencies of
 * `imatch df` and the parts of `imatch export --part`. The payloads of the
 * detection stages (sign, links, components) are core's (records.h).
 *
 * These files come back from shared storage, from other runs and other
 * versions: the container's checksum says the bytes are the ones written,
 * not that the records hold what this version wrote. So decoders check
 * lengths and return -EINVAL for a payload that does not decode, never
 * reading past it; what decodes encodes back to the very same payload.
 * Encoders append to a caller-owned buffer (check b->oom after).
 *
 * Thread-safety: pure functions.
 */
#ifndef IMATCH_STAGE_REC_H
#define IMATCH_STAGE_REC_H

#include <stddef.h>
#include <stdint.h>

#include "stage.h"

/* ---- Manifest (IM_STAGE_MANIFEST) -------------------------------------------- */

/** One file the walk listed. */
struct man_rec {
	uint64_t size, mtime_ns, ino;
	uint32_t shard;	  /**< its shard list (0 without --shards) */
	const char *path; /**< relative to the root; decoded: into the
			       payload, NOT NUL-terminated */
	size_t path_len;
};

/** Layout: u64 size, u64 mtime_ns, u64 ino, u32 shard, then the path. */
void man_rec_encode(struct im_stage_buf *b, const struct man_rec *r);

/** @return 0, or -EINVAL for a short payload or an empty path. */
int man_rec_decode(const uint8_t *p, size_t len, struct man_rec *r);

/* ---- Document frequencies (IM_STAGE_DF) -------------------------------------- */

/**
 * Layout: u32 the documents that hold the term, then the term. A run holds
 * each term once, in the order of df_rec_cmp().
 */
void df_rec_encode(struct im_stage_buf *b, uint32_t count, const char *term,
		   size_t len);

/** @return 0, or -EINVAL for a short payload or an empty term. *term
 *  points into @p p, NOT NUL-terminated. */
int df_rec_decode(const uint8_t *p, size_t len, uint32_t *count,
		  const char **term, size_t *term_len);

/** Byte order of terms, a prefix first. */
int df_term_cmp(const char *a, size_t al, const char *b, size_t bl);

/** The order of df runs: by term, the count aside. Payloads shorter than a
 *  count sort by their length, ahead of the rest. */
int df_rec_cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl);

/* ---- Export parts (IM_STAGE_EXPORT) ------------------------------------------ */

/**
 * Layout: u32 key length, the key, then the text (the bytes of the output).
 * A part holds its records in the order of xp_rec_cmp(), each key once.
 */
void xp_rec_encode(struct im_stage_buf *b, const void *key, size_t klen,
		   const void *text, size_t tlen);

/** @return 0, or -EINVAL for a payload shorter than its key. *key and
 *  *text point into @p p. */
int xp_rec_decode(const uint8_t *p, size_t len, const uint8_t **key,
		  size_t *klen, const uint8_t **text, size_t *tlen);

/** The order of export parts: by key bytes, a prefix first. A payload that
 *  does not decode sorts as an empty key. */
int xp_rec_cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl);

#endif
