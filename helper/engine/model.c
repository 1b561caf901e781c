// SPDX-License-Identifier: GPL-2.0
/*
 * model: a small Llama-architecture decoder in float32 (model.h).
 *
 * How bit-exact reuse is kept: each output value is computed by one code
 * path whose float operations depend only on the value's own inputs, never
 * on how many tokens the call holds or which thread runs it.
 *   - Matrix products: out[t][j] = sum over k of x[t][k] * W[k][j],
 *     accumulated from 0 in increasing k. The weights are packed in panels
 *     of 8 columns ([panel][k][8]) so that the 8 columns of a panel are one
 *     vector: the vector code is 8 independent scalar accumulations, one
 *     per lane, with no reassociation. Tiles of 4 tokens and single-token
 *     tails do the same per-lane operations.
 *   - Attention: for each query, the scores of keys 0..p (K is kept in
 *     panels of 8 tokens, [token/8][head_dim][8], so 8 keys are one vector
 *     and the dot product runs over head_dim in order), a softmax whose
 *     sum is a fixed 8-lane split then a fixed tree, and sum_j e_j * V[j]
 *     in increasing j.
 *   - exp is the model's own (Cody-Waite reduction and a polynomial on
 *     float vectors), identical on every x86-64 whatever libm's dispatch.
 *     RoPE's angles come from libm's cos and sin in double precision,
 *     rounded to float.
 *   - No fused multiply-add (the pragma below), so the AVX2 and baseline
 *     builds of a loop, and its vector and scalar tails, agree.
 *
 * Work is done in chunks of PF_CHUNK tokens: each weight matrix is streamed
 * once per chunk, not once per token. With threads, every phase of a layer
 * is split between them (matrix products by column panels, norms and RoPE
 * by tokens, attention by (token, KV head)) and a barrier ends the phase.
 * Attention takes the query heads that share a KV head two at a time, so
 * that each K and V vector loaded serves both.
 *
 * model_reference_logits() is the same model written plainly in double
 * precision; the unit tests hold the fast path to it.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
/* The engine builds without common/ on its path; only this is shared. */
#include "rand.h"

/*
 * Bit-exact reuse needs a * b + c to stay two roundings everywhere: with
 * contraction (the default of -std=gnu11 on an FMA target) GCC fuses some
 * loops and not others, and a token's logits then depend on the path that
 * computed them. Fast-math reorders reductions.
 */
#pragma GCC optimize("fp-contract=off")
#ifdef __FAST_MATH__
#error "model.c must not be built with -ffast-math (bit-exact reuse)"
#endif

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the KV block layout is little-endian; add byte swaps for this target"
#endif

/* Tokens per chunk of a prefill. */
#define PF_CHUNK	64
/* Floats per vector, columns per weight panel, tokens per K panel. */
#define VL		8

/*
 * Vectors of 8 floats, GCC's generic vector extension: on the baseline
 * x86-64 target each operation becomes two SSE instructions. Vectors are
 * passed by pointer and returned only by static inline functions, so the
 * warning that such a return would change the ABI with AVX enabled does
 * not concern us.
 */
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

/*
 * The loops that do the work are compiled twice, for AVX and for the
 * baseline, and the loader picks one for the CPU. With AVX a vector is one
 * register: about ten times faster than the baseline's pairs of SSE
 * registers, which GCC spills. Both do the same IEEE operations lane by
 * lane (AVX brings no FMA), so their results are bit-identical.
 */
#define SIMD_CLONES	__attribute__((target_clones("avx", "default")))

/* A weight matrix of k rows (fan-in) and n columns, packed by panels. */
struct pmat {
	uint32_t k, n, np;	/* np = panels = ceil(n / 8) */
	float *w;		/* [np][k][8], padding columns zero */
};

struct layer {
	float *attn_norm, *ffn_norm;	/* [d_model] */
	struct pmat qkv;	/* d_model -> q (n_heads), k, v (n_kv_heads) */
	struct pmat o;		/* n_heads * head_dim -> d_model */
	struct pmat gu;		/* d_model -> gate (ffn_dim), up (ffn_dim) */
	struct pmat down;	/* ffn_dim -> d_model */
};

struct model {
	struct model_config cfg;
	uint32_t qdim, kvdim, qkvdim;	/* n_heads*hd, n_kv_heads*hd, sum */
	uint32_t group;			/* query heads per KV head */
	float attn_scale;		/* 1 / sqrt(head_dim) */
	float *embed;			/* [vocab][d_model] */
	struct layer *layers;
	float *final_norm;
	struct pmat head;		/* d_model -> vocab */
	double *inv_freq;		/* RoPE, [head_dim / 2] */
	size_t weight_bytes;
};

struct kv_cache {
	uint32_t layers, n_kv, hd;	/* the shape it fits */
	uint32_t max_tokens, len;
	uint32_t kpanels;		/* ceil(max_tokens / 8) */
	/*
	 * k: [layers][n_kv][kpanels][hd][8], the key of token t in panel t/8,
	 *    lane t%8, so attention scores 8 keys per vector;
	 * v: [layers][n_kv][max_tokens][hd].
	 */
	float *k, *v;
	/* prefill's scratch, kept between calls of this sequence */
	void *scratch;
	size_t scratch_bytes;
};

/* ---- vectors ------------------------------------------------------------- */

