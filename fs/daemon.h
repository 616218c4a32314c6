/**
 * @file daemon.h
 * The imatchfs daemon's internals: one struct imfs shared by the FUSE
 * operations (ops.c), the namespace (view.c), the inotify watcher (watch.c)
 * and the scanner with its worker threads (scanner.c).
 *
 * Data: the cluster index (core/index/index.h, internally locked) holds the
 * signatures of documents (SIGNED or REJECTED) keyed by their path relative to
 * SOURCE. Beside it, view.c keeps an in-memory mirror of the source tree:
 * one struct node per directory and regular file seen, with the stat fields
 * the view shows (so getattr never touches the source) and the file's status.
 *
 * Locking: fs->tree_lock (a rwlock) protects every struct node and the
 * counters marked so. FUSE operations take it shared; the watcher, the
 * scanner and the workers take it exclusive for short updates, never while
 * reading or signing a file. Lock order: tree_lock, then the index's own
 * lock (index calls may be made under tree_lock; index callbacks never take
 * tree_lock). fs->work_lock protects the work queue and is taken last.
 */
#ifndef IMFS_DAEMON_H
#define IMFS_DAEMON_H

#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 314
#endif

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <syslog.h>

#include "index.h"
#include "lexicon.h"
#include "params.h"
#include "scan.h"
#include "sig.h"
#include "state.h"

/* ---- The mirror of the source tree -------------------------------------- */

enum node_flags {
	NODE_DIR = 1 << 0,
	NODE_QUEUED = 1 << 1,  /* in the work queue */
	NODE_SIGNING = 1 << 2, /* a worker is signing it */
	NODE_DEAD = 1 << 3,    /* detached; freed when neither of the above */
	NODE_AGAIN = 1 << 4,   /* queued again while being signed */
	NODE_LINKED = 1 << 5,  /* in fs->links: a file with several names */
};

/** Status of a file not signed yet. */
#define NODE_UNKNOWN 0xff

struct node {
	struct node *parent;
	struct node *child, *next, *prev; /* children; siblings */
	struct node *hnext;               /* chain in fs->hash */
	struct node *lnext;               /* chain in fs->links */
	char *name;
	uint64_t id;        /* view inode numbers derive from it */
	uint64_t size;      /* as last signed (files) */
	int64_t mtime_ns;   /* as last signed (files) or walked (dirs) */
	uint64_t src_ino;
	uint32_t mode, uid, gid;
	int wd;             /* directories: inotify watch, or -1 */
	uint32_t seen;      /* scan generation that last saw it */
	uint8_t flags;      /* enum node_flags */
	uint8_t status;     /* enum im_doc_status or NODE_UNKNOWN */
};

static inline bool node_is_doc(const struct node *n)
{
	return n->status == IM_DOC_SIGNED || n->status == IM_DOC_REJECTED;
}

/* ---- The daemon ---------------------------------------------------------- */

enum imfs_phase {
	PHASE_STARTING,
	PHASE_LEXICON,
	PHASE_SCANNING,
	PHASE_LIVE,
	PHASE_RESCANNING,
	PHASE_NO_LEXICON,
};

struct imfs {
	/* Options, fixed after start. */
	char *source;       /* as given */
	char *source_real;  /* realpath at startup: symlink targets start with it */
	char *mountpoint;
	char *state_dir;
	char *lexicon_opt;  /* -o lexicon=FILE, absolute, or NULL */
	char *lexicon_path; /* the lexicon in use (lexicon_opt or state's) */
	char *cache_path;   /* state_dir/sigcache */
	struct im_params params;
	unsigned threads;
	unsigned rescan_secs; /* periodic rescans when watches are missing */
	bool foreground, debug, allow_other;
	int srcfd;          /* O_DIRECTORY fd of SOURCE: the only way in */
	dev_t state_dev;    /* the state directory, left out of walks */
	ino_t state_ino;
	char *mnt_real;     /* realpath of MOUNTPOINT before mounting */
	bool mnt_inside;    /* MOUNTPOINT is strictly inside SOURCE */
	dev_t fuse_dev;     /* st_dev of our own mount when mnt_inside */
	uid_t owner_uid;
	gid_t owner_gid;
	struct fuse *fuse;

	/* Algorithm state. lex is set once (before mount, or by the scanner
	 * before it sets phase past PHASE_LEXICON) and never changes. */
	struct im_lexicon *lex;
	uint64_t key;            /* im_state_key of params and lexicon */
	struct im_index *idx;
	struct im_state *cache;  /* loaded cache, used by the first scan */

	/* The tree. */
	pthread_rwlock_t tree_lock;
	struct node *root;       /* protected by tree_lock */
	struct node **hash;      /* protected by tree_lock */
	size_t hash_size, hash_used;
	/* Files with st_nlink > 1, by source inode: a write through one name
	 * raises an event in one directory only. protected by tree_lock */
	struct node **links;
	size_t links_size;
	uint64_t next_id;
	uint32_t scan_gen;
	uint64_t count[6];       /* files per status; [5] unknown. tree_lock */
	uint64_t dirs;           /* tree_lock */
	bool dirty;              /* changed since the last save; tree_lock */

	/* Counters read by `status` (atomics). */
	uint64_t cached, scanned, scan_todo, hidden_skipped, other_skipped;
	uint64_t walk_errors, watches, rescans, saves, events;
	int watch_limit;         /* watch limit reached */
	int phase;               /* enum imfs_phase */
	time_t started;

