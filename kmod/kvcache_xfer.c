// SPDX-License-Identifier: GPL-2.0
/*
 * The transfer engine: one path for every move between a file and memory.
 *
 * An entry moves bytes between a file (a regular file or a block device,
 * opened with O_DIRECT) and either a region of device memory or a pool
 * block. The path is chosen before any I/O, from the topology, never
 * discovered by a failing request:
 *  - P2P: the file's block device queue accepts P2PDMA pages and
 *    pci_p2pdma_distance() from the provider to its disk is non-negative.
 *    The region's pages go straight into a direct-I/O request: the NVMe
 *    controller reads or writes device memory, the CPU copies nothing.
 *  - BOUNCE: anything else (another topology, a file system without a
 *    block device, a region offset the device cannot DMA to, or the
 *    caller asked for it). A pool block is borrowed as a staging buffer:
 *    direct I/O between the file and the block, and the CPU copies
 *    between the block and device memory (memcpy_toio/_fromio: the BAR is
 *    mapped uncached).
 *  - HOST: pool block <-> file, direct I/O into or out of the block's
 *    pages. (kvcached's own spill and promote do not use it: they read
 *    and write the pool through its mapping with io_uring; this path is
 *    for engines and tools that want the kernel to do it.)
 * P2P is chosen only where the file's data is known to live on the one
 * device the decision looked at: a block device, or a file system that
 * has one device only (kvc_fs_single_device()). On a multi-device file
 * system (btrfs, XFS with a realtime device, ...) sb->s_bdev need not be
 * where the blocks are, so such files always bounce.
 *
 * Synchronous batches run in the caller's context. Asynchronous ones are
 * resolved in the caller's context (file descriptors, region handles and
 * every permission: whether the caller is privileged, which blocks it may
 * read) and then run by a worker of an unbound workqueue, under the
 * submitter's credentials (override_creds(), a reference taken at submit)
 * and with the submitter's RLIMIT_FSIZE, so the file system sees the
 * same caller a synchronous batch shows it: set-id bits are dropped on
 * write, quotas and reserved blocks apply, LSMs see the user. Nothing the
 * worker decides depends on `current`. Completion is signalled
 * through an eventfd and collected with KVCACHE_IOC_XFER_REAP. An eventfd,
 * not io_uring's uring_cmd, because: the same ABI then works on every
 * kernel the module supports (uring_cmd's in-kernel interface changed
 * between 6.1 and 6.12), fleets that set io_uring_disabled can still use
 * it, a batch has one result per entry (no room in a CQE), and an
 * io_uring user simply polls or reads the eventfd from its ring.
 *
 * Lifetimes: an entry holds a reference on its file (fget) and its region
 * from submission until it has run. A region's provider cannot take its
 * memory away while the CPU or a P2P request touches it
 * (kvc_provider_begin_io()); the bounce path holds that only around each
 * copy, never across file I/O, so a file system that never answers (a
 * dead NFS server, a FUSE daemon) cannot hold up the provider's removal.
 * A pool block in use is not free, so the pool cannot be replaced under
 * the I/O: dev->pool_sem is taken only to take and give back blocks,
 * never across file I/O (the file system's locks then nest inside
 * nothing of ours).
 *
 * An asynchronous batch has two references (->refs): the file's table
 * (kf->xfers, dropped by the reaper or by release) and the worker. Each
 * also holds a reference on its struct kvc_file (kvc_file_get()) and on
 * the module until the worker is done with it. File release does not
 * wait for the workers: it marks each batch cancelled (the worker stops
 * between chunks and fails what it has not started with -ECANCELED) and
 * drops the table's reference. A process killed with a batch stuck in a
 * hung file system therefore exits at once; the worker finishes (or
 * stays stuck) on its own, and holds the module so it cannot be
 * unloaded under it.
 *
 * Locking: kf->lock guards kf->xfers, kf->nr_xfers and each batch's
 * ->reaping; ->done is written once by the worker (release) and read with
 * acquire; ->cancelled is written once by release. Waiters sleep on
 * kf->xfer_wq. kf->inbound_lock (spinlock, innermost) guards the file's
 * list of ranges being written.
 */
#include <linux/atomic.h>
#include <linux/blkdev.h>
#include <linux/cred.h>
#include <linux/eventfd.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/io.h>
#include <linux/mm.h>
#include <linux/pci.h>
#include <linux/pci-p2pdma.h>
#include <linux/refcount.h>
#include <linux/resource.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/uio.h>
#include <linux/wait_bit.h>
#include <linux/workqueue.h>
#include <kunit/visibility.h>

#include "compat.h"
#include "kvcache.h"
#include "kvcache_fault.h"
#include "kvcache_p2p.h"
#include "kvcache_pool.h"

/* Largest piece handed to the file system in one request. */
#define KVC_IO_CHUNK		SZ_4M
#define KVC_IO_BVECS		(KVC_IO_CHUNK / PAGE_SIZE + 1)

