/**
 * @file tree.c
 * The mirror of the source tree (tree.h).
 *
 * The slot table is an array of words: a live slot holds its node's address;
 * a free one holds (next free slot << 32 | gen << 1 | 1), the gen its next
 * node will carry. Slots 0 and 1 are never used, so that every node's inode
 * numbers (view.h) stay clear of the fixed ones.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "tree.h"

#define FIRST_SLOT 2
#define NO_SLOT	   0
#define GEN_MASK   0x0fffffffu /* 28 bits: see view.c's inode layout */

struct tree {
	pthread_rwlock_t lock;
	struct node *root;
	struct node **hash; /* by (parent, name) */
	size_t hash_size, hash_used;
	uintptr_t *slots;
	uint32_t nslots, cap, free_slot;
	uid_t uid;
	gid_t gid;
	int any_known; /* atomic: a node was marked NODE_KNOWN */
};

/* ---- Name hash ------------------------------------------------------------ */

static size_t name_hash(const struct node *parent, const char *name)
{
	return (size_t)XXH3_64bits_withSeed(name, strlen(name),
					    (uint64_t)(uintptr_t)parent);
}

static int hash_grow(struct tree *t)
{
	size_t ns = t->hash_size ? t->hash_size * 2 : 1024;
	struct node **nh = calloc(ns, sizeof(*nh));

	if (!nh)
		return -ENOMEM;
	for (size_t i = 0; i < t->hash_size; i++) {
		struct node *n = t->hash[i], *next;
		for (; n; n = next) {
			next = n->hnext;
			size_t h = name_hash(n->parent, n->name) & (ns - 1);
			n->hnext = nh[h];
			nh[h] = n;
		}
	}
	free(t->hash);
	t->hash = nh;
	t->hash_size = ns;
	return 0;
}

static void hash_insert(struct tree *t, struct node *n)
{
	/* On failure to grow, chains just get longer. */
	if (t->hash_used + 1 > t->hash_size)
		hash_grow(t);
	size_t h = name_hash(n->parent, n->name) & (t->hash_size - 1);
	n->hnext = t->hash[h];
	t->hash[h] = n;
	t->hash_used++;
}

static void hash_delete(struct tree *t, struct node *n)
{
	size_t h = name_hash(n->parent, n->name) & (t->hash_size - 1);

	for (struct node **pp = &t->hash[h]; *pp; pp = &(*pp)->hnext) {
		if (*pp == n) {
			*pp = n->hnext;
			n->hnext = NULL;
			t->hash_used--;
			return;
		}
	}
}

/* ---- Slots ---------------------------------------------------------------- */

static bool slot_is_free(uintptr_t v)
{
	return v & 1;
}

static int slot_reserve(struct tree *t)
{
	if (t->free_slot != NO_SLOT || t->nslots < t->cap)
		return 0;
	uint32_t cap = t->cap ? t->cap + t->cap / 2 : 1024;
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

/* ---- Life cycle ------------------------------------------------------------ */

/* The name is kept right after the node, in the same allocation, until a
 * rename gives it one of its own: one malloc chunk less per file. */
static inline char *inline_name(struct node *n)
{
	return (char *)(n + 1);
}

static struct node *node_new(const struct tree *t, const char *name, bool dir)
{
	size_t len = strlen(name);
	struct node *n = calloc(1, sizeof(*n) + len + 1);

	if (!n)
		return NULL;
	n->name = memcpy(inline_name(n), name, len + 1);
	if (dir)
		n->wd = -1;
	n->flags = dir ? NODE_DIR : 0;
	n->status = NODE_UNKNOWN;
	n->mode = dir ? 0755 : 0644;
	n->uid = t->uid;
	n->gid = t->gid;
	return n;
}

void tree_node_free(struct node *n)
{
	if (n->name != inline_name(n))
		free(n->name);
	free(n);
}

int tree_new(uid_t uid, gid_t gid, struct tree **out)
{
	struct tree *t = calloc(1, sizeof(*t));
	pthread_rwlockattr_t ra;

	*out = NULL;
	if (!t)
		return -ENOMEM;
	t->uid = uid;
	t->gid = gid;
	t->nslots = FIRST_SLOT;
	if (hash_grow(t) || slot_reserve(t))
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
	*out = t;
	return 0;
fail:
	free(t->hash);
	free(t->slots);
	free(t);
	return -ENOMEM;
}

static void free_subtree(struct node *n)
{
	struct node *c, *next;

	for (c = n->child; c; c = next) {
		next = c->next;
		free_subtree(c);
	}
	tree_node_free(n);
}

void tree_free(struct tree *t)
{
	if (!t)
		return;
	free_subtree(t->root);
	free(t->hash);
	free(t->slots);
	pthread_rwlock_destroy(&t->lock);
	free(t);
}

void tree_rdlock(struct tree *t)
{
	pthread_rwlock_rdlock(&t->lock);
}

void tree_wrlock(struct tree *t)
{
	pthread_rwlock_wrlock(&t->lock);
}

void tree_unlock(struct tree *t)
{
	pthread_rwlock_unlock(&t->lock);
}

/* ---- Queries ----------------------------------------------------------------- */

struct node *tree_root(const struct tree *t)
{
	return t->root;
}

struct node *tree_child(const struct tree *t, const struct node *dir,
			const char *name)
{
	size_t h = name_hash(dir, name) & (t->hash_size - 1);

	for (struct node *n = t->hash[h]; n; n = n->hnext)
		if (n->parent == dir && !strcmp(n->name, name))
			return n;
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
	    slot_is_free(t->slots[slot]))
		return NULL;
	struct node *n = (struct node *)t->slots[slot];
	return n->gen == gen ? n : NULL;
}

