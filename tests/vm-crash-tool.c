// SPDX-License-Identifier: GPL-2.0
/*
 * The guest's half of the whole-VM crash test (tests/vm-crash-test on the
 * host, tests/vm-crash-guest in the VM): a client of kvcached in kernel
 * mode that either stores blocks until the VM is killed, logging every
 * block as soon as it is published on g3, or, after the reboot, checks
 * that every logged block is found and loads byte-exact and that nothing
 * the daemon offers is partial or corrupt.
 *
 *   vm-crash-tool store SOCKET LOG MARKER FIRST_CHAIN
 *   vm-crash-tool verify SOCKET LOG G3_DIR
 *
 * The cluster test (tests/vm-cluster-test, tests/vm-cluster-guest) uses
 * it too, on nodes that share g4 over NFS: put stores chains FIRST to
 * FIRST+N-1 and waits until every block is on g4 (WAIT_S seconds at
 * most, 120 when not given: a batch that is only reported, not
 * required whole, need not wait long; or until the daemon's counter
 * STAT is above zero, when that is what the step waits for); get waits
 * until this node finds them (its rescans of g4 find what another node
 * published) and loads each byte-exact.
 *
 *   vm-crash-tool put SOCKET FIRST N [WAIT_S [STAT]]
 *   vm-crash-tool get SOCKET FIRST N
 *
 * and, for its failures (a cut link, a restarted server, files another
 * node removed): flush drops this node's pool and g3 copies of every
 * block, so that the next LOADs read g4; probe LOADs each chain once,
 * at once, and passes when every LOAD is answered within MAX_S seconds,
 * every block served is byte-exact, and at least MIN_HITS blocks were
 * served (a block that is not is a miss, which is allowed).
 *
 *   vm-crash-tool flush SOCKET
 *   vm-crash-tool probe SOCKET FIRST N MAX_S MIN_HITS
 *
 * and, for GC on the shared tier: settle waits until the node has seen
 * the whole directory again and collected it down to its capacity; find
 * waits until chains are on g4 by LOOKUP alone (no LOAD, so they stay
 * old in this node's LRU); hold reads chains from g4 over and over, as
 * an engine would, until STOPFILE exists, and fails if one of them is
 * collected under it.
 *
 *   vm-crash-tool settle SOCKET
 *   vm-crash-tool find SOCKET FIRST N
 *   vm-crash-tool hold SOCKET FIRST N STOPFILE
 *
 * The cluster verbs hash the namespace's salt (NS_SALT) into every key, as
 * libkvcache does, so a node's blocks are hits on another only when that
 * node learned the same salt from g4; each of them prints it. The
 * cluster's last steps reuse store and verify on g4: "store ... g4" logs
 * a block once it and its prefix are on g4 (the host kills the node's VM
 * while it spills), "verify ... G4_DIR g4" checks them after the reboot
 * and that no temp file is left there, "verify ... - g4" the same from
 * the other node without the temp files (the dead writer's stay until
 * it recovers). deny checks, as an unprivileged user, that the
 * namespace (mode 0700, root's) gives that user nothing on this node:
 * neither its salt, nor a hit, nor a listing of its g4 directory.
 *
 *   vm-crash-tool store SOCKET LOG MARKER FIRST_CHAIN [g4]
 *   vm-crash-tool verify SOCKET LOG DIR|- [g4]
 *   vm-crash-tool deny SOCKET FIRST N UID G4_DIR
 *
 * Blocks hold crash_pattern.h's pattern of their key. "Published" is what
 * survives a power loss: the block is on g3 (LOOKUP's tier mask, set only
 * once the file, its link and its directory are fsynced) and so are all
 * its ancestors, without which it can never be looked up. The log line is
 * written and fsynced right after the LOOKUP that showed it, so whatever
 * the log holds was published before the kill.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kvc_client.h"
#include "kvc_ioctl.h"
#include "keys.h"
#include "proto.h"
#include "crash_pattern.h"

#define NS		42		/* the test's namespace */
#define TPB		16
#define CHAIN		4		/* blocks per chain */
#define PAYLOAD		4096
#define MAX_CHAINS	4096		/* chains one store phase makes */
#define RANGE		100000		/* chain ids of one boot: boot * RANGE on */
#define SCAN_WAIT_S	90		/* recovery's background scan */

typedef uint8_t key_t32[KVCACHE_KEY_SIZE];

static uint8_t seed[KVCACHE_KEY_SIZE];
static bool salted;			/* the cluster verbs */
static uint32_t log_tier = KVC_PROTO_TIER_G3;	/* what store logs */

