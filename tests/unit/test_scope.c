/*
 * Unit tests for core/scope.c: the pattern matcher against the examples of
 * gitignore(5), precedence between the command line and .imatchignore files
 * at several depths, and what the walker visits with them.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "unit.h"
#include "scan.h"
#include "scope.h"

/* ---- Matching one pattern ----------------------------------------------------- */

struct example {
	const char *pattern, *path;
	bool is_dir, match;
};

/* gitignore(5), "PATTERN FORMAT" and "EXAMPLES", in its order. */
static const struct example doc_examples[] = {
	/* "hello.*" matches any file or directory whose name begins with
	 * "hello.", at any depth. */
	{"hello.*", "hello.c", false, true},
	{"hello.*", "a/b/hello.txt", false, true},
	{"hello.*", "a/hello.d", true, true},
	{"hello.*", "hello", false, false},
	{"hello.*", "ahello.c", false, false},
	/* "doc/frotz/" matches the directory doc/frotz, not a/doc/frotz. */
	{"doc/frotz/", "doc/frotz", true, true},
	{"doc/frotz/", "a/doc/frotz", true, false},
	{"doc/frotz/", "doc/frotz", false, false},
	/* "frotz/" matches frotz and a/frotz that are directories. */
	{"frotz/", "frotz", true, true},
	{"frotz/", "a/frotz", true, true},
	{"frotz/", "a/frotz", false, false},
	/* "foo/" matches a directory foo, not a regular file foo. */
	{"foo/", "foo", true, true},
	{"foo/", "foo", false, false},
	/* "doc/frotz" and "/doc/frotz" have the same effect. */
	{"doc/frotz", "doc/frotz", false, true},
	{"/doc/frotz", "doc/frotz", false, true},
	{"doc/frotz", "x/doc/frotz", false, false},
	{"/doc/frotz", "x/doc/frotz", false, false},
	/* "foo/" then "*" matches foo/test.json and foo/bar, not foo/bar/hello.c. */
	{"foo/*", "foo/test.json", false, true},
	{"foo/*", "foo/bar", true, true},
	{"foo/*", "foo/bar/hello.c", false, false},
	{"foo/*", "foo", true, false},
	/* A leading slash anchors: "/bar" is bar at the top only. */
	{"/bar", "bar", false, true},
	{"/bar", "a/bar", false, false},
	/* "**" then '/': in all directories. */
	{"**/foo", "foo", false, true},
	{"**/foo", "a/b/foo", true, true},
	{"**/foo", "a/foox", false, false},
	{"**/foo/bar", "foo/bar", false, true},
	{"**/foo/bar", "x/y/foo/bar", false, true},
	{"**/foo/bar", "x/foo/y/bar", false, false},
	/* '/' then "**" at the end: everything inside, any depth. */
	{"abc/**", "abc/x", false, true},
	{"abc/**", "abc/x/y/z", false, true},
	{"abc/**", "abc", true, false},
	{"abc/**", "x/abc/y", false, false},
	/* "a/" "**" "/b" matches a/b, a/x/b, a/x/y/b. */
	{"a/**/b", "a/b", false, true},
	{"a/**/b", "a/x/b", false, true},
	{"a/**/b", "a/x/y/b", false, true},
	{"a/**/b", "a/x/y/c", false, false},
	{"a/**/b", "b/a/b", false, false},
	/* Other consecutive asterisks are a plain '*'. */
	{"a**b", "axyb", false, true},
	{"a**b", "ax/yb", false, false},
	/* '?' and '*' never match '/'. */
	{"a?b", "a/b", false, false},
	{"a?b", "axb", false, true},
	/* Unanchored: the last component only ("b"), so no. */
	{"a*", "a/b", false, false},
	{"a*", "b/ab", false, true},
	/* Ranges, negation, classes, escapes. */
	{"[a-c]at", "bat", false, true},
	{"[a-c]at", "dat", false, false},
	{"[!a-c]at", "dat", false, true},
	{"[^a-c]at", "cat", false, false},
	{"file[[:digit:]]", "file7", false, true},
	{"file[[:digit:]]", "filex", false, false},
	{"[]]x", "]x", false, true},
	{"\\*x", "*x", false, true},
	{"\\*x", "ax", false, false},
	{"\\!important!.txt", "!important!.txt", false, true},
	{"\\#notes", "#notes", false, true},
	{"[unclosed", "[unclosed", false, true},
	/* Trailing spaces are dropped unless escaped. */
	{"name  ", "name", false, true},
	{"name\\ ", "name ", false, true},
	{"name\\ ", "name", false, false},
	/* A CR of a line ending written on Windows is no part of it. */
	{"dos\r", "dos", false, true},
};

