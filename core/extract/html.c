/**
 * @file html.c
 * HTML to text for the word scanner: a single forward pass that never backs
 * up, so malformed input costs at most linear time and ends at the end of the
 * buffer.
 *
 *   - A tag is '<' then a letter (or "</" then a letter) up to the next '>'
 *     outside a quoted attribute value; it becomes one space, except inline
 *     tags (a, b, i, em, span, ...) which vanish, so "a<b>c</b>d" is one word
 *     as a browser shows it. A tag that never ends drops the rest of the
 *     document (a browser shows none of it either). A '<' that starts no tag
 *     is text.
 *   - <script> and <style> bodies are dropped up to their end tag, and so is
 *     <title>: a browser shows it on the tab, not in the page (a heading
 *     repeats it where it is the text's), docx and odt keep their title
 *     among properties we do not read, and epub pages' titles are left out
 *     (zipdoc.c).
 *   - In LibreOffice's and pandoc's exports of a document (as their
 *     generator <meta> says: office_export()), a note's number, where the
 *     note is referenced and before the note's own text, becomes one space:
 *     docx and odt hold it as a mark, not as text, and glued to the words
 *     around it, it made terms of its own ("gauges1", "1calibrated"). So
 *     does LibreOffice's page header and footer (<div title="header">),
 *     which docx, odt and rtf leave out too (zipdoc.c, rtf.c): a template's
 *     letterhead, repeated on every page.
 *   - An <ol>'s <li> starts with its number as a browser shows it ("1. "),
 *     from the first <ol> on (list_tag()), as a .txt types it and docx and
 *     odt number their items (zipdoc.c).
 *   - Comments <!-- --> vanish; <!...> and <?...?> become a space;
 *     <![CDATA[ ... ]]> is copied verbatim.
 *   - Entities: the 252 named entities of HTML 4 plus &apos;, with or without
 *     the ';' (without it, the whole run of letters and digits after '&' must
 *     be a name: "&amp " decodes, "&copyright" stays as it is); numeric
 *     &#NNN; and &#xHH; (the ';' optional), with 128-159 read as
 *     windows-1252 as browsers do and invalid values as U+FFFD. Anything else
 *     after '&' is text.
 * Text is copied as bytes: the word scanner deals with the encoding
 * (text.c converts a document that declares a legacy charset beforehand,
 * finding the declaration with im_html_charset()).
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif
#if defined(__SSE2__) && defined(__x86_64__)
#include <immintrin.h>
#define HAVE_AVX512_GEAR 1
#endif

#include "cpu.h"
#include "extract_internal.h"
#include "text_internal.h"

struct entity {
	const char *name;
	uint32_t cp;
};

/* In byte order, the order entities_index() fills its table in. */
/* clang-format off */
static const struct entity entities[] = {
	{ "AElig", 198 }, { "Aacute", 193 }, { "Acirc", 194 }, { "Agrave", 192 },
	{ "Alpha", 913 }, { "Aring", 197 }, { "Atilde", 195 }, { "Auml", 196 },
	{ "Beta", 914 }, { "Ccedil", 199 }, { "Chi", 935 }, { "Dagger", 8225 },
	{ "Delta", 916 }, { "ETH", 208 }, { "Eacute", 201 }, { "Ecirc", 202 },
	{ "Egrave", 200 }, { "Epsilon", 917 }, { "Eta", 919 }, { "Euml", 203 },
	{ "Gamma", 915 }, { "Iacute", 205 }, { "Icirc", 206 }, { "Igrave", 204 },
	{ "Iota", 921 }, { "Iuml", 207 }, { "Kappa", 922 }, { "Lambda", 923 },
	{ "Mu", 924 }, { "Ntilde", 209 }, { "Nu", 925 }, { "OElig", 338 },
	{ "Oacute", 211 }, { "Ocirc", 212 }, { "Ograve", 210 }, { "Omega", 937 },
	{ "Omicron", 927 }, { "Oslash", 216 }, { "Otilde", 213 }, { "Ouml", 214 },
	{ "Phi", 934 }, { "Pi", 928 }, { "Prime", 8243 }, { "Psi", 936 },
	{ "Rho", 929 }, { "Scaron", 352 }, { "Sigma", 931 }, { "THORN", 222 },
	{ "Tau", 932 }, { "Theta", 920 }, { "Uacute", 218 }, { "Ucirc", 219 },
	{ "Ugrave", 217 }, { "Upsilon", 933 }, { "Uuml", 220 }, { "Xi", 926 },
	{ "Yacute", 221 }, { "Yuml", 376 }, { "Zeta", 918 }, { "aacute", 225 },
	{ "acirc", 226 }, { "acute", 180 }, { "aelig", 230 }, { "agrave", 224 },
	{ "alefsym", 8501 }, { "alpha", 945 }, { "amp", 38 }, { "and", 8743 },
	{ "ang", 8736 }, { "apos", 39 }, { "aring", 229 }, { "asymp", 8776 },
	{ "atilde", 227 }, { "auml", 228 }, { "bdquo", 8222 }, { "beta", 946 },
	{ "brvbar", 166 }, { "bull", 8226 }, { "cap", 8745 }, { "ccedil", 231 },
	{ "cedil", 184 }, { "cent", 162 }, { "chi", 967 }, { "circ", 710 },
	{ "clubs", 9827 }, { "cong", 8773 }, { "copy", 169 }, { "crarr", 8629 },
	{ "cup", 8746 }, { "curren", 164 }, { "dArr", 8659 }, { "dagger", 8224 },
	{ "darr", 8595 }, { "deg", 176 }, { "delta", 948 }, { "diams", 9830 },
	{ "divide", 247 }, { "eacute", 233 }, { "ecirc", 234 }, { "egrave", 232 },
	{ "empty", 8709 }, { "emsp", 8195 }, { "ensp", 8194 }, { "epsilon", 949 },
	{ "equiv", 8801 }, { "eta", 951 }, { "eth", 240 }, { "euml", 235 },
	{ "euro", 8364 }, { "exist", 8707 }, { "fnof", 402 }, { "forall", 8704 },
	{ "frac12", 189 }, { "frac14", 188 }, { "frac34", 190 }, { "frasl", 8260 },
	{ "gamma", 947 }, { "ge", 8805 }, { "gt", 62 }, { "hArr", 8660 },
	{ "harr", 8596 }, { "hearts", 9829 }, { "hellip", 8230 }, { "iacute", 237 },
	{ "icirc", 238 }, { "iexcl", 161 }, { "igrave", 236 }, { "image", 8465 },
	{ "infin", 8734 }, { "int", 8747 }, { "iota", 953 }, { "iquest", 191 },
	{ "isin", 8712 }, { "iuml", 239 }, { "kappa", 954 }, { "lArr", 8656 },
	{ "lambda", 955 }, { "lang", 9001 }, { "laquo", 171 }, { "larr", 8592 },
	{ "lceil", 8968 }, { "ldquo", 8220 }, { "le", 8804 }, { "lfloor", 8970 },
	{ "lowast", 8727 }, { "loz", 9674 }, { "lrm", 8206 }, { "lsaquo", 8249 },
	{ "lsquo", 8216 }, { "lt", 60 }, { "macr", 175 }, { "mdash", 8212 },
	{ "micro", 181 }, { "middot", 183 }, { "minus", 8722 }, { "mu", 956 },
	{ "nabla", 8711 }, { "nbsp", 160 }, { "ndash", 8211 }, { "ne", 8800 },
	{ "ni", 8715 }, { "not", 172 }, { "notin", 8713 }, { "nsub", 8836 },
	{ "ntilde", 241 }, { "nu", 957 }, { "oacute", 243 }, { "ocirc", 244 },
	{ "oelig", 339 }, { "ograve", 242 }, { "oline", 8254 }, { "omega", 969 },
	{ "omicron", 959 }, { "oplus", 8853 }, { "or", 8744 }, { "ordf", 170 },
	{ "ordm", 186 }, { "oslash", 248 }, { "otilde", 245 }, { "otimes", 8855 },
	{ "ouml", 246 }, { "para", 182 }, { "part", 8706 }, { "permil", 8240 },
	{ "perp", 8869 }, { "phi", 966 }, { "pi", 960 }, { "piv", 982 },
	{ "plusmn", 177 }, { "pound", 163 }, { "prime", 8242 }, { "prod", 8719 },
	{ "prop", 8733 }, { "psi", 968 }, { "quot", 34 }, { "rArr", 8658 },
	{ "radic", 8730 }, { "rang", 9002 }, { "raquo", 187 }, { "rarr", 8594 },
	{ "rceil", 8969 }, { "rdquo", 8221 }, { "real", 8476 }, { "reg", 174 },
	{ "rfloor", 8971 }, { "rho", 961 }, { "rlm", 8207 }, { "rsaquo", 8250 },
	{ "rsquo", 8217 }, { "sbquo", 8218 }, { "scaron", 353 }, { "sdot", 8901 },
	{ "sect", 167 }, { "shy", 173 }, { "sigma", 963 }, { "sigmaf", 962 },
	{ "sim", 8764 }, { "spades", 9824 }, { "sub", 8834 }, { "sube", 8838 },
	{ "sum", 8721 }, { "sup", 8835 }, { "sup1", 185 }, { "sup2", 178 },
	{ "sup3", 179 }, { "supe", 8839 }, { "szlig", 223 }, { "tau", 964 },
	{ "there4", 8756 }, { "theta", 952 }, { "thetasym", 977 }, { "thinsp", 8201 },
	{ "thorn", 254 }, { "tilde", 732 }, { "times", 215 }, { "trade", 8482 },
	{ "uArr", 8657 }, { "uacute", 250 }, { "uarr", 8593 }, { "ucirc", 251 },
	{ "ugrave", 249 }, { "uml", 168 }, { "upsih", 978 }, { "upsilon", 965 },
	{ "uuml", 252 }, { "weierp", 8472 }, { "xi", 958 }, { "yacute", 253 },
	{ "yen", 165 }, { "yuml", 255 }, { "zeta", 950 }, { "zwj", 8205 },
	{ "zwnj", 8204 },

};
/* clang-format on */

