/*
 * libFuzzer targets, one per extractor entry point, chosen at build time
 * with -DFUZZ_ENTRY=...: the extractors run in the fuzzer's process (the
 * sandbox off), so the sanitizers see every read.
 *   FUZZ_SNIFF   im_extract(): sniffing, then text, UTF-16, windows-1252,
 *                HTML, e-mail or RTF, or any container format; then the
 *                terms and figures of what it gave must be those an
 *                extractor with defer_utf8 gives
 *   FUZZ_PDF     im_pdf_text()
 *   FUZZ_ZIPDOC  im_zipdoc_text(), the format taken from the first byte
 *   FUZZ_UNPACK  im_unpack()
 *   FUZZ_TERMS   the word scanner over plain text, or over what the HTML,
 *                e-mail or RTF converter makes of the input (the first byte picks,
 *                and the word length and digit filters): the SIMD scanner
 *                must give the scalar one's terms, in the same order, and
 *                both must say the text is not UTF-8 exactly when
 *                im_utf8_valid() does; then the sketch of the terms
 *   FUZZ_HTML    im_html_text() in every gear this CPU has: the AVX-512
 *                gear must give the scalar one's text, byte for byte
 *   FUZZ_RTF     im_rtf_text() with and without an output cap: the text
 *                is never longer than three bytes per input byte (a
 *                windows-1252 byte's UTF-8) plus three (a last lone
 *                surrogate), and a cap is either kept or reported
 *   FUZZ_MSOFFICE  im_doc_text(), im_xls_text() or im_ppt_text() (the
 *                first byte picks; the compound-file reader under them)
 *                with and without an output cap: a cap is either kept or
 *                reported; a stream found is read whole or not at all
 *   FUZZ_ZIPXML  im_zipdoc_text() of a docx, odt or pptx built from the input's
 *                XML parts, so that the XML and style logic sees every
 *                mutation (fuzz_zipdoc's ZIP fails its CRC at the first
 *                change inside a member); with and without an output cap
 * Built by meson with -Dfuzz=enabled and clang (tests/fuzz/meson.build).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "extract.h"
#include "extract_internal.h"
#include "sketch.h"
#include "text_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct im_extract_opts opts(void)
{
	struct im_extract_opts o;

	im_extract_opts_init(&o);
	o.sandbox = false;
	o.max_text = 1 << 20;
	o.max_unpacked = 4 << 20;
	return o;
}

#if defined(FUZZ_TERMS)
/* @p how: bits 0-1 the converter (text, HTML, e-mail, RTF), bits 2-4 the least
 * word length - 1, bit 5 whether words may hold any number of digits. */
static void fuzz_terms(uint8_t how, const char *s, size_t len,
		       struct im_buf *conv)
{
	struct im_terms simd, scalar;
	struct im_params p;
	struct im_sketch sk;

	im_params_init(&p);
	p.min_word_len = 1 + ((how >> 2) & 7);
	if (how & 32)
		p.max_digits = 1000;
	if ((how & 3) == 1) {
		if (im_html_text(s, len, conv))
			return;
		s = conv->p;
		len = conv->len;
	} else if ((how & 3) == 2) {
		if (im_email_text(s, len, conv))
			return;
		s = conv->p;
		len = conv->len;
	} else if ((how & 3) == 3) {
		if (im_rtf_text(s, len, 0, conv))
			return;
		s = conv->p;
		len = conv->len;
	}
	im_terms_init(&simd);
	im_terms_init(&scalar);
	if (!im_words_add(s, len, &p, &simd) &&
	    !im_words_add_scalar(s, len, &p, &scalar)) {
		/* A markup with no text hands over a NULL buffer, and NULL + 0
		 * is undefined behaviour. */
		bool invalid = len && !im_utf8_valid(s, len);

		if (simd.n != scalar.n || simd.numbers != scalar.numbers ||
		    simd.invalid_utf8 != invalid ||
		    scalar.invalid_utf8 != invalid)
			abort();
		for (size_t i = 0; i < simd.n; i++)
			if (simd.v[i].len != scalar.v[i].len ||
			    memcmp(im_terms_str(&simd, i),
				   im_terms_str(&scalar, i), simd.v[i].len))
				abort();
		im_sketch_compute(&simd, p.seed, &sk);
	}
	im_terms_release(&simd);
	im_terms_release(&scalar);
}
#endif

