/* SPDX-License-Identifier: GPL-2.0 */
/*
 * keys: block keys for KV-cache prefixes (Documentation/userspace-api/keys.md).
 *
 * A namespace identity (model, weights revision, tokenizer, KV layout and
 * dtype, tokens per block, parallel ranks and sizes, LoRA adapter, tenant
 * salt) hashes to a 32-byte seed; the key of block i of a token sequence
 * is SHA-256 over the key of block i-1 (the seed for block 0) and the
 * block's token ids. The encoding is fixed and little-endian, with no
 * per-process state, so every process on every machine derives the same
 * keys. The helper, the client library and the Python binding share it;
 * tests/unit/key_vectors.txt pins it.
 */
#ifndef KVC_KEYS_H
#define KVC_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include <linux/kvcache.h>

struct kvc_ns_identity {
	const char *model;		/* e.g. "meta-llama/Llama-3.1-8B" */
	const char *weights_revision;	/* e.g. a commit hash */
	const char *tokenizer;		/* name and revision */
	const char *kv_layout;		/* e.g. "paged-nhd" */
	const char *kv_dtype;		/* e.g. "bf16" */
	const char *lora;		/* adapter name and revision, "" for none */
	const uint8_t *salt;		/* tenant salt, may be empty */
	size_t salt_len;
	/*
	 * The namespace's salt from kvcached (NS_SALT), empty when the
	 * caller opted out. Hashed as its own field after salt, and only
	 * when present, so opted-out seeds are the version-1 seeds.
	 */
	const uint8_t *ns_salt;
	size_t ns_salt_len;
	uint32_t tokens_per_block;
	uint32_t tp_rank, tp_size;	/* tensor parallel */
	uint32_t pp_rank, pp_size;	/* pipeline parallel */
};

/*
 * The seed of a namespace. Returns 0, or -EINVAL for a missing string, a
 * zero tokens_per_block or size, or a rank not below its size.
 */
int kvc_ns_seed(const struct kvc_ns_identity *id,
		uint8_t seed[KVCACHE_KEY_SIZE]);

/* The key of one block of n tokens whose predecessor's key is parent. */
void kvc_block_key(const uint8_t parent[KVCACHE_KEY_SIZE],
		   const uint32_t *tokens, uint32_t n,
		   uint8_t out[KVCACHE_KEY_SIZE]);

/*
 * Keys of the full blocks of a token sequence, at most max_keys of them.
 * A trailing partial block gets no key (it is never stored). Returns the
 * number of keys written.
 */
size_t kvc_chain_keys(const uint8_t seed[KVCACHE_KEY_SIZE],
		      const uint32_t *tokens, size_t ntokens,
		      uint32_t tokens_per_block,
		      uint8_t (*keys)[KVCACHE_KEY_SIZE], size_t max_keys);

#endif /* KVC_KEYS_H */
