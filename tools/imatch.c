/**
 * @file imatch.c
 * `imatch`: the command line over core/ (DESIGN §5). This file holds main(),
 * the subcommand table, option parsing and help; the subcommands live in
 * cmd_scan.c (scan, lexicon build) and cmd_doc.c (sign, explain, terms).
 *
 * Every subcommand fills one struct im_params from its options, exactly as
 * the daemon does from -o, so the two cannot drift apart.
 */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "extract.h"
#include "imatch.h"
#include "mem.h"
#include "stage.h"
#include "plan.h"
#include "scope.h"
#include "shard.h"

#ifndef IM_VERSION
#define IM_VERSION "unknown"
#endif

/* Which subcommands accept an option. */
enum {
	F_BUILD = 1 << 0,
	F_SIGN = 1 << 1,
	F_SCAN = 1 << 2,
	F_EXPLAIN = 1 << 3,
	F_TERMS = 1 << 4,
	F_LS = 1 << 5,
	F_DF = 1 << 6,
	F_MERGE = 1 << 7,
	F_CAT = 1 << 8,
	F_DEDUPE = 1 << 9,
	F_APPLY = 1 << 10,
	F_DUPES = 1 << 11,
	F_LINKS = 1 << 12,
	F_COMP = 1 << 13,
	F_EXPORT = 1 << 14,
	F_IMPORT = 1 << 15,
	F_LS_MERGE = 1 << 16,
	F_ALL = 0x3ff | F_DUPES | F_LINKS | F_COMP | F_EXPORT | F_IMPORT |
		F_LS_MERGE, /* not apply */
	F_KEYED = F_LINKS | F_COMP | F_EXPORT |
		  F_IMPORT, /* stage files keyed by params */
	F_WRITES = F_BUILD | F_LS | F_DF | F_MERGE | F_LINKS | F_COMP |
		   F_IMPORT | F_LS_MERGE, /* -o */
	F_SIGNING = F_SIGN | F_SCAN | F_EXPLAIN | F_DEDUPE | F_DUPES |
		    F_KEYED, /* k, seed, ... */
	/* --exclude, --include: whatever walks a tree, and sign's files. */
	F_SCOPED = F_BUILD | F_SIGN | F_SCAN | F_LS | F_DEDUPE | F_DUPES,
	/* --files-from LIST --root DIR in place of the DIR operand. */
	F_LISTED = F_BUILD | F_SCAN | F_DEDUPE | F_DUPES,
};

/* Option codes above the byte range for long-only options. */
enum {
	O_LEXICON = 256,
	O_JSON,
	O_HIDDEN,
	O_KEEP,
	O_NIDF,
	O_MIN_TERMS,
	O_MIN_RATIO,
	O_SEED,
	O_MAX_SIZE,
	O_SECONDARY_CAP,
	O_MIN_WORD_LEN,
	O_MAX_DIGITS,
	O_MIN_UNIQUE,
	O_VERSION,
	O_FILES_FROM,
	O_ROOT,
	O_SHARDS,
	O_SHARD_BYTES,
	O_SPILL_BYTES,
	O_FROM_DF,
	O_CHECK,
	O_HEAD,
	O_NEAR,
	O_KEEP_RULES,
	O_KEEP_FRACTION,
	O_PROTECT,
	O_ACTION,
	O_FORMAT,
	O_CSV,
	O_DRY_RUN,
	O_SIMILARITY,
	O_DIRS,
	O_RECORDS,
	O_SHARD_ID,
	O_EXCLUDE,
	O_DUPES,
	O_FILTER,
	O_SUBTREE,
	O_PLAN,
	O_INCLUDE,
	O_TOP_DIRS,
	O_UNDER_FROM,
	O_PART,
};

struct opt {
	const char *name;
	int has_arg;
	int val;
	unsigned cmds;
	const char *param; /* im_params_set name, or NULL */
	const char *help;
};

