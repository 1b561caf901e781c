// SPDX-License-Identifier: GPL-2.0
/*
 * sysfs knobs and counters under /sys/class/misc/kvcache/.
 *
 *   abi_version, features       what the module offers (read-only)
 *   pool/block_size, pool_size  geometry knobs (root may write)
 *   pool/low_watermark, high_watermark   pressure event levels (root)
 *   pool/nr_blocks, max_pool_size, huge_chunks
 *   pool/free_blocks, writable_blocks, sealed_blocks, pinned_blocks,
 *   pool/quarantined_blocks
 *   stats/...                   counters (read-only)
 *
 * Documentation/ABI/testing/sysfs-kvcache documents every file; keep the
 * two in step.
 *
 * Locking: geometry goes through kvcache_config.c (config_lock); counters
 * are per-CPU sums and gauges are atomics, read without a lock.
 */
#include <linux/device.h>
#include <linux/sysfs.h>

#include "kvcache.h"
#include "kvcache_pool.h"

static struct kvc_dev *to_kvc_dev(struct device *d)
{
	struct miscdevice *misc = dev_get_drvdata(d);

	return container_of(misc, struct kvc_dev, misc);
}

static ssize_t abi_version_show(struct device *d, struct device_attribute *a,
				char *buf)
{
	return sysfs_emit(buf, "%d\n", KVCACHE_ABI_VERSION);
}
static DEVICE_ATTR_RO(abi_version);

static ssize_t features_show(struct device *d, struct device_attribute *a,
			     char *buf)
{
	return sysfs_emit(buf, "%#llx\n", (u64)KVC_FEATURES);
}
static DEVICE_ATTR_RO(features);

static struct attribute *kvc_root_attrs[] = {
	&dev_attr_abi_version.attr,
	&dev_attr_features.attr,
	NULL
};

static const struct attribute_group kvc_root_group = {
	.attrs = kvc_root_attrs,
};

/* pool/ */

static ssize_t block_size_show(struct device *d, struct device_attribute *a,
			       char *buf)
{
	struct kvc_geometry geo;

	kvc_get_geometry(to_kvc_dev(d), &geo);
	return sysfs_emit(buf, "%llu\n", geo.block_size);
}

static ssize_t block_size_store(struct device *d, struct device_attribute *a,
				const char *buf, size_t len)
{
	u64 val;
	int ret;

	ret = kvc_parse_size(buf, &val);
	if (!ret)
		ret = kvc_update_geometry(to_kvc_dev(d), KVC_GEO_BLOCK_SIZE, val);
	return ret ? ret : len;
}
static DEVICE_ATTR_RW(block_size);

static ssize_t pool_size_show(struct device *d, struct device_attribute *a,
			      char *buf)
{
	struct kvc_geometry geo;

	kvc_get_geometry(to_kvc_dev(d), &geo);
	return sysfs_emit(buf, "%llu\n", geo.pool_size);
}

static ssize_t pool_size_store(struct device *d, struct device_attribute *a,
			       const char *buf, size_t len)
{
	u64 val;
	int ret;

	ret = kvc_parse_size(buf, &val);
	if (!ret)
		ret = kvc_update_geometry(to_kvc_dev(d), KVC_GEO_POOL_SIZE, val);
	return ret ? ret : len;
}
static DEVICE_ATTR_RW(pool_size);

static ssize_t nr_blocks_show(struct device *d, struct device_attribute *a,
			      char *buf)
{
	struct kvc_geometry geo;

	kvc_get_geometry(to_kvc_dev(d), &geo);
	return sysfs_emit(buf, "%llu\n", geo.pool_size / geo.block_size);
}
static DEVICE_ATTR_RO(nr_blocks);

static ssize_t max_pool_size_show(struct device *d, struct device_attribute *a,
				  char *buf)
{
	return sysfs_emit(buf, "%llu\n", kvc_max_pool_bytes());
}
static DEVICE_ATTR_RO(max_pool_size);

static ssize_t kvc_watermark_store(struct device *d, const char *buf,
				   size_t len, bool high)
{
	u32 val;
	int ret;

	ret = kstrtou32(buf, 0, &val);
	if (ret)
		return -EINVAL;
	ret = kvc_set_watermark(to_kvc_dev(d), high, val);
	return ret ? ret : len;
}

