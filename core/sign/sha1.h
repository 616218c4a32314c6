/**
 * @file sha1.h
 * SHA-1 (FIPS 180-4) of many independent messages at once, for the
 * signatures of one document's coordinates (sig.h).
 *
 * A document's K + 1 coordinates are independent messages of about 1 KiB
 * (coordinate 0 about three times the others), so they are hashed
 * together, each lane of an implementation taking the next message as soon
 * as its own ends. Five implementations give the same bytes:
 *
 *   - IM_SHA1_X32: thirty-two messages, X16's lanes twice over: the rounds
 *     of two groups of sixteen interleaved, the second group's filling the
 *     vector units the first one's leave idle while each round waits on
 *     the one before. Once half the lanes or fewer have a message left,
 *     X16 finishes them (a step of X32 costs about 1.25 of X16's). On AMD
 *     family 26, thirty-two 1 KiB messages: 7.3 ns a block where X16
 *     takes 11.0 and SHA-NI 17.7; 128 messages of a first scan's lengths
 *     (one of 1,121 bytes for four of 330): 9.3 ns where X16 takes 12.6.
 *     It needs what X16 needs.
 *   - IM_SHA1_X16: sixteen messages in the 32-bit lanes of AVX-512F
 *     vectors, X8's rounds on 512 bits (so it needs what X8 needs: AVX2,
 *     AVX-512VL and the SHA extensions); when fewer than eight lanes have a
 *     message left, the SHA extensions finish them. On AMD family 26
 *     (Zen 5), sixteen 1 KiB messages: 5.0 GB/s, where X8 gives 2.9 and
 *     SHA-NI 3.4: each round waits on the one before, so a step of
 *     sixteen lanes takes about as long as one of eight.
 *   - IM_SHA1_X8: eight messages in the 32-bit lanes of AVX-512VL vectors
 *     (vprold, vpternlogd on 256 bits), the rounds written out from FIPS
 *     180-4; when fewer than four lanes have a message left, the SHA
 *     extensions finish them (so it needs both). Eight 1 KiB messages: 2.2
 *     GB/s where IM_SHA1_SHANI gives 0.94 (a noisy machine, same
 *     conditions).
 *   - IM_SHA1_SHANI: the SHA extensions, two messages interleaved in one
 *     instruction stream. On this project's bench machine sha1rnds4 is
 *     throughput-bound: two lanes gain 3-10% over one.
 *   - IM_SHA1_OPENSSL: OpenSSL's SHA1, everywhere; the reference
 *     tests/unit/test_sha1.c checks the others against. libcrypto is
 *     loaded when the first such hasher is made (dl.h), not linked.
 *
 * IM_SHA1_AUTO picks the first the CPU runs (checked once per process).
 * X32 and X16 have not been measured on a CPU that splits 512-bit operations in
 * two (Zen 4) or lowers its clock for them (some Intel server parts).
 *
 * Thread-safety: a struct im_sha1 is one thread's; create one per thread.
 */
#ifndef IM_SHA1_H
#define IM_SHA1_H

#include <stddef.h>
#include <stdint.h>

#define IM_SHA1_LEN 20

/** One message to hash and where its digest goes. */
struct im_sha1_msg {
	const void *data;
	size_t len;
	uint8_t *out; /**< IM_SHA1_LEN bytes */
};

enum im_sha1_impl {
	IM_SHA1_AUTO,	 /**< X32, else SHA-NI, else OpenSSL: what the CPU
			      has */
	IM_SHA1_OPENSSL, /**< OpenSSL's SHA1, one message after another */
	IM_SHA1_SHANI,	 /**< the SHA extensions, two messages at a time */
	IM_SHA1_X8,  /**< AVX-512VL + SHA-NI, eight messages in vector lanes */
	IM_SHA1_X16, /**< as X8, sixteen messages in 512-bit lanes */
	IM_SHA1_X32, /**< as X16, thirty-two messages in two groups */
};

struct im_sha1;

/* ---- Life cycle ------------------------------------------------------- */

/** Whether this CPU runs IM_SHA1_SHANI (checked once per process). */
int im_sha1_have_shani(void);
/** Whether this CPU runs IM_SHA1_X8, IM_SHA1_X16 and IM_SHA1_X32, which
 *  need IM_SHA1_SHANI too (checked once per process). */
int im_sha1_have_x8(void);

/**
 * A hasher using @p impl. The caller frees it with im_sha1_free().
 *
 * @return 0, -ENOMEM, or -ENOTSUP for IM_SHA1_SHANI, IM_SHA1_X8,
 *         IM_SHA1_X16 or IM_SHA1_X32 on a CPU without what it needs, and
 *         for IM_SHA1_OPENSSL (or IM_SHA1_AUTO falling back to it) when
 *         libcrypto cannot be loaded.
 */
int im_sha1_new(enum im_sha1_impl impl, struct im_sha1 **out);
void im_sha1_free(struct im_sha1 *h);

/** The implementation @p h uses (never IM_SHA1_AUTO). */
enum im_sha1_impl im_sha1_impl(const struct im_sha1 *h);

/* ---- Hashing ------------------------------------------------------------- */

/**
 * SHA-1 of each of the @p n messages of @p v into its out. The messages may
 * overlap each other but not the outputs; their order does not matter.
 *
 * @return 0, or -ENOMEM when OpenSSL failed (it fails on allocation only).
 */
int im_sha1_many(struct im_sha1 *h, const struct im_sha1_msg *v, size_t n);

#endif
