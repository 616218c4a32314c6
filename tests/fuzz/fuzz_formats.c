/*
 * libFuzzer targets over the loaders of the files imatch writes itself and
 * reads back later, which a crash, a full disk, an older version or a
 * user's hand can leave damaged. One target per loader, chosen at build
 * time with -DFUZZ_ENTRY=...:
 *   FUZZ_LEXICON  im_lexicon_load(), then signing with what it loaded
 *   FUZZ_STATE    im_state_load_files(), by its key and by its files key,
 *                 then the entries into an index as a daemon puts them
 *   FUZZ_PLANLINE im_plan_line_parse()
 *   FUZZ_KEEP     im_keep_parse()
 *   FUZZ_STAGE    im_stage_open(), im_stage_next(), im_stage_read(), a
 *                 merge of the file with itself, and the record decoders
 *                 over every record
 *   FUZZ_RECORDS  the record decoders of records.h over one payload (the
 *                 first byte picks the decoder)
 *   FUZZ_SHARD    im_shard_load()
 *   FUZZ_TOOLRECS the decoders of the tools' own payloads (stage_rec.h)
 *                 over one payload (the first byte picks the decoder)
 *   FUZZ_MANIFEST, FUZZ_DF, FUZZ_EXPORT
 *                 a stage file of that kind (an `imatch ls` manifest, a
 *                 df run, an export part): im_stage_open(), its decoder
 *                 over every record, a merge of the file with itself in
 *                 the order its readers merge it (df merge, the export
 *                 join)
 *
 * The checksummed formats (lexicon, state, stage) are tried twice: as
 * given, and with the fields a writer computes last (the size, the count,
 * the checksum) recomputed as the writer does, or the fuzzer would almost
 * never get past the checksum to the parser behind it.
 *
 * Beyond "no crash", each target checks what its loader promises: a failure
 * comes with a reason; what loads saves back to the very bytes it was read
 * from (lexicon, state) or re-encodes to the same payload (records); every
 * entry or term loaded is found again by its own key; a merge hands records
 * out in order until it reports a run out of order. A broken promise
 * abort()s, which libFuzzer reports as a crash.
 *
 * Loaders that take a path read the input from a file in a directory
 * made once per process under $TMPDIR (or /tmp) and removed at exit.
 * Seeds: tests/fuzz/make_seeds.sh makes real files with imatch.
 * Built by meson with -Dfuzz=enabled and clang (tests/fuzz/meson.build).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#include "apply.h"
#include "index.h"
#include "lexicon.h"
#include "plan.h"
#include "records.h"
#include "shard.h"
#include "sig.h"
#include "stage.h"
#include "stage_rec.h"
#include "state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---- Helpers ---------------------------------------------------------------- */

/* Each target uses some of the helpers. */
#define HELPER static __attribute__((unused))

/* A broken promise: libFuzzer keeps the input that broke it. */
#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__,     \
				#cond);                                        \
			abort();                                               \
		}                                                              \
	} while (0)

HELPER uint64_t get_le(const uint8_t *p, int n)
{
	uint64_t v = 0;

	for (int i = n - 1; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

HELPER void put_le(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static char tmpdir[256];
static char in_path[300], out_path[300];

static void tmp_cleanup(void)
{
	char tmp[320];

	/* What a save leaves behind when it fails half way is named
	 * PATH.tmp.PID. */
	unlink(in_path);
	unlink(out_path);
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", out_path, (long)getpid());
	unlink(tmp);
	rmdir(tmpdir);
}

static void tmp_init(void)
{
	const char *t = getenv("TMPDIR");

	if (tmpdir[0])
		return;
	snprintf(tmpdir, sizeof(tmpdir), "%s/fuzz_formats.XXXXXX",
		 t && *t ? t : "/tmp");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		abort();
	}
	snprintf(in_path, sizeof(in_path), "%s/in", tmpdir);
	snprintf(out_path, sizeof(out_path), "%s/out", tmpdir);
	atexit(tmp_cleanup);
}

/* Write @p len bytes to @p path, replacing it. Aborts on failure: the
 * target cannot go on without its file. */
HELPER void spill(const char *path, const uint8_t *p, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0) {
		perror(path);
		abort();
	}
	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			perror(path);
			abort();
		}
		p += n;
		len -= (size_t)n;
	}
	close(fd);
}

