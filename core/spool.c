/**
 * @file spool.c
 * Records in memory, spilled to an unnamed temporary file (spool.h).
 *
 * Layout, in memory and in the file alike: each record is a u32 length, four
 * bytes of padding, the bytes, and padding to a multiple of 8, so that every
 * record starts 8-byte aligned wherever it is read from. The file holds the
 * older records, memory the newer: reading takes the file first.
 *
 * Memory is a list of chunks: the first of CHUNK_FIRST bytes in pages
 * that come as they are written, the next ones of 2 MiB (or one record, if
 * larger), aligned and offered to transparent huge pages (mem.h). A first
 * scan fills them as fast as it reads, and one fault per 4 KiB page cost it
 * more than copying the bytes; but a scan of one file spools a few KiB,
 * where zeroing a whole huge page would cost more than the faults of the
 * pages used. A huge page costs as much as 25 to 80 faults (30 to 100 us
 * against 1.1 to 1.3 us, in a VM), so the small pages stop at 256 KiB: a
 * first chunk of 1 MiB cost 3,452 one-word files 190 faults more and 2.4%
 * more CPU time. A spill writes the chunks out and keeps the first for
 * reuse.
 *
 * In a heap on huge pages (mem.h, im_mem_use_heap()) every chunk is one of
 * CHUNK_FIRST taken from it while it has room, packed with the run's other
 * blocks: the kernel docs' 3.7 MB of ids took 64 faults and two huge pages
 * of their own, the licences' 0.5 MB 64 faults and one.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fdio.h"
#include "mem.h"
#include "spool.h"

#define HDR	    8
#define READ_CHUNK  ((size_t)1 << 20)
#define CHUNK	    IM_HUGE_PAGE
#define CHUNK_FIRST ((size_t)256 << 10)

struct chunk {
	struct chunk *next;
	size_t len, cap;
	char *p;   /* malloc(cap) if heap, else im_block_alloc(cap) */
	bool heap; /* not zeroed: records are written before they are read */
};

struct span {
	char *p; /* 8-byte aligned (malloc) */
	size_t len, cap;
};

struct im_spool {
	char *dir;
	size_t budget;
	struct chunk *head, *tail; /* records in memory, oldest first */
	size_t mem_len;		   /* bytes of records in memory */
	int fd;			   /* -1 until the first spill */
	uint64_t spilled, records;
	const char *last; /* the last record appended, in memory */
	size_t last_len;
	/* Reading */
	int reading;
	uint64_t file_left; /* bytes of the file not yet read */
	struct span rbuf;
	size_t rpos;	      /* next record in rbuf */
	struct chunk *rchunk; /* once the file is done: memory, from here */
	size_t rchunk_pos;
};

static void chunk_free(struct chunk *c)
{
	if (c->heap)
		free(c->p);
	else
		im_block_free(c->p, c->cap);
	free(c);
}

static size_t pad8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

static int span_reserve(struct span *s, size_t need)
{
	size_t cap = s->cap ? s->cap : 4096;
	char *p;

	if (need <= s->cap)
		return 0;
	while (cap < need) {
		if (cap > SIZE_MAX / 2)
			return -ENOMEM;
		cap *= 2;
	}
	p = realloc(s->p, cap);
	if (!p)
		return -ENOMEM;
	s->p = p;
	s->cap = cap;
	return 0;
}

int im_spool_new(const char *dir, size_t budget, struct im_spool **out)
{
	struct im_spool *sp = calloc(1, sizeof(*sp));

	*out = NULL;
	if (!sp)
		return -ENOMEM;
	sp->dir = strdup(dir ? dir : "/tmp");
	if (!sp->dir) {
		free(sp);
		return -ENOMEM;
	}
	sp->budget = budget;
	sp->fd = -1;
	*out = sp;
	return 0;
}

void im_spool_free(struct im_spool *sp)
{
	if (!sp)
		return;
	if (sp->fd >= 0)
		close(sp->fd);
	while (sp->head) {
		struct chunk *c = sp->head;

		sp->head = c->next;
		chunk_free(c);
	}
	free(sp->rbuf.p);
	free(sp->dir);
	free(sp);
}

static int open_file(struct im_spool *sp)
{
	size_t dl = strlen(sp->dir);
	char *tmpl;
	int fd;

	fd = open(sp->dir, O_RDWR | O_TMPFILE | O_CLOEXEC, 0600);
	if (fd >= 0) {
		sp->fd = fd;
		return 0;
	}
	/* File systems without O_TMPFILE: a named file, unlinked at once. */
	tmpl = malloc(dl + sizeof("/imatch-spool.XXXXXX"));
	if (!tmpl)
		return -ENOMEM;
	memcpy(tmpl, sp->dir, dl);
	memcpy(tmpl + dl, "/imatch-spool.XXXXXX",
	       sizeof("/imatch-spool.XXXXXX"));
	fd = mkostemp(tmpl, O_CLOEXEC);
	if (fd < 0) {
		int err = errno;

		free(tmpl);
		return -err;
	}
	unlink(tmpl);
	free(tmpl);
	sp->fd = fd;
	return 0;
}

/* Move what is in memory to the end of the file; keep one chunk. */
static int spill(struct im_spool *sp)
{
	uint64_t done = 0;
	int ret = 0;

	if (!sp->mem_len)
		return 0;
	if (sp->fd < 0) {
		ret = open_file(sp);
		if (ret)
			return ret;
	}
	for (struct chunk *c = sp->head; c && !ret; c = c->next) {
		ret = im_write_all(sp->fd, c->p, c->len);
		done += c->len;
	}
	if (ret) {
		/* The file may hold part of it: cut it back. */
		if (ftruncate(sp->fd, (off_t)sp->spilled) == 0)
			lseek(sp->fd, (off_t)sp->spilled, SEEK_SET);
		return ret;
	}
	sp->spilled += done;
	sp->mem_len = 0;
	while (sp->head->next) {
		struct chunk *c = sp->head->next;

		sp->head->next = c->next;
		chunk_free(c);
	}
	sp->head->len = 0;
	sp->tail = sp->head;
	return 0;
}

