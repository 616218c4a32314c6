/*
 * Unit tests for core/index/exact.c: the size table, hashing a file as the
 * signer does, and a scan with defer_binary completed by im_exact_fill():
 * the same exact links as hashing everything, with only the binary files of
 * shared sizes read whole; and the head hash size-first dedupe tells files
 * apart by, with its checks that a file is still as walked.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "unit.h"
#include "exact.h"
#include "index.h"
#include "scan.h"

/* ---- The size table ------------------------------------------------------------ */

START_TEST(test_exact_sizes_hand_out_once)
{
	struct im_sizes *t = NULL;
	uint64_t todo[2];
	size_t n;

	ck_assert_int_eq(im_sizes_new(&t), 0);
	/* Alone with its size: nothing to hash. */
	ck_assert_int_eq(im_sizes_add(t, 100, 1, todo, &n), 0);
	ck_assert_uint_eq(n, 0);
	ck_assert_int_eq(im_sizes_add(t, 200, IM_SIZES_NONE, todo, &n), 0);
	ck_assert_uint_eq(n, 0);
	/* A second file of 100 bytes: both it and the first. */
	ck_assert_int_eq(im_sizes_add(t, 100, 2, todo, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert(todo[0] == 1 && todo[1] == 2);
	/* A third: only itself; the first was handed out already. */
	ck_assert_int_eq(im_sizes_add(t, 100, 3, todo, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert(todo[0] == 3);
	/* A hashed file joining a deferred one: the deferred one only. */
	ck_assert_int_eq(im_sizes_add(t, 300, 4, todo, &n), 0);
	ck_assert_int_eq(im_sizes_add(t, 300, IM_SIZES_NONE, todo, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert(todo[0] == 4);
	ck_assert_int_eq(im_sizes_add(t, 200, IM_SIZES_NONE, todo, &n), 0);
	ck_assert_uint_eq(n, 0);
	ck_assert(im_sizes_count(t, 100) == 3 && im_sizes_count(t, 200) == 2 &&
		  im_sizes_count(t, 7) == 0);
	ck_assert_uint_eq(im_sizes_len(t), 3);
	im_sizes_free(t);
}
END_TEST

START_TEST(test_exact_sizes_many)
{
	struct im_sizes *t = NULL;
	uint64_t todo[2];
	size_t n, handed = 0;

	/* Sizes 1..5000 each once, then the even ones again: exactly the
	 * even ones come back, twice each (the first and the newcomer). */
	ck_assert_int_eq(im_sizes_new(&t), 0);
	for (uint64_t s = 1; s <= 5000; s++) {
		ck_assert_int_eq(im_sizes_add(t, s, s, todo, &n), 0);
		ck_assert_uint_eq(n, 0);
	}
	for (uint64_t s = 2; s <= 5000; s += 2) {
		ck_assert_int_eq(im_sizes_add(t, s, s + 100000, todo, &n), 0);
		ck_assert_msg(n == 2 && todo[0] == s && todo[1] == s + 100000,
			      "size %llu", (unsigned long long)s);
		handed += n;
	}
	ck_assert_uint_eq(handed, 5000);
	ck_assert_uint_eq(im_sizes_len(t), 5000);
	im_sizes_free(t);
}
END_TEST

/* ---- Files ----------------------------------------------------------------------- */

static char root[256];
static int rootfd = -1;

static void put(const char *rel, const void *data, size_t len)
{
	char p[4096];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", root, rel);
	f = fopen(p, "w");
	ck_assert_msg(f != NULL, "create %s: %s", p, strerror(errno));
	ck_assert(fwrite(data, 1, len, f) == len);
	fclose(f);
}

/* @p len bytes: a NUL first (binary), then a pattern seeded by @p seed. */
static char *binary(size_t len, unsigned seed)
{
	char *b = malloc(len);

	ck_assert(b != NULL);
	for (size_t i = 0; i < len; i++)
		b[i] = (char)((i * 2654435761u + seed * 40503u) >> 7);
	b[0] = '\0';
	return b;
}

/* A lexicon from two short texts elsewhere: the files here are binary or
 * too short to sign, which is all these tests need. */
static struct im_lexicon *empty_lexicon(const struct im_params *p)
{
	struct im_scan_counts counts = {0};
	struct im_lexicon *lex = NULL;
	struct im_df *df = NULL;
	char dir[300], f[400];
	int fd;

	snprintf(dir, sizeof(dir), "%s.lex", root);
	mkdir(dir, 0755);
	for (int i = 0; i < 2; i++) {
		FILE *fp;

		snprintf(f, sizeof(f), "%s/%d.txt", dir, i);
		fp = fopen(f, "w");
		ck_assert(fp != NULL);
		fprintf(fp, "common words here and %s there\n",
			i ? "alpha" : "omega");
		fclose(fp);
	}
	fd = open(dir, O_RDONLY | O_DIRECTORY);
	ck_assert(fd >= 0);
	ck_assert_int_eq(im_scan_df(fd, p, 1, NULL, &df, &counts), 0);
	close(fd);
	ck_assert_int_eq(im_lexicon_build(df, p->nidf_lo, p->nidf_hi,
					  p->secondary_cap, &lex),
			 0);
	im_df_free(df);
	return lex;
}

static void setup(void)
{
	char cmd[1024];

	snprintf(root, sizeof(root), "/tmp/im_exact_%d", getpid());
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	ck_assert(system(cmd) == 0);
	ck_assert(mkdir(root, 0755) == 0);
	rootfd = open(root, O_RDONLY | O_DIRECTORY);
	ck_assert(rootfd >= 0);
}

static void teardown(void)
{
	char cmd[1024];

	close(rootfd);
	snprintf(cmd, sizeof(cmd), "rm -rf %s %s.lex", root, root);
	ck_assert(system(cmd) == 0);
}

START_TEST(test_exact_hash_equals_signer)
{
	struct im_signer *s = NULL;
	struct im_lexicon *lex;
	struct im_params p;
	struct im_doc_sigs d, dd;
	uint8_t h[16];
	uint64_t bytes;
	char *b = binary(300000, 1);

	put("a.bin", b, 300000);
	im_params_init(&p);
	lex = empty_lexicon(&p);
	ck_assert_int_eq(im_signer_new(lex, &p, &s), 0);
	ck_assert_int_eq(im_signer_sign_at(s, rootfd, "a.bin", &d, NULL), 0);
	ck_assert(d.status == IM_DOC_BINARY && d.exact_valid);
	ck_assert_int_eq(im_exact_hash_at(rootfd, "a.bin", d.size, d.mtime_ns,
					  h, &bytes),
			 0);
	ck_assert_msg(!memcmp(h, d.exact, 16), "the signer's hash");
	ck_assert_uint_eq(bytes, 300000);
	im_signer_free(s);

	/* Deferred: the same file only sniffed, nothing hashed. */
	p.defer_binary = 1;
	ck_assert_int_eq(im_signer_new(lex, &p, &s), 0);
	ck_assert_int_eq(im_signer_sign_at(s, rootfd, "a.bin", &dd, NULL), 0);
	ck_assert(dd.status == IM_DOC_BINARY && !dd.exact_valid &&
		  im_exact_deferred(&dd) && dd.size == 300000);
	/* A text is read and hashed as always. */
	put("t.txt", "plain words of a text\n", 22);
	ck_assert_int_eq(im_signer_sign_at(s, rootfd, "t.txt", &dd, NULL), 0);
	ck_assert(dd.exact_valid && !im_exact_deferred(&dd));
	im_signer_free(s);

	/* Changed since it was signed: refused. */
	ck_assert_int_eq(im_exact_hash_at(rootfd, "a.bin", d.size + 1,
					  d.mtime_ns, h, NULL),
			 -ESTALE);
	ck_assert_int_eq(im_exact_hash_at(rootfd, "a.bin", d.size,
					  d.mtime_ns + 1, h, NULL),
			 -ESTALE);
	ck_assert_int_eq(im_exact_hash_at(rootfd, "gone.bin", 1, 0, h, NULL),
			 -ENOENT);
	im_lexicon_free(lex);
	free(b);
}
END_TEST

/* The walk's view of @p rel, as scan_tree_exact() keeps it. */
static struct im_exact_seen seen_of(const char *rel)
{
	struct im_exact_seen seen;
	struct stat st;

	ck_assert_int_eq(fstatat(rootfd, rel, &st, 0), 0);
	seen.size = (uint64_t)st.st_size;
	seen.mtime_ns =
		(int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	seen.ctime_ns =
		(int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
	seen.dev = (uint64_t)st.st_dev;
	seen.ino = (uint64_t)st.st_ino;
	return seen;
}

START_TEST(test_exact_hash_seen_head)
{
	static char buf[3 * IM_EXACT_HEAD];
	char *b = binary(300000, 2);
	struct im_exact_seen a, h, s, bad;
	uint8_t x[16], y[16];
	uint64_t bytes;

	put("a.bin", b, 300000);
	put("head.bin", b, IM_EXACT_HEAD);
	put("small.bin", b, 1000);
	a = seen_of("a.bin");
	h = seen_of("head.bin");
	s = seen_of("small.bin");
	/* A head: the hash of the file of its first bytes alone. */
	ck_assert_int_eq(im_exact_hash_seen_at(rootfd, "a.bin", &a,
					       IM_EXACT_HEAD, buf, sizeof(buf),
					       x, &bytes),
			 0);
	ck_assert_uint_eq(bytes, IM_EXACT_HEAD);
	ck_assert_msg(!memcmp(buf, b, IM_EXACT_HEAD), "the head is in buf");
	ck_assert_int_eq(im_exact_hash_at(rootfd, "head.bin", h.size,
					  h.mtime_ns, y, NULL),
			 0);
	ck_assert_msg(!memcmp(x, y, 16), "head hash = hash of the head");
	/* Whole, in a buffer smaller than the file: im_exact_hash_at's. */
	ck_assert_int_eq(im_exact_hash_seen_at(rootfd, "a.bin", &a, UINT64_MAX,
					       buf, sizeof(buf), x, &bytes),
			 0);
	ck_assert_uint_eq(bytes, 300000);
	ck_assert_int_eq(
		im_exact_hash_at(rootfd, "a.bin", a.size, a.mtime_ns, y, NULL),
		0);
	ck_assert_msg(!memcmp(x, y, 16), "whole hash, streamed");
	/* No longer than the limit: read once, whole. */
	ck_assert_int_eq(im_exact_hash_seen_at(rootfd, "small.bin", &s,
					       IM_EXACT_HEAD, buf,
					       IM_EXACT_HEAD, x, &bytes),
			 0);
	ck_assert_uint_eq(bytes, 1000);
	ck_assert_int_eq(im_exact_hash_at(rootfd, "small.bin", s.size,
					  s.mtime_ns, y, NULL),
			 0);
	ck_assert_msg(!memcmp(x, y, 16), "a short file's head is its hash");
	ck_assert_int_eq(im_exact_hash_seen_at(rootfd, "head.bin", &h,
					       IM_EXACT_HEAD, buf,
					       IM_EXACT_HEAD, x, NULL),
			 0);
	ck_assert_int_eq(im_exact_hash_at(rootfd, "head.bin", h.size,
					  h.mtime_ns, y, NULL),
			 0);
	ck_assert_msg(!memcmp(x, y, 16), "a file of the head's size, whole");
	/* Not as seen: each field checked, for a head and a whole file. */
	for (int i = 0; i < 10; i++) {
		bad = i % 5 == 4 ? s : a;
		switch (i % 5) {
		case 0: bad.ino++; break;
		case 1: bad.dev++; break;
		case 2: bad.ctime_ns++; break;
		case 3: bad.mtime_ns--; break;
		case 4: bad.size++; break;
		}
		ck_assert_msg(im_exact_hash_seen_at(
				      rootfd,
				      i % 5 == 4 ? "small.bin" : "a.bin", &bad,
				      i < 5 ? IM_EXACT_HEAD : UINT64_MAX, buf,
				      sizeof(buf), x, NULL) == -ESTALE,
			      "field %d changed: -ESTALE", i % 5);
	}
	/* Rewritten with its old size and times: the ctime tells. */
	{
		struct timespec t[2] = {{0, 0}, {0, 0}};
		struct im_exact_seen old = s;

		usleep(20000);
		b[10] ^= 1;
		put("small.bin", b, 1000);
		t[0].tv_sec = old.mtime_ns / 1000000000;
		t[0].tv_nsec = old.mtime_ns % 1000000000;
		t[1] = t[0];
		ck_assert_int_eq(utimensat(rootfd, "small.bin", t, 0), 0);
		ck_assert_int_eq(im_exact_hash_seen_at(rootfd, "small.bin",
						       &old, IM_EXACT_HEAD, buf,
						       IM_EXACT_HEAD, x, NULL),
				 -ESTALE);
	}
	ck_assert_int_eq(im_exact_hash_seen_at(rootfd, "a.bin", &a,
					       IM_EXACT_HEAD, buf,
					       IM_EXACT_HEAD - 1, x, NULL),
			 -EINVAL);
	free(b);
}
END_TEST

/* A file whose length is not what it said when opened (written to while
 * read) is refused, not hashed for the bytes that happened to be read. A
 * /proc file does that every time: it says 0 bytes and reads more. */
START_TEST(test_exact_hash_refuses_a_length_changed_while_read)
{
	static char buf[IM_EXACT_HEAD];
	struct im_exact_seen seen = {0};
	uint8_t x[16];
	struct stat st;
	int proc = open("/proc/self", O_RDONLY | O_DIRECTORY);

	ck_assert_int_ge(proc, 0);
	ck_assert_int_eq(fstatat(proc, "status", &st, 0), 0);
	ck_assert(S_ISREG(st.st_mode) && st.st_size == 0);
	seen.mtime_ns =
		(int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	ck_assert_int_eq(im_exact_hash_seen_at(proc, "status", &seen,
					       UINT64_MAX, buf, sizeof(buf), x,
					       NULL),
			 -ESTALE);
	close(proc);
}
END_TEST

struct collect {
	struct im_index *idx;
};

static void on_result(const char *path, const struct stat *st,
		      const struct im_doc_sigs *d, void *arg)
{
	struct collect *c = arg;

	(void)st;
	ck_assert_int_eq(im_index_put(c->idx, path, d), 0);
}

/* Scan the tree into a new index with @p threads workers, the size_only
 * of @p size_only, into @p counts; with @p st, complete the deferred tier
 * (im_exact_fill()). */
static struct im_index *scan_with(int defer, int size_only, unsigned threads,
				  struct im_scan_counts *counts,
				  struct im_exact_stats *st)
{
	struct collect c = {NULL};
	struct im_scan_ops ops = {.result = on_result, .arg = &c};
	struct im_lexicon *lex;
	struct im_params p;

	im_params_init(&p);
	p.defer_binary = defer;
	p.size_only = size_only;
	lex = empty_lexicon(&p);
	ck_assert_int_eq(im_index_new(&c.idx), 0);
	*counts = (struct im_scan_counts){0};
	ck_assert_int_eq(im_scan_sign(rootfd, lex, &p, threads, &ops, counts),
			 0);
	if (defer && st)
		ck_assert_int_eq(im_exact_fill(c.idx, rootfd, st), 0);
	im_lexicon_free(lex);
	return c.idx;
}

static struct im_index *scan(int defer, struct im_exact_stats *st)
{
	struct im_scan_counts counts;

	return scan_with(defer, 0, 2, &counts, st);
}

static int count_exact(const char *path, const struct im_doc_sigs *d, void *arg)
{
	(void)path;
	*(size_t *)arg += d->exact_valid;
	return 0;
}

static int link_line(const struct im_link *l, void *arg)
{
	strcat(arg, l->path);
	strcat(arg, l->exact ? " exact\n" : " near\n");
	return 0;
}

static void links_of(struct im_index *idx, const char *path, char *out)
{
	out[0] = '\0';
	ck_assert_int_eq(im_index_links(idx, path, link_line, out), 0);
}

START_TEST(test_exact_fill_same_links)
{
	static const char *const paths[] = {
		"copy1.bin", "copy2.bin",  "other.bin",	 "unique.bin",
		"big.bin",   "small1.bin", "small2.bin", "doc.txt"};
	/* Above the signer's READ_WHOLE_MAX (256 KiB): sniffed, deferred. */
	enum { MID = 300000 };
	char *a = binary(MID, 1), *o = binary(MID, 2), *u = binary(270000, 3),
	     *big = binary(5000000, 4), *small = binary(7777, 5);
	struct im_index *all, *lazy;
	struct im_exact_stats st;
	char la[512], lb[512];
	size_t n_all = 0, n_lazy = 0;

	put("copy1.bin", a, MID);
	put("copy2.bin", a, MID);
	put("other.bin", o, MID); /* same size, other bytes */
	put("unique.bin", u, 270000);
	put("big.bin", big, 5000000);
	/* Read whole anyway, so hashed then, never deferred. */
	put("small1.bin", small, 7777);
	put("small2.bin", small, 7777);
	put("doc.txt", "a text, never deferred\n", 23);
	all = scan(0, NULL);
	lazy = scan(1, &st);
	/* copy1, copy2 and other share a size; unique and big are alone. */
	ck_assert_uint_eq(st.deferred, 5);
	ck_assert_uint_eq(st.hashed, 3);
	ck_assert_uint_eq(st.bytes, 3 * MID);
	ck_assert_uint_eq(st.changed, 0);
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		links_of(all, paths[i], la);
		links_of(lazy, paths[i], lb);
		ck_assert_msg(!strcmp(la, lb), "%s: links %s, deferred %s",
			      paths[i], la, lb);
	}
	links_of(lazy, "copy1.bin", lb);
	ck_assert_str_eq(lb, "copy2.bin exact\n");
	links_of(lazy, "small1.bin", lb);
	ck_assert_str_eq(lb, "small2.bin exact\n");
	im_index_foreach_doc(all, count_exact, &n_all);
	im_index_foreach_doc(lazy, count_exact, &n_lazy);
	ck_assert_uint_eq(n_all, 8);
	/* The text, the two small copies and the three of MID bytes. */
	ck_assert_uint_eq(n_lazy, 6);
	im_index_free(all);
	im_index_free(lazy);
	free(a);
	free(o);
	free(u);
	free(small);
	free(big);
}
END_TEST

/* A scan told that only sizes matter (size_only: most files are not
 * fstat'ed) still defers the same binaries, with the stat the fill checks
 * them against: the same links, the same bytes counted. One worker, so
 * that the later copies of 300000 bytes are read into a buffer already
 * larger than they are. */
START_TEST(test_exact_fill_size_only)
{
	static const char *const paths[] = {
		"copy1.bin",  "copy2.bin",  "copy3.bin", "other.bin",
		"small1.bin", "small2.bin", "doc.txt"};
	enum { MID = 300000 };
	char *a = binary(MID, 1), *o = binary(MID, 2), *small = binary(7777, 5);
	struct im_scan_counts ca, cb;
	struct im_index *all, *lazy;
	struct im_exact_stats st;
	char la[512], lb[512];

	put("copy1.bin", a, MID);
	put("copy2.bin", a, MID);
	put("copy3.bin", a, MID);
	put("other.bin", o, MID);
	put("small1.bin", small, 7777);
	put("small2.bin", small, 7777);
	put("doc.txt", "a text, never deferred\n", 23);
	all = scan_with(1, 0, 1, &ca, &st);
	ck_assert_uint_eq(st.deferred, 4);
	lazy = scan_with(1, 1, 1, &cb, &st);
	ck_assert_uint_eq(st.deferred, 4);
	ck_assert_uint_eq(st.hashed, 4);
	ck_assert_uint_eq(st.changed, 0);
	ck_assert_uint_eq(cb.bytes, ca.bytes);
	ck_assert_uint_eq(cb.by_status[IM_DOC_BINARY],
			  ca.by_status[IM_DOC_BINARY]);
	ck_assert_uint_eq(cb.files, ca.files);
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		links_of(all, paths[i], la);
		links_of(lazy, paths[i], lb);
		ck_assert_msg(!strcmp(la, lb), "%s: links %s, size_only %s",
			      paths[i], la, lb);
	}
	links_of(lazy, "copy3.bin", lb);
	ck_assert_str_eq(lb, "copy1.bin exact\ncopy2.bin exact\n");
	im_index_free(all);
	im_index_free(lazy);
	free(a);
	free(o);
	free(small);
}
END_TEST

/* Deferred files written to between the scan and the fill are left
 * unhashed and counted as changed: never put with a hash of bytes that were
 * not read, which would make them copies of each other (two different
 * binaries of one size, planned as exact copies). */
START_TEST(test_exact_fill_leaves_changed_files_unhashed)
{
	enum { MID = 300000 };
	char *a = binary(MID, 1), *o = binary(MID, 2);
	struct im_exact_stats st;
	struct im_index *idx;
	char got[512];
	size_t n = 0;

	put("a.bin", a, MID);
	put("b.bin", o, MID);
	idx = scan(1, NULL);
	/* Other bytes and length: the size the scan saw no longer holds. */
	put("a.bin", a, MID - 1);
	put("b.bin", o, MID - 1);
	ck_assert_int_eq(im_exact_fill(idx, rootfd, &st), 0);
	ck_assert_uint_eq(st.deferred, 2);
	ck_assert_uint_eq(st.changed, 2);
	ck_assert_uint_eq(st.hashed, 0);
	im_index_foreach_doc(idx, count_exact, &n);
	ck_assert_uint_eq(n, 0);
	links_of(idx, "a.bin", got);
	ck_assert_str_eq(got, "");
	ck_assert_uint_eq(im_index_cluster_count(idx), 0);
	im_index_free(idx);
	free(a);
	free(o);
}
END_TEST

static Suite *exact_suite(void)
{
	Suite *s = suite_create("exact");
	TCase *tc = tcase_create("sizes");
	TCase *tf = tcase_create("files");

	tcase_add_test(tc, test_exact_sizes_hand_out_once);
	tcase_add_test(tc, test_exact_sizes_many);
	suite_add_tcase(s, tc);
	tcase_add_checked_fixture(tf, setup, teardown);
	tcase_add_test(tf, test_exact_hash_equals_signer);
	tcase_add_test(tf, test_exact_hash_seen_head);
	tcase_add_test(tf, test_exact_hash_refuses_a_length_changed_while_read);
	tcase_add_test(tf, test_exact_fill_same_links);
	tcase_add_test(tf, test_exact_fill_leaves_changed_files_unhashed);
	tcase_add_test(tf, test_exact_fill_size_only);
	suite_add_tcase(s, tf);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(exact_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