static const struct opt opts[] = {
	{"lexicon", 1, O_LEXICON, F_SIGNING, NULL,
	 "--lexicon FILE     use this lexicon (from 'imatch lexicon build')"},
	{"output", 1, 'o', F_WRITES | F_SIGN | F_EXPORT, NULL,
	 "-o, --output FILE  write the result here (required; df: the "
	 "prefix)"},
	{"jobs", 1, 'j', F_BUILD | F_SCAN | F_DEDUPE | F_DUPES, NULL,
	 "-j, --jobs N       worker threads (default: one per CPU)"},
	{"json", 0, O_JSON, F_SCAN | F_DUPES | F_EXPORT, NULL,
	 "--json             print a JSON document instead of text"},
	{"json", 0, O_JSON, F_DEDUPE, NULL,
	 "--json             the plan as JSON lines, one object per file (the "
	 "default)"},
	{"verbose", 0, 'v', F_ALL & ~F_DEDUPE & ~F_APPLY, NULL,
	 "-v, --verbose      say more on stderr (scan: a summary; scan, "
	 "dupes: each file\n                   not read; terms, sign: why a "
	 "file has no terms;\n                   explain: S)"},
	{"verbose", 0, 'v', F_APPLY, NULL,
	 "-v, --verbose      name each done line's keeper and kind: (kept "
	 "KEEPER,\n                   the same N bytes) or (kept KEEPER, near "
	 "S, N bytes against M)"},
	{"verbose", 0, 'v', F_DEDUPE, NULL,
	 "-v, --verbose      say more on stderr: what was read, each file left "
	 "out,\n                   each near-duplicate kept for its figures "
	 "and which differ"},
	{"k", 1, 'k', F_SIGNING, "k",
	 "-k, --k N          randomized lexicons besides the original (0..31;\n                   default 4)"},
	{"keep", 1, O_KEEP, F_SIGNING & ~F_DEDUPE, "keep",
	 "--keep F           fraction of L and B each randomized lexicon "
	 "keeps"},
	{"nidf", 1, O_NIDF, F_BUILD | F_SCAN | F_DEDUPE | F_DUPES | F_EXPORT,
	 "nidf", "--nidf LO:HI       primary lexicon window of normalized idf"},
	{"secondary-cap", 1, O_SECONDARY_CAP,
	 F_BUILD | F_SCAN | F_DEDUPE | F_DUPES, "secondary_cap",
	 "--secondary-cap N  at most N terms in the secondary lexicon"},
	{"min-terms", 1, O_MIN_TERMS, F_SIGNING, "min_terms",
	 "--min-terms N      reject a coordinate when |S| < N"},
	{"min-ratio", 1, O_MIN_RATIO, F_SIGNING, "min_ratio",
	 "--min-ratio F      extend S from B while |S|/|U| < F, then reject"},
	{"seed", 1, O_SEED, F_SIGNING, "seed",
	 "--seed N           key of the randomized lexicons' membership hash"},
	{"max-size", 1, O_MAX_SIZE, F_ALL, "max_size",
	 "--max-size BYTES   skip larger files (suffix K, M, G; 0 = no limit)"},
	{"min-word-len", 1, O_MIN_WORD_LEN, F_ALL, "min_word_len",
	 "--min-word-len N   drop words shorter than N characters"},
	{"max-digits", 1, O_MAX_DIGITS, F_ALL, "max_digits",
	 "--max-digits N     drop words with more than N digits"},
	{"min-unique", 1, O_MIN_UNIQUE, F_SIGNING, "min_unique",
	 "--min-unique N     no signature for documents with fewer unique "
	 "terms"},
	{"from-df", 0, O_FROM_DF, F_BUILD, NULL,
	 "--from-df          operands are merged 'df merge' partitions, not "
	 "DIRs"},
	{"records", 0, O_RECORDS, F_SIGN, NULL,
	 "--records          batch stage: sign the shard --files-from into "
	 "stage files"},
	{"dupes", 0, O_DUPES, F_EXPORT, NULL,
	 "--dupes            export: print what 'imatch dupes' prints (from "
	 "RECORDS... LINKS...)"},
	{"plan", 0, O_PLAN, F_EXPORT, NULL,
	 "--plan             export: print what 'imatch dedupe' prints (from "
	 "RECORDS...\n                   LINKS... CLUSTERS)"},
	{"subtree", 1, O_SUBTREE, F_IMPORT, NULL,
	 "--subtree DIR      only the files under DIR (relative to the tree), "
	 "as the\n                   state of a mount of that directory"},
	{"part", 1, O_PART, F_EXPORT, NULL,
	 "--part I/N         export: write part I of N (documents in records "
	 "order)\n                   to -o FILE; 'export PART...' joins "
	 "them"},
	{"shard-id", 1, O_SHARD_ID, F_SIGN, NULL,
	 "--shard-id I/N     sign --records: this shard's number, of N"},
	{"files-from", 1, O_FILES_FROM, F_DF | F_SIGN | F_LISTED, NULL,
	 "--files-from LIST  NUL-separated paths relative to --root: the "
	 "files to read\n                   (df, sign: the shard; others: "
	 "in place of DIR)"},
	{"root", 1, O_ROOT, F_DF | F_SIGN | F_EXPORT | F_LISTED, NULL,
	 "--root DIR         the tree the listed paths are in (export: its "
	 "name)"},
	{"parts", 1, 'P', F_DF | F_SIGN, NULL,
	 "-P, --parts N      partitions of the output by term hash (64)"},
	{"shards", 1, O_SHARDS, F_LS, NULL,
	 "--shards DIR       also split the files into shard lists in DIR"},
	{"top-dirs", 1, O_TOP_DIRS, F_LS, NULL,
	 "--top-dirs FILE    list only DIR's own files (with --under-from: "
	 "those\n"
	 "                   of the listed directories); write the "
	 "directories\n"
	 "                   below them the walk would enter to FILE, "
	 "NUL-ended"},
	{"under-from", 1, O_UNDER_FROM, F_LS, NULL,
	 "--under-from FILE  list only the directories FILE names (relative "
	 "to\n"
	 "                   DIR, NUL-ended, as --top-dirs writes them; "
	 "without\n"
	 "                   --top-dirs none may lie inside another)"},
	{"shard-bytes", 1, O_SHARD_BYTES, F_LS, NULL,
	 "--shard-bytes N    input bytes per shard (suffix K, M, G; 1G)"},
	{"spill-bytes", 1, O_SPILL_BYTES, F_SIGN, NULL,
	 "--spill-bytes N    sign --records: key bytes held before a sorted "
	 "run is\n                   written to disk (suffix K, M, G; 16M)"},
	{"check", 0, O_CHECK, F_CAT, NULL,
	 "--check            only verify: print nothing, exit 1 if any is bad"},
	{"head", 0, O_HEAD, F_CAT, NULL,
	 "--head             verify, then print the header and totals only"},
	{"hidden", 0, O_HIDDEN, F_BUILD | F_SCAN | F_LS | F_DEDUPE | F_DUPES,
	 NULL, "--hidden           also read names beginning with '.'"},
	{"filter", 1, O_FILTER, F_BUILD | F_SIGNING | F_TERMS, NULL,
	 "--filter EXT:CMD   text of *.EXT files no extractor reads: CMD\n"
	 "                   reads the file on stdin (repeatable)"},
	/* dedupe: --keep names the keep rules there; the fraction has its
	 * own name. */
	{"near", 0, O_NEAR, F_DEDUPE | F_EXPORT, NULL,
	 "--near             also plan near-duplicates (default: exact "
	 "copies)"},
	{"keep", 1, O_KEEP_RULES, F_DEDUPE, NULL,
	 "--keep RULES       keep rules in order (default " IM_KEEP_DEFAULT
	 ")"},
	/* export takes --keep as the other stages do (the fraction). */
	{"keep-rules", 1, O_KEEP_RULES, F_EXPORT, NULL,
	 "--keep-rules RULES export --plan: dedupe's --keep RULES"},
	{"protect", 1, O_PROTECT, F_DEDUPE | F_EXPORT, NULL,
	 "--protect DIR      never plan a file under DIR (repeatable)"},
	{"exclude", 1, O_EXCLUDE, F_SCOPED | F_EXPORT, NULL,
	 "--exclude GLOB     leave out paths matching GLOB (gitignore syntax,\n"
	 "                   repeatable; .imatchignore files apply too;\n"
	 "                   export --plan: out of the plan)"},
	{"include", 1, O_INCLUDE, F_SCOPED | F_EXPORT, NULL,
	 "--include GLOB     read only files matching GLOB or under a "
	 "matching\n"
	 "                   directory (repeatable; excludes still apply)"},
	{"action", 1, O_ACTION, F_DEDUPE | F_EXPORT, NULL,
	 "--action ACTION    remove (default), trash=DIR, hardlink, symlink,\n"
	 "                   reflink"},
	{"format", 1, O_FORMAT, F_DEDUPE | F_EXPORT, NULL,
	 "--format FMT       json (lines, default), csv, text, sh"},
	{"csv", 0, O_CSV, F_DEDUPE | F_SCAN | F_DUPES, NULL,
	 "--csv              print CSV (dedupe: the same as --format csv)"},
	{"keep-fraction", 1, O_KEEP_FRACTION, F_DEDUPE, "keep",
	 "--keep-fraction F  fraction of L and B each randomized lexicon "
	 "keeps"},
	{"dirs", 0, O_DIRS, F_SCAN, NULL,
	 "--dirs             print duplicate directories instead of clusters"},
	{"dry-run", 0, O_DRY_RUN, F_APPLY, NULL,
	 "--dry-run          check every line, change nothing"},
	{"similarity", 1, O_SIMILARITY, F_SIGNING & ~F_SIGN, "similarity",
	 "--similarity F     link a candidate pair when its sketch estimates "
	 "the\n                   cosine of their term sets at F or more"},
	{"help", 0, 'h', F_ALL | F_APPLY, NULL, "-h, --help         this help"},
};
#define NOPTS (sizeof(opts) / sizeof(opts[0]))

