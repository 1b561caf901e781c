// SPDX-License-Identifier: GPL-2.0
/*
 * Host tests for helper/common/keys.c: the vectors in key_vectors.txt (computed by
 * scripts/gen-key-vectors with Python's hashlib, an independent
 * implementation), and the properties the encoding promises: every
 * identity field changes the seed, keys chain (a prefix's keys are the
 * first keys of the longer sequence), partial blocks get no key, bad
 * identities are refused.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keys.h"
#include "tap.h"

#ifndef KVC_KEY_VECTORS
#error "build with -DKVC_KEY_VECTORS=\"path/to/key_vectors.txt\""
#endif

#define MAX_TOKENS	4096
#define MAX_KEYS	256

struct vcase {
	char name[64];
	char str[6][128];	/* model .. kv_dtype, lora */
	uint8_t salt[64];
	size_t salt_len;
	uint32_t u[5];		/* tokens_per_block, tp_rank/size, pp_rank/size */
	char tokens[64];
	char seed[65];
	char keys[MAX_KEYS * 65];
};

static const char *const str_names[6] = {
	"model", "weights_revision", "tokenizer", "kv_layout", "kv_dtype",
	"lora",
};
static const char *const u32_names[5] = {
	"tokens_per_block", "tp_rank", "tp_size", "pp_rank", "pp_size",
};

static void hex(const uint8_t *b, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
}

static void identity_of(const struct vcase *c, struct kvc_ns_identity *id)
{
	memset(id, 0, sizeof(*id));
	id->model = c->str[0];
	id->weights_revision = c->str[1];
	id->tokenizer = c->str[2];
	id->kv_layout = c->str[3];
	id->kv_dtype = c->str[4];
	id->lora = c->str[5];
	id->salt = c->salt;
	id->salt_len = c->salt_len;
	id->tokens_per_block = c->u[0];
	id->tp_rank = c->u[1];
	id->tp_size = c->u[2];
	id->pp_rank = c->u[3];
	id->pp_size = c->u[4];
}

/* Check one case; returns 0 when seed and every key match. */
static int check_case(const struct vcase *c)
{
	static uint32_t tokens[MAX_TOKENS];
	static uint8_t keys[MAX_KEYS][KVCACHE_KEY_SIZE];
	unsigned long long n, mul, add;
	struct kvc_ns_identity id;
	uint8_t seed[KVCACHE_KEY_SIZE];
	char got[MAX_KEYS * 65] = "", h[65];
	size_t nk, i;

	identity_of(c, &id);
	if (kvc_ns_seed(&id, seed))
		return -1;
	hex(seed, sizeof(seed), h);
	if (strcmp(h, c->seed)) {
		printf("# %s: seed %s, want %s\n", c->name, h, c->seed);
		return -1;
	}
	if (sscanf(c->tokens, "%llu:%llu:%llu", &n, &mul, &add) != 3 ||
	    n > MAX_TOKENS)
		return -1;
	for (i = 0; i < n; i++)
		tokens[i] = (uint32_t)(i * mul + add);
	nk = kvc_chain_keys(seed, tokens, n, id.tokens_per_block, keys,
			    MAX_KEYS);
	for (i = 0; i < nk; i++) {
		hex(keys[i], KVCACHE_KEY_SIZE, h);
		if (i)
			strcat(got, ",");
		strcat(got, h);
	}
	if (strcmp(got, c->keys)) {
		printf("# %s: keys differ\n#  got  %s\n#  want %s\n", c->name,
		       got, c->keys);
		return -1;
	}
	return 0;
}

static int set_field(struct vcase *c, const char *k, const char *v)
{
	size_t i;

	for (i = 0; i < 6; i++)
		if (!strcmp(k, str_names[i])) {
			snprintf(c->str[i], sizeof(c->str[i]), "%.127s", v);
			return 0;
		}
	for (i = 0; i < 5; i++)
		if (!strcmp(k, u32_names[i])) {
			c->u[i] = (uint32_t)strtoul(v, NULL, 0);
			return 0;
		}
	if (!strcmp(k, "salt_hex")) {
		c->salt_len = strlen(v) / 2;
		for (i = 0; i < c->salt_len && i < sizeof(c->salt); i++)
			sscanf(v + 2 * i, "%2hhx", &c->salt[i]);
		return 0;
	}
	if (!strcmp(k, "tokens"))
		snprintf(c->tokens, sizeof(c->tokens), "%.63s", v);
	else if (!strcmp(k, "seed"))
		snprintf(c->seed, sizeof(c->seed), "%.64s", v);
	else if (!strcmp(k, "keys"))
		snprintf(c->keys, sizeof(c->keys), "%s", v);
	else
		return -1;
	return 0;
}

