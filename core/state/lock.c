/**
 * @file lock.c
 * flock() on STATE/lock (see lock.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "lock.h"

#define POLL_MS 20

struct im_state_lock {
	int fd;
};

static pid_t read_pid(int fd)
{
	char buf[32];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	long v;

	if (n <= 0)
		return 0;
	buf[n] = '\0';
	v = strtol(buf, NULL, 10);
	return v > 0 ? (pid_t)v : 0;
}

static int write_pid(int fd)
{
	char buf[32];
	/* The NUL makes the file binary to a scan of a tree that holds the
	 * state directory: never a document. */
	int n = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid()) + 1;

	if (ftruncate(fd, 0) || pwrite(fd, buf, (size_t)n, 0) != n)
		return -errno;
	return 0;
}

int im_state_lock(const char *dir, unsigned wait_ms, struct im_state_lock **out,
		  pid_t *holder)
{
	const struct timespec nap = {0, POLL_MS * 1000000L};
	struct im_state_lock *l = NULL;
	unsigned waited = 0;
	char *path = NULL;
	int fd = -1, ret;

	*out = NULL;
	if (holder)
		*holder = 0;
	if (asprintf(&path, "%s/lock", dir) < 0) {
		path = NULL;
		ret = -ENOMEM;
		goto out;
	}
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0) {
		ret = -errno;
		goto out;
	}
	while (flock(fd, LOCK_EX | LOCK_NB)) {
		if (errno == EINTR)
			continue;
		if (errno != EWOULDBLOCK || waited >= wait_ms) {
			ret = -errno;
			if (ret == -EWOULDBLOCK && holder)
				*holder = read_pid(fd);
			goto out;
		}
		nanosleep(&nap, NULL);
		waited += POLL_MS;
	}
	ret = write_pid(fd);
	if (ret)
		goto out;
	l = malloc(sizeof(*l));
	if (!l) {
		ret = -ENOMEM;
		goto out;
	}
	l->fd = fd;
	fd = -1;
	*out = l;
out:
	if (fd >= 0)
		close(fd); /* drops the lock if we had taken it */
	free(path);
	return ret;
}

int im_state_lock_own(struct im_state_lock *l)
{
	return write_pid(l->fd);
}

void im_state_unlock(struct im_state_lock *l)
{
	if (!l)
		return;
	close(l->fd);
	free(l);
}
