/* Unit tests for core/scale: the stage file container and shard lists. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "unit.h"
#include "records.h"
#include "shard.h"
#include "stage.h"

static char dir[64];
static char path[128];

static void setup(void)
{
	strcpy(dir, "/tmp/test_stage.XXXXXX");
	ck_assert_msg(mkdtemp(dir) != NULL, "mkdtemp: %s", strerror(errno));
	snprintf(path, sizeof(path), "%s/run", dir);
}

static void teardown(void)
{
	char cmd[160];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static const struct im_stage_header hdr = {
	.kind = IM_STAGE_DF, .part = 3, .nparts = 8, .key = 0x1122334455667788};

/* A file of @p n records: record i holds i bytes of value i, plus a u64. */
static void write_stage(unsigned n)
{
	struct im_stage_writer *w;
	struct im_stage_buf b = {0};

	ck_assert_int_eq(im_stage_writer_new(path, &hdr, &w), 0);
	for (unsigned i = 0; i < n; i++) {
		b.len = 0;
		im_stage_buf_u64(&b, 1000 + i);
		for (unsigned j = 0; j < i % 300; j++)
			im_stage_buf_put(&b, &(uint8_t){(uint8_t)i}, 1);
		ck_assert(!b.oom);
		ck_assert_int_eq(im_stage_writer_add(w, b.p, b.len), 0);
	}
	im_stage_writer_set_meta(w, 0, n);
	im_stage_writer_set_meta(w, IM_STAGE_META - 1, 42);
	ck_assert_int_eq(im_stage_writer_commit(w), 0);
	im_stage_writer_free(w);
	im_stage_buf_release(&b);
}

static int open_why(char *why, size_t len)
{
	struct im_stage_reader *r = NULL;
	int ret = im_stage_open(path, &r, why, len);

	ck_assert_msg((ret == 0) == (r != NULL), "reader iff success");
	im_stage_reader_free(r);
	return ret;
}

static long file_size(void)
{
	struct stat st;

	ck_assert_int_eq(stat(path, &st), 0);
	return (long)st.st_size;
}

START_TEST(test_stage_round_trip)
{
	/* Past the writer's 64 KiB buffer several times. */
	const unsigned n = 2000;
	struct im_stage_reader *r;
	const uint8_t *p;
	size_t len;
	unsigned i = 0;

	write_stage(n);
	ck_assert_int_eq(im_stage_open(path, &r, NULL, 0), 0);
	ck_assert_uint_eq(im_stage_header(r)->kind, IM_STAGE_DF);
	ck_assert_uint_eq(im_stage_header(r)->part, 3);
	ck_assert_uint_eq(im_stage_header(r)->nparts, 8);
	ck_assert_uint_eq(im_stage_header(r)->key, 0x1122334455667788);
	ck_assert_uint_eq(im_stage_count(r), n);
	ck_assert_uint_eq(im_stage_meta(r, 0), n);
	ck_assert_uint_eq(im_stage_meta(r, IM_STAGE_META - 1), 42);
	ck_assert_uint_eq(im_stage_meta(r, 1), 0);
	while (im_stage_next(r, &p, &len)) {
		struct im_stage_cur c = im_stage_cur(p, len);

		ck_assert_uint_eq(im_stage_get_u64(&c), 1000 + i);
		ck_assert_uint_eq(im_stage_left(&c), i % 300);
		for (unsigned j = 0; j < i % 300; j++)
			ck_assert_uint_eq(im_stage_get(&c, 1)[0], (uint8_t)i);
		ck_assert_msg(!c.bad, "record %u decodes", i);
		/* Reading past the end yields zeros and marks the cursor. */
		ck_assert_uint_eq(im_stage_get_u32(&c), 0);
		ck_assert(c.bad);
		i++;
	}
	ck_assert_uint_eq(i, n);
	im_stage_rewind(r);
	ck_assert(im_stage_next(r, &p, &len));
	ck_assert_uint_eq(len, 8);
	/* Pages given back are read again from the file, unchanged. */
	im_stage_drop(r);
	ck_assert_uint_eq(
		im_stage_get_u64(&(struct im_stage_cur){p, p + len, false}),
		1000);
	for (i = 1; im_stage_next(r, &p, &len); i++)
		ck_assert_uint_eq(len, 8 + i % 300);
	ck_assert_uint_eq(i, n);
	im_stage_reader_free(r);
}
END_TEST