/* Whether the file at @p path holds exactly @p p. */
HELPER bool file_is(const char *path, const uint8_t *p, size_t len)
{
	FILE *f = fopen(path, "rb");
	bool same = f != NULL;
	uint8_t buf[4096];
	size_t n;

	while (same && (n = fread(buf, 1, sizeof(buf), f)) > 0) {
		same = n <= len && !memcmp(buf, p, n);
		p += n;
		len -= n;
	}
	if (f)
		fclose(f);
	return same && len == 0;
}

HELPER uint8_t *dup_bytes(const uint8_t *p, size_t len)
{
	uint8_t *c = malloc(len ? len : 1);

	if (!c)
		abort();
	memcpy(c, p, len);
	return c;
}

/*
 * Load @p data as given, then, when it holds at least @p min bytes, once
 * more with its size and checksum made right by @p fix as the writer makes
 * them: otherwise nearly every input stops at the checksum and the parser
 * behind it is never reached.
 */
HELPER void as_given_and_fixed(const uint8_t *data, size_t size, size_t min,
			       void (*load)(const uint8_t *, size_t),
			       void (*fix)(uint8_t *, size_t))
{
	load(data, size);
	if (size < min)
		return;
	uint8_t *c = dup_bytes(data, size);

	fix(c, size);
	if (memcmp(c, data, size))
		load(c, size);
	free(c);
}

/* ---- Lexicon ------------------------------------------------------------------ */

#if defined(FUZZ_LEXICON)
#define LEX_HEADER  64
#define LEX_TRAILER 8

/*
 * What a daemon does with a lexicon it loaded: sign with it. Two term sets,
 * every term of the lexicon and every other one (with a term it lacks), so
 * that both lexicons and every randomized one are hit.
 */
static void sign_with(const struct im_lexicon *lex)
{
	size_t n =
		im_lexicon_primary_size(lex) + im_lexicon_secondary_size(lex);
	struct im_coord_info info[IM_MAX_COORDS];
	struct im_signer *signer = NULL;
	struct im_doc_sigs d;
	struct im_params p;
	struct im_terms u;

	im_params_init(&p);
	p.k = 3;
	CHECK(im_signer_new(lex, &p, &signer) == 0);
	im_terms_init(&u);
	for (unsigned step = 1; step <= 2; step++) {
		im_terms_clear(&u);
		for (size_t i = 0; i < n; i += step) {
			const struct im_lex_term *t = im_lexicon_term(lex, i);

			CHECK(im_terms_add(&u, t->str, t->len) == 0);
		}
		CHECK(im_terms_add(&u, "zzz-not-a-term", 14) == 0);
		CHECK(im_signer_sign_terms(signer, &u, &d, info) == 0);
		CHECK(d.status == IM_DOC_SIGNED || d.status == IM_DOC_REJECTED);
		CHECK(d.ncoords == p.k + 1);
	}
	im_terms_release(&u);
	im_signer_free(signer);
}

static void try_lexicon(const uint8_t *data, size_t size)
{
	struct im_lexicon *lex = NULL;
	char why[256];
	size_t n;

	spill(in_path, data, size);
	int r = im_lexicon_load(in_path, &lex, why, sizeof(why));
	CHECK((r == 0) == (lex != NULL));
	if (r) {
		CHECK(r < 0 && why[0]);
		return;
	}
	n = im_lexicon_primary_size(lex) + im_lexicon_secondary_size(lex);
	CHECK(im_lexicon_term(lex, n) == NULL);
	for (size_t i = 0; i < n; i++) {
		const struct im_lex_term *t = im_lexicon_term(lex, i);

		CHECK(t && t->len && strlen(t->str) == t->len);
		uint64_t h = XXH3_64bits(t->str, t->len);
		CHECK(im_lexicon_lookup(lex, t->str, t->len, h, NULL) ==
		      (long)i);
		CHECK(im_lexicon_find(lex, t->str, t->len, h) == t);
	}
	CHECK(im_lexicon_file_key(lex) == XXH3_64bits(data, size));
	sign_with(lex);
	/* A lexicon saves to the bytes it was loaded from: nothing of the
	 * file is dropped or re-derived differently on the way. */
	CHECK(im_lexicon_save(lex, out_path) == 0);
	CHECK(file_is(out_path, data, size));
	im_lexicon_free(lex);
}

/* As im_lexicon_save_key() writes them: the size, the checksum. */
static void lexicon_fix(uint8_t *c, size_t size)
{
	put_le(c + 16, size, 8);
	put_le(c + size - LEX_TRAILER, XXH3_64bits(c, size - LEX_TRAILER), 8);
}

