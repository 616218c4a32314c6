/**
 * @file msoffice.c
 * The text of legacy Office documents, in compound files (cfb.c).
 *
 * Word 97-2003 (.doc, [MS-DOC]): the File Information Block at the start of
 * the WordDocument stream gives the character counts of the document's
 * parts (main text, footnotes, headers, comments, endnotes, ...; in that
 * order, one run of character positions) and where the table stream
 * (0Table or 1Table) holds the piece table (the CLX): which byte ranges of
 * WordDocument hold which characters, each piece 8-bit ("compressed":
 * windows-1252) or UTF-16LE. Read are the main text, footnotes and
 * endnotes, what docx gives (zipdoc.c); headers and comments are left out
 * there too. Word's marks become what a reader sees: paragraph, cell and
 * row ends, line, page and column breaks a newline; of a field, the
 * instruction (between 0x13 and 0x14) is left out and the result (between
 * 0x14 and 0x15) kept, as docx and RTF read them; picture, footnote
 * reference and other anchors nothing. Text of deleted revisions is still
 * in the pieces and is read (telling it apart needs the character
 * properties). Word 6 and 95 files (an older FIB) are not read: sniffing
 * calls them binary, so an external filter can take them.
 *
 * Every count is checked against the streams it indexes, and the characters
 * visited count against max_unpacked, as the pieces may overlap.
 * Runs in the sandboxed helper (sandbox.c).
 */
#include <errno.h>
#include <string.h>

#include "extract_internal.h"

