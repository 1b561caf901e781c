// SPDX-License-Identifier: GPL-2.0
/*
 * Host tests for helper/kvcached/policy.c: argument rules, the leaf-first rule,
 * each policy's characteristic behaviour on small cases, the admission
 * filter against exact counts, and thousands of random operation
 * sequences per policy checked victim by victim against reference
 * implementations written here with plain arrays and linear scans.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"
#include "rand.h"
#include "tap.h"

#define KS	KVCACHE_KEY_SIZE
#define T	KVC_TIER_G3	/* the policies' tier; pool is "another tier" */

static uint64_t rng_state = 7;

static uint64_t rnd(void)
{
	return kvc_splitmix64(&rng_state);
}

static unsigned int rnd_below(unsigned int n)
{
	return (unsigned int)(rnd() % n);
}

static union kvc_loc loc1 = { .u64 = 1 };

/* Insert a block (first of its chain if parent is KVC_ID_NONE). */
static uint32_t add(struct kvc_index *idx, uint32_t parent)
{
	const struct kvc_entry *pe = kvc_index_entry(idx, parent);
	uint8_t k[KS];
	uint32_t id = KVC_ID_NONE;

	for (int i = 0; i < KS; i += 8) {
		uint64_t v = rnd();

		memcpy(k + i, &v, 8);
	}
	if (kvc_index_insert(idx, 1, k, pe ? pe->key : NULL, &id))
		printf("# add failed\n");
	return id;
}

/* Make id present in T and tell the policy. */
static int arrive(struct kvc_index *idx, struct kvc_policy *p, uint32_t id)
{
	kvc_index_set(idx, id, T, loc1);
	return kvc_policy_on_insert(p, id);
}

static int leave(struct kvc_index *idx, struct kvc_policy *p, uint32_t id)
{
	kvc_index_clear(idx, id, T);
	return kvc_policy_on_remove(p, id);
}

static struct kvc_policy *new_policy(const char *name,
				     struct kvc_index *idx, size_t hint)
{
	struct kvc_policy *p = NULL;

	if (kvc_policy_create(&p, name, idx, T, hint)) {
		printf("# kvc_policy_create(%s) failed\n", name);
		exit(1);
	}
	return p;
}

static struct kvc_index *new_index(void)
{
	struct kvc_index *idx = NULL;

	if (kvc_index_create(&idx, 0, 11))
		exit(1);
	return idx;
}

static void arguments(void)
{
	static const char *const names[] = { "lru", "s3fifo", "cost" };
	struct kvc_index *idx = new_index();
	struct kvc_policy *p = (void *)1;
	uint32_t a = add(idx, KVC_ID_NONE), out[2];

	TAP_CHECK(kvc_policy_create(&p, "lfu", idx, T, 10) == -EINVAL);
	TAP_CHECK(p == NULL);
	TAP_CHECK(kvc_policy_create(&p, "lru", idx, KVC_NR_TIERS, 10) == -EINVAL);
	TAP_EXPECT_EQ(kvc_policy_create(&p, NULL, idx, T, 10), -EINVAL);
	for (int i = 0; i < 3; i++) {
		p = new_policy(names[i], idx, 0);
		TAP_CHECK(!strcmp(kvc_policy_name(p), names[i]));
		/* Not present in T (only in the pool): refused. */
		kvc_index_set(idx, a, KVC_TIER_POOL, loc1);
		TAP_EXPECT_EQ(kvc_policy_on_insert(p, a), -ENOENT);
		TAP_EXPECT_EQ(kvc_policy_on_insert(p, 999), -ENOENT);
		TAP_EXPECT_EQ(kvc_policy_on_access(p, a), -ENOENT);
		TAP_EXPECT_EQ(kvc_policy_on_remove(p, a), -ENOENT);
		TAP_CHECK(arrive(idx, p, a) == 0);
		TAP_EXPECT_EQ(kvc_policy_on_insert(p, a), -EEXIST);
		TAP_CHECK(kvc_policy_count(p) == 1);
		TAP_CHECK(kvc_policy_pick(p, out, 2) == 1 && out[0] == a);
		TAP_CHECK(kvc_policy_count(p) == 0);
		/* Picked: no longer accessible, still removable, once. */
		TAP_EXPECT_EQ(kvc_policy_on_access(p, a), -ENOENT);
		TAP_CHECK(kvc_policy_pick(p, out, 2) == 0);
		TAP_CHECK(leave(idx, p, a) == 0);
		TAP_EXPECT_EQ(kvc_policy_on_remove(p, a), -ENOENT);
		kvc_policy_destroy(p);
	}
	kvc_index_destroy(idx);
}

