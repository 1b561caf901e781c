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
 * Single-threaded, as the daemon: the level is a plain global.
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

#define kvc_err(...)	kvc_log(KVC_LOG_ERROR, __VA_ARGS__)
#define kvc_warn(...)	kvc_log(KVC_LOG_WARN, __VA_ARGS__)
#define kvc_info(...)	kvc_log(KVC_LOG_INFO, __VA_ARGS__)
#define kvc_debug(...)	kvc_log(KVC_LOG_DEBUG, __VA_ARGS__)

#endif /* KVC_LOG_H */