static uint32_t u32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint16_t u16(const unsigned char *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

/* ---- Word ----------------------------------------------------------------- */

#define FIB_IDENT     0xa5ec
#define FIB_WORD97    0xc1
#define FIB_ENCRYPTED 0x0100
#define FIB_TABLE1    0x0200

/* The first sector of WordDocument, when it is in the file's sectors (a
 * stream under 4096 bytes is not: it is read whole by the helper). */
static const unsigned char *
stream_head(const struct im_cfb *c, const struct im_cfb_entry *e, size_t need)
{
	size_t at = ((size_t)e->start + 1) << c->shift;

	if (e->size < 4096 || e->start >= c->nsect || at + need > c->len)
		return NULL;
	return c->p + at;
}

enum im_format im_msoffice_sniff(const char *buf, size_t len)
{
	struct im_cfb c;
	struct im_cfb_entry e;
	const unsigned char *fib;

	if (!im_cfb_open(&c, buf, len))
		return IM_FMT_BINARY;
	if (im_cfb_find(&c, "WordDocument", &e)) {
		/* Word 6 and 95 have an older FIB this reader does not
		 * know: binary, as before, for a filter to read. */
		fib = stream_head(&c, &e, 4);
		if (!fib ||
		    (u16(fib) == FIB_IDENT && u16(fib + 2) >= FIB_WORD97))
			return IM_FMT_DOC;
	}
	return IM_FMT_BINARY;
}

/* Windows-1252's characters at 0x80-0x9f, where Word's 8-bit pieces differ
 * from Latin-1 ([MS-DOC] 2.4.1; the three it leaves out, 0x80, 0x8e and
 * 0x9e, as windows-1252 has them: no writer means a C1 control). */
static const uint16_t cp1252_high[32] = {
	0x20ac, 0x81,	0x201a, 0x192,	0x201e, 0x2026, 0x2020, 0x2021,
	0x2c6,	0x2030, 0x160,	0x2039, 0x152,	0x8d,	0x17d,	0x8f,
	0x90,	0x2018, 0x2019, 0x201c, 0x201d, 0x2022, 0x2013, 0x2014,
	0x2dc,	0x2122, 0x161,	0x203a, 0x153,	0x9d,	0x17e,	0x178,
};

struct word {
	struct im_buf *out;
	size_t max_text;
	/* Fields: how deep, and the depth of the outermost one still in its
	 * instruction (0: none), inside which nothing is shown. */
	size_t depth, hidden;
	uint32_t high; /* a high surrogate waiting for its pair, or 0 */
};

static int word_char(struct word *w, uint32_t c)
{
	switch (c) {
	case 0x13:
		w->depth++;
		if (!w->hidden)
			w->hidden = w->depth;
		return 0;
	case 0x14:
		if (w->hidden == w->depth)
			w->hidden = 0;
		return 0;
	case 0x15:
		if (!w->depth)
			return 0;
		if (w->hidden == w->depth)
			w->hidden = 0;
		w->depth--;
		return 0;
	}
	if (w->hidden)
		return 0;
	/* Cell and row ends, line breaks, page and section breaks,
	 * paragraph ends and column breaks end a line; 0x1e is a
	 * non-breaking hyphen; other controls anchor pictures, notes and
	 * comments, or are soft hyphens (0x1f), and are not text. */
	switch (c) {
	case 0x07:
	case 0x0b:
	case 0x0c:
	case 0x0d:
	case 0x0e: return im_buf_putc(w->out, '\n');
	case 0x09: return im_buf_putc(w->out, '\t');
	case 0x1e: return im_buf_putc(w->out, '-');
	}
	if (c < 0x20)
		return 0;
	if (c >= 0xd800 && c < 0xdc00) {
		w->high = c;
		return 0;
	}
	if (c >= 0xdc00 && c < 0xe000) {
		if (!w->high)
			return 0;
		c = 0x10000 + ((w->high - 0xd800) << 10) + (c - 0xdc00);
	}
	w->high = 0;
	return im_buf_put_cp(w->out, c);
}

/* The piece table: n pieces, piece i holding characters [cp[i], cp[i+1])
 * as the 8 bytes of pcd + 8 * i describe. */
struct pieces {
	const unsigned char *cp, *pcd;
	uint32_t n;
};

/* Characters [from, to) of the document into @p w. */
static int word_range(struct word *w, const struct pieces *pt,
		      const struct im_buf *wd, uint64_t from, uint64_t to,
		      size_t *budget)
{
	for (uint32_t i = 0; i < pt->n && from < to; i++) {
		uint32_t a = u32(pt->cp + 4 * (size_t)i);
		uint32_t b = u32(pt->cp + 4 * (size_t)i + 4);
		uint32_t fc = u32(pt->pcd + 8 * (size_t)i + 2);
		bool compressed = fc & 0x40000000;
		const unsigned char *s;
		uint64_t lo, hi, at;
		size_t n;

		if (b < a)
			return IM_XF_CORRUPT;
		lo = from > a ? from : a;
		hi = to < b ? to : b;
		if (lo >= hi)
			continue;
		n = (size_t)(hi - lo);
		if (n > *budget)
			return IM_XF_EXPANSION;
		*budget -= n;
		at = compressed ? (fc & 0x3fffffff) / 2 + (lo - a)
				: (uint64_t)fc + 2 * (lo - a);
		if (at + (compressed ? n : 2 * n) > wd->len)
			return IM_XF_CORRUPT;
		s = (const unsigned char *)wd->p + at;
		w->high = 0;
		for (size_t k = 0; k < n; k++) {
			uint32_t c = compressed ? s[k] : u16(s + 2 * k);
			int ret;

			if (compressed && c >= 0x80 && c < 0xa0)
				c = cp1252_high[c - 0x80];
			ret = word_char(w, c);
			if (ret)
				return ret;
		}
		if (w->max_text && w->out->len > w->max_text)
			return IM_XF_OUTPUT;
		from = hi;
	}
	return 0;
}

/* The piece table in the CLX at tbl[off, off + len): any property runs
 * (Prc, 0x01) first, then the Pcdt (0x02). */
static int word_pieces(const struct im_buf *tbl, uint32_t off, uint32_t len,
		       struct pieces *pt)
{
	const unsigned char *p = (const unsigned char *)tbl->p;
	size_t i = off, end = (size_t)off + len;

	if (end > tbl->len)
		return IM_XF_CORRUPT;
	while (i < end && p[i] == 0x01) {
		if (end - i < 3)
			return IM_XF_CORRUPT;
		i += 3 + u16(p + i + 1);
	}
	if (i >= end || end - i < 5 || p[i] != 0x02)
		return IM_XF_CORRUPT;
	len = u32(p + i + 1);
	i += 5;
	if (len > end - i || len < 4 || (len - 4) % 12)
		return IM_XF_CORRUPT;
	pt->n = (len - 4) / 12;
	pt->cp = p + i;
	pt->pcd = p + i + 4 * ((size_t)pt->n + 1);
	return 0;
}

int im_doc_text(const char *buf, size_t len, const struct im_extract_opts *o,
		struct im_buf *out)
{
	struct im_buf wd = {0}, tbl = {0};
	size_t budget = o->max_unpacked ? o->max_unpacked : SIZE_MAX;
	struct word w = {.out = out, .max_text = o->max_text};
	const unsigned char *f;
	struct im_cfb_entry e;
	struct pieces pt;
	struct im_cfb c;
	size_t lw, fc;
	uint64_t ccp[6];
	int ret;

	if (!im_cfb_open(&c, buf, len) || !im_cfb_find(&c, "WordDocument", &e))
		return IM_XF_CORRUPT;
	ret = im_cfb_read(&c, &e, &budget, &wd);
	if (ret)
		goto out;
	ret = IM_XF_CORRUPT;
	f = (const unsigned char *)wd.p;
	if (wd.len < 64 || u16(f) != FIB_IDENT || u16(f + 2) < FIB_WORD97)
		goto out;
	if (u16(f + 10) & FIB_ENCRYPTED) {
		ret = IM_XF_ENCRYPTED;
		goto out;
	}
	/* FibBase (32 bytes), then counted arrays: fibRgW (csw 16-bit
	 * words), fibRgLw (cslw 32-bit: ccpText at 3, then ccpFtn, ccpHdd,
	 * a reserved count, ccpAtn, ccpEdn) and fibRgFcLcb (cbRgFcLcb
	 * pairs of 32-bit offset and length: the CLX's is the 34th). */
	lw = 34 + 2 * (size_t)u16(f + 32);
	if (lw + 2 > wd.len || u16(f + lw) < 9)
		goto out;
	fc = lw + 2 + 4 * (size_t)u16(f + lw);
	lw += 2;
	if (fc + 2 > wd.len || u16(f + fc) < 34 || fc + 2 + 34 * 8 > wd.len)
		goto out;
	fc += 2 + 33 * 8;
	for (int i = 0; i < 6; i++)
		ccp[i] = u32(f + lw + 12 + 4 * (size_t)i);
	if (!im_cfb_find(&c, u16(f + 10) & FIB_TABLE1 ? "1Table" : "0Table",
			 &e))
		goto out;
	ret = im_cfb_read(&c, &e, &budget, &tbl);
	if (!ret)
		ret = word_pieces(&tbl, u32(f + fc), u32(f + fc + 4), &pt);
	/* Main text, footnotes, then endnotes (after headers, a reserved
	 * count and comments). */
	if (!ret)
		ret = word_range(&w, &pt, &wd, 0, ccp[0], &budget);
	if (!ret && ccp[1])
		ret = word_range(&w, &pt, &wd, ccp[0], ccp[0] + ccp[1],
				 &budget);
	if (!ret && ccp[5]) {
		uint64_t at = ccp[0] + ccp[1] + ccp[2] + ccp[3] + ccp[4];

		ret = word_range(&w, &pt, &wd, at, at + ccp[5], &budget);
	}
	if (!ret && im_buf_putc(out, '\n'))
		ret = -ENOMEM;
	if (!ret && w.max_text && out->len > w.max_text)
		ret = IM_XF_OUTPUT;
out:
	im_buf_release(&wd);
	im_buf_release(&tbl);
	return ret;
}
