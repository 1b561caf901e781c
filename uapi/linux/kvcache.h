/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * kvcache: a persistent, shared KV-cache tier for LLM inference.
 *
 * The one header shared by kvcache.ko, the kvcached helper and the client
 * library. Documentation/userspace-api/uapi.md describes every call in
 * prose.
 *
 * Every ioctl is _IOWR on a struct whose first member is a __u32 "size",
 * the bytes of the struct the caller knows; that is what lets a struct
 * grow. The rules every struct below follows (how "size" is read and
 * written back, flags, reserved and output members, pointers, layout, and
 * the errors) are written once, in "Rules every ioctl follows" of
 * Documentation/userspace-api/uapi.md.
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
#define KVCACHE_FEAT_VIEW	_BITULL(3)	/* the pool view (mmap) */
#define KVCACHE_FEAT_DISCARD	_BITULL(4)	/* KVCACHE_IOC_DISCARD */
#define KVCACHE_FEAT_QUERY_EXACT _BITULL(5)	/* KVCACHE_QUERY_EXACT */
#define KVCACHE_FEAT_USER_REGION _BITULL(6)	/* KVCACHE_REGION_USER */
#define KVCACHE_FEAT_ALL	(KVCACHE_FEAT_POOL | KVCACHE_FEAT_NETLINK | \
				 KVCACHE_FEAT_P2P | KVCACHE_FEAT_VIEW | \
				 KVCACHE_FEAT_DISCARD | KVCACHE_FEAT_QUERY_EXACT | \
				 KVCACHE_FEAT_USER_REGION)

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

/* ---- block pool ------------------------------------------------------ */

/**
 * struct kvcache_handle - a pool block
 * @index: the block's place in the pool, below kvcache_info.nr_blocks
 * @gen:   its generation; bumped every time the block is freed, so a handle
 *         kept past an eviction is stale (-ESTALE) and never names the
 *         block's next contents
 */
struct kvcache_handle {
	__u32 index;
	__u32 gen;
};

#define KVCACHE_KEY_SIZE	32	/* bytes of a block key */
#define KVCACHE_NS_MAX		65535	/* namespace ids are 1..KVCACHE_NS_MAX */
#define KVCACHE_NS_ANY		0	/* query: every namespace the caller may read */

/**
 * struct kvcache_alloc - KVCACHE_IOC_ALLOC: writable blocks for this file
 * @size:     sizeof(struct kvcache_alloc)
 * @flags:    must be 0
 * @ns_id:    namespace the blocks will belong to; the caller needs write
 *            permission on it
 * @count:    blocks wanted, 1..KVCACHE_MAX_BATCH; all or none (-ENOSPC)
 * @handles:  user pointer to @count struct kvcache_handle, filled on success
 * @reserved: must be 0
 *
 * The blocks come zeroed, writable (through mmap) by this open file only,
 * and go back to the pool if the file is closed before they are sealed.
 * The file must be open for writing (-EBADF).
 */
struct kvcache_alloc {
	__u32 size;
	__u32 flags;
	__u32 ns_id;
	__u32 count;
	__u64 handles;
	__u64 reserved[2];
};

#define KVCACHE_ALLOC_SIZE_VER1	40

/**
 * struct kvcache_seal_entry - one block to seal
 * @handle:      a writable block of this file, not mapped writable any more
 * @payload_len: bytes of the block that hold data, 1..block_size
 * @reserved:    must be 0
 * @key:         the caller's key for the block (stored, returned by query)
 */
struct kvcache_seal_entry {
	struct kvcache_handle handle;
	__u32 payload_len;
	__u32 reserved;
	__u8 key[KVCACHE_KEY_SIZE];
};

/**
 * struct kvcache_batch - SEAL, PIN, UNPIN, EVICT and DISCARD: an array of
 * entries
 * @size:     sizeof(struct kvcache_batch)
 * @flags:    SEAL: 0 or KVCACHE_SEAL_KEEP_PIN; others: must be 0
 * @count:    entries, 1..KVCACHE_MAX_BATCH
 * @done:     out: entries that took effect, in order; also written back
 *            when the call fails, the error being that of entry @done
 * @entries:  user pointer: struct kvcache_seal_entry for SEAL, struct
 *            kvcache_handle for the others
 * @reserved: must be 0
 */
