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
 * Start reading entry id up from tier first on (g3, else g4). 0: on its
 * way (or queued); -ENOENT: no tier from first on has it (any more).
 */
int tiers_fetch_from(struct kvcd *d, uint32_t id, unsigned int first)
{
	struct kvcd_tiers *tr = d->tiers;

	for (unsigned int t = first; t < KVC_NR_TIERS; t++) {
		int ret;

		if (!tr->tier[t] || !tiers_present(d, id, t))
			continue;
		ret = kvc_tier_fetch(tr->tier[t], id, id);
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
			ret = kvc_tier_fetch(tr->tier[t], id, id);
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
