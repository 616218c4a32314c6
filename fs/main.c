/**
 * @file main.c
 * imatchfs: options, checks before mounting, the FUSE session and shutdown.
 *
 * Everything that can be refused is checked before mounting, with one line on
 * stderr and a non-zero exit: the arguments and parameters, SOURCE (opened
 * here with O_DIRECTORY; the daemon reaches the source only through this fd,
 * so `imatchfs DIR DIR` works), MOUNTPOINT (an empty directory, or SOURCE
 * itself), the lexicon and the signature cache (a corrupt file is refused,
 * never replaced). Then the session is mounted, the daemon detaches
 * (fuse_daemonize), and only then are threads started: the scanner (lexicon,
 * first scan) runs in the background, so the mount is browsable at once.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <xxhash.h>

#include "daemon.h"

struct imfs *imfs;
static bool log_syslog;
static bool log_debug;

void imfs_log(int level, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (level == LOG_DEBUG && !log_debug)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	const char *tag = level <= LOG_ERR       ? "error: "
			  : level == LOG_WARNING ? "warning: "
						 : "";
	if (log_syslog)
		syslog(level, "imatchfs: %s%s", tag, msg);
	else
		fprintf(stderr, "imatchfs: %s%s\n", tag, msg);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: imatchfs [-f] [-d] [-o OPT[,OPT...]] SOURCE MOUNTPOINT\n"
		"\n"
		"  -f               stay in the foreground\n"
		"  -d               debug output (implies -f)\n"
		"  -s               single-threaded FUSE loop\n"
		"  -o lexicon=FILE  use this lexicon (default: built on the first mount)\n"
		"  -o state=DIR     state directory (default $XDG_STATE_HOME/imatchfs/...)\n"
		"  -o k=N keep=F nidf=LO:HI min_terms=N min_ratio=F seed=N max_size=BYTES\n"
		"  -o threads=N     signing threads (default: one per CPU)\n"
		"  -o rescan=SECS   rescan period when inotify watches run out (60)\n"
		"  -o hidden        also read names beginning with '.'\n"
		"  plus the usual FUSE options (allow_other, default_permissions, ...)\n");
}

struct opts {
	char *source, *mountpoint, *state, *lexicon;
	unsigned threads, rescan;
	bool foreground, debug, single, allow_other, failed;
	struct im_params params;
};

static int bad(struct opts *o, const char *fmt, const char *a, const char *b)
{
	fprintf(stderr, "imatchfs: error: ");
	fprintf(stderr, fmt, a, b);
	fprintf(stderr, "\n");
	o->failed = true;
	return -1;
}

static int parse_uint(const char *s, unsigned *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || v > 100000)
		return -EINVAL;
	*out = (unsigned)v;
	return 0;
}

static int opt_proc(void *data, const char *arg, int key,
		    struct fuse_args *outargs)
{
	struct opts *o = data;
	(void)outargs;

	if (o->failed)
		return -1;
	if (key == FUSE_OPT_KEY_NONOPT) {
		if (!o->source)
			o->source = strdup(arg);
		else if (!o->mountpoint)
			o->mountpoint = strdup(arg);
		else
			return bad(o, "unexpected argument '%s'%s", arg, "");
		return 0;
	}
	if (!strcmp(arg, "-f")) {
		o->foreground = true;
		return 0;
	}
	if (!strcmp(arg, "-d") || !strcmp(arg, "debug")) {
		o->debug = o->foreground = true;
		return 1;
	}
	if (!strcmp(arg, "-s")) {
		o->single = true;
		return 0;
	}
	if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
		usage(stdout);
		exit(0);
	}
	if (!strcmp(arg, "-V") || !strcmp(arg, "--version")) {
		printf("imatchfs 0.1.0 (FUSE %d)\n", fuse_version());
		exit(0);
	}
	if (arg[0] == '-')
		return bad(o, "unknown option '%s'%s", arg, "");

	char name[64];
	const char *eq = strchr(arg, '=');
	size_t nl = eq ? (size_t)(eq - arg) : strlen(arg);
	const char *val = eq ? eq + 1 : NULL;
	if (nl >= sizeof(name))
		return 1;
	memcpy(name, arg, nl);
	name[nl] = 0;

	if (!strcmp(name, "lexicon") || !strcmp(name, "state")) {
		if (!val || !*val)
			return bad(o, "option %s needs a value%s", name, "");
		char **dst = name[0] == 'l' ? &o->lexicon : &o->state;
		free(*dst);
		*dst = strdup(val);
		return 0;
	}
	if (!strcmp(name, "threads") || !strcmp(name, "rescan")) {
		unsigned *dst = name[0] == 't' ? &o->threads : &o->rescan;
		if (!val || parse_uint(val, dst) ||
		    (name[0] == 'r' && *dst == 0))
			return bad(o, "invalid value for option %s: '%s'", name,
				   val ? val : "");
		return 0;
	}
	if (!strcmp(name, "hidden") && !val) {
		o->params.hidden = 1;
		return 0;
	}
	if (val) {
		int ret = im_params_set(&o->params, name, val);
		if (ret == 0)
			return 0;
		if (ret == -EINVAL)
			return bad(o, "invalid value for option %s: '%s'", name,
				   val);
	}
	if (!strcmp(name, "allow_other"))
		o->allow_other = true;
	return 1; /* a FUSE option: fuse_new() knows it or refuses it */
}

