// SPDX-License-Identifier: GPL-2.0
/*
 * requests: kvcached's answer to each client request (kvcd.h,
 * Documentation/userspace-api/protocol.md).
 *
 * kvcd_request() decodes one message, checks the version its HELLO
 * chose and dispatches it; every handler checks the peer's rights in
 * the namespace (namespaces.c) before it looks at the index, and
 * answers in one reply (a LOAD that waits for g3/g4 is deferred to the
 * tiers, which reply later). Batches are answered entry by entry: one
 * bad entry does not fail the others.
 */
#include "events.h"
#include "kvcd.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "fault.h"
#include "log.h"

static int kvcd_error(uint8_t *reply, const struct kvc_msg *m, int err,
		      const char *why)
{
	return kvc_proto_encode_error(reply, KVC_PROTO_MSG_MAX, err, m->seq,
				      m->type, why);
}

static int kvcd_hello(struct kvcd *d, struct kvc_peer *p,
		      const struct kvc_msg *m, uint8_t *reply, int *pass_fd)
{
	struct kvc_hello_reply r = {
		.mode = d->pool->ops->proto_mode,
		.max_batch = KVC_PROTO_MAX_STORE,
		.block_size = d->block_size,
		.nr_blocks = d->nr_blocks,
	};
	int v = kvc_proto_choose_version(m->hello.min_version,
					 m->hello.max_version);
	uint64_t need = d->pool->ops->client_caps;
	bool shared = kvc_pool_has(d->pool, KVC_POOL_SHARED_MAP);

	if (v < 0)
		return kvcd_error(reply, m, v, "no common protocol version");
	/* The reply's caps are a subset of the client's; this mode needs one. */
	if (!(m->hello.caps & need))
		return kvcd_error(reply, m, -EOPNOTSUPP,
				  d->pool->ops->client_hint);
	if (shared && !kvcd_may_every_ns(d, p))
		return kvcd_error(reply, m, -EACCES,
				  "memfd mode shares the whole pool: this peer may not read and write every namespace; use kernel mode or one kvcached per tenant");
	r.version = (uint16_t)v;
	r.caps = need;
	if (shared) {
		*pass_fd = kvc_pool_client_fd(d->pool);
		kvcd_holder_add(d, p);
	}
	d->clients[p->id].hello = true;
	d->clients[p->id].version = (uint16_t)v;
	return kvc_proto_encode_hello_reply(reply, KVC_PROTO_MSG_MAX, m->seq,
					    &r);
}

static int kvcd_lookup(struct kvcd *d, struct kvc_peer *p,
		       const struct kvc_msg *m, uint8_t *reply)
{
	static struct kvc_match match[KVC_PROTO_MAX_BATCH];
	static struct kvc_lookup_entry out[KVC_PROTO_MAX_BATCH];
	const struct kvc_lookup *l = &m->lookup;
	bool more = l->flags & KVC_PROTO_LOOKUP_CONTINUE;
	double t0 = kvc_now();
	uint64_t asked, hits;
	int n;

	if (!kvcd_may(d, p, l->ns_id, 4))
		return kvcd_error(reply, m, -EACCES, "namespace not readable");
	n = (more ? kvc_index_lookup_more : kvc_index_lookup)(d->index,
			l->ns_id, (const uint8_t (*)[KVCACHE_KEY_SIZE])l->keys,
			l->count, l->tiers, match);
	if (n < 0)
		return kvcd_error(reply, m, n, "lookup failed");
	for (int i = 0; i < n; i++) {
		memset(&out[i], 0, sizeof(out[i]));
		out[i].tiers = match[i].tiers;
		if (match[i].tiers & (1u << KVC_TIER_POOL)) {
			out[i].handle = match[i].loc[KVC_TIER_POOL].pool;
			kvc_policy_on_access(d->policy, match[i].id);
		}
		kvcd_tiers_access(d, match[i].id);
	}
	/* The engine LOADs what it found next: start reading it up now. */
	kvcd_tiers_prefetch(d, match, (size_t)n);
	/*
	 * A missed block was asked for: one access for the admission filter,
	 * so its STORE is admitted once it has been wanted pool_admit times.
	 * Only the first miss: the rest of the chain follows it anyway.
	 */
	if (d->cfg.eviction.pool_admit > 1 && (uint32_t)n < l->count)
		kvc_admit_access(d->admit,
				 kvc_index_hash(d->index, l->ns_id,
						l->keys + (size_t)n *
						KVCACHE_KEY_SIZE));
	/* A continued chain's first key was counted by the lookup before. */
	asked = l->count - (more ? 1 : 0);
	hits = (uint64_t)n - (more && n ? 1 : 0);
	d->lookups++;
	d->lookup_keys += asked;
	d->hit_keys += hits;
	kvc_metric_add(d->dm.hits[KVC_TIER_POOL], hits);
	kvc_metric_add(d->dm.misses[KVC_TIER_POOL], asked - hits);
	kvc_metric_observe(d->dm.lookup_seconds, kvc_now() - t0);
	return kvc_proto_encode_lookup_reply(reply, KVC_PROTO_MSG_MAX, m->seq,
					     out, (uint32_t)n);
}

/* Does the index hold block h (this generation) as a pool copy? */
static bool kvcd_pool_holds(struct kvcd *d, struct kvcache_handle h)
{
	uint32_t id = h.index < d->nr_blocks ? d->by_block[h.index] :
		      KVC_ID_NONE;
	const struct kvc_entry *e = id == KVC_ID_NONE ? NULL :
				    kvc_index_entry(d->index, id);

	return e && (e->tiers & (1u << KVC_TIER_POOL)) &&
	       e->loc[KVC_TIER_POOL].pool.gen == h.gen;
}

