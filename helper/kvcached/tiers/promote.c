// SPDX-License-Identifier: GPL-2.0
/*
 * promote: blocks read up from g3 or g4 into the pool (tiers_priv.h).
 *
 * LOAD of a key that only g3 or g4 holds reads the block file
 * (verified), writes the payload into a new pool block sealed under its
 * key (kvc_pool_write()), and only then answers: the reply is deferred
 * (loads.c). LOOKUP starts the same reads for up to `prefetch` blocks of
 * the matched chain that are not in the pool, so the LOAD that follows
 * finds them there or on their way. A block read from a tier that turns
 * out corrupt is a miss (tier.c quarantines it); if the other tier has
 * the block too, it is read from there instead.
 *
 * A promotion may need room, and room may mean waiting for the
 * write-back of a victim. Inside a reap (a completion) it must not
 * wait: there a promotion that does not fit is deferred, and
 * tiers_run_promotions() does it from the loop.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "tiers_priv.h"

/*
 * Put a payload read from a tier into a new sealed pool block. With no
 * free block, evict for one; may_wait: waiting for the write-backs of
 * the victims if need be. Inside a reap it must not wait (the wait would
 * reap again): there tier_done() defers what does not fit.
 */
int tiers_promote(struct kvcd *d, uint32_t id, const uint8_t *payload,
		  uint64_t len, bool may_wait)
{
	const struct kvc_entry *e = kvc_index_entry(d->index, id);
	uint8_t key[KVCACHE_KEY_SIZE];
	struct kvcache_handle h;
	uint32_t ns = e->ns;
	int ret;

	if (len > d->block_size)
		return -EFBIG;
	memcpy(key, e->key, KVCACHE_KEY_SIZE);
	ret = kvc_pool_write(d->pool, ns, payload, (uint32_t)len, key, &h);
	if (ret == -ENOSPC) {
		if (may_wait)
			kvcd_evict_to_wait(d, 1);
		else
			kvcd_evict_to(d, 1);
		ret = kvc_pool_write(d->pool, ns, payload, (uint32_t)len, key,
				     &h);
	}
	if (!ret)
		ret = kvcd_set_pool(d, id, h);
	return ret;
}

bool tiers_defer_promote(struct kvcd *d, uint32_t id, const uint8_t *payload,
			 uint64_t len)
{
	struct kvcd_tiers *tr = d->tiers;
	const struct kvc_entry *e = kvc_index_entry(d->index, id);
	struct kvcd_promo *p;

	if (!e || tr->npromo >= 1024)
		return false;
	if (tr->npromo == tr->promo_cap) {
		size_t n = tr->promo_cap ? tr->promo_cap * 2 : 16;

		p = realloc(tr->promo, n * sizeof(*p));
		if (!p)
			return false;
		tr->promo = p;
		tr->promo_cap = n;
	}
	p = &tr->promo[tr->npromo];
	p->payload = malloc(len ? len : 1);
	if (!p->payload)
		return false;
	memcpy(p->payload, payload, len);
	p->len = len;
	p->ns = e->ns;
	memcpy(p->key, e->key, KVCACHE_KEY_SIZE);
	tr->npromo++;
	return true;
}

bool tiers_set_fetching(struct kvcd *d, uint32_t id, uint8_t v)
{
	struct kvcd_tiers *tr = d->tiers;

	if (id >= tr->nfetching) {
		size_t n = tr->nfetching ? tr->nfetching : 1024;
		uint8_t *p;

		while (n <= id)
			n *= 2;
		p = realloc(tr->fetching, n);
		if (!p)
			return false;
		memset(p + tr->nfetching, 0, n - tr->nfetching);
		tr->fetching = p;
		tr->nfetching = n;
	}
	tr->fetching[id] = v;
	return true;
}

bool tiers_is_fetching(const struct kvcd *d, uint32_t id)
{
	struct kvcd_tiers *tr = d->tiers;

	return id < tr->nfetching && tr->fetching[id];
}

/*
 * A pool block for a read to fill in place, in the entry's namespace:
 * a free one, or one an eviction frees now (it must not wait: this may
 * run inside a reap). The slot + 1, or 0 when the read must go through
 * a staging slot instead: a pool that cannot reserve (a kvcache.ko
 * without KVCACHE_IOC_DISCARD), no block to be had without waiting, or
 * no place left. Reads in place hold a
 * quarter of the pool at most, so that a small pool still has blocks
 * for the clients' ALLOCs while the tiers' queues are full.
 */