struct command {
	const char *name;
	unsigned flag;
	int (*run)(struct cli *c);
	int min_args, max_args; /* operands; max -1 = any */
	const char *usage;
	const char *what;
};

static const struct command commands[] = {
	{"lexicon build", F_BUILD, cmd_lexicon_build, 1, -1,
	 "imatch lexicon build [OPTIONS] -o FILE DIR...",
	 "Count document frequencies over every DIR (together) and save the\n"
	 "primary and secondary lexicons to FILE. A one-line summary goes to\n"
	 "stderr. With --from-df the operands are the merged partitions of\n"
	 "'imatch df merge' instead, one per partition, and FILE is the same\n"
	 "bytes as a build over the tree they were counted from."},
	{"sign", F_SIGN, cmd_sign, 0, -1,
	 "imatch sign [--lexicon FILE] [OPTIONS] FILE...\n"
	 "  imatch sign --records --files-from LIST --root DIR --shard-id I/N "
	 "[-P N] -o PREFIX",
	 "Print one line per file: the path, a TAB, and the K+1 signatures\n"
	 "(40 hex digits) separated by TABs, '-' for a rejected coordinate.\n"
	 "The lexicon is --lexicon FILE, else $IMATCH_LEXICON: signatures\n"
	 "only compare under the same one.\n"
	 "With --records (batch stage 'sign'): sign the files of one shard\n"
	 "into PREFIX.rec (one record per document) and its candidate keys\n"
	 "into N sorted runs PREFIX.k0000 ..., partitioned by key hash."},
	{"scan", F_SCAN, cmd_scan, 1, 1, "imatch scan [OPTIONS] DIR",
	 "Sign every file under DIR and print the clusters of near-duplicates\n"
	 "of two or more files, largest first (ties by first member), one per\n"
	 "line: the members' paths relative to DIR, sorted, TAB-separated.\n"
	 "In paths, TAB, newline and backslash are written \\t, \\n and \\\\,\n"
	 "other control bytes \\xHH.\n"
	 "Without --lexicon the lexicon is built from DIR first, as the\n"
	 "daemon does on its first mount."},
	{"explain", F_EXPLAIN, cmd_explain, 1, 2,
	 "imatch explain [--lexicon FILE] [OPTIONS] FILE [OTHER]",
	 "Show how FILE is signed: its format, |U|, and for each coordinate "
	 "the\n"
	 "terms taken from the primary and secondary lexicons, |S|, |S|/|U|\n"
	 "and the signature or why it was rejected. -v also lists S.\n"
	 "With OTHER: which coordinates agree or differ, the candidate keys\n"
	 "they share, the sketch's estimate, the true cosine of the two term\n"
	 "sets, and whether they are linked.\n"
	 "The lexicon is --lexicon FILE, else $IMATCH_LEXICON."},
	{"dupes", F_DUPES, cmd_dupes, 1, 1, "imatch dupes [OPTIONS] DIR",
	 "Sign every file under DIR as scan does and print, for each document\n"
	 "with near-duplicates, one line: its path, then theirs, "
	 "TAB-separated,\n"
	 "all relative to DIR and sorted. The relation is symmetric and is\n"
	 "what a mount shows in by-doc/PATH/dupes/: binary files and failed\n"
	 "extractions have no line of their own (scan shows their copies).\n"
	 "--json adds each link's similarity and kind (exact: identical\n"
	 "bytes; near)."},
	{"terms", F_TERMS, cmd_terms, 1, -1, "imatch terms [OPTIONS] FILE...",
	 "Print one line per file: the path, then its unique terms U in byte\n"
	 "order, TAB-separated."},
	{"ls", F_LS, cmd_ls, 1, 1,
	 "imatch ls [OPTIONS] -o MANIFEST [--shards DIR] DIR",
	 "Batch stage 'list': walk DIR as scan does (same selection rules)\n"
	 "and write a manifest stage file: path, size, mtime, inode of every\n"
	 "regular file. With --shards, also split them, in walk order, into\n"
	 "shard lists DIR/000000, DIR/000001, ... of about --shard-bytes.\n"
	 "To list in parallel: one 'ls --top-dirs' of the root, one\n"
	 "'ls --under-from' per group of the directories it wrote (each with\n"
	 "its own --shards), then 'imatch ls merge'."},
	{"ls merge", F_LS_MERGE, cmd_ls_merge, 1, -1,
	 "imatch ls merge -o MANIFEST PART...",
	 "Join the manifests of 'ls --top-dirs' and 'ls --under-from' tasks\n"
	 "into the one a single 'imatch ls' would count: the same files and\n"
	 "totals. Shards are numbered on in the order of the PARTs: the\n"
	 "shards of the first, then those of the second, ..."},
	{"df", F_DF, cmd_df, 0, 0,
	 "imatch df --files-from LIST --root DIR [-P N] -o PREFIX",
	 "Batch stage 'df': count the document frequencies of the files of\n"
	 "one shard and write them as N sorted runs PREFIX.p0000 ...,\n"
	 "partitioned by term hash. Unreadable files are counted, not fatal."},
	{"df merge", F_MERGE, cmd_df_merge, 1, -1,
	 "imatch df merge -o FILE RUN...",
	 "Add up runs of one partition (the outputs of 'imatch df' for every\n"
	 "shard) into one. 'imatch lexicon build --from-df' takes one merged\n"
	 "file per partition."},
	{"links", F_LINKS, cmd_links, 1, -1,
	 "imatch links --lexicon FILE [OPTIONS] -o FILE RECORDS... KEYRUN...",
	 "Batch stage 'links': merge the key runs of one partition (every\n"
	 "shard's PREFIX.kNNNN) and link the documents of each key group,\n"
	 "verified from their records (every shard's PREFIX.rec):\n"
	 "each member to the group's first, so a key held by very many\n"
	 "documents costs one link per member. -v reports group sizes."},
	{"components", F_COMP, cmd_components, 1, -1,
	 "imatch components --lexicon FILE [OPTIONS] -o FILE RECORDS... "
	 "LINKS...",
	 "Batch stage 'components': union-find over the documents of every\n"
	 "shard's records (dense ids, shard by shard) and all links; write\n"
	 "the clusters of two or more, each named by its smallest signature."},
	{"export", F_EXPORT, cmd_export, 1, -1,
	 "imatch export --lexicon FILE [OPTIONS] [--json] [--root DIR] "
	 "MANIFEST CLUSTERS RECORDS...\n"
	 "  imatch export --dupes --lexicon FILE [OPTIONS] [--json] [--root "
	 "DIR] RECORDS... LINKS...\n"
	 "  imatch export --plan --lexicon FILE [DEDUPE OPTIONS] --root DIR "
	 "RECORDS... LINKS... CLUSTERS",
	 "Batch stage 'export': print what 'imatch scan [--json] DIR' prints\n"
	 "for the tree the stage files were made from (\"root\" is --root);\n"
	 "with --dupes, what 'imatch dupes [--json] DIR' prints; with --plan,\n"
	 "what 'imatch dedupe DIR' prints (--keep-rules is dedupe's --keep;\n"
	 "without --near the same files and keepers, the cluster field naming\n"
	 "the whole cluster where dedupe, reading only copies, names their "
	 "group).\n"
	 "With --part I/N -o FILE, the same inputs give what part I of N of\n"
	 "the documents contributes; 'imatch export [--dupes|--plan] ... "
	 "PART...'\n"
	 "(with MANIFEST for scan) prints the output from all N parts."},
	{"state import", F_IMPORT, cmd_state_import, 1, -1,
	 "imatch state import --lexicon FILE [OPTIONS] [--subtree DIR] -o "
	 "STATEDIR RECORDS...",
	 "Seed a daemon's state directory from a batch run: copy the lexicon\n"
	 "and write the signature cache of every document of the records\n"
	 "(all shards of 'sign --records'), so that a mount of the tree, or\n"
	 "with --subtree of that directory of it, with -o state=STATEDIR and\n"
	 "the same options serves at once: unchanged files are not read."},
	{"cat", F_CAT, cmd_cat, 1, -1, "imatch cat [--check|--head] FILE...",
	 "Print stage files (from ls, df, ...) as JSON, after verifying them.\n"
	 "A corrupt or truncated file is refused with one line naming it."},
	{"dedupe", F_DEDUPE, cmd_dedupe, 1, 1,
	 "imatch dedupe [--near] [--keep RULES] [--protect DIR]... "
	 "[--action ACTION] [OPTIONS] DIR",
	 "Plan the removal of redundant files under DIR and print the plan,\n"
	 "one JSON object per line (see imatch(1)); a summary goes to stderr.\n"
	 "Changes nothing: review the plan, delete the lines of files to "
	 "keep,\n"
	 "then run 'imatch apply'. Within each cluster the keep rules pick a\n"
	 "keeper; the files directly linked to it are planned, never through\n"
	 "a chain of links. Exact copies only unless --near."},
	{"apply", F_APPLY, cmd_apply, 1, 1, "imatch apply [--dry-run] PLAN|-",
	 "Carry out a plan from 'imatch dedupe' (a file, or - for stdin), "
	 "line\n"
	 "by line, from the last file path down (a mount of the tree then\n"
	 "follows at the cost of each file, not of its whole cluster).\n"
	 "Each line is re-verified first: the file and its keeper\n"
	 "exist, are regular files with the size, mtime and content recorded\n"
	 "in the plan, no path component is a symlink, and the keeper is not\n"
	 "itself planned; otherwise the line is skipped and the reason said.\n"
	 "hardlink and symlink also skip a file whose owner, group, mode,\n"
	 "extended attributes or ACLs differ from the keeper's (the path\n"
	 "would take the keeper's).\n"
	 "Exit status 0 when every line was done or skipped, 1 on an error."},
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

void err_msg(const char *fmt, ...)
{
	char buf[1024], *s = buf;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0) {
		buf[0] = '\0';
	} else if ((size_t)n >= sizeof(buf)) {
		s = malloc((size_t)n + 1);
		if (s) {
			va_start(ap, fmt);
			vsnprintf(s, (size_t)n + 1, fmt, ap);
			va_end(ap);
		} else {
			s = buf; /* cut short, still said */
		}
	}
	/* One line, not mixed with another thread's, and no name's
	 * control bytes on the terminal. */
	flockfile(stderr);
	fputs("imatch: ", stderr);
	put_text_path(stderr, s);
	fputc('\n', stderr);
	funlockfile(stderr);
	if (s != buf)
		free(s);
}

