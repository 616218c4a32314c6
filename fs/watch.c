/**
 * @file watch.c
 * The inotify watcher (watch.h).
 *
 * Events are read as libuv does (non-blocking fd, retry on EINTR, stop on
 * EAGAIN, step by sizeof(*e) + e->len) and applied to the model under the
 * tree lock. What needs the disk (a stat, walking a new directory) is
 * collected first with the lock released, then applied: a new directory is
 * walked at once with core's walker (its watch is added before its names
 * are read, so nothing created meanwhile is missed).
 *
 * Watches are added by path "/proc/self/fd/<srcfd>/<relative path>", which
 * resolves through the source's directory fd, never through the mountpoint.
 */
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "beneath.h"
#include "model.h"
#include "scan.h"
#include "scanner.h"
#include "scope.h"
#include "util.h"
#include "watch.h"
#include "workers.h"

#define WATCH_MASK                                                             \
	(IN_CLOSE_WRITE | IN_MODIFY | IN_CREATE | IN_DELETE | IN_MOVED_FROM |  \
	 IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ATTRIB |             \
	 IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK)

/*
 * Files written without a close-after-write (truncate(2), or a writer that
 * keeps its file open): IN_MODIFY puts them here, and they are looked at
 * MODIFY_SETTLE_MS after their last IN_MODIFY unless IN_CLOSE_WRITE came
 * first. Writers that close (the usual case) are signed once, on close.
 */
#define MODIFY_SETTLE_MS 100
#define MODIFY_MAX	 4096
/* A lone MOVED_FROM waits this long for its MOVED_TO (same read, usually). */
#define MOVE_PAIR_MS 20

struct modified {
	char **paths;
	int64_t *when; /* ms, monotonic */
	size_t n, cap;
};

/* A MOVED_FROM waiting for its MOVED_TO. By path: the node itself may be
 * freed by a sweep before the pair arrives. */
/*
 * A node renamed away, until its pair arrives or MOVE_PAIR_MS pass. Held by
 * identity, not by path: something else may take the name meanwhile (a
 * directory hidden, another moved into its place) and must stay.
 */
struct pending_move {
	bool set;
	uint32_t cookie;
	uint32_t slot, gen;
	/* The name it left, when it left it right after something was moved
	 * to it: in renameat2(RENAME_EXCHANGE) both names stay, and are
	 * looked at once the move is settled (malloc'ed; else NULL). */
	char *swapped;
};

/* The last event, when it moved something to a name: RENAME_EXCHANGE
 * gives "moved to NAME" then "moved from NAME" in a row. */
struct last_moved_to {
	bool set;
	int wd;
	char name[NAME_MAX + 1];
};

/*
 * Directories to read again: an event named a path that no longer led
 * anywhere when the watcher looked (renamed or swapped meanwhile), so what
 * it created may be known to no event that will follow. The nearest
 * directory of that path the tree still knows is read again (deep) once
 * the queue is drained: by identity, so wherever it has moved by then.
 */
#define REREAD_MAX 4096

struct node_id {
	uint32_t slot, gen;
};

struct reread {
	struct node_id *v;
	size_t n, cap;
};

/* Files a worker found gone (watch_recheck()), by identity as above; and
 * directories to read again after a scan (watch_scan_end()). */
struct recheck {
	struct {
		uint32_t slot, gen;
		bool look;   /* at the disk, rather than signed again */
		bool reread; /* a directory: want_reread() */
	} * v;
	size_t n, cap;
};

/*
 * Directories whose names changed while a scan ran (watch_scan_begin()):
 * its walk may have applied there what it saw before the change, over it.
 * lost: one could not be held (no node for the watch, no memory, too
 * many, an overflow); only a rescan then sets everything right.
 */
struct scan_names {
	bool on, lost;
	struct reread dirs;
};

struct watch {
	struct imfs *fs;
	int ifd, stop_pipe[2];
	int wake; /* eventfd: a worker handed over files (watch_recheck()) */
	pthread_t tid;
	bool started;
	struct node **wd_map; /* wd -> directory; tree lock */
	size_t wd_cap;
	uint64_t watches, events, name_events; /* atomics */
	int limit;			       /* atomic */
	/* The thread's own. */
	struct pending_move mv;
	struct last_moved_to last_to;
	struct modified mod;
	struct reread rr;
	struct recheck rc;    /* files watch_recheck() was given; tree lock */
	struct scan_names sn; /* tree lock */
	uint64_t rechecks;    /* atomic: given and not looked at yet */
	uint64_t unsettled;   /* atomic: rereads + a move + writes waiting */
	uint64_t rereads;     /* atomic: directories read again */
	uint64_t reused;      /* atomic: watch_stats.reused */
	/* Atomic: the thread is between poll() and count_unsettled(). The
	 * events it read out of the kernel's queue are in no count until
	 * applied, nor the rereads they or a recheck asked for. */
	int busy;
};

int watch_new(struct imfs *fs, struct watch **out)
{
	struct watch *w = calloc(1, sizeof(*w));

	*out = NULL;
	if (!w)
		return -ENOMEM;
	w->fs = fs;
	w->stop_pipe[0] = w->stop_pipe[1] = -1;
	w->wake = -1;
	w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (w->ifd < 0 || pipe2(w->stop_pipe, O_CLOEXEC | O_NONBLOCK)) {
		imfs_log(LOG_WARNING,
			 "inotify unavailable (%s): rescanning "
			 "every %u s",
			 strerror(errno), fs->opts->rescan);
		if (w->ifd >= 0)
			close(w->ifd);
		w->ifd = -1;
		w->limit = 1;
	} else {
		/* Without it, watch_recheck() says no: workers rescan. */
		w->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	}
	*out = w;
	return 0;
}

