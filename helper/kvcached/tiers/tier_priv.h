/* SPDX-License-Identifier: GPL-2.0 */
/*
 * tier_priv: one persistent tier's private state (tier.h), shared by
 *   tier.c          presence, open and close, the periodic work
 *   tier_rw.c       spills and fetches through tierio, their completions
 *   tier_scan.c     rescans of a shared directory
 *   tier_recover.c  recovery from the nodes' manifests at open
 *   tier_gc.c       capacity: eviction of files, delayed deletion
 * and by nothing else.
 *
 * Per-entry state lives in arrays indexed by index id, grown on demand:
 *   mark[id]      the rescan pass that last saw (or wrote) the file
 *   touched[id]   when this node last renewed the file's lease, seconds
 *   spilling[id]  a write of the block is in flight
 * Ids are reused after an entry leaves the index, so these are hints
 * (a stale one costs at most a skipped spill or an early lease renewal);
 * what a finished request applies to is found again by (ns, key).
 *
 * A request in flight has a pend record (one per I/O slot) holding its
 * namespace, key and size; its index is the tierio cookie.
 *
 * Single-threaded, as the daemon.
 */
#ifndef KVC_TIER_PRIV_H
#define KVC_TIER_PRIV_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "blockfile.h"
#include "tier.h"
#include "tierio.h"

/* A rescan's time per tick at most (one step at least: kvc_tier_tick). */
#define TIER_SCAN_BUDGET_S	0.005

struct pend {
	bool used;
	bool write;
	bool first;			/* write: no parent */
	uint32_t ns;
	uint32_t id;
	uint8_t key[KVC_BF_KEY_SIZE];
	uint8_t parent[KVC_BF_KEY_SIZE];	/* write */
	uint64_t size;			/* file bytes */
	uint64_t cookie;
};

/* A block file a scan found and the index does not have yet. */
struct rec {
	uint32_t ns;
	bool first;
	uint8_t key[KVC_BF_KEY_SIZE];
	uint8_t parent[KVC_BF_KEY_SIZE];
	uint64_t size;
	int64_t mtime;
};

struct kvc_tier {
	struct kvc_tier_config cfg;
	char dir[PATH_MAX - 64];	/* room for ns<id>/aa/bb/<key>.kvb */
	char node[KVC_BF_MAX_TAG + 1];
	struct kvc_index *idx;
	struct kvc_policy *policy;
	struct kvc_tio *tio;
	bool writable;
	int write_err;			/* why not writable */
	int mf_fd;			/* this node's manifest, or -1 */
	char mf_path[PATH_MAX];
	int node_fd;			/* shared: our claim on the name */
	char node_path[PATH_MAX];	/* <dir>/.nodes/<node> */
	int64_t node_beat;		/* its last rewrite, wall clock */
	uint64_t mf_records;		/* appended since it was rewritten */
	bool bg_pass;			/* g3: one scan after a recovery */
	int64_t opened;			/* wall clock at open, seconds */
	struct kvc_tier_stats st;

	uint32_t *mark, *touched;
	uint8_t *spilling;
	size_t nids;			/* length of the arrays */

	struct pend *pend;		/* cfg.depth records */

	/* The rescan in progress (shared tiers). */
	uint32_t pass;			/* number of the pass, from 1 */
	bool in_pass;
	uint32_t *scan_ns;		/* namespaces of this pass */
	size_t scan_nns, scan_pos;	/* position: ns index * 256 + aa */
	struct rec *recs;
	size_t nrecs, caprecs;
	size_t *chain, capchain;	/* insert_rec()'s stack */
	uint64_t pass_bytes;		/* bytes of files seen this pass */
	uint64_t orphan_bytes;		/* unreachable files' bytes */
	struct timespec pass_start, last_step;
};

/* tier.c */
/* Wall clock, seconds: leases and ages are compared across nodes. */
int64_t tier_now_s(void);
/* The namespace's directory: dir/ns<id> (t->dir leaves room for it). */
void tier_ns_dir(const struct kvc_tier *t, uint32_t ns, char *out,
		 size_t len);
/* Grow the per-entry arrays to hold id: 0 or -ENOMEM. */
int tier_ensure_ids(struct kvc_tier *t, uint32_t id);
/* Block (ns, key)'s file path: 0, or -ENAMETOOLONG. */
int tier_file_path(const struct kvc_tier *t, uint32_t ns,
		   const uint8_t *key, char *out, size_t len);
bool tier_is_present(const struct kvc_tier *t, uint32_t id);
/* The entry is in this tier, in a file of size bytes. */
int tier_set_present(struct kvc_tier *t, uint32_t id, uint64_t size);
/* The file is gone (or going): the entry is no longer in this tier. */
void tier_set_absent(struct kvc_tier *t, uint32_t id);
/* Move a corrupt file aside for examination; count it. */
void tier_quarantine(struct kvc_tier *t, uint32_t ns, const uint8_t *key);
/* An error that says the file is bad, not the disk? */
bool tier_corrupt_err(int err);

/* tier_scan.c */
int tier_pass_begin(struct kvc_tier *t, kvc_tier_ns_fn ns_ok, void *arg);
void tier_pass_end(struct kvc_tier *t);
void tier_scan_step(struct kvc_tier *t, uint32_t ns, unsigned int aa,
		    int64_t now);
int tier_push_rec(struct kvc_tier *t, const struct rec *r);
void tier_scan_tmp(struct kvc_tier *t, const char *path, const char *name,
		   int64_t now);

/* tier_recover.c */
/* Rewrite this node's manifest with the files it has now. */
void tier_mf_compact(struct kvc_tier *t);

/* tier_gc.c */
void tier_gc(struct kvc_tier *t, uint64_t need);
void tier_gc_trash(struct kvc_tier *t);

#endif /* KVC_TIER_PRIV_H */