/*
 * A name is looked up as one integer: its bytes packed first byte lowest, 0
 * past its end (no name is longer than ENTITY_KEY_MAX or holds a 0), into a
 * table where every name sits in the slot its key hashes to or in the next
 * one. The multiplier was searched for that (entities_index() checks it):
 * a lookup compares two integers, where a bsearch() called strncmp() eight
 * times. Filled in the order of entities[].
 */
#define ENTITY_KEY_MAX 8
#define ENTITY_SLOTS   1024
static uint64_t entity_key[ENTITY_SLOTS + 1];
static uint16_t entity_cp[ENTITY_SLOTS + 1];
static pthread_once_t entity_once = PTHREAD_ONCE_INIT;

static size_t entity_slot(uint64_t key)
{
	return (size_t)((key * UINT64_C(0x0a7425ffd7d126f9)) >> 54);
}

/* The key of @p name, or 0 if no entity can have it. */
static uint64_t entity_key_of(const char *name, size_t len)
{
	uint64_t key = 0;

	if (len > ENTITY_KEY_MAX)
		return 0;
	for (size_t i = 0; i < len; i++) {
		if (!name[i])
			return 0;
		key |= (uint64_t)(unsigned char)name[i] << (8 * i);
	}
	return key;
}

static void entities_index(void)
{
	for (size_t i = 0; i < sizeof(entities) / sizeof(entities[0]); i++) {
		const struct entity *e = &entities[i];
		uint64_t key = entity_key_of(e->name, strlen(e->name));
		size_t j = entity_slot(key);

		if (entity_key[j])
			j++;
		assert(key && !entity_key[j] && e->cp <= UINT16_MAX);
		entity_key[j] = key;
		entity_cp[j] = (uint16_t)e->cp;
	}
}

int32_t im_html_entity(const char *name, size_t len)
{
	uint64_t key = entity_key_of(name, len);
	size_t i = entity_slot(key);

	if (!key)
		return -1;
	pthread_once(&entity_once, entities_index);
	if (entity_key[i] == key)
		return entity_cp[i];
	if (entity_key[i + 1] == key)
		return entity_cp[i + 1];
	return -1;
}

size_t im_html_entity_count(void)
{
	return sizeof(entities) / sizeof(entities[0]);
}

static bool is_alnum(char c)
{
	return im_ascii_alpha(c) || im_ascii_digit(c);
}

static int hex_value(char c)
{
	if (im_ascii_digit(c))
		return c - '0';
	if ((unsigned)((c | 0x20) - 'a') < 6)
		return (c | 0x20) - 'a' + 10;
	return -1;
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
}

static bool has_prefix(const char *s, size_t n, const char *prefix)
{
	size_t pl = strlen(prefix);

	return n >= pl && !memcmp(s, prefix, pl);
}

/* @return the index of @needle in s[from, len), or len. */
static size_t find(const char *s, size_t len, size_t from, const char *needle)
{
	size_t nl = strlen(needle);

	while (from + nl <= len) {
		const char *p = memchr(s + from, needle[0], len - from);

		if (!p)
			break;
		from = (size_t)(p - s);
		if (from + nl <= len && !memcmp(p, needle, nl))
			return from;
		from++;
	}
	return len;
}

/* Tags that do not break a word: phrasing elements a browser runs inline. */
/* clang-format off */
static const char *const inline_tags[] = {
	"a",	"abbr", "acronym", "b",	   "bdi",  "bdo",    "big",   "cite",
	"code", "data", "del",	   "dfn",  "em",   "font",   "i",     "ins",
	"kbd",	"mark", "nobr",	   "q",	   "s",	   "samp",   "small", "span",
	"strike", "strong", "sub", "sup",  "time", "tt",     "u",     "var",
	"wbr",	NULL,
};
/* clang-format on */

/* TAG_SCRIPT and the kinds after it up to TAG_TITLE are dropped with their
 * body; an ordered list (TAG_OL) has the scalar loop number its items
 * (list_tag()), and the windows stop at it as at those. */
enum tag_kind {
	TAG_OTHER,
	TAG_INLINE,
	TAG_SCRIPT,
	TAG_STYLE,
	TAG_TITLE,
	TAG_OL
};

static const char *const dropped_names[] = {
	[TAG_SCRIPT] = "script",
	[TAG_STYLE] = "style",
	[TAG_TITLE] = "title",
};

