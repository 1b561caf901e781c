// SPDX-License-Identifier: GPL-2.0
/*
 * policy_sim: the pool's policies and Belady's bound over a trace
 * (policy_sim.h). The replay half mirrors helper/kvcached/requests.c
 * (kvcd_lookup, kvcd_alloc, kvcd_store_one) and reclaim.c
 * (kvcd_evict_pass) step for step, on the same index and policy code:
 * change those and this must follow, or policy_bench's agreement check
 * fails.
 */
#include "policy_sim.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "index.h"
#include "policy.h"
#include "proto.h"

/* reclaim.c's KVCD_EVICT_REFUSED_MAX. */
#define SIM_REFUSED_MAX		64

void kvc_psim_key(uint32_t b, uint8_t key[32])
{
	static const char tag[] = "kvcache-policy-bench";

	memset(key, 0, 32);
	memcpy(key, &b, sizeof(b));
	memcpy(key + 8, tag, sizeof(tag) - 1);
}

uint32_t kvc_psim_batch(uint32_t capacity)
{
	uint32_t b = capacity / 8;

	if (b > KVC_PROTO_MAX_STORE)
		b = KVC_PROTO_MAX_STORE;
	return b ? b : 1;
}

void kvc_psim_count(const struct kvc_trace *t, size_t i, uint32_t matched,
		    struct kvc_psim_result *r)
{
	const struct kvc_trace_req *q = &t->req[i];

	r->blocks += q->n;
	r->hit_blocks += matched;
	for (uint32_t k = 0; k < q->n; k++) {
		uint32_t tok = kvc_trace_block_tokens(q, k);

		r->tokens += tok;
		if (k < matched)
			r->hit_tokens += tok;
	}
	if (r->matched)
		r->matched[i] = matched;
}

struct sim {
	struct kvc_index *idx;
	struct kvc_policy *pol;
	uint32_t capacity, free, high;
	struct kvc_psim_result *r;
	/* kvc_psim_tiers(): g3 under the pool */
	struct kvc_psim_tier_result *tr;
	struct kvc_policy *g3;
	uint32_t g3_capacity, g3_used, admit;
	uint8_t *seen;			/* accesses per dense block, saturating */
};

static uint32_t dense_of(const struct kvc_entry *e)
{
	uint32_t b;

	memcpy(&b, e->key, sizeof(b));
	return b;
}

/* g3 has room for one more block, or says it cannot make it. */
static bool g3_room(struct sim *s)
{
	uint32_t v;

	while (s->g3_used >= s->g3_capacity) {
		if (!kvc_policy_pick(s->g3, &v, 1))
			return false;
		kvc_index_clear(s->idx, v, KVC_TIER_G3);
		kvc_policy_on_remove(s->g3, v);
		kvc_index_prune(s->idx, v);
		s->g3_used--;
		s->tr->g3_evictions++;
	}
	return true;
}

/* Write-back: the pool is evicting e; copy it to g3 if admitted. */
static void g3_write_back(struct sim *s, uint32_t id)
{
	const struct kvc_entry *e = kvc_index_entry(s->idx, id);
	union kvc_loc loc = { .u64 = 0 };

	if (!s->g3 || (e->tiers & (1u << KVC_TIER_G3)) ||
	    s->seen[dense_of(e)] < s->admit || !g3_room(s))
		return;
	kvc_index_set(s->idx, id, KVC_TIER_G3, loc);
	kvc_policy_on_insert(s->g3, id);
	s->g3_used++;
	s->tr->written++;
}

/* kvcd_clear_pool() with no tiers: out of the pool, the index, the policy. */
static void sim_clear(struct sim *s, uint32_t id)
{
	kvc_index_clear(s->idx, id, KVC_TIER_POOL);
	kvc_policy_on_remove(s->pol, id);
	kvc_index_prune(s->idx, id);
}

