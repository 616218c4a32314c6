/**
 * @file cmd_dedupe.c
 * `imatch dedupe`: sign a tree as `imatch scan` does, plan the removal of
 * redundant files with core/plan (DESIGN §6) and print the plan. Nothing is
 * changed; `imatch apply` (cmd_apply.c) carries a plan out.
 *
 * The plan line (JSON, one object per line; the CSV has the same columns):
 *   action     "remove", "trash", "hardlink", "symlink" or "reflink"
 *   kind       "exact" (identical bytes) or "near"
 *   similarity to the keeper, in [0, 1]; 1 for exact
 *   path, keeper          absolute paths
 *   size, mtime_ns, hash  the file as planned (hash "xxh128:" + 32 hex)
 *   keeper_size, keeper_mtime_ns, keeper_hash   the keeper as planned
 *   root       the scanned directory (absolute)
 *   cluster    the cluster's name (40 hex digits)
 *   trash      for "trash": the directory files move under, at their path
 *              relative to root
 * Paths are written as put_json_string() does: bytes that are not UTF-8
 * come back exactly from the \udcXX escapes.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apply.h"
#include "beneath.h"
#include "dupdirs.h"
#include "exact.h"
#include "imatch.h"
#include "index.h"
#include "plan.h"
#include "scope.h"

/* What the scan saw of each file of the exact tier: documents, binary files
 * and failed extractions; all are planned by their exact copies. */
struct rec {
	char *path;
	uint64_t size, dev, ino, nlink;
	int64_t mtime_ns;
};

struct recs {
	struct rec *v;
	size_t n, cap;
	int err;
	size_t too_big; /* files over max_size: left out of the plan */
};

