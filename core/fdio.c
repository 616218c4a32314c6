/**
 * @file fdio.c
 * Whole writes and reads (fdio.h).
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

int im_read_full(int fd, void *p, size_t n, size_t *got)
{
	char *c = p;

	*got = 0;
	while (*got < n) {
		ssize_t r = read(fd, c + *got, n - *got);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			break;
		*got += (size_t)r;
	}
	return 0;
}
