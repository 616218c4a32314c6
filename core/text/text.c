/**
 * @file text.c
 * Document kinds, the word scanner and the entry point im_text_terms()
 * (DESIGN §3.1, papers/000 §6.3: "a word was defined as a sequence of
 * alphanumeric characters ... converted to lower case and the ones containing
 * more than one digit as well as those having fewer than four characters were
 * removed").
 *
 * The scanner reads the UTF-8 once, in three gears:
 *   - with SSE2, 64-byte windows are classified at once (letters, digits,
 *     bytes >= 0x80) and the ASCII words taken from the bit masks, already
 *     lower-cased; this is where plain English text spends its time. On a
 *     CPU with AVX2 and BMI2, found at run time, the same code is compiled
 *     for them a second time and used instead (two rounds of AVX2 instead
 *     of four of SSE2, shifts without moves to %cl, popcnt): 10% less time
 *     on the bench corpus than the SSE2 gear, which the rest of x86-64
 *     keeps. AVX-512BW alone (the whole window in one register, compares
 *     straight into mask registers) measured no faster than AVX2; with
 *     VBMI and VBMI2 it also builds the keys of a window's words four at a
 *     time instead of one word after the other (queue_avx512()): 12% less
 *     time for the words of the bench corpus; with DQ (vpmullq) it
 *     hashes a window's figures eight at a time (figures_window_avx512());
 *     and its windows follow each other every 64 bytes, each reading the
 *     end of its last word from the next one (stride_avx512());
 *   - a byte-class table does the same one byte at a time at the end of the
 *     buffer, and on machines without SSE2;
 *   - non-ASCII goes through a strict decoder and utf8proc's category and
 *     case folding; code points below U+0800 (Latin, Greek, Cyrillic,
 *     Hebrew, Arabic, ...) are looked up once per process into a table.
 * The word is folded into a fixed buffer as it is read, so a word costs one
 * im_terms_add() and nothing is allocated per word. The SIMD and scalar
 * paths give identical terms (tests/unit/test_text.c checks this on random
 * input).
 *
 * Choices beyond text.h's summary:
 *   - Combining marks (M*) continue a word that has begun (they never start
 *     one), so Devanagari vowel signs or a decomposed accent stay in their
 *     word. Text is not normalised: NFC and NFD spellings are different terms.
 *   - Format characters (Cf: soft hyphen, zero-width joiners, the BOM) are
 *     skipped without ending the word, as a reader would not see them.
 *   - Length and digit filters look at the folded word ("Straße" and
 *     "STRASSE" are both "strasse", 7 code points), so whether a term is kept
 *     depends only on the term. Digits are code points of category N*.
 *   - A word longer than IM_WORD_MAX bytes once folded is dropped whole
 *     (base64 runs, hashes, glued tokens are not words).
 *   - Every word holding a digit, kept or not, is a figure: im_terms.numbers
 *     sums their hashes. The scalar reading and the AVX-512 windows count
 *     them as they read; the SSE2 and AVX2 gears count those that fold to
 *     ASCII in a pass of their own after the windows (figures_pass()), so
 *     that the windows stay as they were: on Python sources, where a third
 *     of the windows hold a digit, the words take 15% more time, on
 *     licences 4%.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <utf8proc.h>
#include <xxhash.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#if defined(__SSE2__) && defined(__x86_64__)
#include <immintrin.h>
#define HAVE_AVX2_GEAR 1
/* What the AVX2 gear is compiled for, and what the CPU must have. */
#define AVX2_TARGET "avx2,bmi,bmi2,popcnt"

#define HAVE_AVX512_GEAR 1
#define AVX512_TARGET                                                          \
	"avx512f,avx512bw,avx512dq,avx512vbmi,avx512vbmi2,avx2,bmi,bmi2,"      \
	"popcnt"
#endif

#include "cpu.h"
#include "text.h"
#include "text_internal.h"

/* ---- im_buf -------------------------------------------------------------- */

