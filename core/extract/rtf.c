/**
 * @file rtf.c
 * RTF to text: what a reader of the document sees, not the control words
 * around it. One forward pass that never backs up; every step reads only
 * bytes before the end of the buffer.
 *
 *   - Groups { } nest; each keeps the state its parent had (whether its text
 *     is skipped, the \uc count) and gives it back when it closes. A group
 *     that never closes ends with the file; a '}' too many is ignored.
 *     Groups nested deeper than RTF_DEPTH fail the file (IM_XF_NESTING, as
 *     XML does): no document a program wrote nests that deep, and a file
 *     that does is made to cost a reader something.
 *   - A control word is '\' and letters, an optional signed number (digits
 *     past the tenth are read but do not count: the value saturates) and
 *     one space that is part of it. Paragraph, line, section, page and row
 *     ends become a newline; \tab, \cell and the special spaces a space;
 *     \emdash, \lquote and the like their characters. Every other word
 *     (formatting) vanishes.
 *   - Destinations that are not text a reader sees skip their group whole:
 *     any {\* ...}, and the tables and metadata (fonttbl, colortbl,
 *     stylesheet, info, listtable, rsidtbl, themedata, datastore, ...),
 *     pictures and objects, field instructions (\fldinst; the \fldrslt a
 *     reader sees is kept), bookmarks, index and contents entries, list
 *     numbers (\listtext, \pntext: the docx extractor leaves numbering out
 *     too) and headers and footers: a reader sees those on every page, but
 *     they are a template's letterhead more than the document's own words,
 *     and docx and odt leave them out (the same text must give the same
 *     terms in each format). Deleted revisions (\deleted) and hidden text
 *     (\v) are skipped up to \plain or their "0" form, as docx leaves
 *     deleted runs out.
 *   - Footnotes and endnotes (\footnote) are text, each on lines of its
 *     own, as docx reads them, even marked "{\*" as LibreOffice writes them.
 *   - A shape's properties (\shpinst) are skipped but for its text box
 *     (\shptxt), which a reader sees, as docx reads a text box's text; its
 *     result for older readers (\shprslt, a picture or the same text as a
 *     frame) is skipped, so that the text is read once.
 *   - \binN skips N raw bytes (at most what is left).
 *   - \'hh is a byte in the document's code page (\ansicpgN; windows-1252
 *     by default, \mac, \pc and \pca theirs), as is any other text byte;
 *     runs of them are converted together (a double-byte code page's
 *     character spans two), windows-1252 directly, others through iconv,
 *     a byte it cannot read becoming U+FFFD. A code page iconv does not
 *     know is read as windows-1252.
 *   - \uN is the UTF-16 unit N (signed 16-bit), the \ucN (default 1)
 *     characters after it the fallback for older readers, skipped; a
 *     surrogate pair is joined, a lone surrogate becomes U+FFFD.
 * Fonts' own charsets (\fcharset in the font table) are not followed:
 * Word writes non-Latin text as \uN, which needs none.
 */
#include <errno.h>
#include <iconv.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "extract_internal.h"

/** Groups nested deeper than this fail with IM_XF_NESTING. */
#define RTF_DEPTH IM_EXTRACT_XML_DEPTH

/* A control word's name longer than this is no word we know (the longest
 * we look for is 18 letters); it is read whole all the same. */
#define RTF_WORD_MAX 32

/* What a group inherits from its parent and restores on close. */
struct rtf_group {
	bool skip;   /* a destination that is no text */
	bool hidden; /* \v or \deleted: skipped up to \plain */
	bool shape;  /* in a shape's \shpinst: a \shptxt group is text */
	bool note;   /* this group is a \footnote: a line of its own */
	uint8_t uc;  /* fallback characters after \uN */
};

struct rtf {
	const char *s;
	size_t len, i;
	size_t max_text;
	struct im_buf *out;

	/* g[0] is outside every group, g[1] the document's. */
	struct rtf_group g[RTF_DEPTH + 1];
	unsigned depth;	   /* g[depth] is the current group's state */
	bool star;	   /* "{\*": the group is an ignorable destination */
	unsigned fallback; /* characters still to skip after a \uN */
	uint32_t high;	   /* a high surrogate waiting for its low one */

