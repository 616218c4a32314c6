/*
 * Unit tests of core/extract/extract.h: content sniffing and each extractor.
 * Inputs are copied into heap buffers of their exact length so that ASan and
 * valgrind catch a read past the end.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#else
#define RUNNING_ON_VALGRIND 0
#endif

#include "unit.h"
#include "extract.h"
#include "extract_internal.h"
#include "text.h"

#ifndef IM_TEST_DATA
#define IM_TEST_DATA "tests/data"
#endif

static struct im_extractor *xtor;
/* What test_extract_helper_start_failure_says_why() makes extractors with. */
static struct im_extract_opts opts_for_start;
static char *copy;
static struct im_extract_result res;
/* The last result's text, NUL-terminated, for assertions. */
static char text[1 << 16];

static void setup(void)
{
	struct im_extract_opts o;

	/* Under valgrind on a loaded machine a bomb costs more than the
	 * default 10 CPU-seconds and 30 s to refuse, and a helper past its
	 * budget is retired before the next file (rightly); the budgets here
	 * are wide enough that results and helper counts show only what the
	 * file itself did. The tests of the limits set their own. */
	im_extract_opts_init(&o);
	o.cpu_seconds = 120;
	o.deadline_ms = 240000;
	ck_assert_int_eq(im_extractor_new(&o, &xtor), 0);
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
	/* HTML saved as UTF-16 (Word's "Unicode" HTML) is HTML once decoded:
	 * its tags are no text, its entities are decoded. */
	{
		static const char html[] = "<html><body>caf&eacute;</body>";
		char u[2 + 2 * sizeof(html)] = "\xff\xfe";

		for (size_t i = 0; i + 1 < sizeof(html); i++)
			u[2 + 2 * i] = html[i];
		extract_n(u, 2 + 2 * (sizeof(html) - 1));
		ck_assert_int_eq(res.format, IM_FMT_HTML);
		ck_assert_str_eq(text, "  caf\xc3\xa9 ");
	}
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
	/* An empty result's text is NULL (extract.h). */
	ck_assert(im_utf8_valid(NULL, 0));
}
END_TEST

/* Appends each figure to the string at @p arg, followed by a space. */
static int list_figure(const char *s, size_t n, void *arg)
{
	char *out = arg;
	size_t at = strlen(out);

	if (at + n + 2 < 4096) {
		memcpy(out + at, s, n);
		out[at + n] = ' ';
		out[at + n + 1] = '\0';
	}
	return 0;
}

/*
 * With defer_utf8 a plain text is not checked before its words are read,
 * but its terms, numbers fingerprint and figures are those of the checked
 * text: windows-1252 where it is not UTF-8 (also when the invalid byte
 * comes late, past the SIMD windows), UTF-8 where it is, UTF-16 decoded.
 */
START_TEST(test_extract_deferred_utf8_reads_as_checked)
{
	static const char *const texts[] = {
		"na\xefve caf\xe9 \x93quoted\x94 \x80 2024 r\xe9sum\xe9 10\xb2",
		"na\xc3\xafve caf\xc3\xa9 r\xc3\xa9sum\xc3\xa9 2024 words",
		"a long plain ascii text with enough words to fill windows of "
		"sixty four bytes before the one byte that is not utf8: "
		"stra\xdf"
		"e 42",
		"truncated at the end \xc3",
		/* UTF-16LE "Grüße" */
		"\xff\xfeG\0r\0\xfc\0\xdf\0e\0",
	};
	static const size_t lens[] = {0, 0, 0, 0, 12};
	struct im_extract_opts o;
	struct im_extractor *deferred;
	struct im_params p;
	struct im_terms want, got;

	im_params_init(&p);
	im_terms_init(&want);
	im_terms_init(&got);
	im_extract_opts_init(&o);
	o.defer_utf8 = true;
	ck_assert_int_eq(im_extractor_new(&o, &deferred), 0);
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		size_t n = lens[i] ? lens[i] : strlen(texts[i]);
		static char fig_want[4096], fig_got[4096];
		struct im_extract_result r;

		extract_n(texts[i], n);
		ck_assert(!res.unchecked);
		ck_assert_int_eq(im_extract_terms(&res, &p, &want), 0);
		fig_want[0] = '\0';
		ck_assert_int_eq(im_extract_figures(&res, list_figure, fig_want),
				 0);
		ck_assert_int_eq(im_extract(deferred, NULL, copy, n, &r), 0);
		ck_assert_msg(r.unchecked == (i < 4), "text %zu: unchecked %d",
			      i, r.unchecked);
		ck_assert_int_eq(im_extract_terms(&r, &p, &got), 0);
		ck_assert_msg(got.n == want.n, "text %zu: %zu terms, not %zu",
			      i, got.n, want.n);
		for (size_t k = 0; k < want.n; k++)
			ck_assert_msg(!strcmp(im_terms_str(&got, k),
					      im_terms_str(&want, k)),
				      "text %zu, term %zu: %s, not %s", i, k,
				      im_terms_str(&got, k),
				      im_terms_str(&want, k));
		ck_assert(got.numbers == want.numbers);
		fig_got[0] = '\0';
		ck_assert_int_eq(im_extract_figures(&r, list_figure, fig_got),
				 0);
		ck_assert_str_eq(fig_got, fig_want);
	}
	im_extractor_free(deferred);
	im_terms_release(&want);
	im_terms_release(&got);
}
END_TEST

/*
 * im_utf8_valid() skips ASCII in blocks of 32 and 8 bytes: every length up
 * to three blocks, with one two-byte character, a truncated one or a stray
 * continuation byte at every position; and the ASCII before it alone.
 */
