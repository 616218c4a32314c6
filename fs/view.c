/**
 * @file view.c
 * The read side of the view (view.h).
 *
 * Members: a cluster's or a dupes/ directory's entries are the documents the
 * index lists there, each named member_name(path) and standing for the
 * document's own symlink inode (ino.h). A plain member name is decoded and
 * checked against the index; a shortened one (member.h) is found by listing
 * the directory's members.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ctab.h"
#include "dirgroups.h"
#include "escape.h"
#include "ino.h"
#include "member.h"
#include "model.h"
#include "redundant.h"
#include "status.h"
#include "view.h"

/* ---- Who may see what (allow_other) ------------------------------------------ */

static bool in_group(const struct vcaller *who, gid_t gid)
{
	if (who->gid == gid)
		return true;
	for (int i = 0; i < who->ngroups; i++)
		if (who->groups[i] == gid)
			return true;
	return false;
}

static bool perm_ok(const struct imfs *fs, const struct node *n,
		    const struct vcaller *who, unsigned bit)
{
	const struct node_attr *a = tree_attr(fs->model->tree, n);
	unsigned m = a->mode;

	if (who->uid == a->uid)
		return (m >> 6) & bit;
	if (in_group(who, a->gid))
		return (m >> 3) & bit;
	return m & bit;
}

static bool restricted(const struct imfs *fs, const struct vcaller *who)
{
	return fs->opts->allow_other && who && who->uid != 0;
}

/* Could the caller search every directory from SOURCE down to @p dir's
 * parent, and @p dir itself (@p bits of it)? */
static bool may_reach(const struct imfs *fs, const struct node *dir,
		      const struct vcaller *who, unsigned bits)
{
	if (!restricted(fs, who))
		return true;
	if (!perm_ok(fs, dir, who, bits))
		return false;
	for (const struct node *p = tree_parent(fs->model->tree, dir); p;
	     p = tree_parent(fs->model->tree, p))
		if (!perm_ok(fs, p, who, 1))
			return false;
	return true;
}

/*
 * With allow_other, a caller other than root sees a document only if it
 * could read the source file and search every directory above it, with its
 * uid, its group and its supplementary groups (issue 12).
 */
static bool may_see(const struct imfs *fs, const struct node *n,
		    const struct vcaller *who)
{
	return may_reach(fs, n, who, 4);
}

struct count_seen {
	struct imfs *fs;
	const struct vcaller *who;
	unsigned n;
};

static int count_seen_cb(const char *path, void *arg)
{
	struct count_seen *c = arg;
	struct node *n = tree_lookup(c->fs->model->tree, path);

	if (n && node_in_index(n) && may_see(c->fs, n, c->who))
		c->n++;
	return c->n >= 2; /* two are enough */
}

static int members_foreach(struct imfs *fs, const struct vobj *dir,
			   const struct vcaller *who, im_index_path_cb cb,
			   void *arg);

/* A cluster is shown to a caller who may see two of its members or more:
 * one alone would tell of the others. */
static bool cluster_shown(struct imfs *fs, const struct im_sig *sig,
			  const struct vcaller *who)
{
	if (!restricted(fs, who))
		return true;
	struct count_seen c = {fs, who, 0};
	struct vobj o = {.kind = V_CLUSTER, .sig = *sig};
	members_foreach(fs, &o, who, count_seen_cb, &c);
	return c.n >= 2;
}

/*
 * Is the caller a thread of this daemon? With MOUNTPOINT inside SOURCE our
 * own walks cross into the mount; the view is then shown to us as an empty
 * directory, so that it is never walked, watched or signed as a document.
 */
static bool self_call(const struct imfs *fs, const struct vcaller *who)
{
	return fs->mnt_inside && who &&
	       syscall(SYS_tgkill, getpid(), who->pid, 0) == 0;
}

/* ---- Resolving ----------------------------------------------------------------- */

static int stop_cb(const char *path, void *arg)
{
	(void)path;
	(void)arg;
	return 1;
}

static bool cluster_exists(struct imfs *fs, const struct im_sig *sig)
{
	return im_index_cluster_members(fs->model->idx, sig, stop_cb, NULL) ==
	       1;
}

/* ---- Duplicate directories (dup-dirs/) ---------------------------------------- */

struct group_has {
	const char *dir;   /* in the group? */
	const char *first; /* and its first directory? (NULL: any place) */
	bool yes;
};

static int group_has_cb(const char *const *dirs, size_t n, size_t docs,
			void *arg)
{
	struct group_has *h = arg;

	(void)docs;
	for (size_t i = 0; i < n && !h->yes; i++)
		h->yes = !strcmp(dirs[i], h->dir) &&
			 (!h->first || !strcmp(dirs[0], h->first));
	return 0;
}

/* Whether directory @p n is in a group of dup-dirs/ (as its first
 * directory, when @p first). */
static bool dir_grouped(struct imfs *fs, const struct node *n, bool first)
{
	char *path = tree_path(fs->model->tree, n);
	struct group_has h = {path, first ? path : NULL, false};

	if (path)
		dirgroups_of(fs, path, group_has_cb, &h);
	free(path);
	return h.yes;
}

static int dirgroup_get(struct imfs *fs, struct node *n, enum ino_sub sub,
			struct vobj *out)
{
	if (sub == SUB_DIRGROUP && dir_grouped(fs, n, true))
		out->kind = V_DIRGROUP;
	else if (sub == SUB_DIRLINK && dir_grouped(fs, n, false))
		out->kind = V_DIRLINK;
	else
		return -ENOENT;
	return 0;
}

