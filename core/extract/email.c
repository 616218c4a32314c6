/**
 * @file email.c
 * E-mail to text for the word scanner (papers/000 §6.3: "only the text
 * contained in the subject line and the message body was considered").
 *
 * The message is read as RFC 5322 headers and a MIME (RFC 2045-2047) body:
 *   - Headers are dropped except Subject, whose encoded-words (=?cs?Q?..?= and
 *     =?cs?B?..?=) are decoded; folded header lines are unfolded. An mbox
 *     "From " line at the top is skipped. A line that is not a header ends
 *     the header block early, so a message with mangled headers still yields
 *     its body.
 *   - multipart/... bodies are split at their boundary, nested to a depth of
 *     IM_MIME_DEPTH; the preamble and epilogue are dropped. Of a
 *     multipart/alternative, only the last alternative that yields text is
 *     kept (the sender's preferred rendering, RFC 2046 §5.1.4): a message sent
 *     as text+HTML and the same message sent as HTML alone give the same terms.
 *   - message/rfc822 parts are read as messages (their Subject included).
 *   - text/plain and text/html parts are kept (HTML through html.c) unless
 *     their Content-Disposition is "attachment"; all other types are ignored.
 *     No Content-Type means text/plain, so a non-MIME body is plain text.
 *   - quoted-printable and base64 transfer encodings are decoded; other
 *     encodings are read as they are.
 *   - Charsets: ISO-8859-1, windows-1252 (ISO-8859-1 is read as
 *     windows-1252, as browsers do) and ISO-8859-15 are converted here;
 *     UTF-8 and US-ASCII are read as they are, and so are the UTF-16 and
 *     UTF-32 names, which a text part (or an HTML page's <meta>, HTML
 *     spec 13.2.3.3) cannot truly be in; any other name goes to iconv
 *     (windows-1251, KOI8-R, ISO-8859-2, Shift_JIS, GB18030, ...), a byte
 *     it cannot read becoming U+FFFD; a name iconv does not know is read
 *     as UTF-8.
 * Every part is followed by a newline so that parts never join words.
 */
#include <errno.h>
#include <iconv.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "text_internal.h"

/** MIME nesting deeper than this is ignored. */
#define IM_MIME_DEPTH 16

/* ---- Small helpers ------------------------------------------------------- */

static bool is_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static int hex_value(char c)
{
	if ((unsigned)(c - '0') < 10)
		return c - '0';
	if ((unsigned)((c | 0x20) - 'a') < 6)
		return (c | 0x20) - 'a' + 10;
	return -1;
}

static int b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

static bool has_prefix_ci(const char *s, size_t n, const char *prefix)
{
	size_t pl = strlen(prefix);

	return n >= pl && !strncasecmp(s, prefix, pl);
}

/* ---- Transfer encodings -------------------------------------------------- */

static int qp_decode(const char *s, size_t n, bool header, struct im_buf *out)
{
	size_t i = 0;

	if (im_buf_reserve(out, n))
		return -ENOMEM;
	while (i < n) {
		char c = s[i];
		size_t j;

		if (c != '=') {
			/* In an encoded-word, '_' is a space (RFC 2047 §4.2). */
			out->p[out->len++] = header && c == '_' ? ' ' : c;
			i++;
			continue;
		}
		if (i + 2 < n && hex_value(s[i + 1]) >= 0 &&
		    hex_value(s[i + 2]) >= 0) {
			out->p[out->len++] = (char)(hex_value(s[i + 1]) * 16 +
						    hex_value(s[i + 2]));
			i += 3;
			continue;
		}
		/* A soft line break: '=', maybe trailing blanks, end of line. */
		j = i + 1;
		while (j < n && (s[j] == ' ' || s[j] == '\t'))
			j++;
		if (j < n && s[j] == '\r')
			j++;
		if (j == n || s[j] == '\n') {
			i = j < n ? j + 1 : n;
			continue;
		}
		out->p[out->len++] = '=';
		i++;
	}
	return 0;
}

