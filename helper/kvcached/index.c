// SPDX-License-Identifier: GPL-2.0
/*
 * The prefix index (index.h, Documentation/design/eviction.md).
 *
 * Two structures:
 *  - the slab: entries in chunks of CHUNK entries that never move, found by
 *    id through a small directory of chunk pointers. Growing adds a chunk,
 *    so ids and entry pointers survive it. Free ids form a list threaded
 *    through the free entries' parent field.
 *  - the table: open addressing with linear probing over slots that hold
 *    an 8-bit tag (0: empty) and a u32 id. Slots come in groups of 8 that
 *    keep their tags next to their ids (40 bytes), so a probe usually
 *    reads one cache line of table and, thanks to the tag, the one entry
 *    it is after. Deletion shifts the rest of the probe run back into the
 *    hole (no tombstones), so lookups never slow down with churn.
 *
 * The table doubles when it would pass 7/8 full: 5 bytes a slot is 5.7 to
 * 11.4 bytes a key, and a successful probe reads 1.5 to 4.5 slots.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "index.h"
#include "rand.h"

#define CHUNK_SHIFT	12
#define CHUNK		(1u << CHUNK_SHIFT)	/* entries per slab chunk */
#define GROUP		8			/* slots per table group */
#define MIN_SLOTS	64

_Static_assert(sizeof(struct kvc_entry) == 80, "entry layout changed");
_Static_assert(sizeof(union kvc_loc) == 8, "loc is a u64");

struct kvc_group {
	uint8_t tag[GROUP];
	uint32_t id[GROUP];
};

struct kvc_index {
	uint64_t seed;
	struct kvc_entry **chunks;	/* directory: chunk_cap pointers */
	size_t nchunks, chunk_cap;
	uint32_t next_id;		/* ids below this were handed out */
	uint32_t free_head;		/* first free id below next_id */
	size_t count;
	struct kvc_group *groups;
	size_t nslots;			/* power of two, >= MIN_SLOTS */
	/* kvc_index_observe(); unused slots are NULL */
	kvc_index_observer observer[KVC_INDEX_OBSERVERS];
	void *observer_arg[KVC_INDEX_OBSERVERS];
};

/*
 * Keys are SHA-256 output, so 16 of their bytes are as good as all 32 for
 * placement (the whole key is compared). The seed is mixed in before the
 * bits are spread, so positions are unpredictable without it.
 */
uint64_t kvc_index_hash(const struct kvc_index *idx, uint32_t ns,
			const uint8_t key[KVCACHE_KEY_SIZE])
{
	uint64_t a, b, h;

	memcpy(&a, key, 8);
	memcpy(&b, key + 8, 8);
	h = kvc_mix64(a ^ idx->seed ^ ((uint64_t)ns << 40)) +
	    kvc_mix64(b ^ (idx->seed >> 1));
	return h ? h : 1;
}

/* The top byte tags a slot (the low bits pick it); never 0 (empty). */
static uint8_t tag_of(uint64_t h)
{
	uint8_t t = (uint8_t)(h >> 56);

	return t ? t : 1;
}

static struct kvc_entry *slab(const struct kvc_index *idx, uint32_t id)
{
	return &idx->chunks[id >> CHUNK_SHIFT][id & (CHUNK - 1)];
}

static uint8_t *slot_tag(const struct kvc_index *idx, size_t s)
{
	return &idx->groups[s / GROUP].tag[s % GROUP];
}

static uint32_t *slot_id(const struct kvc_index *idx, size_t s)
{
	return &idx->groups[s / GROUP].id[s % GROUP];
}

static int ns_ok(uint32_t ns)
{
	return ns >= 1 && ns <= KVCACHE_NS_MAX;
}

/*
 * Walk the probe run of h. Returns the id of (ns, key), or KVC_ID_NONE
 * with *slot at the empty slot that ends the run (where it would go).
 */
static uint32_t probe(const struct kvc_index *idx, uint64_t h, uint32_t ns,
		      const uint8_t *key, size_t *slot)
{
	size_t mask = idx->nslots - 1, s = h & mask;
	uint8_t tag = tag_of(h);

	for (;; s = (s + 1) & mask) {
		uint8_t t = *slot_tag(idx, s);
		const struct kvc_entry *e;

		if (!t)
			break;
		if (t != tag)
			continue;
		e = slab(idx, *slot_id(idx, s));
		if (e->ns == ns && !memcmp(e->key, key, KVCACHE_KEY_SIZE)) {
			*slot = s;
			return *slot_id(idx, s);
		}
	}
	*slot = s;
	return KVC_ID_NONE;
}

