/**
 * @file cmd_stage.c
 * The batch stage commands (/work/shared/SCALE.md): `imatch ls`, `df`,
 * `df merge`, `lexicon build --from-df` (its input half) and `cat`. Each
 * reads files and writes stage files (core/scale/stage.h), so that any
 * scheduler can run them over shards of a tree too large for one process.
 *
 * Exit codes follow SCALE.md: a document that cannot be read is counted and
 * the command still exits 0; what a retry can fix (writing an output, memory)
 * exits 1; a bad command line exits 2.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "imatch.h"
#include "scan.h"
#include "shard.h"
#include "stage.h"
#include "stage_rec.h"

/* Meta words of a manifest (IM_STAGE_MANIFEST). */
enum {
	MAN_FILES,
	MAN_DIRS,
	MAN_HIDDEN,
	MAN_OTHER,
	MAN_ERRORS,
	MAN_SHARDS,
	MAN_BYTES,
};
static const char *const man_meta[] = {
	"files", "directories", "hidden", "other", "errors", "shards", "bytes"};

/* Meta words of document frequencies (IM_STAGE_DF). */
enum {
	DF_DOCS,  /* N: documents with at least one term */
	DF_FILES, /* files listed */
	DF_ERRORS,
};
static const char *const df_meta[] = {"documents", "files", "errors"};

int open_root(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		err_msg("%s: %s", dir, strerror(errno));
	return fd;
}

/* Open a stage file, saying why not in one line naming it. */
struct im_stage_reader *open_stage(const char *path)
{
	struct im_stage_reader *r = NULL;
	char why[160] = "";
	int ret = im_stage_open(path, &r, why, sizeof(why));

	if (ret) {
		err_msg("%s: %s", path, why[0] ? why : strerror(-ret));
		return NULL;
	}
	return r;
}

int write_failed(const char *path, int err)
{
	err_msg("%s: %s", path, strerror(-err));
	return EXIT_RUNTIME;
}

/* ---- ls ---------------------------------------------------------------------- */

struct ls_ctx {
	struct im_stage_writer *w;
	struct im_stage_buf rec;
	const char *shards; /* directory, or NULL */
	uint64_t shard_bytes;
	FILE *shard; /* the shard being filled */
	char *shard_path, *shard_tmp;
	uint32_t nshards;
	uint64_t in_shard; /* bytes in the current shard */
	uint64_t bytes;
	FILE *top_dirs;	  /* --top-dirs: the subdirectories found, or NULL */
	const char *base; /* the directory walked one level ("" the root) */
	int err;
};

static int shard_close(struct ls_ctx *x)
{
	int ret = 0;

	if (!x->shard)
		return 0;
	if (fflush(x->shard) || ferror(x->shard))
		ret = errno ? -errno : -EIO;
	if (fclose(x->shard) && !ret)
		ret = -errno;
	x->shard = NULL;
	if (!ret && rename(x->shard_tmp, x->shard_path))
		ret = -errno;
	if (ret) {
		unlink(x->shard_tmp);
		err_msg("%s: %s", x->shard_path, strerror(-ret));
	}
	return ret;
}

static int shard_open(struct ls_ctx *x)
{
	size_t len = strlen(x->shards) + 64;

	free(x->shard_path);
	free(x->shard_tmp);
	x->shard_path = malloc(len);
	x->shard_tmp = malloc(len);
	if (!x->shard_path || !x->shard_tmp)
		return -ENOMEM;
	snprintf(x->shard_path, len, "%s/%06" PRIu32, x->shards, x->nshards);
	snprintf(x->shard_tmp, len, "%s.tmp.%ld", x->shard_path,
		 (long)getpid());
	x->shard = fopen(x->shard_tmp, "we");
	if (!x->shard) {
		int ret = -errno;

		err_msg("%s: %s", x->shard_tmp, strerror(errno));
		return ret;
	}
	x->nshards++;
	x->in_shard = 0;
	return 0;
}

