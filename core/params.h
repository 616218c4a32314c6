/**
 * @file params.h
 * Every tunable of the algorithm in one struct, so that `imatch` and the
 * daemon cannot drift apart: both fill a struct im_params from their options
 * and hand it to the same core functions.
 *
 * The defaults are the measured ones (see README, "Choosing the defaults").
 * A struct im_params is plain data: copy it freely; it owns nothing.
 */
#ifndef IM_PARAMS_H
#define IM_PARAMS_H

#include <stddef.h>
#include <stdint.h>

struct im_scope;

/** Largest K (number of randomized lexicons); coordinate 0 is the original. */
#define IM_MAX_LEXICONS 31
/** Signatures per document at most: the original lexicon plus K. */
#define IM_MAX_COORDS (IM_MAX_LEXICONS + 1)

struct im_params {
	/* Terms (papers/000 §6.3). */
	/** Words shorter than this (in code points) are dropped; 4. */
	unsigned min_word_len;
	/** Words with more digits than this are dropped; 1. */
	unsigned max_digits;
	/** Documents with fewer unique terms get no signature; 5. */
	unsigned min_unique;

	/* Lexicon (papers/000 §3, papers/001 §4.1). */
	/** Primary lexicon: nidf in [nidf_lo, nidf_hi]. */
	double nidf_lo;
	double nidf_hi;
	/** At most this many terms in the secondary lexicon B. */
	size_t secondary_cap;

	/* Randomized lexicons and signatures (papers/000 §3, §4, §6.6). */
	/** Number of extra randomized lexicons, 0..IM_MAX_LEXICONS. */
	unsigned k;
	/** Fraction of L and B each randomized lexicon keeps. */
	double keep;
	/** Key of the membership hash. */
	uint64_t seed;
	/** Reject a coordinate when |S| < min_terms. */
	unsigned min_terms;
	/** Extend S from B while |S|/|U| < min_ratio (min_ratio * keep for
	 *  the randomized coordinates), then reject. */
	double min_ratio;

	/* Links (DESIGN §2, §3.6). */
	/** A candidate pair becomes a near link when the sketch's estimate of
	 *  the cosine of the two term sets is at least this. */
	double similarity;

	/* Input. */
	/** Files larger than this are skipped (counted); 0 = no limit. */
	uint64_t max_size;
	/** Also read names beginning with '.'. */
	int hidden;
	/** External filters for files no extractor reads: a NULL-terminated
	 *  list of "EXT:COMMAND" (extract.h), borrowed; NULL for none. */
	const char *const *filters;
	/** A binary file (sniffed from its first IM_EXTRACT_SNIFF bytes, no
	 *  filter for it) is read no further and left unhashed: the caller
	 *  hashes it only when another file has its size (exact.h). 0 hashes
	 *  every file as it is read. */
	int defer_binary;
	/** Of a file, the signer's caller needs its size and that it is a
	 *  regular file, nothing more of its stat: a file whose one read(2)
	 *  comes short of the buffer (and is over no max_size) is not
	 *  fstat'ed, and the stat handed back for it holds st_mode (S_IFREG)
	 *  and st_size only; its mtime_ns is 0. A file growing meanwhile is
	 *  read as far as that read saw it. 0 fstat's every file. */
	int size_only;
	/** -o exclude / -o include (scope.h), borrowed; NULL for none. The
	 *  walker reads .imatchignore files in the tree either way. */
	const struct im_scope *scope;
};

/** Fill @p p with the defaults. Never fails. */
void im_params_init(struct im_params *p);

/**
 * Check that @p p is consistent (k in range, 0 < keep <= 1, 0 <= lo <= hi <= 1,
 * 0 <= min_ratio <= 1, 0 < similarity <= 1).
 *
 * @return 0, or -EINVAL with a one-line reason copied into @p why (may be NULL).
 */
int im_params_check(const struct im_params *p, char *why, size_t why_len);

/**
 * Parse one "name=value" setting (k, keep, nidf=LO:HI, min_terms, min_ratio,
 * similarity, seed, max_size, secondary_cap, min_word_len, max_digits, min_unique) into @p p.
 *
 * @return 0; -ENOENT if the name is not a parameter (so the caller may treat
 *         it as its own option); -EINVAL if the value does not parse.
 */
int im_params_set(struct im_params *p, const char *name, const char *value);

#endif
