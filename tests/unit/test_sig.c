/*
 * Unit tests for core/sign/sig.c: randomized lexicon membership, the secondary
 * extension and both rejection thresholds, SHA1 signatures checked against an
 * independent computation, determinism, and reading real files.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <xxhash.h>

#include "unit.h"
#include "sig.h"

#define SEED UINT64_C(20260131)

/* ---- A hasher that fails ----------------------------------------------------
 * The build links this test with -Wl,--wrap=im_sha1_many (tests/meson.build):
 * the signer's hashing comes here, and fails while sha1_fail is set (only
 * OpenSSL can fail, and the signer picks the SIMD hasher where there is one).
 */
struct im_sha1;
struct im_sha1_msg;
int __real_im_sha1_many(struct im_sha1 *h, const struct im_sha1_msg *v,
			size_t n);
int __wrap_im_sha1_many(struct im_sha1 *h, const struct im_sha1_msg *v,
			size_t n);
static bool sha1_fail;

int __wrap_im_sha1_many(struct im_sha1 *h, const struct im_sha1_msg *v,
			size_t n)
{
	return sha1_fail ? -ENOMEM : __real_im_sha1_many(h, v, n);
}

/* ---- Helpers ---------------------------------------------------------------- */

/* A word made of letters only (so that text extraction keeps it). */
static const char *word(const char *prefix, unsigned i)
{
	static char buf[8][32];
	static int turn;
	char *w = buf[turn++ & 7];
	int n = snprintf(w, 32, "%s", prefix);
	do {
		w[n++] = (char)('a' + i % 26);
		i /= 26;
	} while (i);
	w[n] = '\0';
	return w;
}

static void add(struct im_terms *u, const char *w)
{
	ck_assert_int_eq(im_terms_add(u, w, strlen(w)), 0);
}

/*
 * A lexicon from 100 documents, window [0.2, 0.8]: nl words "lex…" with df 10
 * (in L), nb words "rar…" where rar<i> has df 2 for i < nb/2 and 1 after (in
 * B, ranked rar0, rar1, …  within each df by bytes), and "common…" words with
 * df 60 (dropped). Extra L words from @p extra_l, B words (df 2) from
 * @p extra_b.
 */
static struct im_lexicon *make_lexicon(unsigned nl, unsigned nb,
				       const char *const *extra_l,
				       const char *const *extra_b)
{
	struct im_df *df;
	struct im_lexicon *lex;
	struct im_terms u;

	ck_assert_int_eq(im_df_new(&df), 0);
	im_terms_init(&u);
	for (unsigned d = 0; d < 100; d++) {
		im_terms_clear(&u);
		if (d < 10) {
			for (unsigned i = 0; i < nl; i++)
				add(&u, word("lex", i));
			for (unsigned i = 0; extra_l && extra_l[i]; i++)
				add(&u, extra_l[i]);
		}
		for (unsigned i = 0; i < nb; i++)
			if (d < (i < nb / 2 ? 2u : 1u))
				add(&u, word("rar", i));
		for (unsigned i = 0; extra_b && extra_b[i]; i++)
			if (d < 2)
				add(&u, extra_b[i]);
		if (d < 60)
			for (unsigned i = 0; i < 20; i++)
				add(&u, word("common", i));
		ck_assert_int_eq(im_df_add(df, &u), 0);
	}
	im_terms_release(&u);
	ck_assert_int_eq(im_lexicon_build(df, 0.2, 0.8, 100000, &lex), 0);
	im_df_free(df);
	return lex;
}

static void test_params(struct im_params *p)
{
	im_params_init(p);
	p->k = 10;
	p->keep = 0.63;
	p->seed = SEED;
	p->min_terms = 5;
	p->min_ratio = 0.25;
	p->min_unique = 5;
	p->max_size = 0;
}

static struct im_signer *signer(const struct im_lexicon *lex,
				const struct im_params *p)
{
	struct im_signer *s;
	ck_assert_int_eq(im_signer_new(lex, p, &s), 0);
	return s;
}

/* U = lex0..lex<nl-1>, rar0..rar<nb-1>, out0..out<nout-1> (not in the lexicon). */
static void doc_terms(struct im_terms *u, unsigned nl, unsigned nb,
		      unsigned nout)
{
	im_terms_clear(u);
	for (unsigned i = 0; i < nl; i++)
		add(u, word("lex", i));
	for (unsigned i = 0; i < nb; i++)
		add(u, word("rar", i));
	for (unsigned i = 0; i < nout; i++)
		add(u, word("out", i));
}

static int strp_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* SHA1(byte k, then each term followed by 0x00), the terms sorted here. */
static void imatch_sha1(unsigned k, const char **terms, size_t n,
			struct im_sig *out)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	unsigned char kb = (unsigned char)k;
	unsigned len = 0;

	qsort(terms, n, sizeof(*terms), strp_cmp);
	ck_assert(EVP_DigestInit_ex(ctx, EVP_sha1(), NULL));
	EVP_DigestUpdate(ctx, &kb, 1);
	for (size_t i = 0; i < n; i++)
		EVP_DigestUpdate(ctx, terms[i], strlen(terms[i]) + 1);
	ck_assert(EVP_DigestFinal_ex(ctx, out->b, &len));
	ck_assert_uint_eq(len, IM_SIG_LEN);
	EVP_MD_CTX_free(ctx);
}

static int is_set(const struct im_doc_sigs *d, unsigned k)
{
	return (d->valid >> k) & 1;
}

/* ---- Determinism ------------------------------------------------------------ */

START_TEST(test_sig_same_seed_same_signatures)
{
	struct im_lexicon *lex = make_lexicon(200, 100, NULL, NULL);
	struct im_params p;
	struct im_terms u;
	struct im_doc_sigs a, b, c;

	test_params(&p);
	struct im_signer *s1 = signer(lex, &p), *s2 = signer(lex, &p);
	im_terms_init(&u);
	doc_terms(&u, 60, 5, 20);
	ck_assert_int_eq(im_signer_sign_terms(s1, &u, &a, NULL), 0);
	ck_assert_int_eq(im_signer_sign_terms(s2, &u, &b, NULL), 0);
	ck_assert_uint_eq(a.status, IM_DOC_SIGNED);
	ck_assert_uint_eq(a.ncoords, 11);
	ck_assert_uint_eq(a.unique_terms, 85);
	ck_assert_msg(a.valid == 0x7ff, "all 11 coordinates signed: %x",
		      a.valid);
	ck_assert_msg(memcmp(&a, &b, sizeof(a)) == 0,
		      "two signers with one seed agree");

	/* A signer that signed something else in between still agrees. */
	doc_terms(&u, 30, 0, 3);
	ck_assert_int_eq(im_signer_sign_terms(s1, &u, &c, NULL), 0);
	doc_terms(&u, 60, 5, 20);
	ck_assert_int_eq(im_signer_sign_terms(s1, &u, &c, NULL), 0);
	ck_assert(memcmp(&a, &c, sizeof(a)) == 0);

	/* The randomized coordinates differ from each other. */
	for (unsigned k = 1; k <= 10; k++)
		ck_assert_msg(im_sig_cmp(&a.sig[0], &a.sig[k]) != 0,
			      "coordinate %u equals coordinate 0", k);

	/*
	 * Golden values: the same on every machine and every run. If this
	 * changes, every saved signature in the world changes with it.
	 */
	char hex[IM_SIG_HEX_LEN + 1];
	im_sig_hex(&a.sig[0], hex);
	ck_assert_str_eq(hex, "be988e9dcf92855e56998b35f9c525228f4057f9");
	im_sig_hex(&a.sig[1], hex);
	ck_assert_str_eq(hex, "86db6f2eaa7c2be0c88f2c76aee8f1ac77857510");
	im_sig_hex(&a.sig[10], hex);
	ck_assert_str_eq(hex, "99f4f52762fdccd12bff5e29e59d97f8c453c4dd");

	im_terms_release(&u);
	im_signer_free(s1);
	im_signer_free(s2);
	im_lexicon_free(lex);
}
END_TEST

START_TEST(test_sig_seed_changes_randomized_coordinates)
{
	struct im_lexicon *lex = make_lexicon(200, 100, NULL, NULL);
	struct im_params p, q;
	struct im_terms u;
	struct im_doc_sigs a, b;

	test_params(&p);
	q = p;
	q.seed = SEED + 1;
	struct im_signer *s1 = signer(lex, &p), *s2 = signer(lex, &q);
	im_terms_init(&u);
	doc_terms(&u, 60, 0, 20);
	ck_assert_int_eq(im_signer_sign_terms(s1, &u, &a, NULL), 0);
	ck_assert_int_eq(im_signer_sign_terms(s2, &u, &b, NULL), 0);
	ck_assert_msg(im_sig_cmp(&a.sig[0], &b.sig[0]) == 0,
		      "coordinate 0 does not depend on the seed");
	for (unsigned k = 1; k <= 10; k++)
		ck_assert_msg(im_sig_cmp(&a.sig[k], &b.sig[k]) != 0,
			      "coordinate %u is the same under another seed",
			      k);
	im_terms_release(&u);
	im_signer_free(s1);
	im_signer_free(s2);
	im_lexicon_free(lex);
}
END_TEST

START_TEST(test_sig_word_order_and_duplicates)
{
	struct im_lexicon *lex = make_lexicon(200, 100, NULL, NULL);
	struct im_params p;
	struct im_terms u, v;
	struct im_doc_sigs a, b;

	test_params(&p);
	struct im_signer *s = signer(lex, &p);
	im_terms_init(&u);
	im_terms_init(&v);
	doc_terms(&u, 40, 10, 20);
	/* The same set inserted backwards, every term twice. */
	for (unsigned r = 0; r < 2; r++) {
		for (unsigned i = 20; i-- > 0;)
			add(&v, word("out", i));
		for (unsigned i = 10; i-- > 0;)
			add(&v, word("rar", i));
		for (unsigned i = 40; i-- > 0;)
			add(&v, word("lex", i));
	}
	ck_assert_int_eq(im_signer_sign_terms(s, &u, &a, NULL), 0);
	ck_assert_int_eq(im_signer_sign_terms(s, &v, &b, NULL), 0);
	ck_assert(a.valid != 0);
	ck_assert_msg(memcmp(&a, &b, sizeof(a)) == 0,
		      "signatures depend on the order of the words");
	im_terms_release(&u);
	im_terms_release(&v);
	im_signer_free(s);
	im_lexicon_free(lex);
}
END_TEST

