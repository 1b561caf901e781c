// SPDX-License-Identifier: GPL-2.0
/*
 * log: kvcached's levelled messages (see log.h).
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"

/*
 * Both are read by the tier workers' threads too, and a reload sets the
 * level while they run: relaxed atomics, since a message printed at the
 * old level a moment longer is all that can go wrong.
 */
static int log_level = KVC_LOG_INFO;
/*
 * -1: not looked at yet; 0: a terminal or a file; 1: journald's stream.
 * Looked at again after each kvc_log_set_level(), which the daemon calls
 * once its configuration is read and at each reload.
 */
static int to_journal = -1;

void kvc_log_set_level(int level)
{
	__atomic_store_n(&to_journal, -1, __ATOMIC_RELAXED);
	__atomic_store_n(&log_level, level < KVC_LOG_ERROR ? KVC_LOG_ERROR :
				     level > KVC_LOG_DEBUG ? KVC_LOG_DEBUG :
				     level, __ATOMIC_RELAXED);
}

int kvc_log_get_level(void)
{
	return __atomic_load_n(&log_level, __ATOMIC_RELAXED);
}

bool kvc_log_enabled(int level)
{
	return level <= kvc_log_get_level();
}

/*
 * systemd sets JOURNAL_STREAM=dev:ino for a service whose stderr is the
 * journal; the variable is inherited, so it counts only when stderr is
 * still that very stream (not a file a test redirected it to).
 */
static bool journal_stream(void)
{
	const char *env = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (!env || sscanf(env, "%llu:%llu", &dev, &ino) != 2 ||
	    fstat(STDERR_FILENO, &st))
		return false;
	return (unsigned long long)st.st_dev == dev &&
	       (unsigned long long)st.st_ino == ino;
}

static void kvc_vlog(int level, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

void kvc_log(int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	kvc_vlog(level, fmt, ap);
	va_end(ap);
}

bool kvc_ratelimit(struct kvc_ratelimit *rs)
{
	double now = kvc_now();

	if (!rs->begin || now - rs->begin >= rs->interval) {
		rs->begin = now;
		rs->printed = 0;
	}
	if (rs->printed < rs->burst) {
		rs->printed++;
		return true;
	}
	rs->missed++;
	return false;
}

void kvc_log_limited(struct kvc_ratelimit *rs, int level, const char *fmt,
		     ...)
{
	va_list ap;

	if (!kvc_log_enabled(level) || !kvc_ratelimit(rs))
		return;
	if (rs->missed) {
		kvc_log(level, "%u messages like the next one suppressed",
			rs->missed);
		rs->missed = 0;
	}
	va_start(ap, fmt);
	kvc_vlog(level, fmt, ap);
	va_end(ap);
}

static void kvc_vlog(int level, const char *fmt, va_list ap)
{
	/* syslog priorities: LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG. */
	static const int prio[] = { 3, 4, 6, 7 };
	static const char *const tag[] = { "error: ", "warning: ", "", "debug: " };
	char line[2048];
	int journal;

	if (level < KVC_LOG_ERROR)
		level = KVC_LOG_ERROR;
	if (level > KVC_LOG_DEBUG)
		level = KVC_LOG_DEBUG;
	if (!kvc_log_enabled(level))
		return;
	journal = __atomic_load_n(&to_journal, __ATOMIC_RELAXED);
	if (journal < 0) {
		journal = journal_stream();
		__atomic_store_n(&to_journal, journal, __ATOMIC_RELAXED);
	}
	vsnprintf(line, sizeof(line), fmt, ap);
	/* One fprintf per line: lines of one message never interleave. */
	if (journal)
		fprintf(stderr, "<%d>kvcached: %s%s\n", prio[level], tag[level],
			line);
	else
		fprintf(stderr, "kvcached: %s%s\n", tag[level], line);
}
