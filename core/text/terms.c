/**
 * @file terms.c
 * The unique-term set U: an open-addressing hash table (linear probing, load
 * at most 1/4) of 16-byte slots, v[] in insertion order, and a byte arena
 * holding the terms themselves, each followed by a NUL.
 *
 * A term of at most 16 bytes (all but one in a few hundred) is its own key:
 * read as two 8-byte words with the bytes past its end zeroed, it is told
 * apart from every other term by those two words alone, since terms hold no
 * NUL byte, and its slot holds them. Its first byte is never zero, so a slot
 * whose first word is zero is empty, and one whose low byte alone is zero
 * holds a longer term (or the empty one): a tag from its XXH3_64bits and its
 * index in v[], whose bytes are compared on a tag match. A short term's
 * probe starts at the top bits of a multiplicative hash of its key, a longer
 * one's at those of its XXH3_64bits.
 *
 * Three words in four are already in the set, and which ones is a coin toss
 * to the branch predictor: a short word costs one branch per slot probed,
 * taken when its slot or an empty one is found, and is then written as if
 * it were new (slot, v[n], arena) and counted only if it was. The
 * XXH3_64bits that v[] holds (the lexicon looks terms up by it) is computed
 * afterwards, once per unique term, by im_terms_hash_pending(), without a
 * branch between XXH3's formulas for 4 to 8 and 9 to 16 bytes, and with
 * AVX-512 (DQ, BW; found at run time) for eight terms at once. The word
 * scanner hands its short words over in batches (im_terms_add_shorts()),
 * whose adds keep the set's fields in registers and check for room once
 * for as many words as surely fit. Fetching a batch's slots ahead of its
 * adds (the tables of most documents are past L1) measured 7% slower: the
 * adds are bound by their instructions, not by the loads.
 *
 * For the masked reads, whoever hands over a short term leaves 16 bytes
 * readable from its start: the word scanner's buffers do
 * (im_terms_add_padded()), im_terms_add() copies, and the arena keeps 16
 * bytes of slack past its last term.
 *
 * im_terms_clear() keeps every allocation: a worker signs many documents with
 * one struct im_terms and stops allocating once it has seen a large one. The
 * slot table in use shrinks back to its front, though, and
 * im_terms_expect() or growth sizes it again in place, so that a small
 * document's probes stay in a few cache lines. Every slot past the table in
 * use is zero (im_zeroed(), a rehash zeroes what it takes in, a clear what it
 * gives back), so that sizing it again in place writes nothing: a memset
 * of the slots im_terms_expect() took in cost 2% of a scan of plain text.
 *
 * A set keeps at most IM_TERMS_MAX terms (text.h): a word list of 4 million
 * distinct words took 400 MB here (the table alone 64 bytes a term), and a
 * daemon as much again per worker. Past that many it keeps those whose
 * sample_zeros() is at least its level, the least level that leaves at most
 * IM_TERMS_MAX of them: a function of the set alone, whatever the order of
 * the words, so that two near-duplicate word lists keep the same sample of
 * their common terms. The level only rises when the terms read so far
 * already pass IM_TERMS_MAX at it, so it never overshoots; the fast path
 * does not look at it: terms_sample() drops the terms below it when the set
 * is full (TERMS_FULL) and when a text is read (im_terms_settle()).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Inlined: the same XXH3_64bits as libxxhash, without a call per term. */
#define XXH_INLINE_ALL
#include <xxhash.h>

#if defined(__SSE2__) && defined(__x86_64__)
#include <immintrin.h>
#define HAVE_AVX512_HASH 1
#define AVX512_TARGET	 "avx512f,avx512bw,avx512dq"
#endif

#include "bytes.h"
#include "cpu.h"
#include "mem.h"
#include "text.h"
#include "text_internal.h"

