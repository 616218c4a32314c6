/**
 * @file lexicon.c
 * Document frequencies and the I-Match lexicons (papers/001 §3 and §4.1,
 * papers/000 §3).
 *
 * nidf(t) = log(N / df(t)) / log(N) puts every term of the collection on a
 * 0..1 scale (1 = seen in one document, 0 = seen in all). The primary lexicon
 * L is the window [lo, hi]; the secondary lexicon B (papers/000 §3, step 1)
 * holds the rarer terms, nidf > hi, ranked from the most frequent down, so
 * that a document whose overlap with L is too small borrows the terms closest
 * to L first. Ranking B by decreasing df instead of increasing nidf gives the
 * same order without any rounding.
 *
 * A term exactly on a boundary belongs to the window: nidf is compared with a
 * tolerance of 1e-12, far below the gap between the nidf of two consecutive df
 * values for any realistic N, but above the rounding of log() (e.g. N = 100,
 * df = 10 gives nidf = 0.5 exactly in real arithmetic).
 *
 * File layout (all integers little-endian, doubles as their IEEE-754 bits):
 *
 *     0  magic "IMLEXICN"                 8 bytes
 *     8  version (1)                      u32
 *    12  flags (0)                        u32
 *    16  file size in bytes               u64
 *    24  N                                u64
 *    32  lo, hi                           2 x f64
 *    48  primary count, secondary count   2 x u64
 *    64  terms: L in byte order, then B in rank order; each is
 *          u32 len, len bytes (no NUL), u8 kind, u32 rank, u64 df
 *   end  XXH3_64bits of everything before it                       u64
 *
 * The rank and kind are stored although they follow from df, so that a
 * reader never has to re-derive them (and a file built with a different
 * rounding still loads to the same lexicon).
 */
#include <assert.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "bytes.h"
#include "fdio.h"
#include "lexicon.h"
#include "mem.h"

#define NIDF_EPS 1e-12

/*
 * How many terms ahead im_df_add_ids() prefetches a term's slot. The
 * slots of a collection's df pass a core's L2 (2 MB for the 39,000 terms
 * of the kernel docs, on a machine of 1 MB a core): 8 ahead, two thirds of
 * its time went to waiting for the slot's line all the same; 32 ahead, and
 * a document's first 32 before the loop, it took a quarter less.
 */
#define DF_PREFETCH 32

/* The longest term a lexicon holds (words from text.c are far shorter). */
#define LEX_TERM_MAX 65536

/*
 * From this size on, a table that will be written whole is asked for as
 * whole huge pages (IM_TABLE_HUGE or more: one fault), where
 * im_table_alloc() would fault in its 4 KiB pages one by one: a huge page
 * costs about 0.1 ms, as much as some 64 faults. A built lexicon's block of
 * 0.9 MB (the copy-free licences' 21,000 terms) took 0.39 ms in 4 KiB
 * pages. A first scan builds its lexicon to use it at once and then exit;
 * a loaded lexicon, which a daemon keeps, takes no more than it needs.
 */
#define HUGE_FROM (IM_HUGE_PAGE / 8)

/* ---- Memory ------------------------------------------------------------- */

struct arena {
	char *p;
	size_t len, cap;
};

/*
 * Append @p len bytes plus a NUL, leaving IM_SHORT bytes readable past them
 * (df_count() reads short terms as im_short_key()s); @return the offset or
 * (size_t)-1.
 */
static size_t arena_put(struct arena *a, const char *s, size_t len)
{
	if (a->cap - a->len < len + 1 + IM_SHORT) {
		size_t cap = a->cap ? a->cap : 4096;
		while (cap - a->len < len + 1 + IM_SHORT)
			cap *= 2;
		char *p = realloc(a->p, cap);
		if (!p)
			return (size_t)-1;
		a->p = p;
		a->cap = cap;
	}
	size_t off = a->len;
	memcpy(a->p + off, s, len);
	a->p[off + len] = '\0';
	a->len += len + 1;
	return off;
}

/* ---- Document frequencies ------------------------------------------------- */

/*
 * The counting table holds whole entries, two to a cache line, in open
 * addressing with linear probing: counting a term reads the line of its home
 * slot and sometimes the next one (1.25 slots a term on the bench corpus).
 * A slot that is not the term is told apart by its tag and length, and a
 * short term (nearly all of them) is compared by its im_short_key(), kept
 * in the slot, so neither the term's bytes nor anything else is loaded: one
 * cache miss a term where the table of indexes into v[] it replaces had
 * three (slot, entry, bytes). The home of a term is tag & mask, which lets
 * a rehash move the slots without their hashes (and caps the table at 2^32
 * slots: 3 x 2^30 terms at load 3/4).
 *
 * Everything that is not needed to count lives in v[], indexed by id, the
 * insertion order: the full hash, where the bytes are in the arena (kept for
 * every term, NUL-terminated, for im_df_foreach()) and the slot of the term,
 * which a rehash updates.
 */
struct df_slot {
	/* A short term's im_short_key(); {offset in arena, 0} for a longer one */
	uint64_t key[2];
	uint64_t taglen; /* hash >> 32 | len << 32 */
	uint32_t df;
	uint32_t id1; /* id + 1; 0: the slot is empty */
};

struct df_term {
	uint64_t hash; /* XXH3_64bits of the bytes */
	uint32_t off;  /* of the bytes in arena, which stays below 4 GiB */
	uint32_t slot;
};

struct im_df {
	struct arena arena;
	struct df_slot *slots; /* power of two, load <= 3/4 */
	size_t nslots;
	struct df_term *v; /* by id */
	size_t n, cap;
	uint64_t docs;
};

/*
 * The slots of one huge page. Below it a table grows eightfold: a first scan
 * of 20,000 terms went through five tables, each faulted in, copied and
 * unmapped, before the huge page that held them all; now it goes from 1,024
 * slots to these (HUGE_FROM).
 */
#define DF_HUGE (IM_HUGE_PAGE / sizeof(struct df_slot))

/* Homes are tag & mask: more slots than tags would leave some unused. */
#define DF_MAX_SLOTS ((uint64_t)1 << 32)

