// SPDX-License-Identifier: GPL-2.0
/*
 * isolation_test: one tenant cannot reach another's blocks.
 *
 * As root the test creates namespaces owned by two unprivileged users,
 * tenant A (uid 1001) and tenant B (uid 1002), and runs each tenant in a
 * forked child that drops to its ids (setgroups, setresgid, setresuid:
 * no real user is needed). A stores blocks; B then tries every path to
 * them and must be refused (EACCES or EPERM) or see nothing:
 *   - the socket: LOOKUP, LOAD, STORE (A's handles, into A's namespace
 *     and into its own), ALLOC, SEAL, RELEASE, EVICT, FLUSH, NS_CREATE,
 *     NS_SALT, and NS_LIST, which shows ids, owners and modes (public,
 *     as ls -l) but not how many blocks A holds;
 *   - the device (kernel mode): PIN of A's handles and of every handle
 *     guessed by brute force over indices and generations (the answer
 *     must not depend on the generation), mmap of A's blocks, QUERY,
 *     SEAL, UNPIN, EVICT, ALLOC in A's namespace, NS_CREATE/DESTROY,
 *     HELPER;
 *   - the disk tiers: A's g3 and g4 files can be neither opened nor
 *     listed (so neither read nor handed to KVCACHE_IOC_XFER for a
 *     region load);
 *   - the socket itself when its mode forbids connecting;
 *   - the key salt: B cannot get A's namespace salt, and two namespaces
 *     with the same identity get different keys unless opted out.
 * A group member of A's namespace (mode 0740) may read but not write.
 * Every refusal has a positive control: A (or the group member) does
 * the same thing and succeeds, so a test that refuses everyone fails.
 *
 * Runs in memfd mode (host) and kernel mode (socket and device; VM), as
 * root: it skips otherwise. In memfd mode every client maps the whole
 * pool memfd the daemon passes with HELLO, so the pool is one trust
 * domain: kvcached passes it only to a peer that may read and write every
 * namespace, and refuses NS_CREATE of a namespace a connected peer could
 * not (Documentation/admin-guide/index.md, "Security and permissions").
 * There the tenants' HELLO is refused (EACCES, no descriptor) while both
 * private namespaces exist; the tenant paths run in a daemon whose
 * namespaces A may all read and write (memfd_one_domain()).
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
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "kvc_client.h"
#include "kvc_ioctl.h"
#include "kvc_p2p.h"
#include "blockfile.h"
#include "keys.h"
#include "proto.h"
#include "libkvcache.h"

#include "kvcd_fixture.h"

#define UID_A		1001
#define GID_A		1001
#define UID_B		1002
#define GID_B		1002
#define UID_G		1003	/* in group GID_A when the test says so */
#define GID_G		1003
#define NOGROUP		((gid_t)-1)	/* as_user(): no supplementary group */
#define NBLK		4
#define LIB_BYTES	4096

/* What the tenants' children share with the test. */
struct iso_shared {
	struct kvcache_handle ha[NBLK];		/* A's blocks */
	kvc_key keys[NBLK];			/* their keys */
	struct kvcache_handle hw;		/* A's writable block */
	struct kvcache_handle probe[16];	/* handles B probes */
	char probe_kind[16][24];		/* what each one is */
	int nprobe;
	uint32_t region;			/* root's region, or 0 */
	int prov;				/* its provider */
	char bfile[PATH_MAX];			/* B's own files */
	char bfile2[PATH_MAX];
	uint8_t lib_keys[NBLK][KVCACHE_KEY_SIZE];
	char files[64][PATH_MAX];		/* A's tier files */
	int nfiles;
	char why[512];
};

static struct iso_shared *sh;

/* A tenant's own connection and, in kernel mode, its own device file. */
struct tenant {
	SELF *self;
	struct kvcc c;
	int dev;
	char *why;
	size_t wlen;
};

typedef int (*tenant_fn)(struct tenant *t, void *arg);

/* In a child: record the failed check and fail. */
#define TCHK(cond)							\
	do {								\
		if (!(cond)) {						\
			snprintf(t->why, t->wlen, "line %d: %s [%s]",	\
				 __LINE__, #cond, t->c.why);		\
			return -1;					\
		}							\
	} while (0)

static uint32_t ns_a(SELF *self)
{
	return self->ns + 1;
}

static uint32_t ns_b(SELF *self)
{
	return self->ns + 2;
}

/*
 * Run fn in a child with the given ids and ngroups supplementary groups.
 * The child drops what it inherited from root (the root connection, the
 * device file) before changing ids, so every request it makes is its
 * own. Connects (conn) and hands fn dev_fd (a device file, closed here in
 * the parent; -1 for none). 0, or -1 with sh->why.
 */
static int as_user_groups(SELF *self, uid_t uid, gid_t gid,
			  const gid_t *groups, int ngroups, bool conn,
			  int dev_fd, tenant_fn fn, void *arg)
{
	pid_t pid;
	int st;

	sh->why[0] = '\0';
	pid = fork();
	if (pid < 0)
		return -1;
	if (!pid) {
		struct tenant t = {
			.self = self, .dev = dev_fd, .why = sh->why,
			.wlen = sizeof(sh->why),
		};
		int ret;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (self->c.fd >= 0)
			close(self->c.fd);
		if (self->dev >= 0)
			close(self->dev);
		kvcc_init(&t.c);
		if (setgroups((size_t)ngroups, groups) ||
		    setresgid(gid, gid, gid) || setresuid(uid, uid, uid) ||
		    geteuid() != uid) {
			snprintf(sh->why, sizeof(sh->why), "dropping to %u: %s",
				 (unsigned int)uid, strerror(errno));
			_exit(1);
		}
		if (conn) {
			ret = kvcc_open(&t.c, self->sock);
			if (!ret)
				ret = kvcc_hello(&t.c);
			if (ret) {
				snprintf(sh->why, sizeof(sh->why),
					 "uid %u: connect/HELLO: %d %s",
					 (unsigned int)uid, ret, t.c.why);
				_exit(1);
			}
		}
		ret = fn(&t, arg);
		kvcc_close(&t.c);
		_exit(ret ? 1 : 0);
	}
	if (dev_fd >= 0)
		close(dev_fd);
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		if (!sh->why[0])
			snprintf(sh->why, sizeof(sh->why), "child status %#x",
				 st);
		return -1;
	}
	return 0;
}

/* as_user_groups() with one supplementary group, or none (NOGROUP). */
static int as_user(SELF *self, uid_t uid, gid_t gid, gid_t extra, bool conn,
		   int dev_fd, tenant_fn fn, void *arg)
{
	gid_t groups[1] = { extra };

	return as_user_groups(self, uid, gid, groups, extra != NOGROUP ? 1 : 0,
			      conn, dev_fd, fn, arg);
}

/*
 * A device file for a child, opened here as root: the kernel checks the
 * credentials of the caller of each ioctl and mmap, not the opener's, so
 * the child meets its own permissions (and /dev/kvcache keeps its mode).
 */
static int child_dev(SELF *self)
{
	if (self->mode != KVC_PROTO_MODE_KERNEL)
		return -1;
	return open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
}

/*
 * memfd mode: HELLO as this user is refused with EACCES, and no
 * descriptor comes with the refusal; the connection stays un-HELLO'd, and
 * libkvcache's kvcache_open() fails the same way.
 */
static int hello_refused(struct tenant *t, void *arg)
{
	struct kvcache_options o = { .socket = t->self->sock };
	struct kvcache *lc = NULL;
	int ret;

	(void)arg;
	TCHK(kvcc_open(&t->c, t->self->sock) == 0);
	TCHK(kvcc_hello(&t->c) == -EACCES);
	TCHK(strstr(t->c.why, "every namespace") != NULL);
	TCHK(t->c.rx_nfds == 0 && t->c.rx_fd < 0);
	TCHK(t->c.pool_fd < 0 && t->c.pool == NULL);
	/* Refused HELLO: not HELLO'd, so nothing else is answered. */
	TCHK(kvcc_ns_list(&t->c, 0) == -EPROTO);
	ret = kvcache_open(&o, &lc);
	if (!ret)
		kvcache_close(lc);
	TCHK(ret == -EACCES);
	return 0;
}

/*
 * memfd mode: a daemon whose namespaces tenant A may all read and write,
 * so that A gets the pool: the fixture's (root's, group GID_A, 0770) and
 * A's (a_mode). Namespaces come from the state file at start, as after a
 * reboot; B's is not there.
 */
static int memfd_one_domain(SELF *self, const char *extra, uint32_t a_mode,
			    char *why, size_t wlen)
{
	char path[PATH_MAX + 32];
	FILE *f;

	kvcc_close(&self->c);
	daemon_stop(self);
	snprintf(path, sizeof(path), "%s/namespaces", self->state);
	f = fopen(path, "we");
	if (!f)
		return -errno;
	fprintf(f, "%u 0 %u 770\n%u %u %u %o\n", self->ns, GID_A, ns_a(self),
		UID_A, GID_A, a_mode);
	if (fclose(f))
		return -errno;
	return restart(self, extra, why, wlen);
}

/* A's namespace (0740: the group reads) and B's (0700). */
static int tenants_setup(SELF *self)
{
	int ret = ns_create(self, &self->c, ns_a(self), UID_A, GID_A, 0740);

	if (!ret)
		ret = ns_create(self, &self->c, ns_b(self), UID_B, GID_B, 0700);
	return ret;
}

/* ---- tenant A ------------------------------------------------------------ */

/* A stores NBLK blocks in its namespace and checks it can use them. */
static int a_stores(struct tenant *t, void *arg)
{
	SELF *self = t->self;
	struct kvc_load_result res[NBLK];

	(void)arg;
	TCHK(make_blocks(self, &t->c, t->dev, ns_a(self),
			 (const kvc_key *)sh->keys, NBLK, false, sh->ha) == 0);
	TCHK(store_blocks(&t->c, ns_a(self), (const kvc_key *)sh->keys, NULL,
			  sh->ha, NBLK, NULL) == 0);
	TCHK(kvcc_lookup(&t->c, ns_a(self), KVC_PROTO_TIERS_ALL, sh->keys[0],
			 NBLK, NULL) == NBLK);
	TCHK(kvcc_load(&t->c, ns_a(self), sh->keys[0], NBLK, res) == 0);
	for (int i = 0; i < NBLK; i++)
		TCHK(res[i].status == 0);
	return 0;
}

