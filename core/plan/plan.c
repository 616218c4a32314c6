/**
 * @file plan.c
 * Keep rules and greedy keepers (DESIGN §6); the rule is stated in plan.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

/* ---- Keep rules ------------------------------------------------------------ */

static const char *const rule_names[] = {
	[IM_KEEP_PROTECT] = "protect", [IM_KEEP_OLDEST] = "oldest",
	[IM_KEEP_NEWEST] = "newest",   [IM_KEEP_SHORTEST] = "shortest",
	[IM_KEEP_LONGEST] = "longest", [IM_KEEP_NAME] = "name",
};
#define NRULES (sizeof(rule_names) / sizeof(rule_names[0]))

static int keep_fail(char *why, size_t len, const char *fmt, const char *arg)
{
	if (why && len)
		snprintf(why, len, fmt, arg);
	return -EINVAL;
}

int im_keep_parse(const char *s, struct im_keep *out, char *why, size_t why_len)
{
	struct im_keep k = {.n = 0};
	bool seen[NRULES] = {false};
	const char *p = s;

	if (!*s)
		return keep_fail(why, why_len, "no keep rule given%s", "");
	for (;;) {
		size_t len = strcspn(p, ",");
		unsigned r;

		for (r = 0; r < NRULES; r++)
			if (strlen(rule_names[r]) == len &&
			    !memcmp(p, rule_names[r], len))
				break;
		if (r == NRULES) {
			char name[64];

			snprintf(name, sizeof(name), "%.*s",
				 (int)(len < 40 ? len : 40), p);
			return keep_fail(why, why_len,
					 "unknown keep rule '%s' (protect, "
					 "oldest, newest, shortest, longest, "
					 "name)",
					 name);
		}
		if (seen[r])
			return keep_fail(why, why_len,
					 "keep rule '%s' given twice",
					 rule_names[r]);
		if ((r == IM_KEEP_OLDEST && seen[IM_KEEP_NEWEST]) ||
		    (r == IM_KEEP_NEWEST && seen[IM_KEEP_OLDEST]))
			return keep_fail(why, why_len,
					 "'oldest' and 'newest' exclude each "
					 "other%s",
					 "");
		if ((r == IM_KEEP_SHORTEST && seen[IM_KEEP_LONGEST]) ||
		    (r == IM_KEEP_LONGEST && seen[IM_KEEP_SHORTEST]))
			return keep_fail(why, why_len,
					 "'shortest' and 'longest' exclude "
					 "each other%s",
					 "");
		if (seen[IM_KEEP_NAME])
			return keep_fail(why, why_len,
					 "'name' decides every tie, so it must "
					 "be the last rule (before '%s')",
					 rule_names[r]);
		seen[r] = true;
		k.rule[k.n++] = (uint8_t)r;
		p += len;
		if (!*p)
			break;
		p++;
	}
	if (!seen[IM_KEEP_NAME])
		k.rule[k.n++] = IM_KEEP_NAME;
	*out = k;
	return 0;
}

void im_keep_format(const struct im_keep *k, char *buf, size_t len)
{
	size_t used = 0;

	if (len)
		buf[0] = '\0';
	for (unsigned i = 0; i < k->n && used < len; i++) {
		int w = snprintf(buf + used, len - used, "%s%s", i ? "," : "",
				 rule_names[k->rule[i]]);

		if (w < 0)
			break;
		used += (size_t)w;
	}
}

bool im_plan_protected(const char *path, const char *const *dirs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(dirs[i]);

		if (len == 0)
			return true;
		if (!strncmp(path, dirs[i], len) &&
		    (path[len] == '/' || path[len] == '\0'))
			return true;
	}
	return false;
}

/* ---- Planning -------------------------------------------------------------- */

void im_plan_init(struct im_plan *p)
{
	memset(p, 0, sizeof(*p));
}

void im_plan_release(struct im_plan *p)
{
	free(p->v);
	free(p->kept);
	im_plan_init(p);
}

struct rank_ctx {
	const struct im_plan_file *f;
	const struct im_keep *keep;
	const bool *prot;
	const size_t *plen;
};

static int cmp3(int64_t a, int64_t b)
{
	return (a > b) - (a < b);
}

