// SPDX-License-Identifier: GPL-2.0
/*
 * The block pool's ioctls, and what an open file holds.
 *
 * An open file (struct kvc_file) owns its writable blocks (->owned) and
 * its pins (->pins: block index -> count). kvc_file_release() gives all of
 * it back, so a process that dies, even by SIGKILL, leaks nothing: its
 * pins drop and its unsealed blocks go back to the pool without ever
 * becoming visible.
 *
 * A pin count that drops to zero stays in ->pins as a zero value entry:
 * an engine pins and unpins the same blocks over and over, and keeping
 * the slot makes that cycle free of allocations. At most one entry per
 * block the file ever pinned (or tried to seal with KEEP_PIN, which makes
 * the entry before sealing), freed with the file, and charged (like the
 * file itself) to the memory cgroup of the process that made it.
 *
 * Locking, outermost first:
 *  - mmap_lock (only on the mmap and munmap paths, see kvcache_mmap.c)
 *  - dev->pool_sem, read side: held across the work on the pool so the
 *    pool cannot be replaced under it. Never held across a user copy:
 *    arguments are copied in before taking it and results copied out after
 *    (a fault would take mmap_lock inside it, the wrong way round).
 *  - kf->lock (mutex, per file): ->pins and ->owned
 *  - dev->ns_lock (mutex): namespace block counts
 *  - block->lock, then pool->free_lock (spinlocks, in kvcache_pool.c)
 * The pin and unpin paths take the read side of a per-CPU rwsem, the
 * file's own mutex and one block's spinlock: no lock shared by all callers.
 */
#include <linux/capability.h>
#include <linux/mm.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/uaccess.h>

#include "kvcache.h"
#include "kvcache_fault.h"
#include "kvcache_p2p.h"
#include "kvcache_pool.h"

void kvc_file_init(struct kvc_file *kf, struct kvc_dev *dev, bool writable)
{
	kf->dev = dev;
	refcount_set(&kf->refs, 1);
	kf->writable = writable;
	mutex_init(&kf->lock);
	xa_init(&kf->pins);
	xa_init(&kf->owned);
	INIT_LIST_HEAD(&kf->regions);
	xa_init_flags(&kf->xfers, XA_FLAGS_ALLOC1);
	init_waitqueue_head(&kf->xfer_wq);
	spin_lock_init(&kf->inbound_lock);
	INIT_LIST_HEAD(&kf->inbound);
}

bool kvc_file_has_pin(struct kvc_file *kf, u32 index)
{
	return xa_to_value(xa_load(&kf->pins, index)) > 0;
}

void kvc_file_get(struct kvc_file *kf)
{
	refcount_inc(&kf->refs);
}

/* The last reference: nothing can reach the file any more. */
void kvc_file_put(struct kvc_file *kf)
{
	if (!refcount_dec_and_test(&kf->refs))
		return;
	mutex_destroy(&kf->lock);
	kfree(kf);
}

/*
 * The open file is going away: give back everything it holds. Workers of
 * its transfer batches may still be running (kvc_xfers_release() cancels
 * them without waiting); blocks they use keep their page references, so
 * a discarded block waits in quarantine and a sealed one cannot be
 * evicted until they are done.
 */
void kvc_file_release(struct kvc_file *kf)
{
	struct kvc_dev *dev = kf->dev;
	struct kvc_pool *pool;
	unsigned long index;
	void *entry;
	u32 ns_id, free, nblocks;
	u64 discarded = 0;

	/* Transfers first: they use the regions and blocks released below. */
	kvc_xfers_release(kf);
	kvc_regions_release(kf);

	percpu_down_read(&dev->pool_sem);
	pool = dev->pool;
	xa_for_each(&kf->owned, index, entry) {
		if (!kvc_block_discard(pool, index, kf, &ns_id)) {
			kvc_ns_uncharge(dev, ns_id, 1);
			discarded++;
		}
		cond_resched();
	}
	xa_for_each(&kf->pins, index, entry) {
		if (xa_to_value(entry))
			kvc_block_unpin_n(pool, index, xa_to_value(entry));
		cond_resched();
	}
	free = kvc_pool_nr_free(pool);
	nblocks = pool->nr_blocks;
	percpu_up_read(&dev->pool_sem);

	xa_destroy(&kf->owned);
	xa_destroy(&kf->pins);
	cmpxchg(&dev->helper, kf, NULL);
	kvc_stat_add(dev, KVC_STAT_DISCARDS, discarded);
	if (discarded)
		kvc_pressure_check(dev, free, nblocks);
}