/*
 * Read a namespace's blocks as a reader does: LOAD, then the bytes
 * through the pool memfd (memfd mode) or by pinning and mapping them
 * with its own device file (kernel mode). Checks every byte sample.
 */
static int read_blocks(struct tenant *t, uint32_t ns)
{
	SELF *self = t->self;
	struct kvc_load_result res[NBLK];
	struct kvcache_handle h[NBLK];
	int32_t st[NBLK];

	TCHK(kvcc_load(&t->c, ns, sh->keys[0], NBLK, res) == 0);
	for (int i = 0; i < NBLK; i++) {
		TCHK(res[i].status == 0);
		h[i] = res[i].handle;
	}
	if (self->mode == KVC_PROTO_MODE_MEMFD) {
		for (int i = 0; i < NBLK; i++)
			TCHK(block_ok(t->c.pool + (size_t)h[i].index * self->bs,
				      sh->keys[i]));
		TCHK(kvcc_release(&t->c, h, NBLK, st) == 0);
		for (int i = 0; i < NBLK; i++)
			TCHK(st[i] == 0);
		return 0;
	}
	for (int i = 0; i < NBLK; i++) {
		uint8_t *p;

		TCHK(kvc_pin(t->dev, h[i]) == 0);
		p = kvc_map(t->dev, h[i].index, self->bs, PROT_READ);
		TCHK(p != NULL);
		TCHK(block_ok(p, sh->keys[i]));
		munmap(p, self->bs);
		TCHK(kvc_unpin(t->dev, h[i]) == 0);
	}
	return 0;
}

static int a_reads(struct tenant *t, void *arg)
{
	(void)arg;
	TCHK(kvcc_lookup(&t->c, ns_a(t->self), KVC_PROTO_TIERS_ALL,
			 sh->keys[0], NBLK, NULL) == NBLK);
	return read_blocks(t, ns_a(t->self));
}

/* ---- tenant B through the socket --------------------------------------- */

static int b_socket(struct tenant *t, void *arg)
{
	SELF *self = t->self;
	struct kvc_store_entry se[NBLK];
	struct kvc_seal_entry sl[NBLK];
	struct kvc_load_result res[NBLK];
	struct kvcache_handle h[NBLK];
	struct kvc_flush_reply fr;
	struct kvc_ns_entry e;
	uint8_t salt[KVC_PROTO_SALT_SIZE] = { 0 };
	int32_t st[NBLK];

	(void)arg;
	/* Read: nothing, not even whether the keys are there. */
	TCHK(kvcc_lookup(&t->c, ns_a(self), KVC_PROTO_TIERS_ALL, sh->keys[0],
			 NBLK, NULL) == -EACCES);
	TCHK(kvcc_lookup(&t->c, ns_a(self), KVC_PROTO_TIER_POOL, sh->keys[0],
			 1, NULL) == -EACCES);
	TCHK(kvcc_load(&t->c, ns_a(self), sh->keys[0], NBLK, res) ==
	     -EACCES);
	/* Write: A's blocks published again, in A's namespace or B's. */
	memset(se, 0, sizeof(se));
	for (int i = 0; i < NBLK; i++) {
		memcpy(se[i].key, sh->keys[i], KVCACHE_KEY_SIZE);
		if (i)
			memcpy(se[i].parent, sh->keys[i - 1],
			       KVCACHE_KEY_SIZE);
		else
			se[i].flags = KVC_PROTO_STORE_FIRST;
		se[i].handle = sh->ha[i];
	}
	TCHK(kvcc_store(&t->c, ns_a(self), se, NBLK, st) == -EACCES);
	/* In its own namespace: not blocks of that namespace. */
	TCHK(kvcc_store(&t->c, ns_b(self), se, NBLK, st) == 0);
	for (int i = 0; i < NBLK; i++)
		TCHK(st[i] == -EINVAL);
	TCHK(kvcc_lookup(&t->c, ns_b(self), KVC_PROTO_TIERS_ALL, sh->keys[0],
			 NBLK, NULL) == 0);
	TCHK(kvcc_load(&t->c, ns_b(self), sh->keys[0], NBLK, res) == 0);
	for (int i = 0; i < NBLK; i++)
		TCHK(res[i].status == -ENOENT);
	if (self->mode == KVC_PROTO_MODE_MEMFD) {
		TCHK(kvcc_alloc(&t->c, ns_a(self), 1, h) == -EACCES);
		/* Only blocks this connection allocated can be sealed... */
		memset(sl, 0, sizeof(sl));
		for (int i = 0; i < NBLK; i++) {
			sl[i].handle = sh->ha[i];
			sl[i].payload_len = PAYLOAD;
			memcpy(sl[i].key, sh->keys[i], KVCACHE_KEY_SIZE);
		}
		TCHK(kvcc_seal(&t->c, sl, NBLK, st) == 0);
		for (int i = 0; i < NBLK; i++)
			TCHK(st[i] != 0);
		/* ... and only its own pins released. */
		TCHK(kvcc_release(&t->c, sh->ha, NBLK, st) == 0);
		for (int i = 0; i < NBLK; i++)
			TCHK(st[i] != 0);
	} else {
		/* Kernel mode: these are the device's (b_device). */
		TCHK(kvcc_alloc(&t->c, ns_a(self), 1, h) == -EOPNOTSUPP);
	}
	/* Administration: root's. */
	TCHK(kvcc_evict(&t->c, ns_a(self), sh->keys[0], NBLK, st) == -EPERM);
	TCHK(kvcc_evict(&t->c, ns_b(self), sh->keys[0], 1, st) == -EPERM);
	TCHK(kvcc_flush(&t->c, ns_a(self), &fr) == -EPERM);
	TCHK(kvcc_flush(&t->c, KVC_PROTO_NS_ALL, &fr) == -EPERM);
	TCHK(kvcc_ns_create(&t->c, self->ns + 3, UID_B, GID_B, 0777) ==
	     -EPERM);
	/* The salt: A's is not B's to have or to set; its own it gets. */
	TCHK(kvcc_ns_salt(&t->c, ns_a(self), NULL, salt) == -EACCES);
	TCHK(kvcc_ns_salt(&t->c, ns_a(self), salt, NULL) == -EPERM);
	TCHK(kvcc_ns_salt(&t->c, ns_b(self), salt, NULL) == -EPERM);
	TCHK(kvcc_ns_salt(&t->c, ns_b(self), NULL, salt) == 0);
	/* NS_LIST: ids, owners and modes, not A's block count. */
	TCHK(kvcc_ns_entry(&t->c, ns_a(self), &e) == 0);
	TCHK(e.uid == UID_A && e.gid == GID_A && e.mode == 0740);
	TCHK(e.blocks == 0);
	TCHK(kvcc_ns_entry(&t->c, ns_b(self), &e) == 0);
	TCHK(e.uid == UID_B && e.mode == 0700);
	return 0;
}

/* Tenant B gets nothing of A's through the socket; A keeps everything. */
TEST_F_TIMEOUT(kvcd, socket_other_tenant_refused, 120)
{
	struct kvc_ns_entry e;

	if (geteuid())
		SKIP(return, "needs root to run tenants as other users");
	ASSERT_EQ(0, tenants_setup(self)) TH_LOG("%s", self->c.why);
	if (self->mode == KVC_PROTO_MODE_MEMFD) {
		/* Neither may read and write the other's: no pool for either. */
		ASSERT_EQ(0, as_user(self, UID_B, GID_B, NOGROUP, false, -1,
				     hello_refused, NULL)) TH_LOG("B: %s", sh->why);
		ASSERT_EQ(0, as_user(self, UID_A, GID_A, NOGROUP, false, -1,
				     hello_refused, NULL)) TH_LOG("A: %s", sh->why);
		/* Root may everything: it still gets the pool. */
		kvcc_close(&self->c);
		ASSERT_EQ(0, kvcc_open(&self->c, self->sock));
		ASSERT_EQ(0, kvcc_hello(&self->c)) TH_LOG("%s", self->c.why);
		ASSERT_EQ(1, self->c.hello_nfds);
		ASSERT_NE(NULL, self->c.pool);
		return;
	}
	chain_keys(self, 11, NBLK, sh->keys);
	ASSERT_EQ(0, as_user(self, UID_A, GID_A, NOGROUP, true, child_dev(self),
			     a_stores, NULL)) TH_LOG("A: %s", sh->why);
	ASSERT_EQ(0, as_user(self, UID_B, GID_B, NOGROUP, true, child_dev(self),
			     b_socket, NULL)) TH_LOG("B: %s", sh->why);
	/* Root sees A's blocks counted: the count B saw was hidden. */
	ASSERT_EQ(0, kvcc_ns_entry(&self->c, ns_a(self), &e));
	EXPECT_EQ(NBLK, e.blocks);
	/* Nothing B did took anything from A. */
	ASSERT_EQ(0, as_user(self, UID_A, GID_A, NOGROUP, true, child_dev(self),
			     a_reads, NULL)) TH_LOG("A again: %s", sh->why);
}

/* ---- a group member -------------------------------------------------- */

static int g_reads(struct tenant *t, void *arg)
{
	SELF *self = t->self;
	struct kvc_store_entry se = { .flags = KVC_PROTO_STORE_FIRST };
	struct kvcache_handle h[1];
	uint8_t salt[KVC_PROTO_SALT_SIZE];
	int32_t st[1];

	(void)arg;
	TCHK(kvcc_lookup(&t->c, ns_a(self), KVC_PROTO_TIERS_ALL, sh->keys[0],
			 NBLK, NULL) == NBLK);
	TCHK(read_blocks(t, ns_a(self)) == 0);
	TCHK(kvcc_ns_salt(&t->c, ns_a(self), NULL, salt) == 0);
	/* Read, not write: no new block, no publishing. */
	memcpy(se.key, sh->keys[0], KVCACHE_KEY_SIZE);
	se.handle = sh->ha[0];
	TCHK(kvcc_store(&t->c, ns_a(self), &se, 1, st) == -EACCES);
	if (self->mode == KVC_PROTO_MODE_MEMFD)
		TCHK(kvcc_alloc(&t->c, ns_a(self), 1, h) == -EACCES);
	else
		TCHK(kvc_alloc(t->dev, ns_a(self), 1, h) == -EACCES);
	TCHK(kvcc_evict(&t->c, ns_a(self), sh->keys[0], 1, st) == -EPERM);
	return 0;
}