static int ls_file(const char *path, const struct stat *st, void *arg)
{
	struct ls_ctx *x = arg;
	uint64_t size = (uint64_t)st->st_size;
	struct man_rec r = {
		.size = size,
		.mtime_ns = (uint64_t)st->st_mtim.tv_sec * 1000000000u +
			    (uint64_t)st->st_mtim.tv_nsec,
		.ino = st->st_ino,
		.path = path,
		.path_len = strlen(path),
	};
	int ret;

	/* A shard is full when this file would take it past the target; a
	 * file larger than the target gets a shard of its own. */
	if (x->shards && (!x->shard || (x->in_shard &&
					x->in_shard + size > x->shard_bytes))) {
		ret = shard_close(x);
		if (!ret)
			ret = shard_open(x);
		if (ret)
			return x->err = ret;
	}
	if (x->shard) {
		fwrite(path, 1, strlen(path) + 1, x->shard);
		x->in_shard += size;
	}
	x->bytes += size;
	r.shard = x->shards ? x->nshards - 1 : 0;
	x->rec.len = 0;
	man_rec_encode(&x->rec, &r);
	if (x->rec.oom)
		return x->err = -ENOMEM;
	ret = im_stage_writer_add(x->w, x->rec.p, x->rec.len);
	if (ret)
		x->err = ret;
	return ret;
}

/* --top-dirs: each subdirectory of the root, NUL-terminated. */
static int ls_top_dir(const char *path, const struct stat *st, void *arg)
{
	struct ls_ctx *x = arg;

	(void)st;
	if (!strcmp(path, x->base))
		return 0; /* the walked directory itself */
	if (fwrite(path, 1, strlen(path) + 1, x->top_dirs) != strlen(path) + 1)
		return x->err = -EIO;
	return 0;
}

static int cmp_str_ptr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Whether a directory of @p under lies inside another one it lists (whole
 * walks of both would list its files twice): @return the inner one, or
 * NULL (also when out of memory: the walks then run as listed).
 */
static const char *nested_dir(const struct im_shard *under)
{
	char **sorted = malloc((under->n ? under->n : 1) * sizeof(*sorted));
	const char *inner = NULL;

	if (!sorted)
		return NULL;
	memcpy(sorted, under->path, under->n * sizeof(*sorted));
	qsort(sorted, under->n, sizeof(*sorted), cmp_str_ptr);
	/* Each ancestor of each path, looked up among the paths (copied
	 * out: cut in place, the path would be out of order for the search). */
	for (size_t i = 0; i < under->n && !inner; i++) {
		const char *p = sorted[i];
		char *key = strdup(p);

		if (!key)
			break;
		for (const char *slash = strchr(p, '/'); slash && !inner;
		     slash = strchr(slash + 1, '/')) {
			key[slash - p] = '\0';
			if (bsearch(&key, sorted, under->n, sizeof(*sorted),
				    cmp_str_ptr))
				inner = p;
			key[slash - p] = '/';
		}
		free(key);
	}
	free(sorted);
	return inner;
}

/* Walk what the command line names: the tree, or the directories of
 * --under-from one after another; with --top-dirs one level of each. */
static int ls_walk(struct cli *c, int fd, struct ls_ctx *x,
		   struct im_scan_counts *k)
{
	struct im_walk_ops ops = {.file = ls_file, .arg = x};
	struct im_shard under = {0};
	char why[160] = "";
	int ret;

	if (c->top_dirs) {
		ops.one_level = true;
		ops.dir = ls_top_dir;
	}
	x->base = "";
	if (!c->under_from)
		return im_walk(fd, &c->p, &ops, k);
	ret = im_shard_load(c->under_from, &under, why, sizeof(why));
	if (ret) {
		err_msg("%s: %s", c->under_from, why[0] ? why : strerror(-ret));
		x->err = ret;
		return ret;
	}
	const char *inner = c->top_dirs ? NULL : nested_dir(&under);

	if (inner) {
		/* One level of each (--top-dirs) lists no file twice. */
		err_msg("%s: %s is inside another directory it lists",
			c->under_from, inner);
		im_shard_release(&under);
		return x->err = -EINVAL;
	}
	for (size_t i = 0; !ret && i < under.n; i++) {
		ops.under = x->base = under.path[i];
		ret = im_walk(fd, &c->p, &ops, k);
		if (ret && !x->err)
			err_msg("%s: %s", under.path[i], strerror(-ret));
	}
	im_shard_release(&under);
	return ret;
}

/* Write the --top-dirs list by rename, as the stage files are. */
static int ls_top_dirs_open(struct cli *c, struct ls_ctx *x, char **tmp)
{
	size_t len = strlen(c->top_dirs) + 32;

	*tmp = malloc(len);
	if (!*tmp)
		return -ENOMEM;
	snprintf(*tmp, len, "%s.tmp.%ld", c->top_dirs, (long)getpid());
	x->top_dirs = fopen(*tmp, "we");
	return x->top_dirs ? 0 : -errno;
}

static int ls_top_dirs_commit(struct cli *c, struct ls_ctx *x, const char *tmp)
{
	int ret = fflush(x->top_dirs) || ferror(x->top_dirs) ? -EIO : 0;

	if (fclose(x->top_dirs) && !ret)
		ret = -errno;
	x->top_dirs = NULL;
	if (!ret && rename(tmp, c->top_dirs))
		ret = -errno;
	return ret;
}

