/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kvcache.ko internal interfaces shared between the files of kmod/.
 *
 * Object lifetimes:
 *  - struct kvc_dev: one per module, created in module init and freed in
 *    module exit. Every open file holds a module reference (fops owner), so
 *    it outlives every struct kvc_file.
 *  - struct kvc_file: one per open() of /dev/kvcache. Everything a process
 *    holds (pins, writable blocks, GPU regions) hangs off it and is given
 *    back in release(), so close or process death releases it. The struct
 *    itself is reference counted (->refs): the open file holds one, and
 *    each asynchronous transfer batch whose worker has not finished holds
 *    another, so release never waits for a worker stuck in a file system.
 *    The last kvc_file_put() frees it.
 */
#ifndef _KVCACHE_H
#define _KVCACHE_H

#include <linux/atomic.h>
#include <linux/bits.h>
#include <linux/miscdevice.h>
#include <linux/mutex.h>
#include <linux/percpu.h>
#include <linux/percpu-rwsem.h>
#include <linux/rcupdate.h>
#include <linux/refcount.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/types.h>
#include <linux/uidgid.h>
#include <linux/wait.h>
#include <linux/xarray.h>
#include <linux/kvcache.h>

#include "compat.h"

struct kvc_pool;

#define KVC_MIN_BLOCK_SIZE	SZ_4K
#define KVC_MAX_BLOCK_SIZE	SZ_64M
#define KVC_MAX_BLOCKS		BIT(24)	/* fits the handle's index */

/*
 * The KVCACHE_FEAT_* groups this module implements. GPU regions need
 * P2PDMA pages, which Debian's 6.1 kernel, for one, does not build; user
 * regions need FOLL_PCI_P2PDMA too (compat.h).
 */
#define KVC_FEATURES		(KVCACHE_FEAT_POOL | KVCACHE_FEAT_NETLINK | \
				 KVCACHE_FEAT_VIEW | KVCACHE_FEAT_DISCARD | \
				 KVCACHE_FEAT_QUERY_EXACT | \
				 (IS_ENABLED(CONFIG_PCI_P2PDMA) ? \
				  KVCACHE_FEAT_P2P : 0) | \
				 (KVC_HAVE_USER_P2PDMA ? \
				  KVCACHE_FEAT_USER_REGION : 0))

/* Monotonic event counters, per CPU, summed when sysfs reads them. */
enum kvc_stat {
	KVC_STAT_OPENS,
	KVC_STAT_IOCTLS,
	KVC_STAT_IOCTL_ERRORS,
	KVC_STAT_ALLOCS,		/* blocks handed to writers */
	KVC_STAT_ALLOC_FAILURES,	/* allocations refused: no space/memory */
	KVC_STAT_SEALS,
	KVC_STAT_PINS,
	KVC_STAT_UNPINS,
	KVC_STAT_EVICTIONS,
	KVC_STAT_DISCARDS,		/* unsealed blocks freed at close */
	KVC_STAT_EVENTS,		/* netlink pressure events sent */
	KVC_STAT_EVENT_FAILURES,	/* pressure events dropped */
	KVC_STAT_PIN_FAILURES,		/* pins refused: no memory */
	KVC_STAT_IO_ERRORS,		/* transfer entries ended with EIO */
	KVC_STAT_POOL_FAILURES,		/* pools that could not be allocated */
	KVC_STAT_VIEW_FAULTS,		/* blocks mapped into pool views */
	KVC_STAT_VIEW_REFUSED,		/* view faults refused (SIGBUS) */
	KVC_STAT_VIEW_ZAPS,		/* blocks unmapped from views */
	KVC_NR_STATS
};

struct kvc_stats {
	u64 v[KVC_NR_STATS];
};

/* Pool geometry as the admin configured it; see kvcache_config.c. */
struct kvc_geometry {
	u64 block_size;
	u64 pool_size;
};

/* A namespace: who may read and write the blocks that carry its id. */
struct kvc_ns {
	u32 id;
	kuid_t uid;
	kgid_t gid;
	umode_t mode;
	u32 nr_blocks;			/* under dev->ns_lock */
	struct rcu_head rcu;
};

#define KVC_DEV_PRESSURE	0	/* bit in kvc_dev.flags */

struct kvc_dev {
	struct miscdevice misc;
	struct mutex config_lock;	/* geometry and watermarks */
	struct kvc_geometry geo;	/* under config_lock */
	u32 low_wm, high_wm;		/* blocks; written under config_lock */

	struct percpu_rw_semaphore pool_sem;	/* write: swap ->pool */
	struct kvc_pool *pool;		/* under pool_sem */
	struct inode *view_inode;	/* every file's ->f_mapping */

	struct mutex ns_lock;		/* ns create/destroy, nr_blocks */
	struct xarray namespaces;	/* id -> kvc_ns; RCU for readers */
	struct kvc_file *helper;	/* set and cleared with cmpxchg */

	struct xarray regions;		/* handle -> kvc_region, all files */
	u32 next_region;		/* under the owner's kf->lock */

	unsigned long flags;		/* KVC_DEV_* bits */
	bool live;			/* init done: open() may succeed */
	struct kvc_stats __percpu *stats;
	atomic_t open_files;
};

