// SPDX-License-Identifier: GPL-2.0
/*
 * Crash tests of kvcached and its clients (kvcd_fixture.h): processes
 * SIGKILLed at chosen and at random points, and what survives checked
 * against what was promised.
 *
 * What "published" means differs by mode (kvcached.md, tiers.md):
 *  - kernel mode: a block sealed in kvcache.ko and acknowledged by STORE
 *    lives in the module's pool and survives the daemon (the parents
 *    journal lets the next daemon index it again); a block on g3 survives
 *    both.
 *  - memfd mode: the pool is the daemon's memory and dies with it; only
 *    blocks on g3 survive (LOOKUP's tier mask says which).
 * Every block is filled with crash_pattern.h's keyed pattern, so a partial,
 * stale or wrong block is caught wherever it is read.
 *
 * On the host it runs with KVC_DAEMON_MODE=memfd; in the test VM against
 * kvcache.ko, in kernel mode, with fewer rounds (TCG is slow).
 * KVC_CRASH_ROUNDS multiplies the rounds for longer runs.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "kvc_client.h"
#include "kvc_ioctl.h"
#include "kvc_sysfs.h"
#include "keys.h"
#include "proto.h"

#include "kvcd_fixture.h"
#include "crash_pattern.h"

#define CHAIN		4		/* blocks per chain the tests store */

static int rounds_factor(void)
{
	const char *e = getenv("KVC_CRASH_ROUNDS");
	int f = e ? atoi(e) : 1;

	return f > 0 ? f : 1;
}

/* ---- a client of its own (the fixture's belongs to the parent) ------------ */

struct client {
	struct kvcc *c;			/* &own, or the fixture's */
	int dev;			/* kernel mode: its /dev/kvcache */
	struct kvcc own;
};

static int client_open(SELF *self, struct client *cl)
{
	int ret;

	kvcc_init(&cl->own);
	cl->c = &cl->own;
	cl->dev = -1;
	ret = kvcc_open(cl->c, self->sock);
	if (!ret)
		ret = kvcc_hello(cl->c);
	if (!ret && self->mode == KVC_PROTO_MODE_KERNEL) {
		cl->dev = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
		if (cl->dev < 0)
			ret = -errno;
	}
	return ret;
}

static void client_close(struct client *cl)
{
	kvcc_close(cl->c);
	if (cl->dev >= 0)
		close(cl->dev);
	cl->dev = -1;
}

/* A block's memory for writing or reading; unmap with block_unmap(). */
static uint8_t *block_map(SELF *self, struct client *cl, uint32_t index,
			  int prot)
{
	if (self->mode == KVC_PROTO_MODE_MEMFD)
		return cl->c->pool + (size_t)index * self->bs;
	return kvc_map(cl->dev, index, self->bs, prot);
}

static void block_unmap(SELF *self, uint8_t *p)
{
	if (p && self->mode == KVC_PROTO_MODE_KERNEL)
		munmap(p, self->bs);
}

/* Seal n written blocks under their keys (statuses checked). */
static int seal_blocks(SELF *self, struct client *cl,
		       const struct kvcache_handle *h, const kvc_key *keys,
		       uint32_t n)
{
	struct kvc_seal_entry e[CHAIN * 4];
	int32_t st[CHAIN * 4];
	int ret;

	if (self->mode == KVC_PROTO_MODE_KERNEL)
		return kernel_seal(cl->dev, h, keys, n, 0);
	memset(e, 0, sizeof(e));
	for (uint32_t i = 0; i < n; i++) {
		e[i].handle = h[i];
		e[i].payload_len = PAYLOAD;
		memcpy(e[i].key, keys[i], KVCACHE_KEY_SIZE);
	}
	ret = kvcc_seal(cl->c, e, n, st);
	for (uint32_t i = 0; !ret && i < n; i++)
		ret = st[i];
	return ret;
}

/* Allocate, fill with the pattern and seal n blocks (n <= CHAIN * 4). */
static int make_pattern(SELF *self, struct client *cl, uint32_t ns,
			const kvc_key *keys, uint32_t n,
			struct kvcache_handle *h)
{
	int ret = self->mode == KVC_PROTO_MODE_KERNEL ?
		  kvc_alloc(cl->dev, ns, n, h) : kvcc_alloc(cl->c, ns, n, h);

	for (uint32_t i = 0; !ret && i < n; i++) {
		uint8_t *p = block_map(self, cl, h[i].index,
				       PROT_READ | PROT_WRITE);

		if (!p)
			return -errno;
		crash_fill(p, keys[i], PAYLOAD);
		block_unmap(self, p);
	}
	return ret ? ret : seal_blocks(self, cl, h, keys, n);
}

