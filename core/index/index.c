/**
 * @file index.c
 * The cluster index (contract in index.h).
 *
 * Layout, chosen for memory (the daemon holds 100k+ documents):
 *
 * - docs[]: one record per document (from the index's pool, pool.h: no
 *   malloc header, 8-byte steps, named by a 4-byte handle rather than an
 *   8-byte pointer) holding its fixed fields, its sketch, only its valid
 *   signatures (packed in coordinate order, whole or as
 *   IM_KEY_COORD_LEN-byte prefixes), its smallest signature and its path.
 *   A document's id is its slot in docs[]; free slots have the top bit set
 *   and chain the free list, so ids are reused and never need a second
 *   array.
 * - Open-addressing tables of 4-byte slots (5 bits of a 32-bit hash tag,
 *   a 27-bit value), linear probing, backward-shift deletion (no
 *   tombstones). Keys are never copied into a table: a slot's value leads
 *   to a document that holds the key, and the tag avoids most visits to it.
 *     paths:   path -> document id
 *     keys[0]: exact hash -> posting
 *     keys[1 + k]: signature prefix of coordinate k -> posting
 *     keys[1 + IM_MAX_COORDS + j]: band j's 32 bits -> posting
 *     names:   cluster name -> the root's member entry
 * - A posting is one document id or, when two or more documents
 *   share the key, an index into plists[] with PL_FLAG set, its ids sorted by
 *   path (the hot-key rule compares by rank in that order). Most keys are
 *   held by one document, so most postings cost one table slot only; most
 *   of the others by two (a near-duplicate pair shares a dozen keys), whose
 *   list is those two ids, 8 bytes; three or more take a block.
 * - A cluster (component of two or more) is a circular doubly-linked list of
 *   its members' entries in mem[] (struct member: 16 bytes, only for
 *   documents in a cluster, some 20% of them; the record holds the entry's
 *   index); every member points at the root's entry, and the root's holds
 *   a reference to the signature that names the cluster. mem[] has room for
 *   every document (mapped, so that only the entries ever used take pages):
 *   removal and splits never allocate, im_index_remove() cannot fail, and a
 *   put that fails has changed nothing because everything it needs is
 *   reserved first.
 *
 * Put verifies the document against every holder of its keys that the
 * hot-key rule compares it with and joins the components of those it is
 * linked to (the smaller relabelled into the larger). Links are lost when a
 * document leaves (or changes: the new record comes, the old one leaves) and
 * when a put pushes a document out of a hot key's first HOT; a document moved
 * into them gains links and is connected anew. A component that lost links
 * is reconnected (reconnect()) by searches from the ends of the lost links,
 * run in step, which stop as soon as they have all met: the cost of what
 * changed, not of the component, unless it splits (then the smaller sides
 * are relabelled). Before that, a stand-in (a member that relates to every
 * other as the one that left did: a copy, or a text with the same terms)
 * spares even the searches (leave_as_stand_in()).
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Inlined: a key's hash (4 to 16 bytes) is a few instructions, not a call
 * into libxxhash's general entry for every lookup of every key. */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "index.h"
#include "params.h"
#include "pool.h"

#define NONE	 UINT32_MAX
#define MAX_DOCS (1u << 26)
/* A name reference: the document id shifted left by 2 and what of the
 * document names the cluster (0: its smallest signature; with EXACT_NAME,
 * 0: its exact hash, 1: its sketch); NAME_NONE: none. 31 bits, so that a
 * root's member entry holds it beside MEM_ROOT. */
#define EXACT_NAME (1u << 28)
#define NAME_NONE  0x7fffffffu
#define REF(id, k) ((uint32_t)(id) << 2 | (uint32_t)(k))
#define REF_DOC(r) (((r) & ~EXACT_NAME) >> 2)
#define REF_K(r)   ((r)&3u)
#define NKEYS	   IM_MAX_KEYS
#define HOT	   IM_INDEX_HOT_CAP

/*
 * A document's record: 157 bytes and its tail. What most documents share
 * takes no room: the valid signatures are those of every coordinate below
 * ncoords unless TAIL_VALID says otherwise, their count is valid's
 * population, and whether they are prefixes and whether exact holds a hash
 * are bits of tail. Read them with doc_valid(), doc_nsig(), doc_csz() and
 * doc_exact().
 */
struct doc {
	struct im_sketch sketch; /* first: the only field aligned to 4 */
	uint32_t m;		 /* member entry (struct member), NONE: none */
	uint8_t exact[16];
	uint8_t status, ncoords, format;
	uint8_t least; /* rank of the smallest among the kept signatures */
	uint8_t tail;  /* enum tail_parts: what the tail holds */
	/* The tail, unaligned: valid (4 bytes) if TAIL_VALID; the signatures
	 * of the valid coordinates in coordinate order (doc_csz() bytes
	 * each); if there are any and they are prefixes, the rest of the
	 * smallest one (the cluster name); TAIL_EXTRA's, TAIL_STAT's and
	 * TAIL_NUMBERS's parts if it has them, in that order; then the path. */
	uint8_t coord[];
};

#define DOC_HEAD offsetof(struct doc, coord)
_Static_assert(offsetof(struct doc, coord) == 157, "no padding in records");

/* What a record's tail holds, and two flags. */
enum tail_parts {
	TAIL_EXTRA = 1,	   /* struct doc_extra */
	TAIL_STAT = 2,	   /* struct doc_stat */
	TAIL_VALID = 4,	   /* valid: not every coordinate is signed */
	TAIL_EXACT = 8,	   /* exact holds the bytes' hash (exact_valid) */
	TAIL_PREFIX = 16,  /* signatures kept as IM_KEY_COORD_LEN prefixes */
	TAIL_NUMBERS = 32, /* the figures (im_doc_sigs.numbers), when not 0 */
};

/* unique_terms and err, kept only when unique_terms is not the sketch's n
 * or err is not 0: most documents need neither. */
struct doc_extra {
	uint32_t unique_terms;
	int32_t err;
};

/* The file's size and mtime in the tail. */
struct doc_stat {
	uint64_t size;
	int64_t mtime_ns;
};

/*
 * A member of a cluster, in idx->mem[] (the document's record says which
 * entry, struct doc.m): most documents are in no cluster, so the list and
 * the cluster's name stay out of their records. The members of a cluster
 * form a circular list; one of them, the root, stands for the cluster (its
 * entry is the cluster's id in idx->names) and holds the name. A cluster's
 * size is not kept: who needs it walks the list (a join compares two sizes
 * by walking both lists in step, which costs what relabelling the smaller
 * costs anyway).
 */
struct member {
	uint32_t doc;	     /* document id */
	uint32_t prev, next; /* entries of the cluster's members, circular */
	/* the root's entry; at the root, MEM_ROOT | the name reference;
	 * VISITED | a search while reconnect() rebuilds the cluster */
	uint32_t up;
};

_Static_assert(sizeof(struct member) == 16, "entries fill whole pages");

#define MEM_ROOT (1u << 31)

/*
 * A slot is 32 bits: the low SLOT_TAG_BITS of the key's 32-bit tag on top
 * of a 27-bit value (SLOT_EMPTY: none). The value is a document id, or in a
 * key table a posting: a document id, or PL_FLAG and a list's index. The
 * slot's home comes from the high bits of the whole tag, which the table
 * recomputes from the record the value leads to when it moves slots
 * (growing, erasing): keys are never stored, so neither is it. A probe whose
 * tag bits match by chance (1 in 32) costs one visit to a record. Each key
 * kind and coordinate (or band) has a table of its own, so that a slot need
 * not say which coordinate its document holds the key at. The tables hold
 * some 21 slots per document: each byte of a slot is about 25 bytes per
 * document.
 */
#define SLOT_TAG_BITS 5
#define SLOT_VAL_BITS 27
#define SLOT_VAL_MASK ((1u << SLOT_VAL_BITS) - 1)
#define SLOT_EMPTY    UINT32_MAX
#define PL_FLAG	      (1u << 26)    /* above every document id (MAX_DOCS) */
#define MAX_PLISTS    (PL_FLAG - 1) /* PL_FLAG | MAX_PLISTS is SLOT_EMPTY's */

/* What a table maps, to find a slot's whole tag again (slot_tag()). */
enum tab_kind { TAB_EXACT, TAB_COORD, TAB_BAND, TAB_PATHS, TAB_NAMES };

struct table {
	uint32_t *s;
	uint32_t cap, n;
	uint8_t kind; /* enum tab_kind; the key tables by enum im_key_kind */
	uint8_t k;    /* key tables: the coordinate or band */
};

/* One key table per exact hash, coordinate and band. */
#define NTABLES IM_MAX_KEYS

/*
 * The documents sharing one key, in path order; ids[0] stands for the key.
 * 8 bytes. Most shared keys are shared by two documents (a near-duplicate
 * pair): the entry is their two ids. Three or more live in a block of their
 * own (struct plist_big, a record of the index's pool), whose handle the
 * entry holds with PL_BIG set: a pair's ids are below MAX_DOCS, so that bit
 * (63 of the 64-bit value, in either byte order) is clear in a pair, and bit
 * 62 too, which marks a free entry (its low 32 bits: the next free one).
 * Read entries with pl_n() and pl_ids().
 */
struct plist {
	uint32_t two[2];
};

#define PL_BIG	(1ull << 63)
#define PL_FREE (1ull << 62)

struct plist_big {
	uint32_t n;
	uint16_t epoch;	 /* last reconnect() that walked this list whole */
	uint8_t cap_log; /* capacity 1 << cap_log, at least 4 */
	uint32_t ids[];
};

struct im_index {
	/* const queries take it too: see rdlock() */
	pthread_rwlock_t lock;

	/* everything below is protected by lock */
	uint32_t *docs; /* record handles (docs_take()) */
	uint32_t docs_cap, docs_used, docs_free, ndocs;
	struct table paths, names, keys[NTABLES];
	struct plist *pl;
	uint32_t pl_cap, pl_used, pl_free, pl_nfree;
	/* Cluster members: room for every document (each is in at most one
	 * cluster), so that nothing that joins or splits clusters allocates.
	 * Mapped, not malloc'd: only the pages up to mem_used, the most
	 * entries ever in use, are touched (members are some 20% of the
	 * documents), and growing moves no pages. */
	struct member *mem;
	uint32_t mem_cap, mem_used, mem_free; /* mem_free: chained by next */
	uint16_t epoch; /* of the last reconnect() (plist_big.epoch) */
	size_t clusters;
	uint64_t gen;
	struct im_hpool pool; /* the records */
	double threshold;     /* im_params.similarity */
	size_t csz;	      /* bytes kept per signature */
	bool stat;	      /* records keep size and mtime */
	uint32_t expect;      /* im_index_expect(): documents to come */
};

static inline uint64_t pl_word(const struct plist *pl)
{
	uint64_t v;

	memcpy(&v, pl, sizeof(v));
	return v;
}

static inline void pl_set_word(struct plist *pl, uint64_t v)
{
	memcpy(pl, &v, sizeof(v));
}

/* The block of a list of three or more, or NULL for a pair. */
static inline struct plist_big *pl_big(const struct im_index *idx,
				       const struct plist *pl)
{
	uint64_t v = pl_word(pl);

	return v & PL_BIG ? im_hpool_at(&idx->pool, (uint32_t)v) : NULL;
}

/* Bytes of a block of capacity 1 << @p cap_log. */
static inline size_t pl_big_size(unsigned cap_log)
{
	return sizeof(struct plist_big) + ((size_t)1 << cap_log) * 4;
}

static inline uint32_t pl_n(const struct im_index *idx, const struct plist *pl)
{
	const struct plist_big *b = pl_big(idx, pl);

	return b ? b->n : 2;
}

static inline uint32_t *pl_ids(const struct im_index *idx,
			       const struct plist *pl)
{
	struct plist_big *b = pl_big(idx, pl);

	return b ? b->ids : (uint32_t *)pl->two;
}

/* A candidate key of a document (see im_doc_keys()): b points into the
 * record, key_len(kind) bytes. */
struct key {
	uint8_t kind; /* enum im_key_kind */
	uint8_t k;
	const uint8_t *b;
};

static inline size_t key_len(unsigned kind)
{
	return kind == IM_KEY_EXACT   ? 16
	       : kind == IM_KEY_COORD ? IM_KEY_COORD_LEN
				      : IM_SKETCH_BAND_BYTES;
}

/* ---- Records ------------------------------------------------------------- */

static inline struct doc *D(const struct im_index *idx, uint32_t id)
{
	return im_hpool_at(&idx->pool, idx->docs[id]);
}

/* Bytes of the tail before the stat: the signatures and the rest of the
 * smallest one. */
static inline size_t sig_bytes(unsigned nsig, unsigned csz)
{
	return nsig * csz + (nsig ? IM_SIG_LEN - csz : 0);
}

static inline uint32_t coord_mask(unsigned ncoords)
{
	return ncoords >= 32 ? UINT32_MAX : (1u << ncoords) - 1;
}

/* Bit k set: coordinate k's signature is kept. */
static inline uint32_t doc_valid(const struct doc *d)
{
	uint32_t v;

	if (!(d->tail & TAIL_VALID))
		return coord_mask(d->ncoords);
	memcpy(&v, d->coord, sizeof(v));
	return v;
}

static inline unsigned doc_nsig(const struct doc *d)
{
	return (unsigned)__builtin_popcount(doc_valid(d));
}

/* Bytes kept per signature. */
static inline unsigned doc_csz(const struct doc *d)
{
	return d->tail & TAIL_PREFIX ? IM_KEY_COORD_LEN : IM_SIG_LEN;
}

static inline bool doc_exact(const struct doc *d)
{
	return d->tail & TAIL_EXACT;
}

/* The first kept signature. */
static inline const uint8_t *doc_sigs(const struct doc *d)
{
	return d->coord + (d->tail & TAIL_VALID ? sizeof(uint32_t) : 0);
}

static inline uint8_t *doc_extra(const struct doc *d)
{
	return (uint8_t *)doc_sigs(d) + sig_bytes(doc_nsig(d), doc_csz(d));
}

static inline uint8_t *doc_stat(const struct doc *d)
{
	return doc_extra(d) +
	       (d->tail & TAIL_EXTRA ? sizeof(struct doc_extra) : 0);
}

static inline uint8_t *doc_numbers(const struct doc *d)
{
	return doc_stat(d) +
	       (d->tail & TAIL_STAT ? sizeof(struct doc_stat) : 0);
}

/* Bytes of the tail's optional parts. */
static inline size_t tail_bytes(unsigned tail)
{
	return (tail & TAIL_EXTRA ? sizeof(struct doc_extra) : 0) +
	       (tail & TAIL_STAT ? sizeof(struct doc_stat) : 0) +
	       (tail & TAIL_NUMBERS ? sizeof(uint64_t) : 0);
}