/*
 * Every tag is classified, so names are compared as one integer each: the
 * first 8 bytes of the name, lower-cased, packed little end first (0 past
 * its end). No name of interest is longer than 7 bytes, so the key of a
 * longer name, whose 8th byte is not 0, matches none: it is TAG_OTHER.
 */
#define TAG_KEY_MAX 8
#define NINLINE	    (sizeof(inline_tags) / sizeof(inline_tags[0]) - 1)

static uint64_t tag_key(const char *s, size_t n)
{
	uint64_t key = 0;

	for (size_t i = 0; i < n && i < TAG_KEY_MAX; i++)
		key |= (uint64_t)(unsigned char)(s[i] |
						 (im_ascii_alpha(s[i]) ? 0x20
								       : 0))
		       << (8 * i);
	return key;
}

/* The bytes of a tag name (letters, digits, '-', ':') lower-cased, 0 for
 * the bytes that end it; filled by keys_init(). */
static unsigned char name_byte[256];

/*
 * Every name of interest in a table keyed by the packed name (0 marks an
 * empty slot: no name packs to 0). The multiplier was searched for one that
 * gives each name a slot of its own (kind_put() checks it): a lookup is one
 * probe and a compare, not a loop whose exit the branch predictor has to
 * guess for every tag.
 */
#define KIND_SLOTS 64
static uint64_t kind_key[KIND_SLOTS];
static uint8_t kind_val[KIND_SLOTS];
static pthread_once_t keys_once = PTHREAD_ONCE_INIT;

static size_t kind_slot(uint64_t key)
{
	return (size_t)((key * UINT64_C(0xce88ee9624189e43)) >> 58);
}

static void kind_put(const char *name, enum tag_kind kind)
{
	uint64_t key = tag_key(name, strlen(name));
	size_t i = kind_slot(key);

	assert(strlen(name) < TAG_KEY_MAX && !kind_key[i]);
	kind_key[i] = key;
	kind_val[i] = (uint8_t)kind;
}

static void keys_init(void)
{
	for (unsigned c = 1; c < 256; c++)
		if (is_alnum((char)c) || c == '-' || c == ':')
			name_byte[c] =
				(unsigned char)(c |
						(im_ascii_alpha((char)c) ? 0x20
									 : 0));
	for (size_t i = 0; i < NINLINE; i++)
		kind_put(inline_tags[i], TAG_INLINE);
	kind_put("script", TAG_SCRIPT);
	kind_put("style", TAG_STYLE);
	kind_put("title", TAG_TITLE);
	kind_put("ol", TAG_OL);
}

/* What the tag whose name packs to @p key does to the text. */
static enum tag_kind tag_kind(uint64_t key)
{
	size_t i = kind_slot(key);

	/* TAG_OTHER is 0; a mask, not a branch: the kind of one tag says
	 * little of the next one's. */
	return (enum tag_kind)(kind_val[i] & -(uint8_t)(kind_key[i] == key));
}

/*
 * The index of the first of the bytes @a, @b, @c in s[i, len), or len (pass
 * a byte twice to look for two). Text and tag bodies are read with this,
 * 16 bytes at a time with SSE2.
 */
static inline size_t find3(const char *s, size_t i, size_t len, char a, char b,
			   char c)
{
#ifdef __SSE2__
	const __m128i va = _mm_set1_epi8(a), vb = _mm_set1_epi8(b),
		      vc = _mm_set1_epi8(c);

	for (; i + 16 <= len; i += 16) {
		__m128i v = _mm_loadu_si128((const __m128i *)(s + i));
		unsigned m = (unsigned)_mm_movemask_epi8(
			_mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, va),
						  _mm_cmpeq_epi8(v, vb)),
				     _mm_cmpeq_epi8(v, vc)));

		if (m)
			return i + (unsigned)__builtin_ctz(m);
	}
#endif
	for (; i < len; i++)
		if (s[i] == a || s[i] == b || s[i] == c)
			return i;
	return len;
}

struct html {
	const char *s;
	size_t len;
	/* The next byte of text: im_html_text() reserved room for it. */
	char *o;
	/* Set once a search for that quote failed: none is left after it. */
	bool no_dquote, no_squote;
	/* LibreOffice's or pandoc's export of a document: office_export(). */
	bool office;
	/* The text's first byte: what is written stays within what is read. */
	char *o0;
	/* An <ol> was met: lists are numbered from there on (the scalar
	 * loop's). Of the <ol> and <ul> open, the innermost LIST_STACK: which
	 * are ordered (bit i: level i), and each one's next number, step
	 * and format. */
	bool lists;
	size_t list_depth;
	uint32_t ordered;
	int64_t next[32];
	int8_t step[32];
	uint8_t fmt[32];
};
#define LIST_STACK 32

/* Skip a <script> or <style> body from @from; @return the index after its
 * end tag, or len. */
static size_t skip_raw_text(const struct html *h, size_t from, const char *name)
{
	size_t nl = strlen(name);

	for (;;) {
		size_t k = find(h->s, h->len, from, "</");
		const char *gt;

		if (k == h->len)
			return h->len;
		k += 2;
		if (k + nl <= h->len && !strncasecmp(h->s + k, name, nl) &&
		    (k + nl == h->len || !is_alnum(h->s[k + nl]))) {
			gt = memchr(h->s + k, '>', h->len - k);
			return gt ? (size_t)(gt - h->s) + 1 : h->len;
		}
		from = k;
	}
}

/*
 * The key (tag_key()) of the name s[n0, n1). One load of 8 bytes where they
 * are there, not a shift and an or per byte: in memory order on a
 * little-endian machine, the load is tag_key()'s packing; | 0x20 lower-cases
 * a letter and leaves the other name bytes as they are (digits, '-' and ':'
 * have that bit).
 */
static inline uint64_t name_key(const char *s, size_t len, size_t n0, size_t n1)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	uint64_t key;

	if (len - n0 >= TAG_KEY_MAX) {
		memcpy(&key, s + n0, sizeof(key));
		key |= UINT64_C(0x2020202020202020);
		if (n1 - n0 < TAG_KEY_MAX)
			key &= (UINT64_C(1) << (8 * (n1 - n0))) - 1;
		return key;
	}
#endif
	return tag_key(s + n0, n1 - n0);
}

/*
 * The tag whose name packs to @p key ends with the '>' at s[k]: put what it
 * leaves of the text, skip a script, style or title body after it. @return
 * the index after the tag (and the body).
 */
static inline size_t tag_end(struct html *h, size_t k, uint64_t key,
			     bool closing)
{
	bool self_closing = h->s[k - 1] == '/';
	enum tag_kind kind = tag_kind(key);

	k++;
	if (!closing && !self_closing && kind >= TAG_SCRIPT &&
	    kind <= TAG_TITLE)
		k = skip_raw_text(h, k, dropped_names[kind]);
	/* Written always, kept unless the tag is inline: no branch. */
	*h->o = ' ';
	h->o += kind != TAG_INLINE;
	return k;
}

/*
 * The value of the attribute @p name (lower case) among the attributes of a
 * tag, the bytes s[from, to) after its name: double-quoted, single-quoted or
 * unquoted, as HTML writes it; its length in *vlen. NULL if the tag has
 * none. One pass over the bytes.
 */
