/**
 * @file cmd_apply.c
 * `imatch apply [--dry-run] PLAN|-`: carry out a plan from `imatch dedupe`.
 * The whole plan is read first, so that a line whose keeper is planned on
 * another line (or a file planned twice) is known before anything is done;
 * each line is then re-verified and acted on by core/plan/apply.c.
 *
 * Blank lines and lines beginning with '#' are ignored (the comments of
 * `dedupe --format sh`). Output: one line per plan line on stdout ("removed
 * PATH", "skipped PATH: why", …; "would …" with --dry-run; -v adds the
 * keeper and the kind to each done line), a summary on
 * stderr, before it the temporary names a killed apply left beside the
 * plan's files or in their trash folders; first, unless --dry-run, what
 * such an apply provably left of a line is taken back (im_apply_reclaim(),
 * im_apply_reclaim_copy()) and said on stderr. Exit 0
 * when every line was done or skipped for safety, 1 when a line was
 * malformed or an action (or taking something back) failed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "apply.h"
#include "imatch.h"

struct item {
	size_t lineno;
	bool ok; /* parsed */
	struct im_plan_line l;
};

struct plan {
	struct item *v;
	size_t n, cap;
	size_t bad;	 /* malformed lines */
	size_t not_json; /* of them, not even a JSON object: said once */
};

static void say_bad(const char *name, size_t lineno, const char *why)
{
	err_msg("apply: %s:%zu: not a plan line: %s", name, lineno, why);
}

/* Read every line; a malformed one is reported and counted. */
static int read_plan(const char *name, FILE *in, struct plan *p)
{
	char *line = NULL, why[160];
	size_t cap = 0, lineno = 0;
	ssize_t len;
	int ret = 0;

	while ((len = getline(&line, &cap, in)) >= 0) {
		struct item *it;
		const char *s = line;

		lineno++;
		while (*s == ' ' || *s == '\t')
			s++;
		if (*s == '#' || *s == '\n' || *s == '\r' || !*s)
			continue;
		if (p->n == p->cap) {
			size_t nc = p->cap ? 2 * p->cap : 64;
			struct item *v = realloc(p->v, nc * sizeof(*v));

			if (!v) {
				ret = -ENOMEM;
				break;
			}
			p->v = v;
			p->cap = nc;
		}
		it = &p->v[p->n++];
		memset(it, 0, sizeof(*it));
		it->lineno = lineno;
		if (memchr(line, '\0', (size_t)len)) {
			say_bad(name, lineno, "a NUL byte");
			p->bad++;
			continue;
		}
		ret = im_plan_line_parse(line, (size_t)len, &it->l, why,
					 sizeof(why));
		if (ret == -ENOMEM)
			break;
		it->ok = ret == 0;
		if (ret) {
			/* A plan printed with --format text or csv: one line
			 * that says so, not one per line. */
			if (*s != '{' && !p->not_json++)
				say_bad(name, lineno,
					"not a JSON object (apply reads the "
					"plan 'imatch dedupe' prints by "
					"default, not --format text or csv)");
			else if (*s == '{')
				say_bad(name, lineno, why);
			p->bad++;
		}
		ret = 0;
	}
	if (p->not_json > 1)
		err_msg("apply: %s: %zu more lines are not JSON objects", name,
			p->not_json - 1);
	/* getline()'s own errno: a folder given for the plan is EISDIR. */
	if (!ret && ferror(in))
		ret = errno ? -errno : -EIO;
	free(line);
	return ret;
}

static int cmp_path_item(const void *a, const void *b)
{
	const struct item *x = *(struct item *const *)a;
	const struct item *y = *(struct item *const *)b;
	int d = strcmp(x->l.file.path, y->l.file.path);

	if (d)
		return d;
	return (x->lineno > y->lineno) - (x->lineno < y->lineno);
}

/* Lines by their file's path from the last down: the order cmd_apply()
 * acts in. */