/*
 * Read back what a LOAD returned: every block with status 0 must hold its
 * key's pattern. The pins the LOAD took (memfd mode) are released; in
 * kernel mode the reader pins each block with its own descriptor, as an
 * engine does (ESTALE: evicted in between, a miss, not served).
 * Returns the blocks verified, or -1 when any held a wrong byte.
 */
static int verify_loaded(SELF *self, struct client *cl,
			 const struct kvc_load_result *res,
			 const kvc_key *keys, uint32_t n)
{
	int good = 0, bad = 0;

	for (uint32_t i = 0; i < n; i++) {
		struct kvcache_handle h = res[i].handle;
		uint8_t *p;
		int32_t st;

		if (res[i].status)
			continue;
		if (self->mode == KVC_PROTO_MODE_KERNEL && kvc_pin(cl->dev, h))
			continue;
		p = block_map(self, cl, h.index, PROT_READ);
		if (p && crash_check(p, keys[i], PAYLOAD))
			good++;
		else
			bad++;
		block_unmap(self, p);
		if (self->mode == KVC_PROTO_MODE_KERNEL)
			kvc_unpin(cl->dev, h);
		else
			kvcc_release(cl->c, &h, 1, &st);
	}
	return bad ? -1 : good;
}

/* The fixture's own connection and descriptor as a struct client. */
static struct client parent_client(SELF *self)
{
	struct client cl = { .c = &self->c, .dev = self->dev };

	return cl;
}

/* ---- the pool at rest --------------------------------------------------------- */

/*
 * Nothing leaked: once every block of ns is flushed, the pool must come
 * back whole. Sealed blocks nobody stored (a client killed between SEAL
 * and STORE) are orphans the daemon frees on its eviction passes, which
 * only run under pressure: so take the pool below its low watermark with
 * unsealed blocks of a client of our own for a few ticks, then let that
 * client go. Pins of dead clients, their unsealed blocks and (kernel
 * mode) their mappings must all have gone by then.
 * Returns 0 (at rest at once), 1 (at rest once orphans were reaped), or
 * -1 with why filled.
 */
static int pool_at_rest(SELF *self, uint32_t ns, char *why, size_t wlen)
{
	struct kvcache_handle *h = NULL;
	struct kvc_flush_reply fr;
	struct client cl;
	uint64_t total, fr_free = 0;
	uint32_t take = 0;
	int ret, reaped = 0;

	ret = kvcc_flush(&self->c, ns, &fr);
	if (ret) {
		snprintf(why, wlen, "FLUSH: %d %s", ret, self->c.why);
		return -1;
	}
	if (fr.busy) {
		snprintf(why, wlen, "FLUSH left %llu busy blocks: a pin leaked",
			 (unsigned long long)fr.busy);
		return -1;
	}
	total = kvcc_stat1(&self->c, "pool_blocks");
	if (kvcc_stat1(&self->c, "pool_free") == total)
		goto kernel;
	if (client_open(self, &cl)) {
		snprintf(why, wlen, "client: %s", cl.c->why);
		client_close(&cl);
		return -1;
	}
	take = blocks_to_pressure(self);
	h = calloc(take + 1, sizeof(*h));
	if (take && h)
		ret = self->mode == KVC_PROTO_MODE_KERNEL ?
		      kvc_alloc(cl.dev, ns, take, h) :
		      kvcc_alloc(cl.c, ns, take, h);
	/* Two passes see an orphan before it goes: a few ticks. */
	for (double end = now_s() + 5; !ret && now_s() < end; msleep(50)) {
		fr_free = kvcc_stat1(&self->c, "pool_free");
		if (fr_free + take == total)
			break;
	}
	client_close(&cl);
	free(h);
	if (ret) {
		snprintf(why, wlen, "ALLOC %u for pressure: %d", take, ret);
		return -1;
	}
	for (double end = now_s() + 5; now_s() < end; msleep(20)) {
		fr_free = kvcc_stat1(&self->c, "pool_free");
		if (fr_free == total)
			break;
	}
	if (fr_free != total) {
		snprintf(why, wlen,
			 "pool_free %llu of %llu after a flush and reaping",
			 (unsigned long long)fr_free,
			 (unsigned long long)total);
		return -1;
	}
	reaped = 1;
kernel:
	if (self->mode != KVC_PROTO_MODE_KERNEL)
		return reaped;
	/* The module's own view: nothing pinned, writable or sealed. */
	for (double end = now_s() + 5; now_s() < end; msleep(20))
		if (!kvc_attr_u64("pool/pinned_blocks") &&
		    !kvc_attr_u64("pool/writable_blocks") &&
		    !kvc_attr_u64("pool/sealed_blocks"))
			return reaped;
	snprintf(why, wlen, "sysfs pool: %llu pinned, %llu writable, %llu sealed",
		 (unsigned long long)kvc_attr_u64("pool/pinned_blocks"),
		 (unsigned long long)kvc_attr_u64("pool/writable_blocks"),
		 (unsigned long long)kvc_attr_u64("pool/sealed_blocks"));
	return -1;
}

