/**
 * @file model.c
 * The documents: tree and index in step, counted and invalidated (model.h).
 *
 * What the kernel may cache that one change touches:
 *   - a node appearing, leaving or being renamed: its parent's listing and
 *     the entry of its name there (note_entry);
 *   - a node's own attributes or text: its inodes (note_node);
 *   - an index change for a path: its dupes/ and those of its
 *     near-duplicates, before and after, and its cluster before and after
 *     (note_links). A cluster that vanished by merging into another was
 *     held by no path involved: inval_clusters_gone() finds it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "beneath.h"
#include "ino.h"
#include "member.h"
#include "model.h"
#include "text.h"
#include "util.h"

#define LINKS_SIZE 1024

/* The node keeps them in 5 and 4 bits (tree.h); the enums are append-only. */
_Static_assert(IM_FMT_COUNT <= 32 && IM_XF_COUNT <= 16,
	       "a node's format or fail no longer fits its bits");

static void changed(struct model *m);
static void set_status(struct model *m, struct node *n, uint8_t status);
static int index_put(struct model *m, const char *path,
		     const struct im_doc_sigs *d);
static void index_remove(struct model *m, const char *path);

struct hlink;
static void links_free(struct model *m);

int model_new(uid_t uid, gid_t gid, double similarity, struct inval *iv,
	      struct model **out)
{
	struct model *m = calloc(1, sizeof(*m));

	*out = NULL;
	if (!m)
		return -ENOMEM;
	if (tree_new(uid, gid, &m->tree) || im_index_new(&m->idx) ||
	    im_sizes_new(&m->sizes) || fullsigs_new(&m->full)) {
		model_free(m);
		return -ENOMEM;
	}
	/* Prefixes in memory, whole signatures on disk (fullsigs.h). */
	im_index_set_prefixes(m->idx, true);
	im_index_set_stat(m->idx, false); /* the nodes keep them */
	/* The same links as imatch with the same options (DESIGN §4). */
	if (im_index_set_similarity(m->idx, similarity)) {
		model_free(m);
		return -EINVAL;
	}
	m->inval = iv;
	m->dirs = 1;
	changed(m);
	*out = m;
	return 0;
}

void model_free(struct model *m)
{
	if (!m)
		return;
	tree_free(m->tree);
	if (m->idx)
		im_index_free(m->idx);
	fullsigs_free(m->full);
	links_free(m);
	im_sizes_free(m->sizes);
	for (size_t i = 0; i < m->nops; i++) {
		free(m->ops[i].path);
		free(m->ops[i].d);
	}
	free(m->ops);
	free(m);
}

bool model_unchanged_watched(const struct node *n, const struct stat *st)
{
	return n->status != NODE_UNKNOWN && n->status != IM_DOC_ERROR &&
	       n->size == (uint64_t)st->st_size &&
	       n->mtime_ns == st_mtime_ns(st) && n->src_ino == st->st_ino;
}

bool model_unchanged(const struct node *n, const struct stat *st)
{
	return model_unchanged_watched(n, st) &&
	       n->ctime_fold == im_state_ctime_fold(st);
}

bool model_attr_changed(struct model *m, const struct node *n,
			const struct stat *st)
{
	const struct node_attr *a = tree_attr(m->tree, n);

	return a->mode != (st->st_mode & 07777) || a->uid != st->st_uid ||
	       a->gid != st->st_gid;
}

static unsigned count_slot(uint8_t status)
{
	return status < IM_DOC_STATUS_COUNT ? status : COUNT_UNKNOWN;
}

/* Count @p n's format and failure (files that were read) by @p delta. */
static void count_format(struct model *m, const struct node *n, int delta)
{
	if (n->status == NODE_UNKNOWN || n->status == IM_DOC_ERROR ||
	    n->status == IM_DOC_TOO_BIG)
		return;
	if (n->format < IM_FMT_COUNT)
		m->by_format[n->format] += (uint64_t)(int64_t)delta;
	if (n->status == IM_DOC_FAILED && n->fail < IM_XF_COUNT)
		m->by_fail[n->fail] += (uint64_t)(int64_t)delta;
}

/* ---- What the kernel must forget ---------------------------------------------- */

/* Whether the kernel may cache anything an index change touches: until
 * then (a first scan nobody browses) changes cost no query. */
static bool kernel_knows(const struct model *m)
{
	return m->inval &&
	       (tree_any_known(m->tree) ||
		__atomic_load_n(&m->clusters_known, __ATOMIC_RELAXED) ||
		__atomic_load_n(&m->redundant_known, __ATOMIC_RELAXED));
}