int im_df_new(struct im_df **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

void im_df_free(struct im_df *df)
{
	if (!df)
		return;
	free(df->arena.p);
	free(df->v);
	im_table_free(df->slots, df->nslots * sizeof(*df->slots));
	free(df);
}

uint64_t im_df_docs(const struct im_df *df)
{
	return df->docs;
}

size_t im_df_terms(const struct im_df *df)
{
	return df->n;
}

static inline uint32_t df_tag(uint64_t hash)
{
	return (uint32_t)(hash >> 32);
}

static inline uint32_t df_len(const struct df_slot *e)
{
	return (uint32_t)(e->taglen >> 32);
}

/*
 * The slot of term @p id. A walk in id order visits the slots at random:
 * it asks for the slot DF_PREFETCH ids ahead first (in the loop itself, see
 * im_df_add_ids()).
 */
static inline struct df_slot *df_slot_of(const struct im_df *df, size_t id)
{
	return &df->slots[df->v[id].slot];
}

/* df_find() of a term longer than IM_SHORT, from slot @p j on. */
static size_t df_find_long(const struct im_df *df, const char *s, uint32_t len,
			   uint64_t taglen, size_t j)
{
	size_t mask = df->nslots - 1;

	for (;; j = (j + 1) & mask) {
		const struct df_slot *e = &df->slots[j];

		if (!e->id1 || (e->taglen == taglen &&
				!memcmp(df->arena.p + e->key[0], s, len)))
			return j;
	}
}

/*
 * The slot of the term s[0, len), or the empty slot where it belongs. @p key
 * is its im_short_key() if len <= IM_SHORT. The table must not be empty.
 *
 * A short term is one comparison of three words a slot, and the loop makes
 * no call, so that the compiler keeps it in registers. An empty slot (all
 * zero) may compare equal to a term of no byte: it is returned all the same.
 */
static inline size_t df_find(const struct im_df *df, const char *s,
			     uint32_t len, uint64_t hash,
			     struct im_short_key key)
{
	size_t mask = df->nslots - 1, j = df_tag(hash) & mask;
	uint64_t taglen = df_tag(hash) | (uint64_t)len << 32;

	if (len > IM_SHORT)
		return df_find_long(df, s, len, taglen, j);
	for (;; j = (j + 1) & mask) {
		const struct df_slot *e = &df->slots[j];

		if (!((e->taglen ^ taglen) | (e->key[0] ^ key.lo) |
		      (e->key[1] ^ key.hi)) ||
		    !e->id1)
			return j;
	}
}

uint64_t im_df_count(const struct im_df *df, const char *s, size_t len)
{
	struct im_short_key key = {0, 0};
	char pad[IM_SHORT] = {0};

	if (!df->nslots || len > UINT32_MAX)
		return 0;
	if (len <= IM_SHORT)
		key = im_short_key(memcpy(pad, s, len), len);
	const struct df_slot *e = &df->slots[df_find(df, s, (uint32_t)len,
						     XXH3_64bits(s, len), key)];
	return e->id1 ? e->df : 0;
}

static int df_rehash(struct im_df *df, size_t nslots)
{
	struct df_slot *slots = NULL;
	size_t mask = nslots - 1;

	if (nslots <= SIZE_MAX / sizeof(*slots))
		slots = im_table_alloc(nslots * sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	/* Linear probing from tag & mask: a slot moves without its hash. */
	for (size_t i = 0; i < df->nslots; i++) {
		const struct df_slot *e = &df->slots[i];
		size_t j = e->taglen & mask;

		if (!e->id1)
			continue;
		while (slots[j].id1)
			j = (j + 1) & mask;
		slots[j] = *e;
		df->v[e->id1 - 1].slot = (uint32_t)j;
	}
	im_table_free(df->slots, df->nslots * sizeof(*df->slots));
	df->slots = slots;
	df->nslots = nslots;
	return 0;
}

/*
 * Grow the table, if need be, to hold @p n terms at a load of at most 3/4:
 * probes stay short and mostly in a line. @return 0, -ENOMEM, or -EOVERFLOW
 * past the ids of uint32_t or the slots of DF_MAX_SLOTS.
 */
static int df_reserve(struct im_df *df, size_t n)
{
	size_t nslots = df->nslots ? df->nslots : 1024;

	if (n <= df->nslots / 4 * 3)
		return 0;
	if (n > UINT32_MAX - 1)
		return -EOVERFLOW;
	while (nslots / 4 * 3 < n || (nslots > df->nslots && nslots < DF_HUGE &&
				      nslots < df->nslots * 8)) {
		if ((uint64_t)nslots >= DF_MAX_SLOTS || nslots > SIZE_MAX / 2)
			return -EOVERFLOW;
		nslots *= 2;
	}
	/* Rather one huge page than the 4 KiB pages of 256 KiB or more. */
	if (nslots * sizeof(struct df_slot) >= HUGE_FROM && nslots < DF_HUGE)
		nslots = DF_HUGE;
	return df_rehash(df, nslots);
}

/* df_count() of a new term, whose slot would be @p j. */
static int df_insert(struct im_df *df, size_t j, const char *s, uint32_t len,
		     uint64_t hash, struct im_short_key key, uint32_t count,
		     uint32_t *id)
{
	size_t nslots = df->nslots;
	int r = df_reserve(df, df->n + 1);

	if (r < 0)
		return r;
	if (df->nslots != nslots)
		j = df_find(df, s, len, hash, key);
	if (df->n == df->cap) {
		size_t cap = df->cap ? df->cap * 2 : 512;
		struct df_term *v = realloc(df->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		df->v = v;
		df->cap = cap;
	}
	if (df->arena.len > UINT32_MAX - (size_t)len - 1)
		return -EOVERFLOW;
	size_t off = arena_put(&df->arena, s, len);
	if (off == (size_t)-1)
		return -ENOMEM;
	if (len > IM_SHORT)
		key = (struct im_short_key){off, 0};
	df->slots[j] = (struct df_slot){
		.key = {key.lo, key.hi},
		.taglen = df_tag(hash) | (uint64_t)len << 32,
		.df = count,
		.id1 = (uint32_t)(df->n + 1),
	};
	df->v[df->n] = (struct df_term){
		.hash = hash, .off = (uint32_t)off, .slot = (uint32_t)j};
	*id = (uint32_t)df->n++;
	return 0;
}

/*
 * Find or insert; add @p count to its df; *id receives its id. IM_SHORT
 * bytes are readable at @p s if len <= IM_SHORT (a term set's arena and a
 * df's have that slack).
 */
static inline int df_count(struct im_df *df, const char *s, uint32_t len,
			   uint64_t hash, uint32_t count, uint32_t *id)
{
	struct im_short_key key = {0, 0};
	size_t j = 0;

	if (len <= IM_SHORT)
		key = im_short_key(s, len);
	if (df->nslots) {
		struct df_slot *e =
			&df->slots[j = df_find(df, s, len, hash, key)];

		if (e->id1) {
			if (UINT32_MAX - e->df < count)
				return -EOVERFLOW;
			e->df += count;
			*id = e->id1 - 1;
			return 0;
		}
	}
	return df_insert(df, j, s, len, hash, key, count, id);
}

/*
 * A large vocabulary misses the cache once per term, on its slot's line:
 * im_df_add_ids() asks for it DF_PREFETCH terms ahead, and for the line of
 * the slot after it, where a probe goes next when the home slot holds
 * another term and is the second of its line (1 term in 22 on the kernel
 * docs, each waiting for a whole miss: a fifth of the counting's time).
 * (Not for writing: without -mprfchw GCC emits a read prefetch anyway.) A
 * guess that a rehash made stale costs a useless load, no more; past the
 * table's end, nothing. The prefetches stay in the loop: GCC finds a
 * helper function holding only a prefetch free of side effects and drops
 * every call to it.
 */
int im_df_add_ids(struct im_df *df, const struct im_terms *u, uint32_t *ids)
{
	if (df->docs >= UINT32_MAX)
		return -EOVERFLOW;
	for (size_t i = 0; i < u->n && i < DF_PREFETCH && df->nslots; i++) {
		const struct df_slot *h =
			&df->slots[df_tag(u->v[i].hash) & (df->nslots - 1)];

		__builtin_prefetch(h);
		__builtin_prefetch(h + 1);
	}
	for (size_t i = 0; i < u->n; i++) {
		const struct im_term *t = &u->v[i];
		uint32_t id;

		if (i + DF_PREFETCH < u->n && df->nslots) {
			const struct df_slot *h =
				&df->slots[df_tag(u->v[i + DF_PREFETCH].hash) &
					   (df->nslots - 1)];

			__builtin_prefetch(h);
			__builtin_prefetch(h + 1);
		}
		int r = df_count(df, im_terms_str(u, i), t->len, t->hash, 1,
				 ids ? &ids[i] : &id);
		if (r < 0)
			return r;
	}
	df->docs++;
	return 0;
}

int im_df_add_known(struct im_df *df, const uint32_t *ids, size_t n)
{
	if (df->docs >= UINT32_MAX)
		return -EOVERFLOW;
	for (size_t i = 0; i < n; i++)
		if (ids[i] >= df->n)
			return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		struct df_slot *e = df_slot_of(df, ids[i]);

		if (e->df == UINT32_MAX)
			return -EOVERFLOW;
		e->df++;
	}
	df->docs++;
	return 0;
}

int im_df_add(struct im_df *df, const struct im_terms *u)
{
	return im_df_add_ids(df, u, NULL);
}

int im_df_merge(struct im_df *dst, const struct im_df *src)
{
	return im_df_merge_ids(dst, src, NULL);
}

int im_df_merge_ids(struct im_df *dst, const struct im_df *src, uint32_t *ids)
{
	if (dst->docs + src->docs > UINT32_MAX)
		return -EOVERFLOW;
	/* dst ends with at least as many terms as src: grow it once. */
	int r = df_reserve(dst, src->n);
	if (r < 0)
		return r;
	for (size_t i = 0; i < src->n; i++) {
		const struct df_term *t = &src->v[i];
		const struct df_slot *e = df_slot_of(src, i);
		uint32_t id;

		if (i + DF_PREFETCH < src->n) {
			uint64_t ahead = src->v[i + DF_PREFETCH].hash;

			__builtin_prefetch(df_slot_of(src, i + DF_PREFETCH));
			__builtin_prefetch(
				&dst->slots[df_tag(ahead) & (dst->nslots - 1)]);
		}
		r = df_count(dst, src->arena.p + t->off, df_len(e), t->hash,
			     e->df, ids ? &ids[i] : &id);
		if (r < 0)
			return r;
	}
	dst->docs += src->docs;
	return 0;
}

int im_df_add_term(struct im_df *df, const char *s, size_t len, uint32_t count)
{
	if (!len || len > UINT32_MAX)
		return -EINVAL;
	char pad[IM_SHORT] = {0};
	uint32_t id;

	if (len <= IM_SHORT)
		s = memcpy(pad, s, len);
	return df_count(df, s, (uint32_t)len, XXH3_64bits(s, len), count, &id);
}

int im_df_add_docs(struct im_df *df, uint64_t n)
{
	if (n > UINT32_MAX || df->docs + n > UINT32_MAX)
		return -EOVERFLOW;
	df->docs += n;
	return 0;
}

int im_df_foreach(const struct im_df *df, im_df_term_fn fn, void *arg)
{
	for (size_t i = 0; i < df->n; i++) {
		const struct df_term *t = &df->v[i];
		const struct df_slot *e = df_slot_of(df, i);

		if (i + DF_PREFETCH < df->n)
			__builtin_prefetch(df_slot_of(df, i + DF_PREFETCH));
		int r = fn(df->arena.p + t->off, df_len(e), t->hash, e->df,
			   arg);

		if (r)
			return r;
	}
	return 0;
}

/* ---- The lexicon ------------------------------------------------------------ */

/*
 * The lookup table. Each term lives in the arena as one record,
 *     u32 term number, u32 length, the bytes, NUL
 * and a slot holds the high half of the term's XXH3_64bits and the record's
 * offset. A lookup that misses reads one slot line; a hit reads one record
 * more, which holds everything the signer needs (number, length, bytes), so
 * the term table itself stays out of the hot path.
 */
#define REC_HDR 8

struct lex_slot {
	uint32_t tag; /* hash >> 32 */
	uint32_t rec; /* offset of the record in arena; 0 = empty */
};

struct im_lexicon {
	uint64_t docs;
	double lo, hi;
	size_t nprimary, nsecondary;
	/*
	 * terms, dfs, bo and arena share one block (lex_alloc()): apart, a
	 * first scan's build faulted in some 300 pages of them one at a time
	 * (the terms alone are 24 bytes a term); together, from 1 MiB (some
	 * 20,000 terms at about 50 bytes each), they are whole huge pages.
	 */
	void *block;
	size_t block_size;
	struct im_lex_term *terms; /* L in byte order, then B in rank order */
	uint32_t *dfs;		   /* df of terms[i], for saving */
	char *arena;		   /* the records (see struct lex_slot) */
	size_t arena_cap, arena_len;
	struct lex_slot *slots; /* power of two, load <= 2/3 */
	size_t mask;
	/*
	 * A built lexicon's slots are filled at its first lookup, not by the
	 * build: a first scan signs from term numbers and never looks a term
	 * up, and filling them was a sixth of the build (0.3 of 2.0 ms for
	 * the licences' 21,181 terms, warm; more with a first scan's page
	 * faults). Their pages come on first touch (im_block_alloc()) for
	 * the same reason; a loaded lexicon's are filled at once
	 * (lex_index()) and mapped whole.
	 */
	int indexed; /* atomic: 0 until the slots are filled */
	bool slots_lazy;
	pthread_mutex_t index_lock;
	uint64_t file_key; /* im_lexicon_file_key() */
	uint32_t *bo;	   /* im_lexicon_byte_order(); NULL when loaded */
};

void im_lexicon_free(struct im_lexicon *lex)
{
	if (!lex)
		return;
	im_table_free(lex->block, lex->block_size);
	if (lex->slots_lazy)
		im_block_free(lex->slots,
			      (lex->mask + 1) * sizeof(*lex->slots));
	else
		im_table_free(lex->slots,
			      (lex->mask + 1) * sizeof(*lex->slots));
	pthread_mutex_destroy(&lex->index_lock);
	free(lex);
}

const struct im_lex_term *im_lexicon_term(const struct im_lexicon *lex,
					  size_t i)
{
	return i < lex->nprimary + lex->nsecondary ? &lex->terms[i] : NULL;
}

size_t im_lexicon_primary_size(const struct im_lexicon *lex)
{
	return lex->nprimary;
}

size_t im_lexicon_secondary_size(const struct im_lexicon *lex)
{
	return lex->nsecondary;
}

uint64_t im_lexicon_docs(const struct im_lexicon *lex)
{
	return lex->docs;
}

void im_lexicon_window(const struct im_lexicon *lex, double *lo, double *hi)
{
	if (lo)
		*lo = lex->lo;
	if (hi)
		*hi = lex->hi;
}

void im_lexicon_prefetch(const struct im_lexicon *lex, uint64_t hash)
{
	__builtin_prefetch(&lex->slots[hash & lex->mask]);
}

static void lex_insert(struct im_lexicon *lex, size_t i, uint64_t h);

/* Fill a built lexicon's slots, once, whichever thread looks up first: the
 * lexicon is immutable to its users, this is the part the build left. */
static __attribute__((noinline)) void lex_index_late(struct im_lexicon *lex)
{
	pthread_mutex_lock(&lex->index_lock);
	if (!__atomic_load_n(&lex->indexed, __ATOMIC_RELAXED)) {
		for (size_t i = 0; i < lex->nprimary + lex->nsecondary; i++)
			lex_insert(lex, i,
				   XXH3_64bits(lex->terms[i].str,
					       lex->terms[i].len));
		__atomic_store_n(&lex->indexed, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&lex->index_lock);
}

long im_lexicon_lookup(const struct im_lexicon *lex, const char *s, size_t len,
		       uint64_t hash, const char **str)
{
	uint32_t tag = (uint32_t)(hash >> 32);
	size_t j = hash & lex->mask;

	if (__builtin_expect(!__atomic_load_n(&lex->indexed, __ATOMIC_ACQUIRE),
			     0))
		lex_index_late((struct im_lexicon *)lex);
	for (;;) {
		const struct lex_slot *sl = &lex->slots[j];
		if (!sl->rec)
			return -1;
		if (sl->tag == tag) {
			const char *rec = lex->arena + sl->rec;
			uint32_t rlen, ix;
			memcpy(&rlen, rec + 4, 4);
			if (rlen == len &&
			    im_same_bytes(rec + REC_HDR, s, len)) {
				memcpy(&ix, rec, 4);
				if (str)
					*str = rec + REC_HDR;
				return ix;
			}
		}
		j = (j + 1) & lex->mask;
	}
}

const uint32_t *im_lexicon_byte_order(const struct im_lexicon *lex)
{
	return lex->bo;
}

const struct im_lex_term *im_lexicon_find(const struct im_lexicon *lex,
					  const char *s, size_t len,
					  uint64_t hash)
{
	long ix = im_lexicon_lookup(lex, s, len, hash, NULL);
	return ix < 0 ? NULL : &lex->terms[ix];
}

static double nidf_of(uint64_t df, uint64_t n)
{
	return log((double)n / (double)df) / log((double)n);
}

/*
 * nidf_of() for one N, its values for the small df that most terms of a
 * collection have computed once: a build took two logarithms per term of
 * the collection and two more per term kept.
 */
#define NIDF_MEMO 256

struct nidf_memo {
	uint64_t n;
	double v[NIDF_MEMO]; /* v[df] for 0 < df < NIDF_MEMO */
};

static void nidf_memo_init(struct nidf_memo *m, uint64_t n)
{
	m->n = n;
	m->v[0] = 0;
	for (uint64_t df = 1; df < NIDF_MEMO; df++)
		m->v[df] = nidf_of(df, n);
}

static double nidf_get(const struct nidf_memo *m, uint64_t df)
{
	return df && df < NIDF_MEMO ? m->v[df] : nidf_of(df, m->n);
}

/* An empty lexicon, for lex_alloc(); NULL without memory. */
static struct im_lexicon *lex_new(void)
{
	struct im_lexicon *lex = calloc(1, sizeof(*lex));

	if (lex)
		pthread_mutex_init(&lex->index_lock, NULL);
	return lex;
}

/*
 * Allocate the term arrays for @p n terms whose strings take @p bytes (their
 * NULs included), @p nbo entries of the byte order (0: none, lex->bo stays
 * NULL) and the hash table. The caller adds the terms with lex_set() and
 * then calls lex_index(), or if @p lazy leaves the table to the first
 * lookup (lex_index_late()).
 */
static int lex_alloc(struct im_lexicon *lex, size_t n, size_t bytes, size_t nbo,
		     bool lazy)
{
	/* Load at most 2/3: with 8-byte slots a probe run stays in a line. */
	size_t nslots = 16;
	size_t terms_size = n * sizeof(*lex->terms);
	size_t dfs_size = n * sizeof(*lex->dfs);
	size_t bo_size = nbo * sizeof(*lex->bo);
	char *p;

	if (n > UINT32_MAX || nbo > UINT32_MAX || bytes > UINT32_MAX)
		return -EOVERFLOW;
	while (nslots < n + n / 2)
		nslots *= 2;
	/* Records start at REC_HDR so that offset 0 can mean "empty". */
	lex->arena_len = REC_HDR;
	lex->arena_cap = REC_HDR + n * REC_HDR + bytes;
	if (lex->arena_cap > UINT32_MAX)
		return -EOVERFLOW;
	/* The padding lets readers copy IM_LEX_STR_PAD bytes of any term. */
	lex->block_size = terms_size + dfs_size + bo_size + lex->arena_cap +
			  IM_LEX_STR_PAD;
	if (lazy && lex->block_size >= HUGE_FROM &&
	    lex->block_size < IM_TABLE_HUGE)
		lex->block_size = IM_TABLE_HUGE;
	lex->block = im_table_alloc(lex->block_size);
	lex->slots_lazy = lazy;
	lex->slots = lazy ? im_block_alloc(nslots * sizeof(*lex->slots))
			  : im_table_alloc(nslots * sizeof(*lex->slots));
	lex->mask = nslots - 1;
	if (!lex->block || !lex->slots)
		return -ENOMEM;
	/* The terms first: the block is page-aligned, they need 8 bytes. */
	p = lex->block;
	lex->terms = (struct im_lex_term *)p;
	lex->dfs = (uint32_t *)(p + terms_size);
	lex->bo = nbo ? (uint32_t *)(p + terms_size + dfs_size) : NULL;
	lex->arena = p + terms_size + dfs_size + bo_size;
	return 0;
}

_Static_assert(IM_SHORT >= IM_LEX_STR_PAD,
	       "a df's arena keeps IM_LEX_STR_PAD bytes readable at each term");

/*
 * The bytes of term number @p i: its record, next in the arena. If
 * @p padded, IM_LEX_STR_PAD bytes are readable at @p s (a df's arena has
 * that slack): a short term is then copied with one fixed-size move, not a
 * call. The bytes it writes past the term's NUL are the next record's,
 * written over next, or the arena's padding after the last. @return 0, or
 * -EINVAL if the arena has no room left.
 */
static int lex_set_bytes(struct im_lexicon *lex, size_t i, const void *s,
			 uint32_t len, bool padded)
{
	if (lex->arena_cap - lex->arena_len < REC_HDR + (size_t)len + 1)
		return -EINVAL;
	char *rec = lex->arena + lex->arena_len;
	uint32_t ix = (uint32_t)i;
	struct im_lex_term *t = &lex->terms[i];

	memcpy(rec, &ix, 4);
	memcpy(rec + 4, &len, 4);
	if (padded && len < IM_LEX_STR_PAD)
		memcpy(rec + REC_HDR, s, IM_LEX_STR_PAD);
	else
		memcpy(rec + REC_HDR, s, len);
	rec[REC_HDR + len] = '\0';
	lex->arena_len += REC_HDR + (size_t)len + 1;
	t->str = rec + REC_HDR;
	t->len = len;
	return 0;
}

/* The rest of term number @p i. */
static void lex_set_kind(struct im_lexicon *lex, size_t i, uint8_t kind,
			 uint32_t rank, uint64_t df, const struct nidf_memo *nm)
{
	struct im_lex_term *t = &lex->terms[i];

	t->kind = kind;
	t->rank = rank;
	t->nidf = (float)nidf_get(nm, df);
	lex->dfs[i] = (uint32_t)df;
}

/* Term number @p i: lex_set_bytes(), then lex_set_kind(). */
static int lex_set(struct im_lexicon *lex, size_t i, const void *s,
		   uint32_t len, bool padded, uint8_t kind, uint32_t rank,
		   uint64_t df, const struct nidf_memo *nm)
{
	int r = lex_set_bytes(lex, i, s, len, padded);

	if (!r)
		lex_set_kind(lex, i, kind, rank, df, nm);
	return r;
}

/* Insert term @p i, of XXH3_64bits @p h, into the table; it must not be
 * there yet. */
static void lex_insert(struct im_lexicon *lex, size_t i, uint64_t h)
{
	const struct im_lex_term *t = &lex->terms[i];
	size_t j = h & lex->mask;

	while (lex->slots[j].rec)
		j = (j + 1) & lex->mask;
	lex->slots[j] = (struct lex_slot){
		.tag = (uint32_t)(h >> 32),
		.rec = (uint32_t)(t->str - REC_HDR - lex->arena),
	};
}

/* Insert terms[0..n) into the table. @return 0 or -EEXIST on a duplicate. */
static int lex_index(struct im_lexicon *lex, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct im_lex_term *t = &lex->terms[i];
		uint64_t h = XXH3_64bits(t->str, t->len);

		if (im_lexicon_lookup(lex, t->str, t->len, h, NULL) >= 0)
			return -EEXIST;
		lex_insert(lex, i, h);
	}
	return 0;
}

static int bytes_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	int c = memcmp(a, b, alen < blen ? alen : blen);
	if (c)
		return c;
	return (alen > blen) - (alen < blen);
}

/*
 * A term being sorted into L or B: to order most pairs without reading the
 * bytes (which lie all over the df's arena), its first 8 bytes as a
 * big-endian number, zero-padded. Two prefixes that differ order as
 * bytes_cmp() orders the terms (a padding zero sorts before any byte but a
 * NUL, and a NUL against padding compares equal); equal ones fall back on
 * the bytes. Sixteen bytes: a sort moves each pick several times.
 */
struct pick {
	uint64_t pre;
	uint32_t df;
	uint32_t id; /* in the struct im_df */
};

/* @p s is a df's term: its arena keeps IM_SHORT bytes readable past the
 * end, so eight bytes are loaded whole and those past @p len cleared, with
 * no copy of a variable length (a call) for each term. */
static uint64_t prefix8(const char *s, uint32_t len)
{
	uint64_t x;

	_Static_assert(IM_SHORT >= 8, "prefix8() reads 8 bytes of any term");
	memcpy(&x, s, 8);
	x = be64toh(x);
	return len < 8 ? x & ~(UINT64_MAX >> (8 * len)) : x;
}

/* The bytes of term @p id: arena_put() appends each term and its NUL right
 * after the one before, in id order, so the next term's offset (or the
 * arena's end) tells the length without a visit to the term's slot. */
static const char *df_bytes(const struct im_df *df, uint32_t id, uint32_t *len)
{
	size_t off = df->v[id].off;
	size_t end = id + 1 < df->n ? df->v[id + 1].off : df->arena.len;

	*len = (uint32_t)(end - off - 1);
	return df->arena.p + off;
}

static int pick_cmp_bytes(const void *pa, const void *pb, void *arg)
{
	const struct pick *a = pa, *b = pb;
	const struct im_df *df = arg;
	uint32_t alen, blen;
	const char *as, *bs;

	if (a->pre != b->pre)
		return a->pre < b->pre ? -1 : 1;
	as = df_bytes(df, a->id, &alen);
	bs = df_bytes(df, b->id, &blen);
	return bytes_cmp(as, alen, bs, blen);
}

/*
 * A stable LSD radix sort of @p v on the bytes of a key, prefix or ~df, from
 * the lowest: every byte's counts come from one pass over the picks, and a
 * byte all of them share (the high bytes of a df, the padding of short
 * terms) costs no pass. @p tmp has room for @p n picks; @return whichever
 * of the two holds the result.
 */
static struct pick *radix_picks(struct pick *v, struct pick *tmp, size_t n,
				bool by_df)
{
	unsigned nbytes = by_df ? 4 : 8;
	uint32_t cnt[8][256];

	memset(cnt, 0, sizeof(cnt[0]) * nbytes);
	for (size_t i = 0; i < n; i++) {
		uint64_t k = by_df ? ~v[i].df : v[i].pre;

		for (unsigned b = 0; b < nbytes; b++)
			cnt[b][(k >> (8 * b)) & 255]++;
	}
	for (unsigned b = 0; b < nbytes; b++) {
		uint64_t first = by_df ? ~v[0].df : v[0].pre;
		uint32_t *c = cnt[b], sum = 0;
		struct pick *x;

		if (c[(first >> (8 * b)) & 255] == n)
			continue;
		for (unsigned d = 0; d < 256; d++) {
			uint32_t k = c[d];

			c[d] = sum;
			sum += k;
		}
		for (size_t i = 0; i < n; i++) {
			uint64_t k = by_df ? ~v[i].df : v[i].pre;

			tmp[c[(k >> (8 * b)) & 255]++] = v[i];
		}
		x = v;
		v = tmp;
		tmp = x;
	}
	return v;
}

/* Picks in a run of one prefix that sort_run() sorts by insertion. */
#define RUN_INSERT 16

/*
 * Sort the picks v[0, n), whose first 8 bytes are the same, by their bytes.
 * Each pick's pre becomes its next 8 bytes as prefix8() takes them (pre is
 * free: build() numbers the sorted picks over it), so that most pairs are
 * again ordered without reading the bytes; a run of a few picks (2,114
 * runs of 6,178 of the kernel docs' 38,930 picks) is then sorted by
 * insertion, a longer one by qsort_r(). With qsort_r() for every run,
 * sorting them took 0.6 ms, more than the radix sort of all the picks.
 */
static void sort_run(const struct im_df *df, struct pick *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t len;
		const char *s = df_bytes(df, v[i].id, &len);

		/* IM_SHORT bytes are readable past the term's end. */
		v[i].pre = len > 8 ? prefix8(s + 8, len - 8) : 0;
	}
	if (n > RUN_INSERT) {
		qsort_r(v, n, sizeof(*v), pick_cmp_bytes, (void *)df);
		return;
	}
	for (size_t i = 1; i < n; i++) {
		struct pick x = v[i];
		size_t j = i;

		for (; j > 0 && pick_cmp_bytes(&v[j - 1], &x, (void *)df) > 0;
		     j--)
			v[j] = v[j - 1];
		v[j] = x;
	}
}

