/**
 * @file sha1.c
 * SHA-1 (FIPS 180-4) of several messages at once: in AVX-512VL vector lanes,
 * or two in one stream of the SHA extensions, with OpenSSL's as the
 * fallback (sha1.h).
 *
 * SHA extensions: the state sits in two registers as the instructions want it: ABCD with A
 * in the highest lane, and E in the highest lane of another. A block's
 * sixteen words load byte-reversed as a whole, which swaps each word to big
 * endian and puts the first word in the highest lane. Round group j (four
 * rounds) takes message words 4j..4j+3; from group 4 on they are computed
 * from the four groups before (sha1msg1, xor, sha1msg2), in a ring of four
 * registers. Each group's E comes from the ABCD of the group before last
 * (sha1nexte).
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/opensslv.h>

#include "cpu.h"
#include "dl.h"
#include "sha1.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_SHANI_CODE 1
#include <cpuid.h>
#include <immintrin.h>
#else
#define HAVE_SHANI_CODE 0
#endif

struct im_sha1 {
	enum im_sha1_impl impl;
	EVP_MD *md; /* IM_SHA1_OPENSSL only */
	EVP_MD_CTX *ctx;
};

/* ---- The SHA extensions ------------------------------------------------ */

#if HAVE_SHANI_CODE

#define SHANI __attribute__((target("sha,sse4.1")))

/* One message as a lane sees it: its whole blocks where they are, then
 * the padded tail (one or two blocks) in tail[]. */
struct lane {
	uint32_t st[5];
	const unsigned char *p; /* the next block */
	size_t nblk;		/* blocks left at p */
	int in_tail;
	const struct im_sha1_msg *m;
	unsigned char tail[128];
	size_t ntail;
};

static void lane_start(struct lane *l, const struct im_sha1_msg *m)
{
	static const uint32_t init[5] = {0x67452301, 0xefcdab89, 0x98badcfe,
					 0x10325476, 0xc3d2e1f0};
	size_t rest = m->len % 64;
	uint64_t bits = (uint64_t)m->len * 8;

	memcpy(l->st, init, sizeof(init));
	l->m = m;
	l->p = m->data;
	l->nblk = m->len / 64;
	l->in_tail = 0;
	/* FIPS 180-4 §5.1.1: 0x80, zeros, the length in bits, big-endian. */
	l->ntail = rest + 9 > 64 ? 2 : 1;
	memset(l->tail, 0, sizeof(l->tail));
	if (rest)
		memcpy(l->tail, (const unsigned char *)m->data + m->len - rest,
		       rest);
	l->tail[rest] = 0x80;
	for (int i = 0; i < 8; i++)
		l->tail[l->ntail * 64 - 1 - i] =
			(unsigned char)(bits >> (8 * i));
	if (!l->nblk) {
		l->p = l->tail;
		l->nblk = l->ntail;
		l->in_tail = 1;
	}
}

/* The lane's blocks at p ran out: go on to the tail, or finish.
 * @return 1 while the message has blocks left. */
static int lane_advance(struct lane *l)
{
	if (!l->in_tail) {
		l->p = l->tail;
		l->nblk = l->ntail;
		l->in_tail = 1;
		return 1;
	}
	for (int i = 0; i < 5; i++) {
		l->m->out[4 * i] = (uint8_t)(l->st[i] >> 24);
		l->m->out[4 * i + 1] = (uint8_t)(l->st[i] >> 16);
		l->m->out[4 * i + 2] = (uint8_t)(l->st[i] >> 8);
		l->m->out[4 * i + 3] = (uint8_t)l->st[i];
	}
	return 0;
}

/* One stream's registers. */
struct regs {
	__m128i abcd, e, prev, abcd0, e0;
	__m128i m[4];
};

/* Words 4j..4j+3 from the four groups before, into the ring slot of
 * group j - 4. */
#define SCHEDULE(r, j)                                                         \
	((r).m[(j)&3] = _mm_sha1msg2_epu32(                                    \
		 _mm_xor_si128(_mm_sha1msg1_epu32((r).m[(j)&3],                \
						  (r).m[((j) + 1) & 3]),       \
			       (r).m[((j) + 2) & 3]),                          \
		 (r).m[((j) + 3) & 3]))

