/**
 * @file scope.c
 * gitignore-style patterns (scope.h).
 *
 * A pattern is kept as its text with '/' between components; a path is
 * matched component by component. Within a component '*' cannot cross a
 * '/', so one backtracking point (the last '*') is enough, as in every
 * fnmatch that is linear. Across components only a `**` component can
 * absorb a variable number of them; consecutive `**` components are merged
 * when parsing, so the recursion is polynomial in the path's depth with
 * the number of `**` components as the exponent (one or two in practice).
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "scope.h"

struct rule {
	char *pat; /* components separated by '/', no leading or trailing '/' */
	bool neg, dir_only, anchored;
};

struct im_ignore {
	char *base; /* "" for the root */
	size_t base_len;
	struct rule *v;
	size_t n, cap;
};

struct im_scope {
	struct im_ignore *ex, *inc;
	char **list; /* im_scope_set_list: sorted copies, or NULL */
	size_t nlist;
};

/* ---- Matching one component ----------------------------------------------- */

enum { BR_NO, BR_YES, BR_BAD };

static bool class_has(const char *name, size_t len, unsigned char c)
{
	static const struct {
		const char *name;
		int (*fn)(int);
	} classes[] = {
		{"alnum", isalnum}, {"alpha", isalpha}, {"blank", isblank},
		{"cntrl", iscntrl}, {"digit", isdigit}, {"graph", isgraph},
		{"lower", islower}, {"print", isprint}, {"punct", ispunct},
		{"space", isspace}, {"upper", isupper}, {"xdigit", isxdigit},
	};

	for (size_t i = 0; i < sizeof(classes) / sizeof(classes[0]); i++)
		if (strlen(classes[i].name) == len &&
		    !memcmp(classes[i].name, name, len))
			return c < 128 && classes[i].fn(c);
	return false;
}

/* The set at p[*i] == '[' against @p c; *i moves past its ']'. */
static int bracket(const char *p, size_t pl, size_t *i, unsigned char c)
{
	size_t j = *i + 1;
	bool neg = false, hit = false, first = true;

	if (j < pl && (p[j] == '!' || p[j] == '^')) {
		neg = true;
		j++;
	}
	for (;; first = false) {
		unsigned char lo, hi;

		if (j >= pl)
			return BR_BAD;
		if (p[j] == ']' && !first)
			break;
		if (p[j] == '[' && j + 1 < pl && p[j + 1] == ':') {
			const char *end = NULL;

			for (size_t k = j + 2; k + 1 < pl; k++)
				if (p[k] == ':' && p[k + 1] == ']') {
					end = p + k;
					break;
				}
			if (end) {
				hit |= class_has(p + j + 2,
						 (size_t)(end - p - j - 2), c);
				j = (size_t)(end - p) + 2;
				continue;
			}
		}
		if (p[j] == '\\' && j + 1 < pl)
			j++;
		lo = hi = (unsigned char)p[j++];
		if (j + 1 < pl && p[j] == '-' && p[j + 1] != ']') {
			j++;
			if (p[j] == '\\' && j + 1 < pl)
				j++;
			hi = (unsigned char)p[j++];
		}
		if (c >= lo && c <= hi)
			hit = true;
	}
	*i = j + 1;
	return hit != neg ? BR_YES : BR_NO;
}

/* One pattern component against one path component (neither holds '/'). */
static bool seg_match(const char *p, size_t pl, const char *s, size_t sl)
{
	size_t pi = 0, si = 0, star_p = 0, star_s = 0;
	bool star = false;

	while (si < sl) {
		if (pi < pl) {
			char c = p[pi];

			if (c == '*') {
				while (pi < pl && p[pi] == '*')
					pi++;
				star = true;
				star_p = pi;
				star_s = si;
				continue;
			}
			if (c == '?') {
				pi++;
				si++;
				continue;
			}
			if (c == '[') {
				size_t next = pi;
				int r = bracket(p, pl, &next,
						(unsigned char)s[si]);

				if (r == BR_YES) {
					pi = next;
					si++;
					continue;
				}
				if (r == BR_BAD && s[si] == '[') {
					pi++;
					si++;
					continue;
				}
			} else {
				if (c == '\\' && pi + 1 < pl)
					c = p[++pi];
				if (c == s[si]) {
					pi++;
					si++;
					continue;
				}
			}
		}
		if (!star)
			return false;
		pi = star_p;
		si = ++star_s;
	}
	while (pi < pl && p[pi] == '*')
		pi++;
	return pi == pl;
}

