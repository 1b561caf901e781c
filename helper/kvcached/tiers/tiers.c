// SPDX-License-Identifier: GPL-2.0
/*
 * daemon_tiers: kvcached's persistent tiers, g3 and g4 (tier.h), and how
 * blocks move between them and the DRAM pool (Documentation/design/tiers.md).
 *
 * Spill. A tier with write = through gets a copy of each block as it is
 * stored; with write = back, when the pool evicts the block. Either way
 * the pool block's bytes are copied once, into a registered I/O buffer.
 * When a tier's write queue is full, a write-through spill waits in
 * spillq, and a write-back eviction waits (the pool block stays until
 * there is room: the queue depth bounds the memory and the device queue,
 * and eviction slows down to the disk's pace instead of dropping blocks).
 *
 * Nothing sealed is lost to a failed write. A block the eviction picks
 * that no tier has yet (write-back, or a write-through copy that failed
 * or is still on its way) is held: its pool block stays sealed, indexed
 * and servable to LOADs, but out of the policy, so eviction does not
 * pick it again (held[id], KVCD_WB_*). When its write is published it
 * is evicted (release()); when the write fails for a reason that may
 * pass (EIO, ENOSPC, a short write, fsync or link failing) it stays,
 * dirty, and is written again after RETRY_INTERVAL_S, as failed
 * write-through spills are. Eviction meanwhile takes other blocks; a
 * pool full of dirty blocks refuses new ones (ALLOC: ENOSPC), as the
 * page cache throttles writers on dirty pages. A tier that refuses for
 * good (read-only, EACCES) takes nothing and holds nothing. Evictions
 * that need room now (an ALLOC, a promotion, the kernel's pressure
 * event) wait for the writes they started, like direct reclaim waits
 * for writeback (kvcd_tiers_wait()); the background watermark pass does
 * not. A completion reaped inside a wait may promote, and a promotion
 * may evict: d->reaping keeps that eviction from waiting in turn.
 * FLUSH of the pool alone leaves held blocks (-EBUSY: dropping the
 * only copy would lose them); EVICT, or FLUSH of every tier, drops
 * them. At shutdown, writes in flight are reaped, not abandoned.
 *
 * Lifetime of a held entry: its pool bit keeps it in the index; its
 * held[] state is cleared wherever its pool copy goes (kvcd_clear_pool()
 * calls kvcd_tiers_forget()), so an id reused later starts clean.
 *
 * Promotion. LOAD of a key that only g3 or g4 holds reads the block file
 * (verified), allocates a pool block, copies the payload in, seals it under
 * its key, and only then answers: the reply is deferred (server.h), the
 * connection's next request waits for it. LOOKUP starts the same reads
 * for up to `prefetch` blocks of the matched chain that are not in the
 * pool, so the LOAD that follows finds them there or on their way.
 *
 * A block read from a tier that turns out corrupt is a miss (tier.c
 * quarantines it); if the other tier has the block too, it is read from
 * there instead.
 *
 * Waiting LOADs are settled by key, not by id, after every batch of
 * completions: a key whose block reached the pool is answered with it,
 * one that is neither in the pool nor being read is a miss. That holds
 * however the index changed meanwhile.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "kvcd.h"
#include "fault.h"
#include "log.h"

/* A failed spill (write-through, or a dirty held block's) is tried again
 * this often, at most. */
#define RETRY_INTERVAL_S	1.0
/*
 * Tests that wait for many rounds of retries (faults_test, under TCG in
 * a VM) shorten it with KVCACHED_RETRY_MS, read once by
 * kvcd_tiers_open(); like KVCACHED_FAULT it is not a configuration
 * setting: a real disk that failed needs the full second.
 */
#define RETRY_ENV		"KVCACHED_RETRY_MS"
static double retry_interval = RETRY_INTERVAL_S;
/* ... and this many blocks per try, so a dead disk costs little. */
#define RETRY_BATCH		64

static const char *const tier_names[KVC_NR_TIERS] = { "pool", "g3", "g4" };

static bool ns_ok(void *arg, uint32_t ns)
{
	const struct kvcd *d = arg;

	return ns >= 1 && ns <= KVCACHE_NS_MAX && d->ns[ns].used;
}

static double mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static bool present(const struct kvcd *d, uint32_t id, unsigned int tier)
{
	const struct kvc_entry *e = kvc_index_entry(d->index, id);

	return e && (e->tiers & (1u << tier));
}

/* ---- pool blocks ---------------------------------------------------------- */

/* Put a payload read from a tier into a new sealed pool block. */
static int promote(struct kvcd *d, uint32_t id, const uint8_t *payload,
		   uint64_t len)
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
		/* Inside a reap this cannot wait: tier_done() defers. */
		kvcd_evict_to_wait(d, 1);
		ret = kvc_pool_write(d->pool, ns, payload, (uint32_t)len, key,
				     &h);
	}
	if (!ret)
		ret = kvcd_set_pool(d, id, h);
	return ret;
}

