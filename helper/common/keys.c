// SPDX-License-Identifier: GPL-2.0
/*
 * keys: namespace seeds and chained block keys (see keys.h and
 * Documentation/userspace-api/keys.md for the exact encoding).
 */
#include "keys.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#define NS_DOMAIN	"kvcache-ns-v1"
#define BLOCK_DOMAIN	"kvcache-block-v1"

/* Field tags of the namespace encoding: never reuse or renumber one. */
enum {
	TAG_MODEL = 1,
	TAG_WEIGHTS_REVISION,
	TAG_TOKENIZER,
	TAG_KV_LAYOUT,
	TAG_KV_DTYPE,
	TAG_TOKENS_PER_BLOCK,
	TAG_TP_RANK,
	TAG_TP_SIZE,
	TAG_PP_RANK,
	TAG_PP_SIZE,
	TAG_LORA,
	TAG_SALT,
	TAG_NS_SALT,
};

static void le32(uint8_t out[4], uint32_t v)
{
	out[0] = (uint8_t)v;
	out[1] = (uint8_t)(v >> 8);
	out[2] = (uint8_t)(v >> 16);
	out[3] = (uint8_t)(v >> 24);
}

/* One field: tag byte, 32-bit little-endian length, the bytes. */
static void put_field(EVP_MD_CTX *ctx, uint8_t tag, const void *p,
		      uint32_t len)
{
	uint8_t hdr[5];

	hdr[0] = tag;
	le32(hdr + 1, len);
	EVP_DigestUpdate(ctx, hdr, sizeof(hdr));
	EVP_DigestUpdate(ctx, p, len);
}

static void put_u32(EVP_MD_CTX *ctx, uint8_t tag, uint32_t v)
{
	uint8_t b[4];

	le32(b, v);
	put_field(ctx, tag, b, sizeof(b));
}

static int put_str(EVP_MD_CTX *ctx, uint8_t tag, const char *s)
{
	size_t n;

	if (!s)
		return -EINVAL;
	n = strlen(s);
	if (n > UINT32_MAX)
		return -EINVAL;
	put_field(ctx, tag, s, (uint32_t)n);
	return 0;
}

int kvc_ns_seed(const struct kvc_ns_identity *id,
		uint8_t seed[KVCACHE_KEY_SIZE])
{
	EVP_MD_CTX *ctx;
	int ret = 0;

	if (!id->tokens_per_block || !id->tp_size || !id->pp_size ||
	    id->tp_rank >= id->tp_size || id->pp_rank >= id->pp_size ||
	    (id->salt_len && !id->salt) || id->salt_len > UINT32_MAX ||
	    (id->ns_salt_len && !id->ns_salt) || id->ns_salt_len > UINT32_MAX)
		return -EINVAL;
	ctx = EVP_MD_CTX_new();
	if (!ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
		EVP_MD_CTX_free(ctx);
		return -ENOMEM;
	}
	EVP_DigestUpdate(ctx, NS_DOMAIN, sizeof(NS_DOMAIN));	/* with NUL */
	ret |= put_str(ctx, TAG_MODEL, id->model);
	ret |= put_str(ctx, TAG_WEIGHTS_REVISION, id->weights_revision);
	ret |= put_str(ctx, TAG_TOKENIZER, id->tokenizer);
	ret |= put_str(ctx, TAG_KV_LAYOUT, id->kv_layout);
	ret |= put_str(ctx, TAG_KV_DTYPE, id->kv_dtype);
	put_u32(ctx, TAG_TOKENS_PER_BLOCK, id->tokens_per_block);
	put_u32(ctx, TAG_TP_RANK, id->tp_rank);
	put_u32(ctx, TAG_TP_SIZE, id->tp_size);
	put_u32(ctx, TAG_PP_RANK, id->pp_rank);
	put_u32(ctx, TAG_PP_SIZE, id->pp_size);
	ret |= put_str(ctx, TAG_LORA, id->lora);
	put_field(ctx, TAG_SALT, id->salt ? (const void *)id->salt : "",
		  (uint32_t)id->salt_len);
	/* Absent, not empty, without one: opted-out keys stay as they were. */
	if (id->ns_salt_len)
		put_field(ctx, TAG_NS_SALT, id->ns_salt,
			  (uint32_t)id->ns_salt_len);
	if (!ret && !EVP_DigestFinal_ex(ctx, seed, NULL))
		ret = -ENOMEM;
	EVP_MD_CTX_free(ctx);
	return ret ? -EINVAL : 0;
}

void kvc_block_key(const uint8_t parent[KVCACHE_KEY_SIZE],
		   const uint32_t *tokens, uint32_t n,
		   uint8_t out[KVCACHE_KEY_SIZE])
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	uint8_t b[4 * 64];
	uint32_t i, j;

	/* Allocation failure of a few hundred bytes: nothing sane to do. */
	if (!ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL))
		abort();
	EVP_DigestUpdate(ctx, BLOCK_DOMAIN, sizeof(BLOCK_DOMAIN));
	EVP_DigestUpdate(ctx, parent, KVCACHE_KEY_SIZE);
	le32(b, n);
	EVP_DigestUpdate(ctx, b, 4);
	/* Token ids as 32-bit little-endian, in chunks. */
	for (i = 0; i < n; i += 64) {
		uint32_t m = n - i < 64 ? n - i : 64;

		for (j = 0; j < m; j++)
			le32(b + 4 * j, tokens[i + j]);
		EVP_DigestUpdate(ctx, b, 4 * m);
	}
	EVP_DigestFinal_ex(ctx, out, NULL);
	EVP_MD_CTX_free(ctx);
}

size_t kvc_chain_keys(const uint8_t seed[KVCACHE_KEY_SIZE],
		      const uint32_t *tokens, size_t ntokens,
		      uint32_t tokens_per_block,
		      uint8_t (*keys)[KVCACHE_KEY_SIZE], size_t max_keys)
{
	const uint8_t *parent = seed;
	size_t i, nblocks;

	if (!tokens_per_block)
		return 0;
	nblocks = ntokens / tokens_per_block;
	if (nblocks > max_keys)
		nblocks = max_keys;
	for (i = 0; i < nblocks; i++) {
		kvc_block_key(parent, tokens + i * tokens_per_block,
			      tokens_per_block, keys[i]);
		parent = keys[i];
	}
	return nblocks;
}
