// SPDX-License-Identifier: GPL-2.0
/*
 * The hostile tenant (issue #36, findings 1 and 9): a tenant with a shell
 * on the machine, and so on its namespace's directory in g3 and g4,
 * plants what its uid lets it plant (symbolic links, FIFOs, forged block
 * files, directories of its own, a quarantine/ of its own, renames between
 * rescans) wherever kvcached walks, writes, quarantines or claims, and
 * kvcached must follow none of it. After each attack:
 *
 *  - the victim's blocks still load byte-exact, through the protocol, as
 *    the victim's uid, from the tier (the pool flushed first);
 *  - nothing the attacker's uid can reach holds the victim's blocks (a
 *    walk of the tier and the outside directory as the attacker: no file
 *    whose header names the victim's namespace, none with its bytes);
 *  - nothing appears outside the tier (a root-owned directory next to it
 *    that the links point at stays empty);
 *  - kvcached still runs and answers.
 *
 * Each attack runs twice: live (the tenant plants while kvcached runs,
 * as the tenant could on the day), then on a legacy tier (kvcached
 * stopped, ns<id>/ handed to the tenant as earlier kvcached versions left
 * it, the tenant plants, kvcached starts: its recovery and first scan meet
 * what was planted). A kvcached that keeps ns<id>/ to itself stops the
 * first round at the tenant's first mkdir; the second still needs every
 * path below the tier's root opened without following links.
 *
 * The paths attacked: the rescan's walk and its quarantine
 * (fanout_links_to_victim, quarantine_link_out_of_tier,
 * fifos_and_forgeries), the recovery at start (every legacy round), the
 * spill (leaf_link_out_of_tier), the promote's read of a corrupt file
 * (quarantine_link_out_of_tier), GC (gc_through_links), descriptions
 * (description_links) and node claims (nodes_dir_of_another_user,
 * heartbeat_hardlink_swap).
 *
 * The fixture's variants put the tier in g3 (write-through, scanned after
 * each start) or g4 (rescanned every 200 ms). The node claims of g4
 * (.nodes/) are the last tests. Root only: the test acts as the tenant by
 * forking children that drop to its uid.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "kvc_client.h"
#include "kvc_ioctl.h"
#include "blockfile.h"
#include "keys.h"
#include "proto.h"

#include "kvcd_fixture.h"

#define ATT_UID		61001		/* the attacker, tenant of ns + 1 */
#define VIC_UID		61002		/* the victim, tenant of ns + 2 */
#define NV		8		/* the victim's blocks */
#define NA		4		/* the attacker's blocks, per round */
#define NODE		"hostile"

/* The test plays the tenants by taking their uids: only root can. */
#define NEED_ROOT() do {						\
	if (geteuid())							\
		SKIP(return, "acts as other uids: root only");		\
} while (0)

FIXTURE_VARIANT(kvcd) {
	const char *tier;		/* "g3" or "g4" */
	bool shared;			/* g4 */
};

FIXTURE_VARIANT_ADD(kvcd, g3) {
	.tier = "g3", .shared = false,
};

FIXTURE_VARIANT_ADD(kvcd, g4) {
	.tier = "g4", .shared = true,
};

/* One test's setting: the tier, the outside directory, the two tenants. */
struct hctx {
	SELF *self;
	const char *tier;
	bool shared;
	char dir[PATH_MAX];		/* the tier's directory */
	char outside[PATH_MAX];		/* root's, 0755, next to the tier */
	char conf[PATH_MAX + 256];
	char attdir[PATH_MAX];		/* dir/ns<att> */
	char vicdir[PATH_MAX];		/* dir/ns<vic> */
	uint32_t att, vic;
	kvc_key vkeys[NV];
	kvc_key akeys[NA];
	uint32_t round;			/* salt of the attacker's next keys */
	char stat[64];			/* "<tier>_" */
};

static char *tstat(struct hctx *h, const char *what)
{
	snprintf(h->stat, sizeof(h->stat), "%s_%s", h->tier, what);
	return h->stat;
}

/* ---- acting as a tenant ------------------------------------------------- */

typedef int (*tenant_fn)(struct hctx *h, void *arg);

/*
 * Run fn in a child that holds uid's ids and nothing else (no groups, no
 * descriptor of ours): what it does, the tenant can do. fn's result
 * (0..255) is the exit status; -1 when the child died otherwise.
 */
static int as_uid(struct hctx *h, uid_t uid, tenant_fn fn, void *arg)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return -1;
	if (!pid) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (h->self->c.fd >= 0)
			close(h->self->c.fd);
		if (setgroups(0, NULL) || setresgid(uid, uid, uid) ||
		    setresuid(uid, uid, uid) || geteuid() != uid)
			_exit(255);
		_exit(fn(h, arg) & 0xff);
	}
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

/* ---- the checks ----------------------------------------------------------- */

/*
 * LOAD the victim's chain through c and count the blocks that came back
 * with the victim's bytes (memfd mode: through c's pool mapping; kernel
 * mode: pinned and mapped through dev, as a client reads them).
 */
static int load_good(struct hctx *h, struct kvcc *c, int dev)
{
	struct kvc_load_result res[NV];
	int good = 0;

	if (kvcc_load(c, h->vic, h->vkeys[0], NV, res)) {
		fprintf(stderr, "#   uid %u: LOAD: %s\n", getuid(), c->why);
		return 201;
	}
	for (int i = 0; i < NV; i++) {
		struct kvcache_handle hd = res[i].handle;
		int32_t st;

		if (res[i].status)
			continue;
		if (h->self->mode == KVC_PROTO_MODE_MEMFD) {
			good += !!block_ok(c->pool + (size_t)hd.index *
					   c->hello.block_size, h->vkeys[i]);
			kvcc_release(c, &hd, 1, &st);
		} else if (dev >= 0 && !kvc_pin(dev, hd)) {
			uint8_t *p = kvc_map(dev, hd.index, c->hello.block_size,
					     PROT_READ);

			good += p && block_ok(p, h->vkeys[i]);
			if (p)
				munmap(p, c->hello.block_size);
			kvc_unpin(dev, hd);
		}
	}
	return good;
}

/*
 * As the victim (kernel mode): connect, LOAD, count. The device is
 * opened before the ids drop, as the fixture's is.
 */
