// SPDX-License-Identifier: GPL-2.0
/*
 * Integration tests of kvcached's persistent tiers (g3: a local
 * directory, g4: a directory several daemons share): real daemons, real
 * files, real io_uring, the real wire format (kvcd_fixture.h).
 *
 * On the host the daemon runs in memfd mode; in the test VM in kernel
 * mode, against kvcache.ko (the second daemon of the sharing test is in
 * memfd mode there: the module has one helper). The tier directories are
 * under $TMPDIR. Disk-full and read-only cases mount small tmpfs
 * instances, so those need root.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
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
#include "blockfile.h"
#include "keys.h"
#include "proto.h"

#include "kvcd_fixture.h"

/* A block file of a PAYLOAD-byte block: header and one padded page. */
#define FILE_BYTES	(4096 + 4096)

/* ---- helpers ---------------------------------------------------------------- */

/*
 * Check what a LOAD returned: every block with status 0 holds its key's
 * bytes (read through the pool mapping, or in kernel mode through a pin
 * of our own), and the pins LOAD took are dropped. Returns how many
 * blocks were good, or -1 if any held wrong bytes.
 */
static int check_loaded(SELF *self, struct kvcc *c, int mode,
			const struct kvc_load_result *res, const kvc_key *keys,
			uint32_t n)
{
	int good = 0, bad = 0;

	for (uint32_t i = 0; i < n; i++) {
		struct kvcache_handle h = res[i].handle;
		int32_t st;

		if (res[i].status)
			continue;
		if (mode == KVC_PROTO_MODE_MEMFD) {
			if (block_ok(c->pool + (size_t)h.index * self->bs,
				     keys[i]))
				good++;
			else
				bad++;
			kvcc_release(c, &h, 1, &st);
			continue;
		}
		if (kvc_pin(self->dev, h)) {
			continue;	/* evicted meanwhile: not served */
		} else {
			uint8_t *p = kvc_map(self->dev, h.index, self->bs,
					     PROT_READ);

			if (p && block_ok(p, keys[i]))
				good++;
			else
				bad++;
			if (p)
				munmap(p, self->bs);
			kvc_unpin(self->dev, h);
		}
	}
	return bad ? -1 : good;
}

/* The block file of key under dir/ns<ns>. */
static void file_of(const char *dir, uint32_t ns, const uint8_t *key,
		    char *out, size_t len)
{
	char d[PATH_MAX];

	snprintf(d, sizeof(d), "%s/ns%u", dir, ns);
	kvc_bf_path(d, key, out, len);
}

static int block_files(const char *dir)
{
	char p[PATH_MAX];
	int n = 0;
	struct dirent *de;
	DIR *dp = opendir(dir);

	if (!dp)
		return 0;
	/* ns<id>/ only: .gc/ and .quarantine/ do not count. */
	while ((de = readdir(dp))) {
		if (strncmp(de->d_name, "ns", 2))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		n += count_files(p, "") - count_files(p, ".tmp.");
		/* g4: the namespace's description (nsshare.c). */
		snprintf(p, sizeof(p), "%s/%s/namespace", dir, de->d_name);
		n -= access(p, F_OK) == 0;
	}
	closedir(dp);
	return n;
}

/* The newest mtime (CLOCK_REALTIME seconds) of a file under dir, or 0. */
static double newest_mtime(const char *dir)
{
	struct dirent *de;
	DIR *dp = opendir(dir);
	double newest = 0;

	if (!dp)
		return 0;
	while ((de = readdir(dp))) {
		char p[PATH_MAX];
		struct stat st;
		double t;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		if (lstat(p, &st))
			continue;
		t = S_ISDIR(st.st_mode) ? newest_mtime(p) :
		    (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec / 1e9;
		if (t > newest)
			newest = t;
	}
	closedir(dp);
	return newest;
}

/*
 * Until every lease under dir (a file's mtime) is older than grace_s, 15 s
 * at most: a reader's renewal is a job of its tier's worker, and under
 * load it lands later than the read that asked for it.
 */
static void wait_leases_over(const char *dir, double grace_s)
{
	for (double end = now_s() + 15; now_s() < end; msleep(100)) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		if ((double)ts.tv_sec + ts.tv_nsec / 1e9 - newest_mtime(dir) >
		    grace_s + 0.3)
			return;
	}
}

static void flip_byte(const char *path, off_t off)
{
	int fd = open(path, O_RDWR);
	uint8_t b = 0;

	if (fd < 0)
		return;
	if (pread(fd, &b, 1, off) == 1) {
		b ^= 0x40;
		if (pwrite(fd, &b, 1, off) != 1)
			b = 0;
	}
	close(fd);
}

/* ---- tests ------------------------------------------------------------------ */

/*
 * write = through: every stored block reaches g3; with the pool flushed,
 * LOOKUP finds the chain in g3 and LOAD brings it back, intact.
 */
TEST_F_TIMEOUT(kvcd, g3_write_through_and_promote, 120)
{
	struct kvc_lookup_entry le[8];
	struct kvc_load_result res[8];
	struct kvcache_handle h[8];
	char dir[PATH_MAX], conf[PATH_MAX + 128], why[512] = "";
	kvc_key keys[8];

	g3_through(dir, sizeof(dir), conf, sizeof(conf));
	ASSERT_EQ(0, restart(self, conf, why, sizeof(why))) TH_LOG("%s", why);
	chain_keys(self, 1, 8, keys);
	ASSERT_EQ(0, store_chain(self, self->ns, keys, 8, false, h));
	ASSERT_EQ(8, wait_stat(&self->c, "g3_spills", 8, 30));
	EXPECT_EQ(8, block_files(dir));
	EXPECT_EQ(8ull * FILE_BYTES, kvcc_stat1(&self->c, "g3_bytes"));

	ASSERT_EQ(0, flush_pool(&self->c, self->ns));
	EXPECT_EQ(8, kvcc_lookup(&self->c, self->ns, KVC_PROTO_TIERS_ALL,
				 keys[0], 8, le));
	for (int i = 0; i < 8; i++) {
		EXPECT_TRUE(le[i].tiers & KVC_PROTO_TIER_G3);
	}
	ASSERT_EQ(0, kvcc_load(&self->c, self->ns, keys[0], 8, res))
		TH_LOG("%s", self->c.why);
	for (int i = 0; i < 8; i++) {
		EXPECT_EQ(0, res[i].status) TH_LOG("block %d", i);
	}
	EXPECT_EQ(8, check_loaded(self, &self->c, self->mode, res, keys, 8));
	EXPECT_LE(8, kvcc_stat1(&self->c, "promotions"));
	/*
	 * Each was read straight into its pool block (free after the
	 * flush): the memfd's, or kvcache.ko's through a writable mapping
	 * of the daemon's (the module has KVCACHE_IOC_DISCARD for the reads
	 * that fail).
	 */
	EXPECT_EQ(kvcc_stat1(&self->c, "promotions"),
		  kvcc_stat1(&self->c, "promote_in_place"));
	EXPECT_EQ(0, kvcc_stat1(&self->c, "g3_corrupt"));
	rm_rf(dir);
}