static void vectors_match_the_python_reference(void)
{
	static char line[MAX_KEYS * 65 + 64];
	static struct vcase c;
	int cases = 0, bad = 0, in_case = 0;
	FILE *f = fopen(KVC_KEY_VECTORS, "r");

	TAP_ASSERT_TRUE(f != NULL);
	while (fgets(line, sizeof(line), f)) {
		char *eq;

		line[strcspn(line, "\n")] = '\0';
		if (!strncmp(line, "[case ", 6)) {
			memset(&c, 0, sizeof(c));
			snprintf(c.name, sizeof(c.name), "%.63s", line + 6);
			c.name[strcspn(c.name, "]")] = '\0';
			in_case = 1;
			continue;
		}
		if (!in_case || line[0] == '#')
			continue;
		if (!line[0]) {
			cases++;
			bad += check_case(&c) != 0;
			in_case = 0;
			continue;
		}
		eq = strchr(line, '=');
		TAP_CHECK(eq != NULL);
		if (!eq)
			break;
		*eq = '\0';
		TAP_CHECK(set_field(&c, line, eq + 1) == 0);
	}
	if (in_case) {
		cases++;
		bad += check_case(&c) != 0;
	}
	fclose(f);
	printf("# %d vector cases\n", cases);
	TAP_CHECK(cases >= 8);
	TAP_CHECK(bad == 0);
}

static struct kvc_ns_identity base_identity(void)
{
	struct kvc_ns_identity id = {
		.model = "m", .weights_revision = "r", .tokenizer = "t",
		.kv_layout = "l", .kv_dtype = "d", .lora = "",
		.tokens_per_block = 16, .tp_size = 1, .pp_size = 1,
	};

	return id;
}

static void every_identity_field_changes_the_seed(void)
{
	struct kvc_ns_identity id = base_identity(), v;
	uint8_t s0[32], s[32];
	static const uint8_t salt[] = { 1 };

	TAP_CHECK(kvc_ns_seed(&id, s0) == 0);
#define DIFFERS(change)							\
	do {								\
		v = id;							\
		change;							\
		TAP_CHECK(kvc_ns_seed(&v, s) == 0 && memcmp(s, s0, 32)); \
	} while (0)
	DIFFERS(v.model = "m2");
	DIFFERS(v.weights_revision = "r2");
	DIFFERS(v.tokenizer = "t2");
	DIFFERS(v.kv_layout = "l2");
	DIFFERS(v.kv_dtype = "d2");
	DIFFERS(v.lora = "a");
	DIFFERS((v.salt = salt, v.salt_len = 1));
	DIFFERS((v.ns_salt = salt, v.ns_salt_len = 1));
	DIFFERS(v.tokens_per_block = 32);
	DIFFERS((v.tp_size = 2, v.tp_rank = 1));
	DIFFERS(v.tp_size = 2);
	DIFFERS((v.pp_size = 2, v.pp_rank = 1));
	/* Fields do not run into each other: "ab"+"c" != "a"+"bc". */
	DIFFERS((v.model = "mr", v.weights_revision = ""));
#undef DIFFERS
	/* Same identity, same seed: no per-process state. */
	TAP_CHECK(kvc_ns_seed(&id, s) == 0 && !memcmp(s, s0, 32));
}

static void bad_identities_are_refused(void)
{
	struct kvc_ns_identity id = base_identity(), v;
	uint8_t s[32];

	v = id;
	v.model = NULL;
	TAP_EXPECT_EQ(kvc_ns_seed(&v, s), -EINVAL);
	v = id;
	v.tokens_per_block = 0;
	TAP_EXPECT_EQ(kvc_ns_seed(&v, s), -EINVAL);
	v = id;
	v.tp_rank = 1;
	TAP_EXPECT_EQ(kvc_ns_seed(&v, s), -EINVAL);
	v = id;
	v.pp_size = 0;
	TAP_EXPECT_EQ(kvc_ns_seed(&v, s), -EINVAL);
	v = id;
	v.salt_len = 4;		/* and no salt pointer */
	TAP_EXPECT_EQ(kvc_ns_seed(&v, s), -EINVAL);
	v = id;
	v.ns_salt_len = 32;	/* and no namespace salt pointer */
	TAP_EXPECT_EQ(kvc_ns_seed(&v, s), -EINVAL);
}

