/**
 * @file dupdirs.c
 * Duplicate directories (contract in dupdirs.h).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "dupdirs.h"

struct doc {
	char *path;
	bool in_cluster;
	struct im_sig cl;
};

struct dir {
	size_t plen;   /* the directory is docs[lo].path[0 .. plen) */
	size_t lo, hi; /* its documents: docs[lo .. hi) */
	long parent;   /* index into dirs, -1 for the root */
};

struct ctx {
	const struct im_index *idx;
	bool exact_only;
	struct doc *docs;
	size_t n, cap;
	struct dir *dirs;
	size_t ndirs, dirs_cap;
	/* during covers() */
	const struct dir *target;
	bool hit;
};

/* Byte order with '/' below every other byte, so that the paths below a
 * directory are one contiguous range. */
static int dircmp(const char *a, const char *b)
{
	const unsigned char *x = (const unsigned char *)a;
	const unsigned char *y = (const unsigned char *)b;

	for (; *x && *x == *y; x++, y++)
		;
	if (*x == *y)
		return 0;
	{
		int kx = !*x ? 0 : *x == '/' ? 1 : *x + 1;
		int ky = !*y ? 0 : *y == '/' ? 1 : *y + 1;

		return kx - ky;
	}
}

static int cmp_doc(const void *a, const void *b)
{
	return dircmp(((const struct doc *)a)->path,
		      ((const struct doc *)b)->path);
}

static int on_doc(const char *path, const struct im_doc_sigs *d, void *arg)
{
	struct ctx *c = arg;
	struct doc *x;

	if (d->status != IM_DOC_SIGNED && d->status != IM_DOC_REJECTED)
		return 0;
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 256;
		struct doc *v = realloc(c->docs, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		c->docs = v;
		c->cap = cap;
	}
	x = &c->docs[c->n];
	memset(x, 0, sizeof(*x));
	x->path = strdup(path);
	if (!x->path)
		return -ENOMEM;
	c->n++;
	return 0;
}

static long push_dir(struct ctx *c, size_t plen, size_t lo, long parent)
{
	if (c->ndirs == c->dirs_cap) {
		size_t cap = c->dirs_cap ? 2 * c->dirs_cap : 256;
		struct dir *v = realloc(c->dirs, cap * sizeof(*v));

		if (!v)
			return -1;
		c->dirs = v;
		c->dirs_cap = cap;
	}
	c->dirs[c->ndirs] = (struct dir){plen, lo, lo, parent};
	return (long)c->ndirs++;
}

/* Every directory holding a document, with its range; the root is not one
 * of them. An open directory is closed when the first path outside it
 * comes. */
static int list_dirs(struct ctx *c)
{
	long *stack = NULL;
	size_t top = 0, cap = 0;
	int ret = -ENOMEM;

	for (size_t i = 0; i < c->n; i++) {
		const char *p = c->docs[i].path;
		size_t from;

		while (top) {
			struct dir *d = &c->dirs[stack[top - 1]];

			if (!strncmp(p, c->docs[d->lo].path, d->plen) &&
			    p[d->plen] == '/')
				break;
			d->hi = i;
			top--;
		}
		from = top ? c->dirs[stack[top - 1]].plen + 1 : 0;
		for (const char *s = strchr(p + from, '/'); s;
		     s = strchr(s + 1, '/')) {
			long id;

			if (top == cap) {
				size_t nc = cap ? 2 * cap : 32;
				long *v = realloc(stack, nc * sizeof(*v));

				if (!v)
					goto out;
				stack = v;
				cap = nc;
			}
			id = push_dir(c, (size_t)(s - p), i,
				      top ? stack[top - 1] : -1);
			if (id < 0)
				goto out;
			stack[top++] = id;
		}
	}
	while (top)
		c->dirs[stack[--top]].hi = c->n;
	ret = 0;
out:
	free(stack);
	return ret;
}

static size_t count(const struct ctx *c, long d)
{
	return d < 0 ? c->n : c->dirs[d].hi - c->dirs[d].lo;
}

/* Is @p path below directory @p d? */
static bool below(const struct ctx *c, const struct dir *d, const char *path)
{
	return !strncmp(path, c->docs[d->lo].path, d->plen) &&
	       path[d->plen] == '/';
}

static int on_link(const struct im_link *l, void *arg)
{
	struct ctx *c = arg;

	if (!below(c, c->target, l->path) || (c->exact_only && !l->exact))
		return 0;
	c->hit = true;
	return 1; /* found one: stop */
}

