/**
 * @file exact_scan.c
 * `imatch dedupe` without --near: exact copies alone, size first for every
 * file, as jdupes and rmlint work. Two files can only be byte-identical if
 * they have the same size, so a file whose size no other file has is never
 * opened. Of the others the first 4 KiB are hashed (IM_EXACT_HEAD), and
 * only the files whose head another file of their size shares are hashed
 * whole (the XXH3-128 the signer gives); heads only tell files apart, the
 * whole hash alone makes copies. Both passes run on -j threads. Of each
 * group of files whose hash is the same one is looked at, to learn whether
 * they are documents at all (only documents are planned). The index
 * holds these files alone, with their exact keys only. A plan without
 * --near follows exact links only, so it plans the files and keepers a full
 * scan plans; its clusters are the groups of copies, where a full scan's
 * are named by signatures this scan never computes.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
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

/* What became of a walked file. */
enum walked_state {
	W_WALKED, /* not read: its size is its own, or not read yet */
	W_HEAD,	  /* exact holds the hash of its first IM_EXACT_HEAD bytes,
		   * of the whole file when it has no more */
	W_WHOLE,  /* exact holds the hash of the whole file */
	W_GONE,	  /* changed, vanished or unreadable since the walk */
};

struct walked {
	char *path;
	uint64_t size;
	struct timespec mtim, ctim;
	dev_t dev;
	ino_t ino;
	uint8_t exact[16];
	uint8_t state; /* enum walked_state */
	uint8_t fmt;   /* enum im_format sniffed from the head (W_HEAD on) */
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
	struct walked *f;

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
	f = &w->v[w->n];
	memset(f, 0, sizeof(*f));
	f->path = strdup(path);
	if (!f->path)
		return -ENOMEM;
	f->size = size;
	f->mtim = st->st_mtim;
	f->ctim = st->st_ctim;
	f->dev = st->st_dev;
	f->ino = st->st_ino;
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

/* Size, then head hash, then path. */
static int by_head(const void *pa, const void *pb)
{
	const struct walked *a = pa, *b = pb;
	int r;

	if (a->size != b->size)
		return a->size < b->size ? -1 : 1;
	r = memcmp(a->exact, b->exact, sizeof(a->exact));
	return r ? r : strcmp(a->path, b->path);
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

static int same_head(const struct walked *a, const struct walked *b)
{
	return a->size == b->size &&
	       !memcmp(a->exact, b->exact, sizeof(a->exact));
}

static int same_hash(const struct walked *a, const struct walked *b)
{
	return !memcmp(a->exact, b->exact, sizeof(a->exact));
}

/* Move the members of @p v[0 .. n) that @p keep keeps to the front, in
 * their order. @return how many. */
static size_t keep_front(struct walked *v, size_t n,
			 bool (*keep)(const struct walked *))
{
	size_t kept = 0;

	for (size_t i = 0; i < n; i++) {
		if (!keep(&v[i]))
			continue;
		struct walked t = v[kept];
		v[kept++] = v[i];
		v[i] = t;
	}
	return kept;
}

/* ---- Hashing, on -j threads ------------------------------------------------ */

/* Read buffer of one hashing thread: big files go by in few reads, and a
 * chunk still fits in the second-level cache when it is hashed. */
#define READ_BUF ((size_t)256 << 10)

/* Fewer files than this are hashed by the calling thread alone: starting a
 * thread costs about as much as hashing a few dozen small cached files. */
#define MIN_PER_THREAD 64

#define MAX_THREADS 64

/* One pass: hash @p v[i] for each i in @p todo, heads or whole files. */
struct pass {
	int fd;
	struct walked *v;
	const size_t *todo;
	size_t n;
	bool whole;
	size_t next;	   /* the next of todo to take; atomic */
	cpu_set_t allowed; /* the CPUs this process may run on */
};

/* What one thread of a pass did. */
struct pass_worker {
	struct pass *pass;
	pthread_t tid;
	bool started;
	const cpu_set_t *allowed; /* to take back once started, or NULL */
	uint64_t bytes;
	size_t gone;
	int err; /* -ENOMEM */
};

static void *pass_run(void *arg)
{
	struct pass_worker *wk = arg;
	struct pass *ps = wk->pass;
	char *buf = malloc(ps->whole ? READ_BUF : IM_EXACT_HEAD);

	/* Started on a CPU of its own (hash_pass()); from here on the
	 * scheduler may move it as it likes. */
	if (wk->allowed)
		pthread_setaffinity_np(pthread_self(), sizeof(*wk->allowed),
				       wk->allowed);
	if (!buf) {
		wk->err = -ENOMEM;
		return NULL;
	}
	for (;;) {
		size_t t = __atomic_fetch_add(&ps->next, 1, __ATOMIC_RELAXED);
		struct walked *f;
		struct im_exact_seen seen;
		uint64_t bytes = 0;
		int r;

		if (t >= ps->n)
			break;
		f = &ps->v[ps->todo[t]];
		seen.size = f->size;
		seen.mtime_ns = ns_of(f->mtim);
		seen.ctime_ns = ns_of(f->ctim);
		seen.dev = (uint64_t)f->dev;
		seen.ino = (uint64_t)f->ino;
		r = im_exact_hash_seen_at(
			ps->fd, f->path, &seen,
			ps->whole ? UINT64_MAX : IM_EXACT_HEAD, buf,
			ps->whole ? READ_BUF : IM_EXACT_HEAD, f->exact, &bytes);
		wk->bytes += bytes;
		if (r == -ENOMEM)
			wk->err = r;
		if (r) {
			f->state = W_GONE;
			wk->gone++;
			continue;
		}
		f->state = ps->whole ? W_WHOLE : W_HEAD;
		/* The first bytes, for text_by_sniff(): identical files
		 * sniff alike, so one file's head speaks for its copies.
		 * Sniffed once, where the head is in the buffer and the file
		 * may have a copy: a whole file that fits the buffer in the
		 * whole pass, any other in the head pass. */
		if (ps->whole ==
		    (f->size > IM_EXACT_HEAD && f->size <= READ_BUF))
			f->fmt = (uint8_t)im_extract_sniff(
				buf, f->size < IM_EXACT_HEAD ? (size_t)f->size
							     : IM_EXACT_HEAD);
	}
	free(buf);
	return NULL;
}

/*
 * Start wk[1 .. nw) on pass_run(). Each starts on another CPU than the
 * caller's, one it may run on: left alone, the scheduler wakes a new thread
 * on its parent's CPU and, over a pass of a few milliseconds, often keeps
 * it there (measured: no gain from a second thread without this). A
 * thread that fails to start leaves its share to the others.
 */
static void start_workers(struct pass *ps, struct pass_worker *wk, unsigned nw)
{
	int cpus[MAX_THREADS], ncpus = 0, me = sched_getcpu();
	bool spread = nw > 1 &&
		      !sched_getaffinity(0, sizeof(ps->allowed), &ps->allowed);

	for (int c = 0; spread && c < CPU_SETSIZE && ncpus < MAX_THREADS; c++)
		if (CPU_ISSET(c, &ps->allowed) && c != me)
			cpus[ncpus++] = c;
	for (unsigned i = 1; i < nw; i++) {
		pthread_attr_t at, *pat = NULL;
		cpu_set_t one;

		if (ncpus && !pthread_attr_init(&at)) {
			CPU_ZERO(&one);
			CPU_SET(cpus[(i - 1) % (unsigned)ncpus], &one);
			pat = &at;
			if (!pthread_attr_setaffinity_np(&at, sizeof(one),
							 &one))
				wk[i].allowed = &ps->allowed;
		}
		wk[i].started =
			!pthread_create(&wk[i].tid, pat, pass_run, &wk[i]);
		if (pat)
			pthread_attr_destroy(pat);
	}
}

/*
 * Hash the files @p todo[0 .. n) of @p v, on up to @p jobs threads (the
 * caller's among them). Each file's result is its own, so the outcome does
 * not depend on which thread took what.
 * @return 0 or -ENOMEM.
 */
static int hash_pass(int fd, struct walked *v, const size_t *todo, size_t n,
		     bool whole, unsigned jobs, struct exact_scan_stats *st)
{
	struct pass ps = {
		.fd = fd, .v = v, .todo = todo, .n = n, .whole = whole};
	struct pass_worker wk[MAX_THREADS];
	unsigned nw = jobs;
	int ret = 0;

	if (nw > n / MIN_PER_THREAD)
		nw = (unsigned)(n / MIN_PER_THREAD);
	if (nw > MAX_THREADS)
		nw = MAX_THREADS;
	if (nw < 1)
		nw = 1;
	memset(wk, 0, nw * sizeof(*wk));
	for (unsigned i = 0; i < nw; i++)
		wk[i].pass = &ps;
	start_workers(&ps, wk, nw);
	pass_run(&wk[0]);
	for (unsigned i = 0; i < nw; i++) {
		if (i && wk[i].started)
			pthread_join(wk[i].tid, NULL);
		st->bytes += wk[i].bytes;
		st->unreadable += wk[i].gone;
		if (wk[i].err)
			ret = wk[i].err;
	}
	return ret;
}

static bool sharing(const struct walked *f)
{
	return f->state != W_WALKED;
}

static bool head_hashed(const struct walked *f)
{
	return f->state == W_HEAD;
}

static bool whole_hashed(const struct walked *f)
{
	return f->state == W_WHOLE;
}

/*
 * Hash every file of @p w that can have a copy, and move those hashed whole
 * to the front of w->v, ordered by hash. Size first: a file whose size no
 * other file has is never opened. Then the head: of files of one size, the
 * first IM_EXACT_HEAD bytes are hashed, and only files whose head another
 * file of their size shares are read whole (a file no longer than the head
 * was read whole already). Files told apart by a head can differ in their
 * hash alone; copies are decided by the hash of the whole file. A file that
 * changed or vanished since the walk is left out, as a scan leaves out what
 * it cannot read.
 * @return the number hashed whole, or a negative errno (-ENOMEM).
 */
static long hash_shared_sizes(int fd, struct walk_list *w, unsigned jobs,
			      struct exact_scan_stats *st)
{
	size_t n = 0, nwhole = 0, *todo;
	int ret;

	sort_n(w->v, w->n, sizeof(*w->v), by_size);
	for (size_t i = 0; i < w->n;) {
		size_t end = run_end(w->v, w->n, i, same_size);
		bool shared = end - i > 1;

		/* Mark those to read; W_HEAD until they are. */
		for (; shared && i < end; i++)
			w->v[i].state = W_HEAD;
		i = end;
	}
	n = keep_front(w->v, w->n, sharing);
	st->hashed = n;
	todo = malloc((n ? n : 1) * sizeof(*todo));
	if (!todo)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		todo[i] = i;
	ret = hash_pass(fd, w->v, todo, n, false, jobs, st);
	if (ret)
		goto out;
	n = keep_front(w->v, n, head_hashed);
	sort_n(w->v, n, sizeof(*w->v), by_head);
	for (size_t i = 0; i < n;) {
		size_t end = run_end(w->v, n, i, same_head);

		if (end - i == 1)
			st->head_apart++;
		else if (w->v[i].size > IM_EXACT_HEAD)
			for (size_t j = i; j < end; j++)
				todo[nwhole++] = j;
		else
			for (size_t j = i; j < end; j++)
				w->v[j].state = W_WHOLE;
		i = end;
	}
	st->whole = nwhole;
	ret = hash_pass(fd, w->v, todo, nwhole, true, jobs, st);
	if (ret)
		goto out;
	n = keep_front(w->v, n, whole_hashed);
	sort_n(w->v, n, sizeof(*w->v), by_hash);
out:
	free(todo);
	return ret ? ret : (long)n;
}

/*
 * Whether plain text, HTML or e-mail is a document is told by its first
 * bytes: turning it into text can only fail by growing past max_text, and
 * a file of at most max_text / 3 bytes cannot (a byte becomes at most three
 * of UTF-8). For such a group of copies the result is made here from the
 * format its head read sniffed (the head of a file its whole hash then
 * found unchanged since the walk), without reading, converting and
 * tokenizing the whole file (the index needs no terms for exact copies);
 * any other format is read as a scan reads it.
 * @return 1 with *d filled, or 0 to read the file.
 */
static int text_by_sniff(const struct walked *f, unsigned k, size_t max_text,
			 struct im_doc_sigs *d)
{
	if (max_text && f->size > max_text / 3)
		return 0;
	if (f->fmt != IM_FMT_TEXT && f->fmt != IM_FMT_HTML &&
	    f->fmt != IM_FMT_EMAIL)
		return 0;
	memset(d, 0, sizeof(*d));
	d->status = IM_DOC_REJECTED; /* a text, as a first scan's read says */
	d->format = f->fmt;
	d->ncoords = (uint8_t)(k + 1);
	d->exact_valid = 1;
	return 1;
}

/*
 * Text, HTML or e-mail too long for text_by_sniff(): read the file and
 * extract its text, which says whether it is a document as a scan's read
 * does (text no longer than max_text), without the terms and sketch a scan
 * would then make of it, the bulk of the cost (none is needed for exact
 * copies). The bytes must hash as the file did: else it changed since.
 * @p *x is made on first use. Any other format is read by the signer.
 * @return 1 with *d filled; 0 for another format or no memory for the
 *         file (the signer's read decides); -ESTALE when the file changed
 *         or cannot be read since it was hashed; or -ENOMEM (extractor).
 */
static int text_by_extract(struct im_extractor **x,
			   const struct im_extract_opts *xo, int fd,
			   const struct walked *f, unsigned k,
			   struct im_doc_sigs *d)
{
	struct im_extract_result xr;
	const char *base = strrchr(f->path, '/');
	uint8_t exact[16];
	struct stat st;
	char *buf = NULL;
	size_t n = 0;
	int ffd = -1, ret;

	if (f->fmt != IM_FMT_TEXT && f->fmt != IM_FMT_HTML &&
	    f->fmt != IM_FMT_EMAIL)
		return 0;
	if (!*x && im_extractor_new(xo, x))
		return -ENOMEM;
	/* One byte more than it should have: a file grown is seen. Without
	 * the memory, the signer's read says what it says (a failed read). */
	buf = f->size < SIZE_MAX ? malloc((size_t)f->size + 1) : NULL;
	if (!buf)
		return 0;
	ret = -ESTALE;
	if (im_open_beneath(fd, f->path, O_RDONLY | O_NOCTTY | O_NONBLOCK,
			    &ffd) ||
	    fstat(ffd, &st) || (uint64_t)st.st_size != f->size ||
	    ns_of(st.st_mtim) != ns_of(f->mtim) ||
	    im_read_full(ffd, buf, f->size + 1, &n) || n != f->size)
		goto out;
	im_exact_hash_buf(buf, n, exact);
	if (memcmp(exact, f->exact, sizeof(exact)))
		goto out;
	ret = im_extract(*x, base ? base + 1 : f->path, buf, n, &xr);
	if (ret < 0)
		goto out;
	memset(d, 0, sizeof(*d));
	if (xr.format == IM_FMT_BINARY || xr.fail)
		d->status = xr.fail ? IM_DOC_FAILED : IM_DOC_BINARY;
	else
		d->status = IM_DOC_REJECTED; /* as text_by_sniff() */
	d->err = (int32_t)xr.fail;
	d->format = (uint8_t)xr.format;
	d->ncoords = (uint8_t)(k + 1);
	d->exact_valid = 1;
	ret = 1;
out:
	if (ffd >= 0)
		close(ffd);
	free(buf);
	return ret;
}

int scan_tree_exact(struct cli *c, int fd, struct im_index **idx,
		    scan_file_fn fn, void *arg, struct exact_scan_stats *st)
{
	struct walk_list w = {.max_size = c->p.max_size};
	struct im_walk_ops ops = {.file = on_walk_file, .arg = &w};
	struct im_scan_counts counts;
	struct im_signer *signer = NULL;
	struct im_extractor *x = NULL;
	struct im_params p = c->p;
	struct im_index *ix = NULL;
	struct im_extract_opts xo;
	long hashed;
	int ret;

	memset(st, 0, sizeof(*st));
	memset(&counts, 0, sizeof(counts));
	im_extract_opts_init(&xo); /* the signer's limits */
	xo.filters = p.filters;
	/* Byte-identical binary files have identical bytes read: no need to
	 * defer them here, and the index links them as a scan's does. */
	p.defer_binary = 0;
	ret = im_walk(fd, &p, &ops, &counts);
	st->files = w.n;
	if (!ret)
		ret = im_index_new(&ix);
	if (!ret)
		ret = im_index_set_similarity(ix, p.similarity);
	/* As im_signer_new() checks them: the signer is made only when a
	 * group needs it, which saves loading OpenSSL's configuration. */
	if (!ret && im_params_check(&p, NULL, 0) < 0)
		ret = -EINVAL;
	hashed = ret ? 0
		     : hash_shared_sizes(fd, &w,
					 im_scan_threads(c->jobs, MAX_THREADS),
					 st);
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
		memset(&fst, 0, sizeof(fst));
		for (; copies && i < end; i++) {
			if (text_by_sniff(&w.v[i], p.k, xo.max_text, &d)) {
				fst.st_mode = S_IFREG;
				st->sniffed++;
				break;
			}
			ret = text_by_extract(&x, &xo, fd, &w.v[i], p.k, &d);
			if (ret == 1) {
				ret = 0;
				fst.st_mode = S_IFREG;
				st->read++;
				break;
			}
			if (ret == -ESTALE) {
				ret = 0;
				st->unreadable++;
				continue;
			}
			if (!ret && !signer)
				ret = im_signer_new(NULL, &p, &signer);
			if (!ret)
				ret = im_signer_prepare_at(signer, fd,
							   w.v[i].path, &d,
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
	im_extractor_free(x);
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
