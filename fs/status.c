/**
 * @file status.c
 * The `status` file (status.h).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "index.h"
#include "inval.h"
#include "lexicon.h"
#include "model.h"
#include "dirgroups.h"
#include "redundant.h"
#include "scanner.h"
#include "status.h"
#include "watch.h"
#include "util.h"
#include "workers.h"

static const char *phase_name(enum scanner_phase p)
{
	switch (p) {
	case PHASE_STARTING: return "starting";
	case PHASE_LEXICON: return "building-lexicon";
	case PHASE_SCANNING: return "scanning";
	case PHASE_LIVE: return "live";
	case PHASE_RESCANNING: return "rescanning";
	case PHASE_NO_LEXICON: return "waiting-for-documents";
	}
	return "unknown";
}

#define LD(x) ((unsigned long long)(x))

/* "failed: N", then "format_<name>: N" and "failed_<reason>: N" for every
 * format and reason (zeros too: scripts can rely on the keys). */
static size_t formats_text(const struct model *m, char *out, size_t cap)
{
	size_t len = 0;
	int n;

	n = snprintf(out, cap, "failed: %llu\n", LD(m->count[IM_DOC_FAILED]));
	for (unsigned f = 0; n >= 0 && f < IM_FMT_COUNT; f++) {
		len += (size_t)n;
		n = snprintf(out + len, len < cap ? cap - len : 0,
			     "format_%s: %llu\n",
			     im_format_name((enum im_format)f),
			     LD(m->by_format[f]));
	}
	for (unsigned r = 1; n >= 0 && r < IM_XF_COUNT; r++) {
		len += (size_t)n;
		n = snprintf(out + len, len < cap ? cap - len : 0,
			     "failed_%s: %llu\n",
			     im_extract_fail_name((enum im_extract_fail)r),
			     LD(m->by_fail[r]));
	}
	len += n > 0 ? (size_t)n : 0;
	return len < cap ? len : cap ? cap - 1 : 0;
}

/* The view shows the tree as it is: live (or live without a lexicon),
 * nothing to sign, no event the kernel still holds or the watcher still
 * waits on, no rescan asked for. */
static bool converged(const struct scanner_stats *ss,
		      const struct watch_stats *ws, uint64_t pending)
{
	return (ss->phase == PHASE_LIVE || ss->phase == PHASE_NO_LEXICON) &&
	       !pending && ws->settled && !ws->limit && !ss->rescan_wanted &&
	       !ss->relexicon_due && !ss->source_lost;
}

static uint64_t pending_of(struct imfs *fs, const struct scanner_stats *ss)
{
	return workers_pending(fs->workers) + ss->pending;
}

/*
 * The removal plan's and dup-dirs' counts are made over the whole index. A
 * busy daemon (not converged) shows them a little old instead of making
 * them again for every read: status polled every 10 ms made the first
 * mount of 100,000 documents take 83-111 s instead of 8. Old by a second,
 * or by ten times what making them took, whichever is more: the plan of
 * 60,000 short payslips (each a keeper: their figures differ) takes
 * seconds, and a status polled while they came in would spend most of the
 * daemon's CPU on it. Converged, they are made again whenever the tree
 * changed. One daemon per process: the last time is the process's.
 */
void status_update(struct imfs *fs)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static struct {
		bool have;
		int64_t at_ms, wait_ms;
	} last; /* protected by lock */
	struct scanner_stats ss;
	struct watch_stats ws;
	int64_t now;

	scanner_stats(fs->scanner, &ss);
	watch_stats(fs->watch, &ws);
	bool exact = converged(&ss, &ws, pending_of(fs, &ss));
	/* Held while they are made: a second reader waits for these, and
	 * the lock is never taken under the tree lock. */
	pthread_mutex_lock(&lock);
	now = mono_ms();
	if (exact || !last.have || now - last.at_ms >= last.wait_ms) {
		redundant_count_update(fs);
		dirgroups_count_update(fs);
		last.at_ms = mono_ms();
		last.wait_ms = 10 * (last.at_ms - now);
		if (last.wait_ms < 1000)
			last.wait_ms = 1000;
		last.have = true;
	}
	pthread_mutex_unlock(&lock);
}

