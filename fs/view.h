/**
 * @file view.h
 * What the FUSE operations show (DESIGN §2), computed from the model under
 * the tree lock held shared: resolving inode numbers (ino.h) and names,
 * attributes, listings, symlink targets and the generated files' text. No
 * function here touches the source or blocks on anything but the tree and
 * index locks.
 *
 * Every function that hands out an inode number derived from a node marks
 * the node NODE_KNOWN first, so that its later changes are invalidated
 * (model.h). Cluster inode numbers are counted by the caller (ops.c) with
 * ctab_ref() when it replies.
 *
 * Locking: the caller holds the tree lock (shared) around every call and
 * until it no longer uses what a struct vobj points to.
 */
#ifndef IMFS_VIEW_H
#define IMFS_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "imfs.h"
#include "sig.h"
#include "tree.h"

enum vkind {
	V_ROOT,
	V_STATUS,
	V_CLUSTERS,
	V_CLUSTER, /* clusters/<sig> */
	V_DIR,	   /* by-doc/ and its source directories */
	V_DOC,	   /* by-doc/.../<document>/ */
	V_DUPES,
	V_FILE,
	V_SIGS,
	V_MEMBER,	/* a document's symlink in clusters/<sig>/, dupes/,
		     redundant/, or as another's by-doc/.../keeper */
	V_REDUNDANT,	/* redundant/ */
	V_CLUSTER_LINK, /* by-doc/.../cluster */
	V_SIMS,		/* by-doc/.../<document>/similarity */
	V_DUPDIRS,	/* dup-dirs/ */
	V_DIRGROUP,	/* dup-dirs/<first directory>/ (node: that directory) */
	V_DIRLINK,	/* dup-dirs/<group>/<directory> (node: the directory) */
};

/** One object of the view. */
struct vobj {
	enum vkind kind;
	struct node *node; /* from V_DIR on: the node (the document's) */
	struct im_sig sig; /* V_CLUSTER */
};

/** Who asks: permissions (allow_other) and our own threads. */
#define VCALLER_GROUPS 64
struct vcaller {
	uid_t uid;
	gid_t gid;
	pid_t pid;
	int ngroups; /* supplementary groups in groups[] (fuse_req_getgroups) */
	gid_t groups[VCALLER_GROUPS];
};

/** One entry of a listing, fixed when the directory was opened. */
struct ventry {
	struct stat st;
	uint8_t cluster; /* st.st_ino is a cluster's: count it (ctab) */
	struct im_sig sig;
	char *name;
};

struct vlist {
	size_t n;
	struct ventry *v;
};

/** @return 0 or -ENOENT (gone, or never was). */
int view_get(struct imfs *fs, uint64_t ino, struct vobj *out);
/** @return 0, -ENOENT or -ENOTDIR. */
int view_lookup(struct imfs *fs, const struct vobj *dir, const char *name,
		const struct vcaller *who, struct vobj *out);
/** Fill @p st (st_ino included), as @p who sees it: the size of similarity
 *  is that of the lines they may read (NULL: all, the owner's view). */
void view_stat(struct imfs *fs, const struct vobj *o, const struct vcaller *who,
	       struct stat *st);
/** The listing of @p dir, "." and ".." first. Free with view_list_free().
 *  @return 0, -ENOTDIR or -ENOMEM. */
int view_list(struct imfs *fs, const struct vobj *dir,
	      const struct vcaller *who, struct vlist *out);
void view_list_free(struct vlist *l);
/** The target of a symlink, if @p who may see it (a cluster link: only to
 *  a cluster shown to them). Caller frees *out.
 *  @return 0, -ENOENT, -EINVAL, -ENAMETOOLONG or -ENOMEM. */
int view_readlink(struct imfs *fs, const struct vobj *o,
		  const struct vcaller *who, char **out);
/**
 * user.imatch.cluster (the cluster's name), user.imatch.keeper (absolute
 * path) and user.imatch.similarity (to the keeper) of a document's by-doc
 * directory, as text without a NUL, into @p buf of @p cap bytes (at least
 * PATH_MAX + 64), as @p who may see them: the document's own only if it may
 * read it, a cluster or keeper only if it may see them in a listing.
 * @return 0 (then strlen(buf) is the length), -ENODATA, -EACCES, -ERANGE or
 * -ENOMEM.
 */
int view_getxattr(struct imfs *fs, const struct vobj *o, const char *name,
		  const struct vcaller *who, char *buf, size_t cap);
/** The names view_getxattr() has a value for, NUL-terminated one after the
 *  other, into @p buf when they fit in @p cap. @return their total length. */
size_t view_listxattr(struct imfs *fs, const struct vobj *o,
		      const struct vcaller *who, char *buf, size_t cap);
/** The content of a generated file. Caller frees *out.
 *  @return 0, -EISDIR, -EINVAL or -ENOMEM. */
int view_text(struct imfs *fs, const struct vobj *o, const struct vcaller *who,
	      char **out, size_t *len);

#endif
