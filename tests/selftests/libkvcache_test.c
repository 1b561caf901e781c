// SPDX-License-Identifier: GPL-2.0
/*
 * Tests of libkvcache, the engines' library, against a real kvcached
 * (kvcd_fixture.h): memfd mode on the host, kernel mode in the test VM.
 * The library is linked statically, as an engine could; the fixture's own
 * raw client (kvc_client.h) sets namespaces up and flushes tiers.
 *
 * What is checked: bytes stored come back identical, through every load
 * call, from every tier (DRAM, g3, g4), from another process and after a
 * daemon restart; lookups and loads stop at the first missing block;
 * asynchronous calls complete and signal their eventfd; many threads at
 * once; and the error paths an engine must survive: no daemon, a daemon
 * restarting, a namespace it may not use, bad arguments, and a daemon that
 * answers nonsense or nothing (a fake one, in a thread).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "kvc_client.h"
#include "kvc_ioctl.h"
#include "kvc_p2p.h"
#include "kvc_sysfs.h"
#include "blockfile.h"
#include "keys.h"
#include "proto.h"
#include "libkvcache.h"

#include "kvcd_fixture.h"

#define BLOCK_BYTES	(64u * 1024)	/* KV bytes per block in these tests */
#define KEY		KVCACHE_LIB_KEY_SIZE

/* ---- helpers ---------------------------------------------------------------- */

static const struct kvcache_identity test_id = {
	.model = "libkvcache-test/model", .weights_revision = "r1",
	.tokenizer = "tok-1", .kv_layout = "test-layout", .kv_dtype = "f32",
	.lora = "", .tokens_per_block = TPB, .tp_size = 1, .pp_size = 1,
};

/* A token sequence of n blocks; different salts share no block. */
static void tokens_of(uint32_t salt, uint32_t nblocks, uint32_t *tok)
{
	for (uint32_t i = 0; i < nblocks * TPB; i++)
		tok[i] = salt * 1000003u + i * 7u + 1;
}

/* Block i's bytes are a function of its key: a wrong block is visible. */
static void kv_fill(uint8_t *p, const uint8_t *key)
{
	for (uint32_t i = 0; i < BLOCK_BYTES; i++)
		p[i] = (uint8_t)(key[i % KEY] ^ (i >> 8) ^ i);
}

static bool kv_same(const volatile uint8_t *p, const uint8_t *key)
{
	for (uint32_t i = 0; i < BLOCK_BYTES; i++)
		if (p[i] != (uint8_t)(key[i % KEY] ^ (i >> 8) ^ i))
			return false;
	return true;
}

/* One chain: tokens, keys and the block bytes. */
struct chain {
	uint32_t n;
	uint32_t tok[32 * TPB];
	uint8_t keys[32 * KEY];
	uint8_t *data;
};

static struct chain *chain_new(struct kvcache_namespace *ns, uint32_t salt,
			       uint32_t n)
{
	struct chain *ch = calloc(1, sizeof(*ch));

	if (!ch || n > 32)
		return NULL;
	ch->n = n;
	tokens_of(salt, n, ch->tok);
	if (kvcache_ns_keys(ns, ch->tok, n * TPB, ch->keys, n) != n)
		return NULL;
	ch->data = malloc((size_t)n * BLOCK_BYTES);
	for (uint32_t i = 0; ch->data && i < n; i++)
		kv_fill(ch->data + (size_t)i * BLOCK_BYTES, ch->keys + i * KEY);
	return ch->data ? ch : NULL;
}

static void chain_free(struct chain *ch)
{
	if (ch)
		free(ch->data);
	free(ch);
}

/* Load n blocks into a fresh buffer; how many came back with right bytes. */
static int load_check(struct kvcache_namespace *ns, const struct chain *ch,
		      uint32_t n)
{
	uint8_t *buf = calloc(n, BLOCK_BYTES);
	int got, good = 0;

	if (!buf)
		return -ENOMEM;
	got = kvcache_load(ns, ch->keys, n, buf, BLOCK_BYTES);
	for (int i = 0; i < got; i++)
		if (kv_same(buf + (size_t)i * BLOCK_BYTES, ch->keys + i * KEY))
			good++;
	free(buf);
	return got < 0 ? got : (good == got ? got : -EBADMSG);
}

/* A socket path of our own under $TMPDIR (the VM's /tmp is read-only). */
static void tmp_sock(char *out, size_t len, const char *what)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(out, len, "%s/libkvc-%s-%d.sock", tmp && *tmp ? tmp : "/tmp",
		 what, (int)getpid());
}

static int lib_open(SELF *self, struct kvcache **c,
		    struct kvcache_namespace **ns)
{
	struct kvcache_options o = { .socket = self->sock };
	int ret = kvcache_open(&o, c);

	if (ret)
		return ret;
	ret = kvcache_ns_open(*c, self->ns, &test_id, BLOCK_BYTES, ns);
	if (ret)
		kvcache_close(*c);
	return ret;
}

static uint64_t lib_stat(struct kvcache *c, const char *name)
{
	uint64_t v;

	return kvcache_stat(c, name, &v) ? UINT64_MAX : v;
}

/* ---- tests ------------------------------------------------------------------ */

/* Stored bytes come back through load, load_map, and lookup sees them. */
TEST_F(kvcd, store_lookup_load)
{
	struct kvcache_client_info info;
	struct kvc_flush_reply fr;
	struct kvcache_block blk[8];
	struct kvcache_namespace *ns;
	struct kvcache *c;
	struct chain *ch;
	uint32_t tiers[8];

	ASSERT_EQ(0, lib_open(self, &c, &ns));
	ASSERT_EQ(0, kvcache_get_info(c, &info));
	EXPECT_EQ(self->mode == KVC_PROTO_MODE_KERNEL ? KVCACHE_MODE_KERNEL :
		  KVCACHE_MODE_MEMFD, info.mode);
	EXPECT_EQ(self->bs, info.block_size);
	ch = chain_new(ns, 1, 8);
	ASSERT_NE(NULL, ch);

	EXPECT_EQ(0, kvcache_lookup(ns, ch->keys, 8, tiers));
	EXPECT_EQ(0, load_check(ns, ch, 8));
	ASSERT_EQ(8, kvcache_store(ns, NULL, ch->keys, 8, ch->data,
				   BLOCK_BYTES));
	EXPECT_EQ(8, kvcache_lookup(ns, ch->keys, 8, tiers));
	for (int i = 0; i < 8; i++) {
		EXPECT_TRUE(tiers[i] & KVCACHE_TIER_DRAM);
	}
	EXPECT_EQ(8, load_check(ns, ch, 8));
	/* Storing again: already cached, counted as stored. */
	EXPECT_EQ(8, kvcache_store(ns, NULL, ch->keys, 8, ch->data,
				   BLOCK_BYTES));

	ASSERT_EQ(8, kvcache_load_map(ns, ch->keys, 8, blk));
	for (int i = 0; i < 8; i++) {
		EXPECT_EQ(BLOCK_BYTES, blk[i].len);
		EXPECT_TRUE(kv_same(blk[i].data, ch->keys + i * KEY));
	}
	kvcache_release(c, blk, 8);
	for (int i = 0; i < 8; i++) {
		EXPECT_EQ(NULL, blk[i].data);
	}
	/* The daemon's own hits, and those the fast path reported. */
	EXPECT_LE(8, lib_stat(c, "hit_keys") + lib_stat(c, "client_hit_keys"));
	/* Released: nothing is pinned or mapped, so all of it can go. */
	ASSERT_EQ(0, kvcc_flush_tiers(&self->c, self->ns, KVC_PROTO_TIER_POOL,
				      &fr));
	EXPECT_EQ(0, fr.busy);
	EXPECT_LE(8, fr.evicted);
	chain_free(ch);
	kvcache_close(c);
}