static const char *tag_attr(const char *s, size_t from, size_t to,
			    const char *name, size_t *vlen)
{
	size_t nl = strlen(name), i = from;

	while (i < to) {
		size_t a0, a1, v0, v1;

		while (i < to && (is_space(s[i]) || s[i] == '/'))
			i++;
		a0 = i;
		while (i < to && !is_space(s[i]) && s[i] != '/' && s[i] != '=')
			i++;
		a1 = i;
		if (a1 == a0) { /* a stray '=' names nothing */
			i++;
			continue;
		}
		while (i < to && is_space(s[i]))
			i++;
		v0 = v1 = a1;
		if (i < to && s[i] == '=') {
			i++;
			while (i < to && is_space(s[i]))
				i++;
			if (i < to && (s[i] == '"' || s[i] == '\'')) {
				const char *q =
					memchr(s + i + 1, s[i], to - i - 1);

				v0 = i + 1;
				v1 = q ? (size_t)(q - s) : to;
				i = v1 + 1;
			} else {
				v0 = i;
				while (i < to && !is_space(s[i]))
					i++;
				v1 = i;
			}
		}
		if (a1 - a0 == nl && !strncasecmp(s + a0, name, nl)) {
			*vlen = v1 - v0;
			return s + v0;
		}
	}
	return NULL;
}

/* Whether the <meta> whose attributes are s[from, to) names one of the
 * programs whose exports office_drop() knows as the generator. */
static bool office_generator(const char *s, size_t from, size_t to)
{
	static const char *const programs[] = {"LibreOffice", "OpenOffice",
					       "pandoc"};
	size_t n;
	const char *v = tag_attr(s, from, to, "name", &n);

	if (!v || n != 9 || strncasecmp(v, "generator", 9))
		return false;
	v = tag_attr(s, from, to, "content", &n);
	for (size_t i = 0; v && i < sizeof(programs) / sizeof(programs[0]); i++)
		if (has_prefix(v, n, programs[i]))
			return true;
	return false;
}

/*
 * Whether s[0, len) is LibreOffice's or pandoc's export of a document: both
 * write a generator <meta> in the head, LibreOffice's after a <title> that
 * is the document's, of any length. The classes, roles and titles
 * office_drop() looks for are theirs (elsewhere title="header" is a
 * tooltip, its text shown); on other pages the search would cost every
 * link a look at its attributes, and the AVX-512 gear its speed.
 *
 * The head is read tag by tag to its end: </head>, <body> or any other
 * tag a head cannot hold (a page without a head ends it at its first
 * one). The bodies of <title>, <style> and <script> and comments are
 * skipped whole, so the walk is one pass over the head, never past it.
 */
static bool office_export(const char *s, size_t len)
{
	static const char *const head_tags[] = {
		"html",	  "head", "meta", "title",    "style",
		"script", "link", "base", "noscript", "template"};
	const struct html h = {.s = s, .len = len};
	size_t i = 0;
	const char *p;

	while (i < len && (p = memchr(s + i, '<', len - i))) {
		size_t n0 = (size_t)(p - s) + 1, n1, k;
		bool closing, head = false;
		uint64_t key;

		if (has_prefix(p, len - n0 + 1, "<!--")) {
			k = find(s, len, n0 + 3, "-->");
			i = k == len ? len : k + 3;
			continue;
		}
		closing = n0 < len && s[n0] == '/';
		n1 = n0 + closing;
		if (n1 < len && (s[n1] == '!' || s[n1] == '?') && !closing) {
			p = memchr(s + n1, '>', len - n1);
			i = p ? (size_t)(p - s) + 1 : len;
			continue;
		}
		if (n1 >= len || !im_ascii_alpha(s[n1])) {
			i = n0; /* a '<' that starts no tag */
			continue;
		}
		k = n1;
		while (k < len && name_byte[(unsigned char)s[k]])
			k++;
		key = tag_key(s + n1, k - n1);
		n1 = k;
		p = memchr(s + n1, '>', len - n1);
		if (!p)
			return false;
		k = (size_t)(p - s);
		for (size_t t = 0; t < sizeof(head_tags) / sizeof(head_tags[0]);
		     t++)
			head |= key ==
				tag_key(head_tags[t], strlen(head_tags[t]));
		if (!head || (closing && key == tag_key("head", 4)))
			return false;
		if (closing) {
			i = k + 1;
		} else if (key == tag_key("meta", 4)) {
			if (office_generator(s, n1, k))
				return true;
			i = k + 1;
		} else if (key == tag_key("title", 5) ||
			   key == tag_key("style", 5) ||
			   key == tag_key("script", 6)) {
			const char *raw = key == tag_key("title", 5) ? "title"
					  : key == tag_key("style", 5)
						  ? "style"
						  : "script";

			i = s[k - 1] == '/' ? k + 1
					    : skip_raw_text(&h, k + 1, raw);
		} else {
			i = k + 1;
		}
	}
	return false;
}

/* The index after the </div> that closes a <div> whose body starts at
 * @p from (those nested in it counted), or len. */
static size_t skip_div(const struct html *h, size_t from)
{
	const char *s = h->s, *p;
	size_t len = h->len, depth = 1;

	while ((p = memchr(s + from, '<', len - from))) {
		size_t n = (size_t)(p - s) + 1;
		bool closing = n < len && s[n] == '/';

		n += closing;
		from = n;
		if (len - n < 3 || strncasecmp(s + n, "div", 3) ||
		    (n + 3 < len && name_byte[(unsigned char)s[n + 3]]))
			continue;
		if (!closing) {
			depth++;
			continue;
		}
		if (--depth)
			continue;
		p = memchr(s + n, '>', len - n);
		return p ? (size_t)(p - s) + 1 : len;
	}
	return len;
}

/*
 * In an office export (h->office), the opening tag whose name s[.., n1)
 * packs to @p key ends with the '>' at s[k]. If it is a note's number (an
 * <a> of LibreOffice's classes sdfootnoteanc, sdfootnotesym and their
 * sdendnote twins, pandoc's classes footnote-ref and footnote-back, or
 * ARIA's roles doc-noteref and doc-backlink) or LibreOffice's page header or footer,
 * @return the index after its end tag; else 0.
 */
static size_t office_drop(struct html *h, size_t n1, size_t k, uint64_t key)
{
	static const char *const note_marks[] = {
		"sdfootnote",	 "sdendnote",	"footnote-ref",
		"footnote-back", "doc-noteref", "doc-backlink"};

	if (key == tag_key("div", 3)) {
		size_t n;
		const char *v = tag_attr(h->s, n1, k, "title", &n);

		if (v && n == 6 &&
		    (!memcmp(v, "header", 6) || !memcmp(v, "footer", 6)))
			return skip_div(h, k + 1);
		return 0;
	}
	if (key != 'a')
		return 0;
	/* Only the class and role say so: a link's address may hold the
	 * words too (a page on ARIA's #doc-noteref), and its text is read. */
	for (size_t a = 0; a < 2; a++) {
		size_t n;
		const char *v = tag_attr(h->s, n1, k, a ? "role" : "class", &n);

		for (size_t i = 0;
		     v && i < sizeof(note_marks) / sizeof(note_marks[0]); i++)
			if (memmem(v, n, note_marks[i], strlen(note_marks[i])))
				return skip_raw_text(h, k + 1, "a");
	}
	return 0;
}

