/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pool: kvcached's DRAM tier behind one interface, whichever holds it.
 *
 *  - pool_kernel.c: the module's pool, through /dev/kvcache in the helper
 *    role (kdev.h) and its pressure events over generic netlink
 *    (kevents.h). Clients allocate, seal, pin and map with their own
 *    /dev/kvcache file; the kernel checks each of them.
 *  - pool_memfd.c: a pool kvcached makes itself in a memfd (mpool.h),
 *    without the module. Clients are given the memfd and map all of it;
 *    kvcached allocates, seals and pins for them (ALLOC, SEAL, RELEASE).
 *
 * The daemon and the tiers call only kvc_pool_*(), never a backend, and
 * ask what differs through the flags below rather than a mode check at
 * each call. The ops table follows SPDK's bdev modules: one const table
 * per backend, every entry filled (a backend without the notion returns
 * what the caller would do without it, as said at each entry).
 *
 * Lifetime: kvc_pool_open() returns a pool the daemon owns until
 * kvc_pool_close(). Single-threaded, as the whole daemon.
 */
#ifndef KVC_POOL_H
#define KVC_POOL_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/kvcache.h>

#include "kevents.h"

struct kvc_pool;

/*
 * The blocks outlive kvcached (the module keeps them across a daemon
 * restart): the parents journal is written, and a start rebuilds the
 * index from the sealed blocks it finds.
 */
#define KVC_POOL_PERSISTENT	(1u << 0)
/*
 * Clients map the whole pool (the memfd is passed at HELLO), so the
 * daemon allocates, seals and pins for them, and a client must be
 * allowed every namespace (daemon: kvcd_may_every_ns()).
 */
#define KVC_POOL_SHARED_MAP	(1u << 1)

/* A client id for the daemon's own blocks (promotions from g3/g4). */
#define KVC_POOL_SELF		1024

struct kvc_pool_ops {
	const char *name;		/* "kernel", "memfd" */
	unsigned int flags;		/* KVC_POOL_* */
	uint16_t proto_mode;		/* KVC_PROTO_MODE_*, in HELLO */
	uint64_t client_caps;		/* what a client's HELLO must offer */
	const char *client_hint;	/* why one that does not is refused */

	void (*close)(struct kvc_pool *p);
	/* Free blocks now: 0 or -errno. */
	int (*nr_free)(struct kvc_pool *p, uint32_t *n);
	/* Sealed blocks from index start on (KVCACHE_IOC_QUERY's rules). */
	int (*query)(struct kvc_pool *p, uint32_t start,
		     struct kvcache_block_info *out, uint32_t max,
		     uint32_t *count, uint32_t *next);
	/*
	 * Sealed block h: 0, -ENOENT (not sealed), -ESTALE (other gen). It
	 * looks at h.index alone (kernel mode: unless the module lacks
	 * KVCACHE_FEAT_QUERY_EXACT), so a peer's handle costs the same
	 * wherever other blocks lie.
	 */
	int (*block)(struct kvc_pool *p, struct kvcache_handle h,
		     struct kvcache_block_info *out);
	/* Evict sealed block h: 0, -EBUSY (pinned, mapped), -ESTALE. */
	int (*evict)(struct kvc_pool *p, struct kvcache_handle h);
	/* Sealed block h's payload into dst; its length in *len. */
	int (*read)(struct kvc_pool *p, struct kvcache_handle h, void *dst,
		    uint64_t *len);
	/*
	 * A new block of namespace ns holding payload, sealed with key, as
	 * the daemon's own (unpinned once sealed): 0 or -errno (-ENOSPC:
	 * no free block).
	 */
	int (*write)(struct kvc_pool *p, uint32_t ns, const void *payload,
		     uint32_t len, const uint8_t key[KVCACHE_KEY_SIZE],
		     struct kvcache_handle *h);
	/*
	 * Promotion in place (where p->can_reserve): a zeroed writable
	 * block of namespace ns owned by the daemon (KVC_POOL_SELF), its
	 * bytes at *mem in the daemon's mapping, page-aligned and
	 * block_size long, for a tier to read a file into; sealed with
	 * kvc_pool_seal(p, KVC_POOL_SELF, ...) once checked, or given back
	 * unsealed with discard (either one ends the mapping's use).
	 * 0, -ENOSPC, -errno.
	 */
	int (*reserve)(struct kvc_pool *p, uint32_t ns,
		       struct kvcache_handle *h, uint8_t **mem);
	void (*discard)(struct kvc_pool *p, struct kvcache_handle h);
	/* A namespace the pool enforces (memfd: the daemon does; 0). */
	int (*ns_create)(struct kvc_pool *p, uint32_t ns, uint32_t uid,
			 uint32_t gid, uint32_t mode);
	void (*ns_destroy)(struct kvc_pool *p, uint32_t ns);

