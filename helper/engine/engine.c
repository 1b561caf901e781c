// SPDX-License-Identifier: GPL-2.0
/*
 * engine: one request's flow through libkvcache and the model (engine.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "engine.h"
#include "libkvcache.h"

struct engine {
	const struct model *model;
	struct kvcache_namespace *ns;
	unsigned int threads;
	int read_only;
	uint32_t max_tokens;
	uint32_t vocab;
	uint32_t tpb;		/* tokens per block (with a namespace) */
	size_t block_bytes;
	struct kv_cache *kv;	/* the request's sequence */
	struct kv_cache *check;	/* engine_verify's recompute, made on use */
	uint8_t *keys;		/* [max_blocks][32] */
	uint32_t *tiers;	/* [max_blocks] */
	uint8_t *stage;		/* [max_blocks][block_bytes], grown on use */
	size_t stage_blocks;
	uint32_t max_blocks;
	float *logits;		/* the prompt's last logits */
	float *step;		/* a decoding step's logits */
	uint32_t *gen;		/* [max_tokens] */
};

void engine_free(struct engine *e)
{
	if (!e)
		return;
	kv_free(e->kv);
	kv_free(e->check);
	free(e->keys);
	free(e->tiers);
	free(e->stage);
	free(e->logits);
	free(e->step);
	free(e->gen);
	free(e);
}

int engine_create(const struct engine_options *o, struct engine **out)
{
	const struct model_config *c;
	struct engine *e;
	int err;

	*out = NULL;
	if (!o || !o->model)
		return -EINVAL;
	c = model_get_config(o->model);
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->model = o->model;
	e->ns = o->ns;
	e->threads = o->threads ? o->threads : 1;
	e->read_only = o->read_only;
	e->max_tokens = o->max_tokens ? o->max_tokens : c->max_ctx;
	e->vocab = c->vocab;
	err = kv_create(o->model, e->max_tokens, &e->kv);
	if (err)
		goto fail;
	if (e->ns) {
		e->tpb = kvcache_ns_tokens_per_block(e->ns);
		e->block_bytes = kvcache_ns_block_bytes(e->ns);
		err = -EINVAL;
		if (!e->tpb || e->block_bytes != kv_block_bytes(o->model,
								 e->tpb))
			goto fail;
		e->max_blocks = e->max_tokens / e->tpb;
		e->keys = malloc(((size_t)e->max_blocks + 1) *
				 KVCACHE_LIB_KEY_SIZE);
		e->tiers = malloc(((size_t)e->max_blocks + 1) *
				  sizeof(*e->tiers));
	}
	e->logits = malloc((size_t)c->vocab * sizeof(float));
	e->step = malloc((size_t)c->vocab * sizeof(float));
	e->gen = malloc((size_t)e->max_tokens * sizeof(uint32_t));
	err = -ENOMEM;
	if (!e->logits || !e->step || !e->gen ||
	    (e->ns && (!e->keys || !e->tiers)))
		goto fail;
	*out = e;
	return 0;
fail:
	engine_free(e);
	return err;
}

/* Room for n blocks in the staging buffer. */
static int stage_reserve(struct engine *e, size_t n)
{
	uint8_t *p;

	if (n <= e->stage_blocks)
		return 0;
	p = realloc(e->stage, n * e->block_bytes);
	if (!p)
		return -ENOMEM;
	e->stage = p;
	e->stage_blocks = n;
	return 0;
}

static void lib_error(struct engine_result *r, int err)
{
	r->errors++;
	r->last_error = err;
}

/*
 * Look the prompt's blocks up and import the reusable cached prefix into
 * e->kv (which starts empty). Returns the number of blocks imported; any
 * failure is a miss from that block on.
 */
static uint32_t load_prefix(struct engine *e, const uint32_t *tokens,
			    uint32_t n, struct engine_result *r)
{
	uint32_t nkeys, want, got, i;
	double t0 = kvc_now();
	int ret;

	nkeys = (uint32_t)kvcache_ns_keys(e->ns, tokens, n, e->keys,
					  e->max_blocks);
	r->blocks_total = nkeys;
	r->blocks_reusable = (n - 1) / e->tpb;
	if (r->blocks_reusable > nkeys)
		r->blocks_reusable = nkeys;
	if (!nkeys)
		goto out;
	ret = kvcache_lookup(e->ns, e->keys, nkeys, e->tiers);
	r->lookup_s = kvc_now() - t0;
	if (ret < 0) {
		lib_error(r, ret);
		goto out;
	}
	r->blocks_matched = (uint32_t)ret;
	want = r->blocks_matched < r->blocks_reusable ? r->blocks_matched :
							 r->blocks_reusable;
	if (!want)
		goto out;
	if (stage_reserve(e, want))
		goto out;
	ret = kvcache_load(e->ns, e->keys, want, e->stage, e->block_bytes);
	if (ret < 0) {
		lib_error(r, ret);
		goto out;
	}
	got = (uint32_t)ret < want ? (uint32_t)ret : want;
	for (i = 0; i < got; i++)
		if (kv_import(e->kv, i * e->tpb, e->tpb,
			      e->stage + (size_t)i * e->block_bytes))
			break;
	r->blocks_loaded = i;
	r->bytes_loaded = (uint64_t)i * e->block_bytes;
	for (uint32_t b = 0; b < i; b++) {
		/* The fastest tier that held it is the one it came from. */
		if (e->tiers[b] & KVCACHE_TIER_DRAM)
			r->tier_blocks[ENGINE_DRAM]++;
		else if (e->tiers[b] & KVCACHE_TIER_G3)
			r->tier_blocks[ENGINE_G3]++;
		else if (e->tiers[b] & KVCACHE_TIER_G4)
			r->tier_blocks[ENGINE_G4]++;
	}
out:
	r->load_s = kvc_now() - t0 - r->lookup_s;
	return r->blocks_loaded;
}