START_TEST(test_extract_utf8_valid_at_every_offset)
{
	static const struct {
		const char *bytes;
		size_t len;
		bool valid;
	} inserts[] = {
		{"\xc3\xa9", 2, true}, {"\xc3", 1, false}, {"\x80", 1, false}};

	for (size_t len = 0; len <= 100; len++)
		for (size_t i = 0; i < 3; i++)
			for (size_t at = 0; at + inserts[i].len <= len; at++) {
				char *b = malloc(len ? len : 1);
				bool want = inserts[i].valid;

				ck_assert_ptr_nonnull(b);
				memset(b, 'a', len);
				memcpy(b + at, inserts[i].bytes,
				       inserts[i].len);
				ck_assert_msg(im_utf8_valid(b, len) == want,
					      "length %zu, insert %zu at %zu",
					      len, i, at);
				ck_assert(im_utf8_valid(b, at));
				free(b);
			}
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

/* ---- Fixtures (tests/make_format_fixtures.sh) ---------------------------- */

static char *read_fixture(const char *name, size_t *len)
{
	char path[512];
	FILE *f;
	char *buf;
	long n;

	snprintf(path, sizeof(path), "%s/formats/%s", IM_TEST_DATA, name);
	f = fopen(path, "rb");
	ck_assert_msg(f != NULL, "cannot open fixture %s", path);
	ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	ck_assert_int_ge(n, 0);
	rewind(f);
	buf = malloc((size_t)n + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static void extract_fixture(const char *name)
{
	size_t len;
	char *buf = read_fixture(name, &len);

	extract_n(buf, len);
	free(buf);
}

static const struct {
	const char *name;
	enum im_format f;
	bool compressed;
} fixtures[] = {
	{"cc0.txt", IM_FMT_TEXT, false},
	{"cc0-utf16.txt", IM_FMT_TEXT, false},
	{"cc0.txt.gz", IM_FMT_TEXT, true},
	{"cc0.html", IM_FMT_HTML, false},
	{"cc0.docx", IM_FMT_DOCX, false},
	{"cc0.odt", IM_FMT_ODT, false},
	{"cc0.epub", IM_FMT_EPUB, false},
	{"cc0.pdf", IM_FMT_PDF, false},
	{"sheet.xlsx", IM_FMT_XLSX, false},
	{"sheet.ods", IM_FMT_ODS, false},
	{"budget-2024.xlsx", IM_FMT_XLSX, false},
	{"budget-2024.ods", IM_FMT_ODS, false},
	{"slides.pptx", IM_FMT_PPTX, false},
	{"slides.odp", IM_FMT_ODP, false},
	{"cc0.rtf", IM_FMT_RTF, false},
	{"artistic.rtf", IM_FMT_RTF, false},
	{"cc0.doc", IM_FMT_DOC, false},
	{"notes.doc", IM_FMT_DOC, false},
	{"sheet.xls", IM_FMT_XLS, false},
	{"slides.ppt.gz", IM_FMT_PPT, true},
};

START_TEST(test_extract_sniff_fixtures)
{
	size_t len;
	char *buf = read_fixture(fixtures[_i].name, &len);
	enum im_format want =
		fixtures[_i].compressed ? IM_FMT_COMPRESSED : fixtures[_i].f;

	ck_assert_msg(im_extract_sniff(buf, len) == want,
		      "%s sniffed as %s, want %s", fixtures[_i].name,
		      im_format_name(im_extract_sniff(buf, len)),
		      im_format_name(want));
	free(buf);
	extract_fixture(fixtures[_i].name);
	ck_assert_msg(res.format == fixtures[_i].f && !res.fail &&
			      res.compressed == fixtures[_i].compressed,
		      "%s: format %s, failure %s (%s)", fixtures[_i].name,
		      im_format_name(res.format),
		      im_extract_fail_name(res.fail),
		      im_extractor_sandbox_error(xtor)
			      ? im_extractor_sandbox_error(xtor)
			      : "no start failure");
}
END_TEST

/* Markup and "%PDF-" are looked for at every offset, in any case for the
 * markup, and "%PDF-" only within the first 1024 bytes. */
START_TEST(test_extract_sniff_finds_markers_anywhere)
{
	static const char prolog[] = "<?xml version=\"1.0\"?>\n";
	char b[1100];

	for (size_t at = sizeof(prolog) - 1; at + 5 <= sizeof(b); at++) {
		memset(b, '<', sizeof(b));
		memcpy(b, prolog, sizeof(prolog) - 1);
		memcpy(b + at, "<HtMl", 5);
		ck_assert_msg(im_extract_sniff(b, sizeof(b)) == IM_FMT_HTML,
			      "<HtMl at %zu", at);
		memcpy(b + at, "<HtMm", 5);
		ck_assert_msg(im_extract_sniff(b, sizeof(b)) == IM_FMT_TEXT,
			      "<HtMm at %zu", at);
	}
	for (size_t at = 0; at + 5 <= sizeof(b); at++) {
		memset(b, '%', sizeof(b));
		memcpy(b + at, "%PDF-", 5);
		ck_assert_msg(
			im_extract_sniff(b, sizeof(b)) ==
				(at + 5 <= 1024 ? IM_FMT_PDF : IM_FMT_TEXT),
			"%%PDF- at %zu", at);
		memcpy(b + at, "%pdf-", 5);
		ck_assert_msg(im_extract_sniff(b, sizeof(b)) == IM_FMT_TEXT,
			      "%%pdf- at %zu", at);
	}
}
END_TEST

/* "Key: value" files that are not mail: their first block is text, not
 * headers to drop (the kernel's ABI files, Debian's .changes, an HTTP
 * response saved), whereas a message with only Date and Subject is mail. */
START_TEST(test_extract_sniff_key_value_files_are_text)
{
	static const char *const text[] = {
		"What:\t\t/sys/o2cb symlink\nDate:\t\tMay 2011\n"
		"KernelVersion:\t3.0\nContact:\tocfs2-devel@oss.oracle.com\n"
		"Description:\tThis is a symlink: /sys/o2cb to /sys/fs/o2cb.\n"
		"\t\tDon't code new software to look here.\n",
		"Format: 1.8\nDate: Sat, 01 Jun 2024 10:00:00 +0000\n"
		"Source: hello\nBinary: hello\n\nChanges:\n hello (2.10-3)\n",
		"Content-Type: text/plain\nDate: Mon, 3 Jun 2024 10:00:00 GMT\n"
		"MIME-Version: 1.0\n\nbody\n",
	};
	static const char mail[] = "Date: Mon, 3 Jun 2024 10:00:00 +0000\n"
				   "Subject: minutes\n\nbody\n";

	for (size_t i = 0; i < sizeof(text) / sizeof(text[0]); i++)
		ck_assert_msg(im_extract_sniff(text[i], strlen(text[i])) ==
				      IM_FMT_TEXT,
			      "file %zu sniffed as %s", i,
			      im_format_name(im_extract_sniff(
				      text[i], strlen(text[i]))));
	ck_assert_int_eq(im_extract_sniff(mail, sizeof(mail) - 1),
			 IM_FMT_EMAIL);
}
END_TEST

/* Mail without an address header: a web archive (.mht) as Word and Excel
 * save it, a message stripped of its addresses; mail whose headers outrun
 * the sniffed head of the file, cut at any byte. */
START_TEST(test_extract_sniff_mime_and_long_headers_are_mail)
{
	static const char mht[] =
		"MIME-Version: 1.0\nX-Document-Type: Workbook\n"
		"Content-Type: multipart/related; "
		"boundary=\"----=_NextPart_01D9\"\n\n"
		"This document is a Single File Web Page.\n";
	static const char stripped[] =
		"Date: Mon, 3 Jun 2024 10:00:00 +0000\nMIME-Version: 1.0\n"
		"Content-Type: text/plain; charset=utf-8\n"
		"Content-Transfer-Encoding: base64\n\naGVsbG8gd29ybGQ=\n";
	static const char received[] =
		"Received: from relay.example.org by mx.example.net\n";
	static char big[IM_EXTRACT_SNIFF + 256];

	ck_assert_int_eq(im_extract_sniff(mht, sizeof(mht) - 1), IM_FMT_EMAIL);
	ck_assert_int_eq(im_extract_sniff(stripped, sizeof(stripped) - 1),
			 IM_FMT_EMAIL);
	for (size_t pad = 0; pad < sizeof(received); pad++) {
		size_t n = 0;

		n += (size_t)sprintf(big, "X-Pad: %.*s\n", (int)pad,
				     "................................"
				     "................................");
		while (n + sizeof(received) < sizeof(big) - 64) {
			memcpy(big + n, received, sizeof(received) - 1);
			n += sizeof(received) - 1;
		}
		n += (size_t)sprintf(big + n, "Subject: hi\n\nbody\n");
		ck_assert_msg(im_extract_sniff(big, n) == IM_FMT_EMAIL,
			      "headers past the sniffed head, pad %zu: %s", pad,
			      im_format_name(im_extract_sniff(big, n)));
	}
}
END_TEST

/* Files whose keys include from, to, subject or references, but no value
 * mail would give them: read as mail they were all "headers" (no blank
 * line ends them) and lost every term. */
START_TEST(test_extract_key_value_files_keep_their_terms)
{
	static const struct {
		const char *what, *file, *first;
	} files[] = {
		{"YAML itinerary",
		 "from: Paris\nto: Berlin\ndate: 2024-06-03\n"
		 "departure: 09:13 Gare de l'Est\n"
		 "arrival: 17:45 Hauptbahnhof\nnotes: bring the passport\n",
		 "Paris"},
		{"CITATION.cff",
		 "cff-version: 1.2.0\n"
		 "message: If you use this software, please cite it.\n"
		 "title: Tidal harmonics toolkit\nauthors:\n"
		 "  - family-names: Lovelace\n    given-names: Ada\n"
		 "references:\n  - type: article\n"
		 "    title: Harmonic analysis of coastal tides\n"
		 "    authors:\n      - family-names: Doodson\n"
		 "        email: doodson@example.org\n    year: 1921\n",
		 "software"},
		{"config with a subject",
		 "subject: Nightly build report\nrecipients: release-team\n"
		 "schedule: daily\ntemplate: failures-first\n",
		 "Nightly"},
		{"translation table (pandoc's have To, Cc, References)",
		 "Abstract: Zusammenfassung\nAppendix: Anhang\nCc: Verteiler\n"
		 "Chapter: Kapitel\nReferences: Literatur\nTo: An\n",
		 "Zusammenfassung"},
	};

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		size_t n = strlen(files[i].file);

		extract_n(files[i].file, n);
		ck_assert_msg(res.format == IM_FMT_TEXT && res.len == n,
			      "%s read as %s, %zu of %zu bytes", files[i].what,
			      im_format_name(res.format), res.len, n);
		assert_text_has(files[i].first);
	}
}
END_TEST

/* Mail of every kind, each beside a file with the same header names whose
 * values mail would not give them. Read as mail a file keeps only its
 * Subject and body, so a file taken for mail by mistake can lose every
 * term, and mail taken for text only gains its header words: when in
 * doubt, text. @keep is a word the file must give, @drop (for mail) one of
 * a header dropped. */
START_TEST(test_extract_mail_told_by_header_values)
{
	static const struct {
		const char *what, *file, *keep, *drop;
		enum im_format f;
	} cases[] = {
		{"message, From with a display name",
		 "From: \"Lovelace, Ada\" <ada@example.org>\n"
		 "To: charles@example.org\nSubject: engine notes\n\n"
		 "The engine weaves algebraic patterns.\n",
		 "weaves", "Lovelace", IM_FMT_EMAIL},
		{"memo, names for addresses",
		 "From: Ada Lovelace\nTo: Charles Babbage\n"
		 "Subject: engine notes\n\n"
		 "The engine weaves algebraic patterns.\n",
		 "Lovelace", NULL, IM_FMT_TEXT},
		{"message of headers only",
		 "From: ada@example.org\nTo: charles@example.org\n"
		 "Subject: meeting cancelled\n",
		 "cancelled", "charles", IM_FMT_EMAIL},
		{"local mail",
		 "From: root@host\nTo: root\n"
		 "Subject: Cron run-parts /etc/cron.daily\n\n"
		 "gzip: stdout: No space left on device\n",
		 "space", "root", IM_FMT_EMAIL},
		{"Usenet article",
		 "Path: news.example.org!not-for-mail\nFrom: Ada Lovelace\n"
		 "Newsgroups: comp.lang.c\nSubject: pointer arithmetic\n\n"
		 "Arrays decay to pointers.\n",
		 "decay", "comp.lang", IM_FMT_EMAIL},
		{"recipients on continuation lines",
		 "From: Ada\nTo:\n\tcharles@example.org,\n\tmary@example.org\n"
		 "Subject: notes\n\nSee the attached figures.\n",
		 "figures", "mary", IM_FMT_EMAIL},
		{"bounce",
		 "Return-Path: <>\nFrom: Mail Delivery System\n"
		 "Subject: Undelivered Mail\n\nThe recipient's "
		 "mailbox is full.\n",
		 "mailbox", "System", IM_FMT_EMAIL},
		{"message id alone",
		 "Message-ID: <20240603.1@example.org>\nSubject: minutes\n\n"
		 "Quorum reached.\n",
		 "Quorum", "20240603", IM_FMT_EMAIL},
		{"references without message ids",
		 "id: 7\nreferences: Knuth 1968; Lamport 1994\n"
		 "subject: typesetting\n",
		 "Knuth", NULL, IM_FMT_TEXT},
		{"subject and a date mail would not write",
		 "subject: minutes\ndate: 2024-06-03\n", "minutes", NULL,
		 IM_FMT_TEXT},
		{"mbox message, no address",
		 "From - Mon Jun  3 10:00:00 2024\nX-Mozilla-Status: 0001\n"
		 "Content-Type: text/plain\n\nDraft of the report.\n",
		 "Draft", "Mozilla", IM_FMT_EMAIL},
		{"opening hours, not an mbox line",
		 "From 9:00 to 17:00 the desk is staffed.\nPhone: 555 0100\n",
		 "staffed", NULL, IM_FMT_TEXT},
		{"opening hours with seconds (review 21)",
		 "From 09:00:00 until 17:30:00 the office is closed.\n"
		 "Note: bring your badge.\n\nrest\n",
		 "office", NULL, IM_FMT_TEXT},
		{"mbox line, the year before the time",
		 "From a@example.org Mon, 3 Jun 2024 10:00:00 +0000\n"
		 "Subject: agenda\n\nThe agenda attached.\n",
		 "agenda", NULL, IM_FMT_EMAIL},
		{"forwarded message",
		 "MIME-Version: 1.0\nContent-Type: message/rfc822\n"
		 "Subject: forwarded\n\nSubject: inner\n\nThe inner body.\n",
		 "inner", "rfc822", IM_FMT_EMAIL},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		extract_n(cases[i].file, strlen(cases[i].file));
		ck_assert_msg(res.format == cases[i].f, "%s read as %s",
			      cases[i].what, im_format_name(res.format));
		assert_text_has(cases[i].keep);
		ck_assert_msg(!cases[i].drop || !strstr(text, cases[i].drop),
			      "%s: \"%s\" kept: \"%.300s\"", cases[i].what,
			      cases[i].drop, text);
	}
}
END_TEST

/* The unique terms of the last result. */
static void result_terms(struct im_terms *t)
{
	struct im_params p;

	im_params_init(&p);
	ck_assert_int_eq(im_extract_terms(&res, &p, t), 0);
}

static bool has_term(const struct im_terms *t, const char *s)
{
	for (size_t i = 0; i < t->n; i++)
		if (!strcmp(im_terms_str(t, i), s))
			return true;
	return false;
}

/* |A ∩ B| / |A ∪ B| of two term sets. */
static double jaccard(const struct im_terms *a, const struct im_terms *b)
{
	size_t both = 0;

	for (size_t i = 0; i < a->n; i++) {
		bool found = false;

		for (size_t j = 0; j < b->n && !found; j++)
			found = a->v[i].len == b->v[j].len &&
				!memcmp(im_terms_str(a, i), im_terms_str(b, j),
					a->v[i].len);
		both += found;
	}
	return (double)both / (double)(a->n + b->n - both);
}

/* The same text in every format yields (almost) the same terms: a PDF's
 * reading order, ligatures and hyphenation, an office file's runs, an
 * e-book's spine all come back to the words of the text. */
START_TEST(test_extract_same_text_every_format)
{
	static const char *const same[] = {
		"cc0-utf16.txt", "cc0.txt.gz", "cc0.html", "cc0.docx",
		"cc0.odt",	 "cc0.epub",   "cc0.pdf",    "cc0.rtf",
		"cc0.doc",
	};
	struct im_terms base, t;

	im_terms_init(&base);
	im_terms_init(&t);
	extract_fixture("cc0.txt");
	result_terms(&base);
	ck_assert_uint_gt(base.n, 200);
	for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
		double j;

		extract_fixture(same[i]);
		result_terms(&t);
		j = jaccard(&base, &t);
		ck_assert_msg(j >= 0.99,
			      "%s shares %.3f of the text's terms (%zu vs %zu)",
			      same[i], j, t.n, base.n);
	}
	extract_fixture("artistic.pdf");
	result_terms(&t);
	ck_assert_msg(jaccard(&base, &t) < 0.3,
		      "another text by the same programs is another document");
	im_terms_release(&base);
	im_terms_release(&t);
}
END_TEST

/* A list item's number as Word, LibreOffice and browsers show it: letters
 * past z as columns (aa) or repeated (bb, Word's), Roman numerals up to
 * 3999, and decimal where a format cannot write the number. */
START_TEST(test_extract_list_numbers)
{
	static const struct {
		enum im_list_fmt f;
		int64_t n;
		const char *want;
	} cases[] = {
		{IM_LIST_DECIMAL, 7, "7"},
		{IM_LIST_DECIMAL, -3, "-3"},
		{IM_LIST_DECIMAL, INT64_MIN, "-9223372036854775808"},
		{IM_LIST_DECIMAL_ZERO, 7, "07"},
		{IM_LIST_DECIMAL_ZERO, 12, "12"},
		{IM_LIST_LOWER_LETTER, 1, "a"},
		{IM_LIST_LOWER_LETTER, 26, "z"},
		{IM_LIST_LOWER_LETTER, 27, "aa"},
		{IM_LIST_LOWER_LETTER, 28, "ab"},
		{IM_LIST_UPPER_LETTER, 702, "ZZ"},
		{IM_LIST_UPPER_LETTER, 703, "AAA"},
		{IM_LIST_LOWER_LETTER, INT64_MAX, "crpxnlskvljfhg"},
		{IM_LIST_LOWER_LETTER, 0, "0"},
		{IM_LIST_LOWER_LETTER_SYNC, 28, "bb"},
		{IM_LIST_UPPER_LETTER_SYNC, 53, "AAA"},
		{IM_LIST_LOWER_LETTER_SYNC, 416, "zzzzzzzzzzzzzzzz"},
		{IM_LIST_LOWER_LETTER_SYNC, 417, "417"},
		{IM_LIST_LOWER_ROMAN, 4, "iv"},
		{IM_LIST_UPPER_ROMAN, 1994, "MCMXCIV"},
		{IM_LIST_LOWER_ROMAN, 3999, "mmmcmxcix"},
		{IM_LIST_UPPER_ROMAN, 4000, "4000"},
		{IM_LIST_UPPER_ROMAN, 0, "0"},
		{IM_LIST_NONE, 5, ""},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char out[IM_LIST_NUMBER_MAX + 1];
		size_t n = im_list_number(cases[i].f, cases[i].n, out);

		ck_assert_uint_le(n, IM_LIST_NUMBER_MAX);
		out[n] = '\0';
		ck_assert_msg(!strcmp(out, cases[i].want),
			      "%" PRId64 " in format %d: \"%s\", not \"%s\"",
			      cases[i].n, (int)cases[i].f, out, cases[i].want);
	}
}
END_TEST

/* The text with each run of white space one space. */
static void squeeze_text(void)
{
	size_t o = 0;

	for (size_t i = 0; text[i]; i++)
		if (!(text[i] == ' ' || text[i] == '\t' || text[i] == '\n') ||
		    (o && text[o - 1] != ' '))
			text[o++] = text[i] == '\t' || text[i] == '\n'
					    ? ' '
					    : text[i];
	text[o] = '\0';
}

/* A list LibreOffice numbers 1., 1.1. (two levels shown) and a), and one
 * in Roman numerals from IV: its odt (list styles) and docx
 * (numbering.xml) give each item its number before its text, as shown;
 * its html what a browser shows of its <ol>s (no "1.1." in HTML). */
START_TEST(test_extract_list_labels)
{
	static const char *const shown[] = {
		"1. Moorings",	      "1.1. Fees",	  "1.2. Berths",
		"a) trawlers",	      "b) yachts",	  "2. Pilotage",
		"2.1. Pilots",	      "IV. Anchoring",	  "V. Fishing",
		"edition. IV. Anchoring",
	};
	static const char *const browser[] = {
		"1. Moorings", "1. Fees",     "2. Berths",    "a. trawlers",
		"b. yachts",   "2. Pilotage", "1. Pilots",    "IV. Anchoring",
		"V. Fishing",
	};

	extract_fixture("outline.odt");
	squeeze_text();
	for (size_t i = 0; i < sizeof(shown) / sizeof(shown[0]); i++)
		assert_text_has(shown[i]);
	extract_fixture("outline.docx");
	squeeze_text();
	for (size_t i = 0; i < sizeof(shown) / sizeof(shown[0]); i++)
		assert_text_has(shown[i]);
	extract_fixture("outline.html");
	squeeze_text();
	for (size_t i = 0; i < sizeof(browser) / sizeof(browser[0]); i++)
		assert_text_has(browser[i]);
}
END_TEST

/* An odt with a numbered list in its page header (styles.xml, not read as
 * text) and one in its body: the body's items have their numbers. The
 * header's list closed the table of lists before the body's list styles
 * (content.xml) were in it, and the body had none. */
START_TEST(test_extract_header_list)
{
	extract_fixture("header-list.odt");
	assert_text_has("1. Moor bow and stern.");
	assert_text_has("2. Keep the fairway clear.");
	ck_assert_ptr_null(strstr(text, "Harbour office"));
}
END_TEST

/* Headings LibreOffice numbers by its outline style ("Chapter numbering"):
 * the odt's text:outline-style and the docx's numbered Heading styles show
 * the same numbers, and the same report from chapter 4 shows its own. The
 * outline's edges as LibreOffice shows them (its text export): a level
 * skipped counts at its start, a list header has no number, a restart, a
 * heading in a list has the list's. */
START_TEST(test_extract_outline_headings)
{
	static const char *const from1[] = {
		"1. Tide gauges", "1.1. Calibration", "1.2. Repairs",
		"2. Dredging",	  "2.1. Spoil",
	};
	static const char *const from4[] = {
		"4. Tide gauges", "4.1. Calibration", "4.2. Repairs",
		"5. Dredging",	  "5.1. Spoil",
	};
	static const char *const edges[] = {
		"Part 1. Moorings 1.i.A. Winter berths 1.ii. Summer berths "
		"Interlude on tides Part 2. Pilotage Part 7. Customs "
		"7.i. Bonded stores a) Listed heading Part 8. Lighthouse",
	};
	static const struct {
		const char *name;
		const char *const *want;
		size_t n;
	} cases[] = {
		{"chapters.odt", from1, 5},   {"chapters.docx", from1, 5},
		{"chapters-4.odt", from4, 5}, {"chapters-4.docx", from4, 5},
		{"headings.odt", edges, 1},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		extract_fixture(cases[i].name);
		squeeze_text();
		for (size_t k = 0; k < cases[i].n; k++)
			ck_assert_msg(strstr(text, cases[i].want[k]),
				      "%s shows \"%s\": \"%.400s\"",
				      cases[i].name, cases[i].want[k], text);
	}
}
END_TEST

/* Word's numbering that LibreOffice 7.4 does not show as Word does: legal
 * numbering (w:isLgl: "Section 1.01" under "Article I.", not "I.01"), a
 * level started again only by level 1 (w:lvlRestart 1: "(b) Yachts" under
 * a new section) or never (0: "3) Ladders"); and a w:num that defines a
 * level anew (w:lvlOverride/w:lvl), numbered on with the others, as
 * LibreOffice shows it ("Annex C:", then "Article V."). */
START_TEST(test_extract_docx_level_rules)
{
	extract_fixture("legal.docx");
	squeeze_text();
	assert_text_has("Article I. Moorings Section 1.01 Fees (a) Trawlers "
			"1) Nets Section 1.02 Berths (b) Yachts 2) Sails "
			"Article II. Pilotage Section 2.01 Pilots (a) Boarding "
			"3) Ladders Annex C: Tariffs Section 3.01 Dues "
			"Annex D: Charts Article V. Customs");
}
END_TEST

/* Slides with numbered lists, as LibreOffice shows them (its PDF): the odp
 * (text:list and its list style) and the pptx (a:buAutoNum, with startAt)
 * alike. */
START_TEST(test_extract_slide_numbers)
{
	static const char *const names[] = {"agenda.odp", "agenda.pptx"};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		extract_fixture(names[i]);
		squeeze_text();
		assert_text_has("agenda 1. Minutes of the last meeting "
				"2. Budget of the works i) dredging the approach "
				"channel ii) moorings in the inner basin "
				"3. Pilotage fees for the season "
				"4. Lighthouse lantern repairs "
				"5. Any other business");
	}
	extract_fixture("agenda-6.pptx");
	assert_text_has("6. Lighthouse lantern repairs\n7. Any other");
}
END_TEST

