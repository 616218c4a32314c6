/**
 * @file msoffice.c
 * The text of legacy Office documents, in compound files (cfb.c).
 *
 * Word 97-2003 (.doc, [MS-DOC]): the File Information Block at the start of
 * the WordDocument stream gives the character counts of the document's
 * parts (main text, footnotes, headers, comments, endnotes, text boxes,
 * ...; in that order, one run of character positions) and where the table
 * stream (0Table or 1Table) holds the piece table (the CLX): which byte
 * ranges of WordDocument hold which characters, each piece 8-bit
 * ("compressed": windows-1252) or UTF-16LE. Read are the main text,
 * footnotes, endnotes and text boxes, what docx gives (zipdoc.c: a text
 * box is in its document.xml); headers and comments are left out there
 * too. Word's marks become what a reader sees: paragraph, cell and
 * row ends, line, page and column breaks a newline; of a field, the
 * instruction (between 0x13 and 0x14) is left out and the result (between
 * 0x14 and 0x15) kept, as docx and RTF read them; picture, footnote
 * reference and other anchors nothing. Text a tracked change deleted is
 * still in the pieces, kept for undo: the character properties (the FKP
 * pages PlcBteChpx lists) mark it (sprmCFRMarkDel), and it is left out, as
 * docx leaves out w:delText; so is hidden text (sprmCFVanish), as docx's
 * w:vanish, whether the run's own properties hide it or its character
 * style (sprmCIstd) or paragraph style (PlcBtePapx) does, as the
 * stylesheet (STSH) says. Word 6 and 95 files (an older FIB) are not
 * read: sniffing calls them binary, so an external filter can take them.
 *
 * Every count is checked against the streams it indexes, and the characters
 * visited count against max_unpacked, as the pieces may overlap.
 *
 * Excel 97-2003 (.xls, BIFF8) and PowerPoint 97-2003 (.ppt): the record
 * streams, in their sections below. Sniffing (im_msoffice_sniff()) tells
 * the three, and their predecessors that stay binary, apart by the
 * directory alone. Runs in the sandboxed helper (sandbox.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "extract_internal.h"

/* A UTF-16 code unit to @p out, @p high holding a high surrogate that
 * waits for its pair; unpaired surrogates are dropped. */
static int put_unit(struct im_buf *out, uint32_t *high, uint32_t c)
{
	if (c >= 0xd800 && c < 0xdc00) {
		*high = c;
		return 0;
	}
	if (c >= 0xdc00 && c < 0xe000) {
		if (!*high)
			return 0;
		c = 0x10000 + ((*high - 0xd800) << 10) + (c - 0xdc00);
	}
	*high = 0;
	return im_buf_put_cp(out, c);
}

/* ---- Word ----------------------------------------------------------------- */

#define BIFF_BOF 0x0809
#define BIFF8	 0x0600

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
	struct im_cfb_entry e, t;
	const unsigned char *fib;

	if (!im_cfb_open(&c, buf, len))
		return IM_FMT_BINARY;
	if (im_cfb_find(&c, "WordDocument", &e)) {
		/* Word 6 and 95 have an older FIB this reader does not
		 * know, and no table stream: binary, as before, for a
		 * filter to read. */
		fib = stream_head(&c, &e, 4);
		if ((im_cfb_find(&c, "1Table", &t) ||
		     im_cfb_find(&c, "0Table", &t)) &&
		    (!fib || (im_le16(fib) == FIB_IDENT &&
			      im_le16(fib + 2) >= FIB_WORD97)))
			return IM_FMT_DOC;
	}
	if (im_cfb_find(&c, "Workbook", &e)) {
		/* Excel 5 and 95 (BIFF5) wrote a "Book" stream, but some
		 * programs a BIFF5 Workbook: only BIFF8 is read. */
		fib = stream_head(&c, &e, 6);
		if (!fib ||
		    (im_le16(fib) == BIFF_BOF && im_le16(fib + 4) == BIFF8))
			return IM_FMT_XLS;
	}
	/* PowerPoint 95 has a Header stream, PowerPoint 97 and later
	 * none: the older one stays binary. */
	if (im_cfb_find(&c, "PowerPoint Document", &e) &&
	    !im_cfb_find(&c, "Header", &t))
		return IM_FMT_PPT;
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
	return put_unit(w->out, &w->high, c);
}

/* Byte ranges [lo, hi) of WordDocument whose text a tracked change
 * deleted, sorted by lo. */
struct deleted {
	struct span {
		uint32_t lo, hi;
	} * v;
	size_t n, cap;
};

#define SPRM_C_RMARK_DEL 0x0800
/* Hidden text, left out as docx's w:vanish and RTF's \v are. */
#define SPRM_C_F_VANISH 0x083c
/* A run's character style: an index into the stylesheet. */
#define SPRM_C_ISTD 0x4a30

/* The operand of the last @p sprm in the properties @p g / @p n, or NULL;
 * *size its size. A sprm's operand size is in its top 3 bits ([MS-DOC]
 * 2.2.5.1); 6 is a byte of size first. */
