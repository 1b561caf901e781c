// SPDX-License-Identifier: GPL-2.0
/*
 * server: kvcached's event loop on io_uring (see server.h).
 *
 * Every operation in the ring carries its kind and a small number in its
 * user_data: the client slot for a receive, the watch slot for a poll.
 * A client has exactly one operation in flight (its receive), so the
 * completion of that operation is the one place its slot can be freed.
 *
 * Out of descriptors (EMFILE, ENFILE), the ring's accept fails at once,
 * whether a connection is queued or not (it takes the descriptor first),
 * so accepting again at once would spin. The server then polls the
 * listening socket instead (OP_LPOLL) and, when a connection is queued,
 * takes it itself; if that fails too it uses the one spare descriptor it
 * holds for this: closes it, takes the connection, closes that at once
 * (the client sees its connection end, not a hang) and opens the spare
 * again. Then the ring's accept is tried again. Without a spare,
 * accepting waits for the next tick.
 */
#include "server.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <liburing.h>

#include "clock.h"
#include "log.h"
#include "proto.h"

#define KVC_SERVER_MAX_WATCH	8
#define KVC_CMSG_FDS		16	/* fds a client may send: all closed */

enum { OP_ACCEPT = 1, OP_RECV, OP_POLL, OP_TICK, OP_LPOLL };

struct kvc_conn {
	struct kvc_peer peer;
	struct msghdr mh;
	struct iovec iov;
	union {				/* aligned for struct cmsghdr */
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * KVC_CMSG_FDS)];
	} cmsg;
	uint8_t buf[KVC_PROTO_MSG_MAX];
};

struct kvc_server {
	struct io_uring ring;
	int lfd;
	int spare;			/* /dev/null, for EMFILE; -1: none */
	bool accept_paused;		/* no spare: accept again at the tick */
	uint64_t refused;		/* connections refused for descriptors */
	struct sockaddr_un addr;
	const struct kvc_server_ops *ops;
	void *ctx;
	struct kvc_conn *conns[KVC_SERVER_MAX_CLIENTS];
	int watch[KVC_SERVER_MAX_WATCH];
	int nwatch;
	struct __kernel_timespec tick;
	bool ticking;
	bool armed;			/* accept, polls and tick in the ring */
	uint64_t serial;		/* connections accepted, ever */
	uint8_t reply[KVC_PROTO_MSG_MAX];
};

static uint64_t kvc_op(unsigned int kind, uint32_t n)
{
	return (uint64_t)kind << 32 | n;
}

/* An SQE, flushing the queue to the kernel first if it is full. */
static struct io_uring_sqe *kvc_sqe(struct kvc_server *s)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&s->ring);

	if (!sqe) {
		io_uring_submit(&s->ring);
		sqe = io_uring_get_sqe(&s->ring);
	}
	return sqe;
}

static int kvc_arm_accept(struct kvc_server *s)
{
	struct io_uring_sqe *sqe = kvc_sqe(s);

	if (!sqe)
		return -EBUSY;
	io_uring_prep_accept(sqe, s->lfd, NULL, NULL, SOCK_CLOEXEC);
	io_uring_sqe_set_data64(sqe, kvc_op(OP_ACCEPT, 0));
	return 0;
}

/* Out of descriptors: wait for a queued connection (see the top). */
static int kvc_arm_lpoll(struct kvc_server *s)
{
	struct io_uring_sqe *sqe = kvc_sqe(s);

	if (!sqe)
		return -EBUSY;
	io_uring_prep_poll_add(sqe, s->lfd, POLLIN);
	io_uring_sqe_set_data64(sqe, kvc_op(OP_LPOLL, 0));
	return 0;
}

static int kvc_arm_recv(struct kvc_server *s, struct kvc_conn *c)
{
	struct io_uring_sqe *sqe = kvc_sqe(s);

	if (!sqe)
		return -EBUSY;
	memset(&c->mh, 0, sizeof(c->mh));
	c->iov.iov_base = c->buf;
	c->iov.iov_len = sizeof(c->buf);
	c->mh.msg_iov = &c->iov;
	c->mh.msg_iovlen = 1;
	c->mh.msg_control = c->cmsg.buf;
	c->mh.msg_controllen = sizeof(c->cmsg.buf);
	io_uring_prep_recvmsg(sqe, c->peer.fd, &c->mh, MSG_CMSG_CLOEXEC);
	io_uring_sqe_set_data64(sqe, kvc_op(OP_RECV, c->peer.id));
	return 0;
}

