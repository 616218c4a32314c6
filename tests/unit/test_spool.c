/* Unit tests for core/spool.c: records come back in order, byte for byte,
 * from memory and from the spill file alike. */
#include <errno.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "unit.h"
#include "mem.h"
#include "spool.h"

/* Under AddressSanitizer or valgrind (malloc_is_glibcs(), unit.h) their
 * allocators make resident sizes no measure of ours. */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Record i: its length and bytes follow from i alone. */
static size_t rec_len(size_t i, size_t big)
{
	return i % 997 == 5 ? big : (size_t)(i * 7919 % 300);
}

static unsigned char rec_byte(size_t i, size_t j)
{
	return (unsigned char)(i * 31 + j * 7 + (j >> 8));
}

/* Write @p n records through @p sp in two pieces each, read them back. */
static void round_trip(struct im_spool *sp, size_t n, size_t big)
{
	unsigned char *buf = malloc(big > 300 ? big : 300);
	const void *rec;
	size_t len;

	for (size_t i = 0; i < n; i++) {
		size_t l = rec_len(i, big), cut = l ? next_rand() % l : 0;
		struct iovec iov[2] = {{buf, cut}, {buf + cut, l - cut}};

		for (size_t j = 0; j < l; j++)
			buf[j] = rec_byte(i, j);
		ck_assert_int_eq(im_spool_append(sp, iov, 2), 0);
		/* The record just appended is in memory as written. */
		const void *last = im_spool_last(sp, &len);

		ck_assert_msg(last && len == l && !memcmp(last, buf, l),
			      "record %zu: im_spool_last()", i);
	}
	ck_assert_uint_eq(im_spool_records(sp), n);
	ck_assert_int_eq(im_spool_rewind(sp), 0);
	ck_assert_ptr_null(im_spool_last(sp, &len));
	for (size_t i = 0; i < n; i++) {
		ck_assert_int_eq(im_spool_next(sp, &rec, &len), 1);
		ck_assert_msg(len == rec_len(i, big), "record %zu: %zu bytes",
			      i, len);
		ck_assert_msg(((uintptr_t)rec & 7) == 0,
			      "record %zu is 8-byte aligned", i);
		for (size_t j = 0; j < len; j++)
			buf[j] = rec_byte(i, j);
		ck_assert_msg(!memcmp(rec, buf, len), "record %zu's bytes", i);
	}
	ck_assert_int_eq(im_spool_next(sp, &rec, &len), 0);
	ck_assert_int_eq(im_spool_next(sp, &rec, &len), 0);
	free(buf);
}

START_TEST(test_spool_in_memory)
{
	struct im_spool *sp;

	ck_assert_int_eq(im_spool_new("/nonexistent", 0, &sp), 0);
	round_trip(sp, 2000, 5000);
	ck_assert_msg(im_spool_spilled(sp) == 0,
		      "without a budget nothing reaches the file");
	im_spool_free(sp);
}
END_TEST

/* A record im_spool_last() showed stays where it was, with its bytes, until
 * im_spool_spilled() changes. */
START_TEST(test_spool_last_until_a_spill)
{
	struct im_spool *sp;
	unsigned char a[100], b[100];
	struct iovec ia = {a, sizeof(a)}, ib = {b, sizeof(b)};
	const void *first;
	size_t len;
	uint64_t spilled;

	memset(a, 'a', sizeof(a));
	memset(b, 'b', sizeof(b));
	ck_assert_int_eq(im_spool_new("/tmp", 1000, &sp), 0);
	ck_assert_ptr_null(im_spool_last(sp, &len));
	ck_assert_int_eq(im_spool_append(sp, &ia, 1), 0);
	first = im_spool_last(sp, &len);
	spilled = im_spool_spilled(sp);
	for (int i = 0; im_spool_spilled(sp) == spilled; i++) {
		ck_assert_msg(i < 20, "a 1000-byte budget spills by now");
		ck_assert_msg(!memcmp(first, a, sizeof(a)),
			      "append %d: the first record moved before a "
			      "spill",
			      i);
		ck_assert_int_eq(im_spool_append(sp, &ib, 1), 0);
	}
	ck_assert(im_spool_last(sp, &len) != NULL && len == sizeof(b));
	im_spool_free(sp);
}
END_TEST

