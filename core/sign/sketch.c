/**
 * @file sketch.c
 * The sketch's bins (one-permutation b-bit MinHash with optimal
 * densification) and its map (method and references in sketch.h).
 *
 * Where the CPU has AVX-512 (F, DQ, BW), the terms' hashes are remixed
 * eight at a time and the map's flags packed 64 at a time; the bytes of a
 * sketch are the same either way (tests/unit/test_sketch.c pins them).
 */
#include <endian.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "cpu.h"
#include "detmath.h"
#include "sketch.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_X8_CODE 1
#include <immintrin.h>
#define X8 __attribute__((target("avx512f,avx512dq,avx512bw")))
/* Terms whose hashes builder_add_x8() remixes before it writes for them. */
#define X8_CHUNK 64
#else
#define HAVE_X8_CODE 0
#endif

#define EMPTY	  UINT64_MAX
#define MAP_WORDS (IM_SKETCH_MAP_BITS / 64)

/* Stafford's variant 13 of the MurmurHash3 finaliser: a bijection, so
 * distinct term hashes stay distinct. */
static inline uint64_t mix(uint64_t x)
{
	x ^= x >> 30;
	x *= UINT64_C(0xbf58476d1ce4e5b9);
	x ^= x >> 27;
	x *= UINT64_C(0x94d049bb133111eb);
	x ^= x >> 31;
	return x;
}

/* [0, n) from the top 32 bits of @p g (Lemire's multiply-shift). */
static inline unsigned reduce(uint64_t g, unsigned n)
{
	return (unsigned)(((g >> 32) * n) >> 32);
}

/* The map's own hash of a term: independent of the bins'. */
#define MAP_SALT UINT64_C(0x6a09e667f3bcc909)

unsigned im_sketch_level(uint32_t n)
{
	unsigned k = 0;

	while ((n >> k) > IM_SKETCH_MAP_BITS)
		k++;
	return k;
}

struct builder {
	uint64_t bins[IM_SKETCH_BINS];
	/* One byte per bit of the map and one more, written without reading:
	 * setting bits in 13 words read and wrote the same word again and
	 * again, each waiting for the last. Byte IM_SKETCH_MAP_BITS takes the
	 * terms a level leaves out. */
	uint8_t mapb[IM_SKETCH_MAP_BITS + 1];
	unsigned level;
	/* A set of up to IM_SKETCH_TINY terms: their fingerprints, kept
	 * instead of the map (finish() sorts them). */
	uint32_t tiny[IM_SKETCH_TINY];
	/* The top level bits of a map hash: a term is in the sample when
	 * they are all zero (0 at level 0: every term is). */
	uint64_t unsampled;
};

static void builder_init(struct builder *b, size_t n)
{
	memset(b->bins, 0xff, sizeof(b->bins));
	memset(b->mapb, 0, sizeof(b->mapb));
	b->level = im_sketch_level(n > UINT32_MAX ? UINT32_MAX : (uint32_t)n);
	b->unsampled = b->level ? ~UINT64_C(0) << (64 - b->level) : 0;
}

/* Compete for the minimum of the bin of a term's remixed hash @p g. */
static inline void bin_put(struct builder *b, uint64_t g)
{
	unsigned bin = reduce(g, IM_SKETCH_BINS);
	uint64_t val = g & UINT32_MAX, old = b->bins[bin];

	b->bins[bin] = val < old ? val : old;
}

/*
 * Add the @p n term hashes at @p h, @p step bytes apart. No branch on
 * whether a term lowers its bin's minimum, nor, above level 0, on whether
 * it is sampled: both are coin flips to the branch predictor (a document
 * of 1000 terms took 11 ns a term with them, 4.5 without). Level 0, where
 * every term sets its bit, skips the sampling arithmetic.
 */
static inline __attribute__((always_inline)) void
builder_add(struct builder *b, const void *h, size_t step, size_t n,
	    uint64_t seed)
{
	const char *at = h;

	if (b->level == 0) {
		for (size_t i = 0; i < n; i++, at += step) {
			uint64_t g = mix(*(const uint64_t *)at ^ seed);
			unsigned p =
				reduce(mix(g ^ MAP_SALT), IM_SKETCH_MAP_BITS);

			bin_put(b, g);
			b->mapb[p] = 1;
		}
		return;
	}
	for (size_t i = 0; i < n; i++, at += step) {
		uint64_t g = mix(*(const uint64_t *)at ^ seed);
		uint64_t m = mix(g ^ MAP_SALT);
		/* Level k samples the terms whose map hash begins with k
		 * zero bits; the bits after them place the term, so a
		 * coarser level's sample is the lower half of this one's
		 * map (the comparison relies on it). */
		unsigned p = reduce(m << b->level, IM_SKETCH_MAP_BITS);
		unsigned out = -(unsigned)((m & b->unsampled) != 0);

		bin_put(b, g);
		b->mapb[p + ((IM_SKETCH_MAP_BITS - p) & out)] = 1;
	}
}