/* A chunk with room for @p need more bytes at the tail. */
static int chunk_room(struct im_spool *sp, size_t need)
{
	struct chunk *c;
	size_t cap = CHUNK_FIRST;

	if (sp->tail && sp->tail->cap - sp->tail->len >= need)
		return 0;
	while (cap < need) {
		if (cap > SIZE_MAX / 2)
			return -ENOMEM;
		cap *= 2;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->p = im_heap_take(cap, 16);
	c->heap = c->p != NULL;
	if (!c->heap) {
		if (sp->tail && cap < CHUNK)
			cap = CHUNK;
		c->p = im_block_alloc(cap);
	}
	if (!c->p) {
		free(c);
		return -ENOMEM;
	}
	c->cap = cap;
	if (sp->tail)
		sp->tail->next = c;
	else
		sp->head = c;
	sp->tail = c;
	return 0;
}

int im_spool_append(struct im_spool *sp, const struct iovec *iov, int n)
{
	size_t len = 0, total;
	uint32_t l32;
	char *p;
	int ret;

	if (sp->reading)
		return -EINVAL;
	for (int i = 0; i < n; i++) {
		if (iov[i].iov_len >= UINT32_MAX - len)
			return -EFBIG;
		len += iov[i].iov_len;
	}
	if (len >= UINT32_MAX - HDR)
		return -EFBIG;
	total = HDR + pad8(len);
	if (sp->budget && sp->mem_len && sp->mem_len + total > sp->budget) {
		ret = spill(sp);
		if (ret)
			return ret;
	}
	ret = chunk_room(sp, total);
	if (ret)
		return ret;
	p = sp->tail->p + sp->tail->len;
	l32 = (uint32_t)len;
	memcpy(p, &l32, 4);
	memset(p + 4, 0, 4);
	p += HDR;
	for (int i = 0; i < n; i++) {
		if (iov[i].iov_len)
			memcpy(p, iov[i].iov_base, iov[i].iov_len);
		p += iov[i].iov_len;
	}
	memset(p, 0, pad8(len) - len);
	sp->last = p - len;
	sp->last_len = len;
	sp->tail->len += total;
	sp->mem_len += total;
	sp->records++;
	return 0;
}

const void *im_spool_last(const struct im_spool *sp, size_t *len)
{
	*len = sp->last_len;
	return sp->reading ? NULL : sp->last;
}

int im_spool_rewind(struct im_spool *sp)
{
	sp->reading = 1;
	sp->file_left = sp->spilled;
	sp->rpos = sp->rbuf.len = 0;
	sp->rchunk = sp->head;
	sp->rchunk_pos = 0;
	if (sp->fd >= 0 && lseek(sp->fd, 0, SEEK_SET) < 0)
		return -errno;
	return 0;
}

/* Make sure rbuf holds @p need bytes from rpos on. */
static int fill(struct im_spool *sp, size_t need)
{
	struct span *b = &sp->rbuf;
	size_t have = b->len - sp->rpos;
	int ret;

	if (have >= need)
		return 0;
	if ((uint64_t)(need - have) > sp->file_left)
		return -EIO;
	/* Keep the unread tail at offset 0, so records stay aligned. */
	if (have)
		memmove(b->p, b->p + sp->rpos, have);
	b->len = have;
	sp->rpos = 0;
	ret = span_reserve(b, need > READ_CHUNK ? need : READ_CHUNK);
	if (ret)
		return ret;
	while (b->len < need) {
		size_t want = b->cap - b->len;
		ssize_t k;

		if ((uint64_t)want > sp->file_left)
			want = (size_t)sp->file_left;
		k = read(sp->fd, b->p + b->len, want);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (k == 0)
			return -EIO;
		b->len += (size_t)k;
		sp->file_left -= (uint64_t)k;
	}
	return 0;
}

int im_spool_next(struct im_spool *sp, const void **rec, size_t *len)
{
	uint32_t l32;
	int ret;

	if (!sp->reading)
		return -EINVAL;
	if (sp->file_left || sp->rpos < sp->rbuf.len) {
		ret = fill(sp, HDR);
		if (ret)
			return ret;
		memcpy(&l32, sp->rbuf.p + sp->rpos, 4);
		ret = fill(sp, HDR + pad8(l32));
		if (ret)
			return ret;
		*rec = sp->rbuf.p + sp->rpos + HDR;
		*len = l32;
		sp->rpos += HDR + pad8(l32);
		return 1;
	}
	while (sp->rchunk && sp->rchunk_pos == sp->rchunk->len) {
		sp->rchunk = sp->rchunk->next;
		sp->rchunk_pos = 0;
	}
	if (!sp->rchunk)
		return 0;
	memcpy(&l32, sp->rchunk->p + sp->rchunk_pos, 4);
	*rec = sp->rchunk->p + sp->rchunk_pos + HDR;
	*len = l32;
	sp->rchunk_pos += HDR + pad8(l32);
	return 1;
}

uint64_t im_spool_spilled(const struct im_spool *sp)
{
	return sp->spilled;
}

uint64_t im_spool_records(const struct im_spool *sp)
{
	return sp->records;
}
