/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kevents: the kernel's pool events, over the "kvcache" generic netlink
 * family (libnl-genl-3).
 *
 * kvcache.ko multicasts KVCACHE_CMD_PRESSURE to the "events" group when
 * the free blocks cross the watermarks, and answers KVCACHE_CMD_GET_POOL
 * with the same attributes. kvcached polls kvc_kevents_fd() in its event
 * loop, drains it with kvc_kevents_read(), and asks GET_POOL at start so
 * that a pool already under pressure is noticed without waiting.
 *
 * Two netlink sockets: one joined to the group (events only), one for
 * requests, so a reply is never mistaken for an event and an event never
 * arrives where a reply is awaited.
 */
#ifndef KVC_KEVENTS_H
#define KVC_KEVENTS_H

#include <stdint.h>

struct nlmsghdr;

struct kvc_pool_state {
	uint32_t free_blocks;
	uint32_t nr_blocks;
	uint32_t low_watermark;		/* blocks */
	uint32_t high_watermark;	/* blocks */
	int pressure;			/* 1: below low, 0: back above high */
};

struct kvc_kevents;

/*
 * Resolve the family and join its "events" group. Returns 0, -ENOENT
 * when kvcache.ko is not loaded (no such family), or another -errno.
 */
int kvc_kevents_open(struct kvc_kevents **out);
void kvc_kevents_close(struct kvc_kevents *ev);

/* The event socket's descriptor, non-blocking, for poll or io_uring. */
int kvc_kevents_fd(const struct kvc_kevents *ev);

/*
 * Handle every event queued on the event socket: cb once per valid
 * PRESSURE message, in order; malformed messages are skipped. Returns the
 * number of events delivered (0 for an empty queue), or -errno on a
 * socket error.
 */
int kvc_kevents_read(struct kvc_kevents *ev,
		     void (*cb)(const struct kvc_pool_state *st, void *arg),
		     void *arg);

/* KVCACHE_CMD_GET_POOL: the pool's state now. Returns 0 or -errno. */
int kvc_kevents_get_pool(struct kvc_kevents *ev, struct kvc_pool_state *st);

/*
 * Parse one generic netlink message of the family (GET_POOL reply or
 * PRESSURE event). Every attribute must be present with its exact size.
 * Returns 0, -EBADMSG (truncated, missing or mis-sized attribute) or
 * -EOPNOTSUPP (another command). Pure: the unit tests feed it crafted
 * messages.
 */
int kvc_kevents_parse(const struct nlmsghdr *nlh, struct kvc_pool_state *st);

#endif /* KVC_KEVENTS_H */