/*
 * Sort @p v in byte order: the order is total on distinct terms, so any
 * sort gives the same. The prefix puts all but the terms that share their
 * first 8 bytes in place without a comparison; those few runs are sorted
 * by their bytes (sort_run()). @p tmp has room for @p n picks; @return
 * whichever of the two holds the result.
 */
static struct pick *sort_picks(const struct im_df *df, struct pick *v,
			       struct pick *tmp, size_t n)
{
	struct pick *sorted;

	if (n < 2)
		return v;
	sorted = radix_picks(v, tmp, n, false);
	for (size_t i = 0; i < n;) {
		size_t j = i + 1;

		while (j < n && sorted[j].pre == sorted[i].pre)
			j++;
		if (j - i > 1)
			sort_run(df, sorted + i, j - i);
		i = j;
	}
	return sorted;
}

/* B from byte order to rank order: by decreasing df, a stable pass (B's
 * dfs are small), so that ties stay in byte order. @return as
 * sort_picks(). */
static struct pick *rank_picks(struct pick *v, struct pick *tmp, size_t n)
{
	return n < 2 ? v : radix_picks(v, tmp, n, true);
}

/* Where a term of document frequency @p df goes: an enum im_lex_kind, or
 * 0 for neither lexicon. */
static int pick_kind(const struct nidf_memo *nm, uint32_t df, double lo,
		     double hi)
{
	double x = nidf_get(nm, df);

	return x > hi + NIDF_EPS    ? IM_LEX_SECONDARY
	       : x >= lo - NIDF_EPS ? IM_LEX_PRIMARY
				    : 0;
}