static void fuzz_lexicon(const uint8_t *data, size_t size)
{
	as_given_and_fixed(data, size, LEX_HEADER + LEX_TRAILER, try_lexicon,
			   lexicon_fix);
}
#endif

/* ---- State cache ---------------------------------------------------------------- */

#if defined(FUZZ_STATE)
/* From state.c's layout (state.h). */
#define ST_HEADER   40
#define ST_KEY_AT   16
#define ST_FILES_AT 24
#define ST_COUNT_AT 32
#define ST_STAT	    (8 + 8 + 8 + 4)
#define ST_FIXED    (4 + ST_STAT + 1 + 1 + 1 + 4 + 4 + 4 + 16 + IM_SKETCH_RECORD)

static int count_link(const struct im_link *l, void *arg)
{
	CHECK(l->path && l->similarity >= 0 && l->similarity <= 1);
	++*(size_t *)arg;
	return 0;
}

/*
 * What a daemon does with a cache it loaded: its entries into the index,
 * and the links and clusters asked of each.
 */
static void index_state(const struct im_state *st)
{
	size_t n = im_state_count(st), links = 0;
	struct im_index *idx = NULL;
	struct im_state_entry e;
	struct im_sig name;

	CHECK(im_index_new(&idx) == 0);
	for (size_t i = 0; i < n; i++) {
		CHECK(im_state_at(st, i, &e) == 0);
		char *path = strndup(e.path, e.path_len);
		CHECK(path);
		CHECK(im_index_put(idx, path, &e.d) == 0);
		free(path);
	}
	for (size_t i = 0; i < n; i++) {
		CHECK(im_state_at(st, i, &e) == 0);
		char *path = strndup(e.path, e.path_len);
		CHECK(path);
		CHECK(im_index_links(idx, path, count_link, &links) == 0);
		int r = im_index_cluster_of(idx, path, &name);
		CHECK(r == 0 || r == -ESRCH);
		free(path);
	}
	im_index_free(idx);
}

/* Check @p st (loaded from @p data) against its promises. */
static void check_state(const struct im_state *st, const uint8_t *data,
			size_t size)
{
	struct im_state_writer *w = NULL;
	uint64_t key, files_key;
	size_t n = im_state_count(st);
	struct im_state_entry e, f;
	char *path;

	im_state_keys(st, &key, &files_key);
	CHECK(key == get_le(data + ST_KEY_AT, 8));
	CHECK(files_key == get_le(data + ST_FILES_AT, 8));
	CHECK(im_state_writer_new(key, &w) == 0);
	im_state_writer_set_files_key(w, files_key);
	for (size_t i = 0; i < n; i++) {
		CHECK(im_state_at(st, i, &e) == 0);
		CHECK(e.path_len && !memchr(e.path, '\0', e.path_len));
		CHECK(e.d.ncoords <= IM_MAX_COORDS);
		path = strndup(e.path, e.path_len);
		CHECK(path);
		/* A repeated path finds one of its entries. */
		CHECK(im_state_find(st, path, &f) == 0);
		CHECK(f.path_len == e.path_len);
		/* The entry is found by its inode and its last component. */
		const char *slash = strrchr(path, '/');
		CHECK(im_state_find_moved(st, e.ino, slash ? slash + 1 : path,
					  &f) == 0);
		CHECK(f.ino == e.ino);
		CHECK(im_state_writer_add(w, path, e.size, e.mtime_ns, e.ino,
					  e.ctime_fold, &e.d) == 0);
		free(path);
	}
	CHECK(im_state_at(st, n, &e) == -ENOENT);
	index_state(st);
	/* What loads writes back to the same bytes. */
	CHECK(im_state_writer_commit(w, out_path) == 0);
	CHECK(file_is(out_path, data, size));
	im_state_writer_free(w);
}