/*
 * write = back: nothing is written until the pool evicts; blocks the pool
 * evicted under pressure are then found in g3 and come back intact.
 */
TEST_F_TIMEOUT(kvcd, g3_write_back_on_eviction, 120)
{
	kvc_key *keys = calloc(MAX_CHAIN, sizeof(*keys));
	struct kvcache_handle *h = calloc(MAX_CHAIN, sizeof(*h));
	struct kvc_lookup_entry le[4];
	struct kvc_load_result res[4];
	char dir[PATH_MAX], conf[PATH_MAX + 128], why[512] = "";
	uint32_t n;

	ASSERT_NE(NULL, keys);
	ASSERT_NE(NULL, h);
	tier_dir(dir, sizeof(dir), "g3");
	snprintf(conf, sizeof(conf),
		 "[g3]\ndirectory = %s\ncapacity = 64M\nwrite = back\n"
		 "queue_depth = 2\n", dir);
	ASSERT_EQ(0, restart(self, conf, why, sizeof(why))) TH_LOG("%s", why);
	chain_keys(self, 2, 4, keys);
	ASSERT_EQ(0, store_chain(self, self->ns, keys, 4, false, h));
	msleep(300);
	EXPECT_EQ(0, kvcc_stat1(&self->c, "g3_spills"));

	/* Fill the pool past its low watermark with another chain. */
	n = blocks_to_pressure(self);
	ASSERT_LT(0, n);
	ASSERT_GE(MAX_CHAIN - 4, n);
	chain_keys(self, 3, n, keys + 4);
	ASSERT_EQ(0, store_chain(self, self->ns, keys + 4, n, false, h + 4));
	ASSERT_LT(0, wait_stat(&self->c, "g3_spills", 1, 30));
	ASSERT_LT(0, wait_evictions(&self->c, 0, 30));

	/*
	 * Every block the pool evicted was written first, and the least
	 * recently used leaf, the first chain's last block, was among them:
	 * the first chain is still whole, across the pool and g3.
	 */
	msleep(300);
	EXPECT_EQ(kvcc_stat1(&self->c, "evictions"),
		  kvcc_stat1(&self->c, "g3_spills"));
	ASSERT_EQ(4, kvcc_lookup(&self->c, self->ns, KVC_PROTO_TIERS_ALL,
				 keys[0], 4, le));
	EXPECT_TRUE(le[3].tiers & KVC_PROTO_TIER_G3);
	EXPECT_FALSE(le[3].tiers & KVC_PROTO_TIER_POOL);
	ASSERT_EQ(0, flush_pool(&self->c, self->ns));
	ASSERT_EQ(0, kvcc_load(&self->c, self->ns, keys[3], 1, res))
		TH_LOG("%s", self->c.why);
	EXPECT_EQ(0, res[0].status);
	EXPECT_EQ(1, check_loaded(self, &self->c, self->mode, res, keys + 3,
				  1));
	EXPECT_EQ(0, kvcc_stat1(&self->c, "g3_spill_errors"));
	free(keys);
	free(h);
	rm_rf(dir);
}

/* A restart (or a reboot) finds every published block in g3 again. */
TEST_F_TIMEOUT(kvcd, g3_survives_restart, 120)
{
	struct kvc_lookup_entry le[6];
	struct kvc_load_result res[6];
	struct kvcache_handle h[6];
	char dir[PATH_MAX], conf[PATH_MAX + 128], why[512] = "";
	kvc_key keys[6];

	g3_through(dir, sizeof(dir), conf, sizeof(conf));
	ASSERT_EQ(0, restart(self, conf, why, sizeof(why))) TH_LOG("%s", why);
	chain_keys(self, 4, 6, keys);
	ASSERT_EQ(0, store_chain(self, self->ns, keys, 6, false, h));
	ASSERT_EQ(6, wait_stat(&self->c, "g3_spills", 6, 30));
	ASSERT_EQ(0, flush_pool(&self->c, self->ns));
	ASSERT_EQ(0, restart(self, conf, why, sizeof(why))) TH_LOG("%s", why);

	EXPECT_EQ(6, kvcc_stat1(&self->c, "g3_found"));
	EXPECT_EQ(6, kvcc_lookup(&self->c, self->ns, KVC_PROTO_TIER_G3,
				 keys[0], 6, le));
	ASSERT_EQ(0, kvcc_load(&self->c, self->ns, keys[0], 6, res));
	EXPECT_EQ(6, check_loaded(self, &self->c, self->mode, res, keys, 6));
	rm_rf(dir);
}

/*
 * kvcached killed with SIGKILL at random points while it spills, many
 * times: after each restart no temp file is left, no corrupt block is
 * served, and every block whose chain is fully on disk is found.
 */