struct kvcache_batch {
	__u32 size;
	__u32 flags;
	__u32 count;
	__u32 done;
	__u64 entries;
	__u64 reserved[2];
};

#define KVCACHE_BATCH_SIZE_VER1	40

/* SEAL: the sealing file keeps a pin on each block it sealed. */
#define KVCACHE_SEAL_KEEP_PIN	_BITUL(0)

/**
 * struct kvcache_block_info - one sealed block, as KVCACHE_IOC_QUERY lists it
 * @handle:      the block
 * @ns_id:       its namespace
 * @payload_len: bytes of data in it
 * @pins:        pins on it when it was listed (files and mappings)
 * @reserved:    0
 * @key:         the key it was sealed with
 */
struct kvcache_block_info {
	struct kvcache_handle handle;
	__u32 ns_id;
	__u32 payload_len;
	__u32 pins;
	__u32 reserved;
	__u8 key[KVCACHE_KEY_SIZE];
};

/**
 * struct kvcache_query - KVCACHE_IOC_QUERY: list sealed blocks
 * @size:     sizeof(struct kvcache_query)
 * @flags:    in: KVCACHE_QUERY_* bits; others must be 0
 * @start:    in: first block index to look at
 * @count:    in: room in @entries (1..KVCACHE_MAX_BATCH); out: entries filled
 * @next:     out: where the next call should start; nr_blocks when done
 * @ns_id:    in: only this namespace, or KVCACHE_NS_ANY
 * @entries:  user pointer to @count struct kvcache_block_info
 * @reserved: must be 0
 *
 * The helper and CAP_SYS_ADMIN see every sealed block; others only those
 * of namespaces they may read. Without flags the call walks from @start
 * to the next sealed blocks, however far; with KVCACHE_QUERY_EXACT it
 * looks at the @count indexes @start..@start + @count - 1 and no others,
 * so its cost never depends on where other blocks lie.
 */
struct kvcache_query {
	__u32 size;
	__u32 flags;
	__u32 start;
	__u32 count;
	__u32 next;
	__u32 ns_id;
	__u64 entries;
	__u64 reserved[2];
};

#define KVCACHE_QUERY_SIZE_VER1	48

/*
 * kvcache_query.flags: look at @start..@start + @count - 1 only, listing
 * those of them that are sealed (KVCACHE_FEAT_QUERY_EXACT).
 */
#define KVCACHE_QUERY_EXACT	_BITUL(0)

/**
 * struct kvcache_ns - KVCACHE_IOC_NS_CREATE / KVCACHE_IOC_NS_DESTROY
 * @size:     sizeof(struct kvcache_ns)
 * @flags:    must be 0
 * @ns_id:    1..KVCACHE_NS_MAX
 * @uid:      owner (CREATE; in the caller's user namespace)
 * @gid:      group (CREATE)
 * @mode:     permission bits, at most 0777 (CREATE): read lets a process
 *            pin, map and list the namespace's blocks, write lets it
 *            allocate blocks in it
 * @reserved: must be 0
 *
 * Only the helper (see KVCACHE_IOC_HELPER) or CAP_SYS_ADMIN may create or
 * destroy namespaces; DESTROY fails with -EBUSY while blocks belong to it.
 */
struct kvcache_ns {
	__u32 size;
	__u32 flags;
	__u32 ns_id;
	__u32 uid;
	__u32 gid;
	__u32 mode;
	__u64 reserved[2];
};

#define KVCACHE_NS_SIZE_VER1	40

/*
 * mmap: one block per mapping, MAP_SHARED, length block_size, offset
 * index * block_size. Writable only for a writable block of this file;
 * read-only (PROT_WRITE and mprotect to it refused) for a sealed block this
 * file has pinned. The mapping itself keeps the block from eviction: unpin
 * or evict do not pull the pages from under it.
 *
 * The pool view (KVCACHE_FEAT_VIEW): one read-only mapping of the whole
 * pool, MAP_SHARED, offset KVCACHE_VIEW_OFFSET, length block_size *
 * nr_blocks, so that a client reads the blocks it pins without mapping
 * each. Block i lies at i * block_size in it. Touching a block faults it in
 * only while this file holds a pin on it (SIGBUS otherwise). Its pages stay
 * mapped after the unpin, showing the same sealed bytes, until the block is
 * evicted: they are unmapped from every view before it is freed. The view
 * does not keep blocks from eviction; a pin does. PROT_WRITE is refused,
 * the mapping is not inherited across fork and cannot be split or grown.
 */
