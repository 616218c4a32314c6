/**
 * @file terms.c
 * The unique-term set U: an open-addressing hash table (linear probing, load
 * at most 1/4) whose slots hold indexes into v[], and a byte arena holding
 * the terms themselves, each followed by a NUL.
 *
 * Three words in four are already in the set, so a word that is found must
 * cost little. A term of at most 16 bytes is read as two 8-byte words with
 * the bytes past its end masked off: its probe hash mixes those two and its
 * comparison is two XORs, without a branch on its length. Longer terms probe
 * by the low bits of their XXH3_64bits and compare with memcmp(). The
 * XXH3_64bits that v[] holds (the lexicon looks terms up by it) is computed
 * once per unique term, when it is inserted. For the masked reads, whoever
 * hands over a short term leaves 16 bytes readable from its start: the word
 * scanner's buffers do (im_terms_add_padded()), im_terms_add() copies, and
 * the arena keeps 16 bytes of slack past its last term.
 *
 * im_terms_clear() keeps every allocation: a worker signs many documents with
 * one struct im_terms and stops allocating once it has seen a large one. The
 * slot table in use shrinks back to its front, though, and grows again in
 * place, so that a small document's probes stay in a few cache lines.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Inlined: the same XXH3_64bits as libxxhash, without a call per term. */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "bytes.h"
#include "text.h"
#include "text_internal.h"

#define TERMS_MIN_SLOTS 64
/* Slots a cleared set starts again with: 8 KiB, 512 terms, in L1. */
#define TERMS_RESET_SLOTS 2048
#define TERMS_MIN_V	  32
#define TERMS_MIN_ARENA	  4096
static inline uint32_t short_hash(struct im_short_key k, size_t len)
{
	uint64_t x = (k.lo ^ UINT64_C(0x9e3779b97f4a7c15)) *
			     UINT64_C(0xbf58476d1ce4e5b9) ^
		     (k.hi + len) * UINT64_C(0x94d049bb133111eb);

	return (uint32_t)((x ^ x >> 29) >> 16 ^ x >> 40);
}

/* Where the term s[0, len) starts its probe (IM_SHORT readable if short). */
static inline uint32_t probe_hash(const char *s, size_t len)
{
	if (len <= IM_SHORT)
		return short_hash(im_short_key(s, len), len);
	return (uint32_t)XXH3_64bits(s, len);
}

static inline uint32_t term_probe(const struct im_terms *t, size_t i)
{
	return probe_hash(t->arena + t->v[i].off, t->v[i].len);
}

void im_terms_init(struct im_terms *t)
{
	memset(t, 0, sizeof(*t));
}

void im_terms_release(struct im_terms *t)
{
	free(t->arena);
	free(t->v);
	free(t->slots);
	im_terms_init(t);
}

void im_terms_clear(struct im_terms *t)
{
	size_t mask = t->nslots - 1;

	if (!t->slots)
		goto out;
	/*
	 * A small document in a table grown by a large one: forget its few
	 * slots one by one instead of wiping the whole table. Each term is
	 * searched for past emptied slots, so the order does not matter.
	 */
	if (t->n * 8 < t->nslots) {
		for (size_t i = 0; i < t->n; i++) {
			size_t s = term_probe(t, i) & mask;

			while (t->slots[s] != i + 1)
				s = (s + 1) & mask;
			t->slots[s] = 0;
		}
	} else {
		memset(t->slots, 0, t->nslots * sizeof(*t->slots));
	}
	/*
	 * The next document starts small again, in the front of the same
	 * allocation: spread over a table a large document grew, its terms
	 * would miss the cache on every word.
	 */
	if (t->nslots > TERMS_RESET_SLOTS)
		t->nslots = TERMS_RESET_SLOTS;
out:
	t->n = 0;
	t->arena_len = 0;
}

/*
 * Double the slot table and reinsert every term (v[] holds them all); in
 * place while the allocation has room.
 */
