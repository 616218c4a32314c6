/**
 * @file pdf.c
 * PDF to text through poppler's GLib binding, page by page in reading order
 * (poppler_page_get_text(): the text output device without physical layout),
 * then two repairs so that the PDF of a text yields the text's terms:
 *   - ligatures U+FB00-U+FB06 (ﬀ ﬁ ﬂ ﬃ ﬄ ﬅ ﬆ) become their letters, which
 *     typesetters substitute and poppler reports as they are drawn;
 *   - a word broken at a line end by a hyphen ("exam-\nple", also with
 *     U+2010 or a soft hyphen) is joined when the next line goes on with a
 *     lower-case letter, so "exam-" and "ple" do not replace "example".
 *     A capital after the break ("Jean-\nPaul") keeps the hyphen.
 *   - a line of Chinese or Japanese that fills the page's width and runs on
 *     into the next ("…直接靠\n泊。"), both sides ideographs or kana, is
 *     joined: these scripts break lines anywhere, without a space, so the
 *     break is no word's end, and the other formats of the text have none.
 *     A shorter line (a heading, a list item) keeps its end.
 * Runs inside a sandboxed helper (sandbox.c): poppler parses hostile input.
 *
 * poppler is loaded with dlopen() on first need, not linked: it pulls in
 * about fifty libraries (cairo, freetype, nss, libstdc++, ...) whose
 * loading and relocation cost every start of imatch some 40 ms of CPU,
 * as much as reading 20 MB of text, even for a tree without a PDF. The
 * helpers are forked without exec and then cannot open files, so
 * sandbox.c loads it (im_pdf_load()) before it forks the first one.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include <poppler.h>

#include "extract_internal.h"

/* The functions used here, from poppler-glib and the GLib it links. */
static struct {
	GBytes *(*bytes_new_static)(gconstpointer, gsize);
	void (*bytes_unref)(GBytes *);
	gboolean (*error_matches)(const GError *, GQuark, gint);
	void (*error_free)(GError *);
	void (*free)(gpointer);
	void (*object_unref)(gpointer);
	GQuark (*error_quark)(void);
	PopplerDocument *(*document_new_from_bytes)(GBytes *, const char *,
						    GError **);
	int (*document_get_n_pages)(PopplerDocument *);
	PopplerPage *(*document_get_page)(PopplerDocument *, int);
	char *(*page_get_text)(PopplerPage *);
} pp;
static bool pp_ok;
static pthread_once_t pp_once = PTHREAD_ONCE_INIT;

static void pp_load(void)
{
	/* The library is never closed: its GObject types stay registered. */
	const struct im_dlsym syms[] = {
		{"g_bytes_new_static", (void **)&pp.bytes_new_static},
		{"g_bytes_unref", (void **)&pp.bytes_unref},
		{"g_error_matches", (void **)&pp.error_matches},
		{"g_error_free", (void **)&pp.error_free},
		{"g_free", (void **)&pp.free},
		{"g_object_unref", (void **)&pp.object_unref},
		{"poppler_error_quark", (void **)&pp.error_quark},
		{"poppler_document_new_from_bytes",
		 (void **)&pp.document_new_from_bytes},
		{"poppler_document_get_n_pages",
		 (void **)&pp.document_get_n_pages},
		{"poppler_document_get_page", (void **)&pp.document_get_page},
		{"poppler_page_get_text", (void **)&pp.page_get_text},
	};

	pp_ok = im_dl_load("libpoppler-glib.so.8", "libpoppler-glib.so", syms,
			   sizeof(syms) / sizeof(syms[0]));
}

bool im_pdf_load(void)
{
	pthread_once(&pp_once, pp_load);
	return pp_ok;
}

/* The UTF-8 of U+FB00..U+FB06 is EF AC 80..86. */
static const char *const ligatures[7] = {"ff",	"fi", "fl", "ffi",
					 "ffl", "st", "st"};

static bool starts_lower(const char *s, const char *end)
{
	/* Non-ASCII letters are taken as lower case: a break before "über"
	 * is common, one before an accented capital rare. */
	return s < end &&
	       ((*s >= 'a' && *s <= 'z') || (unsigned char)*s >= 0xc0);
}

static bool is_capital(char c)
{
	return c >= 'A' && c <= 'Z';
}

/*
 * A break inside a word of capitals: two before the hyphen and two after
 * it. Typesetters hyphenate upper-case text too (a licence's disclaimer:
 * "PAR-" / "TICULAR", "SOFT-" / "WARE"), and left split those words made
 * two terms each of one. A name joined by a hyphen at a line end ("JEAN-"
 * / "PAUL") is joined too: rarer than hyphenated capitals.
 */
static bool in_capitals(const struct im_buf *out, const char *s,
			const char *end)
{
	return out->len >= 2 && is_capital(out->p[out->len - 1]) &&
	       is_capital(out->p[out->len - 2]) && end - s >= 2 &&
	       is_capital(s[0]) && is_capital(s[1]);
}

static bool ends_in_letter(const struct im_buf *out)
{
	unsigned char c;

	if (!out->len)
		return false;
	c = (unsigned char)out->p[out->len - 1];
	return c >= 0x80 || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
}

