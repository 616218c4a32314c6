/**
 * @file scope.h
 * Which paths of a source tree are read: `-o exclude=GLOB`,
 * `-o include=GLOB` (`--exclude`, `--include` on imatch) and `.imatchignore`
 * files in the tree, with gitignore(5) semantics. One implementation for the
 * walker (core/scan.c), the daemon's watcher and the CLI.
 *
 * Patterns (one per line of a .imatchignore, one per --exclude):
 *   - `*` matches any run of bytes but '/', `?` one byte but '/', `[...]` one
 *     byte of a set (ranges `a-z`, negation `[!...]` or `[^...]`, classes
 *     `[:alpha:]` ...), `\` makes the next byte literal. An unclosed `[` is
 *     a literal '['.
 *   - A pattern with a '/' at its start or in its middle is anchored: it
 *     matches the path relative to the directory of its .imatchignore (the
 *     source's root for the command line's globs), a leading '/' dropped.
 *     Without one it matches the last component at any depth.
 *   - `**` as a whole component matches any number of directories: as
 *     the first component it matches in every directory, between two
 *     components it matches zero or more directories (a, `**`, b matches
 *     a/b and a/x/y/b), as the last component everything inside (not the
 *     directory itself). Other runs of '*' are a plain '*'.
 *   - A trailing '/' matches directories only; a leading '!' re-includes
 *     what an earlier pattern excluded (`\!` for a literal '!'); lines that
 *     are empty or begin with '#' are comments (`\#` for a literal '#');
 *     trailing spaces are dropped unless escaped with '\'; a trailing CR is
 *     dropped (files written on Windows).
 *
 * Precedence, as git's: the command line's excludes first (the last of them
 * that matches decides, so `--exclude '!keep.log'` re-includes), then the
 * .imatchignore files from the deepest directory up (in each file the last
 * matching line decides), else the path is in. An excluded directory is not
 * descended, so nothing below it can be re-included (git's rule too).
 * Includes restrict, they do not override: a file is read only if it is not
 * excluded AND, when any include glob is given, the glob matches the file or
 * one of its parent directories (so `--include '*.pdf'` or `--include
 * reports`). Directories are always descended when not excluded, since a
 * file below may match. .imatchignore files are read whatever -o hidden says
 * and are never documents themselves.
 *
 * Thread-safety: a struct im_scope or struct im_ignore is immutable once
 * built and may be shared by any number of threads; a struct im_scope_chain
 * belongs to one thread.
 */
#ifndef IM_SCOPE_H
#define IM_SCOPE_H

#include <stdbool.h>
#include <stddef.h>

/** The name of the per-directory ignore files. */
#define IM_IGNORE_NAME ".imatchignore"
/** A larger .imatchignore is refused (-EFBIG) rather than read. */
#define IM_IGNORE_MAX_BYTES (1u << 20)

/* ---- Pattern lists ------------------------------------------------------- */

/** An ordered list of patterns: one .imatchignore file, or the excludes of
 *  the command line. */
struct im_ignore;

/** The verdict of a pattern list for one path. */
enum im_ignore_verdict {
	IM_IGNORE_NONE = 0, /**< no pattern matched */
	IM_IGNORE_EXCLUDE,  /**< the last matching pattern excludes */
	IM_IGNORE_INCLUDE,  /**< the last matching pattern is a '!' one */
};

/**
 * Parse the text of a .imatchignore found in directory @p base (relative to
 * the root, "" for the root itself; copied). Lines are as described above;
 * no line is an error (a pattern that can match nothing just matches
 * nothing). The caller frees *out with im_ignore_free().
 *
 * @return 0 or -ENOMEM (*out NULL).
 */
int im_ignore_parse(const char *base, const char *text, size_t len,
		    struct im_ignore **out);

/**
 * Read @p dirfd's IM_IGNORE_NAME (not following a symlink) and parse it as
 * the file of directory @p base.
 *
 * @return 0 with *out NULL when there is no such file; 0 with the list;
 *         -EFBIG when it is larger than IM_IGNORE_MAX_BYTES; -EINVAL when it
 *         is not a regular file; -ENOMEM; or the errno of open or read.
 */
int im_ignore_load_at(int dirfd, const char *base, struct im_ignore **out);

/** Free @p ig (NULL is fine). */
void im_ignore_free(struct im_ignore *ig);

/**
 * Which of @p ig's patterns decides for @p path (relative to the root, no
 * leading '/'), a directory if @p is_dir. Paths outside the list's base
 * directory match nothing.
 */