static int b64_decode(const char *s, size_t n, struct im_buf *out)
{
	uint32_t acc = 0;
	unsigned bits = 0;

	if (im_buf_reserve(out, n / 4 * 3 + 3))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		int v = b64_value((unsigned char)s[i]);

		if (v < 0) {
			/* Padding ends a block; restart cleanly on what follows. */
			if (s[i] == '=')
				acc = bits = 0;
			continue;
		}
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out->p[out->len++] = (char)(acc >> bits);
			acc &= (1u << bits) - 1;
		}
	}
	return 0;
}

/* ---- Charsets ------------------------------------------------------------ */

enum charset { CS_UTF8, CS_1252, CS_8859_15, CS_ICONV };

/* The longest charset name handed to iconv; IANA's longest is 45 bytes. */
#define CHARSET_NAME_MAX 64

static bool is_name_of(const char *name, size_t n, const char *const *names)
{
	for (const char *const *c = names; *c; c++)
		if (strlen(*c) == n && !strncasecmp(name, *c, n))
			return true;
	return false;
}

/* Whether @p name could be a charset name for iconv: letters, digits and
 * "-_.:()" only, so that nothing like "//IGNORE" or a path reaches it. */
static bool plain_name(const char *name, size_t n)
{
	if (!n || n > CHARSET_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)name[i];
		bool ok = im_ascii_alpha((char)c) || im_ascii_digit((char)c) ||
			  (c && strchr("-_.:()", c));

		if (!ok)
			return false;
	}
	return true;
}

static enum charset charset_of(const char *name, size_t n)
{
	static const char *const latin1[] = {
		"iso-8859-1", "iso8859-1",  "iso_8859-1",   "latin1",
		"latin-1",    "l1",	    "windows-1252", "cp1252",
		"x-cp1252",   "iso-ir-100", "ibm819",	    "cp819",
		NULL,
	};
	static const char *const latin9[] = {
		"iso-8859-15", "iso8859-15", "iso_8859-15",
		"latin9",      "latin-9",    NULL,
	};
	static const char *const as_is[] = {
		"utf-8",    "utf8",	"us-ascii", "ascii", "ansi_x3.4-1968",
		"utf-16",   "utf-16le", "utf-16be", "utf16", "utf-32",
		"utf-32le", "utf-32be", "ucs-2",    "ucs-4", NULL,
	};
	const char *star = memchr(name, '*', n); /* RFC 2231 language */

	if (star)
		n = (size_t)(star - name);
	if (is_name_of(name, n, latin1))
		return CS_1252;
	if (is_name_of(name, n, latin9))
		return CS_8859_15;
	if (is_name_of(name, n, as_is) || !plain_name(name, n))
		return CS_UTF8;
	return CS_ICONV;
}

int im_iconv_append(iconv_t cd, const char *s, size_t n, struct im_buf *out)
{
	char *in = (char *)s; /* iconv() does not write through it */
	size_t left = n;
	int ret = 0;

	iconv(cd, NULL, NULL, NULL, NULL);
	while (left && !ret) {
		/* Room for a few bytes of UTF-8 per byte read, a chunk at a
		 * time: a conversion that fills it (E2BIG) comes back here. */
		ret = im_buf_reserve(out, left < 4096 ? 4 * left + 16 : 16384);
		if (ret)
			break;
		char *o = out->p + out->len;
		size_t room = out->cap - out->len;
		size_t r = iconv(cd, &in, &left, &o, &room);

		out->len = (size_t)(o - out->p);
		if (r != (size_t)-1 || errno == E2BIG)
			continue;
		if (errno != EILSEQ) /* EINVAL: cut short at the end */
			break;
		in++;
		left--;
		ret = im_buf_append(out, "\xef\xbf\xbd", 3);
	}
	return ret;
}

/*
 * s[0, n) in the charset @p name (a plain_name()) appended to @p out as
 * UTF-8 by iconv (im_iconv_append()).
 * @return 0, -ENOMEM, or -ENOENT if iconv knows no such charset.
 */