/* An attribute's value as a number, clamped to int32_t; @p dflt if none. */
static int64_t attr_number(const char *v, size_t n, int64_t dflt)
{
	int64_t x = 0;
	size_t i = 0;
	bool neg;

	while (i < n && is_space(v[i]))
		i++;
	neg = i < n && v[i] == '-';
	i += i < n && (v[i] == '-' || v[i] == '+');
	if (i == n || !im_ascii_digit(v[i]))
		return dflt;
	for (; i < n && im_ascii_digit(v[i]); i++)
		if (x <= INT32_MAX)
			x = 10 * x + (v[i] - '0');
	x = x > INT32_MAX ? INT32_MAX : x;
	return neg ? -x : x;
}

/*
 * The <ol>, <ul> or <li> (@p key, the attributes s[n1, k)) that ends with
 * the '>' at s[k], once h->lists: an <li> of an <ol> starts with its
 * number as a browser shows it ("3. ", "c. ", "iv. "; <ol start type
 * reversed>, <li value>), where the text has room for it (what the tag
 * and the markup before it left; it has, but for thousands of items of
 * a hostile page's <li><li>...). A reversed list without a start (its
 * items would be counted first) numbers nothing. @return whether it was
 * one of those; tag_end() writes its space.
 */
static bool list_tag(struct html *h, size_t n1, size_t k, uint64_t key,
		     bool closing)
{
	size_t d = h->list_depth, n;
	const char *v;

	if (key == tag_key("ol", 2) || key == tag_key("ul", 2)) {
		if (closing) {
			h->list_depth -= d > 0;
			return true;
		}
		h->list_depth++;
		if (d >= LIST_STACK)
			return true;
		h->ordered &= ~(UINT32_C(1) << d);
		if (key == tag_key("ul", 2))
			return true;
		v = tag_attr(h->s, n1, k, "type", &n);
		h->fmt[d] = !v || n != 1 ? IM_LIST_DECIMAL
			    : *v == 'a'	 ? IM_LIST_LOWER_LETTER
			    : *v == 'A'	 ? IM_LIST_UPPER_LETTER
			    : *v == 'i'	 ? IM_LIST_LOWER_ROMAN
			    : *v == 'I'	 ? IM_LIST_UPPER_ROMAN
					 : IM_LIST_DECIMAL;
		h->step[d] = tag_attr(h->s, n1, k, "reversed", &n) ? -1 : 1;
		v = tag_attr(h->s, n1, k, "start", &n);
		if (h->step[d] < 0 && !v)
			return true;
		h->next[d] = v ? attr_number(v, n, 1) : 1;
		h->ordered |= UINT32_C(1) << d;
		return true;
	}
	if (key != tag_key("li", 2))
		return false;
	if (closing || !d || d > LIST_STACK || !(h->ordered >> (d - 1) & 1))
		return true;
	d--;
	v = tag_attr(h->s, n1, k, "value", &n);
	if (v)
		h->next[d] = attr_number(v, n, h->next[d]);
	{
		char label[IM_LIST_NUMBER_MAX + 3];
		size_t len = 0;

		label[len++] = ' ';
		len += im_list_number((enum im_list_fmt)h->fmt[d], h->next[d],
				      label + len);
		label[len++] = '.';
		if ((size_t)(h->o - h->o0) + len + 1 <= k + 1) {
			memcpy(h->o, label, len);
			h->o += len;
		}
	}
	h->next[d] += h->step[d];
	return true;
}

/* s[i] == '<'. Consume the markup; @return the index after it. */
static size_t markup(struct html *h, size_t i)
{
	const char *s = h->s;
	size_t len = h->len, r = len - i, n0, n1, k;
	const char *p;
	bool closing;
	uint64_t key;
	char prev = 0;

	if (r >= 2 && (s[i + 1] == '!' || s[i + 1] == '?')) {
		/* Most markup is a tag: comments and CDATA only after "<!". */
		if (has_prefix(s + i, r, "<!--")) {
			k = find(s, len, i + 2, "-->");
			return k == len ? len : k + 3;
		}
		if (has_prefix(s + i, r, "<![CDATA[")) {
			k = find(s, len, i + 9, "]]>");
			memcpy(h->o, s + i + 9, k - (i + 9));
			h->o += k - (i + 9);
			return k == len ? len : k + 3;
		}
		p = memchr(s + i + 2, '>', r - 2);
		*h->o++ = ' ';
		return p ? (size_t)(p - s) + 1 : len;
	}
	closing = r >= 2 && s[i + 1] == '/';
	n0 = i + 1 + closing;
	if (n0 >= len || !im_ascii_alpha(s[n0])) {
		*h->o++ = '<';
		return i + 1;
	}
	/* The name: the loop only finds its end. */
	n1 = n0 + 1;
	while (n1 < len && name_byte[(unsigned char)s[n1]])
		n1++;
	key = name_key(s, len, n0, n1);

	/*
	 * The end of the tag: the first '>' outside an attribute's quotes. A
	 * quote opens a value when the last byte before it other than space
	 * is '='; the bytes between are skipped in blocks and that byte is
	 * found by looking back from the quote.
	 */
	k = n1;
	for (;;) {
		size_t from = k, b;
		char c;

		/* Most tags end right after their name or a value's closing
		 * quote ("</span>", class="pre">): no search for those. */
		if (k < len && s[k] != '>')
			k = find3(s, k, len, '>', '"', '\'');
		if (k >= len || s[k] == '>')
			break;
		c = s[k];
		for (b = k; b > from && is_space(s[b - 1]); b--)
			;
		if (b > from)
			prev = s[b - 1];
		if (prev == '=') {
			bool *none = c == '"' ? &h->no_dquote : &h->no_squote;

			size_t q = *none ? len : find3(s, k + 1, len, c, c, c);

			if (q < len) {
				k = q + 1;
				prev = c;
				continue;
			}
			*none = true; /* unbalanced: the quote is just a byte */
		}
		prev = c;
		k++;
	}
	if (k >= len)
		return len;
	/* Not a closing one: the AVX-512 gear's windows pass a stray </ol>
	 * by, and both gears must count list levels from the same tag. */
	if (key == tag_key("ol", 2) && !closing)
		h->lists = true;
	if (h->lists && list_tag(h, n1, k, key, closing))
		return tag_end(h, k, key, closing);
	if (h->office && !closing && s[k - 1] != '/') {
		size_t end = office_drop(h, n1, k, key);

		if (end) {
			*h->o++ = ' ';
			return end;
		}
	}
	return tag_end(h, k, key, closing);
}

/* Append the UTF-8 encoding of the scalar value @p cp at @p o; @return the
 * end of it. */
static char *put_utf8(char *o, uint32_t cp)
{
	if (cp < 0x80) {
		*o++ = (char)cp;
	} else if (cp < 0x800) {
		*o++ = (char)(0xc0 | cp >> 6);
		*o++ = (char)(0x80 | (cp & 0x3f));
	} else if (cp < 0x10000) {
		*o++ = (char)(0xe0 | cp >> 12);
		*o++ = (char)(0x80 | ((cp >> 6) & 0x3f));
		*o++ = (char)(0x80 | (cp & 0x3f));
	} else {
		*o++ = (char)(0xf0 | cp >> 18);
		*o++ = (char)(0x80 | ((cp >> 12) & 0x3f));
		*o++ = (char)(0x80 | ((cp >> 6) & 0x3f));
		*o++ = (char)(0x80 | (cp & 0x3f));
	}
	return o;
}