int cmd_ls(struct cli *c)
{
	struct im_stage_header h = {.kind = IM_STAGE_MANIFEST, .nparts = 1};
	struct ls_ctx x = {.shards = c->shards, .shard_bytes = c->shard_bytes};
	struct im_scan_counts k = {0};
	char *top_tmp = NULL;
	int fd, ret, code = EXIT_RUNTIME;

	fd = open_root(c->argv[0]);
	if (fd < 0)
		return EXIT_RUNTIME;
	if (c->shards && mkdir(c->shards, 0755) && errno != EEXIST) {
		err_msg("%s: %s", c->shards, strerror(errno));
		goto out;
	}
	if (c->top_dirs) {
		ret = ls_top_dirs_open(c, &x, &top_tmp);
		if (ret) {
			write_failed(top_tmp ? top_tmp : c->top_dirs, ret);
			goto out;
		}
	}
	h.key = im_terms_key(&c->p);
	ret = im_stage_writer_new(c->out, &h, &x.w);
	if (ret) {
		write_failed(c->out, ret);
		goto out;
	}
	ret = ls_walk(c, fd, &x, &k);
	if (!ret)
		ret = shard_close(&x);
	if (ret) {
		if (!x.err || ret == -ENOMEM)
			err_msg("%s: %s", c->argv[0], strerror(-ret));
		else if (x.err == -EIO && x.top_dirs)
			write_failed(top_tmp, x.err);
		goto out;
	}
	im_stage_writer_set_meta(x.w, MAN_FILES, k.files);
	im_stage_writer_set_meta(x.w, MAN_DIRS, k.dirs);
	im_stage_writer_set_meta(x.w, MAN_HIDDEN, k.hidden);
	im_stage_writer_set_meta(x.w, MAN_OTHER, k.other);
	im_stage_writer_set_meta(x.w, MAN_ERRORS, k.errors);
	im_stage_writer_set_meta(x.w, MAN_SHARDS, x.nshards);
	im_stage_writer_set_meta(x.w, MAN_BYTES, x.bytes);
	/* The directory list first: a manifest there says the task is done. */
	if (c->top_dirs) {
		ret = ls_top_dirs_commit(c, &x, top_tmp);
		if (ret) {
			write_failed(c->top_dirs, ret);
			goto out;
		}
	}
	ret = im_stage_writer_commit(x.w);
	if (ret) {
		write_failed(c->out, ret);
		goto out;
	}
	if (c->verbose)
		fprintf(stderr,
			"%s: %" PRIu64 " files, %" PRIu64 " bytes, %" PRIu32
			" shards\n",
			c->out, k.files, x.bytes, x.nshards);
	code = 0;
out:
	if (x.shard) {
		fclose(x.shard);
		unlink(x.shard_tmp);
	}
	if (x.top_dirs) {
		fclose(x.top_dirs);
		unlink(top_tmp);
	}
	free(top_tmp);
	free(x.shard_path);
	free(x.shard_tmp);
	im_stage_buf_release(&x.rec);
	im_stage_writer_free(x.w);
	close(fd);
	return code;
}

int manifest_lists(struct im_stage_reader *man, struct list_print **out,
		   uint32_t *n)
{
	uint64_t shards = im_stage_meta(man, MAN_SHARDS);
	struct list_print *v;
	const uint8_t *p;
	size_t len;

	if (shards > UINT32_MAX)
		return -EINVAL;
	*n = shards ? (uint32_t)shards : 1;
	v = calloc(*n, sizeof(*v));
	if (!v)
		return -ENOMEM;
	im_stage_rewind(man);
	while (im_stage_next(man, &p, &len)) {
		struct man_rec r;

		if (man_rec_decode(p, len, &r) || r.shard >= *n) {
			free(v);
			return -EINVAL;
		}
		v[r.shard].files++;
		v[r.shard].paths += im_list_path_hash(r.path, r.path_len);
	}
	*out = v;
	return 0;
}

