/**
 * @file inval.h
 * Telling the kernel what changed: the view is cached by the kernel with long
 * timeouts (entries, attributes, directory listings, symlink targets), and
 * every change of the index or the tree is pushed here by the thread that
 * made it, then sent by the invalidation thread with
 * fuse_lowlevel_notify_inval_entry() and _inode().
 *
 * Why a thread of its own: an entry invalidation takes the kernel's lock on
 * the parent directory and waits for lookups in flight there, which wait for
 * FUSE workers, which may wait for the tree lock. The thread that sends
 * therefore holds no lock of ours while it does; the threads that change the
 * view only append to a queue (its own mutex, taken last).
 *
 * Ordering: a change is pushed after it is visible to FUSE workers (in the
 * same critical section), so a lookup that read the old state either
 * finishes before the invalidation reaches its directory or is invalidated
 * by it.
 *
 * If memory runs out while queueing, the thread invalidates the top-level
 * entries instead, which drops everything the kernel cached below them:
 * slower, never stale.
 *
 * Thread-safety: the push functions are safe from any thread with any lock
 * held; they do nothing before inval_start() and after inval_stop().
 */
#ifndef IMFS_INVAL_H
#define IMFS_INVAL_H

#include <stdint.h>

#include "ctab.h"
#include "index.h"

struct fuse_session;
struct inval;

/** @return 0 or -ENOMEM. Caller frees with inval_free() (after stop). */
int inval_new(struct ctab *ct, struct im_index *idx, struct inval **out);
void inval_free(struct inval *iv);

/** Start sending to @p se. @return 0 or -EAGAIN. */
int inval_start(struct inval *iv, struct fuse_session *se);
/** Stop the thread; what is still queued is dropped. Idempotent. */
void inval_stop(struct inval *iv);

/** The kernel's entry @p name in directory @p parent. Copies @p name. */
void inval_entry(struct inval *iv, uint64_t parent, const char *name);
/** The attributes and cached content (or listing) of @p ino. */
void inval_inode(struct inval *iv, uint64_t ino);
/** Cluster @p name changed: its number is retired at once (ctab.h); the
 *  kernel's entry for it and the listing of clusters/ are dropped. Call it
 *  with the tree lock held exclusively, before the change is visible. */
void inval_cluster(struct inval *iv, const struct im_sig *name);
/** Clusters may have disappeared by merging: check every cluster the kernel
 *  holds against the index. */
void inval_clusters_gone(struct inval *iv);

/** Memory ran out while working out what changed: drop everything. */
void inval_all(struct inval *iv);

/** Notifications sent so far (for `status`). */
uint64_t inval_sent(const struct inval *iv);

#endif
