/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Thin wrappers around the kvcache ioctls for the selftests: each returns
 * 0 or -errno, so a test can compare against the documented error.
 */
#ifndef KVC_IOCTL_H
#define KVC_IOCTL_H

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#include <linux/kvcache.h>

static inline int kvc_ioc(int fd, unsigned long cmd, void *arg)
{
	return ioctl(fd, cmd, arg) ? -errno : 0;
}

static inline uint64_t kvc_block_size(int fd)
{
	struct kvcache_info info = { .size = sizeof(info) };

	return kvc_ioc(fd, KVCACHE_IOC_INFO, &info) ? 0 : info.block_size;
}

static inline int kvc_ns(int fd, int create, uint32_t id, uint32_t uid,
			 uint32_t gid, uint32_t mode)
{
	struct kvcache_ns ns = {
		.size = sizeof(ns), .ns_id = id,
		.uid = create ? uid : 0, .gid = create ? gid : 0,
		.mode = create ? mode : 0,
	};

	return kvc_ioc(fd, create ? KVCACHE_IOC_NS_CREATE :
			   KVCACHE_IOC_NS_DESTROY, &ns);
}

static inline int kvc_alloc(int fd, uint32_t ns, uint32_t count,
			    struct kvcache_handle *h)
{
	struct kvcache_alloc a = {
		.size = sizeof(a), .ns_id = ns, .count = count,
		.handles = (uintptr_t)h,
	};

	return kvc_ioc(fd, KVCACHE_IOC_ALLOC, &a);
}

/* PIN, UNPIN or EVICT on n handles; *done gets the count that took effect. */
static inline int kvc_batch(int fd, unsigned long cmd,
			    const struct kvcache_handle *h, uint32_t n,
			    uint32_t *done)
{
	struct kvcache_batch b = {
		.size = sizeof(b), .count = n, .entries = (uintptr_t)h,
	};
	int ret = kvc_ioc(fd, cmd, &b);

	if (done)
		*done = b.done;
	return ret;
}

static inline int kvc_pin(int fd, struct kvcache_handle h)
{
	return kvc_batch(fd, KVCACHE_IOC_PIN, &h, 1, NULL);
}

static inline int kvc_unpin(int fd, struct kvcache_handle h)
{
	return kvc_batch(fd, KVCACHE_IOC_UNPIN, &h, 1, NULL);
}

static inline int kvc_evict(int fd, struct kvcache_handle h)
{
	return kvc_batch(fd, KVCACHE_IOC_EVICT, &h, 1, NULL);
}

static inline int kvc_discard(int fd, struct kvcache_handle h)
{
	return kvc_batch(fd, KVCACHE_IOC_DISCARD, &h, 1, NULL);
}

/* Seal one block with a key made of one repeated byte. */
static inline int kvc_seal(int fd, struct kvcache_handle h, uint32_t len,
			   uint8_t keybyte, uint32_t flags)
{
	struct kvcache_seal_entry e = { .handle = h, .payload_len = len };
	struct kvcache_batch b = {
		.size = sizeof(b), .flags = flags, .count = 1,
		.entries = (uintptr_t)&e,
	};

	memset(e.key, keybyte, sizeof(e.key));
	return kvc_ioc(fd, KVCACHE_IOC_SEAL, &b);
}

/* Map block index with prot; NULL and errno set on failure. */
static inline void *kvc_map(int fd, uint32_t index, uint64_t bs, int prot)
{
	void *p = mmap(NULL, bs, prot, MAP_SHARED, fd, (off_t)(index * bs));

	return p == MAP_FAILED ? NULL : p;
}

/*
 * A fresh sealed block of ns: allocated, filled through a mapping by
 * fill(p, bs, seed), sealed whole under the key of byte seed. 0 (and *h)
 * or -errno.
 */
static inline int kvc_make_sealed(int fd, uint32_t ns, uint64_t bs,
				  uint32_t seed,
				  void (*fill)(uint8_t *, uint64_t, uint32_t),
				  struct kvcache_handle *h)
{
	int ret = kvc_alloc(fd, ns, 1, h);
	uint8_t *p;

	if (ret)
		return ret;
	p = kvc_map(fd, h->index, bs, PROT_READ | PROT_WRITE);
	if (!p)
		return -errno;
	fill(p, bs, seed);
	munmap(p, bs);
	return kvc_seal(fd, *h, (uint32_t)bs, (uint8_t)seed, 0);
}

#endif /* KVC_IOCTL_H */
