/**
 * @file watch.h
 * The inotify watcher: one watch per directory of the source, placed by the
 * scanner as it walks and by the watcher as directories appear, so the whole
 * tree is followed (DESIGN §4). Its thread reads events and applies them to
 * the model: files closed after writing, created or moved in are queued for
 * the workers; deletes and moves out remove nodes; a MOVED_FROM and its
 * MOVED_TO are one rename. IN_Q_OVERFLOW asks the scanner for a rescan; when
 * the watch limit is reached it says so once, and the scanner rescans
 * periodically.
 *
 * Thread-safety: watch_dir() from any thread, no lock needed (it resolves a
 * path); watch_bind(), watch_forget() and watch_recheck() with the tree
 * lock held exclusively (the map from watches to nodes is protected by it);
 * watch_stats() from any thread; the rest from the main thread.
 */
#ifndef IMFS_WATCH_H
#define IMFS_WATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "imfs.h"
#include "tree.h"

struct watch;

struct watch_stats {
	uint64_t watches, events;
	/* Events that change which names exist (create, delete, rename, a
	 * directory's mode, a queue overflow): what a concurrent walk may have
	 * applied out of order (scanner.c, scan_quiet()). Writes are not. */
	uint64_t name_events;
	uint64_t rereads; /* directories read again: events that could not
			     be placed (a path gone by the time it was looked
			     at), names changed during a scan */
	/* Files the watcher was to read again (a name created or moved in
	 * without its pair, a file looked at again, a chmod or chown) that
	 * it found as it had read them before, in the tree or in the saved
	 * cache (moved out of the source and back), and did not read. */
	uint64_t reused;
	bool limit;   /* watches ran out (or no inotify): rescans instead */
	bool settled; /* no event queued or waiting to be paired or read again */
};

/**
 * @return 0, or -ENOMEM. Without inotify (*out is still made) the limit is
 * marked reached, so that the scanner rescans periodically.
 */
int watch_new(struct imfs *fs, struct watch **out);
void watch_free(struct watch *w);
/** Start the thread. @return 0, -EBADF without inotify, or -EAGAIN. */
int watch_start(struct watch *w);
void watch_stop(struct watch *w);

/** Add a watch on directory @p path (relative to SOURCE).
 *  @return the watch descriptor, or -1 (no inotify, limit reached). */
int watch_dir(struct watch *w, const char *path);
/** @p dir is watched as @p wd (-1: nothing). Tree lock exclusive. */
void watch_bind(struct watch *w, struct node *dir, int wd);
/** @p dir leaves the tree: stop watching it. Tree lock exclusive. */
void watch_forget(struct watch *w, struct node *dir);
/**
 * A worker found file @p n gone at its path: deleted, or a parent renamed,
 * before the watcher applied the event (an editor's lock or temporary file
 * lives for milliseconds). Once the watcher has applied the events queued
 * by then, nothing is left to do if they removed it; if not (moved, its
 * event late, or none: a directory not watched), it is queued for signing
 * again, or, with @p look, looked at: signed if there, its directory read
 * again if not. Tree lock exclusive.
 * @return false when the watcher cannot (no inotify, no memory).
 */
bool watch_recheck(struct watch *w, struct node *n, bool look);

/**
 * A scan starts: until watch_scan_end(), the directories in which the
 * watcher applies an event that changes names are held. The scan's walk
 * may apply what it saw in one of them before such an event, over it.
 * Tree lock not held.
 */
void watch_scan_begin(struct watch *w);
/**
 * The scan ended: the directories held since watch_scan_begin() are read
 * again, deep, once the events queued by then are applied (as the watcher
 * reads again a directory whose event named a path gone), which sets right
 * what the walk applied there out of order.
 * @return false when that is not enough: one could not be held (an event
 * of a watch without a directory, a queue overflow, more than the watcher
 * reads again at once, no memory) or handed over (no thread). The caller
 * then rescans. Tree lock not held.
 */
bool watch_scan_end(struct watch *w);
void watch_stats(struct watch *w, struct watch_stats *out);

#endif