/*
 * Free block h, which a STORE refused, unless the index holds it now (a
 * later STORE of it succeeded). Still pinned: marked, it goes with its
 * last pin (in memfd mode at that RELEASE), or on the next pressure pass's
 * first sight of it (kernel mode, where the client unpins with its own
 * file and the daemon is not told).
 */
static void kvcd_free_refused(struct kvcd *d, struct kvcache_handle h)
{
	int ret;

	if (h.index >= d->nr_blocks || kvcd_pool_holds(d, h))
		return;
	ret = kvc_pool_evict(d->pool, h);
	if (!ret)
		d->refused_freed++;
	/* Otherwise gone already (-ESTALE): nothing to remember. */
	d->orphan_seen[h.index] = ret == -EBUSY ? KVCD_ORPHAN_REFUSED : 0;
	d->orphan_gen[h.index] = h.gen;
}

/*
 * A STORE by a writer of the block's namespace was refused with @why for
 * block h, which kvcd_check_sealed() showed to be sealed with the
 * namespace and key the client named, and which has @pins pins: free it
 * sooner than two pressure passes would.
 *  - Pinned (libkvcache keeps the seal's pin until the STORE is
 *    answered, then drops it): the client is done with it once its pin
 *    goes, whatever the refusal; marked, it goes then.
 *  - Unpinned and -EEXIST: a second copy of a block the pool holds; at
 *    once.
 *  - Unpinned otherwise (no parent yet, not admitted yet): a client may
 *    STORE it again once the parent is in (kvcached_test's
 *    store_and_prefix_lookup does); the passes take it if it does not.
 * Never when the index holds h itself (a STORE of an already stored
 * handle is -EEXIST too), and never for a STORE refused as a whole for
 * want of write permission: the block would not be the peer's own.
 */
static void kvcd_drop_refused(struct kvcd *d, struct kvcache_handle h,
			      int why, uint32_t pins)
{
	if (h.index >= d->nr_blocks || kvcd_pool_holds(d, h))
		return;
	if (pins) {
		d->orphan_seen[h.index] = KVCD_ORPHAN_REFUSED;
		d->orphan_gen[h.index] = h.gen;
	}
	else if (why == -EEXIST)
		kvcd_free_refused(d, h);
}

/*
 * Is h a sealed block of namespace ns holding key? 0 or -errno; *pins (if
 * not NULL): the pins on it.
 */
static int kvcd_check_sealed(struct kvcd *d, uint32_t ns,
			     struct kvcache_handle h, const uint8_t *key,
			     uint32_t *pins)
{
	struct kvcache_block_info info;
	int ret;

	if (h.index >= d->nr_blocks)
		return -EINVAL;
	ret = kvc_pool_block(d->pool, h, &info);
	if (ret)
		return ret;
	if (info.ns_id != ns || memcmp(info.key, key, KVCACHE_KEY_SIZE))
		return -EINVAL;	/* not the block the client says it is */
	if (pins)
		*pins = info.pins;
	return 0;
}

/* follows: e's parent is the entry before it in this STORE, just stored. */
static int kvcd_store_one(struct kvcd *d, uint32_t ns,
			  const struct kvc_store_entry *e, bool follows)
{
	bool first = e->flags & KVC_PROTO_STORE_FIRST;
	const struct kvc_entry *ent;
	uint32_t id;
	int ret;

	ret = kvcd_check_sealed(d, ns, e->handle, e->key, NULL);
	if (ret)
		return ret;
	/*
	 * Admission (pool_admit = k): the first new block of a chain segment
	 * enters once it has been wanted k times (LOOKUP misses and STOREs
	 * count); until then it is left to be reclaimed as an orphan. The
	 * blocks after it in the same STORE follow it in.
	 */
	if (!first && kvc_index_find(d->index, ns, e->parent, &id))
		return -ENOENT;	/* no chain to hang it on */
	if (d->cfg.eviction.pool_admit > 1 && !follows &&
	    kvc_index_find(d->index, ns, e->key, &id) &&
	    !kvc_admit_access(d->admit, kvc_index_hash(d->index, ns, e->key)))
		return -EAGAIN;
	ret = kvc_index_insert(d->index, ns, e->key, first ? NULL : e->parent,
			       &id);
	if (ret == -EEXIST) {
		ent = kvc_index_entry(d->index, id);
		/* Already cached in the pool: this copy is redundant. */
		if (ent->tiers & (1u << KVC_TIER_POOL))
			return -EEXIST;
	} else if (ret) {
		return ret;
	}
	ret = kvcd_set_pool(d, id, e->handle);
	if (ret)
		return ret;
	/*
	 * Not durable without its journal record (kernel mode): refused, and
	 * out of the index again, as if never stored. The client sees the
	 * error; the block is freed as any refused one (kvcd_drop_refused()).
	 */
	ret = kvcd_journal_add(d, id);
	if (ret) {
		kvcd_clear_pool(d, id);
		return ret;
	}
	d->stores++;
	kvcd_tiers_stored(d, id);
	return 0;
}

