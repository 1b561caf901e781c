// SPDX-License-Identifier: GPL-2.0
/*
 * reclaim: the pool tier's accounting and eviction (kvcd.h).
 *
 * Which entry holds which pool block (by_block[]), the eviction passes
 * that keep free blocks between the watermarks (leaves first, by the
 * pool's policy, handing victims to a write-back tier first), and the
 * blocks the daemon cannot account for. In kernel mode a client seals a
 * block with its own /dev/kvcache file and then STOREs it here; a block
 * sealed but never stored (the client died in between) is an orphan:
 * the eviction pass frees orphans it has seen twice, so a client
 * between SEAL and STORE is never raced. A block whose STORE was refused
 * can go sooner (requests.c, kvcd_drop_refused()).
 *
 * "Seen twice" is two passes at least KVCD_ORPHAN_GAP_S apart with the
 * client's STORE read in between, if it had sent it by the gap's end:
 * after a pass, the next one waits for a round of the server loop that
 * begins once the gap is over to end (kvcd_round()). Time alone is not
 * enough: a daemon stalled past the gap (a slow fsync, a filesystem
 * that hangs) would take its second look before reading the STOREs
 * queued meanwhile, and free blocks their clients are storing.
 */
#include "kvcd.h"

#include <errno.h>

#include "clock.h"

/* Victims refused in a row (in use, or a full write queue) end a pass. */
#define KVCD_EVICT_REFUSED_MAX	64
#define KVCD_ORPHAN_GAP_S	0.5	/* between two orphan passes */
/*
 * Freed blocks zeroed ahead per tick: a few milliseconds of memset, so
 * requests wait little behind it, and ALLOC rarely zeroes (mpool.c).
 */
#define KVCD_ZERO_AHEAD_BYTES	(32ULL << 20)

/* Record that entry id has its pool copy in block h. */
int kvcd_set_pool(struct kvcd *d, uint32_t id, struct kvcache_handle h)
{
	union kvc_loc loc = { .pool = h };
	const struct kvc_entry *e = kvc_index_entry(d->index, id);
	int ret;

	if (h.index >= d->nr_blocks)
		return -EINVAL;
	/* Moved to another block: the old one is no longer its copy. */
	if (e && (e->tiers & (1u << KVC_TIER_POOL)) &&
	    e->loc[KVC_TIER_POOL].pool.index != h.index)
		kvc_pool_unpublish(d->pool, e->loc[KVC_TIER_POOL].pool);
	ret = kvc_index_set(d->index, id, KVC_TIER_POOL, loc);
	if (ret)
		return ret;
	d->by_block[h.index] = id;
	/* Clients find it themselves from here (the fast path). */
	kvc_pool_publish(d->pool, h, e->ns, e->key,
			 e->parent == KVC_ID_NONE ? NULL :
			 kvc_index_entry(d->index, e->parent)->key, e->tiers);
	/* Claimed: whatever a pass or a refused STORE noted is void. */
	d->orphan_seen[h.index] = 0;
	return kvc_policy_on_insert(d->policy, id);
}

/*
 * Segments are made at a namespace's first FAST_NS (pool_kernel.c), after
 * its blocks were stored: publish those now, as kvcd_set_pool() would
 * have, so the segment shows all of them.
 */
int kvcd_fast_ns_fd(struct kvcd *d, uint32_t ns)
{
	bool made;
	int fd = kvc_pool_fast_ns_fd(d->pool, ns, &made);

	if (fd < 0 || !made)
		return fd;
	for (uint32_t b = 0; b < d->nr_blocks; b++) {
		const struct kvc_entry *e;

		if (d->by_block[b] == KVC_ID_NONE)
			continue;
		e = kvc_index_entry(d->index, d->by_block[b]);
		if (!e || e->ns != ns || !(e->tiers & (1u << KVC_TIER_POOL)))
			continue;
		kvc_pool_publish(d->pool, e->loc[KVC_TIER_POOL].pool, e->ns,
				 e->key, e->parent == KVC_ID_NONE ? NULL :
				 kvc_index_entry(d->index, e->parent)->key,
				 e->tiers);
	}
	return fd;
}

