/**
 * @file text.h
 * From the bytes of a document to its set U of unique terms (DESIGN §3.1,
 * papers/000 §6.3).
 *
 * The text comes from extract.h (format sniffing and extraction); here it is
 * UTF-8 and only read. A spreadsheet's number cells are terms too, which
 * the word rules below would drop: im_extract_terms() adds them.
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
 * The figures of a document (dates, amounts, reference numbers) are mostly
 * not terms, which is right for finding near-duplicates; but a payslip is
 * not redundant beside another month's, so removal compares them:
 * im_terms.numbers fingerprints every word holding a digit, whatever its
 * length and digits (up to the 256 bytes above).
 *
 * A document keeps at most IM_TERMS_MAX unique terms: past that many (a
 * word list, random words), U is a sample of its terms chosen by a hash of
 * each term alone (see im_terms.level), so that the memory one document
 * takes is bounded whatever it holds and two near-duplicates keep the same
 * sample of the terms they share. Below it, every term is kept.
 *
 * Thread-safety: every function here is reentrant; a struct im_terms must not
 * be used by two threads at once.
 */
#ifndef IM_TEXT_H
#define IM_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "params.h"

/* ---- The term set U ------------------------------------------------------ */

/**
 * The most terms a set keeps (2^20): a document with more is sampled. A set
 * that reached it holds a 64 MiB table, at most 24 MiB of entries and the
 * bytes of its terms, in an arena grown by doubling (106 MB in all for a
 * list of words of 8 letters); what a scan or a signer derives from the
 * terms comes besides, per term kept.
 */
#define IM_TERMS_MAX ((size_t)1 << 20)

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
	/** The numbers fingerprint: the sum mod 2^64 of im_figure_hash() of
	 *  every word holding a digit that the word scanner read, kept as a
	 *  term or not, and of every number term im_extract_terms() added; 0
	 *  for none. Order-independent, so equal for the same figures in
	 *  another order. im_text_terms() resets it; im_terms_clear() does
	 *  not. */
	uint64_t numbers;
	/** 0 while the set holds every term added. Once more than
	 *  IM_TERMS_MAX distinct terms were added, the least L such that at
	 *  most IM_TERMS_MAX of them have a sampling hash (a remix of their
	 *  XXH3_64bits, terms.c) beginning with L zero bits: the set holds
	 *  exactly those, about 1 in 2^L. im_terms_clear() resets it. */
	unsigned level;
	/** Whether the text im_text_terms() last read held bytes that are
	 *  not UTF-8 (read as separators): exactly when im_utf8_valid() of
	 *  it is false, found by the word scanner as it reads, so that a
	 *  caller that would read such a text otherwise (extract.h,
	 *  im_extract_opts.defer_utf8) need not check it first.
	 *  im_terms_clear() does not reset it. */
	bool invalid_utf8;
	/* Private to terms.c: the hash table over v, and what its add checks. */
	struct im_terms_slot *slots;
	size_t nslots;	  /* slots in use: a power of two, the front of slots */
	size_t slots_cap; /* slots allocated */
	unsigned shift;	  /* 64 - log2(nslots) */
	size_t room;	  /* n below this: v[] and the slots take one more */
	size_t arena_room; /* arena_len below this: a short term fits */
	size_t hashed;	   /* v[0, hashed) have their hash */
	size_t settled;	   /* v[0, settled) are at the level, if level > 0 */
};

void im_terms_init(struct im_terms *t);
void im_terms_clear(struct im_terms *t);
void im_terms_release(struct im_terms *t);

/**
 * im_terms_release() @p t if its allocations hold more than @p keep bytes,
 * else leave it as it is. For a set kept across documents by a long-lived
 * thread: im_terms_clear() keeps what the largest document grew, and a word
 * list of millions of terms would otherwise keep hundreds of MB for good.
 */
void im_terms_trim(struct im_terms *t, size_t keep);

/**
 * Add a term (already folded, no NUL byte) unless present, or sampled out
 * (im_terms.level: the set may drop terms it held to keep IM_TERMS_MAX).
 * The bytes are copied. Pointers into the arena are invalidated by the next
 * add.
 *
 * @return 0 or -ENOMEM (also when the set would pass 4 GiB of term bytes).
 */
int im_terms_add(struct im_terms *t, const char *s, size_t len);

/** @return the bytes of term @p i (NUL-terminated; its length is v[i].len). */
static inline const char *im_terms_str(const struct im_terms *t, size_t i)
{
	return t->arena + t->v[i].off;
}

/**
 * The hash of one figure (a word holding a digit, folded, @p n bytes at
 * @p s) that im_terms.numbers sums: the same on every machine.
 */
uint64_t im_figure_hash(const char *s, size_t n);

/**
 * Told one figure: @p n bytes at @p s, folded, not NUL-terminated, valid
 * during the call. @return 0 to go on, else that value is returned.
 */
typedef int (*im_figure_fn)(const char *s, size_t n, void *arg);

/**
 * Tell @p fn each figure of the UTF-8 text @p text / @p len, in reading
 * order, once per occurrence: exactly the words whose im_figure_hash()
 * im_text_terms() sums into im_terms.numbers, so two texts with the same
 * figures, in any order, are told the same ones. For people to see what
 * differs, not for the hot path: one byte at a time.
 *
 * @return 0, or the first nonzero value @p fn returned.
 */
int im_text_figures(const char *text, size_t len, im_figure_fn fn, void *arg);

/* ---- Extraction ---------------------------------------------------------- */

/**
 * Clear @p out and fill it with the unique terms of the UTF-8 text
 * @p text / @p len (extract.h makes it; invalid sequences act as
 * separators, and set im_terms.invalid_utf8). The text is only read; it may
 * be NULL when @p len is 0.
 *
 * @return 0 or -ENOMEM. On error @p out holds part of the terms.
 */
int im_text_terms(const char *text, size_t len, const struct im_params *p,
		  struct im_terms *out);

#endif
