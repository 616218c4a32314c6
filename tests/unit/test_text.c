/*
 * Unit tests of core/text/text.h: the term set, the word scanner, HTML and e-mail
 * extraction, and kind detection. Every input is copied into a heap buffer
 * of its exact length, so that ASan and valgrind catch any read past it.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <xxhash.h>

#include "unit.h"
#include "extract.h"
#include "extract_internal.h"
#include "text.h"
#include "text_internal.h"

#ifndef IM_TEST_DATA
#define IM_TEST_DATA "tests/data"
#endif

static struct im_params params;
static struct im_terms terms;
static struct im_extractor *xtor;

static void setup(void)
{
	/* The paper's filters, set by hand: the defaults are params.c's. */
	memset(&params, 0, sizeof(params));
	params.min_word_len = 4;
	params.max_digits = 1;
	params.min_unique = 5;
	im_terms_init(&terms);
	ck_assert_int_eq(im_extractor_new(NULL, &xtor), 0);
}

static void teardown(void)
{
	im_terms_release(&terms);
	im_extractor_free(xtor);
}

/*
 * Extract the terms of s[0, n) from an exact-size heap copy into `terms`.
 * Plain text goes to the word scanner as it is, so that its handling of
 * invalid UTF-8 is tested here (extraction would read such text as
 * windows-1252: tests/unit/test_extract.c).
 */
static void extract_n(const char *s, size_t n, enum im_format kind)
{
	char *copy = malloc(n ? n : 1);
	struct im_extract_result r;
	int ret;

	ck_assert_ptr_nonnull(copy);
	memcpy(copy, s, n);
	if (kind == IM_FMT_TEXT) {
		r.text = copy;
		r.len = n;
	} else {
		ret = im_extract_as(xtor, kind, copy, n, &r);
		ck_assert_msg(ret == 0, "im_extract_as returned %d", ret);
	}
	ret = im_text_terms(r.text, r.len, &params, &terms);
	free(copy);
	ck_assert_msg(ret == 0, "im_text_terms returned %d", ret);
}

static void extract(const char *s, enum im_format kind)
{
	extract_n(s, strlen(s), kind);
}

static bool has(const char *word)
{
	for (size_t i = 0; i < terms.n; i++)
		if (terms.v[i].len == strlen(word) &&
		    !memcmp(im_terms_str(&terms, i), word, terms.v[i].len))
			return true;
	return false;
}

/* All terms, space-separated, for failure messages. */
static const char *dump(void)
{
	static char buf[4096];
	size_t o = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < terms.n && o + 2 < sizeof(buf); i++)
		o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s%s",
				      i ? " " : "", im_terms_str(&terms, i));
	return buf;
}

#define assert_has(w)                                                          \
	ck_assert_msg(has(w), "term \"%s\" missing; terms: %s", (w), dump())
#define assert_lacks(w)                                                        \
	ck_assert_msg(!has(w), "term \"%s\" should be absent; terms: %s", (w), \
		      dump())

/* Exactly these terms, in any order. NULL-terminated. */
static void assert_terms(const char *first, ...)
{
	va_list ap;
	size_t n = 0;

	va_start(ap, first);
	for (const char *w = first; w; w = va_arg(ap, const char *)) {
		assert_has(w);
		n++;
	}
	va_end(ap);
	ck_assert_msg(terms.n == n, "expected %zu terms, got %zu: %s", n,
		      terms.n, dump());
}

static char *read_data(const char *name, size_t *len)
{
	char path[512];
	FILE *f;
	char *buf;
	long n;

	snprintf(path, sizeof(path), "%s/text/%s", IM_TEST_DATA, name);
	f = fopen(path, "rb");
	ck_assert_msg(f != NULL, "cannot open fixture %s", path);
	ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	ck_assert_int_ge(n, 0);
	rewind(f);
	buf = malloc((size_t)n + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static void extract_file(const char *name)
{
	size_t len;
	char *buf = read_data(name, &len);

	extract_n(buf, len, im_extract_sniff(buf, len));
	free(buf);
}

/* The text im_html_text() makes of in[0, n), or im_html_text_gear() in
 * @p gear if it is not -1; NUL-terminated. Caller frees. */
static char *html_gear_text(const char *in, size_t n, int gear)
{
	struct im_buf b = {0};
	char *copy = malloc(n ? n : 1), *s;

	/* A copy of its own: a read past the end is a read past malloc's. */
	memcpy(copy, in, n);
	ck_assert_int_eq(gear < 0 ? im_html_text(copy, n, &b)
				  : im_html_text_gear(copy, n, &b,
						      (enum im_html_gear)gear),
			 0);
	free(copy);
	s = malloc(b.len + 1);
	memcpy(s, b.p ? b.p : "", b.len);
	s[b.len] = '\0';
	im_buf_release(&b);
	return s;
}

/* The text im_html_text() makes of @html. Caller frees. */
static char *html_text(const char *html)
{
	return html_gear_text(html, strlen(html), -1);
}

#define assert_html(in, want)                                                  \
	do {                                                                   \
		char *got_ = html_text(in);                                    \
		ck_assert_msg(!strcmp(got_, (want)),                           \
			      "html \"%s\": got \"%s\", want \"%s\"", (in),    \
			      got_, (want));                                   \
		free(got_);                                                    \
	} while (0)

/* ---- The term set -------------------------------------------------------- */

/* The next value of a fixed-seed xorshift sequence: random texts that come
 * out the same on every run. */
static unsigned long long xorshift(unsigned long long *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* Pieces drawn from @p pieces (@p npieces) into @p buf until it holds at
 * least @p target bytes; @return its length. @p buf has room for @p target
 * bytes and the longest piece. */
static size_t random_text(char *buf, size_t target, const char *const *pieces,
			  size_t npieces, unsigned long long *x)
{
	size_t n = 0;

	while (n < target) {
		const char *pc = pieces[xorshift(x) % npieces];

		memcpy(buf + n, pc, strlen(pc));
		n += strlen(pc);
	}
	return n;
}

START_TEST(test_text_terms_set_is_unique_and_ordered)
{
	char w[32];

	ck_assert_int_eq(im_terms_add(&terms, "alpha", 5), 0);
	ck_assert_int_eq(im_terms_add(&terms, "beta", 4), 0);
	ck_assert_int_eq(im_terms_add(&terms, "alpha", 5), 0);
	ck_assert_uint_eq(terms.n, 2);
	ck_assert_str_eq(im_terms_str(&terms, 0), "alpha");
	ck_assert_str_eq(im_terms_str(&terms, 1), "beta");
	ck_assert_msg(terms.v[0].hash == XXH3_64bits("alpha", 5),
		      "term hash is not XXH3_64bits of its bytes");

	/* Grow well past the first table, then reuse after a clear. */
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < 5000; i++) {
			int n = snprintf(w, sizeof(w), "term%d", i);

			ck_assert_int_eq(im_terms_add(&terms, w, (size_t)n), 0);
			ck_assert_int_eq(im_terms_add(&terms, w, (size_t)n), 0);
		}
		ck_assert_uint_eq(terms.n, 5000 + (round ? 0 : 2));
		for (size_t i = 0; i < 5000; i++) {
			size_t k = i + (round ? 0 : 2);

			snprintf(w, sizeof(w), "term%zu", i);
			ck_assert_str_eq(im_terms_str(&terms, k), w);
		}
		im_terms_clear(&terms);
		ck_assert_uint_eq(terms.n, 0);
	}
	/* A small document after a large one: the table still works. */
	ck_assert_int_eq(im_terms_add(&terms, "gamma", 5), 0);
	ck_assert_int_eq(im_terms_add(&terms, "gamma", 5), 0);
	ck_assert_uint_eq(terms.n, 1);
}
END_TEST

/*
 * Terms of up to 16 bytes are probed and compared as two masked 8-byte words
 * (terms.c): every length from 1 to 40, terms that differ only in their
 * last byte or only in length, added through both entry points, the padded
 * one with different bytes after the term each time; then again after a
 * clear, which finds each term's slot from its bytes.
 */
START_TEST(test_text_terms_short_and_long_keys)
{
	char base[48], w[48 + 16];

	for (size_t i = 0; i < sizeof(base); i++)
		base[i] = (char)('a' + i % 26);
	for (int round = 0; round < 3; round++) {
		for (size_t len = 1; len <= 40; len++) {
			memcpy(w, base, len);
			memset(w + len, 'a' + round, 16);
			ck_assert_int_eq(im_terms_add_padded(&terms, w, len),
					 0);
			ck_assert_int_eq(im_terms_add(&terms, w, len), 0);
			w[len - 1] = 'Z';
			ck_assert_int_eq(im_terms_add(&terms, w, len), 0);
			memset(w + len, 'z', 16);
			ck_assert_int_eq(im_terms_add_padded(&terms, w, len),
					 0);
		}
		ck_assert_msg(terms.n == 80, "round %d: %zu terms, not 80",
			      round, terms.n);
		for (size_t i = 0; i < terms.n; i++) {
			size_t len = i / 2 + 1;

			memcpy(w, base, len);
			if (i % 2)
				w[len - 1] = 'Z';
			ck_assert_msg(terms.v[i].len == len &&
					      !memcmp(im_terms_str(&terms, i),
						      w, len) &&
					      im_terms_str(&terms, i)[len] == 0,
				      "round %d, term %zu: \"%s\"", round, i,
				      im_terms_str(&terms, i));
			ck_assert_msg(terms.v[i].hash == XXH3_64bits(w, len),
				      "term %zu: hash is not XXH3_64bits", i);
		}
		if (round == 1)
			im_terms_clear(&terms);
	}
	im_terms_clear(&terms);
	for (size_t len = 1; len <= 40; len++)
		ck_assert_int_eq(im_terms_add(&terms, base, len), 0);
	ck_assert_uint_eq(terms.n, 40);
}
END_TEST

/*
 * Keys of 16 bytes and less are compared as two words (terms.c): a term of
 * exactly 16 bytes beside its prefixes and its extensions past 16, terms
 * that differ only past their first 8 bytes or only in their 16th, long
 * terms sharing their first 16 bytes, and the empty term.
 */
START_TEST(test_text_terms_key_edges)
{
	static const char *const w[] = {
		"abcdefghijklmnop",	  /* 16 bytes */
		"abcdefghijklmno",	  /* its prefix, 15 */
		"abcdefghijklmnoq",	  /* differs in byte 16 */
		"abcdefghijklmnopq",	  /* 17: a long term */
		"abcdefghijklmnopr",	  /* another, same first 16 */
		"abcdefghijklmnopqrstuv", /* longer still */
		"abcdefgh",		  /* 8: one word */
		"abcdefghi",		  /* differs past byte 8 */
		"abcdefghj",
		"bbcdefghi", /* differs in byte 1 only */
		"",
	};
	const size_t nw = sizeof(w) / sizeof(w[0]);

	for (int round = 0; round < 2; round++) {
		for (int pass = 0; pass < 2; pass++)
			for (size_t i = 0; i < nw; i++)
				ck_assert_int_eq(im_terms_add(&terms, w[i],
							      strlen(w[i])),
						 0);
		ck_assert_msg(terms.n == nw, "round %d: %zu terms, not %zu",
			      round, terms.n, nw);
		for (size_t i = 0; i < nw; i++) {
			ck_assert_str_eq(im_terms_str(&terms, i), w[i]);
			ck_assert_uint_eq(terms.v[i].len, strlen(w[i]));
			ck_assert_msg(terms.v[i].hash ==
					      XXH3_64bits(w[i], strlen(w[i])),
				      "term %zu: hash is not XXH3_64bits", i);
		}
		im_terms_clear(&terms);
	}
	/* Many terms whose first 8 bytes are the same, so that probes pass
	 * slots whose first word matches. */
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < 3000; i++) {
			char t[16];
			int n = snprintf(t, sizeof(t), "samefirst%d", i);

			ck_assert_int_eq(im_terms_add(&terms, t, (size_t)n), 0);
		}
	ck_assert_uint_eq(terms.n, 3000);
}
END_TEST

/*
 * A term's hash is XXH3_64bits of its bytes whatever they are: terms.c
 * computes the one of 4 to 16 bytes itself, both of XXH3's formulas at once
 * (4 to 8 and 9 to 16 bytes). Every length from 1 to 40, bytes of any
 * value, other bytes after the term each time, compared with libxxhash.
 */
START_TEST(test_text_terms_hash_is_xxh3_of_any_bytes)
{
	unsigned long long x = 0x2545f4914f6cdd1dULL; /* fixed seed */
	char w[40 + IM_SHORT];

	for (int round = 0; round < 50; round++) {
		for (size_t len = 1; len <= 40; len++) {
			for (size_t i = 0; i < sizeof(w); i++)
				w[i] = (char)(1 + xorshift(&x) % 255);
			if (round % 2)
				ck_assert_int_eq(
					im_terms_add_padded(&terms, w, len), 0);
			else
				ck_assert_int_eq(im_terms_add(&terms, w, len),
						 0);
		}
		im_terms_hash_pending(&terms);
		ck_assert_uint_eq(terms.n, 40);
		for (size_t i = 0; i < terms.n; i++)
			ck_assert_msg(
				terms.v[i].hash ==
					XXH3_64bits(im_terms_str(&terms, i),
						    terms.v[i].len),
				"round %d, term of %u bytes: hash is not "
				"XXH3_64bits",
				round, terms.v[i].len);
		im_terms_clear(&terms);
	}
}
END_TEST

/*
 * A clear forgets every term, whether it wipes the table or, for a few
 * terms in a large table, empties their slots one by one (terms.c): the
 * same terms added again after either are new, in a table of the same size
 * and in one that im_terms_expect() sizes again in place.
 */
START_TEST(test_text_terms_clear_leaves_no_trace)
{
	static const size_t sizes[] = {3, 5, 40, 300, 3000};
	char w[32];

	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		/* A large document first, so that the table has grown. */
		for (int i = 0; i < 4000; i++) {
			int n = snprintf(w, sizeof(w), "large%d", i);

			ck_assert_int_eq(im_terms_add(&terms, w, (size_t)n), 0);
		}
		im_terms_clear(&terms);
		for (int round = 0; round < 3; round++) {
			if (round == 2)
				im_terms_expect(&terms, 30000);
			for (size_t i = 0; i < sizes[k]; i++) {
				int n = snprintf(w, sizeof(w), "w%zu", i);

				ck_assert_int_eq(
					im_terms_add(&terms, w, (size_t)n), 0);
			}
			ck_assert_msg(terms.n == sizes[k],
				      "%zu terms, round %d: %zu after the "
				      "clear",
				      sizes[k], round, terms.n);
			im_terms_clear(&terms);
		}
	}
}
END_TEST