#define KVCACHE_VIEW_OFFSET	_BITULL(46)

/**
 * struct kvcache_helper - KVCACHE_IOC_HELPER: make this open file the helper
 * @size:     sizeof(struct kvcache_helper)
 * @flags:    must be 0
 * @reserved: must be 0
 *
 * Needs CAP_SYS_ADMIN; one helper file at a time (-EBUSY). The role ends
 * when the file is closed. The helper may evict, manage namespaces and pin
 * or list every block, so kvcached can drop its privileges afterwards.
 */
struct kvcache_helper {
	__u32 size;
	__u32 flags;
	__u64 reserved[3];
};

#define KVCACHE_HELPER_SIZE_VER1	32

/* ---- GPU regions and transfers (KVCACHE_FEAT_P2P) ---------------------- */

/*
 * A provider is a device whose memory can be a DMA target: a PCI BAR that
 * kvcache.ko exposes as P2PDMA memory (kind "bar"), or memory another
 * driver already publishes as P2PDMA pages (kind "p2pmem", e.g. an NVMe
 * controller memory buffer). Providers are listed, with their id, under
 * /sys/class/misc/kvcache/providers/. Documentation/design/p2p.md has the
 * rules.
 */

/**
 * struct kvcache_region - KVCACHE_IOC_REGION_REGISTER / _UNREGISTER
 * @size:     sizeof(struct kvcache_region)
 * @flags:    REGISTER: 0 or KVCACHE_REGION_USER; UNREGISTER: must be 0
 * @provider: REGISTER: provider id (the name of its sysfs directory)
 * @handle:   REGISTER: out, the region handle; UNREGISTER: in
 * @offset:   REGISTER: for a "bar" provider, where the region starts in the
 *            BAR, page aligned; for a "p2pmem" provider, must be 0 (the
 *            memory is allocated from the provider, zeroed); with
 *            KVCACHE_REGION_USER, the caller's address where its mapping
 *            of the memory starts, page aligned
 * @length:   REGISTER: bytes, page aligned, non-zero, inside the provider
 * @reserved: must be 0
 *
 * A region belongs to the open file that registered it: only that file may
 * transfer into it, and closing the file unregisters it. Regions of a
 * "bar" provider need CAP_SYS_RAWIO (they are raw device memory) and may
 * not overlap another region of the provider (-EBUSY). UNREGISTER returns
 * at once; transfers already running on the region finish first, and the
 * memory is given back after them.
 *
 * KVCACHE_REGION_USER: the region is memory the caller has already mapped,
 * P2PDMA pages of the provider's device (what a GPU driver in P2PDMA mode,
 * or sysfs p2pmem/allocate, maps into a process); @length may not exceed
 * the device's BARs (-ERANGE). No capability is needed. Registration
 * checks the whole range; each transfer then pins the pages it moves, in
 * the registering process's address space, only while it moves them (the
 * kernel allows no long-term pin of P2PDMA pages). So the mapping must
 * stay while the region is used: a piece whose range is no longer mapped
 * fails with -EFAULT, one mapped to other memory meanwhile with -EINVAL
 * or -EXDEV, and nothing is written outside the pages named. Errors at
 * registration: -EINVAL for a range that is not P2PDMA memory, -EXDEV for
 * P2PDMA memory of another device than the provider's, -EFAULT for a
 * range not mapped whole, -EOPNOTSUPP on a kernel before 6.5 (no
 * FOLL_PCI_P2PDMA there).
 */
struct kvcache_region {
	__u32 size;
	__u32 flags;
	__u32 provider;
	__u32 handle;
	__u64 offset;
	__u64 length;
	__u64 reserved[2];
};

#define KVCACHE_REGION_SIZE_VER1	48

/* kvcache_region.flags */
#define KVCACHE_REGION_USER	_BITUL(0)	/* @offset: the caller's mapping */

