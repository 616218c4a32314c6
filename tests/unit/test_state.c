/* Unit tests for core/state/state: the crash-safe signature cache. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "unit.h"
#include "state.h"

static char dir[64];
static char path[128];

static void setup(void)
{
	strcpy(dir, "/tmp/test_state.XXXXXX");
	ck_assert_msg(mkdtemp(dir) != NULL, "mkdtemp: %s", strerror(errno));
	snprintf(path, sizeof(path), "%s/sigcache", dir);
}

static void teardown(void)
{
	char cmd[160];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static void fake_sigs(struct im_doc_sigs *d, unsigned seed)
{
	memset(d, 0, sizeof(*d));
	d->status = IM_DOC_SIGNED;
	d->ncoords = 11;
	d->exact_valid = 1;
	d->valid = 0x5f5 & ((1u << 11) - 1);
	d->unique_terms = 100 + seed;
	d->numbers = seed * UINT64_C(0x9e3779b97f4a7c15);
	for (unsigned i = 0; i < 16; i++)
		d->exact[i] = (uint8_t)(seed * 7 + i);
	for (unsigned k = 0; k < 11; k++)
		if (d->valid & (1u << k))
			for (unsigned i = 0; i < IM_SIG_LEN; i++)
				d->sig[k].b[i] = (uint8_t)(seed + k * 31 + i);
}

static uint64_t test_key(void)
{
	struct im_params p;
	im_params_init(&p);
	return im_state_key(&p, 1234);
}

/* Write @p n entries named "dir/file%u" with fake signatures. */
static void write_cache(unsigned n, uint64_t key)
{
	struct im_state_writer *w;
	ck_assert_int_eq(im_state_writer_new(key, &w), 0);
	for (unsigned i = 0; i < n; i++) {
		char name[64];
		struct im_doc_sigs d;
		fake_sigs(&d, i);
		if (i % 5 == 4) {
			d.status = IM_DOC_BINARY;
			d.valid = 0;
			d.exact_valid = 0;
		}
		snprintf(name, sizeof(name), "dir/file %u%%\n", i);
		ck_assert_int_eq(im_state_writer_add(w, name, 1000 + i,
						     (int64_t)i * 1000000007,
						     42 + i, 0xc0de0000u + i,
						     &d),
				 0);
	}
	ck_assert_msg(im_state_writer_commit(w, path) == 0, "commit failed");
	im_state_writer_free(w);
}

static int commit_and_free(struct im_state_writer *w, const char *where)
{
	int ret = im_state_writer_commit(w, where);

	im_state_writer_free(w);
	return ret;
}

static size_t file_size(void)
{
	struct stat st;
	ck_assert_int_eq(stat(path, &st), 0);
	return (size_t)st.st_size;
}

START_TEST(test_state_round_trip)
{
	struct im_state *st;
	char why[128] = "";

	write_cache(100, test_key());
	ck_assert_msg(im_state_load(path, test_key(), &st, why, sizeof(why)) ==
			      0,
		      "a freshly written cache must load: %s", why);
	ck_assert_uint_eq(im_state_count(st), 100);
	for (unsigned i = 0; i < 100; i++) {
		char name[64];
		struct im_doc_sigs d;
		snprintf(name, sizeof(name), "dir/file %u%%\n", i);
		struct im_state_entry ent;
		const struct im_state_entry *e = &ent;
		ck_assert_msg(im_state_find(st, name, &ent) == 0,
			      "entry %u must be found by path", i);
		ck_assert_uint_eq(e->path_len, strlen(name));
		ck_assert_msg(!memcmp(e->path, name, e->path_len), "path kept");
		ck_assert_uint_eq(e->size, 1000 + i);
		ck_assert_int_eq(e->mtime_ns, (int64_t)i * 1000000007);
		ck_assert_uint_eq(e->ino, 42 + i);
		ck_assert_uint_eq(e->ctime_fold, 0xc0de0000u + i);
		fake_sigs(&d, i);
		if (i % 5 == 4) {
			ck_assert_uint_eq(e->d.status, IM_DOC_BINARY);
			continue;
		}
		ck_assert_uint_eq(e->d.valid, d.valid);
		ck_assert_uint_eq(e->d.unique_terms, d.unique_terms);
		ck_assert(e->d.numbers == d.numbers);
		ck_assert_msg(!memcmp(e->d.exact, d.exact, 16),
			      "exact hash kept");
		for (unsigned k = 0; k < 11; k++)
			if (d.valid & (1u << k))
				ck_assert_msg(!memcmp(e->d.sig[k].b, d.sig[k].b,
						      IM_SIG_LEN),
					      "signature %u of entry %u kept",
					      k, i);
	}
	struct im_state_entry e;
	ck_assert_int_eq(im_state_find(st, "dir/missing", &e), -ENOENT);
	ck_assert_int_eq(im_state_find(st, "dir/file 1", &e), -ENOENT);
	/* Each entry in file order, across the offsets kept every 64. */
	for (unsigned i = 0; i < 100; i++) {
		ck_assert_int_eq(im_state_at(st, i, &e), 0);
		ck_assert_uint_eq(e.ino, 42 + i);
	}
	ck_assert_int_eq(im_state_at(st, 100, &e), -ENOENT);
	im_state_free(st);
}
END_TEST

