/**
 * @file dirgroups.c
 * dup-dirs/ over the live index (dirgroups.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dirgroups.h"
#include "model.h"
#include "dupdirs.h"

/* One directory of a group, for finding a group by any of its members. */
struct dir_ref {
	const char *dir;
	uint32_t group;
};

struct dirgroups {
	pthread_mutex_t lock;
	/* protected by lock */
	bool valid;
	uint64_t gen; /* the index generation the groups are of */
	/* dirgroups_count_update() could not make the groups of this
	 * generation (+ 1; 0: none failed) */
	uint64_t failed;
	struct im_dupdirs groups;
	struct dir_ref *by_dir; /* every group's directories, by path */
	size_t ndirs;
};

int dirgroups_new(struct dirgroups **out)
{
	struct dirgroups *d = calloc(1, sizeof(*d));

	*out = d;
	if (!d)
		return -ENOMEM;
	pthread_mutex_init(&d->lock, NULL);
	return 0;
}

static void forget(struct dirgroups *d)
{
	d->valid = false;
	im_dupdirs_release(&d->groups);
	free(d->by_dir);
	d->by_dir = NULL;
	d->ndirs = 0;
}

void dirgroups_free(struct dirgroups *d)
{
	if (!d)
		return;
	forget(d);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

static int cmp_ref(const void *a, const void *b)
{
	return strcmp(((const struct dir_ref *)a)->dir,
		      ((const struct dir_ref *)b)->dir);
}

/* The groups of the index as it is into @p out's groups and by_dir. */
static int make(struct imfs *fs, struct dirgroups *out)
{
	size_t n = 0;
	int ret;

	/* Near links, as `imatch scan --dirs`: a copied folder whose
	 * documents were re-saved is still a copy to its owner. */
	ret = im_dupdirs_from_index(fs->model->idx, false, &out->groups);
	if (ret)
		return ret;
	for (size_t g = 0; g < out->groups.n; g++)
		n += out->groups.v[g].n;
	out->by_dir = malloc((n ? n : 1) * sizeof(*out->by_dir));
	if (!out->by_dir) {
		im_dupdirs_release(&out->groups);
		return -ENOMEM;
	}
	for (size_t g = 0; g < out->groups.n; g++)
		for (size_t i = 0; i < out->groups.v[g].n; i++)
			out->by_dir[out->ndirs++] = (struct dir_ref){
				out->groups.v[g].dirs[i], (uint32_t)g};
	qsort(out->by_dir, out->ndirs, sizeof(*out->by_dir), cmp_ref);
	return 0;
}

/* Make the groups again if the index changed. d->lock held. */
static int refresh(struct imfs *fs, struct dirgroups *d)
{
	uint64_t gen = im_index_generation(fs->model->idx);
	int ret;

	if (d->valid && d->gen == gen)
		return 0;
	forget(d);
	ret = make(fs, d);
	if (ret)
		return ret;
	d->gen = gen;
	d->valid = true;
	return 0;
}

static int call(const struct im_dupdir_group *g, dirgroups_cb cb, void *arg)
{
	return cb((const char *const *)g->dirs, g->n, g->docs, arg);
}

int dirgroups_foreach(struct imfs *fs, dirgroups_cb cb, void *arg)
{
	struct dirgroups *d = fs->dirgroups;
	int ret;

	pthread_mutex_lock(&d->lock);
	ret = refresh(fs, d);
	for (size_t g = 0; !ret && g < d->groups.n; g++)
		ret = call(&d->groups.v[g], cb, arg);
	pthread_mutex_unlock(&d->lock);
	return ret;
}

int dirgroups_of(struct imfs *fs, const char *dir, dirgroups_cb cb, void *arg)
{
	struct dirgroups *d = fs->dirgroups;
	struct dir_ref key = {dir, 0}, *hit = NULL;
	int ret;

	pthread_mutex_lock(&d->lock);
	ret = refresh(fs, d);
	if (!ret)
		hit = bsearch(&key, d->by_dir, d->ndirs, sizeof(*d->by_dir),
			      cmp_ref);
	if (hit) {
		ret = 1;
		if (cb)
			call(&d->groups.v[hit->group], cb, arg);
	}
	pthread_mutex_unlock(&d->lock);
	return ret;
}

void dirgroups_count_update(struct imfs *fs)
{
	struct dirgroups *d = fs->dirgroups, made = {.valid = false};
	/* Read first: a change made meanwhile leaves the groups older. */
	uint64_t gen = im_index_generation(fs->model->idx);
	bool fresh;
	int ret;

	pthread_mutex_lock(&d->lock);
	fresh = d->valid && d->gen >= gen;
	pthread_mutex_unlock(&d->lock);
	if (fresh)
		return;
	ret = make(fs, &made);
	pthread_mutex_lock(&d->lock);
	if (ret && d->failed < gen + 1)
		d->failed = gen + 1;
	if (!ret && (!d->valid || d->gen < gen)) {
		forget(d);
		d->groups = made.groups;
		d->by_dir = made.by_dir;
		d->ndirs = made.ndirs;
		d->gen = gen;
		d->valid = true;
		made.by_dir = NULL;
		memset(&made.groups, 0, sizeof(made.groups));
	}
	pthread_mutex_unlock(&d->lock);
	forget(&made);
}

long dirgroups_count(struct imfs *fs, bool *current)
{
	struct dirgroups *d = fs->dirgroups;
	long n;

	uint64_t gen = im_index_generation(fs->model->idx);

	pthread_mutex_lock(&d->lock);
	if (d->failed == gen + 1 && !(d->valid && d->gen == gen)) {
		n = -1;
		*current = true;
	} else {
		n = d->valid ? (long)d->groups.n : -1;
		*current = d->valid && d->gen == gen;
	}
	pthread_mutex_unlock(&d->lock);
	return n;
}