START_TEST(test_sig_text_order_invariance)
{
	/* Through text extraction: shuffled and repeated words. */
	struct im_lexicon *lex = make_lexicon(200, 100, NULL, NULL);
	struct im_params p;
	struct im_doc_sigs a, b;
	char t1[4096], t2[4096];
	size_t n1 = 0, n2 = 0;

	test_params(&p);
	struct im_signer *s = signer(lex, &p);
	for (unsigned i = 0; i < 30; i++)
		n1 += (size_t)snprintf(t1 + n1, sizeof(t1) - n1, "%s, ",
				       word("lex", i));
	n1 += (size_t)snprintf(t1 + n1, sizeof(t1) - n1, "the end.\n");
	for (unsigned i = 30; i-- > 0;)
		n2 += (size_t)snprintf(t2 + n2, sizeof(t2) - n2, "%s %s\n",
				       word("lex", i), word("lex", i));
	ck_assert_int_eq(im_signer_sign_buf(s, "a.txt", t1, n1, &a), 0);
	ck_assert_int_eq(im_signer_sign_buf(s, "b.txt", t2, n2, &b), 0);
	ck_assert_uint_eq(a.status, IM_DOC_SIGNED);
	ck_assert_uint_eq(a.unique_terms, 30);
	ck_assert_uint_eq(b.unique_terms, 30);
	ck_assert(a.valid == b.valid);
	for (unsigned k = 0; k <= 10; k++)
		ck_assert_msg(im_sig_cmp(&a.sig[k], &b.sig[k]) == 0,
			      "coordinate %u differs", k);
	ck_assert_msg(memcmp(a.exact, b.exact, 16) != 0,
		      "different bytes, different exact hashes");
	im_signer_free(s);
	im_lexicon_free(lex);
}
END_TEST

/* ---- The signature is I-Match's -------------------------------------------- */

START_TEST(test_sig_coordinate0_is_imatch)
{
	struct im_lexicon *lex = make_lexicon(200, 100, NULL, NULL);
	struct im_params p;
	struct im_terms u;
	struct im_doc_sigs d;
	struct im_sig want;
	const char *terms[64];

	test_params(&p);
	p.min_ratio = 0;
	struct im_signer *s = signer(lex, &p);
	im_terms_init(&u);
	/* U: 50 L terms (added in a scrambled order), B and unknown words. */
	for (unsigned i = 0; i < 50; i++)
		add(&u, word("lex", (i * 37) % 50));
	add(&u, "rarb");
	add(&u, "unknownword");
	add(&u, "common");
	ck_assert_int_eq(im_signer_sign_terms(s, &u, &d, NULL), 0);
	for (unsigned i = 0; i < 50; i++)
		terms[i] = strdup(word("lex", i));
	imatch_sha1(0, terms, 50, &want);
	ck_assert_msg(is_set(&d, 0) && im_sig_cmp(&d.sig[0], &want) == 0,
		      "coordinate 0 is SHA1 over 0x00 and the sorted L ∩ U");
	for (unsigned i = 0; i < 50; i++)
		free((void *)terms[i]);

	/* Every coordinate hashes exactly the set that explain lists (which
	 * walks S apart from the bytes signing fills): at K = 10 and the
	 * default 4, filled by fill_fixed(), and at 6, by fill_terms(). */
	static const unsigned ks[] = {10, 4, 6};
	for (unsigned ki = 0; ki < sizeof(ks) / sizeof(*ks); ki++) {
		if (ki) {
			im_signer_free(s);
			p.k = ks[ki];
			s = signer(lex, &p);
			ck_assert_int_eq(im_signer_sign_terms(s, &u, &d, NULL),
					 0);
		}
		for (unsigned k = 0; k <= p.k; k++) {
			const char *const *set = im_signer_last_set(s, k);
			size_t n = 0;
			ck_assert_ptr_nonnull(set);
			while (set[n])
				terms[n] = set[n], n++;
			for (size_t i = 1; i < n; i++)
				ck_assert_msg(
					strcmp(terms[i - 1], terms[i]) < 0,
					"S of %u is listed in byte order", k);
			imatch_sha1(k, terms, n, &want);
			ck_assert_msg(im_sig_cmp(&d.sig[k], &want) == 0,
				      "K = %u: coordinate %u is SHA1 over its "
				      "listed S",
				      p.k, k);
		}
		ck_assert_ptr_null(im_signer_last_set(s, p.k + 1));
	}
	im_terms_release(&u);
	im_signer_free(s);
	im_lexicon_free(lex);
}
END_TEST

/*
 * Terms of IM_LEX_STR_PAD bytes or more take fill_fixed()'s and
 * fill_terms()'s other copy (their exact length, only to the coordinates
 * of their mask); the "lex…" words above are all shorter. Every coordinate
 * must still hash exactly its listed S, at the K each fill serves, for
 * P of one term, of about 16 (where sort_below() starts) and of many.
 */
START_TEST(test_sig_long_terms_every_coordinate)
{
	/* 16 to 100 bytes: at, just past and well past IM_LEX_STR_PAD. */
	static const unsigned lens[] = {16, 17, 18, 23, 24, 31,
					32, 33, 47, 64, 65, 100};
	enum { NLONG = sizeof(lens) / sizeof(lens[0]) };
	static const unsigned nlex[] = {0, 1, 3, 4, 5, 40, 150};
	static const unsigned ks[] = {0, 1, 4, 6, 10, 31};
	char longw[NLONG][128];
	const char *extra[NLONG + 1], *terms[256];
	struct im_lexicon *lex;
	struct im_params p;
	struct im_terms u;
	struct im_doc_sigs d;
	struct im_sig want;
	unsigned long_in_randomized = 0;

	for (unsigned i = 0; i < NLONG; i++) {
		for (unsigned j = 0; j < lens[i]; j++)
			longw[i][j] = (char)('a' + (i * 7 + j * 3) % 26);
		longw[i][lens[i]] = '\0';
		extra[i] = longw[i];
	}
	extra[NLONG] = NULL;
	lex = make_lexicon(200, 100, extra, NULL);
	test_params(&p);
	p.min_terms = 1;
	p.min_ratio = 0;
	p.min_unique = 1;
	im_terms_init(&u);
	for (unsigned ni = 0; ni < sizeof(nlex) / sizeof(*nlex); ni++) {
		/* No short term: one long one alone, then all of them. */
		unsigned nl = nlex[ni] ? NLONG : 1;

		im_terms_clear(&u);
		for (unsigned i = 0; i < nlex[ni]; i++)
			add(&u, word("lex", (i * 37) % 200));
		for (unsigned i = 0; i < nl; i++)
			add(&u, longw[NLONG - 1 - i]);
		for (unsigned ki = 0; ki < sizeof(ks) / sizeof(*ks); ki++) {
			struct im_signer *s;

			p.k = ks[ki];
			s = signer(lex, &p);
			ck_assert_int_eq(im_signer_sign_terms(s, &u, &d, NULL),
					 0);
			for (unsigned k = 0; k <= p.k; k++) {
				const char *const *set =
					im_signer_last_set(s, k);
				size_t n = 0;

				ck_assert_ptr_nonnull(set);
				while (set[n]) {
					if (k &&
					    strlen(set[n]) >= IM_LEX_STR_PAD)
						long_in_randomized++;
					terms[n] = set[n], n++;
				}
				if (!is_set(&d, k)) {
					ck_assert_msg(n == 0,
						      "K = %u, %u + %u terms: "
						      "coordinate %u of %zu "
						      "terms unsigned",
						      p.k, nlex[ni], nl, k, n);
					continue;
				}
				imatch_sha1(k, terms, n, &want);
				ck_assert_msg(im_sig_cmp(&d.sig[k], &want) == 0,
					      "K = %u, %u short + %u long "
					      "terms: coordinate %u is SHA1 "
					      "over its listed S",
					      p.k, nlex[ni], nl, k);
			}
			im_signer_free(s);
		}
	}
	ck_assert_msg(long_in_randomized > 0,
		      "some randomized coordinate holds a long term");
	im_terms_release(&u);
	im_lexicon_free(lex);
}
END_TEST

struct mark {
	char (*in)[IM_MAX_COORDS];
	unsigned stop_after, seen;
};

static int mark_term(void *arg, unsigned k, const struct im_lex_term *t)
{
	struct mark *m = arg;
	unsigned i = 0, mult = 1;
	/* Decode "lex<letters>" back into its number. */
	for (const char *c = t->str + 3; *c; c++, mult *= 26)
		i += (unsigned)(*c - 'a') * mult;
	m->in[i][k] = 1;
	m->seen++;
	return m->stop_after && m->seen == m->stop_after ? 42 : 0;
}

START_TEST(test_sig_membership_fraction)
{
	enum { NL = 20000 };
	struct im_lexicon *lex = make_lexicon(NL, 0, NULL, NULL);
	struct im_params p;
	struct im_terms u;
	struct im_doc_sigs d;
	struct im_coord_info info[IM_MAX_COORDS];
	struct mark m = {calloc(NL, sizeof(*m.in)), 0, 0};

	test_params(&p);
	struct im_signer *s = signer(lex, &p);
	im_terms_init(&u);
	doc_terms(&u, NL, 0, 0);
	ck_assert_int_eq(im_signer_sign_terms(s, &u, &d, info), 0);
	ck_assert_uint_eq(info[0].primary, NL);
	for (unsigned k = 1; k <= p.k; k++) {
		double f = (double)info[k].primary / NL;
		ck_assert_msg(f > 0.61 && f < 0.65,
			      "lexicon %u keeps %.4f of the terms, want ~0.63",
			      k, f);
		ck_assert_int_eq(im_signer_foreach_term(s, k, mark_term, &m),
				 0);
	}
	/* Lexicons are independent: two of them share ~keep² of the terms. */
	for (unsigned k = 1; k < p.k; k++) {
		unsigned both = 0;
		for (unsigned i = 0; i < NL; i++)
			both += m.in[i][k] && m.in[i][k + 1];
		double f = (double)both / NL;
		ck_assert_msg(f > 0.38 && f < 0.42,
			      "lexicons %u and %u share %.4f, want ~0.397", k,
			      k + 1, f);
	}
	/* The walk stops when the callback says so. */
	m.stop_after = 3;
	m.seen = 0;
	ck_assert_int_eq(im_signer_foreach_term(s, 1, mark_term, &m), 42);
	ck_assert_uint_eq(m.seen, 3);
	ck_assert_int_eq(im_signer_foreach_term(s, 11, mark_term, &m), -EINVAL);

	/* keep = 1: every randomized lexicon is the whole lexicon. */
	im_signer_free(s);
	p.keep = 1;
	s = signer(lex, &p);
	ck_assert_int_eq(im_signer_sign_terms(s, &u, &d, info), 0);
	for (unsigned k = 0; k <= p.k; k++)
		ck_assert_uint_eq(info[k].primary, NL);

	free(m.in);
	im_terms_release(&u);
	im_signer_free(s);
	im_lexicon_free(lex);
}
END_TEST

/* ---- The secondary lexicon and the thresholds ------------------------------ */

struct added {
	unsigned secondary;
	uint32_t ranks[64];
};

static int note_secondary(void *arg, unsigned k, const struct im_lex_term *t)
{
	struct added *a = arg;
	(void)k;
	if (t->kind == IM_LEX_SECONDARY && a->secondary < 64)
		a->ranks[a->secondary++] = t->rank;
	return 0;
}