/*
 * im_lexicon_build_numbered() with @p picks, room for twice im_df_terms()
 * picks, to work in, and @p nums, room for im_df_terms() numbers.
 *
 * The kept terms (L and B) are sorted together, once: a term's place in
 * that order is its place in the byte order of L and B together
 * (im_lexicon_byte_order()), and splitting them keeps each in byte order.
 */
static int build(const struct im_df *df, double lo, double hi,
		 size_t secondary_cap, struct im_lexicon **out, uint32_t *nums,
		 struct pick *picks)
{
	struct im_lexicon *lex = NULL;
	struct pick *sorted, *pl, *pb;
	size_t k = 0, npl = 0, npb = 0, bytes_l = 0, bytes_b = 0;
	/* nidf falls as df grows: every term of L is more frequent than
	 * every term of B, and the rarest of L tells them apart. */
	uint32_t l_min = UINT32_MAX;
	struct nidf_memo nm;
	uint8_t kind_of[NIDF_MEMO];
	int r;

	nidf_memo_init(&nm, df->docs);
	lex = lex_new();
	if (!lex)
		return -ENOMEM;
	/* An empty slot's df is 0 too: id1 tells it from a term of df 0,
	 * whose nidf is above every window. */
	for (uint32_t d = 0; d < NIDF_MEMO; d++)
		kind_of[d] = (uint8_t)pick_kind(&nm, d, lo, hi);
	/*
	 * The slots in their order, not the terms in id order: one read
	 * through the table instead of a visit at random to each term's slot,
	 * whose key holds a short term's first bytes as prefix8() takes them
	 * (zero-padded). The sort gives the same order from any.
	 *
	 * Without a branch on whether a slot is empty, nor on its term's
	 * kind, which went either way at random: each slot's pick is
	 * written, and kept by counting it. (picks[k] lies below the slot
	 * being read, even when picks are written over the slots.)
	 */
	for (size_t j = 0; j < df->nslots; j++) {
		const struct df_slot *e = &df->slots[j];
		uint32_t len = df_len(e), edf = e->df, id1 = e->id1;
		uint64_t pre = len <= IM_SHORT
				       ? be64toh(e->key[0])
				       : prefix8(df->arena.p + e->key[0], len);
		unsigned kd = edf < NIDF_MEMO
				      ? kind_of[edf]
				      : (unsigned)pick_kind(&nm, edf, lo, hi);
		size_t keep =
			(size_t)(kd != 0) & (id1 != 0) & (len <= LEX_TERM_MAX);
		size_t in_l = keep & (kd == IM_LEX_PRIMARY);
		size_t in_b = keep & (kd == IM_LEX_SECONDARY);

		picks[k] = (struct pick){pre, edf, id1 - 1};
		k += keep;
		npl += in_l;
		npb += in_b;
		bytes_l += (len + 1) & -in_l;
		bytes_b += (len + 1) & -in_b;
		l_min = in_l && edf < l_min ? edf : l_min;
	}
	sorted = sort_picks(df, picks, picks + k, k);
	/* L and B apart, each in byte order, each pick's place in pre. */
	pl = sorted == picks ? picks + k : picks;
	pb = pl + npl;
	for (size_t i = 0, il = 0, ib = 0; i < k; i++) {
		struct pick p = sorted[i];

		p.pre = i;
		if (p.df >= l_min)
			pl[il++] = p;
		else
			pb[ib++] = p;
	}
	pb = rank_picks(pb, sorted, npb); /* sorted's room is free again */
	/* Only the secondary_cap best-ranked terms of B are kept. */
	if (npb > secondary_cap) {
		npb = secondary_cap;
		bytes_b = 0;
		for (size_t i = 0; i < npb; i++) {
			uint32_t len;

			df_bytes(df, pb[i].id, &len);
			bytes_b += len + 1;
		}
	}