#define KVC_XFER_ENTRY_FLAGS	(KVCACHE_XFER_TO_FILE | KVCACHE_XFER_BLOCK | \
				 KVCACHE_XFER_BOUNCE)

/* What an entry holds from submission until it has run. */
struct kvc_xfer_slot {
	struct file *file;
	struct kvc_region *region;
	bool read_sealed;		/* decided at submit: may read it sealed */
};

/* A batch of entries, synchronous or not. */
struct kvc_xfer {
	struct kvc_file *kf;
	struct work_struct work;
	struct eventfd_ctx *efd;
	const struct cred *cred;	/* async: the submitter's */
	unsigned long fsize_limit;	/* the submitter's RLIMIT_FSIZE */
	refcount_t refs;		/* async: the table and the worker */
	u32 count;
	u32 failed;
	bool async;
	bool done;			/* written once, with release */
	bool cancelled;			/* written once, by file release */
	bool reaping;			/* under kf->lock */
	struct kvcache_xfer_entry *entries;
	struct kvc_xfer_slot *slots;
	struct bio_vec *bv;		/* KVC_IO_BVECS, for the run */
};

static struct workqueue_struct *kvc_xfer_wq;

/*
 * File systems whose every data block lives on sb->s_bdev. Anything else
 * may keep a file's data on another device (btrfs RAID, XFS realtime,
 * f2fs multi-device, fuseblk behind a daemon), so the device the P2P
 * decision looks at could be the wrong one: those files bounce.
 */
static bool kvc_fs_single_device(const struct super_block *sb)
{
	static const char *const names[] = { "ext2", "ext3", "ext4" };
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(names); i++)
		if (!strcmp(sb->s_type->name, names[i]))
			return true;
	return false;
}

/*
 * The block device behind the file's data, or NULL where that is not one
 * known device (network and multi-device file systems).
 */
static struct block_device *kvc_file_bdev(struct file *file)
{
	struct inode *inode = file_inode(file);

	if (S_ISBLK(inode->i_mode))
		return I_BDEV(file->f_mapping->host);
	if (!kvc_fs_single_device(inode->i_sb))
		return NULL;
	return inode->i_sb->s_bdev;
}

/*
 * Stop between chunks? A synchronous batch stops when its caller is
 * killed; an asynchronous one when its file is released (the worker is
 * not the submitter, and a kworker never sees the submitter's signals).
 */
static bool kvc_xfer_cancelled(const struct kvc_xfer *x)
{
	if (x->async)
		return READ_ONCE(x->cancelled);
	return fatal_signal_pending(current);
}

/* Can the provider's memory and the file's device talk directly? */
static bool kvc_p2p_possible(struct kvc_provider *prov,
			     struct block_device *bdev)
{
	if (!bdev || !blk_queue_pci_p2pdma(bdev_get_queue(bdev)))
		return false;
	return pci_p2pdma_distance(prov->pdev, disk_to_dev(bdev->bd_disk),
				   false) >= 0;
}

/*
 * Memory on the far side of a transfer: device memory mapped contiguously
 * at @kaddr, or a pool block's pages (@pages, from byte @off of the block).
 */
struct kvc_mem {
	void *kaddr;
	struct page **pages;
	u64 off;
};

/* bvecs for @len bytes of @mem from byte @pos of it. */
static unsigned int kvc_bvec_fill(struct bio_vec *bv, const struct kvc_mem *mem,
				  u64 pos, size_t len)
{
	unsigned int nr = 0;
	size_t n;

	while (len) {
		if (mem->kaddr) {
			void *p = mem->kaddr + pos;

			bv[nr].bv_page = virt_to_page(p);
			bv[nr].bv_offset = offset_in_page(p);
		} else {
			bv[nr].bv_page = mem->pages[(mem->off + pos) >>
						    PAGE_SHIFT];
			bv[nr].bv_offset = offset_in_page(mem->off + pos);
		}
		n = min_t(size_t, len, PAGE_SIZE - bv[nr].bv_offset);
		bv[nr].bv_len = n;
		nr++;
		pos += n;
		len -= n;
	}
	return nr;
}

/* Direct I/O of one chunk between @file at @pos and @mem from @mpos. */
static ssize_t kvc_file_io(struct file *file, bool to_file, loff_t pos,
			   struct bio_vec *bv, const struct kvc_mem *mem,
			   u64 mpos, size_t len)
{
	struct iov_iter iter;
	ssize_t ret;

	iov_iter_bvec(&iter, to_file ? ITER_SOURCE : ITER_DEST, bv,
		      kvc_bvec_fill(bv, mem, mpos, len), len);
	if (to_file)
		ret = kvc_iter_write(file, &iter, &pos);
	else
		ret = vfs_iter_read(file, &iter, &pos, 0);
	/*
	 * An injected error replaces the result after the request ran, as a
	 * bio or DMA that fails does: what it moved may have arrived anyway,
	 * and the caller must not trust it.
	 */
	if (ret >= 0 && kvc_should_fail(KVC_FAULT_IO, len))
		ret = -EIO;
	return ret;
}

