// SPDX-License-Identifier: GPL-2.0
/*
 * spill: copies of pool blocks out to g3 and g4 (tiers_priv.h,
 * Documentation/design/tiers.md).
 *
 * A tier with write = through gets a copy of each block as it is
 * stored; with write = back, when the pool evicts the block. Either way
 * the pool block's bytes are copied once, into a registered I/O buffer.
 * When a tier's write queue is full, a write-through spill waits in
 * spillq, and a write-back eviction waits (the pool block stays until
 * there is room: the queue depth bounds the memory and the device queue,
 * and eviction slows down to the disk's pace instead of dropping blocks).
 * spillq itself is bounded (SPILLQ_MAX): past it, a write-through copy
 * is shed (through_shed), not queued. That loses nothing: the block is
 * still in the pool, and its eviction writes it first, as write-back
 * does. It is what a disk that someone else saturates needs: the copies
 * nobody waits for give way, and the reads a load waits for (which
 * tierio keeps slots and a higher I/O priority for) are not queued
 * behind a backlog of them.
 *
 * Nothing sealed is lost to a failed write. A block the eviction picks
 * that no tier has yet (write-back, or a write-through copy that failed
 * or is still on its way) is held: its pool block stays sealed, indexed
 * and servable to LOADs, but out of the policy, so eviction does not
 * pick it again (held[id], KVCD_WB_*). When its write is published it
 * is evicted (release()); when the write fails for a reason that may
 * pass (EIO, ENOSPC, a short write, fsync or link failing) it stays,
 * dirty, and is written again after the retry interval, as failed
 * write-through spills are. Eviction meanwhile takes other blocks; a
 * pool full of dirty blocks refuses new ones (ALLOC: ENOSPC), as the
 * page cache throttles writers on dirty pages. A tier that refuses for
 * good (read-only, EACCES) takes nothing and holds nothing. FLUSH of the
 * pool alone leaves held blocks (-EBUSY: dropping the only copy would
 * lose them); EVICT, or FLUSH of every tier, drops them.
 *
 * Lifetime of a held entry: its pool bit keeps it in the index; its
 * held[] state is cleared wherever its pool copy goes (kvcd_clear_pool()
 * calls kvcd_tiers_forget()), so an id reused later starts clean.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "fault.h"
#include "tiers_priv.h"

/* Failed spills retried per try, so a dead disk costs little. */
#define RETRY_BATCH		64
/* Write-through copies waiting for a slot, at most; more are shed. */
#define SPILLQ_MAX		64

/* How spill_one() copies a block. */
enum spill_how {
	SPILL_BACK,		/* write-back: the pool evicts it */
	SPILL_THROUGH,		/* write-through: stored */
	SPILL_THROUGH_QUEUED,	/* write-through, again from spillq */
	SPILL_THROUGH_RETRY,	/* write-through, again from the retries */
	SPILL_ANCESTOR,		/* a retried child's oldest missing ancestor */
};

/*
 * May a write-through copy of the entry go to the tier before its
 * parent's? No: a file whose parent is not on the tier is unreachable
 * there (a lookup walks a chain from its first block), yet it counts
 * against the capacity until it is old enough to be collected. When a
 * full directory refuses a parent (ENOSPC: the rest is within its grace)
 * and takes its children, the tier fills with files nobody can find. So
 * a child waits for its parent: 0 when the parent is there or on its
 * way; -EAGAIN when it may still come (in the pool, admitted); -ENOENT
 * when it will not (the child is skipped, as a block evicted before its
 * copy is). A wait is counted when the copy is stored or retried, not
 * at each pass over the queue it waits in.
 *
 * A parent that may still come is usually in a queue ahead of its child
 * (spillq, or the retries). But GC may have taken its file from the
 * tier (another node's GC, or this one's while the child waited), and
 * then nothing would write it again: the child would wait until the pool
 * evicts the parent. So a retried child climbs its chain to the oldest
 * ancestor missing from the tier and starts that one's copy; the chain
 * is written again from its top down, a retry pass at a time at worst.
 * Only a retry climbs: a chain can be long, and a STORE's copy must not
 * cost a walk of it.
 */