TEST_F_TIMEOUT(kvcd, sigkill_during_spill, 600)
{
	int rounds = self->mode == KVC_PROTO_MODE_KERNEL ? 4 : 16;
	char dir[PATH_MAX], conf[PATH_MAX + 128], why[512] = "";
	struct kvc_load_result res[8];
	struct kvcache_handle h[8];
	kvc_key keys[8];
	unsigned int seed = (unsigned int)getpid();
	int served = 0;

	g3_through(dir, sizeof(dir), conf, sizeof(conf));
	for (int r = 0; r < rounds; r++) {
		int pid;

		ASSERT_EQ(0, restart(self, conf, why, sizeof(why)))
			TH_LOG("round %d: %s", r, why);
		/* Blocks of the previous rounds: each whole chain loads. */
		for (int old = 0; old < r; old++) {
			int on_disk = 0, got;
			char path[PATH_MAX];

			chain_keys(self, 100 + (uint32_t)old, 8, keys);
			for (int i = 0; i < 8; i++) {
				file_of(dir, self->ns, keys[i], path,
					sizeof(path));
				if (access(path, F_OK))
					break;
				on_disk++;
			}
			ASSERT_EQ(0, kvcc_load(&self->c, self->ns, keys[0], 8,
					       res)) TH_LOG("%s", self->c.why);
			got = check_loaded(self, &self->c, self->mode, res,
					   keys, 8);
			ASSERT_LE(0, got) TH_LOG("round %d: wrong bytes", r);
			/* The pool may hold more than the disk: not less. */
			for (int i = 0; i < on_disk; i++) {
				EXPECT_EQ(0, res[i].status)
					TH_LOG("round %d chain %d block %d", r,
					       old, i);
			}
			served += got;
		}
		EXPECT_EQ(0, count_files(dir, ".tmp."));
		EXPECT_EQ(0, kvcc_stat1(&self->c, "g3_corrupt"));
		/* A new chain, and a kill somewhere in its spill. */
		chain_keys(self, 100 + (uint32_t)r, 8, keys);
		ASSERT_EQ(0, store_chain(self, self->ns, keys, 8, false, h));
		msleep((unsigned int)(rand_r(&seed) % 25));
		pid = self->daemon;
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		self->daemon = -1;
		/* memfd mode: the pool died with it; kernel mode: the pool
		 * keeps its blocks, and a flush below makes g3 serve. */
	}
	ASSERT_EQ(0, restart(self, conf, why, sizeof(why))) TH_LOG("%s", why);
	EXPECT_EQ(0, count_files(dir, ".tmp."));
	EXPECT_LT(0, served);
	rm_rf(dir);
}

/*
 * Truncated and bit-flipped files: a miss, never the bytes. A truncated
 * file is caught by the restart scan; a flipped payload bit by the read;
 * both end up in the tier's .quarantine/ and are counted.
 */
TEST_F_TIMEOUT(kvcd, corrupt_files_are_misses, 120)
{
	struct kvc_lookup_entry le[4];
	struct kvc_load_result res[4];
	struct kvcache_handle h[4];
	char dir[PATH_MAX], conf[PATH_MAX + 128], why[512] = "";
	char path[PATH_MAX], q[PATH_MAX];
	uint64_t discards0 = 0;
	kvc_key keys[4];

	g3_through(dir, sizeof(dir), conf, sizeof(conf));
	ASSERT_EQ(0, restart(self, conf, why, sizeof(why))) TH_LOG("%s", why);
	chain_keys(self, 5, 4, keys);
	ASSERT_EQ(0, store_chain(self, self->ns, keys, 4, false, h));
	ASSERT_EQ(4, wait_stat(&self->c, "g3_spills", 4, 30));
	ASSERT_EQ(0, flush_pool(&self->c, self->ns));
	kvcc_close(&self->c);
	daemon_stop(self);

	file_of(dir, self->ns, keys[1], path, sizeof(path));
	flip_byte(path, 4096 + 100);		/* payload of block 1 */
	file_of(dir, self->ns, keys[2], path, sizeof(path));
	ASSERT_EQ(0, truncate(path, 4096 + 100));	/* block 2 cut */

	ASSERT_EQ(0, restart(self, conf, why, sizeof(why))) TH_LOG("%s", why);
	if (self->mode == KVC_PROTO_MODE_KERNEL)
		discards0 = kvc_attr_u64("stats/discards");
	/* The scan quarantined block 2; block 3 hangs on nothing. */
	EXPECT_EQ(1, kvcc_stat1(&self->c, "g3_corrupt"));
	EXPECT_EQ(2, kvcc_lookup(&self->c, self->ns, KVC_PROTO_TIERS_ALL,
				 keys[0], 4, le));
	/* Block 1 reads back wrong: a miss, quarantined too. */
	ASSERT_EQ(0, kvcc_load(&self->c, self->ns, keys[0], 2, res));
	EXPECT_EQ(0, res[0].status);
	EXPECT_EQ(-ENOENT, res[1].status);
	EXPECT_EQ(1, check_loaded(self, &self->c, self->mode, res, keys, 2));
	EXPECT_EQ(2, kvcc_stat1(&self->c, "g3_corrupt"));
	/* The block the bad read went into is free again: in memfd mode
	 * only block 0 holds one; kvcache.ko was handed it back (DISCARD). */
	if (self->mode == KVC_PROTO_MODE_MEMFD) {
		EXPECT_EQ(kvcc_stat1(&self->c, "pool_blocks") - 1,
			  kvcc_stat1(&self->c, "pool_free"));
	} else {
		EXPECT_EQ(discards0 + 1, kvc_attr_u64("stats/discards"));
	}
	EXPECT_EQ(1, kvcc_lookup(&self->c, self->ns, KVC_PROTO_TIERS_ALL,
				 keys[0], 4, le));
	/* The tier's own .quarantine/, never a directory of the tenant's. */
	snprintf(q, sizeof(q), "%s/.quarantine", dir);
	snprintf(path, sizeof(path), "ns%u.", self->ns);
	EXPECT_EQ(2, count_files(q, path));
	snprintf(q, sizeof(q), "%s/ns%u/quarantine", dir, self->ns);
	EXPECT_EQ(-1, access(q, F_OK));
	rm_rf(dir);
}

/*
 * A second daemon on the same g4 directory, as another node. With
 * refused, it is expected not to start: NULL then, and what its log says
 * in why (wlen bytes).
 */
