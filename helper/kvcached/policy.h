/* SPDX-License-Identifier: GPL-2.0 */
/*
 * policy: which blocks a tier evicts, and which it admits
 * (Documentation/design/eviction.md).
 *
 * A policy object serves one tier of one index and tracks the index ids
 * present in that tier, as the caller reports them:
 *
 *   kvc_index_set(idx, id, tier, loc);    kvc_policy_on_insert(p, id);
 *   (a hit)                               kvc_policy_on_access(p, id);
 *   kvc_index_clear(idx, id, tier);       kvc_policy_on_remove(p, id);
 *
 * on_insert after the index says present, on_remove after it says absent
 * and before the entry is removed from the index: the policy reads the
 * entry's parent and child counts at those moments.
 *
 * Leaf first: kvc_policy_pick() returns only entries none of whose
 * children is present in the tier, so a block goes before its prefix. A
 * picked victim is detached: the policy will not return it again. The
 * caller evicts it (kvc_index_clear, then on_remove as for any removal), or
 * gives it back with on_insert if it cannot (it counts as a new insert).
 * Its parent becomes a candidate once the victim's on_remove came in.
 *
 * Policies, by name:
 *   "lru"     least recently inserted or accessed leaf
 *   "s3fifo"  S3-FIFO: small FIFO (10% unless kvc_policy_set_small() says
 *             otherwise), main FIFO with a 2-bit frequency, ghost FIFO of
 *             blocks evicted from small
 *   "cost"    GreedyDual: H = L + cost(depth), cost(d) = KVC_COST_BASE + d,
 *             L = the H of the last victim; evicts the lowest H
 *   "density" hit density learned per class and age (policy_density.h):
 *             the least dense of KVC_DENSITY_SAMPLES leaves sampled with
 *             a fixed-seed stream (the same calls, the same victims)
 * "lru" and "cost" break ties (same H) by the older insert or access.
 *
 * Costs: "lru" and "cost" keep the candidate leaves in a binary heap,
 * O(log n) per call; "s3fifo" is O(1) per call, pick is O(1) amortized;
 * "density" is O(1) per call, O(KVC_DENSITY_SAMPLES) per victim, and
 * recomputes its 8 x 128 table every capacity-hint ticks (1024 at
 * least). Memory, per id up to the largest id seen: 25 bytes for "lru"
 * and "cost" (plus 4 per heap slot), 13 for "s3fifo" (plus 40 to 72 per
 * ghost slot; the ghost holds main's share of the capacity hint, 90% by
 * default), 17 for "density" (plus 4 per candidate, and 24 KiB of
 * model).
 *
 * Threads: none inside; the caller serializes all calls on one policy and
 * keeps the index unchanged meanwhile.
 */
#ifndef KVC_POLICY_H
#define KVC_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "index.h"

/*
 * Recompute cost of a block at chain depth d (0 for a first block) in
 * units of one block's linear work: the per-token work (projections, MLP)
 * is the same at every depth, attention over the d blocks before it grows
 * with d. KVC_COST_BASE is where attention starts to dominate, in blocks.
 */
#define KVC_COST_BASE	32

struct kvc_policy;

/*
 * A policy for tier of idx, sized for about capacity_hint entries. idx
 * must outlive it. -EINVAL: unknown name or bad tier; -ENOMEM.
 */
int kvc_policy_create(struct kvc_policy **out, const char *name,
		      const struct kvc_index *idx, unsigned int tier,
		      size_t capacity_hint);
void kvc_policy_destroy(struct kvc_policy *p);

/*
 * "s3fifo": the small queue's share of the tracked blocks, pct percent
 * (1..99; [eviction] s3fifo_small), before anything is inserted: the ghost
 * is sized again for main's share. -EINVAL: another policy or pct out of
 * range; -EBUSY: blocks are tracked already; -ENOMEM.
 */
int kvc_policy_set_small(struct kvc_policy *p, unsigned int pct);
const char *kvc_policy_name(const struct kvc_policy *p);

/*
 * id became present in the tier. -ENOENT: the index does not say so;
 * -EEXIST: already tracked; -ENOMEM.
 */
int kvc_policy_on_insert(struct kvc_policy *p, uint32_t id);

/* A hit on id. -ENOENT: not tracked (or picked and not given back). */
int kvc_policy_on_access(struct kvc_policy *p, uint32_t id);

/* id left the tier (evicted or not). -ENOENT: neither tracked nor picked. */
int kvc_policy_on_remove(struct kvc_policy *p, uint32_t id);

/*
 * Up to n victims evictable now, best first, into out; returns how many.
 * Fewer than n when fewer leaves are tracked.
 */
size_t kvc_policy_pick(struct kvc_policy *p, uint32_t *out, size_t n);

/* Tracked ids, not counting picked ones. */
size_t kvc_policy_count(const struct kvc_policy *p);

/*
 * Admission filter: admit a block on its k-th access. Counts live in a
 * count-min sketch (4 rows of 8-bit counters, width a power of two >=
 * width_hint) keyed by kvc_index_hash(), so memory is fixed however many
 * blocks pass by, and blocks not in the index count too. The sketch never
 * counts low; it may count high (a collision in every row) and so admit
 * early. Aging: every 10 * width accesses all counters are halved, so old
 * popularity fades (a count is about the last 10 * width accesses).
 * k = 1 admits everything and keeps no sketch.
 */
struct kvc_admit;

/* k in 1..255; -EINVAL otherwise, -ENOMEM. */
int kvc_admit_create(struct kvc_admit **out, unsigned int k,
		     size_t width_hint);
void kvc_admit_destroy(struct kvc_admit *a);

/* Count one access to fp; true when it is at least the k-th. */
bool kvc_admit_access(struct kvc_admit *a, uint64_t fp);

/* The sketch's count for fp (an upper bound of the aged true count). */
unsigned int kvc_admit_estimate(const struct kvc_admit *a, uint64_t fp);

size_t kvc_admit_bytes(const struct kvc_admit *a);

#endif /* KVC_POLICY_H */