static int kvcd_store(struct kvcd *d, struct kvc_peer *p,
		      const struct kvc_msg *m, uint8_t *reply)
{
	static int32_t status[KVC_PROTO_MAX_BATCH];
	uint8_t prev[KVCACHE_KEY_SIZE];
	struct kvc_store_entry e;
	bool stored = false;
	uint32_t pins;

	if (!kvcd_may(d, p, m->store.ns_id, 2))
		return kvcd_error(reply, m, -EACCES, "namespace not writable");
	/* SEAL in a STORE is memfd mode's, as the SEAL request is. */
	for (uint32_t i = 0; !kvc_pool_has(d->pool, KVC_POOL_SHARED_MAP) &&
	     i < m->store.count; i++) {
		kvc_proto_store_entry(&m->store, i, &e);
		if (e.flags & KVC_PROTO_STORE_SEAL)
			return kvcd_error(reply, m, -EOPNOTSUPP,
					  "kernel mode: seal with the ioctl");
	}

	for (uint32_t i = 0; i < m->store.count; i++) {
		bool seal, sealed = false;

		kvc_proto_store_entry(&m->store, i, &e);
		seal = e.flags & KVC_PROTO_STORE_SEAL;
		/* A block of this connection's ALLOC, written, not sealed. */
		status[i] = 0;
		if (seal) {
			status[i] = kvc_pool_seal(d->pool, p->id, e.handle,
						  e.payload_len, e.key);
			sealed = !status[i];
		}
		if (!status[i])
			status[i] = kvcd_store_one(d, m->store.ns_id, &e,
						   stored &&
						   !(e.flags & KVC_PROTO_STORE_FIRST) &&
						   !memcmp(e.parent, prev,
							   KVCACHE_KEY_SIZE));
		/*
		 * Refused. A block this STORE sealed is the writer's own,
		 * without a pin or any other use: it goes now. One it could
		 * not seal stays the writer's. Otherwise, if the block is the
		 * one the client names, sooner than the pressure passes.
		 */
		if (status[i] && sealed)
			kvcd_free_refused(d, e.handle);
		else if (status[i] && !seal &&
			 !kvcd_check_sealed(d, m->store.ns_id, e.handle,
					    e.key, &pins))
			kvcd_drop_refused(d, e.handle, status[i], pins);
		stored = !status[i];
		memcpy(prev, e.key, KVCACHE_KEY_SIZE);
	}
	return kvc_proto_encode_store_reply(reply, KVC_PROTO_MSG_MAX, m->seq,
					    status, m->store.count);
}

static int kvcd_load(struct kvcd *d, struct kvc_peer *p,
		     const struct kvc_msg *m, uint8_t *reply)
{
	static struct kvc_load_result res[KVC_PROTO_MAX_BATCH];
	const struct kvc_load *l = &m->load;
	bool later = false;

	if (!kvcd_may(d, p, l->ns_id, 4))
		return kvcd_error(reply, m, -EACCES, "namespace not readable");
	for (uint32_t i = 0; i < l->count; i++) {
		const struct kvc_entry *e;
		uint32_t id;

		memset(&res[i], 0, sizeof(res[i]));
		if (kvc_index_find(d->index, l->ns_id,
				   l->keys + (size_t)i * KVCACHE_KEY_SIZE,
				   &id)) {
			res[i].status = -ENOENT;
			continue;
		}
		e = kvc_index_entry(d->index, id);
		if (!(e->tiers & (1u << KVC_TIER_POOL))) {
			/* In g3/g4: read it up, answer when it is in. */
			res[i].status = kvcd_tiers_want(d, id);
			if (!res[i].status) {
				res[i].status = KVCD_WAIT_PENDING;
				later = true;
			}
			continue;
		}
		/*
		 * memfd mode: the daemon holds the pin for the client. Kernel
		 * mode: the client pins with its own file (the kernel checks
		 * its permission); -ESTALE there means evicted meanwhile.
		 */
		res[i].status = kvc_pool_pin(d->pool, p->id,
					     e->loc[KVC_TIER_POOL].pool);
		if (!res[i].status) {
			res[i].handle = e->loc[KVC_TIER_POOL].pool;
			kvc_policy_on_access(d->policy, id);
		}
	}
	if (later) {
		if (kvcd_tiers_defer(d, p, m, res))
			return KVC_SERVER_DEFER;
		for (uint32_t i = 0; i < l->count; i++)
			if (res[i].status == KVCD_WAIT_PENDING)
				res[i].status = -ENOMEM;
	}
	return kvc_proto_encode_load_reply(reply, KVC_PROTO_MSG_MAX, m->seq,
					   res, l->count);
}

static int kvcd_release(struct kvcd *d, struct kvc_peer *p,
			const struct kvc_msg *m, uint8_t *reply)
{
	static int32_t status[KVC_PROTO_MAX_BATCH];
	struct kvcache_handle h;

	if (!kvc_pool_has(d->pool, KVC_POOL_SHARED_MAP))
		return kvcd_error(reply, m, -EOPNOTSUPP,
				  "kernel mode: unpin with the ioctl");
	for (uint32_t i = 0; i < m->release.count; i++) {
		kvc_proto_release_handle(&m->release, i, &h);
		status[i] = kvc_pool_unpin(d->pool, p->id, h);
		/* The last pin of a block a STORE refused: it goes now. */
		if (!status[i] && h.index < d->nr_blocks &&
		    (d->orphan_seen[h.index] & KVCD_ORPHAN_REFUSED) &&
		    d->orphan_gen[h.index] == h.gen)
			kvcd_free_refused(d, h);
	}
	return kvc_proto_encode_release_reply(reply, KVC_PROTO_MSG_MAX, m->seq,
					      status, m->release.count);
}

/*
 * FAST_MAP (memfd mode): the segment of resident blocks. Only a peer that
 * was given the pool gets here (HELLO first, and memfd mode's HELLO needs
 * read and write permission on every namespace), and the segment shows
 * nothing such a peer could not read already.
 */
static int kvcd_fast_map(struct kvcd *d, const struct kvc_msg *m,
			 uint8_t *reply, int *pass_fd)
{
	int fd = kvc_pool_fast_fd(d->pool);

	if (fd < 0)
		return kvcd_error(reply, m, -EOPNOTSUPP,
				  kvc_pool_has(d->pool, KVC_POOL_SHARED_MAP) ?
				  "the fast index is off ([pool] fast_index)" :
				  "kernel mode: FAST_NS gives each namespace's index");
	*pass_fd = fd;
	return kvc_proto_encode_fast_map_reply(reply, KVC_PROTO_MSG_MAX,
					       m->seq);
}

/*
 * FAST_NS (kernel mode): namespace ns_id's segment of resident blocks,
 * to a peer that may read the namespace, the same check as LOOKUP's: the
 * segment shows that namespace's keys and handles only, and the kernel
 * still checks the peer's own PIN of each block. The descriptor passed
 * may write nothing (the memfd is sealed against writes, growth and
 * shrinking).
 */
