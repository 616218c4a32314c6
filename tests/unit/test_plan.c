/*
 * Removal plans: keep rules, protected directories and greedy keepers, checked
 * by hand on small graphs and against a literal reading of DESIGN §6 (per
 * cluster: pick a keeper, plan its direct links, repeat) on thousands of
 * random graphs.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "plan.h"
#include "sketch.h"

/* ---- Keep rules ------------------------------------------------------------ */

static const char *fmt_rules(const char *s)
{
	static char buf[128];
	struct im_keep k;
	char why[160];
	int ret = im_keep_parse(s, &k, why, sizeof(why));

	ck_assert_msg(ret == 0, "'%s' refused: %s", s, why);
	im_keep_format(&k, buf, sizeof(buf));
	return buf;
}

START_TEST(test_plan_keep_rules_parse)
{
	struct im_keep k;
	char why[160];

	ck_assert_str_eq(fmt_rules(IM_KEEP_DEFAULT),
			 "protect,oldest,shortest,name");
	ck_assert_str_eq(fmt_rules("newest"), "newest,name");
	ck_assert_str_eq(fmt_rules("longest,protect"), "longest,protect,name");
	ck_assert_str_eq(fmt_rules("name"), "name");

	static const char *const bad[] = {
		"",
		"oldest,",
		",oldest",
		"old",
		"oldest,oldest",
		"oldest,newest",
		"longest,shortest",
		"name,oldest",
		"protect ,name",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = '\0';
		ck_assert_msg(im_keep_parse(bad[i], &k, why, sizeof(why)) ==
				      -EINVAL,
			      "'%s' accepted", bad[i]);
		ck_assert_msg(why[0], "no reason given for '%s'", bad[i]);
	}
	ck_assert_int_eq(im_keep_parse("oldest,newest", &k, NULL, 0), -EINVAL);
}
END_TEST

START_TEST(test_plan_protected_at_component_boundary)
{
	const char *dirs[] = {"a/b", "keep"};
	const char *root[] = {""};

	ck_assert(im_plan_protected("a/b/c", dirs, 2));
	ck_assert(im_plan_protected("a/b/c/d.txt", dirs, 2));
	ck_assert(im_plan_protected("keep/x", dirs, 2));
	ck_assert(!im_plan_protected("a/bc", dirs, 2));
	/* A protected path that is a file protects itself. */
	ck_assert(im_plan_protected("a/b", dirs, 2));
	ck_assert(im_plan_protected("keep", dirs, 2));
	ck_assert(!im_plan_protected("kee", dirs, 2));
	ck_assert(!im_plan_protected("keeper/x", dirs, 2));
	ck_assert(!im_plan_protected("x/keep/y", dirs, 2));
	ck_assert(!im_plan_protected("a/b/c", dirs, 0));
	ck_assert(im_plan_protected("anything/at/all", root, 1));
}
END_TEST

/* ---- Small graphs ---------------------------------------------------------- */

static struct im_plan_opts opts(const char *rules, bool near)
{
	struct im_plan_opts o = {.near = near};

	ck_assert_int_eq(im_keep_parse(rules, &o.keep, NULL, 0), 0);
	return o;
}

/* "file<keeper file<keeper …" in plan order, '=' for exact, '~' for near. */
static const char *show(const struct im_plan_file *f, const struct im_plan *p)
{
	static char buf[1024];

	buf[0] = '\0';
	for (size_t i = 0; i < p->n; i++)
		snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf),
			 "%s%s%c%s", i ? " " : "", f[p->v[i].file].path,
			 p->v[i].exact ? '=' : '~', f[p->v[i].keeper].path);
	return buf;
}

#define L_EXACT(x, y)                                                          \
	{                                                                      \
		.a = (x), .b = (y), .similarity = 1.0f, .exact = true          \
	}
#define L_NEAR(x, y, s)                                                        \
	{                                                                      \
		.a = (x), .b = (y), .similarity = (s), .exact = false          \
	}