static int g_refused(struct tenant *t, void *arg)
{
	struct kvc_load_result res[NBLK];

	(void)arg;
	TCHK(kvcc_lookup(&t->c, ns_a(t->self), KVC_PROTO_TIERS_ALL,
			 sh->keys[0], NBLK, NULL) == -EACCES);
	TCHK(kvcc_load(&t->c, ns_a(t->self), sh->keys[0], NBLK, res) ==
	     -EACCES);
	TCHK(kvcc_ns_salt(&t->c, ns_a(t->self), NULL, NULL) == -EACCES);
	if (t->dev >= 0)
		TCHK(kvc_pin(t->dev, sh->ha[0]) == -EACCES);
	return 0;
}

/* Mode 0740: a member of the group reads and does not write. */
TEST_F_TIMEOUT(kvcd, group_member_reads_not_writes, 120)
{
	if (geteuid())
		SKIP(return, "needs root to run tenants as other users");
	ASSERT_EQ(0, tenants_setup(self)) TH_LOG("%s", self->c.why);
	if (self->mode == KVC_PROTO_MODE_MEMFD) {
		/* Reading A's is not enough for the whole pool. */
		ASSERT_EQ(0, as_user(self, UID_G, GID_G, GID_A, false, -1,
				     hello_refused, NULL))
			TH_LOG("member: %s", sh->why);
		return;
	}
	chain_keys(self, 12, NBLK, sh->keys);
	ASSERT_EQ(0, as_user(self, UID_A, GID_A, NOGROUP, true, child_dev(self),
			     a_stores, NULL)) TH_LOG("A: %s", sh->why);
	ASSERT_EQ(0, as_user(self, UID_G, GID_G, GID_A, true, child_dev(self),
			     g_reads, NULL)) TH_LOG("member: %s", sh->why);
	/* The same user without the group is "other": nothing. */
	ASSERT_EQ(0, as_user(self, UID_G, GID_G, NOGROUP, true, child_dev(self),
			     g_refused, NULL)) TH_LOG("non-member: %s", sh->why);
}

/* ---- tenant B through the device ----------------------------------------- */

static bool is_a_block(uint32_t index)
{
	for (int i = 0; i < NBLK; i++)
		if (sh->ha[i].index == index)
			return true;
	return false;
}

static int b_device(struct tenant *t, void *arg)
{
	SELF *self = t->self;
	struct kvcache_block_info info[64];
	struct kvcache_seal_entry se = { .payload_len = PAYLOAD };
	struct kvcache_batch b = {
		.size = sizeof(b), .count = 1, .entries = (uintptr_t)&se,
	};
	struct kvcache_helper hp = { .size = sizeof(hp) };
	struct kvcache_query q;
	struct kvcache_handle h;
	uint32_t refused = 0;

	(void)arg;
	TCHK(t->dev >= 0);
	for (int i = 0; i < NBLK; i++) {
		struct kvcache_handle g = sh->ha[i];

		/* The real handle, and others: the same answer. */
		TCHK(kvc_pin(t->dev, g) == -EACCES);
		g.gen++;
		TCHK(kvc_pin(t->dev, g) == -EACCES);
		g.gen -= 2;
		TCHK(kvc_pin(t->dev, g) == -EACCES);
		/* Map it, read-only or not. */
		errno = 0;
		TCHK(kvc_map(t->dev, sh->ha[i].index, self->bs,
			     PROT_READ) == NULL && errno == EACCES);
		TCHK(kvc_map(t->dev, sh->ha[i].index, self->bs,
			     PROT_READ | PROT_WRITE) == NULL);
		/*
		 * Seal it: EPERM, not this file's writable block (an
		 * answer that depended on its state, EINVAL for sealed,
		 * would tell a prober it is live). Unpin it: EINVAL, this
		 * file holds no pin on it. Evict it: root's.
		 */
		se.handle = sh->ha[i];
		memcpy(se.key, sh->keys[i], KVCACHE_KEY_SIZE);
		TCHK(kvc_ioc(t->dev, KVCACHE_IOC_SEAL, &b) == -EPERM);
		TCHK(b.done == 0);
		TCHK(kvc_unpin(t->dev, sh->ha[i]) == -EINVAL);
		TCHK(kvc_evict(t->dev, sh->ha[i]) == -EPERM);
	}
	/*
	 * Brute force: every index with the first generations. A block of
	 * A answers EACCES whatever the generation, so it gives none away.
	 * Elsewhere a pin may only succeed on a namespace B may read (other
	 * suites' namespaces, in the VM): let those go again.
	 */
	for (uint32_t i = 0; i < self->nr; i++)
		for (uint32_t gen = 0; gen < 16; gen++) {
			int r;

			h = (struct kvcache_handle){ .index = i, .gen = gen };
			r = kvc_pin(t->dev, h);
			if (is_a_block(i)) {
				TCHK(r == -EACCES);
				refused++;
			} else if (!r) {
				TCHK(kvc_unpin(t->dev, h) == 0);
			} else {
				TCHK(r == -EACCES || r == -ESTALE ||
				     r == -EBUSY);
			}
		}
	TCHK(refused == NBLK * 16);
	h = (struct kvcache_handle){ .index = self->nr, .gen = 0 };
	TCHK(kvc_pin(t->dev, h) == -EINVAL);
	/* Listing: A's namespace, and every namespace. */
	q = (struct kvcache_query){
		.size = sizeof(q), .count = 64, .ns_id = ns_a(self),
		.entries = (uintptr_t)info,
	};
	TCHK(kvc_ioc(t->dev, KVCACHE_IOC_QUERY, &q) == 0 && q.count == 0);
	for (uint32_t start = 0; start < self->nr; start = q.next) {
		q = (struct kvcache_query){
			.size = sizeof(q), .count = 64, .start = start,
			.ns_id = KVCACHE_NS_ANY, .entries = (uintptr_t)info,
		};
		TCHK(kvc_ioc(t->dev, KVCACHE_IOC_QUERY, &q) == 0);
		for (uint32_t i = 0; i < q.count; i++)
			TCHK(info[i].ns_id != ns_a(self));
		if (q.next <= start)
			break;
	}
	/* Allocate in A's namespace; the privileged calls. */
	TCHK(kvc_alloc(t->dev, ns_a(self), 1, &h) == -EACCES);
	TCHK(kvc_ns(t->dev, 1, self->ns + 3, UID_B, GID_B, 0777) == -EPERM);
	TCHK(kvc_ns(t->dev, 0, ns_a(self), 0, 0, 0) == -EPERM);
	TCHK(kvc_ioc(t->dev, KVCACHE_IOC_HELPER, &hp) == -EPERM);
	/* Its own namespace works: the refusals above were about A's. */
	TCHK(kvc_alloc(t->dev, ns_b(self), 1, &h) == 0);
	return 0;
}

/* B opening the device itself: as its mode says. */
static int b_opens_device(struct tenant *t, void *arg)
{
	const struct stat *st = arg;
	int fd = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	int err = errno;

	if (fd >= 0)
		close(fd);
	if (st->st_mode & S_IWOTH && st->st_mode & S_IROTH)
		TCHK(fd >= 0);
	else if (st->st_gid != GID_B)
		TCHK(fd < 0 && err == EACCES);
	return 0;
}

/* Kernel mode: B gets nothing of A's through /dev/kvcache either. */
TEST_F_TIMEOUT(kvcd, device_other_tenant_refused, 300)
{
	struct stat st;

	if (geteuid())
		SKIP(return, "needs root to run tenants as other users");
	if (self->mode != KVC_PROTO_MODE_KERNEL)
		SKIP(return, "kernel mode only (memfd mode has no device)");
	ASSERT_EQ(0, tenants_setup(self)) TH_LOG("%s", self->c.why);
	chain_keys(self, 13, NBLK, sh->keys);
	ASSERT_EQ(0, as_user(self, UID_A, GID_A, NOGROUP, true, child_dev(self),
			     a_stores, NULL)) TH_LOG("A: %s", sh->why);
	ASSERT_EQ(0, as_user(self, UID_B, GID_B, NOGROUP, false, child_dev(self),
			     b_device, NULL)) TH_LOG("B: %s", sh->why);
	ASSERT_EQ(0, stat(KVCACHE_DEVICE_PATH, &st));
	ASSERT_EQ(0, as_user(self, UID_B, GID_B, NOGROUP, false, -1,
			     b_opens_device, &st)) TH_LOG("B: %s", sh->why);
	ASSERT_EQ(0, as_user(self, UID_A, GID_A, NOGROUP, true, child_dev(self),
			     a_reads, NULL)) TH_LOG("A again: %s", sh->why);
}

/* ---- the device through its group: transfers, oracles, read-only maps --- */

#define GID_DEV		1010	/* /dev/kvcache's group while a test runs */
#define SEED_B		0x42	/* B's file (kvc_p2p.h's fill() pattern) */
#define SEED_AW		0x41	/* A's writable block */
#define RLEN		(64u << 10)	/* root's region */
#define NO_REGION	0x7fffff00u	/* a region handle nobody has */

