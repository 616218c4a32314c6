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
 * Errors: NULL / -ENOMEM when out of memory or the size overflows.
 * Thread-safety: reentrant, no state.
 */
#ifndef IM_MEM_H
#define IM_MEM_H

#include <stddef.h>

#define IM_HUGE_PAGE ((size_t)2 << 20)

/** The size from which im_table_alloc() gives whole huge pages: from half
 *  of one, one fault instead of 256 or more. */
#define IM_TABLE_HUGE (IM_HUGE_PAGE / 2)

/**
 * @p size bytes of zeroed memory, page-aligned (so no slot of a table
 * straddles two cache lines). Free with im_table_free() and the same size.
 */
void *im_table_alloc(size_t size);

/** Unmap a block of im_table_alloc(@p size); NULL is ignored. */
void im_table_free(void *p, size_t size);

/**
 * @p size bytes of zeroed memory, page-aligned, for a block that may be
 * written only in part: below IM_HUGE_PAGE its pages come one at a time,
 * on first touch (zeroing a whole huge page for a few hundred KiB cost more
 * than faulting those in), from IM_HUGE_PAGE on it is im_table_alloc()'s.
 * Free with im_block_free() and the same size.
 */
void *im_block_alloc(size_t size);

/** Unmap a block of im_block_alloc(@p size); NULL is ignored. */
void im_block_free(void *p, size_t size);

/**
 * Grow the byte buffer *p of *cap bytes to hold at least @p need (doubling),
 * keeping its first *cap bytes. Below IM_MEM_MAPPED bytes it lives on the
 * heap (realloc), from there on in im_table_alloc() blocks: free it with
 * im_buf_free(*p, *cap) only.
 * @return 0, or -ENOMEM (the buffer is left as it was).
 */
int im_buf_grow(char **p, size_t *cap, size_t need);

/** The capacity from which im_buf_grow() maps a buffer apart. */
#define IM_MEM_MAPPED IM_HUGE_PAGE

/** Free a buffer of im_buf_grow() with capacity @p cap. */
void im_buf_free(char *p, size_t cap);

#endif
