/**
 * @file sig.c
 * Extended I-Match signatures (papers/000 §3 and §4, papers/001 §3).
 *
 * For one document with unique terms U, each term is looked up once in the
 * lexicon. The terms found are the candidates: P (in L) and Q (in B). Each
 * candidate gets a bit mask of the coordinates whose lexicon holds it: bit 0
 * always (the lexicon as built), bit k (k = 1..K) when
 *
 *     z = splitmix64_finalizer(XXH3_64bits_withSeed(t, seed) + k * gamma)
 *     (z >> 11) * 2^-53 < keep        (gamma = 0x9e3779b97f4a7c15)
 *
 * a keyed hash that only depends on (seed, k, t), so the randomized lexicons
 * L_k, B_k are the same on every run and machine and cost no memory. This is
 * the "sampling without repetition" of papers/000 §6.6 with the fraction
 * keep in place of bootstrap's 1 - 1/e.
 *
 * P and Q are sorted once per document, by their number in the lexicon:
 * L is numbered in byte order and B in rank order (lexicon.h), so the sort is
 * an integer sort and no string is compared. Coordinate k then takes
 * S = { t in P : bit k }, extends it with the best-ranked terms of
 * { t in Q : bit k } while |S| / |U| < min_ratio (papers/000 §3, step 4;
 * min_ratio * keep for k >= 1, see coord_ratio()), rejects it if
 * |S| < min_terms or the ratio is still short (step 5), and
 * hashes  byte k || t1 0x00 t2 0x00 ...  in byte order with SHA1; the
 * coordinates of one document are hashed together, several at a time
 * (sha1.h).
 * Terms taken from Q are merged in byte order through Q sorted by bytes,
 * built at most once per document and only when some coordinate needs it.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Inlined: one keyed hash per candidate term, without a call. */
#define XXH_INLINE_ALL
#include <xxhash.h>
#ifdef HAVE_XXH_DISPATCH
/* libxxhash's, from xxh_x86dispatch.h: that header would make it static
 * under XXH_INLINE_ALL. */
XXH128_hash_t XXH3_128bits_dispatch(const void *input, size_t len);
#endif

#include "beneath.h"
#include "bytes.h"
#include "cpu.h"
#include "extract.h"
#include "fdio.h"
#include "mem.h"
#include "sha1.h"
#include "sig.h"

/* How many terms ahead collect() prefetches lexicon slots. */
#define PREFETCH 8
/* How many numbers ahead collect_numbers() prefetches a term's entry. */
#define NT_PREFETCH 32

/* Files read into a buffer larger than this do not keep it afterwards. */
#define BUF_KEEP (4u << 20)
/* What im_signer_trim() leaves alone of the term set and of the candidate
 * arrays, each: a few hundred thousand distinct terms, more than a long book
 * holds. */
#define TRIM_KEEP ((size_t)32 << 20)

/* A candidate term: the lexicon's NUL-terminated string and the coordinates
 * whose lexicon holds it (bit k). */
struct cand {
	const char *str;
	uint32_t len;
	uint32_t mask;
};

/*
 * One result of im_signer_sign_numbers(): the numbers it was given, in the
 * order given, then the valid signatures, in one allocation.
 */
struct memo {
	uint64_t hash; /* memo_hash() */
	uint32_t unique_terms, n, valid;
	uint8_t status;
	bool used;	/* false: the slot holds no result */
	uint32_t *nums; /* cap bytes */
	size_t cap;
};

/* Slots of the memo, indexed by the hash's low bits. */
#define MEMO_SLOTS 1024
/* The most bytes of numbers and signatures one signer's memo holds. */
#define MEMO_BYTES ((size_t)4 << 20)
/* Numbers of a document memo_hash() reads. */
#define MEMO_HASHED 16

/*
 * Coordinates im_signer_sign_numbers_later() hashes at once, at most: a
 * document has K + 1 of them, the hasher up to 32 lanes (sha1.h), and alone
 * one document left most idle from the start and its coordinate 0, about
 * three times the others, ran on by itself at the end. Each flush ends
 * with lanes running out of messages: 48 kept 32 lanes full for too short
 * a time to gain over 16 (a first scan of the kernel docs, 0.996 of the
 * CPU time with 128 and 1.006 with 48).
 */
#define LATER_MSGS 128
/* Bytes of coordinates that wait, at most (more for one larger document):
 * 128 coordinates of the kernel docs' documents take about 200 KiB. */
#define LATER_BYTES ((size_t)512 << 10)

/* A document whose coordinates wait to be hashed, and what the memo is to
 * keep of it then; or a copy of one that waits, which takes its result. */
struct later {
	struct im_doc_sigs *out;
	const struct im_doc_sigs *from; /* the copied one's out, or NULL */
	uint64_t hash;			/* memo_hash() */
	size_t nums;			/* offset of its numbers in lnums */
	size_t n;
};

/* MEMO_SLOTS results, once the first is kept; shared ones under lock. */
struct im_sig_memo {
	struct memo *slots;
	size_t bytes; /* of the slots' buffers */
	bool shared;
	pthread_mutex_t lock; /* if shared: protects the rest */
};

struct im_signer {
	const struct im_lexicon *lex; /* borrowed; NULL for terms only */
	struct im_params p;
	/* (z >> 11) * 2^-53 < keep  <=>  (z >> 11) < keep53, exactly */
	uint64_t keep53;
	struct im_sha1 *sha;
	struct im_terms terms;
	struct im_extractor *x;
	const uint32_t *masks; /* borrowed, per term number; or NULL */
	/* Each lexicon term as a candidate, per term number, made by the
	 * first im_signer_sign_numbers() with this lexicon: 16 bytes instead
	 * of the lexicon's 32-byte entry and a mask in another array (the
	 * lexicon's terms stayed out of cache). */
	struct cand *nt;
	size_t nnt;

	char *buf; /* the file being read */
	size_t bufcap;
	int last_fail; /* why im_signer_terms_at()'s last extraction failed */

	/* The candidates of the last document (see collect()). */
	struct cand *raw, *pc, *qc; /* as found; P and Q sorted */
	/* Where the low half of a sort key points: raw, or nt for
	 * im_signer_sign_numbers(), whose term numbers index it already. */
	const struct cand *found;
	/* Sort keys: term number << 32 | index into found. */
	uint64_t *pk, *qk, *tmp;
	size_t npc, nqc, ccap;
	uint32_t *qb;  /* indices into qc, in byte order of the terms */
	uint64_t *qbk; /* sort keys for qb, with im_lexicon_byte_order() */
	uint32_t *qs;  /* indices into qc of the terms S took from Q */
	uint32_t *sel; /* sel[i] == stamp: qc[i] is in the current S */
	uint32_t stamp;
	int q_sorted, qb_sorted;
	uint32_t pcount[IM_MAX_COORDS]; /* |L_k ∩ U| */
	size_t last_n;			/* |U| of the last document */
	int have_last;
	/* read_at(): the binary file was only sniffed (defer_binary). */
	bool deferred;

	unsigned char *hb; /* the bytes one coordinate hashes (coord_bytes()) */
	size_t hbcap;
	/* The bytes of every coordinate whose S is P alone (fill_coords()):
	 * coordinate k's at hk + k * hk_stride, hk_len[k] of them; only
	 * while hk_filled. pc[].str points into coordinate 0's then, else
	 * into pb. */
	unsigned char *hk;
	size_t hkcap, hk_stride;
	size_t hk_len[IM_MAX_COORDS];
	bool hk_filled;
	/* The buffers of the document being signed: hk and hb, or its part of
	 * lat, its coordinates then waiting there to be hashed. */
	unsigned char *hkd, *hbd;
	/* im_signer_sign_numbers_later(): documents whose coordinates wait
	 * in lat, to be hashed with the next ones' (im_signer_flush()). */
	bool later;
	unsigned char *lat;
	size_t latcap, latlen;
	struct im_sha1_msg lmsg[LATER_MSGS];
	size_t nlmsg;
	struct later *ldoc; /* LATER_MSGS */
	size_t nldoc;
	uint32_t *lnums; /* their numbers, for the memo */
	size_t lnumscap, lnumslen;
	/* The error of a flush that im_signer_flush() did not make (a full
	 * lat, a new lexicon or memo): what waited was dropped, and the
	 * caller learns it from the next im_signer_flush(); else 0. */
	int dropped;
	char *pb; /* the bytes of P's terms, in P's order, unless hk_filled */
	size_t pbcap;
	const char **setv; /* for im_signer_last_set() */
	size_t setcap;
	/* What im_signer_sign_numbers() gave for recent term sequences
	 * (memo_find()): its own, or one it shares (im_signer_share_memo()). */
	struct im_sig_memo own;
	struct im_sig_memo *memo;
	im_copy_probe copy_probe; /* im_signer_set_copy_probe() */
	void *copy_arg;
	/* im_signer_keep_results(): RESULT_SLOTS results of
	 * im_signer_sign_at() by the hash of the bytes read (exact_valid 0:
	 * an empty slot), made on the first keep. */
	bool keep_results;
	bool reused;		 /* im_signer_reused() */
	bool sampled;		 /* im_signer_sampled() */
	im_result_lender lender; /* im_signer_set_lender() */
	void *lender_arg;
	struct im_doc_sigs *results;
};

/* Results im_signer_keep_results() keeps, by the low bits of the bytes'
 * hash: a copy met within that many texts of its first is found. */
#define RESULT_SLOTS 256

/* ---- Small helpers ---------------------------------------------------------- */