static inline v8f v8_load(const float *p)
{
	v8f v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static inline void v8_store(float *p, const v8f *v)
{
	memcpy(p, v, sizeof(*v));
}

/* The one horizontal sum: a fixed tree. */
static inline float v8_hsum(const v8f *v)
{
	return (((*v)[0] + (*v)[1]) + ((*v)[2] + (*v)[3])) +
	       (((*v)[4] + (*v)[5]) + ((*v)[6] + (*v)[7]));
}

/*
 * exp on 8 floats. x = n ln2 + r with n = round(x / ln2) (by adding
 * 1.5 * 2^23, which leaves n in the low mantissa bits) and |r| <= ln2/2,
 * ln2 split in two so that n * ln2_hi is exact; e^r by its Taylor
 * polynomial of degree 7 (error below 1e-8 relative); 2^n built in the
 * exponent field. Inputs are clamped to [-87, 88] so 2^n stays a normal
 * float: exp(-87) is 1.6e-38, negligible beside the softmax's 1.
 */
static inline v8f v8_exp(const v8f *in)
{
	const v8f zero = { 0 }, lo = zero - 87.0f, hi = zero + 88.0f;
	const float magic = 12582912.0f;
	v8f x = *in, t, nf, r, p;
	v8i e, below, above;

	/* Clamp lane by lane: comparisons give all-ones masks. */
	below = x < lo;
	x = (v8f)((below & (v8i)lo) | (~below & (v8i)x));
	above = x > hi;
	x = (v8f)((above & (v8i)hi) | (~above & (v8i)x));
	t = x * 1.44269504f + magic;
	nf = t - magic;
	r = x - nf * 0.693359375f;
	r = r + nf * 2.12194440e-4f;	/* ln2 - ln2_hi < 0 */
	p = r * (1.0f / 5040.0f) + 1.0f / 720.0f;
	p = p * r + 1.0f / 120.0f;
	p = p * r + 1.0f / 24.0f;
	p = p * r + 1.0f / 6.0f;
	p = p * r + 0.5f;
	p = p * r + 1.0f;
	p = p * r + 1.0f;
	e = ((v8i)t - (v8i)(zero + magic) + 127) << 23;
	return p * (v8f)e;
}

static inline uint32_t round_up8(uint32_t n)
{
	return (n + VL - 1) / VL * VL;
}

/* ---- building blocks ----------------------------------------------------- */

void model_rmsnorm(float *out, const float *x, const float *w, uint32_t n,
		   float eps)
{
	v8f acc = { 0 };
	uint32_t i = 0;
	float ss, r;

	for (; i + VL <= n; i += VL) {
		v8f v = v8_load(x + i);

		acc += v * v;
	}
	ss = v8_hsum(&acc);
	for (; i < n; i++)
		ss += x[i] * x[i];
	r = 1.0f / sqrtf(ss / (float)n + eps);
	for (i = 0; i < n; i++)
		out[i] = x[i] * r * w[i];
}

/*
 * Softmax without the division: s[j] = exp(s[j] - max) for j < n, zero in
 * the padding up to the next multiple of 8; returns the sum. Attention
 * scales its output by 1 / sum instead of every weight.
 */
SIMD_CLONES
static float softmax_exp(float *s, uint32_t n)
{
	v8f acc = { 0 }, mx;
	float m;
	uint32_t i, full = n / VL * VL;

	/* The max is exact whatever the order: 8 lanes, then the rest. */
	if (full) {
		mx = v8_load(s);
		for (i = VL; i < full; i += VL) {
			v8f v = v8_load(s + i);
			v8i gt = v > mx;

			mx = (v8f)((gt & (v8i)v) | (~gt & (v8i)mx));
		}
		m = mx[0];
		for (i = 1; i < VL; i++)
			if (mx[i] > m)
				m = mx[i];
	} else {
		m = s[0];
	}
	for (i = full; i < n; i++)
		if (s[i] > m)
			m = s[i];
	for (i = 0; i < full; i += VL) {
		v8f v = v8_load(s + i) - m;
		v8f e = v8_exp(&v);

		v8_store(s + i, &e);
		acc += e;
	}
	if (full < n) {
		float tail[VL] = { 0 };
		v8f v, e;

		memcpy(tail, s + full, (n - full) * sizeof(float));
		v = v8_load(tail) - m;
		e = v8_exp(&v);
		v8_store(tail, &e);
		/* The lanes past n must add nothing. */
		for (i = n - full; i < VL; i++)
			tail[i] = 0.0f;
		memcpy(s + full, tail, sizeof(tail));
		acc += v8_load(tail);
	}
	return v8_hsum(&acc);
}

void model_softmax(float *s, uint32_t n)
{
	float inv;

	if (!n)
		return;
	inv = 1.0f / softmax_exp(s, n);
	for (uint32_t i = 0; i < n; i++)
		s[i] *= inv;
}

/* h = silu(g) * u = g / (1 + exp(-g)) * u on 8 values of g and u. */
static inline void v8_swiglu(float *h, const float *g, const float *u)
{
	v8f gv = v8_load(g), ng = -gv, r;

	r = gv / (1.0f + v8_exp(&ng)) * v8_load(u);
	v8_store(h, &r);
}

SIMD_CLONES
void model_swiglu(float *h, const float *g, const float *u, uint32_t n)
{
	uint32_t i = 0;

	for (; i + VL <= n; i += VL)
		v8_swiglu(h + i, g + i, u + i);
	if (i < n) {
		float tg[VL] = { 0 }, tu[VL] = { 0 }, th[VL];

		memcpy(tg, g + i, (n - i) * sizeof(float));
		memcpy(tu, u + i, (n - i) * sizeof(float));
		v8_swiglu(th, tg, tu);
		memcpy(h + i, th, (n - i) * sizeof(float));
	}
}

/* RoPE: the frequency of pair i, and the cos/sin of a position. */
static double rope_inv_freq(double theta, uint32_t head_dim, uint32_t i)
{
	return pow(theta, -2.0 * (double)i / (double)head_dim);
}

/* cs[0 .. half-1] = cos, cs[half .. 2*half-1] = sin of pos * inv_freq. */
static void rope_angles(const double *inv_freq, uint32_t half, uint32_t pos,
			float *cs)
{
	for (uint32_t i = 0; i < half; i++) {
		double a = (double)pos * inv_freq[i];

		cs[i] = (float)cos(a);
		cs[half + i] = (float)sin(a);
	}
}

static void rope_rotate(float *v, uint32_t half, const float *cs)
{
	for (uint32_t i = 0; i < half; i++) {
		float a = v[i], b = v[half + i];
		float c = cs[i], s = cs[half + i];

		v[i] = a * c - b * s;
		v[half + i] = a * s + b * c;
	}
}

void model_rope(float *v, uint32_t head_dim, uint32_t pos, float theta)
{
	uint32_t half = head_dim / 2;
	double inv_freq[MODEL_MAX_HEAD_DIM / 2];
	float cs[MODEL_MAX_HEAD_DIM];

	if (head_dim > MODEL_MAX_HEAD_DIM)
		return;
	for (uint32_t i = 0; i < half; i++)
		inv_freq[i] = rope_inv_freq(theta, head_dim, i);
	rope_angles(inv_freq, half, pos, cs);
	rope_rotate(v, half, cs);
}

uint32_t model_argmax(const float *logits, uint32_t vocab)
{
	uint32_t best = 0;

	for (uint32_t i = 1; i < vocab; i++)
		if (logits[i] > logits[best])
			best = i;
	return best;
}

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

#define FNV_OFFSET	0xcbf29ce484222325ull

uint64_t model_hash_floats(const float *v, size_t n)
{
	return fnv1a(FNV_OFFSET, v, n * sizeof(float));
}

/* ---- matrix products ----------------------------------------------------- */

/* Write (or add, for the residual stream) up to 8 columns of one row. */
static inline void mm_put(float *out, const v8f *acc, uint32_t ncols,
			  int add)
{
	float t[VL];

	if (ncols == VL) {
		v8f v = *acc;

		if (add)
			v += v8_load(out);
		v8_store(out, &v);
		return;
	}
	v8_store(t, acc);
	for (uint32_t c = 0; c < ncols; c++)
		out[c] = add ? out[c] + t[c] : t[c];
}

/*
 * One panel (8 columns from col) for rows tokens of x: 4 tokens at a time,
 * each W vector used 4 times; the tail one token at a time. Both do, per
 * lane, acc = 0; acc = acc + x[k] * w[k] for k = 0 .. K-1.
 */
SIMD_CLONES
static void mm_panel(const struct pmat *m, uint32_t panel, const float *x,
		     size_t xs, uint32_t rows, float *out, size_t os, int add)
{
	const float *wp = m->w + (size_t)panel * m->k * VL;
	uint32_t col = panel * VL;
	uint32_t ncols = m->n - col < VL ? m->n - col : VL;
	uint32_t r = 0, k;

	for (; r + 4 <= rows; r += 4) {
		const float *x0 = x + r * xs, *x1 = x0 + xs;
		const float *x2 = x1 + xs, *x3 = x2 + xs;
		v8f a0 = { 0 }, a1 = a0, a2 = a0, a3 = a0;

		for (k = 0; k < m->k; k++) {
			v8f w = v8_load(wp + (size_t)k * VL);

			a0 += x0[k] * w;
			a1 += x1[k] * w;
			a2 += x2[k] * w;
			a3 += x3[k] * w;
		}
		mm_put(out + r * os + col, &a0, ncols, add);
		mm_put(out + (r + 1) * os + col, &a1, ncols, add);
		mm_put(out + (r + 2) * os + col, &a2, ncols, add);
		mm_put(out + (r + 3) * os + col, &a3, ncols, add);
	}
	for (; r < rows; r++) {
		const float *x0 = x + r * xs;
		v8f a0 = { 0 };

		for (k = 0; k < m->k; k++)
			a0 += x0[k] * v8_load(wp + (size_t)k * VL);
		mm_put(out + r * os + col, &a0, ncols, add);
	}
}

/*
 * Two panels (16 columns from col, the second full or not) at once: eight
 * independent sums in flight hide the latency of the additions better
 * than four. Per lane, the same operations as mm_panel().
 */
SIMD_CLONES
static void mm_panel2(const struct pmat *m, uint32_t panel, const float *x,
		      size_t xs, uint32_t rows, float *out, size_t os, int add)
{
	const float *wp = m->w + (size_t)panel * m->k * VL;
	const float *wq = wp + (size_t)m->k * VL;
	uint32_t col = panel * VL;
	uint32_t ncols = m->n - col - VL < VL ? m->n - col - VL : VL;
	uint32_t r = 0, k;

	for (; r + 4 <= rows; r += 4) {
		const float *x0 = x + r * xs, *x1 = x0 + xs;
		const float *x2 = x1 + xs, *x3 = x2 + xs;
		v8f a0 = { 0 }, a1 = a0, a2 = a0, a3 = a0;
		v8f b0 = a0, b1 = a0, b2 = a0, b3 = a0;

		for (k = 0; k < m->k; k++) {
			v8f w = v8_load(wp + (size_t)k * VL);
			v8f v = v8_load(wq + (size_t)k * VL);

			a0 += x0[k] * w;
			b0 += x0[k] * v;
			a1 += x1[k] * w;
			b1 += x1[k] * v;
			a2 += x2[k] * w;
			b2 += x2[k] * v;
			a3 += x3[k] * w;
			b3 += x3[k] * v;
		}
		mm_put(out + r * os + col, &a0, VL, add);
		mm_put(out + (r + 1) * os + col, &a1, VL, add);
		mm_put(out + (r + 2) * os + col, &a2, VL, add);
		mm_put(out + (r + 3) * os + col, &a3, VL, add);
		mm_put(out + r * os + col + VL, &b0, ncols, add);
		mm_put(out + (r + 1) * os + col + VL, &b1, ncols, add);
		mm_put(out + (r + 2) * os + col + VL, &b2, ncols, add);
		mm_put(out + (r + 3) * os + col + VL, &b3, ncols, add);
	}
	for (; r < rows; r++) {
		const float *x0 = x + r * xs;
		v8f a0 = { 0 }, b0 = a0;

		for (k = 0; k < m->k; k++) {
			a0 += x0[k] * v8_load(wp + (size_t)k * VL);
			b0 += x0[k] * v8_load(wq + (size_t)k * VL);
		}
		mm_put(out + r * os + col, &a0, VL, add);
		mm_put(out + r * os + col + VL, &b0, ncols, add);
	}
}

/* Share [0, total) between nthr threads: thread tid's [*lo, *hi). */
static void split(uint32_t total, unsigned int tid, unsigned int nthr,
		  uint32_t *lo, uint32_t *hi)
{
	*lo = (uint32_t)((uint64_t)total * tid / nthr);
	*hi = (uint32_t)((uint64_t)total * (tid + 1) / nthr);
}

/* out[rows][m->n] (=, or += with add) x[rows][m->k] W, this thread's panels. */
static void matmul(const struct pmat *m, const float *x, size_t xs,
		   uint32_t rows, float *out, size_t os, int add,
		   unsigned int tid, unsigned int nthr)
{
	uint32_t lo, hi;

	split(m->np, tid, nthr, &lo, &hi);
	for (; lo + 2 <= hi; lo += 2)
		mm_panel2(m, lo, x, xs, rows, out, os, add);
	if (lo < hi)
		mm_panel(m, lo, x, xs, rows, out, os, add);
}

/* ---- attention ----------------------------------------------------------- */

/* s[j] = q . K[j] for the npan panels of keys at kp (8 keys a panel). */
SIMD_CLONES
static void attn_scores(const float *q, const float *kp, uint32_t hd,
			uint32_t npan, float *s)
{
	size_t ps = (size_t)hd * VL;	/* floats per panel */
	uint32_t p = 0, d;

	for (; p + 4 <= npan; p += 4) {
		const float *k0 = kp + p * ps;
		v8f a0 = { 0 }, a1 = a0, a2 = a0, a3 = a0;

		for (d = 0; d < hd; d++) {
			float qd = q[d];

			a0 += qd * v8_load(k0 + d * VL);
			a1 += qd * v8_load(k0 + ps + d * VL);
			a2 += qd * v8_load(k0 + 2 * ps + d * VL);
			a3 += qd * v8_load(k0 + 3 * ps + d * VL);
		}
		v8_store(s + p * VL, &a0);
		v8_store(s + (p + 1) * VL, &a1);
		v8_store(s + (p + 2) * VL, &a2);
		v8_store(s + (p + 3) * VL, &a3);
	}
	for (; p < npan; p++) {
		const float *k0 = kp + p * ps;
		v8f a0 = { 0 };

		for (d = 0; d < hd; d++)
			a0 += q[d] * v8_load(k0 + d * VL);
		v8_store(s + p * VL, &a0);
	}
}

/*
 * out[c0 ..] = (sum over j < nk of e[j] * V[j]) * inv, in increasing j,
 * for the columns from c0 on.
 */
SIMD_CLONES
static void attn_values_from(const float *e, uint32_t nk, const float *v,
			     uint32_t hd, uint32_t c0, float inv, float *out)
{
	uint32_t c = c0, j;

	for (; c + 4 * VL <= hd; c += 4 * VL) {
		v8f a0 = { 0 }, a1 = a0, a2 = a0, a3 = a0;

		for (j = 0; j < nk; j++) {
			const float *vr = v + (size_t)j * hd + c;
			float p = e[j];

			a0 += p * v8_load(vr);
			a1 += p * v8_load(vr + VL);
			a2 += p * v8_load(vr + 2 * VL);
			a3 += p * v8_load(vr + 3 * VL);
		}
		a0 *= inv;
		a1 *= inv;
		a2 *= inv;
		a3 *= inv;
		v8_store(out + c, &a0);
		v8_store(out + c + VL, &a1);
		v8_store(out + c + 2 * VL, &a2);
		v8_store(out + c + 3 * VL, &a3);
	}
	for (; c + VL <= hd; c += VL) {
		v8f a0 = { 0 };

		for (j = 0; j < nk; j++)
			a0 += e[j] * v8_load(v + (size_t)j * hd + c);
		a0 *= inv;
		v8_store(out + c, &a0);
	}
	for (; c < hd; c++) {
		float a = 0.0f;

		for (j = 0; j < nk; j++)
			a += e[j] * v[(size_t)j * hd + c];
		out[c] = a * inv;
	}
}

/*
 * The same two kernels for two query heads that share a KV head: each K
 * or V vector loaded serves both, which halves the loads that bound them.
 * Per lane the operations are those of the one-head kernels above.
 */
SIMD_CLONES
static void attn_scores2(const float *q0, const float *q1, const float *kp,
			 uint32_t hd, uint32_t npan, float *s0, float *s1)
{
	size_t ps = (size_t)hd * VL;
	uint32_t p = 0, d;

	for (; p + 4 <= npan; p += 4) {
		const float *k0 = kp + p * ps;
		v8f a0 = { 0 }, a1 = a0, a2 = a0, a3 = a0;
		v8f b0 = a0, b1 = a0, b2 = a0, b3 = a0;

		for (d = 0; d < hd; d++) {
			float qa = q0[d], qb = q1[d];
			v8f k_0 = v8_load(k0 + d * VL);
			v8f k_1 = v8_load(k0 + ps + d * VL);
			v8f k_2 = v8_load(k0 + 2 * ps + d * VL);
			v8f k_3 = v8_load(k0 + 3 * ps + d * VL);

			a0 += qa * k_0;
			a1 += qa * k_1;
			a2 += qa * k_2;
			a3 += qa * k_3;
			b0 += qb * k_0;
			b1 += qb * k_1;
			b2 += qb * k_2;
			b3 += qb * k_3;
		}
		v8_store(s0 + p * VL, &a0);
		v8_store(s0 + (p + 1) * VL, &a1);
		v8_store(s0 + (p + 2) * VL, &a2);
		v8_store(s0 + (p + 3) * VL, &a3);
		v8_store(s1 + p * VL, &b0);
		v8_store(s1 + (p + 1) * VL, &b1);
		v8_store(s1 + (p + 2) * VL, &b2);
		v8_store(s1 + (p + 3) * VL, &b3);
	}
	for (; p < npan; p++) {
		const float *k0 = kp + p * ps;
		v8f a0 = { 0 }, b0 = a0;

		for (d = 0; d < hd; d++) {
			v8f k_0 = v8_load(k0 + d * VL);

			a0 += q0[d] * k_0;
			b0 += q1[d] * k_0;
		}
		v8_store(s0 + p * VL, &a0);
		v8_store(s1 + p * VL, &b0);
	}
}

SIMD_CLONES
static void attn_values2(const float *e0, const float *e1, uint32_t nk,
			 const float *v, uint32_t hd, float inv0, float inv1,
			 float *out0, float *out1)
{
	uint32_t c = 0, j;

	for (; c + 4 * VL <= hd; c += 4 * VL) {
		v8f a0 = { 0 }, a1 = a0, a2 = a0, a3 = a0;
		v8f b0 = a0, b1 = a0, b2 = a0, b3 = a0;

		for (j = 0; j < nk; j++) {
			const float *vr = v + (size_t)j * hd + c;
			float pa = e0[j], pb = e1[j];
			v8f v_0 = v8_load(vr), v_1 = v8_load(vr + VL);
			v8f v_2 = v8_load(vr + 2 * VL);
			v8f v_3 = v8_load(vr + 3 * VL);

			a0 += pa * v_0;
			a1 += pa * v_1;
			a2 += pa * v_2;
			a3 += pa * v_3;
			b0 += pb * v_0;
			b1 += pb * v_1;
			b2 += pb * v_2;
			b3 += pb * v_3;
		}
		a0 *= inv0;
		a1 *= inv0;
		a2 *= inv0;
		a3 *= inv0;
		b0 *= inv1;
		b1 *= inv1;
		b2 *= inv1;
		b3 *= inv1;
		v8_store(out0 + c, &a0);
		v8_store(out0 + c + VL, &a1);
		v8_store(out0 + c + 2 * VL, &a2);
		v8_store(out0 + c + 3 * VL, &a3);
		v8_store(out1 + c, &b0);
		v8_store(out1 + c + VL, &b1);
		v8_store(out1 + c + 2 * VL, &b2);
		v8_store(out1 + c + 3 * VL, &b3);
	}
	/* Narrower heads and tails: one head at a time, same operations. */
	if (c < hd) {
		attn_values_from(e0, nk, v, hd, c, inv0, out0);
		attn_values_from(e1, nk, v, hd, c, inv1, out1);
	}
}

/* ---- weights ------------------------------------------------------------- */

/* Each tensor draws from its own stream, so their order does not matter. */
static uint64_t stream(uint64_t seed, uint32_t tensor)
{
	uint64_t s = seed ^ ((uint64_t)tensor * 0xd1b54a32d192ed03ull);

	kvc_splitmix64(&s);
	return s;
}

/* Uniform in [-1, 1), exactly: 24 random bits. */
static float uniform(uint64_t *s)
{
	return ((float)(kvc_splitmix64(s) >> 40) - 8388608.0f) * 0x1p-23f;
}

enum {
	T_EMBED = 1, T_FINAL_NORM, T_HEAD,
	T_LAYER = 16,	/* + 16 * layer + one of: */
	T_ATTN_NORM = 0, T_FFN_NORM, T_Q, T_K, T_V, T_O, T_GATE, T_UP, T_DOWN,
};

static int pmat_alloc(struct pmat *m, uint32_t k, uint32_t n)
{
	m->k = k;
	m->n = n;
	m->np = (n + VL - 1) / VL;
	m->w = calloc((size_t)m->np * k * VL, sizeof(float));
	return m->w ? 0 : -ENOMEM;
}

/*
 * Draw a k x ncols matrix (row-major order of draws, scaled by
 * 1/sqrt(fan-in)) into columns col .. col+ncols-1 of m.
 */
static void pmat_fill(struct pmat *m, uint32_t col, uint32_t ncols,
		      uint64_t seed, uint32_t tensor)
{
	uint64_t s = stream(seed, tensor);
	float scale = (float)(1.0 / sqrt((double)m->k));

	for (uint32_t k = 0; k < m->k; k++)
		for (uint32_t j = col; j < col + ncols; j++)
			m->w[((size_t)(j / VL) * m->k + k) * VL + j % VL] =
				uniform(&s) * scale;
}

/* RMSNorm gains near 1, so that they matter but do not blow up. */
static float *norm_alloc(uint32_t n, uint64_t seed, uint32_t tensor)
{
	uint64_t s = stream(seed, tensor);
	float *w = malloc((size_t)n * sizeof(float));

	if (!w)
		return NULL;
	for (uint32_t i = 0; i < n; i++)
		w[i] = 1.0f + 0.125f * uniform(&s);
	return w;
}

static size_t pmat_bytes(const struct pmat *m)
{
	return (size_t)m->np * m->k * VL * sizeof(float);
}

/* ---- configurations ------------------------------------------------------ */

int model_config_named(const char *name, struct model_config *cfg)
{
	static const struct {
		const char *name;
		struct model_config cfg;
	} named[] = {
		{ "tiny", { .layers = 2, .d_model = 64, .n_heads = 4,
			    .n_kv_heads = 2, .head_dim = 16, .ffn_dim = 128,
			    .vocab = 256, .rope_theta = 10000.0f, .seed = 1,
			    .max_ctx = 4096 } },
		{ "demo", { .layers = 8, .d_model = 256, .n_heads = 8,
			    .n_kv_heads = 2, .head_dim = 32, .ffn_dim = 768,
			    .vocab = 4096, .rope_theta = 10000.0f, .seed = 1,
			    .max_ctx = 32768 } },
	};

	for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
		if (!strcmp(name, named[i].name)) {
			*cfg = named[i].cfg;
			return 0;
		}
	}
	return -ENOENT;
}

