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
 * not (Documentation/admin-guide.md, "Security and permissions"). There
 * the tenants' HELLO is refused (EACCES, no descriptor) while both
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
 * Run fn in a child with the given ids (extra: a supplementary group, or
 * NOGROUP). The child drops what it inherited from root (the root
 * connection, the device file) before changing ids, so every request it
 * makes is its own. Connects (conn) and opens the device in kernel mode
 * (dev: O_RDWR, or -1 not to). 0, or -1 with sh->why.
 */
static int as_user(SELF *self, uid_t uid, gid_t gid, gid_t extra, bool conn,
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
		gid_t groups[1] = { extra };
		int ret;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (self->c.fd >= 0)
			close(self->c.fd);
		if (self->dev >= 0)
			close(self->dev);
		kvcc_init(&t.c);
		if (setgroups(extra != NOGROUP ? 1 : 0, groups) ||
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

/* NS_SALT over a test connection: 0 with the salt, or the error. */
static int kvcc_ns_salt(struct kvcc *c, uint32_t ns, const uint8_t *set,
			uint8_t *out)
{
	struct kvc_ns_salt s = { .ns_id = ns };
	int ret;

	if (set) {
		s.flags = KVC_PROTO_NS_SALT_SET;
		memcpy(s.salt, set, KVC_PROTO_SALT_SIZE);
	}
	ret = kvcc_call(c, kvc_proto_encode_ns_salt(KVCC_TX(c), &s),
			KVC_MSG_NS_SALT_REPLY);
	if (!ret && out)
		memcpy(out, c->msg.ns_salt_reply.salt, KVC_PROTO_SALT_SIZE);
	return ret;
}

/* The NS_LIST entry of ns as c sees it; -ENOENT if not listed. */
static int list_entry(struct kvcc *c, uint32_t ns, struct kvc_ns_entry *e)
{
	uint32_t start = 0;

	do {
		int ret = kvcc_ns_list(c, start);

		if (ret)
			return ret;
		for (uint32_t i = 0; i < c->msg.ns_list_reply.count; i++) {
			kvc_proto_ns_entry(&c->msg.ns_list_reply, i, e);
			if (e->ns_id == ns)
				return 0;
		}
		start = c->msg.ns_list_reply.next;
	} while (start);
	return -ENOENT;
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
	TCHK(list_entry(&t->c, ns_a(self), &e) == 0);
	TCHK(e.uid == UID_A && e.gid == GID_A && e.mode == 0740);
	TCHK(e.blocks == 0);
	TCHK(list_entry(&t->c, ns_b(self), &e) == 0);
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
	ASSERT_EQ(0, list_entry(&self->c, ns_a(self), &e));
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
		/* Seal, unpin, evict it. */
		se.handle = sh->ha[i];
		memcpy(se.key, sh->keys[i], KVCACHE_KEY_SIZE);
		TCHK(kvc_ioc(t->dev, KVCACHE_IOC_SEAL, &b) != 0);
		b.done = 0;
		TCHK(kvc_unpin(t->dev, sh->ha[i]) != 0);
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
			TCHK(read(fd, buf, sizeof(buf)) == sizeof(buf));
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

	/* The namespace's directories: its owner, r-x where 0740 reads. */
	for (int i = 0; i < 2; i++) {
		snprintf(nsdir, sizeof(nsdir), "%s/ns%u", i ? g4 : g3,
			 ns_a(self));
		ASSERT_EQ(0, stat(nsdir, &st)) TH_LOG("%s", nsdir);
		EXPECT_EQ(UID_A, st.st_uid);
		EXPECT_EQ(GID_A, st.st_gid);
		EXPECT_EQ(0550, st.st_mode & 07777) TH_LOG("%s", nsdir);
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