static SELF *node_try(struct __test_metadata *_metadata, SELF *self,
		      const char *conf, char *refused, size_t wlen)
{
	SELF *b = calloc(1, sizeof(*b));
	char why[512] = "";

	if (!b)
		return NULL;
	*b = *self;
	b->mode = KVC_PROTO_MODE_MEMFD;	/* kvcache.ko has one helper */
	b->daemon = -1;
	b->dev = -1;
	b->nmade = 0;
	kvcc_init(&b->c);
	snprintf(b->sock, sizeof(b->sock), "%s.b", self->sock);
	snprintf(b->state, sizeof(b->state), "%s.b", self->state);
	snprintf(b->conf, sizeof(b->conf), "%s.b", self->conf);
	snprintf(b->log, sizeof(b->log), "%s.b", self->log);
	b->extra_conf = conf;
	if (refused) {
		FILE *f;

		refused[0] = '\0';
		if (!write_config(b) && !daemon_start(b, why, sizeof(why))) {
			TH_LOG("second node started, refusal expected");
			fixture_down(_metadata, b);
			free(b);
			return NULL;
		}
		f = fopen(b->log, "re");
		if (f) {
			size_t n = fread(refused, 1, wlen - 1, f);

			refused[n] = '\0';
			fclose(f);
		}
		fixture_down(_metadata, b);
		free(b);
		return NULL;
	}
	if (write_config(b) || daemon_start(b, why, sizeof(why)) ||
	    kvcc_open(&b->c, b->sock) || kvcc_hello(&b->c) ||
	    ns_create(b, &b->c, self->ns, 0, 0, 0700)) {
		TH_LOG("second node: %s %s", why, b->c.why);
		fixture_down(_metadata, b);
		free(b);
		return NULL;
	}
	return b;
}

static SELF *second_node(struct __test_metadata *_metadata, SELF *self,
			 const char *conf)
{
	return node_try(_metadata, self, conf, NULL, 0);
}

/* Write a claim on node name node in g4 dir, as host wrote it age_s ago. */
static int plant_claim(const char *dir, const char *node, const char *host,
		       long age_s)
{
	char p[PATH_MAX];
	struct timespec ts[2];
	FILE *f;

	snprintf(p, sizeof(p), "%s/.nodes", dir);
	if (mkdir(p, 0755) && errno != EEXIST)
		return -errno;
	snprintf(p, sizeof(p), "%s/.nodes/%s", dir, node);
	f = fopen(p, "we");
	if (!f)
		return -errno;
	fprintf(f, "kvcache-node 1\nhost %s\nboot 0-elsewhere\npid 1 1\n", host);
	if (fclose(f))
		return -errno;
	clock_gettime(CLOCK_REALTIME, &ts[0]);
	ts[0].tv_sec -= age_s;
	ts[1] = ts[0];
	return utimensat(AT_FDCWD, p, ts, 0) ? -errno : 0;
}

/*
 * Two daemons must not share a node name in one g4 (each would take the
 * other's temp files for its own leftovers): a second daemon with the
 * name a live one holds is refused at start, and says why; once the
 * first has stopped (its claim removed) the name is free. A claim of
 * another host renewed a moment ago refuses the name too; one silent for
 * ten minutes is taken over, with a warning.
 */
TEST_F_TIMEOUT(kvcd, node_name_shared_is_refused, 120)
{
	const char *fmt = "[g4]\ndirectory = %s\ncapacity = 64M\nnode = %s\n";
	char dir[PATH_MAX], ca[PATH_MAX + 128], cb[PATH_MAX + 128];
	char p[PATH_MAX + 32], log[4096], why[512] = "";
	SELF *b;

	tier_dir(dir, sizeof(dir), "g4");
	snprintf(ca, sizeof(ca), fmt, dir, "same");
	ASSERT_EQ(0, restart(self, ca, why, sizeof(why))) TH_LOG("%s", why);
	snprintf(p, sizeof(p), "%s/.nodes/same", dir);
	EXPECT_EQ(0, access(p, F_OK));
	EXPECT_EQ(NULL, node_try(_metadata, self, ca, log, sizeof(log)));
	EXPECT_NE(NULL, strstr(log, "node name 'same' is in use on this machine"))
		TH_LOG("its log: %s", log);
	/* A clean stop gives the name back. */
	ASSERT_EQ(0, restart(self, NULL, why, sizeof(why))) TH_LOG("%s", why);
	EXPECT_NE(0, access(p, F_OK));
	b = second_node(_metadata, self, ca);
	ASSERT_NE(NULL, b);
	fixture_down(_metadata, b);
	free(b);

	/* Another host's claim: fresh refuses, silent is taken over. */
	ASSERT_EQ(0, plant_claim(dir, "theirs", "some-other-host", 10));
	snprintf(cb, sizeof(cb), fmt, dir, "theirs");
	EXPECT_EQ(NULL, node_try(_metadata, self, cb, log, sizeof(log)));
	EXPECT_NE(NULL, strstr(log, "is in use by host some-other-host"))
		TH_LOG("its log: %s", log);
	ASSERT_EQ(0, plant_claim(dir, "theirs", "some-other-host", 600));
	b = second_node(_metadata, self, cb);
	ASSERT_NE(NULL, b);
	EXPECT_TRUE(file_has(b->log, "silent for"));
	fixture_down(_metadata, b);
	free(b);
	rm_rf(dir);
}

/* On a failure, what each node's g4 did: the timing it ran under. */
static void g4_report(struct __test_metadata *_metadata, const char *node,
		      struct kvcc *c)
{
	static const char *const names[] = {
		"g4_spills", "g4_spill_errors", "g4_evictions",
		"g4_lease_skips", "g4_scans", "spill_retries",
		"spill_deferred",
	};
	char line[512];
	int n = 0;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		n += snprintf(line + n, sizeof(line) - n, " %s %llu", names[i],
			      (unsigned long long)kvcc_stat1(c, names[i]));
	TH_LOG("%s:%s", node, line);
}

/*
 * Two daemons, node a and node b, share one g4 directory: what a stores
 * is a hit for b after b's rescan, and the capacity holds for the two
 * together.
 */
