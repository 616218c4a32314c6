/*
 * Unit tests for core/scan.c: what the walker visits and counts, that it
 * never follows symlinks nor runs out of fds in deep trees, odd names, and
 * that the parallel scans give exactly what signing each file alone gives,
 * whatever the number of threads.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "unit.h"
#include "scan.h"
#include "scope.h"

/* ---- Helpers ---------------------------------------------------------------- */

static char root[256];
static int rootfd = -1;

static void mkpath(const char *rel)
{
	char p[4096];

	snprintf(p, sizeof(p), "%s/%s", root, rel);
	ck_assert_msg(mkdir(p, 0755) == 0, "mkdir %s: %s", p, strerror(errno));
}

static void put(const char *rel, const char *text)
{
	char p[4096];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", root, rel);
	f = fopen(p, "w");
	ck_assert_msg(f != NULL, "create %s: %s", p, strerror(errno));
	fputs(text, f);
	fclose(f);
}

static void rm_rf(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
	DIR *d;
	struct dirent *de;

	if (fd < 0) {
		unlinkat(dfd, name, 0);
		return;
	}
	d = fdopendir(fd);
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			rm_rf(dirfd(d), de->d_name);
	closedir(d);
	unlinkat(dfd, name, AT_REMOVEDIR);
}

static void setup(void)
{
	snprintf(root, sizeof(root), "/tmp/imatch-test-scan-XXXXXX");
	ck_assert(mkdtemp(root) != NULL);
	rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert(rootfd >= 0);
}

static void teardown(void)
{
	close(rootfd);
	rm_rf(AT_FDCWD, root);
}

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* Paths seen by a walk, in visiting order. */
struct seen {
	char **v;
	size_t n;
	int max_fds;
};

static int on_file(const char *path, const struct stat *st, void *arg)
{
	struct seen *s = arg;
	int fds = open_fds();

	(void)st;
	if (fds > s->max_fds)
		s->max_fds = fds;
	s->v = realloc(s->v, (s->n + 1) * sizeof(*s->v));
	s->v[s->n++] = strdup(path);
	return 0;
}

static int on_dir(const char *path, const struct stat *st, void *arg)
{
	struct seen *s = arg;

	ck_assert_msg(S_ISDIR(st->st_mode), "dir callback gets a directory");
	s->v = realloc(s->v, (s->n + 1) * sizeof(*s->v));
	s->v[s->n++] = strdup(path);
	return 0;
}

static bool seen_has(const struct seen *s, const char *path)
{
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->v[i], path))
			return true;
	return false;
}

static void seen_free(struct seen *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
}

static void walk_all(const struct im_params *p, struct seen *s,
		     struct im_scan_counts *c, dev_t sdev, ino_t sino)
{
	struct im_walk_ops ops = {
		.file = on_file, .arg = s, .skip_dev = sdev, .skip_ino = sino};

	memset(s, 0, sizeof(*s));
	memset(c, 0, sizeof(*c));
	ck_assert_int_eq(im_walk(rootfd, p, &ops, c), 0);
}

/* ---- Walks -------------------------------------------------------------------- */

START_TEST(test_scan_walk_counts_and_hidden)
{
	struct im_params p;
	struct im_scan_counts c;
	struct seen s;

	im_params_init(&p);
	put("a.txt", "alpha");
	mkpath("sub");
	put("sub/b.txt", "beta");
	mkpath("sub/deeper");
	put("sub/deeper/c.txt", "gamma");
	put(".hidden.txt", "hidden");
	mkpath(".git");
	put(".git/config", "x");
	{
		char fp[512];

		snprintf(fp, sizeof(fp), "%s/fifo", root);
		ck_assert_int_eq(mkfifo(fp, 0600), 0);
	}

	walk_all(&p, &s, &c, 0, 0);
	ck_assert_msg(s.n == 3, "expected 3 files, got %zu", s.n);
	ck_assert_msg(seen_has(&s, "a.txt") && seen_has(&s, "sub/b.txt") &&
			      seen_has(&s, "sub/deeper/c.txt"),
		      "paths are relative, joined with '/', without './'");
	ck_assert_uint_eq(c.files, 3);
	ck_assert_msg(c.dirs == 3, "root, sub, sub/deeper: got %llu",
		      (unsigned long long)c.dirs);
	ck_assert_msg(c.hidden == 2, ".hidden.txt and .git skipped: got %llu",
		      (unsigned long long)c.hidden);
	ck_assert_msg(c.other == 1, "the fifo is counted as other");
	ck_assert_uint_eq(c.errors, 0);
	seen_free(&s);

	p.hidden = 1;
	walk_all(&p, &s, &c, 0, 0);
	ck_assert_msg(s.n == 5 && seen_has(&s, ".git/config") &&
			      seen_has(&s, ".hidden.txt"),
		      "with hidden, dot-names are read (got %zu files)", s.n);
	ck_assert_uint_eq(c.hidden, 0);
	seen_free(&s);
}
END_TEST

START_TEST(test_scan_walk_dirs_before_files)
{
	struct im_params p;
	struct im_scan_counts c = {0};
	struct seen s = {0};
	struct im_walk_ops ops = {.dir = on_dir, .file = on_file, .arg = &s};

	im_params_init(&p);
	mkpath("b");
	put("b/y.txt", "y");
	put("x.txt", "x");
	mkpath("a");
	put("a/z.txt", "z");
	ck_assert_int_eq(im_walk(rootfd, &p, &ops, &c), 0);
	ck_assert_uint_eq(s.n, 6);
	/* Byte order within a directory, files before subdirectories, each
	 * directory announced (the root as "") before its files. */
	static const char *const want[] = {"",	      "x.txt", "a",
					   "a/z.txt", "b",     "b/y.txt"};
	for (size_t i = 0; i < 6; i++)
		ck_assert_msg(!strcmp(s.v[i], want[i]),
			      "visit %zu: %s, expected %s", i, s.v[i], want[i]);
	seen_free(&s);
}
END_TEST

static int on_path(const char *path, const struct stat *st, void *arg)
{
	struct seen *s = arg;

	(void)st;
	s->v = realloc(s->v, (s->n + 1) * sizeof(*s->v));
	s->v[s->n++] = strdup(path);
	return 0;
}

/* A directory whose entries take many reads of the kernel's list (hundreds
 * of kilobytes of long names): every name once, in byte order, files before
 * subdirectories, and a symlink among them counted, not followed. */
START_TEST(test_scan_walk_large_directory)
{
	enum { NAMES = 2400, DIR_EVERY = 300 };
	struct im_params p;
	struct im_scan_counts c = {0};
	struct seen s = {0};
	struct im_walk_ops ops = {.dir = on_path, .file = on_path, .arg = &s};
	char name[200], rel[420];
	size_t files = 0, dirs = 0;

	im_params_init(&p);
	mkpath("big");
	/* Created in reverse, so that no order of creation is the answer. */
	for (int i = NAMES - 1; i >= 0; i--) {
		snprintf(name, sizeof(name), "%04d-%0150d", i, i);
		snprintf(rel, sizeof(rel), "big/%s", name);
		if (i % DIR_EVERY == 7) {
			mkpath(rel);
			snprintf(rel, sizeof(rel), "big/%s/in.txt", name);
			put(rel, "inner");
			dirs++;
		} else {
			put(rel, "x");
			files++;
		}
	}
	{
		char target[512], link[512];

		snprintf(target, sizeof(target), "%s/big/0000-%0150d", root, 0);
		snprintf(link, sizeof(link), "%s/big/zz-link", root);
		ck_assert_int_eq(symlink(target, link), 0);
	}
	ck_assert_int_eq(im_walk(rootfd, &p, &ops, &c), 0);
	ck_assert_uint_eq(c.files, files + dirs);
	ck_assert_uint_eq(c.dirs, 2 + dirs);
	ck_assert_uint_eq(c.other, 1);
	ck_assert_uint_eq(c.errors, 0);
	/* "", "big", its files in order, then each subdirectory and its file. */
	ck_assert_uint_eq(s.n, 2 + files + 2 * dirs);
	ck_assert_str_eq(s.v[1], "big");
	for (size_t i = 3; i < 2 + files; i++)
		ck_assert_msg(strcmp(s.v[i - 1], s.v[i]) < 0,
			      "files in byte order: %.12s before %.12s",
			      s.v[i - 1], s.v[i]);
	for (size_t i = 2 + files; i < s.n; i += 2) {
		ck_assert_msg(
			!strstr(s.v[i], "/in.txt") &&
				!strcmp(s.v[i + 1] + strlen(s.v[i]), "/in.txt"),
			"a subdirectory, then its file: %.12s", s.v[i]);
		if (i > 2 + files)
			ck_assert(strcmp(s.v[i - 2], s.v[i]) < 0);
	}
	seen_free(&s);
}
END_TEST

