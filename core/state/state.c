/**
 * @file state.c
 * The signature cache file (layout in state.h). Loading maps the whole file,
 * checks the checksum first and then every entry's structure, so a corrupt
 * file never yields half an answer; entries are decoded from the mapping
 * when asked for.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "extract.h"
#include "fdio.h"
#include "state.h"

static const char state_magic[8] = "IMSTATE";
#define HEADER_LEN (8 + 4 + 4 + 8 + 8 + 8)
/* Where the header holds the key, the files key and the count. */
#define KEY_AT	     16
#define FILES_KEY_AT 24
#define COUNT_AT     32
/* An entry's size, mtime, inode and ctime fold, after its path. */
#define STAT_LEN (8 + 8 + 8 + 4)
#define ENTRY_FIXED                                                            \
	(4 + STAT_LEN + 1 + 1 + 1 + 4 + 4 + 4 + 16 + IM_SKETCH_RECORD + 8)

/* ---- Little-endian helpers ----------------------------------------------- */

struct buf {
	uint8_t *p;
	size_t len, cap;
};

static int buf_grow(struct buf *b, size_t more)
{
	if (b->len + more <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 4096;
	while (cap < b->len + more)
		cap *= 2;
	uint8_t *p = realloc(b->p, cap);
	if (!p)
		return -ENOMEM;
	b->p = p;
	b->cap = cap;
	return 0;
}

static void put_bytes(struct buf *b, const void *src, size_t n)
{
	memcpy(b->p + b->len, src, n);
	b->len += n;
}

static void put_u64(struct buf *b, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		b->p[b->len++] = (uint8_t)(v >> (8 * i));
}

static void put_u32(struct buf *b, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		b->p[b->len++] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_u64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static uint32_t get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

/* ---- Keys ---------------------------------------------------------------- */

/*
 * The -o filter list, in order (the first that matches a name reads it):
 * a filter makes a file that sniffs binary a document, so its entries, and
 * a document's, depend on it. 0 for none, so that keys without filters
 * stay what they were.
 */
static uint64_t filters_key(const char *const *filters)
{
	uint64_t h = 0;

	for (; filters && *filters; filters++)
		h = XXH3_64bits_withSeed(*filters, strlen(*filters) + 1, h) | 1;
	return h;
}

/*
 * The keys held max_size until an entry was checked against the limit
 * itself (im_state_entry_within()): a new limit then discarded the whole
 * cache. The default limit keeps its place in them, so that a cache made
 * with it keeps its key.
 */
#define KEYED_MAX_SIZE (UINT64_C(64) << 20)

uint64_t im_state_files_key(const struct im_params *p)
{
	uint8_t tmp[48]; /* 44 bytes at most, below */
	struct buf b = {tmp, 0, sizeof(tmp)};
	uint64_t filters = filters_key(p->filters);

	put_u64(&b, IM_STATE_VERSION);
	put_u64(&b, UINT64_C(0x66696c6573)); /* "files": not a key of above */
	put_u64(&b, KEYED_MAX_SIZE);
	/* Whether a file is binary, too big or fails depends on it too. */
	put_u32(&b, IM_EXTRACT_VERSION);
	if (filters)
		put_u64(&b, filters);
	return XXH3_64bits(tmp, b.len);
}

/* im_state_key() with @p max_size where the limit goes. */
static uint64_t key_with_limit(const struct im_params *p, uint64_t lex_key,
			       uint64_t max_size)
{
	/* Field by field, never the struct's bytes: padding is not data. */
	uint8_t tmp[128];
	struct buf b = {tmp, 0, sizeof(tmp)};
	uint64_t bits;

	put_u64(&b, IM_STATE_VERSION);
	put_u32(&b, IM_EXTRACT_VERSION);
	put_u64(&b, lex_key);
	put_u32(&b, p->min_word_len);
	put_u32(&b, p->max_digits);
	put_u32(&b, p->min_unique);
	put_u32(&b, p->k);
	memcpy(&bits, &p->keep, sizeof(bits));
	put_u64(&b, bits);
	put_u64(&b, p->seed);
	put_u32(&b, p->min_terms);
	memcpy(&bits, &p->min_ratio, sizeof(bits));
	put_u64(&b, bits);
	put_u64(&b, max_size);
	/* Sketches made with another geometry do not compare. */
	put_u32(&b, IM_SKETCH_BINS << 8 | IM_SKETCH_BITS);
	uint64_t filters = filters_key(p->filters);
	if (filters)
		put_u64(&b, filters);
	return XXH3_64bits(tmp, b.len);
}

uint64_t im_state_key(const struct im_params *p, uint64_t lex_key)
{
	return key_with_limit(p, lex_key, KEYED_MAX_SIZE);
}

uint64_t im_state_stage_key(const struct im_params *p, uint64_t lex_key)
{
	return key_with_limit(p, lex_key, p->max_size);
}

static int read_all(int fd, struct buf *b)
{
	for (;;) {
		if (buf_grow(b, 65536))
			return -ENOMEM;
		ssize_t n = read(fd, b->p + b->len, b->cap - b->len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return 0;
		b->len += (size_t)n;
	}
}

int im_state_file_key(const char *path, uint64_t *out)
{
	struct buf b = {0};
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	int ret;

	if (fd < 0)
		return -errno;
	ret = read_all(fd, &b);
	close(fd);
	if (ret == 0)
		*out = XXH3_64bits(b.p, b.len);
	free(b.p);
	return ret;
}

/* ---- Loading ------------------------------------------------------------- */

/* Entries i with i % CK_EVERY == 0 have their offset in im_state.ck, so
 * that im_state_at() walks fewer than CK_EVERY entries. */
#define CK_EVERY 64

struct im_state {
	const uint8_t *map; /* the whole file, read-only */
	size_t map_len;
	size_t n;
	/* Open addressing (linear probing) over the entries: each slot holds
	 * where an entry starts in map (its path length; past the header, so
	 * never 0), 0 = empty; slots32 when the file is under 4 GiB, slots64
	 * otherwise. nslots is about 4/3 of the entries: a load of 3/4 at
	 * most, whatever their number (a power of two would give 3/8 to 3/4;
	 * the cost of a probe is one visit to the map). */
	uint32_t *slots32;
	uint64_t *slots64;
	/* The same over (inode, last component of the path), for
	 * im_state_find_moved(): one entry of each pair, any other being a
	 * hard link of the same name, the same file for that purpose. By the
	 * inode alone, n hard links of one file (imatch apply --action
	 * hardlink makes them by the thousand) probed O(n^2) slots to load. */
	uint32_t *ino32;
	uint64_t *ino64;
	size_t nslots;
	uint64_t *ck; /* offset of every CK_EVERY-th entry */
	bool partial; /* loaded by its files key alone */
	int guard;    /* its slot in guards[], or -1 */
};

static inline size_t slot_get(const struct im_state *st, size_t h)
{
	return st->slots32 ? st->slots32[h] : (size_t)st->slots64[h];
}

static inline size_t ino_get(const struct im_state *st, size_t h)
{
	return st->ino32 ? st->ino32[h] : (size_t)st->ino64[h];
}

static inline uint64_t ino_hash(uint64_t ino, const char *name, size_t len)
{
	return XXH3_64bits_withSeed(name, len, ino);
}

/* The last component of the path @p p of @p len bytes, its length in
 * *name_len. */
static const char *last_name(const char *p, size_t len, size_t *name_len)
{
	const char *slash = memrchr(p, '/', len);
	const char *name = slash ? slash + 1 : p;

	*name_len = len - (size_t)(name - p);
	return name;
}

/* Where a hash starts probing: its high bits scaled to nslots. */
static inline size_t slot_home(const struct im_state *st, uint64_t hash)
{
	return (size_t)(((unsigned __int128)hash * st->nslots) >> 64);
}

static inline size_t slot_next(const struct im_state *st, size_t h)
{
	return h + 1 == st->nslots ? 0 : h + 1;
}

/* Bytes of the entry at @p off; the structure was checked at load. */
static size_t entry_len(const struct im_state *st, size_t off)
{
	const uint8_t *d = st->map + off;
	uint32_t plen = get_u32(d);
	uint32_t valid = get_u32(d + 4 + plen + STAT_LEN + 7);

	return ENTRY_FIXED + plen +
	       (size_t)__builtin_popcount(valid) * IM_SIG_LEN;
}

/* ---- The mapping, guarded ------------------------------------------------
 *
 * The daemon keeps its cache mapped for the whole mount (fullsigs.h). Another
 * program truncating the file in place (`: > sigcache`) takes the pages
 * away, and the next read of one raised SIGBUS, which killed the daemon.
 * The mappings are registered here; a SIGBUS inside one maps zeros over
 * the whole of it (MAP_FIXED, so every later read sees zeros, not a mix)
 * and marks it damaged; the lookups then find nothing, as in an empty
 * cache: the files are signed again, and the next save writes a sound file.
 * A read that began before sees zeros midway, which decode as lengths of 0
 * and stay within the mapping. A SIGBUS elsewhere gets the disposition
 * there was before (the fault happens again once the handler returns; a
 * SIGBUS sent by kill is sent again, unless it was ignored).
 */
#define GUARDS 16

static struct guard {
	uintptr_t start; /* 0: free; set last, cleared first */
	size_t len;
	int hit;
} guards[GUARDS];
static struct sigaction sigbus_before;
static pthread_once_t sigbus_once = PTHREAD_ONCE_INIT;

static void on_sigbus(int sig, siginfo_t *si, void *ctx)
{
	uintptr_t a = (uintptr_t)si->si_addr;
	int e = errno;

	(void)sig;
	(void)ctx;
	/* si_code <= 0: sent (kill, raise), where si_addr is no address. */
	for (int i = 0; si->si_code > 0 && i < GUARDS; i++) {
		uintptr_t start =
			__atomic_load_n(&guards[i].start, __ATOMIC_ACQUIRE);
		size_t len = __atomic_load_n(&guards[i].len, __ATOMIC_RELAXED);

		if (!start || a < start || a - start >= len)
			continue;
		if (mmap((void *)start, len, PROT_READ,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
			 0) == MAP_FAILED)
			break;
		__atomic_store_n(&guards[i].hit, 1, __ATOMIC_RELEASE);
		errno = e;
		return;
	}
	/* A sent SIGBUS ignored before is ignored here, and the handler stays:
	 * putting SIG_IGN back would leave the mappings unguarded for good. */
	if (si->si_code <= 0 && sigbus_before.sa_handler == SIG_IGN &&
	    !(sigbus_before.sa_flags & SA_SIGINFO)) {
		errno = e;
		return;
	}
	sigaction(SIGBUS, &sigbus_before, NULL);
	/* A fault comes again on return; a sent signal does not: send it
	 * again, to be taken (SIGBUS is blocked in here) as before. */
	if (si->si_code <= 0)
		raise(SIGBUS);
	errno = e;
}

static void sigbus_install(void)
{
	struct sigaction sa = {.sa_sigaction = on_sigbus,
			       .sa_flags = SA_SIGINFO | SA_RESTART};

	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, &sigbus_before);
}

/* Register @p st's mapping: its guard, or -1 when every slot is taken (it
 * is then read unguarded, as before). */
static int guard_add(const struct im_state *st)
{
	pthread_once(&sigbus_once, sigbus_install);
	for (int i = 0; i < GUARDS; i++) {
		uintptr_t free_slot = 0;

		if (__atomic_load_n(&guards[i].start, __ATOMIC_RELAXED))
			continue;
		__atomic_store_n(&guards[i].len, st->map_len, __ATOMIC_RELAXED);
		__atomic_store_n(&guards[i].hit, 0, __ATOMIC_RELAXED);
		if (__atomic_compare_exchange_n(
			    &guards[i].start, &free_slot, (uintptr_t)st->map,
			    false, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
			return i;
	}
	return -1;
}

static void guard_drop(const struct im_state *st)
{
	if (st->guard >= 0)
		__atomic_store_n(&guards[st->guard].start, 0, __ATOMIC_RELEASE);
}

static bool damaged(const struct im_state *st)
{
	return st->guard >= 0 &&
	       __atomic_load_n(&guards[st->guard].hit, __ATOMIC_ACQUIRE);
}

bool im_state_damaged(const struct im_state *st)
{
	return st && damaged(st);
}

static void why_set(char *why, size_t why_len, const char *msg)
{
	if (why && why_len)
		snprintf(why, why_len, "%s", msg);
}

void im_state_free(struct im_state *st)
{
	if (!st)
		return;
	guard_drop(st);
	if (st->map && st->map_len)
		munmap((void *)st->map, st->map_len);
	free(st->slots32);
	free(st->slots64);
	free(st->ino32);
	free(st->ino64);
	free(st->ck);
	free(st);
}

/* Decode the entry at @p off; the structure was checked at load. */
static void decode(const struct im_state *st, size_t off,
		   struct im_state_entry *e)
{
	const uint8_t *d = st->map + off;
	uint32_t plen = get_u32(d);

	memset(&e->d, 0, sizeof(e->d));
	e->path = (const char *)d + 4;
	e->path_len = plen;
	d += 4 + plen;
	e->size = get_u64(d);
	e->mtime_ns = (int64_t)get_u64(d + 8);
	e->ino = get_u64(d + 16);
	e->ctime_fold = get_u32(d + 24);
	d += STAT_LEN;
	e->d.status = d[0];
	e->d.ncoords = d[1];
	e->d.exact_valid = d[2];
	e->d.err = (int32_t)(get_u32(d + 3) & 0xffffff);
	e->d.format = (uint8_t)(get_u32(d + 3) >> 24);
	e->d.valid = get_u32(d + 7);
	e->d.unique_terms = get_u32(d + 11);
	memcpy(e->d.exact, d + 15, 16);
	im_sketch_decode(d + 31, &e->d.sketch);
	e->d.size = e->size;
	e->d.mtime_ns = e->mtime_ns;
	e->d.numbers = get_u64(d + 31 + IM_SKETCH_RECORD);
	d += 31 + IM_SKETCH_RECORD + 8;
	for (unsigned k = 0; k < e->d.ncoords; k++) {
		if (e->d.valid & (1u << k)) {
			memcpy(e->d.sig[k].b, d, IM_SIG_LEN);
			d += IM_SIG_LEN;
		}
	}
}

static bool path_eq(const struct im_state *st, size_t off, const char *p,
		    size_t len)
{
	return get_u32(st->map + off) == len &&
	       !memcmp(st->map + off + 4, p, len);
}

/* The last component of the entry's path at @p off is @p name (@p len). */
static bool name_eq(const struct im_state *st, size_t off, const char *name,
		    size_t len)
{
	size_t plen = get_u32(st->map + off);
	const char *p = (const char *)st->map + off + 4;

	return plen >= len && !memcmp(p + plen - len, name, len) &&
	       (plen == len || p[plen - len - 1] == '/');
}

static int build_slots(struct im_state *st)
{
	size_t ns = st->n + st->n / 3 + 1, off = HEADER_LEN;

	if (st->map_len <= UINT32_MAX) {
		st->slots32 = calloc(ns, sizeof(*st->slots32));
		st->ino32 = calloc(ns, sizeof(*st->ino32));
	} else {
		st->slots64 = calloc(ns, sizeof(*st->slots64));
		st->ino64 = calloc(ns, sizeof(*st->ino64));
	}
	if ((!st->slots32 || !st->ino32) && (!st->slots64 || !st->ino64))
		return -ENOMEM;
	st->nslots = ns;
	for (size_t i = 0; i < st->n; i++, off += entry_len(st, off)) {
		const uint8_t *d = st->map + off;
		uint32_t plen = get_u32(d);
		size_t h = slot_home(st, XXH3_64bits(d + 4, plen));

		if (i % CK_EVERY == 0)
			st->ck[i / CK_EVERY] = off;
		while (slot_get(st, h)) {
			/* A duplicate path keeps its last entry. */
			if (path_eq(st, slot_get(st, h), (const char *)d + 4,
				    plen))
				break;
			h = slot_next(st, h);
		}
		if (st->slots32)
			st->slots32[h] = (uint32_t)off;
		else
			st->slots64[h] = off;
		uint64_t ino = get_u64(d + 4 + plen + 16);
		size_t nlen, o;
		const char *name = last_name((const char *)d + 4, plen, &nlen);

		for (h = slot_home(st, ino_hash(ino, name, nlen));
		     (o = ino_get(st, h)); h = slot_next(st, h))
			if (get_u64(st->map + o + 4 + get_u32(st->map + o) +
				    16) == ino &&
			    name_eq(st, o, name, nlen))
				break;
		if (o)
			continue; /* a hard link of the same name: kept one */
		if (st->ino32)
			st->ino32[h] = (uint32_t)off;
		else
			st->ino64[h] = off;
	}
	return 0;
}

/* Check the structure of every entry and record where each starts. */
static int index_entries(struct im_state *st, size_t len, char *why,
			 size_t why_len)
{
	const uint8_t *d = st->map;
	uint64_t count = get_u64(d + COUNT_AT);
	size_t off = HEADER_LEN;

	if (count > (len - HEADER_LEN) / ENTRY_FIXED || count >= UINT32_MAX) {
		why_set(why, why_len, "truncated");
		return -EINVAL;
	}
	st->ck = malloc((count / CK_EVERY + 1) * sizeof(*st->ck));
	if (!st->ck)
		return -ENOMEM;
	for (uint64_t i = 0; i < count; i++) {
		if (len - off < ENTRY_FIXED) {
			why_set(why, why_len, "truncated");
			return -EINVAL;
		}
		uint32_t plen = get_u32(d + off);
		if (plen == 0 || len - off - ENTRY_FIXED < plen) {
			why_set(why, why_len, "truncated");
			return -EINVAL;
		}
		if (memchr(d + off + 4, 0, plen)) {
			why_set(why, why_len, "corrupt path");
			return -EINVAL;
		}
		const uint8_t *f = d + off + 4 + plen + STAT_LEN;
		uint8_t status = f[0], ncoords = f[1];
		uint32_t valid = get_u32(f + 7);
		if (status >= IM_DOC_STATUS_COUNT || ncoords > IM_MAX_COORDS ||
		    (ncoords < 32 && (valid >> ncoords))) {
			why_set(why, why_len, "corrupt entry");
			return -EINVAL;
		}
		off += ENTRY_FIXED + plen;
		size_t sigs = (size_t)__builtin_popcount(valid) * IM_SIG_LEN;
		if (len - off < sigs) {
			why_set(why, why_len, "truncated");
			return -EINVAL;
		}
		off += sigs;
	}
	if (off != len) {
		why_set(why, why_len, "trailing bytes");
		return -EINVAL;
	}
	st->n = count;
	return build_slots(st);
}

int im_state_load(const char *path, uint64_t key, struct im_state **out,
		  char *why, size_t why_len)
{
	return im_state_load_files(path, key, 0, out, why, why_len);
}

int im_state_load_files(const char *path, uint64_t key, uint64_t files_key,
			struct im_state **out, char *why, size_t why_len)
{
	struct im_state *st = NULL;
	struct stat sb;
	int fd = -1, ret;

	*out = NULL;
	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->guard = -1;
	/* O_NONBLOCK: a fifo named by mistake must not hang the daemon. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0 || fstat(fd, &sb)) {
		ret = -errno;
		why_set(why, why_len, strerror(-ret));
		goto out;
	}
	ret = -EINVAL;
	if (!S_ISREG(sb.st_mode)) {
		why_set(why, why_len, "not a regular file");
		goto out;
	}
	if (sb.st_size < 8) {
		why_set(why, why_len, "not an imatchfs state file");
		goto out;
	}
	st->map_len = (size_t)sb.st_size;
	void *m = mmap(NULL, st->map_len, PROT_READ, MAP_PRIVATE, fd, 0);
	if (m == MAP_FAILED) {
		ret = -errno;
		st->map_len = 0;
		why_set(why, why_len, strerror(-ret));
		goto out;
	}
	st->map = m;
	/* Guarded from here: the checks read every page, for a while in a
	 * large cache, and a daemon loads it while it serves. */
	st->guard = guard_add(st);
	const uint8_t *b = st->map;
	size_t len = st->map_len;
	if (memcmp(b, state_magic, 8)) {
		why_set(why, why_len, "not an imatchfs state file");
		goto out;
	}
	if (len < HEADER_LEN + 8) {
		why_set(why, why_len, "truncated");
		goto out;
	}
	uint32_t version = get_u32(b + 8);
	/* An older imatchfs's cache is only out of date (signed afresh, as
	 * after an option change); a newer one's is not ours to judge. */
	if (version < IM_STATE_VERSION) {
		if (why && why_len)
			snprintf(why, why_len,
				 "made by an older imatchfs (version %u)",
				 version);
		ret = -ESTALE;
		goto out;
	}
	if (version != IM_STATE_VERSION) {
		if (why && why_len)
			snprintf(why, why_len, "unsupported version %u",
				 version);
		goto out;
	}
	size_t body = len - 8;
	if (XXH3_64bits(b, body) != get_u64(b + body)) {
		why_set(why, why_len, "bad checksum (truncated or corrupt)");
		goto out;
	}
	if (get_u32(b + 12) != IM_MAX_COORDS) {
		why_set(why, why_len, "made for another IM_MAX_COORDS");
		goto out;
	}
	if (get_u64(b + KEY_AT) != key) {
		why_set(why, why_len,
			"made with other parameters or another lexicon");
		ret = -ESTALE;
		if (!files_key || get_u64(b + FILES_KEY_AT) != files_key)
			goto out;
		st->partial = true;
	}
	ret = index_entries(st, body, why, why_len);
	if (ret == -ENOMEM)
		why_set(why, why_len, strerror(ENOMEM));
	if (ret)
		goto out;
	/* Cut short under the checks, which then read zeros: refused, as a
	 * file cut short before them. */
	if (damaged(st)) {
		why_set(why, why_len, "truncated while read");
		ret = -EINVAL;
		goto out;
	}
	/* The checks read every page: leave them to the page cache, out of
	 * the caller's resident set; entries are read again on demand. */
	madvise((void *)st->map, st->map_len, MADV_DONTNEED);
	*out = st;
	st = NULL;
out:
	if (fd >= 0)
		close(fd);
	im_state_free(st);
	return ret;
}

size_t im_state_count(const struct im_state *st)
{
	return st ? st->n : 0;
}

int im_state_find(const struct im_state *st, const char *path,
		  struct im_state_entry *out)
{
	if (!st || !st->n || damaged(st))
		return -ENOENT;
	size_t len = strlen(path), off;
	for (size_t h = slot_home(st, XXH3_64bits(path, len));
	     (off = slot_get(st, h)); h = slot_next(st, h)) {
		if (path_eq(st, off, path, len)) {
			decode(st, off, out);
			return 0;
		}
	}
	return -ENOENT;
}

int im_state_find_moved(const struct im_state *st, uint64_t ino,
			const char *name, struct im_state_entry *out)
{
	if (!st || !st->n || damaged(st))
		return -ENOENT;
	size_t len = strlen(name), off;
	for (size_t h = slot_home(st, ino_hash(ino, name, len));
	     (off = ino_get(st, h)); h = slot_next(st, h)) {
		const uint8_t *d = st->map + off;
		if (get_u64(d + 4 + get_u32(d) + 16) == ino &&
		    name_eq(st, off, name, len)) {
			decode(st, off, out);
			return 0;
		}
	}
	return -ENOENT;
}

bool im_state_partial(const struct im_state *st)
{
	return st && st->partial;
}

void im_state_keys(const struct im_state *st, uint64_t *key,
		   uint64_t *files_key)
{
	if (key)
		*key = get_u64(st->map + KEY_AT);
	if (files_key)
		*files_key = get_u64(st->map + FILES_KEY_AT);
}

int im_state_each_path(const struct im_state *st,
		       int (*fn)(const char *path, size_t len, size_t i,
				 void *arg),
		       void *arg)
{
	size_t off = HEADER_LEN;
	int ret = 0;

	for (size_t i = 0; st && i < st->n && !ret && !damaged(st);
	     i++, off += entry_len(st, off))
		ret = fn((const char *)st->map + off + 4,
			 get_u32(st->map + off), i, arg);
	return ret;
}

int im_state_at(const struct im_state *st, size_t i, struct im_state_entry *out)
{
	if (!st || i >= st->n || damaged(st))
		return -ENOENT;
	size_t off = st->ck[i / CK_EVERY];
	for (size_t j = i / CK_EVERY * CK_EVERY; j < i; j++)
		off += entry_len(st, off);
	decode(st, off, out);
	return 0;
}

/* ---- Writing ------------------------------------------------------------- */

struct im_state_writer {
	struct buf b;
	uint64_t count;
};

int im_state_writer_new(uint64_t key, struct im_state_writer **out)
{
	struct im_state_writer *w = calloc(1, sizeof(*w));

	*out = NULL;
	if (!w || buf_grow(&w->b, HEADER_LEN)) {
		free(w);
		return -ENOMEM;
	}
	put_bytes(&w->b, state_magic, 8);
	put_u32(&w->b, IM_STATE_VERSION);
	put_u32(&w->b, IM_MAX_COORDS);
	put_u64(&w->b, key);
	put_u64(&w->b, 0); /* files key: im_state_writer_set_files_key() */
	put_u64(&w->b, 0); /* count, patched at commit */
	*out = w;
	return 0;
}

void im_state_writer_set_files_key(struct im_state_writer *w,
				   uint64_t files_key)
{
	for (int i = 0; i < 8; i++)
		w->b.p[FILES_KEY_AT + i] = (uint8_t)(files_key >> (8 * i));
}

int im_state_writer_add(struct im_state_writer *w, const char *path,
			uint64_t size, int64_t mtime_ns, uint64_t ino,
			uint32_t ctime_fold, const struct im_doc_sigs *d)
{
	size_t plen = strlen(path);
	unsigned nc = d->ncoords > IM_MAX_COORDS ? IM_MAX_COORDS : d->ncoords;
	uint32_t valid = nc < 32 ? d->valid & ((1u << nc) - 1) : d->valid;

	if (plen == 0 || plen > UINT32_MAX)
		return -EINVAL;
	if (buf_grow(&w->b, ENTRY_FIXED + plen + (size_t)nc * IM_SIG_LEN))
		return -ENOMEM;
	put_u32(&w->b, (uint32_t)plen);
	put_bytes(&w->b, path, plen);
	put_u64(&w->b, size);
	put_u64(&w->b, (uint64_t)mtime_ns);
	put_u64(&w->b, ino);
	put_u32(&w->b, ctime_fold);
	w->b.p[w->b.len++] = d->status;
	w->b.p[w->b.len++] = (uint8_t)nc;
	w->b.p[w->b.len++] = d->exact_valid;
	put_u32(&w->b,
		((uint32_t)d->err & 0xffffff) | (uint32_t)d->format << 24);
	put_u32(&w->b, valid);
	put_u32(&w->b, d->unique_terms);
	put_bytes(&w->b, d->exact, 16);
	im_sketch_encode(&d->sketch, w->b.p + w->b.len);
	w->b.len += IM_SKETCH_RECORD;
	put_u64(&w->b, d->numbers);
	for (unsigned k = 0; k < nc; k++)
		if (valid & (1u << k))
			put_bytes(&w->b, d->sig[k].b, IM_SIG_LEN);
	w->count++;
	return 0;
}

int im_state_writer_commit(struct im_state_writer *w, const char *path)
{
	char *tmp = NULL, *dcopy = NULL;
	int fd = -1, dfd = -1, ret;
	size_t len = strlen(path) + 32;

	if (buf_grow(&w->b, 8))
		return -ENOMEM;
	/* Patch the count in place, then checksum everything. */
	for (int i = 0; i < 8; i++)
		w->b.p[COUNT_AT + i] = (uint8_t)(w->count >> (8 * i));
	size_t body = w->b.len;
	put_u64(&w->b, XXH3_64bits(w->b.p, body));

	ret = -ENOMEM;
	tmp = malloc(len);
	dcopy = strdup(path);
	if (!tmp || !dcopy)
		goto out;
	snprintf(tmp, len, "%s.tmp.%ld", path, (long)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
		  0600);
	if (fd < 0) {
		ret = -errno;
		goto out;
	}
	ret = im_write_all(fd, w->b.p, w->b.len);
	if (!ret && fsync(fd))
		ret = -errno;
	if (close(fd) && !ret)
		ret = -errno;
	fd = -1;
	if (!ret && rename(tmp, path))
		ret = -errno;
	if (ret) {
		unlink(tmp);
		goto out;
	}
	/* The rename is durable only once the directory is. It has happened,
	 * though: a filesystem that cannot sync directories (EINVAL, EROFS)
	 * must not make every later commit look failed. */
	dfd = open(dirname(dcopy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fsync(dfd)) {
		if (errno != EINVAL && errno != EROFS)
			ret = -errno;
	}
out:
	w->b.len = body; /* commit may be retried */
	if (fd >= 0)
		close(fd);
	if (dfd >= 0)
		close(dfd);
	free(tmp);
	free(dcopy);
	return ret;
}

void im_state_writer_free(struct im_state_writer *w)
{
	if (!w)
		return;
	free(w->b.p);
	free(w);
}
