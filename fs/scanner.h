/**
 * @file scanner.h
 * The scanner thread: the slow phases. It builds the lexicon from the tree
 * on a first mount (im_scan_df), then starts the workers and the watcher,
 * runs the full scans (im_scan_sign: the same code path as `imatch scan`) on
 * start, on inotify overflow and periodically when the watch limit was
 * reached, and saves the signature cache a few seconds after changes. A
 * tree with fewer than two documents gets no lexicon: the workers and the
 * watcher then keep its exact copies live (texts unsigned, as `imatch scan`
 * shows such a tree) until a second document starts the first scan again.
 *
 * A full scan walks the whole tree but signs only the files whose size,
 * mtime or inode differ from what the model (or, on start, the loaded cache)
 * knows; nodes the walk did not see are swept afterwards.
 *
 * Thread-safety: scanner_request_rescan(), scanner_stats() and
 * scanner_lexicon() from any thread (own mutex and atomics); the rest from
 * the main thread.
 */
#ifndef IMFS_SCANNER_H
#define IMFS_SCANNER_H

#include <stdbool.h>
#include <stdint.h>

#include "imfs.h"
#include "lexicon.h"
#include "state.h"
#include "stateio.h"

enum scanner_phase {
	PHASE_STARTING,
	PHASE_LEXICON,
	PHASE_SCANNING,
	PHASE_LIVE,
	PHASE_RESCANNING,
	PHASE_NO_LEXICON,
};

struct scanner_stats {
	enum scanner_phase phase;
	uint64_t pending; /* files the current scan still has to sign */
	uint64_t cached;  /* documents taken from the cache */
	/* files taken from the cache: the documents, binary files too */
	uint64_t cached_files;
	uint64_t hidden, other, walk_errors; /* of the last full scan */
	uint64_t excluded; /* of the last full scan: left out by the scope */
	/* texts the scans read from a sample of their terms (IM_TERMS_MAX),
	 * since the start; the workers count theirs (workers_sampled()) */
	uint64_t sampled;
	uint64_t rescans, saves;
	uint64_t save_errors; /* saves of the state that failed (logged) */
	uint64_t relexicons;  /* lexicons rebuilt from a grown tree */
	bool rescan_wanted;   /* a rescan is asked for and not started yet */
	/* The tree outgrew the lexicon: the scanner rebuilds it next. */
	bool relexicon_due;
	/* SOURCE's path no longer leads to the directory mounted (removed,
	 * renamed): the view's symlinks name a path that is not it. */
	bool source_lost;
};

struct scanner;

/**
 * A scanner over @p fs, with @p sio's files, starting from @p lex and
 * @p cache (each may be NULL; ownership of both passes to the scanner).
 * @return 0 or -ENOMEM. Free with scanner_free() after scanner_stop().
 */
int scanner_new(struct imfs *fs, struct stateio *sio, struct im_lexicon *lex,
		struct im_state *cache, struct scanner **out);
void scanner_free(struct scanner *s);

int scanner_start(struct scanner *s);
/** Cancel the scan under way and join the thread. */
void scanner_stop(struct scanner *s);

/** Ask for a full rescan (inotify overflow, a queue out of memory).
 *  @return false if one was asked for already and has not started. */
bool scanner_request_rescan(struct scanner *s);
/** Save the signature cache now (at shutdown). @return 0, -ENOENT without
 *  a lexicon, -EAGAIN while a lexicon rebuild had signed only part of the
 *  tree (the saved lexicon is then the new one and the cache on disk, of
 *  the old one, no longer matches it: a restart signs every file), or
 *  -errno. */
int scanner_save(struct scanner *s);
void scanner_stats(struct scanner *s, struct scanner_stats *out);
/** The lexicon in use, or NULL before it is built. One a rebuild replaced
 *  stays valid until scanner_free(). */
const struct im_lexicon *scanner_lexicon(struct scanner *s);

#endif