void im_buf_release(struct im_buf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

int im_buf_reserve(struct im_buf *b, size_t extra)
{
	size_t cap = b->cap ? b->cap : 256;
	char *p;

	if (extra > SIZE_MAX - b->len)
		return -ENOMEM;
	if (b->len + extra <= b->cap)
		return 0;
	while (cap < b->len + extra) {
		if (cap > SIZE_MAX / 2)
			return -ENOMEM;
		cap *= 2;
	}
	p = realloc(b->p, cap);
	if (!p)
		return -ENOMEM;
	b->p = p;
	b->cap = cap;
	return 0;
}

int im_buf_append(struct im_buf *b, const void *s, size_t n)
{
	if (!n)
		return 0;
	if (im_buf_reserve(b, n))
		return -ENOMEM;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	return 0;
}

int im_buf_put_cp(struct im_buf *b, uint32_t cp)
{
	utf8proc_uint8_t u[4];
	utf8proc_ssize_t n = utf8proc_encode_char((utf8proc_int32_t)cp, u);

	return im_buf_append(b, u, (size_t)n);
}

/* clang-format off */
const uint16_t im_cp1252_high[32] = {
	0x20ac, 0x0081, 0x201a, 0x0192, 0x201e, 0x2026, 0x2020, 0x2021,
	0x02c6, 0x2030, 0x0160, 0x2039, 0x0152, 0x008d, 0x017d, 0x008f,
	0x0090, 0x2018, 0x2019, 0x201c, 0x201d, 0x2022, 0x2013, 0x2014,
	0x02dc, 0x2122, 0x0161, 0x203a, 0x0153, 0x009d, 0x017e, 0x0178,
};
/* clang-format on */

/* ---- UTF-8 --------------------------------------------------------------- */

size_t im_utf8_decode(const unsigned char *s, const unsigned char *end,
		      uint32_t *cp)
{
	size_t avail = (size_t)(end - s);
	unsigned c0 = s[0];

	if (c0 < 0x80) {
		*cp = c0;
		return 1;
	}
	if (c0 < 0xc2 || c0 > 0xf4)
		return 0; /* continuation byte, overlong lead, or past U+10FFFF */
	if (c0 < 0xe0) {
		if (avail < 2 || (s[1] & 0xc0) != 0x80)
			return 0;
		*cp = ((c0 & 0x1fu) << 6) | (s[1] & 0x3fu);
		return 2;
	}
	if (c0 < 0xf0) {
		if (avail < 3 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80)
			return 0;
		if ((c0 == 0xe0 && s[1] < 0xa0) || (c0 == 0xed && s[1] >= 0xa0))
			return 0; /* overlong, or a surrogate */
		*cp = ((c0 & 0x0fu) << 12) | ((s[1] & 0x3fu) << 6) |
		      (s[2] & 0x3fu);
		return 3;
	}
	if (avail < 4 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 ||
	    (s[3] & 0xc0) != 0x80)
		return 0;
	if ((c0 == 0xf0 && s[1] < 0x90) || (c0 == 0xf4 && s[1] >= 0x90))
		return 0;
	*cp = ((c0 & 0x07u) << 18) | ((s[1] & 0x3fu) << 12) |
	      ((s[2] & 0x3fu) << 6) | (s[3] & 0x3fu);
	return 4;
}

/* ---- Words --------------------------------------------------------------- */

/* Byte classes: ASCII separators, letters, digits, and the rest (>= 0x80). */
enum { C_SEP = 0, C_ALPHA = 1, C_DIGIT = 2, C_ALNUM = 3, C_HIGH = 4 };

static const unsigned char byte_class[256] = {
	['0' ... '9'] = C_DIGIT,
	['A' ... 'Z'] = C_ALPHA,
	['a' ... 'z'] = C_ALPHA,
	[0x80 ... 0xff] = C_HIGH,
};

/* figure_key_hash()'s constants, figure_hash8()'s too. */
#define FIGURE_LO  UINT64_C(0x9e3779b97f4a7c15)
#define FIGURE_HI  UINT64_C(0xc2b2ae3d27d4eb4f)
#define FIGURE_MUL UINT64_C(0x165667919e3779f9)

/*
 * im_figure_hash(), inlined. A short figure is hashed as the two masked
 * words of its key: a call to XXH3_64bits per figure cost 5% of the
 * lexicon build of a tree of Python sources (29% of whose windows hold a
 * digit), this costs a fifth of that.
 */
static inline uint64_t figure_key_hash(struct im_short_key k, size_t n)
{
	unsigned __int128 m;
	uint64_t h;

#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	/* The same value on every machine: stage records travel. */
	k.lo = __builtin_bswap64(k.lo);
	k.hi = __builtin_bswap64(k.hi);
#endif
	m = (unsigned __int128)(k.lo ^ FIGURE_LO) * (k.hi ^ (FIGURE_HI + n));
	h = (uint64_t)m ^ (uint64_t)(m >> 64);
	h ^= h >> 37;
	h *= FIGURE_MUL;
	return h ^ h >> 32;
}

static inline uint64_t figure_hash(const char *s, size_t n)
{
	if (n > IM_SHORT)
		return XXH3_64bits(s, n);
	return figure_key_hash(im_short_key(s, n), n);
}

uint64_t im_figure_hash(const char *s, size_t n)
{
	char pad[IM_SHORT] = {0};

	if (n > IM_SHORT)
		return figure_hash(s, n);
	memcpy(pad, s, n);
	return figure_hash(pad, n);
}

/* The word being read. len keeps counting past IM_WORD_MAX (bytes are then
 * no longer stored) so that an overlong word is known to be one. */
struct word {
	size_t len;
	unsigned ncp, ndig;
	char buf[IM_WORD_MAX + 32];
};

struct scan {
	struct word w;
	unsigned min_len, max_digits;
	uint64_t numbers; /* im_terms.numbers of the words read */
	/* Whether the words read add terms (else only figures are
	 * counted), and count figures: those that fold to ASCII, and the
	 * others. While the windows of the SSE2 and AVX2 gears read,
	 * fig_ascii is off: figures_pass() counts those afterwards. */
	bool terms, fig_ascii, fig_other;
	struct im_terms *out;
	/* im_text_figures()' listener, told each figure it counts; NULL while
	 * terms are read, and the SIMD gears never see one. */
	im_figure_fn figure;
	void *figure_arg;
	/* A byte that is not UTF-8 was read (im_terms.invalid_utf8). Every
	 * byte >= 0x80 goes through im_utf8_decode() in scan_slow(), at the
	 * start of a sequence when those before it were valid, but for the
	 * separators the AVX-512 windows take whole, which are valid: so this
	 * is set exactly when im_utf8_valid() says false. */
	bool invalid;
};

static int word_end(struct scan *sc)
{
	struct word *w = &sc->w;
	int ret = 0;

	if (w->ndig && w->len <= IM_WORD_MAX &&
	    (w->len == w->ncp ? sc->fig_ascii : sc->fig_other)) {
		sc->numbers += figure_hash(w->buf, w->len);
		if (sc->figure)
			ret = sc->figure(w->buf, w->len, sc->figure_arg);
	}
	if (sc->terms && w->len <= IM_WORD_MAX && w->ncp >= sc->min_len &&
	    w->ndig <= sc->max_digits)
		ret = im_terms_add_padded(sc->out, w->buf, w->len);
	w->len = 0;
	w->ncp = 0;
	w->ndig = 0;
	return ret;
}

static bool is_number(utf8proc_category_t c)
{
	return c >= UTF8PROC_CATEGORY_ND && c <= UTF8PROC_CATEGORY_NO;
}

/* What a code point does to the word being read. */
enum { CP_SEP, CP_WORD, CP_MARK, CP_SKIP };

/* A code point's role and its folded form, ready to append. */
struct cp_entry {
	uint8_t role, len, ncp, ndig;
	char fold[16];
};

static void cp_entry_fill(uint32_t cp, struct cp_entry *e)
{
	utf8proc_category_t cat = utf8proc_category((utf8proc_int32_t)cp);
	utf8proc_int32_t f[8];
	int bound = 0;
	utf8proc_ssize_t n;

	memset(e, 0, sizeof(*e));
	if ((cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
	    is_number(cat))
		e->role = CP_WORD;
	else if (cat >= UTF8PROC_CATEGORY_MN && cat <= UTF8PROC_CATEGORY_ME)
		e->role = CP_MARK;
	else if (cat == UTF8PROC_CATEGORY_CF)
		e->role = CP_SKIP;
	else
		e->role = CP_SEP;
	if (e->role != CP_WORD && e->role != CP_MARK)
		return;

	/* Full case folding maps to at most three code points. */
	n = utf8proc_decompose_char((utf8proc_int32_t)cp, f, 8,
				    UTF8PROC_CASEFOLD, &bound);
	if (n < 1 || n > 4) {
		f[0] = (utf8proc_int32_t)cp;
		n = 1;
	}
	for (utf8proc_ssize_t i = 0; i < n; i++) {
		e->ncp++;
		if (is_number(utf8proc_category(f[i])))
			e->ndig++;
		e->len += (uint8_t)utf8proc_encode_char(
			f[i], (utf8proc_uint8_t *)e->fold + e->len);
	}
}

/*
 * Code points of one or two UTF-8 bytes (Latin, Greek, Cyrillic, Armenian,
 * Hebrew, Arabic, ...) are looked up once, from utf8proc, on first use.
 */
#define CP_CACHED 0x800
static struct cp_entry cp_cache[CP_CACHED];
static pthread_once_t cp_cache_once = PTHREAD_ONCE_INIT;

/*
 * Which code points of U+0080-U+00BF (bytes C2 80 to C2 BF) and of
 * U+2000-U+203F (E2 80 80 to E2 80 BF) separate words: entry k for the one
 * whose last byte is 0x80 + k, nonzero if it does. The AVX-512 gear reads
 * these sequences as separators inside its windows (queue_avx512()).
 */
static unsigned char sep_c2[64], sep_e280[64];

static void cp_cache_init(void)
{
	struct cp_entry e;

	for (uint32_t cp = 0; cp < CP_CACHED; cp++)
		cp_entry_fill(cp, &cp_cache[cp]);
	for (uint32_t k = 0; k < 64; k++) {
		sep_c2[k] = cp_cache[0x80 + k].role == CP_SEP;
		cp_entry_fill(0x2000 + k, &e);
		sep_e280[k] = e.role == CP_SEP;
	}
}

/* Append a folded code point to the word. */
static void word_add_entry(struct word *w, const struct cp_entry *e)
{
	if (w->len <= IM_WORD_MAX) /* buf has room past IM_WORD_MAX */
		memcpy(w->buf + w->len, e->fold, sizeof(e->fold));
	w->len += e->len;
	w->ncp += e->ncp;
	w->ndig += e->ndig;
}

/* Append the ASCII letters and digits s[0, n) to the word, lower-cased. */
static void word_add_ascii(struct word *w, const unsigned char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned k = byte_class[s[i]];

		if (w->len < IM_WORD_MAX)
			w->buf[w->len] =
				(char)(s[i] | (k == C_ALPHA ? 0x20 : 0));
		w->len++;
		w->ndig += k == C_DIGIT;
	}
	w->ncp += (unsigned)n;
}

/*
 * The general case: a word holding non-ASCII, or invalid UTF-8, at @c.
 * Reads up to the end of the current word. @return where it stopped.
 */
static const unsigned char *scan_slow(struct scan *sc, const unsigned char *c,
				      const unsigned char *end, int *ret)
{
	pthread_once(&cp_cache_once, cp_cache_init);
	while (c < end) {
		unsigned k = byte_class[*c];
		const struct cp_entry *e;
		struct cp_entry big;
		uint32_t cp;
		size_t n;

		if (k == C_SEP)
			break;
		if (k & C_ALNUM) {
			word_add_ascii(&sc->w, c, 1);
			c++;
			continue;
		}
		n = im_utf8_decode(c, end, &cp);
		if (!n) {
			/* One invalid byte is one separator; resync on the next. */
			sc->invalid = true;
			c++;
			break;
		}
		c += n;
		if (cp < CP_CACHED) {
			e = &cp_cache[cp];
		} else {
			cp_entry_fill(cp, &big);
			e = &big;
		}
		if (e->role == CP_WORD || (e->role == CP_MARK && sc->w.len))
			word_add_entry(&sc->w, e);
		else if (e->role == CP_SEP)
			break;
	}
	if (sc->w.len)
		*ret = word_end(sc);
	return c;
}

/* The fingerprint of the ASCII word @p s / @p n, too short to be a term:
 * figure_hash() of it folded if it holds a digit, else 0. */
static uint64_t short_numbers(const unsigned char *s, size_t n)
{
	char f[IM_WORD_MAX + IM_SHORT];
	bool digit = false;

	for (size_t i = 0; i < n; i++) {
		unsigned k = byte_class[s[i]];

		f[i] = (char)(s[i] | (k == C_ALPHA ? 0x20 : 0));
		digit |= k == C_DIGIT;
	}
	return digit ? figure_hash(f, n) : 0;
}

/*
 * Read one word starting at @c (not a separator) to its end and add it.
 * @return where it stopped.
 */
static const unsigned char *scan_word(struct scan *sc, const unsigned char *c,
				      const unsigned char *end, int *ret)
{
	const unsigned char *w = c;
	size_t n;

	while (c < end && (byte_class[*c] & C_ALNUM))
		c++;
	n = (size_t)(c - w);
	if (c == end || byte_class[*c] == C_SEP) {
		/* All ASCII: fold and filter in one pass. */
		if (n >= sc->min_len && n <= IM_WORD_MAX) {
			unsigned ndig = 0;

			for (size_t i = 0; i < n; i++) {
				unsigned k = byte_class[w[i]];

				sc->w.buf[i] =
					(char)(w[i] |
					       (k == C_ALPHA ? 0x20 : 0));
				ndig += k == C_DIGIT;
			}
			if (ndig && sc->fig_ascii) {
				sc->numbers += figure_hash(sc->w.buf, n);
				if (sc->figure)
					*ret = sc->figure(sc->w.buf, n,
							  sc->figure_arg);
			}
			if (ndig <= sc->max_digits && sc->terms)
				*ret = im_terms_add_padded(sc->out, sc->w.buf,
							   n);
		} else if (n < sc->min_len && n <= IM_WORD_MAX &&
			   sc->fig_ascii) {
			sc->numbers += short_numbers(w, n);
		}
		return c;
	}
	/* Non-ASCII (or invalid UTF-8) in or after this word. */
	word_add_ascii(&sc->w, w, n);
	return scan_slow(sc, c, end, ret);
}

#ifdef __SSE2__
/*
 * Classify 16 bytes at once: bit i of *alnum is set if s[i] is an ASCII
 * letter or digit, of *digit if a digit, of the result if s[i] >= 0x80; *low
 * receives the bytes with ASCII letters lower-cased.
 */
static inline unsigned classify16(const unsigned char *s, unsigned *alnum,
				  unsigned *digit, __m128i *low)
{
	const __m128i v = _mm_loadu_si128((const __m128i *)s);
	const __m128i bias = _mm_set1_epi8((char)0x80);
	__m128i l = _mm_or_si128(v, _mm_set1_epi8(0x20));
	/* Unsigned x - lo < n, as a signed compare after flipping the top bit. */
	__m128i a = _mm_cmplt_epi8(
		_mm_xor_si128(_mm_sub_epi8(l, _mm_set1_epi8('a')), bias),
		_mm_set1_epi8((char)(26 - 128)));
	__m128i d = _mm_cmplt_epi8(
		_mm_xor_si128(_mm_sub_epi8(v, _mm_set1_epi8('0')), bias),
		_mm_set1_epi8((char)(10 - 128)));

	*low = _mm_or_si128(v, _mm_and_si128(a, _mm_set1_epi8(0x20)));
	*alnum = (unsigned)_mm_movemask_epi8(_mm_or_si128(a, d));
	*digit = (unsigned)_mm_movemask_epi8(d);
	return (unsigned)_mm_movemask_epi8(v);
}

/* A window of 64 bytes of input as bit masks (bit i for byte i), and
 * lower-cased; low[4] stays zero, for im_terms_add_padded(). */
struct block {
	uint64_t alnum, digit, high;
	__m128i low[5];
};

static inline void classify_sse2(const unsigned char *s, struct block *b)
{
	b->alnum = b->digit = b->high = 0;
	for (unsigned q = 0; q < 4; q++) {
		unsigned a, d, h = classify16(s + 16 * q, &a, &d, &b->low[q]);

		b->alnum |= (uint64_t)a << (16 * q);
		b->digit |= (uint64_t)d << (16 * q);
		b->high |= (uint64_t)h << (16 * q);
	}
}

#ifdef HAVE_AVX2_GEAR
/* classify_sse2() in two halves of 32 bytes. */
static inline __attribute__((always_inline, target(AVX2_TARGET))) void
classify_avx2(const unsigned char *s, struct block *b)
{
	const __m256i bias = _mm256_set1_epi8((char)0x80);

	b->alnum = b->digit = b->high = 0;
	for (unsigned h = 0; h < 2; h++) {
		const __m256i v =
			_mm256_loadu_si256((const __m256i *)(s + 32 * h));
		__m256i l = _mm256_or_si256(v, _mm256_set1_epi8(0x20));
		/* Unsigned x - lo < n, as a signed compare after flipping
		 * the top bit. */
		__m256i a = _mm256_cmpgt_epi8(
			_mm256_set1_epi8((char)(26 - 128)),
			_mm256_xor_si256(
				_mm256_sub_epi8(l, _mm256_set1_epi8('a')),
				bias));
		__m256i d = _mm256_cmpgt_epi8(
			_mm256_set1_epi8((char)(10 - 128)),
			_mm256_xor_si256(
				_mm256_sub_epi8(v, _mm256_set1_epi8('0')),
				bias));
		__m256i low = _mm256_or_si256(
			v, _mm256_and_si256(a, _mm256_set1_epi8(0x20)));

		_mm256_storeu_si256((__m256i *)&b->low[2 * h], low);
		b->alnum |= (uint64_t)(uint32_t)_mm256_movemask_epi8(
				    _mm256_or_si256(a, d))
			    << (32 * h);
		b->digit |= (uint64_t)(uint32_t)_mm256_movemask_epi8(d)
			    << (32 * h);
		b->high |= (uint64_t)(uint32_t)_mm256_movemask_epi8(v)
			   << (32 * h);
	}
}
#endif

#ifdef HAVE_AVX512_GEAR
/* Byte i: i. */
static inline __attribute__((always_inline, target(AVX512_TARGET))) __m512i
byte_index(void)
{
	return _mm512_set_epi8(
		63, 62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48,
		47, 46, 45, 44, 43, 42, 41, 40, 39, 38, 37, 36, 35, 34, 33, 32,
		31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16,
		15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
}

/*
 * The bytes of the window @p v that are sequences C2 xx or E2 80 xx of a
 * separator (sep_c2, sep_e280), all of whose bytes are in the window. Such
 * a sequence is read the same wherever it stands: its first byte is no
 * continuation byte that a lead before it could take, and it is valid. So
 * the window may treat it as a space instead of ending at the word before
 * it: no-break spaces, pilcrows, dashes and quotes had 1 window in 10 of
 * the bench corpus end early, this leaves 1 in 80.
 */
static inline __attribute__((always_inline, target(AVX512_TARGET))) uint64_t
separator_sequences(__m512i v)
{
	const __m512i index = byte_index();
	const __m512i top2 = _mm512_set1_epi8((char)0xc0);
	const __m512i cont = _mm512_set1_epi8((char)0x80);
	__m512i next = _mm512_permutexvar_epi8(
		_mm512_add_epi8(index, _mm512_set1_epi8(1)), v);
	__m512i next2 = _mm512_permutexvar_epi8(
		_mm512_add_epi8(index, _mm512_set1_epi8(2)), v);
	__m512i sep = _mm512_permutexvar_epi8(next, _mm512_loadu_si512(sep_c2));
	uint64_t c2, e2;

	/* A sequence that starts in the last byte or two would read its end
	 * from the window's first bytes: masked off (such a first byte is
	 * >= 0x80 and so ends the window there anyway). */
	c2 = _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8((char)0xc2)) &
	     _mm512_cmpeq_epi8_mask(_mm512_and_si512(next, top2), cont) &
	     _mm512_test_epi8_mask(sep, sep) & (~UINT64_C(0) >> 1);
	sep = _mm512_permutexvar_epi8(next2, _mm512_loadu_si512(sep_e280));
	e2 = _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8((char)0xe2)) &
	     _mm512_cmpeq_epi8_mask(next, cont) &
	     _mm512_cmpeq_epi8_mask(_mm512_and_si512(next2, top2), cont) &
	     _mm512_test_epi8_mask(sep, sep) & (~UINT64_C(0) >> 2);
	return c2 | c2 << 1 | e2 | e2 << 1 | e2 << 2;
}

