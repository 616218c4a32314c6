/**
 * @file records.c
 * Payload codecs of the detection stages (layouts in records.h).
 */
#include <errno.h>
#include <string.h>

#include <xxhash.h>

#include "records.h"

static uint32_t valid_bits(const struct im_doc_sigs *d)
{
	unsigned nc = d->ncoords > IM_MAX_COORDS ? IM_MAX_COORDS : d->ncoords;

	return nc < 32 ? d->valid & ((1u << nc) - 1) : d->valid;
}

void im_stage_doc_encode(struct im_stage_buf *b, const struct im_stage_doc *doc)
{
	const struct im_doc_sigs *d = &doc->d;
	uint32_t valid = valid_bits(d);
	uint8_t small[4] = {d->status, d->ncoords, d->exact_valid, d->format};
	uint8_t sk[IM_SKETCH_RECORD];

	im_stage_buf_u64(b, doc->size);
	im_stage_buf_u64(b, (uint64_t)doc->mtime_ns);
	im_stage_buf_u64(b, doc->ino);
	im_stage_buf_u32(b, doc->ctime_fold);
	im_stage_buf_put(b, small, 4);
	im_stage_buf_u32(b, (uint32_t)d->err);
	im_stage_buf_u32(b, valid);
	im_stage_buf_u32(b, d->unique_terms);
	im_stage_buf_put(b, d->exact, 16);
	/* Signatures are stored packed, in coordinate order, as state.c does;
	 * the decoder puts each back at its coordinate. */
	for (unsigned k = 0; k < IM_MAX_COORDS; k++)
		if (valid & (1u << k))
			im_stage_buf_put(b, d->sig[k].b, IM_SIG_LEN);
	im_sketch_encode(&d->sketch, sk);
	im_stage_buf_put(b, sk, sizeof(sk));
	im_stage_buf_u64(b, d->numbers);
	im_stage_buf_put(b, doc->path, doc->path_len);
}

int im_stage_doc_decode(const uint8_t *p, size_t len, struct im_stage_doc *doc)
{
	struct im_stage_cur c = im_stage_cur(p, len);
	struct im_doc_sigs *d = &doc->d;
	const uint8_t *small, *exact, *sk;

	memset(doc, 0, sizeof(*doc));
	doc->size = im_stage_get_u64(&c);
	doc->mtime_ns = (int64_t)im_stage_get_u64(&c);
	doc->ino = im_stage_get_u64(&c);
	doc->ctime_fold = im_stage_get_u32(&c);
	small = im_stage_get(&c, 4);
	d->err = (int32_t)im_stage_get_u32(&c);
	d->valid = im_stage_get_u32(&c);
	d->unique_terms = im_stage_get_u32(&c);
	exact = im_stage_get(&c, 16);
	if (c.bad)
		return -EINVAL;
	d->status = small[0];
	d->ncoords = small[1];
	d->exact_valid = small[2];
	d->format = small[3];
	memcpy(d->exact, exact, 16);
	if (d->status >= IM_DOC_STATUS_COUNT || d->ncoords > IM_MAX_COORDS ||
	    d->valid != valid_bits(d) || d->exact_valid > 1)
		return -EINVAL;
	for (unsigned k = 0; k < IM_MAX_COORDS; k++) {
		const uint8_t *s;

		if (!(d->valid & (1u << k)))
			continue;
		s = im_stage_get(&c, IM_SIG_LEN);
		if (!s)
			return -EINVAL;
		memcpy(d->sig[k].b, s, IM_SIG_LEN);
	}
	sk = im_stage_get(&c, IM_SKETCH_RECORD);
	if (!sk)
		return -EINVAL;
	im_sketch_decode(sk, &d->sketch);
	d->numbers = im_stage_get_u64(&c);
	if (c.bad)
		return -EINVAL;
	d->size = doc->size;
	d->mtime_ns = doc->mtime_ns;
	doc->path_len = im_stage_left(&c);
	doc->path = (const char *)c.p;
	if (!doc->path_len || memchr(doc->path, '\0', doc->path_len))
		return -EINVAL;
	return 0;
}

/* ---- Keys ------------------------------------------------------------------ */

void im_stage_key_encode(struct im_stage_buf *b, const struct im_stage_key *k)
{
	uint8_t head[3] = {k->key.kind, k->key.k, k->key.len};

	im_stage_buf_put(b, head, 3);
	im_stage_buf_put(b, k->key.b, k->key.len);
	im_stage_buf_u32(b, k->shard);
	im_stage_buf_u32(b, k->index);
	im_stage_buf_put(b, k->path, k->path_len);
}