START_TEST(test_text_terms_trim_gives_back_only_a_large_set)
{
	char w[32];

	for (int i = 0; i < 4000; i++) {
		int n = snprintf(w, sizeof(w), "large%d", i);

		ck_assert_int_eq(im_terms_add(&terms, w, (size_t)n), 0);
	}
	/* Under the bound: kept, terms and all. */
	im_terms_trim(&terms, (size_t)64 << 20);
	ck_assert_uint_eq(terms.n, 4000);
	ck_assert_ptr_nonnull(terms.slots);
	/* Over it: released, and usable again. */
	im_terms_trim(&terms, 4096);
	ck_assert_uint_eq(terms.n, 0);
	ck_assert_ptr_null(terms.slots);
	ck_assert_ptr_null(terms.v);
	ck_assert_ptr_null(terms.arena);
	ck_assert_int_eq(im_terms_add(&terms, "after", 5), 0);
	ck_assert_int_eq(im_terms_add(&terms, "after", 5), 0);
	ck_assert_uint_eq(terms.n, 1);
}
END_TEST

/* A term of the reference set below. */
struct ref_term {
	char s[48];
	size_t len;
};

/*
 * Random adds against a plain reference set (a list searched in full): many
 * repeats, shared prefixes, lengths 1 to 40, through both entry points, the
 * padded one with other bytes after the term; documents of a few terms to a
 * few thousand, with clears in between (one by one or wiped whole) and
 * right and wrong im_terms_expect() hints. After each document the set must
 * be the reference: same terms in the same order, NUL-terminated, hashed.
 */
START_TEST(test_text_terms_match_a_reference_set)
{
	static const size_t doc_terms[] = {3, 2500, 10, 40, 900, 1, 3000, 60};
	const size_t ndocs = sizeof(doc_terms) / sizeof(doc_terms[0]);
	unsigned long long x = 0x9e3779b97f4a7c15ULL;
	struct ref_term *ref = malloc(4000 * sizeof(*ref));
	char w[48 + 16];

	ck_assert_ptr_nonnull(ref);
	for (size_t d = 0; d < ndocs; d++) {
		size_t nref = 0, vocab = doc_terms[d];

		if (d % 2)
			im_terms_expect(&terms, d % 4 == 1 ? vocab : 8);
		for (size_t k = 0; k < 4 * vocab; k++) {
			/* A word from the document's vocabulary, of bytes
			 * 'a' to 'd' so that many share a prefix. */
			unsigned long long r = xorshift(&x) % vocab;
			size_t len = 1 + r % 40, i;

			for (i = 0; i < len; i++) {
				w[i] = (char)('a' + (r >> (i % 20)) % 4);
				if (i == 0 || i == 8 || i == 15 || i == 16)
					w[i] = (char)('a' + (r + i) % 26);
			}
			for (i = len; i < sizeof(w); i++)
				w[i] = (char)(1 + xorshift(&x) % 255);
			if (xorshift(&x) % 2)
				ck_assert_int_eq(
					im_terms_add_padded(&terms, w, len), 0);
			else
				ck_assert_int_eq(im_terms_add(&terms, w, len),
						 0);
			for (i = 0; i < nref; i++)
				if (ref[i].len == len &&
				    !memcmp(ref[i].s, w, len))
					break;
			if (i == nref) {
				ck_assert_uint_lt(nref, 4000);
				memcpy(ref[nref].s, w, len);
				ref[nref++].len = len;
			}
			ck_assert_msg(terms.n == nref,
				      "doc %zu, add %zu: %zu terms, not %zu", d,
				      k, terms.n, nref);
		}
		im_terms_hash_pending(&terms);
		for (size_t i = 0; i < nref; i++) {
			const char *t = im_terms_str(&terms, i);

			ck_assert_msg(
				terms.v[i].len == ref[i].len &&
					!memcmp(t, ref[i].s, ref[i].len) &&
					t[ref[i].len] == '\0',
				"doc %zu, term %zu: \"%s\"", d, i, t);
			ck_assert_msg(terms.v[i].hash ==
					      XXH3_64bits(ref[i].s, ref[i].len),
				      "doc %zu, term %zu: wrong hash", d, i);
		}
		im_terms_clear(&terms);
		ck_assert_uint_eq(terms.n, 0);
	}
	free(ref);
}
END_TEST

/* @p a and @p b hold the same set in the same state: terms, order, table. */
static void assert_same_set(const struct im_terms *a, const struct im_terms *b,
			    const char *what)
{
	size_t i = 0;

	ck_assert_msg(a->n == b->n && a->arena_len == b->arena_len,
		      "%s: %zu terms, %zu arena bytes vs %zu, %zu", what, a->n,
		      a->arena_len, b->n, b->arena_len);
	ck_assert_msg(a->nslots == b->nslots && a->cap == b->cap &&
			      a->arena_cap == b->arena_cap,
		      "%s: grown otherwise: slots %zu vs %zu, v %zu vs %zu, "
		      "arena %zu vs %zu",
		      what, a->nslots, b->nslots, a->cap, b->cap, a->arena_cap,
		      b->arena_cap);
	while (i < a->n && a->v[i].off == b->v[i].off &&
	       a->v[i].len == b->v[i].len)
		i++;
	ck_assert_msg(i == a->n, "%s: term %zu differs", what, i);
	ck_assert_msg(!memcmp(a->arena, b->arena, a->arena_len),
		      "%s: arenas differ", what);
}

/* The slot tables of @p a and @p b are the same (they are private to
 * terms.c: two 8-byte words a slot). */
static void assert_same_slots(const struct im_terms *a,
			      const struct im_terms *b, const char *what)
{
	ck_assert_msg(a->nslots == b->nslots &&
			      !memcmp(a->slots, b->slots, a->nslots * 16),
		      "%s: slot tables differ", what);
}

/*
 * im_terms_add_shorts() is one im_terms_add_padded() after the other: same
 * terms and order, and the same growth at the same word, so the same table
 * after every batch. Batches of 1 to IM_SHORT_BATCH words, documents of a
 * few terms to thousands, all or few of them new, so that the slot table,
 * v[] and the arena grow in the middle of batches (counted, must happen).
 * The slot tables are compared at the end of each document, the rest after
 * every batch.
 */
START_TEST(test_text_terms_batches_match_single_adds)
{
	static const size_t vocab[] = {5, 3000, 40, 9000, 700, 2};
	unsigned long long x = 0x5851f42d4c957f2dULL; /* fixed seed */
	struct im_short_key keys[IM_SHORT_BATCH];
	uint8_t lens[IM_SHORT_BATCH];
	size_t mid_slots = 0, mid_v = 0, mid_arena = 0;
	struct im_terms single;
	char what[64];

	im_terms_init(&single);
	for (size_t d = 0; d < sizeof(vocab) / sizeof(vocab[0]); d++) {
		for (size_t k = 0; k < 4 * vocab[d] + 50;) {
			size_t nb = 1 + xorshift(&x) % IM_SHORT_BATCH;

			for (size_t i = 0; i < nb; i++, k++) {
				unsigned long long r = xorshift(&x) % vocab[d];
				size_t len = 1 + (r * 7 + k % 3) % IM_SHORT;
				char w[IM_SHORT + IM_SHORT];
				size_t nslots = single.nslots, cap = single.cap;
				size_t arena_cap = single.arena_cap;

				/* Distinct r, distinct first and last
				 * bytes (r < 26 * 26 * 26 * 16 only
				 * nearly); bytes past len are noise. */
				for (size_t j = 0; j < sizeof(w); j++)
					w[j] = j < len ? (char)('a' +
								(r >> (2 * j)) %
									26)
						       : (char)(1 +
								xorshift(&x) %
									255);
				w[0] = (char)('a' + r % 26);
				w[len - 1] = (char)('A' + (r / 26) % 26);
				keys[i] = im_short_key(w, len);
				lens[i] = (uint8_t)len;
				ck_assert_int_eq(
					im_terms_add_padded(&single, w, len),
					0);
				/* Grown before a word that is not the
				 * batch's first, with words after it. */
				if (i > 0 && i + 1 < nb) {
					mid_slots += single.nslots != nslots;
					mid_v += single.cap != cap;
					mid_arena +=
						single.arena_cap != arena_cap;
				}
			}
			ck_assert_int_eq(
				im_terms_add_shorts(&terms, keys, lens, nb), 0);
			snprintf(what, sizeof(what), "doc %zu, word %zu", d, k);
			assert_same_set(&terms, &single, what);
		}
		assert_same_slots(&terms, &single, what);
		im_terms_clear(&terms);
		im_terms_clear(&single);
	}
	ck_assert_msg(mid_slots && mid_v && mid_arena,
		      "growth inside a batch not covered: slots %zu, v %zu, "
		      "arena %zu",
		      mid_slots, mid_v, mid_arena);
	im_terms_release(&single);
}
END_TEST

/* ---- Words --------------------------------------------------------------- */

/* ---- Documents of more than IM_TERMS_MAX terms --------------------------- */

/* Word @p i (< 26^8) of the word lists below: 8 letters, distinct for
 * every i (i times a number prime to 26, modulo 26^8, in base 26), in no
 * order; every 16th 12 letters longer (a long term, added otherwise). */
static size_t list_word(uint64_t i, char *w)
{
	uint64_t z = i * UINT64_C(3141592653) % UINT64_C(208827064576);
	size_t len = i % 16 ? 8 : 20;

	for (size_t j = 0; j < len; j++) {
		w[j] = (char)('a' + z % 26);
		z = j == 7 ? i : z / 26;
	}
	return len;
}

/* Words [first, first + count) of the list, space-separated, backwards if
 * @p backwards; into a heap buffer of the exact length. */
static char *word_list(size_t first, size_t count, bool backwards,
		       size_t *len)
{
	char *text = malloc(count * 21), *p = text;

	ck_assert_ptr_nonnull(text);
	for (size_t k = 0; k < count; k++) {
		p += list_word(backwards ? first + count - 1 - k : first + k, p);
		*p++ = ' ';
	}
	*len = (size_t)(p - text);
	return text;
}

static int hash_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* The hashes of the terms of @p t, sorted (the caller frees them). */
static uint64_t *sorted_hashes(const struct im_terms *t)
{
	uint64_t *h = malloc((t->n + 1) * sizeof(*h));

	ck_assert_ptr_nonnull(h);
	for (size_t i = 0; i < t->n; i++)
		h[i] = t->v[i].hash;
	qsort(h, t->n, sizeof(*h), hash_cmp);
	return h;
}

/* Keep in h[0, n) (sorted) only what the sorted @p of[0, m) holds, in
 * order. @return how many. */
static size_t keep_shared(uint64_t *h, size_t n, const uint64_t *of, size_t m)
{
	size_t k = 0;

	for (size_t i = 0, j = 0; i < n && j < m;) {
		if (h[i] < of[j]) {
			i++;
		} else if (of[j] < h[i]) {
			j++;
		} else {
			h[k++] = h[i++];
			j++;
		}
	}
	return k;
}

/*
 * A word list of 1.5 x IM_TERMS_MAX distinct words keeps at most
 * IM_TERMS_MAX of them (the memory one document takes is bounded), and
 * which ones depends on the words alone: the same list backwards keeps the
 * same terms, and a near-duplicate (2% of the words replaced) keeps exactly
 * the same of the words the two share, so that the two still look alike.
 */
START_TEST(test_text_terms_sampled_past_the_cap)
{
	size_t n = IM_TERMS_MAX * 3 / 2, cut = n / 50, len, kept, kept_near;
	struct im_terms back, near;
	uint64_t *ha, *hn, *shared;
	char *text, w[24];

	/* Three texts of 1.5 million words take valgrind over a minute of
	 * CI's time; the native and ASan runs check the sampling, and
	 * test_text_terms_cap_is_exact reaches it under valgrind too. */
	if (RUNNING_ON_VALGRIND)
		return;
	im_terms_init(&back);
	im_terms_init(&near);
	text = word_list(0, n, false, &len);
	ck_assert_int_eq(im_text_terms(text, len, &params, &terms), 0);
	free(text);
	text = word_list(0, n, true, &len);
	ck_assert_int_eq(im_text_terms(text, len, &params, &back), 0);
	free(text);
	text = word_list(cut, n, false, &len);
	ck_assert_int_eq(im_text_terms(text, len, &params, &near), 0);
	free(text);

	ck_assert_msg(terms.level > 0 && terms.n <= IM_TERMS_MAX &&
			      terms.n > IM_TERMS_MAX / 4,
		      "%zu words: %zu terms kept at level %u, want at most "
		      "%zu",
		      n, terms.n, terms.level, IM_TERMS_MAX);
	ck_assert_msg(back.level == terms.level && back.n == terms.n,
		      "backwards: %zu terms at level %u, forwards %zu at %u",
		      back.n, back.level, terms.n, terms.level);
	ha = sorted_hashes(&terms);
	hn = sorted_hashes(&back);
	ck_assert_msg(!memcmp(ha, hn, terms.n * sizeof(*ha)),
		      "the list backwards kept other terms");
	free(hn);
	ck_assert_msg(near.level == terms.level,
		      "the near-duplicate sampled at level %u, the list at %u",
		      near.level, terms.level);
	hn = sorted_hashes(&near);
	shared = malloc((n - cut) * sizeof(*shared));
	ck_assert_ptr_nonnull(shared);
	for (size_t i = cut; i < n; i++)
		shared[i - cut] = XXH3_64bits(w, list_word(i, w));
	qsort(shared, n - cut, sizeof(*shared), hash_cmp);
	kept = keep_shared(ha, terms.n, shared, n - cut);
	kept_near = keep_shared(hn, near.n, shared, n - cut);
	ck_assert_msg(kept == kept_near && !memcmp(ha, hn, kept * sizeof(*ha)),
		      "of the words both texts hold, %zu and %zu kept, or "
		      "others",
		      kept, kept_near);
	ck_assert_msg(kept > (n - cut) >> (terms.level + 1),
		      "%zu of the %zu shared words kept at level %u", kept,
		      n - cut, terms.level);
	free(ha);
	free(hn);
	free(shared);
	im_terms_release(&back);
	im_terms_release(&near);
}
END_TEST

/*
 * Up to IM_TERMS_MAX terms a set keeps them all, in the order read; one
 * more and it is sampled. im_terms_add() (a spreadsheet's number cells)
 * keeps the same sample as the word scanner.
 */
