/**
 * @file zipdoc.c
 * Documents in ZIP containers (OOXML: docx, xlsx, pptx; ODF: odt, ods, odp;
 * EPUB) and compressed single files (gzip, bzip2, xz), through libarchive,
 * with the XML read by expat.
 *
 * One pass over the archive collects the entries a format needs (decided by
 * name), counting every byte unpacked against max_unpacked, so a zip bomb
 * stops at that many bytes (IM_XF_EXPANSION) whatever its ratio. An
 * encrypted entry fails the document (IM_XF_ENCRYPTED).
 *
 * XML: the parser is told nothing of external entities (expat then never
 * loads them) and stops at the first entity declaration (IM_XF_ENTITIES):
 * office formats never declare entities, and refusing them is the only
 * complete answer to entity expansion ("billion laughs"). Elements nested
 * deeper than IM_EXTRACT_XML_DEPTH stop it too (IM_XF_NESTING). Names are
 * matched by their local part, so any namespace prefix works.
 *
 * What each format gives:
 *   - docx: word/document.xml, then footnotes and endnotes: w:t runs, a
 *     newline per paragraph, a space for tabs and breaks. Deleted text
 *     (w:delText), hidden runs (w:vanish, or their character or paragraph
 *     style's in word/styles.xml) and field codes are not text;
 *     headers, footers and comments are left out (templates repeat them
 *     across documents). A numbered paragraph (word/numbering.xml) starts
 *     with its number, as Word shows it and a .txt types it.
 *   - xlsx: shared strings and inline strings of every sheet, one per line;
 *     then each number cell's value (<v> of a cell of type n), as
 *     im_number_term() writes it, after IM_EXTRACT_NUMBERS.
 *   - pptx: slides, then notes, in slide-number order: a:t runs, a newline
 *     per paragraph; a numbered paragraph (a:buAutoNum) starts with its
 *     number, as PowerPoint shows it.
 *   - odt, ods, odp: content.xml, all text inside office:body, a newline per
 *     paragraph, heading, list item and cell; as in docx, deleted text
 *     (text:tracked-changes), comments (office:annotation), note numbers
 *     (text:note-citation), index templates (text:*-source) and alt text
 *     (svg:title, svg:desc) are not text, nor is text in a style,
 *     automatic or common (styles.xml), with text:display="none" (hidden).
 *     An odt's or odp's list item starts with its number (its list
 *     style's), and so does an odt's heading (its outline style's).
 *     In ods a cell whose office:value-type is a number (float, percentage,
 *     currency, date, time) is its value as xlsx stores it instead of the
 *     text it displays ("1,234.50", "15 January 2024"), so a sheet saved
 *     as xlsx and as ods gives the same terms (a date counted from the
 *     sheet's table:null-date, as xlsx counts from 1904 in date1904).
 *   - epub: the spine of the package named by META-INF/container.xml, in
 *     order, each item read as HTML (html.c); items marked linear="no" and
 *     the navigation document are skipped. Without a readable package, every
 *     (X)HTML entry in name order.
 * Runs inside a sandboxed helper (sandbox.c).
 *
 * libarchive is loaded with dlopen() on first need, as poppler is (pdf.c):
 * linked, it and what it pulls in (libxml2, ICU, libstdc++, nettle and six
 * compression libraries) cost every start of imatch 1.6 ms of CPU, for a
 * tree that may hold no ZIP and nothing compressed. So is expat, which only
 * documents in ZIP containers need (about 60 us a start).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <archive.h>
#include <archive_entry.h>
#include <expat.h>
#include <xxhash.h>

#include "extract_internal.h"

/* ---- Loading libarchive -------------------------------------------------- */

/* The functions used here. */
static struct {
	struct archive *(*read_new)(void);
	int (*read_free)(struct archive *);
	int (*support_format_zip)(struct archive *);
	int (*support_format_raw)(struct archive *);
	int (*support_filter_gzip)(struct archive *);
	int (*support_filter_bzip2)(struct archive *);
	int (*support_filter_xz)(struct archive *);
	int (*open_memory)(struct archive *, const void *, size_t);
	int (*next_header)(struct archive *, struct archive_entry **);
	la_ssize_t (*read_data)(struct archive *, void *, size_t);
	const char *(*entry_pathname)(struct archive_entry *);
	int (*entry_is_encrypted)(struct archive_entry *);
} la;
static bool la_ok;
static pthread_once_t la_once = PTHREAD_ONCE_INIT;

static void la_load(void)
{
	/* Never closed, as poppler: a helper forked later uses it. */
	const struct im_dlsym syms[] = {
		{"archive_read_new", (void **)&la.read_new},
		{"archive_read_free", (void **)&la.read_free},
		{"archive_read_support_format_zip",
		 (void **)&la.support_format_zip},
		{"archive_read_support_format_raw",
		 (void **)&la.support_format_raw},
		{"archive_read_support_filter_gzip",
		 (void **)&la.support_filter_gzip},
		{"archive_read_support_filter_bzip2",
		 (void **)&la.support_filter_bzip2},
		{"archive_read_support_filter_xz",
		 (void **)&la.support_filter_xz},
		{"archive_read_open_memory", (void **)&la.open_memory},
		{"archive_read_next_header", (void **)&la.next_header},
		{"archive_read_data", (void **)&la.read_data},
		{"archive_entry_pathname", (void **)&la.entry_pathname},
		{"archive_entry_is_encrypted", (void **)&la.entry_is_encrypted},
	};

	la_ok = im_dl_load("libarchive.so.13", "libarchive.so", syms,
			   sizeof(syms) / sizeof(syms[0]));
}

bool im_archive_load(void)
{
	pthread_once(&la_once, la_load);
	return la_ok;
}

/* ---- Loading expat ------------------------------------------------------- */

/* The functions used here. */
static struct {
	XML_Parser(XMLCALL *parser_create_ns)(const XML_Char *, XML_Char);
	void(XMLCALL *parser_free)(XML_Parser);
	enum XML_Status(XMLCALL *parse)(XML_Parser, const char *, int, int);
	enum XML_Error(XMLCALL *get_error_code)(XML_Parser);
	enum XML_Status(XMLCALL *stop_parser)(XML_Parser, XML_Bool);
	void(XMLCALL *set_user_data)(XML_Parser, void *);
	void(XMLCALL *set_element_handler)(XML_Parser, XML_StartElementHandler,
					   XML_EndElementHandler);
	void(XMLCALL *set_character_data_handler)(XML_Parser,
						  XML_CharacterDataHandler);
	void(XMLCALL *set_entity_decl_handler)(XML_Parser,
					       XML_EntityDeclHandler);
	int(XMLCALL *set_param_entity_parsing)(XML_Parser,
					       enum XML_ParamEntityParsing);
} xp;
static bool xp_ok;
static pthread_once_t xp_once = PTHREAD_ONCE_INIT;

static void xp_load(void)
{
	const struct im_dlsym syms[] = {
		{"XML_ParserCreateNS", (void **)&xp.parser_create_ns},
		{"XML_ParserFree", (void **)&xp.parser_free},
		{"XML_Parse", (void **)&xp.parse},
		{"XML_GetErrorCode", (void **)&xp.get_error_code},
		{"XML_StopParser", (void **)&xp.stop_parser},
		{"XML_SetUserData", (void **)&xp.set_user_data},
		{"XML_SetElementHandler", (void **)&xp.set_element_handler},
		{"XML_SetCharacterDataHandler",
		 (void **)&xp.set_character_data_handler},
		{"XML_SetEntityDeclHandler",
		 (void **)&xp.set_entity_decl_handler},
		{"XML_SetParamEntityParsing",
		 (void **)&xp.set_param_entity_parsing},
	};

	xp_ok = im_dl_load("libexpat.so.1", "libexpat.so", syms,
			   sizeof(syms) / sizeof(syms[0]));
}

bool im_xml_load(void)
{
	pthread_once(&xp_once, xp_load);
	return xp_ok;
}

/* ---- Reading the archive ------------------------------------------------- */

struct part {
	char *name;
	struct im_buf data;
};

struct parts {
	struct part *v;
	size_t n, cap;
};

static void parts_release(struct parts *ps)
{
	for (size_t i = 0; i < ps->n; i++) {
		free(ps->v[i].name);
		im_buf_release(&ps->v[i].data);
	}
	free(ps->v);
	memset(ps, 0, sizeof(*ps));
}

static struct part *parts_find(const struct parts *ps, const char *name)
{
	for (size_t i = 0; i < ps->n; i++)
		if (!strcmp(ps->v[i].name, name))
			return &ps->v[i];
	return NULL;
}

/* Read the data of the current entry into @p b, counting against *budget.
 * @return 0, a failure, or -ENOMEM. */
static int read_entry(struct archive *a, struct im_buf *b, size_t *budget)
{
	char chunk[16384];

	for (;;) {
		la_ssize_t k = la.read_data(a, chunk, sizeof(chunk));

		if (k < 0)
			return IM_XF_CORRUPT;
		if (k == 0)
			return 0;
		if ((size_t)k > *budget)
			return IM_XF_EXPANSION;
		*budget -= (size_t)k;
		if (im_buf_append(b, chunk, (size_t)k))
			return -ENOMEM;
	}
}

typedef bool (*want_fn)(const char *name);

/* Collect the entries @p want selects, in archive order. */
static int zip_collect(const char *buf, size_t len,
		       const struct im_extract_opts *o, want_fn want,
		       struct parts *out)
{
	size_t budget = o->max_unpacked ? o->max_unpacked : SIZE_MAX;
	struct archive_entry *e;
	struct archive *a;
	int ret = 0, r;

