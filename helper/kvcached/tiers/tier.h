/* SPDX-License-Identifier: GPL-2.0 */
/*
 * tier: one persistent tier of kvcached, G3 (a directory on local NVMe)
 * or G4 (a directory on a filesystem several nodes share), described in
 * Documentation/design/tiers.md.
 *
 * A tier owns its directory: one sub-directory per namespace, ns<id>/,
 * holding block files (blockfile.h); .gc/ for blocks a shared tier has
 * collected but not yet deleted; quarantine/ under each namespace
 * directory. It keeps the index's presence bit for its tier in step with
 * the files, accounts the bytes the directory holds against its capacity,
 * evicts (least recently used first, leaves first, by the policy module)
 * and does its I/O through tierio.
 *
 * Shared tiers (G4) add what several writers on one directory need:
 *  - the usage is the whole directory's, measured by a rescan that runs
 *    in slices from the daemon's tick and completes every scan interval,
 *    which also finds blocks other nodes published and forgets those they
 *    removed;
 *  - a read renews a lease on the file (its mtime, at most every grace/4),
 *    and GC skips any file whose mtime is within the grace period: the LRU
 *    is global, approximately (a node's own order, checked against every
 *    node's reads);
 *  - GC renames a victim into .gc/ and deletes it only a grace period
 *    later, so a node that opened it before keeps reading it (NFS
 *    included: its file handle survives a rename, not an unlink).
 *
 * Single-threaded: the daemon's loop calls everything.
 */
#ifndef KVC_TIER_H
#define KVC_TIER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "index.h"
#include "tierio.h"

struct kvc_tier_config {
	unsigned int tier;		/* KVC_TIER_G3 or KVC_TIER_G4 */
	const char *dir;		/* must exist */
	uint64_t capacity;		/* bytes of block files */
	bool shared;			/* other nodes use the directory */
	bool fsync;			/* fsync each file and its directory */
	unsigned int depth;		/* I/O queue depth */
	uint64_t max_payload;		/* the pool's block size */
	const char *node;		/* this node's name */
	uint64_t grace_ms;		/* lease and GC grace (shared) */
	uint64_t scan_interval_ms;	/* a full rescan (shared) */
	const char *policy;		/* eviction, policy.h; NULL: "lru" */
	bool io_priority;		/* tierio.h */
	/*
	 * Whose files, besides the effective uid's, are kvcached's own in
	 * this directory: [g4] trusted_uid, the uid a root-squashing server
	 * gives them; (uid_t)-1 for none. .nodes/, .gc/ and .quarantine/ of
	 * another owner are not trusted.
	 */
	uid_t trusted_uid;
};

/* Counters, for STATS and the metrics endpoint. */
struct kvc_tier_stats {
	uint64_t usage;			/* bytes, as accounted */
	uint64_t blocks;		/* present in the index */
	uint64_t spills, spill_bytes, spill_errors, spill_exists;
	uint64_t reads, read_bytes, read_errors, misses;
	uint64_t corrupt;		/* quarantined */
	uint64_t evictions;		/* files GC removed */
	uint64_t lease_skips;		/* GC victims another node was using */
	uint64_t scans;			/* full passes */
	uint64_t found;			/* blocks a scan added to the index */
	uint64_t lost;			/* blocks a scan found gone */
	uint64_t unreachable;		/* files whose parent is missing */
	int last_error;			/* -errno of the last failed spill */
};

/* What kvc_tier_reap() reports of a finished request. */
struct kvc_tier_done {
	int op;				/* KVC_TIO_WRITE or KVC_TIO_READ */
	int status;			/* 0 or -errno; corrupt: -EBADMSG */
	uint32_t ns;
	const uint8_t *key;
	uint32_t id;			/* the entry, KVC_ID_NONE if gone */
	uint64_t cookie;
	const uint8_t *payload;		/* READ, status 0 */
	uint64_t payload_len;
	uint64_t bytes;			/* status 0: the file's size */
};

typedef void (*kvc_tier_done_fn)(void *arg, const struct kvc_tier_done *d);
/* Whether a namespace exists locally: a scan ignores the others. */
typedef bool (*kvc_tier_ns_fn)(void *arg, uint32_t ns);

struct kvc_tier;

/*
 * Open the tier: check the directory (-ENOENT, -ENOTDIR; it is never
 * created, so an unmounted filesystem fails loudly instead of filling
 * the root filesystem), set up the I/O engine and the policy. A
 * directory that cannot be written (read-only filesystem, no permission)
 * opens read-only: reads work, spills fail with -EROFS or -EACCES.
 */
int kvc_tier_open(struct kvc_tier **out, const struct kvc_tier_config *cfg,
		  struct kvc_index *idx);
void kvc_tier_close(struct kvc_tier *t);
/*
 * A shared tier: claim this node's name in it (<dir>/.nodes/<node>,
 * tier_node.c), renewed from the tick, given back at close. 0;
 * -EADDRINUSE when a live daemon holds the name (on this machine, or
 * another host renewed it within 5 minutes), with why filled; -errno.
 * A claim taken over from a silent or unreadable one is 0 with why set.
 */
int kvc_tier_node_claim(struct kvc_tier *t, char *why, size_t len);
void kvc_tier_node_beat(struct kvc_tier *t);
void kvc_tier_node_release(struct kvc_tier *t);