/*
 * Move @len bytes between the file at @pos and @mem by direct I/O, in
 * chunks. Returns the bytes moved (short at end of file), or an error if
 * nothing moved.
 */
static ssize_t kvc_direct_io(struct kvc_xfer *x, struct file *file,
			     bool to_file, loff_t pos,
			     const struct kvc_mem *mem, size_t len)
{
	size_t done = 0, chunk;
	ssize_t n;

	while (done < len) {
		if (kvc_xfer_cancelled(x))
			return done ? done : -EINTR;
		chunk = min_t(size_t, len - done, KVC_IO_CHUNK);
		n = kvc_file_io(file, to_file, pos + done, x->bv, mem, done,
				chunk);
		if (n < 0)
			return done ? done : n;
		done += n;
		if (n < chunk)
			break;
		cond_resched();
	}
	return done;
}

/* CPU copy between a pool block's first @len bytes and device memory. */
static void kvc_copy_block(struct page **pages, void *dev_mem, size_t len,
			   bool to_dev)
{
	void __iomem *io = (void __iomem __force *)dev_mem;
	size_t off, n;

	for (off = 0; off < len; off += n) {
		n = min_t(size_t, len - off, PAGE_SIZE);
		if (to_dev)
			memcpy_toio(io + off, page_address(pages[off >>
								  PAGE_SHIFT]),
				    n);
		else
			memcpy_fromio(page_address(pages[off >> PAGE_SHIFT]),
				      io + off, n);
	}
}

/*
 * The same for a piece of a user region, pinned (@dev, its first byte at
 * @doff in the first page): page by page through the kernel's mapping of
 * each (P2PDMA pages are in the direct map, as pci_alloc_p2pmem()'s are).
 */
static void kvc_copy_block_pages(struct page **pages, struct page **dev,
				 size_t doff, size_t len, bool to_dev)
{
	size_t off, n;
	u64 d;

	for (off = 0; off < len; off += n) {
		d = doff + off;
		n = min_t(size_t, len - off, PAGE_SIZE - offset_in_page(off));
		n = min_t(size_t, n, PAGE_SIZE - offset_in_page(d));
		if (to_dev)
			memcpy_toio((void __iomem __force *)
				    page_address(dev[d >> PAGE_SHIFT]) +
				    offset_in_page(d),
				    page_address(pages[off >> PAGE_SHIFT]) +
				    offset_in_page(off), n);
		else
			memcpy_fromio(page_address(pages[off >> PAGE_SHIFT]) +
				      offset_in_page(off),
				      (void __iomem __force *)
				      page_address(dev[d >> PAGE_SHIFT]) +
				      offset_in_page(d), n);
	}
}

/*
 * CPU copy between a bounce block and a region, @len bytes from byte @roff
 * of the region: only while the provider is live, and holding it only for
 * the copy. The one place transfer data passes through the CPU, so the
 * count it keeps (cpu_copy_bytes) is what a path costs the host's memory
 * bus on any machine, where timings under an emulator say nothing.
 */
static int kvc_bounce_copy(struct kvc_region *region, u64 roff,
			   struct page **pages, size_t len, bool to_dev,
			   struct page **upages)
{
	struct kvc_provider *prov = region->prov;
	long nr = 0;

	/* A user region's pages are pinned first: pinning may fault. */
	if (region->user) {
		nr = kvc_region_pin(region, roff, len, to_dev, upages);
		if (nr < 0)
			return nr;
	}
	if (!kvc_provider_begin_io(prov)) {
		if (nr)
			kvc_region_unpin(upages, nr);
		return -ENODEV;
	}
	/* The provider is live, so the region still has its memory. */
	if (region->user)
		kvc_copy_block_pages(pages, upages,
				     offset_in_page(region->offset + roff), len,
				     to_dev);
	else
		kvc_copy_block(pages, region->kaddr + roff, len, to_dev);
	atomic64_add(len, &prov->cpu_copy_bytes);
	kvc_provider_end_io(prov);
	if (nr)
		kvc_region_unpin(upages, nr);
	return 0;
}

/*
 * Region <-> file through a borrowed pool block. The file I/O runs with
 * no hold on the provider: removal revokes the region between chunks,
 * and the entry then fails with -ENODEV.
 */
static ssize_t kvc_bounce_io(struct kvc_xfer *x, struct file *file,
			     bool to_file, loff_t pos,
			     struct kvc_region *region, u64 roff, size_t len)
{
	struct kvc_dev *dev = x->kf->dev;
	struct kvcache_handle h;
	struct kvc_mem staging = { };
	struct page **upages = NULL;
	struct kvc_pool *pool;
	struct page **pages;
	size_t done = 0, chunk, max;
	ssize_t n = 0;
	u32 ns_id;
	int ret;

