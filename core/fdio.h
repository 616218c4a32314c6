/**
 * @file fdio.h
 * Writing a whole buffer to a file descriptor, however many calls it takes:
 * write(2) may write less than asked (a full disk, a signal) and fail with
 * EINTR, and every module that saves a file needs the loop around it.
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

#endif