int model_config_check(const struct model_config *c)
{
	if (!c)
		return -EINVAL;
	if (!c->layers || c->layers > MODEL_MAX_LAYERS)
		return -EINVAL;
	if (!c->d_model || c->d_model > MODEL_MAX_DIM)
		return -EINVAL;
	if (!c->n_heads || !c->n_kv_heads || c->n_kv_heads > c->n_heads ||
	    c->n_heads % c->n_kv_heads)
		return -EINVAL;
	if (!c->head_dim || c->head_dim % 2 ||
	    c->head_dim > MODEL_MAX_HEAD_DIM)
		return -EINVAL;
	if ((uint64_t)c->n_heads * c->head_dim > MODEL_MAX_DIM)
		return -EINVAL;
	if (!c->ffn_dim || c->ffn_dim > MODEL_MAX_FFN)
		return -EINVAL;
	if (c->vocab < 2 || c->vocab > MODEL_MAX_VOCAB)
		return -EINVAL;
	/* NaN fails this too. */
	if (!(c->rope_theta > 1.0f && c->rope_theta <= 1e12f))
		return -EINVAL;
	if (!c->max_ctx || c->max_ctx > MODEL_MAX_CTX)
		return -EINVAL;
	return 0;
}

int model_describe(const struct model_config *c, char *buf, size_t len)
{
	return snprintf(buf, len, "L%u-D%u-H%u-KV%u-HD%u-F%u-V%u-R%.0f",
			c->layers, c->d_model, c->n_heads, c->n_kv_heads,
			c->head_dim, c->ffn_dim, c->vocab,
			(double)c->rope_theta);
}

