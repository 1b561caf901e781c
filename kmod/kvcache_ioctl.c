// SPDX-License-Identifier: GPL-2.0
/*
 * ioctl dispatch and the size-first argument convention.
 *
 * Every kvcache ioctl takes a struct whose first member is a __u32 size
 * (uapi/linux/kvcache.h). kvc_copy_in() and kvc_copy_out() implement the
 * size rules of Documentation/userspace-api/uapi.md ("Rules every ioctl
 * follows") once for all of them; kvc_check_unused() and each handler
 * apply the rest (flags, reserved and output members).
 *
 * Locking: none of its own. Handlers take the locks of what they touch.
 */
#include <linux/fs.h>
#include <linux/string.h>
#include <linux/uaccess.h>
#include <kunit/visibility.h>

#include "kvcache.h"
#include "kvcache_p2p.h"

/**
 * kvc_copy_in() - copy a size-first ioctl argument from userspace
 * @karg: kernel copy; its first __u32 receives the caller's size
 * @ksize: sizeof(*karg)
 * @min_size: the first published size of this struct
 * @uarg: user pointer
 *
 * Return: 0, -EFAULT, -EINVAL (size out of range) or -E2BIG (non-zero bytes
 * beyond what this kernel knows).
 */
int kvc_copy_in(void *karg, size_t ksize, size_t min_size,
		const void __user *uarg)
{
	u32 usize;
	int ret;

	if (get_user(usize, (const u32 __user *)uarg))
		return -EFAULT;
	if (usize < min_size || usize > KVCACHE_STRUCT_MAX)
		return -EINVAL;
	ret = copy_struct_from_user(karg, ksize, uarg, usize);
	if (ret)
		return ret;
	/* A short caller's struct was zero-extended; remember its size. */
	*(u32 *)karg = usize;
	return 0;
}
EXPORT_SYMBOL_IF_KUNIT(kvc_copy_in);

/**
 * kvc_copy_out() - copy a size-first ioctl result back to userspace
 * @uarg: user pointer
 * @karg: kernel copy, its size member still holding the caller's size
 * @ksize: sizeof(*karg)
 *
 * Writes min(caller's size, @ksize) bytes and stores that count in the size
 * member. A longer caller's extra tail is left as it was (zero: kvc_copy_in()
 * checked).
 *
 * Return: 0 or -EFAULT.
 */
int kvc_copy_out(void __user *uarg, void *karg, size_t ksize)
{
	u32 n = min_t(u32, *(u32 *)karg, ksize);

	*(u32 *)karg = n;
	if (copy_to_user(uarg, karg, n))
		return -EFAULT;
	return 0;
}
EXPORT_SYMBOL_IF_KUNIT(kvc_copy_out);

/**
 * kvc_info_check() - validate the input of KVCACHE_IOC_INFO
 * @in: the caller's struct after kvc_copy_in()
 *
 * Everything but the size is an output or reserved, and must be zero.
 *
 * Return: 0 or -EINVAL.
 */
int kvc_info_check(const struct kvcache_info *in)
{
	const size_t off = offsetofend(struct kvcache_info, size);

	if (memchr_inv((const u8 *)in + off, 0, sizeof(*in) - off))
		return -EINVAL;
	return 0;
}
EXPORT_SYMBOL_IF_KUNIT(kvc_info_check);

/**
 * kvc_info_fill() - fill the outputs of KVCACHE_IOC_INFO
 * @info: result, size member untouched
 * @geo: a consistent snapshot of the pool geometry
 */
void kvc_info_fill(struct kvcache_info *info, const struct kvc_geometry *geo)
{
	info->abi_version = KVCACHE_ABI_VERSION;
	info->max_batch = KVCACHE_MAX_BATCH;
	info->features = KVC_FEATURES;
	info->block_size = geo->block_size;
	info->nr_blocks = geo->pool_size / geo->block_size;
}
EXPORT_SYMBOL_IF_KUNIT(kvc_info_fill);

static int kvc_ioctl_info(struct kvc_file *kf, void __user *uarg)
{
	struct kvcache_info info;
	struct kvc_geometry geo;
	int ret;

	ret = kvc_copy_in(&info, sizeof(info), KVCACHE_INFO_SIZE_VER1, uarg);
	if (ret)
		return ret;
	ret = kvc_info_check(&info);
	if (ret)
		return ret;
	kvc_get_geometry(kf->dev, &geo);
	kvc_info_fill(&info, &geo);
	return kvc_copy_out(uarg, &info, sizeof(info));
}

long kvc_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct kvc_file *kf = file->private_data;
	void __user *uarg = (void __user *)arg;
	long ret;

	kvc_stat_inc(kf->dev, KVC_STAT_IOCTLS);

	/*
	 * Dispatch on type, direction and number; the size bits of the
	 * command are ignored on purpose (see the top of this file).
	 */
	if (_IOC_TYPE(cmd) != KVCACHE_IOC_MAGIC ||
	    _IOC_DIR(cmd) != (_IOC_READ | _IOC_WRITE)) {
		ret = -ENOTTY;
		goto out;
	}

	switch (_IOC_NR(cmd)) {
	case _IOC_NR(KVCACHE_IOC_INFO):
		ret = kvc_ioctl_info(kf, uarg);
		break;
	case _IOC_NR(KVCACHE_IOC_ALLOC):
		ret = kvc_ioctl_alloc(kf, uarg);
		break;
	case _IOC_NR(KVCACHE_IOC_SEAL):
	case _IOC_NR(KVCACHE_IOC_PIN):
	case _IOC_NR(KVCACHE_IOC_UNPIN):
	case _IOC_NR(KVCACHE_IOC_EVICT):
	case _IOC_NR(KVCACHE_IOC_DISCARD):
		ret = kvc_ioctl_batch(kf, uarg, _IOC_NR(cmd));
		break;
	case _IOC_NR(KVCACHE_IOC_QUERY):
		ret = kvc_ioctl_query(kf, uarg);
		break;
	case _IOC_NR(KVCACHE_IOC_NS_CREATE):
		ret = kvc_ioctl_ns(kf, uarg, true);
		break;
	case _IOC_NR(KVCACHE_IOC_NS_DESTROY):
		ret = kvc_ioctl_ns(kf, uarg, false);
		break;
	case _IOC_NR(KVCACHE_IOC_HELPER):
		ret = kvc_ioctl_helper(kf, uarg);
		break;
	case _IOC_NR(KVCACHE_IOC_REGION_REGISTER):
	case _IOC_NR(KVCACHE_IOC_REGION_UNREGISTER):
		ret = kvc_ioctl_region(kf, uarg, _IOC_NR(cmd) ==
				       _IOC_NR(KVCACHE_IOC_REGION_REGISTER));
		break;
	case _IOC_NR(KVCACHE_IOC_XFER):
		ret = kvc_ioctl_xfer(kf, uarg);
		break;
	case _IOC_NR(KVCACHE_IOC_XFER_REAP):
		ret = kvc_ioctl_xfer_reap(kf, uarg);
		break;
	default:
		ret = -ENOTTY;
		break;
	}
out:
	if (ret < 0)
		kvc_stat_inc(kf->dev, KVC_STAT_IOCTL_ERRORS);
	return ret;
}