static void on_file(const char *path, const struct stat *st,
		    const struct im_doc_sigs *d, void *arg)
{
	struct recs *r = arg;

	r->too_big += d->status == IM_DOC_TOO_BIG;
	if (!im_exact_tier(d))
		return;
	if (r->n == r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 256;
		struct rec *v = realloc(r->v, cap * sizeof(*v));

		if (!v) {
			r->err = -ENOMEM;
			return;
		}
		r->v = v;
		r->cap = cap;
	}
	r->v[r->n].path = strdup(path);
	if (!r->v[r->n].path) {
		r->err = -ENOMEM;
		return;
	}
	r->v[r->n].size = (uint64_t)st->st_size;
	r->v[r->n].dev = st->st_dev;
	r->v[r->n].ino = st->st_ino;
	r->v[r->n].nlink = st->st_nlink;
	r->v[r->n].mtime_ns =
		(int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
	r->n++;
}

static int cmp_rec(const void *a, const void *b)
{
	return strcmp(((const struct rec *)a)->path,
		      ((const struct rec *)b)->path);
}

static int meta(const char *path, struct im_plan_file *f, void *arg)
{
	const struct recs *r = arg;
	struct rec key = {.path = (char *)path};
	/* r->v is NULL when there is none: bsearch() must not see it. */
	const struct rec *hit =
		r->n ? bsearch(&key, r->v, r->n, sizeof(*r->v), cmp_rec) : NULL;

	if (!hit)
		return 1; /* not a file of this scan */
	f->size = hit->size;
	f->mtime_ns = hit->mtime_ns;
	f->dev = hit->dev;
	f->ino = hit->ino;
	return 0;
}

/* ---- Options ----------------------------------------------------------------- */

enum format { FMT_JSON, FMT_CSV, FMT_TEXT, FMT_SH };
enum action { ACT_REMOVE, ACT_TRASH, ACT_HARDLINK, ACT_SYMLINK, ACT_REFLINK };
static const char *const action_names[] = {"remove", "trash", "hardlink",
					   "symlink", "reflink"};

struct dedupe {
	char root[PATH_MAX];
	char trash[PATH_MAX]; /* ACT_TRASH */
	enum format fmt;
	enum action act;
	struct im_plan_opts o;
	const char **protect; /* relative to root */
	struct im_plan_set set;
	/* What the plan frees, when known (freed_bytes()); else the sum of
	 * the planned files' sizes is all the summary says. */
	bool freed_known;
	uint64_t freed;
	bool verbose; /* -v: name the files kept for their figures */
	/* Where -v reads those files again to say which figures differ: the
	 * scan's root and options; NULL when the plan came from elsewhere. */
	const struct cli *reread;
	int rootfd;
};

/*
 * An absolute path for @p dir without symlink components, as apply will
 * require: the longest existing prefix through realpath(), then the missing
 * rest (apply creates it) as given, where "." and ".." are refused.
 */
static int absolute_dir(const char *dir, char *out, size_t len)
{
	char head[PATH_MAX], tail[PATH_MAX] = "", tmp[PATH_MAX];
	char cwd[PATH_MAX];

	if (dir[0] == '/') {
		if (snprintf(head, sizeof(head), "%s", dir) >=
		    (int)sizeof(head))
			return -ENAMETOOLONG;
	} else {
		if (!getcwd(cwd, sizeof(cwd)))
			return -errno;
		if (snprintf(head, sizeof(head), "%s/%s", cwd, dir) >=
		    (int)sizeof(head))
			return -ENAMETOOLONG;
	}
	while (!realpath(head, tmp)) {
		char *slash = strrchr(head, '/');
		const char *name = slash + 1;

		if (errno != ENOENT)
			return -errno;
		if (!strcmp(name, ".") || !strcmp(name, ".."))
			return -EINVAL;
		if (*name) {
			if (snprintf(cwd, sizeof(cwd), "/%s%s", name, tail) >=
			    (int)sizeof(cwd))
				return -ENAMETOOLONG;
			strcpy(tail, cwd);
		}
		if (slash == head)
			slash++; /* keep "/" */
		*slash = '\0';
	}
	if (snprintf(out, len, "%s%s", strcmp(tmp, "/") ? tmp : "",
		     tail[0] ? tail : "") >= (int)len)
		return -ENAMETOOLONG;
	if (!out[0])
		strcpy(out, "/");
	return 0;
}

/* @p path relative to @p root ("" for root itself), or NULL if outside. */
static const char *under(const char *path, const char *root)
{
	size_t n = strlen(root);

	if (!strcmp(root, "/"))
		return path + 1;
	if (strncmp(path, root, n))
		return NULL;
	if (path[n] == '\0')
		return path + n;
	return path[n] == '/' ? path + n + 1 : NULL;
}

static int parse_options(struct cli *c, const char *root, struct dedupe *dd)
{
	char why[160];
	const char *f = c->format ? c->format : "json";

	if (c->json && c->format && strcmp(c->format, "json")) {
		err_msg("dedupe: --json and --format %s exclude each other",
			c->format);
		return -1;
	}
	if (!strcmp(f, "json"))
		dd->fmt = FMT_JSON;
	else if (!strcmp(f, "csv"))
		dd->fmt = FMT_CSV;
	else if (!strcmp(f, "text"))
		dd->fmt = FMT_TEXT;
	else if (!strcmp(f, "sh"))
		dd->fmt = FMT_SH;
	else {
		err_msg("dedupe: unknown --format '%s' (json, csv, text, sh)",
			f);
		return -1;
	}
	if (im_keep_parse(c->keep_rules ? c->keep_rules : IM_KEEP_DEFAULT,
			  &dd->o.keep, why, sizeof(why))) {
		err_msg("dedupe: --keep: %s", why);
		return -1;
	}
	dd->o.near = c->near;
	dd->verbose = c->verbose;

	if (!realpath(root, dd->root)) {
		err_msg("%s: %s", root, strerror(errno));
		return 1;
	}
	dd->protect = calloc(c->nprotect + 1, sizeof(*dd->protect));
	if (!dd->protect) {
		err_msg("%s", strerror(ENOMEM));
		return 1;
	}
	for (size_t i = 0; i < c->nprotect; i++) {
		char abs[PATH_MAX];
		const char *rel;

		if (!realpath(c->protect[i], abs)) {
			err_msg("dedupe: --protect %s: %s", c->protect[i],
				strerror(errno));
			return -1;
		}
		rel = under(abs, dd->root);
		if (!rel) {
			err_msg("dedupe: --protect %s: not inside %s",
				c->protect[i], dd->root);
			return -1;
		}
		/* abs is gone after this iteration: keep a copy. */
		dd->protect[i] = strdup(rel);
		if (!dd->protect[i]) {
			err_msg("%s", strerror(ENOMEM));
			return 1;
		}
	}
	dd->o.protect = dd->protect;
	dd->o.nprotect = c->nprotect;

	if (!c->action || !strcmp(c->action, "remove")) {
		dd->act = ACT_REMOVE;
	} else if (!strcmp(c->action, "hardlink")) {
		dd->act = ACT_HARDLINK;
	} else if (!strcmp(c->action, "symlink")) {
		dd->act = ACT_SYMLINK;
	} else if (!strcmp(c->action, "reflink")) {
		dd->act = ACT_REFLINK;
	} else if (!strncmp(c->action, "trash=", 6) && c->action[6]) {
		int ret = absolute_dir(c->action + 6, dd->trash,
				       sizeof(dd->trash));

		dd->act = ACT_TRASH;
		if (ret) {
			err_msg("dedupe: --action %s: %s", c->action,
				strerror(-ret));
			return -1;
		}
		if (under(dd->trash, dd->root) || under(dd->root, dd->trash)) {
			err_msg("dedupe: --action %s: the trash directory and "
				"%s must not contain each other",
				c->action, dd->root);
			return -1;
		}
	} else {
		err_msg("dedupe: unknown --action '%s' (remove, trash=DIR, "
			"hardlink, symlink, reflink)",
			c->action);
		return -1;
	}
	if ((dd->act == ACT_HARDLINK || dd->act == ACT_SYMLINK ||
	     dd->act == ACT_REFLINK) &&
	    c->near) {
		err_msg("dedupe: --action %s is for exact copies only; "
			"drop --near",
			action_names[dd->act]);
		return -1;
	}
	return 0;
}

/* ---- Output ------------------------------------------------------------------ */

static void put_abs(FILE *f, const struct dedupe *dd, const char *rel,
		    void (*put)(FILE *, const char *))
{
	char buf[2 * PATH_MAX];

	snprintf(buf, sizeof(buf), "%s/%s",
		 strcmp(dd->root, "/") ? dd->root : "", rel);
	put(f, buf);
}

/* 32 hex digits and a NUL (a sprintf() a byte was a twentieth of a plan
 * of 4,000 copies). */
static void hash_hex(const uint8_t *h, char *hex)
{
	static const char digit[] = "0123456789abcdef";

	for (int i = 0; i < 16; i++) {
		hex[2 * i] = digit[h[i] >> 4];
		hex[2 * i + 1] = digit[h[i] & 15];
	}
	hex[32] = '\0';
}

static const char *const columns[] = {
	"action",      "kind",
	"similarity",  "path",
	"keeper",      "size",
	"mtime_ns",    "hash",
	"keeper_size", "keeper_mtime_ns",
	"keeper_hash", "root",
	"cluster",     "trash",
};
#define NCOLUMNS (sizeof(columns) / sizeof(columns[0]))

static void print_line(FILE *f, const struct dedupe *dd,
		       const struct im_plan_entry *e, bool csv)
{
	const struct im_plan_set *s = &dd->set;
	const struct im_plan_file *x = &s->files[e->file];
	const struct im_plan_file *k = &s->files[e->keeper];
	char h[33], kh[33], cl[IM_SIG_HEX_LEN + 1];
	void (*put)(FILE *, const char *) = csv ? put_csv : put_json_string;

	hash_hex(s->hash[e->file], h);
	hash_hex(s->hash[e->keeper], kh);
	im_sig_hex(&s->cluster[e->file], cl);
	if (csv)
		fprintf(f, "%s,%s,%.4f,", action_names[dd->act],
			e->exact ? "exact" : "near", e->similarity);
	else
		fprintf(f,
			"{\"action\": \"%s\", \"kind\": \"%s\", "
			"\"similarity\": "
			"%.4f, \"path\": ",
			action_names[dd->act], e->exact ? "exact" : "near",
			e->similarity);
	put_abs(f, dd, x->path, put);
	fprintf(f, csv ? "," : ", \"keeper\": ");
	put_abs(f, dd, k->path, put);
	if (csv)
		fprintf(f,
			",%" PRIu64 ",%" PRId64 ",xxh128:%s,%" PRIu64
			",%" PRId64 ",xxh128:%s,",
			x->size, x->mtime_ns, h, k->size, k->mtime_ns, kh);
	else
		fprintf(f,
			", \"size\": %" PRIu64 ", \"mtime_ns\": %" PRId64
			", \"hash\": \"xxh128:%s\", \"keeper_size\": %" PRIu64
			", \"keeper_mtime_ns\": %" PRId64
			", \"keeper_hash\": \"xxh128:%s\", \"root\": ",
			x->size, x->mtime_ns, h, k->size, k->mtime_ns, kh);
	put(f, dd->root);
	fprintf(f, csv ? ",%s," : ", \"cluster\": \"%s\"", cl);
	if (dd->act == ACT_TRASH) {
		fputs(csv ? "" : ", \"trash\": ", f);
		put(f, dd->trash);
	}
	fputs(csv ? "\n" : "}\n", f);
}

/* Groups for reading: the keeper, then each file that goes. */
static void print_text(FILE *f, const struct dedupe *dd, const char *prefix)
{
	const struct im_plan *p = &dd->set.plan;

	for (size_t i = 0; i < p->n; i++) {
		const struct im_plan_entry *e = &p->v[i];

		if (i == 0 || e->keeper != p->v[i - 1].keeper) {
			fprintf(f, "%s%skeep\t", i ? "\n" : "", prefix);
			put_abs(f, dd, dd->set.files[e->keeper].path,
				put_text_path);
			fputc('\n', f);
		}
		fprintf(f, "%s%s\t%s\t%.4f\t", prefix, action_names[dd->act],
			e->exact ? "exact" : "near", e->similarity);
		put_abs(f, dd, dd->set.files[e->file].path, put_text_path);
		fputc('\n', f);
	}
}

/* A string in single quotes for sh. */
static void put_sh_quoted(FILE *f, const char *s)
{
	fputc('\'', f);
	for (; *s; s++) {
		if (*s == '\'')
			fputs("'\\''", f);
		else
			fputc(*s, f);
	}
	fputc('\'', f);
}

/*
 * rmlint-style: a script to read, edit and run. The plan is embedded as a
 * here-document fed to `imatch apply`, which re-verifies every line; a
 * comment line before each group says what it keeps (apply skips lines
 * beginning with '#').
 */
static void print_sh(FILE *f, const struct dedupe *dd)
{
	const struct im_plan *p = &dd->set.plan;
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n <= 0)
		strcpy(self, "imatch");
	else
		self[n] = '\0';
	fputs("#!/bin/sh\n# Removal plan made by 'imatch dedupe' for ", f);
	put_text_path(f, dd->root);
	fputs(".\n"
	      "# Review it: delete the JSON line of each file you want to keep "
	      "(a\n"
	      "# deleted line leaves its file alone). Then:\n"
	      "#   sh THIS_SCRIPT -n   checks every line and changes nothing\n"
	      "#   sh THIS_SCRIPT      applies it; 'imatch apply' re-verifies "
	      "each line\n"
	      "#                       (size, mtime, content) before it acts\n"
	      "set -eu\nIMATCH=${IMATCH:-",
	      f);
	put_sh_quoted(f, self);
	fputs("}\n"
	      "case ${1:-} in\n"
	      "'') dry= ;;\n"
	      "-n|--dry-run) dry=--dry-run ;;\n"
	      "*) echo \"usage: $0 [-n]\" >&2; exit 2 ;;\n"
	      "esac\n"
	      "exec \"$IMATCH\" apply $dry - <<'IMATCH_PLAN_END'\n",
	      f);
	for (size_t i = 0; i < p->n; i++) {
		const struct im_plan_entry *e = &p->v[i];

		if (i == 0 || e->keeper != p->v[i - 1].keeper) {
			fputs("# keep ", f);
			put_abs(f, dd, dd->set.files[e->keeper].path,
				put_text_path);
			fputc('\n', f);
		}
		print_line(f, dd, e, false);
	}
	fputs("IMATCH_PLAN_END\n", f);
}

