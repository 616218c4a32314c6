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
 * (tests/unit/test_sketch.c measures the bounds). A map that loses no
 * bit to a collision gives an exact estimate, and a pair at exactly the
 * threshold is linked (the estimator takes the likelier count, not the
 * mean, see sketch.c); sets short enough for that to be usual are tiny
 * (below) and compare without a map.
 *
 * A tiny set, of up to IM_SKETCH_TINY (83) terms, keeps a fingerprint of
 * each term in the map's bytes, not bits, as wide as n of them fit:
 * w = min(32, floor(IM_SKETCH_MAP_BITS / n)) bits (32 up to 26 terms, 24
 * at 34, 16 at 52, 10 at 83). Its top 10 bits are the term's bit in a
 * level-0 map, the rest more bits of the same hash, and a narrower
 * fingerprint is the top w bits of the widest. In a map, a differing term
 * that a collision hides lifts the estimate: two different one-word
 * documents had equal maps 1 time in 832, and pairs one term under 0.9
 * were linked 2 to 24 times in 100 from 27 to 83 terms. Two tiny sets
 * compare exactly, at the narrower of their widths: the fingerprints they
 * share. Only a term of one set alone whose fingerprint agrees with that
 * of a term of the other alone counts a term too many (agreeing with a
 * common term changes nothing), 1 pair of terms in 832 * 2^(w - 10); a
 * pair one term under the threshold with r terms alone on each side is
 * lifted over it with probability about r^2 / (832 * 2^(w - 10)): 1 in
 * 10^8 at 27 terms, 1 in 850,000 at 34, 1 in 34,000 at 40, 1 in 1,500 at
 * 52, 1 in 136 at 64 and 1 in 10 at 83 (measured: 1,478 of 200,000 pairs
 * of 64 terms, 18,527 of 83, where the map lifted 9% and 24% and found
 * only 60% and 80% of the pairs at exactly 0.9, the fingerprints all). A
 * pair further under takes two such agreements. A tiny set against a
 * larger one sets the bits of its map from its fingerprints, the same
 * bits as a map of the set, and compares as above, where a false equality
 * takes several collisions.
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
 * set of n terms, their n fingerprints of w bits (above) ascending,
 * fingerprint i in bits i w to i w + w - 1 of the map's place numbered as
 * the map's, its lowest bit first (at w = 32, u32 little-endian), then
 * zeros. A damaged record's fingerprint whose top 10 bits are past the
 * map sets no bit when its map is made.
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
/** Sets of up to this many terms keep a fingerprint of each term in the
 *  map's bytes: 32 bits up to 26 terms, else IM_SKETCH_MAP_BITS / n, down
 *  to the 10 bits of a term's position in a map. */
#define IM_SKETCH_TINY (IM_SKETCH_MAP_BITS / 10)
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
