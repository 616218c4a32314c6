/**
 * @file text_internal.h
 * Shared between text.c, html.c and email.c; not part of the core API (only
 * tests/unit/test_text.c includes it besides them).
 *
 * HTML and e-mail are first turned into plain UTF-8 text in a struct im_buf,
 * which the word scanner of text.c then reads. Plain text is scanned in place.
 */
#ifndef IM_TEXT_INTERNAL_H
#define IM_TEXT_INTERNAL_H

#include <errno.h>
#include <iconv.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bytes.h"
#include "text.h"

/** Words whose folded form is longer than this many bytes are dropped. */
#define IM_WORD_MAX 256

/* ---- A growable byte buffer (text.c) ------------------------------------- */

/** Owns p (malloc'ed) once anything was appended; zero-initialise it. */
struct im_buf {
	char *p;
	size_t len, cap;
};

void im_buf_release(struct im_buf *b);
/** Make room for @p extra more bytes. @return 0 or -ENOMEM. */
int im_buf_reserve(struct im_buf *b, size_t extra);
/** @return 0 or -ENOMEM. */
int im_buf_append(struct im_buf *b, const void *s, size_t n);
/* An ASCII letter, either case: whatever the locale (the extractors read
 * markup and headers, whose syntax is ASCII). */
static inline bool im_ascii_alpha(char c)
{
	return (unsigned)((c | 0x20) - 'a') < 26;
}

/* An ASCII digit. */
static inline bool im_ascii_digit(char c)
{
	return (unsigned)(c - '0') < 10;
}

/** Append the UTF-8 encoding of @p cp (must be a valid scalar value). */
int im_buf_put_cp(struct im_buf *b, uint32_t cp);

static inline int im_buf_putc(struct im_buf *b, char c)
{
	if (b->len == b->cap && im_buf_reserve(b, 1))
		return -ENOMEM;
	b->p[b->len++] = c;
	return 0;
}

/**
 * windows-1252 bytes 0x80-0x9f as code points (the five unassigned bytes map
 * to the C1 control of the same value). HTML reads &#128;-&#159; this way too.
 */
extern const uint16_t im_cp1252_high[32];

/* ---- Terms (terms.c) ----------------------------------------------------- */

/**
 * im_terms_add() for the word scanner: the same, but 16 bytes from @p s are
 * readable even when @p len is less (the bytes past @p len are ignored), so
 * that a short term is read without copying it first, and v[i].hash of a
 * new term is left for im_terms_hash_pending().
 */
int im_terms_add_padded(struct im_terms *t, const char *s, size_t len);

/** The most terms one im_terms_add_shorts() takes: the word scanner hands
 *  over a few windows' words at once. */
#define IM_SHORT_BATCH 256

/**
 * im_terms_add_padded() of the short terms (1 to IM_SHORT bytes) whose keys
 * are @p keys[0, n) and lengths @p lens[0, n), in this order,
 * n <= IM_SHORT_BATCH: the same set, v[] and arena as one add after the
 * other, for less than a call each. Keys and lengths are apart so that the
 * word scanner can write several of each with one store.
 * @return 0 or -ENOMEM (then only some of them were added).
 */
int im_terms_add_shorts(struct im_terms *t, const struct im_short_key *keys,
			const uint8_t *lens, size_t n);

/**
 * Set v[i].hash of the terms added since the last call. Whether a word is
 * new is found without a branch that could go either way, so the add does
 * not hash it: this hashes the new ones afterwards, in one loop.
 * im_terms_settle() calls it.
 */
void im_terms_hash_pending(struct im_terms *t);

/**
 * im_terms_hash_pending(), then drop the terms that are not at the set's
 * level and raise the level while the set holds more than IM_TERMS_MAX
 * (im_terms.level): what the set holds once a text is read. Whoever adds
 * with im_terms_add_padded() or im_terms_add_shorts() calls it last (the
 * adds sample only when the set is full). Allocates nothing.
 */
void im_terms_settle(struct im_terms *t);

/**
 * Size the slot table of the empty set @p t for about @p n terms, so that
 * it need not grow while they are added, nor be larger than they need: a
 * hint, ignored if @p t is not empty or memory is short.
 */
void im_terms_expect(struct im_terms *t, size_t n);

/* ---- Words (text.c) ------------------------------------------------------ */

/**
 * Add to @p out (without clearing it) the words of the UTF-8 text @p s,
 * filtered by @p p. @return 0 or -ENOMEM.
 */
int im_words_add(const char *s, size_t len, const struct im_params *p,
		 struct im_terms *out);