void watch_free(struct watch *w)
{
	if (!w)
		return;
	if (w->ifd >= 0)
		close(w->ifd);
	if (w->wake >= 0)
		close(w->wake);
	for (int i = 0; i < 2; i++)
		if (w->stop_pipe[i] >= 0)
			close(w->stop_pipe[i]);
	free(w->wd_map);
	free(w->rc.v);
	free(w->sn.dirs.v);
	free(w);
}

void watch_stats(struct watch *w, struct watch_stats *out)
{
	out->watches = __atomic_load_n(&w->watches, __ATOMIC_RELAXED);
	out->events = __atomic_load_n(&w->events, __ATOMIC_RELAXED);
	out->name_events = __atomic_load_n(&w->name_events, __ATOMIC_RELAXED);
	out->limit = __atomic_load_n(&w->limit, __ATOMIC_RELAXED);
	out->rereads = __atomic_load_n(&w->rereads, __ATOMIC_RELAXED);
	out->reused = __atomic_load_n(&w->reused, __ATOMIC_RELAXED);
	/* Asked before busy: an event the thread read out of the queue
	 * before that is then either applied and counted or still busy. */
	int queued = 0;
	bool in_queue =
		w->ifd >= 0 && !ioctl(w->ifd, FIONREAD, &queued) && queued > 0;
	out->settled =
		w->ifd < 0 ||
		(!in_queue && !__atomic_load_n(&w->busy, __ATOMIC_SEQ_CST) &&
		 __atomic_load_n(&w->unsettled, __ATOMIC_RELAXED) == 0 &&
		 __atomic_load_n(&w->rechecks, __ATOMIC_RELAXED) == 0);
}

/* ---- Watches --------------------------------------------------------------- */

static struct node *wd_node(const struct watch *w, int wd)
{
	return wd >= 0 && (size_t)wd < w->wd_cap ? w->wd_map[wd] : NULL;
}

static int wd_map_set(struct watch *w, int wd, struct node *n)
{
	if ((size_t)wd >= w->wd_cap) {
		size_t nc = w->wd_cap ? w->wd_cap : 1024;
		while (nc <= (size_t)wd)
			nc *= 2;
		struct node **m = realloc(w->wd_map, nc * sizeof(*m));
		if (!m)
			return -ENOMEM;
		memset(m + w->wd_cap, 0, (nc - w->wd_cap) * sizeof(*m));
		w->wd_map = m;
		w->wd_cap = nc;
	}
	w->wd_map[wd] = n;
	return 0;
}

int watch_dir(struct watch *w, const char *path)
{
	char buf[64];
	int fd, err;

	if (w->ifd < 0 || __atomic_load_n(&w->limit, __ATOMIC_RELAXED))
		return -1;
	/* Through a directory fd opened below SOURCE: no symlink on the way
	 * is followed, and paths of any length can be watched. "/." so that
	 * IN_DONT_FOLLOW does not stop at the fd's magic link. */
	if (im_open_beneath(w->fs->srcfd, path, O_RDONLY | O_DIRECTORY, &fd))
		return -1;
	snprintf(buf, sizeof(buf), "/proc/self/fd/%d/.", fd);
	int wd = inotify_add_watch(w->ifd, buf, WATCH_MASK);
	err = errno;
	close(fd);
	if (wd < 0 && err == ENOSPC &&
	    !__atomic_exchange_n(&w->limit, 1, __ATOMIC_RELAXED))
		imfs_log(LOG_WARNING,
			 "inotify watch limit reached after %llu directories "
			 "(raise fs.inotify.max_user_watches); falling back to "
			 "a rescan every %u s",
			 (unsigned long long)w->watches, w->fs->opts->rescan);
	return wd;
}

/* Forget the binding of @p wd, if @p n holds it. */
static void unbind(struct watch *w, struct node *n)
{
	if (n->wd >= 0 && wd_node(w, n->wd) == n) {
		w->wd_map[n->wd] = NULL;
		__atomic_sub_fetch(&w->watches, 1, __ATOMIC_RELAXED);
	}
	n->wd = -1;
}

void watch_bind(struct watch *w, struct node *n, int wd)
{
	if (wd < 0)
		return;
	struct node *old = wd_node(w, wd);
	if (old == n)
		return;
	if (old)
		unbind(w, old); /* the same directory under a new node */
	unbind(w, n);
	if (wd_map_set(w, wd, n)) {
		inotify_rm_watch(w->ifd, wd);
		return;
	}
	n->wd = wd;
	__atomic_add_fetch(&w->watches, 1, __ATOMIC_RELAXED);
}

void watch_forget(struct watch *w, struct node *n)
{
	int wd = n->wd;

	if (wd >= 0 && wd_node(w, wd) == n)
		/* The directory may live on elsewhere (moved out). */
		inotify_rm_watch(w->ifd, wd);
	unbind(w, n);
}

/* ---- Looking at the disk (no lock held) --------------------------------------- */

/* What a look at the disk found, applied under the tree lock afterwards. */
struct found {
	char *path;
	struct stat st;
	int wd; /* directories */
};

struct found_list {
	struct watch *w;
	const char *base; /* the looked-at path the walk is under */
	struct found *v;
	size_t n, cap;
	/* A deep look walked the whole directory without an error: what it
	 * did not find below the path is not there. */
	bool complete;
};

static void found_release(struct found_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].path);
	free(l->v);
	l->v = NULL;
	l->n = l->cap = 0;
}

