// SPDX-License-Identifier: GPL-2.0
/*
 * The block pool: pinned host memory cut into blocks, and the block state
 * machine (see kvcache_pool.h for the states).
 *
 * Memory: the pool is an array of order-0 pages. They are allocated in
 * 2 MiB runs (order 9, split so every page has its own refcount and can be
 * inserted into user mappings) wherever the buddy allocator has them, and
 * page by page otherwise; pool/huge_chunks in sysfs says how many runs were
 * had. A block is pages_per_block consecutive entries of the array, so it
 * is physically contiguous when it fits in one run. Kernel pages are never
 * swapped or migrated: the pool is pinned for as long as it exists.
 *
 * Locking:
 *  - block->lock (spinlock) protects one block's state, generation, pin
 *    and mapping counts and metadata. Pin and unpin take only this lock:
 *    there is no pool-wide lock on that path. No code holds two block
 *    locks at once.
 *  - pool->free_lock (spinlock) protects the free and quarantine stacks.
 *    Allocation and freeing take it, never while holding a block lock,
 *    and nothing walks a block's pages under it.
 *  - pool->reap_lock (mutex) makes one reaper at a time: only the reaper
 *    removes entries from the quarantine stack (freeing only appends), so
 *    it may look at a quarantined block's pages without free_lock. It is
 *    taken outside free_lock and never under a block lock.
 *  - The gauges (nr_writable, nr_sealed, nr_pinned) are atomics.
 * The pool itself lives until kvc_pool_destroy(), which the device calls
 * only when every block is free (kvc_pool_idle()) and no one can reach it.
 */
#include <linux/gfp.h>
#include <linux/highmem.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <kunit/visibility.h>

#include "kvcache.h"
#include "kvcache_fault.h"
#include "kvcache_pool.h"

#define KVC_HUGE_ORDER	(21 - PAGE_SHIFT)	/* 2 MiB runs */

/*
 * No __GFP_ZERO: every block is zeroed when it is handed to a writer
 * (kvc_pool_alloc()), and nobody can map or read a free block, so zeroing
 * here would only double the cost of loading the module.
 */
static int kvc_pool_alloc_pages(struct kvc_pool *pool)
{
	const unsigned long run = 1UL << KVC_HUGE_ORDER;
	unsigned long i = 0, j;
	struct page *page;

	while (i < pool->nr_pages) {
		cond_resched();
		page = NULL;
		/*
		 * An injected failure of a run takes the fallback below, as a
		 * fragmented buddy allocator would; one of a single page
		 * fails the pool.
		 */
		if (IS_ALIGNED(i, run) && pool->nr_pages - i >= run &&
		    !kvc_should_fail(KVC_FAULT_PAGE_ALLOC, PAGE_SIZE * run))
			page = alloc_pages(GFP_KERNEL | __GFP_NOWARN |
					   __GFP_NORETRY, KVC_HUGE_ORDER);
		if (page) {
			split_page(page, KVC_HUGE_ORDER);
			for (j = 0; j < run; j++)
				pool->pages[i++] = page + j;
			pool->nr_huge_chunks++;
			continue;
		}
		if (kvc_should_fail(KVC_FAULT_PAGE_ALLOC, PAGE_SIZE))
			return -ENOMEM;
		page = alloc_page(GFP_KERNEL);
		if (!page)
			return -ENOMEM;
		pool->pages[i++] = page;
	}
	return 0;
}

/**
 * kvc_pool_create() - allocate and pin a pool
 * @geo: a geometry kvc_check_geometry() accepted
 *
 * Return: the pool, with every block free, or an ERR_PTR.
 */
struct kvc_pool *kvc_pool_create(const struct kvc_geometry *geo)
{
	struct kvc_pool *pool;
	u32 i;
	int ret = -ENOMEM;

	pool = kzalloc(sizeof(*pool), GFP_KERNEL);
	if (!pool)
		return ERR_PTR(-ENOMEM);
	pool->block_size = geo->block_size;
	pool->nr_blocks = geo->pool_size / geo->block_size;
	pool->pages_per_block = geo->block_size >> PAGE_SHIFT;
	pool->nr_pages = geo->pool_size >> PAGE_SHIFT;
	/* Counted free from the start: destroy checks it on the error path. */
	pool->nr_free = pool->nr_blocks;
	spin_lock_init(&pool->free_lock);
	mutex_init(&pool->reap_lock);