/* A docx whose list definitions each hold another inside a level's: the
 * inner ones are not read, and the outer ones are whole (each item "VII.").
 * They wrote through a pointer into the table the inner one had moved
 * (valgrind: invalid write), and their items had no number. Unsandboxed,
 * so that valgrind sees the reading. */
START_TEST(test_extract_nested_list_definitions)
{
	struct im_extract_opts o;
	char want[64];

	im_extractor_free(xtor);
	im_extract_opts_init(&o);
	o.sandbox = false;
	ck_assert_int_eq(im_extractor_new(&o, &xtor), 0);
	extract_fixture("nested-lists.docx");
	ck_assert_int_eq(res.fail, IM_XF_NONE);
	for (int i = 0; i < 40; i++) {
		snprintf(want, sizeof(want), "VII. harbour rule %d\n", i);
		assert_text_has(want);
	}
}
END_TEST

/* A text that types its lists' numbers ("1." to "3.", twice) and pandoc's
 * docx, odt and html of it, which number them automatically: the same
 * figures (im_terms.numbers), so removal plans them as near-duplicates
 * of one another. */
START_TEST(test_extract_list_figures)
{
	static const char *const exports[] = {"rules.docx", "rules.odt",
					      "rules.html"};
	struct im_terms base, t;

	im_terms_init(&base);
	im_terms_init(&t);
	extract_fixture("rules.txt");
	result_terms(&base);
	ck_assert_uint_ne(base.numbers, 0);
	for (size_t i = 0; i < sizeof(exports) / sizeof(exports[0]); i++) {
		extract_fixture(exports[i]);
		result_terms(&t);
		ck_assert_msg(t.numbers == base.numbers,
			      "%s's figures are the text's: \"%.300s\"",
			      exports[i], text);
	}
	im_terms_release(&base);
	im_terms_release(&t);
}
END_TEST

