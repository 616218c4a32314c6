/**
 * @file ctab.c
 * The cluster inode table (ctab.h): open addressing with linear probing,
 * keyed by inode number; at most half full.
 */
#include <errno.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "ctab.h"

struct centry {
	uint64_t ino; /* 0: empty */
	uint64_t nlookup;
	struct im_sig name;
	bool retired;
};

struct ctab {
	pthread_mutex_t lock;
	struct centry *v; /* protected by lock */
	size_t size, used;
};

static uint64_t version_ino(const struct im_sig *name, uint64_t v)
{
	return XXH3_64bits_withSeed(name->b, IM_SIG_LEN, v) | CTAB_INO_BIT;
}

int ctab_new(struct ctab **out)
{
	struct ctab *ct = calloc(1, sizeof(*ct));

	*out = NULL;
	if (!ct)
		return -ENOMEM;
	pthread_mutex_init(&ct->lock, NULL);
	*out = ct;
	return 0;
}

void ctab_free(struct ctab *ct)
{
	if (!ct)
		return;
	pthread_mutex_destroy(&ct->lock);
	free(ct->v);
	free(ct);
}

/* The entry of @p ino, or the empty slot where it would go. */
static struct centry *find(const struct ctab *ct, uint64_t ino)
{
	size_t i = (size_t)ino & (ct->size - 1);

	while (ct->v[i].ino && ct->v[i].ino != ino)
		i = (i + 1) & (ct->size - 1);
	return &ct->v[i];
}

static int grow(struct ctab *ct)
{
	size_t ns = ct->size ? ct->size * 2 : 256;
	struct centry *old = ct->v;
	size_t os = ct->size;

	ct->v = calloc(ns, sizeof(*ct->v));
	if (!ct->v) {
		ct->v = old;
		return -ENOMEM;
	}
	ct->size = ns;
	for (size_t i = 0; i < os; i++)
		if (old[i].ino)
			*find(ct, old[i].ino) = old[i];
	free(old);
	return 0;
}

/* Versions of a name looked at: past that many retired numbers still held
 * by the kernel, the name is shown as gone until some are forgotten. */
#define MAX_VERSIONS 64

/*
 * The live number of @p name: its entry (NULL if the kernel holds none) and
 * number (the lowest free version then). Every version is looked at, since
 * a forgotten lower one leaves a hole. Lock held.
 */
static struct centry *current(const struct ctab *ct, const struct im_sig *name,
			      uint64_t *ino)
{
	uint64_t free_ino = 0;

	for (uint64_t v = 0; v < MAX_VERSIONS; v++) {
		uint64_t i = version_ino(name, v);
		struct centry *e = ct->size ? find(ct, i) : NULL;
		if (!e || !e->ino) {
			if (!free_ino)
				free_ino = i;
			continue;
		}
		/* (A collision with another name counts as retired.) */
		if (!e->retired && !im_sig_cmp(&e->name, name)) {
			*ino = i;
			return e;
		}
	}
	*ino = free_ino ? free_ino : version_ino(name, MAX_VERSIONS - 1);
	return NULL;
}

uint64_t ctab_ino(struct ctab *ct, const struct im_sig *name)
{
	uint64_t ino;

	pthread_mutex_lock(&ct->lock);
	current(ct, name, &ino);
	pthread_mutex_unlock(&ct->lock);
	return ino;
}

int ctab_ref(struct ctab *ct, const struct im_sig *name, uint64_t ino,
	     uint64_t n)
{
	int ret = 0;

	pthread_mutex_lock(&ct->lock);
	if ((ct->used + 1) * 2 > ct->size && grow(ct)) {
		ret = -ENOMEM;
		goto out;
	}
	struct centry *e = find(ct, ino);
	if (!e->ino) {
		e->ino = ino;
		e->name = *name;
		e->retired = false;
		ct->used++;
	}
	e->nlookup += n;
out:
	pthread_mutex_unlock(&ct->lock);
	return ret;
}

/* Backward-shift deletion keeps every probe chain whole. */
static void erase(struct ctab *ct, struct centry *e)
{
	size_t i = (size_t)(e - ct->v), j = i;

	for (;;) {
		j = (j + 1) & (ct->size - 1);
		if (!ct->v[j].ino)
			break;
		size_t home = (size_t)ct->v[j].ino & (ct->size - 1);
		/* Move j back to i unless its home lies in (i, j]. */
		if ((j > i && (home <= i || home > j)) ||
		    (j < i && home <= i && home > j)) {
			ct->v[i] = ct->v[j];
			i = j;
		}
	}
	memset(&ct->v[i], 0, sizeof(ct->v[i]));
	ct->used--;
}

void ctab_forget(struct ctab *ct, uint64_t ino, uint64_t n)
{
	pthread_mutex_lock(&ct->lock);
	if (ct->size) {
		struct centry *e = find(ct, ino);
		if (e->ino) {
			e->nlookup = e->nlookup > n ? e->nlookup - n : 0;
			if (!e->nlookup)
				erase(ct, e);
		}
	}
	pthread_mutex_unlock(&ct->lock);
}

int ctab_name(struct ctab *ct, uint64_t ino, struct im_sig *out)
{
	int ret = -ENOENT;

	pthread_mutex_lock(&ct->lock);
	if (ct->size) {
		struct centry *e = find(ct, ino);
		if (e->ino && !e->retired) {
			*out = e->name;
			ret = 0;
		}
	}
	pthread_mutex_unlock(&ct->lock);
	return ret;
}

uint64_t ctab_retire(struct ctab *ct, const struct im_sig *name)
{
	uint64_t ino;

	pthread_mutex_lock(&ct->lock);
	struct centry *e = current(ct, name, &ino);
	if (e)
		e->retired = true;
	pthread_mutex_unlock(&ct->lock);
	return e ? ino : 0;
}

size_t ctab_names(struct ctab *ct, struct im_sig **out)
{
	size_t n = 0;

	pthread_mutex_lock(&ct->lock);
	*out = ct->used ? malloc(ct->used * sizeof(**out)) : NULL;
	for (size_t i = 0; *out && i < ct->size; i++)
		if (ct->v[i].ino && !ct->v[i].retired)
			(*out)[n++] = ct->v[i].name;
	pthread_mutex_unlock(&ct->lock);
	return n;
}