START_TEST(test_state_empty_and_missing)
{
	struct im_state *st;

	ck_assert_int_eq(im_state_load(path, test_key(), &st, NULL, 0),
			 -ENOENT);
	ck_assert_ptr_null(st);
	write_cache(0, test_key());
	ck_assert_int_eq(im_state_load(path, test_key(), &st, NULL, 0), 0);
	ck_assert_uint_eq(im_state_count(st), 0);
	struct im_state_entry e;
	ck_assert_int_eq(im_state_find(st, "x", &e), -ENOENT);
	im_state_free(st);
}
END_TEST

/* A fifo or a directory where the cache should be is refused at once, with
 * a reason; opening a fifo for reading must not wait for a writer. */
START_TEST(test_state_not_a_regular_file)
{
	struct im_state *st;
	char why[128];

	ck_assert_int_eq(mkfifo(path, 0600), 0);
	ck_assert_int_eq(im_state_load(path, test_key(), &st, why, sizeof(why)),
			 -EINVAL);
	ck_assert_ptr_null(st);
	ck_assert_msg(strstr(why, "regular") != NULL, "reason: %s", why);
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	ck_assert_int_eq(im_state_load(path, test_key(), &st, why, sizeof(why)),
			 -EINVAL);
	ck_assert_msg(strstr(why, "regular") != NULL, "reason: %s", why);
}
END_TEST

START_TEST(test_state_truncated_refused)
{
	struct im_state *st;
	char why[128];

	write_cache(20, test_key());
	size_t full = file_size();
	for (size_t cut = 0; cut < full; cut += 37) {
		ck_assert_int_eq(truncate(path, (off_t)cut), 0);
		why[0] = 0;
		int ret =
			im_state_load(path, test_key(), &st, why, sizeof(why));
		ck_assert_msg(
			ret == -EINVAL,
			"a file cut at %zu of %zu must be refused (got %d)",
			cut, full, ret);
		ck_assert_msg(why[0] != 0, "a reason is given");
		ck_assert_ptr_null(st);
		write_cache(20, test_key());
	}
}
END_TEST

START_TEST(test_state_corrupt_refused)
{
	struct im_state *st;
	char why[128] = "";

	write_cache(20, test_key());
	size_t full = file_size();
	for (size_t pos = 0; pos < full; pos += 13) {
		int fd = open(path, O_RDWR);
		uint8_t c;
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(pread(fd, &c, 1, (off_t)pos), 1);
		c ^= 0x40;
		ck_assert_int_eq(pwrite(fd, &c, 1, (off_t)pos), 1);
		close(fd);
		int ret =
			im_state_load(path, test_key(), &st, why, sizeof(why));
		ck_assert_msg(ret == -EINVAL,
			      "a flipped byte at %zu must be refused (got %d)",
			      pos, ret);
		write_cache(20, test_key());
	}
	/* Not a state file at all. */
	FILE *f = fopen(path, "w");
	fputs("hello world, this is not a cache\n", f);
	fclose(f);
	ck_assert_int_eq(im_state_load(path, test_key(), &st, why, sizeof(why)),
			 -EINVAL);
	ck_assert_str_eq(why, "not an imatchfs state file");
}
END_TEST

