/* SPDX-License-Identifier: GPL-2.0 */
/*
 * libkvcache internals, shared by its files:
 *   conn.c     connections to kvcached: connect, HELLO, request/reply
 *   lib.c      kvcache_open/close, namespaces, keys, counters
 *   blocks.c   lookup, load, store: the two pool modes
 *   async.c    the worker threads behind the _async calls
 *   region.c   GPU regions and loads from G3 into them
 *   fast.c     the fast path: DRAM hits without a round trip
 *
 * Lifetime: a struct kvcache owns its connections, its namespaces, the
 * device descriptor (kernel mode), the pool mappings (memfd mode) and the
 * workers; all live until kvcache_close().
 *
 * Locking: c->lock (a mutex) guards the connection slots' busy flags,
 * dead_peer, the pool mapping fields, the fast index, the touches and the
 * namespace list; c->cond signals a slot
 * coming free. A call takes a slot (conn_get), which gives it the
 * connection alone, drops c->lock, talks to the daemon and copies block
 * data without any lock, and puts the slot back (conn_put). Kernel-side
 * state (pins, mappings, writable blocks) belongs to c->dev, which the
 * kernel locks itself. The async queues have their own lock (async.c).
 */
#ifndef KVC_LIB_PRIV_H
#define KVC_LIB_PRIV_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "libkvcache.h"
#include "proto.h"

/*
 * The library is built with -fvisibility=hidden: only the calls of
 * libkvcache.h are marked for export, the helper modules it links stay
 * private.
 */
#define LIB_EXPORT	__attribute__((visibility("default")))

#define LIB_DEFAULT_CONNS	4
#define LIB_DEFAULT_WORKERS	2
#define LIB_DEFAULT_TIMEOUT	30000
#define LIB_MAX_THREADS		64
/*
 * kvcache_block.conn of a kernel-mode block read through the pool view:
 * the pin is the library's own (on its /dev/kvcache file), given back by
 * kvcache_release().
 */
#define LIB_CONN_KERNEL_PIN	UINT32_MAX

/*
 * memfd mode: writable blocks a connection keeps allocated ahead of its
 * stores, so that storing a block is one STORE, not an ALLOC and a STORE
 * (blocks.c). At most LIB_RESERVE_MAX blocks and LIB_RESERVE_BYTES of
 * pool per connection; the daemon frees them when the connection closes.
 */
#define LIB_RESERVE_MAX		8
#define LIB_RESERVE_BYTES	(4u << 20)

/*
 * The fast path (fast.c): hits go to the daemon in one TOUCH per
 * LIB_TOUCH_MAX, or with the first load LIB_TOUCH_NS after the oldest.
 */
#define LIB_TOUCH_MAX		256
#define LIB_TOUCH_KEYS_MAX	(1u << 30)	/* lookup keys before a TOUCH */
#define LIB_TOUCH_NS		(20 * 1000 * 1000)
/* How often a fast call looks whether the daemon behind it is alive. */
#define LIB_FAST_CHECK_NS	(1000 * 1000)
/* Kernel mode: how often to ask again for a segment not had (FAST_NS). */
#define LIB_FAST_RETRY_NS	(1000 * 1000 * 1000)

/* A block allocated ahead, for namespace ns. */
struct lib_reserved {
	uint32_t ns;
	struct kvcache_handle h;
};

/* One connection to kvcached. */
struct lib_conn {
	int fd;			/* -1 while down */
	bool busy;		/* held by a call (under c->lock) */
	uint32_t seq;		/* of the last request */
	uint32_t epoch;		/* bumped when the connection is dropped */
	uint16_t version;	/* negotiated by HELLO; 0 while down */
	pid_t peer;		/* the daemon's pid (SO_PEERCRED); 0: unknown */
	uint8_t *tx;		/* KVC_PROTO_MSG_MAX bytes */
	uint8_t *rx;		/* KVC_PROTO_MSG_MAX + 1 bytes */
	struct kvc_msg msg;	/* the last reply, pointing into rx */
	/* Allocated ahead on this connection (emptied when it drops: the
	 * daemon freed them). */
	struct lib_reserved reserve[LIB_RESERVE_MAX];
	uint32_t nr_reserved;
};

/* A memfd pool mapping replaced after a daemon restart, kept until close. */
struct lib_old_map {
	struct lib_old_map *next;
	void *addr;
	size_t len;
};

struct lib_async;
struct lib_old_fast;
struct kvc_fastidx;

/* Kernel mode's fast path: one namespace's segment (fast.c). */
struct lib_fast_ns {
	uint32_t ns_id;
	struct kvc_fastidx *f;	/* NULL: none now */
	uint64_t asked;		/* CLOCK_MONOTONIC ns of the last FAST_NS */
};

struct kvcache {
	char socket[108];
	char device[256];
	char g3_dir[4096];
	int timeout_ms;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct lib_conn *conns;
	unsigned int nconns;
	unsigned int next_conn;		/* where conn_get starts looking */
	pid_t dead_peer;		/* a daemon a connection saw die */

	/* From the last HELLO (under lock; the geometry never changes). */
	uint32_t mode;			/* KVC_PROTO_MODE_* */
	uint32_t max_batch;
	uint64_t block_size;
	uint64_t nr_blocks;

