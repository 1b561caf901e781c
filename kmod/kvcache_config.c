// SPDX-License-Identifier: GPL-2.0
/*
 * Pool geometry: parsing and validating what the admin asks for.
 *
 * The geometry (block size, pool size) comes from module parameters at load
 * time and from the sysfs knobs in pool/ afterwards. Both paths go through
 * kvc_check_geometry(), so a value the module accepts at load is exactly a
 * value sysfs accepts later.
 *
 * Locking: dev->config_lock (a mutex) protects dev->geo and serialises
 * writers of the watermarks; readers that need block_size and pool_size to
 * agree take it too. Replacing the pool takes dev->pool_sem for writing,
 * inside config_lock. Nothing here is on a fast path.
 */
#include <linux/kernel.h>
#include <linux/log2.h>
#include <linux/mm.h>
#include <linux/sizes.h>
#include <linux/string.h>
#include <kunit/visibility.h>

#include "kvcache.h"
#include "kvcache_pool.h"

/**
 * kvc_parse_size() - parse a byte count written to a sysfs knob
 * @buf: decimal or 0x-prefixed hex number, optionally followed by one of the
 *       suffixes K, M, G (binary multiples) and a newline
 * @out: the value in bytes
 *
 * Return: 0, or -EINVAL for anything else (empty input, junk, overflow).
 */
int kvc_parse_size(const char *buf, u64 *out)
{
	char num[32];
	size_t len = strlen(buf);
	unsigned int shift = 0;
	u64 val;
	int ret;

	if (len && buf[len - 1] == '\n')
		len--;
	if (!len || len >= sizeof(num))
		return -EINVAL;
	memcpy(num, buf, len);
	num[len] = '\0';

	switch (num[len - 1]) {
	case 'K':
	case 'k':
		shift = 10;
		break;
	case 'M':
	case 'm':
		shift = 20;
		break;
	case 'G':
	case 'g':
		shift = 30;
		break;
	}
	if (shift) {
		num[--len] = '\0';
		if (!len)
			return -EINVAL;
	}

	ret = kstrtou64(num, 0, &val);
	if (ret)
		return -EINVAL;
	if (shift && val > (U64_MAX >> shift))
		return -EINVAL;
	*out = val << shift;
	return 0;
}
EXPORT_SYMBOL_IF_KUNIT(kvc_parse_size);

/**
 * kvc_check_block_size() - is @block_size a valid pool block size?
 * @block_size: bytes
 *
 * A block is a power of two from 4 KiB (or the page size, if larger) to
 * 64 MiB, so it is a whole number of pages (mmap by handle) and a 2 MiB
 * page holds a whole number of small blocks.
 *
 * Return: 0 or -EINVAL.
 */
int kvc_check_block_size(u64 block_size)
{
	if (block_size < max_t(u64, KVC_MIN_BLOCK_SIZE, PAGE_SIZE) ||
	    block_size > KVC_MAX_BLOCK_SIZE)
		return -EINVAL;
	if (!is_power_of_2(block_size))
		return -EINVAL;
	return 0;
}
EXPORT_SYMBOL_IF_KUNIT(kvc_check_block_size);

/**
 * kvc_check_geometry() - validate a complete pool geometry
 * @geo: block size and pool size in bytes
 * @max_pool: the largest pool this machine allows, in bytes
 *
 * The pool size is a whole number of blocks (zero disables the pool), at
 * most @max_pool bytes and at most KVC_MAX_BLOCKS blocks.
 *
 * Return: 0 or -EINVAL.
 */
int kvc_check_geometry(const struct kvc_geometry *geo, u64 max_pool)
{
	int ret = kvc_check_block_size(geo->block_size);

	if (ret)
		return ret;
	if (geo->pool_size & (geo->block_size - 1))
		return -EINVAL;
	if (geo->pool_size > max_pool)
		return -EINVAL;
	if (geo->pool_size / geo->block_size > KVC_MAX_BLOCKS)
		return -EINVAL;
	return 0;
}
EXPORT_SYMBOL_IF_KUNIT(kvc_check_geometry);

/*
 * The pool is pinned: it can never be swapped or reclaimed. Half of RAM is
 * the ceiling so a mistyped knob cannot take the node down.
 */
u64 kvc_max_pool_bytes(void)
{
	return ((u64)totalram_pages() << PAGE_SHIFT) / 2;
}