/* The directories of a group that the caller may see, by member name. */
struct group_seen {
	struct imfs *fs;
	const struct vcaller *who;
	const char *name;  /* the member name looked for, or NULL */
	struct node *node; /* its directory, when found */
	struct node *first;
	unsigned seen;
};

static int group_seen_cb(const char *const *dirs, size_t n, size_t docs,
			 void *arg)
{
	struct group_seen *g = arg;

	(void)docs;
	for (size_t i = 0; i < n; i++) {
		struct node *d = tree_lookup(g->fs->model->tree, dirs[i]);

		if (!d || !(d->flags & NODE_DIR) ||
		    !may_reach(g->fs, d, g->who, 1)) /* could search it */
			continue;
		if (i == 0)
			g->first = d;
		g->seen++;
		if (g->name && !g->node) {
			char *name = member_name(dirs[i]);
			if (name && !strcmp(name, g->name))
				g->node = d;
			free(name);
		}
	}
	return 0;
}

/* A group is shown to a caller who may see its first directory (its name)
 * and one more: one alone would tell of the others. */
static bool group_shown(const struct group_seen *g)
{
	return g->first && g->seen >= 2;
}

/* dup-dirs/<name>: the group whose first directory is named @p name. */
static int lookup_dirgroup(struct imfs *fs, const char *name,
			   const struct vcaller *who, struct vobj *out)
{
	char *path = member_is_short(name) ? NULL : member_decode(name);
	struct node *n = path ? tree_lookup(fs->model->tree, path) : NULL;
	struct group_seen g = {fs, who, NULL, NULL, NULL, 0};

	if (member_is_short(name)) {
		/* Shortened: the group whose first directory has that name. */
		struct vlist l;
		struct vobj top = {.kind = V_DUPDIRS};
		int ret = view_list(fs, &top, who, &l);
		for (size_t i = 0; !ret && i < l.n && !n; i++)
			if (!strcmp(l.v[i].name, name))
				n = tree_by_id(fs->model->tree,
					       ino_slot(l.v[i].st.st_ino),
					       ino_gen(l.v[i].st.st_ino));
		if (!ret)
			view_list_free(&l);
	}
	free(path);
	if (!n || !(n->flags & NODE_DIR) || !dir_grouped(fs, n, true))
		return -ENOENT;
	path = tree_path(fs->model->tree, n);
	if (!path)
		return -ENOMEM;
	dirgroups_of(fs, path, group_seen_cb, &g);
	free(path);
	if (!group_shown(&g) || g.first != n)
		return -ENOENT;
	out->kind = V_DIRGROUP;
	out->node = n;
	return 0;
}

/* dup-dirs/<group>/<name>: a directory of the group of @p dir. */
static int lookup_dirlink(struct imfs *fs, const struct vobj *dir,
			  const char *name, const struct vcaller *who,
			  struct vobj *out)
{
	char *path = tree_path(fs->model->tree, dir->node);
	struct group_seen g = {fs, who, name, NULL, NULL, 0};

	if (!path)
		return -ENOMEM;
	dirgroups_of(fs, path, group_seen_cb, &g);
	free(path);
	if (!group_shown(&g) || g.first != dir->node || !g.node)
		return -ENOENT;
	out->kind = V_DIRLINK;
	out->node = g.node;
	return 0;
}

int view_get(struct imfs *fs, uint64_t ino, struct vobj *out)
{
	memset(out, 0, sizeof(*out));
	switch (ino) {
	case INO_ROOT: out->kind = V_ROOT; return 0;
	case INO_STATUS: out->kind = V_STATUS; return 0;
	case INO_CLUSTERS: out->kind = V_CLUSTERS; return 0;
	case INO_REDUNDANT: out->kind = V_REDUNDANT; return 0;
	case INO_DUPDIRS: out->kind = V_DUPDIRS; return 0;
	}
	if (ino & CTAB_INO_BIT) {
		out->kind = V_CLUSTER;
		if (ctab_name(fs->ctab, ino, &out->sig) ||
		    !cluster_exists(fs, &out->sig))
			return -ENOENT;
		return 0;
	}
	struct node *n =
		tree_by_id(fs->model->tree, ino_slot(ino), ino_gen(ino));
	if (!n)
		return -ENOENT;
	out->node = n;
	if ((n->flags & NODE_DIR) && ino_sub(ino) != SUB_DIR)
		return dirgroup_get(fs, n, ino_sub(ino), out);
	bool doc = node_is_doc(n);
	switch (ino_sub(ino)) {
	case SUB_DIR:
		out->kind = (n->flags & NODE_DIR) ? V_DIR : V_DOC;
		return (n->flags & NODE_DIR) || doc ? 0 : -ENOENT;
	case SUB_DUPES: out->kind = V_DUPES; break;
	case SUB_FILE: out->kind = V_FILE; break;
	case SUB_SIGS: out->kind = V_SIGS; break;
	case SUB_SIMS: out->kind = V_SIMS; break;
	case SUB_MEMBER:
		/* Binary files and failed extractions are members too, of
		 * their exact copies' clusters (model.h). */
		out->kind = V_MEMBER;
		return node_in_index(n) ? 0 : -ENOENT;
	case SUB_CLUSTER_LINK: out->kind = V_CLUSTER_LINK; break;
	default: return -ENOENT;
	}
	return doc ? 0 : -ENOENT;
}

