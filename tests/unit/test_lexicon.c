/*
 * Unit tests for core/sign/lexicon.c: document frequencies, the nidf window, the
 * ranked secondary lexicon and the lexicon file (round trip and refusal of
 * every kind of damage).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "unit.h"
#include "lexicon.h"

/* ---- Fixtures ------------------------------------------------------------- */

static char tmpdir[64];

static void tmp_setup(void)
{
	strcpy(tmpdir, "/tmp/test_lexicon.XXXXXX");
	ck_assert_msg(mkdtemp(tmpdir) != NULL, "mkdtemp: %s", strerror(errno));
}

static void tmp_teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

static char *tmp_path(const char *name)
{
	static char path[128];
	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	return path;
}

/* A document from a space-separated list of words. */
static void add_doc(struct im_df *df, const char *words)
{
	struct im_terms u;
	const char *p = words;

	im_terms_init(&u);
	while (*p) {
		size_t n = strcspn(p, " ");
		if (n)
			ck_assert_int_eq(im_terms_add(&u, p, n), 0);
		p += n;
		p += strspn(p, " ");
	}
	ck_assert_int_eq(im_df_add(df, &u), 0);
	im_terms_release(&u);
}

/*
 * A collection of @p ndocs documents where word w[i] appears in the first
 * dfs[i] documents.
 */
static struct im_df *collection(size_t ndocs, const char *const *w,
				const unsigned *dfs, size_t nw)
{
	struct im_df *df;
	struct im_terms u;

	ck_assert_int_eq(im_df_new(&df), 0);
	im_terms_init(&u);
	for (size_t d = 0; d < ndocs; d++) {
		im_terms_clear(&u);
		for (size_t i = 0; i < nw; i++)
			if (d < dfs[i])
				ck_assert_int_eq(
					im_terms_add(&u, w[i], strlen(w[i])),
					0);
		ck_assert_int_eq(im_df_add(df, &u), 0);
	}
	im_terms_release(&u);
	return df;
}

static const struct im_lex_term *find(const struct im_lexicon *lex,
				      const char *s)
{
	return im_lexicon_find(lex, s, strlen(s), XXH3_64bits(s, strlen(s)));
}

