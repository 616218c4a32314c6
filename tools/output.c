/**
 * @file output.c
 * Escaping of paths for the text and JSON outputs of `imatch`, and the
 * lexicon loader shared by the subcommands.
 */
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "escape.h"
#include "imatch.h"

void put_text_path(FILE *f, const char *s)
{
	char in[256], out[4 * sizeof(in)];
	size_t n;

	/* Piece by piece (escape.h): no allocation for a long path. */
	for (; (n = strnlen(s, sizeof(in) - 1)); s += n) {
		memcpy(in, s, n);
		in[n] = '\0';
		fwrite(out, 1, im_text_escape(in, out, sizeof(out)), f);
	}
}

/* Length of the valid UTF-8 sequence at @p s (RFC 3629: no overlongs, no
 * surrogates, nothing above U+10FFFF), or 0 if it is not one. */
static size_t utf8_valid_len(const unsigned char *s)
{
	unsigned char c = s[0];
	size_t n;
	unsigned char lo = 0x80, hi = 0xbf;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return 0;
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return n;
}

/* Bytes that a JSON string holds as they are: printable ASCII but the
 * quote and the backslash. */
static bool json_plain(unsigned char c)
{
	return c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
}

void put_json_string(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;

	fputc('"', f);
	while (*s) {
		size_t n = 0;

		/* Paths are mostly plain: write them a run at a time, not a
		 * call per byte (the dupes export prints 10 million). */
		while (json_plain(s[n]))
			n++;
		if (n) {
			fwrite(s, 1, n, f);
			s += n;
			continue;
		}
		n = utf8_valid_len(s);
		if (n == 0) {
			fprintf(f, "\\udc%02x", *s);
			s++;
			continue;
		}
		if (n > 1) {
			fwrite(s, 1, n, f);
			s += n;
			continue;
		}
		switch (*s) {
		case '"': fputs("\\\"", f); break;
		case '\\': fputs("\\\\", f); break;
		case '\n': fputs("\\n", f); break;
		case '\t': fputs("\\t", f); break;
		case '\r': fputs("\\r", f); break;
		default: fprintf(f, "\\u%04x", *s);
		}
		s++;
	}
	fputc('"', f);
}

void put_csv(FILE *f, const char *s)
{
	if (!strpbrk(s, ",\"\r\n")) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

int cmp_strp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int load_lexicon(const struct cli *c, struct im_lexicon **out)
{
	char why[256] = "";
	int ret = im_lexicon_load(c->lexicon, out, why, sizeof(why));

	if (ret) {
		err_msg("%s: cannot load lexicon: %s", c->lexicon,
			why[0] ? why : strerror(-ret));
		return -1;
	}
	return 0;
}