/* Default watermarks: pressure below 10% free, relief above 20%. */
static void kvc_default_watermarks(struct kvc_dev *dev, u32 nr_blocks)
{
	WRITE_ONCE(dev->low_wm, nr_blocks / 10);
	WRITE_ONCE(dev->high_wm, nr_blocks / 5);
}

/**
 * kvc_update_geometry() - change one knob of the geometry
 * @dev: the device
 * @field: which knob
 * @val: its new value in bytes
 *
 * The new geometry is checked as a whole under config_lock, so two admins
 * writing block_size and pool_size at once cannot leave a combination that
 * neither write alone would have been allowed to make. The pool is
 * replaced by one of the new geometry, which is only possible while every
 * block is free; the watermarks go back to their defaults.
 *
 * Return: 0; -EINVAL when the resulting geometry is invalid; -EBUSY when
 * the pool holds blocks; -ENOMEM. Nothing changes on failure.
 */
int kvc_update_geometry(struct kvc_dev *dev, enum kvc_geo_field field, u64 val)
{
	struct kvc_pool *pool, *old;
	struct kvc_geometry geo;
	int ret;

	mutex_lock(&dev->config_lock);
	geo = dev->geo;
	if (field == KVC_GEO_BLOCK_SIZE)
		geo.block_size = val;
	else
		geo.pool_size = val;
	ret = kvc_check_geometry(&geo, kvc_max_pool_bytes());
	if (ret)
		goto out;

	/*
	 * dev->pool only changes under config_lock, held here. Check it is
	 * idle before allocating a new one, and again when swapping.
	 */
	if (!kvc_pool_idle(dev->pool)) {
		ret = -EBUSY;
		goto out;
	}
	/* Allocate first: ioctls must not wait behind the allocation. */
	pool = kvc_pool_create(&geo);
	if (IS_ERR(pool)) {
		ret = PTR_ERR(pool);
		kvc_stat_inc(dev, KVC_STAT_POOL_FAILURES);
		goto out;
	}
	percpu_down_write(&dev->pool_sem);
	old = dev->pool;
	if (!kvc_pool_idle(old)) {
		percpu_up_write(&dev->pool_sem);
		kvc_pool_destroy(pool);
		ret = -EBUSY;
		goto out;
	}
	dev->pool = pool;
	dev->geo = geo;
	kvc_default_watermarks(dev, pool->nr_blocks);
	/* A new, empty pool is under no pressure. */
	clear_bit(KVC_DEV_PRESSURE, &dev->flags);
	percpu_up_write(&dev->pool_sem);
	kvc_pool_destroy(old);
out:
	mutex_unlock(&dev->config_lock);
	return ret;
}

void kvc_get_geometry(struct kvc_dev *dev, struct kvc_geometry *geo)
{
	mutex_lock(&dev->config_lock);
	*geo = dev->geo;
	mutex_unlock(&dev->config_lock);
}

/**
 * kvc_set_watermark() - set one free-block level of the pressure events
 * @dev: the device
 * @high: set high_watermark (pressure over at or above it), else
 *        low_watermark (pressure raised below it)
 * @val: blocks
 *
 * Return: 0, or -EINVAL unless low <= high <= nr_blocks afterwards.
 */
int kvc_set_watermark(struct kvc_dev *dev, bool high, u32 val)
{
	u32 low_wm, high_wm;
	int ret = 0;

	mutex_lock(&dev->config_lock);
	low_wm = high ? dev->low_wm : val;
	high_wm = high ? val : dev->high_wm;
	if (low_wm > high_wm ||
	    high_wm > dev->geo.pool_size / dev->geo.block_size) {
		ret = -EINVAL;
	} else {
		WRITE_ONCE(dev->low_wm, low_wm);
		WRITE_ONCE(dev->high_wm, high_wm);
	}
	mutex_unlock(&dev->config_lock);
	return ret;
}

/* Module load: the pool of the geometry the parameters gave. */
int kvc_pool_setup(struct kvc_dev *dev)
{
	struct kvc_pool *pool = kvc_pool_create(&dev->geo);

	if (IS_ERR(pool))
		return PTR_ERR(pool);
	dev->pool = pool;
	kvc_default_watermarks(dev, pool->nr_blocks);
	return 0;
}

/* Module unload: no file is open, so every block is free. */
void kvc_pool_teardown(struct kvc_dev *dev)
{
	kvc_pool_destroy(dev->pool);
	dev->pool = NULL;
}