	if (pool->nr_blocks) {
		pool->pages = kvcalloc(pool->nr_pages, sizeof(*pool->pages),
				       GFP_KERNEL);
		pool->blocks = kvcalloc(pool->nr_blocks, sizeof(*pool->blocks),
					GFP_KERNEL);
		pool->free_stack = kvcalloc(pool->nr_blocks,
					    sizeof(*pool->free_stack),
					    GFP_KERNEL);
		pool->quarantine = kvcalloc(pool->nr_blocks,
					    sizeof(*pool->quarantine),
					    GFP_KERNEL);
		if (!pool->pages || !pool->blocks || !pool->free_stack ||
		    !pool->quarantine)
			goto err;
		ret = kvc_pool_alloc_pages(pool);
		if (ret)
			goto err;
	}

	/* Stack the indices so that the first allocation gets block 0. */
	for (i = 0; i < pool->nr_blocks; i++) {
		spin_lock_init(&pool->blocks[i].lock);
		pool->free_stack[i] = pool->nr_blocks - 1 - i;
	}
	return pool;

err:
	kvc_pool_destroy(pool);
	return ERR_PTR(ret);
}
EXPORT_SYMBOL_IF_KUNIT(kvc_pool_create);

void kvc_pool_destroy(struct kvc_pool *pool)
{
	unsigned long i;

	if (!pool)
		return;
	/*
	 * Sealed blocks die with the pool (module unload: no file is open, so
	 * nothing pins or maps them). Writable or pinned ones cannot exist
	 * then. Quarantined pages stay alive for whoever still references
	 * them: __free_page() only drops the pool's share.
	 */
	WARN_ON(atomic_read(&pool->nr_writable) ||
		atomic_read(&pool->nr_pinned));
	if (pool->pages) {
		for (i = 0; i < pool->nr_pages && pool->pages[i]; i++)
			__free_page(pool->pages[i]);
	}
	kvfree(pool->pages);
	kvfree(pool->blocks);
	kvfree(pool->free_stack);
	kvfree(pool->quarantine);
	mutex_destroy(&pool->reap_lock);
	kfree(pool);
}
EXPORT_SYMBOL_IF_KUNIT(kvc_pool_destroy);

u32 kvc_pool_nr_free(struct kvc_pool *pool)
{
	return READ_ONCE(pool->nr_free);
}
EXPORT_SYMBOL_IF_KUNIT(kvc_pool_nr_free);

u32 kvc_pool_nr_quarantined(struct kvc_pool *pool)
{
	return READ_ONCE(pool->nr_quarantined);
}
EXPORT_SYMBOL_IF_KUNIT(kvc_pool_nr_quarantined);

/*
 * Does any page of the block have a reference besides the pool's own? A
 * mapping holds one per page (none are left when this is asked); anything
 * else is a pipe buffer, I/O in flight or a long-term GUP pin.
 */
static bool kvc_block_pages_busy(struct kvc_pool *pool, u32 index)
{
	struct page **pages = kvc_block_pages(pool, index);
	u32 i;

	for (i = 0; i < pool->pages_per_block; i++)
		if (page_count(pages[i]) != 1)
			return true;
	return false;
}

/*
 * Move quarantined blocks whose pages are no longer referenced to FREE,
 * looking at @budget of them at most (from where the last call stopped,
 * so every block gets its turn), or at all of them for @budget 0. A user
 * can park many blocks here (vmsplice the last page of each, then close),
 * so the page walks run under no spinlock, with cond_resched() between
 * blocks; a caller that finds another reaper at work (@wait false) leaves
 * it to that one. Sleeps.
 *
 * Return: blocks moved to the free stack.
 */
