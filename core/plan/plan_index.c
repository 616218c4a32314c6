/**
 * @file plan_index.c
 * Removal plans over the index's clusters (contract in plan.h).
 *
 * The index is only queried (never held locked across calls), one cluster at
 * a time: its members, in path order. The links are what costs (the index
 * verifies every candidate of a document against its sketch again), and
 * only a keeper's decide anything, so they are asked for keeper by keeper
 * (im_plan_build_lazy()): a cluster of n near-duplicates costs the links of
 * its few keepers, not of its n members. Each neighbour is looked up among
 * the keeper's cluster by binary search; one that is not a member (the
 * index changed between the two calls) is ignored. Exact copies are not
 * links but classes (im_plan_file.exact_class: the members of one cluster
 * with one content hash), so that m copies of one file cost m, not m^2/2.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

struct gather {
	struct im_sig *names;
	size_t nnames, names_cap;

	/* Every member of every cluster, clusters one after another, each
	 * cluster's members in path order. */
	char **paths;
	size_t n, cap;
	/* Beside each member: its cluster, content hash and figures. */
	struct im_sig *cl;
	uint8_t (*hash)[16];
	bool *hv;
	uint64_t *numbers;
	size_t aux_cap;
};

/* im_plan_build_lazy()'s questions, answered from the index. */
struct asker {
	const struct im_index *idx;
	const struct im_plan_set *s;
	const uint32_t *first, *end; /* each file's cluster in s->files */
	bool near;
	uint32_t k;		/* whose links are being listed */
	struct im_plan_link *v; /* its links */
	size_t n, cap;
};

static int grow(void **v, size_t *cap, size_t need, size_t size)
{
	size_t nc;
	void *p;

	if (need <= *cap)
		return 0;
	nc = *cap ? 2 * *cap : 64;
	while (nc < need)
		nc *= 2;
	p = realloc(*v, nc * size);
	if (!p)
		return -ENOMEM;
	*v = p;
	*cap = nc;
	return 0;
}

/* cl, hash, hv and numbers follow the capacity of paths. */
static int aux_grow(struct gather *g)
{
	void *p;

	if (g->aux_cap >= g->cap)
		return 0;
	p = realloc(g->cl, g->cap * sizeof(*g->cl));
	if (!p)
		return -ENOMEM;
	g->cl = p;
	p = realloc(g->hash, g->cap * sizeof(*g->hash));
	if (!p)
		return -ENOMEM;
	g->hash = p;
	p = realloc(g->hv, g->cap * sizeof(*g->hv));
	if (!p)
		return -ENOMEM;
	g->hv = p;
	p = realloc(g->numbers, g->cap * sizeof(*g->numbers));
	if (!p)
		return -ENOMEM;
	g->numbers = p;
	g->aux_cap = g->cap;
	return 0;
}

static int on_cluster(const struct im_sig *name, size_t size, void *arg)
{
	struct gather *g = arg;

	(void)size;
	if (grow((void **)&g->names, &g->names_cap, g->nnames + 1,
		 sizeof(*g->names)))
		return -ENOMEM;
	g->names[g->nnames++] = *name;
	return 0;
}

static int on_member(const char *path, void *arg)
{
	struct gather *g = arg;
	char *s;

	if (grow((void **)&g->paths, &g->cap, g->n + 1, sizeof(*g->paths)))
		return -ENOMEM;
	s = strdup(path);
	if (!s)
		return -ENOMEM;
	g->paths[g->n++] = s;
	return 0;
}

static int cmp_path(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Members of one cluster, appended to g. */
static int gather_cluster(const struct im_index *idx, struct gather *g,
			  const struct im_sig *name)
{
	size_t first = g->n;
	int ret;

	ret = im_index_cluster_members(idx, name, on_member, g);
	if (ret == -ENOENT)
		return 0; /* gone meanwhile */
	if (ret)
		return ret;
	qsort(g->paths + first, g->n - first, sizeof(*g->paths), cmp_path);
	ret = aux_grow(g);
	if (ret)
		return ret;
	for (size_t i = first; i < g->n; i++) {
		struct im_doc_sigs d;

		g->cl[i] = *name;
		if (im_index_get(idx, g->paths[i], &d))
			memset(&d, 0, sizeof(d));
		g->hv[i] = d.exact_valid;
		g->numbers[i] = d.numbers;
		memcpy(g->hash[i], d.exact, sizeof(g->hash[i]));
		if (!g->hv[i])
			memset(g->hash[i], 0, sizeof(g->hash[i]));
	}
	return 0;
}

static int cmp_file_path(const void *key, const void *f)
{
	return strcmp(key, ((const struct im_plan_file *)f)->path);
}

static int on_link(const struct im_link *l, void *arg)
{
	struct asker *a = arg;
	const struct im_plan_file *f = a->s->files;
	uint32_t first = a->first[a->k];
	const struct im_plan_file *hit =
		bsearch(l->path, f + first, a->end[a->k] - first, sizeof(*f),
			cmp_file_path);

	if (!hit)
		return 0;
	if (grow((void **)&a->v, &a->cap, a->n + 1, sizeof(*a->v)))
		return -ENOMEM;
	a->v[a->n++] = (struct im_plan_link){
		.a = a->k,
		.b = (uint32_t)(hit - f),
		.similarity = (float)l->similarity,
		.exact = l->exact,
	};
	return 0;
}

static int ask_links(uint32_t k, const struct im_plan_link **links, size_t *n,
		     void *arg)
{
	struct asker *a = arg;
	int ret = 0;

	a->n = 0;
	a->k = k;
	/* The index's near links only: copies are classes, and without
	 * near-duplicates nothing else counts. */
	if (a->near)
		ret = im_index_links_near(a->idx, a->s->files[k].path, on_link,
					  a);
	*links = a->v;
	*n = a->n;
	return ret == -ENOENT ? 0 : ret; /* gone meanwhile */
}

/* Files x and y are in one exact class when this is 0: one cluster, one
 * content hash. */
static int class_key_cmp(const struct im_plan_set *s, uint32_t x, uint32_t y)
{
	int c = memcmp(&s->cluster[x], &s->cluster[y], sizeof(s->cluster[x]));

	return c ? c : memcmp(s->hash[x], s->hash[y], sizeof(s->hash[x]));
}

static int cmp_class_key(const void *a, const void *b, void *arg)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	int c = class_key_cmp(arg, x, y);

	return c ? c : (x > y) - (x < y);
}

