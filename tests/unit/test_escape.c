/**
 * @file test_escape.c
 * Paths in the text formats (core/escape.h): TAB, newline and backslash
 * escaped, the other control bytes as \xHH, every other byte as it is; the
 * escape reverses exactly, measures like snprintf, never cuts an escape in
 * two, and escapes piece by piece.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "escape.h"

#define SEED 20261125u

/* The reader's side (tests/cli/test_cli.py unescape()): undo the escapes. */
static char *unescape(const char *s)
{
	char *out = malloc(strlen(s) + 1), *o = out;

	ck_assert_ptr_nonnull(out);
	for (; *s; s++) {
		if (*s != '\\') {
			ck_assert_msg((unsigned char)*s >= 0x20 && *s != 0x7f,
				      "control byte %#x not escaped",
				      (unsigned char)*s);
			*o++ = *s;
			continue;
		}
		s++;
		if (*s == 'x') {
			unsigned v;
			ck_assert_msg(sscanf(s + 1, "%2x", &v) == 1 &&
					      (v < 0x20 || v == 0x7f) &&
					      v != '\t' && v != '\n',
				      "bad \\x escape at \"%s\"", s);
			*o++ = (char)v;
			s += 2;
			continue;
		}
		ck_assert_msg(*s == 't' || *s == 'n' || *s == '\\',
			      "'\\' followed by %#x", (unsigned char)*s);
		*o++ = *s == 't' ? '\t' : *s == 'n' ? '\n' : '\\';
	}
	*o = '\0';
	return out;
}

/* A random string of @p n bytes (no NUL), escapable ones frequent. */
static void random_string(unsigned *seed, char *s, size_t n)
{
	static const char some[] = "\t\n\\a/%\xc3\xa9\xff\x1b\x7f\r";

	for (size_t i = 0; i < n; i++) {
		unsigned r = (unsigned)rand_r(seed);
		s[i] = r % 3 ? some[r / 3 % (sizeof(some) - 1)]
			     : (char)(1 + r / 3 % 255);
	}
	s[n] = '\0';
}

START_TEST(test_escape_writes_the_three_escapes)
{
	char out[64];

	ck_assert_uint_eq(im_text_escape("new\nline.txt", out, sizeof(out)),
			  13);
	ck_assert_str_eq(out, "new\\nline.txt");
	ck_assert_uint_eq(im_text_escape("a\tb\\c", out, sizeof(out)), 7);
	ck_assert_str_eq(out, "a\\tb\\\\c");
	/* The other control bytes as \xHH, lowercase. */
	ck_assert_uint_eq(
		im_text_escape("\x1b[31m\r\x7f\x01", out, sizeof(out)), 20);
	ck_assert_str_eq(out, "\\x1b[31m\\x0d\\x7f\\x01");
	/* Everything else stands as it is, valid UTF-8 or not. */
	ck_assert_uint_eq(im_text_escape("%2F \xc3\xa9\xff~", out, sizeof(out)),
			  8);
	ck_assert_str_eq(out, "%2F \xc3\xa9\xff~");
	ck_assert_uint_eq(im_text_escape("", out, sizeof(out)), 0);
	ck_assert_str_eq(out, "");
}
END_TEST

START_TEST(test_escape_measures_and_never_cuts_an_escape)
{
	const char *s = "a\\\tb\x1b\n";
	const char *full = "a\\\\\\tb\\x1b\\n";
	char out[24];

	ck_assert_uint_eq(im_text_escape(s, NULL, 0), strlen(full));
	for (size_t cap = 1; cap <= strlen(full) + 1; cap++) {
		memset(out, 'x', sizeof(out));
		ck_assert_uint_eq(im_text_escape(s, out, cap), strlen(full));
		size_t got = strlen(out);
		ck_assert_msg(got < cap, "cap %zu: %zu bytes written", cap,
			      got);
		ck_assert_msg(!strncmp(out, full, got),
			      "cap %zu: \"%s\" is no prefix of the escape", cap,
			      out);
		/* Cut only between escapes (a boundary of full). */
		size_t b = 0;
		while (b < got)
			b += full[b] != '\\' ? 1 : full[b + 1] == 'x' ? 4 : 2;
		ck_assert_msg(b == got, "cap %zu: an escape cut in two: \"%s\"",
			      cap, out);
		ck_assert_msg(got + 4 >= cap, "cap %zu: stopped early at %zu",
			      cap, got);
	}
	ck_assert_str_eq(out, full);
}
END_TEST

START_TEST(test_escape_reverses_and_goes_piece_by_piece)
{
	unsigned seed = SEED;
	char s[201], whole[801], piece[801], joined[801];

	for (int round = 0; round < 2000; round++) {
		size_t n = (size_t)rand_r(&seed) % 200, len, at = 0, jl = 0;

		random_string(&seed, s, n);
		len = im_text_escape(s, whole, sizeof(whole));
		ck_assert_uint_eq(len, strlen(whole));
		ck_assert_uint_le(len, 4 * n);
		ck_assert_ptr_null(memchr(whole, '\t', len));
		ck_assert_ptr_null(memchr(whole, '\n', len));
		char *back = unescape(whole);
		ck_assert_msg(!strcmp(back, s), "round %d: no round trip",
			      round);
		free(back);
		while (at < n) {
			char cut[201];
			size_t k = 1 + (size_t)rand_r(&seed) % (n - at);

			memcpy(cut, s + at, k);
			cut[k] = '\0';
			size_t pl = im_text_escape(cut, piece, sizeof(piece));
			memcpy(joined + jl, piece, pl);
			jl += pl;
			at += k;
		}
		joined[jl] = '\0';
		ck_assert_msg(!strcmp(joined, whole),
			      "round %d: the pieces' escapes differ", round);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("escape");
	TCase *tc = tcase_create("text");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_escape_writes_the_three_escapes);
	tcase_add_test(tc, test_escape_measures_and_never_cuts_an_escape);
	tcase_add_test(tc, test_escape_reverses_and_goes_piece_by_piece);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
