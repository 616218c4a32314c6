/**
 * @file view.c
 * The in-memory mirror of the source tree behind `by-doc/`, and the <member>
 * name encoding.
 *
 * Nodes are linked to their parent and siblings (so a directory rename is one
 * relink) and found by (parent, name) in one global chained hash table. The
 * index is keyed by path, so a directory rename also renames, in the index,
 * every document under it. Status counters are kept in step with every status
 * change so that `status` never walks the tree.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "daemon.h"

static size_t name_hash(const struct node *parent, const char *name)
{
	return (size_t)XXH3_64bits_withSeed(name, strlen(name),
					    (uint64_t)(uintptr_t)parent);
}

static int hash_grow(struct imfs *fs)
{
	size_t ns = fs->hash_size ? fs->hash_size * 2 : 1024;
	struct node **nh = calloc(ns, sizeof(*nh));

	if (!nh)
		return -ENOMEM;
	for (size_t i = 0; i < fs->hash_size; i++) {
		struct node *n = fs->hash[i], *next;
		for (; n; n = next) {
			next = n->hnext;
			size_t h = name_hash(n->parent, n->name) & (ns - 1);
			n->hnext = nh[h];
			nh[h] = n;
		}
	}
	free(fs->hash);
	fs->hash = nh;
	fs->hash_size = ns;
	return 0;
}

static void hash_insert(struct imfs *fs, struct node *n)
{
	if (fs->hash_used + 1 > fs->hash_size / 2 * 3 / 2)
		hash_grow(fs); /* on failure chains just grow longer */
	size_t h = name_hash(n->parent, n->name) & (fs->hash_size - 1);
	n->hnext = fs->hash[h];
	fs->hash[h] = n;
	fs->hash_used++;
}

static void hash_delete(struct imfs *fs, struct node *n)
{
	size_t h = name_hash(n->parent, n->name) & (fs->hash_size - 1);
	for (struct node **pp = &fs->hash[h]; *pp; pp = &(*pp)->hnext) {
		if (*pp == n) {
			*pp = n->hnext;
			n->hnext = NULL;
			fs->hash_used--;
			return;
		}
	}
}

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

static struct node *node_new(struct imfs *fs, const char *name, bool dir)
{
	struct node *n = calloc(1, sizeof(*n));

	if (!n)
		return NULL;
	n->name = strdup(name);
	if (!n->name) {
		free(n);
		return NULL;
	}
	n->id = fs->next_id++;
	n->wd = -1;
	n->flags = dir ? NODE_DIR : 0;
	n->status = NODE_UNKNOWN;
	n->seen = fs->scan_gen;
	n->mode = dir ? 0755 : 0644;
	n->uid = fs->owner_uid;
	n->gid = fs->owner_gid;
	return n;
}

void view_node_free(struct node *n)
{
	free(n->name);
	free(n);
}

int view_init(struct imfs *fs)
{
	struct stat st;

	fs->next_id = 1;
	if (hash_grow(fs))
		return -ENOMEM;
	fs->root = node_new(fs, "", true);
	if (!fs->root)
		return -ENOMEM;
	if (fstat(fs->srcfd, &st) == 0)
		view_set_stat(fs, fs->root, &st);
	fs->dirs = 1;
	return 0;
}

static void free_subtree(struct node *n)
{
	struct node *c, *next;
	for (c = n->child; c; c = next) {
		next = c->next;
		free_subtree(c);
	}
	view_node_free(n);
}

void view_release(struct imfs *fs)
{
	if (fs->root)
		free_subtree(fs->root);
	fs->root = NULL;
	free(fs->hash);
	fs->hash = NULL;
	free(fs->links);
	fs->links = NULL;
}

struct node *view_child(struct imfs *fs, struct node *dir, const char *name)
{
	size_t h = name_hash(dir, name) & (fs->hash_size - 1);
	for (struct node *n = fs->hash[h]; n; n = n->hnext)
		if (n->parent == dir && !strcmp(n->name, name))
			return n;
	return NULL;
}

struct node *view_lookup(struct imfs *fs, const char *path)
{
	struct node *n = fs->root;
	char comp[4096];

	while (n && *path) {
		const char *slash = strchr(path, '/');
		size_t len = slash ? (size_t)(slash - path) : strlen(path);
		if (len >= sizeof(comp) || !(n->flags & NODE_DIR))
			return NULL;
		memcpy(comp, path, len);
		comp[len] = 0;
		n = view_child(fs, n, comp);
		path += len;
		if (*path == '/')
			path++;
	}
	return n;
}

struct node *view_ensure(struct imfs *fs, const char *path, bool dir)
{
	struct node *n = fs->root;
	char comp[4096];

