// SPDX-License-Identifier: GPL-2.0
/*
 * Integration tests of kvcached, the helper daemon: each test starts its
 * own daemon (the binary next to this one, ../helper/kvcached, or
 * $KVC_KVCACHED) on a socket and state directory of its own, talks to it
 * over the real wire format (helper/common/proto.c) with real block keys
 * (helper/common/keys.c), and stops it.
 *
 * Two modes, from $KVC_DAEMON_MODE ("kernel" or "memfd"); the default is
 * "kernel" when /dev/kvcache exists and we are root, else "memfd":
 *   kernel  in the test VM with kvcache.ko: the daemon is the module's
 *           helper; the test allocates, writes and seals blocks with the
 *           ioctls on its own /dev/kvcache file and STOREs them.
 *   memfd   on any host: the daemon holds the pool in a memfd that the
 *           HELLO reply passes; blocks come from ALLOC and SEAL messages.
 *
 * The daemon gets a small configuration: in memfd mode a pool of 32
 * blocks of 2 MiB; watermarks of 10% and 20% and a 100 ms check, so that
 * eviction can be driven and observed within seconds.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "kvc_client.h"
#include "kvc_ioctl.h"
#include "fastidx.h"
#include "keys.h"
#include "proto.h"

#include "kvcd_fixture.h"

TEST_F_TIMEOUT(kvcd, hello_reports_mode_and_pool, 60)
{
	const struct kvc_hello future = {
		.min_version = KVC_PROTO_VERSION_MAX + 1,
		.max_version = KVC_PROTO_VERSION_MAX + 5,
		.caps = KVC_PROTO_CAP_ALL,
	};
	struct kvcc *c = &self->c;
	struct kvcc c2;
	struct stat st;

	EXPECT_EQ(self->mode, c->hello.mode);
	EXPECT_EQ(KVC_PROTO_VERSION_MAX, c->hello.version);	/* the highest both speak */
	EXPECT_LE(1, c->hello.max_batch);
	EXPECT_GE(KVC_PROTO_MAX_STORE, c->hello.max_batch);
	ASSERT_LE(4096, self->bs);
	EXPECT_EQ(0, self->bs & (self->bs - 1));
	EXPECT_LT(0, self->nr);

	if (self->mode == KVC_PROTO_MODE_MEMFD) {
		EXPECT_EQ(KVC_PROTO_CAP_MEMFD, c->hello.caps);
		EXPECT_EQ(MEMFD_BS, self->bs);
		EXPECT_EQ(MEMFD_POOL / MEMFD_BS, self->nr);
		/* One descriptor, the pool, of the pool's size. */
		EXPECT_EQ(1, c->hello_nfds);
		ASSERT_LE(0, c->pool_fd);
		ASSERT_EQ(0, fstat(c->pool_fd, &st));
		EXPECT_EQ(self->bs * self->nr, (uint64_t)st.st_size);
		ASSERT_NE(NULL, c->pool);
		/* Mapped shared: the daemon's pool, writable. */
		c->pool[0] = 0x5a;
		c->pool[c->pool_len - 1] = 0xa5;
		EXPECT_EQ(0x5a, c->pool[0]);
		EXPECT_EQ(0xa5, c->pool[c->pool_len - 1]);
	} else {
		struct kvcache_info info = { .size = sizeof(info) };

		EXPECT_EQ(KVC_PROTO_CAP_DEVICE, c->hello.caps);
		/* No descriptor: clients map blocks through /dev/kvcache. */
		EXPECT_EQ(0, c->hello_nfds);
		EXPECT_EQ(-1, c->pool_fd);
		ASSERT_EQ(0, kvc_ioc(self->dev, KVCACHE_IOC_INFO, &info));
		EXPECT_EQ(info.block_size, self->bs);
		EXPECT_EQ(info.nr_blocks, self->nr);
	}

	/* Version ranges that do not overlap: ERROR EPROTONOSUPPORT. */
	ASSERT_EQ(0, kvcc_open(&c2, self->sock));
	EXPECT_EQ(-EPROTONOSUPPORT,
		  kvcc_call(&c2, kvc_proto_encode_hello(KVCC_TX(&c2), &future),
			    KVC_MSG_HELLO_REPLY)) TH_LOG("%s", c2.why);
	/* ... and the connection may still say HELLO properly. */
	EXPECT_EQ(0, kvcc_hello(&c2)) TH_LOG("%s", c2.why);
	EXPECT_EQ(self->nr, c2.hello.nr_blocks);
	kvcc_close(&c2);
}

/*
 * The HELLO reply's caps are "a subset of the client's"
 * (Documentation/userspace-api/protocol.md, HELLO reply): a client that offers
 * nothing, or only the other way of getting at blocks, must not be
 * told that the daemon relies on a capability it did not offer.
 */
TEST_F_TIMEOUT(kvcd, hello_reply_caps_are_a_subset_of_the_clients, 60)
{
	static const uint64_t offers[] = {
		0, KVC_PROTO_CAP_DEVICE, KVC_PROTO_CAP_MEMFD,
		KVC_PROTO_CAP_ALL, KVC_PROTO_CAP_ALL | (1ull << 40),
	};

	for (size_t i = 0; i < sizeof(offers) / sizeof(offers[0]); i++) {
		struct kvcc c2;
		int ret;

		ASSERT_EQ(0, kvcc_open(&c2, self->sock));
		ret = kvcc_hello_caps(&c2, offers[i]);
		/* Refusing a client it cannot serve is allowed too. */
		if (ret) {
			EXPECT_LT(-KVC_PROTO_ERRNO_MAX - 1, ret)
				TH_LOG("offer %#llx: %s",
				       (unsigned long long)offers[i], c2.why);
		} else {
			EXPECT_EQ(0, c2.hello.caps & ~offers[i])
				TH_LOG("offered %#llx, the reply relies on %#llx",
				       (unsigned long long)offers[i],
				       (unsigned long long)c2.hello.caps);
			EXPECT_EQ(0, c2.hello.caps & ~KVC_PROTO_CAP_ALL);
		}
		kvcc_close(&c2);
	}
}

/* ---- 2: session rules and malformed datagrams ------------------------------- */

TEST_F_TIMEOUT(kvcd, requests_before_hello_get_eproto, 60)
{
	kvc_key keys[2];
	struct kvcc c2;
	uint64_t v;

	chain_keys(self, 1, 2, keys);
	ASSERT_EQ(0, kvcc_open(&c2, self->sock));
	EXPECT_EQ(-EPROTO, kvcc_stat(&c2, "lookups", &v)) TH_LOG("%s", c2.why);
	EXPECT_EQ(-EPROTO, kvcc_lookup(&c2, self->ns, KVC_PROTO_TIERS_ALL,
				       keys[0], 2, NULL)) TH_LOG("%s", c2.why);
	EXPECT_EQ(-EPROTO, kvcc_ns_create(&c2, self->ns + 1, 0, 0, 0700))
		TH_LOG("%s", c2.why);
	/* The ERROR names the refused request. */
	EXPECT_EQ(c2.seq, c2.msg.error.bad_seq);
	EXPECT_EQ(KVC_MSG_NS_CREATE, c2.msg.error.bad_type);
	/* Nothing of it happened: after HELLO the id is still free. */
	ASSERT_EQ(0, kvcc_hello(&c2)) TH_LOG("%s", c2.why);
	EXPECT_EQ(0, kvcc_stat(&c2, "lookups", &v)) TH_LOG("%s", c2.why);
	EXPECT_EQ(0, v);
	if (geteuid() == 0) {
		EXPECT_EQ(0, ns_create(self, &c2, self->ns + 1, 0, 0, 0700))
			TH_LOG("%s", c2.why);
	} else {
		EXPECT_EQ(-EPERM, ns_create(self, &c2, self->ns + 1, 0, 0, 0700))
			TH_LOG("%s", c2.why);
	}
	kvcc_close(&c2);
}

TEST_F_TIMEOUT(kvcd, malformed_datagrams_get_errors, 60)
{
	struct kvcc *c = &self->c;
	struct kvc_error e;
	uint8_t *big = calloc(1, 70000);
	uint8_t msg[1024];
	kvc_key keys[3];
	uint32_t x = 12345;
	uint64_t v;
	int len, sent = 0;

	ASSERT_NE(NULL, big);
	chain_keys(self, 1, 3, keys);

	/* Random bytes (a first byte that cannot start the magic). */
	for (size_t i = 0; i < 100; i++) {
		x = x * 1103515245u + 12345u;
		msg[i] = (uint8_t)(x >> 16);
	}
	msg[0] = 0;
	ASSERT_EQ(0, raw_error(c, msg, 100, &e));
	EXPECT_EQ(-EPROTO, e.error);
	sent++;

	/* Wrong magic on an otherwise valid STATS. */
	len = kvc_proto_encode_stats(msg, sizeof(msg), 77);
	ASSERT_EQ(KVC_PROTO_HDR_SIZE, len);
	msg[0] ^= 0xff;
	ASSERT_EQ(0, raw_error(c, msg, (size_t)len, &e));
	EXPECT_EQ(-EPROTO, e.error);
	sent++;

	/* A valid LOOKUP cut short: the length field disagrees. */
	len = kvc_proto_encode_lookup(msg, sizeof(msg), 78, self->ns,
				      KVC_PROTO_TIERS_ALL, keys[0], 3);
	ASSERT_LT(64, len);
	ASSERT_EQ(0, raw_error(c, msg, (size_t)len - 32, &e));
	EXPECT_EQ(-EBADMSG, e.error);
	EXPECT_EQ(78, e.bad_seq);
	sent++;

	/* Cut inside the header, and shorter than the magic. */
	ASSERT_EQ(0, raw_error(c, msg, 10, &e));
	EXPECT_EQ(-EBADMSG, e.error);
	sent++;
	ASSERT_EQ(0, raw_error(c, msg, 3, &e));
	EXPECT_EQ(-EBADMSG, e.error);
	sent++;

	/* Larger than any message may be. */
	len = kvc_proto_encode_stats(big, 70000, 79);
	ASSERT_EQ(KVC_PROTO_HDR_SIZE, len);
	ASSERT_EQ(0, raw_error(c, big, 70000, &e));
	EXPECT_EQ(-EMSGSIZE, e.error);
	sent++;

	/* A version nobody speaks, and a type nobody knows. */
	len = kvc_proto_encode_stats(msg, sizeof(msg), 80);
	msg[4] = KVC_PROTO_VERSION_MAX + 1;
	ASSERT_EQ(0, raw_error(c, msg, (size_t)len, &e));
	EXPECT_EQ(-EPROTONOSUPPORT, e.error);
	EXPECT_EQ(80, e.bad_seq);
	sent++;
	len = kvc_proto_encode_stats(msg, sizeof(msg), 81);
	msg[6] = 0x42;
	ASSERT_EQ(0, raw_error(c, msg, (size_t)len, &e));
	EXPECT_EQ(-EOPNOTSUPP, e.error);
	EXPECT_EQ(81, e.bad_seq);
	sent++;

	/* The connection still works, and counted each one. */
	ASSERT_EQ(0, kvcc_stat(c, "protocol_errors", &v)) TH_LOG("%s", c->why);
	EXPECT_EQ(sent, v);
	EXPECT_EQ(0, kvcc_lookup(c, self->ns, KVC_PROTO_TIERS_ALL, keys[0], 3,
				 NULL)) TH_LOG("%s", c->why);

	/* Replies are never answered, whatever their type. */
	len = kvc_proto_encode_stats_reply(msg, sizeof(msg), 90, NULL, 0);
	ASSERT_LT(0, len);
	ASSERT_EQ(0, kvcc_send_raw(c, msg, (size_t)len));
	len = kvc_proto_encode_error(msg, sizeof(msg), -EIO, 91,
				     KVC_MSG_STATS, "from a client");
	ASSERT_LT(0, len);
	ASSERT_EQ(0, kvcc_send_raw(c, msg, (size_t)len));
	len = kvc_proto_encode_ns_create_reply(msg, sizeof(msg), 92);
	ASSERT_LT(0, len);
	ASSERT_EQ(0, kvcc_send_raw(c, msg, (size_t)len));
	EXPECT_EQ(-ETIMEDOUT, kvcc_recv_raw(c, 300));
	/* ... and the next request's reply is the next datagram. */
	EXPECT_EQ(0, kvcc_stat(c, "protocol_errors", &v)) TH_LOG("%s", c->why);
	EXPECT_EQ(sent, v);
	free(big);
}

/* ---- 3: namespaces and permissions ------------------------------------------ */

TEST_F_TIMEOUT(kvcd, ns_create_as_root, 60)
{
	struct kvcc *c = &self->c;
	kvc_key keys[2];
	struct kvcache_handle h[2];

	if (geteuid() != 0) {
		/* Not root: the daemon is not either, and nobody may create. */
		ASSERT_EQ(-EPERM, ns_create(self, c, self->ns + 1, 0, 0, 0750))
			TH_LOG("%s", c->why);
		SKIP(return, "not root: NS_CREATE is refused, as it must be");
	}
	ASSERT_EQ(0, ns_create(self, c, self->ns + 1, 0, 0, 0750))
		TH_LOG("%s", c->why);
	EXPECT_EQ(-EEXIST, ns_create(self, c, self->ns + 1, 0, 0, 0750))
		TH_LOG("%s", c->why);
	EXPECT_EQ(-EEXIST, ns_create(self, c, self->ns, 0, 0, 0777))
		TH_LOG("%s", c->why);
	/* The new namespace is usable, and separate from the first. */
	chain_keys(self, 3, 2, keys);
	ASSERT_EQ(0, store_chain(self, self->ns + 1, keys, 2, false, h))
		TH_LOG("%s", c->why);
	EXPECT_EQ(2, kvcc_lookup(c, self->ns + 1, KVC_PROTO_TIERS_ALL,
				 keys[0], 2, NULL));
	EXPECT_EQ(0, kvcc_lookup(c, self->ns, KVC_PROTO_TIERS_ALL, keys[0], 2,
				 NULL));
}

enum { NB_HELLO, NB_NS_CREATE, NB_LOOKUP_PRIVATE, NB_LOOKUP_PUBLIC, NB_STORE_PUBLIC,
       NB_FAST_MAP, NB_ALLOC_PUBLIC, NB_FAST_NS_PRIVATE, NB_FAST_NS_PUBLIC,
       NB_FAST_NS_WRITE, NB_COUNT };

static int32_t fast_ns(struct kvcc *c, uint32_t ns);

/* FAST_MAP on c: 0 with the segment in c->rx_fd, or the error. */
static int32_t fast_map(struct kvcc *c)
{
	return kvcc_call(c, kvc_proto_encode_fast_map(KVCC_TX(c)),
			 KVC_MSG_FAST_MAP_REPLY);
}