static void note_entry(struct model *m, const struct node *n)
{
	const struct node *p = tree_parent(m->tree, n);

	if (!p || !(p->flags & NODE_KNOWN))
		return;
	inval_inode(m->inval, node_ino(p, SUB_DIR));
	inval_entry(m->inval, node_ino(p, SUB_DIR), node_name(n));
}

static void note_node(struct model *m, const struct node *n)
{
	if (!(n->flags & NODE_KNOWN))
		return;
	for (unsigned sub = 0; sub < SUB_COUNT; sub++)
		if (sub != SUB_DUPES)
			inval_inode(m->inval, node_ino(n, sub));
}

struct note_ctx {
	struct model *m;
	struct node *doc; /* the document whose links change, if known */
	char *member;	  /* its member name */
};

/* @p path is a near-duplicate of the document: each loses or gains the
 * other in its dupes/. */
static int note_dupe_cb(const char *path, void *arg)
{
	struct note_ctx *nc = arg;
	struct node *d = tree_lookup(nc->m->tree, path);

	if (d && (d->flags & NODE_KNOWN)) {
		inval_inode(nc->m->inval, node_ino(d, SUB_DUPES));
		inval_inode(nc->m->inval, node_ino(d, SUB_SIMS));
		inval_entry(nc->m->inval, node_ino(d, SUB_DUPES), nc->member);
	}
	if (nc->doc) {
		char *name = member_name(path);
		if (!name) {
			inval_all(nc->m->inval);
			return 1;
		}
		inval_entry(nc->m->inval, node_ino(nc->doc, SUB_DUPES), name);
		free(name);
	}
	return 0;
}

/* Member @p path of a cluster whose plan or name may change: its keeper,
 * its cluster link, its by-doc listing (which names both) and its entry in
 * redundant/. */
static int note_member_cb(const char *path, void *arg)
{
	struct model *m = arg;
	struct node *d = tree_lookup(m->tree, path);

	if (d && (d->flags & NODE_KNOWN)) {
		uint64_t dir = node_ino(d, SUB_DIR);

		inval_inode(m->inval, dir);
		inval_entry(m->inval, dir, "keeper");
		inval_entry(m->inval, dir, "cluster");
		inval_inode(m->inval, node_ino(d, SUB_CLUSTER_LINK));
	}
	if (__atomic_load_n(&m->redundant_known, __ATOMIC_RELAXED)) {
		char *name = member_name(path);

		if (!name) {
			inval_all(m->inval);
			return 1;
		}
		inval_entry(m->inval, INO_REDUNDANT, name);
		free(name);
	}
	return 0;
}

/* The name @p c with @p step added to its last four bytes (big-endian),
 * as the index numbers the clusters of one name group (index.h). */
static struct im_sig group_step(const struct im_sig *c, int step)
{
	struct im_sig s = *c;
	uint8_t *b = s.b + IM_NAME_GROUP_LEN;
	uint32_t k = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 |
		     (uint32_t)b[2] << 8 | b[3];

	k += (uint32_t)step;
	b[0] = (uint8_t)(k >> 24);
	b[1] = (uint8_t)(k >> 16);
	b[2] = (uint8_t)(k >> 8);
	b[3] = (uint8_t)k;
	return s;
}

/*
 * The removal plan is made per cluster, so a change of one member can
 * change every member's keeper; and a change of one cluster can rename the
 * others of its name group (index.h), whose members' cluster links then
 * point elsewhere. Their numbers are consecutive: walk both ways from @p c
 * while a cluster has the name.
 */
static void note_plan(struct model *m, const struct im_sig *c)
{
	if (__atomic_load_n(&m->redundant_known, __ATOMIC_RELAXED))
		inval_inode(m->inval, INO_REDUNDANT);
	if (im_index_cluster_members(m->idx, c, note_member_cb, m))
		return;
	for (int step = -1; step <= 1; step += 2) {
		struct im_sig s = group_step(c, step);

		while (!im_index_cluster_members(m->idx, &s, note_member_cb, m))
			s = group_step(&s, step);
	}
}

