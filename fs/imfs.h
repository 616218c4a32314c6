/**
 * @file imfs.h
 * The daemon's parts, wired together by main(): the one context handed to
 * the FUSE operations (as the session's userdata) and to the threads. It
 * holds no state of its own beyond what is fixed before mounting; each part
 * owns its state behind its header:
 *
 *   options.h   the command line                      (main thread)
 *   model.h     tree + index + counters               (tree lock)
 *   ctab.h      cluster inode numbers                 (own mutex)
 *   inval.h     the kernel's caches                   (own mutex, thread)
 *   view.h      what the FUSE operations show         (tree lock, shared)
 *   ops.c       the FUSE low-level operations         (FUSE workers)
 *   workers.h   signing changed files                 (own mutex, threads)
 *   scanner.h   lexicon, full scans, saving the state (own mutex, thread)
 *   watch.h     inotify                               (thread)
 *   stateio.h   the lexicon and signature cache files
 *   status.h    the `status` file
 *   redundant.h the removal plan shown in redundant/ (own mutex)
 *   dirgroups.h the duplicate directories shown in dup-dirs/ (own mutex)
 */
#ifndef IMFS_IMFS_H
#define IMFS_IMFS_H

#include <fcntl.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "options.h"

struct model;
struct ctab;
struct inval;
struct workers;
struct scanner;
struct watch;
struct redundant;
struct dirgroups;
struct fuse_session;

struct imfs {
	/* Fixed before mounting. */
	const struct imfs_opts *opts;
	char *source_real; /* realpath: symlink targets start with it */
	char *state_dir;   /* absolute */
	int srcfd;	   /* O_DIRECTORY fd of SOURCE: the only way in */
	dev_t state_dev;   /* the state directory, left out of walks */
	ino_t state_ino;
	bool mnt_inside; /* MOUNTPOINT is strictly inside SOURCE */
	dev_t fuse_dev;	 /* st_dev of our own mount when mnt_inside */
	uid_t owner_uid;
	gid_t owner_gid;
	time_t started;
	/* CAP_DAC_READ_SEARCH or CAP_DAC_OVERRIDE: no file mode keeps the
	 * daemon from reading a file, so a chmod never changes what it can
	 * sign (imfs_reads_all()). */
	bool reads_all;
	uid_t euid; /* geteuid(): the owner whose bits bind the daemon */

	/* The parts (set before any thread starts, then never changed). */
	struct model *model;
	struct ctab *ctab;
	struct inval *inval;
	struct workers *workers;
	struct scanner *scanner;
	struct watch *watch;
	struct redundant *redundant;
	struct dirgroups *dirgroups;
	struct fuse_session *se;
};

/**
 * Whether the daemon may read file @p path (relative to SOURCE), found as
 * @p st, as far as its mode says: asked before a result is taken from an
 * earlier read (the cache, the tree), which knows nothing of modes. The
 * kernel is asked only where the mode does not settle it: on a file of the
 * daemon's own user the owner's bits apply, whatever the others' say (mode
 * 0004 keeps the owner out); on another's, read for both group and others
 * lets any of them in. An ACL that names the daemon's user or group to keep
 * it out of such a file is not looked for. Any thread.
 */
static inline bool imfs_may_read(const struct imfs *fs, const char *path,
				 const struct stat *st)
{
	if (fs->reads_all)
		return true;
	if (st->st_uid == fs->euid)
		return st->st_mode & S_IRUSR;
	return (st->st_mode & (S_IRGRP | S_IROTH)) == (S_IRGRP | S_IROTH) ||
	       !faccessat(fs->srcfd, path, R_OK, AT_EACCESS);
}

#endif
