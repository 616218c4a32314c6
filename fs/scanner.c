/**
 * @file scanner.c
 * The scanner thread (scanner.h).
 *
 * Restarts: files found unchanged in the loaded cache are applied to the
 * model by an applier thread, in batches, while the walker goes on (the
 * cache is immutable, so the walker checks it without a lock). On two
 * cores this halves a restart served from the cache.
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ino.h"
#include "model.h"
#include "scan.h"
#include "scanner.h"
#include "text.h"
#include "util.h"
#include "watch.h"
#include "workers.h"

#define SAVE_EVERY_SECS 5

struct scanner {
	struct imfs *fs;
	struct stateio *sio;
	struct im_lexicon *lex; /* atomic pointer; replaced by a rebuild */
	/* Lexicons a rebuild replaced: status may still read one, so they
	 * are freed with the scanner. Scanner thread. */
	struct im_lexicon **retired;
	size_t nretired;
	bool threads_started; /* scanner thread */
	bool resign_all;      /* the next scan signs every file anew */
	bool rebuilding;      /* atomic: the view mixes two lexicons */
	bool saved_busy; /* the last save left work queued; scanner thread */
	struct im_state *cache; /* the first scan's; scanner thread */
	pthread_t tid;
	bool started; /* main thread */
	bool cancel;  /* atomic; core's scans poll it */
	pthread_mutex_t lock;
	pthread_cond_t cond;	 /* rescan wanted or stop */
	bool rescan_wanted;	 /* lock */
	bool stop;		 /* lock */
	struct scanner_stats st; /* atomics, field by field */
	uint64_t todo, done;	 /* this scan's files to sign, signed */
};

static bool lexicon_outgrown(struct scanner *s);

#define ST_SET(s, f, v) __atomic_store_n(&(s)->st.f, (v), __ATOMIC_RELAXED)
#define ST_ADD(s, f, v) __atomic_add_fetch(&(s)->st.f, (v), __ATOMIC_RELAXED)

int scanner_new(struct imfs *fs, struct stateio *sio, struct im_lexicon *lex,
		struct im_state *cache, struct scanner **out)
{
	struct scanner *s = calloc(1, sizeof(*s));

	*out = NULL;
	if (!s)
		return -ENOMEM;
	s->fs = fs;
	s->sio = sio;
	s->lex = lex;
	s->cache = cache;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	*out = s;
	return 0;
}

void scanner_free(struct scanner *s)
{
	if (!s)
		return;
	im_lexicon_free(s->lex);
	for (size_t i = 0; i < s->nretired; i++)
		im_lexicon_free(s->retired[i]);
	free(s->retired);
	im_state_free(s->cache);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	free(s);
}

const struct im_lexicon *scanner_lexicon(struct scanner *s)
{
	return __atomic_load_n(&s->lex, __ATOMIC_ACQUIRE);
}

void scanner_stats(struct scanner *s, struct scanner_stats *out)
{
	out->phase = __atomic_load_n(&s->st.phase, __ATOMIC_RELAXED);
	out->cached = __atomic_load_n(&s->st.cached, __ATOMIC_RELAXED);
	out->cached_files =
		__atomic_load_n(&s->st.cached_files, __ATOMIC_RELAXED);
	out->hidden = __atomic_load_n(&s->st.hidden, __ATOMIC_RELAXED);
	out->other = __atomic_load_n(&s->st.other, __ATOMIC_RELAXED);
	out->excluded = __atomic_load_n(&s->st.excluded, __ATOMIC_RELAXED);
	out->sampled = __atomic_load_n(&s->st.sampled, __ATOMIC_RELAXED);
	out->walk_errors =
		__atomic_load_n(&s->st.walk_errors, __ATOMIC_RELAXED);
	out->rescans = __atomic_load_n(&s->st.rescans, __ATOMIC_RELAXED);
	out->relexicons = __atomic_load_n(&s->st.relexicons, __ATOMIC_RELAXED);
	out->saves = __atomic_load_n(&s->st.saves, __ATOMIC_RELAXED);
	out->source_lost =
		__atomic_load_n(&s->st.source_lost, __ATOMIC_RELAXED);
	out->save_errors =
		__atomic_load_n(&s->st.save_errors, __ATOMIC_RELAXED);
	uint64_t todo = __atomic_load_n(&s->todo, __ATOMIC_RELAXED);
	uint64_t done = __atomic_load_n(&s->done, __ATOMIC_RELAXED);
	out->pending = todo > done ? todo - done : 0;
	pthread_mutex_lock(&s->lock);
	out->rescan_wanted = s->rescan_wanted;
	pthread_mutex_unlock(&s->lock);
	out->relexicon_due = lexicon_outgrown(s);
}

