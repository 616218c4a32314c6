/**
 * @file main.c
 * imatchfs: checks before mounting, wiring the parts (imfs.h), the FUSE
 * session and shutdown.
 *
 * Everything that can be refused is checked before mounting, with one line
 * on stderr and a non-zero exit: the arguments, SOURCE (opened here with
 * O_DIRECTORY; the daemon reaches the source only through this fd, so
 * `imatchfs DIR DIR` works), MOUNTPOINT (an empty directory, or SOURCE
 * itself, and not already an imatchfs mount), the lexicon and the signature
 * cache (a corrupt file is refused, never replaced). Then the session is
 * mounted, the daemon detaches (fuse_daemonize), and only then are threads
 * started: the scanner (lexicon, first scan) runs in the background, so the
 * mount is browsable at once.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <xxhash.h>

#include "ctab.h"
#include "imfs.h"
#include "inval.h"
#include "lock.h"
#include "model.h"
#include "ops.h"
#include "redundant.h"
#include "dirgroups.h"
#include "scanner.h"
#include "stateio.h"
#include "util.h"
#include "watch.h"
#include "workers.h"

#define MAX_FUSE_THREADS 16
/* A daemon still saving on its way out gets this long to let go. */
#define STATE_LOCK_WAIT_MS 5000
/* A corrupt lexicon or cache: restarting will not help (see the unit). */
#define EXIT_STATE_CORRUPT 3

/* ---- Checks before mounting -------------------------------------------------- */

static int fail(const char *what, const char *path, const char *why)
{
	fprintf(stderr, "imatchfs: error: %s%s%s%s\n", what, path,
		why ? ": " : "", why ? why : "");
	return -1;
}

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

/* Undo the octal escapes (\040 for a space) of a /proc/self/mountinfo field. */
static void unescape_octal(char *s)
{
	char *o = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' &&
		    s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
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
 * The topmost mount on @p mnt in /proc/self/mountinfo: its st_dev and file
 * system type (into @p type). Read there rather than by a stat() of the
 * mountpoint, which from one of our threads is a request to our own mount
 * (and under valgrind, which runs one thread at a time, never returned).
 * @return 0 if found, -ENOENT if nothing is mounted there.
 */
static int mount_at(const char *mnt, dev_t *dev, char *type, size_t tlen)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL, *point = malloc(PATH_MAX * 4 + 1);
	size_t cap = 0;
	int ret = -ENOENT;

	if (!f || !point)
		goto out;
	while (getline(&line, &cap, f) > 0) {
		unsigned maj, min;
		/* "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [TAGS] - TYPE ..." */
		if (sscanf(line, "%*u %*u %u:%u %*s %16384s", &maj, &min,
			   point) != 3)
			continue;
		unescape_octal(point);
		if (strcmp(point, mnt))
			continue;
		const char *dash = strstr(line, " - ");
		if (!dash || sscanf(dash, " - %63s", type) != 1)
			snprintf(type, tlen, "?");
		*dev = makedev(maj, min);
		ret = 0;
	}
out:
	free(line);
	free(point);
	if (f)
		fclose(f);
	return ret;
}

/* Empty directory, or the source itself; not an imatchfs mount already. */
static int check_mountpoint(const char *mnt, const char *mnt_real,
			    const struct stat *src)
{
	struct stat st;
	char type[64];
	dev_t dev;
	DIR *d;
	struct dirent *de;

	if (mount_at(mnt_real, &dev, type, sizeof(type)) == 0 &&
	    !strcmp(type, "fuse.imatchfs")) {
		/* A daemon killed outright leaves its mount to fusermount3's
		 * auto_unmount, which does not always take it away. */
		struct statvfs sv; /* always asked of the daemon: no cache */
		if (statvfs(mnt, &sv) && errno == ENOTCONN)
			return fail("", mnt,
				    "a dead imatchfs mount, its daemon gone "
				    "(fusermount3 -u -z it first)");
		return fail("", mnt,
			    "already an imatchfs mount (fusermount3 -u it "
			    "first)");
	}
	if (stat(mnt, &st))
		return fail("mountpoint ", mnt, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return fail("mountpoint ", mnt, "not a directory");
	if (st.st_dev == src->st_dev && st.st_ino == src->st_ino)
		return 0;
	d = opendir(mnt);
	if (!d)
		return fail("mountpoint ", mnt, strerror(errno));
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			closedir(d);
			return fail("mountpoint ", mnt, "not empty");
		}
	}
	closedir(d);
	return 0;
}

