/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * kvcache: a persistent, shared KV-cache tier for LLM inference.
 *
 * The one header shared by kvcache.ko, the kvcached helper and the client
 * library. Documentation/uapi.md describes every call in prose.
 *
 * ABI rules, which every struct below follows:
 *  - Every ioctl is _IOWR on a struct whose first member is a __u32 "size":
 *    the number of bytes of the struct the caller knows about. The kernel
 *    dispatches on the ioctl number alone (type and nr), never on the size
 *    encoded in the command, so a struct can grow at its end without
 *    changing the command.
 *    - size smaller than the first published version of the struct, or
 *      larger than KVCACHE_STRUCT_MAX: -EINVAL.
 *    - size larger than what this kernel knows: accepted when the extra
 *      bytes are zero, -E2BIG otherwise (a newer caller asked for
 *      something this kernel cannot do).
 *    On return "size" holds the number of bytes the kernel wrote back.
 *  - Input fields named "flags" and "reserved*" must be zero: -EINVAL.
 *  - Output fields must be zero on input too, so they can become inputs
 *    in a later version: -EINVAL.
 *  - User pointers are passed as __u64; the kernel never takes a physical
 *    or bus address.
 *  - All members are naturally aligned and the structs have no implicit
 *    padding, so 32-bit callers on a 64-bit kernel share the layout.
 */
#ifndef _UAPI_LINUX_KVCACHE_H
#define _UAPI_LINUX_KVCACHE_H

#include <linux/const.h>
#include <linux/ioctl.h>
#include <linux/types.h>

/* Bumped on an incompatible change only; growth is signalled by features. */
#define KVCACHE_ABI_VERSION	1

#define KVCACHE_DEVICE_NAME	"kvcache"
#define KVCACHE_DEVICE_PATH	"/dev/kvcache"

/* Largest struct size the kernel accepts in a "size" field. */
#define KVCACHE_STRUCT_MAX	4096

/*
 * Feature bits reported by KVCACHE_IOC_INFO. A bit is set only when the
 * running module implements the group of calls it names; none is set by
 * the foundation release (ABI version 1 with no feature bits offers only
 * KVCACHE_IOC_INFO). Unknown bits are reserved and never set.
 */
#define KVCACHE_FEAT_POOL	_BITULL(0)	/* block pool ioctls and mmap */
#define KVCACHE_FEAT_NETLINK	_BITULL(1)	/* "kvcache" genl family */
#define KVCACHE_FEAT_P2P	_BITULL(2)	/* GPU regions, P2P transfers */
#define KVCACHE_FEAT_ALL	(KVCACHE_FEAT_POOL | KVCACHE_FEAT_NETLINK | \
				 KVCACHE_FEAT_P2P)

/* Most entries one batched call accepts. */
#define KVCACHE_MAX_BATCH	1024

/**
 * struct kvcache_info - what the running module is and offers
 * @size:        in: sizeof(struct kvcache_info) as the caller knows it;
 *               out: bytes written back
 * @flags:       in: must be 0
 * @abi_version: out: KVCACHE_ABI_VERSION of the module
 * @max_batch:   out: most entries a batched call accepts
 * @features:    out: KVCACHE_FEAT_* bits
 * @block_size:  out: bytes per pool block
 * @nr_blocks:   out: blocks in the pool
 * @reserved:    must be 0
 */
struct kvcache_info {
	__u32 size;
	__u32 flags;
	__u32 abi_version;
	__u32 max_batch;
	__u64 features;
	__u64 block_size;
	__u64 nr_blocks;
	__u64 reserved[3];
};

#define KVCACHE_INFO_SIZE_VER1	64	/* first published size */

#define KVCACHE_IOC_MAGIC	0xBC

#define KVCACHE_IOC_INFO	_IOWR(KVCACHE_IOC_MAGIC, 0x00, struct kvcache_info)

#endif /* _UAPI_LINUX_KVCACHE_H */