static int terms_rehash(struct im_terms *t)
{
	size_t nslots = t->nslots ? t->nslots * 2 : TERMS_MIN_SLOTS;
	size_t mask = nslots - 1;
	uint32_t *slots = t->slots;

	if (nslots > t->slots_cap) {
		if (nslots > (SIZE_MAX / sizeof(*slots)) ||
		    nslots - 1 > UINT32_MAX)
			return -ENOMEM;
		slots = calloc(nslots, sizeof(*slots));
		if (!slots)
			return -ENOMEM;
		free(t->slots);
		t->slots_cap = nslots;
	} else {
		memset(slots, 0, nslots * sizeof(*slots));
	}
	for (size_t i = 0; i < t->n; i++) {
		size_t s = term_probe(t, i) & mask;

		while (slots[s])
			s = (s + 1) & mask;
		slots[s] = (uint32_t)(i + 1);
	}
	t->slots = slots;
	t->nslots = nslots;
	return 0;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem, size_t min)
{
	size_t c = *cap ? *cap : min;
	void *np;

	while (c < need) {
		if (c > SIZE_MAX / 2 / elem)
			return -ENOMEM;
		c *= 2;
	}
	if (c == *cap)
		return 0;
	np = realloc(*p, c * elem);
	if (!np)
		return -ENOMEM;
	*p = np;
	*cap = c;
	return 0;
}

/* Append a term known to be absent, whose slot is @i (IM_SHORT bytes readable
 * at @p s if it is short). */
static int terms_insert(struct im_terms *t, const char *s, size_t len, size_t i)
{
	char *a;
	int ret;

	/* Offsets and lengths are 32-bit; the arena holds term + NUL. */
	if (len >= UINT32_MAX || t->arena_len + len + 1 > UINT32_MAX ||
	    t->n + 1 >= UINT32_MAX)
		return -ENOMEM;
	ret = grow((void **)&t->v, &t->cap, t->n + 1, sizeof(*t->v),
		   TERMS_MIN_V);
	if (ret)
		return ret;
	ret = grow((void **)&t->arena, &t->arena_cap,
		   t->arena_len + len + 1 + IM_SHORT, 1, TERMS_MIN_ARENA);
	if (ret)
		return ret;

	a = t->arena + t->arena_len;
	if (len <= IM_SHORT)
		memcpy(a, s, IM_SHORT); /* one fixed-size copy, not a call */
	else
		memcpy(a, s, len);
	a[len] = '\0';
	t->v[t->n].off = (uint32_t)t->arena_len;
	t->v[t->n].len = (uint32_t)len;
	t->v[t->n].hash = XXH3_64bits(s, len);
	t->arena_len += len + 1;
	t->n++;
	t->slots[i] = (uint32_t)t->n;
	return 0;
}

int im_terms_add_padded(struct im_terms *t, const char *s, size_t len)
{
	size_t mask, i;
	uint32_t k;
	int ret;

	/*
	 * Keep the load at most 1/4: a quarter of the words are new to their
	 * document, and with linear probing the search for a new word's free
	 * slot passes 1.5 taken slots on average at load 1/2, 0.4 at 1/4
	 * (a word seen before: 0.5 and 0.17). Slots take 16 to 32 bytes per
	 * term instead of 8 to 16.
	 */
	if ((t->n + 1) * 4 > t->nslots) {
		ret = terms_rehash(t);
		if (ret)
			return ret;
	}
	mask = t->nslots - 1;
	if (len <= IM_SHORT) {
		struct im_short_key key = im_short_key(s, len);

		for (i = short_hash(key, len) & mask; (k = t->slots[i]);
		     i = (i + 1) & mask) {
			const struct im_term *e = &t->v[k - 1];
			if (e->len == len &&
			    im_short_eq(im_short_key(t->arena + e->off, len),
					key))
				return 0;
		}
	} else {
		for (i = probe_hash(s, len) & mask; (k = t->slots[i]);
		     i = (i + 1) & mask) {
			const struct im_term *e = &t->v[k - 1];

			if (e->len == len && !memcmp(t->arena + e->off, s, len))
				return 0;
		}
	}
	return terms_insert(t, s, len, i);
}

int im_terms_add(struct im_terms *t, const char *s, size_t len)
{
	char pad[IM_SHORT] = {0};

	if (len > IM_SHORT)
		return im_terms_add_padded(t, s, len);
	memcpy(pad, s, len);
	return im_terms_add_padded(t, pad, len);
}
