/**
 * @file lexicon.h
 * Collection statistics and the I-Match lexicons (DESIGN §3.2, papers/001 §3
 * and §4.1, papers/000 §3).
 *
 * A struct im_df counts, for every term, the number of documents holding it.
 * Its memory grows with the vocabulary, never with the total size of the
 * documents: about 80 bytes a term (3.4 MB for the 42,501 terms of 2,684
 * documentation pages), and a 2 MiB table of slots from 768 terms on. From it im_lexicon_build() takes, with
 * nidf(t) = log(N / df(t)) / log(N):
 *   - the primary lexicon L: nidf in [lo, hi];
 *   - the secondary lexicon B: nidf > hi, ranked by increasing nidf (the most
 *     frequent first, ties broken by the term's bytes) and cut to
 *     secondary_cap terms.
 *
 * The lexicon file is versioned and checksummed (see lexicon.c for the
 * layout); it is written to a temporary file, fsync'ed and renamed, so a crash
 * leaves either the old file or the new one. Loading refuses a file that is
 * truncated, has a bad checksum or an unknown version.
 *
 * Thread-safety: a struct im_df is not thread-safe (give each thread its own
 * and im_df_merge() them). A built or loaded struct im_lexicon is immutable:
 * any number of threads may query it at once.
 */
#ifndef IM_LEXICON_H
#define IM_LEXICON_H

#include <stddef.h>
#include <stdint.h>

#include "text.h"

/* ---- Document frequencies ------------------------------------------------ */

struct im_df;

/** @return 0 or -ENOMEM. Caller frees with im_df_free(). */
int im_df_new(struct im_df **out);
void im_df_free(struct im_df *df);

/**
 * Count one document whose set of unique terms is @p u (a set: each term of
 * it adds one to that term's df). Uses u->v[i].hash, which must be the
 * XXH3_64bits of the term, as struct im_terms keeps it.
 *
 * @return 0, -ENOMEM, or -EOVERFLOW past UINT32_MAX documents, 3 x 2^30
 *         distinct terms or 4 GiB of their bytes.
 */
int im_df_add(struct im_df *df, const struct im_terms *u);

/**
 * im_df_add() that also says where each term is counted: ids[i] receives the
 * id of u->v[i] in @p df, its place in im_df_foreach()'s order. Ids are
 * stable: adding and merging into @p df append new terms and never renumber
 * the old ones, so a one-pass scan keeps a document's ids instead of its
 * terms and maps them to the lexicon later. @p ids holds u->n entries.
 *
 * @return as im_df_add(); on error ids[] is partly filled.
 */
int im_df_add_ids(struct im_df *df, const struct im_terms *u, uint32_t *ids);

/**
 * Count one more document whose unique terms are already in @p df, by their
 * @p n ids (as im_df_add_ids() gave them, each once): what im_df_add_ids()
 * would count for the same set, without a term looked up. A one-pass scan
 * counts an exact copy of a file it read this way.
 *
 * @return 0, -EINVAL for an id @p df does not hold (nothing counted), or
 *         -EOVERFLOW as im_df_add() (counts before the failing id stay).
 */
int im_df_add_known(struct im_df *df, const uint32_t *ids, size_t n);

/** Add the counts of @p src into @p dst. @return as im_df_add(). */
int im_df_merge(struct im_df *dst, const struct im_df *src);

/**
 * im_df_merge() that also says where each term of @p src went: ids[i]
 * receives the id in @p dst of the term whose id in @p src is i. @p ids
 * holds im_df_terms(src) entries.
 *
 * @return as im_df_merge(); on error ids[] is partly filled.
 */
int im_df_merge_ids(struct im_df *dst, const struct im_df *src, uint32_t *ids);

/** Number of documents counted. */
uint64_t im_df_docs(const struct im_df *df);

/** Number of distinct terms counted (the vocabulary). */
size_t im_df_terms(const struct im_df *df);

/** df of one term: the number of documents counted that hold it (0 if none). */
uint64_t im_df_count(const struct im_df *df, const char *s, size_t len);

