/**
 * @file test_mem.c
 * Tables, blocks and buffers apart from the heap (core/mem.h): zeroed,
 * aligned as promised, and a growing buffer keeps its bytes when it moves
 * from the heap to a mapping and between mappings; the same in the heap of
 * the command line, and what it has no room for is mapped.
 */
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unit.h"
#include "mem.h"

/* Under AddressSanitizer or valgrind (malloc_is_glibcs(), unit.h) there is
 * no heap of glibc's: there only what the blocks hold is checked, not where
 * they are. */

static bool all_zero(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

START_TEST(test_table_alloc_zeroed_and_aligned)
{
	static const size_t sizes[] = {0,
				       1,
				       4096,
				       100000,
				       IM_TABLE_HUGE - 1,
				       IM_TABLE_HUGE,
				       IM_HUGE_PAGE,
				       3 * IM_HUGE_PAGE + 5};
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		unsigned char *p = im_table_alloc(n);

		ck_assert_ptr_nonnull(p);
		ck_assert_uint_eq((uintptr_t)p % page, 0);
		if (n >= IM_TABLE_HUGE)
			ck_assert_uint_eq((uintptr_t)p % IM_HUGE_PAGE, 0);
		ck_assert(all_zero(p, n));
		memset(p, 0xa5, n); /* every byte asked for is writable */
		im_table_free(p, n);
	}
	im_table_free(NULL, 100);
}
END_TEST

START_TEST(test_block_alloc_zeroed_and_writable)
{
	static const size_t sizes[] = {0,
				       1,
				       4096,
				       100000,
				       IM_TABLE_HUGE,
				       IM_HUGE_PAGE - 1,
				       IM_HUGE_PAGE,
				       3 * IM_HUGE_PAGE + 5};
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		unsigned char *p = im_block_alloc(n);

		ck_assert_ptr_nonnull(p);
		ck_assert_uint_eq((uintptr_t)p % page, 0);
		if (n >= IM_HUGE_PAGE)
			ck_assert_uint_eq((uintptr_t)p % IM_HUGE_PAGE, 0);
		ck_assert(all_zero(p, n));
		memset(p, 0xa5, n);
		im_block_free(p, n);
	}
	im_block_free(NULL, 100);
}
END_TEST

static void fill(char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (char)(i * 31 + seed);
}

static bool same_fill(const char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (char)(i * 31 + seed))
			return false;
	return true;
}

START_TEST(test_buf_grow_keeps_bytes)
{
	char *p = NULL, *before;
	size_t cap = 0, was;

	ck_assert_int_eq(im_buf_grow(&p, &cap, 100), 0);
	ck_assert_uint_ge(cap, 100);
	fill(p, cap, 1);
	/* Room enough: nothing moves. */
	before = p;
	was = cap;
	ck_assert_int_eq(im_buf_grow(&p, &cap, was), 0);
	ck_assert_ptr_eq(p, before);
	ck_assert_uint_eq(cap, was);
	/* From the heap into a mapping. */
	ck_assert_int_eq(im_buf_grow(&p, &cap, IM_MEM_MAPPED + 7), 0);
	ck_assert_uint_ge(cap, IM_MEM_MAPPED + 7);
	ck_assert(same_fill(p, was, 1));
	fill(p, cap, 2);
	/* From one mapping into a larger one. */
	was = cap;
	ck_assert_int_eq(im_buf_grow(&p, &cap, 3 * was), 0);
	ck_assert_uint_ge(cap, 3 * was);
	ck_assert(same_fill(p, was, 2));
	memset(p, 0, cap);
	im_buf_free(p, cap);

	/* A first growth straight into a mapping, and an empty free. */
	p = NULL;
	cap = 0;
	ck_assert_int_eq(im_buf_grow(&p, &cap, 5 * IM_MEM_MAPPED), 0);
	memset(p, 1, cap);
	im_buf_free(p, cap);
	im_buf_free(NULL, 0);
}
END_TEST

