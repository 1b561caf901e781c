// SPDX-License-Identifier: GPL-2.0
/*
 * client: one synchronous connection to kvcached (see client.h).
 */
#include "client.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fdpass.h"

uint32_t kvc_client_next_seq(struct kvc_client *c)
{
	return ++c->seq;
}

/* Receive one datagram; keep a descriptor that comes with it in *fd. */
static ssize_t kvc_client_recv(struct kvc_client *c, int *fd)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} cmsg;
	struct iovec iov = { .iov_base = c->buf, .iov_len = sizeof(c->buf) };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = cmsg.buf, .msg_controllen = sizeof(cmsg.buf),
	};
	ssize_t n;

	do {
		n = recvmsg(c->fd, &mh, MSG_CMSG_CLOEXEC);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (n == 0)
		return -ECONNRESET;
	kvc_fdpass_take(&mh, fd);
	return n;
}

static int kvc_client_roundtrip(struct kvc_client *c, const void *req,
				size_t len, struct kvc_msg *msg, int *fd)
{
	uint32_t seq;
	ssize_t n;
	int ret;

	/* The reply must answer this request: remember its seq. */
	ret = kvc_proto_decode(req, len, msg);
	if (ret)
		return ret;
	seq = msg->seq;
	if (send(c->fd, req, len, MSG_NOSIGNAL) != (ssize_t)len)
		return -errno;
	n = kvc_client_recv(c, fd);
	if (n < 0)
		return (int)n;
	ret = kvc_proto_decode(c->buf, (size_t)n, msg);
	if (ret)
		return ret;
	if (msg->seq != seq)
		return -EBADMSG;
	if (msg->type == KVC_MSG_ERROR)
		return msg->error.error;
	return 0;
}

int kvc_client_call(struct kvc_client *c, const void *req, size_t len,
		    struct kvc_msg *msg)
{
	return kvc_client_roundtrip(c, req, len, msg, NULL);
}

int kvc_client_open(struct kvc_client *c, const char *path)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	struct kvc_hello h = {
		.min_version = KVC_PROTO_VERSION_MIN,
		.max_version = KVC_PROTO_VERSION_MAX,
		.caps = KVC_PROTO_CAP_ALL,
	};
	uint8_t req[64];
	struct kvc_msg m;
	int ret, len;

	memset(c, 0, sizeof(*c));
	c->pool_fd = -1;
	if (strlen(path) >= sizeof(addr.sun_path))
		return -ENAMETOOLONG;
	strcpy(addr.sun_path, path);
	c->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return -errno;
	if (connect(c->fd, (struct sockaddr *)&addr, sizeof(addr))) {
		ret = -errno;
		goto err;
	}
	len = kvc_proto_encode_hello(req, sizeof(req), kvc_client_next_seq(c),
				     &h);
	ret = len < 0 ? len :
	      kvc_client_roundtrip(c, req, (size_t)len, &m, &c->pool_fd);
	if (!ret && m.type != KVC_MSG_HELLO_REPLY)
		ret = -EBADMSG;
	if (ret)
		goto err;
	c->hello = m.hello_reply;
	return 0;
err:
	kvc_client_close(c);
	return ret;
}

void kvc_client_close(struct kvc_client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	if (c->pool_fd >= 0)
		close(c->pool_fd);
	c->fd = -1;
	c->pool_fd = -1;
}
