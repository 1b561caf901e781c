// SPDX-License-Identifier: GPL-2.0
/*
 * metrics_http: the Prometheus endpoint ([daemon] metrics), a Unix
 * socket or a TCP port that answers every connection with the whole
 * exposition (metrics.h) and closes it.
 *
 * Served from the daemon's loop without ever waiting on a scraper: the
 * listening socket, up to KVCD_SCRAPERS connections (non-blocking) and a
 * timerfd sit in one epoll set, and the loop polls that set's descriptor
 * (d->metrics_fd) through its ring like any other watched descriptor.
 * Each readiness does what can be done at once (accept, read what has
 * come, send what the socket takes) and returns. A scraper has
 * metrics_timeout (2 s by default) from its accept to read the whole
 * answer; the timerfd fires at the earliest deadline and cuts whoever is
 * past it. A silent or slow scraper thus costs one slot and a few system
 * calls, never the other clients' round trips. With every slot taken the
 * listening socket is no longer watched (new scrapers wait in its
 * backlog) until a slot frees; after accept() failed (EMFILE...), for
 * KVCD_SCRAPE_RETRY_MS, rather than spin on a socket that stays readable.
 *
 * No thread: the exposition is rendered on the loop's thread, at the
 * moment a scraper's request is complete, into that scraper's own buffer;
 * so the registry is only ever read by the thread that updates it.
 *
 * A Unix socket gets metrics_mode and, when set, metrics_group, before it
 * listens (so no connection is accepted with the umask's mode).
 */
#include "kvcd.h"

#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>

#include "clock.h"
#include "log.h"

#define KVCD_SCRAPERS		16
#define KVCD_SCRAPE_REQ_MAX	2048
/* After accept() failed for want of descriptors or memory: try again. */
#define KVCD_SCRAPE_RETRY_MS	100

/* epoll user data: which descriptor of the set. */
#define KVCD_EV_LISTEN		(KVCD_SCRAPERS)
#define KVCD_EV_TIMER		(KVCD_SCRAPERS + 1)

struct kvcd_scraper {
	int fd;			/* -1: a free slot */
	uint64_t deadline;	/* kvc_now_ns() */
	size_t got;		/* request bytes read */
	char *out;		/* the answer, once the request is in */
	size_t out_len, out_off;
	char req[KVCD_SCRAPE_REQ_MAX];
};

struct kvcd_scrapes {
	int lfd;		/* listening */
	int ep;			/* the epoll set: d->metrics_fd */
	int tfd;		/* timerfd, CLOCK_MONOTONIC */
	bool listening;		/* lfd is watched (EPOLLIN) */
	uint64_t retry_at;	/* accept failed: listen again then; 0: no */
	uint64_t timeout_ns;	/* metrics_timeout, at this readiness */
	uint32_t nr;		/* slots taken */
	struct kvcd_scraper s[KVCD_SCRAPERS];
};

static void kvcd_scrape_listen(struct kvcd_scrapes *m, bool on)
{
	struct epoll_event ev = {
		.events = on ? EPOLLIN : 0, .data.u32 = KVCD_EV_LISTEN,
	};

	if (m->listening == on)
		return;
	if (!epoll_ctl(m->ep, EPOLL_CTL_MOD, m->lfd, &ev))
		m->listening = on;
}

