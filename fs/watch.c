/**
 * @file watch.c
 * The inotify watcher: one watch per directory of the source, placed by the
 * scanner as it walks (and here, as directories appear), so the whole tree is
 * followed.
 *
 * Events are read as libuv does (non-blocking fd, retry on EINTR, stop on
 * EAGAIN, step by sizeof(*e) + e->len) and applied to the tree under
 * tree_lock: files closed after writing, created or moved in are queued for
 * the signing workers; deletes and moves out remove nodes; a MOVED_FROM and
 * the MOVED_TO with the same cookie in the same read are one rename (a
 * directory rename renames every document under it in the index). A new
 * directory is walked at once for what was created in it before its watch
 * existed. IN_Q_OVERFLOW asks the scanner for a full rescan; ENOSPC from
 * inotify_add_watch (the watch limit) is reported in `status` and the log,
 * and the scanner then rescans periodically.
 *
 * Watches are added by path "/proc/self/fd/<srcfd>/<relative path>", which
 * resolves through the source's directory fd, never through the mountpoint.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "daemon.h"

#define WATCH_MASK                                                          \
	(IN_CLOSE_WRITE | IN_CREATE | IN_DELETE | IN_MOVED_FROM |          \
	 IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ATTRIB |         \
	 IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK)

int watch_init(struct imfs *fs)
{
	fs->stop_pipe[0] = fs->stop_pipe[1] = -1;
	fs->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (fs->ifd < 0)
		return -errno;
	if (pipe2(fs->stop_pipe, O_CLOEXEC | O_NONBLOCK))
		return -errno;
	return 0;
}

static int wd_map_set(struct imfs *fs, int wd, struct node *n)
{
	if ((size_t)wd >= fs->wd_cap) {
		size_t nc = fs->wd_cap ? fs->wd_cap : 1024;
		while (nc <= (size_t)wd)
			nc *= 2;
		struct node **m = realloc(fs->wd_map, nc * sizeof(*m));
		if (!m)
			return -ENOMEM;
		memset(m + fs->wd_cap, 0, (nc - fs->wd_cap) * sizeof(*m));
		fs->wd_map = m;
		fs->wd_cap = nc;
	}
	fs->wd_map[wd] = n;
	return 0;
}

static struct node *wd_node(struct imfs *fs, int wd)
{
	return wd >= 0 && (size_t)wd < fs->wd_cap ? fs->wd_map[wd] : NULL;
}

void watch_add(struct imfs *fs, struct node *n, const char *path)
{
	char buf[8192];

	if (fs->ifd < 0 || __atomic_load_n(&fs->watch_limit, __ATOMIC_RELAXED))
		return;
	/* "/." for the root: IN_DONT_FOLLOW must not stop at the fd's link. */
	if ((size_t)snprintf(buf, sizeof(buf), "/proc/self/fd/%d/%s",
			     fs->srcfd, *path ? path : ".") >= sizeof(buf))
		return; /* too deep to watch: the periodic rescan sees it */
	int wd = inotify_add_watch(fs->ifd, buf, WATCH_MASK);
	if (wd < 0) {
		if (errno == ENOSPC) {
			__atomic_store_n(&fs->watch_limit, 1, __ATOMIC_RELAXED);
			imfs_log(LOG_WARNING,
				 "inotify watch limit reached after %llu "
				 "directories (raise fs.inotify.max_user_watches); "
				 "falling back to a rescan every %u s",
				 (unsigned long long)fs->watches,
				 fs->rescan_secs);
		}
		return;
	}
	struct node *old = wd_node(fs, wd);
	if (old == n)
		return;
	if (old)
		old->wd = -1; /* the same directory under a new node */
	else
		__atomic_add_fetch(&fs->watches, 1, __ATOMIC_RELAXED);
	if (n->wd >= 0 && wd_node(fs, n->wd) == n) {
		fs->wd_map[n->wd] = NULL;
		__atomic_sub_fetch(&fs->watches, 1, __ATOMIC_RELAXED);
	}
	n->wd = wd;
	wd_map_set(fs, wd, n);
}

void watch_forget(struct imfs *fs, struct node *n)
{
	if (n->wd < 0)
		return;
	if (wd_node(fs, n->wd) == n) {
		fs->wd_map[n->wd] = NULL;
		/* The directory may live on elsewhere (moved out). */
		inotify_rm_watch(fs->ifd, n->wd);
		__atomic_sub_fetch(&fs->watches, 1, __ATOMIC_RELAXED);
	}
	n->wd = -1;
}

