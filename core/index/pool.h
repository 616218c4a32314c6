/**
 * @file pool.h
 * A heap for the many small records of a long-lived structure (the index's
 * documents, the daemon's tree nodes), without malloc's cost per chunk: a
 * malloc'd chunk costs 8 bytes of header and rounds to 16, some 15 bytes
 * per record on average; a pool rounds to 8 and has no header.
 *
 * The pool carves records out of 64 KiB blocks taken with malloc. A freed
 * record goes to a free list of its size (in 8-byte steps) and is given to
 * the next record of that size; blocks are given back only by
 * im_pool_free(). The caller passes the size to im_pool_put(): records
 * know their own. Records over IM_POOL_MAX bytes are malloc'd as usual.
 *
 * Thread-safety: get and put take the pool's mutex and may be called from
 * any thread; im_pool_free() needs that no other thread use the pool.
 */
#ifndef IM_POOL_H
#define IM_POOL_H

#include <pthread.h>
#include <stddef.h>

/** Records above this size come from malloc(). */
#define IM_POOL_MAX 1024

/** Plain struct: initialise with im_pool_init(), no allocation until used. */
struct im_pool {
	pthread_mutex_t lock;
	void *free[IM_POOL_MAX / 8 + 1]; /* by size / 8: freed records */
	char *cur, *end;		 /* what is left of the newest block */
	void *blocks;			 /* every block, chained by its head */
};

void im_pool_init(struct im_pool *p);

/**
 * Memory for a record of @p size bytes, 8-byte aligned, uninitialised.
 * @return it, or NULL when out of memory. Give it back with im_pool_put()
 * and the same @p size.
 */
void *im_pool_get(struct im_pool *p, size_t size);

/** Give back a record of @p size bytes (NULL: nothing). */
void im_pool_put(struct im_pool *p, void *rec, size_t size);

/** Give every block back. Put every record back first: those over
 *  IM_POOL_MAX (and, under AddressSanitizer or valgrind, all) were
 *  malloc'd. The pool needs im_pool_init() before it is used again. */
void im_pool_free(struct im_pool *p);

/** Whether every record is malloc'd (under AddressSanitizer or valgrind,
 *  so that they see each record's bounds and lifetime). */
int im_pool_bypassed(void);

/* ---- Records named by handles ---------------------------------------------
 *
 * struct im_hpool: a pool whose records are named by 4-byte handles, not
 * 8-byte pointers (the index's document table holds one per document).
 * im_hpool_at() turns a handle into the record's address. A handle is
 * below 2^31 and never 0: a caller may give those values meanings of its
 * own. Records are carved from 64 KiB blocks as above; one over IM_POOL_MAX
 * bytes (and, under AddressSanitizer or valgrind, every one) is a block of
 * its own.
 * At most IM_HPOOL_BLOCKS blocks: some 16 GiB of records.
 *
 * Thread-safety: get and put take the pool's mutex; im_hpool_at() takes
 * none, and may run beside them for any handle got before (blocks never
 * move, and the table of their addresses only gains chunks).
 */

#define IM_HPOOL_STEP_BITS  13 /* a handle's 8-byte steps into its block */
#define IM_HPOOL_CHUNK_BITS 9  /* block addresses per chunk: 512 */
#define IM_HPOOL_BLOCKS	    (1u << 18)

struct im_hpool {
	pthread_mutex_t lock;
	uint32_t free[IM_POOL_MAX / 8 + 1]; /* by size / 8: freed records'
					       handles, chained by their
					       first 4 bytes; 0 ends */
	uint32_t cur, cur_off;		    /* newest block, bytes used */
	uint32_t nblocks;		    /* numbers taken; 0 is none */
	uint32_t free_block;		    /* freed numbers, chained */
	/* the blocks' addresses by number, in chunks that never move; a
	 * freed number's entry is (next << 1 | 1) */
	uintptr_t *chunk[IM_HPOOL_BLOCKS >> IM_HPOOL_CHUNK_BITS];
};

void im_hpool_init(struct im_hpool *p);

/**
 * A record of @p size bytes, 8-byte aligned, uninitialised; its handle in
 * *h. @return its address, or NULL when out of memory (or of handles).
 * Give it back with im_hpool_put() and the same @p size.
 */
void *im_hpool_get(struct im_hpool *p, size_t size, uint32_t *h);

/** Give back the record @p h of @p size bytes. */
void im_hpool_put(struct im_hpool *p, uint32_t h, size_t size);

/** The address of record @p h. */
static inline void *im_hpool_at(const struct im_hpool *p, uint32_t h)
{
	uint32_t b = h >> IM_HPOOL_STEP_BITS;
	uintptr_t base = p->chunk[b >> IM_HPOOL_CHUNK_BITS]
				 [b & ((1u << IM_HPOOL_CHUNK_BITS) - 1)];

	return (char *)base +
	       ((size_t)(h & ((1u << IM_HPOOL_STEP_BITS) - 1)) << 3);
}

/** Give every block back; records need not be put back first. The pool
 *  needs im_hpool_init() before it is used again. */
void im_hpool_free(struct im_hpool *p);

#endif