START_TEST(test_text_terms_cap_is_exact)
{
	size_t len;
	char *text = word_list(0, IM_TERMS_MAX + 1, false, &len), w[24];
	/* The text without its last word, and its space. */
	size_t most = len - list_word(IM_TERMS_MAX, w) - 1;
	struct im_terms one;
	uint64_t *ha, *hb;
	int failed = 0;

	im_terms_init(&one);
	ck_assert_int_eq(im_text_terms(text, most, &params, &terms), 0);
	ck_assert_msg(terms.level == 0 && terms.n == IM_TERMS_MAX,
		      "%zu distinct words: %zu kept at level %u", IM_TERMS_MAX,
		      terms.n, terms.level);
	for (size_t i = 0; i < terms.n; i += 4099) {
		size_t wl = list_word(i, w);

		ck_assert_msg(terms.v[i].len == wl &&
				      !memcmp(im_terms_str(&terms, i), w, wl),
			      "term %zu is not word %zu", i, i);
	}
	ck_assert_int_eq(im_text_terms(text, len, &params, &terms), 0);
	ck_assert_msg(terms.level == 1 && terms.n <= IM_TERMS_MAX,
		      "%zu distinct words: %zu kept at level %u",
		      IM_TERMS_MAX + 1, terms.n, terms.level);
	for (size_t i = 0; i <= IM_TERMS_MAX && !failed; i++) {
		size_t wl = list_word(i, w);

		failed = im_terms_add(&one, w, wl);
	}
	ck_assert_int_eq(failed, 0);
	ck_assert_msg(one.level == terms.level && one.n == terms.n,
		      "added one by one: %zu terms at level %u, read %zu at %u",
		      one.n, one.level, terms.n, terms.level);
	ha = sorted_hashes(&terms);
	hb = sorted_hashes(&one);
	ck_assert_msg(!memcmp(ha, hb, terms.n * sizeof(*ha)),
		      "added one by one, other terms were kept");
	free(ha);
	free(hb);
	free(text);
	im_terms_release(&one);
}
END_TEST

START_TEST(test_text_plain_words)
{
	extract("The quick brown fox jumps over the lazy dog.", IM_FMT_TEXT);
	assert_terms("quick", "brown", "jumps", "over", "lazy", NULL);

	extract("  well-known, e-mail; (parenthesis) \"quoted\"\ttab\nnewline",
		IM_FMT_TEXT);
	assert_terms("well", "known", "mail", "parenthesis", "quoted",
		     "newline", NULL);
}
END_TEST

START_TEST(test_text_case_folding)
{
	extract("STRASSE Straße strasse", IM_FMT_TEXT);
	assert_terms("strasse", NULL);

	extract("ΑΘΗΝΑ Αθηνα αθηνα", IM_FMT_TEXT);
	assert_terms("αθηνα", NULL);

	extract("МОСКВА Москва москва", IM_FMT_TEXT);
	assert_terms("москва", NULL);

	extract("Ünïcödé ÜNÏCÖDÉ", IM_FMT_TEXT);
	assert_terms("ünïcödé", NULL);

	/* Folds to several code points: İ is i + U+0307, ΐ three. */
	extract("İSTANBUL ΐΐΐΐ", IM_FMT_TEXT);
	assert_terms("i\xcc\x87stanbul",
		     "\xce\xb9\xcc\x88\xcc\x81\xce\xb9\xcc\x88\xcc\x81"
		     "\xce\xb9\xcc\x88\xcc\x81\xce\xb9\xcc\x88\xcc\x81",
		     NULL);
	/* Beyond U+0800 (not cached): fullwidth Latin folds too. */
	extract("ＡＢＣＤ ａｂｃｄ", IM_FMT_TEXT);
	assert_terms("ａｂｃｄ", NULL);
}
END_TEST

START_TEST(test_text_digit_filter)
{
	extract("abc1 ab12 2024 x1y2z route66 ١٢٣٤٥ item7", IM_FMT_TEXT);
	assert_terms("abc1", "item7", NULL);

	params.max_digits = 4;
	extract("abc1 ab12 2024 123456 ١٢٣٤", IM_FMT_TEXT);
	assert_terms("abc1", "ab12", "2024", "١٢٣٤", NULL);
}
END_TEST

START_TEST(test_text_length_filter)
{
	extract("a ab abc abcd abcde", IM_FMT_TEXT);
	assert_terms("abcd", "abcde", NULL);

	/* Code points, not bytes; counted after folding (ß is "ss"). */
	extract("äöü äöüé maß", IM_FMT_TEXT);
	assert_terms("äöüé", "mass", NULL);

	params.min_word_len = 2;
	extract("a ab abc", IM_FMT_TEXT);
	assert_terms("ab", "abc", NULL);
}
END_TEST

START_TEST(test_text_long_runs_are_not_words)
{
	char buf[700];

	memset(buf, 'a', 256);
	memcpy(buf + 256, " okay ", 6);
	memset(buf + 262, 'b', 257);
	buf[519] = '\0';
	extract(buf, IM_FMT_TEXT);
	ck_assert_uint_eq(terms.n, 2);
	ck_assert_uint_eq(terms.v[0].len, 256);
	assert_has("okay");

	/* The same with a non-ASCII letter inside the overlong run. */
	strcpy(buf, "good ");
	memset(buf + 5, 'c', 300);
	memcpy(buf + 305, "é tail", sizeof("é tail"));
	extract(buf, IM_FMT_TEXT);
	assert_terms("good", "tail", NULL);
}
END_TEST

START_TEST(test_text_invalid_utf8_is_a_separator)
{
	/* Stray continuation, invalid lead, bad continuation, overlong,
	 * surrogate, past U+10FFFF: each splits, none swallows a neighbour. */
	extract("hello\x80world", IM_FMT_TEXT);
	assert_terms("hello", "world", NULL);
	extract("abcd\xff\xfe"
		"efgh",
		IM_FMT_TEXT);
	assert_terms("abcd", "efgh", NULL);
	extract("wxyz\xc3(ijkl", IM_FMT_TEXT);
	assert_terms("wxyz", "ijkl", NULL);
	extract("\xc0\xaf"
		"over \xed\xa0\x80surr \xf4\x90\x80\x80"
		"high",
		IM_FMT_TEXT);
	assert_terms("over", "surr", "high", NULL);
	/* A broken sequence right before a valid multibyte letter. */
	extract("\xe2\x82über\xc3\xa9tude", IM_FMT_TEXT);
	assert_terms("überétude", NULL);
	extract("schön\xe2\x82größe", IM_FMT_TEXT);
	assert_terms("schön", "grösse", NULL);
}
END_TEST

START_TEST(test_text_truncated_sequence_at_end)
{
	extract("alpha über\xc3", IM_FMT_TEXT);
	assert_terms("alpha", "über", NULL);
	extract("emoji \xf0\x9f\x98", IM_FMT_TEXT);
	assert_terms("emoji", NULL);
	extract("\xe2", IM_FMT_TEXT);
	ck_assert_uint_eq(terms.n, 0);
	/* Long enough to take the 16-byte path first. */
	extract("abcdefghijklmnopqrstuvwxyz0 word\xe4\xb8", IM_FMT_TEXT);
	assert_terms("abcdefghijklmnopqrstuvwxyz0", "word", NULL);
}
END_TEST

START_TEST(test_text_empty_input)
{
	ck_assert_int_eq(im_terms_add(&terms, "stale", 5), 0);
	ck_assert_int_eq(im_text_terms(NULL, 0, &params, &terms), 0);
	ck_assert_uint_eq(terms.n, 0);
	for (int k = IM_FMT_TEXT; k <= IM_FMT_BINARY; k++) {
		extract("", (enum im_format)k);
		ck_assert_uint_eq(terms.n, 0);
	}
	extract(" \n\t.,;", IM_FMT_TEXT);
	ck_assert_uint_eq(terms.n, 0);
	struct im_extract_result r;
	ck_assert_int_eq(im_extract_as(xtor, (enum im_format)42, "text", 4, &r),
			 -EINVAL);
}
END_TEST

START_TEST(test_text_marks_and_format_characters)
{
	/* A decomposed accent stays in its word; a soft hyphen is invisible. */
	extract("cafe\xcc\x81 hyphen\xc2\xad"
		"ation \xef\xbb\xbf"
		"bomword",
		IM_FMT_TEXT);
	assert_terms("cafe\xcc\x81", "hyphenation", "bomword", NULL);
	/* Devanagari: vowel signs are marks inside the word. */
	extract("नमस्ते दुनिया", IM_FMT_TEXT);
	assert_terms("नमस्ते", "दुनिया", NULL);
}
END_TEST

START_TEST(test_text_fast_and_slow_paths_agree)
{
	/* The same words at every offset and alignment. */
	const char *base = "Alpha BRAVO charlie1 d2e3 x echo-foxtrot Größe ";
	char buf[1024];

	for (size_t pad = 0; pad < 40; pad++) {
		size_t n = 0;

		memset(buf, ' ', pad);
		n = pad;
		for (int r = 0; r < 3; r++) {
			memcpy(buf + n, base, strlen(base));
			n += strlen(base);
		}
		extract_n(buf, n, IM_FMT_TEXT);
		assert_terms("alpha", "bravo", "charlie1", "echo", "foxtrot",
			     "grösse", NULL);
		/* And cut short mid-word. */
		extract_n(buf, pad + 3, IM_FMT_TEXT);
		ck_assert_uint_eq(terms.n, 0);
	}
}
END_TEST

/*
 * The same terms in @p a and @p b, in the same order. Checked before it is
 * asserted: Check records every assertion that passes, with a write.
 */
static void assert_same_terms(const struct im_terms *a,
			      const struct im_terms *b, const char *what,
			      const char *gear)
{
	size_t i = 0;

	ck_assert_msg(a->n == b->n, "%s: %zu terms in gear %s, %zu scalar",
		      what, a->n, gear, b->n);
	while (i < b->n && a->v[i].len == b->v[i].len &&
	       !memcmp(im_terms_str(a, i), im_terms_str(b, i), b->v[i].len))
		i++;
	ck_assert_msg(i == b->n, "%s, gear %s, term %zu: %s vs %s", what, gear,
		      i, im_terms_str(a, i), im_terms_str(b, i));
}

static const char *const gear_names[] = {"scalar", "sse2", "avx2", "avx512"};

/*
 * The same terms, in the same order, from the scalar scanner, from every
 * other gear this build and CPU have (text_internal.h), and from
 * im_words_add(), whichever gear it takes; and each says the text is not
 * UTF-8 exactly when im_utf8_valid() does.
 */
static void assert_scanners_agree_in_place(const char *copy, size_t n,
					   struct im_terms *ref,
					   const char *what)
{
	bool invalid = !im_utf8_valid(copy, n);

	im_terms_clear(ref);
	ref->numbers = 0;
	ref->invalid_utf8 = false;
	ck_assert_int_eq(im_words_add_scalar(copy, n, &params, ref), 0);
	ck_assert_msg(ref->invalid_utf8 == invalid,
		      "%s: the scalar gear says invalid UTF-8 %d, "
		      "im_utf8_valid() %d",
		      what, ref->invalid_utf8, invalid);
	for (int g = IM_WORDS_SSE2; g <= IM_WORDS_AVX512; g++) {
		if (!im_words_has_gear((enum im_words_gear)g))
			continue;
		im_terms_clear(&terms);
		terms.numbers = 0;
		terms.invalid_utf8 = false;
		ck_assert_int_eq(im_words_add_gear(copy, n, &params, &terms,
						   (enum im_words_gear)g),
				 0);
		assert_same_terms(&terms, ref, what, gear_names[g]);
		ck_assert_msg(terms.numbers == ref->numbers,
			      "%s: numbers fingerprint of gear %s differs", what,
			      gear_names[g]);
		ck_assert_msg(terms.invalid_utf8 == invalid,
			      "%s: gear %s says invalid UTF-8 %d, "
			      "im_utf8_valid() %d",
			      what, gear_names[g], terms.invalid_utf8, invalid);
	}
	im_terms_clear(&terms);
	terms.numbers = 0;
	ck_assert_int_eq(im_words_add(copy, n, &params, &terms), 0);
	assert_same_terms(&terms, ref, what, "of im_words_add()");
	ck_assert(terms.numbers == ref->numbers);
}

/* assert_scanners_agree_in_place() of an exact-size heap copy of s[0, n). */
static void assert_scanners_agree(const char *s, size_t n, struct im_terms *ref,
				  const char *what)
{
	char *copy = malloc(n ? n : 1);

	ck_assert_ptr_nonnull(copy);
	memcpy(copy, s, n);
	assert_scanners_agree_in_place(copy, n, ref, what);
	free(copy);
}

/*
 * The gears there are: the scalar one always, SSE2 on x86-64. Without AVX2
 * and BMI2 here, the tests below cover the SSE2 gear only, without AVX-512
 * VBMI2 not its gear: said on stderr so that a run on such a machine is not
 * mistaken for a full one.
 */
START_TEST(test_text_gears)
{
	struct im_terms t;

	ck_assert(im_words_has_gear(IM_WORDS_SCALAR));
#if defined(__x86_64__)
	ck_assert(im_words_has_gear(IM_WORDS_SSE2));
#endif
	if (!im_words_has_gear(IM_WORDS_AVX2))
		fprintf(stderr, "test_text_gears: no AVX2 here, its gear "
				"is not tested\n");
	if (!im_words_has_gear(IM_WORDS_AVX512))
		fprintf(stderr, "test_text_gears: no AVX-512 VBMI2 here, its "
				"gear is not tested\n");
	im_terms_init(&t);
	for (int g = IM_WORDS_SCALAR; g <= IM_WORDS_AVX512; g++)
		if (!im_words_has_gear((enum im_words_gear)g))
			ck_assert_int_eq(
				im_words_add_gear("word", 4, &params, &t,
						  (enum im_words_gear)g),
				-ENOTSUP);
	im_terms_release(&t);
}
END_TEST

/* im_text_terms()'s numbers fingerprint of @p s. */
static uint64_t numbers_of(const char *s)
{
	struct im_terms t;
	uint64_t v;

	im_terms_init(&t);
	ck_assert_int_eq(im_text_terms(s, strlen(s), &params, &t), 0);
	v = t.numbers;
	im_terms_release(&t);
	return v;
}

static uint64_t fig(const char *s)
{
	return im_figure_hash(s, strlen(s));
}

/*
 * Two payslips share every term and differ only in their figures, which
 * the word rules drop: the numbers fingerprint tells them apart, and does
 * not care in which order the figures come.
 */
