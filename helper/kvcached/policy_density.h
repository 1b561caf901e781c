/* SPDX-License-Identifier: GPL-2.0 */
/*
 * policy_density: the "density" eviction policy's model, for policy.c
 * (Documentation/design/eviction.md#density).
 *
 * Hit density (after Beckmann et al., "LHD: Improving Cache Hit Rate by
 * Maximizing Hit Density", NSDI 2018): a block's worth is the hits it
 * can still be expected to give per unit of space and time it would
 * hold. It is learned online, per class of block and per age (accesses
 * of the tier since the block's last insert or hit):
 *
 *   hits[c][a]  blocks of class c that were hit at age a
 *   ends[c][a]  blocks of class c whose stay ended at age a without one
 *
 * and from them, for a block now at age a, the chance that it is hit
 * before it goes and the time it holds its place until then:
 *
 *   density[c][a] = sum_{a' >= a} hits[c][a']
 *                   / sum_{a' >= a} (a' - a + 1) (hits + ends)[c][a']
 *
 * Classes say what a prefix cache can know about a block's future:
 *  - how often it was hit (0, 1, 2-3, 4+): one-off documents are never
 *    hit, the system prompts and live sessions again and again;
 *  - whether a block was ever stored under it: the partial last block
 *    of a prompt never gets a child (the next turn extends it into a
 *    new block), nor does anything a session will not come back to.
 * (Depth was tried as a third feature, and lost more to the slower
 * learning of four times the classes than it told: policy_bench.)
 * The counters decay (x 7/8 at each recomputation, every `period`
 * ticks: the capacity, 1024 at least) so the model follows a workload
 * that changes.
 *
 * Eviction samples KVC_DENSITY_SAMPLES candidates (leaves: policy.c
 * keeps the set) with a pseudo-random stream of fixed seed, so the same
 * calls give the same victims in the daemon and in the simulator, and
 * takes the one of least density; ties go to the oldest, so a model
 * that knows nothing yet (everything 0) evicts like sampled LRU.
 *
 * Threads: none; policy.c's caller serializes.
 */
#ifndef KVC_POLICY_DENSITY_H
#define KVC_POLICY_DENSITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KVC_DENSITY_SAMPLES	32

struct kvc_density;

/* A model for a tier of about capacity_hint blocks: 0 or -ENOMEM. */
int kvc_density_create(struct kvc_density **out, size_t capacity_hint);
void kvc_density_destroy(struct kvc_density *m);

/* Grow the per-id data to cover ids below cap: 0 or -ENOMEM. */
int kvc_density_ensure(struct kvc_density *m, size_t cap);

/*
 * id was inserted; parent (or KVC_ID_NONE) is the entry it was stored
 * under, tracked or not.
 */
void kvc_density_insert(struct kvc_density *m, uint32_t id, uint32_t parent);

/* A hit on id. */
void kvc_density_access(struct kvc_density *m, uint32_t id);

/* id's stay ended without a hit (it was evicted or removed). */
void kvc_density_end(struct kvc_density *m, uint32_t id);

/* The candidate set (leaves): add, remove, is it in? size. */
int kvc_density_add(struct kvc_density *m, uint32_t id);
void kvc_density_del(struct kvc_density *m, uint32_t id);
bool kvc_density_has(const struct kvc_density *m, uint32_t id);
size_t kvc_density_count(const struct kvc_density *m);

/*
 * The candidate of least density among a sample, taken out of the set
 * (KVC_ID_NONE when it is empty).
 */
uint32_t kvc_density_pick(struct kvc_density *m);

#endif /* KVC_POLICY_DENSITY_H */