#if defined(FUZZ_HTML)
static void fuzz_html(const char *s, size_t len)
{
	struct im_buf scalar = {0}, fast = {0};

	if (!im_html_text_gear(s, len, &scalar, IM_HTML_SCALAR) &&
	    !im_html_text_gear(s, len, &fast, IM_HTML_AVX512) &&
	    (scalar.len != fast.len ||
	     (scalar.len && memcmp(scalar.p, fast.p, scalar.len))))
		abort();
	im_buf_release(&scalar);
	im_buf_release(&fast);
}
#endif

#if defined(FUZZ_RTF)
static void fuzz_rtf(const char *s, size_t len)
{
	struct im_buf all = {0}, capped = {0};
	size_t cap = len / 4;
	int ret;

	if (!im_rtf_text(s, len, 0, &all) && all.len > 3 * len + 3)
		abort();
	ret = im_rtf_text(s, len, cap, &capped);
	if (cap && ((ret == 0 && capped.len > cap) ||
		    (ret == IM_XF_OUTPUT && all.len <= cap)))
		abort();
	im_buf_release(&all);
	im_buf_release(&capped);
}
#endif

#if defined(FUZZ_MSOFFICE)
static void fuzz_msoffice(uint8_t which, const char *s, size_t len,
			  struct im_extract_opts *o)
{
	static int (*const text[])(const char *, size_t,
				   const struct im_extract_opts *,
				   struct im_buf *) = {im_doc_text, im_xls_text,
						       im_ppt_text};
	int (*fn)(const char *, size_t, const struct im_extract_opts *,
		  struct im_buf *) = text[which % 3];
	struct im_buf all = {0}, capped = {0}, st = {0};
	size_t budget = o->max_unpacked;
	struct im_cfb_entry e;
	struct im_cfb c;
	int ret;

	if (!fn(s, len, o, &all))
		o->max_text = all.len / 2;
	ret = fn(s, len, o, &capped);
	if (o->max_text && ((ret == 0 && capped.len > o->max_text) ||
			    (ret == IM_XF_OUTPUT && all.len <= o->max_text)))
		abort();
	if (im_cfb_open(&c, s, len) && im_cfb_find(&c, "1Table", &e) &&
	    !im_cfb_read(&c, &e, &budget, &st) && st.len != e.size)
		abort();
	im_buf_release(&all);
	im_buf_release(&capped);
	im_buf_release(&st);
}
#endif

#if defined(FUZZ_ZIPXML)
static void put16(uint8_t **p, unsigned v)
{
	*(*p)++ = v & 0xff;
	*(*p)++ = (v >> 8) & 0xff;
}

static void put32(uint8_t **p, uint32_t v)
{
	put16(p, v & 0xffff);
	put16(p, v >> 16);
}

/* The CRC-32 of ZIP (reflected, 0xedb88320), a table of it made at the
 * first call: libarchive checks it. */
static uint32_t crc32_of(const char *s, size_t n)
{
	static uint32_t table[256];
	uint32_t c = 0xffffffff;

	if (!table[1])
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t t = i;

			for (int k = 0; k < 8; k++)
				t = (t >> 1) ^ (0xedb88320 & -(t & 1));
			table[i] = t;
		}
	for (size_t i = 0; i < n; i++)
		c = table[(c ^ (uint8_t)s[i]) & 0xff] ^ (c >> 8);
	return ~c;
}

struct member {
	const char *name, *data;
	size_t len;
};

/* A ZIP of @p n stored members, with its central directory (libarchive
 * reads a ZIP in memory by it); the caller frees it. */
