/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kvcache.ko internal interfaces shared between the files of kmod/.
 *
 * Object lifetimes:
 *  - struct kvc_dev: one per module, created in module init and freed in
 *    module exit. Every open file holds a module reference (fops owner), so
 *    it outlives every struct kvc_file.
 *  - struct kvc_file: one per open() of /dev/kvcache, freed in release().
 *    Everything a process holds (pins, writable blocks, GPU regions) will
 *    hang off it, so close or process death releases it.
 */
#ifndef _KVCACHE_H
#define _KVCACHE_H

#include <linux/atomic.h>
#include <linux/bits.h>
#include <linux/miscdevice.h>
#include <linux/mutex.h>
#include <linux/percpu.h>
#include <linux/types.h>
#include <linux/kvcache.h>

#define KVC_MIN_BLOCK_SIZE	SZ_4K
#define KVC_MAX_BLOCK_SIZE	SZ_64M
#define KVC_MAX_BLOCKS		BIT(24)	/* fits the handle's index */

/* Monotonic event counters, per CPU, summed when sysfs reads them. */
enum kvc_stat {
	KVC_STAT_OPENS,
	KVC_STAT_IOCTLS,
	KVC_STAT_IOCTL_ERRORS,
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

struct kvc_dev {
	struct miscdevice misc;
	struct mutex config_lock;	/* serialises geometry changes */
	struct kvc_geometry geo;	/* under config_lock */
	struct kvc_stats __percpu *stats;
	atomic_t open_files;
};

struct kvc_file {
	struct kvc_dev *dev;
};

static inline void kvc_stat_inc(struct kvc_dev *dev, enum kvc_stat s)
{
	this_cpu_inc(dev->stats->v[s]);
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

/* kvcache_ioctl.c: size-first argument handling and the ioctls */
int kvc_copy_in(void *karg, size_t ksize, size_t min_size,
		const void __user *uarg);
int kvc_copy_out(void __user *uarg, void *karg, size_t ksize);
int kvc_info_check(const struct kvcache_info *in);
void kvc_info_fill(struct kvcache_info *info, const struct kvc_geometry *geo);
long kvc_ioctl(struct file *file, unsigned int cmd, unsigned long arg);

/* kvcache_sysfs.c */
extern const struct attribute_group *kvc_attr_groups[];

#endif /* _KVCACHE_H */
