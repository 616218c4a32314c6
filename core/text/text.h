/**
 * @file text.h
 * From the bytes of a document to its set U of unique terms (DESIGN §3.1,
 * papers/000 §6.3).
 *
 * Three document kinds are understood: plain text, HTML (markup, comments,
 * <script> and <style> bodies removed, named and numeric entities decoded) and
 * e-mail (headers dropped except Subject; MIME parts with quoted-printable or
 * base64 transfer encoding decoded; text/plain and text/html parts kept, other
 * parts ignored). A document with a NUL byte in its first IM_TEXT_SNIFF bytes
 * is binary and yields no terms.
 *
 * A word is a maximal run of Unicode letters and digits (general categories
 * L* and N*), case folded with utf8proc (full folding: "Straße" and
 * "STRASSE" are both "strasse"). Combining marks (M*) continue a word but
 * never start one; format characters (Cf: soft hyphen, zero-width joiners,
 * BOM) are skipped without ending it; text is not otherwise normalised.
 * Words shorter than im_params.min_word_len code points or with more than
 * im_params.max_digits digits (code points of category N*) are dropped; both
 * are counted on the folded word, so the decision depends only on the term.
 * Words longer than 256 bytes once folded are dropped whole (base64 runs,
 * hashes). Invalid UTF-8 bytes act as separators: they never stop the scan
 * and never swallow a valid neighbour.
 *
 * HTML: tags become a space except inline ones (a, b, i, em, span, code,
 * sub, sup, ...), which vanish, so "a<b>c</b>d" is the one word "acd", as a
 * browser shows it; a tag left open at the end drops the rest. Entities: the
 * 252 of HTML 4 and &apos;, with or without ';', and &#NNN; / &#xHH;. A
 * document whose first 1024 bytes declare charset=ISO-8859-1, windows-1252
 * or ISO-8859-15 is converted to UTF-8 first; any other is read as UTF-8.
 *
 * E-mail: Subject encoded-words (RFC 2047) are decoded; of a
 * multipart/alternative only the last alternative that yields text is read
 * (the sender's preferred one); parts with Content-Disposition: attachment
 * are ignored; message/rfc822 parts are read as messages. ISO-8859-1,
 * windows-1252 and ISO-8859-15 are converted; other charsets are read as
 * UTF-8. The details are in html.c and email.c.
 *
 * Thread-safety: every function here is reentrant; a struct im_terms must not
 * be used by two threads at once.
 */
#ifndef IM_TEXT_H
#define IM_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "params.h"

/** Bytes looked at to decide that a file is binary. */
#define IM_TEXT_SNIFF 4096

enum im_doc_kind {
	IM_KIND_TEXT,
	IM_KIND_HTML,
	IM_KIND_EMAIL,
	IM_KIND_BINARY,
};

/** Name of a kind for messages ("text", "html", "email", "binary"). */
const char *im_kind_name(enum im_doc_kind kind);

/**
 * Decide the kind of a document from its file name (may be NULL) and its
 * first bytes: NUL in the first IM_TEXT_SNIFF bytes means binary; .html/.htm/
 * .xhtml or a leading <!DOCTYPE html / <html means HTML; .eml or a leading
 * run of RFC 5322 header lines (or an mbox "From " line) means e-mail.
 */
enum im_doc_kind im_text_detect(const char *name, const char *buf, size_t len);

/* ---- The term set U ------------------------------------------------------ */

/**
 * One unique term: bytes at terms->arena + off, UTF-8, case folded. The term
 * contains no NUL byte; the arena holds a NUL right after it, so
 * im_terms_str() may also be used as a C string.
 */
struct im_term {
	uint32_t off;
	uint32_t len;
	uint64_t
		hash; /**< XXH3_64bits of the bytes; the lexicon looks up by it */
};

/**
 * A set of unique terms. Initialise with im_terms_init(), reuse across
 * documents with im_terms_clear() (keeps the memory), release with
 * im_terms_release(). Insertion order is kept in v[0..n).
 */
struct im_terms {
	char *arena;
	size_t arena_len, arena_cap;
	struct im_term *v;
	size_t n, cap;
	uint32_t *slots; /* open addressing over v, index + 1; 0 = empty */
	size_t nslots;
};

void im_terms_init(struct im_terms *t);
void im_terms_clear(struct im_terms *t);
void im_terms_release(struct im_terms *t);

/**
 * Add a term (already folded, no NUL byte) unless present. The bytes are
 * copied. Pointers into the arena are invalidated by the next add.
 *
 * @return 0 or -ENOMEM (also when the set would pass 4 GiB of term bytes).
 */
int im_terms_add(struct im_terms *t, const char *s, size_t len);

/** @return the bytes of term @p i (NUL-terminated; its length is v[i].len). */
static inline const char *im_terms_str(const struct im_terms *t, size_t i)
{
	return t->arena + t->v[i].off;
}

/* ---- Extraction ---------------------------------------------------------- */

/**
 * Clear @p out and fill it with the unique terms of a document of kind
 * @p kind held in @p buf / @p len. The buffer is only read.
 *
 * @return 0, -ENOMEM, or -EINVAL for a @p kind not in the enum. Malformed
 *         HTML, MIME or UTF-8 is not an error: what can be read is read.
 *         On error @p out holds part of the terms.
 */
int im_text_terms(const char *buf, size_t len, enum im_doc_kind kind,
		  const struct im_params *p, struct im_terms *out);

#endif