START_TEST(test_scan_walk_symlinks_not_followed)
{
	struct im_params p;
	struct im_scan_counts c;
	struct seen s;
	char outside[] = "/tmp/imatch-test-outside-XXXXXX", t[512], l[512];

	im_params_init(&p);
	ck_assert(mkdtemp(outside) != NULL);
	snprintf(t, sizeof(t), "%s/secret.txt", outside);
	FILE *f = fopen(t, "w");
	fputs("secret", f);
	fclose(f);
	put("real.txt", "real");
	snprintf(l, sizeof(l), "%s/link-dir", root);
	ck_assert_int_eq(symlink(outside, l), 0);
	snprintf(l, sizeof(l), "%s/link-file", root);
	ck_assert_int_eq(symlink(t, l), 0);
	snprintf(l, sizeof(l), "%s/loop", root);
	ck_assert_int_eq(symlink(".", l), 0);

	walk_all(&p, &s, &c, 0, 0);
	ck_assert_msg(s.n == 1 && seen_has(&s, "real.txt"),
		      "only the real file is walked, got %zu files", s.n);
	ck_assert_msg(c.other == 3, "three symlinks counted as other, got %llu",
		      (unsigned long long)c.other);
	seen_free(&s);
	rm_rf(AT_FDCWD, outside);
}
END_TEST

START_TEST(test_scan_walk_skip_dir)
{
	struct im_params p;
	struct im_scan_counts c;
	struct seen s;
	struct stat st;

	im_params_init(&p);
	put("keep.txt", "k");
	mkpath("state");
	put("state/cache", "c");
	ck_assert_int_eq(fstatat(rootfd, "state", &st, 0), 0);
	walk_all(&p, &s, &c, st.st_dev, st.st_ino);
	ck_assert_msg(s.n == 1 && seen_has(&s, "keep.txt"),
		      "the skip directory is left out");
	seen_free(&s);
}
END_TEST

START_TEST(test_scan_walk_deep_tree_bounded_fds)
{
	enum { DEPTH = 150 };
	struct im_params p;
	struct im_scan_counts c;
	struct seen s;
	char rel[DEPTH * 2 + 64], f[sizeof(rel) + 16];
	size_t len = 0;
	int before;

	im_params_init(&p);
	/* A chain a/a/a/... with, at every level, a file f and a sibling
	 * directory z/ holding a file: after the chain, the walker has to come
	 * back to every level for z, through frames whose fds it closed. */
	rel[0] = '\0';
	for (int i = 0; i < DEPTH; i++) {
		snprintf(f, sizeof(f), "%s%sf", rel, len ? "/" : "");
		put(f, "file");
		snprintf(f, sizeof(f), "%s%sz", rel, len ? "/" : "");
		mkpath(f);
		strcat(f, "/g");
		put(f, "leaf");
		len += snprintf(rel + len, sizeof(rel) - len, "%sa",
				len ? "/" : "");
		mkpath(rel);
	}
	before = open_fds();
	walk_all(&p, &s, &c, 0, 0);
	ck_assert_msg(s.n == 2 * DEPTH, "expected %d files, got %zu", 2 * DEPTH,
		      s.n);
	ck_assert_uint_eq(c.dirs, 1 + 2 * DEPTH);
	ck_assert_uint_eq(c.errors, 0);
	ck_assert_msg(
		s.max_fds < before + 40,
		"fds stay bounded in a deep tree: %d open at most, %d before",
		s.max_fds, before);
	ck_assert_msg(open_fds() == before, "no fd leaked by the walk");
	/* The deepest z/g is reached through reopened frames. */
	snprintf(f, sizeof(f), "%s/z/g", rel);
	f[strlen(f) - 6] = '\0'; /* drop the last "/a" */
	strcat(f, "/z/g");
	ck_assert_msg(seen_has(&s, "a/z/g") && seen_has(&s, f),
		      "siblings of deep frames are walked (%s)", f);
	seen_free(&s);
}
END_TEST

START_TEST(test_scan_walk_odd_names)
{
	static const char *const names[] = {
		"new\nline.txt",      "tab\tname.txt",	 "per%cent%2F.txt",
		"bytes-\xff\xfe.txt", "back\\slash.txt", "sp ace.txt",
	};
	struct im_params p;
	struct im_scan_counts c;
	struct seen s;

	im_params_init(&p);
	mkpath("d\n\xc3");
	for (size_t i = 0; i < 6; i++) {
		char rel[64];

		snprintf(rel, sizeof(rel), "d\n\xc3/%s", names[i]);
		put(rel, "odd");
	}
	walk_all(&p, &s, &c, 0, 0);
	ck_assert_uint_eq(s.n, 6);
	for (size_t i = 0; i < 6; i++) {
		char rel[64];

		snprintf(rel, sizeof(rel), "d\n\xc3/%s", names[i]);
		ck_assert_msg(seen_has(&s, rel), "odd name %zu arrives intact",
			      i);
	}
	seen_free(&s);
}
END_TEST

START_TEST(test_scan_walk_missing_root)
{
	struct im_params p;
	struct im_scan_counts c = {0};
	struct im_walk_ops ops = {0};

	im_params_init(&p);
	ck_assert_msg(im_walk(-1, &p, &ops, &c) < 0,
		      "a bad root fd is an error, not an empty tree");
}
END_TEST

/* ---- Parallel scans ------------------------------------------------------------ */

static uint64_t rng = 88172645463325252ull;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* A corpus of pseudo-random documents over a small vocabulary, some of them
 * near-duplicates, plus a binary file, an empty one and a tiny one. */
static void make_corpus(int ndocs)
{
	char vocab[400][12];
	char *text = malloc(64 * 1024);

	rng = 88172645463325252ull;
	for (int i = 0; i < 400; i++) {
		int len = 4 + next_rand() % 6;

		for (int j = 0; j < len; j++)
			vocab[i][j] = 'a' + next_rand() % 26;
		vocab[i][len] = '\0';
	}
	mkpath("docs");
	mkpath("docs/more");
	for (int d = 0; d < ndocs; d++) {
		char rel[64];
		size_t n = 0;
		uint64_t base = d / 3; /* families of three near-duplicates */
		uint64_t saved = rng;

		rng = 1000 + base;
		for (int w = 0; w < 200; w++) {
			uint64_t r = next_rand();
			/* Zipf-like: small indices far more often. */
			int idx = (int)((r % 400) * (r % 400) / 400);

			if (w == (int)(d % 3) * 50)
				idx = 399 - (int)(d % 7);
			n += snprintf(text + n, 64 * 1024 - n, "%s%s",
				      vocab[idx], w % 12 == 11 ? ".\n" : " ");
		}
		rng = saved;
		snprintf(rel, sizeof(rel), "%s/doc%03d.txt",
			 d % 2 ? "docs" : "docs/more", d);
		put(rel, text);
	}
	free(text);
	{
		char p[512];
		FILE *f;

		snprintf(p, sizeof(p), "%s/docs/blob.bin", root);
		f = fopen(p, "w");
		fwrite("ab\0cd", 1, 5, f);
		fclose(f);
	}
	put("empty.txt", "");
	put("tiny.txt", "just three words");
}

struct result {
	char *path;
	struct im_doc_sigs d;
};

struct results {
	struct result *v;
	size_t n;
	int calls_in_flight, overlap;
};