static int victim_load(struct hctx *h, void *arg)
{
	struct kvcc c;
	int good;

	kvcc_init(&c);
	if (kvcc_open(&c, h->self->sock) || kvcc_hello(&c)) {
		fprintf(stderr, "#   uid %u: connect/HELLO: %s\n", getuid(),
			c.why);
		return 200;
	}
	good = load_good(h, &c, (int)(intptr_t)arg);
	kvcc_close(&c);
	return good;
}

/* The victim's block files still in place and whole (read as root). */
static int victim_files(struct hctx *h)
{
	uint8_t *buf = malloc(PAYLOAD);
	int n = 0;

	for (int i = 0; buf && i < NV; i++) {
		struct kvc_bf_header hd;

		if (!kvc_bf_read(h->vicdir, h->vkeys[i], &hd, buf, PAYLOAD) &&
		    hd.ns_id == h->vic)
			n++;
	}
	free(buf);
	return n;
}

/* Does the file at fd hold the victim's header or one of its keys? */
static bool holds_victim(struct hctx *h, int fd)
{
	static uint8_t buf[2 * KVC_BF_HEADER_SIZE];
	struct kvc_bf_header hd;
	ssize_t n = pread(fd, buf, sizeof(buf), 0);

	/* A header naming the victim's namespace and one of its keys (the
	 * tenant's own forgeries name the victim too, not its keys). */
	if (n >= KVC_BF_HEADER_SIZE && !kvc_bf_decode_header(buf, &hd) &&
	    hd.ns_id == h->vic)
		for (int i = 0; i < NV; i++)
			if (!memcmp(hd.key, h->vkeys[i], KVCACHE_KEY_SIZE))
				return true;
	for (ssize_t off = 0; off + KVCACHE_KEY_SIZE <= n; off++)
		for (int i = 0; i < NV; i++)
			if (!memcmp(buf + off, h->vkeys[i], KVCACHE_KEY_SIZE))
				return true;
	return false;
}

/* Files under path the caller can open that hold the victim's data. */
static int walk_victim(struct hctx *h, const char *path, int depth)
{
	struct dirent *de;
	int n = 0;
	DIR *dp;

	if (depth > 8 || !(dp = opendir(path)))
		return 0;
	while ((de = readdir(dp))) {
		char p[PATH_MAX];
		struct stat st;
		int fd;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", path, de->d_name);
		if (lstat(p, &st))
			continue;
		if (S_ISDIR(st.st_mode)) {
			n += walk_victim(h, p, depth + 1);
			continue;
		}
		if (!S_ISREG(st.st_mode))
			continue;
		fd = open(p, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (holds_victim(h, fd)) {
			fprintf(stderr, "#   the attacker reads %s\n", p);
			n++;
		}
		close(fd);
	}
	closedir(dp);
	return n;
}

static int attacker_walk(struct hctx *h, void *arg)
{
	int n = walk_victim(h, h->dir, 0) + walk_victim(h, h->outside, 0);

	return n > 250 ? 250 : n;
}

/* Entries (of any kind) under dir, recursively; each one named. */
static int entries(const char *dir, int depth)
{
	struct dirent *de;
	int n = 0;
	DIR *dp;

	if (depth > 8 || !(dp = opendir(dir)))
		return 0;
	while ((de = readdir(dp))) {
		char p[PATH_MAX];
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    !strcmp(de->d_name, "bait"))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		fprintf(stderr, "#   outside the tier: %s\n", p);
		n++;
		if (!lstat(p, &st) && S_ISDIR(st.st_mode))
			n += entries(p, depth + 1);
	}
	closedir(dp);
	return n;
}

static bool daemon_alive(SELF *self)
{
	int st;

	return self->daemon > 0 && waitpid(self->daemon, &st, WNOHANG) == 0;
}

/*
 * Until the tier has walked its directory: g4, twice more (one pass may
 * have begun before the planting); g3, once after a start (the
 * recovery's check of the manifests counts as the first pass, the walk
 * in the background that follows it as the second; 5 s at most, in case
 * a recovery without manifests walked it at once).
 */
static void wait_scans(struct hctx *h)
{
	uint64_t base = kvcc_stat1(&h->self->c, tstat(h, "scans"));

	if (base == UINT64_MAX)
		base = 0;
	if (h->shared)
		wait_stat(&h->self->c, tstat(h, "scans"), base + 2, 20);
	else
		wait_stat(&h->self->c, tstat(h, "scans"), 2, 5);
}

/*
 * Every check after an attack. round names it in the messages: "live"
 * or "legacy".
 */
static void check_all(struct __test_metadata *_metadata, struct hctx *h,
		      const char *round)
{
	SELF *self = h->self;
	int dev = -1, good, seen;

	ASSERT_TRUE(daemon_alive(self))
		TH_LOG("%s round: kvcached is gone", round);
	EXPECT_NE(UINT64_MAX, kvcc_stat1(&self->c, "pool_free"))
		TH_LOG("%s round: kvcached does not answer STATS: %s", round,
		       self->c.why);
	EXPECT_EQ(NV, victim_files(h))
		TH_LOG("%s round: the victim's files left in %s", round,
		       h->vicdir);
	ASSERT_EQ(0, flush_pool(&self->c, h->vic));
	/*
	 * memfd mode maps the whole pool into every peer, so only peers
	 * that may read every namespace (root) are served there; kernel
	 * mode serves the victim's own uid.
	 */
	if (self->mode == KVC_PROTO_MODE_KERNEL) {
		dev = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
		good = as_uid(h, VIC_UID, victim_load, (void *)(intptr_t)dev);
		if (dev >= 0)
			close(dev);
	} else {
		good = load_good(h, &self->c, -1);
	}
	EXPECT_EQ(NV, good)
		TH_LOG("%s round: the victim's blocks (uid %u) load %d of %d byte-exact",
		       round, VIC_UID, good, NV);
	seen = as_uid(h, ATT_UID, attacker_walk, NULL);
	EXPECT_EQ(0, seen)
		TH_LOG("%s round: the attacker (uid %u) reads %d files of the victim's",
		       round, ATT_UID, seen);
	EXPECT_EQ(0, entries(h->outside, 0))
		TH_LOG("%s round: files appeared in %s, outside the tier",
		       round, h->outside);
}

/* ---- setting up ----------------------------------------------------------- */

