/**
 * @file util.c
 * Helpers shared by every module (util.h).
 */
#include <stdarg.h>
#include <stdio.h>

#include "util.h"

/* Set once by main() before threads start, read-only afterwards. */
static bool log_syslog;
static bool log_debug;

void imfs_log_setup(bool to_syslog, bool debug)
{
	log_debug = debug;
	if (to_syslog && !log_syslog)
		openlog("imatchfs", LOG_PID, LOG_DAEMON);
	if (!to_syslog && log_syslog)
		closelog();
	log_syslog = to_syslog;
}

void imfs_log(int level, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (level == LOG_DEBUG && !log_debug)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	const char *tag = level <= LOG_ERR	 ? "error: "
			  : level == LOG_WARNING ? "warning: "
						 : "";
	if (log_syslog)
		syslog(level, "imatchfs: %s%s", tag, msg);
	else
		fprintf(stderr, "imatchfs: %s%s\n", tag, msg);
}