	if (region->user) {
		upages = kvmalloc_array(KVC_REGION_PIN_MAX, sizeof(*upages),
					GFP_KERNEL);
		if (!upages)
			return -ENOMEM;
	}
	percpu_down_read(&dev->pool_sem);
	pool = dev->pool;
	ret = kvc_pool_alloc_bounce(pool, x, &h);
	percpu_up_read(&dev->pool_sem);
	if (ret) {
		kvfree(upages);
		return ret;
	}
	/* Not free, so the pool stays as it is until we give it back. */
	pages = kvc_block_pages(pool, h.index);
	staging.pages = pages;
	max = min_t(u64, pool->block_size, KVC_IO_CHUNK);

	while (done < len) {
		if (kvc_xfer_cancelled(x)) {
			n = -EINTR;
			break;
		}
		chunk = min_t(size_t, len - done, max);
		if (to_file) {
			n = kvc_bounce_copy(region, roff + done, pages, chunk,
					    false, upages);
			if (n)
				break;
		}
		n = kvc_file_io(file, to_file, pos + done, x->bv, &staging, 0,
				chunk);
		if (n <= 0)
			break;
		if (!to_file) {
			ret = kvc_bounce_copy(region, roff + done, pages, n,
					      true, upages);
			if (ret) {
				n = ret;
				break;
			}
		}
		done += n;
		if (n < chunk)
			break;
		cond_resched();
	}

	percpu_down_read(&dev->pool_sem);
	WARN_ON(kvc_block_discard(pool, h.index, x, &ns_id));
	percpu_up_read(&dev->pool_sem);
	kvfree(upages);
	/*
	 * A region revoked under the entry (its provider removed between two
	 * chunks) fails it whole: the bytes already moved belong to memory
	 * that is gone, so a short count would report a transfer that did
	 * not happen. Other errors after some progress give the short count,
	 * as read(2) does.
	 */
	if (n < 0 && (!done || n == -ENODEV))
		return n;
	return done;
}

/*
 * Inbound ranges. Two transfers writing the same bytes of a region or
 * block at once would race (the result is either, or a mix), and their
 * DMA mappings would overlap, which the DMA API does not support. Both
 * targets belong to one open file, so each file keeps the ranges its
 * running transfers write, and a transfer into bytes already being
 * written fails with -EBUSY instead. Reading out of memory is not
 * limited: overlapping reads are harmless.
 */
static u64 kvc_xfer_target(const struct kvcache_xfer_entry *e)
{
	if (e->flags & KVCACHE_XFER_BLOCK)
		return BIT_ULL(32) | e->block.index;
	return e->region;
}

/**
 * kvc_inbound_claim() - reserve bytes of a target for one incoming transfer
 * @kf: the file owning the target
 * @ib: the reservation, filled here; kept until kvc_inbound_release()
 * @target: a region handle, or BIT_ULL(32) | a block index
 * @off: first byte
 * @len: bytes, non-zero
 *
 * Return: 0, -EBUSY (overlaps a running transfer into the same target) or
 * -ERANGE (the range wraps around).
 */
int kvc_inbound_claim(struct kvc_file *kf, struct kvc_inbound *ib, u64 target,
		      u64 off, u64 len)
{
	struct kvc_inbound *other;
	int ret = 0;

	if (!len || off > U64_MAX - len)
		return -ERANGE;
	ib->target = target;
	ib->start = off;
	ib->end = off + len;
	spin_lock(&kf->inbound_lock);
	list_for_each_entry(other, &kf->inbound, node) {
		if (other->target == target && other->start < ib->end &&
		    ib->start < other->end) {
			ret = -EBUSY;
			break;
		}
	}
	if (!ret)
		list_add(&ib->node, &kf->inbound);
	spin_unlock(&kf->inbound_lock);
	return ret;
}
EXPORT_SYMBOL_IF_KUNIT(kvc_inbound_claim);

void kvc_inbound_release(struct kvc_file *kf, struct kvc_inbound *ib)
{
	spin_lock(&kf->inbound_lock);
	list_del(&ib->node);
	spin_unlock(&kf->inbound_lock);
}
EXPORT_SYMBOL_IF_KUNIT(kvc_inbound_release);

/*
 * Pool block <-> file. Whether the block may be read sealed was decided
 * at submit, in the submitter's context (@read_sealed).
 */
