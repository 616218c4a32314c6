/**
 * @file escape.c
 * Paths in the text formats (escape.h).
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "escape.h"

/* Byte @p c as written, into @p e. @return its length (1 to 4). */
static size_t escape_byte(unsigned char c, char e[5])
{
	switch (c) {
	case '\t': memcpy(e, "\\t", 2); return 2;
	case '\n': memcpy(e, "\\n", 2); return 2;
	case '\\': memcpy(e, "\\\\", 2); return 2;
	}
	if (c < 0x20 || c == 0x7f)
		return (size_t)snprintf(e, 5, "\\x%02x", c);
	e[0] = (char)c;
	return 1;
}

size_t im_text_escape(const char *s, char *out, size_t cap)
{
	size_t len = 0, put = 0;
	bool full = false; /* stop at the first escape that does not fit */

	for (; *s; s++) {
		char e[5];
		size_t n = escape_byte((unsigned char)*s, e);

		full = full || len + n >= cap;
		if (!full) {
			memcpy(out + len, e, n);
			put = len + n;
		}
		len += n;
	}
	if (cap)
		out[put] = '\0';
	return len;
}