START_TEST(test_text_numbers_fingerprint)
{
	static const char jan[] = "Employee: Jane Marlowe, harbour pilot\n"
				  "Basic salary: 2912.49\n"
				  "Overtime allowance: 410.20\n"
				  "Paid on 2024-01-01\n";
	static const char feb[] = "Employee: Jane Marlowe, harbour pilot\n"
				  "Basic salary: 2912.49\n"
				  "Overtime allowance: 410.30\n"
				  "Paid on 2024-01-01\n";
	static const char jan_moved[] = "Paid on 2024-01-01\n"
					"Overtime allowance: 410.20\n"
					"Employee: Jane Marlowe, harbour pilot\n"
					"Basic salary: 2912.49\n";
	static const char jan_edited[] = "Employee: Jane Marlowe, river pilot\n"
					 "Basic salary: 2912.49\n"
					 "Overtime allowance: 410.20\n"
					 "Paid on 2024-01-01\n";
	char buf[8192];
	size_t n = 0;
	struct im_terms ref;

	ck_assert(numbers_of(jan) != 0);
	ck_assert(numbers_of(jan) != numbers_of(feb));
	ck_assert(numbers_of(jan) == numbers_of(jan_moved));
	ck_assert(numbers_of(jan) == numbers_of(jan_edited));
	ck_assert(numbers_of("no figures here at all") == 0);
	ck_assert(numbers_of("") == 0);
	/* Every word with a digit, kept or not, folded; a multiset: "01"
	 * twice counts twice. */
	ck_assert(numbers_of("Room B12, 3 keys; 01.01") ==
		  fig("b12") + fig("3") + fig("01") + fig("01"));
	ck_assert(numbers_of("ROOM b12") == numbers_of("room B12"));
	ck_assert(numbers_of("Straße7 ½") == fig("strasse7") + fig("½"));
	/* Past 16 bytes figures are hashed otherwise: still every byte. */
	ck_assert(numbers_of("IBAN GB29NWBK60161331926819") ==
		  fig("gb29nwbk60161331926819"));
	ck_assert(fig("gb29nwbk60161331926819") !=
		  fig("gb29nwbk60161331926818"));
	ck_assert(fig("2912.49") != fig("2912.48") && fig("12") != fig("21"));
	/* Figures at every offset of a window, and next to non-ASCII: the
	 * SIMD gears agree with the scalar scanner (assert_scanners_agree()
	 * compares the fingerprints too). */
	im_terms_init(&ref);
	for (unsigned i = 0; n + 40 < sizeof(buf); i++)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%u%s ",
				      i % 7 == 3 ? "é" : "a",
				      i * 7919 % 100000, i % 5 ? "x" : "");
	for (size_t off = 0; off < 64; off++)
		assert_scanners_agree(buf + off, n - off, &ref,
				      "numbers at an offset");
	im_terms_release(&ref);
}
END_TEST

/*
 * Windows dense with figures, which the AVX-512 gear hashes eight at a time
 * (text.c, figures_window_avx512()): often more than eight in a window
 * (test_text_window_full_of_figures_agrees fills one), of 1 to 18 bytes
 * (IM_SHORT and one past it are where it hands them to the scalar reading),
 * upper and lower case, next to UTF-8 and at every offset of a window: each
 * gear's fingerprint is the scalar scanner's.
 */
START_TEST(test_text_dense_figures_agree)
{
	/* clang-format off */
	static const char *const pieces[] = {
		"1 ", "2 ", "3\n", "a1 ", "X9y ", ("\xc3\xa9" "7 "), "7\xc3\xa9 ",
		"12.5,", "\xd9\xa3 ", "word ", "0123456789abcdef ",
		"0123456789ABCDEFG ", "0123456789abcdefgh ", "abcdefghijklmno1 ",
	};
	/* clang-format on */
	const size_t npieces = sizeof(pieces) / sizeof(pieces[0]);
	unsigned long long x = 0x9e3779b97f4a7c15ull; /* fixed seed */
	struct im_terms ref;
	char buf[700], what[48];

	im_terms_init(&ref);
	for (int iter = 0; iter < 300; iter++) {
		size_t n = random_text(buf, 64 + xorshift(&x) % 600, pieces,
				       npieces, &x);
		size_t off = (size_t)(x >> 20) % 64;

		params.min_word_len = 1 + (unsigned)(x >> 40) % 5;
		params.max_digits = (unsigned)(x >> 50) % 3;
		snprintf(what, sizeof(what), "iteration %d, offset %zu", iter,
			 off);
		assert_scanners_agree(buf + off, n - off, &ref, what);
	}
	im_terms_release(&ref);
}
END_TEST

/*
 * Windows full of figures: 1 to 40 figures of one or two bytes ("7", "C2"),
 * one after the other, at the first offsets of a window, so that a window
 * holds up to 31 that the AVX-512 gear hashes here, in four groups of eight.
 * The random texts above hold no window of more than 16 such: hashing
 * only the first two groups, or three, passes them and fails here.
 */
START_TEST(test_text_window_full_of_figures_agrees)
{
	static const char *const seps = " ,\n.\t-";
	struct im_terms ref;
	char buf[256], what[48];

	im_terms_init(&ref);
	params.min_word_len = 3;
	params.max_digits = 2;
	for (unsigned k = 1; k <= 40; k++)
		for (unsigned off = 0; off < 4; off++) {
			size_t n = off;

			memset(buf, ' ', off);
			for (unsigned i = 0; i < k; i++) {
				if (i % 3 == 2)
					buf[n++] = (char)('A' + i % 26);
				buf[n++] = (char)('0' + i % 10);
				buf[n++] = seps[i % 6];
			}
			for (; n < 140; n++)
				buf[n] = "word "[n % 5];
			snprintf(what, sizeof(what), "%u figures at offset %u",
				 k, off);
			assert_scanners_agree(buf, n, &ref, what);
		}
	im_terms_release(&ref);
}
END_TEST

/*
 * Words of 4 to 12 bytes holding 0 to 6 digits each, side by side in one
 * window, with max_digits from 0 to 6, and words of up to 19 bytes and
 * digits with max_digits 15 to 100: each gear keeps the words the scalar
 * scanner keeps, whichever of a window's words have too many digits (the
 * AVX-512 gear drops those from its batch of the window's words, and keeps
 * the others). The random texts above go no further than max_digits 2.
 */
START_TEST(test_text_digits_per_word_agree)
{
	static const unsigned maxds[] = {0, 1, 2, 3, 4, 5, 6, 15, 16, 17, 100};
	struct im_terms ref;
	char buf[400], what[64];

	im_terms_init(&ref);
	for (unsigned m = 0; m < sizeof(maxds) / sizeof(maxds[0]); m++)
		for (unsigned off = 0; off < 64; off += 5) {
			unsigned maxd = maxds[m];
			size_t n = off;

			params.min_word_len = 1 + maxd % 4;
			params.max_digits = maxd;
			memset(buf, ' ', off);
			for (unsigned i = 0; n + 24 < sizeof(buf); i++) {
				unsigned len = maxd < 15
						       ? 4 + (i * 5 + maxd) % 9
						       : 4 + (i * 5) % 16;
				unsigned digits = maxd < 15 ? (i * 3 + off) % 7
							    : (i * 7 + off) % 20;

				for (unsigned j = 0; j < len; j++)
					buf[n++] = j < digits ? (char)('0' + (i + j) % 10)
							      : (char)('a' + (i + j) % 26);
				buf[n++] = " \n,"[i % 3];
			}
			snprintf(what, sizeof(what),
				 "max_digits %u at offset %u", maxd, off);
			assert_scanners_agree(buf, n, &ref, what);
		}
	im_terms_release(&ref);
}
END_TEST

/*
 * Figures of 1 to 70 bytes, a digit at their start, middle or end, one
 * after the other at every offset of a window: past IM_SHORT bytes the
 * AVX-512 gear hashes a figure of its window alone, and one of 64 bytes or
 * more fills a window; each gear's fingerprint is the scalar scanner's.
 */
START_TEST(test_text_long_figures_agree)
{
	struct im_terms ref;
	char buf[3000], what[48];
	size_t n = 0;

	im_terms_init(&ref);
	for (unsigned len = 1; len <= 70; len++) {
		/* A digit at the start, in the middle or at the end (len % 3
		 * 0, 1, 2), and in the middle too if len is odd. */
		unsigned at = (len % 3) * (len - 1) / 2;

		for (unsigned j = 0; j < len; j++)
			buf[n++] =
				j == at || (len % 2 && j == len / 2)
					? (char)('0' + j % 10)
					: (char)((j % 3 ? 'a' : 'A') + j % 26);
		buf[n++] = len % 4 ? ' ' : '\n';
	}
	for (size_t off = 0; off < 64; off++) {
		snprintf(what, sizeof(what), "long figures at offset %zu",
			 off);
		assert_scanners_agree(buf + off, n - off, &ref, what);
	}
	im_terms_release(&ref);
}
END_TEST

/*
 * Text with a word of @p len bytes, @p split of them before byte @p border,
 * digits at its start if @p dig & 1 and at its end if @p dig & 2, then
 * @p after, then words up to @p total bytes (if more): its length.
 */
static size_t word_across(char *buf, unsigned len, unsigned split,
			  unsigned border, unsigned dig, const char *after,
			  size_t total)
{
	size_t at = border - split, n;

	for (n = 0; n < at; n++)
		buf[n] = "Ab1 cD ef9Gh "[n % 13];
	buf[at - 1] = ' ';
	for (unsigned j = 0; j < len; j++) {
		bool digit = (dig & 1 && j == 0) || (dig & 2 && j + 1 == len);

		buf[n++] = digit ? (char)('0' + j % 10) : "aBcDeFgHiJ"[j % 10];
	}
	memcpy(buf + n, after, strlen(after));
	n += strlen(after);
	for (; n < total; n++)
		buf[n] = "word "[n % 5];
	return n;
}

/*
 * A word across the border of two windows of 64 bytes, at each of its
 * splits: the AVX-512 gear takes a window every 64 bytes from the start of
 * the text, each owning the words that start in it, and reads the end of
 * its last word from the next window. The word is 1 to 20 bytes, or 63 to
 * 66, its digits at its start, its end or both (so in either window), and
 * what follows it a space, a letter of two bytes, a no-break space (a
 * separator the AVX-512 windows read in place), a byte that is not UTF-8,
 * or the end of the text; the border is the first one, or the last one
 * before the windows of 64 bytes stop, two windows from the end of the
 * text. Each gear keeps what the scalar scanner keeps. The word also ends
 * at the border, or starts there after a space: the other words here come
 * again and again, so a window that lost its first word, or the last word
 * of the window before, would still give the same terms.
 */
START_TEST(test_text_words_across_windows_agree)
{
	/* clang-format off */
	static const char *const afters[] = {
		" x", "\xc3\xa9" "a", "\xc2\xa0" "b", "\xff" "c", "",
	};
	/* clang-format on */
	static const unsigned lens[] = {1,  2,  3,  4,  5,  6,	7,  8,
					9,  12, 15, 16, 17, 18, 20, 63,
					64, 65, 66};
	struct im_terms ref;
	char buf[600], what[96];

	im_terms_init(&ref);
	for (unsigned l = 0; l < sizeof(lens) / sizeof(lens[0]); l++)
		for (unsigned split = 0; split <= lens[l] && split < 64; split++)
			for (unsigned a = 0; a < 5; a++)
				for (unsigned dig = 0; dig < 4; dig++) {
					size_t n = word_across(
						buf, lens[l], split, 64, dig,
						afters[a], a == 4 ? 0 : 300);

					params.min_word_len =
						1 + (split + a) % 4;
					params.max_digits = dig % 2;
					snprintf(what, sizeof(what),
						 "%u bytes, %u before byte "
						 "64, then %u, digits %u",
						 lens[l], split, a, dig);
					assert_scanners_agree(buf, n, &ref,
							      what);
					n = word_across(
						buf, lens[l], split, 384, dig,
						afters[a],
						a == 4 ? 0 : 448 + split % 64);
					snprintf(what, sizeof(what),
						 "%u bytes, %u before byte "
						 "384 of %zu, then %u, digits "
						 "%u",
						 lens[l], split, n, a, dig);
					assert_scanners_agree(buf, n, &ref,
							      what);
				}
	im_terms_release(&ref);
}
END_TEST

/*
 * Every gear reads only the text: texts of 0 to 300 bytes (words, figures,
 * UTF-8 cut anywhere, invalid bytes) ending against an unmapped page, and
 * starting right after one, at every offset of a window (as the length
 * goes). The windows load 64 bytes at a time, and the scalar reading
 * steps back over a word (figures_at()): a load past either end faults.
 */
START_TEST(test_text_gears_read_only_the_text)
{
	/* clang-format off */
	static const char *const parts[] = {
		"Ab1", " ", "straße", "\xc2\xa0", "x9y", ",", "12345", "\n",
		"\xe2\x80\x94", "zz", "\xff", "word", "7", ". ",
		"\xf0\x9f\x98\x80", "abcdefghijklmnopq1", "(", "é2", "\xcc\x81",
		"IM16CHARSWORD123", "\t",
	};
	/* clang-format on */
	const size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct im_terms ref;
	char text[320], what[64];
	size_t n = 0;
	char *map;

	for (unsigned i = 0; n < 300; i++) {
		const char *p = parts[(i * 7 + i / 5) %
				      (sizeof(parts) / sizeof(parts[0]))];
		size_t l = strlen(p);

		memcpy(text + n, p,
		       l < sizeof(text) - n ? l : sizeof(text) - n);
		n += l;
	}
	/* An unmapped page, two readable ones, an unmapped one. */
	map = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(map, MAP_FAILED);
	ck_assert_int_eq(mprotect(map, page, PROT_NONE), 0);
	ck_assert_int_eq(mprotect(map + 3 * page, page, PROT_NONE), 0);
	im_terms_init(&ref);
	params.min_word_len = 1;
	params.max_digits = 2;
	for (size_t len = 0; len <= 300; len++) {
		char *at = map + 3 * page - len;

		memcpy(at, text, len);
		snprintf(what, sizeof(what), "%zu bytes before a hole", len);
		assert_scanners_agree_in_place(at, len, &ref, what);
		at = map + page + len * 7 % 64;
		memcpy(at, text + 300 - len, len);
		snprintf(what, sizeof(what), "%zu bytes after a hole", len);
		assert_scanners_agree_in_place(at, len, &ref, what);
	}
	im_terms_release(&ref);
	ck_assert_int_eq(munmap(map, 4 * page), 0);
}
END_TEST

/* The figures im_text_figures() told, joined by ' ', and their hashes'
 * sum. */
struct told {
	char s[4096];
	size_t len;
	uint64_t sum;
	unsigned stop_after; /* 0: never stop */
	unsigned n;
};

static int tell_cb(const char *s, size_t n, void *arg)
{
	struct told *t = arg;

	t->sum += im_figure_hash(s, n);
	if (t->len + n + 2 < sizeof(t->s)) {
		if (t->len)
			t->s[t->len++] = ' ';
		memcpy(t->s + t->len, s, n);
		t->len += n;
		t->s[t->len] = '\0';
	}
	return ++t->n == t->stop_after ? 42 : 0;
}

/*
 * im_text_figures() tells the figures whose hashes im_text_terms() sums,
 * in reading order, folded, once per occurrence: on examples, and on
 * random mixes of ASCII, UTF-8, invalid bytes and words too long to count,
 * whatever the word rules.
 */