/* Length of a hyphen at s: '-', U+2010 or U+00AD; 0 for none. */
static size_t hyphen_len(const char *s, const char *end)
{
	if (s < end && *s == '-')
		return 1;
	if (end - s >= 3 && !memcmp(s, "\xe2\x80\x90", 3))
		return 3;
	if (end - s >= 2 && !memcmp(s, "\xc2\xad", 2))
		return 2;
	return 0;
}

/* Ideographs and kana: scripts written without spaces between words. */
static bool unspaced(uint32_t c)
{
	return (c >= 0x3040 && c <= 0x30ff) || (c >= 0x3400 && c <= 0x4dbf) ||
	       (c >= 0x4e00 && c <= 0x9fff) || (c >= 0xf900 && c <= 0xfaff) ||
	       (c >= 0xff66 && c <= 0xff9f) || (c >= 0x20000 && c <= 0x3ffff);
}

/* The code point at s (U+FFFD for a byte that starts none) and its length. */
static size_t cp_at(const char *s, const char *end, uint32_t *cp)
{
	size_t n = im_utf8_decode((const unsigned char *)s,
				  (const unsigned char *)end, cp);

	if (!n)
		*cp = 0xfffd;
	return n ? n : 1;
}

/* The width of s[0, len) as it is drawn: East Asian wide characters (from
 * U+1100 on, roughly) count two, others one. */
static size_t width(const char *s, const char *end)
{
	size_t w = 0;
	uint32_t cp;

	while (s < end) {
		s += cp_at(s, end, &cp);
		w += cp >= 0x1100 ? 2 : 1;
	}
	return w;
}

/* The widest line of a page's text. */
static size_t widest(const char *s, const char *end)
{
	size_t w = 0;

	while (s < end) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		const char *e = nl ? nl : end;
		size_t lw = width(s, e);

		w = lw > w ? lw : w;
		s = nl ? nl + 1 : end;
	}
	return w;
}

/* Whether the line break at @p nl, after the line that began at @p line,
 * falls inside a run of ideographs or kana of a line as wide as the page's
 * widest but a few characters (@p w). */
static bool unspaced_break(const char *line, const char *nl, const char *end,
			   size_t w)
{
	const char *p = nl;
	uint32_t before, after;

	while (p > line && ((unsigned char)p[-1] & 0xc0) == 0x80)
		p--;
	if (p == line || nl + 1 >= end)
		return false;
	cp_at(p - 1, nl, &before);
	cp_at(nl + 1, end, &after);
	return unspaced(before) && unspaced(after) &&
	       width(line, nl) * 10 >= w * 9;
}

/* Append one page's text with ligatures expanded and breaks joined. */
static int page_append(const char *s, size_t len, struct im_buf *out)
{
	const char *end = s + len, *line = s;
	size_t w = widest(s, end);
	int ret = 0;

	while (s < end && !ret) {
		size_t h = hyphen_len(s, end);

		if (*s == '\n') {
			bool join = unspaced_break(line, s, end, w);

			line = s + 1;
			if (join) {
				s++;
				continue;
			}
		}

		if (h && ends_in_letter(out)) {
			const char *n = s + h;

			if (n < end && *n == '\r')
				n++;
			if (n < end && *n == '\n' &&
			    (starts_lower(n + 1, end) ||
			     in_capitals(out, n + 1, end))) {
				s = line = n + 1;
				continue;
			}
		}
		if (end - s >= 3 && !memcmp(s, "\xef\xac", 2) &&
		    (unsigned char)s[2] >= 0x80 &&
		    (unsigned char)s[2] <= 0x86) {
			const char *l = ligatures[(unsigned char)s[2] - 0x80];

			ret = im_buf_append(out, l, strlen(l));
			s += 3;
			continue;
		}
		ret = im_buf_putc(out, *s++);
	}
	return ret;
}

int im_pdf_text(const char *buf, size_t len, const struct im_extract_opts *o,
		struct im_buf *out)
{
	PopplerDocument *doc = NULL;
	GError *err = NULL;
	GBytes *bytes;
	int ret = 0, pages;

	if (!im_pdf_load())
		return IM_XF_LIBRARY;
	bytes = pp.bytes_new_static(buf, len);
	doc = pp.document_new_from_bytes(bytes, NULL, &err);
	if (!doc) {
		ret = err && pp.error_matches(err, pp.error_quark(),
					      POPPLER_ERROR_ENCRYPTED)
			      ? IM_XF_ENCRYPTED
			      : IM_XF_CORRUPT;
		goto out;
	}
	pages = pp.document_get_n_pages(doc);
	for (int i = 0; i < pages && !ret; i++) {
		PopplerPage *page = pp.document_get_page(doc, i);
		char *t;

		if (!page)
			continue;
		t = pp.page_get_text(page);
		if (t) {
			ret = page_append(t, strlen(t), out);
			if (!ret)
				ret = im_buf_putc(out, '\n');
			pp.free(t);
		}
		pp.object_unref(page);
		if (!ret && o->max_text && out->len > o->max_text)
			ret = IM_XF_OUTPUT;
	}
out:
	if (err)
		pp.error_free(err);
	if (doc)
		pp.object_unref(doc);
	pp.bytes_unref(bytes);
	return ret;
}
