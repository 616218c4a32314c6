/**
 * @file cmd_cluster.c
 * The detection stages (SCALE.md): `imatch sign --records` (documents and
 * their candidate keys, per shard), `imatch links` (links from the groups of
 * one key partition), `imatch components` (union-find over dense ids) and
 * `imatch export` (the bytes of `imatch scan --json`).
 *
 * Candidates and links are those of the live index (index.h): documents that
 * share a signature of some coordinate or the exact hash of their bytes.
 * Within a group of documents sharing a key, linking each member to the
 * group's first (in shard, index order) gives the same components as linking
 * every pair, so a key held by a million files costs a million links, not
 * 10^12 (the hot-key rule of SCALE.md); group sizes are reported.
 *
 * Every stage file carries the key of the signing parameters and the
 * lexicon (im_state_stage_key()), so outputs of different runs never mix.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "exact.h"
#include "imatch.h"
#include "index.h"
#include "lock.h"
#include "plan.h"
#include "records.h"
#include "shard.h"
#include "stage.h"
#include "stage_rec.h"
#include "state.h"

/* Meta words of a records file (IM_STAGE_RECORDS): per status, then. */
enum {
	REC_STATUS0 = 0, /* .. REC_STATUS0 + IM_DOC_STATUS_COUNT - 1 */
	REC_BYTES = IM_DOC_STATUS_COUNT, /* st_size of the texts read */
	REC_PATHS, /* the list's fingerprint (im_list_path_hash()) */
};
static const char *const rec_meta[] = {"signed",  "rejected", "binary",
				       "too_big", "errors",   "failed",
				       "bytes",	  "paths"};
/* Meta words of a key run (IM_STAGE_KEYS): whose keys it holds, as
 * --shard-id said, so that links can tell a shard's run missing. */
enum {
	KEY_SHARD,
	KEY_SHARDS,
};
static const char *const key_meta[] = {"shard", "shards"};
/* Meta words of a links file (IM_STAGE_LINKS). */
enum {
	LNK_GROUPS,  /* keys held by two documents or more */
	LNK_MEMBERS, /* documents in them, with repetition */
	LNK_LARGEST, /* documents in the largest group */
	LNK_LINKS,
	LNK_DOCS,  /* documents of the records it was made from */
	LNK_PATHS, /* the sum of their REC_PATHS */
};
static const char *const lnk_meta[] = {"groups", "members",   "largest_group",
				       "links",	 "documents", "paths"};
/* Meta words of a clusters file (IM_STAGE_CLUSTERS). */
enum {
	CL_DOCS,
	CL_CLUSTERS,
	CL_MEMBERS,
	CL_PATHS, /* the fingerprint of its records (records_print()) */
};
static const char *const cl_meta[] = {"documents", "clusters", "members",
				      "paths"};

static int parse_shard_id(const char *s, uint32_t *id, uint32_t *n)
{
	char *end;
	unsigned long a, b;

	errno = 0;
	a = strtoul(s, &end, 10);
	if (errno || end == s || *end != '/' || *s == '-')
		return -1;
	s = end + 1;
	b = strtoul(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || !b || a >= b ||
	    b > UINT32_MAX)
		return -1;
	*id = (uint32_t)a;
	*n = (uint32_t)b;
	return 0;
}

/* What the stage files depend on: records and keys on the parameters and
 * the lexicon (the state file's key), links and clusters also on the
 * similarity threshold. */
struct run_keys {
	uint64_t sign, link;
	uint64_t cache; /* of a daemon's cache made from the records */
};

static int run_key(const struct cli *c, const struct im_lexicon *lex,
		   struct run_keys *k)
{
	uint64_t lex_key, v[2];
	/* A stage that loaded the lexicon takes the key of the bytes it
	 * parsed; the others only read the file. */
	int ret = lex ? (lex_key = im_lexicon_file_key(lex), 0)
		      : im_state_file_key(c->lexicon, &lex_key);

	if (ret) {
		err_msg("%s: %s", c->lexicon, strerror(-ret));
		return -1;
	}
	k->sign = im_state_stage_key(&c->p, lex_key);
	k->cache = im_state_key(&c->p, lex_key);
	v[0] = k->sign;
	memcpy(&v[1], &c->p.similarity, sizeof(v[1]));
	k->link = XXH3_64bits(v, sizeof(v));
	return 0;
}

/* ---- sign --records ------------------------------------------------------- */

static int cmp_keys(const void *a, const void *b)
{
	return im_stage_key_cmp(a, b);
}

/*
 * im_stage_key_cmp()'s order on encoded key records (kind, k, len, the key,
 * shard and index, the path) without decoding them: a merge of R runs
 * compares each record about log2(R) times. A record too short for its
 * key sorts first; decoding it, the reader reports it.
 */
static int key_rec_cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
	size_t ap, bp, n;
	int r;

	if (al < 3 || al < (ap = 3 + (size_t)a[2] + 8))
		return -1;
	if (bl < 3 || bl < (bp = 3 + (size_t)b[2] + 8))
		return 1;
	r = memcmp(a, b, 3);
	if (r)
		return r;
	r = memcmp(a + 3, b + 3, a[2]);
	if (r)
		return r;
	/* Byte order of the paths, a prefix first. */
	al -= ap;
	bl -= bp;
	n = al < bl ? al : bl;
	r = memcmp(a + ap, b + bp, n);
	if (r)
		return r;
	return al < bl ? -1 : al > bl;
}

static char *suffixed(const char *prefix, const char *fmt, uint32_t n)
{
	size_t len = strlen(prefix) + 32;
	char *s = malloc(len);
	int off;

	if (!s)
		return NULL;
	off = snprintf(s, len, "%s", prefix);
	snprintf(s + off, len - (size_t)off, fmt, n);
	return s;
}

/*
 * The keys of a sign task, partitioned. A shard of a million documents makes
 * some 20 million keys (48 bytes each here), so past --spill-bytes of them
 * each partition is sorted and written as a run, and the runs of a partition
 * are merged into PREFIX.kPPPP at the end. Runs are named after the attempt
 * (PREFIX.kPPPP.rN.PID.HOST): an engine may start a retry while an attempt
 * it gave up on still runs, and each must keep its own runs until it has
 * merged them. A run whose attempt died on this host is removed by the
 * next attempt here; one left on another host stays until removed by hand.
 */
struct sign_keys {
	struct im_stage_parts kp;
	const char *prefix;
	char tag[HOST_NAME_MAX + 24]; /* PID.HOST of this attempt */
	struct im_stage_header h;     /* of the key files */
	uint32_t shard, nshards;      /* their KEY_SHARD, KEY_SHARDS */
	size_t held, limit;	      /* keys in kp; how many make a run */
	unsigned runs;		      /* runs written per partition */
	bool reported;		      /* an error was said, naming its file */
};

static char *run_path(const struct sign_keys *sk, uint32_t part, unsigned run)
{
	size_t len = strlen(sk->prefix) + strlen(sk->tag) + 40;
	char *s = malloc(len);

	if (s)
		snprintf(s, len, "%s.k%04" PRIu32 ".r%u.%s", sk->prefix, part,
			 run, sk->tag);
	return s;
}

/* This attempt's tag, PID.HOST, into sk->tag; @return its HOST part. */
static const char *keys_tag(struct sign_keys *sk)
{
	char host[HOST_NAME_MAX + 1] = "";
	int n;

	if (gethostname(host, sizeof(host)) || !host[0])
		snprintf(host, sizeof(host), "localhost");
	host[sizeof(host) - 1] = '\0';
	n = snprintf(sk->tag, sizeof(sk->tag), "%ld.", (long)getpid());
	snprintf(sk->tag + n, sizeof(sk->tag) - (size_t)n, "%s", host);
	return sk->tag + n;
}

/* Whether @p name is a run of PREFIX (whose last component is @p base)
 * that an attempt on host @p host left when it died. */
static bool stale_run(const char *name, const char *base, const char *host)
{
	size_t bl = strlen(base);
	unsigned part, run;
	long pid;
	int end = 0;

	if (strncmp(name, base, bl) ||
	    sscanf(name + bl, ".k%4u.r%u.%ld.%n", &part, &run, &pid, &end) !=
		    3 ||
	    !end || strcmp(name + bl + end, host) || pid <= 0 ||
	    pid == (long)getpid())
		return false;
	return kill((pid_t)pid, 0) && errno == ESRCH;
}

/* Remove the runs that dead attempts of this task left on this host. */
static void keys_remove_stale(const struct sign_keys *sk, const char *host)
{
	char *dir = strdup(sk->prefix);
	char *slash = dir ? strrchr(dir, '/') : NULL;
	const char *base = slash ? slash + 1 : sk->prefix;
	DIR *d;
	struct dirent *e;

	if (!dir)
		return;
	if (slash)
		*slash = '\0';
	d = opendir(slash ? (dir[0] ? dir : "/") : ".");
	while (d && (e = readdir(d)))
		if (stale_run(e->d_name, base, host))
			unlinkat(dirfd(d), e->d_name, 0);
	if (d)
		closedir(d);
	free(dir);
}

static int write_keys(const struct sign_keys *sk, const char *path,
		      uint32_t part, struct im_stage_key *v, size_t n);

/* Write every partition's keys as run number sk->runs, and empty them. */
static int keys_spill(struct sign_keys *sk)
{
	for (uint32_t p = 0; p < sk->kp.nparts; p++) {
		char *path = run_path(sk, p, sk->runs);
		int ret;

		ret = path ? write_keys(sk, path, p, sk->kp.p[p].v,
					sk->kp.p[p].n)
			   : -ENOMEM;
		if (ret) {
			write_failed(path ? path : sk->prefix, ret);
			sk->reported = true;
			free(path);
			return ret;
		}
		free(path);
		sk->kp.p[p].n = 0;
	}
	sk->held = 0;
	sk->runs++;
	return 0;
}

/* Remove this attempt's runs of every partition. */
static void keys_remove_runs(const struct sign_keys *sk)
{
	for (uint32_t p = 0; p < sk->kp.nparts; p++) {
		for (unsigned r = 0; r < sk->runs; r++) {
			char *path = run_path(sk, p, r);

			if (path)
				unlink(path);
			free(path);
		}
	}
}

static void keys_set_shard(const struct sign_keys *sk,
			   struct im_stage_writer *w)
{
	im_stage_writer_set_meta(w, KEY_SHARD, sk->shard);
	im_stage_writer_set_meta(w, KEY_SHARDS, sk->nshards);
}

/* Merge the runs of partition @p part into @p path (the runs stay). */
static int keys_merge_runs(const struct sign_keys *sk, uint32_t part,
			   const char *path)
{
	struct im_stage_reader **rs = calloc(sk->runs, sizeof(*rs));
	struct im_stage_header h = sk->h;
	struct im_stage_writer *w = NULL;
	struct im_stage_merge *m = NULL;
	const uint8_t *rec;
	size_t len;
	int ret = rs ? 0 : -ENOMEM;

	for (unsigned r = 0; r < sk->runs && !ret; r++) {
		char *rp = run_path(sk, part, r);

		ret = rp ? im_stage_open(rp, &rs[r], NULL, 0) : -ENOMEM;
		free(rp);
	}
	if (!ret)
		ret = im_stage_merge_new(rs, sk->runs, key_rec_cmp, &m);
	h.part = part;
	if (!ret)
		ret = im_stage_writer_new(path, &h, &w);
	while (!ret && (ret = im_stage_merge_next(m, &rec, &len, NULL)) > 0)
		ret = im_stage_writer_add(w, rec, len);
	if (!ret) {
		keys_set_shard(sk, w);
		ret = im_stage_writer_commit(w);
	}
	im_stage_writer_free(w);
	im_stage_merge_free(m);
	for (unsigned r = 0; rs && r < sk->runs; r++)
		im_stage_reader_free(rs[r]);
	free(rs);
	return ret;
}

/* Write PREFIX.kPPPP for every partition: sorted from memory, or merged
 * from the runs (the last of which is what memory still holds). */
static int keys_finish(struct sign_keys *sk)
{
	int ret = 0;

	if (sk->runs && sk->held)
		ret = keys_spill(sk);
	for (uint32_t p = 0; p < sk->kp.nparts && !ret; p++) {
		char *path = suffixed(sk->prefix, ".k%04" PRIu32, p);

		if (!path)
			ret = -ENOMEM;
		else if (sk->runs)
			ret = keys_merge_runs(sk, p, path);
		else
			ret = write_keys(sk, path, p, sk->kp.p[p].v,
					 sk->kp.p[p].n);
		if (ret && !sk->reported) {
			write_failed(path ? path : sk->prefix, ret);
			sk->reported = true;
		}
		free(path);
	}
	keys_remove_runs(sk);
	return ret;
}

/* Sign every listed file into the records writer and the key buckets. */
static int sign_shard(struct cli *c, const struct im_lexicon *lex, int rootfd,
		      const struct im_shard *sh, uint32_t shard,
		      struct im_stage_writer *w, struct sign_keys *sk)
{
	struct im_stage_parts *kp = &sk->kp;
	struct im_cand_key keys[IM_MAX_KEYS];
	struct im_stage_buf rec = {0};
	struct im_signer *s = NULL;
	uint64_t counts[IM_DOC_STATUS_COUNT] = {0}, bytes = 0, paths = 0;
	struct im_tree t;
	int ret;

	ret = im_signer_new(lex, &c->p, &s);
	if (ret)
		return ret;
	/* A shard holds exact copies as a tree does: signed once. */
	im_signer_keep_results(s, true);
	im_tree_init(&t, rootfd);
	for (size_t i = 0; i < sh->n && !ret; i++) {
		struct im_stage_doc doc = {.path = sh->path[i],
					   .path_len = strlen(sh->path[i])};
		struct stat st = {0};
		const char *name;
		unsigned nk;
		int dfd;

		ret = im_tree_dir(&t, sh->path[i], &dfd, &name);
		if (ret == -ENOMEM)
			break;
		if (ret) {
			/* As the signer reports a file it cannot open. */
			doc.d.status = IM_DOC_ERROR;
			doc.d.ncoords = (uint8_t)(c->p.k + 1);
			doc.d.err = -ret;
			ret = 0;
		} else {
			ret = im_signer_sign_at(s, dfd, name, &doc.d, &st);
			if (ret)
				break;
		}
		doc.size = (uint64_t)st.st_size;
		doc.mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 +
			       st.st_mtim.tv_nsec;
		doc.ino = st.st_ino;
		doc.ctime_fold = im_state_ctime_fold(&st);
		counts[doc.d.status]++;
		paths += im_list_path_hash(doc.path, doc.path_len);
		if (im_stage_doc_relates(&doc.d))
			bytes += doc.size;
		rec.len = 0;
		im_stage_doc_encode(&rec, &doc);
		if (rec.oom) {
			ret = -ENOMEM;
			break;
		}
		ret = im_stage_writer_add(w, rec.p, rec.len);
		nk = im_doc_keys(&doc.d, keys);
		for (unsigned k = 0; k < nk && !ret; k++) {
			struct im_stage_key key;

			im_stage_key_make(&key, &keys[k], shard, (uint32_t)i,
					  sh->path[i]);
			ret = im_stage_parts_push(
				kp, im_stage_key_part(&key, kp->nparts), &key);
		}
		sk->held += nk;
		if (!ret && sk->held >= sk->limit)
			ret = keys_spill(sk);
	}
	for (unsigned k = 0; k < IM_DOC_STATUS_COUNT; k++)
		im_stage_writer_set_meta(w, REC_STATUS0 + k, counts[k]);
	im_stage_writer_set_meta(w, REC_BYTES, bytes);
	im_stage_writer_set_meta(w, REC_PATHS, paths);
	im_tree_release(&t);
	im_signer_free(s);
	im_stage_buf_release(&rec);
	return ret;
}

static int write_keys(const struct sign_keys *sk, const char *path,
		      uint32_t part, struct im_stage_key *v, size_t n)
{
	struct im_stage_header h = sk->h;
	struct im_stage_writer *w = NULL;
	struct im_stage_buf rec = {0};
	int ret;

	h.part = part;
	sort_n(v, n, sizeof(*v), cmp_keys);
	ret = im_stage_writer_new(path, &h, &w);
	for (size_t i = 0; !ret && i < n; i++) {
		rec.len = 0;
		im_stage_key_encode(&rec, &v[i]);
		ret = rec.oom ? -ENOMEM
			      : im_stage_writer_add(w, rec.p, rec.len);
	}
	if (!ret) {
		keys_set_shard(sk, w);
		ret = im_stage_writer_commit(w);
	}
	im_stage_writer_free(w);
	im_stage_buf_release(&rec);
	return ret;
}

