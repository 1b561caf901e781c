/* SPDX-License-Identifier: GPL-2.0 */
/*
 * client: one synchronous connection to kvcached (kvcachectl's, and the
 * base the client library builds on).
 *
 * Each call sends one request and waits for the reply with the same seq:
 * the protocol is request/response per message (Documentation/userspace-api/protocol.md).
 */
#ifndef KVC_CLIENT_H
#define KVC_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

struct kvc_client {
	int fd;
	uint32_t seq;
	int pool_fd;			/* memfd mode: from HELLO, else -1 */
	struct kvc_hello_reply hello;
	uint8_t buf[KVC_PROTO_MSG_MAX];	/* the last reply; msg points in */
};

/*
 * Connect to the daemon's socket and say HELLO. Returns 0 or -errno
 * (-EPROTONOSUPPORT: no common version; an ERROR reply's errno).
 */
int kvc_client_open(struct kvc_client *c, const char *path);
void kvc_client_close(struct kvc_client *c);

/*
 * Send the request encoded in req (len bytes, its seq from
 * kvc_client_next_seq()) and decode the reply into *msg. Returns 0, the
 * errno of an ERROR reply, or another -errno.
 */
int kvc_client_call(struct kvc_client *c, const void *req, size_t len,
		    struct kvc_msg *msg);
uint32_t kvc_client_next_seq(struct kvc_client *c);

#endif /* KVC_CLIENT_H */