START_TEST(test_sig_secondary_extension_threshold)
{
	struct im_lexicon *lex = make_lexicon(200, 100, NULL, NULL);
	struct im_params p;
	struct im_terms u;
	struct im_doc_sigs d;
	struct im_coord_info info[IM_MAX_COORDS];
	struct added a;

	test_params(&p);
	p.k = 0;
	p.min_ratio = 0.5;
	p.min_terms = 1;
	p.min_unique = 1;
	struct im_signer *s = signer(lex, &p);
	im_terms_init(&u);

	/* 5 of 10 in L: the ratio is met exactly, B is not touched. */
	doc_terms(&u, 5, 3, 2);
	ck_assert_int_eq(im_signer_sign_terms(s, &u, &d, info), 0);
	ck_assert_msg(info[0].primary == 5 && info[0].secondary == 0,
		      "|S|/|U| = 0.5 = min_ratio needs no extension (%u+%u)",
		      info[0].primary, info[0].secondary);
	ck_assert(!info[0].rejected && is_set(&d, 0));

	/* 4 of 10: one term of B, the best-ranked, joins S. */
	doc_terms(&u, 4, 3, 3);
	ck_assert_int_eq(im_signer_sign_terms(s, &u, &d, info), 0);
	ck_assert_msg(info[0].primary == 4 && info[0].secondary == 1,
		      "4/10 < 0.5: one term added (%u+%u)", info[0].primary,
		      info[0].secondary);
	ck_assert_uint_eq(info[0].size, 5);
	ck_assert(!info[0].rejected && is_set(&d, 0));
	memset(&a, 0, sizeof(a));
	ck_assert_int_eq(im_signer_foreach_term(s, 0, note_secondary, &a), 0);
	ck_assert_msg(a.secondary == 1 && a.ranks[0] == 0,
		      "the added term is B's best-ranked one of U");

	/* 2 of 10 with 2 in B: both added, still short: rejected on the ratio. */
	doc_terms(&u, 2, 2, 6);
	ck_assert_int_eq(im_signer_sign_terms(s, &u, &d, info), 0);
	ck_assert_uint_eq(info[0].secondary, 2);
	ck_assert_msg(info[0].rejected && !is_set(&d, 0) &&
			      d.status == IM_DOC_REJECTED,
		      "4/10 after extension is rejected");
	ck_assert_ptr_nonnull(strstr(info[0].why, "min_ratio"));

	/* The threshold in floating point: 3/10 meets 0.3 exactly. */
	im_signer_free(s);
	p.min_ratio = 0.3;
	s = signer(lex, &p);
	doc_terms(&u, 3, 3, 4);
	ck_assert_int_eq(im_signer_sign_terms(s, &u, &d, info), 0);
	ck_assert_msg(info[0].secondary == 0 && is_set(&d, 0),
		      "3/10 meets min_ratio 0.3 (%u added)", info[0].secondary);
	doc_terms(&u, 2, 3, 5);
	ck_assert_int_eq(im_signer_sign_terms(s, &u, &d, info), 0);
	ck_assert_msg(info[0].secondary == 1 && is_set(&d, 0),
		      "2/10 needs exactly one more term (%u added)",
		      info[0].secondary);

	/* Coordinate 0 extends to exactly the 15 of 50 terms that min_ratio
	 * 0.3 asks for; each randomized coordinate extends from its own B_k to
	 * the smallest size meeting min_ratio * keep (its lexicon holds only
	 * a fraction keep of the terms), or keeps all of L_k ∩ U if larger. */
	im_signer_free(s);
	p.k = 10;
	s = signer(lex, &p);
	doc_terms(&u, 10, 40, 0);
	ck_assert_int_eq(im_signer_sign_terms(s, &u, &d, info), 0);
	for (unsigned k = 0; k <= p.k; k++) {
		double r = k ? p.min_ratio * p.keep : p.min_ratio;
		unsigned want = 0;

		while ((double)want / 50.0 < r)
			want++;
		if (info[k].primary > want)
			want = info[k].primary;
		ck_assert_msg(info[k].size == want && is_set(&d, k),
			      "coordinate %u extended to %u, want %u", k,
			      info[k].size, want);
		memset(&a, 0, sizeof(a));
		ck_assert_int_eq(
			im_signer_foreach_term(s, k, note_secondary, &a), 0);
		ck_assert_uint_eq(a.secondary, info[k].secondary);
		ck_assert_uint_eq(a.secondary + info[k].primary, want);
	}
	ck_assert_msg(info[0].size == 15, "coordinate 0 has %u terms, want 15",
		      info[0].size);
	im_terms_release(&u);
	im_signer_free(s);
	im_lexicon_free(lex);
}
END_TEST

/* sig[k] of @p d must be SHA1 over what explain lists for coordinate k. */
static void assert_hash_matches_set(struct im_signer *s,
				    const struct im_doc_sigs *d, unsigned k)
{
	static const char *terms[4096];
	struct im_sig want;
	size_t n = 0;
	const char *const *set = im_signer_last_set(s, k);

	ck_assert_ptr_nonnull(set);
	while (set[n] && n < 4096)
		terms[n] = set[n], n++;
	for (size_t i = 1; i < n; i++)
		ck_assert_msg(strcmp(terms[i - 1], terms[i]) < 0,
			      "S of %u is listed in byte order", k);
	imatch_sha1(k, terms, n, &want);
	ck_assert_msg(is_set(d, k) && im_sig_cmp(&d->sig[k], &want) == 0,
		      "coordinate %u hashes its listed S", k);
}

START_TEST(test_sig_extension_hashes_merged_set)
{
	/* The terms taken from B are hashed in byte order among those of L,
	 * whether few (sorted on the spot) or many (read off B sorted once). */
	struct im_lexicon *lex = make_lexicon(200, 100, NULL, NULL);
	struct im_params p;
	struct im_terms u;
	struct im_doc_sigs d;
	struct im_coord_info info[IM_MAX_COORDS];

	test_params(&p);
	p.min_ratio = 0.3;
	struct im_signer *s = signer(lex, &p);
	im_terms_init(&u);
	doc_terms(&u, 10, 40, 0);
	ck_assert_int_eq(im_signer_sign_terms(s, &u, &d, info), 0);
	for (unsigned k = 0; k <= p.k; k++) {
		ck_assert(info[k].secondary > 0 && info[k].secondary <= 32);
		assert_hash_matches_set(s, &d, k);
	}

	im_signer_free(s);
	p.keep = 1;
	p.min_ratio = 0.9;
	s = signer(lex, &p);
	doc_terms(&u, 10, 80, 0);
	ck_assert_int_eq(im_signer_sign_terms(s, &u, &d, info), 0);
	ck_assert_uint_eq(info[0].secondary, 71);
	for (unsigned k = 0; k <= p.k; k++)
		assert_hash_matches_set(s, &d, k);
	im_terms_release(&u);
	im_signer_free(s);
	im_lexicon_free(lex);
}
END_TEST

START_TEST(test_sig_min_terms_boundary)
{
	struct im_lexicon *lex = make_lexicon(200, 100, NULL, NULL);
	struct im_params p;
	struct im_terms u;
	struct im_doc_sigs d;
	struct im_coord_info info[IM_MAX_COORDS];

	test_params(&p);
	p.k = 0;
	p.min_ratio = 0;
	p.min_terms = 5;
	struct im_signer *s = signer(lex, &p);
	im_terms_init(&u);
	doc_terms(&u, 4, 0, 6);
	ck_assert_int_eq(im_signer_sign_terms(s, &u, &d, info), 0);
	ck_assert_msg(d.status == IM_DOC_REJECTED && info[0].rejected,
		      "|S| = min_terms - 1 is rejected");
	ck_assert_ptr_nonnull(strstr(info[0].why, "min_terms"));
	doc_terms(&u, 5, 0, 6);
	ck_assert_int_eq(im_signer_sign_terms(s, &u, &d, info), 0);
	ck_assert_msg(d.status == IM_DOC_SIGNED && !info[0].rejected &&
			      info[0].why == NULL,
		      "|S| = min_terms is signed");
	im_terms_release(&u);
	im_signer_free(s);
	im_lexicon_free(lex);
}
END_TEST

START_TEST(test_sig_min_unique)
{
	struct im_lexicon *lex = make_lexicon(200, 100, NULL, NULL);
	struct im_params p;
	struct im_terms u;
	struct im_doc_sigs d;
	struct im_coord_info info[IM_MAX_COORDS];

	test_params(&p);
	p.min_terms = 1;
	p.min_ratio = 0;
	p.keep = 1;
	struct im_signer *s = signer(lex, &p);
	im_terms_init(&u);
	doc_terms(&u, 4, 0, 0);
	ck_assert_int_eq(im_signer_sign_terms(s, &u, &d, info), 0);
	ck_assert_msg(d.status == IM_DOC_REJECTED && d.valid == 0,
		      "4 unique terms < min_unique 5: rejected everywhere");
	for (unsigned k = 0; k <= p.k; k++)
		ck_assert_ptr_nonnull(strstr(info[k].why, "min_unique"));
	doc_terms(&u, 5, 0, 0);
	ck_assert_int_eq(im_signer_sign_terms(s, &u, &d, info), 0);
	ck_assert_msg(d.status == IM_DOC_SIGNED && d.valid == 0x7ff,
		      "5 unique terms: signed everywhere");

	/* An empty document. */
	im_terms_clear(&u);
	ck_assert_int_eq(im_signer_sign_terms(s, &u, &d, info), 0);
	ck_assert_uint_eq(d.status, IM_DOC_REJECTED);
	ck_assert_uint_eq(d.unique_terms, 0);
	im_terms_release(&u);
	im_signer_free(s);
	im_lexicon_free(lex);
}
END_TEST

START_TEST(test_sig_long_document_small_overlap)
{
	/*
	 * papers/000 Fig. 1: two different German messages share an English
	 * banner; only the banner is in the lexicon. Plain I-Match gives both
	 * the banner's signature; the ratio threshold refuses to.
	 */
	static const char *banner[] = {
		"email", "scanned",	"messagelabs", "security", "system",
		"more",	 "information", "please",      "visit",	   NULL};
	static const char *payload_b[] = {"handy", "nummer", "chatten",
					  "problem", NULL};
	struct im_lexicon *lex = make_lexicon(200, 0, banner, payload_b);
	struct im_params p;
	struct im_terms u1, u2;
	struct im_doc_sigs d1, d2;

	test_params(&p);
	im_terms_init(&u1);
	im_terms_init(&u2);
	for (unsigned i = 0; banner[i]; i++) {
		add(&u1, banner[i]);
		add(&u2, banner[i]);
	}
	for (unsigned i = 0; i < 100; i++) {
		add(&u1, word("deutsch", i));
		add(&u2, word("anders", i));
	}
	struct im_signer *s = signer(lex, &p);
	ck_assert_int_eq(im_signer_sign_terms(s, &u1, &d1, NULL), 0);
	ck_assert_int_eq(im_signer_sign_terms(s, &u2, &d2, NULL), 0);
	ck_assert_msg(
		d1.status == IM_DOC_REJECTED && d2.status == IM_DOC_REJECTED,
		"9 lexicon terms of 109 is below min_ratio: no signature");

	/* Without the ratio threshold: the spurious match of Fig. 1. */
	im_signer_free(s);
	p.min_ratio = 0;
	s = signer(lex, &p);
	ck_assert_int_eq(im_signer_sign_terms(s, &u1, &d1, NULL), 0);
	ck_assert_int_eq(im_signer_sign_terms(s, &u2, &d2, NULL), 0);
	ck_assert(is_set(&d1, 0) && is_set(&d2, 0));
	ck_assert_msg(im_sig_cmp(&d1.sig[0], &d2.sig[0]) == 0,
		      "plain I-Match matches the banner alone");

	/* With B vocabulary in the payloads, the extension tells them apart. */
	im_signer_free(s);
	p.min_ratio = 0.09;
	s = signer(lex, &p);
	add(&u1, "handy");
	add(&u1, "nummer");
	add(&u2, "chatten");
	add(&u2, "problem");
	ck_assert_int_eq(im_signer_sign_terms(s, &u1, &d1, NULL), 0);
	ck_assert_int_eq(im_signer_sign_terms(s, &u2, &d2, NULL), 0);
	ck_assert_msg(
		is_set(&d1, 0) && is_set(&d2, 0),
		"10 of 111 meets min_ratio 0.09 once one B term is added");
	ck_assert_msg(im_sig_cmp(&d1.sig[0], &d2.sig[0]) != 0,
		      "the secondary terms separate the two messages");

	im_terms_release(&u1);
	im_terms_release(&u2);
	im_signer_free(s);
	im_lexicon_free(lex);
}
END_TEST