static void usage_all(FILE *f)
{
	fputs("Usage: imatch COMMAND [OPTIONS] ARGS...\n"
	      "Find near-duplicate documents with I-Match signatures.\n\n"
	      "Commands:\n",
	      f);
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(f, "  %s\n", commands[i].usage);
	fputs("\n'imatch COMMAND --help' describes a command's options.\n"
	      "Exit status: 0 success, 1 failure, 2 usage error.\n",
	      f);
}

static void usage_cmd(const struct command *cmd)
{
	printf("Usage: %s\n%s\n\nOptions:\n", cmd->usage, cmd->what);
	for (size_t i = 0; i < NOPTS; i++)
		if (opts[i].cmds & cmd->flag)
			printf("  %s\n", opts[i].help);
}

/* A decimal count in [lo, hi], with a K, M or G suffix (powers of 1024)
 * when @p suffix. @return 0 or -1. */
static int parse_count(const char *s, uint64_t lo, uint64_t hi, bool suffix,
		       uint64_t *out)
{
	unsigned long long v;
	unsigned shift = 0;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -1;
	if (suffix && *end && !end[1]) {
		const char *u = strchr("KMG", *end);

		if (!u)
			return -1;
		shift = 10 * (unsigned)(u - "KMG" + 1);
		end++;
	}
	if (*end || v > (hi >> shift))
		return -1;
	v <<= shift;
	if (v < lo)
		return -1;
	*out = v;
	return 0;
}

