/**
 * @file fullsigs.h
 * The whole signatures of the documents, which the daemon's index holds only
 * as IM_KEY_COORD_LEN-byte prefixes (im_index_set_prefixes(): 16 bytes less
 * per signed coordinate, some 160 bytes per document at the defaults). They
 * are needed
 * only to show the `signatures` file and to save the state cache, so they
 * stay on disk: in the state cache last loaded or written ("saved",
 * core/state/state.h, mapped and read on demand), and in memory only for
 * the documents signed or renamed since ("fresh"), until a save writes them
 * out and fullsigs_adopt() lets them go.
 *
 * Invariant: every document of the index with a valid signature has a fresh
 * entry under its path, or the saved cache holds its path with the same
 * signatures. The model keeps it: fullsigs_put() with every put,
 * fullsigs_rename() and fullsigs_remove() with every rename and removal.
 * fullsigs_get() checks the prefixes anyway, so a broken invariant shows as
 * -ENOENT, never as another document's signatures.
 *
 * Memory: the saved cache costs its lookup tables (about 11 bytes per
 * entry, state.h; the mapped file is not resident until read); a fresh
 * entry costs its valid signatures (20 bytes each), its path and 24 bytes.
 *
 * Locking: none of its own. The model calls the changing functions with the
 * tree lock held exclusively; fullsigs_get() needs it held in either mode.
 */
#ifndef IMFS_FULLSIGS_H
#define IMFS_FULLSIGS_H

#include <stdbool.h>

#include "sig.h"
#include "state.h"

struct fullsigs;

/** An empty store. @return 0 or -ENOMEM. Free with fullsigs_free(). */
int fullsigs_new(struct fullsigs **out);
/** Free the store, its fresh entries and its saved cache. */
void fullsigs_free(struct fullsigs *f);

/**
 * Mark the fresh entries that @p saved, a cache about to be adopted, holds
 * with the same signatures: the costly half of fullsigs_adopt() (a lookup
 * in @p saved per fresh entry, 0.3 s after the first scan of 100,000
 * documents). With the tree lock held shared, as a long reader
 * (tree_rdlock_long()): it writes only the marks, which no reader reads,
 * so the others go on. An entry put or removed before the adoption takes
 * its mark with it.
 */
void fullsigs_mark(struct fullsigs *f, const struct im_state *saved);

/**
 * Take ownership of @p saved, a state cache just loaded or written (NULL:
 * none), in place of the previous one, and drop the fresh entries it holds
 * with the same signatures: those fullsigs_mark() marked if @p marked, else
 * each looked up in @p saved. Never fails.
 * @return the previous one (or NULL): the caller frees it with
 *         im_state_free(), after the tree lock (unmapping a cache of
 *         100,000 documents took 30 ms and more, every lookup waiting).
 */
struct im_state *fullsigs_adopt(struct fullsigs *f, struct im_state *saved,
				bool marked);

/** The saved cache (fullsigs_adopt()), or NULL: borrowed, valid until the
 *  next fullsigs_adopt(). */
const struct im_state *fullsigs_saved(const struct fullsigs *f);

/**
 * Document @p path was put in the index with @p d (whole signatures): keep
 * them, unless the saved cache already holds them for @p path.
 * @return 0 or -ENOMEM (then nothing changed).
 */
int fullsigs_put(struct fullsigs *f, const char *path,
		 const struct im_doc_sigs *d);

/** Forget the fresh entry of @p path, if any. Never allocates. */
void fullsigs_remove(struct fullsigs *f, const char *path);

/**
 * Document @p from is about to be renamed @p to: give @p to the signatures
 * of @p from (fresh, or from the saved cache, checked against @p d, the
 * index's record with prefixes). @p from keeps its own until
 * fullsigs_remove(): the caller removes @p from once the index renamed it,
 * or @p to if the index could not.
 * @return 0, -ENOENT if nothing holds them (@p d has no valid signature:
 *         nothing to keep, also 0), or -ENOMEM.
 */
int fullsigs_rename(struct fullsigs *f, const char *from, const char *to,
		    const struct im_doc_sigs *d);

/**
 * Replace the prefixes in @p d (im_index_get() of @p path) by the whole
 * signatures. @return 0, or -ENOENT if they are not known (@p d unchanged).
 */
int fullsigs_get(const struct fullsigs *f, const char *path,
		 struct im_doc_sigs *d);

#endif
