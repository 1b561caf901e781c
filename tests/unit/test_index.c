// SPDX-License-Identifier: GPL-2.0
/*
 * Host tests for helper/kvcached/index.c: the error rules, tier presence and child
 * counts, removal, chain lookups, growth with stable ids, keys that collide
 * in the table, and thousands of random operation sequences checked
 * against a model made of plain arrays and linear scans.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "index.h"
#include "rand.h"
#include "tap.h"

#define KS	KVCACHE_KEY_SIZE

static uint64_t rng_state;

/* splitmix64: a fixed seed gives the same sequences on every machine. */
static uint64_t rnd(void)
{
	return kvc_splitmix64(&rng_state);
}

static unsigned int rnd_below(unsigned int n)
{
	return (unsigned int)(rnd() % n);
}

static void rnd_key(uint8_t *k)
{
	for (int i = 0; i < KS; i += 8) {
		uint64_t v = rnd();

		memcpy(k + i, &v, 8);
	}
}

static union kvc_loc loc_of(uint64_t v)
{
	union kvc_loc l = { .u64 = v };

	return l;
}

static struct kvc_index *new_index(size_t hint, uint64_t seed)
{
	struct kvc_index *idx = NULL;

	if (kvc_index_create(&idx, hint, seed)) {
		printf("# kvc_index_create failed\n");
		exit(1);
	}
	return idx;
}

static void errors_and_identity(void)
{
	struct kvc_index *idx = new_index(0, 1);
	uint8_t a[KS], b[KS];
	uint32_t ia, ia2, ib, x = 7;

	rnd_key(a);
	rnd_key(b);
	TAP_EXPECT_EQ(kvc_index_insert(idx, 0, a, NULL, &x), -EINVAL);
	TAP_CHECK(kvc_index_insert(idx, KVCACHE_NS_MAX + 1, a, NULL, &x) ==
		  -EINVAL);
	TAP_EXPECT_EQ(kvc_index_insert(idx, 1, NULL, NULL, &x), -EINVAL);
	TAP_CHECK(x == 7 && kvc_index_count(idx) == 0);
	/* A parent that is not there, or only in another namespace. */
	TAP_EXPECT_EQ(kvc_index_insert(idx, 1, b, a, &x), -ENOENT);
	TAP_CHECK(kvc_index_insert(idx, 1, a, NULL, &ia) == 0);
	TAP_EXPECT_EQ(kvc_index_insert(idx, 2, b, a, &x), -ENOENT);
	TAP_CHECK(kvc_index_insert(idx, 1, a, NULL, &x) == -EEXIST && x == ia);
	/* Same key, other namespace: another entry. */
	TAP_CHECK(kvc_index_insert(idx, KVCACHE_NS_MAX, a, NULL, &ia2) == 0);
	TAP_CHECK(ia2 != ia);
	TAP_CHECK(kvc_index_insert(idx, 1, b, a, &ib) == 0);
	TAP_CHECK(kvc_index_insert(idx, 1, b, NULL, &x) == -EEXIST && x == ib);
	TAP_CHECK(kvc_index_find(idx, 1, a, &x) == 0 && x == ia);
	TAP_CHECK(kvc_index_find(idx, KVCACHE_NS_MAX, a, &x) == 0 && x == ia2);
	TAP_EXPECT_EQ(kvc_index_find(idx, 2, a, &x), -ENOENT);
	TAP_EXPECT_EQ(kvc_index_find(idx, 0, a, &x), -ENOENT);
	TAP_CHECK(kvc_index_entry(idx, ib)->parent == ia);
	TAP_CHECK(kvc_index_entry(idx, ia)->parent == KVC_ID_NONE);
	TAP_CHECK(kvc_index_entry(idx, ia)->nchild == 1);
	TAP_CHECK(kvc_index_entry(idx, ia2)->nchild == 0);
	TAP_CHECK(kvc_index_entry(idx, 12345) == NULL);
	TAP_CHECK(kvc_index_depth(idx, ib) == 1 && kvc_index_depth(idx, ia) == 0);
	TAP_EXPECT_EQ(kvc_index_set(idx, ia, KVC_NR_TIERS, loc_of(1)), -EINVAL);
	TAP_EXPECT_EQ(kvc_index_set(idx, 12345, 0, loc_of(1)), -ENOENT);
	TAP_EXPECT_EQ(kvc_index_clear(idx, ia, 0), -ENOENT);
	TAP_EXPECT_EQ(kvc_index_clear(idx, ia, 5), -EINVAL);
	/* Fingerprints: per (ns, key), never 0. */
	TAP_CHECK(kvc_index_fingerprint(idx, ia) != kvc_index_fingerprint(idx, ia2));
	TAP_CHECK(kvc_index_fingerprint(idx, ia) == kvc_index_hash(idx, 1, a));
	TAP_CHECK(kvc_index_fingerprint(idx, ia) != 0);
	TAP_CHECK(kvc_index_fingerprint(idx, 12345) == 0);
	TAP_CHECK(kvc_index_count(idx) == 3);
	kvc_index_destroy(idx);
}