	int dev;			/* kernel mode: /dev/kvcache, else -1 */
	bool dev_writable;
	/*
	 * Kernel mode: the pool view (KVCACHE_VIEW_OFFSET), mapped once at
	 * open, or NULL (an older module, or KVCACHE_FAST_PATH=0). A load
	 * copies a pinned block from it instead of mapping the block.
	 */
	uint8_t *view;
	size_t view_len;

	/* memfd mode: the pool (under lock) */
	uint8_t *pool;
	size_t pool_len;
	dev_t pool_dev;
	ino_t pool_ino;
	struct lib_old_map *old_maps;
	/*
	 * A bit per block: written through this mapping before, so its
	 * pages are in our page tables (blocks.c, pool_prefault()); cleared
	 * with a new pool. Allocated with the first pool, freed at close.
	 */
	uint64_t *pool_touched;

	/* The fast path (under lock; fast.c) */
	bool fast_off;			/* KVCACHE_FAST_PATH=0 */
	struct kvc_fastidx *fast;	/* memfd: this pool's daemon's segment */
	struct lib_fast_ns *fast_ns;	/* kernel: a segment per namespace */
	uint32_t nr_fast_ns, cap_fast_ns;
	pid_t fast_pid;			/* the daemon that gave the segments */
	int fast_pidfd;			/* that daemon's pidfd, or -1 */
	uint64_t fast_alive;		/* when a poll last found it alive */
	struct lib_old_fast *old_fast;
	struct kvcache_handle touch[LIB_TOUCH_MAX];
	uint32_t nr_touch;
	uint32_t touch_lookups;		/* lookups answered here */
	uint32_t touch_keys;		/* their keys, all hits */
	uint64_t touch_since;		/* CLOCK_MONOTONIC ns of the oldest */

	struct kvcache_namespace *namespaces;	/* under lock */
	struct lib_async *async;
};

struct kvcache_namespace {
	struct kvcache *c;
	struct kvcache_namespace *next;		/* c->namespaces */
	uint32_t ns_id;
	uint32_t tokens_per_block;
	size_t block_bytes;
	uint8_t seed[KVCACHE_KEY_SIZE];
};

/* conn.c */
int lib_conn_init(struct kvcache *c, unsigned int n);
void lib_conn_fini(struct kvcache *c);
/*
 * Take connection slot want (or any free one when want < 0), connected
 * (reconnecting if it was down). Returns the slot, or NULL with *err set.
 */
struct lib_conn *lib_conn_get(struct kvcache *c, int want, int *err);
void lib_conn_put(struct kvcache *c, struct lib_conn *k);
unsigned int lib_conn_index(const struct kvcache *c,
			    const struct lib_conn *k);
/*
 * Send the request encoded in k->tx (len bytes, or a negative encoder
 * error) and wait for the reply of type want into k->msg. Returns 0, the
 * errno of an ERROR reply, or -ECONNRESET / -ETIMEDOUT / -EPROTO after
 * which the connection is dropped (its pins with it).
 */
int lib_call(struct kvcache *c, struct lib_conn *k, int len, uint16_t want);
/*
 * Send a request that has no reply (TOUCH) without waiting: dropped when
 * the socket is full; any other failure drops k.
 */
void lib_send(struct kvcache *c, struct lib_conn *k, int len);
/* Encoder arguments for k's next request. */
#define LIB_TX(k)	(k)->tx, KVC_PROTO_MSG_MAX, ++(k)->seq

/* The memfd pool's bytes of block index, or NULL (under no lock). */
uint8_t *lib_pool_block(struct kvcache *c, uint32_t index);

/*
 * Kernel mode, version 5: ask for namespace ns_id's segment (FAST_NS) and
 * install it. 0 or -errno (a refusal is no error to the caller's call).
 */
int lib_conn_fast_ns(struct kvcache *c, uint32_t ns_id);

/* blocks.c */
uint32_t lib_batch(const struct kvcache *c);
/* Kernel mode: pin n handles with our file; how many took (a prefix). */
uint32_t lib_kernel_pin(struct kvcache *c, struct kvcache_handle *h,
			uint32_t n);
void lib_kernel_unpin(struct kvcache *c, struct kvcache_handle *h,
		      uint32_t n);

/* fast.c */
void lib_fast_install(struct kvcache *c, int fd, pid_t daemon);
/* Kernel mode: install the segment of namespace ns_id. */
void lib_fast_ns_install(struct kvcache *c, uint32_t ns_id, int fd,
			 pid_t daemon);
void lib_fast_drop_locked(struct kvcache *c);
void lib_fast_fini(struct kvcache *c);
/*
 * Copy the leading keys found in the pool (buf), or in kernel mode hand
 * them out pinned (blocks, as kvcache_load_map()); how many.
 */
size_t lib_fast_load(struct kvcache_namespace *ns, const uint8_t *keys,
		     size_t n, uint8_t *buf, size_t stride,
		     struct kvcache_block *blocks);
/* The leading keys the pool holds (tiers[i] = DRAM); how many. */
size_t lib_fast_lookup(struct kvcache_namespace *ns, const uint8_t *keys,
		       size_t n, uint32_t *tiers);
void lib_touch_flush(struct kvcache *c);

/* async.c */
int lib_async_start(struct kvcache *c, unsigned int workers);
void lib_async_stop(struct kvcache *c);

#endif /* KVC_LIB_PRIV_H */