struct keeper_of {
	char *keeper;
	double similarity;
};

static int keeper_cb(const char *path, const char *keeper, double similarity,
		     void *arg)
{
	struct keeper_of *k = arg;

	(void)path;
	k->keeper = strdup(keeper);
	k->similarity = similarity;
	return 0;
}

/* A planned document is in the caller's redundant/ only if they may see its
 * keeper: else it would tell of a copy they cannot read. */
static bool keeper_seen(struct imfs *fs, const char *keeper,
			const struct vcaller *who)
{
	const struct node *kn;

	if (!restricted(fs, who))
		return true;
	kn = keeper ? tree_lookup(fs->model->tree, keeper) : NULL;
	return kn && node_in_index(kn) && may_see(fs, kn, who);
}

/* Whether document @p path is in @p who's redundant/. */
static bool planned_for(struct imfs *fs, const char *path,
			const struct vcaller *who)
{
	struct keeper_of k = {NULL, 0};
	bool yes =
		redundant_find(fs, path, restricted(fs, who) ? keeper_cb : NULL,
			       &k) == 1 &&
		keeper_seen(fs, k.keeper, who);

	free(k.keeper);
	return yes;
}

struct path_cb {
	struct imfs *fs;
	const struct vcaller *who;
	im_index_path_cb cb;
	void *arg;
};

static int planned_cb(const char *path, const char *keeper, double similarity,
		      void *arg)
{
	const struct path_cb *p = arg;

	(void)similarity;
	if (!keeper_seen(p->fs, keeper, p->who))
		return 0;
	return p->cb(path, p->arg);
}

/* Calls @p cb for each member path of a cluster, dupes or redundant
 * directory @p dir (redundant/: those whose keeper @p who may see). */
static int members_foreach(struct imfs *fs, const struct vobj *dir,
			   const struct vcaller *who, im_index_path_cb cb,
			   void *arg)
{
	if (dir->kind == V_REDUNDANT) {
		struct path_cb p = {fs, who, cb, arg};

		return redundant_foreach(fs, planned_cb, &p);
	}
	if (dir->kind == V_CLUSTER)
		return im_index_cluster_members(fs->model->idx, &dir->sig, cb,
						arg);
	char *path = tree_path(fs->model->tree, dir->node);
	if (!path)
		return -ENOMEM;
	int ret = im_index_dupes(fs->model->idx, path, cb, arg);
	free(path);
	return ret;
}

struct find_short {
	const char *name;
	char *path; /* found */
};

static int find_short_cb(const char *path, void *arg)
{
	struct find_short *f = arg;
	char *name = member_name(path);
	int ret = name && !strcmp(name, f->name);

	free(name);
	if (ret)
		f->path = strdup(path);
	return ret;
}

static int equal_cb(const char *path, void *arg)
{
	return strcmp(path, arg) == 0;
}

/* The document named @p name in cluster, dupes or redundant directory
 * @p dir. */
static int lookup_member(struct imfs *fs, const struct vobj *dir,
			 const char *name, const struct vcaller *who,
			 struct node **out)
{
	char *path = NULL, *canon = NULL;
	int ret = -ENOENT;

	if (member_is_short(name)) {
		struct find_short f = {name, NULL};
		members_foreach(fs, dir, who, find_short_cb, &f);
		path = f.path;
	} else {
		path = member_decode(name);
		canon = path ? member_name(path) : NULL;
		if (!canon || strcmp(canon, name))
			goto out;
		if (dir->kind == V_CLUSTER) {
			struct im_sig s;
			if (im_index_cluster_of(fs->model->idx, path, &s) ||
			    im_sig_cmp(&s, &dir->sig))
				goto out;
		} else if (dir->kind == V_REDUNDANT) {
			if (!planned_for(fs, path, who))
				goto out;
		} else if (members_foreach(fs, dir, who, equal_cb, path) != 1) {
			goto out;
		}
	}
	if (!path)
		goto out;
	*out = tree_lookup(fs->model->tree, path);
	if (*out && node_in_index(*out))
		ret = 0;
out:
	free(path);
	free(canon);
	return ret;
}

static int lookup_cluster(struct imfs *fs, const char *name,
			  const struct vcaller *who, struct vobj *out)
{
	char hex[IM_SIG_HEX_LEN + 1];

	out->kind = V_CLUSTER;
	if (strlen(name) != IM_SIG_HEX_LEN || im_sig_parse(name, &out->sig))
		return -ENOENT;
	/* Only the canonical lower-case spelling is a name. */
	im_sig_hex(&out->sig, hex);
	if (strcmp(hex, name) || !cluster_exists(fs, &out->sig) ||
	    !cluster_shown(fs, &out->sig, who))
		return -ENOENT;
	return 0;
}

/* by-doc/.../keeper: the keeper's own member symlink, only while the
 * document is planned (DESIGN §2). */
static int lookup_keeper(struct imfs *fs, struct node *doc,
			 const struct vcaller *who, struct vobj *out)
{
	char *path = tree_path(fs->model->tree, doc), *keeper;
	struct keeper_of k = {NULL, 0};
	int ret = path ? redundant_find(fs, path, keeper_cb, &k) : -ENOMEM;

	keeper = k.keeper;
	free(path);
	if (ret == 1 && !keeper)
		ret = -ENOMEM;
	if (ret == 1) {
		out->kind = V_MEMBER;
		out->node = tree_lookup(fs->model->tree, keeper);
		ret = out->node && node_is_doc(out->node) &&
				      may_see(fs, out->node, who)
			      ? 0
			      : -ENOENT;
		if (!ret)
			tree_mark_known(fs->model->tree, out->node);
	} else if (ret == 0) {
		ret = -ENOENT;
	}
	free(keeper);
	return ret;
}