static unsigned char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	ck_assert_msg(f != NULL, "open %s: %s", path, strerror(errno));
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	unsigned char *b = malloc((size_t)n + 1);
	ck_assert(b != NULL);
	ck_assert_int_eq(fread(b, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return b;
}

static void spill(const char *path, const unsigned char *b, size_t len)
{
	FILE *f = fopen(path, "wb");
	ck_assert_msg(f != NULL, "open %s: %s", path, strerror(errno));
	ck_assert_int_eq(fwrite(b, 1, len, f), len);
	ck_assert_int_eq(fclose(f), 0);
}

/*
 * The standard small lexicon: N = 100, window [0.2, 0.8], so df 3..39 is L,
 * df 1..2 is B, df >= 40 is dropped.
 */
static const char *const std_words[] = {
	"the",	 "and",	  "with",   "river", "bank",  "money",
	"house", "zebra", "quartz", "fjord", "alpha", "omega",
};
static const unsigned std_dfs[] = {100, 90, 40, 39, 20, 10, 3, 2, 2, 1, 1, 2};
#define NSTD (sizeof(std_words) / sizeof(std_words[0]))

static struct im_lexicon *std_lexicon(size_t cap)
{
	struct im_df *df = collection(100, std_words, std_dfs, NSTD);
	struct im_lexicon *lex;
	ck_assert_int_eq(im_lexicon_build(df, 0.2, 0.8, cap, &lex), 0);
	im_df_free(df);
	return lex;
}

/* ---- Document frequencies ------------------------------------------------ */

START_TEST(test_lexicon_df_counts)
{
	struct im_df *df;
	ck_assert_int_eq(im_df_new(&df), 0);
	add_doc(df, "apple banana cherry");
	add_doc(df, "apple apple apple banana");
	add_doc(df, "cherry durian");
	ck_assert_uint_eq(im_df_docs(df), 3);
	ck_assert_uint_eq(im_df_terms(df), 4);
	ck_assert_msg(im_df_count(df, "apple", 5) == 2,
		      "a term repeated in one document counts once");
	ck_assert_uint_eq(im_df_count(df, "banana", 6), 2);
	ck_assert_uint_eq(im_df_count(df, "cherry", 6), 2);
	ck_assert_uint_eq(im_df_count(df, "durian", 6), 1);
	ck_assert_uint_eq(im_df_count(df, "elder", 5), 0);
	ck_assert_uint_eq(im_df_count(df, "appl", 4), 0);
	im_df_free(df);
}
END_TEST

/*
 * Terms of up to 16 bytes are compared as masked 8-byte words (bytes.h):
 * prefixes of one string, 1 to 40 bytes, counted from a term set (each
 * followed by the next in its arena), by im_df_add_term() from inside a
 * longer string, and merged into another table, are each one term.
 */
START_TEST(test_lexicon_df_short_and_long_terms)
{
	static const char base[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOP";
	struct im_df *df, *all;
	struct im_terms u;
	uint32_t ids[40];

	ck_assert_int_eq(im_df_new(&df), 0);
	ck_assert_int_eq(im_df_new(&all), 0);
	im_terms_init(&u);
	for (size_t len = 1; len <= 40; len++)
		ck_assert_int_eq(im_terms_add(&u, base, len), 0);
	ck_assert_int_eq(im_df_add_ids(df, &u, ids), 0);
	for (size_t len = 1; len <= 40; len++) {
		ck_assert_uint_eq(ids[len - 1], len - 1);
		ck_assert_int_eq(im_df_add_term(df, base, len, 1), 0);
	}
	ck_assert_uint_eq(im_df_terms(df), 40);
	ck_assert_int_eq(im_df_add_ids(all, &u, NULL), 0);
	ck_assert_int_eq(im_df_merge(all, df), 0);
	ck_assert_uint_eq(im_df_terms(all), 40);
	for (size_t len = 1; len <= 40; len++) {
		ck_assert_msg(im_df_count(df, base, len) == 2,
			      "prefix of %zu bytes: df %llu, not 2", len,
			      (unsigned long long)im_df_count(df, base, len));
		ck_assert_uint_eq(im_df_count(all, base, len), 3);
	}
	im_terms_release(&u);
	im_df_free(df);
	im_df_free(all);
}
END_TEST

/* A document counted by the ids of its terms counts as counting its terms
 * again would; an id the table does not hold is refused, nothing counted. */
START_TEST(test_lexicon_df_add_known)
{
	struct im_df *df, *ref;
	struct im_terms u;
	uint32_t ids[3], bad[2] = {0, 3};
	static const char *const words[] = {"apple", "banana",
					    "a-term-longer-than-sixteen"};

	ck_assert_int_eq(im_df_new(&df), 0);
	ck_assert_int_eq(im_df_new(&ref), 0);
	im_terms_init(&u);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(im_terms_add(&u, words[i], strlen(words[i])),
				 0);
	ck_assert_int_eq(im_df_add_ids(df, &u, ids), 0);
	ck_assert_int_eq(im_df_add_known(df, ids, 3), 0);
	ck_assert_int_eq(im_df_add_known(df, ids + 1, 1), 0);
	ck_assert_int_eq(im_df_add_ids(ref, &u, NULL), 0);
	ck_assert_int_eq(im_df_add_ids(ref, &u, NULL), 0);
	ck_assert_int_eq(im_df_add_term(ref, words[1], strlen(words[1]), 1), 0);
	ck_assert_uint_eq(im_df_docs(df), 3);
	ck_assert_uint_eq(im_df_terms(df), 3);
	for (int i = 0; i < 3; i++)
		ck_assert_uint_eq(im_df_count(df, words[i], strlen(words[i])),
				  im_df_count(ref, words[i], strlen(words[i])));
	ck_assert_uint_eq(im_df_count(df, "banana", 6), 3);
	ck_assert_int_eq(im_df_add_known(df, bad, 2), -EINVAL);
	ck_assert_uint_eq(im_df_docs(df), 3);
	ck_assert_uint_eq(im_df_count(df, "apple", 5), 2);
	im_terms_release(&u);
	im_df_free(df);
	im_df_free(ref);
}
END_TEST

START_TEST(test_lexicon_df_many_terms)
{
	/* Enough terms to make the table grow several times. */
	struct im_df *df;
	struct im_terms u;
	char w[32];

	ck_assert_int_eq(im_df_new(&df), 0);
	im_terms_init(&u);
	for (int d = 0; d < 3; d++) {
		im_terms_clear(&u);
		for (int i = 0; i < 50000; i++) {
			if (d == 2 && i % 2)
				continue;
			int n = snprintf(w, sizeof(w), "term%dx", i);
			ck_assert_int_eq(im_terms_add(&u, w, (size_t)n), 0);
		}
		ck_assert_int_eq(im_df_add(df, &u), 0);
	}
	ck_assert_uint_eq(im_df_terms(df), 50000);
	ck_assert_uint_eq(im_df_count(df, "term0x", 6), 3);
	ck_assert_uint_eq(im_df_count(df, "term49999x", 10), 2);
	ck_assert_uint_eq(im_df_count(df, "term12344x", 10), 3);
	im_terms_release(&u);
	im_df_free(df);
}
END_TEST

START_TEST(test_lexicon_df_merge)
{
	struct im_df *a, *b, *all;
	static const char *docs[] = {
		"apple banana", "banana cherry", "cherry durian apple",
		"elder fig",	"fig apple",	 "grape",
	};
	ck_assert_int_eq(im_df_new(&a), 0);
	ck_assert_int_eq(im_df_new(&b), 0);
	ck_assert_int_eq(im_df_new(&all), 0);
	for (int i = 0; i < 6; i++) {
		add_doc(i < 3 ? a : b, docs[i]);
		add_doc(all, docs[5 - i]);
	}
	ck_assert_int_eq(im_df_merge(a, b), 0);
	ck_assert_uint_eq(im_df_docs(a), 6);
	ck_assert_uint_eq(im_df_terms(a), im_df_terms(all));
	static const char *w[] = {"apple", "banana", "cherry", "durian",
				  "elder", "fig",    "grape"};
	for (int i = 0; i < 7; i++)
		ck_assert_msg(im_df_count(a, w[i], strlen(w[i])) ==
				      im_df_count(all, w[i], strlen(w[i])),
			      "merged df of %s", w[i]);

	/* Same counts in any order: the lexicon files are byte-identical. */
	struct im_lexicon *la, *lb;
	ck_assert_int_eq(im_lexicon_build(a, 0.1, 0.5, 10, &la), 0);
	ck_assert_int_eq(im_lexicon_build(all, 0.1, 0.5, 10, &lb), 0);
	tmp_setup();
	char pa[128], pb[128];
	snprintf(pa, sizeof(pa), "%s", tmp_path("a.lex"));
	snprintf(pb, sizeof(pb), "%s", tmp_path("b.lex"));
	ck_assert_int_eq(im_lexicon_save(la, pa), 0);
	ck_assert_int_eq(im_lexicon_save(lb, pb), 0);
	size_t na, nb;
	unsigned char *ba = slurp(pa, &na), *bb = slurp(pb, &nb);
	ck_assert_msg(na == nb && memcmp(ba, bb, na) == 0,
		      "lexicon files differ with the order of documents");
	free(ba);
	free(bb);
	tmp_teardown();
	im_lexicon_free(la);
	im_lexicon_free(lb);
	im_df_free(a);
	im_df_free(b);
	im_df_free(all);
}
END_TEST

/* The terms of a struct im_df in id order (im_df_foreach()). */
struct term_list {
	char *s[64];
	uint64_t hash[64];
	size_t n;
};

static int list_term(const char *s, uint32_t len, uint64_t hash, uint32_t count,
		     void *arg)
{
	struct term_list *l = arg;

	(void)count;
	ck_assert_uint_lt(l->n, 64);
	l->s[l->n] = strndup(s, len);
	l->hash[l->n++] = hash;
	return 0;
}

static void list_free(struct term_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->s[i]);
}

/*
 * What a one-pass scan relies on instead of looking terms up again:
 * im_df_merge_ids() says the id in dst of each src term (terms shared,
 * new, longer than 16 bytes), and im_lexicon_build_numbered() the term
 * number of each id, or IM_LEX_NO_TERM where the lookup finds nothing (in
 * L, in B, past B's cap, outside the window).
 */
START_TEST(test_lexicon_merge_ids_and_numbers)
{
	static const char *docs[] = {
		"apple banana cherry",
		"banana cherry durian",
		"cherry durian elderberry",
		"apple fig grape a-rather-long-term-of-many-bytes",
		"fig grape honeydew kiwi",
		"grape kiwi lemon mango a-rather-long-term-of-many-bytes",
		"mango nectarine olive",
		"olive papaya quince raspberry strawberry",
	};
	struct im_df *a, *b;
	struct term_list la = {.n = 0}, lb = {.n = 0};
	uint32_t ids[64], numbers[64];
	struct im_lexicon *lex;
	size_t in = 0, out = 0;

	ck_assert_int_eq(im_df_new(&a), 0);
	ck_assert_int_eq(im_df_new(&b), 0);
	for (int i = 0; i < 8; i++)
		add_doc(i < 4 ? a : b, docs[i]);
	im_df_foreach(b, list_term, &lb);
	ck_assert_int_eq(im_df_merge_ids(a, b, ids), 0);
	im_df_foreach(a, list_term, &la);
	ck_assert_uint_eq(la.n, im_df_terms(a));
	for (size_t i = 0; i < lb.n; i++) {
		ck_assert_uint_lt(ids[i], la.n);
		ck_assert_str_eq(la.s[ids[i]], lb.s[i]);
	}
	/* A window that leaves terms out on both sides, and B capped. */
	ck_assert_int_eq(
		im_lexicon_build_numbered(a, 0.3, 0.7, 3, &lex, numbers), 0);
	for (size_t i = 0; i < la.n; i++) {
		long want = im_lexicon_lookup(lex, la.s[i], strlen(la.s[i]),
					      la.hash[i], NULL);

		ck_assert_msg(want < 0 ? numbers[i] == IM_LEX_NO_TERM
				       : numbers[i] == (uint32_t)want,
			      "%s: number %u, lookup %ld", la.s[i], numbers[i],
			      want);
		in += want >= 0;
		out += want < 0;
	}
	ck_assert(im_lexicon_primary_size(lex) &&
		  im_lexicon_secondary_size(lex));
	ck_assert(in && out);
	im_lexicon_free(lex);
	list_free(&la);
	list_free(&lb);
	im_df_free(a);
	im_df_free(b);
}
END_TEST

/*
 * Same length, same XXH3_64bits >> 32 (found by search, checked below): the
 * table tells such terms apart by their bytes only. Short ones (up to 16
 * bytes) are compared by their key, longer ones in the arena.
 */
static const char *const tag_twins[][2] = {
	{"coaaayfn", "coabdygz"},
	{"coaalpfv", "coabhfuz"},
	{"coaaaaaaaaaafdow", "coaaaaaaaaaantrx"},
	{"coaaaaaaaaaabfbsw", "coaaaaaaaaaabhnxh"},
	{"coaaaaaaaaaaaaaaaaaamcjz", "coaaaaaaaaaaaaaaaaaaubyc"},
};
#define NTWINS (sizeof(tag_twins) / sizeof(tag_twins[0]))

static uint32_t tag_of(const char *s)
{
	return (uint32_t)(XXH3_64bits(s, strlen(s)) >> 32);
}

START_TEST(test_lexicon_df_tag_collisions)
{
	struct im_df *df, *copy;
	struct im_terms u;
	uint32_t ids[2];

	ck_assert_int_eq(im_df_new(&df), 0);
	ck_assert_int_eq(im_df_new(&copy), 0);
	im_terms_init(&u);
	for (size_t i = 0; i < NTWINS; i++) {
		const char *a = tag_twins[i][0], *b = tag_twins[i][1];
		size_t len = strlen(a);

		ck_assert_msg(strlen(b) == len && tag_of(a) == tag_of(b) &&
				      strcmp(a, b) != 0,
			      "%s and %s are not tag twins", a, b);
		im_terms_clear(&u);
		ck_assert_int_eq(im_terms_add(&u, a, len), 0);
		ck_assert_int_eq(im_df_add_ids(df, &u, ids), 0);
		ck_assert_uint_eq(ids[0], 2 * i);
		ck_assert_msg(im_df_count(df, b, len) == 0,
			      "%s counted as its tag twin %s", b, a);
		im_terms_clear(&u);
		ck_assert_int_eq(im_terms_add(&u, b, len), 0);
		ck_assert_int_eq(im_terms_add(&u, a, len), 0);
		ck_assert_int_eq(im_df_add_ids(df, &u, ids), 0);
		ck_assert_msg(ids[0] == 2 * i + 1 && ids[1] == 2 * i,
			      "twins %s %s: ids %u %u", b, a, ids[0], ids[1]);
		ck_assert_int_eq(im_df_add_term(df, b, len, 5), 0);
		ck_assert_uint_eq(im_df_count(df, a, len), 2);
		ck_assert_uint_eq(im_df_count(df, b, len), 6);
	}
	ck_assert_uint_eq(im_df_terms(df), 2 * NTWINS);
	ck_assert_int_eq(im_df_merge(copy, df), 0);
	ck_assert_int_eq(im_df_merge(copy, df), 0);
	for (size_t i = 0; i < NTWINS; i++) {
		size_t len = strlen(tag_twins[i][0]);

		ck_assert_uint_eq(im_df_count(copy, tag_twins[i][0], len), 4);
		ck_assert_uint_eq(im_df_count(copy, tag_twins[i][1], len), 12);
	}
	ck_assert_uint_eq(im_df_terms(copy), 2 * NTWINS);
	im_terms_release(&u);
	im_df_free(df);
	im_df_free(copy);
}
END_TEST

/*
 * A reference for struct im_df over a pool of distinct terms: id[p] is the
 * id of pool term p (-1 while unseen), df[p] its count, order[id] the pool
 * term of an id.
 */
#define MODEL_POOL 3000

struct df_model {
	char term[MODEL_POOL][48];
	size_t len[MODEL_POOL];
	long id[MODEL_POOL];
	uint32_t df[MODEL_POOL];
	size_t order[MODEL_POOL];
	size_t n;
	uint64_t docs;
};

static uint64_t model_rng = 0x9e3779b97f4a7c15ull;

static size_t model_rnd(size_t n)
{
	model_rng ^= model_rng << 13;
	model_rng ^= model_rng >> 7;
	model_rng ^= model_rng << 17;
	return (size_t)(model_rng % n);
}

/*
 * Distinct terms over a four-letter alphabet (so that many share prefixes),
 * 1 to 40 bytes, most of 4 to 16, and the tag twins.
 */
static void model_pool(struct df_model *m)
{
	size_t k = 0;

	memset(m, 0, sizeof(*m));
	for (size_t i = 0; i < NTWINS; i++)
		for (int j = 0; j < 2; j++, k++) {
			m->len[k] = strlen(tag_twins[i][j]);
			memcpy(m->term[k], tag_twins[i][j], m->len[k]);
		}
	while (k < MODEL_POOL) {
		size_t len =
			model_rnd(4) ? 4 + model_rnd(13) : 1 + model_rnd(40);
		bool seen = false;

		for (size_t i = 0; i < len; i++)
			m->term[k][i] = (char)('a' + model_rnd(4));
		for (size_t i = 0; i < k && !seen; i++)
			seen = m->len[i] == len &&
			       !memcmp(m->term[i], m->term[k], len);
		if (!seen)
			m->len[k++] = len;
	}
	for (size_t p = 0; p < MODEL_POOL; p++)
		m->id[p] = -1;
}

/* Count @p count more of pool term @p p; @return its id. */
static uint32_t model_count(struct df_model *m, size_t p, uint32_t count)
{
	if (m->id[p] < 0) {
		m->id[p] = (long)m->n;
		m->order[m->n++] = p;
	}
	m->df[p] += count;
	return (uint32_t)m->id[p];
}

struct model_walk {
	const struct df_model *m;
	size_t i;
	int step;
};

static int model_term(const char *s, uint32_t len, uint64_t hash,
		      uint32_t count, void *arg)
{
	struct model_walk *w = arg;
	const struct df_model *m = w->m;

	ck_assert_msg(w->i < m->n, "step %d: foreach past %zu terms", w->step,
		      m->n);
	size_t p = m->order[w->i++];
	ck_assert_msg(len == m->len[p] && !memcmp(s, m->term[p], len),
		      "step %d: id %zu is \"%.*s\", want \"%.*s\"", w->step,
		      w->i - 1, (int)len, s, (int)m->len[p], m->term[p]);
	ck_assert_msg(hash == XXH3_64bits(s, len) && count == m->df[p],
		      "step %d: \"%.*s\" has df %u, want %u", w->step, (int)len,
		      s, count, m->df[p]);
	return 0;
}

static void model_check(const struct im_df *df, const struct df_model *m,
			int step)
{
	struct model_walk w = {m, 0, step};

	ck_assert_msg(im_df_terms(df) == m->n && im_df_docs(df) == m->docs,
		      "step %d: %zu terms in %llu docs, want %zu in %llu", step,
		      im_df_terms(df), (unsigned long long)im_df_docs(df), m->n,
		      (unsigned long long)m->docs);
	for (size_t p = 0; p < MODEL_POOL; p++)
		ck_assert_msg(im_df_count(df, m->term[p], m->len[p]) ==
				      m->df[p],
			      "step %d: df of \"%.*s\" is %llu, want %u", step,
			      (int)m->len[p], m->term[p],
			      (unsigned long long)im_df_count(df, m->term[p],
							      m->len[p]),
			      m->df[p]);
	ck_assert_int_eq(im_df_foreach(df, model_term, &w), 0);
	ck_assert_uint_eq(w.i, m->n);
}

/*
 * One random document (its first term set large enough to grow the table
 * while it is being counted) or one im_df_add_term().
 */
static void model_step(struct im_df *df, struct df_model *m, struct im_terms *u,
		       int step)
{
	static uint32_t ids[MODEL_POOL];
	static size_t picked[MODEL_POOL];
	static bool in_doc[MODEL_POOL];
	size_t k = step == 0 ? 1200 : 1 + model_rnd(step % 7 ? 40 : 500);

	if (step && model_rnd(6) == 0) {
		size_t p = model_rnd(MODEL_POOL);
		uint32_t count = 1 + (uint32_t)model_rnd(5);

		ck_assert_int_eq(
			im_df_add_term(df, m->term[p], m->len[p], count), 0);
		model_count(m, p, count);
		return;
	}
	im_terms_clear(u);
	memset(in_doc, 0, sizeof(in_doc));
	for (size_t i = 0, n = 0; i < k; i++) {
		size_t p = model_rnd(MODEL_POOL);

		ck_assert_int_eq(im_terms_add(u, m->term[p], m->len[p]), 0);
		if (!in_doc[p]) {
			in_doc[p] = true;
			picked[n++] = p;
		}
	}
	ck_assert_int_eq(im_df_add_ids(df, u, ids), 0);
	for (size_t i = 0; i < u->n; i++) {
		uint32_t want = model_count(m, picked[i], 1);

		ck_assert_msg(ids[i] == want,
			      "step %d: term %zu (\"%.*s\") has id %u, want %u",
			      step, i, (int)m->len[picked[i]],
			      m->term[picked[i]], ids[i], want);
	}
	m->docs++;
}

/*
 * Random documents and terms, checked against the model: ids in the order
 * terms were first seen, across every rehash; counts, im_df_count() and
 * im_df_foreach() of short terms, long terms and tag twins; then merges.
 */
START_TEST(test_lexicon_df_model)
{
	static struct df_model m, other, both;
	struct im_df *df, *b, *empty;
	struct im_terms u;

	model_pool(&m);
	other = m;
	im_terms_init(&u);
	ck_assert_int_eq(im_df_new(&df), 0);
	ck_assert_int_eq(im_df_new(&b), 0);
	ck_assert_int_eq(im_df_new(&empty), 0);
	for (int step = 0; step < 150; step++) {
		model_step(df, &m, &u, step);
		if (step % 10 == 0 || step < 3)
			model_check(df, &m, step);
	}
	model_check(df, &m, 150);
	for (int step = 0; step < 60; step++)
		model_step(b, &other, &u, step + 1);
	model_check(b, &other, 1000);

	/* Merging: @p df keeps its ids, terms new to it follow in b's order. */
	both = m;
	for (size_t i = 0; i < other.n; i++) {
		size_t p = other.order[i];

		model_count(&both, p, other.df[p]);
	}
	both.docs += other.docs;
	ck_assert_int_eq(im_df_merge(df, b), 0);
	model_check(df, &both, 2000);
	model_check(b, &other, 2001);
	ck_assert_int_eq(im_df_merge(empty, b), 0);
	model_check(empty, &other, 2002);

	im_terms_release(&u);
	im_df_free(df);
	im_df_free(b);
	im_df_free(empty);
}
END_TEST

/* ---- Building ------------------------------------------------------------ */

/*
 * A term counted in no document (im_df_add_term() with a count of 0, as a
 * stage's run may say) has an nidf above every window: like the rarest
 * terms it is in B, last in rank, whether the lexicon is built from a copy
 * of the counts or in the df's own memory (as a first scan builds).
 */
START_TEST(test_lexicon_zero_count_in_b)
{
	struct im_df *df = collection(100, std_words, std_dfs, NSTD);
	const struct im_lex_term *t;
	struct im_lexicon *lex;
	uint32_t nums[NSTD + 1];

	ck_assert_int_eq(im_df_add_term(df, "never", 5, 0), 0);
	ck_assert_uint_eq(im_df_terms(df), NSTD + 1);
	for (int from = 0; from < 2; from++) {
		ck_assert_int_eq(from ? im_lexicon_build_from(df, 0.2, 0.8,
							      100, &lex, nums)
				      : im_lexicon_build(df, 0.2, 0.8, 100,
							 &lex),
				 0);
		t = find(lex, "never");
		ck_assert_msg(t && t->kind == IM_LEX_SECONDARY,
			      "built %s: a term of df 0 is in B",
			      from ? "in the df" : "from a copy");
		ck_assert_uint_eq(t->rank, im_lexicon_secondary_size(lex) - 1);
		im_lexicon_free(lex);
	}
	im_df_free(df);
}
END_TEST

START_TEST(test_lexicon_window)
{
	struct im_lexicon *lex = std_lexicon(100);

	ck_assert_uint_eq(im_lexicon_docs(lex), 100);
	ck_assert_uint_eq(im_lexicon_primary_size(lex), 4);
	ck_assert_uint_eq(im_lexicon_secondary_size(lex), 5);
	static const char *primary[] = {"river", "bank", "money", "house"};
	for (int i = 0; i < 4; i++) {
		const struct im_lex_term *t = find(lex, primary[i]);
		ck_assert_msg(t && t->kind == IM_LEX_PRIMARY,
			      "%s (df in 3..39) is in L", primary[i]);
		ck_assert_str_eq(t->str, primary[i]);
		ck_assert_uint_eq(t->rank, 0);
	}
	ck_assert_msg(find(lex, "the") == NULL, "df 100 (nidf 0) is dropped");
	ck_assert_msg(find(lex, "and") == NULL, "df 90 is dropped");
	ck_assert_msg(find(lex, "with") == NULL,
		      "df 40 (nidf 0.199) is just below the window");
	const struct im_lex_term *t = find(lex, "house");
	ck_assert(fabsf(t->nidf - (float)(log(100.0 / 3) / log(100))) < 1e-6);
	double lo, hi;
	im_lexicon_window(lex, &lo, &hi);
	ck_assert(lo == 0.2 && hi == 0.8);
	im_lexicon_free(lex);
}
END_TEST

START_TEST(test_lexicon_window_exact_boundaries)
{
	/* N = 10000: df 1000 has nidf 0.25 and df 10 has nidf 0.75, exactly. */
	static const char *w[] = {"lowedge", "below", "middle", "highedge",
				  "above"};
	static const unsigned dfs[] = {1000, 1001, 100, 10, 9};
	struct im_df *df = collection(10000, w, dfs, 5);
	struct im_lexicon *lex;

	ck_assert_int_eq(im_lexicon_build(df, 0.25, 0.75, 10, &lex), 0);
	ck_assert_msg(find(lex, "lowedge") &&
			      find(lex, "lowedge")->kind == IM_LEX_PRIMARY,
		      "a term with nidf exactly lo is in L");
	ck_assert_msg(find(lex, "highedge") &&
			      find(lex, "highedge")->kind == IM_LEX_PRIMARY,
		      "a term with nidf exactly hi is in L");
	ck_assert_msg(find(lex, "middle")->kind == IM_LEX_PRIMARY, "middle");
	ck_assert_msg(find(lex, "below") == NULL,
		      "nidf just under lo is dropped");
	ck_assert_msg(find(lex, "above") &&
			      find(lex, "above")->kind == IM_LEX_SECONDARY,
		      "nidf just over hi is in B");
	im_lexicon_free(lex);

	/* A window of one point still holds the terms on it. */
	ck_assert_int_eq(im_lexicon_build(df, 0.5, 0.5, 10, &lex), 0);
	ck_assert_uint_eq(im_lexicon_primary_size(lex), 1);
	ck_assert_msg(find(lex, "middle")->kind == IM_LEX_PRIMARY,
		      "df 100 of 10000 has nidf 0.5");
	im_lexicon_free(lex);
	im_df_free(df);
}
END_TEST

/* memcmp() order, a prefix first. */
static int term_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	int c = memcmp(a, b, alen < blen ? alen : blen);

	return c ? c : (alen > blen) - (alen < blen);
}

