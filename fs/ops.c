/**
 * @file ops.c
 * The FUSE low-level operations: a read-only view answered from memory
 * (view.h) under the tree lock held shared, never from the source disk.
 *
 * Kernel caching (not with allow_other: see entry_secs()): entries and
 * attributes live ENTRY_SECS, listings are kept
 * (cache_readdir, keep_cache), symlink targets are cached, and readdirplus
 * fills the dentry cache as a listing is read; every change of the view is
 * pushed out by invalidation (inval.h), not waited out. Negative entries are
 * never cached. The generated files (status, signatures, similarity) are read
 * with direct_io, their text fixed at open.
 *
 * Listings are taken whole at opendir (again at offset 0 if the view changed
 * since), so offsets stay stable while the view changes. readdirplus hands out inode numbers only if nothing changed since
 * (the model's clock): an entry the kernel would otherwise create after its
 * invalidation went by could outlive a change. Cluster numbers are counted
 * in ctab under the tree lock, before the reply leaves.
 *
 * Handles: every open directory and generated file is on one list, so that
 * those the kernel never released (the session ended first) are freed by
 * ops_release_all() after the loop; a released text first rests in a
 * graveyard (see GRAVE_MS), which ops_release_all() empties too.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>

#include "ctab.h"
#include "ino.h"
#include "model.h"
#include "redundant.h"
#include "status.h"
#include "util.h"
#include "view.h"

/* Long: every change is invalidated; the kernel may keep the rest. */
#define ENTRY_SECS 86400.0

/* ---- Handles ---------------------------------------------------------------- */

struct handle {
	struct handle *prev, *next; /* protected by handles_lock */
	void (*free)(struct handle *h);
	int64_t released_ms; /* in the graveyard: when released */
};

/*
 * A RELEASE can be handled while a READ of the same handle is still being
 * answered in another thread (seen under churn: fuse_reply_buf() read the
 * freed text). Released texts therefore rest in the graveyard for GRAVE_MS
 * before they are freed.
 */
#define GRAVE_MS 2000

static pthread_mutex_t handles_lock = PTHREAD_MUTEX_INITIALIZER;
static struct handle *handles; /* open; protected by handles_lock */
static struct handle *grave;   /* released, newest first; handles_lock */

static uint64_t handle_open(struct handle *h, void (*free_fn)(struct handle *))
{
	h->free = free_fn;
	pthread_mutex_lock(&handles_lock);
	h->prev = NULL;
	h->next = handles;
	if (handles)
		handles->prev = h;
	handles = h;
	pthread_mutex_unlock(&handles_lock);
	return (uintptr_t)h;
}

/* Take @p h off the open list. handles_lock held. */
static void handle_unlink(struct handle *h)
{
	if (h->prev)
		h->prev->next = h->next;
	else
		handles = h->next;
	if (h->next)
		h->next->prev = h->prev;
}

static void free_chain(struct handle *h)
{
	while (h) {
		struct handle *next = h->next;
		h->free(h);
		h = next;
	}
}

/* Released: free @p fh now, or after GRAVE_MS if @p bury. */
static void handle_close(uint64_t fh, bool bury)
{
	struct handle *h = (void *)(uintptr_t)fh, *old = NULL, **pp;
	int64_t now = mono_ms();

	pthread_mutex_lock(&handles_lock);
	handle_unlink(h);
	if (bury) {
		h->released_ms = now;
		h->next = grave;
		grave = h;
		h = NULL;
		for (pp = &grave; *pp; pp = &(*pp)->next)
			if (now - (*pp)->released_ms > GRAVE_MS) {
				old = *pp;
				*pp = NULL;
				break;
			}
	}
	pthread_mutex_unlock(&handles_lock);
	if (h)
		h->free(h);
	free_chain(old);
}

/* ---- Listings without a handle ----------------------------------------------- */

/*
 * Once an opendir answers ENOSYS, the kernel sends no OPENDIR or RELEASEDIR
 * again and caches every listing (no_opendir): a warm find or ls -lR then
 * costs no round trip per directory (two per directory made find 1.4x as
 * slow as on disk). Listings do not depend on the caller unless allow_other
 * or a mount inside SOURCE says so, and then handles are kept; so they are
 * with -o auto_unmount, whose fusermount3 learns that the daemon died
 * only from an open of the mountpoint that fails with ENOTCONN, which an
 * open the kernel answers itself never does.
 *
 * The kernel reads a listing in calls of a page or so: the last LISTINGS
 * listings taken are kept by inode and the model's clock, so that one is
 * taken once, not once per call, and every call of one clock sees the same
 * offsets. A change moves the clock (and the directory's listing is
 * invalidated): the next call takes it again.
 */