static void tiers_child_counts_and_remove(void)
{
	struct kvc_index *idx = new_index(4, 2);
	uint8_t k[3][KS];
	uint32_t id[3];
	union kvc_loc h = { .pool = { .index = 5, .gen = 9 } };
	const struct kvc_entry *r, *m;

	for (int i = 0; i < 3; i++) {
		rnd_key(k[i]);
		TAP_CHECK(kvc_index_insert(idx, 3, k[i], i ? k[i - 1] : NULL,
					   &id[i]) == 0);
	}
	r = kvc_index_entry(idx, id[0]);
	m = kvc_index_entry(idx, id[1]);
	TAP_CHECK(kvc_index_set(idx, id[1], KVC_TIER_POOL, h) == 0);
	TAP_CHECK(kvc_index_set(idx, id[1], KVC_TIER_G4, loc_of(77)) == 0);
	TAP_CHECK(m->tiers == 5 && m->loc[0].pool.index == 5 &&
		  m->loc[0].pool.gen == 9 && m->loc[2].u64 == 77);
	TAP_CHECK(r->child_in[0] == 1 && r->child_in[1] == 0 &&
		  r->child_in[2] == 1);
	/* Moving within a tier changes the location, not the counts. */
	TAP_CHECK(kvc_index_set(idx, id[1], KVC_TIER_G4, loc_of(78)) == 0);
	TAP_CHECK(m->loc[2].u64 == 78 && r->child_in[2] == 1);
	TAP_CHECK(kvc_index_clear(idx, id[1], KVC_TIER_POOL) == 0);
	TAP_CHECK(r->child_in[0] == 0 && m->tiers == 4);
	TAP_EXPECT_EQ(kvc_index_clear(idx, id[1], KVC_TIER_POOL), -ENOENT);
	/* Remove: not while present or with children, leaf up. */
	TAP_CHECK(kvc_index_remove(idx, id[1]) == -EBUSY);	/* child */
	TAP_CHECK(kvc_index_set(idx, id[2], KVC_TIER_G3, loc_of(1)) == 0);
	TAP_CHECK(kvc_index_remove(idx, id[2]) == -EBUSY);	/* in g3 */
	TAP_CHECK(kvc_index_clear(idx, id[2], KVC_TIER_G3) == 0);
	TAP_CHECK(m->child_in[1] == 0 && m->nchild == 1);
	TAP_CHECK(kvc_index_remove(idx, id[2]) == 0);
	TAP_EXPECT_EQ(kvc_index_remove(idx, id[2]), -ENOENT);
	TAP_CHECK(m->nchild == 0 && kvc_index_entry(idx, id[2]) == NULL);
	TAP_EXPECT_EQ(kvc_index_find(idx, 3, k[2], &id[2]), -ENOENT);
	TAP_CHECK(kvc_index_remove(idx, id[1]) == -EBUSY);	/* in g4 */
	TAP_CHECK(kvc_index_clear(idx, id[1], KVC_TIER_G4) == 0);
	TAP_CHECK(kvc_index_remove(idx, id[0]) == -EBUSY);	/* child */
	TAP_CHECK(kvc_index_remove(idx, id[1]) == 0);
	TAP_CHECK(kvc_index_remove(idx, id[0]) == 0);
	TAP_CHECK(kvc_index_count(idx) == 0);
	TAP_CHECK(kvc_index_next(idx, 0) == KVC_ID_NONE);
	/* Freed ids come back. */
	TAP_CHECK(kvc_index_insert(idx, 3, k[0], NULL, &id[2]) == 0);
	TAP_CHECK(id[2] < 3);
	kvc_index_destroy(idx);
}

