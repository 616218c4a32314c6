/**
 * @file sketch.h
 * A fixed-size sketch of a document's set U of unique terms, to verify a
 * candidate pair before it becomes a link (DESIGN §2, §3.6).
 *
 * Method: one-permutation b-bit MinHash with optimal densification.
 * Every term's 64-bit hash is remixed with the seed; its top 8 bits pick one
 * of IM_SKETCH_BINS bins and the other 56 bits compete for that bin's minimum.
 * An empty bin (a set smaller than the bins, or bad luck) copies the minimum
 * of another bin chosen by a seeded hash sequence of its own index, so every
 * document densifies the same way (Shrivastava, "Optimal densification for
 * fast and accurate minwise hashing", ICML 2017). Only the low IM_SKETCH_BITS
 * bits of each bin's minimum are kept (Li & König, "b-Bit minwise hashing",
 * WWW 2010).
 *
 * Two sketches agree in a bin with probability P = J + (1 - J) / 2^b where J
 * is the Jaccard similarity of the two sets; the estimate inverts that and
 * turns J into the cosine of the two sets, the relation DESIGN §2 targets:
 *     |A ∩ B| = J (|A| + |B|) / (1 + J),   cos = |A ∩ B| / sqrt(|A| |B|).
 * With 256 bins of 4 bits the standard error of J near 0.82 (cosine 0.9)
 * is about 0.025 for sets of 256 terms or more; smaller sets fill fewer
 * bins and the error grows like sqrt(J (1 - J) / |U|) (tests/unit/test_sketch.c
 * measures both with a fixed seed).
 *
 * Bands: IM_SKETCH_BAND_BINS consecutive bins (24 bits) form one band. Two
 * documents whose sketches agree on a whole band are candidates. Near the
 * threshold (cosine 0.9, J about 0.82) a bin agrees with probability
 * P = 0.83, a band of 6 bins with P^6 = 0.33, so some of the
 * IM_SKETCH_BANDS = 8 bands agree for 96% of such pairs (bands of 8 bins:
 * 0.23 and 87%; on the licences corpus 31 of its 219 pairs with cosine in
 * [0.9, 1) then shared no key, 4 with bands of 6). Unrelated documents agree
 * on a band with probability 2^-24, so even 2^26 documents put about four
 * on one band value, well under the hot-key cap.
 *
 * Serialisation: IM_SKETCH_RECORD bytes, the term count as u32 little-endian
 * followed by the bins as stored (two bins per byte, bin 2i in the low
 * nibble). Every byte pattern decodes to a valid sketch.
 *
 * Thread-safety: every function is pure and reentrant; nothing allocates.
 * Computing a sketch keeps 4 kB of per-thread state (the densification
 * draws of the last seed), which changes no result.
 */
#ifndef IM_SKETCH_H
#define IM_SKETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "text.h"

#define IM_SKETCH_BINS	     256
#define IM_SKETCH_BITS	     4
#define IM_SKETCH_BYTES	     (IM_SKETCH_BINS * IM_SKETCH_BITS / 8)
#define IM_SKETCH_BAND_BINS  6
#define IM_SKETCH_BAND_BYTES (IM_SKETCH_BAND_BINS * IM_SKETCH_BITS / 8)
/** Bands offered as candidate keys (of IM_SKETCH_BINS / IM_SKETCH_BAND_BINS
 *  possible). */
#define IM_SKETCH_BANDS	 8
#define IM_SKETCH_RECORD (4 + IM_SKETCH_BYTES)

/** Plain data: copy freely. n == 0 means "no terms, no sketch". */
struct im_sketch {
	uint32_t n; /**< |U|, saturated at UINT32_MAX */
	uint8_t v[IM_SKETCH_BYTES];
};

/* ---- Building ------------------------------------------------------------ */

/**
 * Sketch the term set @p u (the terms' XXH3 hashes, remixed with @p seed).
 * An empty set gives the all-zero sketch with n = 0. Never fails.
 */
void im_sketch_compute(const struct im_terms *u, uint64_t seed,
		       struct im_sketch *out);

/** The same from bare 64-bit term hashes (unique, any order). */
void im_sketch_from_hashes(const uint64_t *h, size_t n, uint64_t seed,
			   struct im_sketch *out);

/* ---- Comparing ----------------------------------------------------------- */

/** Bins (of IM_SKETCH_BINS) in which @p a and @p b agree. */
unsigned im_sketch_agree(const struct im_sketch *a, const struct im_sketch *b);

/**
 * Estimated Jaccard similarity of the two term sets, in [0, 1]; 0 when either
 * is empty. Symmetric: im_sketch_jaccard(a, b) == im_sketch_jaccard(b, a).
 */
double im_sketch_jaccard(const struct im_sketch *a, const struct im_sketch *b);

/**
 * Estimated cosine of the two term sets (as 0/1 vectors), in [0, 1]; 0 when
 * either is empty, 1 for identical sets. Symmetric, as above.
 */
double im_sketch_similarity(const struct im_sketch *a,
			    const struct im_sketch *b);

/* ---- Bands (candidate keys) ---------------------------------------------- */

/** The IM_SKETCH_BAND_BYTES bytes of band @p j (< IM_SKETCH_BANDS) of @p s,
 *  little-endian. */
uint32_t im_sketch_band(const struct im_sketch *s, unsigned j);

/* ---- Serialisation ------------------------------------------------------- */

void im_sketch_encode(const struct im_sketch *s, uint8_t out[IM_SKETCH_RECORD]);
void im_sketch_decode(const uint8_t in[IM_SKETCH_RECORD],
		      struct im_sketch *out);

#endif