static int kvcd_fast_ns(struct kvcd *d, struct kvc_peer *p,
			const struct kvc_msg *m, uint8_t *reply, int *pass_fd)
{
	uint32_t ns = m->fast_ns.ns_id;
	int fd;

	if (kvc_pool_has(d->pool, KVC_POOL_SHARED_MAP))
		return kvcd_error(reply, m, -EOPNOTSUPP,
				  "memfd mode: FAST_MAP has the pool's index");
	if (!kvcd_may(d, p, ns, 4))
		return kvcd_error(reply, m, -EACCES, "namespace not readable");
	fd = kvcd_fast_ns_fd(d, ns);
	if (fd < 0)
		return kvcd_error(reply, m, fd, fd == -EOPNOTSUPP ?
				  "the fast index is off ([pool] fast_index)" :
				  "no fast index for this namespace");
	*pass_fd = fd;
	return kvc_proto_encode_fast_ns_reply(reply, KVC_PROTO_MSG_MAX,
					      m->seq);
}

/*
 * TOUCH's budget: may peer p report @cost more blocks now? Tokens refill
 * at [daemon] touch_rate a second, up to one second's worth (at least one
 * full TOUCH, so that a slow rate still lets whole messages through).
 */
static bool kvcd_touch_budget(struct kvcd *d, const struct kvc_peer *p,
			      uint32_t cost)
{
	struct kvcd_client *c = &d->clients[p->id];
	double rate = d->cfg.daemon.touch_rate;
	double cap = rate > KVC_PROTO_MAX_BATCH ? rate : KVC_PROTO_MAX_BATCH;
	uint64_t now = kvc_now_ns();

	if (!d->cfg.daemon.touch_rate)
		return true;
	if (!c->touch_at)
		c->touch_tokens = cap;
	else
		c->touch_tokens += (double)(now - c->touch_at) * 1e-9 * rate;
	if (c->touch_tokens > cap)
		c->touch_tokens = cap;
	c->touch_at = now;
	if (c->touch_tokens < cost)
		return false;
	c->touch_tokens -= cost;
	return true;
}

static int kvcd_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/*
 * TOUCH: blocks a client found through the fast index (loaded, or found
 * by a lookup it answered itself), and the counts of those lookups. The
 * blocks count as accesses for the policy, as in a LOAD or LOOKUP. Never
 * answered (a reply would cost the round trip the fast path saves); a
 * block evicted or moved since, or of a namespace the peer may not read,
 * is skipped.
 *
 * Any peer may send it, as fast as it likes, with handles of its choice,
 * so each handle costs O(1) and the same whatever the pool holds: the
 * index's by_block[] and the entry's generation say whether it is a pool
 * copy, never a pool query (which walked from the index to the next
 * sealed block: a stall for everyone, and a clock telling where other
 * tenants' blocks lie). A block counts once per message however often it
 * is named, and a connection's TOUCHes are held to [daemon] touch_rate
 * blocks a second (those over it are dropped whole, as a full socket
 * would drop them). The lookup counts are the client's word: clamped
 * (a TOUCH reports no more keys than a TOUCH carries handles) and kept
 * in client_* counters, apart from the daemon's own.
 */
static int kvcd_touch(struct kvcd *d, struct kvc_peer *p,
		      const struct kvc_msg *m)
{
	static uint32_t ids[KVC_PROTO_MAX_BATCH];
	static uint64_t order[KVC_PROTO_MAX_BATCH];
	static bool first[KVC_PROTO_MAX_BATCH];
	const struct kvc_touch *t = &m->touch;
	uint32_t keys, hits, lookups, cost, n = 0;
	struct kvcache_handle h;

	keys = t->lookup_keys < KVC_PROTO_MAX_BATCH ? t->lookup_keys :
	       KVC_PROTO_MAX_BATCH;
	/* The decoder checked hit_keys and lookups <= lookup_keys. */
	hits = t->hit_keys < keys ? t->hit_keys : keys;
	lookups = t->lookups < keys ? t->lookups : keys;
	cost = t->count > keys ? t->count : keys;
	if (!kvcd_touch_budget(d, p, cost ? cost : 1)) {
		d->touches_dropped++;
		kvc_metric_add(d->dm.touches_dropped, 1);
		return 0;
	}

	/*
	 * Kernel mode's tenants share the daemon: a peer moves the policy
	 * only for blocks it may read, as a LOAD of them would.
	 */
	for (uint32_t i = 0; i < t->count; i++) {
		const struct kvc_entry *e;
		uint32_t id;

		kvc_proto_touch_handle(t, i, &h);
		if (h.index >= d->nr_blocks)
			continue;
		id = d->by_block[h.index];
		e = id == KVC_ID_NONE ? NULL : kvc_index_entry(d->index, id);
		if (!e || !(e->tiers & (1u << KVC_TIER_POOL)) ||
		    e->loc[KVC_TIER_POOL].pool.gen != h.gen ||
		    !kvcd_may(d, p, e->ns, 4))
			continue;
		order[n] = (uint64_t)id << 32 | n;
		ids[n++] = id;
	}
	/*
	 * Each block once, however many times the message names it, at its
	 * first mention: sorted by (id, position), the first of each id
	 * run is kept, and the accesses go in the message's order (the
	 * policy's recency follows the client's). O(n log n), whatever ids
	 * the peer picks.
	 */
	qsort(order, n, sizeof(order[0]), kvcd_cmp_u64);
	for (uint32_t i = 0; i < n; i++)
		first[(uint32_t)order[i]] = !i ||
			(order[i] >> 32) != (order[i - 1] >> 32);
	for (uint32_t i = 0; i < n; i++) {
		if (!first[i])
			continue;
		kvc_policy_on_access(d->policy, ids[i]);
		d->fast_hits++;
	}
	d->client_lookups += lookups;
	d->client_lookup_keys += keys;
	d->client_hit_keys += hits;
	kvc_metric_add(d->dm.client_lookup_keys, keys);
	kvc_metric_add(d->dm.client_hit_keys, hits);
	d->touches++;
	return 0;
}

