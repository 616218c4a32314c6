/**
 * @file apply.h
 * Carrying out one line of a removal plan (DESIGN §6, "Apply"), after
 * re-verifying it: the plan may be hours old, edited by hand, or wrong.
 *
 * A line is acted on only when all of these still hold, else it is skipped
 * with the reason:
 *   - both paths are absolute and canonical (no "", "." or ".." component)
 *     and strictly below the line's root (compared component by component:
 *     /r/s3x is not below /r/s3): a plan is about one tree, and a
 *     hand-edited line reaching outside it is refused, keeper included;
 *   - no component of either path is a symlink: the root is opened from
 *     "/", then both sides below its fd, with im_open_beneath() (openat2
 *     RESOLVE_NO_SYMLINKS, or one component at a time with O_NOFOLLOW),
 *     and the file itself with O_NOFOLLOW. No path is ever handed whole to
 *     the kernel, so paths longer than PATH_MAX work (a symlink's target
 *     cannot be: symlink skips a keeper whose path is that long);
 *   - the file and the keeper are regular files with the size, mtime and
 *     content hash (XXH3-128) recorded in the plan, and are not the same
 *     inode;
 *   - for an exact line, their bytes are equal (compared, not only hashed:
 *     a crafted hash collision cannot make a different file go);
 *   - for trash, nothing exists yet at the destination (never overwrites);
 *   - for hardlink and symlink, the file has the keeper's owner, group and
 *     permission bits (st_mode & 07777): after the swap the path reaches
 *     the keeper's inode, so a private copy would otherwise take the
 *     keeper's looser mode (or another owner). A symlink's own mode is
 *     never consulted, its target's is, so the same holds for it. The
 *     extended attributes (ACLs are some) must be the keeper's too,
 *     names and values, or the path would lose its own;
 *   - for trash across filesystems, the copy gets the file's extended
 *     attributes and ACLs, or the line is skipped if the trash's
 *     filesystem refuses one.
 * Just before acting, the name is checked to still lead to the inode that
 * was verified, with the same size, mtime, owner and mode. A rename over
 * the name after that check (an editor saving: write a temporary, rename
 * it over) is caught too, as the act moves the name before it destroys
 * anything and checks what it moved:
 *   - remove renames the file to a temporary name beside it
 *     (RENAME_NOREPLACE) and unlinks that only if it is the verified
 *     inode, unchanged;
 *   - trash checks the same of what its rename put in the trash;
 *   - hardlink and symlink exchange their link with the file's name
 *     (RENAME_EXCHANGE) and unlink what came back only if it is the
 *     verified inode, unchanged (or already a link of the keeper).
 * Anything else moved is given its name back and the line is skipped
 * ("the file changed during verification"). For remove and symlink the
 * keeper is checked again while the file is aside (or exchanged), just
 * before it goes: a keeper removed or replaced since its last check
 * would leave the file the last copy, so it gets its name back too ("the
 * keeper changed during verification"); only between that check and the
 * unlink, two calls apart, can the keeper still go unnoticed. Never
 * over a name taken again meanwhile: then the line fails and r->left
 * says where the content is. What remains: a writer holding the file
 * open can still write into the inode up to the unlink (or, across
 * filesystems, while the copy is made and after its check), and no call
 * closes that. Where the
 * filesystem refuses RENAME_NOREPLACE or RENAME_EXCHANGE (EINVAL or
 * ENOSYS: NFS, SMB, many FUSE filesystems) every action still moves the
 * file aside, by a plain rename to a temporary name found free a moment
 * before, and checks what moved; then it unlinks it (remove), links it
 * into the trash (trash), or puts the link at the name with link() or
 * symlink() (hardlink, symlink), which fail on a taken name where a
 * rename would replace it; a name is given back with a link, which fails
 * on a taken name too, as RENAME_NOREPLACE does.
 *
 * Actions:
 *   remove    unlink the file (moved aside first, as above).
 *   trash     move it to TRASH/<path relative to root>, creating the
 *             directories (again without following symlinks); across
 *             filesystems by copy to a temporary name, fsync, hash check,
 *             link to the final name (fails rather than overwrite), unlink
 *             (moved aside first).
 *   hardlink  link the keeper to a temporary name beside the file, then
 *             exchange it with the file (atomic: the name always holds one
 *             of the two; without RENAME_EXCHANGE it is missing between
 *             the file moved aside and the link made); skipped when they are on different filesystems
 *             or mounts, or the keeper has as many links as its
 *             filesystem allows (EMLINK).
 *   symlink   the same with a symlink to the keeper's absolute path.
 *   reflink   make the file share the keeper's data extents
 *             (FIDEDUPERANGE): both names, inodes, owners, modes and
 *             attributes stay as they were and the space of one copy is
 *             freed, on filesystems that share extents (btrfs, XFS);
 *             skipped elsewhere, across filesystems, or when the kernel,
 *             which compares the bytes itself with both files locked,
 *             finds them different.
 *
 * Whether a keeper is planned elsewhere in the same plan is a property of
 * the whole plan; the caller checks it (see `imatch apply`).
 *
 * Interruption: while a temporary name exists (a link not yet exchanged
 * with the file, the file moved aside or into the trash and not yet
 * checked, a copy in the trash) SIGINT, SIGTERM and SIGHUP are held back
 * in the calling thread and take effect once it is gone, so none outlives
 * a Ctrl-C or a kill; a long copy into a trash on another filesystem stops
 * for them, fails with -EINTR and removes its copy. Only SIGKILL can leave
 * a temporary name; im_apply_reclaim() and im_apply_reclaim_copy() take
 * back what it provably left.
 *
 * Thread-safety: reentrant; no global state.
 */
