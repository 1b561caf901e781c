/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kdev: kvcached's side of /dev/kvcache (kernel mode).
 *
 * The daemon opens the device once, becomes its helper (the role that may
 * evict any block, manage namespaces and list every sealed block; it ends
 * when the file is closed, so a crashed daemon leaves nothing half-held),
 * and uses these wrappers. Each returns 0 or -errno as the ioctl did.
 */
#ifndef KVC_KDEV_H
#define KVC_KDEV_H

#include <stdint.h>

#include <linux/kvcache.h>

struct kvc_kdev {
	int fd;
	struct kvcache_info info;
};

/* Open @path read-write, read INFO, become the helper. */
int kvc_kdev_open(struct kvc_kdev *kd, const char *path);
void kvc_kdev_close(struct kvc_kdev *kd);

int kvc_kdev_ns_create(struct kvc_kdev *kd, uint32_t ns, uint32_t uid,
		       uint32_t gid, uint32_t mode);
/* Drop namespace ns again (it must hold no blocks): 0 or -errno. */
int kvc_kdev_ns_destroy(struct kvc_kdev *kd, uint32_t ns);

/*
 * List sealed blocks from index @start (KVCACHE_NS_ANY: all namespaces):
 * fills up to @max entries, sets *count and *next (nr_blocks when done).
 */
int kvc_kdev_query(struct kvc_kdev *kd, uint32_t start, uint32_t ns,
		   struct kvcache_block_info *out, uint32_t max,
		   uint32_t *count, uint32_t *next);

/*
 * The sealed block @h, if it is still what the handle names: its info in
 * *out. -ESTALE when the block was evicted or reused, -ENOENT when it is
 * not sealed. One index looked at (KVCACHE_QUERY_EXACT), whatever the
 * pool holds; a module without KVCACHE_FEAT_QUERY_EXACT walks on to the
 * next sealed block.
 */
int kvc_kdev_block(struct kvc_kdev *kd, struct kvcache_handle h,
		   struct kvcache_block_info *out);

/* Evict @n blocks; *done: how many went before the first error. */
int kvc_kdev_evict(struct kvc_kdev *kd, const struct kvcache_handle *h,
		   uint32_t n, uint32_t *done);

/*
 * For the persistent tiers: a pin of this file on sealed block @h (so it
 * can be mapped read-only and copied out) and its release; one writable
 * block in namespace @ns, and its seal under @key once written, or its
 * return unsealed (KVCACHE_IOC_DISCARD; -ENOTTY from a module without
 * KVCACHE_FEAT_DISCARD).
 */
int kvc_kdev_pin(struct kvc_kdev *kd, struct kvcache_handle h);
int kvc_kdev_unpin(struct kvc_kdev *kd, struct kvcache_handle h);
int kvc_kdev_alloc(struct kvc_kdev *kd, uint32_t ns, struct kvcache_handle *h);
int kvc_kdev_seal(struct kvc_kdev *kd, struct kvcache_handle h,
		  uint32_t payload_len, const uint8_t key[KVCACHE_KEY_SIZE]);
int kvc_kdev_discard(struct kvc_kdev *kd, struct kvcache_handle h);

#endif /* KVC_KDEV_H */