/* Forget entry id's pool copy; drop the entry if nothing is left of it. */
void kvcd_clear_pool(struct kvcd *d, uint32_t id)
{
	const struct kvc_entry *e = kvc_index_entry(d->index, id);

	if (!e || !(e->tiers & (1u << KVC_TIER_POOL)))
		return;
	d->by_block[e->loc[KVC_TIER_POOL].pool.index] = KVC_ID_NONE;
	kvc_pool_unpublish(d->pool, e->loc[KVC_TIER_POOL].pool);
	kvcd_tiers_forget(d, id);
	kvc_index_clear(d->index, id, KVC_TIER_POOL);
	kvc_policy_on_remove(d->policy, id);
	/* A copy on its way to g3/g4 keeps the entry (tier.c needs it). */
	if (!kvcd_tiers_spilling(d, id))
		kvc_index_prune(d->index, id);
}

/*
 * The fast index shows where a pool copy's entry is, as LOOKUP answers:
 * keep its tiers current when a g3/g4 copy comes or goes. (The pool tier
 * itself is published and taken back by kvcd_set_pool() and
 * kvcd_clear_pool().)
 */
void kvcd_pool_observed(void *arg, const struct kvc_index *idx, uint32_t id,
			unsigned int tier, bool present)
{
	const struct kvc_entry *e = kvc_index_entry(idx, id);
	struct kvcd *d = arg;
	uint8_t tiers;

	if (tier == KVC_TIER_POOL || !e || !(e->tiers & (1u << KVC_TIER_POOL)))
		return;
	tiers = present ? (uint8_t)(e->tiers | (1u << tier)) :
			  (uint8_t)(e->tiers & ~(1u << tier));
	kvc_pool_set_tiers(d->pool, e->loc[KVC_TIER_POOL].pool, tiers);
}

/*
 * Free sealed blocks nobody stored (the client died between SEAL and
 * STORE, or its STORE was refused), once they have been seen unclaimed by
 * two passes in a row. Returns how many went.
 */
static uint32_t kvcd_reap_orphans(struct kvcd *d)
{
	struct kvcache_block_info info[64];
	uint32_t start = 0, count, next, freed = 0, seen = 0;
	double now = kvc_now();

	/*
	 * Passes at least KVCD_ORPHAN_GAP_S apart: eviction may run many
	 * times in a row (each write-back completion lets it go on), and
	 * "seen twice" must still mean a client had time for its STORE.
	 */
	if (now < d->orphan_at || d->round < d->orphan_round)
		return 0;
	d->orphan_at = now + KVCD_ORPHAN_GAP_S;
	d->orphan_round = UINT64_MAX;	/* kvcd_round() sets it */

	while (start < d->nr_blocks &&
	       !kvc_pool_query(d->pool, start, info, 64, &count, &next)) {
		for (uint32_t i = 0; i < count; i++) {
			uint32_t idx = info[i].handle.index, id;
			const struct kvc_entry *e;

			/* A pool resized under us: not ours to judge. */
			if (idx >= d->nr_blocks)
				continue;
			id = d->by_block[idx];
			e = id == KVC_ID_NONE ? NULL :
			    kvc_index_entry(d->index, id);
			if (e && e->loc[KVC_TIER_POOL].pool.gen ==
			    info[i].handle.gen) {
				d->orphan_seen[idx] = 0;
				continue;
			}
			/* A mark of the block's earlier life does not count. */
			if (d->orphan_gen[idx] != info[i].handle.gen)
				d->orphan_seen[idx] = 0;
			d->orphan_gen[idx] = info[i].handle.gen;
			if (d->orphan_seen[idx]++ &&
			    !kvc_pool_evict(d->pool, info[i].handle)) {
				d->orphan_seen[idx] = 0;
				freed++;
			} else {
				seen++;
			}
		}
		if (next <= start)
			break;
		start = next;
	}
	d->orphans_seen = seen;
	return freed;
}

/*
 * A round of the server loop begins. Once one begins after the gap since
 * the last orphan pass, every message sent before the gap's end is read
 * by the round's end: the pass after it may free what is still unclaimed.
 */
void kvcd_round(struct kvcd *d)
{
	d->round++;
	if (d->orphan_round == UINT64_MAX && kvc_now() >= d->orphan_at)
		d->orphan_round = d->round + 1;
}

/* Count an eviction of the pool. */
void kvcd_evicted(struct kvcd *d)
{
	d->evictions++;
	kvc_metric_add(d->dm.evictions[KVC_TIER_POOL], 1);
}

