/**
 * @file scanner.c
 * The scanner thread and the signing workers.
 *
 * The scanner thread owns the slow phases: building the lexicon from the tree
 * on a first mount (im_scan_df), full scans (im_scan_sign, the same code path
 * as `imatch scan`) on start, on inotify overflow and periodically when the
 * watch limit was reached, and saving the signature cache every few seconds
 * when something changed. A full scan walks the whole tree but signs only the
 * files whose size, mtime or inode differ from what the tree (or, on start,
 * the loaded cache) knows; nodes the walk did not see are swept afterwards.
 *
 * Workers sign the files the watcher queues. The queue holds nodes, not paths,
 * so a file renamed while it waits is signed under its new name; a node
 * removed while queued or being signed is only marked NODE_DEAD and freed by
 * the worker that holds it.
 */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"

#define SAVE_EVERY_SECS 5

/* ---- The work queue ------------------------------------------------------- */

void scanner_queue(struct imfs *fs, struct node *n)
{
	if (n->flags & (NODE_QUEUED | NODE_DIR | NODE_DEAD))
		return;
	pthread_mutex_lock(&fs->work_lock);
	if (fs->qlen == fs->qcap) {
		size_t nc = fs->qcap ? fs->qcap * 2 : 256;
		struct node **nq = malloc(nc * sizeof(*nq));
		if (!nq) {
			pthread_mutex_unlock(&fs->work_lock);
			scanner_request_rescan(fs);
			return;
		}
		for (size_t i = 0; i < fs->qlen; i++)
			nq[i] = fs->queue[(fs->qhead + i) % fs->qcap];
		free(fs->queue);
		fs->queue = nq;
		fs->qcap = nc;
		fs->qhead = 0;
	}
	fs->queue[(fs->qhead + fs->qlen) % fs->qcap] = n;
	fs->qlen++;
	n->flags |= NODE_QUEUED;
	pthread_cond_signal(&fs->work_cond);
	pthread_mutex_unlock(&fs->work_lock);
}

uint64_t scanner_pending(struct imfs *fs)
{
	pthread_mutex_lock(&fs->work_lock);
	uint64_t n = fs->qlen + fs->busy;
	pthread_mutex_unlock(&fs->work_lock);
	uint64_t todo = __atomic_load_n(&fs->scan_todo, __ATOMIC_RELAXED);
	uint64_t done = __atomic_load_n(&fs->scanned, __ATOMIC_RELAXED);
	return n + (todo > done ? todo - done : 0);
}

bool scanner_request_rescan(struct imfs *fs)
{
	pthread_mutex_lock(&fs->work_lock);
	bool fresh = !fs->rescan_wanted;
	fs->rescan_wanted = true;
	pthread_cond_broadcast(&fs->scan_cond);
	pthread_mutex_unlock(&fs->work_lock);
	return fresh;
}

static struct node *work_pop(struct imfs *fs)
{
	struct node *n = NULL;

	pthread_mutex_lock(&fs->work_lock);
	while (!fs->qlen && !fs->stop)
		pthread_cond_wait(&fs->work_cond, &fs->work_lock);
	if (fs->qlen && !fs->stop) {
		n = fs->queue[fs->qhead];
		fs->qhead = (fs->qhead + 1) % fs->qcap;
		fs->qlen--;
		fs->busy++;
	}
	pthread_mutex_unlock(&fs->work_lock);
	return n;
}

static void work_done(struct imfs *fs)
{
	pthread_mutex_lock(&fs->work_lock);
	fs->busy--;
	pthread_mutex_unlock(&fs->work_lock);
}