START_TEST(test_plan_exact_group_keeps_oldest)
{
	const struct im_plan_file f[] = {
		{.path = "b/copy", .size = 10, .mtime_ns = 300},
		{.path = "a/orig", .size = 10, .mtime_ns = 100},
		{.path = "c/copy2", .size = 10, .mtime_ns = 200},
		{.path = "alone", .size = 5, .mtime_ns = 1},
	};
	const struct im_plan_link l[] = {L_EXACT(0, 1), L_EXACT(1, 2),
					 L_EXACT(0, 2)};
	struct im_plan_opts o = opts(IM_KEEP_DEFAULT, false);
	struct im_plan p;

	ck_assert_int_eq(im_plan_build(f, 4, l, 3, &o, &p), 0);
	ck_assert_str_eq(show(f, &p), "c/copy2=a/orig b/copy=a/orig");
	ck_assert_uint_eq(p.keepers, 1);
	ck_assert_uint_eq(p.exact, 2);
	ck_assert_uint_eq(p.bytes, 20);
	ck_assert_uint_eq(p.exact_bytes, 20);
	im_plan_release(&p);

	o = opts("newest", false);
	ck_assert_int_eq(im_plan_build(f, 4, l, 3, &o, &p), 0);
	ck_assert_str_eq(show(f, &p), "c/copy2=b/copy a/orig=b/copy");
	im_plan_release(&p);
}
END_TEST

START_TEST(test_plan_never_through_a_chain)
{
	/* a ~ b ~ c, a and c not linked: only b goes, c stays. */
	const struct im_plan_file f[] = {
		{.path = "a", .mtime_ns = 1},
		{.path = "b", .mtime_ns = 2},
		{.path = "c", .mtime_ns = 3},
		{.path = "d", .mtime_ns = 4},
	};
	const struct im_plan_link l[] = {
		L_NEAR(0, 1, 0.95f), L_NEAR(1, 2, 0.93f), L_NEAR(2, 3, 0.91f)};
	struct im_plan_opts o = opts(IM_KEEP_DEFAULT, true);
	struct im_plan p;

	ck_assert_int_eq(im_plan_build(f, 4, l, 3, &o, &p), 0);
	/* a keeps b; c is the next keeper and keeps d. */
	ck_assert_str_eq(show(f, &p), "b~a d~c");
	ck_assert_uint_eq(p.keepers, 2);
	ck_assert_float_eq(p.v[0].similarity, 0.95f);
	ck_assert_float_eq(p.v[1].similarity, 0.91f);
	im_plan_release(&p);

	/* Without --near, near links plan nothing. */
	o = opts(IM_KEEP_DEFAULT, false);
	ck_assert_int_eq(im_plan_build(f, 4, l, 3, &o, &p), 0);
	ck_assert_uint_eq(p.n, 0);
	im_plan_release(&p);
}
END_TEST

START_TEST(test_plan_near_only_with_the_keepers_figures)
{
	/* January's payslip and February's, each with an edited copy: all
	 * near-duplicates of each other, two sets of figures. Each month
	 * keeps one; an exact copy goes whatever the figures say. */
	const struct im_plan_file f[] = {
		{.path = "jan", .mtime_ns = 1, .numbers = 11},
		{.path = "feb", .mtime_ns = 2, .numbers = 22},
		{.path = "jan-edited", .mtime_ns = 3, .numbers = 11},
		{.path = "feb-edited", .mtime_ns = 4, .numbers = 22},
		{.path = "mar", .mtime_ns = 5, .numbers = 33},
		{.path = "mar-copy", .mtime_ns = 6, .numbers = 44},
	};
	const struct im_plan_link l[] = {
		L_NEAR(0, 1, 1.0f),  L_NEAR(0, 2, 0.97f), L_NEAR(0, 3, 0.96f),
		L_NEAR(1, 2, 0.96f), L_NEAR(1, 3, 0.97f), L_NEAR(2, 3, 0.95f),
		L_NEAR(0, 4, 1.0f),  L_EXACT(4, 5)};
	struct im_plan_opts o = opts(IM_KEEP_DEFAULT, true);
	struct im_plan p;

	ck_assert_int_eq(im_plan_build(f, 6, l, 8, &o, &p), 0);
	ck_assert_str_eq(show(f, &p),
			 "jan-edited~jan feb-edited~feb mar-copy=mar");
	ck_assert_uint_eq(p.keepers, 3);
	/* feb and mar stay for their figures, beside jan; feb-edited was
	 * left by jan but taken by feb. */
	ck_assert_uint_eq(p.nkept, 2);
	ck_assert_str_eq(f[p.kept[0].file].path, "feb");
	ck_assert_str_eq(f[p.kept[0].keeper].path, "jan");
	ck_assert_str_eq(f[p.kept[1].file].path, "mar");
	ck_assert_str_eq(f[p.kept[1].keeper].path, "jan");
	im_plan_release(&p);
}
END_TEST

