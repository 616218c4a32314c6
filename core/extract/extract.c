/**
 * @file extract.c
 * Sniffing, the in-process extractors (text, UTF-16, windows-1252, HTML,
 * e-mail; RTF in rtf.c) and the dispatch to the sandboxed ones (see extract.h).
 *
 * Plain UTF-8 text, the common case, is not copied: the result points into
 * the caller's buffer after one validation pass that moves 8 bytes at a time
 * through ASCII.
 */
#include <assert.h>
#include <errno.h>
#include <iconv.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "extract.h"
#include "extract_internal.h"
#include "text.h"

/* clang-format off */
static const char *const format_names[IM_FMT_COUNT] = {
	[IM_FMT_TEXT] = "text",	[IM_FMT_HTML] = "html",	[IM_FMT_EMAIL] = "email",
	[IM_FMT_BINARY] = "binary", [IM_FMT_PDF] = "pdf", [IM_FMT_DOCX] = "docx",
	[IM_FMT_XLSX] = "xlsx",	[IM_FMT_PPTX] = "pptx",	[IM_FMT_ODT] = "odt",
	[IM_FMT_ODS] = "ods",	[IM_FMT_ODP] = "odp",	[IM_FMT_EPUB] = "epub",
	[IM_FMT_FILTER] = "filter", [IM_FMT_COMPRESSED] = "compressed",
	[IM_FMT_RTF] = "rtf",	[IM_FMT_DOC] = "doc",	[IM_FMT_XLS] = "xls",
	[IM_FMT_PPT] = "ppt",
};

static const char *const fail_names[IM_XF_COUNT] = {
	[IM_XF_NONE] = "none",		[IM_XF_CORRUPT] = "corrupt",
	[IM_XF_ENCRYPTED] = "encrypted", [IM_XF_EXPANSION] = "expansion",
	[IM_XF_ENTITIES] = "entities",	[IM_XF_NESTING] = "nesting",
	[IM_XF_OUTPUT] = "output",	[IM_XF_MEMORY] = "memory",
	[IM_XF_CPU] = "cpu",		[IM_XF_TIMEOUT] = "timeout",
	[IM_XF_CRASH] = "crash",	[IM_XF_SANDBOX] = "sandbox",
	[IM_XF_FILTER] = "filter",	[IM_XF_LIBRARY] = "library",
};
/* clang-format on */

const char *im_format_name(enum im_format f)
{
	return (unsigned)f < IM_FMT_COUNT ? format_names[f] : "unknown";
}

const char *im_extract_fail_name(enum im_extract_fail f)
{
	return (unsigned)f < IM_XF_COUNT ? fail_names[f] : "unknown";
}

/* ---- Sniffing ------------------------------------------------------------ */

static bool has_prefix_ci(const char *s, size_t len, const char *prefix)
{
	size_t n = strlen(prefix);

	return len >= n && !strncasecmp(s, prefix, n);
}

static bool has_prefix(const char *s, size_t len, const char *prefix, size_t n)
{
	return len >= n && !memcmp(s, prefix, n);
}

/*
 * Whether @p needle is in s[0, len); its letters in any case if @p any_case.
 * Its first byte must have no case ('<', '%'): memchr() finds where it may
 * start, where a compare at every byte (strncasecmp(), memmem()) cost most
 * of the time of sniffing a page that starts with "<?xml".
 */
static bool contains(const char *s, size_t len, const char *needle,
		     bool any_case)
{
	size_t n = strlen(needle);
	const char *p = s, *end = s + len;

	assert(n && ((needle[0] | 0x20) < 'a' || (needle[0] | 0x20) > 'z'));
	while ((size_t)(end - p) >= n &&
	       (p = memchr(p, needle[0], (size_t)(end - p) - n + 1))) {
		if (any_case ? !strncasecmp(p + 1, needle + 1, n - 1)
			     : !memcmp(p + 1, needle + 1, n - 1))
			return true;
		p++;
	}
	return false;
}

/*
 * What a header's name says of mail. Senders, recipients and message ids
 * go by names that other "key: value" files use too (a YAML itinerary's
 * from: and to:, a CITATION.cff's references:, pandoc's translation files'
 * To:, Cc: and References:), so they count only with a value shaped as
 * mail shapes it; Subject only beside a Date as mail writes it (a message
 * stripped of its addresses). Date, MIME-Version, Content-Type and
 * User-Agent do not count on their own: the kernel's ABI files open with
 * What:, Date:, KernelVersion:; Debian's .changes with Format:, Date:,
 * Source:, and read as mail they lost their first block as headers. MIME
 * structure counts too (mime_structure()).
 */