/* ---- Matching a path ------------------------------------------------------- */

static size_t comp_len(const char *s)
{
	return strcspn(s, "/");
}

static bool is_globstar(const char *p, size_t len)
{
	return len == 2 && p[0] == '*' && p[1] == '*';
}

/* Pattern components from @p p against path components from @p s. */
static bool path_match(const char *p, const char *s)
{
	while (*p) {
		size_t pl = comp_len(p), sl;
		const char *pn = p + pl + (p[pl] == '/');

		if (is_globstar(p, pl)) {
			if (!*pn)
				return *s != '\0'; /* everything inside */
			/* Zero or more components, then the rest. */
			for (;;) {
				if (path_match(pn, s))
					return true;
				if (!*s)
					return false;
				s += comp_len(s);
				s += *s == '/';
			}
		}
		if (!*s)
			return false;
		sl = comp_len(s);
		if (!seg_match(p, pl, s, sl))
			return false;
		p = pn;
		s += sl + (s[sl] == '/');
	}
	return !*s;
}

static bool rule_match(const struct im_ignore *ig, const struct rule *r,
		       const char *path, bool is_dir)
{
	const char *rel = path, *name;

	if (r->dir_only && !is_dir)
		return false;
	if (ig->base_len) {
		if (strncmp(path, ig->base, ig->base_len) ||
		    path[ig->base_len] != '/')
			return false;
		rel = path + ig->base_len + 1;
	}
	if (r->anchored)
		return path_match(r->pat, rel);
	name = strrchr(rel, '/');
	name = name ? name + 1 : rel;
	return seg_match(r->pat, strlen(r->pat), name, strlen(name));
}

enum im_ignore_verdict im_ignore_match(const struct im_ignore *ig,
				       const char *path, bool is_dir)
{
	if (!ig)
		return IM_IGNORE_NONE;
	for (size_t i = ig->n; i-- > 0;)
		if (rule_match(ig, &ig->v[i], path, is_dir))
			return ig->v[i].neg ? IM_IGNORE_INCLUDE
					    : IM_IGNORE_EXCLUDE;
	return IM_IGNORE_NONE;
}

/* ---- Parsing --------------------------------------------------------------- */

static struct im_ignore *ignore_new(const char *base)
{
	struct im_ignore *ig = calloc(1, sizeof(*ig));

	if (!ig)
		return NULL;
	ig->base = strdup(base);
	if (!ig->base) {
		free(ig);
		return NULL;
	}
	ig->base_len = strlen(base);
	return ig;
}

void im_ignore_free(struct im_ignore *ig)
{
	if (!ig)
		return;
	for (size_t i = 0; i < ig->n; i++)
		free(ig->v[i].pat);
	free(ig->v);
	free(ig->base);
	free(ig);
}

/* Whether the byte at @p i is escaped by an odd run of '\' before it. */
static bool escaped(const char *s, size_t i)
{
	size_t n = 0;

	while (i > n && s[i - n - 1] == '\\')
		n++;
	return n % 2;
}

/*
 * Add one line (@p len bytes, no newline) to @p ig. @return 1 if it was a
 * pattern, 0 for a comment or blank, -ENOMEM.
 */