	size_t n = npl + npb;
	if (n >= UINT32_MAX) {
		r = -EOVERFLOW;
		goto out;
	}
	lex->docs = df->docs;
	lex->lo = lo;
	lex->hi = hi;
	lex->nprimary = npl;
	lex->nsecondary = npb;
	r = lex_alloc(lex, n, bytes_l + bytes_b, n ? n : 1, true);
	if (r < 0)
		goto out;
	for (size_t i = 0; i < df->n; i++)
		nums[i] = IM_LEX_NO_TERM;
	for (size_t i = 0; i < n; i++) {
		const struct pick *p = i < npl ? &pl[i] : &pb[i - npl];

		lex->bo[i] = (uint32_t)p->pre;
		lex_set_kind(lex, i,
			     i < npl ? IM_LEX_PRIMARY : IM_LEX_SECONDARY,
			     i < npl ? 0 : (uint32_t)(i - npl), p->df, &nm);
		nums[p->id] = (uint32_t)i;
	}
	/* The records in id order: the df's bytes are read in the order they
	 * lie in, not at random; a record can be anywhere in the arena. */
	for (size_t id = 0; id < df->n; id++) {
		uint32_t len;
		const char *str;

		if (nums[id] == IM_LEX_NO_TERM)
			continue;
		str = df_bytes(df, (uint32_t)id, &len);
		r = lex_set_bytes(lex, nums[id], str, len, true);
		assert(r == 0); /* bytes was counted above */
	}
	*out = lex;
	lex = NULL;
out:
	im_lexicon_free(lex);
	return r;
}

