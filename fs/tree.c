/**
 * @file tree.c
 * The mirror of the source tree (tree.h).
 *
 * The slot table is an array of words: a live slot holds its node's address;
 * a detached node's, its address | 2 (still found by the links, no more by
 * tree_by_id()); a free one holds (next free slot << 32 | gen << 1 | 1), the
 * gen its next node will carry. Slots 0 and 1 are never used, so that every
 * node's inode numbers (view.h) stay clear of the fixed ones, and a link of
 * 0 (NO_SLOT) is none.
 *
 * The name hash is open addressing (linear probing, backward-shift
 * deletion) over 4-byte entries: a node's slot under the top 6 bits of the
 * hash, which spare most probes a visit to a node that is not the one
 * sought; the home comes from the low 32 bits, scaled to a size that grows
 * by a quarter.
 * Hence at most MAX_SLOTS (2^26) nodes.
 *
 * The distinct (mode, uid, gid) are kept in an array that only grows (a
 * source holds few of them) and found again through an open-addressing
 * table of their indices.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <xxhash.h>

#include "pool.h"
#include "tree.h"

#define FIRST_SLOT 2
#define NO_SLOT	   0
#define GEN_MASK   0x0fffffffu /* 28 bits: see view.c's inode layout */
#ifndef HASH_SLOT_BITS	       /* tests/unit/test_tree_limit.c sets fewer */
#define HASH_SLOT_BITS 26
#endif
#define HASH_TAG_BITS (32 - HASH_SLOT_BITS)
#define MAX_SLOTS     (1u << HASH_SLOT_BITS)

struct tree {
	pthread_rwlock_t lock;
	/* Writers wait here, not queued on lock, while a long reader holds
	 * it (tree_rdlock_long()). */
	pthread_mutex_t gate;
	pthread_cond_t gate_cv;
	unsigned long_readers; /* protected by gate */
	unsigned entering;     /* writers past the gate; protected by gate */
	/* Batches open (tree_batch_begin()) and ended; protected by gate.
	 * Waited on with batch_cv, apart from the writers' and long
	 * readers' waits, which a batch ended would wake for nothing. */
	unsigned batches;
	uint64_t batches_ended;
	pthread_cond_t batch_cv; /* on CLOCK_MONOTONIC */

	struct im_pool pool; /* the nodes */
	struct node *root;
	uint32_t *hash; /* by (parent, name): hash_entry(), or 0 */
	size_t hash_size, hash_used;
	uintptr_t *slots;
	uint32_t nslots, cap, free_slot;
	struct node_attr *attrs; /* interned; [0] is mode 0 owned by root */
	uint32_t nattrs, attrs_cap;
	uint32_t *attr_hash;	 /* index in attrs + 1, or 0: free */
	uint32_t attr_hash_size; /* a power of two, over twice nattrs */
	uint32_t new_attr[2];	 /* of new files, of new directories */
	int any_known;		 /* atomic: a node was marked NODE_KNOWN */
};

/* ---- Name hash ------------------------------------------------------------ */

#define SLOT_DETACHED 2

/* The node holding slot @p s (live or detached), or NULL for NO_SLOT. */
static inline struct node *slot_node(const struct tree *t, uint32_t s)
{
	return s ? (struct node *)(t->slots[s] & ~(uintptr_t)3) : NULL;
}

static uint64_t name_hash(uint32_t parent_slot, const char *name)
{
	return XXH3_64bits_withSeed(name, strlen(name), parent_slot);
}

static inline const char *name_of(const struct node *n)
{
	return node_name(n);
}

static inline uint64_t node_hash(const struct node *n)
{
	return name_hash(n->up, name_of(n));
}

/* An entry: the top HASH_TAG_BITS of the hash over the node's slot. */
static inline uint32_t hash_entry(uint64_t h, uint32_t slot)
{
	return (uint32_t)(h >> (64 - HASH_TAG_BITS)) << HASH_SLOT_BITS | slot;
}

static inline struct node *entry_node(const struct tree *t, uint32_t e)
{
	return slot_node(t, e & (MAX_SLOTS - 1));
}

