/**
 * @file dl.h
 * Libraries loaded on first use (dlopen), so that a run of imatch that does
 * not need one does not pay for loading it: poppler and libarchive for
 * documents (core/extract/), OpenSSL for SHA-1 on a CPU without the SHA
 * extensions (core/sign/sha1.c). Loading libcrypto alone cost every start
 * of imatch about 1 ms of CPU (its 21,000 relocations).
 *
 * Thread-safety: im_dl_load() is not thread-safe; each caller runs it under
 * its own pthread_once(). Libraries are never closed (a helper forked later
 * may use one).
 */
#ifndef IM_DL_H
#define IM_DL_H

#include <stdbool.h>
#include <stddef.h>

/** A function to find in a library loaded on first use, and where its
 *  address goes. */
struct im_dlsym {
	const char *name;
	void **addr;
};

/**
 * Open the library @p soname, or @p fallback if that fails, never to be
 * closed, and resolve the @p n symbols @p syms in it.
 *
 * @return whether the library and every symbol were found.
 */
bool im_dl_load(const char *soname, const char *fallback,
		const struct im_dlsym *syms, size_t n);

#endif