/* Rounds 4j..4j+3 (j >= 1), function f = j / 5. */
#define ROUNDS(r, j, f)                                                        \
	do {                                                                   \
		__m128i e_ = _mm_sha1nexte_epu32((r).prev, (r).m[(j)&3]);      \
		(r).prev = (r).abcd;                                           \
		(r).abcd = _mm_sha1rnds4_epu32((r).abcd, e_, f);               \
	} while (0)

/* Group j of one stream: its words (loaded for j < 4), then its rounds. */
#define GROUP(r, p, j, f)                                                      \
	do {                                                                   \
		if ((j) < 4)                                                   \
			(r).m[(j)&3] = _mm_shuffle_epi8(                       \
				_mm_loadu_si128((const __m128i *)(p) + (j)),   \
				bswap);                                        \
		else                                                           \
			SCHEDULE(r, j);                                        \
		if ((j) == 0) {                                                \
			(r).prev = (r).abcd;                                   \
			(r).abcd = _mm_sha1rnds4_epu32(                        \
				(r).abcd, _mm_add_epi32((r).e, (r).m[0]), 0);  \
		} else {                                                       \
			ROUNDS(r, j, f);                                       \
		}                                                              \
	} while (0)

/* The 20 groups of a block, each through G(j, f). */
#define BLOCK(G)                                                               \
	G(0, 0);                                                               \
	G(1, 0);                                                               \
	G(2, 0);                                                               \
	G(3, 0);                                                               \
	G(4, 0);                                                               \
	G(5, 1);                                                               \
	G(6, 1);                                                               \
	G(7, 1);                                                               \
	G(8, 1);                                                               \
	G(9, 1);                                                               \
	G(10, 2);                                                              \
	G(11, 2);                                                              \
	G(12, 2);                                                              \
	G(13, 2);                                                              \
	G(14, 2);                                                              \
	G(15, 3);                                                              \
	G(16, 3);                                                              \
	G(17, 3);                                                              \
	G(18, 3);                                                              \
	G(19, 3)

static inline SHANI __attribute__((always_inline)) void
regs_load(struct regs *r, const uint32_t st[5])
{
	r->abcd = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)st), 0x1b);
	r->e = _mm_set_epi32((int)st[4], 0, 0, 0);
}

static inline SHANI __attribute__((always_inline)) void
regs_store(const struct regs *r, uint32_t st[5])
{
	_mm_storeu_si128((__m128i *)st, _mm_shuffle_epi32(r->abcd, 0x1b));
	st[4] = (uint32_t)_mm_extract_epi32(r->e, 3);
}

static inline SHANI __attribute__((always_inline)) void
regs_begin(struct regs *r)
{
	r->abcd0 = r->abcd;
	r->e0 = r->e;
}

/* The block's E is the ABCD of the last group but one, rotated; add the
 * state from before the block. */
static inline SHANI __attribute__((always_inline)) void regs_end(struct regs *r)
{
	r->e = _mm_sha1nexte_epu32(r->prev, r->e0);
	r->abcd = _mm_add_epi32(r->abcd, r->abcd0);
}

/* @p n blocks of one lane. */
static SHANI void blocks1(struct lane *a, size_t n)
{
	const __m128i bswap =
		_mm_set_epi64x(0x0001020304050607, 0x08090a0b0c0d0e0f);
	const unsigned char *pa = a->p;
	struct regs ra;

	regs_load(&ra, a->st);
	for (size_t i = 0; i < n; i++, pa += 64) {
		regs_begin(&ra);
#define G1(j, f) GROUP(ra, pa, j, f)
		BLOCK(G1);
#undef G1
		regs_end(&ra);
	}
	regs_store(&ra, a->st);
	a->p = pa;
	a->nblk -= n;
}

/* @p n blocks of each of two lanes, their groups interleaved. */
static SHANI void blocks2(struct lane *a, struct lane *b, size_t n)
{
	const __m128i bswap =
		_mm_set_epi64x(0x0001020304050607, 0x08090a0b0c0d0e0f);
	const unsigned char *pa = a->p, *pb = b->p;
	struct regs ra, rb;

	regs_load(&ra, a->st);
	regs_load(&rb, b->st);
	for (size_t i = 0; i < n; i++, pa += 64, pb += 64) {
		regs_begin(&ra);
		regs_begin(&rb);
#define G2(j, f)                                                               \
	do {                                                                   \
		GROUP(ra, pa, j, f);                                           \
		GROUP(rb, pb, j, f);                                           \
	} while (0)
		BLOCK(G2);
#undef G2
		regs_end(&ra);
		regs_end(&rb);
	}
	regs_store(&ra, a->st);
	regs_store(&rb, b->st);
	a->p = pa;
	a->nblk -= n;
	b->p = pb;
	b->nblk -= n;
}