void im_sig_hex(const struct im_sig *s, char *hex)
{
	static const char digits[] = "0123456789abcdef";
	for (int i = 0; i < IM_SIG_LEN; i++) {
		hex[2 * i] = digits[s->b[i] >> 4];
		hex[2 * i + 1] = digits[s->b[i] & 15];
	}
	hex[IM_SIG_HEX_LEN] = '\0';
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int im_sig_parse(const char *hex, struct im_sig *s)
{
	for (int i = 0; i < IM_SIG_LEN; i++) {
		int hi = hexval(hex[2 * i]);
		int lo = hi < 0 ? -1 : hexval(hex[2 * i + 1]);
		if (lo < 0)
			return -EINVAL;
		s->b[i] = (uint8_t)(hi << 4 | lo);
	}
	return hex[IM_SIG_HEX_LEN] == '\0' ? 0 : -EINVAL;
}

int im_sig_cmp(const struct im_sig *a, const struct im_sig *b)
{
	return memcmp(a->b, b->b, IM_SIG_LEN);
}

/* Grow *p to hold at least @p n elements of @p size bytes. */
static int grow(void **p, size_t *cap, size_t n, size_t size)
{
	if (n <= *cap)
		return 0;
	size_t c = *cap ? *cap : 64;
	while (c < n)
		c *= 2;
	void *q = realloc(*p, c * size);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = c;
	return 0;
}

/* ---- Life cycle ------------------------------------------------------------- */

int im_signer_new(const struct im_lexicon *lex, const struct im_params *p,
		  struct im_signer **out)
{
	struct im_extract_opts xo;
	struct im_signer *s;

	*out = NULL;
	if (im_params_check(p, NULL, 0) < 0)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->lex = lex;
	s->p = *p;
	s->memo = &s->own;
	s->keep53 = (uint64_t)ceil(ldexp(p->keep, 53));
	im_terms_init(&s->terms);
	im_extract_opts_init(&xo);
	xo.filters = p->filters;
	/* Results are read only through im_extract_terms() and
	 * im_extract_figures(). */
	xo.defer_utf8 = true;
	if (im_sha1_new(IM_SHA1_AUTO, &s->sha) ||
	    im_extractor_new(&xo, &s->x)) {
		im_signer_free(s);
		return -ENOMEM;
	}
	*out = s;
	return 0;
}

/* Forget every result @p m holds (its slots keep their buffers). */
static void memo_clear(struct im_sig_memo *m)
{
	for (size_t i = 0; m->slots && i < MEMO_SLOTS; i++)
		m->slots[i].used = false;
}

static void memo_release(struct im_sig_memo *m)
{
	for (size_t i = 0; m->slots && i < MEMO_SLOTS; i++)
		free(m->slots[i].nums);
	free(m->slots);
}

int im_sig_memo_new(struct im_sig_memo **out)
{
	struct im_sig_memo *m = calloc(1, sizeof(*m));

	*out = NULL;
	if (!m)
		return -ENOMEM;
	if (pthread_mutex_init(&m->lock, NULL)) {
		free(m);
		return -EAGAIN;
	}
	m->shared = true;
	*out = m;
	return 0;
}

void im_sig_memo_free(struct im_sig_memo *m)
{
	if (!m)
		return;
	memo_release(m);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

/* The per-candidate arrays, all sized s->ccap. */
static void cand_arrays_free(struct im_signer *s)
{
	free(s->raw);
	free(s->pc);
	free(s->qc);
	free(s->pk);
	free(s->qk);
	free(s->tmp);
	free(s->qb);
	free(s->qbk);
	free(s->qs);
	free(s->sel);
}

void im_signer_free(struct im_signer *s)
{
	if (!s)
		return;
	im_sha1_free(s->sha);
	im_terms_release(&s->terms);
	im_extractor_free(s->x);
	im_buf_free(s->buf, s->bufcap);
	cand_arrays_free(s);
	free(s->hb);
	free(s->hk);
	free(s->lat);
	free(s->ldoc);
	free(s->lnums);
	free(s->pb);
	free(s->setv);
	im_table_free(s->nt, s->nnt * sizeof(*s->nt));
	memo_release(&s->own);
	free(s->results);
	free(s);
}

/* ---- Membership and candidates ------------------------------------------- */

/* The finalizer of splitmix64 (Steele, Lea, Flood 2014): a bijection whose
 * outputs for base + k * gamma, k = 1, 2, ... are independent-looking. */
static inline uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/*
 * The coordinates whose lexicon holds the term: bit 0 always, bit k when
 * (mix64(h + k * gamma) >> 11) * 2^-53 < keep. If @p count is not NULL,
 * count[k] is incremented for every bit set (no branch per bit).
 */
static inline uint32_t member_mask(const struct im_signer *s, const char *str,
				   size_t len, uint32_t *count)
{
	uint32_t mask = 1;
	uint64_t h = s->p.k ? XXH3_64bits_withSeed(str, len, s->p.seed) : 0;
	if (count) {
		count[0]++;
		for (unsigned k = 1; k <= s->p.k; k++) {
			uint64_t z =
				mix64(h + k * UINT64_C(0x9e3779b97f4a7c15));
			uint32_t in = (z >> 11) < s->keep53;
			mask |= in << k;
			count[k] += in;
		}
	} else {
		for (unsigned k = 1; k <= s->p.k; k++) {
			uint64_t z =
				mix64(h + k * UINT64_C(0x9e3779b97f4a7c15));
			mask |= (uint32_t)((z >> 11) < s->keep53) << k;
		}
	}
	return mask;
}

/*
 * sort_by_number() of @p n keys whose term numbers fit in 16 bits (a
 * lexicon of up to 65,536 terms): both bytes counted in one pass over the
 * keys, then two passes that place them, the second back into @p v.
 */
static void sort_by_short_number(uint64_t *v, uint64_t *tmp, size_t n)
{
	uint32_t cnt[2][256], lo = 0, hi = 0;

	memset(cnt, 0, sizeof(cnt));
	for (size_t i = 0; i < n; i++) {
		cnt[0][(v[i] >> 32) & 255]++;
		cnt[1][(v[i] >> 40) & 255]++;
	}
	for (int b = 0; b < 256; b++) {
		uint32_t c0 = cnt[0][b], c1 = cnt[1][b];

		cnt[0][b] = lo;
		cnt[1][b] = hi;
		lo += c0;
		hi += c1;
	}
	for (size_t i = 0; i < n; i++)
		tmp[cnt[0][(v[i] >> 32) & 255]++] = v[i];
	for (size_t i = 0; i < n; i++)
		v[cnt[1][(tmp[i] >> 40) & 255]++] = tmp[i];
}

/* Sort @p v by its high 32 bits (the term number); stable LSD radix sort. */
static void sort_by_number(uint64_t *v, uint64_t *tmp, size_t n)
{
	if (n < 64) {
		for (size_t i = 1; i < n; i++) {
			uint64_t x = v[i];
			size_t j = i;
			for (; j > 0 && (v[j - 1] >> 32) > (x >> 32); j--)
				v[j] = v[j - 1];
			v[j] = x;
		}
		return;
	}
	uint64_t *src = v, *dst = tmp, any = 0;
	/* Term numbers rarely pass 16 bits: the bytes above the highest one
	 * set anywhere are not counted. */
	for (size_t i = 0; i < n; i++)
		any |= v[i];
	if (!(any >> 48)) {
		sort_by_short_number(v, tmp, n);
		return;
	}
	for (int shift = 32; shift < 64 && any >> shift; shift += 8) {
		size_t cnt[256] = {0};
		for (size_t i = 0; i < n; i++)
			cnt[(src[i] >> shift) & 255]++;
		if (cnt[(src[0] >> shift) & 255] == n)
			continue; /* one bucket: this byte does not order */
		size_t sum = 0;
		for (int b = 0; b < 256; b++) {
			size_t c = cnt[b];
			cnt[b] = sum;
			sum += c;
		}
		for (size_t i = 0; i < n; i++)
			dst[cnt[(src[i] >> shift) & 255]++] = src[i];
		uint64_t *x = src;
		src = dst;
		dst = x;
	}
	if (src != v)
		memcpy(v, src, n * sizeof(*v));
}

/*
 * sort_by_number() of @p n keys whose term numbers are below @p lim (P's):
 * two passes over digits of half the bits below lim each, both counted in
 * one pass. The bytes of a 16-bit sort did not fit L's numbers (8,397 on
 * the kernel docs): the high byte took few values, so each count and
 * placement waited for the last one to the same counter, and 512 counters
 * were cleared and added up for a few dozen keys. With 256 of them, from
 * 16 keys on this beats the insertion sort, whose every key mispredicts.
 */
static void sort_below(uint64_t *v, uint64_t *tmp, size_t n, size_t lim)
{
	unsigned bits = lim > 2 ? 64 - (unsigned)__builtin_clzll(lim - 1) : 1;
	unsigned lo = (bits + 1) / 2;
	uint32_t cnt[2][256], sum[2] = {0, 0}, mask = (UINT32_C(1) << lo) - 1;

	if (n < 16 || bits > 16) {
		sort_by_number(v, tmp, n);
		return;
	}
	/* The high digit has as many bits as the low one or one fewer. */
	memset(cnt[0], 0, (mask + 1) * sizeof(cnt[0][0]));
	memset(cnt[1], 0, (mask + 1) * sizeof(cnt[1][0]));
	for (size_t i = 0; i < n; i++) {
		cnt[0][(v[i] >> 32) & mask]++;
		cnt[1][(v[i] >> 32 >> lo) & mask]++;
	}
	for (uint32_t b = 0; b <= mask; b++) {
		uint32_t c0 = cnt[0][b], c1 = cnt[1][b];

		cnt[0][b] = sum[0];
		cnt[1][b] = sum[1];
		sum[0] += c0;
		sum[1] += c1;
	}
	for (size_t i = 0; i < n; i++)
		tmp[cnt[0][(v[i] >> 32) & mask]++] = v[i];
	for (size_t i = 0; i < n; i++)
		v[cnt[1][(tmp[i] >> 32 >> lo) & mask]++] = tmp[i];
}

static int cand_cmp(const struct cand *a, const struct cand *b)
{
	int c = memcmp(a->str, b->str, a->len < b->len ? a->len : b->len);
	if (c)
		return c;
	return (a->len > b->len) - (a->len < b->len);
}

static int qb_cmp(const void *pa, const void *pb, void *arg)
{
	const struct cand *qc = arg;
	return cand_cmp(&qc[*(const uint32_t *)pa], &qc[*(const uint32_t *)pb]);
}

/*
 * Q in byte order, once per document and only if some coordinate needs it.
 * A built lexicon knows every term's place in byte order (qk[i] holds qc[i]'s
 * term number once Q is sorted): a radix sort on it, where comparing the
 * bytes of the terms was a sixth of a first scan's signing step.
 */
static void sort_qb(struct im_signer *s)
{
	const uint32_t *bo = im_lexicon_byte_order(s->lex);

	if (s->qb_sorted)
		return;
	if (bo) {
		for (size_t i = 0; i < s->nqc; i++)
			s->qbk[i] = (uint64_t)bo[s->qk[i] >> 32] << 32 | i;
		sort_by_number(s->qbk, s->tmp, s->nqc);
		for (size_t i = 0; i < s->nqc; i++)
			s->qb[i] = (uint32_t)s->qbk[i];
	} else {
		for (size_t i = 0; i < s->nqc; i++)
			s->qb[i] = (uint32_t)i;
		qsort_r(s->qb, s->nqc, sizeof(*s->qb), qb_cmp, s->qc);
	}
	s->qb_sorted = 1;
}

/* Whether qc[a] comes before qc[b] in byte order; @p bo as in sort_qb(). */
static inline bool q_before(const struct im_signer *s, const uint32_t *bo,
			    uint32_t a, uint32_t b)
{
	if (bo)
		return bo[s->qk[a] >> 32] < bo[s->qk[b] >> 32];
	return cand_cmp(&s->qc[a], &s->qc[b]) < 0;
}

/* Make room for @p n candidates in every per-candidate array. */
static int cand_reserve(struct im_signer *s, size_t n)
{
	if (n <= s->ccap)
		return 0;
	size_t cap = s->ccap ? s->ccap : 256;
	while (cap < n)
		cap *= 2;
	/* Old contents are dead between documents: free, then allocate. */
	cand_arrays_free(s);
	s->raw = malloc(cap * sizeof(*s->raw));
	s->pc = malloc(cap * sizeof(*s->pc));
	s->qc = malloc(cap * sizeof(*s->qc));
	s->pk = malloc(cap * sizeof(*s->pk));
	s->qk = malloc(cap * sizeof(*s->qk));
	s->tmp = malloc(cap * sizeof(*s->tmp));
	s->qb = malloc(cap * sizeof(*s->qb));
	s->qbk = malloc(cap * sizeof(*s->qbk));
	s->qs = malloc(cap * sizeof(*s->qs));
	s->sel = im_zeroed(cap, sizeof(*s->sel));
	if (!s->raw || !s->pc || !s->qc || !s->pk || !s->qk || !s->tmp ||
	    !s->qb || !s->qbk || !s->qs || !s->sel) {
		s->ccap = 0;
		return -ENOMEM;
	}
	s->ccap = cap;
	return 0;
}

/* Start collecting the candidates of a document of @p n terms at most. */
static int collect_begin(struct im_signer *s, size_t n)
{
	s->npc = s->nqc = 0;
	s->qb_sorted = 0;
	s->have_last = 0;
	memset(s->pcount, 0, sizeof(s->pcount));
	return cand_reserve(s, n);
}

/* Byte j of b[g] counts the primary terms with bit 8g + j of their mask. */
struct bytecounts {
	uint64_t b[IM_MAX_COORDS / 8];
};

_Static_assert(IM_MAX_COORDS <= 32, "count_mask() counts 32 coordinates");
_Static_assert(IM_SIG_LEN == IM_SHA1_LEN, "a signature is a SHA-1 digest");

/*
 * Running totals of collect_add(). The loops that collect keep it in
 * registers: nothing takes its address but inlined calls, and arrays are
 * indexed by constants only. In memory, every total was stored and loaded
 * again around each candidate's stores, which the compiler could not tell
 * from them.
 */
struct collecting {
	struct cand *raw;
	uint64_t *pk, *qk;
	size_t nraw, npk, nqk, bytes;
	unsigned k; /* K */
	/* Primary terms per coordinate, for at most 255 terms (acc_n)
	 * before flush_counts(). */
	struct bytecounts acc;
	unsigned acc_n;
};

static void collecting_init(const struct im_signer *s, struct collecting *c)
{
	*c = (struct collecting){
		.raw = s->raw,
		.pk = s->pk,
		.qk = s->qk,
		.bytes = 1,
		.k = s->p.k,
	};
}

/* The bits of @p b, one per byte: bit j becomes byte j (0 or 1). */
static inline uint64_t bits_to_bytes(uint32_t b)
{
	uint64_t t = (uint64_t)(b & 0xff) * UINT64_C(0x0101010101010101);

	t &= UINT64_C(0x8040201008040201);
	/* Each byte is now 0 or 2^j; adding 0x7f carries into its top bit
	 * exactly when it is not 0, without spilling into the next. */
	return ((t + UINT64_C(0x7f7f7f7f7f7f7f7f)) >> 7) &
	       UINT64_C(0x0101010101010101);
}

/* Add the byte counters @p acc to pcount[]. */
static void flush_counts(struct im_signer *s, struct bytecounts acc)
{
	for (unsigned k = 0; k <= s->p.k; k++)
		s->pcount[k] +=
			(uint32_t)(acc.b[k / 8] >> (8 * (k % 8))) & 0xff;
}

/* |L_k ∩ U| for every k at once, for a term of L with coordinates @p mask:
 * a loop over k per term was most of the work of collect_add(). */
static inline void count_mask(struct im_signer *s, struct collecting *c,
			      uint32_t mask)
{
	c->acc.b[0] += bits_to_bytes(mask);
	if (c->k >= 8)
		c->acc.b[1] += bits_to_bytes(mask >> 8);
	if (c->k >= 16)
		c->acc.b[2] += bits_to_bytes(mask >> 16);
	if (c->k >= 24)
		c->acc.b[3] += bits_to_bytes(mask >> 24);
	if (++c->acc_n == 255) {
		flush_counts(s, c->acc);
		c->acc = (struct bytecounts){{0}};
		c->acc_n = 0;
	}
}

/* Candidate: term number @p ix of the lexicon, in L if @p primary, of
 * @p len bytes, at @p found in s->found. */
static inline __attribute__((always_inline)) void
collect_put(struct collecting *c, long ix, int primary, uint32_t found,
	    uint32_t len)
{
	uint64_t key = (uint64_t)ix << 32 | found;

	c->bytes += len + 1;
	if (primary)
		c->pk[c->npk++] = key;
	else
		c->qk[c->nqk++] = key;
}

/* Candidate: term number @p ix of the lexicon, its bytes @p str. */
static inline __attribute__((always_inline)) void
collect_add(struct im_signer *s, struct collecting *c, long ix, const char *str,
	    uint32_t len)
{
	int primary = (size_t)ix < im_lexicon_primary_size(s->lex);
	uint32_t mask;

	if (s->masks) {
		mask = s->masks[ix];
		if (primary)
			count_mask(s, c, mask);
	} else {
		mask = member_mask(s, str, len, primary ? s->pcount : NULL);
	}
	/* fill_coords() reads the bytes after the sort: let them come. */
	__builtin_prefetch(str);
	c->raw[c->nraw] = (struct cand){str, len, mask};
	collect_put(c, ix, primary, (uint32_t)c->nraw++, len);
}

/* The most fill_coords() keeps for one document (a signer keeps it). */
#define HK_MAX ((size_t)256 << 10)

/*
 * P, sorted, into pc[], and the bytes every coordinate would hash if S were P
 * alone, the usual case, in the same pass: coordinate k's at
 * hk + k * hk_stride, which has room for byte k, all the candidates' bytes
 * with NULs and the slack of a short term's fixed-size copy. Coordinate 0
 * holds every term of P, so its bytes are also where pc[] points: the
 * lexicon's records lie all over its arena, and the merges of
 * coord_hash() read one buffer front to back instead.
 *
 * A short term is written to every coordinate, at the end of what each
 * holds, and counted only by those of its mask: a loop over the mask's bits
 * mispredicted its exit for most terms, and cost more than the stores it
 * saves.
 */
static void fill_terms(struct im_signer *s, size_t npk, unsigned ncoords)
{
	size_t stride = s->hk_stride, end[IM_MAX_COORDS] = {0};
	uint32_t all =
		ncoords == 32 ? UINT32_MAX : (UINT32_C(1) << ncoords) - 1;
	unsigned char *hk = s->hkd;

	/* end[k]: where coordinate k's next term goes, from hk */
	for (unsigned k = 0; k < ncoords; k++) {
		hk[k * stride] = (unsigned char)k;
		end[k] = k * stride + 1;
	}
	for (size_t i = 0; i < npk; i++) {
		struct cand t = s->found[(uint32_t)s->pk[i]];
		size_t tl = (size_t)t.len + 1;
		const char *str = t.str;

		t.str = (const char *)hk + end[0]; /* bit 0: always in */
		if (t.len < IM_LEX_STR_PAD) {
			unsigned char b[IM_LEX_STR_PAD];

			memcpy(b, str, IM_LEX_STR_PAD);
			for (unsigned k = 0; k < ncoords; k++) {
				memcpy(hk + end[k], b, IM_LEX_STR_PAD);
				end[k] += tl & -(size_t)((t.mask >> k) & 1);
			}
		} else {
			for (uint32_t m = t.mask & all; m; m &= m - 1) {
				unsigned k = (unsigned)__builtin_ctz(m);

				memcpy(hk + end[k], str, tl);
				end[k] += tl;
			}
		}
		s->pc[i] = t;
	}
	for (unsigned k = 0; k < ncoords; k++)
		s->hk_len[k] = end[k] - k * stride;
}

/* The most coordinates fill_fixed() fills. */
#define FILL_FIXED_MAX 12

/*
 * fill_terms() for a number of coordinates @p nc known when it is compiled
 * (the callers below): every loop over the coordinates is unrolled and
 * indexes the ends with constants only, so they can stay in registers (the
 * buffers are below HK_MAX: 32 bits hold them). A long term's loop over
 * its mask's bits, indexing them with a variable, kept them on the stack,
 * and the vectors they were kept in then went through memory for every
 * term: a store of the vector, a load of each lane.
 */
static inline __attribute__((always_inline)) void
fill_fixed(struct im_signer *s, size_t npk, const unsigned nc)
{
	uint32_t stride = (uint32_t)s->hk_stride;
	unsigned char *hk = s->hkd;
	uint32_t end[FILL_FIXED_MAX];

#pragma GCC unroll 16
	for (unsigned k = 0; k < nc; k++) {
		end[k] = k * stride + 1;
		hk[k * stride] = (unsigned char)k;
	}
	for (size_t i = 0; i < npk; i++) {
		struct cand t = s->found[(uint32_t)s->pk[i]];
		uint32_t tl = t.len + 1;
		const char *str = t.str;

		t.str = (const char *)hk + end[0]; /* bit 0: always in */
		if (t.len < IM_LEX_STR_PAD) {
			unsigned char b[IM_LEX_STR_PAD];

			memcpy(b, str, IM_LEX_STR_PAD);
#pragma GCC unroll 16
			for (unsigned k = 0; k < nc; k++) {
				memcpy(hk + end[k], b, IM_LEX_STR_PAD);
				end[k] += tl & -((t.mask >> k) & 1);
			}
		} else {
#pragma GCC unroll 16
			for (unsigned k = 0; k < nc; k++) {
				if ((t.mask >> k) & 1) {
					memcpy(hk + end[k], str, tl);
					end[k] += tl;
				}
			}
		}
		s->pc[i] = t;
	}
#pragma GCC unroll 16
	for (unsigned k = 0; k < nc; k++)
		s->hk_len[k] = end[k] - k * stride;
}

/* The vector fill for the default K = 4 and the former default K = 10,
 * the scalar one for any other K. */
static void fill_coords(struct im_signer *s, size_t npk)
{
	switch (s->p.k + 1) {
	case 5: fill_fixed(s, npk, 5); break;
	case 11: fill_fixed(s, npk, 11); break;
	default: fill_terms(s, npk, s->p.k + 1); break;
	}
}

/*
 * P, sorted, into pc[], its bytes copied once, in order, into pb: every
 * coordinate reads them again, and the lexicon's records lie all over its
 * arena. A short term is copied with its padding, as put() reads it.
 */
static void copy_p(struct im_signer *s, size_t npk)
{
	size_t off = 0;

	for (size_t i = 0; i < npk; i++) {
		struct cand t = s->found[(uint32_t)s->pk[i]];

		/* A fixed size for the short ones: a move, not a call. */
		if (t.len < IM_LEX_STR_PAD)
			memcpy(s->pb + off, t.str, IM_LEX_STR_PAD);
		else
			memcpy(s->pb + off, t.str, t.len + 1);
		t.str = s->pb + off;
		off += t.len + 1;
		s->pc[i] = t;
	}
}

static int later_room(struct im_signer *s, size_t need, unsigned ncoords);

/* P sorted by term number, which is byte order; Q waits for sort_q(). */
static int collect_end(struct im_signer *s, struct collecting c,
		       size_t n_unique)
{
	unsigned ncoords = s->p.k + 1;
	size_t stride = c.bytes + IM_LEX_STR_PAD;

	flush_counts(s, c.acc);
	sort_below(s->pk, s->tmp, c.npk, im_lexicon_primary_size(s->lex));
	/* A document whose buffers would pass HK_MAX is hashed coordinate by
	 * coordinate (coord_hash()): a signer keeps its buffers, and K + 1
	 * copies of the largest document's terms would stay with it. */
	s->hk_filled = ncoords * stride <= HK_MAX;
	if (s->hk_filled && s->later) {
		/* Room in lat for hk and hb, after the documents waiting. */
		int r = later_room(s, (ncoords + 1) * stride, ncoords);

		if (r < 0)
			return r;
		s->hkd = s->lat + s->latlen;
		s->hbd = s->hkd + ncoords * stride;
		s->latlen += (ncoords + 1) * stride;
	} else {
		/* One buffer holds any S of this document. */
		if (grow((void **)&s->hb, &s->hbcap, stride, 1) < 0)
			return -ENOMEM;
		s->hbd = (unsigned char *)s->hb;
	}
	if (s->hk_filled) {
		if (!s->later) {
			if (grow((void **)&s->hk, &s->hkcap, ncoords * stride,
				 1) < 0)
				return -ENOMEM;
			s->hkd = s->hk;
		}
		s->hk_stride = stride;
		fill_coords(s, c.npk);
	} else {
		if (grow((void **)&s->pb, &s->pbcap, stride, 1) < 0)
			return -ENOMEM;
		copy_p(s, c.npk);
	}
	s->npc = c.npk;
	s->nqc = c.nqk; /* qc[] is filled by sort_q(), if some coordinate
			    needs it */
	s->q_sorted = 0;
	s->last_n = n_unique;
	s->have_last = 1;
	return 0;
}

/*
 * Look every term of @p u up and keep the candidates: P (in L) sorted by term
 * number, which is byte order, and Q (in B) sorted by term number, which is
 * rank order. Count |L_k ∩ U| for every k on the way.
 */
static int collect(struct im_signer *s, const struct im_terms *u)
{
	struct collecting c;

	if (collect_begin(s, u->n) < 0)
		return -ENOMEM;
	collecting_init(s, &c);
	for (size_t i = 0; i < u->n; i++) {
		/* Lookups are independent: let the next slots load meanwhile. */
		if (i + PREFETCH < u->n)
			im_lexicon_prefetch(s->lex, u->v[i + PREFETCH].hash);
		const struct im_term *ut = &u->v[i];
		const char *str;
		long ix = im_lexicon_lookup(s->lex, im_terms_str(u, i), ut->len,
					    ut->hash, &str);
		if (ix >= 0)
			collect_add(s, &c, ix, str, ut->len);
	}
	s->found = s->raw;
	return collect_end(s, c, u->n);
}

/* s->nt for the signer's lexicon, if it is not there yet. */
static int numterms_make(struct im_signer *s)
{
	size_t n = im_lexicon_primary_size(s->lex) +
		   im_lexicon_secondary_size(s->lex);
	struct cand *v;

	if (s->nt)
		return 0;
	/* Apart from the heap (mem.h): a table per term of the lexicon. */
	if (n > SIZE_MAX / sizeof(*v))
		return -ENOMEM;
	v = im_table_alloc(n * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const struct im_lex_term *t = im_lexicon_term(s->lex, i);

		v[i].str = t->str;
		v[i].len = t->len;
		v[i].mask = s->masks ? s->masks[i]
				     : member_mask(s, t->str, t->len, NULL);
	}
	s->nt = v;
	s->nnt = n;
	return 0;
}

/* The same from the term numbers of the terms the lexicon holds. */
static int collect_numbers(struct im_signer *s, const uint32_t *nums, size_t n,
			   size_t n_unique)
{
	size_t nprimary = im_lexicon_primary_size(s->lex);
	struct collecting c;

	if (numterms_make(s) < 0 || collect_begin(s, n) < 0)
		return -ENOMEM;
	collecting_init(s, &c);
	for (size_t i = 0; i < n && i < NT_PREFETCH; i++)
		if (nums[i] < s->nnt)
			__builtin_prefetch(&s->nt[nums[i]]);
	for (size_t i = 0; i < n; i++) {
		const struct cand *t;
		int primary = nums[i] < nprimary;

		/* Each term's entry is where the work waits: fetch ahead. */
		if (i + NT_PREFETCH < n && nums[i + NT_PREFETCH] < s->nnt)
			__builtin_prefetch(&s->nt[nums[i + NT_PREFETCH]]);
		if (nums[i] >= s->nnt)
			return -EINVAL;
		t = &s->nt[nums[i]];
		if (primary)
			count_mask(s, &c, t->mask);
		/* fill_coords() reads the bytes after the sort: let them come. */
		__builtin_prefetch(t->str);
		collect_put(&c, nums[i], primary, nums[i], t->len);
	}
	s->found = s->nt;
	return collect_end(s, c, n_unique);
}

/* ---- One coordinate ------------------------------------------------------- */

static int ratio_ok(size_t m, size_t n, double r)
{
	return n > 0 && (double)m / (double)n >= r;
}

/* The smallest |S| that meets min_ratio for |U| = n (n if none smaller). */
static size_t ratio_need(size_t n, double r)
{
	if (n == 0)
		return 0;
	double x = ceil(r * (double)n);
	size_t m = x < 0 ? 0 : x > (double)n ? n : (size_t)x;
	while (m > 0 && ratio_ok(m - 1, n, r))
		m--;
	while (m < n && !ratio_ok(m, n, r))
		m++;
	return m;
}

/*
 * The ratio threshold of coordinate k. L_k and B_k keep a fraction keep of
 * L and B, so |S_k|/|U| can reach only about keep times what |S_0|/|U| can:
 * with one threshold for all, every randomized coordinate of a document
 * that coordinate 0 signs comfortably would be rejected whenever
 * keep * coverage < min_ratio, and randomization would add nothing. Scaling
 * keeps the §3 guard (a long document may not be signed by a sliver of its
 * terms) at the same strength relative to what each lexicon can offer.
 */
static double coord_ratio(const struct im_signer *s, unsigned k)
{
	return k ? s->p.min_ratio * s->p.keep : s->p.min_ratio;
}

struct coord {
	size_t primary, secondary;
	uint32_t stamp; /* marks the terms of Q that joined S */
};

/* Q in rank order, once per document and only when S must be extended. */
static void sort_q(struct im_signer *s)
{
	if (s->q_sorted)
		return;
	sort_by_number(s->qk, s->tmp, s->nqc);
	for (size_t i = 0; i < s->nqc; i++)
		s->qc[i] = s->found[(uint32_t)s->qk[i]];
	s->q_sorted = 1;
}

/*
 * Decide S for coordinate @p k: the best-ranked terms of Q with bit k join
 * it until |S| reaches @p need. They are listed in s->qs, in rank order, and
 * marked in s->sel with a stamp of their own.
 */
static void coord_select(struct im_signer *s, unsigned k, size_t need,
			 struct coord *c)
{
	uint32_t bit = UINT32_C(1) << k;

	c->primary = s->pcount[k];
	c->secondary = 0;
	c->stamp = 0;
	if (c->primary >= need || !s->nqc)
		return;
	sort_q(s);
	c->stamp = ++s->stamp;
	if (c->stamp == 0) { /* wrapped: forget every old mark */
		memset(s->sel, 0, s->ccap * sizeof(*s->sel));
		c->stamp = s->stamp = 1;
	}
	for (size_t i = 0; i < s->nqc && c->primary + c->secondary < need;
	     i++) {
		if (s->qc[i].mask & bit) {
			s->sel[i] = c->stamp;
			s->qs[c->secondary++] = (uint32_t)i;
		}
	}
}

/*
 * Put the terms coord_select() took from Q in byte order. A few are sorted
 * on the spot; many are read off Q in byte order, which is sorted once per
 * document and only then.
 */
#define FEW_SECONDARY 32

static void coord_order(struct im_signer *s, const struct coord *c)
{
	const uint32_t *bo = im_lexicon_byte_order(s->lex);
	uint32_t *qs = s->qs;
	size_t n = c->secondary;

	if (n <= FEW_SECONDARY && !s->qb_sorted) {
		for (size_t i = 1; i < n; i++) {
			uint32_t x = qs[i];
			size_t j = i;
			for (; j > 0 && q_before(s, bo, x, qs[j - 1]); j--)
				qs[j] = qs[j - 1];
			qs[j] = x;
		}
		return;
	}
	sort_qb(s);
	size_t m = 0;
	for (size_t j = 0; j < s->nqc && m < n; j++)
		if (s->sel[s->qb[j]] == c->stamp)
			qs[m++] = s->qb[j];
}

/*
 * Visit S of coordinate k in byte order: P filtered by bit k, merged with the
 * terms taken from Q. coord_hash() is the same merge, written for speed;
 * this one serves explain.
 */
typedef int (*visit_fn)(void *arg, const struct cand *t);

static int coord_walk(struct im_signer *s, unsigned k, const struct coord *c,
		      visit_fn fn, void *arg)
{
	uint32_t bit = UINT32_C(1) << k;
	size_t i = 0, j = 0;
	int r;

	coord_order(s, c);
	for (;;) {
		while (i < s->npc && !(s->pc[i].mask & bit))
			i++;
		const struct cand *a = i < s->npc ? &s->pc[i] : NULL;
		const struct cand *b =
			j < c->secondary ? &s->qc[s->qs[j]] : NULL;
		if (!a && !b)
			return 0;
		if (a && (!b || cand_cmp(a, b) < 0)) {
			i++;
		} else {
			a = b;
			j++;
		}
		if ((r = fn(arg, a)))
			return r;
	}
}

/*
 * Append a term and its NUL separator (the lexicon's strings end in NUL) if
 * @p in, without a branch for the common case: a short term is copied with
 * one fixed-size copy (lexicon.h guarantees the bytes are readable, and hb has
 * IM_LEX_STR_PAD bytes of slack), and only counted when it is in S.
 */
static inline size_t put(unsigned char *hb, size_t len, const struct cand *t,
			 uint32_t in)
{
	if (t->len < IM_LEX_STR_PAD) {
		memcpy(hb + len, t->str, IM_LEX_STR_PAD);
		return len + in * (t->len + 1);
	}
	if (in)
		memcpy(hb + len, t->str, t->len + 1);
	return len + in * (t->len + 1);
}

/*
 * The bytes coordinate @p k hashes, into @p m. With fill_coords()'s buffers,
 * S = P_k is there already, and an S that took terms from Q is written over
 * coordinate k's (room for every candidate; coordinate 0's stay, pc[] points
 * into them) or, for k = 0, into hb: each coordinate's bytes then stay
 * until the document's last is made, and all are hashed together. Without
 * them every S goes to hb, to be hashed before the next.
 */
static void coord_bytes(struct im_signer *s, unsigned k, const struct coord *c,
			struct im_sha1_msg *m)
{
	unsigned char *hb = s->hbd;
	size_t len = 1;

	if (!c->secondary && s->hk_filled) {
		m->data = s->hkd + k * s->hk_stride;
		m->len = s->hk_len[k];
		return;
	}
	if (s->hk_filled && k)
		hb = s->hkd + k * s->hk_stride;
	hb[0] = (unsigned char)k;
	if (!c->secondary) {
		for (size_t i = 0; i < s->npc; i++)
			len = put(hb, len, &s->pc[i], (s->pc[i].mask >> k) & 1);
	} else {
		const uint32_t *bo = im_lexicon_byte_order(s->lex);
		size_t i = 0;

		coord_order(s, c);
		for (size_t j = 0; j < c->secondary; j++) {
			const struct cand *b = &s->qc[s->qs[j]];

			/* pk[i] holds pc[i]'s term number (collect_end()). */
			if (bo) {
				uint32_t at = bo[s->qk[s->qs[j]] >> 32];

				for (; i < s->npc && bo[s->pk[i] >> 32] < at;
				     i++)
					len = put(hb, len, &s->pc[i],
						  (s->pc[i].mask >> k) & 1);
			} else {
				for (; i < s->npc && cand_cmp(&s->pc[i], b) < 0;
				     i++)
					len = put(hb, len, &s->pc[i],
						  (s->pc[i].mask >> k) & 1);
			}
			len = put(hb, len, b, 1);
		}
		for (; i < s->npc; i++)
			len = put(hb, len, &s->pc[i], (s->pc[i].mask >> k) & 1);
	}
	m->data = hb;
	m->len = len;
}

/* ---- Signing --------------------------------------------------------------- */

/*
 * Decide and hash every coordinate of the document collect() saw, of |U| =
 * @p n terms: sets status (SIGNED or REJECTED), valid and sig[] of @p out.
 */
static int sign_coords(struct im_signer *s, size_t n, struct im_doc_sigs *out,
		       struct im_coord_info *info)
{
	unsigned ncoords = s->p.k + 1;
	size_t need0 = ratio_need(n, coord_ratio(s, 0));
	size_t needk = ratio_need(n, coord_ratio(s, 1));
	struct im_sha1_msg msg[IM_MAX_COORDS];
	size_t nmsg = 0;
	int r;

	out->status = IM_DOC_REJECTED;
	out->valid = 0;
	memset(out->sig, 0, sizeof(out->sig));
	for (unsigned k = 0; k < ncoords; k++) {
		struct coord c;
		const char *why = NULL;

		coord_select(s, k, k ? needk : need0, &c);
		size_t size = c.primary + c.secondary;
		if (n == 0 || n < s->p.min_unique)
			why = "fewer than min_unique unique terms";
		else if (size < s->p.min_terms)
			why = "fewer than min_terms terms in S";
		else if (!ratio_ok(size, n, coord_ratio(s, k)))
			why = k ? "|S|/|U| below min_ratio * keep"
				: "|S|/|U| below min_ratio";
		if (info)
			info[k] = (struct im_coord_info){
				.primary = (uint32_t)c.primary,
				.secondary = (uint32_t)c.secondary,
				.size = (uint32_t)size,
				.rejected = why != NULL,
				.why = why,
			};
		if (why)
			continue;
		msg[nmsg].out = out->sig[k].b;
		coord_bytes(s, k, &c, &msg[nmsg++]);
		if (!s->hk_filled) {
			r = im_sha1_many(s->sha, msg, nmsg);
			if (r < 0)
				return r;
			nmsg = 0;
		}
		out->valid |= UINT32_C(1) << k;
	}
	if (s->hk_filled && s->later) {
		/* collect_end() made room (later_room()). */
		memcpy(s->lmsg + s->nlmsg, msg, nmsg * sizeof(*msg));
		s->nlmsg += nmsg;
	} else {
		r = im_sha1_many(s->sha, msg, nmsg);
		if (r < 0)
			return r;
	}
	if (out->valid)
		out->status = IM_DOC_SIGNED;
	return 0;
}

int im_signer_sign_terms(struct im_signer *s, const struct im_terms *u,
			 struct im_doc_sigs *out, struct im_coord_info *info)
{
	size_t n = u->n;
	int r;

	memset(out, 0, sizeof(*out));
	out->status = IM_DOC_REJECTED;
	out->ncoords = (uint8_t)(s->p.k + 1);
	out->unique_terms = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
	out->numbers = u->numbers;
	if (!s->lex)
		return -EINVAL;
	r = collect(s, u);
	if (r < 0)
		return r;
	r = sign_coords(s, n, out, info);
	if (r < 0)
		return r;
	im_sketch_compute(u, s->p.seed, &out->sketch);
	return 0;
}

/* Take @p m unless another signer holds it: @return false then. A signer
 * does not wait for a shared memo, which only saves work: waiting (a sleep
 * and a wake-up, up to half a millisecond on a virtual machine) cost more
 * than it saved on a tree without copies. */
static bool memo_lock(struct im_sig_memo *m)
{
	return !m->shared || !pthread_mutex_trylock(&m->lock);
}

static void memo_unlock(struct im_sig_memo *m)
{
	if (m->shared)
		pthread_mutex_unlock(&m->lock);
}

/* Bytes of numbers and signatures of @p e. */
static size_t memo_size(const struct memo *e)
{
	return e->n * sizeof(*e->nums) +
	       (size_t)__builtin_popcount(e->valid) * IM_SIG_LEN;
}

/* The memo's slot for @p n numbers @p nums of a document of
 * @p unique_terms terms. The first numbers tell most documents apart, and
 * a hit compares the whole sequence anyway: hashing every number would
 * add a pass over each document's, copy or not. */
static uint64_t memo_hash(const uint32_t *nums, size_t n, uint32_t unique_terms)
{
	size_t head = n < MEMO_HASHED ? n : MEMO_HASHED;

	return XXH3_64bits_withSeed(nums, head * sizeof(*nums),
				    (uint64_t)n << 32 | unique_terms);
}

/*
 * The memo's result for the @p n numbers @p nums (in this order) of a
 * document of @p unique_terms terms, hashed to @p h, into @p out; false when
 * it holds none. Exact copies of one file, which a tree holds by the
 * hundreds (the same licence in every package), give the same numbers in
 * the same order: their signatures are copied instead of being made again.
 */
static bool memo_find(const struct im_sig_memo *m, uint64_t h,
		      const uint32_t *nums, size_t n, uint32_t unique_terms,
		      struct im_doc_sigs *out)
{
	const struct memo *e;
	const uint8_t *sig;

	if (!m->slots)
		return false;
	e = &m->slots[h % MEMO_SLOTS];
	if (!e->used || e->hash != h || e->n != n ||
	    e->unique_terms != unique_terms ||
	    memcmp(e->nums, nums, n * sizeof(*nums)))
		return false;
	out->status = e->status;
	out->valid = e->valid;
	memset(out->sig, 0, sizeof(out->sig));
	sig = (const uint8_t *)(e->nums + n);
	for (uint32_t v = e->valid; v; v &= v - 1) {
		memcpy(out->sig[__builtin_ctz(v)].b, sig, IM_SIG_LEN);
		sig += IM_SIG_LEN;
	}
	return true;
}

/* Keep @p out, the result for @p nums, in the memo, in place of what its
 * slot held; not when that would pass MEMO_BYTES or memory is short (the
 * memo only saves work). A slot keeps its buffer for the next result. */
static void memo_keep(struct im_sig_memo *m, uint64_t h, const uint32_t *nums,
		      size_t n, const struct im_doc_sigs *out)
{
	struct memo *e;
	uint8_t *sig;
	size_t size;

	if (!m->slots && !(m->slots = calloc(MEMO_SLOTS, sizeof(*m->slots))))
		return;
	e = &m->slots[h % MEMO_SLOTS];
	e->used = false;
	e->hash = h;
	e->unique_terms = out->unique_terms;
	e->n = (uint32_t)n;
	e->valid = out->valid;
	e->status = out->status;
	size = memo_size(e);
	if (size > e->cap) {
		m->bytes -= e->cap;
		free(e->nums);
		e->nums = NULL;
		e->cap = 0;
		if (m->bytes + size > MEMO_BYTES || !(e->nums = malloc(size)))
			return;
		e->cap = size;
		m->bytes += size;
	}
	memcpy(e->nums, nums, n * sizeof(*nums));
	sig = (uint8_t *)(e->nums + n);
	for (uint32_t v = e->valid; v; v &= v - 1) {
		memcpy(sig, out->sig[__builtin_ctz(v)].b, IM_SIG_LEN);
		sig += IM_SIG_LEN;
	}
	e->used = true;
}

static int flush_later(struct im_signer *s);

/*
 * Make room in lat for @p need more bytes and the @p ncoords coordinates
 * of one more document, hashing those that wait first if need be.
 */
static int later_room(struct im_signer *s, size_t need, unsigned ncoords)
{
	int r;

	if (s->latlen + need > s->latcap || s->nlmsg + ncoords > LATER_MSGS ||
	    s->nldoc == LATER_MSGS) {
		r = flush_later(s);
		if (r < 0)
			return r;
	}
	if (!s->ldoc) {
		s->ldoc = malloc(LATER_MSGS * sizeof(*s->ldoc));
		if (!s->ldoc)
			return -ENOMEM;
	}
	if (need > s->latcap) {
		/* Nothing waits: the old bytes need not move. */
		size_t cap = need > LATER_BYTES ? need : LATER_BYTES;

		free(s->lat);
		s->latcap = 0;
		s->lat = malloc(cap);
		if (!s->lat)
			return -ENOMEM;
		s->latcap = cap;
	}
	return 0;
}

/* Lengths longest_first() tells apart: whole 64-byte blocks, up to this
 * many (a lane's share of a batch as large as LATER_BYTES). */
#define LEN_CLASSES 64

/* The place of a message of @p len bytes in longest_first()'s order. */
static inline unsigned len_class(size_t len)
{
	size_t b = len / 64;

	return LEN_CLASSES - 1 -
	       (unsigned)(b < LEN_CLASSES ? b : LEN_CLASSES - 1);
}

/*
 * The @p n messages of @p in into @p out, longest first (so that the lanes
 * end together, sha1.h), by whole blocks: a counting sort. An insertion
 * sort moved each document's coordinate 0 past the shorter coordinates of
 * the documents before it, some n * n / 8 moves a flush.
 */
static void longest_first(const struct im_sha1_msg *in, struct im_sha1_msg *out,
			  size_t n)
{
	uint32_t at[LEN_CLASSES] = {0}, sum = 0;

	for (size_t i = 0; i < n; i++)
		at[len_class(in[i].len)]++;
	for (unsigned c = 0; c < LEN_CLASSES; c++) {
		uint32_t x = at[c];

		at[c] = sum;
		sum += x;
	}
	for (size_t i = 0; i < n; i++)
		out[at[len_class(in[i].len)]++] = in[i];
}

/* im_signer_flush() but for the error of an earlier flush; an error of
 * this one is kept for the next im_signer_flush() too (s->dropped). */
static int flush_later(struct im_signer *s)
{
	struct im_sha1_msg v[LATER_MSGS];
	int r = 0;

	if (s->nlmsg) {
		longest_first(s->lmsg, v, s->nlmsg);
		r = im_sha1_many(s->sha, v, s->nlmsg);
	}
	for (size_t i = 0; !r && i < s->nldoc; i++) {
		const struct later *l = &s->ldoc[i];

		if (l->from)
			memcpy(l->out->sig, l->from->sig, sizeof(l->out->sig));
		else if (memo_lock(s->memo)) {
			memo_keep(s->memo, l->hash, s->lnums + l->nums, l->n,
				  l->out);
			memo_unlock(s->memo);
		}
	}
	s->nlmsg = 0;
	s->nldoc = 0;
	s->latlen = 0;
	s->lnumslen = 0;
	if (r < 0 && !s->dropped)
		s->dropped = r;
	return r;
}

int im_signer_flush(struct im_signer *s)
{
	int r = flush_later(s);

	/* A flush that dropped results since the last call (said once). */
	if (s->dropped)
		r = s->dropped;
	s->dropped = 0;
	return r;
}

/* Keep what the memo is to keep of @p out, signed from @p nums, when its
 * signatures are made: now, or once they are (im_signer_flush()). */
static int memo_later(struct im_signer *s, uint64_t h, const uint32_t *nums,
		      size_t n, struct im_doc_sigs *out, size_t nmsg)
{
	struct later *l;

	if (nmsg == s->nlmsg) {
		/* Hashed at once, or nothing to hash. */
		if (memo_lock(s->memo)) {
			memo_keep(s->memo, h, nums, n, out);
			memo_unlock(s->memo);
		}
		return 0;
	}
	if (grow((void **)&s->lnums, &s->lnumscap, s->lnumslen + n,
		 sizeof(*nums)) < 0)
		return -ENOMEM;
	l = &s->ldoc[s->nldoc++];
	*l = (struct later){out, NULL, h, s->lnumslen, n};
	memcpy(s->lnums + s->lnumslen, nums, n * sizeof(*nums));
	s->lnumslen += n;
	return 0;
}

/*
 * Whether a document that waits has the numbers @p nums, hashed to @p h,
 * and |U| of @p out: then @p out takes its result, its sig[] with the
 * flush. The memo keeps a result once it is made; exact copies of a file
 * (the same licence in every package) often come closer together.
 */
static bool copy_waiting(struct im_signer *s, uint64_t h, const uint32_t *nums,
			 size_t n, struct im_doc_sigs *out)
{
	for (size_t i = 0; i < s->nldoc; i++) {
		const struct later *l = &s->ldoc[i];

		if (l->from || l->hash != h || l->n != n ||
		    l->out->unique_terms != out->unique_terms ||
		    memcmp(s->lnums + l->nums, nums, n * sizeof(*nums)))
			continue;
		if (s->nldoc == LATER_MSGS)
			return false;
		out->status = l->out->status;
		out->valid = l->out->valid;
		memset(out->sig, 0, sizeof(out->sig));
		s->ldoc[s->nldoc++] = (struct later){out, l->out, h, 0, n};
		return true;
	}
	return false;
}

static int sign_numbers(struct im_signer *s, const uint32_t *nums, size_t n,
			struct im_doc_sigs *out, bool later, unsigned use)
{
	/* No term of the lexicon: rejected at once, nothing to save. */
	bool memo = n && n <= MEMO_BYTES / sizeof(*nums);
	bool find = memo && (use & IM_MEMO_FIND);
	bool keep = memo && (use & IM_MEMO_KEEP);
	uint64_t h = 0;
	size_t nmsg;
	int r;

	if (!s->lex)
		return -EINVAL;
	if (find || keep)
		h = memo_hash(nums, n, out->unique_terms);
	if (find) {
		bool found = false;

		if (memo_lock(s->memo)) {
			found = memo_find(s->memo, h, nums, n,
					  out->unique_terms, out);
			memo_unlock(s->memo);
		}
		if (found || (later && copy_waiting(s, h, nums, n, out))) {
			s->have_last = 0;
			return 0;
		}
	}
	s->later = later;
	r = collect_numbers(s, nums, n, out->unique_terms);
	/* After a flush in collect_end(), if any: what this one adds. */
	nmsg = s->nlmsg;
	if (r >= 0)
		r = sign_coords(s, out->unique_terms, out, NULL);
	s->later = false;
	if (r < 0)
		return r;
	return keep ? memo_later(s, h, nums, n, out, nmsg) : 0;
}

int im_signer_sign_numbers(struct im_signer *s, const uint32_t *nums, size_t n,
			   struct im_doc_sigs *out)
{
	return sign_numbers(s, nums, n, out, false,
			    IM_MEMO_FIND | IM_MEMO_KEEP);
}

int im_signer_sign_numbers_later(struct im_signer *s, const uint32_t *nums,
				 size_t n, struct im_doc_sigs *out,
				 unsigned memo)
{
	return sign_numbers(s, nums, n, out, true, memo);
}

void im_signer_share_memo(struct im_signer *s, struct im_sig_memo *m)
{
	/* What waits is kept where it was signed for. */
	flush_later(s);
	s->memo = m ? m : &s->own;
}

void im_signer_set_lexicon(struct im_signer *s, const struct im_lexicon *lex,
			   const uint32_t *masks)
{
	/* Results of the old lexicon, kept in the memo it forgets. */
	flush_later(s);
	s->lex = lex;
	s->masks = masks;
	s->have_last = 0;
	memo_clear(&s->own);
	/* Results signed with another lexicon are forgotten. */
	free(s->results);
	s->results = NULL;
	im_table_free(s->nt, s->nnt * sizeof(*s->nt));
	s->nt = NULL;
	s->nnt = 0;
}

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_MASKS_X8 1
#include <immintrin.h>

#define MASKS_X8 __attribute__((target("avx512f,avx512dq")))

static inline MASKS_X8 __m512i mix64_x8(__m512i z)
{
	z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)),
			       _mm512_set1_epi64(0xbf58476d1ce4e5b9));
	z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)),
			       _mm512_set1_epi64(0x94d049bb133111eb));
	return _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
}