static void chain_lookup(void)
{
	struct kvc_index *idx = new_index(0, 3);
	uint8_t k[20][KS];
	struct kvc_match out[20];
	uint32_t id[20], other;

	for (int i = 0; i < 20; i++) {
		rnd_key(k[i]);
		TAP_CHECK(kvc_index_insert(idx, 9, k[i], i ? k[i - 1] : NULL,
					   &id[i]) == 0);
		if (i < 16)
			kvc_index_set(idx, id[i], i < 8 ? KVC_TIER_POOL :
				      KVC_TIER_G3, loc_of(100 + i));
	}
	TAP_CHECK(kvc_index_lookup(idx, 9, k, 20, KVC_TIERS_ALL, out) == 16);
	TAP_CHECK(out[3].id == id[3] && out[3].tiers == 1 &&
		  out[3].loc[0].u64 == 103);
	TAP_CHECK(out[15].id == id[15] && out[15].loc[1].u64 == 115);
	TAP_CHECK(kvc_index_lookup(idx, 9, k, 20, 1u << KVC_TIER_POOL, NULL) == 8);
	TAP_CHECK(kvc_index_lookup(idx, 9, k, 20, 1u << KVC_TIER_G3, NULL) == 0);
	TAP_CHECK(kvc_index_lookup(idx, 9, k, 20, 1u << KVC_TIER_G4, NULL) == 0);
	TAP_CHECK(kvc_index_lookup(idx, 9, k, 5, KVC_TIERS_ALL, NULL) == 5);
	TAP_CHECK(kvc_index_lookup(idx, 9, k, 0, KVC_TIERS_ALL, NULL) == 0);
	TAP_CHECK(kvc_index_lookup(idx, 8, k, 20, KVC_TIERS_ALL, NULL) == 0);
	TAP_CHECK(kvc_index_lookup(idx, 0, k, 20, KVC_TIERS_ALL, NULL) == -EINVAL);
	TAP_EXPECT_EQ(kvc_index_lookup(idx, 9, k, 20, 0, NULL), -EINVAL);
	TAP_EXPECT_EQ(kvc_index_lookup(idx, 9, k, 20, 8, NULL), -EINVAL);
	/* Not a chain from its start: keys[0] has a parent. */
	TAP_CHECK(kvc_index_lookup(idx, 9, k + 1, 19, KVC_TIERS_ALL, NULL) == 0);
	/* ... unless it continues a chain matched before. */
	TAP_CHECK(kvc_index_lookup_more(idx, 9, k + 1, 19, KVC_TIERS_ALL,
					out) == 15);
	TAP_CHECK(out[0].id == id[1] && out[14].id == id[15]);
	TAP_CHECK(kvc_index_lookup_more(idx, 9, k + 7, 5, 1u << KVC_TIER_POOL,
					NULL) == 1);
	/* Only the first key's parent goes unchecked. */
	TAP_CHECK(kvc_index_lookup_more(idx, 9, k + 3, 1, KVC_TIERS_ALL,
					NULL) == 1);
	memcpy(out, k[5], KS);
	memcpy(k[5], k[9], KS);
	TAP_CHECK(kvc_index_lookup_more(idx, 9, k + 3, 10, KVC_TIERS_ALL,
					NULL) == 2);
	memcpy(k[5], out, KS);
	/* A present key that is not the child of the previous one ends it. */
	TAP_EXPECT_EQ(kvc_index_insert(idx, 9, k[19], NULL, &other), -EEXIST);
	memcpy(k[4], k[6], KS);
	TAP_CHECK(kvc_index_lookup(idx, 9, k, 20, KVC_TIERS_ALL, NULL) == 4);
	kvc_index_destroy(idx);
}