/* a -> b -> c and d: only leaves go, a descendant before its ancestor. */
static void leaf_first(void)
{
	static const char *const names[] = { "lru", "s3fifo", "cost", "density" };

	for (int i = 0; i < 4; i++) {
		struct kvc_index *idx = new_index();
		struct kvc_policy *p = new_policy(names[i], idx, 10);
		uint32_t a = add(idx, KVC_ID_NONE), b = add(idx, a);
		uint32_t c = add(idx, b), d = add(idx, KVC_ID_NONE), v[4];
		size_t n;

		arrive(idx, p, a);
		arrive(idx, p, b);
		arrive(idx, p, c);
		arrive(idx, p, d);
		/* Children elsewhere do not count: d's is in the pool only. */
		kvc_index_set(idx, add(idx, d), KVC_TIER_POOL, loc1);
		n = kvc_policy_pick(p, v, 4);
		TAP_CHECK(n == 2);
		/*
		 * lru, s3fifo: c came first; cost: d is shallower (cheaper);
		 * density: both, in the order its sample found them.
		 */
		if (i < 2)
			TAP_CHECK(v[0] == c && v[1] == d);
		else if (i == 2)
			TAP_CHECK(v[0] == d && v[1] == c);
		else
			TAP_CHECK((v[0] == c && v[1] == d) ||
				  (v[0] == d && v[1] == c));
		/* Until c is gone, b stays. */
		TAP_CHECK(kvc_policy_pick(p, v, 4) == 0);
		leave(idx, p, c);
		TAP_CHECK(kvc_policy_pick(p, v, 4) == 1 && v[0] == b);
		leave(idx, p, b);
		/* Given back instead of evicted: a is tracked again. */
		TAP_CHECK(kvc_policy_pick(p, v, 4) == 1 && v[0] == a);
		TAP_CHECK(kvc_policy_on_insert(p, a) == 0);
		TAP_CHECK(kvc_policy_pick(p, v, 4) == 1 && v[0] == a);
		TAP_CHECK(kvc_policy_count(p) == 0);
		kvc_policy_destroy(p);
		kvc_index_destroy(idx);
	}
}

static void lru_order(void)
{
	struct kvc_index *idx = new_index();
	struct kvc_policy *p = new_policy("lru", idx, 0);
	uint32_t id[5], v[5];

	for (int i = 0; i < 5; i++) {
		id[i] = add(idx, KVC_ID_NONE);
		arrive(idx, p, id[i]);
	}
	kvc_policy_on_access(p, id[0]);
	kvc_policy_on_access(p, id[2]);
	TAP_CHECK(kvc_policy_pick(p, v, 5) == 5);
	TAP_CHECK(v[0] == id[1] && v[1] == id[3] && v[2] == id[4] &&
		  v[3] == id[0] && v[4] == id[2]);
	kvc_policy_destroy(p);
	kvc_index_destroy(idx);
}

/*
 * S3-FIFO on 10 blocks: one-hit blocks leave from small in FIFO order, a
 * block hit while in small moves to main instead, and a block that comes
 * back while its ghost is remembered goes straight to main.
 */
static void s3fifo_behaviour(void)
{
	struct kvc_index *idx = new_index();
	struct kvc_policy *p = new_policy("s3fifo", idx, 10);
	uint32_t id[10], v[10];

	for (int i = 0; i < 10; i++) {
		id[i] = add(idx, KVC_ID_NONE);
		arrive(idx, p, id[i]);
	}
	kvc_policy_on_access(p, id[0]);
	TAP_CHECK(kvc_policy_pick(p, v, 2) == 2);
	TAP_CHECK(v[0] == id[1] && v[1] == id[2]);	/* id[0] went to main */
	leave(idx, p, v[0]);
	leave(idx, p, v[1]);
	/* id[1] comes back: ghost hit, main. id[3] is small's tail now. */
	arrive(idx, p, id[1]);
	TAP_CHECK(kvc_policy_pick(p, v, 1) == 1 && v[0] == id[3]);
	leave(idx, p, v[0]);
	/*
	 * Small holds 6 of 8, main id[1] (head) and id[0]: small goes first
	 * while it holds 10% or more, then main, oldest first.
	 */
	TAP_CHECK(kvc_policy_pick(p, v, 8) == 8);
	TAP_CHECK(v[0] == id[4] && v[5] == id[9]);
	TAP_CHECK(v[6] == id[0] && v[7] == id[1]);
	kvc_policy_destroy(p);
	kvc_index_destroy(idx);
}