enum mail_header {
	MH_OTHER,
	MH_MAIL_ONLY, /* whatever its value */
	MH_ADDRESS,   /* with a@b, or <> (the return path of a bounce) */
	MH_MSG_ID,    /* with <id@host> */
	MH_SUBJECT,
	MH_DATE,
};

/* clang-format off */
static const struct {
	const char *name;
	enum mail_header kind;
} mail_headers[] = {
	{"received", MH_MAIL_ONLY},	{"x-mailer", MH_MAIL_ONLY},
	{"dkim-signature", MH_MAIL_ONLY}, {"newsgroups", MH_MAIL_ONLY},
	{"from", MH_ADDRESS},		{"to", MH_ADDRESS},
	{"cc", MH_ADDRESS},		{"bcc", MH_ADDRESS},
	{"reply-to", MH_ADDRESS},	{"sender", MH_ADDRESS},
	{"resent-from", MH_ADDRESS},	{"resent-to", MH_ADDRESS},
	{"delivered-to", MH_ADDRESS},	{"return-path", MH_ADDRESS},
	{"message-id", MH_MSG_ID},	{"in-reply-to", MH_MSG_ID},
	{"references", MH_MSG_ID},	{"subject", MH_SUBJECT},
	{"date", MH_DATE},
};
/* clang-format on */

static bool header_is(const char *line, size_t k, const char *name)
{
	return strlen(name) == k && !strncasecmp(line, name, k);
}

static enum mail_header header_kind(const char *line, size_t k)
{
	for (size_t i = 0; i < sizeof(mail_headers) / sizeof(mail_headers[0]);
	     i++)
		if (header_is(line, k, mail_headers[i].name))
			return mail_headers[i].kind;
	return MH_OTHER;
}

/* Bytes around the '@' of an address: the end of a local part (a quoted
 * one ends with '"') and the start of a domain (a literal with '['); UTF-8
 * on both sides (RFC 6532). */
static bool ends_local_part(char c)
{
	return im_ascii_alpha(c) || im_ascii_digit(c) ||
	       (unsigned char)c >= 0x80 ||
	       (c && strchr("!#$%&'*+-/=?^_`{|}~.\"", c));
}

static bool starts_domain(char c)
{
	return im_ascii_alpha(c) || im_ascii_digit(c) ||
	       (unsigned char)c >= 0x80 || c == '[';
}

static size_t skip_blanks(const char *v, size_t n, size_t i)
{
	while (i < n && (v[i] == ' ' || v[i] == '\t'))
		i++;
	return i;
}

/* The number of digits at v[*i], *i moved past them. */
static size_t digits(const char *v, size_t n, size_t *i)
{
	size_t d = 0;

	while (*i < n && im_ascii_digit(v[*i]))
		(*i)++, d++;
	return d;
}

/*
 * A date as mail writes it (RFC 5322 §3.3): an optional day name and a
 * comma, day, month name, year, hours:minutes, as "Mon, 3 Jun 2024
 * 10:00:00 +0000". Not "May 2011" (the kernel's ABI files) nor "2024-06-03"
 * (YAML, Markdown front matter).
 */
static bool mail_date(const char *v, size_t n)
{
	static const char months[] = "janfebmaraprmayjunjulaugsepoctnovdec";
	size_t i = skip_blanks(v, n, 0), j = i, d, m;

	while (j < n && im_ascii_alpha(v[j]))
		j++;
	if (j > i && j < n && v[j] == ',')
		i = skip_blanks(v, n, j + 1);
	d = digits(v, n, &i);
	if (d < 1 || d > 2)
		return false;
	i = skip_blanks(v, n, i);
	if (n - i < 3)
		return false;
	for (m = 0; m < 36; m += 3)
		if (!strncasecmp(v + i, months + m, 3))
			break;
	if (m == 36)
		return false;
	while (i < n && im_ascii_alpha(v[i]))
		i++;
	i = skip_blanks(v, n, i);
	d = digits(v, n, &i);
	if (d != 2 && d != 4)
		return false;
	i = skip_blanks(v, n, i);
	d = digits(v, n, &i);
	if (d < 1 || d > 2 || i == n || v[i] != ':')
		return false;
	i++;
	return digits(v, n, &i) == 2;
}

/* Whether v[0, n), the value of a sender, recipient or id header (or one
 * only mail has), is one only mail gives it. */