bool scanner_request_rescan(struct scanner *s)
{
	pthread_mutex_lock(&s->lock);
	bool fresh = !s->rescan_wanted;
	s->rescan_wanted = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return fresh;
}

static bool cancelled(struct scanner *s)
{
	return __atomic_load_n(&s->cancel, __ATOMIC_RELAXED);
}

static void set_phase(struct scanner *s, enum scanner_phase p)
{
	ST_SET(s, phase, p);
	inval_inode(s->fs->inval, INO_STATUS);
}

/* ---- Applying cached results ---------------------------------------------- */

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
	struct scanner *s;
	const struct im_state *cache;
	uint16_t gen;
	pthread_t tid;
	pthread_mutex_t lock;
	pthread_cond_t cond;		   /* queue changed */
	struct apply_batch q[APPLY_QUEUE]; /* protected by lock */
	size_t qhead, qlen;
	bool done;
	struct apply_batch cur; /* the walker's batch being filled */
};

/* File @p path, found as @p st by walk generation @p gen, is unchanged
 * since the cache entry @p e: take the cached result. Tree lock held. */
static void take_cached(struct scanner *s, struct node *n, const char *path,
			const struct stat *st, const struct im_state_entry *e)
{
	model_apply(s->fs->model, n, path, st, &e->d);
	if (node_is_doc(n))
		ST_ADD(s, cached, 1);
	ST_ADD(s, cached_files, 1);
}

/*
 * A result refused for @p n because something was applied to it since the
 * walk saw it as @p st (a worker signed it meanwhile): where that was
 * another version than the walk's, a worker reads the file again and the
 * latest read decides. Mtimes cannot order the two (cp -p and tar give
 * older ones), and the change between them may have had its event lost to
 * a queue overflow, whose rescan is this. Tree lock held exclusively.
 */
static void read_again(struct scanner *s, struct node *n)
{
	if (workers_queue(s->fs->workers, n))
		scanner_request_rescan(s); /* no memory to queue it */
}

/* model_sweep(), model_unread(): a file the scan asked for (or, signing
 * every file anew, expected: model_expect_reads()) and got no result of
 * keeps the record from before the scan, after a rebuild one of the old
 * lexicon: read it again. Nothing else would when the file did not change
 * (its directory renamed before the walk reached either name, whose event
 * moved the node and left its ctime). */
static void read_unread(struct node *n, void *arg)
{
	read_again(arg, n);
}

static void forget_unread(struct node *n, void *arg)
{
	(void)arg;
	n->scan_reads = 0;
}

static void read_again_if_other(struct scanner *s, struct node *n,
				const struct stat *st)
{
	if (!model_unchanged(n, st))
		read_again(s, n);
}