static struct doc_extra doc_extra_get(const struct doc *d)
{
	struct doc_extra x = {d->sketch.n, 0};

	if (d->tail & TAIL_EXTRA)
		memcpy(&x, doc_extra(d), sizeof(x));
	return x;
}

static inline char *doc_path(const struct doc *d)
{
	return (char *)doc_numbers(d) +
	       (d->tail & TAIL_NUMBERS ? sizeof(uint64_t) : 0);
}

/* The smallest signature of @p d, which has one: its kept bytes, then the
 * rest from after the signatures. */
static void doc_least(const struct doc *d, struct im_sig *out)
{
	unsigned csz = doc_csz(d);

	memcpy(out->b, doc_sigs(d) + d->least * csz, csz);
	memcpy(out->b + csz, doc_sigs(d) + doc_nsig(d) * csz, IM_SIG_LEN - csz);
}

static inline bool has_text(uint8_t status)
{
	return status == IM_DOC_SIGNED || status == IM_DOC_REJECTED;
}

/* Texts relate by their terms; every other file with a hash (binary, or an
 * extraction that failed) by its bytes alone: the exact-copy tier. */
static inline bool relating(const struct doc *d)
{
	return has_text(d->status) ||
	       ((d->status == IM_DOC_BINARY || d->status == IM_DOC_FAILED) &&
		doc_exact(d));
}

/* Prefix of coordinate k's signature, which must be valid. */
static inline const uint8_t *doc_sig(const struct doc *d, unsigned k)
{
	return doc_sigs(d) +
	       __builtin_popcount(doc_valid(d) & ((1u << k) - 1)) * doc_csz(d);
}

static inline const uint8_t *band_bytes(const struct im_sketch *sk, unsigned j)
{
	return sk->v + j * IM_SKETCH_BAND_BYTES;
}

/* Keys in a fixed order (im_doc_keys()): the exact hash, coordinates
 * ascending, bands ascending. */
static unsigned doc_keys(const struct doc *d, struct key *out)
{
	unsigned n = 0, csz = doc_csz(d);
	const uint8_t *sig = doc_sigs(d);
	uint32_t valid = doc_valid(d);

	if (!relating(d))
		return 0;
	if (doc_exact(d))
		out[n++] = (struct key){IM_KEY_EXACT, 0, d->exact};
	for (unsigned k = 0; k < d->ncoords; k++)
		if (valid & (1u << k)) {
			out[n++] = (struct key){IM_KEY_COORD, k, sig};
			sig += csz;
		}
	if (d->sketch.n)
		for (unsigned j = 0; j < IM_SKETCH_BANDS; j++)
			out[n++] = (struct key){IM_KEY_BAND, j,
						band_bytes(&d->sketch, j)};
	return n;
}

static bool doc_has_key(const struct doc *d, const struct key *key)
{
	if (!relating(d))
		return false;
	switch (key->kind) {
	case IM_KEY_EXACT: return doc_exact(d) && !memcmp(d->exact, key->b, 16);
	case IM_KEY_COORD:
		return (doc_valid(d) & (1u << key->k)) &&
		       !memcmp(doc_sig(d, key->k), key->b, IM_KEY_COORD_LEN);
	default:
		return d->sketch.n && !memcmp(band_bytes(&d->sketch, key->k),
					      key->b, IM_SKETCH_BAND_BYTES);
	}
}

/* The pair rule of im_doc_link(), on records; *sim is the similarity of
 * a linked pair only (0 for any other). */
static bool verify(const struct im_index *idx, const struct doc *a,
		   const struct doc *b, double *sim, bool *exact)
{
	*exact = false;
	*sim = 0.0;
	if (!relating(a) || !relating(b))
		return false;
	if (doc_exact(a) && doc_exact(b) && !memcmp(a->exact, b->exact, 16)) {
		*exact = true;
		*sim = 1.0;
		return true;
	}
	if (!has_text(a->status) || !has_text(b->status))
		return false;
	return im_sketch_similar(&a->sketch, &b->sketch, idx->threshold, sim);
}

/* Bytes of record @p d, its path included (what im_hpool_get() gave). */
static size_t rec_size(const struct doc *d)
{
	const char *path = doc_path(d);

	return (size_t)(path - (const char *)d) + strlen(path) + 1;
}

/* Give back record @p d, whose handle is @p h. */
static void rec_free(struct im_index *idx, struct doc *d, uint32_t h)
{
	im_hpool_put(&idx->pool, h, rec_size(d));
}

/* A new record, its handle in *h; NULL when out of memory. */
static struct doc *rec_new(struct im_index *idx, const char *path,
			   const struct im_doc_sigs *s, uint32_t *h)
{
	size_t csz = idx->csz;
	uint32_t valid = s->valid & coord_mask(s->ncoords);
	unsigned tail =
		(idx->stat ? TAIL_STAT : 0) |
		(s->err || s->unique_terms != s->sketch.n ? TAIL_EXTRA : 0) |
		(valid != coord_mask(s->ncoords) ? TAIL_VALID : 0) |
		(s->exact_valid ? TAIL_EXACT : 0) |
		(csz == IM_KEY_COORD_LEN ? TAIL_PREFIX : 0) |
		(s->numbers ? TAIL_NUMBERS : 0);
	unsigned nsig = __builtin_popcount(valid), i = 0;
	const struct im_sig *least = NULL;
	size_t len = strlen(path);
	struct doc *d;
	uint8_t *sig;

	d = im_hpool_get(&idx->pool,
			 DOC_HEAD + (tail & TAIL_VALID ? sizeof(valid) : 0) +
				 sig_bytes(nsig, csz) + tail_bytes(tail) + len +
				 1,
			 h);
	if (!d)
		return NULL;
	d->m = NONE;
	d->status = s->status;
	d->ncoords = s->ncoords;
	d->format = s->format;
	d->least = 0;
	d->tail = tail;
	if (tail & TAIL_VALID)
		memcpy(d->coord, &valid, sizeof(valid));
	memcpy(d->exact, s->exact, sizeof(d->exact));
	d->sketch = s->sketch;
	sig = (uint8_t *)doc_sigs(d);
	for (unsigned k = 0; k < s->ncoords; k++) {
		if (!(valid & (1u << k)))
			continue;
		if (!least || memcmp(s->sig[k].b, least->b, IM_SIG_LEN) < 0) {
			least = &s->sig[k];
			d->least = (uint8_t)i;
		}
		memcpy(sig + csz * i++, s->sig[k].b, csz);
	}
	if (least)
		memcpy(sig + nsig * csz, least->b + csz, IM_SIG_LEN - csz);
	if (tail & TAIL_EXTRA)
		memcpy(doc_extra(d),
		       &(struct doc_extra){.unique_terms = s->unique_terms,
					   .err = s->err},
		       sizeof(struct doc_extra));
	if (tail & TAIL_STAT)
		memcpy(doc_stat(d),
		       &(struct doc_stat){.size = s->size,
					  .mtime_ns = s->mtime_ns},
		       sizeof(struct doc_stat));
	if (tail & TAIL_NUMBERS)
		memcpy(doc_numbers(d), &s->numbers, sizeof(s->numbers));
	memcpy(doc_path(d), path, len + 1);
	return d;
}

/* A copy of @p od under another path, in no posting or cluster. */
static struct doc *rec_copy(struct im_index *idx, const struct doc *od,
			    const char *path, uint32_t *h)
{
	size_t hdr = (size_t)(doc_path(od) - (const char *)od);
	size_t len = strlen(path);
	struct doc *d = im_hpool_get(&idx->pool, hdr + len + 1, h);

	if (!d)
		return NULL;
	memcpy(d, od, hdr);
	memcpy(doc_path(d), path, len + 1);
	d->m = NONE;
	return d;
}

static void rec_export(const struct doc *d, struct im_doc_sigs *s)
{
	unsigned i = 0;

	memset(s, 0, sizeof(*s));
	s->status = d->status;
	s->ncoords = d->ncoords;
	s->exact_valid = doc_exact(d);
	s->format = d->format;
	s->err = doc_extra_get(d).err;
	s->valid = doc_valid(d);
	s->unique_terms = doc_extra_get(d).unique_terms;
	memcpy(s->exact, d->exact, sizeof(s->exact));
	if (d->tail & TAIL_STAT) {
		struct doc_stat st;

		memcpy(&st, doc_stat(d), sizeof(st));
		s->size = st.size;
		s->mtime_ns = st.mtime_ns;
	}
	if (d->tail & TAIL_NUMBERS)
		memcpy(&s->numbers, doc_numbers(d), sizeof(s->numbers));
	s->sketch = d->sketch;
	for (unsigned k = 0; k < d->ncoords; k++)
		if (s->valid & (1u << k))
			memcpy(s->sig[k].b, doc_sigs(d) + doc_csz(d) * i++,
			       doc_csz(d));
}

/* Do a and b relate to other documents in exactly the same way? */
static bool same_keys(const struct doc *a, const struct doc *b)
{
	if (relating(a) != relating(b))
		return false;
	if (!relating(a))
		return true;
	return doc_valid(a) == doc_valid(b) && doc_exact(a) == doc_exact(b) &&
	       (!doc_exact(a) || !memcmp(a->exact, b->exact, 16)) &&
	       !memcmp(&a->sketch, &b->sketch, sizeof(a->sketch)) &&
	       doc_csz(a) == doc_csz(b) && a->least == b->least &&
	       !memcmp(doc_sigs(a), doc_sigs(b),
		       sig_bytes(doc_nsig(a), doc_csz(a)));
}

static bool same_content(const struct doc *a, const struct doc *b)
{
	/* Equal tails (flags and parts) lay out equal bytes alike. */
	return a->status == b->status && a->ncoords == b->ncoords &&
	       a->format == b->format && a->tail == b->tail &&
	       !memcmp(a->exact, b->exact, 16) &&
	       !memcmp(&a->sketch, &b->sketch, sizeof(a->sketch)) &&
	       a->least == b->least &&
	       !memcmp(a->coord, b->coord,
		       (size_t)(doc_extra(a) - a->coord) + tail_bytes(a->tail));
}

/* ---- Open-addressing tables ---------------------------------------------- */

static inline uint32_t tab_val(const struct table *t, uint32_t i)
{
	return t->s[i] == SLOT_EMPTY ? NONE : t->s[i] & SLOT_VAL_MASK;
}

/* Do the tag bits of slot @p i match @p tag? (The low bits: the high ones
 * chose the home, so neighbours tend to share them.) */
static inline bool tab_tag_is(const struct table *t, uint32_t i, uint32_t tag)
{
	return t->s[i] >> SLOT_VAL_BITS == (tag & ((1u << SLOT_TAG_BITS) - 1));
}

static inline void slot_set(uint32_t *s, uint32_t tag, uint32_t val)
{
	*s = (tag & ((1u << SLOT_TAG_BITS) - 1)) << SLOT_VAL_BITS | val;
}

static inline void tab_set_val(struct table *t, uint32_t i, uint32_t val)
{
	t->s[i] = (t->s[i] & ~SLOT_VAL_MASK) | val;
}

static inline uint32_t tab_home(const struct table *t, uint32_t tag)
{
	return (uint32_t)(((uint64_t)tag * t->cap) >> 32);
}

static inline uint32_t tab_next(const struct table *t, uint32_t i)
{
	return i + 1 == t->cap ? 0 : i + 1;
}

static uint32_t slot_tag(const struct im_index *idx, const struct table *t,
			 uint32_t val);

/* Insert at the empty slot @p i, where a probe for @p tag ends. */
static void tab_insert_at(struct table *t, uint32_t i, uint32_t tag,
			  uint32_t val)
{
	slot_set(&t->s[i], tag, val);
	t->n++;
}

/* Insert without growing: the caller reserved room. */
static void tab_insert(struct table *t, uint32_t tag, uint32_t val)
{
	uint32_t i = tab_home(t, tag);

	while (tab_val(t, i) != NONE)
		i = tab_next(t, i);
	tab_insert_at(t, i, tag, val);
}

/* Room for @p extra more entries at load 0.9 or less. */
static int tab_reserve(const struct im_index *idx, struct table *t,
		       uint32_t extra)
{
	uint64_t need = (uint64_t)t->n + extra, cap = t->cap;
	/* A cluster per two documents at most (reserve_put()). */
	uint64_t expect =
		t->kind == TAB_NAMES ? idx->expect / 2 + 1 : idx->expect;
	struct table nt;

	if (need * 10 <= cap * 9)
		return 0;
	if (cap < 16)
		cap = 16;
	/* Each step reads the record of every entry to rehash it: grow to
	 * what is expected at once. */
	if (need < expect)
		need = expect;
	while (need * 10 > cap * 9)
		cap += cap / 4;
	if (cap > UINT32_MAX / 2)
		return -ENOMEM;
	nt.cap = (uint32_t)cap;
	nt.n = 0;
	nt.kind = t->kind;
	nt.k = t->k;
	nt.s = malloc(cap * sizeof(*nt.s));
	if (!nt.s)
		return -ENOMEM;
	memset(nt.s, 0xff, cap * sizeof(*nt.s));
	for (uint32_t i = 0; i < t->cap; i++) {
		uint32_t val = tab_val(t, i);

		if (val != NONE)
			tab_insert(&nt, slot_tag(idx, t, val), val);
	}
	free(t->s);
	*t = nt;
	return 0;
}

static void tab_erase(const struct im_index *idx, struct table *t, uint32_t i)
{
	uint32_t j = i;

	for (;;) {
		uint32_t h, val;
		bool stays;

		j = tab_next(t, j);
		val = tab_val(t, j);
		if (val == NONE)
			break;
		/* s[j] may fill the hole at i unless its home lies in (i, j]. */
		h = tab_home(t, slot_tag(idx, t, val));
		stays = i <= j ? (h > i && h <= j) : (h > i || h <= j);
		if (!stays) {
			t->s[i] = t->s[j];
			i = j;
		}
	}
	t->s[i] = SLOT_EMPTY;
	t->n--;
}

static uint32_t tab_find_val(const struct table *t, uint32_t tag, uint32_t val)
{
	for (uint32_t i = tab_home(t, tag);; i = tab_next(t, i)) {
		uint32_t v = tab_val(t, i);

		if (v == NONE)
			return NONE;
		if (v == val)
			return i;
	}
}

/* ---- Paths --------------------------------------------------------------- */

static uint32_t path_tag(const char *path)
{
	return (uint32_t)XXH3_64bits(path, strlen(path));
}