	unsigned cp;	   /* the code page of text bytes */
	struct im_buf raw; /* text bytes not converted yet, in cp */
	iconv_t cd;	   /* to UTF-8 from cd_cp, or (iconv_t)-1 */
	unsigned cd_cp;	   /* what cd converts from; 0: not opened */
};

/* ---- Output -------------------------------------------------------------- */

/* The pending text bytes, converted from the code page, onto out. */
static int convert(struct rtf *r)
{
	int ret = 0;

	if (r->cp != 1252 && r->cp != 65001 && r->cd_cp != r->cp) {
		char name[16];

		if (r->cd != (iconv_t)-1)
			iconv_close(r->cd);
		snprintf(name, sizeof(name),
			 r->cp == 10000 ? "MACINTOSH" : "CP%u", r->cp);
		r->cd = iconv_open("UTF-8", name);
		r->cd_cp = r->cp;
	}
	if (r->cp == 65001)
		ret = im_buf_append(r->out, r->raw.p, r->raw.len);
	else if (r->cp != 1252 && r->cd != (iconv_t)-1)
		ret = im_iconv_append(r->cd, r->raw.p, r->raw.len, r->out);
	else
		for (size_t k = 0; k < r->raw.len && !ret; k++) {
			unsigned char c = (unsigned char)r->raw.p[k];

			if (c < 0x80)
				ret = im_buf_putc(r->out, (char)c);
			else
				ret = im_buf_put_cp(
					r->out,
					c < 0xa0 ? im_cp1252_high[c - 0x80]
						 : c);
		}
	r->raw.len = 0;
	return ret;
}

/* What is pending onto out; IM_XF_OUTPUT once out has outgrown its cap. */
static int flush(struct rtf *r)
{
	int ret = r->raw.len ? convert(r) : 0;

	if (!ret && r->max_text && r->out->len > r->max_text)
		return IM_XF_OUTPUT;
	return ret;
}

/* Whether text at this point is seen by a reader. */
static bool shown(const struct rtf *r)
{
	return !r->g[r->depth].skip && !r->g[r->depth].hidden;
}

/* A high surrogate that no low one followed is U+FFFD. */
static int settle(struct rtf *r)
{
	int ret;

	if (!r->high)
		return 0;
	r->high = 0;
	ret = flush(r);
	return ret ? ret : im_buf_put_cp(r->out, 0xfffd);
}

/* One code point of text, after what is pending. */
static int put_cp(struct rtf *r, uint32_t cp)
{
	int ret = settle(r);

	if (!ret)
		ret = flush(r);
	return ret ? ret : im_buf_put_cp(r->out, cp);
}

/* A text byte in the code page, unless it is a \uN's fallback. */
static int put_byte(struct rtf *r, char c)
{
	if (r->fallback) {
		r->fallback--;
		return 0;
	}
	if (!shown(r))
		return 0;
	int ret = settle(r);

	return ret ? ret : im_buf_putc(&r->raw, c);
}

/* The UTF-16 unit of a \uN: joined with a high surrogate before it. */
static int put_unit(struct rtf *r, uint32_t u)
{
	uint32_t high = r->high;
	int ret;

	if (u >= 0xdc00 && u < 0xe000 && high) {
		r->high = 0;
		return put_cp(r,
			      0x10000 + ((high - 0xd800) << 10) + (u - 0xdc00));
	}
	ret = settle(r);
	if (ret)
		return ret;
	if (u >= 0xd800 && u < 0xdc00) {
		r->high = u;
		return 0;
	}
	return put_cp(r, u >= 0xdc00 && u < 0xe000 ? 0xfffd : u);
}

/* ---- Control words ------------------------------------------------------- */