	while (*path) {
		const char *slash = strchr(path, '/');
		size_t len = slash ? (size_t)(slash - path) : strlen(path);
		bool last = !slash;
		if (len >= sizeof(comp) || !(n->flags & NODE_DIR))
			return NULL;
		memcpy(comp, path, len);
		comp[len] = 0;
		struct node *c = view_child(fs, n, comp);
		bool want_dir = last ? dir : true;
		if (c && !!(c->flags & NODE_DIR) != want_dir) {
			/* A file became a directory or the reverse. */
			view_remove(fs, c);
			c = NULL;
		}
		if (!c) {
			c = node_new(fs, comp, want_dir);
			if (!c)
				return NULL;
			link_child(n, c);
			hash_insert(fs, c);
			if (want_dir)
				fs->dirs++;
			else
				fs->count[5]++;
			view_changed(fs);
		}
		n = c;
		path += len;
		if (*path == '/')
			path++;
	}
	return n;
}

char *view_path(const struct node *n)
{
	size_t len = 0;
	const struct node *p;

	for (p = n; p && p->parent; p = p->parent)
		len += strlen(p->name) + 1;
	char *s = malloc(len + 1);
	if (!s)
		return NULL;
	s[len ? len - 1 : 0] = 0;
	size_t end = len ? len - 1 : 0;
	for (p = n; p && p->parent; p = p->parent) {
		size_t l = strlen(p->name);
		end -= l;
		memcpy(s + end, p->name, l);
		if (end)
			s[--end] = '/';
	}
	return s;
}

