/**
 * @file ops.c
 * The FUSE operations: a read-only view computed from the index and the
 * in-memory tree, never from the source disk.
 *
 * Every operation resolves its path into a struct vpath under tree_lock held
 * shared, answers from memory and lets go.
 *
 * Kernel caching: entries and attributes are cached by the kernel (timeouts
 * of CACHE_SECS, so one `ls -lR` or `find` is served from the dcache), and every
 * change of the view is pushed out by invalidation, not waited out: any
 * change (a signature, a file added, removed or renamed, a mode) wakes the
 * invalidator thread, which after a few milliseconds (to coalesce a burst)
 * invalidates the top-level entries "clusters", "by-doc" and "status" of the
 * root (node id 1, the one node id the high-level API lets us name). The
 * kernel's d_invalidate() then drops everything cached below them, so the
 * next lookups come back to the daemon. Finer invalidation would need node
 * ids the high-level API does not expose; one document's change can rename
 * a cluster and alter the dupes/ of many others anyway. Negative entries are
 * never cached, and the generated files (status, signatures) are opened with
 * direct_io so their content is always current.
 *
 * Inode numbers (use_ino): fixed for the top entries, 16 + 4 * node id (+1
 * dupes, +2 file, +3 signatures) under by-doc, and a hash with the top bit
 * set for cluster directories and member symlinks. Readdir returns whole
 * directories at offset 0, so libfuse keeps the listing for the open handle
 * and offsets stay stable while the view changes.
 */
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <fuse_lowlevel.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <xxhash.h>

#include "daemon.h"

enum vkind {
	V_ROOT,
	V_STATUS,
	V_CLUSTERS,
	V_CLUSTER,
	V_CMEMBER,
	V_DIR,
	V_DOC,
	V_DUPES,
	V_DMEMBER,
	V_FILE,
	V_SIGS,
};

#define INO_ROOT 1
#define INO_STATUS 2
#define INO_CLUSTERS 3
#define INO_HASHED (1ull << 63)

/*
 * Kernel entry and attribute cache lifetime. Changes are invalidated, but a
 * lookup in flight while the invalidation is sent can re-cache a stale entry
 * (a directory's dentry alias is reused with its cached children; seen as
 * by-doc/<dir> outliving its rename to a hidden name). The lifetime bounds
 * how long such a stale entry can last: deletion scripts read this view.
 */
#define CACHE_SECS 1.0
/* How long a burst of changes is gathered before invalidating. */
#define INVAL_BATCH_NS (5 * 1000 * 1000)

struct vpath {
	enum vkind kind;
	struct node *node;  /* by-doc: the source directory or document */
	char *docpath;      /* by-doc documents: their relative path */
	struct im_sig sig;  /* V_CLUSTER, V_CMEMBER */
	char *member;       /* V_CMEMBER, V_DMEMBER: the decoded path */
	struct node *mnode; /* the member's node, or NULL */
};

static void vpath_release(struct vpath *vp)
{
	free(vp->docpath);
	free(vp->member);
}

/* ---- Who may see what (allow_other) ------------------------------------------ */

static bool perm_ok(const struct node *n, uid_t uid, gid_t gid, unsigned bit)
{
	unsigned m = n->mode;
	if (uid == n->uid)
		return (m >> 6) & bit;
	if (gid == n->gid)
		return (m >> 3) & bit;
	return m & bit;
}

/*
 * With allow_other, a caller other than root sees a member only if it could
 * read the source file and search every directory above it. Conservative:
 * only the caller's primary group is considered.
 */
static bool may_see(const struct node *n)
{
	if (!imfs->allow_other || !n)
		return n != NULL || !imfs->allow_other;
	struct fuse_context *ctx = fuse_get_context();
	if (!ctx || ctx->uid == 0)
		return true;
	if (!perm_ok(n, ctx->uid, ctx->gid, 4))
		return false;
	for (const struct node *p = n->parent; p; p = p->parent)
		if (!perm_ok(p, ctx->uid, ctx->gid, 1))
			return false;
	return true;
}