/*
 * Kernel mode: loads read through the pool view, not a mapping per block.
 * The first load faults each block into the view once; loading them again
 * faults nothing; load_map points into the view (no mapping of its own)
 * and its pins hold the blocks until the release.
 */
TEST_F(kvcd, kernel_loads_read_through_the_pool_view)
{
	struct kvcache_block blk[4];
	struct kvcache_namespace *ns;
	struct kvc_flush_reply fr;
	struct kvcache *c;
	struct chain *ch;
	uint64_t f0, f1;

	if (self->mode != KVC_PROTO_MODE_KERNEL)
		SKIP(return, "the pool view is kernel mode's");
	ASSERT_EQ(0, lib_open(self, &c, &ns));
	ch = chain_new(ns, 7, 4);
	ASSERT_NE(NULL, ch);
	ASSERT_EQ(4, kvcache_store(ns, NULL, ch->keys, 4, ch->data,
				   BLOCK_BYTES));
	f0 = kvc_attr_u64("stats/view_faults");
	EXPECT_EQ(4, load_check(ns, ch, 4));
	f1 = kvc_attr_u64("stats/view_faults");
	EXPECT_LE(f0 + 4, f1);
	EXPECT_EQ(4, load_check(ns, ch, 4));
	EXPECT_EQ(f1, kvc_attr_u64("stats/view_faults"));

	ASSERT_EQ(4, kvcache_load_map(ns, ch->keys, 4, blk));
	for (int i = 0; i < 4; i++) {
		EXPECT_EQ(NULL, blk[i].map);
		EXPECT_TRUE(kv_same(blk[i].data, ch->keys + i * KEY));
	}
	/* Pinned by the library: nothing can be flushed. */
	ASSERT_EQ(0, kvcc_flush_tiers(&self->c, self->ns, KVC_PROTO_TIER_POOL,
				      &fr));
	EXPECT_EQ(4, fr.busy);
	kvcache_release(c, blk, 4);
	ASSERT_EQ(0, kvcc_flush_tiers(&self->c, self->ns, KVC_PROTO_TIER_POOL,
				      &fr));
	EXPECT_EQ(0, fr.busy);
	EXPECT_LE(4, fr.evicted);
	chain_free(ch);
	kvcache_close(c);
}

/* A chain stored in two calls, the second continuing the first. */
TEST_F(kvcd, store_continues_a_chain)
{
	struct kvcache_namespace *ns;
	struct kvcache *c;
	uint8_t stray[KEY], stray_parent[KEY];
	struct chain *ch;
	uint8_t *buf;

	ASSERT_EQ(0, lib_open(self, &c, &ns));
	ch = chain_new(ns, 2, 12);
	ASSERT_NE(NULL, ch);
	ASSERT_EQ(5, kvcache_store(ns, NULL, ch->keys, 5, ch->data,
				   BLOCK_BYTES));
	ASSERT_EQ(7, kvcache_store(ns, ch->keys + 4 * KEY, ch->keys + 5 * KEY,
				   7, ch->data + 5 * BLOCK_BYTES, BLOCK_BYTES));
	EXPECT_EQ(12, load_check(ns, ch, 12));
	/* A parent the cache never saw: nothing stored. */
	memset(stray, 0x55, sizeof(stray));
	memset(stray_parent, 0x66, sizeof(stray_parent));
	EXPECT_EQ(-ENOENT, kvcache_store(ns, stray_parent, stray, 1, ch->data,
					 BLOCK_BYTES));
	EXPECT_EQ(0, kvcache_lookup(ns, stray, 1, NULL));
	/* With a stride: block i at buf + i * 2 * BLOCK_BYTES. */
	buf = calloc(12, 2 * BLOCK_BYTES);
	ASSERT_EQ(12, kvcache_load(ns, ch->keys, 12, buf, 2 * BLOCK_BYTES));
	for (int i = 0; i < 12; i++) {
		EXPECT_TRUE(kv_same(buf + (size_t)i * 2 * BLOCK_BYTES,
				 ch->keys + i * KEY));
	}
	free(buf);
	chain_free(ch);
	kvcache_close(c);
}

/* Lookups and loads stop at the first block that is not cached. */
TEST_F(kvcd, prefix_stops_at_a_gap)
{
	struct kvcache_namespace *ns;
	struct kvcache *c;
	struct chain *ch;
	int32_t st[1];

	ASSERT_EQ(0, lib_open(self, &c, &ns));
	ch = chain_new(ns, 3, 10);
	ASSERT_NE(NULL, ch);
	ASSERT_EQ(10, kvcache_store(ns, NULL, ch->keys, 10, ch->data,
				    BLOCK_BYTES));
	/* Evict the leaf, then block 9 is gone: 9 of 10 left. */
	ASSERT_EQ(0, kvcc_evict(&self->c, self->ns, ch->keys + 9 * KEY, 1, st));
	ASSERT_EQ(0, st[0]);
	EXPECT_EQ(9, kvcache_lookup(ns, ch->keys, 10, NULL));
	EXPECT_EQ(9, load_check(ns, ch, 10));
	/* A key that is not the chain's in the middle of the request. */
	memset(ch->keys + 4 * KEY, 0xab, KEY);
	EXPECT_EQ(4, kvcache_lookup(ns, ch->keys, 10, NULL));
	EXPECT_EQ(4, load_check(ns, ch, 10));
	chain_free(ch);
	kvcache_close(c);
}