/*
 * The test's directories, under the fixture's scratch directory (removed
 * by its teardown, whatever the test did): the tier, and outside/ next
 * to it, root's and 0755, where the tenant's links point.
 */
static void dirs_up(struct hctx *h)
{
	SELF *self = h->self;

	tier_dir(self->scratch, sizeof(self->scratch), "hostile");
	snprintf(h->dir, sizeof(h->dir), "%s/%s", self->scratch, h->tier);
	snprintf(h->outside, sizeof(h->outside), "%s/outside", self->scratch);
	mkdir(h->dir, 0755);
	mkdir(h->outside, 0755);
}

static int conf_for(struct hctx *h)
{
	if (h->shared)
		return snprintf(h->conf, sizeof(h->conf),
				"[g4]\ndirectory = %s\ncapacity = 64M\nnode = " NODE "\n"
				"write = through\nscan_interval = 200ms\n",
				h->dir);
	return snprintf(h->conf, sizeof(h->conf),
			"[g3]\ndirectory = %s\ncapacity = 64M\nwrite = through\n"
			"[g4]\nscan_interval = 200ms\n", h->dir);
}

/*
 * Store n blocks of ns under keys and wait (timeout_s at most) until the
 * tier has written or refused them: 0, -ETIMEDOUT, or STORE's error.
 */
static int store_spilled(struct hctx *h, uint32_t ns, const kvc_key *keys,
			 uint32_t n, double timeout_s)
{
	SELF *self = h->self;
	struct kvcache_handle hd[NV];
	uint64_t base = kvcc_stat1(&self->c, tstat(h, "spills"));
	uint64_t errs = kvcc_stat1(&self->c, tstat(h, "spill_errors"));
	int ret = store_chain(self, ns, keys, n, false, hd);

	if (ret)
		return ret;
	/* Spilled, or refused: either way kvcached is done with them. */
	for (double end = now_s() + timeout_s; now_s() < end; msleep(20)) {
		/* One counter at a time: tstat()'s buffer is shared. */
		uint64_t done = kvcc_stat1(&self->c, tstat(h, "spills"));

		done += kvcc_stat1(&self->c, tstat(h, "spill_errors"));
		if (done >= base + errs + n)
			return 0;
	}
	return -ETIMEDOUT;
}

static void hostile_up(struct __test_metadata *_metadata, SELF *self,
		       const FIXTURE_VARIANT(kvcd) *variant, struct hctx *h)
{
	char why[512] = "";

	memset(h, 0, sizeof(*h));
	h->self = self;
	h->tier = variant->tier;
	h->shared = variant->shared;
	h->att = self->ns + 1;
	h->vic = self->ns + 2;
	h->round = 10;
	dirs_up(h);
	snprintf(h->attdir, sizeof(h->attdir), "%s/ns%u", h->dir, h->att);
	snprintf(h->vicdir, sizeof(h->vicdir), "%s/ns%u", h->dir, h->vic);
	conf_for(h);
	ASSERT_EQ(0, restart(self, h->conf, why, sizeof(why)))
		TH_LOG("%s", why);
	ASSERT_EQ(0, ns_create(self, &self->c, h->att, ATT_UID, ATT_UID, 0700))
		TH_LOG("%s", self->c.why);
	ASSERT_EQ(0, ns_create(self, &self->c, h->vic, VIC_UID, VIC_UID, 0700))
		TH_LOG("%s", self->c.why);
	chain_keys(self, 1, NV, h->vkeys);
	chain_keys(self, 2, NA, h->akeys);
	ASSERT_EQ(0, store_spilled(h, h->vic, h->vkeys, NV, 20));
	ASSERT_EQ(0, store_spilled(h, h->att, h->akeys, NA, 20));
	ASSERT_EQ(NV, victim_files(h)) TH_LOG("the victim's blocks not in %s",
					       h->vicdir);
}


/*
 * The legacy round: kvcached stopped, ns<att>/ the tenant's and
 * writable by it (what earlier versions left, once the tenant chmods it),
 * plant as the tenant, then kvcached started on it.
 */
static int legacy_start(struct hctx *h, tenant_fn plant, void *arg,
			int *planted)
{
	SELF *self = h->self;
	char why[512] = "";
	int ret;

	kvcc_close(&self->c);
	daemon_stop(self);
	if (chown(h->attdir, ATT_UID, ATT_UID) || chmod(h->attdir, 0755))
		return -errno;
	*planted = as_uid(h, ATT_UID, plant, arg);
	ret = restart(self, h->conf, why, sizeof(why));
	if (ret)
		fprintf(stderr, "# legacy start: %s\n", why);
	return ret;
}

/* The tenant's u+w on its own directory, as on the day (may fail). */
static int tenant_chmod(const char *dir)
{
	return chmod(dir, 0755) ? errno : 0;
}

/* ---- the attacks ---------------------------------------------------------- */

/*
 * The property the rest rests on: a tenant can read its namespace's
 * directory (libkvcache opens its g3 files itself) but can neither create
 * anything in it nor give itself the right to.
 */
struct own_dir_result {
	int create, chmod_err, create_after, mkdir_q, read_own;
};

static int try_own_dir(struct hctx *h, void *arg)
{
	struct own_dir_result *r = arg;
	char p[PATH_MAX + 32];
	int fd;

	snprintf(p, sizeof(p), "%s/planted", h->attdir);
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644);
	r->create = fd >= 0 ? 0 : errno;
	if (fd >= 0)
		close(fd);
	r->chmod_err = tenant_chmod(h->attdir);
	snprintf(p, sizeof(p), "%s/planted2", h->attdir);
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644);
	r->create_after = fd >= 0 ? 0 : errno;
	if (fd >= 0)
		close(fd);
	snprintf(p, sizeof(p), "%s/quarantine", h->attdir);
	r->mkdir_q = mkdir(p, 0755) ? errno : 0;
	kvc_bf_path(h->attdir, h->akeys[0], p, sizeof(p));
	fd = open(p, O_RDONLY);
	r->read_own = fd >= 0 ? 0 : errno;
	if (fd >= 0)
		close(fd);
	return 0;
}