static int kvcd_ns_create(struct kvcd *d, struct kvc_peer *p,
			  const struct kvc_msg *m, uint8_t *reply)
{
	const struct kvc_ns_create *c = &m->ns_create;
	struct kvcd_ns ns = {
		.used = true, .uid = c->uid, .gid = c->gid, .mode = c->mode,
	};
	int ret;

	if (p->uid != 0)
		return kvcd_error(reply, m, -EPERM, "only root creates namespaces");
	/*
	 * Shared through g4 (nsshare.c): another node made it first. The
	 * same owner, group and mode is the same namespace, with the salt
	 * g4 gives it: creating it on every node is then harmless.
	 */
	if (!d->ns[c->ns_id].used && kvcd_nsshare_learn(d, c->ns_id))
		kvc_info("namespace %" PRIu32 ": NS_CREATE found it in g4",
			 c->ns_id);
	if (d->ns[c->ns_id].used) {
		const struct kvcd_ns *n = &d->ns[c->ns_id];

		if (n->share == KVCD_SHARE_OK && n->uid == c->uid &&
		    n->gid == c->gid && n->mode == c->mode)
			return kvc_proto_encode_ns_create_reply(reply,
								KVC_PROTO_MSG_MAX,
								m->seq);
		return kvcd_error(reply, m, -EEXIST, n->share == KVCD_SHARE_OK ?
				  "namespace exists, shared through g4 with another owner, group or mode" :
				  "namespace exists");
	}
	/*
	 * memfd mode: a process given the pool memfd could read and write
	 * the new namespace's blocks whatever its mode says (see
	 * kvcd_may_every_ns()), even after it hung up, so it is refused
	 * while the pool lives (until kvcached restarts with a new one).
	 */
	if (kvc_pool_has(d->pool, KVC_POOL_SHARED_MAP) &&
	    !kvcd_holders_allow(d, &ns))
		return kvcd_error(reply, m, -EACCES,
				  "memfd mode: a process given the pool may not read and write this namespace; restart kvcached first");
	/* Never a namespace with a guessable salt. */
	ret = kvcd_new_salt(ns.salt);
	if (ret)
		return kvcd_error(reply, m, ret, "no random salt");
	ret = kvc_pool_ns_create(d->pool, c->ns_id, c->uid, c->gid, c->mode);
	if (ret)
		return kvcd_error(reply, m, ret, "kernel refused it");
	/*
	 * Saved before it is answered: a namespace whose salt is not in the
	 * table would lose its g3/g4 blocks at the next start. Refused when
	 * the table cannot be written (and taken back from the kernel).
	 */
	d->ns[c->ns_id] = ns;
	ret = kvcd_ns_save(d);
	if (ret) {
		d->ns[c->ns_id].used = false;
		d->state_errors++;
		kvc_err("saving %s/namespaces: %s: namespace %" PRIu32 " not created",
			d->state_dir, strerror(-ret), c->ns_id);
		kvc_pool_ns_destroy(d->pool, c->ns_id);
		return kvcd_error(reply, m, ret, "saving the namespace table");
	}
	kvc_info("namespace %" PRIu32 " created: uid %" PRIu32 " gid %" PRIu32
		 " mode %03o", c->ns_id, c->uid, c->gid, c->mode);
	kvcd_ns_dirs(d, c->ns_id, KVCD_NS_DIRS_NOW);
	/* Not described in g4 yet (a server away): the ticks try again. */
	kvcd_nsshare_created(d, c->ns_id);
	return kvc_proto_encode_ns_create_reply(reply, KVC_PROTO_MSG_MAX,
						m->seq);
}

/*
 * NS_SALT: a namespace's salt, for peers that may read it (they need it
 * to derive its keys); SET, from root only, replaces it, so that nodes
 * sharing one g4 can give a namespace the same salt. A peer that may not
 * read gets EACCES and not the salt: without it, it cannot compute the
 * keys of another tenant's prompts to probe for them.
 */
static int kvcd_ns_salt(struct kvcd *d, struct kvc_peer *p,
			const struct kvc_msg *m, uint8_t *reply)
{
	const struct kvc_ns_salt *s = &m->ns_salt;
	struct kvc_ns_salt_reply r = { .ns_id = s->ns_id };
	struct kvcd_ns *n = &d->ns[s->ns_id];
	int ret;

	if (s->flags & KVC_PROTO_NS_SALT_SET) {
		if (p->uid != 0)
			return kvcd_error(reply, m, -EPERM,
					  "only root sets a namespace's salt");
		if (!n->used)
			return kvcd_error(reply, m, -ENOENT,
					  "no such namespace");
		uint8_t old[KVC_PROTO_SALT_SIZE];

		memcpy(old, n->salt, KVC_PROTO_SALT_SIZE);
		memcpy(n->salt, s->salt, KVC_PROTO_SALT_SIZE);
		ret = kvcd_ns_save(d);
		if (ret) {
			/* The salt in use stays the one a restart reads. */
			memcpy(n->salt, old, KVC_PROTO_SALT_SIZE);
			d->state_errors++;
			kvc_err("saving %s/namespaces: %s: the salt of namespace %" PRIu32 " is unchanged",
				d->state_dir, strerror(-ret), s->ns_id);
			return kvcd_error(reply, m, ret,
					  "saving the namespace table");
		}
		/* The nodes sharing g4 take it from there (nsshare.c). */
		if (memcmp(old, n->salt, KVC_PROTO_SALT_SIZE) ||
		    n->share != KVCD_SHARE_OK)
			kvcd_nsshare_salt_set(d, s->ns_id);
	} else if (!n->used) {
		return kvcd_error(reply, m, -ENOENT, "no such namespace");
	} else if (!kvcd_may(d, p, s->ns_id, 4)) {
		return kvcd_error(reply, m, -EACCES, "namespace not readable");
	}
	memcpy(r.salt, n->salt, KVC_PROTO_SALT_SIZE);
	return kvc_proto_encode_ns_salt_reply(reply, KVC_PROTO_MSG_MAX, m->seq,
					      &r);
}

