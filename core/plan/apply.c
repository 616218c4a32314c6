/**
 * @file apply.c
 * Parsing and applying plan lines (contract in apply.h).
 *
 * Internal helpers return 0 (go on), SKIP (not safe: r->why says why) or a
 * negative errno (r->why names the step), so every check reads the same way.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "apply.h"
#include "beneath.h"

#define SKIP 1

/* ---- Parsing ----------------------------------------------------------------- */

struct jp {
	const char *s, *end;
	const char *why;
};

static void ws(struct jp *p)
{
	while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' ||
				 *p->s == '\r' || *p->s == '\n'))
		p->s++;
}

static int fail(struct jp *p, const char *why)
{
	if (!p->why)
		p->why = why;
	return -EINVAL;
}

static int hex4(struct jp *p, unsigned *v)
{
	*v = 0;
	if (p->end - p->s < 4)
		return fail(p, "a truncated \\u escape");
	for (int i = 0; i < 4; i++) {
		char c = *p->s++;

		*v <<= 4;
		if (c >= '0' && c <= '9')
			*v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			*v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			*v |= (unsigned)(c - 'A' + 10);
		else
			return fail(p, "a bad \\u escape");
	}
	return 0;
}

static size_t put_utf8(char *o, unsigned cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | cp >> 6);
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | cp >> 12);
		o[1] = (char)(0x80 | (cp >> 6 & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | cp >> 18);
	o[1] = (char)(0x80 | (cp >> 12 & 0x3f));
	o[2] = (char)(0x80 | (cp >> 6 & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* A string literal, decoded into a malloc'd NUL-terminated buffer. A NUL
 * inside is refused: every string here is a path or a name. */
static int jstring(struct jp *p, char **out)
{
	char *buf, *o;

	*out = NULL;
	ws(p);
	if (p->s >= p->end || *p->s != '"')
		return fail(p, "a string was expected");
	p->s++;
	/* Escapes only shrink: the rest of the line is enough. */
	buf = malloc((size_t)(p->end - p->s) + 1);
	if (!buf)
		return -ENOMEM;
	o = buf;
	for (;;) {
		unsigned char c;

		if (p->s >= p->end) {
			free(buf);
			return fail(p, "an unterminated string");
		}
		c = (unsigned char)*p->s++;
		if (c == '"')
			break;
		if (c < 0x20) {
			free(buf);
			return fail(p, "a control character in a string");
		}
		if (c != '\\') {
			*o++ = (char)c;
			continue;
		}
		if (p->s >= p->end) {
			free(buf);
			return fail(p, "an unterminated string");
		}
		c = (unsigned char)*p->s++;
		switch (c) {
		case '"':
		case '\\':
		case '/': *o++ = (char)c; break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case 'n': *o++ = '\n'; break;
		case 'r': *o++ = '\r'; break;
		case 't': *o++ = '\t'; break;
		case 'u': {
			unsigned cp, lo;

			if (hex4(p, &cp))
				goto bad;
			if (cp >= 0xdc80 && cp <= 0xdcff) {
				/* surrogateescape: one raw byte */
				*o++ = (char)(cp - 0xdc00);
				break;
			}
			if (cp >= 0xd800 && cp <= 0xdbff) {
				if (p->end - p->s < 6 || p->s[0] != '\\' ||
				    p->s[1] != 'u') {
					fail(p, "a lone surrogate");
					goto bad;
				}
				p->s += 2;
				if (hex4(p, &lo))
					goto bad;
				if (lo < 0xdc00 || lo > 0xdfff) {
					fail(p, "a lone surrogate");
					goto bad;
				}
				cp = 0x10000 + ((cp - 0xd800) << 10) +
				     (lo - 0xdc00);
			} else if (cp >= 0xdc00 && cp <= 0xdfff) {
				fail(p, "a lone surrogate");
				goto bad;
			}
			if (cp == 0) {
				fail(p, "a NUL in a string");
				goto bad;
			}
			o += put_utf8(o, cp);
			break;
		}
		default: fail(p, "a bad escape in a string"); goto bad;
		}
	}
	*o = '\0';
	*out = buf;
	return 0;
bad:
	free(buf);
	return -EINVAL;
}

/* A number token, copied out for strto*(). */
static int jtoken(struct jp *p, char *tok, size_t len)
{
	size_t n = 0;

	ws(p);
	while (p->s < p->end && strchr("+-0123456789.eE", *p->s) && *p->s) {
		if (n + 1 >= len)
			return fail(p, "a number too long");
		tok[n++] = *p->s++;
	}
	tok[n] = '\0';
	return n ? 0 : fail(p, "a number was expected");
}

static int jint(struct jp *p, int64_t *v)
{
	char tok[32], *end;
	long long x;

	if (jtoken(p, tok, sizeof(tok)))
		return -EINVAL;
	errno = 0;
	x = strtoll(tok, &end, 10);
	if (errno || *end)
		return fail(p, "an integer was expected");
	*v = x;
	return 0;
}

static int juint(struct jp *p, uint64_t *v)
{
	char tok[32], *end;
	unsigned long long x;

	if (jtoken(p, tok, sizeof(tok)))
		return -EINVAL;
	errno = 0;
	x = strtoull(tok, &end, 10);
	if (errno || *end || tok[0] == '-')
		return fail(p, "a size was expected");
	*v = x;
	return 0;
}

static int jdouble(struct jp *p, double *v)
{
	char tok[64], *end;

	if (jtoken(p, tok, sizeof(tok)))
		return -EINVAL;
	*v = strtod(tok, &end);
	return *end ? fail(p, "a number was expected") : 0;
}

/* Any value of a field we do not know (nested up to a modest depth). */
static int jskip(struct jp *p, int depth)
{
	ws(p);
	if (p->s >= p->end)
		return fail(p, "a value was expected");
	if (depth > 16)
		return fail(p, "values nested too deep");
	if (*p->s == '"') {
		char *s;
		int ret = jstring(p, &s);

		free(s);
		return ret;
	}
	if (*p->s == '{' || *p->s == '[') {
		char close = *p->s == '{' ? '}' : ']';

		p->s++;
		ws(p);
		if (p->s < p->end && *p->s == close) {
			p->s++;
			return 0;
		}
		for (;;) {
			int ret;

			if (close == '}') {
				char *k;

				ret = jstring(p, &k);
				free(k);
				if (ret)
					return ret;
				ws(p);
				if (p->s >= p->end || *p->s++ != ':')
					return fail(p, "':' was expected");
			}
			ret = jskip(p, depth + 1);
			if (ret)
				return ret;
			ws(p);
			if (p->s < p->end && *p->s == ',') {
				p->s++;
				continue;
			}
			if (p->s < p->end && *p->s == close) {
				p->s++;
				return 0;
			}
			return fail(p, "',' or a closing bracket was expected");
		}
	}
	for (const char *w = "true\0false\0null\0"; *w; w += strlen(w) + 1)
		if ((size_t)(p->end - p->s) >= strlen(w) &&
		    !memcmp(p->s, w, strlen(w))) {
			p->s += strlen(w);
			return 0;
		}
	{
		double d;

		return jdouble(p, &d);
	}
}

static int jhash(struct jp *p, uint8_t *h)
{
	char *s;
	int ret = jstring(p, &s);

	if (ret)
		return ret;
	ret = 0;
	if (strncmp(s, "xxh128:", 7) || strlen(s) != 7 + 32)
		ret = fail(p, "a hash must be \"xxh128:\" and 32 hex digits");
	for (int i = 0; !ret && i < 16; i++) {
		unsigned v;

		if (sscanf(s + 7 + 2 * i, "%2x", &v) != 1 ||
		    !strchr("0123456789abcdefABCDEF", s[7 + 2 * i]) ||
		    !strchr("0123456789abcdefABCDEF", s[8 + 2 * i]))
			ret = fail(p, "a hash must be \"xxh128:\" and 32 hex "
				      "digits");
		else
			h[i] = (uint8_t)v;
	}
	free(s);
	return ret;
}

enum {
	F_ACTION = 1 << 0,
	F_KIND = 1 << 1,
	F_PATH = 1 << 2,
	F_KEEPER = 1 << 3,
	F_SIZE = 1 << 4,
	F_MTIME = 1 << 5,
	F_HASH = 1 << 6,
	F_KSIZE = 1 << 7,
	F_KMTIME = 1 << 8,
	F_KHASH = 1 << 9,
	F_ROOT = 1 << 10,
	F_TRASH = 1 << 11,
	F_SIMILARITY = 1 << 12,
	F_NEEDED = (1 << 11) - 1,
};

static const struct {
	const char *key;
	unsigned bit;
} known_fields[] = {
	{"action", F_ACTION},
	{"kind", F_KIND},
	{"path", F_PATH},
	{"keeper", F_KEEPER},
	{"size", F_SIZE},
	{"mtime_ns", F_MTIME},
	{"hash", F_HASH},
	{"keeper_size", F_KSIZE},
	{"keeper_mtime_ns", F_KMTIME},
	{"keeper_hash", F_KHASH},
	{"root", F_ROOT},
	{"trash", F_TRASH},
	{"similarity", F_SIMILARITY},
};

static int field(struct jp *p, const char *key, struct im_plan_line *l,
		 unsigned *seen)
{
	static const char *const actions[] = {"remove", "trash", "hardlink",
					      "symlink", "reflink"};
	char *s = NULL;
	int ret;

	/* Which of two values would the user mean? A line edited by hand
	 * into giving a path twice is refused, not read one way. */
	for (size_t i = 0; i < sizeof(known_fields) / sizeof(known_fields[0]);
	     i++) {
		if (strcmp(key, known_fields[i].key))
			continue;
		if (*seen & known_fields[i].bit)
			return fail(p, "a field given twice");
		*seen |= known_fields[i].bit;
		break;
	}
	if (!strcmp(key, "action") || !strcmp(key, "kind")) {
		bool action = key[0] == 'a';

		ret = jstring(p, &s);
		if (ret)
			return ret;
		ret = fail(p, action ? "unknown action" : "unknown kind");
		if (action) {
			for (size_t i = 0;
			     i < sizeof(actions) / sizeof(actions[0]); i++)
				if (!strcmp(s, actions[i])) {
					l->action = (enum im_plan_action)i;
					ret = 0;
				}
		} else if (!strcmp(s, "exact") || !strcmp(s, "near")) {
			l->exact = s[0] == 'e';
			ret = 0;
		}
		free(s);
		if (!ret)
			p->why = NULL;
		return ret;
	}
	if (!strcmp(key, "path"))
		return jstring(p, &l->file.path);
	if (!strcmp(key, "keeper"))
		return jstring(p, &l->keeper.path);
	if (!strcmp(key, "root"))
		return jstring(p, &l->root);
	if (!strcmp(key, "trash"))
		return jstring(p, &l->trash);
	if (!strcmp(key, "size"))
		return juint(p, &l->file.size);
	if (!strcmp(key, "keeper_size"))
		return juint(p, &l->keeper.size);
	if (!strcmp(key, "mtime_ns"))
		return jint(p, &l->file.mtime_ns);
	if (!strcmp(key, "keeper_mtime_ns"))
		return jint(p, &l->keeper.mtime_ns);
	if (!strcmp(key, "hash"))
		return jhash(p, l->file.hash);
	if (!strcmp(key, "keeper_hash"))
		return jhash(p, l->keeper.hash);
	if (!strcmp(key, "similarity"))
		return jdouble(p, &l->similarity);
	return jskip(p, 0);
}

void im_plan_line_release(struct im_plan_line *l)
{
	free(l->file.path);
	free(l->keeper.path);
	free(l->root);
	free(l->trash);
	memset(l, 0, sizeof(*l));
}

int im_plan_line_parse(const char *s, size_t len, struct im_plan_line *out,
		       char *why, size_t why_len)
{
	struct jp p = {s, s + len, NULL};
	struct im_plan_line l;
	unsigned seen = 0;
	int ret = -EINVAL;

	memset(&l, 0, sizeof(l));
	memset(out, 0, sizeof(*out));
	ws(&p);
	if (p.s >= p.end || *p.s++ != '{') {
		fail(&p, "a line must be one JSON object");
		goto out;
	}
	ws(&p);
	if (p.s < p.end && *p.s == '}') {
		fail(&p, "an empty object");
		goto out;
	}
	for (;;) {
		char *key;

		ret = jstring(&p, &key);
		if (ret)
			goto out;
		ws(&p);
		if (p.s >= p.end || *p.s++ != ':') {
			free(key);
			ret = fail(&p, "':' was expected");
			goto out;
		}
		ret = field(&p, key, &l, &seen);
		free(key);
		if (ret)
			goto out;
		ws(&p);
		if (p.s < p.end && *p.s == ',') {
			p.s++;
			continue;
		}
		if (p.s < p.end && *p.s == '}') {
			p.s++;
			break;
		}
		ret = fail(&p, "',' or '}' was expected");
		goto out;
	}
	ws(&p);
	ret = -EINVAL;
	if (p.s != p.end)
		fail(&p, "text after the object");
	else if ((seen & F_NEEDED) != F_NEEDED)
		fail(&p, "a field is missing (action, kind, path, keeper, "
			 "size, mtime_ns, hash, the keeper's, and root)");
	else if (l.action == IM_ACT_TRASH && !(seen & F_TRASH))
		fail(&p, "a trash line needs trash");
	else
		ret = 0;
out:
	if (ret) {
		if (why && why_len)
			snprintf(why, why_len, "%s",
				 ret == -ENOMEM ? "out of memory"
				 : p.why	? p.why
						: "malformed JSON");
		im_plan_line_release(&l);
		return ret;
	}
	*out = l;
	return 0;
}

/* ---- Opening without following symlinks -------------------------------------- */

/* The two files of a line, for the reasons given. */
enum role { FILE_, KEEPER };

/* Absolute, no empty, "." or ".." component, not "/" itself. */
static bool canonical(const char *path)
{
	const char *c = path;

	if (path[0] != '/' || !path[1])
		return false;
	while (*c == '/') {
		size_t n = strcspn(++c, "/");

		if (n == 0 || (n == 1 && c[0] == '.') ||
		    (n == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		c += n;
	}
	return true;
}

/*
 * @p path relative to @p root, or NULL if it is not strictly below it. Both
 * canonical (or @p root "/"), so comparing whole components is comparing
 * strings up to a '/': /r/s3x is not below /r/s3. Lexical is enough here:
 * no component on the way is a symlink, or opening it fails.
 */
static const char *below(const char *path, const char *root)
{
	size_t n = strlen(root);

	if (!strcmp(root, "/"))
		return path + 1;
	if (strncmp(path, root, n) || path[n] != '/' || !path[n + 1])
		return NULL;
	return path + n + 1;
}

/*
 * Make @p name in @p fd, a directory of the trash standing for @p rel, the
 * directory below the root @p rootfd (-1: none) that the files it will
 * hold come from. It takes that directory's owner and group (as root) and
 * its permission bits for them and for others (and setgid, sticky): a
 * folder only its owner could enter must not become one everybody can in
 * the trash, nor, once `cp -a -n` puts the files back, in the share. Group
 * bits only for the same group; the owner keeps rwx, so that what is
 * below can be moved in. No source directory to read: 0700.
 * @return 0 or -errno (-EEXIST: made meanwhile).
 */
static int make_trash_dir(int fd, const char *name, int rootfd, const char *rel)
{
	struct stat src = {0}, made;
	mode_t mode = 0700;
	int sfd, dfd, ret = 0;

	if (rootfd >= 0 &&
	    !im_open_beneath(rootfd, rel, O_RDONLY | O_DIRECTORY, &sfd)) {
		if (fstat(sfd, &src))
			src.st_mode = 0;
		close(sfd);
	}
	if (mkdirat(fd, name, 0700))
		return -errno;
	dfd = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	if (S_ISDIR(src.st_mode)) {
		if (geteuid() == 0 && fchown(dfd, src.st_uid, src.st_gid))
			src.st_mode &= ~(mode_t)(S_ISGID | 070); /* root's */
		if (!fstat(dfd, &made) && made.st_gid != src.st_gid)
			src.st_mode &= ~(mode_t)(S_ISGID | 070);
		mode |= src.st_mode & (S_ISGID | S_ISVTX | 077);
	}
	if (fchmod(dfd, mode))
		ret = -errno;
	close(dfd);
	return ret;
}

/*
 * Open the directory that is to hold the last component of @p path (a
 * canonical absolute path in the trash, of any length) one component at a
 * time, never following a symlink; with @p create, make missing
 * directories, which im_open_beneath() (used for the file and the keeper)
 * does not: those from @p path + @p from on stand for the directories of
 * the same path below @p rootfd (make_trash_dir()). @p path is cut at its
 * last '/'; *name points into it.
 */
static int open_parent(char *path, bool create, size_t from, int rootfd,
		       int *dirfd, const char **name, const char **why,
		       const char *const whys[4])
{
	char *c, *slash;
	int fd, nfd;

	fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		*why = "opening /";
		return -errno;
	}
	c = path + 1;
	while ((slash = strchr(c, '/'))) {
		*slash = '\0';
		nfd = openat(fd, c,
			     O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (nfd < 0 && errno == ENOENT && create) {
			int e = c >= path + from
					? make_trash_dir(fd, c, rootfd,
							 path + from)
					: (mkdirat(fd, c, 0777) ? -errno : 0);

			if (e && e != -EEXIST) {
				close(fd);
				*why = whys[3];
				return e;
			}
			nfd = openat(fd, c,
				     O_PATH | O_DIRECTORY | O_NOFOLLOW |
					     O_CLOEXEC);
		}
		if (nfd < 0) {
			int e = errno;
			struct stat st;

			if (!fstatat(fd, c, &st, AT_SYMLINK_NOFOLLOW) &&
			    S_ISLNK(st.st_mode))
				*why = whys[0];
			else if (e == ENOENT)
				*why = whys[1];
			else if (e == ENOTDIR || e == ELOOP)
				*why = whys[2];
			close(fd);
			if (e == ENOENT || e == ENOTDIR || e == ELOOP)
				return SKIP;
			*why = whys[3];
			return -e;
		}
		close(fd);
		fd = nfd;
		*slash = '/';
		c = slash + 1;
	}
	*dirfd = fd;
	*name = c;
	return 0;
}

static const char *const dir_whys[2][4] = {
	{"a directory on the file's path is a symlink",
	 "a directory on the file's path is gone",
	 "a component of the file's path is not a directory",
	 "opening a directory on the file's path"},
	{"a directory on the keeper's path is a symlink",
	 "a directory on the keeper's path is gone",
	 "a component of the keeper's path is not a directory",
	 "opening a directory on the keeper's path"},
};

enum reason {
	R_GONE,
	R_SYMLINK,
	R_NOT_REG,
	R_SIZE,
	R_MTIME,
	R_CONTENT,
	R_OPEN,
	R_READ,
};

static const char *const whys[2][8] = {
	{"the file is gone", "the file is a symlink",
	 "the file is not a regular file", "the file's size changed",
	 "the file was modified since the plan", "the file's content changed",
	 "opening the file", "reading the file"},
	{"the keeper is gone", "the keeper is a symlink",
	 "the keeper is not a regular file", "the keeper's size changed",
	 "the keeper was modified since the plan",
	 "the keeper's content changed", "opening the keeper",
	 "reading the keeper"},
};

/* One side of a line, opened and checked against the plan's record. */
struct side {
	char *buf; /* the path below the root, cut at its last '/' */
	int dirfd, fd;
	const char *name;
	struct stat st;
};

static int64_t mtime_ns(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

/* Directory errors of im_open_beneath() as SKIP or a failure. */
static int dir_error(int ret, const char *const whys[4], const char **why)
{
	switch (ret) {
	case 0: return 0;
	case -ELOOP: *why = whys[0]; return SKIP;
	case -ENOENT: *why = whys[1]; return SKIP;
	case -ENOTDIR: *why = whys[2]; return SKIP;
	default: *why = whys[3]; return ret;
	}
}

static const char *const root_whys[4] = {
	"a directory on the path of the plan's root is a symlink",
	"the plan's root is gone",
	"a component of the plan's root is not a directory",
	"opening the plan's root",
};

/* The line's root, from "/" without following a symlink (any length). */
static int open_root(const char *root, int *fd, const char **why)
{
	int slash = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC), ret;

	if (slash < 0) {
		*why = "opening /";
		return -errno;
	}
	ret = im_open_beneath(slash, root + 1, O_RDONLY | O_DIRECTORY, fd);
	close(slash);
	return dir_error(ret, root_whys, why);
}

/* The directory of @p rel, a side's path below the root @p rootfd (see
 * open_side()): s->dirfd, s->name and s->buf set. */
static int open_side_dir(int rootfd, const char *rel, enum role role,
			 struct side *s, const char **why)
{
	char *slash;

	s->buf = strdup(rel);
	if (!s->buf) {
		*why = "out of memory";
		return -ENOMEM;
	}
	slash = strrchr(s->buf, '/');
	if (slash) {
		*slash = '\0';
		s->name = slash + 1;
	} else {
		s->name = s->buf;
	}
	return dir_error(im_open_beneath(rootfd, slash ? s->buf : "",
					 O_RDONLY | O_DIRECTORY, &s->dirfd),
			 dir_whys[role], why);
}

/*
 * Open @p rel, the side's path below the root @p rootfd, component by
 * component (im_open_beneath(): no symlink followed, no length limit but
 * NAME_MAX per component), and check it against the plan's record.
 */
static int open_side(int rootfd, const char *rel, const struct im_plan_rec *rec,
		     enum role role, struct side *s, const char **why)
{
	int ret = open_side_dir(rootfd, rel, role, s, why);

	if (ret)
		return ret;
	s->fd = openat(s->dirfd, s->name,
		       O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY |
			       O_CLOEXEC);
	if (s->fd < 0) {
		int e = errno;

		*why = whys[role][e == ENOENT  ? R_GONE
				  : e == ELOOP ? R_SYMLINK
					       : R_OPEN];
		return e == ENOENT || e == ELOOP ? SKIP : -e;
	}
	if (fstat(s->fd, &s->st)) {
		*why = whys[role][R_OPEN];
		return -errno;
	}
	if (!S_ISREG(s->st.st_mode)) {
		*why = whys[role][R_NOT_REG];
		return SKIP;
	}
	if ((uint64_t)s->st.st_size != rec->size) {
		*why = whys[role][R_SIZE];
		return SKIP;
	}
	if (mtime_ns(&s->st) != rec->mtime_ns) {
		*why = whys[role][R_MTIME];
		return SKIP;
	}
	return 0;
}

static void close_side(struct side *s)
{
	if (s->fd >= 0)
		close(s->fd);
	if (s->dirfd >= 0)
		close(s->dirfd);
	s->fd = s->dirfd = -1;
	free(s->buf);
	s->buf = NULL;
}

/*
 * Hash both files and, when @p compare, compare their bytes on the way
 * (regular files: a read is short only at the end). *same is false when
 * they differ.
 */
#define CHUNK (128 * 1024)

static int hash_files(struct side *a, struct side *b, bool compare,
		      uint8_t ha[16], uint8_t hb[16], bool *same,
		      const char **why)
{
	XXH3_state_t *xa = XXH3_createState(), *xb = XXH3_createState();
	char *ba = malloc(CHUNK), *bb = malloc(CHUNK);
	off_t oa = 0, ob = 0;
	bool done_a = false, done_b = false;
	int ret = -ENOMEM;

	*same = true;
	if (!xa || !xb || !ba || !bb)
		goto out;
	XXH3_128bits_reset(xa);
	XXH3_128bits_reset(xb);
	while (!done_a || !done_b) {
		ssize_t ra = done_a ? 0 : pread(a->fd, ba, CHUNK, oa);
		ssize_t rb = done_b ? 0 : pread(b->fd, bb, CHUNK, ob);

		if (ra < 0 || rb < 0) {
			ret = -errno;
			*why = whys[ra < 0 ? FILE_ : KEEPER][R_READ];
			goto out;
		}
		XXH3_128bits_update(xa, ba, (size_t)ra);
		XXH3_128bits_update(xb, bb, (size_t)rb);
		if (compare && (ra != rb || memcmp(ba, bb, (size_t)ra)))
			*same = false;
		oa += ra;
		ob += rb;
		done_a = ra == 0;
		done_b = rb == 0;
	}
	{
		XXH128_canonical_t c;

		XXH128_canonicalFromHash(&c, XXH3_128bits_digest(xa));
		memcpy(ha, c.digest, 16);
		XXH128_canonicalFromHash(&c, XXH3_128bits_digest(xb));
		memcpy(hb, c.digest, 16);
	}
	ret = 0;
out:
	XXH3_freeState(xa);
	XXH3_freeState(xb);
	free(ba);
	free(bb);
	return ret;
}

/* ---- Extended attributes ------------------------------------------------------ */

/*
 * A hard link or a symlink gives the replaced path the keeper's extended
 * attributes, and ACLs are some (system.posix_acl_access): a file whose
 * ACL let someone in, or whose user.* attributes carried a tag or a
 * checksum, would lose them. A copy into the trash must carry them along.
 */

/* The names of @p fd's extended attributes, NUL-separated, in *names
 * (malloc'ed, NULL when there are none); a filesystem without them has
 * none. @return their bytes, or -errno. */
static ssize_t xattr_names(int fd, char **names)
{
	*names = NULL;
	for (;;) {
		ssize_t n = flistxattr(fd, NULL, 0), m;
		char *p;

		if (n <= 0)
			return n == 0 || errno == ENOTSUP ? 0 : -errno;
		p = malloc((size_t)n);
		if (!p)
			return -ENOMEM;
		m = flistxattr(fd, p, (size_t)n);
		if (m >= 0) {
			*names = p;
			return m;
		}
		free(p);
		if (errno != ERANGE) /* ERANGE: one was added meanwhile */
			return -errno;
	}
}

/* The value of @p name on @p fd in *value (malloc'ed). @return its length,
 * or -errno (-ENODATA: no such attribute). */
static ssize_t xattr_value(int fd, const char *name, char **value)
{
	for (;;) {
		ssize_t n = fgetxattr(fd, name, NULL, 0), m;
		char *p;

		if (n < 0)
			return -errno;
		p = malloc(n ? (size_t)n : 1);
		if (!p)
			return -ENOMEM;
		m = fgetxattr(fd, name, p, (size_t)n);
		if (m >= 0) {
			*value = p;
			return m;
		}
		free(p);
		if (errno != ERANGE)
			return -errno;
	}
}

/* Do @p a and @p b carry the same extended attributes, values included?
 * @return 1, 0, or -errno. */
static int same_xattrs(int a, int b)
{
	char *na, *nb;
	ssize_t la = xattr_names(a, &na), lb = xattr_names(b, &nb);
	int ret = la < 0 ? (int)la : lb < 0 ? (int)lb : la == lb;

	for (ssize_t i = 0; ret == 1 && i < la;
	     i += (ssize_t)strlen(na + i) + 1) {
		char *va = NULL, *vb = NULL;
		ssize_t ma = xattr_value(a, na + i, &va);
		ssize_t mb = xattr_value(b, na + i, &vb);

		if (ma < 0 && ma != -ENODATA)
			ret = (int)ma;
		else if (mb < 0 && mb != -ENODATA)
			ret = (int)mb;
		else
			ret = ma == mb &&
			      (ma < 0 || !memcmp(va, vb, (size_t)ma));
		free(va);
		free(vb);
	}
	free(na);
	free(nb);
	return ret;
}

/* Give @p to the extended attributes of @p from. @return 0, SKIP when
 * @p to's filesystem cannot hold one (or we may not set it), or -errno. */
static int copy_xattrs(int from, int to, const char **why)
{
	char *names;
	ssize_t len = xattr_names(from, &names);
	int ret = len < 0 ? (int)len : 0;

	*why = "reading the file's extended attributes";
	for (ssize_t i = 0; !ret && i < len;
	     i += (ssize_t)strlen(names + i) + 1) {
		char *v = NULL;
		ssize_t n = xattr_value(from, names + i, &v);

		if (n == -ENODATA) /* removed meanwhile */
			continue;
		if (n < 0) {
			ret = (int)n;
		} else if (fsetxattr(to, names + i, v, (size_t)n, 0)) {
			*why = "the trash cannot keep the file's extended "
			       "attributes or ACLs";
			ret = errno == ENOTSUP || errno == EPERM ||
					      errno == EACCES
				      ? SKIP
				      : -errno;
		}
		free(v);
	}
	free(names);
	return ret;
}

/* ---- Acting ------------------------------------------------------------------ */

/* Does @p name in @p dirfd lead to the inode that was verified, unchanged
 * (its owner and mode too, which a link to the keeper must match)? */
static bool verified_at(int dirfd, const char *name, const struct side *s)
{
	struct stat now;

	return !fstatat(dirfd, name, &now, AT_SYMLINK_NOFOLLOW) &&
	       now.st_dev == s->st.st_dev && now.st_ino == s->st.st_ino &&
	       mtime_ns(&now) == mtime_ns(&s->st) &&
	       now.st_size == s->st.st_size && now.st_mode == s->st.st_mode &&
	       now.st_uid == s->st.st_uid && now.st_gid == s->st.st_gid;
}

/* Is the side's own name still the verified inode, unchanged? */
static bool still_there(const struct side *s)
{
	return verified_at(s->dirfd, s->name, s);
}

/* A fresh name for a temporary file or link in the same directory. */
static void temp_name(char *buf, size_t len, unsigned attempt)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(buf, len, ".imatch-%ld-%lx-%u.tmp", (long)getpid(),
		 (unsigned long)ts.tv_nsec, attempt);
}

static const char *const trash_whys[4] = {
	"a directory on the way into the trash is a symlink",
	"a directory on the way into the trash is missing",
	"a component of the trash path is not a directory",
	"creating a directory in the trash",
};

/* Across filesystems: copy, check, link into place (never over anything),
 * then unlink the original. */
/* Blocks of zeros a copy leaves as holes. */
#define HOLE_BLOCK 4096

static bool all_zero(const char *p, size_t n)
{
	return n && !p[0] && !memcmp(p, p + 1, n - 1);
}

/* The length of the block at @p at of a buffer of @p n bytes. */
static size_t block_at(size_t n, size_t at)
{
	return n - at < HOLE_BLOCK ? n - at : HOLE_BLOCK;
}

/*
 * Write @p buf (@p n bytes) at @p off of @p fd, leaving blocks of zeros
 * unwritten, holes as in a sparse source (a 1 GiB sparse file took 1 GiB
 * in a trash on another filesystem), as cp and mv do. The caller sets the
 * size at the end. @return 0 or -errno.
 */
static int write_sparse(int fd, const char *buf, size_t n, off_t off)
{
	for (size_t b = 0; b < n;) {
		size_t e = b;

		/* A run of blocks that are not all zeros, written at once. */
		while (e < n && !all_zero(buf + e, block_at(n, e)))
			e += block_at(n, e);
		for (size_t w = b; w < e;) {
			ssize_t k = pwrite(fd, buf + w, e - w, off + (off_t)w);

			if (k < 0)
				return -errno;
			w += (size_t)k;
		}
		for (b = e; b < n && all_zero(buf + b, block_at(n, b));)
			b += block_at(n, b);
	}
	return 0;
}

/*
 * Ctrl-C, kill or a closed terminal (SIGINT, SIGTERM, SIGHUP) are held back
 * while a temporary name exists, and take effect once it is gone: a link
 * not yet renamed over the file, or a copy in the trash, would be left
 * behind. Reading and hashing stay interruptible (a stalled network file).
 */
static void hold_stop_signals(sigset_t *old)
{
	sigset_t s;

	sigemptyset(&s);
	sigaddset(&s, SIGINT);
	sigaddset(&s, SIGTERM);
	sigaddset(&s, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &s, old);
}

/* Whether one of them came while held: a long copy stops for it. */
static bool stop_asked(void)
{
	sigset_t s;

	return !sigpending(&s) &&
	       (sigismember(&s, SIGINT) == 1 || sigismember(&s, SIGTERM) == 1 ||
		sigismember(&s, SIGHUP) == 1);
}

/* What another program put at the file's name while we acted on it. */
static const char *const changed_midway = "the file changed during "
					  "verification";

/* Why a name could not be given back what was moved from it. */
static const char *const not_given_back = "the file changed during "
					  "verification, and giving its "
					  "name back";

/* A content left under another name, never removed: r->left says where,
 * @p tmp beside the file (or, NULL, @p r->dest in the trash), in @p dirfd.
 * The path is the directory's as it is now, when the kernel can say: a
 * folder renamed while apply worked leaves the plan's path leading
 * nowhere. @return @p err. */
static int left_behind(const struct im_plan_line *l, int dirfd, const char *tmp,
		       int err, const char *what, struct im_apply_result *r,
		       const char **why)
{
	const char *dir = tmp ? l->file.path : r->dest;
	const char *name = tmp ? tmp : strrchr(r->dest, '/') + 1;
	size_t len = (size_t)(strrchr(dir, '/') - dir);
	char proc[64], now[PATH_MAX];
	struct stat st;
	ssize_t n;

	*why = what;
	/* Nothing is there: another apply took it back for a killed one's,
	 * one that cannot see this one run (in another PID namespace, or on
	 * another machine sharing the folder). Never name an empty place. */
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) && errno == ENOENT) {
		*why = tmp ? "the file's temporary name was taken away "
			     "meanwhile (another apply that cannot see this "
			     "one run?)"
			   : "the file was taken out of the trash meanwhile";
		return err;
	}
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", dirfd);
	n = readlink(proc, now, sizeof(now));
	if (n > 0 && n < (ssize_t)sizeof(now) && now[0] == '/') {
		dir = now;
		len = n == 1 ? 0 : (size_t)n; /* "/" */
	}
	r->left = malloc(len + strlen(name) + 2);
	if (r->left)
		sprintf(r->left, "%.*s/%s", (int)len, dir, name);
	return err;
}

/*
 * Where renameat2() takes no flags (NFS, SMB and many FUSE filesystems):
 * the file is moved aside all the same, by a plain rename to a temporary
 * name found free a moment before (a rename onto a name someone creates
 * in that moment would replace it; no other program uses ours), so that
 * what is checked is still what was moved. @return as renameat2().
 */
static int move_aside_plain(const struct side *f, char *tmp, size_t len)
{
	struct stat st;

	for (unsigned i = 0; i < 100; i++) {
		temp_name(tmp, len, i);
		if (!fstatat(f->dirfd, tmp, &st, AT_SYMLINK_NOFOLLOW))
			continue;
		if (errno != ENOENT)
			return -errno;
		return renameat(f->dirfd, f->name, f->dirfd, tmp) ? -errno : 0;
	}
	return -EEXIST;
}

/* Give @p name back what was moved aside to @p tmp, never over what took
 * the name meanwhile: without RENAME_NOREPLACE a link, which fails on a
 * taken name too, then the temporary name's unlink. @return 0 or a
 * negative errno, the content then still at @p tmp. */
static int give_back(int dirfd, const char *tmp, const char *name)
{
	if (!renameat2(dirfd, tmp, dirfd, name, RENAME_NOREPLACE))
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -errno;
	if (linkat(dirfd, tmp, dirfd, name, 0))
		return -errno;
	return unlinkat(dirfd, tmp, 0) ? -errno : 0;
}

/*
 * Unlink the file's name only if it leads to the verified inode when it
 * goes. Checking the name and then unlinking it would leave a window in
 * which a rename over the name (an editor saving) made the unlink take
 * the new content; so the name is first moved to a temporary name beside
 * it (what that moves is what we check, whatever takes the name after),
 * the temporary checked, then unlinked. Anything else moved is given its
 * name back, never over whatever took the name meanwhile. Where the
 * filesystem has no RENAME_NOREPLACE, move_aside_plain() and give_back()
 * do without it. @p changed is the reason when the check fails. @p k, when
 * not NULL, is the keeper the file's content stays with: it is checked
 * again while the file is aside, as its name may have gone or been
 * replaced since it was last checked, and then the file is the last copy.
 */
static int unlink_verified(const struct im_plan_line *l, struct side *f,
			   const struct side *k, const char *changed,
			   struct im_apply_result *r, const char **why)
{
	char tmp[64];
	sigset_t old;
	int ret = -EEXIST;

	hold_stop_signals(&old);
	for (unsigned i = 0; ret == -EEXIST && i < 100; i++) {
		temp_name(tmp, sizeof(tmp), i);
		ret = renameat2(f->dirfd, f->name, f->dirfd, tmp,
				RENAME_NOREPLACE)
			      ? -errno
			      : 0;
	}
	if (ret == -EINVAL || ret == -ENOSYS)
		ret = move_aside_plain(f, tmp, sizeof(tmp));
	if (ret == -ENOENT) {
		/* Removed meanwhile (another apply of the plan): nothing
		 * was lost, nothing failed. */
		*why = whys[FILE_][R_GONE];
		ret = SKIP;
	} else if (ret) {
		*why = "removing the file";
	} else if (tmp[0]) {
		bool mine = verified_at(f->dirfd, tmp, f);
		bool kept = !k || still_there(k);
		int e = mine && kept && unlinkat(f->dirfd, tmp, 0) ? errno : 0;

		int back = !mine || !kept || e
				   ? give_back(f->dirfd, tmp, f->name)
				   : 0;

		if (back) {
			ret = left_behind(l, f->dirfd, tmp, back,
					  not_given_back, r, why);
		} else if (e) {
			ret = -e;
			*why = "removing the file";
		} else if (!mine) {
			ret = SKIP;
			*why = changed;
		} else if (!kept) {
			ret = SKIP;
			*why = "the keeper changed during verification";
		}
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return ret;
}

static int copy_across(const struct im_plan_line *l, struct side *f, int dfd,
		       const char *base, struct im_apply_result *r,
		       const char **why)
{
	char tmp[64], *buf = NULL;
	XXH3_state_t *x = NULL;
	int tfd = -1, ret = -ENOMEM;
	off_t off = 0;
	bool made = false;

	for (unsigned i = 0; tfd < 0 && i < 100; i++) {
		temp_name(tmp, sizeof(tmp), i);
		tfd = openat(dfd, tmp,
			     O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
				     O_CLOEXEC,
			     0600);
		if (tfd < 0 && errno != EEXIST) {
			*why = "creating a copy in the trash";
			return -errno;
		}
	}
	if (tfd < 0) {
		*why = "creating a copy in the trash";
		return -EEXIST;
	}
	made = true;
	buf = malloc(CHUNK);
	x = XXH3_createState();
	if (!buf || !x)
		goto out;
	XXH3_128bits_reset(x);
	for (;;) {
		ssize_t n = pread(f->fd, buf, CHUNK, off);

		if (n < 0) {
			ret = -errno;
			*why = whys[FILE_][R_READ];
			goto out;
		}
		if (n == 0)
			break;
		if (stop_asked()) {
			ret = -EINTR;
			*why = "interrupted while copying to the trash";
			goto out;
		}
		XXH3_128bits_update(x, buf, (size_t)n);
		ret = write_sparse(tfd, buf, (size_t)n, off);
		if (ret) {
			*why = "writing the copy in the trash";
			goto out;
		}
		off += n;
	}
	/* A file that ends in a hole: the copy's size as well. */
	if (ftruncate(tfd, off)) {
		ret = -errno;
		*why = "writing the copy in the trash";
		goto out;
	}
	{
		XXH128_canonical_t c;

		XXH128_canonicalFromHash(&c, XXH3_128bits_digest(x));
		if ((uint64_t)off != l->file.size ||
		    memcmp(c.digest, l->file.hash, 16)) {
			*why = "the file changed while it was copied to the "
			       "trash";
			ret = SKIP;
			goto out;
		}
	}
	if (fchmod(tfd, f->st.st_mode & 07777) ||
	    futimens(tfd, (struct timespec[2]){f->st.st_atim, f->st.st_mtim})) {
		ret = -errno;
		*why = "giving the copy the file's mode and times";
		goto out;
	}
	ret = copy_xattrs(f->fd, tfd, why);
	if (ret)
		goto out;
	/* The owner only when allowed (root); a user's copy is theirs. */
	if (fchown(tfd, f->st.st_uid, f->st.st_gid) && errno != EPERM) {
		ret = -errno;
		*why = "giving the copy the file's owner";
		goto out;
	}
	if (fsync(tfd)) {
		ret = -errno;
		*why = "writing the copy in the trash";
		goto out;
	}
	if (linkat(dfd, tmp, dfd, base, 0)) {
		ret = errno == EEXIST ? SKIP : -errno;
		*why = errno == EEXIST
			       ? "something is already at the destination in "
				 "the trash"
			       : "linking the copy into place in the trash";
		goto out;
	}
	/* Changed since: both stay, the copy verified, the original now
	 * different. */
	ret = unlink_verified(l, f, NULL,
			      "the file changed while it was copied; the copy "
			      "in the trash stays",
			      r, why);
	if (ret < 0 && !r->left)
		*why = "removing the file after copying it to the trash";
out:
	if (tfd >= 0)
		close(tfd);
	if (made)
		unlinkat(dfd, tmp, 0);
	free(buf);
	XXH3_freeState(x);
	return ret;
}

/*
 * Does @p base in @p dfd, on another filesystem than the file @p fd (@p st),
 * hold the file's bytes whole, with the size and mtime @p rec records and
 * the file's mode and extended attributes, as copy_across() makes it? Such
 * a copy is one linked into place by an apply killed before the file went:
 * the file may go now. Flushed first, as a copy is before its file goes.
 */
static bool holds_copy(int dfd, const char *base, int fd, const struct stat *st,
		       const struct im_plan_rec *rec)
{
	char *a = malloc(CHUNK), *b = malloc(CHUNK);
	struct stat cst;
	off_t off = 0;
	bool same = false;
	int cfd = openat(dfd, base,
			 O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY |
				 O_CLOEXEC);

	if (cfd < 0 || !a || !b || fstat(cfd, &cst) || !S_ISREG(cst.st_mode) ||
	    cst.st_dev == st->st_dev || (uint64_t)cst.st_size != rec->size ||
	    mtime_ns(&cst) != rec->mtime_ns ||
	    (cst.st_mode & 07777) != (st->st_mode & 07777) ||
	    same_xattrs(fd, cfd) != 1)
		goto out;
	for (;;) {
		ssize_t k = pread(fd, a, CHUNK, off);

		if (k < 0)
			goto out;
		if (k == 0)
			break;
		if (pread(cfd, b, (size_t)k, off) != k ||
		    memcmp(a, b, (size_t)k))
			goto out;
		off += k;
	}
	same = (uint64_t)off == rec->size && !fsync(cfd);
out:
	if (cfd >= 0)
		close(cfd);
	free(a);
	free(b);
	return same;
}

/*
 * Into the trash where the filesystem has no RENAME_NOREPLACE: the file is
 * moved aside as remove does, what moved is checked, then linked into the
 * trash (a link fails on a taken name) and its temporary name unlinked.
 * Linking the name itself and unlinking it would unlink whatever an
 * editor saved over it in between. @return as do_trash(), or -EXDEV
 * (the file back at its name) when the trash is on another filesystem.
 */
static int trash_plain(const struct im_plan_line *l, struct side *f, int dfd,
		       const char *base, struct im_apply_result *r,
		       const char **why)
{
	char tmp[64];
	sigset_t old;
	int ret, back;

	hold_stop_signals(&old);
	ret = move_aside_plain(f, tmp, sizeof(tmp));
	if (ret == -ENOENT) {
		/* Removed meanwhile (another apply of the plan). */
		*why = whys[FILE_][R_GONE];
		ret = SKIP;
		goto out;
	}
	if (ret) {
		*why = "moving the file into the trash";
		goto out;
	}
	if (!verified_at(f->dirfd, tmp, f)) {
		ret = SKIP;
		*why = changed_midway;
	} else if (linkat(f->dirfd, tmp, dfd, base, 0)) {
		ret = errno == EEXIST ? SKIP : -errno;
		*why = errno == EEXIST
			       ? "something is already at the destination in "
				 "the trash"
			       : "moving the file into the trash";
	} else {
		if (unlinkat(f->dirfd, tmp, 0))
			ret = left_behind(l, f->dirfd, tmp, -errno,
					  "removing the file after linking it "
					  "into the trash",
					  r, why);
		goto out;
	}
	back = give_back(f->dirfd, tmp, f->name);
	if (back)
		ret = left_behind(l, f->dirfd, tmp, back, not_given_back, r,
				  why);
out:
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return ret;
}

static int do_trash(const struct im_plan_line *l, int rootfd, struct side *f,
		    bool dry, struct im_apply_result *r, const char **why)
{
	const char *rel, *base = NULL;
	char *buf = NULL;
	struct stat st;
	sigset_t old;
	size_t len;
	int dfd = -1, ret, e;

	if (!l->trash || !(canonical(l->trash) || !strcmp(l->trash, "/"))) {
		*why = "the line's trash is not a canonical absolute path";
		return SKIP;
	}
	rel = below(l->file.path, l->root); /* checked by im_apply_line() */
	len = strlen(l->trash) + strlen(rel) + 2;
	r->dest = malloc(len);
	buf = malloc(len);
	if (!r->dest || !buf) {
		free(buf);
		*why = "out of memory";
		return -ENOMEM;
	}
	snprintf(r->dest, len, "%s/%s", strcmp(l->trash, "/") ? l->trash : "",
		 rel);
	memcpy(buf, r->dest, len);
	ret = open_parent(buf, !dry, strlen(buf) - strlen(rel), rootfd, &dfd,
			  &base, why, trash_whys);
	if (dry && ret == SKIP && *why == trash_whys[1])
		ret = 0; /* would be created */
	if (ret || dfd < 0) {
		free(buf);
		return ret;
	}
	if (!fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW)) {
		/* An apply killed between linking its copy into place and
		 * unlinking the file: the file goes, as it would have. */
		if (holds_copy(dfd, base, f->fd, &f->st, &l->file)) {
			if (!dry)
				ret = unlink_verified(
					l, f, NULL,
					"the file changed since it was copied; "
					"the copy in the trash stays",
					r, why);
			goto out;
		}
		*why = "something is already at the destination in the trash";
		ret = SKIP;
		goto out;
	}
	if (dry)
		goto out;
	if (!still_there(f)) {
		*why = changed_midway;
		ret = SKIP;
		goto out;
	}
	/* What the rename moved is what is checked: a rename over the name
	 * after the check above would otherwise send the new content to the
	 * trash. Anything else goes back, never over a name taken again. */
	hold_stop_signals(&old);
	if (!renameat2(f->dirfd, f->name, dfd, base, RENAME_NOREPLACE)) {
		if (!verified_at(dfd, base, f)) {
			if (renameat2(dfd, base, f->dirfd, f->name,
				      RENAME_NOREPLACE)) {
				ret = left_behind(l, dfd, NULL, -errno,
						  not_given_back, r, why);
			} else {
				ret = SKIP;
				*why = changed_midway;
			}
		}
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		goto out;
	}
	e = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (e == EINVAL || e == ENOSYS) {
		ret = trash_plain(l, f, dfd, base, r, why);
		if (ret != -EXDEV)
			goto out;
		e = EXDEV;
	}
	if (e == EEXIST) {
		*why = "something is already at the destination in the trash";
		ret = SKIP;
	} else if (e == ENOENT &&
		   fstatat(f->dirfd, f->name, &st, AT_SYMLINK_NOFOLLOW) &&
		   errno == ENOENT) {
		/* Moved or removed meanwhile (another apply of the plan):
		 * nothing was lost, nothing failed. */
		*why = whys[FILE_][R_GONE];
		ret = SKIP;
	} else if (e == EXDEV) {
		hold_stop_signals(&old);
		ret = copy_across(l, f, dfd, base, r, why);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	} else {
		ret = -e;
		*why = "moving the file into the trash";
	}
out:
	close(dfd);
	free(buf);
	return ret;
}

/*
 * Is what @p name holds the link we made, @p mine? A symlink's inode is
 * held open by nothing: once another program removes it, its number can
 * go to the next file made (ext4 gives it at once), so a symlink is known
 * by its target too. A hard link is the keeper's inode, held open.
 */
static bool is_mine(int dirfd, const char *name, const struct stat *mine,
		    const struct im_plan_line *l)
{
	size_t len = strlen(l->keeper.path);
	char target[PATH_MAX];
	struct stat st;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) ||
	    st.st_dev != mine->st_dev || st.st_ino != mine->st_ino ||
	    (st.st_mode & S_IFMT) != (mine->st_mode & S_IFMT))
		return false;
	return !S_ISLNK(st.st_mode) ||
	       (readlinkat(dirfd, name, target, sizeof(target)) ==
			(ssize_t)len &&
		!memcmp(target, l->keeper.path, len));
}