#ifndef IM_APPLY_H
#define IM_APPLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum im_plan_action {
	IM_ACT_REMOVE,
	IM_ACT_TRASH,
	IM_ACT_HARDLINK,
	IM_ACT_SYMLINK,
	IM_ACT_REFLINK,
};

/** A file as the plan recorded it. */
struct im_plan_rec {
	char *path; /**< absolute */
	uint64_t size;
	int64_t mtime_ns;
	uint8_t hash[16]; /**< XXH3-128, canonical (big-endian) */
};

/** One parsed plan line. Strings are owned by the line. */
struct im_plan_line {
	enum im_plan_action action;
	bool exact;
	double similarity;
	struct im_plan_rec file, keeper;
	char *root;  /**< the scanned directory: path and keeper are below it */
	char *trash; /**< trash only: the directory files move under */
};

/* ---- Parsing ----------------------------------------------------------------- */

/**
 * Parse one JSON line as `imatch dedupe` writes it (fields in any order;
 * unknown fields ignored, a known one given twice refused; "\udcXX"
 * escapes give back byte XX, as Python's surrogateescape). Needs action, kind, path, keeper, size, mtime_ns, hash,
 * keeper_size, keeper_mtime_ns, keeper_hash, root, and for trash also
 * trash. Release @p out with im_plan_line_release() after success.
 *
 * @return 0; -EINVAL with a one-line reason in @p why (may be NULL) for a
 *         malformed line; -ENOMEM. On error @p out holds nothing.
 */
int im_plan_line_parse(const char *s, size_t len, struct im_plan_line *out,
		       char *why, size_t why_len);

void im_plan_line_release(struct im_plan_line *l);

/* ---- Applying ---------------------------------------------------------------- */

enum im_apply_outcome {
	IM_APPLY_DONE,	  /**< acted (or, dry run: would act) */
	IM_APPLY_SKIPPED, /**< not acted on for safety; see why */
};

struct im_apply_result {
	enum im_apply_outcome outcome;
	const char *why; /**< static text: the reason skipped, or the step
			      that failed */
	/** trash: where the file went (or would go), else NULL; owned by
	 * @p r, freed by im_apply_result_release() */
	char *dest;
	/** when the file changed as it was acted on and what had its name
	 * could not be given it back (the name was taken again meanwhile):
	 * where that is now, a temporary name beside the file or (trash)
	 * the destination, never removed, by its folder's path at that
	 * time (a folder renamed meanwhile is followed); else NULL, and
	 * NULL too when nothing is there any more (another apply, one that
	 * cannot see this one run, took it back), why then saying so.
	 * Owned by @p r. */
	char *left;
};

/**
 * Re-verify @p l and, unless @p dry_run, act on it.
 *
 * @return 0 with r->outcome DONE or SKIPPED; or a negative errno when
 *         verification could not read a file (EACCES, EIO, …) or the action
 *         failed, r->why naming the step. After a failure nothing is lost:
 *         the file is still at its path or (trash) at the destination with
 *         verified bytes; a temporary name is removed again, unless it
 *         holds what another program put at the file's name meanwhile
 *         (r->left).
 */