/* ---- Checks before mounting ------------------------------------------------ */

static int mkdir_p(const char *path)
{
	char *p = strdup(path);
	int ret = 0;

	if (!p)
		return -ENOMEM;
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = 0;
		if (mkdir(p, 0700) && errno != EEXIST) {
			ret = -errno;
			goto out;
		}
		*s = '/';
	}
	if (mkdir(p, 0700) && errno != EEXIST)
		ret = -errno;
out:
	free(p);
	return ret;
}

static char *default_state_dir(const char *source_real)
{
	const char *xdg = getenv("XDG_STATE_HOME");
	const char *home = getenv("HOME");
	char buf[PATH_MAX + 64];
	uint64_t h = XXH3_64bits(source_real, strlen(source_real));

	if (xdg && xdg[0] == '/')
		snprintf(buf, sizeof(buf), "%s/imatchfs/%016llx", xdg,
			 (unsigned long long)h);
	else if (home && home[0] == '/')
		snprintf(buf, sizeof(buf), "%s/.local/state/imatchfs/%016llx",
			 home, (unsigned long long)h);
	else
		return NULL;
	return strdup(buf);
}

/* Empty directory, or the source itself. @return 0 or -1 (message printed). */
static int check_mountpoint(const char *mnt, const struct stat *src)
{
	struct stat st;
	DIR *d;
	struct dirent *de;

	if (stat(mnt, &st)) {
		fprintf(stderr, "imatchfs: error: mountpoint %s: %s\n", mnt,
			strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "imatchfs: error: mountpoint %s is not a directory\n",
			mnt);
		return -1;
	}
	if (st.st_dev == src->st_dev && st.st_ino == src->st_ino)
		return 0;
	d = opendir(mnt);
	if (!d) {
		fprintf(stderr, "imatchfs: error: mountpoint %s: %s\n", mnt,
			strerror(errno));
		return -1;
	}
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			closedir(d);
			fprintf(stderr, "imatchfs: error: mountpoint %s is not empty\n",
				mnt);
			return -1;
		}
	}
	closedir(d);
	return 0;
}

static char *path_join(const char *a, const char *b)
{
	char *s = malloc(strlen(a) + strlen(b) + 2);
	if (s)
		sprintf(s, "%s/%s", a, b);
	return s;
}

/* The lexicon and the cache, before mounting. @return 0 or -1 (printed). */
/* Undo the octal escapes (\040 for a space) of a /proc/self/mountinfo field. */
static void unescape_octal(char *s)
{
	char *o = s;
	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' &&
		    s[2] >= '0' && s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 +
				      (s[3] - '0'));
			s += 3;
		} else {
			*o++ = *s;
		}
	}
	*o = '\0';
}