/*
 * A block read up from a tier while the pool had no free block and the
 * eviction could not wait (inside a reap, the pool's victims still being
 * written back): its payload is kept here until run_promotions(), after
 * the reap, can wait for room. By key: the entry may change meanwhile.
 * As many as reads in flight at most (the tiers' queue depths).
 */
struct kvcd_promo {
	uint32_t ns;
	uint8_t key[KVCACHE_KEY_SIZE];
	uint64_t len;
	uint8_t *payload;
};

static bool defer_promote(struct kvcd *d, uint32_t id, const uint8_t *payload,
			  uint64_t len)
{
	const struct kvc_entry *e = kvc_index_entry(d->index, id);
	struct kvcd_promo *p;

	if (!e || d->npromo >= 1024)
		return false;
	if (d->npromo == d->promo_cap) {
		size_t n = d->promo_cap ? d->promo_cap * 2 : 16;

		p = realloc(d->promo, n * sizeof(*p));
		if (!p)
			return false;
		d->promo = p;
		d->promo_cap = n;
	}
	p = &d->promo[d->npromo];
	p->payload = malloc(len ? len : 1);
	if (!p->payload)
		return false;
	memcpy(p->payload, payload, len);
	p->len = len;
	p->ns = e->ns;
	memcpy(p->key, e->key, KVCACHE_KEY_SIZE);
	d->npromo++;
	return true;
}

/* ---- spill --------------------------------------------------------------- */

static int spill_one(struct kvcd *d, unsigned int tier, uint32_t id)
{
	struct kvc_tier *t = d->tier[tier];
	const struct kvc_entry *e = kvc_index_entry(d->index, id);
	uint8_t *buf;
	uint64_t len = 0;
	int slot, ret;

	if (!e || !(e->tiers & (1u << KVC_TIER_POOL)))
		return -ENOENT;
	if ((e->tiers & (1u << tier)) || kvc_tier_spilling(t, id))
		return -EEXIST;
	slot = kvc_tier_spill_begin(t, &buf);
	if (slot < 0)
		return slot;
	ret = kvc_pool_read(d->pool, e->loc[KVC_TIER_POOL].pool, buf, &len);
	if (ret) {
		kvc_tier_spill_cancel(t, slot);
		return ret;
	}
	return kvc_tier_spill_submit(t, slot, id, len);
}

static void queue_id(uint32_t **q, size_t *len, size_t *cap, uint32_t id)
{
	if (*len == *cap) {
		size_t n = *cap ? *cap * 2 : 256;
		uint32_t *p = realloc(*q, n * sizeof(*p));

		if (!p)
			return;		/* dropped: a cache may skip a copy */
		*q = p;
		*cap = n;
	}
	(*q)[(*len)++] = id;
}

/* Has the block been wanted often enough for this tier (its admit)? */
static bool admitted(struct kvcd *d, unsigned int tier, uint32_t id,
		     bool count)
{
	unsigned int k = tier == KVC_TIER_G3 ? d->cfg.eviction.g3_admit :
			 d->cfg.eviction.g4_admit;
	uint64_t fp = kvc_index_fingerprint(d->index, id);

	if (k <= 1)
		return true;
	if (count)
		return kvc_admit_access(d->tier_admit[tier], fp);
	return kvc_admit_estimate(d->tier_admit[tier], fp) >= k;
}

static bool write_through(const struct kvcd *d, unsigned int tier)
{
	return (tier == KVC_TIER_G3 ? d->cfg.g3.write : d->cfg.g4.write) ==
	       KVC_CONFIG_WRITE_THROUGH;
}

/* A retry waits a RETRY_INTERVAL_S: the disk that failed needs time. */
static void queue_retry(struct kvcd *d, uint32_t id)
{
	if (!d->retryq_len)
		d->retry_at = mono() + retry_interval;
	queue_id(&d->retryq, &d->retryq_len, &d->retryq_cap, id);
}

/*
 * A write-through spill that failed for a reason that may pass (an I/O
 * error, a full disk, a short write not completed): the block is still
 * in the pool, so it is tried again later (retry_spills) rather than
 * never reaching the tier. Refusals that will not change (read-only
 * tier, the block gone or already there) are not retried.
 */
static bool retryable(int err)
{
	return err && err != -EBUSY && err != -EEXIST && err != -EALREADY &&
	       err != -ENOENT && err != -ESTALE && err != -EROFS &&
	       err != -EACCES && err != -EPERM && err != -EINVAL;
}

static void spill_failed(struct kvcd *d, uint32_t id, int err)
{
	if (err == -EBUSY)
		queue_id(&d->spillq, &d->spillq_len, &d->spillq_cap, id);
	else if (retryable(err))
		queue_retry(d, id);
}

void kvcd_tiers_stored(struct kvcd *d, uint32_t id)
{
	for (unsigned int t = KVC_TIER_G3; t < KVC_NR_TIERS; t++) {
		if (!d->tier[t])
			continue;
		if (!admitted(d, t, id, true) || !write_through(d, t))
			continue;
		spill_failed(d, id, spill_one(d, t, id));
	}
}