/* Where hash @p h starts probing a table of @p size: its low 32 bits
 * scaled to the size (the entry's tag holds the top bits). */
static inline size_t hash_home(uint64_t h, size_t size)
{
	return (size_t)(((uint64_t)(uint32_t)h * size) >> 32);
}

static inline size_t hash_next(size_t i, size_t size)
{
	return i + 1 == size ? 0 : i + 1;
}

/* Put entry @p e of hash @p h in @p tab of @p size, which has room. */
static void hash_place(uint32_t *tab, size_t size, uint64_t h, uint32_t e)
{
	size_t i = hash_home(h, size);

	while (tab[i])
		i = hash_next(i, size);
	tab[i] = e;
}

/* Grow by a quarter, not double: the load stays within 3/5 to 3/4 (a
 * doubling table spends 4/3 to 8/3 entries per node). */
static int hash_grow(struct tree *t)
{
	size_t ns = t->hash_size ? t->hash_size + t->hash_size / 4 : 1024;
	uint32_t *nh = calloc(ns, sizeof(*nh));

	if (!nh)
		return -ENOMEM;
	for (size_t i = 0; i < t->hash_size; i++)
		if (t->hash[i])
			hash_place(nh, ns, node_hash(entry_node(t, t->hash[i])),
				   t->hash[i]);
	free(t->hash);
	t->hash = nh;
	t->hash_size = ns;
	return 0;
}

/* Room for one more entry at a load of 3/4 or less. */
static int hash_reserve(struct tree *t)
{
	if ((t->hash_used + 1) * 4 <= t->hash_size * 3)
		return 0;
	return hash_grow(t);
}

/* After hash_reserve(), or in place of an entry just deleted. */
static void hash_insert(struct tree *t, struct node *n)
{
	uint64_t h = node_hash(n);

	hash_place(t->hash, t->hash_size, h, hash_entry(h, n->slot));
	t->hash_used++;
}

/* Backward-shift deletion: no tombstones. Every entry's node must still
 * hold its slot (delete before slot_release()). */
static void hash_delete(struct tree *t, struct node *n)
{
	size_t size = t->hash_size, i = hash_home(node_hash(n), size), j;

	while (t->hash[i] && (t->hash[i] & (MAX_SLOTS - 1)) != n->slot)
		i = hash_next(i, size);
	if (!t->hash[i])
		return;
	for (j = i;;) {
		size_t home;
		bool stays;

		j = hash_next(j, size);
		if (!t->hash[j])
			break;
		/* hash[j] may fill the hole at i unless its home is in (i, j]. */
		home = hash_home(node_hash(entry_node(t, t->hash[j])), size);
		stays = i <= j ? (home > i && home <= j)
			       : (home > i || home <= j);
		if (!stays) {
			t->hash[i] = t->hash[j];
			i = j;
		}
	}
	t->hash[i] = 0;
	t->hash_used--;
}

/* ---- Slots ---------------------------------------------------------------- */

static int slot_reserve(struct tree *t)
{
	if (t->free_slot != NO_SLOT)
		return 0;
	/* Before the room check: the table grows past MAX_SLOTS (by half
	 * its size), and a slot at or above it does not fit a hash entry. */
	if (t->nslots >= MAX_SLOTS)
		return -ENOMEM;
	if (t->nslots < t->cap)
		return 0;
	uint32_t cap = t->cap ? t->cap + t->cap / 2 : 1024;
	if (cap > MAX_SLOTS)
		cap = MAX_SLOTS;
	uintptr_t *s = realloc(t->slots, cap * sizeof(*s));
	if (!s)
		return -ENOMEM;
	t->slots = s;
	t->cap = cap;
	return 0;
}

/* After slot_reserve() succeeded: never fails. */
static void slot_take(struct tree *t, struct node *n)
{
	uint32_t slot, gen = 0;

	if (t->free_slot != NO_SLOT) {
		slot = t->free_slot;
		uintptr_t v = t->slots[slot];
		t->free_slot = (uint32_t)(v >> 32);
		gen = (uint32_t)(v >> 1) & GEN_MASK;
	} else {
		slot = t->nslots++;
	}
	n->slot = slot;
	n->gen = gen;
	t->slots[slot] = (uintptr_t)n;
}

