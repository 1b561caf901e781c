// SPDX-License-Identifier: GPL-2.0
/*
 * Host tests for helper/engine/model.c, the reference engine's decoder.
 *
 * The property the cache tier rests on is bit-exact reuse: the logits
 * after importing the KV of tokens [0, p) and prefilling [p, n) equal,
 * byte for byte, those of prefilling [0, n) at once, for every p, whatever
 * the thread count, and so do the tokens decoded after. The building
 * blocks (RMSNorm, RoPE, softmax, SwiGLU) are checked against the
 * textbook formulas in double precision, and bad configurations and
 * arguments against their errors.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model.h"
#include "rand.h"
#include "tap.h"

#define N_TOKENS	130	/* two chunks and a bit; blocks of 16 */
#define BLOCK		16
#define GEN		6

/* A deterministic prompt of n tokens below vocab. */
static void prompt(uint32_t *t, uint32_t n, uint32_t vocab, uint32_t salt)
{
	uint64_t x = KVC_GOLDEN_GAMMA * (salt + 1);

	for (uint32_t i = 0; i < n; i++) {
		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		t[i] = (uint32_t)((x * 0x2545f4914f6cdd1dull) >> 33) % vocab;
	}
}

static struct model *make(const char *name)
{
	struct model_config c;
	struct model *m = NULL;

	if (model_config_named(name, &c) || model_create(&c, &m))
		return NULL;
	return m;
}

/*
 * Import tokens [0, p) from the exported blocks of src into kv, block by
 * block and a shorter last one, as an engine does after a cache load.
 */
static int import_prefix(const struct model *m, struct kv_cache *src,
			 struct kv_cache *kv, uint32_t p)
{
	void *buf = malloc(kv_block_bytes(m, BLOCK));
	int err = 0;

	if (!buf)
		return -ENOMEM;
	kv_reset(kv);
	for (uint32_t f = 0; f < p && !err; f += BLOCK) {
		uint32_t nt = p - f < BLOCK ? p - f : BLOCK;

		err = kv_export(src, f, nt, buf);
		if (!err)
			err = kv_import(kv, f, nt, buf);
	}
	free(buf);
	return err;
}

static void weights_are_deterministic(void)
{
	struct model_config c;
	struct model *a = make("tiny"), *b = make("tiny"), *d = NULL;
	uint32_t tok[40];
	float la[256], lb[256];
	struct kv_cache *ka = NULL, *kb = NULL;

	TAP_ASSERT_TRUE(a && b);
	TAP_CHECK(model_weights_hash(a) == model_weights_hash(b));
	TAP_CHECK(model_weight_bytes(a) == model_weight_bytes(b));
	TAP_CHECK(model_weight_bytes(a) > 0);

	/* Another seed, other weights. */
	c = *model_get_config(a);
	c.seed = 2;
	TAP_CHECK(model_create(&c, &d) == 0);
	if (d)
		TAP_CHECK(model_weights_hash(d) != model_weights_hash(a));

	/* Two instances, the same logits. */
	prompt(tok, 40, 256, 1);
	TAP_ASSERT_TRUE(kv_create(a, 64, &ka) == 0 &&
			kv_create(b, 64, &kb) == 0);
	TAP_CHECK(model_prefill(a, ka, tok, 0, 40, la, 1) == 0);
	TAP_CHECK(model_prefill(b, kb, tok, 0, 40, lb, 1) == 0);
	TAP_CHECK(!memcmp(la, lb, sizeof(la)));
	TAP_CHECK(kv_len(ka) == 40);
	for (int i = 0; i < 256; i++)
		TAP_CHECK(isfinite(la[i]));
	kv_free(ka);
	kv_free(kb);
	model_free(a);
	model_free(b);
	model_free(d);
}