size_t tree_path_len(const struct node *n)
{
	size_t len = 0;

	for (const struct node *p = n; p && p->parent; p = p->parent)
		len += strlen(p->name) + 1;
	return len ? len - 1 : 0;
}

size_t tree_path_into(const struct node *n, char *buf, size_t cap)
{
	size_t end = tree_path_len(n);

	if (end >= cap)
		return (size_t)-1;
	buf[end] = 0;
	for (const struct node *p = n; p && p->parent; p = p->parent) {
		size_t l = strlen(p->name);
		end -= l;
		memcpy(buf + end, p->name, l);
		if (end)
			buf[--end] = '/';
	}
	return tree_path_len(n);
}

char *tree_path(const struct node *n)
{
	size_t cap = tree_path_len(n) + 1;
	char *s = malloc(cap);

	if (s)
		tree_path_into(n, s, cap);
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

bool tree_is_under(const struct node *n, const struct node *anc)
{
	for (; n; n = n->parent)
		if (n == anc)
			return true;
	return false;
}

/* ---- Changes ------------------------------------------------------------------- */

static void link_child(struct node *dir, struct node *n)
{
	n->parent = dir;
	n->prev = NULL;
	n->next = dir->child;
	if (dir->child)
		dir->child->prev = n;
	dir->child = n;
}

static void unlink_child(struct node *n)
{
	if (n->prev)
		n->prev->next = n->next;
	else if (n->parent)
		n->parent->child = n->next;
	if (n->next)
		n->next->prev = n->prev;
	n->next = n->prev = NULL;
}

int tree_add(struct tree *t, struct node *parent, const char *name, bool dir,
	     struct node **out)
{
	struct node *n;

	*out = NULL;
	if (slot_reserve(t))
		return -ENOMEM;
	n = node_new(t, name, dir);
	if (!n)
		return -ENOMEM;
	slot_take(t, n);
	link_child(parent, n);
	hash_insert(t, n);
	*out = n;
	return 0;
}

int tree_move(struct tree *t, struct node *n, struct node *dir,
	      const char *name)
{
	char *nn = strdup(name);

	if (!nn)
		return -ENOMEM;
	hash_delete(t, n);
	unlink_child(n);
	if (n->name != inline_name(n))
		free(n->name);
	n->name = nn;
	link_child(dir, n);
	hash_insert(t, n);
	return 0;
}

static void release_subtree(struct tree *t, struct node *n)
{
	for (struct node *c = n->child; c; c = c->next)
		release_subtree(t, c);
	hash_delete(t, n);
	slot_release(t, n);
}

void tree_detach(struct tree *t, struct node *n)
{
	release_subtree(t, n);
	unlink_child(n);
	n->parent = NULL;
}