/* A keeper that can take no more hard links (65,000 on ext4). */
static const char *const link_limit = "the keeper has as many hard links as "
				      "its filesystem allows";

/*
 * Where the filesystem cannot exchange two names (NFS, SMB, many FUSE
 * filesystems): the file is moved aside as remove does, what moved is
 * checked, and the link is put at the name by a call that fails on a
 * taken name (link, symlink), never renamed over it: an editor saving
 * over the name a moment before keeps its new content. Anything else
 * moved gets its name back. @p tmp holds our link, @p mine its inode.
 */
static int swap_plain(const struct im_plan_line *l, struct side *f,
		      struct side *k, const char *tmp, const struct stat *mine,
		      struct im_apply_result *r, const char **why)
{
	const char *skip = changed_midway;
	char aside[64];
	struct stat st;
	bool ok;
	int ret = move_aside_plain(f, aside, sizeof(aside)), back;

	if (ret) {
		unlinkat(f->dirfd, tmp, 0);
		if (ret == -ENOENT) {
			/* Removed meanwhile (another apply of the plan). */
			*why = whys[FILE_][R_GONE];
			return SKIP;
		}
		*why = "moving the file aside";
		return ret;
	}
	/* Already a link of the keeper: another apply of the same plan. */
	ok = verified_at(f->dirfd, aside, f) ||
	     (l->action == IM_ACT_HARDLINK &&
	      !fstatat(f->dirfd, aside, &st, AT_SYMLINK_NOFOLLOW) &&
	      st.st_dev == k->st.st_dev && st.st_ino == k->st.st_ino);
	/* A symlink holds no bytes: see link_over(). */
	if (ok && l->action == IM_ACT_SYMLINK && !still_there(k)) {
		ok = false;
		skip = "the keeper changed during verification";
	}
	if (ok && (l->action == IM_ACT_SYMLINK
			   ? symlinkat(l->keeper.path, f->dirfd, f->name)
			   : linkat(f->dirfd, tmp, f->dirfd, f->name, 0))) {
		ok = false;
		ret = -errno;
		skip = "putting the link at the file's name";
		/* Our link under the temporary name took the keeper's last
		 * link but one: the limit, skipped as in link_over(). */
		if (ret == -EMLINK) {
			ret = 0;
			skip = link_limit;
		}
	}
	if (is_mine(f->dirfd, tmp, mine, l))
		unlinkat(f->dirfd, tmp, 0);
	if (ok) {
		if (unlinkat(f->dirfd, aside, 0))
			return left_behind(l, f->dirfd, aside, -errno,
					   "removing the file after the link "
					   "took its name",
					   r, why);
		return 0;
	}
	back = give_back(f->dirfd, aside, f->name);
	if (back)
		return left_behind(l, f->dirfd, aside, back, not_given_back, r,
				   why);
	*why = skip;
	return ret ? ret : SKIP;
}