/*
 * As uid 65534, on a connection of its own: the results of HELLO and,
 * when it succeeds, of NS_CREATE, LOOKUP in our 0700 namespace and in a
 * 0755 one, STORE and ALLOC there.
 */
static int as_nobody(SELF *self, uint32_t pub, int32_t *res)
{
	int pfd[2], st;
	pid_t pid;
	ssize_t n;

	if (pipe2(pfd, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (!pid) {
		int32_t r[NB_COUNT];
		struct kvcc c;
		kvc_key keys[1];
		struct kvc_store_entry e = { .flags = KVC_PROTO_STORE_FIRST };
		struct kvcache_handle h;

		for (int i = 0; i < NB_COUNT; i++)
			r[i] = KVCC_BROKEN;
		close(pfd[0]);
		chain_keys(self, 4, 1, keys);
		memcpy(e.key, keys[0], KVCACHE_KEY_SIZE);
		if (setgroups(0, NULL) || setgid(NOBODY) || setuid(NOBODY) ||
		    kvcc_open(&c, self->sock))
			_exit(1);
		r[NB_HELLO] = kvcc_hello(&c);
		/* The fast index, even after a refused HELLO. */
		r[NB_FAST_MAP] = fast_map(&c);
		if (r[NB_HELLO])
			goto out;
		r[NB_NS_CREATE] = kvcc_ns_create(&c, pub + 1, NOBODY, NOBODY,
						 0700);
		r[NB_LOOKUP_PRIVATE] = kvcc_lookup(&c, self->ns,
						   KVC_PROTO_TIERS_ALL,
						   keys[0], 1, NULL);
		r[NB_LOOKUP_PUBLIC] = kvcc_lookup(&c, pub, KVC_PROTO_TIERS_ALL,
						  keys[0], 1, NULL);
		r[NB_STORE_PUBLIC] = kvcc_store(&c, pub, &e, 1, &r[NB_COUNT - 1]);
		r[NB_ALLOC_PUBLIC] = kvcc_alloc(&c, pub, 1, &h);
		/* The fast index: only of a namespace nobody may read. */
		r[NB_FAST_NS_PRIVATE] = fast_ns(&c, self->ns);
		r[NB_FAST_NS_PUBLIC] = fast_ns(&c, pub);
		if (!r[NB_FAST_NS_PUBLIC]) {
			void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				       MAP_SHARED, c.rx_fd, 0);

			r[NB_FAST_NS_WRITE] = p == MAP_FAILED ? -errno : 0;
		}
out:
		if (write(pfd[1], r, sizeof(r)) != sizeof(r))
			_exit(2);
		_exit(0);
	}
	close(pfd[1]);
	n = read(pfd[0], res, sizeof(int32_t) * NB_COUNT);
	close(pfd[0]);
	waitpid(pid, &st, 0);
	if (n != (ssize_t)(sizeof(int32_t) * NB_COUNT))
		return -EIO;
	return 0;
}

TEST_F_TIMEOUT(kvcd, non_root_peers_are_refused, 60)
{
	uint32_t pub = self->ns + 2;
	int32_t r[NB_COUNT];

	if (geteuid() != 0)
		SKIP(return, "needs root to run a peer as uid %d", NOBODY);
	ASSERT_EQ(0, ns_create(self, &self->c, pub, 0, 0, 0755))
		TH_LOG("%s", self->c.why);
	ASSERT_EQ(0, as_nobody(self, pub, r));
	if (self->mode == KVC_PROTO_MODE_MEMFD) {
		/*
		 * memfd mode passes the whole pool with HELLO, so only to a
		 * peer that may read and write every namespace: nobody may
		 * not touch our 0700 one, and gets neither the pool nor any
		 * answer (isolation_test checks a peer that may).
		 */
		EXPECT_EQ(-EACCES, r[NB_HELLO]);
		/* Nor the fast index of the pool's blocks and keys. */
		EXPECT_EQ(-EPROTO, r[NB_FAST_MAP]);
		EXPECT_EQ(KVCC_BROKEN, r[NB_LOOKUP_PUBLIC]);
		EXPECT_EQ(0, ns_create(self, &self->c, pub + 1, 0, 0, 0700))
			TH_LOG("%s", self->c.why);
		return;
	}
	ASSERT_EQ(0, r[NB_HELLO]);
	/* Only root creates namespaces. */
	EXPECT_EQ(-EPERM, r[NB_NS_CREATE]);
	/* 0700 root: not even a LOOKUP. */
	EXPECT_EQ(-EACCES, r[NB_LOOKUP_PRIVATE]);
	/* 0755 root: others may read, not write. */
	EXPECT_EQ(0, r[NB_LOOKUP_PUBLIC]);
	EXPECT_EQ(-EACCES, r[NB_STORE_PUBLIC]);
	EXPECT_EQ(-EOPNOTSUPP, r[NB_ALLOC_PUBLIC]);
	/*
	 * Kernel mode has no index of the whole pool, only one per
	 * namespace, for those who may read it; and nobody writes it.
	 */
	EXPECT_EQ(-EOPNOTSUPP, r[NB_FAST_MAP]);
	EXPECT_EQ(-EACCES, r[NB_FAST_NS_PRIVATE]);
	EXPECT_EQ(0, r[NB_FAST_NS_PUBLIC]);
	EXPECT_EQ(-EPERM, r[NB_FAST_NS_WRITE]);
	/* The refused NS_CREATE created nothing: root may still take it. */
	EXPECT_EQ(0, ns_create(self, &self->c, pub + 1, 0, 0, 0700))
		TH_LOG("%s", self->c.why);
}

/* FAST_NS on c: 0 with namespace ns's segment in c->rx_fd, or the error. */
static int32_t fast_ns(struct kvcc *c, uint32_t ns)
{
	return kvcc_call(c, kvc_proto_encode_fast_ns(KVCC_TX(c), ns),
			 KVC_MSG_FAST_NS_REPLY);
}

/*
 * A segment passed in c->rx_fd: nobody but kvcached can write it (no
 * writable mapping, no write(2)), its header names this pool, and it maps
 * read-only.
 */
static void check_segment(struct __test_metadata *_metadata, SELF *self,
			  struct kvcc *c)
{
	uint32_t hdr[4];
	struct stat st;
	void *p;

	ASSERT_LE(0, c->rx_fd);
	ASSERT_EQ(0, fstat(c->rx_fd, &st));
	EXPECT_LE((off_t)(64 + 64 * self->nr), st.st_size);
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, c->rx_fd, 0);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EPERM, errno);
	EXPECT_GT(0, pwrite(c->rx_fd, "x", 1, 0));
	EXPECT_NE(0, ftruncate(c->rx_fd, 0));
	ASSERT_EQ((ssize_t)sizeof(hdr), pread(c->rx_fd, hdr, sizeof(hdr), 0));
	EXPECT_EQ(0x4946564Bu, hdr[0]);		/* "KVFI" */
	EXPECT_EQ(1u, hdr[1]);
	EXPECT_EQ(self->nr, hdr[2]);
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, c->rx_fd, 0);
	ASSERT_NE(MAP_FAILED, p);
	munmap(p, (size_t)st.st_size);
}

/*
 * The fast indexes: FAST_MAP (memfd mode: the pool's) and FAST_NS (kernel
 * mode: one namespace's) hand out a segment with the reply that nobody
 * but kvcached can write; not before HELLO, not in a session of an older
 * version, and each only in its mode. TOUCH is never answered, whatever
 * its handles, and leaves the connection in step (kernel mode too: its
 * clients find blocks themselves there as well).
 */
TEST_F_TIMEOUT(kvcd, fast_map_hands_out_a_read_only_index, 60)
{
	const struct kvc_hello v3 = {
		.min_version = 1, .max_version = 3, .caps = KVC_PROTO_CAP_ALL,
	};
	const struct kvc_hello v4 = {
		.min_version = 1, .max_version = 4, .caps = KVC_PROTO_CAP_ALL,
	};
	const struct kvcache_handle bogus[2] = { { 1u << 30, 1 }, { 0, 77 } };
	struct kvc_touch t = { .count = 2, .lookups = 1, .lookup_keys = 3,
			       .hit_keys = 2 };
	struct kvcc *c = &self->c;
	bool memfd = self->mode == KVC_PROTO_MODE_MEMFD;
	uint64_t touches, lookups, clookups, fast;
	struct kvcc c2;

	ASSERT_EQ(0, kvcc_open(&c2, self->sock));
	EXPECT_EQ(-EPROTO, fast_map(&c2)) TH_LOG("%s", c2.why);
	EXPECT_EQ(-EPROTO, fast_ns(&c2, self->ns)) TH_LOG("%s", c2.why);
	kvcc_close(&c2);
	if (memfd) {
		ASSERT_EQ(0, fast_map(c)) TH_LOG("%s", c->why);
		check_segment(_metadata, self, c);
		EXPECT_EQ(-EOPNOTSUPP, fast_ns(c, self->ns))
			TH_LOG("%s", c->why);
	} else {
		EXPECT_EQ(-EOPNOTSUPP, fast_map(c)) TH_LOG("%s", c->why);
		ASSERT_EQ(0, fast_ns(c, self->ns)) TH_LOG("%s", c->why);
		check_segment(_metadata, self, c);
		/* A namespace nobody made: nothing to read. */
		EXPECT_EQ(-EACCES, fast_ns(c, KVCACHE_NS_MAX))
			TH_LOG("%s", c->why);
	}

	/* A session of version 3 has no FAST_MAP, one of 4 no FAST_NS. */
	ASSERT_EQ(0, kvcc_open(&c2, self->sock));
	ASSERT_EQ(0, kvcc_call(&c2, kvc_proto_encode_hello(KVCC_TX(&c2), &v3),
			       KVC_MSG_HELLO_REPLY)) TH_LOG("%s", c2.why);
	EXPECT_EQ(-EPROTONOSUPPORT, fast_map(&c2)) TH_LOG("%s", c2.why);
	kvcc_close(&c2);
	ASSERT_EQ(0, kvcc_open(&c2, self->sock));
	ASSERT_EQ(0, kvcc_call(&c2, kvc_proto_encode_hello(KVCC_TX(&c2), &v4),
			       KVC_MSG_HELLO_REPLY)) TH_LOG("%s", c2.why);
	EXPECT_EQ(-EPROTONOSUPPORT, fast_ns(&c2, self->ns))
		TH_LOG("%s", c2.why);
	kvcc_close(&c2);

	/*
	 * TOUCH: no reply, even for handles that name nothing; its counts
	 * reach STATS as the client's (not the daemon's own lookups), its
	 * bogus handles count no hit.
	 */
	touches = kvcc_stat1(c, "touches");
	lookups = kvcc_stat1(c, "lookups");
	clookups = kvcc_stat1(c, "client_lookups");
	fast = kvcc_stat1(c, "fast_hits");
	ASSERT_EQ(0, kvcc_send_raw(c, c->tx,
				   (size_t)kvc_proto_encode_touch(KVCC_TX(c),
								  &t, bogus)));
	EXPECT_EQ(touches + 1, kvcc_stat1(c, "touches"));
	EXPECT_EQ(lookups, kvcc_stat1(c, "lookups"));
	EXPECT_EQ(clookups + 1, kvcc_stat1(c, "client_lookups"));
	EXPECT_EQ(fast, kvcc_stat1(c, "fast_hits"));
}

/*
 * TOUCH n handles, h[0..nh-1] over and over, reporting these lookups:
 * sent, never answered.
 */
static int send_touches(struct kvcc *c, const struct kvcache_handle *h,
			uint32_t nh, uint32_t n, uint32_t lookups,
			uint32_t keys)
{
	static struct kvcache_handle hs[KVC_PROTO_MAX_BATCH];
	const struct kvc_touch t = {
		.count = n, .lookups = lookups, .lookup_keys = keys,
		.hit_keys = keys,
	};
	int len;

	for (uint32_t i = 0; i < n; i++)
		hs[i] = h[i % nh];
	len = kvc_proto_encode_touch(KVCC_TX(c), &t, hs);
	return len < 0 ? len : kvcc_send_raw(c, c->tx, (size_t)len);
}

static int send_touch(struct kvcc *c, struct kvcache_handle h, uint32_t n,
		      uint32_t lookups, uint32_t keys)
{
	return send_touches(c, &h, 1, n, lookups, keys);
}

/*
 * A TOUCH moves counters and policy at most once per block: one readable
 * block named 1024 times is one hit (and one policy access, which goes
 * with it), in each message; the lookup counts a client reports are
 * clamped (no more keys than a TOUCH carries handles) and kept apart from
 * the daemon's own.
 */
TEST_F_TIMEOUT(kvcd, touch_counts_each_block_once_per_message, 60)
{
	struct kvcc *c = &self->c;
	struct kvcache_handle h[2];
	kvc_key a[2];
	uint64_t fast, touches, lookups, keys, hits, cl, ck, ch;

	chain_keys(self, 41, 2, a);
	ASSERT_EQ(0, store_chain(self, self->ns, a, 2, false, h))
		TH_LOG("%s", c->why);
	fast = kvcc_stat1(c, "fast_hits");
	touches = kvcc_stat1(c, "touches");
	lookups = kvcc_stat1(c, "lookups");
	keys = kvcc_stat1(c, "lookup_keys");
	hits = kvcc_stat1(c, "hit_keys");
	cl = kvcc_stat1(c, "client_lookups");
	ck = kvcc_stat1(c, "client_lookup_keys");
	ch = kvcc_stat1(c, "client_hit_keys");
	EXPECT_NE(UINT64_MAX, cl);

	ASSERT_EQ(0, send_touch(c, h[0], KVC_PROTO_MAX_BATCH, UINT32_MAX,
				UINT32_MAX));
	/* STATS is answered after the TOUCH sent before it was read. */
	EXPECT_EQ(touches + 1, kvcc_stat1(c, "touches"));
	EXPECT_EQ(fast + 1, kvcc_stat1(c, "fast_hits"));
	EXPECT_EQ(lookups, kvcc_stat1(c, "lookups"));
	EXPECT_EQ(keys, kvcc_stat1(c, "lookup_keys"));
	EXPECT_EQ(hits, kvcc_stat1(c, "hit_keys"));
	EXPECT_EQ(cl + KVC_PROTO_MAX_BATCH, kvcc_stat1(c, "client_lookups"));
	EXPECT_EQ(ck + KVC_PROTO_MAX_BATCH,
		  kvcc_stat1(c, "client_lookup_keys"));
	EXPECT_EQ(ch + KVC_PROTO_MAX_BATCH, kvcc_stat1(c, "client_hit_keys"));

	/* Once per message: the next one counts it again, once. */
	ASSERT_EQ(0, send_touch(c, h[0], 3, 0, 0));
	EXPECT_EQ(fast + 2, kvcc_stat1(c, "fast_hits"));
	EXPECT_EQ(ck + KVC_PROTO_MAX_BATCH,
		  kvcc_stat1(c, "client_lookup_keys"));
	/* Two blocks, interleaved 512 times each: two hits. */
	ASSERT_EQ(0, send_touches(c, h, 2, KVC_PROTO_MAX_BATCH, 0, 0));
	EXPECT_EQ(fast + 4, kvcc_stat1(c, "fast_hits"));
}

