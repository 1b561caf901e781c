// SPDX-License-Identifier: GPL-2.0
/*
 * Selftests for the kvcache block pool: the block lifecycle through the
 * ioctls and mmap, sharing between processes, what a dying writer leaves
 * (nothing), pins against eviction, namespaces and permissions, every
 * documented error, the sysfs gauges, and the netlink pressure events.
 * Runs as root in the test VM; each test works in a namespace of its own.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>

#include "kselftest_harness.h"
#include "kvc_ioctl.h"
#include "kvc_sysfs.h"

/* Fill or check a block with a pattern derived from seed. */
static void pattern(uint8_t *p, uint64_t n, uint32_t seed)
{
	for (uint64_t i = 0; i < n; i += 4096)
		memset(p + i, (int)((seed + i / 4096) & 0xff), 4096);
}

static int pattern_ok(const uint8_t *p, uint64_t n, uint32_t seed)
{
	for (uint64_t i = 0; i < n; i += 4096) {
		uint8_t want = (seed + i / 4096) & 0xff;

		if (p[i] != want || p[i + 4095] != want)
			return 0;
	}
	return 1;
}

/* Every sealed block of ns, through QUERY. Returns how many were found. */
static int query_ns(int fd, uint32_t ns, struct kvcache_block_info *out,
		    uint32_t room)
{
	struct kvcache_query q = {
		.size = sizeof(q), .count = room, .ns_id = ns,
		.entries = (uintptr_t)out,
	};

	if (ioctl(fd, KVCACHE_IOC_QUERY, &q))
		return -errno;
	return (int)q.count;
}

/* A fresh sealed block of ns filled with seed's pattern. */
static int make_block(int fd, uint32_t ns, uint64_t bs, uint32_t seed,
		      struct kvcache_handle *h)
{
	return kvc_make_sealed(fd, ns, bs, seed, pattern, h);
}

FIXTURE(pool) {
	int fd;
	uint32_t ns;
	uint64_t bs;
};

FIXTURE_SETUP(pool)
{
	self->fd = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->fd);
	self->bs = kvc_block_size(self->fd);
	ASSERT_NE(0, self->bs);
	self->ns = (uint32_t)(getpid() % 60000) + 1;
	ASSERT_EQ(0, kvc_ns(self->fd, 1, self->ns, 0, 0, 0700));
}

FIXTURE_TEARDOWN(pool)
{
	struct kvcache_block_info b[64];
	int n;

	/* Evict what the test left sealed, then drop the namespace. */
	while ((n = query_ns(self->fd, self->ns, b, 64)) > 0)
		for (int i = 0; i < n; i++)
			if (kvc_evict(self->fd, b[i].handle))
				goto out;
out:
	close(self->fd);
	self->fd = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	kvc_ns(self->fd, 0, self->ns, 0, 0, 0);
	close(self->fd);
}

TEST_F(pool, info_reports_the_pool_features)
{
	struct kvcache_info info = { .size = sizeof(info) };

	ASSERT_EQ(0, kvc_ioc(self->fd, KVCACHE_IOC_INFO, &info));
	EXPECT_TRUE(info.features & KVCACHE_FEAT_POOL);
	EXPECT_TRUE(info.features & KVCACHE_FEAT_NETLINK);
	EXPECT_LT(0, info.nr_blocks);
}

TEST_F(pool, lifecycle_write_seal_pin_map_evict)
{
	struct kvcache_block_info b[4];
	struct kvcache_handle h;
	uint64_t sealed0 = kvc_attr_u64("pool/sealed_blocks");
	uint64_t free0 = kvc_attr_u64("pool/free_blocks");
	uint8_t *p;

	ASSERT_EQ(0, kvc_alloc(self->fd, self->ns, 1, &h));
	EXPECT_EQ(free0 - 1, kvc_attr_u64("pool/free_blocks"));
	EXPECT_EQ(1, kvc_attr_u64("pool/writable_blocks"));
	p = kvc_map(self->fd, h.index, self->bs, PROT_READ | PROT_WRITE);
	ASSERT_NE(NULL, p);
	/* A fresh block is zeroed. */
	for (uint64_t i = 0; i < self->bs; i += 512)
		ASSERT_EQ(0, p[i]);
	pattern(p, self->bs, 7);

	/* Mapped writable: sealing must wait for the unmap. */
	EXPECT_EQ(-EBUSY, kvc_seal(self->fd, h, self->bs, 7, 0));
	munmap(p, self->bs);
	ASSERT_EQ(0, kvc_seal(self->fd, h, self->bs - 100, 0xab, 0));
	EXPECT_EQ(sealed0 + 1, kvc_attr_u64("pool/sealed_blocks"));

	/* The metadata comes back from QUERY. */
	ASSERT_EQ(1, query_ns(self->fd, self->ns, b, 4));
	EXPECT_EQ(h.index, b[0].handle.index);
	EXPECT_EQ(h.gen, b[0].handle.gen);
	EXPECT_EQ(self->ns, b[0].ns_id);
	EXPECT_EQ(self->bs - 100, b[0].payload_len);
	EXPECT_EQ(0xab, b[0].key[0]);
	EXPECT_EQ(0xab, b[0].key[31]);

	/* Read-only mapping needs a pin; with it, the bytes are there. */
	EXPECT_EQ(NULL, kvc_map(self->fd, h.index, self->bs, PROT_READ));
	EXPECT_EQ(EACCES, errno);
	ASSERT_EQ(0, kvc_pin(self->fd, h));
	EXPECT_EQ(NULL, kvc_map(self->fd, h.index, self->bs,
				PROT_READ | PROT_WRITE));
	EXPECT_EQ(EACCES, errno);
	p = kvc_map(self->fd, h.index, self->bs, PROT_READ);
	ASSERT_NE(NULL, p);
	EXPECT_TRUE(pattern_ok(p, self->bs, 7));
	/* No way to make the mapping writable afterwards. */
	EXPECT_EQ(-1, mprotect(p, self->bs, PROT_READ | PROT_WRITE));
	EXPECT_EQ(EACCES, errno);

	/* Pinned, then only mapped: both keep the block. */
	EXPECT_EQ(-EBUSY, kvc_evict(self->fd, h));
	ASSERT_EQ(0, kvc_unpin(self->fd, h));
	EXPECT_EQ(-EBUSY, kvc_evict(self->fd, h));
	EXPECT_TRUE(pattern_ok(p, self->bs, 7));
	munmap(p, self->bs);
	ASSERT_EQ(0, kvc_evict(self->fd, h));
	EXPECT_EQ(sealed0, kvc_attr_u64("pool/sealed_blocks"));
	EXPECT_EQ(free0, kvc_attr_u64("pool/free_blocks"));

	/*
	 * The handle is stale now. SEAL checks ownership first: the block
	 * is no writable block of this file, so EPERM, as for any handle
	 * that is not the caller's (it says nothing of the block's state).
	 */
	EXPECT_EQ(-ESTALE, kvc_pin(self->fd, h));
	EXPECT_EQ(-ESTALE, kvc_evict(self->fd, h));
	EXPECT_EQ(-EPERM, kvc_seal(self->fd, h, 1, 0, 0));
}