/* Number the exact classes: files of one cluster with one valid hash. */
static int number_classes(struct im_plan_set *s)
{
	uint32_t *v = malloc((s->nfiles ? s->nfiles : 1) * sizeof(*v));
	size_t n = 0;
	uint32_t cls = 0;

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < s->nfiles; i++)
		if (s->hash_valid[i])
			v[n++] = (uint32_t)i;
	qsort_r(v, n, sizeof(*v), cmp_class_key, s);
	for (size_t i = 0; i < n; i++) {
		cls += !i || class_key_cmp(s, v[i], v[i - 1]);
		s->files[v[i]].exact_class = cls;
	}
	free(v);
	return 0;
}

void im_plan_set_release(struct im_plan_set *s)
{
	for (size_t i = 0; s->files && i < s->nfiles; i++)
		free((char *)s->files[i].path);
	free(s->files);
	free(s->hash);
	free(s->hash_valid);
	free(s->cluster);
	im_plan_release(&s->plan);
	memset(s, 0, sizeof(*s));
	im_plan_init(&s->plan);
}

int im_plan_from_index(const struct im_index *idx, const struct im_plan_opts *o,
		       im_plan_meta_cb meta, void *arg, struct im_plan_set *out)
{
	struct gather g;
	struct im_plan_set s;
	struct asker ask = {.idx = idx, .near = o->near};
	size_t *bound = NULL; /* cluster c: g.paths[bound[c]..bound[c + 1]) */
	uint32_t *first = NULL, *end = NULL;
	size_t kept = 0;
	int ret = -ENOMEM;

	memset(&g, 0, sizeof(g));
	memset(&s, 0, sizeof(s));
	im_plan_init(&s.plan);
	memset(out, 0, sizeof(*out));
	im_plan_init(&out->plan);
	ret = im_index_foreach_cluster(idx, on_cluster, &g);
	if (ret)
		goto out;
	ret = -ENOMEM;
	bound = malloc((g.nnames + 1) * sizeof(*bound));
	if (!bound)
		goto out;
	ret = 0;
	bound[0] = 0;
	for (size_t c = 0; !ret && c < g.nnames; c++) {
		ret = gather_cluster(idx, &g, &g.names[c]);
		bound[c + 1] = g.n;
	}
	if (ret)
		goto out;

	ret = -ENOMEM;
	s.files = calloc(g.n ? g.n : 1, sizeof(*s.files));
	s.hash = malloc((g.n ? g.n : 1) * sizeof(*s.hash));
	s.hash_valid = malloc((g.n ? g.n : 1) * sizeof(*s.hash_valid));
	s.cluster = malloc((g.n ? g.n : 1) * sizeof(*s.cluster));
	first = malloc((g.n ? g.n : 1) * sizeof(*first));
	end = malloc((g.n ? g.n : 1) * sizeof(*end));
	if (!s.files || !s.hash || !s.hash_valid || !s.cluster || !first ||
	    !end)
		goto out;
	for (size_t c = 0; c < g.nnames; c++) {
		size_t from = kept;

		for (size_t i = bound[c]; i < bound[c + 1]; i++) {
			struct im_plan_file f = {.path = g.paths[i]};

			ret = meta(g.paths[i], &f, arg);
			if (ret < 0)
				goto out;
			if (ret > 0)
				continue;
			f.numbers = g.numbers[i];
			s.files[kept] = f;
			g.paths[i] = NULL; /* now owned by s */
			memcpy(s.hash[kept], g.hash[i], sizeof(s.hash[kept]));
			s.hash_valid[kept] = g.hv[i];
			s.cluster[kept] = g.cl[i];
			first[kept] = (uint32_t)from;
			s.nfiles = ++kept;
		}
		for (size_t i = from; i < kept; i++)
			end[i] = (uint32_t)kept;
	}
	ret = number_classes(&s);
	ask.s = &s;
	ask.first = first;
	ask.end = end;
	if (!ret)
		ret = im_plan_build_lazy(s.files, s.nfiles, ask_links, &ask, o,
					 &s.plan);
	if (ret)
		goto out;
	*out = s;
	memset(&s, 0, sizeof(s));
	im_plan_init(&s.plan);
out:
	im_plan_set_release(&s);
	for (size_t i = 0; i < g.n; i++)
		free(g.paths[i]);
	free(g.paths);
	free(g.cl);
	free(g.hash);
	free(g.hv);
	free(g.numbers);
	free(g.names);
	free(bound);
	free(first);
	free(end);
	free(ask.v);
	return ret;
}
