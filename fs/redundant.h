/**
 * @file redundant.h
 * The mount's removal plan (DESIGN §2 `redundant/`, §6): exactly what
 * `imatch dedupe --near` with the mount's keep options (-o keep_rule=RULES,
 * -o protect=DIR) plans, computed by core/plan over the live index. It is
 * made again, lazily, whenever the index's generation or a document's
 * size, mtime or source inode (model.h, meta_gen) moved since the last
 * plan, so `redundant/` and `by-doc/.../keeper` follow removals and changes
 * in the source at once. Until redundant_foreach() or redundant_find() is
 * first called, redundant_count_update() keeps the count only and lets the
 * plan go (memory: the plan holds every clustered file).
 *
 * File metadata come from the tree (size and mtime as last signed, the
 * source inode); the device is not kept, so two documents are "the same
 * inode" when their source inode numbers are equal (hard links: a share
 * crossing filesystems could see two unrelated files so, which only keeps
 * one of them off the plan).
 *
 * Locking: every function but redundant_count_update() needs the tree lock
 * held (shared is enough); the plan has its own mutex, taken after the tree
 * lock and before the index's. Callbacks run under that mutex and must not
 * call back into this module. redundant_find() and redundant_foreach() make
 * the plan, when it is not current, under the caller's hold of the tree
 * lock, which a caller that may have it made takes as a long reader
 * (tree_rdlock_long()): a plan takes seconds on a large tree, and so held
 * the lock lets lookups go on while no change lands, which would leave the
 * plan old before it is read (it was then made again).
 */
#ifndef IMFS_REDUNDANT_H
#define IMFS_REDUNDANT_H

#include <stdbool.h>

#include "imfs.h"

struct redundant;

/**
 * The plan of @p fs (fs->opts: keep_rule, protect; fs->source_real for
 * absolute protect directories). Caller frees with redundant_free().
 * On -EINVAL one line saying why was printed (a keep rule or a protect
 * directory outside SOURCE).
 * @return 0, -EINVAL or -ENOMEM.
 */
int redundant_new(const struct imfs *fs, struct redundant **out);
void redundant_free(struct redundant *r);

/** Called with each planned document's path (relative), its keeper's and
 *  its similarity to the keeper (1 for an exact copy). Non-zero stops. */
typedef int (*redundant_cb)(const char *path, const char *keeper,
			    double similarity, void *arg);

/**
 * Call @p cb for each planned document, in plan order.
 * @return 0, cb's non-zero value, or -ENOMEM (the plan could not be made).
 */
int redundant_foreach(struct imfs *fs, redundant_cb cb, void *arg);

/**
 * Make the count of planned documents current, with NO lock held (the tree
 * lock included). The plan is made outside the tree lock, which is taken
 * for each document's metadata only: a plan takes seconds on a large tree
 * (one of 60,000 short payslips, each of them a keeper), and held shared
 * that long, the lock kept every lookup waiting behind the first writer
 * queued for it (it prefers writers). Nor is the plan's mutex held
 * meanwhile. Threads may call it at once: one makes the plan, the others
 * wait for it.
 */
void redundant_count_update(struct imfs *fs);

/**
 * Whether the plan is made and is that of the tree as it is now, so that
 * redundant_find() and redundant_foreach() would not make it. Tree lock
 * held.
 */
bool redundant_current(struct imfs *fs);

/**
 * The number of documents planned as last counted (never makes a plan), or
 * -1 when the plan could not be made or was never counted. *@p current:
 * whether it is that of the tree as it is now.
 */
long redundant_count(struct imfs *fs, bool *current);

/**
 * Whether document @p path is planned; if so and @p cb is not NULL, call it
 * once with the path and its keeper's.
 * @return 1 planned, 0 not, or -ENOMEM.
 */
int redundant_find(struct imfs *fs, const char *path, redundant_cb cb,
		   void *arg);

#endif