#define LISTINGS 16

struct listing {
	uint64_t ino;
	int64_t clock_ns;
	uint64_t used; /* listings_tick when last read; 0: empty */
	struct vlist list;
};

static int no_opendir; /* atomic: set once by imfs_init */
static pthread_mutex_t listings_lock = PTHREAD_MUTEX_INITIALIZER;
static struct listing listings[LISTINGS]; /* protected by listings_lock */
static uint64_t listings_tick;		  /* protected by listings_lock */

/* The kept listing of @p ino at @p clock_ns, or NULL. listings_lock held. */
static struct listing *listing_find(uint64_t ino, int64_t clock_ns)
{
	for (unsigned i = 0; i < LISTINGS; i++)
		if (listings[i].used && listings[i].ino == ino &&
		    listings[i].clock_ns == clock_ns) {
			listings[i].used = ++listings_tick;
			return &listings[i];
		}
	return NULL;
}

/* Keep @p list (taken over) in the least recently read slot.
 * listings_lock held. */
static struct listing *listing_keep(uint64_t ino, int64_t clock_ns,
				    struct vlist *list)
{
	struct listing *l = &listings[0];

	for (unsigned i = 1; i < LISTINGS; i++)
		if (listings[i].used < l->used)
			l = &listings[i];
	view_list_free(&l->list);
	*l = (struct listing){ino, clock_ns, ++listings_tick, *list};
	memset(list, 0, sizeof(*list));
	return l;
}

void ops_release_all(void)
{
	pthread_mutex_lock(&handles_lock);
	struct handle *open = handles, *buried = grave;
	handles = grave = NULL;
	pthread_mutex_unlock(&handles_lock);
	free_chain(open);
	free_chain(buried);
	pthread_mutex_lock(&listings_lock);
	for (unsigned i = 0; i < LISTINGS; i++)
		view_list_free(&listings[i].list);
	memset(listings, 0, sizeof(listings));
	pthread_mutex_unlock(&listings_lock);
}

static struct imfs *FS(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static struct tree *T(fuse_req_t req)
{
	return FS(req)->model->tree;
}

static void caller(fuse_req_t req, struct vcaller *who)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);

	who->uid = c->uid;
	who->gid = c->gid;
	who->pid = c->pid;
	/* Only allow_other lets others in; for them the groups decide what
	 * they may see (view.c). More groups than fit: the first ones. */
	who->ngroups = 0;
	if (FS(req)->opts->allow_other && c->uid != 0) {
		int n = fuse_req_getgroups(req, VCALLER_GROUPS, who->groups);
		who->ngroups = n < 0		    ? 0
			       : n > VCALLER_GROUPS ? VCALLER_GROUPS
						    : n;
	}
}

/*
 * With allow_other each caller sees only what it could reach in the source
 * (view.c), but the kernel's caches are shared by every user: nothing is
 * cached then, so that every lookup and listing is answered for its caller.
 */
static double entry_secs(fuse_req_t req)
{
	return FS(req)->opts->allow_other ? 0 : ENTRY_SECS;
}

static double attr_secs(fuse_req_t req, const struct stat *st)
{
	/* status changes with every count; its size is only a hint. */
	if (st->st_ino == INO_STATUS)
		return 0;
	return entry_secs(req);
}

/* The longest an operation that makes the plan waits for the watcher's run
 * of changes (tree_wait_batch()): a run is milliseconds, unless the disk
 * stalls it. */
#define PLAN_WAIT_MS 200

/*
 * Take the tree lock for an operation on @p ino that may ask for the removal
 * plan: in redundant/, or, when @p doc, in a document's by-doc directory (its
 * keeper). While the plan is not current the lock is taken as a long reader
 * (tree_rdlock_long()), and the operation makes the plan under it: no change
 * lands before the answer is read from it, and lookups go on meanwhile.
 * Made under the lock held as usual, a plan (seconds on a large tree) kept
 * every lookup waiting behind the first writer queued (the lock prefers
 * writers); made outside the lock, under steady changes it was old once
 * made, and made again under it. Writers wait for one plan at most: made,
 * it stays current until they change the tree, and operations hold the
 * lock as usual while it is. @return whether it is held long: release it
 * with plan_unlock().
 */
