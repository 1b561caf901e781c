// SPDX-License-Identifier: GPL-2.0
/*
 * Host tests for the policy bench's trace loader and simulator
 * (tests/bench/trace.c, tests/bench/policy_sim.c): the JSONL rules and
 * their errors, and Belady's bound against an exhaustive search of
 * every admission and eviction choice on small random traces, with
 * every policy's simulated hits at or below it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "policy_sim.h"
#include "rand.h"
#include "scratch.h"
#include "tap.h"

static char dir[256];

static int load_text(const char *text, uint32_t max_chain,
		     struct kvc_trace *t, char *err, size_t len)
{
	char path[320];
	FILE *f;

	snprintf(path, sizeof(path), "%s/trace.jsonl", dir);
	f = fopen(path, "w");
	if (!f || fputs(text, f) < 0 || fclose(f))
		return -EIO;
	return kvc_trace_load(path, max_chain, t, err, len);
}

static void loader_reads_the_mooncake_shape(void)
{
	struct kvc_trace t;
	char err[256] = "";

	/* Fields in any order, a fraction of a ms, blank lines. */
	TAP_ASSERT_EQ(load_text(
		"{\"timestamp\": 0, \"input_length\": 1100, \"output_length\": 5, \"hash_ids\": [7, 8, 9]}\n"
		"\n"
		"{\"hash_ids\": [7, 8], \"output_length\": 1, \"input_length\": 1024, \"timestamp\": 12.5}\n"
		"{\"timestamp\": 13, \"input_length\": 600, \"output_length\": 1, \"hash_ids\":[8,9]}\n",
		64, &t, err, sizeof(err)), 0);
	TAP_EXPECT_EQ(t.nr_reqs, 3);
	TAP_EXPECT_EQ(t.nr_accesses, 7);
	/* 7, 8, 9 under 7-8; then 8 and 9 as first blocks: new blocks. */
	TAP_EXPECT_EQ(t.nr_blocks, 5);
	TAP_EXPECT_EQ(t.blocks[3], t.blocks[0]);
	TAP_EXPECT_EQ(t.blocks[4], t.blocks[1]);
	TAP_EXPECT_NE(t.blocks[5], t.blocks[1]);
	TAP_EXPECT_EQ(t.parent[t.blocks[2]], t.blocks[1]);
	TAP_EXPECT_EQ(t.parent[t.blocks[5]], KVC_TRACE_NO_PARENT);
	TAP_EXPECT_EQ(t.depth[t.blocks[2]], 2);
	TAP_EXPECT_EQ(t.req[1].ts_ms, 12);
	/* Tokens: 512, 512, 76; 512, 512; 512, 88. */
	TAP_EXPECT_EQ(kvc_trace_block_tokens(&t.req[0], 2), 76);
	TAP_EXPECT_EQ(kvc_trace_block_tokens(&t.req[1], 1), 512);
	TAP_EXPECT_EQ(t.tokens, 512 + 512 + 76 + 1024 + 512 + 88);
	kvc_trace_free(&t);

	/* Longer than max_chain: cut, and counted. */
	TAP_ASSERT_EQ(load_text("{\"timestamp\": 0, \"input_length\": 2048, \"output_length\": 1, \"hash_ids\": [1, 2, 3, 4]}\n",
				2, &t, err, sizeof(err)), 0);
	TAP_EXPECT_EQ(t.req[0].n, 2);
	TAP_EXPECT_EQ(t.truncated, 1);
	kvc_trace_free(&t);
}

static void loader_refuses_bad_lines(void)
{
	static const char *const bad[] = {
		"{\"input_length\": 1, \"output_length\": 1, \"hash_ids\": [1]}\n",
		"{\"timestamp\": 0, \"input_length\": -1, \"output_length\": 1, \"hash_ids\": [1]}\n",
		"{\"timestamp\": 0, \"input_length\": 99999999999, \"output_length\": 1, \"hash_ids\": [1]}\n",
		"{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1}\n",
		"{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": []}\n",
		"{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [1, \"x\"]}\n",
		"{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [1 2]}\n",
		"{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [99999999999999999999]}\n",
		"not json at all\n",
		"",
	};
	struct kvc_trace t;
	char err[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		TAP_EXPECT_LT(load_text(bad[i], 64, &t, err, sizeof(err)), 0);
		/* The error names the file and the line. */
		TAP_EXPECT_TRUE(strstr(err, "trace.jsonl:") != NULL);
	}
	TAP_EXPECT_EQ(kvc_trace_load("/nonexistent/trace", 64, &t, err,
				     sizeof(err)), -ENOENT);
}

/* ---- Belady against exhaustive search ----------------------------------- */

#define MAXB	9		/* distinct blocks: states are 2^MAXB */
#define MAXA	26		/* accesses */

