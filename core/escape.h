/**
 * @file escape.h
 * Paths in the text formats: `imatch scan`, `dupes` and the other text
 * outputs and messages of the CLI, and the daemon's by-doc/.../similarity,
 * write a path as one TAB-separated field of a one-line record. TAB,
 * newline and backslash are written "\t", "\n" and "\\", the other control
 * bytes (below 0x20, and 0x7f) "\xHH" (two lowercase hex digits), so that a
 * record stays on one line, TAB still separates fields and no control byte
 * reaches a terminal. Every other byte, valid UTF-8 or not, stands as it
 * is. Reversible: a backslash always begins an escape.
 *
 * Thread-safety: no state; safe from any thread.
 */
#ifndef IM_ESCAPE_H
#define IM_ESCAPE_H

#include <stddef.h>

/**
 * Escape @p s for the text formats, snprintf-like: write what fits of the
 * escaped text into @p out (NUL-terminated when @p cap > 0; @p out may be
 * NULL when @p cap is 0), never cutting an escape in two, and return its
 * full length without the NUL. It is at most four times strlen(@p s), and
 * escaping the pieces of a string one after the other gives the escape of
 * the whole.
 */
size_t im_text_escape(const char *s, char *out, size_t cap);

#endif