size_t status_text(struct imfs *fs, char *out, size_t cap)
{
	char buf[4096];
	const struct model *m = fs->model;
	const uint64_t *c = m->count;
	const struct im_lexicon *lex = scanner_lexicon(fs->scanner);
	size_t prim = lex ? im_lexicon_primary_size(lex) : 0;
	size_t sec = lex ? im_lexicon_secondary_size(lex) : 0;
	uint64_t files = 0;
	struct scanner_stats ss;
	struct watch_stats ws;

	for (unsigned i = 0; i < COUNT_SLOTS; i++)
		files += c[i];
	scanner_stats(fs->scanner, &ss);
	watch_stats(fs->watch, &ws);
	uint64_t pending = pending_of(fs, &ss);
	/* What redundant/ and dup-dirs/ list, as status_update() last
	 * counted them: the view has not converged while they are older
	 * than the tree. */
	bool red_now, groups_now;
	long red = redundant_count(fs, &red_now);
	long groups = dirgroups_count(fs, &groups_now);
	bool conv = converged(&ss, &ws, pending) && red_now && groups_now;
	int n = snprintf(
		buf, sizeof(buf),
		"phase: %s\n"
		"source: %s\n"
		"documents: %llu\n"
		"signed: %llu\n"
		"rejected: %llu\n"
		"binary: %llu\n"
		"too_big: %llu\n"
		"skipped: %llu\n"
		"errors: %llu\n"
		"pending: %llu\n"
		"cached: %llu\n"
		"cached_files: %llu\n"
		"clusters: %zu\n"
		"files: %llu\n"
		"directories: %llu\n"
		"hidden: %llu\n"
		"other: %llu\n"
		"walk_errors: %llu\n"
		"lexicon_terms: %zu\n"
		"lexicon_primary: %zu\n"
		"lexicon_secondary: %zu\n"
		"lexicon_docs: %llu\n"
		"k: %u\n"
		"watches: %llu\n"
		"watch_limit_reached: %s\n"
		"events: %llu\n"
		"rescans: %llu\n"
		"relexicons: %llu\n"
		"saves: %llu\n"
		"save_errors: %llu\n"
		"source_lost: %s\n"
		"invalidations: %llu\n"
		"state_dir: %s\n"
		"rereads: %llu\n"
		"watch_reused: %llu\n"
		"copies_reused: %llu\n"
		"sampled: %llu\n"
		"converged: %s\n",
		phase_name(ss.phase), fs->source_real,
		LD(c[IM_DOC_SIGNED] + c[IM_DOC_REJECTED]), LD(c[IM_DOC_SIGNED]),
		LD(c[IM_DOC_REJECTED]), LD(c[IM_DOC_BINARY]),
		LD(c[IM_DOC_TOO_BIG]), LD(c[IM_DOC_BINARY] + c[IM_DOC_TOO_BIG]),
		LD(c[IM_DOC_ERROR]), LD(pending), LD(ss.cached),
		LD(ss.cached_files), im_index_cluster_count(m->idx), LD(files),
		LD(m->dirs), LD(ss.hidden), LD(ss.other), LD(ss.walk_errors),
		prim + sec, prim, sec, LD(lex ? im_lexicon_docs(lex) : 0),
		fs->opts->params.k, LD(ws.watches), ws.limit ? "yes" : "no",
		LD(ws.events), LD(ss.rescans), LD(ss.relexicons), LD(ss.saves),
		LD(ss.save_errors), ss.source_lost ? "yes" : "no",
		LD(inval_sent(fs->inval)), fs->state_dir, LD(ws.rereads),
		LD(ws.reused), LD(workers_copies_reused(fs->workers)),
		LD(ss.sampled + workers_sampled(fs->workers)),
		conv ? "yes" : "no");
	size_t len = n < 0 ? 0 : (size_t)n;
	if (len >= sizeof(buf))
		len = sizeof(buf) - 1;
	len += formats_text(m, buf + len, sizeof(buf) - len);
	if (len >= sizeof(buf))
		len = sizeof(buf) - 1;
	if (red >= 0) {
		n = snprintf(buf + len, sizeof(buf) - len, "redundant: %ld\n",
			     red);
		len += n < 0 ? 0 : (size_t)n;
		if (len >= sizeof(buf))
			len = sizeof(buf) - 1;
	}
	if (groups >= 0) {
		n = snprintf(buf + len, sizeof(buf) - len, "dup_dirs: %ld\n",
			     groups);
		len += n < 0 ? 0 : (size_t)n;
		if (len >= sizeof(buf))
			len = sizeof(buf) - 1;
	}
	/* Paths -o exclude/include and .imatchignore files left out. */
	n = snprintf(buf + len, sizeof(buf) - len, "excluded: %llu\n",
		     LD(ss.excluded));
	len += n < 0 ? 0 : (size_t)n;
	if (len >= sizeof(buf))
		len = sizeof(buf) - 1;
	if (out)
		memcpy(out, buf, len < cap ? len : cap);
	return len;
}
