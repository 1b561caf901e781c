// SPDX-License-Identifier: GPL-2.0
/*
 * libkvcache connections: a fixed set of SOCK_SEQPACKET connections to
 * kvcached, each used by one call at a time (lib_priv.h has the locking).
 *
 * A connection that fails in any way the protocol cannot recover from (the
 * daemon gone, no reply in time, a reply that does not decode or answers
 * another request) is closed at once: a late or stray reply must never be
 * taken for the answer to a later request. Its epoch moves on, so callers
 * holding pins of the old connection (memfd mode) know they are gone. The
 * next call to take the slot connects again, which is how a daemon
 * restart is ridden out.
 *
 * A dead daemon's connections do not all close at once: its io_uring is
 * torn down by a kernel worker after the process is gone, and until then
 * the sockets it had requests on stay open and silent. So when one
 * connection finds its daemon gone, the client remembers that daemon's
 * pid (the peer's SO_PEERCRED), and every other connection to the same
 * pid is dropped when a call takes it, instead of being tried and failing
 * the next call too: a call caught by a restart fails once, the next one
 * works.
 */
#include "lib_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "fdpass.h"

int lib_conn_init(struct kvcache *c, unsigned int n)
{
	c->conns = calloc(n, sizeof(*c->conns));
	if (!c->conns)
		return -ENOMEM;
	c->nconns = n;
	for (unsigned int i = 0; i < n; i++) {
		struct lib_conn *k = &c->conns[i];

		k->fd = -1;
		k->seq = (uint32_t)i << 24;
		k->tx = malloc(KVC_PROTO_MSG_MAX);
		k->rx = malloc(KVC_PROTO_MSG_MAX + 1);
		if (!k->tx || !k->rx)
			return -ENOMEM;
	}
	return 0;
}

static void conn_drop(struct lib_conn *k)
{
	if (k->fd >= 0)
		close(k->fd);
	k->fd = -1;
	k->version = 0;
	k->peer = 0;
	k->nr_reserved = 0;	/* freed with the connection */
	k->epoch++;
}

/* The daemon behind k is gone: so is every connection to it. */
static void conn_peer_died(struct kvcache *c, struct lib_conn *k)
{
	if (!k->peer)
		return;
	pthread_mutex_lock(&c->lock);
	c->dead_peer = k->peer;
	pthread_mutex_unlock(&c->lock);
}

void lib_conn_fini(struct kvcache *c)
{
	for (unsigned int i = 0; c->conns && i < c->nconns; i++) {
		conn_drop(&c->conns[i]);
		free(c->conns[i].tx);
		free(c->conns[i].rx);
	}
	free(c->conns);
	c->conns = NULL;
}

unsigned int lib_conn_index(const struct kvcache *c, const struct lib_conn *k)
{
	return (unsigned int)(k - c->conns);
}

static long ms_left(const struct timespec *end)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (end->tv_sec - now.tv_sec) * 1000 +
	       (end->tv_nsec - now.tv_nsec) / 1000000;
}

/*
 * Receive one datagram into k->rx within the deadline; a descriptor that
 * comes with it goes to *fd when fd is given (else it is closed).
 */
static ssize_t conn_recv(struct lib_conn *k, const struct timespec *end,
			 int *fd)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * 4)];
	} cbuf;
	struct iovec iov = { .iov_base = k->rx, .iov_len = KVC_PROTO_MSG_MAX + 1 };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = cbuf.buf, .msg_controllen = sizeof(cbuf.buf),
	};
	struct pollfd pfd = { .fd = k->fd, .events = POLLIN };
	ssize_t n;

	for (;;) {
		long left = ms_left(end);
		int r;

		if (left < 0)
			return -ETIMEDOUT;
		r = poll(&pfd, 1, (int)(left > 1000000 ? 1000000 : left));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (!r)
			return -ETIMEDOUT;
		n = recvmsg(k->fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		break;
	}
	if (n < 0)
		return errno == EPIPE ? -ECONNRESET : -errno;
	kvc_fdpass_take(&mh, fd);
	if (n == 0)
		return -ECONNRESET;
	if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
		return -EPROTO;
	return n;
}

