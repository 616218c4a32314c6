/**
 * @file dl.c
 * Libraries loaded on first use (dl.h).
 */
#include <dlfcn.h>

#include "dl.h"

bool im_dl_load(const char *soname, const char *fallback,
		const struct im_dlsym *syms, size_t n)
{
	void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);

	if (!h && fallback)
		h = dlopen(fallback, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return false;
	for (size_t i = 0; i < n; i++) {
		*syms[i].addr = dlsym(h, syms[i].name);
		if (!*syms[i].addr)
			return false;
	}
	return true;
}