static uint8_t *map_anon_rw(uint64_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* What /dev/kvcache was before dev_group_grant(). */
struct dev_saved {
	uid_t uid;
	gid_t gid;
	mode_t mode;
};

static void dev_group_restore(const struct dev_saved *sv)
{
	if (chown(KVCACHE_DEVICE_PATH, sv->uid, sv->gid) ||
	    chmod(KVCACHE_DEVICE_PATH, sv->mode))
		fprintf(stderr, "# restoring %s: %s\n", KVCACHE_DEVICE_PATH,
			strerror(errno));
}

/*
 * Let users in as documented (the admin guide, a udev rule in production):
 * the device node's group GID_DEV, mode 0660. Tenants then open
 * /dev/kvcache themselves, holding no descriptor of root's. A test calls
 * dev_group_restore() before any assertion that could end it.
 */
static int dev_group_grant(struct dev_saved *sv)
{
	struct stat st;
	int ret = 0;

	if (stat(KVCACHE_DEVICE_PATH, &st))
		return -errno;
	sv->uid = st.st_uid;
	sv->gid = st.st_gid;
	sv->mode = st.st_mode & 07777;
	if (chown(KVCACHE_DEVICE_PATH, st.st_uid, GID_DEV) ||
	    chmod(KVCACHE_DEVICE_PATH, 0660)) {
		ret = -errno;
		dev_group_restore(sv);
	}
	return ret;
}

/* As uid/gid with the device's group (and extra, unless NOGROUP) only. */
static int as_dev_user(SELF *self, uid_t uid, gid_t gid, gid_t extra,
		       tenant_fn fn, void *arg)
{
	gid_t groups[2] = { GID_DEV, extra };

	return as_user_groups(self, uid, gid, groups, extra != NOGROUP ? 2 : 1,
			      false, -1, fn, arg);
}

/*
 * $TMPDIR/kvc-iso-PID (root's, 0711) and in it b/, B's (0700), where B
 * makes its files; their names into sh. 0 or -errno.
 */
static int make_dirs(char *top, size_t len)
{
	const char *tmp = getenv("TMPDIR");
	char bdir[PATH_MAX];

	snprintf(top, len, "%s/kvc-iso-%d", tmp && *tmp ? tmp : "/tmp",
		 getpid());
	rm_rf(top);
	snprintf(bdir, sizeof(bdir), "%.*s/b", PATH_MAX - 8, top);
	if (mkdir(top, 0711) || chmod(top, 0711) || mkdir(bdir, 0700) ||
	    chown(bdir, UID_B, GID_B))
		return -errno;
	snprintf(sh->bfile, sizeof(sh->bfile), "%s/victim", bdir);
	snprintf(sh->bfile2, sizeof(sh->bfile2), "%s/own", bdir);
	return 0;
}

/*
 * A file of len bytes of pattern seed, made here (0600, so by the
 * caller), reopened O_DIRECT for transfers. The descriptor, or -1.
 */
static int own_file(const char *path, uint64_t len, uint32_t seed)
{
	uint8_t *buf = map_anon_rw(len);
	int fd;

	if (!buf)
		return -1;
	fill(buf, 0, len, seed);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd >= 0 && pwrite(fd, buf, len, 0) != (ssize_t)len) {
		close(fd);
		fd = -1;
	}
	munmap(buf, len);
	if (fd < 0)
		return -1;
	close(fd);
	return open(path, O_RDWR | O_DIRECT | O_CLOEXEC);
}

/* The file at path is exactly len bytes of pattern seed. */
static bool file_holds(const char *path, uint64_t len, uint32_t seed)
{
	uint8_t *buf = map_anon_rw(len);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	bool ok;

	ok = buf && fd >= 0 && !fstat(fd, &st) && (uint64_t)st.st_size == len &&
	     pread(fd, buf, len, 0) == (ssize_t)len &&
	     check(buf, 0, len, seed) < 0;
	if (fd >= 0)
		close(fd);
	if (buf)
		munmap(buf, len);
	return ok;
}

/* The file at path starts with what fill_block() writes for key: 1, else 0. */
static int file_has_block(const char *path, const uint8_t *key)
{
	uint8_t want[PAYLOAD], got[PAYLOAD];
	int fd = open(path, O_RDONLY | O_CLOEXEC), ret = 0;

	fill_block(want, key);
	if (fd >= 0 && pread(fd, got, PAYLOAD, 0) == PAYLOAD)
		ret = !memcmp(got, want, PAYLOAD);
	if (fd >= 0)
		close(fd);
	return ret;
}

/* Every byte of a block make_blocks() wrote: fill_block()'s, then zeros. */
static bool block_exact(const uint8_t *p, const uint8_t *key, uint64_t bs)
{
	uint8_t want[PAYLOAD];

	fill_block(want, key);
	if (memcmp(p, want, PAYLOAD))
		return false;
	for (uint64_t i = PAYLOAD; i < bs; i += 8)
		if (*(const uint64_t *)(p + i))
			return false;
	return true;
}

/* Block h, all len bytes, to the file at 0 (out) or from it. */
static struct kvcache_xfer_entry block_entry(int fd, struct kvcache_handle h,
					     uint64_t len, bool out)
{
	struct kvcache_xfer_entry e = {
		.fd = fd, .length = len, .block = h,
		.flags = KVCACHE_XFER_BLOCK | (out ? KVCACHE_XFER_TO_FILE : 0),
	};

	return e;
}

/* One entry, synchronously: the call's error, else the entry's result. */
static int64_t run_sync(int dev, struct kvcache_xfer_entry e)
{
	int ret = xfer(dev, &e, 1, NULL);

	return ret ? ret : e.result;
}

/* One entry as an asynchronous batch, reaped (waiting): the same. */
static int64_t run_async(int dev, struct kvcache_xfer_entry e)
{
	uint64_t id = 0;
	int ret = xfer_async(dev, &e, 1, -1, &id);

	if (!ret)
		ret = reap(dev, id, &e, 1, 0);
	return ret ? ret : e.result;
}

/* A seals NBLK blocks through the device alone (no STORE: no daemon pin). */
static int a_seals(struct tenant *t, void *arg)
{
	(void)arg;
	TCHK(make_blocks(t->self, &t->c, t->dev, ns_a(t->self),
			 (const kvc_key *)sh->keys, NBLK, false, sh->ha) == 0);
	return 0;
}

/* A's writable block, pattern SEED_AW; the test keeps its file open. */
static int a_writable(struct tenant *t, void *arg)
{
	SELF *self = t->self;
	uint8_t *p;

	(void)arg;
	TCHK(kvc_alloc(t->dev, ns_a(self), 1, &sh->hw) == 0);
	p = kvc_map(t->dev, sh->hw.index, self->bs, PROT_READ | PROT_WRITE);
	TCHK(p != NULL);
	fill(p, 0, self->bs, SEED_AW);
	munmap(p, self->bs);
	return 0;
}

/*
 * A allocates sh->hw in a device file that outlives A's child (this
 * process keeps a duplicate): a victim block that stays writable, and
 * A's, while B attacks. The duplicate, or -1.
 */
static int hold_writable(SELF *self)
{
	int fd = child_dev(self), keep;

	if (fd < 0)
		return -1;
	keep = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (keep < 0) {
		close(fd);
		return -1;
	}
	if (as_user(self, UID_A, GID_A, NOGROUP, false, fd, a_writable,
		    NULL)) {
		close(keep);
		return -1;
	}
	return keep;
}

/*
 * A's blocks are as A wrote them, every byte: the first arg sealed ones
 * (pinned and mapped through t->dev) and, through t->dev (the writable
 * block's own file), the writable one.
 */
static int a_exact(struct tenant *t, void *arg)
{
	SELF *self = t->self;
	int n = (int)(intptr_t)arg;
	uint8_t *p;

	for (int i = 0; i < n; i++) {
		TCHK(kvc_pin(t->dev, sh->ha[i]) == 0);
		p = kvc_map(t->dev, sh->ha[i].index, self->bs, PROT_READ);
		TCHK(p != NULL);
		TCHK(block_exact(p, sh->keys[i], self->bs));
		munmap(p, self->bs);
		TCHK(kvc_unpin(t->dev, sh->ha[i]) == 0);
	}
	p = kvc_map(t->dev, sh->hw.index, self->bs, PROT_READ);
	TCHK(p != NULL);
	TCHK(check(p, 0, self->bs, SEED_AW) < 0);
	munmap(p, self->bs);
	return 0;
}