/* Is every document of @p a linked to one of @p b? */
static int covers(struct ctx *c, const struct dir *a, const struct dir *b,
		  bool *yes)
{
	*yes = false;
	for (size_t i = a->lo; i < a->hi; i++) {
		int ret;

		c->target = b;
		c->hit = false;
		ret = im_index_links(c->idx, c->docs[i].path, on_link, c);
		if (ret < 0 && ret != -ENOENT)
			return ret;
		if (!c->hit)
			return 0;
	}
	*yes = true;
	return 0;
}

struct cand {
	long dir;
	size_t count;
	uint64_t key;
};

static int cmp_cand(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;

	if (x->count != y->count)
		return x->count < y->count ? -1 : 1;
	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return (x->dir > y->dir) - (x->dir < y->dir);
}

static int cmp_strp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_group(const void *a, const void *b)
{
	const struct im_dupdir_group *x = a, *y = b;

	if (x->docs != y->docs)
		return x->docs > y->docs ? -1 : 1;
	return strcmp(x->dirs[0], y->dirs[0]);
}

/* A verified class of directories (indices into dirs), before the
 * maximality pass. */
struct class
{
	long *dir;
	size_t n;
};

void im_dupdirs_release(struct im_dupdirs *d)
{
	for (size_t i = 0; i < d->n; i++) {
		for (size_t j = 0; j < d->v[i].n; j++)
			free(d->v[i].dirs[j]);
		free(d->v[i].dirs);
	}
	free(d->v);
	memset(d, 0, sizeof(*d));
}

/* Split one group of equal keys into verified classes. */
static int verify_group(struct ctx *c, const struct cand *g, size_t n,
			struct class **classes, size_t *nclasses, size_t *cap)
{
	bool *used = calloc(n, sizeof(*used));
	int ret = 0;

	if (!used)
		return -ENOMEM;
	for (size_t r = 0; r < n && !ret; r++) {
		struct class cl = {NULL, 0};
		const struct dir *ref = &c->dirs[g[r].dir];

		if (used[r])
			continue;
		cl.dir = malloc(n * sizeof(*cl.dir));
		if (!cl.dir) {
			ret = -ENOMEM;
			break;
		}
		cl.dir[cl.n++] = g[r].dir;
		for (size_t i = r + 1; i < n; i++) {
			const struct dir *d = &c->dirs[g[i].dir];
			bool ab = false, ba = false;

			if (used[i] || below(c, ref, c->docs[d->lo].path) ||
			    below(c, d, c->docs[ref->lo].path))
				continue;
			ret = covers(c, d, ref, &ab);
			if (!ret && ab)
				ret = covers(c, ref, d, &ba);
			if (ret)
				break;
			if (ab && ba) {
				used[i] = true;
				cl.dir[cl.n++] = g[i].dir;
			}
		}
		if (ret || cl.n < 2) {
			free(cl.dir);
			continue;
		}
		if (*nclasses == *cap) {
			size_t nc = *cap ? 2 * *cap : 16;
			struct class *v = realloc(*classes, nc * sizeof(*v));

			if (!v) {
				free(cl.dir);
				ret = -ENOMEM;
				break;
			}
			*classes = v;
			*cap = nc;
		}
		(*classes)[(*nclasses)++] = cl;
	}
	free(used);
	return ret;
}

/* A member is left out when an ancestor is in a group; a class left with
 * fewer than two members is no group, which may let others keep theirs, so
 * this runs until nothing changes (ancestors are strictly shallower, so it
 * settles within a few rounds). */
static int maximal(struct ctx *c, struct class *cls, size_t ncls,
		   struct im_dupdirs *out)
{
	bool *in_group = calloc(c->ndirs ? c->ndirs : 1, sizeof(*in_group));
	bool *active = calloc(ncls ? ncls : 1, sizeof(*active));
	size_t *kept = calloc(ncls ? ncls : 1, sizeof(*kept));
	bool changed = true;
	int ret = -ENOMEM;

