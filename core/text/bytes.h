/**
 * @file bytes.h
 * Byte helpers for the hot paths of terms.c and lexicon.c; internal to core.
 * Reentrant, no state.
 */
#ifndef IM_BYTES_H
#define IM_BYTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

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

#endif