static u32 kvc_pool_reap(struct kvc_pool *pool, u32 budget, bool wait)
{
	u32 n, i, idx, moved = 0;

	might_sleep();
	if (!READ_ONCE(pool->nr_quarantined))
		return 0;
	if (wait)
		mutex_lock(&pool->reap_lock);
	else if (!mutex_trylock(&pool->reap_lock))
		return 0;
	n = READ_ONCE(pool->nr_quarantined);
	if (!budget || budget > n)
		budget = n;
	i = pool->reap_next;
	while (budget--) {
		spin_lock(&pool->free_lock);
		if (i >= pool->nr_quarantined)
			i = 0;
		idx = i < pool->nr_quarantined ? pool->quarantine[i] : U32_MAX;
		spin_unlock(&pool->free_lock);
		if (idx == U32_MAX)
			break;
		/*
		 * Slot i keeps idx while we look: only the reaper removes
		 * entries, and freeing appends past the end.
		 */
		if (kvc_block_pages_busy(pool, idx)) {
			i++;
		} else {
			/* FREE all along; only the stack it sits on changes. */
			spin_lock(&pool->free_lock);
			pool->quarantine[i] =
				pool->quarantine[--pool->nr_quarantined];
			pool->free_stack[pool->nr_free++] = idx;
			spin_unlock(&pool->free_lock);
			moved++;
		}
		cond_resched();
	}
	pool->reap_next = i;
	mutex_unlock(&pool->reap_lock);
	return moved;
}

/* Quarantined blocks an allocation looks at before it takes free ones. */
#define KVC_REAP_BUDGET	8

/* Every block free: the pool may be resized or destroyed. */
bool kvc_pool_idle(struct kvc_pool *pool)
{
	bool idle;

	kvc_pool_reap(pool, 0, true);
	spin_lock(&pool->free_lock);
	idle = pool->nr_free == pool->nr_blocks;
	spin_unlock(&pool->free_lock);
	return idle;
}
EXPORT_SYMBOL_IF_KUNIT(kvc_pool_idle);

static void kvc_block_zero(struct kvc_pool *pool, u32 index)
{
	struct page **pages = kvc_block_pages(pool, index);
	u32 i;

	for (i = 0; i < pool->pages_per_block; i++) {
		clear_highpage(pages[i]);
		if (!(i & 511))
			cond_resched();
	}
}

static void kvc_push_free(struct kvc_pool *pool, u32 index, bool quarantine)
{
	spin_lock(&pool->free_lock);
	if (quarantine)
		pool->quarantine[pool->nr_quarantined++] = index;
	else
		pool->free_stack[pool->nr_free++] = index;
	spin_unlock(&pool->free_lock);
}

/*
 * The block goes back to FREE with a new generation. Its namespace id
 * stays: the permission checks judge a free block by its last namespace.
 */
static void kvc_block_free_locked(struct kvc_block *b)
{
	lockdep_assert_held(&b->lock);
	/* Evict unmaps a viewed block from the views first. */
	WARN_ON_ONCE(b->viewed);
	b->state = KVC_BLOCK_FREE;
	b->gen++;
	b->owner = NULL;
	b->payload_len = 0;
	memset(b->key, 0, sizeof(b->key));
}

static int __kvc_pool_alloc(struct kvc_pool *pool, u32 count, u32 ns_id,
			    const void *owner, struct kvcache_handle *out,
			    bool zero)
{
	struct kvc_block *b;
	u32 i, idx;

	if (!count || count > KVCACHE_MAX_BATCH)
		return -EINVAL;

	/*
	 * A little reaping on every allocation keeps the quarantine moving;
	 * all of it only when the free stack alone cannot serve us.
	 */
	kvc_pool_reap(pool, KVC_REAP_BUDGET, false);
	spin_lock(&pool->free_lock);
	if (pool->nr_free < count && READ_ONCE(pool->nr_quarantined)) {
		spin_unlock(&pool->free_lock);
		kvc_pool_reap(pool, 0, true);
		spin_lock(&pool->free_lock);
	}
	if (pool->nr_free < count) {
		spin_unlock(&pool->free_lock);
		return -ENOSPC;
	}
	for (i = 0; i < count; i++)
		out[i].index = pool->free_stack[--pool->nr_free];
	spin_unlock(&pool->free_lock);

	/* Off the free stack and still FREE: nobody else can touch them. */
	for (i = 0; i < count; i++) {
		idx = out[i].index;
		if (zero)
			kvc_block_zero(pool, idx);
		b = &pool->blocks[idx];
		spin_lock(&b->lock);
		WARN_ON(b->state != KVC_BLOCK_FREE || b->pins || b->rmaps ||
			b->wmaps);
		b->state = KVC_BLOCK_WRITABLE;
		b->owner = owner;
		b->ns_id = ns_id;
		out[i].gen = b->gen;
		spin_unlock(&b->lock);
	}
	atomic_add(count, &pool->nr_writable);
	return 0;
}