/* ---- Eight terms at a time (AVX-512) ------------------------------------ */

#if HAVE_X8_CODE

/* mix() in each 64-bit lane: vpmullq does the multiplications. */
static inline X8 __attribute__((always_inline)) __m512i mix_x8(__m512i x)
{
	x = _mm512_xor_si512(x, _mm512_srli_epi64(x, 30));
	x = _mm512_mullo_epi64(
		x, _mm512_set1_epi64((long long)UINT64_C(0xbf58476d1ce4e5b9)));
	x = _mm512_xor_si512(x, _mm512_srli_epi64(x, 27));
	x = _mm512_mullo_epi64(
		x, _mm512_set1_epi64((long long)UINT64_C(0x94d049bb133111eb)));
	return _mm512_xor_si512(x, _mm512_srli_epi64(x, 31));
}

/* reduce() in each lane: the top 32 bits times @p n, 32 x 32 bits. */
static inline X8 __attribute__((always_inline)) __m512i reduce_x8(__m512i g,
								  unsigned n)
{
	return _mm512_srli_epi64(_mm512_mul_epu32(_mm512_srli_epi64(g, 32),
						  _mm512_set1_epi64(n)),
				 32);
}

/*
 * Eight hashes @p step (8 or 16) bytes apart from @p at. A term set's,
 * 16 bytes apart, are the even words of two loads; the second stops at
 * the eighth hash, so no byte past it is read.
 */
static inline X8 __attribute__((always_inline)) __m512i load_x8(const char *at,
								size_t step)
{
	if (step == 8)
		return _mm512_loadu_si512(at);
	return _mm512_permutex2var_epi64(
		_mm512_loadu_si512(at),
		_mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0),
		_mm512_maskz_loadu_epi64(0x7f, at + 64));
}

/*
 * builder_add() of the first n - n % 8 of the @p n hashes at @p h, @p step
 * (8 or 16) bytes apart; @return how many it added. Remixing, two mix()
 * and two reduce() a term, was most of builder_add()'s work: here it runs
 * on eight terms at once, and only what each term writes (its bin's
 * minimum, its map byte) is left to a scalar loop. That loop reads what
 * the vectors stored a chunk earlier: read back at once, each store of
 * eight lanes stalled the loads of its words (a term then cost more than
 * in builder_add()). A term left out of the sample goes to byte
 * IM_SKETCH_MAP_BITS, as in builder_add(); level 0 is the case of no
 * level bit.
 */
static X8 size_t builder_add_x8(struct builder *b, const void *h, size_t step,
				size_t n, uint64_t seed)
{
	const char *at = h;
	const __m512i vseed = _mm512_set1_epi64((long long)seed);
	const __m512i salt = _mm512_set1_epi64((long long)MAP_SALT);
	const __m512i unsampled = _mm512_set1_epi64((long long)b->unsampled);
	const __m512i left_out = _mm512_set1_epi64(IM_SKETCH_MAP_BITS);
	const __m512i level = _mm512_set1_epi64(b->level);
	size_t done = n - n % 8;

	for (size_t i = 0; i < done; i += X8_CHUNK) {
		uint32_t val[X8_CHUNK], bin[X8_CHUNK], pos[X8_CHUNK];
		size_t c = done - i < X8_CHUNK ? done - i : X8_CHUNK;

		for (size_t j = 0; j < c; j += 8, at += 8 * step) {
			__m512i x = load_x8(at, step);
			__m512i g = mix_x8(_mm512_xor_si512(x, vseed));
			__m512i m = mix_x8(_mm512_xor_si512(g, salt));
			__m512i p = reduce_x8(_mm512_sllv_epi64(m, level),
					      IM_SKETCH_MAP_BITS);
			__mmask8 out = _mm512_test_epi64_mask(m, unsampled);

			_mm256_storeu_si256((__m256i *)(val + j),
					    _mm512_cvtepi64_epi32(g));
			_mm256_storeu_si256((__m256i *)(bin + j),
					    _mm512_cvtepi64_epi32(reduce_x8(
						    g, IM_SKETCH_BINS)));
			_mm256_storeu_si256(
				(__m256i *)(pos + j),
				_mm512_cvtepi64_epi32(_mm512_mask_mov_epi64(
					p, out, left_out)));
		}
		for (size_t j = 0; j < c; j++) {
			uint64_t old = b->bins[bin[j]];

			b->bins[bin[j]] = val[j] < old ? val[j] : old;
			b->mapb[pos[j]] = 1;
		}
	}
	return done;
}