	if (!im_archive_load())
		return IM_XF_LIBRARY;
	a = la.read_new();
	if (!a)
		return -ENOMEM;
	la.support_format_zip(a);
	if (la.open_memory(a, buf, len) != ARCHIVE_OK) {
		ret = IM_XF_CORRUPT;
		goto out;
	}
	while ((r = la.next_header(a, &e)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
		const char *name = la.entry_pathname(e);
		struct part *p;

		if (!name || !want(name))
			continue;
		if (la.entry_is_encrypted(e)) {
			ret = IM_XF_ENCRYPTED;
			goto out;
		}
		if (out->n == out->cap) {
			size_t cap = out->cap ? 2 * out->cap : 8;
			struct part *v = realloc(out->v, cap * sizeof(*v));

			if (!v) {
				ret = -ENOMEM;
				goto out;
			}
			out->v = v;
			out->cap = cap;
		}
		p = &out->v[out->n];
		memset(p, 0, sizeof(*p));
		p->name = strdup(name);
		if (!p->name) {
			ret = -ENOMEM;
			goto out;
		}
		out->n++;
		ret = read_entry(a, &p->data, &budget);
		if (ret)
			goto out;
	}
	if (r != ARCHIVE_EOF)
		ret = IM_XF_CORRUPT;
out:
	la.read_free(a);
	return ret;
}

/* ---- Number cells -------------------------------------------------------- */

/*
 * Numbers are read and written as decimal text, never through strtod() or
 * printf's %g: those follow the locale's decimal point, and the terms must
 * be the same on every machine.
 */

/* Write the value [-]d[0].d[1]d[2]... x 10^x, @p nd <= 16 significant
 * digits, rounded half up to 15 digits and 20 decimal places, in printf's
 * "%.15g" notation. Excel and LibreOffice store 15 significant digits (more
 * only as binary noise: 0.10000000000000001), but LibreOffice writes an
 * ods value below 1e-5 with 20 decimal places ("0.00000000033333333333"
 * where its xlsx has "3.33333333333333E-010"). */
static size_t number_write(bool neg, char *d, size_t nd, long x, char *out)
{
	long keep = x + 21 < 15 ? x + 21 : 15;
	size_t o = 0;

	if (keep < 0)
		nd = 0;
	if (nd > (size_t)keep) {
		bool up = d[keep] >= '5';

		nd = (size_t)keep;
		for (size_t i = nd; up && i-- > 0;) {
			up = d[i] == '9';
			d[i] = up ? '0' : (char)(d[i] + 1);
		}
		if (up) { /* 999...9 rounded up to 1000...0 */
			d[0] = '1';
			nd = 1;
			x++;
		}
	}
	while (nd && d[nd - 1] == '0')
		nd--;
	if (!nd) {
		out[0] = '0';
		out[1] = '\0';
		return 1;
	}
	if (neg)
		out[o++] = '-';
	if (x < -4 || x >= 15) {
		long e = x < 0 ? -x : x;

		out[o++] = d[0];
		if (nd > 1) {
			out[o++] = '.';
			memcpy(out + o, d + 1, nd - 1);
			o += nd - 1;
		}
		o += (size_t)sprintf(out + o, "e%c%02ld", x < 0 ? '-' : '+', e);
		return o;
	}
	if (x < 0) {
		out[o++] = '0';
		out[o++] = '.';
		for (long i = -1; i > x; i--)
			out[o++] = '0';
		memcpy(out + o, d, nd);
		o += nd;
		out[o] = '\0';
		return o;
	}
	for (long i = 0; i <= x; i++)
		out[o++] = (size_t)i < nd ? d[i] : '0';
	if (nd > (size_t)x + 1) {
		out[o++] = '.';
		memcpy(out + o, d + x + 1, nd - (size_t)x - 1);
		o += nd - (size_t)x - 1;
	}
	out[o] = '\0';
	return o;
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

size_t im_number_term(const char *s, size_t n, char *out)
{
	char d[16];
	size_t nd = 0, i = 0, mant = 0;
	long nint = 0, zeros = 0, e = 0;
	bool neg = false, point = false;

	while (n && is_blank(s[n - 1]))
		n--;
	while (i < n && is_blank(s[i]))
		i++;
	if (i < n && (s[i] == '-' || s[i] == '+'))
		neg = s[i++] == '-';
	for (; i < n; i++) {
		if (s[i] == '.' && !point) {
			point = true;
			continue;
		}
		if (!im_ascii_digit(s[i]))
			break;
		mant++;
		if (!nd && s[i] == '0') {
			zeros += point; /* 0.000d: the exponent goes down */
			continue;
		}
		if (nd < sizeof(d))
			d[nd++] = s[i];
		nint += !point;
	}
	if (!mant)
		return 0;
	if (i < n && (s[i] == 'e' || s[i] == 'E')) {
		bool eneg = false;
		size_t k;

		i++;
		if (i < n && (s[i] == '-' || s[i] == '+'))
			eneg = s[i++] == '-';
		for (k = i; i < n && im_ascii_digit(s[i]); i++)
			if (e < 100000)
				e = e * 10 + (s[i] - '0');
		if (i == k)
			return 0;
		e = eneg ? -e : e;
	}
	if (i != n)
		return 0;
	e += nint ? nint - 1 : -zeros - 1;
	/* Beyond what a double holds: not a spreadsheet's number. */
	if (e > 400)
		return 0;
	return number_write(neg, d, e < -400 ? 0 : nd, e, out);
}

/* Days from 1970-01-01 to the date @p y - @p m - @p d of the proleptic
 * Gregorian calendar (H. Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
	int64_t era, yoe, doy;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	return era * 146097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719468;
}

/* Read @p width (0: 1 to 8, so that no sum of them in microseconds
 * overflows) ASCII digits at *s into *v. */
static bool read_uint(const char **s, unsigned width, int64_t *v)
{
	unsigned k = 0;

	*v = 0;
	while (im_ascii_digit(**s) && (width ? k < width : k < 8)) {
		*v = *v * 10 + (**s - '0');
		(*s)++;
		k++;
	}
	return width ? k == width : k > 0;
}

/* Fractional seconds kept: a microsecond is 1.2e-11 of a day, below the
 * 15 digits of a date's serial number. */
#define FRAC_DIGITS 6

/* Seconds and their fraction (".ddd", up to FRAC_DIGITS read) at *s, in
 * units of 10^-FRAC_DIGITS s. */
static bool read_seconds(const char **s, int64_t *units)
{
	int64_t v;

	if (!read_uint(s, 0, &v))
		return false;
	*units = v;
	for (int k = 0; k < FRAC_DIGITS; k++)
		*units *= 10;
	if (**s == '.') {
		int64_t scale = 1;

		(*s)++;
		for (int k = 0; k < FRAC_DIGITS; k++)
			scale *= 10;
		for (; im_ascii_digit(**s); (*s)++)
			if (scale > 1)
				*units += (**s - '0') * (scale /= 10);
	}
	return true;
}

/* @p units of 10^-FRAC_DIGITS s as a term: days, as a serial number. */
static size_t days_term(int64_t units, char *out)
{
	const int64_t day = 86400000000; /* 10^FRAC_DIGITS s */
	char dec[64];
	size_t n = 0;
	uint64_t u = units < 0 ? -(uint64_t)units : (uint64_t)units;
	uint64_t r = u % (uint64_t)day;

	if (units < 0)
		dec[n++] = '-';
	n += (size_t)sprintf(dec + n, "%" PRIu64 ".", u / (uint64_t)day);
	/* Enough digits that rounding to 15 sees the value, not a cut. */
	for (int k = 0; k < 24; k++) {
		r *= 10;
		dec[n++] = (char)('0' + r / (uint64_t)day);
		r %= (uint64_t)day;
	}
	return im_number_term(dec, n, out);
}

/* The ISO date (and time) @p s in units of 10^-FRAC_DIGITS s since
 * 1899-12-30. */
static bool iso_units(const char *s, int64_t *units)
{
	int64_t y, m, d, h = 0, mi = 0, sec = 0, days;

	if (!read_uint(&s, 4, &y) || *s++ != '-' || !read_uint(&s, 2, &m) ||
	    *s++ != '-' || !read_uint(&s, 2, &d) || m < 1 || m > 12 || d < 1 ||
	    d > 31)
		return false;
	if (*s == 'T') {
		s++;
		if (!read_uint(&s, 2, &h) || *s++ != ':' ||
		    !read_uint(&s, 2, &mi) || *s++ != ':' ||
		    !read_seconds(&s, &sec))
			return false;
	}
	if (*s)
		return false;
	days = days_from_civil(y, (unsigned)m, (unsigned)d) -
	       days_from_civil(1899, 12, 30);
	*units = (days * 86400 + h * 3600 + mi * 60) * 1000000 + sec;
	return true;
}

size_t im_ods_date_term(const char *s, char *out)
{
	int64_t units;

	return iso_units(s, &units) ? days_term(units, out) : 0;
}

size_t im_ods_time_term(const char *s, char *out)
{
	int64_t units = 0, v;
	bool neg = *s == '-';

	s += neg;
	if (*s++ != 'P')
		return 0;
	/* PnD, then T with nH, nM and n.nS, each optional. */
	if (im_ascii_digit(*s)) {
		if (!read_uint(&s, 0, &v) || *s++ != 'D')
			return 0;
		units += v * 86400 * 1000000;
	}
	if (*s == 'T') {
		s++;
		/* H, M and S at most once each and in that order, as ISO 8601
		 * has them: a unit repeated could overflow the sum. next is
		 * the first unit still allowed (0 H, 1 M, 2 S). */
		for (int next = 0; next < 3 && *s;) {
			const char *at = s;

			if (!read_uint(&s, 0, &v))
				return 0;
			if ((*s == 'H' && next == 0) ||
			    (*s == 'M' && next <= 1)) {
				next = *s == 'H' ? 1 : 2;
				units += v * (*s == 'H' ? 3600 : 60) * 1000000;
				s++;
				continue;
			}
			s = at;
			if (!read_seconds(&s, &v) || *s++ != 'S')
				return 0;
			units += v;
			next = 3;
		}
	}
	if (*s)
		return 0;
	return days_term(neg ? -units : units, out);
}

/* ---- List labels --------------------------------------------------------- */

#define LETTER_REPEATS_MAX 16

size_t im_list_number(enum im_list_fmt f, int64_t n, char *out)
{
	static const char *const roman[][10] = {
		{"", "i", "ii", "iii", "iv", "v", "vi", "vii", "viii", "ix"},
		{"", "x", "xx", "xxx", "xl", "l", "lx", "lxx", "lxxx", "xc"},
		{"", "c", "cc", "ccc", "cd", "d", "dc", "dcc", "dccc", "cm"},
		{"", "m", "mm", "mmm"},
	};
	bool upper = f == IM_LIST_UPPER_LETTER ||
		     f == IM_LIST_UPPER_LETTER_SYNC || f == IM_LIST_UPPER_ROMAN;
	char tmp[IM_LIST_NUMBER_MAX];
	size_t k = 0, len = 0;

	switch (f) {
	case IM_LIST_NONE: return 0;
	case IM_LIST_LOWER_ROMAN:
	case IM_LIST_UPPER_ROMAN:
		if (n < 1 || n > 3999)
			break;
		for (int d = 3, v = (int)n; d >= 0; d--) {
			int p = d == 3 ? 1000 : d == 2 ? 100 : d == 1 ? 10 : 1;

			for (const char *r = roman[d][v / p % 10]; *r; r++)
				out[len++] = *r;
		}
		goto cased;
	case IM_LIST_LOWER_LETTER_SYNC:
	case IM_LIST_UPPER_LETTER_SYNC:
		if (n < 1 || (n - 1) / 26 >= LETTER_REPEATS_MAX)
			break;
		for (int64_t i = 0; i <= (n - 1) / 26; i++)
			out[len++] = (char)('a' + (n - 1) % 26);
		goto cased;
	case IM_LIST_LOWER_LETTER:
	case IM_LIST_UPPER_LETTER:
		if (n < 1)
			break;
		/* Bijective base 26: z is 26, aa 27. */
		for (uint64_t v = (uint64_t)n; v; v = (v - 1) / 26)
			tmp[k++] = (char)('a' + (v - 1) % 26);
		while (k)
			out[len++] = tmp[--k];
		goto cased;
	case IM_LIST_DECIMAL_ZERO:
		if (n >= 0 && n < 10)
			out[len++] = '0';
		break;
	case IM_LIST_DECIMAL: break;
	}
	return len + (size_t)sprintf(out + len, "%" PRId64, n);
cased:
	for (size_t i = 0; upper && i < len; i++)
		out[i] = (char)(out[i] - 'a' + 'A');
	return len;
}

/*
 * A list's levels as a document defines them (a docx w:abstractNum, an odt
 * text:list-style): each level's format, first number and label, whose
 * bytes LIST_REF + k stand for the number of level k (bytes no XML 1.0
 * document can hold), the others as they are ("%1.%2." is "\x10.\x11.").
 */
#define LIST_LEVELS   10 /* odt's; docx has 9 */
#define LIST_TEXT_MAX 32
#define LIST_REF      0x10
/* Definitions kept of a document, and docx w:num kept: real documents
 * have a few dozen, a hostile one no more than these. */
#define LISTS_MAX 4096

struct list_level {
	int32_t start;
	uint8_t fmt; /* enum im_list_fmt */
	/* An item at this level or above starts this level again: the
	 * one above, or docx's w:lvlRestart (-1: none does) */
	int8_t reset_by;
	/* docx's w:isLgl: the label's numbers of other levels in decimal */
	bool legal;
	char text[LIST_TEXT_MAX]; /* NUL-terminated; "" and IM_LIST_NONE:
				   * no label */
};

/* The counters of one list as it goes: each level's last number, valid
 * where its bit of @p counted is set. */
struct list_count {
	int64_t cur[LIST_LEVELS];
	uint16_t counted;
};

struct list_def {
	uint64_t key; /* docx: w:abstractNumId; odt: style_hash() of the name */
	uint32_t seq; /* order defined: the last of a key is the one */
	struct list_level lvl[LIST_LEVELS];
	/* docx: the count of the w:num of these levels that start nowhere
	 * else, which Word numbers as one list */
	struct list_count count;
};

/* A docx w:num: the list a paragraph names (w:numId), numbered by the
 * levels of an w:abstractNum, some starting elsewhere (w:startOverride),
 * some defined anew (a w:lvl in its w:lvlOverride). */
struct list_num {
	uint64_t key, def; /* w:numId, its w:abstractNumId */
	uint32_t seq;
	uint16_t restart;   /* levels with a w:startOverride */
	uint16_t redefined; /* levels of lvl defined here */
	int32_t start[LIST_LEVELS];
	struct list_level lvl[LIST_LEVELS];
	struct list_count count;
};

/* A document's lists, defined by the parts before its text; once the text
 * looks one up (sorted, by key then seq) no more are defined. */
struct lists {
	struct list_def *def;
	struct list_num *num;
	size_t ndef, nnum, defcap, numcap;
	bool frozen;
};

static void lists_release(struct lists *ls)
{
	free(ls->def);
	free(ls->num);
	memset(ls, 0, sizeof(*ls));
}

static int key_seq_cmp(uint64_t ka, uint32_t sa, uint64_t kb, uint32_t sb)
{
	if (ka != kb)
		return ka < kb ? -1 : 1;
	return sa < sb ? -1 : sa > sb;
}

static int list_def_cmp(const void *a, const void *b)
{
	const struct list_def *x = a, *y = b;

	return key_seq_cmp(x->key, x->seq, y->key, y->seq);
}

static int list_num_cmp(const void *a, const void *b)
{
	const struct list_num *x = a, *y = b;

	return key_seq_cmp(x->key, x->seq, y->key, y->seq);
}

/* Room in *@p v (capacity *@p cap elements of @p size bytes, doubled as
 * needed) for element @p n: 0, or -ENOMEM. */
static int room_for_one(void **v, size_t *cap, size_t n, size_t size)
{
	void *nv;
	size_t c;

	if (n < *cap)
		return 0;
	c = *cap ? 2 * *cap : 4;
	nv = realloc(*v, c * size);
	if (!nv)
		return -ENOMEM;
	*v = nv;
	*cap = c;
	return 0;
}

/* Level @p k as a docx w:lvl or odt level the document leaves out: decimal
 * from 1, with no label, started again by any item above it. */
static void list_level_init(struct list_level *lv, unsigned k)
{
	memset(lv, 0, sizeof(*lv));
	lv->start = 1;
	lv->fmt = IM_LIST_DECIMAL;
	lv->reset_by = (int8_t)((int)k - 1);
}

/* A new definition of @p key, every level list_level_init()'s, or NULL: no
 * room, or none wanted any more. */
static struct list_def *list_def_new(struct lists *ls, uint64_t key)
{
	struct list_def *d;

	if (ls->frozen || ls->ndef == LISTS_MAX ||
	    room_for_one((void **)&ls->def, &ls->defcap, ls->ndef,
			 sizeof(*ls->def)))
		return NULL;
	d = &ls->def[ls->ndef];
	memset(d, 0, sizeof(*d));
	d->key = key;
	d->seq = (uint32_t)ls->ndef++;
	for (unsigned k = 0; k < LIST_LEVELS; k++)
		list_level_init(&d->lvl[k], k);
	return d;
}

static struct list_num *list_num_new(struct lists *ls, uint64_t key)
{
	struct list_num *n;

	if (ls->frozen || ls->nnum == LISTS_MAX ||
	    room_for_one((void **)&ls->num, &ls->numcap, ls->nnum,
			 sizeof(*ls->num)))
		return NULL;
	n = &ls->num[ls->nnum];
	memset(n, 0, sizeof(*n));
	n->key = key;
	n->seq = (uint32_t)ls->nnum++;
	return n;
}

static void lists_freeze(struct lists *ls)
{
	if (ls->frozen)
		return;
	ls->frozen = true;
	if (ls->ndef)
		qsort(ls->def, ls->ndef, sizeof(*ls->def), list_def_cmp);
	if (ls->nnum)
		qsort(ls->num, ls->nnum, sizeof(*ls->num), list_num_cmp);
}

/* The index of the last entry of @p key in the sorted keys of @p n entries
 * @p size bytes apart (the key first in each), or @p n. */
static size_t last_of_key(const void *v, size_t n, size_t size, uint64_t key)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		uint64_t k;

		memcpy(&k, (const char *)v + mid * size, sizeof(k));
		if (k <= key)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo) {
		uint64_t k;

		memcpy(&k, (const char *)v + (lo - 1) * size, sizeof(k));
		if (k == key)
			return lo - 1;
	}
	return n;
}