int cmd_sign_records(struct cli *c)
{
	struct im_stage_header h = {.kind = IM_STAGE_RECORDS};
	struct run_keys keys;
	struct sign_keys sk = {.prefix = c->out};
	struct im_stage_writer *w = NULL;
	struct im_lexicon *lex = NULL;
	struct im_shard sh = {0};
	uint32_t shard, nshards;
	char why[160] = "", *path = NULL;
	int fd = -1, ret, code = EXIT_RUNTIME;

	if (!c->files_from || !c->root || !c->out || !c->shard_id || c->argc) {
		err_msg("sign --records: needs --files-from LIST --root DIR "
			"--shard-id I/N -o PREFIX and no FILE operands");
		return EXIT_USAGE;
	}
	if (parse_shard_id(c->shard_id, &shard, &nshards)) {
		err_msg("sign: bad value for --shard-id: '%s' (I/N, I < N)",
			c->shard_id);
		return EXIT_USAGE;
	}
	fd = open_root(c->root);
	if (fd < 0)
		return EXIT_RUNTIME;
	if (load_lexicon(c, &lex) || run_key(c, lex, &keys))
		goto out;
	h.key = keys.sign;
	ret = im_shard_load(c->files_from, &sh, why, sizeof(why));
	if (ret) {
		err_msg("%s: %s", c->files_from, why);
		goto out;
	}
	path = suffixed(c->out, ".rec", 0);
	ret = -ENOMEM;
	if (im_stage_parts_init(&sk.kp, c->parts,
				sizeof(struct im_stage_key)) ||
	    !path)
		goto fail;
	sk.limit = c->spill_bytes / sizeof(struct im_stage_key);
	if (!sk.limit)
		sk.limit = 1;
	sk.h = (struct im_stage_header){
		.kind = IM_STAGE_KEYS, .key = keys.sign, .nparts = c->parts};
	sk.shard = shard;
	sk.nshards = nshards;
	keys_remove_stale(&sk, keys_tag(&sk));
	h.part = shard;
	h.nparts = nshards;
	ret = im_stage_writer_new(path, &h, &w);
	if (ret) {
		write_failed(path, ret);
		goto out;
	}
	ret = sign_shard(c, lex, fd, &sh, shard, w, &sk);
	if (sk.reported)
		goto out;
	if (ret == -ENOMEM)
		goto fail;
	if (!ret)
		ret = im_stage_writer_commit(w);
	if (ret) {
		write_failed(path, ret);
		goto out;
	}
	if (keys_finish(&sk))
		goto out;
	if (c->verbose) {
		put_text_path(stderr, c->out);
		fprintf(stderr, ": %zu documents, keys in %u sorted runs\n",
			sh.n, sk.runs ? sk.runs : 1);
	}
	code = 0;
	goto out;
fail:
	err_msg("%s: %s", c->files_from, strerror(-ret));
out:
	if (code && sk.runs)
		keys_remove_runs(&sk);
	im_stage_parts_release(&sk.kp);
	free(path);
	im_stage_writer_free(w);
	im_shard_release(&sh);
	if (lex)
		im_lexicon_free(lex);
	if (fd >= 0)
		close(fd);
	return code;
}

/* ---- Opening a set of stage files ----------------------------------------------- */

/* Open every operand; require one key and the kinds in @p kinds (a mask of
 * 1 << kind). On failure one line names the file. */
static int open_all(struct cli *c, struct im_stage_reader **rs,
		    const struct run_keys *keys, unsigned kinds)
{
	for (int i = 0; i < c->argc; i++) {
		const struct im_stage_header *h;

		rs[i] = open_stage(c->argv[i]);
		if (!rs[i])
			return -1;
		h = im_stage_header(rs[i]);
		if (!(kinds & (1u << h->kind))) {
			err_msg("%s: a %s file is not an input of %s",
				c->argv[i], im_stage_kind_name(h->kind),
				c->cmd);
			return -1;
		}
		if (h->key !=
		    (h->kind == IM_STAGE_MANIFEST ? im_terms_key(&c->p)
		     : h->kind == IM_STAGE_RECORDS || h->kind == IM_STAGE_KEYS
			     ? keys->sign
			     : keys->link)) {
			err_msg("%s: made with other options or another "
				"lexicon than this %s",
				c->argv[i], c->cmd);
			return -1;
		}
	}
	return 0;
}

static void close_all(struct im_stage_reader **rs, int n)
{
	for (int i = 0; rs && i < n; i++)
		im_stage_reader_free(rs[i]);
	free(rs);
}

/* ---- Records in shard order -------------------------------------------------- */

/* The records files among the operands, by shard, all shards present. */
struct shard_set {
	struct im_stage_reader **rec; /* [nshards], borrowed */
	const char **name; /* [nshards]: their operands, for messages */
	uint64_t *base;	   /* [nshards + 1]: dense id of each first */
	uint32_t nshards;
};

static int shard_set_init(struct cli *c, struct im_stage_reader **rs,
			  struct shard_set *s)
{
	const struct im_stage_header *h;
	uint32_t n = 0;

	memset(s, 0, sizeof(*s));
	for (int i = 0; i < c->argc; i++) {
		h = im_stage_header(rs[i]);
		if (h->kind != IM_STAGE_RECORDS)
			continue;
		if (n && h->nparts != n) {
			err_msg("%s: shard %" PRIu32 " of %" PRIu32
				", but another records file says %" PRIu32,
				c->argv[i], h->part, h->nparts, n);
			return -1;
		}
		n = h->nparts;
	}
	if (!n) {
		err_msg("%s: no records files given", c->cmd);
		return -1;
	}
	s->nshards = n;
	s->rec = calloc(n, sizeof(*s->rec));
	s->name = calloc(n, sizeof(*s->name));
	s->base = calloc((size_t)n + 1, sizeof(*s->base));
	if (!s->rec || !s->name || !s->base) {
		err_msg("%s", strerror(ENOMEM));
		return -1;
	}
	for (int i = 0; i < c->argc; i++) {
		h = im_stage_header(rs[i]);
		if (h->kind != IM_STAGE_RECORDS)
			continue;
		if (s->rec[h->part]) {
			err_msg("%s: shard %" PRIu32 " given twice", c->argv[i],
				h->part);
			return -1;
		}
		s->rec[h->part] = rs[i];
		s->name[h->part] = c->argv[i];
	}
	for (uint32_t i = 0; i < n; i++) {
		if (!s->rec[i]) {
			err_msg("%s: the records of shard %" PRIu32
				" of %" PRIu32 " are missing",
				c->cmd, i, n);
			return -1;
		}
		s->base[i + 1] = s->base[i] + im_stage_count(s->rec[i]);
	}
	if (s->base[n] >= UINT32_MAX) {
		err_msg("%s: more than 2^32 documents", c->cmd);
		return -1;
	}
	return 0;
}

/* The fingerprint of every shard's list (REC_PATHS summed). */
static uint64_t records_print(const struct shard_set *s)
{
	uint64_t sum = 0;

	for (uint32_t i = 0; i < s->nshards; i++)
		sum += im_stage_meta(s->rec[i], REC_PATHS);
	return sum;
}

static void shard_set_release(struct shard_set *s)
{
	free(s->rec);
	free(s->name);
	free(s->base);
}

/* Say that record @p index of shard @p s does not decode, as cat --check
 * says it. @return -EINVAL. */
static int record_corrupt(const struct shard_set *ss, uint32_t s,
			  uint64_t index)
{
	err_msg("%s: corrupt: record %" PRIu64 " does not decode", ss->name[s],
		index + 1);
	return -EINVAL;
}

/* Call @p fn for every document, in dense id order; also hands over each
 * shard's reader once its documents are done (doc NULL). @return 0,
 * -EINVAL after naming the file of a record that does not decode, or fn's
 * non-zero value. */
static int shard_set_foreach(const struct shard_set *ss,
			     int (*fn)(uint32_t id,
				       const struct im_stage_doc *doc,
				       struct im_stage_reader *r, void *arg),
			     void *arg)
{
	uint32_t id = 0;
	int ret;

	for (uint32_t s = 0; s < ss->nshards; s++) {
		const uint8_t *p;
		size_t len;

		im_stage_rewind(ss->rec[s]);
		while (im_stage_next(ss->rec[s], &p, &len)) {
			struct im_stage_doc doc;

			if (im_stage_doc_decode(p, len, &doc))
				return record_corrupt(ss, s, id - ss->base[s]);
			ret = fn(id++, &doc, NULL, arg);
			if (ret)
				return ret;
		}
		ret = fn(id, NULL, ss->rec[s], arg);
		if (ret)
			return ret;
		im_stage_drop(ss->rec[s]);
	}
	return 0;
}

/* Dense id of (shard, index), or UINT32_MAX if out of range. */
static uint32_t dense_id(const struct shard_set *s, uint32_t shard,
			 uint32_t index)
{
	if (shard >= s->nshards || s->base[shard] + index >= s->base[shard + 1])
		return UINT32_MAX;
	return (uint32_t)(s->base[shard] + index);
}

/* ---- links ------------------------------------------------------------------ */

/*
 * The records of every shard, indexed on first use: a links task verifies
 * a group's members from their records (the key runs name the holders
 * only). 16 bytes per document of the shards it meets. The members are
 * read at random with pread (im_stage_read()), not through the mapping:
 * every page touched there would stay resident, with the pages the kernel
 * maps around it, until the task held most of the records (419 bytes per
 * document at a million).
 */
struct rec_index {
	const struct shard_set *ss;
	struct rec_ref {
		const uint8_t *p;
		size_t len;
	} * *v;	      /* [nshards], each [documents of the shard] or NULL */
	uint8_t *buf; /* the record being read */
	size_t cap;
};

static void rec_index_release(struct rec_index *ri)
{
	for (uint32_t s = 0; ri->v && s < ri->ss->nshards; s++)
		free(ri->v[s]);
	free(ri->v);
	free(ri->buf);
}

/* The signatures of the holder of @p k. @return 0, -ENOMEM, -ENOENT
 * when the records hold no such document, or another path, -EBADMSG
 * after naming the records file when its record does not decode, or
 * im_stage_read()'s error. */
static int rec_sigs(struct rec_index *ri, const struct im_stage_key *k,
		    struct im_doc_sigs *d)
{
	const struct shard_set *ss = ri->ss;
	struct im_stage_doc doc;
	const struct rec_ref *r;
	size_t n;
	int ret;

	if (k->shard >= ss->nshards)
		return -ENOENT;
	n = ss->base[k->shard + 1] - ss->base[k->shard];
	if (k->index >= n)
		return -ENOENT;
	if (!ri->v[k->shard]) {
		struct rec_ref *v = malloc((n ? n : 1) * sizeof(*v));
		size_t i = 0;

		if (!v)
			return -ENOMEM;
		im_stage_rewind(ss->rec[k->shard]);
		while (i < n &&
		       im_stage_next(ss->rec[k->shard], &v[i].p, &v[i].len))
			i++;
		ri->v[k->shard] = v;
		/* From here on the records are read with pread only. */
		im_stage_drop(ss->rec[k->shard]);
	}
	r = &ri->v[k->shard][k->index];
	if (ri->cap < r->len) {
		uint8_t *b = realloc(ri->buf, r->len);

		if (!b)
			return -ENOMEM;
		ri->buf = b;
		ri->cap = r->len;
	}
	ret = im_stage_read(ss->rec[k->shard], r->p, r->len, ri->buf);
	if (ret)
		return ret;
	/* doc.d is copied out; the path is compared before the next read.
	 * A record that does not decode is the records file's fault, not
	 * the key's: say so here, where its place is known. */
	if (im_stage_doc_decode(ri->buf, r->len, &doc)) {
		record_corrupt(ss, k->shard, k->index);
		return -EBADMSG;
	}
	if (doc.path_len != k->path_len ||
	    memcmp(doc.path, k->path, k->path_len))
		return -ENOENT;
	*d = doc.d;
	return 0;
}

/* One key group being collected, and what verifying it needs. */
struct group {
	struct rec_index *ri;
	struct im_stage_key *m; /* members, in path order */
	size_t n, cap;
	struct im_doc_sigs *sigs; /* for im_group_links() */
	const struct im_doc_sigs **ptrs;
	size_t sigs_cap;
	struct im_stage_writer *w;
	struct im_stage_buf rec;
	uint64_t groups, members, largest, links;
	size_t twice; /* -EEXIST: m[twice] has the path of m[twice - 1] */
};

static int group_add(struct group *g, const struct im_stage_key *k)
{
	if (g->n == g->cap) {
		size_t cap = g->cap ? 2 * g->cap : 64;
		struct im_stage_key *m = realloc(g->m, cap * sizeof(*m));

		if (!m)
			return -ENOMEM;
		g->m = m;
		g->cap = cap;
	}
	g->m[g->n++] = *k;
	return 0;
}

static int put_link(size_t i, size_t j, double similarity, bool exact,
		    void *arg)
{
	struct group *g = arg;
	struct im_stage_link l = {
		.a_shard = g->m[i].shard,
		.a_index = g->m[i].index,
		.b_shard = g->m[j].shard,
		.b_index = g->m[j].index,
		.exact = exact,
		.similarity = similarity,
	};

	g->rec.len = 0;
	im_stage_link_encode(&g->rec, &l);
	if (g->rec.oom)
		return -ENOMEM;
	g->links++;
	return im_stage_writer_add(g->w, g->rec.p, g->rec.len);
}

/*
 * The links of one complete group. The holders of one exact hash are all
 * exact copies of each other, so linking each to the first gives the same
 * components as every pair (the live index's relation) in linear time: a
 * file copied a million times costs a million links. Other keys are
 * verified by im_group_links(), which caps the comparisons of hot keys.
 */
static int group_flush(struct group *g, double threshold)
{
	int ret = 0;

	/* A group is in path order, so a path that two shards' records hold
	 * (a shard signed with another's list) meets itself here: one
	 * comparison per member, where the refusal costs least. */
	for (size_t i = 1; i < g->n; i++) {
		const struct im_stage_key *a = &g->m[i - 1], *b = &g->m[i];

		if (a->path_len == b->path_len &&
		    !memcmp(a->path, b->path, a->path_len) &&
		    (a->shard != b->shard || a->index != b->index)) {
			g->twice = i;
			return -EEXIST;
		}
	}
	if (g->n >= 2) {
		g->groups++;
		g->members += g->n;
		if (g->n > g->largest)
			g->largest = g->n;
	}
	if (g->n >= 2 && g->m[0].key.kind == IM_KEY_EXACT) {
		for (size_t j = 1; j < g->n && !ret; j++)
			ret = put_link(0, j, 1.0, true, g);
	} else if (g->n >= 2) {
		if (g->sigs_cap < g->n) {
			free(g->sigs);
			free(g->ptrs);
			g->sigs = malloc(g->n * sizeof(*g->sigs));
			g->ptrs = malloc(g->n * sizeof(*g->ptrs));
			g->sigs_cap = g->sigs && g->ptrs ? g->n : 0;
			if (!g->sigs_cap)
				return -ENOMEM;
		}
		for (size_t i = 0; i < g->n; i++) {
			ret = rec_sigs(g->ri, &g->m[i], &g->sigs[i]);
			if (ret)
				return ret;
			g->ptrs[i] = &g->sigs[i];
		}
		ret = im_group_links(g->m[0].key.kind, g->ptrs, g->n, threshold,
				     put_link, g);
	}
	g->n = 0;
	return ret;
}

static int links_merge(struct im_stage_merge *m, struct group *g,
		       double threshold, size_t *from)
{
	struct im_stage_key k;
	const uint8_t *p;
	size_t len;
	int ret;

	while ((ret = im_stage_merge_next(m, &p, &len, from)) > 0) {
		if (im_stage_key_decode(p, len, &k))
			return -EINVAL;
		if (g->n && !im_stage_key_same(&g->m[0], &k)) {
			ret = group_flush(g, threshold);
			if (ret)
				return ret;
		}
		ret = group_add(g, &k);
		if (ret)
			return ret;
	}
	return ret ? ret : group_flush(g, threshold);
}

/*
 * The key runs among the operands into @p kr, their operand numbers into
 * @p kn: runs of one partition, exactly one per shard of @p ss (a shard's
 * run left out would drop its documents' links without a trace). @return
 * 0, or -1 after one line saying what is wrong.
 */
