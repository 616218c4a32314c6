/**
 * @file fdio.c
 * Whole writes (fdio.h).
 */
#include <errno.h>
#include <unistd.h>

#include "fdio.h"

int im_write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t w = write(fd, c, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		c += w;
		n -= (size_t)w;
	}
	return 0;
}