/* Takes ownership of @p path. */
static struct found *found_add(struct found_list *l, char *path,
			       const struct stat *st)
{
	if (!path)
		return NULL;
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

static char *under_base(const struct found_list *l, const char *rel)
{
	return *rel ? im_path_join(l->base, rel) : strdup(l->base);
}

static int walk_dir_cb(const char *rel, const struct stat *st, void *arg)
{
	struct found_list *l = arg;
	struct imfs *fs = l->w->fs;

	if (fs->fuse_dev && st->st_dev == fs->fuse_dev)
		return 0; /* our own mount: view.c shows it empty to us */
	struct found *f = found_add(l, under_base(l, rel), st);
	if (!f)
		return -ENOMEM;
	f->wd = watch_dir(l->w, f->path);
	return 0;
}

static int walk_file_cb(const char *rel, const struct stat *st, void *arg)
{
	struct found_list *l = arg;

	return found_add(l, under_base(l, rel), st) ? 0 : -ENOMEM;
}

/*
 * Look at @p path: a file, or a directory, which is watched and walked (with
 * @p deep) for what was created in it before its watch existed.
 */
static bool path_gone(int err)
{
	return err == ENOENT || err == ENOTDIR || err == ELOOP;
}

/* @return false when @p path no longer led anywhere (see struct reread). */
static bool look(struct watch *w, const char *path, bool deep,
		 struct found_list *l)
{
	struct imfs *fs = w->fs;
	const char *slash = strrchr(path, '/');
	char *dir = slash ? strndup(path, (size_t)(slash - path)) : NULL;
	struct stat st;
	int pfd = -1, ret;

	l->w = w;
	l->base = path;
	if (slash && !dir)
		return true;
	/* The parent below SOURCE only (a component swapped for a symlink
	 * leads nowhere), then the name itself without following it. */
	ret = im_open_beneath(fs->srcfd, dir ? dir : "", O_RDONLY | O_DIRECTORY,
			      &pfd);
	free(dir);
	if (ret)
		return !path_gone(-ret);
	/* The root is "": the directory itself. */
	const char *name = slash ? slash + 1 : *path ? path : ".";
	ret = fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) ? -errno : 0;
	if (ret || (st.st_dev == fs->state_dev && st.st_ino == fs->state_ino) ||
	    !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))) {
		close(pfd);
		return !path_gone(-ret);
	}
	close(pfd);
	/* Left out by -o exclude/include or a .imatchignore: nothing found,
	 * so whatever the tree held there leaves. */
	bool excluded = false;
	ret = im_scope_check(fs->srcfd, fs->opts->params.scope, path,
			     S_ISDIR(st.st_mode), &excluded);
	if (ret || excluded)
		return !path_gone(-ret);
	if (S_ISREG(st.st_mode) || !deep) {
		found_add(l, strdup(path), &st);
		return true;
	}
	/* Walked from the source's fd, so that the .imatchignore files of
	 * its parents apply; the paths come relative to the source. */
	struct im_scan_counts counts = {0};
	struct im_walk_ops ops = {
		.dir = walk_dir_cb,
		.file = walk_file_cb,
		.arg = l,
		.skip_dev = fs->state_dev,
		.skip_ino = fs->state_ino,
		.under = path,
	};
	l->base = "";
	ret = im_walk(fs->srcfd, &fs->opts->params, &ops, &counts);
	l->complete = !ret && !counts.errors;
	return !(ret < 0 && path_gone(-ret));
}

/* File @p n is read anyway, whatever it is found to be: queued or being
 * signed (a write), to be hashed (exact.h), or asked for or expected by
 * the running scan, whose result or sweep would follow what the watcher
 * gave it. */
static bool read_anyway(const struct node *n)
{
	return (n->flags & (NODE_QUEUED | NODE_SIGNING | NODE_HASH)) ||
	       n->scan_reads;
}

/*
 * Whether file @p n, found as @p f, must be read. Not when the tree holds
 * the result of reading it as it is: its size, mtime, inode and ctime are
 * those of its last read (model_unchanged()). That holds also where the
 * caller asks for a read (@p resign: a name created, moved in without its
 * pair, looked at after a worker found it gone), which is for a name that
 * may hold another file now: another file has another inode, and a write
 * moves the ctime. Without @p resign the ctime is not asked: the watcher
 * is told of every write (model_unchanged_watched()). A chmod or chown
 * since (@p perms) may have made the file unreadable to us: read to fail,
 * unless we still may read it (one that was unreadable is an error, which
 * is never unchanged). Tree lock held.
 */
static bool must_read(const struct watch *w, const struct node *n,
		      const struct found *f, bool resign, bool perms)
{
	if (perms && !imfs_may_read(w->fs, f->path, &f->st))
		return true;
	return resign ? !model_unchanged(n, &f->st)
		      : !model_unchanged_watched(n, &f->st);
}

/*
 * Give file @p n, found as @p f, the saved cache's result for it instead of
 * reading it (model_saved_entry()): a directory that comes back (moved out
 * of the source and in again, or renamed while its pair of events was
 * lost, so that it was taken out of the tree and walked as new) brings
 * back files read before. Tree lock held exclusively.
 */
static bool take_saved(struct watch *w, struct node *n, const struct found *f)
{
	struct model *m = w->fs->model;
	struct im_state_entry e;

	if (!model_saved_entry(m, f->path, &f->st, w->fs->opts->params.max_size,
			       &e) ||
	    !imfs_may_read(w->fs, f->path, &f->st))
		return false;
	model_apply(m, n, f->path, &f->st, &e.d);
	return true;
}

