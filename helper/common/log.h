/* SPDX-License-Identifier: GPL-2.0 */
/*
 * log: kvcached's messages, by level ([daemon] log_level,
 * Documentation/admin-guide/kvcached-config.md).
 *
 * One line per message on stderr, "kvcached: " first (and "error: ",
 * "warning: " or "debug: " after it for those levels), so a message is
 * found by grep in a terminal or a file the same way. Under systemd, when
 * stderr is the journal's stream (JOURNAL_STREAM names it), each line
 * starts with its syslog priority, "<3>" to "<7>", which journald strips
 * and records: `journalctl -p err -u kvcached` then shows the errors.
 *
 * Messages above the level set are not formatted at all; the default is
 * info, so what is said before the configuration is read (a bad file) is
 * said at the default. Error messages are always printed.
 *
 * Threads: the daemon's loop sets the level (at start, at a reload) while
 * the tier workers may log; the level is read and written atomically.
 */
#ifndef KVC_LOG_H
#define KVC_LOG_H

#include <stdbool.h>

/* The same values as enum kvc_config_log_level (config.h). */
enum kvc_log_level {
	KVC_LOG_ERROR,
	KVC_LOG_WARN,
	KVC_LOG_INFO,
	KVC_LOG_DEBUG,
};

/*
 * Print messages of @level and below from now on (clamped to the range);
 * whether stderr is the journal is looked at again, at the next message.
 */
void kvc_log_set_level(int level);
int kvc_log_get_level(void);

/* Would a message of @level be printed? For work done only to log. */
bool kvc_log_enabled(int level);

/* One message, without its trailing newline (added here). */
void kvc_log(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * Rate limiting, after the kernel's ___ratelimit(): at most burst
 * messages per interval seconds from one call site; the ones held back
 * are counted and said in one line when the site may speak again. For
 * messages a client or another node can cause at will (a corrupt file
 * in a shared tier, a failing disk under a stream of STOREs), so that
 * they cannot flood the journal.
 */
struct kvc_ratelimit {
	double interval;	/* seconds */
	unsigned int burst;
	double begin;		/* of the current interval */
	unsigned int printed;	/* in it */
	unsigned int missed;	/* held back since the last message */
};

#define KVC_RATELIMIT_INTERVAL	5.0
#define KVC_RATELIMIT_BURST	10
#define KVC_RATELIMIT_INIT						\
	{ KVC_RATELIMIT_INTERVAL, KVC_RATELIMIT_BURST, 0, 0, 0 }

/* May a message go out now? Counts it either way. */
bool kvc_ratelimit(struct kvc_ratelimit *rs);

/* A message of @level, if rs lets it through. */
void kvc_log_limited(struct kvc_ratelimit *rs, int level, const char *fmt,
		     ...) __attribute__((format(printf, 3, 4)));

#define kvc_err(...)	kvc_log(KVC_LOG_ERROR, __VA_ARGS__)
#define kvc_warn(...)	kvc_log(KVC_LOG_WARN, __VA_ARGS__)
#define kvc_info(...)	kvc_log(KVC_LOG_INFO, __VA_ARGS__)
#define kvc_debug(...)	kvc_log(KVC_LOG_DEBUG, __VA_ARGS__)

/* One rate limit per call site, as the kernel's pr_*_ratelimited(). */
#define kvc_log_ratelimited(level, ...)					\
	do {								\
		static struct kvc_ratelimit _rs = KVC_RATELIMIT_INIT;	\
									\
		kvc_log_limited(&_rs, level, __VA_ARGS__);		\
	} while (0)
#define kvc_err_ratelimited(...)					\
	kvc_log_ratelimited(KVC_LOG_ERROR, __VA_ARGS__)
#define kvc_warn_ratelimited(...)					\
	kvc_log_ratelimited(KVC_LOG_WARN, __VA_ARGS__)

#endif /* KVC_LOG_H */