START_TEST(test_plan_protected_never_planned_and_wins)
{
	const struct im_plan_file f[] = {
		{.path = "old", .mtime_ns = 1},
		{.path = "safe/new", .mtime_ns = 9},
		{.path = "mid", .mtime_ns = 5},
	};
	const struct im_plan_link l[] = {L_EXACT(0, 1), L_EXACT(1, 2),
					 L_EXACT(0, 2)};
	const char *prot[] = {"safe"};
	struct im_plan_opts o = opts(IM_KEEP_DEFAULT, false);
	struct im_plan p;

	o.protect = prot;
	o.nprotect = 1;
	ck_assert_int_eq(im_plan_build(f, 3, l, 3, &o, &p), 0);
	ck_assert_str_eq(show(f, &p), "old=safe/new mid=safe/new");
	ck_assert_uint_eq(p.protected_kept, 0);
	im_plan_release(&p);

	/* Without the rule a protected file does not win, but is still never
	 * planned. */
	o.keep = opts("oldest", false).keep;
	ck_assert_int_eq(im_plan_build(f, 3, l, 3, &o, &p), 0);
	ck_assert_str_eq(show(f, &p), "mid=old");
	ck_assert_uint_eq(p.protected_kept, 1);
	im_plan_release(&p);
}
END_TEST

START_TEST(test_plan_hard_links_and_repeated_links)
{
	const struct im_plan_file f[] = {
		{.path = "a", .mtime_ns = 1, .dev = 1, .ino = 7},
		{.path = "b", .mtime_ns = 2, .dev = 1, .ino = 7},
		{.path = "c", .mtime_ns = 3, .dev = 2, .ino = 7},
	};
	/* a-c twice: once near, once exact: the entry is exact. */
	const struct im_plan_link l[] = {L_EXACT(0, 1), L_NEAR(0, 2, 0.92f),
					 L_EXACT(2, 0)};
	struct im_plan_opts o = opts(IM_KEEP_DEFAULT, true);
	struct im_plan p;

	ck_assert_int_eq(im_plan_build(f, 3, l, 3, &o, &p), 0);
	ck_assert_str_eq(show(f, &p), "c=a");
	ck_assert_float_eq(p.v[0].similarity, 1.0f);
	ck_assert_uint_eq(p.same_inode, 1);
	im_plan_release(&p);
}
END_TEST

START_TEST(test_plan_refuses_bad_links)
{
	const struct im_plan_file f[] = {{.path = "a"}, {.path = "b"}};
	const struct im_plan_link self[] = {L_EXACT(1, 1)};
	const struct im_plan_link range[] = {L_EXACT(0, 2)};
	struct im_plan_opts o = opts(IM_KEEP_DEFAULT, true);
	struct im_plan p;

	ck_assert_int_eq(im_plan_build(f, 2, self, 1, &o, &p), -EINVAL);
	ck_assert_uint_eq(p.n, 0);
	ck_assert_int_eq(im_plan_build(f, 2, range, 1, &o, &p), -EINVAL);
	ck_assert_int_eq(im_plan_build(f, 0, NULL, 0, &o, &p), 0);
	ck_assert_uint_eq(p.n, 0);
	im_plan_release(&p);
}
END_TEST

/* ---- Against a literal reading of DESIGN §6 ---------------------------------
 * The reference works cluster by cluster with an adjacency matrix: among the
 * members not yet decided, the best by the rules (compared field by field in
 * the plainest way) is the next keeper; its directly linked, undecided,
 * unprotected members are planned with it. Repeat until every member is
 * decided.
 */

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond))                                                   \
			ck_abort_msg(__VA_ARGS__);                             \
	} while (0)

#define MF 40

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

struct world {
	int n;
	struct im_plan_file f[MF];
	char path[MF][24];
	bool prot[MF];
	struct im_plan_link links[4 * MF * MF];
	size_t nlinks;
	const char *protect[3];
	size_t nprotect;
	struct im_plan_opts o;
	int hash[MF]; /* exact copies share one (>= 0) */
};

/* Is i better than j by the rules? */
static bool ref_better(const struct world *w, int i, int j)
{
	for (unsigned r = 0; r < w->o.keep.n; r++) {
		const struct im_plan_file *a = &w->f[i], *b = &w->f[j];
		size_t la = strlen(a->path), lb = strlen(b->path);

		switch (w->o.keep.rule[r]) {
		case IM_KEEP_PROTECT:
			if (w->prot[i] != w->prot[j])
				return w->prot[i];
			break;
		case IM_KEEP_OLDEST:
			if (a->mtime_ns != b->mtime_ns)
				return a->mtime_ns < b->mtime_ns;
			break;
		case IM_KEEP_NEWEST:
			if (a->mtime_ns != b->mtime_ns)
				return a->mtime_ns > b->mtime_ns;
			break;
		case IM_KEEP_SHORTEST:
			if (la != lb)
				return la < lb;
			break;
		case IM_KEEP_LONGEST:
			if (la != lb)
				return la > lb;
			break;
		case IM_KEEP_NAME: return strcmp(a->path, b->path) < 0;
		}
	}
	return false;
}