static int iconv_to_utf8(const char *name, size_t name_len, const char *s,
			 size_t n, struct im_buf *out)
{
	char cname[CHARSET_NAME_MAX + 1];
	iconv_t cd;
	int ret;

	/* plain_name() bounds what charset_of() judged, not what a caller
	 * hands on: a longer name is no charset iconv knows. */
	if (name_len > CHARSET_NAME_MAX)
		return -ENOENT;
	memcpy(cname, name, name_len);
	cname[name_len] = '\0';
	cd = iconv_open("UTF-8", cname);
	if (cd == (iconv_t)-1)
		return -ENOENT;
	ret = im_iconv_append(cd, s, n, out);
	iconv_close(cd);
	return ret;
}

static uint32_t latin9_cp(unsigned char c)
{
	switch (c) {
	case 0xa4: return 0x20ac;
	case 0xa6: return 0x0160;
	case 0xa8: return 0x0161;
	case 0xb4: return 0x017d;
	case 0xb8: return 0x017e;
	case 0xbc: return 0x0152;
	case 0xbd: return 0x0153;
	case 0xbe: return 0x0178;
	}
	return c;
}

/* s[0, n) in the charset @p name appended to @p out as UTF-8. */
static int to_utf8(const char *s, size_t n, const char *name, size_t name_len,
		   struct im_buf *out)
{
	enum charset cs = charset_of(name, name_len);
	const char *star = memchr(name, '*', name_len);
	size_t before = out->len;
	int ret = 0;

	/* The name charset_of() judged: an RFC 2231 language after '*' is
	 * not part of it (and made it longer than plain_name() allows). */
	if (star)
		name_len = (size_t)(star - name);
	if (cs == CS_ICONV) {
		ret = iconv_to_utf8(name, name_len, s, n, out);
		if (ret != -ENOENT)
			return ret;
		out->len = before;
		cs = CS_UTF8;
	}
	if (cs == CS_UTF8)
		return im_buf_append(out, s, n);
	for (size_t i = 0; i < n && !ret; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x80)
			ret = im_buf_putc(out, (char)c);
		else if (cs == CS_1252 && c < 0xa0)
			ret = im_buf_put_cp(out, im_cp1252_high[c - 0x80]);
		else if (cs == CS_8859_15)
			ret = im_buf_put_cp(out, latin9_cp(c));
		else
			ret = im_buf_put_cp(out, c);
	}
	return ret;
}

bool im_charset_is_utf8(const char *name, size_t n)
{
	return charset_of(name, n) == CS_UTF8;
}

int im_charset_to_utf8(const char *name, size_t name_len, const char *s,
		       size_t n, struct im_buf *out)
{
	return to_utf8(s, n, name, name_len, out);
}

/* ---- Headers ------------------------------------------------------------- */

/* The headers of one entity that matter here, unfolded. */
struct headers {
	struct im_buf subject, ctype, cte, cdisp;
	bool has_subject, has_ctype;
};

static void headers_reset(struct headers *h)
{
	h->subject.len = h->ctype.len = h->cte.len = h->cdisp.len = 0;
	h->has_subject = h->has_ctype = false;
}

static void headers_release(struct headers *h)
{
	im_buf_release(&h->subject);
	im_buf_release(&h->ctype);
	im_buf_release(&h->cte);
	im_buf_release(&h->cdisp);
}

/* Length of a header's name if @line is "name:...", else 0. */
static size_t header_name(const char *line, size_t n)
{
	size_t k = 0;

	while (k < n && line[k] > 32 && line[k] < 127 && line[k] != ':')
		k++;
	return k < n && line[k] == ':' ? k : 0;
}

/*
 * Read the header block at s[0, len) into @h. @return the index where the
 * body begins (after the empty line, or at the first line that is not a
 * header).
 */
static size_t parse_headers(const char *s, size_t len, bool top,
			    struct headers *h, int *ret)
{
	struct im_buf *cur = NULL;
	size_t i = 0;