/*
 * classify_sse2() with the window in one register, compared into masks;
 * separator sequences (separator_sequences()) are not counted as bytes
 * >= 0x80.
 */
static inline __attribute__((always_inline, target(AVX512_TARGET))) void
classify_avx512(const unsigned char *s, struct block *b)
{
	const __m512i v = _mm512_loadu_si512(s);
	const __m512i l = _mm512_or_si512(v, _mm512_set1_epi8(0x20));
	__mmask64 a = _mm512_cmplt_epu8_mask(
		_mm512_sub_epi8(l, _mm512_set1_epi8('a')),
		_mm512_set1_epi8(26));
	__mmask64 d = _mm512_cmplt_epu8_mask(
		_mm512_sub_epi8(v, _mm512_set1_epi8('0')),
		_mm512_set1_epi8(10));

	_mm512_storeu_si512(b->low, _mm512_mask_blend_epi8(a, v, l));
	b->alnum = a | d;
	b->digit = d;
	b->high = _mm512_movepi8_mask(v);
	if (b->high)
		b->high &= ~separator_sequences(v);
}
#endif

/*
 * Queued words are added once this many wait, with one call: the add of a
 * word is shorter than a call. A window queues at most 32 words. Each
 * flush costs more than its call: the test for it and the end of the adds'
 * loop go either way at random. Flushing at 224 words rather than 32 made
 * the AVX-512 words of the kernel's documentation, with their adds, 6%
 * faster (flushing at 96, 5%; at 480, 7%).
 */