int im_lexicon_build(const struct im_df *df, double lo, double hi,
		     size_t secondary_cap, struct im_lexicon **out)
{
	return im_lexicon_build_numbered(df, lo, hi, secondary_cap, out, NULL);
}

int im_lexicon_build_numbered(const struct im_df *df, double lo, double hi,
			      size_t secondary_cap, struct im_lexicon **out,
			      uint32_t *numbers)
{
	size_t n = df->n ? df->n : 1;
	struct pick *picks = NULL;
	uint32_t *own = NULL;
	int r;

	*out = NULL;
	if (!(lo >= 0 && lo <= hi && hi <= 1) || df->docs < 2)
		return -EINVAL;
	r = -ENOMEM;
	picks = malloc(2 * n * sizeof(*picks));
	if (!numbers)
		numbers = own = malloc(n * sizeof(*numbers));
	if (picks && numbers)
		r = build(df, lo, hi, secondary_cap, out, numbers, picks);
	free(picks);
	free(own);
	return r;
}

int im_lexicon_build_from(struct im_df *df, double lo, double hi,
			  size_t secondary_cap, struct im_lexicon **out,
			  uint32_t *numbers)
{
	/* Twice as many picks as terms: no more than the slots hold, since
	 * a table has a slot per term at least. */
	_Static_assert(2 * sizeof(struct pick) <= sizeof(struct df_slot),
		       "the slots' memory has room for the build's picks");

	*out = NULL;
	if (!df->nslots || !numbers)
		return im_lexicon_build_numbered(df, lo, hi, secondary_cap, out,
						 numbers);
	if (!(lo >= 0 && lo <= hi && hi <= 1) || df->docs < 2)
		return -EINVAL;
	/*
	 * The picks take the slots' place (they were faulted in, 1.2 MB of
	 * the kernel docs' first scan that it need not fault in again): the
	 * build's first pass reads each slot before it writes a pick over
	 * it, and the k-th pick, 16 bytes, lies below the k-th slot it comes
	 * from at the earliest, 32 bytes each.
	 */
	return build(df, lo, hi, secondary_cap, out, numbers,
		     (struct pick *)df->slots);
}

