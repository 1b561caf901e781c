/* SPDX-License-Identifier: GPL-2.0 */
/*
 * model: the reference engine's decoder, a small Llama-architecture
 * transformer in float32 on the CPU.
 *
 * Token embedding; per layer RMSNorm -> attention (RoPE on q and k,
 * grouped-query attention: n_heads query heads share n_kv_heads KV heads,
 * causal softmax) -> residual, RMSNorm -> SwiGLU MLP
 * (down(silu(gate(x)) * up(x))) -> residual; final RMSNorm and the LM head
 * to vocabulary logits. Weights are drawn from the seed by a fixed PRNG,
 * so every process that builds the same configuration holds bit-identical
 * weights: there is nothing to download, and a cache of its KV is as
 * meaningful across processes as a real model's.
 *
 * Bit-exact reuse: every value (K, V, logits) is computed by the same
 * sequence of float operations whatever the number of tokens a call
 * processes, the split of the work between threads, or whether the KV
 * before it was computed here or imported. So the logits after importing
 * the KV of tokens [0, p) and prefilling [p, n) are bit-identical to those
 * of prefilling [0, n) at once. Reductions run in a fixed order; the
 * vector code is element-wise (no reassociation, no fused multiply-add);
 * exp is the model's own, not libm's, so it does not depend on which
 * variant the C library picks for the CPU.
 *
 * KV block layout (kv_export / kv_import, what the cache tier stores), for
 * a block of T tokens starting at token f:
 *
 *	for each layer l in 0 .. layers-1:
 *		K[T][n_kv_heads][head_dim]	keys of tokens f .. f+T-1
 *		V[T][n_kv_heads][head_dim]	values of the same tokens
 *
 * float32 little-endian, contiguous, no padding: kv_block_bytes(m, T) =
 * layers * 2 * T * n_kv_heads * head_dim * 4 bytes. K is stored after
 * RoPE (rotated for its position), as attention uses it. The layout is
 * named "kvc-ref-v1" in a kvcache namespace identity.
 *
 * Thread safety: a model is read-only once built and may be shared by any
 * number of threads; a kv_cache belongs to one thread at a time.
 */
#ifndef KVC_ENGINE_MODEL_H
#define KVC_ENGINE_MODEL_H

#include <stddef.h>
#include <stdint.h>

struct model_config {
	uint32_t layers;
	uint32_t d_model;	/* width of the residual stream */
	uint32_t n_heads;	/* query heads */
	uint32_t n_kv_heads;	/* KV heads; divides n_heads */
	uint32_t head_dim;	/* even (RoPE rotates pairs) */
	uint32_t ffn_dim;	/* hidden width of the MLP */
	uint32_t vocab;
	float rope_theta;	/* RoPE base, > 1 */
	uint64_t seed;		/* of the weights */
	uint32_t max_ctx;	/* tokens a kv_cache may hold at most */
};

/* Limits of model_config_check(), beyond which a config is nonsense. */
#define MODEL_MAX_LAYERS	1024
#define MODEL_MAX_DIM		65536	/* d_model, n_heads * head_dim */
#define MODEL_MAX_HEAD_DIM	1024
#define MODEL_MAX_FFN		(1u << 18)
#define MODEL_MAX_VOCAB		(1u << 22)
#define MODEL_MAX_CTX		(1u << 22)
#define MODEL_MAX_THREADS	64

struct model;
struct kv_cache;

/*
 * A named configuration into *cfg: "tiny" (for tests: 2 layers, d 64,
 * 4 heads, 2 KV heads, head_dim 16, ffn 128, vocab 256, max_ctx 4096) or
 * "demo" (the demo's model: 8 layers, d 256, 8 heads, 2 KV heads,
 * head_dim 32, ffn 768, vocab 4096, max_ctx 32768; 4 KiB of KV per token,
 * and a 4096-token prefill takes about 1.6 s on 2 cores, 2.7 s on one,
 * on the AVX machine this was tuned on). Both: rope_theta 10000, seed 1.
 * Returns 0, or -ENOENT for an unknown name.
 */
int model_config_named(const char *name, struct model_config *cfg);

/* 0 if *cfg makes sense, else -EINVAL. */
int model_config_check(const struct model_config *cfg);

/*
 * A short text naming the configuration's shape, everything but the seed
 * and max_ctx (which change neither the layout nor, for max_ctx, any
 * value): "L4-D256-H8-KV2-HD32-F768-V4096-R10000". Returns what
 * snprintf() returns.
 */
int model_describe(const struct model_config *cfg, char *buf, size_t len);

/*
 * Build a model: allocates and draws its weights. Returns 0 and the model
 * in *out, -EINVAL (model_config_check()) or -ENOMEM.
 */