/* kvcache_xfer_entry.flags */
#define KVCACHE_XFER_TO_FILE	_BITUL(0)	/* memory -> file; else file -> memory */
#define KVCACHE_XFER_BLOCK	_BITUL(1)	/* memory is a pool block, not a region */
#define KVCACHE_XFER_BOUNCE	_BITUL(2)	/* use the bounce path even if P2P works */

/* kvcache_xfer_entry.path: how the entry was (or would have been) moved */
#define KVCACHE_PATH_NONE	0	/* rejected before any I/O */
#define KVCACHE_PATH_P2P	1	/* device to device, no host memory */
#define KVCACHE_PATH_BOUNCE	2	/* through a pool block, copied by the CPU */
#define KVCACHE_PATH_HOST	3	/* straight between the file and a pool block */

/**
 * struct kvcache_xfer_entry - one transfer between a file and device memory
 * @fd:          the file: a regular file or a block device, opened with
 *               O_DIRECT, for reading (file -> memory) or writing
 * @flags:       KVCACHE_XFER_* bits
 * @file_offset: where in the file
 * @length:      bytes, non-zero, at most KVCACHE_XFER_MAX_LEN
 * @region:      a region handle of this open file (unless KVCACHE_XFER_BLOCK)
 * @reserved:    must be 0
 * @block:       with KVCACHE_XFER_BLOCK: a writable block of this file
 *               (file -> block) or a block this file owns or pinned
 *               (block -> file)
 * @offset:      where in the region or block
 * @result:      out: bytes moved, or a negative errno
 * @path:        out: KVCACHE_PATH_*
 * @reserved2:   must be 0
 *
 * The file side always uses direct I/O: @file_offset and @length must be
 * multiples of the file's logical block size. The P2P path also needs
 * @offset aligned to it; the bounce path accepts any @offset. A transfer
 * into bytes of a region or block that another transfer of this file is
 * writing at the moment fails with -EBUSY.
 */
struct kvcache_xfer_entry {
	__s32 fd;
	__u32 flags;
	__u64 file_offset;
	__u64 length;
	__u32 region;
	__u32 reserved;
	struct kvcache_handle block;
	__u64 offset;
	__s64 result;
	__u32 path;
	__u32 reserved2;
};

#define KVCACHE_XFER_MAX_LEN	_BITULL(30)	/* bytes in one entry */
#define KVCACHE_XFER_MAX_ASYNC	64	/* async batches in flight per file */

/**
 * struct kvcache_xfer - KVCACHE_IOC_XFER: run a batch of transfers
 * @size:     sizeof(struct kvcache_xfer)
 * @flags:    0 (synchronous) or KVCACHE_XFER_ASYNC
 * @count:    entries, 1..KVCACHE_MAX_BATCH
 * @eventfd:  ASYNC: an eventfd signalled (+1) when the batch is done, or
 *            -1 for none; synchronous: 0 or -1
 * @entries:  user pointer to @count struct kvcache_xfer_entry; the
 *            synchronous form writes each entry's result and path back
 * @id:       out, ASYNC: the batch id to pass to KVCACHE_IOC_XFER_REAP
 * @failed:   out, synchronous: entries whose result is negative
 * @reserved: must be 0
 *
 * Entries are independent: every entry is attempted, each reports its own
 * result. The call itself fails only for a bad header or entry array
 * (-EINVAL, -EFAULT), -ENOMEM, or (ASYNC) -EBUSY with
 * KVCACHE_XFER_MAX_ASYNC batches already in flight.
 */
struct kvcache_xfer {
	__u32 size;
	__u32 flags;
	__u32 count;
	__s32 eventfd;
	__u64 entries;
	__u64 id;
	__u32 failed;
	__u32 reserved0;
	__u64 reserved[2];
};

#define KVCACHE_XFER_SIZE_VER1	56

#define KVCACHE_XFER_ASYNC	_BITUL(0)