/* ---- The file ------------------------------------------------------------- */

static const char lex_magic[8] = {'I', 'M', 'L', 'E', 'X', 'I', 'C', 'N'};
#define LEX_VERSION 1
#define LEX_HEADER  64
#define LEX_TRAILER 8
#define LEX_REC_MIN (4 + 1 + 1 + 4 + 8) /* a one-byte term */

static void put_u32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void put_u64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_u32(const unsigned char *p)
{
	uint32_t v = 0;
	for (int i = 3; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static uint64_t get_u64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static uint64_t dbl_bits(double d)
{
	uint64_t v;
	memcpy(&v, &d, sizeof(v));
	return v;
}

static double bits_dbl(uint64_t v)
{
	double d;
	memcpy(&d, &v, sizeof(d));
	return d;
}

/* fsync the directory holding @p path so that a rename in it is durable. */
static int fsync_parent(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *dir;
	if (!slash)
		dir = strdup(".");
	else if (slash == path)
		dir = strdup("/");
	else
		dir = strndup(path, (size_t)(slash - path));
	if (!dir)
		return -ENOMEM;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(dir);
	if (fd < 0)
		return -errno;
	int r = fsync(fd) < 0 ? -errno : 0;
	close(fd);
	/* Some file systems cannot fsync a directory; the rename still stands. */
	if (r == -EINVAL || r == -EROFS)
		r = 0;
	return r;
}

int im_lexicon_save(const struct im_lexicon *lex, const char *path)
{
	return im_lexicon_save_key(lex, path, NULL);
}

uint64_t im_lexicon_file_key(const struct im_lexicon *lex)
{
	return lex->file_key;
}

int im_lexicon_save_key(const struct im_lexicon *lex, const char *path,
			uint64_t *key)
{
	size_t n = lex->nprimary + lex->nsecondary;
	size_t size = LEX_HEADER + LEX_TRAILER;
	unsigned char *buf = NULL, *p;
	char *tmp = NULL;
	int fd = -1, r;

	for (size_t i = 0; i < n; i++)
		size += 4 + lex->terms[i].len + 1 + 4 + 8;
	r = -ENOMEM;
	buf = malloc(size);
	if (!buf || asprintf(&tmp, "%s.tmp.%ld", path, (long)getpid()) < 0) {
		tmp = NULL;
		goto out;
	}

	memcpy(buf, lex_magic, 8);
	put_u32(buf + 8, LEX_VERSION);
	put_u32(buf + 12, 0);
	put_u64(buf + 16, size);
	put_u64(buf + 24, lex->docs);
	put_u64(buf + 32, dbl_bits(lex->lo));
	put_u64(buf + 40, dbl_bits(lex->hi));
	put_u64(buf + 48, lex->nprimary);
	put_u64(buf + 56, lex->nsecondary);
	p = buf + LEX_HEADER;
	for (size_t i = 0; i < n; i++) {
		const struct im_lex_term *t = &lex->terms[i];
		put_u32(p, t->len);
		memcpy(p + 4, t->str, t->len);
		p += 4 + t->len;
		*p++ = t->kind;
		put_u32(p, t->rank);
		put_u64(p + 4, lex->dfs[i]);
		p += 12;
	}
	assert((size_t)(p - buf) == size - LEX_TRAILER);
	put_u64(p, XXH3_64bits(buf, size - LEX_TRAILER));

	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
		  0644);
	if (fd < 0) {
		r = -errno;
		goto out;
	}
	r = im_write_all(fd, buf, size);
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	fd = -1;
	if (r < 0)
		goto out;
	if (rename(tmp, path) < 0) {
		r = -errno;
		goto out;
	}
	free(tmp);
	tmp = NULL; /* renamed: nothing to clean up */
	r = fsync_parent(path);
	if (!r && key)
		*key = XXH3_64bits(buf, size);
out:
	if (fd >= 0)
		close(fd);
	if (tmp) {
		int saved = errno;
		unlink(tmp);
		errno = saved;
	}
	free(tmp);
	free(buf);
	return r;
}

static int read_file(const char *path, unsigned char **out, size_t *len)
{
	unsigned char *buf = NULL;
	struct stat st;
	size_t got = 0;
	int fd, r = 0;

	/* O_NONBLOCK: a fifo given by mistake must not hang the caller. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		r = -EISDIR;
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		r = -EINVAL;
		goto out;
	}
	if ((uint64_t)st.st_size > SIZE_MAX - 1) {
		r = -EFBIG;
		goto out;
	}
	/* A file given by mistake (a 2 GB image, say) is refused on its first
	 * bytes, not after reading all of it into memory. */
	{
		unsigned char head[sizeof(lex_magic)];
		ssize_t k;

		do
			k = pread(fd, head, sizeof(head), 0);
		while (k < 0 && errno == EINTR);
		if (k < 0) {
			r = -errno;
			goto out;
		}
		if (memcmp(head, lex_magic, (size_t)k) != 0) {
			r = -EBADMSG;
			goto out;
		}
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		r = -ENOMEM;
		goto out;
	}
	while (got < (size_t)st.st_size) {
		ssize_t k = read(fd, buf + got, (size_t)st.st_size - got);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			goto out;
		}
		if (k == 0)
			break;
		got += (size_t)k;
	}
	*out = buf;
	*len = got;
	buf = NULL;
out:
	free(buf);
	close(fd);
	return r;
}