/* The link (or symlink) to the verified keeper under a temporary name,
 * exchanged with the file's name. */
static int link_over(const struct im_plan_line *l, struct side *f,
		     struct side *k, struct im_apply_result *r,
		     const char **why)
{
	char tmp[64], proc[64];
	int ret = -EEXIST;

	/* Through /proc the link is made to the very inode verified. */
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", k->fd);
	for (unsigned i = 0; ret == -EEXIST && i < 100; i++) {
		int e;

		temp_name(tmp, sizeof(tmp), i);
		if (l->action == IM_ACT_SYMLINK)
			e = symlinkat(l->keeper.path, f->dirfd, tmp);
		else if ((e = linkat(AT_FDCWD, proc, f->dirfd, tmp,
				     AT_SYMLINK_FOLLOW)) &&
			 errno == ENOENT)
			e = linkat(k->dirfd, k->name, f->dirfd, tmp, 0);
		ret = e ? -errno : 0;
	}
	if (ret == -EXDEV) {
		/* One filesystem, two mounts of it (a bind mount): a hard
		 * link cannot cross them either. */
		*why = "the keeper is on another mount";
		return SKIP;
	}
	if (ret == -EMLINK) {
		/* A filesystem's limit (65,000 on ext4), not a failure:
		 * the file stays, as across filesystems. */
		*why = link_limit;
		return SKIP;
	}
	if (ret) {
		*why = "making the link under a temporary name";
		return ret;
	}
	/*
	 * The link must reach the verified keeper. The /proc link fails with
	 * ENOENT too when the keeper's inode was unlinked meanwhile, and the
	 * fallback then links whatever now has the keeper's name; a symlink
	 * reaches whatever has it. Renamed over the file, either would lose
	 * the file's bytes, their last copy once the keeper was replaced.
	 */
	struct stat st;

	if (fstatat(f->dirfd, tmp, &st,
		    l->action == IM_ACT_HARDLINK ? AT_SYMLINK_NOFOLLOW : 0) ||
	    st.st_dev != k->st.st_dev || st.st_ino != k->st.st_ino) {
		unlinkat(f->dirfd, tmp, 0);
		*why = "the keeper changed during verification";
		return SKIP;
	}
	/* The link's own inode (a symlink's, not its target's): what must
	 * be back under the temporary name if we swap back. */
	struct stat mine;

	if (fstatat(f->dirfd, tmp, &mine, AT_SYMLINK_NOFOLLOW)) {
		ret = -errno;
		*why = "making the link under a temporary name";
		unlinkat(f->dirfd, tmp, 0);
		return ret;
	}
	/*
	 * Swapped, not renamed over: the temporary name then holds what the
	 * file's name held at that instant, to be checked before it goes. A
	 * rename over the name after still_there() (an editor saving) would
	 * otherwise be replaced, its new content lost.
	 */
	if (renameat2(f->dirfd, tmp, f->dirfd, f->name, RENAME_EXCHANGE)) {
		int e = errno;

		if (e == EINVAL || e == ENOSYS)
			return swap_plain(l, f, k, tmp, &mine, r, why);
		unlinkat(f->dirfd, tmp, 0);
		if (e == ENOENT) {
			/* Removed meanwhile (another apply of the plan). */
			*why = whys[FILE_][R_GONE];
			return SKIP;
		}
		*why = "renaming the link over the file";
		return -e;
	}
	/* An exchange of two links of one inode does nothing: the file was
	 * made a link of the keeper meanwhile (another apply of the same
	 * plan), and the name holds what it should. */
	bool done = verified_at(f->dirfd, tmp, f) ||
		    (l->action == IM_ACT_HARDLINK &&
		     !fstatat(f->dirfd, tmp, &st, AT_SYMLINK_NOFOLLOW) &&
		     st.st_dev == k->st.st_dev && st.st_ino == k->st.st_ino);
	/* A symlink holds no bytes: if the keeper's name went or was
	 * replaced since it was checked, the file is the last copy, and it
	 * gets its name back. A hard link holds the keeper's inode itself. */
	const char *skip = changed_midway;

	if (done && l->action == IM_ACT_SYMLINK && !still_there(k)) {
		done = false;
		skip = "the keeper changed during verification";
	}
	if (done) {
		if (unlinkat(f->dirfd, tmp, 0))
			return left_behind(l, f->dirfd, tmp, -errno,
					   "removing the file after the link "
					   "took its name",
					   r, why);
		return 0;
	}
	/* Something else had the name: it gets it back, and only our link,
	 * come back to the temporary name, is removed. */
	if (renameat2(f->dirfd, tmp, f->dirfd, f->name, RENAME_EXCHANGE)) {
		if (errno != ENOENT || renameat2(f->dirfd, tmp, f->dirfd,
						 f->name, RENAME_NOREPLACE))
			return left_behind(l, f->dirfd, tmp, -errno,
					   not_given_back, r, why);
	} else if (!is_mine(f->dirfd, tmp, &mine, l)) {
		return left_behind(l, f->dirfd, tmp, -EEXIST, not_given_back, r,
				   why);
	} else {
		unlinkat(f->dirfd, tmp, 0);
	}
	*why = skip;
	return SKIP;
}

