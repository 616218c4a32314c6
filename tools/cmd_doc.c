/**
 * @file cmd_doc.c
 * The per-file subcommands of `imatch`: sign, explain and terms. Files named
 * on the command line are read through the same im_signer calls the scanner
 * uses; a symbolic link named on the command line is followed (the user asked
 * for that file), which the scanner never does inside a tree.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "extract.h"
#include "imatch.h"
#include "scope.h"
#include "sig.h"
#include "text.h"

/*
 * Resolve a command-line file: the result is a malloc'ed absolute path with
 * no symlink left in it, to a regular file. Prints the reason and returns
 * NULL otherwise.
 */
static char *resolve_file(const char *path)
{
	struct stat st;
	char *real;

	if (stat(path, &st)) {
		err_msg("%s: %s", path, strerror(errno));
		return NULL;
	}
	if (!S_ISREG(st.st_mode)) {
		/* The words strerror() gives where the signer says it. */
		err_msg("%s: %s", path,
			S_ISDIR(st.st_mode) ? strerror(EISDIR)
					    : "not a regular file");
		return NULL;
	}
	real = realpath(path, NULL);
	if (!real)
		err_msg("%s: %s", path, strerror(errno));
	return real;
}

static const char *status_name(unsigned status)
{
	static const char *const names[] = {"signed",  "rejected", "binary",
					    "too big", "error",	   "failed"};

	return status < IM_DOC_STATUS_COUNT ? names[status] : "?";
}

int cmd_sign(struct cli *c)
{
	struct im_lexicon *lex = NULL;
	struct im_signer *s = NULL;
	char hex[IM_SIG_HEX_LEN + 1];
	struct im_doc_sigs d;
	int code = EXIT_RUNTIME, failed = 0, ret;

	if (c->records)
		return cmd_sign_records(c);
	if (!c->argc) {
		err_msg("sign: missing operand");
		return EXIT_USAGE;
	}
	if (load_lexicon(c, &lex))
		return EXIT_RUNTIME;
	ret = im_signer_new(lex, &c->p, &s);
	if (ret) {
		err_msg("%s", strerror(-ret));
		goto out;
	}
	for (int i = 0; i < c->argc; i++) {
		char *real;

		/* --exclude/--include on the path as given. */
		if (c->p.scope &&
		    im_scope_excluded_path(c->p.scope, c->argv[i], false)) {
			if (c->verbose)
				err_msg("%s: excluded", c->argv[i]);
			continue;
		}
		real = resolve_file(c->argv[i]);
		if (!real) {
			failed = 1;
			continue;
		}
		ret = im_signer_sign_at(s, AT_FDCWD, real, &d, NULL);
		free(real);
		if (ret) {
			err_msg("%s: %s", c->argv[i], strerror(-ret));
			goto out;
		}
		if (d.status == IM_DOC_ERROR) {
			err_msg("%s: %s", c->argv[i], strerror(d.err));
			failed = 1;
			continue;
		}
		if (c->verbose && d.status != IM_DOC_SIGNED)
			err_msg("%s: %s", c->argv[i], status_name(d.status));
		put_text_path(stdout, c->argv[i]);
		for (unsigned k = 0; k <= c->p.k; k++) {
			if (k < d.ncoords && (d.valid >> k & 1)) {
				im_sig_hex(&d.sig[k], hex);
				printf("\t%s", hex);
			} else {
				fputs("\t-", stdout);
			}
		}
		putchar('\n');
	}
	if (fflush(stdout)) {
		err_msg("writing the output: %s", strerror(errno));
		goto out;
	}
	code = failed ? EXIT_RUNTIME : 0;
out:
	if (s)
		im_signer_free(s);
	im_lexicon_free(lex);
	return code;
}

/* ---- explain --------------------------------------------------------------- */

static int print_term(void *arg, unsigned k, const struct im_lex_term *t)
{
	(void)arg;
	(void)k;
	if (t->kind == IM_LEX_SECONDARY)
		printf(" %s(B#%" PRIu32 ")", t->str, t->rank);
	else
		printf(" %s", t->str);
	return 0;
}

