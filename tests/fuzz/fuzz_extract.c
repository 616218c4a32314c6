/*
 * libFuzzer targets, one per extractor entry point, chosen at build time
 * with -DFUZZ_ENTRY=...: the extractors run in the fuzzer's process (the
 * sandbox off), so the sanitizers see every read.
 *   FUZZ_SNIFF   im_extract(): sniffing, then text, UTF-16, windows-1252,
 *                HTML or e-mail, or any container format
 *   FUZZ_PDF     im_pdf_text()
 *   FUZZ_ZIPDOC  im_zipdoc_text(), the format taken from the first byte
 *   FUZZ_UNPACK  im_unpack()
 * Built by meson with -Dfuzz=enabled and clang (tests/fuzz/meson.build).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "extract.h"
#include "extract_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct im_extract_opts opts(void)
{
	struct im_extract_opts o;

	im_extract_opts_init(&o);
	o.sandbox = false;
	o.max_text = 1 << 20;
	o.max_unpacked = 4 << 20;
	return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct im_extract_opts o = opts();
	const char *s = (const char *)data;
	struct im_buf out = {0};

#if defined(FUZZ_SNIFF)
	struct im_extractor *x;
	struct im_extract_result r;

	if (im_extractor_new(&o, &x))
		return 0;
	im_extract(x, NULL, s, size, &r);
	im_extractor_free(x);
#elif defined(FUZZ_PDF)
	im_pdf_text(s, size, &o, &out);
#elif defined(FUZZ_ZIPDOC)
	static const enum im_format f[] = {
		IM_FMT_DOCX, IM_FMT_XLSX, IM_FMT_PPTX, IM_FMT_ODT, IM_FMT_EPUB};

	if (size < 1)
		return 0;
	im_zipdoc_text(f[data[0] % 5], s + 1, size - 1, &o, &out);
#elif defined(FUZZ_UNPACK)
	im_unpack(s, size, &o, &out);
#else
#error "define FUZZ_SNIFF, FUZZ_PDF, FUZZ_ZIPDOC or FUZZ_UNPACK"
#endif
	im_buf_release(&out);
	return 0;
}