/*
 * L and B are sorted by a radix sort on each term's first 8 bytes and df,
 * then by the bytes where those tie (lexicon.c, sort_picks()): terms that
 * share their first 8 bytes, are prefixes of one another or are shorter
 * than 8 bytes, or hold bytes above 0x7f, with many equal dfs and dfs
 * past one byte, come out in byte order in L and in rank order (df down,
 * then bytes) in B.
 */
START_TEST(test_lexicon_sort_shared_prefixes)
{
	enum { NW = 400, NDOCS = 700, NSTEMS = 8 };
	static const char *const stems[NSTEMS] = {
		"abcdefgh",	     "abcdefg",	 "abc",
		"abcdefghij",	     "abcdefgi", "zz",
		"\xc3\xa9t\xc3\xa9", "z\xc3\xbc"};
	static char words[NW][24];
	const char *w[NW];
	unsigned dfs[NW];
	unsigned long long x = 0x2545f4914f6cdd1dull; /* fixed seed */
	struct im_lexicon *lex;
	struct im_df *df;

	/* Stems end where a hex digit cannot continue another stem: unique. */
	for (unsigned i = 0; i < NW; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		snprintf(words[i], sizeof(words[i]), "%s%x", stems[x % NSTEMS],
			 i);
		w[i] = words[i];
		/* Ties on small dfs, and dfs on both sides of 255 and 256. */
		dfs[i] = x % 3 ? 1 + (unsigned)(x >> 20) % 5
			       : 250 + (unsigned)(x >> 20) % 300;
	}
	df = collection(NDOCS, w, dfs, NW);
	ck_assert_uint_eq(im_df_terms(df), NW);

	ck_assert_int_eq(im_lexicon_build(df, 0, 1, 0, &lex), 0);
	ck_assert_uint_eq(im_lexicon_primary_size(lex), NW);
	for (size_t i = 0; i + 1 < NW; i++) {
		const struct im_lex_term *a = im_lexicon_term(lex, i);
		const struct im_lex_term *b = im_lexicon_term(lex, i + 1);

		ck_assert_msg(term_cmp(a->str, a->len, b->str, b->len) < 0,
			      "L: %s before %s", a->str, b->str);
	}
	im_lexicon_free(lex);

	ck_assert_int_eq(im_lexicon_build(df, 0, 0, NW, &lex), 0);
	ck_assert_uint_eq(im_lexicon_secondary_size(lex), NW);
	for (size_t i = 0; i + 1 < NW; i++) {
		const struct im_lex_term *a = im_lexicon_term(lex, i);
		const struct im_lex_term *b = im_lexicon_term(lex, i + 1);
		uint64_t da = im_df_count(df, a->str, a->len);
		uint64_t db = im_df_count(df, b->str, b->len);

		ck_assert_msg(
			da > db || (da == db && term_cmp(a->str, a->len, b->str,
							 b->len) < 0),
			"B: %s (df %llu) before %s (df %llu)", a->str,
			(unsigned long long)da, b->str, (unsigned long long)db);
	}
	im_lexicon_free(lex);

	/* L and B both: byte order across them, as the build tells it. */
	ck_assert_int_eq(im_lexicon_build(df, 0, 0.3, NW, &lex), 0);
	const uint32_t *bo = im_lexicon_byte_order(lex);
	size_t n = im_lexicon_primary_size(lex) +
		   im_lexicon_secondary_size(lex);
	ck_assert_uint_eq(n, NW);
	ck_assert(im_lexicon_primary_size(lex) > 0 &&
		  im_lexicon_secondary_size(lex) > 0);
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < n; j++) {
			const struct im_lex_term *a = im_lexicon_term(lex, i);
			const struct im_lex_term *b = im_lexicon_term(lex, j);
			int c = term_cmp(a->str, a->len, b->str, b->len);

			ck_assert_msg((bo[i] < bo[j]) == (c < 0) &&
					      (bo[i] == bo[j]) == (c == 0),
				      "%s at %u, %s at %u", a->str, bo[i],
				      b->str, bo[j]);
		}
	im_lexicon_free(lex);
	im_df_free(df);
}
END_TEST