static bool mail_value(const char *v, size_t n, enum mail_header kind)
{
	const char *end = v + n, *at, *lt;

	switch (kind) {
	case MH_MAIL_ONLY: return true;
	case MH_ADDRESS:
		for (at = v; (at = memchr(at, '@', (size_t)(end - at))); at++)
			if (at > v && at + 1 < end && ends_local_part(at[-1]) &&
			    starts_domain(at[1]))
				return true;
		return contains(v, n, "<>", false);
	case MH_MSG_ID:
		lt = memchr(v, '<', n);
		at = lt ? memchr(lt, '@', (size_t)(end - lt)) : NULL;
		return at && memchr(at, '>', (size_t)(end - at));
	default: return false;
	}
}

/* What a header line says of MIME structure, into *@p mime (bit 0:
 * MIME-Version, bit 1: a Content-Transfer-Encoding, or a multipart or
 * message (a message/rfc822 forwarded whole) Content-Type). The name is
 * line[0, k). */
static void mime_structure(const char *line, size_t k, size_t ll,
			   unsigned *mime)
{
	size_t v = k + 1;

	if (header_is(line, k, "mime-version"))
		*mime |= 1;
	else if (header_is(line, k, "content-transfer-encoding"))
		*mime |= 2;
	else if (header_is(line, k, "content-type")) {
		v = skip_blanks(line, ll, v);
		if (has_prefix_ci(line + v, ll - v, "multipart/") ||
		    has_prefix_ci(line + v, ll - v, "message/"))
			*mime |= 2;
	}
}

/* Four digits at s[i], a number of its own (the year of a date). */
static bool year_at(const char *s, size_t n, size_t i)
{
	return i + 4 <= n && im_ascii_digit(s[i]) && im_ascii_digit(s[i + 1]) &&
	       im_ascii_digit(s[i + 2]) && im_ascii_digit(s[i + 3]) &&
	       (i + 4 == n || !im_ascii_digit(s[i + 4])) &&
	       !im_ascii_digit(s[i - 1]);
}

/* An mbox "From " line s[0, n): the envelope sender, one word and not a
 * time, then the date it came, with a year and a time with its seconds
 * ("From a@b Mon Jun  3 10:00:00 2024", or the year first as some tools
 * write it); not a sentence that opens with "From" ("From 9:00 to 17:00
 * ...", "From 09:00:00 until 17:30:00 ..."). */
static bool mbox_from_line(const char *s, size_t n)
{
	size_t i = 5;
	bool time = false, year = false;

	while (i < n && s[i] != ' ' && s[i] != '\t') {
		if (s[i] == ':')
			return false;
		i++;
	}
	if (i == 5)
		return false;
	for (; i < n; i++) {
		if (i + 6 < n && im_ascii_digit(s[i]) && s[i + 1] == ':' &&
		    im_ascii_digit(s[i + 2]) && im_ascii_digit(s[i + 3]) &&
		    s[i + 4] == ':' && im_ascii_digit(s[i + 5]) &&
		    im_ascii_digit(s[i + 6])) {
			time = true;
			i += 6;
		} else if (year_at(s, n, i)) {
			year = true;
			i += 3;
		}
	}
	return time && year;
}

/*
 * A leading block of RFC 5322 header lines (optionally after an mbox "From "
 * line): every line up to the first empty one is "name: value" or a
 * continuation, at least two are headers (one after an mbox line), and
 * something in them only mail has:
 *   - a header only mail has (Received, X-Mailer, DKIM-Signature,
 *     Newsgroups);
 *   - a sender or recipient header with an address (From: root@host,
 *     From: "Name" <a@b>, Return-Path: <>), a Message-ID, In-Reply-To or
 *     References with a message id, on its line or a continuation;
 *   - Subject with a Date as mail writes it (a message stripped of its
 *     addresses);
 *   - MIME structure: MIME-Version with a Content-Transfer-Encoding or a
 *     multipart or message Content-Type (Word's and Excel's web archives,
 *     .mht, open with MIME-Version and a multipart/related Content-Type
 *     alone; an HTTP response has neither);
 *   - the mbox "From " line itself.
 * A header-only message (no blank line, no body) is mail by the same
 * rule. With @p cut the text is the head of a longer file: a block of
 * headers that outruns it (Gmail's run past 4 KiB) ends with it, its last
 * line unfinished.
 */