static struct list_def *list_def_find(struct lists *ls, uint64_t key)
{
	size_t i;

	lists_freeze(ls);
	i = last_of_key(ls->def, ls->ndef, sizeof(*ls->def), key);
	return i < ls->ndef ? &ls->def[i] : NULL;
}

static struct list_num *list_num_find(struct lists *ls, uint64_t key)
{
	size_t i;

	lists_freeze(ls);
	i = last_of_key(ls->num, ls->nnum, sizeof(*ls->num), key);
	return i < ls->nnum ? &ls->num[i] : NULL;
}

/* Count an item at level @p k of a list of levels @p lv, which starts at
 * @p start[k] where @p restart has bit k (docx's w:startOverride): the
 * levels below it start again, but those it does not reset (reset_by). A
 * level above it that has no item yet (a heading 3 right after a heading
 * 1) counts one at its start, as Word and LibreOffice show it ("1.1.1."),
 * so its next item is its second. */
static void list_count_item(struct list_count *c, const struct list_level *lv,
			    unsigned k, uint16_t restart, const int32_t *start)
{
	uint16_t kept = 0;

	for (unsigned j = 0; j <= k; j++) {
		int64_t first = restart >> j & 1 ? start[j] : lv[j].start;

		if (j == k || !(c->counted >> j & 1))
			c->cur[j] = c->counted >> j & 1 ? c->cur[j] + 1 : first;
	}
	for (unsigned m = k + 1; m < LIST_LEVELS; m++)
		if (lv[m].reset_by < (int)k)
			kept |= (uint16_t)(1u << m);
	c->counted = (uint16_t)(((2u << k) - 1) | (c->counted & kept));
}

/* The label of the item just counted at level @p k, a space after it, in
 * @p out (room for LIST_LABEL_MAX bytes); @return its length, 0 for none. */
#define LIST_LABEL_MAX (LIST_TEXT_MAX * IM_LIST_NUMBER_MAX + 1)
static size_t list_label(const struct list_count *c,
			 const struct list_level *lv, unsigned k, char *out)
{
	const char *t = lv[k].text;
	size_t len = 0;

	if (lv[k].fmt == IM_LIST_NONE || !*t)
		return 0;
	for (; *t; t++) {
		unsigned r = (unsigned char)*t - LIST_REF;
		enum im_list_fmt f;

		if (r >= LIST_LEVELS) {
			out[len++] = *t;
			continue;
		}
		f = (enum im_list_fmt)lv[r].fmt;
		/* Legal numbering ("Section 1.01" under "Article I"): letters
		 * and Roman numerals in decimal; "01" stays. */
		if (lv[k].legal && f != IM_LIST_NONE &&
		    f != IM_LIST_DECIMAL_ZERO)
			f = IM_LIST_DECIMAL;
		len += im_list_number(
			f, c->counted >> r & 1 ? c->cur[r] : lv[r].start,
			out + len);
	}
	out[len++] = ' ';
	return len;
}

/* ---- XML to text --------------------------------------------------------- */

/* Where a spreadsheet keeps a number cell's value. */
enum cells {
	CELLS_NONE,
	CELLS_XLSX, /* <c t=...>: its <v> */
	CELLS_ODS,  /* <table:table-cell office:value-type=...>: an attribute */
};

/* How a document marks text hidden, which is left out (as RTF's \v and
 * a PDF, which does not draw it). */
enum hidden {
	HIDDEN_NONE,
	HIDDEN_DOCX, /* <w:r><w:rPr><w:vanish/>: the run; a character style
		      * (w:rStyle) or paragraph style (w:pStyle) whose w:rPr
		      * has w:vanish (styles.xml) */
	HIDDEN_ODF,  /* a text:span, p or h whose style, automatic or common
		      * (styles.xml), has text:display="none" */
};

/* DrawingML's levels (a:pPr lvl). */
#define DML_LEVELS 9

/* A paragraph's a:buAutoNum: "(", its number, and ")", "." or nothing. */
enum dml_affix { DML_PLAIN, DML_PERIOD, DML_PAREN_R, DML_PAREN_BOTH };
struct dml_num {
	bool on;
	uint8_t fmt;   /* enum im_list_fmt */
	uint8_t affix; /* enum dml_affix */
	int32_t start; /* startAt */
};

/* How a document numbers its list items, which are labelled with their
 * numbers. */
enum list_kind {
	LISTS_NONE,
	LISTS_DOCX,	 /* numbering.xml, w:numPr */
	LISTS_ODF,	 /* text:list-style, text:outline-style */
	LISTS_DRAWINGML, /* pptx: a:buAutoNum */
};

/* Which elements carry text, and where lines and spaces go. */
struct xml_rules {
	const char *const *text;   /* character data kept inside these ... */
	const char *within;	   /* ... or, when text is NULL, inside this */
	const char *const *nl_end; /* a newline after each of these */
	const char *const *space;  /* a space where one of these starts */
	const char *const *skip;   /* nothing inside these is text */
	enum cells cells;
	enum hidden hidden;
	enum list_kind lists;
};

/* What a style says of its text's display: hidden, shown (over a style it
 * is based on that hides it), or nothing (that style's). */
enum display { DISPLAY_INHERIT, DISPLAY_NONE, DISPLAY_SHOWN };

/* The style families a reference names: a span's or run's (ODF "text",
 * OOXML "character") and a paragraph's; others are kept apart. */
enum family { FAMILY_OTHER, FAMILY_TEXT, FAMILY_PARAGRAPH, FAMILY_LIST };

struct style {
	uint64_t name, parent; /* keyed hashes (style_hash()); 0: none */
	enum display display;
	/* What style_hides() found, kept: each style is walked past at most
	 * once, however often text names it or a style based on it. */
	uint8_t walk; /* WALK_* */
	uint8_t dist; /* WALK_DONE: styles up to the one that says (0: this
		       * one), STYLE_CHAIN if none that near */
	bool hides;
	/* docx: the list its paragraphs are items of (w:numPr), if has_num */
	bool has_num;
	int64_t num_id, num_ilvl;
};

enum { WALK_NONE, WALK_ON, WALK_DONE };

/* Styles by family and name, as 64-bit hashes in open addressing: a
 * hostile document may define and use a million hidden styles, which a
 * list made quadratic. The hash is keyed by where the set lives (random
 * per process): names crafted to share probe chains or a whole hash need
 * the key. */
struct styles {
	struct style *slot;
	size_t cap, n;
	/* Text has named a style: what style_hides() kept stays true only
	 * if no style changes after, so none is defined any more. */
	bool frozen;
};

struct xml_ctx {
	XML_Parser p;
	const struct xml_rules *r;
	const struct im_extract_opts *o;
	struct im_buf *out;
	unsigned depth, in_text, in_within, in_skip;
	int fail;
	/* Hidden text: in the element begun at this depth (0: not); docx: in
	 * the paragraph, the run and its properties begun at these depths;
	 * the style being defined (and its w:rPr) at these, its key; the
	 * styles of the document's parts, shared by them. */
	unsigned hide_depth, para_depth, run_depth, rpr_depth;
	unsigned style_depth, style_rpr_depth, style_ppr_depth;
	enum family style_family;
	uint64_t style_key;
	struct styles *styles;
	bool styles_only; /* a part of styles: no text (its headers') */
	/* List labels: the lists the parts define, shared by them; a list
	 * definition (docx: w:abstractNum, or the w:num in lnum; odt:
	 * text:list-style), its level, and docx's w:lvlOverride (the level
	 * + 1) being read, and where. */
	struct lists *lists;
	struct list_def *ldef;
	struct list_level *llvl;
	struct list_num *lnum;
	unsigned ldef_depth, llvl_depth, llvl_k;
	int lover;
	/* docx: the paragraph's w:pPr and w:numPr at these depths, what they
	 * say (num_id -1: no w:numId) and its style's key (0: none). */
	unsigned ppr_depth, numpr_depth;
	int64_t num_id, num_ilvl;
	uint64_t num_style;
	/* odt: the text:list elements open, the definition each level
	 * numbers by, their count, and the label of the item begun, which
	 * its first paragraph puts before its text. */
	unsigned list_depth;
	struct list_def *list_defs[LIST_LEVELS];
	struct list_count list_count;
	/* odt: the count of the headings its outline style numbers. */
	struct list_count outline_count;
	size_t pending_len;
	char pending[LIST_LABEL_MAX];
	/* pptx: each level's run of numbered paragraphs in the text body
	 * (off: its last paragraph had no number, or one above it came
	 * since) and its last number; the paragraph begun at dml_p_depth,
	 * its level and numbering, and whether its text has begun. */
	struct dml_num dml_run[DML_LEVELS];
	int64_t dml_cur[DML_LEVELS];
	struct dml_num dml_para;
	unsigned dml_p_depth, dml_lvl;
	bool dml_texted;
	/* Spreadsheets: the number cells' terms, a line each. */
	struct im_buf *nums;
	unsigned num_depth; /* ods: in the number cell begun at this depth */
	/* ods: its null date (table:null-date), iso_units() of it; 0 is
	 * 1899-12-30, the default. */
	int64_t null_units;
	/* xlsx: the type of the cell we are in ('n', 'b', 'd', 's' for a
	 * formula's string; 0: another) ... */
	char cell;
	bool in_v;   /* ... and in its <v>, whose text is val */
	size_t nval; /* sizeof(val): too long for a value */
	char val[64];
};

static bool has_prefix(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

static bool has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && !strcmp(s + n - k, suffix);
}

static const char *local_name(const XML_Char *name)
{
	const char *sep = strrchr(name, '\x01');

	return sep ? sep + 1 : name;
}

static bool in_list(const char *const *list, const char *name)
{
	for (; list && *list; list++)
		if (!strcmp(*list, name))
			return true;
	return false;
}

static void xml_stop(struct xml_ctx *c, int fail)
{
	if (!c->fail)
		c->fail = fail;
	xp.stop_parser(c->p, XML_FALSE);
}