/* Asynchronous stores and loads complete, with their tags and eventfd. */
TEST_F(kvcd, async_calls_complete)
{
	struct kvcache_completion done[4];
	struct kvcache_namespace *ns;
	struct pollfd pfd;
	struct kvcache *c;
	struct chain *a, *b;
	uint8_t *buf;
	int got = 0;

	ASSERT_EQ(0, lib_open(self, &c, &ns));
	a = chain_new(ns, 4, 6);
	b = chain_new(ns, 5, 6);
	ASSERT_NE(NULL, a);
	ASSERT_NE(NULL, b);
	ASSERT_EQ(0, kvcache_store_async(ns, NULL, a->keys, 6, a->data,
					 BLOCK_BYTES, 11));
	ASSERT_EQ(0, kvcache_store_async(ns, NULL, b->keys, 6, b->data,
					 BLOCK_BYTES, 22));
	pfd = (struct pollfd){ .fd = kvcache_event_fd(c), .events = POLLIN };
	ASSERT_LE(0, pfd.fd);
	ASSERT_EQ(1, poll(&pfd, 1, 10000));
	while (got < 2) {
		int r = kvcache_poll(c, done + got, 4, 10000);

		ASSERT_LT(0, r);
		got += r;
	}
	EXPECT_EQ(0, kvcache_pending(c));
	for (int i = 0; i < 2; i++) {
		EXPECT_TRUE(done[i].tag == 11 || done[i].tag == 22);
		EXPECT_EQ(6, done[i].result);
	}
	/* Drained: the eventfd is quiet again. */
	EXPECT_EQ(0, poll(&pfd, 1, 0));
	EXPECT_EQ(0, kvcache_poll(c, done, 4, 0));

	buf = calloc(6, BLOCK_BYTES);
	ASSERT_EQ(0, kvcache_load_async(ns, b->keys, 6, buf, BLOCK_BYTES, 33));
	ASSERT_EQ(1, kvcache_poll(c, done, 4, 10000));
	EXPECT_EQ(33, done[0].tag);
	EXPECT_EQ(6, done[0].result);
	for (int i = 0; i < 6; i++) {
		EXPECT_TRUE(kv_same(buf + (size_t)i * BLOCK_BYTES,
				 b->keys + i * KEY));
	}
	/* Bad arguments are refused at once, not completed later. */
	EXPECT_EQ(-EINVAL, kvcache_load_async(ns, b->keys, 6, buf, 1, 44));
	EXPECT_EQ(0, kvcache_pending(c));
	free(buf);
	chain_free(a);
	chain_free(b);
	kvcache_close(c);
}

/* Another process, with its own client, reads what this one stored. */
TEST_F(kvcd, reuse_across_processes)
{
	struct kvcache_namespace *ns;
	struct kvcache *c;
	struct chain *ch;
	pid_t pid;
	int st;

	ASSERT_EQ(0, lib_open(self, &c, &ns));
	ch = chain_new(ns, 6, 8);
	ASSERT_NE(NULL, ch);
	ASSERT_EQ(8, kvcache_store(ns, NULL, ch->keys, 8, ch->data,
				   BLOCK_BYTES));
	kvcache_close(c);
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		struct kvcache_namespace *ns2;
		struct kvcache *c2;
		struct chain *mine;

		if (lib_open(self, &c2, &ns2))
			_exit(2);
		/* Derived again from the tokens, not inherited. */
		mine = chain_new(ns2, 6, 8);
		_exit(mine && load_check(ns2, mine, 8) == 8 ? 0 : 1);
	}
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	chain_free(ch);
}

/* Loads come back from g3 and from g4 once the tiers above are flushed. */
TEST_F_TIMEOUT(kvcd, loads_from_every_tier, 180)
{
	char g3[PATH_MAX], g4[PATH_MAX], conf[3 * PATH_MAX], why[512] = "";
	struct kvc_flush_reply fr;
	struct kvcache_namespace *ns;
	struct kvcache *c;
	struct chain *ch;
	uint32_t tiers[8];

	tier_dir(g3, sizeof(g3), "g3");
	tier_dir(g4, sizeof(g4), "g4");
	snprintf(conf, sizeof(conf),
		 "[g3]\ndirectory = %s\ncapacity = 64M\nwrite = through\n"
		 "[g4]\ndirectory = %s\ncapacity = 64M\nwrite = through\n"
		 "node = n1\n", g3, g4);
	ASSERT_EQ(0, restart(self, conf, why, sizeof(why))) TH_LOG("%s", why);
	ASSERT_EQ(0, lib_open(self, &c, &ns));
	ch = chain_new(ns, 7, 8);
	ASSERT_NE(NULL, ch);
	ASSERT_EQ(8, kvcache_store(ns, NULL, ch->keys, 8, ch->data,
				   BLOCK_BYTES));
	ASSERT_EQ(8, wait_stat(&self->c, "g3_spills", 8, 30));
	ASSERT_EQ(8, wait_stat(&self->c, "g4_spills", 8, 30));

	/* DRAM gone: the blocks come from g3. */
	ASSERT_EQ(0, flush_pool(&self->c, self->ns));
	ASSERT_EQ(8, kvcache_lookup(ns, ch->keys, 8, tiers));
	for (int i = 0; i < 8; i++) {
		EXPECT_EQ(KVCACHE_TIER_G3 | KVCACHE_TIER_G4, tiers[i]);
	}
	EXPECT_EQ(8, load_check(ns, ch, 8));
	EXPECT_LE(8, lib_stat(c, "promotions"));

	/* DRAM and g3 gone: from g4. */
	ASSERT_EQ(0, kvcc_flush_tiers(&self->c, self->ns,
				      KVC_PROTO_TIER_POOL | KVC_PROTO_TIER_G3,
				      &fr));
	ASSERT_EQ(8, kvcache_lookup(ns, ch->keys, 8, tiers));
	for (int i = 0; i < 8; i++) {
		EXPECT_EQ(KVCACHE_TIER_G4, tiers[i]);
	}
	EXPECT_EQ(8, load_check(ns, ch, 8));
	EXPECT_LE(8, lib_stat(c, "g4_reads"));
	chain_free(ch);
	kvcache_close(c);
	rm_rf(g3);
	rm_rf(g4);
}

/*
 * kvcached restarts under an open client: the call caught by it fails
 * with a clear error, later calls reconnect by themselves, and the blocks
 * g3 kept are there, intact.
 */