/* The core property, for every split point of a 130-token prompt. */
static void reuse_is_bit_exact_at_every_split(void)
{
	struct model *m = make("tiny");
	struct kv_cache *full = NULL, *kv = NULL;
	uint32_t tok[N_TOKENS], bad = 0, p;
	float ref[256], got[256];

	TAP_ASSERT_TRUE(m);
	TAP_ASSERT_EQ(kv_create(m, N_TOKENS, &full), 0);
	TAP_ASSERT_EQ(kv_create(m, N_TOKENS, &kv), 0);
	prompt(tok, N_TOKENS, 256, 2);
	TAP_CHECK(model_prefill(m, full, tok, 0, N_TOKENS, ref, 1) == 0);

	/* Exported and imported into a fresh cache, then the rest. */
	for (p = 0; p < N_TOKENS; p++) {
		if (import_prefix(m, full, kv, p) ||
		    model_prefill(m, kv, tok + p, p, N_TOKENS - p, got, 1) ||
		    memcmp(ref, got, sizeof(ref))) {
			printf("# import split at %u differs\n", p);
			bad++;
		}
	}
	TAP_CHECK(bad == 0);

	/* Computed in two and in three calls in one cache. */
	for (p = 1; p < N_TOKENS; p += 3) {
		uint32_t q = p + (N_TOKENS - p) / 2;

		kv_reset(kv);
		if (model_prefill(m, kv, tok, 0, p, NULL, 1) ||
		    model_prefill(m, kv, tok + p, p, N_TOKENS - p, got, 1) ||
		    memcmp(ref, got, sizeof(ref))) {
			printf("# computed split at %u differs\n", p);
			bad++;
		}
		kv_reset(kv);
		if (q == p || q >= N_TOKENS)
			continue;
		if (model_prefill(m, kv, tok, 0, p, NULL, 1) ||
		    model_prefill(m, kv, tok + p, p, q - p, NULL, 2) ||
		    model_prefill(m, kv, tok + q, q, N_TOKENS - q, got, 1) ||
		    memcmp(ref, got, sizeof(ref))) {
			printf("# splits at %u, %u differ\n", p, q);
			bad++;
		}
	}
	TAP_CHECK(bad == 0);

	/* One token at a time, like a decoder walking the whole prompt. */
	kv_reset(kv);
	for (p = 0; p < N_TOKENS; p++)
		TAP_CHECK(model_prefill(m, kv, tok + p, p, 1, got, 1) == 0);
	TAP_CHECK(!memcmp(ref, got, sizeof(ref)));
	kv_free(full);
	kv_free(kv);
	model_free(m);
}

/* The KV itself, not only the logits, is the same both ways. */
static void imported_and_computed_kv_match(void)
{
	struct model *m = make("tiny");
	struct kv_cache *a = NULL, *b = NULL;
	size_t bytes = m ? kv_block_bytes(m, N_TOKENS) : 0;
	uint8_t *ea = malloc(bytes), *eb = malloc(bytes);
	uint32_t tok[N_TOKENS];

	TAP_ASSERT_TRUE(m && ea && eb);
	TAP_ASSERT_EQ(kv_create(m, N_TOKENS, &a), 0);
	TAP_ASSERT_EQ(kv_create(m, N_TOKENS, &b), 0);
	prompt(tok, N_TOKENS, 256, 3);
	TAP_CHECK(model_prefill(m, a, tok, 0, N_TOKENS, NULL, 1) == 0);
	TAP_CHECK(import_prefix(m, a, b, 48) == 0);
	TAP_CHECK(model_prefill(m, b, tok + 48, 48, N_TOKENS - 48, NULL,
				2) == 0);
	TAP_CHECK(kv_export(a, 0, N_TOKENS, ea) == 0);
	TAP_CHECK(kv_export(b, 0, N_TOKENS, eb) == 0);
	TAP_CHECK(!memcmp(ea, eb, bytes));
	free(ea);
	free(eb);
	kv_free(a);
	kv_free(b);
	model_free(m);
}

static void threads_do_not_change_results(void)
{
	struct model *m = make("tiny");
	struct kv_cache *kv = NULL;
	uint32_t tok[N_TOKENS];
	float ref[256], got[256];
	size_t bytes = m ? kv_block_bytes(m, N_TOKENS) : 0;
	uint8_t *e1 = malloc(bytes), *e2 = malloc(bytes);

	TAP_CHECK(m && e1 && e2);
	if (!m || !e1 || !e2 || kv_create(m, N_TOKENS, &kv))
		goto out;
	prompt(tok, N_TOKENS, 256, 4);
	TAP_CHECK(model_prefill(m, kv, tok, 0, N_TOKENS, ref, 1) == 0);
	TAP_CHECK(kv_export(kv, 0, N_TOKENS, e1) == 0);
	for (unsigned int th = 2; th <= 5; th++) {
		kv_reset(kv);
		TAP_CHECK(model_prefill(m, kv, tok, 0, N_TOKENS, got, th) == 0);
		TAP_CHECK(!memcmp(ref, got, sizeof(ref)));
		TAP_CHECK(kv_export(kv, 0, N_TOKENS, e2) == 0);
		TAP_CHECK(!memcmp(e1, e2, bytes));
	}
	/* More threads than tokens, and than allowed: clamped, still equal. */
	kv_reset(kv);
	TAP_CHECK(model_prefill(m, kv, tok, 0, 100, NULL, 1) == 0);
	TAP_CHECK(model_prefill(m, kv, tok + 100, 100, 30, got, 1000) == 0);
	TAP_CHECK(!memcmp(ref, got, sizeof(ref)));
out:
	free(e1);
	free(e2);
	kv_free(kv);
	model_free(m);
}

