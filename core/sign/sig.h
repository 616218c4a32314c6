/**
 * @file sig.h
 * Extended I-Match signatures with randomized lexicons (DESIGN §3.3–§3.5,
 * papers/000 §3 and §4).
 *
 * Coordinate 0 uses the lexicon as built; coordinate k = 1..K uses the
 * randomized lexicons L_k ⊂ L and B_k ⊂ B. A term t belongs to lexicon k when
 * a keyed hash of (seed, k, t) falls below keep; membership therefore costs no
 * memory and is the same on every run and machine.
 *
 * For each coordinate: S = L_k ∩ U; while |S|/|U| < r_k, add the
 * best-ranked term of B_k ∩ U not yet in S; reject if |S| < min_terms or
 * |S|/|U| < r_k, where r_0 = min_ratio and r_k = min_ratio * keep for
 * k >= 1 (a randomized lexicon holds only that fraction of the terms, so
 * the guard keeps the same strength relative to what it can offer).
 * A kept coordinate's signature is
 *     SHA1( byte k, then each term of S in byte order followed by 0x00 )
 * (terms never contain a NUL byte). Documents with fewer than
 * im_params.min_unique unique terms are rejected in every coordinate.
 * A 128-bit xxHash of the file's bytes is kept beside the signatures so that
 * byte-identical files match even when they cannot be signed, and a sketch of
 * U (sketch.h) verifies every candidate pair, including documents too short
 * for any coordinate.
 *
 * Thread-safety: struct im_signer is one thread's worker state; create one per
 * thread. The lexicon it borrows may be shared between signers.
 */
#ifndef IM_SIG_H
#define IM_SIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "extract.h"
#include "lexicon.h"
#include "params.h"
#include "sketch.h"
#include "text.h"

#define IM_SIG_LEN     20
#define IM_SIG_HEX_LEN 40

struct im_sig {
	uint8_t b[IM_SIG_LEN];
};

/** What happened to a document. */
enum im_doc_status {
	IM_DOC_SIGNED,	 /**< at least one coordinate has a signature */
	IM_DOC_REJECTED, /**< a text, but every coordinate was rejected */
	IM_DOC_BINARY,	 /**< NUL byte in the first block: skipped */
	IM_DOC_TOO_BIG,	 /**< larger than im_params.max_size: skipped */
	IM_DOC_ERROR,	 /**< could not be read (errno in im_doc_sigs.err) */
	IM_DOC_FAILED,	 /**< extraction failed (enum im_extract_fail in
			      im_doc_sigs.err); retried when the file changes */
};

/** Number of values of enum im_doc_status. */
#define IM_DOC_STATUS_COUNT 6

/** Everything the index needs to know about one document. Plain data. */
struct im_doc_sigs {
	uint8_t status;	     /**< enum im_doc_status */
	uint8_t ncoords;     /**< K + 1 */
	uint8_t exact_valid; /**< exact[] holds the bytes' hash (status SIGNED or
			       REJECTED, and at least one byte: empty files
			       are not exact copies of each other) */
	uint8_t format;	     /**< enum im_format (extract.h) */
	int32_t err;	/**< positive errno when status is IM_DOC_ERROR, the
			       enum im_extract_fail when IM_DOC_FAILED */
	uint32_t valid; /**< bit k set: sig[k] is a signature */
	uint32_t unique_terms; /**< |U| */
	uint8_t exact
		[16]; /**< XXH3 128-bit hash of the bytes, canonical (big-endian) */
	struct im_sig sig[IM_MAX_COORDS];
	/** Sketch of U (seeded with im_params.seed); n == 0 when U is empty
	 *  or the document is not a text. Verifies candidate links. */
	struct im_sketch sketch;
	/** The file's st_size and st_mtim in nanoseconds when it was read
	 *  (im_signer_sign_at(); 0 from im_signer_sign_buf()). */
	uint64_t size;
	int64_t mtime_ns;
	/** The text's figures (im_terms.numbers, text.h); 0 for none or no
	 *  text. Not a signature: detection ignores it, removal plans a
	 *  near-duplicate only beside a keeper with the same (plan.h). */
	uint64_t numbers;
};

/** Lower-case hex of @p s into @p hex (IM_SIG_HEX_LEN + 1 bytes). */
void im_sig_hex(const struct im_sig *s, char *hex);
/** Parse 40 hex digits (either case). @return 0 or -EINVAL. */
int im_sig_parse(const char *hex, struct im_sig *s);
/** memcmp order. */
int im_sig_cmp(const struct im_sig *a, const struct im_sig *b);