/* ---- the model ----------------------------------------------------------- */

void model_free(struct model *m)
{
	if (!m)
		return;
	if (m->layers) {
		for (uint32_t l = 0; l < m->cfg.layers; l++) {
			struct layer *ly = &m->layers[l];

			free(ly->attn_norm);
			free(ly->ffn_norm);
			free(ly->qkv.w);
			free(ly->o.w);
			free(ly->gu.w);
			free(ly->down.w);
		}
		free(m->layers);
	}
	free(m->embed);
	free(m->final_norm);
	free(m->head.w);
	free(m->inv_freq);
	free(m);
}

static int layer_init(struct model *m, uint32_t l)
{
	const struct model_config *c = &m->cfg;
	struct layer *ly = &m->layers[l];
	uint32_t t = T_LAYER + 16 * l;
	uint64_t seed = c->seed;

	ly->attn_norm = norm_alloc(c->d_model, seed, t + T_ATTN_NORM);
	ly->ffn_norm = norm_alloc(c->d_model, seed, t + T_FFN_NORM);
	if (!ly->attn_norm || !ly->ffn_norm ||
	    pmat_alloc(&ly->qkv, c->d_model, m->qkvdim) ||
	    pmat_alloc(&ly->o, m->qdim, c->d_model) ||
	    pmat_alloc(&ly->gu, c->d_model, 2 * c->ffn_dim) ||
	    pmat_alloc(&ly->down, c->ffn_dim, c->d_model))
		return -ENOMEM;
	pmat_fill(&ly->qkv, 0, m->qdim, seed, t + T_Q);
	pmat_fill(&ly->qkv, m->qdim, m->kvdim, seed, t + T_K);
	pmat_fill(&ly->qkv, m->qdim + m->kvdim, m->kvdim, seed, t + T_V);
	pmat_fill(&ly->o, 0, c->d_model, seed, t + T_O);
	pmat_fill(&ly->gu, 0, c->ffn_dim, seed, t + T_GATE);
	pmat_fill(&ly->gu, c->ffn_dim, c->ffn_dim, seed, t + T_UP);
	pmat_fill(&ly->down, 0, c->d_model, seed, t + T_DOWN);
	m->weight_bytes += 2 * (size_t)c->d_model * sizeof(float) +
			   pmat_bytes(&ly->qkv) + pmat_bytes(&ly->o) +
			   pmat_bytes(&ly->gu) + pmat_bytes(&ly->down);
	return 0;
}