/*
 * The full scan (kvc_tier_recover() runs it when there is no manifest of
 * this node): read the header of every block file (not the payloads: every
 * read verifies them anyway) of every namespace ns_ok() accepts, insert
 * the blocks into the index, parents first, and account the bytes.
 * Removes this node's temp files left by a crash, and other temp files
 * and unreachable blocks older than the grace period. Returns the number
 * of blocks found, or -errno when the directory cannot be read. Writes
 * this node's manifest from what it found.
 */
long kvc_tier_scan(struct kvc_tier *t, kvc_tier_ns_fn ns_ok, void *arg);

/*
 * Recovery as kvcached does it at start: from the manifests (this node's
 * for g3, every node's for g4; manifest.h) when there are: each named
 * file is checked with one stat() (present, of its recorded size; a
 * mismatch is quarantined), blocks go into the index parents first, this
 * node's stale temp files next to them are removed; then a scan runs in
 * the background (kvc_tier_tick) for what no manifest names. With no
 * manifest of this node, kvc_tier_scan(). Rewrites this node's manifest
 * from what was found. Returns the blocks found, or -errno.
 */
long kvc_tier_recover(struct kvc_tier *t, kvc_tier_ns_fn ns_ok, void *arg);

/*
 * Spill, in two steps (tierio.h): reserve a slot and get where the
 * payload goes (-EBUSY when the queue is full, -EROFS/-EACCES for a
 * read-only tier), then submit it as entry @id's block. submit makes
 * room first (GC) and fails with -ENOSPC when it cannot; -EEXIST when
 * the block is already in the tier. Errors are counted.
 */
int kvc_tier_spill_begin(struct kvc_tier *t, uint8_t **payload);
int kvc_tier_spill_submit(struct kvc_tier *t, int slot, uint32_t id,
			  uint64_t payload_len);
void kvc_tier_spill_cancel(struct kvc_tier *t, int slot);

/*
 * Read entry @id's block (it must be present in this tier): 0 (the
 * callback comes), -EBUSY (queue full, retry later), or a miss at once
 * (-ENOENT, corrupt: the presence bit is cleared and a corrupt file
 * quarantined).
 */
int kvc_tier_fetch(struct kvc_tier *t, uint32_t id, uint64_t cookie);
/*
 * The same, with the payload read in place into @dst (kvc_tio_read_into()
 * says what it must be): the completion's payload is @dst.
 */
int kvc_tier_fetch_into(struct kvc_tier *t, uint32_t id, uint64_t cookie,
			uint8_t *dst, uint64_t dst_len);

/* Would a fetch find a free slot now? (Else it is -EBUSY.) */
bool kvc_tier_can_fetch(const struct kvc_tier *t);

/* Is a spill of entry id in flight? */
bool kvc_tier_spilling(const struct kvc_tier *t, uint32_t id);
/* Requests (writes and reads) submitted and not yet reaped. */
unsigned int kvc_tier_in_flight(const struct kvc_tier *t);

/* The eventfd to poll, and the completions (callbacks) it signals. */
int kvc_tier_fd(const struct kvc_tier *t);
int kvc_tier_reap(struct kvc_tier *t, bool wait, kvc_tier_done_fn fn,
		  void *arg);

/*
 * Periodic work, from the daemon's tick: what the tier's metadata worker
 * finished (tier_worker.c) is applied; a rescan is posted to it every
 * scan interval (shared tiers; g3 once after a recovery) and applied a
 * slice per tick; deleting collected files past their grace, and GC
 * when the usage is over capacity. The worker does every directory
 * listing, stat, rename and unlink of these, so a slow or unreachable
 * shared filesystem delays them, not the daemon.
 */
void kvc_tier_tick(struct kvc_tier *t, kvc_tier_ns_fn ns_ok, void *arg);

/* Wait for the worker's jobs and apply them (tests; a tick's work). */
void kvc_tier_settle(struct kvc_tier *t);

/*
 * Other work on the tier's filesystem, off the daemon's thread: run(arg)
 * on the tier's metadata worker, in order with its other jobs, then
 * done(arg) on the daemon's thread at a later tick. run must touch
 * nothing of the daemon's but what arg gives it. done is called once in
 * any case, also at the tier's close for a job run never saw (arg must
 * say whether it ran). 0, or -EAGAIN (the worker's queue is full) /
 * -ENOMEM: then neither is called.
 */
typedef void (*kvc_tier_call_fn)(void *arg);
int kvc_tier_call(struct kvc_tier *t, kvc_tier_call_fn run,
		  kvc_tier_call_fn done, void *arg);

/*
 * The index entry @id leaves the index's view of this tier for a reason
 * other than the tier's own (an admin EVICT): remove its file too.
 */
int kvc_tier_drop(struct kvc_tier *t, uint32_t id);

/* A hit on the entry (LOOKUP or LOAD): for the LRU. */
void kvc_tier_touch(struct kvc_tier *t, uint32_t id);

const struct kvc_tier_stats *kvc_tier_stats(const struct kvc_tier *t);
uint64_t kvc_tier_capacity(const struct kvc_tier *t);
/*
 * A new capacity, in bytes (a reload): spills are measured against it at
 * once, and a tier over it evicts from the next tick on, a bounded number
 * of files a tick (tier_gc()).
 */
void kvc_tier_set_capacity(struct kvc_tier *t, uint64_t bytes);
bool kvc_tier_writable(const struct kvc_tier *t);
unsigned int kvc_tier_index(const struct kvc_tier *t);	/* KVC_TIER_* */

#endif /* KVC_TIER_H */
