/**
 * @file workers.h
 * The signing workers: threads that sign the files the watcher queues, one
 * struct im_signer each, and apply the results to the model.
 *
 * The queue holds nodes, not paths, so a file renamed while it waits is
 * signed under its new name; a node removed while queued or being signed is
 * only marked NODE_DEAD by the model and freed here by whoever holds it.
 * Never two signings of one file at once: a file queued while being signed
 * is signed again afterwards (NODE_AGAIN), so the last write always wins.
 *
 * Locking: workers_queue() needs the tree lock held exclusively; the queue
 * has its own mutex, taken after the tree lock. The rest: main thread.
 */
#ifndef IMFS_WORKERS_H
#define IMFS_WORKERS_H

#include <stdbool.h>
#include <stdint.h>

#include "imfs.h"
#include "lexicon.h"
#include "tree.h"

struct workers;

/** @return 0 or -ENOMEM. Free with workers_free() after workers_stop(). */
int workers_new(struct imfs *fs, struct workers **out);
void workers_free(struct workers *w);

/**
 * Start @p n threads (0: one per CPU) signing with @p lex (borrowed; it
 * must outlive the workers). With @p lex NULL (a tree of fewer than two
 * documents) they read files as a first scan does and leave texts
 * unsigned, and the result of a second text asks the scanner for another
 * first scan (scanner_request_rescan()). Files queued before are signed
 * then. May be
 * called again after workers_stop(). Each lexicon term's coordinates are
 * computed here once for all signers (im_sig_masks(), 4 bytes a term, kept
 * until the next start or workers_free()).
 * @return 0 or -EAGAIN if no thread could start.
 */
int workers_start(struct workers *w, const struct im_lexicon *lex, unsigned n);
/** Stop and join the threads. What is still queued stays, for the next
 *  workers_start(); dead nodes in it are freed. */
void workers_stop(struct workers *w);

/**
 * Queue file @p n for signing (nothing for directories, dead or already
 * queued nodes). Tree lock held exclusively.
 * @return 0, or -ENOMEM (the caller then asks for a rescan).
 */
int workers_queue(struct workers *w, struct node *n);

/** Files waiting or being signed. Any thread. */
uint64_t workers_pending(struct workers *w);

/**
 * Whether the workers may give a file the result the index holds for an
 * exact copy of it (on at first; model_copy_of()). The scanner turns it off
 * while a first scan or a rebuild signs every file anew (its workers start
 * before that is done, with the index still holding results of another
 * lexicon, or none) and on once that scan ended, also in failure: the
 * files it gave no result of keep scan_reads (model_expect_reads()) and
 * are refused until they are read again (model_sweep(), model_unread()).
 * Any thread.
 */
void workers_lend(struct workers *w, bool lend);

/** Files signed from the result of an exact copy signed before, by the same
 *  worker or, from the index, by anyone (im_signer_reused()), since the
 *  daemon started. Any thread. */
uint64_t workers_copies_reused(struct workers *w);

/** Texts of more than IM_TERMS_MAX unique terms the workers signed from a
 *  sample of them (im_signer_sampled()), since the daemon started; counted
 *  as copies_reused is. Any thread. */
uint64_t workers_sampled(struct workers *w);

#endif