static void on_result(const char *path, const struct stat *st,
		      const struct im_doc_sigs *d, void *arg)
{
	struct results *r = arg;

	(void)st;
	if (__atomic_add_fetch(&r->calls_in_flight, 1, __ATOMIC_SEQ_CST) > 1)
		r->overlap = 1;
	r->v = realloc(r->v, (r->n + 1) * sizeof(*r->v));
	r->v[r->n].path = strdup(path);
	r->v[r->n].d = *d;
	r->n++;
	__atomic_sub_fetch(&r->calls_in_flight, 1, __ATOMIC_SEQ_CST);
}

static int cmp_result(const void *a, const void *b)
{
	return strcmp(((const struct result *)a)->path,
		      ((const struct result *)b)->path);
}

static void results_free(struct results *r)
{
	for (size_t i = 0; i < r->n; i++)
		free(r->v[i].path);
	free(r->v);
	memset(r, 0, sizeof(*r));
}

static bool same_sigs(const struct im_doc_sigs *a, const struct im_doc_sigs *b)
{
	if (a->status != b->status || a->valid != b->valid ||
	    a->ncoords != b->ncoords || a->unique_terms != b->unique_terms)
		return false;
	if (a->exact_valid != b->exact_valid ||
	    (a->exact_valid && memcmp(a->exact, b->exact, 16)))
		return false;
	for (unsigned k = 0; k < a->ncoords; k++)
		if ((a->valid >> k & 1) &&
		    memcmp(&a->sig[k], &b->sig[k], sizeof(a->sig[k])))
			return false;
	return true;
}

static struct im_lexicon *corpus_lexicon(const struct im_params *p,
					 unsigned threads, int ndocs)
{
	struct im_scan_counts c = {0};
	struct im_lexicon *lex = NULL;
	struct im_df *df = NULL;

	ck_assert_int_eq(im_scan_df(rootfd, p, threads, NULL, &df, &c), 0);
	/* The generated documents and tiny.txt; not the empty or binary file. */
	ck_assert_msg(im_df_docs(df) == (uint64_t)ndocs + 1,
		      "df counts the documents that have terms: %llu",
		      (unsigned long long)im_df_docs(df));
	ck_assert_msg(c.by_status[IM_DOC_BINARY] == 1,
		      "the binary file is counted as binary");
	ck_assert_int_eq(im_lexicon_build(df, p->nidf_lo, p->nidf_hi,
					  p->secondary_cap, &lex),
			 0);
	im_df_free(df);
	return lex;
}

static void scan_into(const struct im_lexicon *lex, const struct im_params *p,
		      unsigned threads, struct results *r,
		      struct im_scan_counts *c)
{
	struct im_scan_ops ops = {.result = on_result, .arg = r};

	memset(r, 0, sizeof(*r));
	memset(c, 0, sizeof(*c));
	ck_assert_int_eq(im_scan_sign(rootfd, lex, p, threads, &ops, c), 0);
	qsort(r->v, r->n, sizeof(*r->v), cmp_result);
}

START_TEST(test_scan_sign_equals_signing_alone)
{
	struct im_params p;
	struct im_scan_counts c;
	struct results r;
	struct im_signer *s;
	struct im_lexicon *lex;
	size_t nsigned = 0;

	im_params_init(&p);
	make_corpus(36);
	lex = corpus_lexicon(&p, 2, 36);
	scan_into(lex, &p, 3, &r, &c);
	ck_assert_msg(r.n == 39, "every file has a result: %zu", r.n);
	ck_assert_msg(!r.overlap, "result callbacks never run at once");
	ck_assert_uint_eq(c.files, 39);
	ck_assert_uint_eq(c.by_status[IM_DOC_BINARY], 1);
	ck_assert_uint_eq(c.by_status[IM_DOC_SIGNED] +
				  c.by_status[IM_DOC_REJECTED] +
				  c.by_status[IM_DOC_BINARY],
			  39);
	ck_assert_msg(c.bytes > 36 * 500, "bytes read are counted");

	ck_assert_int_eq(im_signer_new(lex, &p, &s), 0);
	for (size_t i = 0; i < r.n; i++) {
		struct im_doc_sigs alone;

		ck_assert_int_eq(
			im_signer_sign_at(s, rootfd, r.v[i].path, &alone, NULL),
			0);
		ck_assert_msg(same_sigs(&alone, &r.v[i].d),
			      "%s: the scan signs as signing the file alone",
			      r.v[i].path);
		nsigned += alone.status == IM_DOC_SIGNED;
	}
	ck_assert_msg(nsigned >= 30, "most documents get a signature (%zu)",
		      nsigned);
	im_signer_free(s);
	results_free(&r);
	im_lexicon_free(lex);
}
END_TEST

START_TEST(test_scan_sign_threads_agree)
{
	struct im_params p;
	struct im_scan_counts c1, c4;
	struct results r1, r4;
	struct im_lexicon *lex1, *lex4;

	im_params_init(&p);
	make_corpus(30);
	lex1 = corpus_lexicon(&p, 1, 30);
	lex4 = corpus_lexicon(&p, 4, 30);
	ck_assert_msg(im_lexicon_primary_size(lex1) ==
				      im_lexicon_primary_size(lex4) &&
			      im_lexicon_secondary_size(lex1) ==
				      im_lexicon_secondary_size(lex4),
		      "df merged from 4 workers builds the same lexicon");
	scan_into(lex1, &p, 1, &r1, &c1);
	scan_into(lex4, &p, 4, &r4, &c4);
	ck_assert_uint_eq(r1.n, r4.n);
	for (size_t i = 0; i < r1.n; i++) {
		ck_assert_str_eq(r1.v[i].path, r4.v[i].path);
		ck_assert_msg(same_sigs(&r1.v[i].d, &r4.v[i].d),
			      "%s: same signatures with -j1 and -j4",
			      r1.v[i].path);
	}
	ck_assert_int_eq(memcmp(&c1, &c4, sizeof(c1)), 0);
	results_free(&r1);
	results_free(&r4);
	im_lexicon_free(lex1);
	im_lexicon_free(lex4);
}
END_TEST

static bool want_odd(const char *path, const struct stat *st, void *arg)
{
	(void)st;
	(void)arg;
	return strstr(path, "doc") && (path[strlen(path) - 5] - '0') % 2;
}

/* A state directory inside the source must not feed the statistics. */
/*
 * A df scan reads each file as the walk finds it, unstat'ed, and counts what
 * it could not open as a walk that stats does: a file it may stat but not
 * read is a file that is an error; a name in a directory it may read but
 * not search is an error and no file, as is the subdirectory there; a fifo
 * and a symlink are other. Run as nobody (in a child, if root) so that the
 * modes hold.
 */
