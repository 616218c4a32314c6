/**
 * @file extract_internal.h
 * Shared between the extractors of core/extract/; not part of the core API
 * (tests/unit/test_extract.c and the fuzz targets include it too).
 */
#ifndef IM_EXTRACT_INTERNAL_H
#define IM_EXTRACT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "dl.h"
#include "extract.h"
#include "text_internal.h"

/** True when s[0, len) is valid UTF-8 (strict, as im_utf8_decode()). */
bool im_utf8_valid(const char *s, size_t len);

/** Little-endian fields of the binary formats (cfb.c, msoffice.c). */
static inline uint32_t im_le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline uint16_t im_le16(const unsigned char *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

/**
 * A spreadsheet's number terms @p nums (a line each) onto @p out after its
 * words, behind the IM_EXTRACT_NUMBERS line that im_extract_terms() looks
 * for (extract.h); nothing when @p nums is empty. @return 0 or -ENOMEM.
 */
int im_extract_put_numbers(struct im_buf *out, const struct im_buf *nums);

/*
 * Container extractors (pdf.c, zipdoc.c): append the text of a document to
 * @p out. @return 0, an enum im_extract_fail (> 0), or -ENOMEM. They parse
 * hostile input: the caller runs them in a helper unless the sandbox is off.
 */
/**
 * Load poppler (pdf.c) if not done yet; thread-safe, once per process.
 * @return whether it is there. im_pdf_text() calls it itself; sandbox.c
 * calls it before forking a helper, which could not load it.
 */
bool im_pdf_load(void);
/** The same for libarchive (zipdoc.c), which im_zipdoc_text() and
 *  im_unpack() need. */
bool im_archive_load(void);
/** The same for expat (zipdoc.c), which im_zipdoc_text() needs. */
bool im_xml_load(void);

int im_pdf_text(const char *buf, size_t len, const struct im_extract_opts *o,
		struct im_buf *out);
/** docx, xlsx, pptx, odt, ods, odp, epub; -EINVAL for another format. */
int im_zipdoc_text(enum im_format f, const char *buf, size_t len,
		   const struct im_extract_opts *o, struct im_buf *out);
/** Bytes of a number cell's term (zipdoc.c), its NUL included. */
#define IM_NUMBER_TERM_MAX 32
/**
 * The term of the number written @p s / @p n (a decimal, maybe signed,
 * maybe with an exponent, white space around it; as xlsx's <v> and ods's
 * office:value hold it) into @p out: its value rounded half up to 15
 * significant digits and written as printf's "%.15g" writes it in the C
 * locale ("0.10000000000000001" is "0.1", "1E+20" is "1e+20"), whatever
 * the locale. @return its length, or 0 when @p s is not such a number.
 */
size_t im_number_term(const char *s, size_t n, char *out);
/** The same for an ods office:date-value ("2024-01-15", "2024-01-15T12:30:00"):
 *  days since 1899-12-30, as xlsx stores a date. */
size_t im_ods_date_term(const char *s, char *out);
/** The same for an ods office:time-value ("PT12H30M00S", "-P1DT2H"): days. */
size_t im_ods_time_term(const char *s, char *out);
/** The content of a gzip, bzip2 or xz file, at most o->max_unpacked bytes. */
int im_unpack(const char *buf, size_t len, const struct im_extract_opts *o,
	      struct im_buf *out);

/* ---- List labels (zipdoc.c) ---------------------------------------------- */

/**
 * How a list numbers its items, as docx (w:numFmt), odt (style:num-format)
 * and HTML (<ol type>) name it. Letters past z go on as a spreadsheet's
 * columns (aa, ab, ...: odt and HTML) or repeat (aa, bb, ...: Word, and
 * odt's style:num-letter-sync).
 */
enum im_list_fmt {
	IM_LIST_NONE, /**< no number: a bullet, or "none" */
	IM_LIST_DECIMAL,
	IM_LIST_DECIMAL_ZERO, /**< 01 ... 09, 10 (Word's decimalZero) */
	IM_LIST_LOWER_LETTER,
	IM_LIST_UPPER_LETTER,
	IM_LIST_LOWER_LETTER_SYNC,
	IM_LIST_UPPER_LETTER_SYNC,
	IM_LIST_LOWER_ROMAN,
	IM_LIST_UPPER_ROMAN,
};

/** The longest number im_list_number() writes (no NUL). */
#define IM_LIST_NUMBER_MAX 24

/**
 * Write the number @p n in the format @p f at @p out, as Word, LibreOffice
 * and browsers show it: letters from 1 (repeated letters up to 16 of
 * them), Roman numerals from 1 to 3999, decimal for any other number, as
 * they fall back to. @return its length, at most IM_LIST_NUMBER_MAX; 0 for
 * IM_LIST_NONE.
 */
size_t im_list_number(enum im_list_fmt f, int64_t n, char *out);

/* ---- Compound File Binary (cfb.c) ---------------------------------------- */

/** An open compound file: its header, read; the bytes are borrowed. */
struct im_cfb {
	const unsigned char *p;
	size_t len;
	unsigned shift; /* sector size 1 << shift */
	bool v4;	/* major version 4: 64-bit stream sizes */
	uint32_t nsect; /* sectors that start inside the file */
	uint32_t nfat, dir_start, minifat_start, nminifat;
	uint32_t difat_start, ndifat;
};

/** A stream: its first sector and size. */
struct im_cfb_entry {
	uint32_t start;
	uint64_t size;
};

/**
 * Read the header of the compound file @p buf / @p len (which must outlive
 * @p c). Allocates nothing. @return whether it is one this reader knows
 * (version 3 or 4, 512- or 4096-byte sectors).
 */
bool im_cfb_open(struct im_cfb *c, const char *buf, size_t len);

/**
 * The stream named @p name (ASCII, any case) among the root storage's
 * children. Allocates nothing; bounded whatever the directory holds.
 * @return whether there is one.
 */
bool im_cfb_find(const struct im_cfb *c, const char *name,
		 struct im_cfb_entry *e);

/**
 * Append the content of stream @p e to @p out, taking what is read
 * (streams, and the mini stream and MiniFAT for a small one) from
 * *@p budget. @return 0, IM_XF_CORRUPT (a chain that loops, ends early
 * or leaves the file; a size larger than the file), IM_XF_EXPANSION (over
 * budget), or -ENOMEM.
 */
int im_cfb_read(const struct im_cfb *c, const struct im_cfb_entry *e,
		size_t *budget, struct im_buf *out);

/**
 * Legacy Office documents (msoffice.c): append the text of a Word 97-2003
 * document (.doc: main text, then footnotes and endnotes) to @p out.
 * @return 0, an enum im_extract_fail (> 0), or -ENOMEM.
 */
int im_doc_text(const char *buf, size_t len, const struct im_extract_opts *o,
		struct im_buf *out);

/** The same for an Excel 97-2003 workbook (.xls, BIFF8): its shared
 *  strings and text cells. */
int im_xls_text(const char *buf, size_t len, const struct im_extract_opts *o,
		struct im_buf *out);

/** The same for a PowerPoint 97-2003 presentation (.ppt): the text of its
 *  slides and notes. */
int im_ppt_text(const char *buf, size_t len, const struct im_extract_opts *o,
		struct im_buf *out);

/**
 * What sniffing makes of a compound file (msoffice.c): IM_FMT_DOC,
 * IM_FMT_XLS or IM_FMT_PPT when it holds a Word 97, Excel 97 (BIFF8) or
 * PowerPoint 97 or later document, else IM_FMT_BINARY.
 */
enum im_format im_msoffice_sniff(const char *buf, size_t len);

/**
 * Append the text of the RTF document @p s to @p out (rtf.c; in-process:
 * our code, one forward pass, state bounded by the nesting cap).
 * @return 0, IM_XF_NESTING (groups nested deeper than
 * IM_EXTRACT_XML_DEPTH), IM_XF_OUTPUT (more than @p max_text bytes of text;
 * 0: no cap), or -ENOMEM.
 */
int im_rtf_text(const char *s, size_t len, size_t max_text, struct im_buf *out);

/**
 * Extract in this process, whatever the sandbox option says: what a helper
 * runs. As im_extract_as().
 */
int im_extract_local(struct im_extractor *x, enum im_format f, const char *buf,
		     size_t len, struct im_extract_result *r);

/* ---- Helpers (sandbox.c) ------------------------------------------------- */

/** One helper process; owned by one extractor. */
struct im_helper {
	pid_t pid;	 /* 0: none running */
	int fd;		 /* our end of its socket; -1: none */
	uint64_t cpu_ms; /* CPU time it reported after its last file */
	unsigned spawned;
	char why[96]; /* why the last start failed; "" after one that worked */
};

void im_helper_init(struct im_helper *h);
/** Kill and reap the helper, if any. */
void im_helper_stop(struct im_helper *h);

/**
 * Have the helper (started when there is none) extract a document of format
 * @p f into @p out (its length set to the text's), and set r->format (the
 * inner format of a compressed file) and r->compressed.
 *
 * @return 0, an enum im_extract_fail (> 0: the helper failed, died, timed
 *         out or could not be started), or -ENOMEM.
 */
int im_helper_extract(struct im_helper *h, const struct im_extract_opts *o,
		      enum im_format f, const char *buf, size_t len,
		      struct im_buf *out, struct im_extract_result *r);

/**
 * Pipe @p buf through `/bin/sh -c CMD` with the helpers' limits (address
 * space, CPU, deadline, output cap; no seccomp, as the command must exec);
 * its stdout goes to @p out. @return as im_helper_extract().
 */
int im_filter_run(const char *cmd, const struct im_extract_opts *o,
		  const char *buf, size_t len, struct im_buf *out);

#endif
