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

#endif