	headers_reset(h);
	if (top && has_prefix_ci(s, len, "From ")) {
		const char *nl = memchr(s, '\n', len);

		i = nl ? (size_t)(nl - s) + 1 : len;
	}
	while (i < len && !*ret) {
		const char *line = s + i;
		const char *nl = memchr(line, '\n', len - i);
		size_t next = nl ? (size_t)(nl - s) + 1 : len;
		size_t ll = (nl ? (size_t)(nl - line) : len - i), k;

		if (ll && line[ll - 1] == '\r')
			ll--;
		if (ll == 0)
			return next;
		if (line[0] == ' ' || line[0] == '\t') {
			if (i == 0)
				return i; /* no headers at all */
			if (cur)
				*ret = im_buf_append(cur, line, ll);
			i = next;
			continue;
		}
		k = header_name(line, ll);
		if (!k)
			return i;
		cur = NULL;
		if (k == 7 && !strncasecmp(line, "subject", 7)) {
			cur = &h->subject;
			h->has_subject = true;
		} else if (k == 12 && !strncasecmp(line, "content-type", 12)) {
			cur = &h->ctype;
			h->has_ctype = true;
		} else if (k == 25 &&
			   !strncasecmp(line, "content-transfer-encoding",
					25)) {
			cur = &h->cte;
		} else if (k == 19 &&
			   !strncasecmp(line, "content-disposition", 19)) {
			cur = &h->cdisp;
		}
		if (cur) {
			cur->len = 0; /* a repeated header: the last one wins */
			*ret = im_buf_append(cur, line + k + 1, ll - k - 1);
		}
		i = next;
	}
	return len;
}

/* The first token of a header value, lower-cased, into dst. */
static void first_token(const struct im_buf *v, char *dst, size_t dst_len)
{
	size_t i = 0, o = 0;

	while (i < v->len && is_ws(v->p[i]))
		i++;
	while (i < v->len && !is_ws(v->p[i]) && v->p[i] != ';' &&
	       v->p[i] != '(') {
		if (o + 1 < dst_len) {
			char c = v->p[i];

			dst[o++] =
				(c >= 'A' && c <= 'Z') ? (char)(c | 0x20) : c;
		}
		i++;
	}
	dst[o] = '\0';
}

/*
 * The value of parameter @name in a header value ("type; a=b; c="d""),
 * unquoted, into dst. @return true if found.
 */
static bool header_param(const struct im_buf *v, const char *name, char *dst,
			 size_t dst_len)
{
	size_t nl = strlen(name), i = 0, n = v->len;
	const char *s = v->p;

	while (i < n) {
		const char *semi = memchr(s + i, ';', n - i);
		size_t o = 0;

		if (!semi)
			return false;
		i = (size_t)(semi - s) + 1;
		while (i < n && is_ws(s[i]))
			i++;
		if (!(n - i > nl && !strncasecmp(s + i, name, nl)))
			continue;
		i += nl;
		while (i < n && is_ws(s[i]))
			i++;
		if (i >= n || s[i] != '=')
			continue;
		i++;
		while (i < n && is_ws(s[i]))
			i++;
		if (i < n && s[i] == '"') {
			for (i++; i < n && s[i] != '"'; i++) {
				if (s[i] == '\\' && i + 1 < n)
					i++;
				if (o + 1 < dst_len)
					dst[o++] = s[i];
			}
		} else {
			for (; i < n && !is_ws(s[i]) && s[i] != ';'; i++)
				if (o + 1 < dst_len)
					dst[o++] = s[i];
		}
		dst[o] = '\0';
		return o > 0;
	}
	return false;
}

/* ---- Encoded words (RFC 2047) -------------------------------------------- */

struct mail {
	struct im_buf *out;
	struct im_buf dec, conv; /* scratch, reused by every part */
	size_t ew_fail_end;	 /* see encoded_word() */
};

/*
 * Try to read an encoded-word =?charset?E?text?= at v[k]. On success decode
 * it to @out and @return the index after it; else @return 0.
 */
static size_t encoded_word(struct mail *m, const char *v, size_t n, size_t k,
			   struct im_buf *out, int *ret)
{
	size_t cs = k + 2, q1 = cs, e;
	char enc;