static int kvc_arm_poll(struct kvc_server *s, int slot)
{
	struct io_uring_sqe *sqe = kvc_sqe(s);

	if (!sqe)
		return -EBUSY;
	io_uring_prep_poll_add(sqe, s->watch[slot], POLLIN);
	io_uring_sqe_set_data64(sqe, kvc_op(OP_POLL, (uint32_t)slot));
	return 0;
}

static int kvc_arm_tick(struct kvc_server *s)
{
	struct io_uring_sqe *sqe = kvc_sqe(s);

	if (!sqe)
		return -EBUSY;
	io_uring_prep_timeout(sqe, &s->tick, 0, 0);
	io_uring_sqe_set_data64(sqe, kvc_op(OP_TICK, 0));
	return 0;
}

int kvc_server_mkdir_parent(const char *path)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char *slash;

	if (strlen(path) >= sizeof(dir))
		return -ENAMETOOLONG;
	strcpy(dir, path);
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = '\0';
	if (mkdir(dir, 0755) && errno != EEXIST)
		return -errno;
	return 0;
}

int kvc_server_open(struct kvc_server **out, const char *path,
		    unsigned int mode, uint64_t tick_ms,
		    const struct kvc_server_ops *ops, void *ctx)
{
	struct kvc_server *s;
	struct stat st;
	int ret;

	if (strlen(path) >= sizeof(s->addr.sun_path))
		return -ENAMETOOLONG;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->ops = ops;
	s->ctx = ctx;
	s->lfd = -1;
	s->spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
	s->addr.sun_family = AF_UNIX;
	strcpy(s->addr.sun_path, path);
	ret = io_uring_queue_init(256, &s->ring, 0);
	if (ret) {
		if (s->spare >= 0)
			close(s->spare);
		free(s);
		return ret;
	}
	ret = kvc_server_mkdir_parent(path);
	if (ret)
		goto err;
	/* A stale socket of an earlier run goes; anything else stays. */
	if (!lstat(path, &st)) {
		if (!S_ISSOCK(st.st_mode)) {
			ret = -EEXIST;
			goto err;
		}
		unlink(path);
	}
	s->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s->lfd < 0 ||
	    bind(s->lfd, (struct sockaddr *)&s->addr, sizeof(s->addr)) ||
	    chmod(path, mode) || listen(s->lfd, 128)) {
		ret = -errno;
		goto err;
	}
	if (tick_ms) {
		kvc_server_set_tick(s, tick_ms);
		s->ticking = true;
	}
	*out = s;
	return 0;
err:
	if (s->lfd >= 0)
		close(s->lfd);
	if (s->spare >= 0)
		close(s->spare);
	io_uring_queue_exit(&s->ring);
	free(s);
	return ret;
}

/*
 * The next tick's timeout is read from s->tick when its SQE is submitted
 * (io_uring copies the timespec then): the one in flight keeps its own.
 */
void kvc_server_set_tick(struct kvc_server *s, uint64_t tick_ms)
{
	s->tick.tv_sec = (long long)(tick_ms / 1000);
	s->tick.tv_nsec = (long long)(tick_ms % 1000) * 1000000;
}

int kvc_server_watch(struct kvc_server *s, int fd)
{
	if (s->nwatch == KVC_SERVER_MAX_WATCH)
		return -ENOSPC;
	s->watch[s->nwatch++] = fd;
	return 0;
}

static void kvc_conn_close(struct kvc_server *s, struct kvc_conn *c)
{
	s->ops->closed(s->ctx, &c->peer);
	close(c->peer.fd);
	s->conns[c->peer.id] = NULL;
	free(c->peer.groups);
	free(c);
}

/*
 * The peer's supplementary groups, as the kernel recorded them at connect
 * (SO_PEERGROUPS): asked once with room for 64, again with what it says
 * it needs. 0 or -errno.
 */
static int kvc_peer_groups(struct kvc_peer *p)
{
	socklen_t len = 64 * sizeof(gid_t);

	for (int tries = 0; tries < 2; tries++) {
		gid_t *g = malloc(len ? len : sizeof(gid_t));

		if (!g)
			return -ENOMEM;
		if (!getsockopt(p->fd, SOL_SOCKET, SO_PEERGROUPS, g, &len)) {
			p->groups = g;
			p->ngroups = len / sizeof(gid_t);
			return 0;
		}
		free(g);
		if (errno != ERANGE)
			return -errno;
	}
	return -ERANGE;
}