/* Many keys with the same table home and tag: long probe runs. */
static void colliding_keys(void)
{
	enum { N = 600 };
	struct kvc_index *idx = new_index(0, 4);
	static uint8_t k[N][KS];
	uint32_t id[N], x;
	int bad = 0;

	for (int i = 0; i < N; i++) {
		rnd_key(k[i]);
		memset(k[i], 0xab, 16);		/* the hashed half */
		bad += kvc_index_insert(idx, 1, k[i], NULL, &id[i]) != 0;
	}
	TAP_CHECK(bad == 0);
	/* Remove every other one, in a scattered order, then look all up. */
	for (int i = 0; i < N; i += 2)
		bad += kvc_index_remove(idx, id[(i * 7) % N & ~1]) != 0;
	TAP_CHECK(bad == 0);
	for (int i = 0; i < N; i++) {
		int r = kvc_index_find(idx, 1, k[i], &x);

		bad += (i % 2) ? (r != 0 || x != id[i]) : (r != -ENOENT);
	}
	TAP_CHECK(bad == 0);
	TAP_CHECK(kvc_index_count(idx) == N / 2);
	kvc_index_destroy(idx);
}

/* Growth from the smallest table: ids and entry pointers do not move. */
static void growth_keeps_ids(void)
{
	enum { N = 200000 };
	struct kvc_index *idx = new_index(0, 5);
	uint8_t *keys = malloc((size_t)N * KS);
	uint32_t *ids = malloc(N * sizeof(*ids)), x;
	const struct kvc_entry *first = NULL;
	size_t bytes;
	int bad = 0;

	for (int i = 0; i < N; i++)
		rnd_key(keys + (size_t)i * KS);
	for (int i = 0; i < N; i++) {
		bad += kvc_index_insert(idx, 1, keys + (size_t)i * KS,
					i % 64 ? keys + (size_t)(i - 1) * KS : NULL,
					&ids[i]) != 0;
		if (i == 0)
			first = kvc_index_entry(idx, ids[0]);
	}
	TAP_CHECK(bad == 0);
	TAP_CHECK(kvc_index_entry(idx, ids[0]) == first);
	for (int i = 0; i < N; i++)
		bad += kvc_index_find(idx, 1, keys + (size_t)i * KS, &x) ||
		       x != ids[i] ||
		       kvc_index_depth(idx, ids[i]) != (uint32_t)(i % 64);
	TAP_CHECK(bad == 0);
	bytes = kvc_index_bytes(idx);
	printf("# %d keys: %zu bytes, %.1f per key\n", N, bytes,
	       (double)bytes / N);
	TAP_CHECK(bytes >= (size_t)N * 80);
	TAP_CHECK(bytes <= (size_t)N * (KS + 64));
	kvc_index_destroy(idx);
	free(keys);
	free(ids);
}

/* ---- randomized: the index against a model of arrays ------------------- */

#define MAXM	512

struct ment {
	int live;
	uint32_t ns, id;
	uint8_t key[KS];
	int parent;			/* model index, -1 for none */
	uint8_t tiers;
	uint64_t loc[KVC_NR_TIERS];
};