static void *worker_main(void *arg)
{
	struct imfs *fs = arg;
	struct im_signer *signer = NULL;
	struct im_doc_sigs d;
	struct stat st;
	int ret;

	ret = im_signer_new(fs->lex, &fs->params, &signer);
	if (ret) {
		imfs_log(LOG_ERR, "cannot start a signing worker: %s",
			 strerror(-ret));
		return NULL;
	}
	for (;;) {
		struct node *n = work_pop(fs);
		if (!n)
			break;
		pthread_rwlock_wrlock(&fs->tree_lock);
		n->flags &= ~NODE_QUEUED;
		if (n->flags & NODE_DEAD) {
			if (!(n->flags & NODE_SIGNING))
				view_node_free(n);
			pthread_rwlock_unlock(&fs->tree_lock);
			work_done(fs);
			continue;
		}
		if (n->flags & NODE_SIGNING) {
			/* Never two signings of one file at once: an older
			 * result could land last. Its signer queues it again. */
			n->flags |= NODE_AGAIN;
			pthread_rwlock_unlock(&fs->tree_lock);
			work_done(fs);
			continue;
		}
		n->flags |= NODE_SIGNING;
		char *path = view_path(n);
		pthread_rwlock_unlock(&fs->tree_lock);

		ret = path ? im_signer_sign_at(signer, fs->srcfd, path, &d, &st)
			   : -ENOMEM;

		pthread_rwlock_wrlock(&fs->tree_lock);
		n->flags &= ~NODE_SIGNING;
		if (n->flags & NODE_DEAD) {
			if (!(n->flags & NODE_QUEUED))
				view_node_free(n);
			n = NULL;
		} else if (ret) {
			imfs_log(LOG_ERR, "signing %s: %s", path, strerror(-ret));
		} else {
			char *now = view_path(n);
			if (now && !strcmp(now, path)) {
				if (d.status == IM_DOC_ERROR &&
				    d.err == ENOENT) {
					/* Gone: its delete event follows. */
				} else {
					view_apply(fs, n, path, &st, &d);
					view_apply_links(fs, n, &st, &d);
				}
			} else {
				/* Renamed while signed: sign it again. */
				scanner_queue(fs, n);
			}
			free(now);
		}
		if (n && (n->flags & NODE_AGAIN)) {
			n->flags &= ~NODE_AGAIN;
			scanner_queue(fs, n);
		}
		pthread_rwlock_unlock(&fs->tree_lock);
		free(path);
		work_done(fs);
	}
	im_signer_free(signer);
	return NULL;
}

/* ---- Full scans ----------------------------------------------------------- */