START_TEST(test_scan_df_counts_what_it_cannot_open)
{
	const char *text = "several words of one text file, enough to count";
	const char *other = "other words in a second text file, not a copy";
	struct im_scan_counts c = {0};
	struct im_df *df = NULL;
	struct im_params p;
	char fp[512];
	int fds[2], status;
	uint64_t docs = 0;
	pid_t pid;

	put("a.txt", text);
	put("b.txt", other);
	put("noread.txt", text);
	mkpath("rnox");
	put("rnox/x.txt", text);
	mkpath("rnox/sub");
	snprintf(fp, sizeof(fp), "%s/fifo", root);
	ck_assert_int_eq(mkfifo(fp, 0600), 0);
	snprintf(fp, sizeof(fp), "%s/link.txt", root);
	ck_assert_int_eq(symlink("a.txt", fp), 0);
	ck_assert_int_eq(fchmodat(rootfd, "noread.txt", 0, 0), 0);
	ck_assert_int_eq(fchmodat(rootfd, "rnox", 0444, 0), 0);
	ck_assert_int_eq(fchmod(rootfd, 0755), 0);
	ck_assert_int_eq(pipe(fds), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(fds[0]);
		if (geteuid() == 0 && (setgid(65534) || setuid(65534)))
			_exit(2);
		im_params_init(&p);
		if (im_scan_df(rootfd, &p, 1, NULL, &df, &c))
			_exit(3);
		docs = im_df_docs(df);
		if (write(fds[1], &c, sizeof(c)) != sizeof(c) ||
		    write(fds[1], &docs, sizeof(docs)) != sizeof(docs))
			_exit(4);
		_exit(0);
	}
	close(fds[1]);
	ck_assert_int_eq(read(fds[0], &c, sizeof(c)), sizeof(c));
	ck_assert_int_eq(read(fds[0], &docs, sizeof(docs)), sizeof(docs));
	close(fds[0]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && !WEXITSTATUS(status),
		      "the df scan ran");
	ck_assert_int_eq(fchmodat(rootfd, "rnox", 0755, 0), 0);
	ck_assert_msg(c.files == 3, "files: a, b and noread: %llu",
		      (unsigned long long)c.files);
	ck_assert_msg(c.errors == 2, "errors: rnox/x.txt and rnox/sub: %llu",
		      (unsigned long long)c.errors);
	ck_assert_msg(c.by_status[IM_DOC_ERROR] == 1,
		      "noread.txt read as an error: %llu",
		      (unsigned long long)c.by_status[IM_DOC_ERROR]);
	ck_assert_msg(c.other == 2, "the fifo and the symlink: %llu",
		      (unsigned long long)c.other);
	ck_assert_msg(c.dirs == 2, "the root and rnox: %llu",
		      (unsigned long long)c.dirs);
	ck_assert_msg(docs == 2, "two documents with terms: %llu",
		      (unsigned long long)docs);
	ck_assert_msg(c.bytes == strlen(text) + strlen(other),
		      "the bytes of the texts read: %llu",
		      (unsigned long long)c.bytes);
}
END_TEST

START_TEST(test_scan_df_skips_the_skip_dir)
{
	struct im_params p;
	struct im_scan_counts c = {0};
	struct im_df *df = NULL;
	struct stat st;

	im_params_init(&p);
	make_corpus(9);
	mkpath("state");
	put("state/cache.txt", "alpha bravo charlie delta echo foxtrot golf");
	ck_assert_int_eq(fstatat(rootfd, "state", &st, 0), 0);
	struct im_scan_ops ops = {.skip_dev = st.st_dev, .skip_ino = st.st_ino};

	ck_assert_int_eq(im_scan_df(rootfd, &p, 2, &ops, &df, &c), 0);
	ck_assert_msg(im_df_docs(df) == 9 + 1,
		      "the skipped directory's file was counted: N = %llu",
		      (unsigned long long)im_df_docs(df));
	im_df_free(df);
	ck_assert_int_eq(im_scan_df(rootfd, &p, 2, NULL, &df, &c), 0);
	ck_assert_msg(im_df_docs(df) == 9 + 2,
		      "without a skip the file is counted: N = %llu",
		      (unsigned long long)im_df_docs(df));
	im_df_free(df);
}
END_TEST

START_TEST(test_scan_sign_want_and_cancel)
{
	struct im_params p;
	struct im_scan_counts c = {0};
	struct results r = {0};
	struct im_lexicon *lex;
	volatile bool cancel = true;
	struct im_scan_ops ops = {
		.result = on_result, .arg = &r, .want = want_odd};

	im_params_init(&p);
	make_corpus(20);
	lex = corpus_lexicon(&p, 2, 20);
	ck_assert_int_eq(im_scan_sign(rootfd, lex, &p, 2, &ops, &c), 0);
	ck_assert_msg(r.n == 10, "want() leaves files out: %zu results", r.n);
	results_free(&r);

	ops.cancel = &cancel;
	memset(&c, 0, sizeof(c));
	ck_assert_int_eq(im_scan_sign(rootfd, lex, &p, 2, &ops, &c),
			 -ECANCELED);
	ck_assert_msg(r.n == 0, "a cancelled scan signs nothing");
	results_free(&r);

	struct im_df *df = NULL;
	ck_assert_int_eq(im_scan_df(rootfd, &p, 2, &ops, &df, &c), -ECANCELED);
	ck_assert_msg(df == NULL, "a cancelled df scan hands nothing out");
	im_lexicon_free(lex);
}
END_TEST

/* The daemon's unmount: another thread sets the flag mid-scan, with no lock
 * between it and the scan (fs/scanner.c, scanner_stop()). The first result
 * lets the canceller go and waits until it sees the flag, so the scan must
 * end -ECANCELED; under ThreadSanitizer every read of the flag must be
 * atomic too. */
struct cancel_run {
	bool go;
	struct results r;
	/* A word of its own: ThreadSanitizer keeps a few accesses per 8
	 * bytes, and the canceller's store must not be crowded out. */
	_Alignas(8) bool cancel;
};

static void *canceller_main(void *arg)
{
	struct cancel_run *cr = arg;

	while (!__atomic_load_n(&cr->go, __ATOMIC_RELAXED))
		sched_yield();
	__atomic_store_n(&cr->cancel, true, __ATOMIC_RELAXED);
	return NULL;
}

static void on_cancel_result(const char *path, const struct stat *st,
			     const struct im_doc_sigs *d, void *arg)
{
	struct cancel_run *cr = arg;

	/* The walker has then most likely listed the few files and left
	 * walk_with() its last look at the flag (the one the daemon's
	 * unmount raced with); without the pause the walk often sees the
	 * flag first. */
	if (!__atomic_load_n(&cr->go, __ATOMIC_RELAXED))
		usleep(20000);
	__atomic_store_n(&cr->go, true, __ATOMIC_RELAXED);
	while (!__atomic_load_n(&cr->cancel, __ATOMIC_RELAXED))
		sched_yield();
	on_result(path, st, d, &cr->r);
}

START_TEST(test_scan_sign_cancelled_by_another_thread)
{
	struct im_params p;
	struct im_scan_counts c = {0};
	struct cancel_run cr = {0};
	struct im_scan_ops ops = {
		.result = on_cancel_result, .arg = &cr, .cancel = &cr.cancel};
	struct im_lexicon *lex;
	pthread_t tid;

	im_params_init(&p);
	make_corpus(40);
	lex = corpus_lexicon(&p, 2, 40);
	/* A few rounds: the walker does not always finish first. */
	for (int round = 0; round < 3; round++) {
		ck_assert(pthread_create(&tid, NULL, canceller_main, &cr) == 0);
		ck_assert_int_eq(im_scan_sign(rootfd, lex, &p, 2, &ops, &c),
				 -ECANCELED);
		pthread_join(tid, NULL);
		ck_assert_msg(cr.r.n > 0 && cr.r.n < 40,
			      "stopped after the first result: %zu results",
			      cr.r.n);
		results_free(&cr.r);
		cr.go = cr.cancel = false;
	}
	im_lexicon_free(lex);
}
END_TEST

/* ---- First scans: one pass ------------------------------------------------ */

/* The bytes of @p lex as saved. */
static char *lexicon_bytes(const struct im_lexicon *lex, size_t *len)
{
	char path[512];
	char *buf;
	FILE *f;
	long n;

	snprintf(path, sizeof(path), "%s.lex", root);
	ck_assert_int_eq(im_lexicon_save(lex, path), 0);
	f = fopen(path, "rb");
	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n);
	ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	unlink(path);
	*len = (size_t)n;
	return buf;
}

struct first_run {
	struct results r;
	int lexicon_calls;
	size_t results_before_lexicon;
};

static int on_lexicon(const struct im_lexicon *lex, void *arg)
{
	struct first_run *fr = arg;

	(void)lex;
	fr->lexicon_calls++;
	fr->results_before_lexicon = fr->r.n;
	return 0;
}

static void on_first_result(const char *path, const struct stat *st,
			    const struct im_doc_sigs *d, void *arg)
{
	on_result(path, st, d, &((struct first_run *)arg)->r);
}

/* Everything a result holds beyond the signatures. */
static bool same_result(const struct im_doc_sigs *a,
			const struct im_doc_sigs *b)
{
	return same_sigs(a, b) && a->format == b->format && a->err == b->err &&
	       a->size == b->size && a->mtime_ns == b->mtime_ns &&
	       !memcmp(&a->sketch, &b->sketch, sizeof(a->sketch));
}