TEST_F_TIMEOUT(kvcd, tenant_cannot_write_its_directory, 60)
{
	struct own_dir_result *r = mmap(NULL, sizeof(*r), PROT_READ |
					PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
					-1, 0);
	struct stat st;
	struct hctx h;

	NEED_ROOT();

	ASSERT_NE(MAP_FAILED, r);
	hostile_up(_metadata, self, variant, &h);
	ASSERT_EQ(0, as_uid(&h, ATT_UID, try_own_dir, r));
	EXPECT_EQ(EACCES, r->create) TH_LOG("open(%s/planted, O_CREAT) as uid %u: %s",
					     h.attdir, ATT_UID, strerror(r->create));
	EXPECT_EQ(EPERM, r->chmod_err) TH_LOG("chmod(%s) as its tenant (uid %u): %s",
					       h.attdir, ATT_UID,
					       r->chmod_err ? strerror(r->chmod_err) : "done");
	EXPECT_EQ(EACCES, r->create_after) TH_LOG("open(%s/planted2, O_CREAT) after the chmod: %s",
						   h.attdir, strerror(r->create_after));
	EXPECT_EQ(EACCES, r->mkdir_q) TH_LOG("mkdir(%s/quarantine): %s",
					      h.attdir, strerror(r->mkdir_q));
	EXPECT_EQ(0, r->read_own) TH_LOG("the tenant cannot read its own block in %s: %s",
					  h.attdir, strerror(r->read_own));
	ASSERT_EQ(0, lstat(h.attdir, &st));
	EXPECT_EQ(0, st.st_mode & 0222 & ~(mode_t)0200)
		TH_LOG("%s is mode %o", h.attdir, st.st_mode & 07777);
	EXPECT_NE(ATT_UID, st.st_uid) TH_LOG("%s is owned by the tenant",
					     h.attdir);
	munmap(r, sizeof(*r));
}

/*
 * Read and delete: ns<att>/aa -> ../ns<vic>/aa for every fan-out byte
 * (the directories kvcached made there renamed away first: a rename
 * between rescans), and a quarantine/ of the tenant's own. A scan that
 * follows the links finds the victim's headers, "corrupt" in ns<att>, and
 * moves them into the tenant's quarantine/.
 */
static int plant_fanout_links(struct hctx *h, void *arg)
{
	char p[PATH_MAX + 16], q[PATH_MAX + 32], target[64];
	int made = 0;

	tenant_chmod(h->attdir);
	for (int b = 0; b < 256; b++) {
		snprintf(p, sizeof(p), "%s/%02x", h->attdir, b);
		snprintf(q, sizeof(q), "%s/%02x.moved", h->attdir, b);
		rename(p, q);
		snprintf(target, sizeof(target), "../ns%u/%02x", h->vic, b);
		made += !symlink(target, p);
	}
	snprintf(p, sizeof(p), "%s/quarantine", h->attdir);
	if (mkdir(p, 0755) && errno == EEXIST)
		chmod(p, 0755);
	return made ? 0 : 1;
}

TEST_F_TIMEOUT(kvcd, fanout_links_to_victim, 120)
{
	struct hctx h;
	int planted;

	NEED_ROOT();

	hostile_up(_metadata, self, variant, &h);
	planted = as_uid(&h, ATT_UID, plant_fanout_links, NULL);
	TH_LOG("live: the tenant %s its links", planted ? "could not plant" :
	       "planted");
	if (!h.shared) {
		char why[512];

		ASSERT_EQ(0, restart(self, h.conf, why, sizeof(why)))
			TH_LOG("%s", why);
	}
	wait_scans(&h);
	check_all(_metadata, &h, "live");

	ASSERT_EQ(0, legacy_start(&h, plant_fanout_links, NULL, &planted));
	TH_LOG("legacy: the tenant %s its links", planted ? "could not plant" :
	       "planted");
	wait_scans(&h);
	check_all(_metadata, &h, "legacy");
}

/*
 * Write: ns<att>/aa/bb -> a root directory outside the tier, for the
 * keys of blocks the tenant then stores (its own keys: it knows its
 * salt). A spill that follows the link creates root's files there.
 */
static int plant_leaf_links(struct hctx *h, void *arg)
{
	const kvc_key *keys = arg;
	int made = 0;

	tenant_chmod(h->attdir);
	for (int i = 0; i < NA; i++) {
		char aa[PATH_MAX + 8], leaf[PATH_MAX + 16], moved[PATH_MAX + 32];

		snprintf(aa, sizeof(aa), "%s/%02x", h->attdir, keys[i][0]);
		snprintf(leaf, sizeof(leaf), "%s/%02x", aa, keys[i][1]);
		/* kvcached's own aa/ (root's): swapped for one of ours. */
		if (!mkdir(aa, 0755) || errno == EEXIST) {
			struct stat st;

			if (!lstat(aa, &st) && st.st_uid != ATT_UID) {
				snprintf(moved, sizeof(moved), "%s.moved", aa);
				rename(aa, moved);
				mkdir(aa, 0755);
			}
		}
		made += !symlink(h->outside, leaf);
	}
	return made ? 0 : 1;
}

static void next_keys(struct hctx *h, kvc_key *keys)
{
	chain_keys(h->self, h->round++, NA, keys);
}

/*
 * The attacker's blocks stored (as root: memfd mode serves no other
 * peer) for the tier to write where the tenant planted: STORE itself
 * must work; whether the tier writes them or refuses is kvcached's call,
 * so a tier that does neither within 10 s is only noted.
 */
static void store_attacker(struct __test_metadata *_metadata,
			   struct hctx *h, const kvc_key *keys)
{
	int ret = store_spilled(h, h->att, keys, NA, 10);

	if (ret == -ETIMEDOUT)
		TH_LOG("%s neither wrote nor refused the tenant's %d blocks within 10 s",
		       h->tier, NA);
	else
		EXPECT_EQ(0, ret) TH_LOG("STORE of the tenant's blocks: %s",
					 h->self->c.why);
}

TEST_F_TIMEOUT(kvcd, leaf_link_out_of_tier, 120)
{
	kvc_key keys[NA];
	struct hctx h;
	int planted;

	NEED_ROOT();

	hostile_up(_metadata, self, variant, &h);
	next_keys(&h, keys);
	planted = as_uid(&h, ATT_UID, plant_leaf_links, keys);
	TH_LOG("live: the tenant %s its links", planted ? "could not plant" :
	       "planted");
	store_attacker(_metadata, &h, keys);
	check_all(_metadata, &h, "live");

	next_keys(&h, keys);
	ASSERT_EQ(0, legacy_start(&h, plant_leaf_links, keys, &planted));
	TH_LOG("legacy: the tenant %s its links", planted ? "could not plant" :
	       "planted");
	wait_scans(&h);
	store_attacker(_metadata, &h, keys);
	check_all(_metadata, &h, "legacy");
}