/* Apply what look() found. Tree lock held exclusively. */
static void apply_found(struct watch *w, struct found_list *l, bool resign)
{
	struct model *m = w->fs->model;

	/* A directory of near-duplicates that comes back from the cache
	 * joins its clusters once, not once per file. */
	model_hold_index(m);
	for (size_t i = 0; i < l->n; i++) {
		struct found *f = &l->v[i];
		bool dir = S_ISDIR(f->st.st_mode);
		struct node *n = model_ensure(m, f->path, dir);
		if (!n)
			continue;
		n->seen = m->scan_gen;
		bool perms = !dir && !w->fs->reads_all &&
			     model_attr_changed(m, n, &f->st);
		model_set_stat(m, n, &f->st);
		if (dir) {
			watch_bind(w, n, f->wd);
		} else if (!resign && !perms &&
			   model_unchanged_watched(n, &f->st)) {
			continue;
		} else if (!read_anyway(n) &&
			   (!must_read(w, n, f, resign, perms) ||
			    take_saved(w, n, f))) {
			__atomic_add_fetch(&w->reused, 1, __ATOMIC_RELAXED);
		} else if (workers_queue(w->fs->workers, n)) {
			scanner_request_rescan(w->fs->scanner);
		}
	}
	model_release_index(m);
}

static int cmp_found_path(const void *a, const void *b)
{
	return strcmp(((const struct found *)a)->path,
		      ((const struct found *)b)->path);
}

static bool was_found(const struct found_list *l, const char *path)
{
	struct found key = {.path = (char *)path};

	return bsearch(&key, l->v, l->n, sizeof(*l->v), cmp_found_path);
}

/* Nodes by identity (tree_by_id()). */
struct ids {
	struct node_id *v;
	size_t n, cap;
};

/* What is below @p dir that list @p l (sorted) did not find, into @p out
 * (a directory, not what is below it). Tree lock held, shared is enough. */
static void find_gone(const struct tree *t, const struct node *dir,
		      const struct found_list *l, struct ids *out)
{
	for (const struct node *c = tree_first_child(t, dir); c;
	     c = tree_next_sibling(t, c)) {
		char *path = tree_path(t, c);
		if (!path)
			continue; /* out of memory: kept, as a rescan would */
		if (!was_found(l, path)) {
			if (out->n == out->cap) {
				size_t nc = out->cap ? 2 * out->cap : 64;
				void *v = realloc(out->v, nc * sizeof(*out->v));
				if (!v) {
					free(path);
					continue; /* kept, as above */
				}
				out->v = v;
				out->cap = nc;
			}
			out->v[out->n].slot = c->slot;
			out->v[out->n].gen = c->gen;
			out->n++;
		} else if (c->flags & NODE_DIR) {
			find_gone(t, c, l, out);
		}
		free(path);
	}
}

/*
 * Remove what is below @p top that list @p l (sorted) did not find. The
 * search reads every node below (116 ms under a root of 100,000 documents,
 * after a scan): as a long reader (tree_rdlock_long()), so that lookups go
 * on; only the removals take the lock exclusively. Called with it held
 * exclusively, and so returns; let go meanwhile.
 */
static void sweep_below(struct model *m, struct node *top,
			const struct found_list *l)
{
	struct tree *t = m->tree;
	uint32_t slot = top->slot, gen = top->gen;
	struct ids gone = {0};

	tree_unlock(t);
	tree_rdlock_long(t);
	top = tree_by_id(t, slot, gen);
	if (top && !(top->flags & NODE_DEAD))
		find_gone(t, top, l, &gone);
	tree_unlock_long(t);
	tree_wrlock(t);
	model_hold_index(m);
	for (size_t i = 0; i < gone.n; i++) {
		struct node *n = tree_by_id(t, gone.v[i].slot, gone.v[i].gen);
		if (n && !(n->flags & NODE_DEAD))
			model_remove(m, n);
	}
	model_release_index(m);
	free(gone.v);
}

static void count_unsettled(struct watch *w)
{
	__atomic_store_n(&w->unsettled,
			 (uint64_t)(w->rr.n + w->mv.set + w->mod.n),
			 __ATOMIC_RELAXED);
}

static void want_reread(struct watch *w, struct node *dir)
{
	struct reread *r = &w->rr;

	for (size_t i = 0; i < r->n; i++)
		if (r->v[i].slot == dir->slot && r->v[i].gen == dir->gen)
			return;
	if (r->n == REREAD_MAX) {
		r->n = 0;
		imfs_log(LOG_INFO,
			 "more than %d directories to read again at "
			 "once: rescanning",
			 REREAD_MAX);
		scanner_request_rescan(w->fs->scanner);
		return;
	}
	if (r->n == r->cap) {
		size_t nc = r->cap ? 2 * r->cap : 16;
		void *v = realloc(r->v, nc * sizeof(*r->v));
		if (!v) {
			scanner_request_rescan(w->fs->scanner);
			return;
		}
		r->v = v;
		r->cap = nc;
	}
	r->v[r->n].slot = dir->slot;
	r->v[r->n].gen = dir->gen;
	r->n++;
}

static void look_and_apply(struct watch *w, char *path, bool resign, bool deep);

/* Read again the directories of struct reread. Tree lock not held. */
static void reread_all(struct watch *w)
{
	struct tree *t = w->fs->model->tree;
	struct reread todo = w->rr;

	w->rr = (struct reread){0};
	for (size_t i = 0; i < todo.n; i++) {
		tree_wrlock(t);
		struct node *d = tree_by_id(t, todo.v[i].slot, todo.v[i].gen);
		char *path =
			d && (d->flags & NODE_DIR) && !(d->flags & NODE_DEAD)
				? tree_path(t, d)
				: NULL;
		if (path) {
			__atomic_add_fetch(&w->rereads, 1, __ATOMIC_RELAXED);
			look_and_apply(w, path, false, true);
		}
		tree_unlock(t);
		free(path);
	}
	free(todo.v);
	count_unsettled(w);
}