static struct ment m[MAXM];
static int nm;

static const uint32_t nss[] = { 1, 2, KVCACHE_NS_MAX };

static int m_find(uint32_t ns, const uint8_t *key)
{
	for (int i = 0; i < nm; i++)
		if (m[i].live && m[i].ns == ns && !memcmp(m[i].key, key, KS))
			return i;
	return -1;
}

static int m_random_live(void)
{
	int n = 0, pick;

	for (int i = 0; i < nm; i++)
		n += m[i].live;
	if (!n)
		return -1;
	pick = (int)rnd_below((unsigned int)n);
	for (int i = 0; i < nm; i++)
		if (m[i].live && !pick--)
			return i;
	return -1;
}

/*
 * A fresh key: half of them share their hashed half with a few others
 * (same home and tag in the table), so probe runs and shifts get work.
 */
static void m_key(uint8_t *k)
{
	rnd_key(k);
	if (rnd() & 1)
		memset(k, (int)rnd_below(3), 16);
}

static int m_check_all(struct kvc_index *idx)
{
	size_t live = 0, seen = 0;
	int bad = 0;

	for (int i = 0; i < nm; i++) {
		const struct kvc_entry *e;
		uint32_t nchild = 0, in[KVC_NR_TIERS] = { 0 };

		if (!m[i].live)
			continue;
		live++;
		for (int j = 0; j < nm; j++) {
			if (!m[j].live || m[j].parent != i)
				continue;
			nchild++;
			for (int t = 0; t < KVC_NR_TIERS; t++)
				in[t] += (m[j].tiers >> t) & 1;
		}
		e = kvc_index_entry(idx, m[i].id);
		if (!e || e->ns != m[i].ns || memcmp(e->key, m[i].key, KS) ||
		    e->parent != (m[i].parent < 0 ? KVC_ID_NONE :
				  m[m[i].parent].id) ||
		    e->tiers != m[i].tiers || e->nchild != nchild) {
			bad++;
			continue;
		}
		for (int t = 0; t < KVC_NR_TIERS; t++)
			bad += e->child_in[t] != in[t] ||
			       ((m[i].tiers >> t & 1) && e->loc[t].u64 != m[i].loc[t]);
	}
	for (uint32_t id = kvc_index_next(idx, 0); id != KVC_ID_NONE;
	     id = kvc_index_next(idx, id + 1)) {
		int found = 0;

		seen++;
		for (int i = 0; i < nm; i++)
			found += m[i].live && m[i].id == id;
		bad += found != 1;
	}
	bad += seen != live || kvc_index_count(idx) != live;
	return bad;
}

/* A chain of model entries ending at i, root first, maybe spoiled. */
static int m_chain(int i, uint8_t (*keys)[KS], int max)
{
	int path[MAXM], n = 0;

	for (; i >= 0 && n < MAXM; i = m[i].parent)
		path[n++] = i;
	if (n > max)
		n = max;
	for (int j = 0; j < n; j++)
		memcpy(keys[j], m[path[n - 1 - j]].key, KS);
	if (n < max && rnd_below(3) == 0)
		m_key(keys[n++]);		/* a key that is not there */
	if (n && rnd_below(5) == 0) {	/* a random known key somewhere */
		int r = m_random_live();

		if (r >= 0)
			memcpy(keys[rnd_below((unsigned int)n)], m[r].key, KS);
	}
	return n;
}

static int m_lookup(uint32_t ns, uint8_t (*keys)[KS], int n,
		    unsigned int mask)
{
	int prev = -1, i;

	for (i = 0; i < n; i++) {
		int j = m_find(ns, keys[i]);

		if (j < 0 || m[j].parent != prev || !(m[j].tiers & mask))
			break;
		prev = j;
	}
	return i;
}