static const unsigned char *grpprl_find(const unsigned char *g, size_t n,
					unsigned want, size_t *size)
{
	const unsigned char *found = NULL;
	size_t i = 0;

	while (i + 2 <= n) {
		unsigned sprm = im_le16(g + i);
		size_t k;

		i += 2;
		switch (sprm >> 13) {
		case 0:
		case 1: k = 1; break;
		case 2:
		case 4:
		case 5: k = 2; break;
		case 3: k = 4; break;
		case 7: k = 3; break;
		default: k = i < n ? 1 + (size_t)g[i] : 1;
		}
		if (sprm == want && i + k <= n) {
			found = g + i;
			*size = k;
		}
		i += k;
	}
	return found;
}

/* A toggle's operand: 1 on; 0x81 the style's opposite, and a style never
 * marks a deletion (nor, as a rule, hides text). -1: not there. */
static int grpprl_toggle(const unsigned char *g, size_t n, unsigned sprm)
{
	size_t k;
	const unsigned char *v = grpprl_find(g, n, sprm, &k);

	return v ? v[0] == 0x01 || v[0] == 0x81 : -1;
}

/*
 * The styles of the stylesheet ([MS-DOC] 2.9.271 STSH) that hide text, as
 * docx's w:vanish in a style (zipdoc.c): each style's base (istdBase) and
 * what its character properties say of sprmCFVanish (-1: nothing, its
 * base's; 0 shown; 1 hidden).
 */
struct word_styles {
	size_t n;
	uint16_t *base;
	int8_t *vanish;
};

/* Whether text in style @p istd is hidden: what it says, or else its
 * base, and so on; a walk of 32 styles at most (a loop shows the text). */
static bool style_hides(const struct word_styles *st, unsigned istd)
{
	for (unsigned i = 0; i < 32 && istd < st->n; i++) {
		if (st->vanish[istd] >= 0)
			return st->vanish[istd];
		istd = st->base[istd];
	}
	return false;
}

/*
 * Read the stylesheet at tbl[off, off + len): a count of bytes and the
 * Stshi (cstd, the count of styles, and cbSTDBaseInFile, the size of each
 * style's fixed part), then each style: a count of bytes (0: no style)
 * and the STD: the fixed part (its kind, stk, in the low 4 bits and
 * istdBase in the high 12 of its second word), the name (a count of
 * UTF-16 units, them and a 0), then the property exceptions: a paragraph
 * style's paragraph then character ones, a character style's character
 * ones, each a count of bytes and them, padded to an even count. What
 * does not parse says nothing: the styles are a refinement.
 */
static int word_styles(const struct im_buf *tbl, uint32_t off, uint32_t len,
		       struct word_styles *st)
{
	const unsigned char *p;
	size_t i, cb_base, n;

	if (len < 6 || (size_t)off + len > tbl->len)
		return 0;
	p = (const unsigned char *)tbl->p + off;
	i = 2 + (size_t)im_le16(p);
	n = im_le16(p + 2);
	cb_base = im_le16(p + 4);
	if (i > len || cb_base < 10 || !n)
		return 0;
	st->base = malloc(n * sizeof(*st->base));
	st->vanish = malloc(n);
	if (!st->base || !st->vanish)
		return -ENOMEM;
	st->n = n;
	memset(st->vanish, -1, n);
	for (size_t s = 0; s < n; s++) {
		size_t at, end, k, cb;
		unsigned stk;

		st->base[s] = 0xfff;
		if (i + 2 > len)
			continue;
		at = i + 2;
		end = at + im_le16(p + i);
		i = end;
		if (end > len || end - at < cb_base)
			continue;
		stk = im_le16(p + at + 2) & 0xf;
		st->base[s] = im_le16(p + at + 2) >> 4;
		k = at + cb_base;
		if (k + 2 > end)
			continue;
		k += 4 + 2 * (size_t)im_le16(p + k);
		if (stk == 1 && k + 2 <= end) { /* past the paragraph's */
			cb = im_le16(p + k);
			k += 2 + cb + (cb & 1);
		} else if (stk != 2) {
			continue;
		}
		if (k + 2 > end || k + 2 + im_le16(p + k) > end)
			continue;
		st->vanish[s] = (int8_t)grpprl_toggle(p + k + 2, im_le16(p + k),
						      SPRM_C_F_VANISH);
	}
	return 0;
}

/* Whether a run of the character properties @p g / @p n is deleted or
 * hidden: its own sprmCFVanish, or else its character style's. */
static bool run_gone(const struct word_styles *st, const unsigned char *g,
		     size_t n)
{
	int vanish = grpprl_toggle(g, n, SPRM_C_F_VANISH);
	const unsigned char *istd;
	size_t k;

	if (grpprl_toggle(g, n, SPRM_C_RMARK_DEL) == 1 || vanish == 1)
		return true;
	if (vanish == 0)
		return false;
	istd = grpprl_find(g, n, SPRM_C_ISTD, &k);
	return istd && k == 2 && style_hides(st, im_le16(istd));
}

