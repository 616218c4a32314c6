/**
 * @file member.c
 * <member> names: encoding, decoding and shortening (member.h).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "member.h"

#define SHORT_MARK "%~"
/* "%~" + 16 hex digits + '~' */
#define SHORT_HEAD 19

static size_t encoded_len(const char *path)
{
	size_t n = 0;

	for (const char *p = path; *p; p++)
		n += *p == '%' || *p == '/' ? 3 : 1;
	return n;
}

static void encode(const char *path, char *o)
{
	for (const char *p = path; *p; p++) {
		if (*p == '%' || *p == '/') {
			memcpy(o, *p == '%' ? "%25" : "%2F", 3);
			o += 3;
		} else {
			*o++ = *p;
		}
	}
	*o = 0;
}

/* Where a tail of @p s may start at or after @p at: not inside an escape or
 * a UTF-8 sequence. */
static size_t tail_start(const char *s, size_t len, size_t at)
{
	while (at < len) {
		unsigned char c = (unsigned char)s[at];
		bool in_escape = (at >= 1 && s[at - 1] == '%') ||
				 (at >= 2 && s[at - 2] == '%');
		if (!in_escape && (c & 0xc0) != 0x80)
			break;
		at++;
	}
	return at;
}

char *member_name(const char *path)
{
	size_t len = encoded_len(path);
	char *s = malloc(len + 1);

	if (!s)
		return NULL;
	encode(path, s);
	if (len <= MEMBER_NAME_MAX)
		return s;
	char *t = malloc(MEMBER_NAME_MAX + 1);
	if (!t) {
		free(s);
		return NULL;
	}
	size_t from = tail_start(s, len, len - (MEMBER_NAME_MAX - SHORT_HEAD));
	snprintf(t, SHORT_HEAD + 1, "%%~%016llx~",
		 (unsigned long long)XXH3_64bits(path, strlen(path)));
	memcpy(t + SHORT_HEAD, s + from, len - from + 1);
	free(s);
	return t;
}

bool member_is_short(const char *name)
{
	return !strncmp(name, SHORT_MARK, 2);
}

char *member_decode(const char *name)
{
	char *s = malloc(strlen(name) + 1), *o = s;

	if (!s)
		return NULL;
	for (const char *p = name; *p; p++) {
		if (*p != '%') {
			*o++ = *p;
		} else if (!strncmp(p, "%25", 3)) {
			*o++ = '%';
			p += 2;
		} else if (!strncmp(p, "%2F", 3)) {
			*o++ = '/';
			p += 2;
		} else {
			free(s);
			return NULL;
		}
	}
	*o = 0;
	/* Only canonical names: no empty component, no leading or double '/'. */
	if (!*s || s[0] == '/' || strstr(s, "//") || s[strlen(s) - 1] == '/') {
		free(s);
		return NULL;
	}
	return s;
}