START_TEST(test_state_params_mismatch)
{
	struct im_params p;
	struct im_state *st;
	char why[128] = "";

	im_params_init(&p);
	uint64_t k0 = im_state_key(&p, 1234);
	p.k = 3;
	ck_assert_msg(im_state_key(&p, 1234) != k0, "k is part of the key");
	im_params_init(&p);
	p.seed = 99;
	ck_assert_msg(im_state_key(&p, 1234) != k0, "seed is part of the key");
	im_params_init(&p);
	ck_assert_msg(im_state_key(&p, 1235) != k0,
		      "the lexicon is part of the key");
	p.hidden = 1;
	ck_assert_msg(im_state_key(&p, 1234) == k0,
		      "hidden only chooses files, not signatures");

	write_cache(5, k0);
	ck_assert_int_eq(im_state_load(path, k0 + 1, &st, why, sizeof(why)),
			 -ESTALE);
	ck_assert_msg(strstr(why, "other parameters") != NULL, "reason: %s",
		      why);
	ck_assert_ptr_null(st);
}
END_TEST

/* A cache of other signing parameters: its files' entries (binary, too big,
 * failed) stay usable when their files key matches, never otherwise. */
START_TEST(test_state_partial_by_files_key)
{
	struct im_params p;
	struct im_state_writer *w;
	struct im_state_entry e;
	struct im_state *st;
	char why[128] = "";

	im_params_init(&p);
	uint64_t k0 = im_state_key(&p, 1234), f0 = im_state_files_key(&p);
	p.k = 3;
	ck_assert_msg(im_state_files_key(&p) == f0,
		      "k changes no binary file's entry");
	/* max_size is checked per entry (im_state_entry_within()): a new
	 * limit keeps the cache. */
	im_params_init(&p);
	p.max_size = 1000;
	ck_assert_msg(im_state_files_key(&p) == f0 &&
			      im_state_key(&p, 1234) == k0,
		      "max_size keeps the keys");
	/* Stage files hold no limit: theirs is in their key, which at the
	 * default limit is the cache's. */
	ck_assert_uint_ne(im_state_stage_key(&p, 1234), k0);
	p.max_size = 64u << 20;
	ck_assert_uint_eq(im_state_stage_key(&p, 1234), k0);
	struct im_state_entry lim = {.size = 1000};

	lim.d.status = IM_DOC_SIGNED;
	ck_assert(im_state_entry_within(&lim, 1000));
	ck_assert(im_state_entry_within(&lim, 0));
	ck_assert(!im_state_entry_within(&lim, 999));
	lim.d.status = IM_DOC_TOO_BIG;
	ck_assert(im_state_entry_within(&lim, 999));
	ck_assert(!im_state_entry_within(&lim, 1000));
	ck_assert(!im_state_entry_within(&lim, 0));
	/* A filter makes a document of a file that sniffs binary (QA 5). */
	static const char *const one[] = {"xyz:tr -d x", NULL};
	static const char *const other[] = {"xyz:cat", NULL};
	static const char *const none[] = {NULL};
	im_params_init(&p);
	p.filters = none;
	ck_assert_msg(im_state_files_key(&p) == f0 &&
			      im_state_key(&p, 1234) == k0,
		      "an empty filter list changes nothing");
	p.filters = one;
	uint64_t f1 = im_state_files_key(&p), k1 = im_state_key(&p, 1234);
	ck_assert_msg(f1 != f0 && k1 != k0, "a filter is part of both keys");
	p.filters = other;
	ck_assert_msg(im_state_files_key(&p) != f1 &&
			      im_state_key(&p, 1234) != k1,
		      "another filter, other keys");
	im_params_init(&p);

	ck_assert_int_eq(im_state_writer_new(k0, &w), 0);
	im_state_writer_set_files_key(w, f0);
	struct im_doc_sigs d;
	fake_sigs(&d, 1);
	ck_assert_int_eq(im_state_writer_add(w, "a.txt", 10, 20, 30, 40, &d),
			 0);
	ck_assert_int_eq(commit_and_free(w, path), 0);

	ck_assert_int_eq(im_state_load_files(path, k0, f0, &st, NULL, 0), 0);
	ck_assert_msg(!im_state_partial(st), "its own key: the whole cache");
	im_state_free(st);
	ck_assert_int_eq(
		im_state_load_files(path, k0 + 1, f0, &st, why, sizeof(why)),
		0);
	ck_assert_msg(im_state_partial(st), "another key, its files key");
	ck_assert_msg(strstr(why, "other parameters") != NULL, "reason: %s",
		      why);
	ck_assert_int_eq(im_state_find(st, "a.txt", &e), 0);
	im_state_free(st);
	ck_assert_int_eq(
		im_state_load_files(path, k0 + 1, f0 + 1, &st, NULL, 0),
		-ESTALE);
	ck_assert_ptr_null(st);
	ck_assert_int_eq(im_state_load(path, k0 + 1, &st, NULL, 0), -ESTALE);
	ck_assert_ptr_null(st);

	/* Without a files key written, no other key may use it. */
	write_cache(5, k0);
	ck_assert_int_eq(im_state_load_files(path, k0 + 1, f0, &st, NULL, 0),
			 -ESTALE);
	ck_assert_ptr_null(st);
}
END_TEST