static uint32_t place_take(struct kvcd *d, uint32_t id)
{
	const struct kvc_entry *e = kvc_index_entry(d->index, id);
	struct kvcd_tiers *tr = d->tiers;
	struct kvcd_place *pl = NULL;
	uint32_t ns, held = 0;
	int ret;

	if (!e || !kvc_pool_can_reserve(d->pool))
		return 0;
	ns = e->ns;
	if (!tr->places) {
		tr->places = calloc(KVCD_NR_PLACES, sizeof(*tr->places));
		if (!tr->places)
			return 0;
	}
	for (uint32_t i = 0; i < KVCD_NR_PLACES; i++) {
		if (tr->places[i].used)
			held++;
		else if (!pl)
			pl = &tr->places[i];
	}
	if (!pl || held >= d->nr_blocks / 4)
		return 0;
	ret = kvc_pool_reserve(d->pool, ns, &pl->h, &pl->mem);
	if (ret == -ENOSPC) {
		kvcd_evict_to(d, 1);
		ret = kvc_pool_reserve(d->pool, ns, &pl->h, &pl->mem);
	}
	if (ret)
		return 0;
	pl->used = true;
	return (uint32_t)(pl - tr->places) + 1;
}

static struct kvcd_place *place_of(struct kvcd *d, uint64_t cookie)
{
	uint32_t slot = (uint32_t)(cookie >> 32);

	if (!slot || slot > KVCD_NR_PLACES || !d->tiers->places ||
	    !d->tiers->places[slot - 1].used)
		return NULL;
	return &d->tiers->places[slot - 1];
}

void tiers_place_drop(struct kvcd *d, uint64_t cookie)
{
	struct kvcd_place *pl = place_of(d, cookie);

	if (!pl)
		return;
	kvc_pool_discard(d->pool, pl->h);
	pl->used = false;
}

/*
 * The read checked out (header, key, CRC, padding) in the block: seal it
 * under the entry's key, as kvc_pool_write() would after its copy.
 * -ENOENT when the read was not in place (the caller promotes from the
 * staging slot).
 */
int tiers_place_seal(struct kvcd *d, uint64_t cookie, uint32_t id,
		     uint64_t len)
{
	const struct kvc_entry *e = kvc_index_entry(d->index, id);
	struct kvcd_place *pl = place_of(d, cookie);
	struct kvcache_handle h;
	int ret;

	if (!pl)
		return -ENOENT;
	h = pl->h;
	pl->used = false;
	ret = !e || len > d->block_size ? -EINVAL :
	      kvc_pool_seal(d->pool, KVC_POOL_SELF, h, (uint32_t)len, e->key);
	if (ret) {
		kvc_pool_discard(d->pool, h);
		return ret;
	}
	d->tiers->promote_in_place++;
	return kvcd_set_pool(d, id, h);
}

/* One read of entry id from tier t, into the pool where it can. */
static int fetch_one(struct kvcd *d, unsigned int t, uint32_t id)
{
	struct kvc_tier *tier = d->tiers->tier[t];
	uint64_t cookie = id;
	struct kvcd_place *pl;
	uint32_t slot;
	int ret;

	/* A place taken for a read that cannot start would be zeroed
	 * again for nothing: ask first. */
	if (!kvc_tier_can_fetch(tier))
		return -EBUSY;
	slot = place_take(d, id);
	if (!slot)
		return kvc_tier_fetch(tier, id, cookie);
	cookie |= (uint64_t)slot << 32;
	pl = place_of(d, cookie);
	ret = kvc_tier_fetch_into(tier, id, cookie, pl->mem, d->block_size);
	if (ret)
		tiers_place_drop(d, cookie);
	/* A block the read cannot take in place (never, as the tiers are
	 * set up): through a staging slot, then. */
	if (ret == -EINVAL)
		ret = kvc_tier_fetch(tier, id, id);
	return ret;
}

/*
 * A later tier than t that holds id and has a read slot free starts the
 * read instead: 0, or -EBUSY when none could.
 */
static int fetch_elsewhere(struct kvcd *d, unsigned int t, uint32_t id)
{
	struct kvcd_tiers *tr = d->tiers;

	for (unsigned int u = t + 1; u < KVC_NR_TIERS; u++) {
		if (!tr->tier[u] || !tiers_present(d, id, u) ||
		    !kvc_tier_can_fetch(tr->tier[u]))
			continue;
		if (!fetch_one(d, u, id)) {
			tr->fetch_elsewhere++;
			return 0;
		}
	}
	return -EBUSY;
}