/* im_stage_read() reads the file that was opened and checksummed, or
 * nothing: not another of the same size renamed over its path. */
START_TEST(test_stage_read_only_the_file_opened)
{
	struct im_stage_reader *r, *again;
	const uint8_t *p;
	uint8_t buf[512];
	size_t len;

	write_stage(50);
	ck_assert_int_eq(im_stage_open(path, &r, NULL, 0), 0);
	ck_assert(im_stage_next(r, &p, &len));
	ck_assert(im_stage_next(r, &p, &len));
	write_stage(50); /* the same bytes, a new file renamed over */
	ck_assert_int_eq(im_stage_read(r, p, len, buf), -ESTALE);
	ck_assert_int_eq(im_stage_open(path, &again, NULL, 0), 0);
	ck_assert(im_stage_next(again, &p, &len));
	ck_assert_int_eq(im_stage_read(again, p, len, buf), 0);
	ck_assert_msg(!memcmp(buf, p, len), "pread gives the mapped bytes");
	im_stage_reader_free(again);
	im_stage_reader_free(r);
}
END_TEST

START_TEST(test_stage_empty_and_no_tmp_left)
{
	struct im_stage_reader *r;
	const uint8_t *p;
	size_t len;
	char cmd[200];

	write_stage(0);
	ck_assert_int_eq(im_stage_open(path, &r, NULL, 0), 0);
	ck_assert_uint_eq(im_stage_count(r), 0);
	ck_assert(!im_stage_next(r, &p, &len));
	im_stage_reader_free(r);
	snprintf(cmd, sizeof(cmd), "test $(ls '%s' | wc -l) = 1", dir);
	ck_assert_msg(system(cmd) == 0, "only the committed file is left");
}
END_TEST

START_TEST(test_stage_uncommitted_leaves_nothing)
{
	struct im_stage_writer *w;
	char cmd[200];

	ck_assert_int_eq(im_stage_writer_new(path, &hdr, &w), 0);
	ck_assert_int_eq(im_stage_writer_add(w, "abc", 3), 0);
	im_stage_writer_free(w); /* a task killed before its commit */
	ck_assert_int_eq(access(path, F_OK), -1);
	snprintf(cmd, sizeof(cmd), "test -z \"$(ls -A '%s')\"", dir);
	ck_assert_msg(system(cmd) == 0, "the temporary file is removed");
}
END_TEST

START_TEST(test_stage_truncated_refused)
{
	char why[128];
	long size;

	write_stage(50);
	size = file_size();
	/* Every cut, down to the magic and below it. */
	for (long cut = size - 1; cut >= 0; cut -= (cut > 100 ? 37 : 1)) {
		ck_assert_int_eq(truncate(path, cut), 0);
		why[0] = '\0';
		ck_assert_int_eq(open_why(why, sizeof(why)), -EINVAL);
		ck_assert_msg(strstr(why, "truncated") ||
				      strstr(why, "checksum"),
			      "cut at %ld: '%s'", cut, why);
	}
}
END_TEST

static void flip(long off)
{
	uint8_t v;
	int fd = open(path, O_RDWR);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &v, 1, off), 1);
	v ^= 0xff;
	ck_assert_int_eq(pwrite(fd, &v, 1, off), 1);
	close(fd);
}

static void poke(long off, uint8_t v)
{
	int fd = open(path, O_WRONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, &v, 1, off), 1);
	close(fd);
}

/* Recompute the checksum after an edit, as a buggy writer would have. */
static void reseal(void)
{
	long size = file_size();
	uint8_t *buf = malloc((size_t)size);
	uint64_t sum;
	int fd = open(path, O_RDWR);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, buf, (size_t)size, 0), size);
	sum = XXH3_64bits(buf, (size_t)size - 8);
	for (int i = 0; i < 8; i++)
		buf[size - 8 + i] = (uint8_t)(sum >> (8 * i));
	ck_assert_int_eq(pwrite(fd, buf + size - 8, 8, size - 8), 8);
	close(fd);
	free(buf);
}

