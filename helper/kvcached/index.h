/* SPDX-License-Identifier: GPL-2.0 */
/*
 * index: the prefix index of kvcached (Documentation/design/eviction.md).
 *
 * Maps a block, identified by (namespace id, 32-byte key), to an entry:
 * its namespace, its parent (the entry of the previous block of its chain),
 * where it is present (a bit per tier) and its location in each tier, and
 * how many of its children are present in each tier (for leaf-first
 * eviction, helper/policy.h).
 *
 * Identity. Two namespaces may hold the same key: they are two entries.
 * (Keys already hash the namespace identity, so this only matters for a
 * namespace recreated under another id; per-id permissions must not leak
 * through a shared entry.)
 *
 * Chains. An entry is inserted under its parent's key, which must be in
 * the index, in the same namespace, or under no parent when it is the
 * first block of its chain. A block's key commits to its whole prefix
 * (helper/keys.h), so a key has one parent for life. Entries form a forest
 * per namespace; an entry can only be removed once it has no children and
 * is present in no tier, so a parent never goes before its children.
 *
 * Ids. Entries live in a slab of fixed-size chunks and are named by a u32
 * id, their slab slot. An id and the entry pointer kvc_index_entry()
 * returns stay valid until the entry is removed, across any number of
 * inserts and rehashes; a removed entry's id is reused by a later insert.
 *
 * Memory: an 80-byte entry (the 32-byte key and 48 bytes) plus 5 to 12
 * bytes of hash table, see kvc_index_bytes().
 *
 * Threads: none inside. The caller serializes writers against everything;
 * concurrent readers (find, lookup, entry, next) are safe with no writer.
 *
 * Errors are negative errno values.
 */
#ifndef KVC_INDEX_H
#define KVC_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/kvcache.h>

/* Tiers, lowest (fastest) first. */
#define KVC_TIER_POOL	0	/* the kernel's pinned DRAM pool */
#define KVC_TIER_G3	1	/* local NVMe files */
#define KVC_TIER_G4	2	/* the shared filesystem */
#define KVC_NR_TIERS	3
#define KVC_TIERS_ALL	((1u << KVC_NR_TIERS) - 1)

/* "No entry": the parent of a first block, the end of an iteration. */
#define KVC_ID_NONE	UINT32_MAX

/* Where a block is in one tier: a pool handle, or the tier code's u64. */
union kvc_loc {
	struct kvcache_handle pool;	/* KVC_TIER_POOL */
	uint64_t u64;			/* KVC_TIER_G3, KVC_TIER_G4 */
};

/*
 * An entry, read-only for callers (change it through the functions below).
 * loc[t] is meaningful only while bit t of tiers is set.
 */
struct kvc_entry {
	/* What a lookup compares first, together (mostly one cache line). */
	uint8_t key[KVCACHE_KEY_SIZE];
	uint16_t ns;				/* 1..KVCACHE_NS_MAX; 0: free */
	uint8_t tiers;				/* bit t: present in tier t */
	uint8_t reserved;
	uint32_t parent;			/* id, or KVC_ID_NONE */
	uint32_t nchild;			/* children, present or not */
	uint32_t child_in[KVC_NR_TIERS];	/* children present in tier t */
	union kvc_loc loc[KVC_NR_TIERS];
};

/* One matched key of kvc_index_lookup(). */
struct kvc_match {
	uint32_t id;
	uint8_t tiers;
	union kvc_loc loc[KVC_NR_TIERS];
};

struct kvc_index;

/*
 * Create an empty index sized for about capacity_hint entries (it grows
 * past that). seed keys the hash function: pass a random value in the
 * daemon, so that nobody can choose prompts whose keys pile up in one
 * place of the table; tests pass a fixed one. Returns 0 or -ENOMEM.
 */
int kvc_index_create(struct kvc_index **out, size_t capacity_hint,
		     uint64_t seed);
void kvc_index_destroy(struct kvc_index *idx);

/*
 * Insert (ns, key) with no tier present. parent_key is the key of the
 * previous block of the chain in the same namespace, NULL for a first
 * block. Stores the new id in *id. O(1) amortized (a rehash is O(n)).
 * -EINVAL: ns out of 1..KVCACHE_NS_MAX, or key NULL
 * -EEXIST: (ns, key) is already there (*id gets its id, whatever parent)
 * -ENOENT: parent_key is not in the index in this namespace
 * -ENOMEM: no memory; the index is unchanged
 */
int kvc_index_insert(struct kvc_index *idx, uint32_t ns,
		     const uint8_t key[KVCACHE_KEY_SIZE],
		     const uint8_t *parent_key, uint32_t *id);