TEST_F_TIMEOUT(kvcd, g4_shared_by_two_nodes, 180)
{
	struct kvc_lookup_entry le[8];
	struct kvc_load_result res[8];
	struct kvcache_handle h[8];
	char dir[PATH_MAX], ca[PATH_MAX + 256], cb[PATH_MAX + 256];
	char why[512] = "";
	const char *fmt = "[g4]\ndirectory = %s\ncapacity = %u\nnode = %s\n"
			  "scan_interval = 200ms\ngrace = 1s\n";
	/* Room for 12 block files in the whole directory. */
	unsigned int cap = 12 * FILE_BYTES;
	kvc_key keys[8], more[8];
	SELF *b;
	int got = 0;

	tier_dir(dir, sizeof(dir), "g4");
	snprintf(ca, sizeof(ca), fmt, dir, cap, "node-a");
	snprintf(cb, sizeof(cb), fmt, dir, cap, "node-b");
	ASSERT_EQ(0, restart(self, ca, why, sizeof(why))) TH_LOG("%s", why);
	b = second_node(_metadata, self, cb);
	ASSERT_NE(NULL, b);

	chain_keys(self, 6, 8, keys);
	ASSERT_EQ(0, store_chain(self, self->ns, keys, 8, false, h));
	ASSERT_EQ(8, wait_stat(&self->c, "g4_spills", 8, 30));
	/* b finds a's chain within a scan interval or two. */
	for (double end = now_s() + 20; now_s() < end && got < 8; msleep(50))
		got = kvcc_lookup(&b->c, self->ns, KVC_PROTO_TIER_G4, keys[0],
				  8, le);
	EXPECT_EQ(8, got);
	ASSERT_EQ(0, kvcc_load(&b->c, self->ns, keys[0], 8, res))
		TH_LOG("%s", b->c.why);
	EXPECT_EQ(8, check_loaded(b, &b->c, KVC_PROTO_MODE_MEMFD, res, keys,
				  8));

	/*
	 * b stores 8 more: 16 files for room for 12. b's reads renewed the
	 * leases of a's files: only once their grace is over can GC on
	 * either node take them. (Before it is, b's GC finds a's files
	 * leased and takes b's own first blocks instead, which their
	 * children's retries then write again: more than 8 spills, and
	 * more than 16 files for a while.)
	 */
	msleep(1500);
	wait_leases_over(dir, 1.0);
	chain_keys(self, 7, 8, more);
	ASSERT_EQ(0, make_blocks(b, &b->c, -1, self->ns, more, 8, false, h));
	ASSERT_EQ(0, store_blocks(&b->c, self->ns, more, NULL, h, 8, NULL));
	got = (int)wait_stat(&b->c, "g4_spills", 8, 30);
	if (got < 8) {
		TH_LOG("b spilled %d of 8; %d block files in %s", got,
		       block_files(dir), dir);
		g4_report(_metadata, "node a", &self->c);
		g4_report(_metadata, "node b", &b->c);
	}
	ASSERT_LE(8, got);
	for (double end = now_s() + 30; now_s() < end; msleep(100))
		if (block_files(dir) <= 12)
			break;
	EXPECT_GE(12, block_files(dir));
	EXPECT_LT(0, kvcc_stat1(&self->c, "g4_evictions") +
		  kvcc_stat1(&b->c, "g4_evictions"));
	/* The collected files wait in .gc/, then go. */
	snprintf(ca, sizeof(ca), "%s/.gc", dir);
	for (double end = now_s() + 10; now_s() < end; msleep(100))
		if (!count_files(ca, ""))
			break;
	EXPECT_EQ(0, count_files(ca, ""));
	if (_metadata->exit_code == KSFT_FAIL) {
		TH_LOG("%d block files in %s", block_files(dir), dir);
		g4_report(_metadata, "node a", &self->c);
		g4_report(_metadata, "node b", &b->c);
	}
	fixture_down(_metadata, b);
	free(b);
	rm_rf(dir);
}

/*
 * A parent's g4 file goes (deleted behind the daemon, as another node's
 * GC takes it) while the parent stays in the pool. Its children, stored
 * then, wait for it, and the wait writes it again: the chain is whole on
 * g4 within a few retries, rather than its children waiting until the
 * pool evicts the parent.
 */
TEST_F_TIMEOUT(kvcd, g4_parent_taken_is_written_again, 120)
{
	struct kvc_lookup_entry le[4];
	struct kvcache_handle h[4];
	char dir[PATH_MAX], conf[PATH_MAX + 128], path[PATH_MAX];
	char why[512] = "";
	kvc_key keys[3];
	int got = -1;

	tier_dir(dir, sizeof(dir), "g4");
	snprintf(conf, sizeof(conf),
		 "[g4]\ndirectory = %s\ncapacity = 16m\nnode = solo\nscan_interval = 200ms\n",
		 dir);
	ASSERT_EQ(0, restart(self, conf, why, sizeof(why))) TH_LOG("%s", why);
	chain_keys(self, 11, 3, keys);
	ASSERT_EQ(0, store_chain(self, self->ns, keys, 1, false, h));
	ASSERT_EQ(1, wait_stat(&self->c, "g4_spills", 1, 30));
	file_of(dir, self->ns, keys[0], path, sizeof(path));
	ASSERT_EQ(0, unlink(path));
	/* A rescan finds it gone. */
	for (double end = now_s() + 20; now_s() < end && got; msleep(50))
		got = kvcc_lookup(&self->c, self->ns, KVC_PROTO_TIER_G4,
				  keys[0], 1, le);
	ASSERT_EQ(0, got);

	ASSERT_EQ(0, make_blocks(self, &self->c, self->dev, self->ns,
				 keys + 1, 2, false, h + 1));
	ASSERT_EQ(0, store_blocks(&self->c, self->ns, keys + 1, keys[0],
				  h + 1, 2, NULL));
	/* The parent again, then its children. */
	EXPECT_EQ(4, wait_stat(&self->c, "g4_spills", 4, 30));
	for (double end = now_s() + 10; now_s() < end && got < 3; msleep(50))
		got = kvcc_lookup(&self->c, self->ns, KVC_PROTO_TIER_G4,
				  keys[0], 3, le);
	EXPECT_EQ(3, got);
	EXPECT_EQ(0, access(path, F_OK));
	EXPECT_EQ(0, kvcc_stat1(&self->c, "g4_spill_errors"));
	rm_rf(dir);
}

/*
 * Write a description of namespace ns (uid 0, gid 0, mode 0777, a salt
 * of zeroes) into g4 dir by hand, as nsshare.c's format has it: with a
 * wrong CRC if bad_crc, as a symbolic link to such a file if link, with
 * mode. 0 or -errno.
 */