TEST_F(pool, reallocated_block_is_zeroed_and_has_a_new_generation)
{
	struct kvcache_handle h, h2;
	uint8_t *p;

	ASSERT_EQ(0, make_block(self->fd, self->ns, self->bs, 9, &h));
	ASSERT_EQ(0, kvc_evict(self->fd, h));
	ASSERT_EQ(0, kvc_alloc(self->fd, self->ns, 1, &h2));
	/* LIFO free stack: the same block comes back, one generation on. */
	EXPECT_EQ(h.index, h2.index);
	EXPECT_EQ(h.gen + 1, h2.gen);
	p = kvc_map(self->fd, h2.index, self->bs, PROT_READ);
	ASSERT_NE(NULL, p);
	for (uint64_t i = 0; i < self->bs; i += 256)
		ASSERT_EQ(0, p[i]);
	munmap(p, self->bs);
	/* The old handle names nothing, even though the index is in use. */
	EXPECT_EQ(-ESTALE, kvc_seal(self->fd, h, 1, 0, 0));
}

/*
 * DISCARD: a writer gives back one block it will not seal (kvcached
 * after a read into it failed) and keeps its others; only its own,
 * current, unmapped writable block; what it wrote is never seen again.
 */
TEST_F(pool, discard_gives_back_one_unsealed_block)
{
	struct kvcache_info info = { .size = sizeof(info) };
	uint64_t discards0 = kvc_attr_u64("stats/discards");
	uint64_t free0 = kvc_attr_u64("pool/free_blocks");
	struct kvcache_handle h[2], stale, again;
	int other, ro;
	uint8_t *p;

	ASSERT_EQ(0, kvc_ioc(self->fd, KVCACHE_IOC_INFO, &info));
	EXPECT_TRUE(info.features & KVCACHE_FEAT_DISCARD);
	ASSERT_EQ(0, kvc_alloc(self->fd, self->ns, 2, h));
	p = kvc_map(self->fd, h[0].index, self->bs, PROT_READ | PROT_WRITE);
	ASSERT_NE(NULL, p);
	pattern(p, self->bs, 5);

	/* Mapped writable: unmap first, as for SEAL. */
	EXPECT_EQ(-EBUSY, kvc_discard(self->fd, h[0]));
	munmap(p, self->bs);
	/* Not another file's, nor through a read-only open of it. */
	other = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, other);
	EXPECT_EQ(-EPERM, kvc_discard(other, h[0]));
	close(other);
	ro = open(KVCACHE_DEVICE_PATH, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, ro);
	EXPECT_EQ(-EBADF, kvc_discard(ro, h[0]));
	close(ro);
	stale = h[0];
	stale.gen++;
	EXPECT_EQ(-ESTALE, kvc_discard(self->fd, stale));
	stale.index = (uint32_t)info.nr_blocks;
	EXPECT_EQ(-EINVAL, kvc_discard(self->fd, stale));

	ASSERT_EQ(0, kvc_discard(self->fd, h[0]));
	EXPECT_EQ(discards0 + 1, kvc_attr_u64("stats/discards"));
	EXPECT_EQ(1, kvc_attr_u64("pool/writable_blocks"));
	EXPECT_EQ(free0 - 1, kvc_attr_u64("pool/free_blocks"));
	/* Gone: not ours any more, twice or to seal. */
	EXPECT_EQ(-EPERM, kvc_discard(self->fd, h[0]));
	EXPECT_EQ(-EPERM, kvc_seal(self->fd, h[0], 1, 0, 0));
	/* The other block is still ours; sealed, it is not given back. */
	ASSERT_EQ(0, kvc_seal(self->fd, h[1], 1, 0x11, 0));
	EXPECT_EQ(-EPERM, kvc_discard(self->fd, h[1]));

	/* LIFO free stack: the block comes back zeroed, a generation on. */
	ASSERT_EQ(0, kvc_alloc(self->fd, self->ns, 1, &again));
	EXPECT_EQ(h[0].index, again.index);
	EXPECT_EQ(h[0].gen + 1, again.gen);
	p = kvc_map(self->fd, again.index, self->bs, PROT_READ | PROT_WRITE);
	ASSERT_NE(NULL, p);
	for (uint64_t i = 0; i < self->bs; i += 256)
		ASSERT_EQ(0, p[i]);
	munmap(p, self->bs);
	ASSERT_EQ(0, kvc_discard(self->fd, again));
}

/* QUERY with flags: one call's answer, and its next. */
static int query_at(int fd, uint32_t flags, uint32_t start, uint32_t room,
		    struct kvcache_block_info *out, uint32_t *next)
{
	struct kvcache_query q = {
		.size = sizeof(q), .flags = flags, .start = start,
		.count = room, .entries = (uintptr_t)out,
	};

	if (ioctl(fd, KVCACHE_IOC_QUERY, &q))
		return -errno;
	if (next)
		*next = q.next;
	return (int)q.count;
}

/*
 * QUERY_EXACT looks at the indexes it names and no others: a free index
 * with a sealed block after it lists nothing (a plain QUERY walks on to
 * that block), a sealed one lists itself. kvcached checks a client's
 * handle this way, in time that does not depend on where other tenants'
 * blocks lie.
 */