static ssize_t kvc_xfer_block(struct kvc_xfer *x, struct kvcache_xfer_entry *e,
			      struct file *file, unsigned int align,
			      bool read_sealed)
{
	struct kvc_file *kf = x->kf;
	struct kvc_dev *dev = kf->dev;
	bool to_file = e->flags & KVCACHE_XFER_TO_FILE;
	struct kvc_mem mem = { .off = e->offset };
	struct kvc_inbound ib;
	struct kvc_pool *pool;
	ssize_t ret;

	if (!IS_ALIGNED(e->offset, align))
		return -EINVAL;
	e->path = KVCACHE_PATH_HOST;
	percpu_down_read(&dev->pool_sem);
	pool = dev->pool;
	if (e->offset >= pool->block_size ||
	    e->length > pool->block_size - e->offset)
		ret = -ERANGE;
	else
		ret = kvc_block_io_get(pool, e->block, kf,
				       to_file && read_sealed, e->offset,
				       e->length);
	percpu_up_read(&dev->pool_sem);
	if (ret)
		return ret;
	/*
	 * Only now, with the block known to be the caller's to write, may a
	 * second writer of the same bytes be told -EBUSY: claimed earlier,
	 * a block the caller may not touch would answer -EBUSY instead of
	 * its permission error whenever the caller raced itself.
	 */
	if (!to_file) {
		ret = kvc_inbound_claim(kf, &ib, kvc_xfer_target(e), e->offset,
					e->length);
		if (ret)
			goto put;
	}
	/* The page references keep the block from being sealed or evicted. */
	mem.pages = kvc_block_pages(pool, e->block.index);
	ret = kvc_direct_io(x, file, to_file, e->file_offset, &mem,
			    e->length);
	if (!to_file)
		kvc_inbound_release(kf, &ib);
put:
	kvc_block_io_put(pool, e->block.index, e->offset, e->length);
	return ret;
}

/*
 * P2P between a file and a user region: each chunk's pages are pinned for
 * its request only (the kernel allows no long-term pin of P2PDMA pages),
 * and the provider is held for the request, as for any P2P request.
 */
static ssize_t kvc_user_direct_io(struct kvc_xfer *x, struct file *file,
				  bool to_file, loff_t pos,
				  struct kvc_region *region, u64 roff,
				  size_t len)
{
	struct kvc_mem mem = { };
	size_t done = 0, chunk;
	ssize_t n = 0;
	long nr;

	mem.pages = kvmalloc_array(KVC_REGION_PIN_MAX, sizeof(*mem.pages),
				   GFP_KERNEL);
	if (!mem.pages)
		return -ENOMEM;
	while (done < len) {
		if (kvc_xfer_cancelled(x)) {
			n = -EINTR;
			break;
		}
		chunk = min_t(size_t, len - done, KVC_IO_CHUNK);
		nr = kvc_region_pin(region, roff + done, chunk, !to_file,
				    mem.pages);
		if (nr < 0) {
			n = nr;
			break;
		}
		if (!kvc_provider_begin_io(region->prov)) {
			kvc_region_unpin(mem.pages, nr);
			n = -ENODEV;
			break;
		}
		mem.off = offset_in_page(region->offset + roff + done);
		n = kvc_file_io(file, to_file, pos + done, x->bv, &mem, 0,
				chunk);
		kvc_provider_end_io(region->prov);
		kvc_region_unpin(mem.pages, nr);
		if (n <= 0)
			break;
		done += n;
		if (n < chunk)
			break;
		cond_resched();
	}
	kvfree(mem.pages);
	/* Revoked half-way: as the bounce path, the entry fails whole. */
	if (n < 0 && (!done || n == -ENODEV))
		return n;
	return done;
}

/* Region <-> file, P2P when the topology allows it. */
static ssize_t kvc_xfer_region(struct kvc_xfer *x, struct kvcache_xfer_entry *e,
			       struct file *file, struct kvc_region *region,
			       struct block_device *bdev, unsigned int align)
{
	struct kvc_provider *prov = region->prov;
	bool to_file = e->flags & KVCACHE_XFER_TO_FILE;
	struct kvc_mem mem = { };
	bool p2p;
	ssize_t ret;

	if (e->offset >= region->length ||
	    e->length > region->length - e->offset)
		return -ERANGE;
	p2p = !(e->flags & KVCACHE_XFER_BOUNCE) &&
	      IS_ALIGNED(e->offset, align) && kvc_p2p_possible(prov, bdev);
	e->path = p2p ? KVCACHE_PATH_P2P : KVCACHE_PATH_BOUNCE;
	/* Removed already: fail before borrowing a block or touching the file. */
	if (READ_ONCE(prov->dead))
		return -ENODEV;
	if (!p2p) {
		ret = kvc_bounce_io(x, file, to_file, e->file_offset, region,
				    e->offset, e->length);
		if (ret > 0)
			atomic64_add(ret, &prov->bounce_bytes);
		return ret;
	}
	if (region->user) {
		ret = kvc_user_direct_io(x, file, to_file, e->file_offset,
					 region, e->offset, e->length);
		if (ret > 0)
			atomic64_add(ret, &prov->p2p_bytes);
		return ret;
	}
	/*
	 * P2P: the device memory is the I/O buffer, so the provider is held
	 * across the request. Only block devices and single-device local
	 * file systems get here, whose requests the block layer's timeout
	 * bounds; removal waits for them (kvc_provider_remove()).
	 */
	if (!kvc_provider_begin_io(prov))
		return -ENODEV;
	/* The provider is live, so the region still has its memory. */
	mem.kaddr = region->kaddr + e->offset;
	ret = kvc_direct_io(x, file, to_file, e->file_offset, &mem, e->length);
	if (ret > 0)
		atomic64_add(ret, &prov->p2p_bytes);
	kvc_provider_end_io(prov);
	return ret;
}

