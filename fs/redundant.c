/**
 * @file redundant.c
 * The mount's removal plan (redundant.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model.h"
#include "plan.h"
#include "redundant.h"

struct redundant {
	struct im_plan_opts o;
	char **protect; /* relative to SOURCE; o.protect points here */
	/* Held by the thread making a plan outside the tree lock, so that
	 * another one waits for it rather than makes its own; taken before the
	 * tree lock and lock. */
	pthread_mutex_t making;
	pthread_mutex_t lock;
	/* protected by lock */
	bool valid;
	uint64_t gen;		/* the plan_version() the plan is of */
	struct im_plan_set set; /* entries in plan order */
	uint32_t *by_path;	/* entry indices by planned path */
	/* Until something asks for the plan's entries, only its size is kept
	 * (status reads it after every change): the plan holds every
	 * clustered file's path and metadata, some 17 bytes per document of
	 * fs_bench's trees. */
	bool pinned;
	bool count_valid;
	uint64_t count_gen; /* the plan_version() count is of */
	long count;	    /* -1: the plan could not be made */
};

/* -o protect=DIR: absolute (through realpath, then below SOURCE) or
 * relative to SOURCE, without "." or ".." components. */
static int protect_rel(const struct imfs *fs, const char *dir, char **out)
{
	char abs[PATH_MAX];
	const char *rel = dir;
	size_t sl = strlen(fs->source_real);

	if (dir[0] == '/') {
		if (!realpath(dir, abs)) {
			fprintf(stderr, "imatchfs: error: protect=%s: %s\n",
				dir, strerror(errno));
			return -EINVAL;
		}
		if (!strcmp(fs->source_real, "/"))
			rel = abs + 1;
		else if (!strncmp(abs, fs->source_real, sl) &&
			 (abs[sl] == '/' || !abs[sl]))
			rel = abs + sl + (abs[sl] == '/');
		else
			rel = NULL;
	} else {
		for (const char *c = dir; rel && *c;) {
			size_t n = strcspn(c, "/");

			if ((n == 1 && c[0] == '.') ||
			    (n == 2 && !strncmp(c, "..", 2)))
				rel = NULL;
			c += n + (c[n] == '/');
		}
	}
	if (!rel) {
		fprintf(stderr,
			"imatchfs: error: protect=%s: not a directory inside "
			"%s\n",
			dir, fs->source_real);
		return -EINVAL;
	}
	*out = strdup(rel);
	if (!*out)
		return -ENOMEM;
	/* "a/b/" protects what "a/b" does. */
	for (size_t n = strlen(*out); n && (*out)[n - 1] == '/'; n--)
		(*out)[n - 1] = '\0';
	/* A relative one may be made later, so it is not refused as an
	 * absolute one that does not exist is; but a typo would protect
	 * nothing without a word. */
	struct stat st;
	if (**out && fstatat(fs->srcfd, *out, &st, 0))
		fprintf(stderr,
			"imatchfs: warning: protect=%s: nothing at %s/%s "
			"(yet): it protects what appears there\n",
			dir, fs->source_real, *out);
	return 0;
}

int redundant_new(const struct imfs *fs, struct redundant **out)
{
	const struct imfs_opts *opts = fs->opts;
	struct redundant *r = calloc(1, sizeof(*r));
	char why[160];
	int ret = -ENOMEM;

	*out = NULL;
	if (!r)
		return -ENOMEM;
	pthread_mutex_init(&r->making, NULL);
	pthread_mutex_init(&r->lock, NULL);
	im_plan_init(&r->set.plan);
	r->o.near = true;
	if (im_keep_parse(opts->keep_rule ? opts->keep_rule : IM_KEEP_DEFAULT,
			  &r->o.keep, why, sizeof(why))) {
		fprintf(stderr, "imatchfs: error: keep_rule=%s: %s\n",
			opts->keep_rule, why);
		ret = -EINVAL;
		goto out;
	}
	r->protect = calloc(opts->nprotect + 1, sizeof(*r->protect));
	if (!r->protect)
		goto out;
	for (size_t i = 0; i < opts->nprotect; i++) {
		ret = protect_rel(fs, opts->protect[i], &r->protect[i]);
		if (ret)
			goto out;
	}
	r->o.protect = (const char *const *)r->protect;
	r->o.nprotect = opts->nprotect;
	*out = r;
	return 0;
out:
	redundant_free(r);
	return ret;
}