TEST_F(pool, query_exact_looks_at_its_indexes_only)
{
	struct kvcache_info info = { .size = sizeof(info) };
	struct kvcache_block_info b[4];
	struct kvcache_handle h[2], lo, hi;
	uint32_t next = 0;

	ASSERT_EQ(0, kvc_ioc(self->fd, KVCACHE_IOC_INFO, &info));
	ASSERT_TRUE(info.features & KVCACHE_FEAT_QUERY_EXACT);
	ASSERT_EQ(0, make_block(self->fd, self->ns, self->bs, 0x31, &h[0]));
	ASSERT_EQ(0, make_block(self->fd, self->ns, self->bs, 0x32, &h[1]));
	lo = h[0].index < h[1].index ? h[0] : h[1];
	hi = h[0].index < h[1].index ? h[1] : h[0];

	/* Sealed: itself, with its metadata. */
	ASSERT_EQ(1, query_at(self->fd, KVCACHE_QUERY_EXACT, hi.index, 1, b,
			      &next));
	EXPECT_EQ(hi.index, b[0].handle.index);
	EXPECT_EQ(hi.gen, b[0].handle.gen);
	EXPECT_EQ(self->ns, b[0].ns_id);
	EXPECT_EQ(hi.index + 1, next);

	/* Freed: a plain QUERY walks on past it, an exact one does not. */
	ASSERT_EQ(0, kvc_evict(self->fd, lo));
	ASSERT_EQ(1, query_at(self->fd, 0, lo.index, 1, b, &next));
	EXPECT_LT(lo.index, b[0].handle.index);
	EXPECT_EQ(0, query_at(self->fd, KVCACHE_QUERY_EXACT, lo.index, 1, b,
			      &next));
	EXPECT_EQ(lo.index + 1, next);
	/* A range of them: up to hi, and nothing past it. */
	if (hi.index - lo.index < 4) {
		int n = query_at(self->fd, KVCACHE_QUERY_EXACT, lo.index,
				 hi.index - lo.index + 1, b, &next);

		ASSERT_LE(1, n);
		EXPECT_EQ(hi.index, b[n - 1].handle.index);
		EXPECT_EQ(hi.index + 1, next);
	}

	/* Beyond the pool, and start + count past 2^32: nothing, done. */
	EXPECT_EQ(0, query_at(self->fd, KVCACHE_QUERY_EXACT,
			      (uint32_t)info.nr_blocks, 1, b, &next));
	EXPECT_EQ(info.nr_blocks, next);
	EXPECT_EQ(0, query_at(self->fd, KVCACHE_QUERY_EXACT, UINT32_MAX - 1,
			      4, b, &next));
	EXPECT_EQ(info.nr_blocks, next);
	/* Unknown flags are refused. */
	EXPECT_EQ(-EINVAL, query_at(self->fd, 2, 0, 1, b, &next));
}

TEST_F(pool, two_processes_share_a_block_that_outlives_its_writer)
{
	struct kvcache_handle h;
	int pfd[2], status;
	pid_t pid;
	uint8_t *p;

	ASSERT_EQ(0, pipe(pfd));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		/* The writer: its own open file, gone when it exits. */
		int fd = open(KVCACHE_DEVICE_PATH, O_RDWR);

		if (fd < 0 || make_block(fd, self->ns, self->bs, 33, &h))
			_exit(1);
		if (write(pfd[1], &h, sizeof(h)) != sizeof(h))
			_exit(2);
		_exit(0);
	}
	ASSERT_EQ(sizeof(h), read(pfd[0], &h, sizeof(h)));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_EQ(0, status);

	/* The reader pins and maps what the dead writer sealed. */
	ASSERT_EQ(0, kvc_pin(self->fd, h));
	p = kvc_map(self->fd, h.index, self->bs, PROT_READ);
	ASSERT_NE(NULL, p);
	EXPECT_TRUE(pattern_ok(p, self->bs, 33));

	/* A third process reads it at the same time. */
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int fd = open(KVCACHE_DEVICE_PATH, O_RDWR);
		uint8_t *q;

		if (fd < 0 || kvc_pin(fd, h))
			_exit(1);
		q = kvc_map(fd, h.index, self->bs, PROT_READ);
		_exit(q && pattern_ok(q, self->bs, 33) ? 0 : 3);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_EQ(0, status);
	munmap(p, self->bs);
	ASSERT_EQ(0, kvc_unpin(self->fd, h));
}

TEST_F(pool, killed_writer_leaves_nothing_visible)
{
	uint64_t writable0 = kvc_attr_u64("pool/writable_blocks");
	uint64_t free0 = kvc_attr_u64("pool/free_blocks");
	struct kvcache_block_info b[4];
	struct kvcache_handle h[4];
	int pfd[2], status;
	pid_t pid;

	ASSERT_EQ(0, pipe(pfd));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int fd = open(KVCACHE_DEVICE_PATH, O_RDWR);
		uint8_t *p;

		if (fd < 0 || kvc_alloc(fd, self->ns, 4, h))
			_exit(1);
		p = kvc_map(fd, h[0].index, self->bs, PROT_READ | PROT_WRITE);
		if (!p)
			_exit(2);
		pattern(p, self->bs / 2, 5);	/* half written */
		if (write(pfd[1], h, sizeof(h)) != sizeof(h))
			_exit(3);
		for (;;)
			pause();
	}
	ASSERT_EQ(sizeof(h), read(pfd[0], h, sizeof(h)));
	EXPECT_EQ(writable0 + 4, kvc_attr_u64("pool/writable_blocks"));
	/* Another file can neither seal nor pin the writer's blocks. */
	EXPECT_EQ(-EPERM, kvc_seal(self->fd, h[0], 1, 0, 0));
	EXPECT_EQ(-EBUSY, kvc_pin(self->fd, h[0]));
	EXPECT_EQ(NULL, kvc_map(self->fd, h[0].index, self->bs, PROT_READ));

	ASSERT_EQ(0, kill(pid, SIGKILL));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFSIGNALED(status));

	/* Every block is free again and no handle of it works. */
	EXPECT_EQ(writable0, kvc_attr_u64("pool/writable_blocks"));
	EXPECT_EQ(free0, kvc_attr_u64("pool/free_blocks"));
	EXPECT_EQ(0, query_ns(self->fd, self->ns, b, 4));
	for (int i = 0; i < 4; i++) {
		EXPECT_EQ(-ESTALE, kvc_pin(self->fd, h[i]));
		/* Not this file's writable block (ownership comes first). */
		EXPECT_EQ(-EPERM, kvc_seal(self->fd, h[i], 1, 0, 0));
	}
}