static void slot_release(struct tree *t, struct node *n)
{
	uint32_t gen = (n->gen + 1) & GEN_MASK;

	t->slots[n->slot] =
		(uintptr_t)t->free_slot << 32 | (uintptr_t)gen << 1 | 1;
	t->free_slot = n->slot;
}

/* ---- Permissions and owners ------------------------------------------------ */

static uint32_t attr_hash(const struct node_attr *a)
{
	return (uint32_t)XXH3_64bits(a, sizeof(*a));
}

static bool attr_eq(const struct node_attr *a, const struct node_attr *b)
{
	return a->mode == b->mode && a->uid == b->uid && a->gid == b->gid;
}

static int attr_hash_grow(struct tree *t)
{
	uint32_t ns = t->attr_hash_size ? t->attr_hash_size * 2 : 64;
	uint32_t *nh = calloc(ns, sizeof(*nh));

	if (!nh)
		return -ENOMEM;
	for (uint32_t i = 0; i < t->nattrs; i++) {
		uint32_t h = attr_hash(&t->attrs[i]) & (ns - 1);

		while (nh[h])
			h = (h + 1) & (ns - 1);
		nh[h] = i + 1;
	}
	free(t->attr_hash);
	t->attr_hash = nh;
	t->attr_hash_size = ns;
	return 0;
}

