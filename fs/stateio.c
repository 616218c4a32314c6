/**
 * @file stateio.c
 * The lexicon and signature cache files (stateio.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "beneath.h"
#include "scope.h"
#include "stateio.h"
#include "util.h"

int stateio_open(struct stateio *sio, const char *state_dir,
		 const char *lexicon, const struct im_params *p)
{
	memset(sio, 0, sizeof(*sio));
	sio->params = p;
	sio->lexicon_given = lexicon != NULL;
	sio->lexicon_path =
		lexicon ? strdup(lexicon) : im_path_join(state_dir, "lexicon");
	sio->cache_path = im_path_join(state_dir, "sigcache");
	if (!sio->lexicon_path || !sio->cache_path) {
		stateio_release(sio);
		return -ENOMEM;
	}
	sio->key = im_state_key(p, IM_STATE_NO_LEXICON);
	sio->files_key = im_state_files_key(p);
	return 0;
}

void stateio_release(struct stateio *sio)
{
	free(sio->lexicon_path);
	free(sio->cache_path);
	sio->lexicon_path = sio->cache_path = NULL;
}

/* The cache made for sio->key into *@p cache, if there is one, or the
 * files' part of one made with other parameters or another lexicon; a
 * corrupt one is refused (-EINVAL, said on stderr). */
static int load_cache(struct stateio *sio, struct im_state **cache)
{
	char why[256];
	int ret = im_state_load_files(sio->cache_path, sio->key, sio->files_key,
				      cache, why, sizeof(why));

	if (ret == -EINVAL) {
		fprintf(stderr,
			"imatchfs: error: signature cache %s is corrupt (%s); "
			"refusing to replace it: move it away to start "
			"afresh\n",
			sio->cache_path, why);
		return -EINVAL;
	}
	if (!ret && im_state_partial(*cache))
		imfs_log(LOG_NOTICE,
			 "the signature cache was %s: signing the documents "
			 "afresh, not the binary files",
			 why);
	else if (ret == -ESTALE)
		imfs_log(LOG_NOTICE,
			 "the signature cache was %s: signing afresh", why);
	else if (ret && ret != -ENOENT)
		imfs_log(LOG_NOTICE, "not using the signature cache %s: %s",
			 sio->cache_path, why);
	return 0;
}

int stateio_load(struct stateio *sio, struct im_lexicon **lex,
		 struct im_state **cache)
{
	char why[256];
	int ret;

	*lex = NULL;
	*cache = NULL;
	ret = im_lexicon_load(sio->lexicon_path, lex, why, sizeof(why));
	/* First mount, or a tree that waited for documents: the scanner
	 * builds the lexicon, taking what the cache of such a tree holds. */
	if (ret == -ENOENT && !sio->lexicon_given)
		return load_cache(sio, cache);
	if (ret) {
		/* Corrupt, or no file at all (a directory): a restart will not
		 * help, nor will the daemon replace it. */
		bool unusable = ret == -EINVAL || ret == -EISDIR;

		fprintf(stderr, "imatchfs: error: lexicon %s: %s%s\n",
			sio->lexicon_path, why,
			unusable && !sio->lexicon_given
				? " (refusing to replace it; move it away to "
				  "rebuild)"
				: "");
		return unusable ? -EINVAL : -1;
	}
	double lo, hi;
	im_lexicon_window(*lex, &lo, &hi);
	if (!sio->lexicon_given &&
	    (lo != sio->params->nidf_lo || hi != sio->params->nidf_hi))
		imfs_log(LOG_NOTICE,
			 "keeping the lexicon %s, built with nidf=%g:%g (move "
			 "it away to rebuild it with other options)",
			 sio->lexicon_path, lo, hi);
	sio->key = im_state_key(sio->params, im_lexicon_file_key(*lex));
	return load_cache(sio, cache);
}

int stateio_save_lexicon(struct stateio *sio, const struct im_lexicon *lex)
{
	uint64_t lex_key;
	int ret = im_lexicon_save_key(lex, sio->lexicon_path, &lex_key);

	if (!ret)
		sio->key = im_state_key(sio->params, lex_key);
	if (ret)
		imfs_log(LOG_ERR, "saving the lexicon to %s: %s",
			 sio->lexicon_path, strerror(-ret));
	return ret;
}

struct im_state *stateio_load_cache(struct stateio *sio)
{
	struct im_state *cache = NULL;
	char why[160];
	int ret = im_state_load(sio->cache_path, sio->key, &cache, why,
				sizeof(why));

	/* An older cache was said at the mount (load_cache()): the scanner
	 * asks again once the lexicon is there. */
	if (ret && ret != -ENOENT && ret != -ESTALE)
		imfs_log(LOG_NOTICE, "not using the signature cache %s: %s",
			 sio->cache_path, why);
	return cache;
}

/* Add every file of @p dir (path in @p path, length @p len) that is signed
 * without error. */