START_TEST(test_stage_corrupt_refused)
{
	char why[128];
	long size;

	write_stage(20);
	size = file_size();
	/* Any flipped byte fails the checksum. */
	for (long off = 0; off < size; off += 7) {
		write_stage(20);
		flip(off);
		why[0] = '\0';
		ck_assert_int_eq(open_why(why, sizeof(why)), -EINVAL);
		ck_assert_msg(why[0] != '\0', "a reason at offset %ld", off);
	}
	/* Wrong magic. */
	write_stage(20);
	poke(0, 'X');
	ck_assert_int_eq(open_why(why, sizeof(why)), -EINVAL);
	ck_assert_str_eq(why, "not an imatch stage file");
	/* Unknown version, even with a good checksum. */
	write_stage(20);
	poke(8, 99);
	reseal();
	ck_assert_int_eq(open_why(why, sizeof(why)), -EINVAL);
	ck_assert_msg(strstr(why, "unsupported version 99 (made by a newer"),
		      "reason: %s", why);
	/* An older version says to make the file again. */
	write_stage(20);
	poke(8, IM_STAGE_VERSION - 1);
	reseal();
	ck_assert_int_eq(open_why(why, sizeof(why)), -EINVAL);
	ck_assert_msg(strstr(why, "made by an older imatch") &&
			      strstr(why, "make it again"),
		      "reason: %s", why);
	/* Unknown kind. */
	write_stage(20);
	poke(12, 200);
	reseal();
	ck_assert_int_eq(open_why(why, sizeof(why)), -EINVAL);
	ck_assert_str_eq(why, "unknown kind 200");
	/* A record length that runs past the end, checksum intact. */
	write_stage(20);
	poke(32 + 3, 0x7f);
	reseal();
	ck_assert_int_eq(open_why(why, sizeof(why)), -EINVAL);
	ck_assert_msg(strncmp(why, "corrupt:", 8) == 0, "'%s'", why);
	/* A count that disagrees with the records. */
	write_stage(20);
	poke(size - (8 + 8 * IM_STAGE_META + 8), 21);
	reseal();
	ck_assert_int_eq(open_why(why, sizeof(why)), -EINVAL);
	ck_assert_msg(strncmp(why, "corrupt:", 8) == 0, "'%s'", why);
}
END_TEST

START_TEST(test_stage_not_a_file)
{
	char why[128];

	ck_assert_int_eq(open_why(why, sizeof(why)), -ENOENT);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	ck_assert_int_eq(open_why(why, sizeof(why)), -EINVAL);
	ck_assert_str_eq(why, "not a regular file");
}
END_TEST

START_TEST(test_stage_bad_header_rejected)
{
	struct im_stage_writer *w = NULL;
	struct im_stage_header h = hdr;

	h.part = 8;
	ck_assert_int_eq(im_stage_writer_new(path, &h, &w), -EINVAL);
	h.part = 0;
	h.kind = 999;
	ck_assert_int_eq(im_stage_writer_new(path, &h, &w), -EINVAL);
	ck_assert_ptr_null(w);
}
END_TEST

START_TEST(test_stage_part_of_even)
{
	unsigned count[7] = {0};

	for (uint64_t i = 0; i < 70000; i++)
		count[im_stage_part_of(XXH3_64bits(&i, sizeof(i)), 7)]++;
	for (unsigned p = 0; p < 7; p++)
		ck_assert_msg(count[p] > 9000 && count[p] < 11000,
			      "partition %u holds %u of 70000", p, count[p]);
	ck_assert_uint_eq(im_stage_part_of(UINT64_MAX, 7), 6);
	ck_assert_uint_eq(im_stage_part_of(0, 7), 0);
}
END_TEST

static void write_bytes(const char *p, const char *s, size_t n)
{
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, s, n), (ssize_t)n);
	close(fd);
}

