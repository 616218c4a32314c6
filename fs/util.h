/**
 * @file util.h
 * Small helpers every part of the daemon uses, written once: nanosecond
 * mtimes, a monotonic clock, joining relative paths, logging.
 *
 * Thread-safety: all functions are safe from any thread. imfs_log_setup() is
 * called once by main() before any other thread exists.
 */
#ifndef IMFS_UTIL_H
#define IMFS_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>

/** The modification time of @p st in nanoseconds since the epoch. */
static inline int64_t st_mtime_ns(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

/** Milliseconds of CLOCK_MONOTONIC: for intervals, never for dates. */
static inline int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/** Where log lines go: stderr (the default) or syslog; debug lines or not. */
void imfs_log_setup(bool to_syslog, bool debug);

/** Log "imatchfs: [error: |warning: ]message" to stderr or syslog. */
void imfs_log(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
