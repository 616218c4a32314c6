/**
 * @file cmd_scan.c
 * `imatch scan` and `imatch lexicon build`: whole trees, through the same
 * core/scan.c passes the daemon runs (pass 1 im_scan_df for the lexicon,
 * pass 2 im_scan_sign into a struct im_index), so that `imatch scan DIR` and
 * a mount of DIR give the same clusters (DESIGN §4).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "imatch.h"
#include "index.h"
#include "scan.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int open_tree(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		err_msg("%s: %s", dir, strerror(errno));
	return fd;
}

/* Pass 1 over several trees: document frequencies merged into one. */
static int df_over(struct cli *c, char **dirs, int ndirs, struct im_df **out,
		   struct im_scan_counts *counts)
{
	struct im_df *total = NULL, *df = NULL;
	int ret = 0;

	for (int i = 0; i < ndirs; i++) {
		int fd = open_tree(dirs[i]);

		if (fd < 0) {
			ret = -1;
			break;
		}
		ret = im_scan_df(fd, &c->p, c->jobs, NULL, &df, counts);
		close(fd);
		if (ret) {
			err_msg("%s: %s", dirs[i], strerror(-ret));
			ret = -1;
			break;
		}
		if (!total) {
			total = df;
		} else {
			ret = im_df_merge(total, df);
			im_df_free(df);
			if (ret) {
				err_msg("%s", strerror(-ret));
				ret = -1;
				break;
			}
		}
		df = NULL;
	}
	if (ret) {
		if (total)
			im_df_free(total);
		return ret;
	}
	*out = total;
	return 0;
}

static int build_lexicon(struct cli *c, struct im_df *df,
			 struct im_lexicon **lex)
{
	int ret = im_lexicon_build(df, c->p.nidf_lo, c->p.nidf_hi,
				   c->p.secondary_cap, lex);

	if (ret == -EINVAL)
		return 1; /* fewer than 2 documents: no lexicon possible */
	if (ret) {
		err_msg("building the lexicon: %s", strerror(-ret));
		return -1;
	}
	return 0;
}

int cmd_lexicon_build(struct cli *c)
{
	struct im_scan_counts counts = {0};
	struct im_lexicon *lex = NULL;
	struct im_df *df = NULL;
	int ret;

	if (c->from_df ? df_from_stage(c, &df)
		       : df_over(c, c->argv, c->argc, &df, &counts))
		return EXIT_RUNTIME;
	ret = build_lexicon(c, df, &lex);
	if (ret > 0)
		err_msg("lexicon build: need at least 2 text documents, found "
			"%" PRIu64,
			im_df_docs(df));
	im_df_free(df);
	if (ret)
		return EXIT_RUNTIME;
	ret = im_lexicon_save(lex, c->out);
	if (ret) {
		err_msg("%s: %s", c->out, strerror(-ret));
		im_lexicon_free(lex);
		return EXIT_RUNTIME;
	}
	put_text_path(stderr, c->out);
	fprintf(stderr,
		": %" PRIu64 " documents, %zu primary terms (nidf %.2f:%.2f), "
		"%zu secondary terms\n",
		im_lexicon_docs(lex), im_lexicon_primary_size(lex),
		c->p.nidf_lo, c->p.nidf_hi, im_lexicon_secondary_size(lex));
	im_lexicon_free(lex);
	return 0;
}

/* ---- scan ------------------------------------------------------------------ */

struct collect {
	struct im_index *idx;
	int err;
	int verbose;	 /* name the files that could not be read */
	scan_file_fn fn; /* scan_tree()'s caller, or NULL */
	void *fn_arg;
	struct cluster *v;
	size_t n, cap;
	struct cluster *cur;
	struct first_ctx *first; /* a first scan's timing, or NULL */
	uint64_t deferred; /* results put unhashed (im_exact_deferred()) */
};

