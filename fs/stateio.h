/**
 * @file stateio.h
 * The daemon's files in its state directory (DESIGN §4): the lexicon (unless
 * -o lexicon=FILE names one) and the signature cache (core/state/state.h),
 * whose key ties it to the parameters and the lexicon's bytes.
 *
 * A corrupt lexicon or cache is refused, never replaced: the user decides.
 *
 * Thread-safety: stateio_open() and stateio_load() run in the main thread
 * before mounting; the others in the scanner thread (or the main thread
 * after it stopped). stateio_save() takes the tree lock itself.
 */
#ifndef IMFS_STATEIO_H
#define IMFS_STATEIO_H

#include <stdbool.h>
#include <stdint.h>

#include "lexicon.h"
#include "model.h"
#include "params.h"
#include "state.h"

struct stateio {
	char *lexicon_path; /* the lexicon in use or to build */
	char *cache_path;
	bool lexicon_given; /* -o lexicon=FILE */
	const struct im_params *params;
	/* im_state_key() of the lexicon, or of IM_STATE_NO_LEXICON for the
	 * cache of a tree waiting for documents (no lexicon yet) */
	uint64_t key;
	uint64_t files_key; /* im_state_files_key() */
};

/** Fill @p sio for @p state_dir and @p lexicon (absolute, or NULL).
 *  @return 0 or -ENOMEM. */
int stateio_open(struct stateio *sio, const char *state_dir,
		 const char *lexicon, const struct im_params *p);
void stateio_release(struct stateio *sio);

/**
 * Load the lexicon (*lex stays NULL on a first mount without one: the
 * scanner builds it) and the cache that matches it (*cache NULL if none;
 * without a lexicon, the one a tree waiting for documents saved).
 * @return 0, or after printing one line -EINVAL for a corrupt lexicon or
 *         cache (restarting will not help), -1 for anything else.
 */
int stateio_load(struct stateio *sio, struct im_lexicon **lex,
		 struct im_state **cache);

/** Save @p lex, just built, as the lexicon and take its key.
 *  @return 0 or a negative errno (logged). */
int stateio_save_lexicon(struct stateio *sio, const struct im_lexicon *lex);

/** Load the cache made for the current key, if any (logged). */
struct im_state *stateio_load_cache(struct stateio *sio);

/**
 * Write the signature cache from @p m crash-safely: its files, and the
 * entries of the cache it held before (fullsigs_saved()) of the paths this
 * mount's options leave out (a hidden name without -o hidden, -o exclude,
 * -o include; not a .imatchignore), which the view does not show, while
 * the keys let them be used: a temporary exclude costs the next mount no
 * read of what it left out.
 * @return 0 or a negative errno (logged).
 */
int stateio_save(struct stateio *sio, struct model *m);

#endif
