/*
 * Unit tests of core/extract/extract.h: content sniffing and each extractor.
 * Inputs are copied into heap buffers of their exact length so that ASan and
 * valgrind catch a read past the end.
 */
#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "extract.h"
#include "extract_internal.h"

#ifndef IM_TEST_DATA
#define IM_TEST_DATA "tests/data"
#endif

static struct im_extractor *xtor;
static char *copy;
static struct im_extract_result res;
/* The last result's text, NUL-terminated, for assertions. */
static char text[1 << 16];

static void setup(void)
{
	ck_assert_int_eq(im_extractor_new(NULL, &xtor), 0);
}

static void teardown(void)
{
	im_extractor_free(xtor);
	free(copy);
	copy = NULL;
}

static void keep_text(void)
{
	size_t n = res.len < sizeof(text) - 1 ? res.len : sizeof(text) - 1;

	if (n)
		memcpy(text, res.text, n);
	text[n] = '\0';
}

/* Extract s[0, n) from an exact-size heap copy into res and text. */
static void extract_n(const char *s, size_t n)
{
	free(copy);
	copy = malloc(n ? n : 1);
	ck_assert_ptr_nonnull(copy);
	memcpy(copy, s, n);
	ck_assert_int_eq(im_extract(xtor, NULL, copy, n, &res), 0);
	keep_text();
}

#define assert_text_has(w)                                                     \
	ck_assert_msg(strstr(text, (w)) != NULL,                               \
		      "\"%s\" missing from the text (%s): \"%.300s\"", (w),    \
		      im_format_name(res.format), text)

/* ---- Plain text ---------------------------------------------------------- */

START_TEST(test_extract_utf8_is_not_copied)
{
	extract_n("plain words here", 16);
	ck_assert_int_eq(res.format, IM_FMT_TEXT);
	ck_assert_int_eq(res.fail, IM_XF_NONE);
	ck_assert_msg(res.text == copy,
		      "valid UTF-8 text is handed on in place, not copied");
	ck_assert_uint_eq(res.len, 16);
}
END_TEST

START_TEST(test_extract_utf16_with_bom)
{
	/* "Grüße €" in UTF-16LE and UTF-16BE, with a surrogate pair (U+1F600). */
	static const char le[] = "\xff\xfe"
				 "G\0r\0\xfc\0\xdf\0"
				 "e\0 \0\xac\x20 \0=\xd8\x00\xde";
	static const char be[] = "\xfe\xff"
				 "\0G\0r\0\xfc\0\xdf"
				 "\0e\0 \x20\xac\0 \xd8=\xde\x00";

	extract_n(le, sizeof(le) - 1);
	ck_assert_int_eq(res.format, IM_FMT_TEXT);
	ck_assert_str_eq(text, "Grüße € \xf0\x9f\x98\x80");
	extract_n(be, sizeof(be) - 1);
	ck_assert_str_eq(text, "Grüße € \xf0\x9f\x98\x80");
	/* An odd last byte and an unpaired surrogate are dropped. */
	extract_n("\xff\xfe"
		  "a\0\x00\xd8"
		  "b\0c",
		  9);
	ck_assert_str_eq(text, "ab");
}
END_TEST

START_TEST(test_extract_invalid_utf8_is_cp1252)
{
	static const char w1252[] = "na\xefve caf\xe9 \x93quoted\x94 \x80";

	extract_n(w1252, sizeof(w1252) - 1);
	ck_assert_int_eq(res.format, IM_FMT_TEXT);
	ck_assert_str_eq(text, "naïve café “quoted” €");
	/* Valid UTF-8 stays as it is, whatever its script. */
	extract_n("naïve", 6);
	ck_assert_str_eq(text, "naïve");
	ck_assert(im_utf8_valid("ascii only, long enough to use words", 36));
	ck_assert(!im_utf8_valid("ascii only, then \xc3", 19));
	ck_assert(!im_utf8_valid("\xed\xa0\x80 surrogate", 13));
}
END_TEST

START_TEST(test_extract_html_without_charset_is_cp1252_when_invalid)
{
	static const char page[] = "<html><body><p>caf\xe9 cr\xe8me</p></body>"
				   "</html>";

	extract_n(page, sizeof(page) - 1);
	ck_assert_int_eq(res.format, IM_FMT_HTML);
	assert_text_has("café crème");
}
END_TEST

/* ---- Sniffing ------------------------------------------------------------ */

START_TEST(test_extract_names_and_binary)
{
	extract_n("text\0more", 9);
	ck_assert_int_eq(res.format, IM_FMT_BINARY);
	ck_assert_uint_eq(res.len, 0);
	ck_assert_str_eq(im_format_name(IM_FMT_PDF), "pdf");
	ck_assert_str_eq(im_format_name(IM_FMT_COUNT), "unknown");
	ck_assert_str_eq(im_extract_fail_name(IM_XF_EXPANSION), "expansion");
	for (int f = 0; f < IM_FMT_COUNT; f++)
		ck_assert_msg(strcmp(im_format_name((enum im_format)f),
				     "unknown") != 0,
			      "format %d has a name", f);
	for (int f = 0; f < IM_XF_COUNT; f++)
		ck_assert_msg(
			strcmp(im_extract_fail_name((enum im_extract_fail)f),
			       "unknown") != 0,
			"failure %d has a name", f);
}
END_TEST

static Suite *extract_suite(void)
{
	Suite *s = suite_create("extract");
	TCase *tc = tcase_create("text");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_extract_utf8_is_not_copied);
	tcase_add_test(tc, test_extract_utf16_with_bom);
	tcase_add_test(tc, test_extract_invalid_utf8_is_cp1252);
	tcase_add_test(
		tc, test_extract_html_without_charset_is_cp1252_when_invalid);
	tcase_add_test(tc, test_extract_names_and_binary);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(extract_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