static void try_state(const uint8_t *data, size_t size)
{
	uint64_t key = size >= ST_HEADER ? get_le(data + ST_KEY_AT, 8) : 1;
	uint64_t files = size >= ST_HEADER ? get_le(data + ST_FILES_AT, 8) : 1;
	struct im_state *st = NULL;
	char why[256];
	int r;

	spill(in_path, data, size);
	/* By its key, as a daemon of the same parameters loads it. */
	r = im_state_load(in_path, key, &st, why, sizeof(why));
	CHECK((r == 0) == (st != NULL));
	if (r)
		CHECK(r < 0 && why[0]);
	else {
		CHECK(!im_state_partial(st));
		check_state(st, data, size);
	}
	im_state_free(st);
	st = NULL;
	/* By its files key alone, as a daemon of other parameters does. */
	r = im_state_load_files(in_path, ~key, files ? files : 1, &st, why,
				sizeof(why));
	CHECK((r == 0) == (st != NULL));
	if (r)
		CHECK(r < 0 && why[0]);
	else
		CHECK(im_state_partial(st));
	im_state_free(st);
}

/*
 * What im_state_writer_commit() patches last: the count (of the entries
 * that parse, walked as index_entries() does) and the checksum.
 */
static void state_fix(uint8_t *c, size_t size)
{
	size_t body = size - 8, off = ST_HEADER;
	uint64_t count = 0;

	while (body - off >= ST_FIXED) {
		uint32_t plen = (uint32_t)get_le(c + off, 4);

		if (body - off - ST_FIXED < plen)
			break;
		uint32_t valid =
			(uint32_t)get_le(c + off + 4 + plen + ST_STAT + 7, 4);
		size_t sigs = (size_t)__builtin_popcount(valid) * IM_SIG_LEN;

		if (body - off - ST_FIXED - plen < sigs)
			break;
		off += ST_FIXED + plen + sigs;
		count++;
	}
	put_le(c + ST_COUNT_AT, count, 8);
	put_le(c + body, XXH3_64bits(c, body), 8);
}

static void fuzz_state(const uint8_t *data, size_t size)
{
	as_given_and_fixed(data, size, ST_HEADER + 8, try_state, state_fix);
}
#endif

/* ---- Plan lines and keep rules ------------------------------------------------------ */

#if defined(FUZZ_PLANLINE)
static void fuzz_planline(const uint8_t *data, size_t size)
{
	/* A copy of exactly the line: a read past it is caught. */
	uint8_t *c = dup_bytes(data, size);
	struct im_plan_line l;
	char why[256];
	int r;

	r = im_plan_line_parse((const char *)c, size, &l, why, sizeof(why));
	if (r) {
		CHECK(r < 0 && why[0]);
	} else {
		CHECK(l.file.path && l.keeper.path && l.root);
		CHECK(l.action <= IM_ACT_REFLINK);
		CHECK(l.action != IM_ACT_TRASH || l.trash);
		/* Strings are whole: strlen() stops inside them. */
		CHECK(strlen(l.file.path) <= size);
		CHECK(strlen(l.keeper.path) <= size);
		CHECK(strlen(l.root) <= size);
		CHECK(!l.trash || strlen(l.trash) <= size);
		im_plan_line_release(&l);
	}
	free(c);
}
#endif

#if defined(FUZZ_KEEP)
static void fuzz_keep(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1), why[256], fmt[256];
	struct im_keep k, again;

	if (!s)
		abort();
	memcpy(s, data, size);
	s[size] = '\0';
	if (im_keep_parse(s, &k, why, sizeof(why))) {
		CHECK(why[0]);
	} else {
		/* Total (name last), within bounds, and written back to
		 * rules that parse to the same. */
		CHECK(k.n >= 1 && k.n <= IM_KEEP_MAX_RULES);
		CHECK(k.rule[k.n - 1] == IM_KEEP_NAME);
		im_keep_format(&k, fmt, sizeof(fmt));
		CHECK(im_keep_parse(fmt, &again, why, sizeof(why)) == 0);
		CHECK(again.n == k.n && !memcmp(again.rule, k.rule, k.n));
	}
	free(s);
}
#endif

/* ---- Stage records ---------------------------------------------------------------- */

/* The stage files of the tools' own kinds (stage_rec.h). */
#if defined(FUZZ_MANIFEST) || defined(FUZZ_DF) || defined(FUZZ_EXPORT)
#define FUZZ_TOOL_FILES
#endif
#if defined(FUZZ_TOOLRECS) || defined(FUZZ_TOOL_FILES)
#define FUZZ_TOOL_KINDS
#endif

#if defined(FUZZ_STAGE) || defined(FUZZ_RECORDS) || defined(FUZZ_TOOL_KINDS)
/* Whether @p b holds exactly @p p; releases nothing. */
static bool buf_is(const struct im_stage_buf *b, const uint8_t *p, size_t len)
{
	return !b->oom && b->len == len && (!len || !memcmp(b->p, p, len));
}
#endif