struct ref {
	int keeper[MF]; /* -1: not planned */
	bool exact[MF];
	float sim[MF];
	bool same[MF];
	bool prot_kept[MF]; /* protected, linked to a better keeper */
	int pos[MF];	    /* rank of each file, for the expected order */
	int figures[MF]; /* the first keeper that left it for its figures */
};

static void ref_plan(const struct world *w, struct ref *r)
{
	static bool any[MF][MF], ex[MF][MF];
	static float sim[MF][MF];
	int comp[MF];
	bool done[MF] = {false};

	memset(any, 0, sizeof(any));
	memset(ex, 0, sizeof(ex));
	memset(sim, 0, sizeof(sim));
	for (int i = 0; i < w->n; i++) {
		comp[i] = i;
		r->keeper[i] = -1;
		r->same[i] = false;
		r->prot_kept[i] = false;
		r->figures[i] = -1;
		r->pos[i] = 0;
		for (int j = 0; j < w->n; j++)
			r->pos[i] += j != i && ref_better(w, j, i);
	}
	for (size_t l = 0; l < w->nlinks; l++) {
		const struct im_plan_link *k = &w->links[l];

		if (!w->o.near && !k->exact)
			continue;
		any[k->a][k->b] = any[k->b][k->a] = true;
		ex[k->a][k->b] = ex[k->b][k->a] = ex[k->a][k->b] || k->exact;
		if (k->similarity > sim[k->a][k->b])
			sim[k->a][k->b] = sim[k->b][k->a] = k->similarity;
	}
	/* Clusters: components of every link, by repeated relabelling. */
	for (bool changed = true; changed;) {
		changed = false;
		for (size_t l = 0; l < w->nlinks; l++) {
			int a = w->links[l].a, b = w->links[l].b;
			int m = comp[a] < comp[b] ? comp[a] : comp[b];

			if (comp[a] != m || comp[b] != m) {
				comp[a] = comp[b] = m;
				changed = true;
			}
		}
	}
	for (int c = 0; c < w->n; c++) {
		for (;;) {
			int k = -1;

			for (int i = 0; i < w->n; i++)
				if (comp[i] == c && !done[i] &&
				    (k < 0 || ref_better(w, i, k)))
					k = i;
			if (k < 0)
				break;
			done[k] = true;
			for (int j = 0; j < w->n; j++) {
				if (comp[j] != c || done[j] || !any[k][j])
					continue;
				if (w->prot[j]) {
					r->prot_kept[j] = true;
					continue;
				}
				if (w->f[j].ino == w->f[k].ino &&
				    w->f[j].dev == w->f[k].dev) {
					done[j] = true;
					r->same[j] = true;
					continue;
				}
				if (!ex[k][j] &&
				    w->f[j].numbers != w->f[k].numbers) {
					if (r->figures[j] < 0)
						r->figures[j] = k;
					continue;
				}
				done[j] = true;
				r->keeper[j] = k;
				r->exact[j] = ex[k][j];
				r->sim[j] = ex[k][j] ? 1.0f : sim[k][j];
			}
		}
	}
}