/*
 * Quarantine: ns<att>/quarantine -> the outside directory, and a corrupt
 * file (the tenant's own, under its own key's name, in a fan-out of its
 * own) for the scan to find. A quarantine that follows the link moves it
 * out of the tier, into a directory the tenant cannot write.
 */
static int plant_quarantine_link(struct hctx *h, void *arg)
{
	const uint8_t *key = arg;
	char aa[PATH_MAX + 8], p[PATH_MAX + 128], moved[PATH_MAX + 32];
	static char junk[2 * KVC_BF_HEADER_SIZE];
	int fd, ok = 0;

	tenant_chmod(h->attdir);
	snprintf(p, sizeof(p), "%s/quarantine", h->attdir);
	/* A quarantine/ kvcached made is renamed away, ours replaced. */
	snprintf(moved, sizeof(moved), "%s/quarantine.moved", h->attdir);
	rename(p, moved);
	rm_rf(p);
	ok += !symlink(h->outside, p);
	snprintf(aa, sizeof(aa), "%s/%02x", h->attdir, key[0]);
	snprintf(moved, sizeof(moved), "%s.moved2", aa);
	rename(aa, moved);
	mkdir(aa, 0755);
	snprintf(p, sizeof(p), "%s/%02x", aa, key[1]);
	mkdir(p, 0755);
	kvc_bf_path(h->attdir, key, p, sizeof(p));
	memset(junk, 0x5a, sizeof(junk));
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd >= 0) {
		ok += write(fd, junk, sizeof(junk)) == sizeof(junk);
		close(fd);
	}
	return ok == 2 ? 0 : 1;
}

TEST_F_TIMEOUT(kvcd, quarantine_link_out_of_tier, 120)
{
	kvc_key keys[NA];
	struct hctx h;
	int planted;

	NEED_ROOT();

	hostile_up(_metadata, self, variant, &h);
	/* A key the manifest names: recovery and the scan both meet it. */
	planted = as_uid(&h, ATT_UID, plant_quarantine_link, h.akeys[0]);
	TH_LOG("live: the tenant %s its quarantine link",
	       planted ? "could not plant" : "planted");
	if (!h.shared) {
		char why[512];

		ASSERT_EQ(0, restart(self, h.conf, why, sizeof(why)))
			TH_LOG("%s", why);
	}
	wait_scans(&h);
	check_all(_metadata, &h, "live");

	next_keys(&h, keys);
	store_attacker(_metadata, &h, keys);
	ASSERT_EQ(0, legacy_start(&h, plant_quarantine_link, keys[1],
				  &planted));
	TH_LOG("legacy: the tenant %s its quarantine link",
	       planted ? "could not plant" : "planted");
	wait_scans(&h);
	/* A read of the corrupt file quarantines it too (g3: tier.c). */
	flush_pool(&self->c, h.att);
	{
		struct kvc_load_result res[NA];

		kvcc_load(&self->c, h.att, keys[0], NA, res);
	}
	check_all(_metadata, &h, "legacy");
}

/*
 * FIFOs where kvcached opens files (a block's name, a temp file's, the
 * description's), and a forged block file whose header names the
 * victim's namespace: kvcached must neither hang on the FIFOs nor let the
 * forgery into the victim's namespace; it keeps scanning and serving.
 */
static int plant_fifos(struct hctx *h, void *arg)
{
	const kvc_key *keys = arg;
	char aa[PATH_MAX + 8], p[PATH_MAX + 200];
	static uint8_t img[KVC_BF_HEADER_SIZE + PAYLOAD];
	struct kvc_bf_header hd = {
		.flags = KVC_BF_F_FIRST, .ns_id = h->vic,
		.payload_len = PAYLOAD,
	};
	int fd, ok = 0;

	tenant_chmod(h->attdir);
	for (int i = 0; i < 2; i++) {
		snprintf(aa, sizeof(aa), "%s/%02x", h->attdir, keys[i][0]);
		mkdir(aa, 0755);
		snprintf(p, sizeof(p), "%s/%02x", aa, keys[i][1]);
		mkdir(p, 0755);
	}
	/* keys[0]: a FIFO in place of a block; keys[1]: the forgery. */
	kvc_bf_path(h->attdir, keys[0], p, sizeof(p));
	ok += !mkfifo(p, 0644);
	snprintf(p + strlen(p) - 68, 200, ".tmp." NODE ".1.1.%064x", 0);
	ok += !mkfifo(p, 0644);
	snprintf(p, sizeof(p), "%s/namespace", h->attdir);
	mkfifo(p, 0644);
	memcpy(hd.key, keys[1], KVC_BF_KEY_SIZE);
	fill_block(img + KVC_BF_HEADER_SIZE, keys[1]);
	snprintf(hd.node_id, sizeof(hd.node_id), "forger");
	if (!kvc_bf_build(&hd, img)) {
		kvc_bf_path(h->attdir, keys[1], p, sizeof(p));
		fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd >= 0) {
			ok += write(fd, img, sizeof(img)) == sizeof(img);
			close(fd);
		}
	}
	return ok == 3 ? 0 : 1;
}

/* Files under ns<att>/quarantine/ the caller can open. */
static int open_quarantined(struct hctx *h, void *arg)
{
	char q[PATH_MAX + 16], p[PATH_MAX + 300];
	struct dirent *de;
	int n = 0;
	DIR *dp;

	snprintf(q, sizeof(q), "%s/quarantine", h->attdir);
	dp = opendir(q);
	if (!dp)
		return 0;
	while ((de = readdir(dp))) {
		int fd;

		snprintf(p, sizeof(p), "%s/%s", q, de->d_name);
		fd = de->d_name[0] == '.' ? -1 :
		     open(p, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd >= 0) {
			fprintf(stderr, "#   the tenant opens %s\n", p);
			n++;
			close(fd);
		}
	}
	closedir(dp);
	return n;
}

/*
 * The forgery (a block file in the tenant's directory whose header names
 * the victim's namespace) is no block of either namespace, and whatever
 * kvcached does with it, it keeps it out of the tenant's reach: the
 * tenant made no quarantine/ here, so any there is kvcached's.
 */