_Static_assert(IM_SKETCH_MAP_BITS % 64 == 0, "map_bits_x8() packs 64 flags");

/* finish()'s packing of the map's flags into bits, 64 flags a compare:
 * bit j of out[i] from flag 8i + j. */
static X8 void map_bits_x8(const uint8_t *mapb, uint8_t *out)
{
	for (unsigned i = 0; i < IM_SKETCH_MAP_BITS / 64; i++) {
		uint64_t bits = htole64(
			_mm512_test_epi8_mask(_mm512_loadu_si512(mapb + 64 * i),
					      _mm512_set1_epi8(1)));

		memcpy(out + 8 * i, &bits, 8);
	}
}

/* Whether this CPU runs the X8 code (checked once per process). */
static bool have_x8(void)
{
	/* Shared by the scan's workers: a race only computes it twice. */
	static int known = -1;
	int k = __atomic_load_n(&known, __ATOMIC_RELAXED);

	if (k < 0) {
		k = IM_CPU_HAS(AVX512F, "avx512f") &&
		    IM_CPU_HAS(AVX512DQ, "avx512dq") &&
		    IM_CPU_HAS(AVX512BW, "avx512bw");
		__atomic_store_n(&known, k, __ATOMIC_RELAXED);
	}
	return k;
}

#endif

_Static_assert(
	sizeof(struct im_term) == 16,
	"im_sketch_compute() hands builder_add_x8() hashes 16 bytes apart");

/*
 * A tiny set's fingerprint of a term of remixed hash @p g, at the widest
 * width: the term's bit in a level-0 map (the same reduce() of its map
 * hash as builder_add()'s) in the top TINY_POS_BITS bits, then the low bits
 * of the map hash, which reduce() does not read. A narrower fingerprint is
 * its top bits (tiny_bits()), so it still places the term in the map
 * (map_load()) and two widths compare at the narrower one.
 */
#define TINY_POS_BITS 10
_Static_assert(IM_SKETCH_MAP_BITS <= 1u << TINY_POS_BITS,
	       "a map position fits the top bits of a fingerprint");
_Static_assert(IM_SKETCH_MAP_BITS / IM_SKETCH_TINY >= TINY_POS_BITS,
	       "the narrowest fingerprint holds its term's map position");

static inline uint32_t tiny_fingerprint(uint64_t g)
{
	uint64_t m = mix(g ^ MAP_SALT);

	return (uint32_t)reduce(m, IM_SKETCH_MAP_BITS) << (32 - TINY_POS_BITS) |
	       ((uint32_t)m & ((UINT32_C(1) << (32 - TINY_POS_BITS)) - 1));
}

/* The width of a tiny set's fingerprints: the widest that fits @p n of
 * them in the map's bits (1 <= n <= IM_SKETCH_TINY). */
static inline unsigned tiny_bits(uint32_t n)
{
	unsigned w = IM_SKETCH_MAP_BITS / n;

	return w < 32 ? w : 32;
}

/* builder_add() of hashes 8 or 16 bytes apart, eight terms at a time where
 * the CPU can; a tiny set keeps its terms' fingerprints instead of map
 * bits. */
static void builder_add_any(struct builder *b, const void *h, size_t step,
			    size_t n, uint64_t seed)
{
	size_t done = 0;

	if (n <= IM_SKETCH_TINY) {
		const char *at = h;

		for (size_t i = 0; i < n; i++, at += step) {
			uint64_t g = mix(*(const uint64_t *)at ^ seed);

			bin_put(b, g);
			b->tiny[i] = tiny_fingerprint(g);
		}
		return;
	}
#if HAVE_X8_CODE
	if (have_x8())
		done = builder_add_x8(b, h, step, n, seed);
#endif
	if (done < n)
		builder_add(b, (const char *)h + done * step, step, n - done,
			    seed);
}

/* The bin an empty bin @p i draws from at its try @p a. */
static inline unsigned dense_bin(uint64_t seed, unsigned i, uint64_t a)
{
	return reduce(mix(seed ^ mix((uint64_t)i << 32 | a)), IM_SKETCH_BINS);
}