static void chain_of(uint32_t c, key_t32 *keys)
{
	uint32_t tok[CHAIN * TPB];

	for (uint32_t i = 0; i < CHAIN * TPB; i++)
		tok[i] = c * 7919u + i;
	kvc_chain_keys(seed, tok, CHAIN * TPB, TPB, keys, CHAIN);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void msleep(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static struct kvc_ns_identity identity = {
	.model = "vm-crash/model", .weights_revision = "r1",
	.tokenizer = "tok-1", .kv_layout = "paged-nhd",
	.kv_dtype = "bf16", .lora = "", .tokens_per_block = TPB,
	.tp_size = 1, .pp_size = 1,
};

/* The seed, with the namespace's salt from kvcached when salted. */
static int make_seed(struct kvcc *c)
{
	static uint8_t salt[KVC_PROTO_SALT_SIZE];
	int ret;

	if (salted) {
		ret = kvcc_ns_salt(c, NS, NULL, salt);
		if (ret) {
			fprintf(stderr, "NS_SALT: %d %s\n", ret, c->why);
			return -1;
		}
		identity.ns_salt = salt;
		identity.ns_salt_len = sizeof(salt);
		/* The first 8 bytes: the host compares the nodes' lines. */
		printf("# salt of namespace %u: %02x%02x%02x%02x%02x%02x%02x%02x...\n",
		       NS, salt[0], salt[1], salt[2], salt[3], salt[4],
		       salt[5], salt[6], salt[7]);
	}
	ret = kvc_ns_seed(&identity, seed);
	if (ret) {
		fprintf(stderr, "kvc_ns_seed: %s\n", strerror(-ret));
		return -1;
	}
	return 0;
}

static int setup(struct kvcc *c, const char *sock, int *dev)
{
	int ret;

	kvcc_init(c);
	ret = kvcc_open(c, sock);
	if (!ret)
		ret = kvcc_hello(c);
	if (ret) {
		fprintf(stderr, "%s: %d %s\n", sock, ret, c->why);
		return -1;
	}
	if (c->hello.mode != KVC_PROTO_MODE_KERNEL) {
		fprintf(stderr, "kvcached is not in kernel mode\n");
		return -1;
	}
	*dev = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (*dev < 0) {
		perror(KVCACHE_DEVICE_PATH);
		return -1;
	}
	/* Kept in the state directory across reboots: EEXIST is fine. */
	ret = kvcc_ns_create(c, NS, 0, 0, 0700);
	if (ret && ret != -EEXIST) {
		fprintf(stderr, "NS_CREATE: %d %s\n", ret, c->why);
		return -1;
	}
	return make_seed(c);
}

/* ---- store ------------------------------------------------------------------- */

static int store_chain(struct kvcc *c, int dev, uint64_t bs, uint32_t chain)
{
	struct kvcache_seal_entry se[CHAIN];
	struct kvc_store_entry e[CHAIN];
	struct kvcache_handle h[CHAIN];
	struct kvcache_batch b = {
		.size = sizeof(b), .count = CHAIN, .entries = (uintptr_t)se,
	};
	int32_t st[CHAIN];
	key_t32 keys[CHAIN];
	int ret;

	chain_of(chain, keys);
	ret = kvc_alloc(dev, NS, CHAIN, h);
	if (ret)
		return ret;
	memset(se, 0, sizeof(se));
	memset(e, 0, sizeof(e));
	for (int i = 0; i < CHAIN; i++) {
		uint8_t *p = kvc_map(dev, h[i].index, bs, PROT_READ | PROT_WRITE);

		if (!p)
			return -errno;
		crash_fill(p, keys[i], PAYLOAD);
		munmap(p, bs);
		se[i].handle = h[i];
		se[i].payload_len = PAYLOAD;
		memcpy(se[i].key, keys[i], KVCACHE_KEY_SIZE);
		memcpy(e[i].key, keys[i], KVCACHE_KEY_SIZE);
		if (i)
			memcpy(e[i].parent, keys[i - 1], KVCACHE_KEY_SIZE);
		else
			e[i].flags = KVC_PROTO_STORE_FIRST;
		e[i].handle = h[i];
	}
	ret = kvc_ioc(dev, KVCACHE_IOC_SEAL, &b);
	if (ret)
		return ret;
	ret = kvcc_store(c, NS, e, CHAIN, st);
	for (int i = 0; !ret && i < CHAIN; i++)
		ret = st[i];
	return ret;
}

/*
 * store_chain, again for 5 s at most while the pool is full of blocks
 * not yet spilled (the pressure event frees them as their writes end).
 */
static int store_chain_retry(struct kvcc *c, int dev, uint32_t chain)
{
	int ret = -ENOSPC;

	for (int tries = 0; tries < 50 && ret == -ENOSPC; tries++) {
		if (tries)
			msleep(100);
		ret = store_chain(c, dev, c->hello.block_size, chain);
	}
	return ret;
}

static void hex(const uint8_t *k, char *out)
{
	for (int i = 0; i < KVCACHE_KEY_SIZE; i++)
		sprintf(out + 2 * i, "%02x", k[i]);
}

/*
 * Store chain after chain; the pool is small, so write-back spills run
 * all the time. After each STORE, look the unlogged chains up and log
 * each block whose whole prefix is on g3. Runs until the VM is killed.
 */
static int do_store(const char *sock, const char *logpath, const char *marker,
		    uint32_t first)
{
	static uint8_t logged[MAX_CHAINS];	/* blocks of the prefix logged */
	struct kvc_lookup_entry le[CHAIN];
	uint64_t nlogged = 0;
	uint32_t lo = 0, n = 0;
	struct kvcc c;
	int dev, log, ret;

	if (setup(&c, sock, &dev))
		return 1;
	log = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (log < 0) {
		perror(logpath);
		return 1;
	}
	for (;;) {
		if (n < MAX_CHAINS) {
			ret = store_chain_retry(&c, dev, first + n);
			if (ret) {
				fprintf(stderr, "store chain %u: %d %s\n",
					first + n, ret, c.why);
				return 1;
			}
			n++;
		} else {
			msleep(50);	/* everything stored: keep logging */
		}
		for (uint32_t i = lo; i < n; i++) {
			key_t32 keys[CHAIN];
			char line[256];
			int m, len = 0;
			uint8_t k = 0;

			if (logged[i] == CHAIN)
				continue;
			chain_of(first + i, keys);
			m = kvcc_lookup(&c, NS, KVC_PROTO_TIERS_ALL, keys[0],
					CHAIN, le);
			if (m < 0) {
				fprintf(stderr, "LOOKUP: %d %s\n", m, c.why);
				return 1;
			}
			while (k < m && (le[k].tiers & log_tier))
				k++;
			for (uint8_t j = logged[i]; j < k; j++) {
				char hx[2 * KVCACHE_KEY_SIZE + 1];

				hex(keys[j], hx);
				len += snprintf(line + len, sizeof(line) - len,
						"%u %u %s\n", first + i, j, hx);
				if (len > 150) {
					if (write(log, line, len) != len)
						return 1;
					len = 0;
				}
			}
			if (len && write(log, line, len) != len)
				return 1;
			if (k > logged[i]) {
				if (fsync(log))
					return 1;
				nlogged += k - logged[i];
				logged[i] = k;
			}
		}
		while (lo < n && logged[lo] == CHAIN)
			lo++;
		/* The host kills the VM at a random moment after this. */
		if (nlogged && marker) {
			int fd = open(marker, O_WRONLY | O_CREAT | O_CLOEXEC,
				      0644);

			if (fd >= 0) {
				fsync(fd);
				close(fd);
			}
			printf("vm-crash-tool: spilling (%llu blocks published)\n",
			       (unsigned long long)nlogged);
			fflush(stdout);
			marker = NULL;
		}
	}
}

/* ---- verify ------------------------------------------------------------------ */

struct logged_block {
	uint32_t chain;
	uint32_t k;
};

static int count_tmp(const char *dir)
{
	struct dirent *de;
	DIR *dp = opendir(dir);
	int n = 0;

	if (!dp)
		return 0;
	while ((de = readdir(dp))) {
		char p[PATH_MAX];
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		if (lstat(p, &st))
			continue;
		if (S_ISDIR(st.st_mode))
			n += count_tmp(p);
		else if (!strncmp(de->d_name, ".tmp.", 5))
			n++;
	}
	closedir(dp);
	return n;
}

/* LOAD n keys; check each block served (pinned through dev). */
static int load_check(struct kvcc *c, int dev, const key_t32 *keys,
		      uint32_t n, int32_t *status, int *bad)
{
	struct kvc_load_result res[CHAIN];
	uint64_t bs = c->hello.block_size;
	int ret = kvcc_load(c, NS, keys[0], n, res);

	if (ret)
		return ret;
	for (uint32_t i = 0; i < n; i++) {
		uint8_t *p;

		status[i] = res[i].status;
		if (res[i].status)
			continue;
		if (kvc_pin(dev, res[i].handle)) {
			status[i] = -ESTALE;	/* evicted since: not served */
			continue;
		}
		p = kvc_map(dev, res[i].handle.index, bs, PROT_READ);
		if (!p || !crash_check(p, keys[i], PAYLOAD)) {
			(*bad)++;
			status[i] = -EBADMSG;
		}
		if (p)
			munmap(p, bs);
		kvc_unpin(dev, res[i].handle);
	}
	return 0;
}

static int do_verify(const char *sock, const char *logpath, const char *dir)
{
	const char *tier = log_tier == KVC_PROTO_TIER_G4 ? "g4" : "g3";
	char corrupt[32], foundc[32];
	struct logged_block *lb = NULL;
	size_t nlb = 0, cap = 0, missing = 0, found = 0;
	uint32_t maxc = 0, offered = 0;
	char line[256], hx[2 * KVCACHE_KEY_SIZE + 1];
	int dev, bad = 0, tmps = -1, fail = 0;
	struct kvcc c;
	double t0 = now_s();
	FILE *f;

	snprintf(corrupt, sizeof(corrupt), "%s_corrupt", tier);
	snprintf(foundc, sizeof(foundc), "%s_found", tier);
	if (setup(&c, sock, &dev))
		return 1;
	f = fopen(logpath, "re");
	while (f && fgets(line, sizeof(line), f)) {
		struct logged_block b;
		key_t32 keys[CHAIN];

		if (sscanf(line, "%u %u %64s", &b.chain, &b.k, hx) != 3 ||
		    b.k >= CHAIN)
			continue;	/* a line torn by the kill */
		chain_of(b.chain, keys);
		{
			char want[2 * KVCACHE_KEY_SIZE + 1];

			hex(keys[b.k], want);
			if (strcmp(want, hx)) {
				printf("# log line for chain %u block %u: key mismatch\n",
				       b.chain, b.k);
				fail = 1;
				continue;
			}
		}
		if (nlb == cap) {
			cap = cap ? cap * 2 : 1024;
			lb = realloc(lb, cap * sizeof(*lb));
			if (!lb)
				return 1;
		}
		lb[nlb++] = b;
		if (b.chain > maxc)
			maxc = b.chain;
	}
	if (f)
		fclose(f);

	/*
	 * kvcached serves once the manifest's records are checked; what the
	 * manifest lost (it is not fsynced per append) the background scan
	 * adds. Wait for every logged block to be reachable on g3.
	 */
	for (double end = now_s() + SCAN_WAIT_S;; msleep(200)) {
		missing = 0;
		for (size_t i = 0; i < nlb; i++) {
			struct kvc_lookup_entry le[CHAIN];
			key_t32 keys[CHAIN];
			int m;

			chain_of(lb[i].chain, keys);
			m = kvcc_lookup(&c, NS, log_tier, keys[0],
					lb[i].k + 1, le);
			if (m < (int)lb[i].k + 1)
				missing++;
		}
		if (!missing || now_s() > end)
			break;
	}
	printf("# %zu logged blocks, %zu not on %s after %.1f s\n", nlb,
	       missing, tier, now_s() - t0);

	/* Every logged block loads byte-exact. */
	for (size_t i = 0; i < nlb; i++) {
		key_t32 keys[CHAIN];
		int32_t st;

		chain_of(lb[i].chain, keys);
		/*
		 * On g4 a LOAD may be answered at load_timeout while its
		 * read goes on over the network: ask again a while.
		 */
		for (double end = now_s() + (log_tier == KVC_PROTO_TIER_G4 ?
					     30 : 0);; msleep(500)) {
			if (load_check(&c, dev, &keys[lb[i].k], 1, &st,
				       &bad)) {
				printf("# LOAD: %s\n", c.why);
				return 1;
			}
			if (st != -ENOENT || now_s() > end)
				break;
		}
		if (st) {
			if (missing < 20)
				printf("# logged chain %u block %u: %d\n",
				       lb[i].chain, lb[i].k, st);
			missing++;
		} else {
			found++;
		}
	}
	/*
	 * Every block the daemon offers verifies: every chain the store
	 * phases may have stored, logged or not. Each boot stores from its
	 * own range of chain ids (RANGE apart); past the last chain logged
	 * in a range, a few more were stored and not yet published.
	 */
	for (uint32_t r = 0; r <= maxc / RANGE; r++) {
		int64_t top = -1;

		for (size_t i = 0; i < nlb; i++)
			if (lb[i].chain / RANGE == r &&
			    (int64_t)(lb[i].chain % RANGE) > top)
				top = lb[i].chain % RANGE;
		for (int64_t ch = 0; top >= 0 && ch <= top + 64; ch++) {
			key_t32 keys[CHAIN];
			int32_t st[CHAIN];

			chain_of(r * RANGE + (uint32_t)ch, keys);
			if (load_check(&c, dev, keys, CHAIN, st, &bad)) {
				printf("# LOAD: %s\n", c.why);
				return 1;
			}
			for (int i = 0; i < CHAIN; i++)
				offered += !st[i];
		}
	}
	/*
	 * "-": another node's check, while the writer's temp files stay. On
	 * g4 a temp file whose manifest record the crash lost (NFS writes
	 * it back lazily) goes with the background walk: a minute or two
	 * under TCG, and a walk of the share per look.
	 */
	for (double end = now_s() + (log_tier == KVC_PROTO_TIER_G4 ? 180 : 30);
	     now_s() < end; msleep(log_tier == KVC_PROTO_TIER_G4 ? 3000 : 200)) {
		tmps = strcmp(dir, "-") ? count_tmp(dir) : 0;
		if (!tmps)
			break;
	}
	printf("# found %zu of %zu logged blocks byte-exact; %u blocks offered, %d wrong; %d temp files; %s_corrupt %llu, %s_found %llu\n",
	       found, nlb, offered, bad, tmps, tier,
	       (unsigned long long)kvcc_stat1(&c, corrupt), tier,
	       (unsigned long long)kvcc_stat1(&c, foundc));
	/* One line per promise, for the host's TAP (tests/vm-crash-test). */
	printf("RESULT blocks %s\n",
	       found == nlb && !bad && !fail ? "ok" : "fail");
	printf("RESULT tmp %s %d\n", tmps ? "fail" : "ok", tmps);
	if (found != nlb || bad || tmps)
		fail = 1;
	kvcc_close(&c);
	close(dev);
	return fail;
}

/* ---- put and get: the cluster test ---------------------------------------- */

#define CLUSTER_WAIT_S	120	/* g4 spills, the other node's rescans */

/* How many of chain c's blocks, from the first on, are in tiers. */
static int chain_in(struct kvcc *c, uint32_t chain, uint32_t tiers)
{
	struct kvc_lookup_entry le[CHAIN];
	key_t32 keys[CHAIN];
	int m, k = 0;

	chain_of(chain, keys);
	m = kvcc_lookup(c, NS, tiers, keys[0], CHAIN, le);
	if (m < 0)
		return m;
	while (k < m && (le[k].tiers & tiers))
		k++;
	return k;
}

/*
 * Wait until every chain first.. is whole in tiers, wait_s seconds at
 * most, or until the daemon's counter until (when not NULL) is above
 * zero; how many are not whole.
 */
static int wait_chains(struct kvcc *c, uint32_t first, uint32_t n,
		       uint32_t tiers, double wait_s, const char *until)
{
	int left = (int)n;

	for (double end = now_s() + wait_s; left && now_s() < end;
	     msleep(200)) {
		if (until && kvcc_stat1(c, until))
			break;
		left = 0;
		for (uint32_t i = 0; i < n; i++) {
			int k = chain_in(c, first + i, tiers);

			if (k < 0) {
				printf("# LOOKUP: %d %s\n", k, c->why);
				return k;
			}
			left += k < CHAIN;
		}
	}
	return left;
}

/*
 * LOAD chain's blocks and check them. A miss may be a LOAD answered at
 * load_timeout while the read goes on (a share slow to come back): the
 * read promotes the block, so ask again, for CLUSTER_WAIT_S at most.
 */
static int load_chain(struct kvcc *c, int dev, uint32_t chain,
		      key_t32 *keys, int32_t *st, int *bad)
{
	chain_of(chain, keys);
	for (double end = now_s() + CLUSTER_WAIT_S;; msleep(1000)) {
		int missed = 0;

		if (load_check(c, dev, keys, CHAIN, st, bad)) {
			printf("# LOAD: %s\n", c->why);
			return -1;
		}
		for (int k = 0; k < CHAIN; k++)
			missed += st[k] == -ENOENT;
		if (!missed || now_s() > end)
			return 0;
	}
}

static int do_put(const char *sock, uint32_t first, uint32_t n,
		  double wait_s, const char *until)
{
	double t0 = now_s();
	struct kvcc c;
	int dev, left;

	if (setup(&c, sock, &dev))
		return 1;
	for (uint32_t i = 0; i < n; i++) {
		int ret = store_chain_retry(&c, dev, first + i);

		if (ret) {
			printf("# store chain %u: %d %s\n", first + i, ret,
			       c.why);
			printf("RESULT put fail\n");
			return 1;
		}
	}
	left = wait_chains(&c, first, n, KVC_PROTO_TIER_G4, wait_s, until);
	printf("# %u chains stored, %d not whole on g4 after %.1f s; g4_spills %llu, g4_spill_errors %llu, g4_spill_exists %llu, spill_retries %llu, through_dropped %llu, spill_deferred %llu, g4_evictions %llu, g4_lease_skips %llu\n",
	       n, left, now_s() - t0,
	       (unsigned long long)kvcc_stat1(&c, "g4_spills"),
	       (unsigned long long)kvcc_stat1(&c, "g4_spill_errors"),
	       (unsigned long long)kvcc_stat1(&c, "g4_spill_exists"),
	       (unsigned long long)kvcc_stat1(&c, "spill_retries"),
	       (unsigned long long)kvcc_stat1(&c, "through_dropped"),
	       (unsigned long long)kvcc_stat1(&c, "spill_deferred"),
	       (unsigned long long)kvcc_stat1(&c, "g4_evictions"),
	       (unsigned long long)kvcc_stat1(&c, "g4_lease_skips"));
	printf("RESULT put %s\n", left ? "fail" : "ok");
	kvcc_close(&c);
	close(dev);
	return left != 0;
}

static int do_get(const char *sock, uint32_t first, uint32_t n)
{
	uint32_t exact = 0;
	double t0 = now_s();
	struct kvcc c;
	int dev, left, bad = 0;

	if (setup(&c, sock, &dev))
		return 1;
	left = wait_chains(&c, first, n, KVC_PROTO_TIERS_ALL, CLUSTER_WAIT_S,
			   NULL);
	printf("# %d of %u chains not found after %.1f s; g4_found %llu\n",
	       left, n, now_s() - t0,
	       (unsigned long long)kvcc_stat1(&c, "g4_found"));
	for (uint32_t i = 0; left >= 0 && i < n; i++) {
		key_t32 keys[CHAIN];
		int32_t st[CHAIN];

		if (load_chain(&c, dev, first + i, keys, st, &bad))
			return 1;
		for (int k = 0; k < CHAIN; k++) {
			if (!st[k])
				exact++;
			else if (bad < 20)
				printf("# chain %u block %d: %d\n", first + i,
				       k, st[k]);
		}
	}
	printf("# %u of %u blocks loaded byte-exact, %d wrong; g4_reads %llu, g4_corrupt %llu\n",
	       exact, n * CHAIN, bad,
	       (unsigned long long)kvcc_stat1(&c, "g4_reads"),
	       (unsigned long long)kvcc_stat1(&c, "g4_corrupt"));
	printf("RESULT get %s\n", exact == n * CHAIN && !bad ? "ok" : "fail");
	kvcc_close(&c);
	close(dev);
	return exact != n * CHAIN || bad;
}

/*
 * settle: after a restart with a smaller g4 capacity, wait until this
 * node's view of the directory is whole (two more passes over it) and
 * under the capacity (its GC is done with what it found).
 */
static int do_settle(const char *sock)
{
	uint64_t scans, bytes = 0, cap = 0;
	double t0 = now_s();
	struct kvcc c;
	int dev, ok = 0;

	if (setup(&c, sock, &dev))
		return 1;
	scans = kvcc_stat1(&c, "g4_scans");
	for (double end = now_s() + CLUSTER_WAIT_S; !ok && now_s() < end;
	     msleep(500)) {
		bytes = kvcc_stat1(&c, "g4_bytes");
		cap = kvcc_stat1(&c, "g4_capacity");
		ok = kvcc_stat1(&c, "g4_scans") >= scans + 2 && bytes <= cap;
	}
	printf("# g4 %s after %.1f s: %llu of %llu bytes; g4_evictions %llu, g4_lease_skips %llu\n",
	       ok ? "settled" : "not settled", now_s() - t0,
	       (unsigned long long)bytes, (unsigned long long)cap,
	       (unsigned long long)kvcc_stat1(&c, "g4_evictions"),
	       (unsigned long long)kvcc_stat1(&c, "g4_lease_skips"));
	printf("RESULT settle %s\n", ok ? "ok" : "fail");
	kvcc_close(&c);
	close(dev);
	return !ok;
}

/* find: wait until chains first.. are whole on g4, by LOOKUP alone (a
 * LOAD would make them this node's most recently used). */
static int do_find(const char *sock, uint32_t first, uint32_t n)
{
	double t0 = now_s();
	struct kvcc c;
	int dev, left;

	if (setup(&c, sock, &dev))
		return 1;
	left = wait_chains(&c, first, n, KVC_PROTO_TIER_G4, CLUSTER_WAIT_S,
			   NULL);
	printf("# %d of %u chains not whole on g4 after %.1f s\n", left, n,
	       now_s() - t0);
	printf("RESULT find %s\n", left ? "fail" : "ok");
	kvcc_close(&c);
	close(dev);
	return left != 0;
}

#define HOLD_MAX_S	900

/*
 * hold: an engine that reads chains first.. from g4 again and again
 * while another node's GC runs: this node's pool and g3 copies are
 * flushed before each round, so every LOAD reads g4 and so renews the
 * files' leases. Runs until STOPFILE exists. A block that is no longer
 * on g4 when its LOAD misses was collected under the reader: lost. A
 * miss still on g4 is a LOAD answered at load_timeout, tried again next
 * round. The last round, after the stop, must load every block
 * byte-exact.
 */
static int do_hold(const char *sock, uint32_t first, uint32_t n,
		   const char *stopfile)
{
	uint32_t rounds = 0, full = 0, lost = 0, misses = 0, exact = 0;
	double t0 = now_s();
	struct kvc_flush_reply r;
	struct kvcc c;
	int dev, bad = 0, ok;
	bool last = false;

	if (setup(&c, sock, &dev))
		return 1;
	while (!last) {
		last = !access(stopfile, F_OK) || now_s() - t0 > HOLD_MAX_S;
		if (kvcc_flush_tiers(&c, NS, KVC_PROTO_TIER_POOL |
				     KVC_PROTO_TIER_G3, &r)) {
			printf("# FLUSH: %s\n", c.why);
			return 1;
		}
		exact = 0;
		for (uint32_t i = 0; i < n; i++) {
			key_t32 keys[CHAIN];
			int32_t st[CHAIN];
			int k, on;

			if (last) {
				if (load_chain(&c, dev, first + i, keys, st,
					       &bad))
					return 1;
			} else {
				chain_of(first + i, keys);
				if (load_check(&c, dev, keys, CHAIN, st,
					       &bad)) {
					printf("# LOAD: %s\n", c.why);
					return 1;
				}
			}
			for (k = 0; k < CHAIN && !st[k]; k++)
				exact++;
			if (k == CHAIN)
				continue;
			on = chain_in(&c, first + i, KVC_PROTO_TIER_G4);
			if (on >= 0 && on < CHAIN) {
				lost++;
				printf("# round %u: chain %u block %d: %d, no longer on g4\n",
				       rounds, first + i, on, st[on]);
			} else {
				misses++;
			}
		}
		rounds++;
		full += exact == n * CHAIN;
		if (!last)
			msleep(500);
	}
	ok = !lost && !bad && exact == n * CHAIN;
	printf("# held %u chains for %.0f s: %u rounds, %u with every block read from g4 byte-exact, %u chain misses still on g4, %u blocks lost, %d wrong; g4_reads %llu\n",
	       n, now_s() - t0, rounds, full, misses, lost, bad,
	       (unsigned long long)kvcc_stat1(&c, "g4_reads"));
	printf("RESULT hold %s\n", ok ? "ok" : "fail");
	kvcc_close(&c);
	close(dev);
	return !ok;
}

static int do_flush(const char *sock)
{
	struct kvc_flush_reply r;
	struct kvcc c;
	int dev, ret;

	if (setup(&c, sock, &dev))
		return 1;
	ret = kvcc_flush_tiers(&c, NS, KVC_PROTO_TIER_POOL | KVC_PROTO_TIER_G3,
			       &r);
	printf("# flush of the pool and g3: %d %s\n", ret, ret ? c.why : "");
	printf("RESULT flush %s\n", ret ? "fail" : "ok");
	kvcc_close(&c);
	close(dev);
	return ret != 0;
}

static int do_probe(const char *sock, uint32_t first, uint32_t n,
		    double max_s, uint32_t min_hits)
{
	uint32_t hits = 0, misses = 0;
	double slowest = 0;
	struct kvcc c;
	int dev, bad = 0, err = 0;

	if (setup(&c, sock, &dev))
		return 1;
	for (uint32_t i = 0; i < n; i++) {
		key_t32 keys[CHAIN];
		int32_t st[CHAIN];
		double t0 = now_s(), took;
		int ret;

		chain_of(first + i, keys);
		ret = load_check(&c, dev, keys, CHAIN, st, &bad);
		took = now_s() - t0;
		if (took > slowest)
			slowest = took;
		if (ret) {
			printf("# chain %u: LOAD: %d %s\n", first + i, ret,
			       c.why);
			err++;
			continue;
		}
		for (int k = 0; k < CHAIN; k++) {
			if (!st[k])
				hits++;
			else if (st[k] != -EBADMSG)
				misses++;
		}
	}
	printf("# probe: %u hits, %u misses, %d wrong of %u blocks; slowest LOAD %.1f s (at most %.0f); load_timeouts %llu, g4_read_errors %llu\n",
	       hits, misses, bad, n * CHAIN, slowest, max_s,
	       (unsigned long long)kvcc_stat1(&c, "load_timeouts"),
	       (unsigned long long)kvcc_stat1(&c, "g4_read_errors"));
	printf("RESULT probe %s\n",
	       !err && !bad && slowest <= max_s && hits >= min_hits ?
	       "ok" : "fail");
	kvcc_close(&c);
	close(dev);
	return err || bad || slowest > max_s || hits < min_hits;
}

/* ---- deny: a tenant the namespace does not admit -------------------------- */

/*
 * As root, the keys of chains first.. (salted, as a reader's); then, as
 * uid, what this node gives a user the namespace (root's, 0700) does not
 * admit, even one who somehow knew those keys: NS_SALT, LOOKUP and LOAD
 * must be refused or find nothing, and the namespace's g4 directory must
 * not list. Passes when nothing is given.
 */
static int do_deny(const char *sock, uint32_t first, uint32_t n, uid_t uid,
		   const char *g4)
{
	uint8_t salt[KVC_PROTO_SALT_SIZE];
	uint32_t refused = 0, given = 0;
	char path[PATH_MAX];
	struct kvcc c;
	int dev, ret;
	DIR *dp;

	if (setup(&c, sock, &dev))
		return 1;
	kvcc_close(&c);
	close(dev);
	if (setgroups(0, NULL) || setgid(uid) || setuid(uid)) {
		perror("setuid");
		return 1;
	}
	kvcc_init(&c);
	ret = kvcc_open(&c, sock);
	if (!ret)
		ret = kvcc_hello(&c);
	if (ret) {
		printf("# uid %u: HELLO: %d %s\n", (unsigned int)uid, ret,
		       c.why);
		printf("RESULT deny fail\n");
		return 1;
	}
	ret = kvcc_ns_salt(&c, NS, NULL, salt);
	printf("# uid %u: NS_SALT: %d\n", (unsigned int)uid, ret);
	given += ret != -EACCES;
	for (uint32_t i = 0; i < n; i++) {
		struct kvc_lookup_entry le[CHAIN];
		struct kvc_load_result res[CHAIN];
		key_t32 keys[CHAIN];

		chain_of(first + i, keys);
		ret = kvcc_lookup(&c, NS, KVC_PROTO_TIERS_ALL, keys[0], CHAIN,
				  le);
		if (ret == -EACCES)
			refused++;
		else if (ret != 0)
			given++;
		ret = kvcc_load(&c, NS, keys[0], CHAIN, res);
		if (ret == -EACCES) {
			refused++;
			continue;
		}
		for (int k = 0; k < CHAIN; k++)
			given += !ret && !res[k].status;
		given += ret != 0;
	}
	snprintf(path, sizeof(path), "%s/ns%u", g4, NS);
	dp = opendir(path);
	printf("# uid %u: opendir %s: %s\n", (unsigned int)uid, path,
	       dp ? "listed" : strerror(errno));
	if (dp) {
		given++;
		closedir(dp);
	} else if (errno != EACCES) {
		given++;	/* not there at all proves nothing */
	}
	printf("# uid %u: %u of %u LOOKUPs and LOADs refused, %u things given\n",
	       (unsigned int)uid, refused, 2 * n, given);
	printf("RESULT deny %s\n", !given && refused == 2 * n ? "ok" : "fail");
	kvcc_close(&c);
	return given || refused != 2 * n;
}

int main(int argc, char **argv)
{
	bool crash;

	if (argc < 2)
		goto usage;
	/*
	 * The crash test's store and verify use unsalted keys on g3; every
	 * other verb, and those two with "g4" last, are the cluster test's.
	 */
	crash = !strcmp(argv[1], "store") || !strcmp(argv[1], "verify");
	if (crash && argc >= 6 && !strcmp(argv[argc - 1], "g4")) {
		log_tier = KVC_PROTO_TIER_G4;
		argc--;
		crash = false;
	}
	salted = !crash;
	if (argc == 7 && !strcmp(argv[1], "deny"))
		return do_deny(argv[2], (uint32_t)strtoul(argv[3], NULL, 0),
			       (uint32_t)strtoul(argv[4], NULL, 0),
			       (uid_t)strtoul(argv[5], NULL, 0), argv[6]);
	if (argc >= 5 && argc <= 7 && !strcmp(argv[1], "put"))
		return do_put(argv[2], (uint32_t)strtoul(argv[3], NULL, 0),
			      (uint32_t)strtoul(argv[4], NULL, 0),
			      argc >= 6 ? strtod(argv[5], NULL) :
			      CLUSTER_WAIT_S, argc == 7 ? argv[6] : NULL);
	if (argc == 5 && !strcmp(argv[1], "get"))
		return do_get(argv[2], (uint32_t)strtoul(argv[3], NULL, 0),
			      (uint32_t)strtoul(argv[4], NULL, 0));
	if (argc == 6 && !strcmp(argv[1], "store"))
		return do_store(argv[2], argv[3], argv[4],
				(uint32_t)strtoul(argv[5], NULL, 0));
	if (argc == 5 && !strcmp(argv[1], "verify"))
		return do_verify(argv[2], argv[3], argv[4]);
	if (argc == 3 && !strcmp(argv[1], "flush"))
		return do_flush(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "settle"))
		return do_settle(argv[2]);
	if (argc == 5 && !strcmp(argv[1], "find"))
		return do_find(argv[2], (uint32_t)strtoul(argv[3], NULL, 0),
			       (uint32_t)strtoul(argv[4], NULL, 0));
	if (argc == 6 && !strcmp(argv[1], "hold"))
		return do_hold(argv[2], (uint32_t)strtoul(argv[3], NULL, 0),
			       (uint32_t)strtoul(argv[4], NULL, 0), argv[5]);
	if (argc == 7 && !strcmp(argv[1], "probe"))
		return do_probe(argv[2], (uint32_t)strtoul(argv[3], NULL, 0),
				(uint32_t)strtoul(argv[4], NULL, 0),
				strtod(argv[5], NULL),
				(uint32_t)strtoul(argv[6], NULL, 0));
usage:
	fprintf(stderr,
		"usage: vm-crash-tool store SOCKET LOG MARKER FIRST_CHAIN [g4]\n"
		"       vm-crash-tool verify SOCKET LOG DIR|- [g4]\n"
		"       vm-crash-tool deny SOCKET FIRST N UID G4_DIR\n"
		"       vm-crash-tool put SOCKET FIRST N [WAIT_S [STAT]]\n"
		"       vm-crash-tool get SOCKET FIRST N\n"
		"       vm-crash-tool flush SOCKET\n"
		"       vm-crash-tool settle SOCKET\n"
		"       vm-crash-tool find SOCKET FIRST N\n"
		"       vm-crash-tool hold SOCKET FIRST N STOPFILE\n"
		"       vm-crash-tool probe SOCKET FIRST N MAX_S MIN_HITS\n");
	return 2;
}