/* kvcd_evict_pass(d, want, true) with nothing pinned and no tiers. */
static void sim_evict(struct sim *s, uint32_t want)
{
	size_t tries = kvc_policy_count(s->pol), refused = 0;
	uint32_t id;

	if (s->free >= want)
		return;
	while (s->free < want && refused < SIM_REFUSED_MAX && tries-- &&
	       kvc_policy_pick(s->pol, &id, 1)) {
		const struct kvc_entry *e = kvc_index_entry(s->idx, id);

		if (!e || !(e->tiers & (1u << KVC_TIER_POOL)))
			continue;		/* kvcd_evict_id: -ENOENT */
		if (e->child_in[KVC_TIER_POOL]) {
			kvc_policy_on_insert(s->pol, id);
			refused++;
			continue;
		}
		g3_write_back(s, id);
		sim_clear(s, id);
		s->free++;
		s->r->evictions++;
		refused = 0;
	}
}

/* kvcd_alloc(): 0, or -ENOSPC when even eviction leaves too few. */
static int sim_alloc(struct sim *s, uint32_t count)
{
	if (s->free < count)
		sim_evict(s, s->high > count ? s->high : count);
	if (s->free < count)
		return -ENOSPC;
	s->free -= count;
	return 0;
}

/* kvcd_store_one(): 0 or the STORE's status for the block. */
static int sim_store(struct sim *s, const uint8_t *key, const uint8_t *parent)
{
	const struct kvc_entry *e;
	union kvc_loc loc = { .u64 = 0 };
	uint32_t id;
	int ret;

	if (parent && kvc_index_find(s->idx, KVC_PSIM_NS, parent, &id))
		return -ENOENT;
	ret = kvc_index_insert(s->idx, KVC_PSIM_NS, key, parent, &id);
	if (ret == -EEXIST) {
		e = kvc_index_entry(s->idx, id);
		if (e->tiers & (1u << KVC_TIER_POOL))
			return -EEXIST;
	} else if (ret) {
		return ret;
	}
	ret = kvc_index_set(s->idx, id, KVC_TIER_POOL, loc);
	if (ret)
		return ret;
	return kvc_policy_on_insert(s->pol, id);
}

int kvc_psim_run(const struct kvc_trace *t, const struct kvc_psim_opts *o,
		 struct kvc_psim_result *r)
{
	uint8_t (*keys)[32] = NULL;
	struct kvc_match *match = NULL;
	struct sim s = {
		.capacity = o->capacity, .free = o->capacity,
		.high = (uint32_t)((uint64_t)o->capacity * o->high_pct / 100),
		.r = r,
	};
	uint32_t maxn = 0, batch = o->batch ? o->batch :
				 kvc_psim_batch(o->capacity);
	int ret;

	for (size_t i = 0; i < t->nr_reqs; i++)
		if (t->req[i].n > maxn)
			maxn = t->req[i].n;
	keys = malloc((size_t)maxn * sizeof(*keys));
	match = malloc((size_t)maxn * sizeof(*match));
	ret = keys && match ? kvc_index_create(&s.idx, o->capacity, 1) :
			      -ENOMEM;
	if (!ret)
		ret = kvc_policy_create(&s.pol, o->policy, s.idx,
					KVC_TIER_POOL, o->capacity);
	if (!ret && o->small_pct)
		ret = kvc_policy_set_small(s.pol, o->small_pct);
	for (size_t i = 0; !ret && i < t->nr_reqs; i++) {
		const struct kvc_trace_req *q = &t->req[i];
		int n;

		for (uint32_t k = 0; k < q->n; k++)
			kvc_psim_key(t->blocks[q->off + k], keys[k]);
		/* LOOKUP: the leading matches, each pool hit an access. */
		n = kvc_index_lookup(s.idx, KVC_PSIM_NS,
				     (const uint8_t (*)[32])keys, q->n,
				     KVC_TIERS_ALL, match);
		if (n < 0) {
			ret = n;
			break;
		}
		for (int k = 0; k < n; k++)
			if (match[k].tiers & (1u << KVC_TIER_POOL))
				kvc_policy_on_access(s.pol, match[k].id);
		kvc_psim_count(t, i, (uint32_t)n, r);
		/* ALLOC and STORE the rest, batch by batch, until refused. */
		for (uint32_t k = (uint32_t)n; k < q->n;) {
			uint32_t cnt = q->n - k < batch ? q->n - k : batch;
			bool stored = true;

			if (sim_alloc(&s, cnt)) {
				r->refused++;
				break;
			}
			for (uint32_t j = k; j < k + cnt; j++) {
				int st = sim_store(&s, keys[j],
						   j ? keys[j - 1] : NULL);

				if (st) {
					/* The sealed block goes back. */
					s.free++;
					r->refused++;
					stored = false;
				}
			}
			k += cnt;
			if (!stored)
				break;
		}
	}
	kvc_policy_destroy(s.pol);
	kvc_index_destroy(s.idx);
	free(keys);
	free(match);
	return ret;
}