static int one_sequence(uint64_t seed, int ops)
{
	struct kvc_index *idx = new_index(rnd_below(2) ? 0 : 100, seed);
	static uint8_t keys[64][KS];
	static struct kvc_match out[64];
	int bad = 0;

	nm = 0;
	for (int op = 0; op < ops; op++) {
		unsigned int what = rnd_below(10), t = rnd_below(KVC_NR_TIERS);
		int i = m_random_live(), r, j;
		uint8_t k[KS];
		uint32_t id, ns = nss[rnd_below(3)];

		switch (what) {
		case 0:	/* a first block, or a child of a live entry */
		case 1:
			if (nm == MAXM)
				break;
			m_key(k);
			if (what == 1 && i >= 0)
				ns = m[i].ns;
			else
				i = -1;
			if (m_find(ns, k) >= 0)
				break;
			r = kvc_index_insert(idx, ns, k, i >= 0 ? m[i].key : NULL,
					     &id);
			bad += r != 0;
			if (r)
				break;
			m[nm] = (struct ment){ .live = 1, .ns = ns, .id = id,
					       .parent = i };
			memcpy(m[nm++].key, k, KS);
			break;
		case 2:	/* a parent that is absent (in this namespace) */
			m_key(k);
			if (i >= 0 && rnd_below(2)) {
				memcpy(k, m[i].key, KS);
				ns = m[i].ns % 3 + 1;
			}
			if (m_find(ns, k) >= 0)
				break;
			r = kvc_index_insert(idx, ns, k, k, &id);
			bad += r != -ENOENT;
			break;
		case 3:	/* duplicate */
			if (i < 0)
				break;
			bad += kvc_index_insert(idx, m[i].ns, m[i].key, NULL,
						&id) != -EEXIST || id != m[i].id;
			break;
		case 4:
			if (i < 0)
				break;
			m[i].loc[t] = rnd();
			m[i].tiers |= (uint8_t)(1u << t);
			bad += kvc_index_set(idx, m[i].id, t,
					     loc_of(m[i].loc[t])) != 0;
			break;
		case 5:
			if (i < 0)
				break;
			r = kvc_index_clear(idx, m[i].id, t);
			bad += r != ((m[i].tiers >> t & 1) ? 0 : -ENOENT);
			m[i].tiers &= (uint8_t)~(1u << t);
			break;
		case 6:
			if (i < 0)
				break;
			for (j = 0; j < nm; j++)
				if (m[j].live && m[j].parent == i)
					break;
			r = kvc_index_remove(idx, m[i].id);
			if (m[i].tiers || j < nm) {
				bad += r != -EBUSY;
			} else {
				bad += r != 0;
				m[i].live = 0;
			}
			break;
		case 7:	/* find: a live key, or a fresh one */
			if (i >= 0 && rnd_below(2)) {
				bad += kvc_index_find(idx, m[i].ns, m[i].key,
						      &id) || id != m[i].id;
			} else {
				m_key(k);
				r = m_find(ns, k);
				bad += kvc_index_find(idx, ns, k, &id) !=
				       (r < 0 ? -ENOENT : 0);
			}
			break;
		default: {	/* chain lookup */
			unsigned int mask = 1 + rnd_below(KVC_TIERS_ALL);
			int n, want, got;

			if (i < 0)
				break;
			n = m_chain(i, keys, 64);
			want = m_lookup(m[i].ns, keys, n, mask);
			got = kvc_index_lookup(idx, m[i].ns,
					       (const uint8_t (*)[KS])keys,
					       (size_t)n, mask, out);
			bad += got != want;
			for (j = 0; j < want && j < got; j++) {
				int e = m_find(m[i].ns, keys[j]);

				bad += out[j].id != m[e].id ||
				       out[j].tiers != m[e].tiers;
				for (t = 0; t < KVC_NR_TIERS; t++)
					bad += (m[e].tiers >> t & 1) &&
					       out[j].loc[t].u64 != m[e].loc[t];
			}
		}
		}
	}
	bad += m_check_all(idx);
	kvc_index_destroy(idx);
	return bad;
}