/* Slot of @p path in idx->paths, or NONE. */
static uint32_t path_slot(const struct im_index *idx, const char *path)
{
	const struct table *t = &idx->paths;
	uint32_t tag;

	if (!t->n)
		return NONE;
	tag = path_tag(path);
	for (uint32_t i = tab_home(t, tag);; i = tab_next(t, i)) {
		uint32_t val = tab_val(t, i);

		if (val == NONE)
			return NONE;
		if (tab_tag_is(t, i, tag) &&
		    !strcmp(doc_path(D(idx, val)), path))
			return i;
	}
}

static uint32_t path_find(const struct im_index *idx, const char *path)
{
	uint32_t i = path_slot(idx, path);

	return i == NONE ? NONE : tab_val(&idx->paths, i);
}

/* ---- Postings ------------------------------------------------------------ */

static uint32_t key_tag(const struct key *key)
{
	return (uint32_t)XXH3_64bits_withSeed(key->b, key_len(key->kind),
					      key->kind << 8 | key->k);
}

static inline struct table *key_table(const struct im_index *idx,
				      const struct key *key)
{
	unsigned i = key->kind == IM_KEY_EXACT	 ? 0
		     : key->kind == IM_KEY_COORD ? 1 + key->k
						 : 1 + IM_MAX_COORDS + key->k;

	return (struct table *)&idx->keys[i];
}

/* First document of a posting. */
static uint32_t posting_first(const struct im_index *idx, uint32_t val)
{
	return val & PL_FLAG ? pl_ids(idx, &idx->pl[val & ~PL_FLAG])[0] : val;
}

/* Slot of @p key's posting, or NONE; then in *@p empty (if not NULL) the
 * slot where the key would go, where tab_insert() would put it. The table
 * must have room for one more. */
static uint32_t posting_find(const struct im_index *idx, const struct key *key,
			     uint32_t tag, uint32_t *empty)
{
	const struct table *t = key_table(idx, key);
	uint32_t i = tab_home(t, tag);

	for (; t->n; i = tab_next(t, i)) {
		uint32_t val = tab_val(t, i);

		if (val == NONE)
			break;
		if (tab_tag_is(t, i, tag) &&
		    doc_has_key(D(idx, posting_first(idx, val)), key))
			return i;
	}
	if (empty)
		*empty = i;
	return NONE;
}

/* Slot of @p key's posting, or NONE. */
static uint32_t posting_slot(const struct im_index *idx, const struct key *key,
			     uint32_t tag)
{
	return key_table(idx, key)->n ? posting_find(idx, key, tag, NULL)
				      : NONE;
}

/*
 * The new lists a put will take (room reserved in idx->pl before it
 * commits), and how many it took; the document's keys, their tags and
 * their posting slots (NONE: a new key, which goes to the empty slot
 * empty[i] the lookup ended at), found once by reserve_put(). The slots
 * stay right until insert_doc() is done with them: every key of a
 * document is in a table of its own, which only its own insertion changes.
 */
struct spare {
	unsigned n, used;
	unsigned nkeys;
	struct key keys[NKEYS];
	uint32_t tags[NKEYS], slots[NKEYS], empty[NKEYS];
};

static uint32_t plist_take(struct im_index *idx)
{
	uint32_t p;

	if (idx->pl_free != NONE) {
		p = idx->pl_free;
		idx->pl_free = (uint32_t)pl_word(&idx->pl[p]);
		idx->pl_nfree--;
	} else {
		p = idx->pl_used++;
	}
	return p;
}

static void plist_release(struct im_index *idx, uint32_t p)
{
	struct plist_big *b = pl_big(idx, &idx->pl[p]);

	if (b)
		im_hpool_put(&idx->pool, (uint32_t)pl_word(&idx->pl[p]),
			     pl_big_size(b->cap_log));
	pl_set_word(&idx->pl[p], PL_FREE | idx->pl_free);
	idx->pl_free = p;
	idx->pl_nfree++;
}

/* Posting order: by path, then id (a replacement briefly shares its path
 * with the record it replaces). */
static int doc_order(const struct im_index *idx, uint32_t a, uint32_t b)
{
	int c = strcmp(doc_path(D(idx, a)), doc_path(D(idx, b)));

	return c ? c : (a > b) - (a < b);
}

/* Where @p id is, or would go, in @p pl. */
static uint32_t plist_rank(const struct im_index *idx, const struct plist *pl,
			   uint32_t id)
{
	uint32_t lo = 0, hi = pl_n(idx, pl);

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (doc_order(idx, pl_ids(idx, pl)[mid], id) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * Add @p id to the posting of @p key, at slot @p i (NONE: a new key, for
 * the empty slot @p empty).
 * @return the document that thereby lost its place among the first HOT of a
 * near key (its pairs with the members past HOT are no longer compared), or
 * NONE.
 */
static uint32_t posting_add(struct im_index *idx, const struct key *key,
			    uint32_t tag, uint32_t i, uint32_t empty,
			    uint32_t id, struct spare *sp)
{
	struct table *t = key_table(idx, key);
	uint32_t val, p, r;
	struct plist *pl;

	if (i == NONE) {
		tab_insert_at(t, empty, tag, id);
		return NONE;
	}
	val = tab_val(t, i);
	if (val & PL_FLAG) {
		/* reserve_put() made it a block with room */
		struct plist_big *b = pl_big(idx, &idx->pl[val & ~PL_FLAG]);

		r = plist_rank(idx, &idx->pl[val & ~PL_FLAG], id);
		memmove(b->ids + r + 1, b->ids + r,
			(b->n - r) * sizeof(*b->ids));
		b->ids[r] = id;
		b->n++;
		if (key->kind != IM_KEY_EXACT && r < HOT && b->n > HOT)
			return b->ids[HOT];
		return NONE;
	}
	p = plist_take(idx);
	pl = &idx->pl[p];
	sp->used++;
	pl->two[0] = val;
	pl->two[1] = id;
	if (doc_order(idx, id, val) < 0) {
		pl->two[0] = id;
		pl->two[1] = val;
	}
	tab_set_val(t, i, PL_FLAG | p);
	return NONE;
}

/*
 * Remove @p id from the posting of @p key, which holds it.
 * @return the document that thereby moved into the first HOT of a near key
 * (it is now compared with every member), or NONE.
 */
static uint32_t posting_del(struct im_index *idx, const struct key *key,
			    uint32_t id)
{
	struct table *t = key_table(idx, key);
	uint32_t i = posting_slot(idx, key, key_tag(key)), val, p, r;
	uint32_t promoted = NONE;
	struct plist_big *b;
	struct plist *pl;

	val = tab_val(t, i);
	if (!(val & PL_FLAG)) {
		tab_erase(idx, t, i);
		return NONE;
	}
	p = val & ~PL_FLAG;
	pl = &idx->pl[p];
	b = pl_big(idx, pl);
	if (!b) {
		/* A pair: the other holder keeps the key alone. */
		tab_set_val(t, i, pl->two[pl->two[0] == id]);
		plist_release(idx, p);
		return NONE;
	}
	r = plist_rank(idx, pl, id);
	if (key->kind != IM_KEY_EXACT && r < HOT && b->n > HOT)
		promoted = b->ids[HOT];
	b->n--;
	memmove(b->ids + r, b->ids + r + 1, (b->n - r) * sizeof(uint32_t));
	if (b->n == 1) {
		/* A list of two stays a block: a remove never allocates. */
		tab_set_val(t, i, b->ids[0]);
		plist_release(idx, p);
	}
	return promoted;
}

/* ---- Cluster members ----------------------------------------------------- */

static inline struct member *M(const struct im_index *idx, uint32_t e)
{
	return &idx->mem[e];
}

/* The root entry of the cluster holding document @p id, NONE when it is in
 * none (not during a reconnect() of that cluster). */
static inline uint32_t comp_of(const struct im_index *idx, uint32_t id)
{
	uint32_t e = D(idx, id)->m, up;

	if (e == NONE)
		return NONE;
	up = M(idx, e)->up;
	return up & MEM_ROOT ? e : up;
}

/* The name reference of the cluster rooted at entry @p root. */
static inline uint32_t root_name(const struct im_index *idx, uint32_t root)
{
	return M(idx, root)->up & ~MEM_ROOT;
}

/* Room for an entry per document, @p ndocs of them. */
static int mem_reserve(struct im_index *idx, uint64_t ndocs)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), old, len;
	uint64_t cap = idx->mem_cap;
	void *p;

	if (ndocs <= cap)
		return 0;
	while (cap < ndocs)
		cap = cap < 1024 ? 1024 : cap + cap / 2;
	if (cap > MAX_DOCS)
		cap = MAX_DOCS;
	len = (cap * sizeof(struct member) + page - 1) / page * page;
	/* mem_cap fills whole pages: see below */
	old = (size_t)idx->mem_cap * sizeof(struct member);
	if (idx->mem)
		p = mremap(idx->mem, old, len, MREMAP_MAYMOVE);
	else
		p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -ENOMEM;
	idx->mem = p;
	idx->mem_cap = (uint32_t)(len / sizeof(struct member));
	return 0;
}

/* A new entry for document @p id (reserved: never fails), alone in its
 * list; the caller sets up. */
static uint32_t mem_take(struct im_index *idx, uint32_t id)
{
	uint32_t e = idx->mem_free;

	if (e != NONE)
		idx->mem_free = M(idx, e)->next;
	else
		e = idx->mem_used++;
	M(idx, e)->doc = id;
	M(idx, e)->prev = M(idx, e)->next = e;
	D(idx, id)->m = e;
	return e;
}

/* Give back entry @p e, out of every list: its document is in no cluster. */
static void mem_release(struct im_index *idx, uint32_t e)
{
	D(idx, M(idx, e)->doc)->m = NONE;
	M(idx, e)->next = idx->mem_free;
	idx->mem_free = e;
}

/* ---- Cluster names ------------------------------------------------------- */

static void name_of_ref(const struct im_index *idx, uint32_t ref,
			struct im_sig *out)
{
	const struct doc *d = D(idx, REF_DOC(ref));

	if (ref & EXACT_NAME) {
		const uint8_t *h = d->exact;
		XXH128_canonical_t c;

		if (REF_K(ref) == 1) {
			/* Neither signature nor bytes: the sketch names it. */
			XXH128_canonicalFromHash(
				&c,
				XXH3_128bits(&d->sketch, sizeof(d->sketch)));
			h = c.digest;
		}
		memcpy(out->b, h, 16);
		memset(out->b + 16, 0, IM_SIG_LEN - 16);
	} else {
		doc_least(d, out);
	}
}

/* The better name of two references (NAME_NONE loses): any signature beats
 * an exact hash, then memcmp order. */
static uint32_t name_min(const struct im_index *idx, uint32_t a, uint32_t b)
{
	struct im_sig na, nb;

	if (a == NAME_NONE)
		return b;
	if (b == NAME_NONE)
		return a;
	if ((a & EXACT_NAME) != (b & EXACT_NAME))
		return (a & EXACT_NAME) ? b : a;
	name_of_ref(idx, a, &na);
	name_of_ref(idx, b, &nb);
	return memcmp(na.b, nb.b, IM_SIG_LEN) <= 0 ? a : b;
}

/* The name a document would give a cluster of its own, or NAME_NONE. */
static uint32_t doc_name(const struct im_index *idx, uint32_t id)
{
	const struct doc *d = D(idx, id);

	if (!relating(d))
		return NAME_NONE;
	if (doc_valid(d))
		return REF(id, 0);
	if (doc_exact(d))
		return EXACT_NAME | REF(id, 0);
	return d->sketch.n ? (EXACT_NAME | REF(id, 1)) : NAME_NONE;
}

/*
 * Verification can leave two clusters with the same smallest signature (two
 * documents that share coordinates but not their terms, each linked to
 * others). The one whose smallest member path comes first keeps the name;
 * the others count the bytes after NAME_KEY up by their rank in that order.
 * The table's tags hash the bytes before those, so that every cluster of a
 * name, and every rank of it, is found from one home.
 */
#define NAME_KEY IM_NAME_GROUP_LEN

static uint32_t name_tag(const struct im_sig *name)
{
	return (uint32_t)XXH3_64bits(name->b, NAME_KEY);
}

static void names_add(struct im_index *idx, uint32_t root)
{
	struct im_sig name;

	name_of_ref(idx, root_name(idx, root), &name);
	tab_insert(&idx->names, name_tag(&name), root);
}

/* Call before the root's name reference changes or its documents go. */
static void names_del(struct im_index *idx, uint32_t root)
{
	struct im_sig name;

	name_of_ref(idx, root_name(idx, root), &name);
	tab_erase(idx, &idx->names,
		  tab_find_val(&idx->names, name_tag(&name), root));
}

static inline const char *mem_path(const struct im_index *idx, uint32_t e)
{
	return doc_path(D(idx, M(idx, e)->doc));
}

/* The smallest member path of the cluster rooted at @p root. */
static const char *least_path(const struct im_index *idx, uint32_t root)
{
	const char *least = mem_path(idx, root);

	for (uint32_t y = M(idx, root)->next; y != root; y = M(idx, y)->next)
		if (strcmp(mem_path(idx, y), least) < 0)
			least = mem_path(idx, y);
	return least;
}

/* The name the cluster rooted at @p root goes by: its own name, with its
 * rank among the clusters of that name added (after NAME_KEY). */
static void public_name(const struct im_index *idx, uint32_t root,
			struct im_sig *out)
{
	const struct table *t = &idx->names;
	const char *least = NULL;
	uint32_t tag, rank = 0, val;
	struct im_sig n;

	name_of_ref(idx, root_name(idx, root), out);
	tag = name_tag(out);
	for (uint32_t i = tab_home(t, tag); (val = tab_val(t, i)) != NONE;
	     i = tab_next(t, i)) {
		if (val == root || !tab_tag_is(t, i, tag))
			continue;
		name_of_ref(idx, root_name(idx, val), &n);
		if (memcmp(n.b, out->b, IM_SIG_LEN))
			continue;
		if (!least)
			least = least_path(idx, root);
		rank += strcmp(least_path(idx, val), least) < 0;
	}
	/* Big-endian addition over the bytes after NAME_KEY. */
	for (int b = IM_SIG_LEN - 1; rank && b >= NAME_KEY; b--) {
		rank += out->b[b];
		out->b[b] = (uint8_t)rank;
		rank >>= 8;
	}
}

static uint32_t names_find(const struct im_index *idx,
			   const struct im_sig *name)
{
	const struct table *t = &idx->names;
	uint32_t tag;

	if (!t->n)
		return NONE;
	tag = name_tag(name);
	for (uint32_t i = tab_home(t, tag);; i = tab_next(t, i)) {
		uint32_t val = tab_val(t, i);
		struct im_sig n;

		if (val == NONE)
			return NONE;
		if (!tab_tag_is(t, i, tag))
			continue;
		name_of_ref(idx, root_name(idx, val), &n);
		if (memcmp(n.b, name->b, NAME_KEY))
			continue;
		public_name(idx, val, &n);
		if (!memcmp(n.b, name->b, IM_SIG_LEN))
			return val;
	}
}

