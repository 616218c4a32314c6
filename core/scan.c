/**
 * @file scan.c
 * The tree walker and the parallel scans built on it.
 *
 * Walk: depth first with an explicit stack of frames, one per directory on
 * the current path. A frame reads its directory whole (names sorted, so a walk
 * is reproducible), hands its files on, then descends into its
 * subdirectories one by one. Every directory is opened with openat() relative
 * to its parent's fd (O_NOFOLLOW | O_DIRECTORY), never by path. To keep deep
 * trees from exhausting file descriptors, only the WALK_MAX_OPEN innermost
 * frames keep their fd; an outer frame that needs its fd again reopens it by
 * walking its components down from the nearest open ancestor, and checks that
 * it found the same (st_dev, st_ino) (a directory renamed meanwhile is counted
 * as an error rather than walked under its new identity).
 *
 * Directory fds are reference counted (struct dref) because a scan queues a
 * file together with its directory's fd: the worker opens the file with
 * openat(dir fd, name), so no path is resolved twice and no symlink in a
 * parent component can be followed. The number of fds open at once is
 * bounded by WALK_MAX_OPEN plus the queue length.
 *
 * Scan: the walker runs in the calling thread and feeds a bounded queue;
 * worker threads, each with its own struct im_signer (and struct im_df for
 * im_scan_df), sign; results and counters are serialized under one mutex.
 * The walking thread is a worker too (scan_push()), so -j N runs N threads.
 * Files pass through the queue in batches (PUSH_BATCH, POP_BATCH), which
 * adds those to the bound on open fds.
 */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "beneath.h"
#include "scan.h"
#include "spool.h"
#include "scope.h"

/* Innermost frames that keep their directory fd open. */
#define WALK_MAX_OPEN 32
/* Files waiting for a worker. */
#define QUEUE_LEN 128
/*
 * Files the walking thread queues at once, and the most a worker takes at
 * once. One file a queue operation cost each file two lock and unlock
 * pairs of the queue's lock, taken on both cores (the lock's line and the
 * queue's moved between them for every file), and a wake-up call.
 */
#define PUSH_BATCH 16
#define POP_BATCH  8
/* Bytes of directory entries read at once. */
#define DENTS_SIZE  32768
#define MAX_THREADS IM_SCAN_MAX_THREADS

/* ---- Reference-counted directory fds ----------------------------------- */

struct dref {
	int fd;
	unsigned refs; /* atomic */
};

static struct dref *dref_new(int fd)
{
	struct dref *d = malloc(sizeof(*d));

	if (!d)
		return NULL;
	d->fd = fd;
	d->refs = 1;
	return d;
}

static struct dref *dref_get(struct dref *d)
{
	__atomic_add_fetch(&d->refs, 1, __ATOMIC_RELAXED);
	return d;
}

