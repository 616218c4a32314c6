/**
 * @file imatch.h
 * Shared pieces of the `imatch` command line tool: the parsed command line,
 * the subcommands, and the output helpers (escaping for text and JSON).
 *
 * Exit codes: 0 success, 1 runtime failure (missing input, unreadable or
 * corrupt lexicon, read errors), 2 usage error.
 */
#ifndef IMATCH_H
#define IMATCH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "exact.h"
#include "lexicon.h"
#include "params.h"
#include "scan.h"
#include "sig.h"

#define EXIT_USAGE   2
#define EXIT_RUNTIME 1

/** qsort() that takes an empty array as it comes: a growable array holds
 *  NULL until its first element, and qsort()'s array may not be NULL even
 *  for n = 0 (UBSan stops there). */
static inline void sort_n(void *v, size_t n, size_t size,
			  int (*cmp)(const void *, const void *))
{
	if (n)
		qsort(v, n, size, cmp);
}

/** The command line of one subcommand after option parsing. */
struct cli {
	const char *cmd; /**< "scan", "sign", ... (for messages) */
	struct im_params p;
	bool max_size_given; /**< --max-size was on the command line */
	const char *lexicon; /**< --lexicon FILE, or NULL */
	const char *out;     /**< -o FILE (lexicon build) */
	unsigned jobs;	     /**< -j N; 0 = one per CPU */
	int verbose;	     /**< -v, may be repeated */
	bool json;	     /**< --json */
	/* The batch stages (cmd_stage.c). */
	const char *files_from; /**< --files-from LIST: a shard */
	const char *root;	/**< --root DIR: what the list is relative to */
	const char *shards;	/**< ls --shards DIR */
	const char *top_dirs;	/**< ls --top-dirs FILE */
	const char *under_from; /**< ls --under-from FILE */
	uint64_t shard_bytes;	/**< ls --shard-bytes N */
	uint64_t spill_bytes;	/**< sign --records --spill-bytes N */
	unsigned parts;		/**< -P, --parts N: partitions of a shuffle */
	bool from_df;		/**< lexicon build --from-df */
	bool check;		/**< cat --check */
	bool head;		/**< cat --head */
	/* dedupe and apply */
	bool near;		/**< --near */
	const char *keep_rules; /**< --keep RULES, or NULL */
	const char **protect;	/**< --protect DIR, repeatable (malloc'd) */
	size_t nprotect;
	struct im_scope *scope; /**< --exclude, --include (p.scope borrows
				   it), or NULL */
	const char **filters;	/**< --filter EXT:CMD, repeatable (malloc'd,
				 NULL-terminated; p.filters borrows it) */
	size_t nfilters;
	const char *action;   /**< --action ACTION, or NULL */
	const char *format;   /**< --format FMT (--csv: "csv"), or NULL */
	bool dry_run;	      /**< --dry-run */
	bool dirs;	      /**< scan --dirs */
	bool records;	      /**< sign --records */
	const char *shard_id; /**< sign --shard-id I/N */
	const char *part;     /**< export --part I/N */
	bool dupes;	      /**< export --dupes */
	bool plan;	      /**< export --plan */
	const char *subtree;  /**< state import --subtree DIR */
	int argc;	      /**< operands */
	char **argv;
};

/* ---- Subcommands: each returns the process exit code. --------------------- */

int cmd_lexicon_build(struct cli *c);
int cmd_scan(struct cli *c);
int cmd_sign(struct cli *c);
int cmd_explain(struct cli *c);
int cmd_terms(struct cli *c);
int cmd_ls(struct cli *c);
int cmd_df(struct cli *c);
int cmd_df_merge(struct cli *c);
int cmd_ls_merge(struct cli *c);
int cmd_cat(struct cli *c);
int cmd_dedupe(struct cli *c);
int cmd_apply(struct cli *c);
int cmd_dupes(struct cli *c);
/** explain with two operands (cmd_dupes.c): why they are linked or not. */
int explain_pair(struct cli *c, const struct im_lexicon *lex);

int cmd_sign_records(struct cli *c);
int cmd_links(struct cli *c);
int cmd_components(struct cli *c);
int cmd_export(struct cli *c);
int cmd_state_import(struct cli *c);

/* Shared by the stage commands (cmd_stage.c). */
struct im_stage_reader;
/** Open and verify a stage file; else one line naming it. @return NULL. */
struct im_stage_reader *open_stage(const char *path);
/** open(O_DIRECTORY) of a tree; else one line naming it. @return fd or -1. */
int open_root(const char *dir);
/** Say that writing @p path failed with @p err. @return EXIT_RUNTIME. */
int write_failed(const char *path, int err);

/** What a list of files holds: how many, and their fingerprint (the sum of
 *  im_list_path_hash(), shard.h). */
struct list_print {
	uint64_t files, paths;
};

