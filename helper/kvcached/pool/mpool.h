/* SPDX-License-Identifier: GPL-2.0 */
/*
 * mpool: the block pool in a memfd, for hosts without kvcache.ko.
 *
 * In containers where the module cannot be loaded, kvcached provides the
 * DRAM tier itself (as GPUDirect Storage's compatibility mode does without
 * its driver): one memfd, hugetlb-backed when the host has huge pages,
 * cut into fixed-size blocks, passed to clients with SCM_RIGHTS. The
 * daemon keeps the state machine the kernel keeps in kernel mode, with
 * the same rules and errors (Documentation/design/pool.md):
 *
 *   FREE --alloc--> WRITABLE (one client) --seal--> SEALED --evict--> FREE
 *
 * with generations (a stale handle is -ESTALE), pins per client, and
 * everything a client held released when its connection closes. What the
 * daemon cannot do without the kernel: stop a client that maps the memfd
 * from writing a block it does not own. Isolation in this mode is between
 * cooperating processes of one trust domain; the kernel mode is the one
 * for mutually untrusted tenants.
 *
 * Clients are small integers (0..KVC_MPOOL_MAX_CLIENTS-1) the daemon
 * assigns per connection. Single-threaded: the daemon's event loop owns it.
 */
#ifndef KVC_MPOOL_H
#define KVC_MPOOL_H

#include <stdbool.h>
#include <stdint.h>

#include <linux/kvcache.h>

/* Connections 0..1023, and the daemon itself (it promotes blocks). */
#define KVC_MPOOL_MAX_CLIENTS	1025
#define KVC_MPOOL_SELF		1024

struct kvc_mpool;

struct kvc_mpool_config {
	uint64_t block_size;	/* power of two, 4 KiB .. 64 MiB */
	uint64_t pool_size;	/* a multiple of block_size */
	int hugetlb;		/* 1: required, 0: never, -1: when available
				 * (pool_size whole 2 MiB pages either way) */
	bool mlock;		/* populate and lock the pool's pages */
};

/*
 * Create the memfd and the block table. Returns 0, -EINVAL (geometry),
 * -ENOMEM (hugetlb required but no huge pages, or no memory), -EPERM or
 * -ENOMEM from mlock (no CAP_IPC_LOCK and too small an RLIMIT_MEMLOCK),
 * or -errno from memfd_create/ftruncate.
 */
int kvc_mpool_create(const struct kvc_mpool_config *cfg,
		     struct kvc_mpool **out);
void kvc_mpool_destroy(struct kvc_mpool *p);

int kvc_mpool_fd(const struct kvc_mpool *p);	/* to pass to clients */
bool kvc_mpool_hugetlb(const struct kvc_mpool *p);
bool kvc_mpool_locked(const struct kvc_mpool *p);	/* mlock took */
uint64_t kvc_mpool_block_size(const struct kvc_mpool *p);
uint32_t kvc_mpool_nr_blocks(const struct kvc_mpool *p);
uint32_t kvc_mpool_nr_free(const struct kvc_mpool *p);	/* dirty too */
uint32_t kvc_mpool_nr_dirty(const struct kvc_mpool *p);
/*
 * Zero up to @max free blocks that still hold their last life's bytes,
 * ahead of the ALLOCs that will take them; returns how many.
 */
uint32_t kvc_mpool_zero_ahead(struct kvc_mpool *p, uint32_t max);

/*
 * count blocks for @client in namespace @ns, zeroed, all or nothing.
 * Returns 0, -EINVAL (count 0 or above KVCACHE_MAX_BATCH, bad client) or
 * -ENOSPC.
 */
int kvc_mpool_alloc(struct kvc_mpool *p, uint32_t client, uint32_t ns,
		    uint32_t count, struct kvcache_handle *out);
/* -EINVAL, -ESTALE, -EPERM (another client's), as the kernel's SEAL. */
int kvc_mpool_seal(struct kvc_mpool *p, uint32_t client,
		   struct kvcache_handle h, uint32_t payload_len,
		   const uint8_t key[KVCACHE_KEY_SIZE]);
/* Pins of sealed blocks, counted per client: -EINVAL, -ESTALE, -EBUSY. */
int kvc_mpool_pin(struct kvc_mpool *p, uint32_t client,
		  struct kvcache_handle h);
int kvc_mpool_unpin(struct kvc_mpool *p, uint32_t client,
		    struct kvcache_handle h);
/* Free a sealed, unpinned block: -EINVAL, -ESTALE, -EBUSY (pinned). */
int kvc_mpool_evict(struct kvc_mpool *p, struct kvcache_handle h,
		    uint32_t *ns);
/*
 * Give back one writable block of @client unsealed (a promotion that
 * failed): -EINVAL, -ESTALE, -EPERM (another client's), -EBUSY (sealed).
 */
int kvc_mpool_discard(struct kvc_mpool *p, uint32_t client,
		      struct kvcache_handle h);
/* The client's connection closed: its pins drop, its unsealed blocks go. */
void kvc_mpool_release_client(struct kvc_mpool *p, uint32_t client);
/*
 * Sealed blocks from index @start on (of namespace @ns, or any with
 * KVCACHE_NS_ANY), at most @max; *next is where to continue (nr_blocks
 * when done). Returns the number filled.
 */
uint32_t kvc_mpool_query(const struct kvc_mpool *p, uint32_t start,
			 uint32_t ns, struct kvcache_block_info *out,
			 uint32_t max, uint32_t *next);
/*
 * Block @index alone, if sealed: its info in *out, true. In time that
 * does not depend on the other blocks (kvc_mpool_query() walks on to the
 * next sealed one).
 */
bool kvc_mpool_block(const struct kvc_mpool *p, uint32_t index,
		     struct kvcache_block_info *out);

#endif /* KVC_MPOOL_H */