/*
 * member_mask() of the terms numbered [@p from, @p to) of @p lex, eight at
 * a time, into @p masks; @return where it stopped (a multiple of eight
 * terms from @p from). The K keyed remixes of a term were most of a
 * first scan's masks, which its signing step waits for: here each runs on
 * eight terms in the 64-bit lanes of one vector. The arithmetic is
 * member_mask()'s, so the masks are the same bits.
 */
static MASKS_X8 size_t masks_x8(const struct im_lexicon *lex,
				const struct im_signer *s, uint32_t *masks,
				size_t from, size_t to)
{
	const __m512i keep53 = _mm512_set1_epi64((long long)s->keep53);
	size_t i = from;

	for (; i + 8 <= to; i += 8) {
		uint64_t h[8];
		__m512i vh, mask = _mm512_set1_epi64(1);

		for (unsigned j = 0; j < 8; j++) {
			const struct im_lex_term *t =
				im_lexicon_term(lex, i + j);

			h[j] = XXH3_64bits_withSeed(t->str, t->len, s->p.seed);
		}
		vh = _mm512_loadu_si512(h);
		for (unsigned k = 1; k <= s->p.k; k++) {
			uint64_t step = k * UINT64_C(0x9e3779b97f4a7c15);
			__m512i z = mix64_x8(_mm512_add_epi64(
				vh, _mm512_set1_epi64((long long)step)));
			__mmask8 in = _mm512_cmplt_epu64_mask(
				_mm512_srli_epi64(z, 11), keep53);

			mask = _mm512_mask_or_epi64(
				mask, in, mask,
				_mm512_set1_epi64((long long)1 << k));
		}
		_mm256_storeu_si256((__m256i *)(masks + i),
				    _mm512_cvtepi64_epi32(mask));
	}
	return i;
}