int kvcd_evict_id(struct kvcd *d, uint32_t id)
{
	const struct kvc_entry *e = kvc_index_entry(d->index, id);
	int ret;

	if (!e || !(e->tiers & (1u << KVC_TIER_POOL)))
		return -ENOENT;
	/* A STORE made it a parent while it was held: leaves go first. */
	if (e->child_in[KVC_TIER_POOL])
		return -EBUSY;
	ret = kvc_pool_evict(d->pool, e->loc[KVC_TIER_POOL].pool);
	if (ret == -EBUSY)
		return ret;
	/* Evicted now, or by someone else before (-ESTALE). */
	kvcd_clear_pool(d, id);
	if (!ret)
		kvcd_evicted(d);
	return ret;
}

/*
 * Evict leaves, oldest first by the policy, until want blocks are free.
 * One victim at a time, and no more than the shortfall: a leaf's parent
 * becomes a candidate only when the leaf is gone, so a batch taken at
 * once would be the oldest leaf of every chain, the chain a LOAD just
 * answered with included, instead of the oldest chains whole. A victim
 * a write-back tier must copy first stays in the pool, held, until its
 * copy is published (tiers/spill.c), and counts as coming free: the
 * blocks being written back are not replaced by more victims. One that
 * is pinned or mapped, or whose copy must wait for a full write queue,
 * goes back to the policy; a pass stops after KVCD_EVICT_REFUSED_MAX of
 * those in a row, or once every candidate has been tried. With wait, the
 * writes started for victims are waited for, as the page cache's direct
 * reclaim waits for writeback. Returns 0, or -EBUSY when it stopped
 * short: what is left is in use, or dirty (its write failed and waits
 * for a retry).
 */
static int kvcd_evict_pass(struct kvcd *d, uint32_t want, bool wait)
{
	uint32_t free_blocks, id;

	if (kvc_pool_nr_free(d->pool, &free_blocks) || free_blocks >= want)
		return 0;
	free_blocks += kvcd_reap_orphans(d);
	for (;;) {
		size_t tries = kvc_policy_count(d->policy), refused = 0;

		while (free_blocks + kvcd_tiers_writing(d) < want &&
		       refused < KVCD_EVICT_REFUSED_MAX && tries-- &&
		       kvc_policy_pick(d->policy, &id, 1)) {
			int ret = kvcd_tiers_evicting(d, id);

			/* Held until written: out of the policy. */
			if (ret == -EINPROGRESS) {
				refused = 0;
				continue;
			}
			if (!ret)
				ret = kvcd_evict_id(d, id);
			if (ret == -EBUSY) {
				kvc_policy_on_insert(d->policy, id);
				refused++;
			} else if (!ret) {
				free_blocks++;
				refused = 0;
			}
		}
		if (free_blocks >= want || !wait || !kvcd_tiers_wait(d))
			break;
		/* Completions freed the held blocks whose copy is done. */
		if (kvc_pool_nr_free(d->pool, &free_blocks))
			break;
	}
	return free_blocks >= want ? 0 : -EBUSY;
}

int kvcd_evict_to(struct kvcd *d, uint32_t want)
{
	return kvcd_evict_pass(d, want, false);
}

int kvcd_evict_to_wait(struct kvcd *d, uint32_t want)
{
	return kvcd_evict_pass(d, want, true);
}

void kvcd_check_pool(struct kvcd *d)
{
	uint64_t low = (uint64_t)d->nr_blocks * d->cfg.pool.low_watermark / 100;
	uint64_t high = (uint64_t)d->nr_blocks *
			d->cfg.pool.high_watermark / 100;
	uint64_t zero = KVCD_ZERO_AHEAD_BYTES / d->pool->block_size;
	uint32_t free_blocks;

	if (kvc_pool_nr_free(d->pool, &free_blocks))
		return;
	if (free_blocks < low)
		kvcd_evict_to(d, (uint32_t)high);
	else if (d->orphans_seen)
		/*
		 * Finish what a pass began: blocks it saw unclaimed once go
		 * at the next look, even if that pass freed enough. Else a
		 * client that died while sealing would hold them until the
		 * next pressure.
		 */
		kvcd_reap_orphans(d);
	/* What this pass and the requests since the last one freed. */
	kvc_pool_zero_ahead(d->pool, zero ? (uint32_t)zero : 1);
}
