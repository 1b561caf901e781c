// SPDX-License-Identifier: GPL-2.0
/*
 * notify: sd_notify(3)'s protocol for kvcached (notify.h).
 */
#include "notify.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

/* How long a send may wait for room in the manager's queue. */
#define KVC_NOTIFY_SEND_TIMEOUT_S	1

uint64_t kvc_notify_monotonic_usec(void)
{
	return kvc_now_ns() / 1000u;
}

/* A decimal number, nothing else: 0 or -EINVAL. */
static int parse_u64(const char *s, uint64_t *out)
{
	char *end;

	if (!s[0] || s[0] < '0' || s[0] > '9')
		return -EINVAL;
	errno = 0;
	*out = strtoull(s, &end, 10);
	return errno || *end ? -EINVAL : 0;
}

/*
 * NOTIFY_SOCKET as an address: "/path" (NUL-terminated within sun_path)
 * or "@name" (abstract: a leading NUL, the name's bytes, no terminator).
 */
static int notify_addr(struct kvc_notify *n, const char *name, char *why,
		       size_t wlen)
{
	size_t len = strlen(name);

	memset(&n->addr, 0, sizeof(n->addr));
	n->addr.sun_family = AF_UNIX;
	if ((name[0] != '/' && name[0] != '@') || len < 2) {
		snprintf(why, wlen, "%s=%s: not an absolute path or an @name",
			 KVC_NOTIFY_SOCKET_ENV, name);
		return -EINVAL;
	}
	/* A path needs its NUL in sun_path; an abstract name does not. */
	if (len > sizeof(n->addr.sun_path) - (name[0] == '/')) {
		snprintf(why, wlen, "%s: longer than a socket address (%zu bytes)",
			 KVC_NOTIFY_SOCKET_ENV, sizeof(n->addr.sun_path));
		return -EINVAL;
	}
	memcpy(n->addr.sun_path, name, len);
	if (name[0] == '@')
		n->addr.sun_path[0] = '\0';
	n->addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len +
				  (name[0] == '/'));
	return 0;
}

/* WATCHDOG_USEC, if WATCHDOG_PID (when set) is this process. */
static int notify_watchdog_env(struct kvc_notify *n, char *why, size_t wlen)
{
	const char *usec = getenv(KVC_NOTIFY_WATCHDOG_ENV);
	const char *pid = getenv(KVC_NOTIFY_WDPID_ENV);
	uint64_t v, p;

	if (!usec || !usec[0])
		return 0;
	if (pid && pid[0]) {
		if (parse_u64(pid, &p) || !p) {
			snprintf(why, wlen, "%s=%s: not a process id",
				 KVC_NOTIFY_WDPID_ENV, pid);
			return -EINVAL;
		}
		if (p != (uint64_t)getpid())
			return 0;	/* asked of another process */
	}
	if (parse_u64(usec, &v) || !v) {
		snprintf(why, wlen, "%s=%s: not a positive number of microseconds",
			 KVC_NOTIFY_WATCHDOG_ENV, usec);
		return -EINVAL;
	}
	n->watchdog_usec = v;
	return 0;
}

int kvc_notify_open(struct kvc_notify *n, char *why, size_t wlen)
{
	const char *name = getenv(KVC_NOTIFY_SOCKET_ENV);
	struct timeval tv = { .tv_sec = KVC_NOTIFY_SEND_TIMEOUT_S };
	int ret;

	memset(n, 0, sizeof(*n));
	n->fd = -1;
	if (wlen)
		why[0] = '\0';
	if (!name || !name[0])
		return 0;
	ret = notify_addr(n, name, why, wlen);
	if (!ret)
		ret = notify_watchdog_env(n, why, wlen);
	if (ret)
		return ret;
	n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (n->fd < 0) {
		ret = -errno;
		snprintf(why, wlen, "%s: socket: %s", KVC_NOTIFY_SOCKET_ENV,
			 strerror(-ret));
		return ret;
	}
	/* A datagram waits only for room in the receiver's queue. */
	setsockopt(n->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	return 0;
}

void kvc_notify_close(struct kvc_notify *n)
{
	if (n->fd >= 0)
		close(n->fd);
	n->fd = -1;
}

bool kvc_notify_enabled(const struct kvc_notify *n)
{
	return n->fd >= 0;
}

/* flags: MSG_DONTWAIT for what may be dropped rather than wait. */
static int notify_send(struct kvc_notify *n, const char *buf, size_t len,
		       int flags)
{
	ssize_t sent;

	/*
	 * A signal (SIGHUP, SIGTERM: no SA_RESTART, and SO_SNDTIMEO makes
	 * the wait interruptible anyway) must not lose a READY=1.
	 */
	do {
		sent = sendto(n->fd, buf, len, MSG_NOSIGNAL | flags,
			      (const struct sockaddr *)&n->addr, n->addr_len);
	} while (sent < 0 && errno == EINTR);
	if (sent < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	return (size_t)sent == len ? 0 : -EIO;
}

int kvc_notify(struct kvc_notify *n, const char *fmt, ...)
{
	char buf[KVC_NOTIFY_MAX + 1];
	va_list ap;
	int len;

	if (n->fd < 0)
		return 0;
	va_start(ap, fmt);
	len = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (len < 0 || (size_t)len >= sizeof(buf))
		return -EMSGSIZE;
	return notify_send(n, buf, (size_t)len, 0);
}

uint64_t kvc_notify_watchdog_usec(const struct kvc_notify *n)
{
	return n->fd >= 0 ? n->watchdog_usec : 0;
}

uint64_t kvc_notify_watchdog(struct kvc_notify *n)
{
	static const char ping[] = "WATCHDOG=1";
	uint64_t usec = kvc_notify_watchdog_usec(n), half, now, next;

	if (!usec)
		return 0;
	half = usec / 2 ? usec / 2 : 1;
	now = kvc_notify_monotonic_usec();
	if (!n->watchdog_sent || now - n->watchdog_sent >= half) {
		/*
		 * Never waited for: a ping the manager has no room for is
		 * dropped, and the next, half an interval on, is in time.
		 */
		notify_send(n, ping, sizeof(ping) - 1, MSG_DONTWAIT);
		n->watchdog_sent = now;
	}
	next = n->watchdog_sent + half - now;
	return next / 1000 ? next / 1000 : 1;
}