/* Called before and after each index change for @p path. */
static void note_links(struct model *m, const char *path)
{
	struct note_ctx nc = {m, tree_lookup(m->tree, path), NULL};
	struct im_sig c;

	if (!kernel_knows(m))
		return;
	if (!im_index_cluster_of(m->idx, path, &c)) {
		inval_cluster(m->inval, &c);
		note_plan(m, &c);
	}
	if (nc.doc && !(nc.doc->flags & NODE_KNOWN))
		nc.doc = NULL;
	if (nc.doc) {
		inval_inode(m->inval, node_ino(nc.doc, SUB_DUPES));
		inval_inode(m->inval, node_ino(nc.doc, SUB_SIMS));
	}
	nc.member = member_name(path);
	if (!nc.member) {
		inval_all(m->inval);
		return;
	}
	im_index_dupes(m->idx, path, note_dupe_cb, &nc);
	free(nc.member);
}

static void changed(struct model *m)
{
	struct timespec ts;

	if (m->inval &&
	    __atomic_exchange_n(&m->dupdirs_known, 0, __ATOMIC_RELAXED)) {
		/* Dropping the directory's entry drops everything the
		 * kernel holds below it. */
		inval_entry(m->inval, INO_ROOT, "dup-dirs");
		inval_inode(m->inval, INO_DUPDIRS);
	}

	clock_gettime(CLOCK_REALTIME, &ts);
	int64_t now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	m->clock_ns = now > m->clock_ns ? now : m->clock_ns + 1;
	m->dirty = true;
}

/* ---- The index, with what the kernel must forget ----------------------------------- */

/* A document sharing a hot key can change links between others
 * (index.h): then everything the kernel holds is dropped. */
static void note_hot(struct model *m, const char *path)
{
	if (kernel_knows(m) && im_index_hot(m->idx, path) == 1)
		inval_all(m->inval);
}

/* A put whose index entry could not be made (out of memory): an error,
 * signed again when it changes; the index holds nothing for it. */
static void put_failed(struct model *m, const char *path)
{
	struct node *n = tree_lookup(m->tree, path);

	if (n && node_in_index(n)) {
		bool was_doc = node_is_doc(n);

		set_status(m, n, IM_DOC_ERROR);
		if (was_doc != node_is_doc(n))
			note_entry(m, n);
		note_node(m, n);
		changed(m);
	}
	note_hot(m, path);
	note_links(m, path);
	im_index_remove(m->idx, path);
	fullsigs_remove(m->full, path);
}

/* What the kernel must forget of the changes at @p paths (@p n), before or
 * after them: a hot key drops all it holds at once, and then nothing else
 * needs looking up. @return whether everything was dropped. */
static bool note_ops(struct model *m, const char *const *paths, size_t n)
{
	if (!kernel_knows(m))
		return false;
	for (size_t i = 0; i < n; i++)
		if (im_index_hot(m->idx, paths[i]) == 1) {
			inval_all(m->inval);
			return true;
		}
	for (size_t i = 0; i < n; i++)
		note_links(m, paths[i]);
	return false;
}

/* Removals of @p paths, as one batch. */
static void apply_removals(struct model *m, const char *const *paths, size_t n)
{
	note_ops(m, paths, n);
	im_index_remove_many(m->idx, paths, n);
	for (size_t i = 0; i < n; i++)
		fullsigs_remove(m->full, paths[i]);
}

/* Whether paths[i + 1..n) holds paths[i] again: a later put of the path
 * decides what it holds, whatever became of this one. */
static bool put_again(const char *const *paths, size_t i, size_t n)
{
	for (size_t j = i + 1; j < n; j++)
		if (!strcmp(paths[i], paths[j]))
			return true;
	return false;
}

/* Puts of @p docs at @p paths (room for @p rets), as one batch. */
static void apply_puts(struct model *m, const char **paths,
		       const struct im_doc_sigs **docs, int *rets, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		/* (paths[k] for k <= i only: those after i stay to look at) */
		if (fullsigs_put(m->full, paths[i], docs[i])) {
			if (!put_again(paths, i, n))
				put_failed(m, paths[i]);
			continue;
		}
		paths[k] = paths[i];
		docs[k++] = docs[i];
	}
	note_ops(m, paths, k);
	im_index_put_many(m->idx, paths, docs, k, rets);
	note_ops(m, paths, k);
	for (size_t i = 0; i < k; i++)
		if (rets[i] && !put_again(paths, i, k)) {
			fullsigs_remove(m->full, paths[i]);
			put_failed(m, paths[i]);
		}
	if (k)
		inval_clusters_gone(m->inval);
}

/* The changes held so far reach the index in their order: each run of
 * removals, and each run of puts, as one batch. */
