/**
 * @file beneath.h
 * Reaching files below the source, and nothing else.
 *
 * Everything imatchfs reads is named by a path relative to a directory fd
 * (the source's, or one of its subdirectories'). A plain openat() of
 * "a/b/c.txt" follows a symlink swapped in for "a" or "b" meanwhile, and
 * then reads a file outside the source (issue 12: about 1 in 2,000 races).
 * im_open_beneath() resolves every component inside @p dirfd and follows no
 * symlink at all: openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS) where the kernel has it (Linux 5.6), else one
 * component at a time with openat(O_NOFOLLOW | O_DIRECTORY). Both give the
 * same answers for every path (the unit tests run both). A path of one name
 * is first opened with a plain openat(O_NOFOLLOW), which cannot lead out
 * either and costs less; only its failures take one of those ways. A path
 * longer than PATH_MAX is walked too, so any depth can be reached.
 *
 * A path is relative, components separated by '/' (repeated slashes and "."
 * are ignored), and may not contain "..": imatchfs never makes such paths, so
 * one is refused rather than resolved. "" names @p dirfd itself.
 *
 * A symlink in any component, the last included, fails with -ELOOP; a
 * non-directory in a parent component with -ENOTDIR. Which file was opened
 * can still change between a walk's stat and the open (a rename over the
 * name): im_open_beneath_same() checks that the opened file is the one the
 * caller saw.
 *
 * Thread-safety: all functions are reentrant. The first call probes whether
 * the kernel has openat2 and remembers the answer (an atomic, set once).
 */
#ifndef IM_BENEATH_H
#define IM_BENEATH_H

#include <stdbool.h>
#include <sys/stat.h>

/* ---- Opening ------------------------------------------------------------- */

/**
 * Open @p path below @p dirfd without following symlinks.
 *
 * @param flags  open(2) flags: an access mode (O_RDONLY; imatchfs never
 *               writes) plus any of O_DIRECTORY, O_NONBLOCK, O_NOCTTY,
 *               O_NOATIME. O_NOFOLLOW and O_CLOEXEC are always added. Other
 *               flags (O_CREAT, O_PATH, ...) are refused with -EINVAL.
 * @param out    receives the new fd; the caller closes it.
 * @return 0; -EXDEV for an absolute path or a ".." component; -ELOOP for
 *         a symlink anywhere on the path; -ENOTDIR; -EINVAL; otherwise the
 *         errno of the failing open (-ENOENT, -EACCES, ...). On error *out
 *         is -1.
 */
int im_open_beneath(int dirfd, const char *path, int flags, int *out);

/**
 * "@p dir/@p name", or @p name alone when @p dir is "" (the root itself):
 * how the walks build the relative paths given to the functions here. The
 * caller frees the result; NULL on ENOMEM.
 */
char *im_path_join(const char *dir, const char *name);

/**
 * im_open_beneath(), then check that the opened file is the one the caller
 * saw: its st_dev and st_ino must equal @p want's.
 *
 * @param st  if not NULL, receives the fstat() of the opened file.
 * @return as im_open_beneath(), or -ESTALE (nothing left open) when another
 *         file now has that name.
 */
int im_open_beneath_same(int dirfd, const char *path, int flags,
			 const struct stat *want, struct stat *st, int *out);

/**
 * The component-by-component fallback of im_open_beneath(), with the same
 * contract. Public so that tests exercise it on kernels with openat2.
 */
int im_open_beneath_walk(int dirfd, const char *path, int flags, int *out);

/* ---- Mounts below the source -------------------------------------------- */

/**
 * Whether the filesystem with device number @p dev is an imatchfs mount
 * (type fuse.imatchfs in /proc/self/mountinfo). A scan skips such mounts
 * inside its tree: their view of another tree is not part of this one, and
 * signing it would list every document of that tree twice.
 *
 * @return 1 if it is, 0 if not (or no such mount), or a negative errno when
 *         /proc/self/mountinfo cannot be read.
 */
int im_is_imatchfs_mount(dev_t dev);

#endif