static void print_plan(const struct dedupe *dd)
{
	switch (dd->fmt) {
	case FMT_JSON:
	case FMT_CSV:
		if (dd->fmt == FMT_CSV)
			for (size_t i = 0; i < NCOLUMNS; i++)
				printf("%s%s", i ? "," : "", columns[i]);
		if (dd->fmt == FMT_CSV)
			putchar('\n');
		for (size_t i = 0; i < dd->set.plan.n; i++)
			print_line(stdout, dd, &dd->set.plan.v[i],
				   dd->fmt == FMT_CSV);
		break;
	case FMT_TEXT: print_text(stdout, dd, ""); break;
	case FMT_SH: print_sh(stdout, dd); break;
	}
}

static void human(uint64_t b, char *buf, size_t len)
{
	static const char *const unit[] = {"B", "kB", "MB", "GB", "TB"};
	double v = (double)b;
	unsigned u = 0;

	while (v >= 1000 && u < 4) {
		v /= 1000;
		u++;
	}
	snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
}

/* @p one or @p many, as @p n says. */
static const char *noun(size_t n, const char *one, const char *many)
{
	return n == 1 ? one : many;
}

/* ---- -v: the figures that differ ------------------------------------------- */

struct figure {
	size_t off;   /* in figures.bytes */
	bool matched; /* the other file has this one too */
};