/*
 * The small queue's share decides which queue the next victim comes
 * from. Ten blocks hit once, then ten new ones: the first pick moves the
 * ten hit ones to main (their frequency cleared) and evicts new[0].
 * Then small holds 9 of 19: at a 10% share small still goes first
 * (new[1]); at 50% main does (old[0]).
 */
static uint32_t second_victim(unsigned int pct, uint32_t *old0,
			      uint32_t *new1)
{
	struct kvc_index *idx = new_index();
	struct kvc_policy *p = new_policy("s3fifo", idx, 20);
	uint32_t old[10], new[10], v[2] = { KVC_ID_NONE, KVC_ID_NONE };

	if (pct && kvc_policy_set_small(p, pct))
		printf("# kvc_policy_set_small(%u) failed\n", pct);
	for (int i = 0; i < 10; i++) {
		old[i] = add(idx, KVC_ID_NONE);
		arrive(idx, p, old[i]);
		kvc_policy_on_access(p, old[i]);
	}
	for (int i = 0; i < 10; i++) {
		new[i] = add(idx, KVC_ID_NONE);
		arrive(idx, p, new[i]);
	}
	if (kvc_policy_pick(p, v, 1) != 1 || v[0] != new[0])
		printf("# first victim %u, not new[0] %u\n", v[0], new[0]);
	leave(idx, p, v[0]);
	kvc_policy_pick(p, v + 1, 1);
	*old0 = old[0];
	*new1 = new[1];
	kvc_policy_destroy(p);
	kvc_index_destroy(idx);
	return v[1];
}

static void s3fifo_small_share(void)
{
	struct kvc_index *idx = new_index();
	struct kvc_policy *p = new_policy("s3fifo", idx, 20);
	uint32_t old0, new1, a = add(idx, KVC_ID_NONE);

	TAP_CHECK(second_victim(0, &old0, &new1) == new1);	/* 10% */
	TAP_CHECK(second_victim(10, &old0, &new1) == new1);
	TAP_CHECK(second_victim(50, &old0, &new1) == old0);
	/* Out of range, another policy, or too late: refused. */
	TAP_EXPECT_EQ(kvc_policy_set_small(p, 0), -EINVAL);
	TAP_EXPECT_EQ(kvc_policy_set_small(p, 100), -EINVAL);
	TAP_CHECK(kvc_policy_set_small(p, 25) == 0);
	arrive(idx, p, a);
	TAP_EXPECT_EQ(kvc_policy_set_small(p, 30), -EBUSY);
	kvc_policy_destroy(p);
	p = new_policy("lru", idx, 20);
	TAP_EXPECT_EQ(kvc_policy_set_small(p, 25), -EINVAL);
	kvc_policy_destroy(p);
	kvc_index_destroy(idx);
}

/* GreedyDual: shallow blocks go first, but age catches up with deep ones. */
static void cost_behaviour(void)
{
	struct kvc_index *idx = new_index();
	struct kvc_policy *p = new_policy("cost", idx, 0);
	uint32_t chain[40], r, v[2];

	chain[0] = add(idx, KVC_ID_NONE);
	for (int i = 1; i < 40; i++)
		chain[i] = add(idx, chain[i - 1]);
	arrive(idx, p, chain[39]);	/* depth 39: H = 0 + 32 + 39 */
	r = add(idx, KVC_ID_NONE);
	arrive(idx, p, r);		/* depth 0: H = 32, later but cheaper */
	TAP_CHECK(kvc_policy_pick(p, v, 1) == 1 && v[0] == r);
	leave(idx, p, r);
	/* L = 32 now; a new shallow block gets H = 64 < 71: still first. */
	arrive(idx, p, r);
	TAP_CHECK(kvc_policy_pick(p, v, 1) == 1 && v[0] == r);
	leave(idx, p, r);
	/* L = 64; the next one gets H = 96 > 71: the deep block goes. */
	arrive(idx, p, r);
	TAP_CHECK(kvc_policy_pick(p, v, 1) == 1 && v[0] == chain[39]);
	kvc_policy_destroy(p);
	kvc_index_destroy(idx);
}