/**
 * kvc_pool_alloc() - take @count free blocks for a writer
 * @pool: the pool
 * @count: 1..KVCACHE_MAX_BATCH
 * @ns_id: namespace the blocks will belong to
 * @owner: the writer (an open file)
 * @out: @count handles, filled on success
 *
 * All or nothing. The blocks are zeroed before they become WRITABLE, so no
 * byte of an earlier tenant is ever visible to the new writer.
 *
 * Return: 0, -EINVAL (bad count) or -ENOSPC (fewer free blocks).
 */
int kvc_pool_alloc(struct kvc_pool *pool, u32 count, u32 ns_id,
		   const void *owner, struct kvcache_handle *out)
{
	return __kvc_pool_alloc(pool, count, ns_id, owner, out, true);
}
EXPORT_SYMBOL_IF_KUNIT(kvc_pool_alloc);

/**
 * kvc_pool_alloc_bounce() - take a block as a kernel bounce buffer
 * @pool: the pool
 * @owner: the transfer using it; no open file, so nobody can map it
 * @out: the block
 *
 * Not zeroed: the transfer engine only ever copies out bytes it put in.
 * Give it back with kvc_block_discard().
 *
 * Return: 0 or -ENOSPC.
 */
int kvc_pool_alloc_bounce(struct kvc_pool *pool, const void *owner,
			  struct kvcache_handle *out)
{
	return __kvc_pool_alloc(pool, 1, 0, owner, out, false);
}
EXPORT_SYMBOL_IF_KUNIT(kvc_pool_alloc_bounce);

/* Look up a handle's block; NULL for an index beyond the pool. */
static struct kvc_block *kvc_block_get(struct kvc_pool *pool, u32 index)
{
	if (index >= pool->nr_blocks)
		return NULL;
	return &pool->blocks[index];
}

/**
 * kvc_block_seal() - make a writable block immutable and readable by others
 * @pool: the pool
 * @h: the block
 * @owner: must be the block's writer
 * @payload_len: 1..block_size
 * @key: KVCACHE_KEY_SIZE bytes stored with the block
 * @keep_pin: the block is sealed with one pin already on it, in the same
 *            critical section, so no eviction can come in between
 *
 * Ownership first: a block that is not @owner's writable block answers
 * -EPERM whatever its state and generation (free, sealed, another
 * writer's), so sealing guessed handles tells nothing about them.
 *
 * Return: 0; -EINVAL (index out of range, bad length); -EPERM (not this
 * writer's writable block); -ESTALE (an older handle of a block the
 * writer holds now); -EBUSY (still mapped writable, or its pages still
 * referenced: a pipe, O_DIRECT in flight, an io_uring buffer, any of
 * which could still change it).
 */
