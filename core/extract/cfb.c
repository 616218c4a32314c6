/**
 * @file cfb.c
 * The Compound File Binary container of the legacy Office formats (.doc,
 * .xls, .ppt), as [MS-CFB] describes it: a header, sectors chained by the
 * FAT (whose sectors the DIFAT lists), small streams in 64-byte mini
 * sectors of the root's mini stream chained by the MiniFAT, and a
 * directory of 128-byte entries whose siblings form a binary search tree
 * ordered by name.
 *
 * Nothing is trusted and nothing is built: every sector number is checked
 * against the sectors the file holds before it is read, and every walk has
 * a bound that does not depend on the chains being well formed. A FAT
 * lookup walks the DIFAT at most as many steps as the header gives DIFAT
 * sectors; a name is looked up in at most FIND_STEPS steps down the
 * sibling tree (a valid tree of a million entries is 40 deep), so a tree
 * with a cycle ends the search; a stream's chain is read with a bitmap of
 * the sectors seen, so a chain that loops fails (IM_XF_CORRUPT) rather
 * than repeating, and only as many sectors as its size needs are read. A
 * stream may not claim more bytes than the file has.
 *
 * Opening and finding a name allocate nothing and are cheap: sniffing
 * (extract.c) uses them in the calling thread to tell a .doc from another
 * compound file. Reading streams is for the helper (sandbox.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "extract_internal.h"

#define MAXREGSECT   0xfffffffaU
#define NOSTREAM     0xffffffffU
#define HEADER_DIFAT 109
#define MINI_SHIFT   6
#define CUTOFF	     4096
/* Steps down a sibling tree before a look-up gives up. */
#define FIND_STEPS 128
/* Directory sectors a look-up follows: 16384 entries of 512-byte sectors,
 * more than any document has, and a bound on the work a hostile chain
 * makes sniffing do. */
#define MAX_DIR_SECTORS 4096

bool im_cfb_open(struct im_cfb *c, const char *buf, size_t len)
{
	const unsigned char *p = (const unsigned char *)buf;
	unsigned shift;

	memset(c, 0, sizeof(*c));
	if (len < 512 || memcmp(p, IM_CFB_MAGIC, 8) ||
	    im_le16(p + 28) != 0xfffe)
		return false;
	shift = im_le16(p + 30);
	if ((shift != 9 && shift != 12) || im_le16(p + 32) != MINI_SHIFT ||
	    im_le32(p + 56) != CUTOFF || len <= (size_t)1 << shift)
		return false;
	c->p = p;
	c->len = len;
	c->shift = shift;
	/* Sectors that start inside the file; the last may be cut short. */
	c->nsect = (len - 1) >> shift;
	if (c->nsect > MAXREGSECT)
		c->nsect = MAXREGSECT;
	c->v4 = im_le16(p + 26) == 4;
	c->nfat = im_le32(p + 44);
	c->dir_start = im_le32(p + 48);
	c->minifat_start = im_le32(p + 60);
	c->nminifat = im_le32(p + 64);
	c->difat_start = im_le32(p + 68);
	c->ndifat = im_le32(p + 72);
	return true;
}

/* The bytes of sector @p s from @p off on, at least @p need of them; NULL
 * when the file does not hold them. */
static const unsigned char *sector(const struct im_cfb *c, uint32_t s,
				   size_t off, size_t need)
{
	size_t at;

	if (s >= c->nsect)
		return NULL;
	at = ((size_t)s + 1) << c->shift;
	if (at + off + need > c->len)
		return NULL;
	return c->p + at + off;
}

/* The FAT's entry for sector @p s into *@p next. */
static bool fat_next(const struct im_cfb *c, uint32_t s, uint32_t *next)
{
	uint32_t per = 1U << (c->shift - 2), k = s / per, fs;
	const unsigned char *e;

	if (s >= c->nsect || k >= c->nfat)
		return false;
	if (k < HEADER_DIFAT) {
		fs = im_le32(c->p + 76 + 4 * k);
	} else {
		/* Each DIFAT sector lists per - 1 FAT sectors, then the
		 * next DIFAT sector. */
		uint32_t j = k - HEADER_DIFAT, d = c->difat_start;

		if (j / (per - 1) >= c->ndifat)
			return false;
		for (uint32_t i = 0; i < j / (per - 1); i++) {
			e = sector(c, d, 4 * (size_t)(per - 1), 4);
			if (!e)
				return false;
			d = im_le32(e);
		}
		e = sector(c, d, 4 * (size_t)(j % (per - 1)), 4);
		if (!e)
			return false;
		fs = im_le32(e);
	}
	e = sector(c, fs, 4 * (size_t)(s % per), 4);
	if (!e)
		return false;
	*next = im_le32(e);
	return true;
}

/* Directory entry @p id, or NULL. */
static const unsigned char *dir_entry(const struct im_cfb *c, uint32_t id)
{
	uint32_t per = 1U << (c->shift - 7), s = c->dir_start;

	if (id / per >= MAX_DIR_SECTORS)
		return NULL;
	for (uint32_t i = 0; i < id / per; i++)
		if (!fat_next(c, s, &s))
			return NULL;
	return sector(c, s, 128 * (size_t)(id % per), 128);
}

/* Order of @p name (ASCII) against the entry @p e's: shorter first, then
 * by code unit, letters compared upper case ([MS-CFB] 2.6.4). */