START_TEST(test_extract_office_parts)
{
	extract_fixture("sheet.xlsx");
	assert_text_has("northern territories");
	assert_text_has("lighthouse");
	extract_fixture("sheet.xls");
	assert_text_has("northern territories");
	assert_text_has("lighthouse");
	extract_fixture("slides.ppt.gz");
	assert_text_has("Harbour dredging schedule");
	assert_text_has("Speaker notes mention seagulls");
	extract_fixture("sheet.ods");
	assert_text_has("southern provinces");
	extract_fixture("slides.pptx");
	assert_text_has("Harbour dredging schedule");
	assert_text_has("Speaker notes mention seagulls");
	extract_fixture("slides.odp");
	assert_text_has("Quarterly lighthouse maintenance review");
	assert_text_has("Speaker notes mention seagulls");
	extract_fixture("cc0.pdf");
	assert_text_has("Statement of Purpose");
}
END_TEST

/* A number cell's term: what xlsx's <v> and ods's office:value hold, as
 * Excel and LibreOffice write them, to 15 digits and 20 decimal places. */
START_TEST(test_extract_number_terms)
{
	static const char *const cases[][2] = {
		{"1234.5", "1234.5"},
		{"2912.49", "2912.49"},
		{"-1234.5", "-1234.5"},
		{"+5", "5"},
		{" 42\n", "42"},
		{"100", "100"},
		{"1e2", "100"},
		{"-0", "0"},
		{"0.000", "0"},
		{"0.045", "0.045"},
		{"0.0001", "0.0001"},
		{"0.00001", "1e-05"},
		/* Binary noise Excel writes, rounded away */
		{"0.10000000000000001", "0.1"},
		{"0.30000000000000004", "0.3"},
		{"4.9999999999999996E-2", "0.05"},
		/* LibreOffice's xlsx and ods of one value */
		{"3333333333333330", "3.33333333333333e+15"},
		{"3333333333333333", "3.33333333333333e+15"},
		{"6.66666666666667E+019", "6.66666666666667e+19"},
		{"3.33333333333333E-010", "3.3333333333e-10"},
		{"0.00000000033333333333", "3.3333333333e-10"},
		{"3.33333333333333E-005", "3.33333333333333e-05"},
		{"0.0000333333333333333", "3.33333333333333e-05"},
		{"3.33333333333333E-026", "0"},
		{"6e-21", "1e-20"},
		{"999999999999999.9", "1e+15"},
		{"0.999999999999999999", "1"},
		{"123456789012345678", "1.23456789012346e+17"},
		{"45306.5208333333", "45306.5208333333"},
	};
	static const char *const bad[] = {
		"", " ", ".", "-", "e5", "1e", "1e+", "1.2.3", "12a", "0x10",
		"1,5", "1e999", "nan", "#DIV/0!",
	};
	char out[IM_NUMBER_TERM_MAX];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t n = im_number_term(cases[i][0], strlen(cases[i][0]), out);

		ck_assert_msg(n == strlen(cases[i][1]) &&
				      !strcmp(out, cases[i][1]),
			      "%s: %s, want %s", cases[i][0], n ? out : "none",
			      cases[i][1]);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(!im_number_term(bad[i], strlen(bad[i]), out),
			      "%s is no number", bad[i]);
	/* Every digit of a long number is read, and the term stays short. */
	{
		char big[400];

		memset(big, '9', sizeof(big));
		big[0] = '0';
		big[1] = '.';
		ck_assert_uint_eq(im_number_term(big, sizeof(big), out), 1);
		ck_assert_str_eq(out, "1");
	}
}
END_TEST

/* Whether the significant digits of @p s after the 15th are 5 and then
 * zeros only: a tie that the decimal text rounds up and printf rounds to
 * even. */
static bool tie_at_16(const char *s)
{
	char d[32];
	size_t n = 0;

	for (; *s && *s != 'e'; s++)
		if (*s >= '0' && *s <= '9' && (n || *s != '0') &&
		    n < sizeof(d))
			d[n++] = *s;
	if (n < 16 || d[15] != '5')
		return false;
	for (size_t i = 16; i < n; i++)
		if (d[i] != '0')
			return false;
	return true;
}

/* The same against printf's "%.15g" of the double (in the C locale of a
 * test), for values where the two roundings agree: not a tie in the
 * digits printed. */
START_TEST(test_extract_number_terms_are_printf)
{
	uint64_t x = 0x9e3779b97f4a7c15u;
	char s[64], want[64], out[IM_NUMBER_TERM_MAX];

	for (int i = 0; i < 20000; i++) {
		double v;
		int n;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		v = (double)(x >> 11) / (double)(1ull << 53);
		v = (x & 1 ? -v : v) * pow(10, (double)(int)(x >> 3 & 31) - 5);
		n = snprintf(s, sizeof(s), "%.17g", v);
		/* Below 1e-6 the 20 decimal places cut before 15 digits do. */
		if (tie_at_16(s) || fabs(v) < 1e-6)
			continue;
		snprintf(want, sizeof(want), "%.15g", v);
		if (!strcmp(want, "-0"))
			strcpy(want, "0");
		im_number_term(s, (size_t)n, out);
		ck_assert_msg(!strcmp(out, want), "%s: %s, want %s", s, out,
			      want);
	}
}
END_TEST

/* ods stores dates and times as text, xlsx as days since 1899-12-30
 * (LibreOffice's xlsx of these cells holds the numbers on the right). */