static bool looks_like_email(const char *s, size_t n, bool cut)
{
	size_t i = 0, headers = 0;
	unsigned mime = 0;
	bool mbox = false, mail = false, subject = false, date = false;
	/* A sender or id header whose value has not shown an address or id
	 * yet: its continuation lines may ("To:\n\tall@list.example"). */
	enum mail_header open = MH_OTHER;

	if (has_prefix_ci(s, n, "From ")) {
		const char *nl = memchr(s, '\n', n);

		if (!nl)
			return false;
		i = (size_t)(nl - s) + 1;
		mbox = true;
		mail = mbox_from_line(s, (size_t)(nl - s));
	}
	while (i < n) {
		const char *line = s + i;
		const char *nl = memchr(line, '\n', n - i);
		size_t ll = nl ? (size_t)(nl - line) : n - i;
		size_t k = 0, v;
		enum mail_header kind;

		if (!nl && cut)
			break;
		if (ll && line[ll - 1] == '\r')
			ll--;
		if (ll == 0)
			break;
		if (line[0] == ' ' || line[0] == '\t') {
			if (!headers)
				return false;
			if (open != MH_OTHER && mail_value(line, ll, open))
				mail = true;
		} else {
			while (k < ll && line[k] > 32 && line[k] < 127 &&
			       line[k] != ':')
				k++;
			if (k == 0 || k == ll || line[k] != ':')
				return false;
			headers++;
			kind = header_kind(line, k);
			v = skip_blanks(line, ll, k + 1);
			open = MH_OTHER;
			switch (kind) {
			case MH_OTHER: break;
			case MH_SUBJECT: subject = true; break;
			case MH_DATE:
				date = date || mail_date(line + v, ll - v);
				break;
			default:
				if (mail_value(line + v, ll - v, kind))
					mail = true;
				else
					open = kind;
			}
			mime_structure(line, k, ll, &mime);
		}
		if (!nl)
			break;
		i = (size_t)(nl - s) + 1;
	}
	mail = mail || mime == 3 || (subject && date);
	return mail && (headers >= 2 || (mbox && headers >= 1));
}

/* Markup a browser would render: a doctype or <html>, or a fragment that
 * opens with a tag and has the head or body of a page. */
static bool looks_like_html(const char *s, size_t n)
{
	if (has_prefix_ci(s, n, "<!doctype html") ||
	    has_prefix_ci(s, n, "<html"))
		return true;
	if (!n || s[0] != '<')
		return false;
	if (has_prefix_ci(s, n, "<?xml") || has_prefix_ci(s, n, "<!--") ||
	    has_prefix_ci(s, n, "<!doctype"))
		return contains(s, n, "<html", true);
	return contains(s, n, "<head", true) || contains(s, n, "<body", true);
}

static uint32_t le16(const char *p)
{
	return (uint32_t)(unsigned char)p[0] | (uint32_t)(unsigned char)p[1]
						       << 8;
}

/*
 * A ZIP: ODF and EPUB put an uncompressed "mimetype" entry first (their
 * specifications require it); OOXML has [Content_Types].xml and a main part
 * whose name the central directory holds as plain bytes.
 */
static enum im_format sniff_zip(const char *buf, size_t len)
{
	static const struct {
		const char *type;
		enum im_format f;
	} mimetypes[] = {
		{"application/vnd.oasis.opendocument.text", IM_FMT_ODT},
		{"application/vnd.oasis.opendocument.spreadsheet", IM_FMT_ODS},
		{"application/vnd.oasis.opendocument.presentation", IM_FMT_ODP},
		{"application/epub+zip", IM_FMT_EPUB},
	};
	static const struct {
		const char *part;
		enum im_format f;
	} parts[] = {
		{"word/document.xml", IM_FMT_DOCX},
		{"xl/workbook.xml", IM_FMT_XLSX},
		{"ppt/presentation.xml", IM_FMT_PPTX},
	};

	if (len >= 38) {
		size_t nl = le16(buf + 26), xl = le16(buf + 28);
		size_t dl = le16(buf + 18) | (size_t)le16(buf + 20) << 16;

		if (nl == 8 && !memcmp(buf + 30, "mimetype", 8) &&
		    le16(buf + 8) == 0 && 30 + nl + xl + dl <= len) {
			const char *d = buf + 30 + nl + xl;

			for (size_t i = 0; i < 4; i++)
				if (strlen(mimetypes[i].type) == dl &&
				    !memcmp(d, mimetypes[i].type, dl))
					return mimetypes[i].f;
		}
	}
	if (memmem(buf, len, "[Content_Types].xml", 19))
		for (size_t i = 0; i < 3; i++)
			if (memmem(buf, len, parts[i].part,
				   strlen(parts[i].part)))
				return parts[i].f;
	return IM_FMT_BINARY;
}