#define QUEUE_FLUSH 224

/*
 * The short words kept, waiting for im_terms_add_shorts(). How many wait
 * is a local of the window loop, handed along: in this struct, where a
 * store into keys[] or lens[] may write it as far as the compiler knows,
 * it was loaded again after each such store and stored again, a chain of
 * store-to-load forwards from one window to the next.
 */
struct queue {
	struct im_short_key keys[IM_SHORT_BATCH];
	uint8_t lens[IM_SHORT_BATCH];
};

/* What a window may write past the words it queues (queue_avx512()). */
_Static_assert(QUEUE_FLUSH - 1 + 32 <= IM_SHORT_BATCH, "queue too small");

#ifdef HAVE_AVX512_GEAR
/*
 * Queue the words of a window that start at @p starts at once but those
 * holding more than @p max_digits digits, if all of them are short (else
 * @return false and queue nothing: the caller takes them one by one; 1
 * window in 700 of the kernel's documentation). When this instead gave up
 * on a window whose words held more than max_digits digits together, the
 * caller took 12 windows in 100 of the kernel's documentation one word at
 * a time, and the words with their adds took 5% more time.
 *
 * Where each word ends is one addition: the carry from its start runs
 * through its letters to the separator after it. One compress each packs
 * the starts and the ends as byte positions, four words' keys are taken
 * from the window with one permute each, their bytes past the length
 * zeroed by its mask. A window of the bench corpus queues 5 words on
 * average, never more than 12: 3 groups of 4 are built whatever the count,
 * without a branch on it, and a loop adds more only past 12 (which takes
 * min_word_len below 4).
 */
static inline __attribute__((always_inline, target(AVX512_TARGET))) bool
queue_avx512(const struct block *b, uint64_t starts, unsigned max_digits,
	     struct queue *q, size_t *qn)
{
	const __m512i iota = byte_index();
	/* Byte i: i % 16, its place in a key; i / 16, the key's word. */
	const __m512i place = _mm512_and_si512(iota, _mm512_set1_epi8(15));
	__m512i word = _mm512_and_si512(_mm512_srli_epi16(iota, 4),
					_mm512_set1_epi8(3));
	const __m512i low = _mm512_loadu_si512(b->low);
	const size_t n = *qn;
	uint64_t after = (b->alnum + starts) & ~b->alnum;
	/* The digits of each word but its max_digits first ones: a word's
	 * lowest digit is taken off by a borrow from its start, which the
	 * bit after the word stops if the word holds none. A word holding
	 * any more has too many digits and is left out. No branch on them:
	 * whether a window's words have too many is a coin toss. */
	uint64_t more = b->digit & (after - starts), bad;
	/* A word queued holds at most IM_SHORT digits. */
	const unsigned keep = max_digits < IM_SHORT ? max_digits : 0;
	unsigned count;
	__m512i first, len;

	if (max_digits >= IM_SHORT)
		more = 0;
	for (unsigned k = 0; k < keep; k++)
		more &= (more | after) - starts;
	/* The ends of those words, and their starts by their order. */
	bad = (b->alnum + more) & ~b->alnum;
	starts &= ~_pdep_u64(_pext_u64(bad, after), starts);
	after &= ~bad;
	count = (unsigned)__builtin_popcountll(starts);
	first = _mm512_maskz_compress_epi8(starts, iota);
	len = _mm512_sub_epi8(_mm512_maskz_compress_epi8(after, iota), first);
	if (_mm512_cmpgt_epu8_mask(len, _mm512_set1_epi8(IM_SHORT)))
		return false;
	_mm256_storeu_si256((__m256i *)(q->lens + n),
			    _mm512_castsi512_si256(len));
	for (unsigned g = 0; g < 3 || 4 * g < count; g++) {
		__m512i at = _mm512_add_epi8(
			_mm512_permutexvar_epi8(word, first), place);
		__mmask64 in = _mm512_cmplt_epu8_mask(
			place, _mm512_permutexvar_epi8(word, len));

		_mm512_storeu_si512(q->keys + n + 4 * g,
				    _mm512_maskz_permutexvar_epi8(in, at, low));
		word = _mm512_add_epi8(word, _mm512_set1_epi8(4));
	}
	*qn = n + count;
	return true;
}
#endif

/* The digits of a word's digit mask. Digits are rare: without the popcnt
 * instruction, count them only when two are. */
static inline unsigned ndigits(uint64_t dig, bool have_popcnt)
{
	if (have_popcnt)
		return (unsigned)__builtin_popcountll(dig);
	return !(dig & (dig - 1)) ? (dig != 0)
				  : (unsigned)__builtin_popcountll(dig);
}

/*
 * The bits i of @p a such that bits i to i + m - 1 are all set: where a run
 * of at least @p m word bytes starts. Bits past the window count as unset.
 */
static inline uint64_t runs_of(uint64_t a, unsigned m)
{
	unsigned have = 1;

	if (m > 64)
		return 0;
	while (have < m) {
		unsigned step = have < m - have ? have : m - have;

		a &= a >> step;
		have += step;
	}
	return a;
}