/* ---- clients killed ----------------------------------------------------------- */

/* Where a client dies. The STORE kinds store a fresh chain; the LOAD kinds
 * load the stable chain the parent stored. */
enum kill_point {
	K_AFTER_ALLOC,		/* blocks allocated, nothing written */
	K_MID_WRITE,		/* half the chain written, one block half */
	K_BEFORE_SEAL,		/* all written, not sealed */
	K_HALF_SEALED,		/* the first half of the batch sealed */
	K_AFTER_SEAL,		/* sealed, STORE never sent */
	K_STORE_SENT,		/* STORE sent, its reply never read */
	K_AFTER_STORE,		/* STORE acknowledged */
	K_LOAD_SENT,		/* LOAD sent, its reply never read */
	K_PINNED,		/* LOAD answered; pinned (kernel: by us too) */
	K_MAPPED,		/* ... and mapped, bytes touched */
	K_MID_COPY,		/* ... half of each block copied out */
	K_RANDOM,		/* store and load in a loop; the parent kills */
	NR_KILL_POINTS
};

static const char *const kill_names[] = {
	"after alloc", "mid write", "before seal", "half sealed",
	"after seal", "store sent", "after store", "load sent", "pinned",
	"mapped", "mid copy", "random",
};

static void die(void)
{
	kill(getpid(), SIGKILL);
	_exit(99);
}

/* Send a request and die without reading its reply. */
static void send_and_die(struct kvcc *c, int len)
{
	if (len > 0)
		kvcc_send_raw(c, c->tx, (size_t)len);
	die();
}

static void store_until(SELF *self, struct client *cl, uint32_t ns,
			const kvc_key *keys, uint32_t n, enum kill_point at)
{
	struct kvc_store_entry e[CHAIN];
	struct kvcache_handle h[CHAIN];
	int32_t st[CHAIN];
	int ret;

	ret = self->mode == KVC_PROTO_MODE_KERNEL ?
	      kvc_alloc(cl->dev, ns, n, h) : kvcc_alloc(cl->c, ns, n, h);
	if (ret)
		_exit(10);
	if (at == K_AFTER_ALLOC)
		die();
	for (uint32_t i = 0; i < n; i++) {
		uint8_t *p = block_map(self, cl, h[i].index,
				       PROT_READ | PROT_WRITE);

		if (!p)
			_exit(11);
		crash_fill(p, keys[i], PAYLOAD);
		if (at == K_MID_WRITE && i == n / 2) {
			/* This block half written, the rest not at all. */
			memset(p + PAYLOAD / 2, 0, PAYLOAD / 2);
			die();
		}
		block_unmap(self, p);
	}
	if (at == K_BEFORE_SEAL)
		die();
	if (at == K_HALF_SEALED) {
		if (seal_blocks(self, cl, h, keys, (n + 1) / 2))
			_exit(12);
		die();
	}
	if (seal_blocks(self, cl, h, keys, n))
		_exit(13);
	if (at == K_AFTER_SEAL)
		die();
	memset(e, 0, sizeof(e));
	for (uint32_t i = 0; i < n; i++) {
		memcpy(e[i].key, keys[i], KVCACHE_KEY_SIZE);
		if (i)
			memcpy(e[i].parent, keys[i - 1], KVCACHE_KEY_SIZE);
		else
			e[i].flags = KVC_PROTO_STORE_FIRST;
		e[i].handle = h[i];
	}
	if (at == K_STORE_SENT)
		send_and_die(cl->c, kvc_proto_encode_store(KVCC_TX(cl->c),
							     ns, e, n));
	ret = kvcc_store(cl->c, ns, e, n, st);
	for (uint32_t i = 0; !ret && i < n; i++)
		ret = st[i];
	if (ret)
		_exit(14);
	if (at == K_AFTER_STORE)
		die();
}

static void load_until(SELF *self, struct client *cl, uint32_t ns,
		       const kvc_key *keys, uint32_t n, enum kill_point at)
{
	static uint8_t copy[PAYLOAD];
	struct kvc_load_result res[CHAIN];
	volatile uint8_t sum = 0;

	if (at == K_LOAD_SENT)
		send_and_die(cl->c, kvc_proto_encode_load(KVCC_TX(cl->c), ns,
							    keys[0], n));
	if (kvcc_load(cl->c, ns, keys[0], n, res))
		_exit(20);
	for (uint32_t i = 0; i < n; i++) {
		uint8_t *p;

		if (res[i].status)
			_exit(21);
		if (self->mode == KVC_PROTO_MODE_KERNEL &&
		    kvc_pin(cl->dev, res[i].handle))
			_exit(22);
		if (at == K_PINNED)
			continue;
		p = block_map(self, cl, res[i].handle.index, PROT_READ);
		if (!p)
			_exit(23);
		if (at == K_MAPPED) {
			sum ^= p[PAYLOAD - 1];
			continue;	/* left mapped */
		}
		memcpy(copy, p, PAYLOAD / 2);
		if (at == K_MID_COPY && i == n / 2)
			die();
		memcpy(copy + PAYLOAD / 2, p + PAYLOAD / 2, PAYLOAD / 2);
		if (!crash_check(copy, keys[i], PAYLOAD))
			_exit(24);
		block_unmap(self, p);
	}
	(void)sum;
	die();
}