/* The state directory, made if missing, as an absolute path. */
static int open_state_dir(struct imfs *fs, const char *opt)
{
	struct stat st;
	char *d = opt ? strdup(opt) : default_state_dir(fs->source_real);

	if (d && mkdir_p(d) == 0)
		fs->state_dir = realpath(d, NULL);
	free(d);
	if (!fs->state_dir || stat(fs->state_dir, &st))
		return fail("cannot create the state directory ",
			    opt ? opt : "(set -o state=DIR or HOME)",
			    strerror(errno));
	fs->state_dev = st.st_dev;
	fs->state_ino = st.st_ino;
	return 0;
}

/* SOURCE, MOUNTPOINT and the state directory. @return 0 or -1 (printed). */
static int prepare(struct imfs *fs, struct imfs_opts *o)
{
	struct stat sst;
	char *mnt_real = NULL;
	int ret = -1;

	fs->srcfd = open(o->source, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fs->srcfd < 0 || fstat(fs->srcfd, &sst))
		return fail("source ", o->source,
			    errno == ENOTDIR ? "not a directory"
					     : strerror(errno));
	fs->source_real = realpath(o->source, NULL);
	if (!fs->source_real)
		return fail("source ", o->source, strerror(errno));
	mnt_real = realpath(o->mountpoint, NULL);
	if (!mnt_real) {
		fail("mountpoint ", o->mountpoint, strerror(errno));
		goto out;
	}
	if (check_mountpoint(o->mountpoint, mnt_real, &sst))
		goto out;
	/*
	 * Mount by the absolute path: fuse_daemonize() changes to "/" even in
	 * the foreground, and the unmount at SIGTERM would then look for a
	 * relative mountpoint there and leave a dead mount behind.
	 */
	free(o->mountpoint);
	o->mountpoint = strdup(mnt_real);
	if (!o->mountpoint) {
		fail("mountpoint ", mnt_real, strerror(ENOMEM));
		goto out;
	}
	size_t sl = strlen(fs->source_real);
	fs->mnt_inside = !strncmp(mnt_real, fs->source_real, sl) &&
			 (mnt_real[sl] == '/' ||
			  (sl == 1 && mnt_real[1])); /* SOURCE is / */
	ret = open_state_dir(fs, o->state);
	/* keep_rule and protect are checked before anything is mounted. */
	if (!ret && redundant_new(fs, &fs->redundant))
		ret = -1;
out:
	free(mnt_real);
	return ret;
}

/*
 * Whether this process may read every file whatever its mode: its effective
 * capabilities (/proc/self/status, CapEff) hold CAP_DAC_READ_SEARCH or
 * CAP_DAC_OVERRIDE (bits 2 and 1). When that cannot be told, false: the
 * daemon then asks the kernel about files others may not read.
 */
static bool reads_every_file(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	unsigned long long caps = 0;
	char line[256];
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = sscanf(line, "CapEff: %llx", &caps) == 1;
	fclose(f);
	return found && (caps & 0x6);
}

/* ---- The parts ------------------------------------------------------------------ */

static void dir_gone(void *arg, struct node *dir)
{
	struct imfs *fs = arg;

	watch_forget(fs->watch, dir);
}

static void resign(void *arg, struct node *file)
{
	struct imfs *fs = arg;

	if (workers_queue(fs->workers, file))
		scanner_request_rescan(fs->scanner);
}

static int make_parts(struct imfs *fs, struct stateio *sio,
		      struct im_lexicon *lex, struct im_state *cache)
{
	if (ctab_new(&fs->ctab) ||
	    model_new(fs->owner_uid, fs->owner_gid, fs->opts->params.similarity,
		      NULL, &fs->model) ||
	    inval_new(fs->ctab, fs->model->idx, &fs->inval) ||
	    workers_new(fs, &fs->workers) || watch_new(fs, &fs->watch) ||
	    dirgroups_new(&fs->dirgroups)) {
		im_lexicon_free(lex);
		im_state_free(cache);
		return fail("out of memory", "", NULL);
	}
	if (scanner_new(fs, sio, lex, cache, &fs->scanner))
		return fail("out of memory", "", NULL);
	fs->model->inval = fs->inval;
	fs->model->hooks = (struct model_hooks){dir_gone, resign, fs};
	return 0;
}