/* ---- Signing from term numbers ------------------------------------------- */

static uint64_t xs_state;

static uint32_t xs(uint32_t n)
{
	xs_state ^= xs_state << 13;
	xs_state ^= xs_state >> 7;
	xs_state ^= xs_state << 17;
	return (uint32_t)(xs_state % n);
}

/* Long L terms: each is copied whole, never by a fixed-size move. */
static const char *const long_l[] = {
	"lexlongtermnumberone", "lexlongtermnumbertwothree",
	"lexanotherquitelongtermwithmanyletters", "lexfifteenchars", NULL};

START_TEST(test_sig_numbers_equal_terms)
{
	/* 6000 L terms: a document holding most of them passes the size up
	 * to which the coordinates' bytes are filled in one pass. */
	struct im_lexicon *lex = make_lexicon(6000, 400, long_l, NULL);
	static const unsigned ks[] = {10, 4, 3, 31, 0};
	uint32_t *nums = malloc(8000 * sizeof(*nums));
	struct im_terms u;

	xs_state = 88172645463325252ull;
	im_terms_init(&u);
	for (unsigned ki = 0; ki < sizeof(ks) / sizeof(*ks); ki++) {
		struct im_params p;
		uint32_t *masks;

		test_params(&p);
		p.k = ks[ki];
		p.keep = 0.3;
		ck_assert_int_eq(im_sig_masks(lex, &p, &masks), 0);
		{
			/* In parts, as a first scan's workers fill them. */
			size_t nt = im_lexicon_primary_size(lex) +
				    im_lexicon_secondary_size(lex);
			size_t cut[] = {0, 1, 2500, 2501, nt};
			uint32_t *parts = calloc(nt, sizeof(*parts));

			for (int c = 3; c >= 0; c--)
				ck_assert_int_eq(
					im_sig_masks_part(lex, &p, parts,
							  cut[c], cut[c + 1]),
					0);
			ck_assert_msg(
				!memcmp(parts, masks, nt * sizeof(*parts)),
				"K=%u: masks in parts equal the whole", p.k);
			/* One term at a time: never eight at once, where the
			 * CPU has the vector code. */
			memset(parts, 0, nt * sizeof(*parts));
			for (size_t i = 0; i < nt; i++)
				ck_assert_int_eq(im_sig_masks_part(lex, &p,
								   parts, i,
								   i + 1),
						 0);
			ck_assert_msg(
				!memcmp(parts, masks, nt * sizeof(*parts)),
				"K=%u: masks term by term equal the whole",
				p.k);
			free(parts);
		}
		for (int with_masks = 0; with_masks < 2; with_masks++) {
			struct im_signer *a = signer(lex, &p);
			struct im_signer *b = signer(NULL, &p);

			im_signer_set_lexicon(b, lex, with_masks ? masks : NULL);
			for (int doc = 0; doc < 40; doc++) {
				/* From a few terms to most of L; with few L
				 * terms and many of B, S is extended from B. */
				unsigned nl = doc == 39	 ? 5800
					      : doc < 20 ? xs(60)
							 : xs(900);
				unsigned nb = xs(doc % 3 ? 40 : 400);
				struct im_doc_sigs da, db;
				size_t n = 0;

				im_terms_clear(&u);
				for (unsigned i = 0; i < nl; i++)
					add(&u, word("lex", xs(6000)));
				for (unsigned i = 0; long_l[i]; i++)
					if (xs(2))
						add(&u, long_l[i]);
				for (unsigned i = 0; i < nb; i++)
					add(&u, word("rar", xs(400)));
				for (unsigned i = 0; i < 20; i++)
					add(&u, word("out", xs(1000)));
				ck_assert_int_eq(
					im_signer_sign_terms(a, &u, &da, NULL),
					0);
				for (size_t i = 0; i < u.n; i++) {
					long ix = im_lexicon_lookup(
						lex, im_terms_str(&u, i),
						u.v[i].len, u.v[i].hash, NULL);

					if (ix >= 0)
						nums[n++] = (uint32_t)ix;
				}
				memset(&db, 0, sizeof(db));
				db.unique_terms = (uint32_t)u.n;
				ck_assert_int_eq(
					im_signer_sign_numbers(b, nums, n, &db),
					0);
				ck_assert_msg(da.status == db.status &&
						      da.valid == db.valid &&
						      !memcmp(da.sig, db.sig,
							      sizeof(da.sig)),
					      "K = %u, masks %d, document %d: "
					      "numbers sign as terms do",
					      p.k, with_masks, doc);
			}
			struct im_doc_sigs bad = {.unique_terms = 1};

			nums[0] = (uint32_t)(im_lexicon_primary_size(lex) +
					     im_lexicon_secondary_size(lex));
			ck_assert_int_eq(
				im_signer_sign_numbers(b, nums, 1, &bad),
				-EINVAL);
			im_signer_free(a);
			im_signer_free(b);
		}
		free(masks);
	}
	im_terms_release(&u);
	free(nums);
	im_lexicon_free(lex);
}
END_TEST

START_TEST(test_sig_loaded_lexicon_signs_as_built)
{
	/* A built lexicon orders B's terms among L's by the places its build
	 * noted, a loaded one by their bytes: the same S, the same bytes
	 * hashed. L holds w0, w2, ...; B w1, w3, ...: in byte order they
	 * interleave, so every term taken from B lands among P's. */
	char path[] = "/tmp/test_sig_lex.XXXXXX";
	struct im_lexicon *built, *loaded;
	struct im_coord_info info[IM_MAX_COORDS];
	struct im_doc_sigs a, b;
	struct im_params p;
	struct im_terms u;
	struct im_df *df;
	int fd = mkstemp(path);

	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(im_df_new(&df), 0);
	im_terms_init(&u);
	for (unsigned d = 0; d < 100; d++) {
		im_terms_clear(&u);
		for (unsigned i = 0; i < 1200; i++)
			if (d < (i % 2 ? 1 + i % 3 / 2 : 10u))
				add(&u, word("w", i));
		ck_assert_int_eq(im_df_add(df, &u), 0);
	}
	ck_assert_int_eq(im_lexicon_build(df, 0.2, 0.8, 100000, &built), 0);
	im_df_free(df);
	ck_assert_ptr_nonnull(im_lexicon_byte_order(built));
	ck_assert_int_eq(im_lexicon_save(built, path), 0);
	ck_assert_int_eq(im_lexicon_load(path, &loaded, NULL, 0), 0);
	unlink(path);
	ck_assert_ptr_null(im_lexicon_byte_order(loaded));

	test_params(&p);
	p.keep = 0.5;
	xs_state = 88172645463325252ull;
	for (int doc = 0; doc < 60; doc++) {
		struct im_signer *sa, *sb;
		/* Few L terms and some or many of B: S is extended by up to
		 * 32 terms sorted on the spot, or by more read off B in
		 * byte order. */
		unsigned nl = 5 + xs(40), nb = doc % 2 ? xs(30) : 60 + xs(300);

		p.min_ratio = doc % 3 ? 0.5 : 0.9;
		sa = signer(built, &p);
		sb = signer(loaded, &p);
		im_terms_clear(&u);
		for (unsigned i = 0; i < nl; i++)
			add(&u, word("w", 2 * xs(600)));
		for (unsigned i = 0; i < nb; i++)
			add(&u, word("w", 2 * xs(600) + 1));
		ck_assert_int_eq(im_signer_sign_terms(sa, &u, &a, info), 0);
		ck_assert_int_eq(im_signer_sign_terms(sb, &u, &b, NULL), 0);
		ck_assert_msg(a.status == b.status && a.valid == b.valid &&
				      !memcmp(a.sig, b.sig, sizeof(a.sig)),
			      "document %d: the loaded lexicon signs as built",
			      doc);
		for (unsigned k = 0; k <= p.k; k++)
			if (is_set(&a, k))
				assert_hash_matches_set(sa, &a, k);
		im_signer_free(sa);
		im_signer_free(sb);
	}
	im_terms_release(&u);
	im_lexicon_free(built);
	im_lexicon_free(loaded);
}
END_TEST

START_TEST(test_sig_trim_then_sign_again)
{
	/* A daemon's worker trims its signer after a text of many terms (a
	 * word list) and signs on with it. Trimming freed Q's sort keys and
	 * left them named: the next large text or im_signer_free() (the
	 * daemon's unmount) freed them again. 300,000 terms pass the 32 MB
	 * a trim keeps. */
	struct im_lexicon *lex;
	struct im_doc_sigs a, b;
	struct im_signer *s;
	struct im_params p;
	struct im_terms u;

	/* A quarter of this file's time under valgrind, for a double free
	 * that the plain run (SIGSEGV) and ASan's already catch. */
	if (RUNNING_ON_VALGRIND)
		return;
	lex = make_lexicon(200, 100, NULL, NULL);
	test_params(&p);
	s = signer(lex, &p);
	im_terms_init(&u);
	doc_terms(&u, 150, 80, 300000);
	ck_assert_int_eq(im_signer_sign_terms(s, &u, &a, NULL), 0);
	im_signer_trim(s);
	ck_assert_int_eq(im_signer_sign_terms(s, &u, &b, NULL), 0);
	ck_assert(a.status == b.status && !memcmp(a.sig, b.sig, sizeof(a.sig)));
	im_signer_trim(s);
	im_signer_free(s);
	im_terms_release(&u);
	im_lexicon_free(lex);
}
END_TEST

/* im_signer_sign_numbers() of a signer that signed nothing before. */
static void sign_fresh(const struct im_lexicon *lex, const struct im_params *p,
		       const uint32_t *nums, size_t n, uint32_t unique_terms,
		       struct im_doc_sigs *out)
{
	struct im_signer *s = signer(NULL, p);

	im_signer_set_lexicon(s, lex, NULL);
	memset(out, 0, sizeof(*out));
	out->unique_terms = unique_terms;
	ck_assert_int_eq(im_signer_sign_numbers(s, nums, n, out), 0);
	im_signer_free(s);
}