/* ---- Resolving paths ------------------------------------------------------------ */

static int stop_cb(const char *path, void *arg)
{
	(void)path;
	(void)arg;
	return 1;
}

static int equal_cb(const char *path, void *arg)
{
	return strcmp(path, arg) == 0;
}

static int resolve_member(struct vpath *vp, const char *name)
{
	vp->member = member_decode(name);
	if (!vp->member)
		return -ENOENT;
	vp->mnode = view_lookup(imfs, vp->member);
	if (!may_see(vp->mnode))
		return -ENOENT;
	if (vp->kind == V_CMEMBER) {
		struct im_sig s;
		if (im_index_cluster_of(imfs->idx, vp->member, &s) ||
		    im_sig_cmp(&s, &vp->sig))
			return -ENOENT;
		return 0;
	}
	if (im_index_dupes(imfs->idx, vp->docpath, equal_cb, vp->member) != 1)
		return -ENOENT;
	return 0;
}

/* Resolve a by-doc path (after "/by-doc"), component by component. */
static int resolve_bydoc(struct vpath *vp, char *rest)
{
	struct node *n = imfs->root;
	char *save = NULL, *c;

	vp->kind = V_DIR;
	vp->node = n;
	for (c = strtok_r(rest, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		switch (vp->kind) {
		case V_DIR:
			n = view_child(imfs, vp->node, c);
			if (!n || (!(n->flags & NODE_DIR) && !node_is_doc(n)))
				return -ENOENT;
			vp->node = n;
			if (!(n->flags & NODE_DIR)) {
				vp->kind = V_DOC;
				vp->docpath = view_path(n);
				if (!vp->docpath)
					return -ENOMEM;
			}
			break;
		case V_DOC:
			if (!strcmp(c, "dupes"))
				vp->kind = V_DUPES;
			else if (!strcmp(c, "file"))
				vp->kind = V_FILE;
			else if (!strcmp(c, "signatures"))
				vp->kind = V_SIGS;
			else
				return -ENOENT;
			break;
		case V_DUPES:
			vp->kind = V_DMEMBER;
			int ret = resolve_member(vp, c);
			if (ret)
				return ret;
			break;
		default:
			return -ENOTDIR;
		}
	}
	return 0;
}

/*
 * Is the caller a thread of this daemon? With MOUNTPOINT inside SOURCE our
 * own walks cross into the mount; the view is then shown to us as an empty
 * directory, so that it is never walked, watched or signed as a document.
 */
static bool self_call(void)
{
	if (!imfs->mnt_inside)
		return false;
	struct fuse_context *ctx = fuse_get_context();
	return ctx && syscall(SYS_tgkill, getpid(), ctx->pid, 0) == 0;
}

/* Resolve @p path; tree_lock held shared by the caller throughout. */
static int resolve(const char *path, struct vpath *vp)
{
	char buf[8192];
	char *save = NULL, *c;
	int ret;

	memset(vp, 0, sizeof(*vp));
	if (path[0] == '/' && path[1] && self_call())
		return -ENOENT;
	if (strlen(path) >= sizeof(buf))
		return -ENAMETOOLONG;
	strcpy(buf, path);
	c = strtok_r(buf, "/", &save);
	if (!c) {
		vp->kind = V_ROOT;
		return 0;
	}
	if (!strcmp(c, "status")) {
		vp->kind = V_STATUS;
		return strtok_r(NULL, "/", &save) ? -ENOTDIR : 0;
	}
	if (!strcmp(c, "by-doc"))
		return resolve_bydoc(vp, save ? save : buf + strlen(buf));
	if (strcmp(c, "clusters"))
		return -ENOENT;
	vp->kind = V_CLUSTERS;
	c = strtok_r(NULL, "/", &save);
	if (!c)
		return 0;
	if (strlen(c) != IM_SIG_HEX_LEN || im_sig_parse(c, &vp->sig))
		return -ENOENT;
	/* Only the canonical lower-case spelling is a name. */
	char hex[IM_SIG_HEX_LEN + 1];
	im_sig_hex(&vp->sig, hex);
	if (strcmp(hex, c))
		return -ENOENT;
	if (im_index_cluster_members(imfs->idx, &vp->sig, stop_cb, NULL) != 1)
		return -ENOENT;
	vp->kind = V_CLUSTER;
	c = strtok_r(NULL, "/", &save);
	if (!c)
		return 0;
	vp->kind = V_CMEMBER;
	ret = resolve_member(vp, c);
	if (ret)
		return ret;
	if (strtok_r(NULL, "/", &save))
		return -ENOTDIR;
	return 0;
}

/* ---- Attributes ------------------------------------------------------------------- */

static uint64_t hash_ino(const void *a, size_t alen, const char *s)
{
	uint64_t h = XXH3_64bits(a, alen);
	if (s)
		h = XXH3_64bits_withSeed(s, strlen(s), h);
	return h | INO_HASHED;
}

static uint64_t node_ino(const struct node *n)
{
	return 16 + 4 * n->id;
}

/* A document shown as a directory: searchable wherever it is readable. */
static mode_t doc_dir_mode(const struct node *n)
{
	mode_t m = n->mode & 0777;
	return S_IFDIR | m | ((m & 0444) >> 2);
}

static void set_time(struct stat *st, int64_t ns)
{
	st->st_mtim.tv_sec = ns / 1000000000;
	st->st_mtim.tv_nsec = ns % 1000000000;
	st->st_atim = st->st_ctim = st->st_mtim;
}

static size_t target_len(const char *rel)
{
	return strlen(imfs->source_real) + 1 + strlen(rel);
}

static size_t sigs_text(const char *docpath, char *out, size_t cap);
static size_t status_text(char *out, size_t cap);

static int fill_stat(const struct vpath *vp, struct stat *st)
{
	const struct node *n = vp->node;

	memset(st, 0, sizeof(*st));
	st->st_uid = imfs->owner_uid;
	st->st_gid = imfs->owner_gid;
	st->st_nlink = 1;
	st->st_blksize = 4096;
	set_time(st, (int64_t)imfs->started * 1000000000);
	switch (vp->kind) {
	case V_ROOT:
		st->st_ino = INO_ROOT;
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 4;
		break;
	case V_STATUS:
		st->st_ino = INO_STATUS;
		st->st_mode = S_IFREG | 0444;
		st->st_size = (off_t)status_text(NULL, 0);
		set_time(st, (int64_t)time(NULL) * 1000000000);
		break;
	case V_CLUSTERS:
		st->st_ino = INO_CLUSTERS;
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2;
		break;
	case V_CLUSTER:
		st->st_ino = hash_ino(vp->sig.b, IM_SIG_LEN, NULL);
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2;
		break;
	case V_CMEMBER:
	case V_DMEMBER:
		if (vp->kind == V_CMEMBER)
			st->st_ino = hash_ino(vp->sig.b, IM_SIG_LEN, vp->member);
		else
			st->st_ino = hash_ino(&n->id, sizeof(n->id), vp->member);
		st->st_mode = S_IFLNK | 0777;
		st->st_size = (off_t)target_len(vp->member);
		if (vp->mnode) {
			st->st_uid = vp->mnode->uid;
			st->st_gid = vp->mnode->gid;
			set_time(st, vp->mnode->mtime_ns);
		}
		break;
	case V_DIR:
		st->st_ino = n == imfs->root ? node_ino(n) : node_ino(n);
		st->st_mode = S_IFDIR | (n->mode & 07777);
		st->st_nlink = 2;
		st->st_uid = n->uid;
		st->st_gid = n->gid;
		set_time(st, n->mtime_ns);
		break;
	case V_DOC:
	case V_DUPES:
		st->st_ino = node_ino(n) + (vp->kind == V_DUPES);
		st->st_mode = doc_dir_mode(n);
		st->st_nlink = 2;
		st->st_uid = n->uid;
		st->st_gid = n->gid;
		set_time(st, n->mtime_ns);
		break;
	case V_FILE:
		st->st_ino = node_ino(n) + 2;
		st->st_mode = S_IFLNK | 0777;
		st->st_size = (off_t)target_len(vp->docpath);
		st->st_uid = n->uid;
		st->st_gid = n->gid;
		set_time(st, n->mtime_ns);
		break;
	case V_SIGS:
		st->st_ino = node_ino(n) + 3;
		st->st_mode = S_IFREG | (n->mode & 0444);
		st->st_size = (off_t)sigs_text(vp->docpath, NULL, 0);
		st->st_uid = n->uid;
		st->st_gid = n->gid;
		set_time(st, n->mtime_ns);
		break;
	}
	st->st_blocks = (st->st_size + 511) / 512;
	return 0;
}

static int imfs_getattr(const char *path, struct stat *st,
			struct fuse_file_info *fi)
{
	struct vpath vp;
	(void)fi;

	pthread_rwlock_rdlock(&imfs->tree_lock);
	int ret = resolve(path, &vp);
	if (!ret)
		ret = fill_stat(&vp, st);
	pthread_rwlock_unlock(&imfs->tree_lock);
	vpath_release(&vp);
	return ret;
}

static int imfs_access(const char *path, int mask)
{
	struct vpath vp;

	if (mask & W_OK)
		return -EROFS;
	pthread_rwlock_rdlock(&imfs->tree_lock);
	int ret = resolve(path, &vp);
	pthread_rwlock_unlock(&imfs->tree_lock);
	vpath_release(&vp);
	return ret;
}

static int imfs_readlink(const char *path, char *buf, size_t size)
{
	struct vpath vp;
	const char *rel = NULL;

	pthread_rwlock_rdlock(&imfs->tree_lock);
	int ret = resolve(path, &vp);
	if (!ret) {
		if (vp.kind == V_FILE)
			rel = vp.docpath;
		else if (vp.kind == V_CMEMBER || vp.kind == V_DMEMBER)
			rel = vp.member;
		else
			ret = -EINVAL;
	}
	pthread_rwlock_unlock(&imfs->tree_lock);
	if (rel && size)
		snprintf(buf, size, "%s/%s", imfs->source_real, rel);
	vpath_release(&vp);
	return ret;
}

/* ---- Generated files ---------------------------------------------------------------- */

/* snprintf-like: writes what fits in out[0..cap), returns the full length. */
static size_t sigs_text(const char *docpath, char *out, size_t cap)
{
	struct im_doc_sigs d;
	size_t len = 0;

	if (im_index_get(imfs->idx, docpath, &d))
		return 0;
	for (unsigned k = 0; k < d.ncoords; k++) {
		char line[IM_SIG_HEX_LEN + 2];
		if (d.valid & (1u << k)) {
			im_sig_hex(&d.sig[k], line);
			strcat(line, "\n");
		} else {
			strcpy(line, "-\n");
		}
		size_t l = strlen(line);
		if (out && len + l <= cap)
			memcpy(out + len, line, l);
		len += l;
	}
	return len;
}

static const char *phase_name(int p)
{
	switch (p) {
	case PHASE_STARTING: return "starting";
	case PHASE_LEXICON: return "building-lexicon";
	case PHASE_SCANNING: return "scanning";
	case PHASE_LIVE: return "live";
	case PHASE_RESCANNING: return "rescanning";
	case PHASE_NO_LEXICON: return "waiting-for-documents";
	}
	return "unknown";
}

#define LD(x) ((unsigned long long)(x))
#define LOAD(x) __atomic_load_n(&imfs->x, __ATOMIC_RELAXED)

/* Called with tree_lock held (shared). Returns the full length. */
static size_t status_text(char *out, size_t cap)
{
	char buf[4096];
	const uint64_t *c = imfs->count;
	struct im_lexicon *lex = __atomic_load_n(&imfs->lex, __ATOMIC_ACQUIRE);
	size_t prim = lex ? im_lexicon_primary_size(lex) : 0;
	size_t sec = lex ? im_lexicon_secondary_size(lex) : 0;
	uint64_t files = c[0] + c[1] + c[2] + c[3] + c[4] + c[5];

	int n = snprintf(buf, sizeof(buf),
		"phase: %s\n"
		"source: %s\n"
		"documents: %llu\n"
		"signed: %llu\n"
		"rejected: %llu\n"
		"binary: %llu\n"
		"too_big: %llu\n"
		"skipped: %llu\n"
		"errors: %llu\n"
		"pending: %llu\n"
		"cached: %llu\n"
		"clusters: %zu\n"
		"files: %llu\n"
		"directories: %llu\n"
		"hidden: %llu\n"
		"other: %llu\n"
		"walk_errors: %llu\n"
		"lexicon_terms: %zu\n"
		"lexicon_primary: %zu\n"
		"lexicon_secondary: %zu\n"
		"lexicon_docs: %llu\n"
		"k: %u\n"
		"watches: %llu\n"
		"watch_limit_reached: %s\n"
		"events: %llu\n"
		"rescans: %llu\n"
		"saves: %llu\n"
		"state_dir: %s\n",
		phase_name(LOAD(phase)), imfs->source_real,
		LD(c[IM_DOC_SIGNED] + c[IM_DOC_REJECTED]), LD(c[IM_DOC_SIGNED]),
		LD(c[IM_DOC_REJECTED]), LD(c[IM_DOC_BINARY]),
		LD(c[IM_DOC_TOO_BIG]),
		LD(c[IM_DOC_BINARY] + c[IM_DOC_TOO_BIG]), LD(c[IM_DOC_ERROR]),
		LD(scanner_pending(imfs)), LD(LOAD(cached)),
		im_index_cluster_count(imfs->idx), LD(files), LD(imfs->dirs),
		LD(LOAD(hidden_skipped)), LD(LOAD(other_skipped)),
		LD(LOAD(walk_errors)), prim + sec, prim, sec,
		LD(lex ? im_lexicon_docs(lex) : 0), imfs->params.k,
		LD(LOAD(watches)), LOAD(watch_limit) ? "yes" : "no",
		LD(LOAD(events)), LD(LOAD(rescans)), LD(LOAD(saves)),
		imfs->state_dir);
	size_t len = n < 0 ? 0 : (size_t)n;
	if (len >= sizeof(buf))
		len = sizeof(buf) - 1;
	if (out)
		memcpy(out, buf, len < cap ? len : cap);
	return len;
}

/* An open status or signatures file: its text, fixed at open. Kept on a
 * list so that handles still open when the session ends are freed. */
struct content {
	struct content *prev, *next; /* protected by open_lock */
	size_t len;
	char data[];
};

static struct content *open_list;
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;

void ops_release_all(void)
{
	pthread_mutex_lock(&open_lock);
	while (open_list) {
		struct content *c = open_list;
		open_list = c->next;
		free(c);
	}
	pthread_mutex_unlock(&open_lock);
}

static int imfs_open(const char *path, struct fuse_file_info *fi)
{
	struct vpath vp;
	struct content *ct = NULL;

	if ((fi->flags & O_ACCMODE) != O_RDONLY ||
	    (fi->flags & (O_TRUNC | O_CREAT)))
		return -EROFS;
	pthread_rwlock_rdlock(&imfs->tree_lock);
	int ret = resolve(path, &vp);
	if (ret)
		goto out;
	size_t len;
	switch (vp.kind) {
	case V_STATUS:
		len = status_text(NULL, 0);
		break;
	case V_SIGS:
		len = sigs_text(vp.docpath, NULL, 0);
		break;
	default:
		ret = -EISDIR;
		goto out;
	}
	ct = malloc(sizeof(*ct) + len + 1);
	if (!ct) {
		ret = -ENOMEM;
		goto out;
	}
	ct->len = vp.kind == V_STATUS ? status_text(ct->data, len)
				      : sigs_text(vp.docpath, ct->data, len);
	if (ct->len > len)
		ct->len = len;
	pthread_mutex_lock(&open_lock);
	ct->prev = NULL;
	ct->next = open_list;
	if (open_list)
		open_list->prev = ct;
	open_list = ct;
	pthread_mutex_unlock(&open_lock);
	fi->fh = (uintptr_t)ct;
	fi->direct_io = 1;
	fi->keep_cache = 0;
out:
	pthread_rwlock_unlock(&imfs->tree_lock);
	vpath_release(&vp);
	return ret;
}

static int imfs_read(const char *path, char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	const struct content *ct = (const void *)(uintptr_t)fi->fh;
	(void)path;

	if (!ct)
		return -EBADF;
	if (off < 0 || (size_t)off >= ct->len)
		return 0;
	if (size > ct->len - (size_t)off)
		size = ct->len - (size_t)off;
	memcpy(buf, ct->data + off, size);
	return (int)size;
}

static int imfs_release(const char *path, struct fuse_file_info *fi)
{
	struct content *ct = (void *)(uintptr_t)fi->fh;
	(void)path;

	if (ct) {
		pthread_mutex_lock(&open_lock);
		if (ct->prev)
			ct->prev->next = ct->next;
		else
			open_list = ct->next;
		if (ct->next)
			ct->next->prev = ct->prev;
		pthread_mutex_unlock(&open_lock);
		free(ct);
	}
	fi->fh = 0;
	return 0;
}

/* ---- Directories ------------------------------------------------------------------ */

struct fill {
	void *buf;
	fuse_fill_dir_t filler;
	const struct vpath *vp;
	int err;
};

static void add(struct fill *f, const char *name, mode_t type, uint64_t ino)
{
	struct stat st;

	if (f->err)
		return;
	memset(&st, 0, sizeof(st));
	st.st_mode = type;
	st.st_ino = ino;
	if (f->filler(f->buf, name, &st, 0, 0))
		f->err = -ENOMEM;
}

static int add_member(const char *path, void *arg)
{
	struct fill *f = arg;
	const struct vpath *vp = f->vp;

	if (imfs->allow_other && !may_see(view_lookup(imfs, path)))
		return 0;
	char *name = member_encode(path);
	if (!name) {
		f->err = -ENOMEM;
		return 1;
	}
	/* Longer than a FUSE name can be: left out of listings. */
	if (strlen(name) <= 1024) {
		uint64_t ino = vp->kind == V_CLUSTER
				       ? hash_ino(vp->sig.b, IM_SIG_LEN, path)
				       : hash_ino(&vp->node->id,
						  sizeof(vp->node->id), path);
		add(f, name, S_IFLNK, ino);
	}
	free(name);
	return f->err ? 1 : 0;
}

static int add_cluster(const struct im_sig *name, size_t size, void *arg)
{
	struct fill *f = arg;
	char hex[IM_SIG_HEX_LEN + 1];
	(void)size;

	im_sig_hex(name, hex);
	add(f, hex, S_IFDIR, hash_ino(name->b, IM_SIG_LEN, NULL));
	return f->err ? 1 : 0;
}

static int imfs_readdir(const char *path, void *buf, fuse_fill_dir_t filler,
			off_t off, struct fuse_file_info *fi,
			enum fuse_readdir_flags flags)
{
	struct vpath vp;
	struct fill f = { buf, filler, &vp, 0 };
	(void)off;
	(void)fi;
	(void)flags;

	pthread_rwlock_rdlock(&imfs->tree_lock);
	int ret = resolve(path, &vp);
	if (ret)
		goto out;
	add(&f, ".", S_IFDIR, 0);
	add(&f, "..", S_IFDIR, 0);
	switch (vp.kind) {
	case V_ROOT:
		if (self_call())
			break;
		add(&f, "clusters", S_IFDIR, INO_CLUSTERS);
		add(&f, "by-doc", S_IFDIR, node_ino(imfs->root));
		add(&f, "status", S_IFREG, INO_STATUS);
		break;
	case V_CLUSTERS:
		im_index_foreach_cluster(imfs->idx, add_cluster, &f);
		break;
	case V_CLUSTER:
		im_index_cluster_members(imfs->idx, &vp.sig, add_member, &f);
		break;
	case V_DIR:
		for (struct node *c = vp.node->child; c && !f.err; c = c->next)
			if ((c->flags & NODE_DIR) || node_is_doc(c))
				add(&f, c->name, S_IFDIR, node_ino(c));
		break;
	case V_DOC:
		add(&f, "dupes", S_IFDIR, node_ino(vp.node) + 1);
		add(&f, "file", S_IFLNK, node_ino(vp.node) + 2);
		add(&f, "signatures", S_IFREG, node_ino(vp.node) + 3);
		break;
	case V_DUPES:
		im_index_dupes(imfs->idx, vp.docpath, add_member, &f);
		break;
	default:
		ret = -ENOTDIR;
		break;
	}
	if (!ret)
		ret = f.err;
out:
	pthread_rwlock_unlock(&imfs->tree_lock);
	vpath_release(&vp);
	return ret;
}

static int imfs_statfs(const char *path, struct statvfs *sv)
{
	(void)path;
	memset(sv, 0, sizeof(*sv));
	sv->f_bsize = sv->f_frsize = 4096;
	pthread_rwlock_rdlock(&imfs->tree_lock);
	sv->f_files = imfs->dirs + imfs->count[IM_DOC_SIGNED] +
		      imfs->count[IM_DOC_REJECTED];
	pthread_rwlock_unlock(&imfs->tree_lock);
	sv->f_namemax = 1024;
	sv->f_flag = ST_RDONLY | ST_NOSUID | ST_NODEV;
	return 0;
}

/* ---- Life cycle -------------------------------------------------------------------- */

static void *imfs_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	/* A member's target is a function of its name: cache readlink. */
	if (conn->capable & FUSE_CAP_CACHE_SYMLINKS)
		conn->want |= FUSE_CAP_CACHE_SYMLINKS;
	cfg->use_ino = 1;
	cfg->readdir_ino = 1;
	cfg->entry_timeout = CACHE_SECS;
	cfg->attr_timeout = CACHE_SECS;
	cfg->negative_timeout = 0;
	cfg->kernel_cache = 0;
	return imfs;
}

