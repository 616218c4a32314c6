/**
 * @file model.h
 * The documents: the tree (tree.h) and the cluster index (core/index/index.h)
 * kept in step, counted for `status`, and pushed to the kernel's caches
 * (inval.h) at every change. Every change to the view goes through here.
 *
 * Consistency: a file node's status says what the index holds for its path:
 * SIGNED or REJECTED nodes are in the index, others are not. An allocation
 * failure never breaks this: the document is then shown as an error (and
 * re-signed when it changes) rather than half-updated.
 *
 * Invalidation: the kernel may cache what belongs to a node only after the
 * node was marked NODE_KNOWN (view.c does, before replying), and a cluster
 * only while ctab holds it; so changes nobody looked at cost no
 * notification, which keeps the first scan cheap. What depends on a whole
 * cluster (its members' by-doc/.../keeper and cluster links, their by-doc
 * listings, their names in redundant/: the removal plan and the cluster's
 * name are made per cluster) is dropped for every member of the changed
 * document's cluster and of the clusters sharing its name group, before and
 * after the change; dup-dirs/ is dropped whole at every change.
 *
 * Locking: every function needs the tree lock held exclusively (tree_wrlock),
 * except model_new/model_free and the read-only model_unchanged*(). The
 * fields marked so are protected by the tree lock; readers (view.c) read
 * them under the shared lock.
 */
#ifndef IMFS_MODEL_H
#define IMFS_MODEL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "exact.h"
#include "fullsigs.h"
#include "index.h"
#include "inval.h"
#include "sig.h"
#include "tree.h"

/** Files per status: enum im_doc_status, then files not signed yet. */
#define COUNT_UNKNOWN IM_DOC_STATUS_COUNT
#define COUNT_SLOTS   (IM_DOC_STATUS_COUNT + 1)

/** What the model asks of the other modules. Called under the tree lock. */
struct model_hooks {
	/** Directory @p dir leaves the tree: stop watching it. */
	void (*dir_gone)(void *arg, struct node *dir);
	/** @p file must be signed again (its index entry could not follow a
	 *  rename for lack of memory). */
	void (*resign)(void *arg, struct node *file);
	void *arg;
};

struct hlink;

struct model {
	struct tree *tree;
	struct im_index *idx;  /* signatures cut to prefixes */
	struct fullsigs *full; /* the whole ones; tree lock */
	struct inval *inval;   /* may be NULL: no kernel to tell */
	struct model_hooks hooks;
	uint64_t count[COUNT_SLOTS]; /* tree lock */
	/* Texts holding a term, signed or not: what a lexicon built now would
	 * count (im_lexicon_docs()). Written under the tree lock; read
	 * without it, atomically. */
	uint64_t with_terms;
	/* Files read, per enum im_format; failures per enum im_extract_fail.
	 * tree lock */
	uint64_t by_format[IM_FMT_COUNT], by_fail[IM_XF_COUNT];
	uint64_t dirs; /* tree lock */
	/* Bumped when a file's size, mtime or source inode changes: the
	 * removal plan's keep rules read them from the nodes, and the index,
	 * which does not keep them, does not move its generation for them
	 * (redundant.c). tree lock */
	uint64_t meta_gen;
	uint16_t scan_gen; /* tree lock; node.seen */
	bool dirty;	   /* changed since saved; tree lock */
	/* The saved cache (fullsigs_saved()) may hold results of a lexicon
	 * that is being or was replaced: from the start of a scan that signs
	 * every file anew (model_expect_reads()) until a cache is adopted,
	 * which a save refuses while the view mixes lexicons (scanner_save()).
	 * tree lock */
	bool saved_stale;
	/* A walk of the whole tree ended since the start. Until then the
	 * tree lacks what the walk had not reached, and a save keeps the
	 * cache's entries of those files (stateio.c). tree lock */
	bool walked;
	/* When the view last changed (ns, strictly increasing): the mtime of
	 * every directory of the view, so that the kernel drops a cached
	 * listing filled by a readdir that raced a change. tree lock */
	int64_t clock_ns;
	/* atomic: the kernel listed clusters/ or looked a cluster up */
	int clusters_known;
	/* atomic: the kernel listed redundant/ or looked a name up there */
	int redundant_known;
	/* atomic: the kernel holds something of dup-dirs/ (a group follows
	 * any change of the tree or the index, so every change drops all of
	 * it and clears this) */
	int dupdirs_known;
	struct hlink **links; /* hard links by source inode; tree lock */
	size_t links_size;
	/* The exact tier's sizes (exact.h): a binary file only sniffed is
	 * hashed when a second file of its size turns up. tree lock */
	struct im_sizes *sizes;
	/* Changes waiting for the index while held (model_hold_index()), in
	 * their order, and how deep the holds are. tree lock */
	struct model_op *ops;
	size_t nops, ops_cap;
	unsigned holds;
};

