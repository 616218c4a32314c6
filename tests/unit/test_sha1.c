/*
 * SHA-1 of many messages (core/sign/sha1.h): every implementation against
 * OpenSSL's one-shot digest, on every length from 0 to 300 bytes (every
 * padding case: the tail in one block or two), large messages, batches of
 * every size up to 40 messages of mixed lengths (lanes that end at
 * different blocks and take the next message), batches up to 140 messages
 * against an unmapped page, and the FIPS 180-4 examples.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "unit.h"
#include "sha1.h"

static uint64_t rng = 88172645463325252ull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

#define BIG (1u << 20)

static unsigned char *data;

static void setup(void)
{
	data = malloc(BIG);
	ck_assert_ptr_nonnull(data);
	rng = 7;
	for (size_t i = 0; i < BIG; i++)
		data[i] = (unsigned char)rnd();
}

static void teardown(void)
{
	free(data);
}

static void reference(const void *p, size_t len, uint8_t out[IM_SHA1_LEN])
{
	unsigned int n = 0;

	ck_assert(EVP_Digest(p, len, out, &n, EVP_sha1(), NULL));
	ck_assert_uint_eq(n, IM_SHA1_LEN);
}

/* The implementations this machine runs: OpenSSL always, the others if the
 * CPU has what they need. */
static size_t impls(enum im_sha1_impl v[5])
{
	size_t n = 0;

	v[n++] = IM_SHA1_OPENSSL;
	if (im_sha1_have_shani())
		v[n++] = IM_SHA1_SHANI;
	else
		fprintf(stderr, "test_sha1: no SHA extensions here\n");
	if (im_sha1_have_x8()) {
		v[n++] = IM_SHA1_X8;
		v[n++] = IM_SHA1_X16;
		v[n++] = IM_SHA1_X32;
	} else
		fprintf(stderr, "test_sha1: no AVX-512VL here\n");
	return n;
}

/* Hash @p n messages with @p impl and compare each with the reference. */
static void check_batch(enum im_sha1_impl impl, const struct im_sha1_msg *v,
			size_t n, const char *what)
{
	uint8_t want[IM_SHA1_LEN];
	struct im_sha1 *h;

	ck_assert_int_eq(im_sha1_new(impl, &h), 0);
	ck_assert_int_eq(im_sha1_impl(h), impl);
	/* Not the digests an implementation before left there. */
	for (size_t i = 0; i < n; i++)
		memset(v[i].out, 0xa5, IM_SHA1_LEN);
	ck_assert_int_eq(im_sha1_many(h, v, n), 0);
	for (size_t i = 0; i < n; i++) {
		reference(v[i].data, v[i].len, want);
		ck_assert_msg(!memcmp(v[i].out, want, IM_SHA1_LEN),
			      "impl %d, %s: message %zu of %zu (%zu bytes) "
			      "differs from OpenSSL",
			      (int)impl, what, i, n, v[i].len);
	}
	im_sha1_free(h);
}

START_TEST(test_sha1_fips_examples)
{
	static const struct {
		const char *msg, *hex;
	} ex[] = {
		{"abc", "a9993e364706816aba3e25717850c26c9cd0d89d"},
		{"", "da39a3ee5e6b4b0d3255bfef95601890afd80709"},
		{"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
		 "84983e441c3bd26ebaae4aa1f95129e5e54670f1"},
	};
	enum im_sha1_impl v[5];
	size_t ni = impls(v);

	for (size_t i = 0; i < ni; i++) {
		for (size_t e = 0; e < sizeof(ex) / sizeof(*ex); e++) {
			uint8_t out[IM_SHA1_LEN];
			char hex[2 * IM_SHA1_LEN + 1];
			struct im_sha1_msg m = {ex[e].msg, strlen(ex[e].msg),
						out};
			struct im_sha1 *h;

			ck_assert_int_eq(im_sha1_new(v[i], &h), 0);
			ck_assert_int_eq(im_sha1_many(h, &m, 1), 0);
			im_sha1_free(h);
			for (int b = 0; b < IM_SHA1_LEN; b++)
				snprintf(hex + 2 * b, 3, "%02x", out[b]);
			ck_assert_msg(!strcmp(hex, ex[e].hex),
				      "impl %d: SHA1(\"%s\") = %s, want %s",
				      (int)v[i], ex[e].msg, hex, ex[e].hex);
		}
	}
}
END_TEST

START_TEST(test_sha1_every_short_length)
{
	/* Lengths 0..300 as one batch: the lanes end on every block count. */
	enum { N = 301 };
	static uint8_t out[N][IM_SHA1_LEN];
	static struct im_sha1_msg m[N];
	enum im_sha1_impl v[5];
	size_t ni = impls(v);

	for (size_t len = 0; len < N; len++)
		m[len] = (struct im_sha1_msg){data + len * 7, len, out[len]};
	for (size_t i = 0; i < ni; i++) {
		check_batch(v[i], m, N, "lengths 0..300");
		/* One at a time: the lone lane's path. */
		for (size_t len = 0; len < N; len++)
			check_batch(v[i], &m[len], 1, "one message");
	}
}
END_TEST