/* Run one resolved entry; its result, or a negative errno. */
static ssize_t kvc_xfer_one(struct kvc_xfer *x, struct kvcache_xfer_entry *e,
			    struct kvc_xfer_slot *slot)
{
	struct file *file = slot->file;
	struct inode *inode = file_inode(file);
	bool to_file = e->flags & KVCACHE_XFER_TO_FILE;
	struct kvc_inbound ib;
	struct block_device *bdev;
	unsigned int align;
	loff_t fsize;
	ssize_t ret;

	if (!S_ISREG(inode->i_mode) && !S_ISBLK(inode->i_mode))
		return -EOPNOTSUPP;
	if (!(file->f_mode & (to_file ? FMODE_WRITE : FMODE_READ)))
		return -EBADF;
	if (!(file->f_flags & O_DIRECT))
		return -EINVAL;
	bdev = kvc_file_bdev(file);
	align = bdev ? bdev_logical_block_size(bdev) : SECTOR_SIZE;
	if (!e->length || e->length > KVCACHE_XFER_MAX_LEN ||
	    !IS_ALIGNED(e->file_offset | e->length, align) ||
	    e->file_offset > LLONG_MAX - e->length)
		return -EINVAL;
	/* Reads must lie inside the file; writes may extend a regular file. */
	fsize = S_ISBLK(inode->i_mode) ? bdev_nr_bytes(bdev) :
					 i_size_read(inode);
	if ((!to_file || S_ISBLK(inode->i_mode)) &&
	    e->file_offset + e->length > fsize)
		return -ERANGE;
	/*
	 * The submitter's file size limit, as write(2) would apply it. The
	 * worker of an asynchronous batch has no limit of its own to go by,
	 * and a write cut short there would not be O_DIRECT-aligned: the
	 * entry is refused whole, before any I/O, and no SIGXFSZ is sent.
	 */
	if (to_file && S_ISREG(inode->i_mode) &&
	    x->fsize_limit != RLIM_INFINITY &&
	    e->file_offset + e->length > x->fsize_limit)
		return -EFBIG;

	/* A block's inbound bytes are claimed once its permission is known. */
	if (e->flags & KVCACHE_XFER_BLOCK)
		return kvc_xfer_block(x, e, file, align, slot->read_sealed);
	/*
	 * Bytes coming into a region (the caller's own, resolved at submit):
	 * no other transfer may write them now.
	 */
	if (!to_file) {
		ret = kvc_inbound_claim(x->kf, &ib, kvc_xfer_target(e),
					e->offset, e->length);
		if (ret)
			return ret;
	}
	ret = kvc_xfer_region(x, e, file, slot->region, bdev, align);
	if (!to_file)
		kvc_inbound_release(x->kf, &ib);
	return ret;
}

/* Input checks of one entry that need nothing but the entry. */
static int kvc_xfer_entry_check(const struct kvcache_xfer_entry *e)
{
	bool block = e->flags & KVCACHE_XFER_BLOCK;

	if ((e->flags & ~KVC_XFER_ENTRY_FLAGS) || e->reserved ||
	    e->reserved2 || e->result || e->path)
		return -EINVAL;
	if (block && ((e->flags & KVCACHE_XFER_BOUNCE) || e->region))
		return -EINVAL;
	if (!block && (e->block.index || e->block.gen))
		return -EINVAL;
	return 0;
}

/*
 * In the submitter's context: turn file descriptors and region handles
 * into references, and decide what the caller may read. A sealed block
 * may go to a file when the caller is privileged or holds a pin on it:
 * a pin was granted only with read permission on its namespace, and the
 * generation checked when the I/O starts proves it is still the block
 * that pin was for. An entry that fails here gets its error as result.
 */
static void kvc_xfer_resolve(struct kvc_xfer *x)
{
	bool privileged = kvc_is_privileged(x->kf);
	struct kvcache_xfer_entry *e;
	struct kvc_xfer_slot *slot;
	int err;
	u32 i;

	x->fsize_limit = rlimit(RLIMIT_FSIZE);
	for (i = 0; i < x->count; i++) {
		e = &x->entries[i];
		slot = &x->slots[i];
		err = kvc_xfer_entry_check(e);
		if (!err && (e->flags & KVCACHE_XFER_BLOCK))
			slot->read_sealed = privileged ||
				kvc_file_has_pin(x->kf, e->block.index);
		if (!err && !(e->flags & KVCACHE_XFER_BLOCK))
			slot->region = kvc_region_lookup(x->kf, e->region, &err);
		if (!err) {
			slot->file = fget(e->fd);
			if (!slot->file)
				err = -EBADF;
		}
		e->result = err;
	}
}