static void dref_put(struct dref *d)
{
	if (!d)
		return;
	if (__atomic_sub_fetch(&d->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		close(d->fd);
		free(d);
	}
}

/* ---- The walker --------------------------------------------------------- */

/* What the walker does with each file, internally: the directory's fd comes
 * along so that scans can open the file relative to it; file() takes
 * ownership of path (a scan queues it as it is: no copy per file); st is
 * NULL for a file handed on unstat'ed (file_unstat). */
struct walk_cbs {
	int (*dir)(const char *path, const struct stat *st, void *arg);
	int (*file)(struct dref *dir, char *path, size_t name_off,
		    const struct stat *st, void *arg);
	void *arg;
	dev_t skip_dev;
	ino_t skip_ino;
	const volatile bool *cancel;
	const char *under; /* im_walk_ops.under */
	bool one_level;	   /* im_walk_ops.one_level */
	/* im_scan_ops.unreadable and its argument, or NULL */
	void (*unreadable)(const char *path, int err, void *arg);
	void *unreadable_arg;
	/* A file its entry says regular (DT_REG) goes to file() with st NULL,
	 * not stat'ed: its stat by name was the walk's one system call per
	 * file, and path lookup, besides the open and fstat that read it
	 * anyway. When it was not a regular file the scan could open, the
	 * scan counts and delivers nothing and it is stat'ed as the walk
	 * would have, so that a name that cannot be stat'ed (a directory
	 * readable but not searchable, a file gone) is an error and no file,
	 * one become a directory is walked, and so on: alone, the scan reads
	 * it at once and file() returns WALK_RESTAT for the walk to go on as
	 * it always does; with helpers, the walking thread stats it later
	 * (hand_back()) and walks such directories after the walk
	 * (walk_late()). */
	bool file_unstat;
};

/* file() of walk_cbs.file_unstat: stat this one and hand it on again. */
#define WALK_RESTAT 1

/*
 * A directory's names, sorted: v[i] points into one block, each name
 * preceded by its d_type byte (name[-1]). One allocation per directory,
 * not one per name.
 */
struct names {
	char **v;
	size_t n;
	char *block;
};

struct frame {
	struct dref *dir; /* NULL while closed to save fds */
	char *path;	  /* relative to the root; "" for the root */
	dev_t dev;
	ino_t ino;
	struct names subdirs; /* to descend into, in order: v[next..n) */
	size_t next;
};

struct walker {
	const struct im_params *p;
	const struct walk_cbs *cb;
	struct im_scan_counts *counts;
	struct frame *stack;
	size_t depth, cap;
	void *dents; /* getdents64() buffer, DENTS_SIZE bytes */
	/* The .imatchignore files of the parents of `under`, then one per
	 * frame: n == parents + depth between calls of walk_enter(). */
	struct im_scope_chain chain;
};

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void names_free(struct names *nm)
{
	free(nm->v);
	free(nm->block);
	*nm = (struct names){0};
}

static void frame_release(struct frame *f)
{
	dref_put(f->dir);
	f->dir = NULL;
	free(f->path);
	f->path = NULL;
	names_free(&f->subdirs);
}

static int open_dir_at(int parent, const char *name)
{
	return openat(parent, name,
		      O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/*
 * Read the names of the directory @p fd (without "." and ".."), sorted, with
 * getdents64() on @p fd itself: nothing else reads its entries, and
 * fdopendir() on a fd of its own cost five more system calls per directory
 * (openat, two fcntl, fstat, close), a tenth of a first scan of a tree of
 * one file per directory. @p buf holds DENTS_SIZE bytes.
 */
static int read_names(int fd, void *buf, struct names *out)
{
	size_t n = 0, cap = 0, used = 0, room = 0;
	char *block = NULL, *nb;
	size_t *offs = NULL, *no;
	int ret = 0;

	*out = (struct names){0};
	for (;;) {
		ssize_t got = getdents64(fd, buf, DENTS_SIZE);

		if (got <= 0) {
			ret = got < 0 ? -errno : 0;
			break;
		}
		for (ssize_t at = 0; at < got;) {
			const struct dirent64 *de =
				(const struct dirent64 *)((char *)buf + at);
			const char *name = de->d_name;
			size_t len = strlen(name);

			at += de->d_reclen;
			if (name[0] == '.' &&
			    (!name[1] || (name[1] == '.' && !name[2])))
				continue;
			if (n == cap) {
				cap = cap ? 2 * cap : 32;
				no = realloc(offs, cap * sizeof(*offs));
				if (!no) {
					ret = -ENOMEM;
					goto out;
				}
				offs = no;
			}
			if (room - used < len + 2) {
				room = room ? 2 * room : 1024;
				while (room - used < len + 2)
					room *= 2;
				nb = realloc(block, room);
				if (!nb) {
					ret = -ENOMEM;
					goto out;
				}
				block = nb;
			}
			block[used] = (char)de->d_type;
			offs[n++] = used + 1;
			memcpy(block + used + 1, name, len + 1);
			used += len + 2;
		}
	}
	if (ret)
		goto out;
	/* Pointers once the block stops moving. */
	out->v = malloc((n ? n : 1) * sizeof(*out->v));
	if (!out->v) {
		ret = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		out->v[i] = block + offs[i];
	out->n = n;
	out->block = block;
	block = NULL;
	if (n)
		qsort(out->v, n, sizeof(*out->v), cmp_names);
out:
	free(offs);
	free(block);
	return ret;
}

static bool cancelled(const struct walk_cbs *cb)
{
	return cb->cancel && __atomic_load_n(cb->cancel, __ATOMIC_RELAXED);
}

/*
 * Reopen the fd of frame i from its nearest open ancestor (no component may
 * be a symlink, nothing outside the ancestor is reached) and check that it
 * is still the directory the walk entered.
 */
static int frame_reopen(struct walker *w, size_t i)
{
	struct frame *f = &w->stack[i];
	struct stat want = {.st_dev = f->dev, .st_ino = f->ino};
	const char *rest;
	size_t a = i;
	int fd, ret;

	while (!w->stack[a].dir) {
		assert(a > 0); /* the root frame never closes */
		a--;
	}
	/* f->path begins with the ancestor's path followed by '/' (or is
	 * relative to the root when the ancestor is the root). */
	rest = f->path + strlen(w->stack[a].path);
	if (*rest == '/')
		rest++;
	ret = im_open_beneath_same(w->stack[a].dir->fd, rest,
				   O_RDONLY | O_DIRECTORY, &want, NULL, &fd);
	if (ret == -ENOMEM || ret == -ESTALE)
		return ret;
	if (ret)
		return -ENOENT;
	f->dir = dref_new(fd);
	if (!f->dir) {
		close(fd);
		return -ENOMEM;
	}
	return 0;
}

/* Count what the walk could not open or read (@p dir / @p name, or @p dir
 * itself when @p name is NULL) and name it to the caller. */
static void walk_error(struct walker *w, const char *dir, const char *name,
		       int err)
{
	char *path;

	w->counts->errors++;
	if (!w->cb->unreadable)
		return;
	path = name ? im_path_join(dir, name) : NULL;
	if (name && !path)
		return; /* out of memory: counted, not named */
	w->cb->unreadable(name ? path : dir, err, w->cb->unreadable_arg);
	free(path);
}

/* Push the .imatchignore of the directory @p fd (at @p path) whose sorted
 * names are @p names, or NULL when it has none or it cannot be read. */
static int push_ignore(struct walker *w, int fd, const char *path, char **names,
		       size_t n)
{
	const char *key = IM_IGNORE_NAME;
	struct im_ignore *ig = NULL;
	int ret = 0;

	if (n && bsearch(&key, names, n, sizeof(*names), cmp_names))
		ret = im_ignore_load_at(fd, path, &ig);
	if (ret == -ENOMEM)
		return ret;
	if (ret)
		walk_error(w, path, IM_IGNORE_NAME, -ret);
	return im_scope_chain_push(&w->chain, ig);
}

/* Whether path/name is out of scope: 1 yes, 0 no, -ENOMEM. Not counted. */
static int scope_excludes(struct walker *w, const char *path, const char *name,
			  bool is_dir)
{
	char *fp;
	bool out;

	if (im_scope_empty(w->p->scope) && !w->chain.files &&
	    strcmp(name, IM_IGNORE_NAME))
		return 0;
	fp = im_path_join(path, name);
	if (!fp)
		return -ENOMEM;
	out = im_scope_excluded(w->p->scope, &w->chain, fp, is_dir);
	free(fp);
	return out;
}

/* As scope_excludes(), an exclusion counted. */
static int out_of_scope(struct walker *w, const char *path, const char *name,
			bool is_dir)
{
	int out = scope_excludes(w, path, name, is_dir);

	if (out > 0)
		w->counts->excluded++;
	return out;
}

/*
 * Hand on @p name of @p dir (at @p path), a regular file by its entry, without
 * a stat (walk_cbs.file_unstat). @return 0, a failure that stops the walk, or
 * WALK_RESTAT when the walk must stat it and go on as for any entry: out of
 * scope (only a stat says whether as a file, a directory or neither), or
 * not a regular file that file() could open.
 */
static int hand_on_unstat(struct walker *w, struct dref *dir, const char *path,
			  const char *name)
{
	const struct walk_cbs *cb = w->cb;
	int ret = scope_excludes(w, path, name, false);
	char *fp;

	if (ret)
		return ret < 0 ? ret : WALK_RESTAT;
	fp = im_path_join(path, name);
	if (!fp)
		return -ENOMEM;
	w->counts->files++;
	ret = cb->file(dir, fp, strlen(fp) - strlen(name), NULL, cb->arg);
	if (ret == WALK_RESTAT)
		w->counts->files--;
	return ret;
}

/*
 * Enter a directory already opened as @p fd: count it, call the dir callback,
 * hand its files on and push a frame with its subdirectories (their scope,
 * and whether they are to be skipped, are settled when the walk descends:
 * descend()). Takes ownership of @p fd and @p path.
 */
static int walk_enter(struct walker *w, int fd, char *path,
		      const struct stat *st)
{
	const struct walk_cbs *cb = w->cb;
	struct im_scan_counts *c = w->counts;
	struct names names;
	size_t nsub = 0, i;
	struct dref *dir = NULL;
	struct frame *f;
	struct stat est;
	int ret;

	c->dirs++;
	dir = dref_new(fd);
	if (!dir) {
		close(fd);
		free(path);
		return -ENOMEM;
	}
	if (cb->dir) {
		ret = cb->dir(path, st, cb->arg);
		if (ret)
			goto out;
	}
	ret = read_names(fd, w->dents, &names);
	if (ret == -ENOMEM)
		goto out;
	if (ret) {
		walk_error(w, path, NULL, -ret);
		ret = 0;
		goto out;
	}
	ret = push_ignore(w, fd, path, names.v, names.n);
	if (ret) {
		names_free(&names);
		goto out;
	}
	for (i = 0; i < names.n; i++) {
		char *name = names.v[i], *fp;
		unsigned char type = (unsigned char)name[-1];
		int scope;

		if (cancelled(cb)) {
			ret = -ECANCELED;
			break;
		}
		if (name[0] == '.' && !w->p->hidden) {
			c->hidden++;
			continue;
		}
		/* The entry's type settles a directory and what is neither
		 * a directory nor a file without a stat; a file's stat is
		 * handed on. */
		if (type == DT_DIR) {
			names.v[nsub++] = name;
			continue;
		}
		if (type != DT_REG && type != DT_UNKNOWN) {
			c->other++;
			continue;
		}
		if (type == DT_REG && cb->file_unstat) {
			ret = hand_on_unstat(w, dir, path, name);
			if (ret == WALK_RESTAT)
				ret = 0;
			else if (ret)
				break;
			else
				continue;
		}
		if (fstatat(fd, name, &est, AT_SYMLINK_NOFOLLOW)) {
			walk_error(w, path, name, errno);
			continue;
		}
		if (S_ISDIR(est.st_mode)) {
			names.v[nsub++] = name;
			continue;
		}
		if (!S_ISREG(est.st_mode)) {
			c->other++;
			continue;
		}
		scope = out_of_scope(w, path, name, false);
		if (scope) {
			if (scope < 0) {
				ret = scope;
				break;
			}
			continue;
		}
		fp = im_path_join(path, name);
		if (!fp) {
			ret = -ENOMEM;
			break;
		}
		c->files++;
		ret = cb->file(dir, fp, strlen(fp) - strlen(name), &est,
			       cb->arg);
		if (ret)
			break;
	}
	if (ret) {
		names_free(&names);
		im_scope_chain_pop(&w->chain);
		goto out;
	}
	if (w->depth == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 16;
		struct frame *ns = realloc(w->stack, cap * sizeof(*ns));

		if (!ns) {
			names_free(&names);
			im_scope_chain_pop(&w->chain);
			ret = -ENOMEM;
			goto out;
		}
		w->stack = ns;
		w->cap = cap;
	}
	f = &w->stack[w->depth++];
	f->dir = dir;
	f->path = path;
	f->dev = st->st_dev;
	f->ino = st->st_ino;
	/* Subdirectories were compacted to the front. */
	names.n = nsub;
	f->subdirs = names;
	f->next = 0;
	/* Keep only the innermost frames' fds open. */
	if (w->depth > WALK_MAX_OPEN + 1) {
		struct frame *old = &w->stack[w->depth - WALK_MAX_OPEN - 1];

		if (old != &w->stack[0]) {
			dref_put(old->dir);
			old->dir = NULL;
		}
	}
	return 0;
out:
	dref_put(dir);
	free(path);
	return ret;
}

/*
 * Descend from the top frame @p f into its subdirectory @p name, unless it
 * is out of scope, the directory to skip (the state directory), or another
 * imatchfs mount (counted). @return 0 (also when it is left out or cannot
 * be opened: counted) or a failure that stops the walk.
 */
static int descend(struct walker *w, struct frame *f, const char *name)
{
	const struct walk_cbs *cb = w->cb;
	struct im_scan_counts *c = w->counts;
	struct stat st;
	char *path;
	int scope, cfd;

	scope = out_of_scope(w, f->path, name, true);
	if (scope)
		return scope < 0 ? scope : 0;
	cfd = open_dir_at(f->dir->fd, name);
	if (cfd < 0 || fstat(cfd, &st)) {
		int err = errno;

		if (cfd >= 0)
			close(cfd);
		walk_error(w, f->path, name, err);
		return 0;
	}
	if ((cb->skip_dev || cb->skip_ino) && st.st_dev == cb->skip_dev &&
	    st.st_ino == cb->skip_ino) {
		close(cfd);
		return 0;
	}
	/* Another imatchfs view inside the tree would list that tree's
	 * documents again. */
	if (st.st_dev != f->dev && im_is_imatchfs_mount(st.st_dev) == 1) {
		close(cfd);
		c->mounts++;
		return 0;
	}
	path = im_path_join(f->path, name);
	if (!path) {
		close(cfd);
		return -ENOMEM;
	}
	if (cb->one_level) {
		int ret;

		close(cfd);
		ret = cb->dir ? cb->dir(path, &st, cb->arg) : 0;
		free(path);
		return ret;
	}
	return walk_enter(w, cfd, path, &st);
}

/*
 * Walk the frames @p w holds down to none, unless @p ret already says to
 * stop, and release what @p w holds. @return @p ret or what stopped the walk.
 */
static int walk_frames(struct walker *w, int ret)
{
	const struct walk_cbs *cb = w->cb;

	while (!ret && w->depth) {
		struct frame *f = &w->stack[w->depth - 1];

		if (f->next == f->subdirs.n) {
			frame_release(f);
			im_scope_chain_pop(&w->chain);
			w->depth--;
			continue;
		}
		if (cancelled(cb)) {
			ret = -ECANCELED;
			break;
		}
		if (!f->dir) {
			ret = frame_reopen(w, w->depth - 1);
			if (ret == -ENOMEM)
				break;
			if (ret) {
				/* Gone or replaced: its remaining subdirectories
				 * cannot be reached safely. */
				walk_error(w, f->path, NULL, -ret);
				f->next = f->subdirs.n;
				ret = 0;
				continue;
			}
		}
		ret = descend(w, f, f->subdirs.v[f->next++]);
	}
	while (w->depth)
		frame_release(&w->stack[--w->depth]);
	im_scope_chain_release(&w->chain);
	free(w->stack);
	free(w->dents);
	return ret;
}

/* The internal walk over @p rootfd, shared by im_walk and the scans. */
static int walk(int rootfd, const struct im_params *p,
		const struct walk_cbs *cb, struct im_scan_counts *counts)
{
	struct walker w = {.p = p, .cb = cb, .counts = counts};
	const char *under = cb->under ? cb->under : "";
	bool excluded;
	struct stat st;
	int fd, ret;
	char *root;

	ret = im_scope_open_dir(rootfd, p->scope, under, &w.chain, &fd,
				&excluded);
	if (ret)
		return ret;
	if (excluded) {
		counts->excluded++;
		im_scope_chain_release(&w.chain);
		return 0;
	}
	root = strdup(under);
	if (!root || fstat(fd, &st)) {
		ret = root ? -errno : -ENOMEM;
		free(root);
		close(fd);
		im_scope_chain_release(&w.chain);
		return ret;
	}
	w.dents = malloc(DENTS_SIZE);
	if (!w.dents) {
		free(root);
		close(fd);
		im_scope_chain_release(&w.chain);
		return -ENOMEM;
	}
	return walk_frames(&w, walk_enter(&w, fd, root, &st));
}

/*
 * Walk @p path, a directory that a scan with helpers found where the walk
 * had handed on a file (its entry said regular; walk_cbs.file_unstat) of
 * the directory @p dir, @p name_off bytes into @p path: as descend() would
 * have when the walk stat'ed it then, with the scope of that directory
 * (its parents' .imatchignore files and its own, unreadable ones absent,
 * as the walk had them). @return as walk().
 */
static int walk_late(int rootfd, const struct im_params *p,
		     const struct walk_cbs *cb, struct im_scan_counts *counts,
		     struct dref *dir, const char *path, size_t name_off)
{
	struct walker w = {.p = p, .cb = cb, .counts = counts};
	struct frame parent = {.dir = dir};
	struct im_ignore *ig = NULL;
	bool excluded = false;
	struct stat st;
	int pfd = -1, ret;

	parent.path = strndup(path, name_off ? name_off - 1 : 0);
	if (!parent.path)
		return -ENOMEM;
	ret = im_scope_open_dir(rootfd, p->scope, parent.path, &w.chain, &pfd,
				&excluded);
	if (!ret && !excluded) {
		ret = im_ignore_load_at(pfd, parent.path, &ig);
		if (ret != -ENOMEM)
			ret = im_scope_chain_push(&w.chain, ret ? NULL : ig);
	}
	if (pfd >= 0)
		close(pfd);
	if (!ret && !excluded && fstat(dir->fd, &st))
		ret = -errno;
	if (!ret && !excluded)
		w.dents = malloc(DENTS_SIZE);
	if (!ret && !excluded && !w.dents)
		ret = -ENOMEM;
	if (ret || excluded) {
		/* Its directory is gone or out of scope by now. */
		if (ret && ret != -ENOMEM)
			walk_error(&w, path, NULL, -ret);
		im_scope_chain_release(&w.chain);
		free(parent.path);
		return ret == -ENOMEM ? ret : 0;
	}
	parent.dev = st.st_dev;
	ret = descend(&w, &parent, path + name_off);
	free(parent.path);
	return walk_frames(&w, ret);
}

/* ---- Public walk -------------------------------------------------------- */

struct pub_walk {
	const struct im_walk_ops *ops;
};

static int pub_file(struct dref *dir, char *path, size_t name_off,
		    const struct stat *st, void *arg)
{
	const struct im_walk_ops *ops = ((struct pub_walk *)arg)->ops;
	int ret = ops->file ? ops->file(path, st, ops->arg) : 0;

	(void)dir;
	(void)name_off;
	free(path);
	return ret;
}

static int pub_dir(const char *path, const struct stat *st, void *arg)
{
	const struct im_walk_ops *ops = ((struct pub_walk *)arg)->ops;

	return ops->dir ? ops->dir(path, st, ops->arg) : 0;
}

int im_walk(int dirfd, const struct im_params *p, const struct im_walk_ops *ops,
	    struct im_scan_counts *counts)
{
	struct pub_walk pw = {.ops = ops};
	struct walk_cbs cb = {
		.dir = pub_dir,
		.file = pub_file,
		.arg = &pw,
		.skip_dev = ops->skip_dev,
		.skip_ino = ops->skip_ino,
		.under = ops->under,
		.one_level = ops->one_level,
		.unreadable = ops->unreadable,
		.unreadable_arg = ops->arg,
	};

	return walk(dirfd, p, &cb, counts);
}

/* ---- Parallel scans ----------------------------------------------------- */

struct sign_worker;

struct item {
	char *path;
	size_t name_off;
	struct dref *dir;
	struct stat st; /* the walker's, unless unstat */
	/* Handed on without a stat (walk_cbs.file_unstat): st is zero, and
	 * the work returns WALK_RESTAT for what is not a regular file it
	 * could open (opened_regular()). */
	bool unstat;
};

struct scan {
	/* Set before the workers start, read-only after. */
	const struct im_lexicon *lex;
	const struct im_params *p;
	const struct im_scan_ops *ops; /* NULL for a df scan */
	const volatile bool *cancel;

	/* What a worker does with a file: takes ownership of the item.
	 * @return 0 or a failure that stops the scan. */
	int (*work)(struct sign_worker *wk, struct item *it);
	struct sign_worker *walker; /* the walking thread's worker */
	unsigned helpers;	    /* worker threads besides the walker */
	unsigned readers; /* set before helpers start: workers asked for */

	pthread_mutex_t qlock;
	pthread_cond_t not_empty;
	struct item q[QUEUE_LEN]; /* protected by qlock */
	size_t head, len;	  /* protected by qlock */
	/* Walking thread only, with helpers: files not queued yet. */
	struct item pend[PUSH_BATCH];
	size_t npend;
	bool done;   /* protected by qlock: no more items */
	int failure; /* protected by qlock: first fatal error */
	/* With helpers: files handed on unstat'ed that a worker could not
	 * open as regular files (hand_back()), for the walking thread to stat
	 * (restat_drain()). */
	struct item_list {
		struct item *v;
		size_t n, cap;
	} restat;	     /* protected by qlock */
	bool restat_waiting; /* atomic, set under qlock: restat.n > 0 */
	/* Directories among them, walked after the walk (walk_late()):
	 * walking thread only. */
	struct item_list late;

	pthread_mutex_t rlock;	       /* serializes results */
	struct im_scan_counts *counts; /* protected by rlock */
	/* Each lexicon term's coordinates (im_sig_masks()), for every
	 * worker's signer: computed once per scan instead of once per
	 * document and term. */
	uint32_t *masks;
	/* A first scan's signing step: every worker, each one's spool open to
	 * the others once its owner is through (take_kept()). */
	struct sign_worker *workers;
	unsigned nworkers;
	/* A first scan's signing step with two workers or more: what they
	 * signed, so that exact copies that different workers read are
	 * signed once (im_signer_share_memo()). */
	struct im_sig_memo *memo;
	/* A first scan's masks, filled by its signing workers in chunks of
	 * MASK_CHUNK terms (share_masks()). */
	size_t mask_chunks;
	size_t mask_next; /* atomic: the next chunk to take */
	pthread_mutex_t mlock;
	pthread_cond_t masks_done;
	size_t mask_done; /* protected by mlock: chunks filled */
};

static bool scan_stopping(struct scan *sc)
{
	return sc->failure ||
	       (sc->cancel && __atomic_load_n(sc->cancel, __ATOMIC_RELAXED));
}

/* Drop @p it of a stopping scan: @return why it stops. */
static int scan_stop_error(struct scan *sc, struct item *it)
{
	free(it->path);
	dref_put(it->dir);
	return sc->failure ? sc->failure : -ECANCELED;
}

static void scan_fail(struct scan *sc, int err)
{
	pthread_mutex_lock(&sc->qlock);
	if (!sc->failure)
		sc->failure = err;
	pthread_cond_broadcast(&sc->not_empty);
	pthread_mutex_unlock(&sc->qlock);
}

static void item_drop(struct item *it)
{
	free(it->path);
	dref_put(it->dir);
}

/* Take the @p n oldest queued items into @p out. Under qlock. */
static void queue_take(struct scan *sc, struct item *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		out[i] = sc->q[sc->head];
		sc->head = (sc->head + 1) % QUEUE_LEN;
	}
	sc->len -= n;
}

/*
 * Walking thread, with helpers: queue the files it holds (sc->pend), and
 * whenever the queue is full, take as many of the oldest queued files and
 * read them instead of waiting. @return 0 or a failure that stops the scan
 * (then every file it held is dropped).
 */
static int scan_flush(struct scan *sc)
{
	struct item mine[PUSH_BATCH];
	size_t n = sc->npend, nmine = 0, room, i;
	int ret = 0;

	if (!n)
		return 0;
	pthread_mutex_lock(&sc->qlock);
	if (scan_stopping(sc)) {
		ret = sc->failure ? sc->failure : -ECANCELED;
	} else {
		room = QUEUE_LEN - sc->len;
		if (room < n) {
			nmine = n - room;
			queue_take(sc, mine, nmine);
		}
		for (i = 0; i < n; i++)
			sc->q[(sc->head + sc->len + i) % QUEUE_LEN] =
				sc->pend[i];
		sc->len += n;
		/* A wake-up for each helper that may be waiting. */
		for (i = 0; i < n && i < sc->helpers; i++)
			pthread_cond_signal(&sc->not_empty);
	}
	pthread_mutex_unlock(&sc->qlock);
	if (ret) {
		for (i = 0; i < n; i++)
			item_drop(&sc->pend[i]);
	}
	sc->npend = 0;
	for (i = 0; i < nmine; i++) {
		if (!ret)
			ret = sc->work(sc->walker, &mine[i]);
		else
			item_drop(&mine[i]);
	}
	return ret;
}

/*
 * Walking thread: queue @p it (taken). The walking thread is a worker too:
 * alone, it reads each file as it finds it; with helpers, it queues files
 * PUSH_BATCH at a time and reads the oldest queued ones whenever the queue
 * is full instead of waiting (a walker of its own would take its CPU from
 * the busy workers, and a lone worker fed by a walker slept and woke for
 * each small file).
 */
static int scan_queue(struct scan *sc, struct item *it)
{
	if (!sc->helpers)
		return scan_stopping(sc) ? scan_stop_error(sc, it)
					 : sc->work(sc->walker, it);
	sc->pend[sc->npend++] = *it;
	return sc->npend < PUSH_BATCH ? 0 : scan_flush(sc);
}

/* Append @p it to @p l. @return 0 or -ENOMEM (then @p it is dropped). */
static int item_list_push(struct item_list *l, struct item *it)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 16;
		struct item *v = realloc(l->v, cap * sizeof(*v));

		if (!v) {
			item_drop(it);
			return -ENOMEM;
		}
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = *it;
	return 0;
}

static void item_list_release(struct item_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		item_drop(&l->v[i]);
	free(l->v);
	*l = (struct item_list){0};
}

/*
 * Walking thread: stat @p it as the walk would have before handing it on,
 * and count it so: an error, other, a directory to walk after the walk
 * (sc->late), or a regular file queued again with its stat. Takes @p it.
 * @return 0 or a failure that stops the scan.
 */
static int restat_one(struct scan *sc, struct item *it)
{
	struct im_scan_counts *c = sc->counts; /* the walker's counters */
	struct stat st;

	if (fstatat(it->dir->fd, it->path + it->name_off, &st,
		    AT_SYMLINK_NOFOLLOW)) {
		int err = errno;

		c->files--;
		c->errors++;
		if (sc->ops->unreadable)
			sc->ops->unreadable(it->path, err, sc->ops->arg);
		item_drop(it);
		return 0;
	}
	if (S_ISDIR(st.st_mode)) {
		c->files--;
		return item_list_push(&sc->late, it);
	}
	if (!S_ISREG(st.st_mode)) {
		c->files--;
		c->other++;
		item_drop(it);
		return 0;
	}
	it->st = st;
	it->unstat = false;
	return scan_queue(sc, it);
}

/* Walking thread: restat_one() what the workers handed back so far. */
static int restat_drain(struct scan *sc)
{
	struct item_list l;
	int ret = 0;

	pthread_mutex_lock(&sc->qlock);
	l = sc->restat;
	sc->restat = (struct item_list){0};
	__atomic_store_n(&sc->restat_waiting, false, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&sc->qlock);
	for (size_t i = 0; i < l.n; i++) {
		if (!ret)
			ret = restat_one(sc, &l.v[i]);
		else
			item_drop(&l.v[i]);
	}
	free(l.v);
	return ret;
}

/* Walker side: queue a file, taking a reference on @p dir and ownership of
 * @p path, after what the workers handed back since the last one. */
static int scan_push(struct dref *dir, char *path, size_t name_off,
		     const struct stat *st, void *arg)
{
	struct scan *sc = arg;
	struct item it;

	/* Only a scan without want() hands files on unstat'ed. */
	assert(st || !(sc->ops && sc->ops->want));
	if (sc->ops && sc->ops->want &&
	    !sc->ops->want(path, st, sc->ops->arg)) {
		free(path);
		return 0;
	}
	if (__atomic_load_n(&sc->restat_waiting, __ATOMIC_RELAXED)) {
		int ret = restat_drain(sc);

		if (ret) {
			free(path);
			return ret;
		}
	}
	it.path = path;
	it.name_off = name_off;
	it.unstat = !st;
	if (st)
		it.st = *st;
	else
		memset(&it.st, 0, sizeof(it.st));
	it.dir = dref_get(dir);
	return scan_queue(sc, &it);
}

static int scan_dir(const char *path, const struct stat *st, void *arg)
{
	struct scan *sc = arg;

	return sc->ops && sc->ops->dir ? sc->ops->dir(path, st, sc->ops->arg)
				       : 0;
}

/*
 * Worker side: the next items into @p out (at most POP_BATCH), or 0 when
 * the queue is closed. A worker takes its share of what is queued, so that
 * the last files are read by every worker, not held by one.
 */
static size_t scan_pop(struct scan *sc, struct item *out)
{
	size_t n = 0, share;

	pthread_mutex_lock(&sc->qlock);
	while (!sc->len && !sc->done && !scan_stopping(sc))
		pthread_cond_wait(&sc->not_empty, &sc->qlock);
	if (sc->len && !scan_stopping(sc)) {
		share = (sc->len + sc->readers - 1) / sc->readers;
		n = share < POP_BATCH ? share : POP_BATCH;
		queue_take(sc, out, n);
	}
	pthread_mutex_unlock(&sc->qlock);
	return n;
}

/* One file's status into per-status counters and the bytes read as text. */
static void tally_status(uint64_t by_status[IM_DOC_STATUS_COUNT],
			 uint64_t *bytes, enum im_doc_status status,
			 const struct stat *st)
{
	if ((unsigned)status < IM_DOC_STATUS_COUNT)
		by_status[status]++;
	/* A binary file is only sniffed: its size says nothing of the work. */
	if (status == IM_DOC_SIGNED || status == IM_DOC_REJECTED)
		*bytes += (uint64_t)st->st_size;
}

static void count_status(struct im_scan_counts *c, enum im_doc_status status,
			 const struct stat *st)
{
	tally_status(c->by_status, &c->bytes, status, st);
}

/* Formats of what was read, failures by reason. */
static void count_format(struct im_scan_counts *c, const struct im_doc_sigs *d)
{
	if (d->status == IM_DOC_ERROR || d->status == IM_DOC_TOO_BIG)
		return;
	if (d->format < IM_FMT_COUNT)
		c->by_format[d->format]++;
	if (d->status == IM_DOC_FAILED && (unsigned)d->err < IM_XF_COUNT)
		c->by_fail[d->err]++;
}

/* One text read from a sample of its terms: rare, so under the lock. */
static void count_sampled(struct scan *sc)
{
	pthread_mutex_lock(&sc->rlock);
	sc->counts->sampled++;
	pthread_mutex_unlock(&sc->rlock);
}

/* Count and hand out one result, serialized with the others. */
static void deliver(struct scan *sc, const char *path, const struct stat *st,
		    const struct im_doc_sigs *d)
{
	pthread_mutex_lock(&sc->rlock);
	count_status(sc->counts, d->status, st);
	count_format(sc->counts, d);
	if (sc->ops->result)
		sc->ops->result(path, st, d, sc->ops->arg);
	pthread_mutex_unlock(&sc->rlock);
}

/*
 * A result signed from what a first scan kept, waiting to be delivered with
 * others under one lock (deliver_pending()).
 */
struct pending {
	char *path;
	struct stat st;
	struct im_doc_sigs d;
};

/*
 * Results a first scan's signing step delivers at once. Delivering a
 * result (the index, under rlock) takes a third to half as long as signing
 * it, so two workers delivering one result at a time kept meeting at the
 * lock, and each meeting cost a sleep and a wake-up.
 */
#define DELIVER_BATCH 64

struct sign_worker {
	pthread_t tid;
	struct scan *sc;
	struct im_signer *signer;
	struct im_df *df; /* df and first scans */
	/* First scans: what the walk kept, and buffers for one document. */
	struct im_spool *spool; /* signing step: protected by spool_lock */
	pthread_mutex_t spool_lock;
	bool spool_open;  /* the signing step's spool_lock is initialised */
	bool spool_empty; /* protected by spool_lock: read to its end */
	void *rec;	  /* signing step: the record being signed */
	size_t reccap;
	uint32_t *ids; /* term ids, then term numbers; idcap entries */
	size_t idcap;
	size_t nown;   /* terms of df that this worker's ids refer to */
	uint32_t *map; /* id -> term number or IM_LEX_NO_TERM, nown entries:
			  made by build_and_number() */
	int ret;       /* first scans: the signing step's error */
	struct pending *pend; /* first scans: DELIVER_BATCH results */
	unsigned npend;
	/* First scans: the statuses as a df scan counts them, of the files
	 * this worker read (no lock: summed after the walk). */
	uint64_t pre_status[IM_DOC_STATUS_COUNT], pre_bytes;
	/* First scans: the texts this worker kept whose records the spool
	 * still holds in memory, by the hash of their bytes (copy_probe()),
	 * and the one the probe found last. */
	struct copy_slot *copies;
	size_t copies_cap, ncopies;
	uint64_t copies_spilled; /* im_spool_spilled() the slots are of */
	const void *copy_rec;
	uint64_t copy_index; /* copy_rec is the spool's record of that index */
	/* Bit i: the spool's record i lent its ids to a copy (keep_copy()),
	 * whose signing then looks for its result; lentcap bytes. */
	uint8_t *lent;
	size_t lentcap;
	uint64_t taken; /* signing step: records taken from the spool;
			   protected by spool_lock */
};

/* Every worker, the walking thread once its walk is over: read queued files
 * until the queue closes. */
static void *work_main(void *arg)
{
	struct sign_worker *wk = arg;
	struct scan *sc = wk->sc;
	struct item its[POP_BATCH];
	size_t n;
	int ret = 0;

	while (!ret && (n = scan_pop(sc, its))) {
		for (size_t i = 0; i < n; i++) {
			if (!ret && sc->cancel &&
			    __atomic_load_n(sc->cancel, __ATOMIC_RELAXED))
				ret = -ECANCELED;
			if (!ret)
				ret = sc->work(wk, &its[i]);
			else
				item_drop(&its[i]);
		}
		if (ret)
			scan_fail(sc, ret);
	}
	return NULL;
}

/*
 * Whether the signer's stat @p st of an item's file is of a regular file it
 * opened: for an item handed on unstat'ed, anything else (its open failed,
 * or it is a directory, a fifo...) is left to the walk (WALK_RESTAT), which
 * counts it as its stat says, as if the walk had stat'ed it first.
 */
static bool opened_regular(const struct stat *st)
{
	/* Zero when the file was not opened; no more than st_mode and
	 * st_size under im_params.size_only. */
	return S_ISREG(st->st_mode);
}

/*
 * A worker's item handed on unstat'ed that was not a regular file it could
 * open: alone, the walker stats it at once (WALK_RESTAT); with helpers, the
 * walking thread does when it next hands a file on, or after the walk
 * (restat_drain()). Takes @p it. @return WALK_RESTAT, 0 or -ENOMEM.
 */
static int hand_back(struct scan *sc, struct item *it)
{
	int ret;

	if (!sc->helpers) {
		item_drop(it);
		return WALK_RESTAT;
	}
	pthread_mutex_lock(&sc->qlock);
	ret = item_list_push(&sc->restat, it);
	__atomic_store_n(&sc->restat_waiting, true, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&sc->qlock);
	return ret;
}

static int sign_work(struct sign_worker *wk, struct item *it)
{
	const char *name = it->path + it->name_off;
	struct im_doc_sigs d;
	struct stat st;
	int ret = im_signer_sign_at(wk->signer, it->dir->fd, name, &d, &st);

	if (!ret && it->unstat && !opened_regular(&st))
		return hand_back(wk->sc, it);
	dref_put(it->dir);
	if (!ret && im_signer_sampled(wk->signer))
		count_sampled(wk->sc);
	/* The walker's stat when the file could not be opened. */
	if (!ret)
		deliver(wk->sc, it->path, st.st_mode ? &st : &it->st, &d);
	free(it->path);
	return ret;
}

static int df_work(struct sign_worker *wk, struct item *it)
{
	const char *name = it->path + it->name_off;
	struct scan *sc = wk->sc;
	const struct im_terms *u;
	enum im_doc_status status;
	struct stat st;
	int ret = im_signer_terms_stat_at(wk->signer, it->dir->fd, name,
					  &status, &u, &st);

	if (!ret && it->unstat && !opened_regular(&st))
		return hand_back(sc, it);
	dref_put(it->dir);
	free(it->path);
	if (!ret && u && u->level)
		count_sampled(sc);
	/* Documents without a term say nothing about frequencies. */
	if (!ret && status == IM_DOC_SIGNED && u && u->n)
		ret = im_df_add(wk->df, u);
	if (ret)
		return ret;
	pthread_mutex_lock(&sc->rlock);
	count_status(sc->counts, status, st.st_mode ? &st : &it->st);
	pthread_mutex_unlock(&sc->rlock);
	return 0;
}

/* ---- First scans: one pass ---------------------------------------------- */

/*
 * What a first scan keeps of a file until the lexicon exists: the result
 * without signatures (a text has status IM_DOC_REJECTED), then its struct
 * stat (has_stat), path_len bytes of path and nids term ids.
 */
struct kept {
	/* Under im_params.size_only results promise st_mode and st_size
	 * alone (im_scan_ops.result): the 144-byte struct stat follows the
	 * record only without it (has_stat). */
	int64_t st_size;
	uint32_t st_mode;
	int32_t err;
	uint32_t unique_terms, nids, path_len;
	uint64_t size, numbers;
	int64_t mtime_ns;
	uint8_t status, format, exact_valid, has_stat;
	uint8_t copy; /* an exact copy of a record before it (keep_copy()) */
	uint8_t exact[16];
	struct im_sketch sketch;
};

/* Bytes of a record before its path: the struct, and the stat if it has
 * one. */
static size_t kept_head(const struct kept *k)
{
	return sizeof(*k) + (k->has_stat ? sizeof(struct stat) : 0);
}

static int ids_reserve(struct sign_worker *wk, size_t n)
{
	uint32_t *v;
	size_t cap = wk->idcap ? wk->idcap : 1024;

	if (n <= wk->idcap)
		return 0;
	while (cap < n)
		cap *= 2;
	v = realloc(wk->ids, cap * sizeof(*v));
	if (!v)
		return -ENOMEM;
	wk->ids = v;
	wk->idcap = cap;
	return 0;
}

/* Keep a file's record: @p copy if it is an exact copy of one kept
 * before. */
static int keep_doc(struct sign_worker *wk, const char *path,
		    const struct stat *st, const struct im_doc_sigs *d,
		    size_t nids, bool copy)
{
	struct kept k;
	struct iovec iov[4];
	int n = 0;

	memset(&k, 0, sizeof(k));
	k.st_size = st->st_size;
	k.st_mode = st->st_mode;
	k.has_stat = !wk->sc->p->size_only;
	k.err = d->err;
	k.unique_terms = d->unique_terms;
	k.numbers = d->numbers;
	k.nids = (uint32_t)nids;
	k.path_len = (uint32_t)strlen(path);
	k.size = d->size;
	k.mtime_ns = d->mtime_ns;
	k.status = d->status;
	k.format = d->format;
	k.exact_valid = d->exact_valid;
	k.copy = copy;
	memcpy(k.exact, d->exact, sizeof(k.exact));
	k.sketch = d->sketch;
	iov[n++] = (struct iovec){&k, sizeof(k)};
	if (k.has_stat)
		iov[n++] = (struct iovec){(void *)st, sizeof(*st)};
	iov[n++] = (struct iovec){(void *)path, k.path_len};
	iov[n++] = (struct iovec){wk->ids, nids * sizeof(*wk->ids)};
	return im_spool_append(wk->spool, iov, n);
}

/* count_status() into the worker's own counters, without a lock: its
 * statuses and bytes alone, not a whole struct im_scan_counts zeroed and
 * added for each file. */
static void count_pre(struct sign_worker *wk, enum im_doc_status status,
		      const struct stat *st)
{
	tally_status(wk->pre_status, &wk->pre_bytes, status, st);
}

/* ---- Exact copies in a first scan ------------------------------------- */

/*
 * A tree holds exact copies by the hundred (the same licence in every
 * package, one PDF saved in many folders): a copy of a text this worker
 * kept is not extracted, tokenized and looked up again. The signer offers
 * each file's hash before extracting it (im_signer_set_copy_probe()); a
 * file this worker kept with those bytes lends its record: its result and
 * its term ids, counted again with im_df_add_known(). Only records still in
 * memory can lend (a spill moves them: the slots are then forgotten), and
 * only within one worker (ids are per worker). Identical bytes give
 * identical text (the probe is not asked where a filter reads a file by
 * its name), so the results are those of reading the copy.
 */
struct copy_slot {
	uint8_t exact[16];
	const void *rec; /* the kept record; NULL: an empty slot */
	uint64_t index;	 /* of rec in the spool */
};

static struct copy_slot *copy_find(const struct sign_worker *wk,
				   const uint8_t exact[16])
{
	uint64_t h;
	size_t mask = wk->copies_cap - 1, j;

	memcpy(&h, exact, sizeof(h));
	for (j = h & mask; wk->copies[j].rec; j = (j + 1) & mask)
		if (!memcmp(wk->copies[j].exact, exact, 16))
			break;
	return &wk->copies[j];
}

static bool copy_probe(const uint8_t exact[16], void *arg)
{
	struct sign_worker *wk = arg;
	const struct copy_slot *c;

	if (!wk->ncopies || im_spool_spilled(wk->spool) != wk->copies_spilled)
		return false;
	c = copy_find(wk, exact);
	wk->copy_rec = c->rec;
	wk->copy_index = c->index;
	return c->rec != NULL;
}

/* Note the record just kept for a text with terms hashed to @p exact. Only
 * saves work: out of memory, it is not noted. */
static void copy_note(struct sign_worker *wk, const uint8_t exact[16])
{
	uint64_t spilled = im_spool_spilled(wk->spool);
	struct copy_slot *c;
	const void *rec;
	size_t len;

	if (spilled != wk->copies_spilled) {
		if (wk->copies)
			memset(wk->copies, 0,
			       wk->copies_cap * sizeof(*wk->copies));
		wk->ncopies = 0;
		wk->copies_spilled = spilled;
	}
	if (2 * (wk->ncopies + 1) > wk->copies_cap) {
		size_t cap = wk->copies_cap ? 2 * wk->copies_cap : 1024;
		struct copy_slot *old = wk->copies,
				 *v = calloc(cap, sizeof(*v));

		if (!v)
			return;
		wk->copies = v;
		wk->copies_cap = cap;
		for (size_t i = 0; old && i < cap / 2; i++)
			if (old[i].rec)
				*copy_find(wk, old[i].exact) = old[i];
		free(old);
	}
	rec = im_spool_last(wk->spool, &len);
	c = copy_find(wk, exact);
	if (!rec || c->rec)
		return;
	memcpy(c->exact, exact, 16);
	c->rec = rec;
	c->index = im_spool_records(wk->spool) - 1;
	wk->ncopies++;
}

/* Note that record @p index lent its ids. Only saves work: out of memory,
 * it is not noted, and its copies are signed again. */
static void note_lent(struct sign_worker *wk, uint64_t index)
{
	if (index / 8 >= wk->lentcap) {
		size_t cap = wk->lentcap ? wk->lentcap : 512;
		uint8_t *v;

		while (cap <= index / 8)
			cap *= 2;
		v = realloc(wk->lent, cap);
		if (!v)
			return;
		memset(v + wk->lentcap, 0, cap - wk->lentcap);
		wk->lent = v;
		wk->lentcap = cap;
	}
	wk->lent[index / 8] |= (uint8_t)(1u << (index % 8));
}

/* Whether record @p index of @p wk's spool lent its ids (note_lent()). */
static bool was_lent(const struct sign_worker *wk, uint64_t index)
{
	return index / 8 < wk->lentcap &&
	       (wk->lent[index / 8] >> (index % 8)) & 1;
}

/* Keep the file at @p path (@p st, @p d as im_signer_prepare_at() left an
 * exact copy) with the result and term ids of wk->copy_rec, and count it. */
static int keep_copy(struct sign_worker *wk, const char *path,
		     const struct stat *st, struct im_doc_sigs *d)
{
	struct kept k;
	int ret;

	/* The record may move with the next append: copied out first. */
	memcpy(&k, wk->copy_rec, sizeof(k));
	ret = ids_reserve(wk, k.nids);
	if (ret)
		return ret;
	memcpy(wk->ids, (const char *)wk->copy_rec + kept_head(&k) + k.path_len,
	       (size_t)k.nids * sizeof(*wk->ids));
	ret = im_df_add_known(wk->df, wk->ids, k.nids);
	if (ret)
		return ret;
	d->err = k.err;
	d->unique_terms = k.unique_terms;
	d->numbers = k.numbers;
	d->format = k.format;
	d->sketch = k.sketch;
	note_lent(wk, wk->copy_index);
	return keep_doc(wk, path, st, d, k.nids, true);
}

/* Walk step: read and tokenize, count the terms, keep the rest. */
static int first_work(struct sign_worker *wk, struct item *it)
{
	const char *name = it->path + it->name_off;
	const struct im_terms *u;
	struct im_doc_sigs d;
	struct stat st;
	int ret = im_signer_prepare_at(wk->signer, it->dir->fd, name, &d, &st,
				       &u);
	const struct stat *use = st.st_mode ? &st : &it->st;
	size_t n = u ? u->n : 0;
	/* Counted as a text: read as one, or a copy of one (only texts with
	 * terms are noted). */
	bool text = u || ret == 1;

	if (!ret && it->unstat && !opened_regular(&st))
		return hand_back(wk->sc, it);
	dref_put(it->dir);
	if (!ret && u && u->level)
		count_sampled(wk->sc);
	if (ret == 1) {
		ret = keep_copy(wk, it->path, use, &d);
	} else {
		/* Documents without a term say nothing about frequencies. */
		if (!ret && n)
			ret = ids_reserve(wk, n);
		if (!ret && n)
			ret = im_df_add_ids(wk->df, u, wk->ids);
		if (!ret)
			ret = keep_doc(wk, it->path, use, &d, n, false);
		/* A text a filter made by name lends nothing: a copy under
		 * another name is read as what it is. */
		if (!ret && n && d.exact_valid &&
		    im_signer_by_bytes(wk->signer, name))
			copy_note(wk, d.exact);
	}
	/* As df_work() counts, for a tree with no lexicon. */
	if (!ret)
		count_pre(wk, text ? IM_DOC_SIGNED : d.status, use);
	free(it->path);
	return ret;
}

/* Deliver the results @p wk holds, serialized with the others, and free
 * their paths: once their signatures are made (im_signer_flush()), else
 * only the paths. @return 0 or the flush's error. */
static int deliver_pending(struct sign_worker *wk)
{
	struct scan *sc = wk->sc;
	int ret = im_signer_flush(wk->signer);

	if (!wk->npend || ret)
		goto out;
	pthread_mutex_lock(&sc->rlock);
	for (unsigned i = 0; i < wk->npend; i++) {
		struct pending *r = &wk->pend[i];

		count_status(sc->counts, r->d.status, &r->st);
		count_format(sc->counts, &r->d);
		if (sc->ops->result)
			sc->ops->result(r->path, &r->st, &r->d, sc->ops->arg);
	}
	pthread_mutex_unlock(&sc->rlock);
out:
	for (unsigned i = 0; i < wk->npend; i++)
		free(wk->pend[i].path);
	wk->npend = 0;
	return ret;
}

/*
 * Whether a worker other than @p owner kept a text of the bytes @p exact
 * (its copy slots), or may have: one whose spool spilled forgot the slots
 * of the records it moved.
 */
static bool kept_elsewhere(const struct scan *sc,
			   const struct sign_worker *owner,
			   const uint8_t exact[16])
{
	for (unsigned i = 0; i < sc->nworkers; i++) {
		const struct sign_worker *w = &sc->workers[i];

		if (w == owner)
			continue;
		if (im_spool_spilled(w->spool))
			return true;
		if (w->ncopies && copy_find(w, exact)->rec)
			return true;
	}
	return false;
}

/*
 * What signing the record @p index of @p owner, @p k, asks of the memo.
 * Each worker noted every exact copy it kept while the record copied was
 * in memory (keep_copy()), and most files have none: only the records
 * copies were made of are remembered, and only copies look their result
 * up. Copying every document's numbers into the memo took 1 to 2% of a
 * first scan of the kernel docs (and 330 of its 2,450 page faults), which
 * hold 15 copies in 3,452 files. A copy that two workers read, each its
 * own, is known by the other's copy slots (read only, now): both look
 * their result up and keep it.
 */
static unsigned memo_use(const struct scan *sc, const struct sign_worker *owner,
			 uint64_t index, const struct kept *k)
{
	unsigned use = (k->copy ? IM_MEMO_FIND : 0) |
		       (was_lent(owner, index) ? IM_MEMO_KEEP : 0);

	if (sc->nworkers > 1 && k->exact_valid &&
	    kept_elsewhere(sc, owner, k->exact))
		use = IM_MEMO_FIND | IM_MEMO_KEEP;
	return use;
}

/* One file @p owner kept, its record @p index: finish its result and
 * queue it with @p wk's results for delivery. */
static int sign_kept(struct sign_worker *wk, const struct sign_worker *owner,
		     uint64_t index, const void *rec, size_t len)
{
	struct scan *sc = wk->sc;
	const char *p = rec;
	/* Its signatures may come with the next ones' (deliver_pending()). */
	struct pending *r = &wk->pend[wk->npend];
	struct im_doc_sigs *d = &r->d;
	struct kept k;
	size_t m = 0, hdr;
	int ret = 0;

	if (len < sizeof(k))
		return -EIO;
	memcpy(&k, p, sizeof(k));
	hdr = kept_head(&k);
	if (len != hdr + k.path_len + (size_t)k.nids * sizeof(uint32_t))
		return -EIO;
	/* The path as a C string: copy it out of the record. */
	r->path = strndup(p + hdr, k.path_len);
	if (!r->path)
		return -ENOMEM;
	if (k.has_stat) {
		memcpy(&r->st, p + sizeof(k), sizeof(r->st));
	} else {
		memset(&r->st, 0, sizeof(r->st));
		r->st.st_mode = k.st_mode;
		r->st.st_size = k.st_size;
	}
	memset(d, 0, sizeof(*d));
	d->status = k.status;
	d->ncoords = (uint8_t)(sc->p->k + 1);
	d->exact_valid = k.exact_valid;
	d->format = k.format;
	d->err = k.err;
	d->unique_terms = k.unique_terms;
	d->numbers = k.numbers;
	memcpy(d->exact, k.exact, sizeof(d->exact));
	d->sketch = k.sketch;
	d->size = k.size;
	d->mtime_ns = k.mtime_ns;
	/* A text, to be signed; without a lexicon it stays unsigned. */
	if (k.status == IM_DOC_REJECTED && sc->lex) {
		const char *ids = p + hdr + k.path_len;
		const uint32_t *map = owner->map;
		uint32_t *nums;

		ret = ids_reserve(wk, k.nids);
		if (ret)
			goto fail;
		nums = wk->ids;
		/* Read off the record (the ids follow the path, unaligned),
		 * with no branch on whether the lexicon holds the term: a
		 * third of the terms are not in it, at random, and each miss
		 * of the predictor waited for the table's line first. */
		for (size_t i = 0; i < k.nids; i++) {
			uint32_t id, num;

			memcpy(&id, ids + i * sizeof(id), sizeof(id));
			if (id >= owner->nown) {
				ret = -EIO;
				goto fail;
			}
			num = map[id];
			nums[m] = num;
			m += num != IM_LEX_NO_TERM;
		}
		ret = im_signer_sign_numbers_later(
			wk->signer, nums, m, d, memo_use(sc, owner, index, &k));
		if (ret)
			goto fail;
	}
	if (++wk->npend == DELIVER_BATCH)
		return deliver_pending(wk);
	return 0;
fail:
	free(r->path);
	return ret;
}

/*
 * The next record of @p from's spool in *out: copied to wk->rec (the
 * spool's own copy lasts only until its next read, which another worker
 * may make), unless @p wk is the only worker; and in *index its place in
 * that spool.
 * @return 1 with a record, 0 when that spool is through, or an error of
 * im_spool_next().
 */
static int take_from(struct sign_worker *wk, struct sign_worker *from,
		     const void **out, uint64_t *index, size_t *len)
{
	const void *rec;
	int ret = 0;

	pthread_mutex_lock(&from->spool_lock);
	if (!from->spool_empty)
		ret = im_spool_next(from->spool, &rec, len);
	/* Alone, a worker is the only one to read its spool next; a spool
	 * that never spilled leaves its records where they are. */
	if (ret == 1 &&
	    (wk->sc->nworkers == 1 || !im_spool_spilled(from->spool))) {
		*out = rec;
		*index = from->taken++;
		goto out;
	}
	if (ret == 1 && *len > wk->reccap) {
		void *v = realloc(wk->rec, *len);

		if (v) {
			wk->rec = v;
			wk->reccap = *len;
		} else {
			ret = -ENOMEM;
		}
	}
	if (ret == 1) {
		memcpy(wk->rec, rec, *len);
		*out = wk->rec;
		*index = from->taken++;
	}
out:
	if (ret == 0)
		from->spool_empty = true;
	pthread_mutex_unlock(&from->spool_lock);
	return ret;
}

/*
 * The next kept file @p wk signs, in *rec as take_from(): its own first,
 * then what the others have not reached yet. Each worker kept the files it
 * read, and their signing costs differ by tens of milliseconds over a
 * tree: taking from the others ends the step when the last file is signed,
 * not when the slowest worker is through its own. *owner receives the
 * worker whose ids the record holds, *index its place in that worker's
 * spool. @return as take_from().
 */
static int take_kept(struct sign_worker *wk, struct sign_worker **owner,
		     const void **rec, uint64_t *index, size_t *len)
{
	struct scan *sc = wk->sc;
	unsigned self = (unsigned)(wk - sc->workers);

	for (unsigned i = 0; i < sc->nworkers; i++) {
		struct sign_worker *from =
			&sc->workers[(self + i) % sc->nworkers];
		int ret = take_from(wk, from, rec, index, len);

		if (ret) {
			*owner = from;
			return ret;
		}
	}
	return 0;
}

/* Terms of a first scan's masks one worker fills at a time: about 50 us. */
#define MASK_CHUNK 2048

/*
 * Fill chunks of sc->masks until none is left, then wait until the others
 * have filled theirs. The masks were one thread's work between the two
 * steps, about 1 ms on the bench corpus while the other workers waited.
 * A chunk is only ever taken by a running worker, so the wait ends.
 */
static void share_masks(struct scan *sc)
{
	size_t n = im_lexicon_primary_size(sc->lex) +
		   im_lexicon_secondary_size(sc->lex);

	for (;;) {
		size_t c =
			__atomic_fetch_add(&sc->mask_next, 1, __ATOMIC_RELAXED);
		size_t to = (c + 1) * MASK_CHUNK;

		if (c >= sc->mask_chunks)
			break;
		/* The parameters passed im_params_check() already. */
		im_sig_masks_part(sc->lex, sc->p, sc->masks, c * MASK_CHUNK,
				  to < n ? to : n);
		pthread_mutex_lock(&sc->mlock);
		if (++sc->mask_done == sc->mask_chunks)
			pthread_cond_broadcast(&sc->masks_done);
		pthread_mutex_unlock(&sc->mlock);
	}
	pthread_mutex_lock(&sc->mlock);
	while (sc->mask_done < sc->mask_chunks)
		pthread_cond_wait(&sc->masks_done, &sc->mlock);
	pthread_mutex_unlock(&sc->mlock);
}

/* Room for sc->lex's masks, which the signing workers fill. @return 0 or
 * -ENOMEM. */
static int masks_new(struct scan *sc)
{
	size_t n = im_lexicon_primary_size(sc->lex) +
		   im_lexicon_secondary_size(sc->lex);

	sc->masks = malloc((n ? n : 1) * sizeof(*sc->masks));
	sc->mask_chunks = (n + MASK_CHUNK - 1) / MASK_CHUNK;
	return sc->masks ? 0 : -ENOMEM;
}

/* Signing step of one worker: what it kept, then what the others kept. */
static void *first_sign_main(void *arg)
{
	struct sign_worker *wk = arg;
	struct sign_worker *owner;
	struct scan *sc = wk->sc;
	const void *rec;
	uint64_t index;
	size_t len;
	int ret, flushed;

	if (sc->lex) {
		share_masks(sc);
		im_signer_set_lexicon(wk->signer, sc->lex, sc->masks);
		im_signer_share_memo(wk->signer, sc->memo);
	}
	wk->pend = malloc(DELIVER_BATCH * sizeof(*wk->pend));
	if (!wk->pend) {
		wk->ret = -ENOMEM;
		return NULL;
	}
	while ((ret = take_kept(wk, &owner, &rec, &index, &len)) == 1) {
		if (scan_stopping(sc))
			ret = -ECANCELED;
		else
			ret = sign_kept(wk, owner, index, rec, len);
		if (ret)
			break;
	}
	/* What was signed is delivered, even when the step stops early. */
	flushed = deliver_pending(wk);
	wk->ret = ret ? ret : flushed;
	return NULL;
}

/* ---- Running scans ------------------------------------------------------ */

unsigned im_scan_threads(unsigned threads, unsigned cap)
{
	long n;

	if (threads)
		return threads > cap ? cap : threads;
	n = sysconf(_SC_NPROCESSORS_ONLN);
	if (n < 1)
		return 1;
	return (unsigned long)n > cap ? cap : (unsigned)n;
}

static void workers_free(struct sign_worker *wk, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		im_signer_free(wk[i].signer);
		if (wk[i].df)
			im_df_free(wk[i].df);
		im_spool_free(wk[i].spool);
		if (wk[i].spool_open)
			pthread_mutex_destroy(&wk[i].spool_lock);
		free(wk[i].rec);
		free(wk[i].ids);
		free(wk[i].map);
		free(wk[i].pend);
		free(wk[i].copies);
		free(wk[i].lent);
	}
	free(wk);
}

/*
 * @p n workers, each with a signer, and a struct im_df if @p want_df, and a
 * spool of @p spool_budget bytes in @p spool_dir if that is not NULL.
 */
static int workers_new(struct scan *sc, unsigned n, bool want_df,
		       const char *spool_dir, size_t spool_budget,
		       struct sign_worker **out)
{
	struct sign_worker *wk = calloc(n, sizeof(*wk));
	int ret = 0;

	*out = NULL;
	if (!wk)
		return -ENOMEM;
	for (unsigned i = 0; i < n && !ret; i++) {
		wk[i].sc = sc;
		ret = im_signer_new(sc->lex, sc->p, &wk[i].signer);
		if (!ret && sc->masks) {
			im_signer_set_lexicon(wk[i].signer, sc->lex, sc->masks);
			/* A sign scan meets exact copies: each worker signs
			 * the bytes once. */
			im_signer_keep_results(wk[i].signer, true);
		}
		if (!ret && want_df)
			ret = im_df_new(&wk[i].df);
		if (!ret && spool_dir)
			ret = im_spool_new(spool_dir, spool_budget,
					   &wk[i].spool);
	}
	if (ret) {
		workers_free(wk, n);
		return ret;
	}
	*out = wk;
	return 0;
}

/*
 * Walk the tree with @p n workers that @p work each file: the calling
 * thread walks as wk[0] (scan_push()), n - 1 threads help, and all read
 * what is queued once the walk is over. @return 0, the first failure, or
 * -ECANCELED.
 */
static int walk_with(int dirfd, struct scan *sc, struct sign_worker *wk,
		     unsigned n,
		     int (*work)(struct sign_worker *, struct item *))
{
	struct walk_cbs cb = {
		.dir = scan_dir,
		.file = scan_push,
		.arg = sc,
		.skip_dev = sc->ops ? sc->ops->skip_dev : 0,
		.skip_ino = sc->ops ? sc->ops->skip_ino : 0,
		.cancel = sc->cancel,
		.unreadable = sc->ops ? sc->ops->unreadable : NULL,
		.unreadable_arg = sc->ops ? sc->ops->arg : NULL,
	};
	int ret;

	sc->work = work;
	sc->walker = &wk[0];
	sc->helpers = 0;
	sc->readers = n;
	/* Fewer helpers than asked still finish the job. */
	while (sc->helpers + 1 < n &&
	       !pthread_create(&wk[sc->helpers + 1].tid, NULL, work_main,
			       &wk[sc->helpers + 1]))
		sc->helpers++;
	/* Not with want(), which chooses by the walker's stat. */
	cb.file_unstat = !(sc->ops && sc->ops->want);
	ret = walk(dirfd, sc->p, &cb, sc->counts);
	if (!ret)
		ret = scan_flush(sc);
	for (size_t i = 0; i < sc->npend; i++)
		item_drop(&sc->pend[i]);
	sc->npend = 0;

	pthread_mutex_lock(&sc->qlock);
	sc->done = true;
	if (ret && !sc->failure)
		sc->failure = ret;
	pthread_cond_broadcast(&sc->not_empty);
	pthread_mutex_unlock(&sc->qlock);
	work_main(&wk[0]);
	for (unsigned i = 1; i <= sc->helpers; i++)
		pthread_join(wk[i].tid, NULL);

	/* Items left when the scan stopped early. */
	while (sc->len) {
		struct item *it = &sc->q[sc->head];

		free(it->path);
		dref_put(it->dir);
		sc->head = (sc->head + 1) % QUEUE_LEN;
		sc->len--;
	}
	if (!ret && sc->failure)
		ret = sc->failure;
	/* What the workers handed back, now that they are through: stat'ed
	 * and read by this thread alone, and the directories among them
	 * walked as the walk would have. */
	sc->helpers = 0;
	while (!ret && (sc->restat.n || sc->late.n)) {
		struct item_list late;

		ret = restat_drain(sc);
		late = sc->late;
		sc->late = (struct item_list){0};
		for (size_t i = 0; i < late.n; i++) {
			struct item *it = &late.v[i];

			if (!ret)
				ret = walk_late(dirfd, sc->p, &cb, sc->counts,
						it->dir, it->path,
						it->name_off);
			item_drop(it);
		}
		free(late.v);
		if (!ret && sc->failure)
			ret = sc->failure;
	}
	item_list_release(&sc->restat);
	item_list_release(&sc->late);
	if (!ret && sc->cancel && __atomic_load_n(sc->cancel, __ATOMIC_RELAXED))
		ret = -ECANCELED;
	return ret;
}

static void scan_init(struct scan *sc)
{
	pthread_mutex_init(&sc->qlock, NULL);
	pthread_mutex_init(&sc->rlock, NULL);
	pthread_mutex_init(&sc->mlock, NULL);
	pthread_cond_init(&sc->masks_done, NULL);
	pthread_cond_init(&sc->not_empty, NULL);
}

static void scan_destroy(struct scan *sc)
{
	pthread_cond_destroy(&sc->not_empty);
	pthread_cond_destroy(&sc->masks_done);
	pthread_mutex_destroy(&sc->mlock);
	pthread_mutex_destroy(&sc->rlock);
	pthread_mutex_destroy(&sc->qlock);
}

/*
 * A first scan's lexicon, and each worker's map from its ids to the
 * lexicon's term numbers: the workers' counts merged into wk[0].df, each
 * term's place in it noted (worker 0's own ids are already its first
 * nown, so the lexicon's numbers are its map as they are), and the lexicon
 * built from it saying where each of its terms went. No term is looked up
 * again. The build works in wk[0].df's memory: the counts are done with.
 * @return as im_lexicon_build().
 */
static int build_and_number(struct sign_worker *wk, unsigned n,
			    const struct im_params *p, struct im_lexicon **out)
{
	int ret = 0;

	for (unsigned i = 1; i < n && !ret; i++) {
		wk[i].map = malloc((wk[i].nown ? wk[i].nown : 1) *
				   sizeof(*wk[i].map));
		if (!wk[i].map)
			ret = -ENOMEM;
		else
			ret = im_df_merge_ids(wk[0].df, wk[i].df, wk[i].map);
	}
	if (!ret) {
		size_t terms = im_df_terms(wk[0].df);

		wk[0].map = malloc((terms ? terms : 1) * sizeof(*wk[0].map));
		ret = wk[0].map ? im_lexicon_build_from(
					  wk[0].df, p->nidf_lo, p->nidf_hi,
					  p->secondary_cap, out, wk[0].map)
				: -ENOMEM;
	}
	for (unsigned i = 1; i < n && !ret; i++)
		for (size_t j = 0; j < wk[i].nown; j++)
			wk[i].map[j] = wk[0].map[wk[i].map[j]];
	return ret;
}

/* Merge every worker's counts into wk[0]'s. */
static int merge_df(struct sign_worker *wk, unsigned n)
{
	int ret = 0;

	for (unsigned i = 1; i < n && !ret; i++)
		ret = im_df_merge(wk[0].df, wk[i].df);
	return ret;
}

/*
 * Run a scan: start @p threads workers running @p fn, walk in this thread,
 * join. For a df scan (@p want_df) each worker gets a struct im_df and they
 * are merged into *df_out.
 */
static int scan_run(int dirfd, struct scan *sc, unsigned threads,
		    int (*work)(struct sign_worker *, struct item *),
		    bool want_df, struct im_df **df_out)
{
	struct sign_worker *wk;
	unsigned n = im_scan_threads(threads, MAX_THREADS);
	int ret;

	scan_init(sc);
	ret = workers_new(sc, n, want_df, NULL, 0, &wk);
	if (ret)
		goto out;
	ret = walk_with(dirfd, sc, wk, n, work);
	if (!ret && want_df)
		ret = merge_df(wk, n);
	if (!ret && want_df) {
		*df_out = wk[0].df;
		wk[0].df = NULL;
	}
	workers_free(wk, n);
out:
	scan_destroy(sc);
	return ret;
}

int im_scan_sign(int dirfd, const struct im_lexicon *lex,
		 const struct im_params *p, unsigned threads,
		 const struct im_scan_ops *ops, struct im_scan_counts *counts)
{
	struct scan *sc;
	int ret;

	sc = calloc(1, sizeof(*sc));
	if (!sc)
		return -ENOMEM;
	sc->lex = lex;
	sc->p = p;
	sc->ops = ops;
	sc->cancel = ops->cancel;
	sc->counts = counts;
	/* Once per lexicon term, not once per document and term: a scan
	 * looks most of the lexicon up many times. */
	ret = lex ? im_sig_masks(lex, p, &sc->masks) : 0;
	if (!ret)
		ret = scan_run(dirfd, sc, threads, sign_work, false, NULL);
	free(sc->masks);
	free(sc);
	return ret;
}

int im_scan_df(int dirfd, const struct im_params *p, unsigned threads,
	       const struct im_scan_ops *ops, struct im_df **out,
	       struct im_scan_counts *counts)
{
	struct im_scan_ops none = {
		.cancel = ops ? ops->cancel : NULL,
		.skip_dev = ops ? ops->skip_dev : 0,
		.skip_ino = ops ? ops->skip_ino : 0,
	};
	/* Of a file, a df scan counts only the bytes: the stat of the walk
	 * and of the read, one each per file, were a tenth of a `lexicon
	 * build` of the kernel's Documentation/. */
	struct im_params q = *p;
	struct scan *sc;
	int ret;

	q.size_only = 1;
	*out = NULL;
	sc = calloc(1, sizeof(*sc));
	if (!sc)
		return -ENOMEM;
	sc->p = &q;
	sc->ops = &none;
	sc->cancel = none.cancel;
	sc->counts = counts;
	ret = scan_run(dirfd, sc, threads, df_work, true, out);
	free(sc);
	return ret;
}

/* The signing step of a first scan: every worker signs what it kept, then
 * helps the others. */
static int sign_all_kept(struct scan *sc, struct sign_worker *wk, unsigned n)
{
	unsigned i;
	int ret = 0;

	for (i = 0; i < n && !ret; i++) {
		ret = im_spool_rewind(wk[i].spool);
		if (!ret && pthread_mutex_init(&wk[i].spool_lock, NULL))
			ret = -EAGAIN;
		wk[i].spool_open = !ret;
	}
	if (ret)
		return ret;
	/* Alone, a worker's own memo needs no lock. Without one to share,
	 * each keeps its own: the memo only saves work. */
	if (n > 1 && sc->lex)
		im_sig_memo_new(&sc->memo);
	sc->workers = wk;
	sc->nworkers = n;
	/* The calling thread is wk[0]. */
	for (i = 1; i < n; i++)
		if (pthread_create(&wk[i].tid, NULL, first_sign_main, &wk[i]))
			break;
	/* Workers that could not start are done here, one after another. */
	first_sign_main(&wk[0]);
	for (unsigned j = i; j < n; j++)
		first_sign_main(&wk[j]);
	for (unsigned j = 1; j < i; j++)
		pthread_join(wk[j].tid, NULL);
	for (unsigned j = 0; j < n; j++)
		im_signer_share_memo(wk[j].signer, NULL);
	im_sig_memo_free(sc->memo);
	sc->memo = NULL;
	for (unsigned j = 0; j < n && !ret; j++)
		ret = wk[j].ret;
	if (!ret && sc->cancel && __atomic_load_n(sc->cancel, __ATOMIC_RELAXED))
		ret = -ECANCELED;
	return ret;
}

int im_scan_first(int dirfd, const struct im_params *p, unsigned threads,
		  const struct im_scan_ops *ops, struct im_lexicon **lex,
		  struct im_scan_counts *counts)
{
	unsigned n = im_scan_threads(threads, MAX_THREADS);
	size_t budget =
		ops->spill_budget ? ops->spill_budget : IM_SCAN_SPILL_BUDGET;
	const char *dir = ops->spill_dir;
	struct sign_worker *wk = NULL;
	struct im_lexicon *built = NULL;
	struct scan *sc;
	int ret;

	*lex = NULL;
	if (im_params_check(p, NULL, 0) < 0)
		return -EINVAL;
	if (!dir)
		dir = getenv("TMPDIR");
	if (!dir || !*dir)
		dir = "/tmp";
	sc = calloc(1, sizeof(*sc));
	if (!sc)
		return -ENOMEM;
	sc->p = p;
	sc->ops = ops;
	sc->cancel = ops->cancel;
	sc->counts = counts;
	scan_init(sc);
	ret = workers_new(sc, n, true, dir, budget / n ? budget / n : 1, &wk);
	if (ret)
		goto out;
	for (unsigned i = 0; i < n; i++)
		im_signer_set_copy_probe(wk[i].signer, copy_probe, &wk[i]);
	ret = walk_with(dirfd, sc, wk, n, first_work);
	if (ret)
		goto out;
	for (unsigned i = 0; i < n; i++)
		wk[i].nown = im_df_terms(wk[i].df);
	ret = build_and_number(wk, n, p, &built);
	if (ret == -EINVAL && ops->unsigned_results) {
		/* Fewer than two documents with terms: each result as read,
		 * texts unsigned. */
		ret = sign_all_kept(sc, wk, n);
		goto out;
	}
	if (ret == -EINVAL) {
		/* Fewer than two documents with terms: as a df scan saw it. */
		memset(counts->by_status, 0, sizeof(counts->by_status));
		counts->bytes = 0;
		for (unsigned i = 0; i < n; i++) {
			for (unsigned j = 0; j < IM_DOC_STATUS_COUNT; j++)
				counts->by_status[j] += wk[i].pre_status[j];
			counts->bytes += wk[i].pre_bytes;
		}
		ret = 0;
		goto out;
	}
	if (ret)
		goto out;
	if (ops->lexicon) {
		ret = ops->lexicon(built, ops->arg);
		if (ret)
			goto out;
	}
	/* ops->lexicon may have handed it on: it is the caller's now, even
	 * if signing fails. */
	sc->lex = built;
	*lex = built;
	built = NULL;
	ret = masks_new(sc);
	if (!ret)
		ret = sign_all_kept(sc, wk, n);
out:
	if (wk)
		workers_free(wk, n);
	im_lexicon_free(built);
	free(sc->masks);
	scan_destroy(sc);
	free(sc);
	return ret;
}
