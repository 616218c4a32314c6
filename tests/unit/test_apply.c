/*
 * Plan lines: parsing what `imatch dedupe` writes (every field, the
 * surrogateescape bytes, fields in any order, unknown fields) and refusing
 * what it never writes; telling shared extents on a real filesystem.
 * Acting on real files is tested by tests/cli/test_dedupe.py.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/fiemap.h>
#include <linux/fs.h>
#include <sys/ioctl.h>

#include "unit.h"
#include "apply.h"

#define H32 "00112233445566778899aabbccddeeff"
/* The keeper's size, mtime and hash. */
#define KEEPER_TAIL                                                            \
	"\"keeper_size\": 12, \"keeper_mtime_ns\": -5, \"keeper_hash\": "      \
	"\"xxh128:" H32 "\""
#define LINE_TAIL                                                              \
	"\"size\": 12, \"mtime_ns\": 1600000000123456789, \"hash\": "          \
	"\"xxh128:" H32 "\", " KEEPER_TAIL

static int parse(const char *s, struct im_plan_line *l, char *why)
{
	return im_plan_line_parse(s, strlen(s), l, why, 160);
}

START_TEST(test_apply_parses_a_dedupe_line)
{
	struct im_plan_line l;
	char why[160];
	const char *s =
		"{\"action\": \"trash\", \"kind\": \"near\", \"similarity\": "
		"0.9312, \"path\": \"/r/a\\u00e9\\udcff\\\"b\\n\", "
		"\"keeper\": \"/r/k\", " LINE_TAIL ", \"root\": \"/r\", "
		"\"cluster\": \"ab\", \"trash\": \"/t\", \"future\": "
		"{\"x\": [1, true, null, \"s\"]}}\n";

	ck_assert_int_eq(parse(s, &l, why), 0);
	ck_assert_int_eq(l.action, IM_ACT_TRASH);
	ck_assert(!l.exact);
	ck_assert_double_eq_tol(l.similarity, 0.9312, 1e-9);
	ck_assert_str_eq(l.file.path, "/r/a\xc3\xa9\xff\"b\n");
	ck_assert_str_eq(l.keeper.path, "/r/k");
	ck_assert_str_eq(l.root, "/r");
	ck_assert_str_eq(l.trash, "/t");
	ck_assert_uint_eq(l.file.size, 12);
	ck_assert_int_eq(l.file.mtime_ns, 1600000000123456789LL);
	ck_assert_int_eq(l.keeper.mtime_ns, -5);
	ck_assert_uint_eq(l.file.hash[0], 0x00);
	ck_assert_uint_eq(l.file.hash[15], 0xff);
	ck_assert_uint_eq(l.keeper.hash[1], 0x11);
	im_plan_line_release(&l);
}
END_TEST

START_TEST(test_apply_refuses_what_dedupe_never_writes)
{
	static const char *const bad[] = {
		"",
		"[]",
		"{}",
		"{\"action\": \"remove\"}",
		/* missing keeper */
		"{\"action\": \"remove\", \"kind\": \"exact\", \"path\": "
		"\"/a\", " LINE_TAIL "}",
		/* trash without root and trash */
		"{\"action\": \"trash\", \"kind\": \"exact\", \"path\": "
		"\"/a\", "
		"\"keeper\": \"/b\", " LINE_TAIL "}",
		"{\"action\": \"shred\", \"kind\": \"exact\", \"path\": "
		"\"/a\", "
		"\"keeper\": \"/b\", " LINE_TAIL "}",
		"{\"action\": \"remove\", \"kind\": \"exact\", \"path\": "
		"\"/a\\ud800\", \"keeper\": \"/b\", " LINE_TAIL "}",
		"{\"action\": \"remove\", \"kind\": \"exact\", \"path\": "
		"\"/a\\u0000\", \"keeper\": \"/b\", " LINE_TAIL "}",
		"{\"action\": \"remove\", \"kind\": \"exact\", \"path\": "
		"\"/a\", \"keeper\": \"/b\", \"size\": -1, \"mtime_ns\": 1, "
		"\"hash\": \"xxh128:" H32 "\", " KEEPER_TAIL
		", \"root\": \"/\"}",
		"{\"action\": \"remove\", \"kind\": \"exact\", \"path\": "
		"\"/a\", \"keeper\": \"/b\", \"size\": 12, \"mtime_ns\": 1, "
		"\"hash\": \"md5:00\", " KEEPER_TAIL ", \"root\": \"/\"}",
		"{\"action\": \"remove\", \"kind\": \"exact\", \"path\": "
		"\"/a\", "
		"\"keeper\": \"/b\", " LINE_TAIL "} trailing",
		"{\"action\": \"remove\", \"kind\": \"exact\", \"path\": "
		"\"/a\", "
		"\"keeper\": \"/b\", " LINE_TAIL,
		/* no root: the paths could not be checked against it */
		"{\"action\": \"remove\", \"kind\": \"exact\", \"path\": "
		"\"/r/a\", \"keeper\": \"/r/b\", " LINE_TAIL "}",
	};
	struct im_plan_line l;
	char why[160];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = '\0';
		ck_assert_msg(parse(bad[i], &l, why) == -EINVAL, "accepted: %s",
			      bad[i]);
		ck_assert_msg(why[0], "no reason for: %s", bad[i]);
		ck_assert_ptr_null(l.file.path);
	}
}
END_TEST

