/**
 * @file index.h
 * The cluster index: documents, their signatures, near-duplicates and
 * clusters, updated one document at a time (DESIGN §2).
 *
 * Relation (DESIGN §2, §3.6): two documents are linked when
 *   - exact: their bytes hash the same (im_doc_sigs.exact, 128 bits), or
 *   - near: they share a candidate key (the first IM_KEY_COORD_LEN bytes of
 *     the signature of the same coordinate, or one band of their sketches, see
 *     im_doc_keys()), they were compared under that key (im_group_pair():
 *     a key held by more than IM_INDEX_HOT_CAP documents compares each with
 *     the first IM_INDEX_HOT_CAP of them in path order only), and the
 *     sketches estimate the cosine of their term sets at or above the
 *     index's similarity threshold (im_doc_link()).
 * The relation is symmetric. It is exactly the union, over all keys, of
 * im_group_links() on the key's holders ordered by path, so a scaled-out
 * index (SCALE.md) that runs the pure functions below finds the same links.
 * A cluster is a connected component of the links with two or more members;
 * every document is in at most one.
 * A cluster's name is the smallest signature (memcmp order) held by any
 * member; a cluster none of whose members has a signature (exact copies of
 * unsignable files, short documents) is named by the smallest exact hash
 * followed by four zero bytes (or, for a member with neither, the XXH3-128 of
 * its sketch). Clusters can share that name (verification keeps apart two
 * documents with equal coordinates, each linked elsewhere): in the order of
 * their smallest member path, the k-th of them adds k to the name's last
 * four bytes (big-endian), so that names stay unique and deterministic.
 * A change to one of them can rename the others: all names of one group
 * share their first IM_NAME_GROUP_LEN bytes.
 *
 * Cost: put/remove touch the postings of the document's own keys (at most
 * IM_MAX_KEYS; a key's holders are an array, so a document comes or goes
 * by moving up to one 4-byte id per holder) and verify the document against
 * the holders compared with it (a sketch comparison is some 100 to 200 ns).
 * Adding merges components (the smaller is relabelled into the larger), and
 * a copy joins the holders of its exact key at the first of them; when that
 * one has its status and keys and none of them is hot, the copy verifies
 * nothing else (whatever it would link to is in that component). Removing
 * or changing a document, or pushing one out of a hot key's first
 * IM_INDEX_HOT_CAP, loses links: searches from their ends, over the
 * component, stop as soon as they have all met, so the cost is that of the
 * links lost, not of the component, unless it splits (then the smaller
 * sides are relabelled) or the member whose signature names it leaves (then
 * the members are walked for the next name). A document that another
 * member can stand in for (a copy, or a text with the same near keys and
 * sketch: the same terms) leaves in O(IM_MAX_KEYS) postings steps. The
 * floor is the links that change: a document among a hot key's first
 * IM_INDEX_HOT_CAP is compared with all the key's holders, so its removal
 * (and the next one moving into those first) changes that many links, and
 * each holder it was linked to is verified again once. So n copies of one
 * file, or n files of the same terms, cost O(n) to add and to remove; n
 * near-duplicates of distinct terms removed one by one cost O(n) in a
 * random order (about IM_INDEX_HOT_CAP holders per key each, the few among
 * the first IM_INDEX_HOT_CAP n each), but O(n^2) sketch comparisons in path
 * order, each being among the first; im_index_remove_many() makes that
 * O(n) per batch (a mount removes what one read of inotify events names
 * as one batch: 20,000 of them rm'd in name order cost its daemon 44.6 s
 * of CPU one by one, 0.29 s so; tools/bench/neardup_remove.sh). No
 * operation walks the whole collection except the explicit iterations
 * below.
 *
 * Documents are keyed by path (any NUL-terminated bytes; the index copies
 * them). Documents whose status is neither SIGNED nor REJECTED are kept (so
 * that counts and lookups work) but relate to nothing.
 *
 * Memory: the record holds the sketch (132 bytes), the exact hash (16),
 * 9 bytes of fields (the member entry, status, ncoords, format, where the
 * smallest signature is, what the tail holds), the valid signatures (20
 * bytes each, or their IM_KEY_COORD_LEN-byte prefixes after
 * im_index_set_prefixes(), then the rest of the smallest, the cluster
 * name), which coordinates are valid only when not all of them are,
 * unique_terms and err only when they are not the sketch's n and 0, size
 * and mtime unless im_index_set_stat() said no, the figures
 * (im_doc_sigs.numbers, 8 bytes) unless there are none, and the path, in a
 * pool (pool.h: 8-byte steps, no malloc header; the document table holds
 * 4-byte handles to it). The postings hold 4-byte slots, one per key (a
 * 5-bit tag and a reference); a key shared by two documents keeps both in
 * an 8-byte entry, three or more in a pool record. Only the members of
 * clusters have a 16-byte entry for the cluster's list and name (mapped:
 * room for every document, pages for those in use). With prefixes, K = 10
 * and every coordinate signed that is about 357 bytes per document plus
 * its path (349 before the figures), mapped tables included, when a fifth
 * of the documents are in pairs (tests/unit/test_index.c,
 * test_index_memory_per_document).
 *
 * Thread-safety: all functions are safe to call from any number of threads.
 * Writers (put, remove, rename) take an internal write lock; queries take it
 * shared. The lock prefers writers, so that a stream of lookups cannot starve
 * updates; in exchange it is not recursive. Query callbacks run under the
 * shared lock: they must not call ANY function of the same index (a nested
 * read lock deadlocks as soon as a writer waits), and should be quick. The
 * paths and names handed to callbacks are borrowed: valid during the call.
 */
