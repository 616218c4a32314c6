/**
 * @file status.h
 * The `status` file: `key: value` lines (DESIGN §2). Add a line in
 * status.c's table-like list; scripts read the keys, so never rename one.
 *
 * status_text() is called by view.c with the tree lock held shared, and
 * reads the counts of redundant/ and dup-dirs/ as status_update() last made
 * them: the removal plan takes seconds on a large tree, and made under the
 * tree lock it kept every lookup waiting behind the first writer queued.
 */
#ifndef IMFS_STATUS_H
#define IMFS_STATUS_H

#include <stddef.h>

#include "imfs.h"

/** snprintf-like: write what fits in @p out[0..cap) (@p out may be NULL)
 *  and return the full length. */
size_t status_text(struct imfs *fs, char *out, size_t cap);

/**
 * Bring the counts of redundant/ and dup-dirs/ up to date for the next
 * status_text(), with NO lock held (called as `status` is opened): made
 * again whenever the tree changed once the daemon has converged, at most
 * every second or so before (status.c says why).
 */
void status_update(struct imfs *fs);

#endif