/* The bytes im_lexicon_save() writes for @p lex; caller frees. */
static unsigned char *saved_bytes(const struct im_lexicon *lex, size_t *len)
{
	unsigned char *b;

	ck_assert_int_eq(im_lexicon_save(lex, tmp_path("saved.lex")), 0);
	b = slurp(tmp_path("saved.lex"), len);
	unlink(tmp_path("saved.lex"));
	return b;
}

/*
 * im_lexicon_build_from() works in the df's own slots: it builds the very
 * lexicon im_lexicon_build_numbered() builds from the same counts (the
 * same file, byte order and term numbers), for a collection of terms short
 * and long (longer than 16 bytes their slot holds no bytes), sharing
 * prefixes, with a window that leaves terms out on both sides and B
 * capped, and for one in which every term is kept.
 */
START_TEST(test_lexicon_build_from_same_as_numbered)
{
	enum { NW = 3000, NDOCS = 400 };
	static char words[NW][40];
	static const double windows[][2] = {{0.3, 0.7}, {0, 1}, {0.5, 0.5}};
	static const size_t caps[] = {100, NW, 0};
	const char *w[NW];
	unsigned dfs[NW];
	unsigned long long x = 0x9e3779b97f4a7c15ull; /* fixed seed */

	for (unsigned i = 0; i < NW; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		snprintf(words[i], sizeof(words[i]), "%s%x",
			 x % 4 == 0   ? "a-term-longer-than-sixteen-bytes-"
			 : x % 4 == 1 ? "abcdefgh"
				      : "",
			 i);
		w[i] = words[i];
		dfs[i] = 1 + (unsigned)(x >> 24) % NDOCS;
	}
	tmp_setup();
	for (size_t k = 0; k < sizeof(caps) / sizeof(caps[0]); k++) {
		struct im_df *a = collection(NDOCS, w, dfs, NW);
		struct im_df *b = collection(NDOCS, w, dfs, NW);
		size_t n = im_df_terms(a), la, lb, nl;
		uint32_t *na = malloc(n * sizeof(*na));
		uint32_t *nb = malloc(n * sizeof(*nb));
		struct im_lexicon *lexa, *lexb;
		unsigned char *ba, *bb;

		ck_assert(na && nb);
		ck_assert_int_eq(im_lexicon_build_numbered(
					 a, windows[k][0], windows[k][1],
					 caps[k], &lexa, na),
				 0);
		ba = saved_bytes(lexa, &la);
		/* Without numbers asked for, the same lexicon. */
		ck_assert_int_eq(im_lexicon_build_from(b, windows[k][0],
						       windows[k][1], caps[k],
						       &lexb, NULL),
				 0);
		bb = saved_bytes(lexb, &lb);
		ck_assert_msg(la == lb && !memcmp(ba, bb, la),
			      "window %zu: the files differ without numbers",
			      k);
		free(bb);
		im_lexicon_free(lexb);
		/* It built in b's memory: a fresh one for the next build. */
		im_df_free(b);
		b = collection(NDOCS, w, dfs, NW);
		ck_assert_int_eq(im_lexicon_build_from(b, windows[k][0],
						       windows[k][1], caps[k],
						       &lexb, nb),
				 0);
		bb = saved_bytes(lexb, &lb);
		ck_assert_msg(la == lb && !memcmp(ba, bb, la),
			      "window %zu: the files differ", k);
		ck_assert_msg(!memcmp(na, nb, n * sizeof(*na)),
			      "window %zu: the term numbers differ", k);
		nl = im_lexicon_primary_size(lexa) +
		     im_lexicon_secondary_size(lexa);
		ck_assert_msg(!memcmp(im_lexicon_byte_order(lexa),
				      im_lexicon_byte_order(lexb),
				      nl * sizeof(uint32_t)),
			      "window %zu: the byte orders differ", k);
		/* Each number is the one its term is looked up at. */
		for (size_t i = 0; i < nl; i++) {
			const struct im_lex_term *t = im_lexicon_term(lexb, i);

			ck_assert_int_eq(im_lexicon_lookup(
						 lexb, t->str, t->len,
						 XXH3_64bits(t->str, t->len),
						 NULL),
					 (long)i);
		}
		free(ba);
		free(bb);
		free(na);
		free(nb);
		im_lexicon_free(lexa);
		im_lexicon_free(lexb);
		im_df_free(a);
		im_df_free(b);
	}
	tmp_teardown();
}
END_TEST