#if defined(FUZZ_STAGE) || defined(FUZZ_RECORDS)
/*
 * Decode @p p with decoder @p which (0 documents, 1 keys, 2 links,
 * 3 clusters); what decodes must encode back to the same payload.
 * @return whether it decoded.
 */
static bool decode_record(unsigned which, const uint8_t *p, size_t len)
{
	struct im_stage_buf b = {0};
	bool ok = false;

	switch (which) {
	case 0: {
		struct im_stage_doc doc;

		if (im_stage_doc_decode(p, len, &doc))
			break;
		CHECK(doc.path >= (const char *)p &&
		      doc.path + doc.path_len == (const char *)p + len);
		CHECK(doc.d.ncoords <= IM_MAX_COORDS);
		im_stage_doc_encode(&b, &doc);
		ok = true;
		break;
	}
	case 1: {
		struct im_stage_key k;

		if (im_stage_key_decode(p, len, &k))
			break;
		CHECK(k.key.len <= sizeof(k.key.b));
		im_stage_key_encode(&b, &k);
		(void)im_stage_key_part(&k, 7);
		ok = true;
		break;
	}
	case 2: {
		struct im_stage_link l;

		if (im_stage_link_decode(p, len, &l))
			break;
		im_stage_link_encode(&b, &l);
		ok = true;
		break;
	}
	default: {
		struct im_sig name;
		const uint8_t *ids;
		uint32_t n;

		if (im_stage_cluster_decode(p, len, &name, &ids, &n))
			break;
		CHECK(ids >= p && ids + (size_t)n * 4 == p + len);
		uint32_t *v = malloc((size_t)n * sizeof(*v));
		CHECK(v);
		for (uint32_t i = 0; i < n; i++)
			v[i] = im_stage_cluster_member(ids, i);
		im_stage_cluster_encode(&b, &name, v, n);
		free(v);
		ok = true;
		break;
	}
	}
	CHECK(!ok || buf_is(&b, p, len));
	im_stage_buf_release(&b);
	return ok;
}
#endif

#if defined(FUZZ_TOOL_KINDS)
/*
 * Decode @p p with the tools' decoder @p which (0 manifest, 1 df, 2 export
 * part); what decodes must encode back to the same payload, and compare
 * equal to itself in its file's order. @return whether it decoded.
 */
static bool decode_tool_record(unsigned which, const uint8_t *p, size_t len)
{
	const char *end = (const char *)p + len;
	struct im_stage_buf b = {0};
	bool ok = false;

	switch (which) {
	case 0: {
		struct man_rec r;

		if (man_rec_decode(p, len, &r))
			break;
		CHECK(r.path_len && r.path >= (const char *)p &&
		      r.path + r.path_len == end);
		man_rec_encode(&b, &r);
		ok = true;
		break;
	}
	case 1: {
		const char *term;
		size_t tlen;
		uint32_t count;

		if (df_rec_decode(p, len, &count, &term, &tlen))
			break;
		CHECK(tlen && term >= (const char *)p && term + tlen == end);
		CHECK(df_rec_cmp(p, len, p, len) == 0);
		df_rec_encode(&b, count, term, tlen);
		ok = true;
		break;
	}
	default: {
		const uint8_t *key, *text;
		size_t klen, tlen;

		if (xp_rec_decode(p, len, &key, &klen, &text, &tlen))
			break;
		CHECK(key == p + 4 && text == key + klen &&
		      text + tlen == (const uint8_t *)end);
		CHECK(xp_rec_cmp(p, len, p, len) == 0);
		/* Its header and key alone sort where it does: the writer
		 * checks its order on those (xp_add()). */
		CHECK(xp_rec_cmp(p, 4 + klen, p, len) == 0);
		xp_rec_encode(&b, key, klen, text, tlen);
		ok = true;
		break;
	}
	}
	CHECK(!ok || buf_is(&b, p, len));
	im_stage_buf_release(&b);
	return ok;
}
#endif

#if defined(FUZZ_RECORDS) || defined(FUZZ_TOOLRECS)
/* The first byte picks one of @p decoders decoders, the rest is the
 * payload. */
static void fuzz_payload(const uint8_t *data, size_t size,
			 bool (*decode)(unsigned, const uint8_t *, size_t),
			 unsigned decoders)
{
	if (size < 1)
		return;
	/* A copy of exactly the payload: a read past it is caught. */
	uint8_t *c = dup_bytes(data + 1, size - 1);

	decode(data[0] % decoders, c, size - 1);
	free(c);
}
#endif

