// SPDX-License-Identifier: GPL-2.0
/*
 * The selftests' raw kvcached client (kvc_client.h).
 */
#define _GNU_SOURCE
#include "kvc_client.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "fdpass.h"

int kvcc_connect_fd(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	strcpy(a.sun_path, path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

void kvcc_init(struct kvcc *c)
{
	memset(c, 0, sizeof(*c));
	c->fd = -1;
	c->rx_fd = -1;
	c->pool_fd = -1;
}

void kvcc_close(struct kvcc *c)
{
	if (c->pool)
		munmap(c->pool, c->pool_len);
	if (c->pool_fd >= 0)
		close(c->pool_fd);
	if (c->rx_fd >= 0 && c->rx_fd != c->pool_fd)
		close(c->rx_fd);
	if (c->fd >= 0)
		close(c->fd);
	free(c->tx);
	free(c->rx);
	kvcc_init(c);
}

int kvcc_open(struct kvcc *c, const char *path)
{
	kvcc_init(c);
	c->tx = calloc(1, KVC_PROTO_MSG_MAX);
	c->rx = calloc(1, KVC_PROTO_MSG_MAX + 1);
	if (!c->tx || !c->rx) {
		kvcc_close(c);
		return -ENOMEM;
	}
	/* Start somewhere else than 0, so an echoed seq means something. */
	c->seq = 1000u + (uint32_t)getpid() % 1000u;
	c->fd = kvcc_connect_fd(path);
	if (c->fd < 0) {
		int err = c->fd;

		kvcc_close(c);
		return err;
	}
	return 0;
}

int kvcc_send_raw(struct kvcc *c, const void *buf, size_t len)
{
	ssize_t n = send(c->fd, buf, len, MSG_NOSIGNAL);

	if (n < 0)
		return -errno;
	return n == (ssize_t)len ? 0 : -EIO;
}

ssize_t kvcc_recv_raw(struct kvcc *c, int timeout_ms)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * 8)];
	} cbuf;
	struct iovec iov = { .iov_base = c->rx, .iov_len = KVC_PROTO_MSG_MAX + 1 };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = cbuf.buf, .msg_controllen = sizeof(cbuf.buf),
	};
	struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
	ssize_t n;
	int r;

	do {
		r = poll(&pfd, 1, timeout_ms);
	} while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	if (!r)
		return -ETIMEDOUT;
	n = recvmsg(c->fd, &mh, MSG_CMSG_CLOEXEC);
	if (n < 0)
		return -errno;
	if (c->rx_fd >= 0 && c->rx_fd != c->pool_fd)
		close(c->rx_fd);
	c->rx_fd = -1;
	c->rx_nfds = kvc_fdpass_take(&mh, &c->rx_fd);
	c->rx_len = (size_t)n;
	return n;
}

int kvcc_call(struct kvcc *c, int len, uint16_t want)
{
	return kvcc_call_ms(c, len, want, KVCC_TIMEOUT_MS);
}

int kvcc_call_ms(struct kvcc *c, int len, uint16_t want, int timeout_ms)
{
	ssize_t n;
	int ret;

	if (len < 0) {
		snprintf(c->why, sizeof(c->why), "encoding failed: %d", len);
		return KVCC_BROKEN;
	}
	ret = kvcc_send_raw(c, c->tx, (size_t)len);
	if (ret) {
		snprintf(c->why, sizeof(c->why), "send: %s", strerror(-ret));
		return KVCC_BROKEN;
	}
	n = kvcc_recv_raw(c, timeout_ms);
	if (n <= 0) {
		snprintf(c->why, sizeof(c->why), "receive: %s",
			 n ? strerror((int)-n) : "end of file");
		return KVCC_BROKEN;
	}
	ret = kvc_proto_decode(c->rx, (size_t)n, &c->msg);
	if (ret) {
		snprintf(c->why, sizeof(c->why), "reply does not decode: %s (%s)",
			 strerror(-ret), c->msg.reason);
		return KVCC_BROKEN;
	}
	if (c->msg.seq != c->seq) {
		snprintf(c->why, sizeof(c->why), "reply seq %u, sent %u",
			 c->msg.seq, c->seq);
		return KVCC_BROKEN;
	}
	if (c->msg.type == KVC_MSG_ERROR) {
		snprintf(c->why, sizeof(c->why), "ERROR %d: %.*s",
			 c->msg.error.error, (int)c->msg.error.msg_len,
			 c->msg.error.msg);
		if (c->msg.error.bad_type != (want & ~KVC_MSG_REPLY)) {
			snprintf(c->why, sizeof(c->why),
				 "ERROR names type %#x, sent %#x",
				 c->msg.error.bad_type, want & ~KVC_MSG_REPLY);
			return KVCC_BROKEN;
		}
		return c->msg.error.error;
	}
	if (c->msg.type != want) {
		snprintf(c->why, sizeof(c->why), "reply type %#x, want %#x",
			 c->msg.type, want);
		return KVCC_BROKEN;
	}
	return 0;
}