static int cmp_last_path_first(const void *a, const void *b)
{
	return cmp_path_item(b, a);
}

static int cmp_key_item(const void *key, const void *b)
{
	return strcmp(key, (*(struct item *const *)b)->l.file.path);
}

/* A planned file's name by what it leads to, and its line. */
struct name_id {
	dev_t dev;
	ino_t ino;
	size_t line;
};

/*
 * The inode @p path leads to. Two paths to one inode are two spellings of
 * one name (case on a case-insensitive filesystem, a folder mounted twice)
 * or two hard links; either way a keeper whose inode is planned under
 * another path is taken to be planned. Of two hard links one can go
 * without the other, but a merged plan can also plan every name of the
 * keeper's inode (a link here, a spelling there), and dedupe never plans a
 * keeper's hard links: skipping is only ever the safe side. A path that
 * cannot be looked up (gone, longer than PATH_MAX) is compared as a string
 * only.
 */
static bool inode_of(const char *path, struct name_id *id)
{
	struct stat st;

	if (fstatat(AT_FDCWD, path, &st, AT_SYMLINK_NOFOLLOW))
		return false;
	id->dev = st.st_dev;
	id->ino = st.st_ino;
	return true;
}

static int cmp_name_id(const void *a, const void *b)
{
	const struct name_id *x = a, *y = b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return (x->ino > y->ino) - (x->ino < y->ino);
}

/* Is @p k, a keeper's name, planned as the file of a line other than
 * @p line? @p ids sorted by cmp_name_id(). */