START_TEST(test_text_figures_are_the_fingerprint)
{
	/* clang-format off */
	static const char *const pieces[] = {
		"a", "B", "0", "7", " ", "\n", ".", "-", "é", "ß", "Σ", "½",
		"\xe2\x80\x94", "\xc2\xad", "\xcc\x81", "\xff", "\x80", "\xc3",
		"word ", "1234", "2,911.49 ", "x9y", "٣",
		("abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz"
		 "0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnop"),
	};
	/* clang-format on */
	const size_t npieces = sizeof(pieces) / sizeof(pieces[0]);
	unsigned long long x = 0x853c49e6748fea9bull; /* fixed seed */
	struct told t = {.len = 0};
	char buf[3000];

	static const char room[] = "Room B12, 3 keys; 01.01 ROOM";
	static const char strasse[] = "Straße7 ½ no digits";

	ck_assert_int_eq(im_text_figures(room, strlen(room), tell_cb, &t), 0);
	ck_assert_str_eq(t.s, "b12 3 01 01");
	t = (struct told){.len = 0};
	ck_assert_int_eq(im_text_figures(strasse, strlen(strasse), tell_cb, &t),
			 0);
	ck_assert_str_eq(t.s, "strasse7 ½");
	t = (struct told){.len = 0};
	ck_assert_int_eq(im_text_figures(NULL, 0, tell_cb, &t), 0);
	ck_assert_uint_eq(t.n, 0);
	t = (struct told){.stop_after = 2};
	ck_assert_int_eq(im_text_figures("1 2 3 4", 7, tell_cb, &t), 42);
	ck_assert_uint_eq(t.n, 2);
	for (int iter = 0; iter < 1000; iter++) {
		size_t n = random_text(buf, xorshift(&x) % 2500, pieces,
				       npieces, &x);

		buf[n] = '\0';
		params.min_word_len = 1 + (unsigned)(x >> 40) % 5;
		params.max_digits = (unsigned)(x >> 50) % 3;
		t = (struct told){.len = 0};
		ck_assert_int_eq(im_text_figures(buf, n, tell_cb, &t), 0);
		ck_assert_msg(t.sum == numbers_of(buf),
			      "iteration %d: the figures told (%s) are not "
			      "the fingerprint's",
			      iter, t.s);
	}
}
END_TEST

/*
 * Every byte value classified alike by every gear: each of the 256 inside
 * a word, at each offset of a window, the bytes around the letter and digit
 * ranges ('/', ':', '@', '[', '`', '{') and 0x7f, 0x80, 0xff included.
 */
START_TEST(test_text_every_byte_classified_alike)
{
	char buf[64 + 256 * 6], what[64];
	struct im_terms ref;

	im_terms_init(&ref);
	params.min_word_len = 4;
	params.max_digits = 1;
	for (unsigned off = 0; off < 64; off++) {
		size_t n = off;

		memset(buf, ' ', off);
		for (unsigned b = 0; b < 256; b++) {
			buf[n++] = 'q';
			buf[n++] = (char)('a' + b % 26);
			buf[n++] = (char)b;
			buf[n++] = 'r';
			buf[n++] = (char)('a' + b / 26);
			buf[n++] = ' ';
		}
		snprintf(what, sizeof(what), "every byte at offset %u", off);
		assert_scanners_agree(buf, n, &ref, what);
	}
	im_terms_release(&ref);
}
END_TEST

/*
 * The AVX-512 gear reads C2 xx and E2 80 xx sequences of separators inside
 * its windows (text.c, separator_sequences()): every sequence C2 xx and
 * E2 80 xx, and near misses (E2 81 xx, C3 xx, cut short, after a lead byte
 * that wants more, doubled), between and inside words, at every offset of a
 * window and so across window ends, give the terms of the scalar scanner.
 */
START_TEST(test_text_separator_sequences_alike)
{
	/* clang-format off */
	static const char *const around[] = {
		"", "\xe2", "\xc2", "\xf0\x9f", "\xa0", "\xe2\x80", "\xc3",
	};
	/* clang-format on */
	char buf[64 + 64 * 2 * 16], what[64];
	struct im_terms ref;

	im_terms_init(&ref);
	params.min_word_len = 2;
	params.max_digits = 1;
	for (unsigned kind = 0; kind < 4; kind++) {
		for (unsigned off = 0; off < 64; off++) {
			size_t n = off;

			memset(buf, ' ', off);
			for (unsigned k = 0; k < 64; k++) {
				const char *pre = around[(k + off) % 7];

				buf[n++] = 'w';
				buf[n++] = (char)('a' + k % 26);
				memcpy(buf + n, pre, strlen(pre));
				n += strlen(pre);
				if (kind == 0) {
					buf[n++] = (char)0xc2;
				} else if (kind == 1) {
					buf[n++] = (char)0xe2;
					buf[n++] = (char)0x80;
				} else if (kind == 2) {
					buf[n++] = (char)0xe2;
					buf[n++] = (char)0x81;
				} else {
					buf[n++] = (char)0xc3;
				}
				buf[n++] = (char)(0x80 + k);
				buf[n++] = (char)('a' + k / 26);
				buf[n++] = 'z';
				if (k % 3 == 0)
					buf[n++] = ' ';
			}
			snprintf(what, sizeof(what),
				 "separator sequences %u at offset %u", kind,
				 off);
			assert_scanners_agree(buf, n, &ref, what);
		}
	}
	/*
	 * A window that starts at a continuation byte of a separator (after
	 * an invalid lead byte) and ends with the start of a sequence whose
	 * end it cannot see (C2 AA is a letter, E2 80 8B is skipped inside a
	 * word): read from within the window, the first byte would complete
	 * the sequence as a separator.
	 */
	for (unsigned kind = 0; kind < 2; kind++) {
		size_t n = 0;

		memcpy(buf, kind ? " \xe2\x94 " : " \xe2\xa0 ", 4);
		n = 4;
		/* The window starts at buf + 2: a filler to its last bytes. */
		for (; n < 2 + 62 - kind; n++)
			buf[n] = n % 3 ? 'a' : ' ';
		buf[n++] = 'x';
		memcpy(buf + n, kind ? "\xe2\x80\x8b" : "\xc2\xaa", 3 - !kind);
		n += 3 - !kind;
		for (unsigned k = 0; k < 80; k++)
			buf[n++] = k % 5 ? 'b' : ' ';
		snprintf(what, sizeof(what),
			 "window from a continuation byte, sequence %u", kind);
		assert_scanners_agree(buf, n, &ref, what);
	}
	im_terms_release(&ref);
}
END_TEST

/* The SIMD windows and the scalar scanner give the same terms, in
 * the same order, on random mixes of ASCII, UTF-8 and invalid bytes. */
START_TEST(test_text_simd_matches_scalar)
{
	/* clang-format off */
	static const char *const pieces[] = {
		"a", "B", "z", "Q", "0", "7", " ", " ", " ", "\n", ".", "-",
		"é", "ß", "Σ", "ж", "\xe2\x80\x94", "\xc2\xad", "\xcc\x81",
		"\xff", "\x80", "\xc3", "\xf0\x9f\x98\x80", "word ", "Test ",
		"abcdefghijklmnopqrstu", "1234", "<", "&",
	};
	/* clang-format on */
	const size_t npieces = sizeof(pieces) / sizeof(pieces[0]);
	unsigned long long x = 0x2545f4914f6cdd1dull; /* fixed seed */
	struct im_terms ref;
	char buf[1200], what[32];

	im_terms_init(&ref);
	for (int iter = 0; iter < 2000; iter++) {
		size_t n = random_text(buf, xorshift(&x) % 1000, pieces,
				       npieces, &x);

		params.min_word_len = 1 + (unsigned)(x >> 40) % 5;
		params.max_digits = (unsigned)(x >> 50) % 3;
		snprintf(what, sizeof(what), "iteration %d", iter);
		assert_scanners_agree(buf, n, &ref, what);
	}
	im_terms_release(&ref);
}
END_TEST

/*
 * Windows take their words from bit masks alone (text.c, scan_blocks()):
 * words of every length from 1 to 70 at every offset of a window, ending on
 * its last byte or the next window's first, under minimum lengths up to past
 * the window's 64 bytes and digit limits 0 to 2; random words with now and
 * then a byte >= 0x80 among them.
 */
START_TEST(test_text_windows_match_scalar)
{
	unsigned long long x = 0x9e3779b97f4a7c15ull; /* fixed seed */
	struct im_terms ref;
	static const unsigned mins[] = {1, 4, 5, 31, 63, 64, 65};
	char buf[600], what[96];

	/* Under valgrind (CI's memory check, whose CPU has no AVX-512 for
	 * the SIMD scanners to compare against) every fourth offset. */
	unsigned off_step = RUNNING_ON_VALGRIND ? 4 : 1;

	im_terms_init(&ref);
	for (unsigned wl = 1; wl <= 70; wl++) {
		for (unsigned off = 0; off < 66; off += off_step) {
			size_t n = 0;

			memset(buf, ' ', off);
			n = off;
			for (int r = 0; r < 4; r++) {
				for (unsigned i = 0; i < wl; i++)
					buf[n++] = (char)('A' + (i + r) % 26);
				buf[n++] = r & 1 ? '.' : ' ';
				/* An é, or half of one: invalid. */
				if (r == 2 && wl % 3 == 0)
					buf[n++] = (char)0xc3;
				if (r == 2 && wl % 3 == 0 && wl % 2)
					buf[n++] = (char)0xa9;
			}
			for (size_t j = 0; j < sizeof(mins) / sizeof(mins[0]);
			     j++) {
				unsigned m = mins[j];

				params.min_word_len = m;
				snprintf(what, sizeof(what),
					 "word of %u at offset %u, min %u", wl,
					 off, m);
				assert_scanners_agree(buf, n, &ref, what);
				/* And cut short at the end of a word. */
				assert_scanners_agree(buf, off + wl, &ref,
						      what);
			}
		}
	}
	for (int iter = 0; iter < 3000; iter++) {
		size_t n = 0, target;

		xorshift(&x);
		target = x % 300;
		while (n < target) {
			unsigned wl, sep;

			xorshift(&x);
			wl = 1 + (unsigned)(x % 9 ? x % 9 : x % 70);
			sep = 1 + (unsigned)(x >> 20) % 3;
			for (unsigned i = 0; i < wl && n < sizeof(buf) - 4;
			     i++) {
				unsigned k = (unsigned)(x >> (i % 40)) % 40;

				buf[n++] = k < 4    ? (char)('0' + k)
					   : k < 20 ? (char)('a' + k)
						    : (char)('A' + k - 20);
			}
			for (unsigned i = 0; i < sep; i++) {
				unsigned k = (unsigned)(x >> (30 + 3 * i)) % 40;

				if (k == 0) { /* é, a letter: joins words */
					buf[n++] = (char)0xc3;
					buf[n++] = (char)0xa9;
				} else if (k == 1) {
					buf[n++] = (char)0xff; /* invalid */
				} else {
					buf[n++] = " \n.,<"[k % 5];
				}
			}
		}
		params.min_word_len = (x >> 40) % 4
					      ? 1 + (unsigned)(x >> 42) % 6
					      : 1 + (unsigned)(x >> 42) % 66;
		params.max_digits = (unsigned)(x >> 50) % 3;
		snprintf(what, sizeof(what), "iteration %d (min %u, digits %u)",
			 iter, params.min_word_len, params.max_digits);
		assert_scanners_agree(buf, n, &ref, what);
	}
	im_terms_release(&ref);
}
END_TEST

/*
 * Windows full of kept words: 32 one-letter words per window (the most a
 * window can hold), 12 or 13 words of four letters, all new so that the set
 * grows while a batch of them is added; now and then a word of 17 bytes or
 * more, or one holding an é, between them. The order of the terms is
 * checked against the text itself, not only against the scalar scanner.
 */
START_TEST(test_text_windows_full_of_words)
{
	static const unsigned lens[] = {1, 4, 5};
	char *buf = malloc(64 * 1024), *want = malloc(64 * 1024);
	struct im_terms ref;
	char what[64];

	ck_assert_ptr_nonnull(buf);
	ck_assert_ptr_nonnull(want);
	im_terms_init(&ref);
	for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
		for (unsigned odd = 0; odd < 3; odd++) {
			size_t n = 0, nw = 0, o = 0, t = 0;
			const char *wrong = NULL;

			params.min_word_len = lens[li];
			params.max_digits = 1;
			for (unsigned k = 0; n < 60000; k++) {
				/* A word spelling k in base 26 (one letter
				 * words repeat: there are only 26). */
				size_t start = n;
				unsigned v = k;

				for (unsigned i = 0; i < lens[li]; i++, v /= 26)
					buf[n++] = (char)('a' + v % 26);
				if (odd == 1 && k % 37 == 5)
					for (unsigned i = 0; i < 15; i++)
						buf[n++] = (char)('a' + i);
				if (odd == 2 && k % 41 == 7) {
					buf[n++] = (char)0xc3; /* é */
					buf[n++] = (char)0xa9;
				}
				memcpy(want + o, buf + start, n - start);
				want[o + n - start] = '\0';
				o += n - start + 1;
				nw++;
				buf[n++] = ' ';
			}
			snprintf(what, sizeof(what), "words of %u, variant %u",
				 lens[li], odd);
			assert_scanners_agree(buf, n, &ref, what);
			/* The terms are the words in text order, repeats
			 * dropped. */
			o = 0;
			for (size_t i = 0; i < nw; i++) {
				const char *w = want + o;
				bool seen = false;

				o += strlen(w) + 1;
				for (size_t j = 0; j < t && lens[li] == 1; j++)
					seen |= !strcmp(im_terms_str(&terms, j),
							w);
				if (seen)
					continue;
				if (t == terms.n ||
				    strcmp(im_terms_str(&terms, t), w)) {
					wrong = w;
					break;
				}
				t++;
			}
			ck_assert_msg(!wrong && t == terms.n,
				      "%s: term %zu is %s, not %s", what, t,
				      t < terms.n ? im_terms_str(&terms, t)
						  : "missing",
				      wrong ? wrong : "past the end");
		}
	}
	free(buf);
	free(want);
	im_terms_release(&ref);
}
END_TEST

struct thread_job {
	const char *text;
	size_t n_terms;
	int ret;
};

static void *extract_in_thread(void *arg)
{
	struct thread_job *job = arg;
	struct im_terms t;

	im_terms_init(&t);
	for (int i = 0; i < 50 && !job->ret; i++)
		job->ret = im_text_terms(job->text, strlen(job->text), &params,
					 &t);
	job->n_terms = t.n;
	im_terms_release(&t);
	return NULL;
}

/* Threads with their own struct im_terms may extract at once, including
 * the first use of the code point table. */
START_TEST(test_text_threads_extract_at_once)
{
	const char *text = "Съешь же ещё этих мягких французских булок, "
			   "да выпей чаю. Ξεσκεπάζω την ψυχοφθόρα βδελυγμία.";
	struct thread_job jobs[4];
	pthread_t tid[4];

	for (int i = 0; i < 4; i++) {
		jobs[i] = (struct thread_job){.text = text};
		ck_assert_int_eq(pthread_create(&tid[i], NULL,
						extract_in_thread, &jobs[i]),
				 0);
	}
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(pthread_join(tid[i], NULL), 0);
	extract(text, IM_FMT_TEXT);
	ck_assert_uint_eq(terms.n, 9);
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(jobs[i].ret, 0);
		ck_assert_msg(jobs[i].n_terms == terms.n,
			      "thread %d found %zu terms, expected %zu", i,
			      jobs[i].n_terms, terms.n);
	}
}
END_TEST