/**
 * struct kvcache_xfer_reap - KVCACHE_IOC_XFER_REAP: collect an async batch
 * @size:     sizeof(struct kvcache_xfer_reap)
 * @flags:    0 (wait, interruptibly) or KVCACHE_REAP_NOWAIT (-EAGAIN while
 *            the batch runs)
 * @count:    room in @entries: the batch's entry count (-EINVAL otherwise)
 * @failed:   out: entries whose result is negative
 * @id:       the id KVCACHE_IOC_XFER returned (-ENOENT if unknown)
 * @entries:  user pointer: the batch's entries, with results, are written
 *            here; the id is then forgotten
 * @reserved: must be 0
 */
struct kvcache_xfer_reap {
	__u32 size;
	__u32 flags;
	__u32 count;
	__u32 failed;
	__u64 id;
	__u64 entries;
	__u64 reserved[2];
};

#define KVCACHE_XFER_REAP_SIZE_VER1	48

#define KVCACHE_REAP_NOWAIT	_BITUL(0)

#define KVCACHE_IOC_MAGIC	0xBC

#define KVCACHE_IOC_INFO	_IOWR(KVCACHE_IOC_MAGIC, 0x00, struct kvcache_info)
#define KVCACHE_IOC_ALLOC	_IOWR(KVCACHE_IOC_MAGIC, 0x01, struct kvcache_alloc)
#define KVCACHE_IOC_SEAL	_IOWR(KVCACHE_IOC_MAGIC, 0x02, struct kvcache_batch)
#define KVCACHE_IOC_PIN		_IOWR(KVCACHE_IOC_MAGIC, 0x03, struct kvcache_batch)
#define KVCACHE_IOC_UNPIN	_IOWR(KVCACHE_IOC_MAGIC, 0x04, struct kvcache_batch)
#define KVCACHE_IOC_EVICT	_IOWR(KVCACHE_IOC_MAGIC, 0x05, struct kvcache_batch)
#define KVCACHE_IOC_QUERY	_IOWR(KVCACHE_IOC_MAGIC, 0x06, struct kvcache_query)
#define KVCACHE_IOC_NS_CREATE	_IOWR(KVCACHE_IOC_MAGIC, 0x07, struct kvcache_ns)
#define KVCACHE_IOC_NS_DESTROY	_IOWR(KVCACHE_IOC_MAGIC, 0x08, struct kvcache_ns)
#define KVCACHE_IOC_HELPER	_IOWR(KVCACHE_IOC_MAGIC, 0x09, struct kvcache_helper)
#define KVCACHE_IOC_REGION_REGISTER \
	_IOWR(KVCACHE_IOC_MAGIC, 0x0A, struct kvcache_region)
#define KVCACHE_IOC_REGION_UNREGISTER \
	_IOWR(KVCACHE_IOC_MAGIC, 0x0B, struct kvcache_region)
#define KVCACHE_IOC_XFER	_IOWR(KVCACHE_IOC_MAGIC, 0x0C, struct kvcache_xfer)
#define KVCACHE_IOC_XFER_REAP	_IOWR(KVCACHE_IOC_MAGIC, 0x0D, struct kvcache_xfer_reap)
#define KVCACHE_IOC_DISCARD	_IOWR(KVCACHE_IOC_MAGIC, 0x0E, struct kvcache_batch)

/* ---- generic netlink: family "kvcache" -------------------------------- */

#define KVCACHE_GENL_NAME	"kvcache"
#define KVCACHE_GENL_VERSION	1
#define KVCACHE_GENL_MCGRP	"events"

enum kvcache_genl_cmd {
	KVCACHE_CMD_UNSPEC,
	KVCACHE_CMD_GET_POOL,	/* request: reply carries the pool attributes */
	KVCACHE_CMD_PRESSURE,	/* multicast event: the pool attributes */
	__KVCACHE_CMD_MAX,
};

enum kvcache_genl_attr {
	KVCACHE_A_UNSPEC,
	KVCACHE_A_FREE_BLOCKS,		/* u32 */
	KVCACHE_A_NR_BLOCKS,		/* u32 */
	KVCACHE_A_LOW_WATERMARK,	/* u32, blocks */
	KVCACHE_A_HIGH_WATERMARK,	/* u32, blocks */
	KVCACHE_A_PRESSURE,		/* u8: 1 below low, 0 back above high */
	__KVCACHE_A_MAX,
};

#define KVCACHE_A_MAX (__KVCACHE_A_MAX - 1)

#endif /* _UAPI_LINUX_KVCACHE_H */