	/*
	 * For a client (KVC_POOL_SHARED_MAP; the kernel backend answers
	 * -EOPNOTSUPP, or 0 for pin: its clients pin with their own file).
	 */
	int (*client_fd)(struct kvc_pool *p);	/* to pass at HELLO; -1 */
	int (*alloc)(struct kvc_pool *p, uint32_t client, uint32_t ns,
		     uint32_t count, struct kvcache_handle *out);
	int (*seal)(struct kvc_pool *p, uint32_t client,
		    struct kvcache_handle h, uint32_t payload_len,
		    const uint8_t key[KVCACHE_KEY_SIZE]);
	int (*pin)(struct kvc_pool *p, uint32_t client,
		   struct kvcache_handle h);
	int (*unpin)(struct kvc_pool *p, uint32_t client,
		     struct kvcache_handle h);
	/* Its pins and unsealed blocks go, as at close(2) of the device. */
	void (*release)(struct kvc_pool *p, uint32_t client);
	/*
	 * Zero up to max freed blocks ahead of the ALLOCs that will take
	 * them, so a store does not wait for the memset; how many (the
	 * kernel zeroes its own blocks: 0).
	 */
	uint32_t (*zero_ahead)(struct kvc_pool *p, uint32_t max);
	/*
	 * The fast path: the segment to pass at FAST_MAP (memfd: the whole
	 * pool's; -1: none) or FAST_NS (kernel: one namespace's, made on
	 * demand, *made set when this call made it, so that the caller
	 * publishes what the pool holds of the namespace already; -errno:
	 * none), and the blocks the index holds in the
	 * pool, published there and taken back (common/fastidx.h), with
	 * the tiers their entries are in. An evicted block is taken back by
	 * evict itself. NULL where a backend has no such thing.
	 */
	int (*fast_fd)(struct kvc_pool *p);
	int (*fast_ns_fd)(struct kvc_pool *p, uint32_t ns, bool *made);
	void (*publish)(struct kvc_pool *p, struct kvcache_handle h,
			uint32_t ns, const uint8_t key[KVCACHE_KEY_SIZE],
			const uint8_t *parent, uint8_t tiers);
	void (*unpublish)(struct kvc_pool *p, struct kvcache_handle h);
	void (*set_tiers)(struct kvc_pool *p, struct kvcache_handle h,
			  uint8_t tiers);

	/* Pressure events: a descriptor to watch (-1: none), and reading. */
	int (*events_fd)(const struct kvc_pool *p);
	void (*events_read)(struct kvc_pool *p,
			    void (*cb)(const struct kvc_pool_state *st,
				       void *arg),
			    void *arg);
};

struct kvc_pool {
	const struct kvc_pool_ops *ops;
	uint64_t block_size;
	uint32_t nr_blocks;
	/* reserve works here (the kernel backend: the module has DISCARD) */
	bool can_reserve;
};

/* How kvc_pool_open() picks a backend ([daemon] mode). */
enum kvc_pool_want {
	KVC_POOL_WANT_AUTO,	/* the module's if device exists, else memfd */
	KVC_POOL_WANT_KERNEL,
	KVC_POOL_WANT_MEMFD,
};

struct kvc_pool_config {
	enum kvc_pool_want want;
	const char *device;	/* /dev/kvcache */
	/* memfd only */
	uint64_t block_size;
	uint64_t pool_size;
	int hugetlb;		/* 1: required, 0: never, -1: when available */
	bool mlock;
	/* both: publish resident blocks (fastidx.h) */
	bool fast_index;
	/*
	 * kernel: at most this many namespace segments (a descriptor each),
	 * so that they cannot take the descriptors clients, tier files and
	 * the journal need (kvcd_fd_budget()); 0: none.
	 */
	uint32_t fast_max;
};

/* 0 and *out, or -errno (said on stderr). */
int kvc_pool_open(const struct kvc_pool_config *cfg, struct kvc_pool **out);

/* The backends' openers (kvc_pool_open() picks one). */
int kvc_pool_kernel_open(const struct kvc_pool_config *cfg,
			 struct kvc_pool **out);
int kvc_pool_memfd_open(const struct kvc_pool_config *cfg,
			struct kvc_pool **out);

static inline void kvc_pool_close(struct kvc_pool *p)
{
	if (p)
		p->ops->close(p);
}

static inline bool kvc_pool_has(const struct kvc_pool *p, unsigned int flag)
{
	return p->ops->flags & flag;
}

static inline const char *kvc_pool_name(const struct kvc_pool *p)
{
	return p->ops->name;
}

static inline int kvc_pool_nr_free(struct kvc_pool *p, uint32_t *n)
{
	return p->ops->nr_free(p, n);
}