static void check_forgery(struct __test_metadata *_metadata, struct hctx *h,
			  const kvc_key *keys, const char *round)
{
	struct kvc_lookup_entry le[1];
	SELF *self = h->self;
	int n = as_uid(h, ATT_UID, open_quarantined, NULL);

	EXPECT_EQ(0, n)
		TH_LOG("%s round: kvcached quarantined %d files where their tenant reads them (%s/quarantine)",
		       round, n, h->attdir);

	EXPECT_EQ(0, kvcc_lookup(&self->c, h->vic, KVC_PROTO_TIERS_ALL,
				 keys[1], 1, le))
		TH_LOG("%s round: the tenant's forgery is a block of the victim's namespace",
		       round);
	EXPECT_EQ(0, kvcc_lookup(&self->c, h->att, KVC_PROTO_TIERS_ALL,
				 keys[1], 1, le))
		TH_LOG("%s round: a file naming namespace %u is a block of %u",
		       round, h->vic, h->att);
}

TEST_F_TIMEOUT(kvcd, fifos_and_forgeries, 120)
{
	kvc_key keys[NA];
	struct hctx h;
	int planted;

	NEED_ROOT();

	hostile_up(_metadata, self, variant, &h);
	next_keys(&h, keys);
	planted = as_uid(&h, ATT_UID, plant_fifos, keys);
	TH_LOG("live: the tenant %s its FIFOs", planted ? "could not plant" :
	       "planted");
	if (!h.shared) {
		char why[512];

		ASSERT_EQ(0, restart(self, h.conf, why, sizeof(why)))
			TH_LOG("%s", why);
	}
	wait_scans(&h);
	check_forgery(_metadata, &h, keys, "live");
	check_all(_metadata, &h, "live");

	next_keys(&h, keys);
	ASSERT_EQ(0, legacy_start(&h, plant_fifos, keys, &planted));
	TH_LOG("legacy: the tenant %s its FIFOs", planted ? "could not plant" :
	       "planted");
	wait_scans(&h);
	check_forgery(_metadata, &h, keys, "legacy");
	check_all(_metadata, &h, "legacy");
	/* Still scanning: no worker stuck on a FIFO. */
	if (h.shared) {
		uint64_t base = kvcc_stat1(&self->c, "g4_scans");

		EXPECT_LE(base + 2, wait_stat(&self->c, "g4_scans", base + 2, 20));
	}
}

/*
 * Descriptions (g4): ns<att>/namespace and kvcached's temp name for it
 * made links to a root file outside the tier before kvcached rewrites the
 * description (a new salt): the file outside is not written.
 */
static int plant_desc_links(struct hctx *h, void *arg)
{
	char p[PATH_MAX + 128], target[PATH_MAX + 8];
	pid_t daemon = (pid_t)(intptr_t)arg;
	int ok = 0;

	tenant_chmod(h->attdir);
	snprintf(target, sizeof(target), "%s/bait", h->outside);
	snprintf(p, sizeof(p), "%s/namespace", h->attdir);
	unlink(p);
	ok += !symlink(target, p);
	snprintf(p, sizeof(p), "%s/.namespace.new." NODE ".%ld", h->attdir,
		 (long)daemon);
	ok += !symlink(target, p);
	return ok == 2 ? 0 : 1;
}

static const char BAIT[] = "the operator's file\n";

static void make_bait(struct hctx *h, char *path, size_t len, mode_t mode)
{
	int fd;

	snprintf(path, len, "%s/bait", h->outside);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
	if (fd >= 0) {
		if (write(fd, BAIT, sizeof(BAIT) - 1) != sizeof(BAIT) - 1)
			fprintf(stderr, "# %s: short write\n", path);
		fchmod(fd, mode);
		close(fd);
	}
}

static bool bait_intact(const char *path)
{
	char buf[256];
	int fd = open(path, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf)) : -1;

	if (fd >= 0)
		close(fd);
	return n == (ssize_t)sizeof(BAIT) - 1 && !memcmp(buf, BAIT, n);
}

TEST_F_TIMEOUT(kvcd, description_links, 120)
{
	uint8_t salt[KVC_PROTO_SALT_SIZE];
	char bait[PATH_MAX + 8], why[512];
	struct hctx h;
	int planted;

	NEED_ROOT();

	if (!variant->shared)
		SKIP(return, "descriptions are g4's");
	hostile_up(_metadata, self, variant, &h);
	make_bait(&h, bait, sizeof(bait), 0644);
	planted = as_uid(&h, ATT_UID, plant_desc_links,
			 (void *)(intptr_t)self->daemon);
	TH_LOG("live: the tenant %s its links", planted ? "could not plant" :
	       "planted");
	memset(salt, 0x33, sizeof(salt));
	kvcc_ns_salt(&self->c, h.att, salt, NULL);
	wait_scans(&h);
	EXPECT_TRUE(bait_intact(bait)) TH_LOG("live: %s was written", bait);
	check_all(_metadata, &h, "live");

	kvcc_close(&self->c);
	daemon_stop(self);
	ASSERT_EQ(0, chown(h.attdir, ATT_UID, ATT_UID));
	ASSERT_EQ(0, chmod(h.attdir, 0755));
	/* The next daemon's pid is not known yet: the final name only. */
	planted = as_uid(&h, ATT_UID, plant_desc_links, (void *)(intptr_t)1);
	TH_LOG("legacy: the tenant %s its links", planted ? "could not plant" :
	       "planted");
	ASSERT_EQ(0, restart(self, h.conf, why, sizeof(why))) TH_LOG("%s", why);
	memset(salt, 0x44, sizeof(salt));
	kvcc_ns_salt(&self->c, h.att, salt, NULL);
	wait_scans(&h);
	EXPECT_TRUE(bait_intact(bait)) TH_LOG("legacy: %s was written", bait);
	check_all(_metadata, &h, "legacy");
}

/*
 * GC: the tenant's fan-out directories swapped for links to a directory
 * outside the tier that holds files under the names of the tenant's
 * blocks (an operator's files, root's). When the tier's capacity makes
 * kvcached collect the tenant's blocks, a collection that follows the
 * links deletes (g3) or moves into .gc/ (g4) the operator's files. A
 * recovery that follows them finds them "corrupt" and quarantines them.
 */