/* Move every live entry into a table of nslots; -ENOMEM leaves it as is. */
static int rehash(struct kvc_index *idx, size_t nslots)
{
	struct kvc_group *old = idx->groups;
	struct kvc_group *g = calloc(nslots / GROUP, sizeof(*g));
	size_t mask = nslots - 1;
	uint32_t id;

	if (!g)
		return -ENOMEM;
	idx->groups = g;
	idx->nslots = nslots;
	/* In id order: the slab is read sequentially, the table at random. */
	for (id = 0; id < idx->next_id; id++) {
		const struct kvc_entry *e = slab(idx, id);
		uint64_t h;
		size_t s;

		if (!e->ns)
			continue;
		h = kvc_index_hash(idx, e->ns, e->key);
		for (s = h & mask; *slot_tag(idx, s); s = (s + 1) & mask)
			;
		*slot_tag(idx, s) = tag_of(h);
		*slot_id(idx, s) = id;
	}
	free(old);
	return 0;
}

int kvc_index_create(struct kvc_index **out, size_t capacity_hint,
		     uint64_t seed)
{
	struct kvc_index *idx = calloc(1, sizeof(*idx));
	size_t nslots = MIN_SLOTS;

	*out = NULL;
	if (!idx)
		return -ENOMEM;
	while (nslots / 8 * 7 < capacity_hint && nslots < SIZE_MAX / 4)
		nslots *= 2;
	idx->seed = seed;
	idx->free_head = KVC_ID_NONE;
	idx->groups = calloc(nslots / GROUP, sizeof(*idx->groups));
	if (!idx->groups) {
		free(idx);
		return -ENOMEM;
	}
	idx->nslots = nslots;
	*out = idx;
	return 0;
}

void kvc_index_destroy(struct kvc_index *idx)
{
	size_t i;

	if (!idx)
		return;
	for (i = 0; i < idx->nchunks; i++)
		free(idx->chunks[i]);
	free(idx->chunks);
	free(idx->groups);
	free(idx);
}

/* A free id, from the free list or a new slab slot; KVC_ID_NONE: ENOMEM. */
static uint32_t alloc_id(struct kvc_index *idx)
{
	uint32_t id = idx->free_head;

	if (id != KVC_ID_NONE) {
		idx->free_head = slab(idx, id)->parent;
		return id;
	}
	if (idx->next_id == KVC_ID_NONE)
		return KVC_ID_NONE;
	if ((idx->next_id >> CHUNK_SHIFT) == idx->nchunks) {
		struct kvc_entry *c;

		if (idx->nchunks == idx->chunk_cap) {
			size_t cap = idx->chunk_cap ? 2 * idx->chunk_cap : 16;
			struct kvc_entry **d;

			d = realloc(idx->chunks, cap * sizeof(*d));
			if (!d)
				return KVC_ID_NONE;
			idx->chunks = d;
			idx->chunk_cap = cap;
		}
		/* calloc: ns 0 marks the chunk's slots free for iteration. */
		c = calloc(CHUNK, sizeof(*c));
		if (!c)
			return KVC_ID_NONE;
		idx->chunks[idx->nchunks++] = c;
	}
	return idx->next_id++;
}

int kvc_index_insert(struct kvc_index *idx, uint32_t ns,
		     const uint8_t key[KVCACHE_KEY_SIZE],
		     const uint8_t *parent_key, uint32_t *id)
{
	uint32_t pid = KVC_ID_NONE, nid;
	struct kvc_entry *e;
	uint64_t h;
	size_t s;

	if (!ns_ok(ns) || !key)
		return -EINVAL;
	h = kvc_index_hash(idx, ns, key);
	nid = probe(idx, h, ns, key, &s);
	if (nid != KVC_ID_NONE) {
		*id = nid;
		return -EEXIST;
	}
	if (parent_key) {
		size_t ps;

		pid = probe(idx, kvc_index_hash(idx, ns, parent_key), ns,
			    parent_key, &ps);
		if (pid == KVC_ID_NONE)
			return -ENOENT;
	}
	if (idx->count + 1 > idx->nslots / 8 * 7) {
		if (idx->nslots > SIZE_MAX / 2 / sizeof(struct kvc_group) ||
		    rehash(idx, idx->nslots * 2))
			return -ENOMEM;
		probe(idx, h, ns, key, &s);
	}
	nid = alloc_id(idx);
	if (nid == KVC_ID_NONE)
		return -ENOMEM;
	e = slab(idx, nid);
	memset(e, 0, sizeof(*e));
	memcpy(e->key, key, KVCACHE_KEY_SIZE);
	e->ns = (uint16_t)ns;
	e->parent = pid;
	if (pid != KVC_ID_NONE)
		slab(idx, pid)->nchild++;
	*slot_tag(idx, s) = tag_of(h);
	*slot_id(idx, s) = nid;
	idx->count++;
	*id = nid;
	return 0;
}