/* Copy the file at @p from to @p to (relative to the root), byte for byte. */
static void copy_file(const char *from, const char *to)
{
	char p[4096], buf[65536];
	size_t n;
	FILE *in, *out;

	snprintf(p, sizeof(p), "%s/%s", root, from);
	in = fopen(p, "rb");
	ck_assert_ptr_nonnull(in);
	snprintf(p, sizeof(p), "%s/%s", root, to);
	out = fopen(p, "wb");
	ck_assert_ptr_nonnull(out);
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		ck_assert_uint_eq(fwrite(buf, 1, n, out), n);
	fclose(in);
	fclose(out);
}

/* A filter for *.dat files, which make_filtered_pair() meets. */
static const char *const dat_filter[] = {"dat:tr a-z A-Z", NULL};

/* legacy.dat and other.bin, the same bytes that sniff as binary: the first
 * a text through dat_filter, the second binary. */
static void make_filtered_pair(void)
{
	static const char bytes[] = "x\0legacy words of an old format, "
				    "several words here and there";
	char path[4096];

	for (int i = 0; i < 2; i++) {
		FILE *f;

		snprintf(path, sizeof(path), "%s/%s", root,
			 i ? "other.bin" : "legacy.dat");
		f = fopen(path, "wb");
		ck_assert_ptr_nonnull(f);
		ck_assert_uint_eq(fwrite(bytes, 1, sizeof(bytes) - 1, f),
				  sizeof(bytes) - 1);
		fclose(f);
	}
}

/* Two exact copies, elsewhere, of every third document of make_corpus(). */
static void make_copies(int ndocs)
{
	mkpath("copies");
	mkpath("copies/again");
	for (int d = 0; d < ndocs; d += 3) {
		char from[64], to[64];

		snprintf(from, sizeof(from), "%s/doc%03d.txt",
			 d % 2 ? "docs" : "docs/more", d);
		snprintf(to, sizeof(to), "copies/c%03d.txt", d);
		copy_file(from, to);
		snprintf(to, sizeof(to), "copies/again/%03d", d);
		copy_file(from, to);
	}
}

/* A sign scan signs the bytes of exact copies once per worker
 * (im_signer_keep_results()): every result as a fresh signer gives it,
 * with one worker or three, and a filtered file's bytes lend nothing. */
START_TEST(test_scan_sign_copies_equal_signing_alone)
{
	struct im_params p;
	struct im_scan_counts c;
	struct results r;
	struct im_lexicon *lex;

	im_params_init(&p);
	p.filters = dat_filter;
	make_corpus(30);
	make_copies(30);
	make_filtered_pair();
	{
		struct im_df *df = NULL;

		memset(&c, 0, sizeof(c));
		ck_assert_int_eq(im_scan_df(rootfd, &p, 2, NULL, &df, &c), 0);
		ck_assert_uint_eq(c.by_status[IM_DOC_BINARY], 2);
		ck_assert_int_eq(im_lexicon_build(df, p.nidf_lo, p.nidf_hi,
						  p.secondary_cap, &lex),
				 0);
		im_df_free(df);
	}
	for (unsigned threads = 1; threads <= 3; threads += 2) {
		struct im_signer *s;

		scan_into(lex, &p, threads, &r, &c);
		ck_assert_uint_eq(r.n, 33 + 2 * 10 + 2);
		for (size_t i = 0; i < r.n; i++) {
			struct im_doc_sigs alone;

			/* A fresh signer each time: nothing kept. */
			ck_assert_int_eq(im_signer_new(lex, &p, &s), 0);
			ck_assert_int_eq(im_signer_sign_at(s, rootfd,
							   r.v[i].path, &alone,
							   NULL),
					 0);
			im_signer_free(s);
			ck_assert_msg(same_result(&alone, &r.v[i].d) &&
					      alone.status == r.v[i].d.status,
				      "-j%u, %s: the scan's result is the "
				      "file's alone",
				      threads, r.v[i].path);
		}
		results_free(&r);
	}
	im_lexicon_free(lex);
}
END_TEST

/* One pass over make_corpus(@p ndocs) gives what the df pass, the lexicon
 * and the signing pass give, with any number of workers and whether or not
 * the term ids spill. With @p copies, every third document also has two
 * exact copies elsewhere, which a first scan counts and keeps from the
 * record of the first it read (copy_probe()). */
static void check_first_equals_two_passes(int ndocs, bool copies)
{
	static const struct {
		unsigned threads;
		size_t budget;
	} runs[] = {{1, 0}, {3, 0}, {1, 4096}, {2, 3000}};
	struct im_params p;
	struct im_scan_counts c_ref, c;
	struct results ref;
	struct im_lexicon *lex_ref, *lex;
	char *want, *got;
	size_t want_len, got_len;

	im_params_init(&p);
	make_corpus(ndocs);
	if (copies)
		make_copies(ndocs);
	lex_ref = corpus_lexicon(&p, 2,
				 ndocs + (copies ? 2 * ((ndocs + 2) / 3) : 0));
	scan_into(lex_ref, &p, 2, &ref, &c_ref);
	want = lexicon_bytes(lex_ref, &want_len);
	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		struct first_run fr = {0};
		struct im_scan_ops ops = {
			.result = on_first_result,
			.lexicon = on_lexicon,
			.arg = &fr,
			.spill_dir = "/tmp",
			.spill_budget = runs[i].budget,
		};

		memset(&c, 0, sizeof(c));
		ck_assert_int_eq(im_scan_first(rootfd, &p, runs[i].threads,
					       &ops, &lex, &c),
				 0);
		ck_assert_ptr_nonnull(lex);
		got = lexicon_bytes(lex, &got_len);
		ck_assert_msg(got_len == want_len &&
				      !memcmp(got, want, want_len),
			      "run %zu: the lexicon is byte-identical", i);
		free(got);
		ck_assert_msg(fr.lexicon_calls == 1 &&
				      fr.results_before_lexicon == 0,
			      "run %zu: the lexicon comes first, once", i);
		ck_assert_msg(!fr.r.overlap, "results are serialized");
		ck_assert_msg(!memcmp(&c, &c_ref, sizeof(c)),
			      "run %zu: the counts equal two passes'", i);
		ck_assert_uint_eq(fr.r.n, ref.n);
		qsort(fr.r.v, fr.r.n, sizeof(*fr.r.v), cmp_result);
		for (size_t j = 0; j < ref.n; j++) {
			ck_assert_str_eq(fr.r.v[j].path, ref.v[j].path);
			ck_assert_msg(same_result(&fr.r.v[j].d, &ref.v[j].d),
				      "run %zu, %s: the result equals two "
				      "passes'",
				      i, ref.v[j].path);
		}
		results_free(&fr.r);
		im_lexicon_free(lex);
	}
	free(want);
	results_free(&ref);
	im_lexicon_free(lex_ref);
}

START_TEST(test_scan_first_equals_two_passes)
{
	check_first_equals_two_passes(40, false);
}
END_TEST

/* The result of @p path among @p r, or NULL. */
static const struct im_doc_sigs *result_of(const struct results *r,
					   const char *path)
{
	for (size_t i = 0; i < r->n; i++)
		if (!strcmp(r->v[i].path, path))
			return &r->v[i].d;
	return NULL;
}

/* A text a filter made of a file by its name lends nothing to a file of the
 * same bytes under another name: that one is read as what it is. */
START_TEST(test_scan_first_copy_under_a_filtered_name)
{
	struct first_run fr = {0};
	struct im_scan_ops ops = {.result = on_first_result,
				  .lexicon = on_lexicon,
				  .arg = &fr,
				  .spill_dir = "/tmp"};
	struct im_scan_counts c = {0};
	const struct im_doc_sigs *dat, *bin;
	struct im_lexicon *lex = NULL;
	struct im_params p;

	im_params_init(&p);
	p.filters = dat_filter;
	make_corpus(12);
	make_filtered_pair();
	ck_assert_int_eq(im_scan_first(rootfd, &p, 1, &ops, &lex, &c), 0);
	dat = result_of(&fr.r, "legacy.dat");
	bin = result_of(&fr.r, "other.bin");
	ck_assert_ptr_nonnull(dat);
	ck_assert_ptr_nonnull(bin);
	ck_assert_msg(dat->format == IM_FMT_FILTER && dat->unique_terms > 0,
		      "the filter reads legacy.dat (format %d)", dat->format);
	ck_assert_msg(bin->status == IM_DOC_BINARY &&
			      bin->format == IM_FMT_BINARY,
		      "other.bin is binary (status %d, format %d)", bin->status,
		      bin->format);
	results_free(&fr.r);
	im_lexicon_free(lex);
}
END_TEST