/*
 * [daemon] touch_rate: a connection's TOUCHes beyond its budget (one
 * second's worth, at least one full TOUCH) are dropped, and counted.
 */
TEST_F_TIMEOUT(kvcd, touch_rate_drops_a_flood, 60)
{
	struct kvcc *c = &self->c;
	struct kvcache_handle h[1];
	uint64_t fast, touches, dropped;
	kvc_key a[1];
	char why[256];

	ASSERT_EQ(0, restart(self, "[daemon]\ntouch_rate = 1\n", why,
			     sizeof(why))) TH_LOG("%s", why);
	chain_keys(self, 43, 1, a);
	ASSERT_EQ(0, store_chain(self, self->ns, a, 1, false, h))
		TH_LOG("%s", c->why);
	fast = kvcc_stat1(c, "fast_hits");
	touches = kvcc_stat1(c, "touches");
	dropped = kvcc_stat1(c, "touches_dropped");
	ASSERT_NE(UINT64_MAX, dropped);
	for (int i = 0; i < 6; i++)
		ASSERT_EQ(0, send_touch(c, h[0], KVC_PROTO_MAX_BATCH, 0, 0));
	/* 1024 tokens, 1 more a second: the first passes, no other. */
	EXPECT_EQ(touches + 1, kvcc_stat1(c, "touches"));
	EXPECT_EQ(dropped + 5, kvcc_stat1(c, "touches_dropped"));
	EXPECT_EQ(fast + 1, kvcc_stat1(c, "fast_hits"));
}

/*
 * Seconds for k TOUCHes of 1024 copies of h and the reply to a STATS
 * sent after them: the daemon reads a connection's messages in order.
 */
static double touch_time(struct kvcc *c, struct kvcache_handle h, int k)
{
	double t0 = now_s();

	for (int i = 0; i < k; i++)
		if (send_touch(c, h, KVC_PROTO_MAX_BATCH, 0, 0))
			return -1;
	if (kvcc_stat1(c, "touches") == UINT64_MAX)
		return -1;
	return now_s() - t0;
}

/*
 * Seconds for a STORE in ns of KVC_PROTO_MAX_STORE entries naming h (a
 * free block: every entry is refused, after checking h twice).
 */
static double store_time(struct kvcc *c, struct kvcache_handle h, int k)
{
	static struct kvc_store_entry e[KVC_PROTO_MAX_STORE];
	static int32_t st[KVC_PROTO_MAX_STORE];
	uint32_t ns = (uint32_t)k;
	double t0;

	for (uint32_t i = 0; i < KVC_PROTO_MAX_STORE; i++) {
		memset(&e[i], 0, sizeof(e[i]));
		e[i].key[0] = (uint8_t)i;
		e[i].key[1] = (uint8_t)(i >> 8);
		e[i].handle = h;
		e[i].flags = KVC_PROTO_STORE_FIRST;
	}
	t0 = now_s();
	if (kvcc_store(c, ns, e, KVC_PROTO_MAX_STORE, st))
		return -1;
	for (uint32_t i = 0; i < KVC_PROTO_MAX_STORE; i++)
		if (!st[i])
			return -1;
	return now_s() - t0;
}

/* The best of 7: TOUCH (ns 0) or STORE in ns. */
static double best_time(struct kvcc *c, struct kvcache_handle h, uint32_t ns)
{
	double best = -1;

	for (int i = 0; i < 7; i++) {
		double t = ns ? store_time(c, h, (int)ns) : touch_time(c, h, 2);

		if (t < 0)
			return -1;
		if (best < 0 || t < best)
			best = t;
	}
	return best;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The median round trip of n STATS on c (n <= 63). */
static double median_stats_rtt(struct kvcc *c, int n)
{
	double t[63];

	for (int i = 0; i < n; i++) {
		double t0 = now_s();

		if (kvcc_stat1(c, "touches") == UINT64_MAX)
			return -1;
		t[i] = now_s() - t0;
	}
	qsort(t, (size_t)n, sizeof(t[0]), cmp_double);
	return t[n / 2];
}

/*
 * The time a TOUCH takes does not depend on other tenants' blocks: a
 * handle of a free block costs the same whether another tenant's sealed
 * block lies right after it or none does (checking it once walked the
 * pool to the next sealed block: a stall, and a clock telling where
 * other tenants' blocks are). STORE checks its handles the same way.
 * And another client's round trip stays flat while a peer floods TOUCH.
 * A pool of 256 Ki blocks makes a walk to its end stand out; compared
 * as ratios, measured side by side.
 */
TEST_F_TIMEOUT(kvcd, touch_time_does_not_depend_on_other_blocks, 300)
{
	struct kvcc *c = &self->c, c2;
	struct kvcache_handle h[2], lo, probe;
	double with, without, swith, swithout, idle, busy;
	uint32_t other, nr;
	kvc_key a[1], b[1];
	int32_t st[1];
	char why[256];
	pid_t pid;

	if (self->mode != KVC_PROTO_MODE_MEMFD)
		SKIP(return, "memfd mode sizes its own pool; the module's is what it is");
	self->memfd_size = 1ull << 30;
	self->memfd_bs = 4096;
	ASSERT_EQ(0, restart(self, NULL, why, sizeof(why))) TH_LOG("%s", why);
	nr = (uint32_t)c->hello.nr_blocks;
	ASSERT_LE(1u << 18, nr);
	other = self->ns;
	if (geteuid() == 0) {
		ASSERT_EQ(0, ns_extra(self, c, 1)) TH_LOG("%s", c->why);
		other = self->ns + 1;
	}
	chain_keys(self, 61, 1, a);
	chain_keys(self, 62, 1, b);
	ASSERT_EQ(0, store_chain(self, other, a, 1, false, &h[0]))
		TH_LOG("%s", c->why);
	ASSERT_EQ(0, store_chain(self, other, b, 1, false, &h[1]))
		TH_LOG("%s", c->why);
	lo = h[0].index < h[1].index ? h[0] : h[1];
	ASSERT_GT(nr / 2, lo.index);
	ASSERT_GT(nr / 64, h[0].index > h[1].index ?
		  h[0].index - h[1].index : h[1].index - h[0].index);
	/* The lower one goes: its index is free, the other sealed after it. */
	ASSERT_EQ(0, kvcc_evict(c, other, lo.index == h[0].index ? a[0] : b[0],
				1, st)) TH_LOG("%s", c->why);
	ASSERT_EQ(0, st[0]);
	probe = lo;

	with = best_time(c, probe, 0);
	ASSERT_LT(0, with);
	swith = best_time(c, probe, self->ns);
	ASSERT_LT(0, swith);
	/* Now nothing is sealed after it, to the end of the pool. */
	ASSERT_EQ(0, kvcc_evict(c, other, lo.index == h[0].index ? b[0] : a[0],
				1, st)) TH_LOG("%s", c->why);
	ASSERT_EQ(0, st[0]);
	without = best_time(c, probe, 0);
	ASSERT_LT(0, without);
	swithout = best_time(c, probe, self->ns);
	ASSERT_LT(0, swithout);
	EXPECT_GT(4 * with, without)
		TH_LOG("TOUCH: %.6f s with another tenant's block after the handle, %.6f s without",
		       with, without);
	EXPECT_GT(4 * without, with)
		TH_LOG("TOUCH: %.6f s with another tenant's block after the handle, %.6f s without",
		       with, without);
	EXPECT_GT(4 * swith, swithout)
		TH_LOG("STORE: %.6f s with another tenant's block after the handle, %.6f s without",
		       swith, swithout);
	EXPECT_GT(4 * swithout, swith)
		TH_LOG("STORE: %.6f s with another tenant's block after the handle, %.6f s without",
		       swith, swithout);

	/* Another client's STATS, alone and while a peer floods TOUCH. */
	ASSERT_EQ(0, kvcc_open(&c2, self->sock));
	ASSERT_EQ(0, kvcc_hello(&c2)) TH_LOG("%s", c2.why);
	idle = median_stats_rtt(&c2, 31);
	ASSERT_LT(0, idle);
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		struct kvcc f;

		if (kvcc_open(&f, self->sock) || kvcc_hello(&f))
			_exit(1);
		while (!send_touch(&f, probe, KVC_PROTO_MAX_BATCH, 0, 0))
			;
		_exit(0);
	}
	msleep(100);
	busy = median_stats_rtt(&c2, 31);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	kvcc_close(&c2);
	ASSERT_LT(0, busy);
	TH_LOG("TOUCH %.6f/%.6f s, STORE %.6f/%.6f s (with/without); STATS %.6f s alone, %.6f s in a flood",
	       with, without, swith, swithout, idle, busy);
	EXPECT_GT(50 * idle, busy)
		TH_LOG("STATS round trip: %.6f s alone, %.6f s during a TOUCH flood",
		       idle, busy);
}

