/**
 * @file exact.c
 * The size-first exact tier (exact.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "beneath.h"
#include "bytes.h"
#include "exact.h"
#include "index.h"

#define HASH_CHUNK ((size_t)1 << 20)

bool im_exact_tier(const struct im_doc_sigs *d)
{
	return d->size > 0 &&
	       (d->status == IM_DOC_SIGNED || d->status == IM_DOC_REJECTED ||
		d->status == IM_DOC_BINARY || d->status == IM_DOC_FAILED);
}

bool im_exact_deferred(const struct im_doc_sigs *d)
{
	return im_exact_tier(d) && !d->exact_valid;
}

/* ---- Hashing one file -------------------------------------------------------- */

static int64_t ns_of(struct timespec t)
{
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

int im_exact_hash_seen_at(int dirfd, const char *path,
			  const struct im_exact_seen *seen, uint64_t limit,
			  void *buf, size_t bufsize, uint8_t exact[16],
			  uint64_t *bytes)
{
	XXH3_state_t h; /* XXH_INLINE_ALL: complete, aligned by its type */
	XXH128_canonical_t c;
	bool whole = seen->size <= limit, streamed = false;
	uint64_t want = whole ? seen->size : limit, done = 0;
	size_t fill = 0;
	struct stat st;
	int fd = -1, ret;

	if (bytes)
		*bytes = 0;
	if (bufsize < IM_EXACT_HEAD)
		return -EINVAL;
	ret = im_open_beneath(dirfd, path, O_RDONLY | O_NOCTTY | O_NONBLOCK,
			      &fd);
	if (ret)
		goto out;
	if (fstat(fd, &st)) {
		ret = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != seen->size ||
	    ns_of(st.st_mtim) != seen->mtime_ns ||
	    (seen->ctime_ns && ns_of(st.st_ctim) != seen->ctime_ns) ||
	    (seen->ino && ((uint64_t)st.st_dev != seen->dev ||
			   (uint64_t)st.st_ino != seen->ino))) {
		ret = -ESTALE;
		goto out;
	}
	/*
	 * Fill the buffer, hashing it as it fills up. A whole file is read
	 * until read() says its end, so that one grown meanwhile is caught; a
	 * head stops at @p limit. Hashed in one call when it fits the buffer
	 * (the same XXH3-128 as streamed, and quicker for small files).
	 */
	while (whole || done < want) {
		size_t room = bufsize - fill;
		ssize_t r;

		if (!room) {
			if (!streamed)
				XXH3_128bits_reset(&h);
			streamed = true;
			XXH3_128bits_update(&h, buf, fill);
			fill = 0;
			continue;
		}
		if (!whole && room > want - done)
			room = (size_t)(want - done);
		r = read(fd, (char *)buf + fill, room);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			ret = -errno;
			goto out;
		}
		if (r == 0)
			break;
		fill += (size_t)r;
		done += (uint64_t)r;
		/* Written meanwhile: not the bytes the walk saw. */
		if (done > want)
			break;
	}
	if (bytes)
		*bytes = done;
	if (done != want) {
		ret = -ESTALE;
		goto out;
	}
	if (streamed) {
		XXH3_128bits_update(&h, buf, fill);
		XXH128_canonicalFromHash(&c, XXH3_128bits_digest(&h));
	} else {
		XXH128_canonicalFromHash(&c, XXH3_128bits(buf, fill));
	}
	memcpy(exact, c.digest, 16);
out:
	if (fd >= 0)
		close(fd);
	return ret;
}

void im_exact_hash_buf(const void *buf, size_t len, uint8_t exact[16])
{
	XXH128_canonical_t c;

	XXH128_canonicalFromHash(&c, XXH3_128bits(buf, len));
	memcpy(exact, c.digest, 16);
}

int im_exact_hash_at(int dirfd, const char *path, uint64_t size,
		     int64_t mtime_ns, uint8_t exact[16], uint64_t *bytes)
{
	struct im_exact_seen seen = {.size = size, .mtime_ns = mtime_ns};
	char *buf = malloc(HASH_CHUNK);
	int ret;

	if (bytes)
		*bytes = 0;
	if (!buf)
		return -ENOMEM;
	ret = im_exact_hash_seen_at(dirfd, path, &seen, UINT64_MAX, buf,
				    HASH_CHUNK, exact, bytes);
	free(buf);
	return ret;
}

/* ---- Counting sizes ------------------------------------------------------------ */

struct slot {
	uint64_t size; /* 0: free */
	uint64_t count;
	uint64_t pending; /* the deferred file alone with its size, or NONE */
};

struct im_sizes {
	struct slot *v;
	size_t cap, len; /* cap a power of two */
};

