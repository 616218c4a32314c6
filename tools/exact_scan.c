/**
 * @file exact_scan.c
 * `imatch dedupe` without --near: exact copies alone, size first for every
 * file, as jdupes and rmlint work. Two files can only be byte-identical if
 * they have the same size, so a file whose size no other file has is never
 * opened; the others are hashed (the XXH3-128 the signer gives), and of
 * each group of files whose hash is the same one is looked at, to learn
 * whether they are documents at all (only documents are planned). The index
 * holds these files alone, with their exact keys only. A plan without
 * --near follows exact links only, so it plans the files and keepers a full
 * scan plans; its clusters are the groups of copies, where a full scan's
 * are named by signatures this scan never computes.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "beneath.h"
#include "exact.h"
#include "extract.h"
#include "fdio.h"
#include "imatch.h"
#include "index.h"
#include "scan.h"
#include "sig.h"

struct walked {
	char *path;
	uint64_t size;
	struct timespec mtim;
	dev_t dev;
	ino_t ino;
	uint8_t exact[16];
};

/* A modification time as the index and the plan keep it. */
static int64_t ns_of(struct timespec t)
{
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

struct walk_list {
	struct walked *v;
	size_t n, cap;
	uint64_t max_size;
};

static int on_walk_file(const char *path, const struct stat *st, void *arg)
{
	struct walk_list *w = arg;
	uint64_t size = (uint64_t)st->st_size;

	/* Empty files are never planned, nor files a scan would not read. */
	if (size == 0 || (w->max_size && size > w->max_size))
		return 0;
	if (w->n == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 1024;
		struct walked *v = realloc(w->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		w->v = v;
		w->cap = cap;
	}
	w->v[w->n].path = strdup(path);
	if (!w->v[w->n].path)
		return -ENOMEM;
	w->v[w->n].size = size;
	w->v[w->n].mtim = st->st_mtim;
	w->v[w->n].dev = st->st_dev;
	w->v[w->n].ino = st->st_ino;
	w->n++;
	return 0;
}

/* Size, then path: the order, and so the output, does not depend on the
 * walk's. */
static int by_size(const void *pa, const void *pb)
{
	const struct walked *a = pa, *b = pb;

	if (a->size != b->size)
		return a->size < b->size ? -1 : 1;
	return strcmp(a->path, b->path);
}

static int by_hash(const void *pa, const void *pb)
{
	const struct walked *a = pa, *b = pb;
	int r = memcmp(a->exact, b->exact, sizeof(a->exact));

	return r ? r : strcmp(a->path, b->path);
}

/* The end of the run of @p v[i] whose members @p same says are equal. */
static size_t run_end(const struct walked *v, size_t n, size_t i,
		      int (*same)(const struct walked *, const struct walked *))
{
	size_t j = i + 1;

	while (j < n && same(&v[i], &v[j]))
		j++;
	return j;
}

static int same_size(const struct walked *a, const struct walked *b)
{
	return a->size == b->size;
}

static int same_hash(const struct walked *a, const struct walked *b)
{
	return !memcmp(a->exact, b->exact, sizeof(a->exact));
}

/*
 * Hash every file of @p w whose size another has; move those hashed to the
 * front of w->v, ordered by hash. A file that changed or vanished since the
 * walk is left out, as a scan leaves out what it cannot read.
 * @return the number hashed, or a negative errno (-ENOMEM).
 */
static long hash_shared_sizes(int fd, struct walk_list *w,
			      struct exact_scan_stats *st)
{
	size_t kept = 0;

	qsort(w->v, w->n, sizeof(*w->v), by_size);
	for (size_t i = 0; i < w->n;) {
		size_t end = run_end(w->v, w->n, i, same_size);
		bool shared = end - i > 1;

		for (; shared && i < end; i++) {
			struct walked *f = &w->v[i];
			uint64_t bytes = 0;
			int r = im_exact_hash_at(fd, f->path, f->size,
						 ns_of(f->mtim), f->exact,
						 &bytes);

			st->hashed++;
			st->bytes += bytes;
			if (r == -ENOMEM)
				return r;
			if (r) {
				st->unreadable++;
				continue;
			}
			/* Swap it forward: w->v[kept], unless it is f, is a
			 * file already passed and not hashed. */
			struct walked t = w->v[kept];
			w->v[kept++] = *f;
			*f = t;
		}
		i = end;
	}
	qsort(w->v, kept, sizeof(*w->v), by_hash);
	return (long)kept;
}

/*
 * Whether plain text, HTML or e-mail is a document is told by its first
 * bytes: turning it into text can only fail by growing past max_text, and
 * a file of at most max_text / 3 bytes cannot (a byte becomes at most three
 * of UTF-8). For such a group of copies the result is made here, without
 * reading, converting and tokenizing the whole file (the index needs no
 * terms for exact copies); any other format is read as a scan reads it.
 * @return 1 with *d and *st filled, or 0 to read the file.
 */
static int text_by_sniff(int fd, const struct walked *f, unsigned k,
			 size_t max_text, struct im_doc_sigs *d,
			 struct stat *st)
{
	char buf[IM_EXTRACT_SNIFF];
	size_t n = 0;
	enum im_format fmt;
	int ffd;

	if (max_text && f->size > max_text / 3)
		return 0;
	if (im_open_beneath(fd, f->path, O_RDONLY | O_NOCTTY | O_NONBLOCK,
			    &ffd))
		return 0;
	if (im_read_full(ffd, buf, sizeof(buf), &n)) {
		close(ffd);
		return 0;
	}
	if (fstat(ffd, st)) {
		close(ffd);
		return 0;
	}
	close(ffd);
	fmt = im_extract_sniff(buf, n);
	/* Changed since it was hashed: let the scan's read say what it is. */
	if ((uint64_t)st->st_size != f->size ||
	    ns_of(st->st_mtim) != ns_of(f->mtim) ||
	    (fmt != IM_FMT_TEXT && fmt != IM_FMT_HTML && fmt != IM_FMT_EMAIL))
		return 0;
	memset(d, 0, sizeof(*d));
	d->status = IM_DOC_REJECTED; /* a text, as a first scan's read says */
	d->format = (uint8_t)fmt;
	d->ncoords = (uint8_t)(k + 1);
	d->exact_valid = 1;
	return 1;
}

int scan_tree_exact(struct cli *c, int fd, struct im_index **idx,
		    scan_file_fn fn, void *arg, struct exact_scan_stats *st)
{
	struct walk_list w = {.max_size = c->p.max_size};
	struct im_walk_ops ops = {.file = on_walk_file, .arg = &w};
	struct im_scan_counts counts;
	struct im_signer *signer = NULL;
	struct im_params p = c->p;
	struct im_index *ix = NULL;
	struct im_extract_opts xo;
	long hashed;
	int ret;

	memset(st, 0, sizeof(*st));
	memset(&counts, 0, sizeof(counts));
	im_extract_opts_init(&xo); /* the signer's limits */
	/* Byte-identical binary files have identical bytes read: no need to
	 * defer them here, and the index links them as a scan's does. */
	p.defer_binary = 0;
	ret = im_walk(fd, &p, &ops, &counts);
	st->files = w.n;
	if (!ret)
		ret = im_index_new(&ix);
	if (!ret)
		ret = im_index_set_similarity(ix, p.similarity);
	if (!ret)
		ret = im_signer_new(NULL, &p, &signer);
	hashed = ret ? 0 : hash_shared_sizes(fd, &w, st);
	if (hashed < 0)
		ret = (int)hashed;
	for (size_t i = 0; !ret && i < (size_t)hashed;) {
		size_t end = run_end(w.v, (size_t)hashed, i, same_hash);
		bool copies = end - i > 1;
		const struct im_terms *terms;
		struct im_doc_sigs d;
		struct stat fst;

		/*
		 * Only copies are read as documents, and of each group only
		 * one: identical bytes are the same document. The others take
		 * its result with their own size, time and inode, which their
		 * hashing found unchanged since the walk (and apply checks
		 * again). A file that changed since it was hashed is skipped.
		 */
		for (; copies && i < end; i++) {
			if (text_by_sniff(fd, &w.v[i], p.k, xo.max_text, &d,
					  &fst)) {
				st->sniffed++;
				break;
			}
			ret = im_signer_prepare_at(signer, fd, w.v[i].path, &d,
						   &fst, &terms);
			if (ret)
				break;
			st->read++;
			if (d.exact_valid &&
			    !memcmp(d.exact, w.v[i].exact, sizeof(d.exact)))
				break;
			st->unreadable++;
		}
		for (; copies && i < end && !ret; i++) {
			const struct walked *f = &w.v[i];

			d.size = f->size;
			d.mtime_ns = ns_of(f->mtim);
			memcpy(d.exact, f->exact, sizeof(d.exact));
			fst.st_size = (off_t)f->size;
			fst.st_mtim = f->mtim;
			fst.st_dev = f->dev;
			fst.st_ino = f->ino;
			ret = im_index_put(ix, f->path, &d);
			if (!ret && fn)
				fn(f->path, &fst, &d, arg);
		}
		i = end;
	}
	im_signer_free(signer);
	for (size_t i = 0; i < w.n; i++)
		free(w.v[i].path);
	free(w.v);
	if (ret) {
		err_msg("%s: %s", c->argv[0], strerror(-ret));
		if (ix)
			im_index_free(ix);
		return -1;
	}
	*idx = ix;
	return 0;
}