static void random_world(struct world *w, uint64_t *s)
{
	static const char *const dirs[] = {"a", "a/b", "archive", "z", "keep"};
	static const char *const rules[] = {
		IM_KEEP_DEFAULT,   "oldest", "newest,longest",
		"shortest,newest", "name",   "longest,protect,oldest",
		"protect,newest"};
	int hashes = 1 + (int)(rnd(s) % 6);
	int *hash = w->hash;
	unsigned near_pct = (unsigned)(rnd(s) % 12);

	memset(w, 0, sizeof(*w));
	w->n = 1 + (int)(rnd(s) % MF);
	for (int i = 0; i < w->n; i++) {
		snprintf(w->path[i], sizeof(w->path[i]), "%s/%.*s%d",
			 dirs[rnd(s) % 5], (int)(rnd(s) % 4), "xxxx", i);
		w->f[i].path = w->path[i];
		w->f[i].size = rnd(s) % 1000;
		w->f[i].mtime_ns = (int64_t)(rnd(s) % 8); /* many ties */
		/* Distinct inodes, but a few hard links of file 0..2. */
		w->f[i].dev = 1;
		w->f[i].ino =
			rnd(s) % 10 == 0 ? 1 + rnd(s) % 3 : 100 + (unsigned)i;
		hash[i] = rnd(s) % 3 ? (int)(rnd(s) % (unsigned)hashes) : -1;
		/* Copies have their bytes' figures; a quarter of the rest
		 * other figures. */
		w->f[i].numbers = hash[i] >= 0	   ? (uint64_t)hash[i] % 2
				  : rnd(s) % 4 == 0 ? 7
						    : 0;
	}
	/* Exact copies link all-to-all (as the index does); near links are
	 * random, so chains and stars both occur. */
	for (int i = 0; i < w->n; i++)
		for (int j = i + 1; j < w->n; j++) {
			if (hash[i] >= 0 && hash[i] == hash[j])
				w->links[w->nlinks++] = (struct im_plan_link){
					(uint32_t)i, (uint32_t)j, 1.0f, true};
			if (rnd(s) % 100 < near_pct)
				w->links[w->nlinks++] = (struct im_plan_link){
					(uint32_t)j, (uint32_t)i,
					0.9f + (float)(rnd(s) % 100) / 1000,
					false};
		}
	w->nprotect = rnd(s) % 3;
	for (size_t i = 0; i < w->nprotect; i++)
		w->protect[i] = dirs[rnd(s) % 5];
	ck_assert_int_eq(im_keep_parse(rules[rnd(s) % 7], &w->o.keep, NULL, 0),
			 0);
	w->o.near = rnd(s) % 2;
	w->o.protect = w->protect;
	w->o.nprotect = w->nprotect;
	for (int i = 0; i < w->n; i++)
		w->prot[i] = false;
	for (int i = 0; i < w->n; i++)
		for (size_t d = 0; d < w->nprotect; d++) {
			size_t len = strlen(w->protect[d]);

			w->prot[i] |=
				!strncmp(w->path[i], w->protect[d], len) &&
				w->path[i][len] == '/';
		}
}

static void check_world(const struct world *w, int round)
{
	struct ref r;
	struct im_plan p;
	int planned = 0, same = 0, prot_kept = 0, figures = 0, seen[MF] = {0};

	ref_plan(w, &r);
	CHECK(im_plan_build(w->f, (size_t)w->n, w->links, w->nlinks, &w->o,
			    &p) == 0,
	      "round %d: build failed", round);
	for (int i = 0; i < w->n; i++) {
		planned += r.keeper[i] >= 0;
		same += r.same[i];
		prot_kept += r.prot_kept[i];
		figures += r.figures[i] >= 0 && r.keeper[i] < 0 && !r.same[i];
	}
	CHECK(p.nkept == (size_t)figures,
	      "round %d: %zu kept for their figures, want %d", round, p.nkept,
	      figures);
	for (size_t e = 0; e < p.nkept; e++) {
		int j = (int)p.kept[e].file;

		CHECK(r.figures[j] == (int)p.kept[e].keeper && r.keeper[j] < 0,
		      "round %d: %s kept for its figures beside %s", round,
		      w->path[j], w->path[p.kept[e].keeper]);
		CHECK(w->f[j].numbers != w->f[p.kept[e].keeper].numbers,
		      "round %d: %s kept with its keeper's figures", round,
		      w->path[j]);
	}
	CHECK(p.protected_kept == (size_t)prot_kept,
	      "round %d: %zu protected kept, want %d", round, p.protected_kept,
	      prot_kept);
	CHECK(p.n == (size_t)planned, "round %d: %zu planned, want %d", round,
	      p.n, planned);
	CHECK(p.same_inode == (size_t)same, "round %d: %zu same, want %d",
	      round, p.same_inode, same);
	for (size_t e = 0; e < p.n; e++) {
		const struct im_plan_entry *pe = &p.v[e];
		int j = (int)pe->file;

		CHECK(!seen[j]++, "round %d: %s planned twice", round,
		      w->path[j]);
		CHECK(r.keeper[j] == (int)pe->keeper,
		      "round %d: %s kept for %s, want %s", round,
		      w->path[pe->keeper], w->path[j],
		      r.keeper[j] < 0 ? "(not planned)" : w->path[r.keeper[j]]);
		CHECK(pe->exact == r.exact[j] && pe->similarity == r.sim[j],
		      "round %d: %s: kind or similarity differ", round,
		      w->path[j]);
		/* The properties a user relies on, whatever the reference. */
		CHECK(!w->prot[j], "round %d: protected %s planned", round,
		      w->path[j]);
		CHECK(r.keeper[pe->keeper] < 0,
		      "round %d: keeper %s is itself planned", round,
		      w->path[pe->keeper]);
		CHECK(w->o.near || pe->exact,
		      "round %d: near entry without near", round);
		CHECK(pe->exact || w->f[j].numbers == w->f[pe->keeper].numbers,
		      "round %d: %s planned with other figures", round,
		      w->path[j]);
		if (e) {
			const struct im_plan_entry *q = &p.v[e - 1];

			CHECK(r.pos[q->keeper] < r.pos[pe->keeper] ||
				      (q->keeper == pe->keeper &&
				       r.pos[q->file] < r.pos[pe->file]),
			      "round %d: entries out of order", round);
		}
	}
	im_plan_release(&p);
}