START_TEST(test_extract_ods_date_terms)
{
	static const char *const dates[][2] = {
		{"2024-01-05", "45296"},
		{"2024-01-15T12:30:00", "45306.5208333333"},
		{"1899-12-30", "0"},
		{"1899-12-29T06:00:00", "-0.75"},
		{"1900-02-01", "33"},
		{"2024-02-29T00:00:00.5", "45351.000005787"},
	};
	static const char *const times[][2] = {
		{"PT14H30M00S", "0.604166666666667"},
		{"PT36H20M07.25S", "1.51397280092593"},
		{"-PT12H", "-0.5"},
		{"P1DT0H", "1"},
		{"PT00H00M00S", "0"},
	};
	static const char *const bad[] = {"2024-1-05", "2024-13-01",
					  "2024-01-05Z", "24-01-05",
					  "2024-01-05T12:30", "P1Y",
					  "PT5X", "T1H", "PT1H junk",
					  /* a unit twice or out of order: the sum
					   * of these overflowed */
					  "P99999999DT99999999H99999999H99999999H",
					  "PT1M1H", "PT1S1S"};
	char out[IM_NUMBER_TERM_MAX];

	for (size_t i = 0; i < sizeof(dates) / sizeof(dates[0]); i++) {
		size_t n = im_ods_date_term(dates[i][0], out);

		ck_assert_msg(n && !strcmp(out, dates[i][1]), "%s: %s, want %s",
			      dates[i][0], n ? out : "none", dates[i][1]);
	}
	for (size_t i = 0; i < sizeof(times) / sizeof(times[0]); i++) {
		size_t n = im_ods_time_term(times[i][0], out);

		ck_assert_msg(n && !strcmp(out, times[i][1]), "%s: %s, want %s",
			      times[i][0], n ? out : "none", times[i][1]);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(!im_ods_date_term(bad[i], out) &&
				      !im_ods_time_term(bad[i], out),
			      "%s is no date or time", bad[i]);
}
END_TEST

/* A spreadsheet's figures are its content (user review: two budgets with
 * the same labels and every figure changed were one text): each number
 * cell is a term, the same in xlsx and ods. */
START_TEST(test_extract_sheet_figures)
{
	struct im_terms a, b;

	im_terms_init(&a);
	im_terms_init(&b);
	extract_fixture("budget-2024.xlsx");
	ck_assert_int_eq(res.format, IM_FMT_XLSX);
	result_terms(&a);
	/* A figure with cents, a total, a percentage, a date, a boolean and
	 * the labels. */
	ck_assert(has_term(&a, "2912.49") && has_term(&a, "13716.96") &&
		  has_term(&a, "0.045") && has_term(&a, "45296") &&
		  has_term(&a, "false") && has_term(&a, "electricity"));
	extract_fixture("budget-2024.ods");
	ck_assert_int_eq(res.format, IM_FMT_ODS);
	/* The text a cell displays is not read: "2,912.49 €", "05 Jan 2024" */
	ck_assert_ptr_null(strstr(text, "2,912.49"));
	result_terms(&b);
	ck_assert_msg(jaccard(&a, &b) == 1.0,
		      "a sheet's xlsx and ods have the same terms (%zu, %zu)",
		      a.n, b.n);
	extract_fixture("budget-2025.xlsx");
	result_terms(&b);
	ck_assert_msg(jaccard(&a, &b) < 0.3,
		      "another year's figures: %.3f of the terms in common",
		      jaccard(&a, &b));
	extract_fixture("budget-2024-fix.xlsx");
	result_terms(&b);
	ck_assert_msg(jaccard(&a, &b) > 0.95,
		      "one figure corrected: %.3f of the terms in common",
		      jaccard(&a, &b));
	im_terms_release(&a);
	im_terms_release(&b);
}
END_TEST

/* The lines after IM_EXTRACT_NUMBERS are terms in a spreadsheet only: the
 * text of any other format is words, as it was. */
START_TEST(test_extract_terms_numbers_only_in_sheets)
{
	static const char t[] = "Budget 2024 Rent\n\x1e\n2912.49\n\n-0.5\n";
	struct im_extract_result r = {.text = t, .len = sizeof(t) - 1};
	struct im_params p;
	struct im_terms u;

	im_params_init(&p);
	im_terms_init(&u);
	r.format = IM_FMT_ODS;
	ck_assert_int_eq(im_extract_terms(&r, &p, &u), 0);
	ck_assert_uint_eq(u.n, 4);
	ck_assert(has_term(&u, "budget") && has_term(&u, "rent") &&
		  has_term(&u, "2912.49") && has_term(&u, "-0.5"));
	r.format = IM_FMT_TEXT;
	ck_assert_int_eq(im_extract_terms(&r, &p, &u), 0);
	ck_assert_uint_eq(u.n, 2);
	ck_assert(has_term(&u, "budget") && has_term(&u, "rent"));
	im_terms_release(&u);
}
END_TEST

/* A .doc and the docx it was made from: the same terms, footnote and
 * table included; a hyperlink's field instruction is not text, its
 * result is; Word's 8-bit and UTF-16 pieces come out as UTF-8. */
START_TEST(test_extract_doc_like_docx)
{
	struct im_terms docx, doc;

	im_terms_init(&docx);
	im_terms_init(&doc);
	extract_fixture("notes.docx");
	result_terms(&docx);
	extract_fixture("notes.doc");
	ck_assert_msg(res.format == IM_FMT_DOC && !res.fail, "notes.doc: %s",
		      im_extract_fail_name(res.fail));
	result_terms(&doc);
	ck_assert_msg(docx.n > 20 && jaccard(&docx, &doc) == 1.0,
		      "the .doc has the docx's terms (%zu vs %zu): %s", doc.n,
		      docx.n, text);
	assert_text_has("the harbour authority budget.\n");
	assert_text_has("northern territories\n");
	assert_text_has("A footnote about the foghorn maintenance.");
	assert_text_has("\u201cquoted\u201d \u2014 \u2018single\u2019 "
			"caf\u00e9 na\u00efve \u0152uvre.");
	ck_assert_msg(!strstr(text, "HYPERLINK") && !strstr(text, "example"),
		      "a field's instruction is not text: %s", text);
	im_terms_release(&docx);
	im_terms_release(&doc);
}
END_TEST

/* A reviewed .doc: the text a tracked change deleted (still in its
 * pieces, for undo) is left out, as the docx's w:delText is, and its text
 * box is read, as the docx's document.xml holds it. */
START_TEST(test_extract_doc_review)
{
	struct im_terms docx, doc;

	im_terms_init(&docx);
	im_terms_init(&doc);
	extract_fixture("review.docx");
	result_terms(&docx);
	extract_fixture("review.doc");
	result_terms(&doc);
	ck_assert_msg(docx.n > 10 && jaccard(&docx, &doc) == 1.0,
		      "the .doc has the docx's terms (%zu vs %zu): %s", doc.n,
		      docx.n, text);
	assert_text_has("inspected the breakwater after the storm.");
	assert_text_has("Boxed warning about spring tides");
	ck_assert_msg(!strstr(text, "obsolete"), "deleted text read: %s",
		      text);
	im_terms_release(&docx);
	im_terms_release(&doc);
}
END_TEST

/* A minimal compound file: a header, one FAT sector (sector 0) and one
 * directory sector (sector 1) holding the root and @p n entries. */
static size_t make_cfb(unsigned char *b, const char *const *names, int n)
{
	memset(b, 0, 3 * 512);
	memcpy(b, IM_CFB_MAGIC, 8);
	b[24] = 0x3e, b[26] = 3, b[28] = 0xfe, b[29] = 0xff, b[30] = 9;
	b[32] = 6, b[44] = 1, b[48] = 1, b[57] = 0x10;
	memset(b + 60, 0xff, 4);   /* no MiniFAT */
	memset(b + 68, 0xff, 4);   /* no DIFAT sectors */
	memset(b + 80, 0xff, 436); /* header DIFAT: only sector 0 */
	b[76] = 0;
	memset(b + 512, 0xff, 512);
	memcpy(b + 512, "\xfd\xff\xff\xff\xfe\xff\xff\xff", 8);
	for (int i = 0; i <= n && i < 4; i++) {
		unsigned char *e = b + 1024 + 128 * i;
		const char *name = i ? names[i - 1] : "Root Entry";
		size_t k = strlen(name);

		for (size_t j = 0; j < k; j++)
			e[2 * j] = (unsigned char)name[j];
		e[64] = (unsigned char)(2 * k + 2);
		e[66] = i ? 2 : 5;
		memset(e + 68, 0xff, 12);
		memset(e + 116, 0xfe, 4);
	}
	if (n)
		memset(b + 1024 + 76, 0, 4), b[1024 + 76] = 1;
	return 3 * 512;
}

/* A compound file that holds no Word document stays binary (and so goes
 * to a filter, for Outlook's .msg, say); a sibling tree with a cycle
 * ends the search. */
START_TEST(test_extract_cfb_not_doc)
{
	static const char *const names[] = {"__substg1.0_0037001F"};
	unsigned char b[3 * 512];
	size_t n = make_cfb(b, names, 1);
	struct im_cfb c;
	struct im_cfb_entry e;

	ck_assert(im_cfb_open(&c, (const char *)b, n));
	ck_assert(im_cfb_find(&c, "__SUBSTG1.0_0037001f", &e));
	ck_assert(!im_cfb_find(&c, "WordDocument", &e));
	ck_assert_int_eq(im_extract_sniff((const char *)b, n), IM_FMT_BINARY);
	/* Word 97 has a table stream, Word 6 and 95 do not (binary, for a
	 * filter); PowerPoint 95 has a Header stream, 97 not. */
	{
		static const char *const word97[] = {"1Table", "WordDocument"};
		static const char *const word95[] = {"WordDocument"};
		static const char *const pp95[] = {"Header",
						   "PowerPoint Document"};
		static const char *const pp97[] = {"PowerPoint Document"};

		n = make_cfb(b, word97, 2);
		b[1024 + 128 + 72] = 2, memset(b + 1024 + 128 + 73, 0, 3);
		ck_assert_int_eq(im_extract_sniff((const char *)b, n),
				 IM_FMT_DOC);
		n = make_cfb(b, word95, 1);
		ck_assert_int_eq(im_extract_sniff((const char *)b, n),
				 IM_FMT_BINARY);
		n = make_cfb(b, pp95, 2);
		b[1024 + 128 + 72] = 2, memset(b + 1024 + 128 + 73, 0, 3);
		ck_assert_int_eq(im_extract_sniff((const char *)b, n),
				 IM_FMT_BINARY);
		n = make_cfb(b, pp97, 1);
		ck_assert_int_eq(im_extract_sniff((const char *)b, n),
				 IM_FMT_PPT);
		n = make_cfb(b, names, 1);
	}
	/* Entry 1's siblings are itself: every look-up loops there. */
	memset(b + 1024 + 128 + 68, 0, 8);
	b[1024 + 128 + 68] = 1, b[1024 + 128 + 72] = 1;
	ck_assert(!im_cfb_find(&c, "WordDocument", &e));
	ck_assert(!im_cfb_find(&c, "A", &e));
	ck_assert_int_eq(im_extract_sniff((const char *)b, n), IM_FMT_BINARY);
	/* The directory's first sector out of the file. */
	memset(b + 1024 + 128 + 68, 0xff, 8);
	ck_assert(im_cfb_find(&c, "__substg1.0_0037001F", &e));
	b[48] = 7;
	ck_assert(im_cfb_open(&c, (const char *)b, n));
	ck_assert(!im_cfb_find(&c, "__substg1.0_0037001F", &e));
}
END_TEST

/* The limits of a .doc's reading: the bytes unpacked and the text. */
START_TEST(test_extract_doc_limits)
{
	struct im_extract_opts o;
	struct im_buf b = {0};
	size_t len;
	char *doc = read_fixture("cc0.doc", &len);

	im_extract_opts_init(&o);
	ck_assert_int_eq(im_doc_text(doc, len, &o, &b), 0);
	ck_assert_uint_gt(b.len, 6000);
	o.max_unpacked = 8192;
	b.len = 0;
	ck_assert_int_eq(im_doc_text(doc, len, &o, &b), IM_XF_EXPANSION);
	im_extract_opts_init(&o);
	o.max_text = 1000;
	b.len = 0;
	ck_assert_int_eq(im_doc_text(doc, len, &o, &b), IM_XF_OUTPUT);
	b.len = 0;
	ck_assert_int_eq(im_doc_text(doc, 600, &o, &b), IM_XF_CORRUPT);
	im_buf_release(&b);
	free(doc);
}
END_TEST

/* A spine naming a page of no text 20,000 times: max_text never stops it,
 * and it was read for seconds (80 GB); the pages read count against
 * max_unpacked. A book that names each page once reads as before. */
START_TEST(test_extract_epub_spine_blank_page)
{
	struct im_extract_opts o;
	struct im_buf b = {0};
	size_t len;
	char *book = read_fixture("spine-blank.epub", &len);

	im_extract_opts_init(&o);
	o.max_unpacked = (size_t)16 << 20;
	ck_assert_int_eq(im_zipdoc_text(IM_FMT_EPUB, book, len, &o, &b),
			 IM_XF_EXPANSION);
	free(book);
	book = read_fixture("cc0.epub", &len);
	b.len = 0;
	ck_assert_int_eq(im_zipdoc_text(IM_FMT_EPUB, book, len, &o, &b), 0);
	ck_assert(b.len && memmem(b.p, b.len, "Statement of Purpose", 20));
	im_buf_release(&b);
	free(book);
}
END_TEST

/* A budget's .xls under a cap on its text a byte or two short of it: the
 * text is cut and says so, whatever the last bytes were (the line that
 * opens the number terms came after the check). */
START_TEST(test_extract_xls_output_cap)
{
	struct im_extract_opts o;
	struct im_buf b = {0};
	size_t len, full;
	char *xls = read_fixture("budget-2024.xls", &len);

	im_extract_opts_init(&o);
	ck_assert_int_eq(im_xls_text(xls, len, &o, &b), 0);
	full = b.len;
	ck_assert_uint_gt(full, 100);
	for (size_t cap = full - 3; cap < full; cap++) {
		int ret;

		o.max_text = cap;
		b.len = 0;
		ret = im_xls_text(xls, len, &o, &b);
		ck_assert_msg(ret == IM_XF_OUTPUT,
			      "%zu bytes of text under a cap of %zu: %s", b.len,
			      cap, ret ? im_extract_fail_name(ret) : "no failure");
	}
	im_buf_release(&b);
	free(xls);
}
END_TEST

/* A compound file of one stream @p name holding @p data / @p n (at most
 * 8 KiB; padded with zeros to 4 KiB, past the mini stream's cutoff):
 * the header, the FAT (sector 0), the directory (sector 1), the stream
 * (sectors 2 on). Returns its length in @p b (10 * 512 bytes). */
static size_t make_cfb_stream(unsigned char *b, const char *name,
			      const void *data, size_t n)
{
	const char *names[] = {name};
	size_t k = n < 4096 ? 4096 : n, sectors = (k + 511) / 512;
	unsigned char *e = b + 1024 + 128;

	ck_assert_uint_le(n, 8 * 512);
	make_cfb(b, names, 1);
	memset(b + 3 * 512, 0, 16 * 512);
	memcpy(b + 3 * 512, data, n);
	for (size_t i = 0; i < sectors; i++) {
		uint32_t next = i + 1 < sectors ? (uint32_t)(i + 3) : 0xfffffffe;

		memcpy(b + 512 + 4 * (i + 2), &next, 4);
	}
	e[116] = 2, e[117] = e[118] = e[119] = 0;
	memcpy(e + 120, &(uint32_t){(uint32_t)k}, 4);
	return (3 + sectors) * 512;
}

/* Append a BIFF record of @p type and @p n bytes of @p data at *@p at. */
static void biff(unsigned char *b, size_t *at, unsigned type, const void *data,
		 size_t n)
{
	b[*at] = (unsigned char)type, b[*at + 1] = (unsigned char)(type >> 8);
	b[*at + 2] = (unsigned char)n, b[*at + 3] = (unsigned char)(n >> 8);
	memcpy(b + *at + 4, data, n);
	*at += 4 + n;
}

/* An .xls's shared strings split across CONTINUE records, 8-bit going on
 * as 16-bit there, with formatting runs and phonetic data skipped; its
 * text cells; a password's FILEPASS record. */
START_TEST(test_extract_xls_records)
{
	static const unsigned char bof[] = {0x00, 0x06, 0x05, 0x00};
	/* SST: 2 strings. "harbour " (8-bit, 2 formatting runs) cut after
	 * "harb"; "light" (8-bit, 4 bytes of phonetic data). */
	static const unsigned char sst[] = {
		2, 0, 0, 0, 2, 0, 0, 0, 8, 0, 0x08, 2, 0, 'h', 'a', 'r', 'b'};
	/* "our " as UTF-16, the runs, then the second string. */
	static const unsigned char cont[] = {
		1,   'o', 0, 'u', 0, 'r', 0, ' ', 0, 0,   0,   1,  0,   4,
		0,   2,	  0, 5,	  0, 0x04, 4, 0, 0, 0, 'l', 'i', 'g', 'h', 't',
		1,   2,	  3, 4};
	/* LABEL: row, column, format; "keeper\xe9" 8-bit (Latin-1). */
	static const unsigned char label[] = {0, 0, 0, 0, 0, 0, 7, 0, 0,
					      'k', 'e', 'e', 'p', 'e', 'r', 0xe9};
	unsigned char w[1024], b[20 * 512];
	size_t at = 0, n;

	biff(w, &at, 0x0809, bof, sizeof(bof));
	biff(w, &at, 0x00fc, sst, sizeof(sst));
	biff(w, &at, 0x003c, cont, sizeof(cont));
	biff(w, &at, 0x0204, label, sizeof(label));
	n = make_cfb_stream(b, "Workbook", w, at);
	ck_assert_int_eq(im_extract_sniff((const char *)b, n), IM_FMT_XLS);
	extract_n((const char *)b, n);
	ck_assert_msg(res.format == IM_FMT_XLS && !res.fail &&
			      !strcmp(text, "harbour \nlight\nkeeper\xc3\xa9\n"),
		      "%s %s: [%s]", im_format_name(res.format),
		      im_extract_fail_name(res.fail), text);
	/* A table that counts more strings than it holds ends with its
	 * records. */
	{
		unsigned char more[sizeof(sst)];

		memcpy(more, sst, sizeof(sst));
		more[4] = 9;
		at = 0;
		biff(w, &at, 0x0809, bof, sizeof(bof));
		biff(w, &at, 0x00fc, more, sizeof(more));
		biff(w, &at, 0x003c, cont, sizeof(cont));
		n = make_cfb_stream(b, "Workbook", w, at);
		extract_n((const char *)b, n);
		ck_assert_msg(!res.fail && !strcmp(text, "harbour \nlight\n"),
			      "%s: [%s]", im_extract_fail_name(res.fail),
			      text);
	}
	/* Cut inside the second string's characters: corrupt. */
	at = 0;
	biff(w, &at, 0x0809, bof, sizeof(bof));
	biff(w, &at, 0x00fc, sst, sizeof(sst));
	biff(w, &at, 0x003c, cont, 26);
	n = make_cfb_stream(b, "Workbook", w, at);
	extract_n((const char *)b, n);
	ck_assert_str_eq(im_extract_fail_name(res.fail), "corrupt");
	at = 0;
	biff(w, &at, 0x0809, bof, sizeof(bof));
	biff(w, &at, 0x002f, "\1\0\1\0\1\0", 6);
	n = make_cfb_stream(b, "Workbook", w, at);
	extract_n((const char *)b, n);
	ck_assert_str_eq(im_extract_fail_name(res.fail), "encrypted");
	/* Excel 95's BIFF5 stays binary, for a filter to read. */
	w[4] = 0x00, w[5] = 0x05;
	n = make_cfb_stream(b, "Workbook", w, at);
	ck_assert_int_eq(im_extract_sniff((const char *)b, n), IM_FMT_BINARY);
}
END_TEST

/* An .xls's value cells, as xlsx reads its <v>: a number (NUMBER, RK as
 * an integer and as hundredths, MULRK, a formula's numeric result) is a
 * term after IM_EXTRACT_NUMBERS, with xlsx's 15 digits; a boolean
 * (BOOLERR, not an error) is its word, and a formula's string result (the
 * STRING record after it) is text. */
START_TEST(test_extract_xls_value_cells)
{
	static const unsigned char bof[] = {0x00, 0x06, 0x05, 0x00};
	unsigned char w[1024], b[20 * 512], rec[32];
	size_t at = 0, n;
	double v;

	biff(w, &at, 0x0809, bof, sizeof(bof));
	memset(rec, 0, sizeof(rec));
	v = 2912.49;
	memcpy(rec + 6, &v, 8);
	biff(w, &at, 0x0203, rec, 14);			   /* NUMBER */
	memcpy(rec + 6, &(uint32_t){42u << 2 | 2}, 4);	   /* RK 42 */
	biff(w, &at, 0x027e, rec, 10);
	memcpy(rec + 6, &(uint32_t){1234u << 2 | 3}, 4); /* RK 12.34 */
	biff(w, &at, 0x027e, rec, 10);
	memset(rec, 0, sizeof(rec));	    /* MULRK: 7 and 8 */
	memcpy(rec + 6, &(uint32_t){7u << 2 | 2}, 4);
	memcpy(rec + 12, &(uint32_t){8u << 2 | 2}, 4);
	biff(w, &at, 0x00bd, rec, 18);
	memset(rec, 0, sizeof(rec));
	v = 0.1;
	memcpy(rec + 6, &v, 8);
	biff(w, &at, 0x0006, rec, 22); /* FORMULA, numeric */
	memset(rec, 0, sizeof(rec));
	rec[12] = rec[13] = 0xff;
	biff(w, &at, 0x0006, rec, 22); /* FORMULA, a string follows */
	biff(w, &at, 0x0207, "\5\0\0total", 8);
	biff(w, &at, 0x0205, "\0\0\0\0\0\0\1\0", 8); /* BOOLERR TRUE */
	biff(w, &at, 0x0205, "\0\0\0\0\0\0\7\1", 8); /* an error */
	n = make_cfb_stream(b, "Workbook", w, at);
	extract_n((const char *)b, n);
	ck_assert_msg(res.format == IM_FMT_XLS && !res.fail &&
			      !strcmp(text, "total\nTRUE\n\x1e\n2912.49\n42\n"
					    "12.34\n7\n8\n0.1\n"),
		      "%s %s: [%s]", im_format_name(res.format),
		      im_extract_fail_name(res.fail), text);
}
END_TEST

/* Append a PowerPoint record header at *@p at; @p ver 0xf: a container. */
static void ppt(unsigned char *b, size_t *at, unsigned ver, unsigned inst,
		unsigned type, uint32_t n)
{
	uint16_t vi = (uint16_t)(ver | inst << 4), t = (uint16_t)type;

	memcpy(b + *at, &vi, 2);
	memcpy(b + *at + 2, &t, 2);
	memcpy(b + *at + 4, &n, 4);
	*at += 8;
}

/* A .ppt's text atoms (UTF-16 and 8-bit) are read but in the masters; a
 * nest of containers deeper than the cap fails; so does an encrypted
 * one. */
START_TEST(test_extract_ppt_records)
{
	unsigned char w[4096], b[20 * 512];
	size_t at = 0, n;

	ppt(w, &at, 0xf, 0, 0x03e8, 8 + 10 + 8 + 7); /* Document */
	ppt(w, &at, 0, 0, 0x0fa0, 10);		     /* TextCharsAtom */
	memcpy(w + at, "c\0a\0f\0\xe9\0\r\0", 10);
	at += 10;
	ppt(w, &at, 0, 0, 0x0fa8, 7); /* TextBytesAtom */
	memcpy(w + at, "seagull", 7);
	at += 7;
	ppt(w, &at, 0xf, 0, 0x03f8, 8 + 6); /* MainMaster */
	ppt(w, &at, 0, 0, 0x0fa8, 6);
	memcpy(w + at, "Master", 6);
	at += 6;
	n = make_cfb_stream(b, "PowerPoint Document", w, at);
	ck_assert_int_eq(im_extract_sniff((const char *)b, n), IM_FMT_PPT);
	extract_n((const char *)b, n);
	ck_assert_msg(res.format == IM_FMT_PPT && !res.fail &&
			      !strcmp(text, "caf\xc3\xa9\n\nseagull\n"),
		      "%s %s: [%s]", im_format_name(res.format),
		      im_extract_fail_name(res.fail), text);
	/* A "container" of opaque data (PowerPoint 2007's round-trip
	 * blobs) is passed over; what follows it is read. */
	at = 0;
	ppt(w, &at, 0xf, 0, 0x03e8, 8 + 12 + 8 + 4);
	ppt(w, &at, 0xf, 0, 0x0428, 12);
	memcpy(w + at, "PK\3\4\x14\0\0\0\0\0\xff\xff", 12);
	at += 12;
	ppt(w, &at, 0, 0, 0x0fa8, 4);
	memcpy(w + at, "tide", 4);
	at += 4;
	n = make_cfb_stream(b, "PowerPoint Document", w, at);
	extract_n((const char *)b, n);
	ck_assert_msg(!res.fail && !strcmp(text, "tide\n"), "%s: [%s]",
		      im_extract_fail_name(res.fail), text);
	at = 0;
	for (uint32_t i = 0; i < 300; i++)
		ppt(w, &at, 0xf, 0, 0x03e8, 8 * (299 - i));
	n = make_cfb_stream(b, "PowerPoint Document", w, at);
	extract_n((const char *)b, n);
	ck_assert_str_eq(im_extract_fail_name(res.fail), "nesting");
	at = 0;
	ppt(w, &at, 0, 0, 0x0fa8, 1u << 30); /* longer than the stream */
	n = make_cfb_stream(b, "PowerPoint Document", w, at);
	extract_n((const char *)b, n);
	ck_assert_str_eq(im_extract_fail_name(res.fail), "corrupt");
	at = 0;
	ppt(w, &at, 0xf, 0, 0x2f14, 0);
	n = make_cfb_stream(b, "PowerPoint Document", w, at);
	extract_n((const char *)b, n);
	ck_assert_str_eq(im_extract_fail_name(res.fail), "encrypted");
}
END_TEST

/* PDF repairs: ligatures and words hyphenated at a line end. */
START_TEST(test_extract_pdf_repairs)
{
	struct im_buf b = {0};
	struct im_extract_opts o;
	static const char content[] = "BT /F1 12 Tf 20 150 Td (an exam-) Tj 0 "
				      "-20 Td (ple of Jean-) Tj "
				      "0 -20 Td (Paul) Tj "
				      "0 -20 Td (OF MER-) Tj "
				      "0 -20 Td (CHANTABILITY X-) Tj "
				      "0 -20 Td (RAY) Tj ET";
	char pdf[1024];
	int n = snprintf(
		pdf, sizeof(pdf),
		"%%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n"
		"2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj\n"
		"3 0 obj<</Type/Page/Parent 2 0 R/MediaBox[0 0 300 200]"
		"/Resources<</Font<</F1 4 0 R>>>>/Contents 5 0 R>>endobj\n"
		"4 0 obj<</Type/Font/Subtype/Type1/BaseFont/Helvetica>>endobj\n"
		"5 0 obj<</Length %zu>>stream\n%s\nendstream endobj\n"
		"trailer<</Root 1 0 R>>\n%%%%EOF\n",
		sizeof(content) - 1, content);

	im_extract_opts_init(&o);
	ck_assert_int_eq(im_pdf_text(pdf, (size_t)n, &o, &b), 0);
	ck_assert_msg(b.p && b.len && memmem(b.p, b.len, "an example of Jean-", 19),
		      "hyphenation joined before a lower-case letter only: "
		      "%.*s",
		      (int)b.len, b.p);
	ck_assert_msg(memmem(b.p, b.len, "Jean-\nPaul", 10),
		      "a capital keeps the hyphen: [%.*s]", (int)b.len, b.p);
	ck_assert_msg(memmem(b.p, b.len, "OF MERCHANTABILITY X-\nRAY", 25),
		      "a word of capitals joined, one capital kept: [%.*s]",
		      (int)b.len, b.p);
	im_buf_release(&b);
}
END_TEST

/* Each hostile file fails with its reason, in a helper, and the next file
 * is extracted by a fresh helper when the last one had to die. */
static const struct {
	const char *name;
	enum im_extract_fail why;
} hostile[] = {
	{"bomb.docx", IM_XF_EXPANSION},	   {"bomb.txt.bz2", IM_XF_EXPANSION},
	{"entities.docx", IM_XF_ENTITIES}, {"nested.docx", IM_XF_NESTING},
	{"spine.epub", IM_XF_OUTPUT},
	{"truncated.pdf", IM_XF_CORRUPT},  {"garbage.pdf", IM_XF_CORRUPT},
	{"loop.doc", IM_XF_CORRUPT},	   {"huge.doc", IM_XF_CORRUPT},
	{"truncated.doc", IM_XF_CORRUPT},  {"encrypted.doc", IM_XF_ENCRYPTED},
};

START_TEST(test_extract_hostile)
{
	extract_fixture(hostile[_i].name);
	ck_assert_msg(res.fail == hostile[_i].why, "%s failed with %s, want %s",
		      hostile[_i].name, im_extract_fail_name(res.fail),
		      im_extract_fail_name(hostile[_i].why));
	ck_assert_uint_eq(res.len, 0);
	extract_fixture("cc0.docx");
	ck_assert_msg(!res.fail, "the helper serves the next file");
	assert_text_has("Statement of Purpose");
	ck_assert_uint_eq(im_extractor_spawned(xtor), 1);
}
END_TEST

/* The limits of a helper: a deadline, an address space, and a helper that
 * died is replaced. */
START_TEST(test_extract_helper_limits)
{
	struct im_extract_opts o;

	im_extractor_free(xtor);
	im_extract_opts_init(&o);
	/* 32 bzip2 streams of 1 GiB of zeros each: unpacking them takes
	 * minutes on any machine, and neither the size nor the address space
	 * may stop it first (a fast machine reached 512 MiB within 2 s). */
	o.deadline_ms = 2000;
	o.max_unpacked = (size_t)64 << 30;
	o.mem_bytes = (uint64_t)64 << 30;
	ck_assert_int_eq(im_extractor_new(&o, &xtor), 0);
	{
		size_t len, i;
		char *one = read_fixture("bomb.txt.bz2", &len);
		char *many = malloc(32 * len);

		ck_assert_ptr_nonnull(many);
		for (i = 0; i < 32; i++)
			memcpy(many + i * len, one, len);
		extract_n(many, 32 * len);
		free(many);
		free(one);
	}
	ck_assert_str_eq(im_extract_fail_name(res.fail), "timeout");
	extract_fixture("cc0.txt.gz");
	ck_assert_msg(!res.fail && im_extractor_spawned(xtor) == 2,
		      "a helper killed for its time is replaced (%s, %u)",
		      im_extract_fail_name(res.fail),
		      im_extractor_spawned(xtor));

	im_extractor_free(xtor);
	o.deadline_ms = 240000; /* the address space is under test now */
	o.mem_bytes = 16 << 20; /* less than unpacking the bomb needs */
	o.max_unpacked = (size_t)1 << 30;
	ck_assert_int_eq(im_extractor_new(&o, &xtor), 0);
	extract_fixture("bomb.docx");
	ck_assert_msg(res.fail == IM_XF_MEMORY || res.fail == IM_XF_CRASH,
		      "out of address space: %s",
		      im_extract_fail_name(res.fail));
	o.max_text = 1000;
	im_extractor_free(xtor);
	ck_assert_int_eq(im_extractor_new(&o, &xtor), 0);
	extract_fixture("cc0.docx");
	ck_assert_str_eq(im_extract_fail_name(res.fail), "output");
}
END_TEST

/* In a child: extract a .gz with room for one more descriptor, not the
 * two of a socket pair; 0 when the helper could not start and the
 * extractor says so. */
static int start_fails_for_want_of_descriptors(void)
{
	static const char why[] = "socketpair: Too many open files";
	struct rlimit rl;
	size_t len;
	char *gz = read_fixture("cc0.txt.gz", &len);
	const char *said;

	/* A helper first: the libraries it needs are open from now on. */
	extract_fixture("cc0.txt.gz");
	if (res.fail)
		return 2;
	im_extractor_free(xtor);
	ck_assert_int_eq(im_extractor_new(&opts_for_start, &xtor), 0);
	/* Numbers from the lowest free one up are refused but that one. */
	int lowest = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (lowest < 0 || close(lowest) || getrlimit(RLIMIT_NOFILE, &rl))
		return 3;
	rl.rlim_cur = (rlim_t)lowest + 1;
	if (setrlimit(RLIMIT_NOFILE, &rl))
		return 3;
	extract_n(gz, len);
	free(gz);
	said = im_extractor_sandbox_error(xtor);
	if (res.fail != IM_XF_SANDBOX || !said || !strstr(said, why)) {
		fprintf(stderr, "want %s, got %s, \"%s\"\n", why,
			im_extract_fail_name(res.fail), said ? said : "");
		return 1;
	}
	/* And a start that works clears it. */
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	extract_fixture("cc0.txt.gz");
	return res.fail || im_extractor_sandbox_error(xtor) ? 4 : 0;
}

/*
 * A helper that cannot start fails its file "sandbox" and the extractor says
 * why (a test's failure message, or a user's error, names the step); the
 * next start that works clears it. In a child: the descriptor limit.
 */
START_TEST(test_extract_helper_start_failure_says_why)
{
	int status;
	pid_t pid;

	/* Valgrind keeps the descriptor limit itself, for the calls it
	 * wraps, and lets a socket pair past it. */
	if (RUNNING_ON_VALGRIND) {
		fprintf(stderr, "test_extract_helper_start_failure_says_why: "
				"skipped under valgrind\n");
		return;
	}
	im_extract_opts_init(&opts_for_start);
	opts_for_start.cpu_seconds = 120;
	opts_for_start.deadline_ms = 240000;
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(start_fails_for_want_of_descriptors());
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "no reason for a failed start (status %d)", status);
}
END_TEST