enum rtf_kind {
	K_DEST,	  /* skip the group */
	K_NL,	  /* a newline */
	K_SPACE,  /* a space */
	K_CHAR,	  /* the code point in .cp */
	K_U,	  /* \uN */
	K_UC,	  /* \ucN */
	K_BIN,	  /* \binN */
	K_CP,	  /* \ansicpgN */
	K_CPDEF,  /* \mac, \pc, \pca: the code page in .cp */
	K_HIDE,	  /* \v, \deleted: hidden unless N is 0 */
	K_PLAIN,  /* \plain: not hidden */
	K_SHAPE,  /* \shpinst: skipped, but for its \shptxt */
	K_SHPTXT, /* \shptxt: a text box's text, shown */
	K_NOTE,	  /* \footnote: a footnote or endnote, shown */
};

/* clang-format off */
static const struct rtf_word {
	const char *name;
	enum rtf_kind kind;
	uint32_t cp;
} words[] = {
	{"annotation", K_DEST, 0},	{"atnauthor", K_DEST, 0},
	{"atnid", K_DEST, 0},		{"atrfend", K_DEST, 0},
	{"atrfstart", K_DEST, 0},	{"author", K_DEST, 0},
	{"bkmkend", K_DEST, 0},		{"bkmkstart", K_DEST, 0},
	{"colorschememapping", K_DEST, 0}, {"colortbl", K_DEST, 0},
	{"comment", K_DEST, 0},		{"datastore", K_DEST, 0},
	{"doccomm", K_DEST, 0},		{"falt", K_DEST, 0},
	{"filetbl", K_DEST, 0},		{"fldinst", K_DEST, 0},
	{"fonttbl", K_DEST, 0},		{"footer", K_DEST, 0},
	{"footerf", K_DEST, 0},		{"footerl", K_DEST, 0},
	{"footerr", K_DEST, 0},		{"footnote", K_NOTE, 0},
	{"ftncn", K_DEST, 0},
	{"ftnsep", K_DEST, 0},		{"ftnsepc", K_DEST, 0},
	{"generator", K_DEST, 0},	{"header", K_DEST, 0},
	{"headerf", K_DEST, 0},		{"headerl", K_DEST, 0},
	{"headerr", K_DEST, 0},		{"info", K_DEST, 0},
	{"keywords", K_DEST, 0},	{"latentstyles", K_DEST, 0},
	{"listoverridetable", K_DEST, 0}, {"listtable", K_DEST, 0},
	{"listtext", K_DEST, 0},	{"nonshppict", K_DEST, 0},
	{"object", K_DEST, 0},		{"operator", K_DEST, 0},
	{"pgdsctbl", K_DEST, 0},	{"pict", K_DEST, 0},
	{"pntext", K_DEST, 0},		{"pntxta", K_DEST, 0},
	{"shpinst", K_SHAPE, 0},	{"shprslt", K_DEST, 0},
	{"shptxt", K_SHPTXT, 0},
	{"pntxtb", K_DEST, 0},		{"revtbl", K_DEST, 0},
	{"rsidtbl", K_DEST, 0},		{"stylesheet", K_DEST, 0},
	{"subject", K_DEST, 0},		{"tc", K_DEST, 0},
	{"template", K_DEST, 0},	{"themedata", K_DEST, 0},
	{"title", K_DEST, 0},		{"xe", K_DEST, 0},
	{"xmlnstbl", K_DEST, 0},
	{"line", K_NL, 0},		{"page", K_NL, 0},
	{"par", K_NL, 0},		{"row", K_NL, 0},
	{"sect", K_NL, 0},		{"nestrow", K_NL, 0},
	{"cell", K_SPACE, 0},		{"nestcell", K_SPACE, 0},
	{"tab", K_SPACE, 0},		{"emspace", K_SPACE, 0},
	{"enspace", K_SPACE, 0},	{"qmspace", K_SPACE, 0},
	{"emdash", K_CHAR, 0x2014},	{"endash", K_CHAR, 0x2013},
	{"lquote", K_CHAR, 0x2018},	{"rquote", K_CHAR, 0x2019},
	{"ldblquote", K_CHAR, 0x201c},	{"rdblquote", K_CHAR, 0x201d},
	{"bullet", K_CHAR, 0x2022},
	{"u", K_U, 0},			{"uc", K_UC, 0},
	{"bin", K_BIN, 0},		{"ansicpg", K_CP, 0},
	{"ansi", K_CPDEF, 1252},	{"mac", K_CPDEF, 10000},
	{"pc", K_CPDEF, 437},		{"pca", K_CPDEF, 850},
	{"v", K_HIDE, 0},		{"deleted", K_HIDE, 0},
	{"plain", K_PLAIN, 0},
};
/* clang-format on */