/* Text and number terms together stay within max_text. */
static void xml_put_to(struct xml_ctx *c, struct im_buf *b, const char *s,
		       size_t n)
{
	if (c->fail || c->styles_only)
		return;
	if (im_buf_append(b, s, n))
		xml_stop(c, -ENOMEM);
	else if (c->o->max_text &&
		 c->out->len + (c->nums ? c->nums->len : 0) > c->o->max_text)
		xml_stop(c, IM_XF_OUTPUT);
}

static void xml_put(struct xml_ctx *c, const char *s, size_t n)
{
	xml_put_to(c, c->out, s, n);
}

/* The attribute @p local of the namespace @p ns (expat joins them with
 * '\x01'): ods names calcext:value-type beside office:value-type. */
static const char *attr_ns(const XML_Char **atts, const char *ns,
			   const char *local)
{
	size_t k = strlen(ns);

	for (; atts[0]; atts += 2)
		if (!strncmp(atts[0], ns, k) && atts[0][k] == '\x01' &&
		    !strcmp(atts[0] + k + 1, local))
			return atts[1];
	return NULL;
}

static void put_number(struct xml_ctx *c, const char *term, size_t n)
{
	if (!n)
		return;
	xml_put_to(c, c->nums, term, n);
	xml_put_to(c, c->nums, "\n", 1);
}

#define ODF_OFFICE "urn:oasis:names:tc:opendocument:xmlns:office:1.0"

/* A boolean cell's text: its value, whatever the display language. */
static void put_boolean(struct xml_ctx *c, bool v)
{
	xml_put(c, v ? "TRUE\n" : "FALSE\n", v ? 5 : 6);
}

/* An ods cell: a number's value is its term and a boolean's is a word;
 * the text they display is not text (the format, not the sheet's
 * content). */
static void ods_cell(struct xml_ctx *c, const XML_Char **atts)
{
	const char *t = attr_ns(atts, ODF_OFFICE, "value-type"), *v;
	char term[IM_NUMBER_TERM_MAX];
	size_t n = 0;

	if (!t)
		return;
	if (!strcmp(t, "boolean")) {
		v = attr_ns(atts, ODF_OFFICE, "boolean-value");
		put_boolean(c, v && !strcmp(v, "true"));
	} else if (!strcmp(t, "float") || !strcmp(t, "percentage") ||
		   !strcmp(t, "currency")) {
		v = attr_ns(atts, ODF_OFFICE, "value");
		n = v ? im_number_term(v, strlen(v), term) : 0;
	} else if (!strcmp(t, "date")) {
		int64_t units;

		v = attr_ns(atts, ODF_OFFICE, "date-value");
		n = v && iso_units(v, &units)
			    ? days_term(units - c->null_units, term)
			    : 0;
	} else if (!strcmp(t, "time")) {
		v = attr_ns(atts, ODF_OFFICE, "time-value");
		n = v ? im_ods_time_term(v, term) : 0;
	} else {
		return;
	}
	put_number(c, term, n);
	c->num_depth = c->depth;
}

#define ODF_TABLE "urn:oasis:names:tc:opendocument:xmlns:table:1.0"

/* A sheet in the 1904 date system (table:null-date 1904-01-01, as Excel
 * for the Mac made them) stores its dates as days since then, and so do
 * its xlsx (date1904) and xls (DATEMODE): its ods is read the same way. */
static void ods_null_date(struct xml_ctx *c, const XML_Char **atts)
{
	const char *v = attr_ns(atts, ODF_TABLE, "date-value");

	if (!v || !iso_units(v, &c->null_units))
		c->null_units = 0;
}

static bool ods_cell_name(const char *l)
{
	return !strcmp(l, "table-cell") || !strcmp(l, "covered-table-cell");
}

/* An xlsx cell: the type of its <v>. A number (n, the default without
 * t), a boolean (b: 0 or 1), a date (d: ISO 8601, in Strict files) and a
 * formula's string (str) are read; a shared string's <v> (s) is an index
 * (the text is in the shared strings), an error's (e) not content. */
static void xlsx_cell(struct xml_ctx *c, const XML_Char **atts)
{
	const char *t = NULL;

	for (; atts[0]; atts += 2)
		if (!strcmp(atts[0], "t"))
			t = atts[1];
	c->cell = !t || !strcmp(t, "n") ? 'n'
		  : !strcmp(t, "b")	? 'b'
		  : !strcmp(t, "d")	? 'd'
		  : !strcmp(t, "str")	? 's'
					: 0;
}

/* The end of an xlsx cell's <v>. */
static void xlsx_value(struct xml_ctx *c)
{
	char term[IM_NUMBER_TERM_MAX];

	c->in_v = false;
	if (c->cell == 's') {
		xml_put(c, "\n", 1);
		return;
	}
	if (c->nval == sizeof(c->val))
		return;
	c->val[c->nval] = '\0';
	if (c->cell == 'n')
		put_number(c, term, im_number_term(c->val, c->nval, term));
	else if (c->cell == 'd')
		put_number(c, term, im_ods_date_term(c->val, term));
	else if (c->cell == 'b')
		put_boolean(c, strcmp(c->val, "0") != 0);
}

/* Whether nothing inside the element @p name (local part @p l) is text: a
 * skip entry names a local part, or namespace '\x01' local part where the
 * local part alone would catch another namespace's element too. */
static bool skipped(const struct xml_ctx *c, const XML_Char *name,
		    const char *l)
{
	return in_list(c->r->skip, l) || in_list(c->r->skip, name);
}

/* The attribute whose local name is @p local, in any namespace or none. */
static const char *attr_local(const XML_Char **atts, const char *local)
{
	for (; atts[0]; atts += 2)
		if (!strcmp(local_name(atts[0]), local))
			return atts[1];
	return NULL;
}

/* The keyed hash of the style @p name of @p family, never 0 (an empty
 * slot). */
static uint64_t style_hash(const struct styles *set, enum family family,
			   const char *name)
{
	uint64_t h = XXH3_64bits_withSeed(name, strlen(name),
					  (uintptr_t)set + (uint64_t)family);

	return h ? h : 1;
}

/* The slot of @p h in @p set: where it is, or the empty one where it would
 * go. */
static struct style *style_slot(const struct styles *set, uint64_t h)
{
	size_t i = (size_t)h & (set->cap - 1);

	while (set->slot[i].name && set->slot[i].name != h)
		i = (i + 1) & (set->cap - 1);
	return &set->slot[i];
}

/* Define the style whose hash is @p h, based on the one hashed @p parent
 * (0: none), saying nothing of display yet; a style defined again (an
 * odt's content.xml names its automatic styles as styles.xml does its
 * own) is the last definition. @return 0 or -ENOMEM. */
static int style_define(struct styles *set, uint64_t h, uint64_t parent)
{
	struct style *s;

	if (2 * (set->n + 1) > set->cap) {
		struct styles big = {.cap = set->cap ? 2 * set->cap : 16};

		big.slot = calloc(big.cap, sizeof(*big.slot));
		if (!big.slot)
			return -ENOMEM;
		for (size_t i = 0; i < set->cap; i++)
			if (set->slot[i].name)
				*style_slot(&big, set->slot[i].name) =
					set->slot[i];
		big.n = set->n;
		free(set->slot);
		*set = big;
	}
	s = style_slot(set, h);
	set->n += !s->name;
	*s = (struct style){.name = h, .parent = parent};
	return 0;
}

/* The style hashed @p h, or NULL. */
static struct style *style_find(const struct styles *set, uint64_t h)
{
	struct style *s;

	if (!set->n || !h)
		return NULL;
	s = style_slot(set, h);
	return s->name ? s : NULL;
}

/*
 * Whether text in the style @p name of @p family is hidden: what the style
 * says, or else the style it is based on, and so on. Real chains are a few
 * styles long; one STYLE_CHAIN styles or more from the one that says (or
 * in a loop, or based on one missing) shows its text. Walking each use's
 * chain anew cost a document of a million styles based on one another and
 * named millions of times STYLE_CHAIN random reads per use in a table of
 * 100 MB (27 s for an odt of 123 MB): what a walk finds is kept in every
 * style it passed, and a walk stops at the first such style. Freezes
 * @p set.
 */
#define STYLE_CHAIN 32
static bool style_hides(struct styles *set, enum family family,
			const char *name)
{
	struct style *s = style_find(set, style_hash(set, family, name)), *x;
	size_t n = 0, d;
	uint8_t dist;
	bool hides;

	set->frozen = true;
	if (!s)
		return false;
	/* Up to a style walked before, one that says, one missing, or one
	 * this walk passed (a loop). */
	for (x = s; x && x->walk == WALK_NONE && x->display == DISPLAY_INHERIT;
	     x = style_find(set, x->parent)) {
		x->walk = WALK_ON;
		n++;
	}
	if (!x || x->walk == WALK_ON) {
		dist = STYLE_CHAIN;
		hides = false;
	} else if (x->walk == WALK_DONE) {
		dist = x->dist;
		hides = x->hides;
	} else {
		x->walk = WALK_DONE;
		x->dist = dist = 0;
		x->hides = hides = x->display == DISPLAY_NONE;
	}
	/* Again over the n styles passed: the i-th is n - i further. */
	for (x = s; n; n--, x = style_find(set, x->parent)) {
		d = dist + n;
		x->walk = WALK_DONE;
		x->dist = d < STYLE_CHAIN ? (uint8_t)d : STYLE_CHAIN;
		x->hides = hides && x->dist < STYLE_CHAIN;
	}
	return s->hides;
}

/* The style being defined, or NULL (none, or no more definitions: text
 * has named styles, style_hides()). */
static struct style *style_defining(const struct xml_ctx *c)
{
	return c->styles->frozen ? NULL : style_find(c->styles, c->style_key);
}

/* Whether text in the style @p name of @p family is hidden. A part of
 * styles (no text) looks nothing up: its styles, and the automatic ones
 * of the part after it, are not all defined yet. */
static bool text_hidden(struct xml_ctx *c, enum family family, const char *name)
{
	return !c->styles_only && style_hides(c->styles, family, name);
}

/* Begin the definition of a style: from now on its display and parent
 * are @p c's to set. */
static void style_begin(struct xml_ctx *c, enum family family, const char *name,
			const char *parent)
{
	struct styles *set = c->styles;

	/* After text named styles, as in no valid document (styles.xml and
	 * automatic styles come before the body): not read. */
	if (!name || set->frozen)
		return;
	c->style_depth = c->depth;
	c->style_family = family;
	c->style_key = style_hash(set, family, name);
	if (style_define(set, c->style_key,
			 parent ? style_hash(set, family, parent) : 0))
		xml_stop(c, -ENOMEM);
}

static void style_display(struct xml_ctx *c, enum display d)
{
	struct style *s = style_defining(c);

	if (s)
		s->display = d;
}

/* A decimal attribute value, clamped to int32_t (a hostile w:start of
 * 10^30 starts at INT32_MAX); false if it is none. */
static bool attr_int(const char *v, int64_t *out)
{
	char *end;
	long long x;

	if (!v)
		return false;
	x = strtoll(v, &end, 10);
	if (end == v)
		return false;
	*out = x < INT32_MIN ? INT32_MIN : x > INT32_MAX ? INT32_MAX : x;
	return true;
}

/* Whether a w:val (of w:vanish) turns its property off. */
static bool val_off(const char *v)
{
	return v &&
	       (!strcmp(v, "0") || !strcmp(v, "false") || !strcmp(v, "off"));
}

/* styles.xml: a style whose w:rPr has w:vanish hides its text, and so does
 * one based (w:basedOn) on it, unless it says otherwise. */
static void docx_style(struct xml_ctx *c, const char *l, const XML_Char **atts)
{
	const char *t;

	if (!strcmp(l, "style")) {
		t = attr_local(atts, "type");
		style_begin(c,
			    t && !strcmp(t, "character")    ? FAMILY_TEXT
			    : !t || !strcmp(t, "paragraph") ? FAMILY_PARAGRAPH
							    : FAMILY_OTHER,
			    attr_local(atts, "styleId"), NULL);
	} else if (!c->style_depth) {
		return;
	} else if (!strcmp(l, "basedOn") && c->depth == c->style_depth + 1) {
		struct style *st = style_defining(c);
		const char *v = attr_local(atts, "val");

		if (st && v)
			st->parent = style_hash(c->styles, c->style_family, v);
	} else if (!strcmp(l, "rPr") && c->depth == c->style_depth + 1) {
		c->style_rpr_depth = c->depth;
	} else if (!strcmp(l, "pPr") && c->depth == c->style_depth + 1) {
		c->style_ppr_depth = c->depth;
	} else if ((!strcmp(l, "numId") || !strcmp(l, "ilvl")) &&
		   c->style_ppr_depth && c->depth == c->style_ppr_depth + 2) {
		struct style *st = style_defining(c);
		int64_t x;

		if (st && attr_int(attr_local(atts, "val"), &x)) {
			*(l[0] == 'n' ? &st->num_id : &st->num_ilvl) = x;
			st->has_num |= l[0] == 'n';
		}
	} else if (!strcmp(l, "vanish") && c->style_rpr_depth &&
		   c->depth == c->style_rpr_depth + 1) {
		style_display(c, val_off(attr_local(atts, "val"))
					 ? DISPLAY_SHOWN
					 : DISPLAY_NONE);
	}
}