static void admission(void)
{
	enum { KEYS = 200, WIDTH = 1024 };
	struct kvc_admit *a = NULL;
	static unsigned int exact[KEYS];
	uint64_t fp[KEYS];
	int fneg = 0, fpos = 0, decided = 0;

	TAP_CHECK(kvc_admit_create(&a, 0, 10) == -EINVAL && !a);
	TAP_EXPECT_EQ(kvc_admit_create(&a, 256, 10), -EINVAL);
	TAP_CHECK(kvc_admit_create(&a, 1, 1 << 20) == 0);
	TAP_CHECK(kvc_admit_access(a, 5) && kvc_admit_bytes(a) < 256);
	kvc_admit_destroy(a);

	TAP_CHECK(kvc_admit_create(&a, 2, 100) == 0);
	TAP_CHECK(!kvc_admit_access(a, 42));
	TAP_CHECK(kvc_admit_estimate(a, 42) == 1);
	TAP_CHECK(kvc_admit_access(a, 42));
	TAP_CHECK(!kvc_admit_access(a, 43));
	/*
	 * 128 wide: halved at the 1280th access; 42's 2 -> 1, 43's 1 -> 0.
	 * Key 7's counters are in other columns than 42's and 43's.
	 */
	for (int i = 0; i < 1280 - 3; i++)
		kvc_admit_access(a, 7);
	TAP_CHECK(kvc_admit_estimate(a, 7) == 127);
	TAP_CHECK(kvc_admit_estimate(a, 43) == 0);
	TAP_CHECK(kvc_admit_estimate(a, 42) == 1);
	TAP_CHECK(kvc_admit_access(a, 42));
	kvc_admit_destroy(a);

	/* Random accesses against exact counts aged on the same schedule. */
	TAP_CHECK(kvc_admit_create(&a, 3, WIDTH) == 0);
	for (int i = 0; i < KEYS; i++)
		fp[i] = rnd() | 1;
	for (int n = 1; n <= 100000; n++) {
		int i = (int)(rnd_below(KEYS) * rnd_below(KEYS) / KEYS);
		int got = kvc_admit_access(a, fp[i]);
		int want = ++exact[i] >= 3;

		fneg += want && !got;
		fpos += got && !want;
		decided++;
		if (n % (10 * WIDTH) == 0)
			for (int j = 0; j < KEYS; j++)
				exact[j] /= 2;
	}
	printf("# admission: %d false admits in %d\n", fpos, decided);
	TAP_CHECK(fneg == 0);
	TAP_CHECK(fpos < decided / 100);
	kvc_admit_destroy(a);
}

/* ---- randomized: each policy against a reference ----------------------- */

#define MAXID	256
#define HINT	27
#define GHOST	HINT	/* room for main's share of the hint, 90% at most */

enum { M_NONE, M_TRACKED, M_PICKED };

struct ref {
	int kind;			/* 0 lru, 1 s3fifo, 2 cost, 3 density */
	int state[MAXID];
	uint64_t h[MAXID], seq[MAXID], tick, L;
	uint32_t depth[MAXID];
	/* s3fifo: queues with the head (newest) at [0] */
	uint32_t s[MAXID], m[MAXID];
	int ns, nm;
	int freq[MAXID];
	uint64_t ghost[GHOST];		/* oldest first; 0: taken */
	int ng;
	int small_pct, gcap;		/* small's share; ghost: main's */
};

/* The test's own view of the forest: parent and presence in T. */
static uint32_t parent_of[MAXID];
static long victims_compared, ghost_hits;
static int live[MAXID], present[MAXID];

static int r_leaf(uint32_t id)
{
	for (uint32_t j = 0; j < MAXID; j++)
		if (live[j] && present[j] && parent_of[j] == id)
			return 0;
	return 1;
}

static void q_del(uint32_t *q, int *n, int at)
{
	memmove(q + at, q + at + 1, (size_t)(*n - at - 1) * sizeof(*q));
	(*n)--;
}

static void q_push(uint32_t *q, int *n, uint32_t id)
{
	memmove(q + 1, q, (size_t)*n * sizeof(*q));
	q[0] = id;
	(*n)++;
}