/*
 * The first DENSE_TRIES draws of every bin for the last seed, per thread:
 * a document of fewer terms than bins leaves many bins empty, and each
 * empty bin would compute its draws again, two mixes a try. A document of
 * a few terms fills so few bins that an empty one tries about
 * IM_SKETCH_BINS / filled draws: there each bin's try at which every other
 * bin first comes up (first_try, filled on the first such document) finds
 * the earliest filled bin in one look per filled bin instead.
 */
#define DENSE_TRIES 16
#define FIRST_TRIES 255 /* first_try[][] holds tries 1..255; 0: not there */
#define FEW_FILLED  8	/* at most this many filled bins: first_try[][] */
static __thread struct {
	uint64_t seed;
	bool valid, first_valid;
	uint8_t bin[IM_SKETCH_BINS][DENSE_TRIES];
	uint8_t first_try[IM_SKETCH_BINS][IM_SKETCH_BINS];
} dense;

static void dense_fill(uint64_t seed)
{
	for (unsigned i = 0; i < IM_SKETCH_BINS; i++)
		for (unsigned a = 1; a <= DENSE_TRIES; a++)
			dense.bin[i][a - 1] = (uint8_t)dense_bin(seed, i, a);
	dense.seed = seed;
	dense.valid = true;
	dense.first_valid = false;
}

static void first_fill(uint64_t seed)
{
	memset(dense.first_try, 0, sizeof(dense.first_try));
	for (unsigned i = 0; i < IM_SKETCH_BINS; i++)
		for (unsigned a = FIRST_TRIES; a >= 1; a--)
			dense.first_try[i][dense_bin(seed, i, a)] = (uint8_t)a;
	dense.first_valid = true;
}

/* The bin empty bin @p i copies: its first draw that a term filled. The
 * first 8 draws are tested at once, without a branch to miss per try: a
 * small document leaves most bins empty and each needs a few tries. */
static unsigned draw_filled(const uint8_t *filled, uint64_t seed, unsigned i)
{
	const uint8_t *draw = dense.bin[i];
	unsigned hit = 0, j;

	for (unsigned a = 0; a < 8; a++)
		hit |= (unsigned)filled[draw[a]] << a;
	if (hit)
		return draw[__builtin_ctz(hit)];
	j = draw[8];
	for (uint64_t a = 9; !filled[j]; a++)
		j = a < DENSE_TRIES ? draw[a] : dense_bin(seed, i, a + 1);
	return j;
}

/* draw_filled() for a document that filled only the @p nf bins @p fill:
 * the filled bin that comes up first in bin @p i's draws, by first_try[][]
 * when one comes up within its tries, else by drawing on after them. */
static unsigned draw_filled_few(const uint8_t *filled, const uint8_t *fill,
				unsigned nf, uint64_t seed, unsigned i)
{
	const uint8_t *first = dense.first_try[i];
	unsigned best = 0, at = FIRST_TRIES + 1, j;

	for (unsigned k = 0; k < nf; k++) {
		unsigned a = first[fill[k]];

		if (a && a < at) {
			at = a;
			best = fill[k];
		}
	}
	if (at <= FIRST_TRIES)
		return best;
	j = dense_bin(seed, i, FIRST_TRIES + 1);
	for (uint64_t a = FIRST_TRIES + 2; !filled[j]; a++)
		j = dense_bin(seed, i, a);
	return j;
}

/* A tiny set's fingerprints, ascending (so the bytes do not depend on the
 * terms' order, and two sets compare in one pass), cut to tiny_bits() of
 * them and packed in the map's place, fingerprint i in its bits
 * [i w, i w + w) (bit p in byte p / 8, bit p % 8, as the map's); the rest
 * stays zero. Cutting keeps the order. */
static void tiny_store(const uint32_t *in, size_t n, uint8_t *out)
{
	uint8_t buf[IM_SKETCH_MAP_BYTES + 8] = {0}, at[65] = {0};
	uint32_t f[IM_SKETCH_TINY];
	unsigned w = tiny_bits((uint32_t)n);

	/* Into 64 buckets by the top bits, then insertion within them: an
	 * insertion sort of the whole list was most of the time dupes took
	 * to sketch a short document. */
	for (size_t i = 0; i < n; i++)
		at[(in[i] >> 26) + 1]++;
	for (unsigned k = 1; k < 64; k++)
		at[k] = (uint8_t)(at[k] + at[k - 1]);
	for (size_t i = 0; i < n; i++)
		f[at[in[i] >> 26]++] = in[i];
	for (size_t i = 1; i < n; i++) {
		uint32_t x = f[i];
		size_t j = i;

		for (; j > 0 && f[j - 1] > x; j--)
			f[j] = f[j - 1];
		f[j] = x;
	}
	for (size_t i = 0; i < n; i++) {
		size_t bit = i * w;
		uint64_t x;

		memcpy(&x, buf + bit / 8, 8);
		x = htole64(le64toh(x) | (uint64_t)(f[i] >> (32 - w))
						 << (bit % 8));
		memcpy(buf + bit / 8, &x, 8);
	}
	memcpy(out, buf, IM_SKETCH_MAP_BYTES);
}