/*
 * --files-from LIST --root DIR: the walk of DIR takes the listed files only
 * (scope.h), so these commands read exactly a stage's shard and print what
 * they print for a tree holding only those files.
 */
static int take_list(struct cli *c, const char *name)
{
	struct im_shard sh;
	char why[256];
	int ret;

	if (!c->files_from || !c->root || c->argc) {
		err_msg("%s: --files-from LIST and --root DIR go together, in "
			"place of DIR",
			name);
		return EXIT_USAGE;
	}
	ret = im_shard_load(c->files_from, &sh, why, sizeof(why));
	if (ret) {
		err_msg("%s: %s", c->files_from, why);
		return ret == -ENOMEM ? EXIT_RUNTIME : EXIT_USAGE;
	}
	ret = c->scope ? 0 : im_scope_new(&c->scope);
	if (!ret)
		ret = im_scope_set_list(c->scope, (const char *const *)sh.path,
					sh.n);
	im_shard_release(&sh);
	if (ret) {
		err_msg("%s: %s", name, strerror(-ret));
		return EXIT_RUNTIME;
	}
	c->p.scope = c->scope;
	c->argv = (char **)&c->root;
	c->argc = 1;
	return 0;
}

static int parse_and_run(const struct command *cmd, int argc, char **argv)
{
	struct option lopts[NOPTS + 1];
	char shorts[64] = "+";
	size_t n = 0, sl = 1;
	struct cli c = {.cmd = cmd->name};
	char why[128];
	const char *lexicon_option = NULL;
	uint64_t v64;
	int ch, ret;

	im_params_init(&c.p);
	c.parts = 64;
	c.shard_bytes = 1ull << 30;
	c.spill_bytes = 16ull << 20;
	for (size_t i = 0; i < NOPTS; i++) {
		if (!(opts[i].cmds & cmd->flag))
			continue;
		lopts[n++] = (struct option){opts[i].name, opts[i].has_arg,
					     NULL, opts[i].val};
		if (opts[i].val < 256) {
			shorts[sl++] = (char)opts[i].val;
			if (opts[i].has_arg)
				shorts[sl++] = ':';
		}
	}
	memset(&lopts[n], 0, sizeof(lopts[n]));
	shorts[sl] = '\0';

	opterr = 0;
	optind = 1;
	while ((ch = getopt_long(argc, argv, shorts, lopts, NULL)) != -1) {
		const struct opt *o = NULL;

		for (size_t i = 0; i < NOPTS; i++)
			if (opts[i].val == ch && (opts[i].cmds & cmd->flag))
				o = &opts[i];
		if (ch == '?' || ch == ':' || !o) {
			if (optopt && optopt < 256)
				err_msg("%s: unknown option or missing value: "
					"-%c",
					cmd->name, optopt);
			else
				err_msg("%s: unknown option or missing value: "
					"%s",
					cmd->name, argv[optind - 1]);
			return EXIT_USAGE;
		}
		if (o->param) {
			c.max_size_given |= ch == O_MAX_SIZE;
			if (ch == O_NIDF || ch == O_SECONDARY_CAP)
				lexicon_option = o->name;
			ret = im_params_set(&c.p, o->param, optarg);
			if (ret) {
				err_msg("%s: bad value for --%s: '%s'",
					cmd->name, o->name, optarg);
				return EXIT_USAGE;
			}
			continue;
		}
		switch (ch) {
		case 'h': usage_cmd(cmd); return 0;
		case 'v': c.verbose++; break;
		case 'o': c.out = optarg; break;
		case 'j': {
			char *end;
			unsigned long v;

			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (errno || end == optarg || *end || *optarg == '-' ||
			    v > 1024) {
				err_msg("%s: bad value for --jobs: '%s'",
					cmd->name, optarg);
				return EXIT_USAGE;
			}
			c.jobs = (unsigned)v;
			break;
		}
		case 'P':
			if (parse_count(optarg, 1, IM_STAGE_MAX_PARTS, false,
					&v64)) {
				err_msg("%s: bad value for --parts: '%s' "
					"(1..%d)",
					cmd->name, optarg, IM_STAGE_MAX_PARTS);
				return EXIT_USAGE;
			}
			c.parts = (unsigned)v64;
			break;
		case O_SHARD_BYTES:
			if (parse_count(optarg, 1, UINT64_MAX, true,
					&c.shard_bytes)) {
				err_msg("%s: bad value for --shard-bytes: '%s'",
					cmd->name, optarg);
				return EXIT_USAGE;
			}
			break;
		case O_SPILL_BYTES:
			if (parse_count(optarg, 1, UINT64_MAX, true,
					&c.spill_bytes)) {
				err_msg("%s: bad value for --spill-bytes: '%s'",
					cmd->name, optarg);
				return EXIT_USAGE;
			}
			break;
		case O_FILES_FROM: c.files_from = optarg; break;
		case O_ROOT: c.root = optarg; break;
		case O_SHARDS: c.shards = optarg; break;
		case O_TOP_DIRS: c.top_dirs = optarg; break;
		case O_UNDER_FROM: c.under_from = optarg; break;
		case O_FROM_DF: c.from_df = true; break;
		case O_CHECK: c.check = true; break;
		case O_HEAD: c.head = true; break;
		case O_RECORDS: c.records = true; break;
		case O_SHARD_ID: c.shard_id = optarg; break;
		case O_PART: c.part = optarg; break;
		case O_DUPES: c.dupes = true; break;
		case O_PLAN: c.plan = true; break;
		case O_SUBTREE: c.subtree = optarg; break;
		case O_LEXICON: c.lexicon = optarg; break;
		case O_JSON: c.json = true; break;
		case O_HIDDEN: c.p.hidden = 1; break;
		case O_NEAR: c.near = true; break;
		case O_KEEP_RULES: c.keep_rules = optarg; break;
		case O_PROTECT:
			if (!c.protect)
				c.protect =
					calloc((size_t)argc, sizeof(char *));
			if (!c.protect) {
				err_msg("%s", strerror(ENOMEM));
				return EXIT_RUNTIME;
			}
			c.protect[c.nprotect++] = optarg;
			break;
		case O_EXCLUDE:
		case O_INCLUDE:
			ret = c.scope ? 0 : im_scope_new(&c.scope);
			if (!ret)
				ret = ch == O_EXCLUDE
					      ? im_scope_add_exclude(c.scope,
								     optarg)
					      : im_scope_add_include(c.scope,
								     optarg);
			if (ret == -ENOMEM) {
				err_msg("%s", strerror(ENOMEM));
				im_scope_free(c.scope);
				return EXIT_RUNTIME;
			}
			if (ret) {
				err_msg("%s: bad value for --%s: '%s'",
					cmd->name, o->name, optarg);
				im_scope_free(c.scope);
				return EXIT_USAGE;
			}
			c.p.scope = c.scope;
			break;
		case O_FILTER:
			if (im_extract_filter_check(optarg)) {
				err_msg("%s: bad value for --filter: '%s' "
					"(EXT:COMMAND)",
					cmd->name, optarg);
				return EXIT_USAGE;
			}
			if (!c.filters)
				c.filters =
					calloc((size_t)argc, sizeof(char *));
			if (!c.filters) {
				err_msg("%s", strerror(ENOMEM));
				return EXIT_RUNTIME;
			}
			c.filters[c.nfilters++] = optarg;
			c.p.filters = c.filters;
			break;
		case O_ACTION: c.action = optarg; break;
		case O_FORMAT: c.format = optarg; break;
		case O_CSV: c.format = "csv"; break;
		case O_DRY_RUN: c.dry_run = true; break;
		case O_DIRS: c.dirs = true; break;
		}
	}
	if (im_params_check(&c.p, why, sizeof(why))) {
		err_msg("%s: %s", cmd->name, why);
		return EXIT_USAGE;
	}
	/* The lexicon given was built with its own window and cap: an
	 * option that would build one does nothing then, which a user who
	 * gave it should hear (scripts pass both and still work). */
	if (lexicon_option && c.lexicon)
		err_msg("%s: --%s is ignored: the lexicon given (--lexicon) "
			"fixes it",
			cmd->name, lexicon_option);
	c.argc = argc - optind;
	c.argv = argv + optind;
	if ((cmd->flag & F_LISTED) && (c.files_from || c.root) && !c.from_df) {
		ret = take_list(&c, cmd->name);
		if (ret)
			goto out;
	}
	if (c.argc < cmd->min_args ||
	    (cmd->max_args >= 0 && c.argc > cmd->max_args)) {
		err_msg("%s: %s", cmd->name,
			c.argc < cmd->min_args ? "missing operand"
					       : "too many operands");
		fprintf(stderr, "Usage: %s\n", cmd->usage);
		return EXIT_USAGE;
	}
	if ((cmd->flag & F_WRITES) && !c.out) {
		err_msg("%s: -o FILE is required", cmd->name);
		return EXIT_USAGE;
	}
	if (cmd->flag == F_DF && (!c.files_from || !c.root)) {
		err_msg("df: --files-from LIST and --root DIR are required");
		return EXIT_USAGE;
	}
	/* Signatures compare only under one lexicon, and one file holds no
	 * collection statistics: sign and explain need a lexicon, given or
	 * named by the environment (e.g. the one a daemon saved). */
	if ((cmd->flag & (F_SIGN | F_EXPLAIN | F_KEYED)) && !c.lexicon) {
		const char *env = getenv("IMATCH_LEXICON");

		if (env && *env) {
			c.lexicon = env;
		} else {
			err_msg("%s: no lexicon: give --lexicon FILE or set "
				"IMATCH_LEXICON (a mount's is STATE_DIR/lexicon, "
				"its status names state_dir; or build one with "
				"'imatch lexicon build')",
				cmd->name);
			return EXIT_USAGE;
		}
	}
	ret = cmd->run(&c);
out:
	free(c.protect);
	im_scope_free(c.scope);
	free(c.filters);
	return ret;
}