int model_create(const struct model_config *cfg, struct model **out);
void model_free(struct model *m);
const struct model_config *model_get_config(const struct model *m);

/* Bytes of weights the model holds. */
size_t model_weight_bytes(const struct model *m);

/* FNV-1a 64 over every weight, in a fixed order: equal models, equal. */
uint64_t model_weights_hash(const struct model *m);

/*
 * A sequence's KV cache for model m, room for max_tokens tokens
 * (1..cfg.max_ctx). It starts empty. Returns 0, -EINVAL or -ENOMEM.
 * A cache fits any model with the same layers, n_kv_heads and head_dim.
 */
int kv_create(const struct model *m, uint32_t max_tokens,
	      struct kv_cache **out);
void kv_free(struct kv_cache *kv);

/* Tokens whose KV the cache holds: positions 0 .. kv_len()-1. */
uint32_t kv_len(const struct kv_cache *kv);
uint32_t kv_max_tokens(const struct kv_cache *kv);

/* Forget every token (the memory stays). */
void kv_reset(struct kv_cache *kv);

/* Bytes of one exported block of tokens_per_block tokens (layout above). */
size_t kv_block_bytes(const struct model *m, uint32_t tokens_per_block);

/*
 * Copy the KV of tokens [first, first + ntokens) out as one block of
 * ntokens tokens in the layout above: kv_block_bytes(m, ntokens) bytes to
 * dst. The tokens must be held. Returns 0 or -EINVAL.
 */
int kv_export(const struct kv_cache *kv, uint32_t first, uint32_t ntokens,
	      void *dst);

/*
 * The reverse: set the KV of tokens [first, first + ntokens) from one
 * block. first may not be beyond kv_len() (no holes); the cache then holds
 * first + ntokens tokens (what followed is dropped). Returns 0 or -EINVAL.
 */
int kv_import(struct kv_cache *kv, uint32_t first, uint32_t ntokens,
	      const void *src);

/*
 * Run tokens[0 .. n-1] at positions start .. start+n-1 through the model,
 * attending to the KV of positions 0 .. start-1 already in kv (computed or
 * imported; start <= kv_len(kv)). Appends their KV (kv then holds
 * start + n tokens) and, if logits is not NULL, writes the vocab logits of
 * the last position there. Decoding one token is a prefill with n = 1.
 *
 * threads: how many threads share the work (0 or 1: the caller's only,
 * at most MODEL_MAX_THREADS); the results do not depend on it. If some
 * threads cannot be started, fewer do the work.
 *
 * Returns 0, or -EINVAL (n = 0, start beyond kv_len(), past the cache's
 * room, a token not below vocab, a cache of another shape), -ENOMEM.
 */
int model_prefill(const struct model *m, struct kv_cache *kv,
		  const uint32_t *tokens, uint32_t start, uint32_t n,
		  float *logits, unsigned int threads);

/* The index of the largest logit (the first of equals). */
uint32_t model_argmax(const float *logits, uint32_t vocab);

/* FNV-1a 64 over the bytes of n floats: compares logits in a line. */
uint64_t model_hash_floats(const float *v, size_t n);

/*
 * The building blocks the model uses, exposed for the unit tests; each is
 * the very code prefill runs.
 *
 * model_rmsnorm: out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i].
 * model_rope: rotate one head vector v (head_dim values) for position pos
 *   with base theta: pairs (v[i], v[i + head_dim/2]) by the angle
 *   pos * theta^(-2i/head_dim) ("rotate half" convention).
 * model_softmax: s[0..n-1] = exp(s - max) / sum, in place; s must have
 *   room for n rounded up to a multiple of 8.
 * model_swiglu: h[i] = silu(g[i]) * u[i], silu(x) = x / (1 + exp(-x)).
 */
#define MODEL_RMS_EPS	1e-5f

void model_rmsnorm(float *out, const float *x, const float *w, uint32_t n,
		   float eps);
void model_rope(float *v, uint32_t head_dim, uint32_t pos, float theta);
void model_softmax(float *s, uint32_t n);
void model_swiglu(float *h, const float *g, const float *u, uint32_t n);

/*
 * The whole model the textbook way, for the tests: the logits of the last
 * of tokens[0 .. n-1], every step in double precision with plain loops
 * over the same weights (no packing tricks, chunks, caches or threads).
 * Slow: small models only. Returns 0, -EINVAL or -ENOMEM.
 */
int model_reference_logits(const struct model *m, const uint32_t *tokens,
			   uint32_t n, double *logits);

#endif /* KVC_ENGINE_MODEL_H */
