// SPDX-License-Identifier: GPL-2.0
/*
 * Selftests for the pool view (KVCACHE_VIEW_OFFSET): one read-only mapping
 * of the whole pool whose blocks appear only for a file that pins them,
 * and disappear from every view before the block is freed. Checks the
 * mapping's refusals, what a file without a pin sees (SIGBUS), another
 * tenant, eviction and reuse, and readers racing evict, reuse and reseal
 * of the same block. Runs as root in the test VM.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "kvc_ioctl.h"
#include "kvc_sysfs.h"

/* Every 4 KiB page of a block starts and ends with the seed's byte. */
static void fill(uint8_t *p, uint64_t n, uint32_t seed)
{
	memset(p, seed & 0xff, n);
}

static __thread sigjmp_buf probe_env;
static __thread volatile int probing;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)si;
	(void)uc;
	if (probing)
		siglongjmp(probe_env, 1);
	abort();
}

static void catch_sigbus(void)
{
	struct sigaction sa = { .sa_sigaction = on_sigbus,
				.sa_flags = SA_SIGINFO | SA_NODEFER };

	sigaction(SIGBUS, &sa, NULL);
}

/*
 * Read the first and last byte of every page of a block through the view:
 * the byte all of them hold, -2 if they differ, -1 on SIGBUS.
 */
static int probe(const volatile uint8_t *p, uint64_t bs)
{
	int first = -1;

	if (sigsetjmp(probe_env, 1)) {
		probing = 0;
		return -1;
	}
	probing = 1;
	for (uint64_t i = 0; i < bs; i += 4096) {
		int a = p[i], b = p[i + 4095];

		if (first < 0)
			first = a;
		if (a != first || b != first) {
			first = -2;
			break;
		}
	}
	probing = 0;
	return first;
}

FIXTURE(view) {
	int fd;
	uint32_t ns;
	uint64_t bs, nr;
	uint8_t *view;
};

FIXTURE_SETUP(view)
{
	struct kvcache_info info = { .size = sizeof(info) };

	catch_sigbus();
	self->fd = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, kvc_ioc(self->fd, KVCACHE_IOC_INFO, &info));
	ASSERT_TRUE(info.features & KVCACHE_FEAT_VIEW);
	self->bs = info.block_size;
	self->nr = info.nr_blocks;
	self->ns = (uint32_t)(getpid() % 60000) + 1;
	ASSERT_EQ(0, kvc_ns(self->fd, 1, self->ns, 0, 0, 0700));
	self->view = mmap(NULL, self->bs * self->nr, PROT_READ, MAP_SHARED,
			  self->fd, (off_t)KVCACHE_VIEW_OFFSET);
	ASSERT_NE(MAP_FAILED, self->view);
}

FIXTURE_TEARDOWN(view)
{
	struct kvcache_block_info b[64];
	struct kvcache_query q = {
		.size = sizeof(q), .count = 64, .ns_id = self->ns,
		.entries = (uintptr_t)b,
	};

	munmap(self->view, self->bs * self->nr);
	while (!ioctl(self->fd, KVCACHE_IOC_QUERY, &q) && q.count) {
		for (uint32_t i = 0; i < q.count; i++)
			if (kvc_evict(self->fd, b[i].handle))
				goto out;
		q.count = 64;
	}
out:
	kvc_ns(self->fd, 0, self->ns, 0, 0, 0);
	close(self->fd);
}

static const uint8_t *at(FIXTURE_DATA(view) *self, uint32_t index)
{
	return self->view + (uint64_t)index * self->bs;
}