int cmd_ls_merge(struct cli *c)
{
	struct im_stage_header h = {.kind = IM_STAGE_MANIFEST, .nparts = 1};
	struct im_stage_writer *w = NULL;
	struct im_stage_buf rec = {0};
	uint64_t meta[MAN_BYTES + 1] = {0};
	int ret = 0, code = EXIT_RUNTIME;

	h.key = im_terms_key(&c->p);
	ret = im_stage_writer_new(c->out, &h, &w);
	if (ret) {
		write_failed(c->out, ret);
		goto out;
	}
	/* Part by part, in the order given: each part's shards come after
	 * the ones before, numbered on. */
	for (int i = 0; i < c->argc; i++) {
		struct im_stage_reader *r = open_stage(c->argv[i]);
		const uint8_t *p;
		size_t len;

		if (!r)
			goto out;
		if (im_stage_header(r)->kind != IM_STAGE_MANIFEST ||
		    im_stage_header(r)->key != h.key) {
			err_msg("%s: %s", c->argv[i],
				im_stage_header(r)->kind != IM_STAGE_MANIFEST
					? "not a manifest"
					: "listed with other term options");
			im_stage_reader_free(r);
			goto out;
		}
		while (!ret && im_stage_next(r, &p, &len)) {
			struct man_rec m;

			if (man_rec_decode(p, len, &m)) {
				ret = -EINVAL;
				break;
			}
			m.shard += (uint32_t)meta[MAN_SHARDS];
			rec.len = 0;
			man_rec_encode(&rec, &m);
			ret = rec.oom ? -ENOMEM
				      : im_stage_writer_add(w, rec.p, rec.len);
		}
		for (unsigned m = 0; m <= MAN_BYTES; m++)
			meta[m] += im_stage_meta(r, m);
		im_stage_reader_free(r);
		if (ret == -EINVAL) {
			err_msg("%s: corrupt: a record too short", c->argv[i]);
			goto out;
		}
		if (ret) {
			write_failed(c->out, ret);
			goto out;
		}
	}
	for (unsigned m = 0; m <= MAN_BYTES; m++)
		im_stage_writer_set_meta(w, m, meta[m]);
	ret = im_stage_writer_commit(w);
	if (ret) {
		write_failed(c->out, ret);
		goto out;
	}
	code = 0;
out:
	im_stage_buf_release(&rec);
	im_stage_writer_free(w);
	return code;
}

/* ---- df ---------------------------------------------------------------------- */

struct term_ref {
	const char *s;
	uint32_t len;
	uint32_t count;
};

static int cmp_term_ref(const void *a, const void *b)
{
	const struct term_ref *x = a, *y = b;

	return df_term_cmp(x->s, x->len, y->s, y->len);
}

static int bucket_term(const char *s, uint32_t len, uint64_t hash,
		       uint32_t count, void *arg)
{
	struct im_stage_parts *pp = arg;
	struct term_ref t = {s, len, count};

	return im_stage_parts_push(pp, im_stage_part_of(hash, pp->nparts), &t);
}

static char *part_path(const char *prefix, uint32_t part)
{
	size_t len = strlen(prefix) + 16;
	char *s = malloc(len);

	if (s)
		snprintf(s, len, "%s.p%04" PRIu32, prefix, part);
	return s;
}

/* Write one sorted run of @p v (sorted here) to @p path. */
static int write_df_run(const char *path, const struct im_stage_header *h,
			struct term_ref *v, size_t n, const uint64_t *meta)
{
	struct im_stage_writer *w = NULL;
	struct im_stage_buf rec = {0};
	int ret;

	sort_n(v, n, sizeof(*v), cmp_term_ref);
	ret = im_stage_writer_new(path, h, &w);
	for (size_t i = 0; !ret && i < n; i++) {
		rec.len = 0;
		df_rec_encode(&rec, v[i].count, v[i].s, v[i].len);
		ret = rec.oom ? -ENOMEM
			      : im_stage_writer_add(w, rec.p, rec.len);
	}
	for (unsigned i = 0; !ret && i <= DF_ERRORS; i++)
		im_stage_writer_set_meta(w, i, meta[i]);
	if (!ret)
		ret = im_stage_writer_commit(w);
	im_stage_writer_free(w);
	im_stage_buf_release(&rec);
	return ret;
}

/* Count the terms of every listed file into @p df; per-file failures are
 * counted in meta[DF_ERRORS]. @return 0 or -ENOMEM. */
static int df_shard(struct cli *c, int rootfd, const struct im_shard *sh,
		    struct im_df *df, uint64_t *meta)
{
	struct im_signer *s = NULL;
	struct im_tree t;
	int ret;