/*
 * Store the prompt's full blocks from first on, chained to block
 * first - 1. The cache may decline some (admission, room): the count
 * says how many it took.
 */
static void store_blocks(struct engine *e, uint32_t first,
			 struct engine_result *r)
{
	uint32_t nkeys = r->blocks_total, i;
	const uint8_t *parent;
	int ret;

	if (first >= nkeys || stage_reserve(e, nkeys - first))
		return;
	for (i = first; i < nkeys; i++)
		if (kv_export(e->kv, i * e->tpb, e->tpb,
			      e->stage + (size_t)(i - first) * e->block_bytes))
			return;
	parent = first ? e->keys + (size_t)(first - 1) * KVCACHE_LIB_KEY_SIZE :
			 NULL;
	ret = kvcache_store(e->ns, parent,
			    e->keys + (size_t)first * KVCACHE_LIB_KEY_SIZE,
			    nkeys - first, e->stage, e->block_bytes);
	if (ret < 0) {
		lib_error(r, ret);
		return;
	}
	r->blocks_stored = (uint32_t)ret;
	r->bytes_stored = (uint64_t)ret * e->block_bytes;
}

int engine_request(struct engine *e, const uint32_t *tokens, uint32_t n,
		   uint32_t gen_tokens, struct engine_result *r)
{
	uint32_t reuse = 0, pos;
	double t0 = kvc_now(), t;
	int err;

	memset(r, 0, sizeof(*r));
	if (!n || n > e->max_tokens || gen_tokens > e->max_tokens - n)
		return -EINVAL;
	r->prompt_tokens = n;
	kv_reset(e->kv);
	if (e->ns)
		reuse = load_prefix(e, tokens, n, r) * e->tpb;

	t = kvc_now();
	err = model_prefill(e->model, e->kv, tokens + reuse, reuse, n - reuse,
			    e->logits, e->threads);
	if (err && reuse) {
		/* Whatever went wrong, computing everything is the answer. */
		kv_reset(e->kv);
		reuse = 0;
		r->blocks_loaded = 0;
		r->bytes_loaded = 0;
		memset(r->tier_blocks, 0, sizeof(r->tier_blocks));
		err = model_prefill(e->model, e->kv, tokens, 0, n, e->logits,
				    e->threads);
	}
	if (err)
		return err;
	r->ttft_s = kvc_now() - t0;
	r->prefill_s = kvc_now() - t;
	r->reused_tokens = reuse;
	r->computed_tokens = n - reuse;
	r->logits = e->logits;
	r->logits_hash = model_hash_floats(e->logits, e->vocab);

	/*
	 * After the first token: publish what was computed, past what the
	 * cache holds already (lookup's prefix, loaded or not).
	 */
	t = kvc_now();
	if (e->ns && !e->read_only)
		store_blocks(e, r->blocks_matched > r->blocks_loaded ?
				r->blocks_matched : r->blocks_loaded, r);
	r->store_s = kvc_now() - t;

	t = kvc_now();
	pos = n;
	for (uint32_t i = 0; i < gen_tokens; i++) {
		const float *l = i ? e->step : e->logits;

		e->gen[i] = model_argmax(l, e->vocab);
		r->generated_count = i + 1;
		/* The last token's own logits are never needed. */
		if (i + 1 == gen_tokens)
			break;
		err = model_prefill(e->model, e->kv, &e->gen[i], pos++, 1,
				    e->step, 1);
		if (err)
			return err;
	}
	r->generated = e->gen;
	r->decode_s = kvc_now() - t;
	r->total_s = kvc_now() - t0;
	return 0;
}

int engine_verify(struct engine *e, const uint32_t *tokens, uint32_t n,
		  uint32_t gen_tokens, struct engine_result *r)
{
	float *full;
	double t;
	int err;

	err = engine_request(e, tokens, n, gen_tokens, r);
	if (err)
		return err;
	if (!e->check) {
		err = kv_create(e->model, e->max_tokens, &e->check);
		if (err)
			return err;
	}
	full = malloc((size_t)e->vocab * sizeof(float));
	if (!full)
		return -ENOMEM;
	kv_reset(e->check);
	t = kvc_now();
	err = model_prefill(e->model, e->check, tokens, 0, n, full,
			    e->threads);
	r->recompute_s = kvc_now() - t;
	if (!err)
		err = !memcmp(full, e->logits, (size_t)e->vocab *
						sizeof(float));
	free(full);
	return err;
}