static uint8_t *zip_build(const struct member *m, size_t n, size_t *len)
{
	uint32_t crc[4], off[4];
	size_t total = 22;
	uint8_t *z, *p, *cd, *cd_end;

	for (size_t i = 0; i < n; i++)
		total += 30 + 46 + 2 * strlen(m[i].name) + m[i].len;
	z = malloc(total);
	if (!z)
		return NULL;
	p = z;
	for (size_t i = 0; i < n; i++) {
		crc[i] = crc32_of(m[i].data, m[i].len);
		off[i] = (uint32_t)(p - z);
		put32(&p, 0x04034b50);
		put16(&p, 20);
		put16(&p, 0);	 /* flags */
		put16(&p, 0);	 /* stored */
		put16(&p, 0);	 /* time */
		put16(&p, 0x21); /* 1980-01-01 */
		put32(&p, crc[i]);
		put32(&p, (uint32_t)m[i].len);
		put32(&p, (uint32_t)m[i].len);
		put16(&p, (unsigned)strlen(m[i].name));
		put16(&p, 0);
		memcpy(p, m[i].name, strlen(m[i].name));
		p += strlen(m[i].name);
		memcpy(p, m[i].data, m[i].len);
		p += m[i].len;
	}
	cd = p;
	for (size_t i = 0; i < n; i++) {
		put32(&p, 0x02014b50);
		put16(&p, 20);
		put16(&p, 20);
		put16(&p, 0);
		put16(&p, 0);
		put16(&p, 0);
		put16(&p, 0x21);
		put32(&p, crc[i]);
		put32(&p, (uint32_t)m[i].len);
		put32(&p, (uint32_t)m[i].len);
		put16(&p, (unsigned)strlen(m[i].name));
		put16(&p, 0); /* extra */
		put16(&p, 0); /* comment */
		put16(&p, 0); /* disk */
		put16(&p, 0); /* internal attributes */
		put32(&p, 0); /* external attributes */
		put32(&p, off[i]);
		memcpy(p, m[i].name, strlen(m[i].name));
		p += strlen(m[i].name);
	}
	cd_end = p;
	put32(&p, 0x06054b50);
	put16(&p, 0);
	put16(&p, 0);
	put16(&p, (unsigned)n);
	put16(&p, (unsigned)n);
	put32(&p, (uint32_t)(cd_end - cd));
	put32(&p, (uint32_t)(cd - z));
	put16(&p, 0);
	*len = (size_t)(p - z);
	return z;
}

/*
 * @p how: bit 0 docx (word/document.xml, word/styles.xml,
 * word/footnotes.xml, word/numbering.xml) or odt (content.xml, styles.xml); bit 1 the styles
 * after the text in the ZIP (they are read first wherever they are); bit
 * 2 a pptx instead (a slide and its notes). The parts are @p s split at
 * NUL bytes, which XML cannot hold; those missing are left out of the ZIP.
 */
static void fuzz_zipxml(uint8_t how, const char *s, size_t len,
			struct im_extract_opts *o)
{
	static const char *const docx[] = {
		"word/document.xml", "word/styles.xml", "word/footnotes.xml",
		"word/numbering.xml"};
	static const char *const odt[] = {"content.xml", "styles.xml"};
	static const char *const pptx[] = {"ppt/slides/slide1.xml",
					   "ppt/notesSlides/notesSlide1.xml"};
	const char *const *names = how & 4 ? pptx : how & 1 ? odt : docx;
	size_t nnames = how & 4 || how & 1 ? 2 : 4, n = 0, zlen;
	enum im_format f = how & 4   ? IM_FMT_PPTX
			   : how & 1 ? IM_FMT_ODT
				     : IM_FMT_DOCX;
	struct im_buf all = {0}, capped = {0};
	struct member m[4];
	const char *end = s + len;
	uint8_t *z;
	int ret;

	while (n < nnames) {
		const char *nul = memchr(s, '\0', (size_t)(end - s));
		const char *stop = nul ? nul : end;

		m[n] = (struct member){names[n], s, (size_t)(stop - s)};
		n++;
		if (!nul)
			break;
		s = nul + 1;
	}
	if ((how & 2) && n >= 2) {
		struct member t = m[0];

		m[0] = m[1];
		m[1] = t;
	}
	z = zip_build(m, n, &zlen);
	if (!z)
		return;
	if (!im_zipdoc_text(f, (const char *)z, zlen, o, &all))
		o->max_text = all.len / 2;
	ret = im_zipdoc_text(f, (const char *)z, zlen, o, &capped);
	if (o->max_text && ((ret == 0 && capped.len > o->max_text) ||
			    (ret == IM_XF_OUTPUT && all.len <= o->max_text)))
		abort();
	free(z);
	im_buf_release(&all);
	im_buf_release(&capped);
}
#endif