/* Run every resolved entry, then drop what they held. */
static void kvc_xfer_run(struct kvc_xfer *x)
{
	struct kvcache_xfer_entry *e;
	struct kvc_xfer_slot *slot;
	struct kvc_provider *prov;
	u32 i;

	for (i = 0; i < x->count; i++) {
		e = &x->entries[i];
		slot = &x->slots[i];
		/* Its file was released: what has not started, does not. */
		if (!e->result && x->async && READ_ONCE(x->cancelled))
			e->result = -ECANCELED;
		if (!e->result)
			e->result = kvc_xfer_one(x, e, slot);
		if (e->result == -EIO)
			kvc_stat_inc(x->kf->dev, KVC_STAT_IO_ERRORS);
		if (e->result < 0) {
			x->failed++;
			prov = slot->region ? slot->region->prov : NULL;
			if (prov)
				atomic64_inc(&prov->errors);
		}
		if (slot->file)
			fput(slot->file);
		if (slot->region)
			kvc_region_put(slot->region);
		slot->file = NULL;
		slot->region = NULL;
	}
}

static void kvc_xfer_free(struct kvc_xfer *x)
{
	if (x->cred)
		put_cred(x->cred);
	if (x->efd)
		eventfd_ctx_put(x->efd);
	kvfree(x->bv);
	kvfree(x->slots);
	kvfree(x->entries);
	kfree(x);
}

static struct kvc_xfer *kvc_xfer_alloc(struct kvc_file *kf, u32 count,
				       u64 uentries)
{
	struct kvc_xfer *x;

	x = kzalloc(sizeof(*x), GFP_KERNEL_ACCOUNT);
	if (!x)
		return ERR_PTR(-ENOMEM);
	x->kf = kf;
	x->count = count;
	x->slots = kvcalloc(count, sizeof(*x->slots), GFP_KERNEL_ACCOUNT);
	x->bv = kvmalloc_array(KVC_IO_BVECS, sizeof(*x->bv),
			       GFP_KERNEL_ACCOUNT);
	x->entries = kvmalloc_array(count, sizeof(*x->entries),
				    GFP_KERNEL_ACCOUNT);
	if (!x->slots || !x->bv || !x->entries) {
		kvc_xfer_free(x);
		return ERR_PTR(-ENOMEM);
	}
	if (copy_from_user(x->entries, u64_to_user_ptr(uentries),
			   count * sizeof(*x->entries))) {
		kvc_xfer_free(x);
		return ERR_PTR(-EFAULT);
	}
	return x;
}

/* Drop one of an asynchronous batch's two references. */
static void kvc_xfer_put(struct kvc_xfer *x)
{
	if (refcount_dec_and_test(&x->refs))
		kvc_xfer_free(x);
}

static void kvc_xfer_work(struct work_struct *work)
{
	struct kvc_xfer *x = container_of(work, struct kvc_xfer, work);
	struct kvc_file *kf = x->kf;
	const struct cred *old;

	/* The file system sees the submitter, not the kworker. */
	old = override_creds(x->cred);
	kvc_xfer_run(x);
	revert_creds(old);
	/* Release: the results above are visible to whoever sees done. */
	smp_store_release(&x->done, true);
	wake_up_all(&kf->xfer_wq);
	/*
	 * After done: whoever reads the eventfd may reap with REAP_NOWAIT at
	 * once. Our reference keeps x, and so x->efd, until the put.
	 */
	if (x->efd)
		kvc_eventfd_signal(x->efd);
	kvc_xfer_put(x);
	/*
	 * The worker's hold on the file and the module, last: module exit
	 * drains the workqueue, so this function's remaining instructions
	 * outlive the module_put().
	 */
	kvc_file_put(kf);
	module_put(THIS_MODULE);
}

static int kvc_xfer_submit(struct kvc_file *kf, struct kvc_xfer *x,
			   s32 eventfd, u64 *id)
{
	u32 xid;
	int ret;

	if (eventfd < -1)
		return -EINVAL;
	if (eventfd >= 0) {
		x->efd = eventfd_ctx_fdget(eventfd);
		if (IS_ERR(x->efd)) {
			ret = PTR_ERR(x->efd);
			x->efd = NULL;
			return ret;
		}
	}
	INIT_WORK(&x->work, kvc_xfer_work);
	x->async = true;
	x->cred = get_current_cred();
	refcount_set(&x->refs, 2);

	mutex_lock(&kf->lock);
	if (kf->nr_xfers >= KVCACHE_XFER_MAX_ASYNC)
		ret = -EBUSY;
	else
		ret = xa_alloc_cyclic(&kf->xfers, &xid, x, xa_limit_32b,
				      &kf->next_xfer, GFP_KERNEL_ACCOUNT);
	if (ret >= 0)
		kf->nr_xfers++;
	mutex_unlock(&kf->lock);
	if (ret < 0)
		return ret;
	*id = xid;
	kvc_xfer_resolve(x);
	/* Held by the worker: the file may be released before it runs. */
	__module_get(THIS_MODULE);
	kvc_file_get(kf);
	queue_work(kvc_xfer_wq, &x->work);
	return 0;
}