/* Greedy decoding of GEN tokens after the prompt; logits of each step. */
static int decode(const struct model *m, struct kv_cache *kv,
		  const float *first, float (*steps)[256], uint32_t *gen)
{
	uint32_t pos = kv_len(kv);
	const float *l = first;

	for (int i = 0; i < GEN; i++) {
		gen[i] = model_argmax(l, 256);
		if (model_prefill(m, kv, &gen[i], pos + i, 1, steps[i], 1))
			return -1;
		l = steps[i];
	}
	return 0;
}

static void decode_after_reuse_is_identical(void)
{
	struct model *m = make("tiny");
	struct kv_cache *full = NULL, *kv = NULL;
	uint32_t tok[N_TOKENS + GEN], ga[GEN], gb[GEN];
	float la[256], lb[256], sa[GEN][256], sb[GEN][256], all[256];

	TAP_CHECK(m);
	if (!m || kv_create(m, N_TOKENS + GEN, &full) ||
	    kv_create(m, N_TOKENS + GEN, &kv))
		goto out;
	prompt(tok, N_TOKENS, 256, 5);
	TAP_CHECK(model_prefill(m, full, tok, 0, N_TOKENS, la, 1) == 0);
	TAP_CHECK(import_prefix(m, full, kv, 112) == 0);
	TAP_CHECK(model_prefill(m, kv, tok + 112, 112, N_TOKENS - 112, lb,
				2) == 0);
	TAP_CHECK(decode(m, full, la, sa, ga) == 0);
	TAP_CHECK(decode(m, kv, lb, sb, gb) == 0);
	TAP_CHECK(!memcmp(ga, gb, sizeof(ga)));
	TAP_CHECK(!memcmp(sa, sb, sizeof(sa)));

	/* The prompt and the decoded tokens in one prefill: the same end. */
	memcpy(tok + N_TOKENS, ga, sizeof(ga));
	kv_reset(kv);
	TAP_CHECK(model_prefill(m, kv, tok, 0, N_TOKENS + GEN, all, 1) == 0);
	TAP_CHECK(!memcmp(all, sa[GEN - 1], sizeof(all)));
out:
	kv_free(full);
	kv_free(kv);
	model_free(m);
}

/*
 * Reuse at every split of an n-token prompt of model c, with the thread
 * count changing too. Returns the number of splits that differ.
 */
static uint32_t splits_differ(const struct model_config *c, uint32_t n)
{
	struct model *m = NULL;
	struct kv_cache *full = NULL, *kv = NULL;
	uint32_t *tok = malloc(n * sizeof(*tok)), bad = n;
	float *ref = malloc(c->vocab * sizeof(float));
	float *got = malloc(c->vocab * sizeof(float));

	if (!tok || !ref || !got || model_create(c, &m) ||
	    kv_create(m, n, &full) || kv_create(m, n, &kv))
		goto out;
	prompt(tok, n, c->vocab, c->head_dim);
	if (model_prefill(m, full, tok, 0, n, ref, 1))
		goto out;
	bad = 0;
	for (uint32_t p = 0; p < n; p++) {
		if (import_prefix(m, full, kv, p) ||
		    model_prefill(m, kv, tok + p, p, n - p, got, 1 + p % 3) ||
		    memcmp(ref, got, c->vocab * sizeof(float)))
			bad++;
	}
out:
	kv_free(full);
	kv_free(kv);
	model_free(m);
	free(tok);
	free(ref);
	free(got);
	return bad;
}

/*
 * Dimensions that are no multiple of 8 (head_dim 6, vocab 13, d_model 20,
 * three query heads on one KV head) take the tail paths everywhere; wide
 * heads (head_dim 40: 32 by the paired-head kernels, 8 alone) in groups
 * of 4 the paired kernels' main loops.
 */