/*
 * The st_dev of our own mount on @p mnt, read from /proc/self/mountinfo (the
 * last mount there, the one on top), so that it is learnt without a request
 * to the mount itself: a stat() of the mountpoint from one of our threads
 * waits for the FUSE loop, and under valgrind, which runs one thread at a
 * time, it never returned. Returns 0 if not found.
 */
static dev_t mount_dev(const char *mnt)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;
	dev_t dev = 0;

	if (!f)
		return 0;
	while (getline(&line, &cap, f) > 0) {
		unsigned maj, min;
		char point[PATH_MAX * 4 + 1];
		/* "ID PARENT MAJ:MIN ROOT MOUNTPOINT ..." */
		if (sscanf(line, "%*u %*u %u:%u %*s %16384s", &maj, &min, point) != 3)
			continue;
		unescape_octal(point);
		if (!strcmp(point, mnt))
			dev = makedev(maj, min);
	}
	free(line);
	fclose(f);
	return dev;
}

static int load_state(struct imfs *fs)
{
	char why[256];
	uint64_t lex_key = 0;
	int ret;

	fs->lexicon_path = fs->lexicon_opt ? strdup(fs->lexicon_opt)
					   : path_join(fs->state_dir, "lexicon");
	fs->cache_path = path_join(fs->state_dir, "sigcache");
	if (!fs->lexicon_path || !fs->cache_path)
		return -1;
	ret = im_lexicon_load(fs->lexicon_path, &fs->lex, why, sizeof(why));
	if (ret == -ENOENT && !fs->lexicon_opt) {
		/* First mount: the scanner builds it. */
	} else if (ret) {
		fprintf(stderr, "imatchfs: error: lexicon %s: %s%s\n",
			fs->lexicon_path, why,
			ret == -EINVAL && !fs->lexicon_opt
				? " (refusing to replace it; move it away to rebuild)"
				: "");
		return -1;
	} else {
		double lo, hi;
		im_lexicon_window(fs->lex, &lo, &hi);
		if (!fs->lexicon_opt &&
		    (lo != fs->params.nidf_lo || hi != fs->params.nidf_hi))
			imfs_log(LOG_NOTICE,
				 "keeping the lexicon in %s, built with nidf=%g:%g "
				 "(move it away to rebuild it with other options)",
				 fs->state_dir, lo, hi);
		ret = im_state_file_key(fs->lexicon_path, &lex_key);
		if (ret) {
			fprintf(stderr, "imatchfs: error: lexicon %s: %s\n",
				fs->lexicon_path, strerror(-ret));
			return -1;
		}
		fs->key = im_state_key(&fs->params, lex_key);
	}
	ret = im_state_load(fs->cache_path, fs->key, &fs->cache, why,
			    sizeof(why));
	if (ret == -EINVAL) {
		fprintf(stderr,
			"imatchfs: error: signature cache %s is corrupt (%s); "
			"refusing to replace it: move it away to start afresh\n",
			fs->cache_path, why);
		return -1;
	}
	if (ret == -ESTALE && fs->lex)
		imfs_log(LOG_NOTICE,
			 "the signature cache was made with other parameters "
			 "or another lexicon: signing afresh");
	else if (ret && ret != -ENOENT && ret != -ESTALE)
		imfs_log(LOG_NOTICE, "not using the signature cache %s: %s",
			 fs->cache_path, why);
	return 0;
}