static void kvc_accepted(struct kvc_server *s, int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct kvc_conn *c = NULL;
	uint32_t id;

	for (id = 0; id < KVC_SERVER_MAX_CLIENTS && s->conns[id]; id++)
		;
	if (id < KVC_SERVER_MAX_CLIENTS &&
	    !getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len))
		c = malloc(sizeof(*c));
	if (!c) {
		close(fd);
		return;
	}
	memset(&c->peer, 0, sizeof(c->peer));
	c->peer.id = id;
	c->peer.fd = fd;
	c->peer.pid = cred.pid;
	c->peer.uid = cred.uid;
	c->peer.gid = cred.gid;
	c->peer.groups = NULL;
	c->peer.ngroups = 0;
	c->peer.serial = ++s->serial;
	if (kvc_peer_groups(&c->peer) || s->ops->connected(s->ctx, &c->peer)) {
		close(fd);
		free(c->peer.groups);
		free(c);
		return;
	}
	s->conns[id] = c;
	if (kvc_arm_recv(s, c))
		kvc_conn_close(s, c);
}

/* Close what a client sent along with a message: it never asked to. */
static void kvc_drop_fds(struct msghdr *mh)
{
	struct cmsghdr *cm;

	for (cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
		size_t n;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(fd));
			close(fd);
		}
	}
}

static int kvc_send(int fd, const uint8_t *buf, size_t len, int pass_fd)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} cmsg;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;

	if (pass_fd >= 0) {
		memset(&cmsg, 0, sizeof(cmsg));
		mh.msg_control = cmsg.buf;
		mh.msg_controllen = sizeof(cmsg.buf);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &pass_fd, sizeof(int));
	}
	/* Never wait for a client: a full socket buffer disconnects it. */
	if (sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)len)
		return -errno ? -errno : -EIO;
	return 0;
}

static void kvc_received(struct kvc_server *s, struct kvc_conn *c, int res)
{
	int pass_fd = -1, n;

	if (res <= 0) {		/* end of file or a socket error */
		kvc_conn_close(s, c);
		return;
	}
	kvc_drop_fds(&c->mh);
	n = s->ops->request(s->ctx, &c->peer, c->buf, (size_t)res,
			    c->mh.msg_flags & MSG_TRUNC, s->reply, &pass_fd);
	if (n == KVC_SERVER_DEFER)
		return;		/* kvc_server_reply() re-arms the receive */
	if (n < 0 || (n > 0 && kvc_send(c->peer.fd, s->reply, (size_t)n,
					 pass_fd)) || kvc_arm_recv(s, c))
		kvc_conn_close(s, c);
}

int kvc_server_reply(struct kvc_server *s, uint32_t id, uint64_t serial,
		     const uint8_t *msg, size_t len, int pass_fd)
{
	struct kvc_conn *c = id < KVC_SERVER_MAX_CLIENTS ? s->conns[id] : NULL;

	if (!c || c->peer.serial != serial)
		return -ENOTCONN;	/* gone; the id may be someone else's */
	if (kvc_send(c->peer.fd, msg, len, pass_fd) || kvc_arm_recv(s, c)) {
		kvc_conn_close(s, c);
		return -ENOTCONN;
	}
	return 0;
}

/*
 * A completion whose handling held the loop this long is logged: every
 * other client waited as long. The daemon's own I/O goes through rings
 * and should never come near; a slow filesystem or a bug shows here.
 */
#define KVC_SERVER_SLOW_S	1.0

static void kvc_complete_one(struct kvc_server *s, struct io_uring_cqe *cqe);

static void kvc_complete(struct kvc_server *s, struct io_uring_cqe *cqe)
{
	static const char *const what[] = {
		[OP_ACCEPT] = "a connection", [OP_RECV] = "a request",
		[OP_POLL] = "a watched descriptor", [OP_TICK] = "the tick",
		[OP_LPOLL] = "a connection",
	};
	uint64_t op = io_uring_cqe_get_data64(cqe) >> 32;
	double t0 = kvc_now(), took;

	kvc_complete_one(s, cqe);
	took = kvc_now() - t0;
	if (took > KVC_SERVER_SLOW_S)
		kvc_log_ratelimited(KVC_LOG_WARN, "the event loop was held %.1f s by %s: clients waited as long",
				    took, op < sizeof(what) / sizeof(what[0]) &&
				    what[op] ? what[op] : "?");
}

/*
 * The listening socket is readable while the ring's accept fails for
 * want of descriptors: take the connection here, or refuse it with the
 * spare (see the top); then let the ring accept again.
 */