int kvc_index_find(const struct kvc_index *idx, uint32_t ns,
		   const uint8_t key[KVCACHE_KEY_SIZE], uint32_t *id)
{
	size_t s;

	if (!ns_ok(ns) || !key)
		return -ENOENT;
	*id = probe(idx, kvc_index_hash(idx, ns, key), ns, key, &s);
	return *id == KVC_ID_NONE ? -ENOENT : 0;
}

/*
 * How far ahead lookup() hashes keys and prefetches their table groups: 8
 * misses in flight is about what a core sustains, and the keys of a chain
 * are all known up front.
 */
#define LOOKAHEAD	8

static int index_lookup(const struct kvc_index *idx, uint32_t ns,
			const uint8_t (*keys)[KVCACHE_KEY_SIZE], size_t n,
			unsigned int tier_mask, struct kvc_match *out,
			bool more)
{
	uint64_t hs[LOOKAHEAD];
	size_t mask = idx->nslots - 1, i;
	uint32_t prev = KVC_ID_NONE;

	if (!ns_ok(ns) || !tier_mask || (tier_mask & ~KVC_TIERS_ALL) ||
	    n > INT_MAX)
		return -EINVAL;
	for (i = 0; i < n && i < LOOKAHEAD; i++) {
		hs[i] = kvc_index_hash(idx, ns, keys[i]);
		__builtin_prefetch(&idx->groups[(hs[i] & mask) / GROUP]);
	}
	for (i = 0; i < n; i++) {
		uint64_t h = hs[i % LOOKAHEAD];
		const struct kvc_entry *e;
		uint32_t id;
		size_t s;

		if (i + LOOKAHEAD < n) {
			uint64_t h2 = kvc_index_hash(idx, ns, keys[i + LOOKAHEAD]);

			hs[i % LOOKAHEAD] = h2;
			__builtin_prefetch(&idx->groups[(h2 & mask) / GROUP]);
		}
		id = probe(idx, h, ns, keys[i], &s);
		if (id == KVC_ID_NONE)
			break;
		e = slab(idx, id);
		if ((e->parent != prev && (i || !more)) ||
		    !(e->tiers & tier_mask))
			break;
		if (out) {
			out[i].id = id;
			out[i].tiers = e->tiers;
			memcpy(out[i].loc, e->loc, sizeof(e->loc));
		}
		prev = id;
	}
	return (int)i;
}

int kvc_index_lookup(const struct kvc_index *idx, uint32_t ns,
		     const uint8_t (*keys)[KVCACHE_KEY_SIZE], size_t n,
		     unsigned int tier_mask, struct kvc_match *out)
{
	return index_lookup(idx, ns, keys, n, tier_mask, out, false);
}

int kvc_index_lookup_more(const struct kvc_index *idx, uint32_t ns,
			  const uint8_t (*keys)[KVCACHE_KEY_SIZE], size_t n,
			  unsigned int tier_mask, struct kvc_match *out)
{
	return index_lookup(idx, ns, keys, n, tier_mask, out, true);
}

const struct kvc_entry *kvc_index_entry(const struct kvc_index *idx,
					uint32_t id)
{
	const struct kvc_entry *e;

	if (id >= idx->next_id)
		return NULL;
	e = slab(idx, id);
	return e->ns ? e : NULL;
}

/* Writable entry for id, NULL if none. */
static struct kvc_entry *live(struct kvc_index *idx, uint32_t id)
{
	return (struct kvc_entry *)kvc_index_entry(idx, id);
}

static void tell(struct kvc_index *idx, uint32_t id, unsigned int tier,
		 bool present)
{
	for (unsigned int i = 0; i < KVC_INDEX_OBSERVERS; i++)
		if (idx->observer[i])
			idx->observer[i](idx->observer_arg[i], idx, id, tier,
					 present);
}

int kvc_index_set(struct kvc_index *idx, uint32_t id, unsigned int tier,
		  union kvc_loc loc)
{
	struct kvc_entry *e = live(idx, id);