	ret = im_signer_new(NULL, &c->p, &s);
	if (ret)
		return ret;
	im_tree_init(&t, rootfd);
	for (size_t i = 0; i < sh->n && !ret; i++) {
		const struct im_terms *u = NULL;
		enum im_doc_status status = IM_DOC_ERROR;
		const char *name;
		int dfd;

		meta[DF_FILES]++;
		ret = im_tree_dir(&t, sh->path[i], &dfd, &name);
		if (ret == -ENOMEM)
			break;
		if (ret) {
			meta[DF_ERRORS]++;
			ret = 0;
			continue;
		}
		ret = im_signer_terms_at(s, dfd, name, &status, &u);
		if (ret)
			break;
		if (status == IM_DOC_ERROR)
			meta[DF_ERRORS]++;
		/* As im_scan_df: documents without a term are not in N. */
		if (status == IM_DOC_SIGNED && u && u->n)
			ret = im_df_add(df, u);
	}
	im_tree_release(&t);
	im_signer_free(s);
	meta[DF_DOCS] = im_df_docs(df);
	return ret;
}

int cmd_df(struct cli *c)
{
	struct im_stage_header h = {.kind = IM_STAGE_DF, .nparts = c->parts};
	struct im_stage_parts b = {0};
	struct im_shard sh = {0};
	struct im_df *df = NULL;
	uint64_t meta[DF_ERRORS + 1] = {0};
	char why[160] = "";
	int fd, ret, code = EXIT_RUNTIME;

	fd = open_root(c->root);
	if (fd < 0)
		return EXIT_RUNTIME;
	ret = im_shard_load(c->files_from, &sh, why, sizeof(why));
	if (ret) {
		err_msg("%s: %s", c->files_from, why);
		goto out;
	}
	ret = -ENOMEM;
	if (im_stage_parts_init(&b, c->parts, sizeof(struct term_ref)) ||
	    im_df_new(&df))
		goto fail;
	ret = df_shard(c, fd, &sh, df, meta);
	if (!ret)
		ret = im_df_foreach(df, bucket_term, &b);
	if (ret)
		goto fail;
	h.key = im_terms_key(&c->p);
	for (uint32_t p = 0; p < c->parts; p++) {
		char *path = part_path(c->out, p);

		h.part = p;
		ret = path ? write_df_run(path, &h, b.p[p].v, b.p[p].n, meta)
			   : -ENOMEM;
		if (ret) {
			write_failed(path ? path : c->out, ret);
			free(path);
			goto out;
		}
		free(path);
	}
	if (c->verbose)
		fprintf(stderr,
			"%s: %" PRIu64 " files, %" PRIu64 " documents, %zu "
			"terms, %" PRIu64 " errors\n",
			c->files_from, meta[DF_FILES], meta[DF_DOCS],
			im_df_terms(df), meta[DF_ERRORS]);
	code = 0;
	goto out;
fail:
	err_msg("%s: %s", c->files_from, strerror(-ret));
out:
	im_stage_parts_release(&b);
	im_df_free(df);
	im_shard_release(&sh);
	close(fd);
	return code;
}

/* ---- df merge ---------------------------------------------------------------- */

/* One input run and its current term. */
struct run {
	struct im_stage_reader *r;
	const char *s;
	uint32_t len, count;
};

/* Advance to the next term. @return 1, 0 at the end, -EINVAL if corrupt. */
static int run_next(struct run *x)
{
	const uint8_t *p;
	size_t len, tlen;

	if (!im_stage_next(x->r, &p, &len))
		return 0;
	if (df_rec_decode(p, len, &x->count, &x->s, &tlen))
		return -EINVAL;
	x->len = (uint32_t)tlen;
	return 1;
}

/*
 * Open every input as a DF run and check that they belong together (one
 * partition of one kind of counting). On failure a line names the file.
 */
static int open_runs(struct cli *c, struct run *runs, uint64_t key,
		     bool same_part)
{
	const struct im_stage_header *h0 = NULL;

	for (int i = 0; i < c->argc; i++) {
		const struct im_stage_header *h;

		runs[i].r = open_stage(c->argv[i]);
		if (!runs[i].r)
			return -1;
		h = im_stage_header(runs[i].r);
		if (h->kind != IM_STAGE_DF) {
			err_msg("%s: a %s file, not document frequencies",
				c->argv[i], im_stage_kind_name(h->kind));
			return -1;
		}
		if (h->key != key) {
			err_msg("%s: counted with other term options "
				"(--min-word-len, --max-digits, --max-size)",
				c->argv[i]);
			return -1;
		}
		if (!h0) {
			h0 = h;
		} else if (h->nparts != h0->nparts ||
			   (same_part && h->part != h0->part)) {
			err_msg("%s: partition %" PRIu32 " of %" PRIu32
				", but %s is %" PRIu32 " of %" PRIu32,
				c->argv[i], h->part, h->nparts, c->argv[0],
				h0->part, h0->nparts);
			return -1;
		}
	}
	return 0;
}

