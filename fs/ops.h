/**
 * @file ops.h
 * The FUSE low-level operations table (ops.c). The session's userdata is the
 * struct imfs (imfs.h). Called by FUSE worker threads only.
 */
#ifndef IMFS_OPS_H
#define IMFS_OPS_H

#include <fuse_lowlevel.h>

extern const struct fuse_lowlevel_ops imfs_ops;

/** Free the handles still open when the session ended and the released
 *  ones still resting (main thread, after fuse_session_destroy()). */
void ops_release_all(void);

#endif