static int plant_gc_links(struct hctx *h, void *arg)
{
	const kvc_key *keys = arg;
	int made = 0;

	tenant_chmod(h->attdir);
	for (int i = 0; i < NA; i++) {
		char aa[PATH_MAX + 8], moved[PATH_MAX + 32];
		char target[PATH_MAX + 8];
		struct stat st;

		snprintf(aa, sizeof(aa), "%s/%02x", h->attdir, keys[i][0]);
		snprintf(target, sizeof(target), "%s/%02x", h->outside,
			 keys[i][0]);
		if (!lstat(aa, &st) && S_ISLNK(st.st_mode)) {
			made++;
			continue;
		}
		snprintf(moved, sizeof(moved), "%s.gc-moved", aa);
		rename(aa, moved);
		made += !symlink(target, aa);
	}
	return made == NA ? 0 : 1;
}

/* The operator's files, named as the tenant's blocks, outside the tier. */
static void operator_files(struct hctx *h, const kvc_key *keys)
{
	for (int i = 0; i < NA; i++) {
		char p[PATH_MAX + 128];
		int fd;

		snprintf(p, sizeof(p), "%s/%02x", h->outside, keys[i][0]);
		mkdir(p, 0755);
		snprintf(p, sizeof(p), "%s/%02x/%02x", h->outside, keys[i][0],
			 keys[i][1]);
		mkdir(p, 0755);
		kvc_bf_path(h->outside, keys[i], p, sizeof(p));
		fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd >= 0) {
			if (write(fd, BAIT, sizeof(BAIT) - 1) < 0)
				fprintf(stderr, "# %s: %s\n", p, strerror(errno));
			close(fd);
		}
	}
}

static int operator_files_intact(struct hctx *h, const kvc_key *keys)
{
	int n = 0;

	for (int i = 0; i < NA; i++) {
		char p[PATH_MAX + 128];

		kvc_bf_path(h->outside, keys[i], p, sizeof(p));
		n += bait_intact(p);
	}
	return n;
}

/* Blocks of the fixture's own namespace, past the tier's capacity. */
static void pressure(struct __test_metadata *_metadata, struct hctx *h,
		     uint32_t salt)
{
	SELF *self = h->self;
	uint64_t ev = kvcc_stat1(&self->c, tstat(h, "evictions"));
	kvc_key keys[NV];

	chain_keys(self, salt, NV, keys);
	EXPECT_EQ(0, store_spilled(h, self->ns, keys, NV, 10));
	if (wait_stat(&self->c, tstat(h, "evictions"), ev + 1, 15) < ev + 1)
		TH_LOG("%s collected nothing", h->tier);
	/* g4: the collection is a job of the worker; its trash a rename. */
	msleep(300);
}

TEST_F_TIMEOUT(kvcd, gc_through_links, 120)
{
	struct hctx h = { .self = self, .tier = variant->tier,
			  .shared = variant->shared };
	char why[512] = "";
	int planted, n;

	NEED_ROOT();

	dirs_up(&h);
	h.att = self->ns + 1;
	snprintf(h.attdir, sizeof(h.attdir), "%s/ns%u", h.dir, h.att);
	/* Room for NV files: the pressure (NV more) collects the tenant's. */
	snprintf(h.conf, sizeof(h.conf),
		 "[%s]\ndirectory = %s\ncapacity = %u\nwrite = through\n%s"
		 "[g4]\nscan_interval = 200ms\ngrace = 1s\n", h.tier, h.dir,
		 NV * (KVC_BF_HEADER_SIZE + PAYLOAD),
		 h.shared ? "node = " NODE "\n" : "");
	ASSERT_EQ(0, restart(self, h.conf, why, sizeof(why))) TH_LOG("%s", why);
	ASSERT_EQ(0, ns_create(self, &self->c, h.att, ATT_UID, ATT_UID, 0700))
		TH_LOG("%s", self->c.why);
	chain_keys(self, 2, NA, h.akeys);
	ASSERT_EQ(0, store_spilled(&h, h.att, h.akeys, NA, 20));
	operator_files(&h, h.akeys);
	planted = as_uid(&h, ATT_UID, plant_gc_links, h.akeys);
	TH_LOG("live: the tenant %s its links", planted ? "could not plant" :
	       "planted");
	pressure(_metadata, &h, 60);
	ASSERT_TRUE(daemon_alive(self));
	n = operator_files_intact(&h, h.akeys);
	EXPECT_EQ(NA, n) TH_LOG("live: %d of the %d files in %s left", n, NA,
				h.outside);

	operator_files(&h, h.akeys);
	ASSERT_EQ(0, legacy_start(&h, plant_gc_links, h.akeys, &planted));
	TH_LOG("legacy: the tenant %s its links", planted ? "could not plant" :
	       "planted");
	wait_scans(&h);
	pressure(_metadata, &h, 61);
	ASSERT_TRUE(daemon_alive(self));
	n = operator_files_intact(&h, h.akeys);
	EXPECT_EQ(NA, n) TH_LOG("legacy: %d of the %d files in %s left", n, NA,
				h.outside);
}

/* ---- node claims (g4) ------------------------------------------------------ */

/* /proc/<pid>/stat field 22. */
static unsigned long long start_ticks(long pid)
{
	char path[64], buf[1024], *p;
	unsigned long long v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')))
		sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
		       &v);
	fclose(f);
	return v;
}

/* A claim on NODE, as a live kvcached of this very boot would write it. */
static int plant_claim(struct hctx *h, void *arg)
{
	char p[PATH_MAX + 32], host[65] = "", boot[40] = "";
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");

	if (f) {
		if (!fgets(boot, sizeof(boot), f))
			boot[0] = '\0';
		boot[strcspn(boot, "\n")] = '\0';
		fclose(f);
	}
	gethostname(host, sizeof(host) - 1);
	snprintf(p, sizeof(p), "%s/.nodes/" NODE, h->dir);
	f = fopen(p, "we");
	if (!f)
		return 1;
	fprintf(f, "kvcache-node 1\nhost %s\nboot %s\npid 1 %llu\n", host, boot,
		start_ticks(1));
	return fclose(f) ? 1 : 0;
}