/* Look at @p path (the tree lock held, released meanwhile), then apply. */
static void look_and_apply(struct watch *w, char *path, bool resign, bool deep)
{
	struct found_list l = {0};
	struct tree *t = w->fs->model->tree;

	tree_unlock(t);
	bool there = look(w, path, deep, &l);
	tree_wrlock(t);
	/* Something that is neither a file nor a directory (a FIFO, socket,
	 * symlink or device renamed over a document): whatever the tree
	 * held at that name leaves at once. */
	if (there && !l.n) {
		struct node *old = tree_lookup(t, path);
		if (old && old != tree_root(t))
			model_remove(w->fs->model, old);
	}
	/* Apply only if the parent is still there. */
	char *slash = strrchr(path, '/');
	if (slash)
		*slash = 0;
	struct node *parent = tree_lookup(t, slash ? path : "");
	if (parent && (parent->flags & NODE_DIR)) {
		apply_found(w, &l, resign);
		/* A deep look is the truth below the path, as a rescan's walk
		 * is: what the tree holds there and the walk did not find (a
		 * file a renamed directory's new name leaves out of scope, an
		 * event lost) leaves. */
		if (slash)
			*slash = '/';
		struct node *top = l.complete ? tree_lookup(t, path) : NULL;
		if (top && (top->flags & NODE_DIR)) {
			qsort(l.v, l.n, sizeof(*l.v), cmp_found_path);
			sweep_below(w->fs->model, top, &l);
		}
		if (slash)
			*slash = 0;
		if (top) /* the lock went meanwhile */
			parent = tree_lookup(t, slash ? path : "");
	}
	found_release(&l);
	/* Gone: read again the nearest directory the tree still has. */
	while (!there && !parent && slash) {
		slash = strrchr(path, '/');
		if (slash)
			*slash = 0;
		parent = tree_lookup(t, slash ? path : "");
	}
	if (!there && parent && (parent->flags & NODE_DIR))
		want_reread(w, parent);
}

/* ---- Files a worker found gone ------------------------------------------------ */

/* Hand the thread one entry of struct recheck. Tree lock exclusive. */
static bool recheck_add(struct watch *w, uint32_t slot, uint32_t gen, bool look,
			bool reread)
{
	struct recheck *r = &w->rc;
	uint64_t one = 1;

	if (w->wake < 0)
		return false;
	if (r->n == r->cap) {
		size_t nc = r->cap ? 2 * r->cap : 16;
		void *v = realloc(r->v, nc * sizeof(*r->v));
		if (!v)
			return false;
		r->v = v;
		r->cap = nc;
	}
	r->v[r->n].slot = slot;
	r->v[r->n].gen = gen;
	r->v[r->n].look = look;
	r->v[r->n].reread = reread;
	r->n++;
	__atomic_add_fetch(&w->rechecks, 1, __ATOMIC_RELAXED);
	/* Fails only with the counter full: the thread wakes anyway. */
	ssize_t ret = write(w->wake, &one, sizeof(one));
	(void)ret;
	return true;
}

bool watch_recheck(struct watch *w, struct node *n, bool look)
{
	return recheck_add(w, n->slot, n->gen, look, false);
}

/* ---- Names changed during a scan -------------------------------------------- */

void watch_scan_begin(struct watch *w)
{
	struct tree *t = w->fs->model->tree;

	tree_wrlock(t);
	w->sn.on = true;
	w->sn.lost = false;
	w->sn.dirs.n = 0;
	tree_unlock(t);
}

/* Hold the directory of @p e, an event that changes names, while a scan
 * runs. Tree lock exclusive. */
static void scan_names_add(struct watch *w, const struct inotify_event *e)
{
	struct scan_names *sn = &w->sn;
	struct reread *d = &sn->dirs;
	struct node *dir = wd_node(w, e->wd);

	if (!sn->on || sn->lost)
		return;
	if ((e->mask & IN_Q_OVERFLOW) || !dir) {
		sn->lost = true;
		return;
	}
	/* Removed: the event that removed it is its parent's. */
	if (dir->flags & NODE_DEAD)
		return;
	for (size_t i = d->n; i-- > 0;)
		if (d->v[i].slot == dir->slot && d->v[i].gen == dir->gen)
			return;
	if (d->n == REREAD_MAX) {
		sn->lost = true;
		return;
	}
	if (d->n == d->cap) {
		size_t nc = d->cap ? 2 * d->cap : 16;
		void *v = realloc(d->v, nc * sizeof(*d->v));
		if (!v) {
			sn->lost = true;
			return;
		}
		d->v = v;
		d->cap = nc;
	}
	d->v[d->n].slot = dir->slot;
	d->v[d->n].gen = dir->gen;
	d->n++;
}

static int cmp_id(const void *a, const void *b)
{
	const struct node_id *x = a, *y = b;

	if (x->slot != y->slot)
		return x->slot < y->slot ? -1 : 1;
	return x->gen < y->gen ? -1 : x->gen > y->gen;
}

/* Whether a directory above @p n is held in @p d (sorted). Tree lock. */
static bool parent_held(const struct tree *t, const struct reread *d,
			const struct node *n)
{
	for (n = tree_parent(t, n); n; n = tree_parent(t, n)) {
		struct node_id key = {.slot = n->slot, .gen = n->gen};
		if (bsearch(&key, d->v, d->n, sizeof(*d->v), cmp_id))
			return true;
	}
	return false;
}