/*
 * Partial counts: the batch stages (core/scale) count document frequencies
 * per shard, write them out and add them up elsewhere. Adding the counts of
 * every shard gives exactly the struct im_df of one pass over all of them.
 */

/**
 * Add @p count documents holding the term @p s (not one more document: see
 * im_df_add_docs()).
 *
 * @return 0, -ENOMEM, -EINVAL for an empty term, or -EOVERFLOW past
 *         UINT32_MAX (in a count, or as im_df_add() says).
 */
int im_df_add_term(struct im_df *df, const char *s, size_t len, uint32_t count);

/** Add @p n to N. @return 0 or -EOVERFLOW past UINT32_MAX documents. */
int im_df_add_docs(struct im_df *df, uint64_t n);

/** Called once per term by im_df_foreach(); non-zero stops the walk. */
typedef int (*im_df_term_fn)(const char *s, uint32_t len, uint64_t hash,
			     uint32_t count, void *arg);

/**
 * Call @p fn for every distinct term (hash is XXH3_64bits of its bytes), in
 * id order (see im_df_add_ids()). @p df must not change meanwhile.
 *
 * @return 0 or fn's non-zero value.
 */
int im_df_foreach(const struct im_df *df, im_df_term_fn fn, void *arg);

/* ---- The lexicon --------------------------------------------------------- */

enum im_lex_kind {
	IM_LEX_PRIMARY = 1,
	IM_LEX_SECONDARY = 2,
};

/**
 * Every term string of a lexicon is followed by its NUL and then by readable
 * bytes up to at least IM_LEX_STR_PAD bytes from its start, so that a reader
 * may copy a short term with one fixed-size copy.
 */
#define IM_LEX_STR_PAD 16

/** A lexicon term as seen by lookups. */
struct im_lex_term {
	const char *str; /**< NUL-terminated, owned by the lexicon */
	uint32_t len;
	uint8_t kind;  /**< enum im_lex_kind */
	uint32_t rank; /**< position in B (0 = most frequent); 0 for L */
	float nidf;
};

struct im_lexicon;

/**
 * Build L and B from @p df. The caller owns the result; free it with
 * im_lexicon_free(). A term whose nidf lies on lo or hi (within 1e-12, the
 * rounding of log()) is in L. B keeps at most @p secondary_cap terms (0: B is
 * empty). Terms longer than 65536 bytes are left out. The result depends only on the counts, never on the order in which
 * documents were added or merged: the same counts save to the same bytes.
 *
 * @return 0, -ENOMEM, or -EINVAL if !(0 <= lo <= hi <= 1) or df counted fewer
 *         than 2 documents (nidf is undefined).
 */
int im_lexicon_build(const struct im_df *df, double lo, double hi,
		     size_t secondary_cap, struct im_lexicon **out);

/** A term of a struct im_df that a lexicon left out. */
#define IM_LEX_NO_TERM UINT32_MAX

/**
 * im_lexicon_build() that also says where each term of @p df went:
 * numbers[id] receives the term number (im_lexicon_term()) of the term
 * whose id in @p df is id, or IM_LEX_NO_TERM. A one-pass scan maps its
 * documents' ids so, without looking every term up again. @p numbers holds
 * im_df_terms(df) entries; on error its contents are undefined.
 *
 * @return as im_lexicon_build().
 */
int im_lexicon_build_numbered(const struct im_df *df, double lo, double hi,
			      size_t secondary_cap, struct im_lexicon **out,
			      uint32_t *numbers);

/**
 * im_lexicon_build_numbered() that works in @p df's own memory instead of
 * memory of its own (32 bytes a term, in the memory of its slots), and
 * leaves @p df fit for nothing but im_df_free(). A one-pass scan builds so
 * from counts it is done with. (With @p numbers NULL the build takes
 * memory of its own, as im_lexicon_build_numbered() does.)
 *
 * @return as im_lexicon_build().
 */
int im_lexicon_build_from(struct im_df *df, double lo, double hi,
			  size_t secondary_cap, struct im_lexicon **out,
			  uint32_t *numbers);

/**
 * Save crash-safely to @p path (write PATH.tmp.PID, fsync, rename, fsync dir).
 * @return 0 or a negative errno from the failing call.
 */
