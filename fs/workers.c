/**
 * @file workers.c
 * The signing workers (workers.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Times a file whose path led nowhere is signed again, each time after the
 * watcher applied the events then queued, before its directory is read. */
#define GONE_RETRIES 15
_Static_assert(GONE_RETRIES < 16, "a node counts retries in 4 bits (tree.h)");

#include "exact.h"
#include "model.h"
#include "scanner.h"
#include "sig.h"
#include "util.h"
#include "watch.h"
#include "workers.h"

struct workers {
	struct imfs *fs;
	const struct im_lexicon *lex;
	/* im_sig_masks() of lex, shared by the signers (NULL: each hashes
	 * its candidates' coordinates itself); made by workers_start(). */
	uint32_t *masks;
	pthread_t *tids;
	unsigned n;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* work or stop */
	struct node **q;     /* ring; protected by lock */
	size_t head, len, cap;
	unsigned busy;		/* signing now; lock */
	bool stop;		/* lock */
	uint64_t copies_reused; /* atomic: workers_copies_reused() */
	uint64_t sampled;	/* atomic: workers_sampled() */
	bool lend;		/* atomic: workers_lend() */
};

int workers_new(struct imfs *fs, struct workers **out)
{
	struct workers *w = calloc(1, sizeof(*w));

	*out = NULL;
	if (!w)
		return -ENOMEM;
	w->fs = fs;
	w->lend = true;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	*out = w;
	return 0;
}

/* Free the dead nodes of the queue, keeping the others in order. With no
 * worker running; tree lock held exclusively, or none left to race. */
static void drop_dead(struct workers *w)
{
	size_t kept = 0;

	for (size_t i = 0; i < w->len; i++) {
		struct node *n = w->q[(w->head + i) % w->cap];
		if (n->flags & NODE_DEAD)
			tree_node_free(w->fs->model->tree, n);
		else
			w->q[(w->head + kept++) % w->cap] = n;
	}
	w->len = kept;
}

void workers_free(struct workers *w)
{
	if (!w)
		return;
	/* workers_stop() keeps the queue: nodes removed since are the
	 * queue's to free, the rest the tree's. */
	drop_dead(w);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->cond);
	free(w->q);
	free(w->tids);
	free(w->masks);
	free(w);
}

int workers_queue(struct workers *w, struct node *n)
{
	int ret = 0;

	if (n->flags & (NODE_QUEUED | NODE_DIR | NODE_DEAD))
		return 0;
	pthread_mutex_lock(&w->lock);
	if (w->len == w->cap) {
		size_t nc = w->cap ? w->cap * 2 : 256;
		struct node **nq = malloc(nc * sizeof(*nq));
		if (!nq) {
			ret = -ENOMEM;
			goto out;
		}
		for (size_t i = 0; i < w->len; i++)
			nq[i] = w->q[(w->head + i) % w->cap];
		free(w->q);
		w->q = nq;
		w->cap = nc;
		w->head = 0;
	}
	w->q[(w->head + w->len) % w->cap] = n;
	w->len++;
	n->flags |= NODE_QUEUED;
	pthread_cond_signal(&w->cond);
out:
	pthread_mutex_unlock(&w->lock);
	return ret;
}

void workers_lend(struct workers *w, bool lend)
{
	__atomic_store_n(&w->lend, lend, __ATOMIC_RELEASE);
}

/*
 * The signers' lender (im_signer_set_lender()): the result the index holds
 * for an earlier exact copy, which a scan or another worker signed, maybe
 * in another run (its whole signatures from the state cache). A folder
 * copied as a backup is then read and hashed, not extracted again.
 */
static bool lend_copy(const uint8_t exact[16], struct im_doc_sigs *out,
		      void *arg)
{
	struct workers *w = arg;
	struct model *m = w->fs->model;
	int ret;

	if (!__atomic_load_n(&w->lend, __ATOMIC_ACQUIRE))
		return false;
	tree_rdlock(m->tree);
	ret = model_copy_of(m, exact, out);
	tree_unlock(m->tree);
	return ret == 0;
}

uint64_t workers_copies_reused(struct workers *w)
{
	return __atomic_load_n(&w->copies_reused, __ATOMIC_RELAXED);
}

uint64_t workers_sampled(struct workers *w)
{
	return __atomic_load_n(&w->sampled, __ATOMIC_RELAXED);
}

uint64_t workers_pending(struct workers *w)
{
	pthread_mutex_lock(&w->lock);
	uint64_t n = w->len + w->busy;
	pthread_mutex_unlock(&w->lock);
	return n;
}