/* A change held for the index: a put of *d at path, or with d NULL its
 * removal. */
struct model_op {
	char *path;
	struct im_doc_sigs *d;
};

/* ---- Life cycle (no lock) ---------------------------------------------------- */

/**
 * A model of an empty tree owned by @p uid:@p gid, linking near-duplicates
 * at @p similarity (im_params.similarity). The caller frees it with
 * model_free(), which frees the tree and the index.
 * @return 0, -ENOMEM or -EINVAL (a similarity out of (0, 1]).
 */
int model_new(uid_t uid, gid_t gid, double similarity, struct inval *iv,
	      struct model **out);
void model_free(struct model *m);

/* ---- Queries --------------------------------------------------------------------- */

/** Whether @p n is shown as a document (signed or rejected). */
static inline bool node_is_doc(const struct node *n)
{
	return n->status == IM_DOC_SIGNED || n->status == IM_DOC_REJECTED;
}

/** Whether @p n is in the index: documents, and binary files and failed
 *  extractions, which relate to their byte-identical copies only (the
 *  exact-copy tier: in clusters/, without a by-doc entry of their own). */
static inline bool node_in_index(const struct node *n)
{
	return node_is_doc(n) || n->status == IM_DOC_BINARY ||
	       n->status == IM_DOC_FAILED;
}

/**
 * Whether file @p n is known as @p st shows it (same size, mtime, source
 * inode and ctime, and signed without error): then it need not be read
 * again. The check of a scan, which knows nothing of what happened since
 * (a write inotify dropped, an unwatched directory): a file rewritten in
 * place with its size kept and its old mtime put back shows only in its
 * ctime. The ctime is the one of the last read (model_apply()); nothing
 * else moves it. Any lock mode.
 */
bool model_unchanged(const struct node *n, const struct stat *st);
/**
 * model_unchanged() but for the ctime: for the watcher, which is told of
 * every write (IN_MODIFY, IN_CLOSE_WRITE) and looks at a file on other
 * events, where a rename, chmod or touch has moved the ctime and must not
 * cost a read. A write it was not told of (a queue overflow) is found by
 * the rescan that follows, against the ctime of the last read, which this
 * leaves as it was. Any lock mode.
 */
bool model_unchanged_watched(const struct node *n, const struct stat *st);
/** Whether @p st's permission bits, owner or group differ from what @p n
 *  shows (a chmod or chown since). Tree lock held. */
bool model_attr_changed(struct model *m, const struct node *n,
			const struct stat *st);

/** Say that the kernel may now cache what @p flag (one of the model's
 *  *_known fields) stands for. Any lock mode, before replying. */
static inline void model_mark_known(int *flag)
{
	if (!__atomic_load_n(flag, __ATOMIC_RELAXED))
		__atomic_store_n(flag, 1, __ATOMIC_RELAXED);
}

/** The kernel may cache clusters/ or a cluster. Any lock mode. */
static inline void model_mark_clusters_known(struct model *m)
{
	model_mark_known(&m->clusters_known);
}

/**
 * What the index holds for document @p path, with whole signatures (the
 * index keeps IM_KEY_COORD_LEN-byte prefixes: fullsigs.h). Tree lock held,
 * any mode.
 * @return 0, or -ENOENT if the index or the whole signatures lack it.
 */
int model_full_sigs(const struct model *m, const char *path,
		    struct im_doc_sigs *d);

/**
 * A text of the index whose bytes hash to @p exact, with whole signatures
 * (im_index_copy_of(), fullsigs.h): what signing an exact copy of it with
 * the lexicon of its record would give, but for size and mtime, and for
 * a file an external filter read (its text depends on its name: the
 * signer refuses those, im_signer_set_lender()). Not a file the running or
 * last scan asked for and has no result of (node.scan_reads): its record
 * may be of the lexicon before. Tree lock held, any mode.
 * @return 0, -ENOENT (none, or its whole signatures are not known) or
 *         -ENOMEM.
 */
int model_copy_of(const struct model *m, const uint8_t exact[16],
		  struct im_doc_sigs *d);

/**
 * The entry of @p cache that describes the file found as @p st at @p path,
 * into *@p e: the path's, or, for a file whose directory was renamed or
 * moved (while the daemon was away, or out of the source and back), the
 * one of its inode under the same name (the result of reading it is the
 * same; its signatures become fresh ones, fullsigs.h). Only an entry that
 * describes the file as it is now (im_state_entry_fits(): size, mtime,
 * inode and ctime), agrees with @p max_size and is not an error is
 * given. Pure; any thread that holds @p cache.
 * @return true with *@p e filled, else false.
 */