	if (tier >= KVC_NR_TIERS)
		return -EINVAL;
	if (!e)
		return -ENOENT;
	e->loc[tier] = loc;
	if (!(e->tiers & (1u << tier))) {
		e->tiers |= (uint8_t)(1u << tier);
		if (e->parent != KVC_ID_NONE)
			slab(idx, e->parent)->child_in[tier]++;
		tell(idx, id, tier, true);
	}
	return 0;
}

int kvc_index_observe(struct kvc_index *idx, kvc_index_observer fn,
		      void *arg)
{
	for (unsigned int i = 0; i < KVC_INDEX_OBSERVERS; i++)
		if (!idx->observer[i]) {
			idx->observer[i] = fn;
			idx->observer_arg[i] = arg;
			return 0;
		}
	return -ENOSPC;
}

void kvc_index_unobserve(struct kvc_index *idx, kvc_index_observer fn)
{
	for (unsigned int i = 0; i < KVC_INDEX_OBSERVERS; i++)
		if (idx->observer[i] == fn) {
			idx->observer[i] = NULL;
			idx->observer_arg[i] = NULL;
		}
}

int kvc_index_clear(struct kvc_index *idx, uint32_t id, unsigned int tier)
{
	struct kvc_entry *e = live(idx, id);

	if (tier >= KVC_NR_TIERS)
		return -EINVAL;
	if (!e || !(e->tiers & (1u << tier)))
		return -ENOENT;
	tell(idx, id, tier, false);
	e->tiers &= (uint8_t)~(1u << tier);
	e->loc[tier].u64 = 0;
	if (e->parent != KVC_ID_NONE)
		slab(idx, e->parent)->child_in[tier]--;
	return 0;
}

/*
 * Empty slot hole, then shift back every later entry of the run that may
 * sit there: one whose home is not in (hole, j] cyclically.
 */
static void table_delete(struct kvc_index *idx, size_t hole)
{
	size_t mask = idx->nslots - 1, j = hole;

	for (;;) {
		const struct kvc_entry *e;
		size_t home;

		j = (j + 1) & mask;
		if (!*slot_tag(idx, j))
			break;
		e = slab(idx, *slot_id(idx, j));
		home = kvc_index_hash(idx, e->ns, e->key) & mask;
		if (((j - home) & mask) >= ((j - hole) & mask)) {
			*slot_tag(idx, hole) = *slot_tag(idx, j);
			*slot_id(idx, hole) = *slot_id(idx, j);
			hole = j;
		}
	}
	*slot_tag(idx, hole) = 0;
}

int kvc_index_remove(struct kvc_index *idx, uint32_t id)
{
	struct kvc_entry *e = live(idx, id);
	size_t s;

	if (!e)
		return -ENOENT;
	if (e->tiers || e->nchild)
		return -EBUSY;
	probe(idx, kvc_index_hash(idx, e->ns, e->key), e->ns, e->key, &s);
	table_delete(idx, s);
	if (e->parent != KVC_ID_NONE)
		slab(idx, e->parent)->nchild--;
	memset(e, 0, sizeof(*e));
	e->parent = idx->free_head;
	idx->free_head = id;
	idx->count--;
	return 0;
}

uint32_t kvc_index_next(const struct kvc_index *idx, uint32_t from)
{
	for (; from < idx->next_id; from++)
		if (slab(idx, from)->ns)
			return from;
	return KVC_ID_NONE;
}

size_t kvc_index_count(const struct kvc_index *idx)
{
	return idx->count;
}

size_t kvc_index_bytes(const struct kvc_index *idx)
{
	return sizeof(*idx) + idx->chunk_cap * sizeof(*idx->chunks) +
	       idx->nchunks * CHUNK * sizeof(struct kvc_entry) +
	       idx->nslots / GROUP * sizeof(struct kvc_group);
}

uint32_t kvc_index_depth(const struct kvc_index *idx, uint32_t id)
{
	const struct kvc_entry *e = kvc_index_entry(idx, id);
	uint32_t d = 0;

	while (e && e->parent != KVC_ID_NONE) {
		e = slab(idx, e->parent);
		d++;
	}
	return d;
}

uint64_t kvc_index_fingerprint(const struct kvc_index *idx, uint32_t id)
{
	const struct kvc_entry *e = kvc_index_entry(idx, id);

	return e ? kvc_index_hash(idx, e->ns, e->key) : 0;
}

void kvc_index_prune(struct kvc_index *idx, uint32_t id)
{
	while (id != KVC_ID_NONE) {
		const struct kvc_entry *e = kvc_index_entry(idx, id);
		uint32_t parent;

		if (!e || e->tiers || e->nchild)
			return;
		parent = e->parent;
		kvc_index_remove(idx, id);
		id = parent;
	}
}
