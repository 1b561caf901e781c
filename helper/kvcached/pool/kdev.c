// SPDX-License-Identifier: GPL-2.0
/*
 * kdev: kvcached's side of /dev/kvcache (see kdev.h).
 */
#include "kdev.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "devinfo.h"

static int kvc_kdev_ioctl(struct kvc_kdev *kd, unsigned long cmd, void *arg)
{
	return ioctl(kd->fd, cmd, arg) ? -errno : 0;
}

int kvc_kdev_open(struct kvc_kdev *kd, const char *path)
{
	struct kvcache_helper helper = { .size = sizeof(helper) };
	int ret;

	kd->fd = open(path, O_RDWR | O_CLOEXEC);
	if (kd->fd < 0)
		return -errno;
	ret = kvc_dev_info(kd->fd, &kd->info);
	if (!ret && !(kd->info.features & KVCACHE_FEAT_POOL))
		ret = -EOPNOTSUPP;
	if (!ret)
		ret = kvc_kdev_ioctl(kd, KVCACHE_IOC_HELPER, &helper);
	if (ret) {
		close(kd->fd);
		kd->fd = -1;
	}
	return ret;
}

void kvc_kdev_close(struct kvc_kdev *kd)
{
	if (kd->fd >= 0)
		close(kd->fd);
	kd->fd = -1;
}

int kvc_kdev_ns_create(struct kvc_kdev *kd, uint32_t ns, uint32_t uid,
		       uint32_t gid, uint32_t mode)
{
	struct kvcache_ns arg = {
		.size = sizeof(arg), .ns_id = ns, .uid = uid, .gid = gid,
		.mode = mode,
	};

	return kvc_kdev_ioctl(kd, KVCACHE_IOC_NS_CREATE, &arg);
}

int kvc_kdev_ns_destroy(struct kvc_kdev *kd, uint32_t ns)
{
	struct kvcache_ns arg = { .size = sizeof(arg), .ns_id = ns };

	return kvc_kdev_ioctl(kd, KVCACHE_IOC_NS_DESTROY, &arg);
}

int kvc_kdev_query(struct kvc_kdev *kd, uint32_t start, uint32_t ns,
		   struct kvcache_block_info *out, uint32_t max,
		   uint32_t *count, uint32_t *next)
{
	struct kvcache_query q = {
		.size = sizeof(q), .start = start, .count = max, .ns_id = ns,
		.entries = (uintptr_t)out,
	};
	int ret = kvc_kdev_ioctl(kd, KVCACHE_IOC_QUERY, &q);

	if (ret)
		return ret;
	*count = q.count;
	*next = q.next;
	return 0;
}

int kvc_kdev_block(struct kvc_kdev *kd, struct kvcache_handle h,
		   struct kvcache_block_info *out)
{
	struct kvcache_query q = {
		.size = sizeof(q), .start = h.index, .count = 1,
		.ns_id = KVCACHE_NS_ANY, .entries = (uintptr_t)out,
	};
	int ret;

	/*
	 * A plain QUERY walks from h.index to the next sealed block, however
	 * far: the cost of checking a peer's handle would depend on (and
	 * show) where every tenant's blocks lie. QUERY_EXACT looks at
	 * h.index alone; a module older than it gets the walk.
	 */
	if (kd->info.features & KVCACHE_FEAT_QUERY_EXACT)
		q.flags = KVCACHE_QUERY_EXACT;
	ret = kvc_kdev_ioctl(kd, KVCACHE_IOC_QUERY, &q);
	if (ret)
		return ret;
	if (!q.count || out->handle.index != h.index)
		return -ENOENT;
	return out->handle.gen == h.gen ? 0 : -ESTALE;
}

int kvc_kdev_evict(struct kvc_kdev *kd, const struct kvcache_handle *h,
		   uint32_t n, uint32_t *done)
{
	struct kvcache_batch b = {
		.size = sizeof(b), .count = n, .entries = (uintptr_t)h,
	};
	int ret = kvc_kdev_ioctl(kd, KVCACHE_IOC_EVICT, &b);

	*done = b.done;
	return ret;
}

static int kvc_kdev_batch(struct kvc_kdev *kd, unsigned long cmd,
			  const void *entries, uint32_t n)
{
	struct kvcache_batch b = {
		.size = sizeof(b), .count = n, .entries = (uintptr_t)entries,
	};

	return kvc_kdev_ioctl(kd, cmd, &b);
}

int kvc_kdev_pin(struct kvc_kdev *kd, struct kvcache_handle h)
{
	return kvc_kdev_batch(kd, KVCACHE_IOC_PIN, &h, 1);
}

int kvc_kdev_unpin(struct kvc_kdev *kd, struct kvcache_handle h)
{
	return kvc_kdev_batch(kd, KVCACHE_IOC_UNPIN, &h, 1);
}

int kvc_kdev_alloc(struct kvc_kdev *kd, uint32_t ns, struct kvcache_handle *h)
{
	struct kvcache_alloc a = {
		.size = sizeof(a), .ns_id = ns, .count = 1,
		.handles = (uintptr_t)h,
	};

	return kvc_kdev_ioctl(kd, KVCACHE_IOC_ALLOC, &a);
}

int kvc_kdev_discard(struct kvc_kdev *kd, struct kvcache_handle h)
{
	return kvc_kdev_batch(kd, KVCACHE_IOC_DISCARD, &h, 1);
}

int kvc_kdev_seal(struct kvc_kdev *kd, struct kvcache_handle h,
		  uint32_t payload_len, const uint8_t key[KVCACHE_KEY_SIZE])
{
	struct kvcache_seal_entry e = {
		.handle = h, .payload_len = payload_len,
	};

	memcpy(e.key, key, KVCACHE_KEY_SIZE);
	return kvc_kdev_batch(kd, KVCACHE_IOC_SEAL, &e, 1);
}