START_TEST(test_scan_first_with_exact_copies)
{
	check_first_equals_two_passes(60, true);
}
END_TEST

/* More files than the queue holds (128): the walking thread reads files
 * itself whenever the queue is full, alone (one thread) as it finds them. */
START_TEST(test_scan_first_past_a_full_queue)
{
	check_first_equals_two_passes(400, false);
}
END_TEST

/*
 * Documents with little in common: each draws its words from the whole of a
 * large vocabulary, so no two workers meet the terms in one order and their
 * term ids differ (a first scan keeps each file's terms as its reader's
 * ids). Every third document repeats the one before, so some sign alike.
 */
static void make_mixed_corpus(int ndocs)
{
	enum { VOCAB = 3000, WORDS = 120 };
	static char vocab[VOCAB][10];
	char *text = malloc(WORDS * 12 + 1);

	rng = 4242;
	for (int i = 0; i < VOCAB; i++) {
		for (int j = 0; j < 8; j++)
			vocab[i][j] = 'a' + next_rand() % 26;
		vocab[i][8] = '\0';
	}
	mkpath("mixed");
	for (int d = 0; d < ndocs; d++) {
		char rel[64];
		size_t n = 0;

		if (d % 3 != 2) {
			n = 0;
			for (int w = 0; w < WORDS; w++)
				n += snprintf(text + n, WORDS * 12 + 1 - n,
					      "%s ",
					      vocab[next_rand() % VOCAB]);
		}
		snprintf(rel, sizeof(rel), "mixed/m%03d.txt", d);
		put(rel, text);
	}
	free(text);
}

/* Signing from a first scan's spools, one worker or several: workers sign
 * each other's kept files once through their own, with the reader's ids.
 * Many runs, so that in some a worker finishes early and helps. */
START_TEST(test_scan_first_workers_share_the_signing)
{
	struct im_params p;
	struct im_scan_counts c;
	struct first_run ref = {0};
	struct im_scan_ops ref_ops = {.result = on_first_result, .arg = &ref};
	struct im_lexicon *lex;

	im_params_init(&p);
	make_mixed_corpus(90);
	memset(&c, 0, sizeof(c));
	ck_assert_int_eq(im_scan_first(rootfd, &p, 1, &ref_ops, &lex, &c), 0);
	im_lexicon_free(lex);
	qsort(ref.r.v, ref.r.n, sizeof(*ref.r.v), cmp_result);
	for (int run = 0; run < 12; run++) {
		struct first_run fr = {0};
		struct im_scan_ops ops = {
			.result = on_first_result,
			.arg = &fr,
			.spill_dir = "/tmp",
			.spill_budget = run % 2 ? 2048 : 0,
		};

		memset(&c, 0, sizeof(c));
		ck_assert_int_eq(
			im_scan_first(rootfd, &p, 2 + run % 4, &ops, &lex, &c),
			0);
		ck_assert_msg(!fr.r.overlap, "results are serialized");
		ck_assert_uint_eq(fr.r.n, ref.r.n);
		qsort(fr.r.v, fr.r.n, sizeof(*fr.r.v), cmp_result);
		for (size_t j = 0; j < ref.r.n; j++) {
			ck_assert_str_eq(fr.r.v[j].path, ref.r.v[j].path);
			ck_assert_msg(same_result(&fr.r.v[j].d, &ref.r.v[j].d),
				      "run %d, %s: the result equals one "
				      "worker's",
				      run, ref.r.v[j].path);
		}
		results_free(&fr.r);
		im_lexicon_free(lex);
	}
	results_free(&ref.r);
}
END_TEST

/* With fewer than two documents there is no lexicon: nothing is delivered
 * and the counts are the df pass's. */
START_TEST(test_scan_first_without_lexicon)
{
	struct im_params p;
	struct im_scan_counts c = {0}, c_df = {0};
	struct first_run fr = {0};
	struct im_scan_ops ops = {
		.result = on_first_result, .lexicon = on_lexicon, .arg = &fr};
	struct im_lexicon *lex = (struct im_lexicon *)&c;
	struct im_df *df = NULL;

	im_params_init(&p);
	put("one.txt", "the only document with several words in it");
	put("empty.txt", "");
	ck_assert_int_eq(im_scan_first(rootfd, &p, 2, &ops, &lex, &c), 0);
	ck_assert_ptr_null(lex);
	ck_assert_msg(fr.r.n == 0 && fr.lexicon_calls == 0,
		      "no lexicon, no result");
	ck_assert_int_eq(im_scan_df(rootfd, &p, 2, NULL, &df, &c_df), 0);
	ck_assert_msg(!memcmp(&c, &c_df, sizeof(c)),
		      "the counts are what a df scan says");
	im_df_free(df);
}
END_TEST

/* With unsigned_results, the same tree delivers every file all the same,
 * texts unsigned, counted as a signing scan counts. */
START_TEST(test_scan_first_unsigned_results)
{
	struct im_params p;
	struct im_scan_counts c = {0};
	struct first_run fr = {0};
	struct im_scan_ops ops = {.result = on_first_result,
				  .lexicon = on_lexicon,
				  .arg = &fr,
				  .unsigned_results = true};
	struct im_lexicon *lex = NULL;
	const struct im_doc_sigs *one, *c1, *c2;

	im_params_init(&p);
	put("one.txt", "the only document with several words in it");
	put("copy1.txt", "a b c\n"); /* no term: words too short */
	put("copy2.txt", "a b c\n");
	put("empty.txt", "");
	ck_assert_int_eq(im_scan_first(rootfd, &p, 2, &ops, &lex, &c), 0);
	ck_assert_ptr_null(lex);
	ck_assert_msg(fr.r.n == 4 && fr.lexicon_calls == 0,
		      "every file delivered, without a lexicon: %zu", fr.r.n);
	ck_assert_msg(!fr.r.overlap, "results are serialized");
	qsort(fr.r.v, fr.r.n, sizeof(*fr.r.v), cmp_result);
	c1 = &fr.r.v[0].d;
	c2 = &fr.r.v[1].d;
	one = &fr.r.v[3].d;
	ck_assert_str_eq(fr.r.v[3].path, "one.txt");
	for (size_t i = 0; i < fr.r.n; i++)
		ck_assert_msg(fr.r.v[i].d.status == IM_DOC_REJECTED &&
				      fr.r.v[i].d.valid == 0,
			      "%s: a text, unsigned", fr.r.v[i].path);
	ck_assert_msg(one->unique_terms > 0 && one->sketch.n > 0 &&
			      one->exact_valid,
		      "the text keeps its terms' sketch and its hash");
	ck_assert_msg(c1->exact_valid && c2->exact_valid &&
			      !memcmp(c1->exact, c2->exact, sizeof(c1->exact)),
		      "copies have their (equal) hash");
	ck_assert_msg(c.files == 4 && c.by_status[IM_DOC_REJECTED] == 4 &&
			      c.by_status[IM_DOC_SIGNED] == 0,
		      "counted as delivered");
	results_free(&fr.r);
}
END_TEST

static int refuse_lexicon(const struct im_lexicon *lex, void *arg)
{
	(void)lex;
	(void)arg;
	return -ENOSPC;
}

