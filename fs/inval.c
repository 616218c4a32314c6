/**
 * @file inval.c
 * The invalidation queue and its thread (inval.h).
 *
 * Pushes append to growing arrays under the queue's mutex; the thread swaps
 * them out whole, so a burst of changes made while it was sending becomes
 * one batch, which is sorted and sent once per distinct item. There is no
 * delay to gather changes: the thread sends as soon as it is woken.
 */
#include <errno.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ino.h"
#include "inval.h"
#include "util.h"

struct item {
	uint64_t ino;
	char *name; /* an entry of directory ino; NULL: the inode itself */
};

struct batch {
	struct item *items;
	size_t n, cap;
	struct im_sig *touched; /* clusters changed: their groups are checked */
	size_t nt, tcap;
	bool gone;     /* check the clusters the kernel holds */
	bool overflow; /* memory ran out: drop everything */
};

struct inval {
	struct ctab *ct;
	struct im_index *idx;
	struct fuse_session *se;
	pthread_t tid;
	bool started;  /* main thread only */
	int running;   /* atomic: pushes are taken */
	uint64_t sent; /* atomic */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct batch q; /* protected by lock */
	bool stopping;	/* protected by lock */
};

int inval_new(struct ctab *ct, struct im_index *idx, struct inval **out)
{
	struct inval *iv = calloc(1, sizeof(*iv));

	*out = NULL;
	if (!iv)
		return -ENOMEM;
	iv->ct = ct;
	iv->idx = idx;
	pthread_mutex_init(&iv->lock, NULL);
	pthread_cond_init(&iv->cond, NULL);
	*out = iv;
	return 0;
}

static void batch_release(struct batch *b)
{
	for (size_t i = 0; i < b->n; i++)
		free(b->items[i].name);
	free(b->items);
	free(b->touched);
	memset(b, 0, sizeof(*b));
}

void inval_free(struct inval *iv)
{
	if (!iv)
		return;
	batch_release(&iv->q);
	pthread_cond_destroy(&iv->cond);
	pthread_mutex_destroy(&iv->lock);
	free(iv);
}

/* ---- Pushing ------------------------------------------------------------- */

static bool running(const struct inval *iv)
{
	return iv && __atomic_load_n(&iv->running, __ATOMIC_ACQUIRE);
}

/* Make room for one more of size @p sz in *v. @return false on ENOMEM. */
static bool room(void **v, size_t n, size_t *cap, size_t sz)
{
	if (n < *cap)
		return true;
	size_t nc = *cap ? *cap * 2 : 64;
	void *nv = realloc(*v, nc * sz);
	if (!nv)
		return false;
	*v = nv;
	*cap = nc;
	return true;
}

static void push_item(struct inval *iv, uint64_t ino, const char *name)
{
	char *copy = NULL;

	if (!running(iv))
		return;
	if (name && !(copy = strdup(name))) {
		pthread_mutex_lock(&iv->lock);
		iv->q.overflow = true;
		goto wake;
	}
	pthread_mutex_lock(&iv->lock);
	if (!room((void **)&iv->q.items, iv->q.n, &iv->q.cap,
		  sizeof(*iv->q.items))) {
		free(copy);
		iv->q.overflow = true;
		goto wake;
	}
	iv->q.items[iv->q.n++] = (struct item){ino, copy};
wake:
	pthread_cond_signal(&iv->cond);
	pthread_mutex_unlock(&iv->lock);
}

/* The other clusters of @p name's group may have been renamed (index.h). */
static void push_touched(struct inval *iv, const struct im_sig *name)
{
	if (!running(iv))
		return;
	pthread_mutex_lock(&iv->lock);
	if (room((void **)&iv->q.touched, iv->q.nt, &iv->q.tcap,
		 sizeof(*iv->q.touched)))
		iv->q.touched[iv->q.nt++] = *name;
	else
		iv->q.overflow = true;
	pthread_cond_signal(&iv->cond);
	pthread_mutex_unlock(&iv->lock);
}

void inval_entry(struct inval *iv, uint64_t parent, const char *name)
{
	push_item(iv, parent, name);
}

void inval_inode(struct inval *iv, uint64_t ino)
{
	push_item(iv, ino, NULL);
}

void inval_cluster(struct inval *iv, const struct im_sig *name)
{
	char hex[IM_SIG_HEX_LEN + 1];
	uint64_t old;

	if (!iv)
		return;
	/* Retired now, under the writer's lock: from here on a lookup gets a
	 * new number, whatever the kernel still caches for the old one. */
	old = ctab_retire(iv->ct, name);
	if (old) {
		im_sig_hex(name, hex);
		push_item(iv, INO_CLUSTERS, hex);
		push_item(iv, old, NULL);
	}
	push_item(iv, INO_CLUSTERS, NULL);
	push_touched(iv, name);
}

void inval_all(struct inval *iv)
{
	if (!running(iv))
		return;
	pthread_mutex_lock(&iv->lock);
	iv->q.overflow = true;
	pthread_cond_signal(&iv->cond);
	pthread_mutex_unlock(&iv->lock);
}

void inval_clusters_gone(struct inval *iv)
{
	if (!running(iv))
		return;
	pthread_mutex_lock(&iv->lock);
	iv->q.gone = true;
	pthread_cond_signal(&iv->cond);
	pthread_mutex_unlock(&iv->lock);
}

uint64_t inval_sent(const struct inval *iv)
{
	return __atomic_load_n(&iv->sent, __ATOMIC_RELAXED);
}

/* ---- Sending (the thread; no lock held) ------------------------------------ */