START_TEST(test_scope_gitignore_examples)
{
	for (size_t i = 0; i < sizeof(doc_examples) / sizeof(doc_examples[0]);
	     i++) {
		const struct example *e = &doc_examples[i];
		struct im_ignore *ig = NULL;
		bool got;

		ck_assert_int_eq(im_ignore_parse("", e->pattern,
						 strlen(e->pattern), &ig),
				 0);
		got = im_ignore_match(ig, e->path, e->is_dir) ==
		      IM_IGNORE_EXCLUDE;
		ck_assert_msg(got == e->match,
			      "pattern '%s' against %s '%s': got %d, "
			      "gitignore(5) says %d",
			      e->pattern, e->is_dir ? "dir" : "file", e->path,
			      got, e->match);
		im_ignore_free(ig);
	}
}
END_TEST

START_TEST(test_scope_comments_negation_last_wins)
{
	const char text[] = "# a comment\n"
			    "\n"
			    "*.log\n"
			    "!keep.log\n"
			    "   \n"
			    "tmp/\n";
	struct im_ignore *ig = NULL;

	ck_assert_int_eq(im_ignore_parse("", text, sizeof(text) - 1, &ig), 0);
	ck_assert_int_eq(im_ignore_match(ig, "# a comment", false),
			 IM_IGNORE_NONE);
	ck_assert_int_eq(im_ignore_match(ig, "x/a.log", false),
			 IM_IGNORE_EXCLUDE);
	ck_assert_int_eq(im_ignore_match(ig, "x/keep.log", false),
			 IM_IGNORE_INCLUDE);
	ck_assert_int_eq(im_ignore_match(ig, "x/tmp", true), IM_IGNORE_EXCLUDE);
	ck_assert_int_eq(im_ignore_match(ig, "x/tmp", false), IM_IGNORE_NONE);
	ck_assert_int_eq(im_ignore_match(ig, "a.txt", false), IM_IGNORE_NONE);
	im_ignore_free(ig);
}
END_TEST

START_TEST(test_scope_base_directory)
{
	const char text[] = "/top\nname\nsub/deep\n";
	struct im_ignore *ig = NULL;

	ck_assert_int_eq(im_ignore_parse("d/e", text, sizeof(text) - 1, &ig),
			 0);
	/* Anchored to the file's own directory. */
	ck_assert_int_eq(im_ignore_match(ig, "d/e/top", false),
			 IM_IGNORE_EXCLUDE);
	ck_assert_int_eq(im_ignore_match(ig, "top", false), IM_IGNORE_NONE);
	ck_assert_int_eq(im_ignore_match(ig, "d/e/x/top", false),
			 IM_IGNORE_NONE);
	ck_assert_int_eq(im_ignore_match(ig, "d/e/sub/deep", false),
			 IM_IGNORE_EXCLUDE);
	/* Unanchored: any depth below it, nothing outside it. */
	ck_assert_int_eq(im_ignore_match(ig, "d/e/x/y/name", false),
			 IM_IGNORE_EXCLUDE);
	ck_assert_int_eq(im_ignore_match(ig, "d/name", false), IM_IGNORE_NONE);
	ck_assert_int_eq(im_ignore_match(ig, "d/ef/name", false),
			 IM_IGNORE_NONE);
	im_ignore_free(ig);
}
END_TEST

START_TEST(test_scope_pathological_pattern_is_fast)
{
	char path[4096], pat[64];
	struct im_ignore *ig = NULL;
	struct timespec t0, t1;

	memset(path, 'a', sizeof(path) - 1);
	path[sizeof(path) - 1] = '\0';
	snprintf(pat, sizeof(pat), "*a*a*a*a*a*a*a*a*a*a*b");
	ck_assert_int_eq(im_ignore_parse("", pat, strlen(pat), &ig), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < 10; i++)
		ck_assert_int_eq(im_ignore_match(ig, path, false),
				 IM_IGNORE_NONE);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	/* Exponential backtracking would take hours; linear is microseconds.
	 * The bound is generous for valgrind. */
	ck_assert_msg(t1.tv_sec - t0.tv_sec < 20, "matching took %lds",
		      (long)(t1.tv_sec - t0.tv_sec));
	im_ignore_free(ig);
}
END_TEST