/*
 * K_RANDOM: store a chain, load it and the stable chain back, evict the
 * new chain, again and again until the parent kills us somewhere in
 * there. Exits 30 and up on an error or a wrong byte.
 */
static void traffic_loop(SELF *self, struct client *cl, uint32_t ns,
			 const kvc_key *stable, uint32_t salt)
{
	struct kvc_load_result res[CHAIN];
	kvc_key keys[CHAIN];
	int32_t st[CHAIN];

	for (uint32_t it = 0;; it++) {
		chain_keys(self, salt * 1000 + it, CHAIN, keys);
		store_until(self, cl, ns, keys, CHAIN, NR_KILL_POINTS);
		if (kvcc_load(cl->c, ns, keys[0], CHAIN, res))
			_exit(30);
		if (verify_loaded(self, cl, res, keys, CHAIN) != CHAIN)
			_exit(31);
		if (kvcc_load(cl->c, ns, stable[0], CHAIN, res))
			_exit(32);
		if (verify_loaded(self, cl, res, stable, CHAIN) != CHAIN)
			_exit(33);
		/* The pool must not fill up: this chain goes again. */
		if (kvcc_evict(cl->c, ns, keys[0], CHAIN, st))
			_exit(34);
	}
}

/*
 * Clients (forked processes, each with its own connection and, in kernel
 * mode, its own /dev/kvcache) killed mid-store and mid-load, round after
 * round at every point of kill_point and at random moments. After each:
 * the daemon still serves, a chain whose STORE was never sent is not
 * visible, one acknowledged is, everything visible loads byte-exact, and
 * the pool comes back to rest (no pin, block or mapping leaked).
 */
TEST_F_TIMEOUT(kvcd, clients_killed_mid_store_and_load, 900)
{
	int rounds = (self->mode == KVC_PROTO_MODE_KERNEL ? 2 : 10) *
		     NR_KILL_POINTS * rounds_factor();
	unsigned int seed = (unsigned int)getpid() * 2654435761u;
	struct kvcache_handle h[CHAIN];
	struct kvc_load_result res[CHAIN];
	struct kvc_lookup_entry le[CHAIN];
	kvc_key stable[CHAIN], keys[CHAIN];
	char why[256];
	int verified = 0, reaped = 0, ret;

	chain_keys(self, 1, CHAIN, stable);
	for (int r = 0; r < rounds; r++) {
		enum kill_point at = (enum kill_point)(r % NR_KILL_POINTS);
		struct client pc = parent_client(self);
		uint32_t n = 1 + (uint32_t)(rand_r(&seed) % CHAIN);
		int st, matched, got;
		pid_t pid;

		/* The stable chain the LOAD kinds read, stored afresh. */
		ASSERT_EQ(0, make_pattern(self, &pc, self->ns, stable, CHAIN,
					  h)) TH_LOG("round %d", r);
		ASSERT_EQ(0, store_blocks(&self->c, self->ns, stable, NULL, h,
					  CHAIN, NULL));
		chain_keys(self, 100 + (uint32_t)r, n, keys);

		pid = fork();
		ASSERT_LE(0, pid);
		if (!pid) {
			struct client cl;

			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (client_open(self, &cl))
				_exit(2);
			if (at == K_RANDOM)
				traffic_loop(self, &cl, self->ns, stable,
					     (uint32_t)r);
			if (at <= K_AFTER_STORE)
				store_until(self, &cl, self->ns, keys, n, at);
			load_until(self, &cl, self->ns, stable, CHAIN, at);
			_exit(3);
		}
		if (at == K_RANDOM) {
			msleep(5 + (unsigned int)(rand_r(&seed) % 60));
			kill(pid, SIGKILL);
		}
		ASSERT_EQ(pid, waitpid(pid, &st, 0));
		/* Died where it was meant to, not of an error of its own. */
		ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)
			TH_LOG("round %d (%s): client status %#x", r,
			       kill_names[at], st);

		/* The daemon lives and serves. */
		ASSERT_EQ(0, waitpid(self->daemon, &st, WNOHANG))
			TH_LOG("round %d (%s): kvcached died", r,
			       kill_names[at]);
		matched = kvcc_lookup(&self->c, self->ns, KVC_PROTO_TIERS_ALL,
				      keys[0], n, le);
		ASSERT_LE(0, matched) TH_LOG("LOOKUP: %s", self->c.why);
		if (at < K_STORE_SENT || at > K_AFTER_STORE) {
			EXPECT_EQ(0, matched) TH_LOG("round %d (%s): a chain never stored is visible",
						     r, kill_names[at]);
		} else if (at == K_AFTER_STORE) {
			EXPECT_EQ((int)n, matched) TH_LOG("round %d: an acknowledged chain is gone",
							  r);
		}
		/* Whatever is there loads byte-exact; what is not is ENOENT. */
		pc = parent_client(self);
		ASSERT_EQ(0, kvcc_load(pc.c, self->ns, keys[0], n, res));
		got = verify_loaded(self, &pc, res, keys, n);
		EXPECT_LE(0, got) TH_LOG("round %d (%s): wrong bytes served", r,
					 kill_names[at]);
		if (at < K_STORE_SENT || at > K_AFTER_STORE)
			for (uint32_t i = 0; i < n; i++)
				EXPECT_EQ(-ENOENT, res[i].status);
		pc = parent_client(self);
		ASSERT_EQ(0, kvcc_load(pc.c, self->ns, stable[0], CHAIN, res));
		EXPECT_EQ(CHAIN, verify_loaded(self, &pc, res, stable, CHAIN))
			TH_LOG("round %d (%s): the stable chain", r,
			       kill_names[at]);
		verified += got > 0 ? got : 0;

		/* Nothing of the dead client is left behind. */
		ret = pool_at_rest(self, self->ns, why, sizeof(why));
		ASSERT_LE(0, ret) TH_LOG("round %d (%s): %s", r,
					 kill_names[at], why);
		reaped += ret;
	}
	TH_LOG("%d rounds, %d blocks of killed clients verified, %d rounds reaped orphans",
	       rounds, verified, reaped);
	/* Acknowledged stores were seen, and orphans were made and reaped. */
	EXPECT_LT(0, verified);
	EXPECT_LT(0, reaped);
}