int kvc_psim_tiers(const struct kvc_trace *t,
		   const struct kvc_psim_tier_opts *o,
		   struct kvc_psim_tier_result *r)
{
	const struct kvc_psim_opts *po = &o->pool;
	uint8_t (*keys)[32] = NULL;
	struct kvc_match *match = NULL;
	struct sim s = {
		.capacity = po->capacity, .free = po->capacity,
		.high = (uint32_t)((uint64_t)po->capacity * po->high_pct / 100),
		.r = &r->r, .tr = r, .g3_capacity = o->g3_capacity,
		.admit = o->admit,
	};
	uint32_t maxn = 0, batch = po->batch ? po->batch :
				  kvc_psim_batch(po->capacity);
	int ret;

	for (size_t i = 0; i < t->nr_reqs; i++)
		if (t->req[i].n > maxn)
			maxn = t->req[i].n;
	keys = malloc((size_t)maxn * sizeof(*keys));
	match = malloc((size_t)maxn * sizeof(*match));
	s.seen = calloc(t->nr_blocks, 1);
	ret = keys && match && s.seen ?
	      kvc_index_create(&s.idx, po->capacity, 1) : -ENOMEM;
	if (!ret)
		ret = kvc_policy_create(&s.pol, po->policy, s.idx,
					KVC_TIER_POOL, po->capacity);
	if (!ret && o->g3_capacity)
		ret = kvc_policy_create(&s.g3, o->g3_policy, s.idx,
					KVC_TIER_G3, o->g3_capacity);
	for (size_t i = 0; !ret && i < t->nr_reqs; i++) {
		const struct kvc_trace_req *q = &t->req[i];
		uint32_t k;
		int n;

		for (k = 0; k < q->n; k++) {
			uint32_t b = t->blocks[q->off + k];

			kvc_psim_key(b, keys[k]);
			s.seen[b] += s.seen[b] < UINT8_MAX;
		}
		n = kvc_index_lookup(s.idx, KVC_PSIM_NS,
				     (const uint8_t (*)[32])keys, q->n,
				     KVC_TIERS_ALL, match);
		if (n < 0) {
			ret = n;
			break;
		}
		kvc_psim_count(t, i, (uint32_t)n, &r->r);
		/* Pool hits, then what only g3 had, read back in order. */
		for (k = 0; k < (uint32_t)n; k++) {
			union kvc_loc loc = { .u64 = 0 };

			if (match[k].tiers & (1u << KVC_TIER_POOL)) {
				kvc_policy_on_access(s.pol, match[k].id);
				continue;
			}
			r->g3_hits++;
			kvc_policy_on_access(s.g3, match[k].id);
			if (sim_alloc(&s, 1))
				break;
			/* Evicting may have taken its g3 copy: a miss now. */
			if (!kvc_index_entry(s.idx, match[k].id) ||
			    !(kvc_index_entry(s.idx, match[k].id)->tiers &
			      (1u << KVC_TIER_G3))) {
				s.free++;
				break;
			}
			kvc_index_set(s.idx, match[k].id, KVC_TIER_POOL, loc);
			kvc_policy_on_insert(s.pol, match[k].id);
		}
		if (k < (uint32_t)n)
			continue;
		for (k = (uint32_t)n; k < q->n;) {
			uint32_t cnt = q->n - k < batch ? q->n - k : batch;
			bool stored = true;

			if (sim_alloc(&s, cnt))
				break;
			for (uint32_t j = k; j < k + cnt; j++) {
				if (sim_store(&s, keys[j],
					      j ? keys[j - 1] : NULL)) {
					s.free++;
					stored = false;
				}
			}
			k += cnt;
			if (!stored)
				break;
		}
	}
	kvc_policy_destroy(s.g3);
	kvc_policy_destroy(s.pol);
	kvc_index_destroy(s.idx);
	free(s.seen);
	free(keys);
	free(match);
	return ret;
}

