/**
 * @file tree.h
 * The in-memory mirror of the source tree: one struct node per directory and
 * regular file seen, with the stat fields the view shows, so that no FUSE
 * operation touches the source.
 *
 * Invariants: nodes are linked to their parent and siblings (a directory
 * rename is one relink) and found by (parent, name) in one hash table. A
 * link is the other node's slot (4 bytes, not a pointer's 8; read it with
 * tree_parent() and the like). A node keeps its slot until it is freed, and
 * freeing it unlinks it from every node still linked to it, so a link never
 * names a slot that a new node took. Each live node holds a slot in a table that gives it its identity
 * for the kernel: (slot, gen). A slot is reused only with a new gen, so an
 * inode number the kernel still holds for a removed node never names another
 * (tree_by_id() then returns NULL).
 *
 * This module is only the structure: what a node means for the index, the
 * counters and the kernel's caches is model.h's business.
 *
 * Locking: one rwlock (tree_rdlock/tree_wrlock) protects every node and the
 * tables. FUSE workers take it shared; the watcher, scanner and workers take
 * it exclusive for short updates, never around file I/O. Lock order: the
 * tree lock, then the index's own lock, then the work queue's and the
 * invalidation queue's. Every function below needs the lock held as stated.
 *
 * Memory per node: 63 bytes plus its name (at least 8 bytes) in one
 * record of the tree's pool (core/index/pool.h: 8-byte steps, no malloc
 * header), 8 in the slot table and 5.3-6.7 in the name hash (4-byte
 * entries at a load of 3/5 to 3/4); the name moves to an allocation of its own only
 * when a rename makes it longer than its room. Permissions and owners are
 * interned: each distinct (mode, uid, gid) is kept once. At most 2^26
 * nodes (tree_add() says -ENOMEM past them).
 */
#ifndef IMFS_TREE_H
#define IMFS_TREE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

enum node_flags {
	NODE_DIR = 1 << 0,
	NODE_QUEUED = 1 << 1,  /* in the work queue (workers.h) */
	NODE_SIGNING = 1 << 2, /* a worker is signing it */
	NODE_DEAD = 1 << 3,    /* detached; freed by the worker holding it */
	NODE_AGAIN = 1 << 4,   /* queued again while being signed */
	NODE_LINKED = 1 << 5,  /* in the hard-link table (model.c) */
	NODE_KNOWN = 1 << 6,   /* the kernel may cache one of its inodes */
	NODE_HASH = 1 << 7,    /* hash it when signed: another file has its
				  size (core/index/exact.h) */
};

/** Status of a file not signed yet. */
#define NODE_UNKNOWN 0xff

/** A node's permissions and owner. Most files share them: the tree keeps
 *  each distinct one once (tree_attr()). */
struct node_attr {
	uint32_t mode; /* permission bits (07777) */
	uid_t uid;
	gid_t gid;
};

struct node {
	/* Private to tree.c: slots of the parent, the first child and the
	 * siblings, or 0. Read them with tree_parent() and the like. */
	uint32_t up, down, right, left;
	union {
		uint64_t size; /* files: as last signed */
		int wd;	       /* directories: inotify watch, or -1 */
	};
	int64_t mtime_ns; /* files: as last signed; dirs: as last walked */
	uint64_t src_ino;
	uint32_t slot, gen; /* identity for inode numbers */
	uint32_t attr;	    /* tree_attr(); set with tree_set_attr() */
	/* files: im_state_ctime_fold() as last signed (model.h) */
	uint32_t ctime_fold;
	/* Scan generation that last saw it: compared for equality only, and
	 * every scan that completes sweeps the nodes it did not see, so 16
	 * bits wrap harmlessly. */
	uint16_t seen;
	uint8_t flags;	/* enum node_flags; NODE_KNOWN set atomically */
	uint8_t status; /* enum im_doc_status or NODE_UNKNOWN */
	/* The bit-fields below share bytes: written under the tree lock held
	 * exclusively only, unlike flags (its own byte). */
	uint8_t format : 5;    /* files: enum im_format, as last read */
	uint8_t has_terms : 1; /* files: a text with a term (model.h) */
	/* files: the running scan reads it (or, signing every file anew,
	 * expects to: model_expect_reads()), and nothing was applied to it
	 * since the scan asked (scanner.c, apply_result()) */
	uint8_t scan_reads : 1;
	/* Private to tree.c: read the name with node_name(). */
	uint8_t name_out : 1; /* name_in holds a pointer to the name */
	uint8_t fail : 4;     /* files: enum im_extract_fail when FAILED */
	uint8_t retries : 4;  /* files: signings whose path led nowhere */
	uint8_t size8;	      /* the node's allocation, in 8-byte units */
	char name_in[];	      /* the name in the node's own allocation */
};

/** The name of @p n ("" for the root); valid until @p n is moved or freed. */
static inline const char *node_name(const struct node *n)
{
	const char *p;

	if (!n->name_out)
		return n->name_in;
	memcpy(&p, n->name_in, sizeof(p));
	return p;
}

struct tree;

/* ---- Life cycle ----------------------------------------------------------- */

/**
 * A tree holding only its root (a directory named ""); new nodes are owned
 * by @p uid and @p gid, mode 0755 (directories) or 0644, until
 * tree_set_attr(). Caller frees with tree_free().
 * @return 0 or -ENOMEM.
 */