void redundant_free(struct redundant *r)
{
	if (!r)
		return;
	im_plan_set_release(&r->set);
	free(r->by_path);
	for (size_t i = 0; r->protect && r->protect[i]; i++)
		free(r->protect[i]);
	free(r->protect);
	pthread_mutex_destroy(&r->lock);
	pthread_mutex_destroy(&r->making);
	free(r);
}

/* Size, mtime and inode as the tree holds them (the tree lock is held). */
static int meta(const char *path, struct im_plan_file *f, void *arg)
{
	struct imfs *fs = arg;
	const struct node *n = tree_lookup(fs->model->tree, path);

	if (!n || !node_in_index(n))
		return 1;
	f->size = n->size;
	f->mtime_ns = n->mtime_ns;
	f->dev = 0;
	f->ino = n->src_ino;
	return 0;
}

static const char *planned_path(const struct im_plan_set *s, uint32_t e)
{
	return s->files[s->plan.v[e].file].path;
}

static int cmp_by_path(const void *a, const void *b, void *arg)
{
	return strcmp(planned_path(arg, *(const uint32_t *)a),
		      planned_path(arg, *(const uint32_t *)b));
}

/* The entry planning @p path, or -1. */
static long find_entry(const struct redundant *r, const char *path)
{
	size_t lo = 0, hi = r->set.plan.n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int d = strcmp(path, planned_path(&r->set, r->by_path[mid]));

		if (!d)
			return r->by_path[mid];
		if (d < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return -1;
}

/* What the plan is made of: the index, and the nodes' size, mtime and inode
 * (model.h, meta_gen), which the index does not keep. Both counters only
 * grow, so their sum moves whenever either does. */
static uint64_t plan_version(const struct imfs *fs)
{
	return im_index_generation(fs->model->idx) + fs->model->meta_gen;
}

/* meta() for a plan made without the tree lock: taken for this one
 * document, so that a writer waits for a lookup, not for the plan. */
static int meta_unlocked(const char *path, struct im_plan_file *f, void *arg)
{
	struct imfs *fs = arg;
	int ret;

	tree_rdlock(fs->model->tree);
	ret = meta(path, f, fs);
	tree_unlock(fs->model->tree);
	return ret;
}

/* The plan into @p set and its path order into *@p by (caller frees both).
 * @p unlocked: the caller does not hold the tree lock. */
static int make(struct imfs *fs, const struct redundant *r, bool unlocked,
		struct im_plan_set *set, uint32_t **by)
{
	int ret;

	*by = NULL;
	ret = im_plan_from_index(fs->model->idx, &r->o,
				 unlocked ? meta_unlocked : meta, fs, set);
	if (ret)
		return ret;
	*by = malloc((set->plan.n ? set->plan.n : 1) * sizeof(**by));
	if (!*by) {
		im_plan_set_release(set);
		return -ENOMEM;
	}
	for (size_t i = 0; i < set->plan.n; i++)
		(*by)[i] = (uint32_t)i;
	qsort_r(*by, set->plan.n, sizeof(**by), cmp_by_path, set);
	return 0;
}

/* Make the plan again if the index or the nodes' metadata changed. r->lock
 * held. */
static int refresh(struct imfs *fs, struct redundant *r)
{
	uint64_t gen = plan_version(fs);
	int ret;

	if (r->valid && r->gen == gen)
		return 0;
	r->valid = false;
	im_plan_set_release(&r->set);
	free(r->by_path);
	r->by_path = NULL;
	ret = make(fs, r, false, &r->set, &r->by_path);
	if (ret)
		return ret;
	r->gen = gen;
	r->valid = true;
	return 0;
}

int redundant_foreach(struct imfs *fs, redundant_cb cb, void *arg)
{
	struct redundant *r = fs->redundant;
	int ret;

	pthread_mutex_lock(&r->lock);
	r->pinned = true;
	ret = refresh(fs, r);
	for (size_t i = 0; !ret && i < r->set.plan.n; i++) {
		const struct im_plan_entry *e = &r->set.plan.v[i];

		ret = cb(r->set.files[e->file].path,
			 r->set.files[e->keeper].path, e->similarity, arg);
	}
	pthread_mutex_unlock(&r->lock);
	return ret;
}

/* The count of a plan made since the last count (redundant_find(),
 * redundant_foreach()). r->lock held. */
static void count_from_plan(struct redundant *r)
{
	if (r->valid && (!r->count_valid || r->count_gen < r->gen)) {
		r->count = (long)r->set.plan.n;
		r->count_gen = r->gen;
		r->count_valid = true;
	}
}

/* Whether the count is that of the tree as it is now, *@p gen. No lock
 * held. */
static bool fresh(struct imfs *fs, uint64_t *gen)
{
	struct redundant *r = fs->redundant;
	bool yes;

	tree_rdlock(fs->model->tree);
	*gen = plan_version(fs);
	tree_unlock(fs->model->tree);
	pthread_mutex_lock(&r->lock);
	count_from_plan(r);
	yes = r->count_valid && r->count_gen >= *gen && r->count >= 0;
	pthread_mutex_unlock(&r->lock);
	return yes;
}

void redundant_count_update(struct imfs *fs)
{
	struct redundant *r = fs->redundant;
	struct im_plan_set set;
	uint32_t *by = NULL;
	uint64_t gen;
	int ret;

	/* Asked again once the plan's maker is waited for: it may have made
	 * what is needed. The version is read before the plan is made: a
	 * change made meanwhile leaves it older than the tree, as it is. */
	if (fresh(fs, &gen))
		return;
	pthread_mutex_lock(&r->making);
	if (fresh(fs, &gen))
		goto out;
	memset(&set, 0, sizeof(set));
	im_plan_init(&set.plan);
	ret = make(fs, r, true, &set, &by);
	pthread_mutex_lock(&r->lock);
	if (!r->count_valid || r->count_gen < gen || r->count < 0) {
		r->count = ret ? -1 : (long)set.plan.n;
		r->count_gen = gen;
		r->count_valid = true;
	}
	/* Kept when something lists the plan: it need not be made again
	 * for the next operation that asks for it. */
	if (!ret && r->pinned && (!r->valid || r->gen < gen)) {
		im_plan_set_release(&r->set);
		free(r->by_path);
		r->set = set;
		r->by_path = by;
		r->gen = gen;
		r->valid = true;
		memset(&set, 0, sizeof(set));
		im_plan_init(&set.plan);
		by = NULL;
	}
	pthread_mutex_unlock(&r->lock);
	im_plan_set_release(&set);
	free(by);
out:
	pthread_mutex_unlock(&r->making);
}

bool redundant_current(struct imfs *fs)
{
	struct redundant *r = fs->redundant;
	bool yes;

	pthread_mutex_lock(&r->lock);
	yes = r->valid && r->gen == plan_version(fs);
	pthread_mutex_unlock(&r->lock);
	return yes;
}

long redundant_count(struct imfs *fs, bool *current)
{
	struct redundant *r = fs->redundant;
	uint64_t gen = plan_version(fs);
	long n;

	pthread_mutex_lock(&r->lock);
	count_from_plan(r);
	n = r->count_valid ? r->count : -1;
	*current = r->count_valid && r->count_gen == gen;
	pthread_mutex_unlock(&r->lock);
	return n;
}

int redundant_find(struct imfs *fs, const char *path, redundant_cb cb,
		   void *arg)
{
	struct redundant *r = fs->redundant;
	long e;
	int ret;

	pthread_mutex_lock(&r->lock);
	r->pinned = true;
	ret = refresh(fs, r);
	if (!ret && (e = find_entry(r, path)) >= 0) {
		const struct im_plan_entry *pe = &r->set.plan.v[e];

		ret = 1;
		if (cb)
			cb(r->set.files[pe->file].path,
			   r->set.files[pe->keeper].path, pe->similarity, arg);
	}
	pthread_mutex_unlock(&r->lock);
	return ret;
}