#if defined(FUZZ_STAGE) || defined(FUZZ_TOOL_FILES)
#define SG_HEADER  32
#define SG_TRAILER (8 + 8 * IM_STAGE_META + 8)

#if defined(FUZZ_STAGE)
static int cmp_bytes(const uint8_t *a, size_t alen, const uint8_t *b,
		     size_t blen)
{
	int r = memcmp(a, b, alen < blen ? alen : blen);

	return r ? r : (alen > blen) - (alen < blen);
}

/* Key runs merge by key (records.h), the rest by their bytes. */
static int cmp_keys(const uint8_t *a, size_t alen, const uint8_t *b,
		    size_t blen)
{
	struct im_stage_key ka, kb;
	bool da = !im_stage_key_decode(a, alen, &ka);
	bool db = !im_stage_key_decode(b, blen, &kb);

	if (da && db)
		return im_stage_key_cmp(&ka, &kb);
	if (da != db)
		return da ? -1 : 1;
	return cmp_bytes(a, alen, b, blen);
}

#endif

/* The file merged with itself by @p cmp: records in order until a run is
 * not. */
static void merge_twice(struct im_stage_reader *r1, uint64_t count,
			im_stage_cmp_fn cmp)
{
	struct im_stage_reader *r2 = NULL, *runs[2];
	struct im_stage_merge *m = NULL;
	const uint8_t *p, *prev = NULL;
	size_t len, prev_len = 0, run;
	uint64_t out = 0;
	char why[256];
	int ret;

	CHECK(im_stage_open(in_path, &r2, why, sizeof(why)) == 0);
	im_stage_rewind(r1);
	runs[0] = r1;
	runs[1] = r2;
	CHECK(im_stage_merge_new(runs, 2, cmp, &m) == 0);
	while ((ret = im_stage_merge_next(m, &p, &len, &run)) == 1) {
		CHECK(run < 2);
		CHECK(!prev || cmp(prev, prev_len, p, len) <= 0);
		prev = p;
		prev_len = len;
		out++;
	}
	CHECK(ret == 0 || ret == -EINVAL);
	CHECK(out <= 2 * count);
	CHECK(ret != 0 || out == 2 * count);
	im_stage_merge_free(m);
	im_stage_reader_free(r2);
}

/* What im_stage_writer_commit() writes last: the count of the records
 * (those that fit, walked as the reader does) and the checksum. */
/* The stage file @p data opened, or NULL when it is refused, with a
 * reason. */
static struct im_stage_reader *open_stage(const uint8_t *data, size_t size)
{
	struct im_stage_reader *r = NULL;
	char why[256];
	int ret;

	spill(in_path, data, size);
	ret = im_stage_open(in_path, &r, why, sizeof(why));
	CHECK((ret == 0) == (r != NULL));
	CHECK(!ret || (ret < 0 && why[0]));
	return r;
}

static void stage_fix(uint8_t *c, size_t size)
{
	size_t end = size - SG_TRAILER, off = SG_HEADER;
	uint64_t count = 0;

	while (end - off >= 4) {
		uint64_t len = get_le(c + off, 4);

		if (len > end - off - 4)
			break;
		off += 4 + len;
		count++;
	}
	put_le(c + end, count, 8);
	put_le(c + size - 8, XXH3_64bits(c, size - 8), 8);
}

#endif

#if defined(FUZZ_STAGE)
static void try_stage(const uint8_t *data, size_t size)
{
	struct im_stage_reader *r = open_stage(data, size);
	const uint8_t *p, *first = NULL;
	uint64_t count = 0;
	char why[256];
	size_t len;

	if (!r)
		return;
	const struct im_stage_header *h = im_stage_header(r);
	CHECK(im_stage_kind_name(h->kind) && h->part < h->nparts &&
	      h->nparts <= IM_STAGE_MAX_PARTS);
	while (im_stage_next(r, &p, &len)) {
		uint8_t *copy = malloc(len ? len : 1);

		CHECK(copy);
		CHECK(p >= first || !first);
		first = first ? first : p;
		/* The same bytes by pread() as through the mapping. */
		CHECK(im_stage_read(r, p, len, copy) == 0);
		CHECK(!memcmp(copy, p, len));
		for (unsigned which = 0; which < 4; which++)
			decode_record(which, copy, len);
		free(copy);
		count++;
	}
	CHECK(count == im_stage_count(r));
	/* Bytes of the header are not a record's. */
	CHECK(!first || im_stage_read(r, first - 5, 1, why) == -EINVAL);
	merge_twice(r, count, h->kind == IM_STAGE_KEYS ? cmp_keys : cmp_bytes);
	im_stage_reader_free(r);
}

