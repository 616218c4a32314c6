/**
 * @file extract.h
 * From the bytes of a file to UTF-8 text: content sniffing and one extractor
 * per format (DESIGN §3.1). This is the only way from bytes to text; the
 * word scanner (text.h) reads what it returns.
 *
 * The format is sniffed from the content, never from the name:
 *   - a compound file (the legacy Office container: D0 CF 11 E0 A1 B1 1A E1)
 *     whose root holds a WordDocument stream of Word 97 or later, a BIFF8
 *     Workbook or a PowerPoint Document stream: DOC, XLS, PPT (our own
 *     readers, msoffice.c and cfb.c); any other compound file is sniffed on
 *     as below (binary, as a rule);
 *   - "%PDF-" in the first 1024 bytes: PDF (poppler);
 *   - a ZIP whose first entry is "mimetype" holding an OpenDocument or EPUB
 *     media type: ODT, ODS, ODP, EPUB; a ZIP holding "[Content_Types].xml"
 *     and word/document.xml, xl/workbook.xml or ppt/presentation.xml: DOCX,
 *     XLSX, PPTX (libarchive for the container, expat for the XML);
 *   - gzip, bzip2 or xz: decompressed (libarchive) and sniffed again, once;
 *     the result carries the inner format with `compressed` set;
 *   - a UTF-16 byte-order mark: text, converted with iconv;
 *   - "{\rtf" at the start (after a UTF-8 byte-order mark and white space,
 *     before the NUL test: \binN data may hold NULs): RTF;
 *   - a NUL byte in the first IM_EXTRACT_SNIFF bytes: binary (no text; the
 *     file only takes part in the exact-copy tier);
 *   - else HTML (a leading doctype or <html>, or markup with <head>/<body>),
 *     e-mail (a leading block of RFC 5322 headers) or plain text. Text that is
 *     not valid UTF-8 is read as windows-1252.
 *
 * Text, HTML, e-mail and RTF are extracted in the calling thread: they are
 * the bulk of a text share (RTF a document share's) and their code is ours,
 * a forward pass with bounded state. Every format that parses an
 * untrusted container (PDF, ZIP, compressed, DOC, XLS, PPT) runs in a sandboxed helper
 * process (sandbox.c): seccomp allowlist, RLIMIT_AS and RLIMIT_CPU, a
 * wall-clock deadline, capped output. A helper that crashes, loops or runs
 * out of memory costs that one file (a failure with its reason) and is
 * replaced on the next file that needs one.
 *
 * Thread-safety: a struct im_extractor is one thread's state (buffers and at
 * most one helper process); create one per thread. im_extract_sniff() and the
 * name functions are reentrant.
 */
#ifndef IM_EXTRACT_H
#define IM_EXTRACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** The first 8 bytes of a compound file (.doc and other legacy Office
 *  files), which sniffing tells apart by its directory: all of the file. */
#define IM_CFB_MAGIC "\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"

/** Bytes looked at to decide that a file is binary. */
#define IM_EXTRACT_SNIFF 4096

/**
 * The version of what a file yields: its sniffed format, its extracted text
 * (or why none) and the words text.h scans from it. Caches and stage files
 * are keyed by it (im_state_key(), im_state_files_key()), so a file whose
 * text a new version reads differently is read again, not left with the
 * old version's signature. Bump it with any such change.
 *   1: ODF leaves out tracked changes and annotations (as docx did).
 *   2: RTF is read as RTF, not as plain text of its control words.
 *   3: RTF text boxes (a shape's \shptxt) are read, as docx's are.
 *   4: a spreadsheet's number cells are terms (IM_EXTRACT_NUMBERS).
 *   5: Word 97-2003 .doc is read (it was binary).
 *   6: Excel and PowerPoint 97-2003 .xls and .ppt are read (binary).
 *   7: a .doc's text boxes are read, its tracked deletions left out.
 *   8: .ppt from the persist directory; Word 6/95 and PowerPoint 95
 *      binary again.
 *   9: an .xls's number cells are terms and its booleans words, as xlsx's;
 *      a formula's string result is text.
 *  10: ODF leaves out note numbers, index templates and alt text (as
 *      docx does).
 *  11: RTF footnotes and endnotes are read (as docx's), "{\*" or not.
 *  12: an ods's dates count from its null date (1904 as in xlsx's
 *      date1904).
 *  13: a PDF's full lines of ideographs or kana run on into the next.
 *  14: hidden text is left out of docx, odt and doc (as of RTF).
 *  15: HTML's <title> is left out (as epub's, and docx's and odt's title).
 *  16: note numbers are left out of LibreOffice's and pandoc's HTML (as
 *      docx's and odt's).
 *  17: LibreOffice's HTML leaves out page headers and footers (as docx, odt
 *      and rtf).
 *  18: an epub's note numbers are left out (pandoc's, as in its html).
 *  19: an office export's generator <meta> is found anywhere in its head
 *      (LibreOffice writes it after a title of any length).
 *  20: in such an export, a link whose address (not class or role) holds
 *      a note mark's name keeps its text.
 *  21: LibreOffice's page header and footer are left out of its HTML
 *      with their title quoted either way or not at all.
 *  22: text hidden by a style (docx's and odt's styles.xml) is left out, as
 *      text formatted hidden is.
 *  23: and so is text a style hides in a doc (its stylesheet).
 *  24: a numbered list's items start with their numbers, as shown (docx
 *      numbering.xml, odt list styles, HTML <ol>): "1. " as a .txt types
 *      it.
 *  25: and so does an odt's numbered heading (its outline style), an
 *      odp's list item and a pptx's numbered paragraph (a:buAutoNum);
 *      docx's w:lvlRestart, w:isLgl and w:lvlOverride/w:lvl are read.
 */
