/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The block pool: pinned memory cut into fixed-size blocks, and each
 * block's state machine. See kvcache_pool.c for the locking rules.
 *
 *   FREE --alloc--> WRITABLE --seal--> SEALED --evict--> FREE
 *                      |                                  ^
 *                      +---- owner closed (never sealed) -+
 *
 * A block's pages are ordinary pages, so user space can take references
 * to them that outlive its mapping (a pipe after vmsplice, O_DIRECT in
 * flight, an io_uring fixed buffer). Seal and evict refuse (-EBUSY) while
 * any page has a reference besides the pool's; a writer's block freed at
 * close with such references is FREE but parked on the quarantine stack,
 * and goes back to the free stack only once they are gone.
 *
 * A sealed block may also be mapped in pool views (kvcache_view.c), which
 * do not count against eviction: evict asks its caller to unmap the block
 * from them first (KVC_EVICT_ZAP), and the references those mappings hold
 * on the pages make it -EBUSY if any is left.
 *
 * A free block keeps the namespace id of its last life (a block never
 * used has 0, which names no namespace): permission checks that come
 * before the state and generation judge a free block by it, so a caller
 * without read permission gets the same answer for a free block as for
 * a live one.
 *
 * The pool knows nothing about files or namespaces: an owner is an opaque
 * pointer and namespace permission is a callback, so KUnit can drive the
 * state machine directly.
 */
#ifndef _KVCACHE_POOL_H
#define _KVCACHE_POOL_H

#include <linux/mutex.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/kvcache.h>

struct page;
struct kvc_geometry;

enum kvc_block_state {
	KVC_BLOCK_FREE,
	KVC_BLOCK_WRITABLE,
	KVC_BLOCK_SEALED,
};

struct kvc_block {
	spinlock_t lock;	/* everything below */
	u8 state;		/* enum kvc_block_state */
	u32 gen;		/* bumped on every free */
	u32 pins;		/* file pins (SEALED only) */
	u32 rmaps;		/* read-only mappings (SEALED only) */
	u32 wmaps;		/* writable mappings (WRITABLE only) */
	bool viewed;		/* may be mapped in a pool view */
	u32 ns_id;
	u32 payload_len;	/* SEALED only */
	const void *owner;	/* WRITABLE only */
	u8 key[KVCACHE_KEY_SIZE];
};

struct kvc_pool {
	u64 block_size;
	u32 nr_blocks;
	u32 pages_per_block;
	unsigned long nr_pages;
	struct page **pages;		/* nr_pages order-0 pages */
	unsigned long nr_huge_chunks;	/* 2 MiB contiguous runs in pages */
	struct kvc_block *blocks;

	spinlock_t free_lock;		/* the two stacks below */
	u32 *free_stack;
	u32 nr_free;
	u32 *quarantine;		/* freed, pages still referenced */
	u32 nr_quarantined;
	struct mutex reap_lock;		/* one reaper; removes from quarantine */
	u32 reap_next;			/* under reap_lock: where to look next */

	atomic_t nr_writable;
	atomic_t nr_sealed;
	atomic_t nr_pinned;		/* blocks with pins or rmaps > 0 */
};

struct kvc_pool *kvc_pool_create(const struct kvc_geometry *geo);
void kvc_pool_destroy(struct kvc_pool *pool);
u32 kvc_pool_nr_free(struct kvc_pool *pool);
bool kvc_pool_idle(struct kvc_pool *pool);

int kvc_pool_alloc(struct kvc_pool *pool, u32 count, u32 ns_id,
		   const void *owner, struct kvcache_handle *out);
int kvc_pool_alloc_bounce(struct kvc_pool *pool, const void *owner,
			  struct kvcache_handle *out);
int kvc_block_io_get(struct kvc_pool *pool, struct kvcache_handle h,
		     const void *owner, bool sealed_ok, u64 off, u64 len);
void kvc_block_io_put(struct kvc_pool *pool, u32 index, u64 off, u64 len);
int kvc_block_seal(struct kvc_pool *pool, struct kvcache_handle h,
		   const void *owner, u32 payload_len, const u8 *key,
		   bool keep_pin);
int kvc_block_pin(struct kvc_pool *pool, struct kvcache_handle h,
		  bool (*may_read)(u32 ns_id, void *arg), void *arg);
int kvc_block_unpin(struct kvc_pool *pool, struct kvcache_handle h);
void kvc_block_unpin_n(struct kvc_pool *pool, u32 index, u32 n);
/* kvc_block_evict(): unmap the block from the pool views, then call again */
#define KVC_EVICT_ZAP	1
int kvc_block_evict(struct kvc_pool *pool, struct kvcache_handle h,
		    u32 *ns_id);
bool kvc_block_mark_viewed(struct kvc_pool *pool, u32 index);
int kvc_block_discard(struct kvc_pool *pool, u32 index, const void *owner,
		      u32 *ns_id);
int kvc_block_give_back(struct kvc_pool *pool, struct kvcache_handle h,
			const void *owner, u32 *ns_id);
int kvc_block_map(struct kvc_pool *pool, u32 index, const void *owner,
		  bool write);
void kvc_block_map_dup(struct kvc_pool *pool, u32 index, bool writable);
void kvc_block_unmap(struct kvc_pool *pool, u32 index, bool writable);
u32 kvc_pool_nr_quarantined(struct kvc_pool *pool);
bool kvc_block_info(struct kvc_pool *pool, u32 index,
		    struct kvcache_block_info *out);

static inline struct page **kvc_block_pages(struct kvc_pool *pool, u32 index)
{
	return pool->pages + (unsigned long)index * pool->pages_per_block;
}

#endif /* _KVCACHE_POOL_H */