static int spill_one(struct kvcd *d, unsigned int tier, uint32_t id,
		     enum spill_how how);

/* May id's copy go to the tier before its parent's? */
static bool parent_there(struct kvcd *d, unsigned int tier,
			 const struct kvc_entry *p, uint32_t id)
{
	return !p || (p->tiers & (1u << tier)) ||
	       kvc_tier_spilling(d->tiers->tier[tier], id);
}

static bool may_come(struct kvcd *d, unsigned int tier,
		     const struct kvc_entry *p, uint32_t id)
{
	return (p->tiers & (1u << KVC_TIER_POOL)) &&
	       tiers_admitted(d, tier, id, false);
}

static int parent_first(struct kvcd *d, unsigned int tier,
			const struct kvc_entry *e, enum spill_how how)
{
	uint32_t id = e->parent, missing, walked = 0;
	const struct kvc_entry *p;

	/* A tier that takes nothing refuses the child itself, counted. */
	if (id == KVC_ID_NONE || !kvc_tier_writable(d->tiers->tier[tier]))
		return 0;
	p = kvc_index_entry(d->index, id);
	if (parent_there(d, tier, p, id))
		return 0;
	if (!may_come(d, tier, p, id))
		return -ENOENT;
	if (how != SPILL_THROUGH_QUEUED)
		d->tiers->spill_deferred++;
	if (how != SPILL_THROUGH_RETRY)
		return -EAGAIN;
	do {
		missing = id;
		id = p->parent;
		if (id == KVC_ID_NONE)
			break;
		p = kvc_index_entry(d->index, id);
		if (parent_there(d, tier, p, id))
			break;
		if (!may_come(d, tier, p, id))
			return -ENOENT;
	} while (++walked < d->nr_blocks);
	/* No slot, or it failed: the child's next retry tries again. */
	spill_one(d, tier, missing, SPILL_ANCESTOR);
	return -EAGAIN;
}

/*
 * Copy pool block id to the tier. A write-through copy follows its
 * parent (parent_first()); a write-back one is made as the pool evicts,
 * leaves first, and its parent follows it.
 */
static int spill_one(struct kvcd *d, unsigned int tier, uint32_t id,
		     enum spill_how how)
{
	struct kvc_tier *t = d->tiers->tier[tier];
	const struct kvc_entry *e = kvc_index_entry(d->index, id);
	uint8_t *buf;
	uint64_t len = 0;
	int slot, ret;