/* Replace the file by a hard link to, or a symlink at, the keeper: made
 * under a temporary name, exchanged with the file. */
static int do_replace(const struct im_plan_line *l, struct side *f,
		      struct side *k, bool dry, struct im_apply_result *r,
		      const char **why)
{
	sigset_t old;
	int ret;

	if (!l->exact) {
		*why = "hardlink and symlink replace exact copies only";
		return SKIP;
	}
	if (l->action == IM_ACT_HARDLINK && f->st.st_dev != k->st.st_dev) {
		*why = "the keeper is on another filesystem";
		return SKIP;
	}
	/* Whoever opens the path afterwards meets the keeper's inode, its
	 * owner and mode: a private copy would become as readable (and
	 * writable, chmod-able) as the keeper. A symlink too: access goes
	 * through to its target. */
	if (f->st.st_uid != k->st.st_uid || f->st.st_gid != k->st.st_gid ||
	    (f->st.st_mode & 07777) != (k->st.st_mode & 07777)) {
		*why = "owner, group or mode differs from the keeper's";
		return SKIP;
	}
	ret = same_xattrs(f->fd, k->fd);
	if (ret <= 0) {
		*why = ret ? "reading extended attributes"
			   : "extended attributes or ACLs differ from the "
			     "keeper's";
		return ret ? ret : SKIP;
	}
	/* The target is the keeper's absolute path: longer than a symlink
	 * can hold (PATH_MAX with its NUL) it cannot be made. */
	if (l->action == IM_ACT_SYMLINK && strlen(l->keeper.path) >= PATH_MAX) {
		*why = "the keeper's path is too long for a symlink";
		return SKIP;
	}
	if (dry)
		return 0;
	if (!still_there(f) || !still_there(k)) {
		*why = "the file or the keeper changed during verification";
		return SKIP;
	}
	hold_stop_signals(&old);
	ret = link_over(l, f, k, r, why);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return ret;
}

