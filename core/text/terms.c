/**
 * @file terms.c
 * The unique-term set U: an open-addressing hash table (linear probing, load
 * at most 1/4) whose slots hold indexes into v[], and a byte arena holding
 * the terms themselves, each followed by a NUL. Keys are XXH3_64bits of the
 * term's bytes, the same hash the lexicon looks terms up by, so it is
 * computed once per unique term.
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

#define TERMS_MIN_SLOTS 64
/* Slots a cleared set starts again with: 8 KiB, 512 terms, in L1. */
#define TERMS_RESET_SLOTS 2048
#define TERMS_MIN_V	  32
#define TERMS_MIN_ARENA	  4096

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
			size_t s = t->v[i].hash & mask;

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
		size_t s = t->v[i].hash & mask;

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

/* Append a term known to be absent, whose slot is @i. */
static int terms_insert(struct im_terms *t, const char *s, size_t len,
			uint64_t h, size_t i)
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
	ret = grow((void **)&t->arena, &t->arena_cap, t->arena_len + len + 1, 1,
		   TERMS_MIN_ARENA);
	if (ret)
		return ret;

	a = t->arena + t->arena_len;
	if (len >= 8 && len <= 16) {
		/* Two overlapping copies rather than a call per term. */
		uint64_t x, y;

		memcpy(&x, s, 8);
		memcpy(&y, s + len - 8, 8);
		memcpy(a, &x, 8);
		memcpy(a + len - 8, &y, 8);
	} else if (len >= 4 && len < 8) {
		uint32_t x, y;

		memcpy(&x, s, 4);
		memcpy(&y, s + len - 4, 4);
		memcpy(a, &x, 4);
		memcpy(a + len - 4, &y, 4);
	} else {
		memcpy(a, s, len);
	}
	a[len] = '\0';
	t->v[t->n].off = (uint32_t)t->arena_len;
	t->v[t->n].len = (uint32_t)len;
	t->v[t->n].hash = h;
	t->arena_len += len + 1;
	t->n++;
	t->slots[i] = (uint32_t)t->n;
	return 0;
}

int im_terms_add(struct im_terms *t, const char *s, size_t len)
{
	uint64_t h = XXH3_64bits(s, len);
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
	for (i = h & mask; (k = t->slots[i]); i = (i + 1) & mask) {
		const struct im_term *e = &t->v[k - 1];

		if (e->hash == h && e->len == len &&
		    im_same_bytes(t->arena + e->off, s, len))
			return 0;
	}
	return terms_insert(t, s, len, h, i);
}