/** Why a coordinate got the signature it got; for `imatch explain`. */
struct im_coord_info {
	uint32_t primary;   /**< |L_k ∩ U| */
	uint32_t secondary; /**< terms added from B_k */
	uint32_t size;	    /**< |S| */
	bool rejected;
	const char *why; /**< static text when rejected, else NULL */
};

struct im_signer;

/**
 * A signer for one thread. Borrows @p lex (must outlive the signer) and copies
 * @p p. @p lex may be NULL only for a signer that will be used to extract
 * terms (im_signer_terms()).
 *
 * @return 0, -ENOMEM, or -EINVAL if im_params_check() fails.
 */
int im_signer_new(const struct im_lexicon *lex, const struct im_params *p,
		  struct im_signer **out);
void im_signer_free(struct im_signer *s);

/**
 * Sign a document held in memory; its format is sniffed from the bytes
 * (extract.h). @p name (may be NULL) only chooses an external filter for a
 * binary file. Fills *out completely.
 *
 * @return 0 (see out->status), or -ENOMEM.
 */
int im_signer_sign_buf(struct im_signer *s, const char *name, const char *buf,
		       size_t len, struct im_doc_sigs *out);

/**
 * Read the regular file @p name relative to @p dirfd and sign it. A relative
 * @p name is opened with im_open_beneath(O_RDONLY | O_NOCTTY | O_NONBLOCK),
 * so no symlink anywhere on it is followed and nothing outside @p dirfd is
 * reached; an absolute one (a path the user gave) with openat(O_NOFOLLOW),
 * which follows symlinks in its directories only. A fifo never blocks. The
 * file is read whole into a buffer the signer keeps (one over 4 MiB is
 * released after). A relative @p name may hold '/', never "..".
 *
 * Outcomes, all with return value 0:
 *   - IM_DOC_SIGNED / IM_DOC_REJECTED: exact[] holds the bytes' hash.
 *   - IM_DOC_BINARY: no format extract.h knows (exact[] holds the hash;
 *     with im_params.defer_binary a file told binary by its first
 *     IM_EXTRACT_SNIFF bytes is read no further, exact_valid 0: exact.h).
 *     One over 64 MiB whose first IM_EXTRACT_SNIFF bytes say binary is
 *     hashed as it streams by, never held whole; a smaller one is read
 *     whole, so a format sniffed from more than its first bytes is still
 *     recognized.
 *   - IM_DOC_FAILED: extraction failed, the reason in err (exact[] holds
 *     the hash).
 *   - IM_DOC_TOO_BIG: st_size > max_size (max_size 0 = no limit); not read.
 *   - IM_DOC_ERROR with err: the open's or read's errno (ENOENT when the file
 *     vanished, EACCES, ELOOP for a symlink on the path, EXDEV for
 *     ".."), EISDIR for a directory, EINVAL
 *     for a device, fifo or socket, ENOMEM when no buffer could hold this
 *     one file.
 * The document is what the file held when it was opened: bytes appended
 * after the fstat() are not read, and a file that shrinks is signed as read.
 *
 * @param st  if not NULL, receives the fstat() of the opened file (all zero,
 *            so st_mode 0, when the open failed; under im_params.size_only
 *            perhaps st_mode and st_size alone).
 * @return 0 (see out->status), or -ENOMEM when signing itself ran out of
 *         memory, or -EINVAL for a signer made without a lexicon.
 */
struct stat;
int im_signer_sign_at(struct im_signer *s, int dirfd, const char *name,
		      struct im_doc_sigs *out, struct stat *st);

/**
 * Extract the unique terms of a file for lexicon building, through the same
 * reading and extraction path as signing. The returned set is owned by the
 * signer and valid until its next call.
 *
 * @param status  receives IM_DOC_SIGNED when terms were extracted, else the
 *                reason (binary, too big, error).
 * @return 0 or -ENOMEM.
 */
int im_signer_terms_at(struct im_signer *s, int dirfd, const char *name,
		       enum im_doc_status *status,
		       const struct im_terms **terms);

/**
 * im_signer_terms_at(), also handing out the stat of the opened file as
 * im_signer_sign_at() does (@p st: all zero when it could not be opened):
 * for a caller that would otherwise stat the file itself.
 */
int im_signer_terms_stat_at(struct im_signer *s, int dirfd, const char *name,
			    enum im_doc_status *status,
			    const struct im_terms **terms, struct stat *st);