/* What one open file holds; all released in kvc_file_release(). */
struct kvc_file {
	struct kvc_dev *dev;
	refcount_t refs;		/* the open file, and running workers */
	bool writable;			/* opened for writing: may ALLOC */
	struct mutex lock;		/* below, up to xfer_wq */
	struct xarray pins;		/* block index -> pin count (value) */
	struct xarray owned;		/* block index -> writable block */
	struct list_head regions;	/* kvc_region.file_node */
	struct xarray xfers;		/* id -> async batch not yet reaped */
	u32 next_xfer;
	u32 nr_xfers;
	wait_queue_head_t xfer_wq;	/* batches of this file completing */
	spinlock_t inbound_lock;	/* inbound */
	struct list_head inbound;	/* kvc_inbound of running transfers */
};

static inline void kvc_stat_inc(struct kvc_dev *dev, enum kvc_stat s)
{
	this_cpu_inc(dev->stats->v[s]);
}

static inline void kvc_stat_add(struct kvc_dev *dev, enum kvc_stat s, u64 n)
{
	this_cpu_add(dev->stats->v[s], n);
}

u64 kvc_stat_read(struct kvc_dev *dev, enum kvc_stat s);

/* kvcache_config.c: parsing and validation of admin input */
int kvc_parse_size(const char *buf, u64 *out);
int kvc_check_block_size(u64 block_size);
int kvc_check_geometry(const struct kvc_geometry *geo, u64 max_pool);
u64 kvc_max_pool_bytes(void);
enum kvc_geo_field { KVC_GEO_BLOCK_SIZE, KVC_GEO_POOL_SIZE };
int kvc_update_geometry(struct kvc_dev *dev, enum kvc_geo_field field, u64 val);
void kvc_get_geometry(struct kvc_dev *dev, struct kvc_geometry *geo);

/*
 * The input rule every ioctl shares: flags outside @allowed and every
 * reserved byte must be zero.
 */
static inline int kvc_check_unused(u32 flags, u32 allowed,
				   const void *reserved, size_t len)
{
	if ((flags & ~allowed) || memchr_inv(reserved, 0, len))
		return -EINVAL;
	return 0;
}

/* kvcache_ioctl.c: size-first argument handling and the ioctls */
int kvc_copy_in(void *karg, size_t ksize, size_t min_size,
		const void __user *uarg);
int kvc_copy_out(void __user *uarg, void *karg, size_t ksize);
int kvc_info_check(const struct kvcache_info *in);
void kvc_info_fill(struct kvcache_info *info, const struct kvc_geometry *geo);
long kvc_ioctl(struct file *file, unsigned int cmd, unsigned long arg);

/* kvcache_blocks.c: pool ioctls and what a file holds */
void kvc_file_init(struct kvc_file *kf, struct kvc_dev *dev, bool writable);
void kvc_file_release(struct kvc_file *kf);
void kvc_file_get(struct kvc_file *kf);
void kvc_file_put(struct kvc_file *kf);
int kvc_ioctl_alloc(struct kvc_file *kf, void __user *uarg);
int kvc_ioctl_batch(struct kvc_file *kf, void __user *uarg, unsigned int nr);
int kvc_ioctl_query(struct kvc_file *kf, void __user *uarg);
bool kvc_file_has_pin(struct kvc_file *kf, u32 index);

/* kvcache_ns.c: namespaces, the helper role, permission */
bool kvc_is_privileged(struct kvc_file *kf);
bool kvc_ns_may_read(u32 ns_id, void *dev);
int kvc_ns_charge(struct kvc_file *kf, u32 ns_id, u32 count);
void kvc_ns_uncharge(struct kvc_dev *dev, u32 ns_id, u32 count);
int kvc_ioctl_ns(struct kvc_file *kf, void __user *uarg, bool create);
int kvc_ioctl_helper(struct kvc_file *kf, void __user *uarg);
void kvc_ns_destroy_all(struct kvc_dev *dev);
bool kvc_ns_mode_allows(umode_t mode, bool owner, bool group, int mask);

/* kvcache_mmap.c */
int kvc_mmap(struct file *file, struct vm_area_struct *vma);

/* kvcache_view.c: the pool view */
int kvc_view_init(struct kvc_dev *dev);
void kvc_view_exit(struct kvc_dev *dev);
void kvc_view_attach(struct kvc_dev *dev, struct file *file);
int kvc_view_mmap(struct kvc_file *kf, struct vm_area_struct *vma);
void kvc_view_zap(struct kvc_dev *dev, struct kvc_pool *pool, u32 index);

/* kvcache_netlink.c: the "kvcache" generic netlink family */
int kvc_netlink_register(struct kvc_dev *dev);
void kvc_netlink_unregister(void);
void kvc_pressure_check(struct kvc_dev *dev, u32 nr_free, u32 nr_blocks);

/* kvcache_config.c: the pool behind the geometry */
int kvc_pool_setup(struct kvc_dev *dev);
void kvc_pool_teardown(struct kvc_dev *dev);
int kvc_set_watermark(struct kvc_dev *dev, bool high, u32 val);

/* kvcache_sysfs.c */
extern const struct attribute_group *kvc_attr_groups[];

#endif /* _KVCACHE_H */
