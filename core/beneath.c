/**
 * @file beneath.c
 * Opening below a directory fd without following symlinks (see beneath.h).
 *
 * openat2() can fail with EAGAIN under RESOLVE_BENEATH when a rename or a
 * mount somewhere on the system raced with the lookup (the kernel cannot
 * prove the walk stayed inside); a few retries settle it, and after that the
 * component walk, which needs no such proof, answers instead.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <linux/openat2.h>

#include "beneath.h"

#define ALLOWED_FLAGS                                                          \
	(O_ACCMODE | O_DIRECTORY | O_NONBLOCK | O_NOCTTY | O_NOATIME |         \
	 O_NOFOLLOW | O_CLOEXEC)
#define OPENAT2_TRIES 4

/* 0 unknown, 1 the kernel has openat2, -1 it has not. */
static int have_openat2;

/* Refuse absolute paths and "..": both could only lead out. */
static int check_path(const char *path, int flags)
{
	const char *c = path;

	if (flags & ~ALLOWED_FLAGS)
		return -EINVAL;
	if (*path == '/')
		return -EXDEV;
	while (*c) {
		size_t n = strcspn(c, "/");

		if (n == 2 && c[0] == '.' && c[1] == '.')
			return -EXDEV;
		c += n;
		while (*c == '/')
			c++;
	}
	return 0;
}

/* An open of a symlink with O_NOFOLLOW | O_DIRECTORY says ENOTDIR: say
 * ELOOP when it was one, as openat2 does. */
static int symlink_errno(int at, const char *name, int err)
{
	struct stat st;

	if (err == ENOTDIR && !fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) &&
	    S_ISLNK(st.st_mode))
		return -ELOOP;
	return -err;
}

int im_open_beneath_walk(int dirfd, const char *path, int flags, int *out)
{
	const char *c = path;
	char name[256];
	int fd = -1, next, ret;

	*out = -1;
	ret = check_path(path, flags);
	if (ret)
		return ret;
	flags |= O_NOFOLLOW | O_CLOEXEC;
	for (;;) {
		size_t n;
		bool last;

		while (*c == '/')
			c++;
		n = strcspn(c, "/");
		last = c[n + strspn(c + n, "/")] == '\0';
		if (n == 0 || (n == 1 && c[0] == '.')) {
			if (!last) {
				c += n;
				continue;
			}
			/* The path names a directory already reached. */
			next = openat(fd < 0 ? dirfd : fd, ".", flags);
			ret = next < 0 ? -errno : 0;
		} else if (n >= sizeof(name)) {
			ret = -ENAMETOOLONG;
		} else {
			memcpy(name, c, n);
			name[n] = '\0';
			next = openat(fd < 0 ? dirfd : fd, name,
				      last ? flags
					   : O_RDONLY | O_DIRECTORY |
						      O_NOFOLLOW | O_CLOEXEC);
			ret = next < 0 ? symlink_errno(fd < 0 ? dirfd : fd,
						       name, errno)
				       : 0;
		}
		if (fd >= 0)
			close(fd);
		fd = -1;
		if (ret)
			return ret;
		fd = next;
		if (last)
			break;
		c += n;
	}
	*out = fd;
	return 0;
}

static int open_openat2(int dirfd, const char *path, int flags, int *out)
{
	struct open_how how = {
		.flags = (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC),
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
			   RESOLVE_NO_MAGICLINKS,
	};
	long fd;

	for (int i = 0; i < OPENAT2_TRIES; i++) {
		fd = syscall(SYS_openat2, dirfd, *path ? path : ".", &how,
			     sizeof(how));
		if (fd >= 0) {
			*out = (int)fd;
			return 0;
		}
		if (errno != EAGAIN && errno != EINTR)
			return -errno;
	}
	return -EAGAIN;
}

int im_open_beneath(int dirfd, const char *path, int flags, int *out)
{
	int have = __atomic_load_n(&have_openat2, __ATOMIC_RELAXED);
	int ret;

	*out = -1;
	ret = check_path(path, flags);
	if (ret)
		return ret;
	/* One name (what the scans open, relative to the file's directory)
	 * cannot lead out, and O_NOFOLLOW follows no symlink: a plain
	 * openat() opens what openat2() would, 0.2 us sooner per file. A
	 * failure is asked again below, for the errno the contract gives (a
	 * symlink opened with O_DIRECTORY is ENOTDIR here, ELOOP there). */
	if (*path && !strchr(path, '/')) {
		int fd = openat(dirfd, path, flags | O_NOFOLLOW | O_CLOEXEC);

		if (fd >= 0) {
			*out = fd;
			return 0;
		}
	}
	if (have >= 0) {
		ret = open_openat2(dirfd, path, flags, out);
		/* ENOTDIR may mean a symlink opened with O_DIRECTORY: the
		 * walk tells which, and says ELOOP for a symlink. A path
		 * over PATH_MAX is walked one component at a time. */
		if (ret != -ENOSYS && ret != -EAGAIN && ret != -ENOTDIR &&
		    ret != -ENAMETOOLONG) {
			if (!have)
				__atomic_store_n(&have_openat2, 1,
						 __ATOMIC_RELAXED);
			return ret;
		}
		if (ret == -ENOSYS)
			__atomic_store_n(&have_openat2, -1, __ATOMIC_RELAXED);
	}
	return im_open_beneath_walk(dirfd, path, flags, out);
}

int im_open_beneath_same(int dirfd, const char *path, int flags,
			 const struct stat *want, struct stat *st, int *out)
{
	struct stat got;
	int fd, ret;

	*out = -1;
	ret = im_open_beneath(dirfd, path, flags, &fd);
	if (ret)
		return ret;
	if (fstat(fd, &got)) {
		ret = -errno;
		close(fd);
		return ret;
	}
	if (got.st_dev != want->st_dev || got.st_ino != want->st_ino) {
		close(fd);
		return -ESTALE;
	}
	if (st)
		*st = got;
	*out = fd;
	return 0;
}

/* ---- Mounts ------------------------------------------------------------- */

int im_is_imatchfs_mount(dev_t dev)
{
	char *line = NULL;
	size_t cap = 0;
	int ret = 0;
	FILE *f;

	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -errno;
	/* "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw" */
	while (getline(&line, &cap, f) > 0) {
		unsigned maj, min;
		char *sep, type[64];

		if (sscanf(line, "%*u %*u %u:%u", &maj, &min) != 2 ||
		    makedev(maj, min) != dev)
			continue;
		sep = strstr(line, " - ");
		if (sep && sscanf(sep + 3, "%63s", type) == 1 &&
		    !strcmp(type, "fuse.imatchfs")) {
			ret = 1;
			break;
		}
	}
	free(line);
	fclose(f);
	return ret;
}

char *im_path_join(const char *dir, const char *name)
{
	size_t dl = strlen(dir), nl = strlen(name);
	char *s = malloc(dl + nl + 2);

	if (!s)
		return NULL;
	if (dl) {
		memcpy(s, dir, dl);
		s[dl++] = '/';
	}
	memcpy(s + dl, name, nl + 1);
	return s;
}