/*
 * Two lanes at a time, each taking the next message when its own ends:
 * first the @p nheld lanes of @p held, each with blocks left (x_many()
 * hands them over), then v[next .. n).
 */
static void shani_run(struct lane **held, int nheld,
		      const struct im_sha1_msg *v, size_t n, size_t next)
{
	struct lane own[2], *cur[2] = {NULL, NULL};
	int h = 0;

	for (;;) {
		for (int i = 0; i < 2; i++) {
			if (cur[i])
				continue;
			if (h < nheld) {
				cur[i] = held[h++];
			} else if (next < n) {
				lane_start(&own[i], &v[next++]);
				cur[i] = &own[i];
			}
		}
		if (!cur[0] || !cur[1])
			break;
		blocks2(cur[0], cur[1],
			cur[0]->nblk < cur[1]->nblk ? cur[0]->nblk
						    : cur[1]->nblk);
		for (int i = 0; i < 2; i++)
			if (!cur[i]->nblk && !lane_advance(cur[i]))
				cur[i] = NULL;
	}
	/* No message is left to start: one lane finishes alone. */
	for (int i = 0; i < 2; i++) {
		while (cur[i]) {
			blocks1(cur[i], cur[i]->nblk);
			if (!lane_advance(cur[i]))
				cur[i] = NULL;
		}
	}
}

static void shani_many(const struct im_sha1_msg *v, size_t n)
{
	shani_run(NULL, 0, v, n, 0);
}

/* Without glibc's answer the SHA bit is read with cpuid (leaf 7, EBX bit
 * 29): clang's __builtin_cpu_supports() does not know "sha". The extensions
 * use the SSE registers only, which every x86-64 kernel saves. */
static int cpu_has_shani(void)
{
#if IM_CPU_FROM_GLIBC
	return IM_CPU_HAS(SHA, "sha") && IM_CPU_HAS(SSE4_1, "sse4.1") &&
	       IM_CPU_HAS(SSSE3, "ssse3");
#else
	unsigned int a, b, c, d;

	__builtin_cpu_init();
	return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b >> 29 & 1) &&
	       IM_CPU_HAS(SSE4_1, "sse4.1") && IM_CPU_HAS(SSSE3, "ssse3");
#endif
}

/* ---- Eight or sixteen messages in vector lanes --------------------------- */

/*
 * Lane l of each 256-bit vector (X8) or 512-bit vector (X16) belongs to
 * message l: the state words a..e are five vectors and the schedule a ring
 * of sixteen. The rounds are FIPS 180-4 §6.1.2 as written, f being one
 * vpternlogd and each rotation one vprold. A block step loads 32 bytes
 * twice from each lane's block and transposes them (8 x 8 words) so that
 * vector j holds word j of all lanes; X16 transposes two groups of eight
 * and joins them. A step reads and writes the state in memory, 5 vectors
 * each way beside 80 rounds, so one loop of scalar code runs the lanes of
 * both.
 */

#define X8    __attribute__((target("avx2,avx512f,avx512vl")))
#define LANES 8

/* Lane l of w[j] = word j (big-endian) of the block at p[l]. */
static inline X8 __attribute__((always_inline)) void
x8_load(__m256i w[16], const unsigned char *const p[LANES])
{
	const __m256i bswap = _mm256_set_epi8(
		12, 13, 14, 15, 8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13,
		14, 15, 8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3);

	/* Unrolled, so that the arrays are registers, not the stack. */
#pragma GCC unroll 2
	for (int h = 0; h < 2; h++) {
		__m256i r[LANES], t[LANES], u[LANES];

#pragma GCC unroll 8
		for (int l = 0; l < LANES; l++)
			r[l] = _mm256_loadu_si256(
				(const __m256i *)(p[l] + 32 * h));
#pragma GCC unroll 4
		for (int l = 0; l < LANES; l += 2) {
			t[l] = _mm256_unpacklo_epi32(r[l], r[l + 1]);
			t[l + 1] = _mm256_unpackhi_epi32(r[l], r[l + 1]);
		}
#pragma GCC unroll 2
		for (int g = 0; g < LANES; g += 4) {
			u[g] = _mm256_unpacklo_epi64(t[g], t[g + 2]);
			u[g + 1] = _mm256_unpackhi_epi64(t[g], t[g + 2]);
			u[g + 2] = _mm256_unpacklo_epi64(t[g + 1], t[g + 3]);
			u[g + 3] = _mm256_unpackhi_epi64(t[g + 1], t[g + 3]);
		}
#pragma GCC unroll 4
		for (int j = 0; j < 4; j++) {
			w[8 * h + j] = _mm256_shuffle_epi8(
				_mm256_permute2x128_si256(u[j], u[j + 4], 0x20),
				bswap);
			w[8 * h + j + 4] = _mm256_shuffle_epi8(
				_mm256_permute2x128_si256(u[j], u[j + 4], 0x31),
				bswap);
		}
	}
}