static bool same_sigs(const struct im_doc_sigs *a, const struct im_doc_sigs *b)
{
	return a->status == b->status && a->valid == b->valid &&
	       !memcmp(a->sig, b->sig, sizeof(a->sig));
}

/* Sign with @p s, which remembers what it signed, and check the result is a
 * fresh signer's. */
static void sign_check(struct im_signer *s, const struct im_lexicon *lex,
		       const struct im_params *p, const uint32_t *nums,
		       size_t n, uint32_t unique_terms, const char *what,
		       struct im_doc_sigs *out)
{
	struct im_doc_sigs ref;

	sign_fresh(lex, p, nums, n, unique_terms, &ref);
	memset(out, 0, sizeof(*out));
	out->unique_terms = unique_terms;
	ck_assert_int_eq(im_signer_sign_numbers(s, nums, n, out), 0);
	ck_assert_msg(same_sigs(out, &ref), "%s: signed as a fresh signer does",
		      what);
}

START_TEST(test_sig_numbers_memo)
{
	struct im_lexicon *lex = make_lexicon(200, 40, NULL, NULL);
	/* The long terms sort among the others: the same numbers are other
	 * terms. */
	struct im_lexicon *lex2 = make_lexicon(200, 40, long_l, NULL);
	uint32_t a[61], b[61], rev[60];
	struct im_doc_sigs da, da2, db, dx;
	struct im_params p;
	struct im_signer *s;

	test_params(&p);
	s = signer(NULL, &p);
	im_signer_set_lexicon(s, lex, NULL);
	for (uint32_t i = 0; i < 60; i++) {
		a[i] = b[i] = (i * 7) % 60;
		rev[59 - i] = a[i];
	}
	/* One number more than a, and b: a's last number replaced; both
	 * begin as a does. */
	a[60] = 150;
	b[59] = 100;
	sign_check(s, lex, &p, a, 60, 80, "a", &da);
	ck_assert_msg(da.status == IM_DOC_SIGNED, "a is signed");
	sign_check(s, lex, &p, a, 60, 80, "a again", &dx);
	sign_check(s, lex, &p, a, 60, 400, "a of more terms", &dx);
	ck_assert_msg(dx.valid != da.valid, "|U| decides the ratio");
	sign_check(s, lex, &p, b, 60, 80, "b, a's first numbers", &db);
	ck_assert_msg(!same_sigs(&da, &db), "b is not a");
	sign_check(s, lex, &p, a, 61, 80, "a and one more", &dx);
	ck_assert_msg(!same_sigs(&da, &dx), "a and one more is not a");
	sign_check(s, lex, &p, rev, 60, 80, "a in another order", &dx);
	ck_assert_msg(same_sigs(&da, &dx), "the order does not matter");
	sign_check(s, lex, &p, a, 60, 80, "a after the others", &dx);
	sign_check(s, lex, &p, a, 0, 80, "no term", &dx);
	sign_check(s, lex, &p, a, 0, 80, "no term again", &dx);
	im_signer_set_lexicon(s, lex2, NULL);
	sign_check(s, lex2, &p, a, 60, 80, "a with another lexicon", &da2);
	ck_assert_msg(!same_sigs(&da, &da2), "another lexicon, other terms");
	im_signer_free(s);
	im_lexicon_free(lex);
	im_lexicon_free(lex2);
}
END_TEST

/*
 * im_signer_sign_numbers_later() then im_signer_flush(): every document as
 * a fresh signer signs it, over more documents than wait at once, with
 * exact copies next to each other (which take the result of the one that
 * waits), a copy of another |U|, and documents with no term.
 */
START_TEST(test_sig_numbers_later)
{
	enum { DOCS = 40, MAXN = 120 };
	struct im_lexicon *lex = make_lexicon(200, 40, NULL, NULL);
	static uint32_t nums[DOCS][MAXN];
	struct im_doc_sigs out[DOCS], ref, again;
	size_t n[DOCS], nprimary[DOCS] = {0};
	uint32_t unique[DOCS];
	unsigned signed_docs = 0, took_b = 0;
	struct im_params p;
	struct im_signer *s;
	uint64_t x = 42;

	test_params(&p);
	s = signer(NULL, &p);
	im_signer_set_lexicon(s, lex, NULL);
	for (unsigned d = 0; d < DOCS; d++) {
		bool copy = d % 5 == 3 || d % 5 == 4;

		n[d] = 0;
		unique[d] = copy ? unique[d - 1] : 0;
		if (copy) {
			/* An exact copy of the one before; the second one
			 * of another |U| (another document). */
			memcpy(nums[d], nums[d - 1], sizeof(nums[d]));
			n[d] = n[d - 1];
			if (d % 5 == 4)
				unique[d] = unique[d - 1] + 90;
		} else if (d % 11 != 7) {
			/* Distinct numbers of the 240, in a mixed order. */
			for (uint32_t t = 0; t < 240 && n[d] < MAXN; t++) {
				x = x * 6364136223846793005u + 1442695040888963407u;
				if ((x >> 60) < 6)
					nums[d][n[d]++] = (t * 97) % 240;
			}
		}
		for (size_t i = 0; i < n[d]; i++)
			nprimary[d] += nums[d][i] < im_lexicon_primary_size(lex);
		/* Two in three with one term of L too few for min_ratio
		 * 0.25 (the test's): S then takes a term of B, in every
		 * coordinate. */
		if (!copy)
			unique[d] = (uint32_t)(d % 3 ? 4 * nprimary[d] + 4
						     : n[d] + (x >> 58));
		memset(&out[d], 0, sizeof(out[d]));
		out[d].unique_terms = unique[d];
		ck_assert_int_eq(im_signer_sign_numbers_later(
					 s, nums[d], n[d], &out[d],
					 IM_MEMO_FIND | IM_MEMO_KEEP),
				 0);
	}
	ck_assert_int_eq(im_signer_flush(s), 0);
	for (unsigned d = 0; d < DOCS; d++) {
		sign_fresh(lex, &p, nums[d], n[d], unique[d], &ref);
		ck_assert_msg(same_sigs(&out[d], &ref),
			      "document %u signed as a fresh signer does", d);
		signed_docs += ref.status == IM_DOC_SIGNED;
		/* Coordinate 0 short of min_ratio 0.25 with L alone. */
		took_b += ref.valid & 1 && 4 * nprimary[d] < unique[d];
	}
	ck_assert_msg(signed_docs > DOCS / 2, "most documents are signed");
	ck_assert_msg(took_b > DOCS / 4, "S took terms of B");
	/* What was flushed is remembered, right. */
	sign_check(s, lex, &p, nums[DOCS - 2], n[DOCS - 2], unique[DOCS - 2],
		   "a document signed before", &again);
	im_signer_free(s);
	im_lexicon_free(lex);
}
END_TEST

/*
 * Two signers sharing a memo: a of lexicon lex and b of lex2, which differ
 * (which sharing forbids), so that a result b finds shows as a's; and the
 * 60 numbers x they sign.
 */
struct sharing {
	struct im_lexicon *lex, *lex2;
	struct im_params p;
	struct im_sig_memo *m;
	struct im_signer *a, *b;
	uint32_t x[60];
};

static void sharing_begin(struct sharing *f)
{
	f->lex = make_lexicon(200, 40, NULL, NULL);
	f->lex2 = make_lexicon(200, 40, long_l, NULL);
	test_params(&f->p);
	for (uint32_t i = 0; i < 60; i++)
		f->x[i] = (i * 7) % 60;
	ck_assert_int_eq(im_sig_memo_new(&f->m), 0);
	f->a = signer(NULL, &f->p);
	f->b = signer(NULL, &f->p);
	im_signer_set_lexicon(f->a, f->lex, NULL);
	im_signer_set_lexicon(f->b, f->lex2, NULL);
	im_signer_share_memo(f->a, f->m);
	im_signer_share_memo(f->b, f->m);
}

static void sharing_end(struct sharing *f)
{
	im_signer_free(f->a);
	im_signer_free(f->b);
	im_sig_memo_free(f->m);
	im_lexicon_free(f->lex);
	im_lexicon_free(f->lex2);
}

/* im_signer_sign_numbers_later() of 60 numbers @p x, |U| 80, asking @p use
 * of the memo, and the flush. */
static void sign_later(struct im_signer *s, const uint32_t *x, unsigned use,
		       struct im_doc_sigs *out)
{
	memset(out, 0, sizeof(*out));
	out->unique_terms = 80;
	ck_assert_int_eq(im_signer_sign_numbers_later(s, x, 60, out, use), 0);
	ck_assert_int_eq(im_signer_flush(s), 0);
}

/*
 * im_signer_sign_numbers_later() remembers a result only with IM_MEMO_KEEP
 * and looks one up only with IM_MEMO_FIND: shown, as above, by signers of
 * different lexicons sharing a memo, where a result found is the other's.
 */
START_TEST(test_sig_numbers_later_memo_use)
{
	struct im_doc_sigs da, db, own2;
	struct sharing f;

	sharing_begin(&f);
	sign_fresh(f.lex2, &f.p, f.x, 60, 80, &own2);
	sign_later(f.a, f.x, IM_MEMO_FIND, &da);
	sign_later(f.b, f.x, IM_MEMO_FIND, &db);
	ck_assert_msg(same_sigs(&db, &own2) && !same_sigs(&da, &db),
		      "without IM_MEMO_KEEP, a's result is not remembered");
	sign_later(f.a, f.x, IM_MEMO_KEEP, &da);
	sign_later(f.b, f.x, 0, &db);
	ck_assert_msg(same_sigs(&db, &own2),
		      "without IM_MEMO_FIND, b does not look a's result up");
	sign_later(f.b, f.x, IM_MEMO_FIND, &db);
	ck_assert_msg(same_sigs(&db, &da),
		      "with IM_MEMO_FIND, b finds what a kept");
	sharing_end(&f);
}
END_TEST

/* Sign documents later, each of 60 numbers of its own, until one's call
 * fails (its room made by hashing those that waited, with sha1_fail set):
 * @return how many calls succeeded first. */
static unsigned sign_later_until_failure(struct im_signer *s)
{
	struct im_doc_sigs out[200];
	uint32_t x[60];

	for (unsigned d = 0; d < 200; d++) {
		for (uint32_t i = 0; i < 60; i++)
			x[i] = (i * 7 + d) % 200;
		memset(&out[d], 0, sizeof(out[d]));
		out[d].unique_terms = 80;
		if (im_signer_sign_numbers_later(s, x, 60, &out[d], 0) < 0)
			return d;
	}
	ck_abort_msg("no call failed");
	return 0;
}

/*
 * A flush that fails while documents are signed later drops what waited:
 * the next im_signer_flush() says so, though nothing waits any more, or a
 * caller that delivers its results after a successful flush (core/scan.c)
 * delivered signed documents whose sig[] were never written. Once said,
 * it is not said again.
 */