static void flush_changes(struct model *m)
{
	struct model_op *ops = m->ops;
	size_t n = m->nops;
	const char **paths;
	const struct im_doc_sigs **docs;
	int *rets;

	unsigned holds = m->holds;

	if (!n)
		return;
	/* Taken out first, and nothing held meanwhile (a rename flushes
	 * within a hold): what a failed put or the fallback below does goes
	 * to the index at once, in order. */
	m->ops = NULL;
	m->nops = m->ops_cap = 0;
	m->holds = 0;
	paths = malloc(n * sizeof(*paths));
	docs = malloc(n * sizeof(*docs));
	rets = malloc(n * sizeof(*rets));
	for (size_t i = 0, j; i < n; i = j) {
		bool puts = ops[i].d != NULL;

		for (j = i; j < n && (ops[j].d != NULL) == puts; j++)
			if (paths && docs) {
				paths[j - i] = ops[j].path;
				docs[j - i] = ops[j].d;
			}
		if (paths && docs && rets && puts) {
			apply_puts(m, paths, docs, rets, j - i);
		} else if (paths && !puts) {
			apply_removals(m, paths, j - i);
		} else {
			/* No memory for a batch: one by one. */
			for (size_t k = i; k < j; k++)
				if (!puts)
					index_remove(m, ops[k].path);
				else if (index_put(m, ops[k].path, ops[k].d))
					put_failed(m, ops[k].path);
		}
	}
	for (size_t i = 0; i < n; i++) {
		free(ops[i].path);
		free(ops[i].d);
	}
	free(ops);
	free(paths);
	free(docs);
	free(rets);
	m->holds = holds;
}

void model_hold_index(struct model *m)
{
	m->holds++;
}

void model_release_index(struct model *m)
{
	if (m->holds && !--m->holds)
		flush_changes(m);
}

/* Keep a change for the release (@p d NULL: a removal). @return whether it
 * was kept; not without memory, and not unless held. */
static bool hold_op(struct model *m, const char *path,
		    const struct im_doc_sigs *d)
{
	struct model_op op = {NULL, NULL};

	if (!m->holds)
		return false;
	if (m->nops == m->ops_cap) {
		size_t cap = m->ops_cap ? 2 * m->ops_cap : 256;
		struct model_op *v = realloc(m->ops, cap * sizeof(*v));

		if (!v)
			return false;
		m->ops = v;
		m->ops_cap = cap;
	}
	op.path = strdup(path);
	if (d && (op.d = malloc(sizeof(*d))))
		*op.d = *d;
	if (!op.path || (d && !op.d)) {
		free(op.path);
		free(op.d);
		return false;
	}
	m->ops[m->nops++] = op;
	return true;
}

static int index_put(struct model *m, const char *path,
		     const struct im_doc_sigs *d)
{
	int ret;

	if (hold_op(m, path, d))
		return 0; /* a failure shows at the release (put_failed()) */
	flush_changes(m); /* in their order */
	ret = fullsigs_put(m->full, path, d);
	if (ret)
		return ret;
	note_hot(m, path);
	note_links(m, path);
	ret = im_index_put(m->idx, path, d);
	note_links(m, path);
	note_hot(m, path);
	if (!ret)
		inval_clusters_gone(m->inval);
	else
		fullsigs_remove(m->full, path);
	return ret;
}

static void index_remove(struct model *m, const char *path)
{
	if (hold_op(m, path, NULL))
		return;
	flush_changes(m);
	note_hot(m, path);
	note_links(m, path);
	im_index_remove(m->idx, path);
	fullsigs_remove(m->full, path);
}

static int index_rename(struct model *m, const char *from, const char *to)
{
	struct im_doc_sigs d;
	int ret;

	flush_changes(m);
	ret = im_index_get(m->idx, from, &d);

	if (!ret)
		ret = fullsigs_rename(m->full, from, to, &d);
	if (ret)
		return ret;
	note_hot(m, from);
	note_links(m, from);
	ret = im_index_rename(m->idx, from, to);
	note_links(m, ret ? from : to);
	note_hot(m, ret ? from : to);
	fullsigs_remove(m->full, ret ? to : from);
	return ret;
}

int model_full_sigs(const struct model *m, const char *path,
		    struct im_doc_sigs *d)
{
	int ret = im_index_get(m->idx, path, d);

	return ret ? ret : fullsigs_get(m->full, path, d);
}

int model_copy_of(const struct model *m, const uint8_t exact[16],
		  struct im_doc_sigs *d)
{
	char *path;
	int ret;

