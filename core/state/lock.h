/**
 * @file lock.h
 * One daemon per state directory (DESIGN §4: "it is locked").
 *
 * Two daemons sharing a state directory overwrite each other's cache. The
 * lock is flock(LOCK_EX) on DIR/lock, a file that holds the holder's pid as
 * one decimal line (and a NUL: binary, never a document when a tree holds
 * the state directory) so that the one refused can name it. The kernel drops the
 * lock when the holder exits, however it exits (SIGKILL included), so a
 * stale lock file is harmless: it is only ever locked, never trusted for
 * its existence. A daemon keeps the lock until its final save is on disk,
 * so the next one waits for that save instead of racing it.
 *
 * flock() locks belong to the open file description: they survive fork()
 * (daemonizing), and a child that goes on holding the fd keeps the lock
 * after its parent exits; im_state_lock_own() then writes the child's pid.
 *
 * Thread-safety: a lock is used by one thread at a time; different locks
 * are independent.
 */
#ifndef IM_STATE_LOCK_H
#define IM_STATE_LOCK_H

#include <sys/types.h>

struct im_state_lock;

/**
 * Lock the state directory @p dir, waiting up to @p wait_ms milliseconds
 * for a holder to let go (0: try once). On success the lock file holds our
 * pid and the caller owns *out (im_state_unlock()).
 *
 * @param holder  if not NULL, receives on -EWOULDBLOCK the pid written by
 *                the holder (0 if it wrote none yet).
 * @return 0; -EWOULDBLOCK when another process still holds it; -EROFS or
 *         -EACCES when DIR/lock cannot be created or opened for writing
 *         (a read-only state directory); -ENOMEM; another negative errno
 *         from open or flock.
 */
int im_state_lock(const char *dir, unsigned wait_ms, struct im_state_lock **out,
		  pid_t *holder);

/**
 * Write the calling process's pid into the lock file (after fork(): the
 * child now holds the lock). @return 0 or a negative errno.
 */
int im_state_lock_own(struct im_state_lock *l);

/** Let go of the lock and free @p l (NULL is allowed). */
void im_state_unlock(struct im_state_lock *l);

#endif