bool watch_scan_end(struct watch *w)
{
	struct tree *t = w->fs->model->tree;
	struct scan_names *sn = &w->sn;
	struct reread *d = &sn->dirs;

	tree_wrlock(t);
	bool ok = !sn->lost;
	/* A directory's deep read covers those below it: at most one walk of
	 * each part of the tree, never more than a rescan reads. */
	if (ok && d->n > 1)
		qsort(d->v, d->n, sizeof(*d->v), cmp_id);
	for (size_t i = 0; ok && i < d->n; i++) {
		struct node *n = tree_by_id(t, d->v[i].slot, d->v[i].gen);
		if (n && !parent_held(t, d, n))
			ok = recheck_add(w, d->v[i].slot, d->v[i].gen, false,
					 true);
	}
	sn->on = false;
	d->n = 0;
	tree_unlock(t);
	return ok;
}

/* The files watch_recheck() was given so far. Tree lock not held. */
static struct recheck take_rechecks(struct watch *w)
{
	struct tree *t = w->fs->model->tree;
	uint64_t count;

	/* Only to clear the wakeup: the list says what there is. */
	ssize_t ret = read(w->wake, &count, sizeof(count));
	(void)ret;
	tree_wrlock(t);
	struct recheck todo = w->rc;
	w->rc = (struct recheck){0};
	tree_unlock(t);
	return todo;
}

/*
 * The files of @p todo (take_rechecks()), once the events queued when it
 * was taken are applied: a file deleted is gone from the tree by then, one
 * moved is under its new name and signed again. One still there had its
 * event queued a moment after it vanished, or none (its directory is not
 * watched): signed again, or, asked to look, looked at, which reads its
 * directory again if it is still gone (look_and_apply()). Tree lock not
 * held.
 */
static void recheck_all(struct watch *w, struct recheck *todo)
{
	struct tree *t = w->fs->model->tree;

	for (size_t i = 0; i < todo->n; i++) {
		tree_wrlock(t);
		struct node *n = tree_by_id(t, todo->v[i].slot, todo->v[i].gen);
		if (n && !(n->flags & NODE_DEAD) && todo->v[i].reread) {
			if (n->flags & NODE_DIR)
				want_reread(w, n);
		} else if (n && !(n->flags & NODE_DEAD)) {
			char *path = todo->v[i].look ? tree_path(t, n) : NULL;
			if (path)
				look_and_apply(w, path, true, true);
			else if (workers_queue(w->fs->workers, n))
				scanner_request_rescan(w->fs->scanner);
			free(path);
		}
		tree_unlock(t);
		__atomic_sub_fetch(&w->rechecks, 1, __ATOMIC_RELAXED);
	}
	free(todo->v);
	*todo = (struct recheck){0};
}

/* ---- Files being written ------------------------------------------------------------ */

static void modified_clear(struct modified *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->paths[i]);
	m->n = 0;
}

static ssize_t modified_find(const struct modified *m, const char *path)
{
	for (size_t i = 0; i < m->n; i++)
		if (!strcmp(m->paths[i], path))
			return (ssize_t)i;
	return -1;
}

static void modified_del(struct modified *m, size_t i)
{
	free(m->paths[i]);
	m->paths[i] = m->paths[--m->n];
	m->when[i] = m->when[m->n];
}

/* Remember (or refresh) @p path; takes ownership of it. */
static void modified_add(struct watch *w, char *path)
{
	struct modified *m = &w->mod;
	ssize_t i = modified_find(m, path);

	if (i >= 0) {
		m->when[i] = mono_ms();
		free(path);
		return;
	}
	if (m->n == MODIFY_MAX) {
		/* Too many files being written: let a rescan catch up. */
		modified_clear(m);
		imfs_log(LOG_INFO,
			 "more than %d files being written at once: "
			 "rescanning",
			 MODIFY_MAX);
		scanner_request_rescan(w->fs->scanner);
	}
	if (m->n == m->cap) {
		size_t nc = m->cap ? m->cap * 2 : 16;
		char **p = realloc(m->paths, nc * sizeof(*p));
		if (p)
			m->paths = p;
		int64_t *t = realloc(m->when, nc * sizeof(*t));
		if (t)
			m->when = t;
		if (!p || !t) {
			free(path);
			scanner_request_rescan(w->fs->scanner);
			return;
		}
		m->cap = nc;
	}
	m->paths[m->n] = path;
	m->when[m->n++] = mono_ms();
}

/* Look at the files whose writes have settled. Tree lock not held. */
static void settle(struct watch *w)
{
	struct modified *m = &w->mod;
	struct tree *t = w->fs->model->tree;
	int64_t now = mono_ms();

	for (size_t i = 0; i < m->n;) {
		if (now - m->when[i] < MODIFY_SETTLE_MS) {
			i++;
			continue;
		}
		char *path = m->paths[i];
		m->paths[i] = NULL;
		modified_del(m, i);
		tree_wrlock(t);
		look_and_apply(w, path, false, false);
		tree_unlock(t);
		free(path);
	}
}

/* ---- Events (tree lock held exclusively) ------------------------------------------------- */

static bool name_wanted(const struct watch *w, const char *name)
{
	return w->fs->opts->params.hidden || name[0] != '.';
}

/* What an event leaves to do with the disk: look at a path. */
struct look_req {
	char *path; /* or NULL: nothing */
	bool resign, deep;
	/* Also a name an exchange left (pending_move.swapped), or NULL:
	 * looked at after path, deep, as a rename's target is (what did not
	 * change below a swapped directory is not signed again). */
	char *swapped;
};

/* The pending move left the tree (or the view): its node goes. A name
 * it left in an exchange is handed to @p req, to be looked at. */
