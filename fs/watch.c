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
#include <time.h>
#include <unistd.h>

#include "daemon.h"

#define WATCH_MASK                                                          \
	(IN_CLOSE_WRITE | IN_MODIFY | IN_CREATE | IN_DELETE | IN_MOVED_FROM | \
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

int watch_path(struct imfs *fs, const char *path)
{
	char buf[8192];

	if (fs->ifd < 0 || __atomic_load_n(&fs->watch_limit, __ATOMIC_RELAXED))
		return -1;
	/* "/." for the root: IN_DONT_FOLLOW must not stop at the fd's link. */
	if ((size_t)snprintf(buf, sizeof(buf), "/proc/self/fd/%d/%s",
			     fs->srcfd, *path ? path : ".") >= sizeof(buf))
		return -1; /* too deep to watch */
	int wd = inotify_add_watch(fs->ifd, buf, WATCH_MASK);
	if (wd < 0 && errno == ENOSPC &&
	    !__atomic_exchange_n(&fs->watch_limit, 1, __ATOMIC_RELAXED))
		imfs_log(LOG_WARNING,
			 "inotify watch limit reached after %llu directories "
			 "(raise fs.inotify.max_user_watches); falling back to "
			 "a rescan every %u s",
			 (unsigned long long)fs->watches, fs->rescan_secs);
	return wd;
}

void watch_bind(struct imfs *fs, struct node *n, int wd)
{
	if (wd < 0)
		return;
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

/* What a look at the disk found, applied under tree_lock afterwards. */
struct found {
	char *path;
	struct stat st;
	int wd; /* directories */
};

struct found_list {
	struct found *v;
	size_t n, cap;
};

static void found_release(struct found_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].path);
	free(l->v);
	l->v = NULL;
	l->n = l->cap = 0;
}

static struct found *found_add(struct found_list *l, char *path,
			       const struct stat *st)
{
	if (l->n == l->cap) {
		size_t nc = l->cap ? l->cap * 2 : 16;
		struct found *v = realloc(l->v, nc * sizeof(*v));
		if (!v) {
			free(path);
			return NULL;
		}
		l->v = v;
		l->cap = nc;
	}
	struct found *f = &l->v[l->n++];
	f->path = path;
	f->st = *st;
	f->wd = -1;
	return f;
}

/*
 * Look at @p path with no lock held: a file, or a directory, which is
 * watched and then walked at once for what was created in it before its
 * watch existed (what comes after the watch raises events).
 */
static void look(struct imfs *fs, const char *path, struct found_list *l,
		 int depth)
{
	struct stat st;
	struct dirent *de;
	DIR *d;

	if (fstatat(fs->srcfd, path, &st, AT_SYMLINK_NOFOLLOW))
		return;
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
		return;
	if (fs->state_ino && st.st_dev == fs->state_dev &&
	    st.st_ino == fs->state_ino)
		return;
	if (fs->fuse_dev && st.st_dev == fs->fuse_dev)
		return; /* our own mount */
	char *cp = strdup(path);
	struct found *f = cp ? found_add(l, cp, &st) : NULL;
	if (!f || !S_ISDIR(st.st_mode) || depth > 256)
		return;
	f->wd = watch_path(fs, path);
	int fd = openat(fs->srcfd, path,
			O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    !name_wanted(fs, de->d_name))
			continue;
		char *sub = join(path, de->d_name);
		if (sub)
			look(fs, sub, l, depth + 1);
		free(sub);
	}
	closedir(d);
}

static bool changed(const struct node *n, const struct stat *st)
{
	return n->status == NODE_UNKNOWN || n->status == IM_DOC_ERROR ||
	       n->size != (uint64_t)st->st_size || n->src_ino != st->st_ino ||
	       n->mtime_ns != (int64_t)st->st_mtim.tv_sec * 1000000000 +
				      st->st_mtim.tv_nsec;
}