/*
 * Rounds t0..t0+19 with function F (a vpternlogd table) and constant K, on
 * vectors of type T whose intrinsics begin with V (_mm256 or _mm512) and
 * whose XOR is XOR.
 */
#define X_ROUNDS(T, V, XOR, t0, F, K)                                          \
	do {                                                                   \
		const T k_ = V##_set1_epi32((int)(K));                         \
		_Pragma("GCC unroll 20") for (int t = (t0); t < (t0) + 20;     \
					      t++)                             \
		{                                                              \
			X_ROUND(T, V, XOR, t, F, k_, a, b, c, d, e, w);        \
		}                                                              \
	} while (0)

/* Round t of one set of state vectors a..e and schedule w. */
#define X_ROUND(T, V, XOR, t, F, k_, a, b, c, d, e, w)                         \
	do {                                                                   \
		if ((t) >= 16)                                                 \
			w[(t)&15] = V##_rol_epi32(                             \
				XOR(V##_ternarylogic_epi32(                    \
					    w[((t)-3) & 15], w[((t)-8) & 15],  \
					    w[((t)-14) & 15], 0x96),           \
				    w[(t)&15]),                                \
				1);                                            \
		T x_ = V##_add_epi32(                                          \
			V##_add_epi32(V##_rol_epi32(a, 5),                     \
				      V##_ternarylogic_epi32(b, c, d, F)),     \
			V##_add_epi32(e, V##_add_epi32(w[(t)&15], k_)));       \
		e = d;                                                         \
		d = c;                                                         \
		c = V##_rol_epi32(b, 30);                                      \
		b = a;                                                         \
		a = x_;                                                        \
	} while (0)

/* Add a..e, vectors of type T (intrinsics V, loads and stores of suffix
 * S), to the state words st[0..4]. */
#define X_ADD_STATE(T, V, S)                                                   \
	do {                                                                   \
		T *st_[5] = {(T *)st[0], (T *)st[1], (T *)st[2], (T *)st[3],   \
			     (T *)st[4]};                                      \
		V##_storeu_##S(st_[0],                                         \
			       V##_add_epi32(V##_loadu_##S(st_[0]), a));       \
		V##_storeu_##S(st_[1],                                         \
			       V##_add_epi32(V##_loadu_##S(st_[1]), b));       \
		V##_storeu_##S(st_[2],                                         \
			       V##_add_epi32(V##_loadu_##S(st_[2]), c));       \
		V##_storeu_##S(st_[3],                                         \
			       V##_add_epi32(V##_loadu_##S(st_[3]), d));       \
		V##_storeu_##S(st_[4],                                         \
			       V##_add_epi32(V##_loadu_##S(st_[4]), e));       \
	} while (0)

/* The most lanes a step hashes. */
#define X_LANES 32

/*
 * One block of each lane l at p[l], lane l of the state in st[0..4][l]:
 * the steps below, for x_run().
 */
typedef void x_step_fn(uint32_t st[5][X_LANES],
		       const unsigned char *const p[X_LANES]);