int im_sizes_new(struct im_sizes **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

void im_sizes_free(struct im_sizes *t)
{
	if (!t)
		return;
	free(t->v);
	free(t);
}

static size_t slot_of(const struct slot *v, size_t cap, uint64_t size)
{
	size_t i = (size_t)(size * 0x9e3779b97f4a7c15ull) & (cap - 1);

	while (v[i].size && v[i].size != size)
		i = (i + 1) & (cap - 1);
	return i;
}

static int grow(struct im_sizes *t)
{
	size_t cap = t->cap ? 2 * t->cap : 64;
	struct slot *v = im_zeroed(cap, sizeof(*v));

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < t->cap; i++)
		if (t->v[i].size)
			v[slot_of(v, cap, t->v[i].size)] = t->v[i];
	free(t->v);
	t->v = v;
	t->cap = cap;
	return 0;
}

int im_sizes_add(struct im_sizes *t, uint64_t size, uint64_t id,
		 uint64_t todo[2], size_t *n)
{
	struct slot *s;

	*n = 0;
	/* At most 3/4 full, so that probing stays short. */
	if (4 * (t->len + 1) > 3 * t->cap && grow(t))
		return -ENOMEM;
	s = &t->v[slot_of(t->v, t->cap, size)];
	if (!s->size) {
		s->size = size;
		s->pending = id;
		t->len++;
	} else {
		if (s->pending != IM_SIZES_NONE)
			todo[(*n)++] = s->pending;
		s->pending = IM_SIZES_NONE;
		if (id != IM_SIZES_NONE)
			todo[(*n)++] = id;
	}
	s->count++;
	return 0;
}

uint64_t im_sizes_count(const struct im_sizes *t, uint64_t size)
{
	if (!t->cap)
		return 0;
	const struct slot *s = &t->v[slot_of(t->v, t->cap, size)];
	return s->size ? s->count : 0;
}

size_t im_sizes_len(const struct im_sizes *t)
{
	return t->len;
}

/* ---- After a scan ------------------------------------------------------------- */

struct fill {
	struct im_sizes *sizes;
	char **paths; /* deferred documents; an id is an index here */
	size_t n, cap;
	bool *todo; /* per id */
	int err;
};

static int fill_doc(const char *path, const struct im_doc_sigs *d, void *arg)
{
	struct fill *f = arg;
	uint64_t todo[2], id = IM_SIZES_NONE;
	size_t n;

	if (!im_exact_tier(d))
		return 0;
	if (!d->exact_valid) {
		if (f->n == f->cap) {
			size_t cap = f->cap ? 2 * f->cap : 64;
			char **p = realloc(f->paths, cap * sizeof(*p));
			bool *t = realloc(f->todo, cap * sizeof(*t));

			if (p)
				f->paths = p;
			if (t)
				f->todo = t;
			if (!p || !t)
				goto nomem;
			f->cap = cap;
		}
		f->paths[f->n] = strdup(path);
		if (!f->paths[f->n])
			goto nomem;
		f->todo[f->n] = false;
		id = f->n++;
	}
	if (im_sizes_add(f->sizes, d->size, id, todo, &n))
		goto nomem;
	for (size_t i = 0; i < n; i++)
		f->todo[todo[i]] = true;
	return 0;
nomem:
	f->err = -ENOMEM;
	return 1;
}

int im_exact_fill(struct im_index *idx, int dirfd, struct im_exact_stats *st)
{
	struct im_exact_stats none;
	struct fill f = {0};
	struct im_doc_sigs d;
	char *buf;
	int ret;

	st = st ? st : &none;
	memset(st, 0, sizeof(*st));
	/* One read buffer for every file: a fresh 1 MiB block per file cost
	 * a page fault per 4 kB read into it. */
	buf = malloc(HASH_CHUNK);
	ret = buf ? im_sizes_new(&f.sizes) : -ENOMEM;
	if (ret) {
		free(buf);
		return ret;
	}
	/* Collect first: the iteration holds the index's read lock. */
	im_index_foreach_doc(idx, fill_doc, &f);
	ret = f.err;
	st->deferred = f.n;
	for (size_t i = 0; !ret && i < f.n; i++) {
		struct im_exact_seen seen;
		uint64_t bytes;
		int r;

		if (!f.todo[i] || im_index_get(idx, f.paths[i], &d))
			continue;
		seen = (struct im_exact_seen){.size = d.size,
					      .mtime_ns = d.mtime_ns};
		r = im_exact_hash_seen_at(dirfd, f.paths[i], &seen, UINT64_MAX,
					  buf, HASH_CHUNK, d.exact, &bytes);
		st->bytes += bytes;
		if (r == -ENOMEM) {
			ret = r;
		} else if (r) {
			st->changed++;
		} else {
			d.exact_valid = 1;
			ret = im_index_put(idx, f.paths[i], &d);
			st->hashed += !ret;
		}
	}
	for (size_t i = 0; i < f.n; i++)
		free(f.paths[i]);
	free(f.paths);
	free(f.todo);
	im_sizes_free(f.sizes);
	free(buf);
	return ret;
}