enum im_format im_extract_sniff(const char *buf, size_t len)
{
	size_t n = len < IM_EXTRACT_SNIFF ? len : IM_EXTRACT_SNIFF;
	const char *s = buf;

	if (!len)
		return IM_FMT_TEXT;
	if (has_prefix(s, n, IM_CFB_MAGIC, 8)) {
		enum im_format f = im_msoffice_sniff(buf, len);

		if (f != IM_FMT_BINARY)
			return f;
	}
	if (contains(s, n < 1024 ? n : 1024, "%PDF-", false))
		return IM_FMT_PDF;
	if (has_prefix(s, n, "PK\x03\x04", 4))
		return sniff_zip(buf, len);
	if (has_prefix(s, n, "\x1f\x8b", 2) ||
	    has_prefix(s, n,
		       "\xfd"
		       "7zXZ\0",
		       6) ||
	    (has_prefix(s, n, "BZh", 3) && n >= 10 && s[3] >= '1' &&
	     s[3] <= '9' && !memcmp(s + 4, "\x31\x41\x59\x26\x53\x59", 6)))
		return IM_FMT_COMPRESSED;
	if (has_prefix(s, n, "\xff\xfe", 2) || has_prefix(s, n, "\xfe\xff", 2))
		return IM_FMT_TEXT;

