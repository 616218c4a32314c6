/**
 * @file index.h
 * The cluster index: documents, their signatures, near-duplicates and
 * clusters, updated one document at a time (DESIGN §2).
 *
 * Relation: two documents are near-duplicates when they hold the same
 * signature in the same coordinate (the coordinate is hashed into the
 * signature, so equal signatures are equal coordinates) or when their bytes
 * hash the same (im_doc_sigs.exact). A cluster is a connected component of
 * that relation with two or more members; every document is in at most one.
 * A cluster's name is the smallest signature (memcmp order) held by any
 * member; a cluster none of whose members has a signature (exact copies of
 * unsignable files) is named by the smallest exact hash followed by four zero
 * bytes.
 *
 * Cost: put/remove touch the postings of the document's own K+2 keys. Adding
 * merges components (the smaller is relabelled into the larger); removing or
 * changing a document recomputes only its former component by a walk over
 * that component's postings. No operation walks the whole collection except
 * the explicit iterations below.
 *
 * Documents are keyed by path (any NUL-terminated bytes; the index copies
 * them). Documents whose status is neither SIGNED nor REJECTED are kept (so
 * that counts and lookups work) but relate to nothing.
 *
 * Memory: about 340 bytes of heap per document plus its path at K = 10
 * (measured over 100k synthetic documents). Signatures are stored once, in the
 * document; the postings hold 8-byte references.
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

#include <stddef.h>
#include <stdint.h>

#include "sig.h"

struct im_index;

/* ---- Life cycle ---------------------------------------------------------- */

/** @return 0 or -ENOMEM. Caller frees with im_index_free(). */
int im_index_new(struct im_index **out);
void im_index_free(struct im_index *idx);

/* ---- Updates ------------------------------------------------------------- */

/**
 * Add document @p path, or replace what the index held for it. Copies @p path
 * and @p d. Only the valid signatures of coordinates below d->ncoords are
 * kept; sig[] entries without their valid bit are ignored (im_index_get()
 * gives them back as zeros). Putting what the index already holds changes
 * nothing (the generation stays).
 *
 * @return 0, -EINVAL if d->ncoords > IM_MAX_COORDS, or -ENOMEM (also past
 *         2^26 documents); on error the index is unchanged.
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
 * Rename a document, keeping its signatures (a file renamed in the source).
 * Replaces a document already at @p to. Renaming a path to itself does
 * nothing and returns 0.
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

/** Copy the signatures of @p path into *out. @return 0 or -ENOENT. */
int im_index_get(const struct im_index *idx, const char *path,
		 struct im_doc_sigs *out);

/**
 * Call @p cb for each near-duplicate of @p path (itself excluded, each once,
 * in no particular order).
 *
 * @return 0, -ENOENT if @p path is not indexed, or cb's non-zero value.
 */
int im_index_dupes(const struct im_index *idx, const char *path,
		   im_index_path_cb cb, void *arg);

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
 * Call @p cb for each document. The index is read-locked throughout.
 * @return 0 or cb's non-zero value.
 */
int im_index_foreach_doc(const struct im_index *idx,
			 int (*cb)(const char *path,
				   const struct im_doc_sigs *d, void *arg),
			 void *arg);

#endif