/* ---- Belady ------------------------------------------------------------ */

#define NEVER	UINT64_MAX

/* Max-heap of (next use, depth, block); stale entries are skipped. */
struct bent {
	uint64_t next;
	uint32_t depth, b;
};

struct bheap {
	struct bent *e;
	size_t len, cap;
};

static bool above(const struct bent *x, const struct bent *y)
{
	return x->next > y->next || (x->next == y->next && x->depth > y->depth);
}

static int bh_push(struct bheap *h, struct bent v)
{
	size_t i;

	if (h->len == h->cap) {
		size_t cap = h->cap ? 2 * h->cap : 1024;
		struct bent *n = realloc(h->e, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		h->e = n;
		h->cap = cap;
	}
	i = h->len++;
	while (i && above(&v, &h->e[(i - 1) / 2])) {
		h->e[i] = h->e[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h->e[i] = v;
	return 0;
}

static void bh_pop(struct bheap *h)
{
	struct bent v = h->e[--h->len];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= h->len)
			break;
		if (c + 1 < h->len && above(&h->e[c + 1], &h->e[c]))
			c++;
		if (!above(&h->e[c], &v))
			break;
		h->e[i] = h->e[c];
		i = c;
	}
	if (h->len)
		h->e[i] = v;
}

int kvc_psim_belady(const struct kvc_trace *t, uint32_t capacity,
		    struct kvc_psim_result *r)
{
	uint64_t *next_at = malloc(t->nr_accesses * sizeof(*next_at));
	uint64_t *last = malloc((size_t)t->nr_blocks * sizeof(*last));
	uint64_t *cur = malloc((size_t)t->nr_blocks * sizeof(*cur));
	uint8_t *in = calloc(t->nr_blocks, 1);
	struct bheap h = { 0 };
	uint32_t size = 0;
	int ret = 0;

	if (!next_at || !last || !cur || !in) {
		ret = -ENOMEM;
		goto out;
	}
	/* Each access's block's next access, in access order. */
	for (uint32_t b = 0; b < t->nr_blocks; b++)
		last[b] = NEVER;
	for (size_t a = t->nr_accesses; a--;) {
		next_at[a] = last[t->blocks[a]];
		last[t->blocks[a]] = a;
	}
	for (size_t i = 0; i < t->nr_reqs; i++) {
		const struct kvc_trace_req *q = &t->req[i];
		uint32_t k = 0;

		while (k < q->n && in[t->blocks[q->off + k]])
			k++;
		kvc_psim_count(t, i, k, r);
		for (uint32_t j = 0; j < q->n; j++) {
			uint64_t a = q->off + j;
			uint32_t b = t->blocks[a];
			struct bent v = { next_at[a], t->depth[b], b };

			cur[b] = v.next;
			if (in[b]) {
				if (bh_push(&h, v)) {
					ret = -ENOMEM;
					goto out;
				}
				continue;
			}
			/* Full: evict the farthest, unless this is farther. */
			while (size == capacity) {
				struct bent top = h.e[0];

				if (!in[top.b] || cur[top.b] != top.next) {
					bh_pop(&h);	/* stale */
					continue;
				}
				if (!above(&top, &v))
					break;
				bh_pop(&h);
				in[top.b] = 0;
				size--;
				r->evictions++;
			}
			/* Bypassed: so is the rest of the chain. */
			if (size == capacity)
				break;
			in[b] = 1;
			size++;
			if (bh_push(&h, v)) {
				ret = -ENOMEM;
				goto out;
			}
		}
		/* Stale entries pile up: rebuild when they dominate. */
		if (h.len > 4 * (size_t)capacity + 4096) {
			struct bheap n = { 0 };

			for (size_t e = 0; e < h.len; e++)
				if (in[h.e[e].b] && cur[h.e[e].b] == h.e[e].next &&
				    bh_push(&n, h.e[e])) {
					free(n.e);
					ret = -ENOMEM;
					goto out;
				}
			free(h.e);
			h = n;
		}
	}
out:
	free(next_at);
	free(last);
	free(cur);
	free(in);
	free(h.e);
	return ret;
}