static int key_runs(struct cli *c, struct im_stage_reader **rs,
		    const struct shard_set *ss, struct im_stage_reader **kr,
		    int *kn, size_t *nk)
{
	int *of = calloc(ss->nshards, sizeof(*of)); /* operand + 1 */
	int ret = -1;

	if (!of) {
		err_msg("links: %s", strerror(ENOMEM));
		return -1;
	}
	for (int i = 0; i < c->argc; i++) {
		const struct im_stage_header *a, *b = im_stage_header(rs[i]);
		uint64_t shard = im_stage_meta(rs[i], KEY_SHARD),
			 nshards = im_stage_meta(rs[i], KEY_SHARDS);

		if (b->kind != IM_STAGE_KEYS)
			continue;
		kn[*nk] = i;
		kr[(*nk)++] = rs[i];
		a = im_stage_header(kr[0]);
		if (a->part != b->part || a->nparts != b->nparts) {
			err_msg("%s: partition %" PRIu32 " of %" PRIu32
				", but %s is %" PRIu32 " of %" PRIu32,
				c->argv[i], b->part, b->nparts, c->argv[kn[0]],
				a->part, a->nparts);
			goto out;
		}
		if (nshards != ss->nshards || shard >= nshards) {
			err_msg("%s: the keys of shard %" PRIu64 " of %" PRIu64
				", but the records are of %" PRIu32 " shards",
				c->argv[i], shard, nshards, ss->nshards);
			goto out;
		}
		if (of[shard]) {
			err_msg("%s: the keys of shard %" PRIu64
				", given twice (%s)",
				c->argv[i], shard, c->argv[of[shard] - 1]);
			goto out;
		}
		of[shard] = i + 1;
	}
	if (!*nk) {
		err_msg("links: no key runs given");
		goto out;
	}
	for (uint32_t s = 0; s < ss->nshards; s++)
		if (!of[s]) {
			err_msg("links: the key run of shard %" PRIu32
				" of %" PRIu32 " for partition %" PRIu32
				" is missing",
				s, ss->nshards, im_stage_header(kr[0])->part);
			goto out;
		}
	ret = 0;
out:
	free(of);
	return ret;
}

int cmd_links(struct cli *c)
{
	struct im_stage_reader **rs = calloc((size_t)c->argc, sizeof(*rs)),
			       **kr = calloc((size_t)c->argc, sizeof(*kr));
	int *kn = calloc((size_t)c->argc, sizeof(*kn));
	struct im_stage_header h = {.kind = IM_STAGE_LINKS, .nparts = 1};
	struct run_keys keys;
	struct im_stage_merge *m = NULL;
	struct shard_set ss = {0};
	struct rec_index ri = {.ss = &ss};
	struct group g = {.ri = &ri};
	size_t from = 0, nk = 0;
	int ret = -ENOMEM, code = EXIT_RUNTIME;

	if (!rs || !kr || !kn)
		goto fail;
	if (run_key(c, NULL, &keys) ||
	    open_all(c, rs, &keys,
		     1u << IM_STAGE_KEYS | 1u << IM_STAGE_RECORDS) ||
	    shard_set_init(c, rs, &ss))
		goto out;
	ri.v = calloc(ss.nshards, sizeof(*ri.v));
	if (!ri.v)
		goto fail;
	h.key = keys.link;
	if (key_runs(c, rs, &ss, kr, kn, &nk))
		goto out;
	h.part = im_stage_header(kr[0])->part;
	h.nparts = im_stage_header(kr[0])->nparts;
	ret = im_stage_merge_new(kr, nk, key_rec_cmp, &m);
	if (ret)
		goto fail;
	ret = im_stage_writer_new(c->out, &h, &g.w);
	if (ret) {
		write_failed(c->out, ret);
		goto out;
	}
	ret = links_merge(m, &g, c->p.similarity, &from);
	if (ret == -EINVAL) {
		err_msg("%s: corrupt: a bad or unsorted key record",
			c->argv[kn[from]]);
		goto out;
	}
	if (ret == -ENOENT) {
		err_msg("%s: a key names a document that the records given "
			"do not hold",
			c->argv[kn[from]]);
		goto out;
	}
	if (ret == -EEXIST) {
		const struct im_stage_key *a = &g.m[g.twice - 1],
					  *b = &g.m[g.twice];

		if (a->shard == b->shard)
			err_msg("links: %.*s is twice in the records of shard "
				"%" PRIu32 " (its list names it twice?)",
				(int)b->path_len, b->path, a->shard);
		else
			err_msg("links: %.*s is in the records of shard "
				"%" PRIu32 " and of shard %" PRIu32
				" (a shard signed with another's list?)",
				(int)b->path_len, b->path, a->shard, b->shard);
		goto out;
	}
	if (ret == -ENOMEM)
		goto fail;
	if (ret == -EBADMSG) /* named by rec_sigs() */
		goto out;
	if (ret) {
		err_msg("links: reading the records: %s", strerror(-ret));
		goto out;
	}
	im_stage_writer_set_meta(g.w, LNK_GROUPS, g.groups);
	im_stage_writer_set_meta(g.w, LNK_MEMBERS, g.members);
	im_stage_writer_set_meta(g.w, LNK_LARGEST, g.largest);
	im_stage_writer_set_meta(g.w, LNK_LINKS, g.links);
	im_stage_writer_set_meta(g.w, LNK_DOCS, ss.base[ss.nshards]);
	im_stage_writer_set_meta(g.w, LNK_PATHS, records_print(&ss));
	if (!ret)
		ret = im_stage_writer_commit(g.w);
	if (ret) {
		write_failed(c->out, ret);
		goto out;
	}
	if (c->verbose)
		fprintf(stderr,
			"%s: %" PRIu64 " key groups, %" PRIu64
			" members, largest %" PRIu64 ", %" PRIu64 " links\n",
			c->out, g.groups, g.members, g.largest, g.links);
	code = 0;
	goto out;
fail:
	err_msg("links: %s", strerror(-ret));
out:
	im_stage_merge_free(m);
	im_stage_writer_free(g.w);
	im_stage_buf_release(&g.rec);
	free(g.m);
	free(g.sigs);
	free(g.ptrs);
	rec_index_release(&ri);
	shard_set_release(&ss);
	free(kr);
	free(kn);
	close_all(rs, c->argc);
	return code;
}

/* ---- components -------------------------------------------------------------- */

static uint32_t uf_find(uint32_t *parent, uint32_t x)
{
	while (parent[x] != x) {
		parent[x] = parent[parent[x]]; /* path halving */
		x = parent[x];
	}
	return x;
}

/* The smaller id becomes the root: the result does not depend on the order
 * of the links. */
static void uf_union(uint32_t *parent, uint32_t a, uint32_t b)
{
	a = uf_find(parent, a);
	b = uf_find(parent, b);
	if (a < b)
		parent[b] = a;
	else if (b < a)
		parent[a] = b;
}

/* A cluster's name as the index chooses it (index.h): the smallest
 * signature of any member; without any, the smallest exact hash (or hash of
 * the sketch) followed by zero bytes. have: 0 none yet, 1 a hash, 2 a
 * signature. */
struct cname {
	struct im_sig name;
	uint8_t have;
	char *least; /* the smallest member path, which ranks a shared name */
};

static void name_offer(struct cname *cn, const struct im_doc_sigs *d)
{
	for (unsigned k = 0; k < d->ncoords && k < IM_MAX_COORDS; k++) {
		if (!(d->valid & (1u << k)))
			continue;
		if (cn->have < 2 || im_sig_cmp(&d->sig[k], &cn->name) < 0)
			cn->name = d->sig[k];
		cn->have = 2;
	}
	if (cn->have < 2 && (d->exact_valid || d->sketch.n)) {
		struct im_sig e = {{0}};
		XXH128_canonical_t h;

		if (d->exact_valid) {
			memcpy(e.b, d->exact, 16);
		} else {
			/* Neither signature nor bytes: the index names it by
			 * the XXH3-128 of the sketch (index.c, name_of_ref). */
			XXH128_canonicalFromHash(
				&h,
				XXH3_128bits(&d->sketch, sizeof(d->sketch)));
			memcpy(e.b, h.digest, 16);
		}
		if (!cn->have || im_sig_cmp(&e, &cn->name) < 0)
			cn->name = e;
		cn->have = 1;
	}
}

/* Whether the links files among the operands are partitions 0..P-1 of
 * one P, each once, made from the records @p ss: a partition left out
 * loses its links, and so clusters and dupes, without a trace; links of
 * other records join other documents. @return 0, or -1 after saying what
 * is wrong. */
static int links_complete(struct cli *c, struct im_stage_reader **rs,
			  const struct shard_set *ss)
{
	int *of = NULL; /* operand + 1 of each partition */
	uint32_t nparts = 0;
	int first = -1, ret = -1;

	for (int i = 0; i < c->argc; i++) {
		const struct im_stage_header *h = im_stage_header(rs[i]);

		if (h->kind != IM_STAGE_LINKS)
			continue;
		if (first < 0) {
			first = i;
			nparts = h->nparts;
			of = calloc(nparts, sizeof(*of));
			if (!of) {
				err_msg("%s: %s", c->cmd, strerror(ENOMEM));
				return -1;
			}
		}
		if (h->nparts != nparts) {
			err_msg("%s: partition %" PRIu32 " of %" PRIu32
				", but %s is of %" PRIu32,
				c->argv[i], h->part, h->nparts, c->argv[first],
				nparts);
			goto out;
		}
		if (of[h->part]) {
			err_msg("%s: links of partition %" PRIu32
				", given twice (%s)",
				c->argv[i], h->part, c->argv[of[h->part] - 1]);
			goto out;
		}
		of[h->part] = i + 1;
		if (im_stage_meta(rs[i], LNK_DOCS) != ss->base[ss->nshards] ||
		    im_stage_meta(rs[i], LNK_PATHS) != records_print(ss)) {
			err_msg("%s: made from other records than these",
				c->argv[i]);
			goto out;
		}
	}
	if (first < 0) {
		err_msg("%s: no links files given", c->cmd);
		goto out;
	}
	for (uint32_t p = 0; p < nparts; p++)
		if (!of[p]) {
			err_msg("%s: the links of partition %" PRIu32
				" of %" PRIu32 " are missing",
				c->cmd, p, nparts);
			goto out;
		}
	ret = 0;
out:
	free(of);
	return ret;
}

/* Call @p fn for every link of the links files among the operands, with
 * its ends as dense ids. @return 0, -EINVAL after naming a corrupt file, or
 * fn's non-zero value. */
static int foreach_link(struct cli *c, struct im_stage_reader **rs,
			const struct shard_set *ss,
			int (*fn)(uint32_t a, uint32_t b,
				  const struct im_stage_link *l, void *arg),
			void *arg)
{
	for (int i = 0; i < c->argc; i++) {
		const uint8_t *p;
		size_t len;

		if (im_stage_header(rs[i])->kind != IM_STAGE_LINKS)
			continue;
		while (im_stage_next(rs[i], &p, &len)) {
			struct im_stage_link l;
			uint32_t a, b;
			int ret;

			if (im_stage_link_decode(p, len, &l) ||
			    (a = dense_id(ss, l.a_shard, l.a_index)) ==
				    UINT32_MAX ||
			    (b = dense_id(ss, l.b_shard, l.b_index)) ==
				    UINT32_MAX) {
				err_msg("%s: corrupt: a link to no document",
					c->argv[i]);
				return -EINVAL;
			}
			ret = fn(a, b, &l, arg);
			if (ret)
				return ret;
		}
		im_stage_drop(rs[i]);
	}
	return 0;
}

static int union_link(uint32_t a, uint32_t b, const struct im_stage_link *l,
		      void *arg)
{
	(void)l;
	uf_union(arg, a, b);
	return 0;
}

struct naming {
	const uint32_t *parent, *cl;
	struct cname *names;
};

/* Whether the @p len bytes at @p p come before @p s in strcmp() order. */
static bool path_before(const char *p, size_t len, const char *s)
{
	size_t sl = strlen(s);
	int r = memcmp(p, s, len < sl ? len : sl);

	return r ? r < 0 : len < sl;
}

/* Offer each clustered document's signatures to its cluster's name, and
 * its path to the cluster's smallest. */
static int name_doc(uint32_t id, const struct im_stage_doc *doc,
		    struct im_stage_reader *r, void *arg)
{
	struct naming *nm = arg;
	struct cname *cn;
	uint32_t c;

	(void)r;
	if (!doc)
		return 0;
	c = nm->cl[nm->parent[id]];
	if (!c)
		return 0;
	cn = &nm->names[c - 1];
	name_offer(cn, &doc->d);
	if (!cn->least || path_before(doc->path, doc->path_len, cn->least)) {
		char *p = strndup(doc->path, doc->path_len);

		if (!p)
			return -ENOMEM;
		free(cn->least);
		cn->least = p;
	}
	return 0;
}

static int cmp_cname(const void *a, const void *b)
{
	const struct cname *x = *(struct cname *const *)a,
			   *y = *(struct cname *const *)b;
	int r = im_sig_cmp(&x->name, &y->name);

	return r ? r : strcmp(x->least, y->least);
}

/* Clusters that share a name are told apart as the index does (index.c,
 * public_name): in order of their smallest member path, the k-th adds k to
 * the name's last 4 bytes (big-endian). */