/* The whole tag of the entry @p val of @p t, from the record it leads to
 * (records never change their keys, path or names while in a table). */
static uint32_t slot_tag(const struct im_index *idx, const struct table *t,
			 uint32_t val)
{
	struct im_sig name;
	struct key key;
	const struct doc *d;

	switch (t->kind) {
	case TAB_PATHS: return path_tag(doc_path(D(idx, val)));
	case TAB_NAMES:
		name_of_ref(idx, root_name(idx, val), &name);
		return name_tag(&name);
	default:
		d = D(idx, posting_first(idx, val));
		key.kind = t->kind;
		key.k = t->k;
		key.b = t->kind == TAB_EXACT   ? d->exact
			: t->kind == TAB_COORD ? doc_sig(d, t->k)
					       : band_bytes(&d->sketch, t->k);
		return key_tag(&key);
	}
}

/* ---- Components ---------------------------------------------------------- */

/* Put entry @p e, in no list, into the circular list after @p at. */
static void list_link(struct im_index *idx, uint32_t at, uint32_t e)
{
	struct member *a = M(idx, at), *m = M(idx, e);

	m->prev = at;
	m->next = a->next;
	M(idx, a->next)->prev = e;
	a->next = e;
}

/* Take entry @p e out of its list, leaving it alone in one. */
static void list_unlink(struct im_index *idx, uint32_t e)
{
	struct member *m = M(idx, e);

	M(idx, m->prev)->next = m->next;
	M(idx, m->next)->prev = m->prev;
	m->prev = m->next = e;
}

/* Another entry of @p e's list, or NONE when it is alone. */
static inline uint32_t list_rest(const struct im_index *idx, uint32_t e)
{
	return M(idx, e)->next == e ? NONE : M(idx, e)->next;
}

/* Join two disjoint circular lists. */
static void list_splice(struct im_index *idx, uint32_t a, uint32_t b)
{
	struct member *ma = M(idx, a), *mb = M(idx, b);
	uint32_t an = ma->next, bp = mb->prev;

	ma->next = b;
	mb->prev = a;
	M(idx, bp)->next = an;
	M(idx, an)->prev = bp;
}

/* Is the list of @p b longer than that of @p a? Walks both in step: the
 * cost of the shorter. */
static bool list_longer(const struct im_index *idx, uint32_t a, uint32_t b)
{
	uint32_t x = M(idx, a)->next, y = M(idx, b)->next;

	while (x != a && y != b) {
		x = M(idx, x)->next;
		y = M(idx, y)->next;
	}
	return x == a && y != b;
}

/* The shared posting list at slot @p sl of @p key's table, or NULL when one
 * document holds the key. */
static struct plist *slot_plist(const struct im_index *idx,
				const struct key *key, uint32_t sl)
{
	uint32_t val = tab_val(key_table(idx, key), sl);

	return val & PL_FLAG ? &idx->pl[val & ~PL_FLAG] : NULL;
}

/* The shared posting list of @p key, or NULL when one document holds it. */
static struct plist *key_plist(const struct im_index *idx,
			       const struct key *key)
{
	return slot_plist(idx, key, posting_slot(idx, key, key_tag(key)));
}

/* Whether @p id, a holder of @p pl (or one that left it), is (or was) among
 * its first HOT, @p pl holding more: one comparison with the HOT-th holder,
 * not a search for its rank (queries ask for every link). */
static bool in_first_hot(const struct im_index *idx, const struct plist *pl,
			 uint32_t id)
{
	return doc_order(idx, id, pl_ids(idx, pl)[HOT - 1]) <= 0;
}

/* The members of @p pl compared with @p id (at its rank): ids[0..end). */
static uint32_t compared_end(const struct im_index *idx, const struct key *key,
			     const struct plist *pl, uint32_t id)
{
	if (key->kind == IM_KEY_EXACT || pl_n(idx, pl) <= HOT ||
	    in_first_hot(idx, pl, id))
		return pl_n(idx, pl);
	return HOT;
}

/* Give document @p x, in no cluster, one of its own; a member follows.
 * @return its root entry. */
static uint32_t cluster_new(struct im_index *idx, uint32_t x)
{
	uint32_t e = mem_take(idx, x);

	M(idx, e)->up = MEM_ROOT | doc_name(idx, x);
	names_add(idx, e);
	idx->clusters++;
	return e;
}

/* @p x and @p y are linked: one component from now on. */
static void join(struct im_index *idx, uint32_t x, uint32_t y)
{
	uint32_t cx = comp_of(idx, x), cy = comp_of(idx, y), tmp, name, e;

	if (cx != NONE && cx == cy)
		return;
	if (cx == NONE && cy == NONE)
		cx = cluster_new(idx, x);
	if (cx == NONE) {
		cx = cy;
		cy = NONE;
		y = x;
	}
	names_del(idx, cx);
	if (cy == NONE) {
		e = mem_take(idx, y);
		list_link(idx, cx, e);
		M(idx, e)->up = cx;
		M(idx, cx)->up = MEM_ROOT | name_min(idx, root_name(idx, cx),
						     doc_name(idx, y));
		names_add(idx, cx);
		return;
	}
	/* The larger component absorbs the smaller one. */
	names_del(idx, cy);
	if (list_longer(idx, cx, cy)) {
		tmp = cx;
		cx = cy;
		cy = tmp;
	}
	idx->clusters--;
	name = name_min(idx, root_name(idx, cx), root_name(idx, cy));
	for (uint32_t m = cy;;) {
		M(idx, m)->up = cx;
		m = M(idx, m)->next;
		if (m == cy)
			break;
	}
	list_splice(idx, cx, cy);
	M(idx, cx)->up = MEM_ROOT | name;
	names_add(idx, cx);
}

/*
 * The first other holder of @p id's exact key if it is @p id's twin (the
 * same status and keys, so the same sketch: it verifies with every
 * document as @p id does) and no key of theirs has more than HOT holders
 * (every pair of holders is compared), else NONE. Such a twin is linked
 * to every holder @p id would be linked to, so its component holds them
 * all: joining it is all that connect_at() would do, and a tree's copies
 * of one licence each verified again every holder that their first copy
 * had failed to verify.
 */
static uint32_t held_twin(const struct im_index *idx, uint32_t id,
			  const struct key *keys, const uint32_t *slots,
			  unsigned n)
{
	const struct doc *d = D(idx, id), *dx;
	const struct plist *pl;
	uint32_t x;

	if (!n || keys[0].kind != IM_KEY_EXACT || slots[0] == NONE ||
	    !(pl = slot_plist(idx, &keys[0], slots[0])))
		return NONE;
	x = pl_ids(idx, pl)[pl_ids(idx, pl)[0] == id];
	dx = D(idx, x);
	if (dx->status != d->status || !same_keys(dx, d))
		return NONE;
	for (unsigned i = 1; i < n; i++)
		if (slots[i] != NONE &&
		    (pl = slot_plist(idx, &keys[i], slots[i])) &&
		    pl_n(idx, pl) > HOT)
			return NONE;
	return x;
}

/* Join @p id with every document it is linked to, by its @p n keys whose
 * postings are at @p slots (NONE: held by @p id alone). Never allocates. */
static void connect_at(struct im_index *idx, uint32_t id,
		       const struct key *keys, const uint32_t *slots,
		       unsigned n)
{
	const struct doc *d = D(idx, id);
	uint32_t twin_of = held_twin(idx, id, keys, slots, n);

	if (twin_of != NONE) {
		join(idx, id, twin_of);
		return;
	}
	for (unsigned i = 0; i < n; i++) {
		const struct plist *pl;
		uint32_t end;

		if (slots[i] == NONE)
			continue;
		pl = slot_plist(idx, &keys[i], slots[i]);
		if (!pl)
			continue;
		end = compared_end(idx, &keys[i], pl, id);
		for (uint32_t j = 0; j < end; j++) {
			uint32_t y = pl_ids(idx, pl)[j], c = comp_of(idx, id);
			double sim;
			bool exact;

			if (y == id || (c != NONE && comp_of(idx, y) == c))
				continue;
			if (!verify(idx, d, D(idx, y), &sim, &exact))
				continue;
			join(idx, id, y);
			/* Every member of an exact key that relates at all is
			 * linked to every other, so they are one component
			 * already: @p id has joined them all. Going on would
			 * make n copies cost n^2 / 2 steps. */
			if (keys[i].kind == IM_KEY_EXACT)
				break;
		}
	}
}

/* Document @p id moved into the first HOT of near key @p key: join it with
 * what it is compared with now and was not before, the holders past the
 * first HOT. Never allocates. */
static void connect_promoted(struct im_index *idx, uint32_t id,
			     const struct key *key)
{
	const struct doc *d = D(idx, id);
	const struct plist *pl = key_plist(idx, key);

	for (uint32_t j = HOT; pl && j < pl_n(idx, pl); j++) {
		uint32_t y = pl_ids(idx, pl)[j], c = comp_of(idx, id);
		double sim;
		bool exact;

		if ((c == NONE || comp_of(idx, y) != c) &&
		    verify(idx, d, D(idx, y), &sim, &exact))
			join(idx, id, y);
	}
}

/*
 * Reconnecting a component that lost links (a member left, or one was pushed
 * out of a hot key's first HOT). Only the ends of the lost links, the
 * suspects, can have come apart: any other member reaches one of them by the
 * links that stay (a path out of its part of the component crosses a lost
 * link, or ends at the member that left). So searches start from the
 * suspects, in step (QUANTUM holders each per round), over the members of
 * the component only; two that meet become one, and as soon as one is left
 * with no suspect outside it, the component minus the parts already closed
 * is connected: what it has not reached stays where it is. A search that
 * runs out closes a whole part, which becomes a cluster of its own. So a
 * removal that splits nothing costs about what the suspects' searches take
 * to meet (the neighbours of the member that left, which usually meet at
 * once), and a split costs about the smaller sides, which are relabelled
 * (the searches run in step: none outruns the one that closes first).
 *
 * While a reconnect runs, a member's up is the component's root entry
 * (not reached yet), VISITED | the search that reached it (below SEARCHES),
 * or VISITED | CLOSED_R for the closed part that holds the root's entry,
 * which is set aside until the end so that the members never reached keep
 * pointing at the root's entry. Each search keeps what it reached in a
 * circular list in the order reached: the members before its cursor are
 * expanded, those after it are still to be. Nothing allocates.
 */
#define SEARCHES 32
#define QUANTUM	 8
#define VISITED	 (1u << 30) /* neither an entry (< MAX_DOCS) nor MEM_ROOT */
#define CLOSED_R SEARCHES
#define RC_NEW	 0u   /* a member not reached yet */
#define RC_OTHER NONE /* no member of the component */

struct search {
	uint32_t head; /* first entry of what it reached */
	uint32_t cur;  /* the entry being expanded */
	uint32_t size;
	uint32_t j, end;	/* holders [j, end) of cur's key left */
	const uint32_t *ids;	/* of that key */
	struct plist_big *walk; /* an exact key's block walked whole, or NULL */
	uint8_t key, nkeys;	/* cur's next key, and how many it has */
	bool active, exact_key;
	struct key keys[NKEYS];
};

/* Where suspects come from: a document, or the holders of a key (those
 * compared with @p doc, or with @p tail only those past the first HOT). */
struct source {
	struct key key;
	uint32_t doc;
	bool single, tail;
};

struct reconnect {
	uint32_t root; /* the component's root entry, which stays */
	uint32_t name; /* its name reference before */
	uint32_t rest; /* an entry of what no search reached yet, NONE: none */
	uint32_t root_search; /* the search that reached the root's entry */
	uint32_t closed_r;    /* the closed part holding it, NONE: none */
	unsigned active;
	const struct source *src;
	unsigned nsrc, isrc;
	const uint32_t *ids; /* the open source's holders [j, end) */
	uint32_t j, end, one;
	struct search s[SEARCHES];
};

static uint32_t rc_label(const struct im_index *idx, const struct reconnect *rc,
			 uint32_t e)
{
	uint32_t up = M(idx, e)->up;

	if (up & MEM_ROOT)
		return e == rc->root ? RC_NEW : RC_OTHER;
	if (up & VISITED)
		return up;
	return up == rc->root ? RC_NEW : RC_OTHER;
}

/* Take entry @p e, not reached yet, out of the list of those. */
static void rc_take(struct im_index *idx, struct reconnect *rc, uint32_t e)
{
	if (e == rc->rest)
		rc->rest = list_rest(idx, e);
	list_unlink(idx, e);
}

/* The next suspect not reached yet, or NONE. */
static uint32_t rc_next_suspect(struct im_index *idx, struct reconnect *rc)
{
	for (;;) {
		while (rc->j < rc->end) {
			uint32_t e = D(idx, rc->ids[rc->j++])->m;

			if (e != NONE && rc_label(idx, rc, e) == RC_NEW)
				return e;
		}
		if (rc->isrc == rc->nsrc)
			return NONE;
		const struct source *src = &rc->src[rc->isrc++];
		uint32_t sl, val;
		const struct plist *pl;

		rc->j = rc->end = 0;
		if (src->single) {
			rc->one = src->doc;
			rc->ids = &rc->one;
			rc->end = 1;
			continue;
		}
		sl = posting_slot(idx, &src->key, key_tag(&src->key));
		if (sl == NONE)
			continue;
		val = tab_val(key_table(idx, &src->key), sl);
		if (!(val & PL_FLAG)) {
			rc->one = val;
			rc->ids = &rc->one;
			rc->end = !src->tail;
			continue;
		}
		pl = &idx->pl[val & ~PL_FLAG];
		rc->ids = pl_ids(idx, pl);
		rc->j = src->tail ? HOT : 0;
		rc->end = src->tail
				  ? pl_n(idx, pl)
				  : compared_end(idx, &src->key, pl, src->doc);
	}
}

/* Search @p s expands entry @p e next. */
static void search_at(struct im_index *idx, struct search *s, uint32_t e)
{
	s->cur = e;
	s->key = 0;
	s->nkeys = (uint8_t)doc_keys(D(idx, M(idx, e)->doc), s->keys);
	s->j = s->end = 0;
	s->walk = NULL;
}

/* Open cur's next key: its holders compared with cur, none when cur holds
 * it alone or an exact key's block was walked whole already (its holders
 * are all linked, so all reached by one search). */
static void search_open_key(struct im_index *idx, struct search *s)
{
	const struct key *key = &s->keys[s->key++];
	struct plist *pl = key_plist(idx, key);

	s->j = s->end = 0;
	s->walk = NULL;
	s->exact_key = key->kind == IM_KEY_EXACT;
	if (!pl)
		return;
	if (s->exact_key && pl_big(idx, pl)) {
		if (pl_big(idx, pl)->epoch == idx->epoch)
			return;
		s->walk = pl_big(idx, pl);
	}
	s->ids = pl_ids(idx, pl);
	s->end = compared_end(idx, key, pl, M(idx, s->cur)->doc);
}

