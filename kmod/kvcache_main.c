// SPDX-License-Identifier: GPL-2.0
/*
 * kvcache.ko: the /dev/kvcache misc device.
 *
 * This file owns module load and unload, the module parameters and the
 * file operations. Where the rest lives:
 *   kvcache_ioctl.c    ioctl dispatch, the size-first argument rules, INFO
 *   kvcache_config.c   geometry and watermark knobs, replacing the pool
 *   kvcache_pool.c     the pool's memory and the block state machine
 *   kvcache_blocks.c   pool ioctls; what an open file holds
 *   kvcache_ns.c       namespaces, permission, the helper role
 *   kvcache_mmap.c     mapping blocks
 *   kvcache_view.c     the pool view: one mapping of the pool per client
 *   kvcache_netlink.c  the "kvcache" generic netlink family
 *   kvcache_sysfs.c    sysfs knobs and counters
 *   kvcache_provider.c device memory providers (see kvcache_p2p.h)
 *   kvcache_bar.c      the PCI driver behind "bar" providers
 *   kvcache_region.c   regions of device memory an open file registered
 *   kvcache_xfer.c     the transfer engine: P2P, bounce, pool <-> file
 *   kvcache_fault.c    fault injection points (debugfs, tests only)
 *
 * Locking rules for the whole module, outermost first:
 *  - dev->config_lock (mutex): pool geometry and watermarks; taken by
 *    sysfs stores and by ioctls that need a consistent geometry.
 *  - mmap_lock, on the mmap paths only.
 *  - dev->pool_sem (per-CPU rwsem): read side around any use of dev->pool,
 *    write side only to replace the pool (inside config_lock). Never held
 *    across a user copy.
 *  - kf->lock (mutex, per open file): the file's pins, writable blocks,
 *    regions and async transfer batches.
 *  - prov->lock (mutex, per provider): its regions and their memory.
 *  - dev->ns_lock (mutex): namespace creation, removal and block counts.
 *  - pool->reap_lock (mutex, kvcache_pool.c): one quarantine reaper.
 *  - block->lock and pool->free_lock (spinlocks, kvcache_pool.c): never
 *    nested in either order, and no code holds two block locks at once.
 *  - kf->inbound_lock (spinlock, kvcache_xfer.c): innermost.
 *  - Per-CPU counters (dev->stats) and dev->open_files (atomic) need no
 *    lock; sysfs sums the per-CPU values when read.
 *
 * Lifetimes: see kvcache.h.
 */
#include <linux/fs.h>
#include <linux/init.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/sizes.h>

#include "compat.h"
#include "kvcache.h"
#include "kvcache_fault.h"
#include "kvcache_p2p.h"

static ulong block_size = SZ_2M;
module_param(block_size, ulong, 0444);
MODULE_PARM_DESC(block_size,
		 "Initial pool block size in bytes, a power of two from 4096 to 67108864 (default 2097152)");

static ulong pool_size = SZ_256M;
module_param(pool_size, ulong, 0444);
MODULE_PARM_DESC(pool_size,
		 "Initial pool size in bytes, a multiple of block_size, at most half of RAM (default 268435456)");

static ushort dev_mode = 0600;
module_param(dev_mode, ushort, 0444);
MODULE_PARM_DESC(dev_mode, "Permission bits of /dev/kvcache (default 0600)");

static struct kvc_dev *kvc_the_dev;

u64 kvc_stat_read(struct kvc_dev *dev, enum kvc_stat s)
{
	u64 sum = 0;
	int cpu;

	for_each_possible_cpu(cpu)
		sum += READ_ONCE(per_cpu_ptr(dev->stats, cpu)->v[s]);
	return sum;
}

static int kvc_open(struct inode *inode, struct file *file)
{
	/* misc_open() pointed private_data at our struct miscdevice. */
	struct kvc_dev *dev = container_of(file->private_data,
					   struct kvc_dev, misc);
	struct kvc_file *kf;

	/*
	 * The node exists a moment before module init has finished (the
	 * providers' sysfs directory hangs off it); nobody may hold a file
	 * that a failing init would free the device under.
	 */
	if (!smp_load_acquire(&dev->live))
		return -ENODEV;

	kf = kzalloc(sizeof(*kf), GFP_KERNEL_ACCOUNT);
	if (!kf)
		return -ENOMEM;
	kvc_file_init(kf, dev, file->f_mode & FMODE_WRITE);
	file->private_data = kf;
	kvc_view_attach(dev, file);
	atomic_inc(&dev->open_files);
	kvc_stat_inc(dev, KVC_STAT_OPENS);
	return stream_open(inode, file);
}