static void on_result(const char *path, const struct stat *st,
		      const struct im_doc_sigs *d, void *arg)
{
	struct collect *col = arg;
	int ret;

	if (col->verbose && d->status == IM_DOC_ERROR)
		err_msg("cannot read %s: %s", path, strerror(d->err));
	else if (col->verbose && d->status == IM_DOC_FAILED)
		/* Counted by reason in the summary; named here, so that a
		 * user need not explain every file to find them. */
		err_msg("no text from %s: extraction failed: %s", path,
			im_extract_fail_name((enum im_extract_fail)d->err));
	else if (col->verbose && d->status == IM_DOC_TOO_BIG)
		err_msg("not read %s: %jd bytes, larger than --max-size", path,
			(intmax_t)st->st_size);
	ret = im_index_put(col->idx, path, d);
	if (ret && !col->err)
		col->err = ret;
	col->deferred += im_exact_deferred(d);
	if (!ret && col->fn)
		col->fn(path, st, d, col->fn_arg);
}

/* A directory the walk could not open or read: with -v, named as the files
 * are (the summary only counts it in errors). */
static void on_unreadable(const char *path, int err, void *arg)
{
	const struct collect *col = arg;

	if (col->verbose)
		err_msg("cannot read %s: %s", *path ? path : ".",
			strerror(err));
}

static int on_member(const char *path, void *arg)
{
	struct cluster *cl = arg;
	char *s;

	if (cl->size == 0)
		return -ENOMEM; /* more members than announced: cannot happen */
	s = strdup(path);
	if (!s)
		return -ENOMEM;
	cl->members[--cl->size] = s;
	return 0;
}