#ifndef IM_INDEX_H
#define IM_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sig.h"
#include "sketch.h"

/** Clusters sharing a name differ in the bytes after these (see above). */
#define IM_NAME_GROUP_LEN (IM_SIG_LEN - 4)

struct im_index;

/* ---- Life cycle ---------------------------------------------------------- */

/**
 * A new index verifying near links at the default similarity threshold
 * (im_params_init()). @return 0 or -ENOMEM. Caller frees with
 * im_index_free().
 */
int im_index_new(struct im_index **out);
void im_index_free(struct im_index *idx);

/**
 * Set the similarity threshold (im_params.similarity) of an empty index.
 * @return 0, -EINVAL unless 0 < @p threshold <= 1, or -EBUSY once a document
 *         was put (links already verified would disagree).
 */
int im_index_set_similarity(struct im_index *idx, double threshold);

/**
 * Keep only the first IM_KEY_COORD_LEN bytes of each signature (the
 * candidate key) and the smallest whole one (the cluster name), to save
 * IM_SIG_LEN - IM_KEY_COORD_LEN bytes per coordinate:
 * im_index_get() and im_index_foreach_doc() then give each signature's
 * prefix followed by zeros, so a caller that shows or saves signatures keeps
 * them itself (the state cache holds them whole). Links and clusters are the
 * same either way.
 *
 * @return 0 or -EBUSY once a document was put.
 */
int im_index_set_prefixes(struct im_index *idx, bool prefixes);

/**
 * Whether to keep each document's size and mtime_ns (the default). A caller
 * that keeps them itself (the daemon's tree) saves 16 bytes per document:
 * im_index_get() and im_index_foreach_doc() then give 0 for both, and a put
 * that changes only them changes nothing (the generation stays: what the
 * caller derives from them, such as a keep rule by date, must follow them
 * by its own means).
 *
 * @return 0 or -EBUSY once a document was put.
 */
int im_index_set_stat(struct im_index *idx, bool keep);