/* ---- write-back: blocks held in the pool until a tier has them --------- */

static uint8_t held_state(const struct kvcd *d, uint32_t id)
{
	return id < d->nheld ? d->held[id] : 0;
}

bool kvcd_tiers_held(const struct kvcd *d, uint32_t id)
{
	return held_state(d, id) != 0;
}

static bool set_held(struct kvcd *d, uint32_t id, uint8_t v)
{
	if (id >= d->nheld) {
		size_t n = d->nheld ? d->nheld : 1024;
		uint8_t *p;

		if (!v)
			return true;
		while (n <= id)
			n *= 2;
		p = realloc(d->held, n);
		if (!p)
			return false;
		memset(p + d->nheld, 0, n - d->nheld);
		d->held = p;
		d->nheld = n;
	}
	d->held_writing -= d->held[id] == KVCD_WB_WRITING;
	d->held_dirty -= d->held[id] == KVCD_WB_DIRTY;
	d->held_writing += v == KVCD_WB_WRITING;
	d->held_dirty += v == KVCD_WB_DIRTY;
	d->held[id] = v;
	return true;
}

size_t kvcd_tiers_writing(const struct kvcd *d)
{
	return d->held_writing;
}

void kvcd_tiers_forget(struct kvcd *d, uint32_t id)
{
	set_held(d, id, 0);
}

/* A copy of it is on g3 or g4: the pool's may go. */
static bool on_a_tier(const struct kvcd *d, uint32_t id)
{
	return present(d, id, KVC_TIER_G3) || present(d, id, KVC_TIER_G4);
}

/*
 * Start the writes that block id, picked for eviction, needs before its
 * pool copy may go: one to each tier (write-back or write-through) that
 * would admit it and lacks it, unless a tier has it already. 0: none is
 * needed (on a tier already, not admitted, or refused for good: a tier
 * that cannot be written takes nothing, and holding the block would only
 * wedge the pool); -EBUSY: a write queue is full and nothing started;
 * -EINPROGRESS: the block is held, writing (KVCD_WB_WRITING) or, every
 * write having failed for a reason that may pass, dirty (KVCD_WB_DIRTY,
 * queued for a retry).
 */
static int write_back(struct kvcd *d, uint32_t id)
{
	bool started = false, retry = false, busy = false;

	if (on_a_tier(d, id))
		return 0;
	for (unsigned int t = KVC_TIER_G3; t < KVC_NR_TIERS; t++) {
		int ret;

		if (!d->tier[t] || !admitted(d, t, id, false))
			continue;
		if (kvc_tier_spilling(d->tier[t], id)) {
			started = true;
			continue;
		}
		ret = spill_one(d, t, id);
		if (!ret)
			started = true;
		else if (ret == -EBUSY)
			busy = true;
		else if (retryable(ret))
			retry = true;
	}
	if (!started && busy)
		return -EBUSY;
	if (!started && !retry)
		return 0;
	if (!set_held(d, id, started ? KVCD_WB_WRITING : KVCD_WB_DIRTY))
		return started ? -EBUSY : 0;	/* no memory: as before */
	if (!started)
		queue_retry(d, id);
	return -EINPROGRESS;
}

/*
 * Its write is over, whichever way: free the pool block if a tier has it
 * now. If the pool block cannot go (a client pinned it meanwhile, or a
 * STORE made it a parent), it goes back to the policy, clean: the next
 * eviction takes it like any other.
 */
static void release(struct kvcd *d, uint32_t id)
{
	int ret;

	set_held(d, id, 0);
	ret = kvcd_evict_id(d, id);
	if (ret && ret != -ESTALE && ret != -ENOENT)
		kvc_policy_on_insert(d->policy, id);
}

/* A write of held block id finished with status err. */
static void held_done(struct kvcd *d, uint32_t id, int err)
{
	if (kvcd_tiers_spilling(d, id))
		return;		/* another tier's write decides */
	if (on_a_tier(d, id)) {
		release(d, id);
	} else if (retryable(err)) {
		/* Dirty: kept, out of the policy, and tried again. */
		set_held(d, id, KVCD_WB_DIRTY);
		queue_retry(d, id);
	} else if (held_state(d, id) == KVCD_WB_WRITING) {
		/* Refused for good: drop it, as a read-only tier would. */
		release(d, id);
	}
}

int kvcd_tiers_evicting(struct kvcd *d, uint32_t id)
{
	/* A STORE of its key again gave it back to the policy. */
	if (kvcd_tiers_held(d, id))
		return -EINPROGRESS;
	return write_back(d, id);
}