TEST_F(pool, batches_stop_at_the_first_error_and_report_done)
{
	struct kvcache_handle h[3];
	uint32_t done = 99;

	for (int i = 0; i < 3; i++)
		ASSERT_EQ(0, make_block(self->fd, self->ns, self->bs, i, &h[i]));
	h[1].gen++;	/* stale in the middle */
	EXPECT_EQ(-ESTALE, kvc_batch(self->fd, KVCACHE_IOC_PIN, h, 3, &done));
	EXPECT_EQ(1, done);
	h[1].gen--;
	/* h[0] is pinned once: unpin of all three stops at h[1]. */
	EXPECT_EQ(-EINVAL, kvc_batch(self->fd, KVCACHE_IOC_UNPIN, h, 3, &done));
	EXPECT_EQ(1, done);
	EXPECT_EQ(0, kvc_batch(self->fd, KVCACHE_IOC_PIN, h, 3, &done));
	EXPECT_EQ(3, done);
	EXPECT_EQ(0, kvc_batch(self->fd, KVCACHE_IOC_UNPIN, h, 3, &done));
	EXPECT_EQ(3, done);
	EXPECT_EQ(0, kvc_batch(self->fd, KVCACHE_IOC_EVICT, h, 3, &done));
	EXPECT_EQ(3, done);
}

TEST_F(pool, kvcachectl_lists_sealed_blocks)
{
	const char *top = getenv("KVC_TOP");
	struct kvcache_handle h;
	char cmd[512], line[256];
	int found = 0, total = 0;
	FILE *out;

	if (!top)
		SKIP(return, "KVC_TOP not set (run under scripts/vm)");
	ASSERT_EQ(0, make_block(self->fd, self->ns, self->bs, 0x5c, &h));
	snprintf(cmd, sizeof(cmd), "%s/build/helper/kvcachectl blocks %u",
		 top, self->ns);
	out = popen(cmd, "r");
	ASSERT_NE(NULL, out);
	/* index gen ns payload pins key: the key is 32 bytes of 0x5c */
	while (fgets(line, sizeof(line), out)) {
		unsigned int idx, gen, ns, len, pins;
		char key[80];

		if (sscanf(line, "%u %u %u %u %u %79s", &idx, &gen, &ns, &len,
			   &pins, key) == 6 && idx == h.index) {
			found = gen == h.gen && ns == self->ns &&
				len == self->bs && pins == 0 &&
				!strncmp(key, "5c5c5c5c", 8) && strlen(key) == 64;
		}
		sscanf(line, "%d sealed block", &total);
	}
	EXPECT_EQ(0, pclose(out));
	EXPECT_TRUE(found);
	EXPECT_EQ(1, total);

	/* A bad namespace argument is a usage error. */
	snprintf(cmd, sizeof(cmd),
		 "%s/build/helper/kvcachectl blocks 70000 >/dev/null 2>&1", top);
	EXPECT_EQ(2, WEXITSTATUS(system(cmd)));
}

TEST_F(pool, seal_keep_pin_leaves_the_writer_a_pin)
{
	struct kvcache_handle h;
	uint8_t *p;

	ASSERT_EQ(0, kvc_alloc(self->fd, self->ns, 1, &h));
	ASSERT_EQ(0, kvc_seal(self->fd, h, 1, 1, KVCACHE_SEAL_KEEP_PIN));
	EXPECT_EQ(-EBUSY, kvc_evict(self->fd, h));
	p = kvc_map(self->fd, h.index, self->bs, PROT_READ);
	EXPECT_NE(NULL, p);
	if (p)
		munmap(p, self->bs);
	ASSERT_EQ(0, kvc_unpin(self->fd, h));
	EXPECT_EQ(0, kvc_evict(self->fd, h));
}

/* Splice the block's pages into a pipe: references the mapping does not own. */
static int splice_in(int pfd[2], void *p, size_t len)
{
	struct iovec iov = { .iov_base = p, .iov_len = len };

	if (pipe(pfd))
		return -1;
	fcntl(pfd[1], F_SETPIPE_SZ, (int)len);
	return vmsplice(pfd[1], &iov, 1, 0) > 0 ? 0 : -1;
}

static void drain_pipe(int pfd[2])
{
	char buf[4096];

	close(pfd[1]);
	while (read(pfd[0], buf, sizeof(buf)) > 0)
		;
	close(pfd[0]);
}

