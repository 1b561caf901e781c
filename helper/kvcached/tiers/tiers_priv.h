/* SPDX-License-Identifier: GPL-2.0 */
/*
 * tiers_priv: the daemon's side of g3 and g4 (tier.h), shared by
 *   tiers.c    completions, the loop's hooks, stats, setup
 *   spill.c    write-through and write-back spills, held blocks, retries
 *   promote.c  reads up from a tier into the pool, prefetch
 *   loads.c    LOADs waiting for their blocks
 * and by nothing else: the daemon calls the kvcd_tiers_*() of kvcd.h, and
 * the tiers reach the pool only through pool.h and kvcd_set_pool() /
 * kvcd_evict_*() (reclaim.c).
 *
 * Single-threaded, as the whole daemon.
 */
#ifndef KVC_TIERS_PRIV_H
#define KVC_TIERS_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvcd.h"
#include "tier.h"
#include "tierio.h"

/*
 * A LOAD waiting for blocks to come up from g3/g4: its reply goes out
 * (kvc_server_reply) when the last one is in the pool or has failed.
 */
struct kvcd_wait {
	bool used;
	uint32_t peer;			/* server peer id ... */
	uint64_t serial;		/* ... and which connection it was */
	uint64_t seq;			/* the request's */
	uint32_t ns;
	uint32_t count, outstanding;
	double since;			/* parked at, kvc_now() */
	uint8_t (*keys)[KVCACHE_KEY_SIZE];
	struct kvc_load_result *res;	/* status 1: still coming */
};


/*
 * Write-back state of a pool block the eviction picked (spill.c):
 * it is held in the pool, out of the policy, until a tier has it.
 */
#define KVCD_WB_WRITING	1	/* its spill is in flight */
#define KVCD_WB_DIRTY	2	/* its spill failed: retried later */

/*
 * A block read up from a tier while the pool had no free block and the
 * eviction could not wait (inside a reap, the pool's victims still being
 * written back): its payload is kept here until tiers_run_promotions(),
 * from the loop, can wait for room. By key: the entry may change
 * meanwhile. As many as reads in flight at most (the queue depths).
 */
struct kvcd_promo {
	uint32_t ns;
	uint8_t key[KVCACHE_KEY_SIZE];
	uint64_t len;
	uint8_t *payload;
};

/*
 * A pool block a read fills in place (pool.h, reserve): taken when the
 * read is submitted, sealed when it checks out, discarded otherwise.
 * One per read in flight; a read's cookie carries its slot here, above
 * the entry id (tiers_cookie_id()).
 */
#define KVCD_NR_PLACES	(2 * KVC_TIO_MAX_DEPTH)

struct kvcd_place {
	bool used;
	struct kvcache_handle h;
	uint8_t *mem;
};

struct kvcd_tiers {
	struct kvc_tier *tier[KVC_NR_TIERS];	/* NULL when off */
	struct kvc_admit *tier_admit[KVC_NR_TIERS];
	struct kvcd_wait *waits;	/* KVC_SERVER_MAX_CLIENTS */
	uint32_t *fetchq;		/* ids waiting for a read slot */
	size_t fetchq_len, fetchq_cap;
	uint32_t *spillq;		/* ids waiting for a write slot */
	size_t spillq_len, spillq_cap;
	uint32_t *retryq;		/* spills that failed, to retry */
	size_t retryq_len, retryq_cap;
	uint8_t *held;			/* by id: KVCD_WB_*, write-back */
	size_t nheld;
	size_t held_writing, held_dirty;	/* how many of each in held[] */
	struct kvcd_promo *promo;	/* reads done, waiting for room */
	size_t npromo, promo_cap;
	double retry_interval;		/* s, between retries of a spill */
	double retry_at;		/* when retryq is tried again */
	uint8_t *fetching;		/* by id: a read is in flight */
	size_t nfetching;
	struct kvcd_place *places;	/* KVCD_NR_PLACES, or NULL */
	uint64_t promotions, promote_errors, prefetches, spill_retries;
	uint64_t promote_in_place;	/* of promotions: read into the pool */
	uint64_t load_timeouts;		/* LOADs answered at load_timeout */
	uint64_t through_dropped;	/* write-through copies not made */
	uint64_t through_shed;		/* ... left to eviction: spillq full */
	uint64_t fetch_elsewhere;	/* reads g4 took, g3 being congested */
	uint64_t spill_deferred;	/* spills waiting for their parent's */
};

static inline bool tiers_present(const struct kvcd *d, uint32_t id,
				 unsigned int tier)
{
	const struct kvc_entry *e = kvc_index_entry(d->index, id);

	return e && (e->tiers & (1u << tier));
}

/* spill.c */
/* Does tier's admission filter take entry id (count: a real access)? */
bool tiers_admitted(struct kvcd *d, unsigned int tier, uint32_t id,
		    bool count);
/* Append id to a growable queue; dropped if memory runs out. */
void tiers_queue_id(uint32_t **q, size_t *len, size_t *cap, uint32_t id);
bool tiers_write_through(const struct kvcd *d, unsigned int tier);
/* A failure that may pass (EIO, ENOSPC, a short write ...)? */
bool tiers_retryable(int err);
void tiers_queue_retry(struct kvcd *d, uint32_t id);
/* Is entry id on g3 or g4 already? */
bool tiers_on_a_tier(const struct kvcd *d, uint32_t id);
/* The write of held entry id is done (err: its status). */
void tiers_held_done(struct kvcd *d, uint32_t id, int err);
/* Start the spills that waited for a write slot. */
void tiers_drain_spills(struct kvcd *d);
void tiers_retry_spills(struct kvcd *d);

/* promote.c */
int tiers_promote(struct kvcd *d, uint32_t id, const uint8_t *payload,
		  uint64_t len, bool may_wait);
bool tiers_defer_promote(struct kvcd *d, uint32_t id,
			 const uint8_t *payload, uint64_t len);
void tiers_run_promotions(struct kvcd *d);
bool tiers_set_fetching(struct kvcd *d, uint32_t id, uint8_t v);
bool tiers_is_fetching(const struct kvcd *d, uint32_t id);
/* Read entry id up from the first tier from first on that has it. */
int tiers_fetch_from(struct kvcd *d, uint32_t id, unsigned int first);
/* Start the reads that waited for a read slot. */
void tiers_drain_fetches(struct kvcd *d);
/*
 * A read's cookie: the entry id, and the place it reads into (slot + 1,
 * 0: none, the payload comes in the tier's staging slot).
 */
static inline uint32_t tiers_cookie_id(uint64_t cookie)
{
	return (uint32_t)cookie;
}

/* A read done: seal its place as entry id's block (0), or discard it. */
int tiers_place_seal(struct kvcd *d, uint64_t cookie, uint32_t id,
		     uint64_t len);
void tiers_place_drop(struct kvcd *d, uint64_t cookie);

/* loads.c */
/* Answer the waiting LOADs whose blocks are all in, or failed. */
void tiers_settle(struct kvcd *d);
void tiers_wait_free(struct kvcd_wait *w);

#endif /* KVC_TIERS_PRIV_H */
