/**
 * @file plan.h
 * Removal plans (DESIGN §6): which files of a group of duplicates may go,
 * and which file is kept in place of each.
 *
 * Input is a graph: files (path, size, mtime, inode) and the links between
 * them, each a verified near-duplicate pair with its similarity, or an exact
 * copy. The caller takes them from the index; this module knows nothing of
 * the index, the filesystem or any output format, so the same function plans
 * for `imatch dedupe`, the daemon's `redundant/` and any other driver.
 *
 * The rule (greedy keepers within a cluster): order the files by the keep
 * rules; walk that order; a file not yet planned becomes a keeper and every
 * not yet planned, unprotected file DIRECTLY linked to it (by an exact link,
 * or by any link when near-duplicates are included) is planned with that
 * keeper. So:
 *   - a file is planned only when it is directly linked to its keeper, never
 *     through a chain of links;
 *   - a keeper is never planned, and each planned file's keeper is the best
 *     ranked of its unplanned neighbours;
 *   - a file under a protected directory is never planned;
 *   - a near-duplicate (not an exact copy) is planned only when its figures
 *     are its keeper's (im_plan_file.numbers: every word holding a digit,
 *     text.h). Payslips, invoices and statements that differ only in their
 *     amounts and dates are near-duplicates, but none of them is redundant:
 *     a near link between files whose figures differ does not count here.
 *     Such a file stays (im_plan.kept says beside which keeper), and keeps
 *     in turn what is linked to it with its own figures, as any keeper.
 * Walking the whole collection in one order gives the same plan as walking
 * each cluster separately: a keeper only claims its own neighbours. A file
 * whose keeper is the same inode (a hard link of it) frees nothing and is
 * left out of the plan; it is counted in im_plan.same_inode.
 *
 * Cost: O(F log F + L) time, O(F + L) memory for F files and L links
 * (im_plan_build_lazy(): only the keepers' links, asked for one at a time).
 *
 * Thread-safety: the functions are reentrant and keep no state; the inputs
 * are only read.
 */
#ifndef IM_PLAN_H
#define IM_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "index.h"

/* ---- Keep rules ------------------------------------------------------------ */

enum im_keep_rule {
	IM_KEEP_PROTECT,  /**< files under a protected directory first */
	IM_KEEP_OLDEST,	  /**< smaller mtime first */
	IM_KEEP_NEWEST,	  /**< larger mtime first */
	IM_KEEP_SHORTEST, /**< shorter path (in bytes) first */
	IM_KEEP_LONGEST,  /**< longer path first */
	IM_KEEP_NAME,	  /**< path in byte order; always the last rule */
};

#define IM_KEEP_MAX_RULES 6
/** DESIGN §6: the rules used when the user names none. */
#define IM_KEEP_DEFAULT "protect,oldest,shortest,name"

/** Keep rules in the order they decide; the first that tells two files apart
 *  wins. Plain data. */
struct im_keep {
	uint8_t rule[IM_KEEP_MAX_RULES]; /**< enum im_keep_rule */
	unsigned n;
};

/**
 * Parse a comma-separated list of rule names ("protect", "oldest", "newest",
 * "shortest", "longest", "name"). "name" is appended when missing, so the
 * order is total. A rule may appear once; "oldest" and "newest" exclude each
 * other, as do "shortest" and "longest".
 *
 * @return 0, or -EINVAL with a one-line reason in @p why (may be NULL).
 */
int im_keep_parse(const char *s, struct im_keep *out, char *why,
		  size_t why_len);

/** Write the rules back as a comma-separated list into @p buf. */
void im_keep_format(const struct im_keep *k, char *buf, size_t len);

/**
 * Whether @p path (relative to the root) is or lies under one of @p dirs
 * (relative paths of directories or files, without a trailing '/'; "" is
 * the root itself, so it protects everything). A directory protects the
 * paths below it only at a component boundary: "a/b" protects "a/b/c",
 * not "a/bc"; a file protects itself.
 */
bool im_plan_protected(const char *path, const char *const *dirs, size_t n);

/* ---- Planning -------------------------------------------------------------- */

/** One file. Borrowed by im_plan_build() during the call only. */
struct im_plan_file {
	const char *path; /**< relative to the root, unique among the files */
	uint64_t size;
	int64_t mtime_ns;  /**< nanoseconds since the epoch */
	uint64_t dev, ino; /**< both 0 when unknown (never "same inode") */
	/** The text's figures (im_doc_sigs.numbers; 0: none, or unknown) */
	uint64_t numbers;
	/** 0, or a class number: all files of one class are exact copies of
	 *  each other, as if every pair of them were linked with similarity 1
	 *  (a class of m copies costs m here, m^2/2 as links). */
	uint32_t exact_class;
};

/** One link between files[a] and files[b]. Links may repeat; a pair linked
 *  twice counts as exact if either link is, with the larger similarity. */
struct im_plan_link {
	uint32_t a, b;	  /**< indices into the files; a != b */
	float similarity; /**< in [0, 1]; 1 for an exact copy */
	bool exact;	  /**< identical bytes */
};