/* What a spool that never spilled hands out stays valid after the next
 * reads, until it is freed. */
START_TEST(test_spool_unspilled_records_stay)
{
	enum { N = 20000 };
	static const void *recs[N];
	static size_t lens[N];
	unsigned char buf[300];
	struct im_spool *sp;

	ck_assert_int_eq(im_spool_new("/tmp", 0, &sp), 0);
	for (size_t i = 0; i < N; i++) {
		struct iovec iov = {buf, rec_len(i, 300)};

		for (size_t j = 0; j < iov.iov_len; j++)
			buf[j] = rec_byte(i, j);
		ck_assert_int_eq(im_spool_append(sp, &iov, 1), 0);
	}
	ck_assert_int_eq(im_spool_rewind(sp), 0);
	for (size_t i = 0; i < N; i++)
		ck_assert_int_eq(im_spool_next(sp, &recs[i], &lens[i]), 1);
	ck_assert_int_eq(im_spool_spilled(sp), 0);
	for (size_t i = 0; i < N; i++) {
		for (size_t j = 0; j < lens[i]; j++)
			buf[j] = rec_byte(i, j);
		ck_assert_msg(lens[i] == rec_len(i, 300) &&
				      !memcmp(recs[i], buf, lens[i]),
			      "record %zu changed after the reads that "
			      "followed it",
			      i);
	}
	im_spool_free(sp);
}
END_TEST

/* In the heap of the command line (mem.h, im_mem_use_heap()): chunks come
 * from the heap, unzeroed, while it has room, then mapped; records come
 * back all the same, before a spill and after. Check runs each test in a
 * process of its own, so the switch stays in this one. */
START_TEST(test_spool_in_the_heap)
{
	struct im_spool *sp;
	char *p;
	volatile uintptr_t lo; /* read after the free: not the pointer */

	/* A heap of 6 MiB as tools/imatch.c makes it: the rest is mapped. */
	mallopt(M_MMAP_THRESHOLD, 32 << 20); /* none under ASan */
	mallopt(M_TRIM_THRESHOLD, 256 << 20);
	p = malloc((size_t)6 << 20);
	ck_assert_ptr_nonnull(p);
	lo = (uintptr_t)p;
	free(p);
	im_mem_use_heap((void *)lo, (void *)(lo + ((size_t)6 << 20)));
	ck_assert_int_eq(im_spool_new("/nonexistent", 0, &sp), 0);
	round_trip(sp, 20000, (size_t)3 << 19);
	ck_assert_msg(im_spool_spilled(sp) == 0,
		      "without a budget nothing reaches the file");
	im_spool_free(sp);
	ck_assert_int_eq(im_spool_new("/tmp", (size_t)1 << 20, &sp), 0);
	round_trip(sp, 20000, (size_t)3 << 19);
	ck_assert_msg(im_spool_spilled(sp) > 0, "past the budget it spills");
	im_spool_free(sp);
}
END_TEST

START_TEST(test_spool_spills_and_reads_back)
{
	struct im_spool *sp;

	/* Records of up to 1.5 MiB against a 4 KiB budget and the 1 MiB
	 * read buffer: every path of the reader. */
	ck_assert_int_eq(im_spool_new("/tmp", 4096, &sp), 0);
	round_trip(sp, 3000, (size_t)3 << 19);
	ck_assert_msg(im_spool_spilled(sp) > 0, "past the budget it spills");
	im_spool_free(sp);
}
END_TEST