#define IM_EXTRACT_VERSION 25

/**
 * Formats. The values are stored in state files: append only.
 * IM_FMT_BINARY is "no known format": the bytes are not text.
 */
enum im_format {
	IM_FMT_TEXT,
	IM_FMT_HTML,
	IM_FMT_EMAIL,
	IM_FMT_BINARY,
	IM_FMT_PDF,
	IM_FMT_DOCX,
	IM_FMT_XLSX,
	IM_FMT_PPTX,
	IM_FMT_ODT,
	IM_FMT_ODS,
	IM_FMT_ODP,
	IM_FMT_EPUB,
	IM_FMT_FILTER,	   /**< text from a user's external filter */
	IM_FMT_COMPRESSED, /**< sniffing only: gzip, bzip2 or xz */
	IM_FMT_RTF,
	IM_FMT_DOC, /**< Word 97-2003, in a compound file */
	IM_FMT_XLS, /**< Excel 97-2003 */
	IM_FMT_PPT, /**< PowerPoint 97-2003 */
	IM_FMT_COUNT
};

/** Why extraction failed. Stored in state files: append only. */
enum im_extract_fail {
	IM_XF_NONE,
	IM_XF_CORRUPT,	 /**< the container, XML or PDF does not parse */
	IM_XF_ENCRYPTED, /**< password-protected */
	IM_XF_EXPANSION, /**< unpacks to more than max_unpacked (zip bomb) */
	IM_XF_ENTITIES,	 /**< XML declares entities (expansion is refused) */
	IM_XF_NESTING,	 /**< XML or RTF nested deeper than
			      IM_EXTRACT_XML_DEPTH */
	IM_XF_OUTPUT,	 /**< more than max_text bytes of text */
	IM_XF_MEMORY,	 /**< the helper ran out of its address space */
	IM_XF_CPU,	 /**< the helper used up its CPU time */
	IM_XF_TIMEOUT,	 /**< the wall-clock deadline passed */
	IM_XF_CRASH,	 /**< the helper died of a signal */
	IM_XF_SANDBOX,	 /**< no helper could be started */
	IM_XF_FILTER,	 /**< the external filter exited non-zero */
	IM_XF_LIBRARY,	 /**< poppler or libarchive cannot be loaded */
	IM_XF_COUNT
};

/** XML elements (and RTF groups) nested deeper than this fail with
 *  IM_XF_NESTING. */
#define IM_EXTRACT_XML_DEPTH 256

/** Short lower-case name of a format ("pdf", "docx", ...), for status keys. */
const char *im_format_name(enum im_format f);
/** Short name of a failure ("corrupt", "zip_bomb", ...), for status keys. */
const char *im_extract_fail_name(enum im_extract_fail f);

/**
 * The format of @p buf / @p len from its content alone (see the top of this
 * file). Never returns IM_FMT_FILTER. @p buf may be NULL when @p len is 0
 * (empty is text).
 */
enum im_format im_extract_sniff(const char *buf, size_t len);

/* ---- Options ------------------------------------------------------------ */

/** Limits of one extraction, in the helper. */
struct im_extract_opts {
	/** Address space a helper may add to what it inherited; 1 GiB. */
	uint64_t mem_bytes;
	/** CPU seconds a file may use in its helper; 10. */
	unsigned cpu_seconds;
	/** Wall-clock milliseconds from request to reply; 30000. */
	unsigned deadline_ms;
	/** Text longer than this fails with IM_XF_OUTPUT; 16 MiB. */
	size_t max_text;
	/** Bytes a container may unpack to; 128 MiB by default. */
	size_t max_unpacked;
	/** Run container formats in helpers; true. false runs them in the
	 *  calling thread (fuzzing, tests under valgrind): only for trusted
	 *  input. */
	bool sandbox;
	/**
	 * External filters, borrowed: NULL-terminated "EXT:COMMAND" strings.
	 * A file whose content sniffs as binary and whose name ends in ".EXT"
	 * (case-insensitive) is piped into `/bin/sh -c COMMAND` in a helper
	 * (same limits, no seccomp: the command execs) and its stdout is the
	 * text. NULL for none.
	 */
	const char *const *filters;
	/**
	 * Leave plain text that is windows-1252 if it is not UTF-8 unchecked
	 * (im_extract_result.unchecked): im_extract_terms() and
	 * im_extract_figures() then read it as it is, and convert and read it
	 * again only if it was not UTF-8, which the word scanner finds as it
	 * reads (text.h, im_terms.invalid_utf8) instead of a pass of its own
	 * over the bytes. For a caller that reads results only through those
	 * two; false by default.
	 */
	bool defer_utf8;
};