/*
 * A w:vanish in a run's properties hides the run (one in a paragraph's
 * hides only its mark, which is no text), and so does one in its character
 * style's (w:rStyle), which the run's own w:vanish w:val="0" overrides; one
 * in a paragraph style's (w:pStyle) hides the paragraph. The styles are
 * styles.xml's, read before the body (docx_style()).
 */
static void docx_hidden(struct xml_ctx *c, const char *l, const XML_Char **atts)
{
	const char *v;

	docx_style(c, l, atts);
	if (!strcmp(l, "p")) {
		c->para_depth = c->depth;
	} else if (!strcmp(l, "pStyle") && c->para_depth &&
		   c->depth == c->para_depth + 2 && !c->hide_depth) {
		v = attr_local(atts, "val");
		if (v && text_hidden(c, FAMILY_PARAGRAPH, v))
			c->hide_depth = c->para_depth;
	} else if (!strcmp(l, "r")) {
		c->run_depth = c->depth;
	} else if (!strcmp(l, "rPr") && c->run_depth &&
		   c->depth == c->run_depth + 1) {
		c->rpr_depth = c->depth;
	} else if (!strcmp(l, "rStyle") && c->rpr_depth &&
		   c->depth == c->rpr_depth + 1 && !c->hide_depth) {
		v = attr_local(atts, "val");
		if (v && text_hidden(c, FAMILY_TEXT, v))
			c->hide_depth = c->run_depth;
	} else if (!strcmp(l, "vanish") && c->rpr_depth &&
		   c->depth == c->rpr_depth + 1) {
		bool off = val_off(attr_local(atts, "val"));

		if (off && c->hide_depth == c->run_depth)
			c->hide_depth = 0;
		else if (!off && !c->hide_depth)
			c->hide_depth = c->run_depth;
	}
}

static enum family odf_family(const char *family)
{
	if (family && !strcmp(family, "text"))
		return FAMILY_TEXT;
	if (family && !strcmp(family, "paragraph"))
		return FAMILY_PARAGRAPH;
	return FAMILY_OTHER;
}

/*
 * Styles come before the body, common ones in styles.xml (read first) and
 * automatic ones in content.xml: a style with text:display="none" hides
 * its text, and so does one based on it (style:parent-style-name), unless
 * it says "true". A text:span, p or h in such a style is left out.
 */
static void odf_hidden(struct xml_ctx *c, const char *l, const XML_Char **atts)
{
	const char *v;

	if (!strcmp(l, "style")) {
		style_begin(c, odf_family(attr_local(atts, "family")),
			    attr_local(atts, "name"),
			    attr_local(atts, "parent-style-name"));
	} else if (!strcmp(l, "text-properties") && c->style_depth &&
		   c->depth == c->style_depth + 1) {
		v = attr_local(atts, "display");
		if (v && !strcmp(v, "none"))
			style_display(c, DISPLAY_NONE);
		else if (v && !strcmp(v, "true"))
			style_display(c, DISPLAY_SHOWN);
	} else if ((!strcmp(l, "span") || !strcmp(l, "p") || !strcmp(l, "h")) &&
		   !c->hide_depth) {
		v = attr_local(atts, "style-name");
		if (v &&
		    text_hidden(c, l[0] == 's' ? FAMILY_TEXT : FAMILY_PARAGRAPH,
				v))
			c->hide_depth = c->depth;
	}
}

/* w:numFmt's value; one we do not write is shown as decimal, as Word
 * shows a format it lacks. */
static enum im_list_fmt docx_num_fmt(const char *v)
{
	static const struct {
		const char *name;
		enum im_list_fmt fmt;
	} fmts[] = {
		{"bullet", IM_LIST_NONE},
		{"none", IM_LIST_NONE},
		{"decimalZero", IM_LIST_DECIMAL_ZERO},
		{"lowerLetter", IM_LIST_LOWER_LETTER_SYNC},
		{"upperLetter", IM_LIST_UPPER_LETTER_SYNC},
		{"lowerRoman", IM_LIST_LOWER_ROMAN},
		{"upperRoman", IM_LIST_UPPER_ROMAN},
	};

	for (size_t i = 0; v && i < sizeof(fmts) / sizeof(fmts[0]); i++)
		if (!strcmp(v, fmts[i].name))
			return fmts[i].fmt;
	return IM_LIST_DECIMAL;
}

/* w:lvlText: "%1.%2." into list_level.text's form. */
static void docx_lvl_text(struct list_level *lv, const char *v)
{
	size_t n = 0;

	for (; *v && n + 1 < LIST_TEXT_MAX; v++) {
		if (v[0] == '%' && v[1] >= '1' && v[1] <= '9') {
			lv->text[n++] = (char)(LIST_REF + (v[1] - '1'));
			v++;
		} else {
			lv->text[n++] = *v;
		}
	}
	lv->text[n] = '\0';
}

/* An element @p l (its w:val @p v) of the w:lvl that defines level @p k
 * as @p lv. */
static void docx_lvl(struct list_level *lv, unsigned k, const char *l,
		     const char *v)
{
	int64_t x;

	if (!strcmp(l, "isLgl"))
		lv->legal = !val_off(v);
	else if (!v)
		return;
	else if (!strcmp(l, "start") && attr_int(v, &x))
		lv->start = (int32_t)x;
	else if (!strcmp(l, "numFmt"))
		lv->fmt = (uint8_t)docx_num_fmt(v);
	else if (!strcmp(l, "lvlText"))
		docx_lvl_text(lv, v);
	/* w:lvlRestart: the level (from 1) whose items, and those of the
	 * levels above it, start this one again; 0: none; one not above
	 * this level is ignored. */
	else if (!strcmp(l, "lvlRestart") && attr_int(v, &x) && x >= 0 &&
		 x <= (int64_t)k)
		lv->reset_by = (int8_t)(x - 1);
}

/*
 * numbering.xml: each w:abstractNum's levels (w:lvl: w:start, w:numFmt,
 * w:lvlText, w:lvlRestart, w:isLgl) and each w:num, which names one
 * (w:abstractNumId) and may start its levels elsewhere
 * (w:lvlOverride/w:startOverride) or define them anew (w:lvlOverride/w:lvl:
 * numbered on with the others of its w:abstractNum, as LibreOffice shows
 * it).
 */
static void docx_numbering(struct xml_ctx *c, const char *l,
			   const XML_Char **atts)
{
	const char *v = attr_local(atts, "val");
	int64_t x;

	/* A definition inside another, as no valid document has, is not
	 * read: the one open points into the table the new one may move. */
	if (!strcmp(l, "abstractNum") && !c->ldef_depth &&
	    attr_int(attr_local(atts, "abstractNumId"), &x)) {
		c->ldef = list_def_new(c->lists, (uint64_t)x);
		c->ldef_depth = c->depth;
	} else if (!strcmp(l, "num") && !c->ldef_depth &&
		   attr_int(attr_local(atts, "numId"), &x)) {
		c->lnum = list_num_new(c->lists, (uint64_t)x);
		c->ldef_depth = c->depth;
	} else if (c->ldef && !strcmp(l, "lvl") &&
		   c->depth == c->ldef_depth + 1) {
		c->llvl = attr_int(attr_local(atts, "ilvl"), &x) && x >= 0 &&
					  x < LIST_LEVELS
				  ? &c->ldef->lvl[x]
				  : NULL;
		c->llvl_k = c->llvl ? (unsigned)x : 0;
		c->llvl_depth = c->depth;
	} else if (c->llvl && c->depth == c->llvl_depth + 1) {
		docx_lvl(c->llvl, c->llvl_k, l, v);
	} else if (c->lnum && c->lover && c->depth == c->ldef_depth + 2 &&
		   !strcmp(l, "lvl")) {
		/* The level defined anew for this w:num, whatever its own
		 * w:ilvl says. */
		c->llvl_k = (unsigned)c->lover - 1;
		c->llvl = &c->lnum->lvl[c->llvl_k];
		list_level_init(c->llvl, c->llvl_k);
		c->lnum->redefined |= (uint16_t)(1u << c->llvl_k);
		c->llvl_depth = c->depth;
	} else if (c->lnum && c->depth == c->ldef_depth + 1) {
		if (!strcmp(l, "abstractNumId") && attr_int(v, &x))
			c->lnum->def = (uint64_t)x;
		else if (!strcmp(l, "lvlOverride"))
			c->lover = attr_int(attr_local(atts, "ilvl"), &x) &&
						   x >= 0 && x < LIST_LEVELS
					   ? (int)x + 1
					   : 0;
	} else if (c->lnum && c->lover && c->depth == c->ldef_depth + 2 &&
		   !strcmp(l, "startOverride") && attr_int(v, &x)) {
		c->lnum->start[c->lover - 1] = (int32_t)x;
		c->lnum->restart |= (uint16_t)(1u << (c->lover - 1));
	}
}

/* A paragraph's w:numPr (in its w:pPr, or in its style's: w:pStyle, or a
 * style that one is based on), read as the w:pPr goes by. */
static void docx_para_num(struct xml_ctx *c, const char *l,
			  const XML_Char **atts)
{
	int64_t x;

	if (!strcmp(l, "pPr") && c->para_depth &&
	    c->depth == c->para_depth + 1) {
		c->ppr_depth = c->depth;
		c->num_id = -1;
		c->num_ilvl = 0;
		c->num_style = 0;
	} else if (!c->ppr_depth) {
		return;
	} else if (!strcmp(l, "numPr") && c->depth == c->ppr_depth + 1) {
		c->numpr_depth = c->depth;
	} else if (c->numpr_depth && c->depth == c->numpr_depth + 1 &&
		   attr_int(attr_local(atts, "val"), &x)) {
		if (!strcmp(l, "numId"))
			c->num_id = x;
		else if (!strcmp(l, "ilvl"))
			c->num_ilvl = x;
	} else if (!strcmp(l, "pStyle") && c->depth == c->ppr_depth + 1) {
		const char *v = attr_local(atts, "val");

		if (v)
			c->num_style =
				style_hash(c->styles, FAMILY_PARAGRAPH, v);
	}
}

/* The numbering a paragraph's style gives it, if its own says none:
 * the style's, or that of the nearest style it is based on. */
static void docx_style_num(struct xml_ctx *c)
{
	struct style *s = style_find(c->styles, c->num_style);

	for (unsigned n = 0; s && n < STYLE_CHAIN;
	     n++, s = style_find(c->styles, s->parent))
		if (s->has_num) {
			c->num_id = s->num_id;
			c->num_ilvl = s->num_ilvl;
			return;
		}
}

/* The end of a paragraph's w:pPr: its label, where it has one, before its
 * text. w:numId 0 is no list (a paragraph of a numbered style taken out
 * of it). */
static void docx_para_label(struct xml_ctx *c)
{
	struct list_level levels[LIST_LEVELS];
	const struct list_level *lv;
	char label[LIST_LABEL_MAX];
	struct list_count *count;
	struct list_num *num;
	struct list_def *def;
	unsigned k;

	c->ppr_depth = 0;
	if (c->styles_only || c->hide_depth)
		return;
	if (c->num_id < 0)
		docx_style_num(c);
	if (c->num_id <= 0 || c->num_ilvl < 0 || c->num_ilvl >= LIST_LEVELS)
		return;
	num = list_num_find(c->lists, (uint64_t)c->num_id);
	def = num ? list_def_find(c->lists, num->def) : NULL;
	if (!def)
		return;
	k = (unsigned)c->num_ilvl;
	lv = def->lvl;
	if (num->redefined) {
		memcpy(levels, def->lvl, sizeof(levels));
		for (unsigned j = 0; j < LIST_LEVELS; j++)
			if (num->redefined >> j & 1)
				levels[j] = num->lvl[j];
		lv = levels;
	}
	/* Word numbers the w:num of one w:abstractNum as one list, but for
	 * those that start elsewhere (pandoc's every list). */
	count = num->restart ? &num->count : &def->count;
	list_count_item(count, lv, k, num->restart, num->start);
	xml_put(c, label, list_label(count, lv, k, label));
}

#define ODF_TEXT "urn:oasis:names:tc:opendocument:xmlns:text:1.0\x01"