static int cmp_files(uint32_t i, uint32_t j, const struct rank_ctx *c)
{
	for (unsigned r = 0; r < c->keep->n; r++) {
		int d = 0;

		switch (c->keep->rule[r]) {
		case IM_KEEP_PROTECT:
			d = (int)c->prot[j] - (int)c->prot[i];
			break;
		case IM_KEEP_OLDEST:
			d = cmp3(c->f[i].mtime_ns, c->f[j].mtime_ns);
			break;
		case IM_KEEP_NEWEST:
			d = cmp3(c->f[j].mtime_ns, c->f[i].mtime_ns);
			break;
		case IM_KEEP_SHORTEST:
			d = cmp3((int64_t)c->plen[i], (int64_t)c->plen[j]);
			break;
		case IM_KEEP_LONGEST:
			d = cmp3((int64_t)c->plen[j], (int64_t)c->plen[i]);
			break;
		case IM_KEEP_NAME:
			d = strcmp(c->f[i].path, c->f[j].path);
			break;
		}
		if (d)
			return d;
	}
	/* Paths are unique, so only a rule list without "name" gets here. */
	return strcmp(c->f[i].path, c->f[j].path);
}

static int cmp_order(const void *a, const void *b, void *arg)
{
	return cmp_files(*(const uint32_t *)a, *(const uint32_t *)b, arg);
}

static int cmp_entry(const void *a, const void *b, void *arg)
{
	const struct im_plan_entry *x = a, *y = b;
	const uint32_t *rank = arg;

	if (x->keeper != y->keeper)
		return rank[x->keeper] < rank[y->keeper] ? -1 : 1;
	return (rank[x->file] > rank[y->file]) -
	       (rank[x->file] < rank[y->file]);
}

/* Neighbours of each file over the links that count (CSR), and the files
 * of each exact class (im_plan_file.exact_class) in file order. */
struct adj {
	size_t *start;	    /* nfiles + 1 */
	uint32_t *link;	    /* link indices */
	uint32_t *by_class; /* files with a class, sorted by class */
	size_t nclassed;
};

static int cmp_class(const void *a, const void *b, void *arg)
{
	const struct im_plan_file *f = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	if (f[x].exact_class != f[y].exact_class)
		return f[x].exact_class < f[y].exact_class ? -1 : 1;
	return (x > y) - (x < y);
}

static int classes_build(const struct im_plan_file *files, size_t nfiles,
			 struct adj *a)
{
	a->by_class = malloc((nfiles ? nfiles : 1) * sizeof(*a->by_class));
	if (!a->by_class)
		return -ENOMEM;
	a->nclassed = 0;
	for (size_t i = 0; i < nfiles; i++)
		if (files[i].exact_class)
			a->by_class[a->nclassed++] = (uint32_t)i;
	qsort_r(a->by_class, a->nclassed, sizeof(*a->by_class), cmp_class,
		(void *)files);
	return 0;
}

/* The files of @p f's class: [*first, *end) of a->by_class. */
static void class_span(const struct im_plan_file *files, const struct adj *a,
		       uint32_t f, size_t *first, size_t *end)
{
	size_t lo = 0, hi = a->nclassed;
	uint32_t c = files[f].exact_class;

	*first = *end = 0;
	if (!c)
		return;
	while (lo < hi) { /* the first of the class */
		size_t mid = lo + (hi - lo) / 2;
		if (files[a->by_class[mid]].exact_class < c)
			lo = mid + 1;
		else
			hi = mid;
	}
	*first = *end = lo;
	while (*end < a->nclassed && files[a->by_class[*end]].exact_class == c)
		(*end)++;
}

static int adj_build(size_t nfiles, const struct im_plan_link *links,
		     size_t nlinks, bool near, struct adj *a)
{
	size_t *fill = NULL;
	int ret = -ENOMEM;

	a->start = calloc(nfiles + 1, sizeof(*a->start));
	a->link = malloc((nlinks ? 2 * nlinks : 1) * sizeof(*a->link));
	fill = calloc(nfiles + 1, sizeof(*fill));
	if (!a->start || !a->link || !fill)
		goto out;
	ret = -EINVAL;
	for (size_t l = 0; l < nlinks; l++) {
		if (links[l].a >= nfiles || links[l].b >= nfiles ||
		    links[l].a == links[l].b)
			goto out;
		if (!near && !links[l].exact)
			continue;
		a->start[links[l].a + 1]++;
		a->start[links[l].b + 1]++;
	}
	for (size_t i = 0; i < nfiles; i++)
		a->start[i + 1] += a->start[i];
	memcpy(fill, a->start, (nfiles + 1) * sizeof(*fill));
	for (size_t l = 0; l < nlinks; l++) {
		if (!near && !links[l].exact)
			continue;
		a->link[fill[links[l].a]++] = (uint32_t)l;
		a->link[fill[links[l].b]++] = (uint32_t)l;
	}
	ret = 0;
out:
	free(fill);
	return ret;
}

