/**
 * @file plan_index.c
 * Removal plans over the index's clusters (contract in plan.h).
 *
 * The index is only queried (never held locked across calls), one cluster at
 * a time: its members, then each member's verified near links (similarity as
 * the index holds it), looked up among the members by binary search. A
 * neighbour that is not a member (the index changed between the two calls) is
 * ignored. Exact copies are not links but classes (im_plan_file.exact_class:
 * the members of one cluster with one content hash), so that m copies of one
 * file cost m, not m^2/2.
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

	struct im_plan_link *links;
	size_t nlinks, links_cap;

	/* During one cluster's im_index_dupes() walk. */
	size_t first, count; /* the cluster's members: paths[first..+count) */
	uint32_t cur;	     /* whose near-duplicates are being listed */
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

static int on_link(const struct im_link *l, void *arg)
{
	struct gather *g = arg;
	const char *path = l->path;
	char **hit = bsearch(&path, g->paths + g->first, g->count,
			     sizeof(*g->paths), cmp_path);
	uint32_t j;

	if (!hit)
		return 0;
	j = (uint32_t)(hit - g->paths);
	if (j <= g->cur)
		return 0; /* each pair once: from its smaller end */
	if (grow((void **)&g->links, &g->links_cap, g->nlinks + 1,
		 sizeof(*g->links)))
		return -ENOMEM;
	g->links[g->nlinks++] = (struct im_plan_link){
		.a = g->cur,
		.b = j,
		.similarity = (float)l->similarity,
		.exact = l->exact,
	};
	return 0;
}

/* Members and links of one cluster, appended to g. */
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
	g->first = first;
	g->count = g->n - first;
	for (size_t i = first; i < g->n; i++) {
		g->cur = (uint32_t)i;
		ret = im_index_links_near(idx, g->paths[i], on_link, g);
		if (ret && ret != -ENOENT)
			return ret;
	}
	return 0;
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
	uint32_t *remap = NULL;
	size_t kept = 0, nl = 0;
	int ret;

	memset(&g, 0, sizeof(g));
	memset(&s, 0, sizeof(s));
	im_plan_init(&s.plan);
	memset(out, 0, sizeof(*out));
	im_plan_init(&out->plan);
	ret = im_index_foreach_cluster(idx, on_cluster, &g);
	for (size_t c = 0; !ret && c < g.nnames; c++)
		ret = gather_cluster(idx, &g, &g.names[c]);
	if (ret)
		goto out;

	ret = -ENOMEM;
	remap = malloc((g.n ? g.n : 1) * sizeof(*remap));
	s.files = calloc(g.n ? g.n : 1, sizeof(*s.files));
	s.hash = malloc((g.n ? g.n : 1) * sizeof(*s.hash));
	s.hash_valid = malloc((g.n ? g.n : 1) * sizeof(*s.hash_valid));
	s.cluster = malloc((g.n ? g.n : 1) * sizeof(*s.cluster));
	if (!remap || !s.files || !s.hash || !s.hash_valid || !s.cluster)
		goto out;
	for (size_t i = 0; i < g.n; i++) {
		struct im_plan_file f = {.path = g.paths[i]};

		ret = meta(g.paths[i], &f, arg);
		if (ret < 0)
			goto out;
		if (ret > 0) {
			remap[i] = UINT32_MAX;
			continue;
		}
		remap[i] = (uint32_t)kept;
		f.numbers = g.numbers[i];
		s.files[kept] = f;
		g.paths[i] = NULL; /* now owned by s */
		memcpy(s.hash[kept], g.hash[i], sizeof(s.hash[kept]));
		s.hash_valid[kept] = g.hv[i];
		s.cluster[kept] = g.cl[i];
		s.nfiles = ++kept;
	}
	for (size_t l = 0; l < g.nlinks; l++) {
		uint32_t a = remap[g.links[l].a], b = remap[g.links[l].b];

		if (a == UINT32_MAX || b == UINT32_MAX)
			continue;
		g.links[nl] = g.links[l];
		g.links[nl].a = a;
		g.links[nl].b = b;
		nl++;
	}
	ret = number_classes(&s);
	if (!ret)
		ret = im_plan_build(s.files, s.nfiles, g.links, nl, o, &s.plan);
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
	free(g.links);
	free(remap);
	return ret;
}
