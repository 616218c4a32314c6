/**
 * @file dupdirs.h
 * Duplicate directories (`imatch scan --dirs`, `dup-dirs/` in the view):
 * directories whose documents are all duplicates of another directory's, so
 * that a whole copied folder shows as one line, as rmlint -D does for exact
 * copies.
 *
 * Directories D and E (neither inside the other) are duplicates when they
 * hold the same number of documents (recursively), every document under D
 * is directly linked to a document under E, and every document under E to
 * one under D. Only documents count: binary or unreadable files in a
 * directory neither help nor hurt. A directory with a document in no
 * cluster has no duplicate. Groups are maximal: a directory is left out when
 * one of its ancestors is in a group, or when its parent holds exactly the
 * same documents (the parent stands for it).
 *
 * Candidates are found without comparing directories pairwise: the
 * documents are sorted so that each directory is one range, and a
 * directory's key (count, sum of a hash of each member's cluster name) comes
 * from prefix sums; only directories with equal keys are then verified link
 * by link.
 *
 * Cost: O(N log N + D log D) for N documents in D directories, plus the
 * links of the documents in candidate directories.
 *
 * Thread-safety: reentrant. The index is only queried; if it changes
 * meanwhile, the answer mixes the two states (see im_plan_from_index()).
 */
#ifndef IM_DUPDIRS_H
#define IM_DUPDIRS_H

#include <stdbool.h>
#include <stddef.h>

#include "index.h"

/** One group of duplicate directories. */
struct im_dupdir_group {
	char **dirs; /**< relative paths, sorted, owned */
	size_t n;    /**< two or more */
	size_t docs; /**< documents in each */
};

/** The groups, largest (most documents) first, ties by first directory.
 *  Owned by the caller: zero it before, im_dupdirs_release() after. */
struct im_dupdirs {
	struct im_dupdir_group *v;
	size_t n;
};

/**
 * Find the duplicate directories among the documents of @p idx.
 *
 * @param exact_only  count exact links only (the directories are then byte
 *                    for byte copies, as far as their documents go).
 * @return 0 or -ENOMEM; on error @p out is empty.
 */
int im_dupdirs_from_index(const struct im_index *idx, bool exact_only,
			  struct im_dupdirs *out);

/** Free everything @p d holds; it is zeroed. */
void im_dupdirs_release(struct im_dupdirs *d);

#endif
