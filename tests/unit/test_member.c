/**
 * @file test_member.c
 * <member> names (fs/member.h): encoding, decoding, and the shortening that
 * keeps every name at most 255 bytes, deterministic and unique.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "member.h"

static char *repeat(char c, size_t n)
{
	char *s = malloc(n + 1);

	memset(s, c, n);
	s[n] = 0;
	return s;
}

START_TEST(test_member_plain_round_trip)
{
	const char *paths[] = {"a.txt", "dir/sub/file name.txt", "50%/x",
			       "%2F/%25", "ü/é.txt"};

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		char *name = member_name(paths[i]);
		ck_assert_msg(!strchr(name, '/'), "%s: '/' in %s", paths[i],
			      name);
		ck_assert(!member_is_short(name));
		char *back = member_decode(name);
		ck_assert_str_eq(back, paths[i]);
		free(name);
		free(back);
	}
	char *n = member_name("dir/50%");
	ck_assert_str_eq(n, "dir%2F50%25");
	free(n);
}
END_TEST

START_TEST(test_member_decode_refuses_non_canonical)
{
	const char *bad[] = {"%2Fabs", "a%2F%2Fb", "a%2F", "%zz", "%2", ""};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(member_decode(bad[i]) == NULL, "%s decoded",
			      bad[i]);
}
END_TEST

START_TEST(test_member_long_names_shortened)
{
	char *dir = repeat('d', 200), *base = repeat('n', 120);
	char path[400], other[400];

	snprintf(path, sizeof(path), "%s/%s-report.txt", dir, base);
	snprintf(other, sizeof(other), "%s/%s-report.txt", base, dir);
	char *a = member_name(path), *a2 = member_name(path);
	char *b = member_name(other);
	ck_assert_uint_le(strlen(a), MEMBER_NAME_MAX);
	ck_assert_uint_le(strlen(b), MEMBER_NAME_MAX);
	ck_assert(member_is_short(a));
	ck_assert_str_eq(a, a2); /* deterministic */
	ck_assert_str_ne(a, b);	 /* the hash tells them apart */
	ck_assert_msg(strlen(a) > 16 &&
			      !strcmp(a + strlen(a) - 11, "-report.txt"),
		      "the file name is kept: %s", a);
	char *back = member_decode(a);
	ck_assert_msg(!back || strcmp(back, path),
		      "a short name must not decode to the path");
	free(back);
	free(a);
	free(a2);
	free(b);
	free(dir);
	free(base);
}
END_TEST

/* The cut never splits an escape or a UTF-8 character. */
START_TEST(test_member_cut_keeps_escapes_and_utf8)
{
	for (size_t pad = 0; pad < 8; pad++) {
		char path[1200];
		size_t n = 0;
		for (size_t i = 0; i < pad; i++)
			path[n++] = 'p';
		for (int i = 0; i < 100; i++) {
			memcpy(path + n, "é/%", 4); /* 2 bytes, '/', '%' */
			n += 4;
		}
		path[n] = 0;
		char *name = member_name(path);
		ck_assert_uint_le(strlen(name), MEMBER_NAME_MAX);
		const char *tail = strchr(name + 2, '~') + 1;
		ck_assert_msg((tail[0] & 0xc0) != 0x80,
			      "pad %zu: the tail starts inside a character",
			      pad);
		ck_assert_msg(tail[0] != '2' && tail[0] != 'F' &&
				      tail[0] != '5',
			      "pad %zu: the tail starts inside an escape: %s",
			      pad, tail);
		free(name);
	}
}
END_TEST

static Suite *member_suite(void)
{
	Suite *s = suite_create("member");
	TCase *tc = tcase_create("names");

	tcase_add_test(tc, test_member_plain_round_trip);
	tcase_add_test(tc, test_member_decode_refuses_non_canonical);
	tcase_add_test(tc, test_member_long_names_shortened);
	tcase_add_test(tc, test_member_cut_keeps_escapes_and_utf8);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(member_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