/* The exchange itself, with the pool descriptor of a HELLO reply. */
static int conn_exchange(struct kvcache *c, struct lib_conn *k, int len,
			 uint16_t want, int *fd)
{
	struct timespec end;
	ssize_t n;
	int ret;

	if (len < 0)
		return len;		/* the encoder refused: a caller bug */
	if (k->fd < 0)
		return -ENOTCONN;
	/* After HELLO, requests carry the version it chose. */
	len = kvc_proto_set_version(k->tx, len, k->version);
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += c->timeout_ms / 1000;
	end.tv_nsec += (long)(c->timeout_ms % 1000) * 1000000;
	if (end.tv_nsec >= 1000000000) {
		end.tv_sec++;
		end.tv_nsec -= 1000000000;
	}
	n = send(k->fd, k->tx, (size_t)len, MSG_NOSIGNAL);
	if (n != len) {
		ret = n < 0 && errno != EPIPE && errno != ECONNRESET ?
		      -errno : -ECONNRESET;
		goto broken;
	}
	n = conn_recv(k, &end, fd);
	if (n < 0) {
		ret = (int)n;
		goto broken;
	}
	/* A reply that does not decode, or answers something else: desync. */
	while (!kvc_proto_decode(k->rx, (size_t)n, &k->msg) &&
	       k->msg.seq != k->seq && k->msg.type == KVC_MSG_ERROR &&
	       k->msg.error.bad_type == KVC_MSG_TOUCH) {
		/* A TOUCH refused (it has no other reply): skip it. */
		n = conn_recv(k, &end, fd);
		if (n < 0) {
			ret = (int)n;
			goto broken;
		}
	}
	if (kvc_proto_decode(k->rx, (size_t)n, &k->msg) ||
	    k->msg.seq != k->seq) {
		ret = -EPROTO;
		goto broken;
	}
	if (k->msg.type == KVC_MSG_ERROR) {
		if (k->msg.error.bad_type != (want & ~KVC_MSG_REPLY)) {
			ret = -EPROTO;
			goto broken;
		}
		return k->msg.error.error;
	}
	if (k->msg.type != want) {
		ret = -EPROTO;
		goto broken;
	}
	return 0;
broken:
	if (ret == -ECONNRESET)
		conn_peer_died(c, k);
	conn_drop(k);
	return ret;
}

int lib_call(struct kvcache *c, struct lib_conn *k, int len, uint16_t want)
{
	return conn_exchange(c, k, len, want, NULL);
}

void lib_send(struct kvcache *c, struct lib_conn *k, int len)
{
	ssize_t n;

	if (len < 0 || k->fd < 0)
		return;
	len = kvc_proto_set_version(k->tx, len, k->version);
	/*
	 * Never wait: what is sent this way is advice (TOUCH), and a daemon
	 * that does not read its socket (stopped, or swamped) must not stall
	 * the loads that found their blocks without it. A full socket drops
	 * the message and keeps the connection.
	 */
	n = send(k->fd, k->tx, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n == len || (n < 0 && (errno == EAGAIN || errno == EINTR)))
		return;
	if (n < 0 && (errno == EPIPE || errno == ECONNRESET))
		conn_peer_died(c, k);
	conn_drop(k);
}

/*
 * memfd mode, version 4: ask for the fast index of the daemon whose pool
 * was just mapped. Refused (the daemon runs without it) is no error.
 */
