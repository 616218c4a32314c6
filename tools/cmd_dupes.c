/**
 * @file cmd_dupes.c
 * `imatch dupes DIR`: the by-doc relation (DESIGN §2) of a tree, through the
 * same scan and index as `imatch scan` and the daemon; and `imatch explain
 * A B`: why two files are linked or not.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "extract.h"
#include "imatch.h"
#include "index.h"
#include "sig.h"

/* ---- dupes ----------------------------------------------------------------- */

struct paths {
	char **v;
	size_t n, cap;
};

/* The documents, as a mount gives them a by-doc/ entry: binary files and
 * failed extractions are only others' dupes (their exact copies). */
static int add_path(const char *path, const struct im_doc_sigs *d, void *arg)
{
	struct paths *p = arg;

	if (d->status != IM_DOC_SIGNED && d->status != IM_DOC_REJECTED)
		return 0;
	if (p->n == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 256;
		char **v = realloc(p->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		p->v = v;
		p->cap = cap;
	}
	if (!(p->v[p->n] = strdup(path)))
		return -ENOMEM;
	p->n++;
	return 0;
}

static int add_link(const struct im_link *l, void *arg)
{
	struct dupes *ds = arg;

	if (ds->n == ds->cap) {
		size_t cap = ds->cap ? 2 * ds->cap : 16;
		struct dupe *v = realloc(ds->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		ds->v = v;
		ds->cap = cap;
	}
	if (!(ds->v[ds->n].path = strdup(l->path)))
		return -ENOMEM;
	ds->v[ds->n].similarity = l->similarity;
	ds->v[ds->n].exact = l->exact;
	ds->n++;
	return 0;
}

int cmp_dupe(const void *a, const void *b)
{
	return strcmp(((const struct dupe *)a)->path,
		      ((const struct dupe *)b)->path);
}

static void dupes_clear(struct dupes *ds)
{
	for (size_t i = 0; i < ds->n; i++)
		free(ds->v[i].path);
	ds->n = 0;
}

void put_dupes_doc(FILE *f, const struct cli *c, const char *path,
		   const struct dupes *ds)
{
	if (WANT_CSV(c)) {
		for (size_t i = 0; i < ds->n; i++) {
			put_csv(f, path);
			fputc(',', f);
			put_csv(f, ds->v[i].path);
			fprintf(f, ",%.4f,%s\n", ds->v[i].similarity,
				ds->v[i].exact ? "exact" : "near");
		}
		return;
	}
	if (!c->json) {
		put_text_path(f, path);
		for (size_t i = 0; i < ds->n; i++) {
			fputc('\t', f);
			put_text_path(f, ds->v[i].path);
		}
		fputc('\n', f);
		return;
	}
	fputs("{\"path\": ", f);
	put_json_string(f, path);
	fputs(", \"dupes\": [", f);
	for (size_t i = 0; i < ds->n; i++) {
		fputs(i ? ", {\"path\": " : "{\"path\": ", f);
		put_json_string(f, ds->v[i].path);
		fprintf(f, ", \"similarity\": %.4f, \"kind\": \"%s\"}",
			ds->v[i].similarity, ds->v[i].exact ? "exact" : "near");
	}
	fputs("]}", f);
}

void print_dupes_doc(const struct cli *c, const char *path,
		     const struct dupes *ds, bool first)
{
	if (c->json && !WANT_CSV(c))
		fputs(first ? "\n    " : ",\n    ", stdout);
	put_dupes_doc(stdout, c, path, ds);
}

int cmd_dupes(struct cli *c)
{
	struct im_index *idx = NULL;
	struct paths ps = {0};
	struct dupes ds = {0};
	size_t shown = 0;
	int fd, ret, code = EXIT_RUNTIME;

	fd = open(c->argv[0], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		err_msg("%s: %s", c->argv[0], strerror(errno));
		return EXIT_RUNTIME;
	}
	if (scan_tree(c, fd, &idx, NULL, NULL))
		goto out;
	/* Paths first: index callbacks must not call the index. */
	ret = im_index_foreach_doc(idx, add_path, &ps);
	if (ret) {
		err_msg("%s", strerror(-ret));
		goto out;
	}
	sort_n(ps.v, ps.n, sizeof(*ps.v), cmp_strp);
	if (WANT_CSV(c) && !c->json)
		puts("path,dupe,similarity,kind");
	if (c->json) {
		fputs("{\n  \"root\": ", stdout);
		put_json_string(stdout, c->argv[0]);
		printf(",\n  \"similarity\": %g,\n  \"documents\": [",
		       c->p.similarity);
	}
	for (size_t i = 0; i < ps.n; i++) {
		dupes_clear(&ds);
		ret = im_index_links(idx, ps.v[i], add_link, &ds);
		if (ret) {
			err_msg("%s", strerror(ret < 0 ? -ret : ret));
			goto out;
		}
		if (!ds.n)
			continue;
		sort_n(ds.v, ds.n, sizeof(*ds.v), cmp_dupe);
		print_dupes_doc(c, ps.v[i], &ds, shown++ == 0);
	}
	if (c->json)
		fputs(shown ? "\n  ]\n}\n" : "]\n}\n", stdout);
	if (fflush(stdout)) {
		err_msg("writing the output: %s", strerror(errno));
		goto out;
	}
	code = 0;
out:
	dupes_clear(&ds);
	free(ds.v);
	for (size_t i = 0; i < ps.n; i++)
		free(ps.v[i]);
	free(ps.v);
	if (idx)
		im_index_free(idx);
	close(fd);
	return code;
}

/* ---- explain A B ----------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* |A ∩ B| of two term sets, by their terms' 64-bit hashes. */
static int common_terms(const struct im_terms *a, const struct im_terms *b,
			size_t *out)
{
	uint64_t *h = malloc((a->n ? a->n : 1) * sizeof(*h));
	size_t n = 0;

	if (!h)
		return -ENOMEM;
	for (size_t i = 0; i < a->n; i++)
		h[i] = a->v[i].hash;
	sort_n(h, a->n, sizeof(*h), cmp_u64);
	for (size_t i = 0; i < b->n; i++)
		n += bsearch(&b->v[i].hash, h, a->n, sizeof(*h), cmp_u64) !=
		     NULL;
	free(h);
	*out = n;
	return 0;
}

struct side {
	const char *name;
	struct im_signer *s, *ts; /* ts holds the terms while s signs */
	const struct im_terms *u;
	struct im_doc_sigs d;
	struct im_coord_info info[IM_MAX_COORDS];
};

static int sign_side(struct cli *c, const struct im_lexicon *lex,
		     struct side *x)
{
	enum im_doc_status st;
	struct im_doc_sigs raw;
	int ret;

	ret = im_signer_new(lex, &c->p, &x->s);
	if (!ret)
		ret = im_signer_new(lex, &c->p, &x->ts);
	if (!ret)
		ret = im_signer_sign_at(x->s, AT_FDCWD, x->name, &raw, NULL);
	if (ret) {
		err_msg("%s: %s", x->name, strerror(-ret));
		return -1;
	}
	if (raw.status == IM_DOC_ERROR) {
		err_msg("%s: %s", x->name, strerror(raw.err));
		return -1;
	}
	x->d = raw;
	if (raw.status != IM_DOC_SIGNED && raw.status != IM_DOC_REJECTED)
		return 0;
	/* Again from the terms, for the per-coordinate details. */
	ret = im_signer_terms_at(x->ts, AT_FDCWD, x->name, &st, &x->u);
	if (!ret && x->u)
		ret = im_signer_sign_terms(x->s, x->u, &x->d, x->info);
	if (ret) {
		err_msg("%s: %s", x->name, strerror(-ret));
		return -1;
	}
	x->d.exact_valid = raw.exact_valid;
	memcpy(x->d.exact, raw.exact, sizeof(raw.exact));
	x->d.size = raw.size;
	x->d.mtime_ns = raw.mtime_ns;
	return 0;
}

/* What became of a file, with the reason a failure or an error has, as
 * `imatch explain FILE` and `scan -v` give it. */
static void put_doc_state(const struct im_doc_sigs *d)
{
	switch (d->status) {
	case IM_DOC_SIGNED: fputs("signed", stdout); break;
	case IM_DOC_REJECTED: fputs("every coordinate rejected", stdout); break;
	case IM_DOC_BINARY: fputs("binary (no known format)", stdout); break;
	case IM_DOC_TOO_BIG: fputs("larger than --max-size", stdout); break;
	case IM_DOC_FAILED:
		printf("extraction failed: %s",
		       im_extract_fail_name((enum im_extract_fail)d->err));
		break;
	default: printf("unreadable: %s", strerror(d->err)); break;
	}
}

/* Whether two files have the same bytes, as far as their reading tells. */
static const char *bytes_verdict(const struct im_doc_sigs *a,
				 const struct im_doc_sigs *b)
{
	if (a->exact_valid && b->exact_valid)
		return memcmp(a->exact, b->exact, sizeof(a->exact))
			       ? "different"
			       : "identical";
	if (a->size != b->size)
		return "different (other sizes)";
	if (a->size == 0)
		return "identical (both empty; empty files are not linked as "
		       "copies)";
	if (a->status == IM_DOC_TOO_BIG || b->status == IM_DOC_TOO_BIG)
		return "not compared (larger than --max-size: not read)";
	return "not compared (not hashed)";
}

int explain_pair(struct cli *c, const struct im_lexicon *lex)
{
	struct side a = {.name = c->argv[0]}, b = {.name = c->argv[1]};
	struct im_cand_key ka[IM_MAX_KEYS], kb[IM_MAX_KEYS];
	char ha[IM_SIG_HEX_LEN + 1], hb[IM_SIG_HEX_LEN + 1];
	unsigned na, nb, shared = 0;
	double sim;
	bool exact, linked;
	size_t common = 0;
	int code = EXIT_RUNTIME;

	if (sign_side(c, lex, &a) || sign_side(c, lex, &b))
		goto out;
	for (int i = 0; i < 2; i++) {
		const struct side *x = i ? &b : &a;

		printf("%s: ", i ? "b" : "a");
		put_text_path(stdout, x->name);
		fputs("\n  ", stdout);
		put_doc_state(&x->d);
		printf(", %" PRIu32 " unique terms\n", x->d.unique_terms);
	}
	if (a.u && b.u && common_terms(a.u, b.u, &common)) {
		err_msg("%s", strerror(ENOMEM));
		goto out;
	}
	printf("common terms: %zu\n", common);
	printf("cosine of the term sets: %.4f\n",
	       a.d.unique_terms && b.d.unique_terms
		       ? common / sqrt((double)a.d.unique_terms *
				       b.d.unique_terms)
		       : 0.0);
	printf("bytes: %s\n", bytes_verdict(&a.d, &b.d));
	if (a.d.sketch.n && b.d.sketch.n)
		printf("sketch: %u of %u bins agree (bands), map levels %u "
		       "and %u, Jaccard %.4f, similarity %.4f (threshold %g)\n",
		       im_sketch_agree(&a.d.sketch, &b.d.sketch),
		       IM_SKETCH_BINS, im_sketch_level(a.d.sketch.n),
		       im_sketch_level(b.d.sketch.n),
		       im_sketch_jaccard(&a.d.sketch, &b.d.sketch),
		       im_sketch_similarity(&a.d.sketch, &b.d.sketch),
		       c->p.similarity);
	else
		printf("sketch: none for %s (a file without terms has no "
		       "sketch)\n",
		       a.d.sketch.n   ? "b"
		       : b.d.sketch.n ? "a"
				      : "a and b");

	printf("coord\ta\tb\n");
	for (unsigned k = 0; k < a.d.ncoords; k++) {
		bool va = a.d.valid >> k & 1, vb = b.d.valid >> k & 1;

		if (va)
			im_sig_hex(&a.d.sig[k], ha);
		if (vb)
			im_sig_hex(&b.d.sig[k], hb);
		printf("%u\t%s\t%s\t%s\n", k,
		       va	       ? ha
		       : a.info[k].why ? a.info[k].why
				       : "-",
		       vb	       ? hb
		       : b.info[k].why ? b.info[k].why
				       : "-",
		       va && vb ? (!strcmp(ha, hb) ? "equal" : "differ")
				: "rejected");
	}

	na = im_doc_keys(&a.d, ka);
	nb = im_doc_keys(&b.d, kb);
	printf("shared candidate keys:");
	for (unsigned i = 0; i < na; i++) {
		for (unsigned j = 0; j < nb; j++) {
			if (ka[i].kind != kb[j].kind || ka[i].k != kb[j].k ||
			    memcmp(ka[i].b, kb[j].b, ka[i].len))
				continue;
			if (ka[i].kind == IM_KEY_EXACT)
				printf(" exact");
			else
				printf(" %s %u",
				       ka[i].kind == IM_KEY_COORD ? "coord"
								  : "band",
				       ka[i].k);
			shared++;
		}
	}
	printf("%s\n", shared ? "" : " none");
	linked = im_doc_link(&a.d, &b.d, c->p.similarity, &sim, &exact);
	if (!shared)
		printf("linked: no (never compared: no shared key)\n");
	else if (linked)
		printf("linked: yes, %s, similarity %.4f\n",
		       exact ? "exact" : "near", sim);
	else
		printf("linked: no (similarity %.4f below %g)\n", sim,
		       c->p.similarity);
	printf("note: in a tree, a key held by more than %d files compares "
	       "each only with the first %d by path\n",
	       IM_INDEX_HOT_CAP, IM_INDEX_HOT_CAP);
	code = 0;
out:
	for (int i = 0; i < 2; i++) {
		struct side *x = i ? &b : &a;

		if (x->s)
			im_signer_free(x->s);
		if (x->ts)
			im_signer_free(x->ts);
	}
	return code;
}
