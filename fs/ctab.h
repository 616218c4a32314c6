/**
 * @file ctab.h
 * Inode numbers of cluster directories. A cluster is named by a signature
 * (DESIGN §2), which the index can look up, but the kernel hands back only an
 * inode number: this table maps the numbers the kernel holds back to names.
 *
 * A cluster's inode number is H(name, v) (top bit set) for the smallest
 * version v not retired. When a cluster's members change, the writer retires
 * its number (ctab_retire()): the old inode then resolves to nothing, and
 * the next lookup gets a fresh number, so a dentry the kernel still holds
 * for the old one (a process's cwd, a listing in flight) can never bring
 * back the old members. An entry lives while the kernel holds a lookup count
 * on it: ctab_ref() for every entry replied, ctab_forget() for every forget.
 * So the table also lists the clusters the kernel may cache (inval.c).
 *
 * Thread-safety: every function takes the table's own mutex, which is never
 * held while calling anything else. Any thread, any other lock held.
 */
#ifndef IMFS_CTAB_H
#define IMFS_CTAB_H

#include <stddef.h>
#include <stdint.h>

#include "sig.h"

#define CTAB_INO_BIT (1ull << 63)

struct ctab;

/** @return 0 or -ENOMEM. Caller frees with ctab_free(). */
int ctab_new(struct ctab **out);
void ctab_free(struct ctab *ct);

/** The inode number cluster @p name has now. */
uint64_t ctab_ino(struct ctab *ct, const struct im_sig *name);
/**
 * The kernel takes @p n references to @p ino, cluster @p name's number from
 * ctab_ino(), read under the tree lock still held. @return 0 or -ENOMEM.
 */
int ctab_ref(struct ctab *ct, const struct im_sig *name, uint64_t ino,
	     uint64_t n);
/** The kernel dropped @p n references to @p ino. */
void ctab_forget(struct ctab *ct, uint64_t ino, uint64_t n);
/** The name behind @p ino. @return 0 or -ENOENT (retired or forgotten). */
int ctab_name(struct ctab *ct, uint64_t ino, struct im_sig *out);
/** Cluster @p name changed: retire its number. @return the retired number,
 *  or 0 if the kernel holds none. */
uint64_t ctab_retire(struct ctab *ct, const struct im_sig *name);
/**
 * A copy of the names with a live number. Caller frees *out.
 * @return the count, or 0 with *out NULL when empty or on ENOMEM.
 */
size_t ctab_names(struct ctab *ct, struct im_sig **out);

#endif