/* Relabel the entries of the list at @p head. */
static void list_label(struct im_index *idx, uint32_t head, uint32_t up)
{
	uint32_t y = head;

	do {
		M(idx, y)->up = up;
		y = M(idx, y)->next;
	} while (y != head);
}

/* Make the circular list holding entries @p a and @p b two: a .. b's
 * predecessor, and b .. a's predecessor. */
static void list_cut(struct im_index *idx, uint32_t a, uint32_t b)
{
	uint32_t ap = M(idx, a)->prev, bp = M(idx, b)->prev;

	M(idx, bp)->next = a;
	M(idx, a)->prev = bp;
	M(idx, ap)->next = b;
	M(idx, b)->prev = ap;
}

/* Searches @p a and @p b met. The one that reached less is relabelled into
 * the other, its expanded members before the other's cursor and the rest
 * after its last (its own cursor's member is expanded again).
 * @return the search that goes on. */
static unsigned search_merge(struct im_index *idx, struct reconnect *rc,
			     unsigned a, unsigned b)
{
	struct search *big, *small;
	unsigned keep = rc->s[a].size >= rc->s[b].size ? a : b;

	big = &rc->s[keep];
	small = &rc->s[keep == a ? b : a];
	list_label(idx, small->head, VISITED | keep);
	if (small->cur != small->head)
		list_cut(idx, small->head, small->cur);
	list_splice(idx, M(idx, big->head)->prev, small->cur);
	if (small->cur != small->head) {
		list_splice(idx, M(idx, big->cur)->prev, small->head);
		if (big->cur == big->head)
			big->head = small->head;
	}
	big->size += small->size;
	small->active = false;
	rc->active--;
	if (rc->root_search == (unsigned)(small - rc->s))
		rc->root_search = keep;
	return keep;
}

/* The list at @p head is a whole component: make it a cluster rooted at
 * @p head, or give a lone member's entry back. */
static void cluster_of_list(struct im_index *idx, uint32_t head)
{
	uint32_t name = doc_name(idx, M(idx, head)->doc);

	if (list_rest(idx, head) == NONE) {
		mem_release(idx, head);
		return;
	}
	for (uint32_t y = M(idx, head)->next; y != head; y = M(idx, y)->next) {
		M(idx, y)->up = head;
		name = name_min(idx, name, doc_name(idx, M(idx, y)->doc));
	}
	M(idx, head)->up = MEM_ROOT | name;
	names_add(idx, head);
	idx->clusters++;
}

/* Search @p si ran out: what it reached is a component of its own. */
static void search_close(struct im_index *idx, struct reconnect *rc,
			 unsigned si)
{
	struct search *s = &rc->s[si];

	s->active = false;
	rc->active--;
	if (rc->root_search == si) {
		list_label(idx, s->head, VISITED | CLOSED_R);
		rc->closed_r = s->head;
		rc->root_search = NONE;
		return;
	}
	cluster_of_list(idx, s->head);
}

/* Search @p si reaches entry @p e, not reached before. */
static void search_reach(struct im_index *idx, struct reconnect *rc,
			 unsigned si, uint32_t e)
{
	struct search *s = &rc->s[si];

	rc_take(idx, rc, e);
	if (e == rc->root)
		rc->root_search = si;
	list_link(idx, M(idx, s->head)->prev, e);
	M(idx, e)->up = VISITED | si;
	s->size++;
}

/* Search @p si looks at up to QUANTUM holders. */
static void search_step(struct im_index *idx, struct reconnect *rc, unsigned si)
{
	struct search *s = &rc->s[si];

	for (unsigned q = 0; q < QUANTUM; q++) {
		const struct doc *dc;
		uint32_t x, y, ey, label;
		double sim;
		bool exact;

		while (s->j == s->end) {
			if (s->walk) /* walked whole: all reached */
				s->walk->epoch = idx->epoch;
			s->walk = NULL;
			if (s->key < s->nkeys) {
				search_open_key(idx, s);
				continue;
			}
			if (M(idx, s->cur)->next == s->head) {
				search_close(idx, rc, si);
				return;
			}
			search_at(idx, s, M(idx, s->cur)->next);
		}
		x = M(idx, s->cur)->doc;
		y = s->ids[s->j++];
		if (y == x || (ey = D(idx, y)->m) == NONE)
			continue;
		label = rc_label(idx, rc, ey);
		if (label == RC_OTHER || label == (VISITED | si))
			continue;
		dc = D(idx, x);
		if (!s->exact_key && !verify(idx, dc, D(idx, y), &sim, &exact))
			continue;
		if (label == RC_NEW)
			search_reach(idx, rc, si, ey);
		else if (search_merge(idx, rc, si, label & ~VISITED) != si)
			return;
	}
}

/* Start a search at entry @p e, not reached yet, in a free slot. */
static void search_start(struct im_index *idx, struct reconnect *rc, uint32_t e)
{
	unsigned si = 0;

	while (rc->s[si].active)
		si++;
	rc_take(idx, rc, e);
	if (e == rc->root)
		rc->root_search = si;
	M(idx, e)->up = VISITED | si;
	rc->s[si].head = e;
	rc->s[si].size = 1;
	rc->s[si].active = true;
	rc->active++;
	search_at(idx, &rc->s[si], e);
}

/* Put entry @p e, out of any list, where an entry between @p prev and
 * @p next was (alone in its list when @p alone). */
static void list_take_place(struct im_index *idx, uint32_t e, uint32_t prev,
			    uint32_t next, bool alone)
{
	struct member *m = M(idx, e);

	if (alone) {
		m->prev = m->next = e;
		return;
	}
	m->prev = prev;
	m->next = next;
	M(idx, prev)->next = M(idx, next)->prev = e;
}

/* Exchange the documents of entries @p a and @p b, in two different lists,
 * and their places: each document stays in its list, under the other
 * entry. */
static void entry_swap(struct im_index *idx, uint32_t a, uint32_t b)
{
	struct member *ma = M(idx, a), *mb = M(idx, b);
	uint32_t ap = ma->prev, an = ma->next, bp = mb->prev, bn = mb->next;
	uint32_t t;

	list_take_place(idx, b, ap, an, ap == a);
	list_take_place(idx, a, bp, bn, bp == b);
	t = ma->doc;
	ma->doc = mb->doc;
	mb->doc = t;
	D(idx, ma->doc)->m = a;
	D(idx, mb->doc)->m = b;
}

/* Whether document @p id is a member of the list that @p root heads and
 * every other member points at. */
static bool in_root_list(const struct im_index *idx, uint32_t id, uint32_t root)
{
	uint32_t e = D(idx, id)->m;

	return e != NONE && (e == root || M(idx, e)->up == root);
}

/* The smallest name of the members of the list at @p head. */
static uint32_t list_name(const struct im_index *idx, uint32_t head)
{
	uint32_t name = NAME_NONE, y = head;

	do {
		name = name_min(idx, name, doc_name(idx, M(idx, y)->doc));
		y = M(idx, y)->next;
	} while (y != head);
	return name;
}

/*
 * The cluster rooted at @p root lost links; the ends of all of them that are
 * still its members are among the suspects that @p src gives. Make its
 * members the clusters that the links now make of them. Call before changing
 * anything of the cluster's name (the reference is read first), with the
 * leaving member's entry already out of its list. Never allocates.
 */
static void reconnect(struct im_index *idx, uint32_t root,
		      const struct source *src, unsigned nsrc)
{
	struct reconnect rc; /* not zeroed whole: some 23 kB of keys */
	struct search *last = NULL;
	uint32_t e;

	rc.root = root;
	rc.name = root_name(idx, root);
	rc.rest = root;
	rc.root_search = rc.closed_r = NONE;
	rc.active = 0;
	rc.src = src;
	rc.nsrc = nsrc;
	rc.isrc = rc.j = rc.end = 0;

	if (++idx->epoch == 0) {
		for (uint32_t p = 0; p < idx->pl_used; p++)
			if (pl_big(idx, &idx->pl[p]))
				pl_big(idx, &idx->pl[p])->epoch = 0;
		idx->epoch = 1;
	}
	for (unsigned i = 0; i < SEARCHES; i++)
		rc.s[i].active = false;
	for (;;) {
		/* One new search per round at most: those running reach most
		 * suspects first (a member among a hot key's first HOT is
		 * compared with all its holders), for less than a search of
		 * each would cost. */
		if (rc.active < SEARCHES &&
		    (e = rc_next_suspect(idx, &rc)) != NONE)
			search_start(idx, &rc, e);
		if (rc.active <= 1 && rc.isrc == rc.nsrc && rc.j >= rc.end)
			break;
		for (unsigned i = 0; i < SEARCHES; i++)
			if (rc.s[i].active)
				search_step(idx, &rc, i);
	}
	for (unsigned i = 0; i < SEARCHES; i++)
		if (rc.s[i].active)
			last = &rc.s[i];

	/* What is left: the last search's and what no search reached. The
	 * root's entry goes with it, if it was closed elsewhere. */
	if (rc.closed_r != NONE) {
		uint32_t w = rc.rest != NONE ? rc.rest
			     : last	     ? last->head
					     : NONE;

		if (w != NONE) {
			entry_swap(idx, root, w);
			if (rc.closed_r == root)
				rc.closed_r = w;
			if (rc.rest == w)
				rc.rest = root;
			if (last && last->head == w)
				last->head = root;
		}
		cluster_of_list(idx, rc.closed_r);
	}
	if (last) {
		list_label(idx, last->head, root);
		if (rc.rest != NONE)
			list_splice(idx, rc.rest, last->head);
		else
			rc.rest = last->head;
	}
	if (rc.rest == NONE)
		return;
	if (list_rest(idx, rc.rest) == NONE) {
		mem_release(idx, rc.rest);
		return;
	}
	/* A name stays while its holder does: the others only go. */
	if (rc.name == NAME_NONE || !in_root_list(idx, REF_DOC(rc.name), root))
		rc.name = list_name(idx, root);
	M(idx, root)->up = MEM_ROOT | rc.name;
	names_add(idx, root);
	idx->clusters++;
}

/* Take the cluster rooted at @p root out of the names, to be reconnected. */
static void reconnect_begin(struct im_index *idx, uint32_t root)
{
	names_del(idx, root);
	idx->clusters--;
}

/* Whether @p a and @p b verify alike with any document: exact copies (one
 * content hash) with one status and one sketch. */
static bool same_bytes_and_sketch(const struct doc *a, const struct doc *b)
{
	return doc_exact(a) && doc_exact(b) && a->status == b->status &&
	       !memcmp(a->exact, b->exact, sizeof(a->exact)) &&
	       a->sketch.n == b->sketch.n &&
	       !memcmp(a->sketch.v, b->sketch.v, sizeof(a->sketch.v));
}

/* Whether @p a and @p b are texts with one sketch, linked to each other:
 * whatever verifies with one as a near-duplicate verifies with the other
 * (the same terms: one text saved twice, or with only what the tokenizer
 * drops changed). */
static bool sketch_twins(const struct im_index *idx, const struct doc *a,
			 const struct doc *b)
{
	double sim;

	return has_text(a->status) && has_text(b->status) &&
	       !memcmp(&a->sketch, &b->sketch, sizeof(a->sketch)) &&
	       im_sketch_similar(&a->sketch, &b->sketch, idx->threshold, &sim);
}

/* Add document @p id (in docs[], in no posting) to the postings and to the
 * components its links reach. */
static void insert_doc(struct im_index *idx, uint32_t id, struct spare *sp)
{
	struct source src[2 * NKEYS];
	uint32_t roots[NKEYS];
	unsigned nsrc = 0, nroots = 0;
	const struct doc *d = D(idx, id);

	for (unsigned i = 0; i < sp->nkeys; i++) {
		uint32_t x = posting_add(idx, &sp->keys[i], sp->tags[i],
					 sp->slots[i], sp->empty[i], id, sp);

		/* A document pushed out of a hot key's first HOT lost its
		 * links to the holders past them, unless its place went to a
		 * document that verifies with them as it did and is linked
		 * to it (a copy, or the same terms): then its component
		 * stands (and m copies arriving out of path order cost no m
		 * rebuilds of m). */
		if (x == NONE || D(idx, x)->m == NONE ||
		    same_bytes_and_sketch(D(idx, x), d) ||
		    sketch_twins(idx, D(idx, x), d))
			continue;
		src[nsrc++] = (struct source){.doc = x, .single = true};
		src[nsrc++] = (struct source){.key = sp->keys[i], .tail = true};
		roots[nroots++] = D(idx, x)->m;
	}
	connect_at(idx, id, sp->keys, sp->slots, sp->nkeys);
	/* The lost links' components, after the joins, each once. */
	for (unsigned i = 0; i < nroots; i++) {
		roots[i] = comp_of(idx, M(idx, roots[i])->doc);
		for (unsigned k = 0; k < i; k++)
			if (roots[k] == roots[i])
				roots[i] = NONE;
	}
	for (unsigned i = 0; i < nroots; i++) {
		if (roots[i] == NONE)
			continue;
		reconnect_begin(idx, roots[i]);
		reconnect(idx, roots[i], src, nsrc);
	}
}

/* Whether @p x is a copy of @p d in every respect the links see. */
static bool twin(const struct im_index *idx, uint32_t x, const struct doc *d)
{
	const struct doc *dx = D(idx, x);

	return doc_exact(dx) && doc_exact(d) && same_content(dx, d);
}

/* Whether @p a holds every near key of @p b: the same coordinates signed
 * with the same key bytes, and the same sketch (its bands). */
static bool same_near_keys(const struct doc *a, const struct doc *b)
{
	uint32_t valid = doc_valid(a);

	if (valid != doc_valid(b) ||
	    memcmp(&a->sketch, &b->sketch, sizeof(a->sketch)))
		return false;
	for (unsigned k = 0; k < IM_MAX_COORDS; k++)
		if ((valid & (1u << k)) &&
		    memcmp(doc_sig(a, k), doc_sig(b, k), IM_KEY_COORD_LEN))
			return false;
	return true;
}

/* Take entry @p e's document out of the list of the cluster rooted at
 * @p root, which has two members or more. The root's entry stays (every
 * member points at it): its neighbour's document moves to it, and the
 * neighbour's entry goes instead. */