static bool plan_lock(struct imfs *fs, fuse_ino_t ino, bool doc)
{
	struct tree *t = fs->model->tree;
	bool want = ino == INO_REDUNDANT;
	struct vobj o;

	tree_rdlock(t);
	if (!want && doc)
		want = !view_get(fs, ino, &o) && o.kind == V_DOC;
	if (!want || redundant_current(fs))
		return false;
	tree_unlock(t);
	/* Made between two changes of the watcher's run, the plan would be
	 * stale at the next, and made again by the next operation: the
	 * watcher would wait for one plan per change it applies. */
	tree_wait_batch(t, PLAN_WAIT_MS);
	tree_rdlock(t);
	if (redundant_current(fs))
		return false;
	tree_unlock(t);
	tree_rdlock_long(t);
	return true;
}

static void plan_unlock(struct imfs *fs, bool held_long)
{
	if (held_long)
		tree_unlock_long(fs->model->tree);
	else
		tree_unlock(fs->model->tree);
}

/* ---- Life cycle ----------------------------------------------------------- */

static void imfs_init(void *userdata, struct fuse_conn_info *conn)
{
	const struct imfs *fs = userdata;

	/* A member's target changes only with an invalidation. */
	if (conn->capable & FUSE_CAP_CACHE_SYMLINKS)
		conn->want |= FUSE_CAP_CACHE_SYMLINKS;
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
	/* Always plus: one `ls -lR` fills the dentry cache. */
	conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
	/* Refetching the mtime before reading a cached listing is what
	 * makes a listing cached by a racing readdir go (model.h). */
	if (conn->capable & FUSE_CAP_AUTO_INVAL_DATA)
		conn->want |= FUSE_CAP_AUTO_INVAL_DATA;
	/* See "Listings without a handle". Only capable is read. */
	if ((conn->capable & FUSE_CAP_NO_OPENDIR_SUPPORT) &&
	    !fs->opts->allow_other && !fs->mnt_inside &&
	    !fs->opts->auto_unmount)
		__atomic_store_n(&no_opendir, 1, __ATOMIC_RELAXED);
}

/* ---- Names and attributes ---------------------------------------------------- */

static void imfs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct imfs *fs = FS(req);
	struct fuse_entry_param e;
	struct vobj dir, o;
	struct vcaller who;
	bool held_long;
	int ret;

	caller(req, &who);
	memset(&e, 0, sizeof(e));
	held_long = plan_lock(fs, parent, !strcmp(name, "keeper"));
	ret = view_get(fs, parent, &dir);
	if (!ret)
		ret = view_lookup(fs, &dir, name, &who, &o);
	if (!ret) {
		view_stat(fs, &o, &who, &e.attr);
		e.ino = e.attr.st_ino;
		e.attr_timeout = attr_secs(req, &e.attr);
		e.entry_timeout = entry_secs(req);
		if (o.kind == V_CLUSTER)
			ret = ctab_ref(fs->ctab, &o.sig, e.ino, 1);
	}
	plan_unlock(fs, held_long);
	if (ret) {
		fuse_reply_err(req, -ret);
	} else if (fuse_reply_entry(req, &e) && o.kind == V_CLUSTER) {
		ctab_forget(fs->ctab, e.ino, 1);
	}
}

static void forget_one(struct imfs *fs, fuse_ino_t ino, uint64_t n)
{
	if (ino & CTAB_INO_BIT)
		ctab_forget(fs->ctab, ino, n);
}

static void imfs_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	forget_one(FS(req), ino, nlookup);
	fuse_reply_none(req);
}