/* The same world with its exact copies given as classes instead of
 * all-to-all links (im_plan_file.exact_class) plans the same. */
static void check_classes(const struct world *w, int round)
{
	static struct world c;
	struct im_plan a, b;

	c = *w;
	c.nlinks = 0;
	for (size_t l = 0; l < w->nlinks; l++)
		if (!w->links[l].exact)
			c.links[c.nlinks++] = w->links[l];
	for (int i = 0; i < w->n; i++)
		c.f[i].exact_class = w->hash[i] >= 0 ? (uint32_t)w->hash[i] + 1 : 0;
	ck_assert_int_eq(im_plan_build(w->f, (size_t)w->n, w->links,
				       w->nlinks, &w->o, &a),
			 0);
	ck_assert_int_eq(im_plan_build(c.f, (size_t)c.n, c.links, c.nlinks,
				       &c.o, &b),
			 0);
	CHECK(a.n == b.n && a.same_inode == b.same_inode &&
		      a.protected_kept == b.protected_kept &&
		      a.nkept == b.nkept &&
		      a.keepers == b.keepers && a.exact == b.exact,
	      "round %d: classes plan %zu entries, links %zu", round, b.n, a.n);
	for (size_t e = 0; e < a.n; e++)
		CHECK(a.v[e].file == b.v[e].file &&
			      a.v[e].keeper == b.v[e].keeper &&
			      a.v[e].exact == b.v[e].exact &&
			      a.v[e].similarity == b.v[e].similarity,
		      "round %d: entry %zu differs with classes", round, e);
	im_plan_release(&a);
	im_plan_release(&b);
}

/* im_plan_build_lazy()'s questions, answered from a world's links in an
 * order of their own (reversed every other call): who was asked, how often. */
struct lazy {
	const struct world *w;
	struct im_plan_link v[4 * MF * MF];
	int asked[MF];
	unsigned calls;
};

static int lazy_links(uint32_t k, const struct im_plan_link **links, size_t *n,
		      void *arg)
{
	struct lazy *z = arg;
	size_t m = 0;

	z->asked[k]++;
	for (size_t l = 0; l < z->w->nlinks; l++)
		if (z->w->links[l].a == k || z->w->links[l].b == k)
			z->v[m++] = z->w->links[l];
	if (z->calls++ % 2)
		for (size_t i = 0; i < m / 2; i++) {
			struct im_plan_link t = z->v[i];

			z->v[i] = z->v[m - 1 - i];
			z->v[m - 1 - i] = t;
		}
	*links = z->v;
	*n = m;
	return 0;
}

/* Asked for each keeper's links only, once, in any order, the lazy build
 * plans what the build over every link plans. */
static void check_lazy(const struct world *w, int round)
{
	static struct lazy z;
	struct im_plan a, b;
	bool keeper[MF] = {0}, planned[MF] = {0};

	memset(&z, 0, sizeof(z));
	z.w = w;
	ck_assert_int_eq(im_plan_build(w->f, (size_t)w->n, w->links,
				       w->nlinks, &w->o, &a),
			 0);
	ck_assert_int_eq(im_plan_build_lazy(w->f, (size_t)w->n, lazy_links,
					    &z, &w->o, &b),
			 0);
	CHECK(a.n == b.n && a.same_inode == b.same_inode &&
		      a.protected_kept == b.protected_kept &&
		      a.nkept == b.nkept && a.keepers == b.keepers &&
		      a.exact == b.exact && a.bytes == b.bytes,
	      "round %d: lazy plans %zu entries, built %zu", round, b.n, a.n);
	for (size_t e = 0; e < a.n; e++) {
		CHECK(a.v[e].file == b.v[e].file &&
			      a.v[e].keeper == b.v[e].keeper &&
			      a.v[e].exact == b.v[e].exact &&
			      a.v[e].similarity == b.v[e].similarity,
		      "round %d: entry %zu differs when lazy", round, e);
		keeper[a.v[e].keeper] = true;
		planned[a.v[e].file] = true;
	}
	for (int i = 0; i < w->n; i++) {
		CHECK(z.asked[i] <= 1, "round %d: %s asked %d times", round,
		      w->path[i], z.asked[i]);
		CHECK(!planned[i] || !z.asked[i],
		      "round %d: planned %s was asked for its links", round,
		      w->path[i]);
		CHECK(!keeper[i] || z.asked[i],
		      "round %d: keeper %s was never asked", round, w->path[i]);
	}
	im_plan_release(&a);
	im_plan_release(&b);
}