/**
 * Expect about @p docs documents in all (a bulk load that knows its count,
 * such as the CLI's first scan): each table is sized for that many the
 * first time it grows, instead of growing a quarter at a time, each step
 * reading the record of every entry it holds again (at 2.7k documents, a
 * tenth of the time of their puts). Tables that no document uses stay
 * empty; one that fewer documents use than expected (a coordinate that
 * few of them sign) keeps room for @p docs, some 4.4 bytes each.
 * Nothing else changes. May be called at any time; 0 restores the
 * step-by-step growth.
 */
void im_index_expect(struct im_index *idx, size_t docs);

/* ---- Updates ------------------------------------------------------------- */

/**
 * Add document @p path, or replace what the index held for it. Copies @p path
 * and @p d. Only the valid signatures of coordinates below d->ncoords are
 * kept; sig[] entries without their valid bit are ignored (im_index_get()
 * gives them back as zeros). Putting what the index already holds changes
 * nothing (the generation stays).
 *
 * @return 0, -EINVAL if d->ncoords > IM_MAX_COORDS, or -ENOMEM (also past
 *         2^26 documents or 16 GiB of records); on error the index is
 *         unchanged.
 */
int im_index_put(struct im_index *idx, const char *path,
		 const struct im_doc_sigs *d);

/**
 * Remove a document. Never allocates, so it cannot fail for lack of memory.
 *
 * @return 0, or -ENOENT if it is not there.
 */
int im_index_remove(struct im_index *idx, const char *path);

/**
 * Remove the documents at @p paths (those not indexed, and repeats, are
 * skipped), leaving what im_index_remove() of each in turn would leave.
 * Each cluster that loses members is reconnected once per batch of up to
 * 512 paths, not once per member: n near-duplicates sharing keys, removed
 * in path order (each among the first IM_INDEX_HOT_CAP holders of its keys,
 * so each compared with all the others), cost O(n) sketch comparisons per
 * batch where one by one they cost O(n) each. The write lock is taken per
 * batch. Allocates 2.6 kB per path of a batch, and falls back to removing
 * one by one without it, so it cannot fail.
 *
 * @return how many documents were removed.
 */
size_t im_index_remove_many(struct im_index *idx, const char *const *paths,
			    size_t n);

/**
 * im_index_put() of each of @p docs[i] at @p paths[i] in turn, its result in
 * @p rets[i] (0, -EINVAL or -ENOMEM: a put that fails changes nothing, the
 * others go on). Records that the puts replace leave as one batch per
 * 512 puts (im_index_remove_many()): every document of a cluster of n
 * signed again (a new lexicon) costs O(n) per batch, where one by one in
 * path order each old record was among the first IM_INDEX_HOT_CAP of its
 * keys and cost O(n). The write lock is taken per batch.
 */
void im_index_put_many(struct im_index *idx, const char *const *paths,
		       const struct im_doc_sigs *const *docs, size_t n,
		       int *rets);

/**
 * Rename a document, keeping its signatures (a file renamed in the source).
 * Replaces a document already at @p to. Renaming a path to itself does
 * nothing and returns 0. The path orders the holders of a key, so the
 * document's links are verified again.
 *
 * @return 0, -ENOENT if @p from is not there, or -ENOMEM (unchanged).
 */
int im_index_rename(struct im_index *idx, const char *from, const char *to);

/* ---- Queries ------------------------------------------------------------- */

/** Called once per path; return non-zero to stop the iteration. */
typedef int (*im_index_path_cb)(const char *path, void *arg);
/** Called once per cluster; return non-zero to stop the iteration. */
typedef int (*im_index_cluster_cb)(const struct im_sig *name, size_t size,
				   void *arg);

/** Documents held (of any status). */
size_t im_index_size(const struct im_index *idx);
/** Clusters (components of two or more documents). */
size_t im_index_cluster_count(const struct im_index *idx);
/** A counter bumped by every change that alters any query's answer. */
uint64_t im_index_generation(const struct im_index *idx);

/** Copy what was put for @p path into *out (signatures cut to prefixes
 *  after im_index_set_prefixes()). @return 0 or -ENOENT. */