static void odd_and_wide_shapes_are_bit_exact_too(void)
{
	struct model_config odd = {
		.layers = 3, .d_model = 20, .n_heads = 3, .n_kv_heads = 1,
		.head_dim = 6, .ffn_dim = 12, .vocab = 13,
		.rope_theta = 500.0f, .seed = 77, .max_ctx = 128,
	};
	struct model_config wide = {
		.layers = 1, .d_model = 48, .n_heads = 8, .n_kv_heads = 2,
		.head_dim = 40, .ffn_dim = 40, .vocab = 50,
		.rope_theta = 10000.0f, .seed = 78, .max_ctx = 128,
	};
	struct model *m = NULL;

	TAP_CHECK(model_create(&odd, &m) == 0);
	if (m)
		TAP_CHECK(kv_block_bytes(m, 16) == 3 * 2 * 16 * 1 * 6 * 4);
	model_free(m);
	TAP_CHECK(splits_differ(&odd, 75) == 0);
	TAP_CHECK(splits_differ(&wide, 70) == 0);
}

/* The documented block layout: per layer K[T][kv][hd] then V[T][kv][hd]. */
static void export_layout_is_token_major(void)
{
	struct model *m = make("tiny");
	const struct model_config *c;
	struct kv_cache *kv = NULL;
	uint32_t tok[48], T = 32, half = 16;
	float *whole = NULL, *again = NULL, *part = NULL;
	size_t row;

	TAP_ASSERT_TRUE(m);
	c = model_get_config(m);
	row = (size_t)c->n_kv_heads * c->head_dim;	/* floats a token */
	TAP_CHECK(kv_block_bytes(m, T) ==
		  c->layers * 2 * T * row * sizeof(float));
	whole = malloc(kv_block_bytes(m, T));
	again = malloc(kv_block_bytes(m, T));
	part = malloc(kv_block_bytes(m, half));
	if (!whole || !again || !part || kv_create(m, 48, &kv))
		goto out;
	prompt(tok, 48, 256, 7);
	TAP_CHECK(model_prefill(m, kv, tok, 0, 48, NULL, 1) == 0);
	TAP_CHECK(kv_export(kv, 8, T, whole) == 0);
	TAP_CHECK(kv_export(kv, 8 + half, half, part) == 0);
	/* The second half of each K and V of the whole is the part's. */
	for (uint32_t l = 0; l < c->layers; l++) {
		for (int kvsel = 0; kvsel < 2; kvsel++) {
			const float *w = whole + ((size_t)l * 2 + kvsel) *
						 T * row + half * row;
			const float *p = part + ((size_t)l * 2 + kvsel) *
						half * row;

			TAP_CHECK(!memcmp(w, p, half * row * sizeof(float)));
		}
	}
	/* Importing the part back over its tokens changes nothing. */
	TAP_CHECK(kv_import(kv, 8 + half, half, part) == 0);
	TAP_CHECK(kv_len(kv) == 8 + T);
	TAP_CHECK(kv_export(kv, 8, T, again) == 0);
	TAP_CHECK(!memcmp(whole, again, kv_block_bytes(m, T)));
out:
	free(whole);
	free(again);
	free(part);
	kv_free(kv);
	model_free(m);
}

static void rmsnorm_matches_formula(void)
{
	float x[37], w[37], out[37];

	for (uint32_t n = 1; n <= 37; n += 4) {
		double ss = 0, worst = 0;

		for (uint32_t i = 0; i < n; i++) {
			x[i] = (float)sin(i * 1.7 + n) * (1 + i % 5);
			w[i] = 0.5f + (float)i / 40;
			ss += (double)x[i] * x[i];
		}
		model_rmsnorm(out, x, w, n, MODEL_RMS_EPS);
		for (uint32_t i = 0; i < n; i++) {
			double r = x[i] / sqrt(ss / n + MODEL_RMS_EPS) * w[i];
			double e = fabs(out[i] - r) / (fabs(r) + 1e-6);

			if (e > worst)
				worst = e;
		}
		TAP_CHECK(worst < 1e-5);
	}
}