	/* The first text of the copies may not lend (below) where another
	 * can: a backup of a folder being read again, a holder whose whole
	 * signatures were never saved. */
	for (unsigned skip = 0;; skip++) {
		const struct node *n;

		ret = im_index_copy_of(m->idx, exact, skip, &path, d);
		if (ret)
			return ret;
		/* A file a scan has asked for and has no result of: its
		 * record may be older than the lexicon (model_sweep()). */
		n = tree_lookup(m->tree, path);
		ret = n && !n->scan_reads ? fullsigs_get(m->full, path, d)
					  : -ENOENT;
		free(path);
		if (ret != -ENOENT)
			return ret;
	}
}

struct im_state *model_adopt_cache(struct model *m, struct im_state *saved,
				   bool marked)
{
	/* Loaded for the running key, or written from this view. */
	m->saved_stale = false;
	return fullsigs_adopt(m->full, saved, marked);
}

/*
 * Whether entry @p e describes the file @p st as it is now and may stand for
 * a read of it. An entry with more unique terms than a document now keeps
 * (IM_TERMS_MAX, text.h) was signed from all of them by an older version:
 * reading the file again gives other signatures. Only those few are read
 * again, not the whole cache, as IM_EXTRACT_VERSION would.
 */
static bool entry_fits(const struct im_state_entry *e, const struct stat *st,
		       uint64_t max_size)
{
	return im_state_entry_fits(e, st) &&
	       im_state_entry_within(e, max_size) &&
	       e->d.status != IM_DOC_ERROR && e->d.unique_terms <= IM_TERMS_MAX;
}

bool model_cache_find(const struct im_state *cache, const char *path,
		      const struct stat *st, uint64_t max_size,
		      struct im_state_entry *e)
{
	const char *name = strrchr(path, '/');

	if (!im_state_find(cache, path, e) && entry_fits(e, st, max_size))
		return true;
	return !im_state_find_moved(cache, st->st_ino, name ? name + 1 : path,
				    e) &&
	       entry_fits(e, st, max_size);
}

bool model_saved_entry(const struct model *m, const char *path,
		       const struct stat *st, uint64_t max_size,
		       struct im_state_entry *e)
{
	const struct im_state *saved = fullsigs_saved(m->full);

	return saved && !m->saved_stale &&
	       model_cache_find(saved, path, st, max_size, e) &&
	       (!im_state_partial(saved) || im_state_lexicon_free(e->d.status));
}

void model_mark_cache(struct model *m, const struct im_state *saved)
{
	fullsigs_mark(m->full, saved);
}

/* ---- Hard links ------------------------------------------------------------------ */

/* Files with st_nlink > 1, by source inode: few, so kept apart from the
 * nodes (which then need no pointer for them). */
struct hlink {
	struct node *n;
	struct hlink *next;
};

static void links_remove(struct model *m, struct node *n)
{
	if (!(n->flags & NODE_LINKED))
		return;
	for (struct hlink **pp = &m->links[n->src_ino % m->links_size]; *pp;
	     pp = &(*pp)->next) {
		if ((*pp)->n == n) {
			struct hlink *l = *pp;
			*pp = l->next;
			free(l);
			break;
		}
	}
	n->flags &= ~NODE_LINKED;
}

static void links_free(struct model *m)
{
	for (size_t i = 0; i < m->links_size; i++) {
		while (m->links[i]) {
			struct hlink *l = m->links[i];
			m->links[i] = l->next;
			free(l);
		}
	}
	free(m->links);
}

/* On ENOMEM the other names follow their own events only. */
static void links_insert(struct model *m, struct node *n)
{
	struct hlink *l;

	if (!m->links) {
		m->links = calloc(LINKS_SIZE, sizeof(*m->links));
		if (!m->links)
			return;
		m->links_size = LINKS_SIZE;
	}
	l = malloc(sizeof(*l));
	if (!l)
		return;
	l->n = n;
	l->next = m->links[n->src_ino % m->links_size];
	m->links[n->src_ino % m->links_size] = l;
	n->flags |= NODE_LINKED;
}

void model_apply_links(struct model *m, struct node *n, const struct stat *st,
		       const struct im_doc_sigs *d)
{
	if (!(n->flags & NODE_LINKED))
		return;
	for (struct hlink *l = m->links[n->src_ino % m->links_size]; l;
	     l = l->next) {
		struct node *o = l->n;
		if (o == n || o->src_ino != n->src_ino)
			continue;
		char *p = tree_path(m->tree, o);
		if (p)
			model_apply(m, o, p, st, d);
		free(p);
	}
}

/* ---- Nodes ------------------------------------------------------------------------- */