static int conn_fast_map(struct kvcache *c, struct lib_conn *k)
{
	int fd = -1, ret;

	if (c->fast_off || k->version < KVC_PROTO_VERSION_FAST)
		return 0;
	ret = conn_exchange(c, k, kvc_proto_encode_fast_map(LIB_TX(k)),
			    KVC_MSG_FAST_MAP_REPLY, &fd);
	if (!ret && fd >= 0)
		lib_fast_install(c, fd, k->peer);
	if (fd >= 0)
		close(fd);
	return k->fd < 0 ? ret : 0;
}

int lib_conn_fast_ns(struct kvcache *c, uint32_t ns_id)
{
	struct lib_conn *k;
	int fd = -1, ret;
	pid_t peer;

	if (c->fast_off)
		return 0;
	k = lib_conn_get(c, -1, &ret);
	if (!k)
		return ret;
	peer = k->peer;
	if (k->version < KVC_PROTO_VERSION_FAST_NS)
		ret = -EOPNOTSUPP;	/* an older daemon: no fast path */
	else
		ret = conn_exchange(c, k, kvc_proto_encode_fast_ns(LIB_TX(k),
								   ns_id),
				    KVC_MSG_FAST_NS_REPLY, &fd);
	lib_conn_put(c, k);
	if (!ret && fd >= 0)
		lib_fast_ns_install(c, ns_id, fd, peer);
	if (fd >= 0)
		close(fd);
	return ret;
}

/*
 * Map the pool a HELLO reply passed (memfd mode). The same daemon passes
 * the same memfd on every connection: keep one mapping per memfd. A new
 * daemon means a new pool; the old mapping stays until close, for blocks
 * still mapped from it, and the old daemon's fast index goes with it.
 * Returns 1 for a new mapping, 0 for the one already there, or -errno.
 */
static int pool_adopt(struct kvcache *c, int fd)
{
	size_t len = (size_t)(c->block_size * c->nr_blocks);
	struct lib_old_map *old;
	struct stat st;
	void *p;
	int ret = 0;

	if (fstat(fd, &st))
		return -errno;
	if ((uint64_t)st.st_size < c->block_size * c->nr_blocks)
		return -EPROTO;		/* smaller than announced */
	pthread_mutex_lock(&c->lock);
	if (!c->pool_touched)
		c->pool_touched = calloc((c->nr_blocks + 63) / 64,
					 sizeof(uint64_t));
	if (c->pool && c->pool_dev == st.st_dev && c->pool_ino == st.st_ino)
		goto out;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		ret = -errno;
		goto out;
	}
	if (c->pool) {
		old = malloc(sizeof(*old));
		if (!old) {
			munmap(p, len);
			ret = -ENOMEM;
			goto out;
		}
		old->addr = c->pool;
		old->len = c->pool_len;
		old->next = c->old_maps;
		c->old_maps = old;
	}
	lib_fast_drop_locked(c);
	ret = 1;
	if (c->pool && c->pool_touched)
		memset(c->pool_touched, 0,
		       (c->nr_blocks + 63) / 64 * sizeof(uint64_t));
	c->pool = p;
	c->pool_len = len;
	c->pool_dev = st.st_dev;
	c->pool_ino = st.st_ino;
out:
	pthread_mutex_unlock(&c->lock);
	return ret;
}

uint8_t *lib_pool_block(struct kvcache *c, uint32_t index)
{
	uint8_t *p = NULL;

	pthread_mutex_lock(&c->lock);
	if (c->pool && index < c->nr_blocks)
		p = c->pool + (size_t)index * c->block_size;
	pthread_mutex_unlock(&c->lock);
	return p;
}

/* The daemon's pid, or 0 where this pid namespace cannot see it. */
static pid_t conn_peer_pid(int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) ||
	    len != sizeof(cred))
		return 0;
	return cred.pid;
}