TEST_F(pool, page_references_outside_the_pool_hold_seal_evict_and_reuse)
{
	struct kvcache_handle h;
	int pfd[2], status;
	uint8_t *p;
	pid_t pid;

	/* A writer's pages in a pipe could still change: no seal. */
	ASSERT_EQ(0, kvc_alloc(self->fd, self->ns, 1, &h));
	p = kvc_map(self->fd, h.index, self->bs, PROT_READ | PROT_WRITE);
	ASSERT_NE(NULL, p);
	ASSERT_EQ(0, splice_in(pfd, p, 4096));
	munmap(p, self->bs);
	EXPECT_EQ(-EBUSY, kvc_seal(self->fd, h, 1, 1, 0));
	drain_pipe(pfd);
	ASSERT_EQ(0, kvc_seal(self->fd, h, 1, 1, 0));

	/* A reader's pages in a pipe keep the block from eviction. */
	ASSERT_EQ(0, kvc_pin(self->fd, h));
	p = kvc_map(self->fd, h.index, self->bs, PROT_READ);
	ASSERT_NE(NULL, p);
	ASSERT_EQ(0, splice_in(pfd, p, 4096));
	munmap(p, self->bs);
	ASSERT_EQ(0, kvc_unpin(self->fd, h));
	EXPECT_EQ(-EBUSY, kvc_evict(self->fd, h));
	drain_pipe(pfd);
	ASSERT_EQ(0, kvc_evict(self->fd, h));

	/* A dead writer's block whose pages sit in a pipe: quarantined. */
	ASSERT_EQ(0, pipe(pfd));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int fd = open(KVCACHE_DEVICE_PATH, O_RDWR);
		struct iovec iov;
		uint8_t *q;

		if (fd < 0 || kvc_alloc(fd, self->ns, 1, &h))
			_exit(1);
		q = kvc_map(fd, h.index, self->bs, PROT_READ | PROT_WRITE);
		if (!q)
			_exit(2);
		iov.iov_base = q;
		iov.iov_len = 4096;
		_exit(vmsplice(pfd[1], &iov, 1, 0) > 0 ? 0 : 3);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_EQ(0, status);
	EXPECT_EQ(1, kvc_attr_u64("pool/quarantined_blocks"));
	EXPECT_EQ(0, kvc_attr_u64("pool/writable_blocks"));
	drain_pipe(pfd);
	/* The next allocation finds it free again. */
	ASSERT_EQ(0, kvc_alloc(self->fd, self->ns, 1, &h));
	EXPECT_EQ(0, kvc_attr_u64("pool/quarantined_blocks"));
}

TEST_F(pool, read_only_open_cannot_allocate)
{
	struct kvcache_handle h;
	int fd = open(KVCACHE_DEVICE_PATH, O_RDONLY);

	ASSERT_LE(0, fd);
	EXPECT_EQ(-EBADF, kvc_alloc(fd, self->ns, 1, &h));
	close(fd);
}

TEST_F(pool, forked_mapping_is_counted_like_any_other)
{
	struct kvcache_handle h;
	int pfd[2], status;
	uint8_t *p;
	pid_t pid;
	char c;

	ASSERT_EQ(0, make_block(self->fd, self->ns, self->bs, 4, &h));
	ASSERT_EQ(0, kvc_pin(self->fd, h));
	p = kvc_map(self->fd, h.index, self->bs, PROT_READ);
	ASSERT_NE(NULL, p);
	ASSERT_EQ(0, madvise(p, self->bs, MADV_DOFORK));
	ASSERT_EQ(0, pipe(pfd));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		/* Holds the inherited mapping until the parent says so. */
		close(pfd[1]);
		if (read(pfd[0], &c, 1) != 1)
			_exit(1);
		_exit(pattern_ok(p, self->bs, 4) ? 0 : 2);
	}
	close(pfd[0]);
	munmap(p, self->bs);
	ASSERT_EQ(0, kvc_unpin(self->fd, h));
	/* The child's copy of the mapping still holds the block. */
	EXPECT_EQ(-EBUSY, kvc_evict(self->fd, h));
	ASSERT_EQ(1, write(pfd[1], "x", 1));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_EQ(0, status);
	EXPECT_EQ(0, kvc_evict(self->fd, h));
	close(pfd[1]);
}

TEST_F(pool, bad_handles_sizes_and_flags)
{
	struct kvcache_handle h, bad;
	struct kvcache_batch b;
	struct kvcache_alloc a;
	uint64_t nr = kvc_attr_u64("pool/nr_blocks");

	ASSERT_EQ(0, make_block(self->fd, self->ns, self->bs, 1, &h));

	/* Out of range, stale, and never handed out. */
	bad = (struct kvcache_handle){ .index = (uint32_t)nr, .gen = 0 };
	EXPECT_EQ(-EINVAL, kvc_pin(self->fd, bad));
	EXPECT_EQ(-EINVAL, kvc_evict(self->fd, bad));
	EXPECT_EQ(-EINVAL, kvc_seal(self->fd, bad, 1, 0, 0));
	bad = (struct kvcache_handle){ .index = UINT32_MAX, .gen = h.gen };
	EXPECT_EQ(-EINVAL, kvc_pin(self->fd, bad));
	bad = h;
	bad.gen ^= 0x80000000u;
	EXPECT_EQ(-ESTALE, kvc_pin(self->fd, bad));
	EXPECT_EQ(-ESTALE, kvc_evict(self->fd, bad));

	/* Unpin of a block this file did not pin. */
	EXPECT_EQ(-EINVAL, kvc_unpin(self->fd, h));

	/* Seal: already sealed (no writable block of ours), bad lengths. */
	EXPECT_EQ(-EPERM, kvc_seal(self->fd, h, 1, 0, 0));
	ASSERT_EQ(0, kvc_alloc(self->fd, self->ns, 1, &bad));
	EXPECT_EQ(-EINVAL, kvc_seal(self->fd, bad, 0, 0, 0));
	EXPECT_EQ(-EINVAL, kvc_seal(self->fd, bad, self->bs + 1, 0, 0));
	EXPECT_EQ(-EINVAL, kvc_seal(self->fd, bad, 1, 0, 0x2));

	/* Batch header: counts, flags, reserved, done, sizes, pointers. */
	memset(&b, 0, sizeof(b));
	b.size = sizeof(b);
	b.entries = (uintptr_t)&h;
	EXPECT_EQ(-EINVAL, kvc_ioc(self->fd, KVCACHE_IOC_PIN, &b));	/* 0 */
	b.count = KVCACHE_MAX_BATCH + 1;
	EXPECT_EQ(-EINVAL, kvc_ioc(self->fd, KVCACHE_IOC_PIN, &b));
	b.count = 1;
	b.flags = KVCACHE_SEAL_KEEP_PIN;	/* only SEAL takes flags */
	EXPECT_EQ(-EINVAL, kvc_ioc(self->fd, KVCACHE_IOC_PIN, &b));
	b.flags = 0;
	b.reserved[1] = 1;
	EXPECT_EQ(-EINVAL, kvc_ioc(self->fd, KVCACHE_IOC_PIN, &b));
	b.reserved[1] = 0;
	b.done = 1;
	EXPECT_EQ(-EINVAL, kvc_ioc(self->fd, KVCACHE_IOC_PIN, &b));
	b.done = 0;
	b.size = KVCACHE_BATCH_SIZE_VER1 - 8;
	EXPECT_EQ(-EINVAL, kvc_ioc(self->fd, KVCACHE_IOC_PIN, &b));
	b.size = sizeof(b);
	b.entries = 0;
	EXPECT_EQ(-EFAULT, kvc_ioc(self->fd, KVCACHE_IOC_PIN, &b));
	b.count = 2;	/* an array that wraps past the end of memory */
	b.entries = (uintptr_t)-8;
	EXPECT_EQ(-EFAULT, kvc_ioc(self->fd, KVCACHE_IOC_PIN, &b));

	/* Alloc: counts, unknown namespace, bad handles pointer. */
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.ns_id = self->ns;
	a.handles = (uintptr_t)&bad;
	EXPECT_EQ(-EINVAL, kvc_ioc(self->fd, KVCACHE_IOC_ALLOC, &a));
	a.count = KVCACHE_MAX_BATCH + 1;
	EXPECT_EQ(-EINVAL, kvc_ioc(self->fd, KVCACHE_IOC_ALLOC, &a));
	a.count = 1;
	a.ns_id = 65535;
	EXPECT_EQ(-ENOENT, kvc_ioc(self->fd, KVCACHE_IOC_ALLOC, &a));
	a.ns_id = self->ns;
	a.flags = 1;
	EXPECT_EQ(-EINVAL, kvc_ioc(self->fd, KVCACHE_IOC_ALLOC, &a));
	a.flags = 0;
	a.handles = 16;
	uint64_t free0 = kvc_attr_u64("pool/free_blocks");

	EXPECT_EQ(-EFAULT, kvc_ioc(self->fd, KVCACHE_IOC_ALLOC, &a));
	/* A failed copy-out gives the blocks back. */
	EXPECT_EQ(free0, kvc_attr_u64("pool/free_blocks"));
}

