/**
 * @file test_tree.c
 * The daemon's mirror of the source tree (fs/tree.h): names kept in the
 * node and moved out by a rename that makes them longer, permissions and
 * owners kept once per distinct value, lookups and paths after renames,
 * and the wait for a writer's run of changes.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "unit.h"
#include "tree.h"

static struct tree *t;

static void setup(void)
{
	ck_assert_int_eq(tree_new(1000, 100, &t), 0);
}

static void teardown(void)
{
	tree_free(t);
	t = NULL;
}

static void assert_path(const struct node *n, const char *want)
{
	char *p = tree_path(t, n);

	ck_assert_ptr_nonnull(p);
	ck_assert_str_eq(p, want);
	ck_assert_uint_eq(tree_path_len(t, n), strlen(want));
	free(p);
}

START_TEST(test_tree_renames_keep_names_and_lookups)
{
	/* "a" has room for 8 bytes in its node: short names stay there,
	 * longer ones move out and back. */
	static const char *names[] = {
		"b",	 "a-much-longer-name-than-before.txt", "c", "1234567",
		"x.pdf", "another-long-name-for-the-same-node"};
	struct node *dir, *n, *other;
	char buf[128];

	ck_assert_int_eq(tree_add(t, tree_root(t), "dir", true, &dir), 0);
	ck_assert_int_eq(tree_add(t, dir, "a", false, &n), 0);
	ck_assert_int_eq(tree_add(t, dir, "z", false, &other), 0);
	ck_assert_str_eq(node_name(n), "a");
	assert_path(n, "dir/a");
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const char *name = names[i];
		struct node *to = i % 2 ? tree_root(t) : dir;

		ck_assert_int_eq(tree_move(t, n, to, name), 0);
		ck_assert_str_eq(node_name(n), name);
		snprintf(buf, sizeof(buf), "%s%s", to == dir ? "dir/" : "",
			 name);
		assert_path(n, buf);
		ck_assert_ptr_eq(tree_lookup(t, buf), n);
		ck_assert_ptr_eq(tree_child(t, to, name), n);
		ck_assert_ptr_eq(tree_lookup(t, "dir/z"), other);
	}
	ck_assert_ptr_null(tree_lookup(t, "dir/a"));
	ck_assert_ptr_null(tree_lookup(t, "dir/b"));
}
END_TEST

START_TEST(test_tree_attrs_are_shared_and_set)
{
	struct node *a, *b, *d;
	struct node_attr x = {0100640, 7, 8}, y = {0600, 7, 9};
	const struct node_attr *got;

	ck_assert_int_eq(tree_add(t, tree_root(t), "a", false, &a), 0);
	ck_assert_int_eq(tree_add(t, tree_root(t), "b", false, &b), 0);
	ck_assert_int_eq(tree_add(t, tree_root(t), "d", true, &d), 0);
	got = tree_attr(t, a);
	ck_assert_uint_eq(got->mode, 0644);
	ck_assert_uint_eq(got->uid, 1000);
	ck_assert_uint_eq(got->gid, 100);
	ck_assert_uint_eq(tree_attr(t, d)->mode, 0755);

	ck_assert_int_eq(tree_set_attr(t, a, &x), 0);
	ck_assert_int_eq(tree_set_attr(t, b, &y), 0);
	got = tree_attr(t, a);
	ck_assert_uint_eq(got->mode, 0640); /* the file type is dropped */
	ck_assert_uint_eq(got->uid, 7);
	ck_assert_uint_eq(got->gid, 8);
	ck_assert_uint_eq(tree_attr(t, b)->gid, 9);
	ck_assert_int_eq(tree_set_attr(t, b, &x), 0);
	ck_assert_uint_eq(a->attr, b->attr);

	/* Many distinct values: each node keeps its own. */
	for (unsigned i = 0; i < 3000; i++) {
		struct node *n;
		char name[16];

		snprintf(name, sizeof(name), "f%u", i);
		ck_assert_int_eq(tree_add(t, d, name, false, &n), 0);
		ck_assert_int_eq(
			tree_set_attr(
				t, n,
				&(struct node_attr){0400 | (i % 8), i, i % 5}),
			0);
	}
	for (unsigned i = 0; i < 3000; i++) {
		char path[16];
		struct node *n;

		snprintf(path, sizeof(path), "d/f%u", i);
		n = tree_lookup(t, path);
		ck_assert_ptr_nonnull(n);
		got = tree_attr(t, n);
		ck_assert_uint_eq(got->mode, 0400 | (i % 8));
		ck_assert_uint_eq(got->uid, i);
		ck_assert_uint_eq(got->gid, i % 5);
	}
	ck_assert_uint_eq(tree_attr(t, a)->gid, 8);
}
END_TEST

/* Random adds, renames and removals checked after each step against a
 * plain list of what should be there: the name hash finds every node and
 * no removed one, through growth and deletions that shift entries. */