static int64_t st_mtime_ns(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

/*
 * Restarts: files found unchanged in the loaded cache are applied to the
 * tree and the index by an applier thread, in batches, while the walker goes
 * on (the cache is immutable, so the walker checks it without a lock). On two
 * cores this halves a restart served from the cache.
 */
#define APPLY_BATCH 512
#define APPLY_QUEUE 32

struct apply_item {
	char *path;
	struct stat st;
};

struct apply_batch {
	struct apply_item *v;
	size_t n;
};

struct applier {
	struct imfs *fs;
	const struct im_state *cache;
	uint32_t gen;
	pthread_t tid;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* queue changed */
	struct apply_batch q[APPLY_QUEUE]; /* protected by lock */
	size_t qhead, qlen;
	bool done;
	struct apply_batch cur; /* the walker's batch being filled */
};

static void apply_batch(struct applier *a, struct apply_batch *b)
{
	struct imfs *fs = a->fs;
	struct im_state_entry e;

	pthread_rwlock_wrlock(&fs->tree_lock);
	for (size_t i = 0; i < b->n; i++) {
		const char *path = b->v[i].path;
		const struct stat *st = &b->v[i].st;
		struct node *n = view_ensure(fs, path, false);
		if (!n)
			continue;
		n->seen = a->gen;
		/* Signed by a worker meanwhile, from what is there now. */
		if (n->status != NODE_UNKNOWN && n->mtime_ns >= st_mtime_ns(st)) {
			view_set_stat(fs, n, st);
			continue;
		}
		if (im_state_find(a->cache, path, &e))
			continue;
		view_apply(fs, n, path, st, &e.d);
		if (node_is_doc(n))
			__atomic_add_fetch(&fs->cached, 1, __ATOMIC_RELAXED);
	}
	pthread_rwlock_unlock(&fs->tree_lock);
	for (size_t i = 0; i < b->n; i++)
		free(b->v[i].path);
	free(b->v);
	b->v = NULL;
	b->n = 0;
}

static void *applier_main(void *arg)
{
	struct applier *a = arg;

	pthread_mutex_lock(&a->lock);
	for (;;) {
		while (!a->qlen && !a->done)
			pthread_cond_wait(&a->cond, &a->lock);
		if (!a->qlen)
			break;
		struct apply_batch b = a->q[a->qhead];
		a->qhead = (a->qhead + 1) % APPLY_QUEUE;
		a->qlen--;
		pthread_cond_broadcast(&a->cond);
		pthread_mutex_unlock(&a->lock);
		apply_batch(a, &b);
		pthread_mutex_lock(&a->lock);
	}
	pthread_mutex_unlock(&a->lock);
	return NULL;
}

/* Walker side: hand the current batch over. */
static void applier_flush(struct applier *a)
{
	if (!a->cur.n)
		return;
	pthread_mutex_lock(&a->lock);
	while (a->qlen == APPLY_QUEUE)
		pthread_cond_wait(&a->cond, &a->lock);
	a->q[(a->qhead + a->qlen) % APPLY_QUEUE] = a->cur;
	a->qlen++;
	pthread_cond_broadcast(&a->cond);
	pthread_mutex_unlock(&a->lock);
	a->cur.v = NULL;
	a->cur.n = 0;
}

/* Walker side. @return false on ENOMEM (the caller then does it itself). */
static bool applier_add(struct applier *a, const char *path,
			const struct stat *st)
{
	if (!a->cur.v) {
		a->cur.v = malloc(APPLY_BATCH * sizeof(*a->cur.v));
		if (!a->cur.v)
			return false;
	}
	char *p = strdup(path);
	if (!p)
		return false;
	a->cur.v[a->cur.n].path = p;
	a->cur.v[a->cur.n].st = *st;
	if (++a->cur.n == APPLY_BATCH)
		applier_flush(a);
	return true;
}

static int applier_start(struct applier *a, struct imfs *fs,
			 const struct im_state *cache)
{
	memset(a, 0, sizeof(*a));
	a->fs = fs;
	a->cache = cache;
	pthread_mutex_init(&a->lock, NULL);
	pthread_cond_init(&a->cond, NULL);
	if (pthread_create(&a->tid, NULL, applier_main, a)) {
		pthread_mutex_destroy(&a->lock);
		pthread_cond_destroy(&a->cond);
		return -EAGAIN;
	}
	return 0;
}

static void applier_finish(struct applier *a)
{
	applier_flush(a);
	free(a->cur.v);
	pthread_mutex_lock(&a->lock);
	a->done = true;
	pthread_cond_broadcast(&a->cond);
	pthread_mutex_unlock(&a->lock);
	pthread_join(a->tid, NULL);
	pthread_mutex_destroy(&a->lock);
	pthread_cond_destroy(&a->cond);
}

struct scan_ctx {
	struct imfs *fs;
	uint32_t gen;
	const struct im_state *cache;
	struct applier *applier; /* with a cache */
};

static int scan_dir_cb(const char *path, const struct stat *st, void *arg)
{
	struct scan_ctx *sc = arg;
	struct imfs *fs = sc->fs;

	/* Our own mount, inside the source: ops.c shows it empty to us. */
	if (fs->fuse_dev && st->st_dev == fs->fuse_dev)
		return 0;
	int wd = watch_path(fs, path); /* before the lock: it resolves a path */
	pthread_rwlock_wrlock(&fs->tree_lock);
	struct node *n = *path ? view_ensure(fs, path, true) : fs->root;
	if (n) {
		n->seen = sc->gen;
		view_set_stat(fs, n, st);
		watch_bind(fs, n, wd);
	}
	pthread_rwlock_unlock(&fs->tree_lock);
	return fs->stop ? -ECANCELED : 0;
}

static bool scan_want_cb(const char *path, const struct stat *st, void *arg)
{
	struct scan_ctx *sc = arg;
	struct imfs *fs = sc->fs;
	bool want = true;
	struct im_state_entry e;

	if (sc->applier && !im_state_find(sc->cache, path, &e) &&
	    e.size == (uint64_t)st->st_size &&
	    e.mtime_ns == st_mtime_ns(st) && e.ino == st->st_ino &&
	    e.d.status != IM_DOC_ERROR && applier_add(sc->applier, path, st))
		return false;

	pthread_rwlock_wrlock(&fs->tree_lock);
	struct node *n = view_ensure(fs, path, false);
	if (!n)
		goto out;
	n->seen = sc->gen;
	if (n->status != NODE_UNKNOWN && n->status != IM_DOC_ERROR &&
	    n->size == (uint64_t)st->st_size &&
	    n->mtime_ns == st_mtime_ns(st) && n->src_ino == st->st_ino) {
		/* Unchanged since signed; keep up with chmod/chown. */
		view_set_stat(fs, n, st);
		want = false;
		goto out;
	}
	if (sc->cache && !im_state_find(sc->cache, path, &e) &&
	    e.size == (uint64_t)st->st_size &&
	    e.mtime_ns == st_mtime_ns(st) && e.ino == st->st_ino &&
	    e.d.status != IM_DOC_ERROR) {
		view_apply(fs, n, path, st, &e.d);
		if (node_is_doc(n))
			__atomic_add_fetch(&fs->cached, 1, __ATOMIC_RELAXED);
		want = false;
		goto out;
	}
	view_set_stat(fs, n, st);
	__atomic_add_fetch(&fs->scan_todo, 1, __ATOMIC_RELAXED);
out:
	pthread_rwlock_unlock(&fs->tree_lock);
	return want;
}

static void scan_result_cb(const char *path, const struct stat *st,
			   const struct im_doc_sigs *d, void *arg)
{
	struct scan_ctx *sc = arg;
	struct imfs *fs = sc->fs;

	pthread_rwlock_wrlock(&fs->tree_lock);
	struct node *n = view_lookup(fs, path);
	/* A newer version may have been signed by a worker meanwhile. */
	if (n && !(n->flags & NODE_DIR) &&
	    !(n->status != NODE_UNKNOWN && n->mtime_ns > st_mtime_ns(st)) &&
	    !(d->status == IM_DOC_ERROR && d->err == ENOENT))
		view_apply(fs, n, path, st, d);
	pthread_rwlock_unlock(&fs->tree_lock);
	__atomic_add_fetch(&fs->scanned, 1, __ATOMIC_RELAXED);
}

/* Walk and sign what changed; then forget what the walk did not see. */
static int full_scan(struct imfs *fs, const struct im_state *cache)
{
	struct im_scan_counts counts = { 0 };
	struct scan_ctx sc = { .fs = fs, .cache = cache };
	struct im_scan_ops ops = {
		.want = scan_want_cb,
		.result = scan_result_cb,
		.dir = scan_dir_cb,
		.arg = &sc,
		.skip_dev = fs->state_dev,
		.skip_ino = fs->state_ino,
		.cancel = &fs->cancel_scan,
	};
	int ret;

	pthread_rwlock_wrlock(&fs->tree_lock);
	sc.gen = ++fs->scan_gen;
	fs->root->seen = sc.gen;
	pthread_rwlock_unlock(&fs->tree_lock);
	__atomic_store_n(&fs->scan_todo, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&fs->scanned, 0, __ATOMIC_RELAXED);

	struct applier applier;
	if (cache && applier_start(&applier, fs, cache) == 0) {
		applier.gen = sc.gen;
		sc.applier = &applier;
	}
	ret = im_scan_sign(fs->srcfd, fs->lex, &fs->params, fs->threads, &ops,
			   &counts);
	if (sc.applier)
		applier_finish(&applier);
	__atomic_store_n(&fs->scan_todo, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&fs->scanned, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&fs->hidden_skipped, counts.hidden, __ATOMIC_RELAXED);
	__atomic_store_n(&fs->other_skipped, counts.other, __ATOMIC_RELAXED);
	__atomic_store_n(&fs->walk_errors, counts.errors, __ATOMIC_RELAXED);
	if (ret) {
		if (ret != -ECANCELED)
			imfs_log(LOG_ERR, "scanning %s: %s", fs->source_real,
				 strerror(-ret));
		return ret;
	}
	pthread_rwlock_wrlock(&fs->tree_lock);
	view_sweep(fs, sc.gen);
	pthread_rwlock_unlock(&fs->tree_lock);
	return 0;
}

/* ---- The lexicon ---------------------------------------------------------- */

static int build_lexicon(struct imfs *fs)
{
	struct im_scan_counts counts = { 0 };
	struct im_df *df = NULL;
	struct im_lexicon *lex = NULL;
	int ret;

	struct im_scan_ops ops = {
		.cancel = &fs->cancel_scan,
		.skip_dev = fs->state_dev,
		.skip_ino = fs->state_ino,
	};

	ret = im_scan_df(fs->srcfd, &fs->params, fs->threads, &ops, &df,
			 &counts);
	if (ret)
		goto out;
	ret = im_lexicon_build(df, fs->params.nidf_lo, fs->params.nidf_hi,
			       fs->params.secondary_cap, &lex);
	if (ret)
		goto out;
	ret = im_lexicon_save(lex, fs->lexicon_path);
	if (ret) {
		imfs_log(LOG_ERR, "saving the lexicon to %s: %s",
			 fs->lexicon_path, strerror(-ret));
		goto out;
	}
	imfs_log(LOG_INFO, "lexicon built from %llu documents: %zu + %zu terms",
		 (unsigned long long)im_df_docs(df),
		 im_lexicon_primary_size(lex), im_lexicon_secondary_size(lex));
	uint64_t lex_key = 0;
	im_state_file_key(fs->lexicon_path, &lex_key);
	fs->key = im_state_key(&fs->params, lex_key);
	__atomic_store_n(&fs->lex, lex, __ATOMIC_RELEASE);
	lex = NULL;
out:
	im_lexicon_free(lex);
	im_df_free(df);
	return ret;
}

/* ---- Saving ----------------------------------------------------------------- */

static int add_subtree(struct imfs *fs, struct im_state_writer *w,
		       struct node *dir, char *path, size_t len, size_t cap)
{
	int ret = 0;

	for (struct node *c = dir->child; c && !ret; c = c->next) {
		size_t nl = strlen(c->name);
		if (len + nl + 2 > cap)
			continue; /* deeper than PATH_MAX * 4: not cached */
		size_t l = len;
		if (l)
			path[l++] = '/';
		memcpy(path + l, c->name, nl + 1);
		if (c->flags & NODE_DIR) {
			ret = add_subtree(fs, w, c, path, l + nl, cap);
		} else if (c->status != NODE_UNKNOWN &&
			   c->status != IM_DOC_ERROR) {
			struct im_doc_sigs d;
			if (!node_is_doc(c) || im_index_get(fs->idx, path, &d)) {
				memset(&d, 0, sizeof(d));
				d.status = node_is_doc(c) ? IM_DOC_ERROR
							  : c->status;
			}
			if (d.status != IM_DOC_ERROR)
				ret = im_state_writer_add(w, path, c->size,
							  c->mtime_ns,
							  c->src_ino, &d);
		}
		path[len] = 0;
	}
	return ret;
}

int scanner_save(struct imfs *fs)
{
	struct im_state_writer *w = NULL;
	size_t cap = 16384;
	char *path = malloc(cap);
	int ret = -ENOMEM;

	if (!path || !fs->lex)
		goto out;
	ret = im_state_writer_new(fs->key, &w);
	if (ret)
		goto out;
	path[0] = 0;
	/* Cleared first: a change made while the image is built dirties it
	 * again. Readers go on meanwhile; only updates wait. */
	pthread_rwlock_wrlock(&fs->tree_lock);
	fs->dirty = false;
	pthread_rwlock_unlock(&fs->tree_lock);
	pthread_rwlock_rdlock(&fs->tree_lock);
	ret = add_subtree(fs, w, fs->root, path, 0, cap);
	pthread_rwlock_unlock(&fs->tree_lock);
	if (ret)
		goto out;
	ret = im_state_writer_commit(w, fs->cache_path);
	if (ret) {
		imfs_log(LOG_ERR, "saving the signature cache to %s: %s",
			 fs->cache_path, strerror(-ret));
		pthread_rwlock_wrlock(&fs->tree_lock);
		fs->dirty = true;
		pthread_rwlock_unlock(&fs->tree_lock);
		goto out;
	}
	__atomic_add_fetch(&fs->saves, 1, __ATOMIC_RELAXED);
out:
	im_state_writer_free(w);
	free(path);
	return ret;
}

/* ---- The scanner thread ------------------------------------------------------ */

static int start_workers(struct imfs *fs)
{
	unsigned n = fs->threads;
	if (!n) {
		long c = sysconf(_SC_NPROCESSORS_ONLN);
		n = c > 0 ? (unsigned)c : 1;
	}
	fs->worker_tids = calloc(n, sizeof(*fs->worker_tids));
	if (!fs->worker_tids)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		if (pthread_create(&fs->worker_tids[i], NULL, worker_main, fs))
			break;
		fs->nworkers++;
	}
	return fs->nworkers ? 0 : -EAGAIN;
}