/* The retry of a dirty block: write it again, or let it go. */
static void retry_held(struct kvcd *d, uint32_t id)
{
	int ret;

	set_held(d, id, 0);
	ret = write_back(d, id);
	if (ret == -EBUSY) {
		/* The queue is full: it stays dirty, the next retry. */
		set_held(d, id, KVCD_WB_DIRTY);
		queue_retry(d, id);
	} else if (!ret) {
		release(d, id);
	}
}

bool kvcd_tiers_spilling(const struct kvcd *d, uint32_t id)
{
	for (unsigned int t = KVC_TIER_G3; t < KVC_NR_TIERS; t++)
		if (d->tier[t] && kvc_tier_spilling(d->tier[t], id))
			return true;
	return false;
}

static void drain_spills(struct kvcd *d)
{
	size_t i = 0, kept = 0;

	for (; i < d->spillq_len; i++) {
		uint32_t id = d->spillq[i];
		bool busy = false, retry = false;

		for (unsigned int t = KVC_TIER_G3; t < KVC_NR_TIERS; t++) {
			int ret;

			if (!d->tier[t] || !write_through(d, t))
				continue;
			ret = spill_one(d, t, id);
			busy |= ret == -EBUSY;
			retry |= retryable(ret);
		}
		if (busy)
			d->spillq[kept++] = id;
		else if (retry)
			queue_retry(d, id);
	}
	d->spillq_len = kept;
}

/*
 * Failed write-through spills, once a RETRY_INTERVAL_S: each goes to
 * every write-through tier that lacks it (spill_one skips the others);
 * one failing again is queued again by spill_failed() or tier_done().
 */
static void retry_spills(struct kvcd *d)
{
	size_t n = d->retryq_len < RETRY_BATCH ? d->retryq_len : RETRY_BATCH;
	uint32_t batch[RETRY_BATCH];
	double now = mono();

	if (!n || now < d->retry_at)
		return;
	d->retry_at = now + retry_interval;
	memcpy(batch, d->retryq, n * sizeof(*batch));
	d->retryq_len -= n;
	memmove(d->retryq, d->retryq + n, d->retryq_len * sizeof(*batch));
	for (size_t i = 0; i < n; i++) {
		if (!present(d, batch[i], KVC_TIER_POOL))
			continue;	/* evicted meanwhile: nothing to copy */
		if (held_state(d, batch[i]) == KVCD_WB_DIRTY) {
			d->spill_retries++;
			retry_held(d, batch[i]);
			continue;
		}
		if (kvcd_tiers_held(d, batch[i]))
			continue;	/* being written: its completion */
		d->spill_retries++;
		for (unsigned int t = KVC_TIER_G3; t < KVC_NR_TIERS; t++)
			if (d->tier[t] && write_through(d, t))
				spill_failed(d, batch[i],
					     spill_one(d, t, batch[i]));
	}
}

/* ---- promotion ------------------------------------------------------------ */

static bool set_fetching(struct kvcd *d, uint32_t id, uint8_t v)
{
	if (id >= d->nfetching) {
		size_t n = d->nfetching ? d->nfetching : 1024;
		uint8_t *p;

		while (n <= id)
			n *= 2;
		p = realloc(d->fetching, n);
		if (!p)
			return false;
		memset(p + d->nfetching, 0, n - d->nfetching);
		d->fetching = p;
		d->nfetching = n;
	}
	d->fetching[id] = v;
	return true;
}

static bool is_fetching(const struct kvcd *d, uint32_t id)
{
	return id < d->nfetching && d->fetching[id];
}

/*
 * Start reading entry id up from tier first on (g3, else g4). 0: on its
 * way (or queued); -ENOENT: no tier from first on has it (any more).
 */
static int fetch_from(struct kvcd *d, uint32_t id, unsigned int first)
{
	for (unsigned int t = first; t < KVC_NR_TIERS; t++) {
		int ret;

		if (!d->tier[t] || !present(d, id, t))
			continue;
		ret = kvc_tier_fetch(d->tier[t], id, id);
		if (ret == -EBUSY) {
			queue_id(&d->fetchq, &d->fetchq_len, &d->fetchq_cap,
				 id);
			return set_fetching(d, id, 1) ? 0 : -ENOMEM;
		}
		if (!ret)
			return set_fetching(d, id, 1) ? 0 : -ENOMEM;
		/* A miss or corrupt there (now cleared): the next tier. */
		kvc_metric_add(d->dm.misses[t], 1);
	}
	return -ENOENT;
}

static int start_fetch(struct kvcd *d, uint32_t id)
{
	return fetch_from(d, id, KVC_TIER_G3);
}

int kvcd_tiers_want(struct kvcd *d, uint32_t id)
{
	if (is_fetching(d, id))
		return 0;
	return start_fetch(d, id);
}

void kvcd_tiers_prefetch(struct kvcd *d, const struct kvc_match *m,
			 size_t n)
{
	unsigned int budget = d->cfg.pool.prefetch;

	for (size_t i = 0; i < n && budget; i++) {
		if (m[i].tiers & (1u << KVC_TIER_POOL) ||
		    is_fetching(d, m[i].id))
			continue;
		if (!start_fetch(d, m[i].id)) {
			d->prefetches++;
			budget--;
		}
	}
}