static int add_line(struct im_ignore *ig, const char *line, size_t len)
{
	struct rule r = {0};
	char *pat, *out;
	const char *in;

	if (len && line[len - 1] == '\r')
		len--;
	while (len && line[len - 1] == ' ' && !escaped(line, len - 1))
		len--;
	if (!len || line[0] == '#')
		return 0;
	if (line[0] == '!') {
		r.neg = true;
		line++;
		len--;
	}
	if (len && line[len - 1] == '/' && !escaped(line, len - 1)) {
		r.dir_only = true;
		len--;
	}
	if (len && line[0] == '/') {
		r.anchored = true;
		line++;
		len--;
	}
	if (!len)
		return 0;
	if (memchr(line, '/', len))
		r.anchored = true;
	pat = malloc(len + 1);
	if (!pat)
		return -ENOMEM;
	/* Copy, dropping empty components and repeated `**` components. */
	out = pat;
	in = line;
	while (in < line + len) {
		/* The text is not NUL-terminated: bound the search. */
		const char *slash = memchr(in, '/', (size_t)(line + len - in));
		size_t cl = slash ? (size_t)(slash - in)
				  : (size_t)(line + len - in);
		if (cl && !(is_globstar(in, cl) && out - pat >= 2 &&
			    is_globstar(out - 2, 2) &&
			    (out - pat == 2 || out[-3] == '/'))) {
			if (out != pat)
				*out++ = '/';
			memcpy(out, in, cl);
			out += cl;
		}
		in += cl + 1;
	}
	*out = '\0';
	if (ig->n == ig->cap) {
		size_t nc = ig->cap ? 2 * ig->cap : 8;
		struct rule *v = realloc(ig->v, nc * sizeof(*v));

		if (!v) {
			free(pat);
			return -ENOMEM;
		}
		ig->v = v;
		ig->cap = nc;
	}
	r.pat = pat;
	ig->v[ig->n++] = r;
	return 1;
}

int im_ignore_parse(const char *base, const char *text, size_t len,
		    struct im_ignore **out)
{
	struct im_ignore *ig = ignore_new(base);
	const char *p = text, *end = text + len;

	*out = NULL;
	if (!ig)
		return -ENOMEM;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t ll = nl ? (size_t)(nl - p) : (size_t)(end - p);

		/* A NUL ends nothing in a line: such a pattern never
		 * matches a path, which holds none. */
		if (memchr(p, '\0', ll) == NULL && add_line(ig, p, ll) < 0) {
			im_ignore_free(ig);
			return -ENOMEM;
		}
		p += ll + 1;
	}
	*out = ig;
	return 0;
}

int im_ignore_load_at(int dirfd, const char *base, struct im_ignore **out)
{
	char *buf = NULL;
	struct stat st;
	size_t got = 0;
	int fd, ret = 0;

	*out = NULL;
	fd = openat(dirfd, IM_IGNORE_NAME,
		    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (fstat(fd, &st)) {
		ret = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		ret = -EINVAL;
		goto out;
	}
	if (st.st_size > IM_IGNORE_MAX_BYTES) {
		ret = -EFBIG;
		goto out;
	}
	/* One byte more than the size, to see a file that grew meanwhile. */
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		ret = -ENOMEM;
		goto out;
	}
	for (;;) {
		ssize_t r = read(fd, buf + got, (size_t)st.st_size + 1 - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			ret = -errno;
			goto out;
		}
		if (r == 0 || (got += (size_t)r) > (size_t)st.st_size)
			break;
	}
	if (got > (size_t)st.st_size)
		got = (size_t)st.st_size; /* grown: the part we sized */
	ret = im_ignore_parse(base, buf, got, out);
out:
	free(buf);
	close(fd);
	return ret;
}

/* ---- The command line's scope ---------------------------------------------- */

int im_scope_new(struct im_scope **out)
{
	struct im_scope *s = calloc(1, sizeof(*s));

	*out = NULL;
	if (!s)
		return -ENOMEM;
	s->ex = ignore_new("");
	s->inc = ignore_new("");
	if (!s->ex || !s->inc) {
		im_scope_free(s);
		return -ENOMEM;
	}
	*out = s;
	return 0;
}

static void drop_list(struct im_scope *s)
{
	for (size_t i = 0; i < s->nlist; i++)
		free(s->list[i]);
	free(s->list);
}

void im_scope_free(struct im_scope *s)
{
	if (!s)
		return;
	im_ignore_free(s->ex);
	im_ignore_free(s->inc);
	drop_list(s);
	free(s);
}