/* Eight lanes, in 256-bit vectors. */
static X8 void x8_step(uint32_t st[5][X_LANES],
		       const unsigned char *const p[X_LANES])
{
	__m256i a = _mm256_loadu_si256((const __m256i *)st[0]),
		b = _mm256_loadu_si256((const __m256i *)st[1]),
		c = _mm256_loadu_si256((const __m256i *)st[2]),
		d = _mm256_loadu_si256((const __m256i *)st[3]),
		e = _mm256_loadu_si256((const __m256i *)st[4]), w[16];

	x8_load(w, p);
	/* FIPS 180-4 §4.1.1: Ch, Parity, Maj, Parity. */
	X_ROUNDS(__m256i, _mm256, _mm256_xor_si256, 0, 0xca, 0x5a827999);
	X_ROUNDS(__m256i, _mm256, _mm256_xor_si256, 20, 0x96, 0x6ed9eba1);
	X_ROUNDS(__m256i, _mm256, _mm256_xor_si256, 40, 0xe8, 0x8f1bbcdc);
	X_ROUNDS(__m256i, _mm256, _mm256_xor_si256, 60, 0x96, 0xca62c1d6);
	X_ADD_STATE(__m256i, _mm256, si256);
}

/* Lane l of w[j] = word j of the block at p[l], for sixteen lanes. */
static inline X8 __attribute__((always_inline)) void
x16_load(__m512i w[16], const unsigned char *const p[16])
{
	__m256i lo[16], hi[16];

	x8_load(lo, p);
	x8_load(hi, p + 8);
	for (int j = 0; j < 16; j++)
		w[j] = _mm512_inserti64x4(_mm512_castsi256_si512(lo[j]), hi[j],
					  1);
}

/* Sixteen lanes, in 512-bit vectors: two transposes of eight lanes. */
static X8 void x16_step(uint32_t st[5][X_LANES],
			const unsigned char *const p[X_LANES])
{
	__m512i a = _mm512_loadu_si512(st[0]), b = _mm512_loadu_si512(st[1]),
		c = _mm512_loadu_si512(st[2]), d = _mm512_loadu_si512(st[3]),
		e = _mm512_loadu_si512(st[4]), w[16];

	x16_load(w, p);
	X_ROUNDS(__m512i, _mm512, _mm512_xor_si512, 0, 0xca, 0x5a827999);
	X_ROUNDS(__m512i, _mm512, _mm512_xor_si512, 20, 0x96, 0x6ed9eba1);
	X_ROUNDS(__m512i, _mm512, _mm512_xor_si512, 40, 0xe8, 0x8f1bbcdc);
	X_ROUNDS(__m512i, _mm512, _mm512_xor_si512, 60, 0x96, 0xca62c1d6);
	X_ADD_STATE(__m512i, _mm512, si512);
}

/*
 * Thirty-two lanes: two groups of sixteen, their rounds interleaved. A
 * round waits on the one before, so the sixteen lanes of x16_step() leave
 * the vector units idle most of the time: here the second group's rounds
 * fill them. On AMD family 26 the rounds of a step alone (blocks already
 * in vectors) take 160 ns for either, 5 ns a block where X16's take 10,
 * though the 42 vectors do not all fit in registers; with the loads and
 * transposes a step takes about 1.25 of x16_step()'s.
 */
#define X_ROUNDS2(t0, F, K)                                                    \
	do {                                                                   \
		const __m512i k_ = _mm512_set1_epi32((int)(K));                \
		_Pragma("GCC unroll 20") for (int t = (t0); t < (t0) + 20;     \
					      t++)                             \
		{                                                              \
			X_ROUND(__m512i, _mm512, _mm512_xor_si512, t, F, k_,   \
				a, b, c, d, e, w);                             \
			X_ROUND(__m512i, _mm512, _mm512_xor_si512, t, F, k_,   \
				a2, b2, c2, d2, e2, w2);                       \
		}                                                              \
	} while (0)

static X8 void x32_step(uint32_t st[5][X_LANES],
			const unsigned char *const p[X_LANES])
{
	__m512i a = _mm512_loadu_si512(st[0]), b = _mm512_loadu_si512(st[1]),
		c = _mm512_loadu_si512(st[2]), d = _mm512_loadu_si512(st[3]),
		e = _mm512_loadu_si512(st[4]), w[16];
	__m512i a2 = _mm512_loadu_si512(st[0] + 16),
		b2 = _mm512_loadu_si512(st[1] + 16),
		c2 = _mm512_loadu_si512(st[2] + 16),
		d2 = _mm512_loadu_si512(st[3] + 16),
		e2 = _mm512_loadu_si512(st[4] + 16), w2[16];

	x16_load(w, p);
	x16_load(w2, p + 16);
	X_ROUNDS2(0, 0xca, 0x5a827999);
	X_ROUNDS2(20, 0x96, 0x6ed9eba1);
	X_ROUNDS2(40, 0xe8, 0x8f1bbcdc);
	X_ROUNDS2(60, 0x96, 0xca62c1d6);
	X_ADD_STATE(__m512i, _mm512, si512);
	{
		const __m512i v2[5] = {a2, b2, c2, d2, e2};

		for (int j = 0; j < 5; j++)
			_mm512_storeu_si512(
				st[j] + 16,
				_mm512_add_epi32(_mm512_loadu_si512(st[j] + 16),
						 v2[j]));
	}
}

