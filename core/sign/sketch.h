/**
 * @file sketch.h
 * A fixed-size sketch of a document's set U of unique terms, to verify a
 * candidate pair before it becomes a link (DESIGN §2, §3.6).
 *
 * Method: two parts, one to verify and one to find candidates.
 *
 * The map (IM_SKETCH_MAP_BITS bits) verifies. Every term's 64-bit hash is
 * remixed with the seed into g; a document of n terms keeps level
 * k = the least k with floor(n / 2^k) <= IM_SKETCH_MAP_BITS, samples the terms
 * whose g begins with k zero bits, and sets bit floor(x * M / 2^32) for
 * each, x being the 32 bits of g after those k. Up to IM_SKETCH_MAP_BITS
 * terms (most documents, all short ones) every term sets a bit, so the map
 * sees the whole set and two maps differ about where the sets differ. The
 * bits set in one map only estimate the size of the symmetric difference,
 * whatever the collisions among the common terms (the estimator inverts
 * the expected number of such bits; see sketch.c). A larger set keeps a
 * consistent sample (the same terms in every document of that level) of
 * between M/2 and M terms. Two documents of adjacent levels compare at the
 * coarser one: the finer map's sampled terms are its lower half, and the
 * coarser map ORs pairs of bits to the same resolution; levels further
 * apart compare as unrelated (IM_SKETCH_MAX_LEVELS).
 * The map's error on the cosine near 0.9 is 0.008 to 0.011 for sets of up
 * to M terms and 0.012 to 0.013 above (0.016 to 0.019 across a level
 * boundary), where 256 bins of one-permutation MinHash, the previous
 * sketch, gave 0.015 for sets of 110 terms and 0.014 for large ones
 * (tests/unit/test_sketch.c measures the bounds). A short set usually
 * loses no bit to a collision: its estimate is then exact, and a pair at
 * exactly the threshold is linked (the estimator takes the likelier
 * count, not the mean, see sketch.c).
 *
 * A tiny set, of up to IM_SKETCH_TINY (26) terms, keeps a 32-bit
 * fingerprint of each term in the map's bytes, not bits: the top 32 bits
 * of the hash that places the term in a map. Below about 30 terms two or
 * three differing terms already take the cosine under 0.9, so a single
 * collision could fake a link (two different one-word documents had equal
 * maps 1 time in 832; sets of 14 to 26 terms two or three apart, 0.85 to
 * 0.89, were linked 0.3 to 1.5 times in 100). Two tiny sets compare
 * exactly (the fingerprints they share; two different terms agree 1 time
 * in 2^32, so a pair of 26-term sets counts a term too many about once in
 * 6 million comparisons, and only a pair just under the threshold could be
 * lifted over it); a tiny set against a larger one sets the bits of its
 * map from its fingerprints, the same bits as a map of the set, and
 * compares as above, where a false equality takes several collisions.
 *
 * The bins (IM_SKETCH_BINS of IM_SKETCH_BITS bits) find candidates:
 * one-permutation b-bit MinHash with optimal densification. g picks one
 * of the bins and competes for its minimum; an empty bin (a set smaller
 * than the bins, or bad luck) copies the minimum of another bin chosen by
 * a seeded hash sequence of its own index, so every document densifies the
 * same way (Shrivastava, "Optimal densification for fast and accurate
 * minwise hashing", ICML 2017), remixed with its own index. Only the low
 * IM_SKETCH_BITS bits of each bin's value are kept (Li & König, "b-Bit
 * minwise hashing", WWW 2010). Two sketches agree in a bin with
 * probability P = J + (1 - J) / 2^b, J being the Jaccard similarity of the
 * two sets; the remix makes the chance agreements of bins that copied
 * different minima independent, where bare copies agreed in every bin
 * that copied them (two one-term sets, whose one minimum fills all 48
 * bins, shared every band 1 time in 16).
 *
 * Bands: IM_SKETCH_BAND_BINS consecutive bins (24 bits) form one band. Two
 * documents whose sketches agree on a whole band are candidates. Near the
 * threshold (cosine 0.9, J about 0.82) a bin agrees with probability
 * P = 0.83, a band of 6 bins with P^6 = 0.33, so some of the
 * IM_SKETCH_BANDS = 8 bands agree for 96% of such pairs (bands of 8 bins:
 * 0.23 and 87%; on the licences corpus 31 of its 219 pairs with cosine in
 * [0.9, 1) then shared no key, 4 with bands of 6). Unrelated documents agree
 * on a band with probability 2^-24, so even 2^26 documents put about four
 * on one band value, well under the hot-key cap. Short documents are no
 * exception (the remix above).
 *
 * The estimate turns J into the cosine of the two sets, the relation
 * DESIGN §2 targets, with the exact term counts:
 *     |A ∩ B| = J (|A| + |B|) / (1 + J),   cos = |A ∩ B| / sqrt(|A| |B|).
 *
 * Serialisation: IM_SKETCH_RECORD bytes, the term count as u32 little-endian
 * followed by v as stored: the bins (two per byte, bin 2i in the low
 * nibble), then the map (bit p in byte p / 8, bit p % 8) or, for a tiny
 * set of n terms, their n fingerprints ascending as u32 little-endian,
 * then zeros.
 * Every byte pattern decodes to a valid sketch.
 *
 * Thread-safety: every function is pure and reentrant; nothing allocates.
 * Computing a sketch keeps under 1 kB of per-thread state (the densification
 * draws of the last seed), which changes no result; comparing reads a
 * table of 833 exponentials (6.5 kB) that the first comparison of two
 * short sets makes for the whole process (pthread_once()).
 */