TEST_F(pool, bad_mappings)
{
	struct kvcache_handle h;
	uint64_t nr = kvc_attr_u64("pool/nr_blocks");
	void *p;

	ASSERT_EQ(0, kvc_alloc(self->fd, self->ns, 1, &h));
	/* Unaligned offset, wrong lengths, private, beyond the pool. */
	p = mmap(NULL, self->bs, PROT_READ, MAP_SHARED, self->fd,
		 (off_t)(h.index * self->bs + 4096));
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);
	p = mmap(NULL, self->bs * 2, PROT_READ, MAP_SHARED, self->fd,
		 (off_t)(h.index * self->bs));
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);
	p = mmap(NULL, self->bs / 2, PROT_READ, MAP_SHARED, self->fd,
		 (off_t)(h.index * self->bs));
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);
	p = mmap(NULL, self->bs, PROT_READ | PROT_WRITE, MAP_PRIVATE,
		 self->fd, (off_t)(h.index * self->bs));
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);
	p = mmap(NULL, self->bs, PROT_READ, MAP_SHARED, self->fd,
		 (off_t)(nr * self->bs));
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);

	/* A mapping cannot be split or grown. */
	p = kvc_map(self->fd, h.index, self->bs, PROT_READ | PROT_WRITE);
	ASSERT_NE(NULL, p);
	if (self->bs > 4096) {
		EXPECT_EQ(-1, munmap((uint8_t *)p + 4096, 4096));
		EXPECT_EQ(EINVAL, errno);
	}
	EXPECT_EQ(MAP_FAILED, mremap(p, self->bs, self->bs * 2, 0));
	munmap(p, self->bs);
}

TEST_F(pool, exhausting_the_pool_is_enospc_and_counted)
{
	uint64_t free0 = kvc_attr_u64("pool/free_blocks");
	uint64_t fails0 = kvc_attr_u64("stats/alloc_failures");
	struct kvcache_handle *h;

	ASSERT_EQ(kvc_attr_u64("pool/nr_blocks"), free0);
	if (free0 + 1 > KVCACHE_MAX_BATCH)
		SKIP(return, "pool larger than one batch");
	h = calloc(free0 + 1, sizeof(*h));
	ASSERT_NE(NULL, h);
	EXPECT_EQ(-ENOSPC, kvc_alloc(self->fd, self->ns, free0 + 1, h));
	EXPECT_EQ(fails0 + 1, kvc_attr_u64("stats/alloc_failures"));
	EXPECT_EQ(free0, kvc_attr_u64("pool/free_blocks"));
	ASSERT_EQ(0, kvc_alloc(self->fd, self->ns, free0, h));
	EXPECT_EQ(0, kvc_attr_u64("pool/free_blocks"));
	free(h);
}

TEST_F(pool, geometry_is_locked_while_blocks_exist)
{
	uint64_t bs = kvc_attr_u64("pool/block_size");
	struct kvcache_handle h;
	char buf[32];

	ASSERT_EQ(0, kvc_alloc(self->fd, self->ns, 1, &h));
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)bs);
	EXPECT_EQ(-EBUSY, kvc_write_file(kvc_attr("pool/block_size"), buf));
	EXPECT_EQ(-EBUSY, kvc_write_file(kvc_attr("pool/pool_size"), "4M"));
}

TEST_F(pool, watermark_knobs_validate)
{
	uint64_t nr = kvc_attr_u64("pool/nr_blocks");
	uint64_t lo = kvc_attr_u64("pool/low_watermark");
	uint64_t hi = kvc_attr_u64("pool/high_watermark");
	char buf[32];

	EXPECT_LE(lo, hi);
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)nr + 1);
	EXPECT_EQ(-EINVAL, kvc_write_file(kvc_attr("pool/high_watermark"), buf));
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)hi + 1);
	EXPECT_EQ(-EINVAL, kvc_write_file(kvc_attr("pool/low_watermark"), buf));
	EXPECT_EQ(-EINVAL, kvc_write_file(kvc_attr("pool/low_watermark"), "x"));
	EXPECT_EQ(lo, kvc_attr_u64("pool/low_watermark"));
	EXPECT_EQ(hi, kvc_attr_u64("pool/high_watermark"));
}

/* ---- permissions ---------------------------------------------------- */