static int64_t mtime_ns(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

void view_set_stat(struct imfs *fs, struct node *n, const struct stat *st)
{
	if (n->mode != (st->st_mode & 07777) || n->uid != st->st_uid ||
	    n->gid != st->st_gid)
		view_changed(fs);
	n->mode = st->st_mode & 07777;
	n->uid = st->st_uid;
	n->gid = st->st_gid;
	if (n->flags & NODE_DIR) {
		n->mtime_ns = mtime_ns(st);
		n->src_ino = st->st_ino;
	}
}

/* ---- Hard links ---------------------------------------------------------- */

#define LINKS_SIZE 1024

static void links_remove(struct imfs *fs, struct node *n)
{
	if (!(n->flags & NODE_LINKED))
		return;
	size_t h = n->src_ino % fs->links_size;
	for (struct node **pp = &fs->links[h]; *pp; pp = &(*pp)->lnext) {
		if (*pp == n) {
			*pp = n->lnext;
			break;
		}
	}
	n->lnext = NULL;
	n->flags &= ~NODE_LINKED;
}

static void links_insert(struct imfs *fs, struct node *n)
{
	if (!fs->links) {
		fs->links = calloc(LINKS_SIZE, sizeof(*fs->links));
		if (!fs->links)
			return;
		fs->links_size = LINKS_SIZE;
	}
	size_t h = n->src_ino % fs->links_size;
	n->lnext = fs->links[h];
	fs->links[h] = n;
	n->flags |= NODE_LINKED;
}

void view_apply_links(struct imfs *fs, struct node *n, const struct stat *st,
		      const struct im_doc_sigs *d)
{
	if (!(n->flags & NODE_LINKED))
		return;
	size_t h = n->src_ino % fs->links_size;
	for (struct node *o = fs->links[h]; o; o = o->lnext) {
		if (o == n || o->src_ino != n->src_ino)
			continue;
		char *p = view_path(o);
		if (p)
			view_apply(fs, o, p, st, d);
		free(p);
	}
}

void view_changed(struct imfs *fs)
{
	fs->dirty = true;
	inval_request(fs);
}

static unsigned status_slot(uint8_t status)
{
	return status <= IM_DOC_ERROR ? status : 5;
}

void view_apply(struct imfs *fs, struct node *n, const char *path,
		const struct stat *st, const struct im_doc_sigs *d)
{
	bool was_doc = node_is_doc(n);

	fs->count[status_slot(n->status)]--;
	if (st && st->st_ino) {
		view_set_stat(fs, n, st);
		if (n->src_ino != st->st_ino || st->st_nlink < 2)
			links_remove(fs, n);
		n->size = (uint64_t)st->st_size;
		n->mtime_ns = mtime_ns(st);
		n->src_ino = st->st_ino;
		if (st->st_nlink > 1 && !(n->flags & NODE_LINKED))
			links_insert(fs, n);
	}
	n->status = d->status;
	fs->count[status_slot(n->status)]++;
	if (node_is_doc(n)) {
		if (im_index_put(fs->idx, path, d)) {
			/* Out of memory: show it as an error, retried later. */
			fs->count[status_slot(n->status)]--;
			n->status = IM_DOC_ERROR;
			fs->count[IM_DOC_ERROR]++;
			if (was_doc)
				im_index_remove(fs->idx, path);
		}
	} else if (was_doc) {
		im_index_remove(fs->idx, path);
	}
	view_changed(fs);
}

/* Detach @p n (and its subtree) from the hash, the index and the counters. */
static void detach(struct imfs *fs, struct node *n, char *path)
{
	struct node *c, *next;

	for (c = n->child; c; c = next) {
		next = c->next;
		size_t l = strlen(path);
		char *cp = malloc(l + strlen(c->name) + 2);
		if (cp) {
			if (l)
				memcpy(cp, path, l), cp[l++] = '/';
			strcpy(cp + l, c->name);
		}
		detach(fs, c, cp ? cp : path);
		if (cp)
			free(cp);
	}
	hash_delete(fs, n);
	if (n->flags & NODE_DIR) {
		watch_forget(fs, n);
		fs->dirs--;
	} else {
		if (node_is_doc(n))
			im_index_remove(fs->idx, path);
		fs->count[status_slot(n->status)]--;
		links_remove(fs, n);
	}
	unlink_child(n);
	n->parent = NULL;
	n->child = NULL;
	if (n->flags & (NODE_QUEUED | NODE_SIGNING))
		n->flags |= NODE_DEAD; /* a worker frees it */
	else
		view_node_free(n);
}

void view_remove(struct imfs *fs, struct node *n)
{
	if (n == fs->root)
		return;
	char *path = view_path(n);
	if (!path)
		return;
	detach(fs, n, path);
	free(path);
	view_changed(fs);
}

/* Rename, in the index, every document under @p n from @p from to @p to. */
static void rename_docs(struct imfs *fs, struct node *n, const char *from,
			const char *to)
{
	if (!(n->flags & NODE_DIR)) {
		if (node_is_doc(n))
			im_index_rename(fs->idx, from, to);
		return;
	}
	size_t fl = strlen(from), tl = strlen(to);
	for (struct node *c = n->child; c; c = c->next) {
		size_t cl = strlen(c->name);
		char *a = malloc(fl + cl + 2), *b = malloc(tl + cl + 2);
		if (a && b) {
			sprintf(a, "%s%s%s", from, fl ? "/" : "", c->name);
			sprintf(b, "%s%s%s", to, tl ? "/" : "", c->name);
			rename_docs(fs, c, a, b);
		}
		free(a);
		free(b);
	}
}

int view_move(struct imfs *fs, struct node *n, struct node *dir,
	      const char *name)
{
	char *from = NULL, *to = NULL, *nn = NULL;
	int ret = -ENOMEM;

	if (n == fs->root)
		return -EINVAL;
	/* Never move a directory under itself. */
	for (struct node *p = dir; p; p = p->parent)
		if (p == n)
			return -EINVAL;
	struct node *old = view_child(fs, dir, name);
	if (old == n)
		return 0;
	if (old)
		view_remove(fs, old);
	from = view_path(n);
	nn = strdup(name);
	if (!from || !nn)
		goto out;
	hash_delete(fs, n);
	unlink_child(n);
	free(n->name);
	n->name = nn;
	nn = NULL;
	link_child(dir, n);
	hash_insert(fs, n);
	to = view_path(n);
	if (to)
		rename_docs(fs, n, from, to);
	view_changed(fs);
	ret = 0;
out:
	free(from);
	free(to);
	free(nn);
	return ret;
}

static void sweep(struct imfs *fs, struct node *dir, uint32_t gen)
{
	struct node *c, *next;
	for (c = dir->child; c; c = next) {
		next = c->next;
		if (c->seen != gen)
			view_remove(fs, c);
		else if (c->flags & NODE_DIR)
			sweep(fs, c, gen);
	}
}

void view_sweep(struct imfs *fs, uint32_t gen)
{
	sweep(fs, fs->root, gen);
}

/* ---- Member names --------------------------------------------------------- */

char *member_encode(const char *path)
{
	size_t extra = 0;
	for (const char *p = path; *p; p++)
		if (*p == '%' || *p == '/')
			extra += 2;
	char *s = malloc(strlen(path) + extra + 1), *o = s;
	if (!s)
		return NULL;
	for (const char *p = path; *p; p++) {
		if (*p == '%') {
			memcpy(o, "%25", 3);
			o += 3;
		} else if (*p == '/') {
			memcpy(o, "%2F", 3);
			o += 3;
		} else {
			*o++ = *p;
		}
	}
	*o = 0;
	return s;
}

char *member_decode(const char *name)
{
	char *s = malloc(strlen(name) + 1), *o = s;
	if (!s)
		return NULL;
	for (const char *p = name; *p; p++) {
		if (*p != '%') {
			*o++ = *p;
		} else if (!strncmp(p, "%25", 3)) {
			*o++ = '%';
			p += 2;
		} else if (!strncmp(p, "%2F", 3)) {
			*o++ = '/';
			p += 2;
		} else {
			free(s);
			return NULL;
		}
	}
	*o = 0;
	/* Only canonical names: no empty component, no leading or double '/'. */
	if (!*s || s[0] == '/' || strstr(s, "//") || s[strlen(s) - 1] == '/') {
		free(s);
		return NULL;
	}
	return s;
}