/* memfd mode: what the kernel's ALLOC ioctl does in kernel mode. */
static int kvcd_alloc(struct kvcd *d, struct kvc_peer *p,
		      const struct kvc_msg *m, uint8_t *reply)
{
	static struct kvcache_handle h[KVC_PROTO_MAX_BATCH];
	int ret;

	if (!kvc_pool_has(d->pool, KVC_POOL_SHARED_MAP))
		return kvcd_error(reply, m, -EOPNOTSUPP,
				  "kernel mode: allocate with the ioctl");
	if (!kvcd_may(d, p, m->alloc.ns_id, 2))
		return kvcd_error(reply, m, -EACCES, "namespace not writable");
	ret = kvc_pool_alloc(d->pool, p->id, m->alloc.ns_id, m->alloc.count,
			     h);
	if (ret == -ENOSPC) {
		/* Make room for the whole batch (and the high watermark, as
		 * the kernel's pressure events would), and retry. */
		uint64_t high = (uint64_t)d->nr_blocks *
				d->cfg.pool.high_watermark / 100;

		kvcd_evict_to_wait(d, (uint32_t)(high > m->alloc.count ?
						 high : m->alloc.count));
		ret = kvc_pool_alloc(d->pool, p->id, m->alloc.ns_id,
				     m->alloc.count, h);
	}
	if (ret)
		return kvcd_error(reply, m, ret, "no free blocks");
	return kvc_proto_encode_alloc_reply(reply, KVC_PROTO_MSG_MAX, m->seq,
					    h, m->alloc.count);
}

static int kvcd_seal(struct kvcd *d, struct kvc_peer *p,
		     const struct kvc_msg *m, uint8_t *reply)
{
	static int32_t status[KVC_PROTO_MAX_SEAL];
	struct kvc_seal_entry e;

	if (!kvc_pool_has(d->pool, KVC_POOL_SHARED_MAP))
		return kvcd_error(reply, m, -EOPNOTSUPP,
				  "kernel mode: seal with the ioctl");
	for (uint32_t i = 0; i < m->seal.count; i++) {
		kvc_proto_seal_entry(&m->seal, i, &e);
		status[i] = kvc_pool_seal(d->pool, p->id, e.handle,
					  e.payload_len, e.key);
		if (!status[i] && (e.flags & KVC_PROTO_SEAL_KEEP_PIN))
			status[i] = kvc_pool_pin(d->pool, p->id, e.handle);
	}
	return kvc_proto_encode_seal_reply(reply, KVC_PROTO_MSG_MAX, m->seq,
					   status, m->seal.count);
}

/*
 * Drop entry id's copies in the tiers of mask now (an admin asked): 0,
 * -EBUSY (the pool copy is pinned or mapped), -ENOTEMPTY (a descendant
 * is still in one of those tiers: it would be orphaned there), or the
 * error of removing a file (-EROFS ...). The entry may be gone after.
 */
static int kvcd_drop(struct kvcd *d, uint32_t id, unsigned int mask)
{
	const struct kvc_entry *e = kvc_index_entry(d->index, id);
	unsigned int have = e->tiers & mask;
	int ret;

	for (unsigned int t = 0; t < KVC_NR_TIERS; t++)
		if ((have & (1u << t)) && e->child_in[t])
			return -ENOTEMPTY;
	/*
	 * Dropping only the pool copy of a block no tier has yet would lose
	 * it: as for an eviction, its write-back comes first (it is held
	 * until then, -EBUSY: kvcd_flush() waits for the writes and tries
	 * again). Dropping it from every tier deletes it, written or not.
	 */
	if ((have & (1u << KVC_TIER_POOL)) &&
	    (mask & KVC_TIERS_ALL) != KVC_TIERS_ALL &&
	    kvcd_tiers_evicting(d, id))
		return -EBUSY;
	if (have & (1u << KVC_TIER_POOL)) {
		ret = kvc_pool_evict(d->pool, e->loc[KVC_TIER_POOL].pool);
		if (ret && ret != -ESTALE)
			return ret;
		kvcd_clear_pool(d, id);
		if (!ret)
			kvcd_evicted(d);
	}
	for (unsigned int t = KVC_TIER_G3; t < KVC_NR_TIERS; t++) {
		if (!(have & (1u << t)) || !kvcd_tier(d, t))
			continue;
		ret = kvc_tier_drop(kvcd_tier(d, t), id);
		if (ret && ret != -ENOENT)
			return ret;
		kvc_metric_add(d->dm.evictions[t], 1);
	}
	return 0;
}

/* EVICT: the keys are taken deepest first, so a whole chain can go. */
static int kvcd_evict(struct kvcd *d, struct kvc_peer *p,
		      const struct kvc_msg *m, uint8_t *reply)
{
	static int32_t status[KVC_PROTO_MAX_BATCH];
	const struct kvc_evict *ev = &m->evict;
	uint32_t id;

	if (p->uid != 0)
		return kvcd_error(reply, m, -EPERM, "only root evicts");
	if (!d->ns[ev->ns_id].used)
		return kvcd_error(reply, m, -ENOENT, "no such namespace");
	for (uint32_t i = ev->count; i-- > 0;) {
		const uint8_t *key = ev->keys + (size_t)i * KVCACHE_KEY_SIZE;

		if (kvc_index_find(d->index, ev->ns_id, key, &id) ||
		    !kvc_index_entry(d->index, id)->tiers)
			status[i] = -ENOENT;
		else
			status[i] = kvcd_drop(d, id, KVC_TIERS_ALL);
	}
	return kvc_proto_encode_evict_reply(reply, KVC_PROTO_MSG_MAX, m->seq,
					    status, ev->count);
}