struct as_other {
	uint32_t ns;
	struct kvcache_handle h;
	uint64_t bs;
};

/* Runs as uid/gid 65534; returns a bitmask of checks that failed. */
static int other_tenant(struct as_other *o)
{
	struct kvcache_block_info b[4];
	struct kvcache_handle h;
	int fd, bad = 0;

	fd = open(KVCACHE_DEVICE_PATH, O_RDWR);
	if (fd < 0)
		return 0x80;
	if (kvc_pin(fd, o->h) != -EACCES)
		bad |= 0x1;
	if (query_ns(fd, o->ns, b, 4) != 0)
		bad |= 0x2;
	if (kvc_alloc(fd, o->ns, 1, &h) != -EACCES)
		bad |= 0x4;
	if (kvc_evict(fd, o->h) != -EPERM)
		bad |= 0x8;
	if (kvc_ns(fd, 1, 60001, 0, 0, 0777) != -EPERM)
		bad |= 0x10;
	if (kvc_map(fd, o->h.index, o->bs, PROT_READ) || errno != EACCES)
		bad |= 0x20;
	struct kvcache_helper hl = { .size = sizeof(hl) };

	if (kvc_ioc(fd, KVCACHE_IOC_HELPER, &hl) != -EPERM)
		bad |= 0x40;
	return bad;
}

static int run_as_nobody(int (*fn)(struct as_other *), struct as_other *o)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		if (setgid(65534) || setuid(65534))
			_exit(0xff);
		_exit(fn(o));
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

static int other_reader(struct as_other *o)
{
	int fd = open(KVCACHE_DEVICE_PATH, O_RDWR);
	struct kvcache_block_info b[4];
	uint8_t *p;

	if (fd < 0)
		return 1;
	if (kvc_pin(fd, o->h))
		return 2;
	if (query_ns(fd, o->ns, b, 4) != 1)
		return 3;
	p = kvc_map(fd, o->h.index, o->bs, PROT_READ);
	if (!p || !pattern_ok(p, o->bs, 3))
		return 4;
	return 0;
}

TEST_F(pool, other_tenants_cannot_reach_a_private_namespace)
{
	struct as_other o = { .ns = self->ns, .bs = self->bs };
	struct stat st;

	ASSERT_EQ(0, make_block(self->fd, self->ns, self->bs, 3, &o.h));
	ASSERT_EQ(0, stat(KVCACHE_DEVICE_PATH, &st));
	ASSERT_EQ(0, chmod(KVCACHE_DEVICE_PATH, 0666));
	EXPECT_EQ(0, run_as_nobody(other_tenant, &o));

	/* A namespace whose mode lets others read is readable. */
	uint32_t ns2 = 60000 + self->ns % 5000 + 1;

	struct as_other o2 = { .ns = ns2, .bs = self->bs };

	EXPECT_EQ(0, kvc_ns(self->fd, 1, ns2, 0, 0, 0704));
	EXPECT_EQ(0, make_block(self->fd, ns2, self->bs, 3, &o2.h));
	EXPECT_EQ(0, run_as_nobody(other_reader, &o2));
	EXPECT_EQ(-EBUSY, kvc_ns(self->fd, 0, ns2, 0, 0, 0));
	EXPECT_EQ(0, kvc_evict(self->fd, o2.h));
	EXPECT_EQ(0, kvc_ns(self->fd, 0, ns2, 0, 0, 0));
	chmod(KVCACHE_DEVICE_PATH, st.st_mode & 07777);
}

TEST_F(pool, namespace_calls_validate)
{
	EXPECT_EQ(-EEXIST, kvc_ns(self->fd, 1, self->ns, 0, 0, 0700));
	EXPECT_EQ(-EINVAL, kvc_ns(self->fd, 1, 0, 0, 0, 0700));
	EXPECT_EQ(-EINVAL, kvc_ns(self->fd, 1, KVCACHE_NS_MAX + 1, 0, 0, 0));
	EXPECT_EQ(-EINVAL, kvc_ns(self->fd, 1, 60002, 0, 0, 01000));
	EXPECT_EQ(-EINVAL, kvc_ns(self->fd, 1, 60002, (uint32_t)-1, 0, 0));
	EXPECT_EQ(-ENOENT, kvc_ns(self->fd, 0, 60003, 0, 0, 0));
}

TEST(helper_role_is_exclusive_and_dies_with_its_file)
{
	struct kvcache_helper hl = { .size = sizeof(hl) };
	int a = open(KVCACHE_DEVICE_PATH, O_RDWR);
	int b = open(KVCACHE_DEVICE_PATH, O_RDWR);

	ASSERT_LE(0, a);
	ASSERT_LE(0, b);
	ASSERT_EQ(0, kvc_ioc(a, KVCACHE_IOC_HELPER, &hl));
	EXPECT_EQ(0, kvc_ioc(a, KVCACHE_IOC_HELPER, &hl));
	EXPECT_EQ(-EBUSY, kvc_ioc(b, KVCACHE_IOC_HELPER, &hl));
	hl.flags = 1;
	EXPECT_EQ(-EINVAL, kvc_ioc(b, KVCACHE_IOC_HELPER, &hl));
	hl.flags = 0;
	close(a);
	EXPECT_EQ(0, kvc_ioc(b, KVCACHE_IOC_HELPER, &hl));
	close(b);
}

/* ---- netlink pressure events --------------------------------------- */

struct nlreq {
	struct nlmsghdr n;
	struct genlmsghdr g;
	char buf[256];
};

static struct nlattr *nla_next_attr(struct nlattr *a, int *rem)
{
	int len = NLA_ALIGN(a->nla_len);

	*rem -= len;
	return (struct nlattr *)((char *)a + len);
}