	if (has_prefix(s, n, "\xef\xbb\xbf", 3)) {
		s += 3;
		n -= 3;
	}
	while (n && (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')) {
		s++;
		n--;
	}
	if (has_prefix(s, n, "{\\rtf", 5))
		return IM_FMT_RTF;
	if (memchr(buf, '\0', len < IM_EXTRACT_SNIFF ? len : IM_EXTRACT_SNIFF))
		return IM_FMT_BINARY;
	if (looks_like_html(s, n))
		return IM_FMT_HTML;
	if (looks_like_email(s, n, len > IM_EXTRACT_SNIFF))
		return IM_FMT_EMAIL;
	return IM_FMT_TEXT;
}

/* ---- Options ------------------------------------------------------------ */

void im_extract_opts_init(struct im_extract_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->mem_bytes = (uint64_t)1 << 30;
	o->cpu_seconds = 10;
	o->deadline_ms = 30000;
	o->max_text = (size_t)16 << 20;
	o->max_unpacked = (size_t)128 << 20;
	o->sandbox = true;
}

int im_extract_filter_check(const char *spec)
{
	const char *colon = strchr(spec, ':');

	if (!colon || colon == spec || !colon[1] ||
	    memchr(spec, '/', (size_t)(colon - spec)))
		return -EINVAL;
	return 0;
}

/* The command of the filter for @p name, or NULL. */
static const char *filter_for(const struct im_extract_opts *o, const char *name)
{
	return im_extract_filter_for(o->filters, name);
}

const char *im_extract_filter_for(const char *const *filters, const char *name)
{
	const char *base, *dot;

	if (!filters || !name)
		return NULL;
	base = strrchr(name, '/');
	base = base ? base + 1 : name;
	dot = strrchr(base, '.');
	if (!dot || dot == base)
		return NULL;
	for (const char *const *f = filters; *f; f++) {
		const char *colon = strchr(*f, ':');

		if (colon && (size_t)(colon - *f) == strlen(dot + 1) &&
		    !strncasecmp(*f, dot + 1, (size_t)(colon - *f)))
			return colon + 1;
	}
	return NULL;
}

/* ---- The extractor ------------------------------------------------------- */

struct im_extractor {
	struct im_extract_opts o;
	struct im_buf text;	/* the last result, when it is not the input */
	struct im_buf conv;	/* input converted to UTF-8 */
	struct im_buf unpacked; /* a compressed file's content */
	struct im_helper helper;
};

int im_extractor_new(const struct im_extract_opts *o, struct im_extractor **out)
{
	struct im_extractor *x = calloc(1, sizeof(*x));

	*out = NULL;
	if (!x)
		return -ENOMEM;
	if (o)
		x->o = *o;
	else
		im_extract_opts_init(&x->o);
	im_helper_init(&x->helper);
	*out = x;
	return 0;
}

void im_extractor_free(struct im_extractor *x)
{
	if (!x)
		return;
	im_helper_stop(&x->helper);
	im_buf_release(&x->text);
	im_buf_release(&x->conv);
	im_buf_release(&x->unpacked);
	free(x);
}

/* ---- In-process formats -------------------------------------------------- */

bool im_utf8_valid(const char *s, size_t len)
{
	const uint64_t high = UINT64_C(0x8080808080808080);
	const unsigned char *c = (const unsigned char *)s;
	/* An empty text may come as NULL, and NULL + 0 is undefined. */
	const unsigned char *end = len ? c + len : c;
	uint32_t cp;

	while (c < end) {
		uint64_t w[4];

		/* ASCII 32 bytes at a time, then 8: twice as fast as 8 alone
		 * on plain text, which is mostly ASCII (~20 GB/s in cache). */
		while (end - c >= 32) {
			memcpy(w, c, 32);
			if ((w[0] | w[1] | w[2] | w[3]) & high)
				break;
			c += 32;
		}
		if (c == end)
			break;
		if (end - c >= 8) {
			memcpy(w, c, 8);
			if (!(w[0] & high)) {
				c += 8;
				continue;
			}
		}
		if (*c < 0x80) {
			c++;
			continue;
		}
		size_t k = im_utf8_decode(c, end, &cp);
		if (!k)
			return false;
		c += k;
	}
	return true;
}

/* UTF-16 with its byte-order mark to UTF-8; unpaired surrogates and an odd
 * last byte are dropped rather than failing the document. */
static int utf16_to_utf8(const char *s, size_t len, struct im_buf *out)
{
	bool le = (unsigned char)s[0] == 0xff;
	const unsigned char *u = (const unsigned char *)s + 2;
	size_t n = (len - 2) / 2;
	int ret = 0;

	out->len = 0;
	for (size_t i = 0; i < n && !ret; i++) {
		uint32_t c = le ? (uint32_t)(u[2 * i] | u[2 * i + 1] << 8)
				: (uint32_t)(u[2 * i] << 8 | u[2 * i + 1]);

		if (c >= 0xd800 && c < 0xdc00 && i + 1 < n) {
			uint32_t d = le ? (uint32_t)(u[2 * i + 2] |
						     u[2 * i + 3] << 8)
					: (uint32_t)(u[2 * i + 2] << 8 |
						     u[2 * i + 3]);

			if (d >= 0xdc00 && d < 0xe000) {
				c = 0x10000 + ((c - 0xd800) << 10) +
				    (d - 0xdc00);
				i++;
			}
		}
		if (c >= 0xd800 && c < 0xe000)
			continue;
		ret = im_buf_put_cp(out, c);
	}
	return ret;
}

static int cp1252_to_utf8(const char *s, size_t len, struct im_buf *out)
{
	out->len = 0;
	return im_charset_to_utf8("windows-1252", 12, s, len, out);
}

/*
 * The input as UTF-8: @p buf itself, or a conversion in x->conv. Sets *s and
 * *len to what the extractor should read next.
 */
static int as_utf8(struct im_extractor *x, const char **s, size_t *len,
		   bool allow_1252)
{
	const char *b = *s;
	int ret = 0;

	if (*len >= 2 && ((b[0] == '\xff' && b[1] == '\xfe') ||
			  (b[0] == '\xfe' && b[1] == '\xff')))
		ret = utf16_to_utf8(b, *len, &x->conv);
	else if (allow_1252 && !im_utf8_valid(b, *len))
		ret = cp1252_to_utf8(b, *len, &x->conv);
	else
		return 0;
	if (ret)
		return ret;
	*s = x->conv.p;
	*len = x->conv.len;
	return 0;
}

static int html_text(struct im_extractor *x, const char *buf, size_t len)
{
	const char *cs = NULL;
	size_t csl = im_html_charset(buf, len, &cs);
	int ret;

	if (csl && !im_charset_is_utf8(cs, csl)) {
		x->conv.len = 0;
		ret = im_charset_to_utf8(cs, csl, buf, len, &x->conv);
		if (ret)
			return ret;
		buf = x->conv.p;
		len = x->conv.len;
	} else {
		ret = as_utf8(x, &buf, &len, !csl);
		if (ret)
			return ret;
	}
	return im_html_text(buf, len, &x->text);
}

static bool contained(enum im_format f)
{
	return (f >= IM_FMT_PDF && f <= IM_FMT_EPUB) ||
	       (f >= IM_FMT_DOC && f <= IM_FMT_PPT);
}

/* Text, HTML, e-mail and RTF, in this process. */
static int local_text(struct im_extractor *x, enum im_format f, const char *buf,
		      size_t len, struct im_extract_result *r)
{
	int ret = 0;

	switch (f) {
	case IM_FMT_TEXT: {
		bool utf16 =
			len >= 2 && ((buf[0] == '\xff' && buf[1] == '\xfe') ||
				     (buf[0] == '\xfe' && buf[1] == '\xff'));

		/* Unchecked where im_extract_terms() reads it: not in a
		 * helper (a compressed file's), whose reply is the text. */
		bool defer = x->o.defer_utf8 && !r->compressed;

		ret = as_utf8(x, &buf, &len, !defer);
		if (ret)
			return ret;
		/* Word saves "Unicode" HTML as UTF-16 with a byte-order mark,
		 * which the sniff of the bytes can only call text: once
		 * decoded, it is told apart (its tags are no terms). */
		f = utf16 ? im_extract_sniff(buf, len) : IM_FMT_TEXT;
		if (f == IM_FMT_HTML) {
			ret = im_html_text(buf, len, &x->text);
		} else if (f == IM_FMT_RTF) {
			ret = im_rtf_text(buf, len, x->o.max_text, &x->text);
		} else if (f == IM_FMT_EMAIL) {
			ret = im_email_text(buf, len, &x->text);
		} else {
			r->text = len ? buf : NULL;
			r->len = len;
			r->unchecked = defer && !utf16;
			r->x = x;
			return 0;
		}
		r->format = f;
		break;
	}
	case IM_FMT_HTML: ret = html_text(x, buf, len); break;
	case IM_FMT_EMAIL: ret = im_email_text(buf, len, &x->text); break;
	case IM_FMT_RTF:
		ret = im_rtf_text(buf, len, x->o.max_text, &x->text);
		break;
	default: return -EINVAL;
	}
	if (ret > 0) {
		r->fail = (enum im_extract_fail)ret;
		return 0;
	}
	if (ret)
		return ret;
	r->text = x->text.len ? x->text.p : NULL;
	r->len = x->text.len;
	return 0;
}

/*
 * Any format in this process: what a helper runs, and all of it when the
 * sandbox is off. A compressed file is unpacked and its content extracted
 * (one level: compressed inside compressed is binary).
 */
static int local_extract(struct im_extractor *x, enum im_format f,
			 const char *buf, size_t len,
			 struct im_extract_result *r)
{
	int ret;

