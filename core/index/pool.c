/**
 * @file pool.c
 * Records carved from 64 KiB blocks, free lists by size (pool.h). Under
 * AddressSanitizer or valgrind every record is malloc'd, so that they
 * still see each record's bounds and lifetime (a use after free would land
 * on pool memory, which neither can tell from a live record).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* ---- Records named by handles -------------------------------------------- */

#define CHUNK (1u << IM_HPOOL_CHUNK_BITS)

_Static_assert(BLOCK == 8u << IM_HPOOL_STEP_BITS, "steps cover a block");

void im_hpool_init(struct im_hpool *p)
{
	memset(p, 0, sizeof(*p));
	pthread_mutex_init(&p->lock, NULL);
}

static inline uintptr_t *block_entry(struct im_hpool *p, uint32_t b)
{
	return &p->chunk[b / CHUNK][b % CHUNK];
}

/* A block of @p bytes and its number, or 0. Lock held. */
static uint32_t block_new(struct im_hpool *p, size_t bytes)
{
	uint32_t b = p->free_block ? p->free_block : p->nblocks + 1;
	void *mem;

	if (b >= IM_HPOOL_BLOCKS)
		return 0;
	if (!p->chunk[b / CHUNK] &&
	    !(p->chunk[b / CHUNK] = calloc(CHUNK, sizeof(uintptr_t))))
		return 0;
	mem = malloc(bytes);
	if (!mem)
		return 0;
	if (b == p->free_block)
		p->free_block = (uint32_t)(*block_entry(p, b) >> 1);
	else
		p->nblocks = b;
	*block_entry(p, b) = (uintptr_t)mem;
	return b;
}

static inline uint32_t handle(uint32_t b, uint32_t off)
{
	return b << IM_HPOOL_STEP_BITS | off >> 3;
}

/* Put the @p n bytes of @p h on their free list. Lock held. */
static void hpush(struct im_hpool *p, uint32_t h, size_t n)
{
	memcpy(im_hpool_at(p, h), &p->free[n / 8], sizeof(uint32_t));
	p->free[n / 8] = h;
}

void *im_hpool_get(struct im_hpool *p, size_t size, uint32_t *h)
{
	size_t n = round8(size);
	uint32_t b;
	void *r = NULL;

	pthread_mutex_lock(&p->lock);
	if (POOL_BYPASS || n > IM_POOL_MAX) {
		b = block_new(p, size);
		if (b)
			r = im_hpool_at(p, *h = handle(b, 0));
		goto out;
	}
	if (p->free[n / 8]) {
		*h = p->free[n / 8];
		r = im_hpool_at(p, *h);
		memcpy(&p->free[n / 8], r, sizeof(uint32_t));
		goto out;
	}
	if (!p->cur || BLOCK - p->cur_off < n) {
		b = block_new(p, BLOCK);
		if (!b)
			goto out;
		/* The old block's tail serves a record of its size later. */
		if (p->cur && BLOCK - p->cur_off >= 8)
			hpush(p, handle(p->cur, p->cur_off),
			      BLOCK - p->cur_off);
		p->cur = b;
		p->cur_off = 0;
	}
	*h = handle(p->cur, p->cur_off);
	r = im_hpool_at(p, *h);
	p->cur_off += (uint32_t)n;
out:
	pthread_mutex_unlock(&p->lock);
	return r;
}

void im_hpool_put(struct im_hpool *p, uint32_t h, size_t size)
{
	size_t n = round8(size);
	uint32_t b = h >> IM_HPOOL_STEP_BITS;

	pthread_mutex_lock(&p->lock);
	if (POOL_BYPASS || n > IM_POOL_MAX) {
		free((void *)*block_entry(p, b));
		*block_entry(p, b) = (uintptr_t)p->free_block << 1 | 1;
		p->free_block = b;
	} else {
		hpush(p, h, n);
	}
	pthread_mutex_unlock(&p->lock);
}

void im_hpool_free(struct im_hpool *p)
{
	for (uint32_t b = 1; b <= p->nblocks; b++)
		if (!(*block_entry(p, b) & 1))
			free((void *)*block_entry(p, b));
	for (uint32_t c = 0; c < IM_HPOOL_BLOCKS / CHUNK; c++)
		free(p->chunk[c]);
	pthread_mutex_destroy(&p->lock);
	memset(p, 0, sizeof(*p));
}