static void fuzz_stage(const uint8_t *data, size_t size)
{
	as_given_and_fixed(data, size, SG_HEADER + SG_TRAILER, try_stage,
			   stage_fix);
}
#endif

#if defined(FUZZ_TOOL_FILES)
#if defined(FUZZ_MANIFEST)
/* Nothing merges manifests: ls merge appends them. */
#define TOOL_KIND  IM_STAGE_MANIFEST
#define TOOL_WHICH 0
#define TOOL_CMP   NULL
#elif defined(FUZZ_DF)
#define TOOL_KIND  IM_STAGE_DF
#define TOOL_WHICH 1
#define TOOL_CMP   df_rec_cmp
#else
#define TOOL_KIND  IM_STAGE_EXPORT
#define TOOL_WHICH 2
#define TOOL_CMP   xp_rec_cmp
#endif

static void try_tool_stage(const uint8_t *data, size_t size)
{
	struct im_stage_reader *r = open_stage(data, size);
	uint64_t count = 0;
	const uint8_t *p;
	size_t len;

	if (!r)
		return;
	/* Other kinds are fuzz_stage's. */
	if (im_stage_header(r)->kind == TOOL_KIND) {
		while (im_stage_next(r, &p, &len)) {
			/* A copy of exactly the payload: a read past it is
			 * caught. */
			uint8_t *copy = dup_bytes(p, len);

			decode_tool_record(TOOL_WHICH, copy, len);
			free(copy);
			count++;
		}
		CHECK(count == im_stage_count(r));
		if (TOOL_CMP)
			merge_twice(r, count, TOOL_CMP);
	}
	im_stage_reader_free(r);
}

static void fuzz_tool_stage(const uint8_t *data, size_t size)
{
	as_given_and_fixed(data, size, SG_HEADER + SG_TRAILER, try_tool_stage,
			   stage_fix);
}
#endif

/* ---- Shard lists ------------------------------------------------------------------ */

#if defined(FUZZ_SHARD)
static void fuzz_shard(const uint8_t *data, size_t size)
{
	struct im_shard s;
	char why[256];
	size_t nuls = 0;

	spill(in_path, data, size);
	int r = im_shard_load(in_path, &s, why, sizeof(why));
	if (r) {
		CHECK(r < 0 && why[0]);
		CHECK(!s.path && !s.buf && !s.n);
		return;
	}
	for (size_t i = 0; i < size; i++)
		nuls += data[i] == '\0';
	CHECK(s.n == nuls);
	for (size_t i = 0; i < s.n; i++) {
		CHECK(s.path[i][0] && s.path[i][0] != '/');
		CHECK(!strstr(s.path[i], "//"));
		CHECK(s.path[i][strlen(s.path[i]) - 1] != '/');
	}
	im_shard_release(&s);
}
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	tmp_init();
#if defined(FUZZ_LEXICON)
	fuzz_lexicon(data, size);
#elif defined(FUZZ_STATE)
	fuzz_state(data, size);
#elif defined(FUZZ_PLANLINE)
	fuzz_planline(data, size);
#elif defined(FUZZ_KEEP)
	fuzz_keep(data, size);
#elif defined(FUZZ_STAGE)
	fuzz_stage(data, size);
#elif defined(FUZZ_RECORDS)
	fuzz_payload(data, size, decode_record, 4);
#elif defined(FUZZ_SHARD)
	fuzz_shard(data, size);
#elif defined(FUZZ_TOOLRECS)
	fuzz_payload(data, size, decode_tool_record, 3);
#elif defined(FUZZ_TOOL_FILES)
	fuzz_tool_stage(data, size);
#else
#error "define FUZZ_LEXICON, FUZZ_STATE, FUZZ_PLANLINE, FUZZ_KEEP, \
FUZZ_STAGE, FUZZ_RECORDS, FUZZ_SHARD, FUZZ_TOOLRECS, FUZZ_MANIFEST, \
FUZZ_DF or FUZZ_EXPORT"
#endif
	return 0;
}