/* LOOKUP in ns from a child running as nobody with these extra groups. */
static int32_t lookup_as_nobody(SELF *self, uint32_t ns, const gid_t *groups,
				size_t ngroups)
{
	int32_t r = KVCC_BROKEN;
	int pfd[2], st;
	pid_t pid;

	if (pipe2(pfd, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (!pid) {
		struct kvcc c;
		kvc_key key[1];

		close(pfd[0]);
		chain_keys(self, 5, 1, key);
		if (setgroups(ngroups, groups) || setgid(NOBODY) ||
		    setuid(NOBODY) || kvcc_open(&c, self->sock) ||
		    kvcc_hello(&c))
			_exit(1);
		r = kvcc_lookup(&c, ns, KVC_PROTO_TIERS_ALL, key[0], 1, NULL);
		_exit(write(pfd[1], &r, sizeof(r)) == sizeof(r) ? 0 : 2);
	}
	close(pfd[1]);
	if (read(pfd[0], &r, sizeof(r)) != sizeof(r))
		r = KVCC_BROKEN;
	close(pfd[0]);
	waitpid(pid, &st, 0);
	return r;
}

/* Group access counts supplementary groups (SO_PEERGROUPS), not only the
 * primary one. */
TEST_F_TIMEOUT(kvcd, supplementary_groups_grant_group_access, 60)
{
	const gid_t tenant = 4242, other = 4343;
	uint32_t ns = self->ns + 3;

	if (geteuid() != 0)
		SKIP(return, "needs root to run a peer as uid %d", NOBODY);
	/* memfd mode: nobody's HELLO is refused (our namespace is 0700);
	 * isolation_test's memfd_pool_one_trust_domain covers the groups. */
	if (self->mode == KVC_PROTO_MODE_MEMFD)
		SKIP(return, "memfd mode: a peer without rw on every namespace gets no HELLO");
	ASSERT_EQ(0, ns_create(self, &self->c, ns, 0, tenant, 0750))
		TH_LOG("%s", self->c.why);
	EXPECT_EQ(0, lookup_as_nobody(self, ns, &tenant, 1));
	EXPECT_EQ(-EACCES, lookup_as_nobody(self, ns, &other, 1));
	EXPECT_EQ(-EACCES, lookup_as_nobody(self, ns, NULL, 0));
}

/* ---- 4: STORE and prefix LOOKUP ------------------------------------------- */

TEST_F_TIMEOUT(kvcd, store_and_prefix_lookup, 60)
{
	struct kvcc *c = &self->c;
	struct kvc_lookup_entry le[8];
	struct kvcache_handle h[8], hw, ho, hd;
	kvc_key a[8], b[8], other[2];
	uint32_t tok[8 * TPB];
	int32_t st[1];

	/* A chain of 8: the first block FIRST, each next one under the last. */
	chain_keys(self, 1, 8, a);
	ASSERT_EQ(0, store_chain(self, self->ns, a, 8, false, h))
		TH_LOG("%s", c->why);
	ASSERT_EQ(8, kvcc_lookup(c, self->ns, KVC_PROTO_TIERS_ALL, a[0], 8, le))
		TH_LOG("%s", c->why);
	for (int i = 0; i < 8; i++) {
		EXPECT_TRUE(le[i].tiers & KVC_PROTO_TIER_POOL);
		EXPECT_TRUE(same_handle(h[i], le[i].handle))
			TH_LOG("block %d: stored %u/%u, lookup says %u/%u", i,
			       h[i].index, h[i].gen, le[i].handle.index,
			       le[i].handle.gen);
	}
	/* The pool tier alone says the same. */
	EXPECT_EQ(8, kvcc_lookup(c, self->ns, KVC_PROTO_TIER_POOL, a[0], 8,
				 NULL));
	/* A prefix of the chain. */
	EXPECT_EQ(3, kvcc_lookup(c, self->ns, KVC_PROTO_TIERS_ALL, a[0], 3,
				 NULL));

	/* The same tokens up to block 5, then different: 5 blocks match. */
	for (uint32_t i = 0; i < 8 * TPB; i++)
		tok[i] = 1 * 100003u + i;
	tok[5 * TPB + 3] ^= 0xdead;
	ASSERT_EQ(8, kvc_chain_keys(self->seed, tok, 8 * TPB, TPB, b, 8));
	ASSERT_EQ(0, memcmp(a[4], b[4], KVCACHE_KEY_SIZE));
	ASSERT_NE(0, memcmp(a[5], b[5], KVCACHE_KEY_SIZE));
	EXPECT_EQ(5, kvcc_lookup(c, self->ns, KVC_PROTO_TIERS_ALL, b[0], 8, le));
	for (int i = 0; i < 5; i++) {
		EXPECT_TRUE(same_handle(h[i], le[i].handle));
	}

	/* An unknown first key: nothing, however much follows. */
	chain_keys(self, 2, 2, other);
	memcpy(b[0], other[0], KVCACHE_KEY_SIZE);
	memcpy(b[1], a[1], KVCACHE_KEY_SIZE);
	EXPECT_EQ(0, kvcc_lookup(c, self->ns, KVC_PROTO_TIERS_ALL, b[0], 8,
				 NULL));
	/* A chain starts at a first block: a[1..] alone matches nothing. */
	EXPECT_EQ(0, kvcc_lookup(c, self->ns, KVC_PROTO_TIERS_ALL, a[1], 7,
				 NULL));
	/* Another namespace does not see it. */
	ASSERT_EQ(0, ns_extra(self, c, 1)) TH_LOG("%s", c->why);
	EXPECT_EQ(0, kvcc_lookup(c, self->ns + 1, KVC_PROTO_TIERS_ALL, a[0], 8,
				 NULL));

	/* A block sealed under one key, stored as another: EINVAL. */
	ASSERT_EQ(0, make_blocks(self, c, self->dev, self->ns, &other[0], 1,
				 false, &hw)) TH_LOG("%s", c->why);
	EXPECT_EQ(-EINVAL, store_blocks(c, self->ns, &other[1], NULL, &hw, 1,
					st)) TH_LOG("%s", c->why);
	/* ... or in another namespace than it was sealed in: EINVAL too. */
	EXPECT_EQ(-EINVAL, store_blocks(c, self->ns + 1, &other[0], NULL, &hw,
					1, st)) TH_LOG("%s", c->why);
	EXPECT_EQ(0, kvcc_lookup(c, self->ns, KVC_PROTO_TIERS_ALL, other[1], 1,
				 NULL));

	/* A parent that was never stored: ENOENT. */
	ASSERT_EQ(0, make_blocks(self, c, self->dev, self->ns, &other[1], 1,
				 false, &ho)) TH_LOG("%s", c->why);
	EXPECT_EQ(-ENOENT, store_blocks(c, self->ns, &other[1], other[0], &ho,
					1, st)) TH_LOG("%s", c->why);
	EXPECT_EQ(0, kvcc_lookup(c, self->ns, KVC_PROTO_TIERS_ALL, other[0], 2,
				 NULL));

	/* The same key again, from another block or the same one: EEXIST. */
	ASSERT_EQ(0, make_blocks(self, c, self->dev, self->ns, &a[0], 1,
				 false, &hd)) TH_LOG("%s", c->why);
	EXPECT_EQ(-EEXIST, store_blocks(c, self->ns, &a[0], NULL, &hd, 1, st))
		TH_LOG("%s", c->why);
	EXPECT_EQ(-EEXIST, store_blocks(c, self->ns, &a[2], a[1], &h[2], 1, st))
		TH_LOG("%s", c->why);
	/* ... and the chain still points at the first copies. */
	ASSERT_EQ(8, kvcc_lookup(c, self->ns, KVC_PROTO_TIERS_ALL, a[0], 8, le));
	for (int i = 0; i < 8; i++) {
		EXPECT_TRUE(same_handle(h[i], le[i].handle));
	}

	/* Once the parent is stored, the refused child goes under it. */
	EXPECT_EQ(0, store_blocks(c, self->ns, &other[0], NULL, &hw, 1, st))
		TH_LOG("%s", c->why);
	EXPECT_EQ(0, store_blocks(c, self->ns, &other[1], other[0], &ho, 1, st))
		TH_LOG("%s", c->why);
	EXPECT_EQ(2, kvcc_lookup(c, self->ns, KVC_PROTO_TIERS_ALL, other[0], 2,
				 NULL));
}

/* ---- 5: LOAD, pins and RELEASE ---------------------------------------------- */

TEST_F_TIMEOUT(kvcd, load_returns_handles_of_present_keys, 60)
{
	struct kvcc *c = &self->c;
	struct kvc_load_result res[5];
	struct kvcache_handle h[4], stale;
	struct kvc_seal_entry se = { 0 };
	kvc_key keys[5], two[2];
	int32_t st[4];

	chain_keys(self, 1, 4, keys);
	chain_keys(self, 2, 1, &keys[4]);	/* never stored */
	ASSERT_EQ(0, store_chain(self, self->ns, keys, 4, false, h))
		TH_LOG("%s", c->why);
	ASSERT_EQ(0, kvcc_load(c, self->ns, keys[0], 5, res))
		TH_LOG("%s", c->why);
	for (int i = 0; i < 4; i++) {
		EXPECT_EQ(0, res[i].status);
		EXPECT_TRUE(same_handle(h[i], res[i].handle));
	}
	EXPECT_EQ(-ENOENT, res[4].status);
	EXPECT_EQ(0, res[4].handle.index);
	EXPECT_EQ(0, res[4].handle.gen);
	/* Each key on its own: order and gaps do not matter to LOAD. */
	memcpy(two[0], keys[4], KVCACHE_KEY_SIZE);
	memcpy(two[1], keys[2], KVCACHE_KEY_SIZE);
	ASSERT_EQ(0, kvcc_load(c, self->ns, two[0], 2, res))
		TH_LOG("%s", c->why);
	EXPECT_EQ(-ENOENT, res[0].status);
	EXPECT_EQ(0, res[1].status);
	EXPECT_TRUE(same_handle(h[2], res[1].handle));

	if (self->mode == KVC_PROTO_MODE_MEMFD) {
		/* The blocks hold what was written. */
		for (int i = 0; i < 4; i++) {
			EXPECT_TRUE(block_ok(c->pool +
					     (size_t)h[i].index * self->bs,
					     keys[i]));
		}
		/* One pin per LOAD: block 2 has two, the others one. */
		ASSERT_EQ(0, kvcc_release(c, h, 4, st)) TH_LOG("%s", c->why);
		for (int i = 0; i < 4; i++) {
			EXPECT_EQ(0, st[i]);
		}
		ASSERT_EQ(0, kvcc_release(c, &h[2], 1, st));
		EXPECT_EQ(0, st[0]);
		/* Nothing left to release: EINVAL, as the kernel's UNPIN. */
		ASSERT_EQ(0, kvcc_release(c, h, 4, st)) TH_LOG("%s", c->why);
		for (int i = 0; i < 4; i++) {
			EXPECT_EQ(-EINVAL, st[i]);
		}
		stale = h[0];
		stale.gen++;
		ASSERT_EQ(0, kvcc_release(c, &stale, 1, st));
		EXPECT_EQ(-ESTALE, st[0]);
	} else {
		/* The client pins with its own file, and reads the block. */
		for (int i = 0; i < 4; i++) {
			uint8_t *p;

			ASSERT_EQ(0, kvc_pin(self->dev, h[i]));
			p = kvc_map(self->dev, h[i].index, self->bs, PROT_READ);
			ASSERT_NE(NULL, p);
			EXPECT_TRUE(block_ok(p, keys[i]));
			munmap(p, self->bs);
			ASSERT_EQ(0, kvc_unpin(self->dev, h[i]));
		}
		/* Pins are the kernel's business here; so are ALLOC and SEAL. */
		EXPECT_EQ(-EOPNOTSUPP, kvcc_release(c, h, 4, st))
			TH_LOG("%s", c->why);
		EXPECT_EQ(-EOPNOTSUPP, kvcc_alloc(c, self->ns, 1, &stale))
			TH_LOG("%s", c->why);
		se.handle = h[0];
		se.payload_len = PAYLOAD;
		memcpy(se.key, keys[0], KVCACHE_KEY_SIZE);
		EXPECT_EQ(-EOPNOTSUPP, kvcc_seal(c, &se, 1, st))
			TH_LOG("%s", c->why);
	}
}

/*
 * One chain that takes the pool below the low watermark, pinned: the
 * daemon must leave it alone until the last pin goes. In memfd mode the
 * pins are the SEAL's KEEP_PIN and the LOAD's, dropped by two RELEASEs;
 * in kernel mode the seal's pin on our file, dropped with UNPIN.
 */
TEST_F_TIMEOUT(kvcd, pinned_blocks_are_not_evicted_until_released, 120)
{
	struct kvcc *c = &self->c;
	uint32_t n = blocks_to_pressure(self);
	struct kvc_load_result *res;
	struct kvcache_handle *h;
	kvc_key *keys;
	uint64_t ev;

	ASSERT_LE(2, n);
	ASSERT_GE(KVC_PROTO_MAX_STORE, n);
	keys = calloc(n, sizeof(*keys));
	h = calloc(n, sizeof(*h));
	res = calloc(n, sizeof(*res));
	ASSERT_TRUE(keys && h && res);
	chain_keys(self, 7, n, keys);
	ASSERT_EQ(0, store_chain(self, self->ns, keys, n, true, h))
		TH_LOG("%s", c->why);
	ASSERT_EQ(0, kvcc_load(c, self->ns, keys[0], n, res))
		TH_LOG("%s", c->why);
	for (uint32_t i = 0; i < n; i++) {
		EXPECT_EQ(0, res[i].status);
		EXPECT_TRUE(same_handle(h[i], res[i].handle));
	}

	/* Below the low watermark for 10 checks, and nothing evicted. */
	msleep(1000);
	EXPECT_GT(low_blocks(self), kvcc_stat1(c, "pool_free"));
	EXPECT_EQ(0, kvcc_stat1(c, "evictions"));
	EXPECT_EQ(n, kvcc_lookup(c, self->ns, KVC_PROTO_TIERS_ALL, keys[0], n,
				 NULL));

	if (self->mode == KVC_PROTO_MODE_MEMFD) {
		/* One of the two pins goes: the LOAD's pin still holds. */
		ASSERT_EQ(0, unpin_blocks(self, h, n)) TH_LOG("%s", c->why);
		msleep(1000);
		EXPECT_EQ(0, kvcc_stat1(c, "evictions"));
		EXPECT_EQ(n, kvcc_lookup(c, self->ns, KVC_PROTO_TIERS_ALL,
					 keys[0], n, NULL));
	}
	/* The last pin goes: now the daemon evicts, from the chain's end. */
	ASSERT_EQ(0, unpin_blocks(self, h, n)) TH_LOG("%s", c->why);
	ev = wait_evictions(c, 0, 30);
	ASSERT_NE(UINT64_MAX, ev);
	ASSERT_LT(0, ev);
	EXPECT_EQ(n - ev, kvcc_lookup(c, self->ns, KVC_PROTO_TIERS_ALL,
				      keys[0], n, NULL));
	EXPECT_LE(high_blocks(self), kvcc_stat1(c, "pool_free"));
	free(keys);
	free(h);
	free(res);
}

/* ---- 6: eviction, leaf first ------------------------------------------------ */

#define EVICT_CHAIN	4

TEST_F_TIMEOUT(kvcd, eviction_is_leaf_first, 120)
{
	struct kvcc *c = &self->c;
	uint32_t total = blocks_to_pressure(self), nch, missing = 0, shorter = 0;
	struct kvc_load_result res[EVICT_CHAIN];
	uint32_t last_short = 0, partial = 0, last_partial = 0;
	struct kvcache_handle *h;
	kvc_key *keys;
	uint64_t ev;

	ASSERT_LE(2 * EVICT_CHAIN, total);
	nch = (total + EVICT_CHAIN - 1) / EVICT_CHAIN;
	keys = calloc((size_t)nch * EVICT_CHAIN, sizeof(*keys));
	h = calloc((size_t)nch * EVICT_CHAIN, sizeof(*h));
	ASSERT_TRUE(keys && h);
	/* Several chains, one after another, until the pool runs low. */
	for (uint32_t ch = 0; ch < nch; ch++) {
		uint32_t len = total - ch * EVICT_CHAIN;
		size_t at = (size_t)ch * EVICT_CHAIN;

		if (len > EVICT_CHAIN)
			len = EVICT_CHAIN;
		chain_keys(self, 100 + ch, len, &keys[at]);
		ASSERT_EQ(0, store_chain(self, self->ns, &keys[at], len, false,
					 &h[at])) TH_LOG("chain %u: %s", ch, c->why);
	}
	ev = wait_evictions(c, 0, 30);
	ASSERT_NE(UINT64_MAX, ev);
	ASSERT_LT(0, ev) TH_LOG("no eviction within 30 s");

	/*
	 * LOAD looks at every key on its own (LOOKUP stops at the first
	 * miss, so it cannot show a gap): what is left of each chain must
	 * be a prefix of it.
	 */
	for (uint32_t ch = 0; ch < nch; ch++) {
		uint32_t len = total - ch * EVICT_CHAIN, present = 0;
		size_t at = (size_t)ch * EVICT_CHAIN;

		if (len > EVICT_CHAIN)
			len = EVICT_CHAIN;
		ASSERT_EQ(0, kvcc_load(c, self->ns, keys[at], len, res))
			TH_LOG("%s", c->why);
		while (present < len && !res[present].status) {
			EXPECT_TRUE(same_handle(h[at + present],
						res[present].handle));
			present++;
		}
		for (uint32_t i = present; i < len; i++) {
			EXPECT_EQ(-ENOENT, res[i].status)
				TH_LOG("chain %u: block %u is missing, block %u is not",
				       ch, present, i);
		}
		EXPECT_EQ(present, kvcc_lookup(c, self->ns, KVC_PROTO_TIERS_ALL,
					       keys[at], len, NULL));
		missing += len - present;
		shorter += present < len;
		if (present < len)
			last_short = ch;
		if (present && present < len) {
			partial++;
			last_partial = ch;
		}
		if (present && self->mode == KVC_PROTO_MODE_MEMFD) {
			EXPECT_EQ(0, unpin_blocks(self, &h[at], present));
		}
	}
	EXPECT_LT(0, shorter);
	EXPECT_EQ(ev, missing);
	/*
	 * Oldest first, as "lru" means it: a chain's blocks are all older
	 * than the next chain's, and a parent is a candidate once its leaf
	 * is gone, so the oldest chains went whole and at most the last of
	 * them in part. Taking the oldest leaf of every chain at once
	 * would have shortened each of them.
	 */
	EXPECT_EQ(shorter, last_short + 1)
		TH_LOG("%u chains shortened, the last one %u", shorter,
		       last_short);
	EXPECT_GE(1, partial);
	if (partial)
		EXPECT_EQ(last_short, last_partial);
	EXPECT_LE(high_blocks(self), kvcc_stat1(c, "pool_free"));
	free(keys);
	free(h);
}

/* ---- 7: pins die with their connection ---------------------------------------- */

/*
 * A child LOADs (and in kernel mode pins with its own file) every block
 * of a chain that holds the pool below the low watermark, says so, and
 * waits to be killed. Returns its pid, or -errno; *ready gets its result.
 */
static pid_t pinning_child(SELF *self, const kvc_key *keys, uint32_t n,
			   int32_t *ready)
{
	int pfd[2];
	pid_t pid;

	if (pipe2(pfd, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (!pid) {
		struct kvc_load_result *res = calloc(n, sizeof(*res));
		struct kvcache_handle *h = calloc(n, sizeof(*h));
		struct kvcc c;
		int32_t r;

		close(pfd[0]);
		r = !res || !h ? -ENOMEM : kvcc_open(&c, self->sock);
		if (!r)
			r = kvcc_hello(&c);
		if (!r)
			r = kvcc_load(&c, self->ns, keys[0], n, res);
		for (uint32_t i = 0; !r && i < n; i++) {
			r = res[i].status;
			h[i] = res[i].handle;
		}
		if (!r && self->mode == KVC_PROTO_MODE_KERNEL) {
			int fd = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
			uint32_t done = 0;

			r = fd < 0 ? -errno :
			    kvc_batch(fd, KVCACHE_IOC_PIN, h, n, &done);
			if (!r && done != n)
				r = -EIO;
		}
		if (write(pfd[1], &r, sizeof(r)) != sizeof(r))
			_exit(1);
		for (;;)
			pause();
	}
	close(pfd[1]);
	if (read(pfd[0], ready, sizeof(*ready)) != sizeof(*ready))
		*ready = KVCC_BROKEN;
	close(pfd[0]);
	return pid;
}

TEST_F_TIMEOUT(kvcd, pins_of_a_killed_client_are_dropped, 120)
{
	struct kvcc *c = &self->c, c2;
	uint32_t n = blocks_to_pressure(self);
	struct kvc_load_result *res;
	struct kvcache_handle *h;
	kvc_key *keys;
	int32_t ready;
	uint64_t ev;
	pid_t child;
	int st;

	ASSERT_LE(2, n);
	ASSERT_GE(KVC_PROTO_MAX_STORE, n);
	keys = calloc(n, sizeof(*keys));
	h = calloc(n, sizeof(*h));
	res = calloc(n, sizeof(*res));
	ASSERT_TRUE(keys && h && res);
	chain_keys(self, 9, n, keys);
	/* Stored pinned, so the daemon cannot take it before the child. */
	ASSERT_EQ(0, store_chain(self, self->ns, keys, n, true, h))
		TH_LOG("%s", c->why);
	child = pinning_child(self, keys, n, &ready);
	ASSERT_LT(0, child);
	ASSERT_EQ(0, ready) TH_LOG("the child could not pin the chain");
	/* Another connection pins it too, and closes. */
	ASSERT_EQ(0, kvcc_open(&c2, self->sock));
	ASSERT_EQ(0, kvcc_hello(&c2));
	ASSERT_EQ(0, kvcc_load(&c2, self->ns, keys[0], n, res));
	for (uint32_t i = 0; i < n; i++) {
		EXPECT_EQ(0, res[i].status);
	}
	kvcc_close(&c2);
	/* Only the child's pins are left now. */
	ASSERT_EQ(0, unpin_blocks(self, h, n)) TH_LOG("%s", c->why);
	msleep(1000);
	EXPECT_EQ(0, kvcc_stat1(c, "evictions"));
	EXPECT_EQ(n, kvcc_lookup(c, self->ns, KVC_PROTO_TIERS_ALL, keys[0], n,
				 NULL));

	ASSERT_EQ(0, kill(child, SIGKILL));
	ASSERT_EQ(child, waitpid(child, &st, 0));
	ev = wait_evictions(c, 0, 30);
	ASSERT_NE(UINT64_MAX, ev);
	EXPECT_LT(0, ev) TH_LOG("the dead client's pins still hold the chain");
	EXPECT_EQ(n - ev, kvcc_lookup(c, self->ns, KVC_PROTO_TIERS_ALL,
				      keys[0], n, NULL));
	free(keys);
	free(h);
	free(res);
}

/*
 * Blocks sealed but never stored (a client that died between SEAL and
 * STORE) are orphans: the daemon frees them once two passes saw them
 * unclaimed, in both modes.
 */
TEST_F_TIMEOUT(kvcd, sealed_but_never_stored_blocks_are_reclaimed, 120)
{
	struct kvcc *c = &self->c, c2;
	uint32_t n = blocks_to_pressure(self);
	struct kvcache_handle *h;
	uint64_t free0, free1 = 0;
	kvc_key *keys;
	int dev = -1;
	double t0;

	keys = calloc(n, sizeof(*keys));
	h = calloc(n, sizeof(*h));
	ASSERT_TRUE(keys && h);
	chain_keys(self, 11, n, keys);
	free0 = kvcc_stat1(c, "pool_free");
	/* Sealed through a second connection (or file) that then goes away. */
	ASSERT_EQ(0, kvcc_open(&c2, self->sock));
	ASSERT_EQ(0, kvcc_hello(&c2));
	if (self->mode == KVC_PROTO_MODE_KERNEL) {
		dev = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
		ASSERT_LE(0, dev);
	}
	ASSERT_EQ(0, make_blocks(self, &c2, dev, self->ns, keys, n, false, h));
	kvcc_close(&c2);
	if (dev >= 0)
		close(dev);
	/*
	 * Below the low watermark now: the ticks look, twice, and free them.
	 * (Not checked: pool_free down by n first. Under load the second
	 * look can come before this test reads it.)
	 */
	for (t0 = now_s(); now_s() - t0 < 30; msleep(100)) {
		free1 = kvcc_stat1(c, "pool_free");
		if (free1 == free0)
			break;
	}
	EXPECT_EQ(free0, free1) TH_LOG("orphans still hold %llu blocks",
				       (unsigned long long)(free0 - free1));
	EXPECT_EQ(0, kvcc_lookup(c, self->ns, KVC_PROTO_TIERS_ALL, keys[0], n,
				 NULL));
	/* Freed, not only unindexed: every handle is stale now. */
	if (self->mode == KVC_PROTO_MODE_KERNEL) {
		uint32_t stale = 0;

		for (uint32_t i = 0; i < n; i++)
			stale += kvc_pin(self->dev, h[i]) == -ESTALE;
		EXPECT_EQ(n, stale);
	}
	free(keys);
	free(h);
}

/*
 * A STORE the daemon refuses frees the client's sealed block sooner than
 * two pressure passes would (the pool here is far from its watermarks,
 * so no pass runs): a redundant copy of a cached key at once, and a block
 * refused while the seal's pin is kept (as libkvcache stores) when that
 * pin goes: at its RELEASE in memfd mode (in kernel mode the client
 * unpins with its own file, and the next pass takes it). What the STORE
 * names but is not that block, and a block the index holds, stay; so
 * does an unpinned block refused for want of its parent, which may be
 * STOREd again (store_and_prefix_lookup).
 */
TEST_F_TIMEOUT(kvcd, refused_store_frees_its_block, 60)
{
	struct kvcc *c = &self->c;
	struct kvc_lookup_entry le[1];
	struct kvcache_handle h[2], dup, pinned;
	kvc_key keys[3], nowhere[1];
	uint64_t free0;
	int32_t st[1];

	chain_keys(self, 51, 3, keys);
	chain_keys(self, 52, 1, nowhere);	/* a parent never stored */
	free0 = kvcc_stat1(c, "pool_free");
	ASSERT_EQ(0, store_chain(self, self->ns, keys, 1, false, h))
		TH_LOG("%s", c->why);
	EXPECT_EQ(free0 - 1, kvcc_stat1(c, "pool_free"));

	/* A second copy of a cached key: -EEXIST, the copy goes at once. */
	ASSERT_EQ(0, make_blocks(self, c, self->dev, self->ns, &keys[0], 1,
				 false, &dup));
	EXPECT_EQ(free0 - 2, kvcc_stat1(c, "pool_free"));
	EXPECT_EQ(-EEXIST, store_blocks(c, self->ns, &keys[0], NULL, &dup, 1,
					st));
	EXPECT_EQ(free0 - 1, kvcc_stat1(c, "pool_free"));
	EXPECT_EQ(1, kvcc_stat1(c, "refused_freed"));

	/* The stored block itself STOREd again: -EEXIST, and it stays. */
	EXPECT_EQ(-EEXIST, store_blocks(c, self->ns, &keys[0], NULL, &h[0], 1,
					st));
	EXPECT_EQ(free0 - 1, kvcc_stat1(c, "pool_free"));
	ASSERT_EQ(1, kvcc_lookup(c, self->ns, KVC_PROTO_TIERS_ALL, keys[0], 1,
				 le));
	EXPECT_TRUE(same_handle(h[0], le[0].handle));

	/*
	 * Named with a key it was not sealed with: -EINVAL, and not freed,
	 * since it is not the block the client says; stored rightly, it is.
	 */
	ASSERT_EQ(0, make_blocks(self, c, self->dev, self->ns, &keys[1], 1,
				 false, &h[1]));
	EXPECT_EQ(-EINVAL, store_blocks(c, self->ns, &keys[2], keys[0], &h[1],
					1, st));
	EXPECT_EQ(free0 - 2, kvcc_stat1(c, "pool_free"));
	EXPECT_EQ(0, store_blocks(c, self->ns, &keys[1], keys[0], &h[1], 1,
				  st)) TH_LOG("%s", c->why);
	EXPECT_EQ(1, kvcc_stat1(c, "refused_freed"));

	/* Refused while the seal's pin is kept: it goes with the pin. */
	ASSERT_EQ(0, make_blocks(self, c, self->dev, self->ns, &keys[2], 1,
				 true, &pinned));
	EXPECT_EQ(-ENOENT, store_blocks(c, self->ns, &keys[2], nowhere[0],
					&pinned, 1, st));
	EXPECT_EQ(free0 - 3, kvcc_stat1(c, "pool_free"));
	ASSERT_EQ(0, unpin_blocks(self, &pinned, 1));
	if (self->mode == KVC_PROTO_MODE_MEMFD) {
		EXPECT_EQ(free0 - 2, kvcc_stat1(c, "pool_free"));
		EXPECT_EQ(2, kvcc_stat1(c, "refused_freed"));
	}
	EXPECT_EQ(2, kvcc_lookup(c, self->ns, KVC_PROTO_TIERS_ALL, keys[0], 3,
				 NULL));
}

/* STORE entries that seal their blocks first (version 3's SEAL flag). */
static void seal_entries(struct kvc_store_entry *e, const kvc_key *keys,
			 const uint8_t *parent,
			 const struct kvcache_handle *h, uint32_t n,
			 uint32_t payload_len)
{
	for (uint32_t i = 0; i < n; i++) {
		const uint8_t *par = i ? keys[i - 1] : parent;

		memset(&e[i], 0, sizeof(e[i]));
		memcpy(e[i].key, keys[i], KVCACHE_KEY_SIZE);
		if (par)
			memcpy(e[i].parent, par, KVCACHE_KEY_SIZE);
		else
			e[i].flags = KVC_PROTO_STORE_FIRST;
		e[i].flags |= KVC_PROTO_STORE_SEAL;
		e[i].payload_len = payload_len;
		e[i].handle = h[i];
	}
}

/*
 * A STORE that seals its blocks itself (memfd mode, version 3): one
 * round trip instead of SEAL, STORE and RELEASE. The blocks are indexed
 * with what was written; a block of another connection is not ours to
 * seal (EPERM), nor one sealed already (EINVAL), and either stays as it
 * was; a length above the block is refused and the block stays
 * writable; a block this STORE sealed but could not index (no parent)
 * goes back to the pool at once. Kernel mode seals with the ioctl: the
 * whole STORE is refused.
 */
TEST_F_TIMEOUT(kvcd, store_seals_in_one_message, 60)
{
	struct kvcc *c = &self->c, c2;
	struct kvc_load_result res[2];
	struct kvc_store_entry e[2];
	struct kvcache_handle h[2], other, spare;
	kvc_key keys[3], nowhere[1], lone[1];
	uint64_t free0, freed0;
	int32_t st[2];

	chain_keys(self, 61, 3, keys);
	chain_keys(self, 62, 1, nowhere);	/* a parent never stored */
	chain_keys(self, 63, 1, lone);
	if (self->mode == KVC_PROTO_MODE_KERNEL) {
		ASSERT_EQ(0, kvc_alloc(self->dev, self->ns, 1, h));
		seal_entries(e, keys, NULL, h, 1, PAYLOAD);
		EXPECT_EQ(-EOPNOTSUPP, kvcc_store(c, self->ns, e, 1, st))
			TH_LOG("%s", c->why);
		return;
	}
	ASSERT_LE(KVC_PROTO_VERSION_STORE_SEAL, c->hello.version);
	free0 = kvcc_stat1(c, "pool_free");
	freed0 = kvcc_stat1(c, "refused_freed");

	ASSERT_EQ(0, kvcc_alloc(c, self->ns, 2, h));
	for (int i = 0; i < 2; i++)
		fill_block(c->pool + (size_t)h[i].index * self->bs, keys[i]);
	seal_entries(e, keys, NULL, h, 2, PAYLOAD);
	ASSERT_EQ(0, kvcc_store(c, self->ns, e, 2, st)) TH_LOG("%s", c->why);
	EXPECT_EQ(0, st[0]);
	EXPECT_EQ(0, st[1]);
	EXPECT_EQ(free0 - 2, kvcc_stat1(c, "pool_free"));
	/* Indexed, sealed, with what was written; no pin was left behind. */
	ASSERT_EQ(0, kvcc_load(c, self->ns, keys[0], 2, res))
		TH_LOG("%s", c->why);
	for (int i = 0; i < 2; i++) {
		EXPECT_EQ(0, res[i].status);
		EXPECT_TRUE(same_handle(h[i], res[i].handle));
		EXPECT_TRUE(block_ok(c->pool + (size_t)h[i].index * self->bs,
				     keys[i]));
	}
	ASSERT_EQ(0, kvcc_release(c, h, 2, st));
	EXPECT_EQ(0, st[0]);
	EXPECT_EQ(0, st[1]);
	ASSERT_EQ(0, kvcc_release(c, h, 1, st));
	EXPECT_EQ(-EINVAL, st[0]);		/* not pinned any more */

	/* Sealed already: EINVAL, and it stays indexed. */
	seal_entries(e, keys, NULL, h, 1, PAYLOAD);
	ASSERT_EQ(0, kvcc_store(c, self->ns, e, 1, st));
	EXPECT_EQ(-EINVAL, st[0]);
	EXPECT_EQ(1, kvcc_lookup(c, self->ns, KVC_PROTO_TIER_POOL, keys[0], 1,
				 NULL));

	/* Another connection's block: EPERM, and it stays writable there. */
	ASSERT_EQ(0, kvcc_open(&c2, self->sock));
	ASSERT_EQ(0, kvcc_hello(&c2)) TH_LOG("%s", c2.why);
	ASSERT_EQ(0, kvcc_alloc(&c2, self->ns, 1, &other))
		TH_LOG("%s", c2.why);
	fill_block(c2.pool + (size_t)other.index * self->bs, keys[2]);
	seal_entries(e, &keys[2], keys[1], &other, 1, PAYLOAD);
	ASSERT_EQ(0, kvcc_store(c, self->ns, e, 1, st));
	EXPECT_EQ(-EPERM, st[0]);
	ASSERT_EQ(0, kvcc_store(&c2, self->ns, e, 1, st)) TH_LOG("%s", c2.why);
	EXPECT_EQ(0, st[0]);
	kvcc_close(&c2);
	EXPECT_EQ(3, kvcc_lookup(c, self->ns, KVC_PROTO_TIER_POOL, keys[0], 3,
				 NULL));

	/* A length above the block: EINVAL, and the block is still ours. */
	ASSERT_EQ(0, kvcc_alloc(c, self->ns, 1, &spare));
	fill_block(c->pool + (size_t)spare.index * self->bs, lone[0]);
	seal_entries(e, lone, nowhere[0], &spare, 1, (uint32_t)self->bs + 1);
	ASSERT_EQ(0, kvcc_store(c, self->ns, e, 1, st));
	EXPECT_EQ(-EINVAL, st[0]);
	EXPECT_EQ(free0 - 4, kvcc_stat1(c, "pool_free"));

	/* Sealed, then refused (its parent was never stored): freed now. */
	seal_entries(e, lone, nowhere[0], &spare, 1, PAYLOAD);
	ASSERT_EQ(0, kvcc_store(c, self->ns, e, 1, st));
	EXPECT_EQ(-ENOENT, st[0]);
	EXPECT_EQ(free0 - 3, kvcc_stat1(c, "pool_free"));
	EXPECT_EQ(freed0 + 1, kvcc_stat1(c, "refused_freed"));
}

/*
 * Admin EVICT and FLUSH: a chain's tail goes by key (deepest first), a
 * block with cached descendants stays (-ENOTEMPTY), a pinned chain
 * survives a flush until unpinned.
 */
TEST_F_TIMEOUT(kvcd, evict_and_flush, 60)
{
	struct kvcc *c = &self->c;
	struct kvc_flush_reply fr;
	struct kvcache_handle h[8];
	kvc_key keys[8], unknown[1];
	int32_t st[3];

	chain_keys(self, 21, 8, keys);
	chain_keys(self, 22, 1, unknown);
	ASSERT_EQ(0, store_chain(self, self->ns, keys, 8, false, h))
		TH_LOG("%s", c->why);
	/* The last three, given in chain order, go deepest first. */
	ASSERT_EQ(0, kvcc_evict(c, self->ns, keys[5], 3, st)) TH_LOG("%s", c->why);
	for (int i = 0; i < 3; i++) {
		EXPECT_EQ(0, st[i]);
	}
	EXPECT_EQ(5, kvcc_lookup(c, self->ns, KVC_PROTO_TIERS_ALL, keys[0], 8,
				 NULL));
	/* A middle block would orphan its descendants; unknown keys are absent. */
	ASSERT_EQ(0, kvcc_evict(c, self->ns, keys[2], 1, st));
	EXPECT_EQ(-ENOTEMPTY, st[0]);
	ASSERT_EQ(0, kvcc_evict(c, self->ns, unknown[0], 1, st));
	EXPECT_EQ(-ENOENT, st[0]);
	EXPECT_EQ(-ENOENT, kvcc_evict(c, self->ns + 5, keys[0], 1, st));
	EXPECT_EQ(-ENOENT, kvcc_flush(c, self->ns + 5, &fr));

	/* Only root evicts or flushes. */
	if (geteuid() == 0) {
		int pfd[2], wst;
		int32_t r[2] = { KVCC_BROKEN, KVCC_BROKEN };
		pid_t pid;

		ASSERT_EQ(0, pipe2(pfd, O_CLOEXEC));
		pid = fork();
		ASSERT_LE(0, pid);
		if (!pid) {
			struct kvcc nc;

			close(pfd[0]);
			if (setgroups(0, NULL) || setgid(NOBODY) ||
			    setuid(NOBODY) || kvcc_open(&nc, self->sock))
				_exit(1);
			r[0] = r[1] = kvcc_hello(&nc);
			if (!r[0]) {
				r[0] = kvcc_evict(&nc, self->ns, keys[0], 1, st);
				r[1] = kvcc_flush(&nc, self->ns, &fr);
			}
			_exit(write(pfd[1], r, sizeof(r)) == sizeof(r) ? 0 : 2);
		}
		close(pfd[1]);
		EXPECT_EQ(sizeof(r), read(pfd[0], r, sizeof(r)));
		close(pfd[0]);
		waitpid(pid, &wst, 0);
		/* memfd mode: refused at HELLO already (no rw on our 0700
		 * namespace); isolation_test checks EPERM for a peer that
		 * holds the pool. */
		EXPECT_EQ(self->mode == KVC_PROTO_MODE_MEMFD ? -EACCES : -EPERM,
			  r[0]);
		EXPECT_EQ(self->mode == KVC_PROTO_MODE_MEMFD ? -EACCES : -EPERM,
			  r[1]);
	}

	/* FLUSH takes the rest, leaves first. */
	ASSERT_EQ(0, kvcc_flush(c, self->ns, &fr)) TH_LOG("%s", c->why);
	EXPECT_EQ(5, fr.evicted);
	EXPECT_EQ(0, fr.busy);
	EXPECT_EQ(0, kvcc_lookup(c, self->ns, KVC_PROTO_TIERS_ALL, keys[0], 8,
				 NULL));

	/* A pinned chain stays, leaf and ancestors, until unpinned. */
	chain_keys(self, 23, 8, keys);
	ASSERT_EQ(0, store_chain(self, self->ns, keys, 8, true, h))
		TH_LOG("%s", c->why);
	ASSERT_EQ(0, kvcc_flush(c, KVC_PROTO_NS_ALL, &fr));
	EXPECT_EQ(0, fr.evicted);
	EXPECT_EQ(8, fr.busy);
	ASSERT_EQ(0, unpin_blocks(self, h, 8));
	ASSERT_EQ(0, kvcc_flush(c, KVC_PROTO_NS_ALL, &fr));
	EXPECT_EQ(8, fr.evicted);
	EXPECT_EQ(0, fr.busy);
}

/* NS_LIST: every namespace with its owner, mode and pool blocks. */
TEST_F_TIMEOUT(kvcd, ns_list_shows_owners_and_blocks, 60)
{
	struct kvcc *c = &self->c;
	struct kvcache_handle h[3];
	struct kvc_ns_entry e;
	bool seen = false;
	kvc_key keys[3];

	chain_keys(self, 31, 3, keys);
	ASSERT_EQ(0, store_chain(self, self->ns, keys, 3, false, h))
		TH_LOG("%s", c->why);
	ASSERT_EQ(0, kvcc_ns_list(c, 0)) TH_LOG("%s", c->why);
	EXPECT_EQ(0, c->msg.ns_list_reply.next);
	for (uint32_t i = 0; i < c->msg.ns_list_reply.count; i++) {
		kvc_proto_ns_entry(&c->msg.ns_list_reply, i, &e);
		if (e.ns_id != self->ns)
			continue;
		seen = true;
		EXPECT_EQ(0, e.uid);
		EXPECT_EQ(0700, e.mode);
		EXPECT_EQ(3, e.blocks);
	}
	EXPECT_TRUE(seen);
	/* Starting past it: not listed. */
	ASSERT_EQ(0, kvcc_ns_list(c, self->ns + 1));
	for (uint32_t i = 0; i < c->msg.ns_list_reply.count; i++) {
		kvc_proto_ns_entry(&c->msg.ns_list_reply, i, &e);
		EXPECT_LT(self->ns, e.ns_id);
	}
}

/*
 * pool_admit = 2: a chain segment enters the index once its first new
 * block has been wanted twice (a LOOKUP miss, then the STORE); the blocks
 * after it in the same STORE follow it in.
 */
TEST_F_TIMEOUT(kvcd, admission_wants_a_block_twice, 90)
{
	struct kvcache_handle h[8];
	kvc_key a[8], b[8];
	int32_t st[8];
	char why[512] = "";
	FILE *f;

	kvcc_close(&self->c);
	daemon_stop(self);
	f = fopen(self->conf, "ae");	/* [eviction] is the last section */
	ASSERT_NE(NULL, f);
	fprintf(f, "pool_admit = 2\n");
	ASSERT_EQ(0, fclose(f));
	ASSERT_EQ(0, daemon_start(self, why, sizeof(why))) TH_LOG("%s", why);
	ASSERT_EQ(0, kvcc_open(&self->c, self->sock));
	ASSERT_EQ(0, kvcc_hello(&self->c)) TH_LOG("%s", self->c.why);

	/* Never asked for: not admitted, and its children have no parent. */
	chain_keys(self, 41, 8, a);
	ASSERT_EQ(0, make_blocks(self, &self->c, self->dev, self->ns, a, 8,
				 false, h));
	EXPECT_EQ(-EAGAIN, store_blocks(&self->c, self->ns, a, NULL, h, 8, st));
	EXPECT_EQ(-EAGAIN, st[0]);
	for (int i = 1; i < 8; i++) {
		EXPECT_EQ(-ENOENT, st[i]);
	}
	EXPECT_EQ(0, kvcc_lookup(&self->c, self->ns, KVC_PROTO_TIERS_ALL, a[0],
				 8, NULL));

	/* Asked for once (a miss), then stored: in, the whole chain. */
	chain_keys(self, 42, 8, b);
	EXPECT_EQ(0, kvcc_lookup(&self->c, self->ns, KVC_PROTO_TIERS_ALL, b[0],
				 8, NULL));
	ASSERT_EQ(0, make_blocks(self, &self->c, self->dev, self->ns, b, 8,
				 false, h));
	EXPECT_EQ(0, store_blocks(&self->c, self->ns, b, NULL, h, 8, st))
		TH_LOG("%s", self->c.why);
	EXPECT_EQ(8, kvcc_lookup(&self->c, self->ns, KVC_PROTO_TIERS_ALL, b[0],
				 8, NULL));
}

/* ---- 8: restart ------------------------------------------------------------- */

TEST_F_TIMEOUT(kvcd, restart_rebuilds_the_index, 90)
{
	struct kvc_lookup_entry le[9];
	struct kvcache_handle h[9];
	kvc_key keys[9];
	char why[512] = "";
	int st;

	chain_keys(self, 11, 9, keys);
	ASSERT_EQ(0, store_chain(self, self->ns, keys, 8, false, h))
		TH_LOG("%s", self->c.why);
	ASSERT_EQ(8, kvcc_lookup(&self->c, self->ns, KVC_PROTO_TIERS_ALL,
				 keys[0], 8, NULL));

	kvcc_close(&self->c);
	st = daemon_stop(self);
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
		TH_LOG("kvcached stopped with status %#x", st);
	ASSERT_EQ(0, daemon_start(self, why, sizeof(why))) TH_LOG("%s", why);
	ASSERT_EQ(0, kvcc_open(&self->c, self->sock));
	ASSERT_EQ(0, kvcc_hello(&self->c)) TH_LOG("%s", self->c.why);

	if (self->mode == KVC_PROTO_MODE_MEMFD) {
		/*
		 * The pool was the daemon's memory: it starts empty, but the
		 * namespaces are back and the chain can be stored again.
		 */
		EXPECT_EQ(0, kvcc_lookup(&self->c, self->ns,
					 KVC_PROTO_TIERS_ALL, keys[0], 8, NULL));
		EXPECT_EQ(0, kvcc_stat1(&self->c, "index_keys"));
		EXPECT_EQ(-EEXIST, kvcc_ns_create(&self->c, self->ns, 0, 0,
						  0700));
		ASSERT_EQ(0, store_chain(self, self->ns, keys, 8, false, h))
			TH_LOG("%s", self->c.why);
		EXPECT_EQ(8, kvcc_lookup(&self->c, self->ns,
					 KVC_PROTO_TIERS_ALL, keys[0], 8,
					 NULL));
		return;
	}
	/* The whole chain, in the same blocks. */
	ASSERT_EQ(8, kvcc_lookup(&self->c, self->ns, KVC_PROTO_TIERS_ALL,
				 keys[0], 8, le)) TH_LOG("%s", self->c.why);
	for (int i = 0; i < 8; i++) {
		EXPECT_TRUE(same_handle(h[i], le[i].handle))
			TH_LOG("block %d: stored %u/%u, now %u/%u", i,
			       h[i].index, h[i].gen, le[i].handle.index,
			       le[i].handle.gen);
	}
	EXPECT_EQ(8, kvcc_stat1(&self->c, "index_keys"));
	/* The namespaces came back, and the chain can grow. */
	EXPECT_EQ(-EEXIST, kvcc_ns_create(&self->c, self->ns, 0, 0, 0700));
	ASSERT_EQ(0, make_blocks(self, &self->c, self->dev, self->ns, &keys[8],
				 1, false, &h[8]));
	EXPECT_EQ(0, store_blocks(&self->c, self->ns, &keys[8], keys[7], &h[8],
				  1, NULL)) TH_LOG("%s", self->c.why);
	EXPECT_EQ(9, kvcc_lookup(&self->c, self->ns, KVC_PROTO_TIERS_ALL,
				 keys[0], 9, NULL));
}

/* Stop the daemon, let edit change its state, start it again, reconnect. */
static int restart_after(SELF *self, void (*edit)(SELF *self), char *why,
			 size_t wlen)
{
	int ret;

	kvcc_close(&self->c);
	daemon_stop(self);
	unlink(self->sock);
	edit(self);
	ret = daemon_start(self, why, wlen);
	if (!ret)
		ret = kvcc_open(&self->c, self->sock);
	if (!ret)
		ret = kvcc_hello(&self->c);
	return ret;
}

/* The last record's key, one bit of it: its CRC no longer matches. */
static void damage_last_record(SELF *self)
{
	char path[PATH_MAX + 16];
	struct stat sb;
	uint8_t b;
	int fd;

	snprintf(path, sizeof(path), "%s/parents", self->state);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &sb) || sb.st_size < 80 ||
	    pread(fd, &b, 1, sb.st_size - 80 + 20) != 1)
		abort();
	b ^= 0x10;
	if (pwrite(fd, &b, 1, sb.st_size - 80 + 20) != 1)
		abort();
	close(fd);
}

/* What an older daemon left in memfd mode. */
static void stale_journal(SELF *self)
{
	char path[PATH_MAX + 16];
	uint8_t rec[80] = { 'K', 'V', 'P', 'J' };
	int fd;

	snprintf(path, sizeof(path), "%s/parents", self->state);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, rec, sizeof(rec)) != sizeof(rec))
		abort();
	close(fd);
}