static void move_out(struct watch *w, struct look_req *req)
{
	if (!w->mv.set)
		return;
	struct node *n = tree_by_id(w->fs->model->tree, w->mv.slot, w->mv.gen);
	if (n && !(n->flags & NODE_DEAD))
		model_remove(w->fs->model, n);
	w->mv.set = false;
	free(req->swapped);
	req->swapped = w->mv.swapped;
	w->mv.swapped = NULL;
}

static void want_look(const struct tree *t, struct node *dir, const char *name,
		      struct look_req *req, bool resign, bool deep)
{
	char *dp = tree_path(t, dir);

	req->path = dp ? im_path_join(dp, name) : NULL;
	req->resign = resign;
	req->deep = deep;
	free(dp);
}

static void on_overflow(struct watch *w)
{
	static int64_t last_said = -100000; /* the watcher thread only */

	if (scanner_request_rescan(w->fs->scanner) &&
	    mono_ms() - last_said > 10000) {
		imfs_log(LOG_NOTICE, "inotify queue overflow: rescanning");
		last_said = mono_ms();
	}
}

static void on_moved_to(struct watch *w, struct node *dir, const char *name,
			uint32_t cookie, struct look_req *req)
{
	struct model *m = w->fs->model;
	struct node *n = NULL;

	if (w->mv.set && w->mv.cookie == cookie) {
		n = tree_by_id(m->tree, w->mv.slot, w->mv.gen);
		if (n && (n->flags & NODE_DEAD))
			n = NULL;
		w->mv.set = false;
		free(req->swapped);
		req->swapped = w->mv.swapped;
		w->mv.swapped = NULL;
	}
	if (n && !model_move(m, n, dir, name)) {
		/* Renamed within the tree: signatures follow. A file renamed
		 * over after a write (editors' save) is checked against its
		 * size, mtime and inode. A directory is walked again: under
		 * its new name other patterns may apply (.imatchignore,
		 * -o exclude), so files come in or leave. */
		want_look(w->fs->model->tree, dir, name, req, false,
			  n->flags & NODE_DIR);
		return;
	}
	if (n)
		model_remove(m, n);
	want_look(w->fs->model->tree, dir, name, req, true, true);
}

static void on_close_write(struct watch *w, struct node *dir, const char *name,
			   struct look_req *req)
{
	struct node *n = tree_child(w->fs->model->tree, dir, name);

	if (w->mod.n && n) {
		char *p = tree_path(w->fs->model->tree, n);
		ssize_t i = p ? modified_find(&w->mod, p) : -1;
		if (i >= 0)
			modified_del(&w->mod, (size_t)i);
		free(p);
	}
	if (!n)
		want_look(w->fs->model->tree, dir, name, req, true, false);
	else if (!(n->flags & NODE_DIR) && workers_queue(w->fs->workers, n))
		scanner_request_rescan(w->fs->scanner);
}

/* @p e, a move from a name, follows a move to the same name. */
static bool swapped_here(const struct watch *w, const struct inotify_event *e)
{
	return w->last_to.set && w->last_to.wd == e->wd &&
	       !strcmp(w->last_to.name, e->name);
}

static void note_moved_to(struct watch *w, const struct inotify_event *e)
{
	w->last_to.set = (e->mask & IN_MOVED_TO) && e->len &&
			 strlen(e->name) < sizeof(w->last_to.name);
	if (w->last_to.set) {
		w->last_to.wd = e->wd;
		strcpy(w->last_to.name, e->name);
	}
}

static void handle(struct watch *w, const struct inotify_event *e,
		   struct look_req *req)
{
	struct model *m = w->fs->model;
	struct node *dir, *n;
	const char *name = e->len ? e->name : NULL;

	/* A move's pair comes next in the queue, or it left the tree (or the
	 * view). Settled before anything else can take its name. */
	if (w->mv.set &&
	    !((e->mask & IN_MOVED_TO) && e->cookie == w->mv.cookie))
		move_out(w, req);
	dir = wd_node(w, e->wd);
	if (e->mask & IN_Q_OVERFLOW) {
		on_overflow(w);
		return;
	}
	if (e->mask & IN_IGNORED) {
		if (dir)
			unbind(w, dir);
		return;
	}
	if (!dir || (dir->flags & NODE_DEAD))
		return;
	if (e->mask & (IN_DELETE_SELF | IN_MOVE_SELF)) {
		/* The parent's event does the work; the root has none. */
		if (dir == tree_root(m->tree) && (e->mask & IN_DELETE_SELF))
			imfs_log(LOG_WARNING,
				 "the source directory was deleted");
		return;
	}
	if (!name)
		return;
	n = tree_child(m->tree, dir, name);
	if (!strcmp(name, IM_IGNORE_NAME)) {
		/* What is in scope changed: a rescan adds what is now in and
		 * sweeps what is now out. */
		if (e->mask & (IN_CREATE | IN_CLOSE_WRITE | IN_DELETE |
			       IN_MOVED_FROM | IN_MOVED_TO))
			scanner_request_rescan(w->fs->scanner);
		return;
	}
	if (!name_wanted(w, name)) {
		/* Renamed to a hidden name: gone from the view at once. */
		if ((e->mask & IN_MOVED_FROM) && n)
			model_remove(m, n);
		if ((e->mask & IN_MOVED_TO) && w->mv.set &&
		    w->mv.cookie == e->cookie)
			move_out(w, req);
		return;
	}
	if (e->mask & IN_MOVED_FROM) {
		if (n) {
			w->mv = (struct pending_move){
				.set = true,
				.cookie = e->cookie,
				.slot = n->slot,
				.gen = n->gen,
			};
			/* An exchange (`imatch apply --action hardlink` swaps
			 * each file with the keeper's link, made under a
			 * hidden name): moved to, then from, the name holds
			 * what was swapped in, which the move's settling
			 * would take out of the view with the node. */
			if (swapped_here(w, e)) {
				struct look_req at = {0};

				want_look(m->tree, dir, name, &at, true, true);
				w->mv.swapped = at.path;
			}
		}
	} else if (e->mask & IN_MOVED_TO) {
		on_moved_to(w, dir, name, e->cookie, req);
	} else if (e->mask & IN_CREATE) {
		want_look(w->fs->model->tree, dir, name, req, true, true);
	} else if (e->mask & IN_MODIFY) {
		if (n && !(n->flags & NODE_DIR)) {
			char *p = tree_path(m->tree, n);
			if (p)
				modified_add(w, p);
		}
	} else if (e->mask & IN_CLOSE_WRITE) {
		on_close_write(w, dir, name, req);
	} else if (e->mask & IN_DELETE) {
		if (n)
			model_remove(m, n);
	} else if (e->mask & IN_ATTRIB) {
		/* What we could not read (a name the tree lacks, a directory
		 * without children here) may just have become readable: read
		 * it, and what is below, as if it were new. */
		bool closed = !n || ((n->flags & NODE_DIR) &&
				     !tree_first_child(m->tree, n));
		want_look(w->fs->model->tree, dir, name, req, closed, closed);
	}
}