void kvcd_tiers_access(struct kvcd *d, uint32_t id)
{
	for (unsigned int t = KVC_TIER_G3; t < KVC_NR_TIERS; t++) {
		if (!d->tier[t])
			continue;
		kvc_tier_touch(d->tier[t], id);
		if (d->tier_admit[t])
			admitted(d, t, id, true);
	}
}

static void drain_fetches(struct kvcd *d)
{
	size_t i, kept = 0;

	for (i = 0; i < d->fetchq_len; i++) {
		uint32_t id = d->fetchq[i];
		int ret = -ENOENT;

		if (!is_fetching(d, id))
			continue;
		for (unsigned int t = KVC_TIER_G3; t < KVC_NR_TIERS; t++) {
			if (!d->tier[t] || !present(d, id, t))
				continue;
			ret = kvc_tier_fetch(d->tier[t], id, id);
			if (ret != -ENOENT && ret != -EBADMSG)
				break;
		}
		if (ret == -EBUSY)
			d->fetchq[kept++] = id;
		else if (ret)
			d->fetching[id] = 0;	/* gone: a miss */
	}
	d->fetchq_len = kept;
}

/* ---- waiting LOADs ---------------------------------------------------------- */

bool kvcd_tiers_defer(struct kvcd *d, const struct kvc_peer *p,
		      const struct kvc_msg *m,
		      const struct kvc_load_result *res)
{
	const struct kvc_load *l = &m->load;
	struct kvcd_wait *w = NULL;

	for (uint32_t i = 0; i < KVC_SERVER_MAX_CLIENTS && !w; i++)
		if (!d->waits[i].used)
			w = &d->waits[i];
	if (!w)
		return false;
	w->keys = malloc((size_t)l->count * KVCACHE_KEY_SIZE);
	w->res = malloc((size_t)l->count * sizeof(*w->res));
	if (!w->keys || !w->res) {
		free(w->keys);
		free(w->res);
		return false;
	}
	memcpy(w->keys, l->keys, (size_t)l->count * KVCACHE_KEY_SIZE);
	memcpy(w->res, res, (size_t)l->count * sizeof(*w->res));
	w->used = true;
	w->peer = p->id;
	w->serial = p->serial;
	w->seq = m->seq;
	w->ns = l->ns_id;
	w->count = l->count;
	w->outstanding = 0;
	for (uint32_t i = 0; i < l->count; i++)
		w->outstanding += res[i].status == KVCD_WAIT_PENDING;
	return true;
}

static void wait_free(struct kvcd_wait *w)
{
	free(w->keys);
	free(w->res);
	memset(w, 0, sizeof(*w));
}

/* Answer what can be answered now; reply to LOADs that are complete. */
static void settle(struct kvcd *d)
{
	static uint8_t reply[KVC_PROTO_MSG_MAX];

	for (uint32_t wi = 0; wi < KVC_SERVER_MAX_CLIENTS; wi++) {
		struct kvcd_wait *w = &d->waits[wi];
		int len;

		if (!w->used)
			continue;
		for (uint32_t i = 0; i < w->count; i++) {
			struct kvc_load_result *r = &w->res[i];
			const struct kvc_entry *e;
			uint32_t id;

			if (r->status != KVCD_WAIT_PENDING)
				continue;
			if (kvc_index_find(d->index, w->ns, w->keys[i], &id)) {
				r->status = -ENOENT;
			} else if ((e = kvc_index_entry(d->index, id))->tiers &
				   (1u << KVC_TIER_POOL)) {
				r->handle = e->loc[KVC_TIER_POOL].pool;
				r->status = kvc_pool_pin(d->pool, w->peer,
							 r->handle);
				if (r->status)
					memset(&r->handle, 0,
					       sizeof(r->handle));
				else
					kvc_policy_on_access(d->policy, id);
			} else if (is_fetching(d, id)) {
				continue;
			} else {
				r->status = -ENOENT;
			}
			w->outstanding--;
		}
		if (w->outstanding)
			continue;
		len = kvc_proto_encode_load_reply(reply, sizeof(reply),
						  (uint32_t)w->seq, w->res,
						  w->count);
		/* In the version its HELLO chose, as every reply. */
		len = kvc_proto_set_version(reply, len,
					    d->clients[w->peer].version);
		if (len > 0 &&
		    kvc_server_reply(d->srv, w->peer, w->serial, reply,
				     (size_t)len, -1) == -ENOTCONN)
			/* Gone: closed() already dropped its pins, except
			 * the ones given just now (memfd mode). */
			kvc_pool_release(d->pool, w->peer);
		wait_free(w);
	}
}

void kvcd_tiers_closed(struct kvcd *d, const struct kvc_peer *p)
{
	if (!d->waits)
		return;
	for (uint32_t i = 0; i < KVC_SERVER_MAX_CLIENTS; i++)
		if (d->waits[i].used && d->waits[i].peer == p->id &&
		    d->waits[i].serial == p->serial)
			wait_free(&d->waits[i]);
}