int im_stage_key_decode(const uint8_t *p, size_t len, struct im_stage_key *k)
{
	struct im_stage_cur c = im_stage_cur(p, len);
	const uint8_t *head = im_stage_get(&c, 3), *b;

	if (!head || head[0] > IM_KEY_BAND || head[2] > sizeof(k->key.b))
		return -EINVAL;
	memset(k, 0, sizeof(*k));
	k->key.kind = head[0];
	k->key.k = head[1];
	k->key.len = head[2];
	b = im_stage_get(&c, k->key.len);
	k->shard = im_stage_get_u32(&c);
	k->index = im_stage_get_u32(&c);
	if (c.bad || !im_stage_left(&c))
		return -EINVAL;
	memcpy(k->key.b, b, k->key.len);
	k->path = (const char *)c.p;
	k->path_len = im_stage_left(&c);
	if (memchr(k->path, '\0', k->path_len))
		return -EINVAL;
	return 0;
}

void im_stage_key_make(struct im_stage_key *k, const struct im_cand_key *key,
		       uint32_t shard, uint32_t index, const char *path)
{
	k->key = *key;
	k->shard = shard;
	k->index = index;
	k->path = path;
	k->path_len = strlen(path);
}

bool im_stage_key_same(const struct im_stage_key *a,
		       const struct im_stage_key *b)
{
	return a->key.kind == b->key.kind && a->key.k == b->key.k &&
	       a->key.len == b->key.len &&
	       !memcmp(a->key.b, b->key.b, a->key.len);
}

int im_stage_key_cmp(const struct im_stage_key *a, const struct im_stage_key *b)
{
	size_t n;
	int r;

	if (a->key.kind != b->key.kind)
		return a->key.kind < b->key.kind ? -1 : 1;
	if (a->key.k != b->key.k)
		return a->key.k < b->key.k ? -1 : 1;
	if (a->key.len != b->key.len)
		return a->key.len < b->key.len ? -1 : 1;
	r = memcmp(a->key.b, b->key.b, a->key.len);
	if (r)
		return r;
	/* Byte order of the paths, a prefix first: the index's path order. */
	n = a->path_len < b->path_len ? a->path_len : b->path_len;
	r = memcmp(a->path, b->path, n);
	if (r)
		return r;
	return a->path_len < b->path_len ? -1 : a->path_len > b->path_len;
}

uint32_t im_stage_key_part(const struct im_stage_key *k, uint32_t nparts)
{
	uint8_t buf[2 + sizeof(k->key.b)];

	buf[0] = k->key.kind;
	buf[1] = k->key.k;
	memcpy(buf + 2, k->key.b, k->key.len);
	return im_stage_part_of(XXH3_64bits(buf, 2 + (size_t)k->key.len),
				nparts);
}

/* ---- Links ----------------------------------------------------------------- */

void im_stage_link_encode(struct im_stage_buf *b, const struct im_stage_link *l)
{
	uint64_t bits;

	memcpy(&bits, &l->similarity, sizeof(bits));
	im_stage_buf_u32(b, l->a_shard);
	im_stage_buf_u32(b, l->a_index);
	im_stage_buf_u32(b, l->b_shard);
	im_stage_buf_u32(b, l->b_index);
	im_stage_buf_put(b, &l->exact, 1);
	im_stage_buf_u64(b, bits);
}

int im_stage_link_decode(const uint8_t *p, size_t len, struct im_stage_link *l)
{
	struct im_stage_cur c = im_stage_cur(p, len);
	const uint8_t *exact;
	uint64_t bits;

	l->a_shard = im_stage_get_u32(&c);
	l->a_index = im_stage_get_u32(&c);
	l->b_shard = im_stage_get_u32(&c);
	l->b_index = im_stage_get_u32(&c);
	exact = im_stage_get(&c, 1);
	bits = im_stage_get_u64(&c);
	if (c.bad || im_stage_left(&c) || exact[0] > 1)
		return -EINVAL;
	l->exact = exact[0];
	memcpy(&l->similarity, &bits, sizeof(bits));
	return 0;
}

/* ---- Clusters -------------------------------------------------------------- */

void im_stage_cluster_encode(struct im_stage_buf *b, const struct im_sig *name,
			     const uint32_t *ids, uint32_t n)
{
	im_stage_buf_put(b, name->b, IM_SIG_LEN);
	im_stage_buf_u32(b, n);
	for (uint32_t i = 0; i < n; i++)
		im_stage_buf_u32(b, ids[i]);
}

int im_stage_cluster_decode(const uint8_t *p, size_t len, struct im_sig *name,
			    const uint8_t **ids, uint32_t *n)
{
	struct im_stage_cur c = im_stage_cur(p, len);
	const uint8_t *nb = im_stage_get(&c, IM_SIG_LEN);

	*n = im_stage_get_u32(&c);
	if (c.bad || *n < 2 || im_stage_left(&c) != (size_t)*n * 4)
		return -EINVAL;
	memcpy(name->b, nb, IM_SIG_LEN);
	*ids = c.p;
	for (uint32_t i = 1; i < *n; i++)
		if (im_stage_cluster_member(*ids, i) <=
		    im_stage_cluster_member(*ids, i - 1))
			return -EINVAL;
	return 0;
}

uint32_t im_stage_cluster_member(const uint8_t *ids, uint32_t i)
{
	const uint8_t *p = ids + 4 * (size_t)i;

	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}