TEST_F_TIMEOUT(kvcd, daemon_restart_under_a_client, 180)
{
	char g3[PATH_MAX], conf[PATH_MAX + 128], why[512] = "";
	struct kvcache_namespace *ns;
	struct kvcache *c;
	struct chain *ch;
	int r = 0;

	g3_through(g3, sizeof(g3), conf, sizeof(conf));
	ASSERT_EQ(0, restart(self, conf, why, sizeof(why))) TH_LOG("%s", why);
	ASSERT_EQ(0, lib_open(self, &c, &ns));
	ch = chain_new(ns, 8, 8);
	ASSERT_NE(NULL, ch);
	ASSERT_EQ(8, kvcache_store(ns, NULL, ch->keys, 8, ch->data,
				   BLOCK_BYTES));
	ASSERT_EQ(8, wait_stat(&self->c, "g3_spills", 8, 30));

	/* Down: a clear error, no crash. */
	kvcc_close(&self->c);
	daemon_stop(self);
	unlink(self->sock);
	r = kvcache_lookup(ns, ch->keys, 8, NULL);
	EXPECT_TRUE(r == -ECONNRESET || r == -ENOENT || r == -ECONNREFUSED)
		TH_LOG("lookup with the daemon down: %d", r);
	r = kvcache_load(ns, ch->keys, 8, ch->data, BLOCK_BYTES);
	EXPECT_TRUE(r == -ECONNRESET || r == -ENOENT || r == -ECONNREFUSED)
		TH_LOG("load with the daemon down: %d", r);
	EXPECT_NE(NULL, kvcache_strerror(r));

	/* Back: the next calls work, and g3 still has the chain. */
	ASSERT_EQ(0, restart(self, conf, why, sizeof(why))) TH_LOG("%s", why);
	for (int i = 0; i < 3; i++) {
		r = kvcache_lookup(ns, ch->keys, 8, NULL);
		if (r >= 0)
			break;
	}
	EXPECT_EQ(8, r);
	for (uint32_t i = 0; i < 8; i++)
		kv_fill(ch->data + (size_t)i * BLOCK_BYTES, ch->keys + i * KEY);
	EXPECT_EQ(8, load_check(ns, ch, 8));
	chain_free(ch);
	kvcache_close(c);
	rm_rf(g3);
}

/* Store chain ch (one block), retrying once past a restart; the result. */
static int store_one(struct kvcache_namespace *ns, const struct chain *ch)
{
	int r = kvcache_store(ns, NULL, ch->keys, 1, ch->data, BLOCK_BYTES);

	if (r < 0)	/* a call caught by a restart fails once */
		r = kvcache_store(ns, NULL, ch->keys, 1, ch->data,
				  BLOCK_BYTES);
	return r;
}

/*
 * memfd mode: a connection keeps blocks allocated ahead, so that most
 * stores are one STORE. The next stores take them (no block more leaves
 * the pool) with the right bytes; the reserve spent, a store allocates
 * again; a daemon restart takes them along (never used on the new
 * daemon, whose blocks they are not), and the client's close gives the
 * new reserve back to the pool.
 */
TEST_F_TIMEOUT(kvcd, stores_use_blocks_allocated_ahead, 120)
{
	struct kvcache_namespace *ns;
	struct chain *ch[12] = { NULL };
	char why[512] = "";
	struct kvcache *c;
	uint64_t f0, f1, ahead;
	uint32_t i;

	if (self->mode != KVC_PROTO_MODE_MEMFD)
		SKIP(return, "kernel mode allocates with the ioctl");
	ASSERT_EQ(0, lib_open(self, &c, &ns));
	for (i = 0; i < 12; i++) {
		ch[i] = chain_new(ns, 40 + i, 1);
		ASSERT_NE(NULL, ch[i]);
	}
	f0 = kvcc_stat1(&self->c, "pool_free");
	ASSERT_EQ(1, store_one(ns, ch[0]));
	f1 = kvcc_stat1(&self->c, "pool_free");
	ASSERT_LT(f1 + 1, f0) TH_LOG("no block allocated ahead");
	ahead = f0 - f1 - 1;
	ASSERT_GE(8, ahead);
	for (i = 1; i <= ahead; i++) {
		ASSERT_EQ(1, store_one(ns, ch[i]));
		EXPECT_EQ(f1, kvcc_stat1(&self->c, "pool_free"))
			TH_LOG("store %u did not take a block ahead", i);
	}
	ASSERT_EQ(1, store_one(ns, ch[i]));
	EXPECT_EQ(f1 - 1 - ahead, kvcc_stat1(&self->c, "pool_free"));
	for (i = 0; i <= ahead + 1; i++)
		EXPECT_EQ(1, load_check(ns, ch[i], 1)) TH_LOG("chain %u", i);

	/* A new daemon: the reserve died with the old one. */
	ASSERT_EQ(0, restart(self, NULL, why, sizeof(why))) TH_LOG("%s", why);
	f0 = kvcc_stat1(&self->c, "pool_free");
	ASSERT_EQ(1, store_one(ns, ch[10]));
	ASSERT_EQ(1, store_one(ns, ch[11]));
	EXPECT_EQ(1, load_check(ns, ch[10], 1));
	EXPECT_EQ(1, load_check(ns, ch[11], 1));
	EXPECT_EQ(f0 - 1 - ahead, kvcc_stat1(&self->c, "pool_free"));

	/* Closed: what was allocated ahead goes back. */
	kvcache_close(c);
	EXPECT_EQ(f0 - 2, wait_stat(&self->c, "pool_free", f0 - 2, 10));
	for (i = 0; i < 12; i++)
		chain_free(ch[i]);
}

/*
 * A client killed holding blocks allocated ahead (no kvcache_close):
 * the daemon frees them at the hangup, and keeps what it stored.
 */
TEST_F(kvcd, killed_client_gives_back_its_blocks_ahead)
{
	uint64_t f0 = kvcc_stat1(&self->c, "pool_free");
	struct kvcache_namespace *ns;
	struct kvcache *c;
	struct chain *ch;
	int pipefd[2], st;
	char byte;
	pid_t pid;

	if (self->mode != KVC_PROTO_MODE_MEMFD)
		SKIP(return, "kernel mode allocates with the ioctl");
	ASSERT_EQ(0, pipe(pipefd));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		close(pipefd[0]);
		if (lib_open(self, &c, &ns))
			_exit(2);
		ch = chain_new(ns, 70, 1);
		if (!ch || kvcache_store(ns, NULL, ch->keys, 1, ch->data,
					 BLOCK_BYTES) != 1)
			_exit(3);
		if (write(pipefd[1], "s", 1) != 1)
			_exit(4);
		pause();	/* killed here, its connections open */
		_exit(5);
	}
	close(pipefd[1]);
	ASSERT_EQ(1, read(pipefd[0], &byte, 1));
	close(pipefd[0]);
	/* Stored, and blocks held ahead by the live client. */
	EXPECT_GT(f0 - 1, kvcc_stat1(&self->c, "pool_free"));
	ASSERT_EQ(0, kill(pid, SIGKILL));
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_EQ(f0 - 1, wait_stat(&self->c, "pool_free", f0 - 1, 10));
	/* What it stored is there, byte-exact. */
	ASSERT_EQ(0, lib_open(self, &c, &ns));
	ch = chain_new(ns, 70, 1);
	ASSERT_NE(NULL, ch);
	EXPECT_EQ(1, load_check(ns, ch, 1));
	chain_free(ch);
	kvcache_close(c);
}

struct worker_arg {
	struct kvcache_namespace *ns;
	uint32_t salt;
	int result;
};