/* s[i] == '&'. Decode an entity or copy the '&'; @return the index after. */
static size_t entity(struct html *h, size_t i)
{
	const char *s = h->s;
	size_t len = h->len, k = i + 1, d0;
	uint32_t v = 0;
	int32_t cp;

	if (k < len && s[k] == '#') {
		bool hex = false;

		k++;
		if (k < len && (s[k] | 0x20) == 'x') {
			hex = true;
			k++;
		}
		d0 = k;
		for (; k < len; k++) {
			int d = hex ? hex_value(s[k])
				    : (im_ascii_digit(s[k]) ? s[k] - '0' : -1);

			if (d < 0)
				break;
			if (v <= 0x10ffff) /* saturate: no overflow */
				v = v * (hex ? 16 : 10) + (uint32_t)d;
		}
		if (k == d0)
			goto literal;
		if (k < len && s[k] == ';')
			k++;
		if (v == 0 || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
			v = 0xfffd;
		else if (v >= 0x80 && v <= 0x9f)
			v = im_cp1252_high[v - 0x80];
		h->o = put_utf8(h->o, v);
		return k;
	}
	d0 = k;
	while (k < len && is_alnum(s[k]) && k - d0 <= 32)
		k++;
	cp = im_html_entity(s + d0, k - d0);
	if (cp < 0)
		goto literal;
	if (k < len && s[k] == ';')
		k++;
	h->o = put_utf8(h->o, (uint32_t)cp);
	return k;
literal:
	*h->o++ = '&';
	return i + 1;
}

/*
 * The AVX-512 gear reads 64 bytes at a time as bit masks (one bit a byte,
 * one instruction a class) and does in a few operations on those what the
 * scalar loop does byte by byte: where each tag starts and ends, whether its
 * quoted values are simple, which bytes are text. The text is then packed
 * with one compress. Real HTML has a tag every 25 bytes or so; the scalar
 * loop spends its time deciding, byte by byte, where each piece ends.
 *
 * Windows follow one another 64 bytes apart. Their tags are '<' then a
 * letter or "</" then a letter, each up to the next '>': a carry through
 * the bits that are not '>' marks each one's bytes, and carries one left
 * open into the next window (with the parity of its double quotes). The
 * kinds of a window's tags (inline, script, style, other) are looked up
 * eight at a time in vector lanes. A window is taken up to the first thing
 * the masks do not settle with certainty, which the scalar code then does
 * (it is the definition: both gears give the same text):
 *   - '&' in text (entity()) and "<!", "<?" (markup());
 *   - a tag whose quotes are not simple: every double quote in a tag pairs
 *     up, the first of each pair right after '=' (markup() opens a value only
 *     there, and spaces before the quote are its job), no single quote
 *     outside a double-quoted value; a '>' inside a value ends the tag early
 *     and leaves an odd count, so it is caught too;
 *   - a '<' starting a tag inside another tag's bytes;
 *   - <script>, <style> and <title>.
 * A tag carried open from an earlier window that turns out to be one of
 * these takes the output back to where it stood before the tag.
 *
 * Measured on the 1,699 HTML files of the bench corpus (66.8 MB, warm):
 * scalar 53.6 ms; windows that restarted after each stop and looked tags up
 * one by one 36.5 ms; these 29 ms. Single-quoted values as the window's
 * quote where it has no double one (1 value in 100 or fewer on the bench
 * corpus and /usr/share/doc) cost 10% of that for all. Half of the 36.5 was the tag loop (its
 * exit mispredicted, ~20 cycles a tag); a gather of the kind keys measured
 * faster than eight registers of them read with permutes (31 ms); windows
 * whose start waited for the last one's end were latency-bound.
 */
#ifdef HAVE_AVX512_GEAR
#define AVX512_TARGET                                                          \
	"avx512f,avx512bw,avx512dq,avx512vbmi,avx512vbmi2,bmi,bmi2,popcnt,"    \
	"lzcnt,pclmul"
#define WINDOW 64

static inline __attribute__((always_inline, target(AVX512_TARGET))) uint64_t
eq_mask(__m512i v, char c)
{
	return _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(c));
}

/* Bytes b with (unsigned)(b - lo) < n. */
static inline __attribute__((always_inline, target(AVX512_TARGET))) uint64_t
range_mask(__m512i v, char lo, char n)
{
	return _mm512_cmplt_epu8_mask(_mm512_sub_epi8(v, _mm512_set1_epi8(lo)),
				      _mm512_set1_epi8(n));
}

static inline __attribute__((always_inline, target(AVX512_TARGET))) uint64_t
alpha_mask(__m512i v)
{
	return range_mask(_mm512_or_si512(v, _mm512_set1_epi8(0x20)), 'a', 26);
}

/* Bit i set where an odd number of bits 0..i of @p x are set. */
static inline __attribute__((always_inline, target(AVX512_TARGET))) uint64_t
prefix_xor(uint64_t x)
{
	__m128i all = _mm_set1_epi8((char)0xff);

	return (uint64_t)_mm_cvtsi128_si64(
		_mm_clmulepi64_si128(_mm_cvtsi64_si128((long long)x), all, 0));
}

/* The bits below bit @p n (0 to 64). */
static inline uint64_t bits_below(unsigned n)
{
	return n >= 64 ? ~UINT64_C(0) : (UINT64_C(1) << n) - 1;
}

/*
 * A tag that a window leaves open: the next window's first bytes are its.
 * Its text (one space, or nothing if inline) is already out; if a later
 * window finds the tag is not one the masks settle, the output goes back to
 * where it was before the tag and markup() reads the tag.
 */
struct open_tag {
	bool open;
	size_t at;	 /* its '<' */
	char *out;	 /* h->o before its text */
	uint64_t odd;	 /* all ones inside a double-quoted value */
	uint64_t equals; /* 1 if the window's last byte was '=' */
};

/* The end of the tag name that starts at bit @p n0 of the window at s[i]
 * (@p name: the window's name bytes), which may run past the window. */
static inline __attribute__((always_inline, target(AVX512_TARGET))) size_t
name_end(const struct html *h, size_t i, unsigned n0, uint64_t name)
{
	size_t n1;

	if (n0 < WINDOW) {
		uint64_t rest = ~name >> n0;

		if (rest)
			return i + n0 + (size_t)__builtin_ctzll(rest);
	}
	n1 = i + n0 > i + WINDOW ? i + n0 : i + WINDOW;
	while (n1 < h->len && name_byte[(unsigned char)h->s[n1]])
		n1++;
	return n1;
}

/*
 * The kinds of the first eight tags that start in the window @p v at s[i]
 * (@p starts; @p closing: bytes after a '/'), all at once: each name's
 * first 8 bytes gathered into a lane of its own, cut after the name,
 * lower-cased, hashed and looked up in kind_key[] / kind_val[] as
 * tag_kind(name_key()) does, one lane a tag. A loop over the tags cost
 * about 20 cycles a tag, half of the gear's time. The tags' bits go into
 * *spaces (not inline) and *raw (script, style or title, opening); a
 * window with no tag (text, or inside a long one) skips the lookup. @return the
 * starts left for the scalar loop: past the eighth, or all of them if a
 * name starts past the window or the 64 bytes after it are not there.
 */