static const struct rtf_word *word_of(const char *name, size_t n)
{
	for (size_t k = 0; k < sizeof(words) / sizeof(words[0]); k++)
		if (words[k].name[0] == name[0] && strlen(words[k].name) == n &&
		    !memcmp(words[k].name, name, n))
			return &words[k];
	return NULL;
}

/* Saturates at a value no parameter needs, so that no sum overflows. */
#define RTF_PARAM_MAX 1000000000

/* What the control word @p w with parameter @p param (@p has_param) does. */
static int control_word(struct rtf *r, const struct rtf_word *w, int64_t param,
			bool has_param)
{
	struct rtf_group *g = &r->g[r->depth];
	bool is_text =
		w->kind == K_NL || w->kind == K_SPACE || w->kind == K_CHAR;

	if (is_text && r->fallback) {
		r->fallback--;
		return 0;
	}
	switch (w->kind) {
	case K_DEST: g->skip = true; return 0;
	case K_NL: return shown(r) ? put_cp(r, '\n') : 0;
	case K_SPACE: return shown(r) ? put_cp(r, ' ') : 0;
	case K_CHAR: return shown(r) ? put_cp(r, w->cp) : 0;
	case K_U: {
		int ret = 0;

		if (!has_param)
			return 0;
		if (shown(r))
			ret = put_unit(r, (uint32_t)(param < 0 ? param + 65536
							       : param) &
						  0xffff);
		r->fallback = g->uc;
		return ret;
	}
	case K_UC:
		g->uc = has_param && param >= 0
				? (uint8_t)(param < 255 ? param : 255)
				: 1;
		return 0;
	case K_BIN: {
		if (has_param && param > 0)
			r->i = (uint64_t)param < r->len - r->i
				       ? r->i + (size_t)param
				       : r->len;
		return 0;
	}
	case K_CP:
	case K_CPDEF: {
		int ret = flush(r);
		int64_t cp = w->kind == K_CP ? param : (int64_t)w->cp;

		if (w->kind == K_CP && !has_param)
			return ret;
		r->cp = cp > 0 && cp < 65536 ? (unsigned)cp : 1252;
		return ret;
	}
	case K_HIDE: g->hidden = !has_param || param != 0; return 0;
	case K_PLAIN: g->hidden = false; return 0;
	case K_SHAPE: g->skip = g->shape = true; return 0;
	case K_SHPTXT:
		if (g->shape)
			g->skip = false;
		return 0;
	case K_NOTE:
		/* Text, as docx's footnotes.xml is, though LibreOffice marks
		 * it "{\*" as if older readers could skip it: shown where its
		 * parent is. */
		g->skip = r->depth && r->g[r->depth - 1].skip;
		g->note = true;
		return shown(r) ? put_cp(r, '\n') : 0;
	}
	return 0;
}

/* Read the control word at s[i] ('\' then a letter); i moves past it. */
static int read_word(struct rtf *r)
{
	const char *s = r->s;
	size_t start = ++r->i, n;
	int64_t param = 0;
	bool neg = false, has_param = false;
	const struct rtf_word *w;

	while (r->i < r->len && im_ascii_alpha(s[r->i]))
		r->i++;
	n = r->i - start;
	if (r->i < r->len && s[r->i] == '-' && r->i + 1 < r->len &&
	    im_ascii_digit(s[r->i + 1])) {
		neg = true;
		r->i++;
	}
	while (r->i < r->len && im_ascii_digit(s[r->i])) {
		if (param < RTF_PARAM_MAX)
			param = param * 10 + (s[r->i] - '0');
		has_param = true;
		r->i++;
	}
	if (neg)
		param = -param;
	if (r->i < r->len && s[r->i] == ' ')
		r->i++;
	if (r->star) {
		/* "{\*\word": a destination an older reader may skip. */
		r->star = false;
		r->g[r->depth].skip = true;
	}
	w = n <= RTF_WORD_MAX ? word_of(s + start, n) : NULL;
	return w ? control_word(r, w, param, has_param) : 0;
}