static int run_command(const struct command *cmd, int argc, char **argv)
{
	int ret = parse_and_run(cmd, argc, argv);

	/* Every usage error, the parser's or the command's, gets the hint. */
	if (ret == EXIT_USAGE)
		fprintf(stderr, "Try 'imatch %s --help'.\n", cmd->name);
	return ret;
}

/*
 * The heap of a run on transparent huge pages: a page touched for the
 * first time cost 1.1 to 1.3 us here (a VM; mostly allocating and zeroing
 * it, not the trap), a 2 MiB huge page 30 to 100 us, a tenth as much a
 * byte. A first scan of the kernel docs took 2,100 faults, most of them
 * in heap blocks that its steps allocate, grow and free one after the
 * other (term sets, the df, the lexicon, the index); now 380, and 4% less
 * CPU time.
 * glibc grows the heap in steps of 128 KiB, too small for the kernel to
 * back with huge pages, and returns freed space at its top, and blocks of
 * 128 KiB or more, to the kernel, which faults them in again at the next
 * use. So: the heap's first block comes with a pad of HEAP_HUGE_RESERVE
 * (M_TOP_PAD), marked for huge pages; nothing is trimmed, and large blocks
 * come from the heap too, so that freed space is reused rather than
 * faulted again. (It was a block of 30 MiB taken and freed at once, below
 * glibc's largest mmap threshold, but malloc() writes the header of what
 * follows a block before madvise() can come: those 2 MiB came 4 KiB at a
 * time, 300 to 600 faults at -j 2 on the manuals once core's blocks
 * (below) had filled the heap up to them.) Pages are still only taken as
 * they are touched, 2 MiB at a time: that scan's peak RSS went from 16.4
 * to 19.5 MB (khugepaged may yet fill the touched huge pages of a long
 * run, at most HEAP_HUGE_RESERVE). The daemon (fs/main.c) sets its own
 * allocator options, for a long life: this is the command line's only.
 * Not under a limit on the address space or the data (ulimit -v, -d): the
 * reserve counts in both, 64 MiB (it was 38) that the tables' own mappings
 * (mem.h) then lack. Under ulimit -v 45000 a scan of 445 licences failed
 * with ENOMEM (ulimit -d 40000 too) where it had needed less than 25 MB.
 * One arena for every thread: glibc gives each further thread an arena of
 * its own, mapped apart from this heap, not on huge pages and trimmed as
 * it frees: a first scan of the kernel docs at -j 2 took 1,020 faults to
 * -j 1's 190; with one arena, 265, and 2 to 4% less CPU time. Threads
 * still take small blocks from their own caches (tcache), without the
 * arena's lock.
 * core's own tables and buffers (mem.h) then come from its huge pages too,
 * up to IM_HEAP_MOST each and while they have room, where each was a
 * mapping of its own: packed with the rest, and in memory that a step
 * before freed (im_mem_use_heap()).
 */