START_TEST(test_spool_empty_and_misuse)
{
	struct im_spool *sp;
	const void *rec;
	size_t len;
	struct iovec iov = {"x", 1};

	ck_assert_int_eq(im_spool_new("/tmp", 16, &sp), 0);
	ck_assert_int_eq(im_spool_next(sp, &rec, &len), -EINVAL);
	ck_assert_int_eq(im_spool_rewind(sp), 0);
	ck_assert_int_eq(im_spool_next(sp, &rec, &len), 0);
	ck_assert_int_eq(im_spool_append(sp, &iov, 1), -EINVAL);
	im_spool_free(sp);
	im_spool_free(NULL);
}
END_TEST

START_TEST(test_spool_unwritable_dir)
{
	struct im_spool *sp;
	char buf[64] = {0};
	struct iovec iov = {buf, sizeof(buf)};

	ck_assert_int_eq(im_spool_new("/nonexistent/spool", 100, &sp), 0);
	ck_assert_int_eq(im_spool_append(sp, &iov, 1), 0);
	ck_assert_int_eq(im_spool_append(sp, &iov, 1), -ENOENT);
	ck_assert_uint_eq(im_spool_records(sp), 1);
	ck_assert_int_eq(im_spool_rewind(sp), 0);
	ck_assert_int_eq(
		im_spool_next(sp, (const void **)&iov.iov_base, &iov.iov_len),
		1);
	ck_assert_uint_eq(iov.iov_len, sizeof(buf));
	im_spool_free(sp);
}
END_TEST

/*
 * This process's anonymous resident bytes, counted page by page from its
 * page tables (/proc/self/smaps_rollup): what the spool's memory costs.
 * statm's count also holds the code pages run for the first time, mapped
 * 64 KiB at a time, and since Linux 6.2 is kept per CPU and read without
 * summing: it said 268 KiB once in CI, where the spool had taken 12.
 */
static size_t resident(void)
{
	char line[256];
	size_t kib = 0;
	bool found = false;
	FILE *f = fopen("/proc/self/smaps_rollup", "r");

	ck_assert_ptr_nonnull(f);
	while (!found && fgets(line, sizeof(line), f))
		found = sscanf(line, "Anonymous: %zu kB", &kib) == 1;
	fclose(f);
	ck_assert_msg(found, "no Anonymous in /proc/self/smaps_rollup");
	return kib << 10;
}

/* A first scan of one file spools a few hundred bytes: it took a whole
 * zeroed huge page for them, 1.8 of the scan's 4.9 MB resident and 0.8 of
 * its 1.9 ms. */
START_TEST(test_spool_few_records_take_few_pages)
{
	struct im_spool *sp;
	char buf[200];
	struct iovec iov = {buf, sizeof(buf)};
	size_t before;

	memset(buf, 'x', sizeof(buf));
	ck_assert_int_eq(im_spool_new("/tmp", 0, &sp), 0);
	before = resident();
	for (int i = 0; i < 50; i++)
		ck_assert_int_eq(im_spool_append(sp, &iov, 1), 0);
	ck_assert_msg(!malloc_is_glibcs() ||
			      resident() - before < (size_t)256 << 10,
		      "50 records of 200 bytes made %zu KiB resident",
		      (resident() - before) >> 10);
	im_spool_free(sp);
}
END_TEST

static Suite *spool_suite(void)
{
	Suite *s = suite_create("spool");
	TCase *tc = tcase_create("spool");

	tcase_add_test(tc, test_spool_in_memory);
	tcase_add_test(tc, test_spool_last_until_a_spill);
	tcase_add_test(tc, test_spool_unspilled_records_stay);
	tcase_add_test(tc, test_spool_spills_and_reads_back);
	tcase_add_test(tc, test_spool_in_the_heap);
	tcase_add_test(tc, test_spool_empty_and_misuse);
	tcase_add_test(tc, test_spool_unwritable_dir);
	tcase_add_test(tc, test_spool_few_records_take_few_pages);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(spool_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