	/* Threads. */
	volatile bool stop;
	volatile bool cancel_scan;
	bool rescan_wanted;      /* work_lock */
	pthread_t scanner_tid, watcher_tid;
	bool scanner_started, watcher_started;
	pthread_t *worker_tids;
	unsigned nworkers;

	/* Work queue of files to sign (nodes with NODE_QUEUED). */
	pthread_mutex_t work_lock;
	pthread_cond_t work_cond;   /* workers wait for work */
	pthread_cond_t scan_cond;   /* the scanner waits for a rescan or stop */
	struct node **queue;
	size_t qhead, qlen, qcap;
	unsigned busy;              /* workers signing; work_lock */

	/* Kernel cache invalidation (ops.c). */
	pthread_mutex_t inval_lock;
	pthread_cond_t inval_cond;
	bool inval_wanted, inval_stopping, inval_started; /* inval_lock */
	pthread_t inval_tid;

	/* inotify. */
	int ifd;
	int stop_pipe[2];
	/* wd -> directory node; protected by tree_lock */
	struct node **wd_map;
	size_t wd_cap;
};

extern struct imfs *imfs;

/* ---- main.c -------------------------------------------------------------- */

/** Log a line "imatchfs: [error: |warning: ]message" to stderr or syslog. */
void imfs_log(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* ---- view.c: the tree ----------------------------------------------------- */

int view_init(struct imfs *fs);
void view_release(struct imfs *fs);

/** Child of @p dir named @p name, or NULL. tree_lock held. */
struct node *view_child(struct imfs *fs, struct node *dir, const char *name);
/** The node at relative path @p path ("" = root), or NULL. tree_lock held. */
struct node *view_lookup(struct imfs *fs, const char *path);
/**
 * The node at @p path, created (with missing directories) if absent; @p dir
 * says what a created final component is. tree_lock held exclusively.
 * @return NULL on ENOMEM or if a component is a file where a directory is
 *         needed (the caller then rescans).
 */
struct node *view_ensure(struct imfs *fs, const char *path, bool dir);
/** Malloc'ed relative path of @p n ("" for the root), or NULL. */
char *view_path(const struct node *n);
/** Copy stat fields into @p n (mode, owner; and size/mtime/ino for dirs). */
void view_set_stat(struct imfs *fs, struct node *n, const struct stat *st);
/**
 * The view changed: mark the state dirty and have the kernel's caches of
 * clusters/, by-doc/ and status invalidated shortly. tree_lock held
 * exclusively.
 */
void view_changed(struct imfs *fs);
/**
 * Record the result of signing @p n (at @p path): stat, status, the index.
 * tree_lock held exclusively.
 */
void view_apply(struct imfs *fs, struct node *n, const char *path,
		const struct stat *st, const struct im_doc_sigs *d);
/**
 * @p n (at @p path) was just signed as @p d: give the same result to the
 * other names of the same file (hard links). tree_lock held exclusively.
 */
void view_apply_links(struct imfs *fs, struct node *n, const struct stat *st,
		      const struct im_doc_sigs *d);
/** Remove @p n and everything under it from the tree and the index. */
void view_remove(struct imfs *fs, struct node *n);
/** Move @p n under @p dir as @p name (replacing what was there). */
int view_move(struct imfs *fs, struct node *n, struct node *dir,
	      const char *name);
/** Remove every node under the root not seen by scan generation @p gen. */
void view_sweep(struct imfs *fs, uint32_t gen);
/** Free a detached node (no children). */
void view_node_free(struct node *n);

/** Encode a relative path as a <member> name. Malloc'ed, or NULL. */
char *member_encode(const char *path);
/** Decode a <member> name. Malloc'ed, or NULL if it is not valid. */
char *member_decode(const char *name);

/* ---- scanner.c ------------------------------------------------------------ */

int scanner_start(struct imfs *fs);
void scanner_stop(struct imfs *fs);
/** Queue @p n for signing by a worker. tree_lock held exclusively. */
void scanner_queue(struct imfs *fs, struct node *n);
/** Ask the scanner for a full rescan (inotify overflow, watch limit).
 *  @return false if one was already asked for and has not started. */
bool scanner_request_rescan(struct imfs *fs);
/** Save the signature cache now. @return 0 or a negative errno. */
int scanner_save(struct imfs *fs);
/** Files waiting or being signed. */
uint64_t scanner_pending(struct imfs *fs);

/* ---- watch.c --------------------------------------------------------------- */

int watch_init(struct imfs *fs);
int watch_start(struct imfs *fs);
void watch_stop(struct imfs *fs);
/**
 * Add an inotify watch on directory @p path (relative to SOURCE); no lock
 * needed. @return the watch descriptor, or -1 (no inotify, watch limit
 * reached: then fs->watch_limit is set and logged once).
 */
int watch_path(struct imfs *fs, const char *path);
/** Record that @p n is watched as @p wd (-1: nothing). tree_lock held
 *  exclusively. */
void watch_bind(struct imfs *fs, struct node *n, int wd);
/** Stop watching @p n. tree_lock held exclusively. */
void watch_forget(struct imfs *fs, struct node *n);

/* ---- ops.c ---------------------------------------------------------------- */

extern const struct fuse_operations imfs_oper;

/** Free the generated files still open when the session ended. */
void ops_release_all(void);
/** Ask for the kernel's caches to be invalidated soon. Any thread, any lock. */
void inval_request(struct imfs *fs);
/** Start and stop the thread that sends the invalidations. */
int inval_start(struct imfs *fs);
void inval_stop(struct imfs *fs);

#endif
