/**
 * @file dirgroups.h
 * dup-dirs/ in the view: the groups of duplicate directories that
 * `imatch scan --dirs` prints (core/plan/dupdirs.h), over the live index.
 * Like the removal plan (redundant.h), the groups are made again, lazily,
 * whenever the index's generation moved since they were last made, so
 * dup-dirs/ follows the source at once and costs nothing until listed.
 *
 * A group is named after its first directory (the groups' directories are
 * sorted), so a group keeps its name while its first directory stays in it.
 *
 * Locking: every function but dirgroups_count_update() needs the tree lock
 * held (shared is enough); the groups have their own mutex, taken after the
 * tree lock and before the index's. Callbacks run under that mutex and must
 * not call back into this module.
 */
#ifndef IMFS_DIRGROUPS_H
#define IMFS_DIRGROUPS_H

#include <stdbool.h>
#include <stddef.h>

#include "imfs.h"

struct dirgroups;

/** Caller frees with dirgroups_free(). @return 0 or -ENOMEM. */
int dirgroups_new(struct dirgroups **out);
void dirgroups_free(struct dirgroups *d);

/** Called with one group: its directories (relative paths, sorted, two or
 *  more) and the number of documents in each. Non-zero stops. */
typedef int (*dirgroups_cb)(const char *const *dirs, size_t n, size_t docs,
			    void *arg);

/**
 * Call @p cb for each group, largest first (as `imatch scan --dirs`).
 * @return 0, cb's non-zero value, or -ENOMEM (the groups could not be made).
 */
int dirgroups_foreach(struct imfs *fs, dirgroups_cb cb, void *arg);

/**
 * The group holding directory @p dir (relative path): if there is one and
 * @p cb is not NULL, call it once with the group.
 * @return 1 in a group, 0 not, or -ENOMEM.
 */
int dirgroups_of(struct imfs *fs, const char *dir, dirgroups_cb cb, void *arg);

/**
 * Make the groups current, with NO lock held (the tree lock included): they
 * are made outside the groups' mutex, so that the lookups that need it do
 * not wait for them (redundant_count_update() says why).
 */
void dirgroups_count_update(struct imfs *fs);

/**
 * Groups as last made (never makes them), or -1 when they could not be made
 * or never were. *@p current: whether they are of the index as it is now.
 */
long dirgroups_count(struct imfs *fs, bool *current);

#endif