/*
 * FLUSH: evict every block of the namespace (0: of all) that can go, from
 * the tiers asked (0: all), leaves first, pass after pass until nothing
 * more moves. A pinned block stays, and so do its ancestors. Pool blocks
 * that must be written back first are (kvcd_drop()), and the passes wait
 * for those writes: like sync before drop_caches. A dirty block whose
 * write fails stays, counted busy.
 */
static int kvcd_flush(struct kvcd *d, struct kvc_peer *p,
		      const struct kvc_msg *m, uint8_t *reply)
{
	struct kvc_flush_reply r = { 0 };
	uint32_t ns = m->flush.ns_id;
	unsigned int mask = m->flush.tiers ? m->flush.tiers : KVC_TIERS_ALL;
	bool progress = true;

	if (p->uid != 0)
		return kvcd_error(reply, m, -EPERM, "only root flushes");
	if (ns != KVC_PROTO_NS_ALL && !d->ns[ns].used)
		return kvcd_error(reply, m, -ENOENT, "no such namespace");
	while (progress || kvcd_tiers_wait(d)) {
		progress = false;
		r.busy = 0;
		for (uint32_t id = kvc_index_next(d->index, 0); id != KVC_ID_NONE;
		     id = kvc_index_next(d->index, id + 1)) {
			const struct kvc_entry *e = kvc_index_entry(d->index, id);
			int ret;

			if ((ns != KVC_PROTO_NS_ALL && e->ns != ns) ||
			    !(e->tiers & mask))
				continue;
			ret = kvcd_drop(d, id, mask);
			if (!ret) {
				r.evicted++;
				progress = true;
			} else {
				r.busy++;
			}
		}
	}
	return kvc_proto_encode_flush_reply(reply, KVC_PROTO_MSG_MAX, m->seq,
					    &r);
}

/*
 * NS_LIST: namespaces from start on, a page at a time, with pool blocks.
 * Ids, owners and modes are public, as ls -l shows a file's; how many
 * blocks a namespace holds is not: it moves with what its tenant caches,
 * so a peer that may not read a namespace sees 0 there.
 */
static int kvcd_ns_list(struct kvcd *d, struct kvc_peer *p,
			const struct kvc_msg *m, uint8_t *reply)
{
	static struct kvc_ns_entry e[KVC_PROTO_MAX_BATCH];
	uint32_t n = 0, next = 0, ns = m->ns_list.start ? m->ns_list.start : 1;

	for (; ns <= KVCACHE_NS_MAX; ns++) {
		if (!d->ns[ns].used)
			continue;
		if (n == KVC_PROTO_MAX_BATCH) {
			next = ns;	/* another page starts here */
			break;
		}
		e[n] = (struct kvc_ns_entry){
			.ns_id = ns, .uid = d->ns[ns].uid, .gid = d->ns[ns].gid,
			.mode = d->ns[ns].mode,
		};
		n++;
	}
	/* Blocks per namespace: one pass over the index for the page. */
	for (uint32_t id = kvc_index_next(d->index, 0); n && id != KVC_ID_NONE;
	     id = kvc_index_next(d->index, id + 1)) {
		const struct kvc_entry *ent = kvc_index_entry(d->index, id);
		uint32_t lo = 0, hi = n;

		if (!(ent->tiers & (1u << KVC_TIER_POOL)))
			continue;
		while (lo < hi) {	/* e[] is sorted by ns_id */
			uint32_t mid = (lo + hi) / 2;

			if (e[mid].ns_id < ent->ns)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < n && e[lo].ns_id == ent->ns &&
		    kvcd_may(d, p, ent->ns, 4))
			e[lo].blocks++;
	}
	return kvc_proto_encode_ns_list_reply(reply, KVC_PROTO_MSG_MAX, m->seq,
					      next, e, n);
}

static int kvcd_stats(struct kvcd *d, const struct kvc_msg *m, uint8_t *reply)
{
	uint32_t free_blocks = 0;
	struct kvc_stat st[96] = {
		{ "index_keys", 0, kvc_index_count(d->index) },
		{ "index_bytes", 0, kvc_index_bytes(d->index) },
		{ "lookups", 0, d->lookups },
		{ "lookup_keys", 0, d->lookup_keys },
		{ "hit_keys", 0, d->hit_keys },
		{ "stores", 0, d->stores },
		{ "evictions", 0, d->evictions },
		{ "protocol_errors", 0, d->errors },
		{ "pool_blocks", 0, d->nr_blocks },
		{ "pool_free", 0, 0 },
		{ "refused_freed", 0, d->refused_freed },
		{ "journal_bytes", 0, d->journal_bytes },
		{ "journal_compactions", 0, d->journal_compactions },
		{ "journal_errors", 0, d->journal_errors },
		{ "state_errors", 0, d->state_errors },
		{ "state_missing", 0, d->state_missing },
		{ "unknown_namespaces", 0, d->unknown_ns },
		{ "ns_learned", 0, d->ns_learned },
		{ "ns_conflicts", 0, d->ns_conflicts },
		{ "events_sent", 0, kvcd_events_sent(d) },
		{ "events_dropped", 0, kvcd_events_dropped(d) },
		{ "fast_hits", 0, d->fast_hits },
		{ "touches", 0, d->touches },
		{ "touches_dropped", 0, d->touches_dropped },
		{ "client_lookups", 0, d->client_lookups },
		{ "client_lookup_keys", 0, d->client_lookup_keys },
		{ "client_hit_keys", 0, d->client_hit_keys },
	};
	size_t n = 27;

	kvc_pool_nr_free(d->pool, &free_blocks);
	st[9].value = free_blocks;
	n += kvcd_tiers_stats(d, st + n, sizeof(st) / sizeof(st[0]) - n);
	for (size_t i = 0; i < n; i++)
		st[i].name_len = (uint16_t)strlen(st[i].name);
	return kvc_proto_encode_stats_reply(reply, KVC_PROTO_MSG_MAX, m->seq,
					    st, (uint32_t)n);
}