START_TEST(test_lexicon_secondary_order_and_cap)
{
	struct im_lexicon *lex = std_lexicon(100);
	/* B: df 2 (alpha? no: omega, quartz, zebra), then df 1 (alpha, fjord),
	 * ties broken by bytes. */
	static const char *order[] = {"omega", "quartz", "zebra", "alpha",
				      "fjord"};
	for (uint32_t i = 0; i < 5; i++) {
		const struct im_lex_term *t = find(lex, order[i]);
		ck_assert_msg(t && t->kind == IM_LEX_SECONDARY, "%s in B",
			      order[i]);
		ck_assert_msg(t->rank == i, "%s has rank %u, want %u", order[i],
			      t->rank, i);
		ck_assert_ptr_eq(im_lexicon_term(lex, 4 + i), t);
	}
	/* Term numbers: L in byte order first. */
	ck_assert_str_eq(im_lexicon_term(lex, 0)->str, "bank");
	ck_assert_str_eq(im_lexicon_term(lex, 1)->str, "house");
	ck_assert_str_eq(im_lexicon_term(lex, 2)->str, "money");
	ck_assert_str_eq(im_lexicon_term(lex, 3)->str, "river");
	ck_assert_ptr_null(im_lexicon_term(lex, 9));
	im_lexicon_free(lex);

	lex = std_lexicon(3);
	ck_assert_uint_eq(im_lexicon_secondary_size(lex), 3);
	ck_assert_msg(find(lex, "zebra") && find(lex, "zebra")->rank == 2,
		      "the cap keeps the best-ranked terms");
	ck_assert_msg(find(lex, "alpha") == NULL && find(lex, "fjord") == NULL,
		      "the cap drops the rarest terms");
	im_lexicon_free(lex);

	lex = std_lexicon(0);
	ck_assert_uint_eq(im_lexicon_secondary_size(lex), 0);
	ck_assert_uint_eq(im_lexicon_primary_size(lex), 4);
	im_lexicon_free(lex);
}
END_TEST