START_TEST(test_buf_grow_refuses_overflow)
{
	char *p = NULL;
	size_t cap = 0;

	ck_assert_int_eq(im_buf_grow(&p, &cap, 1000), 0);
	memset(p, 7, cap);
	ck_assert_int_lt(im_buf_grow(&p, &cap, SIZE_MAX), 0);
	/* Left as it was. */
	ck_assert_uint_eq(cap, 1024);
	ck_assert_int_eq(p[cap - 1], 7);
	im_buf_free(p, cap);
}
END_TEST

/*
 * A heap of @p mib MiB that the next blocks come from, as tools/imatch.c
 * makes it: taken and freed at once, never trimmed. Check runs each test
 * in a process of its own, so this stays in the test that calls it.
 */
static void heap_of(size_t mib)
{
	char *p;
	volatile uintptr_t lo; /* read after the free: not the pointer */

	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 256 << 20);
	p = malloc(mib << 20);
	ck_assert_ptr_nonnull(p);
	lo = (uintptr_t)p;
	free(p);
	im_mem_use_heap((void *)lo, (void *)(lo + (mib << 20)));
}

/* In the heap of the command line (im_mem_use_heap()): a table is zeroed
 * even where the heap held bytes before, and a buffer keeps its bytes as
 * it grows past the heap, into a mapping. */
START_TEST(test_heap_tables_zeroed_buffers_kept)
{
	static const size_t sizes[] = {1, 100000, IM_TABLE_HUGE,
				       3 * IM_HUGE_PAGE + 5, IM_HEAP_MOST};
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	char *p = NULL;
	size_t cap = 0, was;

	heap_of(24);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		unsigned char *dirty = malloc(n + 4 * page), *t;

		ck_assert_ptr_nonnull(dirty);
		memset(dirty, 0xa5, n + 4 * page);
		free(dirty);
		t = im_table_alloc(n);
		ck_assert_ptr_nonnull(t);
		ck_assert_msg(!malloc_is_glibcs() || im_heap_holds(t),
			      "a table of %zu bytes is in the heap", n);
		ck_assert_uint_eq((uintptr_t)t % page, 0);
		ck_assert_msg(all_zero(t, n), "a table of %zu bytes is zeroed",
			      n);
		memset(t, 0xa5, n);
		im_table_free(t, n);
	}
	ck_assert_int_eq(im_buf_grow(&p, &cap, IM_MEM_MAPPED + 1), 0);
	ck_assert(!malloc_is_glibcs() || im_heap_holds(p));
	fill(p, cap, 3);
	was = cap;
	ck_assert_int_eq(im_buf_grow(&p, &cap, IM_HEAP_MOST + 1), 0);
	ck_assert(!im_heap_holds(p));
	ck_assert(same_fill(p, was, 3));
	im_buf_free(p, cap);
}
END_TEST

/* What the heap has no room for is mapped, on whole huge pages, as without
 * it, and each is freed where it came from. */
START_TEST(test_heap_full_maps_the_rest)
{
	unsigned char *t[6];
	size_t n = IM_HUGE_PAGE + 100, held = 0;

	heap_of(6);
	for (size_t i = 0; i < 6; i++) {
		t[i] = im_table_alloc(n);
		ck_assert_ptr_nonnull(t[i]);
		ck_assert(all_zero(t[i], n));
		memset(t[i], (int)i + 1, n);
		if (im_heap_holds(t[i]))
			held++;
		else
			ck_assert_uint_eq((uintptr_t)t[i] % IM_HUGE_PAGE, 0);
	}
	ck_assert_msg((!malloc_is_glibcs() || held >= 1) && held <= 2,
		      "%zu tables of 2 MiB in 6 MiB", held);
	for (size_t i = 0; i < 6; i++) {
		ck_assert_int_eq(t[i][n - 1], (int)i + 1);
		im_table_free(t[i], n);
	}
}
END_TEST

static Suite *mem_suite(void)
{
	Suite *s = suite_create("mem");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_table_alloc_zeroed_and_aligned);
	tcase_add_test(tc, test_block_alloc_zeroed_and_writable);
	tcase_add_test(tc, test_buf_grow_keeps_bytes);
	tcase_add_test(tc, test_buf_grow_refuses_overflow);
	tcase_add_test(tc, test_heap_tables_zeroed_buffers_kept);
	tcase_add_test(tc, test_heap_full_maps_the_rest);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(mem_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