static int kvcd_dispatch(struct kvcd *d, struct kvc_peer *p,
			 const struct kvc_msg *m, uint8_t *reply,
			 int *pass_fd);

/*
 * A request whose handling held the loop this long is named (the server
 * says only "a request"): every other client waited as long, and what
 * the daemon did there on a filesystem or the kernel belongs off it.
 */
#define KVCD_SLOW_REQUEST_S	1.0

static void kvcd_slow_request(const struct kvc_msg *m, double took)
{
	static const char *const name[] = {
		[KVC_MSG_HELLO] = "HELLO", [KVC_MSG_LOOKUP] = "LOOKUP",
		[KVC_MSG_STORE] = "STORE", [KVC_MSG_LOAD] = "LOAD",
		[KVC_MSG_RELEASE] = "RELEASE", [KVC_MSG_STATS] = "STATS",
		[KVC_MSG_NS_CREATE] = "NS_CREATE", [KVC_MSG_ALLOC] = "ALLOC",
		[KVC_MSG_SEAL] = "SEAL", [KVC_MSG_EVICT] = "EVICT",
		[KVC_MSG_FLUSH] = "FLUSH", [KVC_MSG_NS_LIST] = "NS_LIST",
		[KVC_MSG_NS_SALT] = "NS_SALT", [KVC_MSG_FAST_MAP] = "FAST_MAP",
		[KVC_MSG_TOUCH] = "TOUCH", [KVC_MSG_FAST_NS] = "FAST_NS",
	};

	if (took <= KVCD_SLOW_REQUEST_S)
		return;
	kvc_log_ratelimited(KVC_LOG_WARN, "a %s request (seq %" PRIu32 ") held the event loop %.1f s",
			    m->type < sizeof(name) / sizeof(name[0]) &&
			    name[m->type] ? name[m->type] : "newer",
			    m->seq, took);
}

int kvcd_request(void *ctx, struct kvc_peer *p, const uint8_t *msg,
		 size_t len, bool truncated, uint8_t *reply,
		 int *pass_fd)
{
	struct kvcd *d = ctx;
	struct kvc_msg m;
	double t0;
	int ret;

	ret = truncated ? -EMSGSIZE : kvc_proto_decode(msg, len, &m);
	if (ret) {
		d->errors++;
		kvc_metric_add(d->dm.protocol_errors, 1);
		if (truncated) {
			memset(&m, 0, sizeof(m));
			m.reason = "message larger than the protocol allows";
		}
		return kvc_proto_encode_decode_error(reply, KVC_PROTO_MSG_MAX,
						     ret, &m);
	}
	if (!kvc_proto_is_request(m.type))
		return 0;	/* never answer a reply */
	if (m.type != KVC_MSG_HELLO && !d->clients[p->id].hello)
		return kvcd_error(reply, &m, -EPROTO, "HELLO first");
	if (m.version > d->clients[p->id].version &&
	    m.type != KVC_MSG_HELLO)
		return kvcd_error(reply, &m, -EPROTONOSUPPORT,
				  "a version above the one HELLO chose");
	/* After HELLO, replies carry the version it chose. */
	t0 = kvc_now();
	ret = kvcd_dispatch(d, p, &m, reply, pass_fd);
	kvcd_slow_request(&m, kvc_now() - t0);
	return kvc_proto_set_version(reply, ret, d->clients[p->id].version);
}

static int kvcd_dispatch(struct kvcd *d, struct kvc_peer *p,
			 const struct kvc_msg *mp, uint8_t *reply,
			 int *pass_fd)
{
	const struct kvc_msg m = *mp;

	switch (m.type) {
	case KVC_MSG_HELLO:
		return kvcd_hello(d, p, &m, reply, pass_fd);
	case KVC_MSG_LOOKUP:
		return kvcd_lookup(d, p, &m, reply);
	case KVC_MSG_STORE:
		return kvcd_store(d, p, &m, reply);
	case KVC_MSG_LOAD:
		return kvcd_load(d, p, &m, reply);
	case KVC_MSG_RELEASE:
		return kvcd_release(d, p, &m, reply);
	case KVC_MSG_STATS:
		return kvcd_stats(d, &m, reply);
	case KVC_MSG_NS_CREATE:
		return kvcd_ns_create(d, p, &m, reply);
	case KVC_MSG_ALLOC:
		return kvcd_alloc(d, p, &m, reply);
	case KVC_MSG_SEAL:
		return kvcd_seal(d, p, &m, reply);
	case KVC_MSG_EVICT:
		return kvcd_evict(d, p, &m, reply);
	case KVC_MSG_FLUSH:
		return kvcd_flush(d, p, &m, reply);
	case KVC_MSG_NS_LIST:
		return kvcd_ns_list(d, p, &m, reply);
	case KVC_MSG_NS_SALT:
		return kvcd_ns_salt(d, p, &m, reply);
	case KVC_MSG_FAST_MAP:
		return kvcd_fast_map(d, &m, reply, pass_fd);
	case KVC_MSG_TOUCH:
		return kvcd_touch(d, p, &m);
	case KVC_MSG_FAST_NS:
		return kvcd_fast_ns(d, p, &m, reply, pass_fd);
	default:	/* a request type newer than this daemon */
		return kvcd_error(reply, &m, -EOPNOTSUPP, "unknown request type");
	}
}