static int on_cluster(const struct im_sig *name, size_t size, void *arg)
{
	struct collect *col = arg;

	if (col->n == col->cap) {
		size_t cap = col->cap ? 2 * col->cap : 64;
		struct cluster *v = realloc(col->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		col->v = v;
		col->cap = cap;
	}
	col->v[col->n++] = (struct cluster){.name = *name, .size = size};
	return 0;
}

int cmp_cluster(const void *a, const void *b)
{
	const struct cluster *x = a, *y = b;

	if (x->size != y->size)
		return x->size > y->size ? -1 : 1;
	return strcmp(x->members[0], y->members[0]);
}

static void free_clusters(struct collect *col)
{
	for (size_t i = 0; i < col->n; i++) {
		struct cluster *cl = &col->v[i];

		if (!cl->members)
			continue;
		for (size_t j = 0; j < cl->size; j++)
			free(cl->members[j]);
		free(cl->members);
	}
	free(col->v);
}

static int gather_clusters(struct collect *col)
{
	int ret = im_index_foreach_cluster(col->idx, on_cluster, col);

	if (ret)
		return ret;
	for (size_t i = 0; i < col->n; i++) {
		struct cluster *cl = &col->v[i];
		size_t size = cl->size;

		cl->members = calloc(size, sizeof(*cl->members));
		if (!cl->members)
			return -ENOMEM;
		/* on_member fills from the end, counting size down. */
		ret = im_index_cluster_members(col->idx, &cl->name, on_member,
					       cl);
		if (ret || cl->size) {
			/* Keep what was filled freeable. */
			for (size_t j = cl->size; j < size; j++)
				free(cl->members[j]);
			free(cl->members);
			cl->members = NULL;
			cl->size = 0;
			return ret ? ret : -EIO;
		}
		cl->size = size;
		sort_n(cl->members, size, sizeof(*cl->members), cmp_strp);
	}
	sort_n(col->v, col->n, sizeof(*col->v), cmp_cluster);
	return 0;
}

void put_scan_cluster_text(FILE *f, const struct cluster *cl)
{
	for (size_t j = 0; j < cl->size; j++) {
		if (j)
			fputc('\t', f);
		put_text_path(f, cl->members[j]);
	}
	fputc('\n', f);
}

void print_scan_text(const struct cluster *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		put_scan_cluster_text(stdout, &v[i]);
}

/* One row per member: the cluster's name, its size, the member. */
static void print_csv(const struct collect *col)
{
	char hex[IM_SIG_HEX_LEN + 1];

	puts("cluster,size,path");
	for (size_t i = 0; i < col->n; i++) {
		const struct cluster *cl = &col->v[i];

		im_sig_hex(&cl->name, hex);
		for (size_t j = 0; j < cl->size; j++) {
			printf("%s,%zu,", hex, cl->size);
			put_csv(stdout, cl->members[j]);
			putchar('\n');
		}
	}
}

static uint64_t errors_of(const struct im_scan_counts *c)
{
	return c->errors + c->by_status[IM_DOC_ERROR];
}

/* The summary's per-format counts and failures by reason: "format_pdf: N",
 * "failed: N", "failed_corrupt: N" lines for the non-zero counts. */
static void print_formats(const struct im_scan_counts *k)
{
	for (int f = 0; f < IM_FMT_COUNT; f++)
		if (k->by_format[f])
			fprintf(stderr, "format_%s: %" PRIu64 "\n",
				im_format_name((enum im_format)f),
				k->by_format[f]);
	fprintf(stderr, "failed: %" PRIu64 "\n", k->by_status[IM_DOC_FAILED]);
	for (int r = 1; r < IM_XF_COUNT; r++)
		if (k->by_fail[r])
			fprintf(stderr, "failed_%s: %" PRIu64 "\n",
				im_extract_fail_name((enum im_extract_fail)r),
				k->by_fail[r]);
}

void put_scan_cluster_json(FILE *f, const struct cluster *cl)
{
	char hex[IM_SIG_HEX_LEN + 1];

	im_sig_hex(&cl->name, hex);
	fprintf(f, "{\"name\": \"%s\", \"size\": %zu, \"members\": [", hex,
		cl->size);
	for (size_t j = 0; j < cl->size; j++) {
		if (j)
			fputs(", ", f);
		put_json_string(f, cl->members[j]);
	}
	fputs("]}", f);
}

void print_scan_json_head(const struct cli *c, const char *root, size_t n,
			  const struct scan_summary *s)
{
	const struct im_scan_counts *k = &s->c;

	fputs("{\n  \"root\": ", stdout);
	put_json_string(stdout, root);
	fputs(",\n  \"lexicon\": {\"file\": ", stdout);
	if (c->lexicon)
		put_json_string(stdout, c->lexicon);
	else
		fputs("null", stdout);
	printf(", \"documents\": %" PRIu64 ", \"primary\": %zu, "
	       "\"secondary\": %zu},\n",
	       s->lex_docs, s->primary, s->secondary);
	printf("  \"params\": {\"k\": %u, \"keep\": %g, \"nidf\": [%g, %g], "
	       "\"min_terms\": %u, \"min_ratio\": %g, \"seed\": %" PRIu64
	       "},\n",
	       c->p.k, c->p.keep, s->have_window ? s->nidf_lo : c->p.nidf_lo,
	       s->have_window ? s->nidf_hi : c->p.nidf_hi, c->p.min_terms,
	       c->p.min_ratio, c->p.seed);
	printf("  \"counts\": {\"files\": %" PRIu64 ", \"documents\": %" PRIu64
	       ", \"signed\": %" PRIu64 ", \"rejected\": %" PRIu64
	       ", \"binary\": %" PRIu64 ", \"too_big\": %" PRIu64
	       ", \"errors\": %" PRIu64 ", \"hidden\": %" PRIu64
	       ", \"other\": %" PRIu64 ", \"directories\": %" PRIu64
	       ", \"bytes\": %" PRIu64 ", \"clusters\": %zu},\n",
	       k->files,
	       k->by_status[IM_DOC_SIGNED] + k->by_status[IM_DOC_REJECTED],
	       k->by_status[IM_DOC_SIGNED], k->by_status[IM_DOC_REJECTED],
	       k->by_status[IM_DOC_BINARY], k->by_status[IM_DOC_TOO_BIG],
	       errors_of(k), k->hidden, k->other, k->dirs, k->bytes, n);
	fputs("  \"clusters\": [", stdout);
}

void print_scan_json(const struct cli *c, const char *root,
		     const struct cluster *v, size_t n,
		     const struct scan_summary *s)
{
	print_scan_json_head(c, root, n, s);
	for (size_t i = 0; i < n; i++) {
		fputs(i ? ",\n    " : "\n    ", stdout);
		put_scan_cluster_json(stdout, &v[i]);
	}
	fputs(n ? "\n  ]\n}\n" : "]\n}\n", stdout);
}

static void print_summary(const struct collect *col,
			  const struct scan_summary *s)
{
	const struct im_scan_counts *k = &s->c;
	double mb = (double)k->bytes / 1e6;

	fprintf(stderr,
		"files: %" PRIu64 "\ndocuments: %" PRIu64 "\nsigned: %" PRIu64
		"\nrejected: %" PRIu64 "\nbinary: %" PRIu64
		"\ntoo_big: %" PRIu64 "\nerrors: %" PRIu64 "\nhidden: %" PRIu64
		"\nother: %" PRIu64 "\nclusters: %zu\n"
		"lexicon: %" PRIu64 " documents, %zu primary, %zu secondary "
		"terms\n",
		k->files,
		k->by_status[IM_DOC_SIGNED] + k->by_status[IM_DOC_REJECTED],
		k->by_status[IM_DOC_SIGNED], k->by_status[IM_DOC_REJECTED],
		k->by_status[IM_DOC_BINARY], k->by_status[IM_DOC_TOO_BIG],
		errors_of(k), k->hidden, k->other, col->n, s->lex_docs,
		s->primary, s->secondary);
	print_formats(k);
	fprintf(stderr, "excluded: %" PRIu64 "\n", k->excluded);
	/* Only when there are: word lists, random text (README, Terms). */
	if (k->sampled)
		fprintf(stderr,
			"sampled: %" PRIu64 " (texts of more than %zu unique "
			"terms, signed from a sample of them)\n",
			k->sampled, IM_TERMS_MAX);
	/* Binaries of up to 256 KiB are read whole, and hashed then: only
	 * the larger ones, sniffed, wait for another file of their size. */
	fprintf(stderr,
		"binary hashed after the walk: %" PRIu64 " of %" PRIu64
		" sniffed (over 256 KiB; the others' sizes are unique), %.1f "
		"MB, %.3f s\n",
		s->exact.hashed, s->exact.deferred,
		(double)s->exact.bytes / 1e6, s->t_exact);
	/* A first scan reads once: the lexicon is built after the reading,
	 * and signing works from what the reading kept. */
	if (s->t_lex > 0)
		fprintf(stderr, "reading and lexicon: %.3f s\n", s->t_lex);
	fprintf(stderr, "signing: %.3f s\n", s->t_sign);
	fprintf(stderr, "scan: %.3f s, %.1f MB, %.1f MB/s\n",
		s->t_lex + s->t_sign, mb,
		s->t_lex + s->t_sign > 0 ? mb / (s->t_lex + s->t_sign) : 0.0);
}

/* ops.lexicon of a first scan: the lexicon is there, signing begins. */
struct first_ctx {
	struct scan_summary *sum;
	double t0;
};

static int on_lexicon(const struct im_lexicon *lex, void *arg)
{
	struct collect *col = arg;
	struct first_ctx *fc = col->first;

	fc->sum->t_lex = now() - fc->t0;
	fc->t0 = now();
	(void)lex;
	/* The walk is over: every file it found is put next. */
	im_index_expect(col->idx, fc->sum->c.files);
	return 0;
}

/* Sign the tree open at @p fd into col->idx (a new index): with c->lexicon,
 * else in one pass that builds the lexicon from the tree on the way, as the
 * daemon's first mount does. @return 0, or -1 after printing why. */
static int sign_tree(struct cli *c, int fd, struct collect *col,
		     struct scan_summary *sum)
{
	struct im_lexicon *lex = NULL;
	struct first_ctx fc = {.sum = sum};
	struct im_scan_ops ops = {
		.result = on_result, .unreadable = on_unreadable, .arg = col};
	int ret, code = -1;
	double t0;

	/* Size first (exact.h): binary files are only sniffed here and
	 * hashed after the scan if another file has their size. */
	c->p.defer_binary = 1;
	ret = im_index_new(&col->idx);
	if (!ret)
		ret = im_index_set_similarity(col->idx, c->p.similarity);
	if (ret) {
		err_msg("%s", strerror(-ret));
		goto out;
	}
	if (c->lexicon) {
		if (load_lexicon(c, &lex))
			goto out;
		t0 = now();
		ret = im_scan_sign(fd, lex, &c->p, c->jobs, &ops, &sum->c);
		sum->t_sign = now() - t0;
	} else {
		col->first = &fc;
		ops.lexicon = on_lexicon;
		/* Fewer than two documents for a lexicon: every file still
		 * enters the index, for its exact copies. */
		ops.unsigned_results = true;
		fc.t0 = now();
		ret = im_scan_first(fd, &c->p, c->jobs, &ops, &lex, &sum->c);
		if (lex)
			sum->t_sign = now() - fc.t0;
		else
			sum->t_lex = now() - fc.t0;
	}
	if (!ret)
		ret = col->err;
	if (ret) {
		err_msg("%s: %s", c->argv[0], strerror(-ret));
		goto out;
	}
	/* Without a lexicon (fewer than two text documents) nothing was
	 * signed: files are linked to their exact copies only. */
	if (lex) {
		sum->lex_docs = im_lexicon_docs(lex);
		sum->primary = im_lexicon_primary_size(lex);
		sum->secondary = im_lexicon_secondary_size(lex);
		im_lexicon_window(lex, &sum->nidf_lo, &sum->nidf_hi);
		sum->have_window = true;
	}
	/* The fill exports every record to find the deferred ones: with none
	 * (a tree of documents) it would find nothing, at 0.4% of a scan. */
	t0 = now();
	ret = col->deferred ? im_exact_fill(col->idx, fd, &sum->exact) : 0;
	sum->t_exact = now() - t0;
	if (ret) {
		err_msg("%s: %s", c->argv[0], strerror(-ret));
		goto out;
	}
	code = 0;
out:
	if (lex)
		im_lexicon_free(lex);
	return code;
}

int scan_tree(struct cli *c, int fd, struct im_index **idx, scan_file_fn fn,
	      void *arg)
{
	struct collect col = {.verbose = c->verbose, .fn = fn, .fn_arg = arg};
	struct scan_summary sum = {0};

	if (sign_tree(c, fd, &col, &sum)) {
		if (col.idx)
			im_index_free(col.idx);
		return -1;
	}
	*idx = col.idx;
	return 0;
}

int cmd_scan(struct cli *c)
{
	struct collect col = {.verbose = c->verbose};
	struct scan_summary sum = {0};
	int fd = -1, ret, code = EXIT_RUNTIME;

	fd = open_tree(c->argv[0]);
	if (fd < 0)
		return EXIT_RUNTIME;
	/* Clusters and counts need no mtime (dupes and dedupe do). */
	c->p.size_only = 1;
	if (sign_tree(c, fd, &col, &sum))
		goto out;
	if (c->dirs) {
		code = print_dup_dirs(c, col.idx);
		goto out;
	}
	ret = gather_clusters(&col);
	if (ret) {
		err_msg("%s", strerror(ret < 0 ? -ret : ret));
		goto out;
	}
	if (c->json)
		print_scan_json(c, c->argv[0], col.v, col.n, &sum);
	else if (WANT_CSV(c))
		print_csv(&col);
	else
		print_scan_text(col.v, col.n);
	if (c->verbose)
		print_summary(&col, &sum);
	if (fflush(stdout) || ferror(stdout)) {
		err_msg("writing the output: %s", strerror(errno));
		goto out;
	}
	code = 0;
out:
	free_clusters(&col);
	if (col.idx)
		im_index_free(col.idx);
	close(fd);
	return code;
}