/* The index of @p a in t->attrs, added if new. @return 0 or -ENOMEM. */
static int attr_intern(struct tree *t, const struct node_attr *a, uint32_t *out)
{
	uint32_t h, mask;

	if (t->nattrs + 1 > t->attr_hash_size / 2 && attr_hash_grow(t))
		return -ENOMEM;
	mask = t->attr_hash_size - 1;
	for (h = attr_hash(a) & mask; t->attr_hash[h]; h = (h + 1) & mask) {
		if (attr_eq(&t->attrs[t->attr_hash[h] - 1], a)) {
			*out = t->attr_hash[h] - 1;
			return 0;
		}
	}
	if (t->nattrs == t->attrs_cap) {
		uint32_t cap = t->attrs_cap ? t->attrs_cap * 2 : 16;
		struct node_attr *v = realloc(t->attrs, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		t->attrs = v;
		t->attrs_cap = cap;
	}
	t->attrs[t->nattrs] = *a;
	t->attr_hash[h] = ++t->nattrs;
	*out = t->nattrs - 1;
	return 0;
}

const struct node_attr *tree_attr(const struct tree *t, const struct node *n)
{
	return &t->attrs[n->attr];
}

int tree_set_attr(struct tree *t, struct node *n, const struct node_attr *a)
{
	struct node_attr v = {a->mode & 07777, a->uid, a->gid};
	int ret = attr_intern(t, &v, &n->attr);

	if (ret)
		n->attr = 0;
	return ret;
}

/* ---- Life cycle ------------------------------------------------------------ */

#define NAME_AT offsetof(struct node, name_in)

/* Bytes for the name in @p n: at least a pointer's, for a rename that makes
 * it longer. */
static inline size_t name_room(const struct node *n)
{
	return (size_t)n->size8 * 8 - NAME_AT;
}

static struct node *node_new(struct tree *t, const char *name, bool dir)
{
	size_t len = strlen(name), room = len + 1 > 8 ? len + 1 : 8;
	size_t size = (NAME_AT + room + 7) & ~(size_t)7;
	bool out = size / 8 > UINT8_MAX; /* longer than any file name */
	char *copy = NULL;
	struct node *n;

	if (out) {
		size = (NAME_AT + 8 + 7) & ~(size_t)7;
		copy = strdup(name);
		if (!copy)
			return NULL;
	}
	n = im_pool_get(&t->pool, size);
	if (!n) {
		free(copy);
		return NULL;
	}
	memset(n, 0, size);
	n->size8 = (uint8_t)(size / 8);
	n->name_out = out;
	if (out)
		memcpy(n->name_in, &copy, sizeof(copy));
	else
		memcpy(n->name_in, name, len + 1);
	if (dir)
		n->wd = -1;
	n->flags = dir ? NODE_DIR : 0;
	n->status = NODE_UNKNOWN;
	n->attr = t->new_attr[dir];
	return n;
}

/* Give @p n the name @p name: in place if it fits, else in an allocation of
 * its own. @return 0 or -ENOMEM (then nothing changed). */
static int node_rename(struct node *n, const char *name)
{
	size_t len = strlen(name);
	char *out = NULL;

	if (len + 1 > name_room(n)) {
		out = strdup(name);
		if (!out)
			return -ENOMEM;
	}
	if (n->name_out)
		free((char *)node_name(n));
	n->name_out = out != NULL;
	if (out)
		memcpy(n->name_in, &out, sizeof(out));
	else
		memcpy(n->name_in, name, len + 1);
	return 0;
}

/* Free @p n's memory; its slot and links are the caller's business. */
static void node_free(struct tree *t, struct node *n)
{
	if (n->name_out)
		free((char *)node_name(n));
	im_pool_put(&t->pool, n, (size_t)n->size8 * 8);
}

int tree_new(uid_t uid, gid_t gid, struct tree **out)
{
	struct tree *t = calloc(1, sizeof(*t));
	pthread_rwlockattr_t ra;
	pthread_condattr_t ca;

	*out = NULL;
	if (!t)
		return -ENOMEM;
	im_pool_init(&t->pool);
	t->nslots = FIRST_SLOT;
	if (hash_grow(t) || slot_reserve(t) ||
	    attr_intern(t, &(struct node_attr){0, 0, 0}, &(uint32_t){0}) ||
	    attr_intern(t, &(struct node_attr){0644, uid, gid},
			&t->new_attr[0]) ||
	    attr_intern(t, &(struct node_attr){0755, uid, gid},
			&t->new_attr[1]))
		goto fail;
	t->root = node_new(t, "", true);
	if (!t->root)
		goto fail;
	slot_take(t, t->root);
	pthread_rwlockattr_init(&ra);
	/* Updates must not starve behind a stream of readers (ls -lR). */
	pthread_rwlockattr_setkind_np(
		&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&t->lock, &ra);
	pthread_rwlockattr_destroy(&ra);
	pthread_mutex_init(&t->gate, NULL);
	pthread_cond_init(&t->gate_cv, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&t->batch_cv, &ca);
	pthread_condattr_destroy(&ca);
	*out = t;
	return 0;
fail:
	free(t->hash);
	free(t->slots);
	free(t->attrs);
	free(t->attr_hash);
	im_pool_free(&t->pool);
	free(t);
	return -ENOMEM;
}

static void free_subtree(struct tree *t, struct node *n)
{
	struct node *c, *next;

	for (c = slot_node(t, n->down); c; c = next) {
		next = slot_node(t, c->right);
		free_subtree(t, c);
	}
	node_free(t, n);
}

void tree_free(struct tree *t)
{
	if (!t)
		return;
	free_subtree(t, t->root);
	free(t->hash);
	free(t->slots);
	free(t->attrs);
	free(t->attr_hash);
	im_pool_free(&t->pool);
	pthread_rwlock_destroy(&t->lock);
	pthread_mutex_destroy(&t->gate);
	pthread_cond_destroy(&t->gate_cv);
	pthread_cond_destroy(&t->batch_cv);
	free(t);
}

void tree_rdlock(struct tree *t)
{
	pthread_rwlock_rdlock(&t->lock);
}

void tree_wrlock(struct tree *t)
{
	pthread_mutex_lock(&t->gate);
	while (t->long_readers)
		pthread_cond_wait(&t->gate_cv, &t->gate);
	t->entering++;
	pthread_mutex_unlock(&t->gate);
	pthread_rwlock_wrlock(&t->lock);
	pthread_mutex_lock(&t->gate);
	if (!--t->entering)
		pthread_cond_broadcast(&t->gate_cv);
	pthread_mutex_unlock(&t->gate);
}

void tree_unlock(struct tree *t)
{
	pthread_rwlock_unlock(&t->lock);
}

void tree_rdlock_long(struct tree *t)
{
	pthread_mutex_lock(&t->gate);
	t->long_readers++;
	/* A writer already past the gate goes first, as it would have. */
	while (t->entering)
		pthread_cond_wait(&t->gate_cv, &t->gate);
	pthread_mutex_unlock(&t->gate);
	pthread_rwlock_rdlock(&t->lock);
}

void tree_unlock_long(struct tree *t)
{
	pthread_rwlock_unlock(&t->lock);
	pthread_mutex_lock(&t->gate);
	if (!--t->long_readers)
		pthread_cond_broadcast(&t->gate_cv);
	pthread_mutex_unlock(&t->gate);
}

void tree_batch_begin(struct tree *t)
{
	pthread_mutex_lock(&t->gate);
	t->batches++;
	pthread_mutex_unlock(&t->gate);
}

void tree_batch_end(struct tree *t)
{
	pthread_mutex_lock(&t->gate);
	t->batches--;
	t->batches_ended++;
	pthread_cond_broadcast(&t->batch_cv);
	pthread_mutex_unlock(&t->gate);
}

void tree_wait_batch(struct tree *t, unsigned max_ms)
{
	struct timespec end;

	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += max_ms / 1000;
	end.tv_nsec += (long)(max_ms % 1000) * 1000000;
	if (end.tv_nsec >= 1000000000) {
		end.tv_sec++;
		end.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&t->gate);
	/* Until one ends, not until none is open: batches that follow each
	 * other closely would otherwise keep the caller waiting for ever. */
	uint64_t ended = t->batches_ended;
	while (t->batches && t->batches_ended == ended)
		if (pthread_cond_timedwait(&t->batch_cv, &t->gate, &end) ==
		    ETIMEDOUT)
			break;
	pthread_mutex_unlock(&t->gate);
}

/* ---- Queries ----------------------------------------------------------------- */

struct node *tree_root(const struct tree *t)
{
	return t->root;
}

struct node *tree_child(const struct tree *t, const struct node *dir,
			const char *name)
{
	uint64_t h = name_hash(dir->slot, name);
	uint32_t tag = hash_entry(h, 0);

	for (size_t i = hash_home(h, t->hash_size); t->hash[i];
	     i = hash_next(i, t->hash_size)) {
		struct node *n;

		if ((t->hash[i] & ~(MAX_SLOTS - 1)) != tag)
			continue;
		n = entry_node(t, t->hash[i]);
		if (n->up == dir->slot && !strcmp(name_of(n), name))
			return n;
	}
	return NULL;
}

struct node *tree_lookup(const struct tree *t, const char *path)
{
	struct node *n = t->root;
	char comp[256];

	while (n && *path) {
		const char *slash = strchr(path, '/');
		size_t len = slash ? (size_t)(slash - path) : strlen(path);
		if (len >= sizeof(comp) || !(n->flags & NODE_DIR))
			return NULL;
		memcpy(comp, path, len);
		comp[len] = 0;
		n = tree_child(t, n, comp);
		path += len;
		if (*path == '/')
			path++;
	}
	return n;
}

struct node *tree_by_id(const struct tree *t, uint32_t slot, uint32_t gen)
{
	if (slot < FIRST_SLOT || slot >= t->nslots ||
	    (t->slots[slot] & (1 | SLOT_DETACHED)))
		return NULL;
	struct node *n = (struct node *)t->slots[slot];
	return n->gen == gen ? n : NULL;
}

struct node *tree_parent(const struct tree *t, const struct node *n)
{
	return slot_node(t, n->up);
}

struct node *tree_first_child(const struct tree *t, const struct node *n)
{
	return slot_node(t, n->down);
}

struct node *tree_next_sibling(const struct tree *t, const struct node *n)
{
	return slot_node(t, n->right);
}

size_t tree_path_len(const struct tree *t, const struct node *n)
{
	size_t len = 0;

	for (const struct node *p = n; p && p->up; p = slot_node(t, p->up))
		len += strlen(name_of(p)) + 1;
	return len ? len - 1 : 0;
}

size_t tree_path_into(const struct tree *t, const struct node *n, char *buf,
		      size_t cap)
{
	size_t end = tree_path_len(t, n);

	if (end >= cap)
		return (size_t)-1;
	buf[end] = 0;
	for (const struct node *p = n; p && p->up; p = slot_node(t, p->up)) {
		const char *name = name_of(p);
		size_t l = strlen(name);
		end -= l;
		memcpy(buf + end, name, l);
		if (end)
			buf[--end] = '/';
	}
	return tree_path_len(t, n);
}

char *tree_path(const struct tree *t, const struct node *n)
{
	size_t cap = tree_path_len(t, n) + 1;
	char *s = malloc(cap);

	if (s)
		tree_path_into(t, n, s, cap);
	return s;
}

void tree_mark_known(struct tree *t, struct node *n)
{
	if (__atomic_load_n(&n->flags, __ATOMIC_RELAXED) & NODE_KNOWN)
		return;
	__atomic_fetch_or(&n->flags, NODE_KNOWN, __ATOMIC_RELAXED);
	if (!__atomic_load_n(&t->any_known, __ATOMIC_RELAXED))
		__atomic_store_n(&t->any_known, 1, __ATOMIC_RELAXED);
}

bool tree_any_known(const struct tree *t)
{
	return __atomic_load_n(&t->any_known, __ATOMIC_RELAXED);
}

bool tree_is_under(const struct tree *t, const struct node *n,
		   const struct node *anc)
{
	for (; n; n = slot_node(t, n->up))
		if (n == anc)
			return true;
	return false;
}

/* ---- Changes ------------------------------------------------------------------- */

static void link_child(struct tree *t, struct node *dir, struct node *n)
{
	n->up = dir->slot;
	n->left = NO_SLOT;
	n->right = dir->down;
	if (dir->down)
		slot_node(t, dir->down)->left = n->slot;
	dir->down = n->slot;
}

static void unlink_child(struct tree *t, struct node *n)
{
	if (n->left)
		slot_node(t, n->left)->right = n->right;
	else if (n->up)
		slot_node(t, n->up)->down = n->right;
	if (n->right)
		slot_node(t, n->right)->left = n->left;
	n->right = n->left = NO_SLOT;
}

int tree_add(struct tree *t, struct node *parent, const char *name, bool dir,
	     struct node **out)
{
	struct node *n;

	*out = NULL;
	if (slot_reserve(t) || hash_reserve(t))
		return -ENOMEM;
	n = node_new(t, name, dir);
	if (!n)
		return -ENOMEM;
	slot_take(t, n);
	link_child(t, parent, n);
	hash_insert(t, n);
	*out = n;
	return 0;
}

int tree_move(struct tree *t, struct node *n, struct node *dir,
	      const char *name)
{
	/* Out of the hash first: its chain follows the old name. */
	hash_delete(t, n);
	if (node_rename(n, name)) {
		hash_insert(t, n);
		return -ENOMEM;
	}
	unlink_child(t, n);
	link_child(t, dir, n);
	hash_insert(t, n);
	return 0;
}

/* Out of the hash and of tree_by_id(); the slot stays the node's until
 * tree_node_free(), so that no link below names another node meanwhile. */
static void release_subtree(struct tree *t, struct node *n)
{
	for (struct node *c = slot_node(t, n->down); c;
	     c = slot_node(t, c->right))
		release_subtree(t, c);
	hash_delete(t, n);
	t->slots[n->slot] |= SLOT_DETACHED;
}

void tree_detach(struct tree *t, struct node *n)
{
	release_subtree(t, n);
	unlink_child(t, n);
	n->up = NO_SLOT;
}

void tree_node_free(struct tree *t, struct node *n)
{
	for (struct node *c = slot_node(t, n->down); c;
	     c = slot_node(t, c->right))
		c->up = NO_SLOT;
	unlink_child(t, n);
	slot_release(t, n);
	node_free(t, n);
}