#define TERMS_MIN_SLOTS 64
/* Slots a cleared set starts again with: 16 KiB, 256 terms, in L1. */
#define TERMS_RESET_SLOTS 1024
/* The largest table im_terms_expect() makes: 2 MiB, 32768 terms. */
#define TERMS_MAX_EXPECT (1 << 17)
#define TERMS_MIN_V	 32
/* The table stops doubling here, where IM_TERMS_MAX terms fill it to 1/4. */
#define TERMS_MAX_SLOTS ((size_t)4 * IM_TERMS_MAX)
/* Terms a set holds before it is sampled (terms_sample()): half as many
 * again as it keeps, so that a sampling, which reads them all, comes once
 * per IM_TERMS_MAX / 2 new terms at most; the table is then 3/8 full. */
#define TERMS_FULL (IM_TERMS_MAX + IM_TERMS_MAX / 2)
/* Salts the sampling hash: independent of the sketch's and the lexicons'. */
#define SAMPLE_SALT	UINT64_C(0xbb67ae8584caa73b)
#define TERMS_MIN_ARENA 4096
/* Arena bytes a short term is written into: term, NUL, IM_SHORT of slack. */
#define ARENA_ROOM (2 * IM_SHORT + 1)

/* A short term's key, or a longer term's tag and index in v[]; zero: empty. */
struct im_terms_slot {
	uint64_t lo, hi;
};

/* The first word of a longer term's slot: low byte 0, next byte 1. */
static inline uint64_t long_tag(uint64_t hash)
{
	return hash << 16 | 0x100;
}

/* Short terms: len from 1 to IM_SHORT (the empty term is "long"). */
static inline bool is_short(size_t len)
{
	return len - 1 < IM_SHORT;
}

/* Where a short term's probe starts, from the top bits of this: two
 * independent multiplies, so that the probe waits for one. */
static inline uint64_t short_mix(struct im_short_key k)
{
	return k.lo * UINT64_C(0x9e3779b97f4a7c15) +
	       k.hi * UINT64_C(0xbf58476d1ce4e5b9);
}

static inline size_t slot_start(const struct im_terms *t, uint64_t mix)
{
	return (size_t)(mix >> t->shift);
}

/* The slot of term @p i, and in *mix where its probe starts. */
static inline struct im_terms_slot term_slot(const struct im_terms *t, size_t i,
					     uint64_t *mix)
{
	const struct im_term *e = &t->v[i];
	struct im_terms_slot s;

	if (is_short(e->len)) {
		struct im_short_key k = im_short_key(t->arena + e->off, e->len);

		s.lo = k.lo;
		s.hi = k.hi;
		*mix = short_mix(k);
	} else {
		s.lo = long_tag(e->hash);
		s.hi = i;
		*mix = e->hash;
	}
	return s;
}

static inline bool same_slot(const struct im_terms_slot *a,
			     struct im_terms_slot b)
{
	return !((a->lo ^ b.lo) | (a->hi ^ b.hi));
}

/*
 * A slot table of @p n slots, zeroed: a large one apart from the heap on
 * huge pages (mem.h), in one fault instead of one a page (the 2 MB file of
 * the licences corpus: 300 of the scan's 1,800 faults).
 */
static struct im_terms_slot *slots_alloc(size_t n)
{
	if (n > SIZE_MAX / sizeof(struct im_terms_slot))
		return NULL;
	if (n * sizeof(struct im_terms_slot) >= IM_TABLE_HUGE)
		return im_table_alloc(n * sizeof(struct im_terms_slot));
	return im_zeroed(n, sizeof(struct im_terms_slot));
}

static void slots_free(struct im_terms_slot *p, size_t n)
{
	if (n * sizeof(struct im_terms_slot) >= IM_TABLE_HUGE)
		im_table_free(p, n * sizeof(struct im_terms_slot));
	else
		free(p);
}

void im_terms_init(struct im_terms *t)
{
	memset(t, 0, sizeof(*t));
}

void im_terms_release(struct im_terms *t)
{
	free(t->arena);
	free(t->v);
	slots_free(t->slots, t->slots_cap);
	im_terms_init(t);
}

void im_terms_trim(struct im_terms *t, size_t keep)
{
	size_t held = t->slots_cap * sizeof(*t->slots) +
		      t->cap * sizeof(*t->v) + t->arena_cap;

	if (held > keep)
		im_terms_release(t);
}