/*
 * The parents journal. Kernel mode: one 80-byte record per stored block,
 * rewritten at start with the blocks still there; a damaged record costs
 * only its own block (an orphan, reclaimed), never the chain before it.
 * memfd mode, where the pool dies with the daemon: no journal, and a
 * stale one goes at start.
 */
TEST_F_TIMEOUT(kvcd, parents_journal_across_restart, 90)
{
	char path[PATH_MAX + 16], why[512] = "";
	struct kvcache_handle h[8];
	kvc_key keys[8];
	struct stat sb;

	snprintf(path, sizeof(path), "%s/parents", self->state);
	chain_keys(self, 61, 8, keys);
	ASSERT_EQ(0, store_chain(self, self->ns, keys, 8, false, h))
		TH_LOG("%s", self->c.why);
	if (self->mode == KVC_PROTO_MODE_MEMFD) {
		EXPECT_EQ(-1, stat(path, &sb));
		EXPECT_EQ(ENOENT, errno);
		EXPECT_EQ(0, kvcc_stat1(&self->c, "journal_bytes"));
		ASSERT_EQ(0, restart_after(self, stale_journal, why,
					   sizeof(why))) TH_LOG("%s", why);
		EXPECT_EQ(-1, stat(path, &sb));
		EXPECT_EQ(ENOENT, errno);
		return;
	}
	EXPECT_EQ(8 * 80, kvcc_stat1(&self->c, "journal_bytes"));
	ASSERT_EQ(0, stat(path, &sb));
	EXPECT_EQ(8 * 80, sb.st_size);
	EXPECT_EQ(0600, sb.st_mode & 0777);

	ASSERT_EQ(0, restart_after(self, damage_last_record, why,
				   sizeof(why))) TH_LOG("%s", why);
	EXPECT_EQ(7, kvcc_lookup(&self->c, self->ns, KVC_PROTO_TIERS_ALL,
				 keys[0], 8, NULL));
	/* Compacted at start: the seven blocks placed again, nothing else. */
	EXPECT_EQ(7 * 80, kvcc_stat1(&self->c, "journal_bytes"));
	ASSERT_EQ(0, stat(path, &sb));
	EXPECT_EQ(7 * 80, sb.st_size);
}