/*
 * Take the words of the window @p b that start at @p starts, all of which
 * end in it and hold the digits @p digit: count their figures
 * (figures_window(), if any), queue the short ones kept (queue_window(), if
 * any, else one by one) and add the long ones kept, the queue emptied
 * first. @return nonzero if an add failed (*ret is then set).
 */
static inline __attribute__((always_inline)) int
window_words(struct scan *sc, const struct block *b, uint64_t starts,
	     uint64_t digit, struct queue *q, size_t *qn,
	     bool (*queue_window)(const struct block *, uint64_t, unsigned,
				  struct queue *, size_t *),
	     void (*figures_window)(struct scan *, const struct block *,
				    uint64_t, uint64_t, void *),
	     void *figures_acc, bool have_popcnt)
{
	const unsigned max_digits = sc->max_digits;
	int ret;

	if (figures_window && digit)
		figures_window(sc, b, starts, digit, figures_acc);
	starts &= runs_of(b->alnum, sc->min_len);
	if (queue_window && queue_window(b, starts, max_digits, q, qn))
		starts = 0;
	for (; starts; starts &= starts - 1) {
		unsigned st = (unsigned)__builtin_ctzll(starts);
		unsigned n = (unsigned)__builtin_ctzll(~(b->alnum >> st));
		uint64_t dig = (b->digit >> st) & ((UINT64_C(1) << n) - 1);
		const char *w = (const char *)b->low + st;

		if (n > IM_SHORT) {
			if (ndigits(dig, have_popcnt) > max_digits)
				continue;
			ret = im_terms_add_shorts(sc->out, q->keys, q->lens,
						  *qn);
			*qn = 0;
			if (!ret)
				ret = im_terms_add_padded(sc->out, w, n);
			if (ret)
				return ret;
			continue;
		}
		/* Queued either way, kept only if few digits: one branch
		 * less per word. */
		q->keys[*qn] = im_short_key(w, n);
		q->lens[*qn] = (uint8_t)n;
		*qn += ndigits(dig, have_popcnt) <= max_digits;
	}
	return 0;
}

/*
 * The hot path, while a window of input remains: classify it at once and
 * take its words from the bit masks; the lower-cased bytes are already in
 * the block. The words long enough to keep are found from the masks alone
 * (half the words of English are shorter than four letters, and a branch
 * on each word's length guessed wrong about as often as right), and only
 * those are visited.
 *
 * The window ends early at a word that runs past it, which starts the next
 * window, or at the first word that touches a byte >= 0x80, which
 * scan_word() reads to its end; so does a word filling the whole window.
 *
 * The short words kept wait in a queue and are added a batch at a time
 * (im_terms_add_shorts()): a call per word cost more than its add. Whatever
 * else adds a word (a long word, scan_word(), the scalar loop after the
 * last window) empties the queue first, so the adds keep the words' order.
 * figures_window(), if any, is told the words of each window that end in
 * it (their starts and digits) with figures_acc, so that it counts their
 * figures (a gear without one leaves them to figures_pass()).
 * @return where the scalar loop takes over.
 */
static inline __attribute__((always_inline)) const unsigned char *
scan_blocks(struct scan *sc, const unsigned char *c, const unsigned char *end,
	    int *ret, void (*classify)(const unsigned char *, struct block *),
	    bool (*queue_window)(const struct block *, uint64_t, unsigned,
				 struct queue *, size_t *),
	    void (*figures_window)(struct scan *, const struct block *,
				   uint64_t, uint64_t, void *),
	    void *figures_acc, bool have_popcnt)
{
	struct queue q;
	struct block b;
	size_t qn = 0;

	b.low[4] = _mm_setzero_si128();
	while (end - c >= 64 && !*ret) {
		uint64_t words, starts;
		unsigned stop = 64;
		bool slow;

		classify(c, &b);
		words = b.alnum | b.high;
		starts = words & ~(words << 1);
		slow = b.high != 0;
		if (slow) {
			/* The start of the word holding the first byte >=
			 * 0x80: the last start at or below it. */
			unsigned h = (unsigned)__builtin_ctzll(b.high);

			stop = 63 -
			       (unsigned)__builtin_clzll(
				       starts & (~UINT64_C(0) >> (63 - h)));
			starts &= (UINT64_C(1) << stop) - 1;
		} else {
			/*
			 * The last word may go on: the next window starts at
			 * it, or scan_word() reads it if it fills this one.
			 * Whether it does is a coin toss: no branch on it.
			 */
			uint64_t tail = b.alnum >> 63;
			unsigned last =
				63 - (unsigned)__builtin_clzll(starts | 1);

			stop = 64 - ((64 - last) & (unsigned)-tail);
			starts &= ~(tail << last);
			slow = stop == 0;
		}
		*ret = window_words(
			sc, &b, starts,
			stop < 64 ? b.digit & ((UINT64_C(1) << stop) - 1)
				  : b.digit,
			&q, &qn, queue_window, figures_window, figures_acc,
			have_popcnt);
		if (*ret)
			return c;
		if (qn >= QUEUE_FLUSH || slow) {
			*ret = im_terms_add_shorts(sc->out, q.keys, q.lens, qn);
			qn = 0;
			if (*ret)
				return c;
		}
		c = slow ? scan_word(sc, c + stop, end, ret) : c + stop;
	}
	if (!*ret)
		*ret = im_terms_add_shorts(sc->out, q.keys, q.lens, qn);
	return c;
}

/*
 * The figures (im_terms.numbers) of text the SSE2 and AVX2 gears' windows
 * read, which count none that fold to ASCII: a test and a call to read
 * the word again here for each window holding a digit made the words a
 * third slower on Python sources (a third of whose windows do), and even
 * queueing such windows for later a sixth. So they are found in a pass of
 * their own, a digit test per 64 bytes (figures_pass()). The AVX-512 gear
 * counts them in the window instead, from the masks it already has
 * (figures_window_avx512()): that cost less than its pass.
 * Here the word of the digit at @p x is read again
 * by scan_word(), counting figures only, from the last ASCII separator
 * before it: a word boundary in every reading of the text (no UTF-8
 * sequence holds an ASCII byte), so it reads the words the windows read.
 * What is before @p p has been counted. @return where the reading stopped,
 * past @p x.
 */
static __attribute__((noinline)) const unsigned char *
figures_at(struct scan *sc, const unsigned char *p, const unsigned char *x,
	   const unsigned char *end)
{
	const unsigned char *c = x;
	int ret = 0;

	while (c > p && byte_class[c[-1]] != C_SEP)
		c--;
	sc->terms = false;
	sc->fig_ascii = true;
	sc->fig_other = false;
	while (c <= x) {
		while (byte_class[*c] == C_SEP)
			c++; /* stops at x, at the latest */
		c = scan_word(sc, c, end, &ret);
	}
	sc->terms = true;
	sc->fig_ascii = false;
	sc->fig_other = true;
	return c;
}

/* Bit i set: s[i] is an ASCII digit, for the 64 bytes at @p s. */
static inline uint64_t digits_sse2(const unsigned char *s)
{
	const __m128i bias = _mm_set1_epi8((char)0x80);
	uint64_t d = 0;

	for (unsigned q = 0; q < 4; q++) {
		__m128i v = _mm_loadu_si128((const __m128i *)(s + 16 * q));
		__m128i t = _mm_cmplt_epi8(
			_mm_xor_si128(_mm_sub_epi8(v, _mm_set1_epi8('0')),
				      bias),
			_mm_set1_epi8((char)(10 - 128)));

		d |= (uint64_t)(unsigned)_mm_movemask_epi8(t) << (16 * q);
	}
	return d;
}

/*
 * The figures of the 64 bytes at @p s, classified in @p b, from @p *p on
 * (which moves past what figures_at() reads). A digit's word is found from
 * the masks: adding the digits to the word bytes carries to the bit after
 * the word. One of ASCII letters and digits between ASCII separators, all
 * in the block, is hashed here, which on Python sources costs a third of
 * what figures_at() costs; any other (at the block's ends, next to a byte
 * >= 0x80, longer than IM_SHORT) figures_at() reads.
 */