/**
 * The lists of the shards that `imatch ls --shards` wrote, from the
 * manifest @p man: (*out)[s] for each shard s < *n, the manifest's shard
 * count, or the whole tree in (*out)[0] (*n = 1) for a manifest made
 * without --shards. The caller frees *out. @return 0, -ENOMEM, or -EINVAL
 * for a record that does not decode or names a shard beyond the count.
 */
int manifest_lists(struct im_stage_reader *man, struct list_print **out,
		   uint32_t *n);

/** Print one record as JSON to @p f, or with @p f NULL only check that it
 *  decodes. @return whether it decodes. */
typedef bool (*cat_record_fn)(FILE *f, const uint8_t *p, size_t len);

/**
 * The printer and the names of the meta words of the detection stages'
 * kinds (cmd_cluster.c). @return false (nothing set) for another kind.
 */
bool cat_detect_kind(uint32_t kind, const char *const **names, size_t *n,
		     cat_record_fn *rec);

/**
 * lexicon build --from-df: add up the merged partitions named by the
 * operands into one struct im_df, exactly the counts of one pass over the
 * tree. Prints the reason naming the file on failure. @return 0 or -1.
 */
int df_from_stage(struct cli *c, struct im_df **out);

/* ---- Signing a tree (cmd_scan.c) ------------------------------------------- */

struct im_index;
struct im_doc_sigs;
struct stat;

/** Sees each file scan_tree() signed, after it entered the index; calls are
 *  serialized. @p st is the fstat() of the file as it was read. */
typedef void (*scan_file_fn)(const char *path, const struct stat *st,
			     const struct im_doc_sigs *d, void *arg);

/**
 * Sign the tree open at @p fd (c->argv[0]) into a new index, exactly as
 * `imatch scan` does: with c->lexicon, else a lexicon built from the tree
 * first. The caller frees *idx with im_index_free().
 *
 * @param fn  may be NULL.
 * @return 0, or -1 after printing why.
 */
int scan_tree(struct cli *c, int fd, struct im_index **idx, scan_file_fn fn,
	      void *arg);

/** What scan_tree_exact() read. */
struct exact_scan_stats {
	size_t files;	   /**< walked, not empty, within max_size */
	size_t hashed;	   /**< of those, sharing their size with another:
			    *   their first IM_EXACT_HEAD bytes hashed */
	size_t head_apart; /**< of those, told apart by those bytes alone (no
			    *   other file of their size has them) */
	size_t whole;	   /**< of those, longer than IM_EXACT_HEAD and read
			    *   again whole: their head matched another's */
	uint64_t bytes;	   /**< read to hash them (heads and whole files) */
	size_t unreadable; /**< changed, vanished or unreadable meanwhile */
	size_t groups;	   /**< groups of copies (identical whole hashes) */
	size_t too_big;	   /**< left out: over max_size (never opened) */
};

/**
 * For a plan of exact copies only (exact_scan.c): the files of the tree
 * open at @p fd that are byte-identical to another, in a new index, with
 * @p fn called for each as scan_tree() does; files of a unique size are
 * never opened. The caller frees *idx with im_index_free().
 *
 * @return 0, or -1 after printing why.
 */
int scan_tree_exact(struct cli *c, int fd, struct im_index **idx,
		    scan_file_fn fn, void *arg, struct exact_scan_stats *st);

/** scan --dirs: print the duplicate directories of @p idx (cmd_dedupe.c).
 *  @return the exit code. */
int print_dup_dirs(const struct cli *c, const struct im_index *idx);

/* ---- The clusters of a tree (cmd_scan.c), also printed by `export` ------- */

struct cluster {
	struct im_sig name;
	size_t size;
	char **members; /**< sorted */
};

/** What `scan --json` reports besides the clusters. */
struct scan_summary {
	struct im_scan_counts c;
	uint64_t lex_docs;
	size_t primary, secondary;
	/* The lexicon's own nidf window (a lexicon given was built with its
	 * own, whatever --nidf says); have_window false without a lexicon. */
	bool have_window;
	double nidf_lo, nidf_hi;
	double t_lex, t_sign;
	struct im_exact_stats exact; /**< the size-first exact tier */
	double t_exact;
};

/** Largest first; equal sizes by first member, which is unique (qsort). */
int cmp_cluster(const void *a, const void *b);

/** The `scan` text on stdout: one line per cluster. */
void print_scan_text(const struct cluster *v, size_t n);

/** One cluster as print_scan_text() / print_scan_json() print it, to @p f
 *  (JSON: the object alone, without the separator before it). */
void put_scan_cluster_text(FILE *f, const struct cluster *cl);
void put_scan_cluster_json(FILE *f, const struct cluster *cl);

/** `scan --json` up to its clusters' opening bracket, for @p n clusters:
 *  then each as ",\n    " (none before the first: "\n    ") and
 *  put_scan_cluster_json(), then "\n  ]\n}\n" ("]\n}\n" for none). */