int tree_new(uid_t uid, gid_t gid, struct tree **out);
/** Free the tree and every node still attached. No lock; no other user. */
void tree_free(struct tree *t);

void tree_rdlock(struct tree *t);
void tree_wrlock(struct tree *t);
void tree_unlock(struct tree *t);

/**
 * The lock shared, for a reader that holds it long (a save reads every
 * node: some 200 ms at 100,000 documents). The lock prefers writers, so a
 * writer queued behind such a reader would make every lookup wait for it
 * too; meanwhile writers wait apart instead, before they queue, and other
 * readers go on. A writer already queued goes first. Release with
 * tree_unlock_long(). Not while holding the lock.
 */
void tree_rdlock_long(struct tree *t);
void tree_unlock_long(struct tree *t);

/**
 * A writer about to apply a run of changes (the watcher, the events it
 * read at once), taking the lock exclusively and letting it go between
 * them, opens a batch around the run. A reader about to hold the lock long
 * for work that each change makes stale (the removal plan) first waits,
 * with no lock held, for the batch open when it asks to end
 * (tree_wait_batch()): else it would slip in between two changes of the
 * run, each time, and the writer would wait for that work once per change.
 * Other readers, and other writers, are not held up. No lock needed;
 * tree_batch_end() once per tree_batch_begin().
 */
void tree_batch_begin(struct tree *t);
void tree_batch_end(struct tree *t);
/**
 * Wait until a batch open now, if any, ends (or another does), or @p max_ms
 * passed: a run that stalls (its writer waits on the disk) holds the caller
 * up no longer. Not while holding the lock.
 */
void tree_wait_batch(struct tree *t, unsigned max_ms);

/* ---- Queries (lock held, shared or exclusive) ------------------------------ */

struct node *tree_root(const struct tree *t);
/** Child of @p dir named @p name, or NULL. */
struct node *tree_child(const struct tree *t, const struct node *dir,
			const char *name);
/** The node at relative path @p path ("" = root), or NULL. */
struct node *tree_lookup(const struct tree *t, const char *path);
/** The live node with identity (@p slot, @p gen), or NULL. */
struct node *tree_by_id(const struct tree *t, uint32_t slot, uint32_t gen);
/** The parent of @p n; NULL for the root and a detached subtree's top. */
struct node *tree_parent(const struct tree *t, const struct node *n);
/** The first child of @p n, or NULL. */
struct node *tree_first_child(const struct tree *t, const struct node *n);
/** The sibling after @p n, or NULL. */
struct node *tree_next_sibling(const struct tree *t, const struct node *n);
/** The relative path of @p n ("" for the root). Caller frees; NULL: ENOMEM. */
char *tree_path(const struct tree *t, const struct node *n);
/** The length of tree_path(@p n), without allocating. */
size_t tree_path_len(const struct tree *t, const struct node *n);
/** Write the path of @p n into @p buf. @return its length, or (size_t)-1
 *  if it does not fit in @p cap bytes with its NUL. */
size_t tree_path_into(const struct tree *t, const struct node *n, char *buf,
		      size_t cap);
/** Whether @p n is @p anc or below it. */
bool tree_is_under(const struct tree *t, const struct node *n,
		   const struct node *anc);

/** The permissions and owner of @p n; valid while the lock is held. */
const struct node_attr *tree_attr(const struct tree *t, const struct node *n);

/** Mark @p n as cached by the kernel. Safe under the shared lock. */
void tree_mark_known(struct tree *t, struct node *n);
/** Whether any node was ever marked known (atomic; any lock mode). */
bool tree_any_known(const struct tree *t);

/* ---- Changes (lock held exclusively) -------------------------------------- */

/**
 * Add a child @p name (a directory if @p dir) under @p parent, which has no
 * child of that name. @return 0 or -ENOMEM (then nothing changed).
 */
int tree_add(struct tree *t, struct node *parent, const char *name, bool dir,
	     struct node **out);
/**
 * Move @p n under @p dir as @p name; @p dir has no child of that name and is
 * not under @p n. @return 0 or -ENOMEM (then nothing changed).
 */
int tree_move(struct tree *t, struct node *n, struct node *dir,
	      const char *name);
/**
 * Set the permissions and owner of @p n (mode bits beyond 07777 are
 * dropped). Never fails: if no memory is left to keep a new combination,
 * @p n gets mode 0 owned by root, which shows it to nobody but root, and
 * -ENOMEM is returned.
 * @return 0 or -ENOMEM.
 */
int tree_set_attr(struct tree *t, struct node *n, const struct node_attr *a);
/**
 * Take @p n (not the root) and its subtree out of the tree: out of the hash,
 * out of tree_by_id() and out of its parent. The nodes stay linked to each
 * other below @p n, for the caller to walk (tree_first_child() and the
 * like work on them); free each with tree_node_free().
 */
void tree_detach(struct tree *t, struct node *n);
/** Free one detached node of @p t: unlinked from the detached nodes still
 *  linked to it (its children lose their parent), its slot free for a new
 *  gen. Lock held exclusively. */
void tree_node_free(struct tree *t, struct node *n);

#endif