static void rope_matches_formula(void)
{
	uint32_t hds[] = { 2, 6, 16, 32, 128 };
	uint32_t poss[] = { 0, 1, 7, 100, 4095, 100000 };
	float v[128];

	for (size_t a = 0; a < sizeof(hds) / sizeof(hds[0]); a++) {
		for (size_t b = 0; b < sizeof(poss) / sizeof(poss[0]); b++) {
			uint32_t hd = hds[a], half = hd / 2, pos = poss[b];
			double n0 = 0, n1 = 0, worst = 0;
			float in[128];

			for (uint32_t i = 0; i < hd; i++) {
				in[i] = v[i] = (float)cos(i * 0.37 + pos);
				n0 += (double)v[i] * v[i];
			}
			model_rope(v, hd, pos, 10000.0f);
			for (uint32_t i = 0; i < half; i++) {
				double f = pow(10000.0, -2.0 * i / hd);
				double ang = pos * f;
				double r0 = in[i] * cos(ang) -
					    in[i + half] * sin(ang);
				double r1 = in[i] * sin(ang) +
					    in[i + half] * cos(ang);

				if (fabs(v[i] - r0) > worst)
					worst = fabs(v[i] - r0);
				if (fabs(v[i + half] - r1) > worst)
					worst = fabs(v[i + half] - r1);
			}
			for (uint32_t i = 0; i < hd; i++)
				n1 += (double)v[i] * v[i];
			TAP_CHECK(worst < 1e-5);
			/* A rotation keeps the norm. */
			TAP_CHECK(fabs(n0 - n1) < 1e-4 * (n0 + 1));
			if (pos == 0)
				TAP_CHECK(!memcmp(v, in, hd * sizeof(float)));
		}
	}
}

static void softmax_matches_formula(void)
{
	float s[48];
	double r[48];

	for (uint32_t n = 1; n <= 41; n++) {
		double mx = -INFINITY, sum = 0, tot = 0, worst = 0;
		float scale = n % 3 == 0 ? 30.0f : 3.0f;

		for (uint32_t i = 0; i < n; i++) {
			s[i] = scale * (float)sin(i * 2.3 + n);
			if (s[i] > mx)
				mx = s[i];
		}
		for (uint32_t i = 0; i < n; i++)
			sum += r[i] = exp(s[i] - mx);
		model_softmax(s, n);
		for (uint32_t i = 0; i < n; i++) {
			double e = fabs(s[i] - r[i] / sum);

			if (e > worst)
				worst = e;
			tot += s[i];
		}
		TAP_CHECK(worst < 1e-6);
		TAP_CHECK(fabs(tot - 1.0) < 1e-5);
	}
	/* Far below the max: 0, not garbage; equal inputs: uniform. */
	s[0] = 0.0f;
	s[1] = -1000.0f;
	s[2] = -1e30f;
	model_softmax(s, 3);
	TAP_CHECK(fabs(s[0] - 1.0) < 1e-6 && s[1] < 1e-30 && s[2] < 1e-30);
	for (int i = 0; i < 10; i++)
		s[i] = 5.0f;
	model_softmax(s, 10);
	for (int i = 0; i < 10; i++)
		TAP_CHECK(fabs(s[i] - 0.1) < 1e-6);
}

static void swiglu_matches_formula(void)
{
	float g[21], u[21], h[21];

	for (int i = 0; i < 21; i++) {
		g[i] = (float)(i - 10) * 1.3f;
		u[i] = 0.5f + (float)i / 7;
	}
	g[0] = -100.0f;
	g[20] = 100.0f;
	model_swiglu(h, g, u, 21);
	for (int i = 0; i < 21; i++) {
		double r = g[i] / (1.0 + exp(-(double)g[i])) * u[i];

		TAP_CHECK(fabs(h[i] - r) <= 1e-5 * (fabs(r) + 1e-3));
	}
}

/* Both the check and model_create() refuse c. */
static int refused(const struct model_config *c)
{
	struct model *m = NULL;
	int err = model_create(c, &m);

	model_free(m);
	return model_config_check(c) == -EINVAL && err == -EINVAL && !m;
}

/* Largest |a - b| over n logits, relative to the largest |b|. */
static double logits_error(const float *a, const double *b, uint32_t n)
{
	double worst = 0, scale = 1e-9;

	for (uint32_t i = 0; i < n; i++) {
		if (fabs(b[i]) > scale)
			scale = fabs(b[i]);
		if (fabs(a[i] - b[i]) > worst)
			worst = fabs(a[i] - b[i]);
	}
	return worst / scale;
}