int im_lexicon_save(const struct im_lexicon *lex, const char *path);

/**
 * im_lexicon_save(), and on success the key of the file written in *@p key
 * (if not NULL): what im_lexicon_file_key() gives when it is loaded again.
 */
int im_lexicon_save_key(const struct im_lexicon *lex, const char *path,
			uint64_t *key);

/**
 * XXH3_64bits of every byte of the file @p lex was loaded from, as
 * im_state_file_key() computes it from the file: the lexicon's part of a
 * state cache's key and of the stage files' keys, from the bytes that were
 * parsed. 0 for a lexicon that was built, not loaded.
 */
uint64_t im_lexicon_file_key(const struct im_lexicon *lex);

/**
 * Load a lexicon file. On failure *out is NULL and, if @p why is not NULL, a
 * one-line reason without the path is written there: it begins with
 * "truncated", "bad checksum", "not an imatch lexicon", "unsupported version
 * N", "unsupported flags", "corrupt: ..." (a checksummed file whose content
 * is inconsistent: N < 2, a bad window, absurd counts, terms out of order or
 * repeated), "not a regular file", or is strerror() of the open's error.
 * A lexicon of a million terms loads in about a quarter of a second.
 *
 * @return 0, -ENOENT/-EACCES/-EISDIR/... from open, -EINVAL for a corrupt
 *         or non-regular file, or -ENOMEM.
 */
int im_lexicon_load(const char *path, struct im_lexicon **out, char *why,
		    size_t why_len);

void im_lexicon_free(struct im_lexicon *lex);

/** Look a term up by its bytes and XXH3_64bits hash. @return NULL if absent. */
const struct im_lex_term *im_lexicon_find(const struct im_lexicon *lex,
					  const char *s, size_t len,
					  uint64_t hash);

/**
 * The signer's lookup: the same as im_lexicon_find() but it returns the term
 * number (see im_lexicon_term(); it is below im_lexicon_primary_size() for a
 * term of L) and, if @p str is not NULL, the lexicon's copy of the bytes
 * (NUL-terminated and padded as IM_LEX_STR_PAD says) in *str, without reading
 * the term table: one cache line for a miss, two for a hit. The first
 * lookup in a built lexicon (not a loaded one) first fills its table, once
 * for every thread, about 35 ns a term: a one-pass scan signs from term
 * numbers and never asks.
 *
 * @return the term number, or -1 if absent.
 */
long im_lexicon_lookup(const struct im_lexicon *lex, const char *s, size_t len,
		       uint64_t hash, const char **str);

/** Hint that @p hash is about to be looked up (prefetches its slot). */
void im_lexicon_prefetch(const struct im_lexicon *lex, uint64_t hash);

/**
 * Term number @p i of the lexicon: 0 .. primary_size-1 are L in byte order
 * (memcmp, a prefix first), then B in rank order, so that comparing two
 * returned pointers compares the terms in that order. The same numbering
 * holds for every pointer im_lexicon_find() returns.
 *
 * @return NULL if @p i >= primary_size + secondary_size.
 */
const struct im_lex_term *im_lexicon_term(const struct im_lexicon *lex,
					  size_t i);

/**
 * Where each term falls in the byte order of all the lexicon's terms: for
 * term numbers i and j, bo[i] < bo[j] exactly when term i's bytes come
 * before term j's (memcmp, a prefix first). Within L it grows with the
 * number; B, in rank order, is where it says something. NULL for a loaded
 * lexicon, whose B the file holds in rank order only: only a build knows
 * it for free.
 */
const uint32_t *im_lexicon_byte_order(const struct im_lexicon *lex);

size_t im_lexicon_primary_size(const struct im_lexicon *lex);
size_t im_lexicon_secondary_size(const struct im_lexicon *lex);
/** N, the number of documents the statistics came from. */
uint64_t im_lexicon_docs(const struct im_lexicon *lex);
/** The nidf window the lexicon was built with. */
void im_lexicon_window(const struct im_lexicon *lex, double *lo, double *hi);

#endif