static bool name_wanted(struct imfs *fs, const char *name)
{
	return fs->params.hidden || name[0] != '.';
}

static char *join(const char *dir, const char *name)
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

/*
 * A directory appeared at @p path (new, or moved in from outside): watch it
 * and everything under it, and queue its files. Runs under tree_lock; the
 * walk is of metadata only (readdir and fstatat), and new directories are
 * normally small.
 */
static void add_tree(struct imfs *fs, struct node *dir, const char *path,
		     int depth)
{
	int fd = -1;
	DIR *d = NULL;
	struct dirent *de;

	watch_add(fs, dir, path);
	fd = openat(fs->srcfd, *path ? path : ".",
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || depth > 256)
		goto out;
	d = fdopendir(fd);
	if (!d)
		goto out;
	fd = -1;
	while ((de = readdir(d))) {
		struct stat st;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (!name_wanted(fs, de->d_name))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW))
			continue;
		if (fs->state_ino && st.st_dev == fs->state_dev &&
		    st.st_ino == fs->state_ino)
			continue;
		if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
			continue;
		char *cp = join(path, de->d_name);
		if (!cp)
			continue;
		struct node *c = view_ensure(fs, cp, S_ISDIR(st.st_mode));
		if (c) {
			c->seen = fs->scan_gen;
			view_set_stat(c, &st);
			if (S_ISDIR(st.st_mode))
				add_tree(fs, c, cp, depth + 1);
			else
				scanner_queue(fs, c);
		}
		free(cp);
	}
out:
	if (d)
		closedir(d);
	if (fd >= 0)
		close(fd);
}

/* Something named @p name appeared in @p dir: a file to sign or a tree. */
static void appeared(struct imfs *fs, struct node *dir, const char *name,
		     bool is_dir)
{
	char *dp = view_path(dir);
	char *path = dp ? join(dp, name) : NULL;

	if (!path)
		goto out;
	struct node *n = view_ensure(fs, path, is_dir);
	if (!n)
		goto out;
	n->seen = fs->scan_gen;
	if (is_dir) {
		struct stat st;
		if (!fstatat(fs->srcfd, path, &st, AT_SYMLINK_NOFOLLOW))
			view_set_stat(n, &st);
		add_tree(fs, n, path, 0);
	} else {
		/* The mode and owner now; the rest once signed. */
		struct stat st;
		if (!fstatat(fs->srcfd, path, &st, AT_SYMLINK_NOFOLLOW)) {
			if (!S_ISREG(st.st_mode)) {
				view_remove(fs, n);
				goto out;
			}
			view_set_stat(n, &st);
		}
		scanner_queue(fs, n);
	}
out:
	free(dp);
	free(path);
}

static void vanished(struct imfs *fs, struct node *dir, const char *name)
{
	struct node *n = view_child(fs, dir, name);
	if (n)
		view_remove(fs, n);
}

/* The mode or owner of an entry changed; a file may have become readable. */
static void attrib(struct imfs *fs, struct node *dir, const char *name)
{
	struct node *n = name ? view_child(fs, dir, name) : dir;
	struct stat st;

	if (!n)
		return;
	char *path = view_path(n);
	if (path && !fstatat(fs->srcfd, *path ? path : ".", &st,
			     AT_SYMLINK_NOFOLLOW)) {
		view_set_stat(n, &st);
		if (n->status == IM_DOC_ERROR)
			scanner_queue(fs, n);
	}
	free(path);
}

/* A MOVED_FROM waiting for its MOVED_TO. By path: the node itself may be
 * freed by a sweep before the pair arrives. */
struct pending_move {
	uint32_t cookie;
	char *path; /* malloc'ed, or NULL */
};

static void move_out(struct imfs *fs, struct pending_move *mv)
{
	if (!mv->path)
		return;
	struct node *n = view_lookup(fs, mv->path);
	if (n)
		view_remove(fs, n);
	free(mv->path);
	mv->path = NULL;
}

static void handle(struct imfs *fs, const struct inotify_event *e,
		   struct pending_move *mv)
{
	struct node *dir = wd_node(fs, e->wd);
	const char *name = e->len ? e->name : NULL;
	bool is_dir = e->mask & IN_ISDIR;