static void finish(struct builder *b, size_t n, uint64_t seed,
		   struct im_sketch *out)
{
	uint8_t filled[IM_SKETCH_BINS], fill[IM_SKETCH_BINS];
	uint64_t *bins = b->bins;
	unsigned nf = 0;

	memset(out, 0, sizeof(*out));
	if (n == 0)
		return;
	out->n = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
	for (unsigned i = 0; i < IM_SKETCH_BINS; i++) {
		filled[i] = bins[i] != EMPTY;
		fill[nf] = (uint8_t)i;
		nf += filled[i];
	}
	if (!dense.valid || dense.seed != seed)
		dense_fill(seed);
	if (nf <= FEW_FILLED && !dense.first_valid)
		first_fill(seed);
	/* Each empty bin draws bins from its own fixed sequence until one that
	 * a term filled: the same sequence in every document, so two
	 * documents with the same filled bins fill their empty ones alike.
	 * The copy is remixed with the empty bin's index (above the 32 bits
	 * of a minimum) before its low bits are kept: two documents that copy
	 * the same minimum still agree, and different minima agree 1 time in
	 * 2^b per bin independently, not in every bin that copied them (two
	 * one-term documents shared all their bands 1 time in 16). Only empty
	 * bins are written, so a filled bin read here still holds its own
	 * minimum. */
	for (unsigned i = 0; i < IM_SKETCH_BINS; i++)
		if (!filled[i])
			bins[i] = mix(
				bins[nf <= FEW_FILLED
					     ? draw_filled_few(filled, fill, nf,
							       seed, i)
					     : draw_filled(filled, seed, i)] ^
				(uint64_t)(i + 1) << 32);
	for (unsigned i = 0; i < IM_SKETCH_BINS; i += 2)
		out->v[i / 2] =
			(uint8_t)((bins[i] & 0xf) | (bins[i + 1] & 0xf) << 4);
	if (n <= IM_SKETCH_TINY) {
		tiny_store(b->tiny, n, out->v + IM_SKETCH_BIN_BYTES);
		return;
	}
#if HAVE_X8_CODE
	if (have_x8()) {
		map_bits_x8(b->mapb, out->v + IM_SKETCH_BIN_BYTES);
		return;
	}
#endif
	for (unsigned i = 0; i < IM_SKETCH_MAP_BYTES; i++) {
		uint64_t x;

		/* Eight flags, 0 or 1, into one byte: bit j from byte j. */
		memcpy(&x, b->mapb + 8 * i, 8);
		out->v[IM_SKETCH_BIN_BYTES + i] =
			(uint8_t)((le64toh(x) * UINT64_C(0x0102040810204080)) >>
				  56);
	}
}

void im_sketch_compute(const struct im_terms *u, uint64_t seed,
		       struct im_sketch *out)
{
	struct builder b;

	builder_init(&b, u->n);
	if (u->n)
		builder_add_any(&b, &u->v[0].hash, sizeof(u->v[0]), u->n, seed);
	finish(&b, u->n, seed, out);
}

void im_sketch_from_hashes(const uint64_t *h, size_t n, uint64_t seed,
			   struct im_sketch *out)
{
	struct builder b;

	builder_init(&b, n);
	builder_add_any(&b, h, sizeof(*h), n, seed);
	finish(&b, n, seed, out);
}

unsigned im_sketch_agree(const struct im_sketch *a, const struct im_sketch *b)
{
	unsigned differ = 0;

	for (size_t i = 0; i < IM_SKETCH_BIN_BYTES; i++) {
		unsigned x = a->v[i] ^ b->v[i];

		differ += ((x & 0xf) != 0) + ((x >> 4) != 0);
	}
	return IM_SKETCH_BINS - differ;
}

/* Bits set in @p x. __builtin_popcountll is a call to libgcc's table walk
 * unless the build targets a CPU with POPCNT, which it does not assume. */
static inline unsigned pop64(uint64_t x)
{
	x -= (x >> 1) & UINT64_C(0x5555555555555555);
	x = (x & UINT64_C(0x3333333333333333)) +
	    ((x >> 2) & UINT64_C(0x3333333333333333));
	x = (x + (x >> 4)) & UINT64_C(0x0f0f0f0f0f0f0f0f);
	return (unsigned)((x * UINT64_C(0x0101010101010101)) >> 56);
}