static void imfs_forget_multi(fuse_req_t req, size_t count,
			      struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		forget_one(FS(req), forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void imfs_getattr(fuse_req_t req, fuse_ino_t ino,
			 struct fuse_file_info *fi)
{
	struct imfs *fs = FS(req);
	struct vcaller who;
	struct stat st;
	struct vobj o;
	(void)fi;

	caller(req, &who);
	tree_rdlock(T(req));
	int ret = view_get(fs, ino, &o);
	if (!ret)
		view_stat(fs, &o, &who, &st);
	tree_unlock(T(req));
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_attr(req, &st, attr_secs(req, &st));
}

static void imfs_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct imfs *fs = FS(req);
	struct vcaller who;
	struct vobj o;
	char *target = NULL;

	caller(req, &who);
	tree_rdlock(T(req));
	int ret = view_get(fs, ino, &o);
	if (!ret)
		ret = view_readlink(fs, &o, &who, &target);
	tree_unlock(T(req));
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_readlink(req, target);
	free(target);
}

/* ---- Directories -------------------------------------------------------------- */

struct dir_handle {
	struct handle h; /* first */
	struct vlist list;
	int64_t clock_ns; /* the model's, when listed */
	struct vcaller who;
};

/* (Re)take the listing of @p ino. Tree lock held. */
static int list_dir(struct imfs *fs, fuse_ino_t ino, struct dir_handle *h)
{
	struct vobj o;
	int ret = view_get(fs, ino, &o);

	view_list_free(&h->list);
	if (!ret)
		ret = view_list(fs, &o, &h->who, &h->list);
	h->clock_ns = fs->model->clock_ns;
	return ret;
}

static void dir_free(struct handle *h)
{
	struct dir_handle *d = (struct dir_handle *)h;

	view_list_free(&d->list);
	free(d);
}

static void imfs_opendir(fuse_req_t req, fuse_ino_t ino,
			 struct fuse_file_info *fi)
{
	struct imfs *fs = FS(req);
	struct dir_handle *h = NULL;
	bool held_long;
	int ret = -ENOMEM;

	if (__atomic_load_n(&no_opendir, __ATOMIC_RELAXED)) {
		struct vobj o;

		tree_rdlock(T(req));
		ret = view_get(fs, ino, &o);
		tree_unlock(T(req));
		/* ENOSYS: opened, with listings cached, from now on. */
		fuse_reply_err(req, ret ? -ret : ENOSYS);
		return;
	}
	h = calloc(1, sizeof(*h));
	if (!h)
		goto out;
	caller(req, &h->who);
	held_long = plan_lock(fs, ino, true);
	ret = list_dir(fs, ino, h);
	plan_unlock(fs, held_long);
	if (ret)
		goto out;
	fi->fh = handle_open(&h->h, dir_free);
	/* The root is listed empty to our own threads when mounted inside
	 * SOURCE (view.c): never cache that for everyone. */
	fi->cache_readdir =
		!(ino == INO_ROOT && fs->mnt_inside) && !fs->opts->allow_other;
	fi->keep_cache = fi->cache_readdir;
	if (fuse_reply_open(req, fi))
		handle_close(fi->fh, false);
	return;
out:
	fuse_reply_err(req, -ret);
	if (h)
		view_list_free(&h->list);
	free(h);
}

/* Fill @p buf with entries from @p off. Tree lock held when @p plus. */
static size_t fill(fuse_req_t req, const struct vlist *list, char *buf,
		   size_t size, off_t off, bool plus, bool fresh)
{
	struct imfs *fs = FS(req);
	size_t pos = 0;

	for (size_t i = (size_t)off; i < list->n; i++) {
		struct ventry *v = &list->v[i];
		size_t need;

		if (!plus) {
			need = fuse_add_direntry(req, buf + pos, size - pos,
						 v->name, &v->st, (off_t)i + 1);
			if (need > size - pos)
				break;
			pos += need;
			continue;
		}
		struct fuse_entry_param e;
		memset(&e, 0, sizeof(e));
		e.attr = v->st;
		if (v->cluster)
			e.attr.st_ino = ctab_ino(fs->ctab, &v->sig);
		/* "." and "..", or a listing older than a change: names only,
		 * the kernel looks them up itself. */
		if (fresh && e.attr.st_ino) {
			e.ino = e.attr.st_ino;
			e.attr_timeout = entry_secs(req);
			e.entry_timeout = entry_secs(req);
		}
		need = fuse_add_direntry_plus(req, buf + pos, size - pos,
					      v->name, &e, (off_t)i + 1);
		if (need > size - pos)
			break;
		if (v->cluster && e.ino &&
		    ctab_ref(fs->ctab, &v->sig, e.ino, 1)) {
			/* Not counted: hand out the name only. */
			e.ino = 0;
			fuse_add_direntry_plus(req, buf + pos, size - pos,
					       v->name, &e, (off_t)i + 1);
		}
		pos += need;
	}
	return pos;
}

/* Fill from the kept listing of @p ino (taken now if there is none of the
 * model's clock). Tree lock held. */
static int fill_kept(fuse_req_t req, fuse_ino_t ino, char *buf, size_t size,
		     off_t off, bool plus, size_t *len)
{
	struct imfs *fs = FS(req);
	int64_t clock_ns = fs->model->clock_ns;
	struct listing *l;
	struct vlist list = {0};
	struct vcaller who;
	struct vobj o;
	int ret = 0;

	pthread_mutex_lock(&listings_lock);
	l = listing_find(ino, clock_ns);
	pthread_mutex_unlock(&listings_lock);
	if (!l) {
		caller(req, &who);
		ret = view_get(fs, ino, &o);
		if (!ret)
			ret = view_list(fs, &o, &who, &list);
		if (ret)
			return ret;
	}
	pthread_mutex_lock(&listings_lock);
	/* Another reader may have kept it meanwhile, or pushed it out. */
	l = listing_find(ino, clock_ns);
	if (!l)
		l = listing_keep(ino, clock_ns, &list);
	*len = fill(req, &l->list, buf, size, off, plus, true);
	pthread_mutex_unlock(&listings_lock);
	view_list_free(&list);
	return 0;
}

/*
 * The kernel caches a listing under the directory's mtime as it was when it
 * asked for offset 0 (the model's clock, view.c), so what it gets from
 * offset 0 must be at least that new: a listing taken at opendir is taken
 * again if the view changed since.
 */
static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi, bool plus)
{
	struct imfs *fs = FS(req);
	struct dir_handle *h = (void *)(uintptr_t)fi->fh;
	char *buf = malloc(size);
	size_t len = 0;
	bool held_long = false;
	int ret = 0;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* Only offset 0 lists again, or any offset without a handle if the
	 * view changed since the last call. */
	if (off == 0 || !h)
		held_long = plan_lock(fs, ino, true);
	else
		tree_rdlock(T(req));
	if (!h) {
		ret = fill_kept(req, ino, buf, size, off, plus, &len);
	} else {
		if (off == 0 && h->clock_ns != fs->model->clock_ns)
			ret = list_dir(fs, ino, h);
		if (!ret)
			len = fill(req, &h->list, buf, size, off, plus,
				   h->clock_ns == fs->model->clock_ns);
	}
	plan_unlock(fs, held_long);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_buf(req, buf, len);
	free(buf);
}