/* Found by tests/fuzz/fuzz_planline: the first of two values of a string
 * field leaked, and the last one was acted on. */
START_TEST(test_apply_refuses_a_field_given_twice)
{
	static const char *const twice[] = {
		"{\"action\": \"remove\", \"kind\": \"exact\", \"path\": "
		"\"/r/a\", \"keeper\": \"/r/b\", " LINE_TAIL ", \"root\": "
		"\"/r\", \"path\": \"/r/c\"}",
		"{\"action\": \"remove\", \"kind\": \"exact\", \"keeper\": "
		"\"/r/a\", \"keeper\": \"/r/b\", \"path\": \"/r/c\", " LINE_TAIL
		", \"root\": \"/r\"}",
		"{\"action\": \"remove\", \"action\": \"trash\", \"kind\": "
		"\"exact\", \"path\": \"/r/a\", \"keeper\": "
		"\"/r/b\", " LINE_TAIL ", \"root\": \"/r\", \"trash\": \"/t\"}",
		"{\"similarity\": 1, \"action\": \"remove\", \"kind\": "
		"\"exact\", "
		"\"path\": \"/r/a\", \"keeper\": \"/r/b\", " LINE_TAIL
		", \"root\": \"/r\", \"similarity\": 0.5}",
	};
	struct im_plan_line l;
	char why[160];

	for (size_t i = 0; i < sizeof(twice) / sizeof(twice[0]); i++) {
		why[0] = '\0';
		ck_assert_msg(parse(twice[i], &l, why) == -EINVAL,
			      "accepted: %s", twice[i]);
		ck_assert_msg(strstr(why, "twice"), "%s: %s", twice[i], why);
		ck_assert_ptr_null(l.file.path);
	}
}
END_TEST

START_TEST(test_apply_skips_non_canonical_paths_without_touching)
{
	/* Another spelling of a path can name the keeper itself. */
	static const char *const paths[] = {"/tmp/../etc/passwd",
					    "/etc/./passwd", "/etc//passwd"};

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		struct im_plan_line l;
		struct im_apply_result r;
		char why[160], s[512];

		snprintf(s, sizeof(s),
			 "{\"action\": \"remove\", \"kind\": \"exact\", "
			 "\"path\": \"%s\", \"keeper\": \"/etc/passwd\", "
			 LINE_TAIL ", \"root\": \"/\"}",
			 paths[i]);
		ck_assert_int_eq(parse(s, &l, why), 0);
		ck_assert_int_eq(im_apply_line(&l, false, &r), 0);
		ck_assert_int_eq(r.outcome, IM_APPLY_SKIPPED);
		ck_assert_msg(!strcmp(r.why, "the file's path is not a "
					     "canonical absolute path"),
			      "%s: %s", paths[i], r.why);
		im_plan_line_release(&l);
	}
}
END_TEST