static int scope_add(struct im_ignore *ig, const char *glob, bool include)
{
	size_t len = strlen(glob);
	int ret;

	if (!len || memchr(glob, '\n', len) || (include && glob[0] == '!'))
		return -EINVAL;
	ret = add_line(ig, glob, len);
	return ret < 0 ? ret : ret ? 0 : -EINVAL;
}

int im_scope_add_exclude(struct im_scope *s, const char *glob)
{
	return scope_add(s->ex, glob, false);
}

int im_scope_add_include(struct im_scope *s, const char *glob)
{
	return scope_add(s->inc, glob, true);
}

bool im_scope_empty(const struct im_scope *s)
{
	return !s || (!s->ex->n && !s->inc->n && !s->list);
}

static int cmp_path(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int im_scope_set_list(struct im_scope *s, const char *const *paths, size_t n)
{
	char **list = calloc(n ? n : 1, sizeof(*list));

	for (size_t i = 0; list && i < n; i++) {
		list[i] = strdup(paths[i]);
		if (!list[i]) {
			while (i--)
				free(list[i]);
			free(list);
			list = NULL;
		}
	}
	if (!list)
		return -ENOMEM;
	qsort(list, n, sizeof(*list), cmp_path);
	drop_list(s);
	s->list = list;
	s->nlist = n;
	return 0;
}

/* @p entry against @p path, or (@p dir) against "path/" as a prefix. */
static int cmp_listed(const char *entry, const char *path, size_t len, bool dir)
{
	int c = dir ? strncmp(entry, path, len) : strcmp(entry, path);

	return c || !dir ? c : (unsigned char)entry[len] - '/';
}

/* A file is in when listed; a directory while a listed path lies below it
 * (the walk then reaches it). */
static bool listed(const struct im_scope *s, const char *path, bool is_dir)
{
	size_t len = strlen(path), lo = 0, hi = s->nlist;

	while (lo < hi) { /* the first entry not before the key */
		size_t mid = lo + (hi - lo) / 2;
		if (cmp_listed(s->list[mid], path, len, is_dir) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < s->nlist && !cmp_listed(s->list[lo], path, len, is_dir);
}

/* ---- Deciding along a path ------------------------------------------------- */

int im_scope_chain_push(struct im_scope_chain *c, struct im_ignore *ig)
{
	if (c->n == c->cap) {
		size_t nc = c->cap ? 2 * c->cap : 16;
		struct im_ignore **v = realloc(c->v, nc * sizeof(*v));

		if (!v) {
			im_ignore_free(ig);
			return -ENOMEM;
		}
		c->v = v;
		c->cap = nc;
	}
	c->v[c->n++] = ig;
	c->files += ig != NULL;
	return 0;
}

void im_scope_chain_pop(struct im_scope_chain *c)
{
	struct im_ignore *ig = c->v[--c->n];

	c->files -= ig != NULL;
	im_ignore_free(ig);
}

void im_scope_chain_release(struct im_scope_chain *c)
{
	while (c->n)
		im_scope_chain_pop(c);
	free(c->v);
	*c = (struct im_scope_chain){0};
}

/* Whether an include glob matches @p path or one of its parents. */
static bool included(const struct im_ignore *inc, const char *path)
{
	size_t len = strlen(path);
	char *buf;
	bool hit;

	if (im_ignore_match(inc, path, false) != IM_IGNORE_NONE)
		return true;
	buf = strdup(path);
	if (!buf)
		return true; /* out of memory: err on reading the file */
	hit = false;
	while (!hit && len--) {
		if (buf[len] != '/')
			continue;
		buf[len] = '\0';
		hit = im_ignore_match(inc, buf, true) != IM_IGNORE_NONE;
	}
	free(buf);
	return hit;
}

bool im_scope_excluded(const struct im_scope *s, const struct im_scope_chain *c,
		       const char *path, bool is_dir)
{
	const char *name = strrchr(path, '/');
	enum im_ignore_verdict v;

	if (!*path)
		return false; /* the root itself is always walked */
	/* The ignore files are settings, never documents. */
	if (!is_dir && !strcmp(name ? name + 1 : path, IM_IGNORE_NAME))
		return true;
	v = s ? im_ignore_match(s->ex, path, is_dir) : IM_IGNORE_NONE;
	for (size_t i = c && c->files ? c->n : 0;
	     v == IM_IGNORE_NONE && i-- > 0;)
		v = im_ignore_match(c->v[i], path, is_dir);
	if (v == IM_IGNORE_EXCLUDE)
		return true;
	if (s && s->list && !listed(s, path, is_dir))
		return true;
	/* A '!' pattern only undoes an exclusion: includes still restrict. */
	return !is_dir && s && s->inc->n && !included(s->inc, path);
}

bool im_scope_excluded_path(const struct im_scope *s, const char *path,
			    bool is_dir)
{
	char *buf;
	bool out = false;

	for (;;) {
		if (*path == '/')
			path++;
		else if (path[0] == '.' && path[1] == '/')
			path += 2;
		else
			break;
	}
	buf = strdup(path);
	if (!buf)
		return false; /* out of memory: err on reading the file */
	for (char *p = strchr(buf, '/'); p && !out; p = strchr(p + 1, '/')) {
		*p = '\0';
		out = im_scope_excluded(s, NULL, buf, true);
		*p = '/';
	}
	out = out || im_scope_excluded(s, NULL, buf, is_dir);
	free(buf);
	return out;
}

/* Push the .imatchignore of @p fd (absent or unreadable: NULL). */
static int push_dir(struct im_scope_chain *c, int fd, const char *base)
{
	struct im_ignore *ig = NULL;
	int ret = im_ignore_load_at(fd, base, &ig);

	if (ret == -ENOMEM)
		return ret;
	return im_scope_chain_push(c, ig);
}

int im_scope_open_dir(int rootfd, const struct im_scope *s, const char *dir,
		      struct im_scope_chain *c, int *fd_out, bool *excluded)
{
	const char *rest = dir;
	char *path, *name;
	size_t pl = 0;
	int fd = -1, nfd, ret = 0;

	*fd_out = -1;
	*excluded = false;
	/* The prefix walked so far: the base of the next .imatchignore. */
	path = malloc(strlen(dir) + 1);
	if (!path) {
		ret = -ENOMEM;
		goto out;
	}
	path[0] = '\0';
	fd = openat(rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		goto out;
	}
	while (*rest) {
		size_t cl = comp_len(rest);

		if (!cl) {
			rest++;
			continue;
		}
		ret = push_dir(c, fd, path);
		if (ret)
			goto out;
		if (pl)
			path[pl++] = '/';
		name = path + pl;
		memcpy(name, rest, cl);
		pl += cl;
		path[pl] = '\0';
		rest += cl;
		if (!strcmp(name, "..")) {
			ret = -EXDEV;
			goto out;
		}
		if (im_scope_excluded(s, c, path, true)) {
			*excluded = true;
			goto out;
		}
		nfd = openat(fd, name,
			     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (nfd < 0) {
			ret = -errno;
			goto out;
		}
		close(fd);
		fd = nfd;
	}
out:
	if ((ret || *excluded) && fd >= 0) {
		close(fd);
		fd = -1;
	}
	if (ret)
		im_scope_chain_release(c);
	free(path);
	*fd_out = fd;
	return ret;
}

int im_scope_check(int rootfd, const struct im_scope *s, const char *path,
		   bool is_dir, bool *excluded)
{
	struct im_scope_chain c = {0};
	const char *slash = strrchr(path, '/');
	char *dir = strndup(path, slash ? (size_t)(slash - path) : 0);
	int fd = -1, ret;

	*excluded = false;
	if (!dir)
		return -ENOMEM;
	ret = im_scope_open_dir(rootfd, s, dir, &c, &fd, excluded);
	if (!ret && fd >= 0) {
		ret = push_dir(&c, fd, dir);
		if (!ret)
			*excluded = im_scope_excluded(s, &c, path, is_dir);
	}
	if (fd >= 0)
		close(fd);
	im_scope_chain_release(&c);
	free(dir);
	return ret;
}