int kvcc_hello_caps(struct kvcc *c, uint64_t caps)
{
	struct kvc_hello h = {
		.min_version = KVC_PROTO_VERSION_MIN,
		.max_version = KVC_PROTO_VERSION_MAX,
		.caps = caps,
	};
	int ret = kvcc_call(c, kvc_proto_encode_hello(KVCC_TX(c), &h),
			    KVC_MSG_HELLO_REPLY);

	if (ret)
		return ret;
	c->hello = c->msg.hello_reply;
	c->hello_nfds = c->rx_nfds;
	if (c->rx_fd >= 0 && c->pool_fd < 0) {
		c->pool_fd = c->rx_fd;
		c->pool_len = (size_t)(c->hello.block_size * c->hello.nr_blocks);
		c->pool = mmap(NULL, c->pool_len, PROT_READ | PROT_WRITE,
			       MAP_SHARED, c->pool_fd, 0);
		if (c->pool == MAP_FAILED) {
			c->pool = NULL;
			snprintf(c->why, sizeof(c->why), "mmap of the pool: %s",
				 strerror(errno));
			return KVCC_BROKEN;
		}
	}
	return 0;
}

int kvcc_hello(struct kvcc *c)
{
	return kvcc_hello_caps(c, KVC_PROTO_CAP_ALL);
}

int kvcc_stat(struct kvcc *c, const char *name, uint64_t *val)
{
	struct kvc_stat st;
	size_t pos = 0;
	int ret = kvcc_call(c, kvc_proto_encode_stats(KVCC_TX(c)),
			    KVC_MSG_STATS_REPLY);

	if (ret)
		return ret;
	while (kvc_proto_stats_next(&c->msg.stats_reply, &pos, &st))
		if (st.name_len == strlen(name) &&
		    !memcmp(st.name, name, st.name_len)) {
			*val = st.value;
			return 0;
		}
	return -ENOENT;
}

uint64_t kvcc_stat1(struct kvcc *c, const char *name)
{
	uint64_t v;

	return kvcc_stat(c, name, &v) ? UINT64_MAX : v;
}

int kvcc_lookup(struct kvcc *c, uint32_t ns, uint32_t tiers,
		const uint8_t *keys, uint32_t n,
		struct kvc_lookup_entry *out)
{
	int ret = kvcc_call(c, kvc_proto_encode_lookup(KVCC_TX(c), ns, tiers,
						       keys, n),
			    KVC_MSG_LOOKUP_REPLY);

	if (ret)
		return ret;
	if (c->msg.lookup_reply.matched > n) {
		snprintf(c->why, sizeof(c->why), "matched %u of %u keys",
			 c->msg.lookup_reply.matched, n);
		return KVCC_BROKEN;
	}
	for (uint32_t i = 0; out && i < c->msg.lookup_reply.matched; i++)
		kvc_proto_lookup_entry(&c->msg.lookup_reply, i, &out[i]);
	return (int)c->msg.lookup_reply.matched;
}

int kvcc_statuses(struct kvcc *c, uint32_t n, int32_t *status)
{
	const struct kvc_status_list *l = &c->msg.store_reply;

	if (l->count != n) {
		snprintf(c->why, sizeof(c->why), "%u statuses for %u entries",
			 l->count, n);
		return KVCC_BROKEN;
	}
	for (uint32_t i = 0; i < n; i++)
		status[i] = kvc_proto_status(l, i);
	return 0;
}

int kvcc_store(struct kvcc *c, uint32_t ns,
	       const struct kvc_store_entry *e, uint32_t n,
	       int32_t *status)
{
	int ret = kvcc_call(c, kvc_proto_encode_store(KVCC_TX(c), ns, e, n),
			    KVC_MSG_STORE_REPLY);

	return ret ? ret : kvcc_statuses(c, n, status);
}

int kvcc_load(struct kvcc *c, uint32_t ns, const uint8_t *keys,
	      uint32_t n, struct kvc_load_result *res)
{
	int ret = kvcc_call(c, kvc_proto_encode_load(KVCC_TX(c), ns, keys, n),
			    KVC_MSG_LOAD_REPLY);

	if (ret)
		return ret;
	if (c->msg.load_reply.count != n) {
		snprintf(c->why, sizeof(c->why), "%u results for %u keys",
			 c->msg.load_reply.count, n);
		return KVCC_BROKEN;
	}
	for (uint32_t i = 0; i < n; i++)
		kvc_proto_load_result(&c->msg.load_reply, i, &res[i]);
	return 0;
}