static void no_edit(SELF *self)
{
	(void)self;
}

/*
 * The journal is bounded while the daemon runs (kernel mode): with the
 * compaction threshold lowered to 10 records (KVCACHED_JOURNAL_MIN, for
 * tests), rounds of STOREs and EVICTs grow it past 4 x the live records,
 * and it is rewritten with exactly the blocks still stored: a restart
 * brings back the last chain, and the file is that chain's records.
 */
TEST_F_TIMEOUT(kvcd, parents_journal_compacts_while_running, 120)
{
	char path[PATH_MAX + 16], why[512] = "";
	struct kvcache_handle h[4];
	uint64_t bytes, max_bytes = 0;
	kvc_key keys[4];
	int32_t st[4];
	struct stat sb;

	if (self->mode != KVC_PROTO_MODE_KERNEL)
		SKIP(return, "memfd mode writes no journal");
	snprintf(path, sizeof(path), "%s/parents", self->state);
	setenv("KVCACHED_JOURNAL_MIN", "800", 1);
	ASSERT_EQ(0, restart_after(self, no_edit, why, sizeof(why)))
		TH_LOG("%s", why);
	unsetenv("KVCACHED_JOURNAL_MIN");
	for (uint32_t round = 0; round < 8; round++) {
		chain_keys(self, 70 + round, 4, keys);
		ASSERT_EQ(0, store_chain(self, self->ns, keys, 4, false, h))
			TH_LOG("%s", self->c.why);
		bytes = kvcc_stat1(&self->c, "journal_bytes");
		if (bytes > max_bytes)
			max_bytes = bytes;
		if (round == 7)
			break;
		/* Deepest first: a block with a child in the pool stays. */
		for (int i = 3; i >= 0; i--) {
			ASSERT_EQ(0, kvcc_evict(&self->c, self->ns, keys[i], 1,
						st));
			EXPECT_EQ(0, st[0]);
		}
	}
	EXPECT_LE(1, kvcc_stat1(&self->c, "journal_compactions"));
	/* Bounded by max(800, 4 x 4 live x 80) + one record. */
	EXPECT_GE(4 * 4 * 80 + 80, max_bytes);
	ASSERT_EQ(0, stat(path, &sb));
	EXPECT_EQ(kvcc_stat1(&self->c, "journal_bytes"), (uint64_t)sb.st_size);

	ASSERT_EQ(0, restart_after(self, no_edit, why, sizeof(why)))
		TH_LOG("%s", why);
	EXPECT_EQ(4, kvcc_lookup(&self->c, self->ns, KVC_PROTO_TIERS_ALL,
				 keys[0], 4, NULL));
	EXPECT_EQ(4 * 80, kvcc_stat1(&self->c, "journal_bytes"));
}