static int q_find(const uint32_t *q, int n, uint32_t id)
{
	for (int i = 0; i < n; i++)
		if (q[i] == id)
			return i;
	return -1;
}

static void r_touch(struct ref *r, uint32_t id)
{
	r->seq[id] = ++r->tick;
	r->h[id] = r->kind == 2 ? r->L + KVC_COST_BASE + r->depth[id] : 0;
}

static void r_insert(struct ref *r, struct kvc_index *idx, uint32_t id)
{
	if (r->kind == 1) {
		uint64_t fp = kvc_index_fingerprint(idx, id);
		int hit = 0;

		for (int g = 0; g < r->ng; g++)
			if (r->ghost[g] == fp) {
				r->ghost[g] = 0;
				hit = 1;
			}
		r->freq[id] = 0;
		ghost_hits += hit;
		if (hit)
			q_push(r->m, &r->nm, id);
		else
			q_push(r->s, &r->ns, id);
	} else {
		uint32_t d = 0;

		for (uint32_t a = parent_of[id]; a != KVC_ID_NONE;
		     a = parent_of[a])
			d++;
		r->depth[id] = d;
		r_touch(r, id);
	}
	r->state[id] = M_TRACKED;
}

static void r_remove(struct ref *r, uint32_t id)
{
	if (r->kind == 1 && r->state[id] == M_TRACKED) {
		int i = q_find(r->s, r->ns, id);

		if (i >= 0)
			q_del(r->s, &r->ns, i);
		else
			q_del(r->m, &r->nm, q_find(r->m, r->nm, id));
	}
	r->state[id] = M_NONE;
}

static void r_ghost_add(struct ref *r, uint64_t fp)
{
	if (r->ng == r->gcap) {
		memmove(r->ghost, r->ghost + 1,
			(size_t)(r->gcap - 1) * sizeof(uint64_t));
		r->ng--;
	}
	r->ghost[r->ng++] = fp;
}

/* S3-FIFO, as policy.h describes it, one victim. */
static uint32_t r_s3_evict(struct ref *r, struct kvc_index *idx)
{
	int budget = 8 * (r->ns + r->nm) + 8;

	while (budget--) {
		uint32_t t;

		if (r->ns && (100 * r->ns >= r->small_pct * (r->ns + r->nm) ||
			      !r->nm)) {
			t = r->s[--r->ns];
			if (!r_leaf(t) || r->freq[t]) {
				r->freq[t] = 0;
				q_push(r->m, &r->nm, t);
				continue;
			}
			r_ghost_add(r, kvc_index_fingerprint(idx, t));
			return t;
		}
		if (!r->nm)
			break;
		t = r->m[--r->nm];
		if (!r_leaf(t)) {
			q_push(r->m, &r->nm, t);
		} else if (r->freq[t]) {
			r->freq[t]--;
			q_push(r->m, &r->nm, t);
		} else {
			return t;
		}
	}
	return KVC_ID_NONE;
}

static size_t r_pick(struct ref *r, struct kvc_index *idx, uint32_t *out,
		     size_t n)
{
	size_t k = 0;

	while (k < n) {
		uint32_t best = KVC_ID_NONE;

		if (r->kind == 1) {
			best = r_s3_evict(r, idx);
		} else {
			for (uint32_t id = 0; id < MAXID; id++) {
				if (r->state[id] != M_TRACKED || !r_leaf(id))
					continue;
				if (best == KVC_ID_NONE || r->h[id] < r->h[best] ||
				    (r->h[id] == r->h[best] &&
				     r->seq[id] < r->seq[best]))
					best = id;
			}
			if (best != KVC_ID_NONE && r->kind == 2)
				r->L = r->h[best];
		}
		if (best == KVC_ID_NONE)
			break;
		r->state[best] = M_PICKED;
		out[k++] = best;
	}
	return k;
}

static size_t r_tracked_leaves(const struct ref *r)
{
	size_t n = 0;

	for (uint32_t id = 0; id < MAXID; id++)
		n += live[id] && r->state[id] == M_TRACKED && r_leaf(id);
	return n;
}

static uint32_t random_with_state(const struct ref *r, int state)
{
	uint32_t cand[MAXID];
	int n = 0;

	for (uint32_t id = 0; id < MAXID; id++)
		if (live[id] && r->state[id] == state)
			cand[n++] = id;
	return n ? cand[rnd_below((unsigned int)n)] : KVC_ID_NONE;
}