	if (e->mask & IN_Q_OVERFLOW) {
		imfs_log(LOG_NOTICE, "inotify queue overflow: rescanning");
		scanner_request_rescan(fs);
		return;
	}
	if (e->mask & IN_IGNORED) {
		if (dir && dir->wd == e->wd) {
			fs->wd_map[e->wd] = NULL;
			dir->wd = -1;
			__atomic_sub_fetch(&fs->watches, 1, __ATOMIC_RELAXED);
		}
		return;
	}
	if (!dir || (dir->flags & NODE_DEAD))
		return;
	if (e->mask & (IN_DELETE_SELF | IN_MOVE_SELF)) {
		/* The parent's event does the work; the root has none. */
		if (dir == fs->root && (e->mask & IN_DELETE_SELF))
			imfs_log(LOG_WARNING, "the source directory was deleted");
		return;
	}
	if (!name)
		return;
	if (!name_wanted(fs, name)) {
		/* Renamed to a hidden name: gone from the view. */
		if (e->mask & IN_MOVED_FROM)
			vanished(fs, dir, name);
		return;
	}
	if (e->mask & IN_MOVED_FROM) {
		move_out(fs, mv); /* an earlier unpaired move left the tree */
		struct node *n = view_child(fs, dir, name);
		if (n) {
			mv->path = view_path(n);
			mv->cookie = e->cookie;
		}
		return;
	}
	if (e->mask & IN_MOVED_TO) {
		struct node *n = NULL;
		if (mv->path && mv->cookie == e->cookie) {
			n = view_lookup(fs, mv->path);
			free(mv->path);
			mv->path = NULL;
		}
		if (n) {
			if (!view_move(fs, n, dir, name)) {
				if (!(n->flags & NODE_DIR))
					scanner_queue(fs, n); /* cheap check */
				return;
			}
			view_remove(fs, n);
		}
		appeared(fs, dir, name, is_dir);
		return;
	}
	if (e->mask & IN_CREATE) {
		appeared(fs, dir, name, is_dir);
		return;
	}
	if (e->mask & IN_CLOSE_WRITE) {
		struct node *n = view_child(fs, dir, name);
		if (n && !(n->flags & NODE_DIR))
			scanner_queue(fs, n);
		else if (!n)
			appeared(fs, dir, name, false);
		return;
	}
	if (e->mask & IN_DELETE) {
		vanished(fs, dir, name);
		return;
	}
	if (e->mask & IN_ATTRIB)
		attrib(fs, dir, name);
}

static void *watcher_main(void *arg)
{
	struct imfs *fs = arg;
	char buf[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));
	struct pending_move mv = { 0, NULL };

	for (;;) {
		struct pollfd pfd[2] = {
			{ .fd = fs->ifd, .events = POLLIN },
			{ .fd = fs->stop_pipe[0], .events = POLLIN },
		};
		/* A lone MOVED_FROM waits one short poll for its MOVED_TO. */
		int r = poll(pfd, 2, mv.path ? 20 : -1);
		if (r < 0 && errno != EINTR)
			break;
		if (pfd[1].revents || fs->stop)
			break;
		if (r == 0 && mv.path) {
			pthread_rwlock_wrlock(&fs->tree_lock);
			move_out(fs, &mv);
			pthread_rwlock_unlock(&fs->tree_lock);
			continue;
		}
		for (;;) {
			ssize_t n = read(fs->ifd, buf, sizeof(buf));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			pthread_rwlock_wrlock(&fs->tree_lock);
			for (char *p = buf; p < buf + n;) {
				const struct inotify_event *e = (const void *)p;
				__atomic_add_fetch(&fs->events, 1, __ATOMIC_RELAXED);
				handle(fs, e, &mv);
				p += sizeof(*e) + e->len;
			}
			pthread_rwlock_unlock(&fs->tree_lock);
		}
	}
	free(mv.path);
	return NULL;
}

int watch_start(struct imfs *fs)
{
	if (fs->ifd < 0)
		return -EBADF;
	if (pthread_create(&fs->watcher_tid, NULL, watcher_main, fs))
		return -EAGAIN;
	fs->watcher_started = true;
	return 0;
}

void watch_stop(struct imfs *fs)
{
	if (fs->watcher_started) {
		ssize_t r = write(fs->stop_pipe[1], "x", 1);
		(void)r;
		pthread_join(fs->watcher_tid, NULL);
		fs->watcher_started = false;
	}
	if (fs->ifd >= 0)
		close(fs->ifd);
	if (fs->stop_pipe[0] >= 0)
		close(fs->stop_pipe[0]);
	if (fs->stop_pipe[1] >= 0)
		close(fs->stop_pipe[1]);
	fs->ifd = fs->stop_pipe[0] = fs->stop_pipe[1] = -1;
	free(fs->wd_map);
	fs->wd_map = NULL;
	fs->wd_cap = 0;
}