TEST_F(view, a_block_appears_only_while_this_file_pins_it)
{
	uint64_t faults0 = kvc_attr_u64("stats/view_faults");
	uint64_t refused0 = kvc_attr_u64("stats/view_refused");
	uint64_t zaps0 = kvc_attr_u64("stats/view_zaps");
	struct kvcache_handle h, h2;
	int other;

	ASSERT_EQ(0, kvc_make_sealed(self->fd, self->ns, self->bs, 0x51, fill,
				     &h));
	/* Sealed but not pinned by this file: nothing to see. */
	EXPECT_EQ(-1, probe(at(self, h.index), self->bs));
	EXPECT_LT(refused0, kvc_attr_u64("stats/view_refused"));

	/* Another file's pin does not count for this one. */
	other = open(KVCACHE_DEVICE_PATH, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, other);
	ASSERT_EQ(0, kvc_pin(other, h));
	EXPECT_EQ(-1, probe(at(self, h.index), self->bs));

	/* Pinned: the whole block, one fault for all its pages. */
	ASSERT_EQ(0, kvc_pin(self->fd, h));
	EXPECT_EQ(0x51, probe(at(self, h.index), self->bs));
	EXPECT_EQ(faults0 + 1, kvc_attr_u64("stats/view_faults"));
	/* The view does not hold the block; the other file's pin does. */
	ASSERT_EQ(0, kvc_unpin(self->fd, h));
	EXPECT_EQ(0x51, probe(at(self, h.index), self->bs));
	EXPECT_EQ(-EBUSY, kvc_evict(self->fd, h));
	ASSERT_EQ(0, kvc_unpin(other, h));
	close(other);

	/* Evicted: gone from the view before the block is free. */
	ASSERT_EQ(0, kvc_evict(self->fd, h));
	EXPECT_EQ(zaps0 + 1, kvc_attr_u64("stats/view_zaps"));
	EXPECT_EQ(-1, probe(at(self, h.index), self->bs));

	/*
	 * The same index, reused (LIFO free stack) and sealed with other
	 * bytes: invisible until pinned, then the new bytes.
	 */
	ASSERT_EQ(0, kvc_make_sealed(self->fd, self->ns, self->bs, 0x52, fill,
				     &h2));
	EXPECT_EQ(h.index, h2.index);
	EXPECT_EQ(-1, probe(at(self, h2.index), self->bs));
	ASSERT_EQ(0, kvc_pin(self->fd, h2));
	EXPECT_EQ(0x52, probe(at(self, h2.index), self->bs));
	ASSERT_EQ(0, kvc_unpin(self->fd, h2));
	ASSERT_EQ(0, kvc_evict(self->fd, h2));
}

TEST_F(view, writable_blocks_never_appear)
{
	struct kvcache_handle h;
	uint8_t *p;

	ASSERT_EQ(0, kvc_alloc(self->fd, self->ns, 1, &h));
	p = kvc_map(self->fd, h.index, self->bs, PROT_READ | PROT_WRITE);
	ASSERT_NE(NULL, p);
	fill(p, self->bs, 0x33);
	EXPECT_EQ(-1, probe(at(self, h.index), self->bs));
	EXPECT_EQ(-EBUSY, kvc_pin(self->fd, h));
	munmap(p, self->bs);
	ASSERT_EQ(0, kvc_seal(self->fd, h, (uint32_t)self->bs, 0x33, 0));
}

TEST_F(view, bad_view_mappings)
{
	size_t len = self->bs * self->nr;
	off_t off = (off_t)KVCACHE_VIEW_OFFSET;
	int ro;
	void *p;

	/* Writable, executable, private, wrong length or offset. */
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, self->fd, off);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EACCES, errno);
	p = mmap(NULL, len, PROT_READ | PROT_EXEC, MAP_SHARED, self->fd, off);
	EXPECT_EQ(MAP_FAILED, p);
	p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, self->fd, off);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);
	p = mmap(NULL, len - self->bs, PROT_READ, MAP_SHARED, self->fd, off);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);
	p = mmap(NULL, len + self->bs, PROT_READ, MAP_SHARED, self->fd, off);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);
	p = mmap(NULL, len - self->bs, PROT_READ, MAP_SHARED, self->fd,
		 off + (off_t)self->bs);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);

	/* Cannot be made writable, split or grown. */
	EXPECT_EQ(-1, mprotect(self->view, len, PROT_READ | PROT_WRITE));
	EXPECT_EQ(EACCES, errno);
	EXPECT_EQ(-1, munmap(self->view + 4096, 4096));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(MAP_FAILED, mremap(self->view, len, len * 2, 0));

	/* A read-only descriptor maps the view too. */
	ro = open(KVCACHE_DEVICE_PATH, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, ro);
	p = mmap(NULL, len, PROT_READ, MAP_SHARED, ro, off);
	EXPECT_NE(MAP_FAILED, p);
	if (p != MAP_FAILED)
		munmap(p, len);
	close(ro);
}