void model_set_stat(struct model *m, struct node *n, const struct stat *st)
{
	bool dir = n->flags & NODE_DIR;

	const struct node_attr *a = tree_attr(m->tree, n);
	struct node_attr na = {st->st_mode & 07777, st->st_uid, st->st_gid};

	if (a->mode == na.mode && a->uid == na.uid && a->gid == na.gid &&
	    (!dir ||
	     (n->mtime_ns == st_mtime_ns(st) && n->src_ino == st->st_ino)))
		return;
	if (tree_set_attr(m->tree, n, &na))
		imfs_log(LOG_WARNING, "%s: out of memory: shown to root only",
			 node_name(n));
	if (dir) {
		n->mtime_ns = st_mtime_ns(st);
		n->src_ino = st->st_ino;
	}
	note_node(m, n);
	changed(m);
}

struct node *model_ensure(struct model *m, const char *path, bool dir)
{
	struct node *n = tree_root(m->tree);
	char comp[256];

	while (*path) {
		const char *slash = strchr(path, '/');
		size_t len = slash ? (size_t)(slash - path) : strlen(path);
		bool want_dir = slash ? true : dir;
		if (len >= sizeof(comp) || !(n->flags & NODE_DIR))
			return NULL;
		memcpy(comp, path, len);
		comp[len] = 0;
		struct node *c = tree_child(m->tree, n, comp);
		if (c && !!(c->flags & NODE_DIR) != want_dir) {
			/* A file became a directory or the reverse. */
			model_remove(m, c);
			c = NULL;
		}
		if (!c) {
			if (tree_add(m->tree, n, comp, want_dir, &c))
				return NULL;
			c->seen = m->scan_gen;
			if (want_dir) {
				m->dirs++;
				note_entry(m, c);
			} else {
				m->count[COUNT_UNKNOWN]++;
			}
			changed(m);
		}
		n = c;
		path += len;
		if (*path == '/')
			path++;
	}
	return n;
}

/* Take the source's inode, size, mtime and ctime of file @p n from @p st. */
static void take_file_stat(struct model *m, struct node *n,
			   const struct stat *st)
{
	model_set_stat(m, n, st);
	if (n->src_ino != st->st_ino || st->st_nlink < 2)
		links_remove(m, n);
	if (n->size != (uint64_t)st->st_size ||
	    n->mtime_ns != st_mtime_ns(st) || n->src_ino != st->st_ino)
		m->meta_gen++;
	n->size = (uint64_t)st->st_size;
	n->mtime_ns = st_mtime_ns(st);
	n->src_ino = st->st_ino;
	n->ctime_fold = im_state_ctime_fold(st);
	if (st->st_nlink > 1 && !(n->flags & NODE_LINKED))
		links_insert(m, n);
}

static void set_has_terms(struct model *m, struct node *n, bool has)
{
	uint64_t c = m->with_terms - n->has_terms + has;

	n->has_terms = has;
	__atomic_store_n(&m->with_terms, c, __ATOMIC_RELAXED);
}

/* Only a text has terms: model_apply() says whether this one has. */
static void set_status(struct model *m, struct node *n, uint8_t status)
{
	m->count[count_slot(n->status)]--;
	count_format(m, n, -1);
	n->status = status;
	m->count[count_slot(n->status)]++;
	count_format(m, n, 1);
	if (status != IM_DOC_SIGNED && status != IM_DOC_REJECTED)
		set_has_terms(m, n, false);
}

/* Sign @p n again and hash it this time (workers.c). */
static void want_hash(struct model *m, struct node *n)
{
	n->flags |= NODE_HASH;
	if (m->hooks.resign)
		m->hooks.resign(m->hooks.arg, n);
}

/*
 * Size first (exact.h): count @p n's size once per size it takes; a binary
 * file left unhashed is hashed as soon as another file has its size, and
 * so is the one that had it alone until then. @p counted: @p n was counted
 * at this size already.
 */
static void note_size(struct model *m, struct node *n,
		      const struct im_doc_sigs *d, bool counted)
{
	uint64_t todo[2], id = IM_SIZES_NONE;
	size_t k = 0;

	if (!im_exact_tier(d))
		return;
	if (im_exact_deferred(d))
		id = (uint64_t)n->slot << 32 | n->gen;
	if (counted) {
		if (id != IM_SIZES_NONE &&
		    im_sizes_count(m->sizes, d->size) > 1)
			want_hash(m, n);
		return;
	}
	if (im_sizes_add(m->sizes, d->size, id, todo, &k))
		imfs_log(LOG_WARNING,
			 "out of memory: a binary file of %llu "
			 "bytes may miss its exact copies",
			 (unsigned long long)d->size);
	for (size_t i = 0; i < k; i++) {
		struct node *o = tree_by_id(m->tree, (uint32_t)(todo[i] >> 32),
					    (uint32_t)todo[i]);
		if (o && !(o->flags & (NODE_DIR | NODE_DEAD)))
			want_hash(m, o);
	}
}

