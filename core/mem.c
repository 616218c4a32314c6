/**
 * @file mem.c
 * Tables and buffers mapped apart from the heap, or in a heap on huge pages
 * (mem.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mem.h"

/* The heap's part on huge pages, set once by im_mem_use_heap(). */
static const char *heap_lo, *heap_hi;

void im_mem_use_heap(const void *lo, const void *hi)
{
	heap_lo = lo;
	heap_hi = hi;
}

bool im_heap_holds(const void *p)
{
	const char *brk_now;

	if (!heap_lo || (const char *)p < heap_lo || (const char *)p >= heap_hi)
		return false;
	/* Only below the break is it the heap's: past it, a trim gave the
	 * range back and a mapping may have come in its place (under
	 * valgrind, the range is no brk heap at all). sbrk(0) reads glibc's
	 * copy of the break: no system call. */
	brk_now = sbrk(0);
	return brk_now != (void *)-1 && (const char *)p < brk_now;
}

void *im_heap_take(size_t size, size_t align)
{
	void *p;

	if (!heap_lo || size > IM_HEAP_MOST || posix_memalign(&p, align, size))
		return NULL;
	/* Past the huge pages, or mapped by malloc(): a mapping of ours is
	 * as good, and it is what a free of this address would expect. */
	if (im_heap_holds(p) && size <= (size_t)(heap_hi - (const char *)p))
		return p;
	free(p);
	return NULL;
}

static size_t table_span(size_t size)
{
	size_t align = size < IM_TABLE_HUGE ? (size_t)sysconf(_SC_PAGESIZE)
					    : IM_HUGE_PAGE;

	return (size + align - 1) & ~(align - 1);
}

/* im_table_alloc() apart from the heap. */
static void *table_map(size_t size)
{
	size_t len, extra;
	char *base, *p;

	if (size > SIZE_MAX / 2 - IM_HUGE_PAGE)
		return NULL;
	len = table_span(size ? size : 1);
	extra = len < IM_HUGE_PAGE ? 0 : IM_HUGE_PAGE;
	/* Every page gets written: fault them in at once, but for huge pages,
	 * which come one fault for 2 MiB once madvise()d. */
	base = mmap(NULL, len + extra, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | (extra ? 0 : MAP_POPULATE),
		    -1, 0);
	if (base == MAP_FAILED)
		return NULL;
	p = base;
	if (extra) {
		p = (char *)(((uintptr_t)base + IM_HUGE_PAGE - 1) &
			     ~(uintptr_t)(IM_HUGE_PAGE - 1));
		if (p > base)
			munmap(base, (size_t)(p - base));
		if (base + extra > p)
			munmap(p + len, (size_t)(base + extra - p));
		madvise(p, len, MADV_HUGEPAGE); /* a hint: failure is fine */
	}
	return p;
}

static void table_unmap(void *p, size_t size)
{
	if (p)
		munmap(p, table_span(size ? size : 1));
}

void *im_table_alloc(size_t size)
{
	void *p = im_heap_take(size ? size : 1, (size_t)sysconf(_SC_PAGESIZE));

	/* Memory the heap gave out before holds what was written there. */
	return p ? memset(p, 0, size) : table_map(size);
}

void im_table_free(void *p, size_t size)
{
	if (im_heap_holds(p))
		free(p);
	else
		table_unmap(p, size);
}

static size_t page_span(size_t size)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	return (size + page - 1) & ~(page - 1);
}

void *im_block_alloc(size_t size)
{
	void *p;

	if (size >= IM_HUGE_PAGE)
		return table_map(size);
	p = mmap(NULL, page_span(size ? size : 1), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

void im_block_free(void *p, size_t size)
{
	if (size >= IM_HUGE_PAGE)
		table_unmap(p, size);
	else if (p)
		munmap(p, page_span(size ? size : 1));
}

int im_buf_grow(char **p, size_t *cap, size_t need)
{
	size_t c = *cap ? *cap : 64;
	char *q;

	if (need <= *cap)
		return 0;
	while (c < need) {
		if (c > SIZE_MAX / 4)
			return -ENOMEM;
		c *= 2;
	}
	if (c < IM_MEM_MAPPED) {
		q = realloc(*p, c);
		if (!q)
			return -ENOMEM;
	} else {
		q = im_heap_take(c, 64);
		if (!q)
			q = table_map(c);
		if (!q)
			return -ENOMEM;
		if (*cap)
			memcpy(q, *p, *cap);
		im_buf_free(*p, *cap);
	}
	*p = q;
	*cap = c;
	return 0;
}

void im_buf_free(char *p, size_t cap)
{
	if (cap < IM_MEM_MAPPED || im_heap_holds(p))
		free(p);
	else
		im_table_free(p, cap);
}
