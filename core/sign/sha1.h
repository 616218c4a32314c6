/**
 * @file sha1.h
 * SHA-1 (FIPS 180-4) of many independent messages at once, for the
 * signatures of one document's coordinates (sig.h).
 *
 * One SHA-1 stream on the CPU's SHA extensions (SHA-NI) waits on the
 * latency of sha1rnds4: each four rounds need the previous four. The
 * coordinates of a document are independent messages, so two of them are
 * hashed in one instruction stream, each filling the other's wait. Each
 * lane takes the next message as soon as its own is done, so a long
 * message (coordinate 0 holds about three times the bytes of the others)
 * runs beside several short ones. Measured on the bench corpus's
 * coordinates (about 1 KiB each): see sig.c's commit.
 *
 * Two implementations give the same bytes: IM_SHA1_SHANI (x86-64 with the
 * SHA extensions, chosen at run time) and IM_SHA1_OPENSSL (OpenSSL's SHA1,
 * everywhere; also the reference tests/unit/test_sha1.c checks the other
 * against).
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
	IM_SHA1_AUTO,	 /**< SHA-NI when the CPU has it, else OpenSSL */
	IM_SHA1_OPENSSL, /**< OpenSSL's SHA1, one message after another */
	IM_SHA1_SHANI,	 /**< the SHA extensions, two messages at a time */
};

struct im_sha1;

/* ---- Life cycle ------------------------------------------------------- */

/** Whether this CPU runs IM_SHA1_SHANI (checked once per process). */
int im_sha1_have_shani(void);

/**
 * A hasher using @p impl. The caller frees it with im_sha1_free().
 *
 * @return 0, -ENOMEM, or -ENOTSUP for IM_SHA1_SHANI on a CPU without it.
 */
int im_sha1_new(enum im_sha1_impl impl, struct im_sha1 **out);
void im_sha1_free(struct im_sha1 *h);

/** The implementation @p h uses: IM_SHA1_OPENSSL or IM_SHA1_SHANI. */
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
