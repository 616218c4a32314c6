/**
 * @file mem.h
 * Large zeroed tables and growing byte buffers mapped apart from the heap,
 * on transparent huge pages where the kernel offers them; internal to core.
 *
 * Why: a page touched for the first time costs a fault (about 1.5 us in a VM:
 * the trap, zeroing, cgroup accounting), and a first scan touches its large
 * buffers once: the 2 MB file of the licences corpus cost 500 faults in the
 * read buffer and 300 in its term set, a tenth of the scan with the rest.
 * A block of IM_TABLE_HUGE or more is rounded up to whole huge pages,
 * aligned to them and madvise()d: one fault per 2 MiB, and lookups in a
 * lexicon of a million terms do not also miss the TLB. A smaller one is
 * populated in one system call. Mapping apart also keeps free() of a large
 * block from raising glibc's mmap threshold, after which a scan's buffers
 * stay resident in the heap (1.6 MB more at the peak of a first scan of the
 * bench corpus, from the freed tables of a growing df).
 *
 * A short-lived process whose heap is itself on huge pages and never
 * trimmed (the command line: tools/imatch.c) takes tables and buffers of
 * up to IM_HEAP_MOST from that part of the heap instead, while it has room
 * (im_mem_use_heap(), im_heap_take()): there a block shares its huge pages
 * with its neighbours, where a mapping of its own rounds it up to whole
 * ones, and a block freed by one step of a run is memory the next one
 * takes without a fault. A first scan of the copy-free licences (5.9 MB)
 * zeroed 7 huge pages and 160 small ones apart from start-up, now 5 and
 * none: 3 to 5% less CPU time (2% for the kernel docs, 7 huge pages
 * still).
 *
 * Errors: NULL / -ENOMEM when out of memory or the size overflows.
 * Thread-safety: reentrant; im_mem_use_heap() is process-wide and comes
 * before the first block.
 */
#ifndef IM_MEM_H
#define IM_MEM_H

#include <stdbool.h>
#include <stddef.h>

#define IM_HUGE_PAGE ((size_t)2 << 20)

/** The size from which im_table_alloc() gives whole huge pages: from half
 *  of one, one fault instead of 256 or more. */
#define IM_TABLE_HUGE (IM_HUGE_PAGE / 2)

/**
 * @p size bytes of zeroed memory, page-aligned (so no slot of a table
 * straddles two cache lines); in the heap of im_mem_use_heap(), aligned to
 * no more than a page. Free with im_table_free() and the same size.
 */
void *im_table_alloc(size_t size);

/** Unmap a block of im_table_alloc(@p size); NULL is ignored. */
void im_table_free(void *p, size_t size);

/**
 * @p size bytes of zeroed memory, page-aligned, for a block that may be
 * written only in part: below IM_HUGE_PAGE its pages come one at a time,
 * on first touch (zeroing a whole huge page for a few hundred KiB cost more
 * than faulting those in), from IM_HUGE_PAGE on in whole huge pages, as
 * im_table_alloc() maps them. Never in the heap: a page not written costs
 * nothing. Free with im_block_free() and the same size.
 */
void *im_block_alloc(size_t size);

/** Unmap a block of im_block_alloc(@p size); NULL is ignored. */
void im_block_free(void *p, size_t size);

/**
 * Grow the byte buffer *p of *cap bytes to hold at least @p need (doubling),
 * keeping its first *cap bytes. Below IM_MEM_MAPPED bytes it lives on the
 * heap (realloc), from there on in im_table_alloc() blocks (not zeroed):
 * free it with im_buf_free(*p, *cap) only.
 * @return 0, or -ENOMEM (the buffer is left as it was).
 */
int im_buf_grow(char **p, size_t *cap, size_t need);

/** The capacity from which im_buf_grow() maps a buffer apart. */
#define IM_MEM_MAPPED IM_HUGE_PAGE

/** Free a buffer of im_buf_grow() with capacity @p cap. */
void im_buf_free(char *p, size_t cap);

/* ---- The heap of a short-lived process --------------------------------- */

/** The largest block im_heap_take() gives. */
#define IM_HEAP_MOST ((size_t)8 << 20)

/**
 * From now on take tables and growing buffers from the heap (malloc())
 * where it places them within [@p lo, @p hi), the part of the heap on huge
 * pages, of a process that never trims it (see the top of this file);
 * elsewhere they are mapped as before. Process-wide: call it before any
 * block of this module exists and before any thread starts. A daemon does
 * not: its heap would keep the largest of them for its whole life.
 */
void im_mem_use_heap(const void *lo, const void *hi);

/**
 * @p size bytes (up to IM_HEAP_MOST) from the heap of im_mem_use_heap(),
 * aligned to @p align (a power of two, at least sizeof(void *)), not
 * zeroed; free() them. NULL without such a heap or room in it.
 */
void *im_heap_take(size_t size, size_t align);

/** Whether @p p is in the heap of im_mem_use_heap() (NULL: no). */
bool im_heap_holds(const void *p);

#endif