/* Apply what look() found. tree_lock held exclusively. */
static void apply_found(struct imfs *fs, struct found_list *l, bool resign)
{
	for (size_t i = 0; i < l->n; i++) {
		struct found *f = &l->v[i];
		bool dir = S_ISDIR(f->st.st_mode);
		struct node *n = view_ensure(fs, f->path, dir);
		if (!n)
			continue;
		n->seen = fs->scan_gen;
		view_set_stat(fs, n, &f->st);
		if (dir)
			watch_bind(fs, n, f->wd);
		else if (resign || changed(n, &f->st))
			scanner_queue(fs, n);
	}
}

static void vanished(struct imfs *fs, struct node *dir, const char *name)
{
	struct node *n = view_child(fs, dir, name);
	if (n)
		view_remove(fs, n);
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

/*
 * Files written without a close-after-write (truncate(2), or a writer that
 * keeps its file open): IN_MODIFY puts them here, and they are looked at
 * MODIFY_SETTLE_MS after their last IN_MODIFY unless IN_CLOSE_WRITE came
 * first. Writers that close (the usual case) are signed once, on close.
 */
#define MODIFY_SETTLE_MS 100
#define MODIFY_MAX 4096

struct modified {
	char **paths;
	int64_t *when; /* ms, monotonic */
	size_t n, cap;
};

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void modified_clear(struct modified *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->paths[i]);
	m->n = 0;
}

/* Remember (or refresh) @p path; takes ownership of it. */
static void modified_add(struct imfs *fs, struct modified *m, char *path)
{
	for (size_t i = 0; i < m->n; i++) {
		if (!strcmp(m->paths[i], path)) {
			m->when[i] = now_ms();
			free(path);
			return;
		}
	}
	if (m->n == MODIFY_MAX) {
		/* Too many files being written: let a rescan catch up. */
		modified_clear(m);
		scanner_request_rescan(fs);
	}
	if (m->n == m->cap) {
		size_t nc = m->cap ? m->cap * 2 : 16;
		char **p = realloc(m->paths, nc * sizeof(*p));
		if (p)
			m->paths = p;
		int64_t *w = realloc(m->when, nc * sizeof(*w));
		if (w)
			m->when = w;
		if (!p || !w) {
			free(path);
			return;
		}
		m->cap = nc;
	}
	m->paths[m->n] = path;
	m->when[m->n++] = now_ms();
}

static void modified_forget(struct modified *m, const char *path)
{
	for (size_t i = 0; i < m->n; i++) {
		if (!strcmp(m->paths[i], path)) {
			free(m->paths[i]);
			m->paths[i] = m->paths[--m->n];
			m->when[i] = m->when[m->n];
			return;
		}
	}
}

/* What an event leaves to do once tree_lock is released: look at a path. */
struct look_req {
	char *path;  /* malloc'ed, or NULL for nothing */
	bool resign; /* queue files even if they look unchanged */
	bool shallow;
};

static void want_look(struct node *dir, const char *name,
		      struct look_req *req, bool resign, bool shallow)
{
	char *dp = view_path(dir);
	req->path = dp ? join(dp, name) : NULL;
	req->resign = resign;
	req->shallow = shallow;
	free(dp);
}

/* Apply one event. tree_lock held exclusively; disk I/O left in @p req. */
static void handle(struct imfs *fs, const struct inotify_event *e,
		   struct pending_move *mv, struct look_req *req,
		   struct modified *mod)
{
	struct node *dir = wd_node(fs, e->wd);
	const char *name = e->len ? e->name : NULL;