START_TEST(test_sig_numbers_later_dropped)
{
	struct im_lexicon *lex = make_lexicon(200, 40, NULL, NULL);
	struct im_doc_sigs w;
	struct im_params p;
	struct im_signer *s;
	uint32_t x[60];

	test_params(&p);
	s = signer(NULL, &p);
	im_signer_set_lexicon(s, lex, NULL);
	sha1_fail = true;
	ck_assert_msg(sign_later_until_failure(s) > 0,
		      "some documents waited before the failing flush");
	sha1_fail = false;
	ck_assert_int_eq(im_signer_flush(s), -ENOMEM);
	ck_assert_int_eq(im_signer_flush(s), 0);
	/* A new lexicon flushes too. */
	for (uint32_t i = 0; i < 60; i++)
		x[i] = (i * 7) % 60;
	memset(&w, 0, sizeof(w));
	w.unique_terms = 80;
	ck_assert_int_eq(im_signer_sign_numbers_later(s, x, 60, &w, 0), 0);
	sha1_fail = true;
	im_signer_set_lexicon(s, lex, NULL);
	sha1_fail = false;
	ck_assert_int_eq(im_signer_flush(s), -ENOMEM);
	ck_assert_int_eq(im_signer_flush(s), 0);
	im_signer_free(s);
	im_lexicon_free(lex);
}
END_TEST

/* Signers sharing a memo find each other's results: shown by one whose
 * lexicon differs (which sharing forbids) getting the other's. */
START_TEST(test_sig_numbers_shared_memo)
{
	struct im_doc_sigs da, db, want2;
	struct sharing f;

	sharing_begin(&f);
	sign_check(f.a, f.lex, &f.p, f.x, 60, 80, "a", &da);
	memset(&db, 0, sizeof(db));
	db.unique_terms = 80;
	ck_assert_int_eq(im_signer_sign_numbers(f.b, f.x, 60, &db), 0);
	ck_assert_msg(same_sigs(&da, &db), "b found what a signed");
	im_signer_share_memo(f.b, NULL);
	sign_check(f.b, f.lex2, &f.p, f.x, 60, 80, "b with its own memo",
		   &want2);
	ck_assert_msg(!same_sigs(&da, &want2), "b's lexicon signs otherwise");
	sharing_end(&f);
}
END_TEST

enum { SHARED_SEQS = 24, SHARED_LEN = 50, SHARED_CALLS = 3000 };

struct sharer {
	const struct im_lexicon *lex;
	struct im_sig_memo *m;
	const uint32_t (*seqs)[SHARED_LEN];
	const struct im_doc_sigs *want;
	unsigned seed;
	int wrong;
};

/* Sign the shared sequences in an order of one's own, counting results
 * that are not the fresh signer's. */
static void *sharer_main(void *arg)
{
	struct sharer *sh = arg;
	struct im_params p;
	struct im_signer *s;

	test_params(&p);
	if (im_signer_new(NULL, &p, &s)) {
		sh->wrong = -1;
		return NULL;
	}
	im_signer_set_lexicon(s, sh->lex, NULL);
	im_signer_share_memo(s, sh->m);
	for (unsigned c = 0; c < SHARED_CALLS; c++) {
		unsigned i = (c * 7 + sh->seed) % SHARED_SEQS;
		/* Lengths that differ give sequences of their own. */
		size_t n = SHARED_LEN - i % 3;
		struct im_doc_sigs d;

		memset(&d, 0, sizeof(d));
		d.unique_terms = 90;
		if (im_signer_sign_numbers(s, sh->seqs[i], n, &d) ||
		    !same_sigs(&d, &sh->want[i]))
			sh->wrong++;
	}
	im_signer_free(s);
	return NULL;
}

/* Threads signing through one memo at once get what a fresh signer gets. */
START_TEST(test_sig_numbers_shared_memo_threads)
{
	struct im_lexicon *lex = make_lexicon(200, 40, NULL, NULL);
	static uint32_t seqs[SHARED_SEQS][SHARED_LEN];
	struct im_doc_sigs want[SHARED_SEQS];
	struct sharer sh[4];
	pthread_t tid[4];
	struct im_sig_memo *m;
	struct im_params p;

	test_params(&p);
	xs_state = 2463534242ull;
	for (unsigned i = 0; i < SHARED_SEQS; i++) {
		/* The same first numbers, so that they meet in slots. */
		for (unsigned j = 0; j < SHARED_LEN; j++)
			seqs[i][j] = j < 20 ? j : 20 + xs(220);
		/* Once each: no repeat within a sequence. */
		for (unsigned j = 20; j < SHARED_LEN; j++)
			for (unsigned k = 20; k < j; k++)
				if (seqs[i][k] == seqs[i][j]) {
					seqs[i][j] =
						20 + (seqs[i][j] + 1) % 220;
					k = 19;
				}
		sign_fresh(lex, &p, seqs[i], SHARED_LEN - i % 3, 90, &want[i]);
	}
	ck_assert_int_eq(im_sig_memo_new(&m), 0);
	for (unsigned t = 0; t < 4; t++) {
		sh[t] = (struct sharer){lex, m, seqs, want, t * 5, 0};
		ck_assert_int_eq(
			pthread_create(&tid[t], NULL, sharer_main, &sh[t]), 0);
	}
	for (unsigned t = 0; t < 4; t++) {
		pthread_join(tid[t], NULL);
		ck_assert_msg(sh[t].wrong == 0,
			      "thread %u: %d results not a fresh signer's "
			      "(-1: no signer)",
			      t, sh[t].wrong);
	}
	im_sig_memo_free(m);
	im_lexicon_free(lex);
}
END_TEST

/* ---- Files ------------------------------------------------------------------ */

static char tmpdir[64];
static int dirfd_ = -1;

static void tmp_setup(void)
{
	strcpy(tmpdir, "/tmp/test_sig.XXXXXX");
	ck_assert_msg(mkdtemp(tmpdir) != NULL, "mkdtemp: %s", strerror(errno));
	dirfd_ = open(tmpdir, O_RDONLY | O_DIRECTORY);
	ck_assert_int_ge(dirfd_, 0);
}

