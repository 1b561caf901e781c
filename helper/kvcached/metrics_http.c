// SPDX-License-Identifier: GPL-2.0
/*
 * metrics_http: the Prometheus endpoint ([daemon] metrics), a Unix
 * socket or a TCP port that answers every connection with the whole
 * exposition (metrics.h) and closes it. Served from the daemon's loop,
 * one scrape at a time, each bounded by a one-second socket timeout.
 */
#include "kvcd.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>

/*
 * One scrape: accept, answer with the whole exposition as HTTP/1.0 and
 * close. Prometheus (or curl --unix-socket) sends a GET first; the request
 * is not parsed, every path gets the metrics. A scraper that does not read
 * is cut off after a second rather than stalling the loop.
 */
void kvcd_scrape(struct kvcd *d)
{
	struct timeval tv = { .tv_sec = 1 };
	char head[160], req[1024];
	size_t need;
	int fd;

	fd = accept4(d->metrics_fd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (recv(fd, req, sizeof(req), 0) < 0) {
		close(fd);
		return;
	}
	need = kvc_metrics_render(d->metrics, d->metrics_buf, d->metrics_cap);
	if (need >= d->metrics_cap) {
		char *b = realloc(d->metrics_buf, need + 1);

		if (!b) {
			close(fd);
			return;
		}
		d->metrics_buf = b;
		d->metrics_cap = need + 1;
		kvc_metrics_render(d->metrics, d->metrics_buf, d->metrics_cap);
	}
	snprintf(head, sizeof(head),
		 "HTTP/1.0 200 OK\r\nContent-Type: %s\r\nContent-Length: %zu\r\n\r\n",
		 KVC_METRICS_CONTENT_TYPE, need);
	if (send(fd, head, strlen(head), MSG_NOSIGNAL) > 0)
		send(fd, d->metrics_buf, need, MSG_NOSIGNAL);
	close(fd);
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
	int fd, one = 1;

	memset(&a, 0, sizeof(a));
	if (l->kind == KVC_CONFIG_LISTEN_OFF)
		return 0;
	if (l->kind == KVC_CONFIG_LISTEN_UNIX) {
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
		    SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, len) || listen(fd, 16)) {
		int err = -errno;

		close(fd);
		return err;
	}
	d->metrics_fd = fd;
	return 0;
}