/*
 * The optimized model (packed weights, chunks, vector kernels, threads)
 * computes what the textbook one does in double precision: float
 * rounding apart, the same logits, and the same argmax.
 */
static void prefill_matches_the_reference_model(void)
{
	struct model_config cfgs[3];
	uint32_t tok[150];

	model_config_named("tiny", &cfgs[0]);
	cfgs[1] = (struct model_config) {
		.layers = 3, .d_model = 20, .n_heads = 3, .n_kv_heads = 1,
		.head_dim = 6, .ffn_dim = 12, .vocab = 13,
		.rope_theta = 500.0f, .seed = 77, .max_ctx = 256,
	};
	cfgs[2] = (struct model_config) {
		.layers = 1, .d_model = 48, .n_heads = 8, .n_kv_heads = 2,
		.head_dim = 40, .ffn_dim = 40, .vocab = 50,
		.rope_theta = 10000.0f, .seed = 78, .max_ctx = 256,
	};
	for (int i = 0; i < 3; i++) {
		const struct model_config *c = &cfgs[i];
		struct model *m = NULL;
		struct kv_cache *kv = NULL;
		float got[256];
		double ref[256], err;

		if (model_create(c, &m) || kv_create(m, 150, &kv)) {
			TAP_CHECK(0);
			model_free(m);
			continue;
		}
		prompt(tok, 150, c->vocab, 9 + i);
		TAP_CHECK(model_prefill(m, kv, tok, 0, 150, got, 2) == 0);
		TAP_CHECK(model_reference_logits(m, tok, 150, ref) == 0);
		err = logits_error(got, ref, c->vocab);
		printf("# config %d: logits within %.2e of the reference\n",
		       i, err);
		TAP_CHECK(err < 1e-4);
		/* One token too: no attention but to itself. */
		kv_reset(kv);
		TAP_CHECK(model_prefill(m, kv, tok, 0, 1, got, 1) == 0);
		TAP_CHECK(model_reference_logits(m, tok, 1, ref) == 0);
		TAP_CHECK(logits_error(got, ref, c->vocab) < 1e-4);
		kv_free(kv);
		model_free(m);
	}
}

