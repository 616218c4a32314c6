/**
 * @file stage_rec.c
 * The payloads of the tools' own stage files (stage_rec.h).
 */
#include <errno.h>
#include <string.h>

#include "stage_rec.h"

/* ---- Manifest ------------------------------------------------------------------ */

void man_rec_encode(struct im_stage_buf *b, const struct man_rec *r)
{
	im_stage_buf_u64(b, r->size);
	im_stage_buf_u64(b, r->mtime_ns);
	im_stage_buf_u64(b, r->ino);
	im_stage_buf_u32(b, r->shard);
	im_stage_buf_put(b, r->path, r->path_len);
}

int man_rec_decode(const uint8_t *p, size_t len, struct man_rec *r)
{
	struct im_stage_cur cur = im_stage_cur(p, len);

	r->size = im_stage_get_u64(&cur);
	r->mtime_ns = im_stage_get_u64(&cur);
	r->ino = im_stage_get_u64(&cur);
	r->shard = im_stage_get_u32(&cur);
	r->path = (const char *)cur.p;
	r->path_len = im_stage_left(&cur);
	return cur.bad || !r->path_len ? -EINVAL : 0;
}

/* ---- Document frequencies -------------------------------------------------------- */

void df_rec_encode(struct im_stage_buf *b, uint32_t count, const char *term,
		   size_t len)
{
	im_stage_buf_u32(b, count);
	im_stage_buf_put(b, term, len);
}

int df_rec_decode(const uint8_t *p, size_t len, uint32_t *count,
		  const char **term, size_t *term_len)
{
	struct im_stage_cur cur = im_stage_cur(p, len);

	*count = im_stage_get_u32(&cur);
	*term = (const char *)cur.p;
	*term_len = im_stage_left(&cur);
	return cur.bad || !*term_len ? -EINVAL : 0;
}

int df_term_cmp(const char *a, size_t al, const char *b, size_t bl)
{
	int r = memcmp(a, b, al < bl ? al : bl);

	if (r)
		return r;
	return al < bl ? -1 : al > bl;
}

int df_rec_cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
	if (al < 4 || bl < 4)
		return al < bl ? -1 : al > bl;
	return df_term_cmp((const char *)a + 4, al - 4, (const char *)b + 4,
			   bl - 4);
}

/* ---- Export parts ------------------------------------------------------------------ */

void xp_rec_encode(struct im_stage_buf *b, const void *key, size_t klen,
		   const void *text, size_t tlen)
{
	im_stage_buf_u32(b, (uint32_t)klen);
	im_stage_buf_put(b, key, klen);
	im_stage_buf_put(b, text, tlen);
}

int xp_rec_decode(const uint8_t *p, size_t len, const uint8_t **key,
		  size_t *klen, const uint8_t **text, size_t *tlen)
{
	struct im_stage_cur cur = im_stage_cur(p, len);

	*klen = im_stage_get_u32(&cur);
	*key = im_stage_get(&cur, *klen);
	*text = cur.p;
	*tlen = im_stage_left(&cur);
	return cur.bad ? -EINVAL : 0;
}

int xp_rec_cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
	const uint8_t *x, *y, *text;
	size_t ka, kb, tlen;
	int r;

	if (xp_rec_decode(a, al, &x, &ka, &text, &tlen))
		ka = 0;
	if (xp_rec_decode(b, bl, &y, &kb, &text, &tlen))
		kb = 0;
	r = ka && kb ? memcmp(x, y, ka < kb ? ka : kb) : 0;
	return r ? r : (ka > kb) - (ka < kb);
}