/* style:num-format's value ("" is no number). */
static enum im_list_fmt odf_num_fmt(const char *v, bool sync)
{
	if (!v || !*v)
		return IM_LIST_NONE;
	switch (*v) {
	case 'a':
		return sync ? IM_LIST_LOWER_LETTER_SYNC : IM_LIST_LOWER_LETTER;
	case 'A':
		return sync ? IM_LIST_UPPER_LETTER_SYNC : IM_LIST_UPPER_LETTER;
	case 'i': return IM_LIST_LOWER_ROMAN;
	case 'I': return IM_LIST_UPPER_ROMAN;
	default: return IM_LIST_DECIMAL;
	}
}

/* Append @p s to @p lv's label, as much as fits. */
static void lvl_text_put(struct list_level *lv, const char *s)
{
	size_t n = strlen(lv->text);

	for (; s && *s && n + 1 < LIST_TEXT_MAX; s++)
		lv->text[n++] = *s;
	lv->text[n] = '\0';
}

/*
 * A text:list-style's level of numbers (text:list-level-style-number, at
 * text:level 1 to 10): the label is its style:num-prefix, the numbers of
 * the text:display-levels levels up to it joined by '.', and its
 * style:num-suffix. Bullets and images label nothing.
 */
static void odf_list_level(struct xml_ctx *c, const XML_Char **atts)
{
	const char *sync = attr_local(atts, "num-letter-sync");
	struct list_level *lv;
	int64_t level, shown = 1, start;

	if (!attr_int(attr_local(atts, "level"), &level) || level < 1 ||
	    level > LIST_LEVELS)
		return;
	lv = &c->ldef->lvl[level - 1];
	lv->fmt = (uint8_t)odf_num_fmt(attr_local(atts, "num-format"),
				       sync && !strcmp(sync, "true"));
	if (attr_int(attr_local(atts, "start-value"), &start))
		lv->start = (int32_t)start;
	attr_int(attr_local(atts, "display-levels"), &shown);
	shown = shown < 1 ? 1 : shown > level ? level : shown;
	lv->text[0] = '\0';
	lvl_text_put(lv, attr_local(atts, "num-prefix"));
	for (int64_t k = level - shown; k < level; k++) {
		char ref[3] = {(char)(LIST_REF + k), '.', '\0'};

		ref[1] = k + 1 < level ? '.' : '\0';
		lvl_text_put(lv, ref);
	}
	lvl_text_put(lv, attr_local(atts, "num-suffix"));
}

/* The key of an odt's text:outline-style among its lists' (named by
 * style_hash(), never 0). */
#define OUTLINE_KEY 0

/*
 * A heading outside a list (text:h, at text:outline-level 1 to 10, 1 if it
 * says none) is numbered by the outline style, LibreOffice's "Chapter
 * numbering", unless it is a list header; text:restart-numbering starts
 * its level again, at its text:start-value if it has one. Its label, as
 * a list item's, goes before its text.
 */
static void odf_heading(struct xml_ctx *c, const XML_Char **atts)
{
	const char *v = attr_local(atts, "is-list-header");
	struct list_def *d;
	int32_t start[LIST_LEVELS];
	uint16_t restart = 0;
	int64_t level = 1, x;
	unsigned k;

	if (v && !strcmp(v, "true"))
		return;
	v = attr_local(atts, "outline-level");
	if ((v && !attr_int(v, &level)) || level < 1 || level > LIST_LEVELS)
		return;
	d = list_def_find(c->lists, OUTLINE_KEY);
	if (!d)
		return;
	k = (unsigned)level - 1;
	v = attr_local(atts, "restart-numbering");
	if (v && !strcmp(v, "true")) {
		c->outline_count.counted &= (uint16_t) ~(1u << k);
		if (attr_int(attr_local(atts, "start-value"), &x)) {
			start[k] = (int32_t)x;
			restart = (uint16_t)(1u << k);
		}
	}
	list_count_item(&c->outline_count, d->lvl, k, restart, start);
	c->pending_len = list_label(&c->outline_count, d->lvl, k, c->pending);
}

/*
 * odt lists: a text:list-style (styles.xml, or automatic in content.xml)
 * defines the levels; a text:list names it (a list nested in it names its
 * own or goes on with it) and numbers its text:list-item, one level a
 * nesting, as list_count_item() does; a list starts again at its first
 * numbers unless it continues the one before (text:continue-numbering,
 * text:continue-list). The label goes before the item's first paragraph.
 */
static void odf_list(struct xml_ctx *c, const XML_Char *name,
		     const XML_Char **atts)
{
	static const size_t ns = sizeof(ODF_TEXT) - 1;
	const char *l, *v;
	unsigned k;

	if (strncmp(name, ODF_TEXT, ns))
		return;
	l = name + ns;
	if (!strcmp(l, "list-style") && !c->ldef_depth) {
		v = attr_local(atts, "name");
		c->ldef = v ? list_def_new(c->lists, style_hash(c->styles,
								FAMILY_LIST, v))
			    : NULL;
		c->ldef_depth = c->depth;
	} else if (!strcmp(l, "outline-style") && !c->ldef_depth) {
		c->ldef = list_def_new(c->lists, OUTLINE_KEY);
		c->ldef_depth = c->depth;
	} else if ((!strcmp(l, "list-level-style-number") ||
		    !strcmp(l, "outline-level-style")) &&
		   c->ldef && c->depth == c->ldef_depth + 1) {
		odf_list_level(c, atts);
	} else if (c->styles_only) {
		/* styles.xml shows no text (its page headers' lists and
		 * headings): looking their lists up would close the table
		 * before content.xml's automatic list styles are in it. */
		return;
	} else if (!strcmp(l, "h") && !c->list_depth) {
		odf_heading(c, atts);
	} else if (!strcmp(l, "list")) {
		k = c->list_depth++;
		if (!k) {
			v = attr_local(atts, "continue-numbering");
			if (!(v && !strcmp(v, "true")) &&
			    !attr_local(atts, "continue-list"))
				c->list_count = (struct list_count){0};
		}
		if (k >= LIST_LEVELS)
			return;
		v = attr_local(atts, "style-name");
		c->list_defs[k] =
			v   ? list_def_find(c->lists,
					    style_hash(c->styles, FAMILY_LIST, v))
			: k ? c->list_defs[k - 1]
			    : NULL;
	} else if (!strcmp(l, "list-item") && c->list_depth &&
		   c->list_depth <= LIST_LEVELS) {
		int32_t start[LIST_LEVELS];
		int64_t x;
		uint16_t restart = 0;

		k = c->list_depth - 1;
		c->pending_len = 0;
		if (!c->list_defs[k])
			return;
		if (attr_int(attr_local(atts, "start-value"), &x)) {
			start[k] = (int32_t)x;
			restart = (uint16_t)(1u << k);
			c->list_count.counted &= (uint16_t) ~(1u << k);
		}
		list_count_item(&c->list_count, c->list_defs[k]->lvl, k,
				restart, start);
		c->pending_len = list_label(
			&c->list_count, c->list_defs[k]->lvl, k, c->pending);
	} else if (!strcmp(l, "list-header")) {
		c->pending_len = 0;
	}
}

/* a:buAutoNum's type (ST_TextAutonumberScheme): the Latin letters, Roman
 * numerals and Arabic numbers of "alphaLcParenR" (a), "romanUcPeriod"
 * (I.), "arabicPlain" (1); the others (circled, East Asian, Hebrew, Thai
 * ... numbers) as Arabic numbers with their scheme's affix, which the
 * words see alike. */
static struct dml_num dml_auto_num(const XML_Char **atts)
{
	static const struct {
		const char *name;
		enum im_list_fmt fmt;
	} fmts[] = {
		{"alphaLc", IM_LIST_LOWER_LETTER_SYNC},
		{"alphaUc", IM_LIST_UPPER_LETTER_SYNC},
		{"romanLc", IM_LIST_LOWER_ROMAN},
		{"romanUc", IM_LIST_UPPER_ROMAN},
	};
	const char *t = attr_local(atts, "type");
	struct dml_num n = {.on = true, .fmt = IM_LIST_DECIMAL, .start = 1};
	int64_t x;

	for (size_t i = 0; t && i < sizeof(fmts) / sizeof(fmts[0]); i++)
		if (has_prefix(t, fmts[i].name))
			n.fmt = (uint8_t)fmts[i].fmt;
	n.affix = !t			       ? DML_PERIOD
		  : has_suffix(t, "ParenBoth") ? DML_PAREN_BOTH
		  : has_suffix(t, "ParenR")    ? DML_PAREN_R
		  : has_suffix(t, "Period")    ? DML_PERIOD
					       : DML_PLAIN;
	if (attr_int(attr_local(atts, "startAt"), &x))
		n.start = (int32_t)x;
	return n;
}

/* The first text of a paragraph: count it in its level's run (a run of
 * another numbering starts again), and put its label before the text. A
 * paragraph ends the runs of the levels below it, and one with no number
 * its own level's; a paragraph with no text does neither, as it shows no
 * number. */
static void dml_label(struct xml_ctx *c)
{
	const struct dml_num *p = &c->dml_para;
	struct dml_num *run;
	char label[IM_LIST_NUMBER_MAX + 4];
	unsigned k = c->dml_lvl;
	size_t n = 0;

	c->dml_texted = true;
	if (k >= DML_LEVELS)
		return;
	for (unsigned m = k + 1; m < DML_LEVELS; m++)
		c->dml_run[m].on = false;
	run = &c->dml_run[k];
	if (!p->on) {
		run->on = false;
		return;
	}
	if (run->on && run->fmt == p->fmt && run->affix == p->affix &&
	    run->start == p->start)
		c->dml_cur[k]++;
	else
		c->dml_cur[k] = p->start;
	*run = *p;
	if (p->affix == DML_PAREN_BOTH)
		label[n++] = '(';
	n += im_list_number((enum im_list_fmt)p->fmt, c->dml_cur[k], label + n);
	if (p->affix != DML_PLAIN)
		label[n++] = p->affix == DML_PERIOD ? '.' : ')';
	label[n++] = ' ';
	xml_put(c, label, n);
}

/*
 * pptx: a paragraph whose properties (a:pPr, at level lvl 0 to 8) number
 * it (a:buAutoNum) starts with its number as PowerPoint shows it ("1. ",
 * "(c) ", "iv) "): paragraphs of one text body (a:txBody) at one level
 * with the same numbering count on, those of a level below them between
 * them, from startAt. A bullet (a:buChar, a:buBlip) or a:buNone numbers
 * nothing. Numbering a placeholder takes from the slide's layout or
 * master (a:lstStyle) is not read.
 */
static void dml_list(struct xml_ctx *c, const char *l, const XML_Char **atts)
{
	int64_t x;

	if (!strcmp(l, "txBody")) {
		memset(c->dml_run, 0, sizeof(c->dml_run));
	} else if (!strcmp(l, "p")) {
		c->dml_p_depth = c->depth;
		c->dml_para = (struct dml_num){0};
		c->dml_lvl = 0;
		c->dml_texted = false;
	} else if (!c->dml_p_depth) {
		return;
	} else if (!strcmp(l, "pPr") && c->depth == c->dml_p_depth + 1) {
		if (attr_int(attr_local(atts, "lvl"), &x))
			c->dml_lvl = x >= 0 && x < DML_LEVELS ? (unsigned)x
							      : DML_LEVELS;
	} else if (c->depth == c->dml_p_depth + 2 &&
		   (!strcmp(l, "buAutoNum") || !strcmp(l, "buNone") ||
		    !strcmp(l, "buChar") || !strcmp(l, "buBlip"))) {
		c->dml_para =
			l[2] == 'A' ? dml_auto_num(atts) : (struct dml_num){0};
	} else if (!strcmp(l, "t") && !c->dml_texted) {
		dml_label(c);
	}
}