static int kvc_release(struct inode *inode, struct file *file)
{
	struct kvc_file *kf = file->private_data;
	struct kvc_dev *dev = kf->dev;

	kvc_file_release(kf);
	kvc_file_put(kf);
	atomic_dec(&dev->open_files);
	return 0;
}

static const struct file_operations kvc_fops = {
	.owner		= THIS_MODULE,
	.open		= kvc_open,
	.release	= kvc_release,
	.unlocked_ioctl	= kvc_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
	.mmap		= kvc_mmap,
};

static int __init kvc_init(void)
{
	struct kvc_geometry geo = {
		.block_size = block_size,
		.pool_size = pool_size,
	};
	struct kvc_dev *dev;
	int ret;

	if (dev_mode & ~0777) {
		pr_err("kvcache: dev_mode %#o has bits beyond 0777\n", dev_mode);
		return -EINVAL;
	}
	ret = kvc_check_geometry(&geo, kvc_max_pool_bytes());
	if (ret) {
		pr_err("kvcache: invalid geometry block_size=%lu pool_size=%lu (max pool %llu)\n",
		       block_size, pool_size, kvc_max_pool_bytes());
		return ret;
	}

	/* First: the pool below may already be configured to fail. */
	kvc_fault_init();
	dev = kzalloc(sizeof(*dev), GFP_KERNEL);
	if (!dev) {
		kvc_fault_exit();
		return -ENOMEM;
	}
	dev->stats = alloc_percpu(struct kvc_stats);
	if (!dev->stats) {
		ret = -ENOMEM;
		goto err_free;
	}
	mutex_init(&dev->config_lock);
	mutex_init(&dev->ns_lock);
	xa_init(&dev->namespaces);
	xa_init_flags(&dev->regions, XA_FLAGS_ALLOC1);
	dev->geo = geo;
	atomic_set(&dev->open_files, 0);
	ret = percpu_init_rwsem(&dev->pool_sem);
	if (ret)
		goto err_stats;
	ret = kvc_pool_setup(dev);
	if (ret) {
		pr_err("kvcache: cannot allocate a pool of %llu bytes: %d\n",
		       geo.pool_size, ret);
		goto err_sem;
	}
	ret = kvc_view_init(dev);
	if (ret)
		goto err_pool;
	ret = kvc_netlink_register(dev);
	if (ret)
		goto err_view;
	ret = kvc_xfer_init();
	if (ret)
		goto err_netlink;

	/*
	 * The device last: the providers' directory lives under its sysfs
	 * node, so it is registered first, but open() refuses until ->live
	 * says everything below succeeded; a failure here therefore frees
	 * nothing an open file could hold.
	 */
	dev->misc.minor = MISC_DYNAMIC_MINOR;
	dev->misc.name = KVCACHE_DEVICE_NAME;
	dev->misc.fops = &kvc_fops;
	dev->misc.mode = dev_mode;
	dev->misc.groups = kvc_attr_groups;
	ret = misc_register(&dev->misc);
	if (ret)
		goto err_xfer;
	ret = kvc_providers_init(dev);
	if (ret)
		goto err_misc;

	kvc_the_dev = dev;
	/* Release: whoever sees live sees the device fully set up. */
	smp_store_release(&dev->live, true);
	pr_info("kvcache: ABI %d, block_size %llu, pool_size %llu\n",
		KVCACHE_ABI_VERSION, geo.block_size, geo.pool_size);
	return 0;

err_misc:
	misc_deregister(&dev->misc);
err_xfer:
	kvc_xfer_exit();
err_netlink:
	kvc_netlink_unregister();
err_view:
	kvc_view_exit(dev);
err_pool:
	kvc_pool_teardown(dev);
err_sem:
	percpu_free_rwsem(&dev->pool_sem);
err_stats:
	free_percpu(dev->stats);
err_free:
	kfree(dev);
	kvc_fault_exit();
	return ret;
}

static void __exit kvc_exit(void)
{
	struct kvc_dev *dev = kvc_the_dev;

	kvc_providers_exit();
	misc_deregister(&dev->misc);
	kvc_xfer_exit();
	kvc_netlink_unregister();
	kvc_view_exit(dev);
	kvc_pool_teardown(dev);
	kvc_ns_destroy_all(dev);
	xa_destroy(&dev->regions);
	percpu_free_rwsem(&dev->pool_sem);
	mutex_destroy(&dev->ns_lock);
	mutex_destroy(&dev->config_lock);
	free_percpu(dev->stats);
	kfree(dev);
	kvc_fault_exit();
}

module_init(kvc_init);
module_exit(kvc_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kvcache: persistent, shared KV-cache tier for LLM inference");
MODULE_AUTHOR("The kvcache developers");