static void send_entry(struct inval *iv, uint64_t parent, const char *name)
{
	int ret = fuse_lowlevel_notify_inval_entry(iv->se, parent, name,
						   strlen(name));
	/* -ENOENT: the kernel did not hold it, which is fine. */
	if (ret && ret != -ENOENT)
		imfs_log(LOG_DEBUG, "invalidating entry %s: %s", name,
			 strerror(-ret));
	__atomic_add_fetch(&iv->sent, 1, __ATOMIC_RELAXED);
}

static void send_inode(struct inval *iv, uint64_t ino)
{
	int ret = fuse_lowlevel_notify_inval_inode(iv->se, ino, 0, 0);

	if (ret && ret != -ENOENT)
		imfs_log(LOG_DEBUG, "invalidating inode %llu: %s",
			 (unsigned long long)ino, strerror(-ret));
	__atomic_add_fetch(&iv->sent, 1, __ATOMIC_RELAXED);
}

/* clusters/<name> is gone or renamed: retire it and drop the kernel's entry. */
static void send_gone_cluster(struct inval *iv, const struct im_sig *name)
{
	char hex[IM_SIG_HEX_LEN + 1];
	uint64_t old = ctab_retire(iv->ct, name);

	if (!old)
		return;
	im_sig_hex(name, hex);
	send_inode(iv, old);
	send_entry(iv, INO_CLUSTERS, hex);
}

static int stop_cb(const char *path, void *arg)
{
	(void)path;
	(void)arg;
	return 1;
}

static int cmp_group(const void *a, const void *b)
{
	return memcmp(a, b, IM_NAME_GROUP_LEN);
}

static int cmp_name(const void *a, const void *b)
{
	return memcmp(a, b, IM_SIG_LEN);
}

/*
 * Clusters the kernel holds that are gone (merged into another, emptied),
 * and every cluster of a group in which one changed or went: a cluster
 * whose rank in its group changed now goes by another's name (index.h),
 * though no path of it changed. @p b->touched is sorted here.
 */
static void send_gone(struct inval *iv, struct batch *b)
{
	struct im_sig *names;
	size_t n = ctab_names(iv->ct, &names);

	for (size_t i = 0; i < n; i++) {
		if (!b->gone || im_index_cluster_members(iv->idx, &names[i],
							 stop_cb, NULL) == 1)
			continue;
		send_gone_cluster(iv, &names[i]);
		if (room((void **)&b->touched, b->nt, &b->tcap,
			 sizeof(*b->touched)))
			b->touched[b->nt++] = names[i];
	}
	/* In name order, which is group order too. A name itself touched was
	 * retired then: a number handed out since is for its new cluster. */
	qsort(b->touched, b->nt, sizeof(*b->touched), cmp_name);
	for (size_t i = 0; b->nt && i < n; i++)
		if (bsearch(&names[i], b->touched, b->nt, sizeof(*b->touched),
			    cmp_group) &&
		    !bsearch(&names[i], b->touched, b->nt, sizeof(*b->touched),
			     cmp_name))
			send_gone_cluster(iv, &names[i]);
	free(names);
}

static int item_cmp(const void *a, const void *b)
{
	const struct item *x = a, *y = b;

	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	if (!x->name || !y->name)
		return !!x->name - !!y->name;
	return strcmp(x->name, y->name);
}

static void send_batch(struct inval *iv, struct batch *b)
{
	static const char *const top[] = {"clusters", "by-doc", "redundant",
					  "dup-dirs", "status"};

	if (b->overflow) {
		for (size_t i = 0; i < sizeof(top) / sizeof(top[0]); i++)
			send_entry(iv, INO_ROOT, top[i]);
		return;
	}
	qsort(b->items, b->n, sizeof(*b->items), item_cmp);
	for (size_t i = 0; i < b->n; i++) {
		if (i && !item_cmp(&b->items[i - 1], &b->items[i]))
			continue;
		if (b->items[i].name)
			send_entry(iv, b->items[i].ino, b->items[i].name);
		else
			send_inode(iv, b->items[i].ino);
	}
	if (b->gone || b->nt) {
		send_gone(iv, b);
		send_inode(iv, INO_CLUSTERS);
	}
	/* Every change may change a count. */
	send_inode(iv, INO_STATUS);
}

static void *inval_main(void *arg)
{
	struct inval *iv = arg;
	struct batch b;

	pthread_mutex_lock(&iv->lock);
	for (;;) {
		while (!iv->q.n && !iv->q.nt && !iv->q.gone &&
		       !iv->q.overflow && !iv->stopping)
			pthread_cond_wait(&iv->cond, &iv->lock);
		if (iv->stopping)
			break;
		b = iv->q;
		memset(&iv->q, 0, sizeof(iv->q));
		pthread_mutex_unlock(&iv->lock);
		send_batch(iv, &b);
		batch_release(&b);
		pthread_mutex_lock(&iv->lock);
	}
	pthread_mutex_unlock(&iv->lock);
	return NULL;
}

int inval_start(struct inval *iv, struct fuse_session *se)
{
	iv->se = se;
	if (pthread_create(&iv->tid, NULL, inval_main, iv))
		return -EAGAIN;
	iv->started = true;
	__atomic_store_n(&iv->running, 1, __ATOMIC_RELEASE);
	return 0;
}

void inval_stop(struct inval *iv)
{
	if (!iv || !iv->started)
		return;
	__atomic_store_n(&iv->running, 0, __ATOMIC_RELEASE);
	pthread_mutex_lock(&iv->lock);
	iv->stopping = true;
	pthread_cond_signal(&iv->cond);
	pthread_mutex_unlock(&iv->lock);
	pthread_join(iv->tid, NULL);
	iv->started = false;
	batch_release(&iv->q);
}