int kvc_block_seal(struct kvc_pool *pool, struct kvcache_handle h,
		   const void *owner, u32 payload_len, const u8 *key,
		   bool keep_pin)
{
	struct kvc_block *b = kvc_block_get(pool, h.index);
	int ret = 0;

	if (!b || !payload_len || payload_len > pool->block_size)
		return -EINVAL;
	spin_lock(&b->lock);
	if (b->state != KVC_BLOCK_WRITABLE || b->owner != owner)
		ret = -EPERM;
	else if (b->gen != h.gen)
		ret = -ESTALE;
	else if (b->wmaps || kvc_block_pages_busy(pool, h.index))
		ret = -EBUSY;
	if (!ret) {
		memcpy(b->key, key, KVCACHE_KEY_SIZE);
		b->payload_len = payload_len;
		b->owner = NULL;
		b->state = KVC_BLOCK_SEALED;
		/* Writable blocks have no pins and no read-only mappings. */
		if (keep_pin)
			b->pins = 1;
	}
	spin_unlock(&b->lock);
	if (!ret) {
		atomic_dec(&pool->nr_writable);
		atomic_inc(&pool->nr_sealed);
		if (keep_pin)
			atomic_inc(&pool->nr_pinned);
	}
	return ret;
}
EXPORT_SYMBOL_IF_KUNIT(kvc_block_seal);

/**
 * kvc_block_pin() - keep a sealed block from being evicted
 * @pool: the pool
 * @h: the block
 * @may_read: namespace permission check, called under the block lock (must
 *            not sleep); NULL allows everything
 * @arg: passed to @may_read
 *
 * Return: 0; -EINVAL (index out of range); -ESTALE (stale handle, or a
 * block never handed out); -EBUSY (not sealed yet); -EACCES (namespace not
 * readable); -EOVERFLOW (pin count saturated).
 */
int kvc_block_pin(struct kvc_pool *pool, struct kvcache_handle h,
		  bool (*may_read)(u32 ns_id, void *arg), void *arg)
{
	struct kvc_block *b = kvc_block_get(pool, h.index);
	bool first = false;
	int ret = 0;

	if (!b)
		return -EINVAL;
	spin_lock(&b->lock);
	/*
	 * Permission before anything else, so that a block of a namespace
	 * the caller may not read says nothing of its state or generation.
	 * A free block is judged by the namespace of its last life (0, no
	 * namespace, for one never used): -ESTALE for a free block but
	 * -EACCES for a live one would tell a prober which blocks are live.
	 */
	if (may_read && !may_read(b->ns_id, arg))
		ret = -EACCES;
	else if (b->gen != h.gen || b->state == KVC_BLOCK_FREE)
		ret = -ESTALE;
	else if (b->state == KVC_BLOCK_WRITABLE)
		ret = -EBUSY;
	else if (b->pins == U32_MAX)
		ret = -EOVERFLOW;
	else
		first = !b->pins++ && !b->rmaps;
	spin_unlock(&b->lock);
	if (first)
		atomic_inc(&pool->nr_pinned);
	return ret;
}
EXPORT_SYMBOL_IF_KUNIT(kvc_block_pin);

/**
 * kvc_block_unpin() - drop one pin
 * @pool: the pool
 * @h: the block
 *
 * Return: 0; -EINVAL (index out of range, block not pinned); -ESTALE.
 */
int kvc_block_unpin(struct kvc_pool *pool, struct kvcache_handle h)
{
	struct kvc_block *b = kvc_block_get(pool, h.index);
	bool last = false;
	int ret = 0;

	if (!b)
		return -EINVAL;
	spin_lock(&b->lock);
	if (b->gen != h.gen || b->state == KVC_BLOCK_FREE)
		ret = -ESTALE;
	else if (b->state != KVC_BLOCK_SEALED || !b->pins)
		ret = -EINVAL;
	else
		last = !--b->pins && !b->rmaps;
	spin_unlock(&b->lock);
	if (last)
		atomic_dec(&pool->nr_pinned);
	return ret;
}
EXPORT_SYMBOL_IF_KUNIT(kvc_block_unpin);

/* Drop @n pins a closing file held on a block, in one go. */
void kvc_block_unpin_n(struct kvc_pool *pool, u32 index, u32 n)
{
	struct kvc_block *b = kvc_block_get(pool, index);
	bool last;

	if (WARN_ON(!b || !n))
		return;
	spin_lock(&b->lock);
	if (WARN_ON(b->state != KVC_BLOCK_SEALED || b->pins < n))
		n = b->pins;
	b->pins -= n;
	last = n && !b->pins && !b->rmaps;
	spin_unlock(&b->lock);
	if (last)
		atomic_dec(&pool->nr_pinned);
}
EXPORT_SYMBOL_IF_KUNIT(kvc_block_unpin_n);

