// SPDX-License-Identifier: GPL-2.0
/*
 * sysfs knobs and counters under /sys/class/misc/kvcache/.
 *
 *   abi_version, features       what the module offers (read-only)
 *   pool/block_size, pool_size  geometry knobs (root may write)
 *   pool/nr_blocks, max_pool_size
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
	struct kvcache_info info = {};
	struct kvc_geometry geo;

	kvc_get_geometry(to_kvc_dev(d), &geo);
	kvc_info_fill(&info, &geo);
	return sysfs_emit(buf, "%#llx\n", info.features);
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

static struct attribute *kvc_pool_attrs[] = {
	&dev_attr_block_size.attr,
	&dev_attr_pool_size.attr,
	&dev_attr_nr_blocks.attr,
	&dev_attr_max_pool_size.attr,
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