/** Fill @p o with the defaults. */
void im_extract_opts_init(struct im_extract_opts *o);

/**
 * The COMMAND of the filter among @p filters (NULL-terminated "EXT:COMMAND"
 * strings, or NULL) that applies to a file named @p name (its extension,
 * case-insensitive), or NULL.
 */
const char *im_extract_filter_for(const char *const *filters, const char *name);

/**
 * Check one "EXT:COMMAND" filter specification.
 * @return 0 or -EINVAL (no ':', empty extension or command, '/' in EXT).
 */
int im_extract_filter_check(const char *spec);

/* ---- Extracting ---------------------------------------------------------- */

struct im_extractor;

/**
 * One thread's extractor. Copies @p o (NULL: defaults); the filter strings
 * stay borrowed and must outlive the extractor. No helper is started until a
 * file needs one. The caller frees with im_extractor_free(), which ends the
 * helper.
 *
 * @return 0 or -ENOMEM.
 */
int im_extractor_new(const struct im_extract_opts *o,
		     struct im_extractor **out);
void im_extractor_free(struct im_extractor *x);

/** What one extraction gave. */
struct im_extract_result {
	enum im_format format;	   /**< IM_FMT_COMPRESSED only when
				        unpacking failed */
	enum im_extract_fail fail; /**< IM_XF_NONE when text was extracted */
	bool compressed;	   /**< read through gzip, bzip2 or xz */
	/** UTF-8 text (invalid sequences may remain; the word scanner skips
	 *  them), not NUL-terminated. Points into the caller's buffer (plain
	 *  UTF-8 text) or into the extractor; valid until the next call on the
	 *  extractor or until the caller's buffer changes. NULL when len is 0. */
	const char *text;
	size_t len;
	/** With im_extract_opts.defer_utf8: text is a plain text's bytes,
	 *  windows-1252 if they are not UTF-8, for im_extract_terms() and
	 *  im_extract_figures() to read so. */
	bool unchecked;
	/* Private: the extractor that made it, whose buffer they convert
	 * an unchecked text into. */
	struct im_extractor *x;
};

/**
 * Sniff and extract the document @p buf / @p len. @p name (may be NULL)
 * is used only to choose an external filter for a binary file.
 *
 * @return 0 (see r->fail: a hostile or broken file is a failure, not an
 *         error), or -ENOMEM when the calling process itself ran out.
 */
int im_extract(struct im_extractor *x, const char *name, const char *buf,
	       size_t len, struct im_extract_result *r);

/**
 * The same for a format already known (tests, fuzzing): no sniffing, and
 * IM_FMT_BINARY gives no text.
 */
int im_extract_as(struct im_extractor *x, enum im_format f, const char *buf,
		  size_t len, struct im_extract_result *r);

/**
 * In the text of a spreadsheet (xlsx, ods, xls), a line holding only this byte
 * ends the cells' words; each line after it is one number cell's value
 * rounded to 15 significant digits and 20 decimal places, in printf's
 * "%.15g" notation ("1234.5", "0.1", "-2e-07"; a date or time as days since
 * 1899-12-30). XML text cannot hold the byte, so no cell's text can end the
 * words early.
 */
#define IM_EXTRACT_NUMBERS '\x1e'

struct im_params;
struct im_terms;

/**
 * The unique terms of what im_extract() gave @p r (text.h's words of its
 * text), into @p out. In a spreadsheet each number cell is a term as well,
 * whatever its length and digits: there the figures are the content, and
 * the word rules would drop nearly all of them, so two sheets with the same
 * labels and other figures would be one text. out->numbers (text.h) holds
 * the text's figures and each number cell, once per cell.
 *
 * @return 0 or -ENOMEM, as im_text_terms().
 */
int im_extract_terms(const struct im_extract_result *r,
		     const struct im_params *p, struct im_terms *out);

/**
 * Tell @p fn each figure of what im_extract() gave @p r, in reading order:
 * those im_extract_terms() sums into out->numbers, its text's words holding
 * a digit (im_text_figures()) and then each number cell of a spreadsheet.
 * @p fn is an im_figure_fn (text.h).
 *
 * @return 0, the first nonzero value @p fn returned, or -ENOMEM (out of
 *         memory converting an unchecked text).
 */
int im_extract_figures(const struct im_extract_result *r,
		       int (*fn)(const char *s, size_t n, void *arg),
		       void *arg);

/** Helpers started by this extractor since it was made (tests). */
unsigned im_extractor_spawned(const struct im_extractor *x);

/**
 * Why this extractor's last helper failed to start (the step and its
 * errno, a timeout, or how it ended), when a file failed IM_XF_SANDBOX; NULL
 * when none has failed since one started. Owned by @p x, valid until its
 * next extraction.
 */
const char *im_extractor_sandbox_error(const struct im_extractor *x);

#endif