static void free_parts(struct imfs *fs)
{
	scanner_free(fs->scanner);
	workers_free(fs->workers);
	watch_free(fs->watch);
	inval_free(fs->inval);
	model_free(fs->model);
	ctab_free(fs->ctab);
	redundant_free(fs->redundant);
	dirgroups_free(fs->dirgroups);
}

/* ---- The session ------------------------------------------------------------------ */

static int run_loop(struct fuse_session *se, const struct imfs_opts *o)
{
	int lr;

	if (o->single) {
		lr = fuse_session_loop(se);
	} else {
		struct fuse_loop_config *lc = fuse_loop_cfg_create();
		if (!lc)
			return -ENOMEM;
		fuse_loop_cfg_set_max_threads(lc, MAX_FUSE_THREADS);
		lr = fuse_session_loop_mt(se, lc);
		fuse_loop_cfg_destroy(lc);
	}
	/* The loop returns the number of the signal that ended it: a clean
	 * exit as much as fusermount3 -u is. */
	return lr == 0 || lr == SIGTERM || lr == SIGINT || lr == SIGHUP ? 0
									: -1;
}

/* Stop every thread, save, in the order that lets each finish.
 * @return 0, or -1 when the final save failed (logged, naming the state
 * directory: what changed since the last save is not on disk). */
static int stop_all(struct imfs *fs)
{
	int ret = 0;

	if (fs->scanner)
		scanner_stop(fs->scanner);
	if (fs->workers)
		workers_stop(fs->workers);
	watch_stop(fs->watch);
	if (fs->scanner) {
		int sr = scanner_save(fs->scanner);
		if (sr == 0) {
			imfs_log(LOG_INFO, "state saved");
		} else if (sr == -EAGAIN) {
			imfs_log(
				LOG_NOTICE,
				"state not saved: stopped while rebuilding "
				"the lexicon; the next start signs every file");
		} else if (sr != -ENOENT) { /* -ENOENT: no lexicon yet */
			imfs_log(LOG_ERR, "the final save to %s failed: %s",
				 fs->state_dir, strerror(-sr));
			ret = -1;
		}
	}
	inval_stop(fs->inval);
	return ret;
}

/*
 * Take the state directory's lock (core/state/lock.h), waiting a few
 * seconds for a daemon that is still saving on its way out; refuse a
 * directory another daemon uses or that cannot be written. Then remove
 * the temporary files a killed daemon left (nobody else writes here).
 * @return 0 or -1 (printed).
 */