static inline __attribute__((always_inline, target(AVX512_TARGET))) uint64_t
tag_kinds_avx512(const struct html *h, size_t i, __m512i v, uint64_t starts,
		 uint64_t closing, uint64_t *spaces, uint64_t *raw)
{
	const __m512i lane_of_byte = _mm512_set_epi64(
		0x0707070707070707, 0x0606060606060606, 0x0505050505050505,
		0x0404040404040404, 0x0303030303030303, 0x0202020202020202,
		0x0101010101010101, 0x0000000000000000);
	const __m512i byte_in_lane = _mm512_set1_epi64(0x0706050403020100);
	uint64_t first8 = starts, shut = starts & closing, name_starts;
	unsigned count = (unsigned)__builtin_popcountll(starts);
	__m512i at, names, kept, key, slot, known, vals;
	__mmask8 lanes, matched, not_inline, opening;

	if (!starts || h->len - i < 2 * WINDOW || (shut >> 62) ||
	    (starts >> 63))
		return starts;
	for (unsigned k = 8; k < count; k++)
		first8 &= ~(UINT64_C(1) << (63 - __builtin_clzll(first8)));
	name_starts = (first8 & ~closing) << 1 | (first8 & closing) << 2;
	/* Each name's first byte's index, broadcast over its lane, plus
	 * 0..7: where its 8 bytes are in the window and the next 64. */
	at = _mm512_maskz_compress_epi8(
		name_starts,
		_mm512_set_epi64(0x3f3e3d3c3b3a3938, 0x3736353433323130,
				 0x2f2e2d2c2b2a2928, 0x2726252423222120,
				 0x1f1e1d1c1b1a1918, 0x1716151413121110,
				 0x0f0e0d0c0b0a0908, 0x0706050403020100));
	at = _mm512_add_epi8(_mm512_permutexvar_epi8(lane_of_byte, at),
			     byte_in_lane);
	names = _mm512_permutex2var_epi8(v, at,
					 _mm512_loadu_si512(h->s + i + WINDOW));
	/* Name bytes up to the first other one, lane by lane: with 0xff for
	 * a name byte, x & ~(x + 1) keeps the run at the lane's low end. */
	kept = _mm512_movm_epi8(alpha_mask(names) | range_mask(names, '0', 10) |
				eq_mask(names, '-') | eq_mask(names, ':'));
	kept = _mm512_andnot_si512(_mm512_add_epi64(kept, _mm512_set1_epi64(1)),
				   kept);
	key = _mm512_and_si512(_mm512_or_si512(names, _mm512_set1_epi8(0x20)),
			       kept);
	slot = _mm512_srli_epi64(
		_mm512_mullo_epi64(key, _mm512_set1_epi64((long long)UINT64_C(
						0xce88ee9624189e43))),
		58);
	lanes = (__mmask8)((1u << (count < 8 ? count : 8)) - 1);
	known = _mm512_mask_i64gather_epi64(_mm512_setzero_si512(), lanes, slot,
					    kind_key, 8);
	matched = _mm512_mask_cmpeq_epi64_mask(lanes, known, key);
	vals = _mm512_and_si512(
		_mm512_permutexvar_epi8(slot, _mm512_loadu_si512(kind_val)),
		_mm512_set1_epi64(0xff));
	vals = _mm512_maskz_mov_epi64(matched, vals);
	not_inline = _mm512_mask_cmpneq_epi64_mask(
		lanes, vals, _mm512_set1_epi64(TAG_INLINE));
	opening = _mm512_mask_cmpge_epi64_mask(lanes, vals,
					       _mm512_set1_epi64(TAG_SCRIPT));
	opening &= (__mmask8)~_pext_u64(closing, first8);
	*spaces |= _pdep_u64(not_inline, first8);
	*raw |= _pdep_u64(opening, first8);
	return starts & ~first8;
}

/*
 * The window at s[i]: put its text, carry a tag left open in @p ot to the
 * next. Windows follow one another 64 bytes apart whatever they hold, so
 * the next one's loads wait for nothing; only the carries (one bit each)
 * and the output position pass from one to the next. @return how many
 * bytes were done: 64, or fewer where the masks stop settling the text; at
 * that byte, the scalar code takes over (the caller), ot->open is false and
 * h->o is where the scalar code must write. A return below 0 means: go
 * back to the open tag (ot->at), its output dropped.
 */
static inline __attribute__((always_inline, target(AVX512_TARGET))) long
window_avx512(struct html *h, size_t i, struct open_tag *ot)
{
	const char *p = h->s + i;
	__m512i v = _mm512_loadu_si512(p);
	uint64_t gt = eq_mask(v, '>'), lt = eq_mask(v, '<');
	uint64_t alpha = alpha_mask(v), slash = eq_mask(v, '/');
	/* The same of the byte after each, and of the one after that: these
	 * masks moved down, the two bytes past the window read one by one
	 * (compares are what the window waits for, not shifts). */
	uint64_t alpha1 = alpha >> 1 | (uint64_t)im_ascii_alpha(p[WINDOW])
					       << 63;
	uint64_t alpha2 = alpha1 >> 1 | (uint64_t)im_ascii_alpha(p[WINDOW + 1])
						<< 63;
	uint64_t closing = slash >> 1 | (uint64_t)(p[WINDOW] == '/') << 63;
	uint64_t starts = lt & (alpha1 | (closing & alpha2));
	uint64_t bang = eq_mask(v, '!') | eq_mask(v, '?');
	uint64_t special =
		lt & (bang >> 1 |
		      (uint64_t)(p[WINDOW] == '!' || p[WINDOW] == '?') << 63);
	uint64_t name = alpha | range_mask(v, '0', 10) | eq_mask(v, '-') |
			eq_mask(v, ':');
	uint64_t equals = eq_mask(v, '=');
	uint64_t open_bits = ~gt, sum, tags, quotes, odd, fail, text_stops,
		 keep;
	uint64_t spaces = 0, raw = 0;
	unsigned long long sum_ll;
	unsigned char carry;
	unsigned stop = WINDOW;

	/* Each start, and a tag carried in at bit 0, runs into its '>'. */
	carry = _addcarry_u64((unsigned char)ot->open, open_bits, starts,
			      &sum_ll);
	sum = sum_ll;
	tags = sum ^ open_bits;
	quotes = eq_mask(v, '"') & tags;
	odd = prefix_xor(quotes) ^ ot->odd;
	/* A start inside a tag, and whatever breaks the quote rules. */
	fail = (starts & ~tags) | (odd & gt & tags) |
	       (quotes & odd & ~(equals << 1 | ot->equals)) |
	       (eq_mask(v, '\'') & tags & ~odd);
	if (fail) {
		unsigned f = (unsigned)__builtin_ctzll(fail);
		uint64_t owners = starts & bits_below(f);

		/* The tag holding the failure: one begun here, or the one
		 * carried in, which goes back to markup() whole. */
		if (!owners)
			return -1;
		stop = 63 - (unsigned)__builtin_clzll(owners);
	}
	text_stops = (eq_mask(v, '&') | special) & ~tags;
	if (text_stops & bits_below(stop))
		stop = (unsigned)__builtin_ctzll(text_stops);
	for (uint64_t t = tag_kinds_avx512(h, i, v, starts & bits_below(stop),
					   closing, &spaces, &raw);
	     t; t &= t - 1) {
		unsigned at = (unsigned)__builtin_ctzll(t);
		unsigned shut = (unsigned)(closing >> at & 1);
		size_t n0 = i + at + 1 + shut;
		enum tag_kind kind = tag_kind(name_key(
			h->s, h->len, n0, name_end(h, i, at + 1 + shut, name)));

		spaces |= (uint64_t)(kind != TAG_INLINE) << at;
		raw |= (uint64_t)(kind >= TAG_SCRIPT && !shut) << at;
	}
	if (raw)
		stop = (unsigned)__builtin_ctzll(raw);
	keep = (~tags | spaces) & bits_below(stop);
	v = _mm512_mask_blend_epi8(spaces, v, _mm512_set1_epi8(' '));
	_mm512_storeu_si512(h->o, _mm512_maskz_compress_epi8(keep, v));
	/* A stop is at a tag that begins in this window, or in text: the one
	 * carried in, if any, ended before it. */
	ot->open = stop == WINDOW && carry;
	ot->odd = ot->open && odd >> 63 ? ~UINT64_C(0) : 0;
	ot->equals = ot->open ? equals >> 63 : 0;
	/* The tag left open: the last start's, or still the one carried in
	 * (then the whole window is its). */
	if (ot->open && starts) {
		unsigned last = 63 - (unsigned)__builtin_clzll(starts);

		ot->at = i + last;
		ot->out = h->o + __builtin_popcountll(keep & bits_below(last));
	}
	h->o += __builtin_popcountll(keep);
	return stop;
}