int kvc_ioctl_xfer(struct kvc_file *kf, void __user *uarg)
{
	struct kvcache_xfer arg;
	struct kvc_xfer *x;
	int ret;

	ret = kvc_copy_in(&arg, sizeof(arg), KVCACHE_XFER_SIZE_VER1, uarg);
	if (ret)
		return ret;
	ret = kvc_check_unused(arg.flags, KVCACHE_XFER_ASYNC, arg.reserved,
			       sizeof(arg.reserved));
	if (ret)
		return ret;
	if (!arg.count || arg.count > KVCACHE_MAX_BATCH || arg.id ||
	    arg.failed || arg.reserved0 ||
	    (!(arg.flags & KVCACHE_XFER_ASYNC) && arg.eventfd != -1 &&
	     arg.eventfd != 0))
		return -EINVAL;

	x = kvc_xfer_alloc(kf, arg.count, arg.entries);
	if (IS_ERR(x))
		return PTR_ERR(x);

	if (arg.flags & KVCACHE_XFER_ASYNC) {
		ret = kvc_xfer_submit(kf, x, arg.eventfd, &arg.id);
		if (ret) {
			kvc_xfer_free(x);
			return ret;
		}
		/* Queued: it is reaped, or freed when the file goes. */
		return kvc_copy_out(uarg, &arg, sizeof(arg));
	}

	kvc_xfer_resolve(x);
	kvc_xfer_run(x);
	arg.failed = x->failed;
	if (copy_to_user(u64_to_user_ptr(arg.entries), x->entries,
			 arg.count * sizeof(*x->entries)))
		ret = -EFAULT;
	kvc_xfer_free(x);
	return ret ? ret : kvc_copy_out(uarg, &arg, sizeof(arg));
}

static bool kvc_xfer_done(struct kvc_xfer *x)
{
	/* Pairs with the worker's release: its results are visible. */
	return smp_load_acquire(&x->done);
}

int kvc_ioctl_xfer_reap(struct kvc_file *kf, void __user *uarg)
{
	struct kvcache_xfer_reap arg;
	struct kvc_xfer *x;
	int ret;

	ret = kvc_copy_in(&arg, sizeof(arg), KVCACHE_XFER_REAP_SIZE_VER1,
			  uarg);
	if (ret)
		return ret;
	ret = kvc_check_unused(arg.flags, KVCACHE_REAP_NOWAIT, arg.reserved,
			       sizeof(arg.reserved));
	if (ret)
		return ret;
	if (arg.failed || arg.id > U32_MAX)
		return -EINVAL;

	mutex_lock(&kf->lock);
	x = xa_load(&kf->xfers, arg.id);
	if (!x)
		ret = -ENOENT;
	else if (x->reaping)
		ret = -EBUSY;	/* another thread is reaping it */
	else if (arg.count != x->count)
		ret = -EINVAL;
	else
		x->reaping = true;
	mutex_unlock(&kf->lock);
	if (ret)
		return ret;

	if (arg.flags & KVCACHE_REAP_NOWAIT)
		ret = kvc_xfer_done(x) ? 0 : -EAGAIN;
	else
		ret = wait_event_interruptible(kf->xfer_wq, kvc_xfer_done(x));
	if (!ret && copy_to_user(u64_to_user_ptr(arg.entries), x->entries,
				 x->count * sizeof(*x->entries)))
		ret = -EFAULT;

	mutex_lock(&kf->lock);
	if (ret) {
		x->reaping = false;	/* try again later */
	} else {
		xa_erase(&kf->xfers, arg.id);
		kf->nr_xfers--;
	}
	mutex_unlock(&kf->lock);
	if (ret)
		return ret;
	arg.failed = x->failed;
	/* The table's reference; the worker may still be on its way out. */
	kvc_xfer_put(x);
	return kvc_copy_out(uarg, &arg, sizeof(arg));
}

/*
 * The file is going away (its last reference, so no ioctl runs on it):
 * cancel its batches and drop the table's reference on each, without
 * waiting. A worker finishes the entry it is in (or stays in a hung file
 * system) and frees the batch; its own references keep the file and the
 * module until then.
 */
void kvc_xfers_release(struct kvc_file *kf)
{
	struct kvc_xfer *x;
	unsigned long id;

	xa_for_each(&kf->xfers, id, x) {
		xa_erase(&kf->xfers, id);
		WRITE_ONCE(x->cancelled, true);
		kvc_xfer_put(x);
	}
	kf->nr_xfers = 0;
	xa_destroy(&kf->xfers);
}

int kvc_xfer_init(void)
{
	kvc_xfer_wq = alloc_workqueue("kvcache_xfer", WQ_UNBOUND, 0);
	return kvc_xfer_wq ? 0 : -ENOMEM;
}

void kvc_xfer_exit(void)
{
	destroy_workqueue(kvc_xfer_wq);
}