/* small_pct: s3fifo's small share, set when not 0 (else the default, 10). */
static int one_sequence(int kind, int ops, int small_pct)
{
	static const char *const names[] = {
		"lru", "s3fifo", "cost", "density",
	};
	static struct ref r;
	struct kvc_index *idx = new_index();
	struct kvc_policy *p = new_policy(names[kind], idx, HINT);
	int bad = 0;

	memset(&r, 0, sizeof(r));
	r.kind = kind;
	r.small_pct = small_pct ? small_pct : 10;
	r.gcap = HINT * (100 - r.small_pct) / 100;
	if (small_pct && kvc_policy_set_small(p, (unsigned int)small_pct))
		bad++;
	memset(live, 0, sizeof(live));
	memset(present, 0, sizeof(present));
	for (int op = 0; op < ops; op++) {
		unsigned int what = rnd_below(12);
		uint32_t id, v[8], w[8];
		size_t n, nw;

		switch (what) {
		case 0:	/* a new block, under a random block or first */
		case 1:
			id = random_with_state(&r, M_NONE);
			if (rnd_below(3) == 0 || id == KVC_ID_NONE)
				id = random_with_state(&r, M_TRACKED);
			id = add(idx, rnd_below(4) ? id : KVC_ID_NONE);
			if (id >= MAXID) {
				bad++;
				break;
			}
			live[id] = 1;
			present[id] = 0;
			parent_of[id] = kvc_index_entry(idx, id)->parent;
			/* It arrives at once. */
			/* fall through */
		case 2:	/* arrival of an absent block */
			if (what == 2)
				id = random_with_state(&r, M_NONE);
			if (id == KVC_ID_NONE || present[id])
				break;
			present[id] = 1;
			bad += arrive(idx, p, id) != 0;
			r_insert(&r, idx, id);
			break;
		case 3:	/* hits */
		case 4:
		case 5:
			id = random_with_state(&r, M_TRACKED);
			if (id == KVC_ID_NONE)
				break;
			bad += kvc_policy_on_access(p, id) != 0;
			if (kind == 1)
				r.freq[id] += r.freq[id] < 3;
			else
				r_touch(&r, id);
			break;
		case 6:	/* a block leaves for another reason */
			id = random_with_state(&r, M_TRACKED);
			if (id == KVC_ID_NONE)
				break;
			present[id] = 0;
			bad += leave(idx, p, id) != 0;
			r_remove(&r, id);
			break;
		case 7:	/* presence in another tier changes nothing here */
			id = random_with_state(&r, rnd_below(3));
			if (id == KVC_ID_NONE)
				break;
			if (rnd_below(2))
				kvc_index_set(idx, id, KVC_TIER_POOL, loc1);
			else
				kvc_index_clear(idx, id, KVC_TIER_POOL);
			break;
		case 8:	/* an absent leaf leaves the index: ids get reused */
			id = random_with_state(&r, M_NONE);
			if (id == KVC_ID_NONE || present[id])
				break;
			kvc_index_clear(idx, id, KVC_TIER_POOL);
			if (kvc_index_remove(idx, id) == 0)
				live[id] = 0;
			break;
		case 9: /* evict or give back victims picked earlier */
			id = random_with_state(&r, M_PICKED);
			if (id == KVC_ID_NONE)
				break;
			if (rnd_below(4)) {
				present[id] = 0;
				bad += leave(idx, p, id) != 0;
				r_remove(&r, id);
			} else {
				bad += kvc_policy_on_insert(p, id) != 0;
				r_insert(&r, idx, id);
			}
			break;
		default:	/* pick, and evict most victims at once */
			n = 1 + rnd_below(4);
			if (kind == 3) {
				/* Sampled: any tracked leaf, as many as asked. */
				nw = r_tracked_leaves(&r);
				nw = nw < n ? nw : n;
				n = kvc_policy_pick(p, v, n);
				bad += n != nw;
				for (size_t i = 0; i < n && i < nw; i++) {
					bad += r.state[v[i]] != M_TRACKED ||
					       !r_leaf(v[i]);
					r.state[v[i]] = M_PICKED;
					w[i] = v[i];
				}
			} else {
				nw = r_pick(&r, idx, w, n);
				n = kvc_policy_pick(p, v, n);
				bad += n != nw;
				for (size_t i = 0; i < n && i < nw; i++)
					bad += v[i] != w[i];
			}
			victims_compared += (long)nw;
			for (size_t i = 0; i < nw; i++) {
				if (rnd_below(3) == 0)
					continue;	/* later, in case 9 */
				present[w[i]] = 0;
				leave(idx, p, w[i]);
				r_remove(&r, w[i]);
			}
		}
	}
	kvc_policy_destroy(p);
	kvc_index_destroy(idx);
	return bad;
}