/* ---- Invalidation ------------------------------------------------------------------ */

void inval_request(struct imfs *fs)
{
	pthread_mutex_lock(&fs->inval_lock);
	if (!fs->inval_wanted) {
		fs->inval_wanted = true;
		pthread_cond_signal(&fs->inval_cond);
	}
	pthread_mutex_unlock(&fs->inval_lock);
}

static void *inval_main(void *arg)
{
	struct imfs *fs = arg;
	struct fuse_session *se = fuse_get_session(fs->fuse);
	static const char *const names[] = { "clusters", "by-doc", "status" };

	pthread_mutex_lock(&fs->inval_lock);
	for (;;) {
		while (!fs->inval_wanted && !fs->inval_stopping)
			pthread_cond_wait(&fs->inval_cond, &fs->inval_lock);
		if (fs->inval_stopping)
			break;
		pthread_mutex_unlock(&fs->inval_lock);
		struct timespec ts = { 0, INVAL_BATCH_NS };
		nanosleep(&ts, NULL);
		pthread_mutex_lock(&fs->inval_lock);
		/* Cleared before sending: a change from now on asks again. */
		fs->inval_wanted = false;
		pthread_mutex_unlock(&fs->inval_lock);
		/* No lock of ours is held: the kernel may need a FUSE worker
		 * to finish a lookup in the root before it can invalidate. */
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			fuse_lowlevel_notify_inval_entry(se, FUSE_ROOT_ID,
							 names[i],
							 strlen(names[i]));
		pthread_mutex_lock(&fs->inval_lock);
	}
	pthread_mutex_unlock(&fs->inval_lock);
	return NULL;
}