START_TEST(test_plan_random_graphs_match_reference)
{
	static struct world w;
	uint64_t s = 0x9e3779b97f4a7c15ULL;
	size_t planned = 0, near = 0, same = 0, chained = 0, figures = 0;

	for (int round = 0; round < 4000; round++) {
		struct ref r;

		random_world(&w, &s);
		check_world(&w, round);
		check_classes(&w, round);
		check_lazy(&w, round);
		ref_plan(&w, &r);
		for (int i = 0; i < w.n; i++) {
			planned += r.keeper[i] >= 0;
			near += r.keeper[i] >= 0 && !r.exact[i];
			same += r.same[i];
			figures += r.figures[i] >= 0 && r.keeper[i] < 0;
			/* A member left standing although linked to a planned
			 * file: the chain case. */
			for (size_t l = 0; l < w.nlinks; l++)
				chained += r.keeper[i] < 0 && !w.prot[i] &&
					   (int)w.links[l].a == i &&
					   r.keeper[w.links[l].b] >= 0;
		}
	}
	/* The generator must exercise every branch, or the test proves
	 * little. */
	CHECK(planned > 10000 && near > 1000 && same > 50 && chained > 100 &&
		      figures > 100,
	      "random graphs too tame: %zu planned, %zu near, %zu same, %zu "
	      "chained, %zu kept for their figures",
	      planned, near, same, chained, figures);
}
END_TEST

/* A class of 200,000 copies is planned whole: one keeper, every other
 * copy planned exact, without a link per pair (which would need 320 GB). */
START_TEST(test_plan_large_exact_class)
{
	enum { N = 200000 };
	struct im_plan_file *f = calloc(N, sizeof(*f));
	char (*path)[16] = calloc(N, sizeof(*path));
	struct im_plan_opts o = {0};
	struct im_plan p;

	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(path);
	ck_assert_int_eq(im_keep_parse(IM_KEEP_DEFAULT, &o.keep, NULL, 0), 0);
	for (int i = 0; i < N; i++) {
		snprintf(path[i], sizeof(path[i]), "d/%07d", i);
		f[i] = (struct im_plan_file){.path = path[i],
					     .size = 100,
					     .mtime_ns = i,
					     .ino = 1000 + (uint64_t)i,
					     .dev = 1,
					     .exact_class = 7};
	}
	ck_assert_int_eq(im_plan_build(f, N, NULL, 0, &o, &p), 0);
	ck_assert_uint_eq(p.n, N - 1);
	ck_assert_uint_eq(p.exact, N - 1);
	ck_assert_uint_eq(p.keepers, 1);
	ck_assert_uint_eq(p.bytes, (uint64_t)100 * (N - 1));
	im_plan_release(&p);
	free(f);
	free(path);
}
END_TEST

/* ---- From the index ---------------------------------------------------------
 * im_plan_from_index() over a real index: exact copies, and texts of the same
 * terms (near-duplicates of similarity 1).
 */

/* A text of terms @p first .. @p first + 39, bytes hashed to @p exact (0:
 * not hashed). */
static void text_doc(struct im_doc_sigs *d, uint64_t first, uint8_t exact)
{
	uint64_t terms[40];

	memset(d, 0, sizeof(*d));
	d->status = IM_DOC_REJECTED; /* a text that signs no coordinate */
	d->ncoords = 1;
	d->unique_terms = 40;
	for (unsigned i = 0; i < 40; i++)
		terms[i] = first + i;
	im_sketch_from_hashes(terms, 40, 0, &d->sketch);
	if (exact) {
		memset(d->exact, exact, sizeof(d->exact));
		d->exact_valid = 1;
	}
}

/* Each path's mtime is its last character; "gone*" vanished since the
 * scan (or the user left it out): the driver says so. */
