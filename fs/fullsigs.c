/**
 * @file fullsigs.c
 * The whole signatures: the saved cache, and fresh entries in a chained
 * hash table by path (fullsigs.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "fullsigs.h"
#include "index.h"

/* What the index keeps of each signature (im_index_set_prefixes()). */
#define PREFIX_LEN IM_KEY_COORD_LEN

struct fresh {
	struct fresh *next;
	uint32_t valid; /* masked to ncoords */
	uint8_t ncoords;
	/* fullsigs_mark(): the cache to be adopted holds it. Read and
	 * written by the thread that adopts only. */
	uint8_t held;
	uint8_t b[]; /* the valid signatures in coordinate order, the path */
};

struct fullsigs {
	struct im_state *saved;
	struct fresh **tab;
	size_t tab_size; /* 0 or a power of two */
	size_t n;
};

static uint32_t valid_of(const struct im_doc_sigs *d)
{
	return d->ncoords >= 32 ? d->valid
				: d->valid & ((1u << d->ncoords) - 1);
}

static const char *fresh_path(const struct fresh *e)
{
	return (const char *)e->b +
	       (size_t)__builtin_popcount(e->valid) * IM_SIG_LEN;
}

/* Whether @p a and @p b have the same valid coordinates and signatures
 * that agree on their first @p len bytes. */
static bool agree(const struct im_doc_sigs *a, const struct im_doc_sigs *b,
		  size_t len)
{
	uint32_t valid = valid_of(a);

	if (valid != valid_of(b) || a->ncoords != b->ncoords)
		return false;
	for (unsigned k = 0; k < a->ncoords; k++)
		if ((valid & (1u << k)) &&
		    memcmp(a->sig[k].b, b->sig[k].b, len))
			return false;
	return true;
}

/* Whether whole signatures @p w are those of the index's record @p d. */
static bool fits(const struct im_doc_sigs *d, const struct im_doc_sigs *w)
{
	return agree(d, w, PREFIX_LEN);
}

static void copy_sigs(struct im_doc_sigs *d, const struct im_doc_sigs *w)
{
	uint32_t valid = valid_of(w);

	for (unsigned k = 0; k < w->ncoords; k++)
		if (valid & (1u << k))
			d->sig[k] = w->sig[k];
}

/* ---- Fresh entries ------------------------------------------------------- */

static struct fresh **fresh_slot(const struct fullsigs *f, const char *path)
{
	if (!f->tab_size)
		return NULL;
	size_t h = XXH3_64bits(path, strlen(path)) & (f->tab_size - 1);
	struct fresh **pp = &f->tab[h];

	while (*pp && strcmp(fresh_path(*pp), path))
		pp = &(*pp)->next;
	return pp;
}

static void fresh_unpack(const struct fresh *e, struct im_doc_sigs *w)
{
	const uint8_t *s = e->b;

	w->ncoords = e->ncoords;
	w->valid = e->valid;
	for (unsigned k = 0; k < e->ncoords; k++) {
		if (e->valid & (1u << k)) {
			memcpy(w->sig[k].b, s, IM_SIG_LEN);
			s += IM_SIG_LEN;
		}
	}
}

/* A bigger table if it can be had; chains grow longer otherwise. */
static void fresh_grow(struct fullsigs *f)
{
	size_t ns = f->tab_size ? 2 * f->tab_size : 64;
	struct fresh **nt = calloc(ns, sizeof(*nt));

	if (!nt)
		return;
	for (size_t i = 0; i < f->tab_size; i++) {
		while (f->tab[i]) {
			struct fresh *e = f->tab[i];
			const char *p = fresh_path(e);
			size_t h = XXH3_64bits(p, strlen(p)) & (ns - 1);

			f->tab[i] = e->next;
			e->next = nt[h];
			nt[h] = e;
		}
	}
	free(f->tab);
	f->tab = nt;
	f->tab_size = ns;
}

void fullsigs_remove(struct fullsigs *f, const char *path)
{
	struct fresh **pp = fresh_slot(f, path), *e;

	if (!pp || !*pp)
		return;
	e = *pp;
	*pp = e->next;
	free(e);
	if (--f->n == 0) {
		free(f->tab);
		f->tab = NULL;
		f->tab_size = 0;
	}
}

/* ---- Life cycle ---------------------------------------------------------- */