#ifndef IM_SKETCH_H
#define IM_SKETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "text.h"

#define IM_SKETCH_BAND_BINS  6
#define IM_SKETCH_BITS	     4
#define IM_SKETCH_BAND_BYTES (IM_SKETCH_BAND_BINS * IM_SKETCH_BITS / 8)
/** Bands offered as candidate keys: all the bins. */
#define IM_SKETCH_BANDS	    8
#define IM_SKETCH_BINS	    (IM_SKETCH_BANDS * IM_SKETCH_BAND_BINS)
#define IM_SKETCH_BIN_BYTES (IM_SKETCH_BINS * IM_SKETCH_BITS / 8)
/** The map's bits: a multiple of 64 whose half is whole bytes. */
#define IM_SKETCH_MAP_BITS  832
#define IM_SKETCH_MAP_BYTES (IM_SKETCH_MAP_BITS / 8)
/** Sets of up to this many terms keep their terms' 32-bit fingerprints in
 *  the map's bytes. */
#define IM_SKETCH_TINY (IM_SKETCH_MAP_BYTES / 4)
/** Levels further apart than this compare as unrelated: the larger set has
 *  more than twice the terms, so the cosine is below 0.71, and a map
 *  folded twice (208 bits for 416 to 832 sampled terms) is too full to
 *  tell anything apart. */
#define IM_SKETCH_MAX_LEVELS 1
#define IM_SKETCH_BYTES	     (IM_SKETCH_BIN_BYTES + IM_SKETCH_MAP_BYTES)
#define IM_SKETCH_RECORD     (4 + IM_SKETCH_BYTES)

/** Plain data: copy freely. n == 0 means "no terms, no sketch". */
struct im_sketch {
	uint32_t n;		    /**< |U|, saturated at UINT32_MAX */
	uint8_t v[IM_SKETCH_BYTES]; /**< the bins, then the map */
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

/** Bins (of IM_SKETCH_BINS) in which @p a and @p b agree: how close they
 *  came to sharing a band. */
unsigned im_sketch_agree(const struct im_sketch *a, const struct im_sketch *b);

/**
 * Estimated Jaccard similarity of the two term sets (from the maps), in
 * [0, 1]; 0 when either is empty or their levels are more than
 * IM_SKETCH_MAX_LEVELS apart (a similarity threshold below 0.71 can
 * therefore miss pairs of very different sizes). Symmetric:
 * im_sketch_jaccard(a, b) == im_sketch_jaccard(b, a).
 */
double im_sketch_jaccard(const struct im_sketch *a, const struct im_sketch *b);

/**
 * Estimated cosine of the two term sets (as 0/1 vectors), in [0, 1]; 0 when
 * either is empty, 1 for identical sets. Symmetric, as above.
 */
double im_sketch_similarity(const struct im_sketch *a,
			    const struct im_sketch *b);

/**
 * Whether im_sketch_similarity(@p a, @p b) >= @p threshold, with that
 * similarity in *sim when it is (*sim is not set otherwise). Faster when
 * the term counts alone rule the pair out (the cosine is at most
 * sqrt(min / max) of them), and the same answer either way. Pure, as above.
 */
bool im_sketch_similar(const struct im_sketch *a, const struct im_sketch *b,
		       double threshold, double *sim);

/** The map's level of a set of @p n terms (see Method). */
unsigned im_sketch_level(uint32_t n);

/* ---- Bands (candidate keys) ---------------------------------------------- */

/** The IM_SKETCH_BAND_BYTES bytes of band @p j (< IM_SKETCH_BANDS) of @p s,
 *  little-endian. */
uint32_t im_sketch_band(const struct im_sketch *s, unsigned j);

/* ---- Serialisation ------------------------------------------------------- */

void im_sketch_encode(const struct im_sketch *s, uint8_t out[IM_SKETCH_RECORD]);
void im_sketch_decode(const uint8_t in[IM_SKETCH_RECORD],
		      struct im_sketch *out);

#endif