static void close_runs(struct run *runs, int n)
{
	for (int i = 0; runs && i < n; i++)
		im_stage_reader_free(runs[i].r);
	free(runs);
}

/* Write one merged term; @return 0 or a negative errno. */
static int put_sum(struct im_stage_writer *w, struct im_stage_buf *rec,
		   uint64_t sum)
{
	if (sum > UINT32_MAX)
		return -EOVERFLOW;
	for (int i = 0; i < 4; i++)
		rec->p[i] = (uint8_t)(sum >> (8 * i));
	return im_stage_writer_add(w, rec->p, rec->len);
}

/*
 * Whether one run is among the operands twice (a shell glob overlapping
 * another, say): its counts would be added twice, and nothing in a run
 * tells its shard apart from another's. Runs are compared by the file,
 * not by their bytes: two shards of copies can count alike. @return 1
 * after naming it, else 0.
 */
static int run_given_twice(struct cli *c)
{
	struct stat *st = calloc((size_t)c->argc, sizeof(*st));
	int ret = 0;

	for (int i = 0; st && i < c->argc && !ret; i++) {
		if (stat(c->argv[i], &st[i])) {
			/* Opened a moment ago: then it is not twice. */
			memset(&st[i], 0, sizeof(st[i]));
			continue;
		}
		for (int j = 0; j < i && !ret; j++)
			if (st[j].st_ino == st[i].st_ino &&
			    st[j].st_dev == st[i].st_dev && st[j].st_nlink) {
				err_msg("%s: the same run as %s: its counts "
					"would be added twice",
					c->argv[i], c->argv[j]);
				ret = 1;
			}
	}
	free(st);
	return ret;
}

int cmd_df_merge(struct cli *c)
{
	struct im_stage_header h;
	struct im_stage_writer *w = NULL;
	struct im_stage_merge *m = NULL;
	struct im_stage_reader **rs = calloc((size_t)c->argc, sizeof(*rs));
	struct run *runs = calloc((size_t)c->argc, sizeof(*runs));
	struct im_stage_buf rec = {0};
	uint64_t meta[DF_ERRORS + 1] = {0}, sum = 0;
	const uint8_t *p;
	size_t len, from = 0;
	int ret = -ENOMEM, code = EXIT_RUNTIME;

	if (!rs || !runs)
		goto fail;
	if (open_runs(c, runs, im_terms_key(&c->p), true))
		goto out;
	if (run_given_twice(c))
		goto out;
	h = *im_stage_header(runs[0].r);
	for (int i = 0; i < c->argc; i++) {
		rs[i] = runs[i].r;
		for (unsigned k = 0; k <= DF_ERRORS; k++)
			meta[k] += im_stage_meta(rs[i], k);
	}
	ret = im_stage_merge_new(rs, (size_t)c->argc, df_rec_cmp, &m);
	if (ret)
		goto fail;
	ret = im_stage_writer_new(c->out, &h, &w);
	if (ret) {
		write_failed(c->out, ret);
		goto out;
	}
	while ((ret = im_stage_merge_next(m, &p, &len, &from)) > 0) {
		const char *term;
		size_t tlen;
		uint32_t count;

		if (df_rec_decode(p, len, &count, &term, &tlen)) {
			ret = -EINVAL;
			break;
		}
		/* A new term: write the last one's sum. */
		if (rec.len && df_rec_cmp(rec.p, rec.len, p, len)) {
			ret = put_sum(w, &rec, sum);
			if (ret)
				break;
			rec.len = 0;
		}
		if (!rec.len) {
			im_stage_buf_put(&rec, p, len);
			sum = 0;
			if (rec.oom) {
				ret = -ENOMEM;
				break;
			}
		}
		sum += count;
	}
	if (!ret && rec.len)
		ret = put_sum(w, &rec, sum);
	if (ret == -EINVAL) {
		err_msg("%s: corrupt: a bad or unsorted term record",
			c->argv[from]);
		goto out;
	}
	if (ret == -EOVERFLOW) {
		err_msg("df merge: a count passes 2^32 documents");
		goto out;
	}
	if (ret == -ENOMEM)
		goto fail;
	for (unsigned k = 0; !ret && k <= DF_ERRORS; k++)
		im_stage_writer_set_meta(w, k, meta[k]);
	if (!ret)
		ret = im_stage_writer_commit(w);
	if (ret) {
		write_failed(c->out, ret);
		goto out;
	}
	code = 0;
	goto out;
fail:
	err_msg("df merge: %s", strerror(-ret));
out:
	im_stage_merge_free(m);
	im_stage_writer_free(w);
	im_stage_buf_release(&rec);
	free(rs);
	close_runs(runs, c->argc);
	return code;
}