static __attribute__((noinline)) void
figures_block(struct scan *sc, const struct block *b, const unsigned char *s,
	      const unsigned char **p, const unsigned char *end)
{
	const uint64_t alnum = b->alnum, word = alnum | b->high;
	const uint64_t starts = alnum & ~(alnum << 1);
	/* The run that reaches the last byte, whose carry would be lost. */
	const uint64_t last =
		alnum >> 63
			? ~((UINT64_C(1) << (63 - __builtin_clzll(starts))) - 1)
			: 0;
	uint64_t after = (alnum + (b->digit & ~last)) & ~alnum, sum = 0;

	for (; after; after &= after - 1) {
		unsigned e = (unsigned)__builtin_ctzll(after);
		uint64_t below = (UINT64_C(1) << e) - 1;
		unsigned st = 63 - (unsigned)__builtin_clzll(starts & below);

		if (s + st < *p)
			continue; /* read by figures_at() */
		if (st > 0 && !((word >> (st - 1)) & 1) && !((word >> e) & 1) &&
		    e - st <= IM_SHORT && end - (s + st) >= IM_SHORT) {
			/* Read from the text, not from the block's lower-cased
			 * bytes, whose stores a load across two of them waits
			 * for; folded here: a letter has bit 6, a digit not. */
			struct im_short_key k =
				im_short_key((const char *)s + st, e - st);

			k.lo |= (k.lo & UINT64_C(0x4040404040404040)) >> 1;
			k.hi |= (k.hi & UINT64_C(0x4040404040404040)) >> 1;
			sum += figure_key_hash(k, e - st);
		} else
			*p = figures_at(
				sc, *p,
				s + __builtin_ctzll(b->digit & below &
						    ~((UINT64_C(1) << st) - 1)),
				end);
	}
	sc->numbers += sum;
	if ((b->digit & last) && s + __builtin_ctzll(b->digit & last) >= *p)
		*p = figures_at(sc, *p, s + __builtin_ctzll(b->digit & last),
				end);
}

/* figures_at() or figures_block() each digit of [s, end), which the
 * windows read. */
static inline __attribute__((always_inline)) void
figures_pass(struct scan *sc, const unsigned char *s, const unsigned char *end,
	     uint64_t (*digits)(const unsigned char *),
	     void (*classify)(const unsigned char *, struct block *))
{
	const unsigned char *p = s;
	struct block b;

	for (; end - s >= 64; s += 64)
		if (digits(s)) {
			classify(s, &b);
			figures_block(sc, &b, s, &p, end);
		}
	for (; s < end; s++)
		if (byte_class[*s] == C_DIGIT && s >= p)
			p = figures_at(sc, p, s, end);
}

static const unsigned char *scan_sse2(struct scan *sc, const unsigned char *c,
				      const unsigned char *end, int *ret)
{
	const unsigned char *s = c;

	c = scan_blocks(sc, c, end, ret, classify_sse2, NULL, NULL, NULL,
			false);
	figures_pass(sc, s, c, digits_sse2, classify_sse2);
	return c;
}

#ifdef HAVE_AVX2_GEAR
/* digits_sse2() in two halves of 32 bytes. */
static inline __attribute__((always_inline, target(AVX2_TARGET))) uint64_t
digits_avx2(const unsigned char *s)
{
	uint64_t d = 0;

	for (unsigned h = 0; h < 2; h++) {
		__m256i v = _mm256_loadu_si256((const __m256i *)(s + 32 * h));
		__m256i t = _mm256_cmpgt_epi8(
			_mm256_set1_epi8((char)(10 - 128)),
			_mm256_xor_si256(
				_mm256_sub_epi8(v, _mm256_set1_epi8('0')),
				_mm256_set1_epi8((char)0x80)));

		d |= (uint64_t)(uint32_t)_mm256_movemask_epi8(t) << (32 * h);
	}
	return d;
}

/* BMI2 also takes the moves to %cl out of the shifts by a word's start. */
static __attribute__((target(AVX2_TARGET))) const unsigned char *
scan_avx2(struct scan *sc, const unsigned char *c, const unsigned char *end,
	  int *ret)
{
	const unsigned char *s = c;

	c = scan_blocks(sc, c, end, ret, classify_avx2, NULL, NULL, NULL, true);
	figures_pass(sc, s, c, digits_avx2, classify_avx2);
	return c;
}
#endif

#ifdef HAVE_AVX512_GEAR
/*
 * figure_key_hash() of the keys @p lo / @p hi and lengths @p n of eight
 * figures at once, added lane by lane to @p sum where @p valid. The 64 x 64
 * -> 128-bit product is made of four 32 x 32-bit ones; the 64-bit product
 * is AVX-512DQ's, which every CPU with VBMI2 has.
 */
static inline __attribute__((always_inline, target(AVX512_TARGET))) __m512i
figure_hash8(__m512i lo, __m512i hi, __m512i n, __mmask8 valid, __m512i sum)
{
	const __m512i low32 = _mm512_set1_epi64(0xffffffff);
	__m512i a =
		_mm512_xor_si512(lo, _mm512_set1_epi64((long long)FIGURE_LO));
	__m512i b = _mm512_xor_si512(
		hi,
		_mm512_add_epi64(n, _mm512_set1_epi64((long long)FIGURE_HI)));
	__m512i a_hi = _mm512_srli_epi64(a, 32),
		b_hi = _mm512_srli_epi64(b, 32);
	__m512i ll = _mm512_mul_epu32(a, b);
	/* Neither sum carries out of 64 bits: (2^32 - 1)^2 + 2 (2^32 - 1)
	 * is 2^64 - 1. */
	__m512i mid = _mm512_add_epi64(_mm512_mul_epu32(a_hi, b),
				       _mm512_srli_epi64(ll, 32));
	__m512i mid2 = _mm512_add_epi64(_mm512_mul_epu32(a, b_hi),
					_mm512_and_si512(mid, low32));
	__m512i h = _mm512_xor_si512(
		_mm512_or_si512(_mm512_slli_epi64(mid2, 32),
				_mm512_and_si512(ll, low32)),
		_mm512_add_epi64(_mm512_add_epi64(_mm512_mul_epu32(a_hi, b_hi),
						  _mm512_srli_epi64(mid, 32)),
				 _mm512_srli_epi64(mid2, 32)));

	h = _mm512_xor_si512(h, _mm512_srli_epi64(h, 37));
	h = _mm512_mullo_epi64(h, _mm512_set1_epi64((long long)FIGURE_MUL));
	h = _mm512_xor_si512(h, _mm512_srli_epi64(h, 32));
	return _mm512_mask_add_epi64(sum, valid, sum, h);
}

/*
 * The figures of the window @p b among the words that start at @p starts
 * (all of which end in the window), those holding the digits @p digit,
 * added to the lanes of @p acc (an __m512i): the words are ASCII, so folded
 * in b->low. Those of at most IM_SHORT bytes, nearly all, are hashed eight
 * at a time, their keys taken from the window as queue_avx512() takes
 * words'; a longer one is hashed alone. Words are numbered by their start:
 * the k-th start and the k-th end are one word's, so pext() turns a mask of
 * bytes into one of words.
 *
 * Counted here, in the window the words are read in, rather than in a
 * pass of their own after the windows as the other gears do: that pass
 * loaded and compared every window again, and read again, one byte at a
 * time, each figure a window of its own had cut (at its ends, next to a
 * byte >= 0x80), which the windows here never do. On the kernel's
 * documentation, where 28 windows in 100 hold a digit, the pass took a
 * third of the time of this gear's words (the term set's adds aside);
 * here they take 8% less time than with it (4% with the adds), and a
 * first scan 1% less.
 * Queueing the windows that hold a digit (without a branch) to count
 * their figures 16 windows at a time measured 5% slower than a branch on
 * each; so did hashing the figures of several windows together (a queue
 * of keys, a hash per eight), by 1%, when this was a pass of its own.
 */