/**
 * kvc_block_evict() - free a sealed, unpinned block
 * @pool: the pool
 * @h: the block
 * @ns_id: out: the namespace it belonged to
 *
 * A block that may be mapped in a pool view is not freed: its mark is
 * cleared and the caller is told to unmap it from the views and call
 * again. The mark is cleared only while nobody pins the block, and a view
 * maps a block only for a file that pins it, so once the caller has
 * unmapped it, a page still mapped in a view means a later fault, which
 * set the mark again (see kvcache_view.c).
 *
 * Return: 0; KVC_EVICT_ZAP; -EINVAL (index out of range); -ESTALE; -EBUSY
 * (pinned, mapped, not sealed yet, or its pages still referenced
 * elsewhere).
 */
int kvc_block_evict(struct kvc_pool *pool, struct kvcache_handle h,
		    u32 *ns_id)
{
	struct kvc_block *b = kvc_block_get(pool, h.index);
	int ret = 0;

	if (!b)
		return -EINVAL;
	spin_lock(&b->lock);
	if (b->gen != h.gen || b->state == KVC_BLOCK_FREE) {
		ret = -ESTALE;
	} else if (b->state != KVC_BLOCK_SEALED || b->pins || b->rmaps) {
		ret = -EBUSY;
	} else if (b->viewed) {
		b->viewed = false;
		ret = KVC_EVICT_ZAP;
	} else if (kvc_block_pages_busy(pool, h.index)) {
		ret = -EBUSY;
	} else {
		*ns_id = b->ns_id;
		kvc_block_free_locked(b);
	}
	spin_unlock(&b->lock);
	if (ret)
		return ret;
	atomic_dec(&pool->nr_sealed);
	kvc_push_free(pool, h.index, false);
	return 0;
}
EXPORT_SYMBOL_IF_KUNIT(kvc_block_evict);

/**
 * kvc_block_mark_viewed() - note that a pool view maps a block
 * @pool: the pool
 * @index: the block, which the caller's file pins
 *
 * Called before the view inserts the block's pages, with the file's pin
 * held across the insert.
 *
 * Return: false if the block is not sealed (the caller's pin says it is:
 * a bug).
 */
bool kvc_block_mark_viewed(struct kvc_pool *pool, u32 index)
{
	struct kvc_block *b = kvc_block_get(pool, index);
	bool ok;

	if (!b)
		return false;
	spin_lock(&b->lock);
	ok = !WARN_ON_ONCE(b->state != KVC_BLOCK_SEALED || !b->pins);
	if (ok)
		b->viewed = true;
	spin_unlock(&b->lock);
	return ok;
}
EXPORT_SYMBOL_IF_KUNIT(kvc_block_mark_viewed);

/*
 * Free a writable block of @owner. @gen, when given, must be the block's
 * generation: a handle from the caller, which may be stale.
 */
static int kvc_block_discard_gen(struct kvc_pool *pool, u32 index,
				 const u32 *gen, const void *owner,
				 u32 *ns_id)
{
	struct kvc_block *b = kvc_block_get(pool, index);
	bool busy = false;
	int ret = 0;

	if (!b)
		return -EINVAL;
	spin_lock(&b->lock);
	if (b->state != KVC_BLOCK_WRITABLE || b->owner != owner) {
		/* As kvc_block_seal() answers a handle that is not ours. */
		ret = gen ? -EPERM : -EINVAL;
	} else if (gen && b->gen != *gen) {
		ret = -ESTALE;
	} else if (b->wmaps) {
		ret = -EBUSY;
	} else {
		busy = kvc_block_pages_busy(pool, index);
		*ns_id = b->ns_id;
		kvc_block_free_locked(b);
	}
	spin_unlock(&b->lock);
	if (ret)
		return ret;
	atomic_dec(&pool->nr_writable);
	kvc_push_free(pool, index, busy);
	return 0;
}