START_TEST(test_apply_skips_paths_outside_the_root)
{
	static const struct {
		const char *path, *keeper, *root, *why;
	} cases[] = {
		{"/tmp/qa/outside/b-out", "/tmp/qa/s3/a", "/tmp/qa/s3",
		 "the file is not under the plan's root"},
		/* a string prefix, not a component prefix */
		{"/tmp/qa/s3x/b", "/tmp/qa/s3/a", "/tmp/qa/s3",
		 "the file is not under the plan's root"},
		{"/tmp/qa/s3", "/tmp/qa/s3/a", "/tmp/qa/s3",
		 "the file is not under the plan's root"},
		{"/tmp/qa/s3/b", "/tmp/qa/s3x/a", "/tmp/qa/s3",
		 "the keeper is not under the plan's root"},
		{"/tmp/qa/s3/b", "/etc/passwd", "/tmp/qa/s3",
		 "the keeper is not under the plan's root"},
		{"/tmp/qa/s3/b", "/tmp/qa/s3/a", "/tmp/qa/s3/",
		 "the line's root is not a canonical absolute path"},
		{"/tmp/qa/s3/b", "/tmp/qa/s3/a", "tmp/qa/s3",
		 "the line's root is not a canonical absolute path"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct im_plan_line l;
		struct im_apply_result r;
		char why[160], s[1024];

		snprintf(s, sizeof(s),
			 "{\"action\": \"remove\", \"kind\": \"exact\", "
			 "\"path\": \"%s\", \"keeper\": \"%s\", "
			 "\"root\": \"%s\", " LINE_TAIL "}",
			 cases[i].path, cases[i].keeper, cases[i].root);
		ck_assert_msg(parse(s, &l, why) == 0, "%s: %s", s, why);
		ck_assert_int_eq(im_apply_line(&l, false, &r), 0);
		ck_assert_int_eq(r.outcome, IM_APPLY_SKIPPED);
		ck_assert_msg(!strcmp(r.why, cases[i].why), "%s: %s", s, r.why);
		im_plan_line_release(&l);
	}
}
END_TEST

/* A file of @p blocks 4 KiB blocks in the temporary directory @p dir, data
 * in the even ones and holes in the odd ones (where the filesystem keeps
 * holes), synced so that its extents are allocated. @return an fd. */
static int holey_file(const char *dir, const char *name, unsigned blocks,
		      unsigned char fill)
{
	char path[4096], block[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	memset(block, fill, sizeof(block));
	for (unsigned i = 0; i < blocks; i += 2)
		ck_assert_int_eq(pwrite(fd, block, sizeof(block),
					(off_t)i * sizeof(block)),
				 (ssize_t)sizeof(block));
	ck_assert_int_eq(ftruncate(fd, (off_t)blocks * sizeof(block)), 0);
	ck_assert_int_eq(fsync(fd), 0);
	return fd;
}

/* Whether the filesystem of @p fd answers FIEMAP (ext4, btrfs, XFS do). */
static bool fiemap_works(int fd)
{
	struct fiemap fm;

	memset(&fm, 0, sizeof(fm));
	fm.fm_length = FIEMAP_MAX_OFFSET;
	return ioctl(fd, FS_IOC_FIEMAP, &fm) == 0;
}

/*
 * im_shares_extents() on a real filesystem: a file shares its extents with
 * itself (a second fd), holes included; a copy of the same bytes does not;
 * nothing does at size 0. Where the filesystem has no FIEMAP every answer
 * is false, and only that is checked.
 */
START_TEST(test_apply_tells_shared_extents)
{
	char dir[] = "/tmp/imatch-extents-XXXXXX";
	char path[4096];
	int a, again, copy;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	a = holey_file(dir, "a", 33, 'x');
	copy = holey_file(dir, "copy", 33, 'x');
	snprintf(path, sizeof(path), "%s/a", dir);
	again = open(path, O_RDONLY);
	ck_assert_int_ge(again, 0);
	if (fiemap_works(a)) {
		ck_assert(im_shares_extents(a, again, 33 * 4096));
		ck_assert(im_shares_extents(again, a, 33 * 4096));
		ck_assert(im_shares_extents(a, again, 5 * 4096));
		ck_assert(!im_shares_extents(a, copy, 33 * 4096));
		ck_assert(!im_shares_extents(copy, a, 33 * 4096));
	}
	ck_assert(!im_shares_extents(a, again, 0));
	ck_assert(!im_shares_extents(a, copy, 33 * 4096));
	close(a);
	close(again);
	close(copy);
	snprintf(path, sizeof(path), "%s/a", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/copy", dir);
	unlink(path);
	rmdir(dir);
}
END_TEST

static Suite *apply_suite(void)
{
	Suite *s = suite_create("apply");
	TCase *tc = tcase_create("lines");

	tcase_add_test(tc, test_apply_parses_a_dedupe_line);
	tcase_add_test(tc, test_apply_refuses_what_dedupe_never_writes);
	tcase_add_test(tc, test_apply_refuses_a_field_given_twice);
	tcase_add_test(tc,
		       test_apply_skips_non_canonical_paths_without_touching);
	tcase_add_test(tc, test_apply_skips_paths_outside_the_root);
	tcase_add_test(tc, test_apply_tells_shared_extents);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(apply_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