/*
 * Hash in the @p nl lanes of @p l with @p step while at least @p min_live
 * of them have a message, each lane that ends taking the next of
 * v[*next .. n). A lane without one hashes a block of zeros again and
 * again, unread. Leaves each lane's state in its st[] and @return how many
 * lanes still have a message (l[i].m not NULL), each with blocks left.
 *
 * Steps run on until the first lane runs out of blocks, each only moving
 * the pointers on: with thirty-two lanes, looking at every lane after
 * every step (a branch each, and a cache line of its struct lane) took
 * half as long as the steps.
 */
static int x_run(struct lane *l, int nl, x_step_fn *step,
		 const struct im_sha1_msg *v, size_t n, size_t *next,
		 int min_live)
{
	static const unsigned char idle[64];
	const unsigned char *p[X_LANES];
	/* Per lane, where the loops below read them side by side: 64 with a
	 * message, else 0; blocks left at p[i] (SIZE_MAX without one). */
	size_t inc[X_LANES], nb[X_LANES];
	uint32_t st[5][X_LANES];
	int live = 0;

	for (int i = 0; i < nl; i++) {
		live += l[i].m != NULL;
		for (int j = 0; j < 5; j++)
			st[j][i] = l[i].m ? l[i].st[j] : 0;
		p[i] = l[i].m ? l[i].p : idle;
		inc[i] = l[i].m ? 64 : 0;
		nb[i] = l[i].m ? l[i].nblk : SIZE_MAX;
	}
	while (live >= min_live && live) {
		size_t run = SIZE_MAX;

		for (int i = 0; i < nl; i++)
			run = nb[i] < run ? nb[i] : run;
		for (size_t r = 0; r < run; r++) {
			step(st, p);
			for (int i = 0; i < nl; i++)
				p[i] += inc[i];
		}
		for (int i = 0; i < nl; i++)
			nb[i] -= inc[i] ? run : 0;
		for (int i = 0; i < nl; i++) {
			if (nb[i])
				continue;
			l[i].p = p[i];
			l[i].nblk = 0;
			if (!l[i].in_tail) {
				lane_advance(&l[i]); /* on to the tail */
				p[i] = l[i].p;
				nb[i] = l[i].nblk;
				continue;
			}
			/* The digest out, a new message in. */
			for (int j = 0; j < 5; j++)
				l[i].st[j] = st[j][i];
			lane_advance(&l[i]);
			l[i].m = NULL;
			live--;
			if (*next < n) {
				lane_start(&l[i], &v[(*next)++]);
				live++;
			}
			for (int j = 0; j < 5; j++)
				st[j][i] = l[i].m ? l[i].st[j] : 0;
			p[i] = l[i].m ? l[i].p : idle;
			inc[i] = l[i].m ? 64 : 0;
			nb[i] = l[i].m ? l[i].nblk : SIZE_MAX;
		}
	}
	for (int i = 0; i < nl; i++) {
		if (!l[i].m)
			continue;
		for (int j = 0; j < 5; j++)
			l[i].st[j] = st[j][i];
		l[i].p = p[i];
		l[i].nblk = nb[i];
	}
	return live;
}

/* Lane @p src to @p dst, its tail too (p may point into it). */
static void lane_move(struct lane *dst, const struct lane *src)
{
	*dst = *src;
	if (src->in_tail)
		dst->p = dst->tail + (src->p - src->tail);
}

/*
 * Up to @p nl messages at once with @p step; the first should be the
 * longest (a document's coordinate 0 is), so that it does not run on
 * alone. With a @p narrow step (of nl / 2 lanes), once half the lanes or
 * fewer are busy and no message is left to start, they go on in it. With
 * fewer than @p hand_over lanes busy and no message left to start, the SHA
 * extensions finish the rest: a step costs about what that many blocks of
 * theirs cost.
 */