static void *worker(void *p)
{
	struct worker_arg *w = p;
	struct chain *ch = chain_new(w->ns, w->salt, 2);

	w->result = -ENOMEM;
	if (!ch)
		return NULL;
	w->result = kvcache_store(w->ns, NULL, ch->keys, 2, ch->data,
				  BLOCK_BYTES);
	for (int round = 0; w->result == 2 && round < 20; round++)
		w->result = load_check(w->ns, ch, 2);
	chain_free(ch);
	return NULL;
}

/* fast_hits through the library, once the daemon has read our TOUCHes. */
static uint64_t wait_fast_hits(struct kvcache *c, uint64_t want)
{
	uint64_t v = lib_stat(c, "fast_hits");

	for (int i = 0; i < 500 && (v == UINT64_MAX || v < want); i++) {
		msleep(10);
		v = lib_stat(c, "fast_hits");
	}
	return v;
}

/*
 * The fast path, in both modes: blocks in the pool load with the daemon
 * stopped (no round trip), right bytes, and the daemon counts them once
 * it runs again; in kernel mode kvcache_load_map() hands them out pinned
 * too. With KVCACHE_FAST_PATH=0 a client asks the daemon.
 */
TEST_F_TIMEOUT(kvcd, dram_hits_need_no_round_trip, 90)
{
	static uint8_t buf[8 * BLOCK_BYTES];
	struct kvcache_namespace *ns, *ns2;
	struct kvcache *c, *c2;
	struct chain *ch;
	uint64_t h0;
	int got;

	ASSERT_EQ(0, lib_open(self, &c, &ns));
	ch = chain_new(ns, 70, 8);
	ASSERT_NE(NULL, ch);
	ASSERT_EQ(8, kvcache_store(ns, NULL, ch->keys, 8, ch->data,
				   BLOCK_BYTES));
	h0 = lib_stat(c, "fast_hits");
	ASSERT_NE(UINT64_MAX, h0);

	ASSERT_EQ(0, kill(self->daemon, SIGSTOP));
	got = load_check(ns, ch, 8);
	kill(self->daemon, SIGCONT);
	ASSERT_EQ(8, got);
	EXPECT_EQ(h0 + 8, wait_fast_hits(c, h0 + 8));

	/*
	 * Enough hits with the daemon stopped to fill the socket with
	 * TOUCHes (256 hits each): the loads must not wait for it.
	 */
	ASSERT_EQ(0, kill(self->daemon, SIGSTOP));
	for (int i = 0; i < 6000 && got == 8; i++)
		got = kvcache_load(ns, ch->keys, 8, buf, BLOCK_BYTES);
	kill(self->daemon, SIGCONT);
	EXPECT_EQ(8, got);
	EXPECT_EQ(8, load_check(ns, ch, 8));
	EXPECT_LE(h0 + 8, wait_fast_hits(c, h0 + 8));
	if (self->mode == KVC_PROTO_MODE_KERNEL) {
		struct kvcache_block b[8];

		ASSERT_EQ(0, kill(self->daemon, SIGSTOP));
		got = kvcache_load_map(ns, ch->keys, 8, b);
		kill(self->daemon, SIGCONT);
		ASSERT_EQ(8, got);
		for (int i = 0; i < 8; i++)
			EXPECT_EQ(0, memcmp(b[i].data,
					    ch->data + (size_t)i * BLOCK_BYTES,
					    BLOCK_BYTES));
		kvcache_release(c, b, 8);
	}

	/* Off: every load is a LOAD, and no fast hit is counted. */
	kvcache_close(c);	/* its last TOUCHes go */
	setenv("KVCACHE_FAST_PATH", "0", 1);
	got = lib_open(self, &c2, &ns2);
	unsetenv("KVCACHE_FAST_PATH");
	ASSERT_EQ(0, got);
	do {
		h0 = lib_stat(c2, "fast_hits");
		msleep(100);
	} while (lib_stat(c2, "fast_hits") != h0);
	EXPECT_EQ(8, load_check(ns2, ch, 8));
	EXPECT_EQ(8, load_check(ns2, ch, 8));
	EXPECT_EQ(h0, lib_stat(c2, "fast_hits"));
	kvcache_close(c2);
	chain_free(ch);
}

struct fast_reader {
	struct kvcache_namespace *ns;
	const struct chain *ch;
	volatile int stop;
	unsigned int pause_us;	/* at most, between loads */
	long hits, misses, wrong;
};

static void *fast_reader(void *p)
{
	struct fast_reader *r = p;
	uint8_t *buf = malloc(BLOCK_BYTES);

	while (buf && !r->stop) {
		int got;

		memset(buf, 0, BLOCK_BYTES);
		got = kvcache_load(r->ns, r->ch->keys, 1, buf, BLOCK_BYTES);
		if (got == 1 && !kv_same(buf, r->ch->keys))
			__atomic_add_fetch(&r->wrong, 1, __ATOMIC_RELAXED);
		else if (got == 1)
			__atomic_add_fetch(&r->hits, 1, __ATOMIC_RELAXED);
		else
			__atomic_add_fetch(&r->misses, 1, __ATOMIC_RELAXED);
		if (r->pause_us)
			usleep((unsigned int)rand() % r->pause_us);
	}
	free(buf);
	return NULL;
}

/*
 * The fast path under the race it exists to survive: readers load block
 * K over and over while it is evicted, its pool block handed to other
 * stores and rewritten, and K stored again elsewhere. A load may miss;
 * it must never return bytes that are not K's. In kernel mode a reader
 * pins K while it copies, and the kernel refuses to evict a pinned
 * block: there the readers pause now and then (at random, so the race
 * between a reader's lookup and its PIN stays) and the evict is retried,
 * or it would never find K unpinned.
 */