/* A tenant without read permission on the namespace sees nothing. */
static int other_tenant(uint32_t index, uint64_t bs, uint64_t nr,
			struct kvcache_handle h)
{
	int fd = open(KVCACHE_DEVICE_PATH, O_RDWR);
	uint8_t *v;

	if (fd < 0)
		return 1;
	v = mmap(NULL, bs * nr, PROT_READ, MAP_SHARED, fd,
		 (off_t)KVCACHE_VIEW_OFFSET);
	if (v == MAP_FAILED)
		return 2;
	if (kvc_pin(fd, h) != -EACCES)
		return 3;
	if (probe(v + (uint64_t)index * bs, bs) != -1)
		return 4;
	return 0;
}

TEST_F(view, another_tenant_cannot_read_a_private_block)
{
	struct kvcache_handle h;
	struct stat st;
	int status;
	pid_t pid;

	ASSERT_EQ(0, kvc_make_sealed(self->fd, self->ns, self->bs, 0x61, fill,
				     &h));
	/* Mapped in our view already: the other's view is separate. */
	ASSERT_EQ(0, kvc_pin(self->fd, h));
	EXPECT_EQ(0x61, probe(at(self, h.index), self->bs));
	ASSERT_EQ(0, stat(KVCACHE_DEVICE_PATH, &st));
	ASSERT_EQ(0, chmod(KVCACHE_DEVICE_PATH, 0666));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		if (setgid(65534) || setuid(65534))
			_exit(0xff);
		_exit(other_tenant(h.index, self->bs, self->nr, h));
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	chmod(KVCACHE_DEVICE_PATH, st.st_mode & 07777);
	EXPECT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	ASSERT_EQ(0, kvc_unpin(self->fd, h));
}

TEST_F(view, not_inherited_across_fork)
{
	struct kvcache_handle h;
	int status;
	pid_t pid;

	ASSERT_EQ(0, kvc_make_sealed(self->fd, self->ns, self->bs, 0x71, fill,
				     &h));
	ASSERT_EQ(0, kvc_pin(self->fd, h));
	EXPECT_EQ(0x71, probe(at(self, h.index), self->bs));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		/* VM_DONTCOPY: the range is simply not mapped in the child. */
		unsigned char vec;

		_exit(mincore((void *)at(self, h.index), 4096, &vec) == -1 &&
		      errno == ENOMEM ? 0 : 1);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_EQ(0, status);
	ASSERT_EQ(0, kvc_unpin(self->fd, h));
}

/*
 * Readers race evict, reuse and reseal of the same block. The writer
 * keeps one block alive at a time, filled with a byte of its round, and
 * publishes its handle and that byte. A reader pins the handle it sees (ESTALE when the
 * writer was faster), reads the whole block through the view, unpins,
 * then reads it once more without a pin. Pinned, it must see its
 * round's byte and nothing else; unpinned, that byte or SIGBUS, never
 * the zeroes or bytes of a later life.
 */
struct race {
	uint64_t bs;
	_Atomic uint64_t cur;		/* index << 32 | gen, of a sealed block */
	atomic_int stop, hold;
	atomic_long reads, stale, bad;
};