/* The first lines of @p path's extracted text, as the signer saw it. */
static void print_text_head(const char *path, uint64_t max_size)
{
	struct im_extractor *x = NULL;
	struct im_extract_result r;
	char *buf = NULL;
	size_t len = 0, shown = 0;
	FILE *f = fopen(path, "rb");

	if (!f)
		return;
	buf = malloc(max_size && max_size < (64u << 20) ? max_size + 1
							: (64u << 20) + 1);
	if (buf)
		len = fread(buf, 1,
			    max_size && max_size < (64u << 20) ? max_size
							       : 64u << 20,
			    f);
	fclose(f);
	if (!buf || im_extractor_new(NULL, &x) ||
	    im_extract(x, path, buf, len, &r))
		goto out;
	if (r.fail) {
		/* The failure itself is printed above; not why a helper
		 * could not start, which only this extractor knows. */
		if (im_extractor_sandbox_error(x))
			printf("text: no helper could start: %s\n",
			       im_extractor_sandbox_error(x));
		goto out;
	}
	printf("text:\n");
	for (size_t i = 0; i < r.len && shown < 5;) {
		const char *nl = memchr(r.text + i, '\n', r.len - i);
		size_t n = nl ? (size_t)(nl - r.text) - i : r.len - i;
		size_t k = 0;

		/* The line that starts a sheet's figures is blank too. */
		while (k < n &&
		       (r.text[i + k] == ' ' || r.text[i + k] == '\t' ||
			r.text[i + k] == '\r' ||
			r.text[i + k] == IM_EXTRACT_NUMBERS))
			k++;
		if (k < n) {
			printf("  %.*s%s\n", (int)(n - k > 100 ? 100 : n - k),
			       r.text + i + k, n - k > 100 ? "..." : "");
			shown++;
		}
		i += n + 1;
	}
out:
	im_extractor_free(x);
	free(buf);
}

int cmd_explain(struct cli *c)
{
	struct im_coord_info info[IM_MAX_COORDS];
	struct im_lexicon *lex = NULL;
	struct im_signer *s = NULL, *ts = NULL;
	const struct im_terms *u = NULL;
	enum im_doc_status st;
	struct im_doc_sigs d, d2;
	char hex[IM_SIG_HEX_LEN + 1];
	const char *file = c->argv[0];
	char *real = NULL;
	int code = EXIT_RUNTIME, ret;

	if (c->argc == 2) {
		if (load_lexicon(c, &lex))
			return EXIT_RUNTIME;
		code = explain_pair(c, lex);
		im_lexicon_free(lex);
		return code;
	}
	real = resolve_file(file);
	if (!real)
		return EXIT_RUNTIME;
	if (load_lexicon(c, &lex))
		goto out;
	ret = im_signer_new(lex, &c->p, &s);
	if (!ret)
		ret = im_signer_new(lex, &c->p, &ts);
	if (!ret)
		ret = im_signer_sign_at(s, AT_FDCWD, real, &d, NULL);
	if (ret) {
		err_msg("%s: %s", file, strerror(-ret));
		goto out;
	}
	printf("file: ");
	put_text_path(stdout, file);
	printf("\nformat: %s\nstatus: %s\n", im_format_name(d.format),
	       status_name(d.status));
	if (d.status == IM_DOC_ERROR) {
		err_msg("%s: %s", file, strerror(d.err));
		goto out;
	}
	if (d.status == IM_DOC_BINARY) {
		printf("reason: no known format: only byte-identical copies "
		       "relate to it\n");
		code = 0;
		goto out;
	}
	if (d.status == IM_DOC_TOO_BIG) {
		printf("reason: larger than --max-size (%" PRIu64 " bytes)\n",
		       c->p.max_size);
		code = 0;
		goto out;
	}
	if (d.status == IM_DOC_FAILED) {
		printf("reason: extraction failed: %s; only byte-identical "
		       "copies relate to it\n",
		       im_extract_fail_name((enum im_extract_fail)d.err));
		code = 0;
		goto out;
	}
	if (d.exact_valid) {
		printf("exact: ");
		for (int i = 0; i < 16; i++)
			printf("%02x", d.exact[i]);
		putchar('\n');
	}
	/* The terms come from a second signer: they stay valid while the
	 * first one signs them with the per-coordinate details. */
	ret = im_signer_terms_at(ts, AT_FDCWD, real, &st, &u);
	if (!ret)
		ret = im_signer_sign_terms(s, u, &d2, info);
	if (ret) {
		err_msg("%s: %s", file, strerror(-ret));
		goto out;
	}
	printf("unique terms: %" PRIu32 "\n", d2.unique_terms);
	print_text_head(real, c->p.max_size);
	printf("lexicon: %zu primary, %zu secondary terms, from %" PRIu64
	       " documents\n",
	       im_lexicon_primary_size(lex), im_lexicon_secondary_size(lex),
	       im_lexicon_docs(lex));
	if (d2.unique_terms < c->p.min_unique)
		printf("note: fewer than %u unique terms (--min-unique): "
		       "every coordinate is rejected\n",
		       c->p.min_unique);
	printf("coord\tprimary\tsecondary\t|S|\tratio\tsignature\n");
	for (unsigned k = 0; k < d2.ncoords; k++) {
		const struct im_coord_info *ci = &info[k];
		double ratio = d2.unique_terms
				       ? (double)ci->size / d2.unique_terms
				       : 0.0;

		printf("%u\t%" PRIu32 "\t%" PRIu32 "\t%" PRIu32 "\t%.3f\t", k,
		       ci->primary, ci->secondary, ci->size, ratio);
		if (d2.valid >> k & 1) {
			im_sig_hex(&d2.sig[k], hex);
			printf("%s\n", hex);
		} else {
			printf("- (rejected: %s)\n",
			       ci->why ? ci->why : "no signature");
		}
	}
	if (c->verbose) {
		for (unsigned k = 0; k < d2.ncoords; k++) {
			printf("S[%u]:", k);
			im_signer_foreach_term(s, k, print_term, NULL);
			putchar('\n');
		}
	}
	code = 0;
out:
	if (ts)
		im_signer_free(ts);
	if (s)
		im_signer_free(s);
	if (lex)
		im_lexicon_free(lex);
	free(real);
	return code;
}