int model_create(const struct model_config *cfg, struct model **out)
{
	struct model *m;
	uint64_t s;
	int err;

	*out = NULL;
	err = model_config_check(cfg);
	if (err)
		return err;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->cfg = *cfg;
	m->qdim = cfg->n_heads * cfg->head_dim;
	m->kvdim = cfg->n_kv_heads * cfg->head_dim;
	m->qkvdim = m->qdim + 2 * m->kvdim;
	m->group = cfg->n_heads / cfg->n_kv_heads;
	m->attn_scale = (float)(1.0 / sqrt((double)cfg->head_dim));

	m->embed = malloc((size_t)cfg->vocab * cfg->d_model * sizeof(float));
	m->layers = calloc(cfg->layers, sizeof(*m->layers));
	m->final_norm = norm_alloc(cfg->d_model, cfg->seed, T_FINAL_NORM);
	m->inv_freq = malloc(cfg->head_dim / 2 * sizeof(double));
	if (!m->embed || !m->layers || !m->final_norm || !m->inv_freq ||
	    pmat_alloc(&m->head, cfg->d_model, cfg->vocab))
		goto nomem;
	s = stream(cfg->seed, T_EMBED);
	for (size_t i = 0; i < (size_t)cfg->vocab * cfg->d_model; i++)
		m->embed[i] = uniform(&s);
	pmat_fill(&m->head, 0, cfg->vocab, cfg->seed, T_HEAD);
	for (uint32_t i = 0; i < cfg->head_dim / 2; i++)
		m->inv_freq[i] = rope_inv_freq(cfg->rope_theta, cfg->head_dim,
					       i);
	m->weight_bytes = (size_t)cfg->vocab * cfg->d_model * sizeof(float) +
			  cfg->d_model * sizeof(float) + pmat_bytes(&m->head);
	for (uint32_t l = 0; l < cfg->layers; l++)
		if (layer_init(m, l))
			goto nomem;
	*out = m;
	return 0;
nomem:
	model_free(m);
	return -ENOMEM;
}

const struct model_config *model_get_config(const struct model *m)
{
	return &m->cfg;
}

size_t model_weight_bytes(const struct model *m)
{
	return m->weight_bytes;
}

uint64_t model_weights_hash(const struct model *m)
{
	const struct model_config *c = &m->cfg;
	uint64_t h = FNV_OFFSET;

	h = fnv1a(h, m->embed, (size_t)c->vocab * c->d_model * sizeof(float));
	for (uint32_t l = 0; l < c->layers; l++) {
		const struct layer *ly = &m->layers[l];

		h = fnv1a(h, ly->attn_norm, c->d_model * sizeof(float));
		h = fnv1a(h, ly->ffn_norm, c->d_model * sizeof(float));
		h = fnv1a(h, ly->qkv.w, pmat_bytes(&ly->qkv));
		h = fnv1a(h, ly->o.w, pmat_bytes(&ly->o));
		h = fnv1a(h, ly->gu.w, pmat_bytes(&ly->gu));
		h = fnv1a(h, ly->down.w, pmat_bytes(&ly->down));
	}
	h = fnv1a(h, m->final_norm, c->d_model * sizeof(float));
	return fnv1a(h, m->head.w, pmat_bytes(&m->head));
}

/* ---- the KV cache -------------------------------------------------------- */

int kv_create(const struct model *m, uint32_t max_tokens,
	      struct kv_cache **out)
{
	const struct model_config *c = &m->cfg;
	struct kv_cache *kv;
	size_t per_head;

	*out = NULL;
	if (!max_tokens || max_tokens > c->max_ctx)
		return -EINVAL;
	kv = calloc(1, sizeof(*kv));
	if (!kv)
		return -ENOMEM;
	kv->layers = c->layers;
	kv->n_kv = c->n_kv_heads;
	kv->hd = c->head_dim;
	kv->max_tokens = max_tokens;
	kv->kpanels = (max_tokens + VL - 1) / VL;
	per_head = (size_t)kv->kpanels * VL * kv->hd;
	/* Zeroed: attention reads whole K panels, past the last token too. */
	kv->k = calloc((size_t)kv->layers * kv->n_kv * per_head,
		       sizeof(float));
	kv->v = calloc((size_t)kv->layers * kv->n_kv * per_head,
		       sizeof(float));
	if (!kv->k || !kv->v) {
		kv_free(kv);
		return -ENOMEM;
	}
	*out = kv;
	return 0;
}