int kvcc_release(struct kvcc *c, const struct kvcache_handle *h,
		 uint32_t n, int32_t *status)
{
	int ret = kvcc_call(c, kvc_proto_encode_release(KVCC_TX(c), h, n),
			    KVC_MSG_RELEASE_REPLY);

	return ret ? ret : kvcc_statuses(c, n, status);
}

int kvcc_ns_create(struct kvcc *c, uint32_t ns, uint32_t uid,
		   uint32_t gid, uint32_t mode)
{
	struct kvc_ns_create nc = {
		.ns_id = ns, .uid = uid, .gid = gid, .mode = mode,
	};

	return kvcc_call(c, kvc_proto_encode_ns_create(KVCC_TX(c), &nc),
			 KVC_MSG_NS_CREATE_REPLY);
}

int kvcc_alloc(struct kvcc *c, uint32_t ns, uint32_t n,
	       struct kvcache_handle *h)
{
	int ret = kvcc_call(c, kvc_proto_encode_alloc(KVCC_TX(c), ns, n),
			    KVC_MSG_ALLOC_REPLY);

	if (ret)
		return ret;
	if (c->msg.alloc_reply.count != n) {
		snprintf(c->why, sizeof(c->why), "%u handles for %u blocks",
			 c->msg.alloc_reply.count, n);
		return KVCC_BROKEN;
	}
	for (uint32_t i = 0; i < n; i++)
		kvc_proto_alloc_handle(&c->msg.alloc_reply, i, &h[i]);
	return 0;
}

int kvcc_seal(struct kvcc *c, const struct kvc_seal_entry *e,
	      uint32_t n, int32_t *status)
{
	int ret = kvcc_call(c, kvc_proto_encode_seal(KVCC_TX(c), e, n),
			    KVC_MSG_SEAL_REPLY);

	return ret ? ret : kvcc_statuses(c, n, status);
}

int kvcc_evict(struct kvcc *c, uint32_t ns, const uint8_t *keys,
	       uint32_t n, int32_t *st)
{
	int ret = kvcc_call(c, kvc_proto_encode_evict(KVCC_TX(c), ns, keys, n),
			    KVC_MSG_EVICT_REPLY);

	for (uint32_t i = 0; !ret && i < c->msg.evict_reply.count && i < n; i++)
		st[i] = kvc_proto_status(&c->msg.evict_reply, i);
	return ret;
}

int kvcc_flush_tiers(struct kvcc *c, uint32_t ns,
		     uint32_t tiers, struct kvc_flush_reply *r)
{
	int ret = kvcc_call_ms(c, kvc_proto_encode_flush_tiers(KVCC_TX(c), ns,
							       tiers),
			       KVC_MSG_FLUSH_REPLY, KVCC_FLUSH_TIMEOUT_MS);

	if (!ret)
		*r = c->msg.flush_reply;
	return ret;
}

int kvcc_flush(struct kvcc *c, uint32_t ns,
	       struct kvc_flush_reply *r)
{
	return kvcc_flush_tiers(c, ns, 0, r);
}

int kvcc_ns_list(struct kvcc *c, uint32_t start)
{
	return kvcc_call(c, kvc_proto_encode_ns_list(KVCC_TX(c), start),
			 KVC_MSG_NS_LIST_REPLY);
}

int kvcc_ns_salt(struct kvcc *c, uint32_t ns, const uint8_t *set,
		 uint8_t *out)
{
	struct kvc_ns_salt s = { .ns_id = ns };
	int ret;

	if (set) {
		s.flags = KVC_PROTO_NS_SALT_SET;
		memcpy(s.salt, set, KVC_PROTO_SALT_SIZE);
	}
	ret = kvcc_call(c, kvc_proto_encode_ns_salt(KVCC_TX(c), &s),
			KVC_MSG_NS_SALT_REPLY);
	if (!ret && out)
		memcpy(out, c->msg.ns_salt_reply.salt, KVC_PROTO_SALT_SIZE);
	return ret;
}

int kvcc_ns_entry(struct kvcc *c, uint32_t ns, struct kvc_ns_entry *e)
{
	uint32_t start = 0;

	do {
		int ret = kvcc_ns_list(c, start);

		if (ret)
			return ret;
		for (uint32_t i = 0; i < c->msg.ns_list_reply.count; i++) {
			kvc_proto_ns_entry(&c->msg.ns_list_reply, i, e);
			if (e->ns_id == ns)
				return 0;
		}
		start = c->msg.ns_list_reply.next;
	} while (start);
	return -ENOENT;
}
