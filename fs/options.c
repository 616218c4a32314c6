/**
 * @file options.c
 * The command line (options.h).
 */
#include <errno.h>
#include <fuse_lowlevel.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "extract.h"
#include "options.h"
#include "plan.h"
#include "scan.h"
#include "scope.h"

#ifndef IMFS_VERSION
#define IMFS_VERSION "unknown"
#endif

static void usage(FILE *f)
{
	fprintf(f,
		"usage: imatchfs [-f] [-d] [-s] [-o OPT[,OPT...]] SOURCE "
		"MOUNTPOINT\n"
		"       mount -t fuse.imatchfs SOURCE MOUNTPOINT [-o OPT,...]\n"
		"\n"
		"  -f               stay in the foreground\n"
		"  -d               debug output (implies -f)\n"
		"  -s               single-threaded FUSE loop\n"
		"  -o lexicon=FILE  use this lexicon (default: built on the "
		"first mount)\n"
		"  -o state=DIR     state directory (default "
		"$XDG_STATE_HOME/imatchfs/...)\n"
		"  -o k=N keep=F nidf=LO:HI min_terms=N min_ratio=F seed=N "
		"max_size=BYTES\n"
		"  -o similarity=F  sketch estimate a candidate pair needs to "
		"be linked (0.9)\n"
		"  -o threads=N     signing threads, at most 256 (default or "
		"0: one\n"
		"                   per CPU)\n"
		"  -o rescan=SECS   rescan period when inotify watches run out "
		"(60)\n"
		"  -o hidden        also read names beginning with '.'\n"
		"  -o exclude=GLOB  leave out paths matching GLOB (gitignore "
		"syntax;\n"
		"                   repeatable; .imatchignore files apply "
		"too)\n"
		"  -o include=GLOB  read only files matching GLOB (or under a "
		"matching\n"
		"                   directory; repeatable; excludes still "
		"apply)\n"
		"  -o filter=EXT:COMMAND  text of *.EXT files no extractor "
		"reads: COMMAND\n"
		"                   reads the file on stdin, writes text "
		"(repeatable)\n"
		"  -o keep_rule=RULES  keep rules of redundant/, ':'-separated "
		"(default\n"
		"                   protect:oldest:shortest:name)\n"
		"  -o protect=DIR   never show a file under DIR in redundant/ "
		"(repeatable)\n"
		"  plus the usual FUSE options (allow_other, "
		"default_permissions, ro, ...)\n");
}

/* mount(8) and fstab options that mean nothing to the daemon. */
static bool ignored(const char *name)
{
	static const char *const names[] = {
		"defaults", "auto",    "noauto", "user",  "nouser", "users",
		"nofail",   "_netdev", "owner",	 "group", "comment"};

	if (!strncmp(name, "x-", 2))
		return true;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(name, names[i]))
			return true;
	return false;
}