START_TEST(test_shard_load)
{
	static const char good[] = "a\0b/c d\0x/y/z\0";
	struct im_shard sh;
	char why[128];

	write_bytes(path, good, sizeof(good) - 1);
	ck_assert_int_eq(im_shard_load(path, &sh, why, sizeof(why)), 0);
	ck_assert_uint_eq(sh.n, 3);
	ck_assert_str_eq(sh.path[1], "b/c d");
	ck_assert_str_eq(sh.path[2], "x/y/z");
	im_shard_release(&sh);

	write_bytes(path, "", 0);
	ck_assert_int_eq(im_shard_load(path, &sh, why, sizeof(why)), 0);
	ck_assert_uint_eq(sh.n, 0);
	im_shard_release(&sh);

	static const struct {
		const char *s;
		size_t n;
	} bad[] = {
#define L(x) {x, sizeof(x)}
		L("a\0/etc/passwd"), L("a/../b"), L("./a"),
		L("a//b"),	     L("a/"),	  L("a\0\0b"),
#undef L
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		write_bytes(path, bad[i].s, bad[i].n);
		ck_assert_msg(im_shard_load(path, &sh, why, sizeof(why)) ==
				      -EINVAL,
			      "list %zu refused", i);
	}
	write_bytes(path, "abc", 3);
	ck_assert_int_eq(im_shard_load(path, &sh, why, sizeof(why)), -EINVAL);
	ck_assert_str_eq(why, "does not end with a NUL byte");
	/* A path given twice would be two documents linked to themselves;
	 * the first repeat in list order is named. */
	static const char twice[] = "b\0a/x\0c\0a/x\0b\0";
	write_bytes(path, twice, sizeof(twice) - 1);
	ck_assert_int_eq(im_shard_load(path, &sh, why, sizeof(why)), -EINVAL);
	ck_assert_str_eq(why, "paths 2 and 4 are the same");
	static const char prefixes[] = "a\0a/b\0ab\0b\0";
	write_bytes(path, prefixes, sizeof(prefixes) - 1);
	ck_assert_int_eq(im_shard_load(path, &sh, why, sizeof(why)), 0);
	ck_assert_uint_eq(sh.n, 4);
	im_shard_release(&sh);
}
END_TEST