/*
 * Room on the stack for a small batch's entries: an engine pins and
 * unpins one block or a few per call, and an allocation per call (with
 * its KASAN and kmemleak bookkeeping on debug kernels) would cost more
 * than the pins.
 */
#define KVC_SMALL_BATCH_BYTES	128

/*
 * Copy a batch's entry array in: into @small when it fits, else into
 * memory the caller kvfree()s (kvc_entries_free()).
 */
static void *kvc_entries_in(u64 uptr, u32 count, size_t esize, void *small)
{
	size_t len = (size_t)count * esize;

	if (!count || count > KVCACHE_MAX_BATCH)
		return ERR_PTR(-EINVAL);
	if (len <= KVC_SMALL_BATCH_BYTES)
		return copy_from_user(small, u64_to_user_ptr(uptr), len) ?
		       ERR_PTR(-EFAULT) : small;
	return vmemdup_user(u64_to_user_ptr(uptr), len);
}

static void kvc_entries_free(void *entries, void *small)
{
	if (entries != small)
		kvfree(entries);
}

/* KVCACHE_IOC_ALLOC */
int kvc_ioctl_alloc(struct kvc_file *kf, void __user *uarg)
{
	struct kvc_dev *dev = kf->dev;
	struct kvcache_handle *h;
	struct kvcache_alloc arg;
	struct kvc_pool *pool;
	u32 i, free = 0, nr = 0, ns_id;
	int ret;

	ret = kvc_copy_in(&arg, sizeof(arg), KVCACHE_ALLOC_SIZE_VER1, uarg);
	if (ret)
		return ret;
	if (kvc_check_unused(arg.flags, 0, arg.reserved, sizeof(arg.reserved)))
		return -EINVAL;
	if (!arg.count || arg.count > KVCACHE_MAX_BATCH)
		return -EINVAL;
	if (!kf->writable)
		return -EBADF;
	h = kvcalloc(arg.count, sizeof(*h), GFP_KERNEL);
	if (!h)
		return -ENOMEM;
	ret = kvc_ns_charge(kf, arg.ns_id, arg.count);
	if (ret)
		goto out_free;

	percpu_down_read(&dev->pool_sem);
	pool = dev->pool;
	mutex_lock(&kf->lock);
	ret = kvc_pool_alloc(pool, arg.count, arg.ns_id, kf, h);
	for (i = 0; !ret && i < arg.count; i++) {
		if (kvc_should_fail(KVC_FAULT_BLOCK_ALLOC, pool->block_size))
			ret = -ENOMEM;
		else
			ret = xa_err(xa_store(&kf->owned, h[i].index,
					      xa_mk_value(1),
					      GFP_KERNEL_ACCOUNT));
	}
	if (ret && i) {
		/* No memory for the bookkeeping: give every block back. */
		for (i = 0; i < arg.count; i++) {
			xa_erase(&kf->owned, h[i].index);
			WARN_ON(kvc_block_discard(pool, h[i].index, kf, &ns_id));
		}
	}
	mutex_unlock(&kf->lock);
	free = kvc_pool_nr_free(pool);
	nr = pool->nr_blocks;
	percpu_up_read(&dev->pool_sem);

	if (ret) {
		kvc_ns_uncharge(dev, arg.ns_id, arg.count);
		if (ret == -ENOSPC || ret == -ENOMEM)
			kvc_stat_inc(dev, KVC_STAT_ALLOC_FAILURES);
		goto out_free;
	}
	kvc_stat_add(dev, KVC_STAT_ALLOCS, arg.count);
	kvc_pressure_check(dev, free, nr);

	if (copy_to_user(u64_to_user_ptr(arg.handles), h,
			 arg.count * sizeof(*h)) ||
	    kvc_copy_out(uarg, &arg, sizeof(arg))) {
		/*
		 * The caller cannot know its handles: take the blocks back.
		 * The locks were dropped for the copy, so another thread of
		 * this file may have guessed a handle and mapped or sealed
		 * the block meanwhile; such a block stays where it is (sealed,
		 * or owned by the file until it is closed).
		 */
		percpu_down_read(&dev->pool_sem);
		mutex_lock(&kf->lock);
		for (i = 0; i < arg.count; i++) {
			if (kvc_block_discard(dev->pool, h[i].index, kf, &ns_id))
				continue;
			xa_erase(&kf->owned, h[i].index);
			kvc_ns_uncharge(dev, ns_id, 1);
		}
		mutex_unlock(&kf->lock);
		percpu_up_read(&dev->pool_sem);
		ret = -EFAULT;
	}
out_free:
	kvfree(h);
	return ret;
}