/* Whether this CPU runs masks_x8() (checked once per process). */
static bool have_masks_x8(void)
{
	/* Shared by the scan's workers: a race only computes it twice. */
	static int known = -1;
	int k = __atomic_load_n(&known, __ATOMIC_RELAXED);

	if (k < 0) {
		k = IM_CPU_HAS(AVX512F, "avx512f") &&
		    IM_CPU_HAS(AVX512DQ, "avx512dq");
		__atomic_store_n(&known, k, __ATOMIC_RELAXED);
	}
	return k;
}
#else
#define HAVE_MASKS_X8 0
#endif

int im_sig_masks_part(const struct im_lexicon *lex, const struct im_params *p,
		      uint32_t *masks, size_t from, size_t to)
{
	/* member_mask() reads only p and keep53. */
	struct im_signer s = {.p = *p};

	if (im_params_check(p, NULL, 0) < 0)
		return -EINVAL;
	s.keep53 = (uint64_t)ceil(ldexp(p->keep, 53));
#if HAVE_MASKS_X8
	if (p->k && have_masks_x8())
		from = masks_x8(lex, &s, masks, from, to);
#endif
	for (size_t i = from; i < to; i++) {
		const struct im_lex_term *t = im_lexicon_term(lex, i);

		masks[i] = member_mask(&s, t->str, t->len, NULL);
	}
	return 0;
}