/* The fingerprints of tiny sketch @p s in order, cut to @p w bits (at most
 * tiny_bits() of s->n). */
static void tiny_load(const struct im_sketch *s, unsigned w,
		      uint32_t out[IM_SKETCH_TINY])
{
	uint8_t buf[IM_SKETCH_MAP_BYTES + 8];
	unsigned have = tiny_bits(s->n);

	memcpy(buf, s->v + IM_SKETCH_BIN_BYTES, IM_SKETCH_MAP_BYTES);
	memset(buf + IM_SKETCH_MAP_BYTES, 0, 8);
	for (unsigned i = 0; i < s->n; i++) {
		unsigned bit = i * have;
		uint64_t x;

		memcpy(&x, buf + bit / 8, 8);
		x = le64toh(x) >> (bit % 8);
		out[i] = (uint32_t)((x & ((UINT64_C(1) << have) - 1)) >>
				    (have - w));
	}
}

/* The map of @p s; a tiny sketch's is made from the positions atop its
 * terms' fingerprints, bit for bit the one builder_add() would have set
 * (level 0). A damaged record's position past the map sets no bit. */
static void map_load(const struct im_sketch *s, uint64_t map[MAP_WORDS])
{
	if (s->n <= IM_SKETCH_TINY) {
		uint32_t f[IM_SKETCH_TINY];

		tiny_load(s, TINY_POS_BITS, f);
		memset(map, 0, IM_SKETCH_MAP_BYTES);
		for (unsigned i = 0; i < s->n; i++)
			if (f[i] < IM_SKETCH_MAP_BITS)
				map[f[i] / 64] |= UINT64_C(1) << (f[i] % 64);
		return;
	}
	memcpy(map, s->v + IM_SKETCH_BIN_BYTES, IM_SKETCH_MAP_BYTES);
	for (unsigned w = 0; w < MAP_WORDS; w++)
		map[w] = le64toh(map[w]);
}

/* Fingerprints the tiny sketches @p a and @p b share, at the narrower of
 * their widths, in one pass over both ascending lists. The pass is its
 * own mirror image, so the count is symmetric and at most the smaller n
 * even for a damaged record whose fingerprints repeat or are out of
 * order. */
static unsigned tiny_common(const struct im_sketch *a,
			    const struct im_sketch *b)
{
	uint32_t fa[IM_SKETCH_TINY], fb[IM_SKETCH_TINY];
	unsigned wa = tiny_bits(a->n), wb = tiny_bits(b->n);
	unsigned i = 0, j = 0, common = 0;

	tiny_load(a, wa < wb ? wa : wb, fa);
	tiny_load(b, wa < wb ? wa : wb, fb);
	while (i < a->n && j < b->n) {
		uint32_t x = fa[i], y = fb[j];

		i += x <= y;
		j += y <= x;
		common += x == y;
	}
	return common;
}

/* The @p bits bits of @p map at half the resolution: bit p of the result
 * is bit 2p or 2p + 1 of @p map. The upper half of the result is zero. */
static void map_fold(uint64_t map[MAP_WORDS], unsigned bits)
{
	uint64_t out[MAP_WORDS] = {0};

	for (unsigned w = 0; w < (bits + 63) / 64; w++) {
		uint64_t t =
			(map[w] | map[w] >> 1) & UINT64_C(0x5555555555555555);

		/* Gather the even bits into the low 32. */
		t = (t | t >> 1) & UINT64_C(0x3333333333333333);
		t = (t | t >> 2) & UINT64_C(0x0f0f0f0f0f0f0f0f);
		t = (t | t >> 4) & UINT64_C(0x00ff00ff00ff00ff);
		t = (t | t >> 8) & UINT64_C(0x0000ffff0000ffff);
		t = (t | t >> 16) & UINT64_C(0x00000000ffffffff);
		out[w / 2] |= t << (32 * (w % 2));
	}
	memcpy(map, out, sizeof(out));
}

/* Keep the first @p bits bits of @p map. */
static void map_cut(uint64_t map[MAP_WORDS], unsigned bits)
{
	for (unsigned w = 0; w < MAP_WORDS; w++) {
		if (w * 64 >= bits)
			map[w] = 0;
		else if (bits - w * 64 < 64)
			map[w] &= (UINT64_C(1) << (bits - w * 64)) - 1;
	}
}