static void imfs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			 struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, false);
}

static void imfs_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			     off_t off, struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, true);
}

static void imfs_releasedir(fuse_req_t req, fuse_ino_t ino,
			    struct fuse_file_info *fi)
{
	(void)ino;
	handle_close(fi->fh, false);
	fuse_reply_err(req, 0);
}

/* ---- Generated files ------------------------------------------------------------ */

struct content {
	struct handle h; /* first */
	size_t len;
	char *data;
};

static void content_free(struct handle *h)
{
	struct content *ct = (struct content *)h;

	free(ct->data);
	free(ct);
}

static void imfs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct imfs *fs = FS(req);
	struct content *ct = calloc(1, sizeof(*ct));
	struct vcaller who;
	struct vobj o;
	int ret = -ENOMEM;

	if ((fi->flags & O_ACCMODE) != O_RDONLY ||
	    (fi->flags & (O_TRUNC | O_CREAT))) {
		ret = -EROFS;
		goto out;
	}
	if (!ct)
		goto out;
	if (ino == INO_STATUS)
		status_update(fs);
	tree_rdlock(T(req));
	ret = view_get(fs, ino, &o);
	caller(req, &who);
	if (!ret)
		ret = view_text(fs, &o, &who, &ct->data, &ct->len);
	tree_unlock(T(req));
	if (ret)
		goto out;
	fi->fh = handle_open(&ct->h, content_free);
	/* The text is fixed at open: never cache it past that. */
	fi->direct_io = 1;
	if (fuse_reply_open(req, fi))
		handle_close(fi->fh, false);
	return;