/* The figures of one file, in reading order, each NUL-terminated in bytes. */
struct figures {
	char *bytes;
	size_t len, cap;
	struct figure *v;
	size_t n, cap_v;
};

static int add_figure(const char *s, size_t n, void *arg)
{
	struct figures *f = arg;

	if (f->len + n + 1 > f->cap) {
		size_t cap = f->cap ? 2 * f->cap : 256;
		char *b;

		while (cap < f->len + n + 1)
			cap *= 2;
		b = realloc(f->bytes, cap);
		if (!b)
			return -ENOMEM;
		f->bytes = b;
		f->cap = cap;
	}
	if (f->n == f->cap_v) {
		size_t cap = f->cap_v ? 2 * f->cap_v : 64;
		struct figure *v = realloc(f->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		f->v = v;
		f->cap_v = cap;
	}
	memcpy(f->bytes + f->len, s, n);
	f->bytes[f->len + n] = '\0';
	f->v[f->n++] = (struct figure){f->len, false};
	f->len += n + 1;
	return 0;
}

/* One figure while two files' figures are matched: its text, its entry. */
struct figure_ref {
	const char *s;
	struct figure *fig;
};

static int cmp_figure_ref(const void *a, const void *b)
{
	return strcmp(((const struct figure_ref *)a)->s,
		      ((const struct figure_ref *)b)->s);
}

static struct figure_ref *figure_refs(struct figures *f)
{
	struct figure_ref *r = malloc((f->n ? f->n : 1) * sizeof(*r));

	if (!r)
		return NULL;
	for (size_t i = 0; i < f->n; i++)
		r[i] = (struct figure_ref){f->bytes + f->v[i].off, &f->v[i]};
	sort_n(r, f->n, sizeof(*r), cmp_figure_ref);
	return r;
}

/* Marks each figure that the other file holds as often: what is left
 * unmatched on either side is the difference of the two multisets, which is
 * what made their fingerprints (im_terms.numbers, a sum) differ. */
static int match_figures(struct figures *a, struct figures *b)
{
	struct figure_ref *x = figure_refs(a), *y = figure_refs(b);
	size_t i = 0, j = 0;

	while (x && y && i < a->n && j < b->n) {
		int c = strcmp(x[i].s, y[j].s);

		if (c == 0) {
			x[i++].fig->matched = true;
			y[j++].fig->matched = true;
		} else if (c < 0) {
			i++;
		} else {
			j++;
		}
	}
	free(x);
	free(y);
	return x && y ? 0 : -ENOMEM;
}

static bool any_unmatched(const struct figures *f)
{
	for (size_t i = 0; i < f->n; i++)
		if (!f->v[i].matched)
			return true;
	return false;
}

/* A few of @p f's unmatched figures, then how many more there are. */
#define FIGURES_SHOWN 5

static void put_unmatched(const struct figures *f)
{
	size_t shown = 0, more = 0;

	for (size_t i = 0; i < f->n; i++) {
		if (f->v[i].matched)
			continue;
		if (shown == FIGURES_SHOWN) {
			more++;
			continue;
		}
		fputs(shown++ ? ", " : "", stderr);
		put_text_path(stderr, f->bytes + f->v[i].off);
	}
	/* A figure holds a digit: "none" cannot be one. */
	if (!shown)
		fputs("none", stderr);
	if (more)
		fprintf(stderr, " (and %zu more)", more);
}

/*
 * "figures differ: A, B vs C": the figures of @p file its keeper lacks,
 * then those of @p keeper @p file lacks, both read again as the scan read
 * them. Nothing when either cannot be read or the two now agree (a file
 * changed since the scan): the line above still names the pair.
 */
static void print_figures_differ(struct im_signer *s, int rootfd,
				 const char *file, const char *keeper)
{
	struct figures a = {0}, b = {0};
	enum im_doc_status sa, sb;

	if (im_signer_figures_at(s, rootfd, file, &sa, add_figure, &a) ||
	    sa != IM_DOC_SIGNED ||
	    im_signer_figures_at(s, rootfd, keeper, &sb, add_figure, &b) ||
	    sb != IM_DOC_SIGNED || match_figures(&a, &b))
		goto out;
	if (any_unmatched(&a) || any_unmatched(&b)) {
		fputs("imatch: dedupe:   figures differ: ", stderr);
		put_unmatched(&a);
		fputs(" vs ", stderr);
		put_unmatched(&b);
		fputc('\n', stderr);
	}
out:
	free(a.bytes);
	free(a.v);
	free(b.bytes);
	free(b.v);
}

static void print_summary(const struct dedupe *dd)
{
	const struct im_plan *p = &dd->set.plan;
	char all[32], ex[32], nr[32];

	human(p->bytes, all, sizeof(all));
	human(p->exact_bytes, ex, sizeof(ex));
	human(p->bytes - p->exact_bytes, nr, sizeof(nr));
	fprintf(stderr,
		"imatch: dedupe: %zu %s, %s (%" PRIu64 " bytes) can go: "
		"%zu exact %s (%s), %zu %s (%s); %zu %s\n",
		p->n, noun(p->n, "file", "files"), all, p->bytes, p->exact,
		noun(p->exact, "copy", "copies"), ex, p->n - p->exact,
		noun(p->n - p->exact, "near-duplicate", "near-duplicates"), nr,
		p->keepers, noun(p->keepers, "keeper", "keepers"));
	if (dd->freed_known && dd->freed != p->bytes) {
		human(dd->freed, all, sizeof(all));
		fprintf(stderr,
			"imatch: dedupe: that frees %s (%" PRIu64
			" bytes): some are hard links of a file that stays, "
			"or of one another\n",
			all, dd->freed);
	}
	/* Protected keepers are not counted here: only what protection
	 * spared, files another keeper would have taken. */
	if (p->protected_kept)
		fprintf(stderr,
			"imatch: dedupe: %zu protected %s kept that would "
			"have gone\n",
			p->protected_kept,
			noun(p->protected_kept, "file", "files"));
	if (p->same_inode)
		fprintf(stderr,
			"imatch: dedupe: %zu hard %s of their keeper left "
			"alone\n",
			p->same_inode, noun(p->same_inode, "link", "links"));
	if (p->nkept)
		fprintf(stderr,
			"imatch: dedupe: %zu %s kept: %s figures differ from "
			"%s keeper's%s\n",
			p->nkept,
			noun(p->nkept, "near-duplicate", "near-duplicates"),
			noun(p->nkept, "its", "their"),
			noun(p->nkept, "its", "their"),
			dd->verbose ? "" : " (-v names them)");
	struct im_signer *s = NULL;

	if (dd->verbose && p->nkept && dd->reread &&
	    im_signer_new(NULL, &dd->reread->p, &s))
		s = NULL; /* the figures are not named, the files still are */
	for (size_t i = 0; dd->verbose && p->kept && i < p->nkept; i++) {
		fputs("imatch: dedupe: kept ", stderr);
		put_abs(stderr, dd, dd->set.files[p->kept[i].file].path,
			put_text_path);
		fputs(": its figures differ from its keeper's, ", stderr);
		put_abs(stderr, dd, dd->set.files[p->kept[i].keeper].path,
			put_text_path);
		fputc('\n', stderr);
		if (s)
			print_figures_differ(
				s, dd->rootfd,
				dd->set.files[p->kept[i].file].path,
				dd->set.files[p->kept[i].keeper].path);
	}
	if (s)
		im_signer_free(s);
}

static void release(struct dedupe *dd)
{
	for (size_t i = 0; dd->protect && dd->protect[i]; i++)
		free((char *)dd->protect[i]);
	free(dd->protect);
	im_plan_set_release(&dd->set);
}

/* A planned file's inode, for freed_bytes(). */
struct planned_inode {
	uint64_t dev, ino, nlink, size;
};

static int cmp_inode(const void *a, const void *b)
{
	const struct planned_inode *x = a, *y = b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return (x->ino > y->ino) - (x->ino < y->ino);
}

/*
 * The bytes the plan frees: each inode's size once, and only when every
 * link it has is planned (a hard link of a kept or unplanned file frees
 * nothing, and three planned links of one file free one file).
 * @return false when memory is short (the summary then says less).
 */
static bool freed_bytes(struct dedupe *dd, const struct recs *r)
{
	const struct im_plan *p = &dd->set.plan;
	struct planned_inode *v = malloc((p->n ? p->n : 1) * sizeof(*v));
	size_t n = 0;

	if (!v)
		return false;
	for (size_t i = 0; i < p->n; i++) {
		struct rec key = {
			.path = (char *)dd->set.files[p->v[i].file].path};
		const struct rec *hit =
			r->n ? bsearch(&key, r->v, r->n, sizeof(*r->v), cmp_rec)
			     : NULL;

		if (hit)
			v[n++] = (struct planned_inode){hit->dev, hit->ino,
							hit->nlink, hit->size};
	}
	sort_n(v, n, sizeof(*v), cmp_inode);
	dd->freed = 0;
	for (size_t i = 0, j; i < n; i = j) {
		for (j = i + 1; j < n && !cmp_inode(&v[i], &v[j]); j++)
			;
		if (j - i >= v[i].nlink)
			dd->freed += v[i].size;
	}
	free(v);
	dd->freed_known = true;
	return true;
}

/* Whether @p rel already shares @p keeper's extents (both below @p rootfd,
 * @p size bytes). */
static bool reflinked(int rootfd, const char *rel, const char *keeper,
		      uint64_t size)
{
	int a = -1, b = -1;
	bool shared = false;

	if (!im_open_beneath(rootfd, rel, O_RDONLY | O_NOCTTY | O_NONBLOCK,
			     &a) &&
	    !im_open_beneath(rootfd, keeper, O_RDONLY | O_NOCTTY | O_NONBLOCK,
			     &b))
		shared = im_shares_extents(b, a, size);
	if (a >= 0)
		close(a);
	if (b >= 0)
		close(b);
	return shared;
}

/*
 * --action reflink: leave out the copies that already share their keeper's
 * extents (an earlier plan reflinked them): applying them again would read
 * both files to change nothing. Says how many on stderr.
 */
static void drop_reflinked(struct dedupe *dd, int rootfd)
{
	struct im_plan *p = &dd->set.plan;
	size_t n = 0, dropped = 0;

	p->keepers = 0;
	for (size_t i = 0; i < p->n; i++) {
		const struct im_plan_entry *e = &p->v[i];
		const struct im_plan_file *f = &dd->set.files[e->file];

		if (e->exact &&
		    reflinked(rootfd, f->path, dd->set.files[e->keeper].path,
			      f->size)) {
			p->bytes -= f->size;
			p->exact_bytes -= f->size;
			p->exact--;
			dropped++;
			continue;
		}
		/* A keeper's files are adjacent in the plan. */
		if (!n || p->v[n - 1].keeper != e->keeper)
			p->keepers++;
		p->v[n++] = *e;
	}
	p->n = n;
	if (dropped)
		fprintf(stderr,
			"imatch: dedupe: %zu exact %s already %s their "
			"keeper's extents (reflinked before): not planned\n",
			dropped, noun(dropped, "copy", "copies"),
			noun(dropped, "shares", "share"));
}

/* Print the plan and its summary. @return the exit code. */
static int emit(const struct dedupe *dd)
{
	print_plan(dd);
	if (fflush(stdout) || ferror(stdout)) {
		err_msg("writing the plan: %s", strerror(errno));
		return EXIT_RUNTIME;
	}
	print_summary(dd);
	return 0;
}

bool dedupe_excluded(const struct cli *c, const char *path)
{
	/* dedupe leaves these out of its walk; export --plan, which has no
	 * walk, out of the plan, with the same patterns (core/scope.h). */
	return c->scope && im_scope_excluded_path(c->scope, path, false);
}

int dedupe_print(struct cli *c, const char *root, plan_build_fn build,
		 void *arg)
{
	struct dedupe dd;
	int ret, code = EXIT_RUNTIME;

	memset(&dd, 0, sizeof(dd));
	ret = parse_options(c, root, &dd);
	if (ret) {
		code = ret < 0 ? EXIT_USAGE : EXIT_RUNTIME;
		goto out;
	}
	if (build(&dd.o, dd.root, &dd.set, arg))
		goto out;
	code = emit(&dd);
out:
	release(&dd);
	return code;
}

/* export --part and its join: plans in parts are lines, which concatenate;
 * the text and sh formats group lines under their keeper. */
static int parse_lines(struct cli *c, const char *root, struct dedupe *dd)
{
	int ret;

	memset(dd, 0, sizeof(*dd));
	ret = parse_options(c, root, dd);
	if (!ret && dd->fmt != FMT_JSON && dd->fmt != FMT_CSV) {
		err_msg("export: a plan in parts is JSON or CSV lines, not "
			"--format %s",
			c->format);
		ret = -1;
	}
	return ret ? (ret < 0 ? EXIT_USAGE : EXIT_RUNTIME) : 0;
}

int dedupe_lines(struct cli *c, const char *root, plan_build_fn build,
		 plan_line_fn line, void *arg)
{
	struct dedupe dd;
	int ret, code = parse_lines(c, root, &dd);

	if (code)
		goto out;
	code = EXIT_RUNTIME;
	if (build(&dd.o, dd.root, &dd.set, arg))
		goto out;
	for (size_t i = 0; i < dd.set.plan.n; i++) {
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);

		if (f)
			print_line(f, &dd, &dd.set.plan.v[i],
				   dd.fmt == FMT_CSV);
		if (!f || fclose(f)) {
			free(buf);
			err_msg("%s", strerror(ENOMEM));
			goto out;
		}
		ret = line(&dd.o, &dd.set, &dd.set.plan.v[i], buf, len, arg);
		free(buf);
		if (ret)
			goto out;
	}
	code = 0;
out:
	release(&dd);
	return code;
}