/* ---- kvcached killed ---------------------------------------------------------- */

#define MIX_CHAINS	1024

enum {
	F_ACKED = 1,		/* STORE acknowledged it (status 0) */
	F_G3 = 2,		/* a LOOKUP reported it on g3 */
	F_EVICTING = 4,		/* an EVICT of it was sent: no promise */
};

/*
 * What the traffic generator saw, in memory it shares with the test: it
 * writes a flag only after the daemon's answer came, so whatever the
 * test reads after killing both was true before the kill.
 */
struct mix {
	kvc_key keys[MIX_CHAINS][CHAIN];
	volatile uint8_t flags[MIX_CHAINS][CHAIN];
	volatile uint32_t chains;	/* chains whose STORE was started */
	volatile uint32_t ops;
	volatile uint32_t bad;		/* wrong bytes the generator read */
};

/*
 * The daemon is gone (the test killed it): stop here rather than spin
 * through failing calls until the test kills us too.
 */
static void mix_check(int ret)
{
	if (ret == KVCC_BROKEN || ret == -EPIPE || ret == -ECONNRESET ||
	    ret == -ENOTCONN)
		for (;;)
			pause();
}

/*
 * Mixed traffic until killed: a new chain stored, a random older chain
 * looked up (recording which blocks are on g3) and another loaded and
 * verified, now and then a block evicted by key; the pool's own
 * evictions and the spills follow from the pressure.
 */
static void mix_loop(SELF *self, struct client *cl, struct mix *m,
		     unsigned int seed)
{
	struct kvc_lookup_entry le[CHAIN];
	struct kvc_load_result res[CHAIN];
	struct kvcache_handle h[CHAIN];
	int32_t st[CHAIN];

	for (uint32_t it = 0;; it++) {
		uint32_t c = m->chains, o;
		int ret;

		if (c < MIX_CHAINS) {
			m->chains = c + 1;
			ret = make_pattern(self, cl, self->ns, m->keys[c],
					   CHAIN, h);
			if (!ret)
				ret = store_blocks(cl->c, self->ns, m->keys[c],
						   NULL, h, CHAIN, st);
			if (!ret)
				for (int i = 0; i < CHAIN; i++)
					m->flags[c][i] |= F_ACKED;
			mix_check(ret);
			c++;
		}
		/* Any chain, then one of the last few (being spilled now). */
		for (int l = 0; l < 2; l++) {
			o = (uint32_t)rand_r(&seed) % (l && c > 8 ? 8 : c);
			o = l ? c - 1 - o : o;
			ret = kvcc_lookup(cl->c, self->ns, KVC_PROTO_TIERS_ALL,
					  m->keys[o][0], CHAIN, le);
			mix_check(ret);
			for (int i = 0; i < ret; i++)
				if (le[i].tiers & KVC_PROTO_TIER_G3)
					m->flags[o][i] |= F_G3;
		}
		o = (uint32_t)rand_r(&seed) % c;
		ret = kvcc_load(cl->c, self->ns, m->keys[o][0], CHAIN, res);
		mix_check(ret);
		if (!ret && verify_loaded(self, cl, res, m->keys[o], CHAIN) < 0)
			m->bad++;
		if (it % 16 == 15) {
			/* The last block of a chain: a leaf, nobody's parent. */
			o = (uint32_t)rand_r(&seed) % c;
			m->flags[o][CHAIN - 1] |= F_EVICTING;
			mix_check(kvcc_evict(cl->c, self->ns,
					     m->keys[o][CHAIN - 1], 1, st));
		}
		m->ops++;
	}
}

