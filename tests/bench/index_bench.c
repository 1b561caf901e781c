// SPDX-License-Identifier: GPL-2.0
/*
 * Prefix index benchmark (helper/kvcached/index.c), in process, no device needed.
 * The index holds N keys in chains of 128 blocks (N = 1M, then 10M), all
 * present in the pool tier. Figures, each against a baseline measured in
 * the same process, interleaved run by run:
 *
 *   lookup_N       kvc_index_find() of one random present key, against the
 *                  same lookup in a textbook chained hash table of the same
 *                  keys (u32 bucket heads, nodes of key + next in one
 *                  array, hashed by the key's first 8 bytes): the structure
 *                  one would write first, at the same load (1 key/bucket).
 *                  It stores nothing but the keys, so it is a lower bound
 *                  on the work, not an equal: ratio ~1 means the index
 *                  costs what the simplest table costs.
 *   prefix128_N    kvc_index_lookup() of a whole 128-key chain, against
 *                  128 baseline lookups one after the other.
 *   bytes_key_N    kvc_index_bytes() / N, not timed, against the budget:
 *                  the 32-byte key plus 64 bytes (ratio <= 1: within it).
 *
 * Output: CSV lines "metric,run,kvcache_ns,baseline_ns,ratio" on stdout
 * (bytes_key_N: bytes in both columns), a summary on stderr.
 * Usage: index_bench [RUNS [MAX_KEYS]]   (defaults 3, 10000000)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "chained.h"
#include "index.h"

#define KS		KVCACHE_KEY_SIZE
#define CHAIN		128
#define NS		1
#define QUERIES		(1u << 20)	/* single-key queries, 32 MiB */
#define PREFIXES	2048		/* chain queries, 8 MiB */
#define MIN_NS		200000000ULL	/* per measurement */

/* The key of block d of chain c: random-looking, like SHA-256 output. */
static void key_of(uint64_t c, uint64_t d, uint8_t *k)
{
	for (uint64_t j = 0; j < 4; j++) {
		uint64_t v = kvc_mix64(((c * CHAIN + d) << 2 | j) +
				       KVC_GOLDEN_GAMMA);

		memcpy(k + 8 * j, &v, 8);
	}
}

static void die(const char *what)
{
	fprintf(stderr, "index_bench: %s\n", what);
	exit(1);
}

/* ---- one size ------------------------------------------------------------ */

static void bench(size_t n, int runs)
{
	size_t chains = n / CHAIN, i;
	uint8_t (*q)[KS] = malloc((size_t)QUERIES * KS);
	uint8_t (*pq)[KS] = malloc((size_t)PREFIXES * CHAIN * KS);
	struct kvc_match *out = malloc(CHAIN * sizeof(*out));
	union kvc_loc loc = { .u64 = 0 };
	struct kvc_index *idx;
	struct chained t;
	volatile uint64_t sink = 0;
	uint64_t t0, t1, rng = 12345;
	double bytes;
	char sz[32];
	int run;

	/* Named by the size asked for; whole chains make it a little less. */
	if (n % 1000000)
		snprintf(sz, sizeof(sz), "%zuk", n / 1000);
	else
		snprintf(sz, sizeof(sz), "%zuM", n / 1000000);
	n = chains * CHAIN;
	if (!q || !pq || !out || kvc_index_create(&idx, n, 0x5eed))
		die("no memory");
	if (chained_init(&t, n))
		die("no memory for the baseline");
	t0 = now_ns();
	for (size_t c = 0; c < chains; c++) {
		uint8_t k[KS], parent[KS];

		for (size_t d = 0; d < CHAIN; d++) {
			uint32_t id;

			key_of(c, d, k);
			if (kvc_index_insert(idx, NS, k, d ? parent : NULL, &id) ||
			    kvc_index_set(idx, id, KVC_TIER_POOL, loc))
				die("insert failed");
			chained_add(&t, k);
			memcpy(parent, k, KS);
		}
	}
	fprintf(stderr, "# %zu keys inserted in %.2f s (both tables)\n", n,
		(double)(now_ns() - t0) / 1e9);
	for (i = 0; i < QUERIES; i++) {
		rng = kvc_mix64(rng + i);
		key_of(rng % chains, (rng >> 32) % CHAIN, q[i]);
	}
	for (i = 0; i < PREFIXES; i++) {
		uint64_t c = kvc_mix64(rng + 7 * i) % chains;

		for (size_t d = 0; d < CHAIN; d++)
			key_of(c, d, pq[i * CHAIN + d]);
	}
	bytes = (double)kvc_index_bytes(idx) / (double)n;
	printf("bytes_key_%s,0,%.1f,%d,%.3f\n", sz, bytes, KS + 64,
	       bytes / (KS + 64));
	fprintf(stderr, "# %zu keys: %.1f bytes per key, %.1f beyond the key\n",
		n, bytes, bytes - KS);

	for (run = 0; run < runs; run++) {
		double kv, base;
		size_t m;

		t0 = now_ns();
		for (m = 0; (t1 = now_ns()) - t0 < MIN_NS;)
			for (i = 0; i < 4096; i++, m++) {
				uint32_t id;

				if (kvc_index_find(idx, NS, q[m % QUERIES], &id))
					die("lookup missed");
				sink += id;
			}
		kv = (double)(t1 - t0) / (double)m;
		t0 = now_ns();
		for (m = 0; (t1 = now_ns()) - t0 < MIN_NS;)
			for (i = 0; i < 4096; i++, m++)
				sink += chained_find(&t, q[m % QUERIES]);
		base = (double)(t1 - t0) / (double)m;
		printf("lookup_%s,%d,%.1f,%.1f,%.3f\n", sz, run, kv, base,
		       kv / base);
		fprintf(stderr, "# lookup: %.2f M/s (baseline %.2f M/s)\n",
			1e3 / kv, 1e3 / base);

		t0 = now_ns();
		for (m = 0; (t1 = now_ns()) - t0 < MIN_NS; m++) {
			int r = kvc_index_lookup(idx, NS,
				(const uint8_t (*)[KS])pq[(m % PREFIXES) * CHAIN],
				CHAIN, KVC_TIERS_ALL, out);

			if (r != CHAIN)
				die("prefix lookup short");
			sink += out[CHAIN - 1].id;
		}
		kv = (double)(t1 - t0) / (double)m;
		t0 = now_ns();
		for (m = 0; (t1 = now_ns()) - t0 < MIN_NS; m++) {
			const uint8_t (*keys)[KS] = (const uint8_t (*)[KS])
				pq[(m % PREFIXES) * CHAIN];

			for (i = 0; i < CHAIN; i++) {
				uint32_t id = chained_find(&t, keys[i]);

				if (id == UINT32_MAX)
					break;
				sink += id;
			}
		}
		base = (double)(t1 - t0) / (double)m;
		printf("prefix128_%s,%d,%.1f,%.1f,%.3f\n", sz, run, kv, base,
		       kv / base);
		fprintf(stderr, "# prefix128: %.2f us (baseline %.2f us)\n",
			kv / 1e3, base / 1e3);
		fflush(stdout);
	}
	kvc_index_destroy(idx);
	chained_free(&t);
	free(q);
	free(pq);
	free(out);
	(void)sink;
}

int main(int argc, char **argv)
{
	int runs = argc > 1 ? atoi(argv[1]) : 3;
	size_t max = argc > 2 ? strtoull(argv[2], NULL, 0) : 10000000;

	printf("metric,run,kvcache_ns,baseline_ns,ratio\n");
	bench(max < 1000000 ? max : 1000000, runs);
	if (max >= 10000000)
		bench(10000000, runs);
	return 0;
}