static void random_sequences(int kind, int small_pct)
{
	int bad = 0, first = -1;

	rng_state = 1000 + (uint64_t)kind + (uint64_t)small_pct;
	victims_compared = ghost_hits = 0;
	for (int s = 0; s < 2000; s++) {
		int b = one_sequence(kind, 400, small_pct);

		if (b && first < 0)
			first = s;
		bad += b;
	}
	if (bad)
		printf("# %d mismatches, first in sequence %d\n", bad, first);
	printf("# %ld victims compared, %ld ghost hits\n", victims_compared,
	       ghost_hits);
	TAP_CHECK(bad == 0);
	TAP_CHECK(victims_compared > 10000);
	TAP_CHECK(kind != 1 || ghost_hits > 1000);
}

static void lru_matches_reference(void)
{
	random_sequences(0, 0);
}

static void s3fifo_matches_reference(void)
{
	random_sequences(1, 0);
}

/* [eviction] s3fifo_small: the reference with the same share. */
static void s3fifo_small_25_matches_reference(void)
{
	random_sequences(1, 25);
}

static void s3fifo_small_50_matches_reference(void)
{
	random_sequences(1, 50);
}

static void cost_matches_reference(void)
{
	random_sequences(2, 0);
}

/* "density" samples: its victims are checked against the rules only. */
static void density_keeps_the_rules(void)
{
	random_sequences(3, 0);
}

/*
 * "density" learns what comes back: blocks hit again and again at a
 * steady age (a chat's turns) against blocks never hit (one-off
 * documents) arriving in between. Once it has seen enough, it evicts
 * the one-offs, however recent, before the returning blocks, where lru
 * evicts whatever is oldest.
 */
static void density_learns_what_returns(void)
{
	struct kvc_index *idx = new_index();
	struct kvc_policy *p = new_policy("density", idx, 64);
	uint32_t hot[32], v, hot_victims = 0;

	for (int i = 0; i < 32; i++) {
		hot[i] = add(idx, KVC_ID_NONE);
		arrive(idx, p, hot[i]);
	}
	for (int round = 0; round < 2000; round++) {
		uint32_t once = add(idx, KVC_ID_NONE);

		arrive(idx, p, once);
		kvc_policy_on_access(p, hot[round % 32]);
		/* Keep the tier at 40: one victim per arrival. */
		if (kvc_policy_count(p) > 40 && kvc_policy_pick(p, &v, 1)) {
			bool is_hot = false;

			for (int i = 0; i < 32; i++)
				is_hot |= hot[i] == v;
			if (is_hot) {
				if (round >= 1000)
					hot_victims++;
				kvc_policy_on_insert(p, v);	/* keep it */
			} else {
				leave(idx, p, v);
				kvc_index_remove(idx, v);
			}
		}
	}
	printf("# hot blocks picked in the last 1000 rounds: %u\n",
	       hot_victims);
	TAP_CHECK(hot_victims < 50);
	kvc_policy_destroy(p);
	kvc_index_destroy(idx);
}

int main(void)
{
	TAP_RUN(arguments);
	TAP_RUN(leaf_first);
	TAP_RUN(lru_order);
	TAP_RUN(s3fifo_behaviour);
	TAP_RUN(s3fifo_small_share);
	TAP_RUN(cost_behaviour);
	TAP_RUN(admission);
	TAP_RUN(lru_matches_reference);
	TAP_RUN(s3fifo_matches_reference);
	TAP_RUN(s3fifo_small_25_matches_reference);
	TAP_RUN(s3fifo_small_50_matches_reference);
	TAP_RUN(cost_matches_reference);
	TAP_RUN(density_keeps_the_rules);
	TAP_RUN(density_learns_what_returns);
	return tap_done();
}