#if defined(__GLIBC__) && defined(MADV_HUGEPAGE)
/* Address space only: pages come as they are touched. */
#define HEAP_HUGE_RESERVE ((size_t)64 << 20)

/* The heap below its first huge page, never touched: kept for the run so
 * that blocks are taken from huge pages from the start (volatile, else the
 * compiler drops an allocation that nothing reads). */
static void *volatile heap_head;

/* Whether the run's address space or data is limited (or unknown). */
static bool memory_limited(void)
{
	struct rlimit as, data;

	return getrlimit(RLIMIT_AS, &as) || getrlimit(RLIMIT_DATA, &data) ||
	       as.rlim_cur != RLIM_INFINITY || data.rlim_cur != RLIM_INFINITY;
}
#endif

static void heap_on_huge_pages(void)
{
#if defined(__GLIBC__) && defined(MADV_HUGEPAGE)
	uintptr_t at, from, to;
	void *end;
	char *p;

	if (memory_limited())
		return;
	if (!mallopt(M_ARENA_MAX, 1) || !mallopt(M_MMAP_THRESHOLD, 32 << 20) ||
	    !mallopt(M_TRIM_THRESHOLD, 256 << 20) ||
	    !mallopt(M_TOP_PAD, (int)HEAP_HUGE_RESERVE))
		return;
	/* The heap's first block: the heap grows by the pad with it, and
	 * nothing is written past the top's header, just after it. */
	p = malloc(64);
	mallopt(M_TOP_PAD, 8 << 20);
	end = sbrk(0);
	if (!p || end == (void *)-1)
		return;
	at = (uintptr_t)p + 64 + 32;
	from = (at + IM_HUGE_PAGE - 1) & ~(uintptr_t)(IM_HUGE_PAGE - 1);
	to = (uintptr_t)end & ~(uintptr_t)(IM_HUGE_PAGE - 1);
	if (to <= from)
		return;
	/* A hint: where the kernel has no huge pages, nothing changes. */
	madvise((void *)from, to - from, MADV_HUGEPAGE);
	/* core's blocks that do not fit below it are mapped (mem.h). */
	im_mem_use_heap((void *)from, (void *)to);
	/* The next block starts at the first huge page. */
	if (from - at > 64)
		heap_head = malloc(from - at - 64);
#endif
}