/* ---- Shared extents ------------------------------------------------------ */

/* Extents read per FIEMAP call. */
#define FIEMAP_BATCH 64

/* What an extent must not be to be compared by its physical address. */
#define EXTENT_UNCLEAR                                                         \
	(FIEMAP_EXTENT_UNKNOWN | FIEMAP_EXTENT_DELALLOC |                      \
	 FIEMAP_EXTENT_DATA_INLINE | FIEMAP_EXTENT_DATA_TAIL |                 \
	 FIEMAP_EXTENT_NOT_ALIGNED)

struct extents {
	struct fiemap_extent *v;
	size_t n, cap;
};

/* Every extent of @p fd in logical order. @return false if the filesystem
 * cannot say or memory is short. */
static bool read_extents(int fd, struct extents *e)
{
	uint64_t buf[(sizeof(struct fiemap) +
		      FIEMAP_BATCH * sizeof(struct fiemap_extent)) /
		     sizeof(uint64_t)];
	struct fiemap *fm = (struct fiemap *)buf;
	uint64_t start = 0;

	for (;;) {
		memset(buf, 0, sizeof(buf));
		fm->fm_start = start;
		fm->fm_length = FIEMAP_MAX_OFFSET - start;
		fm->fm_extent_count = FIEMAP_BATCH;
		if (ioctl(fd, FS_IOC_FIEMAP, fm))
			return false;
		if (!fm->fm_mapped_extents)
			return true;
		for (uint32_t i = 0; i < fm->fm_mapped_extents; i++) {
			const struct fiemap_extent *x = &fm->fm_extents[i];

			if (e->n == e->cap) {
				size_t cap = e->cap ? 2 * e->cap : 16;
				void *v = realloc(e->v, cap * sizeof(*e->v));

				if (!v)
					return false;
				e->v = v;
				e->cap = cap;
			}
			e->v[e->n++] = *x;
			if (x->fe_flags & FIEMAP_EXTENT_LAST)
				return true;
			start = x->fe_logical + x->fe_length;
		}
	}
}

