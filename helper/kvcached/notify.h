/* SPDX-License-Identifier: GPL-2.0 */
/*
 * notify: telling the service manager how kvcached is doing, in the
 * protocol of sd_notify(3), without libsystemd.
 *
 * Under a unit with Type=notify, $NOTIFY_SOCKET names an AF_UNIX datagram
 * socket, a path ("/run/systemd/notify") or an abstract name ("@name",
 * the '@' standing for the leading NUL). One datagram is one
 * notification: newline-separated assignments such as "READY=1",
 * "STATUS=...", "RELOADING=1", "STOPPING=1", "WATCHDOG=1". The manager
 * learns the sender from the kernel's credentials, never from the text.
 *
 * $WATCHDOG_USEC (the unit's WatchdogSec=) asks for "WATCHDOG=1" at least
 * that often; $WATCHDOG_PID, when set, names the process it is asked of,
 * and a watchdog asked of another pid is not this one's.
 *
 * Without $NOTIFY_SOCKET every call is a no-op, so kvcached runs the same
 * by hand. A value that is not an absolute path or an '@' name fitting
 * sun_path is refused, and then too nothing is sent; so is a
 * $WATCHDOG_USEC or $WATCHDOG_PID that is not a number (READY=1 without
 * the pings asked for would only trade a start timeout for a kill). The
 * watchdog interval is read through kvc_notify_watchdog_usec(): 0 while
 * there is no socket. The environment is
 * read, never changed: kvcached starts no other program that could
 * inherit the variables and notify in its name.
 *
 * Single-threaded: the daemon's loop sends everything.
 */
#ifndef KVC_NOTIFY_H
#define KVC_NOTIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

#define KVC_NOTIFY_SOCKET_ENV	"NOTIFY_SOCKET"
#define KVC_NOTIFY_WATCHDOG_ENV	"WATCHDOG_USEC"
#define KVC_NOTIFY_WDPID_ENV	"WATCHDOG_PID"

/* The longest notification kvc_notify() formats, NUL not counted. */
#define KVC_NOTIFY_MAX		1024

struct kvc_notify {
	int fd;				/* -1: nobody to tell */
	struct sockaddr_un addr;
	socklen_t addr_len;
	uint64_t watchdog_usec;		/* 0: no watchdog asked of us */
	uint64_t watchdog_sent;		/* monotonic µs of the last ping */
};

/*
 * Read the environment into *n. 0, also when NOTIFY_SOCKET is unset or
 * empty (every call is then a no-op); -EINVAL for a NOTIFY_SOCKET,
 * WATCHDOG_USEC or WATCHDOG_PID that is not valid, -errno when the socket cannot be made,
 * with the reason in why (always NUL-terminated when wlen > 0). After an
 * error *n is usable, and a no-op.
 */
int kvc_notify_open(struct kvc_notify *n, char *why, size_t wlen);
void kvc_notify_close(struct kvc_notify *n);

/* Is there a manager to tell? */
bool kvc_notify_enabled(const struct kvc_notify *n);

/*
 * Send one notification, formatted as printf does ("READY=1\nSTATUS=%s").
 * 0 (also when disabled), -EMSGSIZE when longer than KVC_NOTIFY_MAX, or
 * the send's -errno. A manager too busy to take it within a second is
 * given up on (-EAGAIN): the loop must not wait for it.
 */
int kvc_notify(struct kvc_notify *n, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The watchdog interval asked of this process, µs; 0: none. */
uint64_t kvc_notify_watchdog_usec(const struct kvc_notify *n);

/*
 * The loop's watchdog duty, called whenever it wakes: "WATCHDOG=1" when
 * half the interval has passed since the last one (or none was sent),
 * dropped rather than waited for when the manager's queue is full.
 * Returns the milliseconds until the next is due, at least 1; 0 when no
 * watchdog is asked of us.
 */
uint64_t kvc_notify_watchdog(struct kvc_notify *n);

/* CLOCK_MONOTONIC in µs: the MONOTONIC_USEC that goes with RELOADING=1. */
uint64_t kvc_notify_monotonic_usec(void);

#endif /* KVC_NOTIFY_H */