static int bad(struct imfs_opts *o, const char *what, const char *name,
	       const char *val)
{
	fprintf(stderr, "imatchfs: error: %s%s%s%s\n", what, name,
		val ? ": " : "", val ? val : "");
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

static int set_string(char **dst, const char *val)
{
	free(*dst);
	*dst = strdup(val);
	return *dst ? 0 : -ENOMEM;
}

/* One "-o name[=value]". @return 0 (ours), 1 (FUSE's) or -1. */
static int our_option(struct imfs_opts *o, const char *arg)
{
	char name[64];
	const char *eq = strchr(arg, '=');
	size_t nl = eq ? (size_t)(eq - arg) : strlen(arg);
	const char *val = eq ? eq + 1 : NULL;

	if (nl >= sizeof(name))
		return 1;
	memcpy(name, arg, nl);
	name[nl] = 0;
	if (ignored(name))
		return 0;
	if (!strcmp(name, "lexicon") || !strcmp(name, "state")) {
		if (!val || !*val)
			return bad(o, "option ", name, "needs a value");
		return set_string(name[0] == 'l' ? &o->lexicon : &o->state, val)
			       ? -1
			       : 0;
	}
	if (!strcmp(name, "keep_rule")) {
		struct im_keep k;
		char why[160];

		/* ',' separates -o options: the rules are joined by ':' here
		 * (a '\,' that reached us is taken too). */
		if (!val || set_string(&o->keep_rule, val))
			return bad(o, "option ", name, "needs a value");
		for (char *c = o->keep_rule; *c; c++)
			if (*c == ':')
				*c = ',';
		if (im_keep_parse(o->keep_rule, &k, why, sizeof(why)))
			return bad(o,
				   "invalid value for option keep_rule: ", why,
				   NULL);
		return 0;
	}
	if (!strcmp(name, "protect")) {
		char **v;

		if (!val || !*val)
			return bad(o, "option ", name, "needs a value");
		v = realloc(o->protect, (o->nprotect + 1) * sizeof(*v));
		if (!v)
			return -1;
		o->protect = v;
		v[o->nprotect] = NULL; /* set_string() frees what was there */
		return set_string(&v[o->nprotect++], val) ? -1 : 0;
	}
	if (!strcmp(name, "threads") || !strcmp(name, "rescan")) {
		unsigned *dst = name[0] == 't' ? &o->threads : &o->rescan;
		if (!val || parse_uint(val, dst) ||
		    (name[0] == 'r' && *dst == 0) ||
		    (name[0] == 't' && *dst > IM_SCAN_MAX_THREADS))
			return bad(o, "invalid value for option ", name,
				   val ? val : "");
		return 0;
	}
	if (!strcmp(name, "hidden") && !val) {
		o->params.hidden = 1;
		return 0;
	}
	if (!strcmp(name, "exclude") || !strcmp(name, "include")) {
		int ret = o->scope ? 0 : im_scope_new(&o->scope);

		if (!ret && val)
			ret = name[0] == 'e'
				      ? im_scope_add_exclude(o->scope, val)
				      : im_scope_add_include(o->scope, val);
		if (ret == -ENOMEM)
			return -1;
		if (ret || !val)
			return bad(o, "invalid value for option ", name,
				   val ? val : "");
		o->params.scope = o->scope;
		return 0;
	}
	if (!strcmp(name, "filter")) {
		char **v;

		if (!val || im_extract_filter_check(val))
			return bad(o, "invalid value for option ", name,
				   val ? val : "");
		v = realloc(o->filters, (o->nfilters + 2) * sizeof(*v));
		if (!v)
			return -1;
		o->filters = v;
		v[o->nfilters] = strdup(val);
		if (!v[o->nfilters])
			return -1;
		v[++o->nfilters] = NULL;
		o->params.filters = (const char *const *)v;
		return 0;
	}
	if (val) {
		int ret = im_params_set(&o->params, name, val);
		if (ret == 0)
			return 0;
		if (ret == -EINVAL)
			return bad(o, "invalid value for option ", name, val);
	}
	if (!strcmp(name, "allow_other"))
		o->allow_other = true;
	if (!strcmp(name, "auto_unmount"))
		o->auto_unmount = true;
	return 1; /* a FUSE option: fuse_session_new() knows it or refuses */
}

static int opt_proc(void *data, const char *arg, int key,
		    struct fuse_args *outargs)
{
	struct imfs_opts *o = data;
	(void)outargs;

	if (o->failed)
		return -1;
	if (key == FUSE_OPT_KEY_NONOPT) {
		if (!o->source)
			return set_string(&o->source, arg) ? -1 : 0;
		if (!o->mountpoint)
			return set_string(&o->mountpoint, arg) ? -1 : 0;
		return bad(o, "unexpected argument ", arg, NULL);
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
		o->done = true;
		return 0;
	}
	if (!strcmp(arg, "-V") || !strcmp(arg, "--version")) {
		printf("imatchfs %s (FUSE %s)\n", IMFS_VERSION,
		       fuse_pkgversion());
		o->done = true;
		return 0;
	}
	if (arg[0] == '-')
		return bad(o, "unknown option ", arg, NULL);
	return our_option(o, arg);
}

int imfs_opts_parse(struct fuse_args *args, struct imfs_opts *o)
{
	memset(o, 0, sizeof(*o));
	im_params_init(&o->params);
	/* Size first: binary files are hashed only when another file has
	 * their size (core/index/exact.h, fs/model.c). */
	o->params.defer_binary = 1;
	o->rescan = 60;
	if (fuse_opt_parse(args, o, NULL, opt_proc) || o->failed) {
		if (!o->failed)
			fprintf(stderr, "imatchfs: error: out of memory\n");
		return -1;
	}
	if (o->done)
		return 1;
	if (!o->source || !o->mountpoint) {
		fprintf(stderr, "imatchfs: error: need SOURCE and MOUNTPOINT "
				"(imatchfs --help)\n");
		return -1;
	}
	char why[160];
	if (im_params_check(&o->params, why, sizeof(why))) {
		fprintf(stderr, "imatchfs: error: %s\n", why);
		return -1;
	}
	/* Read-only whatever the caller asked: `-o ro` is accepted as is. */
	if (fuse_opt_add_arg(args, "-o") ||
	    fuse_opt_add_arg(args, "ro,fsname=imatchfs,subtype=imatchfs")) {
		fprintf(stderr, "imatchfs: error: out of memory\n");
		return -1;
	}
	return 0;
}

void imfs_opts_release(struct imfs_opts *o)
{
	free(o->source);
	free(o->mountpoint);
	free(o->state);
	free(o->lexicon);
	for (size_t i = 0; i < o->nfilters; i++)
		free(o->filters[i]);
	free(o->filters);
	free(o->keep_rule);
	for (size_t i = 0; i < o->nprotect; i++)
		free(o->protect[i]);
	free(o->protect);
	im_scope_free(o->scope);
	memset(o, 0, sizeof(*o));
}