/* The same extractors without the sandbox (what fuzzing runs). */
START_TEST(test_extract_unsandboxed)
{
	struct im_extract_opts o;

	im_extractor_free(xtor);
	im_extract_opts_init(&o);
	o.sandbox = false;
	ck_assert_int_eq(im_extractor_new(&o, &xtor), 0);
	extract_fixture("cc0.odt");
	assert_text_has("Statement of Purpose");
	extract_fixture("entities.docx");
	ck_assert_int_eq(res.fail, IM_XF_ENTITIES);
	ck_assert_uint_eq(im_extractor_spawned(xtor), 0);
}
END_TEST

START_TEST(test_extract_filters)
{
	static const char *const filters[] = {
		"dat:tr a-z A-Z",
		"bad:exit 3",
		"slow:sleep 60",
		NULL,
	};
	struct im_extract_opts o;

	ck_assert_int_eq(im_extract_filter_check("doc:antiword -"), 0);
	ck_assert_int_eq(im_extract_filter_check("doc"), -EINVAL);
	ck_assert_int_eq(im_extract_filter_check(":cat"), -EINVAL);
	ck_assert_int_eq(im_extract_filter_check("a/b:cat"), -EINVAL);
	ck_assert_int_eq(im_extract_filter_check("doc:"), -EINVAL);
	im_extractor_free(xtor);
	im_extract_opts_init(&o);
	o.filters = filters;
	o.deadline_ms = 5000; /* `sleep 60` passes it; `tr` under load not */
	ck_assert_int_eq(im_extractor_new(&o, &xtor), 0);

	free(copy);
	copy = malloc(14);
	ck_assert_ptr_nonnull(copy);
	memcpy(copy, "x\0legacy words", 14);
	ck_assert_int_eq(im_extract(xtor, "dir/old.DAT", copy, 14, &res), 0);
	keep_text();
	ck_assert_int_eq(res.format, IM_FMT_FILTER);
	ck_assert_msg(!res.fail && !strcmp(text + 2, "LEGACY WORDS"),
		      "the filter's output (%s): %.80s",
		      im_extract_fail_name(res.fail),
		      res.len > 2 ? text + 2 : "");
	ck_assert_int_eq(im_extract(xtor, "x.bad", copy, 14, &res), 0);
	ck_assert_int_eq(res.fail, IM_XF_FILTER);
	/* A filter that exits without reading an input larger than a pipe
	 * holds: the write fails with EPIPE, and no SIGPIPE kills us. */
	{
		size_t n = (size_t)1 << 20;
		char *big = malloc(n);

		ck_assert_ptr_nonnull(big);
		memset(big, 'a', n);
		big[1] = '\0';
		ck_assert_int_eq(im_extract(xtor, "big.bad", big, n, &res), 0);
		ck_assert_int_eq(res.fail, IM_XF_FILTER);
		free(big);
	}
	ck_assert_int_eq(im_extract(xtor, "x.slow", copy, 14, &res), 0);
	ck_assert_int_eq(res.fail, IM_XF_TIMEOUT);
	ck_assert_int_eq(im_extract(xtor, "x.other", copy, 14, &res), 0);
	ck_assert_msg(res.format == IM_FMT_BINARY && !res.fail,
		      "no filter for the name: binary");
	ck_assert_int_eq(im_extract(xtor, "x.dat", "plain text", 10, &res), 0);
	ck_assert_msg(res.format == IM_FMT_TEXT,
		      "filters are only for what no extractor reads");
}
END_TEST