static void kvcd_scraper_close(struct kvcd_scrapes *m, struct kvcd_scraper *c)
{
	epoll_ctl(m->ep, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	free(c->out);
	c->fd = -1;
	c->out = NULL;
	m->nr--;
}

/* The timer at the earliest deadline (or retry); disarmed when none. */
static void kvcd_scrape_timer(struct kvcd_scrapes *m)
{
	struct itimerspec its = { 0 };
	uint64_t at = m->retry_at;

	for (int i = 0; i < KVCD_SCRAPERS; i++)
		if (m->s[i].fd >= 0 && (!at || m->s[i].deadline < at))
			at = m->s[i].deadline;
	if (at) {
		its.it_value.tv_sec = (time_t)(at / 1000000000u);
		its.it_value.tv_nsec = (long)(at % 1000000000u);
	}
	timerfd_settime(m->tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

static void kvcd_scrape_accept(struct kvcd_scrapes *m)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int fd, i;

	while (m->nr < KVCD_SCRAPERS) {
		fd = accept4(m->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0) {
			if (errno == EAGAIN || errno == EINTR ||
			    errno == ECONNABORTED)
				return;
			/*
			 * EMFILE, ENOBUFS, ...: the connection stays in the
			 * backlog, and the socket readable. Stop looking at
			 * it for a while rather than spin on it.
			 */
			kvc_warn_ratelimited("metrics: accept: %s",
					     strerror(errno));
			m->retry_at = kvc_now_ns() +
				      KVCD_SCRAPE_RETRY_MS * 1000000ull;
			kvcd_scrape_listen(m, false);
			return;
		}
		for (i = 0; m->s[i].fd >= 0; i++)
			;
		ev.data.u32 = (uint32_t)i;
		if (epoll_ctl(m->ep, EPOLL_CTL_ADD, fd, &ev)) {
			close(fd);
			continue;
		}
		m->s[i].fd = fd;
		m->s[i].got = 0;
		m->s[i].out_len = m->s[i].out_off = 0;
		m->s[i].deadline = kvc_now_ns() + m->timeout_ns;
		m->nr++;
	}
	kvcd_scrape_listen(m, false);	/* full: back when a slot frees */
}

/*
 * The request is in: an empty line ends an HTTP request's head; a peer
 * that half-closes, or whose head outgrows the buffer, is answered with
 * what came. The request is not parsed: every path gets the metrics.
 */
static bool kvcd_request_done(const struct kvcd_scraper *c)
{
	const char *end = c->req + c->got;

	if (c->got == sizeof(c->req))
		return true;
	for (const char *p = c->req; p < end; p++)
		if (*p == '\n' && ((p + 1 < end && p[1] == '\n') ||
				   (p + 2 < end && p[1] == '\r' &&
				    p[2] == '\n')))
			return true;
	return false;
}

/* The whole answer, in the scraper's own buffer: false on no memory. */
static bool kvcd_scrape_render(struct kvcd *d, struct kvcd_scraper *c)
{
	char head[160];
	size_t need;
	int hlen;

	need = kvc_metrics_render(d->metrics, d->metrics_buf, d->metrics_cap);
	if (need >= d->metrics_cap) {
		char *b = realloc(d->metrics_buf, need + 1);

		if (!b)
			return false;
		d->metrics_buf = b;
		d->metrics_cap = need + 1;
		kvc_metrics_render(d->metrics, d->metrics_buf, d->metrics_cap);
	}
	hlen = snprintf(head, sizeof(head),
			"HTTP/1.0 200 OK\r\nContent-Type: %s\r\nContent-Length: %zu\r\n\r\n",
			KVC_METRICS_CONTENT_TYPE, need);
	c->out = malloc((size_t)hlen + need);
	if (!c->out)
		return false;
	memcpy(c->out, head, (size_t)hlen);
	memcpy(c->out + hlen, d->metrics_buf, need);
	c->out_len = (size_t)hlen + need;
	c->out_off = 0;
	return true;
}

/* Send what the socket takes now; true when the scraper is done. */
static bool kvcd_scrape_send(struct kvcd_scrapes *m, struct kvcd_scraper *c,
			     int slot)
{
	struct epoll_event ev = { .events = EPOLLOUT, .data.u32 = (uint32_t)slot };
	ssize_t n;

	while (c->out_off < c->out_len) {
		n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
			 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			/* The rest when it has room (or at the deadline). */
			return epoll_ctl(m->ep, EPOLL_CTL_MOD, c->fd, &ev) != 0;
		}
		if (n <= 0)
			return true;
		c->out_off += (size_t)n;
	}
	return true;
}

/* Scraper slot is ready: read its request, or send the rest. */
static void kvcd_scraper_ready(struct kvcd *d, struct kvcd_scrapes *m,
			       int slot)
{
	struct kvcd_scraper *c = &m->s[slot];
	bool eof = false;
	ssize_t n;

	if (c->fd < 0)
		return;		/* closed earlier in this batch */
	if (!c->out) {
		while (c->got < sizeof(c->req)) {
			n = recv(c->fd, c->req + c->got,
				 sizeof(c->req) - c->got, MSG_DONTWAIT);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
				break;
			if (n < 0) {
				kvcd_scraper_close(m, c);
				return;
			}
			if (n == 0) {
				eof = true;
				break;
			}
			c->got += (size_t)n;
		}
		if (eof && !c->got) {
			kvcd_scraper_close(m, c);	/* asked nothing */
			return;
		}
		if (!eof && !kvcd_request_done(c))
			return;		/* more to come, until the deadline */
		if (!kvcd_scrape_render(d, c)) {
			kvcd_scraper_close(m, c);
			return;
		}
	}
	if (kvcd_scrape_send(m, c, slot))
		kvcd_scraper_close(m, c);
}

/* Cut the scrapers past their deadline; listen again after a retry. */
static void kvcd_scrape_expire(struct kvcd_scrapes *m)
{
	uint64_t now = kvc_now_ns(), ticks;

	if (read(m->tfd, &ticks, sizeof(ticks)) < 0 && errno != EAGAIN)
		kvc_warn_ratelimited("metrics: timer: %s", strerror(errno));
	for (int i = 0; i < KVCD_SCRAPERS; i++)
		if (m->s[i].fd >= 0 && m->s[i].deadline <= now)
			kvcd_scraper_close(m, &m->s[i]);
	if (m->retry_at && m->retry_at <= now)
		m->retry_at = 0;
}

/*
 * The epoll set is readable: handle what is ready, without waiting for
 * anything, then listen again if there is room and set the timer.
 */
void kvcd_scrape(struct kvcd *d)
{
	struct kvcd_scrapes *m = d->scrapes;
	struct epoll_event ev[KVCD_SCRAPERS + 2];
	int n;

	if (!m)
		return;
	/* Read at each use: a reload changes it for the next scrapers. */
	m->timeout_ns = d->cfg.daemon.metrics_timeout_ms * 1000000ull;
	n = epoll_wait(m->ep, ev, KVCD_SCRAPERS + 2, 0);
	for (int i = 0; i < n; i++) {
		uint32_t w = ev[i].data.u32;

		if (w == KVCD_EV_TIMER)
			kvcd_scrape_expire(m);
		else if (w == KVCD_EV_LISTEN)
			kvcd_scrape_accept(m);
		else if (w < KVCD_SCRAPERS)
			kvcd_scraper_ready(d, m, (int)w);
	}
	if (m->nr < KVCD_SCRAPERS && !m->retry_at)
		kvcd_scrape_listen(m, true);
	kvcd_scrape_timer(m);
}

void kvcd_metrics_close(struct kvcd *d)
{
	struct kvcd_scrapes *m = d->scrapes;

	if (!m)
		return;
	for (int i = 0; i < KVCD_SCRAPERS; i++)
		if (m->s[i].fd >= 0)
			kvcd_scraper_close(m, &m->s[i]);
	close(m->tfd);
	close(m->ep);
	close(m->lfd);
	if (d->cfg.daemon.metrics.kind == KVC_CONFIG_LISTEN_UNIX)
		unlink(d->cfg.daemon.metrics.path);
	free(m);
	d->scrapes = NULL;
	d->metrics_fd = -1;
}

/* metrics_group: a group name or number; -1 when unset. */
static int kvcd_metrics_gid(const char *name, gid_t *gid)
{
	struct group gr, *res = NULL;
	char buf[4096], *end;
	unsigned long v;
	int err;

	*gid = (gid_t)-1;
	if (!name[0])
		return 0;
	v = strtoul(name, &end, 10);
	if (!*end) {
		*gid = (gid_t)v;
		return 0;
	}
	err = getgrnam_r(name, &gr, buf, sizeof(buf), &res);
	if (err)
		return -err;
	if (!res) {
		kvc_err("metrics_group: no group named %s", name);
		return -ENOENT;
	}
	*gid = res->gr_gid;
	return 0;
}

/* The epoll set around the listening socket lfd (taken over). */
static int kvcd_scrapes_new(struct kvcd *d, int lfd)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct kvcd_scrapes *m = calloc(1, sizeof(*m));
	int ret;

	if (!m) {
		close(lfd);
		return -ENOMEM;
	}
	m->lfd = lfd;
	for (int i = 0; i < KVCD_SCRAPERS; i++)
		m->s[i].fd = -1;
	m->ep = epoll_create1(EPOLL_CLOEXEC);
	m->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (m->ep < 0 || m->tfd < 0)
		goto err;
	ev.data.u32 = KVCD_EV_LISTEN;
	if (epoll_ctl(m->ep, EPOLL_CTL_ADD, lfd, &ev))
		goto err;
	ev.data.u32 = KVCD_EV_TIMER;
	if (epoll_ctl(m->ep, EPOLL_CTL_ADD, m->tfd, &ev))
		goto err;
	m->listening = true;
	d->scrapes = m;
	d->metrics_fd = m->ep;
	return 0;
err:
	ret = -errno;
	if (m->tfd >= 0)
		close(m->tfd);
	if (m->ep >= 0)
		close(m->ep);
	close(lfd);
	free(m);
	return ret;
}