static void XMLCALL xml_start(void *arg, const XML_Char *name,
			      const XML_Char **atts)
{
	struct xml_ctx *c = arg;
	const char *l = local_name(name);

	if (++c->depth > IM_EXTRACT_XML_DEPTH) {
		xml_stop(c, IM_XF_NESTING);
		return;
	}
	if (c->r->cells == CELLS_ODS && !c->num_depth && ods_cell_name(l))
		ods_cell(c, atts);
	else if (c->r->cells == CELLS_ODS && !strcmp(l, "null-date"))
		ods_null_date(c, atts);
	else if (c->r->cells == CELLS_XLSX && !strcmp(l, "c"))
		xlsx_cell(c, atts);
	else if (c->r->cells == CELLS_XLSX && c->cell && !strcmp(l, "v")) {
		c->in_v = true;
		c->nval = 0;
	}
	if (c->r->hidden == HIDDEN_DOCX)
		docx_hidden(c, l, atts);
	else if (c->r->hidden == HIDDEN_ODF)
		odf_hidden(c, l, atts);
	if (c->r->lists == LISTS_DOCX) {
		docx_numbering(c, l, atts);
		docx_para_num(c, l, atts);
	} else if (c->r->lists == LISTS_ODF) {
		odf_list(c, name, atts);
	} else if (c->r->lists == LISTS_DRAWINGML) {
		dml_list(c, l, atts);
	}
	if (in_list(c->r->space, l))
		xml_put(c, " ", 1);
	if (in_list(c->r->text, l))
		c->in_text++;
	if (c->r->within && !strcmp(c->r->within, l))
		c->in_within++;
	if (skipped(c, name, l))
		c->in_skip++;
	if (c->pending_len && (!strcmp(l, "p") || !strcmp(l, "h"))) {
		if (!c->in_skip && !c->hide_depth && c->in_within)
			xml_put(c, c->pending, c->pending_len);
		c->pending_len = 0;
	}
}

static void XMLCALL xml_end(void *arg, const XML_Char *name)
{
	struct xml_ctx *c = arg;
	const char *l = local_name(name);

	if (c->num_depth == c->depth)
		c->num_depth = 0;
	if (c->in_v && !strcmp(l, "v"))
		xlsx_value(c);
	if (c->r->cells == CELLS_XLSX && !strcmp(l, "c"))
		c->cell = 0;
	if (c->hide_depth == c->depth)
		c->hide_depth = 0;
	if (c->run_depth == c->depth)
		c->run_depth = 0;
	if (c->rpr_depth == c->depth)
		c->rpr_depth = 0;
	if (c->para_depth == c->depth)
		c->para_depth = 0;
	if (c->style_rpr_depth == c->depth)
		c->style_rpr_depth = 0;
	if (c->style_ppr_depth == c->depth)
		c->style_ppr_depth = 0;
	if (c->ppr_depth == c->depth)
		docx_para_label(c);
	if (c->numpr_depth == c->depth)
		c->numpr_depth = 0;
	if (c->llvl_depth == c->depth) {
		c->llvl_depth = 0;
		c->llvl = NULL;
	}
	if (c->lover && c->depth == c->ldef_depth + 1)
		c->lover = 0;
	if (c->ldef_depth == c->depth) {
		c->ldef_depth = 0;
		c->ldef = NULL;
		c->lnum = NULL;
	}
	if (c->r->lists == LISTS_ODF &&
	    !strncmp(name, ODF_TEXT, sizeof(ODF_TEXT) - 1)) {
		if (c->list_depth && !strcmp(l, "list"))
			c->list_depth--;
		else if (!strcmp(l, "list-item"))
			c->pending_len = 0;
	}
	if (c->dml_p_depth == c->depth)
		c->dml_p_depth = 0;
	if (c->style_depth == c->depth) {
		c->style_depth = 0;
		c->style_key = 0;
	}
	c->depth--;
	if (c->in_text && in_list(c->r->text, l))
		c->in_text--;
	if (c->in_within && c->r->within && !strcmp(c->r->within, l))
		c->in_within--;
	if (c->in_skip && skipped(c, name, l))
		c->in_skip--;
	if (in_list(c->r->nl_end, l))
		xml_put(c, "\n", 1);
}

static void XMLCALL xml_chars(void *arg, const XML_Char *s, int len)
{
	struct xml_ctx *c = arg;

	if (c->in_v && c->cell == 's') {
		xml_put(c, s, (size_t)len);
		return;
	}
	if (c->in_v) {
		if (c->nval + (size_t)len < sizeof(c->val)) {
			memcpy(c->val + c->nval, s, (size_t)len);
			c->nval += (size_t)len;
		} else {
			c->nval = sizeof(c->val);
		}
		return;
	}
	if (!c->in_skip && !c->num_depth && !c->hide_depth &&
	    (c->r->text ? c->in_text : c->in_within))
		xml_put(c, s, (size_t)len);
}

static void XMLCALL xml_entity_decl(void *arg, const XML_Char *name,
				    int is_param, const XML_Char *value,
				    int value_len, const XML_Char *base,
				    const XML_Char *system_id,
				    const XML_Char *public_id,
				    const XML_Char *notation)
{
	(void)name, (void)is_param, (void)value, (void)value_len, (void)base;
	(void)system_id, (void)public_id, (void)notation;
	xml_stop(arg, IM_XF_ENTITIES);
}

/* A parser with our safety settings; its user data is @p ctx. */
static XML_Parser xml_parser(void *ctx)
{
	XML_Parser p = xp.parser_create_ns(NULL, '\x01');

	if (!p)
		return NULL;
	xp.set_user_data(p, ctx);
	xp.set_entity_decl_handler(p, xml_entity_decl);
	xp.set_param_entity_parsing(p, XML_PARAM_ENTITY_PARSING_NEVER);
	return p;
}

/* @return 0, a failure, or -ENOMEM. */
static int xml_parse(XML_Parser p, const struct im_buf *data, int *fail)
{
	if (data->len > INT_MAX)
		return IM_XF_EXPANSION;
	if (xp.parse(p, data->p ? data->p : "", (int)data->len, XML_TRUE) !=
	    XML_STATUS_OK) {
		if (*fail)
			return *fail;
		return xp.get_error_code(p) == XML_ERROR_NO_MEMORY
			       ? -ENOMEM
			       : IM_XF_CORRUPT;
	}
	return *fail;
}

/* The text of one part, a line after it; a part of styles (@p text
 * false) only defines @p styles, for the parts after it. */
static int xml_text(const struct im_buf *data, const struct xml_rules *r,
		    const struct im_extract_opts *o, struct im_buf *out,
		    struct im_buf *nums, struct styles *styles,
		    struct lists *lists, bool text)
{
	struct xml_ctx c = {.r = r,
			    .o = o,
			    .out = out,
			    .nums = nums,
			    .styles = styles,
			    .lists = lists,
			    .styles_only = !text};
	int ret;

	c.p = xml_parser(&c);
	if (!c.p)
		return -ENOMEM;
	xp.set_element_handler(c.p, xml_start, xml_end);
	xp.set_character_data_handler(c.p, xml_chars);
	ret = xml_parse(c.p, data, &c.fail);
	xp.parser_free(c.p);
	if (!ret && text)
		ret = im_buf_putc(out, '\n') ? -ENOMEM : 0;
	return ret;
}

/* ---- Office formats ------------------------------------------------------ */

static const char *const t_only[] = {"t", NULL};

static const struct xml_rules docx_rules = {
	.text = t_only,
	.nl_end = (const char *const[]){"p", "tr", NULL},
	.space = (const char *const[]){"tab", "br", "cr", "tc", NULL},
	.hidden = HIDDEN_DOCX,
	.lists = LISTS_DOCX,
};
static const struct xml_rules xlsx_rules = {
	.text = t_only,
	.nl_end = (const char *const[]){"si", "is", NULL},
	.cells = CELLS_XLSX,
};
static const struct xml_rules pptx_rules = {
	.text = t_only,
	.nl_end = (const char *const[]){"p", NULL},
	.space = (const char *const[]){"br", "tab", NULL},
	.lists = LISTS_DRAWINGML,
};
#define ODF_SVG "urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0\x01"

/* What docx and doc keep out of their text as well: deleted text kept for
 * undo (w:delText) and comments (comments.xml, never read); a note's
 * number (w:footnoteReference is no text), an index's template of
 * entries and title (the index body holds what a reader sees), and an
 * image's or shape's alt text (wp:docPr's descr, an attribute), which
 * svg:title and svg:desc hold (text:title is a field: kept). */
#define ODF_SKIP                                                               \
	"tracked-changes", "annotation", "note-citation",                      \
		"table-of-content-source", "alphabetical-index-source",        \
		"illustration-index-source", "table-index-source",             \
		"object-index-source", "user-index-source",                    \
		"bibliography-source", ODF_SVG "title", ODF_SVG "desc", NULL

/* odt and odp. */
static const struct xml_rules odf_rules = {
	.within = "body",
	.nl_end = (const char *const[]){"p", "h", "list-item", "table-cell",
					"frame", NULL},
	/* A note starts a word: its number, which ran into the words on
	 * either side, is left out. */
	.space = (const char *const[]){"s", "tab", "line-break", "note", NULL},
	.skip = (const char *const[]){ODF_SKIP},
	.hidden = HIDDEN_ODF,
	.lists = LISTS_ODF,
};
/* odf_rules, and number cells. */
static const struct xml_rules ods_rules = {
	.within = "body",
	.nl_end = (const char *const[]){"p", "h", "list-item", "table-cell",
					"frame", NULL},
	.space = (const char *const[]){"s", "tab", "line-break", "note", NULL},
	.skip = (const char *const[]){ODF_SKIP},
	.cells = CELLS_ODS,
};

/* Where a document keeps the styles and list numbers its text names
 * (read first). */
static bool styles_part(const char *n)
{
	return !strcmp(n, "word/styles.xml") || !strcmp(n, "styles.xml") ||
	       !strcmp(n, "word/numbering.xml");
}

static bool want_docx(const char *n)
{
	return !strcmp(n, "word/document.xml") ||
	       !strcmp(n, "word/styles.xml") ||
	       !strcmp(n, "word/numbering.xml") ||
	       !strcmp(n, "word/footnotes.xml") ||
	       !strcmp(n, "word/endnotes.xml");
}

static bool want_xlsx(const char *n)
{
	return !strcmp(n, "xl/sharedStrings.xml") ||
	       (has_prefix(n, "xl/worksheets/") && has_suffix(n, ".xml"));
}

static bool want_pptx(const char *n)
{
	return (has_prefix(n, "ppt/slides/") ||
		has_prefix(n, "ppt/notesSlides/")) &&
	       has_suffix(n, ".xml");
}

static bool want_odf(const char *n)
{
	return !strcmp(n, "content.xml");
}

/* odt and odp: their styles too, which may hide text. */
static bool want_odf_styled(const char *n)
{
	return !strcmp(n, "content.xml") || !strcmp(n, "styles.xml");
}

/* Entry order for docx (the body first) and pptx (slides before notes, by
 * number: slide2 before slide10). */
static unsigned long name_number(const char *s)
{
	while (*s && (*s < '0' || *s > '9'))
		s++;
	return strtoul(s, NULL, 10);
}

static int part_rank(const char *n)
{
	if (styles_part(n))
		return -1;
	if (!strcmp(n, "word/document.xml") ||
	    !strcmp(n, "xl/sharedStrings.xml"))
		return 0;
	if (has_prefix(n, "ppt/notesSlides/"))
		return 2;
	return 1;
}