/* As a_exact(), in A's child, with the writable block's file. */
static int a_checks(SELF *self, int keep, int nsealed)
{
	int fd = fcntl(keep, F_DUPFD_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	return as_user(self, UID_A, GID_A, NOGROUP, false, fd, a_exact,
		       (void *)(intptr_t)nsealed);
}

/* The fake GPU's provider, bound as p2p_test does; -1 if the VM has none. */
static int gpu_provider(void)
{
	char pci[64];

	if (find_pci(0x1af4, 0x1110, 0, pci, sizeof(pci)))
		return -1;
	return bind_gpu(pci);
}

/* What region sh->region of file dev holds now, into buf (RLEN bytes). */
static int region_read(int dev, const char *path, uint8_t *buf)
{
	struct kvcache_xfer_entry e;
	int fd = own_file(path, RLEN, 0), ret;

	if (fd < 0)
		return -errno;
	e = entry(fd, 0, RLEN, sh->region, 0, 1);
	ret = xfer1(dev, &e);
	close(fd);
	if (!ret) {
		fd = open(path, O_RDONLY | O_CLOEXEC);
		ret = fd >= 0 && pread(fd, buf, RLEN, 0) == RLEN ? 0 : -EIO;
		if (fd >= 0)
			close(fd);
	}
	unlink(path);
	return ret;
}

/* The answers that were not the one expected: how many, the first few. */
struct odd_answers {
	int n;
	char list[400];
};

static void expect_answer(struct odd_answers *o, const char *what,
			  const char *call, int64_t got, int64_t want)
{
	size_t len = strlen(o->list);

	if (got == want || o->n++ >= 6 || len >= sizeof(o->list) - 1)
		return;
	snprintf(o->list + len, sizeof(o->list) - len, "%s%s %s: %lld not %lld",
		 len ? "; " : "", what, call, (long long)got, (long long)want);
}

/*
 * Tenant B, with nothing but the device's group: every transfer of A's
 * blocks (sealed and writable), out to B's own file and in from it,
 * synchronous and asynchronous, one by one and in one batch, is refused
 * with EACCES and moves nothing; root's region is another file's (EPERM).
 * Then B's own block makes the same round trip, so the refusals were
 * about A.
 */
static int b_xfer(struct tenant *t, void *arg)
{
	SELF *self = t->self;
	struct kvcache_helper hp = { .size = sizeof(hp) };
	struct kvcache_xfer_entry e[2 * (NBLK + 1)], re;
	struct kvcache_handle v[NBLK + 1], own;
	struct odd_answers o = { 0 };
	uint64_t id = 0;
	uint32_t n = 0;
	int dev, fd, fd2;

	(void)arg;
	dev = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	TCHK(dev >= 0);
	/* Neither the helper nor capable: an ordinary user of the device. */
	TCHK(kvc_ioc(dev, KVCACHE_IOC_HELPER, &hp) == -EPERM);
	fd = own_file(sh->bfile, self->bs, SEED_B);
	TCHK(fd >= 0);
	memcpy(v, sh->ha, sizeof(sh->ha));
	v[NBLK] = sh->hw;
	for (int i = 0; i <= NBLK; i++) {
		const char *what = i < NBLK ? "sealed" : "writable";

		for (int out = 1; out >= 0; out--) {
			e[n] = block_entry(fd, v[i], self->bs, out);
			expect_answer(&o, what, out ? "out" : "in",
				      run_sync(dev, e[n]), -EACCES);
			/*
			 * The kernel worker runs this one, where a check of
			 * `current` would find every capability.
			 */
			expect_answer(&o, what, out ? "async out" : "async in",
				      run_async(dev, e[n]), -EACCES);
			n++;
		}
	}
	TCHK(xfer_async(dev, e, n, -1, &id) == 0);
	TCHK(reap(dev, id, e, n, 0) == 0);
	for (uint32_t i = 0; i < n; i++)
		expect_answer(&o, "batch", e[i].flags & KVCACHE_XFER_TO_FILE ?
			      "out" : "in", e[i].result, -EACCES);
	/* Not a byte of A's: B's file is B's pattern still, and its size. */
	for (int i = 0; i < NBLK; i++)
		expect_answer(&o, "B's file", "holds A's block",
			      file_has_block(sh->bfile, sh->keys[i]), 0);
	expect_answer(&o, "B's file", "is its own",
		      file_holds(sh->bfile, self->bs, SEED_B), true);
	if (o.n) {
		snprintf(t->why, t->wlen, "%d answers differ: %s", o.n, o.list);
		return -1;
	}

	if (sh->region) {
		struct kvcache_region r = {
			.size = sizeof(r), .provider = (uint32_t)sh->prov,
			.offset = RLEN, .length = RLEN,
		};

		for (int out = 1; out >= 0; out--) {
			re = entry(fd, 0, RLEN, sh->region, 0, out);
			TCHK(run_sync(dev, re) == -EPERM);
			TCHK(run_async(dev, re) == -EPERM);
			/* A handle nobody has: EPERM was about its owner. */
			re.region = NO_REGION;
			TCHK(run_sync(dev, re) == -ENOENT);
		}
		TCHK(region_unreg(dev, sh->region) == -EPERM);
		/* Nor a window of its own: raw device memory is root's. */
		TCHK(kvc_ioc(dev, KVCACHE_IOC_REGION_REGISTER, &r) == -EPERM);
		TCHK(file_holds(sh->bfile, self->bs, SEED_B));
	}

	/* Its own block: in from the file, sealed pinned, out to another. */
	TCHK(kvc_alloc(dev, ns_b(self), 1, &own) == 0);
	TCHK(run_async(dev, block_entry(fd, own, self->bs, false)) ==
	     (int64_t)self->bs);
	TCHK(kvc_seal(dev, own, (uint32_t)self->bs, 0xb0,
		      KVCACHE_SEAL_KEEP_PIN) == 0);
	fd2 = own_file(sh->bfile2, self->bs, SEED_B + 1);
	TCHK(fd2 >= 0);
	TCHK(run_async(dev, block_entry(fd2, own, self->bs, true)) ==
	     (int64_t)self->bs);
	TCHK(file_holds(sh->bfile2, self->bs, SEED_B));
	close(fd2);
	close(fd);
	close(dev);
	return 0;
}

/*
 * Kernel mode: tenant B, an unprivileged member of the device's group and
 * nothing else, cannot move A's blocks through KVCACHE_IOC_XFER in either
 * direction, synchronously or not (the asynchronous form used to decide
 * in the kernel worker, where every capability check passes, and copied
 * any sealed block out), nor use another file's region; A's blocks and
 * the region are byte for byte what they were.
 */
TEST_F_TIMEOUT(kvcd, device_group_xfer_refused, 300)
{
	static uint8_t before[RLEN], after[RLEN];
	char top[PATH_MAX], rpath[PATH_MAX + 16];
	struct dev_saved sv;
	int keep, rb;

	if (geteuid())
		SKIP(return, "needs root to run tenants as other users");
	if (self->mode != KVC_PROTO_MODE_KERNEL)
		SKIP(return, "kernel mode only (memfd mode has no device)");
	ASSERT_EQ(0, tenants_setup(self)) TH_LOG("%s", self->c.why);
	chain_keys(self, 16, NBLK, sh->keys);
	ASSERT_EQ(0, as_user(self, UID_A, GID_A, NOGROUP, false,
			     child_dev(self), a_seals, NULL))
		TH_LOG("A: %s", sh->why);
	keep = hold_writable(self);
	ASSERT_LE(0, keep) TH_LOG("A's writable block: %s", sh->why);
	ASSERT_EQ(0, make_dirs(top, sizeof(top))) TH_LOG("%s", strerror(errno));
	snprintf(rpath, sizeof(rpath), "%s/region", top);

	/* Root's region on the fake GPU, where the VM has one. */
	sh->region = 0;
	sh->prov = gpu_provider();
	if (sh->prov >= 0) {
		ASSERT_EQ(0, region_reg(self->dev, sh->prov, 0, RLEN,
					&sh->region));
		ASSERT_EQ(0, region_read(self->dev, rpath, before));
	} else {
		TH_LOG("no fake GPU: the region paths are not tried");
	}

	ASSERT_EQ(0, dev_group_grant(&sv));
	rb = as_dev_user(self, UID_B, GID_B, NOGROUP, b_xfer, NULL);
	dev_group_restore(&sv);
	ASSERT_EQ(0, rb) TH_LOG("B: %s", sh->why);

	ASSERT_EQ(0, a_checks(self, keep, NBLK)) TH_LOG("A: %s", sh->why);
	if (sh->region) {
		ASSERT_EQ(0, region_read(self->dev, rpath, after));
		EXPECT_EQ(0, memcmp(before, after, RLEN));
		EXPECT_EQ(0, region_unreg(self->dev, sh->region));
	}
	close(keep);
	rm_rf(top);
}

/* mmap's answer as an errno: 0 if it mapped (and is unmapped again). */
static int map_answer(int dev, uint32_t index, uint64_t bs)
{
	void *p = kvc_map(dev, index, bs, PROT_READ);

	if (!p)
		return -errno;
	munmap(p, bs);
	return 0;
}

/*
 * B probes every handle of sh->probe (A's live, free and writable blocks,
 * right and wrong generations) through a read-write and a read-only file
 * of its own: each call gets one answer whatever the handle, and nothing
 * moves into B's file. Every call is made for every handle, so that a
 * failure lists all the answers that gave something away.
 */
static int b_oracles(struct tenant *t, void *arg)
{
	SELF *self = t->self;
	struct odd_answers o = { 0 };
	int rw, ro, fd;

	(void)arg;
	rw = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	ro = open(KVCACHE_DEVICE_PATH, O_RDONLY | O_CLOEXEC);
	TCHK(rw >= 0 && ro >= 0);
	fd = own_file(sh->bfile, self->bs, SEED_B);
	TCHK(fd >= 0);
	for (int i = 0; i < sh->nprobe; i++) {
		struct kvcache_handle h = sh->probe[i];
		struct kvcache_seal_entry se = {
			.handle = h, .payload_len = PAYLOAD,
		};
		struct kvcache_batch b = {
			.size = sizeof(b), .count = 1, .entries = (uintptr_t)&se,
		};

		expect_answer(&o, sh->probe_kind[i], "PIN", kvc_pin(rw, h), -EACCES);
		expect_answer(&o, sh->probe_kind[i], "PIN ro", kvc_pin(ro, h), -EACCES);
		expect_answer(&o, sh->probe_kind[i], "SEAL", kvc_ioc(rw, KVCACHE_IOC_SEAL, &b),
			      -EPERM);
		b.done = 0;
		expect_answer(&o, sh->probe_kind[i], "SEAL ro",
			      kvc_ioc(ro, KVCACHE_IOC_SEAL, &b), -EBADF);
		b.done = 0;
		expect_answer(&o, sh->probe_kind[i], "UNPIN", kvc_unpin(rw, h), -EINVAL);
		expect_answer(&o, sh->probe_kind[i], "UNPIN ro", kvc_unpin(ro, h), -EINVAL);
		expect_answer(&o, sh->probe_kind[i], "EVICT", kvc_evict(rw, h), -EPERM);
		expect_answer(&o, sh->probe_kind[i], "EVICT ro", kvc_evict(ro, h), -EPERM);
		for (int out = 1; out >= 0; out--) {
			struct kvcache_xfer_entry e =
				block_entry(fd, h, self->bs, out);

			expect_answer(&o, sh->probe_kind[i], out ? "XFER out" : "XFER in",
				      run_sync(rw, e), -EACCES);
			expect_answer(&o, sh->probe_kind[i], out ? "async out" : "async in",
				      run_async(rw, e), -EACCES);
			expect_answer(&o, sh->probe_kind[i], out ? "async out ro" :
				      "async in ro", run_async(ro, e), -EACCES);
		}
		expect_answer(&o, sh->probe_kind[i], "mmap ro", map_answer(ro, h.index, self->bs),
			      -EACCES);
		expect_answer(&o, sh->probe_kind[i], "mmap", map_answer(rw, h.index, self->bs),
			      -EACCES);
	}
	if (o.n) {
		snprintf(t->why, t->wlen, "%d answers differ: %s", o.n, o.list);
		return -1;
	}
	TCHK(file_holds(sh->bfile, self->bs, SEED_B));
	close(fd);
	close(ro);
	close(rw);
	return 0;
}

/*
 * The positive control: on B's own block the same calls do tell states
 * and generations apart, as they should for a block one may see.
 */
static int b_own_answers(struct tenant *t, void *arg)
{
	SELF *self = t->self;
	struct kvcache_handle own, stale;
	int rw, ro;

	(void)arg;
	rw = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	ro = open(KVCACHE_DEVICE_PATH, O_RDONLY | O_CLOEXEC);
	TCHK(rw >= 0 && ro >= 0);
	TCHK(kvc_alloc(rw, ns_b(self), 1, &own) == 0);
	stale = own;
	stale.gen++;
	TCHK(kvc_pin(rw, own) == -EBUSY);		/* writable yet */
	TCHK(kvc_seal(rw, stale, PAYLOAD, 0xb1, 0) == -ESTALE);
	TCHK(kvc_seal(ro, own, PAYLOAD, 0xb1, 0) == -EBADF);
	TCHK(kvc_seal(rw, own, PAYLOAD, 0xb1, 0) == 0);
	TCHK(kvc_pin(ro, stale) == -ESTALE);
	TCHK(kvc_pin(ro, own) == 0);
	TCHK(kvc_unpin(ro, own) == 0);
	close(ro);
	close(rw);
	return 0;
}

/* What root (who may see everything) finds: the states B must not tell. */
static int root_sees_states(SELF *self, struct kvcache_handle freed)
{
	struct kvcache_handle cur = freed;

	cur.gen++;	/* eviction gave the free block a new generation */
	if (kvc_pin(self->dev, freed) != -ESTALE ||
	    kvc_pin(self->dev, cur) != -ESTALE ||
	    kvc_pin(self->dev, sh->hw) != -EBUSY ||
	    kvc_pin(self->dev, sh->ha[0]) != 0 ||
	    kvc_unpin(self->dev, sh->ha[0]) != 0)
		return -1;
	return 0;
}

/*
 * Kernel mode: for a namespace the caller may not read, PIN, SEAL, UNPIN,
 * EVICT, XFER (both ways, sync and async) and mmap each give one errno
 * for a free block (one of A's, evicted by root: the kernel judges it by
 * the namespace of its last life), a live sealed block and a writable
 * one, under their right generation and wrong ones; SEAL gives EBADF for
 * every handle on a read-only file. Guessing handles then tells neither
 * liveness nor generations (the admin guide, "Security and permissions").
 */
TEST_F_TIMEOUT(kvcd, device_oracles_same_answer, 300)
{
	struct kvcache_handle h, freed;
	char top[PATH_MAX];
	struct dev_saved sv;
	int keep, rb;

	if (geteuid())
		SKIP(return, "needs root to run tenants as other users");
	if (self->mode != KVC_PROTO_MODE_KERNEL)
		SKIP(return, "kernel mode only (memfd mode has no device)");
	ASSERT_EQ(0, tenants_setup(self)) TH_LOG("%s", self->c.why);
	chain_keys(self, 17, NBLK, sh->keys);
	ASSERT_EQ(0, as_user(self, UID_A, GID_A, NOGROUP, false,
			     child_dev(self), a_seals, NULL))
		TH_LOG("A: %s", sh->why);
	keep = hold_writable(self);
	ASSERT_LE(0, keep) TH_LOG("A's writable block: %s", sh->why);
	ASSERT_EQ(0, make_dirs(top, sizeof(top))) TH_LOG("%s", strerror(errno));
	/* Root evicts one of A's blocks: free, its namespace A's still. */
	freed = sh->ha[NBLK - 1];
	ASSERT_EQ(0, kvc_evict(self->dev, freed));

	sh->nprobe = 0;
	for (int d = -1; d <= 1; d++) {
		static const char *const gen[] = { "gen-1", "gen", "gen+1" };

		h = sh->ha[0];			/* live, sealed */
		h.gen += (uint32_t)d;
		snprintf(sh->probe_kind[sh->nprobe], 24, "sealed %s",
			 gen[d + 1]);
		sh->probe[sh->nprobe++] = h;
		h = freed;			/* free: old, current, next */
		h.gen += (uint32_t)(d + 1);
		snprintf(sh->probe_kind[sh->nprobe], 24, "free %s",
			 d < 0 ? "old gen" : d ? "gen+1" : "gen");
		sh->probe[sh->nprobe++] = h;
		h = sh->hw;			/* live, A's writer's */
		h.gen += (uint32_t)d;
		snprintf(sh->probe_kind[sh->nprobe], 24, "writable %s",
			 gen[d + 1]);
		sh->probe[sh->nprobe++] = h;
	}
	ASSERT_EQ(0, root_sees_states(self, freed));

	ASSERT_EQ(0, dev_group_grant(&sv));
	rb = as_dev_user(self, UID_B, GID_B, NOGROUP, b_oracles, NULL);
	/* Before anything allocates: the free block was free throughout. */
	if (!rb && root_sees_states(self, freed))
		snprintf(sh->why, sizeof(sh->why), "%s",
			 "the states changed under the probes");
	else if (!rb)
		rb = as_dev_user(self, UID_B, GID_B, NOGROUP, b_own_answers,
				 NULL);
	dev_group_restore(&sv);
	ASSERT_EQ(0, rb) TH_LOG("B: %s", sh->why);
	ASSERT_EQ(0, a_checks(self, keep, NBLK - 1)) TH_LOG("A: %s", sh->why);
	close(keep);
	rm_rf(top);
}

/*
 * Pin and map through a descriptor opened read-only (reader): PROT_READ
 * MAP_SHARED works and shows A's bytes; PROT_WRITE is refused by the VFS
 * (EACCES) and so is mprotect() to writable afterwards. A non-reader
 * (!reader) gets EACCES for both.
 */
static int ro_maps(struct tenant *t, void *arg)
{
	SELF *self = t->self;
	bool reader = arg != NULL;
	struct kvcache_handle h;
	int ro;
	uint8_t *p;

	ro = open(KVCACHE_DEVICE_PATH, O_RDONLY | O_CLOEXEC);
	TCHK(ro >= 0);
	for (int i = 0; i < NBLK; i++) {
		uint32_t idx = sh->ha[i].index;

		if (!reader) {
			TCHK(kvc_pin(ro, sh->ha[i]) == -EACCES);
			errno = 0;
			TCHK(kvc_map(ro, idx, self->bs, PROT_READ) == NULL &&
			     errno == EACCES);
			continue;
		}
		TCHK(kvc_pin(ro, sh->ha[i]) == 0);
		errno = 0;
		p = kvc_map(ro, idx, self->bs, PROT_READ);
		TCHK(p != NULL);
		TCHK(block_exact(p, sh->keys[i], self->bs));
		errno = 0;
		TCHK(mprotect(p, self->bs, PROT_READ | PROT_WRITE) == -1 &&
		     errno == EACCES);
		TCHK(block_exact(p, sh->keys[i], self->bs));
		munmap(p, self->bs);
		errno = 0;
		TCHK(kvc_map(ro, idx, self->bs, PROT_READ | PROT_WRITE) ==
		     NULL && errno == EACCES);
		TCHK(kvc_unpin(ro, sh->ha[i]) == 0);
		/* The pin was what allowed it. */
		errno = 0;
		TCHK(kvc_map(ro, idx, self->bs, PROT_READ) == NULL &&
		     errno == EACCES);
	}
	/* Read-only: nothing to allocate or seal. */
	TCHK(kvc_alloc(ro, ns_a(self), 1, &h) == -EBADF);
	close(ro);
	return 0;
}

/*
 * Kernel mode: readers map sealed blocks through a read-only descriptor
 * (the admin guide: read-only is enough to pin and map): the owner A and
 * the group member G; never writable. G without the group: refused.
 */
TEST_F_TIMEOUT(kvcd, device_read_only_fd_maps, 180)
{
	struct dev_saved sv;
	int ra, rg, rn;

	if (geteuid())
		SKIP(return, "needs root to run tenants as other users");
	if (self->mode != KVC_PROTO_MODE_KERNEL)
		SKIP(return, "kernel mode only (memfd mode has no device)");
	ASSERT_EQ(0, tenants_setup(self)) TH_LOG("%s", self->c.why);
	chain_keys(self, 18, NBLK, sh->keys);
	ASSERT_EQ(0, as_user(self, UID_A, GID_A, NOGROUP, false,
			     child_dev(self), a_seals, NULL))
		TH_LOG("A: %s", sh->why);
	ASSERT_EQ(0, dev_group_grant(&sv));
	ra = as_dev_user(self, UID_A, GID_A, NOGROUP, ro_maps, "reader");
	rg = ra ? -1 : as_dev_user(self, UID_G, GID_G, GID_A, ro_maps,
				   "reader");
	rn = ra || rg ? -1 : as_dev_user(self, UID_G, GID_G, NOGROUP, ro_maps,
					 NULL);
	dev_group_restore(&sv);
	ASSERT_EQ(0, ra) TH_LOG("A: %s", sh->why);
	ASSERT_EQ(0, rg) TH_LOG("member: %s", sh->why);
	ASSERT_EQ(0, rn) TH_LOG("non-member: %s", sh->why);
}

/* ---- the disk tiers ------------------------------------------------------ */

static SELF *walk_self;

static int collect(const char *path, const struct stat *st, int type,
		   struct FTW *ftw)
{
	char want[64];

	(void)st;
	(void)ftw;
	snprintf(want, sizeof(want), "/ns%u/", ns_a(walk_self));
	if (type == FTW_F && strstr(path, want) && sh->nfiles < 64)
		snprintf(sh->files[sh->nfiles++], PATH_MAX, "%s", path);
	return 0;
}

/* Open and read each file (want_ok), or be refused (EACCES) at each. */
static int open_files(struct tenant *t, void *arg)
{
	bool want_ok = arg != NULL;
	char buf[512];

	TCHK(sh->nfiles >= 2 * NBLK);
	for (int i = 0; i < sh->nfiles; i++) {
		int fd = open(sh->files[i], O_RDONLY | O_CLOEXEC);
		int err = errno;
		struct stat st;

		if (want_ok) {
			TCHK(fd >= 0);
			/* Block files, and g4's namespace description. */
			TCHK(read(fd, buf, sizeof(buf)) > 0);
			close(fd);
			continue;
		}
		if (fd >= 0)
			close(fd);
		TCHK(fd < 0 && err == EACCES);
		/* Not even its name can be confirmed. */
		TCHK(stat(sh->files[i], &st) != 0 && errno == EACCES);
	}
	return 0;
}

static int cannot_list(struct tenant *t, void *arg)
{
	DIR *d = opendir(arg);

	if (d)
		closedir(d);
	TCHK(d == NULL && errno == EACCES);
	return 0;
}

/*
 * The namespace's owner may list its directory, but neither plant an
 * entry in it nor take it back with chmod: the directory is kvcached's.
 */
static int owner_cannot_write(struct tenant *t, void *arg)
{
	char path[PATH_MAX];
	DIR *d = opendir(arg);
	int fd;

	TCHK(d != NULL);
	if (d)
		closedir(d);
	snprintf(path, sizeof(path), "%s/planted", (const char *)arg);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
	if (fd >= 0)
		close(fd);
	TCHK(fd < 0 && errno == EACCES);
	TCHK(symlink("..", path) == -1 && errno == EACCES);
	TCHK(chmod(arg, 0755) == -1 && errno == EPERM);
	return 0;
}

/*
 * A's blocks on g3 and g4: only its readers open them (which is what a
 * region load needs: KVCACHE_IOC_XFER takes a descriptor the caller
 * opened), B can neither open nor list them.
 */
TEST_F_TIMEOUT(kvcd, tier_files_private, 180)
{
	char g3[PATH_MAX], g4[PATH_MAX], conf[3 * PATH_MAX], why[512] = "";
	char nsdir[PATH_MAX + 16];
	struct stat st;

	if (geteuid())
		SKIP(return, "needs root to run tenants as other users");
	tier_dir(g3, sizeof(g3), "g3");
	tier_dir(g4, sizeof(g4), "g4");
	snprintf(conf, sizeof(conf),
		 "[g3]\ndirectory = %s\ncapacity = 64M\nwrite = through\n"
		 "[g4]\ndirectory = %s\ncapacity = 64M\nwrite = through\n",
		 g3, g4);
	/* memfd mode: A must get the pool to store, so no B namespace. */
	if (self->mode == KVC_PROTO_MODE_MEMFD ?
	    memfd_one_domain(self, conf, 0740, why, sizeof(why)) :
	    restart(self, conf, why, sizeof(why))) {
		dump_log(_metadata, self);
		ASSERT_TRUE(false) TH_LOG("restart with g3 and g4: %s", why);
	}
	if (self->mode != KVC_PROTO_MODE_MEMFD) {
		ASSERT_EQ(0, tenants_setup(self)) TH_LOG("%s", self->c.why);
	}
	chain_keys(self, 14, NBLK, sh->keys);
	ASSERT_EQ(0, as_user(self, UID_A, GID_A, NOGROUP, true, child_dev(self),
			     a_stores, NULL)) TH_LOG("A: %s", sh->why);
	ASSERT_EQ(NBLK, wait_stat(&self->c, "g3_spills", NBLK, 30));
	ASSERT_EQ(NBLK, wait_stat(&self->c, "g4_spills", NBLK, 30));

	/* The namespace's directories: kvcached's, with the namespace's
	 * group, r-x where 0740 reads; the owner lists but cannot write. */
	for (int i = 0; i < 2; i++) {
		snprintf(nsdir, sizeof(nsdir), "%s/ns%u", i ? g4 : g3,
			 ns_a(self));
		ASSERT_EQ(0, stat(nsdir, &st)) TH_LOG("%s", nsdir);
		EXPECT_EQ(0, st.st_uid);
		EXPECT_EQ(GID_A, st.st_gid);
		EXPECT_EQ(0750, st.st_mode & 07777) TH_LOG("%s", nsdir);
		ASSERT_EQ(0, as_user(self, UID_A, GID_A, NOGROUP, false, -1,
				     owner_cannot_write, nsdir))
			TH_LOG("A in %s: %s", nsdir, sh->why);
		ASSERT_EQ(0, as_user(self, UID_B, GID_B, NOGROUP, false, -1,
				     cannot_list, nsdir))
			TH_LOG("B lists %s: %s", nsdir, sh->why);
	}
	sh->nfiles = 0;
	walk_self = self;
	nftw(g3, collect, 16, FTW_PHYS);
	nftw(g4, collect, 16, FTW_PHYS);
	ASSERT_LE(2 * NBLK, sh->nfiles);
	ASSERT_EQ(0, as_user(self, UID_B, GID_B, NOGROUP, false, -1, open_files,
			     NULL)) TH_LOG("B: %s", sh->why);
	/* Positive controls: the owner and a group member read them. */
	ASSERT_EQ(0, as_user(self, UID_A, GID_A, NOGROUP, false, -1, open_files,
			     "ok")) TH_LOG("A: %s", sh->why);
	ASSERT_EQ(0, as_user(self, UID_G, GID_G, GID_A, false, -1, open_files,
			     "ok")) TH_LOG("member: %s", sh->why);
	ASSERT_EQ(0, as_user(self, UID_G, GID_G, NOGROUP, false, -1, open_files,
			     NULL)) TH_LOG("non-member: %s", sh->why);
	rm_rf(g3);
	rm_rf(g4);
}

/* ---- the socket's own mode ----------------------------------------------- */

static int try_connect(struct tenant *t, void *arg)
{
	int fd = kvcc_connect_fd(t->self->sock);

	if (fd >= 0)
		close(fd);
	if (arg)
		TCHK(fd >= 0);
	else
		TCHK(fd == -EACCES);
	return 0;
}

/* Restart with the socket's mode replaced (the fixture writes 0666). */
static int restart_socket_mode(SELF *self, const char *mode, char *why,
			       size_t wlen)
{
	char *text = NULL, *at;
	size_t cap = 0;
	FILE *f;
	ssize_t n;

	kvcc_close(&self->c);
	daemon_stop(self);
	unlink(self->sock);
	self->extra_conf = NULL;
	if (write_config(self))
		return -EIO;
	f = fopen(self->conf, "re");
	if (!f)
		return -errno;
	n = getdelim(&text, &cap, '\0', f);
	fclose(f);
	at = n > 0 ? strstr(text, "socket_mode = 0666") : NULL;
	if (!at) {
		free(text);
		snprintf(why, wlen, "no socket_mode in the configuration");
		return -EINVAL;
	}
	memcpy(at + strlen("socket_mode = "), mode, 4);
	f = fopen(self->conf, "we");
	if (!f || fputs(text, f) < 0 || fclose(f)) {
		free(text);
		return -EIO;
	}
	free(text);
	if (daemon_start(self, why, wlen))
		return -EIO;
	if (kvcc_open(&self->c, self->sock) || kvcc_hello(&self->c))
		return -EIO;
	return 0;
}

/* socket_mode is the first gate: 0600 keeps every tenant out. */
TEST_F_TIMEOUT(kvcd, socket_mode_gates_connect, 120)
{
	char why[512] = "";

	if (geteuid())
		SKIP(return, "needs root to run tenants as other users");
	/* The fixture's 0666: B connects (and is then checked per call). */
	ASSERT_EQ(0, as_user(self, UID_B, GID_B, NOGROUP, false, -1, try_connect,
			     "ok")) TH_LOG("%s", sh->why);
	ASSERT_EQ(0, restart_socket_mode(self, "0600", why, sizeof(why)))
		TH_LOG("%s", why);
	ASSERT_EQ(0, as_user(self, UID_B, GID_B, NOGROUP, false, -1, try_connect,
			     NULL)) TH_LOG("%s", sh->why);
	/* 0660 with the socket's group (root's): still not B. */
	ASSERT_EQ(0, restart_socket_mode(self, "0660", why, sizeof(why)))
		TH_LOG("%s", why);
	ASSERT_EQ(0, as_user(self, UID_B, GID_B, NOGROUP, false, -1, try_connect,
			     NULL)) TH_LOG("%s", sh->why);
	/* ... but a member of that group. */
	ASSERT_EQ(0, as_user(self, UID_B, GID_B, getegid(), false, -1,
			     try_connect, "ok")) TH_LOG("%s", sh->why);
}

/* ---- memfd mode: the pool is one trust domain ----------------------------- */

/*
 * A child as uid/gid, connected and HELLO'd, until *release (the write
 * end of a pipe it reads) is closed. Its pid, or -1 with sh->why.
 */
static pid_t hold_hello(SELF *self, uid_t uid, gid_t gid, int *release)
{
	int ready[2], rel[2];
	char ok = 0;
	pid_t pid;

	if (pipe2(ready, O_CLOEXEC))
		return -1;
	if (pipe2(rel, O_CLOEXEC)) {
		close(ready[0]);
		close(ready[1]);
		return -1;
	}
	pid = fork();
	if (!pid) {
		struct kvcc c;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(ready[0]);
		close(rel[1]);
		if (self->c.fd >= 0)
			close(self->c.fd);
		kvcc_init(&c);
		if (setgroups(0, NULL) || setresgid(gid, gid, gid) ||
		    setresuid(uid, uid, uid))
			_exit(1);
		ok = !kvcc_open(&c, self->sock) && !kvcc_hello(&c) &&
		     c.pool != NULL;
		if (!ok)
			snprintf(sh->why, sizeof(sh->why), "uid %u: %s",
				 (unsigned int)uid, c.why);
		if (write(ready[1], &ok, 1) != 1)
			_exit(1);
		/* Hold the connection (and the pool) until released. */
		while (read(rel[0], &ok, 1) > 0)
			;
		kvcc_close(&c);
		_exit(0);
	}
	close(ready[1]);
	close(rel[0]);
	if (pid < 0 || read(ready[0], &ok, 1) != 1 || !ok) {
		close(ready[0]);
		close(rel[1]);
		if (pid > 0)
			waitpid(pid, NULL, 0);
		return -1;
	}
	close(ready[0]);
	*release = rel[1];
	return pid;
}

/* A peer that holds the pool is still not root: no privileged request. */
static int not_root(struct tenant *t, void *arg)
{
	SELF *self = t->self;
	uint8_t salt[KVC_PROTO_SALT_SIZE] = { 0 };
	struct kvc_flush_reply fr;
	int32_t st[1];

	(void)arg;
	TCHK(t->c.hello_nfds == 1 && t->c.pool != NULL);
	TCHK(kvcc_evict(&t->c, ns_a(self), sh->keys[0], 1, st) == -EPERM);
	TCHK(kvcc_flush(&t->c, ns_a(self), &fr) == -EPERM);
	TCHK(kvcc_flush(&t->c, KVC_PROTO_NS_ALL, &fr) == -EPERM);
	TCHK(kvcc_ns_create(&t->c, self->ns + 4, UID_A, GID_A, 0770) ==
	     -EPERM);
	TCHK(kvcc_ns_salt(&t->c, ns_a(self), salt, NULL) == -EPERM);
	/* Its own reads still work: the refusals were about privilege. */
	TCHK(kvcc_lookup(&t->c, ns_a(self), KVC_PROTO_TIERS_ALL, sh->keys[0],
			 NBLK, NULL) == NBLK);
	return 0;
}

/*
 * memfd mode: a peer that may read and write every namespace gets the
 * pool and works end to end; once it has had the pool, no namespace it
 * could not read and write is created, even after it hung up (it may
 * keep its mapping and see that namespace's blocks through it); a
 * restarted kvcached has a new pool, that namespace is created, and then
 * the same peer's HELLO is refused.
 */
TEST_F_TIMEOUT(kvcd, memfd_pool_one_trust_domain, 120)
{
	char why[512] = "";
	int release = -1, ret = -1;
	pid_t holder;

	if (geteuid())
		SKIP(return, "needs root to run tenants as other users");
	if (self->mode != KVC_PROTO_MODE_MEMFD)
		SKIP(return, "memfd mode only (the kernel checks each block)");
	ASSERT_EQ(0, memfd_one_domain(self, NULL, 0760, why, sizeof(why)))
		TH_LOG("%s", why);
	chain_keys(self, 15, NBLK, sh->keys);
	/* Positive control: A may read and write all, and gets the pool. */
	ASSERT_EQ(0, as_user(self, UID_A, GID_A, NOGROUP, true, -1, a_stores,
			     NULL)) TH_LOG("A: %s", sh->why);
	ASSERT_EQ(0, as_user(self, UID_A, GID_A, NOGROUP, true, -1, a_reads,
			     NULL)) TH_LOG("A again: %s", sh->why);
	ASSERT_EQ(0, as_user(self, UID_A, GID_A, NOGROUP, true, -1, not_root,
			     NULL)) TH_LOG("A: %s", sh->why);
	/* A supplementary group with rw on both grants the pool too ... */
	ASSERT_EQ(0, as_user(self, UID_G, GID_G, GID_A, true, -1, a_reads,
			     NULL)) TH_LOG("member: %s", sh->why);
	/* ... and without it, nothing. */
	ASSERT_EQ(0, as_user(self, UID_G, GID_G, NOGROUP, false, -1,
			     hello_refused, NULL)) TH_LOG("non-member: %s", sh->why);
	/* B may not read and write A's (nor the fixture's). */
	ASSERT_EQ(0, as_user(self, UID_B, GID_B, NOGROUP, false, -1,
			     hello_refused, NULL)) TH_LOG("B: %s", sh->why);

	holder = hold_hello(self, UID_A, GID_A, &release);
	ASSERT_LT(0, holder) TH_LOG("A holding: %s", sh->why);
	/* B's private namespace: A, connected, could not rw it. */
	EXPECT_EQ(-EACCES, ns_create(self, &self->c, ns_b(self), UID_B, GID_B,
				     0700)) TH_LOG("%s", self->c.why);
	/* One A may (through the group): the refusal is about A. */
	EXPECT_EQ(0, ns_create(self, &self->c, self->ns + 3, UID_B, GID_A,
			       0770)) TH_LOG("%s", self->c.why);
	close(release);
	ASSERT_EQ(holder, waitpid(holder, NULL, 0));
	/*
	 * A hung up, but may have kept the pool mapped (a memfd cannot be
	 * taken back): still refused, however long we wait.
	 */
	msleep(300);
	EXPECT_EQ(-EACCES, ns_create(self, &self->c, ns_b(self), UID_B, GID_B,
				     0700)) TH_LOG("%s", self->c.why);
	/* A new kvcached has a new pool, which nobody holds yet. */
	ASSERT_EQ(0, restart(self, NULL, why, sizeof(why))) TH_LOG("%s", why);
	ret = ns_create(self, &self->c, ns_b(self), UID_B, GID_B, 0700);
	ASSERT_EQ(0, ret) TH_LOG("%s", self->c.why);
	/* Now B's private namespace exists: A no longer gets the pool. */
	ASSERT_EQ(0, as_user(self, UID_A, GID_A, NOGROUP, false, -1,
			     hello_refused, NULL)) TH_LOG("A: %s", sh->why);
}

/* ---- per-namespace salts ------------------------------------------------- */

static const struct kvcache_identity lib_id = {
	.model = "isolation/model", .weights_revision = "r1",
	.tokenizer = "tok", .kv_layout = "paged-nhd", .kv_dtype = "bf16",
	.lora = "", .tokens_per_block = TPB, .tp_size = 1, .pp_size = 1,
};

/* The keys of NBLK blocks of fixed tokens in ns (flags: KVCACHE_NS_*). */
static int lib_keys(SELF *self, uint32_t ns, uint32_t flags,
		    uint8_t (*out)[KVCACHE_KEY_SIZE])
{
	struct kvcache_options o = { .socket = self->sock };
	struct kvcache_namespace *n;
	uint32_t tok[NBLK * TPB];
	struct kvcache *c;
	int ret;

	for (int i = 0; i < NBLK * TPB; i++)
		tok[i] = (uint32_t)(7 * i + 1);
	ret = kvcache_open(&o, &c);
	if (ret)
		return ret;
	ret = kvcache_ns_open_flags(c, ns, &lib_id, LIB_BYTES, flags, &n);
	if (!ret && kvcache_ns_keys(n, tok, NBLK * TPB, out[0], NBLK) != NBLK)
		ret = -EIO;
	kvcache_close(c);
	return ret;
}

/* In a child (another process, root): the keys into sh->lib_keys. */
static int child_keys(struct tenant *t, void *arg)
{
	TCHK(lib_keys(t->self, (uint32_t)(uintptr_t)arg, 0, sh->lib_keys) ==
	     0);
	return 0;
}

static int b_no_salt(struct tenant *t, void *arg)
{
	uint8_t salt[KVC_PROTO_SALT_SIZE];

	(void)arg;
	TCHK(kvcc_ns_salt(&t->c, ns_a(t->self), NULL, salt) == -EACCES);
	TCHK(kvcc_ns_salt(&t->c, ns_a(t->self) + 100, NULL, salt) ==
	     -ENOENT);
	return 0;
}

/*
 * Keys include the namespace's salt by default: two namespaces with the
 * same identity differ; one namespace gives the same keys to any
 * process and after a restart; the opt-out gives the identity's plain
 * keys; only readers get the salt; root can set it (nodes that share a
 * g4 set the same one).
 */
TEST_F_TIMEOUT(kvcd, salt_per_namespace, 120)
{
	uint8_t ka[NBLK][KVCACHE_KEY_SIZE], kb[NBLK][KVCACHE_KEY_SIZE];
	uint8_t k0[NBLK][KVCACHE_KEY_SIZE], kp[NBLK][KVCACHE_KEY_SIZE];
	uint8_t seed[KVCACHE_KEY_SIZE], salt[KVC_PROTO_SALT_SIZE];
	uint8_t fixed[KVC_PROTO_SALT_SIZE];
	struct kvc_ns_identity kid = {
		.model = lib_id.model,
		.weights_revision = lib_id.weights_revision,
		.tokenizer = lib_id.tokenizer, .kv_layout = lib_id.kv_layout,
		.kv_dtype = lib_id.kv_dtype, .lora = lib_id.lora,
		.tokens_per_block = TPB, .tp_size = 1, .pp_size = 1,
	};
	uint32_t tok[NBLK * TPB];
	char why[512] = "";

	if (geteuid())
		SKIP(return, "needs root to run tenants as other users");
	ASSERT_EQ(0, tenants_setup(self)) TH_LOG("%s", self->c.why);
	ASSERT_EQ(0, lib_keys(self, ns_a(self), 0, ka));
	ASSERT_EQ(0, lib_keys(self, ns_b(self), 0, kb));
	EXPECT_NE(0, memcmp(ka, kb, sizeof(ka)));
	/* The opt-out: the same plain keys in both, keys.md's. */
	ASSERT_EQ(0, lib_keys(self, ns_a(self), KVCACHE_NS_NO_SALT, k0));
	ASSERT_EQ(0, lib_keys(self, ns_b(self), KVCACHE_NS_NO_SALT, kb));
	EXPECT_EQ(0, memcmp(k0, kb, sizeof(k0)));
	for (int i = 0; i < NBLK * TPB; i++)
		tok[i] = (uint32_t)(7 * i + 1);
	ASSERT_EQ(0, kvc_ns_seed(&kid, seed));
	ASSERT_EQ(NBLK, kvc_chain_keys(seed, tok, NBLK * TPB, TPB, kp, NBLK));
	EXPECT_EQ(0, memcmp(k0, kp, sizeof(k0)));
	EXPECT_NE(0, memcmp(ka, k0, sizeof(ka)));
	/* ... and the salted ones are the plain identity plus field 13. */
	ASSERT_EQ(0, kvcc_ns_salt(&self->c, ns_a(self), NULL, salt));
	kid.ns_salt = salt;
	kid.ns_salt_len = sizeof(salt);
	ASSERT_EQ(0, kvc_ns_seed(&kid, seed));
	ASSERT_EQ(NBLK, kvc_chain_keys(seed, tok, NBLK * TPB, TPB, kp, NBLK));
	EXPECT_EQ(0, memcmp(ka, kp, sizeof(ka)));
	/* Another process, the same namespace: the same keys. */
	memset(sh->lib_keys, 0, sizeof(sh->lib_keys));
	ASSERT_EQ(0, as_user(self, 0, 0, NOGROUP, false, -1, child_keys,
			     (void *)(uintptr_t)ns_a(self)))
		TH_LOG("%s", sh->why);
	EXPECT_EQ(0, memcmp(ka, sh->lib_keys, sizeof(ka)));
	/* Not a reader: no salt (memfd mode: not even a HELLO). */
	if (self->mode == KVC_PROTO_MODE_MEMFD) {
		ASSERT_EQ(0, as_user(self, UID_B, GID_B, NOGROUP, false, -1,
				     hello_refused, NULL)) TH_LOG("B: %s", sh->why);
	} else {
		ASSERT_EQ(0, as_user(self, UID_B, GID_B, NOGROUP, true, -1,
				     b_no_salt, NULL)) TH_LOG("B: %s", sh->why);
	}
	/* A restart keeps it. */
	ASSERT_EQ(0, restart(self, NULL, why, sizeof(why))) TH_LOG("%s", why);
	ASSERT_EQ(0, lib_keys(self, ns_a(self), 0, kb));
	EXPECT_EQ(0, memcmp(ka, kb, sizeof(ka)));
	/* Set by root, the same in two namespaces: the same keys. */
	for (int i = 0; i < KVC_PROTO_SALT_SIZE; i++)
		fixed[i] = (uint8_t)(0xa5 ^ i);
	ASSERT_EQ(0, kvcc_ns_salt(&self->c, ns_a(self), fixed, salt));
	EXPECT_EQ(0, memcmp(salt, fixed, sizeof(salt)));
	ASSERT_EQ(0, kvcc_ns_salt(&self->c, ns_b(self), fixed, NULL));
	ASSERT_EQ(0, lib_keys(self, ns_a(self), 0, ka));
	ASSERT_EQ(0, lib_keys(self, ns_b(self), 0, kb));
	EXPECT_EQ(0, memcmp(ka, kb, sizeof(ka)));
	EXPECT_NE(0, memcmp(ka, kp, sizeof(ka)));
	/* And that survives a restart too. */
	ASSERT_EQ(0, restart(self, NULL, why, sizeof(why))) TH_LOG("%s", why);
	ASSERT_EQ(0, kvcc_ns_salt(&self->c, ns_b(self), NULL, salt));
	EXPECT_EQ(0, memcmp(salt, fixed, sizeof(salt)));
}

static void __attribute__((constructor)) iso_init(void)
{
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		abort();
}

TEST_HARNESS_MAIN