START_TEST(test_scope_command_line)
{
	struct im_scope *s = NULL;

	ck_assert_int_eq(im_scope_new(&s), 0);
	ck_assert(im_scope_empty(s));
	ck_assert_int_eq(im_scope_add_exclude(s, ""), -EINVAL);
	ck_assert_int_eq(im_scope_add_exclude(s, "# only a comment"), -EINVAL);
	ck_assert_int_eq(im_scope_add_include(s, "!x"), -EINVAL);
	ck_assert(im_scope_empty(s));
	ck_assert_int_eq(im_scope_add_exclude(s, "*.log"), 0);
	ck_assert_int_eq(im_scope_add_exclude(s, "!keep.log"), 0);
	ck_assert(!im_scope_excluded(s, NULL, "a/b.txt", false));
	ck_assert(im_scope_excluded(s, NULL, "a/b.log", false));
	ck_assert(!im_scope_excluded(s, NULL, "a/keep.log", false));
	/* Includes restrict files; a parent directory may match too. */
	ck_assert_int_eq(im_scope_add_include(s, "*.pdf"), 0);
	ck_assert_int_eq(im_scope_add_include(s, "/reports"), 0);
	ck_assert(!im_scope_excluded(s, NULL, "x/a.pdf", false));
	ck_assert(im_scope_excluded(s, NULL, "x/a.txt", false));
	ck_assert(!im_scope_excluded(s, NULL, "reports/q/a.txt", false));
	ck_assert(im_scope_excluded(s, NULL, "x/reports/a.txt", false));
	ck_assert(!im_scope_excluded(s, NULL, "x", true));
	/* Excludes still apply to included files. */
	ck_assert(im_scope_excluded(s, NULL, "reports/a.log", false));
	/* The ignore files are never documents. */
	ck_assert(im_scope_excluded(NULL, NULL, "a/.imatchignore", false));
	ck_assert(!im_scope_excluded(NULL, NULL, "a/.imatchignore", true));
	im_scope_free(s);
}
END_TEST

/* --files-from: listed files are in, directories while one lies below. */
START_TEST(test_scope_list)
{
	static const char *const paths[] = {"a-b/x.txt", "a/deep/y.txt",
					    "top.txt", "a/z.log"};
	struct im_scope *s = NULL;

	ck_assert_int_eq(im_scope_new(&s), 0);
	ck_assert_int_eq(im_scope_set_list(s, paths, 4), 0);
	ck_assert(!im_scope_empty(s));
	ck_assert(!im_scope_excluded(s, NULL, "top.txt", false));
	ck_assert(im_scope_excluded(s, NULL, "top.tx", false));
	ck_assert(im_scope_excluded(s, NULL, "other.txt", false));
	/* "a" sorts before "a-b/..." and "a/...": found by its "a/". */
	ck_assert(!im_scope_excluded(s, NULL, "a", true));
	ck_assert(!im_scope_excluded(s, NULL, "a/deep", true));
	ck_assert(!im_scope_excluded(s, NULL, "a-b", true));
	ck_assert(im_scope_excluded(s, NULL, "a-", true));
	ck_assert(im_scope_excluded(s, NULL, "a/dee", true));
	ck_assert(im_scope_excluded(s, NULL, "a/deep/y", false));
	/* Patterns still apply to listed files. */
	ck_assert_int_eq(im_scope_add_exclude(s, "*.log"), 0);
	ck_assert(im_scope_excluded(s, NULL, "a/z.log", false));
	ck_assert(!im_scope_excluded(s, NULL, "a/deep/y.txt", false));
	/* A second list replaces the first. */
	ck_assert_int_eq(im_scope_set_list(s, paths, 1), 0);
	ck_assert(im_scope_excluded(s, NULL, "top.txt", false));
	ck_assert(!im_scope_excluded(s, NULL, "a-b/x.txt", false));
	im_scope_free(s);
}
END_TEST