int fullsigs_new(struct fullsigs **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

void fullsigs_free(struct fullsigs *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->tab_size; i++) {
		while (f->tab[i]) {
			struct fresh *e = f->tab[i];
			f->tab[i] = e->next;
			free(e);
		}
	}
	free(f->tab);
	im_state_free(f->saved);
	free(f);
}

/* Whether the saved cache holds @p path with the whole signatures @p w. */
static bool saved_holds(const struct fullsigs *f, const char *path,
			const struct im_doc_sigs *w)
{
	struct im_state_entry e;

	return f->saved && !im_state_find(f->saved, path, &e) &&
	       agree(&e.d, w, IM_SIG_LEN);
}

const struct im_state *fullsigs_saved(const struct fullsigs *f)
{
	return f->saved;
}

void fullsigs_mark(struct fullsigs *f, const struct im_state *saved)
{
	struct fullsigs next = {.saved = (struct im_state *)saved};
	struct im_doc_sigs w;

	for (size_t i = 0; i < f->tab_size; i++) {
		for (struct fresh *e = f->tab[i]; e; e = e->next) {
			fresh_unpack(e, &w);
			e->held = saved_holds(&next, fresh_path(e), &w);
		}
	}
}

struct im_state *fullsigs_adopt(struct fullsigs *f, struct im_state *saved,
				bool marked)
{
	struct im_state *old = f->saved;
	struct im_doc_sigs w;

	f->saved = saved;
	for (size_t i = 0; i < f->tab_size; i++) {
		for (struct fresh **pp = &f->tab[i]; *pp;) {
			struct fresh *e = *pp;

			if (!marked)
				fresh_unpack(e, &w);
			if (marked ? e->held
				   : saved_holds(f, fresh_path(e), &w)) {
				*pp = e->next;
				free(e);
				f->n--;
			} else {
				pp = &e->next;
			}
		}
	}
	if (!f->n) {
		free(f->tab);
		f->tab = NULL;
		f->tab_size = 0;
	}
	return old;
}

/* ---- Changes ------------------------------------------------------------- */

int fullsigs_put(struct fullsigs *f, const char *path,
		 const struct im_doc_sigs *d)
{
	uint32_t valid = valid_of(d);
	size_t nsig = (size_t)__builtin_popcount(valid), len = strlen(path);
	struct fresh **pp, *e;
	uint8_t *s;

	if (!valid || saved_holds(f, path, d)) {
		fullsigs_remove(f, path);
		return 0;
	}
	e = malloc(sizeof(*e) + nsig * IM_SIG_LEN + len + 1);
	if (!e)
		return -ENOMEM;
	e->valid = valid;
	e->ncoords = d->ncoords;
	e->held = 0;
	s = e->b;
	for (unsigned k = 0; k < d->ncoords; k++) {
		if (valid & (1u << k)) {
			memcpy(s, d->sig[k].b, IM_SIG_LEN);
			s += IM_SIG_LEN;
		}
	}
	memcpy(s, path, len + 1);
	if (f->n >= f->tab_size)
		fresh_grow(f);
	if (!f->tab_size) {
		free(e);
		return -ENOMEM;
	}
	pp = fresh_slot(f, path);
	if (*pp) {
		e->next = (*pp)->next;
		free(*pp);
	} else {
		e->next = NULL;
		f->n++;
	}
	*pp = e;
	return 0;
}

int fullsigs_rename(struct fullsigs *f, const char *from, const char *to,
		    const struct im_doc_sigs *d)
{
	struct im_doc_sigs w = *d;
	int ret;

	if (!valid_of(d))
		return 0;
	ret = fullsigs_get(f, from, &w);
	if (ret)
		return ret;
	return fullsigs_put(f, to, &w);
}

/* ---- Queries ------------------------------------------------------------- */

int fullsigs_get(const struct fullsigs *f, const char *path,
		 struct im_doc_sigs *d)
{
	struct fresh **pp = fresh_slot(f, path);
	struct im_state_entry e;
	struct im_doc_sigs w;

	if (!valid_of(d))
		return 0;
	if (pp && *pp) {
		memset(&w, 0, sizeof(w));
		fresh_unpack(*pp, &w);
		if (fits(d, &w)) {
			copy_sigs(d, &w);
			return 0;
		}
	}
	if (f->saved && !im_state_find(f->saved, path, &e) && fits(d, &e.d)) {
		copy_sigs(d, &e.d);
		return 0;
	}
	return -ENOENT;
}