static int add_subtree(const struct model *m, struct im_state_writer *w,
		       const struct node *dir, char *path, size_t len,
		       size_t cap)
{
	int ret = 0;

	for (const struct node *c = tree_first_child(m->tree, dir); c && !ret;
	     c = tree_next_sibling(m->tree, c)) {
		const char *name = node_name(c);
		size_t nl = strlen(name);
		if (len + nl + 2 > cap)
			continue; /* deeper than the buffer: not cached */
		size_t l = len;
		if (l)
			path[l++] = '/';
		memcpy(path + l, name, nl + 1);
		if (c->flags & NODE_DIR) {
			ret = add_subtree(m, w, c, path, l + nl, cap);
		} else if (c->status != NODE_UNKNOWN &&
			   c->status != IM_DOC_ERROR && !c->scan_reads) {
			/* Not a file a scan asked for and has no result of:
			 * its record is older than the file or the lexicon
			 * (model_sweep()), and the next start reads it. */
			struct im_doc_sigs d;
			if (!node_in_index(c) || model_full_sigs(m, path, &d)) {
				memset(&d, 0, sizeof(d));
				d.status = node_in_index(c) ? IM_DOC_ERROR
							    : c->status;
				d.format = c->format;
			}
			if (d.status != IM_DOC_ERROR)
				ret = im_state_writer_add(
					w, path, c->size, c->mtime_ns,
					c->src_ino, c->ctime_fold, &d);
		}
		path[len] = 0;
	}
	return ret;
}

/*
 * Whether the mount's own options leave @p path out of the walk: a hidden
 * name without -o hidden, -o exclude or -o include. The .imatchignore files
 * are not asked: that would read the tree at every save.
 */
static bool options_leave_out(const struct im_params *p, const char *path)
{
	if (!p->hidden && (path[0] == '.' || strstr(path, "/.")))
		return true;
	return !im_scope_empty(p->scope) &&
	       im_scope_excluded_path(p->scope, path, false);
}

struct carry {
	const struct model *m;
	const struct im_params *params;
	const struct im_state *prev;
	struct im_state_writer *w;
	bool same_key; /* else the files key only: lexicon-free entries */
	char *path;
	size_t cap;
};

static int carry_entry(const char *path, size_t len, size_t i, void *arg)
{
	struct carry *c = arg;
	struct im_state_entry e;

	if (len + 1 > c->cap)
		return 0;
	memcpy(c->path, path, len);
	c->path[len] = 0;
	if ((c->m->walked && !options_leave_out(c->params, c->path)) ||
	    tree_lookup(c->m->tree, c->path) || im_state_at(c->prev, i, &e) ||
	    (!c->same_key && !im_state_lexicon_free(e.d.status)))
		return 0;
	return im_state_writer_add(c->w, c->path, e.size, e.mtime_ns, e.ino,
				   e.ctime_fold, &e.d);
}

/*
 * Add to @p w the entries of the cache the model holds (the last one loaded
 * or saved) that this mount's options leave out of its tree (QA 4/5): a
 * mount with -o exclude, or without -o hidden, must not cost the next
 * mount without it a read of every file it left out. Before a walk of the
 * whole tree ended (a daemon stopped during its first scan), also those of
 * every file the tree lacks, which the walk may just not have reached: a
 * quick mount and unmount must not cost the next start a read of the
 * tree. One deleted meanwhile keeps its entry, as an excluded one does,
 * and is used only by a file that fits it. Only while they may
 * be used under @p w's keys: all of them under the same key, the
 * lexicon-free ones under the same files key (as im_state_load_files()
 * takes them). Each is used later only if its file still fits it, like
 * any entry. Tree lock held.
 */
static int carry_out_of_scope(const struct stateio *sio, const struct model *m,
			      struct im_state_writer *w, char *path, size_t cap)
{
	const struct im_state *prev = fullsigs_saved(m->full);
	struct carry c = {m, sio->params, prev, w, false, path, cap};
	uint64_t key, files_key;

	if (!prev)
		return 0;
	im_state_keys(prev, &key, &files_key);
	c.same_key = key == sio->key;
	if (!c.same_key && files_key != sio->files_key)
		return 0;
	return im_state_each_path(prev, carry_entry, &c);
}

int stateio_save(struct stateio *sio, struct model *m)
{
	struct im_state_writer *w = NULL;
	size_t cap = 65536;
	char *path = malloc(cap);
	int ret = -ENOMEM;

	if (!path)
		goto out;
	ret = im_state_writer_new(sio->key, &w);
	if (ret)
		goto out;
	im_state_writer_set_files_key(w, sio->files_key);
	path[0] = 0;
	/* Cleared first: a change made while the image is built dirties it
	 * again. Readers go on meanwhile; only updates wait, apart (a long
	 * reader: an update queued on the lock would hold up the readers). */
	tree_wrlock(m->tree);
	m->dirty = false;
	tree_unlock(m->tree);
	tree_rdlock_long(m->tree);
	ret = add_subtree(m, w, tree_root(m->tree), path, 0, cap);
	if (!ret)
		ret = carry_out_of_scope(sio, m, w, path, cap);
	tree_unlock_long(m->tree);
	if (!ret)
		ret = im_state_writer_commit(w, sio->cache_path);
	if (!ret) {
		/* The file just written holds the whole signatures now:
		 * the fresh ones in memory can go (fullsigs.h). */
		struct im_state *saved = stateio_load_cache(sio);

		if (saved) {
			tree_rdlock_long(m->tree);
			model_mark_cache(m, saved);
			tree_unlock_long(m->tree);
			tree_wrlock(m->tree);
			struct im_state *old =
				model_adopt_cache(m, saved, true);
			tree_unlock(m->tree);
			im_state_free(old);
		}
	}
	if (ret) {
		imfs_log(LOG_ERR, "saving the signature cache to %s: %s",
			 sio->cache_path, strerror(-ret));
		tree_wrlock(m->tree);
		m->dirty = true;
		tree_unlock(m->tree);
	}
out:
	im_state_writer_free(w);
	free(path);
	return ret;
}