static uint64_t rng = 42;
static struct kvc_trace tt;
static uint32_t blocks[MAXA], parent[MAXB], depth[MAXB];
static struct kvc_trace_req reqs[MAXA];
static int8_t memo[MAXA + 1][1 << MAXB];
static uint32_t cap;

/* A random forest of chains, and requests that walk it from the roots. */
static void random_trace(void)
{
	uint32_t nb = 0, na = 0;

	memset(&tt, 0, sizeof(tt));
	while (na < MAXA - 4) {
		struct kvc_trace_req *r = &reqs[tt.nr_reqs];
		uint32_t len = 1 + (uint32_t)(kvc_splitmix64(&rng) % 4);
		uint32_t at = KVC_TRACE_NO_PARENT;

		r->off = na;
		r->n = 0;
		r->input_len = len * KVC_TRACE_BLOCK_TOKENS;
		for (uint32_t k = 0; k < len; k++) {
			uint32_t pick = KVC_TRACE_NO_PARENT;

			/* An existing child of at, or a new block. */
			for (uint32_t b = 0; b < nb; b++)
				if (parent[b] == at &&
				    kvc_splitmix64(&rng) % 3)
					pick = b;
			if (pick == KVC_TRACE_NO_PARENT) {
				if (nb == MAXB)
					break;
				parent[nb] = at;
				depth[nb] = at == KVC_TRACE_NO_PARENT ? 0 :
					    depth[at] + 1;
				pick = nb++;
			}
			blocks[na++] = pick;
			r->n++;
			at = pick;
		}
		if (!r->n)
			break;
		tt.nr_reqs++;
	}
	tt.req = reqs;
	tt.blocks = blocks;
	tt.nr_accesses = na;
	tt.nr_blocks = nb;
	tt.parent = parent;
	tt.depth = depth;
}

/*
 * The most prefix hits from access a on with the set cached (every
 * choice: admit a missed block or not, and if full, evict any block).
 */
static int best(uint32_t a, uint32_t set)
{
	size_t r = 0;
	int hits = 0, most;

	if (a == tt.nr_accesses)
		return 0;
	if (memo[a][set] >= 0)
		return memo[a][set];
	while (tt.req[r].off + tt.req[r].n <= a)
		r++;
	/* A request's hits are its leading run, counted at its start. */
	if (a == tt.req[r].off)
		for (uint32_t k = 0; k < tt.req[r].n &&
		     (set >> tt.blocks[a + k] & 1); k++)
			hits++;
	if (set >> tt.blocks[a] & 1) {
		most = best(a + 1, set);
	} else {
		uint32_t b = tt.blocks[a];

		most = best(a + 1, set);		/* bypass */
		if ((uint32_t)__builtin_popcount(set) < cap) {
			int v = best(a + 1, set | 1u << b);

			most = v > most ? v : most;
		} else {
			for (uint32_t x = 0; x < tt.nr_blocks; x++) {
				int v;

				if (!(set >> x & 1))
					continue;
				v = best(a + 1, (set & ~(1u << x)) | 1u << b);
				most = v > most ? v : most;
			}
		}
	}
	memo[a][set] = (int8_t)(hits + most);
	return hits + most;
}

static void belady_is_the_optimum(void)
{
	static const char *const policies[] = {
		"lru", "s3fifo", "cost", "density",
	};
	int checked = 0, bad = 0, above = 0;

	for (int i = 0; i < 300; i++) {
		random_trace();
		for (cap = 1; cap <= 4; cap++) {
			struct kvc_psim_result r = { 0 };

			memset(memo, -1, sizeof(memo));
			TAP_ASSERT_EQ(kvc_psim_belady(&tt, cap, &r), 0);
			if ((int)r.hit_blocks != best(0, 0)) {
				if (!bad)
					printf("# trace %d, %u blocks: belady %llu, optimum %d\n",
					       i, cap,
					       (unsigned long long)r.hit_blocks,
					       best(0, 0));
				bad++;
			}
			checked++;
			/* No policy beats it (the simulator needs 8 blocks). */
			for (size_t p = 0; p < 4 && cap == 4; p++) {
				struct kvc_psim_opts o = {
					.policy = policies[p],
					.capacity = cap, .batch = 1,
				};
				struct kvc_psim_result s = { 0 };

				TAP_ASSERT_EQ(kvc_psim_run(&tt, &o, &s), 0);
				above += s.hit_blocks > r.hit_blocks;
				TAP_EXPECT_EQ(s.blocks, r.blocks);
			}
		}
	}
	printf("# %d traces and capacities checked\n", checked);
	TAP_EXPECT_EQ(bad, 0);
	TAP_EXPECT_EQ(above, 0);
}

int main(void)
{
	if (scratch_make(dir, sizeof(dir), "kvc-policy-sim"))
		return 1;
	TAP_RUN(loader_reads_the_mooncake_shape);
	TAP_RUN(loader_refuses_bad_lines);
	TAP_RUN(belady_is_the_optimum);
	scratch_remove(dir);
	return tap_done();
}