/* The extent of @p e holding byte @p pos from index *i on, or NULL for a
 * hole; *i moves past the extents that end before @p pos. */
static const struct fiemap_extent *extent_at(const struct extents *e, size_t *i,
					     uint64_t pos)
{
	while (*i < e->n && e->v[*i].fe_logical + e->v[*i].fe_length <= pos)
		++*i;
	return *i < e->n && e->v[*i].fe_logical <= pos ? &e->v[*i] : NULL;
}

/* Where the hole at @p pos ends: the next extent's start, or @p size. */
static uint64_t hole_end(const struct extents *e, size_t i, uint64_t size)
{
	return i < e->n && e->v[i].fe_logical < size ? e->v[i].fe_logical
						     : size;
}

bool im_shares_extents(int a, int b, uint64_t size)
{
	struct extents ea = {NULL, 0, 0}, eb = {NULL, 0, 0};
	size_t i = 0, j = 0;
	uint64_t pos = 0;
	bool same = size > 0 && read_extents(a, &ea) && read_extents(b, &eb);

	while (same && pos < size) {
		const struct fiemap_extent *x = extent_at(&ea, &i, pos);
		const struct fiemap_extent *y = extent_at(&eb, &j, pos);
		uint64_t end;

		if (!x || !y) {
			/* A hole must be one in both. */
			same = !x && !y;
			end = hole_end(&ea, i, size);
			if (end > hole_end(&eb, j, size))
				end = hole_end(&eb, j, size);
			pos = end;
			continue;
		}
		/* An encoded (compressed) extent's bytes are not at a linear
		 * offset from its start: only the same extent is the same. */
		if ((x->fe_flags | y->fe_flags) & EXTENT_UNCLEAR ||
		    (((x->fe_flags | y->fe_flags) & FIEMAP_EXTENT_ENCODED) &&
		     (x->fe_logical != y->fe_logical ||
		      x->fe_physical != y->fe_physical ||
		      x->fe_length != y->fe_length))) {
			same = false;
			break;
		}
		same = x->fe_physical + (pos - x->fe_logical) ==
		       y->fe_physical + (pos - y->fe_logical);
		end = x->fe_logical + x->fe_length;
		if (end > y->fe_logical + y->fe_length)
			end = y->fe_logical + y->fe_length;
		pos = end;
	}
	free(ea.v);
	free(eb.v);
	return same;
}

/* The most one FIDEDUPERANGE call shares: btrfs stops at 16 MiB a call. */
#define DEDUPE_CHUNK ((uint64_t)16 << 20)

/* What a failed FIDEDUPERANGE (errno @p e) makes of the line. */
static int dedupe_failed(int e, const char **why)
{
	if (e == EOPNOTSUPP || e == ENOTTY || e == EINVAL || e == EXDEV) {
		*why = "the filesystem cannot share extents (reflink)";
		return SKIP;
	}
	*why = e == EPERM || e == EACCES || e == EBADF
		       ? "no permission to share the file's extents"
		       : "sharing the keeper's extents";
	return e == EPERM || e == EACCES || e == EBADF ? SKIP : -e;
}

/* The request and its one destination, suitably aligned. */
#define DEDUPE_BUF_WORDS                                                       \
	((sizeof(struct file_dedupe_range) +                                   \
	  sizeof(struct file_dedupe_range_info)) /                             \
		 sizeof(uint64_t) +                                            \
	 1)

/*
 * For a dry run: whether the file's extents could be shared with the
 * keeper's. A request of zero bytes is refused where sharing is (ext4, a
 * filesystem without reflink, no permission) and returns at once, sharing
 * nothing, where it is not: the kernel's "zero length dedupe exits
 * immediately". @return 0, SKIP or a negative errno, as share_extents().
 */
static int could_share_extents(int keeper_fd, int file_fd, const char **why)
{
	uint64_t buf[DEDUPE_BUF_WORDS];
	struct file_dedupe_range *req = (struct file_dedupe_range *)buf;

	memset(buf, 0, sizeof(buf));
	req->dest_count = 1;
	req->info[0].dest_fd = file_fd;
	if (ioctl(keeper_fd, FIDEDUPERANGE, req))
		return dedupe_failed(errno, why);
	if (req->info[0].status < 0) {
		*why = "sharing the keeper's extents";
		return req->info[0].status;
	}
	return 0;
}

/*
 * Share the keeper's extents with the file, @p size bytes, a chunk at a
 * time. The kernel locks both files and compares each range before it
 * shares it, so a change since our own check comes back as a difference,
 * never as lost data; a failure part way leaves both files whole, some of
 * the range shared.
 */