static void set_phase(struct imfs *fs, enum imfs_phase p)
{
	__atomic_store_n(&fs->phase, p, __ATOMIC_RELAXED);
	inval_request(fs);
}

static bool wait_stop(struct imfs *fs, unsigned secs)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += secs;
	pthread_mutex_lock(&fs->work_lock);
	while (!fs->stop && !fs->rescan_wanted &&
	       pthread_cond_timedwait(&fs->scan_cond, &fs->work_lock, &ts) == 0)
		;
	bool stop = fs->stop;
	pthread_mutex_unlock(&fs->work_lock);
	return stop;
}

static void *scanner_main(void *arg)
{
	struct imfs *fs = arg;
	int ret;

	/* fs->fuse_dev was read from mountinfo by main(): a stat() of the
	 * mountpoint from here would be a request to our own mount. */
	while (!fs->lex && !fs->stop) {
		set_phase(fs, PHASE_LEXICON);
		imfs_log(LOG_INFO, "building the lexicon from %s", fs->source_real);
		ret = build_lexicon(fs);
		if (!ret)
			break;
		if (ret == -ECANCELED)
			return NULL;
		/* Fewer than two documents: nothing to compare yet. */
		set_phase(fs, PHASE_NO_LEXICON);
		unsigned retry = fs->rescan_secs < 5 ? fs->rescan_secs : 5;
		imfs_log(LOG_NOTICE, "no lexicon yet (%s); retrying every %u s",
			 ret == -EINVAL ? "fewer than two documents"
					: strerror(-ret),
			 retry);
		if (wait_stop(fs, retry))
			return NULL;
	}
	if (fs->stop)
		return NULL;

	/* A cache made before this lexicon was built may still match it. */
	if (!fs->cache) {
		char why[160];
		ret = im_state_load(fs->cache_path, fs->key, &fs->cache, why,
				    sizeof(why));
		if (ret && ret != -ENOENT)
			imfs_log(LOG_NOTICE, "not using the signature cache %s: %s",
				 fs->cache_path, why);
	}
	if (start_workers(fs))
		imfs_log(LOG_ERR, "cannot start signing workers");
	if (watch_start(fs))
		imfs_log(LOG_ERR, "cannot start the watcher");

	set_phase(fs, PHASE_SCANNING);
	ret = full_scan(fs, fs->cache);
	im_state_free(fs->cache);
	fs->cache = NULL;
	if (ret == -ECANCELED)
		return NULL;
	imfs_log(LOG_INFO, "scan done: %llu documents, %llu from the cache",
		 (unsigned long long)(fs->count[IM_DOC_SIGNED] +
				      fs->count[IM_DOC_REJECTED]),
		 (unsigned long long)fs->cached);
	set_phase(fs, PHASE_LIVE);
	/* Give back what the scan's batches and queues used (glibc keeps
	 * freed memory in per-thread arenas otherwise). */
	malloc_trim(0);
	scanner_save(fs);

	time_t last_save = time(NULL), last_scan = time(NULL);
	while (!wait_stop(fs, 1)) {
		bool rescan = false;
		pthread_mutex_lock(&fs->work_lock);
		if (fs->rescan_wanted) {
			rescan = true;
			fs->rescan_wanted = false;
		}
		pthread_mutex_unlock(&fs->work_lock);
		time_t now = time(NULL);
		if (__atomic_load_n(&fs->watch_limit, __ATOMIC_RELAXED) &&
		    now - last_scan >= (time_t)fs->rescan_secs)
			rescan = true;
		if (rescan) {
			set_phase(fs, PHASE_RESCANNING);
			__atomic_add_fetch(&fs->rescans, 1, __ATOMIC_RELAXED);
			if (full_scan(fs, NULL) == -ECANCELED)
				break;
			set_phase(fs, PHASE_LIVE);
			last_scan = time(NULL);
		}
		pthread_rwlock_rdlock(&fs->tree_lock);
		bool dirty = fs->dirty;
		pthread_rwlock_unlock(&fs->tree_lock);
		if (dirty && now - last_save >= SAVE_EVERY_SECS) {
			scanner_save(fs);
			last_save = now;
		}
	}
	return NULL;
}