/* ---- completions ---------------------------------------------------------- */

struct done_ctx {
	struct kvcd *d;
	unsigned int tier;
};

static void tier_done(void *arg, const struct kvc_tier_done *o)
{
	struct done_ctx *c = arg;
	struct kvcd *d = c->d;
	int ret;

	if (o->op == KVC_TIO_WRITE) {
		uint32_t id;

		if (!o->status)
			kvc_metric_add(d->dm.written_bytes[c->tier],
				       o->bytes);
		if (kvc_index_find(d->index, o->ns, o->key, &id) ||
		    !present(d, id, KVC_TIER_POOL))
			return;
		if (kvcd_tiers_held(d, id))
			held_done(d, id, o->status);
		else if (o->status && write_through(d, c->tier) &&
			 retryable(o->status))
			queue_retry(d, id);
		return;
	}
	if (o->cookie < d->nfetching)
		d->fetching[o->cookie] = 0;
	if (o->id == KVC_ID_NONE)
		return;
	if (o->status) {
		kvc_metric_add(d->dm.misses[c->tier], 1);
		/*
		 * The next tier may still have a good copy. Only the next:
		 * a block this tier failed to read (EIO) stays present in
		 * it, and asking it again would loop on a bad sector.
		 */
		fetch_from(d, o->id, c->tier + 1);
		return;
	}
	kvc_metric_add(d->dm.hits[c->tier], 1);
	kvc_metric_add(d->dm.read_bytes[c->tier], o->bytes);
	if (present(d, o->id, KVC_TIER_POOL))
		return;		/* stored again meanwhile */
	ret = promote(d, o->id, o->payload, o->payload_len);
	if (ret == -ENOSPC && d->reaping &&
	    defer_promote(d, o->id, o->payload, o->payload_len)) {
		/* LOADs waiting on it keep waiting: run_promotions(). */
		set_fetching(d, o->id, 1);
		return;
	}
	if (ret) {
		d->promote_errors++;
		return;
	}
	d->promotions++;
	/* Pin it for the LOADs waiting on it before anything can evict it
	 * to make room for the next promotion. */
	settle(d);
}

/*
 * The tiers count their errors (tier.h); the metrics endpoint's counters
 * follow them, by the difference since the last look.
 */
static void sync_error_metrics(struct kvcd *d)
{
	for (unsigned int t = KVC_TIER_G3; t < KVC_NR_TIERS; t++) {
		const struct kvc_tier_stats *s;
		uint64_t seen;

		if (!d->tier[t])
			continue;
		s = kvc_tier_stats(d->tier[t]);
		seen = kvc_metric_counter_value(d->dm.spill_errors[t]);
		if (s->spill_errors > seen)
			kvc_metric_add(d->dm.spill_errors[t],
				       s->spill_errors - seen);
		seen = kvc_metric_counter_value(d->dm.read_errors[t]);
		if (s->read_errors > seen)
			kvc_metric_add(d->dm.read_errors[t],
				       s->read_errors - seen);
	}
}

/*
 * Reap tier t's completions (with wait: at least one, if any is in
 * flight). tier_done() may promote, and a promotion may evict: that
 * eviction must not wait for completions inside this reap.
 */
static void reap(struct kvcd *d, unsigned int t, bool wait)
{
	struct done_ctx c = { d, t };
	bool was = d->reaping;

	d->reaping = true;
	kvc_tier_reap(d->tier[t], wait, tier_done, &c);
	d->reaping = was;
}

/*
 * The promotions tier_done() deferred, now that eviction may wait for
 * the write-backs that make room. Not re-entered: the waits reap, and
 * what they defer joins the list this loop is taking from.
 */
static void run_promotions(struct kvcd *d)
{
	if (d->promoting || d->reaping)
		return;
	d->promoting = true;
	while (d->npromo) {
		struct kvcd_promo p = d->promo[--d->npromo];
		uint32_t id;

		if (!kvc_index_find(d->index, p.ns, p.key, &id)) {
			if (id < d->nfetching)
				d->fetching[id] = 0;
			if (!present(d, id, KVC_TIER_POOL)) {
				if (promote(d, id, p.payload, p.len)) {
					d->promote_errors++;
				} else {
					d->promotions++;
					settle(d);
				}
			}
		}
		free(p.payload);
	}
	d->promoting = false;
	settle(d);
}

static void after_reap(struct kvcd *d)
{
	run_promotions(d);
	drain_fetches(d);
	drain_spills(d);
	sync_error_metrics(d);
	settle(d);
}