int im_apply_line(const struct im_plan_line *l, bool dry_run,
		  struct im_apply_result *r);

/**
 * Take back what an apply killed by SIGKILL left beside @p l's file under
 * @p tmp, a name in the file's directory (only SIGKILL leaves one: see
 * Interruption above), when it provably is this line's and nothing can be
 * lost. Only a name of the form temp names take, made by a process that
 * no longer runs here, is considered (a live one may still be at work on
 * it), and then only:
 *   - for trash, another name of the regular file at the line's
 *     destination in the trash with the size and mtime the line records
 *     (linked there where renameat2 takes no flags, its temporary name
 *     not yet unlinked): the trash holds what it holds, and it is removed;
 *   - a link to the keeper as the line's action makes it (hardlink: a
 *     hard link of the inode the keeper's name leads to; symlink: a
 *     symlink whose target is the keeper's path), never exchanged with
 *     the file: it holds no bytes, and is removed;
 *   - another name of the regular file at the file's name (killed
 *     between the link that gave the file its name back and the unlink of
 *     the temporary name): the file keeps its bytes, and it is removed;
 *   - for trash, the file itself, moved aside (a regular file with one
 *     name and the size, mtime and content hash the line records), when
 *     the line's destination is on another filesystem and holds its bytes
 *     whole with the size and mtime the line records, its mode and
 *     extended attributes (the checked copy,
 *     linked into place before the file was to be unlinked): it is
 *     removed;
 *   - the file itself, moved aside (a regular file with one name and the
 *     size, mtime and content hash the line records; for trash, not when
 *     the line's destination in the trash holds that already, the line
 *     done: another copy of the same bytes and mtime in the folder was
 *     moved aside): it gets its name
 *     back with a link, which fails on a taken name; or, where that name
 *     holds a link to the keeper as above (the killed apply had exchanged
 *     them), by exchanging the two (RENAME_EXCHANGE; without it, the link
 *     is moved aside, checked, and the file linked back), the link then
 *     removed. im_apply_line() then finds the line as it was planned.
 * Anything else stays where it is. Not for a dry run.
 *
 * @return 1 when @p tmp was taken back, *what saying what it was and what
 *         became of it; 0 when it was left alone; a negative errno when
 *         the last step failed, *what naming it (the content is then still
 *         at @p tmp or at the file's name, or both).
 */
int im_apply_reclaim(const struct im_plan_line *l, const char *tmp,
		     const char **what);

/**
 * Take back what an apply killed by SIGKILL left under @p tmp, a name in
 * the directory of @p l's destination in the trash (im_plan_trash_dest()):
 * the copy it makes there when the trash is on another filesystem than
 * the file. As for im_apply_reclaim(), only a name of the form temp names
 * take, made by a process that no longer runs here, is considered, and
 * then only a regular file that is
 *   - another name of the regular file at the line's destination with the
 *     size and mtime the line records (linked into place, its temporary
 *     name not yet unlinked), or
 *   - with one name, on another filesystem than the file, a copy of the
 *     file whole or cut short: its bytes are the first bytes of the file,
 *     which is still at its path with the size, mtime and content hash
 *     the line records;
 * it is removed. Anything else stays where it is. Not for a dry run.
 *
 * @return as im_apply_reclaim().
 */
int im_apply_reclaim_copy(const struct im_plan_line *l, const char *tmp,
			  const char **what);

/**
 * Where @p l, a trash line, sends its file: the trash and the file's path
 * below the root.
 *
 * @return it, malloc'ed (the caller frees it); NULL for another action, a
 *         path or trash apply would refuse, or out of memory.
 */
char *im_plan_trash_dest(const struct im_plan_line *l);

/** Free what im_apply_line() left in @p r (call after each line). */
void im_apply_result_release(struct im_apply_result *r);

/**
 * Whether the files open at @p a and @p b, both @p size bytes, already hold
 * their data in the very same extents (what reflink leaves behind), as
 * FIEMAP tells: every byte of one is at the physical place of the same
 * byte of the other, holes at the same offsets. False when the filesystem
 * cannot say (no FIEMAP, extents not yet allocated, inline data), when the
 * extents differ, for @p size 0, or out of memory. Reads no data.
 * Reentrant.
 */
bool im_shares_extents(int a, int b, uint64_t size);

#endif