static inline int kvc_pool_query(struct kvc_pool *p, uint32_t start,
				 struct kvcache_block_info *out, uint32_t max,
				 uint32_t *count, uint32_t *next)
{
	return p->ops->query(p, start, out, max, count, next);
}

static inline int kvc_pool_block(struct kvc_pool *p, struct kvcache_handle h,
				 struct kvcache_block_info *out)
{
	return p->ops->block(p, h, out);
}

static inline int kvc_pool_evict(struct kvc_pool *p, struct kvcache_handle h)
{
	return p->ops->evict(p, h);
}

static inline int kvc_pool_read(struct kvc_pool *p, struct kvcache_handle h,
				void *dst, uint64_t *len)
{
	return p->ops->read(p, h, dst, len);
}

static inline int kvc_pool_write(struct kvc_pool *p, uint32_t ns,
				 const void *payload, uint32_t len,
				 const uint8_t key[KVCACHE_KEY_SIZE],
				 struct kvcache_handle *h)
{
	return p->ops->write(p, ns, payload, len, key, h);
}

static inline bool kvc_pool_can_reserve(const struct kvc_pool *p)
{
	return p->can_reserve;
}

static inline int kvc_pool_reserve(struct kvc_pool *p, uint32_t ns,
				   struct kvcache_handle *h, uint8_t **mem)
{
	return p->ops->reserve ? p->ops->reserve(p, ns, h, mem) : -EOPNOTSUPP;
}

static inline void kvc_pool_discard(struct kvc_pool *p,
				    struct kvcache_handle h)
{
	if (p->ops->discard)
		p->ops->discard(p, h);
}

static inline int kvc_pool_ns_create(struct kvc_pool *p, uint32_t ns,
				     uint32_t uid, uint32_t gid, uint32_t mode)
{
	return p->ops->ns_create(p, ns, uid, gid, mode);
}

static inline void kvc_pool_ns_destroy(struct kvc_pool *p, uint32_t ns)
{
	p->ops->ns_destroy(p, ns);
}

static inline int kvc_pool_client_fd(struct kvc_pool *p)
{
	return p->ops->client_fd(p);
}

static inline int kvc_pool_alloc(struct kvc_pool *p, uint32_t client,
				 uint32_t ns, uint32_t count,
				 struct kvcache_handle *out)
{
	return p->ops->alloc(p, client, ns, count, out);
}

static inline int kvc_pool_seal(struct kvc_pool *p, uint32_t client,
				struct kvcache_handle h, uint32_t payload_len,
				const uint8_t key[KVCACHE_KEY_SIZE])
{
	return p->ops->seal(p, client, h, payload_len, key);
}

static inline int kvc_pool_pin(struct kvc_pool *p, uint32_t client,
			       struct kvcache_handle h)
{
	return p->ops->pin(p, client, h);
}

static inline int kvc_pool_unpin(struct kvc_pool *p, uint32_t client,
				 struct kvcache_handle h)
{
	return p->ops->unpin(p, client, h);
}

static inline void kvc_pool_release(struct kvc_pool *p, uint32_t client)
{
	p->ops->release(p, client);
}

static inline int kvc_pool_fast_fd(struct kvc_pool *p)
{
	return p->ops->fast_fd ? p->ops->fast_fd(p) : -1;
}

static inline int kvc_pool_fast_ns_fd(struct kvc_pool *p, uint32_t ns,
				      bool *made)
{
	*made = false;
	return p->ops->fast_ns_fd ? p->ops->fast_ns_fd(p, ns, made) :
	       -EOPNOTSUPP;
}

static inline void kvc_pool_publish(struct kvc_pool *p,
				    struct kvcache_handle h, uint32_t ns,
				    const uint8_t key[KVCACHE_KEY_SIZE],
				    const uint8_t *parent, uint8_t tiers)
{
	if (p->ops->publish)
		p->ops->publish(p, h, ns, key, parent, tiers);
}

static inline void kvc_pool_set_tiers(struct kvc_pool *p,
				      struct kvcache_handle h, uint8_t tiers)
{
	if (p->ops->set_tiers)
		p->ops->set_tiers(p, h, tiers);
}

static inline void kvc_pool_unpublish(struct kvc_pool *p,
				      struct kvcache_handle h)
{
	if (p->ops->unpublish)
		p->ops->unpublish(p, h);
}

static inline uint32_t kvc_pool_zero_ahead(struct kvc_pool *p, uint32_t max)
{
	return p->ops->zero_ahead(p, max);
}

static inline int kvc_pool_events_fd(const struct kvc_pool *p)
{
	return p->ops->events_fd(p);
}

static inline void kvc_pool_events_read(struct kvc_pool *p,
					void (*cb)(const struct kvc_pool_state *,
						   void *),
					void *arg)
{
	p->ops->events_read(p, cb, arg);
}

#endif /* KVC_POOL_H */