static void *reader(void *arg)
{
	struct race *r = arg;
	int fd = open(KVCACHE_DEVICE_PATH, O_RDONLY | O_CLOEXEC);
	uint8_t *view;
	size_t len = r->bs * (size_t)kvc_attr_u64("pool/nr_blocks");

	if (fd < 0)
		return NULL;
	view = mmap(NULL, len, PROT_READ, MAP_SHARED, fd,
		    (off_t)KVCACHE_VIEW_OFFSET);
	if (view == MAP_FAILED) {
		atomic_fetch_add(&r->bad, 1);
		close(fd);
		return NULL;
	}
	while (!atomic_load(&r->stop)) {
		uint64_t c = atomic_load(&r->cur);
		struct kvcache_handle h = {
			.index = (uint32_t)(c >> 32) & 0xffffff,
			.gen = (uint32_t)c,
		};
		const uint8_t *p = view + (uint64_t)h.index * r->bs;
		int want = (int)(c >> 56), got;

		usleep(100);
		if (atomic_load(&r->hold))
			continue;
		if (kvc_pin(fd, h)) {
			atomic_fetch_add(&r->stale, 1);
			continue;
		}
		got = probe(p, r->bs);
		kvc_unpin(fd, h);
		if (got != want)
			atomic_fetch_add(&r->bad, 1);
		got = probe(p, r->bs);
		if (got != want && got != -1)
			atomic_fetch_add(&r->bad, 1);
		atomic_fetch_add(&r->reads, 1);
	}
	munmap(view, len);
	close(fd);
	return NULL;
}

/* What the readers are told: the block's handle and its byte. */
static uint64_t pack(struct kvcache_handle h, uint8_t seed)
{
	/* Pool indexes fit in 24 bits (KVC_MAX_BLOCKS in the module). */
	return (uint64_t)seed << 56 | (uint64_t)h.index << 32 | h.gen;
}

TEST_F_TIMEOUT(view, readers_racing_evict_and_reuse_see_only_their_block,
	       300)
{
	struct race r = { .bs = self->bs };
	struct kvcache_handle h;
	pthread_t t[3];
	long rounds = 0, contested = 0;
	int i, ret;

	ASSERT_EQ(0, kvc_make_sealed(self->fd, self->ns, self->bs, 1, fill,
				     &h));
	atomic_store(&r.cur, pack(h, 1));
	for (i = 0; i < 3; i++)
		ASSERT_EQ(0, pthread_create(&t[i], NULL, reader, &r));
	for (rounds = 0; rounds < 50; rounds++) {
		long seen = atomic_load(&r.reads);

		/* Let a reader at it (at most 20 ms), then evict under it. */
		for (i = 0; i < 200 && atomic_load(&r.reads) == seen; i++)
			usleep(100);
		/*
		 * Pinned by a reader just now, or pinned and faulted again
		 * between the zap and the retry: try again. Three readers
		 * on one block can keep that up for long under TCG, so after
		 * 20 tries they hold off until the block is gone.
		 */
		for (i = 0; (ret = kvc_evict(self->fd, h)) == -EBUSY; i++) {
			if (i == 20)
				atomic_store(&r.hold, 1);
			usleep(100);
		}
		if (i < 20)
			contested++;
		atomic_store(&r.hold, 0);
		ASSERT_EQ(0, ret);
		/* A new byte each round (never 0, a fresh block's). */
		ASSERT_EQ(0, kvc_make_sealed(self->fd, self->ns, self->bs,
					     (uint32_t)(rounds % 254 + 2), fill,
					     &h));
		atomic_store(&r.cur, pack(h, (uint8_t)(rounds % 254 + 2)));
	}
	atomic_store(&r.stop, 1);
	for (i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	TH_LOG("%ld rounds (%ld evicted under the readers), %ld pinned reads, %ld stale pins",
	       rounds, contested, atomic_load(&r.reads),
	       atomic_load(&r.stale));
	EXPECT_EQ(0, atomic_load(&r.bad));
	EXPECT_LT(0, atomic_load(&r.reads));
}

TEST_HARNESS_MAIN