static bool changes_names(const struct inotify_event *e)
{
	return (e->mask & (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO |
			   IN_DELETE_SELF | IN_MOVE_SELF | IN_Q_OVERFLOW)) ||
	       (e->mask & (IN_ATTRIB | IN_ISDIR)) == (IN_ATTRIB | IN_ISDIR);
}

/* Read and apply every event there is. */
static void read_events(struct watch *w)
{
	char buf[64 * 1024]
		__attribute__((aligned(__alignof__(struct inotify_event))));
	struct tree *t = w->fs->model->tree;
	struct look_req req = {0};

	for (;;) {
		ssize_t n = read(w->ifd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		tree_wrlock(t);
		/* The removals of one read leave the index together. */
		model_hold_index(w->fs->model);
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *e = (const void *)p;
			__atomic_add_fetch(&w->events, 1, __ATOMIC_RELAXED);
			if (changes_names(e)) {
				__atomic_add_fetch(&w->name_events, 1,
						   __ATOMIC_RELAXED);
				scan_names_add(w, e);
			}
			handle(w, e, &req);
			note_moved_to(w, e);
			if (req.path || req.swapped) {
				/* it lets the tree lock go meanwhile */
				model_release_index(w->fs->model);
				if (req.path)
					look_and_apply(w, req.path, req.resign,
						       req.deep);
				if (req.swapped)
					look_and_apply(w, req.swapped, false,
						       true);
				model_hold_index(w->fs->model);
				free(req.path);
				free(req.swapped);
				req.path = req.swapped = NULL;
			}
			p += sizeof(*e) + e->len;
		}
		model_release_index(w->fs->model);
		tree_unlock(t);
	}
}

static void *watch_main(void *arg)
{
	struct watch *w = arg;
	struct tree *t = w->fs->model->tree;

	for (;;) {
		struct pollfd pfd[3] = {
			{.fd = w->ifd, .events = POLLIN},
			{.fd = w->stop_pipe[0], .events = POLLIN},
			{.fd = w->wake, .events = POLLIN},
		};
		int timeout = w->mv.set || w->rr.n ? MOVE_PAIR_MS
			      : w->mod.n	   ? MODIFY_SETTLE_MS / 2
						   : -1;
		int r = poll(pfd, 3, timeout);
		if (r < 0 && errno != EINTR)
			break;
		if (r > 0 && pfd[1].revents)
			break;
		__atomic_store_n(&w->busy, 1, __ATOMIC_SEQ_CST);
		/* The changes read now are applied before an operation
		 * makes the plan that each would make old. */
		tree_batch_begin(t);
		/* Taken before the events are read: whatever made those files
		 * vanish is in the queue by now, and applied before they are
		 * looked at. */
		struct recheck gone = {0};
		if (r > 0 && pfd[2].revents)
			gone = take_rechecks(w);
		if (r == 0 && w->mv.set) {
			struct look_req req = {0};

			tree_wrlock(t);
			move_out(w, &req);
			if (req.swapped)
				look_and_apply(w, req.swapped, false, true);
			tree_unlock(t);
			free(req.swapped);
		}
		if (w->mod.n)
			settle(w);
		if (r > 0)
			read_events(w);
		if (gone.n)
			recheck_all(w, &gone);
		/* Once the queue is quiet for a moment. */
		if (r == 0 && w->rr.n)
			reread_all(w);
		count_unsettled(w);
		tree_batch_end(t);
		__atomic_store_n(&w->busy, 0, __ATOMIC_SEQ_CST);
	}
	free(w->rr.v);
	w->rr = (struct reread){0};
	w->mv.set = false;
	free(w->mv.swapped);
	w->mv.swapped = NULL;
	modified_clear(&w->mod);
	free(w->mod.paths);
	free(w->mod.when);
	return NULL;
}

int watch_start(struct watch *w)
{
	if (w->ifd < 0)
		return -EBADF;
	if (pthread_create(&w->tid, NULL, watch_main, w))
		return -EAGAIN;
	w->started = true;
	return 0;
}

void watch_stop(struct watch *w)
{
	if (!w || !w->started)
		return;
	ssize_t r = write(w->stop_pipe[1], "x", 1);
	(void)r;
	pthread_join(w->tid, NULL);
	w->started = false;
}