START_TEST(test_scan_first_cancel_and_refusal)
{
	struct im_params p;
	struct im_scan_counts c = {0};
	struct first_run fr = {0};
	volatile bool cancel = true;
	struct im_scan_ops ops = {
		.result = on_first_result, .arg = &fr, .cancel = &cancel};
	struct im_lexicon *lex;

	im_params_init(&p);
	make_corpus(12);
	ck_assert_int_eq(im_scan_first(rootfd, &p, 2, &ops, &lex, &c),
			 -ECANCELED);
	ck_assert_msg(lex == NULL && fr.r.n == 0,
		      "a cancelled first scan delivers nothing");
	ops.cancel = NULL;
	ops.lexicon = refuse_lexicon;
	ck_assert_int_eq(im_scan_first(rootfd, &p, 2, &ops, &lex, &c), -ENOSPC);
	ck_assert_msg(lex == NULL && fr.r.n == 0,
		      "a refused lexicon stops the scan before any result");
	ops.lexicon = NULL;
	ops.spill_dir = "/nonexistent/imatch-spill";
	ops.spill_budget = 1;
	ck_assert_int_eq(im_scan_first(rootfd, &p, 1, &ops, &lex, &c), -ENOENT);
	ck_assert_msg(lex == NULL, "a spill that cannot be written fails");
}
END_TEST

/* ---- An entry changed between readdir and open ------------------------------ */

/*
 * What becomes of d/b.txt after the walk read d's names and before it stats
 * or opens b.txt: the walk reports d/.imatchignore (a directory, so
 * unreadable) between the two, and the hook changes b.txt then.
 */
enum swap {
	SWAP_NONE,
	SWAP_GONE,
	SWAP_FIFO,
	SWAP_DIR,
	SWAP_SYMLINK,
	SWAP_DIR_SCOPED /* a directory whose walk the scope decides */
};

struct swap_run {
	struct results r;
	enum swap swap;
	bool armed;
	char unreadable[8][64];
	int nunreadable;
};

/* put() with a fixed mtime: each run remakes the file, and its result is
 * compared with the last run's. */
static void put_dated(const char *rel, const char *text)
{
	struct timespec t[2] = {{1000000000, 0}, {1000000000, 0}};

	put(rel, text);
	ck_assert_int_eq(utimensat(rootfd, rel, t, 0), 0);
}

/* The directory of the swapped b.txt and of the .imatchignore whose
 * report swaps it: "d/", or "" for the root. */
static const char *swap_dir = "d/";

/* @p rel under the swapped directory: a directory, or a file of @p text. */
static void swap_put(const char *rel, const char *text)
{
	char p[256];

	snprintf(p, sizeof(p), "%sb.txt%s%s", swap_dir, *rel ? "/" : "", rel);
	if (text)
		put_dated(p, text);
	else
		mkpath(p);
}

static void swap_hook(const char *path, int err, void *arg)
{
	struct swap_run *sr = arg;
	char p[4096];

	(void)err;
	if (sr->nunreadable < 8)
		snprintf(sr->unreadable[sr->nunreadable++], 64, "%s", path);
	snprintf(p, sizeof(p), "%s.imatchignore", swap_dir);
	if (!sr->armed || strcmp(path, p))
		return;
	sr->armed = false;
	snprintf(p, sizeof(p), "%s/%sb.txt", root, swap_dir);
	if (sr->swap != SWAP_NONE)
		ck_assert_int_eq(unlink(p), 0);
	switch (sr->swap) {
	case SWAP_NONE:
	case SWAP_GONE:
		break;
	case SWAP_FIFO:
		ck_assert_int_eq(mkfifo(p, 0600), 0);
		break;
	case SWAP_DIR:
		mkpath("d/b.txt");
		put_dated("d/b.txt/inner.txt",
			  "inner words of a file in a new dir");
		break;
	case SWAP_SYMLINK:
		ck_assert_int_eq(symlink("a.txt", p), 0);
		break;
	case SWAP_DIR_SCOPED:
		swap_put("", NULL);
		swap_put("sub", NULL);
		swap_put("gone", NULL);
		swap_put(".hdir", NULL);
		swap_put("inner.txt", "inner words of a file in a new dir");
		swap_put("by_root.txt", "words the root's ignore file leaves out");
		swap_put("own1.txt", "words its own ignore file leaves out");
		swap_put(".imatchignore", "own*\n");
		swap_put(".hidden.txt", "hidden words in the new dir");
		swap_put("sub/deep.txt", "deep words under the new dir");
		swap_put("gone/g.txt", "words of a dir the scope drops");
		swap_put(".hdir/h.txt", "words of a hidden dir");
		break;
	}
}

static void swap_result(const char *path, const struct stat *st,
			const struct im_doc_sigs *d, void *arg)
{
	on_result(path, st, d, &((struct swap_run *)arg)->r);
}

static bool want_all(const char *path, const struct stat *st, void *arg)
{
	(void)path;
	(void)arg;
	ck_assert_msg(S_ISREG(st->st_mode), "want() gets a regular file's stat");
	return true;
}

/* d/b.txt a regular file again, whatever the last run made of it. */
static void swap_reset(void)
{
	char p[64];

	snprintf(p, sizeof(p), "%sb.txt", swap_dir);
	rm_rf(rootfd, p);
	put_dated(p, "bravo words of the file the walk reads");
}

/* The scope swap_scan() gives its scans, if not NULL. */
static const struct im_scope *swap_scope;

static int cmp_unreadable(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* One scan of the swap tree with @p threads: a first scan, or a sign scan
 * with @p lex; with @p want, the walk stats each file before handing it
 * on. The unreadable names are sorted: their order is no count. */
static void swap_scan(struct swap_run *sr, enum swap swap, bool first,
		      const struct im_lexicon *lex, unsigned threads,
		      bool want, struct im_scan_counts *c)
{
	struct im_scan_ops ops = {.result = swap_result,
				  .unreadable = swap_hook,
				  .want = want ? want_all : NULL,
				  .arg = sr,
				  .spill_dir = "/tmp"};
	struct im_lexicon *built = NULL;
	struct im_params p;

	im_params_init(&p);
	p.scope = swap_scope;
	swap_reset();
	memset(sr, 0, sizeof(*sr));
	memset(c, 0, sizeof(*c));
	sr->swap = swap;
	sr->armed = true;
	if (first)
		ck_assert_int_eq(im_scan_first(rootfd, &p, threads, &ops,
					       &built, c),
				 0);
	else
		ck_assert_int_eq(im_scan_sign(rootfd, lex, &p, threads, &ops,
					      c),
				 0);
	ck_assert_msg(!sr->armed, "the hook ran");
	im_lexicon_free(built);
	qsort(sr->r.v, sr->r.n, sizeof(*sr->r.v), cmp_result);
	qsort(sr->unreadable, (size_t)sr->nunreadable,
	      sizeof(sr->unreadable[0]), cmp_unreadable);
}

/* The tree the swap tests change d/b.txt in (the hook fires on the
 * directory d/.imatchignore, after d's names are read), and its lexicon. */
static struct im_lexicon *swap_tree(const struct im_params *p)
{
	struct im_lexicon *lex = NULL;
	struct im_scan_counts c;
	struct im_df *df = NULL;

	make_corpus(12);
	mkpath("d");
	mkpath("d/.imatchignore");
	put("d/a.txt", "alpha words of a text the walk reads first");
	put("d/c.txt", "charlie words of a text the walk reads last");
	swap_reset();
	ck_assert_int_eq(im_scan_df(rootfd, p, 1, NULL, &df, &c), 0);
	ck_assert_int_eq(im_lexicon_build(df, p->nidf_lo, p->nidf_hi,
					  p->secondary_cap, &lex),
			 0);
	im_df_free(df);
	return lex;
}

/*
 * A scan that reads each file as the walk finds it need not stat it first,
 * but counts and delivers exactly what a walk that stats does (want() makes
 * one), whatever the file became: gone (an error, no file), a fifo or a
 * symlink (other, never opened: a fifo open would block), a directory
 * (walked).
 */
START_TEST(test_scan_entry_swapped_before_open)
{
	static const struct {
		enum swap swap;
		uint64_t files, dirs, other, errors, errors_read;
	} want[] = {
		/* errors: the hook's .imatchignore, and b.txt gone. */
		{SWAP_NONE, 18, 4, 0, 1, 0},  {SWAP_GONE, 17, 4, 0, 2, 0},
		{SWAP_FIFO, 17, 4, 1, 1, 0},  {SWAP_DIR, 18, 5, 0, 1, 0},
		{SWAP_SYMLINK, 17, 4, 1, 1, 0},
	};
	struct im_scan_counts c_ref, c;
	struct im_lexicon *lex = NULL;
	struct swap_run ref, got;
	struct im_params p;

	im_params_init(&p);
	lex = swap_tree(&p);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		/* First and sign scans, with 1, 2 and 3 threads. */
		for (int run = 0; run < 6; run++) {
			bool first = run % 2;
			unsigned threads = 1 + (unsigned)run / 2;

			swap_scan(&ref, want[i].swap, first, lex, threads, true,
				  &c_ref);
			swap_scan(&got, want[i].swap, first, lex, threads, false,
				  &c);
			ck_assert_msg(c.files == want[i].files &&
					      c.dirs == want[i].dirs &&
					      c.other == want[i].other &&
					      c.errors == want[i].errors &&
					      c.by_status[IM_DOC_ERROR] ==
						      want[i].errors_read,
				      "swap %d, first %d, -j %u: files %llu dirs %llu "
				      "other %llu errors %llu + %llu",
				      want[i].swap, first, threads,
				      (unsigned long long)c.files,
				      (unsigned long long)c.dirs,
				      (unsigned long long)c.other,
				      (unsigned long long)c.errors,
				      (unsigned long long)
					      c.by_status[IM_DOC_ERROR]);
			ck_assert_msg(!memcmp(&c, &c_ref, sizeof(c)),
				      "swap %d, first %d, -j %u: the counts of a walk "
				      "that stats",
				      want[i].swap, first, threads);
			ck_assert_msg(got.nunreadable == ref.nunreadable,
				      "swap %d, first %d, -j %u: the same unreadable",
				      want[i].swap, first, threads);
			for (int j = 0; j < got.nunreadable; j++)
				ck_assert_str_eq(got.unreadable[j],
						 ref.unreadable[j]);
			ck_assert_uint_eq(got.r.n, ref.r.n);
			for (size_t j = 0; j < ref.r.n; j++) {
				ck_assert_str_eq(got.r.v[j].path,
						 ref.r.v[j].path);
				ck_assert_msg(same_result(&got.r.v[j].d,
							  &ref.r.v[j].d),
					      "swap %d, first %d, -j %u, %s: the same "
					      "result",
					      want[i].swap, first, threads,
					      ref.r.v[j].path);
			}
			results_free(&got.r);
			results_free(&ref.r);
		}
	}
	im_lexicon_free(lex);
}
END_TEST