int scanner_start(struct imfs *fs)
{
	if (pthread_create(&fs->scanner_tid, NULL, scanner_main, fs))
		return -EAGAIN;
	fs->scanner_started = true;
	return 0;
}

void scanner_stop(struct imfs *fs)
{
	pthread_mutex_lock(&fs->work_lock);
	fs->stop = true;
	fs->cancel_scan = true;
	pthread_cond_broadcast(&fs->work_cond);
	pthread_cond_broadcast(&fs->scan_cond);
	pthread_mutex_unlock(&fs->work_lock);
	if (fs->scanner_started)
		pthread_join(fs->scanner_tid, NULL);
	fs->scanner_started = false;
	for (unsigned i = 0; i < fs->nworkers; i++)
		pthread_join(fs->worker_tids[i], NULL);
	fs->nworkers = 0;
	free(fs->worker_tids);
	fs->worker_tids = NULL;
	/* Nodes still queued were never signed: free the dead ones. */
	pthread_rwlock_wrlock(&fs->tree_lock);
	for (size_t i = 0; i < fs->qlen; i++) {
		struct node *n = fs->queue[(fs->qhead + i) % fs->qcap];
		n->flags &= ~NODE_QUEUED;
		if (n->flags & NODE_DEAD)
			view_node_free(n);
	}
	fs->qlen = 0;
	pthread_rwlock_unlock(&fs->tree_lock);
	free(fs->queue);
	fs->queue = NULL;
}