static bool planned_elsewhere(const struct name_id *ids, size_t n,
			      const struct name_id *k, size_t line)
{
	size_t lo = 0, hi = n;

	while (lo < hi) { /* the first not below k */
		size_t mid = lo + (hi - lo) / 2;

		if (cmp_name_id(&ids[mid], k) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < n && !cmp_name_id(&ids[lo], k); lo++)
		if (ids[lo].line != line)
			return true;
	return false;
}

/*
 * Lines that must not be acted on whatever the files say: a keeper that is
 * planned itself (on any line, by its path or by another path to the same
 * name), or a file planned on an earlier line too. *why[i] is set for
 * those.
 */
static int whole_plan_checks(struct plan *p, const char **why)
{
	struct item **by = malloc((p->n ? p->n : 1) * sizeof(*by));
	struct name_id *ids = malloc((p->n ? p->n : 1) * sizeof(*ids));
	size_t n = 0, nids = 0;

	if (!by || !ids) {
		free(by);
		free(ids);
		return -ENOMEM;
	}
	for (size_t i = 0; i < p->n; i++) {
		if (!p->v[i].ok)
			continue;
		by[n++] = &p->v[i];
		if (inode_of(p->v[i].l.file.path, &ids[nids]))
			ids[nids++].line = i;
	}
	sort_n(by, n, sizeof(*by), cmp_path_item);
	sort_n(ids, nids, sizeof(*ids), cmp_name_id);
	for (size_t i = 0; i < n; i++)
		if (i && !strcmp(by[i]->l.file.path, by[i - 1]->l.file.path))
			why[by[i] - p->v] = "the file is planned on an "
					    "earlier line too";
	for (size_t i = 0; i < p->n; i++) {
		struct name_id k;

		/* A file that is its own keeper: im_apply_line() says so. */
		if (!p->v[i].ok || why[i] ||
		    !strcmp(p->v[i].l.keeper.path, p->v[i].l.file.path))
			continue;
		if (bsearch(p->v[i].l.keeper.path, by, n, sizeof(*by),
			    cmp_key_item) ||
		    (inode_of(p->v[i].l.keeper.path, &k) &&
		     planned_elsewhere(ids, nids, &k, i)))
			why[i] = "the keeper is itself planned";
	}
	free(by);
	free(ids);
	return 0;
}

static const char *const done_verb[2][5] = {
	{"removed", "trashed", "hardlinked", "symlinked", "reflinked"},
	{"would remove", "would trash", "would hardlink", "would symlink",
	 "would reflink"},
};

/* -v adds what the line was checked against: a reviewer of a log of
 * "removed PATH" lines cannot tell which copy stayed, nor how alike. */
static void print_done(const struct im_plan_line *l, bool dry, bool verbose,
		       const struct im_apply_result *r)
{
	fputs(done_verb[dry][l->action], stdout);
	putchar(' ');
	put_text_path(stdout, l->file.path);
	if (l->action != IM_ACT_REMOVE) {
		fputs(" -> ", stdout);
		put_text_path(stdout, l->action == IM_ACT_TRASH
					      ? r->dest
					      : l->keeper.path);
	}
	if (verbose) {
		fputs(" (kept ", stdout);
		put_text_path(stdout, l->keeper.path);
		if (l->exact)
			printf(", the same %" PRIu64 " bytes)", l->file.size);
		else
			printf(", near %.3f, %" PRIu64 " bytes against %" PRIu64
			       ")",
			       l->similarity, l->file.size, l->keeper.size);
	}
	putchar('\n');
}

static void print_skipped(const char *path, const char *why)
{
	fputs("skipped ", stdout);
	put_text_path(stdout, path);
	printf(": %s\n", why);
}

/* The directory of @p path, malloc'ed; NULL when it is not absolute (apply
 * skips the line) or out of memory. */
static char *dir_of(const char *path)
{
	char *d = strdup(path), *slash = d ? strrchr(d, '/') : NULL;

	if (!slash) {
		free(d);
		return NULL;
	}
	slash[slash == d] = '\0'; /* a file of "/" keeps its "/" */
	return d;
}

/* A name as apply's temporary names are made. */
static bool is_temp_name(const char *name)
{
	size_t len = strlen(name);

	return !strncmp(name, ".imatch-", 8) && len >= 12 &&
	       !strcmp(name + len - 4, ".tmp");
}

struct dir_line {
	char *dir;
	size_t line;
	bool trash; /* dir is the line's in the trash, not its file's */
};

static int cmp_dir_line(const void *a, const void *b)
{
	const struct dir_line *x = a, *y = b;
	int d = strcmp(x->dir, y->dir);

	return d ? d : (x->line > y->line) - (x->line < y->line);
}

/* Try each temporary name against each line of the directory; one
 * taken back is gone for the others. A folder that holds both planned
 * files and a trash's copies: a file moved aside gets its name back
 * before it could be taken for a copy of another. @return the failures. */
static size_t reclaim_in(const struct plan *p, const struct dir_line *v,
			 size_t n, char **names, size_t nnames)
{
	size_t failed = 0;

	for (size_t t = 0; t < nnames; t++)
		for (size_t k = 0; k < 2 * n; k++) {
			size_t i = k % n;
			const struct im_plan_line *l = &p->v[v[i].line].l;
			const char *what;
			int ret;

			if (v[i].trash != (k >= n))
				continue;
			ret = v[i].trash ? im_apply_reclaim_copy(l, names[t],
								 &what)
					 : im_apply_reclaim(l, names[t], &what);
			if (!ret)
				continue;
			err_msg("apply: %s%s%s: left by an apply that was "
				"killed: %s%s%s",
				v->dir, strcmp(v->dir, "/") ? "/" : "",
				names[t], what, ret < 0 ? ": " : "",
				ret < 0 ? strerror(-ret) : "");
			failed += ret < 0;
			break;
		}
	return failed;
}

/* The directory of a trash line's destination, malloc'ed; NULL for
 * another line, one apply skips, or out of memory. */
static char *trash_dir_of(const struct im_plan_line *l)
{
	char *dest = im_plan_trash_dest(l), *d = dest ? dir_of(dest) : NULL;

	free(dest);
	return d;
}

/*
 * The directories of the plan's files and of its trash lines'
 * destinations, with the line of each (two for a trash line), sorted.
 * @return the count, v[] holding them; the caller frees each dir.
 */
static size_t plan_dirs(const struct plan *p, struct dir_line *v)
{
	size_t n = 0;

	for (size_t i = 0; i < p->n; i++) {
		if (!p->v[i].ok)
			continue;
		if ((v[n].dir = dir_of(p->v[i].l.file.path))) {
			v[n].line = i;
			v[n++].trash = false;
		}
		if ((v[n].dir = trash_dir_of(&p->v[i].l))) {
			v[n].line = i;
			v[n++].trash = true;
		}
	}
	sort_n(v, n, sizeof(*v), cmp_dir_line);
	return n;
}

/*
 * Before acting: what an apply killed by kill -9 left beside a planned
 * file, or in the trash where it copied one to another filesystem, is
 * taken back where im_apply_reclaim() and im_apply_reclaim_copy() prove
 * it safe, so that running the plan again finishes it (a file moved aside
 * gets its name back, then is acted on as planned) and leaves no
 * temporary name. Each directory is read once; only one holding
 * temporary names costs more. @return the failures.
 */
static size_t reclaim_leftovers(const struct plan *p)
{
	struct dir_line *v = malloc((p->n ? 2 * p->n : 1) * sizeof(*v));
	char **names = NULL;
	size_t n, failed = 0, cap = 0;

	if (!v)
		return 0;
	n = plan_dirs(p, v);
	for (size_t i = 0, j; i < n; i = j) {
		DIR *d = opendir(v[i].dir);
		struct dirent *e;
		size_t nnames = 0;

		for (j = i + 1; j < n && !strcmp(v[j].dir, v[i].dir); j++)
			;
		while (d && (e = readdir(d))) {
			if (!is_temp_name(e->d_name))
				continue;
			if (nnames == cap) {
				size_t nc = cap ? 2 * cap : 8;
				char **nv = realloc(names, nc * sizeof(*nv));

				if (!nv)
					break;
				names = nv;
				cap = nc;
			}
			if (!(names[nnames] = strdup(e->d_name)))
				break;
			nnames++;
		}
		if (d)
			closedir(d);
		failed += reclaim_in(p, v + i, j - i, names, nnames);
		for (size_t t = 0; t < nnames; t++)
			free(names[t]);
	}
	for (size_t i = 0; i < n; i++)
		free(v[i].dir);
	free(v);
	free(names);
	return failed;
}

/*
 * Only kill -9 leaves a temporary name (apply.h), and the apply run again
 * afterwards did not say so: the line's file is then "gone" (moved aside,
 * not yet unlinked) or already a link, while the file sits under a hidden
 * name beside it, never removed; or a copy to a trash on another
 * filesystem stays in the trash under one. Each such name in the
 * directories of the plan's files and destinations is named once on
 * stderr; whether to remove it is the user's to decide, as another apply
 * may still be at work on it.
 */
static void name_leftovers(const struct plan *p)
{
	struct dir_line *v = malloc((p->n ? 2 * p->n : 1) * sizeof(*v));
	size_t n;

	if (!v)
		return;
	n = plan_dirs(p, v);
	for (size_t i = 0; i < n; i++) {
		const char *dir = v[i].dir;
		DIR *d = i && !strcmp(dir, v[i - 1].dir) ? NULL : opendir(dir);
		struct dirent *e;

		while (d && (e = readdir(d))) {
			struct stat st;

			if (!is_temp_name(e->d_name) ||
			    fstatat(dirfd(d), e->d_name, &st,
				    AT_SYMLINK_NOFOLLOW))
				continue;
			err_msg("apply: %s%s%s: a temporary name left by an "
				"apply that was killed (or is still at work): "
				"%s",
				dir, strcmp(dir, "/") ? "/" : "", e->d_name,
				S_ISLNK(st.st_mode)   ? "a symlink"
				: !S_ISREG(st.st_mode) ? "not a regular file"
				: st.st_nlink > 1      ? "a hard link"
						       : "a file");
		}
		if (d)
			closedir(d);
	}
	for (size_t i = 0; i < n; i++)
		free(v[i].dir);
	free(v);
}

int cmd_apply(struct cli *c)
{
	const char *name = c->argv[0];
	struct plan p = {0};
	const char **why = NULL;
	struct item **order = NULL;
	size_t done = 0, skipped = 0, failed = 0;
	uint64_t bytes = 0;
	FILE *in = stdin;
	int ret, code = EXIT_RUNTIME;

	if (strcmp(name, "-")) {
		in = fopen(name, "re");
		if (!in) {
			err_msg("apply: %s: %s", name, strerror(errno));
			return EXIT_RUNTIME;
		}
	} else {
		name = "(stdin)";
	}
	ret = read_plan(name, in, &p);
	if (ret) {
		err_msg("apply: reading %s: %s", name, strerror(-ret));
		goto out;
	}
	if (!c->dry_run)
		failed = reclaim_leftovers(&p);
	why = calloc(p.n ? p.n : 1, sizeof(*why));
	order = malloc((p.n ? p.n : 1) * sizeof(*order));
	if (!why || !order || whole_plan_checks(&p, why)) {
		err_msg("apply: %s", strerror(ENOMEM));
		goto out;
	}
	/*
	 * From the last path down: a mount of the tree keeps each key's
	 * documents in path order and links every holder to the first of
	 * them, so removing those first made it search the whole cluster
	 * again at each removal (20,000 near-duplicates removed in name order:
	 * 44.6 s of the daemon's CPU to converge, from the last down 0.5 s;
	 * tools/bench/neardup_remove.sh). No line depends on another's
	 * outcome: whole_plan_checks() looked at them all first.
	 */
	size_t nok = 0;

	for (size_t i = 0; i < p.n; i++)
		if (p.v[i].ok) /* a malformed line has no path */
			order[nok++] = &p.v[i];
	sort_n(order, nok, sizeof(*order), cmp_last_path_first);
	for (size_t k = 0; k < nok; k++) {
		size_t i = (size_t)(order[k] - p.v);
		const struct im_plan_line *l = &p.v[i].l;
		struct im_apply_result r;

		if (why[i]) {
			print_skipped(l->file.path, why[i]);
			skipped++;
			continue;
		}
		ret = im_apply_line(l, c->dry_run, &r);
		if (ret) {
			fputs("failed ", stdout);
			put_text_path(stdout, l->file.path);
			printf(": %s: %s", r.why, strerror(-ret));
			if (r.left) {
				fputs("; it is now at ", stdout);
				put_text_path(stdout, r.left);
			}
			putchar('\n');
			failed++;
		} else if (r.outcome == IM_APPLY_SKIPPED) {
			print_skipped(l->file.path, r.why);
			skipped++;
		} else {
			print_done(l, c->dry_run, c->verbose > 0, &r);
			done++;
			bytes += l->file.size;
		}
		im_apply_result_release(&r);
		fflush(stdout);
	}
	name_leftovers(&p);
	fprintf(stderr,
		"imatch: apply: %zu %s (%" PRIu64 " bytes), %zu skipped, %zu "
		"failed, %zu malformed lines\n",
		done, c->dry_run ? "would be done" : "done", bytes, skipped,
		failed, p.bad);
	code = failed || p.bad ? EXIT_RUNTIME : 0;
out:
	for (size_t i = 0; i < p.n; i++)
		if (p.v[i].ok)
			im_plan_line_release(&p.v[i].l);
	free(p.v);
	free(why);
	free(order);
	if (in != stdin)
		fclose(in);
	return code;
}