static void tmp_teardown(void)
{
	char cmd[256];
	close(dirfd_);
	snprintf(cmd, sizeof(cmd), "chmod -R u+rwx '%s'; rm -rf '%s'", tmpdir,
		 tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

static void put_file(const char *name, const char *data, size_t len)
{
	int fd = openat(dirfd_, name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ck_assert_msg(fd >= 0, "create %s: %s", name, strerror(errno));
	ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
	close(fd);
}

/* A text of @p n lexicon words starting at word @p from. */
static size_t lex_text(char *buf, size_t cap, unsigned from, unsigned n)
{
	size_t len = 0;
	for (unsigned i = from; i < from + n; i++)
		len += (size_t)snprintf(buf + len, cap - len, "%s%s",
					word("lex", i),
					i % 8 == 7 ? ".\n" : " ");
	return len;
}

START_TEST(test_sig_file_statuses)
{
	struct im_lexicon *lex = make_lexicon(200, 100, NULL, NULL);
	struct im_params p;
	struct im_doc_sigs d;
	struct stat st;
	char text[8192];
	size_t len = lex_text(text, sizeof(text), 0, 40);

	test_params(&p);
	struct im_signer *s = signer(lex, &p);

	put_file("doc.txt", text, len);
	ck_assert_int_eq(im_signer_sign_at(s, dirfd_, "doc.txt", &d, &st), 0);
	ck_assert_uint_eq(d.status, IM_DOC_SIGNED);
	ck_assert_uint_eq(d.unique_terms, 40);
	ck_assert(d.exact_valid);
	ck_assert_int_eq(st.st_size, (off_t)len);
	ck_assert(S_ISREG(st.st_mode));

	/* The file on disk signs like the same bytes in memory. */
	struct im_doc_sigs m;
	ck_assert_int_eq(im_signer_sign_buf(s, "doc.txt", text, len, &m), 0);
	/* Only the file's size and mtime are not in the bytes. */
	ck_assert_uint_eq(d.size, len);
	ck_assert_int_eq(d.mtime_ns, (int64_t)st.st_mtim.tv_sec * 1000000000 +
					     st.st_mtim.tv_nsec);
	ck_assert_uint_eq(m.size, 0);
	m.size = d.size;
	m.mtime_ns = d.mtime_ns;
	ck_assert(memcmp(&m, &d, sizeof(d)) == 0);

	ck_assert_int_eq(mkdirat(dirfd_, "sub", 0755), 0);
	put_file("sub/doc.txt", text, len);
	ck_assert_int_eq(im_signer_sign_at(s, dirfd_, "sub/doc.txt", &m, NULL),
			 0);
	ck_assert_uint_eq(m.size, len);
	m.mtime_ns = d.mtime_ns;
	ck_assert_msg(memcmp(&m, &d, sizeof(d)) == 0,
		      "a path below dirfd reads the same");

	put_file("bin.dat", "text\0more text", 14);
	ck_assert_int_eq(im_signer_sign_at(s, dirfd_, "bin.dat", &d, &st), 0);
	ck_assert_msg(d.status == IM_DOC_BINARY && d.exact_valid &&
			      d.format == IM_FMT_BINARY,
		      "a NUL byte makes a file binary, still hashed for the "
		      "exact-copy tier");

	ck_assert_int_eq(im_signer_sign_at(s, dirfd_, "gone.txt", &d, &st), 0);
	ck_assert_msg(d.status == IM_DOC_ERROR && d.err == ENOENT,
		      "a vanished file is an error, not a failure");
	ck_assert_int_eq(st.st_ino, 0);

	ck_assert_int_eq(symlinkat("doc.txt", dirfd_, "link"), 0);
	ck_assert_int_eq(im_signer_sign_at(s, dirfd_, "link", &d, NULL), 0);
	ck_assert_msg(d.status == IM_DOC_ERROR && d.err == ELOOP,
		      "symlinks are not followed");

	ck_assert_int_eq(im_signer_sign_at(s, dirfd_, "sub", &d, NULL), 0);
	ck_assert_msg(d.status == IM_DOC_ERROR && d.err == EISDIR,
		      "a directory is not a document");

	ck_assert_int_eq(mkfifoat(dirfd_, "fifo", 0644), 0);
	ck_assert_int_eq(im_signer_sign_at(s, dirfd_, "fifo", &d, NULL), 0);
	ck_assert_msg(d.status == IM_DOC_ERROR,
		      "a fifo is refused without blocking");

	put_file("secret.txt", text, len);
	ck_assert_int_eq(fchmodat(dirfd_, "secret.txt", 0, 0), 0);
	ck_assert_int_eq(im_signer_sign_at(s, dirfd_, "secret.txt", &d, NULL),
			 0);
	if (geteuid() != 0)
		ck_assert_msg(d.status == IM_DOC_ERROR && d.err == EACCES,
			      "an unreadable file is an error");

	put_file("empty.txt", "", 0);
	ck_assert_int_eq(im_signer_sign_at(s, dirfd_, "empty.txt", &d, NULL),
			 0);
	ck_assert_msg(d.status == IM_DOC_REJECTED && !d.exact_valid,
		      "an empty file is a rejected text and no exact copy of "
		      "other empty files");

	/* max_size */
	im_signer_free(s);
	p.max_size = 100;
	s = signer(lex, &p);
	ck_assert_int_eq(im_signer_sign_at(s, dirfd_, "doc.txt", &d, &st), 0);
	ck_assert_msg(d.status == IM_DOC_TOO_BIG, "over max_size: skipped");
	ck_assert_int_eq(st.st_size, (off_t)len);
	put_file("small.txt", text, 100);
	ck_assert_int_eq(im_signer_sign_at(s, dirfd_, "small.txt", &d, NULL),
			 0);
	ck_assert_msg(d.status != IM_DOC_TOO_BIG, "exactly max_size is read");

	/* Terms for lexicon building go through the same path. */
	enum im_doc_status status;
	const struct im_terms *terms;
	ck_assert_int_eq(
		im_signer_terms_at(s, dirfd_, "small.txt", &status, &terms), 0);
	ck_assert_uint_eq(status, IM_DOC_SIGNED);
	ck_assert_ptr_nonnull(terms);
	ck_assert_uint_gt(terms->n, 5);
	ck_assert_int_eq(
		im_signer_terms_at(s, dirfd_, "bin.dat", &status, &terms), 0);
	ck_assert_uint_eq(status, IM_DOC_BINARY);
	ck_assert_ptr_null(terms);
	ck_assert_int_eq(
		im_signer_terms_at(s, dirfd_, "doc.txt", &status, &terms), 0);
	ck_assert_uint_eq(status, IM_DOC_TOO_BIG);
	ck_assert_int_eq(im_signer_terms_at(s, dirfd_, "gone", &status, &terms),
			 0);
	ck_assert_uint_eq(status, IM_DOC_ERROR);

	im_signer_free(s);
	im_lexicon_free(lex);
}
END_TEST

START_TEST(test_sig_terms_only_signer)
{
	struct im_params p;
	struct im_signer *s;
	enum im_doc_status status;
	const struct im_terms *terms;
	struct im_doc_sigs d;

	test_params(&p);
	ck_assert_int_eq(im_signer_new(NULL, &p, &s), 0);
	put_file("a.txt", "alpha bet gamma delta epsilon", 29);
	ck_assert_int_eq(
		im_signer_terms_at(s, dirfd_, "a.txt", &status, &terms), 0);
	ck_assert_uint_eq(status, IM_DOC_SIGNED);
	ck_assert_uint_eq(terms->n, 4); /* "bet" is too short */
	ck_assert_int_eq(im_signer_sign_terms(s, terms, &d, NULL), -EINVAL);
	im_signer_free(s);
}
END_TEST

START_TEST(test_sig_exact_hash)
{
	struct im_lexicon *lex = make_lexicon(200, 100, NULL, NULL);
	struct im_params p;
	struct im_doc_sigs a, b, c;
	char text[8192];
	size_t len = lex_text(text, sizeof(text), 0, 40);

	test_params(&p);
	struct im_signer *s = signer(lex, &p);
	put_file("one.txt", text, len);
	put_file("two.txt", text, len);
	text[0] ^= 0x20; /* the same words, one letter in upper case */
	put_file("three.txt", text, len);
	text[0] ^= 0x20;
	ck_assert_int_eq(im_signer_sign_at(s, dirfd_, "one.txt", &a, NULL), 0);
	ck_assert_int_eq(im_signer_sign_at(s, dirfd_, "two.txt", &b, NULL), 0);
	ck_assert_msg(!im_signer_reused(s), "nothing kept unless asked");
	ck_assert_int_eq(im_signer_sign_at(s, dirfd_, "three.txt", &c, NULL),
			 0);
	ck_assert(a.exact_valid && b.exact_valid && c.exact_valid);
	ck_assert_msg(memcmp(a.exact, b.exact, 16) == 0,
		      "identical bytes, identical exact hash");
	ck_assert_msg(memcmp(a.exact, c.exact, 16) != 0,
		      "one byte changed, exact hash changed");
	ck_assert_msg(im_sig_cmp(&a.sig[0], &c.sig[0]) == 0,
		      "but the case-folded terms sign the same");

	XXH128_canonical_t want;
	XXH128_canonicalFromHash(&want, XXH3_128bits(text, len));
	ck_assert_msg(memcmp(a.exact, want.digest, 16) == 0,
		      "exact is the canonical XXH3-128 of the bytes");

	/* Kept results: an exact copy gets its original's result, and says
	 * so (im_signer_reused()); other bytes are read as usual. */
	struct im_doc_sigs kept;

	im_signer_keep_results(s, true);
	ck_assert_int_eq(im_signer_sign_at(s, dirfd_, "one.txt", &kept, NULL),
			 0);
	ck_assert(!im_signer_reused(s));
	ck_assert_int_eq(im_signer_sign_at(s, dirfd_, "two.txt", &kept, NULL),
			 0);
	ck_assert_msg(im_signer_reused(s), "an exact copy reuses the result");
	kept.mtime_ns = b.mtime_ns;
	ck_assert_msg(memcmp(&kept, &b, sizeof(b)) == 0,
		      "the result reused is the copy's own");
	ck_assert_int_eq(im_signer_sign_at(s, dirfd_, "three.txt", &kept, NULL),
			 0);
	ck_assert(!im_signer_reused(s));
	ck_assert(memcmp(kept.exact, c.exact, 16) == 0);
	im_signer_keep_results(s, false);

	/* Too short to sign, still an exact hash. */
	put_file("tiny1", "hello", 5);
	put_file("tiny2", "hello", 5);
	ck_assert_int_eq(im_signer_sign_at(s, dirfd_, "tiny1", &a, NULL), 0);
	ck_assert_int_eq(im_signer_sign_at(s, dirfd_, "tiny2", &b, NULL), 0);
	ck_assert_uint_eq(a.status, IM_DOC_REJECTED);
	ck_assert(a.exact_valid && memcmp(a.exact, b.exact, 16) == 0);
	im_signer_free(s);
	im_lexicon_free(lex);
}
END_TEST

/* A lender (im_signer_set_lender()) that lends one result, counting the
 * times it is asked; a result the signer must refuse when told to. */
enum lend_wrong {
	LEND_RIGHT,
	LEND_OTHER_BYTES,
	LEND_BINARY,
	LEND_OTHER_K,
	LEND_FILTER,
	LEND_WRONGS
};

struct lender {
	struct im_doc_sigs lend;
	int asked;
	enum lend_wrong wrong;
};

static bool lend_one(const uint8_t exact[16], struct im_doc_sigs *out,
		     void *arg)
{
	struct lender *l = arg;

	l->asked++;
	if (memcmp(exact, l->lend.exact, 16))
		return false;
	*out = l->lend;
	switch (l->wrong) {
	case LEND_OTHER_BYTES: out->exact[0] ^= 1; break;
	case LEND_BINARY: out->status = IM_DOC_BINARY; break;
	case LEND_OTHER_K: out->ncoords--; break;
	case LEND_FILTER: out->format = IM_FMT_FILTER; break;
	default: break;
	}
	return true;
}

START_TEST(test_sig_lender)
{
	struct im_lexicon *lex = make_lexicon(200, 100, NULL, NULL);
	struct im_params p;
	struct im_doc_sigs a, b, other;
	struct lender l = {0};
	char text[8192];
	size_t len = lex_text(text, sizeof(text), 0, 40);

	test_params(&p);
	struct im_signer *s = signer(lex, &p);
	put_file("one.txt", text, len);
	put_file("copy.txt", text, len);
	struct timespec older[2] = {{0, UTIME_OMIT}, {1000000000, 5}};
	ck_assert_int_eq(utimensat(dirfd_, "copy.txt", older, 0), 0);
	len = lex_text(text, sizeof(text), 7, 40);
	put_file("other.txt", text, len);
	ck_assert_int_eq(im_signer_sign_at(s, dirfd_, "one.txt", &a, NULL), 0);
	ck_assert_uint_eq(a.status, IM_DOC_SIGNED);
	im_signer_free(s);

	/* A fresh signer, which kept nothing: the copy gets the lent result
	 * without being extracted, and the signer keeps it. A result that
	 * is not exactly what was lent would show as another sketch. */
	s = signer(lex, &p);
	l.lend = a;
	l.lend.sketch.v[0] ^= 0xff;
	im_signer_set_lender(s, lend_one, &l);
	ck_assert_int_eq(im_signer_sign_at(s, dirfd_, "copy.txt", &b, NULL), 0);
	ck_assert_msg(l.asked == 0, "no lender without kept results");
	ck_assert(!im_signer_reused(s));
	ck_assert_msg(memcmp(&b.sketch, &a.sketch, sizeof(a.sketch)) == 0,
		      "read as usual");

	im_signer_keep_results(s, true);
	ck_assert_int_eq(im_signer_sign_at(s, dirfd_, "copy.txt", &b, NULL), 0);
	ck_assert_int_eq(l.asked, 1);
	ck_assert_msg(im_signer_reused(s), "a lent result counts as reused");
	ck_assert_msg(memcmp(&b.sketch, &l.lend.sketch, sizeof(b.sketch)) == 0,
		      "the copy gets the lent result");
	ck_assert_uint_eq(b.status, IM_DOC_SIGNED);
	struct stat st;
	ck_assert_int_eq(fstatat(dirfd_, "copy.txt", &st, 0), 0);
	ck_assert_msg(b.size == (uint64_t)st.st_size &&
			      b.mtime_ns ==
				      (int64_t)st.st_mtim.tv_sec * 1000000000 +
					      st.st_mtim.tv_nsec,
		      "size and mtime are the copy's own");
	ck_assert_int_eq(im_signer_sign_at(s, dirfd_, "copy.txt", &b, NULL), 0);
	ck_assert_msg(l.asked == 1 && im_signer_reused(s),
		      "the lent result is kept");

	/* Other bytes: asked, nothing lent, read as usual. */
	ck_assert_int_eq(
		im_signer_sign_at(s, dirfd_, "other.txt", &other, NULL), 0);
	ck_assert_int_eq(l.asked, 2);
	ck_assert(!im_signer_reused(s));
	ck_assert_uint_eq(other.status, IM_DOC_SIGNED);
	im_signer_free(s);

	/* A result not for these bytes, not a text's, of another K or made
	 * by a filter (from a name) is not believed: the copy is read. */
	for (l.wrong = LEND_OTHER_BYTES; l.wrong < LEND_WRONGS; l.wrong++) {
		s = signer(lex, &p);
		im_signer_keep_results(s, true);
		im_signer_set_lender(s, lend_one, &l);
		l.asked = 0;
		ck_assert_int_eq(
			im_signer_sign_at(s, dirfd_, "copy.txt", &b, NULL), 0);
		ck_assert_int_eq(l.asked, 1);
		ck_assert_msg(!im_signer_reused(s), "wrong kind %d believed",
			      (int)l.wrong);
		ck_assert_msg(
			memcmp(&b.sketch, &a.sketch, sizeof(a.sketch)) == 0 &&
				memcmp(b.exact, a.exact, 16) == 0 &&
				b.status == IM_DOC_SIGNED &&
				b.ncoords == a.ncoords && b.format == a.format,
			"wrong kind %d: the copy is read as usual",
			(int)l.wrong);
		im_signer_free(s);
	}
	im_lexicon_free(lex);
}
END_TEST

START_TEST(test_sig_large_file)
{
	/* Over the 4 MiB the signer keeps a buffer for, and max_size 0. */
	struct im_lexicon *lex = make_lexicon(200, 100, NULL, NULL);
	struct im_params p;
	struct im_doc_sigs big, small;
	char text[8192];
	size_t len = lex_text(text, sizeof(text), 0, 60);

	test_params(&p);
	p.max_size = 0;
	struct im_signer *s = signer(lex, &p);
	int fd = openat(dirfd_, "big.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ck_assert_int_ge(fd, 0);
	size_t total = 0;
	while (total < (5u << 20)) {
		ck_assert_int_eq(write(fd, text, len), (ssize_t)len);
		total += len;
	}
	close(fd);
	put_file("small.txt", text, len);
	ck_assert_int_eq(im_signer_sign_at(s, dirfd_, "big.txt", &big, NULL),
			 0);
	ck_assert_int_eq(
		im_signer_sign_at(s, dirfd_, "small.txt", &small, NULL), 0);
	ck_assert_uint_eq(big.status, IM_DOC_SIGNED);
	ck_assert_msg(memcmp(big.sig, small.sig, sizeof(big.sig)) == 0,
		      "repeating a text does not change its terms");
	ck_assert(memcmp(big.exact, small.exact, 16) != 0);
	im_signer_free(s);
	im_lexicon_free(lex);
}
END_TEST

START_TEST(test_sig_symlinked_parent_not_followed)
{
	/* "sub" is a symlink to a real directory: sub/doc.txt must not be
	 * read through it (a parent swapped for a symlink leads out of the
	 * tree; issue 12). */
	struct im_lexicon *lex = make_lexicon(200, 100, NULL, NULL);
	struct im_doc_sigs d;
	struct im_params p;
	char text[8192];
	size_t len = lex_text(text, sizeof(text), 0, 40);

	test_params(&p);
	struct im_signer *s = signer(lex, &p);
	ck_assert_int_eq(mkdirat(dirfd_, "real", 0755), 0);
	put_file("real/doc.txt", text, len);
	ck_assert_int_eq(symlinkat("real", dirfd_, "sub"), 0);
	ck_assert_int_eq(im_signer_sign_at(s, dirfd_, "real/doc.txt", &d, NULL), 0);
	ck_assert_uint_eq(d.status, IM_DOC_SIGNED);
	ck_assert_int_eq(im_signer_sign_at(s, dirfd_, "sub/doc.txt", &d, NULL), 0);
	ck_assert_uint_eq(d.status, IM_DOC_ERROR);
	ck_assert_int_eq(d.err, ELOOP);
	ck_assert_int_eq(im_signer_sign_at(s, dirfd_, "real/../real/doc.txt", &d,
					   NULL), 0);
	ck_assert_int_eq(d.err, EXDEV);
	im_signer_free(s);
	im_lexicon_free(lex);
}
END_TEST

/* A sparse file of @p size bytes (zeros: binary) ending in @p tail. */
static void put_sparse(const char *name, size_t size, const char *tail)
{
	int fd = openat(dirfd_, name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	size_t n = strlen(tail);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, tail, n, (off_t)(size - n)), (ssize_t)n);
	close(fd);
}

/* Past 240 bytes exact_of() takes libxxhash's XXH3 for the CPU at hand: the
 * same hash on either side, and at lengths around XXH3's stripes and
 * blocks. */
START_TEST(test_sig_exact_hash_long)
{
	static const size_t lens[] = {240,   241,   1024,  4096,
				      65535, 65536, 65537, 100003};
	struct im_lexicon *lex = make_lexicon(200, 100, NULL, NULL);
	struct im_params p;
	size_t cap = 100003;
	char *text = malloc(cap);

	ck_assert_ptr_nonnull(text);
	for (size_t i = 0; i < cap; i++)
		text[i] = i % 7 == 6 ? ' ' : (char)('a' + (i * 31 + i / 7) % 26);
	test_params(&p);
	struct im_signer *s = signer(lex, &p);
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		struct im_doc_sigs d;
		XXH128_canonical_t want;

		put_file("long.txt", text, lens[i]);
		ck_assert_int_eq(
			im_signer_sign_at(s, dirfd_, "long.txt", &d, NULL), 0);
		XXH128_canonicalFromHash(&want, XXH3_128bits(text, lens[i]));
		ck_assert_msg(d.exact_valid &&
				      memcmp(d.exact, want.digest, 16) == 0,
			      "%zu bytes: exact is their canonical XXH3-128",
			      lens[i]);
	}
	im_signer_free(s);
	im_lexicon_free(lex);
	free(text);
}
END_TEST

START_TEST(test_sig_large_binary_streamed)
{
	/* max_size 0 and a 96 MiB binary: sniffed from its first bytes and
	 * hashed as it streams by, never held whole (issue 12, defect 6). */
	const size_t size = (size_t)96 << 20;
	struct im_lexicon *lex = make_lexicon(200, 100, NULL, NULL);
	struct im_doc_sigs a, b;
	struct im_params p;
	struct rusage before, after;
	XXH128_canonical_t want;
	char *whole;

	test_params(&p);
	p.max_size = 0;
	struct im_signer *s = signer(lex, &p);
	put_sparse("a.img", size, "tail A");
	put_sparse("b.img", size, "tail B");
	ck_assert_int_eq(getrusage(RUSAGE_SELF, &before), 0);
	ck_assert_int_eq(im_signer_sign_at(s, dirfd_, "a.img", &a, NULL), 0);
	ck_assert_int_eq(getrusage(RUSAGE_SELF, &after), 0);
	ck_assert_int_eq(im_signer_sign_at(s, dirfd_, "b.img", &b, NULL), 0);
	ck_assert_uint_eq(a.status, IM_DOC_BINARY);
	ck_assert_uint_eq(a.format, IM_FMT_BINARY);
	ck_assert_msg(a.exact_valid && b.exact_valid, "a binary keeps its exact hash");
	ck_assert_msg(memcmp(a.exact, b.exact, 16) != 0,
		      "the last bytes are part of the hash");
	ck_assert_msg(after.ru_maxrss - before.ru_maxrss < 48 * 1024,
		      "signing a 96 MiB binary raised the peak RSS by %ld KiB",
		      after.ru_maxrss - before.ru_maxrss);
	whole = calloc(1, size);
	ck_assert(whole != NULL);
	memcpy(whole + size - 6, "tail A", 6);
	XXH128_canonicalFromHash(&want, XXH3_128bits(whole, size));
	free(whole);
	ck_assert_msg(memcmp(a.exact, want.digest, 16) == 0,
		      "the streamed hash is the XXH3-128 of the whole file");
	im_signer_free(s);
	im_lexicon_free(lex);
}
END_TEST

/* ---- Small things ------------------------------------------------------------ */

START_TEST(test_sig_hex)
{
	struct im_sig s, t;
	char hex[IM_SIG_HEX_LEN + 1];
	for (int i = 0; i < IM_SIG_LEN; i++)
		s.b[i] = (uint8_t)(i * 13 + 7);
	im_sig_hex(&s, hex);
	ck_assert_str_eq(hex, "0714212e3b4855626f7c8996a3b0bdcad7e4f1fe");
	ck_assert_int_eq(im_sig_parse(hex, &t), 0);
	ck_assert_int_eq(im_sig_cmp(&s, &t), 0);
	ck_assert_int_eq(
		im_sig_parse("0714212E3B4855626F7C8996A3B0BDCAD7E4F1FE", &t),
		0);
	ck_assert_int_eq(im_sig_cmp(&s, &t), 0);
	ck_assert_int_eq(im_sig_parse("07141f2e", &t), -EINVAL);
	ck_assert_int_eq(
		im_sig_parse("0714212e3b4855626f7c8996a3b0bdcad7e4f1fe0", &t),
		-EINVAL);
	ck_assert_int_eq(
		im_sig_parse("g714212e3b4855626f7c8996a3b0bdcad7e4f1fe", &t),
		-EINVAL);
	ck_assert_int_eq(im_sig_parse("", &t), -EINVAL);
	t = s;
	t.b[19]++;
	ck_assert_int_lt(im_sig_cmp(&s, &t), 0);
}
END_TEST

START_TEST(test_sig_bad_params)
{
	struct im_params p;
	struct im_signer *s = (void *)1;
	test_params(&p);
	p.k = IM_MAX_LEXICONS + 1;
	ck_assert_int_eq(im_signer_new(NULL, &p, &s), -EINVAL);
	ck_assert_ptr_null(s);
	test_params(&p);
	p.keep = 0;
	ck_assert_int_eq(im_signer_new(NULL, &p, &s), -EINVAL);

	/* Nothing signed yet: nothing to explain. */
	test_params(&p);
	ck_assert_int_eq(im_signer_new(NULL, &p, &s), 0);
	ck_assert_ptr_null(im_signer_last_set(s, 0));
	im_signer_free(s);
}
END_TEST

static Suite *sig_suite(void)
{
	Suite *s = suite_create("sig");
	TCase *tc = tcase_create("signatures");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_sig_same_seed_same_signatures);
	tcase_add_test(tc, test_sig_seed_changes_randomized_coordinates);
	tcase_add_test(tc, test_sig_word_order_and_duplicates);
	tcase_add_test(tc, test_sig_text_order_invariance);
	tcase_add_test(tc, test_sig_coordinate0_is_imatch);
	tcase_add_test(tc, test_sig_long_terms_every_coordinate);
	tcase_add_test(tc, test_sig_numbers_equal_terms);
	tcase_add_test(tc, test_sig_numbers_memo);
	tcase_add_test(tc, test_sig_numbers_later);
	tcase_add_test(tc, test_sig_numbers_later_memo_use);
	tcase_add_test(tc, test_sig_numbers_later_dropped);
	tcase_add_test(tc, test_sig_numbers_shared_memo);
	tcase_add_test(tc, test_sig_numbers_shared_memo_threads);
	tcase_add_test(tc, test_sig_membership_fraction);
	tcase_add_test(tc, test_sig_secondary_extension_threshold);
	tcase_add_test(tc, test_sig_extension_hashes_merged_set);
	tcase_add_test(tc, test_sig_loaded_lexicon_signs_as_built);
	tcase_add_test(tc, test_sig_trim_then_sign_again);
	tcase_add_test(tc, test_sig_min_terms_boundary);
	tcase_add_test(tc, test_sig_min_unique);
	tcase_add_test(tc, test_sig_long_document_small_overlap);
	tcase_add_test(tc, test_sig_hex);
	tcase_add_test(tc, test_sig_bad_params);
	suite_add_tcase(s, tc);

	tc = tcase_create("files");
	tcase_add_checked_fixture(tc, tmp_setup, tmp_teardown);
	tcase_add_test(tc, test_sig_file_statuses);
	tcase_add_test(tc, test_sig_terms_only_signer);
	tcase_add_test(tc, test_sig_exact_hash);
	tcase_add_test(tc, test_sig_exact_hash_long);
	tcase_add_test(tc, test_sig_lender);
	tcase_add_test(tc, test_sig_large_file);
	tcase_add_test(tc, test_sig_large_binary_streamed);
	tcase_add_test(tc, test_sig_symlinked_parent_not_followed);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(sig_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