/* by-doc/.../cluster: only for a document in a cluster the caller may see
 * in clusters/ (else the link would tell of a copy they cannot read). */
static int lookup_cluster_link(struct imfs *fs, struct node *doc,
			       const struct vcaller *who, struct vobj *out)
{
	char *path = tree_path(fs->model->tree, doc);
	int ret;

	if (!path)
		return -ENOMEM;
	ret = im_index_cluster_of(fs->model->idx, path, &out->sig);
	free(path);
	if (ret || !cluster_shown(fs, &out->sig, who))
		return -ENOENT;
	out->kind = V_CLUSTER_LINK;
	out->node = doc;
	tree_mark_known(fs->model->tree, doc);
	return 0;
}

/* Anything of @p dir handed out from here on may be held by the kernel:
 * the flags say what the model must then drop at a change (model.h). */
static void mark_dir_known(struct imfs *fs, const struct vobj *dir)
{
	if (dir->kind == V_REDUNDANT)
		model_mark_known(&fs->model->redundant_known);
	else if (dir->kind == V_DUPDIRS || dir->kind == V_DIRGROUP)
		model_mark_known(&fs->model->dupdirs_known);
}

int view_lookup(struct imfs *fs, const struct vobj *dir, const char *name,
		const struct vcaller *who, struct vobj *out)
{
	struct node *n;
	int ret;

	memset(out, 0, sizeof(*out));
	mark_dir_known(fs, dir);
	switch (dir->kind) {
	case V_ROOT:
		if (self_call(fs, who))
			return -ENOENT;
		if (!strcmp(name, "status")) {
			out->kind = V_STATUS;
		} else if (!strcmp(name, "clusters")) {
			out->kind = V_CLUSTERS;
		} else if (!strcmp(name, "redundant")) {
			out->kind = V_REDUNDANT;
		} else if (!strcmp(name, "dup-dirs")) {
			out->kind = V_DUPDIRS;
		} else if (!strcmp(name, "by-doc")) {
			out->kind = V_DIR;
			out->node = tree_root(fs->model->tree);
		} else {
			return -ENOENT;
		}
		break;
	case V_CLUSTERS:
		ret = lookup_cluster(fs, name, who, out);
		if (!ret)
			model_mark_clusters_known(fs->model);
		return ret;
	case V_DIR:
		/* Names in a source directory the caller cannot search. */
		if (!may_reach(fs, dir->node, who, 1))
			return -EACCES;
		n = tree_child(fs->model->tree, dir->node, name);
		if (!n || (!(n->flags & NODE_DIR) && !node_is_doc(n)))
			return -ENOENT;
		out->kind = (n->flags & NODE_DIR) ? V_DIR : V_DOC;
		out->node = n;
		break;
	case V_DOC:
		/* What a document has to say is for those who may read it. */
		if (!may_see(fs, dir->node, who))
			return -EACCES;
		out->node = dir->node;
		if (!strcmp(name, "dupes"))
			out->kind = V_DUPES;
		else if (!strcmp(name, "file"))
			out->kind = V_FILE;
		else if (!strcmp(name, "signatures"))
			out->kind = V_SIGS;
		else if (!strcmp(name, "keeper"))
			return lookup_keeper(fs, dir->node, who, out);
		else if (!strcmp(name, "cluster"))
			return lookup_cluster_link(fs, dir->node, who, out);
		else if (!strcmp(name, "similarity"))
			out->kind = V_SIMS;
		else
			return -ENOENT;
		break;
	case V_CLUSTER:
	case V_DUPES:
	case V_REDUNDANT:
		ret = lookup_member(fs, dir, name, who, &out->node);
		if (ret)
			return ret;
		if (!may_see(fs, out->node, who))
			return -ENOENT;
		out->kind = V_MEMBER;
		break;
	case V_DUPDIRS:
		ret = lookup_dirgroup(fs, name, who, out);
		if (ret)
			return ret;
		break;
	case V_DIRGROUP:
		ret = lookup_dirlink(fs, dir, name, who, out);
		if (ret)
			return ret;
		break;
	default: return -ENOTDIR;
	}
	if (out->node)
		tree_mark_known(fs->model->tree, out->node);
	return 0;
}

/* ---- Attributes ------------------------------------------------------------------ */

static void set_time(struct stat *st, int64_t ns)
{
	st->st_mtim.tv_sec = ns / 1000000000;
	st->st_mtim.tv_nsec = ns % 1000000000;
	st->st_atim = st->st_ctim = st->st_mtim;
}

/* A document shown as a directory: searchable wherever it is readable. */
static mode_t doc_dir_mode(mode_t mode)
{
	mode_t m = mode & 0777;
	return S_IFDIR | m | ((m & 0444) >> 2);
}

static size_t target_len(const struct imfs *fs, const struct node *n)
{
	return strlen(fs->source_real) + 1 + tree_path_len(fs->model->tree, n);
}