static void apply_batch(struct applier *a, struct apply_batch *b)
{
	struct model *m = a->s->fs->model;
	struct im_state_entry e;

	tree_wrlock(m->tree);
	for (size_t i = 0; i < b->n; i++) {
		const char *path = b->v[i].path;
		const struct stat *st = &b->v[i].st;
		struct node *n = model_ensure(m, path, false);
		if (!n)
			continue;
		n->seen = a->gen;
		/* Signed by a worker meanwhile: the cache's entry is for what
		 * the walk saw, which may be the older version. */
		if (n->status != NODE_UNKNOWN) {
			model_set_stat(m, n, st);
			read_again_if_other(a->s, n, st);
		} else if (model_cache_find(a->cache, path, st,
					    a->s->fs->opts->params.max_size,
					    &e)) {
			take_cached(a->s, n, path, st, &e);
		}
	}
	tree_unlock(m->tree);
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

static int applier_start(struct applier *a, struct scanner *s,
			 const struct im_state *cache, uint16_t gen)
{
	memset(a, 0, sizeof(*a));
	a->s = s;
	a->cache = cache;
	a->gen = gen;
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

/* ---- Full scans -------------------------------------------------------------- */

/*
 * Results the scan delivered, applied RESULT_BATCH at a time: the index
 * takes each batch's puts together (model_hold_index()). After a lexicon
 * is built again every document is signed again, and a cluster of n
 * replaced its records one by one at O(n) each.
 */
#define RESULT_BATCH 512

struct held_result {
	char *path;
	struct stat st;
	struct im_doc_sigs d;
};

struct scan_ctx {
	struct scanner *s;
	uint16_t gen;
	const struct im_state *cache;
	struct applier *applier; /* with a cache */
	/* Results waiting (the scan calls scan_result_cb() one at a time);
	 * NULL until the first. */
	struct held_result *held;
	size_t nheld;
};

static int scan_dir_cb(const char *path, const struct stat *st, void *arg)
{
	struct scan_ctx *sc = arg;
	struct imfs *fs = sc->s->fs;
	struct model *m = fs->model;

	/* Our own mount, inside the source: view.c shows it empty to us. */
	if (fs->fuse_dev && st->st_dev == fs->fuse_dev)
		return 0;
	int wd = watch_dir(fs->watch, path); /* no lock: it resolves a path */
	tree_wrlock(m->tree);
	struct node *n =
		*path ? model_ensure(m, path, true) : tree_root(m->tree);
	if (n) {
		n->seen = sc->gen;
		model_set_stat(m, n, st);
		watch_bind(fs->watch, n, wd);
	}
	tree_unlock(m->tree);
	return cancelled(sc->s) ? -ECANCELED : 0;
}

/*
 * Whether the scan may keep a result of @p status as it is: with
 * resign_all (a rebuilt lexicon) only one no lexicon changes
 * (im_state_lexicon_free()). A scan that builds a lexicon reads every text
 * again for its terms, but a binary file, a file too big or a failed
 * extraction, unchanged since it was read (or since the cache saved by a
 * tree waiting for documents), would only be read again to the same end:
 * a share of photos and their copies, hashed once.
 */
static bool scan_may_keep(const struct scan_ctx *sc, int status)
{
	return !sc->s->resign_all || im_state_lexicon_free(status);
}

/* Whether the scan may take the file @p st at @p path from its cache, into
 * *@p e: from a partial cache too, an im_state_lexicon_free() one only. */
static bool scan_take_cached(const struct scan_ctx *sc, const char *path,
			     const struct stat *st, struct im_state_entry *e)
{
	return sc->cache &&
	       model_cache_find(sc->cache, path, st,
				sc->s->fs->opts->params.max_size, e) &&
	       ((!sc->s->resign_all && !im_state_partial(sc->cache)) ||
		im_state_lexicon_free(e->d.status)) &&
	       imfs_may_read(sc->s->fs, path, st);
}

static bool scan_want_cb(const char *path, const struct stat *st, void *arg)
{
	struct scan_ctx *sc = arg;
	struct model *m = sc->s->fs->model;
	struct im_state_entry e;
	bool want = false;

	if (sc->applier && scan_take_cached(sc, path, st, &e) &&
	    applier_add(sc->applier, path, st))
		return false;

	tree_wrlock(m->tree);
	struct node *n = model_ensure(m, path, false);
	if (!n)
		goto out;
	n->seen = sc->gen;
	/* NODE_HASH: a worker stopped for the scan was to hash it; the scan
	 * reads it instead. */
	if (scan_may_keep(sc, n->status) && !(n->flags & NODE_HASH) &&
	    model_unchanged(n, st) &&
	    (sc->s->fs->reads_all || !model_attr_changed(m, n, st))) {
		model_set_stat(m, n, st);
	} else if (scan_take_cached(sc, path, st, &e)) {
		take_cached(sc->s, n, path, st, &e);
	} else {
		model_set_stat(m, n, st);
		__atomic_add_fetch(&sc->s->todo, 1, __ATOMIC_RELAXED);
		n->scan_reads = 1;
		want = true;
	}
out:
	tree_unlock(m->tree);
	return want;
}

/*
 * Apply the result @p d of signing @p path, read as @p st, unless something
 * was applied to the file since the scan asked for it (a worker signed it
 * after an event): then read_again_if_other(). Results wait up to
 * RESULT_BATCH files, so this window is not small. A worker reading the
 * file right now applies its read after this one, older or not: it reads
 * the file once more when done. Tree lock held exclusively.
 */
static void apply_result(struct scanner *s, const char *path,
			 const struct stat *st, const struct im_doc_sigs *d)
{
	struct model *m = s->fs->model;
	struct node *n = tree_lookup(m->tree, path);

	if (!n || (n->flags & NODE_DIR) ||
	    (d->status == IM_DOC_ERROR && d->err == ENOENT))
		return;
	/* Another inode than the node's: a file renamed over the path since
	 * the walk asked for it, which a rebuild only expected to read
	 * (model_expect_reads()); its own read decides. */
	if (n->status != NODE_UNKNOWN &&
	    (!n->scan_reads || n->src_ino != st->st_ino)) {
		read_again_if_other(s, n, st);
		return;
	}
	model_apply(m, n, path, st, d);
	if (n->flags & NODE_SIGNING)
		read_again(s, n);
}

/* Apply the results waiting, as one batch for the index. */
static void apply_held(struct scan_ctx *sc)
{
	struct model *m = sc->s->fs->model;

	if (!sc->nheld)
		return;
	tree_wrlock(m->tree);
	model_hold_index(m);
	for (size_t i = 0; i < sc->nheld; i++)
		apply_result(sc->s, sc->held[i].path, &sc->held[i].st,
			     &sc->held[i].d);
	model_release_index(m);
	tree_unlock(m->tree);
	for (size_t i = 0; i < sc->nheld; i++)
		free(sc->held[i].path);
	__atomic_add_fetch(&sc->s->done, sc->nheld, __ATOMIC_RELAXED);
	sc->nheld = 0;
}

static void scan_result_cb(const char *path, const struct stat *st,
			   const struct im_doc_sigs *d, void *arg)
{
	struct scan_ctx *sc = arg;
	struct model *m = sc->s->fs->model;
	char *p;

	if (!sc->held)
		sc->held = malloc(RESULT_BATCH * sizeof(*sc->held));
	p = sc->held ? strdup(path) : NULL;
	if (!p) {
		/* No memory to wait: applied at once. */
		tree_wrlock(m->tree);
		apply_result(sc->s, path, st, d);
		tree_unlock(m->tree);
		__atomic_add_fetch(&sc->s->done, 1, __ATOMIC_RELAXED);
		return;
	}
	sc->held[sc->nheld++] = (struct held_result){p, *st, *d};
	if (sc->nheld == RESULT_BATCH)
		apply_held(sc);
}

/* With a lexicon: the signing workers, then the watcher. */
static void start_threads(struct scanner *s)
{
	struct imfs *fs = s->fs;

	if (workers_start(fs->workers, s->lex, fs->opts->threads))
		imfs_log(LOG_ERR, "cannot start signing workers");
	/* The watcher runs on through a lexicon rebuild. */
	if (!s->threads_started && watch_start(fs->watch) == -EAGAIN)
		imfs_log(LOG_ERR, "cannot start the watcher");
	s->threads_started = true;
}

/*
 * ops.lexicon of the first scan: save and publish the lexicon, start the
 * workers and the watcher, then the scan signs what it read. Changes made
 * during the walk waited in the kernel's inotify queue until now; the
 * watcher applies them while the scan delivers what it read before, which
 * scan_quiet() follows with another scan.
 */
static int first_lexicon_cb(const struct im_lexicon *lex, void *arg)
{
	struct scan_ctx *sc = arg;
	struct scanner *s = sc->s;
	int ret = 0;

	/* Room to retire the lexicon this one replaces, before anything
	 * changes. */
	if (s->lex) {
		struct im_lexicon **r =
			realloc(s->retired, (s->nretired + 1) * sizeof(*r));
		if (!r)
			return -ENOMEM;
		s->retired = r;
	}
	ret = stateio_save_lexicon(s->sio, lex);
	if (ret) {
		ST_ADD(s, save_errors, 1);
		return ret;
	}
	imfs_log(LOG_INFO, "lexicon built from %llu documents: %zu + %zu terms",
		 (unsigned long long)im_lexicon_docs(lex),
		 im_lexicon_primary_size(lex), im_lexicon_secondary_size(lex));
	if (s->lex)
		s->retired[s->nretired++] = s->lex;
	__atomic_store_n(&s->lex, (struct im_lexicon *)lex, __ATOMIC_RELEASE);
	start_threads(s);
	set_phase(s, PHASE_SCANNING);
	return 0;
}

/*
 * Walk and sign what changed; then forget what the walk did not see. With
 * @p first (no lexicon yet) the walk reads every file once, builds the
 * lexicon from them and signs with it (im_scan_first()); *no_lex is then
 * set if the tree has fewer than two documents for one.
 */
static int scan_tree(struct scanner *s, const struct im_state *cache,
		     bool first, bool *no_lex)
{
	struct imfs *fs = s->fs;
	struct model *m = fs->model;
	struct im_scan_counts counts = {0};
	struct scan_ctx sc = {.s = s, .cache = cache};
	struct im_scan_ops ops = {
		.want = scan_want_cb,
		.result = scan_result_cb,
		.dir = scan_dir_cb,
		.arg = &sc,
		.skip_dev = fs->state_dev,
		.skip_ino = fs->state_ino,
		.cancel = &s->cancel,
	};
	struct applier applier;
	const struct im_lexicon *lex_before = s->lex;
	int ret;

	tree_wrlock(m->tree);
	sc.gen = ++m->scan_gen;
	tree_root(m->tree)->seen = sc.gen;
	if (s->resign_all)
		model_expect_reads(m);
	tree_unlock(m->tree);
	__atomic_store_n(&s->todo, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&s->done, 0, __ATOMIC_RELAXED);
	if (cache && applier_start(&applier, s, cache, sc.gen) == 0)
		sc.applier = &applier;
	if (first) {
		struct im_lexicon *lex = NULL;

		ops.lexicon = first_lexicon_cb;
		ops.spill_dir = fs->state_dir;
		/* Without a lexicon, what `imatch scan` shows: exact copies.
		 * A rebuild that fails keeps the old signatures instead. */
		ops.unsigned_results = !s->lex;
		ret = im_scan_first(fs->srcfd, &fs->opts->params,
				    fs->opts->threads, &ops, &lex, &counts);
		/* first_lexicon_cb() published it as s->lex. */
		*no_lex = !ret && !lex;
	} else {
		ret = im_scan_sign(fs->srcfd, s->lex, &fs->opts->params,
				   fs->opts->threads, &ops, &counts);
	}
	apply_held(&sc);
	free(sc.held);
	if (sc.applier)
		applier_finish(&applier);
	__atomic_store_n(&s->todo, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&s->done, 0, __ATOMIC_RELAXED);
	ST_SET(s, hidden, counts.hidden);
	ST_SET(s, other, counts.other);
	ST_SET(s, excluded, counts.excluded);
	ST_SET(s, walk_errors, counts.errors);
	ST_ADD(s, sampled, counts.sampled);
	if (ret) {
		if (ret == -ECANCELED)
			return ret; /* a stop: saves leave the files unread */
		imfs_log(LOG_ERR, "scanning %s: %s", fs->source_real,
			 strerror(-ret));
		/* Files asked for and not delivered hold the records from
		 * before: of the lexicon that stays when none was published,
		 * so they are right (one asked for as it changed is in the
		 * workers' queue too, which its event filled and which
		 * outlives the scan); else older than it, or older than the
		 * files: read again. The walk was partial: nothing is swept.
		 */
		tree_wrlock(m->tree);
		if (first && s->lex == lex_before)
			model_unread(m, forget_unread, NULL);
		else
			model_unread(m, read_unread, s);
		tree_unlock(m->tree);
		return ret;
	}
	/* Without a lexicon too: what this walk did not see is gone, though
	 * the watcher (not started yet) said nothing of it. A rebuild that
	 * found too few documents for a lexicon delivered nothing: the
	 * records it asked for stand, of the lexicon that stays. */
	tree_wrlock(m->tree);
	if (first && *no_lex && !ops.unsigned_results)
		model_sweep(m, sc.gen, forget_unread, NULL);
	else
		model_sweep(m, sc.gen, read_unread, s);
	m->walked = true;
	tree_unlock(m->tree);
	return 0;
}

/*
 * A walk applies each directory and file as it saw it, after events the
 * watcher applied meanwhile may have shown newer truth (a directory swapped
 * for a symlink after the walk listed it comes back). So the directories
 * where names changed during the scan are read again by the watcher, after
 * it (watch_scan_end()), in order with the events that follow. Another
 * scan, which under churn met changes again and asked for the next, until
 * the churn stopped, only when they could not all be held. Writes do not
 * count: scan_result_cb() keeps a newer signature.
 */
static int scan_quiet(struct scanner *s, const struct im_state *cache,
		      bool first, bool *no_lex)
{
	watch_scan_begin(s->fs->watch);
	int ret = scan_tree(s, cache, first, no_lex);
	if (!watch_scan_end(s->fs->watch) && !ret) {
		imfs_log(LOG_INFO, "names changed during the scan: scanning "
				   "again");
		scanner_request_rescan(s);
	}
	return ret;
}

/* ---- The thread ------------------------------------------------------------------ */

/* Wait up to @p secs for a rescan request or stop. @return true on stop. */
static bool wait_stop(struct scanner *s, unsigned secs)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += secs;
	pthread_mutex_lock(&s->lock);
	while (!s->stop && !s->rescan_wanted &&
	       pthread_cond_timedwait(&s->cond, &s->lock, &ts) == 0)
		;
	bool stop = s->stop;
	pthread_mutex_unlock(&s->lock);
	return stop;
}

static bool take_rescan_request(struct scanner *s)
{
	pthread_mutex_lock(&s->lock);
	bool r = s->rescan_wanted;
	s->rescan_wanted = false;
	pthread_mutex_unlock(&s->lock);
	return r;
}

/*
 * Save the view if it changed and the last save (at *@p last_save) is
 * SAVE_EVERY_SECS old, or at once when the workers have just finished
 * what they had queued at the last save: the one after a scan comes while
 * they still hash the copies it found, and a crash before the next would
 * have them read again.
 */
static void save_if_dirty(struct scanner *s, time_t *last_save)
{
	time_t now = time(NULL);

	tree_rdlock(s->fs->model->tree);
	bool dirty = s->fs->model->dirty;
	tree_unlock(s->fs->model->tree);
	bool settled = s->saved_busy && !workers_pending(s->fs->workers);
	if (dirty && (settled || now - *last_save >= SAVE_EVERY_SECS)) {
		scanner_save(s);
		*last_save = now;
	}
}

/*
 * Without a lexicon: wait for what may give one, a second text (the
 * workers ask, workers.c) or a rescan asked for otherwise; with the watch
 * limit reached, also every opts->rescan seconds, as the live phase does.
 * @return true on stop.
 */
static bool wait_for_documents(struct scanner *s)
{
	time_t since = time(NULL), last_save = since;
	struct watch_stats ws;

	for (;;) {
		if (wait_stop(s, 1))
			return true;
		if (take_rescan_request(s))
			return false;
		watch_stats(s->fs->watch, &ws);
		if (ws.limit &&
		    time(NULL) - since >= (time_t)s->fs->opts->rescan)
			return false;
		save_if_dirty(s, &last_save);
	}
}

/*
 * The first scan of a tree without a lexicon: read every file once, build
 * the lexicon, sign (scan_tree()). A tree with fewer than two documents
 * that have a term gets no lexicon; the view then shows what `imatch scan`
 * shows of it, every file linked to its exact copies, and the workers and
 * the watcher keep it live (texts unsigned) until a second text asks for
 * another try. Each try reads every file again (resign_all): the lexicon
 * needs every document's terms. An error is tried again every few seconds.
 * @return the scan's value, -ECANCELED on stop.
 */
static int first_scan(struct scanner *s)
{
	/* The cache a tree waiting for documents saved (stateio.h): the
	 * first try takes its binaries' results; later tries find them in
	 * the view (scan_want_cb()). The model keeps it for the view. */
	const struct im_state *cache = s->cache;

	if (s->cache) {
		tree_wrlock(s->fs->model->tree);
		struct im_state *old =
			model_adopt_cache(s->fs->model, s->cache, false);
		tree_unlock(s->fs->model->tree);
		im_state_free(old);
		s->cache = NULL;
	}
	for (;;) {
		bool no_lex = false;
		int ret;

		set_phase(s, PHASE_LEXICON);
		imfs_log(LOG_INFO, "building the lexicon from %s",
			 s->fs->source_real);
		/* The workers start before the scan has signed every file
		 * with the new lexicon: results of another (or none) are in
		 * the view until it has. */
		workers_lend(s->fs->workers, false);
		workers_stop(s->fs->workers);
		s->resign_all = true;
		ret = scan_quiet(s, cache, true, &no_lex);
		s->resign_all = false;
		/* As in rebuild_lexicon(): what was not signed anew is
		 * marked, and refused as a lender until it is. */
		if (s->lex && ret != -ECANCELED)
			workers_lend(s->fs->workers, true);
		/* A save replaces the model's cache. */
		cache = NULL;
		if (s->lex || ret == -ECANCELED)
			return ret;
		if (no_lex) {
			start_threads(s);
			set_phase(s, PHASE_NO_LEXICON);
			imfs_log(LOG_NOTICE,
				 "no lexicon yet (fewer than two documents): "
				 "exact copies only until a second document");
			scanner_save(s);
			if (wait_for_documents(s))
				return -ECANCELED;
			continue;
		}
		/* An error (the state directory full, say): the view holds
		 * what it held, which is not the tree, so the phase stays one
		 * that status never calls converged. */
		unsigned retry =
			s->fs->opts->rescan < 5 ? s->fs->opts->rescan : 5;
		imfs_log(LOG_NOTICE, "no lexicon yet (%s); retrying every %u s",
			 strerror(-ret), retry);
		if (wait_stop(s, retry))
			return -ECANCELED;
		take_rescan_request(s);
	}
}

/*
 * A lexicon built from a few documents (a share mounted while nearly empty)
 * says little about the documents that came since: one from fewer than
 * RELEX_MAX_DOCS documents is rebuilt from the whole tree once the tree has
 * twice as many. Each rebuild reads every file again, so a share that grows
 * from nothing costs about twice the reading of its first RELEX_MAX_DOCS
 * documents in all. A lexicon the user gave (-o lexicon=FILE) stays.
 */
#define RELEX_MAX_DOCS 10000

/* After a rebuild that failed, the wait before the next: doubled after each
 * failure up to the second value. */
#define RELEX_RETRY_SECS     5
#define RELEX_RETRY_MAX_SECS 600

/*
 * The lexicon counts the documents that hold a term, and so does the view
 * (model.h, with_terms): texts without a word (a package's empty
 * __init__.py files) count in neither, so a rebuild never finds the tree
 * it was built from "twice as many" again, and a restart, which takes the
 * documents from the cache under the old lexicon, still sees that they
 * outgrew it. Called by FUSE threads too (status): no lock.
 */
static bool lexicon_outgrown(struct scanner *s)
{
	const struct im_lexicon *lex =
		__atomic_load_n(&s->lex, __ATOMIC_ACQUIRE);
	uint64_t lex_docs;

	if (!lex || s->fs->opts->lexicon)
		return false;
	lex_docs = im_lexicon_docs(lex);
	return lex_docs < RELEX_MAX_DOCS &&
	       __atomic_load_n(&s->fs->model->with_terms, __ATOMIC_RELAXED) >=
		       2 * lex_docs;
}

/*
 * Build the lexicon again from the whole tree and sign every file with it,
 * as a first scan does. The workers stop meanwhile (what they had queued
 * waits, with what is queued since, for the new lexicon, or for the old
 * one if none is published); the watcher goes on. Until the scan ends the
 * view mixes signatures of both lexicons, so no state is saved then
 * (scanner_save()).
 */
static int rebuild_lexicon(struct scanner *s)
{
	uint64_t lex_docs = im_lexicon_docs(s->lex);
	const struct im_lexicon *before = s->lex;
	bool no_lex = false;
	int ret;

	imfs_log(LOG_INFO,
		 "the tree has outgrown the lexicon of %llu documents: "
		 "rebuilding it from %s",
		 (unsigned long long)lex_docs, s->fs->source_real);
	set_phase(s, PHASE_LEXICON);
	workers_lend(s->fs->workers, false);
	workers_stop(s->fs->workers);
	__atomic_store_n(&s->rebuilding, true, __ATOMIC_RELEASE);
	s->resign_all = true;
	ret = scan_quiet(s, NULL, true, &no_lex);
	s->resign_all = false;
	/* Every result is of the lexicon the workers sign with but those of
	 * files still marked unread (model_expect_reads(); model_copy_of()
	 * refuses them until they are read again): the new one's, or the old
	 * one's when none was published. So also after a scan that failed. */
	if (ret != -ECANCELED)
		workers_lend(s->fs->workers, true);
	/* Not rebuilt (too few documents now, an error, a stop): the old
	 * lexicon signs again. */
	if (s->lex == before && ret != -ECANCELED)
		start_threads(s);
	if (ret == -ECANCELED)
		return ret;
	__atomic_store_n(&s->rebuilding, false, __ATOMIC_RELEASE);
	/* Lexicons built, not tries: a failing one is retried (scanner_main())
	 * and counted in save_errors when it could not be saved. */
	if (s->lex != before)
		ST_ADD(s, relexicons, 1);
	set_phase(s, PHASE_LIVE);
	return ret;
}

/*
 * Whether SOURCE's path still leads to the directory the daemon reads
 * (through srcfd): removed or renamed, the view empties or its symlinks
 * name a path that is gone, and nothing else would say so (a removed
 * directory held open sends no event). Logged when it changes.
 */
static void check_source(struct scanner *s)
{
	const struct imfs *fs = s->fs;
	struct stat now, held;
	bool lost = stat(fs->source_real, &now) || fstat(fs->srcfd, &held) ||
		    now.st_dev != held.st_dev || now.st_ino != held.st_ino;

	if (lost == __atomic_load_n(&s->st.source_lost, __ATOMIC_RELAXED))
		return;
	__atomic_store_n(&s->st.source_lost, lost, __ATOMIC_RELAXED);
	if (lost)
		imfs_log(LOG_WARNING,
			 "the source %s was removed or renamed: the view's "
			 "links name a path that is not it",
			 fs->source_real);
	else
		imfs_log(LOG_NOTICE, "the source %s is back", fs->source_real);
}

static void *scanner_main(void *arg)
{
	struct scanner *s = arg;
	struct imfs *fs = s->fs;
	struct watch_stats ws;
	int ret;

	if (s->lex) {
		/* The lexicon from the state or -o lexicon=FILE: files the
		 * cache knows unchanged are not read. */
		if (!s->cache)
			s->cache = stateio_load_cache(s->sio);
		start_threads(s);
		/* The model keeps the cache for the whole signatures of what
		 * the scan takes from it (fullsigs.h); only a save, which this
		 * thread makes after the scan, replaces it. */
		struct im_state *cache = s->cache;
		s->cache = NULL;
		if (cache) {
			tree_wrlock(fs->model->tree);
			struct im_state *old =
				model_adopt_cache(fs->model, cache, false);
			tree_unlock(fs->model->tree);
			im_state_free(old);
		}
		set_phase(s, PHASE_SCANNING);
		ret = scan_quiet(s, cache, false, NULL);
	} else {
		/* The walk adds the watches; their events wait in the kernel
		 * until the watcher starts, with the workers, once the lexicon
		 * exists (first_lexicon_cb()). */
		ret = first_scan(s);
	}
	if (ret == -ECANCELED)
		return NULL;
	imfs_log(LOG_INFO, "scan done: %llu documents from the cache",
		 (unsigned long long)s->st.cached);
	set_phase(s, PHASE_LIVE);
	/* Give back what the scan's batches and queues used (glibc keeps
	 * freed memory in per-thread arenas otherwise). */
	malloc_trim(0);
	scanner_save(s);

	time_t last_save = time(NULL), last_scan = time(NULL), relex_after = 0;
	unsigned relex_wait = RELEX_RETRY_SECS;
	while (!wait_stop(s, 1)) {
		time_t now = time(NULL);
		bool rescan = take_rescan_request(s);

		check_source(s);
		watch_stats(fs->watch, &ws);
		if (ws.limit && now - last_scan >= (time_t)fs->opts->rescan)
			rescan = true;
		if (rescan) {
			set_phase(s, PHASE_RESCANNING);
			ST_ADD(s, rescans, 1);
			if (scan_quiet(s, NULL, false, NULL) == -ECANCELED)
				break;
			set_phase(s, PHASE_LIVE);
			last_scan = time(NULL);
		}
		if (lexicon_outgrown(s) && now >= relex_after) {
			ret = rebuild_lexicon(s);
			if (ret == -ECANCELED)
				break;
			/* A rebuild that failed (the state directory full,
			 * say) read the whole tree for nothing: the next
			 * waits, longer each time. */
			relex_after = ret ? time(NULL) + relex_wait : 0;
			relex_wait = ret ? relex_wait * 2 : RELEX_RETRY_SECS;
			if (relex_wait > RELEX_RETRY_MAX_SECS)
				relex_wait = RELEX_RETRY_MAX_SECS;
			scanner_save(s);
			last_save = time(NULL);
			last_scan = last_save;
		}
		save_if_dirty(s, &last_save);
	}
	return NULL;
}

int scanner_start(struct scanner *s)
{
	if (pthread_create(&s->tid, NULL, scanner_main, s))
		return -EAGAIN;
	s->started = true;
	return 0;
}

void scanner_stop(struct scanner *s)
{
	__atomic_store_n(&s->cancel, true, __ATOMIC_RELAXED);
	pthread_mutex_lock(&s->lock);
	s->stop = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	if (s->started)
		pthread_join(s->tid, NULL);
	s->started = false;
}

int scanner_save(struct scanner *s)
{
	/* Without a lexicon, only a tree waiting for documents has a view
	 * worth keeping: what the first scan read, the binaries hashed. */
	if (!s->lex &&
	    __atomic_load_n(&s->st.phase, __ATOMIC_RELAXED) != PHASE_NO_LEXICON)
		return -ENOENT;
	if (__atomic_load_n(&s->rebuilding, __ATOMIC_ACQUIRE))
		return -EAGAIN;
	s->saved_busy = workers_pending(s->fs->workers) != 0;
	int ret = stateio_save(s->sio, s->fs->model);
	if (!ret)
		ST_ADD(s, saves, 1);
	else
		ST_ADD(s, save_errors, 1);
	return ret;
}