int inval_start(struct imfs *fs)
{
	if (pthread_create(&fs->inval_tid, NULL, inval_main, fs))
		return -EAGAIN;
	fs->inval_started = true;
	return 0;
}

void inval_stop(struct imfs *fs)
{
	if (!fs->inval_started)
		return;
	pthread_mutex_lock(&fs->inval_lock);
	fs->inval_stopping = true;
	pthread_cond_signal(&fs->inval_cond);
	pthread_mutex_unlock(&fs->inval_lock);
	pthread_join(fs->inval_tid, NULL);
	fs->inval_started = false;
}

/* ---- Everything that would write ----------------------------------------------------- */

static int imfs_mkdir(const char *p, mode_t m)
{
	(void)p; (void)m;
	return -EROFS;
}

static int imfs_mknod(const char *p, mode_t m, dev_t d)
{
	(void)p; (void)m; (void)d;
	return -EROFS;
}

static int imfs_unlink(const char *p)
{
	(void)p;
	return -EROFS;
}

static int imfs_rmdir(const char *p)
{
	(void)p;
	return -EROFS;
}

static int imfs_symlink(const char *a, const char *b)
{
	(void)a; (void)b;
	return -EROFS;
}

static int imfs_rename(const char *a, const char *b, unsigned int f)
{
	(void)a; (void)b; (void)f;
	return -EROFS;
}