static int conn_connect(struct kvcache *c, struct lib_conn *k)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct kvc_hello h = {
		.min_version = KVC_PROTO_VERSION_MIN,
		.max_version = KVC_PROTO_VERSION_MAX,
		.caps = KVC_PROTO_CAP_ALL,
	};
	const struct kvc_hello_reply *r;
	int pool_fd = -1;
	bool first;
	int ret;

	strcpy(a.sun_path, c->socket);	/* length checked at open */
	k->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (k->fd < 0)
		return -errno;
	if (connect(k->fd, (struct sockaddr *)&a, sizeof(a))) {
		ret = -errno;
		conn_drop(k);
		return ret;
	}
	k->peer = conn_peer_pid(k->fd);
	ret = conn_exchange(c, k, kvc_proto_encode_hello(LIB_TX(k), &h),
			    KVC_MSG_HELLO_REPLY, &pool_fd);
	if (ret) {
		conn_drop(k);
		goto out;
	}
	r = &k->msg.hello_reply;
	k->version = r->version;
	pthread_mutex_lock(&c->lock);
	if (k->peer && k->peer == c->dead_peer)
		c->dead_peer = 0;	/* the pid was reused by a live daemon */
	first = !c->mode;
	/*
	 * A restarted daemon must keep the geometry: block handles and
	 * strides the engine computed depend on it.
	 */
	if (!first && (r->mode != c->mode || r->block_size != c->block_size ||
		       r->nr_blocks != c->nr_blocks))
		ret = -EPROTO;
	if ((r->mode == KVC_PROTO_MODE_MEMFD) != (pool_fd >= 0))
		ret = -EPROTO;
	if (!ret && first) {
		c->mode = r->mode;
		c->max_batch = r->max_batch;
		c->block_size = r->block_size;
		c->nr_blocks = r->nr_blocks;
	}
	pthread_mutex_unlock(&c->lock);
	if (!ret && pool_fd >= 0)
		ret = pool_adopt(c, pool_fd);
	if (ret == 1)
		ret = conn_fast_map(c, k);
	if (ret)
		conn_drop(k);
out:
	if (pool_fd >= 0)
		close(pool_fd);
	return ret;
}

/*
 * The daemon never speaks unasked, so an idle connection that is readable
 * has been closed (a restarted or stopped daemon) or broken: drop it and
 * connect again, rather than fail the call that would send on it.
 */
static bool conn_idle_ok(struct lib_conn *k)
{
	struct pollfd pfd = { .fd = k->fd, .events = POLLIN };

	if (poll(&pfd, 1, 0) == 0)
		return true;
	conn_drop(k);
	return false;
}

struct lib_conn *lib_conn_get(struct kvcache *c, int want, int *err)
{
	struct lib_conn *k = NULL;
	bool stale;
	int ret;

	pthread_mutex_lock(&c->lock);
	for (;;) {
		if (want >= 0) {
			if (!c->conns[want].busy)
				k = &c->conns[want];
		} else {
			/*
			 * Prefer a connection that is up; rotate so the
			 * load spreads over the daemon's connections.
			 */
			for (unsigned int i = 0; i < c->nconns && !k; i++) {
				struct lib_conn *t =
					&c->conns[(c->next_conn + i) % c->nconns];

				if (!t->busy && t->fd >= 0)
					k = t;
			}
			for (unsigned int i = 0; i < c->nconns && !k; i++)
				if (!c->conns[i].busy)
					k = &c->conns[i];
			c->next_conn++;
		}
		if (k)
			break;
		pthread_cond_wait(&c->cond, &c->lock);
	}
	k->busy = true;
	stale = k->fd >= 0 && k->peer && k->peer == c->dead_peer;
	pthread_mutex_unlock(&c->lock);
	if (stale)
		conn_drop(k);
	if (k->fd >= 0 && conn_idle_ok(k))
		return k;
	ret = conn_connect(c, k);
	if (!ret)
		return k;
	lib_conn_put(c, k);
	*err = ret;
	return NULL;
}

void lib_conn_put(struct kvcache *c, struct lib_conn *k)
{
	pthread_mutex_lock(&c->lock);
	k->busy = false;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}
