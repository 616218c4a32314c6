/**
 * @file extract_internal.h
 * Shared between the extractors of core/extract/; not part of the core API
 * (tests/unit/test_extract.c and the fuzz targets include it too).
 */
#ifndef IM_EXTRACT_INTERNAL_H
#define IM_EXTRACT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "extract.h"
#include "text_internal.h"

/** True when s[0, len) is valid UTF-8 (strict, as im_utf8_decode()). */
bool im_utf8_valid(const char *s, size_t len);

#endif