/**
 * Tell @p fn each figure of a file (im_extract_figures(), text.h's
 * im_figure_fn), read and extracted as im_signer_terms_at() does: the
 * figures whose fingerprint signing keeps in im_doc_sigs.numbers.
 *
 * @param status  as im_signer_terms_at(): IM_DOC_SIGNED when the text was
 *                read, and only then is @p fn called.
 * @return 0, -ENOMEM, or the first nonzero value @p fn returned.
 */
int im_signer_figures_at(struct im_signer *s, int dirfd, const char *name,
			 enum im_doc_status *status,
			 int (*fn)(const char *s, size_t n, void *arg),
			 void *arg);

/** Why the last im_signer_terms_at() or im_signer_figures_at() that gave
 *  IM_DOC_FAILED failed (an enum im_extract_fail, for
 *  im_extract_fail_name()); 0 after any other. */
int im_signer_last_fail(const struct im_signer *s);

/**
 * Compute the signatures of a term set (no exact hash; status is SIGNED or
 * REJECTED). @p info, if not NULL, receives K+1 entries. @p u is only read
 * during the call (the signer keeps no pointer into it).
 *
 * @return 0, -ENOMEM, or -EINVAL for a signer made without a lexicon.
 */
int im_signer_sign_terms(struct im_signer *s, const struct im_terms *u,
			 struct im_doc_sigs *out, struct im_coord_info *info);

/* ---- Signing in two steps (one-pass scans) --------------------------------
 *
 * A first scan has no lexicon while it reads: it tokenizes each file once,
 * keeps what signing needs (the ids of the terms in its struct im_df), builds
 * the lexicon, and signs afterwards (core/scan.h, im_scan_first()). These two
 * calls split im_signer_sign_at() at that point; together they give exactly
 * its result.
 */

/**
 * Whether the caller already holds what im_signer_prepare_at() would make of
 * a file whose bytes hash to @p exact (XXH3-128, canonical, as
 * im_doc_sigs.exact): then it is not extracted again. Asked with @p arg of
 * im_signer_set_copy_probe(), in the thread that called
 * im_signer_prepare_at().
 */
typedef bool (*im_copy_probe)(const uint8_t exact[16], void *arg);

/**
 * Whether im_signer_sign_at() keeps its recent texts' results (211 KiB,
 * made on first use) by the hash of the bytes read, and gives a file whose
 * bytes it has kept the result without extracting or signing it again; off
 * by default. Exact copies are as common in a tree as duplicate licences
 * and PDFs saved twice: scans turn it on. A file a filter reads by name is
 * neither kept nor found. im_signer_set_lexicon() forgets what was kept.
 */
void im_signer_keep_results(struct im_signer *s, bool keep);

/**
 * Between documents, give back what a very large one left with @p s: a term
 * set, or arrays of candidates sized for one, of more than 32 MiB each. For
 * signers that live as long as a daemon; the last document's terms, and
 * what im_signer_foreach_term() would list of it, may be forgotten.
 */
void im_signer_trim(struct im_signer *s);

/**
 * Whether the last document @p s read was a text of more than IM_TERMS_MAX
 * unique terms, signed (or prepared) from a sample of them (text.h).
 */
bool im_signer_sampled(const struct im_signer *s);

/**
 * Whether the last im_signer_sign_at() of @p s gave a result it kept
 * (im_signer_keep_results()): the file was an exact copy of a text read
 * before, read and hashed but not extracted or signed again.
 */
bool im_signer_reused(const struct im_signer *s);

/**
 * Whether what @p s makes of a file named @p name depends on its bytes
 * alone, so that an exact copy may share its result: not where a filter of
 * the parameters reads it by its name. The one rule of the copy probe and
 * im_signer_keep_results(), and of whoever notes a result for them.
 */
bool im_signer_by_bytes(const struct im_signer *s, const char *name);

/** Ask @p probe with @p arg from now on (NULL: never). */
void im_signer_set_copy_probe(struct im_signer *s, im_copy_probe probe,
			      void *arg);

/**
 * Where im_signer_sign_at() may find the result of a text read before it
 * kept: asked with the hash of a file's bytes (XXH3-128, canonical) when
 * the signer keeps results (im_signer_keep_results()) and its own missed.
 * Returning true, it has filled @p out with everything a signing of those
 * bytes with the signer's lexicon and parameters would give but size and
 * mtime_ns; the signer keeps that result too, and im_signer_reused() says
 * so. The signer refuses a result that is not a text's (SIGNED or
 * REJECTED), not of those bytes or K, or an external filter's (format
 * IM_FMT_FILTER: its text depends on a name the copy need not have); the
 * file is then read as usual. Called in the signing thread, with @p arg of
 * im_signer_set_lender(). A daemon lends what its index holds for an
 * earlier copy, signed by another thread or another run.
 */
