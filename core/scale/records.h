/**
 * @file records.h
 * The payloads of the detection stages' files (SCALE.md, stages sign, links
 * and components), encoded into and decoded from stage records (stage.h).
 *
 * Documents are named across stages by (shard, index): the shard's number
 * and the document's position in its list. The components stage turns them
 * into dense ids (the documents of shard 0, then of shard 1, ...), so no
 * stage before it needs to know how many documents the other shards hold.
 *
 * Keys: two documents are candidates when they hold the same candidate key
 * of the live index (im_doc_keys(), index.h). A key file holds one record
 * per (key, holder) sorted by key, then by the holder's path, so that each
 * group arrives in the path order im_group_links() verifies it in; files
 * are partitioned by im_stage_part_of(XXH3 of kind, k and the key bytes).
 *
 * Decoders check lengths and values and return -EINVAL for a payload that
 * does not decode; they never read past it.
 *
 * Thread-safety: pure functions.
 */
#ifndef IM_RECORDS_H
#define IM_RECORDS_H

#include <stddef.h>
#include <stdint.h>

#include <stdbool.h>

#include "index.h"
#include "sig.h"
#include "stage.h"

/* ---- Documents (IM_STAGE_RECORDS) ------------------------------------------ */

/** What the state file keeps of a document, and its path. */
struct im_stage_doc {
	const char *path; /**< decoded: into the payload, NOT NUL-terminated */
	size_t path_len;
	uint64_t size;
	int64_t mtime_ns;
	uint64_t ino;
	uint32_t ctime_fold; /**< im_state_ctime_fold() of the file read */
	struct im_doc_sigs d;
};

/**
 * Append the encoding of @p doc to @p b (check b->oom after).
 *
 * Layout: u64 size, u64 mtime_ns, u64 ino, u32 ctime_fold, u8 status,
 * u8 ncoords, u8 exact_valid, u8 format, u32 err, u32 valid,
 * u32 unique_terms, 16 bytes exact, 20 bytes per set bit of valid (below
 * ncoords), IM_SKETCH_RECORD bytes of sketch (sketch.h), u64 numbers
 * (the figures, sig.h), then the path.
 */
void im_stage_doc_encode(struct im_stage_buf *b,
			 const struct im_stage_doc *doc);

/** @return 0 or -EINVAL. doc->path points into @p p. */
int im_stage_doc_decode(const uint8_t *p, size_t len, struct im_stage_doc *doc);

/** True when the document takes part in the relation (index.h). */
static inline int im_stage_doc_relates(const struct im_doc_sigs *d)
{
	return d->status == IM_DOC_SIGNED || d->status == IM_DOC_REJECTED;
}

/* ---- Keys (IM_STAGE_KEYS) -------------------------------------------------- */

/**
 * One candidate key of one document (im_doc_keys(), index.h): the holder
 * (shard, index) and the path that orders a key's holders. What verifying a
 * pair needs (im_doc_link(): status, exact hash, sketch) stays in the
 * holder's record, which a links task looks up only for the members of
 * groups of two or more: most keys are held once, and a key record is some
 * 40 bytes instead of 190 with the sketch.
 */
struct im_stage_key {
	struct im_cand_key key;
	uint32_t shard, index;
	const char *path; /**< borrowed, NOT NUL-terminated */
	size_t path_len;
};

/** Make the key record of document (@p shard, @p index) at @p path for
 *  @p key. Borrows @p path. */
void im_stage_key_make(struct im_stage_key *k, const struct im_cand_key *key,
		       uint32_t shard, uint32_t index, const char *path);

/**
 * Layout: u8 kind, u8 k, u8 len, len bytes, u32 shard, u32 index, then the
 * path.
 */
void im_stage_key_encode(struct im_stage_buf *b, const struct im_stage_key *k);
/** @return 0 or -EINVAL. k->path points into @p p. */
int im_stage_key_decode(const uint8_t *p, size_t len, struct im_stage_key *k);

/** Order of key runs: the key (kind, k, bytes), then the holder's path. */
int im_stage_key_cmp(const struct im_stage_key *a,
		     const struct im_stage_key *b);

/** Same candidate key, whoever holds it. */
bool im_stage_key_same(const struct im_stage_key *a,
		       const struct im_stage_key *b);

/** The partition of a key among @p nparts. */
uint32_t im_stage_key_part(const struct im_stage_key *k, uint32_t nparts);

/* ---- Links (IM_STAGE_LINKS) ------------------------------------------------ */

struct im_stage_link {
	uint32_t a_shard, a_index, b_shard, b_index;
	uint8_t exact; /**< 1: identical bytes; 0: near */
	double similarity;
};

/** Layout: 4 x u32, u8 exact, u64 bits of the similarity. */
void im_stage_link_encode(struct im_stage_buf *b,
			  const struct im_stage_link *l);
/** @return 0 or -EINVAL. */
int im_stage_link_decode(const uint8_t *p, size_t len, struct im_stage_link *l);

/* ---- Clusters (IM_STAGE_CLUSTERS) ------------------------------------------- */

/**
 * Layout: 20 bytes name, u32 size, then size x u32 dense ids in increasing
 * order. Decoding hands out a pointer to the ids' bytes (little-endian u32s
 * at @p ids, read them with im_stage_cluster_member()).
 */
void im_stage_cluster_encode(struct im_stage_buf *b, const struct im_sig *name,
			     const uint32_t *ids, uint32_t n);
int im_stage_cluster_decode(const uint8_t *p, size_t len, struct im_sig *name,
			    const uint8_t **ids, uint32_t *n);
uint32_t im_stage_cluster_member(const uint8_t *ids, uint32_t i);

#endif
