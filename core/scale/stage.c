/**
 * @file stage.c
 * The stage file container (layout in stage.h). The writer checksums as it
 * streams, so a file of any size is written in one pass with a fixed
 * buffer; the reader maps the file and checks everything before it hands
 * out the first record.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "fdio.h"
#include "stage.h"

static const char stage_magic[8] = "IMSTAGE";
#define HEADER_LEN  32
#define TRAILER_LEN (8 + 8 * IM_STAGE_META + 8)
#define WBUF	    65536
/* A reader gives back the pages it has passed in steps of this many bytes
 * (a multiple of any page size): what a pass keeps resident is about one
 * window per file, whatever the file's size. */
#define WINDOW (1u << 20)

static void put_le(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int n)
{
	uint64_t v = 0;

	for (int i = n - 1; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

const char *im_stage_kind_name(uint32_t kind)
{
	switch (kind) {
	case IM_STAGE_MANIFEST: return "manifest";
	case IM_STAGE_DF: return "df";
	case IM_STAGE_RECORDS: return "records";
	case IM_STAGE_KEYS: return "keys";
	case IM_STAGE_LINKS: return "links";
	case IM_STAGE_CLUSTERS: return "clusters";
	case IM_STAGE_EXPORT: return "export";
	}
	return NULL;
}

/* ---- Writing ------------------------------------------------------------- */

struct im_stage_writer {
	int fd;
	char *path, *tmp;
	XXH3_state_t *xx;
	uint8_t *buf;
	size_t len;
	uint64_t count;
	uint64_t meta[IM_STAGE_META];
	int err; /* first write error */
	bool committed;
};

static int wflush(struct im_stage_writer *w)
{
	if (!w->err && w->len) {
		XXH3_64bits_update(w->xx, w->buf, w->len);
		w->err = im_write_all(w->fd, w->buf, w->len);
	}
	w->len = 0;
	return w->err;
}

static int wput(struct im_stage_writer *w, const void *src, size_t n)
{
	const uint8_t *p = src;

	while (n && !w->err) {
		size_t room = WBUF - w->len, take = n < room ? n : room;

		memcpy(w->buf + w->len, p, take);
		w->len += take;
		p += take;
		n -= take;
		if (w->len == WBUF)
			wflush(w);
	}
	return w->err;
}

int im_stage_writer_new(const char *path, const struct im_stage_header *h,
			struct im_stage_writer **out)
{
	struct im_stage_writer *w = NULL;
	uint8_t hdr[HEADER_LEN];
	size_t tlen = strlen(path) + 32;
	int ret = -EINVAL;

	*out = NULL;
	if (!im_stage_kind_name(h->kind) || !h->nparts ||
	    h->nparts > IM_STAGE_MAX_PARTS || h->part >= h->nparts)
		goto out;
	ret = -ENOMEM;
	w = calloc(1, sizeof(*w));
	if (!w)
		goto out;
	w->fd = -1;
	w->path = strdup(path);
	w->tmp = malloc(tlen);
	w->buf = malloc(WBUF);
	w->xx = XXH3_createState();
	if (!w->path || !w->tmp || !w->buf || !w->xx)
		goto out;
	XXH3_64bits_reset(w->xx);
	snprintf(w->tmp, tlen, "%s.tmp.%ld", path, (long)getpid());
	w->fd = open(w->tmp,
		     O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
		     0644);
	if (w->fd < 0) {
		ret = -errno;
		goto out;
	}
	memcpy(hdr, stage_magic, 8);
	put_le(hdr + 8, IM_STAGE_VERSION, 4);
	put_le(hdr + 12, h->kind, 4);
	put_le(hdr + 16, h->part, 4);
	put_le(hdr + 20, h->nparts, 4);
	put_le(hdr + 24, h->key, 8);
	ret = wput(w, hdr, sizeof(hdr));
out:
	if (ret) {
		im_stage_writer_free(w);
		return ret;
	}
	*out = w;
	return 0;
}

int im_stage_writer_add(struct im_stage_writer *w, const void *payload,
			size_t len)
{
	uint8_t l[4];

	if (len > UINT32_MAX)
		return -EFBIG;
	put_le(l, len, 4);
	if (wput(w, l, 4) || wput(w, payload, len))
		return w->err;
	w->count++;
	return 0;
}

void im_stage_writer_set_meta(struct im_stage_writer *w, unsigned i, uint64_t v)
{
	if (i < IM_STAGE_META)
		w->meta[i] = v;
}

int im_stage_writer_commit(struct im_stage_writer *w)
{
	uint8_t tr[TRAILER_LEN - 8], sum[8];
	int ret;

	put_le(tr, w->count, 8);
	for (unsigned i = 0; i < IM_STAGE_META; i++)
		put_le(tr + 8 + 8 * i, w->meta[i], 8);
	if (wput(w, tr, sizeof(tr)) || wflush(w))
		return w->err;
	put_le(sum, XXH3_64bits_digest(w->xx), 8);
	ret = im_write_all(w->fd, sum, 8);
	if (close(w->fd) && !ret)
		ret = -errno;
	w->fd = -1;
	if (!ret && rename(w->tmp, w->path))
		ret = -errno;
	if (ret) {
		w->err = ret;
		return ret;
	}
	w->committed = true;
	return 0;
}

void im_stage_writer_free(struct im_stage_writer *w)
{
	if (!w)
		return;
	if (w->fd >= 0)
		close(w->fd);
	if (!w->committed && w->tmp)
		unlink(w->tmp);
	XXH3_freeState(w->xx);
	free(w->buf);
	free(w->tmp);
	free(w->path);
	free(w);
}

/* ---- Reading ------------------------------------------------------------- */

struct im_stage_reader {
	const uint8_t *map;
	size_t size;
	struct im_stage_header h;
	uint64_t count;
	uint64_t meta[IM_STAGE_META];
	const uint8_t *pos, *end; /* records */
	size_t kept;		  /* offset of the first page not given back */
	char *path;		  /* for im_stage_read() */
	int fd;			  /* im_stage_read()'s, or -1 */
	dev_t dev;		  /* the file checksummed at open */
	ino_t ino;
};

/* Give back the pages of [kept, @p off) in whole windows, so that reading
 * a file from start to end keeps about one window of it resident. A page
 * given back faults in again from the page cache if it is read again, so
 * borrowed payloads stay valid. */
static void drop_behind(struct im_stage_reader *r, size_t off)
{
	size_t to = off < r->size ? off / WINDOW * WINDOW : r->size;

	if (to <= r->kept)
		return;
	/* Advice only: where it fails the pages stay, nothing else. */
	(void)madvise((void *)(r->map + r->kept), to - r->kept, MADV_DONTNEED);
	r->kept = to;
}

__attribute__((format(printf, 4, 5))) static int
fail(char *why, size_t why_len, int err, const char *fmt, ...)
{
	va_list ap;

	if (why && why_len) {
		va_start(ap, fmt);
		vsnprintf(why, why_len, fmt, ap);
		va_end(ap);
	}
	return err;
}

/*
 * Check the checksum and the records' structure in one pass, window by
 * window, giving each window back once both are done with it: a file
 * opened to be streamed (or only its trailer read) is not made resident
 * by its check, nor read twice. A damaged file is reported as such even
 * where the damage also breaks the structure: the checksum speaks first.
 */
static int check_file(struct im_stage_reader *r, char *why, size_t why_len)
{
	size_t n = r->size - 8;
	XXH3_state_t *xx = XXH3_createState();
	const uint8_t *p = r->pos;
	const char *broken = NULL;
	uint64_t sum, records = 0;

	if (!xx)
		return fail(why, why_len, -ENOMEM, "%s", strerror(ENOMEM));
	XXH3_64bits_reset(xx);
	for (size_t off = 0; off < n; off += WINDOW) {
		const uint8_t *hashed =
			r->map + (n - off < WINDOW ? n : off + WINDOW);

		XXH3_64bits_update(xx, r->map + off,
				   n - off < WINDOW ? n - off : WINDOW);
		/* The records that start in what is hashed so far. */
		while (!broken && p < r->end && p < hashed) {
			uint64_t len;

			if ((size_t)(r->end - p) < 4) {
				broken = "corrupt: a record runs past the end";
				break;
			}
			len = get_le(p, 4);
			p += 4;
			if (len > (uint64_t)(r->end - p)) {
				broken = "corrupt: a record runs past the end";
				break;
			}
			p += len;
			records++;
		}
		drop_behind(r, off + WINDOW < (size_t)(p - r->map)
				       ? off + WINDOW
				       : (size_t)(p - r->map));
	}
	sum = XXH3_64bits_digest(xx);
	XXH3_freeState(xx);
	if (sum != get_le(r->map + n, 8))
		return fail(why, why_len, -EINVAL,
			    "bad checksum (truncated or damaged)");
	if (broken)
		return fail(why, why_len, -EINVAL, "%s", broken);
	if (records != r->count)
		return fail(why, why_len, -EINVAL,
			    "corrupt: %llu records, the trailer says %llu",
			    (unsigned long long)records,
			    (unsigned long long)r->count);
	return 0;
}

int im_stage_open(const char *path, struct im_stage_reader **out, char *why,
		  size_t why_len)
{
	struct im_stage_reader *r = NULL;
	const uint8_t *m, *tr;
	void *map = MAP_FAILED;
	struct stat st;
	int fd, ret;
	uint32_t version;

	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		ret = -errno;
		return fail(why, why_len, ret, "%s", strerror(-ret));
	}
	if (fstat(fd, &st)) {
		ret = -errno;
		close(fd);
		return fail(why, why_len, ret, "%s", strerror(-ret));
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return fail(why, why_len, -EINVAL, "not a regular file");
	}
	if ((uint64_t)st.st_size < 8) {
		close(fd);
		return fail(why, why_len, -EINVAL,
			    st.st_size ? "truncated" : "truncated (empty)");
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	ret = -errno;
	close(fd);
	if (map == MAP_FAILED)
		return fail(why, why_len, ret, "%s", strerror(-ret));
	m = map;
	ret = -EINVAL;
	if (memcmp(m, stage_magic, 8)) {
		fail(why, why_len, ret, "not an imatch stage file");
		goto out;
	}
	if ((uint64_t)st.st_size < HEADER_LEN + TRAILER_LEN) {
		fail(why, why_len, ret, "truncated");
		goto out;
	}
	version = (uint32_t)get_le(m + 8, 4);
	/* Stage files are made again, never migrated: say which way it is,
	 * so that the user knows to remake an older one. */
	if (version != IM_STAGE_VERSION) {
		fail(why, why_len, ret,
		     "unsupported version %u (made by %s imatch: this one "
		     "reads version %u%s)",
		     version,
		     version < IM_STAGE_VERSION ? "an older" : "a newer",
		     IM_STAGE_VERSION,
		     version < IM_STAGE_VERSION ? "; make it again" : "");
		goto out;
	}
	tr = m + st.st_size - TRAILER_LEN;
	ret = -ENOMEM;
	r = calloc(1, sizeof(*r));
	if (!r)
		goto out;
	r->map = m;
	r->size = (size_t)st.st_size;
	r->fd = -1;
	r->dev = st.st_dev;
	r->ino = st.st_ino;
	r->path = strdup(path);
	if (!r->path)
		goto out;
	r->h.kind = (uint32_t)get_le(m + 12, 4);
	r->h.part = (uint32_t)get_le(m + 16, 4);
	r->h.nparts = (uint32_t)get_le(m + 20, 4);
	r->h.key = get_le(m + 24, 8);
	r->count = get_le(tr, 8);
	for (unsigned i = 0; i < IM_STAGE_META; i++)
		r->meta[i] = get_le(tr + 8 + 8 * i, 8);
	r->pos = m + HEADER_LEN;
	r->end = tr;
	ret = check_file(r, why, why_len);
	/* The check gave the pages back; the reader starts again. */
	r->kept = 0;
	if (ret)
		goto out;
	ret = -EINVAL;
	if (!im_stage_kind_name(r->h.kind)) {
		fail(why, why_len, ret, "unknown kind %u", r->h.kind);
		goto out;
	}
	if (!r->h.nparts || r->h.nparts > IM_STAGE_MAX_PARTS ||
	    r->h.part >= r->h.nparts) {
		fail(why, why_len, ret, "corrupt: partition %u of %u",
		     r->h.part, r->h.nparts);
		goto out;
	}
	ret = 0;
out:
	if (ret) {
		if (r)
			free(r->path);
		free(r);
		munmap(map, (size_t)st.st_size);
		return ret;
	}
	*out = r;
	return 0;
}

void im_stage_reader_free(struct im_stage_reader *r)
{
	if (!r)
		return;
	munmap((void *)r->map, r->size);
	if (r->fd >= 0)
		close(r->fd);
	free(r->path);
	free(r);
}

const char *im_stage_path(const struct im_stage_reader *r)
{
	return r->path;
}

const struct im_stage_header *im_stage_header(const struct im_stage_reader *r)
{
	return &r->h;
}

uint64_t im_stage_count(const struct im_stage_reader *r)
{
	return r->count;
}

uint64_t im_stage_meta(const struct im_stage_reader *r, unsigned i)
{
	return i < IM_STAGE_META ? r->meta[i] : 0;
}

bool im_stage_next(struct im_stage_reader *r, const uint8_t **payload,
		   size_t *len)
{
	size_t l;

	/* The structure was checked on open. */
	if (r->pos >= r->end)
		return false;
	l = (size_t)get_le(r->pos, 4);
	*payload = r->pos + 4;
	*len = l;
	drop_behind(r, (size_t)(r->pos - r->map));
	r->pos += 4 + l;
	return true;
}

void im_stage_rewind(struct im_stage_reader *r)
{
	r->pos = r->map + HEADER_LEN;
	r->kept = 0;
}

void im_stage_drop(struct im_stage_reader *r)
{
	/* Advice only: where it fails the pages stay, nothing else. */
	(void)madvise((void *)r->map, r->size, MADV_DONTNEED);
	r->kept = 0;
}

int im_stage_read(struct im_stage_reader *r, const uint8_t *payload, size_t len,
		  void *buf)
{
	size_t off = (size_t)(payload - r->map);
	ssize_t n;

	if (payload < r->map + HEADER_LEN || payload > r->end ||
	    len > (size_t)(r->end - payload))
		return -EINVAL;
	if (r->fd < 0) {
		struct stat st;
		int fd = open(r->path, O_RDONLY | O_CLOEXEC);

		if (fd < 0)
			return -errno;
		/* Only the file that was checksummed: a retried task may
		 * have renamed another over the path since. */
		if (fstat(fd, &st) || (uint64_t)st.st_size != r->size ||
		    st.st_dev != r->dev || st.st_ino != r->ino) {
			close(fd);
			return -ESTALE;
		}
		r->fd = fd;
	}
	while (len) {
		n = pread(r->fd, buf, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		buf = (uint8_t *)buf + n;
		off += (size_t)n;
		len -= (size_t)n;
	}
	return 0;
}

/* ---- Partition buffers ---------------------------------------------------------- */

int im_stage_parts_init(struct im_stage_parts *pp, uint32_t nparts, size_t item)
{
	pp->nparts = nparts;
	pp->item = item;
	pp->p = calloc(nparts ? nparts : 1, sizeof(*pp->p));
	return pp->p ? 0 : -ENOMEM;
}

int im_stage_parts_push(struct im_stage_parts *pp, uint32_t part,
			const void *item)
{
	struct im_stage_part *p = &pp->p[part];

	if (p->n == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 64;
		void *v = realloc(p->v, cap * pp->item);

		if (!v)
			return -ENOMEM;
		p->v = v;
		p->cap = cap;
	}
	memcpy((char *)p->v + p->n++ * pp->item, item, pp->item);
	return 0;
}

void im_stage_parts_release(struct im_stage_parts *pp)
{
	for (uint32_t i = 0; pp->p && i < pp->nparts; i++)
		free(pp->p[i].v);
	free(pp->p);
	pp->p = NULL;
}

/* ---- Merging sorted runs ----------------------------------------------------- */

struct merge_head {
	const uint8_t *p;
	size_t len, run;
};

struct im_stage_merge {
	struct im_stage_reader *const *runs;
	im_stage_cmp_fn cmp;
	struct merge_head *heap;
	size_t n;
};

static bool head_less(const struct im_stage_merge *m,
		      const struct merge_head *a, const struct merge_head *b)
{
	int r = m->cmp(a->p, a->len, b->p, b->len);

	return r < 0 || (r == 0 && a->run < b->run);
}

static void heap_down(struct im_stage_merge *m, size_t i)
{
	struct merge_head *h = m->heap;

	for (;;) {
		size_t l = 2 * i + 1, best = i;

		if (l < m->n && head_less(m, &h[l], &h[best]))
			best = l;
		if (l + 1 < m->n && head_less(m, &h[l + 1], &h[best]))
			best = l + 1;
		if (best == i)
			return;
		struct merge_head t = h[i];
		h[i] = h[best];
		h[best] = t;
		i = best;
	}
}

int im_stage_merge_new(struct im_stage_reader *const *runs, size_t n,
		       im_stage_cmp_fn cmp, struct im_stage_merge **out)
{
	struct im_stage_merge *m = calloc(1, sizeof(*m));

	*out = NULL;
	if (!m)
		return -ENOMEM;
	m->heap = calloc(n ? n : 1, sizeof(*m->heap));
	if (!m->heap) {
		free(m);
		return -ENOMEM;
	}
	m->runs = runs;
	m->cmp = cmp;
	for (size_t i = 0; i < n; i++) {
		struct merge_head *h = &m->heap[m->n];

		h->run = i;
		if (im_stage_next(runs[i], &h->p, &h->len))
			m->n++;
	}
	for (size_t i = m->n; i-- > 0;)
		heap_down(m, i);
	*out = m;
	return 0;
}

int im_stage_merge_next(struct im_stage_merge *m, const uint8_t **payload,
			size_t *len, size_t *run)
{
	struct merge_head top, *h = m->heap;

	if (!m->n)
		return 0;
	top = h[0];
	if (run)
		*run = top.run;
	if (!im_stage_next(m->runs[top.run], &h[0].p, &h[0].len))
		h[0] = h[--m->n];
	else if (m->cmp(top.p, top.len, h[0].p, h[0].len) > 0)
		return -EINVAL; /* that run is not sorted */
	heap_down(m, 0);
	*payload = top.p;
	*len = top.len;
	return 1;
}

void im_stage_merge_free(struct im_stage_merge *m)
{
	if (!m)
		return;
	free(m->heap);
	free(m);
}

/* ---- Payload encoding ------------------------------------------------------ */

void im_stage_buf_put(struct im_stage_buf *b, const void *src, size_t n)
{
	if (b->oom)
		return;
	if (b->cap - b->len < n) {
		size_t cap = b->cap ? b->cap : 256;
		uint8_t *p;

		while (cap - b->len < n)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	if (n)
		memcpy(b->p + b->len, src, n);
	b->len += n;
}

void im_stage_buf_u32(struct im_stage_buf *b, uint32_t v)
{
	uint8_t t[4];

	put_le(t, v, 4);
	im_stage_buf_put(b, t, 4);
}

void im_stage_buf_u64(struct im_stage_buf *b, uint64_t v)
{
	uint8_t t[8];

	put_le(t, v, 8);
	im_stage_buf_put(b, t, 8);
}

void im_stage_buf_release(struct im_stage_buf *b)
{
	free(b->p);
	*b = (struct im_stage_buf){0};
}

const uint8_t *im_stage_get(struct im_stage_cur *c, size_t n)
{
	const uint8_t *p = c->p;

	if (c->bad || (size_t)(c->end - c->p) < n) {
		c->bad = true;
		return NULL;
	}
	c->p += n;
	return p;
}

uint32_t im_stage_get_u32(struct im_stage_cur *c)
{
	const uint8_t *p = im_stage_get(c, 4);

	return p ? (uint32_t)get_le(p, 4) : 0;
}

uint64_t im_stage_get_u64(struct im_stage_cur *c)
{
	const uint8_t *p = im_stage_get(c, 8);

	return p ? get_le(p, 8) : 0;
}
