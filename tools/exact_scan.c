/**
 * @file exact_scan.c
 * `imatch dedupe` without --near: exact copies alone, size first for every
 * file, as jdupes and rmlint work. Two files can only be byte-identical if
 * they have the same size, so a file whose size no other file has is never
 * opened. Of the others the first 4 KiB are hashed (IM_EXACT_HEAD), and
 * only the files whose head another file of their size shares are hashed
 * whole (the XXH3-128 the signer gives); heads only tell files apart, the
 * whole hash alone makes copies. Both passes run on -j threads. Every
 * group of copies is planned, documents or not, so nothing is read again
 * to learn what they are. The index holds these files alone, with their
 * exact keys only. A plan without
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
	nlink_t nlink;
	uint8_t exact[16];
	uint8_t state; /* enum walked_state */
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
	size_t too_big; /* left out: over max_size */
};

static int on_walk_file(const char *path, const struct stat *st, void *arg)
{
	struct walk_list *w = arg;
	uint64_t size = (uint64_t)st->st_size;
	struct walked *f;

	/* Empty files are never planned, nor files a scan would not read. */
	if (size == 0)
		return 0;
	if (w->max_size && size > w->max_size) {
		w->too_big++;
		return 0;
	}
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
	f->nlink = st->st_nlink;
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
	bool verbose;	   /* name each file left out */
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
			if (ps->verbose && r == -ESTALE)
				err_msg("left out %s: it changed since the "
					"walk",
					f->path);
			else if (ps->verbose)
				err_msg("cannot read %s: %s", f->path,
					strerror(-r));
			continue;
		}
		f->state = ps->whole ? W_WHOLE : W_HEAD;
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
		     bool whole, unsigned jobs, bool verbose,
		     struct exact_scan_stats *st)
{
	struct pass ps = {.fd = fd,
			  .v = v,
			  .todo = todo,
			  .n = n,
			  .whole = whole,
			  .verbose = verbose};
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

/* A directory or .imatchignore the walk could not read: with -v, named as
 * a scan names it. */
static void on_unreadable(const char *path, int err, void *arg)
{
	(void)arg;
	err_msg("cannot read %s: %s", *path ? path : ".", strerror(err));
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
			      bool verbose, struct exact_scan_stats *st)
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
	ret = hash_pass(fd, w->v, todo, n, false, jobs, verbose, st);
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
	ret = hash_pass(fd, w->v, todo, nwhole, true, jobs, verbose, st);
	if (ret)
		goto out;
	n = keep_front(w->v, n, whole_hashed);
	sort_n(w->v, n, sizeof(*w->v), by_hash);
out:
	free(todo);
	return ret ? ret : (long)n;
}

/* Put @p f, one of a group of copies, in @p ix, and tell @p fn. */
static int put_copy(struct im_index *ix, const struct walked *f, unsigned k,
		    scan_file_fn fn, void *arg)
{
	struct im_doc_sigs d;
	struct stat st;
	int ret;

	memset(&d, 0, sizeof(d));
	memset(&st, 0, sizeof(st));
	d.status = IM_DOC_BINARY; /* an exact copy: no terms are needed */
	d.ncoords = (uint8_t)(k + 1);
	d.size = f->size;
	d.mtime_ns = ns_of(f->mtim);
	memcpy(d.exact, f->exact, sizeof(d.exact));
	d.exact_valid = 1;
	st.st_mode = S_IFREG;
	st.st_size = (off_t)f->size;
	st.st_mtim = f->mtim;
	st.st_dev = f->dev;
	st.st_ino = f->ino;
	st.st_nlink = f->nlink;
	ret = im_index_put(ix, f->path, &d);
	if (!ret && fn)
		fn(f->path, &st, &d, arg);
	return ret;
}

int scan_tree_exact(struct cli *c, int fd, struct im_index **idx,
		    scan_file_fn fn, void *arg, struct exact_scan_stats *st)
{
	struct walk_list w = {.max_size = c->p.max_size};
	struct im_walk_ops ops = {
		.file = on_walk_file,
		.unreadable = c->verbose ? on_unreadable : NULL,
		.arg = &w};
	struct im_scan_counts counts;
	struct im_params p = c->p;
	struct im_index *ix = NULL;
	long hashed;
	int ret;

	memset(st, 0, sizeof(*st));
	memset(&counts, 0, sizeof(counts));
	/* Byte-identical binary files have identical bytes read: no need to
	 * defer them here, and the index links them as a scan's does. */
	p.defer_binary = 0;
	ret = im_walk(fd, &p, &ops, &counts);
	st->files = w.n;
	st->too_big = w.too_big;
	if (!ret)
		ret = im_index_new(&ix);
	if (!ret)
		ret = im_index_set_similarity(ix, p.similarity);
	/* As a scan checks them, though nothing here signs. */
	if (!ret && im_params_check(&p, NULL, 0) < 0)
		ret = -EINVAL;
	hashed = ret ? 0
		     : hash_shared_sizes(fd, &w,
					 im_scan_threads(c->jobs, MAX_THREADS),
					 c->verbose, st);
	if (hashed < 0)
		ret = (int)hashed;
	/*
	 * Every group of copies is planned, documents, binary files and
	 * failed extractions alike (im_exact_tier()): the index needs only
	 * their exact keys, each file its own size, time and inode, which
	 * hashing found unchanged since the walk (apply checks again).
	 */
	for (size_t i = 0; !ret && i < (size_t)hashed;) {
		size_t end = run_end(w.v, (size_t)hashed, i, same_hash);
		bool copies = end - i > 1;

		st->groups += copies;
		for (; copies && i < end && !ret; i++)
			ret = put_copy(ix, &w.v[i], p.k, fn, arg);
		i = end;
	}
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
