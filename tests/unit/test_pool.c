/**
 * @file test_pool.c
 * The record pool (core/index/pool.h): records of many sizes do not
 * overlap, keep their bytes, are reused once put back, and big ones work.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "pool.h"

/* Records of the randomized tests; a quarter of them under valgrind, where
 * the pool is bypassed and every record is malloc'd. */
#define N 20000

START_TEST(test_pool_records_keep_their_bytes)
{
	static unsigned char *rec[N];
	static size_t size[N];
	unsigned char want[2 * IM_POOL_MAX];
	struct im_pool p;
	int n = under_valgrind_quarter(N);

	im_pool_init(&p);
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < n; i++) {
			if (rec[i] && (i + round) % 3)
				continue;
			im_pool_put(&p, rec[i], size[i]);
			/* Sizes up to twice IM_POOL_MAX: some are malloc'd. */
			size[i] = 1 + (size_t)(i * 7919 + round * 31) %
					      (2 * IM_POOL_MAX);
			rec[i] = im_pool_get(&p, size[i]);
			ck_assert_ptr_nonnull(rec[i]);
			ck_assert_uint_eq((uintptr_t)rec[i] % 8, 0);
			memset(rec[i], (unsigned char)i, size[i]);
		}
		for (int i = 0; i < n; i++) {
			memset(want, (unsigned char)i, size[i]);
			ck_assert_msg(!memcmp(rec[i], want, size[i]),
				      "record %d overwritten", i);
		}
	}
	for (int i = 0; i < n; i++)
		im_pool_put(&p, rec[i], size[i]);
	im_pool_free(&p);
}
END_TEST

START_TEST(test_pool_reuses_what_was_put_back)
{
	struct im_pool p;
	void *a, *b;

	im_pool_init(&p);
	a = im_pool_get(&p, 100);
	im_pool_put(&p, a, 100);
	b = im_pool_get(&p, 97); /* the same 8-byte step: 104 */
	if (!im_pool_bypassed())
		ck_assert_ptr_eq(a, b);
	im_pool_put(&p, b, 97);
	im_pool_put(&p, NULL, 5);
	im_pool_free(&p);
}
END_TEST

START_TEST(test_hpool_handles_name_their_records)
{
	static unsigned char *rec[N];
	static uint32_t h[N];
	static size_t size[N];
	unsigned char want[2 * IM_POOL_MAX];
	struct im_hpool p;
	int n = under_valgrind_quarter(N);

	im_hpool_init(&p);
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < n; i++) {
			if (rec[i] && (i + round) % 3)
				continue;
			if (rec[i])
				im_hpool_put(&p, h[i], size[i]);
			/* Sizes up to twice IM_POOL_MAX: some have a block
			 * of their own. */
			size[i] = 1 + (size_t)(i * 7919 + round * 31) %
					      (2 * IM_POOL_MAX);
			rec[i] = im_hpool_get(&p, size[i], &h[i]);
			ck_assert_ptr_nonnull(rec[i]);
			ck_assert_uint_eq((uintptr_t)rec[i] % 8, 0);
			ck_assert_uint_ne(h[i], 0);
			ck_assert_uint_lt(h[i], 1u << 31);
			memset(rec[i], (unsigned char)i, size[i]);
		}
		for (int i = 0; i < n; i++) {
			memset(want, (unsigned char)i, size[i]);
			ck_assert_ptr_eq(im_hpool_at(&p, h[i]), rec[i]);
			ck_assert_msg(!memcmp(rec[i], want, size[i]),
				      "record %d overwritten", i);
		}
	}
	/* A record put back serves the next of its 8-byte step. */
	{
		uint32_t a, b;
		void *ra = im_hpool_get(&p, 100, &a), *rb;

		im_hpool_put(&p, a, 100);
		rb = im_hpool_get(&p, 97, &b);
		if (!im_pool_bypassed()) {
			ck_assert_uint_eq(a, b);
			ck_assert_ptr_eq(ra, rb);
		}
	}
	im_hpool_free(&p); /* records need not be put back */
}
END_TEST

int main(void)
{
	Suite *s = suite_create("pool");
	TCase *tc = tcase_create("pool");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_pool_records_keep_their_bytes);
	tcase_add_test(tc, test_pool_reuses_what_was_put_back);
	tcase_add_test(tc, test_hpool_handles_name_their_records);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
