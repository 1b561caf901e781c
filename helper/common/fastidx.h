/* SPDX-License-Identifier: GPL-2.0 */
/*
 * fastidx: the pool's resident blocks, published read-only in shared
 * memory, so a client finds a DRAM hit and copies it without a round trip
 * to kvcached (Documentation/design/pool.md, "The fast path").
 *
 * A memfd sealed against writable mappings by anyone but the daemon
 * (F_SEAL_FUTURE_WRITE). memfd mode: one per daemon, passed by FAST_MAP
 * only to a peer that was given the pool, which may read every namespace
 * anyway. Kernel mode: one per namespace, passed by FAST_NS only to a
 * peer that may read that namespace. Either way the segment shows no key
 * its reader could not already read.
 *
 * Layout (host byte order, shared by processes of one machine):
 *   header   64 bytes (struct kvc_fastidx_hdr)
 *   desc     one 64-byte descriptor per pool block: its sequence, and
 *            the namespace, generation, key, parent and tiers it was
 *            published with
 *   buckets  nr_buckets of 8 slots (one cache line): tag << 32 | index + 1
 *
 * A descriptor's sequence is 0 until its block is first published, then
 * odd while the block is not published and even (never 0) while it is;
 * it only grows. (0 lets a new segment leave its descriptor pages
 * untouched: a segment per namespace uses memory only where that
 * namespace's blocks are.) The daemon (one thread) publishes a
 * block by writing the fields and then the even sequence (release), and
 * takes it back by clearing its slot and storing the odd sequence before
 * the block can be freed, zeroed or handed to a writer. A reader finds a
 * slot, reads an even sequence, compares namespace and key, copies the
 * block's bytes from the pool, and keeps them only if the sequence is
 * unchanged afterwards (kvc_fastidx_still()): a block taken back and
 * reused meanwhile fails that check, so a reader never keeps another
 * block's bytes. A miss or a failed check is not an error: the caller
 * asks the daemon. A full bucket leaves a block reachable only through
 * the daemon.
 *
 * The seals leave fallocate(2) inside the size allowed: a reader can make
 * a sparse segment resident, at most its fixed size, charged to its own
 * memory cgroup (Documentation/design/pool.md, "What a reader can make
 * resident").
 *
 * Threads: the writer functions belong to the daemon's one thread; the
 * reader functions may run in any number of threads and processes.
 */
#ifndef KVC_FASTIDX_H
#define KVC_FASTIDX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/kvcache.h>

#define KVC_FASTIDX_MAGIC	0x4946564Bu	/* "KVFI" */
#define KVC_FASTIDX_VERSION	1
#define KVC_FASTIDX_WAYS	8

struct kvc_fastidx {
	int fd;			/* the memfd; -1 for a reader's view */
	bool writer;
	uint8_t *map;
	size_t len;
	uint32_t nr_blocks;
	uint32_t nr_buckets;	/* a power of two */
	uint64_t full;		/* writer: blocks a full bucket left out */
};

/*
 * Daemon: a segment for nr_blocks pool blocks, nothing published.
 * 0 or -errno.
 */
int kvc_fastidx_create(uint32_t nr_blocks, struct kvc_fastidx **out);
void kvc_fastidx_destroy(struct kvc_fastidx *f);
/* Tell readers that this daemon is going: every check fails from now. */
void kvc_fastidx_retire(struct kvc_fastidx *f);
/*
 * Publish block h of namespace ns under key (taking back what was there):
 * the first block of a chain (parent NULL) or the child of parent, a copy
 * of an entry present in tiers (a bit per tier, index.h).
 */
void kvc_fastidx_publish(struct kvc_fastidx *f, struct kvcache_handle h,
			 uint32_t ns, const uint8_t key[KVCACHE_KEY_SIZE],
			 const uint8_t *parent, uint8_t tiers);
/* The entry block index holds gained or lost a tier: its new tiers. */
void kvc_fastidx_set_tiers(struct kvc_fastidx *f, uint32_t index,
			   uint8_t tiers);
/* Take block index back; a no-op when it is not published. */
void kvc_fastidx_unpublish(struct kvc_fastidx *f, uint32_t index);

/*
 * Client: map the segment a FAST_MAP reply passed, read-only, after
 * checking its header against the pool's nr_blocks. 0, -EPROTO (not a
 * segment for this pool) or -errno.
 */
int kvc_fastidx_attach(int fd, uint32_t nr_blocks, struct kvc_fastidx **out);
void kvc_fastidx_detach(struct kvc_fastidx *f);

/* What kvc_fastidx_find() found. */
struct kvc_fastidx_hit {
	struct kvcache_handle h;
	uint64_t seq;		/* to check with kvc_fastidx_still() */
	uint8_t tiers;		/* where the entry is (pool included) */
};

/* Also check the block's place in its chain (as LOOKUP does). */
#define KVC_FASTIDX_CHAIN	(1u << 0)

/*
 * Find (ns, key). With KVC_FASTIDX_CHAIN, only as the child of parent
 * (its key), or as the first block of a chain when parent is NULL. true
 * when found; false is a miss (not there, or changing right now).
 */
bool kvc_fastidx_find(const struct kvc_fastidx *f, uint32_t ns,
		      const uint8_t key[KVCACHE_KEY_SIZE],
		      const uint8_t *parent, unsigned int flags,
		      struct kvc_fastidx_hit *hit);
/* Whether the daemon behind the segment has retired it (it is going). */
bool kvc_fastidx_retired(const struct kvc_fastidx *f);
/*
 * After reading block index: true when it was published all along under
 * sequence seq, so what was read is its bytes.
 */
bool kvc_fastidx_still(const struct kvc_fastidx *f, uint32_t index,
		       uint64_t seq);

#endif /* KVC_FASTIDX_H */