static void leave_list(struct im_index *idx, uint32_t e, uint32_t root)
{
	uint32_t next = M(idx, e)->next;

	if (e == root) {
		uint32_t id = M(idx, e)->doc;

		M(idx, e)->doc = M(idx, next)->doc;
		D(idx, M(idx, e)->doc)->m = e;
		M(idx, next)->doc = id;
		e = next;
	}
	list_unlink(idx, e);
	mem_release(idx, e);
}

/*
 * Take @p id (entry @p e) out of its cluster without reconnecting it, when
 * that changes nothing else: two members or more stay, a neighbour in the
 * cluster's list stands in for it, and each document the removal moved into
 * a hot key's first HOT (@p promoted) verifies with anyone as @p id did. A
 * stand-in is a twin (same bytes, status, coordinates and sketch: it holds
 * every key @p id held, and whatever verifies with one verifies with the
 * other), or, when no copy of @p id's bytes is left, a document with the
 * same near keys and the same sketch (sketch_twins()). Every link @p id had
 * to a member z is then matched by one from z to the stand-in: through the
 * exact key (a twin's), a key of HOT holders or fewer, z's own place among
 * the first HOT, or a promoted document taking @p id's (linked to the
 * stand-in in turn); and the promoted gain no link to anything outside the
 * cluster, as @p id had none. So the rest stay one component, which keeps
 * its name unless @p id held it and the stand-in's differs (then the members
 * are walked for it). Without this, n copies of one file, or n files of one
 * text, removed one by one (a plan applied under a mount) cost n^2 / 2
 * steps.
 * @return whether it was done (else nothing changed).
 */
static bool leave_as_stand_in(struct im_index *idx, uint32_t id, uint32_t e,
			      const uint32_t *promoted, unsigned np)
{
	const struct doc *d = D(idx, id);
	uint32_t next = M(idx, e)->next, root = comp_of(idx, id), ref, tw;
	bool copies_left = false, renamed;
	struct key exact_key = {IM_KEY_EXACT, 0, d->exact};

	if (M(idx, next)->next == e) /* two members: the cluster ends */
		return false;
	tw = M(idx, next)->doc;
	if (doc_exact(d))
		copies_left = posting_slot(idx, &exact_key,
					   key_tag(&exact_key)) != NONE;
	if (!twin(idx, tw, d) &&
	    (copies_left || !same_near_keys(D(idx, tw), d) ||
	     !sketch_twins(idx, D(idx, tw), d)))
		return false;
	for (unsigned i = 0; i < np; i++)
		if (!twin(idx, promoted[i], d) &&
		    !sketch_twins(idx, D(idx, promoted[i]), d))
			return false;
	ref = root_name(idx, root);
	renamed = ref != NAME_NONE && REF_DOC(ref) == id;
	if (renamed) {
		/* The stand-in's name, if it is the same. */
		struct im_sig a, b;

		names_del(idx, root);
		name_of_ref(idx, ref, &a);
		ref = doc_name(idx, tw);
		if (ref != NAME_NONE)
			name_of_ref(idx, ref, &b);
		if (ref == NAME_NONE ||
		    (ref & EXACT_NAME) != (root_name(idx, root) & EXACT_NAME) ||
		    memcmp(a.b, b.b, IM_SIG_LEN))
			ref = NAME_NONE;
	}
	leave_list(idx, e, root);
	if (renamed) {
		if (ref == NAME_NONE)
			ref = list_name(idx, root);
		M(idx, root)->up = MEM_ROOT | ref;
		names_add(idx, root);
	}
	return true;
}

/* Take document @p id out of the postings and out of its component, which is
 * reconnected unless a stand-in takes its place (leave_as_stand_in()). The
 * record stays in docs[]. Never allocates. */
static void detach_doc(struct im_index *idx, uint32_t id)
{
	struct key keys[NKEYS];
	struct source src[NKEYS];
	uint32_t promoted[NKEYS];
	struct doc *d = D(idx, id);
	unsigned nkeys = doc_keys(d, keys), np = 0, pkey[NKEYS];
	uint32_t e = d->m, root;

	for (unsigned i = 0; i < nkeys; i++) {
		uint32_t x = posting_del(idx, &keys[i], id);

		if (x != NONE) {
			pkey[np] = i;
			promoted[np++] = x;
		}
		/* Its neighbours: the holders it was compared with. */
		src[i] = (struct source){.key = keys[i], .doc = id};
	}
	if (e != NONE && leave_as_stand_in(idx, id, e, promoted, np))
		return; /* the promoted link nothing new */
	if (e != NONE) {
		root = comp_of(idx, id);
		reconnect_begin(idx, root);
		leave_list(idx, e, root);
		reconnect(idx, root, src, nkeys);
	}
	/* A document moved into a hot key's first HOT gained links. */
	for (unsigned i = 0; i < np; i++)
		connect_promoted(idx, promoted[i], &keys[pkey[i]]);
}

/* ---- Document slots ------------------------------------------------------ */

static int docs_reserve(struct im_index *idx)
{
	uint32_t cap;
	uint32_t *nd;

	if (idx->docs_free != NONE || idx->docs_used < idx->docs_cap)
		return 0;
	if (idx->docs_cap >= MAX_DOCS)
		return -ENOMEM;
	cap = idx->docs_cap < 16 ? 16 : idx->docs_cap + idx->docs_cap / 2;
	if (cap > MAX_DOCS)
		cap = MAX_DOCS;
	nd = realloc(idx->docs, cap * sizeof(*nd));
	if (!nd)
		return -ENOMEM;
	idx->docs = nd;
	idx->docs_cap = cap;
	return 0;
}

/* A free slot of docs[] holds DOCS_FREE | the next free one (DOCS_END:
 * none); a live one, its record's handle (below 2^31, pool.h). */
#define DOCS_FREE 0x80000000u
#define DOCS_END  0x7fffffffu

static uint32_t docs_take(struct im_index *idx, uint32_t h)
{
	uint32_t id;

	if (idx->docs_free != NONE) {
		id = idx->docs_free;
		idx->docs_free = idx->docs[id] & ~DOCS_FREE;
		if (idx->docs_free == DOCS_END)
			idx->docs_free = NONE;
	} else {
		id = idx->docs_used++;
	}
	idx->docs[id] = h;
	idx->ndocs++;
	return id;
}

static void docs_release(struct im_index *idx, uint32_t id)
{
	rec_free(idx, D(idx, id), idx->docs[id]);
	idx->docs[id] = DOCS_FREE |
			(idx->docs_free == NONE ? DOCS_END : idx->docs_free);
	idx->docs_free = id;
	idx->ndocs--;
}

static inline bool docs_live(const struct im_index *idx, uint32_t id)
{
	return !(idx->docs[id] & DOCS_FREE);
}

/* ---- Locking ------------------------------------------------------------- */

/* Queries are const for their callers but still take the lock. */
static void rdlock(const struct im_index *idx)
{
	pthread_rwlock_rdlock((pthread_rwlock_t *)&idx->lock);
}

static void unlock(const struct im_index *idx)
{
	pthread_rwlock_unlock((pthread_rwlock_t *)&idx->lock);
}

/* ---- Life cycle ---------------------------------------------------------- */