	while (q1 < n && q1 - cs < 64 && v[q1] != '?' && !is_ws(v[q1]))
		q1++;
	if (q1 == cs || q1 + 2 >= n || v[q1] != '?' || v[q1 + 2] != '?')
		return 0;
	enc = (char)(v[q1 + 1] | 0x20);
	if (enc != 'q' && enc != 'b')
		return 0;
	/*
	 * The text ends at "?=" and holds no blank (RFC 2047 §5). A search
	 * that failed up to some point fails for any later start before it,
	 * so each byte is searched once: no quadratic time on "=?x?q?=?x?q?".
	 */
	if (q1 + 3 < m->ew_fail_end)
		return 0;
	for (e = q1 + 3; e + 1 < n && !is_ws(v[e]); e++)
		if (v[e] == '?' && v[e + 1] == '=')
			break;
	if (e + 1 >= n || is_ws(v[e])) {
		m->ew_fail_end = e;
		return 0;
	}
	m->dec.len = 0;
	if (enc == 'q')
		*ret = qp_decode(v + q1 + 3, e - (q1 + 3), true, &m->dec);
	else
		*ret = b64_decode(v + q1 + 3, e - (q1 + 3), &m->dec);
	if (!*ret)
		*ret = to_utf8(m->dec.p, m->dec.len, v + cs, q1 - cs, out);
	return e + 2;
}

/* Append the decoded Subject @v to out; blanks between encoded-words go. */
static int decode_subject(struct mail *m, const char *v, size_t n)
{
	size_t i = 0;
	bool after_word = false;
	int ret = 0;

	m->ew_fail_end = 0;
	while (i < n && !ret) {
		size_t k = i, end = 0;
		bool blank = true;

		while (k + 1 < n && !(v[k] == '=' && v[k + 1] == '?')) {
			blank = blank && is_ws(v[k]);
			k++;
		}
		if (k + 1 >= n) {
			ret = im_buf_append(m->out, v + i, n - i);
			break;
		}
		if (!(after_word && blank))
			ret = im_buf_append(m->out, v + i, k - i);
		if (!ret)
			end = encoded_word(m, v, n, k, m->out, &ret);
		if (end) {
			i = end;
			after_word = true;
		} else if (!ret) {
			ret = im_buf_append(m->out, "=?", 2);
			i = k + 2;
			after_word = false;
		}
	}
	return ret;
}

/* ---- Entities and multiparts --------------------------------------------- */

static int entity(struct mail *m, const char *s, size_t len, bool message,
		  unsigned depth);

/* Does the line s[0, n) delimit a part of @b? Sets *close for "--b--". */
static bool is_delimiter(const char *s, size_t n, const char *b, size_t bl,
			 bool *close)
{
	size_t k = 2 + bl;

	if (n < k || s[0] != '-' || s[1] != '-' || memcmp(s + 2, b, bl))
		return false;
	*close = n >= k + 2 && s[k] == '-' && s[k + 1] == '-';
	if (*close)
		k += 2;
	for (; k < n; k++) /* transport padding only */
		if (!is_ws(s[k]))
			return false;
	return true;
}

static bool has_text(const struct im_buf *b, size_t from)
{
	for (size_t i = from; i < b->len; i++)
		if (!is_ws(b->p[i]))
			return true;
	return false;
}

struct range {
	size_t off, len;
};