static void kvc_accept_queued(struct kvc_server *s)
{
	struct pollfd pfd = { .fd = s->lfd, .events = POLLIN };
	int fd, err;

	/* Only what is queued: the loop never waits in accept(2). */
	if (poll(&pfd, 1, 0) != 1) {
		kvc_arm_accept(s);
		return;
	}
	fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd >= 0) {
		kvc_accepted(s, fd);
		kvc_arm_accept(s);
		return;
	}
	err = errno;
	if ((err == EMFILE || err == ENFILE) && s->spare >= 0) {
		close(s->spare);
		fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd >= 0) {
			close(fd);
			s->refused++;
		}
		s->spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
		kvc_log_ratelimited(KVC_LOG_WARN, "out of descriptors (%s): a client's connection was refused (%" PRIu64 " so far; RLIMIT_NOFILE, kvcached.md \"Descriptors\")",
				    strerror(err), s->refused);
	}
	if (s->spare < 0 && (err == EMFILE || err == ENFILE))
		s->accept_paused = true;	/* the tick tries again */
	else
		kvc_arm_accept(s);
}

static void kvc_complete_one(struct kvc_server *s, struct io_uring_cqe *cqe)
{
	uint64_t data = io_uring_cqe_get_data64(cqe);
	uint32_t n = (uint32_t)data;

	switch (data >> 32) {
	case OP_ACCEPT:
		if (cqe->res >= 0) {
			kvc_accepted(s, cqe->res);
			kvc_arm_accept(s);
		} else if (cqe->res == -EMFILE || cqe->res == -ENFILE) {
			kvc_arm_lpoll(s);	/* never spin: see the top */
		} else {
			kvc_arm_accept(s);
		}
		break;
	case OP_LPOLL:
		kvc_accept_queued(s);
		break;
	case OP_RECV:
		if (n < KVC_SERVER_MAX_CLIENTS && s->conns[n])
			kvc_received(s, s->conns[n], cqe->res);
		break;
	case OP_POLL:
		if (cqe->res > 0)
			s->ops->readable(s->ctx, s->watch[n]);
		kvc_arm_poll(s, (int)n);
		break;
	case OP_TICK:
		s->ops->tick(s->ctx);
		kvc_arm_tick(s);
		if (s->accept_paused) {
			s->spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
			s->accept_paused = false;
			kvc_arm_accept(s);
		}
		break;
	}
}

int kvc_server_run(struct kvc_server *s, volatile sig_atomic_t *wake,
		   uint64_t timeout_ms)
{
	double end = kvc_now() + (double)timeout_ms / 1e3, left;
	struct __kernel_timespec ts;
	struct io_uring_cqe *cqe;
	unsigned int head, seen;
	int ret = 0;

	if (!s->armed) {
		ret = kvc_arm_accept(s);
		for (int i = 0; !ret && i < s->nwatch; i++)
			ret = kvc_arm_poll(s, i);
		if (!ret && s->ticking)
			ret = kvc_arm_tick(s);
		if (ret)
			return ret;
		s->armed = true;
	}
	while (!*wake) {
		if (timeout_ms) {
			left = end - kvc_now();
			if (left <= 0)
				break;
			ts.tv_sec = (long long)left;
			ts.tv_nsec = (long long)((left - (double)ts.tv_sec) * 1e9);
		}
		ret = io_uring_submit_and_wait_timeout(&s->ring, &cqe, 1,
						       timeout_ms ? &ts : NULL,
						       NULL);
		/* A signal (look at *wake) or the timeout: nothing to reap. */
		if (ret == -EINTR || ret == -ETIME)
			continue;
		if (ret < 0)
			return ret;
		if (s->ops->round)
			s->ops->round(s->ctx);
		seen = 0;
		io_uring_for_each_cqe(&s->ring, head, cqe) {
			kvc_complete(s, cqe);
			seen++;
		}
		io_uring_cq_advance(&s->ring, seen);
	}
	return 0;
}

void kvc_server_close(struct kvc_server *s)
{
	if (!s)
		return;
	for (uint32_t i = 0; i < KVC_SERVER_MAX_CLIENTS; i++)
		if (s->conns[i])
			kvc_conn_close(s, s->conns[i]);
	io_uring_queue_exit(&s->ring);
	close(s->lfd);
	if (s->spare >= 0)
		close(s->spare);
	unlink(s->addr.sun_path);
	free(s);
}