/* ---- 9: STATS ------------------------------------------------------------- */

TEST_F_TIMEOUT(kvcd, stats_counters, 60)
{
	static const char *const names[] = {
		"index_keys", "lookups", "stores", "evictions", "pool_blocks",
		"pool_free",
	};
	struct kvcc *c = &self->c;
	struct kvcache_handle h[3];
	kvc_key keys[3], miss[1];
	uint64_t v, free0;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		EXPECT_EQ(0, kvcc_stat(c, names[i], &v))
			TH_LOG("no counter %s: %s", names[i], c->why);
	}
	EXPECT_EQ(self->nr, kvcc_stat1(c, "pool_blocks"));
	free0 = kvcc_stat1(c, "pool_free");
	EXPECT_GE(self->nr, free0);
	if (self->mode == KVC_PROTO_MODE_MEMFD) {
		EXPECT_EQ(self->nr, free0);
	}
	EXPECT_EQ(0, kvcc_stat1(c, "index_keys"));
	EXPECT_EQ(0, kvcc_stat1(c, "lookups"));
	EXPECT_EQ(0, kvcc_stat1(c, "stores"));
	EXPECT_EQ(0, kvcc_stat1(c, "evictions"));

	chain_keys(self, 5, 3, keys);
	chain_keys(self, 6, 1, miss);
	ASSERT_EQ(0, store_chain(self, self->ns, keys, 3, false, h))
		TH_LOG("%s", c->why);
	EXPECT_EQ(3, kvcc_lookup(c, self->ns, KVC_PROTO_TIERS_ALL, keys[0], 3,
				 NULL));
	EXPECT_EQ(0, kvcc_lookup(c, self->ns, KVC_PROTO_TIERS_ALL, miss[0], 1,
				 NULL));
	EXPECT_EQ(3, kvcc_stat1(c, "stores"));
	EXPECT_EQ(3, kvcc_stat1(c, "index_keys"));
	EXPECT_EQ(2, kvcc_stat1(c, "lookups"));
	EXPECT_EQ(free0 - 3, kvcc_stat1(c, "pool_free"));
	EXPECT_EQ(0, kvcc_stat1(c, "evictions"));
	/* A refused STORE is not a store. */
	EXPECT_EQ(-EEXIST, store_blocks(c, self->ns, &keys[1], keys[0], &h[1],
					1, NULL));
	EXPECT_EQ(3, kvcc_stat1(c, "stores"));
}

/* ---- [daemon] log_level ------------------------------------------------------- */

/* The daemon's log holds s. */
static bool log_holds(SELF *self, const char *s)
{
	return file_has(self->log, s);
}

/* Restart at log level lvl with an empty log; connected again after. */
static int restart_logging(SELF *self, const char *lvl, char *conf,
			   size_t clen, char *why, size_t wlen)
{
	kvcc_close(&self->c);
	daemon_stop(self);
	if (truncate(self->log, 0))
		return -errno;
	snprintf(conf, clen, "[daemon]\nlog_level = %s\n", lvl);
	return restart(self, conf, why, wlen);
}

/*
 * What is printed follows log_level: connections are logged at debug,
 * the start ("listening on") at info. At debug both appear, with the
 * level named; at error neither does.
 */
TEST_F_TIMEOUT(kvcd, log_level_filters_messages, 60)
{
	char why[512] = "", conf[64];

	ASSERT_EQ(0, restart_logging(self, "debug", conf, sizeof(conf), why,
				     sizeof(why))) TH_LOG("%s", why);
	EXPECT_EQ(0, kvcc_stat1(&self->c, "stores"));
	EXPECT_TRUE(log_holds(self, "listening on"));
	EXPECT_TRUE(log_holds(self, "kvcached: debug: client"));

	ASSERT_EQ(0, restart_logging(self, "error", conf, sizeof(conf), why,
				     sizeof(why))) TH_LOG("%s", why);
	EXPECT_EQ(0, kvcc_stat1(&self->c, "stores"));
	EXPECT_FALSE(log_holds(self, "listening on"));
	EXPECT_FALSE(log_holds(self, "debug:"));

	/* The default, info: the start is said, the connections are not. */
	ASSERT_EQ(0, restart_logging(self, "info", conf, sizeof(conf), why,
				     sizeof(why))) TH_LOG("%s", why);
	EXPECT_EQ(0, kvcc_stat1(&self->c, "stores"));
	EXPECT_TRUE(log_holds(self, "listening on"));
	EXPECT_FALSE(log_holds(self, "debug:"));
}

/* ---- [eviction] s3fifo_small ------------------------------------------------ */

/*
 * Which of 16 blocks hit once (A) and 14 never hit (B) survive the first
 * eviction under S3-FIFO with small share pct: 30 of the 32 memfd blocks
 * in use is below the low watermark, and the pass frees 4. The pass
 * first moves the hit blocks from small to main; at 10 % small still
 * holds its share after that and gives up B's oldest four; at 50 % it
 * does not, and main's oldest (A's, their hit spent on the move) go
 * until small holds half again.
 */
static int s3fifo_run(SELF *self, unsigned int pct, int *a_left, int *b_left)
{
	char conf[128], why[512] = "";
	struct kvcache_handle h;
	kvc_key k;
	int ret;

	snprintf(conf, sizeof(conf), "[eviction]\ns3fifo_small = %u\n", pct);
	self->policy = "s3fifo";
	ret = restart(self, conf, why, sizeof(why));
	if (ret)
		return ret;
	for (uint32_t i = 0; !ret && i < 30; i++) {
		chain_keys(self, 300 + i, 1, &k);
		ret = store_chain(self, self->ns, &k, 1, false, &h);
		/* A: one hit each, before B comes. */
		if (!ret && i < 16 &&
		    kvcc_lookup(&self->c, self->ns, KVC_PROTO_TIERS_ALL, k,
				1, NULL) != 1)
			ret = -EIO;
	}
	if (ret)
		return ret;
	if (wait_evictions(&self->c, 0, 10) < 4)
		return -ETIMEDOUT;
	*a_left = *b_left = 0;
	for (uint32_t i = 0; i < 30; i++) {
		chain_keys(self, 300 + i, 1, &k);
		if (kvcc_lookup(&self->c, self->ns, KVC_PROTO_TIERS_ALL, k,
				1, NULL) == 1)
			(*(i < 16 ? a_left : b_left))++;
	}
	return 0;
}

TEST_F_TIMEOUT(kvcd, s3fifo_small_changes_victims, 90)
{
	int a, b;

	if (self->mode != KVC_PROTO_MODE_MEMFD || self->nr != 32)
		SKIP(return, "the memfd pool of 32 blocks");
	ASSERT_EQ(0, s3fifo_run(self, 10, &a, &b));
	EXPECT_EQ(16, a);	/* the hit blocks stay ... */
	EXPECT_EQ(10, b);	/* ... B0-B3 go */
	ASSERT_EQ(0, s3fifo_run(self, 50, &a, &b));
	EXPECT_EQ(13, a);	/* A0, A1, then B0 (small back at 50 %), A2 */
	EXPECT_EQ(13, b);
}

/* ---- the metrics endpoint and the daemon's descriptors ----------------------- */

/* Connect to the metrics socket at path: the descriptor, or -errno. */
static int metrics_connect(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

/*
 * Read fd until the daemon closes it (at most timeout_ms: a bound for a
 * broken daemon, not a speed figure). Bytes read, -ETIMEDOUT or -errno.
 */
static ssize_t read_to_eof(int fd, char *buf, size_t cap, int timeout_ms)
{
	size_t got = 0;
	double end = now_s() + timeout_ms / 1e3;

	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int left = (int)((end - now_s()) * 1e3);
		ssize_t n;

		if (left <= 0)
			return -ETIMEDOUT;
		if (poll(&pfd, 1, left) == 0)
			continue;
		n = recv(fd, buf + got, cap - 1 - got, 0);
		if (n < 0)
			return errno == ECONNRESET && got ? (ssize_t)got : -errno;
		if (n == 0)
			break;
		got += (size_t)n;
		if (got == cap - 1)
			break;
	}
	buf[got] = '\0';
	return (ssize_t)got;
}

/* The daemon has neither closed fd nor written to it. */
static bool still_waiting(int fd)
{
	char c;

	return recv(fd, &c, 1, MSG_DONTWAIT | MSG_PEEK) < 0 &&
	       (errno == EAGAIN || errno == EWOULDBLOCK);
}

/* An answer is HTTP/1.0 200 with as many body bytes as it announces. */
static bool whole_answer(const char *a, ssize_t n)
{
	const char *cl = strstr(a, "Content-Length: ");
	const char *body = strstr(a, "\r\n\r\n");

	return n > 0 && !strncmp(a, "HTTP/1.0 200 OK\r\n", 17) && cl && body &&
	       strtoul(cl + 16, NULL, 10) == (unsigned long)(n - (body + 4 - a)) &&
	       strstr(body, "kvcache_");
}

#define SILENT_SCRAPERS	8

/*
 * Restart the daemon with its metrics on a socket of its own, path, and
 * a scrape deadline of timeout.
 */
static int metrics_restart(SELF *self, const char *timeout, char *path,
			   size_t plen, char *conf, size_t clen, char *why,
			   size_t wlen)
{
	snprintf(path, plen, "%s.metrics", self->sock);
	snprintf(conf, clen,
		 "metrics = %s\nmetrics_mode = 0640\nmetrics_group = %u\n"
		 "metrics_timeout = %s\n", path, (unsigned)getegid(), timeout);
	self->daemon_conf = conf;
	return restart(self, NULL, why, wlen);
}

/*
 * The metrics socket has the mode and group of the configuration, and
 * the endpoint never holds the loop: while scrapers that connected first
 * stay silent (each still waiting: neither answered nor cut), other
 * clients' round trips and another scraper's whole answer come. With a
 * loop that read each scraper's request in turn, the first silent one
 * held everything behind it until it was cut.
 */
TEST_F_TIMEOUT(kvcd, silent_scrapers_do_not_hold_the_loop, 60)
{
	char path[160], conf[300], why[512], ans[1 << 16];
	int silent[SILENT_SCRAPERS], fd;
	struct stat st;
	double t0;
	ssize_t n;

	/* A deadline far past what the round trips below take. */
	ASSERT_EQ(0, metrics_restart(self, "30s", path, sizeof(path), conf,
				     sizeof(conf), why, sizeof(why)))
		TH_LOG("%s", why);
	ASSERT_EQ(0, stat(path, &st));
	EXPECT_EQ(0640u, st.st_mode & 0777u);
	EXPECT_EQ(getegid(), st.st_gid);

	t0 = now_s();
	for (int i = 0; i < SILENT_SCRAPERS; i++) {
		silent[i] = metrics_connect(path);
		ASSERT_LE(0, silent[i]) TH_LOG("connect: %s", strerror(-silent[i]));
	}
	/* Round trips of a client while they are silent. */
	for (int i = 0; i < 20; i++)
		ASSERT_NE(UINT64_MAX, kvcc_stat1(&self->c, "lookups"))
			TH_LOG("%s", self->c.why);
	/* And a scraper that asks gets its whole answer. */
	fd = metrics_connect(path);
	ASSERT_LE(0, fd);
	ASSERT_EQ(27, send(fd, "GET /metrics HTTP/1.0\r\n\r\n\r\n", 27,
			   MSG_NOSIGNAL));
	n = read_to_eof(fd, ans, sizeof(ans), 10000);
	EXPECT_TRUE(whole_answer(ans, n)) TH_LOG("%zd: %.200s", n, ans);
	close(fd);
	/*
	 * All of that came while every silent one was still waiting.
	 * (Unless this machine took longer than the scrapers' deadline to
	 * get here: then being cut is right, and proves nothing. A loop
	 * that read them in turn cut them at a second each.)
	 */
	if (now_s() - t0 < 25) {
		for (int i = 0; i < SILENT_SCRAPERS; i++) {
			EXPECT_TRUE(still_waiting(silent[i]))
				TH_LOG("silent scraper %d was answered or cut first", i);
		}
	} else {
		TH_LOG("took %.1f s: the silent scrapers' check is left out",
		       now_s() - t0);
	}
	for (int i = 0; i < SILENT_SCRAPERS; i++)
		close(silent[i]);
}