#define CORRUPT(...)                                                           \
	do {                                                                   \
		if (why)                                                       \
			snprintf(why, why_len, __VA_ARGS__);                   \
		r = -EINVAL;                                                   \
		goto out;                                                      \
	} while (0)

int im_lexicon_load(const char *path, struct im_lexicon **out, char *why,
		    size_t why_len)
{
	struct im_lexicon *lex = NULL;
	struct nidf_memo nm;
	unsigned char *buf = NULL;
	size_t len = 0;
	int r;

	*out = NULL;
	if (why && why_len)
		why[0] = '\0';
	r = read_file(path, &buf, &len);
	if (r == -EBADMSG)
		CORRUPT("not an imatch lexicon");
	if (r < 0) {
		if (why)
			snprintf(why, why_len, "%s",
				 r == -EINVAL ? "not a regular file"
					      : strerror(-r));
		goto out;
	}

	if (memcmp(buf, lex_magic, len < 8 ? len : 8) != 0)
		CORRUPT("not an imatch lexicon");
	if (len < LEX_HEADER)
		CORRUPT("truncated (%zu bytes, header needs %d)", len,
			LEX_HEADER);
	uint32_t version = get_u32(buf + 8);
	if (version != LEX_VERSION)
		CORRUPT("unsupported version %u", version);
	uint32_t flags = get_u32(buf + 12);
	if (flags != 0)
		CORRUPT("unsupported flags 0x%x", flags);
	uint64_t size = get_u64(buf + 16);
	if (size > len)
		CORRUPT("truncated (%zu of %llu bytes)", len,
			(unsigned long long)size);
	if (size < len)
		CORRUPT("bad checksum (%zu bytes, header says %llu)", len,
			(unsigned long long)size);
	if (size < LEX_HEADER + LEX_TRAILER)
		CORRUPT("truncated (%zu bytes)", len);
	if (XXH3_64bits(buf, len - LEX_TRAILER) !=
	    get_u64(buf + len - LEX_TRAILER))
		CORRUPT("bad checksum");

	/* The checksum matched; still check everything, as a reader should. */
	uint64_t docs = get_u64(buf + 24);
	double lo = bits_dbl(get_u64(buf + 32));
	double hi = bits_dbl(get_u64(buf + 40));
	uint64_t npl = get_u64(buf + 48), npb = get_u64(buf + 56);
	size_t room = (len - LEX_HEADER - LEX_TRAILER) / LEX_REC_MIN;
	if (docs < 2 || docs > UINT32_MAX)
		CORRUPT("corrupt: %llu documents", (unsigned long long)docs);
	if (!(lo >= 0 && lo <= hi && hi <= 1))
		CORRUPT("corrupt: nidf window");
	if (npl > room || npb > room || npl + npb > room)
		CORRUPT("corrupt: %llu + %llu terms cannot fit in %zu bytes",
			(unsigned long long)npl, (unsigned long long)npb, len);

	size_t n = npl + npb;
	size_t bytes = len - LEX_HEADER - LEX_TRAILER - n * (LEX_REC_MIN - 1);
	r = -ENOMEM;
	lex = lex_new();
	if (!lex)
		goto out;
	lex->docs = docs;
	nidf_memo_init(&nm, docs);
	lex->lo = lo;
	lex->hi = hi;
	lex->nprimary = npl;
	lex->nsecondary = npb;
	r = lex_alloc(lex, n, bytes + n, 0, false);
	if (r < 0)
		goto out;

	const unsigned char *p = buf + LEX_HEADER;
	const unsigned char *end = buf + len - LEX_TRAILER;
	for (size_t i = 0; i < n; i++) {
		if (end - p < 4)
			CORRUPT("corrupt: term %zu runs past the end", i);
		uint32_t tl = get_u32(p);
		if (tl == 0 || tl > LEX_TERM_MAX ||
		    (size_t)(end - p) < 4 + (size_t)tl + 13)
			CORRUPT("corrupt: term %zu has length %u", i, tl);
		if (memchr(p + 4, '\0', tl))
			CORRUPT("corrupt: term %zu holds a NUL byte", i);
		const unsigned char *str = p + 4;
		p += 4 + tl;
		uint8_t kind = *p++;
		uint32_t rank = get_u32(p);
		uint64_t df = get_u64(p + 4);
		p += 12;
		uint8_t want = i < npl ? IM_LEX_PRIMARY : IM_LEX_SECONDARY;
		uint32_t want_rank = i < npl ? 0 : (uint32_t)(i - npl);
		if (kind != want || rank != want_rank)
			CORRUPT("corrupt: term %zu has kind %u rank %u", i,
				kind, rank);
		if (df < 1 || df > docs)
			CORRUPT("corrupt: term %zu has df %llu", i,
				(unsigned long long)df);
		if (lex_set(lex, i, str, tl, false, kind, rank, df, &nm) < 0)
			CORRUPT("corrupt: term %zu overruns the terms", i);
		/* Signatures hash L in term-number order, which must be byte
		 * order; B must be in rank order (df down, then bytes). */
		if (i > 0 && i != npl) {
			const struct im_lex_term *a = &lex->terms[i - 1];
			const struct im_lex_term *b = &lex->terms[i];
			int c = bytes_cmp(a->str, a->len, b->str, b->len);
			if (i < npl ? c >= 0
				    : (lex->dfs[i - 1] < lex->dfs[i] ||
				       (lex->dfs[i - 1] == lex->dfs[i] &&
					c >= 0)))
				CORRUPT("corrupt: term %zu is out of order", i);
		}
	}
	if (p != end)
		CORRUPT("corrupt: %zu stray bytes after the terms",
			(size_t)(end - p));
	/* Its own lookups check for duplicates while they fill it. */
	lex->indexed = 1;
	r = lex_index(lex, n);
	if (r < 0)
		CORRUPT("corrupt: a term appears twice");
	/* From the bytes read: a second read for the key could see a file
	 * replaced meanwhile, and key a cache to another lexicon. */
	lex->file_key = XXH3_64bits(buf, len);
	*out = lex;
	lex = NULL;
out:
	free(buf);
	im_lexicon_free(lex);
	return r;
}