	if (e->mask & IN_Q_OVERFLOW) {
		static int64_t last_said = -100000;
		if (scanner_request_rescan(fs) && now_ms() - last_said > 10000) {
			imfs_log(LOG_NOTICE, "inotify queue overflow: rescanning");
			last_said = now_ms(); /* the watcher thread only */
		}
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
		if (n && !view_move(fs, n, dir, name)) {
			/* Renamed within the tree: signatures follow. A file
			 * renamed over after a write (editors' save) is
			 * checked against its size, mtime and inode. */
			want_look(dir, name, req, false, true);
			return;
		}
		if (n)
			view_remove(fs, n);
		want_look(dir, name, req, true, false);
		return;
	}
	if (e->mask & IN_CREATE) {
		want_look(dir, name, req, true, false);
		return;
	}
	if (e->mask & IN_MODIFY) {
		struct node *n = view_child(fs, dir, name);
		if (n && !(n->flags & NODE_DIR)) {
			char *p = view_path(n);
			if (p)
				modified_add(fs, mod, p);
		}
		return;
	}
	if (e->mask & IN_CLOSE_WRITE) {
		struct node *n = view_child(fs, dir, name);
		if (mod->n) {
			char *p = n ? view_path(n) : NULL;
			if (p)
				modified_forget(mod, p);
			free(p);
		}
		if (n && !(n->flags & NODE_DIR))
			scanner_queue(fs, n);
		else if (!n)
			want_look(dir, name, req, true, true);
		return;
	}
	if (e->mask & IN_DELETE) {
		vanished(fs, dir, name);
		return;
	}
	if (e->mask & IN_ATTRIB)
		want_look(dir, name, req, false, true);
}

/* Do a look the last event asked for, then apply it under the lock again. */
static void do_look(struct imfs *fs, struct look_req *req)
{
	struct found_list l = { NULL, 0, 0 };

	pthread_rwlock_unlock(&fs->tree_lock);
	look(fs, req->path, &l, req->shallow ? 1000 : 0);
	pthread_rwlock_wrlock(&fs->tree_lock);
	/* Apply only if the parent is still where it was meanwhile. */
	char *slash = strrchr(req->path, '/');
	if (slash)
		*slash = 0;
	struct node *parent = view_lookup(fs, slash ? req->path : "");
	if (parent && (parent->flags & NODE_DIR))
		apply_found(fs, &l, req->resign);
	found_release(&l);
	free(req->path);
	req->path = NULL;
}

/* Look at the files whose writes have settled. tree_lock not held. */
static void settle(struct imfs *fs, struct modified *m)
{
	int64_t now = now_ms();

	for (size_t i = 0; i < m->n;) {
		if (now - m->when[i] < MODIFY_SETTLE_MS) {
			i++;
			continue;
		}
		struct look_req req = { m->paths[i], false, true };
		m->paths[i] = m->paths[--m->n];
		m->when[i] = m->when[m->n];
		pthread_rwlock_wrlock(&fs->tree_lock);
		do_look(fs, &req); /* unlocks around the stat; frees the path */
		pthread_rwlock_unlock(&fs->tree_lock);
	}
}

static void *watcher_main(void *arg)
{
	struct imfs *fs = arg;
	char buf[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));
	struct pending_move mv = { 0, NULL };
	struct look_req req = { NULL, false, false };
	struct modified mod = { NULL, NULL, 0, 0 };

	for (;;) {
		struct pollfd pfd[2] = {
			{ .fd = fs->ifd, .events = POLLIN },
			{ .fd = fs->stop_pipe[0], .events = POLLIN },
		};
		/* A lone MOVED_FROM waits one short poll for its MOVED_TO. */
		int r = poll(pfd, 2, mv.path ? 20 : mod.n ? MODIFY_SETTLE_MS / 2 : -1);
		if (r < 0 && errno != EINTR)
			break;
		if (pfd[1].revents || fs->stop)
			break;
		if (r == 0 && mv.path) {
			pthread_rwlock_wrlock(&fs->tree_lock);
			move_out(fs, &mv);
			pthread_rwlock_unlock(&fs->tree_lock);
		}
		if (mod.n)
			settle(fs, &mod);
		if (r == 0)
			continue;
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
				handle(fs, e, &mv, &req, &mod);
				if (req.path)
					do_look(fs, &req);
				p += sizeof(*e) + e->len;
			}
			pthread_rwlock_unlock(&fs->tree_lock);
		}
	}
	free(mv.path);
	modified_clear(&mod);
	free(mod.paths);
	free(mod.when);
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