TEST_F_TIMEOUT(kvcd, fast_path_never_returns_another_blocks_bytes, 120)
{
	struct fast_reader r = { 0 };
	struct kvcache_namespace *ns;
	struct kvcache *c;
	pthread_t th[2];
	struct chain *k, *fill;
	uint32_t salt = 1000;
	int32_t st[1];
	uint64_t h0;
	double end;

	ASSERT_EQ(0, lib_open(self, &c, &ns));
	k = chain_new(ns, 71, 1);
	ASSERT_NE(NULL, k);
	ASSERT_EQ(1, kvcache_store(ns, NULL, k->keys, 1, k->data,
				   BLOCK_BYTES));
	r.ns = ns;
	r.ch = k;
	r.pause_us = self->mode == KVC_PROTO_MODE_KERNEL ? 400 : 0;
	for (int i = 0; i < 2; i++)
		ASSERT_EQ(0, pthread_create(&th[i], NULL, fast_reader, &r));
	for (end = now_s() + 4; now_s() < end;) {
		for (int t = 0; t < 50; t++) {
			st[0] = -EBUSY;
			kvcc_evict(&self->c, self->ns, k->keys, 1, st);
			if (st[0] != -EBUSY)
				break;
		}
		/* Other blocks into whatever came free, K's among them. */
		for (int i = 0; i < 4; i++) {
			fill = chain_new(ns, salt++, 1);
			ASSERT_NE(NULL, fill);
			kvcache_store(ns, NULL, fill->keys, 1, fill->data,
				      BLOCK_BYTES);
			chain_free(fill);
		}
		kvcache_store(ns, NULL, k->keys, 1, k->data, BLOCK_BYTES);
	}
	r.stop = 1;
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	TH_LOG("%ld hits, %ld misses, %u rounds", r.hits, r.misses,
	       salt - 1000);
	EXPECT_EQ(0, r.wrong);
	EXPECT_LT(0, r.hits);
	EXPECT_LT(0, r.misses);
	/*
	 * The daemon counts a hit only if the block still holds K when the
	 * TOUCH arrives (up to 20 ms later): during the churn most no longer
	 * do. K stays put now: its next hit counts.
	 */
	h0 = lib_stat(c, "fast_hits");
	EXPECT_EQ(1, load_check(ns, k, 1));
	EXPECT_LT(h0, wait_fast_hits(c, h0 + 1));
	chain_free(k);
	kvcache_close(c);
}

/*
 * A daemon killed outright cannot retire its segment: a load right after
 * may still read the dead daemon's pool (nobody writes it) or miss, never
 * return wrong bytes; the client's next call moves it to the new
 * daemon's pool and segment.
 */
TEST_F_TIMEOUT(kvcd, fast_path_survives_a_killed_daemon, 120)
{
	struct kvcache_namespace *ns;
	struct kvcache *c;
	struct chain *a, *b;
	char why[512] = "";
	int got, i;

	ASSERT_EQ(0, lib_open(self, &c, &ns));
	a = chain_new(ns, 72, 4);
	b = chain_new(ns, 73, 2);
	ASSERT_NE(NULL, a);
	ASSERT_NE(NULL, b);
	ASSERT_EQ(4, kvcache_store(ns, NULL, a->keys, 4, a->data,
				   BLOCK_BYTES));
	ASSERT_EQ(4, load_check(ns, a, 4));

	ASSERT_EQ(0, kill(self->daemon, SIGKILL));
	ASSERT_EQ(0, restart(self, NULL, why, sizeof(why))) TH_LOG("%s", why);
	got = load_check(ns, a, 4);
	EXPECT_NE(-EBADMSG, got);
	EXPECT_TRUE(got == 0 || got == 4 || got == -ECONNRESET)
		TH_LOG("load after the kill: %d", got);

	/* A call caught by the restart fails once; then the new daemon. */
	got = kvcache_store(ns, NULL, b->keys, 2, b->data, BLOCK_BYTES);
	if (got < 0)
		got = kvcache_store(ns, NULL, b->keys, 2, b->data, BLOCK_BYTES);
	ASSERT_EQ(2, got);
	/*
	 * A block counts once per TOUCH: kvcache_stat() sends each load's
	 * TOUCH before the next load.
	 */
	for (i = 0; i < 3; i++) {
		EXPECT_EQ(2, load_check(ns, b, 2));
		lib_stat(c, "touches");
	}
	EXPECT_LE(6, wait_fast_hits(c, 6));
	got = load_check(ns, a, 4);
	EXPECT_TRUE(got == 0 || got == 4) TH_LOG("a after: %d", got);
	chain_free(a);
	chain_free(b);
	kvcache_close(c);
}

/* Eight threads share one client: every one gets its own bytes back. */
TEST_F(kvcd, threads_share_a_client)
{
	struct kvcache_options o = { .socket = self->sock, .connections = 3 };
	struct worker_arg w[8];
	struct kvcache_namespace *ns;
	pthread_t t[8];
	struct kvcache *c;

	ASSERT_EQ(0, kvcache_open(&o, &c));
	ASSERT_EQ(0, kvcache_ns_open(c, self->ns, &test_id, BLOCK_BYTES, &ns));
	for (int i = 0; i < 8; i++) {
		w[i] = (struct worker_arg){ .ns = ns, .salt = 100 + i };
		ASSERT_EQ(0, pthread_create(&t[i], NULL, worker, &w[i]));
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(t[i], NULL);
		EXPECT_EQ(2, w[i].result) TH_LOG("thread %d", i);
	}
	kvcache_close(c);
}

/* Arguments the library must refuse before anything reaches the daemon. */
TEST_F(kvcd, bad_arguments)
{
	struct kvcache_options o = { .socket = self->sock };
	struct kvcache_identity bad = test_id;
	struct kvcache_namespace *ns, *ns2;
	uint8_t keys[2 * KEY] = { 0 }, buf[16];
	struct kvcache *c;

	ASSERT_EQ(0, lib_open(self, &c, &ns));
	EXPECT_EQ(-EINVAL, kvcache_open(NULL, NULL));
	o.connections = 1000;
	EXPECT_EQ(-EINVAL, kvcache_open(&o, &c));
	o.connections = 0;
	o.socket = "/this/path/is/much/too/long/for/a/unix/socket/address/"
		   "so/the/library/says/so/instead/of/truncating/it/silently";
	EXPECT_EQ(-ENAMETOOLONG, kvcache_open(&o, &c));
	EXPECT_EQ(-EINVAL, kvcache_ns_open(c, 0, &test_id, BLOCK_BYTES, &ns2));
	EXPECT_EQ(-EINVAL, kvcache_ns_open(c, 70000, &test_id, BLOCK_BYTES,
					   &ns2));
	EXPECT_EQ(-EINVAL, kvcache_ns_open(c, self->ns, &test_id, 0, &ns2));
	EXPECT_EQ(-EINVAL, kvcache_ns_open(c, self->ns, &test_id,
					   self->bs + 1, &ns2));
	bad.tokens_per_block = 0;
	EXPECT_EQ(-EINVAL, kvcache_ns_open(c, self->ns, &bad, BLOCK_BYTES,
					   &ns2));
	bad = test_id;
	bad.model = NULL;
	EXPECT_EQ(-EINVAL, kvcache_ns_open(c, self->ns, &bad, BLOCK_BYTES,
					   &ns2));
	bad = test_id;
	bad.salt_len = 4;
	EXPECT_EQ(-EINVAL, kvcache_ns_open(c, self->ns, &bad, BLOCK_BYTES,
					   &ns2));
	EXPECT_EQ(-EINVAL, kvcache_load(ns, keys, 2, buf, 16));
	EXPECT_EQ(-EINVAL, kvcache_load(ns, NULL, 2, buf, BLOCK_BYTES));
	EXPECT_EQ(-EINVAL, kvcache_store(ns, NULL, keys, 2, NULL, BLOCK_BYTES));
	EXPECT_EQ(-EINVAL, kvcache_lookup(NULL, keys, 2, NULL));
	EXPECT_EQ(-EINVAL, kvcache_poll(c, NULL, 4, 0));
	EXPECT_EQ(0, kvcache_ns_keys(ns, NULL, 5, keys, 2));
	/* A partial block has no key. */
	EXPECT_EQ(0, kvcache_ns_keys(ns, (uint32_t[TPB]){ 0 }, TPB - 1,
				     keys, 2));
	EXPECT_EQ(-EOPNOTSUPP, kvcache_load_region(ns, keys, 1, 1, 0, 4096));
	kvcache_close(c);
}