static struct node *pop(struct workers *w)
{
	struct node *n = NULL;

	pthread_mutex_lock(&w->lock);
	while (!w->len && !w->stop)
		pthread_cond_wait(&w->cond, &w->lock);
	if (w->len && !w->stop) {
		n = w->q[w->head];
		w->head = (w->head + 1) % w->cap;
		w->len--;
		w->busy++;
	}
	pthread_mutex_unlock(&w->lock);
	return n;
}

static void done(struct workers *w)
{
	pthread_mutex_lock(&w->lock);
	w->busy--;
	pthread_mutex_unlock(&w->lock);
}

/* Take @p n off the queue for signing. Tree lock held. @return its path,
 * or NULL when there is nothing to sign (dead, busy, ENOMEM). */
static char *claim(struct workers *w, struct node *n)
{
	n->flags &= ~NODE_QUEUED;
	if (n->flags & NODE_DEAD) {
		if (!(n->flags & NODE_SIGNING))
			tree_node_free(w->fs->model->tree, n);
		return NULL;
	}
	if (n->flags & NODE_SIGNING) {
		/* Its signer queues it again: an older result never lands
		 * last. */
		n->flags |= NODE_AGAIN;
		return NULL;
	}
	char *path = tree_path(w->fs->model->tree, n);
	if (path)
		n->flags |= NODE_SIGNING;
	else
		workers_queue(w, n); /* later, with memory */
	return path;
}

/* Apply the result of signing @p n at @p path. Tree lock held.
 * @return whether it was applied (not dropped for a file gone or moved). */
static bool finish(struct workers *w, struct node *n, const char *path, int ret,
		   const struct stat *st, const struct im_doc_sigs *d)
{
	struct model *m = w->fs->model;
	bool applied = false;

	n->flags &= ~NODE_SIGNING;
	if (n->flags & NODE_DEAD) {
		if (!(n->flags & NODE_QUEUED))
			tree_node_free(w->fs->model->tree, n);
		return false;
	}
	if (ret) {
		imfs_log(LOG_ERR, "signing %s: %s", path, strerror(-ret));
	} else {
		char *now = tree_path(m->tree, n);
		bool gone = d->status == IM_DOC_ERROR &&
			    (d->err == ENOENT || d->err == ELOOP ||
			     d->err == ENOTDIR);
		if (!now || strcmp(now, path)) {
			/* Renamed while signed: sign it again. */
			workers_queue(w, n);
		} else if (gone) {
			/* Deleted (its event takes the node away), or a
			 * parent renamed or swapped for a symlink meanwhile
			 * (its events move the node): signed again once the
			 * watcher applied them, which a try at once only
			 * raced (a file an editor made and removed within
			 * milliseconds cost a rescan of the whole tree). In
			 * the end its directory is read again. Never a
			 * silent loss. */
			bool look = n->retries >= GONE_RETRIES;
			n->retries = look ? 0 : n->retries + 1;
			if (!watch_recheck(w->fs->watch, n, look))
				scanner_request_rescan(w->fs->scanner);
		} else {
			n->retries = 0;
			if (d->status == IM_DOC_ERROR)
				imfs_log(LOG_NOTICE, "cannot read %s: %s", path,
					 strerror(d->err));
			model_apply(m, n, path, st, d);
			model_apply_links(m, n, st, d);
			applied = true;
			/* Without a lexicon the tree waits for a second text
			 * (scanner.c, first_scan()): this may be it. */
			if (!w->lex && d->status == IM_DOC_REJECTED &&
			    d->unique_terms && m->count[IM_DOC_REJECTED] >= 2)
				scanner_request_rescan(w->fs->scanner);
		}
		free(now);
	}
	if (n->flags & NODE_AGAIN) {
		n->flags &= ~NODE_AGAIN;
		workers_queue(w, n);
	}
	return applied;
}

/*
 * A binary file the signer only sniffed, whose size another file has now
 * (model.c, note_size()): hash it. Changed since: left unhashed, and its
 * events sign it again; unreadable whole: an error like any unreadable file.
 */
static void hash_deferred(struct workers *w, const char *path,
			  struct im_doc_sigs *d)
{
	int r;

	if (!im_exact_deferred(d))
		return;
	r = im_exact_hash_at(w->fs->srcfd, path, d->size, d->mtime_ns, d->exact,
			     NULL);
	if (!r) {
		d->exact_valid = 1;
	} else if (r != -ESTALE) {
		d->status = IM_DOC_ERROR;
		d->err = -r;
	}
}