START_TEST(test_sha1_mixed_batches)
{
	/* Random lengths, short and long, in batches of 0 to 40 messages
	 * (from a document's K + 1 coordinates to more than X32's lanes),
	 * overlapping in the buffer. */
	enum { MAXB = 40 };
	uint8_t out[MAXB][IM_SHA1_LEN];
	struct im_sha1_msg m[MAXB];
	enum im_sha1_impl v[5];
	size_t ni = impls(v);

	rng = 11;
	for (int round = 0; round < 400; round++) {
		size_t n = (size_t)round % (MAXB + 1);

		for (size_t j = 0; j < n; j++) {
			size_t len = rnd() % 4 ? rnd() % 3000 : rnd() % 70000;
			size_t off = rnd() % (BIG - len);

			m[j] = (struct im_sha1_msg){data + off, len, out[j]};
		}
		for (size_t i = 0; i < ni; i++)
			check_batch(v[i], m, n, "mixed batch");
	}
}
END_TEST

START_TEST(test_sha1_large)
{
	/* Lengths around whole megabytes and a block boundary. */
	static const size_t lens[] = {BIG,	BIG - 1,  BIG - 55,
				      BIG - 56, BIG - 64, 65536 + 119};
	uint8_t out[6][IM_SHA1_LEN];
	struct im_sha1_msg m[6];
	enum im_sha1_impl v[5];
	size_t ni = impls(v);

	for (size_t j = 0; j < 6; j++)
		m[j] = (struct im_sha1_msg){data + (BIG - lens[j]), lens[j],
					    out[j]};
	for (size_t i = 0; i < ni; i++) {
		check_batch(v[i], m, 6, "large");
		check_batch(v[i], m, 1, "one large");
	}
}
END_TEST

START_TEST(test_sha1_batches_at_a_guard_page)
{
	/* Batches as large as a flush of the signer's (sig.c: up to 128
	 * coordinates) and larger, of lengths at the padding's edges, all
	 * equal or one long among short ones, each message ending right
	 * before an unmapped page or starting right after one: a read past a
	 * message (or before it) faults. The messages are read-only: nothing
	 * writes them. */
	static const size_t edge[] = {0,   1,	55,  56,  57,  63,  64,
				      65,  119, 120, 121, 127, 128, 129};
	enum { MAXB = 140, AREA = 1 << 16 };
	static uint8_t out[MAXB][IM_SHA1_LEN];
	static struct im_sha1_msg m[MAXB];
	long page = sysconf(_SC_PAGESIZE);
	size_t area = ((size_t)AREA + (size_t)page - 1) / (size_t)page *
		      (size_t)page;
	enum im_sha1_impl v[5];
	size_t ni = impls(v);
	unsigned char *map, *a;

	map = mmap(NULL, area + 2 * (size_t)page, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(map, MAP_FAILED);
	a = map + page;
	memcpy(a, data, area);
	ck_assert_int_eq(mprotect(map, (size_t)page, PROT_NONE), 0);
	ck_assert_int_eq(mprotect(a + area, (size_t)page, PROT_NONE), 0);
	ck_assert_int_eq(mprotect(a, area, PROT_READ), 0);
	rng = 13;
	for (int round = 0; round < 300; round++) {
		size_t n = round < MAXB ? (size_t)round + 1 : rnd() % (MAXB + 1);
		size_t same = edge[rnd() % (sizeof(edge) / sizeof(*edge))];
		int kind = round % 3; /* edges; all equal; one long */

		for (size_t j = 0; j < n; j++) {
			size_t len = kind == 1 ? same
				     : rnd() % 4
					     ? edge[rnd() % (sizeof(edge) /
							     sizeof(*edge))]
					     : rnd() % 3000;

			if (kind == 2 && j == n / 2)
				len = 20000 + rnd() % 40000;
			m[j] = (struct im_sha1_msg){
				rnd() % 2 ? a + area - len : a, len, out[j]};
		}
		for (size_t i = 0; i < ni; i++)
			check_batch(v[i], m, n, "batch at a guard page");
	}
	ck_assert_int_eq(munmap(map, area + 2 * (size_t)page), 0);
}
END_TEST

START_TEST(test_sha1_auto_and_refusal)
{
	struct im_sha1 *h;

	ck_assert_int_eq(im_sha1_new(IM_SHA1_AUTO, &h), 0);
	ck_assert_int_eq(im_sha1_impl(h), im_sha1_have_x8() ? IM_SHA1_X32
					  : im_sha1_have_shani()
						  ? IM_SHA1_SHANI
						  : IM_SHA1_OPENSSL);
	im_sha1_free(h);
	if (!im_sha1_have_shani()) {
		ck_assert_int_eq(im_sha1_new(IM_SHA1_SHANI, &h), -ENOTSUP);
		ck_assert_ptr_null(h);
	}
	if (!im_sha1_have_x8()) {
		ck_assert_int_eq(im_sha1_new(IM_SHA1_X8, &h), -ENOTSUP);
		ck_assert_ptr_null(h);
		ck_assert_int_eq(im_sha1_new(IM_SHA1_X16, &h), -ENOTSUP);
		ck_assert_ptr_null(h);
		ck_assert_int_eq(im_sha1_new(IM_SHA1_X32, &h), -ENOTSUP);
		ck_assert_ptr_null(h);
	}
}
END_TEST

static Suite *sha1_suite(void)
{
	Suite *s = suite_create("sha1");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_sha1_fips_examples);
	tcase_add_test(tc, test_sha1_every_short_length);
	tcase_add_test(tc, test_sha1_mixed_batches);
	tcase_add_test(tc, test_sha1_large);
	tcase_add_test(tc, test_sha1_batches_at_a_guard_page);
	tcase_add_test(tc, test_sha1_auto_and_refusal);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(sha1_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