int im_index_get(const struct im_index *idx, const char *path,
		 struct im_doc_sigs *out);

/**
 * A text whose bytes hash to @p exact (im_doc_sigs.exact): what was put for
 * a holder of that exact key whose status is IM_DOC_SIGNED or
 * IM_DOC_REJECTED, as im_index_get() gives it, and its path in *path
 * (malloc'd, the caller frees). Of the first few holders in path order, the
 * first such text after @p skip others: a caller that cannot use one asks
 * again with skip + 1. An exact copy of
 * it read with the lexicon and parameters that made the record gets the
 * same result but for size and mtime, unless an external filter made its
 * text from its name (format IM_FMT_FILTER): a daemon lends it instead of
 * extracting the copy (im_signer_set_lender()), when it knows the record
 * is of the lexicon it signs with (fs/model.h, model_copy_of()).
 *
 * @return 0, -ENOENT (no such text; *path NULL) or -ENOMEM.
 */
int im_index_copy_of(const struct im_index *idx, const uint8_t exact[16],
		     unsigned skip, char **path, struct im_doc_sigs *out);

/** One verified link of a document, handed to im_index_link_cb. */
struct im_link {
	const char *path;  /**< the other document (borrowed) */
	double similarity; /**< the sketch's cosine estimate; 1 when exact */
	bool exact;	   /**< identical bytes (128-bit hash) */
};

/** Called once per link; return non-zero to stop the iteration. */
typedef int (*im_index_link_cb)(const struct im_link *l, void *arg);

/**
 * Call @p cb for each document linked to @p path (itself excluded, each once,
 * in no particular order): its near-duplicates with their similarity and
 * kind. Symmetric: b is reported for a exactly when a is for b.
 *
 * @return 0, -ENOENT if @p path is not indexed, or cb's non-zero value.
 */
int im_index_links(const struct im_index *idx, const char *path,
		   im_index_link_cb cb, void *arg);

/**
 * im_index_links() without @p path's exact copies: its near links only. The
 * copies of one text form a class (the same im_doc_sigs.exact) that the
 * removal plan takes whole (core/plan): a class of m copies then costs m, not
 * m^2/2 (im_index_links() lists m - 1 copies for each of them).
 */
int im_index_links_near(const struct im_index *idx, const char *path,
			im_index_link_cb cb, void *arg);

/** im_index_links() with the paths only. */
int im_index_dupes(const struct im_index *idx, const char *path,
		   im_index_path_cb cb, void *arg);

/**
 * Whether a near key of @p path is held by more than IM_INDEX_HOT_CAP
 * documents. A change of such a document can change the links between
 * others (one pushed out of the first IM_INDEX_HOT_CAP of the key, or let
 * in), not only its own: a caller that follows changes link by link (the
 * daemon's cache invalidation) must then assume that anything changed.
 *
 * @return 1, 0, or -ENOENT if @p path is not indexed.
 */
int im_index_hot(const struct im_index *idx, const char *path);

/**
 * The name of the cluster holding @p path. @return 0, -ENOENT if @p path is
 * not indexed, or -ESRCH if it is in no cluster (it has no near-duplicate).
 */
int im_index_cluster_of(const struct im_index *idx, const char *path,
			struct im_sig *name);

/**
 * Call @p cb for each member of the cluster named @p name.
 * @return 0, -ENOENT if there is no such cluster, or cb's non-zero value.
 */
int im_index_cluster_members(const struct im_index *idx,
			     const struct im_sig *name, im_index_path_cb cb,
			     void *arg);

/** Call @p cb for each cluster. @return 0 or cb's non-zero value. */
int im_index_foreach_cluster(const struct im_index *idx, im_index_cluster_cb cb,
			     void *arg);

/**
 * Call @p cb for each document, with everything put for it (signatures,
 * sketch, exact hash, size, mtime). The index is read-locked throughout.
 * @return 0 or cb's non-zero value.
 */