static int lock_state_dir(struct imfs *fs, struct im_state_lock **out)
{
	pid_t holder = 0;
	int ret =
		im_state_lock(fs->state_dir, STATE_LOCK_WAIT_MS, out, &holder);
	char why[128];

	if (ret == -EWOULDBLOCK) {
		snprintf(why, sizeof(why), "in use by imatchfs process %ld",
			 (long)holder);
		return fail("state directory ", fs->state_dir, why);
	}
	if (ret == -EROFS || ret == -EACCES || ret == -EPERM) {
		snprintf(why, sizeof(why),
			 "cannot be written (%s): give -o state=DIR elsewhere",
			 strerror(-ret));
		return fail("state directory ", fs->state_dir, why);
	}
	if (ret)
		return fail("state directory ", fs->state_dir, strerror(-ret));
	DIR *d = opendir(fs->state_dir);
	for (struct dirent *de; d && (de = readdir(d));)
		if ((!strncmp(de->d_name, "lexicon.tmp.", 12) ||
		     !strncmp(de->d_name, "sigcache.tmp.", 13)))
			unlinkat(dirfd(d), de->d_name, 0);
	if (d)
		closedir(d);
	return 0;
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct imfs_opts o;
	struct imfs fs = {.srcfd = -1};
	struct stateio sio = {0};
	struct im_lexicon *lex = NULL;
	struct im_state *cache = NULL;
	struct im_state_lock *lock = NULL;
	bool mounted = false, handlers = false;
	int rc = 1;

	/* glibc's default of one arena per thread (up to 8 per core) keeps
	 * each FUSE thread's freed memory apart: two keep the resident size
	 * close to the data. */
	mallopt(M_ARENA_MAX, 2);
	/* A fixed threshold: glibc's own rises to the size of the largest
	 * block given back (the state image written at each save, tens of
	 * MiB), and blocks below it then come from the heap, where what the
	 * index's tables leave when they grow stays resident. */
	mallopt(M_MMAP_THRESHOLD, 256 * 1024);

	int pr = imfs_opts_parse(&args, &o);
	if (pr)
		goto out_args;
	fs.opts = &o;
	fs.owner_uid = getuid();
	fs.owner_gid = getgid();
	fs.started = time(NULL);
	fs.reads_all = reads_every_file();
	fs.euid = geteuid();
	imfs_log_setup(false, o.debug);

	/* FUSE options first: an unknown one is refused before anything is
	 * created (nothing is mounted yet). */
	fs.se = fuse_session_new(&args, &imfs_ops, sizeof(imfs_ops), &fs);
	if (!fs.se)
		goto out; /* it printed why */
	if (prepare(&fs, &o))
		goto out;
	char *lexicon = NULL;
	if (o.lexicon && !(lexicon = realpath(o.lexicon, NULL))) {
		fail("lexicon ", o.lexicon, strerror(errno));
		goto out;
	}
	if (lock_state_dir(&fs, &lock)) {
		free(lexicon);
		goto out;
	}
	int sr = stateio_open(&sio, fs.state_dir, lexicon, &o.params);
	free(lexicon);
	if (!sr)
		sr = stateio_load(&sio, &lex, &cache);
	if (sr) {
		if (sr == -EINVAL)
			rc = EXIT_STATE_CORRUPT;
		goto out;
	}
	if (make_parts(&fs, &sio, lex, cache))
		goto out;

	if (fuse_session_mount(fs.se, o.mountpoint)) {
		fail("cannot mount on ", o.mountpoint, NULL);
		goto out;
	}
	mounted = true;
	if (fs.mnt_inside) {
		char type[64];
		char *mnt_real = realpath(o.mountpoint, NULL);
		/* realpath() of the mountpoint itself is answered by the kernel
		 * from the parent: no request to our mount. */
		if (!mnt_real ||
		    mount_at(mnt_real, &fs.fuse_dev, type, sizeof(type)))
			imfs_log(LOG_WARNING, "%s not found in mountinfo",
				 o.mountpoint);
		free(mnt_real);
	}
	if (fuse_daemonize(o.foreground)) {
		fail("cannot daemonize", "", NULL);
		goto out;
	}
	imfs_log_setup(!o.foreground, o.debug);
	im_state_lock_own(lock); /* the daemonized child holds it now */
	if (fuse_set_signal_handlers(fs.se)) {
		imfs_log(LOG_ERR, "cannot set signal handlers");
		goto out;
	}
	handlers = true;
	if (inval_start(fs.inval, fs.se) || scanner_start(fs.scanner)) {
		imfs_log(LOG_ERR, "cannot start a thread");
		goto out;
	}
	imfs_log(LOG_INFO, "mounted %s on %s (state in %s)", fs.source_real,
		 o.mountpoint, fs.state_dir);
	rc = run_loop(fs.se, &o) ? 1 : 0;
	imfs_log(LOG_INFO, "unmounting");
out:
	if (stop_all(&fs))
		rc = 1;
	if (handlers)
		fuse_remove_signal_handlers(fs.se);
	if (mounted)
		fuse_session_unmount(fs.se);
	if (fs.se)
		fuse_session_destroy(fs.se);
	ops_release_all();
	free_parts(&fs);
	stateio_release(&sio);
	if (fs.srcfd >= 0)
		close(fs.srcfd);
	free(fs.source_real);
	free(fs.state_dir);
	/* Only now, with the final save on disk: a remount waits for it. */
	im_state_unlock(lock);
out_args:
	imfs_opts_release(&o);
	fuse_opt_free_args(&args);
	imfs_log_setup(false, false);
	return pr == 1 ? 0 : rc;
}
