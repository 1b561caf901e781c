/* SPDX-License-Identifier: GPL-2.0 */
/*
 * policy_sim: what a pool of a given number of blocks keeps of a request
 * trace (trace.h), two ways:
 *
 *  - kvc_psim_run(): the policies of helper/kvcached/policy.c driven as
 *    kvcached drives them in memfd mode when a client replays the trace
 *    (policy_bench.c does that against the real daemon): per request a
 *    LOOKUP of the chain (each pool hit is an access, in chain order),
 *    then ALLOC and STORE of the missed blocks in batches; an ALLOC that
 *    does not fit evicts leaves, one victim at a time, until the batch
 *    and the high watermark's blocks are free (reclaim.c's pass), and a
 *    STORE whose parent went meanwhile is refused. The two must agree
 *    request by request; policy_bench checks that they do.
 *  - kvc_psim_belady(): the offline optimum. Evict the block whose next
 *    use is farthest (never used again ranks last, deepest first), and
 *    do not admit a block whose next use is farther than that (bypass).
 *    A block is used only after its ancestors (they are its prefix), so
 *    an ancestor's next use is never later than a descendant's: the
 *    cache stays prefix-closed, every present block of a request is in
 *    its leading run, and the prefix constraint costs MIN nothing. MIN
 *    is optimal for unit-size blocks, so this is the exact bound
 *    (test_policy_sim checks it against exhaustive search).
 */
#ifndef KVC_POLICY_SIM_H
#define KVC_POLICY_SIM_H

#include <stdint.h>

#include "trace.h"

/* The namespace a replay uses, in the daemon and here. */
#define KVC_PSIM_NS		1

struct kvc_psim_opts {
	const char *policy;		/* "lru", "s3fifo", ... */
	unsigned int small_pct;		/* s3fifo's small queue, 0: default */
	uint32_t capacity;		/* pool blocks */
	unsigned int high_pct;		/* [pool] high_watermark */
	uint32_t batch;			/* ALLOC/STORE batch, blocks */
};

struct kvc_psim_result {
	uint64_t hit_blocks, blocks;	/* of all requests' chains */
	uint64_t hit_tokens, tokens;
	uint64_t evictions, refused;	/* refused: STOREs refused */
	/* Per request, the matched blocks, if the caller gave an array. */
	uint32_t *matched;
};

/*
 * Two tiers, simulated only: the pool as kvc_psim_run() has it, and a
 * write-back g3 of g3_capacity blocks below it. A block the pool evicts
 * is written to g3 when it is not there yet and has been accessed at
 * least admit times (every block of a request's chain is an access),
 * as g3_admit does; g3 evicts by g3_policy, leaves first. A LOOKUP
 * matches across both; a block found only in g3 is read back into the
 * pool. What admission costs and buys: blocks written to g3 against the
 * hits g3 adds over the pool alone.
 */
struct kvc_psim_tier_opts {
	struct kvc_psim_opts pool;
	const char *g3_policy;
	uint32_t g3_capacity;
	unsigned int admit;		/* 1..255 */
};

struct kvc_psim_tier_result {
	struct kvc_psim_result r;	/* hits from either tier */
	uint64_t g3_hits;		/* blocks found in g3 only */
	uint64_t written;		/* blocks written to g3 */
	uint64_t g3_evictions;
};

int kvc_psim_tiers(const struct kvc_trace *t,
		   const struct kvc_psim_tier_opts *o,
		   struct kvc_psim_tier_result *r);

/* The key a replay gives dense block b. */
void kvc_psim_key(uint32_t b, uint8_t key[32]);

/* Blocks per ALLOC and STORE for a pool of capacity blocks. */
uint32_t kvc_psim_batch(uint32_t capacity);

/* 0, or -errno (-EINVAL: unknown policy; -ENOMEM). */
int kvc_psim_run(const struct kvc_trace *t, const struct kvc_psim_opts *o,
		 struct kvc_psim_result *r);

/* 0 or -ENOMEM. */
int kvc_psim_belady(const struct kvc_trace *t, uint32_t capacity,
		    struct kvc_psim_result *r);

/* Count request i's hits of matched blocks into r. */
void kvc_psim_count(const struct kvc_trace *t, size_t i, uint32_t matched,
		    struct kvc_psim_result *r);

#endif /* KVC_POLICY_SIM_H */