/* The id of (ns, key) in *id: 0, or -ENOENT (also for a bad ns). O(1). */
int kvc_index_find(const struct kvc_index *idx, uint32_t ns,
		   const uint8_t key[KVCACHE_KEY_SIZE], uint32_t *id);

/*
 * Longest present prefix of a chain: keys[0] is a first block, keys[i] the
 * child of keys[i-1]. Key i matches when (ns, keys[i]) is in the index,
 * its parent is key i-1's entry (no parent for i = 0), and it is present
 * in one of the tiers of tier_mask (KVC_TIERS_ALL: any tier). Returns how
 * many leading keys match (0..n), and fills out[0..ret-1] unless out is
 * NULL; -EINVAL for a bad ns or mask, or n > INT_MAX. O(ret), with the
 * table reads of the next keys prefetched while one is compared.
 */
int kvc_index_lookup(const struct kvc_index *idx, uint32_t ns,
		     const uint8_t (*keys)[KVCACHE_KEY_SIZE], size_t n,
		     unsigned int tier_mask, struct kvc_match *out);
/*
 * The same, continuing a chain matched before: keys[0] is its last
 * matched key, so its parent is not checked (LOOKUP's CONTINUE flag).
 */
int kvc_index_lookup_more(const struct kvc_index *idx, uint32_t ns,
			  const uint8_t (*keys)[KVCACHE_KEY_SIZE], size_t n,
			  unsigned int tier_mask, struct kvc_match *out);

/* The entry with this id, or NULL if there is none. O(1). */
const struct kvc_entry *kvc_index_entry(const struct kvc_index *idx,
					uint32_t id);

/*
 * Mark the entry present in tier at loc (or move it there if it already
 * was); the parent's child_in[tier] counts it. -ENOENT: no such id;
 * -EINVAL: bad tier. O(1).
 */
int kvc_index_set(struct kvc_index *idx, uint32_t id, unsigned int tier,
		  union kvc_loc loc);

/* The reverse: -ENOENT when the entry is not present in tier. O(1). */
int kvc_index_clear(struct kvc_index *idx, uint32_t id, unsigned int tier);

/*
 * Who hears of an entry entering (present true) or leaving a tier: fn is
 * called by kvc_index_set() when the tier's bit turns on, and by
 * kvc_index_clear() before the entry's location is gone. Up to
 * KVC_INDEX_OBSERVERS at once (the KV events, events.c; the fast index,
 * daemon.c), called in the order they came; an observer must not change
 * the index. kvc_index_observe(): 0, or -ENOSPC when all slots are taken;
 * kvc_index_unobserve() removes fn (a no-op if it is not there).
 */
#define KVC_INDEX_OBSERVERS	2
typedef void (*kvc_index_observer)(void *arg, const struct kvc_index *idx,
				   uint32_t id, unsigned int tier,
				   bool present);
int kvc_index_observe(struct kvc_index *idx, kvc_index_observer fn,
		      void *arg);
void kvc_index_unobserve(struct kvc_index *idx, kvc_index_observer fn);

/*
 * Remove an entry that is present in no tier and has no children
 * (-EBUSY otherwise; -ENOENT: no such id). Its id is free for reuse. O(1)
 * expected (the table closes the gap by shifting the probe run back).
 */
int kvc_index_remove(struct kvc_index *idx, uint32_t id);

/*
 * Remove id if it is present in no tier and has no children, then its
 * parent on the same terms, and so on up the chain: what is left of a
 * chain once its last copies are gone. A no-op for any other entry.
 */
void kvc_index_prune(struct kvc_index *idx, uint32_t id);

/*
 * Iteration in id order: the first entry with id >= from, or KVC_ID_NONE.
 *   for (id = kvc_index_next(idx, 0); id != KVC_ID_NONE;
 *        id = kvc_index_next(idx, id + 1))
 * Removing the current entry while iterating is fine.
 */
uint32_t kvc_index_next(const struct kvc_index *idx, uint32_t from);

/* Number of entries. */
size_t kvc_index_count(const struct kvc_index *idx);

/* Bytes allocated: slab chunks, table, chunk directory, the struct. */
size_t kvc_index_bytes(const struct kvc_index *idx);

/* Chain depth of an entry: 0 for a first block. O(depth). */
uint32_t kvc_index_depth(const struct kvc_index *idx, uint32_t id);

/*
 * A 64-bit fingerprint of (ns, key) under this index's seed, never 0: what
 * the eviction ghost queue and admission filter remember a block by, since
 * ids get reused. kvc_index_fingerprint() is the same for an entry (0 for
 * a bad id).
 */
uint64_t kvc_index_hash(const struct kvc_index *idx, uint32_t ns,
			const uint8_t key[KVCACHE_KEY_SIZE]);
uint64_t kvc_index_fingerprint(const struct kvc_index *idx, uint32_t id);

#endif /* KVC_INDEX_H */