static void imfs_free(struct imfs *fs)
{
	view_release(fs);
	if (fs->idx)
		im_index_free(fs->idx);
	im_lexicon_free(fs->lex);
	im_state_free(fs->cache);
	if (fs->srcfd >= 0)
		close(fs->srcfd);
	free(fs->source);
	free(fs->source_real);
	free(fs->mountpoint);
	free(fs->mnt_real);
	free(fs->state_dir);
	free(fs->lexicon_opt);
	free(fs->lexicon_path);
	free(fs->cache_path);
	pthread_rwlock_destroy(&fs->tree_lock);
	pthread_mutex_destroy(&fs->work_lock);
	pthread_mutex_destroy(&fs->inval_lock);
	pthread_cond_destroy(&fs->inval_cond);
	pthread_cond_destroy(&fs->work_cond);
	pthread_cond_destroy(&fs->scan_cond);
	free(fs);
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct opts o = { 0 };
	struct imfs *fs = NULL;
	struct stat sst;
	char why[160];
	int rc = 1;
	bool mounted = false, handlers = false;

	/* One arena per FUSE and worker thread (glibc's default, up to 8 per
	 * core) keeps freed memory of each thread apart: two are enough for
	 * short-lived requests and keep the resident size close to the data. */
	mallopt(M_ARENA_MAX, 2);

	im_params_init(&o.params);
	o.rescan = 60;
	if (fuse_opt_parse(&args, &o, NULL, opt_proc) || o.failed)
		goto out_args;
	if (!o.source || !o.mountpoint) {
		fprintf(stderr, "imatchfs: error: need SOURCE and MOUNTPOINT "
				"(imatchfs --help)\n");
		goto out_args;
	}
	if (im_params_check(&o.params, why, sizeof(why))) {
		fprintf(stderr, "imatchfs: error: %s\n", why);
		goto out_args;
	}
	log_debug = o.debug;

	fs = calloc(1, sizeof(*fs));
	if (!fs)
		goto out_args;
	imfs = fs;
	fs->srcfd = fs->ifd = -1;
	fs->stop_pipe[0] = fs->stop_pipe[1] = -1;
	pthread_rwlockattr_t ra;
	pthread_rwlockattr_init(&ra);
	/* Updates must not starve behind a stream of readers (ls -lR loops). */
	pthread_rwlockattr_setkind_np(&ra,
		PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&fs->tree_lock, &ra);
	pthread_rwlockattr_destroy(&ra);
	pthread_mutex_init(&fs->work_lock, NULL);
	pthread_mutex_init(&fs->inval_lock, NULL);
	pthread_cond_init(&fs->inval_cond, NULL);
	pthread_cond_init(&fs->work_cond, NULL);
	pthread_cond_init(&fs->scan_cond, NULL);
	fs->params = o.params;
	fs->threads = o.threads;
	fs->rescan_secs = o.rescan;
	fs->foreground = o.foreground;
	fs->debug = o.debug;
	fs->allow_other = o.allow_other;
	fs->owner_uid = getuid();
	fs->owner_gid = getgid();
	fs->started = time(NULL);
	fs->source = o.source;
	fs->mountpoint = o.mountpoint;
	o.source = o.mountpoint = NULL;

	/* FUSE options first: an unknown one is refused before anything is
	 * created (fuse_new mounts nothing). */
	fuse_opt_add_arg(&args, "-o");
	fuse_opt_add_arg(&args, "ro,fsname=imatchfs,subtype=imatchfs");
	fs->fuse = fuse_new(&args, &imfs_oper, sizeof(imfs_oper), fs);
	if (!fs->fuse)
		goto out; /* fuse_new printed why (an unknown option, say) */

	fs->srcfd = open(fs->source, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fs->srcfd < 0 || fstat(fs->srcfd, &sst)) {
		fprintf(stderr, "imatchfs: error: source %s: %s\n", fs->source,
			errno == ENOTDIR ? "not a directory" : strerror(errno));
		goto out;
	}
	fs->source_real = realpath(fs->source, NULL);
	if (!fs->source_real) {
		fprintf(stderr, "imatchfs: error: source %s: %s\n", fs->source,
			strerror(errno));
		goto out;
	}
	if (check_mountpoint(fs->mountpoint, &sst))
		goto out;
	fs->mnt_real = realpath(fs->mountpoint, NULL);
	if (!fs->mnt_real) {
		fprintf(stderr, "imatchfs: error: mountpoint %s: %s\n",
			fs->mountpoint, strerror(errno));
		goto out;
	}
	size_t sl = strlen(fs->source_real);
	fs->mnt_inside = !strncmp(fs->mnt_real, fs->source_real, sl) &&
			 (fs->mnt_real[sl] == '/' ||
			  (sl == 1 && fs->mnt_real[1])); /* SOURCE is / */

	/* Absolute paths: the daemon changes directory to /. */
	if (o.state) {
		if (mkdir_p(o.state) == 0)
			fs->state_dir = realpath(o.state, NULL);
	} else {
		char *d = default_state_dir(fs->source_real);
		if (d && mkdir_p(d) == 0)
			fs->state_dir = realpath(d, NULL);
		free(d);
	}
	struct stat stst;
	if (!fs->state_dir || stat(fs->state_dir, &stst)) {
		fprintf(stderr, "imatchfs: error: cannot create the state directory %s: %s\n",
			o.state ? o.state : "(set -o state=DIR or HOME)",
			strerror(errno));
		goto out;
	}
	fs->state_dev = stst.st_dev;
	fs->state_ino = stst.st_ino;
	if (o.lexicon) {
		fs->lexicon_opt = realpath(o.lexicon, NULL);
		if (!fs->lexicon_opt) {
			fprintf(stderr, "imatchfs: error: lexicon %s: %s\n",
				o.lexicon, strerror(errno));
			goto out;
		}
	}
	if (load_state(fs))
		goto out;
	if (im_index_new(&fs->idx) || view_init(fs)) {
		fprintf(stderr, "imatchfs: error: out of memory\n");
		goto out;
	}
	int wret = watch_init(fs);
	if (wret)
		imfs_log(LOG_WARNING, "inotify unavailable (%s): rescanning every %u s",
			 strerror(-wret), fs->rescan_secs);
	if (wret)
		fs->watch_limit = 1;

	if (fuse_mount(fs->fuse, fs->mountpoint)) {
		fprintf(stderr, "imatchfs: error: cannot mount on %s\n",
			fs->mountpoint);
		goto out;
	}
	mounted = true;
	if (fs->mnt_inside) {
		fs->fuse_dev = mount_dev(fs->mnt_real);
		if (!fs->fuse_dev)
			imfs_log(LOG_WARNING, "%s not found in /proc/self/mountinfo",
				 fs->mnt_real);
	}
	if (fuse_daemonize(fs->foreground)) {
		fprintf(stderr, "imatchfs: error: cannot daemonize\n");
		goto out;
	}
	if (!fs->foreground) {
		openlog("imatchfs", LOG_PID, LOG_DAEMON);
		log_syslog = true;
	}
	struct fuse_session *se = fuse_get_session(fs->fuse);
	if (fuse_set_signal_handlers(se)) {
		imfs_log(LOG_ERR, "cannot set signal handlers");
		goto out;
	}
	handlers = true;
	if (inval_start(fs)) {
		imfs_log(LOG_ERR, "cannot start the invalidation thread");
		goto out;
	}
	if (scanner_start(fs)) {
		imfs_log(LOG_ERR, "cannot start the scanner");
		goto out;
	}
	imfs_log(LOG_INFO, "mounted %s on %s (state in %s)", fs->source_real,
		 fs->mnt_real, fs->state_dir);

	int lr;
	if (o.single) {
		lr = fuse_loop(fs->fuse);
	} else {
		struct fuse_loop_config *lc = fuse_loop_cfg_create();
		fuse_loop_cfg_set_max_threads(lc, 16);
		lr = fuse_loop_mt(fs->fuse, lc);
		fuse_loop_cfg_destroy(lc);
	}
	/* The loop returns the number of the signal that ended it: a clean
	 * exit as much as fusermount3 -u is. */
	rc = lr == 0 || lr == SIGTERM || lr == SIGINT || lr == SIGHUP ? 0 : 1;
	imfs_log(LOG_INFO, "unmounting");
out:
	if (fs) {
		bool had_scanner = fs->scanner_started;
		inval_stop(fs);
		scanner_stop(fs);
		watch_stop(fs);
		if (had_scanner && fs->lex && scanner_save(fs) == 0)
			imfs_log(LOG_INFO, "state saved");
		if (handlers)
			fuse_remove_signal_handlers(fuse_get_session(fs->fuse));
		if (mounted)
			fuse_unmount(fs->fuse);
		if (fs->fuse)
			fuse_destroy(fs->fuse);
		ops_release_all();
		imfs_free(fs);
	}
out_args:
	free(o.source);
	free(o.mountpoint);
	free(o.state);
	free(o.lexicon);
	fuse_opt_free_args(&args);
	if (log_syslog)
		closelog();
	return rc;
}
