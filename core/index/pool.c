/**
 * @file pool.c
 * Records carved from 64 KiB blocks, free lists by size (pool.h). Under
 * AddressSanitizer or valgrind every record is malloc'd, so that they
 * still see each record's bounds and lifetime (a use after free would land
 * on pool memory, which neither can tell from a live record).
 */
#include <stdint.h>
#include <stdlib.h>

#include "pool.h"

#define BLOCK (64 * 1024)

static inline size_t round8(size_t size)
{
	return size <= 8 ? 8 : (size + 7) & ~(size_t)7;
}

#if defined(__SANITIZE_ADDRESS__)
#define POOL_BYPASS 1
#elif defined(HAVE_VALGRIND_H)
#include <valgrind/valgrind.h>
/* A client request: a few instructions natively, fixed for the process. */
#define POOL_BYPASS RUNNING_ON_VALGRIND
#else
#define POOL_BYPASS 0
#endif

void im_pool_init(struct im_pool *p)
{
	*p = (struct im_pool){0};
	pthread_mutex_init(&p->lock, NULL);
}

/* Put @p n bytes at @p r on their free list. Lock held. */
static void push(struct im_pool *p, void *r, size_t n)
{
	*(void **)r = p->free[n / 8];
	p->free[n / 8] = r;
}

void *im_pool_get(struct im_pool *p, size_t size)
{
	size_t n = round8(size);
	void *r;

	if (POOL_BYPASS || n > IM_POOL_MAX)
		return malloc(size);
	pthread_mutex_lock(&p->lock);
	r = p->free[n / 8];
	if (r) {
		p->free[n / 8] = *(void **)r;
		goto out;
	}
	if ((size_t)(p->end - p->cur) < n) {
		char *b = malloc(BLOCK);

		if (!b)
			goto out;
		/* The old block's tail serves a record of its size later. */
		if (p->end - p->cur >= 8)
			push(p, p->cur, (size_t)(p->end - p->cur));
		*(void **)b = p->blocks;
		p->blocks = b;
		p->cur = b + 8;
		p->end = b + BLOCK;
	}
	r = p->cur;
	p->cur += n;
out:
	pthread_mutex_unlock(&p->lock);
	return r;
}

void im_pool_put(struct im_pool *p, void *rec, size_t size)
{
	size_t n = round8(size);

	if (!rec)
		return;
	if (POOL_BYPASS || n > IM_POOL_MAX) {
		free(rec);
		return;
	}
	pthread_mutex_lock(&p->lock);
	push(p, rec, n);
	pthread_mutex_unlock(&p->lock);
}

void im_pool_free(struct im_pool *p)
{
	void *b = p->blocks;

	while (b) {
		void *next = *(void **)b;

		free(b);
		b = next;
	}
	pthread_mutex_destroy(&p->lock);
	*p = (struct im_pool){0};
}

int im_pool_bypassed(void)
{
	return POOL_BYPASS;
}