/** The same without the SIMD fast path, for tests to compare against. */
int im_words_add_scalar(const char *s, size_t len, const struct im_params *p,
			struct im_terms *out);

/**
 * The ways the word scanner reads text; all of them give the same terms.
 * im_words_add() takes the fastest this build and CPU have, the others are
 * there for tests to compare.
 */
enum im_words_gear {
	IM_WORDS_SCALAR, /**< a byte-class table, one byte at a time */
	IM_WORDS_SSE2,	 /**< 64-byte windows classified with SSE2 */
	IM_WORDS_AVX2,	 /**< the same with AVX2 and BMI2, chosen at run
			      time: x86-64 builds need not assume them */
	IM_WORDS_AVX512, /**< AVX2's, the keys of a window's words built
			      four at a time, figures hashed eight at a
			      time (AVX-512 BW, DQ, VBMI and VBMI2, chosen
			      at run time) */
};

/** @return whether this build and the CPU running it have @p gear. */
bool im_words_has_gear(enum im_words_gear gear);

/**
 * im_words_add() in @p gear. @return 0, -ENOMEM, or -ENOTSUP if
 * !im_words_has_gear(gear).
 */
int im_words_add_gear(const char *s, size_t len, const struct im_params *p,
		      struct im_terms *out, enum im_words_gear gear);

/**
 * Decode one UTF-8 sequence at @p s (strict: no overlongs, surrogates or
 * values past U+10FFFF). @return its length (1-4) with *cp set, or 0 if the
 * bytes at @p s do not start a valid sequence within @p end.
 */
size_t im_utf8_decode(const unsigned char *s, const unsigned char *end,
		      uint32_t *cp);

/* ---- HTML (html.c) ------------------------------------------------------- */

/**
 * Append the text of the HTML document @p s to @p out: tags become a space
 * (inline tags such as b, i, em, span, a become nothing), comments,
 * declarations and processing instructions vanish, <script> and <style>
 * bodies are dropped, CDATA sections are copied as they are, entities are
 * decoded. @return 0 or -ENOMEM.
 */
int im_html_text(const char *s, size_t len, struct im_buf *out);

/**
 * The ways im_html_text() reads HTML; both give the same text. The scalar
 * one is the definition; im_html_text() takes the fastest this build and
 * CPU have.
 */
enum im_html_gear {
	IM_HTML_SCALAR, /**< byte by byte */
	IM_HTML_AVX512, /**< 64-byte windows as bit masks, the text packed
			     with one compress (AVX-512 BW, DQ, VBMI, VBMI2
			     and PCLMUL, chosen at run time), the scalar
			     code where the masks do not settle it */
};

/** @return whether this build and the CPU running it have @p gear. */
bool im_html_has_gear(enum im_html_gear gear);

/** im_html_text() in @p gear. @return 0, -ENOMEM, or -ENOTSUP if
 * !im_html_has_gear(gear). */
int im_html_text_gear(const char *s, size_t len, struct im_buf *out,
		      enum im_html_gear gear);

/**
 * The code point of the named entity @p name (without '&' and ';'), or -1.
 * Names are case-sensitive, as in HTML.
 */
int32_t im_html_entity(const char *name, size_t len);
/** Number of named entities known. */
size_t im_html_entity_count(void);

/**
 * The charset an HTML document declares (<meta charset=...> or
 * content="...; charset=...") in its first 1024 bytes: sets *name and
 * @return its length, or 0 if none is declared.
 */
size_t im_html_charset(const char *s, size_t len, const char **name);

/* ---- E-mail (email.c) ---------------------------------------------------- */

/** Append the Subject and text parts of the message @p s to @p out. */
int im_email_text(const char *s, size_t len, struct im_buf *out);

/**
 * Charsets (email.c): ISO-8859-1 and windows-1252 (read as windows-1252),
 * ISO-8859-15 are converted; every other name means UTF-8.
 */
bool im_charset_is_utf8(const char *name, size_t n);
/** Append s[0, n), in charset @p name, to @p out as UTF-8. */
int im_charset_to_utf8(const char *name, size_t name_len, const char *s,
		       size_t n, struct im_buf *out);
/**
 * Append s[0, n) to @p out through @p cd (opened to UTF-8 by the caller,
 * who keeps it for many calls; its shift state is reset first): a byte it
 * cannot read becomes U+FFFD and the conversion goes on after it; an
 * incomplete sequence at the end is dropped. @return 0 or -ENOMEM.
 */
int im_iconv_append(iconv_t cd, const char *s, size_t n, struct im_buf *out);

#endif