/* Files of a directory renamed while the daemon was away: found by inode
 * and name, not by inode alone, nor by name alone. */
START_TEST(test_state_find_moved)
{
	struct im_state_writer *w;
	struct im_state_entry e;
	struct im_state *st;
	struct im_doc_sigs d;

	ck_assert_int_eq(im_state_writer_new(test_key(), &w), 0);
	fake_sigs(&d, 1);
	ck_assert_int_eq(
		im_state_writer_add(w, "old/sub/report.txt", 10, 20, 77, 5, &d),
		0);
	/* A hard link: the same inode under another name. */
	ck_assert_int_eq(
		im_state_writer_add(w, "old/link.txt", 10, 20, 77, 5, &d), 0);
	ck_assert_int_eq(
		im_state_writer_add(w, "report.txt", 11, 21, 78, 6, &d), 0);
	ck_assert_int_eq(commit_and_free(w, path), 0);
	ck_assert_int_eq(im_state_load(path, test_key(), &st, NULL, 0), 0);

	ck_assert_int_eq(im_state_find_moved(st, 77, "report.txt", &e), 0);
	ck_assert_uint_eq(e.path_len, strlen("old/sub/report.txt"));
	ck_assert_uint_eq(e.ino, 77);
	ck_assert_int_eq(im_state_find_moved(st, 77, "link.txt", &e), 0);
	ck_assert_uint_eq(e.path_len, strlen("old/link.txt"));
	ck_assert_int_eq(im_state_find_moved(st, 78, "report.txt", &e), 0);
	ck_assert_uint_eq(e.path_len, strlen("report.txt"));
	ck_assert_int_eq(im_state_find_moved(st, 77, "other.txt", &e), -ENOENT);
	ck_assert_int_eq(im_state_find_moved(st, 79, "report.txt", &e),
			 -ENOENT);
	/* The name is a whole component: "port.txt" is not "report.txt". */
	ck_assert_int_eq(im_state_find_moved(st, 77, "port.txt", &e), -ENOENT);
	im_state_free(st);
}
END_TEST

/* What `imatch apply --action hardlink` leaves: thousands of paths of one
 * inode, under one name in many directories and under many names. Each is
 * found by inode and name. (Loading them probed a table by inode alone
 * O(n^2): this test took 1.24 s then, 0.47 s now.) */
START_TEST(test_state_many_hard_links)
{
	enum { LINKS = 20000 };
	struct im_state_writer *w;
	struct im_state_entry e;
	struct im_state *st;
	struct im_doc_sigs d;
	char p[64];

	ck_assert_int_eq(im_state_writer_new(test_key(), &w), 0);
	fake_sigs(&d, 1);
	for (int i = 0; i < LINKS; i++) {
		snprintf(p, sizeof(p), "pkg%05d/LICENSE", i);
		ck_assert_int_eq(im_state_writer_add(w, p, 10, 20, 99, 5, &d),
				 0);
		snprintf(p, sizeof(p), "copies/copy%05d.txt", i);
		ck_assert_int_eq(im_state_writer_add(w, p, 10, 20, 99, 5, &d),
				 0);
	}
	ck_assert_int_eq(
		im_state_writer_add(w, "other/LICENSE", 11, 21, 98, 6, &d), 0);
	ck_assert_int_eq(commit_and_free(w, path), 0);
	ck_assert_int_eq(im_state_load(path, test_key(), &st, NULL, 0), 0);

	ck_assert_int_eq(im_state_find_moved(st, 99, "LICENSE", &e), 0);
	ck_assert_uint_eq(e.ino, 99);
	ck_assert_int_eq(memcmp(e.path + e.path_len - 8, "/LICENSE", 8), 0);
	ck_assert_int_eq(im_state_find_moved(st, 98, "LICENSE", &e), 0);
	ck_assert_uint_eq(e.path_len, strlen("other/LICENSE"));
	for (int i = 0; i < LINKS; i += 997) {
		snprintf(p, sizeof(p), "copy%05d.txt", i);
		ck_assert_int_eq(im_state_find_moved(st, 99, p, &e), 0);
		ck_assert_uint_eq(e.path_len, strlen("copies/") + strlen(p));
		ck_assert_int_eq(
			memcmp(e.path + strlen("copies/"), p, strlen(p)), 0);
	}
	ck_assert_int_eq(im_state_find_moved(st, 99, "copy.txt", &e), -ENOENT);
	ck_assert_int_eq(im_state_find_moved(st, 97, "LICENSE", &e), -ENOENT);
	/* Every path is still found by its own name. */
	ck_assert_int_eq(im_state_find(st, "pkg12345/LICENSE", &e), 0);
	im_state_free(st);
}
END_TEST