static void x_many(const struct im_sha1_msg *v, size_t n, int nl,
		   x_step_fn *step, x_step_fn *narrow, int hand_over)
{
	struct lane l[X_LANES], *held[X_LANES];
	size_t next = 0;
	int nheld = 0;

	for (int i = 0; i < nl; i++) {
		l[i].m = NULL;
		if (next < n)
			lane_start(&l[i], &v[next++]);
	}
	if (narrow) {
		int j = 0;

		x_run(l, nl, step, v, n, &next, nl / 2 + 1);
		for (int i = 0; i < nl; i++)
			if (l[i].m && i != j++)
				lane_move(&l[j - 1], &l[i]);
		nl /= 2;
		for (; j < nl; j++)
			l[j].m = NULL;
		step = narrow;
	}
	x_run(l, nl, step, v, n, &next, hand_over);
	for (int i = 0; i < nl; i++)
		if (l[i].m)
			held[nheld++] = &l[i];
	shani_run(held, nheld, v, n, next);
}

/* Measured where X8 was written (a step of eight lanes: four blocks of
 * SHA-NI) and where X16 was (AMD family 26: a step of either width takes
 * about as long as eight blocks of SHA-NI, the rounds waiting on each
 * other, not on the vector units). */
#define X8_HAND_OVER  4
#define X16_HAND_OVER 8

static void x8_many(const struct im_sha1_msg *v, size_t n)
{
	x_many(v, n, 8, x8_step, NULL, X8_HAND_OVER);
}

static void x16_many(const struct im_sha1_msg *v, size_t n)
{
	x_many(v, n, 16, x16_step, NULL, X16_HAND_OVER);
}

/* A step of X32 takes about 1.25 times as long as one of X16: once half
 * its lanes or fewer are busy, X16's finishes them. */
static void x32_many(const struct im_sha1_msg *v, size_t n)
{
	x_many(v, n, 32, x32_step, x16_step, X16_HAND_OVER);
}

/* The lanes hand their last messages to the SHA extensions: without them
 * (Skylake-X, say) nothing here was measured, and OpenSSL is chosen. */
static int cpu_has_x8(void)
{
#if !IM_CPU_FROM_GLIBC
	__builtin_cpu_init();
#endif
	return IM_CPU_HAS(AVX2, "avx2") && IM_CPU_HAS(AVX512F, "avx512f") &&
	       IM_CPU_HAS(AVX512VL, "avx512vl") && cpu_has_shani();
}

#else

static void x8_many(const struct im_sha1_msg *v, size_t n)
{
	(void)v;
	(void)n;
}

static void x16_many(const struct im_sha1_msg *v, size_t n)
{
	(void)v;
	(void)n;
}

static void x32_many(const struct im_sha1_msg *v, size_t n)
{
	(void)v;
	(void)n;
}

static int cpu_has_x8(void)
{
	return 0;
}

static void shani_many(const struct im_sha1_msg *v, size_t n)
{
	(void)v;
	(void)n;
}

static int cpu_has_shani(void)
{
	return 0;
}

#endif

int im_sha1_have_x8(void)
{
	/* Shared by the scan's workers: a race only computes it twice. */
	static int known = -1;
	int k = __atomic_load_n(&known, __ATOMIC_RELAXED);

	if (k < 0) {
		k = cpu_has_x8();
		__atomic_store_n(&known, k, __ATOMIC_RELAXED);
	}
	return k;
}

int im_sha1_have_shani(void)
{
	/* 0 or 1 once known; a race only computes it twice. */
	static int known = -1;
	int k = __atomic_load_n(&known, __ATOMIC_RELAXED);

	if (k < 0) {
		k = cpu_has_shani();
		__atomic_store_n(&known, k, __ATOMIC_RELAXED);
	}
	return k;
}

/* ---- OpenSSL ------------------------------------------------------------- */

/*
 * OpenSSL is loaded on first need (dl.h), not linked: the CPUs with the SHA
 * extensions never use it, and linking it cost every start of imatch about
 * 1 ms of CPU.
 */
static struct {
	__typeof__(&OPENSSL_init_crypto) init_crypto;
	__typeof__(&EVP_MD_fetch) md_fetch;
	__typeof__(&EVP_MD_free) md_free;
	__typeof__(&EVP_MD_CTX_new) ctx_new;
	__typeof__(&EVP_MD_CTX_free) ctx_free;
	__typeof__(&EVP_DigestInit_ex) init;
	__typeof__(&EVP_DigestUpdate) update;
	__typeof__(&EVP_DigestFinal_ex) final;
} ossl;
static bool ossl_ok;
static pthread_once_t ossl_once = PTHREAD_ONCE_INIT;