/*
 * A scraper that sends its request in pieces gets its answer once the
 * request is whole (the loop serving others meanwhile), and one that
 * never asks is cut at its deadline: closed, with nothing written.
 */
TEST_F_TIMEOUT(kvcd, slow_scrapers_are_answered_or_cut, 60)
{
	char path[160], conf[300], why[512], ans[1 << 16];
	int slow, mute;
	ssize_t n;

	ASSERT_EQ(0, metrics_restart(self, "3s", path, sizeof(path), conf,
				     sizeof(conf), why, sizeof(why)))
		TH_LOG("%s", why);
	mute = metrics_connect(path);
	slow = metrics_connect(path);
	ASSERT_LE(0, mute);
	ASSERT_LE(0, slow);
	ASSERT_EQ(16, send(slow, "GET / HTTP/1.0\r\n", 16, MSG_NOSIGNAL));
	msleep(100);
	ASSERT_EQ(13, send(slow, "Host: kvcd\r\n\r", 13, MSG_NOSIGNAL));
	/* Half a request: not answered yet, and the loop goes on. */
	ASSERT_NE(UINT64_MAX, kvcc_stat1(&self->c, "lookups"));
	msleep(100);
	EXPECT_TRUE(still_waiting(slow));
	ASSERT_EQ(1, send(slow, "\n", 1, MSG_NOSIGNAL));
	n = read_to_eof(slow, ans, sizeof(ans), 10000);
	EXPECT_TRUE(whole_answer(ans, n)) TH_LOG("%zd: %.200s", n, ans);
	EXPECT_TRUE(still_waiting(mute));
	/* The mute one: cut, with no answer (10 s: a broken daemon's bound). */
	EXPECT_EQ(0, read_to_eof(mute, ans, sizeof(ans), 10000));
	close(slow);
	close(mute);
}

/* The soft RLIMIT_NOFILE of process pid (/proc/PID/limits), 0: unknown. */
static unsigned long long soft_nofile(pid_t pid)
{
	char path[64], line[256];
	unsigned long long v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/limits", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "Max open files", 14))
			v = strtoull(line + 14, NULL, 10);
	fclose(f);
	return v;
}

/* Descriptors process pid has open. */
static int open_fds(pid_t pid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	return count_files(path, "");
}

#define MANY_NS		100
#define MANY_CLIENTS	100
#define LOW_NOFILE	64

/*
 * Namespace ids of the tests below: above the fixture's (pid % 60000 + 1,
 * and NS_EXTRA after it), so that what a failed run leaves in the module
 * never meets another test's, and emptied first for the same reason.
 */
#define MANY_NS_BASE	60100
#define BUDGET_NS_BASE	60300

static void ns_ids(SELF *self, uint32_t base, uint32_t n, uint32_t *ns)
{
	for (uint32_t i = 0; i < n; i++) {
		ns[i] = base + i;
		if (self->mode == KVC_PROTO_MODE_KERNEL && self->dev >= 0)
			kernel_ns_cleanup(self->dev, ns[i]);
	}
}

/*
 * Started under a soft RLIMIT_NOFILE of 64, kvcached raises it to the
 * hard one; past that many namespaces (which make no descriptor each: a
 * fast index segment is made at its namespace's first FAST_NS) and
 * clients, every client still connects and tier files are still written.
 */
TEST_F_TIMEOUT(kvcd, descriptors_past_a_low_soft_limit, 120)
{
	static struct kvcc cl[MANY_CLIENTS];
	char why[512], g3[PATH_MAX], conf[PATH_MAX + 128];
	uint32_t ns[MANY_NS];
	struct kvcache_handle h[2];
	struct rlimit rl, low;
	kvc_key keys[2];
	int fd0, fd1, ret;

	ASSERT_EQ(0, getrlimit(RLIMIT_NOFILE, &rl));
	if (rl.rlim_max < 4 * (rlim_t)(MANY_NS + MANY_CLIENTS))
		SKIP(return, "hard RLIMIT_NOFILE %llu is too low to test",
		     (unsigned long long)rl.rlim_max);
	if (rl.rlim_cur < 2 * (rlim_t)MANY_CLIENTS + 64) {
		low = rl;
		low.rlim_cur = 2 * MANY_CLIENTS + 64;
		ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &low));
		rl = low;
	}
	ns_ids(self, MANY_NS_BASE, MANY_NS, ns);
	if (geteuid() != 0) {
		char path[PATH_MAX + 32];
		FILE *f;

		snprintf(path, sizeof(path), "%s/namespaces", self->state);
		f = fopen(path, "ae");
		ASSERT_NE(NULL, f);
		for (uint32_t i = 0; i < MANY_NS; i++)
			fprintf(f, "%u %u %u %o\n", ns[i], (unsigned)geteuid(),
				(unsigned)getegid(), 0700);
		fclose(f);
	}

	/* The daemon inherits a soft limit of 64; ours comes back after. */
	g3_through(g3, sizeof(g3), conf, sizeof(conf));
	low = rl;
	low.rlim_cur = LOW_NOFILE;
	ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &low));
	ret = restart(self, conf, why, sizeof(why));
	ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &rl));
	ASSERT_EQ(0, ret) TH_LOG("%s", why);
	EXPECT_EQ((unsigned long long)rl.rlim_max, soft_nofile(self->daemon));

	fd0 = open_fds(self->daemon);
	for (uint32_t i = 0; geteuid() == 0 && i < MANY_NS; i++) {
		ASSERT_EQ(0, kvcc_ns_create(&self->c, ns[i], 0, 0, 0700))
			TH_LOG("NS_CREATE %u: %s", ns[i], self->c.why);
	}
	fd1 = open_fds(self->daemon);
	/* No segment per namespace (kernel mode made one each). */
	EXPECT_GT(MANY_NS / 2, fd1 - fd0) TH_LOG("%d descriptors before, %d after", fd0, fd1);

	for (int i = 0; i < MANY_CLIENTS; i++) {
		ASSERT_EQ(0, kvcc_open(&cl[i], self->sock)) TH_LOG("client %d", i);
		ASSERT_EQ(0, kvcc_hello(&cl[i])) TH_LOG("client %d: %s", i, cl[i].why);
	}
	EXPECT_LE(fd1 + MANY_CLIENTS, open_fds(self->daemon));

	/* Tier files: blocks of the last namespaces are written to g3. */
	for (uint32_t i = 0; i < 2; i++) {
		chain_keys(self, 300 + i, 2, keys);
		ASSERT_EQ(0, store_chain(self, ns[MANY_NS - 1 - i], keys, 2,
					 false, h))
			TH_LOG("%s", self->c.why);
	}
	EXPECT_EQ(4u, wait_stat(&self->c, "g3_spills", 4, 30));
	EXPECT_EQ(0u, kvcc_stat1(&self->c, "g3_spill_errors"));
	for (int i = 0; i < MANY_CLIENTS; i++)
		EXPECT_NE(UINT64_MAX, kvcc_stat1(&cl[i], "lookups"));

	if (self->mode == KVC_PROTO_MODE_KERNEL) {
		struct kvc_fastidx *f = NULL;
		struct kvc_fastidx_hit hit;

		/*
		 * The first FAST_NS makes its segment, with the blocks stored
		 * before it (keys: the last chain, of ns[MANY_NS - 2]); a
		 * second one makes nothing more.
		 */
		fd0 = open_fds(self->daemon);
		ASSERT_EQ(0, fast_ns(&self->c, ns[MANY_NS - 2]))
			TH_LOG("%s", self->c.why);
		check_segment(_metadata, self, &self->c);
		fd1 = open_fds(self->daemon);
		EXPECT_LE(fd0 + 1, fd1);
		ASSERT_EQ(0, kvc_fastidx_attach(self->c.rx_fd, self->nr, &f));
		EXPECT_TRUE(kvc_fastidx_find(f, ns[MANY_NS - 2], keys[0], NULL,
					     KVC_FASTIDX_CHAIN, &hit));
		EXPECT_TRUE(kvc_fastidx_find(f, ns[MANY_NS - 2], keys[1],
					     keys[0], KVC_FASTIDX_CHAIN, &hit));
		kvc_fastidx_detach(f);
		ASSERT_EQ(0, fast_ns(&self->c, ns[MANY_NS - 2]));
		EXPECT_EQ(fd1, open_fds(self->daemon));
	}
	for (int i = 0; i < MANY_CLIENTS; i++)
		kvcc_close(&cl[i]);
	kvcc_close(&self->c);
	daemon_stop(self);
	if (self->mode == KVC_PROTO_MODE_KERNEL && self->dev >= 0)
		for (uint32_t i = 0; i < MANY_NS; i++)
			kernel_ns_cleanup(self->dev, ns[i]);
	rm_rf(g3);
}

#define BUDGET_NOFILE	256
#define BUDGET_NS	160

/*
 * Kernel mode: fast index segments take at most the descriptors the
 * limit leaves for them (half of a limit this low), then FAST_NS says
 * EMFILE; the clients still connect on the rest.
 */
TEST_F_TIMEOUT(kvcd, fast_index_segments_keep_a_reserve, 180)
{
	static char *const wrap[] = {
		"/bin/sh", "-c", "ulimit -n 256 && exec \"$0\" \"$@\"", NULL,
	};
	static struct kvcc cl[50];
	uint32_t ns[BUDGET_NS];
	int made = 0, refused = 0, other = 0;
	char why[512];

	if (self->mode != KVC_PROTO_MODE_KERNEL)
		SKIP(return, "kernel mode: a segment per namespace");
	if (geteuid() != 0)
		SKIP(return, "needs root: NS_CREATE");
	self->wrap = wrap;
	ASSERT_EQ(0, restart(self, NULL, why, sizeof(why))) TH_LOG("%s", why);
	ASSERT_EQ(BUDGET_NOFILE, soft_nofile(self->daemon));
	ns_ids(self, BUDGET_NS_BASE, BUDGET_NS, ns);
	for (uint32_t i = 0; i < BUDGET_NS; i++) {
		int32_t r;

		ASSERT_EQ(0, kvcc_ns_create(&self->c, ns[i], 0, 0, 0700))
			TH_LOG("NS_CREATE %u: %s", ns[i], self->c.why);
		r = fast_ns(&self->c, ns[i]);
		if (!r)
			made++;
		else if (r == -EMFILE)
			refused++;
		else
			other++;
	}
	EXPECT_EQ(BUDGET_NOFILE / 2, made);
	EXPECT_EQ(BUDGET_NS - BUDGET_NOFILE / 2, refused);
	EXPECT_EQ(0, other);
	for (int i = 0; i < 50; i++) {
		ASSERT_EQ(0, kvcc_open(&cl[i], self->sock)) TH_LOG("client %d", i);
		ASSERT_EQ(0, kvcc_hello(&cl[i])) TH_LOG("client %d: %s", i, cl[i].why);
	}
	for (int i = 0; i < 50; i++)
		kvcc_close(&cl[i]);
	kvcc_close(&self->c);
	daemon_stop(self);
	if (self->dev >= 0)
		for (uint32_t i = 0; i < BUDGET_NS; i++)
			kernel_ns_cleanup(self->dev, ns[i]);
}

/* CPU time process pid has used, in clock ticks (/proc/PID/stat). */
static long cpu_ticks(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long ut, st;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	p = strrchr(buf, ')');	/* comm may hold spaces */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
			 &ut, &st) != 2)
		return -1;
	return (long)(ut + st);
}

#define TIGHT_NOFILE	48
#define TIGHT_CLIENTS	80

/*
 * Out of descriptors, kvcached refuses what it cannot take (the client
 * sees its connection end) instead of leaving it queued, and does not
 * spin on the accept that keeps failing: over a second with clients
 * still queued it uses far less than a second of CPU (a loop retrying
 * the failing accept used all of it). Once clients go, new ones connect.
 */
TEST_F_TIMEOUT(kvcd, out_of_descriptors_refuses_without_spinning, 120)
{
	static char *const wrap[] = {
		"/bin/sh", "-c", "ulimit -n 48 && exec \"$0\" \"$@\"", NULL,
	};
	int fds[TIGHT_CLIENTS], refused = 0, open_ = 0;
	long hz = sysconf(_SC_CLK_TCK), t0, t1;
	char why[512];
	struct kvcc late;

	self->wrap = wrap;
	ASSERT_EQ(0, restart(self, NULL, why, sizeof(why))) TH_LOG("%s", why);
	ASSERT_EQ(TIGHT_NOFILE, soft_nofile(self->daemon));
	for (int i = 0; i < TIGHT_CLIENTS; i++) {
		fds[i] = kvcc_connect_fd(self->sock);
		ASSERT_LE(0, fds[i]) TH_LOG("connect %d: %s", i, strerror(-fds[i]));
	}
	/* Each connection is taken or refused: wait for the refused ones. */
	msleep(500);
	t0 = cpu_ticks(self->daemon);
	msleep(1000);
	t1 = cpu_ticks(self->daemon);
	ASSERT_LE(0, t0);
	EXPECT_GT(hz / 2, t1 - t0) TH_LOG("%ld of %ld ticks in a second", t1 - t0, hz);
	for (int i = 0; i < TIGHT_CLIENTS; i++) {
		struct pollfd pfd = { .fd = fds[i], .events = POLLIN };

		if (poll(&pfd, 1, 0) == 1)
			refused++;	/* ended by the daemon */
		else
			open_++;
	}
	EXPECT_LT(0, refused);
	EXPECT_LT(0, open_);
	for (int i = 0; i < TIGHT_CLIENTS; i++)
		close(fds[i]);
	/* The descriptors came back: a client connects and says HELLO. */
	ASSERT_EQ(0, kvcc_open(&late, self->sock));
	EXPECT_EQ(0, kvcc_hello(&late)) TH_LOG("%s", late.why);
	kvcc_close(&late);
}

TEST_HARNESS_MAIN