typedef bool (*im_result_lender)(const uint8_t exact[16],
				 struct im_doc_sigs *out, void *arg);

/** Ask @p lender with @p arg from now on (NULL: never). */
void im_signer_set_lender(struct im_signer *s, im_result_lender lender,
			  void *arg);

/**
 * Read, extract and tokenize like im_signer_sign_at(), without signing. A
 * text comes back with status IM_DOC_REJECTED, no signature, unique_terms
 * and the sketch set, and *terms pointing at its unique terms (owned by the
 * signer, valid until its next call); anything else (binary, failed, too
 * big, error) comes back complete, as im_signer_sign_at() gives it, with
 * *terms NULL. Works with or without a lexicon.
 *
 * A file read whole (not empty, and not one a filter of the parameters
 * reads, whose text depends on its name) is first offered to the copy
 * probe, if any: when it says yes, nothing is extracted, *terms is NULL and
 * @p out holds only status IM_DOC_REJECTED, ncoords, exact, exact_valid,
 * size and mtime_ns, for the caller to complete from its copy.
 *
 * @return 0, 1 when the copy probe took the file, or -ENOMEM; on error
 *         *terms is NULL.
 */
int im_signer_prepare_at(struct im_signer *s, int dirfd, const char *name,
			 struct im_doc_sigs *out, struct stat *st,
			 const struct im_terms **terms);

/**
 * Sign a text im_signer_prepare_at() left unsigned: @p nums holds, once
 * each and in any order, the term numbers (im_lexicon_term()) of the
 * document's terms that the signer's lexicon holds; |U| is
 * out->unique_terms. Only status, valid and sig[] of @p out change.
 * The first call after im_signer_set_lexicon() makes the signer a table of
 * 16 bytes per lexicon term (where its bytes are, its length and its
 * coordinates), which it keeps until the next im_signer_set_lexicon() or
 * im_signer_free().
 * The signer also remembers the results of recent calls (1,024 of them,
 * at most 4 MiB of numbers and signatures, kept until im_signer_free()):
 * a call with the same numbers in the same order and the same |U| as one
 * it remembers (an exact copy of a file signed before) copies that result
 * instead of signing again, the same bytes either way. Nothing is
 * remembered across im_signer_set_lexicon(). Signers can share what they
 * remember (im_signer_share_memo()).
 *
 * @return 0, -ENOMEM, or -EINVAL without a lexicon or for a number past it.
 */
int im_signer_sign_numbers(struct im_signer *s, const uint32_t *nums, size_t n,
			   struct im_doc_sigs *out);

/** What im_signer_sign_numbers_later() asks of the memo, as bits. */
enum {
	/** Look for the result of an exact copy (the same numbers in the same
	 *  order, the same |U|) signed before. */
	IM_MEMO_FIND = 1,
	/** Remember this result for the copies to come. */
	IM_MEMO_KEEP = 2,
};

/**
 * im_signer_sign_numbers(), except that sig[] of @p out may be written only
 * by the next im_signer_flush(), with the signatures of other documents:
 * a document has K + 1 coordinates to hash, far fewer than the lanes of
 * the hasher (sha1.h: up to 32), which hashes many documents' better
 * together (alone, one document leaves most lanes idle and its coordinate
 * 0, about three times the others, runs on by itself; a flush takes up to
 * 128 coordinates). status and valid are set at once. @p out must stay valid, and be left alone, until the flush.
 * @p memo says what the memo is for: im_signer_sign_numbers() asks
 * IM_MEMO_FIND | IM_MEMO_KEEP, and a caller that knows which documents are
 * exact copies (and of which) spares the others the memo's work, a copy of
 * their numbers. A result is the same either way.
 *
 * @return as im_signer_sign_numbers(); -ENOMEM also when hashing the
 *         documents that waited failed (making room for this one): their
 *         sig[] are then not written, and the next im_signer_flush() says
 *         so too.
 */
int im_signer_sign_numbers_later(struct im_signer *s, const uint32_t *nums,
				 size_t n, struct im_doc_sigs *out,
				 unsigned memo);