/*
 * The text of s[0, i) for the i @return'ed: less than a window (and two
 * bytes) from the end, or past a quote markup() found unpaired, after which
 * quotes are bytes to it and no longer what the masks assume. The scalar
 * loop does the rest.
 */
static __attribute__((target(AVX512_TARGET))) size_t
html_text_avx512(struct html *h)
{
	struct open_tag ot = {0};
	const char *s = h->s;
	size_t i = 0;

	while (h->len - i >= WINDOW + 2 && !h->no_dquote && !h->no_squote &&
	       !h->lists) {
		long done = window_avx512(h, i, &ot);

		if (done == WINDOW) {
			i += WINDOW;
			continue;
		}
		if (done < 0) {
			h->o = ot.out;
			i = ot.at;
			ot = (struct open_tag){0};
		} else {
			i += (size_t)done;
		}
		i = s[i] == '&' ? entity(h, i) : markup(h, i);
	}
	if (ot.open) {
		h->o = ot.out;
		i = ot.at;
	}
	return i;
}

#endif

size_t im_html_charset(const char *s, size_t len, const char **name)
{
	size_t n = len < 1024 ? len : 1024;

	for (size_t i = 0; i + 8 < n; i++) {
		size_t k = i + 8, e;

		if ((s[i] | 0x20) != 'c' || strncasecmp(s + i, "charset=", 8))
			continue;
		if (s[k] == '"' || s[k] == '\'')
			k++;
		for (e = k;
		     e < n && (is_alnum(s[e]) || s[e] == '-' || s[e] == '_' ||
			       s[e] == '.' || s[e] == ':');
		     e++)
			;
		if (e > k) {
			*name = s + k;
			return e - k;
		}
	}
	return 0;
}

/*
 * The text of s[0, i) is never longer than i bytes, which is why markup()
 * and entity() write without checking for room: a text run is copied as it
 * is; a tag (3 bytes or more), "<!" or "<?" makes at most one space, a
 * comment nothing, CDATA its contents; an entity at most as many bytes as
 * it has. A named one has 3 bytes or more ("&lt") and decodes to a code
 * point below U+10000, at most 3 bytes of UTF-8. A numeric one has 3 bytes
 * or more ("&#0") and decodes to at most 3 bytes (U+FFFD for an invalid
 * value, windows-1252 for 128-159), or to 4 for a value of U+10000 or more,
 * which takes 8 bytes or more ("&#65536", "&#x10000"). A list item's
 * number is written only where it fits so (list_tag()). The scan asserts
 * it.
 */
static int html_text(const char *s, size_t len, struct im_buf *out,
		     enum im_html_gear gear)
{
	struct html h = {.s = s, .len = len};
	size_t i = 0;
	char *o0;

	pthread_once(&keys_once, keys_init); /* for tag_kind() */
	/* len would do; the + 1 makes out->p a buffer even when len is 0. */
	if (im_buf_reserve(out, len + 1))
		return -ENOMEM;
	o0 = h.o = h.o0 = out->p + out->len;
	h.office = office_export(s, len);
#ifdef HAVE_AVX512_GEAR
	/* The windows do not read attributes: an office export, rare among
	 * pages and short, is the scalar loop's. */
	if (gear == IM_HTML_AVX512 && !h.office)
		i = html_text_avx512(&h);
#endif
	(void)gear;
	while (i < len) {
		/* Tags often follow one another: no search for an empty run. */
		size_t j = s[i] == '<' ? i : find3(s, i, len, '<', '&', '&');

		assert((size_t)(h.o - o0) <= i);
		/* Room for len - i + 1 more bytes: most runs between two
		 * pieces of markup are short (or empty), so one fixed-size
		 * copy instead of a call. */
		if (j - i <= 32 && len - i >= 32)
			memcpy(h.o, s + i, 32);
		else
			memcpy(h.o, s + i, j - i);
		h.o += j - i;
		if (j == len)
			break;
		if (s[j] == '<')
			i = markup(&h, j);
		else
			i = entity(&h, j);
	}
	assert((size_t)(h.o - o0) <= len);
	out->len += (size_t)(h.o - o0);
	return 0;
}

bool im_html_has_gear(enum im_html_gear gear)
{
#ifdef HAVE_AVX512_GEAR
	if (gear == IM_HTML_AVX512)
		return IM_CPU_HAS(AVX512F, "avx512f") &&
		       IM_CPU_HAS(AVX512BW, "avx512bw") &&
		       IM_CPU_HAS(AVX512DQ, "avx512dq") &&
		       IM_CPU_HAS(AVX512_VBMI, "avx512vbmi") &&
		       IM_CPU_HAS(AVX512_VBMI2, "avx512vbmi2") &&
		       IM_CPU_HAS(BMI1, "bmi") && IM_CPU_HAS(BMI2, "bmi2") &&
		       IM_CPU_HAS(POPCNT, "popcnt") &&
		       IM_CPU_HAS(PCLMULQDQ, "pclmul");
#endif
	return gear == IM_HTML_SCALAR;
}

int im_html_text(const char *s, size_t len, struct im_buf *out)
{
	return html_text(s, len, out,
			 im_html_has_gear(IM_HTML_AVX512) ? IM_HTML_AVX512
							  : IM_HTML_SCALAR);
}

int im_html_text_gear(const char *s, size_t len, struct im_buf *out,
		      enum im_html_gear gear)
{
	if (!im_html_has_gear(gear))
		return -ENOTSUP;
	return html_text(s, len, out, gear);
}