static int share_extents(int keeper_fd, int file_fd, uint64_t size,
			 const char **why)
{
	uint64_t buf[DEDUPE_BUF_WORDS];
	struct file_dedupe_range *req = (struct file_dedupe_range *)buf;
	uint64_t off = 0;

	while (off < size) {
		uint64_t n =
			size - off < DEDUPE_CHUNK ? size - off : DEDUPE_CHUNK;

		memset(buf, 0, sizeof(buf));
		req->src_offset = off;
		req->src_length = n;
		req->dest_count = 1;
		req->info[0].dest_fd = file_fd;
		req->info[0].dest_offset = off;
		if (ioctl(keeper_fd, FIDEDUPERANGE, req))
			return dedupe_failed(errno, why);
		if (req->info[0].status == FILE_DEDUPE_RANGE_DIFFERS) {
			*why = "the file and the keeper differ (the kernel "
			       "compared them)";
			return SKIP;
		}
		if (req->info[0].status < 0) {
			*why = "sharing the keeper's extents";
			return req->info[0].status;
		}
		if (!req->info[0].bytes_deduped) {
			*why = "the filesystem shared none of the extents";
			return SKIP;
		}
		off += req->info[0].bytes_deduped;
	}
	return 0;
}

/* Make the file share the keeper's data (IM_ACT_REFLINK). Each name keeps
 * its own inode, owner, mode and attributes: nothing to compare there. */
static int do_reflink(const struct im_plan_line *l, struct side *f,
		      struct side *k, bool dry, const char **why)
{
	if (!l->exact) {
		*why = "reflink shares the data of exact copies only";
		return SKIP;
	}
	if (f->st.st_dev != k->st.st_dev) {
		*why = "the keeper is on another filesystem";
		return SKIP;
	}
	if (dry)
		return could_share_extents(k->fd, f->fd, why);
	if (!still_there(f) || !still_there(k)) {
		*why = "the file or the keeper changed during verification";
		return SKIP;
	}
	return share_extents(k->fd, f->fd, (uint64_t)f->st.st_size, why);
}

int im_apply_line(const struct im_plan_line *l, bool dry_run,
		  struct im_apply_result *r)
{
	struct side f = {.dirfd = -1, .fd = -1}, k = {.dirfd = -1, .fd = -1};
	uint8_t hf[16], hk[16];
	const char *why = NULL, *rel_f = NULL, *rel_k = NULL;
	bool same;
	int rootfd = -1, ret = SKIP;

	memset(r, 0, sizeof(*r));
	if (!canonical(l->file.path))
		why = "the file's path is not a canonical absolute path";
	else if (!canonical(l->keeper.path))
		why = "the keeper's path is not a canonical absolute path";
	else if (!l->root || !(canonical(l->root) || !strcmp(l->root, "/")))
		why = "the line's root is not a canonical absolute path";
	else if (!(rel_f = below(l->file.path, l->root)))
		why = "the file is not under the plan's root";
	else if (!(rel_k = below(l->keeper.path, l->root)))
		why = "the keeper is not under the plan's root";
	else if (!strcmp(l->file.path, l->keeper.path))
		why = "the file is its own keeper";
	if (why)
		goto out;
	/* Both sides below one fd: however long the paths, and below the
	 * very directory the line names. */
	ret = open_root(l->root, &rootfd, &why);
	if (ret)
		goto out;
	ret = open_side(rootfd, rel_f, &l->file, FILE_, &f, &why);
	if (ret)
		goto out;
	ret = open_side(rootfd, rel_k, &l->keeper, KEEPER, &k, &why);
	if (ret)
		goto out;
	ret = SKIP;
	if (f.st.st_dev == k.st.st_dev && f.st.st_ino == k.st.st_ino) {
		why = "the file and the keeper are the same inode";
		goto out;
	}
	if (l->exact && l->file.size != l->keeper.size) {
		why = "an exact line whose sizes differ";
		goto out;
	}
	/* Reflinked before (a plan made again): nothing to do, nothing to
	 * read. */
	if (l->action == IM_ACT_REFLINK && f.st.st_size == k.st.st_size &&
	    im_shares_extents(k.fd, f.fd, (uint64_t)f.st.st_size)) {
		why = "the file already shares the keeper's extents";
		goto out;
	}
	ret = hash_files(&f, &k, l->exact, hf, hk, &same, &why);
	if (ret)
		goto out;
	ret = SKIP;
	if (memcmp(hf, l->file.hash, 16))
		why = whys[FILE_][R_CONTENT];
	else if (memcmp(hk, l->keeper.hash, 16))
		why = whys[KEEPER][R_CONTENT];
	else if (l->exact && !same)
		why = "the file and the keeper differ, though the plan says "
		      "exact";
	if (why)
		goto out;

	ret = 0;
	switch (l->action) {
	case IM_ACT_REMOVE:
		if (dry_run)
			break;
		if (!still_there(&f) || !still_there(&k)) {
			why = "the file or the keeper changed during "
			      "verification";
			ret = SKIP;
		} else {
			ret = unlink_verified(l, &f, &k, changed_midway, r,
					      &why);
		}
		break;
	case IM_ACT_TRASH:
		if (!still_there(&k)) {
			why = "the keeper changed during verification";
			ret = SKIP;
			break;
		}
		ret = do_trash(l, rootfd, &f, dry_run, r, &why);
		break;
	case IM_ACT_HARDLINK:
	case IM_ACT_SYMLINK:
		ret = do_replace(l, &f, &k, dry_run, r, &why);
		break;
	case IM_ACT_REFLINK: ret = do_reflink(l, &f, &k, dry_run, &why); break;
	}
out:
	close_side(&f);
	close_side(&k);
	if (rootfd >= 0)
		close(rootfd);
	r->why = why;
	r->outcome = ret == 0 ? IM_APPLY_DONE : IM_APPLY_SKIPPED;
	return ret == SKIP ? 0 : ret;
}

void im_apply_result_release(struct im_apply_result *r)
{
	free(r->dest);
	free(r->left);
	r->dest = r->left = NULL;
}

/* ---- What a killed apply left ------------------------------------------------ */

/* Was @p tmp made by temp_name() in a process that is gone? A live one may
 * still be at work on it. */
static bool made_by_gone_apply(const char *tmp)
{
	size_t len = strlen(tmp);
	char *end;
	long pid;

	if (strncmp(tmp, ".imatch-", 8) || len < 12 ||
	    strcmp(tmp + len - 4, ".tmp") || strchr(tmp, '/'))
		return false;
	errno = 0;
	pid = strtol(tmp + 8, &end, 10);
	if (errno || pid <= 0 || pid > INT_MAX || *end != '-')
		return false;
	return pid != getpid() && kill((pid_t)pid, 0) && errno == ESRCH;
}

/* Does @p name hold a link to the keeper as @p l's action makes it: a hard
 * link of the keeper's inode @p k (NULL: the keeper is gone), or a symlink
 * to its path? Either holds no bytes of its own. */
static bool is_link_to_keeper(int dirfd, const char *name,
			      const struct im_plan_line *l,
			      const struct stat *k)
{
	size_t len = strlen(l->keeper.path);
	char target[PATH_MAX];
	struct stat st;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW))
		return false;
	if (l->action == IM_ACT_HARDLINK)
		return k && S_ISREG(st.st_mode) && st.st_dev == k->st_dev &&
		       st.st_ino == k->st_ino;
	return l->action == IM_ACT_SYMLINK && S_ISLNK(st.st_mode) &&
	       readlinkat(dirfd, name, target, sizeof(target)) ==
		       (ssize_t)len &&
	       !memcmp(target, l->keeper.path, len);
}

/* Is @p name the file @p rec records (size, mtime, content hash), under
 * that one name only? */
static bool is_recorded_file(int dirfd, const char *name,
			     const struct im_plan_rec *rec)
{
	XXH3_state_t *x = XXH3_createState();
	char *buf = malloc(CHUNK);
	struct stat st;
	off_t off = 0;
	bool same = false;
	int fd = openat(dirfd, name,
			O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY |
				O_CLOEXEC);

	if (fd < 0 || !x || !buf || fstat(fd, &st) || !S_ISREG(st.st_mode) ||
	    st.st_nlink != 1 || (uint64_t)st.st_size != rec->size ||
	    mtime_ns(&st) != rec->mtime_ns)
		goto out;
	XXH3_128bits_reset(x);
	for (;;) {
		ssize_t n = pread(fd, buf, CHUNK, off);

		if (n < 0)
			goto out;
		if (n == 0)
			break;
		XXH3_128bits_update(x, buf, (size_t)n);
		off += n;
	}
	{
		XXH128_canonical_t c;

		XXH128_canonicalFromHash(&c, XXH3_128bits_digest(x));
		same = (uint64_t)off == rec->size &&
		       !memcmp(c.digest, rec->hash, 16);
	}
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	XXH3_freeState(x);
	return same;
}

/* The directory of @p l's destination in the trash, the trash and @p rel
 * (the file's path below the root), opened without following a symlink
 * or creating anything: *dfd, and *base its last component in *buf, which
 * the caller frees. @return 0, -ENOMEM, or not 0 when it cannot be opened
 * (nothing to free then). */
static int open_dest_dir(const struct im_plan_line *l, const char *rel,
			 int *dfd, char **buf, const char **base)
{
	const char *why;
	size_t len;
	int ret;

	*dfd = -1;
	*buf = NULL;
	if (l->action != IM_ACT_TRASH || !l->trash ||
	    !(canonical(l->trash) || !strcmp(l->trash, "/")))
		return -EINVAL; /* apply skips the line */
	len = strlen(l->trash) + strlen(rel) + 2;
	*buf = malloc(len);
	if (!*buf)
		return -ENOMEM;
	snprintf(*buf, len, "%s/%s", strcmp(l->trash, "/") ? l->trash : "",
		 rel);
	ret = open_parent(*buf, false, len, -1, dfd, base, &why, trash_whys);
	if (ret || *dfd < 0) {
		free(*buf);
		*buf = NULL;
		return ret ? ret : -ENOENT;
	}
	return 0;
}

/*
 * Is @p l a trash line already done: its destination, the trash and @p rel,
 * the file's path below the root, holding what the line records? Two
 * copies in a folder with the same bytes and mtime (cp -p) both match the
 * one a killed apply moved aside, and the name of the copy it trashed
 * before is free: given that name back, the file went into the trash
 * under it, or stayed (that name was taken in the trash) while its own
 * name was gone.
 */
static bool trashed(const struct im_plan_line *l, const char *rel)
{
	const char *base;
	char *buf;
	int dfd, ret = open_dest_dir(l, rel, &dfd, &buf, &base);
	bool done;

	if (ret == -ENOMEM)
		return true; /* unknown: the file stays aside */
	if (ret)
		return false;
	done = is_recorded_file(dfd, base, &l->file);
	close(dfd);
	free(buf);
	return done;
}

/* Is @p name in @p dirfd another name of the regular file at @p l's
 * destination in the trash, which has the size and mtime the line
 * records? The trash then holds what @p name does. */
static bool trashed_as(const struct im_plan_line *l, const char *rel, int dirfd,
		       const char *name)
{
	const char *base;
	char *buf;
	struct stat a, b;
	int dfd;
	bool same;

	if (open_dest_dir(l, rel, &dfd, &buf, &base))
		return false;
	same = !fstatat(dirfd, name, &a, AT_SYMLINK_NOFOLLOW) &&
	       !fstatat(dfd, base, &b, AT_SYMLINK_NOFOLLOW) &&
	       S_ISREG(b.st_mode) && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino && (uint64_t)b.st_size == l->file.size &&
	       mtime_ns(&b) == l->file.mtime_ns;
	close(dfd);
	free(buf);
	return same;
}