int dedupe_join(struct cli *c, const char *root, int (*lines)(void *arg),
		const struct im_plan *totals, void *arg)
{
	struct dedupe dd;
	int code = parse_lines(c, root, &dd);

	if (code)
		goto out;
	code = EXIT_RUNTIME;
	if (dd.fmt == FMT_CSV)
		for (size_t i = 0; i < NCOLUMNS; i++)
			printf("%s%s", i ? "," : "", columns[i]);
	if (dd.fmt == FMT_CSV)
		putchar('\n');
	if (lines(arg))
		goto out;
	if (fflush(stdout) || ferror(stdout)) {
		err_msg("writing the plan: %s", strerror(errno));
		goto out;
	}
	dd.set.plan = *totals;
	dd.set.plan.v = NULL;
	dd.set.plan.kept = NULL;
	print_summary(&dd);
	code = 0;
out:
	release(&dd);
	return code;
}

int cmd_dedupe(struct cli *c)
{
	struct dedupe dd;
	struct recs recs = {.v = NULL};
	struct im_index *idx = NULL;
	int fd = -1, ret, code = EXIT_RUNTIME;

	memset(&dd, 0, sizeof(dd));
	ret = parse_options(c, c->argv[0], &dd);
	if (ret) {
		code = ret < 0 ? EXIT_USAGE : EXIT_RUNTIME;
		goto out;
	}
	fd = open(dd.root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		err_msg("%s: %s", c->argv[0], strerror(errno));
		goto out;
	}
	if (c->near) {
		if (scan_tree(c, fd, &idx, on_file, &recs))
			goto out;
		dd.reread = c;
		dd.rootfd = fd;
	} else {
		struct exact_scan_stats st;

		/* Byte copies need no text: a file of any size is hashed,
		 * as by jdupes or rmlint, unless --max-size says otherwise
		 * (its 64 MiB default bounds what a document's text costs). */
		if (!c->max_size_given)
			c->p.max_size = 0;
		if (scan_tree_exact(c, fd, &idx, on_file, &recs, &st))
			goto out;
		if (c->verbose)
			fprintf(stderr,
				"imatch: dedupe: %zu files, %zu sharing a size "
				"hashed (%.1f MB): %zu told apart by their "
				"first %d bytes, %zu read whole after them, "
				"%zu groups of copies, %zu changed or "
				"unreadable\n",
				st.files, st.hashed, (double)st.bytes / 1e6,
				st.head_apart, IM_EXACT_HEAD, st.whole,
				st.groups, st.unreadable);
		recs.too_big = st.too_big;
	}
	if (recs.err) {
		err_msg("%s", strerror(-recs.err));
		goto out;
	}
	sort_n(recs.v, recs.n, sizeof(*recs.v), cmp_rec);
	ret = im_plan_from_index(idx, &dd.o, meta, &recs, &dd.set);
	if (ret) {
		err_msg("planning: %s", strerror(-ret));
		goto out;
	}
	if (dd.act == ACT_REFLINK)
		drop_reflinked(&dd, fd);
	freed_bytes(&dd, &recs);
	code = emit(&dd);
	if (recs.too_big)
		fprintf(stderr,
			"imatch: dedupe: %zu %s over --max-size (%" PRIu64
			" bytes) left out; --max-size 0 reads them\n",
			recs.too_big, noun(recs.too_big, "file", "files"),
			c->p.max_size);
out:
	release(&dd);
	for (size_t i = 0; i < recs.n; i++)
		free(recs.v[i].path);
	free(recs.v);
	if (idx)
		im_index_free(idx);
	if (fd >= 0)
		close(fd);
	return code;
}

