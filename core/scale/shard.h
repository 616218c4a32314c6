/**
 * @file shard.h
 * Shards: the unit of work of the batch stages (SCALE.md). A shard is a
 * file holding paths relative to a root directory, each followed by a NUL
 * byte, in the order the walker met them (so neighbours share directories).
 *
 * Listed files are opened the way the walker opens them: the directory with
 * im_open_beneath() from the root's fd (beneath.h: no symlink followed in any
 * component), the file relative to it with O_NOFOLLOW, so a symlink planted
 * in the tree after the listing cannot lead a stage outside it. The last
 * directory is kept open, so a shard costs about one open per directory, not
 * per file.
 *
 * Thread-safety: a struct im_shard and a struct im_tree belong to one thread.
 */
#ifndef IM_SHARD_H
#define IM_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "params.h"

/* ---- Lists ----------------------------------------------------------------- */

struct im_shard {
	char **path; /**< into buf; NUL-terminated */
	size_t n;
	char *buf;
};

/**
 * Read the list at @p file. Every path must be relative, non-empty, without
 * empty, "." or ".." components, and given once; the last path must end with
 * its NUL.
 *
 * @param why  if not NULL, a one-line reason on failure ("path N is not a
 *             relative path without '..'", "paths N and M are the same",
 *             "does not end with a NUL byte", or strerror()).
 * @return 0, -EINVAL, -ENOMEM, or the read's negative errno. The caller
 *         releases the list with im_shard_release().
 */
int im_shard_load(const char *file, struct im_shard *out, char *why,
		  size_t why_len);
void im_shard_release(struct im_shard *s);

/**
 * What a list contributes to the fingerprint of its paths: a list's (or a
 * shard's records', or a manifest's shard's) fingerprint is the sum, modulo
 * 2^64, of this over its paths. A sum does not depend on the order, so the
 * manifest, the list and the records agree however each was read or
 * joined, in one pass and no memory; with the count beside it, a file left
 * out, given twice or swapped for another changes it (unless 64-bit hashes
 * collide). Never fails.
 */
uint64_t im_list_path_hash(const char *path, size_t len);

/* ---- Opening listed files ---------------------------------------------------- */

struct im_tree {
	int root;     /**< borrowed */
	int dir;      /**< fd of cached_dir, or -1 */
	char *cached; /**< the directory part of the last path, or NULL */
};

/** Start opening files under @p rootfd (borrowed: stays the caller's). */
void im_tree_init(struct im_tree *t, int rootfd);
void im_tree_release(struct im_tree *t);

/**
 * The directory holding @p path, opened component by component, and the
 * file's name within it. *dirfd stays owned by @p t and is valid until the
 * next call.
 *
 * @return 0, -ENOMEM, or im_open_beneath()'s error (-ELOOP for a symlink,
 *         -ENOENT, -ENOTDIR, -EACCES, ...).
 */
int im_tree_dir(struct im_tree *t, const char *path, int *dirfd,
		const char **name);

/* ---- Keys -------------------------------------------------------------------- */

/**
 * The fingerprint of what a document's term set depends on (word length,
 * digits, max_size): document frequencies made under different values must
 * not be added up. Never fails.
 */
uint64_t im_terms_key(const struct im_params *p);

#endif