/* Upgrading: an older version's cache is out of date, not corrupt (the
 * daemon refused to mount over it); a newer version's stays refused. */
static void set_version(uint32_t v)
{
	FILE *f = fopen(path, "r+b");
	uint8_t le[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16),
			 (uint8_t)(v >> 24)};

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fseek(f, 8, SEEK_SET), 0);
	ck_assert_uint_eq(fwrite(le, 1, 4, f), 4);
	fclose(f);
}

START_TEST(test_state_other_versions)
{
	struct im_state *st;
	char why[128] = "";

	write_cache(5, test_key());
	set_version(IM_STATE_VERSION - 1);
	ck_assert_int_eq(im_state_load(path, test_key(), &st, why, sizeof(why)),
			 -ESTALE);
	ck_assert_msg(strstr(why, "older") != NULL, "reason: %s", why);
	ck_assert_ptr_null(st);
	set_version(IM_STATE_VERSION + 1);
	ck_assert_int_eq(im_state_load(path, test_key(), &st, why, sizeof(why)),
			 -EINVAL);
	ck_assert_msg(strstr(why, "unsupported version") != NULL, "reason: %s",
		      why);
	ck_assert_ptr_null(st);
}
END_TEST

START_TEST(test_state_crash_leftover_tmp)
{
	struct im_state *st;
	char tmp[160];

	write_cache(10, test_key());
	/* A crash between write and rename leaves a tmp file: it is ignored
	 * and the committed cache still loads. */
	snprintf(tmp, sizeof(tmp), "%s.tmp.99999", path);
	FILE *f = fopen(tmp, "w");
	fputs("IMSTATE\0garbage", f);
	fclose(f);
	ck_assert_int_eq(im_state_load(path, test_key(), &st, NULL, 0), 0);
	ck_assert_uint_eq(im_state_count(st), 10);
	im_state_free(st);
	/* A new commit replaces the file atomically and leaves no tmp of its own. */
	write_cache(3, test_key());
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
	ck_assert_msg(access(tmp, F_OK) != 0, "commit leaves no tmp file");
	ck_assert_int_eq(im_state_load(path, test_key(), &st, NULL, 0), 0);
	ck_assert_uint_eq(im_state_count(st), 3);
	im_state_free(st);
}
END_TEST

START_TEST(test_state_file_key)
{
	uint64_t a, b;
	FILE *f = fopen(path, "w");
	fputs("lexicon bytes", f);
	fclose(f);
	ck_assert_int_eq(im_state_file_key(path, &a), 0);
	ck_assert_int_eq(im_state_file_key(path, &b), 0);
	ck_assert_msg(a == b, "same bytes, same key");
	f = fopen(path, "a");
	fputs("!", f);
	fclose(f);
	ck_assert_int_eq(im_state_file_key(path, &b), 0);
	ck_assert_msg(a != b, "other bytes, other key");
	ck_assert_int_eq(im_state_file_key("/nonexistent/x", &b), -ENOENT);
}
END_TEST

/* The fold of a ctime @p sec s and @p nsec ns. */
static uint32_t fold_of(time_t sec, long nsec)
{
	struct stat st = {0};

	st.st_ctim.tv_sec = sec;
	st.st_ctim.tv_nsec = nsec;
	return im_state_ctime_fold(&st);
}

/* The fold tells apart ctimes a nanosecond apart, and across the carry
 * into the high half. */