START_TEST(test_tree_no_symlink_dirs)
{
	char p[200];
	const char *name;
	struct im_tree t;
	int root, fd;

	snprintf(p, sizeof(p), "%s/a", dir);
	ck_assert_int_eq(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/a/b", dir);
	ck_assert_int_eq(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/link", dir);
	ck_assert_int_eq(symlink("a", p), 0);
	root = open(dir, O_RDONLY | O_DIRECTORY);
	ck_assert_int_ge(root, 0);
	im_tree_init(&t, root);
	ck_assert_int_eq(im_tree_dir(&t, "top", &fd, &name), 0);
	ck_assert_int_eq(fd, root);
	ck_assert_str_eq(name, "top");
	ck_assert_int_eq(im_tree_dir(&t, "a/b/f", &fd, &name), 0);
	ck_assert_str_eq(name, "f");
	ck_assert_int_eq(im_tree_dir(&t, "a/b/g", &fd, &name), 0);
	ck_assert_int_eq(im_tree_dir(&t, "link/b/f", &fd, &name), -ELOOP);
	ck_assert_int_eq(im_tree_dir(&t, "gone/f", &fd, &name), -ENOENT);
	ck_assert_int_eq(im_tree_dir(&t, "a/f", &fd, &name), 0);
	im_tree_release(&t);
	close(root);
}
END_TEST

START_TEST(test_records_doc_round_trip)
{
	struct im_stage_doc in = {.path = "a/b\tc",
				  .path_len = 5,
				  .size = 1234,
				  .mtime_ns = -5,
				  .ino = 77,
				  .ctime_fold = 0x89abcdefu};
	struct im_stage_buf b = {0};
	struct im_stage_doc out;

	in.d.status = IM_DOC_SIGNED;
	in.d.ncoords = 11;
	in.d.exact_valid = 1;
	in.d.valid = 0x405;
	in.d.unique_terms = 99;
	in.d.numbers = UINT64_C(0x0123456789abcdef);
	in.d.size = 1234; /* the decoder fills them from the record's */
	in.d.mtime_ns = -5;
	in.d.sketch.n = 77;
	in.d.sketch.v[5] = 0x5a;
	for (unsigned i = 0; i < 16; i++)
		in.d.exact[i] = (uint8_t)i;
	for (unsigned k = 0; k < 11; k++)
		memset(in.d.sig[k].b, (in.d.valid >> k & 1) ? 0x10 + k : 0,
		       IM_SIG_LEN);
	im_stage_doc_encode(&b, &in);
	ck_assert(!b.oom);
	ck_assert_int_eq(im_stage_doc_decode(b.p, b.len, &out), 0);
	ck_assert_uint_eq(out.path_len, 5);
	ck_assert(!memcmp(out.path, "a/b\tc", 5));
	ck_assert_uint_eq(out.size, 1234);
	ck_assert_int_eq(out.mtime_ns, -5);
	ck_assert_uint_eq(out.ino, 77);
	ck_assert_uint_eq(out.ctime_fold, 0x89abcdefu);
	ck_assert_msg(!memcmp(&out.d, &in.d, sizeof(in.d)),
		      "the signatures come back at their coordinates");
	/* Every shorter payload is refused, never read past. */
	for (size_t cut = 0; cut < b.len - 5; cut++)
		ck_assert_msg(im_stage_doc_decode(b.p, cut, &out) == -EINVAL,
			      "cut at %zu refused", cut);
	/* A valid bit beyond ncoords is refused (ncoords after size, mtime,
	 * inode, ctime and status). */
	b.p[28 + 1] = 2;
	ck_assert_int_eq(im_stage_doc_decode(b.p, b.len, &out), -EINVAL);
	im_stage_buf_release(&b);
}
END_TEST

START_TEST(test_records_key_round_trip)
{
	struct im_cand_key keys[IM_MAX_KEYS];
	struct im_stage_key k, back, other;
	struct im_stage_buf b = {0};
	struct im_doc_sigs d = {.status = IM_DOC_SIGNED,
				.ncoords = 3,
				.exact_valid = 1,
				.valid = 0x5};
	unsigned n;

	d.sketch.n = 40;
	for (unsigned i = 0; i < IM_SKETCH_BYTES; i++)
		d.sketch.v[i] = (uint8_t)(i * 7);
	d.exact[3] = 9;
	d.sig[2].b[0] = 0xee;
	n = im_doc_keys(&d, keys);
	ck_assert_uint_eq(n, 1 + 2 + IM_SKETCH_BANDS);
	im_stage_key_make(&k, &keys[2], 4, 9, "x/y");
	im_stage_key_encode(&b, &k);
	ck_assert(!b.oom);
	ck_assert_int_eq(im_stage_key_decode(b.p, b.len, &back), 0);
	ck_assert_int_eq(im_stage_key_cmp(&back, &k), 0);
	ck_assert(im_stage_key_same(&back, &k));
	ck_assert_uint_eq(back.shard, 4);
	ck_assert_uint_eq(back.index, 9);
	ck_assert_uint_eq(back.key.b[0], 0xee);
	ck_assert_int_eq(back.path_len, 3);
	ck_assert_int_eq(memcmp(back.path, "x/y", 3), 0);
	for (size_t cut = 0; cut < b.len - 3; cut++)
		ck_assert_msg(im_stage_key_decode(b.p, cut, &back) == -EINVAL,
			      "cut at %zu refused", cut);
	/* Holders of one key sort by path, not by shard or index. */
	im_stage_key_make(&other, &keys[2], 0, 0, "x/y/z");
	ck_assert(im_stage_key_same(&k, &other));
	ck_assert_int_lt(im_stage_key_cmp(&k, &other), 0);
	im_stage_key_make(&other, &keys[2], 0, 0, "x/a");
	ck_assert_int_gt(im_stage_key_cmp(&k, &other), 0);
	im_stage_key_make(&other, &keys[1], 0, 0, "x/y");
	ck_assert(!im_stage_key_same(&k, &other));
	im_stage_buf_release(&b);
}
END_TEST

START_TEST(test_records_cluster_sorted_members)
{
	struct im_stage_buf b = {0};
	const uint32_t good[] = {3, 8, 20}, bad[] = {3, 3};
	const uint8_t *ids;
	struct im_sig name = {{1, 2, 3}}, back;
	uint32_t n;

	im_stage_cluster_encode(&b, &name, good, 3);
	ck_assert_int_eq(im_stage_cluster_decode(b.p, b.len, &back, &ids, &n),
			 0);
	ck_assert_uint_eq(n, 3);
	ck_assert_uint_eq(im_stage_cluster_member(ids, 2), 20);
	ck_assert_int_eq(im_sig_cmp(&name, &back), 0);
	b.len = 0;
	im_stage_cluster_encode(&b, &name, bad, 2);
	ck_assert_int_eq(im_stage_cluster_decode(b.p, b.len, &back, &ids, &n),
			 -EINVAL);
	b.len = 0;
	im_stage_cluster_encode(&b, &name, good, 1);
	ck_assert_int_eq(im_stage_cluster_decode(b.p, b.len, &back, &ids, &n),
			 -EINVAL);
	im_stage_buf_release(&b);
}
END_TEST

static int u32_cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
	uint32_t x, y;

	ck_assert_uint_eq(al, 4);
	ck_assert_uint_eq(bl, 4);
	memcpy(&x, a, 4);
	memcpy(&y, b, 4);
	return x < y ? -1 : x > y;
}

/* Runs of u32 (host order: the test only merges what it wrote). */
static struct im_stage_reader *u32_run(const char *p, const uint32_t *v,
				       size_t n)
{
	struct im_stage_writer *w;
	struct im_stage_reader *r;

	ck_assert_int_eq(im_stage_writer_new(p, &hdr, &w), 0);
	for (size_t i = 0; i < n; i++)
		ck_assert_int_eq(im_stage_writer_add(w, &v[i], 4), 0);
	ck_assert_int_eq(im_stage_writer_commit(w), 0);
	im_stage_writer_free(w);
	ck_assert_int_eq(im_stage_open(p, &r, NULL, 0), 0);
	return r;
}

START_TEST(test_stage_merge_runs)
{
	static const uint32_t a[] = {1, 4, 4, 9}, b[] = {2, 4}, c[] = {0};
	struct im_stage_reader *r[4];
	struct im_stage_merge *m;
	const uint8_t *p;
	size_t len, run;
	uint32_t prev = 0, v, got = 0;
	char pa[160];

	snprintf(pa, sizeof(pa), "%s/a", dir);
	r[0] = u32_run(pa, a, 4);
	snprintf(pa, sizeof(pa), "%s/b", dir);
	r[1] = u32_run(pa, b, 2);
	snprintf(pa, sizeof(pa), "%s/c", dir);
	r[2] = u32_run(pa, c, 1);
	snprintf(pa, sizeof(pa), "%s/d", dir);
	r[3] = u32_run(pa, NULL, 0);
	ck_assert_int_eq(im_stage_merge_new(r, 4, u32_cmp, &m), 0);
	while (im_stage_merge_next(m, &p, &len, &run) > 0) {
		memcpy(&v, p, 4);
		ck_assert_msg(v >= prev, "%u after %u", v, prev);
		/* Ties go to the run given first. */
		if (v == 4 && got == 3)
			ck_assert_uint_eq(run, 0);
		prev = v;
		got++;
	}
	ck_assert_uint_eq(got, 7);
	im_stage_merge_free(m);
	for (int i = 0; i < 4; i++)
		im_stage_reader_free(r[i]);

	/* A run out of order is caught. */
	static const uint32_t bad[] = {5, 3};
	snprintf(pa, sizeof(pa), "%s/e", dir);
	r[0] = u32_run(pa, bad, 2);
	ck_assert_int_eq(im_stage_merge_new(r, 1, u32_cmp, &m), 0);
	ck_assert_int_eq(im_stage_merge_next(m, &p, &len, &run), -EINVAL);
	im_stage_merge_free(m);
	im_stage_reader_free(r[0]);
}
END_TEST

/* Resident pages of file mappings in this process, in KiB. */
static long rss_file_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kib = -1;

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "RssFile: %ld", &kib) == 1)
			break;
	fclose(f);
	ck_assert_int_ge(kib, 0);
	return kib;
}