/* ---- HTML ---------------------------------------------------------------- */

START_TEST(test_text_html_entities)
{
	assert_html("caf&eacute; &Ntilde;and&uacute; &hellip;&amp;&lt;&gt;",
		    "café Ñandú …&<>");
	assert_html("&#233;&#xE9;&#XE9;&#x1F600;", "ééé\xf0\x9f\x98\x80");
	/* Without ';': decoded when the whole name is known. */
	assert_html("&amp &eacute caf&eacutex &#233x", "& é caf&eacutex éx");
	/* Unknown names and bare '&' are text. */
	assert_html("&bogus; AT&T & &; &#; &#x; &#xZ;",
		    "&bogus; AT&T & &; &#; &#x; &#xZ;");
	/* windows-1252 range, NUL, surrogates and overflow. */
	assert_html("&#128;&#150;", "€–");
	assert_html("&#0;&#xD800;&#99999999999999999999;",
		    "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
	assert_html("&apos;&quot;&nbsp;&copy;", "'\"\xc2\xa0©");

	extract("<p>d&eacute;j&agrave; vu, r&#233;sum&#xe9;s, na&iuml;ve</p>",
		IM_FMT_HTML);
	assert_terms("déjà", "résumés", "naïve", NULL);
	extract("&unknownentity; stays", IM_FMT_HTML);
	assert_terms("unknownentity", "stays", NULL);
}
END_TEST

START_TEST(test_text_html_declared_charset)
{
	extract("<html><head><meta charset=\"ISO-8859-1\"></head>"
		"<p>caf\xe9 na\xefve \x93quoted\x94</p>",
		IM_FMT_HTML);
	assert_terms("café", "naïve", "quoted", NULL);
	extract("<meta http-equiv=Content-Type content='text/html; "
		"charset=windows-1252'><p>Gr\xfc\xdf"
		"e</p>",
		IM_FMT_HTML);
	assert_terms("grüsse", NULL);
	/* UTF-8 declared or nothing declared: bytes are read as UTF-8. */
	extract("<meta charset=utf-8><p>caf\xc3\xa9 caf\xe9s</p>", IM_FMT_HTML);
	assert_terms("café", NULL);
	/* Charsets beyond Latin-1 and Latin-9 go through iconv. */
	extract("<meta charset=\"windows-1251\"><p>\xd0\xe0\xe7\xec\xe5\xf0 "
		"\xef\xe5\xf0\xe5\xe4\xe0\xf7\xe8</p>",
		IM_FMT_HTML);
	assert_terms("размер", "передачи", NULL);
	extract("<meta charset=ISO-8859-2><p>Za\xbf\xf3\xb3\xe6 "
		"przynios\xb3y \xb6wietne</p>",
		IM_FMT_HTML);
	assert_terms("zażółć", "przyniosły", "świetne", NULL);
	/* A byte the charset has no character for is one U+FFFD, a
	 * separator, and the rest is read. */
	extract("<meta charset=iso-8859-7><p>alpha\xff"
		"beta \xe1\xe2\xe3\xe4</p>",
		IM_FMT_HTML);
	assert_terms("alpha", "beta", "αβγδ", NULL);
	/* A name iconv does not know, or one no page can truly be in (a
	 * <meta> saying UTF-16 in an ASCII page), reads as UTF-8. */
	extract("<meta charset=x-no-such-charset><p>caf\xc3\xa9 here</p>",
		IM_FMT_HTML);
	assert_terms("café", "here", NULL);
	extract("<meta charset=utf-16><p>caf\xc3\xa9 here</p>", IM_FMT_HTML);
	assert_terms("café", "here", NULL);
}
END_TEST

START_TEST(test_text_html_entity_table)
{
	ck_assert_uint_eq(im_html_entity_count(), 253);
	ck_assert_int_eq(im_html_entity("nbsp", 4), 160);
	ck_assert_int_eq(im_html_entity("yuml", 4), 255);
	ck_assert_int_eq(im_html_entity("Yuml", 4), 376);
	ck_assert_int_eq(im_html_entity("apos", 4), 39);
	ck_assert_int_eq(im_html_entity("diams", 5), 9830);
	ck_assert_int_eq(im_html_entity("thetasym", 8), 977);
	ck_assert_int_eq(im_html_entity("AMP", 3), -1);
	ck_assert_int_eq(im_html_entity("am", 2), -1);
	ck_assert_int_eq(im_html_entity("ampx", 4), -1);
	ck_assert_int_eq(im_html_entity("", 0), -1);
	/* Longer than any name, or with a 0 byte: no entity. */
	ck_assert_int_eq(im_html_entity("thetasyms", 9), -1);
	ck_assert_int_eq(im_html_entity("lt\0", 3), -1);
	ck_assert_int_eq(im_html_entity("\0lt", 3), -1);
	ck_assert_int_eq(im_html_entity("zwnj", 4), 8204);
	ck_assert_int_eq(im_html_entity("AElig", 5), 198);
}
END_TEST

START_TEST(test_text_html_markup_removed)
{
	size_t len;
	char *buf = read_data("page.html", &len);

	ck_assert_int_eq(im_extract_sniff(buf, len), IM_FMT_HTML);
	extract_n(buf, len, IM_FMT_HTML);
	free(buf);
	assert_has("keeping");
	assert_has("light");
	assert_has("lamp");
	assert_has("headland");
	assert_has("frédéric");
	assert_has("renée");
	assert_has("café");
	assert_has("wicks");
	assert_has("matches");
	assert_has("supervisors"); /* Sup<b>er</b>visors: inline tag */
	/* Scripts, styles, the title (the tab's), comments, attributes and
	 * tag names are gone. */
	assert_lacks("lighthouse");
	assert_lacks("handbook");
	assert_lacks("scriptvariable");
	assert_lacks("trackvisitor");
	assert_lacks("stylerule");
	assert_lacks("georgia");
	assert_lacks("templatetool");
	assert_lacks("navigation");
	assert_lacks("tooltiptext");
	assert_lacks("https");
	assert_lacks("html");
	assert_lacks("meta");
}
END_TEST

START_TEST(test_text_html_tags)
{
	assert_html("<p>one</p><p>two</p>", " one  two ");
	assert_html("a<b>c</b>d<br>e<span class=x>f</span>", "acd ef");
	assert_html("<a title=\"x > y\" href='a>b'>link</a>", "link");
	assert_html("if a < b and c<1", "if a < b and c<1");
	assert_html("<!DOCTYPE html><?xml version=\"1.0\"?>x", "  x");
	assert_html("<![CDATA[raw &amp; <b>]]>after", "raw &amp; <b>after");
	assert_html("<SCRIPT type=x>if (a</b) x()</SCRIPT >y", " y");
	assert_html("<style/>kept", " kept");
	assert_html("<script>a</scripts></script>b", " b");
	assert_html("x<!-->y<!--->z<!-- a -- b -->w", "xyzw");
}
END_TEST

/*
 * Tag names are looked up as their first 8 bytes, lower-cased (html.c):
 * read with one 8-byte load where 8 bytes are left, byte by byte near the
 * end of the input. Every inline name must vanish and every other name give
 * a space, by both paths, in any case, and a name of 8 bytes or more whose
 * start is an inline name must not match it.
 */
START_TEST(test_text_html_tag_names)
{
	static const char *const inline_names[] = {
		"a",	"abbr",	 "acronym", "b",      "bdi",	"bdo", "big",
		"cite", "code",	 "data",    "del",    "dfn",	"em",  "font",
		"i",	"ins",	 "kbd",	    "mark",   "nobr",	"q",   "s",
		"samp", "small", "span",    "strike", "strong", "sub", "sup",
		"time", "tt",	 "u",	    "var",    "wbr",
	};
	static const char *const other_names[] = {
		"p",	     "div",	"li",	  "h1",	    "spa",
		"spans",     "ab",	"aa",	  "c",	    "acronyms",
		"strongly",  "codeblk", "em-x",	  "span:x", "a1",
		"subscript", "tt2",	"bdibdi", "x-span", "abbrevia",
	};
	char in[128], up[16];

	for (size_t i = 0; i < sizeof(inline_names) / sizeof(*inline_names);
	     i++) {
		const char *n = inline_names[i];
		size_t k;

		/* Long tail: the 8-byte load; no tail: byte by byte. */
		snprintf(in, sizeof(in), "x<%s>y</%s>z and more text", n, n);
		assert_html(in, "xyz and more text");
		snprintf(in, sizeof(in), "x<%s>y</%s>", n, n);
		assert_html(in, "xy");
		snprintf(in, sizeof(in), "x<%s class=k>y", n);
		assert_html(in, "xy");
		for (k = 0; n[k] && k < sizeof(up) - 1; k++)
			up[k] = (char)toupper((unsigned char)n[k]);
		up[k] = '\0';
		snprintf(in, sizeof(in), "x<%s>y</%s>z and more text", up, up);
		assert_html(in, "xyz and more text");
		snprintf(in, sizeof(in), "x<%s/>", up);
		assert_html(in, "x");
	}
	for (size_t i = 0; i < sizeof(other_names) / sizeof(*other_names);
	     i++) {
		const char *n = other_names[i];

		snprintf(in, sizeof(in), "x<%s>y</%s>z and more text", n, n);
		assert_html(in, "x y z and more text");
		snprintf(in, sizeof(in), "x<%s>y</%s>", n, n);
		assert_html(in, "x y ");
	}
	/* The 8-byte load reads exactly to the end of the input. */
	assert_html("x<span>y", "xy");
	assert_html("x<spans>", "x ");
	assert_html("<acronym>", "");
	assert_html("<acronymx", "");
	assert_html("x<script>", "x ");
	assert_html("x<STYLE>p{}</style>y", "x y");
	assert_html("x<scripts>y", "x y");
	assert_html("x<scrip>y", "x y");
	/* A title is the tab's, not the page's text. */
	assert_html("<title>Tab</title>x<TITLE/>y<titles>z", " x y z");
}
END_TEST

/* A note's number is not text in LibreOffice's and pandoc's exports, as in
 * docx and odt; on another page, a link of those classes is. */
START_TEST(test_text_html_office_notes)
{
	const char *lo = "<meta name=\"generator\" content=\"LibreOffice 7.4\"/>";
	const char *pd = "<meta name=\"generator\" content=\"pandoc\" />";
	char in[512];

	snprintf(in, sizeof(in),
		 "%sgauges<a class=\"sdfootnoteanc\" href=\"#sdfootnote1sym\">"
		 "<sup>1</sup></a> and<p><a class=\"sdfootnotesym\">1</a>Note"
		 "<a href=\"x\">link</a>",
		 lo);
	assert_html(in, " gauges  and  Notelink");
	snprintf(in, sizeof(in),
		 "%skeeper<a href=\"#fn1\" class=\"footnote-ref\" "
		 "role=\"doc-noteref\"><sup>1</sup></a> wrote<a "
		 "href=\"#fnref1\" role=\"doc-backlink\">back</a>",
		 pd);
	assert_html(in, " keeper  wrote ");
	assert_html("keeper<a class=\"footnote-ref\"><sup>1</sup></a>",
		    "keeper1");
	/* The marks in a link's address are not its class: its text stays.
	 * An old export's upper-case CLASS is a class. */
	snprintf(in, sizeof(in),
		 "%sthe <a href=\"https://www.w3.org/TR/dpub-aria-1.1/"
		 "#doc-noteref\">noteref role</a> and <a href='sdfootnote.html' "
		 "title=doc-backlink>help</a> x<A CLASS=sdfootnoteanc>2</A>",
		 lo);
	assert_html(in, " the noteref role and help x ");
	/* LibreOffice's page header and footer, divs nested in them. */
	snprintf(in, sizeof(in),
		 "%s<div title=\"header\"><p>Letterhead<div>x</div>y</div>"
		 "<p>Body<div title=\"footer\"><DIV>Page</div></DIV>end"
		 "<div title=\"note\">kept</div>",
		 lo);
	assert_html(in, "   Body end kept ");
	/* Quoted either way, or not at all, as HTML allows. */
	snprintf(in, sizeof(in),
		 "%s<div title=header>Letterhead</div>Body"
		 "<div class=x title = 'footer' >Page</div>end"
		 "<div data-title=\"header\">kept</div>",
		 lo);
	assert_html(in, "  Body end kept ");
	/* An unclosed note drops the rest, as an unclosed <script>. */
	snprintf(in, sizeof(in), "%sa<a role=\"doc-noteref\">1", pd);
	assert_html(in, " a ");
}
END_TEST

/* The generator <meta> is looked for in the whole head, however long what
 * comes before it, and not past the head. */
START_TEST(test_text_html_office_head)
{
	char in[4096] = "<!DOCTYPE html><html><head><!-- <body> --><title>";
	char *got;

	for (int i = 0; i < 200; i++)
		strcat(in, "a long title ");
	strcat(in, "</title><style>p<b{}</style><script>if (a<b) x();</script>"
		   "<link rel=stylesheet href=s.css>"
		   "<meta name=generator content='pandoc 3.1'>"
		   "</head><body>keeper<a class=\"footnote-ref\">1</a>");
	got = html_text(in);
	ck_assert_str_eq(got, "          keeper ");
	free(got);
	/* Past the head, a generator <meta> is not the page's. */
	assert_html("<head></head><body><meta name=\"generator\" "
		    "content=\"pandoc\">keeper<a class=\"footnote-ref\">1</a>",
		    "    keeper1");
	assert_html("<p>x</p><meta name=\"generator\" content=\"pandoc\">"
		    "keeper<a class=\"footnote-ref\">1</a>",
		    " x  keeper1");
}
END_TEST

/*
 * The end of a tag and of a quoted value are searched 16 bytes at a time
 * (html.c, find3()): a tag, a quoted '>', an entity and the text after
 * them, shifted across every offset of two blocks.
 */
START_TEST(test_text_html_block_boundaries)
{
	static const char tail[] = "<a title=\"p>q\" href='r>s' x=\"\">t</a>"
				   "&amp;u<b\n>v</b >w<p\t/>z";
	char in[160], want[160];

	for (size_t pad = 0; pad < 40; pad++) {
		memset(in, 'x', pad);
		memcpy(in + pad, tail, sizeof(tail));
		memset(want, 'x', pad);
		strcpy(want + pad, "t&uvw z");
		assert_html(in, want);
	}
}
END_TEST

/*
 * im_html_text() reserves len + 1 bytes once and writes without checking
 * for room, since text is never longer than its markup (html.c): the
 * inputs that come closest, in a buffer of exactly that size after two
 * bytes already there (AddressSanitizer and valgrind see a byte too many).
 */
START_TEST(test_text_html_output_bound)
{
	static const struct {
		const char *in, *want;
	} cases[] = {
		{"&ge&le&ne&ni&or", "\u2265\u2264\u2260\u220b\u2228"},
		{"&#0&#0&#x0&#1&#9", "\ufffd\ufffd\ufffd\x01\t"},
		{"&#65536;&#x10000&#x10FFFF", "\U00010000\U00010000\U0010ffff"},
		{"&#128&#x9F&lt&gt&mu", "\u20ac\u0178<>\u03bc"},
		{"<a><b><i></i></b></a>", ""},
		{"<p><p><p>", "   "},
		{"<!x><?y?><![CDATA[z]]>", "  z"},
		{"x<", "x<"},
		{"&", "&"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		size_t n = strlen(cases[i].in), w = strlen(cases[i].want);
		struct im_buf b = {malloc(2 + n + 1), 2, 2 + n + 1};
		char *in = malloc(n);

		ck_assert_ptr_nonnull(b.p);
		memcpy(b.p, "xy", 2);
		memcpy(in, cases[i].in, n);
		ck_assert_int_eq(im_html_text(in, n, &b), 0);
		ck_assert_msg(b.cap == 2 + n + 1 && b.len == 2 + w &&
				      !memcmp(b.p, "xy", 2) &&
				      !memcmp(b.p + 2, cases[i].want, w),
			      "html \"%s\": %zu bytes of text in a buffer of "
			      "%zu, want \"%s\"",
			      cases[i].in, b.len, b.cap, cases[i].want);
		free(in);
		im_buf_release(&b);
	}
}
END_TEST

/* The scalar and the AVX-512 gear give the same text of in[0, n). */
static void assert_html_gears_agree(const char *in, size_t n, const char *what)
{
	char *want = html_gear_text(in, n, IM_HTML_SCALAR);
	char *got = html_gear_text(in, n, IM_HTML_AVX512);

	ck_assert_msg(!strcmp(want, got),
		      "%s: \"%.*s\" gives \"%s\" scalar, \"%s\" AVX-512", what,
		      (int)n, in, want, got);
	free(want);
	free(got);
}

/*
 * The AVX-512 gear settles most of a window's markup from bit masks and
 * hands the rest to the scalar code (html.c): random soups of the pieces
 * either side of that line (quotes after '=' or a space, single quotes in
 * and out of values, '>' in values, tags across windows, '<' in a tag,
 * "<!", script, entities, text '<' and '>'), 64 bytes or more so that the
 * windows see them, at every offset into their first window, give the same
 * text in every gear.
 */
START_TEST(test_text_html_gears_agree)
{
	/* clang-format off */
	static const char *const pieces[] = {
		"<p>", "</p>", "<span class=\"pre\">", "</span>", "<a href=\"",
		"\">", "<a href='x'>", "<b>", "</b>", "=\"", "\"", "'", "=",
		"<", ">", "</", "<!--", "-->", "<!DOCTYPE html>", "<?x?>",
		"<script>", "</script>", "<style>", "</style>", "<![CDATA[",
		"<title>", "</title>",
		"<meta name=\"generator\" content=\"pandoc\">",
		"<a class=\"footnote-ref\">", "</a>",
		"]]>", "&amp;", "&", "&#x41;", "&lt", "word ", "text", " ",
		"\n", "\xc3\xa9", "<div\n class = \"x\" >",
		"<img src=\"a.png\" alt=\"a > b\"/>", "<br/>", "/", "x-y:z",
		"<Span>", "<SCRIPT>", "<a title=\"it's\">",
		("<a class=\"reference external\" href=\"https://docs.python.org"
		 "/3/library/functions.html#open\" title=\"open\">"),
		"<td class=\"a\"b=\"c\">", "<x a=\"1\"=\"2\">", "<a <b>",
		"0123456789abcdefghijklmnopqrstuvwxyz", "< a>", "</ b>", "<1>",
	};
	/* clang-format on */
	const size_t npieces = sizeof(pieces) / sizeof(*pieces);
	unsigned long long x = 0x2545f4914f6cdd1dull; /* fixed seed */
	char buf[2048];

	if (!im_html_has_gear(IM_HTML_AVX512)) {
		fprintf(stderr, "test_text_html_gears_agree: the CPU lacks "
				"what the AVX-512 HTML gear needs, only the "
				"scalar gear is tested\n");
		return;
	}
	for (int iter = 0; iter < 20000; iter++) {
		size_t n = 0, count = 1 + xorshift(&x) % 120;

		for (size_t k = 0; k < count; k++) {
			const char *piece = pieces[xorshift(&x) % npieces];
			size_t pl = strlen(piece);

			if (n + pl > sizeof(buf))
				break;
			memcpy(buf + n, piece, pl);
			n += pl;
		}
		for (size_t off = 0; off < 3 && off <= n; off++) {
			char what[64];

			snprintf(what, sizeof(what), "iteration %d, offset %zu",
				 iter, off);
			assert_html_gears_agree(buf + off, n - off, what);
		}
	}
}
END_TEST

/*
 * Tags on the line between the masks and the scalar code, each shifted
 * across every bit of a window (a quote or '=' at bit 63, a tag that ends
 * in the next window) with text before and after it: the same text in
 * every gear.
 */
START_TEST(test_text_html_gears_agree_at_every_offset)
{
	static const char *const cases[] = {
		"<p \"a=\" b>text\" more>",
		"<p a= \"x>y\">",
		"<p a='x>y'>",
		"<a title=\"it's\">",
		"<a b=\"1\"=\"2\">",
		"<a <b c>",
		"<a x=\"v\" \"w\">",
		"<p x=\"a\"\"b\">c\">",
		"<a href=\"x\" title='y\">z'>",
		"<script>a<b>c</script>",
		"<style x=\"y\">p{}</style>",
		"<b>&amp;&#x41;</b>",
		"<!-- x -->",
		"<a x='1' y='2'>",
		"<a x='say \"hi\"'>",
		"<a x='1' y=\"2\">",
		"<a x=\"1\" y='2'>",
		"<a x='v>w' y=\"z\">",
		("<a t='a long value that runs on past the end of the window, "
		 "surely \"quoted\" > and on'>"),
		("<a t='a long value that runs on past the end of the window, "
		 "surely \"quoted\" and on' u=\"v\">"),
		"<br/>",
		"</ p>",
		"<1>",
		"a<b",
		"a>b",
	};
	char buf[256], what[64];

	if (!im_html_has_gear(IM_HTML_AVX512))
		return; /* said by test_text_html_gears_agree */
	/* A tag longer than a window is read a window at a time from its
	 * '<': a quote that is a byte (no '=' before it) at every place
	 * around the second window's first bit. */
	for (size_t len = 50; len < 80; len++) {
		size_t n = 0;

		memcpy(buf, "<a ", 3);
		memset(buf + 3, 'x', len);
		n = 3 + len;
		memcpy(buf + n, "\"b=\"c>d\"e>", 10);
		n += 10;
		memset(buf + n, 't', 80);
		n += 80;
		snprintf(what, sizeof(what), "attribute of %zu bytes", len);
		assert_html_gears_agree(buf, n, what);
	}
	for (size_t c = 0; c < sizeof(cases) / sizeof(*cases); c++) {
		size_t cl = strlen(cases[c]);

		for (size_t pad = 0; pad < 70; pad++) {
			size_t n = 0;

			for (size_t k = 0; k < pad; k++)
				buf[n++] = k % 7 == 6 ? ' ' : 'w';
			memcpy(buf + n, cases[c], cl);
			n += cl;
			memset(buf + n, 't', 80);
			n += 80;
			snprintf(what, sizeof(what), "after %zu bytes", pad);
			assert_html_gears_agree(buf, n, what);
		}
	}
}
END_TEST

/* The same on the fixtures and on long runs of one tag kind, whole windows
 * of it (the fast path's steady state). */
START_TEST(test_text_html_gears_agree_on_documents)
{
	static const char *const runs[] = {
		"<span class=\"pre\">x</span>",
		"<p>",
		"text and words ",
		("<a href=\"https://example.org/a/very/long/path/that/crosses"
		 "/the/window/edge.html#anchor\" title=\"t\">link</a>"),
		"&amp;",
		"<!-- c -->",
	};
	static const char *const names[] = {"page.html", "plain.txt"};

	if (!im_html_has_gear(IM_HTML_AVX512))
		return; /* said by test_text_html_gears_agree */
	for (size_t f = 0; f < sizeof(names) / sizeof(*names); f++) {
		size_t len;
		char *doc = read_data(names[f], &len);

		assert_html_gears_agree(doc, len, names[f]);
		free(doc);
	}
	for (size_t r = 0; r < sizeof(runs) / sizeof(*runs); r++) {
		size_t pl = strlen(runs[r]), n = 0;
		char *doc = malloc(64 * pl);

		for (int k = 0; k < 64; k++, n += pl)
			memcpy(doc + n, runs[r], pl);
		assert_html_gears_agree(doc, n, "64 times one piece");
		free(doc);
	}
}
END_TEST

/* Lists are numbered from the first <ol> on (the gear's windows stop at
 * it): a stray </ol> before it, in a window, is no list met. The scalar
 * gear counted lists from it, so a <ul> after it was a level deeper than
 * the AVX-512 gear's, and under 32 <ol> the item was numbered in one gear
 * only (fuzz_html). */
START_TEST(test_text_html_gears_agree_on_a_stray_list_end)
{
	char buf[512];
	size_t n = 0;

	if (!im_html_has_gear(IM_HTML_AVX512))
		return; /* said by test_text_html_gears_agree */
	n += (size_t)sprintf(buf + n, "</ol><ul>");
	for (int k = 0; k < 32; k++)
		n += (size_t)sprintf(buf + n, "<ol>");
	n += (size_t)sprintf(buf + n, "<li>item</li> and the text after it");
	assert_html_gears_agree(buf, n, "a stray </ol>, 32 <ol> under a <ul>");
}
END_TEST

START_TEST(test_text_html_unterminated)
{
	assert_html("text <!-- never closed words", "text ");
	assert_html("before <script>var hidden = 1;", "before  ");
	assert_html("seen <style>p { }", "seen  ");
	assert_html("shown <div class=\"unclosed", "shown ");
	assert_html("shown <div class=\"unbalanced>tail", "shown  tail");
	assert_html("tail <", "tail <");
	assert_html("tail </", "tail </");
	assert_html("amp &", "amp &");
	assert_html("num &#", "num &#");
	assert_html("hex &#x", "hex &#x");
	assert_html("cdata <![CDATA[open", "cdata open");
	assert_html("decl <!DOCTYPE", "decl  ");

	extract("good words <b unterminated", IM_FMT_HTML);
	assert_terms("good", "words", NULL);
}
END_TEST

/* Random bytes drawn from HTML and MIME syntax must never crash or hang. */
START_TEST(test_text_malformed_input_never_crashes)
{
	static const char alphabet[] = "<>&#;x!-/\"'=?abcdSCRIPTstyle \n\r\t"
				       "\xc3\xa9\xff:ABC09_.[]";
	unsigned long long x = 0x9e3779b97f4a7c15ull; /* fixed seed */
	char buf[512];

	for (int iter = 0; iter < 3000; iter++) {
		size_t n;

		xorshift(&x);
		n = x % sizeof(buf);
		for (size_t i = 0; i < n; i++) {
			xorshift(&x);
			buf[i] = alphabet[x % (sizeof(alphabet) - 1)];
		}
		for (int k = IM_FMT_TEXT; k <= IM_FMT_BINARY; k++)
			extract_n(buf, n, (enum im_format)k);
		/* As a multipart body, with its boundary sprinkled in. */
		if (n > 40) {
			static const char hdr[] =
				"Content-Type: multipart/mixed; "
				"boundary=ab\n\n";
			char msg[sizeof(hdr) + sizeof(buf)];

			memcpy(msg, hdr, sizeof(hdr) - 1);
			memcpy(msg + sizeof(hdr) - 1, buf, n);
			memcpy(msg + sizeof(hdr) - 1 + n / 3, "\n--ab\n", 6);
			extract_n(msg, sizeof(hdr) - 1 + n, IM_FMT_EMAIL);
		}
	}
}
END_TEST

/* Every prefix of every fixture, read as every kind: a document cut short
 * anywhere (inside a tag, an entity, a header, a boundary, a base64 block or
 * a UTF-8 sequence) is read without error and without reading past its end. */
START_TEST(test_text_truncated_fixtures)
{
	static const char *const names[] = {"plain.txt", "page.html", "qp.eml",
					    "multipart.eml"};

	for (size_t f = 0; f < sizeof(names) / sizeof(names[0]); f++) {
		size_t len;
		char *buf = read_data(names[f], &len);

		for (size_t n = 0; n <= len; n += 1 + n / 256)
			for (int k = IM_FMT_TEXT; k < IM_FMT_BINARY; k++)
				extract_n(buf, n, (enum im_format)k);
		free(buf);
	}
}
END_TEST

/* ---- E-mail -------------------------------------------------------------- */

START_TEST(test_text_email_quoted_printable)
{
	extract_file("qp.eml");
	/* Soft line breaks join "mu=\nst" and "d=E9p=F4t" is latin-1. */
	assert_has("must");
	assert_has("dépôt");
	assert_has("nightfall");
	assert_has("acknowledge");
	assert_lacks("=3D");
	/* The Subject, with its encoded-word, is kept. */
	assert_has("tide");
	assert_has("tables");
	assert_has("nördlingen");
	assert_has("moorings");
	/* Other headers are not. */
	assert_lacks("harbour");
	assert_lacks("master");
	assert_lacks("crew");
	assert_lacks("headerbrand");
	assert_lacks("mailer");
	assert_lacks("mime");
	assert_lacks("version");
}
END_TEST

START_TEST(test_text_email_multipart)
{
	extract_file("multipart.eml");
	/* Subject: Q and B encoded-words, folded over two lines. */
	assert_has("réunion");
	assert_has("bénévoles");
	assert_has("médiathèque");
	/* multipart/alternative: the HTML (last) rendering only. */
	assert_has("volunteers");
	assert_has("wednesday");
	assert_has("evening");
	assert_has("flashlights");
	assert_has("gloves");
	assert_lacks("plainonly");
	assert_lacks("rendering");
	/* The base64 text/plain part. */
	assert_has("schedule");
	assert_has("gardening");
	assert_has("shifts");
	assert_has("promptly");
	assert_has("danke");
	assert_has("schön");
	/* Attachments, preamble, epilogue and headers are ignored. */
	assert_lacks("pdfsecretwords");
	assert_lacks("hidden");
	assert_lacks("attachedtextfile");
	assert_lacks("preamblewords");
	assert_lacks("epiloguewords");
	assert_lacks("receivedtoken");
	assert_lacks("messageidtoken");
	assert_lacks("josé");
	assert_lacks("garcía");
	assert_lacks("roster");
	assert_lacks("boundary");
}
END_TEST

START_TEST(test_text_email_non_mime_and_mbox)
{
	extract("From sender@example.org Mon Mar  3 09:12:00 2025\n"
		"From: Someone <sender@example.org>\n"
		"Subject: plain message\n"
		"\n"
		"Body without any MIME headers, =3D stays literal.\n",
		IM_FMT_EMAIL);
	assert_terms("plain", "message", "body", "without", "mime", "headers",
		     "stays", "literal", NULL);

	/* CRLF line ends and a message that is only headers. */
	extract("Subject: only\r\n a subject line\r\nTo: nobody\r\n",
		IM_FMT_EMAIL);
	assert_terms("only", "subject", "line", NULL);

	/* windows-1252 body, base64, top-level text/html. */
	extract("Subject: =?windows-1252?Q?=93smart=94_quotes?=\n"
		"Content-Type: text/html; charset=windows-1252\n"
		"Content-Transfer-Encoding: base64\n"
		"\n"
		"PHA+bmHvdmUgY2Fm6SZuYnNwO2xpZmU8L3A+\n",
		IM_FMT_EMAIL);
	assert_terms("smart", "quotes", "naïve", "café", "life", NULL);

	/* An RFC 2231 language after the charset's name: the name alone
	 * converts, with a language short or longer than any charset name
	 * (review 21: that one overran a stack buffer). */
	extract("Subject: x\n"
		"MIME-Version: 1.0\n"
		"Content-Type: text/plain; charset=iso-8859-2*pl\n"
		"\n"
		"Za\xbf\xf3\xb3\xe6 here\n",
		IM_FMT_EMAIL);
	assert_terms("zażółć", "here", NULL);
	extract("Subject: x\n"
		"MIME-Version: 1.0\n"
		"Content-Type: text/plain; charset=\"iso-8859-2*"
		"plplplplplplplplplplplplplplplplplplplplplplplplplplplplpl"
		"plplplplplplplplplplplplplplplplplplplplplplplplplplplplpl\"\n"
		"\n"
		"Za\xbf\xf3\xb3\xe6 here\n",
		IM_FMT_EMAIL);
	assert_terms("zażółć", "here", NULL);
}
END_TEST

START_TEST(test_text_email_encoded_words)
{
	extract("Subject: =?UTF-8?q?caf=C3=A9_cr=C3=A8me?= and\n"
		" =?iso-8859-1?b?cHLpc2VudA==?= =?utf-8?Q?ensemble?=\n"
		"\n",
		IM_FMT_EMAIL);
	/* Blank between two encoded-words vanishes: "présent"+"ensemble". */
	assert_terms("café", "crème", "présentensemble", NULL);

	/* KOI8-R, in an encoded-word and in the body (iconv). */
	extract("Subject: =?koi8-r?B?0sHazcXS?=\n"
		"Content-Type: text/plain; charset=\"koi8-r\"\n"
		"\n"
		"\xd0\xc5\xd2\xc5\xc4\xc1\xde\xc9\n",
		IM_FMT_EMAIL);
	assert_terms("размер", "передачи", NULL);
	/* Only a plain name reaches iconv, never one with "//" options. */
	extract("Content-Type: text/plain; charset=\"koi8-r//IGNORE\"\n"
		"\n"
		"caf\xc3\xa9 here\n",
		IM_FMT_EMAIL);
	assert_terms("café", "here", NULL);

	/* Malformed encoded-words stay as text. */
	extract("Subject: =?utf-8?X?broken?= =?nothing here\n\n", IM_FMT_EMAIL);
	assert_terms("broken", "nothing", "here", NULL);
}
END_TEST

/* Inputs built to make a naive parser quadratic finish (well within the
 * test's timeout) and still yield the words around them. */
START_TEST(test_text_adversarial_input_stays_linear)
{
	const size_t reps = 100000;
	char *buf = malloc(reps * 8 + 64);
	size_t n;

	/* A Subject of unterminated encoded-words. */
	n = (size_t)sprintf(buf, "Subject: first ");
	for (size_t i = 0; i < reps; i++, n += 6)
		memcpy(buf + n, "=?x?q?", 6);
	n += (size_t)sprintf(buf + n, " last\n\nbody");
	extract_n(buf, n, IM_FMT_EMAIL);
	assert_has("first");
	assert_has("last");
	assert_has("body");

	/* Tags with unbalanced quotes, comments and scripts never closed. */
	n = (size_t)sprintf(buf, "start ");
	for (size_t i = 0; i < reps; i++, n += 7)
		memcpy(buf + n, "<a x=\"y", 7);
	extract_n(buf, n, IM_FMT_HTML);
	assert_terms("start", NULL);
	n = (size_t)sprintf(buf, "start ");
	for (size_t i = 0; i < reps; i++, n += 8)
		memcpy(buf + n, "<script>", 8);
	extract_n(buf, n, IM_FMT_HTML);
	assert_terms("start", NULL);

	/* Deeply nested multiparts: ignored past the depth limit. */
	n = 0;
	for (size_t i = 0; i < 2000; i++)
		n += (size_t)sprintf(buf + n,
				     "Content-Type: multipart/mixed; "
				     "boundary=b%zu\n\n--b%zu\n",
				     i, i);
	n += (size_t)sprintf(buf + n, "\ndeepest words\n");
	extract_n(buf, n, IM_FMT_EMAIL);
	ck_assert_uint_eq(terms.n, 0);
	free(buf);
}
END_TEST

START_TEST(test_text_email_nested_and_rfc822)
{
	extract("Content-Type: multipart/mixed; boundary=a\n"
		"\n"
		"--a\n"
		"Content-Type: message/rfc822\n"
		"\n"
		"Subject: forwarded subject\n"
		"From: hidden@example.org\n"
		"Content-Type: multipart/related; boundary=\"b\"\n"
		"\n"
		"--b\n"
		"\n"
		"innermost plain text\n"
		"--b\n"
		"Content-Type: image/png\n"
		"\n"
		"iVBORw0KGgo pixeldata\n"
		"--b--\n"
		"--a\n"
		"Content-Type: text/plain\n"
		"\n"
		"second part without close delimiter",
		IM_FMT_EMAIL);
	assert_terms("forwarded", "subject", "innermost", "plain", "text",
		     "second", "part", "without", "close", "delimiter", NULL);
}
END_TEST

/* ---- Kinds --------------------------------------------------------------- */

START_TEST(test_text_binary_detection)
{
	size_t len;
	char *buf = read_data("binary.bin", &len);
	char big[IM_EXTRACT_SNIFF + 100];

	ck_assert_int_eq(im_extract_sniff(buf, len), IM_FMT_BINARY);
	extract_n(buf, len, IM_FMT_BINARY);
	ck_assert_uint_eq(terms.n, 0);
	free(buf);

	memset(big, 'a', sizeof(big));
	big[IM_EXTRACT_SNIFF - 1] = '\0';
	ck_assert_int_eq(im_extract_sniff(big, sizeof(big)), IM_FMT_BINARY);
	big[IM_EXTRACT_SNIFF - 1] = 'a';
	big[IM_EXTRACT_SNIFF] = '\0';
	ck_assert_msg(im_extract_sniff(big, sizeof(big)) == IM_FMT_TEXT,
		      "a NUL past the first block must not make a file binary");
}
END_TEST

START_TEST(test_text_kind_detection)
{
	static const struct {
		const char *name, *content;
		enum im_format kind;
	} cases[] = {
		/* Names play no part: content decides. */
		{"index.html", "plain words", IM_FMT_TEXT},
		{"dir.d/INDEX.HTM", "", IM_FMT_TEXT},
		{"msg.eml", "no headers at all", IM_FMT_TEXT},
		{"page.txt", "<div>\n<head><title>t</title></head>",
		 IM_FMT_HTML},
		{"notes.txt", "\xef\xbb\xbf  <!DOCTYPE HTML>\n<p>x",
		 IM_FMT_HTML},
		{NULL, "<html><body>x", IM_FMT_HTML},
		{NULL, "<?xml version=\"1.0\"?>\n<html xmlns=\"x\">",
		 IM_FMT_HTML},
		{NULL, "<p>a fragment is text</p>", IM_FMT_TEXT},
		{NULL, "From: a@b\nTo: c@d\nSubject: hi\n\nbody", IM_FMT_EMAIL},
		{NULL, "Received: from x\n\tby y\nDate: today\r\n\r\nb",
		 IM_FMT_EMAIL},
		{NULL, "From a@b Mon Jan  1 00:00:00 2024\nSubject: x\n\n",
		 IM_FMT_EMAIL},
		{NULL, "From here on, the text is plain.\nSecond line.\n",
		 IM_FMT_TEXT},
		{NULL, "Title: notes\nAuthor: me\n\ntext", IM_FMT_TEXT},
		{NULL, "Subject: alone\nnot a header\n", IM_FMT_TEXT},
		{"README", "Just some text.\n", IM_FMT_TEXT},
		{".html", "hidden file named .html", IM_FMT_TEXT},
		{NULL,
		 "\xff\xfe"
		 "a\0b\0",
		 IM_FMT_TEXT},
		{NULL,
		 "\xfe\xff"
		 "\0a\0b",
		 IM_FMT_TEXT},
		{NULL, "", IM_FMT_TEXT},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t n = strlen(cases[i].content);
		if (cases[i].content[0] == '\xff' ||
		    cases[i].content[0] == '\xfe')
			n = 6;
		char *copy = malloc(n + 1);
		enum im_format k;

		memcpy(copy, cases[i].content, n);
		k = im_extract_sniff(copy, n);
		free(copy);
		ck_assert_msg(k == cases[i].kind,
			      "case %zu (%s): detected %s, want %s", i,
			      cases[i].name ? cases[i].name : "no name",
			      im_format_name(k), im_format_name(cases[i].kind));
	}
	ck_assert_int_eq(im_extract_sniff(NULL, 0), IM_FMT_TEXT);
	ck_assert_str_eq(im_format_name(IM_FMT_TEXT), "text");
	ck_assert_str_eq(im_format_name(IM_FMT_HTML), "html");
	ck_assert_str_eq(im_format_name(IM_FMT_EMAIL), "email");
	ck_assert_str_eq(im_format_name(IM_FMT_BINARY), "binary");
}
END_TEST

START_TEST(test_text_plain_fixture)
{
	extract_file("plain.txt");
	assert_has("allotment");
	assert_has("committee");
	assert_has("müller");
	assert_has("kürbis");
	assert_has("zucchini");
	assert_lacks("the");
	assert_lacks("14");
	/* Every term is folded: no ASCII capitals survive. */
	for (size_t i = 0; i < terms.n; i++)
		for (size_t j = 0; j < terms.v[i].len; j++)
			ck_assert_msg(!(im_terms_str(&terms, i)[j] >= 'A' &&
					im_terms_str(&terms, i)[j] <= 'Z'),
				      "term %s not folded",
				      im_terms_str(&terms, i));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("text");
	TCase *tc = tcase_create("text");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_text_terms_set_is_unique_and_ordered);
	tcase_add_test(tc, test_text_terms_short_and_long_keys);
	tcase_add_test(tc, test_text_terms_key_edges);
	tcase_add_test(tc, test_text_terms_hash_is_xxh3_of_any_bytes);
	tcase_add_test(tc, test_text_terms_sampled_past_the_cap);
	tcase_add_test(tc, test_text_terms_cap_is_exact);
	tcase_add_test(tc, test_text_terms_clear_leaves_no_trace);
	tcase_add_test(tc, test_text_terms_trim_gives_back_only_a_large_set);
	tcase_add_test(tc, test_text_terms_match_a_reference_set);
	tcase_add_test(tc, test_text_terms_batches_match_single_adds);
	tcase_add_test(tc, test_text_plain_words);
	tcase_add_test(tc, test_text_case_folding);
	tcase_add_test(tc, test_text_digit_filter);
	tcase_add_test(tc, test_text_length_filter);
	tcase_add_test(tc, test_text_long_runs_are_not_words);
	tcase_add_test(tc, test_text_invalid_utf8_is_a_separator);
	tcase_add_test(tc, test_text_truncated_sequence_at_end);
	tcase_add_test(tc, test_text_empty_input);
	tcase_add_test(tc, test_text_marks_and_format_characters);
	tcase_add_test(tc, test_text_fast_and_slow_paths_agree);
	tcase_add_test(tc, test_text_gears);
	tcase_add_test(tc, test_text_numbers_fingerprint);
	tcase_add_test(tc, test_text_dense_figures_agree);
	tcase_add_test(tc, test_text_window_full_of_figures_agrees);
	tcase_add_test(tc, test_text_digits_per_word_agree);
	tcase_add_test(tc, test_text_long_figures_agree);
	tcase_add_test(tc, test_text_words_across_windows_agree);
	tcase_add_test(tc, test_text_gears_read_only_the_text);
	tcase_add_test(tc, test_text_figures_are_the_fingerprint);
	tcase_add_test(tc, test_text_every_byte_classified_alike);
	tcase_add_test(tc, test_text_separator_sequences_alike);
	tcase_add_test(tc, test_text_simd_matches_scalar);
	tcase_add_test(tc, test_text_windows_match_scalar);
	tcase_add_test(tc, test_text_windows_full_of_words);
	tcase_add_test(tc, test_text_threads_extract_at_once);
	tcase_add_test(tc, test_text_html_entities);
	tcase_add_test(tc, test_text_html_entity_table);
	tcase_add_test(tc, test_text_html_declared_charset);
	tcase_add_test(tc, test_text_html_markup_removed);
	tcase_add_test(tc, test_text_html_office_notes);
	tcase_add_test(tc, test_text_html_office_head);
	tcase_add_test(tc, test_text_html_tags);
	tcase_add_test(tc, test_text_html_tag_names);
	tcase_add_test(tc, test_text_html_block_boundaries);
	tcase_add_test(tc, test_text_html_output_bound);
	tcase_add_test(tc, test_text_html_gears_agree);
	tcase_add_test(tc, test_text_html_gears_agree_at_every_offset);
	tcase_add_test(tc, test_text_html_gears_agree_on_documents);
	tcase_add_test(tc, test_text_html_gears_agree_on_a_stray_list_end);
	tcase_add_test(tc, test_text_html_unterminated);
	tcase_add_test(tc, test_text_malformed_input_never_crashes);
	tcase_add_test(tc, test_text_truncated_fixtures);
	tcase_add_test(tc, test_text_email_quoted_printable);
	tcase_add_test(tc, test_text_email_multipart);
	tcase_add_test(tc, test_text_email_non_mime_and_mbox);
	tcase_add_test(tc, test_text_email_encoded_words);
	tcase_add_test(tc, test_text_email_nested_and_rfc822);
	tcase_add_test(tc, test_text_adversarial_input_stays_linear);
	tcase_add_test(tc, test_text_binary_detection);
	tcase_add_test(tc, test_text_kind_detection);
	tcase_add_test(tc, test_text_plain_fixture);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
