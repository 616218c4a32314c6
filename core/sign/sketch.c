/**
 * @file sketch.c
 * One-permutation b-bit MinHash with optimal densification (method and
 * references in sketch.h).
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "sketch.h"

#define EMPTY	 UINT64_MAX
#define VAL_MASK ((UINT64_C(1) << 56) - 1)

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

static inline void bin_put(uint64_t *bins, uint64_t h, uint64_t seed)
{
	uint64_t g = mix(h ^ seed);
	unsigned bin = (unsigned)(g >> 56);
	uint64_t val = g & VAL_MASK;

	if (val < bins[bin])
		bins[bin] = val;
}

/* The bin an empty bin @p i draws from at its try @p a. */
static inline unsigned dense_bin(uint64_t seed, unsigned i, uint64_t a)
{
	return (unsigned)(mix(seed ^ mix((uint64_t)i << 32 | a)) >> 56);
}

/*
 * The first DENSE_TRIES draws of every bin for the last seed, per thread:
 * a document of fewer terms than bins leaves most bins empty, and each
 * empty bin would compute its draws again, two mixes a try.
 */
#define DENSE_TRIES 16
static __thread struct {
	uint64_t seed;
	bool valid;
	uint8_t bin[IM_SKETCH_BINS][DENSE_TRIES];
} dense;

static void dense_fill(uint64_t seed)
{
	for (unsigned i = 0; i < IM_SKETCH_BINS; i++)
		for (unsigned a = 1; a <= DENSE_TRIES; a++)
			dense.bin[i][a - 1] = (uint8_t)dense_bin(seed, i, a);
	dense.seed = seed;
	dense.valid = true;
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

static void finish(uint64_t *bins, size_t n, uint64_t seed,
		   struct im_sketch *out)
{
	uint8_t filled[IM_SKETCH_BINS];

	memset(out, 0, sizeof(*out));
	if (n == 0)
		return;
	out->n = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
	for (unsigned i = 0; i < IM_SKETCH_BINS; i++)
		filled[i] = bins[i] != EMPTY;
	if (!dense.valid || dense.seed != seed)
		dense_fill(seed);
	/* Each empty bin draws bins from its own fixed sequence until one that
	 * a term filled: the same sequence in every document, so two
	 * documents with the same filled bins fill their empty ones alike.
	 * Only empty bins are written, so a filled bin read here still holds
	 * its own minimum. */
	for (unsigned i = 0; i < IM_SKETCH_BINS; i++)
		if (!filled[i])
			bins[i] = bins[draw_filled(filled, seed, i)];
	for (unsigned i = 0; i < IM_SKETCH_BINS; i += 2)
		out->v[i / 2] =
			(uint8_t)((bins[i] & 0xf) | (bins[i + 1] & 0xf) << 4);
}

void im_sketch_compute(const struct im_terms *u, uint64_t seed,
		       struct im_sketch *out)
{
	uint64_t bins[IM_SKETCH_BINS];

	memset(bins, 0xff, sizeof(bins));
	for (size_t i = 0; i < u->n; i++)
		bin_put(bins, u->v[i].hash, seed);
	finish(bins, u->n, seed, out);
}

void im_sketch_from_hashes(const uint64_t *h, size_t n, uint64_t seed,
			   struct im_sketch *out)
{
	uint64_t bins[IM_SKETCH_BINS];

	memset(bins, 0xff, sizeof(bins));
	for (size_t i = 0; i < n; i++)
		bin_put(bins, h[i], seed);
	finish(bins, n, seed, out);
}

unsigned im_sketch_agree(const struct im_sketch *a, const struct im_sketch *b)
{
	unsigned differ = 0;

	for (size_t i = 0; i < IM_SKETCH_BYTES; i += 8) {
		uint64_t x, y;

		memcpy(&x, a->v + i, 8);
		memcpy(&y, b->v + i, 8);
		x ^= y;
		/* One bit per nibble that differs anywhere. */
		x |= x >> 1;
		x |= x >> 2;
		differ += (unsigned)__builtin_popcountll(
			x & UINT64_C(0x1111111111111111));
	}
	return IM_SKETCH_BINS - differ;
}

double im_sketch_jaccard(const struct im_sketch *a, const struct im_sketch *b)
{
	const double chance = 1.0 / (1u << IM_SKETCH_BITS);
	double p, j;

	if (!a->n || !b->n)
		return 0.0;
	p = (double)im_sketch_agree(a, b) / IM_SKETCH_BINS;
	j = (p - chance) / (1.0 - chance);
	return j < 0.0 ? 0.0 : j;
}

double im_sketch_similarity(const struct im_sketch *a,
			    const struct im_sketch *b)
{
	double j = im_sketch_jaccard(a, b), na = a->n, nb = b->n, inter, cos;

	if (j <= 0.0)
		return 0.0;
	inter = j * (na + nb) / (1.0 + j);
	if (inter > na)
		inter = na;
	if (inter > nb)
		inter = nb;
	cos = inter / sqrt(na * nb);
	return cos > 1.0 ? 1.0 : cos;
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