bool model_cache_find(const struct im_state *cache, const char *path,
		      const struct stat *st, uint64_t max_size,
		      struct im_state_entry *e);

/**
 * model_cache_find() of the saved cache (fullsigs_saved()), if it holds a
 * result of the lexicon in use (none while model.saved_stale; of a partial
 * cache, the lexicon-free ones only): as the scanner's check of its cache
 * on a restart. The caller still asks whether the file may be read (its
 * mode is not in the cache). Tree lock held, any mode.
 * @return true with *@p e filled, else false.
 */
bool model_saved_entry(const struct model *m, const char *path,
		       const struct stat *st, uint64_t max_size,
		       struct im_state_entry *e);

/* ---- Changes (tree lock held exclusively) ----------------------------------------- */

/**
 * The node at @p path, created with missing directories if absent; @p dir
 * says what a created final component is. A node of the other kind there is
 * replaced. @return NULL on ENOMEM or when a component is a file where a
 * directory is needed (the caller then rescans).
 */
struct node *model_ensure(struct model *m, const char *path, bool dir);
/** Take mode and owner (and for directories mtime and inode) from @p st. */
void model_set_stat(struct model *m, struct node *n, const struct stat *st);
/** Record the result @p d of signing file @p n at @p path, read as @p st. */
void model_apply(struct model *m, struct node *n, const char *path,
		 const struct stat *st, const struct im_doc_sigs *d);
/** @p n was just signed as @p d: give the same result to the other names
 *  of the same file (hard links: a write raises one event, in one place). */
void model_apply_links(struct model *m, struct node *n, const struct stat *st,
		       const struct im_doc_sigs *d);
/** Remove @p n (not the root) and everything under it. */
void model_remove(struct model *m, struct node *n);
/**
 * Move @p n under @p dir as @p name, replacing what was there; the
 * documents below keep their signatures. @return 0, -EINVAL (the root, or
 * @p dir under @p n) or -ENOMEM (then nothing changed).
 */
int model_move(struct model *m, struct node *n, struct node *dir,
	       const char *name);
/** The state cache @p saved was just loaded or written: it holds the whole
 *  signatures from now on (takes ownership; fullsigs_adopt(), @p marked by
 *  model_mark_cache()). @return the previous one, which the caller frees
 *  after the tree lock. */
struct im_state *model_adopt_cache(struct model *m, struct im_state *saved,
				   bool marked);
/** fullsigs_mark(): tree lock shared, taken with tree_rdlock_long(). */
void model_mark_cache(struct model *m, const struct im_state *saved);
/**
 * Remove every node not seen by scan generation @p gen, and call @p unread
 * with each file the scan asked for but got no result for (scan_reads still
 * set: moved with its directory before its result came, the result then
 * dropped for a path that was gone). Its record is older than the scan,
 * maybe of another lexicon: the caller has it read again.
 */
void model_sweep(struct model *m, uint16_t gen,
		 void (*unread)(struct node *n, void *arg), void *arg);
/** Call @p unread with each file whose scan_reads is set, removing nothing:
 *  after a scan that did not finish, whose walk saw only part of the tree. */
void model_unread(struct model *m, void (*unread)(struct node *n, void *arg),
		  void *arg);
/**
 * Set scan_reads on every file whose record depends on the lexicon (a text,
 * or an error): a scan that signs every file anew is about to start, and
 * any of them it gives no result for (a directory renamed before the walk
 * reached it or its new name, the scan failing) keeps a record of the
 * lexicon before, to be read again (model_sweep(), model_unread()). The
 * saved cache is not taken from (model_saved_entry()) until the next one
 * is adopted.
 */
void model_expect_reads(struct model *m);
/**
 * Let the index changes from now on (documents put and removed) wait for
 * the matching model_release_index() (holds nest), which applies them in
 * their order, each run of removals and each run of puts as one batch
 * (im_index_remove_many(), im_index_put_many()). A cluster that loses or
 * replaces many members then reconnects once, not once per member: an rm
 * of n near-duplicates in name order, or their signing again with a new
 * lexicon, would otherwise cost the daemon O(n^2) sketch comparisons.
 * Meanwhile the nodes say what the index does not yet; a rename applies
 * what waits first. Hold and release within one hold of the tree lock,
 * exclusively. A put that fails for lack of memory at the release makes
 * its node an error, as it would have at once.
 */
void model_hold_index(struct model *m);
void model_release_index(struct model *m);

#endif