/* ---- Walking a tree --------------------------------------------------------- */

static char root[256];
static int rootfd = -1;

static void mk(const char *rel, const char *text)
{
	char p[4096], *slash;
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", root, rel);
	for (slash = strchr(p + strlen(root) + 1, '/'); slash;
	     slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		mkdir(p, 0755);
		*slash = '/';
	}
	if (!text) {
		ck_assert_msg(mkdir(p, 0755) == 0 || errno == EEXIST,
			      "mkdir %s: %s", p, strerror(errno));
		return;
	}
	f = fopen(p, "w");
	ck_assert_msg(f != NULL, "create %s: %s", p, strerror(errno));
	fputs(text, f);
	fclose(f);
}

static void rm_rf(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
	struct dirent *de;
	DIR *d;

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
	snprintf(root, sizeof(root), "/tmp/im_scope_%d", getpid());
	rm_rf(AT_FDCWD, root);
	ck_assert(mkdir(root, 0755) == 0);
	rootfd = open(root, O_RDONLY | O_DIRECTORY);
	ck_assert(rootfd >= 0);
}

static void teardown(void)
{
	close(rootfd);
	rm_rf(AT_FDCWD, root);
}

struct seen {
	char buf[8192]; /* "path\n" for every file and directory, walk order */
};

static int seen_file(const char *path, const struct stat *st, void *arg)
{
	struct seen *s = arg;

	(void)st;
	strncat(s->buf, path, sizeof(s->buf) - strlen(s->buf) - 2);
	strcat(s->buf, "\n");
	return 0;
}

static int seen_dir(const char *path, const struct stat *st, void *arg)
{
	struct seen *s = arg;

	(void)st;
	strncat(s->buf, path, sizeof(s->buf) - strlen(s->buf) - 3);
	strcat(s->buf, "/\n");
	return 0;
}

static void walk_expect(const struct im_params *p, const char *under,
			const char *want, uint64_t excluded)
{
	struct seen s = {{0}};
	struct im_walk_ops ops = {
		.dir = seen_dir, .file = seen_file, .arg = &s, .under = under};
	struct im_scan_counts c = {0};

	ck_assert_int_eq(im_walk(rootfd, p, &ops, &c), 0);
	ck_assert_msg(!strcmp(s.buf, want), "walk saw:\n%s\nwanted:\n%s", s.buf,
		      want);
	ck_assert_msg(c.excluded == excluded, "excluded %llu, wanted %llu",
		      (unsigned long long)c.excluded,
		      (unsigned long long)excluded);
}

START_TEST(test_scope_walk_ignore_files)
{
	struct im_params p;

	im_params_init(&p);
	mk("a.txt", "x");
	mk("a.log", "x");
	mk("build/out.txt", "x");
	mk("build/keep.txt", "x");
	mk("docs/keep.log", "x");
	mk("docs/deep/b.log", "x");
	mk("docs/deep/c.txt", "x");
	mk("empty", NULL);
	/* Root: logs and build/ out; build/keep.txt cannot come back (its
	 * directory is not entered). docs/: keep.log back in. docs/deep:
	 * c.txt out, and its own b.log back in. */
	mk(".imatchignore", "*.log\nbuild/\n!build/keep.txt\n");
	mk("docs/.imatchignore", "!keep.log\n");
	mk("docs/deep/.imatchignore", "c.txt\n!*.log\n");
	walk_expect(&p, NULL,
		    "/\na.txt\ndocs/\ndocs/keep.log\ndocs/deep/\n"
		    "docs/deep/b.log\nempty/\n",
		    3);
	/* -o hidden: the ignore files are read, never listed. */
	p.hidden = 1;
	walk_expect(&p, NULL,
		    "/\na.txt\ndocs/\ndocs/keep.log\ndocs/deep/\n"
		    "docs/deep/b.log\nempty/\n",
		    6);
	p.hidden = 0;
	/* A walk of a subtree applies its parents' files too. */
	walk_expect(&p, "docs/deep", "docs/deep/\ndocs/deep/b.log\n", 1);
	walk_expect(&p, "build", "", 1);
}
END_TEST

