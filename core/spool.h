/**
 * @file spool.h
 * A spool of records: written once in order, read back once in the same
 * order. A one-pass scan (scan.h, im_scan_first()) keeps each document's
 * term ids in one until the lexicon exists.
 *
 * Records stay in memory up to a budget; past it, what is in memory is
 * appended to a temporary file and memory starts again, so a tree of any
 * size costs at most the budget, rounded up to the chunks memory is taken
 * in (256 KiB, then 2 MiB; plus one record larger than that). The file
 * is created in a directory the caller names, with O_TMPFILE where the file
 * system has it (else mkstemp() and unlink() at once): it has no name, so
 * nothing is left behind by a crash. Records are this process's own bytes
 * and never outlive it: no format, no checksum.
 *
 * Life cycle: im_spool_new(), any number of im_spool_append(), then
 * im_spool_rewind() once and im_spool_next() until it says the end;
 * im_spool_free() at any point.
 *
 * Thread-safety: none; a spool belongs to one thread at a time.
 */
#ifndef IM_SPOOL_H
#define IM_SPOOL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct im_spool;

/**
 * A spool that keeps up to @p budget bytes in memory (0: no limit, never
 * spills) and spills into a file created in @p dir (not opened before it is
 * needed; copied). Caller frees with im_spool_free().
 *
 * @return 0 or -ENOMEM.
 */
int im_spool_new(const char *dir, size_t budget, struct im_spool **out);

/** Free the spool, its memory and its file. NULL is allowed. */
void im_spool_free(struct im_spool *sp);

/**
 * Append one record, the concatenation of @p iov[0 .. @p n). Not after
 * im_spool_rewind().
 *
 * @return 0, -ENOMEM, -EFBIG for a record of 4 GiB or more, -EINVAL after
 *         a rewind, or the negative errno of creating or writing the file
 *         (-ENOSPC, -EACCES, ...). On error the record is not in the spool.
 */
int im_spool_append(struct im_spool *sp, const struct iovec *iov, int n);

/**
 * The record last appended, its @p *len bytes in memory, or NULL after
 * im_spool_rewind() or before any record. Valid as long as
 * im_spool_spilled() says what it said just after that append (a spill
 * moves the records in memory to the file) and until the rewind. A
 * one-pass scan finds an exact copy's record this way.
 */
const void *im_spool_last(const struct im_spool *sp, size_t *len);

/**
 * Stop writing and go back to the first record.
 *
 * @return 0 or the negative errno of flushing or seeking the file.
 */
int im_spool_rewind(struct im_spool *sp);

/**
 * The next record: *rec points at its @p *len bytes, 8-byte aligned, valid
 * until the next call; in a spool that never spilled (im_spool_spilled()
 * 0), until im_spool_free(): the records are read where they were written.
 * A one-pass scan's workers then sign each other's records in place.
 *
 * @return 1 with a record, 0 at the end, -ENOMEM, -EIO for a file that came
 *         back shorter than written, or the read's negative errno.
 */
int im_spool_next(struct im_spool *sp, const void **rec, size_t *len);

/** Bytes written to the file so far (0 if it never spilled). */
uint64_t im_spool_spilled(const struct im_spool *sp);

/** Records appended. */
uint64_t im_spool_records(const struct im_spool *sp);

#endif
