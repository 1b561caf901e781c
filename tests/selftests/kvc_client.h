/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A minimal kvcached client for the selftests: one SOCK_SEQPACKET
 * connection, one request in flight, the real wire codec (helper/common/proto.c).
 * Every call returns 0 (or a count), a negative errno that the daemon
 * answered (an ERROR reply), or KVCC_BROKEN when the transport or the
 * reply itself was wrong (no reply, a reply to another seq, a reply that
 * does not decode, the wrong reply type...); c->why then says what.
 * Compiled once (kvc_client.c) into the selftests' support library.
 */
#ifndef KVC_CLIENT_H
#define KVC_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto.h"

/* Not an errno (those are 1..4095): the exchange itself failed. */
#define KVCC_BROKEN		(-100000)
/* How long a reply may take before the exchange counts as broken. */
#define KVCC_TIMEOUT_MS		10000
/*
 * FLUSH answers once the pool blocks it drops are written back, as
 * sync(2) returns once the data is on disk: under TCG with KASAN a pool
 * of 2 MiB blocks at queue depth 2 takes longer than a request.
 */
#define KVCC_FLUSH_TIMEOUT_MS	60000

struct kvcc {
	int fd;
	uint32_t seq;			/* of the last request sent */
	uint8_t *tx;			/* KVC_PROTO_MSG_MAX bytes */
	uint8_t *rx;			/* KVC_PROTO_MSG_MAX + 1 bytes */
	size_t rx_len;
	int rx_fd;			/* descriptor of the last reply, or -1 */
	int rx_nfds;			/* how many came with it */
	struct kvc_msg msg;		/* the last reply, decoded */
	struct kvc_hello_reply hello;	/* after kvcc_hello() */
	int hello_nfds;			/* descriptors with the HELLO reply */
	int pool_fd;			/* memfd mode: the pool, after HELLO */
	uint8_t *pool;			/* ... mapped */
	size_t pool_len;
	char why[160];
};

/* Connect to the daemon's socket: a fd, or -errno. */
int kvcc_connect_fd(const char *path);

void kvcc_init(struct kvcc *c);

void kvcc_close(struct kvcc *c);

/* Connect c (kvcc_init()ed or closed) to path: 0 or -errno. */
int kvcc_open(struct kvcc *c, const char *path);

int kvcc_send_raw(struct kvcc *c, const void *buf, size_t len);

/*
 * Receive one datagram into c->rx, with any descriptors that came with it
 * (the first kept in c->rx_fd, the others closed). Returns its length,
 * -ETIMEDOUT when nothing came within timeout_ms, 0 at end of file, or
 * -errno.
 */
ssize_t kvcc_recv_raw(struct kvcc *c, int timeout_ms);

/*
 * Send the len bytes in c->tx (a request encoded with seq c->seq) and
 * wait for its reply. Returns 0 for a reply of type want, the error of an
 * ERROR reply, or KVCC_BROKEN.
 */
int kvcc_call(struct kvcc *c, int len, uint16_t want);
/* The same, waiting timeout_ms for the reply. */
int kvcc_call_ms(struct kvcc *c, int len, uint16_t want, int timeout_ms);

#define KVCC_TX(c)	(c)->tx, KVC_PROTO_MSG_MAX, ++(c)->seq

/*
 * HELLO with caps. On success c->hello holds the reply; in memfd mode the
 * pool's descriptor is kept in c->pool_fd and mapped at c->pool.
 */
int kvcc_hello_caps(struct kvcc *c, uint64_t caps);

int kvcc_hello(struct kvcc *c);

/* One counter of a STATS reply: 0, -ENOENT when absent, or an error. */
int kvcc_stat(struct kvcc *c, const char *name, uint64_t *val);

/* The counter, or UINT64_MAX when it cannot be read. */
uint64_t kvcc_stat1(struct kvcc *c, const char *name);

/* LOOKUP: the matched count (out[] filled, may be NULL) or an error. */
int kvcc_lookup(struct kvcc *c, uint32_t ns, uint32_t tiers,
			      const uint8_t *keys, uint32_t n,
			      struct kvc_lookup_entry *out);

/* A status list reply of exactly n entries into status[]. */
int kvcc_statuses(struct kvcc *c, uint32_t n, int32_t *status);

int kvcc_store(struct kvcc *c, uint32_t ns,
			     const struct kvc_store_entry *e, uint32_t n,
			     int32_t *status);

int kvcc_load(struct kvcc *c, uint32_t ns, const uint8_t *keys,
			    uint32_t n, struct kvc_load_result *res);

int kvcc_release(struct kvcc *c, const struct kvcache_handle *h,
			       uint32_t n, int32_t *status);

int kvcc_ns_create(struct kvcc *c, uint32_t ns, uint32_t uid,
				 uint32_t gid, uint32_t mode);

int kvcc_alloc(struct kvcc *c, uint32_t ns, uint32_t n,
			     struct kvcache_handle *h);

int kvcc_seal(struct kvcc *c, const struct kvc_seal_entry *e,
			    uint32_t n, int32_t *status);

/* EVICT n keys of ns; one status per key into st. */
int kvcc_evict(struct kvcc *c, uint32_t ns, const uint8_t *keys,
			     uint32_t n, int32_t *st);

/*
 * FLUSH ns (KVC_PROTO_NS_ALL: every namespace) from the tiers of the mask
 * (0: all); the counts into *r.
 */
int kvcc_flush_tiers(struct kvcc *c, uint32_t ns,
				   uint32_t tiers, struct kvc_flush_reply *r);

int kvcc_flush(struct kvcc *c, uint32_t ns,
			     struct kvc_flush_reply *r);

/* One page of NS_LIST from start; the reply stays in c->msg. */
int kvcc_ns_list(struct kvcc *c, uint32_t start);

/* Namespace ns's NS_LIST entry as c sees it: 0, or -ENOENT if not listed. */
int kvcc_ns_entry(struct kvcc *c, uint32_t ns, struct kvc_ns_entry *e);

/* NS_SALT: the salt into out (may be NULL), or with set, replace it. */
int kvcc_ns_salt(struct kvcc *c, uint32_t ns, const uint8_t *set,
		 uint8_t *out);

#endif /* KVC_CLIENT_H */