static int hex_digit(char c)
{
	if (im_ascii_digit(c))
		return c - '0';
	c = (char)(c | 0x20);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Read the control symbol at s[i] ('\' then no letter). */
static int read_symbol(struct rtf *r)
{
	const char *s = r->s;
	char c;

	if (++r->i == r->len)
		return 0;
	c = s[r->i++];
	switch (c) {
	case '\'': {
		int h = r->i < r->len ? hex_digit(s[r->i]) : -1;
		int l = r->i + 1 < r->len ? hex_digit(s[r->i + 1]) : -1;

		if (h < 0 || l < 0)
			return 0;
		r->i += 2;
		return put_byte(r, (char)(h << 4 | l));
	}
	case '\\':
	case '{':
	case '}': return put_byte(r, c);
	case '*': r->star = true; return 0;
	case '~': return put_byte(r, ' ');
	case '_': return put_byte(r, '-');
	case '\n':
	case '\r':
		if (r->fallback) {
			r->fallback--;
			return 0;
		}
		return shown(r) ? put_cp(r, '\n') : 0;
	default: return 0; /* \- (optional hyphen), \: and the rest */
	}
}

/* ---- The document -------------------------------------------------------- */

static int parse(struct rtf *r)
{
	const char *s = r->s;
	int ret = 0;

	while (r->i < r->len && !ret) {
		char c = s[r->i];

		switch (c) {
		case '{':
			if (r->depth == RTF_DEPTH)
				return IM_XF_NESTING;
			r->g[r->depth + 1] = r->g[r->depth];
			r->depth++;
			r->g[r->depth].note = false;
			r->star = false;
			r->fallback = 0;
			r->i++;
			break;
		case '}':
			/* The body's words after a note are not its last one's. */
			if (r->g[r->depth].note && shown(r))
				ret = put_cp(r, '\n');
			if (r->depth)
				r->depth--;
			r->star = false;
			r->fallback = 0;
			r->i++;
			break;
		case '\\':
			if (r->i + 1 < r->len && im_ascii_alpha(s[r->i + 1]))
				ret = read_word(r);
			else
				ret = read_symbol(r);
			break;
		case '\r':
		case '\n': r->i++; break;
		case '\t':
			r->i++;
			if (shown(r))
				ret = put_cp(r, ' ');
			break;
		default: {
			/* A run of plain text at once. */
			size_t j = r->i + 1;

			while (j < r->len && s[j] != '{' && s[j] != '}' &&
			       s[j] != '\\' && s[j] != '\r' && s[j] != '\n' &&
			       s[j] != '\t')
				j++;
			r->star = false;
			if (r->fallback) {
				size_t k = j - r->i < r->fallback ? j - r->i
								  : r->fallback;

				r->fallback -= (unsigned)k;
				r->i += k;
				break;
			}
			if (shown(r))
				ret = settle(r);
			if (shown(r) && !ret)
				ret = im_buf_append(&r->raw, s + r->i,
						    j - r->i);
			r->i = j;
		}
		}
	}
	if (!ret)
		ret = settle(r);
	return ret ? ret : flush(r);
}

int im_rtf_text(const char *s, size_t len, size_t max_text, struct im_buf *out)
{
	struct rtf *r = calloc(1, sizeof(*r));
	int ret;

	if (!r)
		return -ENOMEM;
	r->s = s;
	r->len = len;
	r->max_text = max_text;
	r->out = out;
	r->g[0].uc = 1;
	r->cp = 1252;
	r->cd = (iconv_t)-1;
	ret = parse(r);
	if (r->cd != (iconv_t)-1)
		iconv_close(r->cd);
	im_buf_release(&r->raw);
	free(r);
	return ret;
}