#if defined(FUZZ_SNIFF)
/* Appends each figure and a NUL to the im_buf at @p arg. */
static int add_figure(const char *s, size_t n, void *arg)
{
	struct im_buf *b = arg;

	return im_buf_append(b, s, n) || im_buf_append(b, "", 1);
}

/* Abort unless @p a and @p b, of one input with and without defer_utf8,
 * read as the same terms, fingerprint and figures. */
static void same_reading(const struct im_extract_result *a,
			 const struct im_extract_result *b)
{
	struct im_buf fa = {0}, fb = {0};
	struct im_terms ta, tb;
	struct im_params p;

	im_params_init(&p);
	im_terms_init(&ta);
	im_terms_init(&tb);
	if (a->format != b->format || a->fail != b->fail)
		abort();
	if (!im_extract_terms(a, &p, &ta) && !im_extract_terms(b, &p, &tb)) {
		if (ta.n != tb.n || ta.numbers != tb.numbers)
			abort();
		for (size_t i = 0; i < ta.n; i++)
			if (ta.v[i].len != tb.v[i].len ||
			    memcmp(im_terms_str(&ta, i), im_terms_str(&tb, i),
				   ta.v[i].len))
				abort();
	}
	if (!im_extract_figures(a, add_figure, &fa) &&
	    !im_extract_figures(b, add_figure, &fb) &&
	    (fa.len != fb.len || (fa.len && memcmp(fa.p, fb.p, fa.len))))
		abort();
	im_buf_release(&fa);
	im_buf_release(&fb);
	im_terms_release(&ta);
	im_terms_release(&tb);
}
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct im_extract_opts o = opts();
	const char *s = (const char *)data;
	struct im_buf out = {0};

#if defined(FUZZ_SNIFF)
	struct im_extractor *x, *dx = NULL;
	struct im_extract_result r, dr;
	struct im_extract_opts dopts = o;

	dopts.defer_utf8 = true;
	if (im_extractor_new(&o, &x))
		return 0;
	if (!im_extract(x, NULL, s, size, &r) &&
	    !im_extractor_new(&dopts, &dx) &&
	    !im_extract(dx, NULL, s, size, &dr))
		same_reading(&r, &dr);
	im_extractor_free(dx);
	im_extractor_free(x);
#elif defined(FUZZ_PDF)
	im_pdf_text(s, size, &o, &out);
#elif defined(FUZZ_ZIPDOC)
	/* ods has its own rules (number cells, the null date). */
	static const enum im_format f[] = {IM_FMT_DOCX, IM_FMT_XLSX,
					   IM_FMT_PPTX, IM_FMT_ODT,
					   IM_FMT_EPUB, IM_FMT_ODS};

	if (size < 1)
		return 0;
	im_zipdoc_text(f[data[0] % 6], s + 1, size - 1, &o, &out);
#elif defined(FUZZ_UNPACK)
	im_unpack(s, size, &o, &out);
#elif defined(FUZZ_TERMS)
	(void)o;
	if (size < 1)
		return 0;
	fuzz_terms(data[0], s + 1, size - 1, &out);
#elif defined(FUZZ_HTML)
	(void)o;
	fuzz_html(s, size);
#elif defined(FUZZ_RTF)
	(void)o;
	fuzz_rtf(s, size);
#elif defined(FUZZ_MSOFFICE)
	if (size < 1)
		return 0;
	fuzz_msoffice(data[0], s + 1, size - 1, &o);
#elif defined(FUZZ_ZIPXML)
	if (size < 1 || size > (1 << 24))
		return 0;
	fuzz_zipxml(data[0], s + 1, size - 1, &o);
#else
#error "define FUZZ_SNIFF, FUZZ_PDF, FUZZ_ZIPDOC, FUZZ_UNPACK, FUZZ_TERMS, \
FUZZ_HTML, FUZZ_RTF, FUZZ_MSOFFICE or FUZZ_ZIPXML"
#endif
	im_buf_release(&out);
	return 0;
}