static int multipart(struct mail *m, const char *s, size_t len,
		     const char *boundary, bool alternative, unsigned depth)
{
	size_t bl = strlen(boundary), i = 0, start = 0, nparts = 0, cap = 0;
	struct range *parts = NULL, *np;
	bool in_part = false, close = false;
	int ret = 0;

	while (i < len && !close) {
		const char *nl = memchr(s + i, '\n', len - i);
		size_t next = nl ? (size_t)(nl - s) + 1 : len;
		size_t ll = (nl ? (size_t)(nl - s) : len) - i;
		size_t end;

		if (s[i] != '-' ||
		    !is_delimiter(s + i, ll, boundary, bl, &close)) {
			i = next;
			continue;
		}
		if (in_part) {
			/* The line break before a delimiter belongs to it. */
			end = i;
			if (end > start && s[end - 1] == '\n')
				end--;
			if (end > start && s[end - 1] == '\r')
				end--;
			if (nparts == cap) {
				cap = cap ? cap * 2 : 8;
				np = realloc(parts, cap * sizeof(*parts));
				if (!np) {
					ret = -ENOMEM;
					goto out;
				}
				parts = np;
			}
			parts[nparts].off = start;
			parts[nparts++].len = end - start;
		}
		in_part = !close;
		start = next;
		i = next;
	}
	if (in_part && start < len) { /* no closing delimiter: to the end */
		if (nparts == cap) {
			np = realloc(parts, (cap + 1) * sizeof(*parts));
			if (!np) {
				ret = -ENOMEM;
				goto out;
			}
			parts = np;
		}
		parts[nparts].off = start;
		parts[nparts++].len = len - start;
	}

	if (alternative) {
		for (size_t k = nparts; k-- > 0 && !ret;) {
			size_t before = m->out->len;

			ret = entity(m, s + parts[k].off, parts[k].len, false,
				     depth + 1);
			if (has_text(m->out, before))
				break;
		}
	} else {
		for (size_t k = 0; k < nparts && !ret; k++)
			ret = entity(m, s + parts[k].off, parts[k].len, false,
				     depth + 1);
	}
out:
	free(parts);
	return ret;
}

/* One MIME entity (a message when @message: its Subject counts). */
static int entity(struct mail *m, const char *s, size_t len, bool message,
		  unsigned depth)
{
	struct headers h = {0};
	char type[80], cte[40], disp[40], charset[80], boundary[256];
	const char *body;
	size_t blen, b;
	int ret = 0;

	if (depth > IM_MIME_DEPTH)
		return 0;
	b = parse_headers(s, len, message, &h, &ret);
	if (ret)
		goto out;
	body = s + b;
	blen = len - b;

	if (message && h.has_subject) {
		ret = decode_subject(m, h.subject.p, h.subject.len);
		if (!ret)
			ret = im_buf_putc(m->out, '\n');
		if (ret)
			goto out;
	}
	first_token(&h.ctype, type, sizeof(type));
	first_token(&h.cte, cte, sizeof(cte));
	first_token(&h.cdisp, disp, sizeof(disp));
	if (!h.has_ctype || !type[0])
		strcpy(type, "text/plain");
	if (!message && !strcmp(disp, "attachment"))
		goto out;

	if (!strncmp(type, "multipart/", 10)) {
		if (header_param(&h.ctype, "boundary", boundary,
				 sizeof(boundary)))
			ret = multipart(m, body, blen, boundary,
					!strcmp(type, "multipart/alternative"),
					depth);
		goto out;
	}
	if (!strcmp(type, "message/rfc822") ||
	    !strcmp(type, "message/global")) {
		ret = entity(m, body, blen, true, depth + 1);
		goto out;
	}
	if (strcmp(type, "text/plain") && strcmp(type, "text/html"))
		goto out;

	/* Decode the transfer encoding into m->dec, the charset into m->conv. */
	m->dec.len = 0;
	if (!strcmp(cte, "quoted-printable")) {
		ret = qp_decode(body, blen, false, &m->dec);
		body = m->dec.p;
		blen = m->dec.len;
	} else if (!strcmp(cte, "base64")) {
		ret = b64_decode(body, blen, &m->dec);
		body = m->dec.p;
		blen = m->dec.len;
	}
	if (ret)
		goto out;
	if (!header_param(&h.ctype, "charset", charset, sizeof(charset)))
		strcpy(charset, "us-ascii");
	m->conv.len = 0;
	ret = to_utf8(body, blen, charset, strlen(charset), &m->conv);
	if (ret)
		goto out;
	if (!strcmp(type, "text/html"))
		ret = im_html_text(m->conv.p, m->conv.len, m->out);
	else
		ret = im_buf_append(m->out, m->conv.p, m->conv.len);
	if (!ret)
		ret = im_buf_putc(m->out, '\n');
out:
	headers_release(&h);
	return ret;
}

int im_email_text(const char *s, size_t len, struct im_buf *out)
{
	struct mail m = {.out = out};
	int ret;

	ret = entity(&m, s, len, true, 0);
	im_buf_release(&m.dec);
	im_buf_release(&m.conv);
	return ret;
}