static int span_cmp(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/*
 * The deleted and hidden ranges of the property pages that PlcBteChpx or,
 * @p papx, PlcBtePapx (tbl[off, off + len)) lists: each 512-byte page of
 * WordDocument holds crun runs (its last byte), their crun + 1 offsets,
 * then per run a byte (13 for paragraphs) locating its properties in the
 * page, in words. A run's are a count and sprms (run_gone()); a
 * paragraph's a count (of words, less a byte; if 0, the next byte counts
 * words), its style (istd) and sprms: the paragraph is hidden if its
 * style is. The properties are a refinement: pages that do not parse are
 * passed over, and each page is read once however often it is listed.
 */
static int word_deleted(const struct im_buf *wd, const struct im_buf *tbl,
			uint32_t off, uint32_t len, bool papx,
			const struct word_styles *st, struct deleted *d)
{
	const unsigned char *t = (const unsigned char *)tbl->p;
	size_t pages = wd->len / 512, n;
	unsigned char *seen;
	int ret = 0;

	if (len < 4 || (size_t)off + len > tbl->len || (len - 4) % 8)
		return 0;
	n = (len - 4) / 8;
	seen = calloc(pages / 8 + 1, 1);
	if (!seen)
		return -ENOMEM;
	for (size_t i = 0; i < n && !ret; i++) {
		uint32_t pn = im_le32(t + off + 4 * (n + 1) + 4 * i) & 0x3fffff;
		const unsigned char *pg;
		unsigned crun;

		if (pn >= pages || seen[pn / 8] & (1U << (pn % 8)))
			continue;
		seen[pn / 8] |= (unsigned char)(1U << (pn % 8));
		pg = (const unsigned char *)wd->p + 512 * (size_t)pn;
		crun = pg[511];
		if (!crun || (papx ? 17 : 5) * crun + 4 > 511)
			continue;
		for (unsigned r = 0; r < crun && !ret; r++) {
			size_t at = 2 * (size_t)pg[4 * (crun + 1) +
						   (papx ? 13 : 1) * r];

			if (!at || at + 1 + pg[at] > 511)
				continue;
			if (papx) {
				size_t cb = pg[at] ? 2 * (size_t)pg[at] - 1
						   : 2 * (size_t)pg[at + 1];

				at += pg[at] ? 1 : 2;
				if (cb < 2 || at + cb > 511 ||
				    !style_hides(st, im_le16(pg + at)))
					continue;
			} else if (!run_gone(st, pg + at + 1, pg[at])) {
				continue;
			}
			if (d->n == d->cap) {
				size_t cap = d->cap ? 2 * d->cap : 16;
				struct span *v =
					realloc(d->v, cap * sizeof(*v));

				if (!v) {
					ret = -ENOMEM;
					break;
				}
				d->v = v;
				d->cap = cap;
			}
			d->v[d->n].lo = im_le32(pg + 4 * r);
			d->v[d->n++].hi = im_le32(pg + 4 * r + 4);
		}
	}
	free(seen);
	return ret;
}

/* Sort the spans and merge those that overlap: a hidden paragraph's holds
 * its runs', which is_deleted() must not find instead. */
static void spans_merge(struct deleted *d)
{
	size_t k = 0;

	if (!d->n)
		return;
	qsort(d->v, d->n, sizeof(*d->v), span_cmp);
	for (size_t i = 1; i < d->n; i++) {
		if (d->v[i].lo <= d->v[k].hi) {
			if (d->v[i].hi > d->v[k].hi)
				d->v[k].hi = d->v[i].hi;
		} else {
			d->v[++k] = d->v[i];
		}
	}
	d->n = k + 1;
}

/* Whether byte @p at of WordDocument is deleted text. */
static bool is_deleted(const struct deleted *d, uint64_t at)
{
	size_t lo = 0, hi = d->n;

	/* The last span that starts at or before @p at. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (d->v[mid].lo <= at)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && at < d->v[lo - 1].hi;
}

/* The piece table: n pieces, piece i holding characters [cp[i], cp[i+1])
 * as the 8 bytes of pcd + 8 * i describe. */
struct pieces {
	const unsigned char *cp, *pcd;
	uint32_t n;
};

/* Characters [from, to) of the document into @p w. */
static int word_range(struct word *w, const struct pieces *pt,
		      const struct deleted *del, const struct im_buf *wd,
		      uint64_t from, uint64_t to, size_t *budget)
{
	for (uint32_t i = 0; i < pt->n && from < to; i++) {
		uint32_t a = im_le32(pt->cp + 4 * (size_t)i);
		uint32_t b = im_le32(pt->cp + 4 * (size_t)i + 4);
		uint32_t fc = im_le32(pt->pcd + 8 * (size_t)i + 2);
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
			uint32_t c = compressed ? s[k] : im_le16(s + 2 * k);
			int ret;

			if (del->n &&
			    is_deleted(del, at + (compressed ? k : 2 * k)))
				continue;
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
		i += 3 + im_le16(p + i + 1);
	}
	if (i >= end || end - i < 5 || p[i] != 0x02)
		return IM_XF_CORRUPT;
	len = im_le32(p + i + 1);
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
	struct deleted del = {0};
	struct word_styles st = {0};
	const unsigned char *f;
	struct im_cfb_entry e;
	struct pieces pt;
	struct im_cfb c;
	size_t lw, fc;
	uint64_t ccp[7], at;
	int ret;

	if (!im_cfb_open(&c, buf, len) || !im_cfb_find(&c, "WordDocument", &e))
		return IM_XF_CORRUPT;
	ret = im_cfb_read(&c, &e, &budget, &wd);
	if (ret)
		goto out;
	ret = IM_XF_CORRUPT;
	f = (const unsigned char *)wd.p;
	if (wd.len < 64 || im_le16(f) != FIB_IDENT ||
	    im_le16(f + 2) < FIB_WORD97)
		goto out;
	if (im_le16(f + 10) & FIB_ENCRYPTED) {
		ret = IM_XF_ENCRYPTED;
		goto out;
	}
	/* FibBase (32 bytes), then counted arrays: fibRgW (csw 16-bit
	 * words), fibRgLw (cslw 32-bit: ccpText at 3, then ccpFtn, ccpHdd,
	 * a reserved count, ccpAtn, ccpEdn, ccpTxbx) and fibRgFcLcb
	 * (cbRgFcLcb pairs of 32-bit offset and length: PlcBteChpx's is
	 * the 13th, the CLX's the 34th). */
	lw = 34 + 2 * (size_t)im_le16(f + 32);
	if (lw + 2 > wd.len || im_le16(f + lw) < 10)
		goto out;
	fc = lw + 2 + 4 * (size_t)im_le16(f + lw);
	lw += 2;
	if (fc + 2 > wd.len || im_le16(f + fc) < 34 || fc + 2 + 34 * 8 > wd.len)
		goto out;
	fc += 2;
	for (int i = 0; i < 7; i++)
		ccp[i] = im_le32(f + lw + 12 + 4 * (size_t)i);
	if (!im_cfb_find(&c, im_le16(f + 10) & FIB_TABLE1 ? "1Table" : "0Table",
			 &e))
		goto out;
	ret = im_cfb_read(&c, &e, &budget, &tbl);
	if (!ret)
		ret = word_pieces(&tbl, im_le32(f + fc + 33 * 8),
				  im_le32(f + fc + 33 * 8 + 4), &pt);
	/* The stylesheet is the 2nd pair, PlcBtePapx the 14th. */
	if (!ret)
		ret = word_styles(&tbl, im_le32(f + fc + 1 * 8),
				  im_le32(f + fc + 1 * 8 + 4), &st);
	if (!ret)
		ret = word_deleted(&wd, &tbl, im_le32(f + fc + 12 * 8),
				   im_le32(f + fc + 12 * 8 + 4), false, &st,
				   &del);
	if (!ret)
		ret = word_deleted(&wd, &tbl, im_le32(f + fc + 13 * 8),
				   im_le32(f + fc + 13 * 8 + 4), true, &st,
				   &del);
	if (!ret)
		spans_merge(&del);
	/* Main text, footnotes, then endnotes and text boxes (after
	 * headers, a reserved count and comments). */
	if (!ret)
		ret = word_range(&w, &pt, &del, &wd, 0, ccp[0], &budget);
	if (!ret && ccp[1])
		ret = word_range(&w, &pt, &del, &wd, ccp[0], ccp[0] + ccp[1],
				 &budget);
	at = ccp[0] + ccp[1] + ccp[2] + ccp[3] + ccp[4];
	if (!ret && ccp[5])
		ret = word_range(&w, &pt, &del, &wd, at, at + ccp[5], &budget);
	at += ccp[5];
	if (!ret && ccp[6])
		ret = word_range(&w, &pt, &del, &wd, at, at + ccp[6], &budget);
	if (!ret && im_buf_putc(out, '\n'))
		ret = -ENOMEM;
	if (!ret && w.max_text && out->len > w.max_text)
		ret = IM_XF_OUTPUT;
out:
	im_buf_release(&wd);
	im_buf_release(&tbl);
	free(del.v);
	free(st.base);
	free(st.vanish);
	return ret;
}

/* ---- Excel ---------------------------------------------------------------- */

/* Records of a BIFF8 Workbook stream: a type and a length (16 bits each),
 * then the data. A record longer than 8224 bytes goes on in CONTINUE
 * records; a string's characters split there go on after a byte that
 * says whether they are 8-bit (the low byte of UTF-16: Latin-1) or 16-bit
 * ([MS-XLS] 2.5.293-2.5.294, 2.4.58). */
#define BIFF_CONTINUE 0x003c
#define BIFF_FILEPASS 0x002f
#define BIFF_SST      0x00fc
#define BIFF_LABEL    0x0204
#define BIFF_RSTRING  0x00d6
#define BIFF_NUMBER   0x0203
#define BIFF_RK	      0x027e
#define BIFF_MULRK    0x00bd
#define BIFF_FORMULA  0x0006
#define BIFF_BOOLERR  0x0205
#define BIFF_STRING   0x0207

struct biff {
	const unsigned char *p;
	size_t len;
	size_t at, end; /* the next byte, and the end of its record */
	struct im_buf *out;
	struct im_buf *nums; /* number cells' terms, a line each */
};

/* A number cell's value as its term, as xlsx's <v> gives it
 * (im_number_term(): 15 significant digits), onto b->nums. */
static int biff_number(struct biff *b, double v)
{
	char dec[40], term[IM_NUMBER_TERM_MAX];
	size_t n;

	/* 17 digits round-trip the double; whatever the locale's decimal
	 * point, im_number_term() wants '.'. */
	snprintf(dec, sizeof(dec), "%.17g", v);
	for (char *c = dec; *c; c++)
		if (*c == ',')
			*c = '.';
	n = im_number_term(dec, strlen(dec), term);
	if (!n)
		return 0; /* NaN, infinity: no number a sheet shows */
	if (im_buf_append(b->nums, term, n) || im_buf_putc(b->nums, '\n'))
		return -ENOMEM;
	return 0;
}

static double biff_double(const unsigned char *p)
{
	uint64_t u = (uint64_t)im_le32(p) | (uint64_t)im_le32(p + 4) << 32;
	double v;

	memcpy(&v, &u, sizeof(v));
	return v;
}

/* An RK value ([MS-XLS] 2.5.217): a 30-bit integer or the top 30 bits of
 * a double, maybe to be divided by 100. */
static double biff_rk(uint32_t rk)
{
	double v;

	if (rk & 2) {
		int32_t i = (int32_t)(rk & ~UINT32_C(3)) / 4;

		v = i;
	} else {
		uint64_t u = (uint64_t)(rk & ~UINT32_C(3)) << 32;

		memcpy(&v, &u, sizeof(v));
	}
	return rk & 1 ? v / 100 : v;
}

/* A boolean cell's text, as xlsx and ods give it. */
static int biff_boolean(struct biff *b, bool v)
{
	return im_buf_append(b->out, v ? "TRUE\n" : "FALSE\n", v ? 5 : 6);
}

/* The value cells of a sheet: numbers (NUMBER, RK, MULRK, a formula's
 * numeric result) become number terms, booleans their word; as xlsx
 * reads a cell's <v>. A formula's string result follows in a STRING
 * record, read as text in xls_records(), as xlsx reads t="str". */
static int biff_cell(struct biff *b, unsigned type, size_t n)
{
	const unsigned char *d = b->p + b->at;
	int ret = 0;

	switch (type) {
	case BIFF_NUMBER:
		if (n >= 14)
			ret = biff_number(b, biff_double(d + 6));
		break;
	case BIFF_RK:
		if (n >= 10)
			ret = biff_number(b, biff_rk(im_le32(d + 6)));
		break;
	case BIFF_MULRK:
		/* rw, colFirst, then (ixfe, RK) per cell, then colLast. */
		for (size_t at = 4; !ret && n >= 6 && at + 6 <= n - 2; at += 6)
			ret = biff_number(b, biff_rk(im_le32(d + at + 2)));
		break;
	case BIFF_FORMULA:
		if (n < 14)
			break;
		if (im_le16(d + 12) != 0xffff)
			ret = biff_number(b, biff_double(d + 6));
		else if (d[6] == 1) /* a boolean result */
			ret = biff_boolean(b, d[8] != 0);
		break;
	case BIFF_BOOLERR:
		if (n >= 8 && !d[7]) /* not an error */
			ret = biff_boolean(b, d[6] != 0);
		break;
	}
	return ret;
}

/* Into the CONTINUE record that follows the current one, if any. */
static bool biff_continue(struct biff *b)
{
	size_t n;

	if (b->end + 4 > b->len || im_le16(b->p + b->end) != BIFF_CONTINUE)
		return false;
	n = im_le16(b->p + b->end + 2);
	if (n > b->len - b->end - 4)
		return false;
	b->at = b->end + 4;
	b->end = b->at + n;
	return true;
}

/* @p n bytes into @p to (NULL: skipped), across CONTINUE records. */
static bool biff_bytes(struct biff *b, unsigned char *to, size_t n)
{
	while (n) {
		size_t k = b->end - b->at;

		if (!k && !biff_continue(b))
			return false;
		k = b->end - b->at;
		if (k > n)
			k = n;
		if (to) {
			memcpy(to, b->p + b->at, k);
			to += k;
		}
		b->at += k;
		n -= k;
	}
	return true;
}

/* @p cch characters, 16-bit if @p wide, then a newline. */
static int biff_chars(struct biff *b, size_t cch, bool wide)
{
	uint32_t high = 0;
	int ret = 0;

	while (cch && !ret) {
		size_t k;

		if (b->at == b->end) {
			if (!biff_continue(b) || b->at == b->end)
				return IM_XF_CORRUPT;
			wide = b->p[b->at++] & 1;
			continue;
		}
		k = (b->end - b->at) / (wide ? 2 : 1);
		if (!k)
			return IM_XF_CORRUPT;
		if (k > cch)
			k = cch;
		for (size_t i = 0; i < k && !ret; i++)
			ret = wide ? put_unit(b->out, &high,
					      im_le16(b->p + b->at + 2 * i))
				   : im_buf_put_cp(b->out, b->p[b->at + i]);
		b->at += wide ? 2 * k : k;
		cch -= k;
	}
	return ret ? ret : im_buf_putc(b->out, '\n');
}

/* One string of the SST (XLUnicodeRichExtendedString): its characters,
 * then its formatting runs and phonetic data, skipped. */
static int biff_sst_string(struct biff *b)
{
	unsigned char h[3], v[4];
	uint32_t runs = 0, ext = 0;
	int ret;

	if (!biff_bytes(b, h, 3))
		return IM_XF_CORRUPT;
	if (h[2] & 0x08) {
		if (!biff_bytes(b, v, 2))
			return IM_XF_CORRUPT;
		runs = im_le16(v);
	}
	if (h[2] & 0x04) {
		if (!biff_bytes(b, v, 4))
			return IM_XF_CORRUPT;
		ext = im_le32(v);
	}
	ret = biff_chars(b, im_le16(h), h[2] & 0x01);
	if (!ret && (!biff_bytes(b, NULL, 4 * (size_t)runs) ||
		     !biff_bytes(b, NULL, ext)))
		ret = IM_XF_CORRUPT;
	return ret;
}

/*
 * The text of a workbook: the shared string table (every string of every
 * sheet, once, as xlsx's sharedStrings.xml holds them) and the strings of
 * cells that hold their own (LABEL, RSTRING, a formula's STRING), one a
 * line; booleans as
 * words and each number cell's value as a term (biff_cell()), as xlsx
 * reads them. Sheet names are not read, as xlsx does not read them.
 */
static int xls_records(struct biff *b, size_t max_text)
{
	size_t pos = 0;
	int ret = 0;

	if (b->len < 8 || im_le16(b->p) != BIFF_BOF ||
	    im_le16(b->p + 4) != BIFF8)
		return IM_XF_CORRUPT;
	while (!ret && pos + 4 <= b->len) {
		unsigned type = im_le16(b->p + pos),
			 n = im_le16(b->p + pos + 2);
		size_t data = pos + 4;

		if (n > b->len - data)
			break; /* a record cut short at the end: what came
				  before is read */
		b->at = data;
		b->end = data + n;
		switch (type) {
		case BIFF_FILEPASS: return IM_XF_ENCRYPTED;
		case BIFF_SST: {
			unsigned char h[8];
			uint32_t count;

			if (!biff_bytes(b, h, 8))
				return IM_XF_CORRUPT;
			/* A table with fewer strings than it counts ends
			 * where its records do (Excel reads such files). */
			count = im_le32(h + 4);
			for (uint32_t i = 0; i < count && !ret; i++) {
				if (b->at == b->end && !biff_continue(b))
					break;
				ret = biff_sst_string(b);
			}
			break;
		}
		case BIFF_NUMBER:
		case BIFF_RK:
		case BIFF_MULRK:
		case BIFF_FORMULA:
		case BIFF_BOOLERR:
			if (b->nums)
				ret = biff_cell(b, type, n);
			break;
		case BIFF_STRING: {
			unsigned char h[3];

			if (!biff_bytes(b, h, 3))
				return IM_XF_CORRUPT;
			ret = biff_chars(b, im_le16(h), h[2] & 0x01);
			break;
		}
		case BIFF_LABEL:
		case BIFF_RSTRING: {
			unsigned char h[9];

			if (!biff_bytes(b, h, 9))
				return IM_XF_CORRUPT;
			ret = biff_chars(b, im_le16(h + 6), h[8] & 0x01);
			break;
		}
		}
		if (!ret && max_text &&
		    b->out->len + (b->nums ? b->nums->len : 0) > max_text)
			ret = IM_XF_OUTPUT;
		pos = data + n;
	}
	return ret;
}

int im_xls_text(const char *buf, size_t len, const struct im_extract_opts *o,
		struct im_buf *out)
{
	size_t budget = o->max_unpacked ? o->max_unpacked : SIZE_MAX;
	struct im_buf wb = {0}, nums = {0};
	struct im_cfb_entry e;
	struct im_cfb c;
	int ret;

	if (!im_cfb_open(&c, buf, len) || !im_cfb_find(&c, "Workbook", &e))
		return IM_XF_CORRUPT;
	ret = im_cfb_read(&c, &e, &budget, &wb);
	if (!ret) {
		struct biff b = {.p = (const unsigned char *)wb.p,
				 .len = wb.len,
				 .out = out,
				 .nums = &nums};

		ret = xls_records(&b, o->max_text);
		if (!ret)
			ret = im_extract_put_numbers(out, &nums);
		/* The numbers' opening line is not counted by xls_records(). */
		if (!ret && o->max_text && out->len > o->max_text)
			ret = IM_XF_OUTPUT;
	}
	im_buf_release(&nums);
	im_buf_release(&wb);
	return ret;
}

/* ---- PowerPoint ------------------------------------------------------------ */

/* Records of the PowerPoint Document stream ([MS-PPT] 2.3.1): 16 bits of
 * version (low 4 bits; 0xf: a container of records) and instance, 16 of
 * type, 32 of length. OfficeArt drawings inside slides use the same
 * header ([MS-ODRAW]). */
#define PPT_MAIN_MASTER	       0x03f8
#define PPT_HANDOUT	       0x0fc9
#define PPT_SLIDE_LIST	       0x0ff0
#define PPT_TEXT_CHARS	       0x0fa0
#define PPT_TEXT_BYTES	       0x0fa8
#define PPT_CRYPT_SESSION      0x2f14
#define PPT_USER_EDIT	       0x0ff5
#define PPT_PERSIST_DIR	       0x1772
#define PPT_SLIDE_LIST_MASTERS 1
/* CurrentUserAtom.headerToken of an encrypted presentation. */
#define PPT_TOKEN_ENCRYPTED 0xf3d1c4dfU
/* Incremental saves followed back, at most. */
#define PPT_MAX_EDITS 4096

/* The characters of a text atom, a newline for its paragraph and line
 * ends (0x0d, 0x0b), then a newline. */
static int ppt_text(const unsigned char *p, size_t n, bool wide,
		    struct im_buf *out)
{
	uint32_t high = 0;
	int ret = 0;

	for (size_t i = 0; i < n && !ret; i++) {
		uint32_t c = wide ? im_le16(p + 2 * i) : p[i];

		if (c == 0x0d || c == 0x0b)
			ret = im_buf_putc(out, '\n');
		else if (c == 0x09)
			ret = im_buf_putc(out, '\t');
		else if (c >= 0x20)
			ret = wide ? put_unit(out, &high, c)
				   : im_buf_put_cp(out, c);
	}
	return ret ? ret : im_buf_putc(out, '\n');
}

/*
 * The text atoms of the records in s[from, to): in the slides' text lists
 * and their drawings and in the notes, but not in the masters and handout
 * (a template's placeholder prompts, which pptx does not read either),
 * with a stack of the containers open; one nested deeper than
 * IM_EXTRACT_XML_DEPTH fails (nesting), a top-level record longer than
 * the object is corrupt.
 */
static int ppt_walk(const struct im_buf *s, size_t from, size_t to,
		    size_t max_text, struct im_buf *out)
{
	const unsigned char *p = (const unsigned char *)s->p;
	size_t end[IM_EXTRACT_XML_DEPTH];
	bool skip[IM_EXTRACT_XML_DEPTH];
	size_t pos = from, depth = 0;
	int ret = 0;

	while (!ret && pos + 8 <= to) {
		unsigned ver = im_le16(p + pos) & 0xf,
			 inst = im_le16(p + pos) >> 4;
		unsigned type = im_le16(p + pos + 2);
		size_t n = im_le32(p + pos + 4), body = pos + 8;
		size_t limit = depth ? end[depth - 1] : to;
		bool hide = depth && skip[depth - 1];

		if (body > limit || n > limit - body) {
			if (!depth)
				return IM_XF_CORRUPT;
			/* PowerPoint 2007 marks some atoms of opaque data
			 * (round-trip blobs) as containers: one whose
			 * content does not parse as records is passed
			 * over. */
			pos = end[--depth];
			continue;
		}
		if (type == PPT_CRYPT_SESSION)
			return IM_XF_ENCRYPTED;
		if (ver == 0xf) {
			if (depth == IM_EXTRACT_XML_DEPTH)
				return IM_XF_NESTING;
			end[depth] = body + n;
			skip[depth++] = hide || type == PPT_MAIN_MASTER ||
					type == PPT_HANDOUT ||
					(type == PPT_SLIDE_LIST &&
					 inst == PPT_SLIDE_LIST_MASTERS);
			pos = body;
		} else {
			if (!hide &&
			    (type == PPT_TEXT_CHARS || type == PPT_TEXT_BYTES))
				ret = ppt_text(p + body,
					       type == PPT_TEXT_CHARS ? n / 2
								      : n,
					       type == PPT_TEXT_CHARS, out);
			pos = body + n;
		}
		while (depth && pos >= end[depth - 1])
			depth--;
		if (!ret && max_text && out->len > max_text)
			ret = IM_XF_OUTPUT;
	}
	return ret;
}

/* A persist object: its id and where its record starts. */
struct persist {
	uint32_t id, off;
	uint32_t order; /* which edit listed it: 0 the latest */
};

static int persist_cmp(const void *a, const void *b)
{
	const struct persist *x = a, *y = b;

	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

/*
 * The objects of the presentation as its last save left them ([MS-PPT]
 * 2.1.2): the Current User stream points at the last UserEditAtom, each
 * names its persist directory (ids and the offsets of their records) and
 * the edit before it; an id takes the offset of the latest edit that
 * lists it. The stream is not a plain run of records: what an
 * incremental save replaced stays in it, and so can slack. Fills
 * @p ps / *@p n (sorted by id, one offset an id). @return 0, or 1 when
 * the chain does not parse (the caller walks the stream instead),
 * IM_XF_ENCRYPTED, or -ENOMEM.
 */
static int ppt_persist(const struct im_buf *cur, const struct im_buf *s,
		       struct persist **ps, size_t *n)
{
	const unsigned char *p = (const unsigned char *)s->p;
	const unsigned char *c = (const unsigned char *)cur->p;
	size_t cap = 0, k = 0, scanned = 0;
	uint32_t off;

	*ps = NULL;
	*n = 0;
	if (cur->len < 20)
		return 1;
	if (im_le32(c + 12) == PPT_TOKEN_ENCRYPTED)
		return IM_XF_ENCRYPTED;
	off = im_le32(c + 16);
	for (uint32_t edit = 0; edit < PPT_MAX_EDITS; edit++) {
		size_t dir, dn;

		if ((size_t)off + 28 > s->len ||
		    im_le16(p + off + 2) != PPT_USER_EDIT)
			return 1;
		dir = im_le32(p + off + 20);
		if (dir + 8 > s->len || im_le16(p + dir + 2) != PPT_PERSIST_DIR)
			return 1;
		dn = im_le32(p + dir + 4);
		/* Directories of a valid file do not overlap: reading more
		 * than the stream holds is a chain gone round. */
		scanned += dn;
		if (dn > s->len - dir - 8 || scanned > s->len)
			return 1;
		for (size_t at = dir + 8; at + 4 <= dir + 8 + dn;) {
			uint32_t h = im_le32(p + at), id = h & 0xfffff;
			uint32_t count = h >> 20;

			at += 4;
			for (uint32_t j = 0;
			     j < count && at + 4 <= dir + 8 + dn;
			     j++, at += 4) {
				if (k == cap) {
					size_t nc = cap ? 2 * cap : 64;
					struct persist *v =
						realloc(*ps, nc * sizeof(*v));

					if (!v)
						return -ENOMEM;
					*ps = v;
					cap = nc;
				}
				(*ps)[k++] = (struct persist){
					id + j, im_le32(p + at), edit};
			}
		}
		/* offsetLastEdit: an earlier save, earlier in the stream */
		if (!im_le32(p + off + 16) || im_le32(p + off + 16) >= off)
			break;
		off = im_le32(p + off + 16);
	}
	if (k)
		qsort(*ps, k, sizeof(**ps), persist_cmp);
	for (size_t i = 0; i < k; i++)
		if (!*n || (*ps)[*n - 1].id != (*ps)[i].id)
			(*ps)[(*n)++] = (*ps)[i];
	return 0;
}

/* The text of a presentation: its live objects' records, each walked whole
 * (ppt_walk()); without a persist chain that parses, the whole stream in
 * order. */
static int ppt_records(const struct im_buf *cur, const struct im_buf *s,
		       size_t max_text, struct im_buf *out)
{
	const unsigned char *p = (const unsigned char *)s->p;
	struct persist *ps;
	size_t n;
	int ret = ppt_persist(cur, s, &ps, &n);

	if (ret == 1) {
		free(ps);
		return ppt_walk(s, 0, s->len, max_text, out);
	}
	for (size_t i = 0; i < n && !ret; i++) {
		size_t at = ps[i].off;

		if (at + 8 > s->len || im_le32(p + at + 4) > s->len - at - 8)
			ret = IM_XF_CORRUPT;
		else
			ret = ppt_walk(s, at, at + 8 + im_le32(p + at + 4),
				       max_text, out);
	}
	free(ps);
	return ret;
}

int im_ppt_text(const char *buf, size_t len, const struct im_extract_opts *o,
		struct im_buf *out)
{
	size_t budget = o->max_unpacked ? o->max_unpacked : SIZE_MAX;
	struct im_buf doc = {0}, cur = {0};
	struct im_cfb_entry e;
	struct im_cfb c;
	int ret;

	if (!im_cfb_open(&c, buf, len) ||
	    !im_cfb_find(&c, "PowerPoint Document", &e))
		return IM_XF_CORRUPT;
	ret = im_cfb_read(&c, &e, &budget, &doc);
	if (!ret && im_cfb_find(&c, "Current User", &e))
		ret = im_cfb_read(&c, &e, &budget, &cur);
	if (!ret)
		ret = ppt_records(&cur, &doc, o->max_text, out);
	im_buf_release(&doc);
	im_buf_release(&cur);
	return ret;
}