static int name_cmp(const char *name, const unsigned char *e)
{
	size_t n = strlen(name), en = im_le16(e + 64);

	if (en < 2 || en > 64 || en % 2)
		return -2; /* a broken name: no match, search left */
	en = en / 2 - 1;
	if (n != en)
		return n < en ? -1 : 1;
	for (size_t i = 0; i < n; i++) {
		uint32_t a = (unsigned char)name[i], b = im_le16(e + 2 * i);

		if (a >= 'a' && a <= 'z')
			a -= 32;
		if (b >= 'a' && b <= 'z')
			b -= 32;
		if (a != b)
			return a < b ? -1 : 1;
	}
	return 0;
}

static void entry_of(const struct im_cfb *c, const unsigned char *e,
		     struct im_cfb_entry *out)
{
	out->start = im_le32(e + 116);
	out->size = im_le32(e + 120);
	/* Version 3 files may hold garbage in the high half ([MS-CFB]
	 * 2.6.3). */
	if (c->v4)
		out->size |= (uint64_t)im_le32(e + 124) << 32;
}

bool im_cfb_find(const struct im_cfb *c, const char *name,
		 struct im_cfb_entry *out)
{
	const unsigned char *e = dir_entry(c, 0);
	uint32_t id;

	if (!e || e[66] != 5)
		return false;
	id = im_le32(e + 76);
	for (unsigned step = 0; step < FIND_STEPS && id != NOSTREAM; step++) {
		int cmp;

		e = dir_entry(c, id);
		if (!e)
			return false;
		cmp = name_cmp(name, e);
		if (cmp == 0) {
			if (e[66] != 2)
				return false;
			entry_of(c, e, out);
			return true;
		}
		id = im_le32(e + (cmp < 0 ? 68 : 72));
	}
	return false;
}

/* ---- Reading streams ------------------------------------------------------ */

/* Where a chain's sectors are: the file's sectors (mini NULL) or the mini
 * sectors of the mini stream, chained by the MiniFAT. */
struct chain {
	const struct im_cfb *c;
	const struct im_buf *mini, *minifat;
};

static bool chain_next(const struct chain *ch, uint32_t s, uint32_t *next)
{
	if (!ch->mini)
		return fat_next(ch->c, s, next);
	if ((size_t)s >= ch->minifat->len / 4)
		return false;
	*next = im_le32((const unsigned char *)ch->minifat->p + 4 * (size_t)s);
	return true;
}

/* @p need bytes of sector @p s, or NULL. */
static const unsigned char *chain_sector(const struct chain *ch, uint32_t s,
					 size_t need)
{
	size_t at;

	if (!ch->mini)
		return sector(ch->c, s, 0, need);
	at = (size_t)s << MINI_SHIFT;
	if (at + need > ch->mini->len || at + need < at)
		return NULL;
	return (const unsigned char *)ch->mini->p + at;
}

/* Append @p size bytes of the chain from @p start to @p out. */
static int chain_read(const struct chain *ch, uint32_t start, uint64_t size,
		      struct im_buf *out)
{
	unsigned shift = ch->mini ? MINI_SHIFT : ch->c->shift;
	size_t count = ch->mini ? ch->mini->len >> MINI_SHIFT : ch->c->nsect;
	unsigned char *seen;
	uint32_t s = start;
	int ret = 0;

	if (size > ch->c->len)
		return IM_XF_CORRUPT;
	if (!size)
		return 0;
	if (im_buf_reserve(out, (size_t)size))
		return -ENOMEM;
	seen = calloc(count / 8 + 1, 1);
	if (!seen)
		return -ENOMEM;
	while (size) {
		size_t n = size < ((size_t)1 << shift) ? (size_t)size
						       : (size_t)1 << shift;
		const unsigned char *d;

		if (s >= count || seen[s / 8] & (1U << (s % 8))) {
			ret = IM_XF_CORRUPT;
			break;
		}
		seen[s / 8] |= (unsigned char)(1U << (s % 8));
		d = chain_sector(ch, s, n);
		if (!d) {
			ret = IM_XF_CORRUPT;
			break;
		}
		memcpy(out->p + out->len, d, n);
		out->len += n;
		size -= n;
		if (size && !chain_next(ch, s, &s)) {
			ret = IM_XF_CORRUPT;
			break;
		}
	}
	free(seen);
	return ret;
}

/* Take @p n bytes from *@p budget. */
static int spend(size_t *budget, uint64_t n)
{
	if (n > *budget)
		return IM_XF_EXPANSION;
	*budget -= (size_t)n;
	return 0;
}

int im_cfb_read(const struct im_cfb *c, const struct im_cfb_entry *e,
		size_t *budget, struct im_buf *out)
{
	struct im_buf mini = {0}, minifat = {0};
	struct chain ch = {.c = c};
	struct im_cfb_entry root;
	const unsigned char *r;
	int ret;

	if (e->size > c->len)
		return IM_XF_CORRUPT;
	ret = spend(budget, e->size);
	if (ret || e->size >= CUTOFF)
		return ret ? ret : chain_read(&ch, e->start, e->size, out);
	if (!e->size)
		return 0;
	r = dir_entry(c, 0);
	if (!r)
		return IM_XF_CORRUPT;
	entry_of(c, r, &root);
	if ((uint64_t)c->nminifat << c->shift > c->len)
		return IM_XF_CORRUPT;
	ret = spend(budget, root.size);
	if (!ret)
		ret = spend(budget, (uint64_t)c->nminifat << c->shift);
	if (!ret)
		ret = chain_read(&ch, root.start, root.size, &mini);
	if (!ret)
		ret = chain_read(&ch, c->minifat_start,
				 (uint64_t)c->nminifat << c->shift, &minifat);
	if (!ret) {
		ch.mini = &mini;
		ch.minifat = &minifat;
		ret = chain_read(&ch, e->start, e->size, out);
	}
	im_buf_release(&mini);
	im_buf_release(&minifat);
	return ret;
}