static int imfs_link(const char *a, const char *b)
{
	(void)a; (void)b;
	return -EROFS;
}

static int imfs_chmod(const char *p, mode_t m, struct fuse_file_info *fi)
{
	(void)p; (void)m; (void)fi;
	return -EROFS;
}

static int imfs_chown(const char *p, uid_t u, gid_t g, struct fuse_file_info *fi)
{
	(void)p; (void)u; (void)g; (void)fi;
	return -EROFS;
}

static int imfs_truncate(const char *p, off_t o, struct fuse_file_info *fi)
{
	(void)p; (void)o; (void)fi;
	return -EROFS;
}

static int imfs_write(const char *p, const char *b, size_t s, off_t o,
		      struct fuse_file_info *fi)
{
	(void)p; (void)b; (void)s; (void)o; (void)fi;
	return -EROFS;
}

static int imfs_create(const char *p, mode_t m, struct fuse_file_info *fi)
{
	(void)p; (void)m; (void)fi;
	return -EROFS;
}

static int imfs_utimens(const char *p, const struct timespec tv[2],
			struct fuse_file_info *fi)
{
	(void)p; (void)tv; (void)fi;
	return -EROFS;
}

static int imfs_setxattr(const char *p, const char *n, const char *v, size_t s,
			 int f)
{
	(void)p; (void)n; (void)v; (void)s; (void)f;
	return -EROFS;
}

static int imfs_removexattr(const char *p, const char *n)
{
	(void)p; (void)n;
	return -EROFS;
}

static int imfs_fallocate(const char *p, int m, off_t o, off_t l,
			  struct fuse_file_info *fi)
{
	(void)p; (void)m; (void)o; (void)l; (void)fi;
	return -EROFS;
}

const struct fuse_operations imfs_oper = {
	.init = imfs_init,
	.getattr = imfs_getattr,
	.access = imfs_access,
	.readlink = imfs_readlink,
	.open = imfs_open,
	.read = imfs_read,
	.release = imfs_release,
	.readdir = imfs_readdir,
	.statfs = imfs_statfs,
	.mkdir = imfs_mkdir,
	.mknod = imfs_mknod,
	.unlink = imfs_unlink,
	.rmdir = imfs_rmdir,
	.symlink = imfs_symlink,
	.rename = imfs_rename,
	.link = imfs_link,
	.chmod = imfs_chmod,
	.chown = imfs_chown,
	.truncate = imfs_truncate,
	.write = imfs_write,
	.create = imfs_create,
	.utimens = imfs_utimens,
	.setxattr = imfs_setxattr,
	.removexattr = imfs_removexattr,
	.fallocate = imfs_fallocate,
};