/* No daemon at the socket: a clear error from open. */
TEST(no_daemon)
{
	char path[108];
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct kvcache_options o = { .socket = path };
	struct kvcache *c = (struct kvcache *)1;
	int fd;

	tmp_sock(path, sizeof(path), "none");
	unlink(path);
	EXPECT_EQ(-ENOENT, kvcache_open(&o, &c));
	EXPECT_EQ(NULL, c);
	/* A socket file nobody listens on any more. */
	fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	strcpy(a.sun_path, path);
	ASSERT_EQ(0, bind(fd, (struct sockaddr *)&a, sizeof(a)));
	close(fd);
	EXPECT_EQ(-ECONNREFUSED, kvcache_open(&o, &c));
	EXPECT_NE(NULL, strstr(kvcache_strerror(-ECONNREFUSED), "kvcached"));
	unlink(path);
}

/* A namespace this process may not use: refused, nothing crashes. */
TEST_F(kvcd, namespace_denied)
{
	struct kvcache_namespace *ns;
	struct kvcache *c;
	struct chain *ch;
	pid_t pid;
	int st;

	if (geteuid() != 0)
		SKIP(return, "needs root to run a client as nobody");
	/* Ours (0700 root) has a chain; nobody may neither read nor add. */
	ASSERT_EQ(0, lib_open(self, &c, &ns));
	ch = chain_new(ns, 9, 4);
	ASSERT_NE(NULL, ch);
	ASSERT_EQ(4, kvcache_store(ns, NULL, ch->keys, 4, ch->data,
				   BLOCK_BYTES));
	kvcache_close(c);
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		struct kvcache_namespace *ns2;
		struct kvcache *c2;
		int l, s;

		if (setgid(NOBODY) || setuid(NOBODY))
			_exit(2);
		/* Kernel mode: the device may refuse nobody at once. */
		l = lib_open(self, &c2, &ns2);
		if (l)
			_exit(l == -EACCES ? 0 : 3);
		l = kvcache_load(ns2, ch->keys, 4, ch->data, BLOCK_BYTES);
		s = kvcache_store(ns2, NULL, ch->keys, 4, ch->data,
				  BLOCK_BYTES);
		/* Denied outright, or seen as nothing cached: no bytes. */
		if ((l != -EACCES && l != 0) || s != -EACCES)
			_exit(10 + (l == 4));
		kvcache_close(c2);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
		TH_LOG("child status %#x", st);
	chain_free(ch);
}

/*
 * Kernel mode with the bench's fake GPU: blocks g3 holds go from the NVMe
 * straight into a region of the BAR, and land there intact; a block whose
 * file is corrupt ends the prefix.
 */
TEST_F_TIMEOUT(kvcd, load_region_from_g3, 300)
{
	char g3[PATH_MAX], conf[PATH_MAX + 128], why[512] = "", gpu[64];
	char bar_path[PATH_MAX], file[PATH_MAX], nsdir[PATH_MAX];
	const uint64_t roff = 8ull << 20, stride = BLOCK_BYTES;
	struct kvcache_options o = { .g3_directory = g3 };
	struct kvcache_namespace *ns;
	volatile uint8_t *bar;
	struct kvcache *c;
	struct chain *ch;
	uint32_t region;
	int prov, bfd, fd;
	uint8_t b;

	if (self->mode != KVC_PROTO_MODE_KERNEL ||
	    find_pci(0x1af4, 0x1110, 0, gpu, sizeof(gpu)))
		SKIP(return, "needs kvcache.ko and the bench's ivshmem GPU");
	ASSERT_EQ(0, nvme_fs());
	prov = bind_gpu(gpu);
	ASSERT_LE(0, prov);
	snprintf(bar_path, sizeof(bar_path), PCI_DEVICES "/%s/resource2", gpu);
	bfd = open(bar_path, O_RDWR | O_SYNC | O_CLOEXEC);
	ASSERT_LE(0, bfd);
	bar = mmap(NULL, 64ull << 20, PROT_READ | PROT_WRITE, MAP_SHARED, bfd,
		   0);
	close(bfd);
	ASSERT_NE(MAP_FAILED, bar);

	/* g3 on the NVMe's ext4: O_DIRECT, so the kernel can DMA it. */
	snprintf(g3, sizeof(g3), MNT "/libkvc-g3-%d", (int)getpid());
	rm_rf(g3);
	mkdir(g3, 0755);
	snprintf(conf, sizeof(conf),
		 "[g3]\ndirectory = %s\ncapacity = 64M\nwrite = through\n", g3);
	ASSERT_EQ(0, restart(self, conf, why, sizeof(why))) TH_LOG("%s", why);
	o.socket = self->sock;
	ASSERT_EQ(0, kvcache_open(&o, &c));
	ASSERT_EQ(0, kvcache_ns_open(c, self->ns, &test_id, BLOCK_BYTES, &ns));
	ch = chain_new(ns, 10, 4);
	ASSERT_NE(NULL, ch);
	ASSERT_EQ(4, kvcache_store(ns, NULL, ch->keys, 4, ch->data,
				   BLOCK_BYTES));
	ASSERT_EQ(4, wait_stat(&self->c, "g3_spills", 4, 30));

	ASSERT_EQ(0, kvcache_region_register(c, (uint32_t)prov, roff,
					     4 * stride, &region));
	for (uint64_t i = 0; i < 4 * stride; i++)
		bar[roff + i] = 0;
	EXPECT_EQ(-EINVAL, kvcache_load_region(ns, ch->keys, 4, region, 100,
					       stride));
	ASSERT_EQ(4, kvcache_load_region(ns, ch->keys, 4, region, 0, stride));
	for (int i = 0; i < 4; i++) {
		EXPECT_TRUE(kv_same(bar + roff + i * stride, ch->keys + i * KEY))
			TH_LOG("block %d in the BAR", i);
	}
	/* One payload byte flipped on disk: the prefix ends before it. */
	snprintf(nsdir, sizeof(nsdir), "%s/ns%u", g3, self->ns);
	ASSERT_EQ(0, kvc_bf_path(nsdir, ch->keys + 2 * KEY, file, sizeof(file)));
	fd = open(file, O_RDWR);
	ASSERT_LE(0, fd);
	ASSERT_EQ(1, pread(fd, &b, 1, 4096 + 100));
	b ^= 1;
	ASSERT_EQ(1, pwrite(fd, &b, 1, 4096 + 100));
	close(fd);
	/* The page cache holds the good copy: drop it, as a reboot would. */
	ASSERT_EQ(0, write_str("/proc/sys/vm/drop_caches", "3"));
	EXPECT_EQ(2, kvcache_load_region(ns, ch->keys, 4, region, 0, stride));
	EXPECT_EQ(0, kvcache_region_unregister(c, region));
	EXPECT_EQ(-ENOENT, kvcache_region_unregister(c, region));
	munmap((void *)bar, 64ull << 20);
	chain_free(ch);
	kvcache_close(c);
	rm_rf(g3);
}