START_TEST(test_tree_random_ops_match_a_model)
{
	enum { NDIRS = 4, NNAMES = 300, STEPS = 20000 };
	static struct node *at[NDIRS][NNAMES];
	struct node *dirs[NDIRS];
	uint64_t rng = 7;
	char name[40];

	for (int d = 0; d < NDIRS; d++) {
		snprintf(name, sizeof(name), "d%d", d);
		ck_assert_int_eq(
			tree_add(t, tree_root(t), name, true, &dirs[d]), 0);
	}
	for (int step = 0; step < STEPS; step++) {
		int d, i, e, j, op;

		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		d = (int)((rng >> 33) % NDIRS);
		i = (int)((rng >> 40) % NNAMES);
		e = (int)((rng >> 20) % NDIRS);
		j = (int)((rng >> 50) % NNAMES);
		op = (int)((rng >> 60) % 4);
		/* Names of one index differ in length, so renames both fit in
		 * place and move out. */
		snprintf(name, sizeof(name), "%0*d", 1 + i % 20, i);
		if (!at[d][i]) {
			ck_assert_int_eq(
				tree_add(t, dirs[d], name, false, &at[d][i]),
				0);
		} else if (op == 0 && !at[e][j]) {
			snprintf(name, sizeof(name), "%0*d", 1 + j % 20, j);
			ck_assert_int_eq(tree_move(t, at[d][i], dirs[e], name),
					 0);
			at[e][j] = at[d][i];
			at[d][i] = NULL;
		} else if (op == 1) {
			tree_detach(t, at[d][i]);
			tree_node_free(t, at[d][i]);
			at[d][i] = NULL;
		}
		if (step % 500 && step != STEPS - 1)
			continue;
		for (d = 0; d < NDIRS; d++) {
			for (i = 0; i < NNAMES; i++) {
				snprintf(name, sizeof(name), "%0*d", 1 + i % 20,
					 i);
				ck_assert_msg(tree_child(t, dirs[d], name) ==
						      at[d][i],
					      "step %d: d%d/%s", step, d, name);
			}
		}
	}
}
END_TEST

/* A detached subtree stays walkable while its nodes are freed one by one
 * and their slots go to new nodes: no link of a node still held names a
 * newcomer, and no inode number of a detached node finds anything. */
START_TEST(test_tree_detached_links_survive_slot_reuse)
{
	struct node *d, *sub, *f[3], *g, *fresh[8], *c;
	uint32_t slot, gen;
	char name[8];
	int n = 0;

	ck_assert_int_eq(tree_add(t, tree_root(t), "d", true, &d), 0);
	ck_assert_int_eq(tree_add(t, d, "sub", true, &sub), 0);
	for (int i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		ck_assert_int_eq(tree_add(t, sub, name, false, &f[i]), 0);
	}
	ck_assert_int_eq(tree_add(t, d, "g", false, &g), 0);
	slot = f[1]->slot;
	gen = f[1]->gen;
	tree_detach(t, sub);
	ck_assert_ptr_null(tree_lookup(t, "d/sub"));
	ck_assert_ptr_null(tree_by_id(t, slot, gen));
	ck_assert_ptr_null(tree_parent(t, sub));
	ck_assert_ptr_eq(tree_parent(t, f[1]), sub);
	ck_assert_ptr_eq(tree_first_child(t, d), g);
	ck_assert_ptr_null(tree_next_sibling(t, g));

	/* Free the middle child (a worker may hold the others), reuse its
	 * slot: the survivors are still each other's siblings. */
	tree_node_free(t, f[1]);
	for (int i = 0; i < 8; i++) {
		snprintf(name, sizeof(name), "n%d", i);
		ck_assert_int_eq(tree_add(t, d, name, false, &fresh[i]), 0);
	}
	ck_assert_uint_eq(fresh[0]->slot, slot); /* reused, new gen */
	ck_assert_uint_ne(fresh[0]->gen, gen);
	ck_assert_ptr_null(tree_by_id(t, slot, gen));
	for (c = tree_first_child(t, sub); c; c = tree_next_sibling(t, c)) {
		ck_assert(c == f[0] || c == f[2]);
		ck_assert_ptr_eq(tree_parent(t, c), sub);
		n++;
	}
	ck_assert_int_eq(n, 2);

	/* The parent goes first: its children lose it, not to a newcomer. */
	slot = sub->slot;
	tree_node_free(t, sub);
	ck_assert_int_eq(tree_add(t, d, "again", true, &c), 0);
	ck_assert_uint_eq(c->slot, slot);
	ck_assert_ptr_null(tree_parent(t, f[0]));
	ck_assert_ptr_null(tree_parent(t, f[2]));
	tree_node_free(t, f[2]);
	ck_assert_ptr_null(tree_next_sibling(t, f[0]));
	tree_node_free(t, f[0]);
	ck_assert_ptr_eq(tree_lookup(t, "d/n3"), fresh[3]);
	assert_path(fresh[3], "d/n3");
}
END_TEST
static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *wait_long(void *arg)
{
	(void)arg;
	tree_wait_batch(t, 60000);
	return NULL;
}

START_TEST(test_tree_wait_batch_until_the_run_ends_or_a_while)
{
	pthread_t th;
	double t0;

	t0 = now_s();
	tree_wait_batch(t, 60000);
	ck_assert_msg(now_s() - t0 < 30, "waited with no batch open");

	tree_batch_begin(t);
	t0 = now_s();
	tree_wait_batch(t, 50);
	ck_assert_msg(now_s() - t0 >= 0.049,
		      "a batch open, the wait ended after %.3f s, not 0.05",
		      now_s() - t0);
	ck_assert_msg(now_s() - t0 < 30, "the wait overran its bound");

	/* Whether it is waiting yet or not, the end lets it go. */
	t0 = now_s();
	ck_assert_int_eq(pthread_create(&th, NULL, wait_long, NULL), 0);
	tree_batch_end(t);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_msg(now_s() - t0 < 30, "the batch ended, the wait went on");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("tree");
	TCase *tc = tcase_create("tree");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_tree_renames_keep_names_and_lookups);
	tcase_add_test(tc, test_tree_attrs_are_shared_and_set);
	tcase_add_test(tc, test_tree_random_ops_match_a_model);
	tcase_add_test(tc, test_tree_detached_links_survive_slot_reuse);
	tcase_add_test(tc, test_tree_wait_batch_until_the_run_ends_or_a_while);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