static ssize_t low_watermark_show(struct device *d, struct device_attribute *a,
				  char *buf)
{
	return sysfs_emit(buf, "%u\n", READ_ONCE(to_kvc_dev(d)->low_wm));
}

static ssize_t low_watermark_store(struct device *d,
				   struct device_attribute *a,
				   const char *buf, size_t len)
{
	return kvc_watermark_store(d, buf, len, false);
}
static DEVICE_ATTR_RW(low_watermark);

static ssize_t high_watermark_show(struct device *d,
				   struct device_attribute *a, char *buf)
{
	return sysfs_emit(buf, "%u\n", READ_ONCE(to_kvc_dev(d)->high_wm));
}

static ssize_t high_watermark_store(struct device *d,
				    struct device_attribute *a,
				    const char *buf, size_t len)
{
	return kvc_watermark_store(d, buf, len, true);
}
static DEVICE_ATTR_RW(high_watermark);

/* Pool gauges: one show routine, reading the live pool under pool_sem. */
enum kvc_gauge {
	KVC_GAUGE_FREE,
	KVC_GAUGE_WRITABLE,
	KVC_GAUGE_SEALED,
	KVC_GAUGE_PINNED,
	KVC_GAUGE_HUGE_CHUNKS,
	KVC_GAUGE_QUARANTINED,
};

struct kvc_gauge_attr {
	struct device_attribute attr;
	enum kvc_gauge id;
};

static ssize_t kvc_gauge_show(struct device *d, struct device_attribute *a,
			      char *buf)
{
	struct kvc_gauge_attr *ga = container_of(a, struct kvc_gauge_attr, attr);
	struct kvc_dev *dev = to_kvc_dev(d);
	struct kvc_pool *pool;
	u64 v = 0;

	percpu_down_read(&dev->pool_sem);
	pool = dev->pool;
	switch (ga->id) {
	case KVC_GAUGE_FREE:
		v = kvc_pool_nr_free(pool);
		break;
	case KVC_GAUGE_WRITABLE:
		v = atomic_read(&pool->nr_writable);
		break;
	case KVC_GAUGE_SEALED:
		v = atomic_read(&pool->nr_sealed);
		break;
	case KVC_GAUGE_PINNED:
		v = atomic_read(&pool->nr_pinned);
		break;
	case KVC_GAUGE_HUGE_CHUNKS:
		v = pool->nr_huge_chunks;
		break;
	case KVC_GAUGE_QUARANTINED:
		v = kvc_pool_nr_quarantined(pool);
		break;
	}
	percpu_up_read(&dev->pool_sem);
	return sysfs_emit(buf, "%llu\n", v);
}

#define KVC_GAUGE_ATTR(_name, _id)					\
	static struct kvc_gauge_attr kvc_gauge_attr_##_name = {	\
		.attr = __ATTR(_name, 0444, kvc_gauge_show, NULL),	\
		.id = _id,						\
	}

KVC_GAUGE_ATTR(free_blocks, KVC_GAUGE_FREE);
KVC_GAUGE_ATTR(writable_blocks, KVC_GAUGE_WRITABLE);
KVC_GAUGE_ATTR(sealed_blocks, KVC_GAUGE_SEALED);
KVC_GAUGE_ATTR(pinned_blocks, KVC_GAUGE_PINNED);
KVC_GAUGE_ATTR(huge_chunks, KVC_GAUGE_HUGE_CHUNKS);
KVC_GAUGE_ATTR(quarantined_blocks, KVC_GAUGE_QUARANTINED);

static struct attribute *kvc_pool_attrs[] = {
	&dev_attr_block_size.attr,
	&dev_attr_pool_size.attr,
	&dev_attr_nr_blocks.attr,
	&dev_attr_max_pool_size.attr,
	&dev_attr_low_watermark.attr,
	&dev_attr_high_watermark.attr,
	&kvc_gauge_attr_free_blocks.attr.attr,
	&kvc_gauge_attr_writable_blocks.attr.attr,
	&kvc_gauge_attr_sealed_blocks.attr.attr,
	&kvc_gauge_attr_pinned_blocks.attr.attr,
	&kvc_gauge_attr_huge_chunks.attr.attr,
	&kvc_gauge_attr_quarantined_blocks.attr.attr,
	NULL
};