/*
 * A file become a directory that a scan with helpers walks after the walk
 * (walk_late()) is walked as the walk would have: out of scope by an
 * --exclude that names directories only, or by its parents' .imatchignore
 * and its own, its hidden names counted, the same counts and results as a
 * walk that stats, with 1, 2 and 3 threads.
 */
/* Scoped swaps of swap_dir's b.txt, first and sign scans with 1, 2 and 3
 * threads: counts @p w (files, dirs, excluded, hidden, errors) and those
 * and the results of a walk that stats. */
static void scoped_runs(const struct im_lexicon *lex, const uint64_t w[5])
{
	struct im_scan_counts c_ref, c;
	struct swap_run ref, got;

	for (int run = 0; run < 6; run++) {
		bool first = run % 2;
		unsigned threads = 1 + (unsigned)run / 2;

		swap_scan(&ref, SWAP_DIR_SCOPED, first, lex, threads, true,
			  &c_ref);
		swap_scan(&got, SWAP_DIR_SCOPED, first, lex, threads, false, &c);
		ck_assert_msg(c.files == w[0] && c.dirs == w[1] &&
				      c.excluded == w[2] && c.hidden == w[3] &&
				      c.errors == w[4],
			      "%sb.txt, first %d, -j %u: files %llu dirs %llu "
			      "excluded %llu hidden %llu errors %llu",
			      swap_dir, first, threads,
			      (unsigned long long)c.files,
			      (unsigned long long)c.dirs,
			      (unsigned long long)c.excluded,
			      (unsigned long long)c.hidden,
			      (unsigned long long)c.errors);
		ck_assert_msg(!memcmp(&c, &c_ref, sizeof(c)),
			      "%sb.txt, first %d, -j %u: the counts of a walk "
			      "that stats",
			      swap_dir, first, threads);
		ck_assert_int_eq(got.r.n, ref.r.n);
		for (size_t j = 0; j < got.r.n; j++) {
			ck_assert_str_eq(got.r.v[j].path, ref.r.v[j].path);
			ck_assert_msg(same_result(&got.r.v[j].d, &ref.r.v[j].d),
				      "%sb.txt, first %d, -j %u, %s: the same "
				      "result",
				      swap_dir, first, threads, ref.r.v[j].path);
		}
		results_free(&got.r);
		results_free(&ref.r);
	}
}

START_TEST(test_scan_entry_swapped_to_a_scoped_dir)
{
	struct im_lexicon *lex = NULL;
	struct im_scope *scope = NULL;
	struct im_params p;

	im_params_init(&p);
	put(".imatchignore", "by_root.txt\n");
	lex = swap_tree(&p);
	ck_assert_int_eq(im_scope_new(&scope), 0);
	ck_assert_int_eq(im_scope_add_exclude(scope, "gone/"), 0);
	swap_scope = scope;
	/* In d/b.txt: inner.txt and sub/deep.txt read; by_root.txt,
	 * own1.txt and gone/ excluded; its .imatchignore, .hidden.txt and
	 * .hdir hidden, as are the root's and d's ignore files. */
	scoped_runs(lex, (const uint64_t[5]){19, 6, 3, 5, 1});
	/* At the root, whose .imatchignore is now the directory whose report
	 * swaps b.txt: by_root.txt read, d/b.txt a file again; both
	 * .imatchignore directories are errors. */
	swap_reset();
	ck_assert_int_eq(unlinkat(rootfd, ".imatchignore", 0), 0);
	mkpath(".imatchignore");
	swap_dir = "";
	scoped_runs(lex, (const uint64_t[5]){21, 6, 2, 5, 2});
	swap_dir = "d/";
	swap_scope = NULL;
	im_scope_free(scope);
	im_lexicon_free(lex);
}
END_TEST

static Suite *scan_suite(void)
{
	Suite *s = suite_create("scan");
	TCase *tc = tcase_create("walk");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_scan_walk_counts_and_hidden);
	tcase_add_test(tc, test_scan_walk_dirs_before_files);
	tcase_add_test(tc, test_scan_walk_large_directory);
	tcase_add_test(tc, test_scan_walk_symlinks_not_followed);
	tcase_add_test(tc, test_scan_walk_skip_dir);
	tcase_add_test(tc, test_scan_walk_deep_tree_bounded_fds);
	tcase_add_test(tc, test_scan_walk_odd_names);
	tcase_add_test(tc, test_scan_walk_missing_root);
	suite_add_tcase(s, tc);

	tc = tcase_create("sign");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_scan_sign_equals_signing_alone);
	tcase_add_test(tc, test_scan_sign_threads_agree);
	tcase_add_test(tc, test_scan_df_skips_the_skip_dir);
	tcase_add_test(tc, test_scan_df_counts_what_it_cannot_open);
	tcase_add_test(tc, test_scan_sign_want_and_cancel);
	tcase_add_test(tc, test_scan_sign_cancelled_by_another_thread);
	tcase_add_test(tc, test_scan_first_equals_two_passes);
	tcase_add_test(tc, test_scan_first_past_a_full_queue);
	tcase_add_test(tc, test_scan_first_with_exact_copies);
	tcase_add_test(tc, test_scan_sign_copies_equal_signing_alone);
	tcase_add_test(tc, test_scan_first_copy_under_a_filtered_name);
	tcase_add_test(tc, test_scan_first_workers_share_the_signing);
	tcase_add_test(tc, test_scan_first_without_lexicon);
	tcase_add_test(tc, test_scan_first_unsigned_results);
	tcase_add_test(tc, test_scan_first_cancel_and_refusal);
	tcase_add_test(tc, test_scan_entry_swapped_before_open);
	tcase_add_test(tc, test_scan_entry_swapped_to_a_scoped_dir);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(scan_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