static void bad_configs_and_arguments_are_refused(void)
{
	struct model_config base, c;
	struct model *m = NULL, *other = NULL;
	struct kv_cache *kv = NULL, *okv = NULL;
	uint32_t tok[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	uint8_t buf[8192];
	float l[256];

	TAP_CHECK(model_config_named("tiny", &base) == 0);
	TAP_CHECK(model_config_named("demo", &c) == 0);
	TAP_CHECK(model_config_named("huge", &c) == -ENOENT);
	TAP_CHECK(model_config_check(&base) == 0);
	TAP_CHECK(model_config_check(NULL) == -EINVAL);

	c = base;
	c.layers = 0;
	TAP_CHECK(refused(&c));
	c = base;
	c.layers = MODEL_MAX_LAYERS + 1;
	TAP_CHECK(refused(&c));
	c = base;
	c.d_model = 0;
	TAP_CHECK(refused(&c));
	c = base;
	c.n_heads = 0;
	TAP_CHECK(refused(&c));
	c = base;
	c.n_kv_heads = 0;
	TAP_CHECK(refused(&c));
	c = base;
	c.n_kv_heads = 3;	/* does not divide 4 */
	TAP_CHECK(refused(&c));
	c = base;
	c.n_kv_heads = 8;	/* more than n_heads */
	TAP_CHECK(refused(&c));
	c = base;
	c.head_dim = 0;
	TAP_CHECK(refused(&c));
	c = base;
	c.head_dim = 15;	/* odd: RoPE needs pairs */
	TAP_CHECK(refused(&c));
	c = base;
	c.head_dim = MODEL_MAX_HEAD_DIM + 2;
	TAP_CHECK(refused(&c));
	c = base;
	c.ffn_dim = 0;
	TAP_CHECK(refused(&c));
	c = base;
	c.vocab = 1;
	TAP_CHECK(refused(&c));
	c = base;
	c.vocab = MODEL_MAX_VOCAB + 1;
	TAP_CHECK(refused(&c));
	c = base;
	c.rope_theta = 0.0f;
	TAP_CHECK(refused(&c));
	c = base;
	c.rope_theta = 1.0f;
	TAP_CHECK(refused(&c));
	c = base;
	c.rope_theta = NAN;
	TAP_CHECK(refused(&c));
	c = base;
	c.rope_theta = INFINITY;
	TAP_CHECK(refused(&c));
	c = base;
	c.max_ctx = 0;
	TAP_CHECK(refused(&c));
	c = base;
	c.max_ctx = MODEL_MAX_CTX + 1;
	TAP_CHECK(refused(&c));
	c = base;
	c.n_heads = 1024;
	c.head_dim = 128;	/* 131072 wide: too wide */
	c.n_kv_heads = 1;
	TAP_CHECK(model_config_check(&c) == -EINVAL);

	TAP_ASSERT_EQ(model_create(&base, &m), 0);
	TAP_CHECK(kv_create(m, 0, &kv) == -EINVAL && !kv);
	TAP_CHECK(kv_create(m, base.max_ctx + 1, &kv) == -EINVAL && !kv);
	TAP_ASSERT_EQ(kv_create(m, 16, &kv), 0);
	TAP_CHECK(model_prefill(m, kv, tok, 0, 0, l, 1) == -EINVAL);
	TAP_CHECK(model_prefill(m, kv, tok, 1, 4, l, 1) == -EINVAL);
	TAP_CHECK(model_prefill(m, kv, tok, 0, 17, l, 1) == -EINVAL);
	tok[3] = 256;
	TAP_CHECK(model_prefill(m, kv, tok, 0, 8, l, 1) == -EINVAL);
	tok[3] = 4;
	TAP_CHECK(kv_len(kv) == 0);
	TAP_CHECK(model_prefill(m, kv, tok, 0, 8, l, 1) == 0);
	TAP_CHECK(model_prefill(m, kv, tok, 8, 8, l, 1) == 0);
	TAP_CHECK(model_prefill(m, kv, tok, 16, 1, l, 1) == -EINVAL);
	TAP_CHECK(kv_len(kv) == 16 && kv_max_tokens(kv) == 16);

	TAP_CHECK(kv_block_bytes(m, 8) <= sizeof(buf));
	TAP_CHECK(kv_export(kv, 0, 0, buf) == -EINVAL);
	TAP_CHECK(kv_export(kv, 12, 8, buf) == -EINVAL);
	TAP_CHECK(kv_export(kv, 8, 8, buf) == 0);
	kv_reset(kv);
	TAP_CHECK(kv_export(kv, 0, 8, buf) == -EINVAL);
	TAP_CHECK(kv_import(kv, 8, 8, buf) == -EINVAL);	/* a hole */
	TAP_CHECK(kv_import(kv, 12, 8, buf) == -EINVAL);	/* past room */
	TAP_CHECK(kv_import(kv, 0, 8, buf) == 0 && kv_len(kv) == 8);

	/* A cache of another shape does not fit. */
	c = base;
	c.n_kv_heads = 4;
	TAP_CHECK(model_create(&c, &other) == 0);
	if (other && kv_create(other, 16, &okv) == 0)
		TAP_CHECK(model_prefill(m, okv, tok, 0, 8, l, 1) == -EINVAL);
	kv_free(kv);
	kv_free(okv);
	model_free(m);
	model_free(other);
}

static void describe_names_the_shape(void)
{
	struct model_config c;
	char buf[128];

	TAP_CHECK(model_config_named("demo", &c) == 0);
	TAP_CHECK(model_describe(&c, buf, sizeof(buf)) > 0);
	TAP_CHECK(!strcmp(buf, "L8-D256-H8-KV2-HD32-F768-V4096-R10000"));
	TAP_CHECK(model_config_check(&c) == 0);
}

int main(void)
{
	TAP_RUN(weights_are_deterministic);
	TAP_RUN(reuse_is_bit_exact_at_every_split);
	TAP_RUN(imported_and_computed_kv_match);
	TAP_RUN(threads_do_not_change_results);
	TAP_RUN(decode_after_reuse_is_identical);
	TAP_RUN(odd_and_wide_shapes_are_bit_exact_too);
	TAP_RUN(export_layout_is_token_major);
	TAP_RUN(prefill_matches_the_reference_model);
	TAP_RUN(rmsnorm_matches_formula);
	TAP_RUN(rope_matches_formula);
	TAP_RUN(softmax_matches_formula);
	TAP_RUN(swiglu_matches_formula);
	TAP_RUN(bad_configs_and_arguments_are_refused);
	TAP_RUN(describe_names_the_shape);
	return tap_done();
}