void kv_free(struct kv_cache *kv)
{
	if (!kv)
		return;
	free(kv->k);
	free(kv->v);
	free(kv->scratch);
	free(kv);
}

uint32_t kv_len(const struct kv_cache *kv)
{
	return kv->len;
}

uint32_t kv_max_tokens(const struct kv_cache *kv)
{
	return kv->max_tokens;
}

void kv_reset(struct kv_cache *kv)
{
	kv->len = 0;
}

size_t kv_block_bytes(const struct model *m, uint32_t tokens_per_block)
{
	const struct model_config *c = &m->cfg;

	return (size_t)c->layers * 2 * tokens_per_block * c->n_kv_heads *
	       c->head_dim * sizeof(float);
}

/* The K panels and V rows of layer l, KV head h. */
static float *kv_k(const struct kv_cache *kv, uint32_t l, uint32_t h)
{
	return kv->k + ((size_t)l * kv->n_kv + h) * kv->kpanels * VL * kv->hd;
}

static float *kv_v(const struct kv_cache *kv, uint32_t l, uint32_t h)
{
	return kv->v + ((size_t)l * kv->n_kv + h) * kv->kpanels * VL * kv->hd;
}

/* Where dimension d of the key of token t lies in its head's panels. */
static inline size_t kpos(uint32_t hd, uint32_t t, uint32_t d)
{
	return ((size_t)(t / VL) * hd + d) * VL + t % VL;
}

static int kv_range_ok(const struct kv_cache *kv, uint32_t first,
		       uint32_t ntokens)
{
	return ntokens && first <= kv->max_tokens &&
	       ntokens <= kv->max_tokens - first;
}

int kv_export(const struct kv_cache *kv, uint32_t first, uint32_t ntokens,
	      void *dst)
{
	float *o = dst;
	uint32_t hd = kv->hd;

	if (!kv_range_ok(kv, first, ntokens) || first + ntokens > kv->len)
		return -EINVAL;
	for (uint32_t l = 0; l < kv->layers; l++) {
		for (uint32_t t = first; t < first + ntokens; t++)
			for (uint32_t h = 0; h < kv->n_kv; h++) {
				const float *k = kv_k(kv, l, h);

				for (uint32_t d = 0; d < hd; d++)
					*o++ = k[kpos(hd, t, d)];
			}
		for (uint32_t t = first; t < first + ntokens; t++)
			for (uint32_t h = 0; h < kv->n_kv; h++) {
				memcpy(o, kv_v(kv, l, h) + (size_t)t * hd,
				       hd * sizeof(float));
				o += hd;
			}
	}
	return 0;
}

int kv_import(struct kv_cache *kv, uint32_t first, uint32_t ntokens,
	      const void *src)
{
	const float *in = src;
	uint32_t hd = kv->hd;

	if (!kv_range_ok(kv, first, ntokens) || first > kv->len)
		return -EINVAL;
	for (uint32_t l = 0; l < kv->layers; l++) {
		for (uint32_t t = first; t < first + ntokens; t++)
			for (uint32_t h = 0; h < kv->n_kv; h++) {
				float *k = kv_k(kv, l, h);

				for (uint32_t d = 0; d < hd; d++)
					k[kpos(hd, t, d)] = *in++;
			}
		for (uint32_t t = first; t < first + ntokens; t++)
			for (uint32_t h = 0; h < kv->n_kv; h++) {
				memcpy(kv_v(kv, l, h) + (size_t)t * hd, in,
				       hd * sizeof(float));
				in += hd;
			}
	}
	kv->len = first + ntokens;
	return 0;
}

/* ---- the reference forward pass --------------------------------------- */

/* Weight (k, j) of a packed matrix. */
static double pmat_at(const struct pmat *m, uint32_t k, uint32_t j)
{
	return m->w[((size_t)(j / VL) * m->k + k) * VL + j % VL];
}

/* out[j] = sum over k of x[k] * W[k][j], for columns col .. col+n-1. */
static void ref_matvec(const struct pmat *m, const double *x, uint32_t col,
		       uint32_t n, double *out)
{
	for (uint32_t j = 0; j < n; j++) {
		double a = 0;

		for (uint32_t k = 0; k < m->k; k++)
			a += x[k] * pmat_at(m, k, col + j);
		out[j] = a;
	}
}

static void ref_rmsnorm(double *out, const double *x, const float *w,
			uint32_t n)
{
	double ss = 0;

	for (uint32_t i = 0; i < n; i++)
		ss += x[i] * x[i];
	ss = 1.0 / sqrt(ss / n + (double)MODEL_RMS_EPS);
	for (uint32_t i = 0; i < n; i++)
		out[i] = x[i] * ss * w[i];
}

static void ref_rope(double *v, uint32_t hd, uint32_t pos,
		     const double *inv_freq)
{
	for (uint32_t i = 0; i < hd / 2; i++) {
		double a = v[i], b = v[i + hd / 2], ang = pos * inv_freq[i];

		v[i] = a * cos(ang) - b * sin(ang);
		v[i + hd / 2] = a * sin(ang) + b * cos(ang);
	}
}

/* Attention of query q (position pos) over the keys and values 0..pos. */
static void ref_attend(const struct model *m, const double *q,
		       const double *ks, const double *vs, uint32_t kh,
		       uint32_t pos, double *sc, double *out)
{
	uint32_t hd = m->cfg.head_dim;
	double mx = -INFINITY, sum = 0;

	for (uint32_t j = 0; j <= pos; j++) {
		const double *k = ks + ((size_t)j * m->cfg.n_kv_heads + kh) *
				       hd;

		sc[j] = 0;
		for (uint32_t d = 0; d < hd; d++)
			sc[j] += q[d] * k[d];
		sc[j] /= sqrt((double)hd);
		if (sc[j] > mx)
			mx = sc[j];
	}
	for (uint32_t j = 0; j <= pos; j++)
		sum += sc[j] = exp(sc[j] - mx);
	for (uint32_t d = 0; d < hd; d++)
		out[d] = 0;
	for (uint32_t j = 0; j <= pos; j++) {
		const double *v = vs + ((size_t)j * m->cfg.n_kv_heads + kh) *
				       hd;

		for (uint32_t d = 0; d < hd; d++)
			out[d] += sc[j] / sum * v[d];
	}
}