static void set_nslots(struct im_terms *t, size_t nslots)
{
	t->nslots = nslots;
	t->shift = 64 - (unsigned)__builtin_ctzll(nslots);
}

/* What im_terms_add_padded() checks before it writes a short term, after
 * a change of nslots, cap or arena_cap. */
static void set_room(struct im_terms *t)
{
	size_t acap = t->arena_cap < UINT32_MAX ? t->arena_cap : UINT32_MAX;

	size_t most = t->nslots < TERMS_MAX_SLOTS ? t->nslots / 4 : TERMS_FULL;

	t->room = most < t->cap ? most : t->cap;
	t->arena_room = acap >= ARENA_ROOM ? acap - ARENA_ROOM + 1 : 0;
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
	 * Searching costs as much as wiping some hundred slots: below 1 in 8
	 * slots in use (the table is at most 1 in 4 full) the words bench
	 * spent 2% more time than below 1 in 128.
	 */
	if (t->n * 128 < t->nslots) {
		for (size_t i = 0; i < t->n; i++) {
			uint64_t mix;
			struct im_terms_slot s = term_slot(t, i, &mix);
			size_t j = slot_start(t, mix);

			while (!same_slot(&t->slots[j], s))
				j = (j + 1) & mask;
			t->slots[j].lo = 0;
			t->slots[j].hi = 0;
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
		set_nslots(t, TERMS_RESET_SLOTS);
	set_room(t);
out:
	t->n = 0;
	t->hashed = 0;
	t->arena_len = 0;
	t->level = 0;
	t->settled = 0;
}

/* Insert every term of v[] into the zeroed table t->slots. */
static void reinsert(struct im_terms *t)
{
	size_t mask = t->nslots - 1;

	for (size_t i = 0; i < t->n; i++) {
		uint64_t mix;
		struct im_terms_slot s = term_slot(t, i, &mix);
		size_t j = slot_start(t, mix);

		while (t->slots[j].lo)
			j = (j + 1) & mask;
		t->slots[j] = s;
	}
}

/*
 * Double the slot table and reinsert every term (v[] holds them all); in
 * place while the allocation has room.
 */
static int terms_rehash(struct im_terms *t)
{
	size_t nslots = t->nslots ? t->nslots * 2 : TERMS_MIN_SLOTS;
	struct im_terms_slot *slots = t->slots;

	if (nslots > t->slots_cap) {
		slots = slots_alloc(nslots);
		if (!slots)
			return -ENOMEM;
		slots_free(t->slots, t->slots_cap);
		t->slots_cap = nslots;
	} else {
		memset(slots, 0, nslots * sizeof(*slots));
	}
	t->slots = slots;
	set_nslots(t, nslots);
	reinsert(t);
	return 0;
}

/* How many leading zero bits the sampling hash of a term has (0 to 64). */
static inline unsigned sample_zeros(uint64_t hash)
{
	uint64_t z = hash ^ SAMPLE_SALT;

	/* MurmurHash3's finaliser: the table and the lexicons index by bits
	 * of the hash itself, which a sample must not all share. */
	z ^= z >> 33;
	z *= UINT64_C(0xff51afd7ed558ccd);
	z ^= z >> 33;
	z *= UINT64_C(0xc4ceb9fe1a85ec53);
	z ^= z >> 33;
	return z ? (unsigned)__builtin_clzll(z) : 64;
}

/*
 * Keep the terms whose sample_zeros() is at least the least level (not
 * below t->level) that leaves at most IM_TERMS_MAX of them, and rebuild the
 * table over them: in place, allocating nothing.
 */
static void terms_sample(struct im_terms *t)
{
	size_t count[65] = {0}, keep = 0, m = 0, arena_len = 0;
	unsigned level = t->level;

	im_terms_hash_pending(t);
	for (size_t i = 0; i < t->n; i++)
		count[sample_zeros(t->v[i].hash)]++;
	for (unsigned z = level; z <= 64; z++)
		keep += count[z];
	while (keep > IM_TERMS_MAX)
		keep -= count[level++];
	for (size_t i = 0; i < t->n; i++) {
		struct im_term e = t->v[i];

		if (sample_zeros(e.hash) < level)
			continue;
		/* Down, in order: a term's new place never passes its old. */
		memmove(t->arena + arena_len, t->arena + e.off, e.len + 1);
		e.off = (uint32_t)arena_len;
		t->v[m++] = e;
		arena_len += e.len + 1;
	}
	t->n = m;
	t->hashed = m;
	t->settled = m;
	t->arena_len = arena_len;
	t->level = level;
	memset(t->slots, 0, t->nslots * sizeof(*t->slots));
	reinsert(t);
}

void im_terms_settle(struct im_terms *t)
{
	if (t->n > IM_TERMS_MAX || (t->level && t->settled < t->n))
		terms_sample(t);
	else
		im_terms_hash_pending(t);
}

/* Grow *p to hold @p need elements, doubling, but to no more than @p most
 * when @p need fits in that many. */
static int grow(void **p, size_t *cap, size_t need, size_t elem, size_t min,
		size_t most)
{
	size_t c = *cap ? *cap : min;
	void *np;

	while (c < need) {
		if (c > SIZE_MAX / 2 / elem)
			return -ENOMEM;
		c *= 2;
	}
	if (c > most && need <= most && *cap < most)
		c = most;
	if (c == *cap)
		return 0;
	np = realloc(*p, c * elem);
	if (!np)
		return -ENOMEM;
	*p = np;
	*cap = c;
	return 0;
}

/*
 * Room for one more term: an entry in v[], a short term's ARENA_ROOM in the
 * arena, and a slot with the load still at most 1/4 (3/8 in the largest
 * table), after a sampling if the set is full. Out of line, so that the add
 * of a short term saves few registers.
 */
static __attribute__((noinline)) int make_room(struct im_terms *t)
{
	int ret;

	if (t->n + 1 > TERMS_FULL)
		terms_sample(t);
	/* Offsets and lengths are 32-bit; the arena holds term + NUL. */
	if (t->n + 1 >= UINT32_MAX)
		return -ENOMEM;
	ret = grow((void **)&t->v, &t->cap, t->n + 1, sizeof(*t->v),
		   TERMS_MIN_V, TERMS_FULL);
	if (ret)
		return ret;
	if ((t->n + 1) * 4 > t->nslots && t->nslots < TERMS_MAX_SLOTS) {
		ret = terms_rehash(t);
		if (ret)
			return ret;
	}
	if (t->arena_len + ARENA_ROOM > UINT32_MAX)
		return -ENOMEM;
	ret = grow((void **)&t->arena, &t->arena_cap, t->arena_len + ARENA_ROOM,
		   1, TERMS_MIN_ARENA, SIZE_MAX);
	set_room(t);
	return ret;
}

/* im_terms_add_padded() for a term that is not short: one in hundreds. */
static __attribute__((noinline)) int add_long(struct im_terms *t, const char *s,
					      size_t len)
{
	uint64_t hash = XXH3_64bits(s, len);
	struct im_terms_slot slot = {long_tag(hash), 0};
	size_t mask, j;
	int ret;

	if (len >= UINT32_MAX || t->arena_len + len + 1 > UINT32_MAX)
		return -ENOMEM;
	ret = make_room(t);
	if (ret)
		return ret;
	/* After make_room(): a sampling changes n. */
	slot.hi = t->n;
	mask = t->nslots - 1;
	for (j = slot_start(t, hash); t->slots[j].lo; j = (j + 1) & mask) {
		const struct im_term *e;

		if (t->slots[j].lo != slot.lo)
			continue;
		e = &t->v[t->slots[j].hi];
		if (e->len == len && !memcmp(t->arena + e->off, s, len))
			return 0;
	}
	ret = grow((void **)&t->arena, &t->arena_cap,
		   t->arena_len + len + 1 + IM_SHORT, 1, TERMS_MIN_ARENA,
		   SIZE_MAX);
	set_room(t);
	if (ret)
		return ret;
	memcpy(t->arena + t->arena_len, s, len);
	t->arena[t->arena_len + len] = '\0';
	t->v[t->n].off = (uint32_t)t->arena_len;
	t->v[t->n].len = (uint32_t)len;
	t->v[t->n].hash = hash;
	t->arena_len += len + 1;
	t->n++;
	t->slots[j] = slot;
	return 0;
}

void im_terms_expect(struct im_terms *t, size_t n)
{
	size_t want = TERMS_MIN_SLOTS;
	struct im_terms_slot *slots;

	if (t->n)
		return;
	while (want / 4 < n && want < TERMS_MAX_EXPECT)
		want *= 2;
	if (want > t->slots_cap) {
		slots = slots_alloc(want);
		if (!slots)
			return;
		slots_free(t->slots, t->slots_cap);
		t->slots = slots;
		t->slots_cap = want;
	}
	set_nslots(t, want);
	set_room(t);
}

/*
 * How many more short terms fit without make_room(): each add checks room
 * before it takes at most one entry and ARENA_ROOM bytes, so none of these
 * would have called it.
 */
static inline size_t room_for(size_t n, size_t room, size_t arena_len,
			      size_t arena_room)
{
	size_t terms = n < room ? room - n : 0;
	size_t bytes = arena_len < arena_room ? arena_room - arena_len : 0;
	size_t by_bytes = (bytes + ARENA_ROOM - 1) / ARENA_ROOM;

	return terms < by_bytes ? terms : by_bytes;
}

int im_terms_add_shorts(struct im_terms *t, const struct im_short_key *keys,
			const uint8_t *lens, size_t nw)
{
	/*
	 * The set's fields live in registers for the batch: the arena is
	 * written through a char pointer, which would otherwise make the
	 * compiler load them again after every add.
	 */
	char *slots = (char *)t->slots;
	struct im_term *v = t->v, *next;
	char *arena = t->arena;
	size_t n = t->n, arena_len = t->arena_len;
	/* Probes count in bytes into the slots: no scaling per probe. */
	size_t mask = (t->nslots - 1) * sizeof(struct im_terms_slot);
	unsigned shift = t->shift - 4;
	size_t i = 0;
	int ret;

	while (i < nw) {
		size_t fit = room_for(n, t->room, arena_len, t->arena_room);
		size_t stop;

		if (!fit) {
			t->n = n;
			t->arena_len = arena_len;
			ret = make_room(t);
			if (ret)
				return ret;
			/* A sampling moves terms and drops some. */
			n = t->n;
			arena_len = t->arena_len;
			slots = (char *)t->slots;
			v = t->v;
			arena = t->arena;
			mask = (t->nslots - 1) * sizeof(struct im_terms_slot);
			shift = t->shift - 4;
			continue;
		}
		stop = nw - i < fit ? nw : i + fit;
		/* The next entry of v[], moved on by a new term. */
		next = v + n;
		for (; i < stop; i++) {
			struct im_short_key key = keys[i];
			size_t len = lens[i];
			struct im_terms_slot *e;
			uint64_t fresh;
			char *a;
			size_t j;

			/*
			 * Stop at its slot or at an empty one, on one test:
			 * the smaller of the slot's first word and how the
			 * slot differs from the key is zero when either is.
			 * The empty asm statement keeps the compiler from
			 * splitting the test in two branches again, the first
			 * of them taken at random.
			 */
			for (j = (size_t)(short_mix(key) >> shift) &
				 ~(size_t)15;
			     ; j = (j + sizeof(*e)) & mask) {
				uint64_t differ, go_on;

				e = (struct im_terms_slot *)(slots + j);
				differ = (e->lo ^ key.lo) | (e->hi ^ key.hi);
				go_on = differ < e->lo ? differ : e->lo;
				__asm__("" : "+r"(go_on));
				if (!go_on)
					break;
			}
			/* Written whether new or not, counted only if new.
			 * The arena gets the key, so the NUL after the term
			 * is already there below 16 bytes. */
			fresh = e->lo == 0;
			e->lo = key.lo;
			e->hi = key.hi;
			a = arena + arena_len;
			memcpy(a, &key.lo, 8);
			memcpy(a + 8, &key.hi, 8);
			a[len] = '\0';
			next->off = (uint32_t)arena_len;
			next->len = (uint32_t)len;
			next += fresh;
			arena_len += (len + 1) & -fresh;
		}
		n = (size_t)(next - v);
	}
	t->n = n;
	t->arena_len = arena_len;
	return 0;
}

int im_terms_add_padded(struct im_terms *t, const char *s, size_t len)
{
	struct im_short_key key;
	uint8_t len8 = (uint8_t)len;

	if (!is_short(len))
		return add_long(t, s, len);
	key = im_short_key(s, len);
	return im_terms_add_shorts(t, &key, &len8, 1);
}

/*
 * XXH3_64bits(s, len) for len from 4 to 16, 16 bytes readable at @p s:
 * XXH3's own code for these lengths (xxhash.h, 0.8: 4 to 8 bytes and 9 to
 * 16 bytes are two formulas) branches between the two, which for the words
 * of a text goes one way or the other at random. Both are computed here and
 * one is taken without a branch: the words are independent, so the two
 * formulas of one overlap with those of the next. The test suite checks
 * this against libxxhash's XXH3_64bits on every length.
 */
static inline uint64_t xxh3_4to16(const char *s, size_t len)
{
	const uint8_t *sec = XXH3_kSecret;
	uint64_t bitflip48 = XXH_readLE64(sec + 8) ^ XXH_readLE64(sec + 16);
	uint64_t bitflip1 = XXH_readLE64(sec + 24) ^ XXH_readLE64(sec + 32);
	uint64_t bitflip2 = XXH_readLE64(sec + 40) ^ XXH_readLE64(sec + 48);
	/* 4 to 8 bytes: the first and the last four as one word. */
	uint64_t in48 =
		((uint64_t)XXH_readLE32(s) << 32) + XXH_readLE32(s + len - 4);
	uint64_t h48 = XXH3_rrmxmx(in48 ^ bitflip48, len);
	/* 9 to 16: the first and the last eight (any eight below 9). */
	size_t last8 = len > 8 ? len - 8 : 0;
	uint64_t lo = XXH_readLE64(s) ^ bitflip1;
	uint64_t hi = XXH_readLE64(s + last8) ^ bitflip2;
	uint64_t h916 = XXH3_avalanche(len + __builtin_bswap64(lo) + hi +
				       XXH3_mul128_fold64(lo, hi));
	uint64_t pick = -(uint64_t)(len > 8);

	__asm__("" : "+r"(pick));
	return (h916 & pick) | (h48 & ~pick);
}

#ifdef HAVE_AVX512_HASH
/*
 * xxh3_4to16() of the terms v[0, 8) at once, written into their v[].hash.
 * A term of another length gets a wrong one, for the caller to redo:
 * @return the mask of those (bit k for v[k]), one term in hundreds. Eight
 * terms take about as many instructions as one does alone: their first
 * 16 bytes are loaded four terms to a register, XXH3's 64 x 64 -> 128-bit
 * product is made of four 32 x 32-bit ones.
 */
static __attribute__((target(AVX512_TARGET))) unsigned
hash8_avx512(struct im_term *v, const char *arena)
{
	const uint8_t *sec = XXH3_kSecret;
	const __m512i low32 = _mm512_set1_epi64(0xffffffff);
	/* Within each 8 bytes, the bytes in reverse order. */
	const __m512i reverse = _mm512_set4_epi32(0x08090a0b, 0x0c0d0e0f,
						  0x00010203, 0x04050607);
	__m512i lo_half = _mm512_loadu_si512(v);
	__m512i hi_half = _mm512_loadu_si512(v + 4);
	/* off | len << 32 of each term: the even words of v[0, 8). */
	__m512i off_len = _mm512_permutex2var_epi64(
		lo_half, _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0), hi_half);
	__m512i len = _mm512_srli_epi64(off_len, 32);
	__m512i four[2], first8, second8, last8;
	__m512i h48, lo, hi, a_hi, b_hi, cross, mid, fold, h916, hash;

	/* The first 16 bytes of each term (all are readable): two gathers
	 * of 8 bytes instead measured 3% slower on the words bench. */
	for (unsigned q = 0; q < 2; q++) {
		const struct im_term *e = v + 4 * q;

		four[q] = _mm512_castsi128_si512(
			_mm_loadu_si128((const __m128i *)(arena + e[0].off)));
		four[q] = _mm512_inserti64x2(
			four[q],
			_mm_loadu_si128((const __m128i *)(arena + e[1].off)),
			1);
		four[q] = _mm512_inserti64x2(
			four[q],
			_mm_loadu_si128((const __m128i *)(arena + e[2].off)),
			2);
		four[q] = _mm512_inserti64x2(
			four[q],
			_mm_loadu_si128((const __m128i *)(arena + e[3].off)),
			3);
	}
	first8 = _mm512_permutex2var_epi64(
		four[0], _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0), four[1]);
	second8 = _mm512_permutex2var_epi64(
		four[0], _mm512_set_epi64(15, 13, 11, 9, 7, 5, 3, 1), four[1]);
	/* The last eight of 9 to 16 bytes (shifts past 63 give zero). */
	last8 = _mm512_or_si512(
		_mm512_srlv_epi64(
			first8,
			_mm512_slli_epi64(
				_mm512_sub_epi64(len, _mm512_set1_epi64(8)),
				3)),
		_mm512_sllv_epi64(
			second8,
			_mm512_slli_epi64(
				_mm512_sub_epi64(_mm512_set1_epi64(16), len),
				3)));

	/* 4 to 8 bytes: XXH3_rrmxmx() of the first and last four. */
	h48 = _mm512_add_epi64(
		_mm512_slli_epi64(first8, 32),
		_mm512_and_si512(
			_mm512_srlv_epi64(
				first8,
				_mm512_slli_epi64(
					_mm512_sub_epi64(len,
							 _mm512_set1_epi64(4)),
					3)),
			low32));
	h48 = _mm512_xor_si512(
		h48, _mm512_set1_epi64((long long)(XXH_readLE64(sec + 8) ^
						   XXH_readLE64(sec + 16))));
	/* h ^= rotl(h, 49) ^ rotl(h, 24): 0x96 is a three-way xor. */
	h48 = _mm512_ternarylogic_epi64(h48, _mm512_rol_epi64(h48, 49),
					_mm512_rol_epi64(h48, 24), 0x96);
	h48 = _mm512_mullo_epi64(h48, _mm512_set1_epi64(0x9FB21C651E98DF25LL));
	h48 = _mm512_xor_si512(
		h48, _mm512_add_epi64(_mm512_srli_epi64(h48, 35), len));
	h48 = _mm512_mullo_epi64(h48, _mm512_set1_epi64(0x9FB21C651E98DF25LL));
	h48 = _mm512_xor_si512(h48, _mm512_srli_epi64(h48, 28));

	/* 9 to 16 bytes: the first and last eight, their product folded. */
	lo = _mm512_xor_si512(
		first8, _mm512_set1_epi64((long long)(XXH_readLE64(sec + 24) ^
						      XXH_readLE64(sec + 32))));
	hi = _mm512_xor_si512(
		last8, _mm512_set1_epi64((long long)(XXH_readLE64(sec + 40) ^
						     XXH_readLE64(sec + 48))));
	a_hi = _mm512_srli_epi64(lo, 32);
	b_hi = _mm512_srli_epi64(hi, 32);
	cross = _mm512_mul_epu32(lo, b_hi);
	mid = _mm512_mul_epu32(a_hi, hi);
	/* The upper 64 bits: a_hi * b_hi, the halves of the cross
	 * products above bit 64, and the carry out of bits 32 to 63. */
	fold = _mm512_add_epi64(
		_mm512_add_epi64(_mm512_mul_epu32(a_hi, b_hi),
				 _mm512_srli_epi64(cross, 32)),
		_mm512_add_epi64(
			_mm512_srli_epi64(mid, 32),
			_mm512_srli_epi64(
				_mm512_add_epi64(
					_mm512_add_epi64(
						_mm512_srli_epi64(
							_mm512_mul_epu32(lo,
									 hi),
							32),
						_mm512_and_si512(cross, low32)),
					_mm512_and_si512(mid, low32)),
				32)));
	fold = _mm512_xor_si512(fold, _mm512_mullo_epi64(lo, hi));
	h916 = _mm512_add_epi64(
		_mm512_add_epi64(len, _mm512_shuffle_epi8(lo, reverse)),
		_mm512_add_epi64(hi, fold));
	h916 = _mm512_xor_si512(h916, _mm512_srli_epi64(h916, 37));
	h916 = _mm512_mullo_epi64(h916,
				  _mm512_set1_epi64(0x165667919E3779F9LL));
	h916 = _mm512_xor_si512(h916, _mm512_srli_epi64(h916, 32));

	hash = _mm512_mask_blend_epi64(
		_mm512_cmpgt_epu64_mask(len, _mm512_set1_epi64(8)), h48, h916);
	/* Into the odd words of v[0, 8). */
	lo_half = _mm512_mask_permutexvar_epi64(
		lo_half, 0xaa, _mm512_set_epi64(3, 3, 2, 2, 1, 1, 0, 0), hash);
	hi_half = _mm512_mask_permutexvar_epi64(
		hi_half, 0xaa, _mm512_set_epi64(7, 7, 6, 6, 5, 5, 4, 4), hash);
	_mm512_storeu_si512(v, lo_half);
	_mm512_storeu_si512(v + 4, hi_half);
	return _mm512_cmpgt_epu64_mask(
		_mm512_sub_epi64(len, _mm512_set1_epi64(4)),
		_mm512_set1_epi64(IM_SHORT - 4));
}
#endif