/*
 * What a demanding operator accepts of a .nodes/ that someone else made:
 * kvcached runs with .nodes/ made its own (root's, writable by nobody
 * else, the claim its regular file), or it refuses to start and says why,
 * naming the directory (".nodes") and its owner (the word, or the uid).
 * Not trusting whatever is there.
 */
static void check_nodes(struct __test_metadata *_metadata, struct hctx *h,
			bool started)
{
	SELF *self = h->self;
	char nodes[PATH_MAX + 16], claim[PATH_MAX + 32], uid[16];
	struct stat st;

	snprintf(nodes, sizeof(nodes), "%s/.nodes", h->dir);
	snprintf(claim, sizeof(claim), "%s/" NODE, nodes);
	snprintf(uid, sizeof(uid), "%u", ATT_UID);
	if (started && daemon_alive(self)) {
		ASSERT_EQ(0, lstat(nodes, &st));
		EXPECT_EQ(0, st.st_uid) TH_LOG("kvcached runs with %s owned by uid %u",
					       nodes, st.st_uid);
		EXPECT_EQ(0, st.st_mode & 022) TH_LOG("kvcached runs with %s mode %o",
						       nodes, st.st_mode & 07777);
		ASSERT_EQ(0, lstat(claim, &st));
		EXPECT_TRUE(S_ISREG(st.st_mode));
		EXPECT_EQ(0, st.st_uid);
		return;
	}
	EXPECT_TRUE(file_has(self->log, ".nodes") &&
		    (file_has(self->log, "owner") || file_has(self->log, uid)))
		TH_LOG("kvcached did not start, and its log does not say that %s belongs to uid %u",
		       nodes, ATT_UID);
}

static void nodes_of_tenant(struct hctx *h)
{
	char nodes[PATH_MAX + 16];

	snprintf(nodes, sizeof(nodes), "%s/.nodes", h->dir);
	rm_rf(nodes);
	mkdir(nodes, 0755);
	if (chown(nodes, ATT_UID, ATT_UID))
		fprintf(stderr, "# chown %s: %s\n", nodes, strerror(errno));
}

TEST_F_TIMEOUT(kvcd, nodes_dir_of_another_user, 60)
{
	struct hctx h = { .self = self, .tier = variant->tier,
			  .shared = variant->shared };
	char why[512] = "";
	int ret;

	NEED_ROOT();

	if (!variant->shared)
		SKIP(return, "node claims are g4's");
	dirs_up(&h);
	conf_for(&h);
	/* Made before any kvcached, by a user who then planted a claim. */
	nodes_of_tenant(&h);
	ASSERT_EQ(0, as_uid(&h, ATT_UID, plant_claim, NULL));
	ret = restart(self, h.conf, why, sizeof(why));
	TH_LOG("kvcached %s: %s", ret ? "did not start" : "started",
	       ret ? why : "");
	check_nodes(_metadata, &h, !ret);
}

/*
 * The heartbeat's file swapped for a hard link to another file while
 * kvcached claims its name (the owner of .nodes/ renames the link over the
 * claim in a loop): kvcached must not end up holding that file open, or
 * its beat writes into it every 30 s. Seen directly, in /proc/<pid>/fd,
 * rather than by waiting for a beat. A few starts, as it is a race.
 */
static int swap_loop(struct hctx *h, void *arg)
{
	const char *bait = arg;
	char claim[PATH_MAX + 32], tmp[PATH_MAX + 32];

	snprintf(claim, sizeof(claim), "%s/.nodes/" NODE, h->dir);
	snprintf(tmp, sizeof(tmp), "%s/.nodes/swap", h->dir);
	/* Until SIGKILLed (by the test, or with its parent): 30 s at most. */
	for (double end = now_s() + 30; now_s() < end;) {
		if (link(bait, tmp) && errno != EEXIST)
			return 1;
		rename(tmp, claim);
	}
	return 0;
}

/* Does process pid hold the file dev/ino open? */
static bool holds_open(pid_t pid, dev_t dev, ino_t ino)
{
	char dir[64], p[128];
	struct dirent *de;
	bool found = false;
	DIR *dp;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	dp = opendir(dir);
	if (!dp)
		return false;
	while (!found && (de = readdir(dp))) {
		struct stat st;

		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		if (!stat(p, &st) && st.st_dev == dev && st.st_ino == ino)
			found = true;
	}
	closedir(dp);
	return found;
}

TEST_F_TIMEOUT(kvcd, heartbeat_hardlink_swap, 120)
{
	struct hctx h = { .self = self, .tier = variant->tier,
			  .shared = variant->shared };
	char bait[PATH_MAX + 8], why[512];
	int held = 0, tries = 0, ret = 0;
	struct stat bst;

	NEED_ROOT();

	if (!variant->shared)
		SKIP(return, "node claims are g4's");
	dirs_up(&h);
	conf_for(&h);
	/* Root's, but one the tenant may write: it may hard-link it. */
	make_bait(&h, bait, sizeof(bait), 0666);
	ASSERT_EQ(0, stat(bait, &bst));
	nodes_of_tenant(&h);
	for (tries = 0; tries < 10 && !held; tries++) {
		pid_t pid;
		int st;

		kvcc_close(&self->c);
		daemon_stop(self);
		pid = fork();
		ASSERT_LE(0, pid);
		/*
		 * The loop in this very child (not a grandchild), so that
		 * once it is reaped nothing of the tenant's is left to race
		 * the teardown's removal of .nodes/.
		 */
		if (!pid) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (self->c.fd >= 0)
				close(self->c.fd);
			if (setgroups(0, NULL) ||
			    setresgid(ATT_UID, ATT_UID, ATT_UID) ||
			    setresuid(ATT_UID, ATT_UID, ATT_UID))
				_exit(255);
			_exit(swap_loop(&h, bait));
		}
		msleep(20);
		ret = restart(self, h.conf, why, sizeof(why));
		if (!ret && daemon_alive(self))
			held = holds_open(self->daemon, bst.st_dev, bst.st_ino);
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		if (ret)
			break;
	}
	TH_LOG("%d start(s); kvcached %s", tries,
	       ret ? "did not start" : "started");
	EXPECT_EQ(0, held) TH_LOG("kvcached holds %s open (its heartbeat's descriptor)",
				  bait);
	EXPECT_TRUE(bait_intact(bait)) TH_LOG("%s was written", bait);
	check_nodes(_metadata, &h, !ret);
}

TEST_HARNESS_MAIN