/* ---- lexicon build --from-df --------------------------------------------------- */

int df_from_stage(struct cli *c, struct im_df **out)
{
	struct run *runs = calloc((size_t)c->argc, sizeof(*runs));
	struct im_df *df = NULL;
	uint32_t nparts;
	uint64_t docs;
	unsigned char *seen = NULL;
	int ret = -ENOMEM;

	*out = NULL;
	if (!runs || im_df_new(&df))
		goto fail;
	if (open_runs(c, runs, im_terms_key(&c->p), false))
		goto out;
	nparts = im_stage_header(runs[0].r)->nparts;
	docs = im_stage_meta(runs[0].r, DF_DOCS);
	seen = calloc(nparts, 1);
	if (!seen)
		goto fail;
	for (int i = 0; i < c->argc; i++) {
		uint32_t part = im_stage_header(runs[i].r)->part;

		if (seen[part]++) {
			err_msg("%s: partition %" PRIu32 " given twice "
				"(give the output of 'df merge', one file "
				"per partition)",
				c->argv[i], part);
			goto out;
		}
		if (im_stage_meta(runs[i].r, DF_DOCS) != docs) {
			err_msg("%s: counts %" PRIu64 " documents, but %s "
				"counts %" PRIu64 ": not one collection",
				c->argv[i], im_stage_meta(runs[i].r, DF_DOCS),
				c->argv[0], docs);
			goto out;
		}
		while ((ret = run_next(&runs[i])) > 0) {
			ret = im_df_add_term(df, runs[i].s, runs[i].len,
					     runs[i].count);
			if (ret)
				goto fail;
		}
		if (ret < 0) {
			err_msg("%s: corrupt: a bad term record", c->argv[i]);
			goto out;
		}
	}
	if ((uint32_t)c->argc != nparts) {
		err_msg("lexicon build: %d of %" PRIu32 " partitions given",
			c->argc, nparts);
		goto out;
	}
	ret = im_df_add_docs(df, docs);
	if (ret)
		goto fail;
	*out = df;
	df = NULL;
	ret = 0;
	goto out;
fail:
	err_msg("lexicon build: %s", strerror(-ret));
out:
	if (*out == NULL)
		ret = -1;
	free(seen);
	im_df_free(df);
	close_runs(runs, c->argc);
	return ret;
}

/* ---- cat --------------------------------------------------------------------- */

/* A JSON string of @p len bytes that hold no NUL. */
static void put_json_bytes(FILE *f, const uint8_t *p, size_t len)
{
	char *s = strndup((const char *)p, len);

	if (!s) {
		fputs("null", f);
		return;
	}
	put_json_string(f, s);
	free(s);
}

static bool cat_manifest(FILE *f, const uint8_t *p, size_t len)
{
	struct man_rec r;

	if (man_rec_decode(p, len, &r))
		return false;
	if (!f)
		return true;
	fputs("{\"path\": ", f);
	put_json_bytes(f, (const uint8_t *)r.path, r.path_len);
	fprintf(f,
		", \"size\": %" PRIu64 ", \"mtime_ns\": %" PRIu64
		", \"ino\": %" PRIu64 ", \"shard\": %" PRIu32 "}",
		r.size, r.mtime_ns, r.ino, r.shard);
	return true;
}

static bool cat_df(FILE *f, const uint8_t *p, size_t len)
{
	const char *term;
	size_t tlen;
	uint32_t count;

	if (df_rec_decode(p, len, &count, &term, &tlen))
		return false;
	if (!f)
		return true;
	fputs("{\"term\": ", f);
	put_json_bytes(f, (const uint8_t *)term, tlen);
	fprintf(f, ", \"df\": %" PRIu32 "}", count);
	return true;
}

/* True when @p path begins with the lexicon file's magic. */
static bool is_lexicon(const char *path)
{
	char magic[8];
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	bool yes;

	if (fd < 0)
		return false;
	yes = read(fd, magic, 8) == 8 && !memcmp(magic, "IMLEXICN", 8);
	close(fd);
	return yes;
}