START_TEST(test_lexicon_lookup)
{
	struct im_lexicon *lex = std_lexicon(100);
	size_t n =
		im_lexicon_primary_size(lex) + im_lexicon_secondary_size(lex);

	for (size_t i = 0; i < n; i++) {
		const struct im_lex_term *t = im_lexicon_term(lex, i);
		const char *str = NULL;
		long ix = im_lexicon_lookup(lex, t->str, t->len,
					    XXH3_64bits(t->str, t->len), &str);
		ck_assert_msg(ix == (long)i, "%s: number %ld, want %zu", t->str,
			      ix, i);
		ck_assert_msg(str == t->str, "the same bytes are handed out");
		ck_assert_msg(str[t->len] == '\0', "NUL-terminated");
		ck_assert_ptr_eq(find(lex, t->str), t);
	}
	const char *str = NULL;
	ck_assert_int_eq(im_lexicon_lookup(lex, "banks", 5,
					   XXH3_64bits("banks", 5), &str),
			 -1);
	ck_assert_int_eq(
		im_lexicon_lookup(lex, "ban", 3, XXH3_64bits("ban", 3), &str),
		-1);
	ck_assert_ptr_null(str);
	im_lexicon_prefetch(lex, 12345);
	im_lexicon_free(lex);
}
END_TEST

/* A thread that looks every term of a built lexicon up as soon as the
 * others are ready, counting those found at their own number. */
struct looker {
	const struct im_lexicon *lex;
	pthread_barrier_t *go;
	size_t found;
};

static void *look_all(void *arg)
{
	struct looker *lk = arg;
	size_t n = im_lexicon_primary_size(lk->lex) +
		   im_lexicon_secondary_size(lk->lex);

	pthread_barrier_wait(lk->go);
	for (size_t i = 0; i < n; i++) {
		const struct im_lex_term *t = im_lexicon_term(lk->lex, i);

		lk->found += im_lexicon_lookup(lk->lex, t->str, t->len,
					       XXH3_64bits(t->str, t->len),
					       NULL) == (long)i;
	}
	return NULL;
}