/*
 * The per-entry work of the batches. The caller holds kf->lock for the
 * whole batch (one lock round trip per batch, not per handle) and has
 * decided once whether namespace permission must be checked.
 */

/*
 * Make sure the file's pin table has an entry for block @index, so that
 * counting a pin there afterwards allocates nothing and cannot fail. The
 * first pin of a block by a file allocates it (-ENOMEM: counted, and the
 * fail_pin injection point).
 */
static int kvc_file_pin_slot(struct kvc_file *kf, u32 index)
{
	int ret;

	lockdep_assert_held(&kf->lock);
	if (xa_load(&kf->pins, index))
		return 0;
	if (kvc_should_fail(KVC_FAULT_PIN, 1))
		ret = -ENOMEM;
	else
		ret = xa_insert(&kf->pins, index, xa_mk_value(0),
				GFP_KERNEL_ACCOUNT);
	if (ret)
		kvc_stat_inc(kf->dev, KVC_STAT_PIN_FAILURES);
	return ret;
}

static int kvc_file_pin(struct kvc_file *kf, struct kvc_pool *pool,
			struct kvcache_handle h,
			bool (*may_read)(u32 ns_id, void *arg))
{
	unsigned long n;
	int ret;

	lockdep_assert_held(&kf->lock);
	ret = kvc_block_pin(pool, h, may_read, kf->dev);
	if (ret)
		return ret;
	ret = kvc_file_pin_slot(kf, h.index);
	if (ret) {
		WARN_ON(kvc_block_unpin(pool, h));
		return ret;
	}
	n = xa_to_value(xa_load(&kf->pins, h.index));
	/* Overwriting a present entry allocates nothing and cannot fail. */
	xa_store(&kf->pins, h.index, xa_mk_value(n + 1), GFP_KERNEL);
	return 0;
}

static int kvc_file_unpin(struct kvc_file *kf, struct kvc_pool *pool,
			  struct kvcache_handle h)
{
	unsigned long n;
	int ret;

	lockdep_assert_held(&kf->lock);
	if (h.index >= pool->nr_blocks)
		return -EINVAL;
	n = xa_to_value(xa_load(&kf->pins, h.index));
	if (!n)
		return -EINVAL;		/* not pinned by this file */
	ret = kvc_block_unpin(pool, h);
	if (ret)
		return ret;
	/* Overwriting a present entry allocates nothing and cannot fail. */
	xa_store(&kf->pins, h.index, xa_mk_value(n - 1), GFP_KERNEL);
	return 0;
}

static int kvc_file_seal(struct kvc_file *kf, struct kvc_pool *pool,
			 const struct kvcache_seal_entry *e, bool keep_pin)
{
	unsigned long n;
	int ret;

	lockdep_assert_held(&kf->lock);
	if (e->reserved)
		return -EINVAL;
	/*
	 * The pin table entry first: once sealed, the block cannot go back,
	 * and a pin that then failed would report an entry as not done that
	 * was sealed. An index beyond the pool fails the seal below.
	 */
	if (keep_pin && e->handle.index < pool->nr_blocks) {
		ret = kvc_file_pin_slot(kf, e->handle.index);
		if (ret)
			return ret;
	}
	/*
	 * With KEEP_PIN the block is sealed already pinned, under its lock:
	 * an EVICT cannot slip in between (the writer may read back what it
	 * wrote, whatever the namespace's mode).
	 */
	ret = kvc_block_seal(pool, e->handle, kf, e->payload_len, e->key,
			     keep_pin);
	if (ret)
		return ret;
	xa_erase(&kf->owned, e->handle.index);
	if (keep_pin) {
		n = xa_to_value(xa_load(&kf->pins, e->handle.index));
		/* The slot exists: overwriting it cannot fail. */
		xa_store(&kf->pins, e->handle.index, xa_mk_value(n + 1),
			 GFP_KERNEL);
	}
	return 0;
}