/*
 * Sign the file at @p path; without a lexicon (a tree of fewer than two
 * texts), read it as a first scan does and leave a text unsigned, with
 * its exact hash and sketch: what `imatch scan` shows of such a tree.
 */
static int sign(struct workers *w, struct im_signer *signer, const char *path,
		struct im_doc_sigs *d, struct stat *st)
{
	const struct im_terms *terms;

	if (w->lex)
		return im_signer_sign_at(signer, w->fs->srcfd, path, d, st);
	return im_signer_prepare_at(signer, w->fs->srcfd, path, d, st, &terms);
}

static void *worker_main(void *arg)
{
	struct workers *w = arg;
	struct tree *t = w->fs->model->tree;
	struct im_signer *signer = NULL;
	struct im_doc_sigs d;
	struct stat st;
	int ret;

	ret = im_signer_new(w->lex, &w->fs->opts->params, &signer);
	if (ret) {
		imfs_log(LOG_ERR, "cannot start a signing worker: %s",
			 strerror(-ret));
		return NULL;
	}
	if (w->masks)
		im_signer_set_lexicon(signer, w->lex, w->masks);
	/* A folder copied into the share brings exact copies of documents
	 * the worker signed a moment ago: each is read and hashed, its text
	 * not extracted again (200 copies of two manuals in PDF: 10.5 s to
	 * converge, 0.3 s with this). */
	if (w->lex) {
		im_signer_keep_results(signer, true);
		im_signer_set_lender(signer, lend_copy, w);
	}
	for (struct node *n; (n = pop(w)); done(w)) {
		tree_wrlock(t);
		char *path = claim(w, n);
		bool hash = path && (n->flags & NODE_HASH);
		if (path)
			n->flags &= ~NODE_HASH;
		tree_unlock(t);
		if (!path)
			continue;
		ret = sign(w, signer, path, &d, &st);
		/* A worker lives as long as the mount: a word list of millions
		 * of terms must not keep its memory once signed. */
		im_signer_trim(signer);
		if (!ret && hash)
			hash_deferred(w, path, &d);
		tree_wrlock(t);
		/* Counted once applied: a result dropped for a file renamed
		 * meanwhile is read again and counted then. */
		bool applied = finish(w, n, path, ret, &st, &d);
		if (applied && im_signer_reused(signer))
			__atomic_add_fetch(&w->copies_reused, 1,
					   __ATOMIC_RELAXED);
		if (applied && im_signer_sampled(signer))
			__atomic_add_fetch(&w->sampled, 1, __ATOMIC_RELAXED);
		tree_unlock(t);
		free(path);
	}
	im_signer_free(signer);
	return NULL;
}

int workers_start(struct workers *w, const struct im_lexicon *lex, unsigned n)
{
	if (!n) {
		long c = sysconf(_SC_NPROCESSORS_ONLN);
		n = c > 0 ? (unsigned)c : 1;
	}
	/* Again after a workers_stop(): the scanner restarts them with a
	 * lexicon rebuilt from a grown tree. */
	w->lex = lex;
	/* Each term's coordinates once per lexicon, not once per document
	 * signed and term (scan.h does the same for a scan); without the
	 * memory for them the signers hash as before. */
	free(w->masks);
	w->masks = NULL;
	if (lex && im_sig_masks(lex, &w->fs->opts->params, &w->masks))
		w->masks = NULL;
	pthread_mutex_lock(&w->lock);
	w->stop = false;
	pthread_mutex_unlock(&w->lock);
	free(w->tids);
	w->tids = calloc(n, sizeof(*w->tids));
	if (!w->tids)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		if (pthread_create(&w->tids[i], NULL, worker_main, w))
			break;
		w->n++;
	}
	return w->n ? 0 : -EAGAIN;
}

void workers_stop(struct workers *w)
{
	struct tree *t = w->fs->model->tree;

	pthread_mutex_lock(&w->lock);
	w->stop = true;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	for (unsigned i = 0; i < w->n; i++)
		pthread_join(w->tids[i], NULL);
	w->n = 0;
	/* Nodes still queued were never signed: free the dead ones, keep
	 * the rest for the next start. The scan that stopped the workers
	 * reads most of them too, but if it fails or never walks there (a
	 * directory renamed meanwhile) nothing else would. */
	tree_wrlock(t);
	pthread_mutex_lock(&w->lock);
	drop_dead(w);
	pthread_mutex_unlock(&w->lock);
	tree_unlock(t);
}