/* Resolve the family and its "events" group; returns the family id. */
static int genl_resolve(int s, uint32_t *group)
{
	struct nlreq req = { 0 };
	char resp[4096];
	struct nlattr *a;
	int n, rem, family = -1;

	req.n.nlmsg_type = GENL_ID_CTRL;
	req.n.nlmsg_flags = NLM_F_REQUEST;
	req.g.cmd = CTRL_CMD_GETFAMILY;
	req.g.version = 1;
	a = (struct nlattr *)req.buf;
	a->nla_type = CTRL_ATTR_FAMILY_NAME;
	a->nla_len = NLA_HDRLEN + sizeof(KVCACHE_GENL_NAME);
	memcpy((char *)a + NLA_HDRLEN, KVCACHE_GENL_NAME,
	       sizeof(KVCACHE_GENL_NAME));
	req.n.nlmsg_len = NLMSG_LENGTH(GENL_HDRLEN + NLA_ALIGN(a->nla_len));
	if (send(s, &req, req.n.nlmsg_len, 0) < 0)
		return -1;
	n = recv(s, resp, sizeof(resp), 0);
	if (n <= 0 || ((struct nlmsghdr *)resp)->nlmsg_type == NLMSG_ERROR)
		return -1;
	rem = ((struct nlmsghdr *)resp)->nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN);
	a = (struct nlattr *)(resp + NLMSG_LENGTH(GENL_HDRLEN));
	for (; rem >= (int)NLA_HDRLEN; a = nla_next_attr(a, &rem)) {
		if (a->nla_type == CTRL_ATTR_FAMILY_ID)
			family = *(uint16_t *)((char *)a + NLA_HDRLEN);
		if ((a->nla_type & NLA_TYPE_MASK) != CTRL_ATTR_MCAST_GROUPS)
			continue;
		/* Nested: one entry per group, each with name and id. */
		struct nlattr *g = (struct nlattr *)((char *)a + NLA_HDRLEN);
		int grem = a->nla_len - NLA_HDRLEN;

		for (; grem >= (int)NLA_HDRLEN; g = nla_next_attr(g, &grem)) {
			struct nlattr *f = (struct nlattr *)((char *)g + NLA_HDRLEN);
			int frem = g->nla_len - NLA_HDRLEN;
			uint32_t id = 0;
			int match = 0;

			for (; frem >= (int)NLA_HDRLEN; f = nla_next_attr(f, &frem)) {
				if (f->nla_type == CTRL_ATTR_MCAST_GRP_ID)
					id = *(uint32_t *)((char *)f + NLA_HDRLEN);
				if (f->nla_type == CTRL_ATTR_MCAST_GRP_NAME &&
				    !strcmp((char *)f + NLA_HDRLEN,
					    KVCACHE_GENL_MCGRP))
					match = 1;
			}
			if (match)
				*group = id;
		}
	}
	return family;
}

/* Receive one kvcache message; returns its KVCACHE_A_PRESSURE or -1. */
static int genl_recv_pressure(int s, uint8_t cmd, uint32_t *nr_free)
{
	char resp[4096];
	struct nlattr *a;
	int n, rem, pressure = -1;

	n = recv(s, resp, sizeof(resp), 0);
	if (n <= 0)
		return -1;
	if (((struct genlmsghdr *)NLMSG_DATA(resp))->cmd != cmd)
		return -2;
	rem = ((struct nlmsghdr *)resp)->nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN);
	a = (struct nlattr *)(resp + NLMSG_LENGTH(GENL_HDRLEN));
	for (; rem >= (int)NLA_HDRLEN; a = nla_next_attr(a, &rem)) {
		if (a->nla_type == KVCACHE_A_PRESSURE)
			pressure = *((uint8_t *)a + NLA_HDRLEN);
		if (a->nla_type == KVCACHE_A_FREE_BLOCKS)
			*nr_free = *(uint32_t *)((char *)a + NLA_HDRLEN);
	}
	return pressure;
}

TEST_F(pool, pressure_events_cross_the_watermarks_once)
{
	uint64_t free0 = kvc_attr_u64("pool/free_blocks");
	uint64_t lo = kvc_attr_u64("pool/low_watermark");
	uint64_t events0 = kvc_attr_u64("stats/events");
	struct timeval tv = { .tv_sec = 10 };
	struct kvcache_handle *h;
	struct nlreq req = { 0 };
	uint32_t group = 0, nfree = 0, take;
	int s, family;

	/* At rest between tests: a leaked block would show here. */
	ASSERT_EQ(kvc_attr_u64("pool/nr_blocks"), free0);
	if (free0 - lo + 1 > KVCACHE_MAX_BATCH)
		SKIP(return, "pool too large to cross the watermark in one batch");
	s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
	ASSERT_LE(0, s);
	ASSERT_EQ(0, setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)));
	family = genl_resolve(s, &group);
	ASSERT_LT(0, family);
	ASSERT_NE(0, group);

	/* GET_POOL answers on request. */
	req.n.nlmsg_type = family;
	req.n.nlmsg_flags = NLM_F_REQUEST;
	req.n.nlmsg_len = NLMSG_LENGTH(GENL_HDRLEN);
	req.g.cmd = KVCACHE_CMD_GET_POOL;
	req.g.version = KVCACHE_GENL_VERSION;
	ASSERT_LT(0, send(s, &req, req.n.nlmsg_len, 0));
	EXPECT_EQ(0, genl_recv_pressure(s, KVCACHE_CMD_GET_POOL, &nfree));
	EXPECT_EQ(free0, nfree);

	ASSERT_EQ(0, setsockopt(s, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP,
				&group, sizeof(group)));
	/* Take enough blocks to fall below the low watermark. */
	take = (uint32_t)(free0 - lo + 1);
	h = calloc(take, sizeof(*h));
	ASSERT_NE(NULL, h);
	ASSERT_EQ(0, kvc_alloc(self->fd, self->ns, take - 1, h));
	ASSERT_EQ(0, kvc_alloc(self->fd, self->ns, 1, h + take - 1));
	EXPECT_EQ(1, genl_recv_pressure(s, KVCACHE_CMD_PRESSURE, &nfree));
	EXPECT_EQ(lo - 1, nfree);

	/* Closing the writer frees them: back above high, one event. */
	close(self->fd);
	EXPECT_EQ(0, genl_recv_pressure(s, KVCACHE_CMD_PRESSURE, &nfree));
	EXPECT_EQ(free0, nfree);
	EXPECT_EQ(events0 + 2, kvc_attr_u64("stats/events"));
	self->fd = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	free(h);
	close(s);
}

TEST_HARNESS_MAIN