/* The components stage streams files far larger than what it may hold:
 * neither the check on open nor a pass over the records may leave the
 * file resident. */
START_TEST(test_stage_streaming_stays_small)
{
	/* 28,000 records of 158 bytes on average: 4.4 MB. */
	unsigned n = 28000, i = 0;
	struct im_stage_reader *r;
	const uint8_t *p;
	uint64_t sum = 0;
	size_t len;
	long before, opened, passed;

	write_stage(n);
	ck_assert_int_gt(file_size(), 4 << 20);
	before = rss_file_kib();
	ck_assert_int_eq(im_stage_open(path, &r, NULL, 0), 0);
	opened = rss_file_kib();
	while (im_stage_next(r, &p, &len)) {
		sum += im_stage_get_u64(
			&(struct im_stage_cur){p, p + len, false});
		i++;
	}
	passed = rss_file_kib();
	ck_assert_uint_eq(i, n);
	ck_assert_uint_eq(sum, (uint64_t)n * 1000 + (uint64_t)n * (n - 1) / 2);
	ck_assert_msg(opened - before < 2560,
		      "open left %ld KiB of a %ld KiB file resident",
		      opened - before, file_size() / 1024);
	ck_assert_msg(passed - before < 2560,
		      "a pass left %ld KiB of a %ld KiB file resident",
		      passed - before, file_size() / 1024);
	im_stage_reader_free(r);
}
END_TEST