static void random_sequences_match_the_model(void)
{
	int bad = 0, failed_seq = -1;

	rng_state = 42;
	for (int s = 0; s < 3000; s++) {
		int b = one_sequence((uint64_t)s, 300);

		if (b && failed_seq < 0)
			failed_seq = s;
		bad += b;
	}
	if (bad)
		printf("# %d mismatches, first in sequence %d\n", bad,
		       failed_seq);
	TAP_CHECK(bad == 0);
}

/* What an observer heard: a count per (tier, present) and the last id. */
struct heard {
	unsigned int n[KVC_NR_TIERS][2];
	uint32_t last;
	uint8_t tiers_then;	/* the entry's tiers while it was told */
};

static void hear(void *arg, const struct kvc_index *idx, uint32_t id,
		 unsigned int tier, bool present)
{
	struct heard *h = arg;

	h->n[tier][present]++;
	h->last = id;
	h->tiers_then = kvc_index_entry(idx, id)->tiers;
}

static void hear_too(void *arg, const struct kvc_index *idx, uint32_t id,
		     unsigned int tier, bool present)
{
	hear(arg, idx, id, tier, present);
}

/*
 * Two observers (the KV events and the fast index) hear every tier turning
 * on and off, once each, the clear before the bit goes; a third does not
 * fit; one removed hears nothing more.
 */
static void observers(void)
{
	struct kvc_index *idx = new_index(0, 3);
	struct heard a = { 0 }, b = { 0 };
	uint8_t k[KS];
	uint32_t id;

	rnd_key(k);
	TAP_CHECK(kvc_index_observe(idx, hear, &a) == 0);
	TAP_CHECK(kvc_index_observe(idx, hear_too, &b) == 0);
	TAP_EXPECT_EQ(kvc_index_observe(idx, hear, &a), -ENOSPC);
	TAP_CHECK(kvc_index_insert(idx, 1, k, NULL, &id) == 0);
	TAP_CHECK(kvc_index_set(idx, id, KVC_TIER_POOL, loc_of(5)) == 0);
	TAP_CHECK(kvc_index_set(idx, id, KVC_TIER_G3, loc_of(6)) == 0);
	/* Moved within a tier: no news. */
	TAP_CHECK(kvc_index_set(idx, id, KVC_TIER_G3, loc_of(7)) == 0);
	TAP_CHECK(a.n[KVC_TIER_POOL][1] == 1 && b.n[KVC_TIER_POOL][1] == 1);
	TAP_CHECK(a.n[KVC_TIER_G3][1] == 1 && b.n[KVC_TIER_G3][1] == 1);
	TAP_CHECK(kvc_index_clear(idx, id, KVC_TIER_G3) == 0);
	TAP_CHECK(a.n[KVC_TIER_G3][0] == 1 && b.last == id);
	TAP_CHECK(b.tiers_then & (1u << KVC_TIER_G3));
	kvc_index_unobserve(idx, hear);
	TAP_CHECK(kvc_index_clear(idx, id, KVC_TIER_POOL) == 0);
	TAP_CHECK(a.n[KVC_TIER_POOL][0] == 0 && b.n[KVC_TIER_POOL][0] == 1);
	/* The freed slot takes another. */
	TAP_CHECK(kvc_index_observe(idx, hear, &a) == 0);
	kvc_index_unobserve(idx, hear);
	kvc_index_unobserve(idx, hear_too);
	kvc_index_destroy(idx);
}

int main(void)
{
	rng_state = 1;
	TAP_RUN(errors_and_identity);
	TAP_RUN(tiers_child_counts_and_remove);
	TAP_RUN(chain_lookup);
	TAP_RUN(colliding_keys);
	TAP_RUN(growth_keeps_ids);
	TAP_RUN(random_sequences_match_the_model);
	TAP_RUN(observers);
	return tap_done();
}