out:
	fuse_reply_err(req, -ret);
	if (ct)
		free(ct->data);
	free(ct);
}

static void imfs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		      struct fuse_file_info *fi)
{
	const struct content *ct = (const void *)(uintptr_t)fi->fh;
	(void)ino;

	if (off < 0 || (size_t)off >= ct->len) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > ct->len - (size_t)off)
		size = ct->len - (size_t)off;
	fuse_reply_buf(req, ct->data + off, size);
}

static void imfs_release(fuse_req_t req, fuse_ino_t ino,
			 struct fuse_file_info *fi)
{
	(void)ino;
	handle_close(fi->fh, true);
	fuse_reply_err(req, 0);
}

static void imfs_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct model *m = FS(req)->model;
	struct statvfs sv;
	(void)ino;

	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = sv.f_frsize = 4096;
	tree_rdlock(m->tree);
	sv.f_files =
		m->dirs + m->count[IM_DOC_SIGNED] + m->count[IM_DOC_REJECTED];
	tree_unlock(m->tree);
	sv.f_namemax = 255;
	sv.f_flag = ST_RDONLY | ST_NOSUID | ST_NODEV;
	fuse_reply_statfs(req, &sv);
}

/* The mount is read-only ("ro"): the kernel refuses writes before they
 * reach us; these answer anyone who asks anyway. */
static void imfs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
			 int to_set, struct fuse_file_info *fi)
{
	(void)ino;
	(void)attr;
	(void)to_set;
	(void)fi;
	fuse_reply_err(req, EROFS);
}

/* ---- Extended attributes (view_getxattr()) ------------------------------------ */

static void imfs_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			  size_t size)
{
	struct imfs *fs = FS(req);
	char buf[PATH_MAX + 64];
	struct vcaller who;
	struct vobj o;
	bool held_long;
	size_t len;
	int ret;

	/* Only user.imatch.* exists. Saying that the other namespaces are
	 * not supported, rather than that a name is absent, lets ls -l stop
	 * asking for security.selinux and ACLs on this file system after its
	 * first file: the kernel caches no answer, so each ask is a round
	 * trip, and they made a warm ls -lR three times slower than on disk. */
	if (strncmp(name, "user.", 5)) {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	caller(req, &who);
	held_long = plan_lock(fs, ino,
			      !strcmp(name, "user.imatch.keeper") ||
				      !strcmp(name, "user.imatch.similarity"));
	ret = view_get(fs, ino, &o);
	if (!ret)
		ret = view_getxattr(fs, &o, name, &who, buf, sizeof(buf));
	plan_unlock(fs, held_long);
	len = ret ? 0 : strlen(buf);
	if (ret)
		fuse_reply_err(req, -ret);
	else if (size == 0)
		fuse_reply_xattr(req, len);
	else if (size < len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, buf, len);
}

static void imfs_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct imfs *fs = FS(req);
	char buf[256];
	struct vcaller who;
	struct vobj o;
	size_t len = 0;
	bool held_long;
	int ret;

	caller(req, &who);
	/* Whether user.imatch.keeper and .similarity are there asks the plan. */
	held_long = plan_lock(fs, ino, true);
	ret = view_get(fs, ino, &o);
	if (!ret)
		len = view_listxattr(fs, &o, &who, buf, sizeof(buf));
	plan_unlock(fs, held_long);
	if (ret)
		fuse_reply_err(req, -ret);
	else if (size == 0)
		fuse_reply_xattr(req, len);
	else if (size < len || len > sizeof(buf))
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, buf, len);
}

const struct fuse_lowlevel_ops imfs_ops = {
	.init = imfs_init,
	.lookup = imfs_lookup,
	.forget = imfs_forget,
	.forget_multi = imfs_forget_multi,
	.getattr = imfs_getattr,
	.setattr = imfs_setattr,
	.readlink = imfs_readlink,
	.opendir = imfs_opendir,
	.readdir = imfs_readdir,
	.readdirplus = imfs_readdirplus,
	.releasedir = imfs_releasedir,
	.open = imfs_open,
	.read = imfs_read,
	.release = imfs_release,
	.statfs = imfs_statfs,
	.getxattr = imfs_getxattr,
	.listxattr = imfs_listxattr,
};