/*
 * A block that pool views may map is unmapped from them and tried again.
 * The zap clears what the views had; a second KVC_EVICT_ZAP means a new
 * fault since, which set the mark again, so the block is busy: zap once
 * more so the mark cleared by that second try does not hide a mapping.
 */
static int kvc_file_evict(struct kvc_file *kf, struct kvc_pool *pool,
			  struct kvcache_handle h, u32 *evicted_ns)
{
	int ret, try;

	for (try = 0; try < 2; try++) {
		ret = kvc_block_evict(pool, h, evicted_ns);
		if (ret != KVC_EVICT_ZAP)
			return ret;
		kvc_view_zap(kf->dev, pool, h.index);
		kvc_stat_inc(kf->dev, KVC_STAT_VIEW_ZAPS);
	}
	return -EBUSY;
}

/*
 * A writable block the file gives back unsealed (KVCACHE_IOC_DISCARD):
 * as at close, it was never visible and is zeroed before its next use.
 */
static int kvc_file_discard(struct kvc_file *kf, struct kvc_pool *pool,
			    struct kvcache_handle h, u32 *ns_id)
{
	int ret;

	lockdep_assert_held(&kf->lock);
	ret = kvc_block_give_back(pool, h, kf, ns_id);
	if (ret)
		return ret;
	xa_erase(&kf->owned, h.index);
	return 0;
}

static int kvc_batch_one(struct kvc_file *kf, struct kvc_pool *pool,
			 unsigned int nr, const void *entries, u32 i,
			 u32 flags, bool privileged, u32 *evicted_ns)
{
	const struct kvcache_handle *h = entries;

	switch (nr) {
	case _IOC_NR(KVCACHE_IOC_SEAL):
		return kvc_file_seal(kf, pool,
				     (const struct kvcache_seal_entry *)entries + i,
				     flags & KVCACHE_SEAL_KEEP_PIN);
	case _IOC_NR(KVCACHE_IOC_PIN):
		return kvc_file_pin(kf, pool, h[i],
				    privileged ? NULL : kvc_ns_may_read);
	case _IOC_NR(KVCACHE_IOC_UNPIN):
		return kvc_file_unpin(kf, pool, h[i]);
	case _IOC_NR(KVCACHE_IOC_EVICT):
		return kvc_file_evict(kf, pool, h[i], evicted_ns);
	case _IOC_NR(KVCACHE_IOC_DISCARD):
		return kvc_file_discard(kf, pool, h[i], evicted_ns);
	}
	return -ENOTTY;
}

static const enum kvc_stat kvc_batch_stat[] = {
	[_IOC_NR(KVCACHE_IOC_SEAL)] = KVC_STAT_SEALS,
	[_IOC_NR(KVCACHE_IOC_PIN)] = KVC_STAT_PINS,
	[_IOC_NR(KVCACHE_IOC_UNPIN)] = KVC_STAT_UNPINS,
	[_IOC_NR(KVCACHE_IOC_EVICT)] = KVC_STAT_EVICTIONS,
	[_IOC_NR(KVCACHE_IOC_DISCARD)] = KVC_STAT_DISCARDS,
};

/*
 * KVCACHE_IOC_SEAL, _PIN, _UNPIN, _EVICT and _DISCARD: in order, stop at
 * the first error
 */