/*
 * restart() with watermarks of our own: in kernel mode the module's pool
 * is 128 blocks of 2 MiB, each zeroed on ALLOC, which under TCG makes
 * filling it to the fixture's 10 % slow; evicting from 80 % free on
 * brings the pressure (evictions, write-back spills) after a few chains.
 */
static int crash_restart(SELF *self, const char *extra, int low, int high,
			 char *why, size_t wlen)
{
	FILE *f;
	int ret;

	why[0] = '\0';
	kvcc_close(&self->c);
	daemon_stop(self);
	unlink(self->sock);	/* see restart() */
	f = fopen(self->conf, "we");
	if (!f)
		return -errno;
	fprintf(f,
		"# crash_test\n[daemon]\nsocket_mode = 0666\nmetrics = off\n"
		"[pool]\nmemfd_size = %lluM\nblock_size = %lluM\n"
		"hugetlb = no\nmlock = no\nlow_watermark = %d\n"
		"high_watermark = %d\n[eviction]\npolicy = lru\n"
		"interval = 100ms\ng3_admit = 1\ng4_admit = 1\n%s",
		MEMFD_POOL >> 20, MEMFD_BS >> 20, low, high, extra);
	if (fclose(f))
		return -errno;
	ret = daemon_start(self, why, wlen);
	if (!ret)
		ret = kvcc_open(&self->c, self->sock);
	if (!ret)
		ret = kvcc_hello(&self->c);
	if (ret && !why[0])
		snprintf(why, wlen, "reconnect: %d %s", ret, self->c.why);
	return ret;
}

/* Kernel mode: which blocks of ns kvcache.ko holds sealed, by key. */
static void kernel_sealed(int dev, uint32_t ns, struct mix *m,
			  uint8_t sealed[MIX_CHAINS][CHAIN])
{
	struct kvcache_block_info b[64];
	struct kvcache_query q;
	uint32_t start = 0;

	memset(sealed, 0, MIX_CHAINS * CHAIN);
	for (int guard = 0; guard < 10000; guard++) {
		q = (struct kvcache_query){
			.size = sizeof(q), .count = 64, .ns_id = ns,
			.start = start, .entries = (uintptr_t)b,
		};
		if (ioctl(dev, KVCACHE_IOC_QUERY, &q) || !q.count)
			break;
		for (uint32_t i = 0; i < q.count; i++)
			for (uint32_t c = 0; c < m->chains && c < MIX_CHAINS;
			     c++)
				for (int k = 0; k < CHAIN; k++)
					if (!memcmp(b[i].key, m->keys[c][k],
						    KVCACHE_KEY_SIZE))
						sealed[c][k] = 1;
		if (q.next <= start)
			break;
		start = q.next;
	}
}

/*
 * kvcached SIGKILLed at random moments under mixed traffic (stores,
 * lookups, loads, evictions by key and by pressure, spills to g3,
 * write-back and write-through in turn), then restarted, round after
 * round. After each restart: no temp file is left, no wrong byte is
 * served, and every block published before the kill is found and loads
 * byte-exact: in memfd mode those a LOOKUP reported on g3, in kernel
 * mode those too and every acknowledged block the module still held
 * sealed when the daemon died.
 */