/**
 * Write the signatures that im_signer_sign_numbers_later() left, and
 * remember those results (the memo: a copy of a document that waits takes
 * its result too). im_signer_set_lexicon() and
 * im_signer_share_memo() flush first; im_signer_free() drops what waits.
 *
 * @return 0, or -ENOMEM when OpenSSL failed, in this flush or in one made
 *         since the last call (by im_signer_sign_numbers_later(),
 *         im_signer_set_lexicon() or im_signer_share_memo()): what waited
 *         is then dropped, its sig[] not written, and no result left by
 *         im_signer_sign_numbers_later() since the last call may be used.
 */
int im_signer_flush(struct im_signer *s);

/** Results of im_signer_sign_numbers() that signers share. */
struct im_sig_memo;

/**
 * An empty memo for im_signer_share_memo(). The caller frees it with
 * im_sig_memo_free(), once no signer uses it.
 *
 * @return 0, -ENOMEM, or -EAGAIN if its lock cannot be made.
 */
int im_sig_memo_new(struct im_sig_memo **out);
void im_sig_memo_free(struct im_sig_memo *m);

/**
 * From now on, remember the results of im_signer_sign_numbers() in @p m
 * (borrowed) and find there those of every signer sharing it, instead of
 * in the signer's own memo: exact copies read by different threads are
 * then signed once. @p m has a lock: the signers may run in any threads;
 * one that finds it taken does without the memo for that call (it signs,
 * or does not keep what it signed) rather than wait.
 * They must sign with one lexicon (and the masks of it) and one
 * im_params: im_signer_set_lexicon() forgets only the signer's own memo.
 * NULL returns to the signer's own.
 */
void im_signer_share_memo(struct im_signer *s, struct im_sig_memo *m);

/**
 * Sign with @p lex (borrowed, must outlive its use) from now on; for a
 * signer made before the lexicon existed. @p masks, if not NULL, is
 * im_sig_masks() of @p lex with this signer's parameters (borrowed too):
 * then im_signer_sign_numbers() looks memberships up instead of hashing.
 */
void im_signer_set_lexicon(struct im_signer *s, const struct im_lexicon *lex,
			   const uint32_t *masks);

/**
 * Which coordinates' lexicons hold each term of @p lex under @p p (bit k of
 * (*out)[i] for term number i; bit 0 always): the keyed hashes of
 * sig.c's membership, computed once for a whole scan instead of once per
 * document and term. Read-only afterwards, so any number of signers may
 * share it. The caller frees *out with free().
 *
 * @return 0, -ENOMEM, or -EINVAL if im_params_check() fails.
 */
int im_sig_masks(const struct im_lexicon *lex, const struct im_params *p,
		 uint32_t **out);

/**
 * im_sig_masks() of the terms numbered [@p from, @p to) of @p lex only,
 * into the caller's @p masks (indexed by term number; nothing else of it is
 * written): threads may share one table, each filling its part.
 *
 * @return 0, or -EINVAL if im_params_check() fails.
 */
int im_sig_masks_part(const struct im_lexicon *lex, const struct im_params *p,
		      uint32_t *masks, size_t from, size_t to);

/* ---- Explaining a signature (`imatch explain`) ----------------------------
 *
 * A signer remembers the candidate terms of the last document it signed
 * (im_signer_sign_terms(), im_signer_sign_buf() or im_signer_sign_at() with
 * status SIGNED or REJECTED), so S can be listed for any coordinate afterwards
 * without storing it: S is recomputed exactly as it was hashed.
 */

/**
 * Called by im_signer_foreach_term() once per term of S, in the order hashed
 * (byte order). @p t is borrowed from the lexicon: t->kind says whether the
 * term came from L or was added from B (then t->rank is its rank in B).
 * Return 0 to go on; anything else stops the walk and is returned.
 */
typedef int (*im_sig_term_fn)(void *arg, unsigned k,
			      const struct im_lex_term *t);

/**
 * Walk S of coordinate @p k of the last document signed, rejected
 * coordinates included (S is then the set that was found too small).
 *
 * @return 0 when every term was visited, fn's non-zero value if it stopped,
 *         or -EINVAL if @p k > K or no document has been signed yet.
 */
int im_signer_foreach_term(struct im_signer *s, unsigned k, im_sig_term_fn fn,
			   void *arg);

/**
 * The same as a NULL-terminated array of the sorted terms of S for coordinate
 * @p k of the last document signed. The array and the strings are owned by
 * the signer (the strings by its lexicon) and valid until its next call.
 *
 * @return NULL if @p k > K, no document has been signed yet, or memory ran out.
 */
const char *const *im_signer_last_set(struct im_signer *s, unsigned k);

#endif