static inline __attribute__((always_inline, target(AVX512_TARGET))) void
figures_window_avx512(struct scan *sc, const struct block *b, uint64_t starts,
		      uint64_t digit, void *acc)
{
	const __m512i iota = byte_index();
	const __m512i place = _mm512_and_si512(iota, _mm512_set1_epi8(15));
	const __m512i quarter = _mm512_and_si512(_mm512_srli_epi16(iota, 4),
						 _mm512_set1_epi8(3));
	const __m512i low = _mm512_loadu_si512(b->low);
	const uint64_t alnum = b->alnum;
	const uint64_t ends = (alnum + starts) & ~alnum;
	/* The carry from a word's digits runs to its end, as its start's. */
	const uint64_t with_digit = _pext_u64((alnum + digit) & ~alnum, ends);
	__m512i *sum = acc;
	__m512i at0, len;
	uint64_t fast, slow;
	unsigned count;

	at0 = _mm512_maskz_compress_epi8(starts, iota);
	len = _mm512_sub_epi8(_mm512_maskz_compress_epi8(ends, iota), at0);
	fast = with_digit &
	       _mm512_cmple_epu8_mask(len, _mm512_set1_epi8(IM_SHORT));
	slow = with_digit & ~fast;
	at0 = _mm512_maskz_compress_epi8(fast, at0);
	len = _mm512_maskz_compress_epi8(fast, len);
	count = (unsigned)__builtin_popcountll(fast);
	for (unsigned g = 0; 8 * g < count; g++) {
		__m512i key[2], lo, hi;

		for (unsigned h = 0; h < 2; h++) {
			__m512i w = _mm512_add_epi8(
				quarter,
				_mm512_set1_epi8((char)(8 * g + 4 * h)));
			__m512i at = _mm512_add_epi8(
				_mm512_permutexvar_epi8(w, at0), place);
			__mmask64 in = _mm512_cmplt_epu8_mask(
				place, _mm512_permutexvar_epi8(w, len));

			key[h] = _mm512_maskz_permutexvar_epi8(in, at, low);
		}
		lo = _mm512_permutex2var_epi64(
			key[0], _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0),
			key[1]);
		hi = _mm512_permutex2var_epi64(
			key[0], _mm512_set_epi64(15, 13, 11, 9, 7, 5, 3, 1),
			key[1]);
		*sum = figure_hash8(
			lo, hi,
			_mm512_cvtepu8_epi64(
				_mm512_castsi512_si128(_mm512_permutexvar_epi8(
					_mm512_add_epi8(iota,
							_mm512_set1_epi8(
								(char)(8 * g))),
					len))),
			(__mmask8)(count - 8 * g >= 8
					   ? 0xff
					   : (1u << (count - 8 * g)) - 1),
			*sum);
	}
	for (; slow; slow &= slow - 1) {
		uint64_t one = slow & -slow;
		unsigned st = (unsigned)__builtin_ctzll(_pdep_u64(one, starts));
		unsigned e = (unsigned)__builtin_ctzll(_pdep_u64(one, ends));

		sc->numbers += figure_hash((const char *)b->low + st, e - st);
	}
}

/* im_terms_add_shorts() of the queue @p q, emptied. */
static inline int queue_flush(struct scan *sc, struct queue *q, size_t *qn)
{
	int ret = im_terms_add_shorts(sc->out, q->keys, q->lens, *qn);

	*qn = 0;
	return ret;
}

/*
 * scan_blocks() of the AVX-512 gear while two windows of text remain, with
 * a window every 64 bytes instead of one at the start of the last word of
 * the window before. There the next window's address waits for this one's
 * classification (load, compares, masks, the last start), a chain of
 * latencies from one window to the next: with a window every 64 bytes,
 * cutting words, the words of the kernel's documentation and their adds
 * took 13% less time (in-process, the text in the cache). So here a window
 * owns the words that start in it, and the one that runs on into the next
 * window, if short, is taken from the next window's masks, built one
 * window ahead; the next window leaves out its rest (cont). A word running
 * on for more than IM_SHORT bytes, or touching a byte >= 0x80, scan_word()
 * reads as before, and the windows start again after it.
 * Taking that last word costs most of what the chain cost (the next
 * window's digits, a key built from the text, a store): the words of the
 * kernel's documentation with their adds take 4.5% less time in-process,
 * and a first scan takes about 1% less CPU time on the licences and the
 * manuals, half that on the kernel's documentation.
 * @return where scan_blocks() takes over: a word boundary, the queue
 * emptied.
 */
static __attribute__((target(AVX512_TARGET))) const unsigned char *
stride_avx512(struct scan *sc, const unsigned char *c, const unsigned char *end,
	      int *ret, __m512i *sum)
{
	struct block blocks[2], *b = &blocks[0], *nb = &blocks[1], *swap;
	/* The bytes at the window's start that end the last word of the
	 * window before, taken there. */
	uint64_t cont = 0;
	/* The figures of the last words, added to sc->numbers at the end. */
	uint64_t numbers = 0;
	struct queue q;
	size_t qn = 0;

	b->low[4] = nb->low[4] = _mm_setzero_si128();
	if (end - c >= 128)
		classify_avx512(c, b);
	while (end - c >= 128 && !*ret) {
		uint64_t words, starts, tail, tslow, below, td, kept;
		unsigned stop, last, e, tlen, klen;
		struct im_short_key k;

		classify_avx512(c + 64, nb);
		words = b->alnum | b->high;
		starts = words & ~(words << 1) & ~cont;
		/* Whether the last word runs on into the next window, where
		 * it ends there, and whether it is too long to be short or
		 * touches a byte >= 0x80 (scan_word() reads it then): no
		 * branch on whether it runs on, a coin toss. */
		tail = b->alnum >> 63;
		last = 63 - (unsigned)__builtin_clzll(starts | 1);
		e = (unsigned)_tzcnt_u64(~nb->alnum);
		tlen = 64 - last + e;
		tslow = tail &
			((tlen > IM_SHORT) | ((nb->high >> (e & 63)) & 1));
		if (__builtin_expect(b->high | tslow, 0)) {
			stop = last;
			if (b->high) {
				/* The start of the word holding the first
				 * byte >= 0x80: the last start at or below
				 * it. */
				unsigned h = (unsigned)__builtin_ctzll(b->high);

				stop = 63 - (unsigned)__builtin_clzll(
						    starts &
						    (~UINT64_C(0) >> (63 - h)));
			}
			below = _bzhi_u64(~UINT64_C(0), stop);
			*ret = window_words(sc, b, starts & below,
					    b->digit & ~cont & below, &q, &qn,
					    queue_avx512, figures_window_avx512,
					    sum, true);
			if (!*ret)
				*ret = queue_flush(sc, &q, &qn);
			if (*ret)
				break;
			c = scan_word(sc, c + stop, end, ret);
			cont = 0;
			if (end - c >= 128)
				classify_avx512(c, b);
			continue;
		}
		below = _bzhi_u64(~UINT64_C(0), 64 - ((64 - last) & -tail));
		*ret = window_words(
			sc, b, starts & below, b->digit & ~cont & below, &q,
			&qn, queue_avx512, figures_window_avx512, sum, true);
		if (*ret)
			break;
		/* The last word, if it runs on: ASCII letters and digits,
		 * folded as in figures_block(); 16 bytes are readable at its
		 * start, two windows being. */
		klen = tlen & (unsigned)-tail;
		k = im_short_key((const char *)c + last, klen);
		k.lo |= (k.lo & UINT64_C(0x4040404040404040)) >> 1;
		k.hi |= (k.hi & UINT64_C(0x4040404040404040)) >> 1;
		td = ((b->digit >> last) | (nb->digit << 1 << (63 - last))) &
		     _bzhi_u64(~UINT64_C(0), klen);
		kept = tail & (klen >= sc->min_len) &
		       ((unsigned)__builtin_popcountll(td) <= sc->max_digits);
		q.keys[qn] = k;
		q.lens[qn] = (uint8_t)klen;
		qn += kept;
		if (td)
			numbers += figure_key_hash(k, klen);
		cont = _bzhi_u64(~UINT64_C(0), e & (unsigned)-tail);
		if (qn >= QUEUE_FLUSH) {
			*ret = queue_flush(sc, &q, &qn);
			if (*ret)
				break;
		}
		c += 64;
		swap = b;
		b = nb;
		nb = swap;
	}
	sc->numbers += numbers;
	if (!*ret)
		*ret = queue_flush(sc, &q, &qn);
	/* Past the rest of a word taken in the window before. */
	return c + __builtin_popcountll(cont);
}