/* v[i].hash of one term. */
static inline uint64_t term_hash(const char *arena, const struct im_term *e)
{
	const char *s = arena + e->off;

	/* The arena has IM_SHORT bytes past every term start. */
	return e->len - 4 <= IM_SHORT - 4 ? xxh3_4to16(s, e->len)
					  : XXH3_64bits(s, e->len);
}

#ifdef HAVE_AVX512_HASH
/* Whether this CPU runs hash8_avx512() (checked once per process: glibc's
 * answers, cpu.h, are calls into it). */
static bool have_hash8(void)
{
	/* Shared by the scan's workers: a race only computes it twice. */
	static int known = -1;
	int k = __atomic_load_n(&known, __ATOMIC_RELAXED);

	if (k < 0) {
		k = IM_CPU_HAS(AVX512F, "avx512f") &&
		    IM_CPU_HAS(AVX512BW, "avx512bw") &&
		    IM_CPU_HAS(AVX512DQ, "avx512dq");
		__atomic_store_n(&known, k, __ATOMIC_RELAXED);
	}
	return k;
}
#endif

void im_terms_hash_pending(struct im_terms *t)
{
	size_t i = t->hashed;

#ifdef HAVE_AVX512_HASH
	if (t->n - i >= 8 && have_hash8()) {
		for (; t->n - i >= 8; i += 8) {
			unsigned redo = hash8_avx512(t->v + i, t->arena);

			for (; redo; redo &= redo - 1) {
				struct im_term *e =
					&t->v[i +
					      (unsigned)__builtin_ctz(redo)];

				e->hash = term_hash(t->arena, e);
			}
		}
	}
#endif
	for (; i < t->n; i++)
		t->v[i].hash = term_hash(t->arena, &t->v[i]);
	t->hashed = t->n;
}

int im_terms_add(struct im_terms *t, const char *s, size_t len)
{
	char pad[IM_SHORT] = {0};
	size_t n = t->n;
	int ret;

	/* Below the level already: one sampling per term would not do for
	 * a spreadsheet of millions of number cells. */
	if (t->level && sample_zeros(XXH3_64bits(s, len)) < t->level)
		return 0;
	if (len > IM_SHORT) {
		ret = im_terms_add_padded(t, s, len);
	} else {
		memcpy(pad, s, len);
		ret = im_terms_add_padded(t, pad, len);
	}
	if (t->settled == n)
		t->settled = t->n;
	im_terms_settle(t);
	return ret;
}
