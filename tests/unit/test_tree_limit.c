/**
 * @file test_tree_limit.c
 * fs/tree.c built with HASH_SLOT_BITS=11 (tests/meson.build): past its
 * 2^11 slots tree_add() says -ENOMEM and changes nothing, and every node
 * added before stays found by name. The table grows by half its size, so
 * it passes the limit without ever being exactly at it: the check must
 * not depend on the table being full.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "unit.h"
#include "tree.h"

#define LIMIT (1u << 11)

START_TEST(test_tree_limit_refuses_past_the_slots)
{
	struct tree *t;
	struct node *root, *n, *dirs[8];
	char name[32];
	unsigned added = 0, refused = 0;

	ck_assert_int_eq(tree_new(0, 0, &t), 0);
	tree_wrlock(t);
	root = tree_root(t);
	for (unsigned d = 0; d < 8; d++) {
		snprintf(name, sizeof(name), "d%u", d);
		ck_assert_int_eq(tree_add(t, root, name, true, &dirs[d]), 0);
	}
	for (unsigned i = 0; i < LIMIT + 500; i++) {
		snprintf(name, sizeof(name), "f%u", i);
		int ret = tree_add(t, dirs[i % 8], name, false, &n);

		if (ret) {
			ck_assert_int_eq(ret, -ENOMEM);
			refused++;
		} else {
			ck_assert_msg(!refused, "f%u added after a refusal", i);
			added++;
		}
	}
	ck_assert_msg(refused > 0, "no refusal past %u slots", LIMIT);
	ck_assert_msg(added + 8 < LIMIT, "%u nodes in %u slots", added, LIMIT);
	for (unsigned i = 0; i < LIMIT + 500; i++) {
		snprintf(name, sizeof(name), "f%u", i);
		n = tree_child(t, dirs[i % 8], name);
		ck_assert_msg((n != NULL) == (i < added), "f%u %s", i,
			      n ? "found though refused" : "lost");
	}
	tree_unlock(t);
	tree_free(t);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("tree_limit");
	TCase *tc = tcase_create("limit");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_tree_limit_refuses_past_the_slots);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