int im_sig_masks(const struct im_lexicon *lex, const struct im_params *p,
		 uint32_t **out)
{
	size_t n =
		im_lexicon_primary_size(lex) + im_lexicon_secondary_size(lex);
	uint32_t *v;
	int r;

	*out = NULL;
	if (im_params_check(p, NULL, 0) < 0)
		return -EINVAL;
	v = malloc((n ? n : 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	r = im_sig_masks_part(lex, p, v, 0, n);
	if (r < 0) {
		free(v);
		return r;
	}
	*out = v;
	return 0;
}

/* The exact-copy hash of @p len bytes (exact.h): XXH3-128, canonical. */
static void exact_of(const char *buf, size_t len, uint8_t exact[16])
{
	XXH128_canonical_t c;

#ifdef HAVE_XXH_DISPATCH
	/* An input past XXH3_MIDSIZE_MAX runs XXH3's vector loop: the
	 * library's takes the widest the CPU has, where the inlined one is
	 * built for SSE2 (2.5% of a first scan of plain text). Same hash
	 * either way. It was taken from 64 KiB only, when a generated tree
	 * of small files scanned up to 1.6% slower with it from 241 bytes;
	 * since (one heap arena on huge pages) that tree scans 0.4% faster,
	 * and the kernel docs, most of them below 64 KiB, 0.9%. */
	if (len > XXH3_MIDSIZE_MAX) {
		XXH128_canonicalFromHash(&c, XXH3_128bits_dispatch(buf, len));
		memcpy(exact, c.digest, 16);
		return;
	}
#endif
	XXH128_canonicalFromHash(&c, XXH3_128bits(buf, len));
	memcpy(exact, c.digest, 16);
}

/*
 * Extract and tokenize @p buf; sign it too if @p sign, else leave a text with
 * status IM_DOC_REJECTED, no signature, its terms in s->terms and its sketch
 * (im_signer_prepare_at()).
 */
static int doc_buf(struct im_signer *s, const char *name, const char *buf,
		   size_t len, const uint8_t *exact, struct im_doc_sigs *out,
		   bool sign)
{
	struct im_extract_result xr;
	int r;

	s->sampled = false;
	r = im_extract(s->x, name, buf, len, &xr);
	if (r < 0)
		return r;
	if (xr.format == IM_FMT_BINARY || xr.fail) {
		s->have_last = 0;
		memset(out, 0, sizeof(*out));
		out->status = xr.fail ? IM_DOC_FAILED : IM_DOC_BINARY;
		out->err = (int32_t)xr.fail;
		out->ncoords = (uint8_t)(s->p.k + 1);
	} else {
		r = im_extract_terms(&xr, &s->p, &s->terms);
		if (r < 0)
			return r;
		s->sampled = s->terms.level != 0;
		if (sign) {
			r = im_signer_sign_terms(s, &s->terms, out, NULL);
			if (r < 0)
				return r;
		} else {
			size_t n = s->terms.n;

			s->have_last = 0;
			memset(out, 0, sizeof(*out));
			out->status = IM_DOC_REJECTED;
			out->ncoords = (uint8_t)(s->p.k + 1);
			out->unique_terms =
				n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
			im_sketch_compute(&s->terms, s->p.seed, &out->sketch);
			out->numbers = s->terms.numbers;
		}
	}
	out->format = (uint8_t)xr.format;
	/* Empty files are all "identical": relating them would make one
	 * cluster of every empty __init__.py and placeholder in the tree. */
	if (len == 0)
		return 0;
	if (exact)
		memcpy(out->exact, exact, sizeof(out->exact));
	else
		exact_of(buf, len, out->exact);
	out->exact_valid = 1;
	return 0;
}

int im_signer_sign_buf(struct im_signer *s, const char *name, const char *buf,
		       size_t len, struct im_doc_sigs *out)
{
	return doc_buf(s, name, buf, len, NULL, out, true);
}

/* ---- Reading ----------------------------------------------------------------- */

/*
 * A file over STREAM_ABOVE bytes whose first IM_EXTRACT_SNIFF bytes say
 * binary is hashed as it streams by in STREAM_CHUNK pieces instead of being
 * held whole (with max_size=0 a 2 GB image was read into memory only to be
 * found binary). Smaller files are read whole, so a container format whose
 * sniffing needs more than the first bytes is still seen as what it is.
 */
#define STREAM_ABOVE ((size_t)64 << 20)
#define STREAM_CHUNK ((size_t)1 << 20)

/*
 * A file up to READ_WHOLE_MAX bytes is read in one call and sniffed in the
 * buffer, also under defer_binary: a second read(2) per file cost more than
 * copying a small binary whole. A larger one is sniffed from its first
 * IM_EXTRACT_SNIFF bytes before the rest is read, if at all.
 */
#define READ_WHOLE_MAX ((size_t)256 << 10)

static int stream_hash(int fd, char *buf, size_t first, size_t want,
		       uint8_t exact[16])
{
	XXH3_state_t *h = XXH3_createState();
	size_t done = first, got;
	XXH128_canonical_t c;
	int err = 0;

	if (!h)
		return ENOMEM;
	XXH3_128bits_reset(h);
	XXH3_128bits_update(h, buf, first);
	while (done < want) {
		size_t n =
			want - done < STREAM_CHUNK ? want - done : STREAM_CHUNK;

		err = -im_read_full(fd, buf, n, &got);
		if (err || got == 0)
			break;
		XXH3_128bits_update(h, buf, got);
		done += got;
	}
	XXH128_canonicalFromHash(&c, XXH3_128bits_digest(h));
	memcpy(exact, c.digest, 16);
	XXH3_freeState(h);
	return err;
}

/* Whether the first bytes of a file, @p n of them, say binary as far as
 * read_at() is concerned: a ZIP is told from its entries, a compound file
 * (.doc) from its directory, which need all of it. */
static bool sniffs_binary(const char *buf, size_t n)
{
	if (n > IM_EXTRACT_SNIFF)
		n = IM_EXTRACT_SNIFF;
	/* Sniffing says binary only for a 0 byte among those (or a ZIP it
	 * cannot place): a text is not sniffed here and again when read. */
	if (!memchr(buf, '\0', n))
		return false;
	return im_extract_sniff(buf, n) == IM_FMT_BINARY &&
	       !(n >= 4 && !memcmp(buf, "PK\x03\x04", 4)) &&
	       !(n >= 8 && !memcmp(buf, IM_CFB_MAGIC, 8));
}

/* Whether a file that sniffs binary is left unread (defer_binary): its size
 * first (exact.h), hashed by the caller and only if another file has its
 * size. A filter reads it whole. */
static bool defers_binary(const struct im_signer *s, const char *name)
{
	return s->p.defer_binary && !im_extract_filter_for(s->p.filters, name);
}

/* The least buffer read_first() reads into: most texts fit at once. */
#define READ_FIRST_MIN ((size_t)64 << 10)

/*
 * size_only: read the file open as @p fd into s->buf before any fstat(2),
 * in one read(2) of all the buffer holds but a byte. @return 1 when fewer
 * bytes came, more than none: the end of a regular file, whose size that
 * is (*@p got); else 0 with *@p got bytes read (a larger file, an empty
 * one, an error, or no regular file at all: the fstat() tells). The fstat
 * it saves was 3% of a first scan of the kernel's Documentation/.
 */
static int read_first(struct im_signer *s, int fd, size_t *got)
{
	ssize_t r;

	*got = 0;
	if (im_buf_grow(&s->buf, &s->bufcap, READ_FIRST_MIN) < 0)
		return 0;
	do
		r = read(fd, s->buf, s->bufcap - 1);
	while (r < 0 && errno == EINTR);
	if (r <= 0)
		return 0;
	*got = (size_t)r;
	return *got < s->bufcap - 1 &&
	       (!s->p.max_size || (uint64_t)*got <= s->p.max_size);
}

/*
 * Open and read @p name into s->buf[0..*len). *status is IM_DOC_SIGNED when
 * it was read, IM_DOC_BINARY when a large binary file was streamed through
 * its hash (@p exact) instead, else IM_DOC_TOO_BIG or IM_DOC_ERROR with *err
 * set. A buffer that cannot be had for one large file is that file's error
 * (ENOMEM), not a failure of the signer.
 */
static void read_at(struct im_signer *s, int dirfd, const char *name,
		    struct stat *stp, enum im_doc_status *status, int *err,
		    size_t *len, uint8_t exact[16])
{
	struct stat st;
	size_t got = 0, want, first, have = 0;
	bool sniff_first = false;
	int fd;

	*status = IM_DOC_ERROR;
	*err = 0;
	*len = 0;
	s->deferred = false;
	memset(&st, 0, sizeof(st));
	/* Below a tree, no symlink on the way: a parent swapped for one must
	 * not lead out of it (issue 12). An absolute name is a path the user
	 * gave (and the CLI resolved). */
	if (name[0] == '/') {
		fd = openat(dirfd, name,
			    O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY |
				    O_NONBLOCK);
		*err = fd < 0 ? errno : 0;
	} else {
		*err = -im_open_beneath(dirfd, name,
					O_RDONLY | O_NOCTTY | O_NONBLOCK, &fd);
	}
	if (*err)
		goto out;
	/* A binary file left unread is hashed after the scan only if its
	 * stat is what it was (exact.h): that one is fstat'ed. */
	if (s->p.size_only && read_first(s, fd, &have) &&
	    !(s->p.defer_binary && have > READ_WHOLE_MAX &&
	      sniffs_binary(s->buf, have) && defers_binary(s, name))) {
		st.st_mode = S_IFREG;
		st.st_size = (off_t)have;
		got = have;
		goto whole;
	}
	if (fstat(fd, &st) < 0) {
		*err = errno;
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		*err = EISDIR;
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		*err = EINVAL; /* device, fifo or socket: never read */
		goto out;
	}
	if (s->p.max_size && (uint64_t)st.st_size > s->p.max_size) {
		*status = IM_DOC_TOO_BIG;
		goto out;
	}
	if ((uint64_t)st.st_size >= SIZE_MAX) {
		*err = EFBIG;
		goto out;
	}
	/* Bytes appended after fstat() are not read: the document is what
	 * the file held when it was opened, or less if it shrank (under
	 * size_only, what one read(2) found, when that told the size). */
	want = (size_t)st.st_size;
	/* What read_first() had (it shrank since, if more). */
	if (have > want)
		have = want;
	sniff_first = want > STREAM_ABOVE ||
		      (s->p.defer_binary && want > READ_WHOLE_MAX);
	if (sniff_first) {
		size_t cap = want > STREAM_ABOVE ? STREAM_CHUNK : want + 1;

		if (im_buf_grow(&s->buf, &s->bufcap, cap) < 0) {
			*err = ENOMEM;
			goto out;
		}
		first = have;
		if (first < IM_EXTRACT_SNIFF) {
			*err = -im_read_full(fd, s->buf + first,
					     IM_EXTRACT_SNIFF - first, &got);
			if (*err)
				goto out;
			first += got;
		}
		if (sniffs_binary(s->buf, first)) {
			if (defers_binary(s, name))
				goto deferred;
			if (want > STREAM_ABOVE) {
				*err = stream_hash(fd, s->buf, first, want,
						   exact);
				if (!*err)
					*status = IM_DOC_BINARY;
				goto out;
			}
		}
		got = first;
	} else {
		got = have;
	}
	if (im_buf_grow(&s->buf, &s->bufcap, want + 1) < 0) {
		*err = ENOMEM;
		goto out;
	}
	*err = -im_read_full(fd, s->buf + got, want - got, &first);
	if (*err)
		goto out;
	got += first;
whole:
	if (!sniff_first && s->p.defer_binary && got &&
	    sniffs_binary(s->buf, got) && defers_binary(s, name)) {
		/* Read whole already: hashed now, it is never read again
		 * when another file has its size (QA: small copies were read
		 * two or three times). */
		exact_of(s->buf, got, exact);
		*status = IM_DOC_BINARY;
		goto out;
	}
	*len = got;
	*status = IM_DOC_SIGNED;
	goto out;
deferred:
	s->deferred = true;
	memset(exact, 0, 16);
	*status = IM_DOC_BINARY;
out:
	if (fd >= 0)
		close(fd);
	if (stp)
		*stp = st;
}

static void drop_big_buffer(struct im_signer *s)
{
	if (s->bufcap > BUF_KEEP) {
		im_buf_free(s->buf, s->bufcap);
		s->buf = NULL;
		s->bufcap = 0;
	}
}

/* The result kept for bytes hashed to @p exact, into @p out: false if none
 * (size and mtime_ns are the caller's to set). */
static bool result_find(const struct im_signer *s, const uint8_t exact[16],
			struct im_doc_sigs *out)
{
	const struct im_doc_sigs *e;
	uint64_t h;

	if (!s->results)
		return false;
	memcpy(&h, exact, sizeof(h));
	e = &s->results[h % RESULT_SLOTS];
	if (!e->exact_valid || memcmp(e->exact, exact, sizeof(e->exact)))
		return false;
	*out = *e;
	return true;
}

/* Keep @p d, a text's result, in place of what its slot held. What depends
 * on more than the bytes (a failed extraction: a helper's deadline) is not
 * kept; out of memory, nothing is (it only saves work). */
static void result_keep(struct im_signer *s, const struct im_doc_sigs *d)
{
	uint64_t h;

	if (!d->exact_valid ||
	    (d->status != IM_DOC_SIGNED && d->status != IM_DOC_REJECTED))
		return;
	if (!s->results &&
	    !(s->results = calloc(RESULT_SLOTS, sizeof(*s->results))))
		return;
	memcpy(&h, d->exact, sizeof(h));
	s->results[h % RESULT_SLOTS] = *d;
}

/* The lender's result for bytes hashed to @p exact, checked to be what this
 * signer would make of them, and kept: false if none. */
static bool borrow(struct im_signer *s, const uint8_t exact[16],
		   struct im_doc_sigs *out)
{
	if (!s->lender(exact, out, s->lender_arg))
		return false;
	/* A filter's text depends on the name it read (a.xyz), which a copy
	 * (a.zip) need not share: that copy is read as what it is. */
	if (!out->exact_valid ||
	    memcmp(out->exact, exact, sizeof(out->exact)) ||
	    (out->status != IM_DOC_SIGNED && out->status != IM_DOC_REJECTED) ||
	    out->format == IM_FMT_FILTER || out->ncoords != s->p.k + 1) {
		memset(out, 0, sizeof(*out));
		return false;
	}
	result_keep(s, out);
	return true;
}

bool im_signer_by_bytes(const struct im_signer *s, const char *name)
{
	return !im_extract_filter_for(s->p.filters, name);
}

void im_signer_keep_results(struct im_signer *s, bool keep)
{
	s->keep_results = keep;
}

void im_signer_trim(struct im_signer *s)
{
	/* cand_reserve() sizes these for every term of a document: 92 bytes
	 * a term, most never written, but all of it held. */
	size_t cand_bytes =
		s->ccap * (3 * sizeof(struct cand) + 4 * sizeof(uint64_t) +
			   3 * sizeof(uint32_t));

	if (cand_bytes > TRIM_KEEP) {
		cand_arrays_free(s);
		s->raw = s->pc = s->qc = NULL;
		s->pk = s->qk = s->tmp = s->qbk = NULL;
		s->qb = s->qs = s->sel = NULL;
		s->ccap = 0;
		s->npc = s->nqc = 0;
		s->have_last = 0;
	}
	im_terms_trim(&s->terms, TRIM_KEEP);
}

bool im_signer_reused(const struct im_signer *s)
{
	return s->reused;
}

bool im_signer_sampled(const struct im_signer *s)
{
	return s->sampled;
}

/* im_signer_sign_at(), or im_signer_prepare_at() when !@p sign. */
static int doc_at(struct im_signer *s, int dirfd, const char *name,
		  struct im_doc_sigs *out, struct stat *st, bool sign)
{
	enum im_doc_status status;
	struct stat lst;
	uint8_t exact[16];
	size_t len;
	int err, r = 0;

	s->reused = false;
	s->sampled = false;
	read_at(s, dirfd, name, &lst, &status, &err, &len, exact);
	if (status != IM_DOC_SIGNED) {
		memset(out, 0, sizeof(*out));
		out->status = (uint8_t)status;
		out->ncoords = (uint8_t)(s->p.k + 1);
		out->err = err;
		if (status == IM_DOC_BINARY) {
			s->have_last = 0;
			out->format = IM_FMT_BINARY;
			memcpy(out->exact, exact, sizeof(out->exact));
			out->exact_valid = !s->deferred;
		}
		drop_big_buffer(s);
	} else {
		const char *base = strrchr(name, '/');
		/* Offered to the copy probe or the results kept: extraction
		 * depends on the bytes alone unless a filter reads them by
		 * name. */
		bool offer = (sign ? s->keep_results : s->copy_probe != NULL) &&
			     len && im_signer_by_bytes(s, name);

		bool known = false;

		if (offer) {
			exact_of(s->buf, len, exact);
			known = sign ? result_find(s, exact, out)
				     : s->copy_probe(exact, s->copy_arg);
			if (sign && !known && s->lender)
				known = borrow(s, exact, out);
		}
		if (known) {
			s->have_last = 0;
			s->reused = sign;
			if (!sign) {
				memset(out, 0, sizeof(*out));
				out->status = IM_DOC_REJECTED;
				out->ncoords = (uint8_t)(s->p.k + 1);
				memcpy(out->exact, exact, sizeof(out->exact));
				out->exact_valid = 1;
				r = 1;
			}
		} else {
			r = doc_buf(s, base ? base + 1 : name,
				    s->buf ? s->buf : "", len,
				    offer ? exact : NULL, out, sign);
			if (!r && offer && sign)
				result_keep(s, out);
		}
		drop_big_buffer(s);
	}
	out->size = (uint64_t)lst.st_size;
	out->mtime_ns =
		(int64_t)lst.st_mtim.tv_sec * 1000000000 + lst.st_mtim.tv_nsec;
	if (st)
		*st = lst;
	return r;
}

int im_signer_sign_at(struct im_signer *s, int dirfd, const char *name,
		      struct im_doc_sigs *out, struct stat *st)
{
	return doc_at(s, dirfd, name, out, st, true);
}

int im_signer_prepare_at(struct im_signer *s, int dirfd, const char *name,
			 struct im_doc_sigs *out, struct stat *st,
			 const struct im_terms **terms)
{
	int r = doc_at(s, dirfd, name, out, st, false);

	*terms = !r && out->status == IM_DOC_REJECTED ? &s->terms : NULL;
	return r;
}

void im_signer_set_copy_probe(struct im_signer *s, im_copy_probe probe,
			      void *arg)
{
	s->copy_probe = probe;
	s->copy_arg = arg;
}

void im_signer_set_lender(struct im_signer *s, im_result_lender lender,
			  void *arg)
{
	s->lender = lender;
	s->lender_arg = arg;
}

/*
 * Read and extract @p name as signing does. *status is IM_DOC_SIGNED when
 * @p xr holds its text, which may point into the signer's buffer: the
 * caller reads it before drop_big_buffer(). @return 0 or -ENOMEM.
 */
static int extract_at(struct im_signer *s, int dirfd, const char *name,
		      enum im_doc_status *status, struct im_extract_result *xr,
		      struct stat *st)
{
	uint8_t exact[16];
	size_t len;
	int err, r;

	s->last_fail = 0;
	read_at(s, dirfd, name, st, status, &err, &len, exact);
	if (*status != IM_DOC_SIGNED)
		return 0;
	const char *base = strrchr(name, '/');

	r = im_extract(s->x, base ? base + 1 : name, s->buf ? s->buf : "", len,
		       xr);
	if (r < 0)
		return r;
	if (xr->format == IM_FMT_BINARY || xr->fail) {
		*status = xr->fail ? IM_DOC_FAILED : IM_DOC_BINARY;
		s->last_fail = xr->fail;
	}
	return 0;
}

int im_signer_terms_at(struct im_signer *s, int dirfd, const char *name,
		       enum im_doc_status *status,
		       const struct im_terms **terms)
{
	return im_signer_terms_stat_at(s, dirfd, name, status, terms, NULL);
}

int im_signer_terms_stat_at(struct im_signer *s, int dirfd, const char *name,
			    enum im_doc_status *status,
			    const struct im_terms **terms, struct stat *st)
{
	struct im_extract_result xr;
	int r = extract_at(s, dirfd, name, status, &xr, st);

	*terms = NULL;
	if (!r && *status == IM_DOC_SIGNED) {
		r = im_extract_terms(&xr, &s->p, &s->terms);
		if (r == 0)
			*terms = &s->terms;
	}
	drop_big_buffer(s);
	return r;
}

int im_signer_figures_at(struct im_signer *s, int dirfd, const char *name,
			 enum im_doc_status *status,
			 int (*fn)(const char *s, size_t n, void *arg),
			 void *arg)
{
	struct im_extract_result xr;
	int r = extract_at(s, dirfd, name, status, &xr, NULL);

	if (!r && *status == IM_DOC_SIGNED)
		r = im_extract_figures(&xr, fn, arg);
	drop_big_buffer(s);
	return r;
}

int im_signer_last_fail(const struct im_signer *s)
{
	return s->last_fail;
}

/* ---- Explaining ------------------------------------------------------------ */

struct foreach_arg {
	const struct im_lexicon *lex;
	im_sig_term_fn fn;
	void *arg;
	unsigned k;
};

static int foreach_visit(void *arg, const struct cand *c)
{
	struct foreach_arg *a = arg;
	/* Explain is not a hot path: find the lexicon's entry again. */
	const struct im_lex_term *t = im_lexicon_find(
		a->lex, c->str, c->len, XXH3_64bits(c->str, c->len));
	return a->fn(a->arg, a->k, t);
}

int im_signer_foreach_term(struct im_signer *s, unsigned k, im_sig_term_fn fn,
			   void *arg)
{
	struct foreach_arg a = {s->lex, fn, arg, k};
	struct coord c;

	if (k > s->p.k || !s->have_last)
		return -EINVAL;
	coord_select(s, k, ratio_need(s->last_n, coord_ratio(s, k)), &c);
	return coord_walk(s, k, &c, foreach_visit, &a);
}

struct setv_arg {
	struct im_signer *s;
	size_t n;
};

static int setv_put(void *arg, unsigned k, const struct im_lex_term *t)
{
	struct setv_arg *a = arg;
	(void)k;
	if (grow((void **)&a->s->setv, &a->s->setcap, a->n + 2,
		 sizeof(*a->s->setv)) < 0)
		return -ENOMEM;
	a->s->setv[a->n++] = t->str;
	return 0;
}

const char *const *im_signer_last_set(struct im_signer *s, unsigned k)
{
	struct setv_arg a = {s, 0};

	if (grow((void **)&s->setv, &s->setcap, 1, sizeof(*s->setv)) < 0)
		return NULL;
	if (im_signer_foreach_term(s, k, setv_put, &a) != 0)
		return NULL;
	s->setv[a.n] = NULL;
	return s->setv;
}