	if (!e || !(e->tiers & (1u << KVC_TIER_POOL)))
		return -ENOENT;
	if ((e->tiers & (1u << tier)) || kvc_tier_spilling(t, id))
		return -EEXIST;
	if (how != SPILL_BACK && how != SPILL_ANCESTOR) {
		ret = parent_first(d, tier, e, how);
		if (ret)
			return ret;
	}
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

void tiers_queue_id(uint32_t **q, size_t *len, size_t *cap, uint32_t id)
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
bool tiers_admitted(struct kvcd *d, unsigned int tier, uint32_t id,
		    bool count)
{
	struct kvcd_tiers *tr = d->tiers;
	unsigned int k = tier == KVC_TIER_G3 ? d->cfg.eviction.g3_admit :
			 d->cfg.eviction.g4_admit;
	uint64_t fp = kvc_index_fingerprint(d->index, id);

	if (k <= 1)
		return true;
	if (count)
		return kvc_admit_access(tr->tier_admit[tier], fp);
	return kvc_admit_estimate(tr->tier_admit[tier], fp) >= k;
}

bool tiers_write_through(const struct kvcd *d, unsigned int tier)
{
	return (tier == KVC_TIER_G3 ? d->cfg.g3.write : d->cfg.g4.write) ==
	       KVC_CONFIG_WRITE_THROUGH;
}

/* A retry waits a RETRY_INTERVAL_S: the disk that failed needs time. */
void tiers_queue_retry(struct kvcd *d, uint32_t id)
{
	struct kvcd_tiers *tr = d->tiers;

	if (!tr->retryq_len)
		tr->retry_at = kvc_now() + tr->retry_interval;
	tiers_queue_id(&tr->retryq, &tr->retryq_len, &tr->retryq_cap, id);
}

/*
 * A write-through spill that failed for a reason that may pass (an I/O
 * error, a full disk, a short write not completed): the block is still
 * in the pool, so it is tried again later (retry_spills) rather than
 * never reaching the tier. Refusals that will not change (read-only
 * tier, the block gone or already there) are not retried.
 */
bool tiers_retryable(int err)
{
	return err && err != -EBUSY && err != -EEXIST && err != -EALREADY &&
	       err != -ENOENT && err != -ESTALE && err != -EROFS &&
	       err != -EACCES && err != -EPERM && err != -EINVAL;
}

static void spill_failed(struct kvcd *d, uint32_t id, int err)
{
	struct kvcd_tiers *tr = d->tiers;

	/* Its parent may wait in the queue: behind it, then. */
	if (err == -EBUSY || (err == -EAGAIN && tr->spillq_len)) {
		if (tr->spillq_len >= SPILLQ_MAX) {
			tr->through_shed++;	/* its eviction writes it */
			return;
		}
		tiers_queue_id(&tr->spillq, &tr->spillq_len, &tr->spillq_cap,
			       id);
	}
	else if (tiers_retryable(err))
		tiers_queue_retry(d, id);
}

void kvcd_tiers_stored(struct kvcd *d, uint32_t id)
{
	for (unsigned int t = KVC_TIER_G3; t < KVC_NR_TIERS; t++) {
		if (!d->tiers->tier[t])
			continue;
		if (!tiers_admitted(d, t, id, true) ||
		    !tiers_write_through(d, t))
			continue;
		spill_failed(d, id, spill_one(d, t, id, SPILL_THROUGH));
	}
}

static uint8_t held_state(const struct kvcd *d, uint32_t id)
{
	struct kvcd_tiers *tr = d->tiers;

	return id < tr->nheld ? tr->held[id] : 0;
}

bool kvcd_tiers_held(const struct kvcd *d, uint32_t id)
{
	return held_state(d, id) != 0;
}

static bool set_held(struct kvcd *d, uint32_t id, uint8_t v)
{
	struct kvcd_tiers *tr = d->tiers;

	if (id >= tr->nheld) {
		size_t n = tr->nheld ? tr->nheld : 1024;
		uint8_t *p;

		if (!v)
			return true;
		while (n <= id)
			n *= 2;
		p = realloc(tr->held, n);
		if (!p)
			return false;
		memset(p + tr->nheld, 0, n - tr->nheld);
		tr->held = p;
		tr->nheld = n;
	}
	tr->held_writing -= tr->held[id] == KVCD_WB_WRITING;
	tr->held_dirty -= tr->held[id] == KVCD_WB_DIRTY;
	tr->held_writing += v == KVCD_WB_WRITING;
	tr->held_dirty += v == KVCD_WB_DIRTY;
	tr->held[id] = v;
	return true;
}

size_t kvcd_tiers_writing(const struct kvcd *d)
{
	return d->tiers->held_writing;
}

void kvcd_tiers_forget(struct kvcd *d, uint32_t id)
{
	set_held(d, id, 0);
}

/* A copy of it is on g3 or g4: the pool's may go. */
bool tiers_on_a_tier(const struct kvcd *d, uint32_t id)
{
	return tiers_present(d, id, KVC_TIER_G3) ||
	       tiers_present(d, id, KVC_TIER_G4);
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
	struct kvcd_tiers *tr = d->tiers;
	bool started = false, retry = false, busy = false;

	if (tiers_on_a_tier(d, id))
		return 0;
	for (unsigned int t = KVC_TIER_G3; t < KVC_NR_TIERS; t++) {
		int ret;

		if (!tr->tier[t] || !tiers_admitted(d, t, id, false))
			continue;
		if (kvc_tier_spilling(tr->tier[t], id)) {
			started = true;
			continue;
		}
		ret = spill_one(d, t, id, SPILL_BACK);
		if (!ret)
			started = true;
		else if (ret == -EBUSY)
			busy = true;
		else if (tiers_retryable(ret))
			retry = true;
	}
	if (!started && busy)
		return -EBUSY;
	if (!started && !retry)
		return 0;
	if (!set_held(d, id, started ? KVCD_WB_WRITING : KVCD_WB_DIRTY))
		return started ? -EBUSY : 0;	/* no memory: as before */
	if (!started)
		tiers_queue_retry(d, id);
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
void tiers_held_done(struct kvcd *d, uint32_t id, int err)
{
	if (kvcd_tiers_spilling(d, id))
		return;		/* another tier's write decides */
	if (tiers_on_a_tier(d, id)) {
		release(d, id);
	} else if (tiers_retryable(err)) {
		/* Dirty: kept, out of the policy, and tried again. */
		set_held(d, id, KVCD_WB_DIRTY);
		tiers_queue_retry(d, id);
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
		tiers_queue_retry(d, id);
	} else if (!ret) {
		release(d, id);
	}
}

bool kvcd_tiers_spilling(const struct kvcd *d, uint32_t id)
{
	struct kvcd_tiers *tr = d->tiers;

	for (unsigned int t = KVC_TIER_G3; t < KVC_NR_TIERS; t++)
		if (tr->tier[t] && kvc_tier_spilling(tr->tier[t], id))
			return true;
	return false;
}

void tiers_drain_spills(struct kvcd *d)
{
	struct kvcd_tiers *tr = d->tiers;
	size_t i = 0, kept = 0;

	for (; i < tr->spillq_len; i++) {
		uint32_t id = tr->spillq[i];
		bool busy = false, retry = false;

		for (unsigned int t = KVC_TIER_G3; t < KVC_NR_TIERS; t++) {
			int ret;

			if (!tr->tier[t] || !tiers_write_through(d, t))
				continue;
			ret = spill_one(d, t, id, SPILL_THROUGH_QUEUED);
			/* Its parent still waits ahead of it: so does it. */
			busy |= ret == -EBUSY || (ret == -EAGAIN && kept);
			retry |= tiers_retryable(ret);
			/*
			 * The pool let it go while it waited for a staging
			 * buffer (another tier had it): this tier's copy is
			 * not made. Said, as it costs the other nodes a hit.
			 */
			if (ret == -ENOENT && !tiers_present(d, id, t) &&
			    tiers_on_a_tier(d, id) &&
			    tiers_admitted(d, t, id, false))
				tr->through_dropped++;
		}
		if (busy)
			tr->spillq[kept++] = id;
		else if (retry)
			tiers_queue_retry(d, id);
	}
	tr->spillq_len = kept;
}

/*
 * Failed write-through spills, once a RETRY_INTERVAL_S: each goes to
 * every write-through tier that lacks it (spill_one skips the others);
 * one failing again is queued again by spill_failed() or tier_done().
 */
void tiers_retry_spills(struct kvcd *d)
{
	struct kvcd_tiers *tr = d->tiers;
	size_t n = tr->retryq_len < RETRY_BATCH ? tr->retryq_len : RETRY_BATCH;
	uint32_t batch[RETRY_BATCH];
	double now = kvc_now();

	if (!n || now < tr->retry_at)
		return;
	tr->retry_at = now + tr->retry_interval;
	memcpy(batch, tr->retryq, n * sizeof(*batch));
	tr->retryq_len -= n;
	memmove(tr->retryq, tr->retryq + n, tr->retryq_len * sizeof(*batch));
	for (size_t i = 0; i < n; i++) {
		if (!tiers_present(d, batch[i], KVC_TIER_POOL))
			continue;	/* evicted meanwhile: nothing to copy */
		if (held_state(d, batch[i]) == KVCD_WB_DIRTY) {
			tr->spill_retries++;
			retry_held(d, batch[i]);
			continue;
		}
		if (kvcd_tiers_held(d, batch[i]))
			continue;	/* being written: its completion */
		tr->spill_retries++;
		for (unsigned int t = KVC_TIER_G3; t < KVC_NR_TIERS; t++)
			if (tr->tier[t] && tiers_write_through(d, t))
				spill_failed(d, batch[i],
					     spill_one(d, t, batch[i],
						       SPILL_THROUGH_RETRY));
	}
}