START_TEST(test_state_ctime_fold)
{
	ck_assert_msg(fold_of(1700000000, 123456789) !=
			      fold_of(1700000000, 123456790),
		      "ctimes 1 ns apart fold apart");
	/* 4294.967295 s is 2^32 - 1 ns: the low half wraps, the high moves. */
	ck_assert_msg(fold_of(4294, 967295) != fold_of(4294, 967296),
		      "across the carry into the high half");
	ck_assert_uint_eq(fold_of(4294, 967295), fold_of(4294, 967295));
}
END_TEST

/*
 * QA 5/3: a file rewritten in place, its size kept and its old mtime put
 * back, must not fit its entry any more: only its ctime tells. Each other
 * field alone must not fit either.
 */
START_TEST(test_state_entry_fits_needs_ctime)
{
	char file[160];
	struct im_state_writer *w;
	struct im_state_entry e;
	struct im_state *st;
	struct im_doc_sigs d;
	struct stat was, now;
	int fd;

	snprintf(file, sizeof(file), "%s/doc.txt", dir);
	fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "first text", 10), 10);
	ck_assert_int_eq(fstat(fd, &was), 0);
	fake_sigs(&d, 3);
	ck_assert_int_eq(im_state_writer_new(test_key(), &w), 0);
	ck_assert_int_eq(
		im_state_writer_add(w, "doc.txt", (uint64_t)was.st_size,
				    (int64_t)was.st_mtim.tv_sec * 1000000000 +
					    was.st_mtim.tv_nsec,
				    (uint64_t)was.st_ino,
				    im_state_ctime_fold(&was), &d),
		0);
	ck_assert_int_eq(commit_and_free(w, path), 0);
	ck_assert_int_eq(im_state_load(path, test_key(), &st, NULL, 0), 0);
	ck_assert_int_eq(im_state_find(st, "doc.txt", &e), 0);
	ck_assert_msg(im_state_entry_fits(&e, &was), "the file as it was read");

	now = was;
	now.st_size++;
	ck_assert_msg(!im_state_entry_fits(&e, &now), "another size");
	now = was;
	now.st_mtim.tv_nsec ^= 1;
	ck_assert_msg(!im_state_entry_fits(&e, &now), "another mtime");
	now = was;
	now.st_ino++;
	ck_assert_msg(!im_state_entry_fits(&e, &now), "another inode");

	/* Rewrite on the same inode, same size, old mtime back, until the
	 * ctime has moved (the kernel's clock ticks coarsely): 10 s at most. */
	for (int i = 0; i < 10000; i++) {
		struct timespec times[2] = {was.st_atim, was.st_mtim};
		struct timespec tick = {0, 1000000};

		ck_assert_int_eq(pwrite(fd, "other text", 10, 0), 10);
		ck_assert_int_eq(futimens(fd, times), 0);
		ck_assert_int_eq(fstat(fd, &now), 0);
		if (now.st_ctim.tv_sec != was.st_ctim.tv_sec ||
		    now.st_ctim.tv_nsec != was.st_ctim.tv_nsec)
			break;
		nanosleep(&tick, NULL);
	}
	close(fd);
	ck_assert_uint_eq(now.st_ino, was.st_ino);
	ck_assert_int_eq(now.st_size, was.st_size);
	ck_assert_int_eq(now.st_mtim.tv_sec, was.st_mtim.tv_sec);
	ck_assert_int_eq(now.st_mtim.tv_nsec, was.st_mtim.tv_nsec);
	ck_assert_msg(now.st_ctim.tv_sec != was.st_ctim.tv_sec ||
			      now.st_ctim.tv_nsec != was.st_ctim.tv_nsec,
		      "the ctime never moved");
	ck_assert_msg(!im_state_entry_fits(&e, &now),
		      "a same-size rewrite with its old mtime fits its entry");
	im_state_free(st);
}
END_TEST

struct paths_seen {
	const struct im_state *st;
	size_t n, stop_at;
};

static int see_path(const char *p, size_t len, size_t i, void *arg)
{
	struct paths_seen *ps = arg;
	struct im_state_entry e;
	char name[64];

	snprintf(name, sizeof(name), "dir/file %zu%%\n", i);
	ck_assert_msg(len == strlen(name) && !memcmp(p, name, len),
		      "path %zu in file order", i);
	ck_assert_int_eq(im_state_at(ps->st, i, &e), 0);
	ck_assert_msg(e.path == p && e.path_len == len,
		      "index %zu is the entry's for im_state_at()", i);
	ps->n++;
	return i == ps->stop_at ? 7 : 0;
}