/* ---- a daemon that answers nonsense ------------------------------------------ */

enum fake_mode {
	FAKE_BAD_MAGIC,		/* reply with the magic broken */
	FAKE_WRONG_SEQ,		/* a valid reply to another request */
	FAKE_WRONG_TYPE,	/* a reply of another type */
	FAKE_TRUNCATED,		/* a reply cut short */
	FAKE_SILENT,		/* no reply at all */
	FAKE_BAD_HELLO,		/* even HELLO's reply is wrong */
	FAKE_MODES
};

struct fake {
	int lfd;
	enum fake_mode mode;
	char path[108];
	pthread_t thread;
};

static void fake_reply(int fd, const uint8_t *req, ssize_t len,
		       enum fake_mode mode)
{
	uint8_t out[256];
	struct kvc_msg m;
	int n;

	if (kvc_proto_decode(req, (size_t)len, &m))
		return;
	if (m.type == KVC_MSG_HELLO && mode != FAKE_BAD_HELLO) {
		struct kvc_hello_reply r = {
			.version = 1, .mode = KVC_PROTO_MODE_MEMFD,
			.max_batch = 64, .caps = KVC_PROTO_CAP_MEMFD,
			.block_size = 1 << 20, .nr_blocks = 4,
		};
		int pool = memfd_create("fake-pool", MFD_CLOEXEC);
		union {
			struct cmsghdr align;
			char buf[CMSG_SPACE(sizeof(int))];
		} cb;
		struct iovec iov;
		struct msghdr mh = {
			.msg_iov = &iov, .msg_iovlen = 1,
			.msg_control = cb.buf, .msg_controllen = sizeof(cb.buf),
		};
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

		if (ftruncate(pool, 4 << 20))
			return;
		n = kvc_proto_encode_hello_reply(out, sizeof(out), m.seq, &r);
		iov = (struct iovec){ .iov_base = out, .iov_len = (size_t)n };
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &pool, sizeof(int));
		sendmsg(fd, &mh, MSG_NOSIGNAL);
		close(pool);
		return;
	}
	/* Anything else gets an empty LOOKUP reply, then spoiled. */
	n = kvc_proto_encode_lookup_reply(out, sizeof(out), m.seq, NULL, 0);
	switch (mode) {
	case FAKE_BAD_MAGIC:
	case FAKE_BAD_HELLO:
		out[0] ^= 0xff;
		break;
	case FAKE_WRONG_SEQ:
		n = kvc_proto_encode_lookup_reply(out, sizeof(out),
						  m.seq + 7, NULL, 0);
		break;
	case FAKE_WRONG_TYPE:
		n = kvc_proto_encode_flush_reply(out, sizeof(out), m.seq,
			&(struct kvc_flush_reply){ 0 });
		break;
	case FAKE_TRUNCATED:
		n -= 3;
		break;
	case FAKE_SILENT:
	case FAKE_MODES:
		return;
	}
	send(fd, out, (size_t)n, MSG_NOSIGNAL);
}

static void *fake_daemon(void *p)
{
	struct fake *f = p;
	uint8_t req[KVC_PROTO_MSG_MAX];

	for (;;) {
		int fd = accept(f->lfd, NULL, NULL);
		ssize_t n;

		if (fd < 0)
			return NULL;
		while ((n = recv(fd, req, sizeof(req), 0)) > 0)
			fake_reply(fd, req, n, f->mode);
		close(fd);
	}
}

static int fake_start(struct fake *f, enum fake_mode mode)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };

	f->mode = mode;
	tmp_sock(f->path, sizeof(f->path), "fake");
	unlink(f->path);
	strcpy(a.sun_path, f->path);
	f->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (f->lfd < 0 || bind(f->lfd, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(f->lfd, 8))
		return -errno;
	return -pthread_create(&f->thread, NULL, fake_daemon, f);
}

static void fake_stop(struct fake *f)
{
	shutdown(f->lfd, SHUT_RDWR);
	pthread_join(f->thread, NULL);
	close(f->lfd);
	unlink(f->path);
}

/* Every kind of nonsense is -EPROTO (or -ETIMEDOUT), never a crash. */
TEST(malformed_replies)
{
	static const struct kvcache_identity id = {
		.model = "m", .weights_revision = "r", .tokenizer = "t",
		.kv_layout = "l", .kv_dtype = "d", .lora = "",
		.tokens_per_block = 4, .tp_size = 1, .pp_size = 1,
	};

	for (int mode = 0; mode < FAKE_MODES; mode++) {
		struct kvcache_options o = { .timeout_ms = 300 };
		struct kvcache_namespace *ns;
		uint8_t keys[KEY] = { 1 };
		struct fake f;
		struct kvcache *c;
		int r;

		ASSERT_EQ(0, fake_start(&f, mode));
		o.socket = f.path;
		r = kvcache_open(&o, &c);
		if (mode == FAKE_BAD_HELLO) {
			EXPECT_EQ(-EPROTO, r);
			fake_stop(&f);
			continue;
		}
		ASSERT_EQ(0, r) TH_LOG("mode %d", mode);
		/*
		 * The fake speaks version 1, which has no namespace salts:
		 * the default open refuses rather than derive unsalted
		 * keys, the opt-out works without asking the daemon.
		 */
		EXPECT_EQ(-EPROTONOSUPPORT,
			  kvcache_ns_open(c, 1, &id, 4096, &ns));
		ASSERT_EQ(0, kvcache_ns_open_flags(c, 1, &id, 4096,
						   KVCACHE_NS_NO_SALT, &ns));
		for (int i = 0; i < 2; i++) {
			r = kvcache_lookup(ns, keys, 1, NULL);
			EXPECT_EQ(mode == FAKE_SILENT ? -ETIMEDOUT : -EPROTO, r)
				TH_LOG("mode %d, call %d", mode, i);
		}
		kvcache_close(c);
		fake_stop(&f);
	}
}

TEST_HARNESS_MAIN