	if (f == IM_FMT_COMPRESSED) {
		x->unpacked.len = 0;
		ret = im_unpack(buf, len, &x->o, &x->unpacked);
		if (ret)
			goto fail;
		r->compressed = true;
		buf = x->unpacked.p;
		len = x->unpacked.len;
		f = im_extract_sniff(buf, len);
		if (f == IM_FMT_COMPRESSED)
			f = IM_FMT_BINARY;
		r->format = f;
		if (!len || f == IM_FMT_BINARY)
			return 0;
		if (!contained(f)) {
			ret = local_text(x, f, buf, len, r);
			if (!ret && x->o.max_text && r->len > x->o.max_text) {
				r->text = NULL;
				r->len = 0;
				r->fail = IM_XF_OUTPUT;
			}
			return ret;
		}
	}
	if (!contained(f))
		return local_text(x, f, buf, len, r);
	if (f == IM_FMT_PDF)
		ret = im_pdf_text(buf, len, &x->o, &x->text);
	else if (f == IM_FMT_DOC)
		ret = im_doc_text(buf, len, &x->o, &x->text);
	else if (f == IM_FMT_XLS)
		ret = im_xls_text(buf, len, &x->o, &x->text);
	else if (f == IM_FMT_PPT)
		ret = im_ppt_text(buf, len, &x->o, &x->text);
	else
		ret = im_zipdoc_text(f, buf, len, &x->o, &x->text);
	if (ret)
		goto fail;
	r->text = x->text.len ? x->text.p : NULL;
	r->len = x->text.len;
	return 0;
fail:
	if (ret == -ENOMEM)
		ret = IM_XF_MEMORY;
	if (ret < 0)
		return ret;
	r->fail = (enum im_extract_fail)ret;
	return 0;
}

int im_extract_local(struct im_extractor *x, enum im_format f, const char *buf,
		     size_t len, struct im_extract_result *r)
{
	memset(r, 0, sizeof(*r));
	r->format = f;
	x->text.len = 0;
	if (!len || f == IM_FMT_BINARY)
		return 0;
	if ((unsigned)f >= IM_FMT_COUNT || f == IM_FMT_FILTER)
		return -EINVAL;
	return local_extract(x, f, buf, len, r);
}

static int helper_result(struct im_extractor *x, int ret,
			 struct im_extract_result *r)
{
	if (ret < 0)
		return ret;
	if (ret > 0) {
		r->fail = (enum im_extract_fail)ret;
		r->text = NULL;
		r->len = 0;
		return 0;
	}
	r->text = x->text.len ? x->text.p : NULL;
	r->len = x->text.len;
	return 0;
}

int im_extract_as(struct im_extractor *x, enum im_format f, const char *buf,
		  size_t len, struct im_extract_result *r)
{
	if (!x->o.sandbox || !(contained(f) || f == IM_FMT_COMPRESSED))
		return im_extract_local(x, f, buf, len, r);
	memset(r, 0, sizeof(*r));
	r->format = f;
	x->text.len = 0;
	return helper_result(
		x,
		im_helper_extract(&x->helper, &x->o, f, buf, len, &x->text, r),
		r);
}

int im_extract(struct im_extractor *x, const char *name, const char *buf,
	       size_t len, struct im_extract_result *r)
{
	enum im_format f = im_extract_sniff(buf, len);
	const char *cmd = f == IM_FMT_BINARY ? filter_for(&x->o, name) : NULL;

	if (!cmd)
		return im_extract_as(x, f, buf, len, r);
	memset(r, 0, sizeof(*r));
	r->format = IM_FMT_FILTER;
	x->text.len = 0;
	return helper_result(x, im_filter_run(cmd, &x->o, buf, len, &x->text),
			     r);
}

unsigned im_extractor_spawned(const struct im_extractor *x)
{
	return x->helper.spawned;
}

const char *im_extractor_sandbox_error(const struct im_extractor *x)
{
	return x->helper.why[0] ? x->helper.why : NULL;
}

int im_extract_put_numbers(struct im_buf *out, const struct im_buf *nums)
{
	static const char mark[] = {IM_EXTRACT_NUMBERS, '\n'};

	/* After the words, so that they are scanned as one text. */
	if (nums->len && (im_buf_append(out, mark, sizeof(mark)) ||
			  im_buf_append(out, nums->p, nums->len)))
		return -ENOMEM;
	return 0;
}

/* Where a spreadsheet's number cells begin in @p r's text, or NULL. */
static const char *numbers_mark(const struct im_extract_result *r)
{
	if (r->format != IM_FMT_XLSX && r->format != IM_FMT_ODS &&
	    r->format != IM_FMT_XLS)
		return NULL;
	return r->len ? memchr(r->text, IM_EXTRACT_NUMBERS, r->len) : NULL;
}

/* An unchecked text (im_extract_result.unchecked) that is not UTF-8, as
 * as_utf8() would have converted it, into r->x->conv. */
static int convert_unchecked(const struct im_extract_result *r,
			     const char **text, size_t *len)
{
	int ret = cp1252_to_utf8(r->text, r->len, &r->x->conv);

	*text = r->x->conv.len ? r->x->conv.p : NULL;
	*len = r->x->conv.len;
	return ret;
}

int im_extract_terms(const struct im_extract_result *r,
		     const struct im_params *p, struct im_terms *out)
{
	const char *mark = numbers_mark(r), *s, *end;
	size_t len;
	int ret;

	if (!mark && r->unchecked) {
		/* Read as UTF-8; again, converted, if it was not. */
		ret = im_text_terms(r->text, r->len, p, out);
		if (ret || !out->invalid_utf8)
			return ret;
		ret = convert_unchecked(r, &s, &len);
		if (ret)
			return ret;
		return im_text_terms(s, len, p, out);
	}
	if (!mark)
		return im_text_terms(r->text, r->len, p, out);
	ret = im_text_terms(r->text, (size_t)(mark - r->text), p, out);
	end = r->text + r->len;
	for (s = mark + 1; !ret && s < end;) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		const char *e = nl ? nl : end;

		if (e > s) {
			ret = im_terms_add(out, s, (size_t)(e - s));
			out->numbers += im_figure_hash(s, (size_t)(e - s));
		}
		s = e + 1;
	}
	return ret;
}

int im_extract_figures(const struct im_extract_result *r,
		       int (*fn)(const char *s, size_t n, void *arg), void *arg)
{
	const char *mark = numbers_mark(r), *s, *end;
	size_t len;
	int ret;

	if (!mark && r->unchecked && !im_utf8_valid(r->text, r->len)) {
		ret = convert_unchecked(r, &s, &len);
		if (ret)
			return ret;
		return im_text_figures(s, len, fn, arg);
	}
	if (!mark)
		return im_text_figures(r->text, r->len, fn, arg);
	ret = im_text_figures(r->text, (size_t)(mark - r->text), fn, arg);
	end = r->text + r->len;
	for (s = mark + 1; !ret && s < end;) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		const char *e = nl ? nl : end;

		if (e > s)
			ret = fn(s, (size_t)(e - s), arg);
		s = e + 1;
	}
	return ret;
}