/* One layer for token t at position t: x updated, its K and V kept. */
static void ref_layer(const struct model *m, const struct layer *ly,
		      double *x, uint32_t t, double *ks, double *vs,
		      double *tmp)
{
	const struct model_config *c = &m->cfg;
	uint32_t d = c->d_model, hd = c->head_dim, ffn = c->ffn_dim;
	double *xn = tmp, *q = xn + d, *att = q + m->qdim, *o = att + m->qdim;
	double *g = o + d, *u = g + ffn, *sc = u + ffn;
	double *k = ks + (size_t)t * m->kvdim, *v = vs + (size_t)t * m->kvdim;

	ref_rmsnorm(xn, x, ly->attn_norm, d);
	ref_matvec(&ly->qkv, xn, 0, m->qdim, q);
	ref_matvec(&ly->qkv, xn, m->qdim, m->kvdim, k);
	ref_matvec(&ly->qkv, xn, m->qdim + m->kvdim, m->kvdim, v);
	for (uint32_t h = 0; h < c->n_heads; h++)
		ref_rope(q + h * hd, hd, t, m->inv_freq);
	for (uint32_t h = 0; h < c->n_kv_heads; h++)
		ref_rope(k + h * hd, hd, t, m->inv_freq);
	for (uint32_t h = 0; h < c->n_heads; h++)
		ref_attend(m, q + h * hd, ks, vs, h / m->group, t, sc,
			   att + h * hd);
	ref_matvec(&ly->o, att, 0, d, o);
	for (uint32_t i = 0; i < d; i++)
		x[i] += o[i];
	ref_rmsnorm(xn, x, ly->ffn_norm, d);
	ref_matvec(&ly->gu, xn, 0, ffn, g);
	ref_matvec(&ly->gu, xn, ffn, ffn, u);
	for (uint32_t i = 0; i < ffn; i++)
		g[i] = g[i] / (1 + exp(-g[i])) * u[i];
	ref_matvec(&ly->down, g, 0, d, o);
	for (uint32_t i = 0; i < d; i++)
		x[i] += o[i];
}

int model_reference_logits(const struct model *m, const uint32_t *tokens,
			   uint32_t n, double *logits)
{
	const struct model_config *c = &m->cfg;
	size_t kvn = (size_t)n * m->kvdim;
	double *x, *ks, *vs, *tmp, *xn;
	int err = -ENOMEM;

	if (!n || n > c->max_ctx)
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++)
		if (tokens[i] >= c->vocab)
			return -EINVAL;
	x = malloc((size_t)c->d_model * sizeof(*x));
	xn = malloc((size_t)c->d_model * sizeof(*xn));
	ks = malloc((size_t)c->layers * kvn * sizeof(*ks));
	vs = malloc((size_t)c->layers * kvn * sizeof(*vs));
	tmp = malloc((3 * (size_t)c->d_model + 2 * m->qdim +
		      2 * (size_t)c->ffn_dim + n) * sizeof(*tmp));
	if (!x || !xn || !ks || !vs || !tmp)
		goto out;
	/* Token by token: each sees the keys and values before it. */
	for (uint32_t t = 0; t < n; t++) {
		for (uint32_t i = 0; i < c->d_model; i++)
			x[i] = m->embed[(size_t)tokens[t] * c->d_model + i];
		for (uint32_t l = 0; l < c->layers; l++)
			ref_layer(m, &m->layers[l], x, t, ks + l * kvn,
				  vs + l * kvn, tmp);
	}
	ref_rmsnorm(xn, x, m->final_norm, c->d_model);
	ref_matvec(&m->head, xn, 0, c->vocab, logits);
	err = 0;
out:
	free(x);
	free(xn);
	free(ks);
	free(vs);
	free(tmp);
	return err;
}

/* ---- prefill ------------------------------------------------------------- */

/* One prefill call, shared by its threads. */
struct pf {
	const struct model *m;
	struct kv_cache *kv;
	const uint32_t *tokens;
	uint32_t start, n;
	float *logits;
	unsigned int nthr;
	pthread_barrier_t barrier;
	/* Workers wait here until the thread count is settled. */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int go;
	/* Chunk buffers, [PF_CHUNK][width] each. */
	float *x, *xn, *qkv, *att, *gu, *h, *cs;
	float *scores;		/* [nthr][group][round_up8(max_tokens)] */
	size_t score_stride;	/* floats per thread */
};

struct pf_worker {
	struct pf *pf;
	unsigned int tid;
	pthread_t thread;
};

static void pf_sync(struct pf *pf)
{
	if (pf->nthr > 1)
		pthread_barrier_wait(&pf->barrier);
}

/* Floats of one chunk buffer of width columns, kept 64-byte aligned. */
static size_t pf_buf_floats(size_t width)
{
	return (width * PF_CHUNK + 15) / 16 * 16;
}

/* Point *buf at the next chunk buffer of the scratch; advance *p. */
static void pf_take(float **p, float **buf, size_t width)
{
	*buf = *p;
	*p += pf_buf_floats(width);
}

/*
 * The call's scratch, in the sequence's cache (grown when needed): the
 * chunk buffers, then each thread's attention scores.
 */
static int pf_scratch(struct pf *pf)
{
	const struct model *m = pf->m;
	const struct model_config *c = &m->cfg;
	struct kv_cache *kv = pf->kv;
	size_t stride, floats, bytes;
	float *p;

	stride = ((size_t)m->group * round_up8(kv->max_tokens) + 15) / 16 * 16;
	floats = 2 * pf_buf_floats(c->d_model) + pf_buf_floats(m->qkvdim) +
		 pf_buf_floats(m->qdim) +
		 pf_buf_floats(2 * (size_t)c->ffn_dim) +
		 pf_buf_floats(c->ffn_dim) + pf_buf_floats(c->head_dim) +
		 pf->nthr * stride;
	bytes = floats * sizeof(float);
	if (bytes > kv->scratch_bytes) {
		void *mem = NULL;

		if (posix_memalign(&mem, 64, bytes))
			return -ENOMEM;
		free(kv->scratch);
		kv->scratch = mem;
		kv->scratch_bytes = bytes;
	}
	p = kv->scratch;
	pf_take(&p, &pf->x, c->d_model);
	pf_take(&p, &pf->xn, c->d_model);
	pf_take(&p, &pf->qkv, m->qkvdim);
	pf_take(&p, &pf->att, m->qdim);
	pf_take(&p, &pf->gu, 2 * (size_t)c->ffn_dim);
	pf_take(&p, &pf->h, c->ffn_dim);
	pf_take(&p, &pf->cs, c->head_dim);
	pf->scores = p;
	pf->score_stride = stride;
	return 0;
}

/*
 * Attention of the query of chunk row t (position pos) through KV head kh:
 * the group of query heads that share it, each over keys 0 .. pos.
 */
static void pf_attend(struct pf *pf, uint32_t l, uint32_t t, uint32_t pos,
		      uint32_t kh, float *s)
{
	const struct model *m = pf->m;
	uint32_t hd = m->cfg.head_dim, nk = pos + 1, npan = (nk + VL - 1) / VL;
	const float *kp = kv_k(pf->kv, l, kh), *vp = kv_v(pf->kv, l, kh);
	const float *q = pf->qkv + (size_t)t * m->qkvdim + kh * m->group * hd;
	float *out = pf->att + (size_t)t * m->qdim + kh * m->group * hd;
	size_t ss = round_up8(pf->kv->max_tokens);	/* floats a head */
	uint32_t g = 0;

	/* Heads by pairs, an odd one alone. */
	for (; g + 2 <= m->group; g += 2) {
		float *s0 = s, *s1 = s + ss, inv0, inv1;

		attn_scores2(q + g * hd, q + (g + 1) * hd, kp, hd, npan, s0,
			     s1);
		inv0 = 1.0f / softmax_exp(s0, nk);
		inv1 = 1.0f / softmax_exp(s1, nk);
		attn_values2(s0, s1, nk, vp, hd, inv0, inv1, out + g * hd,
			     out + (g + 1) * hd);
	}
	if (g < m->group) {
		attn_scores(q + g * hd, kp, hd, npan, s);
		attn_values_from(s, nk, vp, hd, 0, 1.0f / softmax_exp(s, nk),
				 out + g * hd);
	}
}