/**
 * kvc_block_discard() - free a block its writer never sealed
 * @pool: the pool
 * @index: the block
 * @owner: its writer, going away
 * @ns_id: out: the namespace it belonged to
 *
 * Called when the writer's file is released: its half-written blocks go
 * straight back to the pool and are never visible to anyone (parked in
 * quarantine while something still references their pages).
 *
 * Return: 0; -EINVAL when @owner does not hold @index writable; -EBUSY
 * while the block is mapped.
 */
int kvc_block_discard(struct kvc_pool *pool, u32 index, const void *owner,
		      u32 *ns_id)
{
	return kvc_block_discard_gen(pool, index, NULL, owner, ns_id);
}
EXPORT_SYMBOL_IF_KUNIT(kvc_block_discard);

/**
 * kvc_block_give_back() - free a writable block its writer will not seal
 * @pool: the pool
 * @h: the block, as its writer holds it
 * @owner: the writer
 * @ns_id: out: the namespace it belonged to
 *
 * KVCACHE_IOC_DISCARD: as kvc_block_discard(), for a writer that stays
 * (a read into the block failed, or its contents turned out bad). What
 * it wrote is never visible: the block is zeroed before its next use.
 *
 * Return: 0; -EINVAL for an index beyond the pool; -EPERM when @owner
 * does not hold the block writable; -ESTALE for an older generation;
 * -EBUSY while the block is mapped writable.
 */
int kvc_block_give_back(struct kvc_pool *pool, struct kvcache_handle h,
			const void *owner, u32 *ns_id)
{
	return kvc_block_discard_gen(pool, h.index, &h.gen, owner, ns_id);
}
EXPORT_SYMBOL_IF_KUNIT(kvc_block_give_back);

/**
 * kvc_block_map() - account a new user mapping of a block
 * @pool: the pool
 * @index: the block
 * @owner: the file mapping it
 * @want_write: the mapping asks for PROT_WRITE
 *
 * A writable block may be mapped by its writer only, and counts as mapped
 * writable until unmapped (seal waits for that). A sealed block may be
 * mapped read-only, and cannot be evicted while mapped. The caller checks
 * that the file itself holds a pin on a sealed block.
 *
 * Return: 1 for a writable mapping, 0 for a read-only one, -EINVAL (index
 * out of range), -EACCES (not this file's writable block, or PROT_WRITE on
 * a sealed block, or a free block), -EOVERFLOW.
 */
int kvc_block_map(struct kvc_pool *pool, u32 index, const void *owner,
		  bool want_write)
{
	struct kvc_block *b = kvc_block_get(pool, index);
	bool first = false;
	int ret = -EACCES;

	if (!b)
		return -EINVAL;
	spin_lock(&b->lock);
	if (b->state == KVC_BLOCK_WRITABLE && b->owner == owner) {
		ret = b->wmaps == U32_MAX ? -EOVERFLOW : 1;
		if (ret > 0)
			b->wmaps++;
	} else if (b->state == KVC_BLOCK_SEALED && !want_write) {
		ret = b->rmaps == U32_MAX ? -EOVERFLOW : 0;
		if (!ret)
			first = !b->rmaps++ && !b->pins;
	}
	spin_unlock(&b->lock);
	if (first)
		atomic_inc(&pool->nr_pinned);
	return ret;
}
EXPORT_SYMBOL_IF_KUNIT(kvc_block_map);

/*
 * A copy of an accounted mapping (mremap, fork with MADV_DOFORK): the
 * original keeps the block in its state, so this cannot fail.
 */
void kvc_block_map_dup(struct kvc_pool *pool, u32 index, bool writable)
{
	struct kvc_block *b = kvc_block_get(pool, index);

	if (WARN_ON(!b))
		return;
	spin_lock(&b->lock);
	if (writable)
		b->wmaps++;
	else
		b->rmaps++;
	spin_unlock(&b->lock);
}
EXPORT_SYMBOL_IF_KUNIT(kvc_block_map_dup);