TEST_F_TIMEOUT(kvcd, kvcached_killed_under_mixed_traffic, 900)
{
	bool kernel = self->mode == KVC_PROTO_MODE_KERNEL;
	int rounds = (kernel ? 3 : 24) * rounds_factor();
	int low = kernel ? 80 : LOW_PCT, high = kernel ? 90 : HIGH_PCT;
	unsigned int seed = (unsigned int)getpid() * 40503u;
	static uint8_t sealed[MIX_CHAINS][CHAIN];
	char dir[PATH_MAX], conf[2][PATH_MAX + 160], why[512] = "";
	struct kvc_load_result res[CHAIN];
	struct mix *m;
	uint64_t published = 0, evictions = 0, spills = 0, late = 0;

	m = mmap(NULL, sizeof(*m), PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, m);
	for (uint32_t c = 0; c < MIX_CHAINS; c++)
		chain_keys(self, 5000 + c, CHAIN, m->keys[c]);
	tier_dir(dir, sizeof(dir), "g3");
	snprintf(conf[0], sizeof(conf[0]),
		 "[g3]\ndirectory = %s\ncapacity = 64M\nwrite = back\n"
		 "queue_depth = 2\n", dir);
	snprintf(conf[1], sizeof(conf[1]),
		 "[g3]\ndirectory = %s\ncapacity = 64M\nwrite = through\n"
		 "queue_depth = 2\n", dir);

	for (int r = 0; r < rounds; r++) {
		uint32_t target, expected = 0, found = 0;
		struct client pc;
		pid_t gen, dpid;
		int st, tmps = -1;

		ASSERT_EQ(0, crash_restart(self, conf[r & 1], low, high, why,
					   sizeof(why)))
			TH_LOG("round %d: %s", r, why);
		gen = fork();
		ASSERT_LE(0, gen);
		if (!gen) {
			struct client cl;

			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (client_open(self, &cl))
				_exit(2);
			mix_loop(self, &cl, m, seed + (unsigned int)r);
			_exit(3);
		}
		/* Kill once the generator is some way in, at a random op. */
		target = m->chains + (kernel ? 3 + (uint32_t)(rand_r(&seed) % 6) :
				      4 + (uint32_t)(rand_r(&seed) % 24));
		for (double end = now_s() + 60;
		     now_s() < end && m->chains < target &&
		     m->chains < MIX_CHAINS; msleep(2))
			;
		/* What the daemon did this round (it serves us meanwhile). */
		evictions += kvcc_stat1(&self->c, "evictions");
		spills += kvcc_stat1(&self->c, "g3_spills");
		msleep((unsigned int)(rand_r(&seed) % 20));
		dpid = self->daemon;
		kill(dpid, SIGKILL);
		waitpid(dpid, NULL, 0);
		self->daemon = -1;
		kill(gen, SIGKILL);
		waitpid(gen, &st, 0);
		EXPECT_EQ(0, m->bad) TH_LOG("round %d: the generator read wrong bytes",
					   r);
		ASSERT_TRUE(WIFSIGNALED(st)) TH_LOG("generator status %#x",
						    st);
		if (self->mode == KVC_PROTO_MODE_KERNEL)
			kernel_sealed(self->dev, self->ns, m, sealed);

		ASSERT_EQ(0, crash_restart(self, conf[r & 1], low, high, why,
					   sizeof(why)))
			TH_LOG("round %d: %s", r, why);
		/* Stale temp files go at start, or with the background scan. */
		for (double end = now_s() + 20; now_s() < end; msleep(50)) {
			tmps = count_files(dir, ".tmp.");
			if (!tmps)
				break;
		}
		EXPECT_EQ(0, tmps) TH_LOG("round %d: temp files left", r);
		pc = parent_client(self);
		for (uint32_t c = 0; c < m->chains; c++) {
			int got;

			ASSERT_EQ(0, kvcc_load(pc.c, self->ns, m->keys[c][0],
					       CHAIN, res))
				TH_LOG("%s", self->c.why);
			got = verify_loaded(self, &pc, res, m->keys[c], CHAIN);
			ASSERT_LE(0, got) TH_LOG("round %d chain %u: wrong bytes",
						 r, c);
			/*
			 * Published: on g3, or (kernel mode) acknowledged and
			 * still sealed in the module. A block is only found
			 * through its prefix, so it counts when its ancestors
			 * were published too: with write = back the pool
			 * evicts (and spills) leaves first, and in memfd mode
			 * a crash then takes the heads of those chains.
			 */
			bool chain_ok = true;

			for (int k = 0; k < CHAIN; k++) {
				uint8_t f = m->flags[c][k];
				bool want;

				chain_ok = chain_ok &&
					   ((f & F_G3) ||
					    ((f & F_ACKED) && sealed[c][k]));
				want = chain_ok && !(f & F_EVICTING);
				if (!want)
					continue;
				expected++;
				/*
				 * In kernel mode the restarted daemon finds
				 * the pool under pressure and evicts at once;
				 * a write-back eviction takes the block out of
				 * the pool before its file is published, and a
				 * LOAD meanwhile misses. Found once the spill
				 * is done: give it a few seconds (counted).
				 */
				for (double end = now_s() + 10;
				     res[k].status && now_s() < end;
				     msleep(100)) {
					struct kvc_load_result one;

					ASSERT_EQ(0, kvcc_load(pc.c, self->ns,
							       m->keys[c][k],
							       1, &one));
					ASSERT_LE(0, verify_loaded(self, &pc,
								   &one,
								   &m->keys[c][k],
								   1));
					if (!one.status) {
						res[k].status = 0;
						late++;
					}
				}
				found += !res[k].status;
				EXPECT_EQ(0, res[k].status)
					TH_LOG("round %d chain %u block %d (flags %#x, sealed %d): published, not found",
					       r, c, k, f, sealed[c][k]);
			}
		}
		published += expected;
		EXPECT_EQ(0, kvcc_stat1(&self->c, "g3_corrupt"));
		TH_LOG("round %d: %u chains, %u ops, %u of %u published blocks found",
		       r, m->chains, m->ops, found, expected);
		/* No wrong byte served. */
		if (m->chains >= MIX_CHAINS)
			break;
	}
	/*
	 * Something was promised, and the paths the test is about ran: it
	 * cannot pass idle.
	 */
	TH_LOG("%llu published blocks checked (%llu found only once a spill was done), %llu evictions, %llu spills",
	       (unsigned long long)published, (unsigned long long)late,
	       (unsigned long long)evictions, (unsigned long long)spills);
	EXPECT_LT(0, published);
	EXPECT_LT(0, evictions);
	EXPECT_LT(0, spills);
	munmap(m, sizeof(*m));
	kvcc_close(&self->c);
	daemon_stop(self);
	rm_rf(dir);
}