struct im_plan_opts {
	struct im_keep keep;
	bool near;		    /**< plan near-duplicates, not only exact */
	const char *const *protect; /**< relative directories (see above) */
	size_t nprotect;
};

/** One planned file: files[file] may go; files[keeper] stays in its place. */
struct im_plan_entry {
	uint32_t file, keeper;
	float similarity;
	bool exact;
};

/** A plan. The caller owns it: im_plan_init() before, im_plan_release()
 *  after. */
struct im_plan {
	/** Sorted by the keeper's rank, then the file's rank, so each keeper's
	 *  files are adjacent and the best kept group comes first. */
	struct im_plan_entry *v;
	size_t n;
	size_t keepers;	       /**< distinct keepers among the entries */
	size_t same_inode;     /**< hard links of their keeper, left out */
	size_t protected_kept; /**< protected files that were linked to a
				    better-ranked unplanned file */
	uint64_t bytes;	       /**< sum of the planned files' sizes */
	uint64_t exact_bytes;  /**< the same, exact entries only */
	size_t exact;	       /**< entries that are exact copies */
	/** Near-duplicates kept because their figures differ from those of
	 *  the keeper that would have taken them (file: the one kept; keeper:
	 *  the first such keeper), in the order of v. */
	struct im_plan_entry *kept;
	size_t nkept;
};

void im_plan_init(struct im_plan *p);
/** Free the entries and kept; @p p is empty afterwards and may be
 *  reused. */
void im_plan_release(struct im_plan *p);

/**
 * Plan the files: see the rule at the top.
 *
 * @return 0, -EINVAL if a link names a file out of range or links a file
 *         to itself, or -ENOMEM; on error @p out is empty.
 */
int im_plan_build(const struct im_plan_file *files, size_t nfiles,
		  const struct im_plan_link *links, size_t nlinks,
		  const struct im_plan_opts *o, struct im_plan *out);

/**
 * The links of files[@p k], asked for by im_plan_build_lazy() when @p k
 * becomes a keeper. Set *@p links to *@p n links, each with @p k at one end
 * (exact or not; links that are not exact are ignored unless near-duplicates
 * are planned); the callee owns them, and they need stay valid only until
 * the next call.
 *
 * @return 0, or a negative errno that stops the plan with that error.
 */
typedef int (*im_plan_links_cb)(uint32_t k, const struct im_plan_link **links,
				size_t *n, void *arg);

/**
 * im_plan_build() with each file's links asked for only when it becomes a
 * keeper, at most once per file: a planned file's own links decide
 * nothing, so a driver for which finding links is the cost (the index
 * verifies each candidate against sketches again) finds only the keepers'
 * (a cluster of n near-duplicates: those of one file instead of n). Gives
 * im_plan_build()'s plan over the links reported, provided they are
 * symmetric (a file linked to @p k reports @p k when asked).
 *
 * @return 0, -EINVAL if a link lacks @p k at one end, names a file out of
 *         range or links @p k to itself, @p links_of's error, or -ENOMEM;
 *         on error @p out is empty.
 */
int im_plan_build_lazy(const struct im_plan_file *files, size_t nfiles,
		       im_plan_links_cb links_of, void *arg,
		       const struct im_plan_opts *o, struct im_plan *out);

/* ---- From the index --------------------------------------------------------
 * The driver used by `imatch dedupe` and the daemon: the files are the members
 * of the index's clusters, the links and their similarity and kind are
 * im_index_links().
 */

/** The files of every cluster and the plan over them. Owned by the caller:
 *  zero it (or im_plan_set_release() it) before, release it after. */
struct im_plan_set {
	struct im_plan_file *files; /**< paths owned by the set */
	uint8_t (*hash)[16];	    /**< each file's content hash */
	bool *hash_valid;	    /**< hash[i] holds one (else 0s) */
	struct im_sig *cluster;	    /**< the cluster each file is in */
	size_t nfiles;
	struct im_plan plan; /**< indices refer to files[] */
};

/**
 * Fill @p f->size, mtime_ns, dev and ino of the document @p path (f->path is
 * set already). Never called while the index is locked, so it may take the
 * caller's own locks.
 *
 * @return 0; > 0 to leave the document out (it vanished, or the user
 *         excluded it: it is then neither planned nor a keeper); < 0 to
 *         stop with that error.
 */
typedef int (*im_plan_meta_cb)(const char *path, struct im_plan_file *f,
			       void *arg);

/**
 * Plan over the clusters of @p idx. The index may change meanwhile (the
 * daemon): the plan then reflects some mix of the two states, never a link
 * the index did not hold, and a caller that needs one state compares
 * im_index_generation() before and after.
 *
 * @return 0, -ENOMEM, or meta's negative value; on error @p out is empty.
 */
int im_plan_from_index(const struct im_index *idx, const struct im_plan_opts *o,
		       im_plan_meta_cb meta, void *arg,
		       struct im_plan_set *out);

/** Free everything @p s holds; it is zeroed. */
void im_plan_set_release(struct im_plan_set *s);

#endif
