/*
 * Duplicate directories over an index built by hand from exact copies: a
 * copied folder is one group at its top, a partial copy or a folder with one
 * unique document is none, nesting is reported once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "dupdirs.h"

static struct im_index *idx;

/* A document whose bytes hash to @p h (0: no exact hash, in no cluster). */
static void put(const char *path, unsigned h)
{
	struct im_doc_sigs d;

	memset(&d, 0, sizeof(d));
	d.status = IM_DOC_REJECTED;
	d.ncoords = 1;
	d.unique_terms = 3;
	if (h) {
		d.exact_valid = 1;
		memset(d.exact, 0x5a, sizeof(d.exact));
		memcpy(d.exact, &h, sizeof(h));
	}
	ck_assert_msg(im_index_put(idx, path, &d) == 0, "put %s", path);
}

/* The groups as "docs:a|b;docs:c|d". */
static const char *groups(bool exact_only)
{
	static char buf[1024];
	struct im_dupdirs d;

	ck_assert_int_eq(im_dupdirs_from_index(idx, exact_only, &d), 0);
	buf[0] = '\0';
	for (size_t i = 0; i < d.n; i++) {
		snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf),
			 "%s%zu:", i ? ";" : "", d.v[i].docs);
		for (size_t j = 0; j < d.v[i].n; j++)
			snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf),
				 "%s%s", j ? "|" : "", d.v[i].dirs[j]);
	}
	im_dupdirs_release(&d);
	return buf;
}

static void setup(void)
{
	ck_assert_int_eq(im_index_new(&idx), 0);
}

static void teardown(void)
{
	im_index_free(idx);
}

START_TEST(test_dupdirs_copied_folder_is_one_group)
{
	put("proj/a", 1);
	put("proj/sub/b", 2);
	put("bak/2024/proj/a", 1);
	put("bak/2024/proj/sub/b", 2);
	put("old/copy/a", 1);
	put("old/copy/sub/b", 2);
	put("old/notes", 3); /* old/ holds more than the copy */
	put("misc/notes", 3);
	ck_assert_str_eq(groups(true), "2:bak|old/copy|proj");
}
END_TEST

START_TEST(test_dupdirs_partial_or_unique_is_no_duplicate)
{
	put("a/x", 1);
	put("a/y", 2);
	put("b/x", 1); /* b has only part of a */
	put("c/x", 1);
	put("c/y", 2);
	put("c/z", 0); /* a document with no copy anywhere */
	ck_assert_str_eq(groups(true), "");
	put("d/x", 1);
	put("d/y", 2);
	ck_assert_str_eq(groups(true), "2:a|d");
}
END_TEST

START_TEST(test_dupdirs_same_multiset_not_same_links)
{
	/* e and f hold one copy each of 1 and 2, g two of 1 and none of 2: the
	 * counts agree with e only if the multiset is compared, not the set. */
	put("e/x", 1);
	put("e/y", 2);
	put("f/x", 1);
	put("f/y", 2);
	put("g/x", 1);
	put("g/x2", 1);
	put("h/y", 2);
	ck_assert_str_eq(groups(true), "2:e|f");
}
END_TEST

START_TEST(test_dupdirs_inner_groups_left_out)
{
	/* p and q are copies; so are p/in, q/in and r/in, but p/in and q/in
	 * are inside reported directories and r/in alone is no group. s/in
	 * and t are copies though s is not one of anything. */
	put("p/in/x", 1);
	put("p/y", 2);
	put("q/in/x", 1);
	put("q/y", 2);
	put("r/in/x", 1);
	put("r/other", 4);
	put("s/other", 4);
	put("s/in/z", 5);
	put("t/z", 5);
	ck_assert_str_eq(groups(true), "2:p|q;1:s/in|t");
}
END_TEST

static Suite *dupdirs_suite(void)
{
	Suite *s = suite_create("dupdirs");
	TCase *tc = tcase_create("small");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_dupdirs_copied_folder_is_one_group);
	tcase_add_test(tc, test_dupdirs_partial_or_unique_is_no_duplicate);
	tcase_add_test(tc, test_dupdirs_same_multiset_not_same_links);
	tcase_add_test(tc, test_dupdirs_inner_groups_left_out);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(dupdirs_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