/*
 * Kernel mode: a block sealed in the module and stored under a parent
 * that only g3 holds (the pool evicted the parent, or dropped it with a
 * FLUSH, and the child was stored, or promoted, after) is published: the
 * module keeps it and the parent is on disk. kvcached killed then must
 * find the chain whole after its restart. In memfd mode the child died
 * with the daemon's pool: the parent alone is found, the child is a miss.
 */
TEST_F_TIMEOUT(kvcd, pool_child_of_g3_parent, 300)
{
	char dir[PATH_MAX], through[PATH_MAX + 128], back[PATH_MAX + 128];
	struct kvc_lookup_entry le[2];
	struct kvc_load_result res[2];
	struct kvcache_handle h[2];
	char why[512] = "";
	struct client pc;
	kvc_key keys[2];
	bool kernel;
	pid_t dpid;

	tier_dir(dir, sizeof(dir), "g3");
	snprintf(through, sizeof(through),
		 "[g3]\ndirectory = %s\ncapacity = 64M\nwrite = through\n", dir);
	snprintf(back, sizeof(back),
		 "[g3]\ndirectory = %s\ncapacity = 64M\nwrite = back\n", dir);
	chain_keys(self, 77, 2, keys);

	/* The parent: written through to g3, then dropped from the pool. */
	ASSERT_EQ(0, restart(self, through, why, sizeof(why))) TH_LOG("%s", why);
	pc = parent_client(self);
	ASSERT_EQ(0, make_pattern(self, &pc, self->ns, keys, 1, h));
	ASSERT_EQ(0, store_blocks(&self->c, self->ns, keys, NULL, h, 1, NULL));
	ASSERT_EQ(1, wait_stat(&self->c, "g3_spills", 1, 30));
	ASSERT_EQ(0, restart(self, back, why, sizeof(why))) TH_LOG("%s", why);
	ASSERT_EQ(0, flush_pool(&self->c, self->ns));
	ASSERT_EQ(1, kvcc_lookup(&self->c, self->ns, KVC_PROTO_TIERS_ALL,
				 keys[0], 1, le));
	ASSERT_EQ(KVC_PROTO_TIER_G3, le[0].tiers);

	/* The child: in the pool only (write = back), acknowledged. */
	ASSERT_EQ(0, make_pattern(self, &pc, self->ns, keys + 1, 1, h + 1));
	ASSERT_EQ(0, store_blocks(&self->c, self->ns, keys + 1, keys[0], h + 1,
				  1, NULL));
	ASSERT_EQ(2, kvcc_lookup(&self->c, self->ns, KVC_PROTO_TIERS_ALL,
				 keys[0], 2, le));
	ASSERT_EQ(KVC_PROTO_TIER_POOL, le[1].tiers);

	dpid = self->daemon;
	kill(dpid, SIGKILL);
	waitpid(dpid, NULL, 0);
	self->daemon = -1;
	ASSERT_EQ(0, restart(self, back, why, sizeof(why))) TH_LOG("%s", why);

	kernel = self->mode == KVC_PROTO_MODE_KERNEL;
	EXPECT_EQ(kernel ? 2 : 1,
		  kvcc_lookup(&self->c, self->ns, KVC_PROTO_TIERS_ALL, keys[0],
			      2, le))
		TH_LOG("the sealed child of a g3-only parent was not put back");
	pc = parent_client(self);
	ASSERT_EQ(0, kvcc_load(&self->c, self->ns, keys[0], 2, res));
	EXPECT_EQ(0, res[0].status);
	EXPECT_EQ(kernel ? 0 : -ENOENT, res[1].status);
	EXPECT_EQ(kernel ? 2 : 1, verify_loaded(self, &pc, res, keys, 2));
	kvcc_close(&self->c);
	daemon_stop(self);
	rm_rf(dir);
}

TEST_HARNESS_MAIN