enum im_ignore_verdict im_ignore_match(const struct im_ignore *ig,
				       const char *path, bool is_dir);

/* ---- The command line's scope ------------------------------------------- */

/** -o exclude / -o include (or --exclude / --include), in order given. */
struct im_scope;

/** An empty scope (every path in). @return 0 or -ENOMEM. Caller frees with
 *  im_scope_free(). */
int im_scope_new(struct im_scope **out);
void im_scope_free(struct im_scope *s);

/**
 * Add one exclude pattern (a .imatchignore line anchored at the root, '!'
 * allowed) or one include glob (same syntax, no '!').
 *
 * @return 0; -EINVAL when @p glob is empty, a comment, or (include) begins
 *         with '!'; -ENOMEM. On error @p s is unchanged.
 */
int im_scope_add_exclude(struct im_scope *s, const char *glob);
int im_scope_add_include(struct im_scope *s, const char *glob);

/**
 * Restrict @p s to the @p n files @p paths (relative to the root, as
 * im_shard_load() reads a `--files-from` list): every other file is left
 * out, and a directory is walked only while a listed path lies below it.
 * Patterns still apply to listed files. The paths are copied; a second call
 * replaces the list. @return 0 or -ENOMEM (then @p s is unchanged).
 */
int im_scope_set_list(struct im_scope *s, const char *const *paths, size_t n);

/** Whether @p s has any pattern or list (NULL: none). */
bool im_scope_empty(const struct im_scope *s);

/* ---- Deciding along a path ----------------------------------------------- */

/**
 * The .imatchignore files of the directories on one path, root first: what
 * the walker keeps while it descends. Zero-initialize; entries may be NULL
 * (a directory without one).
 */
struct im_scope_chain {
	struct im_ignore **v;
	size_t n, cap;
	size_t files; /**< entries that are not NULL */
};

/** Push @p ig (may be NULL), taking ownership. @return 0, or -ENOMEM (then
 *  @p ig is freed and the chain unchanged). */
int im_scope_chain_push(struct im_scope_chain *c, struct im_ignore *ig);
/** Free the innermost entry. */
void im_scope_chain_pop(struct im_scope_chain *c);
/** Free every entry and the array; the chain is empty and reusable. */
void im_scope_chain_release(struct im_scope_chain *c);

/**
 * Whether @p path (relative to the root) is left out by @p s (may be NULL)
 * and the .imatchignore files of @p c (those of its parent directories; may
 * be NULL), in the precedence described at the top. The parents themselves
 * are not checked: the walker never reaches a path under an excluded one.
 * A file named IM_IGNORE_NAME is always left out.
 */
bool im_scope_excluded(const struct im_scope *s, const struct im_scope_chain *c,
		       const char *path, bool is_dir);

/**
 * Whether @p path is left out by @p s alone, its parent directories
 * checked first as a walk from the root would; no .imatchignore is read.
 * For paths named on a command line (`imatch sign FILE...`). @p path is
 * taken relative to the root with leading '/' and "./" dropped.
 */
bool im_scope_excluded_path(const struct im_scope *s, const char *path,
			    bool is_dir);

/**
 * Check one path that was not reached by a walk (the watcher's events):
 * read the .imatchignore of every directory from @p rootfd down to the
 * parent of @p path (component by component, O_NOFOLLOW: no symlink
 * followed, nothing outside reached), and decide for every directory on
 * the way and then for @p path itself.
 *
 * @param excluded  receives the answer.
 * @return 0; -ENOMEM; or the errno of a parent directory that cannot be
 *         opened (-ENOENT, -ELOOP, -ENOTDIR, ...; -EXDEV for a ".."
 *         component). An unreadable .imatchignore on the
 *         way counts as absent.
 */
int im_scope_check(int rootfd, const struct im_scope *s, const char *path,
		   bool is_dir, bool *excluded);

/**
 * Open directory @p dir below @p rootfd for a walk of that subtree, filling
 * @p c with the .imatchignore files of its parent directories (not its own:
 * the walk reads that). When @p dir or one of its parents is excluded,
 * *fd_out is -1 and *excluded true.
 *
 * @return as im_scope_check(); on success *fd_out is an O_DIRECTORY fd the
 *         caller closes (or -1 when excluded). On error @p c is released.
 */
int im_scope_open_dir(int rootfd, const struct im_scope *s, const char *dir,
		      struct im_scope_chain *c, int *fd_out, bool *excluded);

#endif