static bool in_tier(const struct node *n)
{
	return n->size > 0 &&
	       (n->status == IM_DOC_SIGNED || n->status == IM_DOC_REJECTED ||
		n->status == IM_DOC_BINARY || n->status == IM_DOC_FAILED);
}

void model_apply(struct model *m, struct node *n, const char *path,
		 const struct stat *st, const struct im_doc_sigs *d)
{
	bool was_doc = node_is_doc(n), was_in = node_in_index(n);
	bool counted = in_tier(n) && n->size == d->size;

	n->scan_reads = 0;
	if (st && st->st_ino)
		take_file_stat(m, n, st);
	count_format(m, n, -1);
	n->format = d->format;
	n->fail = d->status == IM_DOC_FAILED ? (uint8_t)d->err : 0;
	count_format(m, n, 1);
	set_status(m, n, d->status);
	set_has_terms(
		m, n,
		(d->status == IM_DOC_SIGNED || d->status == IM_DOC_REJECTED) &&
			d->unique_terms);
	if (node_in_index(n)) {
		if (index_put(m, path, d)) {
			/* Out of memory: an error, signed again when it
			 * changes; the index holds nothing for it. */
			set_status(m, n, IM_DOC_ERROR);
			if (was_in)
				index_remove(m, path);
		}
	} else if (was_in) {
		index_remove(m, path);
	}
	if (was_doc != node_is_doc(n))
		note_entry(m, n);
	note_node(m, n);
	note_size(m, n, d, counted);
	changed(m);
}

/*
 * Forget @p n and its subtree (already out of the tree) in the index, the
 * counters and the hooks; free what no worker holds. @p path holds n's path
 * (length @p len) with room up to @p cap for the paths below.
 */
static void drop_subtree(struct model *m, struct node *n, char *path,
			 size_t len, size_t cap)
{
	struct node *c, *next;

	for (c = tree_first_child(m->tree, n); c; c = next) {
		next = tree_next_sibling(m->tree, c);
		const char *cn = node_name(c);
		size_t cl = strlen(cn), l = len;
		if (l + 1 + cl >= cap) {
			drop_subtree(m, c, path, len, 0);
			continue;
		}
		if (l)
			path[l++] = '/';
		memcpy(path + l, cn, cl + 1);
		drop_subtree(m, c, path, l + cl, cap);
		path[len] = 0;
	}
	if (n->flags & NODE_DIR) {
		if (m->hooks.dir_gone)
			m->hooks.dir_gone(m->hooks.arg, n);
		m->dirs--;
	} else {
		if (node_in_index(n) && cap)
			index_remove(m, path);
		m->count[count_slot(n->status)]--;
		count_format(m, n, -1);
		set_has_terms(m, n, false);
		links_remove(m, n);
	}
	if (n->flags & (NODE_QUEUED | NODE_SIGNING))
		n->flags |= NODE_DEAD; /* the worker holding it frees it */
	else
		tree_node_free(m->tree, n);
}

static size_t subtree_len(const struct tree *t, const struct node *n);

void model_remove(struct model *m, struct node *n)
{
	char spare[16384];

	if (n == tree_root(m->tree))
		return;
	size_t cap = tree_path_len(m->tree, n) + subtree_len(m->tree, n) + 1;
	char *buf = malloc(cap);
	if (!buf) {
		/* Out of memory: paths up to 16 KiB still leave the index. */
		buf = spare;
		cap = sizeof(spare);
	}
	size_t len = tree_path_into(m->tree, n, buf, cap);
	if (len == (size_t)-1) {
		imfs_log(LOG_ERR,
			 "no memory to forget a path deeper than 16 KiB");
		buf[0] = 0;
		len = cap = 0;
	}
	note_entry(m, n);
	tree_detach(m->tree, n);
	model_hold_index(m); /* a directory's documents leave together */
	drop_subtree(m, n, buf, len, cap);
	model_release_index(m);
	if (buf != spare)
		free(buf);
	changed(m);
}

/* The length of the longest path below @p n, relative to it. */
static size_t subtree_len(const struct tree *t, const struct node *n)
{
	size_t max = 0;

	for (const struct node *c = tree_first_child(t, n); c;
	     c = tree_next_sibling(t, c)) {
		size_t l = 1 + strlen(node_name(c)) + subtree_len(t, c);
		if (l > max)
			max = l;
	}
	return max;
}

