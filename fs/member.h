/**
 * @file member.h
 * <member> names (DESIGN §2): a document's path relative to SOURCE with '%'
 * written "%25" and '/' written "%2F", so that it is one file name.
 *
 * Every name in the view is at most MEMBER_NAME_MAX bytes. An encoded path
 * longer than that is shortened: "%~" followed by 16 hex digits of the XXH3
 * hash of the full path, '~', then the end of the encoded path (the file
 * name and extension), cut so that no "%XX" escape or UTF-8 sequence is
 * split. "%~" never occurs in an encoded path (a '%' there is always "%25" or
 * "%2F"), so a short name cannot be mistaken for a plain one, and two paths
 * give the same short name only if their 64-bit hashes collide.
 *
 * Pure functions: thread-safe, no state.
 */
#ifndef IMFS_MEMBER_H
#define IMFS_MEMBER_H

#include <stdbool.h>

#define MEMBER_NAME_MAX 255

/** The <member> name of @p path. Caller frees; NULL on ENOMEM. */
char *member_name(const char *path);

/** Whether @p name is a shortened member name (its path is not in it). */
bool member_is_short(const char *name);

/**
 * The path a plain (not shortened) member name stands for. Caller frees.
 * @return NULL if @p name is not the canonical encoding of a relative path
 *         (or on ENOMEM): no document has that name.
 */
char *member_decode(const char *name);

#endif