static uint64_t vobj_ino(struct imfs *fs, const struct vobj *o)
{
	static const enum ino_sub sub[] = {
		[V_DIR] = SUB_DIR,     [V_DOC] = SUB_DIR,
		[V_DUPES] = SUB_DUPES, [V_FILE] = SUB_FILE,
		[V_SIGS] = SUB_SIGS,   [V_MEMBER] = SUB_MEMBER,
		[V_SIMS] = SUB_SIMS,
	};

	switch (o->kind) {
	case V_ROOT: return INO_ROOT;
	case V_STATUS: return INO_STATUS;
	case V_CLUSTERS: return INO_CLUSTERS;
	case V_REDUNDANT: return INO_REDUNDANT;
	case V_DUPDIRS: return INO_DUPDIRS;
	case V_DIRGROUP: return node_ino(o->node, SUB_DIRGROUP);
	case V_DIRLINK: return node_ino(o->node, SUB_DIRLINK);
	case V_CLUSTER_LINK: return node_ino(o->node, SUB_CLUSTER_LINK);
	case V_CLUSTER: return ctab_ino(fs->ctab, &o->sig);
	default: return node_ino(o->node, sub[o->kind]);
	}
}

static size_t sigs_text(struct imfs *fs, const struct node *n, char *out,
			size_t cap);

/* Components of the document's path: by-doc/ and each go up one level. */
static size_t doc_depth(const struct tree *t, const struct node *n)
{
	size_t d = 0;

	for (; (n = tree_parent(t, n));)
		d++;
	return d;
}

/* "../" per level up to the mount's root, then clusters/<sig>. */
static size_t cluster_link_len(const struct tree *t, const struct node *n)
{
	return 3 * (doc_depth(t, n) + 1) + strlen("clusters/") + IM_SIG_HEX_LEN;
}

static mode_t kind_type(enum vkind k)
{
	switch (k) {
	case V_STATUS:
	case V_SIGS:
	case V_SIMS: return S_IFREG;
	case V_FILE:
	case V_MEMBER:
	case V_DIRLINK:
	case V_CLUSTER_LINK: return S_IFLNK;
	default: return S_IFDIR;
	}
}

void view_stat(struct imfs *fs, const struct vobj *o, const struct vcaller *who,
	       struct stat *st)
{
	const struct node *n = o->node;
	const struct node_attr *a = n ? tree_attr(fs->model->tree, n) : NULL;
	char *text;
	size_t len;

	memset(st, 0, sizeof(*st));
	st->st_ino = vobj_ino(fs, o);
	st->st_uid = a ? a->uid : fs->owner_uid;
	st->st_gid = a ? a->gid : fs->owner_gid;
	st->st_nlink = 1;
	st->st_blksize = 4096;
	set_time(st, n ? n->mtime_ns : (int64_t)fs->started * 1000000000);
	if (S_ISDIR(kind_type(o->kind)))
		set_time(st, fs->model->clock_ns); /* see model.h */
	/*
	 * A directory's link count is 2 plus its subdirectories, which tools
	 * such as find may use to stop looking for more. Counting those of
	 * clusters/ or a source directory costs a walk of them: the ones
	 * that hold subdirectories say 1, "not counted", as btrfs does; those
	 * of symlinks only (a cluster, dupes/, redundant/) say 2, which is
	 * exact.
	 */
	switch (o->kind) {
	case V_ROOT:
	case V_CLUSTERS:
	case V_DUPDIRS: st->st_mode = S_IFDIR | 0555; break;
	case V_CLUSTER:
	case V_REDUNDANT:
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2;
		break;
	case V_CLUSTER_LINK:
		st->st_mode = S_IFLNK | 0777;
		st->st_size = (off_t)cluster_link_len(fs->model->tree, o->node);
		set_time(st, fs->model->clock_ns); /* it follows the index */
		break;
	case V_DIRGROUP:
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2;
		st->st_uid = fs->owner_uid;
		st->st_gid = fs->owner_gid;
		break;
	case V_DIRLINK:
		st->st_mode = S_IFLNK | 0777;
		st->st_size = (off_t)target_len(fs, n);
		set_time(st, fs->model->clock_ns); /* it follows the index */
		break;
	case V_STATUS:
		st->st_mode = S_IFREG | 0444;
		if (!view_text(fs, o, NULL, &text, &len)) {
			st->st_size = (off_t)len;
			free(text);
		}
		set_time(st, (int64_t)time(NULL) * 1000000000);
		break;
	case V_DIR:
	case V_DOC:
		st->st_mode = o->kind == V_DIR ? S_IFDIR | (a->mode & 07777)
					       : doc_dir_mode(a->mode);
		break;
	case V_DUPES:
		st->st_mode = doc_dir_mode(a->mode);
		st->st_nlink = 2;
		break;
	case V_FILE:
	case V_MEMBER:
		st->st_mode = S_IFLNK | 0777;
		st->st_size = (off_t)target_len(fs, n);
		break;
	case V_SIGS:
		st->st_mode = S_IFREG | (a->mode & 0444);
		st->st_size = (off_t)sigs_text(fs, n, NULL, 0);
		break;
	case V_SIMS:
		/* The caller's lines (may_see), so that what they read is
		 * st_size bytes (tar, cp): attributes are not cached for
		 * long when callers differ (allow_other, ops.c). */
		st->st_mode = S_IFREG | (a->mode & 0444);
		if (!view_text(fs, o, who, &text, &len)) {
			st->st_size = (off_t)len;
			free(text);
		}
		break;
	}
	st->st_blocks = (st->st_size + 511) / 512;
}