/* Every path once, in file order, with its index; a non-zero return stops
 * the walk and is returned. The header's keys come back. */
START_TEST(test_state_each_path_and_keys)
{
	struct paths_seen ps = {NULL, 0, SIZE_MAX};
	struct im_state *st;
	uint64_t key, files_key;

	write_cache(150, test_key());
	ck_assert_int_eq(im_state_load(path, test_key(), &st, NULL, 0), 0);
	ps.st = st;
	ck_assert_int_eq(im_state_each_path(st, see_path, &ps), 0);
	ck_assert_uint_eq(ps.n, 150);
	ps.n = 0;
	ps.stop_at = 70;
	ck_assert_int_eq(im_state_each_path(st, see_path, &ps), 7);
	ck_assert_uint_eq(ps.n, 71);
	im_state_keys(st, &key, &files_key);
	ck_assert_uint_eq(key, test_key());
	ck_assert_uint_eq(files_key, 0);
	im_state_free(st);

	struct im_state_writer *w;
	struct im_doc_sigs d;
	fake_sigs(&d, 1);
	ck_assert_int_eq(im_state_writer_new(test_key(), &w), 0);
	im_state_writer_set_files_key(w, 0x1234567890abcdefu);
	ck_assert_int_eq(im_state_writer_add(w, "a", 1, 2, 3, 4, &d), 0);
	ck_assert_int_eq(commit_and_free(w, path), 0);
	ck_assert_int_eq(im_state_load(path, test_key(), &st, NULL, 0), 0);
	im_state_keys(st, NULL, &files_key);
	ck_assert_uint_eq(files_key, 0x1234567890abcdefu);
	im_state_free(st);
}
END_TEST

/*
 * The daemon keeps its cache mapped; another program truncating the file in
 * place took the pages away, and the next read raised SIGBUS, which killed
 * the daemon. Now the cache reads as empty and says it is damaged; a cache
 * loaded afterwards is whole again.
 */
START_TEST(test_state_truncated_under_the_map)
{
	struct im_state_entry e;
	struct paths_seen ps = {NULL, 0, SIZE_MAX};
	struct im_state *st;
	char name[64];

	write_cache(3000, test_key());
	ck_assert_int_eq(im_state_load(path, test_key(), &st, NULL, 0), 0);
	ck_assert(!im_state_damaged(st));
	ck_assert_int_eq(truncate(path, 0), 0);
	snprintf(name, sizeof(name), "dir/file %u%%\n", 2000u);
	ck_assert_int_eq(im_state_find(st, name, &e), -ENOENT);
	ck_assert(im_state_damaged(st));
	ck_assert_int_eq(im_state_at(st, 10, &e), -ENOENT);
	ck_assert_int_eq(im_state_find_moved(st, 42 + 10, name, &e), -ENOENT);
	ps.st = st;
	ck_assert_int_eq(im_state_each_path(st, see_path, &ps), 0);
	ck_assert_uint_eq(ps.n, 0);
	im_state_free(st);

	write_cache(3000, test_key());
	ck_assert_int_eq(im_state_load(path, test_key(), &st, NULL, 0), 0);
	ck_assert(!im_state_damaged(st));
	ck_assert_int_eq(im_state_find(st, name, &e), 0);
	ck_assert_uint_eq(e.ino, 42 + 2000);
	im_state_free(st);
}
END_TEST

/*
 * The handler for a cache cut short must leave every other SIGBUS as fatal
 * as it was: a mapping of the program's own cut short, and a `kill -BUS`
 * (which, unlike a fault, does not come again once the handler returns).
 * Each in a child, which must die of it (under a sanitizer, whose handler
 * was there before ours, exit with its report).
 */