bool kvcd_tiers_wait(struct kvcd *d)
{
	if (d->reaping)
		return false;
	for (unsigned int t = KVC_TIER_G3; t < KVC_NR_TIERS; t++) {
		if (!d->tier[t] || !kvc_tier_in_flight(d->tier[t]))
			continue;
		reap(d, t, true);
		/* The other tier's completions too, without waiting. */
		for (unsigned int u = KVC_TIER_G3; u < KVC_NR_TIERS; u++)
			if (u != t && d->tier[u])
				reap(d, u, false);
		after_reap(d);
		return true;
	}
	return false;
}

bool kvcd_tiers_readable(struct kvcd *d, int fd)
{
	for (unsigned int t = KVC_TIER_G3; t < KVC_NR_TIERS; t++) {
		if (!d->tier[t] || fd != kvc_tier_fd(d->tier[t]))
			continue;
		reap(d, t, false);
		after_reap(d);
		/* Evictions waiting for write-back slots can go on now. */
		kvcd_check_pool(d);
		return true;
	}
	return false;
}

void kvcd_tiers_tick(struct kvcd *d)
{
	for (unsigned int t = KVC_TIER_G3; t < KVC_NR_TIERS; t++)
		if (d->tier[t])
			kvc_tier_tick(d->tier[t], ns_ok, d);
	run_promotions(d);
	drain_fetches(d);
	drain_spills(d);
	retry_spills(d);
	sync_error_metrics(d);
	if (d->waits)
		settle(d);
}

size_t kvcd_tiers_fds(const struct kvcd *d, int *fds, size_t max)
{
	size_t n = 0;

	for (unsigned int t = KVC_TIER_G3; t < KVC_NR_TIERS && n < max; t++)
		if (d->tier[t])
			fds[n++] = kvc_tier_fd(d->tier[t]);
	return n;
}

/* ---- stats ------------------------------------------------------------------- */

#define TIER_NSTATS	14

size_t kvcd_tiers_stats(struct kvcd *d, struct kvc_stat *st, size_t max)
{
	static char names[KVC_NR_TIERS][TIER_NSTATS][32];
	static const char *const what[TIER_NSTATS] = {
		"blocks", "bytes", "capacity", "spills", "spill_errors",
		"spill_exists", "reads", "read_errors", "misses", "corrupt",
		"evictions", "lease_skips", "found", "lost",
	};
	size_t n = 0;

	for (unsigned int t = KVC_TIER_G3; t < KVC_NR_TIERS; t++) {
		const struct kvc_tier_stats *s;
		uint64_t v[TIER_NSTATS];

		if (!d->tier[t])
			continue;
		s = kvc_tier_stats(d->tier[t]);
		v[0] = s->blocks;
		v[1] = s->usage;
		v[2] = kvc_tier_capacity(d->tier[t]);
		v[3] = s->spills;
		v[4] = s->spill_errors;
		v[5] = s->spill_exists;
		v[6] = s->reads;
		v[7] = s->read_errors;
		v[8] = s->misses;
		v[9] = s->corrupt;
		v[10] = s->evictions;
		v[11] = s->lease_skips;
		v[12] = s->found;
		v[13] = s->lost;
		for (size_t i = 0; i < TIER_NSTATS && n < max; i++) {
			snprintf(names[t][i], sizeof(names[t][i]), "%s_%s",
				 tier_names[t], what[i]);
			st[n++] = (struct kvc_stat){ names[t][i], 0, v[i] };
		}
	}
	if (n + 6 <= max) {
		st[n++] = (struct kvc_stat){ "pool_writeback", 0,
					     d->held_writing };
		st[n++] = (struct kvc_stat){ "pool_dirty", 0, d->held_dirty };
		st[n++] = (struct kvc_stat){ "promotions", 0, d->promotions };
		st[n++] = (struct kvc_stat){ "promote_errors", 0,
					     d->promote_errors };
		st[n++] = (struct kvc_stat){ "prefetches", 0, d->prefetches };
		st[n++] = (struct kvc_stat){ "spill_retries", 0,
					     d->spill_retries };
	}
	/* Only in a daemon started with KVCACHED_FAULT (fault.h). */
	if (kvc_fault_armed && n < max)
		st[n++] = (struct kvc_stat){ "faults_injected", 0,
					     kvc_fault_injected_total() };
	return n;
}

/* ---- setup ------------------------------------------------------------------ */