/* ---- Listings ----------------------------------------------------------------------- */

struct lister {
	struct imfs *fs;
	const struct vcaller *who;
	struct vlist *l;
	size_t cap;
	int err;
};

static struct ventry *list_add(struct lister *ls, const char *name,
			       const struct vobj *o)
{
	struct vlist *l = ls->l;

	if (ls->err)
		return NULL;
	if (l->n == ls->cap) {
		size_t nc = ls->cap ? ls->cap * 2 : 16;
		struct ventry *v = realloc(l->v, nc * sizeof(*v));
		if (!v) {
			ls->err = -ENOMEM;
			return NULL;
		}
		l->v = v;
		ls->cap = nc;
	}
	struct ventry *e = &l->v[l->n];
	memset(e, 0, sizeof(*e));
	e->name = strdup(name);
	if (!e->name) {
		ls->err = -ENOMEM;
		return NULL;
	}
	if (o) {
		view_stat(ls->fs, o, ls->who, &e->st);
		if (o->node)
			tree_mark_known(ls->fs->model->tree, o->node);
		if (o->kind == V_CLUSTER) {
			e->cluster = 1;
			e->sig = o->sig;
		}
	} else {
		e->st.st_mode = S_IFDIR; /* "." and "..": no inode given */
	}
	l->n++;
	return e;
}

static int list_member_cb(const char *path, void *arg)
{
	struct lister *ls = arg;
	struct vobj o = {.kind = V_MEMBER,
			 .node = tree_lookup(ls->fs->model->tree, path)};

	if (!o.node || !node_in_index(o.node) ||
	    !may_see(ls->fs, o.node, ls->who))
		return 0;
	char *name = member_name(path);
	if (!name) {
		ls->err = -ENOMEM;
		return 1;
	}
	list_add(ls, name, &o);
	free(name);
	return ls->err ? 1 : 0;
}

static int list_cluster_cb(const struct im_sig *name, size_t size, void *arg)
{
	struct lister *ls = arg;
	struct vobj o = {.kind = V_CLUSTER, .sig = *name};
	char hex[IM_SIG_HEX_LEN + 1];

	(void)size;
	if (!cluster_shown(ls->fs, name, ls->who))
		return 0;
	im_sig_hex(name, hex);
	list_add(ls, hex, &o);
	return ls->err ? 1 : 0;
}

static void list_dir(struct lister *ls, struct node *dir)
{
	for (struct node *c = tree_first_child(ls->fs->model->tree, dir);
	     c && !ls->err; c = tree_next_sibling(ls->fs->model->tree, c)) {
		if (!(c->flags & NODE_DIR) && !node_is_doc(c))
			continue;
		struct vobj o = {.kind = (c->flags & NODE_DIR) ? V_DIR : V_DOC,
				 .node = c};
		list_add(ls, node_name(c), &o);
	}
}

struct group_lister {
	struct lister *ls;
	bool links; /* a group's directories, else the groups */
};

/* One group: its name in dup-dirs/, or its directories. */
static int list_group_cb(const char *const *dirs, size_t n, size_t docs,
			 void *arg)
{
	struct group_lister *gl = arg;
	struct lister *ls = gl->ls;
	struct group_seen g = {ls->fs, ls->who, NULL, NULL, NULL, 0};

	group_seen_cb(dirs, n, docs, &g);
	if (!group_shown(&g))
		return 0;
	for (size_t i = 0; i < n && !ls->err; i++) {
		struct vobj o = {
			.kind = gl->links ? V_DIRLINK : V_DIRGROUP,
			.node = tree_lookup(ls->fs->model->tree, dirs[i])};
		if (!o.node || !may_reach(ls->fs, o.node, ls->who, 1))
			continue;
		char *name = member_name(dirs[i]);
		if (!name) {
			ls->err = -ENOMEM;
			break;
		}
		list_add(ls, name, &o);
		free(name);
		if (!gl->links)
			break; /* the group, by its first directory */
	}
	return ls->err ? 1 : 0;
}

int view_list(struct imfs *fs, const struct vobj *dir,
	      const struct vcaller *who, struct vlist *out)
{
	struct lister ls = {fs, who, out, 0, 0};
	static const char *const doc_names[] = {"dupes",      "file",
						"signatures", "keeper",
						"cluster",    "similarity"};

	memset(out, 0, sizeof(*out));
	mark_dir_known(fs, dir);
	list_add(&ls, ".", NULL);
	list_add(&ls, "..", NULL);
	switch (dir->kind) {
	case V_ROOT:
		if (self_call(fs, who))
			break;
		for (unsigned i = 0; i < 5; i++) {
			static const char *const top[] = {
				"clusters", "by-doc", "dup-dirs", "redundant",
				"status"};
			struct vobj o;
			struct vobj root = {.kind = V_ROOT};
			if (!view_lookup(fs, &root, top[i], who, &o))
				list_add(&ls, top[i], &o);
		}
		break;
	case V_CLUSTERS:
		model_mark_clusters_known(fs->model);
		im_index_foreach_cluster(fs->model->idx, list_cluster_cb, &ls);
		break;
	case V_CLUSTER:
	case V_DUPES:
	case V_REDUNDANT:
		if (members_foreach(fs, dir, who, list_member_cb, &ls) < 0 &&
		    !ls.err && dir->kind != V_CLUSTER)
			ls.err = -ENOMEM;
		break;
	case V_DUPDIRS: {
		struct group_lister gl = {&ls, false};
		if (dirgroups_foreach(fs, list_group_cb, &gl) < 0 && !ls.err)
			ls.err = -ENOMEM;
		break;
	}
	case V_DIRGROUP: {
		struct group_lister gl = {&ls, true};
		char *path = tree_path(fs->model->tree, dir->node);
		if (!path || dirgroups_of(fs, path, list_group_cb, &gl) < 0)
			ls.err = ls.err ? ls.err : -ENOMEM;
		free(path);
		break;
	}
	case V_DIR:
		if (may_reach(fs, dir->node, who, 4))
			list_dir(&ls, dir->node);
		else
			ls.err = -EACCES;
		break;
	case V_DOC:
		if (!may_see(fs, dir->node, who)) {
			ls.err = -EACCES;
			break;
		}
		for (unsigned i = 0;
		     i < sizeof(doc_names) / sizeof(doc_names[0]); i++) {
			struct vobj o;
			if (!view_lookup(fs, dir, doc_names[i], who, &o))
				list_add(&ls, doc_names[i], &o);
		}
		break;
	default: ls.err = -ENOTDIR; break;
	}
	if (ls.err)
		view_list_free(out);
	return ls.err;
}