static int plant_desc(const char *dir, uint32_t ns, mode_t mode, bool bad_crc,
		      bool link)
{
	char p[PATH_MAX], body[512], real[PATH_MAX + 16];
	int n, fd, ret = 0;

	n = snprintf(body, sizeof(body),
		     "kvcache-namespace 1\nid %u\nuid 0\ngid 0\nmode 777\nsalt %064d\nnode hand\n",
		     ns, 0);
	n += snprintf(body + n, sizeof(body) - n, "crc32c %08x\n",
		      kvc_crc32c(0, body, (size_t)n) ^ (bad_crc ? 1 : 0));
	snprintf(p, sizeof(p), "%s/ns%u", dir, ns);
	if (mkdir(p, 0700) && errno != EEXIST)
		return -errno;
	snprintf(real, sizeof(real), "%s/desc-%u", dir, ns);
	snprintf(p, sizeof(p), "%s/ns%u/namespace", dir, ns);
	fd = open(link ? real : p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return -errno;
	if (write(fd, body, (size_t)n) != n || fchmod(fd, mode))
		ret = -EIO;
	close(fd);
	if (!ret && link && symlink(real, p))
		ret = -errno;
	return ret;
}

/*
 * Namespaces across the nodes of one g4: a namespace created on node a
 * is described in g4 (0644 in the namespace's directory, as its blocks) and
 * known to node b with the same owner, group, mode and salt, whether b
 * starts after it (learned at start) or runs already (learned within
 * seconds). Creating it on b again with the same owner and mode is
 * harmless, with another mode is EEXIST. A salt set on a reaches g4: a
 * node starting later takes it. A description not to be trusted
 * (writable by group, a symbolic link) or not checking (a wrong CRC)
 * teaches nothing, and a FIFO under the name hangs nothing; a good one
 * written by hand is learned.
 */
TEST_F_TIMEOUT(kvcd, namespaces_shared_through_g4, 120)
{
	const char *fmt = "[g4]\ndirectory = %s\ncapacity = 64M\nnode = %s\n"
			  "scan_interval = 200ms\n";
	uint32_t n1 = self->ns + 1, n2 = self->ns + 2, good = self->ns + 3;
	uint32_t group_w = self->ns + 4, crc = self->ns + 5, lnk = self->ns + 6;
	uint32_t fifo = self->ns + 7;
	uint8_t sa[KVC_PROTO_SALT_SIZE], sb[KVC_PROTO_SALT_SIZE];
	uint8_t zero[KVC_PROTO_SALT_SIZE] = { 0 }, set[KVC_PROTO_SALT_SIZE];
	char dir[PATH_MAX], ca[PATH_MAX + 128], cb[PATH_MAX + 128];
	char p[PATH_MAX + 32], why[512] = "";
	struct kvc_ns_entry e;
	bool learned = false;
	struct stat st;
	SELF *b;

	ASSERT_GE(KVCACHE_NS_MAX, fifo);
	tier_dir(dir, sizeof(dir), "g4");
	snprintf(ca, sizeof(ca), fmt, dir, "node-a");
	snprintf(cb, sizeof(cb), fmt, dir, "node-b");
	ASSERT_EQ(0, restart(self, ca, why, sizeof(why))) TH_LOG("%s", why);
	ASSERT_EQ(0, ns_create(self, &self->c, n1, 1234, 1234, 0750))
		TH_LOG("%s", self->c.why);
	snprintf(p, sizeof(p), "%s/ns%u/namespace", dir, n1);
	ASSERT_EQ(0, stat(p, &st));
	EXPECT_EQ(0644, st.st_mode & 07777);
	ASSERT_EQ(0, plant_desc(dir, good, 0600, false, false));
	/* This node learns it too, on its rescans: the kernel's namespace
	 * (kernel mode) goes at the cleanup with the ones it made. */
	if (self->nmade < 8)
		self->made[self->nmade++] = good;
	ASSERT_EQ(0, plant_desc(dir, group_w, 0620, false, false));
	ASSERT_EQ(0, plant_desc(dir, crc, 0600, true, false));
	ASSERT_EQ(0, plant_desc(dir, lnk, 0600, false, true));
	/* A FIFO under the name must not hang the node that reads it. */
	snprintf(p, sizeof(p), "%s/ns%u", dir, fifo);
	ASSERT_EQ(0, mkdir(p, 0700));
	snprintf(p, sizeof(p), "%s/ns%u/namespace", dir, fifo);
	ASSERT_EQ(0, mkfifo(p, 0600));

	b = second_node(_metadata, self, cb);
	ASSERT_NE(NULL, b);
	/* Learned at start: the same owner, group, mode and salt. */
	ASSERT_EQ(0, kvcc_ns_entry(&b->c, n1, &e));
	EXPECT_EQ(1234, e.uid);
	EXPECT_EQ(1234, e.gid);
	EXPECT_EQ(0750, e.mode);
	ASSERT_EQ(0, kvcc_ns_salt(&self->c, n1, NULL, sa));
	ASSERT_EQ(0, kvcc_ns_salt(&b->c, n1, NULL, sb));
	EXPECT_EQ(0, memcmp(sa, sb, sizeof(sa)));
	EXPECT_EQ(0, kvcc_ns_create(&b->c, n1, 1234, 1234, 0750))
		TH_LOG("%s", b->c.why);
	EXPECT_EQ(-EEXIST, kvcc_ns_create(&b->c, n1, 1234, 1234, 0700));
	/* The hand-made description is learned; the three bad ones not. */
	ASSERT_EQ(0, kvcc_ns_salt(&b->c, good, NULL, sb));
	EXPECT_EQ(0, memcmp(zero, sb, sizeof(sb)));
	EXPECT_EQ(-ENOENT, kvcc_ns_salt(&b->c, group_w, NULL, sb));
	EXPECT_EQ(-ENOENT, kvcc_ns_salt(&b->c, crc, NULL, sb));
	EXPECT_EQ(-ENOENT, kvcc_ns_salt(&b->c, lnk, NULL, sb));
	EXPECT_EQ(-ENOENT, kvcc_ns_salt(&b->c, fifo, NULL, sb));

	/* Created on a while b runs: b learns it within 5 s (TCG: more). */
	ASSERT_EQ(0, ns_create(self, &self->c, n2, 0, 0, 0700));
	for (double end = now_s() + 60; !learned && now_s() < end;
	     msleep(100))
		learned = !kvcc_ns_salt(&b->c, n2, NULL, sb);
	EXPECT_TRUE(learned);
	ASSERT_EQ(0, kvcc_ns_salt(&self->c, n2, NULL, sa));
	EXPECT_EQ(0, memcmp(sa, sb, sizeof(sa)));
	EXPECT_LE(3, kvcc_stat1(&b->c, "ns_learned"));

	/* A salt set on a is rewritten in g4: a node started later has it. */
	memset(set, 0x5a, sizeof(set));
	ASSERT_EQ(0, kvcc_ns_salt(&self->c, n1, set, NULL));
	fixture_down(_metadata, b);
	free(b);
	b = second_node(_metadata, self, cb);
	ASSERT_NE(NULL, b);
	ASSERT_EQ(0, kvcc_ns_salt(&b->c, n1, NULL, sb));
	EXPECT_EQ(0, memcmp(set, sb, sizeof(sb)));
	EXPECT_EQ(0, kvcc_stat1(&b->c, "ns_conflicts"));
	fixture_down(_metadata, b);
	free(b);
	rm_rf(dir);
}

/* plant_desc(), the file then given to uid (its directory stays ours). */
static int plant_owned(const char *dir, uint32_t ns, uid_t uid)
{
	char p[PATH_MAX];
	int ret = plant_desc(dir, ns, 0644, false, false);

	snprintf(p, sizeof(p), "%s/ns%u/namespace", dir, ns);
	if (!ret && chown(p, uid, uid))
		ret = -errno;
	return ret;
}

/*
 * Who may write namespace descriptions (issue #36, finding 4). g4 is
 * owned by nobody, as root_squash with the default anonuid leaves it: a
 * description nobody owns is not learned, and an NS_CREATE of its id
 * does not take its salt. Owned by kvcached's user or by [g4]
 * trusted_uid, it is learned; ns_learn_max = 1 learns one a pass (one at
 * start, then one every 5 s), each logged with its description's owner.
 */
TEST_F_TIMEOUT(kvcd, g4_descriptions_need_a_trusted_writer, 120)
{
	const char *fmt = "[g4]\ndirectory = %s\ncapacity = 64M\nnode = node-a\n"
			  "scan_interval = 200ms\ntrusted_uid = 4321\n"
			  "ns_learn_max = 1\n";
	uint32_t planted = self->ns + 1, by_trusted = self->ns + 2;
	uint32_t by_us[3] = { self->ns + 3, self->ns + 4, self->ns + 5 };
	uint8_t zero[KVC_PROTO_SALT_SIZE] = { 0 }, salt[KVC_PROTO_SALT_SIZE];
	char dir[PATH_MAX], conf[PATH_MAX + 256], why[512] = "", text[128];
	uint64_t learned;
	struct stat st;

	if (geteuid() != 0)
		SKIP(return, "needs root (files of other owners)");
	ASSERT_GE(KVCACHE_NS_MAX, by_us[2]);
	tier_dir(dir, sizeof(dir), "g4");
	ASSERT_EQ(0, chown(dir, 65534, 65534));
	ASSERT_EQ(0, plant_owned(dir, planted, 65534));
	ASSERT_EQ(0, plant_owned(dir, by_trusted, 4321));
	for (int i = 0; i < 3; i++)
		ASSERT_EQ(0, plant_owned(dir, by_us[i], 0));
	/* The kernel's namespaces (kernel mode) go at the cleanup. */
	ASSERT_GE(8 - 5, self->nmade);
	self->made[self->nmade++] = by_trusted;
	for (int i = 0; i < 3; i++)
		self->made[self->nmade++] = by_us[i];
	snprintf(conf, sizeof(conf), fmt, dir);
	ASSERT_EQ(0, restart(self, conf, why, sizeof(why))) TH_LOG("%s", why);

	/* Four to learn, one a pass: one at start, one more at most since. */
	learned = kvcc_stat1(&self->c, "ns_learned");
	EXPECT_LE(1, learned);
	EXPECT_GE(2, learned);
	for (double end = now_s() + 60; learned < 4 && now_s() < end;
	     msleep(100))
		learned = kvcc_stat1(&self->c, "ns_learned");
	EXPECT_EQ(4, learned);
	ASSERT_EQ(0, kvcc_ns_salt(&self->c, by_trusted, NULL, salt));
	EXPECT_EQ(0, memcmp(zero, salt, sizeof(salt)));
	snprintf(text, sizeof(text), "namespace %u learned from g4 (made by node hand, description owned by uid 4321)",
		 by_trusted);
	EXPECT_TRUE(file_has(self->log, text)) TH_LOG("no \"%s\"", text);
	for (int i = 0; i < 3; i++) {
		EXPECT_EQ(0, kvcc_ns_salt(&self->c, by_us[i], NULL, salt));
		snprintf(text, sizeof(text), "namespace %u learned from g4",
			 by_us[i]);
		EXPECT_TRUE(file_has(self->log, text)) TH_LOG("no \"%s\"", text);
	}

	/* nobody's description: not learned, then not the created one's. */
	EXPECT_EQ(-ENOENT, kvcc_ns_salt(&self->c, planted, NULL, salt));
	ASSERT_EQ(0, ns_create(self, &self->c, planted, 0, 0, 0777))
		TH_LOG("%s", self->c.why);
	ASSERT_EQ(0, kvcc_ns_salt(&self->c, planted, NULL, salt));
	EXPECT_NE(0, memcmp(zero, salt, sizeof(salt)));
	EXPECT_EQ(4, kvcc_stat1(&self->c, "ns_learned"));
	/* The planted file is still nobody's: not replaced, not believed. */
	snprintf(why, sizeof(why), "%s/ns%u/namespace", dir, planted);
	ASSERT_EQ(0, stat(why, &st));
	EXPECT_EQ(65534, st.st_uid);
	rm_rf(dir);
}

/*
 * EVICT drops a block from every tier that holds it (deepest first), and
 * FLUSH of a namespace empties it on every tier: an admin purging a
 * tenant leaves nothing of it on disk.
 */
TEST_F_TIMEOUT(kvcd, evict_and_flush_reach_every_tier, 120)
{
	struct kvc_lookup_entry le[4];
	struct kvc_flush_reply fr;
	struct kvcache_handle h[4];
	char dir[PATH_MAX], conf[PATH_MAX + 128], why[512] = "";
	char path[PATH_MAX];
	int32_t st[4];
	kvc_key keys[4];

	g3_through(dir, sizeof(dir), conf, sizeof(conf));
	ASSERT_EQ(0, restart(self, conf, why, sizeof(why))) TH_LOG("%s", why);
	chain_keys(self, 10, 4, keys);
	ASSERT_EQ(0, store_chain(self, self->ns, keys, 4, false, h));
	ASSERT_EQ(4, wait_stat(&self->c, "g3_spills", 4, 30));

	/* The parent alone: its child is still cached, in both tiers. */
	ASSERT_EQ(0, kvcc_evict(&self->c, self->ns, keys[2], 1, st));
	EXPECT_EQ(-ENOTEMPTY, st[0]);
	/* The last two, in one request: deepest first, from both tiers. */
	ASSERT_EQ(0, kvcc_evict(&self->c, self->ns, keys[2], 2, st));
	EXPECT_EQ(0, st[0]);
	EXPECT_EQ(0, st[1]);
	file_of(dir, self->ns, keys[3], path, sizeof(path));
	EXPECT_NE(0, access(path, F_OK));
	EXPECT_EQ(2, kvcc_lookup(&self->c, self->ns, KVC_PROTO_TIERS_ALL,
				 keys[0], 4, le));
	EXPECT_EQ(2, block_files(dir));

	/* FLUSH of the pool only leaves the disk copies... */
	ASSERT_EQ(0, kvcc_flush_tiers(&self->c, self->ns, KVC_PROTO_TIER_POOL,
				      &fr));
	EXPECT_EQ(2, fr.evicted);
	EXPECT_EQ(2, kvcc_lookup(&self->c, self->ns, KVC_PROTO_TIER_G3,
				 keys[0], 4, le));
	/* ... FLUSH of every tier leaves nothing. */
	ASSERT_EQ(0, kvcc_flush(&self->c, self->ns, &fr));
	EXPECT_EQ(2, fr.evicted);
	EXPECT_EQ(0, fr.busy);
	EXPECT_EQ(0, kvcc_lookup(&self->c, self->ns, KVC_PROTO_TIERS_ALL,
				 keys[0], 4, le));
	EXPECT_EQ(0, block_files(dir));
	rm_rf(dir);
}

/* Mount a tmpfs of size bytes (read-only when ro) on dir. */
static int mount_small(const char *dir, unsigned int size, bool ro)
{
	char opt[64];

	snprintf(opt, sizeof(opt), "size=%u,mode=0755", size);
	if (mount("kvcd-test", dir, "tmpfs", ro ? MS_RDONLY : 0, opt))
		return -errno;
	return 0;
}

/*
 * The disk fills up: spills fail and are counted, and the service goes
 * on from DRAM.
 */
TEST_F_TIMEOUT(kvcd, disk_full_keeps_serving_from_dram, 120)
{
	struct kvc_lookup_entry le[8];
	struct kvc_load_result res[8];
	struct kvcache_handle h[8];
	char dir[PATH_MAX], conf[PATH_MAX + 128], why[512] = "";
	kvc_key keys[8];

	tier_dir(dir, sizeof(dir), "full");
	/* Three block files fit (plus the directories). */
	ASSERT_EQ(0, mount_small(dir, 7 * 4096 + 3 * FILE_BYTES, false));
	snprintf(conf, sizeof(conf),
		 "[g3]\ndirectory = %s\ncapacity = 64M\nwrite = through\n",
		 dir);
	EXPECT_EQ(0, restart(self, conf, why, sizeof(why))) TH_LOG("%s", why);
	chain_keys(self, 8, 8, keys);
	EXPECT_EQ(0, store_chain(self, self->ns, keys, 8, false, h));
	EXPECT_LT(0, wait_stat(&self->c, "g3_spill_errors", 1, 30));
	EXPECT_EQ(8, kvcc_lookup(&self->c, self->ns, KVC_PROTO_TIER_POOL,
				 keys[0], 8, le));
	EXPECT_EQ(0, kvcc_load(&self->c, self->ns, keys[0], 8, res));
	EXPECT_EQ(8, check_loaded(self, &self->c, self->mode, res, keys, 8));
	EXPECT_EQ(0, count_files(dir, ".tmp."));
	kvcc_close(&self->c);
	daemon_stop(self);
	umount(dir);
	rm_rf(dir);
}

/*
 * A read-only filesystem: the daemon says so, serves from DRAM, counts
 * the spills it could not make, and reads what is there.
 */
TEST_F_TIMEOUT(kvcd, read_only_tier, 120)
{
	struct kvc_load_result res[4];
	struct kvcache_handle h[4];
	char dir[PATH_MAX], conf[PATH_MAX + 128], why[512] = "";
	kvc_key keys[4];

	tier_dir(dir, sizeof(dir), "ro");
	ASSERT_EQ(0, mount_small(dir, 1 << 20, true));
	snprintf(conf, sizeof(conf),
		 "[g3]\ndirectory = %s\ncapacity = 64M\nwrite = through\n",
		 dir);
	EXPECT_EQ(0, restart(self, conf, why, sizeof(why))) TH_LOG("%s", why);
	chain_keys(self, 9, 4, keys);
	EXPECT_EQ(0, store_chain(self, self->ns, keys, 4, false, h));
	EXPECT_EQ(0, kvcc_load(&self->c, self->ns, keys[0], 4, res));
	EXPECT_EQ(4, check_loaded(self, &self->c, self->mode, res, keys, 4));
	EXPECT_EQ(0, kvcc_stat1(&self->c, "g3_spills"));
	EXPECT_LE(4, kvcc_stat1(&self->c, "g3_spill_errors"));
	kvcc_close(&self->c);
	daemon_stop(self);
	umount(dir);
	rm_rf(dir);
}

TEST_HARNESS_MAIN