/* ---- RTF ----------------------------------------------------------------- */

/* Extract the RTF document s (a C string) and check that its text is @p want
 * exactly. */
static void rtf_is(const char *s, const char *want)
{
	extract_n(s, strlen(s));
	ck_assert_msg(res.format == IM_FMT_RTF && !res.fail,
		      "%s: format %s, failure %s", s, im_format_name(res.format),
		      im_extract_fail_name(res.fail));
	ck_assert_msg(!strcmp(text, want), "%s\n gave \"%s\"\n want \"%s\"", s,
		      text, want);
}

START_TEST(test_extract_rtf_sniff)
{
	static const char bin[] = "{\\rtf1 a\\bin2 \0\0b}";

	ck_assert_int_eq(im_extract_sniff("{\\rtf1 x}", 9), IM_FMT_RTF);
	ck_assert_int_eq(im_extract_sniff("\xef\xbb\xbf \r\n{\\rtf1}", 13),
			 IM_FMT_RTF);
	/* \binN data may hold NULs: RTF is told before binary. */
	ck_assert_int_eq(im_extract_sniff(bin, sizeof(bin) - 1), IM_FMT_RTF);
	extract_n(bin, sizeof(bin) - 1);
	ck_assert_str_eq(text, "ab");
	ck_assert_int_eq(im_extract_sniff("text {\\rtf1 x}", 14), IM_FMT_TEXT);
	ck_assert_int_eq(im_extract_sniff("{\\rtx1 x}", 9), IM_FMT_TEXT);
	ck_assert_int_eq(im_extract_sniff("{\\rt", 4), IM_FMT_TEXT);
	ck_assert_str_eq(im_format_name(IM_FMT_RTF), "rtf");
}
END_TEST