	if (!in_group || !active || !kept)
		goto out;
	for (size_t k = 0; k < ncls; k++)
		active[k] = true;
	for (size_t round = 0; changed && round <= ncls; round++) {
		changed = false;
		memset(in_group, 0, c->ndirs * sizeof(*in_group));
		for (size_t k = 0; k < ncls; k++)
			for (size_t i = 0; active[k] && i < cls[k].n; i++)
				in_group[cls[k].dir[i]] = true;
		for (size_t k = 0; k < ncls; k++) {
			kept[k] = 0;
			for (size_t i = 0; active[k] && i < cls[k].n; i++) {
				long a = c->dirs[cls[k].dir[i]].parent;

				while (a >= 0 && !in_group[a])
					a = c->dirs[a].parent;
				kept[k] += a < 0;
			}
			if (active[k] && kept[k] < 2) {
				active[k] = false;
				changed = true;
			}
		}
	}
	out->v = calloc(ncls ? ncls : 1, sizeof(*out->v));
	if (!out->v)
		goto out;
	for (size_t k = 0; k < ncls; k++) {
		struct im_dupdir_group *g = &out->v[out->n];

		if (!active[k])
			continue;
		g->dirs = calloc(kept[k], sizeof(*g->dirs));
		if (!g->dirs)
			goto out;
		out->n++;
		g->docs = count(c, cls[k].dir[0]);
		for (size_t i = 0; i < cls[k].n; i++) {
			const struct dir *d = &c->dirs[cls[k].dir[i]];
			long a = d->parent;

			while (a >= 0 && !in_group[a])
				a = c->dirs[a].parent;
			if (a >= 0)
				continue;
			g->dirs[g->n] = strndup(c->docs[d->lo].path, d->plen);
			if (!g->dirs[g->n])
				goto out;
			g->n++;
		}
		qsort(g->dirs, g->n, sizeof(*g->dirs), cmp_strp);
	}
	qsort(out->v, out->n, sizeof(*out->v), cmp_group);
	ret = 0;
out:
	free(in_group);
	free(active);
	free(kept);
	return ret;
}

int im_dupdirs_from_index(const struct im_index *idx, bool exact_only,
			  struct im_dupdirs *out)
{
	struct ctx c = {.idx = idx, .exact_only = exact_only};
	uint64_t *hsum = NULL;
	size_t *bad = NULL, ncand = 0, ncls = 0, clcap = 0;
	struct cand *cand = NULL;
	struct class *cls = NULL;
	int ret;

	memset(out, 0, sizeof(*out));
	ret = im_index_foreach_doc(idx, on_doc, &c);
	if (ret)
		goto out;
	ret = -ENOMEM;
	qsort(c.docs, c.n, sizeof(*c.docs), cmp_doc);
	hsum = calloc(c.n + 1, sizeof(*hsum));
	bad = calloc(c.n + 1, sizeof(*bad));
	if (!hsum || !bad)
		goto out;
	for (size_t i = 0; i < c.n; i++) {
		struct doc *x = &c.docs[i];

		x->in_cluster = im_index_cluster_of(idx, x->path, &x->cl) == 0;
		hsum[i + 1] =
			hsum[i] +
			(x->in_cluster ? XXH3_64bits(x->cl.b, sizeof(x->cl.b))
				       : 0);
		bad[i + 1] = bad[i] + !x->in_cluster;
	}
	ret = list_dirs(&c);
	if (ret)
		goto out;
	ret = -ENOMEM;
	cand = malloc((c.ndirs ? c.ndirs : 1) * sizeof(*cand));
	if (!cand)
		goto out;
	for (size_t d = 0; d < c.ndirs; d++) {
		const struct dir *x = &c.dirs[d];

		if (bad[x->hi] != bad[x->lo] ||
		    count(&c, (long)d) == count(&c, x->parent))
			continue;
		cand[ncand++] = (struct cand){(long)d, x->hi - x->lo,
					      hsum[x->hi] - hsum[x->lo]};
	}
	qsort(cand, ncand, sizeof(*cand), cmp_cand);
	ret = 0;
	for (size_t i = 0, j; i < ncand && !ret; i = j) {
		for (j = i + 1; j < ncand && cand[j].count == cand[i].count &&
				cand[j].key == cand[i].key;
		     j++)
			;
		if (j - i >= 2)
			ret = verify_group(&c, cand + i, j - i, &cls, &ncls,
					   &clcap);
	}
	if (!ret)
		ret = maximal(&c, cls, ncls, out);
out:
	if (ret)
		im_dupdirs_release(out);
	for (size_t i = 0; i < ncls; i++)
		free(cls[i].dir);
	free(cls);
	free(cand);
	free(hsum);
	free(bad);
	for (size_t i = 0; i < c.n; i++)
		free(c.docs[i].path);
	free(c.docs);
	free(c.dirs);
	return ret;
}