void kvc_block_unmap(struct kvc_pool *pool, u32 index, bool writable)
{
	struct kvc_block *b = kvc_block_get(pool, index);
	bool last = false;

	if (WARN_ON(!b))
		return;
	spin_lock(&b->lock);
	if (writable) {
		if (!WARN_ON(!b->wmaps))
			b->wmaps--;
	} else if (!WARN_ON(!b->rmaps)) {
		last = !--b->rmaps && !b->pins;
	}
	spin_unlock(&b->lock);
	if (last)
		atomic_dec(&pool->nr_pinned);
}
EXPORT_SYMBOL_IF_KUNIT(kvc_block_unmap);

/**
 * kvc_block_io_get() - hold a block's pages for kernel I/O
 * @pool: the pool
 * @h: the block
 * @owner: the file doing the I/O
 * @sealed_ok: the I/O only reads the block, and the caller may read it
 *             sealed (it holds a pin, or is the helper)
 * @off: first byte of the block the I/O touches
 * @len: bytes from @off, within the block
 *
 * Takes a reference on every page in the range, so seal and evict see the
 * block busy (-EBUSY) until kvc_block_io_put(): the pages cannot change
 * owner or be frozen under the I/O.
 *
 * A caller that may not read sealed blocks and does not own the block as
 * its writer gets -EACCES whatever the block's state and generation:
 * -ESTALE there would tell another tenant which generations are live.
 *
 * Return: 0; -EINVAL (index out of range); -ESTALE; -EACCES (neither this
 * file's writable block nor, with @sealed_ok, a sealed one).
 */
int kvc_block_io_get(struct kvc_pool *pool, struct kvcache_handle h,
		     const void *owner, bool sealed_ok, u64 off, u64 len)
{
	struct kvc_block *b = kvc_block_get(pool, h.index);
	struct page **pages;
	unsigned long i;
	int ret = -EACCES;

	if (!b || !len || off >= pool->block_size ||
	    len > pool->block_size - off)
		return -EINVAL;
	pages = kvc_block_pages(pool, h.index);
	spin_lock(&b->lock);
	if (!sealed_ok && (b->state != KVC_BLOCK_WRITABLE || b->owner != owner))
		ret = -EACCES;
	else if (b->gen != h.gen || b->state == KVC_BLOCK_FREE)
		ret = -ESTALE;
	else if (b->state == KVC_BLOCK_WRITABLE && b->owner == owner)
		ret = 0;
	else if (b->state == KVC_BLOCK_SEALED && sealed_ok)
		ret = 0;
	if (!ret)
		for (i = off >> PAGE_SHIFT; i <= (off + len - 1) >> PAGE_SHIFT;
		     i++)
			get_page(pages[i]);
	spin_unlock(&b->lock);
	return ret;
}
EXPORT_SYMBOL_IF_KUNIT(kvc_block_io_get);

/* Drop what kvc_block_io_get() took. */
void kvc_block_io_put(struct kvc_pool *pool, u32 index, u64 off, u64 len)
{
	struct page **pages = kvc_block_pages(pool, index);
	unsigned long i;

	for (i = off >> PAGE_SHIFT; i <= (off + len - 1) >> PAGE_SHIFT; i++)
		put_page(pages[i]);
}
EXPORT_SYMBOL_IF_KUNIT(kvc_block_io_put);

/**
 * kvc_block_info() - snapshot a sealed block's metadata
 * @pool: the pool
 * @index: the block
 * @out: filled when the block is sealed
 *
 * Return: true when the block is sealed.
 */
bool kvc_block_info(struct kvc_pool *pool, u32 index,
		    struct kvcache_block_info *out)
{
	struct kvc_block *b = kvc_block_get(pool, index);
	bool sealed;

	if (!b)
		return false;
	spin_lock(&b->lock);
	sealed = b->state == KVC_BLOCK_SEALED;
	if (sealed) {
		memset(out, 0, sizeof(*out));
		out->handle.index = index;
		out->handle.gen = b->gen;
		out->ns_id = b->ns_id;
		out->payload_len = b->payload_len;
		out->pins = b->pins + b->rmaps;
		memcpy(out->key, b->key, KVCACHE_KEY_SIZE);
	}
	spin_unlock(&b->lock);
	return sealed;
}
EXPORT_SYMBOL_IF_KUNIT(kvc_block_info);