/* gcc defines __SANITIZE_*__; clang (14) only answers __has_feature(). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZER_REPORTS_SIGBUS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZER_REPORTS_SIGBUS 1
#endif
#endif
#ifndef SANITIZER_REPORTS_SIGBUS
#define SANITIZER_REPORTS_SIGBUS 0
#endif

static void bus_in_child(bool by_kill)
{
	char other[160];
	struct im_state *st;
	int status, fd;
	pid_t pid;

	write_cache(10, test_key());
	ck_assert_int_eq(im_state_load(path, test_key(), &st, NULL, 0), 0);
	snprintf(other, sizeof(other), "%s/other", dir);
	fd = open(other, O_RDWR | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 8192), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		volatile char *m = mmap(NULL, 8192, PROT_READ, MAP_SHARED, fd, 0);

		if (m == MAP_FAILED)
			_exit(2);
		if (by_kill)
			kill(getpid(), SIGBUS);
		else if (!ftruncate(fd, 0))
			(void)m[4096];
		_exit(0);
	}
	close(fd);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFSIGNALED(status) ? WTERMSIG(status) == SIGBUS
					  : SANITIZER_REPORTS_SIGBUS &&
						    WEXITSTATUS(status) != 0,
		      "a SIGBUS by %s: the child %s with %d",
		      by_kill ? "kill" : "fault",
		      WIFSIGNALED(status) ? "died" : "exited",
		      WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
	im_state_free(st);
}

START_TEST(test_state_other_sigbus_still_kills)
{
	bus_in_child(false);
	bus_in_child(true);
}
END_TEST

/*
 * The daemon loads its cache while it serves (the scanner, at the mount's
 * start), and the load's checks read every page: a cache cut short under
 * them killed the process with SIGBUS. Cut at points spread over a load,
 * in a child each: the load finds the cache whole or refuses it, and the
 * child lives.
 */
static long cut_after_us;

static void *cut_cache(void *arg)
{
	(void)arg;
	usleep((useconds_t)cut_after_us);
	(void)truncate(path, 4096);
	return NULL;
}

START_TEST(test_state_truncated_while_loading)
{
	char whole[160], cmd[400];
	struct timespec t0, t1;
	struct im_state *st;
	long load_us;
	int status;

	write_cache(20000, test_key());
	snprintf(whole, sizeof(whole), "%s/whole", dir);
	ck_assert_int_eq(rename(path, whole), 0);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", whole, path);
	ck_assert_int_eq(system(cmd), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ck_assert_int_eq(im_state_load(path, test_key(), &st, NULL, 0), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	im_state_free(st);
	load_us = (t1.tv_sec - t0.tv_sec) * 1000000 +
		  (t1.tv_nsec - t0.tv_nsec) / 1000;
	for (int i = 0; i < 10; i++) {
		pid_t pid;

		ck_assert_int_eq(system(cmd), 0);
		cut_after_us = load_us * i / 10;
		pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			pthread_t cutter;
			int ret;

			if (pthread_create(&cutter, NULL, cut_cache, NULL))
				_exit(2);
			ret = im_state_load(path, test_key(), &st, NULL, 0);
			pthread_join(cutter, NULL);
			if (!ret)
				im_state_free(st);
			_exit(ret == 0 || ret == -EINVAL ? 0 : 3);
		}
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			      "cut after %ld of %ld us: the child %s with %d",
			      cut_after_us, load_us,
			      WIFSIGNALED(status) ? "died" : "exited",
			      WIFSIGNALED(status) ? WTERMSIG(status)
						  : WEXITSTATUS(status));
	}
}
END_TEST

static Suite *state_suite(void)
{
	Suite *s = suite_create("state");
	TCase *tc = tcase_create("cache");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_state_round_trip);
	tcase_add_test(tc, test_state_empty_and_missing);
	tcase_add_test(tc, test_state_not_a_regular_file);
	tcase_add_test(tc, test_state_truncated_refused);
	tcase_add_test(tc, test_state_corrupt_refused);
	tcase_add_test(tc, test_state_params_mismatch);
	tcase_add_test(tc, test_state_partial_by_files_key);
	tcase_add_test(tc, test_state_find_moved);
	tcase_add_test(tc, test_state_many_hard_links);
	tcase_add_test(tc, test_state_other_versions);
	tcase_add_test(tc, test_state_crash_leftover_tmp);
	tcase_add_test(tc, test_state_file_key);
	tcase_add_test(tc, test_state_ctime_fold);
	tcase_add_test(tc, test_state_entry_fits_needs_ctime);
	tcase_add_test(tc, test_state_each_path_and_keys);
	tcase_add_test(tc, test_state_truncated_under_the_map);
	tcase_add_test(tc, test_state_other_sigbus_still_kills);
	tcase_add_test(tc, test_state_truncated_while_loading);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(state_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