#define SONAME_OF(major) "libcrypto.so." #major
#define SONAME(major)	 SONAME_OF(major)

static void ossl_load(void)
{
	const struct im_dlsym syms[] = {
		{"OPENSSL_init_crypto", (void **)&ossl.init_crypto},
		{"EVP_MD_fetch", (void **)&ossl.md_fetch},
		{"EVP_MD_free", (void **)&ossl.md_free},
		{"EVP_MD_CTX_new", (void **)&ossl.ctx_new},
		{"EVP_MD_CTX_free", (void **)&ossl.ctx_free},
		{"EVP_DigestInit_ex", (void **)&ossl.init},
		{"EVP_DigestUpdate", (void **)&ossl.update},
		{"EVP_DigestFinal_ex", (void **)&ossl.final},
	};

	ossl_ok = im_dl_load(SONAME(OPENSSL_VERSION_MAJOR), "libcrypto.so",
			     syms, sizeof(syms) / sizeof(syms[0]));
}

/*
 * SHA1 from OpenSSL's default provider, without reading the system's
 * openssl.cnf or registering every cipher and digest by name first: a
 * signature is a plain hash and needs no policy of the system's, and that
 * setup cost each start of imatch about 0.9 ms of CPU. Takes effect only if
 * nothing in the process initialised OpenSSL before.
 */
static EVP_MD *sha1_fetch(void)
{
	ossl.init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG |
				 OPENSSL_INIT_NO_ADD_ALL_CIPHERS |
				 OPENSSL_INIT_NO_ADD_ALL_DIGESTS,
			 NULL);
	return ossl.md_fetch(NULL, "SHA1", NULL);
}

static int openssl_many(struct im_sha1 *h, const struct im_sha1_msg *v,
			size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned int mdlen = 0;

		if (!ossl.init(h->ctx, h->md, NULL) ||
		    !ossl.update(h->ctx, v[i].data, v[i].len) ||
		    !ossl.final(h->ctx, v[i].out, &mdlen) ||
		    mdlen != IM_SHA1_LEN)
			return -ENOMEM;
	}
	return 0;
}

/* ---- Life cycle ---------------------------------------------------------- */

int im_sha1_new(enum im_sha1_impl impl, struct im_sha1 **out)
{
	struct im_sha1 *h;

	*out = NULL;
	if (impl == IM_SHA1_AUTO)
		impl = im_sha1_have_x8()      ? IM_SHA1_X32
		       : im_sha1_have_shani() ? IM_SHA1_SHANI
					      : IM_SHA1_OPENSSL;
	if ((impl == IM_SHA1_SHANI && !im_sha1_have_shani()) ||
	    ((impl == IM_SHA1_X8 || impl == IM_SHA1_X16 ||
	      impl == IM_SHA1_X32) &&
	     !im_sha1_have_x8()))
		return -ENOTSUP;
	if (impl == IM_SHA1_OPENSSL) {
		pthread_once(&ossl_once, ossl_load);
		if (!ossl_ok)
			return -ENOTSUP;
	}
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->impl = impl;
	if (impl == IM_SHA1_OPENSSL) {
		h->md = sha1_fetch();
		h->ctx = ossl.ctx_new();
		if (!h->md || !h->ctx) {
			im_sha1_free(h);
			return -ENOMEM;
		}
	}
	*out = h;
	return 0;
}

void im_sha1_free(struct im_sha1 *h)
{
	if (!h)
		return;
	/* Only an OpenSSL hasher has them, and OpenSSL is loaded then. */
	if (h->ctx)
		ossl.ctx_free(h->ctx);
	if (h->md)
		ossl.md_free(h->md);
	free(h);
}

enum im_sha1_impl im_sha1_impl(const struct im_sha1 *h)
{
	return h->impl;
}

int im_sha1_many(struct im_sha1 *h, const struct im_sha1_msg *v, size_t n)
{
	if (h->impl == IM_SHA1_OPENSSL)
		return openssl_many(h, v, n);
	if (h->impl == IM_SHA1_X32)
		x32_many(v, n);
	else if (h->impl == IM_SHA1_X16)
		x16_many(v, n);
	else if (h->impl == IM_SHA1_X8)
		x8_many(v, n);
	else
		shani_many(v, n);
	return 0;
}