static const struct attribute_group kvc_pool_group = {
	.name = "pool",
	.attrs = kvc_pool_attrs,
};

/* stats/: one show routine for every per-CPU counter */

struct kvc_stat_attr {
	struct device_attribute attr;
	enum kvc_stat id;
};

static ssize_t kvc_stat_show(struct device *d, struct device_attribute *a,
			     char *buf)
{
	struct kvc_stat_attr *sa = container_of(a, struct kvc_stat_attr, attr);

	return sysfs_emit(buf, "%llu\n", kvc_stat_read(to_kvc_dev(d), sa->id));
}

#define KVC_STAT_ATTR(_name, _id)					\
	static struct kvc_stat_attr kvc_stat_attr_##_name = {		\
		.attr = __ATTR(_name, 0444, kvc_stat_show, NULL),	\
		.id = _id,						\
	}

KVC_STAT_ATTR(opens, KVC_STAT_OPENS);
KVC_STAT_ATTR(ioctls, KVC_STAT_IOCTLS);
KVC_STAT_ATTR(ioctl_errors, KVC_STAT_IOCTL_ERRORS);
KVC_STAT_ATTR(allocs, KVC_STAT_ALLOCS);
KVC_STAT_ATTR(alloc_failures, KVC_STAT_ALLOC_FAILURES);
KVC_STAT_ATTR(seals, KVC_STAT_SEALS);
KVC_STAT_ATTR(pins, KVC_STAT_PINS);
KVC_STAT_ATTR(unpins, KVC_STAT_UNPINS);
KVC_STAT_ATTR(evictions, KVC_STAT_EVICTIONS);
KVC_STAT_ATTR(discards, KVC_STAT_DISCARDS);
KVC_STAT_ATTR(events, KVC_STAT_EVENTS);
KVC_STAT_ATTR(event_failures, KVC_STAT_EVENT_FAILURES);
KVC_STAT_ATTR(pin_failures, KVC_STAT_PIN_FAILURES);
KVC_STAT_ATTR(io_errors, KVC_STAT_IO_ERRORS);
KVC_STAT_ATTR(pool_alloc_failures, KVC_STAT_POOL_FAILURES);
KVC_STAT_ATTR(view_faults, KVC_STAT_VIEW_FAULTS);
KVC_STAT_ATTR(view_refused, KVC_STAT_VIEW_REFUSED);
KVC_STAT_ATTR(view_zaps, KVC_STAT_VIEW_ZAPS);

static ssize_t open_files_show(struct device *d, struct device_attribute *a,
			       char *buf)
{
	return sysfs_emit(buf, "%d\n", atomic_read(&to_kvc_dev(d)->open_files));
}
static DEVICE_ATTR_RO(open_files);

static struct attribute *kvc_stats_attrs[] = {
	&kvc_stat_attr_opens.attr.attr,
	&kvc_stat_attr_ioctls.attr.attr,
	&kvc_stat_attr_ioctl_errors.attr.attr,
	&kvc_stat_attr_allocs.attr.attr,
	&kvc_stat_attr_alloc_failures.attr.attr,
	&kvc_stat_attr_seals.attr.attr,
	&kvc_stat_attr_pins.attr.attr,
	&kvc_stat_attr_unpins.attr.attr,
	&kvc_stat_attr_evictions.attr.attr,
	&kvc_stat_attr_discards.attr.attr,
	&kvc_stat_attr_events.attr.attr,
	&kvc_stat_attr_event_failures.attr.attr,
	&kvc_stat_attr_pin_failures.attr.attr,
	&kvc_stat_attr_io_errors.attr.attr,
	&kvc_stat_attr_pool_alloc_failures.attr.attr,
	&kvc_stat_attr_view_faults.attr.attr,
	&kvc_stat_attr_view_refused.attr.attr,
	&kvc_stat_attr_view_zaps.attr.attr,
	&dev_attr_open_files.attr,
	NULL
};

static const struct attribute_group kvc_stats_group = {
	.name = "stats",
	.attrs = kvc_stats_attrs,
};

const struct attribute_group *kvc_attr_groups[] = {
	&kvc_root_group,
	&kvc_pool_group,
	&kvc_stats_group,
	NULL
};