/* Terms behind @p set of @p bits bits (linear counting). */
static double map_terms(unsigned set, unsigned bits)
{
	double full = set < bits ? set : bits - 0.5;

	/* ln(1 - full / bits), the division rounded once (detmath.h). */
	return -(double)bits * det_log((bits - full) / bits);
}

/*
 * @p c, the common terms that make @p differ bits set in one map only the
 * expected number, or the number when no bit was lost to a collision if
 * that is the likelier case. A short text loses fewer than ln 2 bits on
 * average, a Poisson count whose median is then 0: the mean would put a
 * pair at exactly the threshold below it nearly every time (10 terms, one
 * replaced: linked 3 times in 100).
 */
static double likely_common(double c, double na, double nb, unsigned differ)
{
	if (na + nb - 2.0 * c - differ < M_LN2)
		return (na + nb - differ) / 2.0;
	return c;
}

/*
 * Bits of the difference that collisions hid, as far as the maps show: with
 * both maps holding every term (level 0), a map with fewer bits set than
 * terms lost a bit to a collision. Two common terms on one bit cost both
 * maps a bit and hide nothing; a term of one set alone on the bit of any
 * other term of its set hides one bit of the difference and costs only
 * its own map. So the difference of the two losses is what was hidden,
 * in the likeliest case for near-duplicates, whose terms are nearly all
 * common (a short text's one term of its own that lands on a common
 * term's bit made it look like its siblings: 0.889 estimated 0.944).
 */
static unsigned hidden_differ(const struct im_sketch *a,
			      const struct im_sketch *b, unsigned level,
			      unsigned set_a, unsigned set_b)
{
	unsigned lost_a, lost_b;

	if (level > 0 || set_a > a->n || set_b > b->n)
		return 0; /* sampled, or a damaged record */
	lost_a = a->n - set_a;
	lost_b = b->n - set_b;
	return lost_a > lost_b ? lost_a - lost_b : lost_b - lost_a;
}

/* -ln(1 - 1/bits) for the two resolutions a comparison uses (a log1p
 * would cost as much as the rest of the comparison). */
#define LAMBDA_WHOLE 0.0012026459657604014
#define LAMBDA_HALF  0.0024067400305649851

/* det_exp(-LAMBDA_WHOLE * n) for every n of a set that a map holds whole
 * (level 0): map_estimate()'s two exponentials were half of a comparison,
 * and most comparisons are of two such sets. Made once per process by
 * det_exp() from the same operands, so the bits are the same. */
static double q_whole[IM_SKETCH_MAP_BITS + 1];
static pthread_once_t q_whole_once = PTHREAD_ONCE_INIT;

static void q_whole_make(void)
{
	for (unsigned n = 0; n <= IM_SKETCH_MAP_BITS; n++)
		q_whole[n] = det_exp(-LAMBDA_WHOLE * (double)n);
}

/*
 * Estimated |A ∩ B| and |A ∪ B| of the sets the two maps sample (at the
 * coarser level of the two). A bit set in one map only comes from a term of
 * that set alone that no term of the other landed on: with a and b the
 * terms of each set alone, c the common ones and q = 1 - 1/M,
 *     E[xor] = M ((1 - q^a) q^(b + c) + (1 - q^b) q^(a + c))
 *            = M (q^|A| + q^|B| - 2 q^(|A| + |B|) q^-c),
 * which gives c in closed form; |A| and |B| are the exact term counts
 * when both maps hold every term, else estimated from the bits set.
 * @return false when the levels are too far apart to compare.
 */