/* ---- scan --dirs --------------------------------------------------------------- */

int print_dup_dirs(const struct cli *c, const struct im_index *idx)
{
	struct im_dupdirs d;
	int ret = im_dupdirs_from_index(idx, false, &d);

	if (ret) {
		err_msg("%s", strerror(-ret));
		return EXIT_RUNTIME;
	}
	if (c->json) {
		fputs("{\"root\": ", stdout);
		put_json_string(stdout, c->argv[0]);
		fputs(", \"dir_groups\": [", stdout);
	}
	if (WANT_CSV(c) && !c->json)
		puts("group,documents,dir");
	for (size_t i = 0; i < d.n; i++) {
		const struct im_dupdir_group *g = &d.v[i];

		if (WANT_CSV(c) && !c->json) {
			for (size_t j = 0; j < g->n; j++) {
				printf("%zu,%zu,", i + 1, g->docs);
				put_csv(stdout, g->dirs[j]);
				putchar('\n');
			}
			continue;
		}
		if (c->json)
			printf("%s\n  {\"documents\": %zu, \"dirs\": [",
			       i ? "," : "", g->docs);
		for (size_t j = 0; j < g->n; j++) {
			if (c->json) {
				fputs(j ? ", " : "", stdout);
				put_json_string(stdout, g->dirs[j]);
			} else {
				fputs(j ? "\t" : "", stdout);
				put_text_path(stdout, g->dirs[j]);
			}
		}
		fputs(c->json ? "]}" : "\n", stdout);
	}
	if (c->json)
		fputs(d.n ? "\n]}\n" : "]}\n", stdout);
	if (c->verbose)
		fprintf(stderr,
			"imatch: scan: %zu groups of duplicate "
			"directories\n",
			d.n);
	im_dupdirs_release(&d);
	if (fflush(stdout) || ferror(stdout)) {
		err_msg("writing the output: %s", strerror(errno));
		return EXIT_RUNTIME;
	}
	return 0;
}
