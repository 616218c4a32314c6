/**
 * @file status.h
 * The `status` file: `key: value` lines (DESIGN §2). Add a line in
 * status.c's table-like list; scripts read the keys, so never rename one.
 *
 * Called by view.c with the tree lock held shared.
 */
#ifndef IMFS_STATUS_H
#define IMFS_STATUS_H

#include <stddef.h>

#include "imfs.h"

/** snprintf-like: write what fits in @p out[0..cap) (@p out may be NULL)
 *  and return the full length. */
size_t status_text(struct imfs *fs, char *out, size_t cap);

#endif