/*
 * Rename, in the index, every document under @p n from @p a to @p b: two
 * buffers holding n's old and new paths, with room for subtree_len(n) more.
 * Never allocates; a document the index cannot rename (ENOMEM) leaves it and
 * is signed again.
 */
static void rename_docs(struct model *m, struct node *n, char *a, size_t al,
			char *b, size_t bl)
{
	if (!(n->flags & NODE_DIR)) {
		if (!node_in_index(n))
			return;
		note_node(m, n); /* its symlinks' targets */
		if (index_rename(m, a, b)) {
			index_remove(m, a);
			set_status(m, n, NODE_UNKNOWN);
			if (m->hooks.resign)
				m->hooks.resign(m->hooks.arg, n);
		}
		return;
	}
	note_node(m, n); /* its symlink's target in dup-dirs/ */
	for (struct node *c = tree_first_child(m->tree, n); c;
	     c = tree_next_sibling(m->tree, c)) {
		const char *cn = node_name(c);
		size_t cl = strlen(cn), ca = al, cb = bl;
		if (ca)
			a[ca++] = '/';
		if (cb)
			b[cb++] = '/';
		memcpy(a + ca, cn, cl + 1);
		memcpy(b + cb, cn, cl + 1);
		rename_docs(m, c, a, ca + cl, b, cb + cl);
		a[al] = 0;
		b[bl] = 0;
	}
}

int model_move(struct model *m, struct node *n, struct node *dir,
	       const char *name)
{
	char *from = NULL, *dpath = NULL, *to = NULL, *a = NULL, *b = NULL;
	int ret = -ENOMEM;

	if (n == tree_root(m->tree) || tree_is_under(m->tree, dir, n))
		return -EINVAL;
	struct node *old = tree_child(m->tree, dir, name);
	if (old == n)
		return 0;
	/* All memory first: past this point nothing fails half-way. */
	from = tree_path(m->tree, n);
	dpath = tree_path(m->tree, dir);
	to = dpath ? im_path_join(dpath, name) : NULL;
	if (!from || !to)
		goto out;
	size_t sub = subtree_len(m->tree, n), fl = strlen(from),
	       tl = strlen(to);
	a = malloc(fl + sub + 1);
	b = malloc(tl + sub + 1);
	if (!a || !b)
		goto out;
	memcpy(a, from, fl + 1);
	memcpy(b, to, tl + 1);
	if (old)
		model_remove(m, old);
	note_entry(m, n);
	ret = tree_move(m->tree, n, dir, name);
	if (ret)
		goto out;
	note_entry(m, n);
	rename_docs(m, n, a, fl, b, tl);
	changed(m);
out:
	free(from);
	free(dpath);
	free(to);
	free(a);
	free(b);
	return ret;
}

/* The walk of model_sweep() (@p remove: the scan was whole, so a node it
 * did not see is gone) and model_unread(). */
static void sweep(struct model *m, struct node *dir, uint16_t gen, bool remove,
		  void (*unread)(struct node *n, void *arg), void *arg)
{
	struct node *c, *next;

	for (c = tree_first_child(m->tree, dir); c; c = next) {
		next = tree_next_sibling(m->tree, c);
		if (remove && c->seen != gen)
			model_remove(m, c);
		else if (c->flags & NODE_DIR)
			sweep(m, c, gen, remove, unread, arg);
		else if (c->scan_reads)
			unread(c, arg);
	}
}

void model_sweep(struct model *m, uint16_t gen,
		 void (*unread)(struct node *n, void *arg), void *arg)
{
	model_hold_index(m);
	sweep(m, tree_root(m->tree), gen, true, unread, arg);
	model_release_index(m);
}

void model_unread(struct model *m, void (*unread)(struct node *n, void *arg),
		  void *arg)
{
	sweep(m, tree_root(m->tree), 0, false, unread, arg);
}

static void expect_reads(struct model *m, struct node *dir)
{
	for (struct node *c = tree_first_child(m->tree, dir); c;
	     c = tree_next_sibling(m->tree, c)) {
		if (c->flags & NODE_DIR)
			expect_reads(m, c);
		else if (c->status != NODE_UNKNOWN &&
			 !im_state_lexicon_free(c->status))
			c->scan_reads = 1;
	}
}

void model_expect_reads(struct model *m)
{
	m->saved_stale = true;
	expect_reads(m, tree_root(m->tree));
}