/*
 * Start reading entry id up from tier first on (g3, else g4). 0: on its
 * way (or queued); -ENOENT: no tier from first on has it (any more).
 * When g3 is congested (every read slot taken: a neighbour saturating
 * its disk, or a burst) and g4 has the block with a slot free, g4
 * answers first rather than the load waiting in g3's queue.
 */
int tiers_fetch_from(struct kvcd *d, uint32_t id, unsigned int first)
{
	struct kvcd_tiers *tr = d->tiers;

	for (unsigned int t = first; t < KVC_NR_TIERS; t++) {
		int ret;

		if (!tr->tier[t] || !tiers_present(d, id, t))
			continue;
		ret = fetch_one(d, t, id);
		if (ret == -EBUSY && !fetch_elsewhere(d, t, id))
			ret = 0;
		if (ret == -EBUSY) {
			tiers_queue_id(&tr->fetchq, &tr->fetchq_len, &tr->fetchq_cap,
				       id);
			return tiers_set_fetching(d, id, 1) ? 0 : -ENOMEM;
		}
		if (!ret)
			return tiers_set_fetching(d, id, 1) ? 0 : -ENOMEM;
		/* A miss or corrupt there (now cleared): the next tier. */
		kvc_metric_add(d->dm.misses[t], 1);
	}
	return -ENOENT;
}

static int start_fetch(struct kvcd *d, uint32_t id)
{
	return tiers_fetch_from(d, id, KVC_TIER_G3);
}

int kvcd_tiers_want(struct kvcd *d, uint32_t id)
{
	if (tiers_is_fetching(d, id))
		return 0;
	return start_fetch(d, id);
}

void kvcd_tiers_prefetch(struct kvcd *d, const struct kvc_match *m,
			 size_t n)
{
	unsigned int budget = d->cfg.pool.prefetch;

	for (size_t i = 0; i < n && budget; i++) {
		if (m[i].tiers & (1u << KVC_TIER_POOL) ||
		    tiers_is_fetching(d, m[i].id))
			continue;
		if (!start_fetch(d, m[i].id)) {
			d->tiers->prefetches++;
			budget--;
		}
	}
}

void kvcd_tiers_access(struct kvcd *d, uint32_t id)
{
	struct kvcd_tiers *tr = d->tiers;

	for (unsigned int t = KVC_TIER_G3; t < KVC_NR_TIERS; t++) {
		if (!tr->tier[t])
			continue;
		kvc_tier_touch(tr->tier[t], id);
		if (tr->tier_admit[t])
			tiers_admitted(d, t, id, true);
	}
}

void tiers_drain_fetches(struct kvcd *d)
{
	struct kvcd_tiers *tr = d->tiers;
	size_t i, kept = 0;

	for (i = 0; i < tr->fetchq_len; i++) {
		uint32_t id = tr->fetchq[i];
		int ret = -ENOENT;

		if (!tiers_is_fetching(d, id))
			continue;
		for (unsigned int t = KVC_TIER_G3; t < KVC_NR_TIERS; t++) {
			if (!tr->tier[t] || !tiers_present(d, id, t))
				continue;
			ret = fetch_one(d, t, id);
			if (ret == -EBUSY && !fetch_elsewhere(d, t, id))
				ret = 0;
			if (ret != -ENOENT && ret != -EBADMSG)
				break;
		}
		if (ret == -EBUSY)
			tr->fetchq[kept++] = id;
		else if (ret)
			tr->fetching[id] = 0;	/* gone: a miss */
	}
	tr->fetchq_len = kept;
}


/*
 * The promotions tier_done() deferred, now that eviction may wait for
 * the write-backs that make room. Run from the loop only (readable,
 * tick), never from inside an eviction's wait (kvcd_tiers_wait() leaves
 * them), so it is not re-entered: what the waits below defer joins the
 * list this loop is taking from.
 */
void tiers_run_promotions(struct kvcd *d)
{
	struct kvcd_tiers *tr = d->tiers;

	while (tr->npromo) {
		struct kvcd_promo p = tr->promo[--tr->npromo];
		uint32_t id;

		if (!kvc_index_find(d->index, p.ns, p.key, &id)) {
			if (id < tr->nfetching)
				tr->fetching[id] = 0;
			if (!tiers_present(d, id, KVC_TIER_POOL)) {
				if (tiers_promote(d, id, p.payload, p.len,
						  true)) {
					tr->promote_errors++;
				} else {
					tr->promotions++;
					tiers_settle(d);
				}
			}
		}
		free(p.payload);
	}
	tiers_settle(d);
}