/* One layer over the nb tokens of the chunk at c0. */
static void pf_layer(struct pf *pf, uint32_t l, uint32_t c0, uint32_t nb,
		     unsigned int tid)
{
	const struct model *m = pf->m;
	const struct model_config *c = &m->cfg;
	const struct layer *ly = &m->layers[l];
	uint32_t d = c->d_model, hd = c->head_dim, half = hd / 2;
	uint32_t ffn = c->ffn_dim, nthr = pf->nthr, lo, hi, t;
	float *s = pf->scores + tid * pf->score_stride;

	split(nb, tid, nthr, &lo, &hi);
	for (t = lo; t < hi; t++)
		model_rmsnorm(pf->xn + (size_t)t * d, pf->x + (size_t)t * d,
			      ly->attn_norm, d, MODEL_RMS_EPS);
	pf_sync(pf);
	matmul(&ly->qkv, pf->xn, d, nb, pf->qkv, m->qkvdim, 0, tid, nthr);
	pf_sync(pf);

	/* RoPE; scale the queries; keys and values into the cache. */
	for (t = lo; t < hi; t++) {
		float *row = pf->qkv + (size_t)t * m->qkvdim;
		const float *cs = pf->cs + (size_t)t * hd;
		uint32_t pos = pf->start + c0 + t, i;

		for (uint32_t qh = 0; qh < c->n_heads; qh++) {
			float *q = row + qh * hd;

			rope_rotate(q, half, cs);
			for (i = 0; i < hd; i++)
				q[i] *= m->attn_scale;
		}
		for (uint32_t kh = 0; kh < c->n_kv_heads; kh++) {
			float *k = row + m->qdim + kh * hd;
			float *kp = kv_k(pf->kv, l, kh);

			rope_rotate(k, half, cs);
			for (i = 0; i < hd; i++)
				kp[kpos(hd, pos, i)] = k[i];
			memcpy(kv_v(pf->kv, l, kh) + (size_t)pos * hd,
			       row + m->qdim + m->kvdim + kh * hd,
			       hd * sizeof(float));
		}
	}
	pf_sync(pf);

	/* Interleaved (token, KV head) units balance the causal triangle. */
	for (uint32_t u = tid; u < nb * c->n_kv_heads; u += nthr) {
		t = u / c->n_kv_heads;
		pf_attend(pf, l, t, pf->start + c0 + t, u % c->n_kv_heads, s);
	}
	pf_sync(pf);
	matmul(&ly->o, pf->att, m->qdim, nb, pf->x, d, 1, tid, nthr);
	pf_sync(pf);

	for (t = lo; t < hi; t++)
		model_rmsnorm(pf->xn + (size_t)t * d, pf->x + (size_t)t * d,
			      ly->ffn_norm, d, MODEL_RMS_EPS);
	pf_sync(pf);
	matmul(&ly->gu, pf->xn, d, nb, pf->gu, 2 * (size_t)ffn, 0, tid, nthr);
	pf_sync(pf);
	for (t = lo; t < hi; t++) {
		const float *g = pf->gu + (size_t)t * 2 * ffn;

		model_swiglu(pf->h + (size_t)t * ffn, g, g + ffn, ffn);
	}
	pf_sync(pf);
	matmul(&ly->down, pf->h, ffn, nb, pf->x, d, 1, tid, nthr);
	pf_sync(pf);
}

static void pf_run(struct pf *pf, unsigned int tid)
{
	const struct model *m = pf->m;
	const struct model_config *c = &m->cfg;
	uint32_t d = c->d_model, hd = c->head_dim, c0, nb = 0, lo, hi;

	for (c0 = 0; c0 < pf->n; c0 += nb) {
		nb = pf->n - c0 < PF_CHUNK ? pf->n - c0 : PF_CHUNK;
		split(nb, tid, pf->nthr, &lo, &hi);
		for (uint32_t t = lo; t < hi; t++) {
			memcpy(pf->x + (size_t)t * d,
			       m->embed + (size_t)pf->tokens[c0 + t] * d,
			       d * sizeof(float));
			rope_angles(m->inv_freq, hd / 2, pf->start + c0 + t,
				    pf->cs + (size_t)t * hd);
		}
		pf_sync(pf);
		for (uint32_t l = 0; l < c->layers; l++)
			pf_layer(pf, l, c0, nb, tid);
	}
	if (!pf->logits)
		return;
	/* The last token of the last chunk: final norm, then the LM head. */
	if (tid == 0)
		model_rmsnorm(pf->xn, pf->x + (size_t)(nb - 1) * d,
			      m->final_norm, d, MODEL_RMS_EPS);
	pf_sync(pf);
	matmul(&m->head, pf->xn, d, 1, pf->logits, c->vocab, 0, tid,
	       pf->nthr);
}

static void *pf_thread(void *arg)
{
	struct pf_worker *w = arg;
	struct pf *pf = w->pf;

	pthread_mutex_lock(&pf->lock);
	while (!pf->go)
		pthread_cond_wait(&pf->cond, &pf->lock);
	pthread_mutex_unlock(&pf->lock);
	if (w->tid < pf->nthr)
		pf_run(pf, w->tid);
	return NULL;
}

/* Run pf on threads threads (the caller's included), or on fewer. */
static void pf_parallel(struct pf *pf, unsigned int threads)
{
	struct pf_worker workers[MODEL_MAX_THREADS];
	unsigned int started = 0;

	pthread_mutex_init(&pf->lock, NULL);
	pthread_cond_init(&pf->cond, NULL);
	pf->go = 0;
	for (unsigned int i = 1; i < threads; i++) {
		workers[started].pf = pf;
		workers[started].tid = i;
		if (pthread_create(&workers[started].thread, NULL, pf_thread,
				   &workers[started]))
			break;
		started++;
	}
	pf->nthr = started + 1;
	if (pf->nthr > 1 &&
	    pthread_barrier_init(&pf->barrier, NULL, pf->nthr))
		pf->nthr = 1;	/* the workers see it and leave */

	pthread_mutex_lock(&pf->lock);
	pf->go = 1;
	pthread_cond_broadcast(&pf->cond);
	pthread_mutex_unlock(&pf->lock);

	pf_run(pf, 0);
	for (unsigned int i = 0; i < started; i++)
		pthread_join(workers[i].thread, NULL);
	if (pf->nthr > 1)
		pthread_barrier_destroy(&pf->barrier);
	pthread_cond_destroy(&pf->cond);
	pthread_mutex_destroy(&pf->lock);
}

int model_prefill(const struct model *m, struct kv_cache *kv,
		  const uint32_t *tokens, uint32_t start, uint32_t n,
		  float *logits, unsigned int threads)
{
	const struct model_config *c;
	struct pf pf = { 0 };
	int err;

	if (!m || !kv || !tokens || !n)
		return -EINVAL;
	c = &m->cfg;
	if (kv->layers != c->layers || kv->n_kv != c->n_kv_heads ||
	    kv->hd != c->head_dim)
		return -EINVAL;
	if (start > kv->len || n > kv->max_tokens - start)
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++)
		if (tokens[i] >= c->vocab)
			return -EINVAL;
	if (threads > MODEL_MAX_THREADS)
		threads = MODEL_MAX_THREADS;
	if (!threads)
		threads = 1;

	pf.m = m;
	pf.kv = kv;
	pf.tokens = tokens;
	pf.start = start;
	pf.n = n;
	pf.logits = logits;
	/* Scratch for as many threads as asked, in case they all start. */
	pf.nthr = threads;
	err = pf_scratch(&pf);
	if (err)
		return err;
	if (threads == 1) {
		pf.nthr = 1;
		pf_run(&pf, 0);
	} else {
		pf_parallel(&pf, threads);
	}
	kv->len = start + n;
	return 0;
}
