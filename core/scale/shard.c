/**
 * @file shard.c
 * Shard lists and opening their files (see shard.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "beneath.h"
#include "shard.h"

static int read_file(const char *file, char **out, size_t *len)
{
	char *buf = NULL, *nb;
	size_t n = 0, cap = 0;
	int fd, ret = 0;

	fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t r;

		if (cap - n < 65536) {
			cap = cap ? 2 * cap : 65536;
			nb = realloc(buf, cap);
			if (!nb) {
				ret = -ENOMEM;
				break;
			}
			buf = nb;
		}
		r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			ret = -errno;
			break;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	if (ret) {
		free(buf);
		return ret;
	}
	*out = buf;
	*len = n;
	return 0;
}

static bool good_path(const char *s)
{
	const char *c = s;

	if (*s == '\0' || *s == '/')
		return false;
	while (*c) {
		const char *e = strchr(c, '/');
		size_t l = e ? (size_t)(e - c) : strlen(c);

		if (l == 0 || (l == 1 && c[0] == '.') ||
		    (l == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		if (!e)
			break;
		c = e + 1;
		if (!*c)
			return false; /* trailing '/' */
	}
	return true;
}

static int cmp_path_at(const void *a, const void *b, void *arg)
{
	char *const *path = arg;
	size_t i = *(const size_t *)a, j = *(const size_t *)b;
	int r = strcmp(path[i], path[j]);

	return r ? r : (i > j) - (i < j);
}

/*
 * A path the list gives twice would be read twice and stand for two
 * documents: its records would link it to itself. @return 0, or -EINVAL
 * with the first two positions (from 1) that hold the same path in *first
 * and *again, or -ENOMEM.
 */
static int find_twice(char **path, size_t n, size_t *first, size_t *again)
{
	size_t *order = malloc((n ? n : 1) * sizeof(*order));
	int ret = 0;

	if (!order)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	qsort_r(order, n, sizeof(*order), cmp_path_at, path);
	*first = *again = SIZE_MAX;
	for (size_t i = 1; i < n; i++) {
		if (strcmp(path[order[i - 1]], path[order[i]]))
			continue;
		/* The earliest repeat in the list: a user reads it top down. */
		if (order[i] < *again) {
			*first = order[i - 1] + 1;
			*again = order[i] + 1;
		}
		ret = -EINVAL;
	}
	free(order);
	return ret;
}

int im_shard_load(const char *file, struct im_shard *out, char *why,
		  size_t why_len)
{
	char *buf = NULL;
	size_t len = 0, n = 0, i;
	int ret;

	memset(out, 0, sizeof(*out));
	ret = read_file(file, &buf, &len);
	if (ret) {
		if (why)
			snprintf(why, why_len, "%s", strerror(-ret));
		return ret;
	}
	if (len && buf[len - 1] != '\0') {
		if (why)
			snprintf(why, why_len, "does not end with a NUL byte");
		free(buf);
		return -EINVAL;
	}
	for (i = 0; i < len; i++)
		n += buf[i] == '\0';
	out->path = malloc((n ? n : 1) * sizeof(*out->path));
	if (!out->path) {
		if (why)
			snprintf(why, why_len, "%s", strerror(ENOMEM));
		free(buf);
		return -ENOMEM;
	}
	out->buf = buf;
	for (i = 0; i < len; i += strlen(buf + i) + 1) {
		if (!good_path(buf + i)) {
			if (why)
				snprintf(why, why_len,
					 "path %zu is not a relative path "
					 "without '.' or '..'",
					 out->n + 1);
			im_shard_release(out);
			return -EINVAL;
		}
		out->path[out->n++] = buf + i;
	}
	size_t first, again;

	ret = find_twice(out->path, out->n, &first, &again);
	if (ret == -EINVAL && why)
		snprintf(why, why_len, "paths %zu and %zu are the same", first,
			 again);
	else if (ret && why)
		snprintf(why, why_len, "%s", strerror(-ret));
	if (ret)
		im_shard_release(out);
	return ret;
}

void im_shard_release(struct im_shard *s)
{
	free(s->path);
	free(s->buf);
	memset(s, 0, sizeof(*s));
}

void im_tree_init(struct im_tree *t, int rootfd)
{
	t->root = rootfd;
	t->dir = -1;
	t->cached = NULL;
}

void im_tree_release(struct im_tree *t)
{
	if (t->dir >= 0)
		close(t->dir);
	free(t->cached);
	t->dir = -1;
	t->cached = NULL;
}

int im_tree_dir(struct im_tree *t, const char *path, int *dirfd,
		const char **name)
{
	const char *slash = strrchr(path, '/');
	size_t dlen = slash ? (size_t)(slash - path) : 0;
	char *dir;
	int fd, ret;

	*name = slash ? slash + 1 : path;
	if (!slash) {
		*dirfd = t->root;
		return 0;
	}
	if (t->cached && strlen(t->cached) == dlen &&
	    !memcmp(t->cached, path, dlen)) {
		*dirfd = t->dir;
		return 0;
	}
	im_tree_release(t);
	dir = strndup(path, dlen);
	if (!dir)
		return -ENOMEM;
	ret = im_open_beneath(t->root, dir, O_RDONLY | O_DIRECTORY, &fd);
	if (ret) {
		free(dir);
		return ret;
	}
	t->cached = dir;
	t->dir = fd;
	*dirfd = fd;
	return 0;
}

uint64_t im_terms_key(const struct im_params *p)
{
	uint64_t v[4] = {1, p->min_word_len, p->max_digits, p->max_size};
	uint8_t b[sizeof(v)];

	/* Little-endian bytes, so the key is the same on every machine. */
	for (size_t i = 0; i < sizeof(v); i++)
		b[i] = (uint8_t)(v[i / 8] >> (8 * (i % 8)));
	return XXH3_64bits(b, sizeof(b));
}

uint64_t im_list_path_hash(const char *path, size_t len)
{
	return XXH3_64bits(path, len);
}