static bool map_estimate(const struct im_sketch *a, const struct im_sketch *b,
			 double *common, double *all)
{
	uint64_t ma[MAP_WORDS], mb[MAP_WORDS];
	unsigned la = im_sketch_level(a->n), lb = im_sketch_level(b->n);
	unsigned bits = IM_SKETCH_MAP_BITS, set_a = 0, set_b = 0, differ = 0;
	double na = a->n, nb = b->n, lambda, qa, qb, arg, c;

	if (a->n <= IM_SKETCH_TINY && b->n <= IM_SKETCH_TINY) {
		/* Both sets whole: the exact count (up to fingerprints of
		 * different terms that agree, 1 pair in 832 * 2^(w - 10)). */
		c = tiny_common(a, b);
		*common = c;
		*all = na + nb - c;
		return true;
	}
	if (la > lb) {
		const struct im_sketch *t = a;
		unsigned l = la;

		a = b;
		b = t;
		la = lb;
		lb = l;
		na = a->n;
		nb = b->n;
	}
	if (lb - la > IM_SKETCH_MAX_LEVELS)
		return false;
	map_load(a, ma);
	map_load(b, mb);
	/* The finer map's terms sampled at the coarser level are its lower
	 * half per level; the coarser map is brought to their resolution. */
	for (unsigned d = la; d < lb; d++) {
		map_fold(mb, bits);
		bits /= 2;
	}
	map_cut(ma, bits);
	for (unsigned w = 0; w < MAP_WORDS; w++) {
		set_a += pop64(ma[w]);
		set_b += pop64(mb[w]);
		differ += pop64(ma[w] ^ mb[w]);
	}
	if (lb > 0) {
		na = map_terms(set_a, bits);
		nb = map_terms(set_b, bits);
	}
	if (differ == 0) {
		/* Equal maps: say so exactly, not up to rounding. */
		c = na < nb ? na : nb;
		*common = c;
		*all = na + nb - c;
		return true;
	}
	lambda = bits == IM_SKETCH_MAP_BITS ? LAMBDA_WHOLE : LAMBDA_HALF;
	if (lb == 0) {
		pthread_once(&q_whole_once, q_whole_make);
		qa = q_whole[a->n];
		qb = q_whole[b->n];
	} else {
		qa = det_exp(-lambda * na);
		qb = det_exp(-lambda * nb);
	}
	arg = (qa + qb - (double)differ / bits) / (2.0 * qa * qb);
	c = arg > 1.0 ? det_log(arg) / lambda : 0.0;
	c = likely_common(c, na, nb,
			  hidden_differ(a, b, lb, set_a, set_b) + differ);
	/* A damaged record's count can be far below its map's bits. */
	if (c < 0.0)
		c = 0.0;
	if (c > na)
		c = na;
	if (c > nb)
		c = nb;
	*common = c;
	*all = na + nb - c;
	return true;
}

double im_sketch_jaccard(const struct im_sketch *a, const struct im_sketch *b)
{
	double common, all;

	if (!a->n || !b->n || !map_estimate(a, b, &common, &all) || all <= 0.0)
		return 0.0;
	return common / all;
}

/* The cosine of sets of @p na and @p nb terms with @p inter in common. */
static double cosine(double inter, double na, double nb)
{
	double cos = inter / sqrt(na * nb);

	return cos > 1.0 ? 1.0 : cos;
}

double im_sketch_similarity(const struct im_sketch *a,
			    const struct im_sketch *b)
{
	double na = a->n, nb = b->n, common, all, inter;

	if (!a->n || !b->n || !map_estimate(a, b, &common, &all) || all <= 0.0)
		return 0.0;
	/* Maps that hold every term estimate the intersection itself; keep
	 * it exact, so that 9 common terms of 10 give 0.9 and not a rounding
	 * below the threshold. Samples give J, applied to the exact sizes. */
	if (im_sketch_level(a->n) == 0 && im_sketch_level(b->n) == 0) {
		inter = common;
	} else {
		double j = common / all;

		inter = j * (na + nb) / (1.0 + j);
	}
	if (inter > na)
		inter = na;
	if (inter > nb)
		inter = nb;
	return cosine(inter, na, nb);
}

bool im_sketch_similar(const struct im_sketch *a, const struct im_sketch *b,
		       double threshold, double *sim)
{
	double na = a->n, nb = b->n;

	/* im_sketch_similarity() takes at most the smaller count in common,
	 * and the division rounds monotonically: this bounds its result. */
	if (a->n && b->n && cosine(na < nb ? na : nb, na, nb) < threshold)
		return false;
	*sim = im_sketch_similarity(a, b);
	return *sim >= threshold;
}

uint32_t im_sketch_band(const struct im_sketch *s, unsigned j)
{
	const uint8_t *p = s->v + j * IM_SKETCH_BAND_BYTES;
	uint32_t band = 0;

	for (unsigned i = 0; i < IM_SKETCH_BAND_BYTES; i++)
		band |= (uint32_t)p[i] << (8 * i);
	return band;
}

void im_sketch_encode(const struct im_sketch *s, uint8_t out[IM_SKETCH_RECORD])
{
	for (int i = 0; i < 4; i++)
		out[i] = (uint8_t)(s->n >> (8 * i));
	memcpy(out + 4, s->v, IM_SKETCH_BYTES);
}

void im_sketch_decode(const uint8_t in[IM_SKETCH_RECORD], struct im_sketch *out)
{
	out->n = (uint32_t)in[0] | (uint32_t)in[1] << 8 |
		 (uint32_t)in[2] << 16 | (uint32_t)in[3] << 24;
	memcpy(out->v, in + 4, IM_SKETCH_BYTES);
}