int main(int argc, char **argv)
{
	const char *name;

	heap_on_huge_pages();

	if (argc < 2) {
		usage_all(stderr);
		return EXIT_USAGE;
	}
	name = argv[1];
	if (!strcmp(name, "--help") || !strcmp(name, "-h") ||
	    !strcmp(name, "help")) {
		if (argc > 2 && strcmp(name, "help") == 0) {
			for (size_t i = 0; i < NCOMMANDS; i++)
				if (!strcmp(commands[i].name, argv[2]) ||
				    (!strcmp(argv[2], "lexicon") &&
				     commands[i].flag == F_BUILD)) {
					usage_cmd(&commands[i]);
					return 0;
				}
		}
		usage_all(stdout);
		return 0;
	}
	if (!strcmp(name, "--version") || !strcmp(name, "-V")) {
		printf("imatch %s\n", IM_VERSION);
		return 0;
	}
	if (!strcmp(name, "lexicon")) {
		if (argc == 3 &&
		    (!strcmp(argv[2], "--help") || !strcmp(argv[2], "-h"))) {
			usage_cmd(&commands[0]);
			return 0;
		}
		if (argc < 3 || strcmp(argv[2], "build")) {
			err_msg("lexicon: expected 'lexicon build'");
			fprintf(stderr, "Try 'imatch --help'.\n");
			return EXIT_USAGE;
		}
		/* argv[2] ("build") plays the program name for getopt. */
		return run_command(&commands[0], argc - 2, argv + 2);
	}
	/* Two-word commands ("df merge"): argv[2] plays the program name. */
	for (size_t i = 0; argc > 2 && i < NCOMMANDS; i++) {
		size_t nl = strlen(name);

		if (!strncmp(commands[i].name, name, nl) &&
		    commands[i].name[nl] == ' ' &&
		    !strcmp(commands[i].name + nl + 1, argv[2]))
			return run_command(&commands[i], argc - 2, argv + 2);
	}
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (!strcmp(commands[i].name, name))
			return run_command(&commands[i], argc - 1, argv + 1);
	if (name[0] == '-')
		err_msg("unknown option '%s' (options follow the command)",
			name);
	else
		err_msg("unknown command '%s'", name);
	fprintf(stderr, "Try 'imatch --help'.\n");
	return EXIT_USAGE;
}