/* The metrics endpoint of the configuration: a Unix socket or a TCP port. */
int kvcd_metrics_open(struct kvcd *d)
{
	const struct kvc_config_listen *l = &d->cfg.daemon.metrics;
	union {
		struct sockaddr_un un;
		struct sockaddr_in in;
		struct sockaddr_in6 in6;
	} a;
	struct stat st;
	socklen_t len;
	gid_t gid = (gid_t)-1;
	int fd, one = 1, ret;

	memset(&a, 0, sizeof(a));
	if (l->kind == KVC_CONFIG_LISTEN_OFF)
		return 0;
	if (l->kind == KVC_CONFIG_LISTEN_UNIX) {
		ret = kvcd_metrics_gid(d->cfg.daemon.metrics_group, &gid);
		if (ret)
			return ret;
		a.un.sun_family = AF_UNIX;
		strcpy(a.un.sun_path, l->path);
		len = sizeof(a.un);
		if (kvc_server_mkdir_parent(l->path))
			return -ENOENT;
		/* A stale socket of an earlier run goes; anything else stays. */
		if (!lstat(l->path, &st)) {
			if (!S_ISSOCK(st.st_mode))
				return -EEXIST;
			unlink(l->path);
		}
	} else if (inet_pton(AF_INET, d->cfg.daemon.metrics_address,
			     &a.in.sin_addr) == 1) {
		a.in.sin_family = AF_INET;
		a.in.sin_port = htons(l->port);
		len = sizeof(a.in);
	} else if (inet_pton(AF_INET6, d->cfg.daemon.metrics_address,
			     &a.in6.sin6_addr) == 1) {
		a.in6.sin6_family = AF_INET6;
		a.in6.sin6_port = htons(l->port);
		len = sizeof(a.in6);
	} else {
		return -EINVAL;
	}
	fd = socket(((struct sockaddr *)&a)->sa_family,
		    SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, len)) {
		ret = -errno;
		close(fd);
		return ret;
	}
	/* Its mode and group before anyone may connect (listen). */
	if ((l->kind == KVC_CONFIG_LISTEN_UNIX &&
	     (chmod(l->path, d->cfg.daemon.metrics_mode) ||
	      (gid != (gid_t)-1 && chown(l->path, (uid_t)-1, gid)))) ||
	    listen(fd, KVCD_SCRAPERS)) {
		ret = -errno;
		close(fd);
		if (l->kind == KVC_CONFIG_LISTEN_UNIX)
			unlink(l->path);
		return ret;
	}
	ret = kvcd_scrapes_new(d, fd);
	if (ret && l->kind == KVC_CONFIG_LISTEN_UNIX)
		unlink(l->path);
	return ret;
}