enum { FREE, KEEPER, PLANNED, SAME };

/* What keeper k's claims change. */
struct claim {
	const struct im_plan_file *files;
	uint8_t *state;
	uint32_t *entry_of;
	const bool *prot;
	bool *counted;
	struct im_plan *p;
	size_t *cap;
	size_t kept_cap;
};

/* Append @p e to @p *v (@p *n entries, room for @p *cap). */
static int entry_push(struct im_plan_entry **v, size_t *n, size_t *cap,
		      struct im_plan_entry e)
{
	if (*n == *cap) {
		size_t nc = *cap ? 2 * *cap : 64;
		struct im_plan_entry *nv = realloc(*v, nc * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		*v = nv;
		*cap = nc;
	}
	(*v)[(*n)++] = e;
	return 0;
}

/* Keeper @p k, linked to @p j, plans it if it is free. @return 0 or
 * -ENOMEM. */
static int claim(struct claim *c, uint32_t k, uint32_t j, float similarity,
		 bool exact)
{
	struct im_plan *p = c->p;
	struct im_plan_entry *pe;

	if (c->state[j] == PLANNED && p->v[c->entry_of[j]].keeper == k) {
		/* The same pair linked again. */
		pe = &p->v[c->entry_of[j]];
		pe->exact |= exact;
		if (similarity > pe->similarity)
			pe->similarity = similarity;
		return 0;
	}
	if (c->state[j] != FREE)
		return 0;
	if (c->prot[j]) {
		p->protected_kept += !c->counted[j];
		c->counted[j] = true;
		return 0;
	}
	if (c->files[j].ino && c->files[j].ino == c->files[k].ino &&
	    c->files[j].dev == c->files[k].dev) {
		c->state[j] = SAME;
		p->same_inode++;
		return 0;
	}
	if (!exact && c->files[j].numbers != c->files[k].numbers) {
		/* Noted once, beside the first keeper that left it; j stays
		 * free, to be kept or taken by a keeper with its figures. */
		if (c->counted[j])
			return 0;
		c->counted[j] = true;
		return entry_push(&p->kept, &p->nkept, &c->kept_cap,
				  (struct im_plan_entry){
					  .file = j,
					  .keeper = k,
					  .similarity = similarity,
				  });
	}
	c->state[j] = PLANNED;
	c->entry_of[j] = (uint32_t)p->n;
	return entry_push(&p->v, &p->n, c->cap,
			  (struct im_plan_entry){
				  .file = j,
				  .keeper = k,
				  .similarity = similarity,
				  .exact = exact,
			  });
}

/* Plan the files, asking @p links_of for each keeper's links (contract at
 * im_plan_build_lazy()). */
static int plan_walk(const struct im_plan_file *files, size_t nfiles,
		     im_plan_links_cb links_of, void *arg,
		     const struct im_plan_opts *o, struct im_plan *out)
{
	struct adj adj = {0};
	struct rank_ctx ctx = {.f = files, .keep = &o->keep};
	struct im_plan p;
	uint32_t *order = NULL, *rank = NULL, *entry_of = NULL;
	uint8_t *state = NULL;
	bool *prot = NULL, *counted = NULL;
	size_t *plen = NULL, cap = 0;
	int ret = -ENOMEM;

	im_plan_init(&p);
	im_plan_init(out);
	if (nfiles > UINT32_MAX)
		return -EINVAL;
	order = malloc((nfiles ? nfiles : 1) * sizeof(*order));
	rank = malloc((nfiles ? nfiles : 1) * sizeof(*rank));
	entry_of = malloc((nfiles ? nfiles : 1) * sizeof(*entry_of));
	state = calloc(nfiles ? nfiles : 1, sizeof(*state));
	prot = calloc(nfiles ? nfiles : 1, sizeof(*prot));
	counted = calloc(nfiles ? nfiles : 1, sizeof(*counted));
	plen = malloc((nfiles ? nfiles : 1) * sizeof(*plen));
	if (!order || !rank || !entry_of || !state || !prot || !counted ||
	    !plen)
		goto out;
	ret = classes_build(files, nfiles, &adj);
	if (ret)
		goto out;
	for (size_t i = 0; i < nfiles; i++) {
		order[i] = (uint32_t)i;
		plen[i] = strlen(files[i].path);
		prot[i] = im_plan_protected(files[i].path, o->protect,
					    o->nprotect);
	}
	ctx.prot = prot;
	ctx.plen = plen;
	qsort_r(order, nfiles, sizeof(*order), cmp_order, &ctx);
	for (size_t i = 0; i < nfiles; i++)
		rank[order[i]] = (uint32_t)i;

	struct claim cl = {files, state, entry_of, prot, counted, &p, &cap, 0};
	for (size_t oi = 0; oi < nfiles; oi++) {
		uint32_t k = order[oi];
		const struct im_plan_link *lv;
		size_t first, end, nl = 0;

		if (state[k] != FREE)
			continue;
		state[k] = KEEPER;
		ret = links_of(k, &lv, &nl, arg);
		for (size_t e = 0; !ret && e < nl; e++) {
			const struct im_plan_link *l = &lv[e];
			uint32_t j = l->a == k ? l->b : l->a;

			if ((l->a != k && l->b != k) || j >= nfiles || j == k)
				ret = -EINVAL;
			else if (o->near || l->exact)
				ret = claim(&cl, k, j, l->similarity, l->exact);
		}
		if (ret)
			goto out;
		ret = -ENOMEM;
		class_span(files, &adj, k, &first, &end);
		for (size_t e = first; e < end; e++)
			if (adj.by_class[e] != k &&
			    claim(&cl, k, adj.by_class[e], 1.0f, true))
				goto out;
	}
	for (size_t i = 0; i < p.n; i++) {
		struct im_plan_entry *pe = &p.v[i];

		if (pe->exact)
			pe->similarity = 1.0f;
		p.bytes += files[pe->file].size;
		if (pe->exact) {
			p.exact++;
			p.exact_bytes += files[pe->file].size;
		}
	}
	if (p.n > 1) /* p.v is NULL for an empty plan */
		qsort_r(p.v, p.n, sizeof(*p.v), cmp_entry, rank);
	for (size_t i = 0; i < p.n; i++)
		p.keepers += i == 0 || p.v[i].keeper != p.v[i - 1].keeper;
	/* A file left for its figures that a later keeper with the same
	 * took, or that is a hard link of one, was not kept. */
	size_t nk = 0;
	for (size_t i = 0; i < p.nkept; i++)
		if (state[p.kept[i].file] == KEEPER)
			p.kept[nk++] = p.kept[i];
	p.nkept = nk;
	if (p.nkept > 1)
		qsort_r(p.kept, p.nkept, sizeof(*p.kept), cmp_entry, rank);
	*out = p;
	im_plan_init(&p);
	ret = 0;
out:
	im_plan_release(&p);
	free(adj.by_class);
	free(order);
	free(rank);
	free(entry_of);
	free(state);
	free(prot);
	free(counted);
	free(plen);
	return ret;
}

/* im_plan_build()'s links, handed out keeper by keeper from the CSR. */
struct given {
	const struct im_plan_link *links;
	const struct adj *adj;
	struct im_plan_link *buf; /* room for the largest degree */
};

static int given_links(uint32_t k, const struct im_plan_link **links, size_t *n,
		       void *arg)
{
	struct given *g = arg;
	size_t first = g->adj->start[k], end = g->adj->start[k + 1];

	for (size_t e = first; e < end; e++)
		g->buf[e - first] = g->links[g->adj->link[e]];
	*links = g->buf;
	*n = end - first;
	return 0;
}

int im_plan_build(const struct im_plan_file *files, size_t nfiles,
		  const struct im_plan_link *links, size_t nlinks,
		  const struct im_plan_opts *o, struct im_plan *out)
{
	struct adj adj = {0};
	struct given g = {links, &adj, NULL};
	size_t most = 1;
	int ret;

	im_plan_init(out);
	if (nfiles > UINT32_MAX)
		return -EINVAL;
	ret = adj_build(nfiles, links, nlinks, o->near, &adj);
	if (ret)
		goto out;
	for (size_t i = 0; i < nfiles; i++)
		if (adj.start[i + 1] - adj.start[i] > most)
			most = adj.start[i + 1] - adj.start[i];
	ret = -ENOMEM;
	g.buf = malloc(most * sizeof(*g.buf));
	if (g.buf)
		ret = plan_walk(files, nfiles, given_links, &g, o, out);
out:
	free(adj.start);
	free(adj.link);
	free(g.buf);
	return ret;
}

int im_plan_build_lazy(const struct im_plan_file *files, size_t nfiles,
		       im_plan_links_cb links_of, void *arg,
		       const struct im_plan_opts *o, struct im_plan *out)
{
	return plan_walk(files, nfiles, links_of, arg, o, out);
}