void print_scan_json_head(const struct cli *c, const char *root, size_t n,
			  const struct scan_summary *s);

/** The `scan --json` document on stdout, naming @p root. */
void print_scan_json(const struct cli *c, const char *root,
		     const struct cluster *v, size_t n,
		     const struct scan_summary *s);

/* ---- The dupes of a document (cmd_dupes.c), also printed by `export` ---- */

struct dupe {
	char *path;
	double similarity;
	bool exact;
};

struct dupes {
	struct dupe *v;
	size_t n, cap;
};

/** By path (qsort). */
int cmp_dupe(const void *a, const void *b);

/** One document of `dupes` output (text, CSV or JSON as @p c says); its
 *  dupes sorted by path; @p first: the first document printed. */
void print_dupes_doc(const struct cli *c, const char *path,
		     const struct dupes *ds, bool first);
/** The same to @p f, without the JSON separator before the object. */
void put_dupes_doc(FILE *f, const struct cli *c, const char *path,
		   const struct dupes *ds);

/* ---- Removal plans (cmd_dedupe.c), also printed by `export --plan` ------- */

struct im_plan_opts;
struct im_plan_set;

/** Fill @p set (files, hashes, clusters and the plan over them by @p o) for
 *  the tree @p root (absolute, resolved). @return 0, or -1 after printing
 *  why. */
typedef int (*plan_build_fn)(const struct im_plan_opts *o, const char *root,
			     struct im_plan_set *set, void *arg);

/** Whether --exclude/--include leave @p path (relative to the tree) out of
 *  a plan (export --plan; dedupe leaves them out of its walk already). */
bool dedupe_excluded(const struct cli *c, const char *path);

/**
 * Parse dedupe's options (--near, --keep, --protect, --action, --format)
 * for the tree @p root, let @p build plan, and print the plan and its
 * summary exactly as `imatch dedupe` does. @return the exit code.
 */
int dedupe_print(struct cli *c, const char *root, plan_build_fn build,
		 void *arg);

struct im_plan;
struct im_plan_entry;

/** One line of a plan (JSON or CSV, with its newline) as dedupe prints it,
 *  for entry @p e of @p set. @return 0, or -1 after printing why. */
typedef int (*plan_line_fn)(const struct im_plan_opts *o,
			    const struct im_plan_set *set,
			    const struct im_plan_entry *e, const char *line,
			    size_t len, void *arg);

/**
 * As dedupe_print(), but hand each line of the plan to @p line instead of
 * printing it, and print no summary (export --part). Only the formats of
 * lines (JSON, CSV) are accepted. @return the exit code.
 */
int dedupe_lines(struct cli *c, const char *root, plan_build_fn build,
		 plan_line_fn line, void *arg);

/**
 * Print a plan made of lines: the CSV header if the format has one, then
 * whatever @p lines prints on stdout (the parts' lines, in order), then the
 * summary of @p totals (its counts; v is not read). @return the exit code.
 */
int dedupe_join(struct cli *c, const char *root, int (*lines)(void *arg),
		const struct im_plan *totals, void *arg);

/* ---- Messages -------------------------------------------------------------- */

/** "imatch: " + message + newline on stderr, the message written as
 *  put_text_path() writes a path (the names in it may hold any byte). The
 *  line is written whole under stderr's lock: threads may call it. */
void err_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/** Load c->lexicon, printing the loader's reason on failure. @return 0 or -1. */
int load_lexicon(const struct cli *c, struct im_lexicon **out);

/* ---- Output escaping ------------------------------------------------------- */

/**
 * Write a path for the text formats and messages: TAB, newline and
 * backslash are written \t, \n and \\, the other control bytes (below 0x20,
 * and 0x7f) \xHH (two lowercase hex digits), so that one record stays on
 * one line, TAB still separates fields and no control byte reaches a
 * terminal; every other byte is written as is. Reversible: a backslash
 * always begins an escape.
 */
void put_text_path(FILE *f, const char *s);

/**
 * Write @p s as a JSON string literal. Valid UTF-8 is copied (control
 * characters, '"' and '\' escaped); each byte that is not part of valid UTF-8
 * is written \udcXX (XX its value), the lone low surrogate U+DC80+byte that
 * Python's "surrogateescape" uses: no valid UTF-8 text decodes to one, so
 * the original bytes are recovered exactly.
 */
void put_json_string(FILE *f, const char *s);

/**
 * Write @p s as one CSV field (RFC 4180): as is, or in double quotes with
 * quotes doubled when it holds a comma, a quote or a line break. Bytes are
 * written as they are (a path that is not UTF-8 stays so).
 */
void put_csv(FILE *f, const char *s);

/** Whether the output is to be CSV (--csv). */
#define WANT_CSV(c) ((c)->format && !strcmp((c)->format, "csv"))

/** Byte-order comparison of two char * (for qsort). */
int cmp_strp(const void *a, const void *b);

#endif
