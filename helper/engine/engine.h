/* SPDX-License-Identifier: GPL-2.0 */
/*
 * engine: the reference engine's request flow on top of libkvcache.
 *
 * One request (engine_request()):
 *   1. keys of the prompt's full blocks (kvcache_ns_keys), lookup of the
 *      longest cached prefix (kvcache_lookup, with each block's tiers);
 *   2. load what can be reused into a staging buffer (kvcache_load) and
 *      import it into the sequence's KV cache. At least the last prompt
 *      token is always computed (its logits are the point), so the reuse
 *      is at most n - 1 tokens, rounded down to a block;
 *   3. prefill the rest: the time to first token (TTFT) runs from the start
 *      of the request to the logits of the last prompt token
 *      (CLOCK_MONOTONIC);
 *   4. after that, store the prompt's full blocks the cache did not give
 *      us (kv_export each, one kvcache_store chained to the block before);
 *   5. optionally decode tokens greedily (argmax).
 * A libkvcache error never fails a request: the engine counts it and falls
 * back to computing (a failed lookup or load is a miss, a failed store is
 * skipped). A NULL namespace disables the cache.
 *
 * Thread safety: an engine is one sequence's state and belongs to one
 * thread at a time; any number of engines may share a model (read-only)
 * and a libkvcache client and namespace (thread-safe).
 */
#ifndef KVC_ENGINE_ENGINE_H
#define KVC_ENGINE_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

struct kvcache_namespace;
struct engine;

struct engine_options {
	const struct model *model;
	/* opened with the model's identity and kv_block_bytes(); NULL: none */
	struct kvcache_namespace *ns;
	/* tokens of the longest request, prompt and decoding; 0: max_ctx */
	uint32_t max_tokens;
	/* threads of a prefill (0 or 1: the caller's only) */
	unsigned int threads;
	/* load from the cache but never store (a reader, a check) */
	int read_only;
};

/* Index of engine_result.tier_blocks[]. */
enum engine_tier { ENGINE_DRAM, ENGINE_G3, ENGINE_G4, ENGINE_TIERS };

struct engine_result {
	double ttft_s;			/* start -> logits of the last token */
	double total_s;			/* the whole request */
	double lookup_s, load_s;	/* keys and lookup; load and import */
	double prefill_s, store_s, decode_s;
	double recompute_s;		/* engine_verify()'s full prefill */
	uint32_t prompt_tokens;
	uint32_t reused_tokens;		/* imported from the cache */
	uint32_t computed_tokens;	/* prefilled */
	uint32_t blocks_total;		/* full blocks of the prompt (keys) */
	uint32_t blocks_reusable;	/* of which at most (n - 1) / tpb */
	uint32_t blocks_matched;	/* the cached prefix lookup found */
	uint32_t blocks_loaded;		/* loaded and imported */
	/* Loaded blocks by where lookup saw them (DRAM first, then G3). */
	uint32_t tier_blocks[ENGINE_TIERS];
	uint32_t blocks_stored;		/* kvcache_store's count */
	uint64_t bytes_loaded, bytes_stored;
	uint32_t errors;		/* libkvcache calls that failed */
	int last_error;			/* the last of them (-errno), or 0 */
	/* The last prompt token's logits (model.vocab floats, the engine's
	 * memory until the next request) and model_hash_floats() of them. */
	const float *logits;
	uint64_t logits_hash;
	/* Tokens decoded greedily after the prompt (the engine's memory). */
	const uint32_t *generated;
	uint32_t generated_count;
};

/*
 * Make an engine. With a namespace, its block size must be the model's
 * kv_block_bytes() for the namespace's tokens per block. Returns 0,
 * -EINVAL or -ENOMEM.
 */
int engine_create(const struct engine_options *opts, struct engine **out);
void engine_free(struct engine *e);

/*
 * Run one request: prompt tokens[0 .. n-1] (n >= 1), then gen_tokens
 * decoded greedily (n + gen_tokens <= max_tokens). Fills *r. Returns 0,
 * or -EINVAL (bad arguments) / -ENOMEM from the model; libkvcache errors
 * are counted in r->errors instead.
 */
int engine_request(struct engine *e, const uint32_t *tokens, uint32_t n,
		   uint32_t gen_tokens, struct engine_result *r);

/*
 * Check reuse: run the request (with whatever the cache holds, storing
 * what it computed, decoding gen_tokens), then recompute the prompt from
 * scratch in a fresh KV cache (r->recompute_s) and compare the last
 * prompt logits byte for byte. Returns 1 if identical, 0 if not, or a
 * negative errno; *r is the request's result.
 */
int engine_verify(struct engine *e, const uint32_t *tokens, uint32_t n,
		  uint32_t gen_tokens, struct engine_result *r);


#endif /* KVC_ENGINE_ENGINE_H */