/* A links task reads members' records at random: im_stage_read() hands
 * out the bytes the mapping holds without making the file resident, and
 * refuses what is not a record or a file replaced since. */
START_TEST(test_stage_read_random_stays_small)
{
	unsigned n = 28000, i = 0;
	struct im_stage_reader *r;
	const uint8_t **at = malloc(n * sizeof(*at));
	size_t *lens = malloc(n * sizeof(*lens)), len;
	uint8_t buf[512];
	const uint8_t *p;
	long before;

	ck_assert(at && lens);
	write_stage(n);
	ck_assert_int_eq(im_stage_open(path, &r, NULL, 0), 0);
	while (im_stage_next(r, &at[i], &lens[i]))
		i++;
	ck_assert_uint_eq(i, n);
	im_stage_drop(r);
	before = rss_file_kib();
	/* Every 7th record, across the file: each touches another page. */
	for (i = 0; i < n; i += 7) {
		struct im_stage_cur c;

		memset(buf, 0xee, sizeof(buf));
		ck_assert_int_eq(im_stage_read(r, at[i], lens[i], buf), 0);
		c = im_stage_cur(buf, lens[i]);
		ck_assert_uint_eq(im_stage_get_u64(&c), 1000 + i);
		ck_assert_uint_eq(im_stage_left(&c), i % 300);
		if (i % 300)
			ck_assert_uint_eq(im_stage_get(&c, 1)[0], (uint8_t)i);
	}
	ck_assert_msg(rss_file_kib() - before < 512,
		      "random reads left %ld KiB of a %ld KiB file resident",
		      rss_file_kib() - before, file_size() / 1024);
	/* Past the last record: the trailer is not a record. */
	ck_assert_int_eq(im_stage_read(r, at[n - 1], lens[n - 1] + 1, buf),
			 -EINVAL);
	ck_assert_int_eq(im_stage_read(r, at[0] - 40, 8, buf), -EINVAL);
	im_stage_reader_free(r);

	/* Opened, then another file renamed over the path. */
	write_stage(n);
	ck_assert_int_eq(im_stage_open(path, &r, NULL, 0), 0);
	ck_assert(im_stage_next(r, &p, &len));
	write_stage(10);
	ck_assert_int_eq(im_stage_read(r, p, len, buf), -ESTALE);
	im_stage_reader_free(r);
	free(at);
	free(lens);
}
END_TEST

static Suite *stage_suite(void)
{
	Suite *s = suite_create("stage");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_stage_round_trip);
	tcase_add_test(tc, test_stage_read_only_the_file_opened);
	tcase_add_test(tc, test_stage_empty_and_no_tmp_left);
	tcase_add_test(tc, test_stage_uncommitted_leaves_nothing);
	tcase_add_test(tc, test_stage_truncated_refused);
	tcase_add_test(tc, test_stage_corrupt_refused);
	tcase_add_test(tc, test_stage_not_a_file);
	tcase_add_test(tc, test_stage_bad_header_rejected);
	tcase_add_test(tc, test_stage_part_of_even);
	tcase_add_test(tc, test_shard_load);
	tcase_add_test(tc, test_tree_no_symlink_dirs);
	tcase_add_test(tc, test_records_doc_round_trip);
	tcase_add_test(tc, test_records_key_round_trip);
	tcase_add_test(tc, test_records_cluster_sorted_members);
	tcase_add_test(tc, test_stage_merge_runs);
	tcase_add_test(tc, test_stage_streaming_stays_small);
	tcase_add_test(tc, test_stage_read_random_stays_small);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(stage_suite());

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
