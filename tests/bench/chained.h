/* SPDX-License-Identifier: GPL-2.0 */
/*
 * chained: the index benchmarks' baseline, a plain hash table with
 * separate chaining that stores 32-byte keys and nothing else (no parent,
 * no tiers, no locations). It is a lower bound for what kvcached's index
 * (helper/kvcached/index.c) does per key, not its equal; index_bench.c and
 * scale_bench.c measure the index against it.
 */
#ifndef KVC_BENCH_CHAINED_H
#define KVC_BENCH_CHAINED_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CHAINED_KEY	32

struct chained_node {
	uint8_t key[CHAINED_KEY];
	uint32_t next;
};

struct chained {
	uint32_t *head;			/* UINT32_MAX: an empty bucket */
	struct chained_node *nodes;
	size_t mask, n;
};

/* The keys are uniformly random already: their first word will do. */
static inline uint64_t chained_hash(const uint8_t *k)
{
	uint64_t h;

	memcpy(&h, k, 8);
	return h;
}

/* Room for n keys, one bucket per key (rounded up to a power of two). */
static inline int chained_init(struct chained *t, size_t n)
{
	size_t b = 1;

	while (b < n)
		b *= 2;
	t->head = malloc(b * sizeof(*t->head));
	t->nodes = malloc(n * sizeof(*t->nodes));
	if (!t->head || !t->nodes) {
		free(t->head);
		free(t->nodes);
		return -1;
	}
	memset(t->head, 0xff, b * sizeof(*t->head));
	t->mask = b - 1;
	t->n = 0;
	return 0;
}

static inline void chained_free(struct chained *t)
{
	free(t->head);
	free(t->nodes);
}

static inline void chained_add(struct chained *t, const uint8_t *k)
{
	size_t b = chained_hash(k) & t->mask;

	memcpy(t->nodes[t->n].key, k, CHAINED_KEY);
	t->nodes[t->n].next = t->head[b];
	t->head[b] = (uint32_t)t->n++;
}

/* The key's slot, or UINT32_MAX. */
static inline uint32_t chained_find(const struct chained *t, const uint8_t *k)
{
	uint32_t i = t->head[chained_hash(k) & t->mask];

	while (i != UINT32_MAX && memcmp(t->nodes[i].key, k, CHAINED_KEY))
		i = t->nodes[i].next;
	return i;
}

#endif /* KVC_BENCH_CHAINED_H */