void view_list_free(struct vlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].name);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

/* ---- Content --------------------------------------------------------------------- */

static int cluster_link(struct imfs *fs, const struct node *n,
			const struct vcaller *who, char **out)
{
	size_t len = cluster_link_len(fs->model->tree, n),
	       up = doc_depth(fs->model->tree, n) + 1;
	char *path = tree_path(fs->model->tree, n), *s = malloc(len + 1),
	     *p = s;
	struct im_sig sig;
	int ret = -ENOMEM;

	if (!path || !s)
		goto out;
	ret = -ENOENT;
	if (im_index_cluster_of(fs->model->idx, path, &sig) ||
	    !cluster_shown(fs, &sig, who))
		goto out;
	for (size_t i = 0; i < up; i++, p += 3)
		memcpy(p, "../", 3);
	memcpy(p, "clusters/", 9);
	im_sig_hex(&sig, p + 9);
	*out = s;
	s = NULL;
	ret = 0;
out:
	free(path);
	free(s);
	return ret;
}

int view_readlink(struct imfs *fs, const struct vobj *o,
		  const struct vcaller *who, char **out)
{
	*out = NULL;
	if (o->kind == V_CLUSTER_LINK)
		return cluster_link(fs, o->node, who, out);
	if (o->kind != V_FILE && o->kind != V_MEMBER && o->kind != V_DIRLINK)
		return -EINVAL;
	size_t sl = strlen(fs->source_real), cap = target_len(fs, o->node) + 1;
	/* No symlink holds more (the kernel would answer EIO): say why. */
	if (cap > PATH_MAX)
		return -ENAMETOOLONG;
	char *s = malloc(cap);
	if (!s)
		return -ENOMEM;
	memcpy(s, fs->source_real, sl);
	s[sl] = '/';
	tree_path_into(fs->model->tree, o->node, s + sl + 1, cap - sl - 1);
	*out = s;
	return 0;
}

/* snprintf-like: writes what fits in out[0..cap), returns the full length. */
static size_t sigs_text(struct imfs *fs, const struct node *n, char *out,
			size_t cap)
{
	struct im_doc_sigs d;
	size_t len = 0;
	char *path = tree_path(fs->model->tree, n);

	if (!path || model_full_sigs(fs->model, path, &d)) {
		free(path);
		return 0;
	}
	free(path);
	for (unsigned k = 0; k < d.ncoords; k++) {
		char line[IM_SIG_HEX_LEN + 2] = "-";
		if (d.valid & (1u << k))
			im_sig_hex(&d.sig[k], line);
		strcat(line, "\n");
		size_t l = strlen(line);
		if (out && len + l <= cap)
			memcpy(out + len, line, l);
		len += l;
	}
	return len;
}

/* One line per verified link of the document: score TAB exact|near TAB
 * member (DESIGN §2), the member name escaped as the CLI's text formats
 * write paths (escape.h: a name may hold a TAB or a newline), in the order
 * of those names; links to documents the caller may not see are left out,
 * as in its dupes/. */
struct sims {
	struct imfs *fs;
	const struct vcaller *who;
	char **lines;
	size_t n, cap;
	int err;
};

static int sims_cb(const struct im_link *l, void *arg)
{
	struct sims *s = arg;
	struct node *d = tree_lookup(s->fs->model->tree, l->path);
	char head[32], *name, *line = NULL;
	size_t hl, nl;

	if (!d || !node_in_index(d) || !may_see(s->fs, d, s->who))
		return 0;
	hl = (size_t)snprintf(head, sizeof(head), "%.4f\t%s\t", l->similarity,
			      l->exact ? "exact" : "near");
	name = member_name(l->path);
	nl = name ? im_text_escape(name, NULL, 0) : 0;
	if (name)
		line = malloc(hl + nl + 2);
	if (!line) {
		free(name);
		s->err = -ENOMEM;
		return 1;
	}
	memcpy(line, head, hl);
	im_text_escape(name, line + hl, nl + 1);
	memcpy(line + hl + nl, "\n", 2);
	free(name);
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 16;
		char **v = realloc(s->lines, cap * sizeof(*v));
		if (!v) {
			free(line);
			s->err = -ENOMEM;
			return 1;
		}
		s->lines = v;
		s->cap = cap;
	}
	s->lines[s->n++] = line;
	return 0;
}