static void hexval(const char *h, uint8_t *out, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sscanf(h + 2 * i, "%2hhx", &out[i]);
}

/*
 * The namespace salt (field 13): the expected values were computed with
 * Python's hashlib from Documentation/userspace-api/keys.md (the identity of the
 * vectors' "base" case, namespace salt bytes 0..31, and the key of block
 * 0 = tokens 1..16), independently of keys.c. A salt the caller gives
 * (field 12) and the namespace's (field 13) are two fields, so moving
 * bytes from one to the other changes the seed; no namespace salt means
 * no field 13, the seed of the "base" vector.
 */
static void namespace_salt_is_its_own_field(void)
{
	static const uint32_t t[16] = {
		1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
	};
	struct kvc_ns_identity id = {
		.model = "meta-llama/Llama-3.1-8B-Instruct",
		.weights_revision = "0e9e39f249a16976918f6564b8830bc894c89659",
		.tokenizer = "llama3@0e9e39f2", .kv_layout = "paged-nhd",
		.kv_dtype = "bf16", .lora = "",
		.tokens_per_block = 16, .tp_size = 1, .pp_size = 1,
	}, v;
	uint8_t ns_salt[32], seed[32], want[32], key[32];

	for (int i = 0; i < 32; i++)
		ns_salt[i] = (uint8_t)i;
	TAP_CHECK(kvc_ns_seed(&id, seed) == 0);
	hexval("ee33552e6d60e6a0a5a09d1caed902ad36862607a61c0a9ef9f4c97e01ef3e2b",
	       want, 32);
	TAP_CHECK(!memcmp(seed, want, 32));
	id.ns_salt = ns_salt;
	id.ns_salt_len = 32;
	TAP_CHECK(kvc_ns_seed(&id, seed) == 0);
	hexval("efbade5d4e37537597bed19514e1f84089541d83e96ca4fe6e5b0597ca0bb4d0",
	       want, 32);
	TAP_CHECK(!memcmp(seed, want, 32));
	kvc_block_key(seed, t, 16, key);
	hexval("62f8fad7a6eacbd4b589ed275cd4fd54ec100a2edbcdf1b33653021db098a66c",
	       want, 32);
	TAP_CHECK(!memcmp(key, want, 32));
	/* The same bytes as the caller's salt give another seed. */
	v = id;
	v.ns_salt = NULL;
	v.ns_salt_len = 0;
	v.salt = ns_salt;
	v.salt_len = 32;
	TAP_CHECK(kvc_ns_seed(&v, want) == 0 && memcmp(want, seed, 32));
}

static void keys_chain_and_skip_partial_blocks(void)
{
	struct kvc_ns_identity id = base_identity();
	uint8_t seed[32], a[8][32], b[8][32], k[32];
	uint32_t t[128];

	for (int i = 0; i < 128; i++)
		t[i] = (uint32_t)(i * 7 + 3);
	TAP_CHECK(kvc_ns_seed(&id, seed) == 0);
	/* 40 tokens: 2 full blocks, the partial third gets no key. */
	TAP_CHECK(kvc_chain_keys(seed, t, 40, 16, a, 8) == 2);
	TAP_CHECK(kvc_chain_keys(seed, t, 100, 16, b, 8) == 6);
	TAP_CHECK(!memcmp(a, b, 2 * 32));	/* prefix property */
	TAP_CHECK(kvc_chain_keys(seed, t, 100, 16, b, 3) == 3);
	TAP_CHECK(kvc_chain_keys(seed, t, 100, 0, b, 8) == 0);
	/* Block 1's key depends on block 0's tokens through the chain. */
	kvc_block_key(a[0], t + 16, 16, k);
	TAP_CHECK(!memcmp(k, a[1], 32));
	t[0]++;
	TAP_CHECK(kvc_chain_keys(seed, t, 40, 16, b, 8) == 2);
	TAP_CHECK(memcmp(b[1], a[1], 32));
}

int main(void)
{
	TAP_RUN(vectors_match_the_python_reference);
	TAP_RUN(every_identity_field_changes_the_seed);
	TAP_RUN(bad_identities_are_refused);
	TAP_RUN(keys_chain_and_skip_partial_blocks);
	TAP_RUN(namespace_salt_is_its_own_field);
	return tap_done();
}