START_TEST(test_scope_walk_only_foo_bar)
{
	/* gitignore(5): "exclude everything except directory foo/bar". */
	struct im_params p;

	im_params_init(&p);
	mk("top.txt", "x");
	mk("foo/x.txt", "x");
	mk("foo/bar/y.txt", "x");
	mk("foo/baz/z.txt", "x");
	mk("other/w.txt", "x");
	mk(".imatchignore", "/*\n!/foo\n/foo/*\n!/foo/bar\n");
	walk_expect(&p, NULL, "/\nfoo/\nfoo/bar/\nfoo/bar/y.txt\n", 4);
}
END_TEST

START_TEST(test_scope_walk_command_line_first)
{
	struct im_scope *s = NULL;
	struct im_params p;
	bool out;

	im_params_init(&p);
	mk("a/keep.log", "x");
	mk("a/b.log", "x");
	mk("a/c.pdf", "x");
	mk("a/d.txt", "x");
	mk("skip/e.pdf", "x");
	/* The file would keep keep.log out and let b.log in; the command
	 * line decides first. */
	mk("a/.imatchignore", "keep.log\n!b.log\n");
	ck_assert_int_eq(im_scope_new(&s), 0);
	ck_assert_int_eq(im_scope_add_exclude(s, "*.log"), 0);
	ck_assert_int_eq(im_scope_add_exclude(s, "!keep.log"), 0);
	ck_assert_int_eq(im_scope_add_exclude(s, "/skip"), 0);
	p.scope = s;
	walk_expect(&p, NULL, "/\na/\na/c.pdf\na/d.txt\na/keep.log\n", 2);
	ck_assert_int_eq(im_scope_add_include(s, "*.pdf"), 0);
	walk_expect(&p, NULL, "/\na/\na/c.pdf\n", 4);

	/* One path at a time, as the watcher asks. */
	ck_assert_int_eq(im_scope_check(rootfd, s, "a/c.pdf", false, &out), 0);
	ck_assert(!out);
	ck_assert_int_eq(im_scope_check(rootfd, s, "a/d.txt", false, &out), 0);
	ck_assert(out);
	ck_assert_int_eq(im_scope_check(rootfd, s, "skip/e.pdf", false, &out),
			 0);
	ck_assert_msg(out, "below an excluded directory");
	ck_assert_int_eq(
		im_scope_check(rootfd, s, "a/.imatchignore", false, &out), 0);
	ck_assert(out);
	ck_assert_int_eq(im_scope_check(rootfd, s, "gone/x.pdf", false, &out),
			 -ENOENT);
	im_scope_free(s);
}
END_TEST

START_TEST(test_scope_check_symlinked_parent)
{
	char p[4096];
	bool out;

	mk("real/x.txt", "x");
	snprintf(p, sizeof(p), "%s/link", root);
	ck_assert(symlink("real", p) == 0);
	int ret = im_scope_check(rootfd, NULL, "link/x.txt", false, &out);

	/* openat(O_DIRECTORY | O_NOFOLLOW) of a symlink: ENOTDIR on Linux. */
	ck_assert_msg(ret == -ELOOP || ret == -ENOTDIR,
		      "a symlinked parent is not followed: %d", ret);
	ck_assert_int_eq(im_scope_check(rootfd, NULL, "../x", false, &out),
			 -EXDEV);
}
END_TEST

static Suite *scope_suite(void)
{
	Suite *s = suite_create("scope");
	TCase *tc = tcase_create("match");
	TCase *tw = tcase_create("walk");

	tcase_add_test(tc, test_scope_gitignore_examples);
	tcase_add_test(tc, test_scope_comments_negation_last_wins);
	tcase_add_test(tc, test_scope_base_directory);
	tcase_add_test(tc, test_scope_pathological_pattern_is_fast);
	tcase_add_test(tc, test_scope_command_line);
	tcase_add_test(tc, test_scope_list);
	suite_add_tcase(s, tc);
	tcase_add_checked_fixture(tw, setup, teardown);
	tcase_add_test(tw, test_scope_walk_ignore_files);
	tcase_add_test(tw, test_scope_walk_only_foo_bar);
	tcase_add_test(tw, test_scope_walk_command_line_first);
	tcase_add_test(tw, test_scope_check_symlinked_parent);
	suite_add_tcase(s, tw);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(scope_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