int im_index_foreach_doc(const struct im_index *idx,
			 int (*cb)(const char *path,
				   const struct im_doc_sigs *d, void *arg),
			 void *arg);

/* ---- Candidates and verification, pure (SCALE.md) ------------------------
 *
 * The functions the live index itself applies, without an index: a
 * scaled-out index that groups documents by candidate key, orders each group
 * by path and calls im_group_links() finds exactly the links of the live
 * index. All are pure, reentrant and never allocate.
 */

/** A key held by more documents than this compares each only with the first
 *  IM_INDEX_HOT_CAP in path order (and those with all). */
#define IM_INDEX_HOT_CAP 64

enum im_key_kind {
	IM_KEY_EXACT, /**< the 128-bit hash of the bytes (16 bytes) */
	IM_KEY_COORD, /**< coordinate k's signature, first IM_KEY_COORD_LEN */
	IM_KEY_BAND,  /**< band k of the sketch, IM_SKETCH_BAND_BYTES bytes */
};

/**
 * Bytes of a signature that make its coordinate key. Two documents whose
 * signatures differ but agree on these (by chance: 1 in 2^32 per pair and
 * coordinate, some ten pairs among 100k documents at K = 10) are compared,
 * and their sketches decide as for any candidate; by the hot-key rule they
 * also take one place in each other's group. Every user of the relation
 * (the CLI, the daemon, the stages) takes its keys from im_doc_keys(), so
 * they all compare the same pairs.
 */
#define IM_KEY_COORD_LEN 4

/** Most keys one document has. */
#define IM_MAX_KEYS (1 + IM_MAX_COORDS + IM_SKETCH_BANDS)

/** A candidate key: documents with equal (kind, k, b[0..len)) are compared. */
struct im_cand_key {
	uint8_t kind; /**< enum im_key_kind */
	uint8_t k;    /**< coordinate or band; 0 for exact */
	uint8_t len;  /**< bytes used in b */
	uint8_t b[16];
};

/**
 * The candidate keys of @p d into @p out (room for IM_MAX_KEYS), in a fixed
 * order: exact, coordinates ascending, bands ascending. Binary files and
 * failed extractions have only the exact key (when exact_valid); files that
 * could not be read or were too big have none.
 *
 * @return the number of keys.
 */
unsigned im_doc_keys(const struct im_doc_sigs *d, struct im_cand_key *out);

/** Are the members at ranks @p i and @p j (in path order) of a near key's
 *  holders compared? Exact keys compare every pair. */
static inline bool im_group_pair(size_t i, size_t j)
{
	return i < IM_INDEX_HOT_CAP || j < IM_INDEX_HOT_CAP;
}

/**
 * Verify one compared pair: exact when both hold the same exact hash
 * (similarity 1, whatever their status: binary files and failed
 * extractions are in the exact-copy tier), else near when both are texts
 * (signed or rejected) and the sketches' cosine estimate is at least
 * @p threshold. Symmetric in @p a and @p b.
 *
 * @return whether they are linked; *similarity and *exact are set either way.
 */
bool im_doc_link(const struct im_doc_sigs *a, const struct im_doc_sigs *b,
		 double threshold, double *similarity, bool *exact);

/** Called by im_group_links() per link, i < j; non-zero stops. */
typedef int (*im_group_link_cb)(size_t i, size_t j, double similarity,
				bool exact, void *arg);

/**
 * The links among the @p n holders @p m of one key of kind @p kind, which the
 * caller orders by path (byte order): every pair im_group_pair() compares
 * (every pair for IM_KEY_EXACT) that im_doc_link() accepts, i ascending,
 * then j.
 *
 * @return 0 or cb's non-zero value.
 */
int im_group_links(unsigned kind, const struct im_doc_sigs *const *m, size_t n,
		   double threshold, im_group_link_cb cb, void *arg);

#endif
