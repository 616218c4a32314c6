/**
 * @file options.h
 * The command line (DESIGN §5): `imatchfs [-f] [-d] [-o OPT[,OPT...]] SOURCE
 * MOUNTPOINT`, also as mount(8) runs it for `mount -t fuse.imatchfs` and
 * fstab lines (mount.fuse3 passes "SOURCE MOUNTPOINT -o OPTS", with the
 * options after the paths, `ro`/`rw`, and `dev`, `suid`, `exec`, `noauto`,
 * `user` ... which mean nothing here).
 *
 * Main thread only, before anything else starts.
 */
#ifndef IMFS_OPTIONS_H
#define IMFS_OPTIONS_H

#include <stdbool.h>

#include "params.h"

struct fuse_args;

struct imfs_opts {
	char *source, *mountpoint, *state, *lexicon;
	unsigned threads; /* signing threads; 0: one per CPU */
	unsigned rescan;  /* rescan period when watches run out, seconds */
	bool foreground, debug, single, allow_other;
	/* -o auto_unmount: fusermount3 then needs an open of the mountpoint
	 * to reach the daemon (ops.c, "Listings without a handle") */
	bool auto_unmount;
	bool done, failed; /* parsing: --help/--version done; an error */
	char *keep_rule;   /* -o keep_rule=RULES (core/plan), or NULL */
	char **protect;	   /* -o protect=DIR, repeatable */
	size_t nprotect;
	struct im_params params;
	char **filters; /* -o filter=EXT:COMMAND, NULL-terminated; params
			   borrows it */
	size_t nfilters;
	struct im_scope *scope; /* -o exclude, -o include, or NULL; params
				   borrows it */
};

/**
 * Parse @p args into @p o; the FUSE options are left in @p args (with "ro"
 * and the file system's name added). On an error one line is printed.
 *
 * @return 0 to go on, 1 when done (--help, --version printed), -1 on error.
 */
int imfs_opts_parse(struct fuse_args *args, struct imfs_opts *o);
void imfs_opts_release(struct imfs_opts *o);

#endif