START_TEST(test_extract_rtf_control_words)
{
	rtf_is("{\\rtf1\\ansi\\deff0{\\fonttbl{\\f0\\fswiss Helvetica;}}"
	       "{\\colortbl;\\red255\\green0\\blue0;}"
	       "{\\stylesheet{\\s1 heading 1;}}{\\info{\\title T}{\\author A}}"
	       "\\pard\\plain\\f0\\fs24 Hello\\par world\\tab again\\line "
	       "end \\b bold\\b0  word\\cell x\\row\n"
	       "split\r\nline\\-less {\\i in}group\\~\\{\\}\\\\}",
	       "Hello\nworld again\nend bold word x\nsplitlineless ingroup "
	       "{}\\");
	rtf_is("{\\rtf1 \\ldblquote q\\rdblquote  it\\rquote s\\emdash ok}",
	       "\xe2\x80\x9cq\xe2\x80\x9d it\xe2\x80\x99s\xe2\x80\x94ok");
	/* A number's sign, its digits and one space belong to the word; a
	 * number past any range saturates. */
	rtf_is("{\\rtf1\\fi-360 a\\li99999999999999999999999  b\\sa0\tc}",
	       "a b c");
}
END_TEST

START_TEST(test_extract_rtf_code_pages)
{
	rtf_is("{\\rtf1\\ansi \\'93caf\\'e9\\'94 \\'80}",
	       "\xe2\x80\x9c"
	       "caf\xc3\xa9\xe2\x80\x9d \xe2\x82\xac");
	rtf_is("{\\rtf1\\ansi\\ansicpg1251 \\'cf\\'f0\\'e8\\'e2\\'e5\\'f2}",
	       "\xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82");
	/* A double-byte code page: two \'hh (or one and a literal trail
	 * byte) are one character; a byte it cannot read is U+FFFD. */
	rtf_is("{\\rtf1\\ansi\\ansicpg932 \\'82\\'a0\\'83e x\\'ff}",
	       "\xe3\x81\x82\xe3\x83\x86 x\xef\xbf\xbd");
	rtf_is("{\\rtf1\\ansi\\ansicpg999999 caf\\'e9}", "caf\xc3\xa9");
	rtf_is("{\\rtf1\\ansi\\ansicpg65001 caf\\'c3\\'a9}", "caf\xc3\xa9");
	rtf_is("{\\rtf1 bad\\'4 \\'zz hex}", "bad4 zz hex");
}
END_TEST

START_TEST(test_extract_rtf_unicode)
{
	rtf_is("{\\rtf1\\uc1\\u1055?\\u1088?\\u-4064?}",
	       "\xd0\x9f\xd1\x80\xef\x80\xa0");
	rtf_is("{\\rtf1{\\uc2\\u12354\\'82\\'a0}x}", "\xe3\x81\x82x");
	/* \uc is the group's: the parent's count comes back at '}'. */
	rtf_is("{\\rtf1{\\uc0\\u233 }\\u233 ee}", "\xc3\xa9\xc3\xa9"
						 "e");
	rtf_is("{\\rtf1\\u-10179?\\u-8704?!}", "\xf0\x9f\x98\x80!");
	rtf_is("{\\rtf1\\u55357?x\\u56832?y}",
	       "\xef\xbf\xbdx\xef\xbf\xbdy");
}
END_TEST

START_TEST(test_extract_rtf_destinations)
{
	rtf_is("{\\rtf1{\\*\\unknown secret}{\\header head}{\\footerr foot}"
	       "{\\field{\\*\\fldinst HYPERLINK \"http://x\"}{\\fldrslt link}}"
	       "{\\*\\bkmkstart b1}{\\pict\\pngblip 89504e47}"
	       "{\\object{\\objdata 0102}}{\\*\\themedata 504b}"
	       "{\\*\\datastore 0105}{\\*\\latentstyles\\lsdstimax376 x}"
	       "{\\listtext 1.\\tab}{\\deleted gone} kept \\v hidden\\v0 shown"
	       " \\deleted old\\plain new{\\*\\generator Writer;}}",
	       "link kept shown new");
	/* \binN skips N raw bytes, braces and backslashes among them, and
	 * at most what is left. */
	rtf_is("{\\rtf1 a{\\pict\\bin4 }}\\{b}c}", "ac");
	rtf_is("{\\rtf1 a\\bin3 {\\}z}", "az");
	rtf_is("{\\rtf1 a\\bin99999999999999 zzz", "a");
	rtf_is("{\\rtf1 a\\bin-5 z}", "az");
	/* A text box is text, once: its shape's properties and its result
	 * for older readers are not. */
	rtf_is("{\\rtf1 a {\\shp{\\*\\shpinst\\shpleft0{\\sp{\\sn shapeType}"
	       "{\\sv 202}}{\\shptxt boxed\\par}}{\\shprslt{\\*\\do\\dobxpage"
	       "{\\*\\dptxbxtext boxed}} boxed again}} b}",
	       "a boxed\n b");
	/* \\shptxt outside a shape stays what its group was. */
	rtf_is("{\\rtf1 a{\\*\\unknown{\\shptxt no}} b}", "a b");
}
END_TEST

START_TEST(test_extract_rtf_hostile)
{
	char deep[4096];
	size_t n = 0;

	/* Nesting deeper than the cap fails the file; up to it is text. */
	n += (size_t)sprintf(deep, "{\\rtf1 ");
	for (int i = 1; i < IM_EXTRACT_XML_DEPTH; i++)
		deep[n++] = '{';
	n += (size_t)sprintf(deep + n, "deep");
	for (int i = 1; i < IM_EXTRACT_XML_DEPTH; i++)
		deep[n++] = '}';
	deep[n] = '\0';
	rtf_is(deep, "deep");
	memmove(deep + 8, deep + 7, n - 7 + 1);
	deep[7] = '{';
	extract_n(deep, n + 1);
	ck_assert_int_eq(res.format, IM_FMT_RTF);
	ck_assert_int_eq(res.fail, IM_XF_NESTING);
	ck_assert_uint_eq(res.len, 0);

	/* Cut anywhere: no read past the end, the text up to the cut. */
	rtf_is("{\\rtf1 abc\\'", "abc");
	rtf_is("{\\rtf1 abc\\'4", "abc4");
	rtf_is("{\\rtf1 abc\\", "abc");
	rtf_is("{\\rtf1 abc\\u", "abc");
	rtf_is("{\\rtf1 abc\\u-", "abc-");
	rtf_is("{\\rtf1 abc\\u55357", "abc\xef\xbf\xbd");
	rtf_is("{\\rtf1 abc{\\*", "abc");
	rtf_is("{\\rtf1 abc}}}} def", "abc def");
}
END_TEST

/* Text past max_text fails as the other extractors' does. */
START_TEST(test_extract_rtf_output_cap)
{
	struct im_extract_opts o;
	struct im_extractor *x;
	struct im_extract_result r;
	char doc[2048];
	size_t n = (size_t)sprintf(doc, "{\\rtf1 ");

	while (n < sizeof(doc) - 16)
		n += (size_t)sprintf(doc + n, "word\\par ");
	im_extract_opts_init(&o);
	o.max_text = 100;
	ck_assert_int_eq(im_extractor_new(&o, &x), 0);
	ck_assert_int_eq(im_extract(x, NULL, doc, n, &r), 0);
	ck_assert_int_eq(r.format, IM_FMT_RTF);
	ck_assert_int_eq(r.fail, IM_XF_OUTPUT);
	ck_assert_uint_eq(r.len, 0);
	im_extractor_free(x);
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
	tcase_add_test(tc, test_extract_deferred_utf8_reads_as_checked);
	tcase_add_test(tc, test_extract_utf8_valid_at_every_offset);
	tcase_add_test(tc, test_extract_sniff_finds_markers_anywhere);
	tcase_add_test(tc, test_extract_sniff_key_value_files_are_text);
	tcase_add_test(tc, test_extract_sniff_mime_and_long_headers_are_mail);
	tcase_add_test(tc, test_extract_key_value_files_keep_their_terms);
	tcase_add_test(tc, test_extract_mail_told_by_header_values);
	tcase_add_test(
		tc, test_extract_html_without_charset_is_cp1252_when_invalid);
	tcase_add_test(tc, test_extract_names_and_binary);
	suite_add_tcase(s, tc);

	tc = tcase_create("rtf");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_extract_rtf_sniff);
	tcase_add_test(tc, test_extract_rtf_control_words);
	tcase_add_test(tc, test_extract_rtf_code_pages);
	tcase_add_test(tc, test_extract_rtf_unicode);
	tcase_add_test(tc, test_extract_rtf_destinations);
	tcase_add_test(tc, test_extract_rtf_hostile);
	tcase_add_test(tc, test_extract_rtf_output_cap);
	suite_add_tcase(s, tc);

	tc = tcase_create("formats");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_extract_sniff_fixtures, 0,
			    sizeof(fixtures) / sizeof(fixtures[0]));
	tcase_add_test(tc, test_extract_same_text_every_format);
	tcase_add_test(tc, test_extract_office_parts);
	tcase_add_test(tc, test_extract_list_numbers);
	tcase_add_test(tc, test_extract_list_labels);
	tcase_add_test(tc, test_extract_list_figures);
	tcase_add_test(tc, test_extract_nested_list_definitions);
	tcase_add_test(tc, test_extract_docx_level_rules);
	tcase_add_test(tc, test_extract_slide_numbers);
	tcase_add_test(tc, test_extract_header_list);
	tcase_add_test(tc, test_extract_outline_headings);
	tcase_add_test(tc, test_extract_sheet_figures);
	tcase_add_test(tc, test_extract_terms_numbers_only_in_sheets);
	tcase_add_test(tc, test_extract_number_terms);
	tcase_add_test(tc, test_extract_number_terms_are_printf);
	tcase_add_test(tc, test_extract_ods_date_terms);
	tcase_add_test(tc, test_extract_pdf_repairs);
	tcase_add_test(tc, test_extract_doc_like_docx);
	tcase_add_test(tc, test_extract_doc_review);
	tcase_add_test(tc, test_extract_cfb_not_doc);
	tcase_add_test(tc, test_extract_doc_limits);
	tcase_add_test(tc, test_extract_epub_spine_blank_page);
	tcase_add_test(tc, test_extract_xls_records);
	tcase_add_test(tc, test_extract_xls_output_cap);
	tcase_add_test(tc, test_extract_xls_value_cells);
	tcase_add_test(tc, test_extract_ppt_records);
	tcase_add_test(tc, test_extract_unsandboxed);
	suite_add_tcase(s, tc);

	tc = tcase_create("sandbox");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_extract_hostile, 0,
			    sizeof(hostile) / sizeof(hostile[0]));
	tcase_add_test(tc, test_extract_helper_limits);
	tcase_add_test(tc, test_extract_helper_start_failure_says_why);
	tcase_add_test(tc, test_extract_filters);
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