/* The lexicon is a stage output too (`lexicon build --from-df`). */
static int cat_lexicon(const char *path, bool check, bool head)
{
	struct im_lexicon *lex = NULL;
	char why[256] = "";
	size_t n;
	double lo, hi;
	int ret = im_lexicon_load(path, &lex, why, sizeof(why));

	if (ret) {
		err_msg("%s: %s", path, why[0] ? why : strerror(-ret));
		return -1;
	}
	if (check) {
		im_lexicon_free(lex);
		return 0;
	}
	n = im_lexicon_primary_size(lex) + im_lexicon_secondary_size(lex);
	im_lexicon_window(lex, &lo, &hi);
	fputs("{\"file\": ", stdout);
	put_json_string(stdout, path);
	printf(", \"kind\": \"lexicon\", \"documents\": %" PRIu64
	       ", \"nidf\": [%g, %g], \"primary\": %zu, \"secondary\": %zu",
	       im_lexicon_docs(lex), lo, hi, im_lexicon_primary_size(lex),
	       im_lexicon_secondary_size(lex));
	if (!head) {
		fputs(",\n \"terms\": [", stdout);
		for (size_t i = 0; i < n; i++) {
			const struct im_lex_term *t = im_lexicon_term(lex, i);

			fputs(i ? ",\n  {\"term\": " : "\n  {\"term\": ",
			      stdout);
			put_json_string(stdout, t->str);
			printf(", \"kind\": \"%s\", \"rank\": %" PRIu32
			       ", \"nidf\": %.6f}",
			       t->kind == IM_LEX_PRIMARY ? "primary"
							 : "secondary",
			       t->rank, t->nidf);
		}
		fputs(n ? "\n ]" : "]", stdout);
	}
	fputs("}\n", stdout);
	im_lexicon_free(lex);
	return 0;
}

static int cat_one(const char *path, bool check, bool head)
{
	struct im_stage_reader *r;
	const struct im_stage_header *h;
	const char *const *names = NULL;
	cat_record_fn rec = NULL;
	bool ok;
	size_t nnames = 0, len;
	const uint8_t *p;
	uint64_t i = 0;

	if (is_lexicon(path))
		return cat_lexicon(path, check, head);
	r = open_stage(path);
	if (!r)
		return -1;
	h = im_stage_header(r);
	switch (h->kind) {
	case IM_STAGE_MANIFEST:
		names = man_meta;
		nnames = sizeof(man_meta) / sizeof(*man_meta);
		rec = cat_manifest;
		break;
	case IM_STAGE_DF:
		names = df_meta;
		nnames = sizeof(df_meta) / sizeof(*df_meta);
		rec = cat_df;
		break;
	default: cat_detect_kind(h->kind, &names, &nnames, &rec); break;
	}
	if (check) {
		/* Every record must decode, not only the container. */
		while (im_stage_next(r, &p, &len) && rec(NULL, p, len))
			i++;
		if (i != im_stage_count(r))
			err_msg("%s: corrupt: record %" PRIu64
				" does not decode",
				path, i + 1);
		ok = i == im_stage_count(r);
		im_stage_reader_free(r);
		return ok ? 0 : -1;
	}
	fputs("{\"file\": ", stdout);
	put_json_string(stdout, path);
	printf(", \"kind\": \"%s\", \"version\": %d, \"part\": %" PRIu32
	       ", \"nparts\": %" PRIu32 ", \"key\": \"%016" PRIx64
	       "\", \"count\": %" PRIu64 ",\n \"meta\": {",
	       im_stage_kind_name(h->kind), IM_STAGE_VERSION, h->part,
	       h->nparts, h->key, im_stage_count(r));
	for (size_t m = 0; m < nnames; m++)
		printf("%s\"%s\": %" PRIu64, m ? ", " : "", names[m],
		       im_stage_meta(r, (unsigned)m));
	if (head) {
		fputs("}}\n", stdout);
		im_stage_reader_free(r);
		return 0;
	}
	fputs("},\n \"records\": [", stdout);
	while (im_stage_next(r, &p, &len)) {
		fputs(i ? ",\n  " : "\n  ", stdout);
		if (!rec(stdout, p, len)) {
			fputs("null]}\n", stdout);
			err_msg("%s: corrupt: record %" PRIu64
				" does not decode",
				path, i + 1);
			im_stage_reader_free(r);
			return -1;
		}
		i++;
	}
	fputs(i ? "\n ]}\n" : "]}\n", stdout);
	im_stage_reader_free(r);
	return 0;
}

int cmd_cat(struct cli *c)
{
	int failed = 0;

	for (int i = 0; i < c->argc; i++)
		if (cat_one(c->argv[i], c->check, c->head))
			failed = 1;
	if (fflush(stdout) || ferror(stdout)) {
		err_msg("writing the output: %s", strerror(errno));
		return EXIT_RUNTIME;
	}
	return failed ? EXIT_RUNTIME : 0;
}