int im_index_new(struct im_index **out)
{
	pthread_rwlockattr_t attr;
	struct im_params p;
	struct im_index *idx;
	int err;

	*out = NULL;
	idx = calloc(1, sizeof(*idx));
	if (!idx)
		return -ENOMEM;
	/* Writers first: a steady stream of lookups (a busy mount) must not
	 * starve the watcher. Hence no recursive read locking (index.h). */
	err = pthread_rwlockattr_init(&attr);
	if (!err) {
		pthread_rwlockattr_setkind_np(
			&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
		err = pthread_rwlock_init(&idx->lock, &attr);
		pthread_rwlockattr_destroy(&attr);
	}
	if (err) {
		free(idx);
		return -err;
	}
	im_hpool_init(&idx->pool);
	idx->docs_free = NONE;
	idx->pl_free = NONE;
	idx->mem_free = NONE;
	idx->keys[0].kind = TAB_EXACT;
	for (unsigned k = 0; k < IM_MAX_COORDS; k++) {
		idx->keys[1 + k].kind = TAB_COORD;
		idx->keys[1 + k].k = (uint8_t)k;
	}
	for (unsigned j = 0; j < IM_SKETCH_BANDS; j++) {
		idx->keys[1 + IM_MAX_COORDS + j].kind = TAB_BAND;
		idx->keys[1 + IM_MAX_COORDS + j].k = (uint8_t)j;
	}
	idx->paths.kind = TAB_PATHS;
	idx->names.kind = TAB_NAMES;
	im_params_init(&p);
	idx->threshold = p.similarity;
	idx->csz = IM_SIG_LEN;
	idx->stat = true;
	*out = idx;
	return 0;
}

void im_index_free(struct im_index *idx)
{
	if (!idx)
		return;
	im_hpool_free(&idx->pool); /* every record */
	free(idx->docs);
	free(idx->pl);
	free(idx->paths.s);
	for (unsigned i = 0; i < NTABLES; i++)
		free(idx->keys[i].s);
	free(idx->names.s);
	if (idx->mem)
		munmap(idx->mem, (size_t)idx->mem_cap * sizeof(struct member));
	pthread_rwlock_destroy(&idx->lock);
	free(idx);
}

/* ---- Updates ------------------------------------------------------------- */

/* Everything insert_doc() of @p d and a new path slot will need, so that
 * nothing fails once the index starts changing; @p sp says what. */
static int reserve_put(struct im_index *idx, const struct doc *d, bool new_path,
		       struct spare *sp)
{
	struct key *keys = sp->keys;
	unsigned nkeys = doc_keys(d, keys);
	uint32_t clusters_max;
	int ret;

	sp->n = sp->used = 0;
	sp->nkeys = nkeys;
	ret = docs_reserve(idx);
	if (ret)
		return ret;
	if (new_path && (ret = tab_reserve(idx, &idx->paths, 1)))
		return ret;
	/* A member entry for each document, the new one included: no join
	 * then allocates, whatever a put or a remove connects. */
	if ((ret = mem_reserve(idx, (uint64_t)idx->ndocs + 1)))
		return ret;
	/* A split never allocates: keep room for every possible cluster. */
	clusters_max = (idx->ndocs + 1) / 2 + 1;
	if (clusters_max > idx->names.n &&
	    (ret = tab_reserve(idx, &idx->names, clusters_max - idx->names.n)))
		return ret;
	/* A document has each key of a table at most once. */
	for (unsigned i = 0; i < nkeys; i++)
		if ((ret = tab_reserve(idx, key_table(idx, &keys[i]), 1)))
			return ret;

	/* Each key's slot is a miss, in a table of its own: asked for all at
	 * once, they are waited for together. */
	for (unsigned i = 0; i < nkeys; i++) {
		const struct table *t = key_table(idx, &keys[i]);

		sp->tags[i] = key_tag(&keys[i]);
		__builtin_prefetch(&t->s[tab_home(t, sp->tags[i])]);
	}
	for (unsigned i = 0; i < nkeys; i++) {
		uint32_t s, val;

		s = sp->slots[i] =
			posting_find(idx, &keys[i], sp->tags[i], &sp->empty[i]);
		if (s == NONE)
			continue;
		val = tab_val(key_table(idx, &keys[i]), s);
		if (val & PL_FLAG) {
			/* A list to grow: a pair becomes a block of 4 (of 2
			 * holders until the put commits: the same list). */
			struct plist *pl = &idx->pl[val & ~PL_FLAG];
			struct plist_big *b = pl_big(idx, pl), *nb;
			unsigned cap_log = b ? b->cap_log + 1u : 2;
			uint32_t h;

			if (b && b->n < 1u << b->cap_log)
				continue;
			if (cap_log > 30)
				return -ENOMEM;
			nb = im_hpool_get(&idx->pool, pl_big_size(cap_log), &h);
			if (!nb)
				return -ENOMEM;
			if (b) {
				memcpy(nb, b, pl_big_size(b->cap_log));
				im_hpool_put(&idx->pool, (uint32_t)pl_word(pl),
					     pl_big_size(b->cap_log));
			} else {
				nb->n = 2;
				nb->epoch = 0;
				memcpy(nb->ids, pl->two, sizeof(pl->two));
			}
			nb->cap_log = (uint8_t)cap_log;
			pl_set_word(pl, PL_BIG | h);
		} else {
			sp->n++; /* a new list, inline */
		}
	}
	if (idx->pl_nfree + (idx->pl_cap - idx->pl_used) < sp->n) {
		uint64_t cap = idx->pl_cap < 16 ? 16 : idx->pl_cap;
		struct plist *np;

		/* One put may need up to K+2 new lists: grow until they fit,
		 * not by a fixed step. */
		while (idx->pl_nfree + (cap - idx->pl_used) < sp->n)
			cap += cap / 2;
		if (cap > MAX_PLISTS)
			return -ENOMEM;
		np = realloc(idx->pl, cap * sizeof(*np));
		if (!np)
			return -ENOMEM;
		idx->pl = np;
		idx->pl_cap = cap;
	}
	return 0;
}

/* im_index_put() under the write lock; takes ownership of @p d, whose
 * handle is @p h. */
/* put_locked(); with @p replaced not NULL, a record that @p d replaces
 * (one whose keys differ) is left in the postings and its cluster for the
 * caller to detach and release, its id in *replaced (NONE: none). */
static int put_locked_at(struct im_index *idx, const char *path, struct doc *d,
			 uint32_t h, uint32_t *replaced)
{
	struct spare sp;
	uint32_t old, id;
	struct doc *od;
	int ret;

	if (replaced)
		*replaced = NONE;

	old = path_find(idx, path);
	if (old != NONE && same_keys(od = D(idx, old), d)) {
		/* Nothing moves: the new record takes the old one's place. */
		bool changed = !same_content(od, d);

		d->m = od->m; /* its member entry names the id, which stays */
		rec_free(idx, od, idx->docs[old]);
		idx->docs[old] = h;
		if (changed)
			idx->gen++;
		return 0;
	}
	ret = reserve_put(idx, d, old == NONE, &sp);
	if (ret) {
		rec_free(idx, d, h);
		return ret;
	}
	/* A replacement joins first and then the old record leaves, so that
	 * what was reserved is what insert_doc() finds. */
	id = docs_take(idx, h);
	insert_doc(idx, id, &sp);
	if (old == NONE) {
		tab_insert(&idx->paths, path_tag(path), id);
	} else if (replaced) {
		tab_set_val(&idx->paths, path_slot(idx, path), id);
		*replaced = old;
	} else {
		detach_doc(idx, old);
		tab_set_val(&idx->paths, path_slot(idx, path), id);
		docs_release(idx, old);
	}
	idx->gen++;
	return 0;
}

static int put_locked(struct im_index *idx, const char *path, struct doc *d,
		      uint32_t h)
{
	return put_locked_at(idx, path, d, h, NULL);
}

int im_index_put(struct im_index *idx, const char *path,
		 const struct im_doc_sigs *s)
{
	struct doc *d;
	uint32_t h;
	int ret;

	if (s->ncoords > IM_MAX_COORDS)
		return -EINVAL;
	d = rec_new(idx, path, s, &h);
	if (!d)
		return -ENOMEM;
	pthread_rwlock_wrlock(&idx->lock);
	ret = put_locked(idx, path, d, h);
	pthread_rwlock_unlock(&idx->lock);
	return ret;
}

static int remove_locked(struct im_index *idx, const char *path)
{
	uint32_t slot = path_slot(idx, path), id;

	if (slot == NONE)
		return -ENOENT;
	id = tab_val(&idx->paths, slot);
	tab_erase(idx, &idx->paths, slot);
	detach_doc(idx, id);
	docs_release(idx, id);
	idx->gen++;
	return 0;
}

int im_index_remove(struct im_index *idx, const char *path)
{
	int ret;

	pthread_rwlock_wrlock(&idx->lock);
	ret = remove_locked(idx, path);
	pthread_rwlock_unlock(&idx->lock);
	return ret;
}

/* ---- Removing many at once ----------------------------------------------- */

/*
 * im_index_remove_many(): every document leaves the postings and its
 * cluster's list first; each cluster that lost members without a stand-in
 * is then reconnected once, from the holders compared with any of them
 * (taken after all have left: each holder compared with a leaver before is
 * compared with it still, as removals only lower ranks), and each key's
 * documents moved into its first HOT are joined with the rest in one pass.
 * n near-duplicates removed in path order, each among the first HOT of
 * every key, so cost O(n) steps per batch rather than per removal. Records
 * stay until the end: sources and promotions point into them.
 */

/* A key of a leaver, to be resolved once all have left: its table and
 * posting slot then say which key it is. */
struct batch_key {
	uint32_t tab, slot; /* NONE slot: the key has no holder left */
	uint32_t ref; /* sources: the cluster's root entry; promotions: the
		       * document moved into the key's first HOT */
	uint32_t id;  /* the leaver that held it */
	uint8_t k;    /* its rank in doc_keys() of that leaver */
};

struct batch {
	uint32_t *gone; /* ids of the leavers, released at the end */
	size_t ngone;
	uint32_t *roots; /* clusters to reconnect (entries) */
	size_t nroots;
	uint8_t *pending; /* by entry: 1 reconnect pending, 2 no member left */
	uint8_t *left;	  /* by document id: left in this batch */
	struct batch_key *src, *prom;
	size_t nsrc, nprom;
};

static int batch_key_cmp(const void *pa, const void *pb)
{
	const struct batch_key *a = pa, *b = pb;

	if (a->ref != b->ref)
		return a->ref < b->ref ? -1 : 1;
	if (a->tab != b->tab)
		return a->tab < b->tab ? -1 : 1;
	return (a->slot > b->slot) - (a->slot < b->slot);
}

/* The key @p bk names, in its leaver's record. */
static struct key batch_key_of(const struct im_index *idx,
			       const struct batch_key *bk)
{
	struct key keys[NKEYS];

	doc_keys(D(idx, bk->id), keys);
	return keys[bk->k];
}

/* Resolve the keys of @p v (table and slot after every removal), drop the
 * keys nobody holds now and sort the rest by @p cmp.
 * @return how many are left. */
static size_t batch_keys_sort(const struct im_index *idx, struct batch_key *v,
			      size_t n, int (*cmp)(const void *, const void *))
{
	size_t m = 0;

	for (size_t i = 0; i < n; i++) {
		struct key key = batch_key_of(idx, &v[i]);

		v[i].tab = (uint32_t)(key_table(idx, &key) - idx->keys);
		v[i].slot = posting_slot(idx, &key, key_tag(&key));
		if (v[i].slot != NONE)
			v[m++] = v[i];
	}
	qsort(v, m, sizeof(*v), cmp);
	return m;
}

/* Detach @p id, already out of the paths: out of the postings and out of its
 * cluster's list, its reconnection and promotions left for the end. */
static void batch_detach(struct im_index *idx, struct batch *b, uint32_t id)
{
	struct key keys[NKEYS];
	uint32_t promoted[NKEYS];
	unsigned pkey[NKEYS], np = 0;
	struct doc *d = D(idx, id);
	unsigned nkeys = doc_keys(d, keys);
	uint32_t e = d->m, root;

	b->left[id] = 1;
	b->gone[b->ngone++] = id;
	for (unsigned i = 0; i < nkeys; i++) {
		uint32_t x = posting_del(idx, &keys[i], id);

		if (x != NONE) {
			pkey[np] = i;
			promoted[np++] = x;
		}
	}
	if (e != NONE) {
		root = comp_of(idx, id);
		/* Its promotions are kept even then: moved into a key's
		 * first HOT earlier in this batch, id leaves before its links
		 * past them were made (its own promotion is skipped, as it
		 * left), and the twin its removal promotes makes them. */
		if (!b->pending[root] &&
		    leave_as_stand_in(idx, id, e, promoted, np))
			goto promote;
		if (!b->pending[root]) {
			reconnect_begin(idx, root);
			b->pending[root] = 1;
			b->roots[b->nroots++] = root;
		}
		if (list_rest(idx, e) == NONE) {
			mem_release(idx, e); /* the last member: e is root */
			b->pending[root] = 2;
		} else {
			leave_list(idx, e, root);
		}
		for (unsigned i = 0; i < nkeys; i++)
			b->src[b->nsrc++] = (struct batch_key){
				.ref = root, .id = id, .k = (uint8_t)i};
	}
promote:
	for (unsigned i = 0; i < np; i++)
		b->prom[b->nprom++] = (struct batch_key){
			.ref = promoted[i], .id = id, .k = (uint8_t)pkey[i]};
}

static int u32_cmp(const void *pa, const void *pb)
{
	uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;

	return (a > b) - (a < b);
}

/* Reconnect each cluster that lost members and keeps some, from the
 * holders compared with any of its leavers: one source per key, that of
 * the leaver with the least path (whose holders compared include the
 * others'). */
static void batch_reconnect(struct im_index *idx, struct batch *b,
			    struct source *srcv)
{
	size_t n = batch_keys_sort(idx, b->src, b->nsrc, batch_key_cmp), i = 0;

	qsort(b->roots, b->nroots, sizeof(*b->roots), u32_cmp);
	for (size_t r = 0; r < b->nroots; r++) {
		uint32_t root = b->roots[r];
		unsigned nsrc = 0;

		while (i < n && b->src[i].ref < root)
			i++;
		while (i < n && b->src[i].ref == root) {
			const struct batch_key *least = &b->src[i];

			/* In posting order (path, then id): two leavers can
			 * share a path (one put twice in a batch). */
			for (i++; i < n && !batch_key_cmp(&b->src[i], least);
			     i++)
				if (doc_order(idx, b->src[i].id, least->id) < 0)
					least = &b->src[i];
			srcv[nsrc++] =
				(struct source){.key = batch_key_of(idx, least),
						.doc = least->id};
		}
		if (b->pending[root] == 1)
			reconnect(idx, root, srcv, nsrc);
	}
}

/* The component all of @p p's @p n documents are in, or NONE when they are
 * not in one. */
static uint32_t common_comp(const struct im_index *idx, const uint32_t *p,
			    unsigned n)
{
	uint32_t c = comp_of(idx, p[0]);

	for (unsigned i = 1; i < n && c != NONE; i++)
		if (comp_of(idx, p[i]) != c)
			c = NONE;
	return c;
}

/* Documents @p p (@p n, distinct) moved into the first HOT of near key
 * @p key: join them with the holders they are compared with now and were
 * not before (those past the first HOT, and each other), in one pass over
 * the holders. */
static void connect_promoted_many(struct im_index *idx, const struct key *key,
				  const uint32_t *p, unsigned n)
{
	const struct plist *pl = key_plist(idx, key);
	uint32_t all = common_comp(idx, p, n);
	double sim;
	bool exact;

	if (!pl)
		return;
	for (unsigned i = 0; i < n; i++)
		for (unsigned j = i + 1; j < n; j++) {
			uint32_t c = comp_of(idx, p[i]);

			if ((c == NONE || comp_of(idx, p[j]) != c) &&
			    verify(idx, D(idx, p[i]), D(idx, p[j]), &sim,
				   &exact)) {
				join(idx, p[i], p[j]);
				all = common_comp(idx, p, n);
			}
		}
	for (uint32_t j = HOT; j < pl_n(idx, pl); j++) {
		uint32_t y = pl_ids(idx, pl)[j], cy = comp_of(idx, y);

		if (all != NONE && cy == all)
			continue;
		for (unsigned i = 0; i < n; i++) {
			uint32_t c = comp_of(idx, p[i]);

			if ((c == NONE || c != cy) &&
			    verify(idx, D(idx, p[i]), D(idx, y), &sim,
				   &exact)) {
				join(idx, p[i], y);
				cy = comp_of(idx, y);
				all = common_comp(idx, p, n);
			}
		}
	}
}

/* Promotions by key, then document. */
static int batch_prom_cmp(const void *pa, const void *pb)
{
	const struct batch_key *a = pa, *b = pb;

	if (a->tab != b->tab)
		return a->tab < b->tab ? -1 : 1;
	if (a->slot != b->slot)
		return a->slot < b->slot ? -1 : 1;
	return (a->ref > b->ref) - (a->ref < b->ref);
}

/* Join the documents moved into a key's first HOT, key by key. */
static void batch_promote(struct im_index *idx, struct batch *b)
{
	size_t n = batch_keys_sort(idx, b->prom, b->nprom, batch_prom_cmp);
	size_t i = 0;
	uint32_t p[HOT];

	while (i < n) {
		size_t j = i;
		unsigned np = 0;

		for (; j < n && b->prom[j].tab == b->prom[i].tab &&
		       b->prom[j].slot == b->prom[i].slot;
		     j++) {
			uint32_t x = b->prom[j].ref;

			/* Each document that stays, once. They are all among
			 * the key's first HOT now (removals only lower ranks),
			 * so there are HOT of them at most. */
			if (b->left[x] || (np && p[np - 1] == x) || np == HOT)
				continue;
			p[np++] = x;
		}
		if (np) {
			struct key key = batch_key_of(idx, &b->prom[i]);

			connect_promoted_many(idx, &key, p, np);
		}
		i = j;
	}
}

/* Paths removed per batch: its arrays take 2.6 kB per path (IM_MAX_KEYS
 * sources and promotions each), 1.3 MB in all. */
#define BATCH_MAX 512

static void batch_free(struct batch *b, struct source *srcv)
{
	free(b->gone);
	free(b->roots);
	free(b->pending);
	free(b->left);
	free(b->src);
	free(b->prom);
	free(srcv);
}

/* Room for a batch of @p n leavers (after every put of the batch: the
 * arrays by entry and document id cover those it made). @return 0 or
 * -ENOMEM (then nothing is held). */
static int batch_alloc(const struct im_index *idx, struct batch *b,
		       struct source **srcv, size_t n)
{
	memset(b, 0, sizeof(*b));
	b->gone = malloc(n * sizeof(*b->gone));
	b->roots = malloc(n * sizeof(*b->roots));
	b->pending = calloc((size_t)idx->mem_used + 1, 1);
	b->left = calloc((size_t)idx->docs_used + 1, 1);
	b->src = malloc(n * NKEYS * sizeof(*b->src));
	b->prom = malloc(n * NKEYS * sizeof(*b->prom));
	*srcv = malloc(n * NKEYS * sizeof(**srcv));
	if (b->gone && b->roots && b->pending && b->left && b->src && b->prom &&
	    *srcv)
		return 0;
	batch_free(b, *srcv);
	return -ENOMEM;
}

/* The leavers detached: reconnect, promote, release their records. */
static void batch_finish(struct im_index *idx, struct batch *b,
			 struct source *srcv)
{
	batch_reconnect(idx, b, srcv);
	batch_promote(idx, b);
	for (size_t i = 0; i < b->ngone; i++)
		docs_release(idx, b->gone[i]);
	batch_free(b, srcv);
}

/* Remove the indexed paths among @p paths[0..n), n <= BATCH_MAX, as one
 * batch; one by one if there is no memory for it. @return how many. */
static size_t remove_batch(struct im_index *idx, const char *const *paths,
			   size_t n)
{
	struct batch b;
	struct source *srcv;
	size_t removed = 0;

	/* One path: nothing to share, and the arrays by entry and document
	 * would cost what the index holds. */
	if (n == 1)
		return !remove_locked(idx, paths[0]);
	if (batch_alloc(idx, &b, &srcv, n)) {
		for (size_t i = 0; i < n; i++)
			removed += !remove_locked(idx, paths[i]);
		return removed;
	}
	for (size_t i = 0; i < n; i++) {
		uint32_t slot = path_slot(idx, paths[i]), id;

		if (slot == NONE)
			continue;
		id = tab_val(&idx->paths, slot);
		tab_erase(idx, &idx->paths, slot);
		batch_detach(idx, &b, id);
		removed++;
	}
	batch_finish(idx, &b, srcv);
	idx->gen += removed;
	return removed;
}

size_t im_index_remove_many(struct im_index *idx, const char *const *paths,
			    size_t n)
{
	size_t removed = 0;

	/* Readers get their turn between batches. */
	for (size_t i = 0; i < n; i += BATCH_MAX) {
		pthread_rwlock_wrlock(&idx->lock);
		removed += remove_batch(idx, paths + i,
					n - i < BATCH_MAX ? n - i : BATCH_MAX);
		pthread_rwlock_unlock(&idx->lock);
	}
	return removed;
}

/*
 * A batch of puts: each new record comes in at once (its joins made, and
 * what it pushed out of a key's first HOT reconnected), and the records
 * they replace leave together at the end, as a batch of removals. Every
 * document signed again with a new lexicon replaces its record: in path
 * order each old record is first among its old coordinates' holders, so
 * one by one each replacement searched the whole cluster again.
 */
static void put_batch(struct im_index *idx, const char *const *paths,
		      const struct im_doc_sigs *const *docs, size_t n,
		      int *rets)
{
	uint32_t olds[BATCH_MAX];
	size_t nold = 0;
	struct source *srcv;
	struct batch b;

	/* One put: nothing to share (see remove_batch()). */
	if (n == 1) {
		struct doc *d;
		uint32_t h;

		rets[0] = -EINVAL;
		if (docs[0]->ncoords > IM_MAX_COORDS)
			return;
		rets[0] = -ENOMEM;
		d = rec_new(idx, paths[0], docs[0], &h);
		if (d)
			rets[0] = put_locked(idx, paths[0], d, h);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const struct im_doc_sigs *s = docs[i];
		struct doc *d;
		uint32_t h;

		rets[i] = -EINVAL;
		if (s->ncoords > IM_MAX_COORDS)
			continue;
		rets[i] = -ENOMEM;
		d = rec_new(idx, paths[i], s, &h);
		if (!d)
			continue;
		rets[i] = put_locked_at(idx, paths[i], d, h, &olds[nold]);
		nold += !rets[i] && olds[nold] != NONE;
	}
	if (!nold)
		return;
	if (batch_alloc(idx, &b, &srcv, nold)) {
		for (size_t i = 0; i < nold; i++) {
			detach_doc(idx, olds[i]);
			docs_release(idx, olds[i]);
		}
		return;
	}
	for (size_t i = 0; i < nold; i++)
		batch_detach(idx, &b, olds[i]);
	batch_finish(idx, &b, srcv);
}

void im_index_put_many(struct im_index *idx, const char *const *paths,
		       const struct im_doc_sigs *const *docs, size_t n,
		       int *rets)
{
	for (size_t i = 0; i < n; i += BATCH_MAX) {
		pthread_rwlock_wrlock(&idx->lock);
		put_batch(idx, paths + i, docs + i,
			  n - i < BATCH_MAX ? n - i : BATCH_MAX, rets + i);
		pthread_rwlock_unlock(&idx->lock);
	}
}

int im_index_rename(struct im_index *idx, const char *from, const char *to)
{
	struct doc *d;
	uint32_t id, h;
	int ret = 0;

	pthread_rwlock_wrlock(&idx->lock);
	id = path_find(idx, from);
	if (id == NONE) {
		ret = -ENOENT;
		goto out;
	}
	if (!strcmp(from, to))
		goto out;
	/* The path orders the postings (the hot-key rule): a renamed record
	 * is put anew and the old one leaves. */
	d = rec_copy(idx, D(idx, id), to, &h);
	if (!d) {
		ret = -ENOMEM;
		goto out;
	}
	ret = put_locked(idx, to, d, h);
	if (!ret)
		remove_locked(idx, from);
out:
	pthread_rwlock_unlock(&idx->lock);
	return ret;
}

int im_index_set_prefixes(struct im_index *idx, bool prefixes)
{
	int ret = 0;

	pthread_rwlock_wrlock(&idx->lock);
	if (idx->ndocs)
		ret = -EBUSY;
	else
		idx->csz = prefixes ? IM_KEY_COORD_LEN : IM_SIG_LEN;
	pthread_rwlock_unlock(&idx->lock);
	return ret;
}

int im_index_set_stat(struct im_index *idx, bool keep)
{
	int ret = 0;

	pthread_rwlock_wrlock(&idx->lock);
	if (idx->ndocs)
		ret = -EBUSY;
	else
		idx->stat = keep;
	pthread_rwlock_unlock(&idx->lock);
	return ret;
}

void im_index_expect(struct im_index *idx, size_t docs)
{
	pthread_rwlock_wrlock(&idx->lock);
	idx->expect = docs > MAX_DOCS ? MAX_DOCS : (uint32_t)docs;
	pthread_rwlock_unlock(&idx->lock);
}

int im_index_set_similarity(struct im_index *idx, double threshold)
{
	int ret = 0;

	if (!(threshold > 0.0 && threshold <= 1.0))
		return -EINVAL;
	pthread_rwlock_wrlock(&idx->lock);
	if (idx->ndocs)
		ret = -EBUSY;
	else
		idx->threshold = threshold;
	pthread_rwlock_unlock(&idx->lock);
	return ret;
}

/* ---- Queries ------------------------------------------------------------- */

size_t im_index_size(const struct im_index *idx)
{
	size_t n;

	rdlock(idx);
	n = idx->ndocs;
	unlock(idx);
	return n;
}

size_t im_index_cluster_count(const struct im_index *idx)
{
	size_t n;

	rdlock(idx);
	n = idx->clusters;
	unlock(idx);
	return n;
}

uint64_t im_index_generation(const struct im_index *idx)
{
	uint64_t g;

	rdlock(idx);
	g = idx->gen;
	unlock(idx);
	return g;
}

int im_index_get(const struct im_index *idx, const char *path,
		 struct im_doc_sigs *out)
{
	uint32_t id;
	int ret = 0;

	rdlock(idx);
	id = path_find(idx, path);
	if (id == NONE)
		ret = -ENOENT;
	else
		rec_export(D(idx, id), out);
	unlock(idx);
	return ret;
}

/* Holders of an exact key looked at for a text by im_index_copy_of(): copies
 * of one file all hold the same kind of result, so the first is nearly
 * always one, and a key of many holders costs no more than a few. */
#define COPY_OF_TRIES 4

int im_index_copy_of(const struct im_index *idx, const uint8_t exact[16],
		     unsigned skip, char **path, struct im_doc_sigs *out)
{
	struct key key = {IM_KEY_EXACT, 0, exact};
	const uint32_t *ids;
	uint32_t sl, val, n;
	int ret = -ENOENT;

	*path = NULL;
	rdlock(idx);
	sl = posting_slot(idx, &key, key_tag(&key));
	if (sl == NONE)
		goto out;
	val = tab_val(key_table(idx, &key), sl);
	if (val & PL_FLAG) {
		const struct plist *pl = &idx->pl[val & ~PL_FLAG];

		ids = pl_ids(idx, pl);
		n = pl_n(idx, pl);
	} else {
		ids = &val;
		n = 1;
	}
	for (uint32_t i = 0; i < n && i < COPY_OF_TRIES; i++) {
		const struct doc *d = D(idx, ids[i]);

		if (!has_text(d->status) || !doc_exact(d) || skip-- > 0)
			continue;
		*path = strdup(doc_path(d));
		if (!*path) {
			ret = -ENOMEM;
			break;
		}
		rec_export(d, out);
		ret = 0;
		break;
	}
out:
	unlock(idx);
	return ret;
}

/* Were a document and @p y compared under one of its keys[0..n), whose
 * shared postings are pls[] (NULL: it holds the key alone), all[e] saying
 * whether key e compares it with every holder? */
static bool compared_before(const struct im_index *idx, const struct key *keys,
			    const struct plist *const *pls, const bool *all,
			    unsigned n, uint32_t y)
{
	for (unsigned e = 0; e < n; e++) {
		const struct plist *pl = pls[e];

		if (!pl || !doc_has_key(D(idx, y), &keys[e]))
			continue;
		if (all[e] || in_first_hot(idx, pl, y))
			return true;
	}
	return false;
}

int im_index_hot(const struct im_index *idx, const char *path)
{
	struct key keys[NKEYS];
	unsigned nkeys;
	uint32_t id;
	int ret = 0;

	rdlock(idx);
	id = path_find(idx, path);
	if (id == NONE) {
		ret = -ENOENT;
		goto out;
	}
	nkeys = doc_keys(D(idx, id), keys);
	for (unsigned i = 0; i < nkeys && !ret; i++) {
		const struct plist *pl = key_plist(idx, &keys[i]);
		ret = keys[i].kind != IM_KEY_EXACT && pl && pl_n(idx, pl) > HOT;
	}
out:
	unlock(idx);
	return ret;
}

/* im_index_links(), or with @p near_only im_index_links_near(): then the
 * exact key's holders, every one of them an exact copy, are not walked. */
static int links_of(const struct im_index *idx, const char *path,
		    bool near_only, im_index_link_cb cb, void *arg)
{
	const struct plist *pls[NKEYS];
	struct key keys[NKEYS];
	bool all[NKEYS]; /* the key compares the document with every holder */
	const struct doc *d;
	unsigned nkeys;
	uint32_t id;
	int ret = 0;

	rdlock(idx);
	id = path_find(idx, path);
	if (id == NONE) {
		ret = -ENOENT;
		goto out;
	}
	d = D(idx, id);
	nkeys = doc_keys(d, keys);
	for (unsigned i = 0; i < nkeys; i++) {
		const struct plist *pl = pls[i] = key_plist(idx, &keys[i]);
		uint32_t end;

		all[i] = false;
		if (!pl)
			continue; /* only this document */
		end = compared_end(idx, &keys[i], pl, id);
		all[i] = end == pl_n(idx, pl);
		if (near_only && keys[i].kind == IM_KEY_EXACT)
			continue; /* only copies */
		for (uint32_t j = 0; j < end; j++) {
			uint32_t yid = pl_ids(idx, pl)[j];
			const struct doc *y = D(idx, yid);
			struct im_link l;

			/* Judged under the first key that compared them,
			 * without a set (queries run in parallel and do not
			 * allocate); so each pair is verified once. */
			if (yid == id ||
			    compared_before(idx, keys, pls, all, i, yid) ||
			    !verify(idx, d, y, &l.similarity, &l.exact) ||
			    (near_only && l.exact))
				continue;
			l.path = doc_path(y);
			ret = cb(&l, arg);
			if (ret)
				goto out;
		}
	}
out:
	unlock(idx);
	return ret;
}

int im_index_links(const struct im_index *idx, const char *path,
		   im_index_link_cb cb, void *arg)
{
	return links_of(idx, path, false, cb, arg);
}

int im_index_links_near(const struct im_index *idx, const char *path,
			im_index_link_cb cb, void *arg)
{
	return links_of(idx, path, true, cb, arg);
}

struct dupes_arg {
	im_index_path_cb cb;
	void *arg;
};

static int dupes_link(const struct im_link *l, void *arg)
{
	struct dupes_arg *a = arg;

	return a->cb(l->path, a->arg);
}

int im_index_dupes(const struct im_index *idx, const char *path,
		   im_index_path_cb cb, void *arg)
{
	struct dupes_arg a = {cb, arg};

	return im_index_links(idx, path, dupes_link, &a);
}

int im_index_cluster_of(const struct im_index *idx, const char *path,
			struct im_sig *name)
{
	uint32_t id;
	int ret = 0;

	rdlock(idx);
	id = path_find(idx, path);
	if (id == NONE)
		ret = -ENOENT;
	else if (D(idx, id)->m == NONE)
		ret = -ESRCH;
	else
		public_name(idx, comp_of(idx, id), name);
	unlock(idx);
	return ret;
}

int im_index_cluster_members(const struct im_index *idx,
			     const struct im_sig *name, im_index_path_cb cb,
			     void *arg)
{
	uint32_t root;
	int ret = 0;

	rdlock(idx);
	root = names_find(idx, name);
	if (root == NONE) {
		ret = -ENOENT;
		goto out;
	}
	for (uint32_t y = root;;) {
		ret = cb(mem_path(idx, y), arg);
		if (ret)
			goto out;
		y = M(idx, y)->next;
		if (y == root)
			break;
	}
out:
	unlock(idx);
	return ret;
}

int im_index_foreach_cluster(const struct im_index *idx, im_index_cluster_cb cb,
			     void *arg)
{
	int ret = 0;

	rdlock(idx);
	for (uint32_t i = 0; i < idx->names.cap; i++) {
		uint32_t root = tab_val(&idx->names, i);
		struct im_sig name;
		size_t size = 1;

		if (root == NONE)
			continue;
		public_name(idx, root, &name);
		for (uint32_t y = M(idx, root)->next; y != root;
		     y = M(idx, y)->next)
			size++;
		ret = cb(&name, size, arg);
		if (ret)
			break;
	}
	unlock(idx);
	return ret;
}

int im_index_foreach_doc(const struct im_index *idx,
			 int (*cb)(const char *path,
				   const struct im_doc_sigs *d, void *arg),
			 void *arg)
{
	struct im_doc_sigs s;
	int ret = 0;

	rdlock(idx);
	for (uint32_t id = 0; id < idx->docs_used; id++) {
		if (!docs_live(idx, id))
			continue;
		rec_export(D(idx, id), &s);
		ret = cb(doc_path(D(idx, id)), &s, arg);
		if (ret)
			break;
	}
	unlock(idx);
	return ret;
}

/* ---- Candidates and verification, pure ----------------------------------- */

unsigned im_doc_keys(const struct im_doc_sigs *d, struct im_cand_key *out)
{
	unsigned n = 0;

	if (d->status != IM_DOC_SIGNED && d->status != IM_DOC_REJECTED &&
	    d->status != IM_DOC_BINARY && d->status != IM_DOC_FAILED)
		return 0;
	if (d->exact_valid) {
		out[n] = (struct im_cand_key){.kind = IM_KEY_EXACT, .len = 16};
		memcpy(out[n++].b, d->exact, 16);
	}
	/* Binary files and failed extractions relate by their bytes alone
	 * (relating()): the exact key is their only one. */
	if (!has_text(d->status))
		return n;
	for (unsigned k = 0; k < d->ncoords && k < IM_MAX_COORDS; k++) {
		if (!(d->valid & (1u << k)))
			continue;
		out[n] = (struct im_cand_key){.kind = IM_KEY_COORD,
					      .k = (uint8_t)k,
					      .len = IM_KEY_COORD_LEN};
		memcpy(out[n++].b, d->sig[k].b, IM_KEY_COORD_LEN);
	}
	if (d->sketch.n) {
		for (unsigned j = 0; j < IM_SKETCH_BANDS; j++) {
			out[n] = (struct im_cand_key){
				.kind = IM_KEY_BAND,
				.k = (uint8_t)j,
				.len = IM_SKETCH_BAND_BYTES};
			memcpy(out[n++].b, band_bytes(&d->sketch, j),
			       IM_SKETCH_BAND_BYTES);
		}
	}
	return n;
}

bool im_doc_link(const struct im_doc_sigs *a, const struct im_doc_sigs *b,
		 double threshold, double *similarity, bool *exact)
{
	*exact = false;
	*similarity = 0.0;
	if (a->status == IM_DOC_ERROR || a->status == IM_DOC_TOO_BIG ||
	    b->status == IM_DOC_ERROR || b->status == IM_DOC_TOO_BIG)
		return false;
	if (a->exact_valid && b->exact_valid &&
	    !memcmp(a->exact, b->exact, 16)) {
		*exact = true;
		*similarity = 1.0;
		return true;
	}
	if (!has_text(a->status) || !has_text(b->status))
		return false;
	*similarity = im_sketch_similarity(&a->sketch, &b->sketch);
	return *similarity >= threshold;
}

int im_group_links(unsigned kind, const struct im_doc_sigs *const *m, size_t n,
		   double threshold, im_group_link_cb cb, void *arg)
{
	for (size_t i = 0; i < n; i++) {
		for (size_t j = i + 1; j < n; j++) {
			double sim;
			bool exact;
			int ret;

			if (kind != IM_KEY_EXACT && !im_group_pair(i, j))
				break; /* i >= HOT: so is every later j */
			if (!im_doc_link(m[i], m[j], threshold, &sim, &exact))
				continue;
			ret = cb(i, j, sim, exact, arg);
			if (ret)
				return ret;
		}
	}
	return 0;
}