static int open_tier(struct kvcd *d, unsigned int tier, const char *node)
{
	bool g3 = tier == KVC_TIER_G3;
	struct kvc_tier_config tc = {
		.tier = tier,
		.dir = g3 ? d->cfg.g3.directory : d->cfg.g4.directory,
		.capacity = g3 ? d->cfg.g3.capacity : d->cfg.g4.capacity,
		.shared = !g3,
		.fsync = (g3 ? d->cfg.g3.fsync : d->cfg.g4.fsync) ==
			 KVC_CONFIG_FSYNC_ALWAYS,
		.depth = g3 ? d->cfg.g3.queue_depth : d->cfg.g4.queue_depth,
		.max_payload = d->block_size,
		.node = node,
		.grace_ms = d->cfg.g4.grace_ms,
		.scan_interval_ms = d->cfg.g4.scan_interval_ms,
	};
	unsigned int k = g3 ? d->cfg.eviction.g3_admit :
			 d->cfg.eviction.g4_admit;
	const struct kvc_tier_stats *s;
	double t0;
	long found;
	int ret;

	if (!tc.dir[0])
		return 0;
	ret = kvc_tier_open(&d->tier[tier], &tc, d->index);
	if (ret) {
		kvc_err("%s %s: %s%s", tier_names[tier],
			tc.dir, strerror(-ret), ret != -ENOMEM ? "" :
			" (its I/O buffers, queue_depth blocks, are locked memory: raise RLIMIT_MEMLOCK or lower queue_depth)");
		return ret;
	}
	if (!kvc_tier_writable(d->tier[tier]))
		kvc_warn("%s %s is not writable (%s): blocks there are read, none are written",
			tier_names[tier], tc.dir,
			strerror(-kvc_tier_stats(d->tier[tier])->last_error));
	ret = kvc_admit_create(&d->tier_admit[tier], k, d->nr_blocks);
	if (ret)
		return ret;
	t0 = mono();
	found = kvc_tier_recover(d->tier[tier], ns_ok, d);
	if (found < 0) {
		kvc_err("%s %s: recovery: %s",
			tier_names[tier], tc.dir, strerror((int)-found));
		return (int)found;
	}
	s = kvc_tier_stats(d->tier[tier]);
	kvc_info("%s %s: %ld blocks, %" PRIu64 " of %" PRIu64
		" bytes, %" PRIu64 " quarantined, recovered in %.3f s",
		tier_names[tier], tc.dir, found, s->usage, tc.capacity,
		s->corrupt, mono() - t0);
	return 0;
}

int kvcd_tiers_open(struct kvcd *d)
{
	char host[KVC_CONFIG_NODE_MAX] = "";
	const char *node = d->cfg.g4.node;
	const char *env = getenv(RETRY_ENV);
	int ret;

	if (env && env[0]) {
		char *end;
		unsigned long ms;

		errno = 0;
		ms = strtoul(env, &end, 10);
		/* 1 ms to the default: longer or garbage is a test bug. */
		if (errno || *end || env[0] == '-' || !ms || ms > 1000) {
			kvc_err("%s=%s: want 1..1000 (milliseconds)",
				RETRY_ENV, env);
			return -EINVAL;
		}
		retry_interval = ms / 1000.0;
		kvc_info("spill retries every %lu ms (%s)",
			ms, RETRY_ENV);
	}
	d->waits = calloc(KVC_SERVER_MAX_CLIENTS, sizeof(*d->waits));
	if (!d->waits)
		return -ENOMEM;
	if (!node[0]) {
		/* Temp names carry it: no '/' (config.c checks a set one). */
		if (gethostname(host, sizeof(host) - 1) || !host[0])
			strcpy(host, "node");
		for (char *c = host; *c; c++)
			if (*c == '/')
				*c = '_';
		node = host;
	}
	ret = open_tier(d, KVC_TIER_G3, node);
	if (!ret)
		ret = open_tier(d, KVC_TIER_G4, node);
	return ret;
}

void kvcd_tiers_close(struct kvcd *d)
{
	uint64_t unwritten = 0;

	/*
	 * Writes in flight are finished and published, not abandoned: a
	 * block held for its write-back has no other copy. Without the
	 * daemon's callbacks: the clients are gone.
	 */
	for (unsigned int t = KVC_TIER_G3; t < KVC_NR_TIERS; t++)
		while (d->tier[t] && kvc_tier_in_flight(d->tier[t]))
			if (kvc_tier_reap(d->tier[t], true, NULL, NULL) < 0)
				break;
	for (size_t id = 0; id < d->nheld; id++)
		unwritten += d->held[id] && !on_a_tier(d, (uint32_t)id);
	if (unwritten)
		kvc_err("%" PRIu64 " dirty blocks (written back at eviction, every write failed) reached no tier%s",
			unwritten, kvc_pool_has(d->pool, KVC_POOL_PERSISTENT) ?
			"; they stay in kvcache.ko's pool" : "");
	for (unsigned int t = KVC_TIER_G3; t < KVC_NR_TIERS; t++) {
		kvc_tier_close(d->tier[t]);
		kvc_admit_destroy(d->tier_admit[t]);
		d->tier[t] = NULL;
	}
	if (d->waits)
		for (uint32_t i = 0; i < KVC_SERVER_MAX_CLIENTS; i++)
			if (d->waits[i].used)
				wait_free(&d->waits[i]);
	free(d->waits);
	free(d->fetchq);
	free(d->spillq);
	free(d->retryq);
	free(d->fetching);
	free(d->held);
	d->held = NULL;
	while (d->npromo)
		free(d->promo[--d->npromo].payload);
	free(d->promo);
	d->promo = NULL;
	d->nheld = 0;
	d->held_writing = d->held_dirty = 0;
	d->waits = NULL;
}
