/**
 * @file ino.h
 * The inode numbers of the view, one layout for every module:
 *
 *   1, 2, 3        the root, status, clusters/
 *   4              redundant/
 *   5              dup-dirs/
 *   6..15          reserved for further top-level entries
 *   gen<<35 | slot<<3 | sub
 *                  what belongs to the tree node (slot, gen) (tree.h): its
 *                  by-doc directory (sub 0), dupes/ (1), file (2),
 *                  signatures (3), and the symlink that stands for the
 *                  document in clusters/, others' dupes/, redundant/ and
 *                  as others' keeper (4), the symlink to its cluster (5),
 *                  similarity (6); 7 is free for a further per-document
 *                  entry. Slots start at 2, so these are >= 16.
 *                  A directory's node uses sub 1 for its group in dup-dirs/
 *                  (named after it, the group's first directory) and sub 5
 *                  for its symlink there (a target that moves with renames,
 *                  fetched afresh as a cluster link's is: ops.c).
 *   top bit set    cluster directories (ctab.h)
 *
 * A document's member symlink is one inode wherever it is listed: its target
 * and attributes depend on the document only (st_nlink stays 1, so that
 * cp -a, tar and rsync copy each as a symlink, not as a hard link).
 */
#ifndef IMFS_INO_H
#define IMFS_INO_H

#include <stdint.h>

#include "tree.h"

#define INO_ROOT      1
#define INO_STATUS    2
#define INO_CLUSTERS  3
#define INO_REDUNDANT 4
#define INO_DUPDIRS   5

enum ino_sub {
	SUB_DIR = 0,
	SUB_DUPES = 1,
	SUB_FILE = 2,
	SUB_SIGS = 3,
	SUB_MEMBER = 4,
	SUB_CLUSTER_LINK = 5, /* by-doc/.../cluster */
	SUB_SIMS = 6,	      /* by-doc/.../similarity */
	SUB_COUNT = 7,	      /* subs in use */
	/* A directory's node. */
	SUB_DIRGROUP = SUB_DUPES,	/* dup-dirs/<it>/ */
	SUB_DIRLINK = SUB_CLUSTER_LINK, /* dup-dirs/<group>/<it> */
};

#define INO_SUB_BITS  3
#define INO_SLOT_BITS 32

static inline uint64_t node_ino(const struct node *n, enum ino_sub sub)
{
	return (uint64_t)n->gen << (INO_SLOT_BITS + INO_SUB_BITS) |
	       (uint64_t)n->slot << INO_SUB_BITS | sub;
}

static inline uint32_t ino_slot(uint64_t ino)
{
	return (uint32_t)(ino >> INO_SUB_BITS);
}

static inline uint32_t ino_gen(uint64_t ino)
{
	return (uint32_t)(ino >> (INO_SLOT_BITS + INO_SUB_BITS));
}

static inline enum ino_sub ino_sub(uint64_t ino)
{
	return (enum ino_sub)(ino & ((1u << INO_SUB_BITS) - 1));
}

#endif