/* Are @p a and @p b in @p dirfd two names of one regular file? */
static bool same_file(int dirfd, const char *a, const char *b)
{
	struct stat sa, sb;

	return !fstatat(dirfd, a, &sa, AT_SYMLINK_NOFOLLOW) &&
	       !fstatat(dirfd, b, &sb, AT_SYMLINK_NOFOLLOW) &&
	       S_ISREG(sa.st_mode) && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

/* Is @p name in @p dirfd, the file moved aside, already copied whole into
 * the trash on another filesystem, at @p l's destination (holds_copy())? */
static bool copied_to_trash(const struct im_plan_line *l, const char *rel,
			    int dirfd, const char *name)
{
	const char *base;
	char *buf;
	struct stat st;
	int dfd, fd;
	bool copied = false;

	if (open_dest_dir(l, rel, &dfd, &buf, &base))
		return false;
	fd = openat(dirfd, name,
		    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd >= 0) {
		copied = !fstat(fd, &st) &&
			 holds_copy(dfd, base, fd, &st, &l->file);
		close(fd);
	}
	close(dfd);
	free(buf);
	return copied;
}

/*
 * The file at @p tmp gets its name back from the link to the keeper that
 * took it, which then goes: exchanged with it; or, where the filesystem
 * cannot exchange names, the link moved aside as the file was
 * (move_aside_plain()), checked, and the file linked back, which fails on
 * a taken name. Whatever else is met at the name keeps it or gets it
 * back. @return as im_apply_reclaim().
 */
static int swap_back(const struct im_plan_line *l, struct side *f,
		     const char *tmp, const struct stat *k, const char **what)
{
	char link[64];
	int ret;

	if (!renameat2(f->dirfd, tmp, f->dirfd, f->name, RENAME_EXCHANGE)) {
		if (!is_link_to_keeper(f->dirfd, tmp, l, k)) {
			/* The name was taken again meanwhile: that gets it
			 * back, the file stays aside. */
			renameat2(f->dirfd, tmp, f->dirfd, f->name,
				  RENAME_EXCHANGE);
			return 0;
		}
		ret = unlinkat(f->dirfd, tmp, 0) ? -errno : 1;
	} else if ((errno != EINVAL && errno != ENOSYS) ||
		   move_aside_plain(f, link, sizeof(link))) {
		return 0;
	} else if (!is_link_to_keeper(f->dirfd, link, l, k) ||
		   linkat(f->dirfd, tmp, f->dirfd, f->name, 0)) {
		ret = give_back(f->dirfd, link, f->name);
		*what = "giving its name back to what had it";
		return ret;
	} else {
		ret = unlinkat(f->dirfd, link, 0) || unlinkat(f->dirfd, tmp, 0)
			      ? -errno
			      : 1;
	}
	*what = ret < 0 ? "removing the link after giving the file its name "
			  "back"
			: "the file, given its name back from the link that "
			  "took it";
	return ret;
}

int im_apply_reclaim(const struct im_plan_line *l, const char *tmp,
		     const char **what)
{
	struct side f = {.dirfd = -1, .fd = -1}, k = {.dirfd = -1, .fd = -1};
	const char *why = NULL, *rel_f, *rel_k;
	struct stat kst;
	bool keeper;
	sigset_t old;
	int rootfd = -1, ret = 0;

	*what = NULL;
	if (!made_by_gone_apply(tmp) || !canonical(l->file.path) ||
	    !canonical(l->keeper.path) || !l->root ||
	    !(canonical(l->root) || !strcmp(l->root, "/")) ||
	    !(rel_f = below(l->file.path, l->root)) ||
	    !(rel_k = below(l->keeper.path, l->root)))
		return 0;
	if (open_root(l->root, &rootfd, &why) ||
	    open_side_dir(rootfd, rel_f, FILE_, &f, &why))
		goto out;
	keeper = !open_side_dir(rootfd, rel_k, KEEPER, &k, &why) &&
		 !fstatat(k.dirfd, k.name, &kst, AT_SYMLINK_NOFOLLOW) &&
		 S_ISREG(kst.st_mode);
	hold_stop_signals(&old);
	if (l->action == IM_ACT_TRASH && trashed_as(l, rel_f, f.dirfd, tmp)) {
		/* Linked into the trash (no rename flags), its temporary
		 * name not yet unlinked. */
		ret = unlinkat(f.dirfd, tmp, 0) ? -errno : 1;
		*what = ret < 0 ? "removing it"
				: "a second name of the file in the trash, "
				  "removed";
	} else if (is_link_to_keeper(f.dirfd, tmp, l, keeper ? &kst : NULL)) {
		/* Made to replace the file, never exchanged with it. */
		ret = unlinkat(f.dirfd, tmp, 0) ? -errno : 1;
		*what = ret < 0 ? "removing it"
			: l->action == IM_ACT_HARDLINK
				? "a hard link of the keeper, removed"
				: "a symlink to the keeper, removed";
	} else if (same_file(f.dirfd, tmp, f.name)) {
		/* Killed between the link that gave the file its name back
		 * and the unlink of its temporary name. Left, it would keep
		 * the bytes of a file the line then removes, unseen. */
		ret = unlinkat(f.dirfd, tmp, 0) ? -errno : 1;
		*what = ret < 0 ? "removing it"
				: "a second name of the file, removed (the "
				  "file is at its name)";
	} else if (l->action == IM_ACT_TRASH &&
		   is_recorded_file(f.dirfd, tmp, &l->file) &&
		   copied_to_trash(l, rel_f, f.dirfd, tmp)) {
		/* Killed after its copy was linked into place, before it
		 * was unlinked: whichever line's file it is, its bytes are
		 * in the trash now. */
		ret = unlinkat(f.dirfd, tmp, 0) ? -errno : 1;
		*what = ret < 0 ? "removing it"
				: "the file, already copied into the trash, "
				  "removed";
	} else if (is_recorded_file(f.dirfd, tmp, &l->file) &&
		   !(l->action == IM_ACT_TRASH && trashed(l, rel_f))) {
		/* The file, moved aside: its name back by a link, which
		 * fails on a taken name; or exchanged back with the link
		 * that took its name, which then goes. The line is then
		 * applied as if nothing had happened. */
		if (!linkat(f.dirfd, tmp, f.dirfd, f.name, 0)) {
			ret = unlinkat(f.dirfd, tmp, 0) ? -errno : 1;
			*what = ret < 0 ? "removing it after giving the file "
					  "its name back"
					: "the file, given its name back";
		} else if (errno == EEXIST &&
			   is_link_to_keeper(f.dirfd, f.name, l,
					     keeper ? &kst : NULL)) {
			ret = swap_back(l, &f, tmp, keeper ? &kst : NULL, what);
		}
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
out:
	close_side(&f);
	close_side(&k);
	if (rootfd >= 0)
		close(rootfd);
	return ret;
}

char *im_plan_trash_dest(const struct im_plan_line *l)
{
	const char *rel;
	size_t len;
	char *dest;

	if (l->action != IM_ACT_TRASH || !l->trash ||
	    !(canonical(l->trash) || !strcmp(l->trash, "/")) ||
	    !canonical(l->file.path) || !l->root ||
	    !(canonical(l->root) || !strcmp(l->root, "/")) ||
	    !(rel = below(l->file.path, l->root)))
		return NULL;
	len = strlen(l->trash) + strlen(rel) + 2;
	dest = malloc(len);
	if (dest)
		snprintf(dest, len, "%s/%s",
			 strcmp(l->trash, "/") ? l->trash : "", rel);
	return dest;
}

/* Are the @p n bytes of @p cfd the first bytes of the file @p f, and is
 * @p f whole what @p rec records (size and content hash)? */
static bool copy_of(const struct side *f, int cfd, uint64_t n,
		    const struct im_plan_rec *rec)
{
	XXH3_state_t *x = XXH3_createState();
	char *a = malloc(CHUNK), *b = malloc(CHUNK);
	off_t off = 0;
	bool same = x && a && b && n <= rec->size;

	if (same)
		XXH3_128bits_reset(x);
	while (same) {
		ssize_t k = pread(f->fd, a, CHUNK, off);

		if (k <= 0) {
			same = k == 0;
			break;
		}
		XXH3_128bits_update(x, a, (size_t)k);
		if ((uint64_t)off < n) {
			size_t want = n - (uint64_t)off < (uint64_t)k
					      ? (size_t)(n - (uint64_t)off)
					      : (size_t)k;

			same = pread(cfd, b, want, off) == (ssize_t)want &&
			       !memcmp(a, b, want);
		}
		off += k;
	}
	if (same) {
		XXH128_canonical_t c;

		XXH128_canonicalFromHash(&c, XXH3_128bits_digest(x));
		same = (uint64_t)off == rec->size &&
		       !memcmp(c.digest, rec->hash, 16);
	}
	free(a);
	free(b);
	XXH3_freeState(x);
	return same;
}

int im_apply_reclaim_copy(const struct im_plan_line *l, const char *tmp,
			  const char **what)
{
	struct side f = {.dirfd = -1, .fd = -1};
	const char *why, *rel_f, *base;
	char *buf = NULL;
	struct stat st;
	sigset_t old;
	int rootfd = -1, dfd = -1, cfd = -1, ret = 0;

	*what = NULL;
	if (!made_by_gone_apply(tmp) || !canonical(l->file.path) || !l->root ||
	    !(canonical(l->root) || !strcmp(l->root, "/")) ||
	    !(rel_f = below(l->file.path, l->root)) ||
	    open_dest_dir(l, rel_f, &dfd, &buf, &base))
		return 0;
	hold_stop_signals(&old);
	if (trashed_as(l, rel_f, dfd, tmp)) {
		/* Linked into place, its temporary name not yet unlinked. */
		ret = unlinkat(dfd, tmp, 0) ? -errno : 1;
		*what = ret < 0 ? "removing it"
				: "a second name of the copy in the trash, "
				  "removed";
		goto out;
	}
	/* Killed before the copy was linked into place: the file never
	 * left its name, and the copy holds nothing it does not. A copy is
	 * only made to another filesystem than the file's. */
	cfd = openat(dfd, tmp,
		     O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (cfd < 0 || fstat(cfd, &st) || !S_ISREG(st.st_mode) ||
	    st.st_nlink != 1 || open_root(l->root, &rootfd, &why) ||
	    open_side(rootfd, rel_f, &l->file, FILE_, &f, &why) ||
	    f.st.st_dev == st.st_dev ||
	    !copy_of(&f, cfd, (uint64_t)st.st_size, &l->file))
		goto out;
	ret = unlinkat(dfd, tmp, 0) ? -errno : 1;
	*what = ret < 0 ? "removing it"
			: "an unfinished copy of the file, removed (the file "
			  "is still at its name)";
out:
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (cfd >= 0)
		close(cfd);
	close_side(&f);
	if (rootfd >= 0)
		close(rootfd);
	close(dfd);
	free(buf);
	return ret;
}