static __attribute__((target(AVX512_TARGET))) const unsigned char *
scan_avx512(struct scan *sc, const unsigned char *c, const unsigned char *end,
	    int *ret)
{
	__m512i sum = _mm512_setzero_si512();
	uint64_t lanes[8];

	pthread_once(&cp_cache_once, cp_cache_init);
	c = stride_avx512(sc, c, end, ret, &sum);
	if (!*ret)
		c = scan_blocks(sc, c, end, ret, classify_avx512, queue_avx512,
				figures_window_avx512, &sum, true);
	/* Added as unsigned: GCC's _mm512_reduce_add_epi64() adds signed
	 * lanes, an overflow UBSan stops on, and the hashes wrap. */
	_mm512_storeu_si512(lanes, sum);
	for (unsigned i = 0; i < 8; i++)
		sc->numbers += lanes[i];
	return c;
}
#endif
#endif

bool im_words_has_gear(enum im_words_gear gear)
{
#ifdef HAVE_AVX512_GEAR
	if (gear == IM_WORDS_AVX512)
		return IM_CPU_HAS(AVX512F, "avx512f") &&
		       IM_CPU_HAS(AVX512BW, "avx512bw") &&
		       IM_CPU_HAS(AVX512DQ, "avx512dq") &&
		       IM_CPU_HAS(AVX512_VBMI, "avx512vbmi") &&
		       IM_CPU_HAS(AVX512_VBMI2, "avx512vbmi2") &&
		       im_words_has_gear(IM_WORDS_AVX2);
#endif
#ifdef HAVE_AVX2_GEAR
	if (gear == IM_WORDS_AVX2)
		return IM_CPU_HAS(AVX2, "avx2") && IM_CPU_HAS(BMI1, "bmi") &&
		       IM_CPU_HAS(BMI2, "bmi2") && IM_CPU_HAS(POPCNT, "popcnt");
#endif
#ifdef __SSE2__
	if (gear == IM_WORDS_SSE2)
		return true;
#endif
	return gear == IM_WORDS_SCALAR;
}

static int words_add(const char *s, size_t len, const struct im_params *p,
		     struct im_terms *out, enum im_words_gear gear)
{
	const unsigned char *c = (const unsigned char *)s;
	const unsigned char *end;
	struct scan sc;
	int ret = 0;

	/* HTML or mail with no text hands over a NULL buffer; NULL + 0 is
	 * undefined behaviour. */
	if (len == 0)
		return 0;
	end = c + len;
	sc.w.len = 0;
	sc.w.ncp = 0;
	sc.w.ndig = 0;
	sc.min_len = p->min_word_len;
	sc.max_digits = p->max_digits;
	sc.numbers = 0;
	/* The windows of the SSE2 and AVX2 gears leave figures to
	 * figures_pass(). */
	sc.terms = true;
	sc.fig_ascii = gear == IM_WORDS_SCALAR || gear == IM_WORDS_AVX512;
	sc.fig_other = true;
	sc.out = out;
	sc.figure = NULL;
	sc.invalid = false;

#ifdef HAVE_AVX512_GEAR
	if (gear == IM_WORDS_AVX512)
		c = scan_avx512(&sc, c, end, &ret);
#endif
#ifdef HAVE_AVX2_GEAR
	if (gear == IM_WORDS_AVX2)
		c = scan_avx2(&sc, c, end, &ret);
#endif
#ifdef __SSE2__
	if (gear == IM_WORDS_SSE2)
		c = scan_sse2(&sc, c, end, &ret);
#else
	(void)gear;
#endif
	sc.fig_ascii = true;
	while (c < end && !ret) {
		while (byte_class[*c] == C_SEP)
			if (++c == end)
				goto out;
		c = scan_word(&sc, c, end, &ret);
	}
out:
	im_terms_settle(out);
	out->numbers += sc.numbers;
	out->invalid_utf8 |= sc.invalid;
	return ret;
}

int im_words_add(const char *s, size_t len, const struct im_params *p,
		 struct im_terms *out)
{
	/* Chosen once per process: glibc's answers (cpu.h) are calls into
	 * it. Shared by the scan's workers: a race only chooses twice. */
	static int best = -1;
	int gear = __atomic_load_n(&best, __ATOMIC_RELAXED);

	if (gear < 0) {
		gear = IM_WORDS_SCALAR;
		if (im_words_has_gear(IM_WORDS_AVX512))
			gear = IM_WORDS_AVX512;
		else if (im_words_has_gear(IM_WORDS_AVX2))
			gear = IM_WORDS_AVX2;
		else if (im_words_has_gear(IM_WORDS_SSE2))
			gear = IM_WORDS_SSE2;
		__atomic_store_n(&best, gear, __ATOMIC_RELAXED);
	}
	return words_add(s, len, p, out, (enum im_words_gear)gear);
}

int im_words_add_gear(const char *s, size_t len, const struct im_params *p,
		      struct im_terms *out, enum im_words_gear gear)
{
	if (!im_words_has_gear(gear))
		return -ENOTSUP;
	return words_add(s, len, p, out, gear);
}

int im_words_add_scalar(const char *s, size_t len, const struct im_params *p,
			struct im_terms *out)
{
	return words_add(s, len, p, out, IM_WORDS_SCALAR);
}

int im_text_figures(const char *text, size_t len, im_figure_fn fn, void *arg)
{
	const unsigned char *c = (const unsigned char *)text;
	const unsigned char *end;
	struct scan sc;
	int ret = 0;

	/* NULL + 0 is undefined behaviour: an empty text may come as NULL. */
	if (len == 0)
		return 0;
	end = c + len;
	memset(&sc, 0, sizeof(sc));
	/* min_len 0: every ASCII word is folded where a figure is told. A
	 * shorter one's fingerprint, short_numbers(), is the same hash. */
	sc.fig_ascii = true;
	sc.fig_other = true;
	sc.figure = fn;
	sc.figure_arg = arg;
	while (c < end && !ret) {
		while (byte_class[*c] == C_SEP)
			if (++c == end)
				return ret;
		c = scan_word(&sc, c, end, &ret);
	}
	return ret;
}

/* ---- Terms -------------------------------------------------------------- */

/*
 * About how many unique terms a text of @p len bytes holds, rather more than
 * fewer, for im_terms_expect(): a set that grows while it is read reinserts
 * its terms each time, and a set too large costs its clearing and its cache
 * lines. In the two bench corpora (3,669 documents, plain text and HTML) one
 * document in a hundred outgrew the set sized this way, and half of them
 * held less than two thirds of the terms it was sized for.
 */
static size_t expected_terms(size_t len)
{
	size_t root = (size_t)(6 * sqrt((double)len));

	return len / 12 < root ? len / 12 : root;
}

int im_text_terms(const char *text, size_t len, const struct im_params *p,
		  struct im_terms *out)
{
	im_terms_clear(out);
	out->numbers = 0;
	out->invalid_utf8 = false;
	im_terms_expect(out, expected_terms(len));
	return im_words_add(text, len, p, out);
}