/* ---- terms ----------------------------------------------------------------- */

struct term_ref {
	const char *s;
	uint32_t len;
};

static int cmp_term(const void *a, const void *b)
{
	const struct term_ref *x = a, *y = b;
	uint32_t n = x->len < y->len ? x->len : y->len;
	int r = memcmp(x->s, y->s, n);

	if (r)
		return r;
	return x->len < y->len ? -1 : x->len > y->len;
}

int cmd_terms(struct cli *c)
{
	struct im_signer *s = NULL;
	struct term_ref *v = NULL;
	const struct im_terms *u;
	enum im_doc_status st;
	int code = EXIT_RUNTIME, failed = 0, ret;

	ret = im_signer_new(NULL, &c->p, &s);
	if (ret) {
		err_msg("%s", strerror(-ret));
		return EXIT_RUNTIME;
	}
	for (int i = 0; i < c->argc; i++) {
		char *real = resolve_file(c->argv[i]);
		struct term_ref *nv;

		if (!real) {
			failed = 1;
			continue;
		}
		ret = im_signer_terms_at(s, AT_FDCWD, real, &st, &u);
		free(real);
		if (ret) {
			err_msg("%s: %s", c->argv[i], strerror(-ret));
			goto out;
		}
		if (st == IM_DOC_ERROR) {
			err_msg("%s: cannot read", c->argv[i]);
			failed = 1;
			continue;
		}
		/* A document read as no text is said, whatever -v: its line
		 * alone would pass for one without words. */
		if (st == IM_DOC_FAILED)
			err_msg("%s: extraction failed: %s", c->argv[i],
				im_extract_fail_name(
					(enum im_extract_fail)im_signer_last_fail(s)));
		else if (st != IM_DOC_SIGNED && c->verbose)
			err_msg("%s: %s", c->argv[i], status_name(st));
		put_text_path(stdout, c->argv[i]);
		if (st == IM_DOC_SIGNED && u->n) {
			nv = realloc(v, u->n * sizeof(*v));
			if (!nv) {
				err_msg("%s", strerror(ENOMEM));
				goto out;
			}
			v = nv;
			for (size_t j = 0; j < u->n; j++)
				v[j] = (struct term_ref){im_terms_str(u, j),
							 u->v[j].len};
			sort_n(v, u->n, sizeof(*v), cmp_term);
			for (size_t j = 0; j < u->n; j++) {
				putchar('\t');
				fwrite(v[j].s, 1, v[j].len, stdout);
			}
		}
		putchar('\n');
	}
	if (fflush(stdout)) {
		err_msg("writing the output: %s", strerror(errno));
		goto out;
	}
	code = failed ? EXIT_RUNTIME : 0;
out:
	free(v);
	if (s)
		im_signer_free(s);
	return code;
}