static int meta_of(const char *path, struct im_plan_file *f, void *arg)
{
	(void)arg;
	if (!strncmp(path, "gone", 4))
		return 1;
	f->size = 100;
	f->mtime_ns = path[strlen(path) - 1];
	return 0;
}

static const char *show_set(const struct im_plan_set *s)
{
	static char buf[256];

	buf[0] = '\0';
	for (size_t i = 0; i < s->plan.n; i++)
		snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf),
			 "%s%s%c%s", i ? " " : "",
			 s->files[s->plan.v[i].file].path,
			 s->plan.v[i].exact ? '=' : '~',
			 s->files[s->plan.v[i].keeper].path);
	return buf;
}

/* A document the driver leaves out (gone from the tree since the index saw
 * it) is neither planned nor a keeper, though the keep rules rank it
 * first: its copies stay with one that is there. */
START_TEST(test_plan_from_index_leaves_out_what_is_gone)
{
	struct im_plan_opts o = opts(IM_KEEP_DEFAULT, true);
	struct im_plan_set set = {0};
	struct im_index *idx;
	struct im_doc_sigs d;
	static const char *const copies[] = {"gone0", "copy1", "copy2"};
	static const char *const near[] = {"gone3", "near4", "near5"};

	ck_assert_int_eq(im_index_new(&idx), 0);
	text_doc(&d, 1, 0xaa);
	for (size_t i = 0; i < 3; i++)
		ck_assert_int_eq(im_index_put(idx, copies[i], &d), 0);
	for (size_t i = 0; i < 3; i++) {
		text_doc(&d, 1000, (uint8_t)(0xb0 + i)); /* the same terms */
		ck_assert_int_eq(im_index_put(idx, near[i], &d), 0);
	}
	ck_assert_uint_eq(im_index_cluster_count(idx), 2);
	ck_assert_int_eq(im_plan_from_index(idx, &o, meta_of, NULL, &set), 0);
	ck_assert_str_eq(show_set(&set), "copy2=copy1 near5~near4");
	ck_assert_uint_eq(set.nfiles, 4);
	im_plan_set_release(&set);
	im_index_free(idx);
}
END_TEST

/* Texts of the same terms whose bytes were never hashed are linked (near),
 * and are no exact copies: without near-duplicates nothing of them is
 * planned, whatever their hashes' unset bytes hold. */
START_TEST(test_plan_from_index_exact_needs_a_hash)
{
	struct im_plan_opts o = opts(IM_KEEP_DEFAULT, false);
	struct im_plan_set set = {0};
	struct im_index *idx;
	struct im_doc_sigs d;

	ck_assert_int_eq(im_index_new(&idx), 0);
	text_doc(&d, 1000, 0);
	ck_assert_int_eq(im_index_put(idx, "unhashed1", &d), 0);
	ck_assert_int_eq(im_index_put(idx, "unhashed2", &d), 0);
	ck_assert_uint_eq(im_index_cluster_count(idx), 1);
	ck_assert_int_eq(im_plan_from_index(idx, &o, meta_of, NULL, &set), 0);
	ck_assert_str_eq(show_set(&set), "");
	im_plan_set_release(&set);
	o.near = true;
	ck_assert_int_eq(im_plan_from_index(idx, &o, meta_of, NULL, &set), 0);
	ck_assert_str_eq(show_set(&set), "unhashed2~unhashed1");
	im_plan_set_release(&set);
	im_index_free(idx);
}
END_TEST

static Suite *plan_suite(void)
{
	Suite *s = suite_create("plan");
	TCase *tc = tcase_create("small");

	tcase_add_test(tc, test_plan_keep_rules_parse);
	tcase_add_test(tc, test_plan_protected_at_component_boundary);
	tcase_add_test(tc, test_plan_exact_group_keeps_oldest);
	tcase_add_test(tc, test_plan_never_through_a_chain);
	tcase_add_test(tc, test_plan_near_only_with_the_keepers_figures);
	tcase_add_test(tc, test_plan_protected_never_planned_and_wins);
	tcase_add_test(tc, test_plan_hard_links_and_repeated_links);
	tcase_add_test(tc, test_plan_refuses_bad_links);
	tcase_add_test(tc, test_plan_from_index_leaves_out_what_is_gone);
	tcase_add_test(tc, test_plan_from_index_exact_needs_a_hash);
	suite_add_tcase(s, tc);

	/* Long under valgrind and sanitizers: Check's 4 s would not do. */
	tc = tcase_create("random");
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_plan_random_graphs_match_reference);
	tcase_add_test(tc, test_plan_large_exact_class);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(plan_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