static int part_cmp(const void *a, const void *b)
{
	const struct part *x = a, *y = b;
	int rx = part_rank(x->name), ry = part_rank(y->name);
	unsigned long nx, ny;

	if (rx != ry)
		return rx - ry;
	nx = name_number(strrchr(x->name, '/') ? strrchr(x->name, '/') : "");
	ny = name_number(strrchr(y->name, '/') ? strrchr(y->name, '/') : "");
	if (nx != ny)
		return nx < ny ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int office_text(const char *buf, size_t len, want_fn want,
		       const struct xml_rules *rules,
		       const struct im_extract_opts *o, struct im_buf *out)
{
	struct im_buf nums = {0};
	struct parts ps = {0};
	struct styles styles = {0};
	struct lists lists = {0};
	size_t texts = 0;
	int ret;

	ret = zip_collect(buf, len, o, want, &ps);
	for (size_t i = 0; i < ps.n; i++)
		texts += !styles_part(ps.v[i].name);
	if (!ret && !texts)
		ret = IM_XF_CORRUPT;
	if (!ret)
		qsort(ps.v, ps.n, sizeof(*ps.v), part_cmp);
	for (size_t i = 0; i < ps.n && !ret; i++)
		ret = xml_text(&ps.v[i].data, rules, o, out,
			       rules->cells ? &nums : NULL, &styles, &lists,
			       !styles_part(ps.v[i].name));
	if (!ret)
		ret = im_extract_put_numbers(out, &nums);
	free(styles.slot);
	lists_release(&lists);
	im_buf_release(&nums);
	parts_release(&ps);
	return ret;
}

/* ---- EPUB ---------------------------------------------------------------- */

struct opf_item {
	char *id, *href;
	bool nav;
};

struct epub {
	XML_Parser p;
	int fail;
	unsigned depth;
	char *rootfile;	       /* from container.xml */
	struct opf_item *item; /* manifest */
	size_t nitem, icap;
	char **spine; /* idrefs, in order */
	size_t nspine, scap;
};

static const char *attr(const XML_Char **atts, const char *name)
{
	for (; atts[0]; atts += 2)
		if (!strcmp(local_name(atts[0]), name))
			return atts[1];
	return NULL;
}

static int push_str(char ***v, size_t *n, size_t *cap, const char *s)
{
	if (*n == *cap) {
		size_t c = *cap ? 2 * *cap : 16;
		char **nv = realloc(*v, c * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		*v = nv;
		*cap = c;
	}
	(*v)[*n] = strdup(s);
	if (!(*v)[*n])
		return -ENOMEM;
	(*n)++;
	return 0;
}

static int opf_item_add(struct epub *e, const char *id, const char *href,
			const char *props)
{
	struct opf_item *it;

	if (e->nitem == e->icap) {
		size_t c = e->icap ? 2 * e->icap : 16;
		struct opf_item *v = realloc(e->item, c * sizeof(*v));

		if (!v)
			return -ENOMEM;
		e->item = v;
		e->icap = c;
	}
	it = &e->item[e->nitem];
	it->id = strdup(id);
	it->href = strdup(href);
	it->nav = props && strstr(props, "nav");
	if (!it->id || !it->href) {
		free(it->id);
		free(it->href);
		return -ENOMEM;
	}
	e->nitem++;
	return 0;
}

static void XMLCALL epub_start(void *arg, const XML_Char *name,
			       const XML_Char **atts)
{
	struct epub *e = arg;
	const char *l = local_name(name), *a, *b;
	int ret = 0;

	if (++e->depth > IM_EXTRACT_XML_DEPTH) {
		e->fail = IM_XF_NESTING;
		xp.stop_parser(e->p, XML_FALSE);
		return;
	}
	if (!strcmp(l, "rootfile") && !e->rootfile &&
	    (a = attr(atts, "full-path"))) {
		e->rootfile = strdup(a);
		ret = e->rootfile ? 0 : -ENOMEM;
	} else if (!strcmp(l, "item") && (a = attr(atts, "id")) &&
		   (b = attr(atts, "href"))) {
		ret = opf_item_add(e, a, b, attr(atts, "properties"));
	} else if (!strcmp(l, "itemref") && (a = attr(atts, "idref"))) {
		b = attr(atts, "linear");
		if (!b || strcmp(b, "no"))
			ret = push_str(&e->spine, &e->nspine, &e->scap, a);
	}
	if (ret) {
		e->fail = ret;
		xp.stop_parser(e->p, XML_FALSE);
	}
}

static void XMLCALL epub_end(void *arg, const XML_Char *name)
{
	(void)name;
	((struct epub *)arg)->depth--;
}

static void XMLCALL epub_entity_decl(void *arg, const XML_Char *name,
				     int is_param, const XML_Char *value,
				     int value_len, const XML_Char *base,
				     const XML_Char *system_id,
				     const XML_Char *public_id,
				     const XML_Char *notation)
{
	struct epub *e = arg;

	(void)name, (void)is_param, (void)value, (void)value_len, (void)base;
	(void)system_id, (void)public_id, (void)notation;
	e->fail = IM_XF_ENTITIES;
	xp.stop_parser(e->p, XML_FALSE);
}

static int epub_parse(struct epub *e, const struct im_buf *data)
{
	int ret;

	e->p = xp.parser_create_ns(NULL, '\x01');
	if (!e->p)
		return -ENOMEM;
	xp.set_user_data(e->p, e);
	xp.set_entity_decl_handler(e->p, epub_entity_decl);
	xp.set_param_entity_parsing(e->p, XML_PARAM_ENTITY_PARSING_NEVER);
	xp.set_element_handler(e->p, epub_start, epub_end);
	e->depth = 0;
	ret = xml_parse(e->p, data, &e->fail);
	xp.parser_free(e->p);
	e->p = NULL;
	return ret;
}

static void epub_release(struct epub *e)
{
	free(e->rootfile);
	for (size_t i = 0; i < e->nitem; i++) {
		free(e->item[i].id);
		free(e->item[i].href);
	}
	free(e->item);
	for (size_t i = 0; i < e->nspine; i++)
		free(e->spine[i]);
	free(e->spine);
}

static bool want_epub(const char *n)
{
	return !strcmp(n, "META-INF/container.xml") || has_suffix(n, ".opf") ||
	       has_suffix(n, ".xhtml") || has_suffix(n, ".html") ||
	       has_suffix(n, ".htm");
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
		return (c | 0x20) - 'a' + 10;
	return -1;
}

/* The entry an href of the package at @p opf names: relative to the
 * package's directory, %XX decoded, "./" and "../" resolved. */
static char *resolve_href(const char *opf, const char *href)
{
	const char *slash = strrchr(opf, '/');
	size_t dl = slash ? (size_t)(slash - opf) + 1 : 0;
	size_t n = strlen(href);
	char *s = malloc(dl + n + 1), *w, *r;

	if (!s)
		return NULL;
	memcpy(s, opf, dl);
	w = s + dl;
	for (size_t i = 0; i < n && href[i] != '#'; i++) {
		int hi, lo;

		if (href[i] == '%' && i + 2 < n &&
		    (hi = hex_digit(href[i + 1])) >= 0 &&
		    (lo = hex_digit(href[i + 2])) >= 0) {
			*w++ = (char)(hi << 4 | lo);
			i += 2;
		} else {
			*w++ = href[i];
		}
	}
	*w = '\0';
	/* Resolve "./" and "dir/../" in place, each in one pass (w behind
	 * r): searched from the start and moved down one at a time, the
	 * thousands of them one href may hold cost seconds, and an href is
	 * resolved at every spine entry naming its item. */
	for (r = w = s; *r;)
		if (w > s && w[-1] == '/' && r[0] == '.' && r[1] == '/')
			r += 2;
		else
			*w++ = *r++;
	*w = '\0';
	if (!strncmp(s, "./", 2))
		memmove(s, s + 2, strlen(s + 2) + 1);
	for (r = w = s; *r;)
		if (w > s && w[-1] == '/' && r[0] == '.' && r[1] == '.' &&
		    r[2] == '/') {
			for (w--; w > s && w[-1] != '/';)
				w--;
			r += 3;
		} else {
			*w++ = *r++;
		}
	*w = '\0';
	return s;
}

/* The text of one (X)HTML page, head and all: html.c leaves its <title> out
 * (a file name or a repeat of a heading, not the book's text), and the
 * head's generator <meta> tells it a note's number is pandoc's mark. Text
 * past @p max_text (0: no cap) fails at once: a spine may name one page
 * many times, so the pages' sizes do not bound the book's. Nor its work:
 * a page with no text (a comment, tags), named 20,000 times from 5 KB,
 * was read for minutes, so every read counts against *left, what may yet
 * be read (max_unpacked, as the pages' unpacking). */
static int page_text(const struct im_buf *page, size_t max_text, size_t *left,
		     struct im_buf *out)
{
	int ret;

	if (page->len > *left)
		return IM_XF_EXPANSION;
	*left -= page->len;
	ret = im_html_text(page->p ? page->p : "", page->len, out);
	if (!ret && max_text && out->len > max_text)
		ret = IM_XF_OUTPUT;
	return ret;
}

/*
 * A spine may name 100,000 idrefs against 100,000 manifest items and as
 * many pages (a 495 KB epub): matched by a search from the start each,
 * they held the helper to its 30 s deadline. Both records put their name
 * first (part.name, opf_item.id), so one index serves both: pointers to
 * the records, sorted by name, then by place, so that a lookup finds the
 * first record of a name, as the search from the start did.
 */
static int name_place_cmp(const void *a, const void *b)
{
	char *const *x = *(char *const *const *)a;
	char *const *y = *(char *const *const *)b;
	int r = strcmp(*x, *y);

	return r ? r : (x > y) - (x < y);
}

/* The first of the @p n sorted records of @p idx named @p name, or NULL. */
static void *name_find(char **const *idx, size_t n, const char *name)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(*idx[mid], name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && !strcmp(*idx[lo], name) ? (void *)idx[lo] : NULL;
}

static int epub_text(const char *buf, size_t len,
		     const struct im_extract_opts *o, struct im_buf *out)
{
	struct parts ps = {0};
	struct epub e = {0};
	struct part *pk, *c;
	char ***items = NULL, ***pages = NULL;
	size_t done = 0, nitems = 0;
	size_t left = o->max_unpacked ? o->max_unpacked : SIZE_MAX;
	int ret;

	ret = zip_collect(buf, len, o, want_epub, &ps);
	if (ret)
		goto out;
	c = parts_find(&ps, "META-INF/container.xml");
	if (c)
		ret = epub_parse(&e, &c->data);
	if (!ret && e.rootfile && (pk = parts_find(&ps, e.rootfile)))
		ret = epub_parse(&e, &pk->data);
	if (!ret && e.nspine) {
		items = malloc((e.nitem ? e.nitem : 1) * sizeof(*items));
		pages = malloc((ps.n ? ps.n : 1) * sizeof(*pages));
		if (!items || !pages)
			ret = -ENOMEM;
	}
	if (!ret && e.nspine) {
		/* A navigation document is no page of the book. */
		for (size_t j = 0; j < e.nitem; j++)
			if (!e.item[j].nav)
				items[nitems++] = &e.item[j].id;
		for (size_t j = 0; j < ps.n; j++)
			pages[j] = &ps.v[j].name;
		qsort(items, nitems, sizeof(*items), name_place_cmp);
		qsort(pages, ps.n, sizeof(*pages), name_place_cmp);
	}
	for (size_t i = 0; i < e.nspine && !ret; i++) {
		struct opf_item *it = name_find(items, nitems, e.spine[i]);
		char *path;
		struct part *p;

		if (!it)
			continue;
		path = resolve_href(e.rootfile, it->href);
		if (!path) {
			ret = -ENOMEM;
			break;
		}
		p = name_find(pages, ps.n, path);
		free(path);
		if (p) {
			ret = page_text(&p->data, o->max_text, &left, out);
			done++;
		}
	}
	/* No usable package: every page, in name order. */
	if (!ret && !done) {
		if (ps.n > 1) /* ps.v is NULL when no part was kept */
			qsort(ps.v, ps.n, sizeof(*ps.v), part_cmp);
		for (size_t i = 0; i < ps.n && !ret; i++)
			if (has_suffix(ps.v[i].name, "htm") ||
			    has_suffix(ps.v[i].name, "html")) {
				ret = page_text(&ps.v[i].data, o->max_text,
						&left, out);
				done++;
			}
		/* Neither a package naming a page that is there nor any
		 * page at all: broken, not an empty book. */
		if (!ret && !done)
			ret = IM_XF_CORRUPT;
	}
	if (ret < 0 && ret != -ENOMEM)
		ret = IM_XF_CORRUPT;
	if (!ret && o->max_text && out->len > o->max_text)
		ret = IM_XF_OUTPUT;
out:
	free(items);
	free(pages);
	epub_release(&e);
	parts_release(&ps);
	return ret;
}

int im_zipdoc_text(enum im_format f, const char *buf, size_t len,
		   const struct im_extract_opts *o, struct im_buf *out)
{
	if (!im_xml_load())
		return IM_XF_LIBRARY;
	switch (f) {
	case IM_FMT_DOCX:
		return office_text(buf, len, want_docx, &docx_rules, o, out);
	case IM_FMT_XLSX:
		return office_text(buf, len, want_xlsx, &xlsx_rules, o, out);
	case IM_FMT_PPTX:
		return office_text(buf, len, want_pptx, &pptx_rules, o, out);
	case IM_FMT_ODS:
		return office_text(buf, len, want_odf, &ods_rules, o, out);
	case IM_FMT_ODT:
		return office_text(buf, len, want_odf_styled, &odf_rules, o,
				   out);
	case IM_FMT_ODP:
		return office_text(buf, len, want_odf_styled, &odf_rules, o,
				   out);
	case IM_FMT_EPUB: return epub_text(buf, len, o, out);
	default: return -EINVAL;
	}
}

/* ---- Compressed single files --------------------------------------------- */

int im_unpack(const char *buf, size_t len, const struct im_extract_opts *o,
	      struct im_buf *out)
{
	size_t budget = o->max_unpacked ? o->max_unpacked : SIZE_MAX;
	struct archive_entry *e;
	struct archive *a;
	int ret;

	if (!im_archive_load())
		return IM_XF_LIBRARY;
	a = la.read_new();
	if (!a)
		return -ENOMEM;
	la.support_filter_gzip(a);
	la.support_filter_bzip2(a);
	la.support_filter_xz(a);
	la.support_format_raw(a);
	if (la.open_memory(a, buf, len) != ARCHIVE_OK ||
	    la.next_header(a, &e) != ARCHIVE_OK) {
		ret = IM_XF_CORRUPT;
		goto out;
	}
	ret = read_entry(a, out, &budget);
out:
	la.read_free(a);
	return ret;
}