static int rank_names(struct cname *names, uint32_t ncl)
{
	struct cname **v = malloc(((size_t)ncl + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	for (uint32_t k = 0; k < ncl; k++)
		v[k] = &names[k];
	sort_n(v, ncl, sizeof(*v), cmp_cname);
	for (uint32_t k = 1, first = 0; k < ncl; k++) {
		uint32_t rank;

		if (im_sig_cmp(&v[k]->name, &v[first]->name)) {
			first = k;
			continue;
		}
		rank = k - first;
		for (int b = IM_SIG_LEN - 1; rank && b >= IM_SIG_LEN - 4; b--) {
			rank += v[k]->name.b[b];
			v[k]->name.b[b] = (uint8_t)rank;
			rank >>= 8;
		}
	}
	free(v);
	return 0;
}

int cmd_components(struct cli *c)
{
	struct im_stage_reader **rs = calloc((size_t)c->argc, sizeof(*rs));
	struct im_stage_header h = {.kind = IM_STAGE_CLUSTERS, .nparts = 1};
	struct run_keys keys;
	struct im_stage_writer *w = NULL;
	struct im_stage_buf rec = {0};
	struct shard_set ss = {0};
	uint32_t *parent = NULL, *cl = NULL, *off = NULL, *mem = NULL;
	struct cname *names = NULL;
	uint32_t n, ncl = 0, nmem = 0;
	int ret = -ENOMEM, code = EXIT_RUNTIME;

	if (!rs)
		goto fail;
	if (run_key(c, NULL, &keys) ||
	    open_all(c, rs, &keys,
		     1u << IM_STAGE_RECORDS | 1u << IM_STAGE_LINKS) ||
	    shard_set_init(c, rs, &ss) || links_complete(c, rs, &ss))
		goto out;
	h.key = keys.link;
	n = (uint32_t)ss.base[ss.nshards];
	/* 4 bytes per document for the forest, 4 for the cluster numbers
	 * (then 4 per clustered document for the member lists). */
	parent = malloc(((size_t)n + 1) * sizeof(*parent));
	cl = calloc((size_t)n + 1, sizeof(*cl));
	if (!parent || !cl)
		goto fail;
	for (uint32_t i = 0; i < n; i++)
		parent[i] = i;
	if (foreach_link(c, rs, &ss, union_link, parent))
		goto out;
	/* Flatten, count sizes into cl[root], then number the clusters of
	 * two or more in root order: cl[root] = number (from 1). */
	for (uint32_t i = 0; i < n; i++)
		cl[parent[i] = uf_find(parent, i)]++;
	for (uint32_t i = 0; i < n; i++) {
		if (parent[i] != i)
			continue;
		if (cl[i] >= 2) {
			nmem += cl[i];
			cl[i] = ++ncl;
		} else {
			cl[i] = 0;
		}
	}
	names = calloc((size_t)ncl + 1, sizeof(*names));
	off = calloc((size_t)ncl + 2, sizeof(*off));
	mem = malloc(((size_t)nmem + 1) * sizeof(*mem));
	if (!names || !off || !mem)
		goto fail;
	for (uint32_t i = 0; i < n; i++)
		if (cl[parent[i]])
			off[cl[parent[i]] + 1]++;
	for (uint32_t k = 1; k <= ncl; k++)
		off[k + 1] += off[k];
	/* Fill in id order, so each list is sorted; off[k] ends at its end. */
	for (uint32_t i = 0; i < n; i++)
		if (cl[parent[i]])
			mem[off[cl[parent[i]]]++] = i;
	ret = shard_set_foreach(&ss, name_doc,
				&(struct naming){parent, cl, names});
	if (ret == -ENOMEM)
		goto fail;
	if (ret)
		goto out; /* said which file */
	ret = rank_names(names, ncl);
	if (ret)
		goto fail;
	ret = im_stage_writer_new(c->out, &h, &w);
	for (uint32_t k = 1; !ret && k <= ncl; k++) {
		uint32_t start = k > 1 ? off[k - 1] : 0;

		rec.len = 0;
		im_stage_cluster_encode(&rec, &names[k - 1].name, mem + start,
					off[k] - start);
		ret = rec.oom ? -ENOMEM
			      : im_stage_writer_add(w, rec.p, rec.len);
	}
	if (!ret) {
		im_stage_writer_set_meta(w, CL_DOCS, n);
		im_stage_writer_set_meta(w, CL_CLUSTERS, ncl);
		im_stage_writer_set_meta(w, CL_MEMBERS, nmem);
		im_stage_writer_set_meta(w, CL_PATHS, records_print(&ss));
		ret = im_stage_writer_commit(w);
	}
	if (ret) {
		write_failed(c->out, ret);
		goto out;
	}
	if (c->verbose)
		fprintf(stderr,
			"%s: %" PRIu32 " documents, %" PRIu32
			" clusters of %" PRIu32 "\n",
			c->out, n, ncl, nmem);
	code = 0;
	goto out;
fail:
	err_msg("components: %s", strerror(-ret));
out:
	free(parent);
	free(cl);
	free(off);
	free(mem);
	for (uint32_t k = 0; names && k < ncl; k++)
		free(names[k].least);
	free(names);
	im_stage_writer_free(w);
	im_stage_buf_release(&rec);
	shard_set_release(&ss);
	close_all(rs, c->argc);
	return code;
}

/* ---- export -------------------------------------------------------------------- */

/* Whether the clusters file @p cls was made from the records @p ss.
 * @return 0, or -1 after saying why not. */
static int clusters_of(struct im_stage_reader *cls, const struct shard_set *ss)
{
	if (im_stage_meta(cls, CL_DOCS) != ss->base[ss->nshards]) {
		err_msg("%s: the clusters file counts %" PRIu64
			" documents, the records %" PRIu64,
			im_stage_path(cls), im_stage_meta(cls, CL_DOCS),
			ss->base[ss->nshards]);
		return -1;
	}
	if (im_stage_meta(cls, CL_PATHS) != records_print(ss)) {
		err_msg("%s: the clusters file was made from other "
			"records than these",
			im_stage_path(cls));
		return -1;
	}
	return 0;
}

struct exporting {
	const uint32_t *label;
	struct cluster *v;
	struct scan_summary *sum;
};

/* Fill the clusters' member paths from the records, in dense id order, and
 * add up each shard's counts. */
static int export_doc(uint32_t id, const struct im_stage_doc *doc,
		      struct im_stage_reader *r, void *arg)
{
	struct exporting *ex = arg;
	struct cluster *cl;

	if (!doc) {
		for (unsigned k = 0; k < IM_DOC_STATUS_COUNT; k++)
			ex->sum->c.by_status[k] +=
				im_stage_meta(r, REC_STATUS0 + k);
		ex->sum->c.bytes += im_stage_meta(r, REC_BYTES);
		return 0;
	}
	if (!ex->label[id])
		return 0;
	cl = &ex->v[ex->label[id] - 1];
	cl->members[cl->size] = strndup(doc->path, doc->path_len);
	if (!cl->members[cl->size])
		return -ENOMEM;
	cl->size++;
	return 0;
}

/*
 * Number the documents of the clusters file @p cls: label[id] = k + 1 for
 * the members of its k-th cluster (0 for the rest), whose name goes to
 * v[k].name and room for its member paths to v[k].members. @return 0,
 * -ENOMEM, or -EINVAL after saying what is corrupt.
 */
static int cluster_labels(struct im_stage_reader *cls,
			  const struct shard_set *ss, uint32_t *label,
			  struct cluster *v)
{
	const uint8_t *p;
	size_t len;

	im_stage_rewind(cls);
	for (uint64_t k = 0; im_stage_next(cls, &p, &len); k++) {
		const uint8_t *ids;
		uint32_t n;

		if (im_stage_cluster_decode(p, len, &v[k].name, &ids, &n)) {
			err_msg("%s: corrupt: cluster %" PRIu64
				" does not decode",
				im_stage_path(cls), k + 1);
			return -EINVAL;
		}
		v[k].members = calloc(n ? n : 1, sizeof(*v[k].members));
		if (!v[k].members)
			return -ENOMEM;
		for (uint32_t j = 0; j < n; j++) {
			uint32_t id = im_stage_cluster_member(ids, j);

			if (id >= ss->base[ss->nshards] || label[id]) {
				err_msg("%s: corrupt: cluster %" PRIu64
					" has a member out of range or in "
					"two clusters",
					im_stage_path(cls), k + 1);
				return -EINVAL;
			}
			label[id] = (uint32_t)k + 1;
		}
	}
	return 0;
}

static void free_cluster_list(struct cluster *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		for (size_t j = 0; v[i].members && j < v[i].size; j++)
			free(v[i].members[j]);
		free(v[i].members);
	}
	free(v);
}

/* ---- export --dupes ------------------------------------------------------------ */

struct edge {
	uint32_t a, b;
	double similarity;
};

static int cmp_edge(const void *x, const void *y)
{
	const struct edge *a = x, *b = y;

	if (a->a != b->a)
		return a->a < b->a ? -1 : 1;
	return a->b < b->b ? -1 : a->b > b->b;
}

/* What export --dupes holds: 4 bytes per document for the exact classes,
 * 4 for their member lists, a path for each document with a dupe, and the
 * near links (16 bytes each, twice). */
/* Whether `imatch dupes` prints a line for @p doc: a document, which a
 * mount gives a by-doc/ entry (binary files and failed extractions are
 * only others' dupes). */
static bool stage_is_doc(const struct im_stage_doc *doc)
{
	return doc->d.status == IM_DOC_SIGNED ||
	       doc->d.status == IM_DOC_REJECTED;
}

struct dupes_export {
	uint32_t n;
	uint32_t *exact;     /* union-find of exact links, then the roots */
	uint32_t *class_off; /* [n + 1]: start of each root's members */
	uint32_t *class_mem; /* members of classes of two or more, by root */
	struct edge *e;	     /* near links, both directions, sorted */
	size_t ne, cap;
	char **path; /* of documents with a dupe, else NULL */
	bool *doc;   /* a document, as `imatch dupes` prints (stage_is_doc) */
};

/* Room for two more edges in @p e of @p n (of *@p cap). @return 0 or
 * -ENOMEM. */
static int edge_room(struct edge **e, size_t n, size_t *cap)
{
	struct edge *v;
	size_t c;

	if (*cap - n >= 2)
		return 0;
	c = *cap ? 2 * *cap : 1024;
	v = realloc(*e, c * sizeof(*v));
	if (!v)
		return -ENOMEM;
	*e = v;
	*cap = c;
	return 0;
}

static int dx_link(uint32_t a, uint32_t b, const struct im_stage_link *l,
		   void *arg)
{
	struct dupes_export *x = arg;

	if (l->exact) {
		uf_union(x->exact, a, b);
		return 0;
	}
	if (edge_room(&x->e, x->ne, &x->cap))
		return -ENOMEM;
	x->e[x->ne++] = (struct edge){a, b, l->similarity};
	x->e[x->ne++] = (struct edge){b, a, l->similarity};
	return 0;
}

/* Exact classes: flatten, then list the members of each root in id order. */
static int dx_classes(struct dupes_export *x)
{
	uint32_t *cnt = calloc((size_t)x->n + 1, sizeof(*cnt));

	if (!cnt)
		return -ENOMEM;
	for (uint32_t i = 0; i < x->n; i++)
		cnt[x->exact[i] = uf_find(x->exact, i)]++;
	for (uint32_t i = 0; i < x->n; i++)
		x->class_off[i + 1] =
			x->class_off[i] + (cnt[i] >= 2 ? cnt[i] : 0);
	memset(cnt, 0, ((size_t)x->n + 1) * sizeof(*cnt));
	for (uint32_t i = 0; i < x->n; i++) {
		uint32_t r = x->exact[i];

		if (x->class_off[r + 1] > x->class_off[r])
			x->class_mem[x->class_off[r] + cnt[r]++] = i;
	}
	free(cnt);
	return 0;
}

/* Index of the first near link from @p id in the sorted edges (ne if none). */
static size_t dx_first(const struct dupes_export *x, uint32_t id)
{
	size_t lo = 0, hi = x->ne;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (x->e[mid].a < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static bool dx_has_dupes(const struct dupes_export *x, uint32_t id)
{
	uint32_t r = x->exact[id];
	size_t f;

	if (x->class_off[r + 1] > x->class_off[r])
		return true;
	f = dx_first(x, id);
	return f < x->ne && x->e[f].a == id;
}

static int dx_path(uint32_t id, const struct im_stage_doc *doc,
		   struct im_stage_reader *r, void *arg)
{
	struct dupes_export *x = arg;

	(void)r;
	if (!doc || !dx_has_dupes(x, id))
		return 0;
	x->doc[id] = stage_is_doc(doc);
	x->path[id] = strndup(doc->path, doc->path_len);
	return x->path[id] ? 0 : -ENOMEM;
}

static const struct dupes_export *sort_ctx;

static int cmp_by_path(const void *a, const void *b)
{
	return strcmp(sort_ctx->path[*(const uint32_t *)a],
		      sort_ctx->path[*(const uint32_t *)b]);
}

/* Print every document with a dupe, by path, as `imatch dupes` does. */
static int dx_print(const struct cli *c, struct dupes_export *x)
{
	struct dupes ds = {0};
	uint32_t *order = NULL, m = 0;
	size_t shown = 0;
	int ret = -ENOMEM;

	order = malloc(((size_t)x->n + 1) * sizeof(*order));
	if (!order)
		return -ENOMEM;
	for (uint32_t i = 0; i < x->n; i++)
		if (x->path[i] && x->doc[i])
			order[m++] = i;
	sort_ctx = x;
	sort_n(order, m, sizeof(*order), cmp_by_path);
	if (c->json) {
		fputs("{\n  \"root\": ", stdout);
		put_json_string(stdout, c->root ? c->root : ".");
		printf(",\n  \"similarity\": %g,\n  \"documents\": [",
		       c->p.similarity);
	}
	for (uint32_t k = 0; k < m; k++) {
		uint32_t id = order[k], r = x->exact[id];
		size_t need = x->class_off[r + 1] - x->class_off[r];

		for (size_t f = dx_first(x, id); f < x->ne && x->e[f].a == id;
		     f++)
			need++;
		if (ds.cap < need) {
			free(ds.v);
			ds.v = malloc(need * sizeof(*ds.v));
			ds.cap = ds.v ? need : 0;
			if (!ds.v)
				goto out;
		}
		ds.n = 0;
		for (uint32_t j = x->class_off[r]; j < x->class_off[r + 1]; j++)
			if (x->class_mem[j] != id)
				ds.v[ds.n++] = (struct dupe){
					x->path[x->class_mem[j]], 1.0, true};
		/* Near links, once per other document (a pair linked under
		 * several keys has one similarity); copies are listed above. */
		for (size_t f = dx_first(x, id); f < x->ne && x->e[f].a == id;
		     f++) {
			const struct edge *e = &x->e[f];

			if (x->exact[e->b] == r ||
			    (f > 0 && x->e[f - 1].a == id &&
			     x->e[f - 1].b == e->b))
				continue;
			ds.v[ds.n++] = (struct dupe){x->path[e->b],
						     e->similarity, false};
		}
		sort_n(ds.v, ds.n, sizeof(*ds.v), cmp_dupe);
		print_dupes_doc(c, x->path[id], &ds, shown++ == 0);
	}
	if (c->json)
		fputs(shown ? "\n  ]\n}\n" : "]\n}\n", stdout);
	ret = 0;
out:
	free(ds.v);
	free(order);
	return ret;
}

static int export_dupes(struct cli *c, struct im_stage_reader **rs,
			const struct shard_set *ss)
{
	struct dupes_export x = {.n = (uint32_t)ss->base[ss->nshards]};
	int ret = -ENOMEM;

	x.exact = malloc(((size_t)x.n + 1) * sizeof(*x.exact));
	x.class_off = calloc((size_t)x.n + 2, sizeof(*x.class_off));
	x.class_mem = malloc(((size_t)x.n + 1) * sizeof(*x.class_mem));
	x.path = calloc((size_t)x.n + 1, sizeof(*x.path));
	x.doc = calloc((size_t)x.n + 1, sizeof(*x.doc));
	if (!x.exact || !x.class_off || !x.class_mem || !x.path || !x.doc)
		goto out;
	for (uint32_t i = 0; i < x.n; i++)
		x.exact[i] = i;
	ret = foreach_link(c, rs, ss, dx_link, &x);
	if (!ret)
		ret = dx_classes(&x);
	if (ret)
		goto out;
	sort_n(x.e, x.ne, sizeof(*x.e), cmp_edge);
	ret = shard_set_foreach(ss, dx_path, &x);
	if (!ret)
		ret = dx_print(c, &x);
out:
	for (uint32_t i = 0; x.path && i < x.n; i++)
		free(x.path[i]);
	free(x.path);
	free(x.doc);
	free(x.exact);
	free(x.class_off);
	free(x.class_mem);
	free(x.e);
	return ret;
}

/* ---- export --plan ------------------------------------------------------------ */

/*
 * The removal plan of `imatch dedupe` from the stage files: the files are
 * the texts (signed or rejected) of the clusters, as dedupe takes the
 * members of the index's clusters, and the links are the index's relation
 * (im_index_links()): every pair of one exact class (identical bytes), and
 * the near links between classes. Planned by im_plan_build(), as dedupe
 * plans: a class of copies is given as one (im_plan_file.exact_class), not
 * as m(m-1)/2 links.
 */
struct plan_export {
	struct cli *c;
	struct im_stage_reader **rs;
	const struct shard_set *ss;
	struct im_stage_reader *cls;
};

struct plan_docs {
	const struct cli *c;
	const uint32_t *label;
	const struct cluster *v;
	uint32_t *fi; /* file index of each document, or UINT32_MAX */
	struct im_plan_set *set;
	uint64_t dev;
};

/*
 * Add the file @p doc of cluster @p name to the plan's files if it is in the
 * exact tier (a document, a binary file or a failed extraction, as imatch
 * dedupe plans them) and not left out by --exclude/--include. @return its
 * file index, UINT32_MAX for none, or -ENOMEM in *@p ret.
 */
static uint32_t plan_file_add(const struct cli *c, struct im_plan_set *s,
			      const struct im_stage_doc *doc,
			      const struct im_sig *name, uint64_t dev, int *ret)
{
	size_t i = s->nfiles;
	char *path;

	struct im_doc_sigs tier = {.status = doc->d.status, .size = doc->size};

	*ret = 0;
	if (!im_exact_tier(&tier))
		return UINT32_MAX;
	path = strndup(doc->path, doc->path_len);
	if (!path) {
		*ret = -ENOMEM;
		return UINT32_MAX;
	}
	if (dedupe_excluded(c, path)) {
		free(path);
		return UINT32_MAX;
	}
	/* The records hold no device: one tree, one device, as the walker
	 * met it (a hard link's keeper is the same inode only on it). */
	s->files[i] = (struct im_plan_file){.path = path,
					    .size = doc->size,
					    .mtime_ns = doc->mtime_ns,
					    .dev = dev,
					    .ino = doc->ino,
					    .numbers = doc->d.numbers};
	s->hash_valid[i] = doc->d.exact_valid;
	memcpy(s->hash[i], doc->d.exact, sizeof(s->hash[i]));
	if (!doc->d.exact_valid)
		memset(s->hash[i], 0, sizeof(s->hash[i]));
	s->cluster[i] = *name;
	s->nfiles = i + 1;
	return (uint32_t)i;
}

static int plan_doc(uint32_t id, const struct im_stage_doc *doc,
		    struct im_stage_reader *r, void *arg)
{
	struct plan_docs *pd = arg;
	int ret = 0;

	(void)r;
	if (!doc)
		return 0;
	pd->fi[id] = UINT32_MAX;
	if (pd->label[id])
		pd->fi[id] = plan_file_add(pd->c, pd->set, doc,
					   &pd->v[pd->label[id] - 1].name,
					   pd->dev, &ret);
	return ret;
}

struct plan_links {
	struct im_plan_link *v;
	size_t n, cap;
};

static int plan_link(struct plan_links *pl, uint32_t a, uint32_t b,
		     double similarity, bool exact)
{
	if (a == UINT32_MAX || b == UINT32_MAX)
		return 0;
	if (pl->n == pl->cap) {
		size_t cap = pl->cap ? 2 * pl->cap : 1024;
		struct im_plan_link *v = realloc(pl->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		pl->v = v;
		pl->cap = cap;
	}
	pl->v[pl->n++] = (struct im_plan_link){.a = a,
					       .b = b,
					       .similarity = (float)similarity,
					       .exact = exact};
	return 0;
}

/* The relation over the files: near links once per pair, and the exact
 * classes. */
static int plan_relation(const struct dupes_export *x, const uint32_t *fi,
			 struct im_plan_file *files, struct plan_links *pl)
{
	int ret = 0;

	for (size_t f = 0; f < x->ne && !ret; f++) {
		const struct edge *e = &x->e[f];

		if (e->a > e->b || x->exact[e->a] == x->exact[e->b] ||
		    (f > 0 && x->e[f - 1].a == e->a && x->e[f - 1].b == e->b))
			continue;
		ret = plan_link(pl, fi[e->a], fi[e->b], e->similarity, false);
	}
	for (uint32_t r = 0; r < x->n; r++) {
		if (x->class_off[r + 1] - x->class_off[r] < 2)
			continue;
		for (uint32_t i = x->class_off[r]; i < x->class_off[r + 1]; i++)
			if (fi[x->class_mem[i]] != UINT32_MAX)
				files[fi[x->class_mem[i]]].exact_class = r + 1;
	}
	return ret;
}

/* Say why planning failed (-EINVAL: the inputs do not match). */
static void plan_failed(int ret)
{
	if (ret == -EINVAL)
		err_msg("export: corrupt: the records, links and clusters do "
			"not belong together");
	else if (ret)
		err_msg("export: %s", strerror(-ret));
}

static int plan_build(const struct im_plan_opts *o, const char *root,
		      struct im_plan_set *set, void *arg)
{
	struct plan_export *pe = arg;
	const struct shard_set *ss = pe->ss;
	struct dupes_export x = {.n = (uint32_t)ss->base[ss->nshards]};
	uint64_t ncl = im_stage_count(pe->cls),
		 nmem = im_stage_meta(pe->cls, CL_MEMBERS);
	struct plan_docs pd = {.c = pe->c, .set = set};
	struct plan_links pl = {0};
	struct cluster *v = calloc(ncl + 1, sizeof(*v));
	uint32_t *label = calloc((size_t)x.n + 1, sizeof(*label));
	struct stat st;
	int ret = -ENOMEM;

	pd.fi = malloc(((size_t)x.n + 1) * sizeof(*pd.fi));
	x.exact = malloc(((size_t)x.n + 1) * sizeof(*x.exact));
	x.class_off = calloc((size_t)x.n + 2, sizeof(*x.class_off));
	x.class_mem = malloc(((size_t)x.n + 1) * sizeof(*x.class_mem));
	set->files = calloc(nmem + 1, sizeof(*set->files));
	set->hash = malloc((nmem + 1) * sizeof(*set->hash));
	set->hash_valid = calloc(nmem + 1, sizeof(*set->hash_valid));
	set->cluster = calloc(nmem + 1, sizeof(*set->cluster));
	if (!v || !label || !pd.fi || !x.exact || !x.class_off ||
	    !x.class_mem || !set->files || !set->hash || !set->hash_valid ||
	    !set->cluster)
		goto out;
	if (stat(root, &st)) {
		ret = -errno;
		err_msg("%s: %s", root, strerror(errno));
		goto out;
	}
	pd.dev = st.st_dev;
	ret = cluster_labels(pe->cls, ss, label, v);
	if (ret == -EINVAL)
		goto said;
	if (ret)
		goto out;
	pd.label = label;
	pd.v = v;
	for (uint32_t i = 0; i < x.n; i++)
		x.exact[i] = i;
	ret = foreach_link(pe->c, pe->rs, ss, dx_link, &x);
	if (ret == -EINVAL)
		goto said;
	if (!ret)
		ret = dx_classes(&x);
	if (ret)
		goto out;
	sort_n(x.e, x.ne, sizeof(*x.e), cmp_edge);
	/* More members than the clusters file counts: plan_doc would write
	 * past the arrays. */
	ret = im_stage_meta(pe->cls, CL_DOCS) == x.n ? 0 : -EINVAL;
	if (!ret) {
		ret = shard_set_foreach(ss, plan_doc, &pd);
		if (ret == -EINVAL)
			goto said;
	}
	if (!ret && set->nfiles > nmem)
		ret = -EINVAL;
	if (!ret)
		ret = plan_relation(&x, pd.fi, set->files, &pl);
	if (!ret)
		ret = im_plan_build(set->files, set->nfiles, pl.v, pl.n, o,
				    &set->plan);
out:
	plan_failed(ret);
said:
	free_cluster_list(v, ncl);
	free(label);
	free(pd.fi);
	free(pl.v);
	free(x.exact);
	free(x.class_off);
	free(x.class_mem);
	free(x.e);
	return ret ? -1 : 0;
}

static int export_plan(struct cli *c, struct im_stage_reader **rs)
{
	struct plan_export pe = {.c = c, .rs = rs};
	struct shard_set ss = {0};
	struct run_keys keys;
	int code = EXIT_RUNTIME;

	if (!c->root) {
		err_msg("export --plan: --root DIR is required (the plan names "
			"files by absolute path)");
		return EXIT_USAGE;
	}
	if (run_key(c, NULL, &keys) ||
	    open_all(c, rs, &keys,
		     1u << IM_STAGE_RECORDS | 1u << IM_STAGE_LINKS |
			     1u << IM_STAGE_CLUSTERS) ||
	    shard_set_init(c, rs, &ss) || links_complete(c, rs, &ss))
		goto out;
	pe.ss = &ss;
	for (int i = 0; i < c->argc; i++)
		if (im_stage_header(rs[i])->kind == IM_STAGE_CLUSTERS)
			pe.cls = pe.cls ? NULL : rs[i];
	if (!pe.cls) {
		err_msg("export --plan: give exactly one clusters file, with "
			"every shard's records and every links file");
		goto out;
	}
	if (clusters_of(pe.cls, &ss))
		goto out;
	code = dedupe_print(c, c->root, plan_build, &pe);
out:
	shard_set_release(&ss);
	return code;
}

/*
 * Whether the records hold exactly the files that the manifest @p man lists:
 * @p have[s] for each of @p nhave shards (what sign --records counted and
 * fingerprinted of the list it was given), or their sum. Compared shard by
 * shard when the manifest numbers as many shards (more than one), else in
 * all. A shard signed with another's list under its id passes the other
 * checks of export (each file is signed, once per list it is in) but not
 * this one. @return 0, or -1 after one line saying what differs.
 */
static int records_of_manifest(const char *name, struct im_stage_reader *man,
			       const struct list_print *have, uint32_t nhave)
{
	struct list_print *want = NULL, sum = {0};
	uint32_t nwant;
	bool whole = false;
	int ret = manifest_lists(man, &want, &nwant);

	if (ret) {
		err_msg("%s: %s", name,
			ret == -EINVAL ? "corrupt: a record does not decode"
				       : strerror(-ret));
		return -1;
	}
	if (nwant != nhave || nwant == 1) {
		for (uint32_t s = 1; s < nwant; s++) {
			want[0].files += want[s].files;
			want[0].paths += want[s].paths;
		}
		for (uint32_t s = 0; s < nhave; s++) {
			sum.files += have[s].files;
			sum.paths += have[s].paths;
		}
		have = &sum;
		nwant = 1;
		whole = true;
	}
	for (uint32_t s = 0; s < nwant && !ret; s++) {
		bool count = have[s].files != want[s].files;

		if (!count && have[s].paths == want[s].paths)
			continue;
		if (whole && count)
			err_msg("%s: lists %" PRIu64
				" files, but the records hold %" PRIu64,
				name, want[s].files, have[s].files);
		else if (whole)
			err_msg("%s: lists other files than the records hold",
				name);
		else if (count)
			err_msg("%s: shard %" PRIu32 " lists %" PRIu64
				" files, but its records hold %" PRIu64,
				name, s, want[s].files, have[s].files);
		else
			err_msg("%s: shard %" PRIu32 " lists other files than "
				"its records hold (a shard signed with "
				"another's list?)",
				name, s);
		ret = -1;
	}
	free(want);
	return ret;
}

/* The totals of scan --json besides the documents' (from the records):
 * the manifest's and the lexicon's. */
static void scan_totals(struct cli *c, struct im_stage_reader *man,
			const struct im_lexicon *lex, struct scan_summary *sum)
{
	sum->c.files = im_stage_meta(man, 0);
	sum->c.dirs = im_stage_meta(man, 1);
	sum->c.hidden = im_stage_meta(man, 2);
	sum->c.other = im_stage_meta(man, 3);
	sum->c.errors = im_stage_meta(man, 4);
	sum->lex_docs = im_lexicon_docs(lex);
	sum->primary = im_lexicon_primary_size(lex);
	sum->secondary = im_lexicon_secondary_size(lex);
	im_lexicon_window(lex, &sum->nidf_lo, &sum->nidf_hi);
	sum->have_window = true;
	/* The batch built its lexicon from the tree, as scan does without
	 * --lexicon: report it the same way. */
	c->lexicon = NULL;
}

/* ---- export in parts ------------------------------------------------------------ */

/*
 * `export --part I/N -o FILE` writes what part I of N of the documents
 * contributes to an output; `export PART...` joins the N parts into the
 * bytes one export prints. A part is a range of dense ids (records order):
 * n*I/N up to n*(I+1)/N. What a part owns:
 *   scan   the clusters whose name hashes to the part (XXH3 of the name,
 *          im_stage_part_of()), wherever their members are;
 *   dupes  the documents in its range that have dupes;
 *   plan   the plan entries of the clusters it owns as scan does (a plan is
 *          made cluster by cluster, plan.h).
 * Each owned item is rendered as the whole output renders it, behind a sort
 * key whose byte order is the output's order (scan: size descending, then
 * the first member's path; dupes: the path; plan: the keeper's rank, then
 * the file's, by the keep rules), so the join is a merge of the parts'
 * sorted records (im_stage_merge) holding nothing per document. A part
 * holds what it owns, with the paths of other parts' documents that it
 * names (a cluster's members, a document's dupes), read from the records of
 * the shards that hold them; dupes also holds the exact classes of all
 * documents (4 bytes each plus a bit): a copy may be anywhere.
 *
 * Record: u32 key length, the key, then the text. Meta: XP_OUTPUT, then
 * scan: per status the documents of the shards whose first document is in
 * the part (each shard counted by one part), their bytes and their lists'
 * fingerprint (for the join to check against the manifest); plan: the
 * totals of its plan (XP_PLAN_*).
 */
enum { XP_SCAN = 1, XP_DUPES = 2, XP_PLAN = 3 };
enum {
	XP_OUTPUT = 0,
	XP_STATUS0 = 1, /* scan: .. XP_STATUS0 + IM_DOC_STATUS_COUNT - 1 */
	XP_BYTES = XP_STATUS0 + IM_DOC_STATUS_COUNT,
	XP_PATHS,      /* scan: the sum of those shards' REC_PATHS */
	XP_PLAN_N = 1, /* plan */
	XP_PLAN_KEEPERS,
	XP_PLAN_SAME_INODE,
	XP_PLAN_PROTECTED,
	XP_PLAN_BYTES,
	XP_PLAN_EXACT_BYTES,
	XP_PLAN_EXACT,
	XP_PLAN_FIGURES, /* near-duplicates kept for their figures */
};
static const char *const xp_meta[] = {"output", "count1", "count2",
				      "count3", "count4", "count5",
				      "count6", "count7", "count8"};

struct xpart {
	struct cli *c;
	const struct shard_set *ss;
	struct im_stage_reader **rs;
	uint32_t lo, hi; /* dense ids of this part */
	uint32_t part, nparts;
	struct im_stage_writer *w;
	struct im_stage_buf key, rec, last; /* last: the key written last */
	uint64_t meta[IM_STAGE_META];
};

static uint32_t xp_lo(uint32_t n, uint32_t part, uint32_t nparts)
{
	return (uint32_t)((uint64_t)n * part / nparts);
}

static void key_be(struct im_stage_buf *k, uint64_t v, unsigned bytes)
{
	uint8_t b[8];

	for (unsigned i = 0; i < bytes; i++)
		b[i] = (uint8_t)(v >> (8 * (bytes - 1 - i)));
	im_stage_buf_put(k, b, bytes);
}

/* A path ends with its NUL: no path holds one, so a path that is a prefix
 * of another sorts first, as strcmp() has it. */
static void key_path(struct im_stage_buf *k, const char *path)
{
	im_stage_buf_put(k, path, strlen(path) + 1);
}

/* Write one record: x->key, then @p len bytes of @p text. Records come
 * in key order, so a part is written as it is rendered, never held: a
 * part of dupes.json is some 400 bytes per document of its range. @return
 * 0, -ENOMEM, -EDOM for a key out of order, or the write's error. */
static int xp_add(struct xpart *x, const char *text, size_t len)
{
	int ret;

	x->rec.len = 0;
	xp_rec_encode(&x->rec, x->key.p, x->key.len, text, len);
	if (x->key.oom || x->rec.oom)
		return -ENOMEM;
	if (x->last.len &&
	    xp_rec_cmp(x->last.p, x->last.len, x->rec.p, 4 + x->key.len) >= 0)
		return -EDOM;
	ret = im_stage_writer_add(x->w, x->rec.p, x->rec.len);
	x->last.len = 0;
	im_stage_buf_put(&x->last, x->rec.p, 4 + x->key.len);
	x->key.len = 0;
	return x->last.oom ? -ENOMEM : ret;
}

/* Text rendered into memory. */
struct mem {
	char *p;
	size_t len;
	FILE *f;
};

static FILE *mem_open(struct mem *m)
{
	m->p = NULL;
	m->len = 0;
	m->f = open_memstream(&m->p, &m->len);
	return m->f;
}

/* Close and add the text as a record. */
static int mem_add(struct mem *m, struct xpart *x)
{
	int ret = fclose(m->f) ? -ENOMEM : xp_add(x, m->p, m->len);

	free(m->p);
	return ret;
}

/*
 * Call @p fn for the documents @p ids (sorted, unique), reading only the
 * shards that hold them. @return 0, -EINVAL after saying that an id is
 * past the records or naming the file of a record that does not decode,
 * or fn's value.
 */
static int docs_of(const struct shard_set *ss, const uint32_t *ids, size_t n,
		   int (*fn)(size_t i, const struct im_stage_doc *doc,
			     void *arg),
		   void *arg)
{
	size_t i = 0;
	int ret;

	for (uint32_t s = 0; s < ss->nshards && i < n; s++) {
		uint64_t id = ss->base[s];
		const uint8_t *p;
		size_t len;

		if (ids[i] >= ss->base[s + 1])
			continue;
		im_stage_rewind(ss->rec[s]);
		while (i < n && ids[i] < ss->base[s + 1] &&
		       im_stage_next(ss->rec[s], &p, &len)) {
			struct im_stage_doc doc;

			if (id++ != ids[i])
				continue;
			if (im_stage_doc_decode(p, len, &doc))
				return record_corrupt(ss, s,
						      id - 1 - ss->base[s]);
			ret = fn(i++, &doc, arg);
			if (ret)
				return ret;
		}
		im_stage_drop(ss->rec[s]);
	}
	if (i == n)
		return 0;
	err_msg("export: corrupt: a document past the records");
	return -EINVAL;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

/* Sort and drop repeats. @return the count left. */
static size_t sort_unique(uint32_t *v, size_t n)
{
	size_t m = 0;

	sort_n(v, n, sizeof(*v), cmp_u32);
	for (size_t i = 0; i < n; i++)
		if (!m || v[m - 1] != v[i])
			v[m++] = v[i];
	return m;
}

/* Index of @p id in the sorted @p v, or SIZE_MAX. */
static size_t find_u32(const uint32_t *v, size_t n, uint32_t id)
{
	const uint32_t *hit = bsearch(&id, v, n, sizeof(*v), cmp_u32);

	return hit ? (size_t)(hit - v) : SIZE_MAX;
}

/* The clusters a part owns (by the hash of the name: the name itself is
 * the smallest signature, skewed low, and the first member's range would
 * give the first parts most of the clusters that span the tree): names,
 * and their members one cluster after the other, each in id order. */
struct owned {
	struct im_sig *name;
	uint32_t *off; /* [ncl + 1] into ids */
	uint32_t *ids;
	size_t ncl, nids, ccap, icap;
};

static void owned_release(struct owned *o)
{
	free(o->name);
	free(o->off);
	free(o->ids);
}

static int owned_push(struct owned *o, const struct im_sig *name,
		      const uint8_t *ids, uint32_t n)
{
	if (o->ncl + 1 >= o->ccap) {
		size_t cap = o->ccap ? 2 * o->ccap : 64;
		struct im_sig *nv = realloc(o->name, cap * sizeof(*nv));
		uint32_t *ov;

		if (!nv)
			return -ENOMEM;
		o->name = nv;
		ov = realloc(o->off, (cap + 1) * sizeof(*ov));
		if (!ov)
			return -ENOMEM;
		o->off = ov;
		o->ccap = cap;
	}
	if (o->icap - o->nids < n) {
		size_t cap = o->icap ? 2 * o->icap : 256;
		uint32_t *v;

		while (cap - o->nids < n)
			cap *= 2;
		v = realloc(o->ids, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		o->ids = v;
		o->icap = cap;
	}
	o->off[o->ncl] = (uint32_t)o->nids;
	o->name[o->ncl++] = *name;
	for (uint32_t j = 0; j < n; j++)
		o->ids[o->nids++] = im_stage_cluster_member(ids, j);
	o->off[o->ncl] = (uint32_t)o->nids;
	return 0;
}

/* @return 0, -ENOMEM, or -EINVAL after saying what is corrupt. */
static int owned_clusters(struct im_stage_reader *cls, const struct xpart *x,
			  struct owned *o)
{
	uint64_t n = x->ss->base[x->ss->nshards];
	const uint8_t *p;
	size_t len;
	int ret;

	memset(o, 0, sizeof(*o));
	im_stage_rewind(cls);
	for (uint64_t i = 1; im_stage_next(cls, &p, &len); i++) {
		struct im_sig name;
		const uint8_t *ids;
		uint32_t k;

		if (im_stage_cluster_decode(p, len, &name, &ids, &k)) {
			err_msg("%s: corrupt: cluster %" PRIu64
				" does not decode",
				im_stage_path(cls), i);
			return -EINVAL;
		}
		if (im_stage_cluster_member(ids, k - 1) >= n) {
			err_msg("%s: corrupt: cluster %" PRIu64
				" has a member out of range",
				im_stage_path(cls), i);
			return -EINVAL;
		}
		if (im_stage_part_of(XXH3_64bits(name.b, IM_SIG_LEN),
				     x->nparts) != x->part)
			continue;
		ret = owned_push(o, &name, ids, k);
		if (ret)
			return ret;
	}
	im_stage_drop(cls);
	return 0;
}

/* The owned members in id order, as positions into o->ids, and the ids
 * sorted (@p sorted). @return 0, -ENOMEM, or -EINVAL for a member in two
 * clusters of @p cls, after saying so. */
static int owned_sorted(const struct owned *o, struct im_stage_reader *cls,
			uint32_t **sorted)
{
	uint32_t *v = malloc((o->nids + 1) * sizeof(*v));

	*sorted = v;
	if (!v)
		return -ENOMEM;
	if (o->nids) /* o->ids may be NULL then */
		memcpy(v, o->ids, o->nids * sizeof(*v));
	if (sort_unique(v, o->nids) != o->nids) {
		err_msg("%s: corrupt: a document in two clusters",
			im_stage_path(cls));
		return -EINVAL;
	}
	return 0;
}

/* ---- scan, in parts ---- */

struct xp_paths {
	char **path; /* [i]: the path of the i-th sorted id */
	bool *doc;   /* [i]: whether it is a document (stage_is_doc), or
		      * NULL: not wanted */
};

static int keep_path(size_t i, const struct im_stage_doc *doc, void *arg)
{
	struct xp_paths *xp = arg;

	if (xp->doc)
		xp->doc[i] = stage_is_doc(doc);
	xp->path[i] = strndup(doc->path, doc->path_len);
	return xp->path[i] ? 0 : -ENOMEM;
}

static void free_paths(char **path, size_t n)
{
	for (size_t i = 0; path && i < n; i++)
		free(path[i]);
	free(path);
}

/* Each shard's counts go with the part that holds its first document (the
 * last part for empty shards at the end). */
static void xp_shard_counts(struct xpart *x)
{
	const struct shard_set *ss = x->ss;
	uint32_t n = (uint32_t)ss->base[ss->nshards];

	for (uint32_t s = 0; s < ss->nshards; s++) {
		uint64_t first = ss->base[s];
		bool mine = first < n ? first >= x->lo && first < x->hi
				      : x->part == x->nparts - 1;

		if (!mine)
			continue;
		for (unsigned k = 0; k < IM_DOC_STATUS_COUNT; k++)
			x->meta[XP_STATUS0 + k] +=
				im_stage_meta(ss->rec[s], REC_STATUS0 + k);
		x->meta[XP_BYTES] += im_stage_meta(ss->rec[s], REC_BYTES);
		x->meta[XP_PATHS] += im_stage_meta(ss->rec[s], REC_PATHS);
	}
}

static int xp_scan(struct xpart *x, struct im_stage_reader *cls)
{
	struct owned o;
	uint32_t *sorted = NULL;
	char **member = NULL;
	struct cluster *v = NULL;
	struct xp_paths xp = {0};
	int ret = owned_clusters(cls, x, &o);

	if (!ret)
		ret = owned_sorted(&o, cls, &sorted);
	if (ret)
		goto out;
	ret = -ENOMEM;
	xp.path = calloc(o.nids + 1, sizeof(*xp.path));
	member = calloc(o.nids + 1, sizeof(*member));
	if (!xp.path || !member)
		goto out;
	ret = docs_of(x->ss, sorted, o.nids, keep_path, &xp);
	v = calloc(o.ncl + 1, sizeof(*v));
	if (!ret && !v)
		ret = -ENOMEM;
	for (size_t k = 0; !ret && k < o.ncl; k++) {
		v[k] = (struct cluster){.name = o.name[k],
					.size = o.off[k + 1] - o.off[k],
					.members = member + o.off[k]};
		for (size_t j = 0; j < v[k].size; j++)
			v[k].members[j] = xp.path[find_u32(
				sorted, o.nids, o.ids[o.off[k] + j])];
		sort_n(v[k].members, v[k].size, sizeof(*v[k].members),
		       cmp_strp);
	}
	/* In the output's order, so that each is written as rendered. */
	if (!ret)
		sort_n(v, o.ncl, sizeof(*v), cmp_cluster);
	for (size_t k = 0; !ret && k < o.ncl; k++) {
		struct mem m;

		/* cmp_cluster(): the larger first, then the first member. */
		key_be(&x->key, UINT32_MAX - (uint32_t)v[k].size, 4);
		key_path(&x->key, v[k].members[0]);
		if (!mem_open(&m)) {
			ret = -ENOMEM;
			break;
		}
		if (x->c->json)
			put_scan_cluster_json(m.f, &v[k]);
		else
			put_scan_cluster_text(m.f, &v[k]);
		ret = mem_add(&m, x);
	}
	x->meta[XP_OUTPUT] = XP_SCAN;
	xp_shard_counts(x);
out:
	free_paths(xp.path, o.nids);
	free(member);
	free(v);
	free(sorted);
	owned_release(&o);
	return ret;
}

/* ---- dupes, in parts ---- */

struct xp_dupes {
	const struct xpart *x;
	uint32_t *exact; /* union-find over every document, then roots */
	struct edge *e;	 /* near links from the part's documents */
	size_t ne, cap;
};

static int xd_link(uint32_t a, uint32_t b, const struct im_stage_link *l,
		   void *arg)
{
	struct xp_dupes *d = arg;
	bool ain = a >= d->x->lo && a < d->x->hi,
	     bin = b >= d->x->lo && b < d->x->hi;

	if (l->exact) {
		uf_union(d->exact, a, b);
		return 0;
	}
	if (!ain && !bin)
		return 0;
	if (edge_room(&d->e, d->ne, &d->cap))
		return -ENOMEM;
	if (ain)
		d->e[d->ne++] = (struct edge){a, b, l->similarity};
	if (bin)
		d->e[d->ne++] = (struct edge){b, a, l->similarity};
	return 0;
}

/* Members of the exact classes that hold a document of the part: pairs
 * (root, id) sorted, so a class is one run. */
struct class_pair {
	uint32_t root, id;
};

static int cmp_class_pair(const void *a, const void *b)
{
	const struct class_pair *x = a, *y = b;

	if (x->root != y->root)
		return x->root < y->root ? -1 : 1;
	return (x->id > y->id) - (x->id < y->id);
}

/* The run of class @p root in @p v: [*from, return). */
static size_t class_run(const struct class_pair *v, size_t n, uint32_t root,
			size_t *from)
{
	size_t lo = 0, hi = n, end;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid].root < root)
			lo = mid + 1;
		else
			hi = mid;
	}
	*from = lo;
	for (end = lo; end < n && v[end].root == root; end++)
		;
	return end;
}

/* A document and its path, to sort by path. */
struct named {
	const char *path;
	uint32_t id;
};

static int cmp_named(const void *a, const void *b)
{
	return strcmp(((const struct named *)a)->path,
		      ((const struct named *)b)->path);
}

static int xp_dupes_render(struct xpart *x, struct xp_dupes *d,
			   const struct class_pair *cp, size_t ncp,
			   const uint32_t *need, size_t nneed, char **path,
			   const bool *is_doc)
{
	struct dupes ds = {0};
	struct named *order =
		malloc(((size_t)(x->hi - x->lo) + 1) * sizeof(*order));
	int ret = 0;

	if (!order)
		return -ENOMEM;
	/* By path, the output's order, so that each is written as rendered. */
	for (uint32_t id = x->lo; id < x->hi; id++)
		order[id - x->lo] =
			(struct named){path[find_u32(need, nneed, id)], id};
	sort_n(order, x->hi - x->lo, sizeof(*order), cmp_named);
	for (uint32_t k = 0; k < x->hi - x->lo && !ret; k++) {
		uint32_t id = order[k].id;
		size_t f = dx_first(
			       &(struct dupes_export){.e = d->e, .ne = d->ne},
			       id),
		       cfrom, cto, need_n;
		uint32_t r = d->exact[id];
		const char *self;
		struct mem m;

		cto = class_run(cp, ncp, r, &cfrom);
		need_n = cto - cfrom;
		for (size_t g = f; g < d->ne && d->e[g].a == id; g++)
			need_n++;
		if (need_n < 2 && !(f < d->ne && d->e[f].a == id))
			continue; /* alone in its class, no near link */
		if (!is_doc[find_u32(need, nneed, id)])
			continue; /* no line of its own, as in dupes */
		if (ds.cap < need_n) {
			free(ds.v);
			ds.v = malloc(need_n * sizeof(*ds.v));
			ds.cap = ds.v ? need_n : 0;
			if (!ds.v) {
				ret = -ENOMEM;
				break;
			}
		}
		ds.n = 0;
		for (size_t j = cfrom; j < cto; j++)
			if (cp[j].id != id)
				ds.v[ds.n++] = (struct dupe){
					path[find_u32(need, nneed, cp[j].id)],
					1.0, true};
		/* As dx_print(): near links once per other document, copies
		 * listed above. */
		for (size_t g = f; g < d->ne && d->e[g].a == id; g++) {
			const struct edge *e = &d->e[g];

			if (d->exact[e->b] == r ||
			    (g > f && d->e[g - 1].b == e->b))
				continue;
			ds.v[ds.n++] =
				(struct dupe){path[find_u32(need, nneed, e->b)],
					      e->similarity, false};
		}
		if (!ds.n)
			continue;
		sort_n(ds.v, ds.n, sizeof(*ds.v), cmp_dupe);
		self = order[k].path;
		key_path(&x->key, self);
		if (!mem_open(&m)) {
			ret = -ENOMEM;
			break;
		}
		put_dupes_doc(m.f, x->c, self, &ds);
		ret = mem_add(&m, x);
	}
	free(ds.v);
	free(order);
	return ret;
}

static int xp_dupes(struct xpart *x)
{
	uint32_t n = (uint32_t)x->ss->base[x->ss->nshards];
	struct xp_dupes d = {.x = x};
	uint8_t *mark = calloc((size_t)n / 8 + 1, 1);
	struct class_pair *cp = NULL;
	uint32_t *need = NULL;
	struct xp_paths xp = {0};
	size_t ncp = 0, nneed = 0;
	int ret = -ENOMEM;

	d.exact = malloc(((size_t)n + 1) * sizeof(*d.exact));
	if (!mark || !d.exact)
		goto out;
	for (uint32_t i = 0; i < n; i++)
		d.exact[i] = i;
	ret = foreach_link(x->c, x->rs, x->ss, xd_link, &d);
	if (ret)
		goto out;
	for (uint32_t i = 0; i < n; i++)
		d.exact[i] = uf_find(d.exact, i);
	sort_n(d.e, d.ne, sizeof(*d.e), cmp_edge);
	/* The classes of the part's documents, wherever their members are. */
	for (uint32_t i = x->lo; i < x->hi; i++)
		mark[d.exact[i] / 8] |= (uint8_t)(1u << (d.exact[i] % 8));
	for (uint32_t i = 0; i < n; i++)
		ncp += (mark[d.exact[i] / 8] >> (d.exact[i] % 8)) & 1;
	ret = -ENOMEM;
	cp = malloc((ncp + 1) * sizeof(*cp));
	need = malloc((ncp + d.ne + 1) * sizeof(*need));
	if (!cp || !need)
		goto out;
	ncp = 0;
	for (uint32_t i = 0; i < n; i++)
		if ((mark[d.exact[i] / 8] >> (d.exact[i] % 8)) & 1)
			cp[ncp++] = (struct class_pair){d.exact[i], i};
	free(mark);
	mark = NULL;
	sort_n(cp, ncp, sizeof(*cp), cmp_class_pair);
	/* Every path a document of the part may print: its class, its near
	 * partners, itself (in its class). */
	for (size_t j = 0; j < ncp; j++)
		need[nneed++] = cp[j].id;
	for (size_t j = 0; j < d.ne; j++)
		need[nneed++] = d.e[j].b;
	nneed = sort_unique(need, nneed);
	ret = -ENOMEM;
	xp.path = calloc(nneed + 1, sizeof(*xp.path));
	xp.doc = calloc(nneed + 1, sizeof(*xp.doc));
	if (!xp.path || !xp.doc)
		goto out;
	ret = docs_of(x->ss, need, nneed, keep_path, &xp);
	if (!ret)
		ret = xp_dupes_render(x, &d, cp, ncp, need, nneed, xp.path,
				      xp.doc);
	x->meta[XP_OUTPUT] = XP_DUPES;
out:
	free_paths(xp.path, nneed);
	free(xp.doc);
	free(mark);
	free(cp);
	free(need);
	free(d.exact);
	free(d.e);
	return ret;
}

/* ---- plan, in parts ---- */

struct xp_plan {
	struct xpart *x;
	struct im_stage_reader *cls;
	struct owned o;
	uint32_t *sorted; /* the owned members, by id */
	uint8_t *mark;	  /* a bit per document: owned (saves a search) */
	uint32_t *kl;	  /* of each: its cluster, then its file index */
	uint32_t *exact;  /* union-find over the owned members' positions */
	struct edge *e;	  /* near links, positions, both directions */
	size_t ne, cap;
	struct im_plan_set *set;
	uint64_t dev;
};

static int xl_link(uint32_t a, uint32_t b, const struct im_stage_link *l,
		   void *arg)
{
	struct xp_plan *pp = arg;
	bool ain = (pp->mark[a / 8] >> (a % 8)) & 1,
	     bin = (pp->mark[b / 8] >> (b % 8)) & 1;
	size_t i, j;

	if (!ain && !bin)
		return 0;
	i = ain ? find_u32(pp->sorted, pp->o.nids, a) : SIZE_MAX;
	j = bin ? find_u32(pp->sorted, pp->o.nids, b) : SIZE_MAX;
	/* Both ends of a link are in one cluster: owned or not together. */
	if (i == SIZE_MAX || j == SIZE_MAX)
		return i == j ? 0 : -EINVAL;
	if (l->exact) {
		uf_union(pp->exact, (uint32_t)i, (uint32_t)j);
		return 0;
	}
	if (edge_room(&pp->e, pp->ne, &pp->cap))
		return -ENOMEM;
	pp->e[pp->ne++] =
		(struct edge){(uint32_t)i, (uint32_t)j, l->similarity};
	pp->e[pp->ne++] =
		(struct edge){(uint32_t)j, (uint32_t)i, l->similarity};
	return 0;
}

/* As plan_doc(): the texts of the owned clusters, in id order. */
static int xl_doc(size_t i, const struct im_stage_doc *doc, void *arg)
{
	struct xp_plan *pp = arg;
	int ret;

	/* kl[i] holds the cluster, marked; it becomes the file index. */
	pp->kl[i] = plan_file_add(pp->x->c, pp->set, doc,
				  &pp->o.name[pp->kl[i] & 0x7fffffffu], pp->dev,
				  &ret);
	return ret;
}

static int xl_build(const struct im_plan_opts *o, const char *root,
		    struct im_plan_set *set, void *arg)
{
	struct xp_plan *pp = arg;
	struct plan_links pl = {0};
	size_t n;
	struct stat st;
	int ret = owned_clusters(pp->cls, pp->x, &pp->o);

	pp->set = set;
	if (!ret)
		ret = owned_sorted(&pp->o, pp->cls, &pp->sorted);
	if (ret == -EINVAL)
		return -1; /* said what */
	if (ret)
		goto out;
	n = pp->o.nids;
	ret = -ENOMEM;
	pp->kl = malloc((n + 1) * sizeof(*pp->kl));
	pp->mark = calloc(pp->x->ss->base[pp->x->ss->nshards] / 8 + 1, 1);
	pp->exact = malloc((n + 1) * sizeof(*pp->exact));
	set->files = calloc(n + 1, sizeof(*set->files));
	set->hash = malloc((n + 1) * sizeof(*set->hash));
	set->hash_valid = calloc(n + 1, sizeof(*set->hash_valid));
	set->cluster = calloc(n + 1, sizeof(*set->cluster));
	if (!pp->kl || !pp->mark || !pp->exact || !set->files || !set->hash ||
	    !set->hash_valid || !set->cluster)
		goto out;
	if (stat(root, &st)) {
		ret = -errno;
		err_msg("%s: %s", root, strerror(errno));
		goto out;
	}
	pp->dev = st.st_dev;
	for (size_t k = 0; k < pp->o.ncl; k++)
		for (uint32_t j = pp->o.off[k]; j < pp->o.off[k + 1]; j++)
			pp->kl[find_u32(pp->sorted, n, pp->o.ids[j])] =
				(uint32_t)k;
	for (size_t i = 0; i < n; i++) {
		pp->exact[i] = (uint32_t)i;
		pp->mark[pp->sorted[i] / 8] |=
			(uint8_t)(1u << (pp->sorted[i] % 8));
	}
	ret = foreach_link(pp->x->c, pp->x->rs, pp->x->ss, xl_link, pp);
	if (ret == -EINVAL)
		goto said;
	if (ret)
		goto out;
	/* kl[i] becomes the file index, or UINT32_MAX for no file. */
	ret = docs_of(pp->x->ss, pp->sorted, n, xl_doc, pp);
	if (ret == -EINVAL)
		goto said;
	sort_n(pp->e, pp->ne, sizeof(*pp->e), cmp_edge);
	/* As plan_relation(), over positions. */
	for (size_t f = 0; !ret && f < pp->ne; f++) {
		const struct edge *e = &pp->e[f];

		if (e->a > e->b ||
		    uf_find(pp->exact, e->a) == uf_find(pp->exact, e->b) ||
		    (f > 0 && pp->e[f - 1].a == e->a && pp->e[f - 1].b == e->b))
			continue;
		ret = plan_link(&pl, pp->kl[e->a], pp->kl[e->b], e->similarity,
				false);
	}
	for (size_t i = 0; !ret && i < n; i++)
		if (pp->kl[i] != UINT32_MAX)
			set->files[pp->kl[i]].exact_class =
				uf_find(pp->exact, (uint32_t)i) + 1;
	if (!ret)
		ret = im_plan_build(set->files, set->nfiles, pl.v, pl.n, o,
				    &set->plan);
	if (!ret) {
		const struct im_plan *p = &set->plan;
		uint64_t *m = pp->x->meta;

		m[XP_OUTPUT] = XP_PLAN;
		m[XP_PLAN_N] = p->n;
		m[XP_PLAN_KEEPERS] = p->keepers;
		m[XP_PLAN_SAME_INODE] = p->same_inode;
		m[XP_PLAN_PROTECTED] = p->protected_kept;
		m[XP_PLAN_BYTES] = p->bytes;
		m[XP_PLAN_EXACT_BYTES] = p->exact_bytes;
		m[XP_PLAN_EXACT] = p->exact;
		m[XP_PLAN_FIGURES] = p->nkept;
	}
out:
	plan_failed(ret);
said:
	free(pl.v);
	return ret ? -1 : 0;
}

/* The rank of a file by the keep rules (plan.c, cmp_files) as bytes. */
static void key_rank(struct im_stage_buf *k, const struct im_plan_opts *o,
		     const struct im_plan_file *f)
{
	uint64_t len = strlen(f->path),
		 t = (uint64_t)f->mtime_ns ^ 0x8000000000000000u;

	for (unsigned r = 0; r < o->keep.n; r++) {
		switch (o->keep.rule[r]) {
		case IM_KEEP_PROTECT:
			key_be(k,
			       !im_plan_protected(f->path, o->protect,
						  o->nprotect),
			       1);
			break;
		case IM_KEEP_OLDEST: key_be(k, t, 8); break;
		case IM_KEEP_NEWEST: key_be(k, ~t, 8); break;
		case IM_KEEP_SHORTEST: key_be(k, len, 8); break;
		case IM_KEEP_LONGEST: key_be(k, ~len, 8); break;
		case IM_KEEP_NAME: key_path(k, f->path); break;
		}
	}
	key_path(k, f->path);
}

static int xl_line(const struct im_plan_opts *o, const struct im_plan_set *set,
		   const struct im_plan_entry *e, const char *line, size_t len,
		   void *arg)
{
	struct xp_plan *pp = arg;
	int ret;

	key_rank(&pp->x->key, o, &set->files[e->keeper]);
	key_rank(&pp->x->key, o, &set->files[e->file]);
	ret = xp_add(pp->x, line, len);
	if (ret)
		err_msg("export: %s", strerror(-ret));
	return ret ? -1 : 0;
}

/* ---- Making a part, joining parts ---- */

static int xp_open(struct xpart *x, const struct run_keys *keys)
{
	struct im_stage_header h = {.kind = IM_STAGE_EXPORT,
				    .part = x->part,
				    .nparts = x->nparts,
				    .key = keys->link};
	int ret = im_stage_writer_new(x->c->out, &h, &x->w);

	if (ret)
		write_failed(x->c->out, ret);
	return ret;
}

static int xp_commit(struct xpart *x)
{
	int ret;

	for (unsigned k = 0; k < IM_STAGE_META; k++)
		im_stage_writer_set_meta(x->w, k, x->meta[k]);
	ret = im_stage_writer_commit(x->w);
	if (ret)
		write_failed(x->c->out, ret);
	return ret;
}

static int export_part(struct cli *c, struct im_stage_reader **rs)
{
	struct xpart x = {.c = c, .rs = rs};
	struct im_stage_reader *cls = NULL;
	struct shard_set ss = {0};
	struct run_keys keys;
	unsigned kinds = 1u << IM_STAGE_RECORDS;
	int ret, code = EXIT_RUNTIME;

	if (parse_shard_id(c->part, &x.part, &x.nparts) ||
	    x.nparts > IM_STAGE_MAX_PARTS) {
		err_msg("export: bad value for --part: '%s' (I/N, I < N <= "
			"%d)",
			c->part, IM_STAGE_MAX_PARTS);
		return EXIT_USAGE;
	}
	if (!c->out) {
		err_msg("export --part: -o FILE is required");
		return EXIT_USAGE;
	}
	if (c->plan && !c->root) {
		err_msg("export --plan: --root DIR is required (the plan names "
			"files by absolute path)");
		return EXIT_USAGE;
	}
	/* What export without --part reads (the manifest is the join's). */
	kinds |= c->dupes  ? 1u << IM_STAGE_LINKS
		 : c->plan ? 1u << IM_STAGE_LINKS | 1u << IM_STAGE_CLUSTERS
			   : 1u << IM_STAGE_CLUSTERS | 1u << IM_STAGE_MANIFEST;
	if (run_key(c, NULL, &keys) || open_all(c, rs, &keys, kinds) ||
	    shard_set_init(c, rs, &ss) ||
	    ((kinds & 1u << IM_STAGE_LINKS) && links_complete(c, rs, &ss)))
		goto out;
	for (int i = 0; i < c->argc; i++)
		if (im_stage_header(rs[i])->kind == IM_STAGE_CLUSTERS)
			cls = cls ? NULL : rs[i];
	if (!c->dupes && !cls) {
		err_msg("export: give exactly one clusters file");
		goto out;
	}
	if (cls && clusters_of(cls, &ss))
		goto out;
	x.ss = &ss;
	x.lo = xp_lo((uint32_t)ss.base[ss.nshards], x.part, x.nparts);
	x.hi = xp_lo((uint32_t)ss.base[ss.nshards], x.part + 1, x.nparts);
	if (xp_open(&x, &keys))
		goto out;
	if (c->plan) {
		struct xp_plan pp = {.x = &x, .cls = cls};

		code = dedupe_lines(c, c->root, xl_build, xl_line, &pp);
		owned_release(&pp.o);
		free(pp.sorted);
		free(pp.kl);
		free(pp.mark);
		free(pp.exact);
		free(pp.e);
		if (code)
			goto out;
		code = EXIT_RUNTIME;
		ret = 0;
	} else {
		ret = c->dupes ? xp_dupes(&x) : xp_scan(&x, cls);
		if (ret == -EINVAL)
			goto out; /* said what */
		if (ret) {
			err_msg("export: %s: %s", c->out,
				ret == -EDOM ? "records out of order"
					     : strerror(-ret));
			goto out;
		}
	}
	if (!xp_commit(&x))
		code = 0;
out:
	im_stage_writer_free(x.w);
	im_stage_buf_release(&x.key);
	im_stage_buf_release(&x.rec);
	im_stage_buf_release(&x.last);
	shard_set_release(&ss);
	return code;
}

struct xjoin {
	struct cli *c;
	struct im_stage_merge *m;
	struct im_stage_reader **parts; /* [nparts], by part */
	const char **names;		/* [nparts]: their operands */
	bool json;			/* separate the records as a list */
	size_t printed;
};

/* Print every record's text in the merged order. @return 0 or -1. */
static int xj_print(void *arg)
{
	struct xjoin *j = arg;
	const uint8_t *p, *key, *text;
	size_t len, from, klen, tlen;
	int ret;

	while ((ret = im_stage_merge_next(j->m, &p, &len, &from)) > 0) {
		/* The checksum holds for a file of another layout too: what
		 * cat --check refuses is not printed as text. */
		if (xp_rec_decode(p, len, &key, &klen, &text, &tlen)) {
			err_msg("%s: corrupt: a record does not decode",
				j->names[from]);
			return -1;
		}
		if (j->json)
			fputs(j->printed ? ",\n    " : "\n    ", stdout);
		fwrite(text, 1, tlen, stdout);
		j->printed++;
	}
	if (ret) {
		err_msg("%s: corrupt: records out of order", j->names[from]);
		return -1;
	}
	return 0;
}

/* The parts among the operands, each of N once and of the output asked
 * for. @return 0, or -1 after naming what is wrong. */
static int xj_parts(struct cli *c, struct im_stage_reader **rs, struct xjoin *j,
		    uint32_t *nparts)
{
	uint64_t want = c->plan ? XP_PLAN : c->dupes ? XP_DUPES : XP_SCAN;
	uint32_t n = 0;

	for (int i = 0; i < c->argc; i++) {
		const struct im_stage_header *h = im_stage_header(rs[i]);

		if (h->kind != IM_STAGE_EXPORT)
			continue;
		if (im_stage_meta(rs[i], XP_OUTPUT) != want) {
			err_msg("%s: a part of another output than this "
				"export's",
				c->argv[i]);
			return -1;
		}
		if (!n) {
			n = h->nparts;
			j->parts = calloc(n, sizeof(*j->parts));
			j->names = calloc(n, sizeof(*j->names));
			if (!j->parts || !j->names) {
				err_msg("%s", strerror(ENOMEM));
				return -1;
			}
		}
		if (h->nparts != n || j->parts[h->part]) {
			err_msg("%s: part %" PRIu32 " of %" PRIu32
				", but another part file is %s",
				c->argv[i], h->part, h->nparts,
				h->nparts != n ? "of another count"
					       : "the same part");
			return -1;
		}
		j->parts[h->part] = rs[i];
		j->names[h->part] = c->argv[i];
	}
	for (uint32_t p = 0; p < n; p++)
		if (!j->parts[p]) {
			err_msg("export: part %" PRIu32 " of %" PRIu32
				" is missing",
				p, n);
			return -1;
		}
	*nparts = n;
	return 0;
}

static uint64_t sum_meta(const struct xjoin *j, uint32_t n, unsigned k)
{
	uint64_t s = 0;

	for (uint32_t p = 0; p < n; p++)
		s += im_stage_meta(j->parts[p], k);
	return s;
}

static int export_join(struct cli *c, struct im_stage_reader **rs)
{
	struct xjoin j = {.c = c};
	struct im_stage_reader *man = NULL;
	struct list_print have = {0};
	const char *man_name = NULL;
	struct im_lexicon *lex = NULL;
	struct scan_summary sum = {0};
	struct run_keys keys;
	uint32_t n = 0;
	uint64_t count = 0;
	int code = EXIT_RUNTIME;

	if (c->plan && !c->root) {
		err_msg("export --plan: --root DIR is required (the plan names "
			"files by absolute path)");
		return EXIT_USAGE;
	}
	if ((!c->plan && !c->dupes && load_lexicon(c, &lex)) ||
	    run_key(c, lex, &keys) ||
	    open_all(c, rs, &keys,
		     1u << IM_STAGE_EXPORT |
			     (c->plan || c->dupes ? 0
						  : 1u << IM_STAGE_MANIFEST)) ||
	    xj_parts(c, rs, &j, &n))
		goto out;
	for (uint32_t p = 0; p < n; p++)
		count += im_stage_count(j.parts[p]);
	if (im_stage_merge_new(j.parts, n, xp_rec_cmp, &j.m)) {
		err_msg("%s", strerror(ENOMEM));
		goto out;
	}
	j.json = c->json && !c->plan && !WANT_CSV(c);
	if (c->plan) {
		struct im_plan t = {
			.n = sum_meta(&j, n, XP_PLAN_N),
			.keepers = sum_meta(&j, n, XP_PLAN_KEEPERS),
			.same_inode = sum_meta(&j, n, XP_PLAN_SAME_INODE),
			.protected_kept = sum_meta(&j, n, XP_PLAN_PROTECTED),
			.bytes = sum_meta(&j, n, XP_PLAN_BYTES),
			.exact_bytes = sum_meta(&j, n, XP_PLAN_EXACT_BYTES),
			.exact = sum_meta(&j, n, XP_PLAN_EXACT),
			.nkept = sum_meta(&j, n, XP_PLAN_FIGURES),
		};

		code = dedupe_join(c, c->root, xj_print, &t, &j);
		goto out;
	}
	if (c->dupes) {
		if (j.json) {
			fputs("{\n  \"root\": ", stdout);
			put_json_string(stdout, c->root ? c->root : ".");
			printf(",\n  \"similarity\": %g,\n  \"documents\": [",
			       c->p.similarity);
		}
		if (xj_print(&j))
			goto out;
		if (j.json)
			fputs(count ? "\n  ]\n}\n" : "]\n}\n", stdout);
	} else {
		for (int i = 0; i < c->argc; i++)
			if (im_stage_header(rs[i])->kind == IM_STAGE_MANIFEST) {
				man = man ? NULL : rs[i];
				man_name = c->argv[i];
			}
		if (!man) {
			err_msg("export: give exactly one manifest with the "
				"parts");
			goto out;
		}
		for (unsigned k = 0; k < IM_DOC_STATUS_COUNT; k++)
			sum.c.by_status[k] = sum_meta(&j, n, XP_STATUS0 + k);
		have.paths = sum_meta(&j, n, XP_PATHS);
		for (unsigned k = 0; k < IM_DOC_STATUS_COUNT; k++)
			have.files += sum.c.by_status[k];
		if (records_of_manifest(man_name, man, &have, 1))
			goto out;
		sum.c.bytes = sum_meta(&j, n, XP_BYTES);
		scan_totals(c, man, lex, &sum);
		if (c->json)
			print_scan_json_head(c, c->root ? c->root : ".", count,
					     &sum);
		if (xj_print(&j))
			goto out;
		if (c->json)
			fputs(count ? "\n  ]\n}\n" : "]\n}\n", stdout);
	}
	if (fflush(stdout) || ferror(stdout)) {
		err_msg("writing the output: %s", strerror(errno));
		goto out;
	}
	code = 0;
out:
	im_stage_merge_free(j.m);
	free(j.parts);
	free(j.names);
	if (lex)
		im_lexicon_free(lex);
	return code;
}

/* The kind in a stage file's header, unverified (0 if none): whether the
 * operands are parts to join. */
static uint32_t peek_kind(const char *path)
{
	uint8_t h[16];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? pread(fd, h, sizeof(h), 0) : -1;

	if (fd >= 0)
		close(fd);
	if (n != (ssize_t)sizeof(h) || memcmp(h, "IMSTAGE", 8))
		return 0;
	return (uint32_t)h[12] | (uint32_t)h[13] << 8 | (uint32_t)h[14] << 16 |
	       (uint32_t)h[15] << 24;
}

int cmd_export(struct cli *c)
{
	struct im_stage_reader **rs = calloc((size_t)c->argc, sizeof(*rs));
	struct im_stage_reader *man = NULL, *cls = NULL;
	struct scan_summary sum = {0};
	struct shard_set ss = {0};
	struct list_print *have = NULL;
	const char *man_name = NULL;
	struct im_lexicon *lex = NULL;
	struct cluster *v = NULL;
	uint32_t *label = NULL;
	struct run_keys keys;
	uint64_t ncl = 0;
	int ret = -ENOMEM, code = EXIT_RUNTIME;

	if (!rs)
		goto fail;
	if (c->part) {
		code = export_part(c, rs);
		goto out;
	}
	for (int i = 0; i < c->argc; i++)
		if (peek_kind(c->argv[i]) == IM_STAGE_EXPORT) {
			code = export_join(c, rs);
			goto out;
		}
	if (c->plan) {
		code = export_plan(c, rs);
		goto out;
	}
	if (c->dupes) {
		if (run_key(c, NULL, &keys) ||
		    open_all(c, rs, &keys,
			     1u << IM_STAGE_RECORDS | 1u << IM_STAGE_LINKS) ||
		    shard_set_init(c, rs, &ss) || links_complete(c, rs, &ss))
			goto out;
		ret = export_dupes(c, rs, &ss);
		if (ret == -EINVAL)
			goto out; /* said which file */
		if (ret)
			goto fail;
		goto flush;
	}
	if (load_lexicon(c, &lex) || run_key(c, lex, &keys) ||
	    open_all(c, rs, &keys,
		     1u << IM_STAGE_MANIFEST | 1u << IM_STAGE_RECORDS |
			     1u << IM_STAGE_CLUSTERS) ||
	    shard_set_init(c, rs, &ss))
		goto out;
	for (int i = 0; i < c->argc; i++) {
		uint32_t kind = im_stage_header(rs[i])->kind;

		if (kind == IM_STAGE_MANIFEST) {
			man = man ? NULL : rs[i];
			man_name = c->argv[i];
		}
		if (kind == IM_STAGE_CLUSTERS)
			cls = cls ? NULL : rs[i];
	}
	if (!man || !cls) {
		err_msg("export: give exactly one manifest and one clusters "
			"file, with every shard's records");
		goto out;
	}
	have = calloc(ss.nshards, sizeof(*have));
	if (!have)
		goto fail;
	for (uint32_t s = 0; s < ss.nshards; s++)
		have[s] = (struct list_print){
			im_stage_count(ss.rec[s]),
			im_stage_meta(ss.rec[s], REC_PATHS)};
	if (records_of_manifest(man_name, man, have, ss.nshards))
		goto out;
	if (clusters_of(cls, &ss))
		goto out;
	ncl = im_stage_count(cls);
	label = calloc(ss.base[ss.nshards] + 1, sizeof(*label));
	v = calloc(ncl + 1, sizeof(*v));
	if (!label || !v)
		goto fail;
	ret = cluster_labels(cls, &ss, label, v);
	if (ret == -EINVAL)
		goto out;
	if (ret)
		goto fail;
	ret = shard_set_foreach(&ss, export_doc,
				&(struct exporting){label, v, &sum});
	if (ret == -EINVAL)
		goto out; /* said which file */
	if (ret)
		goto fail;
	for (uint64_t k = 0; k < ncl; k++)
		sort_n(v[k].members, v[k].size, sizeof(*v[k].members),
		       cmp_strp);
	sort_n(v, ncl, sizeof(*v), cmp_cluster);
	scan_totals(c, man, lex, &sum);
	if (c->json)
		print_scan_json(c, c->root ? c->root : ".", v, ncl, &sum);
	else
		print_scan_text(v, ncl);
flush:
	if (fflush(stdout) || ferror(stdout)) {
		err_msg("writing the output: %s", strerror(errno));
		goto out;
	}
	code = 0;
	goto out;
fail:
	err_msg("export: %s", strerror(-ret));
out:
	free_cluster_list(v, ncl);
	free(label);
	free(have);
	if (lex)
		im_lexicon_free(lex);
	shard_set_release(&ss);
	close_all(rs, c->argc);
	return code;
}

/* ---- state import ------------------------------------------------------------- */

struct importing {
	struct im_state_writer *w;
	const char *sub; /* the subtree, without a trailing '/'; "" for all */
	size_t sublen;
	char *buf;
	size_t cap;
	uint64_t added, failed;
};

/* Add one document under the subtree, named relative to it. */
static int import_doc(uint32_t id, const struct im_stage_doc *doc,
		      struct im_stage_reader *r, void *arg)
{
	struct importing *im = arg;
	const char *p;
	size_t len;
	struct im_doc_sigs d;

	(void)id;
	(void)r;
	if (!doc)
		return 0;
	p = doc->path;
	len = doc->path_len;
	if (im->sublen) {
		if (len <= im->sublen || p[im->sublen] != '/' ||
		    memcmp(p, im->sub, im->sublen))
			return 0;
		p += im->sublen + 1;
		len -= im->sublen + 1;
	}
	/* The daemon keeps no failure in its cache either: it tries again. */
	if (doc->d.status == IM_DOC_ERROR) {
		im->failed++;
		return 0;
	}
	if (len + 1 > im->cap) {
		char *b = realloc(im->buf, len + 256);

		if (!b)
			return -ENOMEM;
		im->buf = b;
		im->cap = len + 256;
	}
	memcpy(im->buf, p, len);
	im->buf[len] = '\0';
	d = doc->d;
	d.size = doc->size;
	d.mtime_ns = doc->mtime_ns;
	im->added++;
	return im_state_writer_add(im->w, im->buf, doc->size, doc->mtime_ns,
				   doc->ino, doc->ctime_fold, &d);
}

/* Copy the file @p from to @p to through a temporary name, synced. */
static int copy_synced(const char *from, const char *to)
{
	size_t len = strlen(to) + 32;
	char *tmp = malloc(len), buf[65536];
	int in = -1, out = -1, ret = 0;
	ssize_t n;

	if (!tmp)
		return -ENOMEM;
	snprintf(tmp, len, "%s.tmp.%ld", to, (long)getpid());
	in = open(from, O_RDONLY | O_CLOEXEC);
	out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
		   0600);
	if (in < 0 || out < 0)
		ret = -errno;
	while (!ret && (n = read(in, buf, sizeof(buf))) != 0) {
		if (n < 0 || write(out, buf, (size_t)n) != n)
			ret = errno ? -errno : -EIO;
	}
	if (!ret && fsync(out))
		ret = -errno;
	if (out >= 0 && close(out) && !ret)
		ret = -errno;
	if (!ret && rename(tmp, to))
		ret = -errno;
	if (ret && out >= 0)
		unlink(tmp);
	if (in >= 0)
		close(in);
	free(tmp);
	return ret;
}

/* --subtree as a relative directory without '.', '..' or empty
 * components, and without a trailing '/'; "" for the whole tree. */
static int normal_subtree(const char *s, char **out)
{
	char *v, *tok, *save = NULL, *copy = strdup(s ? s : "");
	size_t len = 0;

	*out = NULL;
	v = calloc(1, strlen(s ? s : "") + 1);
	if (!copy || !v) {
		free(copy);
		free(v);
		return -ENOMEM;
	}
	if (copy[0] == '/') {
		free(copy);
		free(v);
		return -EINVAL;
	}
	for (tok = strtok_r(copy, "/", &save); tok;
	     tok = strtok_r(NULL, "/", &save)) {
		if (!strcmp(tok, "."))
			continue;
		if (!strcmp(tok, "..")) {
			free(copy);
			free(v);
			return -EINVAL;
		}
		len += (size_t)sprintf(v + len, "%s%s", len ? "/" : "", tok);
	}
	free(copy);
	*out = v;
	return 0;
}

int cmd_state_import(struct cli *c)
{
	struct im_stage_reader **rs = calloc((size_t)c->argc, sizeof(*rs));
	struct importing im = {0};
	struct im_state_lock *lock = NULL;
	struct shard_set ss = {0};
	struct run_keys keys;
	char *sub = NULL, *lex = NULL, *cache = NULL;
	pid_t holder = 0;
	int ret = -ENOMEM, code = EXIT_RUNTIME;

	if (!rs)
		goto fail;
	ret = normal_subtree(c->subtree, &sub);
	if (ret == -EINVAL) {
		err_msg("state import: --subtree %s: not a relative path "
			"without '..'",
			c->subtree);
		code = EXIT_USAGE;
		goto out;
	}
	if (ret)
		goto fail;
	im.sub = sub;
	im.sublen = strlen(sub);
	if (run_key(c, NULL, &keys) ||
	    open_all(c, rs, &keys, 1u << IM_STAGE_RECORDS) ||
	    shard_set_init(c, rs, &ss))
		goto out;
	if (mkdir(c->out, 0700) && errno != EEXIST) {
		err_msg("%s: %s", c->out, strerror(errno));
		goto out;
	}
	/* The daemon's lock: never write under a running daemon. */
	ret = im_state_lock(c->out, 0, &lock, &holder);
	if (ret == -EWOULDBLOCK) {
		err_msg("%s: in use by process %ld (unmount it first)", c->out,
			(long)holder);
		goto out;
	}
	if (ret) {
		err_msg("%s: %s", c->out, strerror(-ret));
		goto out;
	}
	ret = -ENOMEM;
	lex = malloc(strlen(c->out) + 16);
	cache = malloc(strlen(c->out) + 16);
	if (!lex || !cache || im_state_writer_new(keys.cache, &im.w))
		goto fail;
	sprintf(lex, "%s/lexicon", c->out);
	sprintf(cache, "%s/sigcache", c->out);
	ret = shard_set_foreach(&ss, import_doc, &im);
	if (ret == -EINVAL)
		goto out; /* said which file */
	if (ret)
		goto fail;
	/* The lexicon's bytes are the cache's key: copy them exactly. A
	 * crash between the two leaves a cache the daemon finds stale,
	 * never a wrong one. */
	ret = copy_synced(c->lexicon, lex);
	if (ret) {
		write_failed(lex, ret);
		goto out;
	}
	ret = im_state_writer_commit(im.w, cache);
	if (ret) {
		write_failed(cache, ret);
		goto out;
	}
	if (c->verbose)
		fprintf(stderr,
			"%s: %" PRIu64 " documents imported, %" PRIu64
			" failed ones left to the daemon\n",
			cache, im.added, im.failed);
	code = 0;
	goto out;
fail:
	err_msg("state import: %s", strerror(-ret));
out:
	im_state_writer_free(im.w);
	im_state_unlock(lock);
	free(im.buf);
	free(sub);
	free(lex);
	free(cache);
	shard_set_release(&ss);
	close_all(rs, c->argc);
	return code;
}

/* ---- cat ----------------------------------------------------------------------- */

static void put_hex(FILE *f, const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%02x", b[i]);
}

static bool cat_record(FILE *f, const uint8_t *p, size_t len)
{
	struct im_stage_doc doc;
	char *path;
	bool first = true;

	if (im_stage_doc_decode(p, len, &doc))
		return false;
	if (!f)
		return true;
	path = strndup(doc.path, doc.path_len);
	fputs("{\"path\": ", f);
	if (path)
		put_json_string(f, path);
	else
		fputs("null", f);
	free(path);
	fprintf(f,
		", \"size\": %" PRIu64 ", \"mtime_ns\": %" PRId64
		", \"ino\": %" PRIu64 ", \"status\": %u, \"err\": %" PRId32
		", \"unique_terms\": %" PRIu32 ", \"exact\": ",
		doc.size, doc.mtime_ns, doc.ino, doc.d.status, doc.d.err,
		doc.d.unique_terms);
	if (doc.d.exact_valid) {
		fputc('"', f);
		put_hex(f, doc.d.exact, 16);
		fputc('"', f);
	} else {
		fputs("null", f);
	}
	fputs(", \"sigs\": [", f);
	for (unsigned k = 0; k < doc.d.ncoords; k++) {
		fputs(first ? "" : ", ", f);
		first = false;
		if (doc.d.valid & (1u << k)) {
			fputc('"', f);
			put_hex(f, doc.d.sig[k].b, IM_SIG_LEN);
			fputc('"', f);
		} else {
			fputs("null", f);
		}
	}
	fputs("]}", f);
	return true;
}

static bool cat_key(FILE *f, const uint8_t *p, size_t len)
{
	static const char *const kinds[] = {"exact", "coord", "band"};
	struct im_stage_key k;
	char *path;

	if (im_stage_key_decode(p, len, &k))
		return false;
	if (!f)
		return true;
	fprintf(f, "{\"kind\": \"%s\", \"k\": %u, \"key\": \"",
		kinds[k.key.kind], k.key.k);
	put_hex(f, k.key.b, k.key.len);
	fprintf(f,
		"\", \"shard\": %" PRIu32 ", \"index\": %" PRIu32
		", \"path\": ",
		k.shard, k.index);
	path = strndup(k.path, k.path_len);
	if (path)
		put_json_string(f, path);
	else
		fputs("null", f);
	free(path);
	fputc('}', f);
	return true;
}

static bool cat_link(FILE *f, const uint8_t *p, size_t len)
{
	struct im_stage_link l;

	if (im_stage_link_decode(p, len, &l))
		return false;
	if (f)
		fprintf(f,
			"{\"a\": [%" PRIu32 ", %" PRIu32 "], \"b\": [%" PRIu32
			", %" PRIu32 "], \"kind\": \"%s\", \"similarity\": "
			"%.4f}",
			l.a_shard, l.a_index, l.b_shard, l.b_index,
			l.exact ? "exact" : "near", l.similarity);
	return true;
}

static bool cat_cluster(FILE *f, const uint8_t *p, size_t len)
{
	char hex[IM_SIG_HEX_LEN + 1];
	struct im_sig name;
	const uint8_t *ids;
	uint32_t n;

	if (im_stage_cluster_decode(p, len, &name, &ids, &n))
		return false;
	if (!f)
		return true;
	im_sig_hex(&name, hex);
	fprintf(f, "{\"name\": \"%s\", \"size\": %" PRIu32 ", \"ids\": [", hex,
		n);
	for (uint32_t i = 0; i < n; i++)
		fprintf(f, "%s%" PRIu32, i ? ", " : "",
			im_stage_cluster_member(ids, i));
	fputs("]}", f);
	return true;
}

/* An export part's record: its key (hex) and text. */
static bool cat_export(FILE *f, const uint8_t *p, size_t len)
{
	const uint8_t *k, *t;
	size_t klen, tlen;
	char *text;

	if (xp_rec_decode(p, len, &k, &klen, &t, &tlen))
		return false;
	if (!f)
		return true;
	text = strndup((const char *)t, tlen);
	fputs("{\"key\": \"", f);
	put_hex(f, k, klen);
	fputs("\", \"text\": ", f);
	put_json_string(f, text ? text : "");
	fputs("}", f);
	free(text);
	return true;
}

bool cat_detect_kind(uint32_t kind, const char *const **names, size_t *n,
		     cat_record_fn *rec)
{
	switch (kind) {
	case IM_STAGE_RECORDS:
		*names = rec_meta;
		*n = sizeof(rec_meta) / sizeof(*rec_meta);
		*rec = cat_record;
		return true;
	case IM_STAGE_KEYS:
		*names = key_meta;
		*n = sizeof(key_meta) / sizeof(*key_meta);
		*rec = cat_key;
		return true;
	case IM_STAGE_LINKS:
		*names = lnk_meta;
		*n = sizeof(lnk_meta) / sizeof(*lnk_meta);
		*rec = cat_link;
		return true;
	case IM_STAGE_CLUSTERS:
		*names = cl_meta;
		*n = sizeof(cl_meta) / sizeof(*cl_meta);
		*rec = cat_cluster;
		return true;
	case IM_STAGE_EXPORT:
		*names = xp_meta;
		*n = sizeof(xp_meta) / sizeof(*xp_meta);
		*rec = cat_export;
		return true;
	}
	return false;
}