START_TEST(test_lexicon_first_lookups_at_once)
{
	/* A built lexicon fills its lookup table at the first lookup: the
	 * daemon's workers make theirs together after a first scan. */
	struct looker lk[4];
	pthread_barrier_t go;
	struct im_lexicon *lex;
	struct im_df *df;
	struct im_terms u;
	pthread_t t[4];
	char w[32];
	size_t n;

	ck_assert_int_eq(im_df_new(&df), 0);
	im_terms_init(&u);
	for (int d = 0; d < 4; d++) {
		im_terms_clear(&u);
		for (int i = 0; i < 20000; i++) {
			int len = snprintf(w, sizeof(w), "word%dy", i);

			if (i % 4 >= d)
				ck_assert_int_eq(
					im_terms_add(&u, w, (size_t)len), 0);
		}
		ck_assert_int_eq(im_df_add(df, &u), 0);
	}
	ck_assert_int_eq(im_lexicon_build(df, 0.0, 0.5, 100000, &lex), 0);
	n = im_lexicon_primary_size(lex) + im_lexicon_secondary_size(lex);
	ck_assert_uint_eq(n, 20000);
	pthread_barrier_init(&go, NULL, 4);
	for (int i = 0; i < 4; i++) {
		lk[i] = (struct looker){lex, &go, 0};
		ck_assert_int_eq(pthread_create(&t[i], NULL, look_all, &lk[i]),
				 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		ck_assert_uint_eq(lk[i].found, n);
	}
	pthread_barrier_destroy(&go);
	ck_assert_ptr_null(find(lex, "word20000y"));
	im_lexicon_free(lex);
	im_terms_release(&u);
	im_df_free(df);
}
END_TEST

START_TEST(test_lexicon_build_refuses)
{
	struct im_df *df;
	struct im_lexicon *lex = (void *)1;

	ck_assert_int_eq(im_df_new(&df), 0);
	ck_assert_int_eq(im_lexicon_build(df, 0.2, 0.8, 10, &lex), -EINVAL);
	ck_assert_ptr_null(lex);
	add_doc(df, "solo word");
	ck_assert_msg(im_lexicon_build(df, 0.2, 0.8, 10, &lex) == -EINVAL,
		      "N = 1: nidf is undefined");
	add_doc(df, "second word");
	ck_assert_int_eq(im_lexicon_build(df, 0.8, 0.2, 10, &lex), -EINVAL);
	ck_assert_int_eq(im_lexicon_build(df, -0.1, 0.2, 10, &lex), -EINVAL);
	ck_assert_int_eq(im_lexicon_build(df, 0.1, 1.5, 10, &lex), -EINVAL);
	ck_assert_int_eq(im_lexicon_build(df, NAN, 0.5, 10, &lex), -EINVAL);
	ck_assert_int_eq(im_lexicon_build(df, 0.0, 1.0, 10, &lex), 0);
	ck_assert_uint_eq(im_lexicon_primary_size(lex), 3);
	im_lexicon_free(lex);
	im_df_free(df);
}
END_TEST

/* ---- The file ----------------------------------------------------------- */

static void assert_same_lexicon(const struct im_lexicon *a,
				const struct im_lexicon *b)
{
	size_t n = im_lexicon_primary_size(a) + im_lexicon_secondary_size(a);
	ck_assert_uint_eq(im_lexicon_docs(a), im_lexicon_docs(b));
	ck_assert_uint_eq(im_lexicon_primary_size(a),
			  im_lexicon_primary_size(b));
	ck_assert_uint_eq(im_lexicon_secondary_size(a),
			  im_lexicon_secondary_size(b));
	double alo, ahi, blo, bhi;
	im_lexicon_window(a, &alo, &ahi);
	im_lexicon_window(b, &blo, &bhi);
	ck_assert(alo == blo && ahi == bhi);
	for (size_t i = 0; i < n; i++) {
		const struct im_lex_term *x = im_lexicon_term(a, i);
		const struct im_lex_term *y = find(b, x->str);
		ck_assert_msg(y != NULL, "%s lost in the round trip", x->str);
		ck_assert_ptr_eq(y, im_lexicon_term(b, i));
		ck_assert_uint_eq(x->len, y->len);
		ck_assert_uint_eq(x->kind, y->kind);
		ck_assert_uint_eq(x->rank, y->rank);
		ck_assert(x->nidf == y->nidf);
	}
}

START_TEST(test_lexicon_save_load)
{
	struct im_lexicon *lex = std_lexicon(100), *back;
	char why[128];
	struct stat st;

	ck_assert_int_eq(im_lexicon_save(lex, tmp_path("l.lex")), 0);
	ck_assert_int_eq(
		im_lexicon_load(tmp_path("l.lex"), &back, why, sizeof(why)), 0);
	assert_same_lexicon(lex, back);
	ck_assert_msg(stat(tmp_path("l.lex.tmp"), &st) < 0,
		      "no temporary file is left behind");

	/* Saving over an existing file replaces it; bytes are reproducible. */
	ck_assert_int_eq(im_lexicon_save(back, tmp_path("l.lex")), 0);
	ck_assert_int_eq(im_lexicon_save(lex, tmp_path("m.lex")), 0);
	size_t n1, n2;
	unsigned char *b1 = slurp(tmp_path("l.lex"), &n1);
	unsigned char *b2 = slurp(tmp_path("m.lex"), &n2);
	ck_assert(n1 == n2 && memcmp(b1, b2, n1) == 0);

	/* The file key: of the bytes written, and of the bytes loaded, not
	 * of whatever the file holds later. */
	uint64_t key = 0;
	struct im_lexicon *again;

	ck_assert_uint_eq(im_lexicon_file_key(lex), 0); /* built, not loaded */
	ck_assert_int_eq(im_lexicon_save_key(lex, tmp_path("k.lex"), &key), 0);
	ck_assert_uint_eq(key, XXH3_64bits(b2, n2));
	ck_assert_int_eq(
		im_lexicon_load(tmp_path("k.lex"), &again, why, sizeof(why)),
		0);
	ck_assert_uint_eq(im_lexicon_file_key(again), key);
	struct im_lexicon *other = std_lexicon(1);

	ck_assert_int_eq(im_lexicon_save(other, tmp_path("k.lex")), 0);
	ck_assert_uint_eq(im_lexicon_file_key(again), key);
	im_lexicon_free(other);
	im_lexicon_free(again);
	free(b1);
	free(b2);

	/* An empty lexicon (no term in the window) survives too. */
	struct im_lexicon *empty, *eback;
	struct im_df *df = collection(100, std_words, std_dfs, 2);
	ck_assert_int_eq(im_lexicon_build(df, 0.2, 0.8, 100, &empty), 0);
	ck_assert_uint_eq(im_lexicon_primary_size(empty), 0);
	ck_assert_int_eq(im_lexicon_save(empty, tmp_path("e.lex")), 0);
	ck_assert_int_eq(im_lexicon_load(tmp_path("e.lex"), &eback, NULL, 0),
			 0);
	assert_same_lexicon(empty, eback);
	ck_assert_ptr_null(find(eback, "the"));
	im_lexicon_free(empty);
	im_lexicon_free(eback);
	im_df_free(df);

	im_lexicon_free(lex);
	im_lexicon_free(back);
}
END_TEST

START_TEST(test_lexicon_save_errors)
{
	struct im_lexicon *lex = std_lexicon(100);
	ck_assert_int_eq(im_lexicon_save(lex, tmp_path("no/such/dir/l.lex")),
			 -ENOENT);
	im_lexicon_free(lex);
}
END_TEST

START_TEST(test_lexicon_load_missing)
{
	struct im_lexicon *lex = (void *)1;
	char why[128];
	ck_assert_int_eq(
		im_lexicon_load(tmp_path("nope.lex"), &lex, why, sizeof(why)),
		-ENOENT);
	ck_assert_ptr_null(lex);
	ck_assert_str_eq(why, strerror(ENOENT));
	ck_assert_int_eq(im_lexicon_load(tmpdir, &lex, why, sizeof(why)),
			 -EISDIR);
	ck_assert_int_eq(mkfifo(tmp_path("fifo"), 0600), 0);
	ck_assert_msg(im_lexicon_load(tmp_path("fifo"), &lex, why,
				      sizeof(why)) == -EINVAL,
		      "a fifo is refused, without blocking");
	ck_assert_str_eq(why, "not a regular file");
}
END_TEST

/* Load @p path and require a refusal whose reason contains @p want. */
static void assert_refused(const char *path, const char *want, const char *what)
{
	struct im_lexicon *lex = (void *)1;
	char why[256];
	int r = im_lexicon_load(path, &lex, why, sizeof(why));
	ck_assert_msg(r == -EINVAL, "%s: load returned %d, want -EINVAL", what,
		      r);
	ck_assert_msg(lex == NULL, "%s: *out is not NULL", what);
	ck_assert_msg(why[0] != '\0', "%s: no reason given", what);
	if (want)
		ck_assert_msg(strstr(why, want) != NULL,
			      "%s: reason \"%s\" lacks \"%s\"", what, why,
			      want);
}

START_TEST(test_lexicon_load_truncated)
{
	struct im_lexicon *lex = std_lexicon(100);
	size_t len;
	char what[64];

	ck_assert_int_eq(im_lexicon_save(lex, tmp_path("l.lex")), 0);
	unsigned char *b = slurp(tmp_path("l.lex"), &len);
	ck_assert_uint_gt(len, 64);
	/* Every proper prefix, the empty file included, is refused. */
	for (size_t cut = 0; cut < len; cut++) {
		spill(tmp_path("t.lex"), b, cut);
		snprintf(what, sizeof(what), "cut at %zu of %zu", cut, len);
		assert_refused(tmp_path("t.lex"), "truncated", what);
	}
	/* Trailing garbage is refused too. */
	unsigned char *longer = malloc(len + 1);
	memcpy(longer, b, len);
	longer[len] = 'x';
	spill(tmp_path("t.lex"), longer, len + 1);
	assert_refused(tmp_path("t.lex"), NULL, "one byte appended");
	free(longer);
	free(b);
	im_lexicon_free(lex);
}
END_TEST

START_TEST(test_lexicon_load_flipped)
{
	struct im_lexicon *lex = std_lexicon(100);
	size_t len;
	char what[64];

	ck_assert_int_eq(im_lexicon_save(lex, tmp_path("l.lex")), 0);
	unsigned char *b = slurp(tmp_path("l.lex"), &len);
	for (size_t i = 0; i < len; i++) {
		for (int bit = 0; bit < 8; bit += 7) {
			b[i] ^= (unsigned char)(1u << bit);
			spill(tmp_path("f.lex"), b, len);
			b[i] ^= (unsigned char)(1u << bit);
			snprintf(what, sizeof(what), "bit %d of byte %zu", bit,
				 i);
			/* Past the header the checksum is what catches it. */
			assert_refused(tmp_path("f.lex"),
				       i >= 24 ? "bad checksum" : NULL, what);
		}
	}
	free(b);
	im_lexicon_free(lex);
}
END_TEST

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/* Rewrite the trailing checksum so that only the semantic checks remain. */
static void reseal(unsigned char *b, size_t len)
{
	put64(b + len - 8, XXH3_64bits(b, len - 8));
}

START_TEST(test_lexicon_load_bad_header)
{
	struct im_lexicon *lex = std_lexicon(100);
	size_t len;

	ck_assert_int_eq(im_lexicon_save(lex, tmp_path("l.lex")), 0);
	unsigned char *b = slurp(tmp_path("l.lex"), &len);
	unsigned char *c = malloc(len);

	memcpy(c, b, len);
	memcpy(c, "GIF89a..", 8);
	spill(tmp_path("x.lex"), c, len);
	assert_refused(tmp_path("x.lex"), "not an imatch lexicon", "magic");

	spill(tmp_path("x.lex"), (const unsigned char *)"hello\n", 6);
	assert_refused(tmp_path("x.lex"), "not an imatch lexicon",
		       "a short text file");

	memcpy(c, b, len);
	c[8] = 2;
	reseal(c, len);
	spill(tmp_path("x.lex"), c, len);
	assert_refused(tmp_path("x.lex"), "unsupported version 2", "version");

	memcpy(c, b, len);
	put64(c + 24, 1); /* N = 1 */
	reseal(c, len);
	spill(tmp_path("x.lex"), c, len);
	assert_refused(tmp_path("x.lex"), "documents", "N = 1");

	memcpy(c, b, len);
	put64(c + 48, UINT64_C(1) << 40); /* absurd primary count */
	reseal(c, len);
	spill(tmp_path("x.lex"), c, len);
	assert_refused(tmp_path("x.lex"), "terms", "absurd count");

	memcpy(c, b, len);
	put64(c + 48, 3); /* one term moves from L to B: kinds disagree */
	put64(c + 56, 6);
	reseal(c, len);
	spill(tmp_path("x.lex"), c, len);
	assert_refused(tmp_path("x.lex"), "corrupt", "counts moved");

	memcpy(c, b, len);
	double lo = 0.9; /* lo > hi */
	memcpy(c + 32, &lo, 8);
	reseal(c, len);
	spill(tmp_path("x.lex"), c, len);
	assert_refused(tmp_path("x.lex"), "window", "lo > hi");

	/* L must be in byte order: swap "money" and "river" (same length). */
	memcpy(c, b, len);
	unsigned char *m = memmem(c, len, "money", 5);
	unsigned char *rv = memmem(c, len, "river", 5);
	ck_assert(m && rv);
	memcpy(m, "river", 5);
	memcpy(rv, "money", 5);
	reseal(c, len);
	spill(tmp_path("x.lex"), c, len);
	assert_refused(tmp_path("x.lex"), "out of order", "L out of order");

	/* B must be in rank order: swap "omega" (df 2) and "alpha" (df 1), so
	 * that "omega" comes before "fjord" among the df 1 terms. */
	memcpy(c, b, len);
	m = memmem(c, len, "omega", 5);
	rv = memmem(c, len, "alpha", 5);
	ck_assert(m && rv);
	memcpy(m, "alpha", 5);
	memcpy(rv, "omega", 5);
	reseal(c, len);
	spill(tmp_path("x.lex"), c, len);
	assert_refused(tmp_path("x.lex"), "out of order", "B out of order");

	memcpy(c, b, len);
	c[64] = 0xff; /* the first term's length */
	reseal(c, len);
	spill(tmp_path("x.lex"), c, len);
	assert_refused(tmp_path("x.lex"), "corrupt", "term length");

	free(c);
	free(b);
	im_lexicon_free(lex);
}
END_TEST

START_TEST(test_lexicon_golden_file)
{
	/*
	 * tests/data/lexicon/std-v1.lex was written by this code from the
	 * standard collection. It must keep loading (format stability) and the
	 * same collection must still produce it byte for byte.
	 */
	const char *golden = IM_TEST_DATA "/lexicon/std-v1.lex";
	struct im_lexicon *lex = std_lexicon(100), *gold;
	char why[128];

	ck_assert_msg(im_lexicon_load(golden, &gold, why, sizeof(why)) == 0,
		      "%s: %s", golden, why);
	assert_same_lexicon(lex, gold);
	ck_assert_int_eq(im_lexicon_save(lex, tmp_path("l.lex")), 0);
	size_t n1, n2;
	unsigned char *b1 = slurp(tmp_path("l.lex"), &n1);
	unsigned char *b2 = slurp(golden, &n2);
	ck_assert_msg(n1 == n2 && memcmp(b1, b2, n1) == 0,
		      "the file format changed: bump LEX_VERSION");
	free(b1);
	free(b2);
	im_lexicon_free(gold);
	im_lexicon_free(lex);
}
END_TEST

START_TEST(test_lexicon_utf8_terms)
{
	static const char *w[] = {"straße", "größe", "ελληνικά", "日本語"};
	static const unsigned dfs[] = {10, 10, 2, 10};
	struct im_df *df = collection(100, w, dfs, 4);
	struct im_lexicon *lex, *back;
	ck_assert_int_eq(im_lexicon_build(df, 0.2, 0.8, 10, &lex), 0);
	ck_assert_int_eq(im_lexicon_save(lex, tmp_path("u.lex")), 0);
	ck_assert_int_eq(im_lexicon_load(tmp_path("u.lex"), &back, NULL, 0), 0);
	for (int i = 0; i < 4; i++) {
		const struct im_lex_term *t = find(back, w[i]);
		ck_assert_msg(t != NULL, "%s found after a round trip", w[i]);
		ck_assert_uint_eq(t->kind, dfs[i] == 2 ? IM_LEX_SECONDARY
						       : IM_LEX_PRIMARY);
	}
	im_lexicon_free(lex);
	im_lexicon_free(back);
	im_df_free(df);
}
END_TEST

START_TEST(test_lexicon_huge_term)
{
	/* A term too long for the file is left out, so the file still loads. */
	char *huge = malloc(70001);
	memset(huge, 'x', 70000);
	huge[70000] = '\0';
	const char *w[] = {huge, "normal"};
	static const unsigned dfs[] = {10, 10};
	struct im_df *df = collection(100, w, dfs, 2);
	struct im_lexicon *lex, *back;
	char why[128];

	ck_assert_int_eq(im_lexicon_build(df, 0.2, 0.8, 10, &lex), 0);
	ck_assert_uint_eq(im_lexicon_primary_size(lex), 1);
	ck_assert_int_eq(im_lexicon_save(lex, tmp_path("h.lex")), 0);
	ck_assert_msg(im_lexicon_load(tmp_path("h.lex"), &back, why,
				      sizeof(why)) == 0,
		      "load: %s", why);
	ck_assert_ptr_nonnull(find(back, "normal"));
	im_lexicon_free(lex);
	im_lexicon_free(back);
	im_df_free(df);
	free(huge);
}
END_TEST

static Suite *lexicon_suite(void)
{
	Suite *s = suite_create("lexicon");
	TCase *tc = tcase_create("df");
	tcase_add_test(tc, test_lexicon_df_counts);
	tcase_add_test(tc, test_lexicon_df_short_and_long_terms);
	tcase_add_test(tc, test_lexicon_df_add_known);
	tcase_add_test(tc, test_lexicon_df_many_terms);
	tcase_add_test(tc, test_lexicon_df_merge);
	tcase_add_test(tc, test_lexicon_merge_ids_and_numbers);
	tcase_add_test(tc, test_lexicon_df_tag_collisions);
	tcase_add_test(tc, test_lexicon_df_model);
	suite_add_tcase(s, tc);

	tc = tcase_create("build");
	tcase_add_test(tc, test_lexicon_window);
	tcase_add_test(tc, test_lexicon_zero_count_in_b);
	tcase_add_test(tc, test_lexicon_window_exact_boundaries);
	tcase_add_test(tc, test_lexicon_secondary_order_and_cap);
	tcase_add_test(tc, test_lexicon_sort_shared_prefixes);
	tcase_add_test(tc, test_lexicon_build_from_same_as_numbered);
	tcase_add_test(tc, test_lexicon_lookup);
	tcase_add_test(tc, test_lexicon_first_lookups_at_once);
	tcase_add_test(tc, test_lexicon_build_refuses);
	suite_add_tcase(s, tc);

	tc = tcase_create("file");
	tcase_add_checked_fixture(tc, tmp_setup, tmp_teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_lexicon_save_load);
	tcase_add_test(tc, test_lexicon_save_errors);
	tcase_add_test(tc, test_lexicon_load_missing);
	tcase_add_test(tc, test_lexicon_load_truncated);
	tcase_add_test(tc, test_lexicon_load_flipped);
	tcase_add_test(tc, test_lexicon_load_bad_header);
	tcase_add_test(tc, test_lexicon_golden_file);
	tcase_add_test(tc, test_lexicon_utf8_terms);
	tcase_add_test(tc, test_lexicon_huge_term);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(lexicon_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