/* By member, the third field; equal names cannot occur. */
static int sims_cmp(const void *a, const void *b)
{
	const char *x = *(char *const *)a, *y = *(char *const *)b;
	return strcmp(strchr(strchr(x, '\t') + 1, '\t'),
		      strchr(strchr(y, '\t') + 1, '\t'));
}

static int sims_text(struct imfs *fs, const struct node *n,
		     const struct vcaller *who, char **out, size_t *len)
{
	struct sims s = {fs, who, NULL, 0, 0, 0};
	char *path = tree_path(fs->model->tree, n), *buf = NULL;
	size_t total = 0;

	if (!path)
		return -ENOMEM;
	if (im_index_links(fs->model->idx, path, sims_cb, &s) < 0 && !s.err)
		s.err = -ENOENT;
	free(path);
	if (!s.err) {
		qsort(s.lines, s.n, sizeof(*s.lines), sims_cmp);
		for (size_t i = 0; i < s.n; i++)
			total += strlen(s.lines[i]);
		buf = malloc(total + 1);
		if (!buf)
			s.err = -ENOMEM;
	}
	if (buf) {
		size_t off = 0;
		for (size_t i = 0; i < s.n; i++) {
			size_t l = strlen(s.lines[i]);
			memcpy(buf + off, s.lines[i], l);
			off += l;
		}
		buf[total] = '\0';
		*out = buf;
		*len = total;
	}
	for (size_t i = 0; i < s.n; i++)
		free(s.lines[i]);
	free(s.lines);
	return s.err;
}

int view_text(struct imfs *fs, const struct vobj *o, const struct vcaller *who,
	      char **out, size_t *len)
{
	size_t n;

	*out = NULL;
	if (o->kind == V_SIMS)
		return sims_text(fs, o->node, who, out, len);
	if (o->kind == V_STATUS)
		n = status_text(fs, NULL, 0);
	else if (o->kind == V_SIGS)
		n = sigs_text(fs, o->node, NULL, 0);
	else
		return o->kind == V_FILE || o->kind == V_MEMBER ||
				       o->kind == V_CLUSTER_LINK ||
				       o->kind == V_DIRLINK
			       ? -EINVAL
			       : -EISDIR;
	*out = malloc(n + 1);
	if (!*out)
		return -ENOMEM;
	*len = o->kind == V_STATUS ? status_text(fs, *out, n)
				   : sigs_text(fs, o->node, *out, n);
	if (*len > n)
		*len = n;
	return 0;
}

/* ---- Extended attributes ------------------------------------------------------ */

/*
 * On a document's by-doc directory (a symlink such as by-doc/.../file cannot
 * carry user.* attributes: Linux reads them only on regular files and
 * directories).
 */
static const char *const xattr_names[] = {
	"user.imatch.cluster", "user.imatch.keeper", "user.imatch.similarity"};

static int xattr_value(struct imfs *fs, const struct node *n, unsigned which,
		       const struct vcaller *who, char *buf, size_t cap)
{
	char *path = tree_path(fs->model->tree, n);
	struct keeper_of k = {NULL, 0};
	struct im_sig sig;
	int ret = -ENODATA;

	if (!path)
		return -ENOMEM;
	if (which == 0) {
		if (!im_index_cluster_of(fs->model->idx, path, &sig) &&
		    cluster_shown(fs, &sig, who)) {
			im_sig_hex(&sig, buf);
			ret = 0;
		}
	} else if (redundant_find(fs, path, keeper_cb, &k) == 1) {
		const struct node *kn =
			k.keeper ? tree_lookup(fs->model->tree, k.keeper)
				 : NULL;
		if (!k.keeper)
			ret = -ENOMEM;
		else if (!kn || !may_see(fs, kn, who))
			ret = -ENODATA; /* as by-doc/.../keeper */
		else if (which == 1)
			ret = snprintf(buf, cap, "%s/%s", fs->source_real,
				       k.keeper) < (int)cap
				      ? 0
				      : -ERANGE;
		else
			ret = snprintf(buf, cap, "%.4f", k.similarity) <
					      (int)cap
				      ? 0
				      : -ERANGE;
	}
	free(k.keeper);
	free(path);
	return ret;
}

int view_getxattr(struct imfs *fs, const struct vobj *o, const char *name,
		  const struct vcaller *who, char *buf, size_t cap)
{
	if (o->kind != V_DOC)
		return -ENODATA;
	if (!may_see(fs, o->node, who))
		return -EACCES;
	for (unsigned i = 0; i < 3; i++)
		if (!strcmp(name, xattr_names[i]))
			return xattr_value(fs, o->node, i, who, buf, cap);
	return -ENODATA;
}

size_t view_listxattr(struct imfs *fs, const struct vobj *o,
		      const struct vcaller *who, char *buf, size_t cap)
{
	char value[PATH_MAX + 64];
	size_t len = 0;

	if (o->kind != V_DOC || !may_see(fs, o->node, who))
		return 0;
	for (unsigned i = 0; i < 3; i++) {
		size_t n = strlen(xattr_names[i]) + 1;

		if (xattr_value(fs, o->node, i, who, value, sizeof(value)))
			continue;
		if (len + n <= cap)
			memcpy(buf + len, xattr_names[i], n);
		len += n;
	}
	return len;
}