int kvc_ioctl_batch(struct kvc_file *kf, void __user *uarg, unsigned int nr)
{
	struct kvc_dev *dev = kf->dev;
	struct kvcache_batch arg;
	struct kvc_pool *pool;
	u32 i, ns_id, free, nblocks;
	u32 allowed = nr == _IOC_NR(KVCACHE_IOC_SEAL) ? KVCACHE_SEAL_KEEP_PIN : 0;
	size_t esize = nr == _IOC_NR(KVCACHE_IOC_SEAL) ?
		       sizeof(struct kvcache_seal_entry) :
		       sizeof(struct kvcache_handle);
	bool evict = nr == _IOC_NR(KVCACHE_IOC_EVICT), privileged;
	bool discard = nr == _IOC_NR(KVCACHE_IOC_DISCARD);
	u64 small[KVC_SMALL_BATCH_BYTES / sizeof(u64)];
	void *entries;
	int ret, out;

	ret = kvc_copy_in(&arg, sizeof(arg), KVCACHE_BATCH_SIZE_VER1, uarg);
	if (ret)
		return ret;
	if (arg.done || kvc_check_unused(arg.flags, allowed, arg.reserved,
					 sizeof(arg.reserved)))
		return -EINVAL;
	privileged = kvc_is_privileged(kf);
	if (evict && !privileged)
		return -EPERM;
	/*
	 * A file opened read-only owns no writable block (ALLOC needs
	 * FMODE_WRITE), so it has nothing to seal or give back: one answer
	 * for every handle, before any is looked at.
	 */
	if ((nr == _IOC_NR(KVCACHE_IOC_SEAL) || discard) && !kf->writable)
		return -EBADF;
	entries = kvc_entries_in(arg.entries, arg.count, esize, small);
	if (IS_ERR(entries))
		return PTR_ERR(entries);

	percpu_down_read(&dev->pool_sem);
	pool = dev->pool;
	/* Evict touches no per-file state; the others hold the file's lock. */
	if (!evict)
		mutex_lock(&kf->lock);
	for (i = 0, ret = 0; i < arg.count; i++) {
		ret = kvc_batch_one(kf, pool, nr, entries, i, arg.flags,
				    privileged, &ns_id);
		if (ret)
			break;
		if (evict || discard)
			kvc_ns_uncharge(dev, ns_id, 1);
		if (!(i & 255))
			cond_resched();
	}
	if (!evict)
		mutex_unlock(&kf->lock);
	free = kvc_pool_nr_free(pool);
	nblocks = pool->nr_blocks;
	percpu_up_read(&dev->pool_sem);
	kvc_entries_free(entries, small);

	kvc_stat_add(dev, kvc_batch_stat[nr], i);
	if (evict && i)
		kvc_pressure_check(dev, free, nblocks);

	arg.done = i;
	out = kvc_copy_out(uarg, &arg, sizeof(arg));
	return ret ? ret : out;
}

/*
 * KVCACHE_IOC_QUERY. Without flags it walks from start to the next sealed
 * blocks, as far as the pool goes: a caller who asks about one index
 * (kvcached checking a client's handle) would pay for, and could time,
 * the distance to the next sealed block of any namespace. With
 * KVCACHE_QUERY_EXACT it looks at count indexes from start and no others.
 */
int kvc_ioctl_query(struct kvc_file *kf, void __user *uarg)
{
	struct kvc_dev *dev = kf->dev;
	struct kvcache_block_info *out;
	struct kvcache_query arg;
	struct kvc_pool *pool;
	bool all = kvc_is_privileged(kf);
	bool exact;
	u32 i, end, n = 0;
	int ret;

	ret = kvc_copy_in(&arg, sizeof(arg), KVCACHE_QUERY_SIZE_VER1, uarg);
	if (ret)
		return ret;
	if (arg.next || kvc_check_unused(arg.flags, KVCACHE_QUERY_EXACT,
					 arg.reserved, sizeof(arg.reserved)))
		return -EINVAL;
	if (!arg.count || arg.count > KVCACHE_MAX_BATCH ||
	    arg.ns_id > KVCACHE_NS_MAX)
		return -EINVAL;
	exact = arg.flags & KVCACHE_QUERY_EXACT;
	out = kvcalloc(arg.count, sizeof(*out), GFP_KERNEL);
	if (!out)
		return -ENOMEM;

	percpu_down_read(&dev->pool_sem);
	pool = dev->pool;
	end = pool->nr_blocks;
	/* start + count fits a u64; the pool's size fits a u32. */
	if (exact && (u64)arg.start + arg.count < end)
		end = arg.start + arg.count;
	for (i = arg.start; i < end && n < arg.count; i++) {
		if (!(i & 1023))
			cond_resched();
		if (!kvc_block_info(pool, i, &out[n]))
			continue;
		if (arg.ns_id != KVCACHE_NS_ANY && out[n].ns_id != arg.ns_id)
			continue;
		if (!all && !kvc_ns_may_read(out[n].ns_id, dev))
			continue;
		n++;
	}
	arg.next = max(i, arg.start);
	if (arg.next > pool->nr_blocks)
		arg.next = pool->nr_blocks;
	percpu_up_read(&dev->pool_sem);

	arg.count = n;
	ret = 0;
	if (n && copy_to_user(u64_to_user_ptr(arg.entries), out,
			      n * sizeof(*out)))
		ret = -EFAULT;
	if (!ret)
		ret = kvc_copy_out(uarg, &arg, sizeof(arg));
	kvfree(out);
	return ret;
}
