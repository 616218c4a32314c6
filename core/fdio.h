/**
 * @file fdio.h
 * Writing a whole buffer to a file descriptor, or reading up to a length,
 * however many calls it takes: write(2) and read(2) may move less than
 * asked (a full disk, a signal, a pipe) and fail with EINTR, and every
 * module that saves or reads a file needs the loop around them.
 *
 * Thread-safety: no state; safe from any thread (two threads writing to one
 * descriptor interleave as write(2) does).
 */
#ifndef IM_FDIO_H
#define IM_FDIO_H

#include <stddef.h>

/**
 * Write the @p n bytes at @p p to @p fd, retrying on EINTR and after short
 * writes.
 *
 * @return 0, or -errno of the write that failed (some bytes may have been
 *         written by then).
 */
int im_write_all(int fd, const void *p, size_t n);

/**
 * Read into @p p from @p fd until @p n bytes came or the end of the file,
 * retrying on EINTR and after short reads; *@p got receives how many came,
 * also on failure.
 *
 * @return 0, or -errno of the read that failed.
 */
int im_read_full(int fd, void *p, size_t n, size_t *got);

#endif
