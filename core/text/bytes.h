/**
 * @file bytes.h
 * Byte helpers for the hot paths of core (terms.c, lexicon.c, sig.c,
 * exact.c); internal to core.
 * Reentrant, no state.
 */
#ifndef IM_BYTES_H
#define IM_BYTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/**
 * calloc() for a table that is probed before it is written. calloc() hands
 * out the fresh pages of a large block untouched: the first probe of a page
 * maps the shared zero page, and the first store then replaces it, which
 * flushes that page from the TLB of every CPU running the process (an
 * interprocessor interrupt each, costly in a VM: 7% of `imatch scan -j 2`).
 * Zeroing the block here writes each page once instead.
 * @return NULL if out of memory or @p n * @p size overflows. Free with free().
 */
static inline void *im_zeroed(size_t n, size_t size)
{
	size_t bytes;
	void *p;

	if (size && n > SIZE_MAX / size)
		return NULL;
	bytes = n * size;
	p = malloc(bytes > 0 ? bytes : 1);
	/* Else the compiler makes the two calls one calloc() again. */
	__asm__ volatile("" : : "r"(p) : "memory");
	if (p)
		memset(p, 0, bytes);
	return p;
}

/**
 * a[0, n) == b[0, n), without a call for the usual term of 4 to 16 bytes:
 * two overlapping loads from each side cover it.
 */
static inline bool im_same_bytes(const char *a, const char *b, size_t n)
{
	if (n >= 8 && n <= 16) {
		uint64_t a0, a1, b0, b1;

		memcpy(&a0, a, 8);
		memcpy(&b0, b, 8);
		memcpy(&a1, a + n - 8, 8);
		memcpy(&b1, b + n - 8, 8);
		return !((a0 ^ b0) | (a1 ^ b1));
	}
	if (n >= 4 && n < 8) {
		uint32_t a0, a1, b0, b1;

		memcpy(&a0, a, 4);
		memcpy(&b0, b, 4);
		memcpy(&a1, a + n - 4, 4);
		memcpy(&b1, b + n - 4, 4);
		return !((a0 ^ b0) | (a1 ^ b1));
	}
	return !memcmp(a, b, n);
}

/*
 * A short term (at most IM_SHORT bytes) as two 8-byte words with the bytes
 * past its end zeroed: two loads and two masks, no branch on its length.
 * IM_SHORT bytes must be readable from its start; what follows the term
 * there is ignored.
 */
#define IM_SHORT 16

struct im_short_key {
	uint64_t lo, hi;
};

/* IM_SHORT bytes kept, IM_SHORT dropped: the masks of a key's words. */
static const unsigned char im_keep_bytes[2 * IM_SHORT] = {
	0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
	0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
};

/** The key of s[0, len), len <= IM_SHORT, IM_SHORT bytes readable at @p s. */
static inline struct im_short_key im_short_key(const char *s, size_t len)
{
	struct im_short_key k;
	uint64_t mlo, mhi;

	memcpy(&k.lo, s, 8);
	memcpy(&k.hi, s + 8, 8);
	memcpy(&mlo, im_keep_bytes + IM_SHORT - len, 8);
	memcpy(&mhi, im_keep_bytes + IM_SHORT + 8 - len, 8);
	k.lo &= mlo;
	k.hi &= mhi;
	return k;
}

static inline bool im_short_eq(struct im_short_key a, struct im_short_key b)
{
	return !((a.lo ^ b.lo) | (a.hi ^ b.hi));
}

#endif
