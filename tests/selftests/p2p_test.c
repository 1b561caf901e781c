// SPDX-License-Identifier: GPL-2.0
/*
 * Transfers between files on the NVMe and device memory, in the test VM.
 *
 * The ivshmem device stands in for a GPU: the test binds it to the
 * "kvcache" PCI driver (driver_override), which makes its BAR 2 a "bar"
 * provider, and checks every transfer through a mapping of the same BAR
 * (sysfs resource2). The NVMe carries an ext4 file system made by the
 * test, and its controller memory buffer is added as a "p2pmem" provider.
 *
 * KVC_TOPOLOGY (set by scripts/vm) says where the ivshmem device sits:
 * "switch" (P2P expected) or "rc" (root complex: the bounce path).
 *
 * The last test leaves a known pattern in the whole BAR; scripts/check
 * compares the host file behind it after the VM has exited.
 *
 * Every test may take up to 10 minutes instead of the harness's 30 s:
 * under TCG with KASAN, tens of MiB through the bounce path take long on
 * a busy machine. Time is never what a test checks.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "kvc_p2p.h"

#define BAR_SIZE	(64ULL << 20)
#define HOST_SEED	0x4b5643u	/* the pattern scripts/check looks for */

FIXTURE(p2p) {
	int fd;
	int prov;
	char gpu[32];
	char nvme[32];
	uint32_t want_path;
	volatile uint8_t *bar;
};

FIXTURE_SETUP(p2p)
{
	const char *topo = getenv("KVC_TOPOLOGY");
	char path[PATH_MAX];
	int bfd;

	self->want_path = topo && !strcmp(topo, "rc") ? KVCACHE_PATH_BOUNCE :
							KVCACHE_PATH_P2P;
	ASSERT_EQ(0, nvme_fs());
	ASSERT_EQ(0, find_pci(0x1af4, 0x1110, 0, self->gpu, sizeof(self->gpu)));
	ASSERT_EQ(0, find_pci(0, 0, 0x010802, self->nvme, sizeof(self->nvme)));
	self->prov = bind_gpu(self->gpu);
	ASSERT_LE(0, self->prov);
	self->fd = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->fd);
	snprintf(path, sizeof(path), PCI_DEVICES "/%s/resource2", self->gpu);
	bfd = open(path, O_RDWR | O_SYNC | O_CLOEXEC);
	ASSERT_LE(0, bfd);
	self->bar = mmap(NULL, BAR_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
			 bfd, 0);
	close(bfd);
	ASSERT_NE(MAP_FAILED, self->bar);
}

FIXTURE_TEARDOWN(p2p)
{
	munmap((void *)self->bar, BAR_SIZE);
	close(self->fd);
}

TEST_F_TIMEOUT(p2p, provider_lists_kind_size_and_distance, 600)
{
	char path[PATH_MAX], buf[1024], want[64];

	snprintf(path, sizeof(path), PROVIDERS "/%d/kind", self->prov);
	ASSERT_EQ(0, kvc_read_file(path, buf, sizeof(buf)));
	EXPECT_STREQ("bar\n", buf);
	EXPECT_EQ(BAR_SIZE, provider_u64(self->prov, "size"));
	EXPECT_EQ(2, provider_u64(self->prov, "bar"));
	snprintf(path, sizeof(path), PROVIDERS "/%d/distances", self->prov);
	ASSERT_EQ(0, kvc_read_file(path, buf, sizeof(buf)));
	/* Same switch: up to the switch and down again, 4 hops. */
	snprintf(want, sizeof(want), "%s %d\n", self->nvme,
		 self->want_path == KVCACHE_PATH_P2P ? 4 : -1);
	EXPECT_NE(NULL, strstr(buf, want)) TH_LOG("distances: %s", buf);
}

TEST_F_TIMEOUT(p2p, file_to_region_from_4k_to_64m, 600)
{
	static const uint64_t sizes[] = {
		4096, 65536, 1 << 20, (4 << 20) + 4096, 16 << 20, 64 << 20,
	};
	uint64_t p2p0 = provider_u64(self->prov, "p2p_bytes");
	uint64_t bounce0 = provider_u64(self->prov, "bounce_bytes");
	uint64_t cpu0 = provider_u64(self->prov, "cpu_copy_bytes");
	uint64_t total = 0;
	uint32_t h;
	int f = pattern_file("sizes", 64 << 20, 7, O_RDONLY);

	ASSERT_LE(0, f);
	ASSERT_EQ(0, region_reg(self->fd, self->prov, 0, BAR_SIZE, &h));
	for (unsigned int i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint64_t len = sizes[i], roff = BAR_SIZE - len;
		struct kvcache_xfer_entry e = entry(f, 0, len, h, roff, 0);

		ASSERT_EQ(0, xfer1(self->fd, &e));
		EXPECT_EQ((int64_t)len, e.result);
		EXPECT_EQ(self->want_path, e.path);
		EXPECT_EQ(-1, check((const void *)(self->bar + roff), 0, len, 7))
			TH_LOG("size %llu", (unsigned long long)len);
		total += len;
	}
	/* The CPU copies each byte once on the bounce path, none on P2P. */
	if (self->want_path == KVCACHE_PATH_P2P) {
		EXPECT_EQ(p2p0 + total, provider_u64(self->prov, "p2p_bytes"));
		EXPECT_EQ(cpu0, provider_u64(self->prov, "cpu_copy_bytes"));
	} else {
		EXPECT_EQ(bounce0 + total,
			  provider_u64(self->prov, "bounce_bytes"));
		EXPECT_EQ(cpu0 + total,
			  provider_u64(self->prov, "cpu_copy_bytes"));
	}
	EXPECT_EQ(0, region_unreg(self->fd, h));
	close(f);
}

TEST_F_TIMEOUT(p2p, region_to_file_and_back, 600)
{
	uint64_t len = 8 << 20;
	uint64_t cpu0 = provider_u64(self->prov, "cpu_copy_bytes");
	uint32_t h;
	void *buf;
	int f = pattern_file("out", 0, 0, O_RDWR);
	int r;

	ASSERT_LE(0, f);
	fill((void *)(self->bar + len), 0, len, 21);
	ASSERT_EQ(0, region_reg(self->fd, self->prov, len, len, &h));
	struct kvcache_xfer_entry e = entry(f, 0, len, h, 0, 1);

	ASSERT_EQ(0, xfer1(self->fd, &e));
	EXPECT_EQ((int64_t)len, e.result);
	EXPECT_EQ(self->want_path, e.path);
	ASSERT_EQ(0, posix_memalign(&buf, 4096, len));
	r = open(MNT "/out", O_RDONLY);
	ASSERT_EQ((ssize_t)len, pread(r, buf, len, 0));
	EXPECT_EQ(-1, check(buf, 0, len, 21));
	close(r);
	/* And back into another part of the region. */
	memset((void *)(self->bar + len), 0, len);
	e = entry(f, 0, len / 2, h, len / 2, 0);
	ASSERT_EQ(0, xfer1(self->fd, &e));
	EXPECT_EQ(-1, check((const void *)(self->bar + len + len / 2), 0,
			    len / 2, 21));
	EXPECT_EQ(cpu0 + (self->want_path == KVCACHE_PATH_P2P ? 0 :
			  len + len / 2),
		  provider_u64(self->prov, "cpu_copy_bytes"));
	free(buf);
	EXPECT_EQ(0, region_unreg(self->fd, h));
	close(f);
}

TEST_F_TIMEOUT(p2p, bounce_flag_forces_the_bounce_path, 600)
{
	uint64_t b0 = provider_u64(self->prov, "bounce_bytes");
	uint64_t cpu0 = provider_u64(self->prov, "cpu_copy_bytes");
	uint32_t h;
	int f = pattern_file("bounce", 3 << 20, 9, O_RDONLY);

	ASSERT_LE(0, f);
	ASSERT_EQ(0, region_reg(self->fd, self->prov, 0, 4 << 20, &h));
	struct kvcache_xfer_entry e = entry(f, 0, 3 << 20, h, 4096, 0);

	e.flags |= KVCACHE_XFER_BOUNCE;
	ASSERT_EQ(0, xfer1(self->fd, &e));
	EXPECT_EQ(KVCACHE_PATH_BOUNCE, e.path);
	EXPECT_EQ(-1, check((const void *)(self->bar + 4096), 0, 3 << 20, 9));
	EXPECT_EQ(b0 + (3 << 20), provider_u64(self->prov, "bounce_bytes"));
	EXPECT_EQ(cpu0 + (3 << 20),
		  provider_u64(self->prov, "cpu_copy_bytes"));
	/* An offset the device cannot DMA to is fine for the bounce path. */
	e = entry(f, 0, 4096, h, 100, 0);
	ASSERT_EQ(0, xfer1(self->fd, &e));
	EXPECT_EQ(KVCACHE_PATH_BOUNCE, e.path);
	EXPECT_EQ(-1, check((const void *)(self->bar + 100), 0, 4096, 9));
	EXPECT_EQ(0, region_unreg(self->fd, h));
	close(f);
}

struct worker {
	int kfd;
	uint32_t region;
	int file;
	int result;
	uint32_t path;
};

static void *run_worker(void *arg)
{
	struct worker *w = arg;

	for (int i = 0; i < 4 && !w->result; i++) {
		struct kvcache_xfer_entry e = entry(w->file, (uint64_t)i << 22,
						    4 << 20, w->region,
						    (uint64_t)i << 22, 0);

		w->result = xfer1(w->kfd, &e);
		w->path = e.path;
	}
	return NULL;
}

TEST_F_TIMEOUT(p2p, several_regions_concurrently, 600)
{
	struct worker w[4];
	pthread_t t[4];
	char name[16];

	for (int i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "conc%d", i);
		w[i].kfd = self->fd;
		w[i].result = 0;
		w[i].file = pattern_file(name, 16 << 20, 100 + i, O_RDONLY);
		ASSERT_LE(0, w[i].file);
		ASSERT_EQ(0, region_reg(self->fd, self->prov,
					(uint64_t)i << 24, 16 << 20,
					&w[i].region));
	}
	EXPECT_EQ(4, provider_u64(self->prov, "regions"));
	for (int i = 0; i < 4; i++)
		ASSERT_EQ(0, pthread_create(&t[i], NULL, run_worker, &w[i]));
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		EXPECT_EQ(0, w[i].result);
		EXPECT_EQ(self->want_path, w[i].path);
		EXPECT_EQ(-1, check((const void *)(self->bar + ((uint64_t)i << 24)),
				    0, 16 << 20, 100 + i));
		EXPECT_EQ(0, region_unreg(self->fd, w[i].region));
		close(w[i].file);
	}
	EXPECT_EQ(0, provider_u64(self->prov, "regions"));
}

TEST_F_TIMEOUT(p2p, async_batch_signals_its_eventfd, 600)
{
	struct kvcache_xfer_entry e[8];
	struct pollfd pfd;
	uint64_t id, n;
	uint32_t h;
	int efd = eventfd(0, EFD_CLOEXEC);
	int f = pattern_file("async", 8 << 20, 33, O_RDONLY);

	ASSERT_LE(0, efd);
	ASSERT_LE(0, f);
	ASSERT_EQ(0, region_reg(self->fd, self->prov, 0, 8 << 20, &h));
	for (int i = 0; i < 8; i++)
		e[i] = entry(f, (uint64_t)i << 20, 1 << 20, h,
			     (uint64_t)(7 - i) << 20, 0);
	ASSERT_EQ(0, xfer_async(self->fd, e, 8, efd, &id));
	EXPECT_NE(0, id);
	pfd = (struct pollfd){ .fd = efd, .events = POLLIN };
	ASSERT_EQ(1, poll(&pfd, 1, 120000));
	ASSERT_EQ(8, read(efd, &n, 8));
	EXPECT_EQ(1, n);
	EXPECT_EQ(-EINVAL, reap(self->fd, id, e, 7, 0));
	ASSERT_EQ(0, reap(self->fd, id, e, 8, KVCACHE_REAP_NOWAIT));
	for (int i = 0; i < 8; i++) {
		EXPECT_EQ(1 << 20, e[i].result);
		EXPECT_EQ(self->want_path, e[i].path);
		EXPECT_EQ(-1, check((const void *)(self->bar + ((uint64_t)(7 - i) << 20)),
				    (uint64_t)i << 20, 1 << 20, 33));
	}
	EXPECT_EQ(-ENOENT, reap(self->fd, id, e, 8, 0));
	/* Without an eventfd: reap waits. */
	for (int i = 0; i < 8; i++)
		e[i] = entry(f, 0, 1 << 20, h, 0, 0);
	ASSERT_EQ(0, xfer_async(self->fd, e, 2, -1, &id));
	ASSERT_EQ(0, reap(self->fd, id, e, 2, 0));
	EXPECT_EQ(1 << 20, e[1].result);
	EXPECT_EQ(0, region_unreg(self->fd, h));
	close(f);
	close(efd);
}

TEST_F_TIMEOUT(p2p, pool_block_to_file_and_back, 600)
{
	uint64_t bs = kvc_block_size(self->fd);
	struct kvcache_handle b[2];
	uint32_t ns = (uint32_t)(getpid() % 60000) + 1;
	uint8_t *p;
	void *buf;
	int f = pattern_file("spill", 0, 0, O_RDWR);

	ASSERT_LE(0, f);
	ASSERT_EQ(0, kvc_ns(self->fd, 1, ns, 0, 0, 0700));
	ASSERT_EQ(0, kvc_alloc(self->fd, ns, 2, b));
	p = kvc_map(self->fd, b[0].index, bs, PROT_READ | PROT_WRITE);
	ASSERT_NE(NULL, p);
	fill(p, 0, bs, 55);
	munmap(p, bs);
	ASSERT_EQ(0, kvc_seal(self->fd, b[0], (uint32_t)bs, 1,
			      KVCACHE_SEAL_KEEP_PIN));

	/* Spill the sealed, pinned block to the file. */
	struct kvcache_xfer_entry e = {
		.fd = f, .flags = KVCACHE_XFER_TO_FILE | KVCACHE_XFER_BLOCK,
		.length = bs, .block = b[0],
	};
	ASSERT_EQ(0, xfer1(self->fd, &e));
	EXPECT_EQ(KVCACHE_PATH_HOST, e.path);
	EXPECT_EQ((int64_t)bs, e.result);
	ASSERT_EQ(0, posix_memalign(&buf, 4096, bs));
	ASSERT_EQ((ssize_t)bs, pread(f, buf, bs, 0));
	EXPECT_EQ(-1, check(buf, 0, bs, 55));

	/* A sealed block is immutable: promote only into a writable one. */
	e = (struct kvcache_xfer_entry){
		.fd = f, .flags = KVCACHE_XFER_BLOCK, .length = bs,
		.block = b[0],
	};
	EXPECT_EQ(-EACCES, xfer1(self->fd, &e));
	e.block = b[1];
	e.result = 0;
	e.path = 0;
	e.length = bs / 2;
	e.offset = bs / 2;
	ASSERT_EQ(0, xfer1(self->fd, &e));
	EXPECT_EQ(KVCACHE_PATH_HOST, e.path);
	ASSERT_EQ(0, kvc_seal(self->fd, b[1], (uint32_t)bs, 2,
			      KVCACHE_SEAL_KEEP_PIN));
	p = kvc_map(self->fd, b[1].index, bs, PROT_READ);
	ASSERT_NE(NULL, p);
	EXPECT_EQ(-1, check(p + bs / 2, 0, bs / 2, 55));
	EXPECT_EQ(0, p[0]);
	munmap(p, bs);

	/* Past the block's end. */
	e = (struct kvcache_xfer_entry){
		.fd = f, .flags = KVCACHE_XFER_TO_FILE | KVCACHE_XFER_BLOCK,
		.length = 8192, .offset = bs - 4096, .block = b[1],
	};
	EXPECT_EQ(-ERANGE, xfer1(self->fd, &e));
	for (int i = 0; i < 2; i++) {
		ASSERT_EQ(0, kvc_unpin(self->fd, b[i]));
		ASSERT_EQ(0, kvc_evict(self->fd, b[i]));
	}
	/* A stale handle now. */
	e = (struct kvcache_xfer_entry){
		.fd = f, .flags = KVCACHE_XFER_TO_FILE | KVCACHE_XFER_BLOCK,
		.length = 4096, .block = b[0],
	};
	EXPECT_EQ(-ESTALE, xfer1(self->fd, &e));
	EXPECT_EQ(0, kvc_ns(self->fd, 0, ns, 0, 0, 0));
	free(buf);
	close(f);
}

TEST_F_TIMEOUT(p2p, bad_input_gets_its_documented_error, 600)
{
	struct kvcache_xfer x = { .size = sizeof(x), .eventfd = -1 };
	struct kvcache_xfer_reap rp;
	struct kvcache_region rr;
	struct kvcache_xfer_entry e;
	uint32_t h, h2, failed;
	int ret;
	int f = pattern_file("bad", 1 << 20, 1, O_RDONLY);
	int buffered = open(MNT "/bad", O_RDONLY | O_CLOEXEC);
	int wronly = open(MNT "/bad", O_WRONLY | O_DIRECT | O_CLOEXEC);
	int pipefd[2];

	ASSERT_LE(0, f);
	ASSERT_LE(0, buffered);
	ASSERT_LE(0, wronly);
	ASSERT_EQ(0, pipe(pipefd));

	/* Regions. */
	EXPECT_EQ(-ENODEV, region_reg(self->fd, 999, 0, 4096, &h));
	EXPECT_EQ(-EINVAL, region_reg(self->fd, self->prov, 100, 4096, &h));
	EXPECT_EQ(-EINVAL, region_reg(self->fd, self->prov, 0, 100, &h));
	EXPECT_EQ(-EINVAL, region_reg(self->fd, self->prov, 0, 0, &h));
	EXPECT_EQ(-ERANGE, region_reg(self->fd, self->prov, BAR_SIZE, 4096, &h));
	EXPECT_EQ(-ERANGE, region_reg(self->fd, self->prov, 4096, BAR_SIZE, &h));
	EXPECT_EQ(-ERANGE, region_reg(self->fd, self->prov, 4096,
				      UINT64_MAX & ~4095ULL, &h));
	ASSERT_EQ(0, region_reg(self->fd, self->prov, 0, 1 << 20, &h));
	EXPECT_EQ(-EBUSY, region_reg(self->fd, self->prov, 4096, 4096, &h2));
	EXPECT_EQ(-ENOENT, region_unreg(self->fd, h + 1000));
	/* Flags, reserved bytes and outputs must be zero. */
	rr = (struct kvcache_region){
		.size = sizeof(rr), .provider = (uint32_t)self->prov,
		.offset = 1 << 20, .length = 4096, .flags = 2,
	};
	ret = kvc_ioc(self->fd, KVCACHE_IOC_REGION_REGISTER, &rr);
	EXPECT_EQ(-EINVAL, ret);
	rr.flags = 0;
	rr.reserved[1] = 1;
	ret = kvc_ioc(self->fd, KVCACHE_IOC_REGION_REGISTER, &rr);
	EXPECT_EQ(-EINVAL, ret);
	rr.reserved[1] = 0;
	rr.handle = h;
	ret = kvc_ioc(self->fd, KVCACHE_IOC_REGION_REGISTER, &rr);
	EXPECT_EQ(-EINVAL, ret);
	/* UNREGISTER takes the handle and nothing else. */
	ret = kvc_ioc(self->fd, KVCACHE_IOC_REGION_UNREGISTER, &rr);
	EXPECT_EQ(-EINVAL, ret);

	/* Entries: each fails alone, with its own result. */
	struct { struct kvcache_xfer_entry e; int64_t want; } c[] = {
		{ entry(f, 0, 8192, h, (1 << 20) - 4096, 0), -ERANGE },
		{ entry(f, 0, 8192, h, 1 << 20, 0), -ERANGE },
		{ entry(f, 1 << 20, 4096, h, 0, 0), -ERANGE },	/* past EOF */
		{ entry(f, 512 * 3 + 1, 4096, h, 0, 0), -EINVAL },
		{ entry(f, 0, 100, h, 0, 0), -EINVAL },
		{ entry(f, 0, 0, h, 0, 0), -EINVAL },
		{ entry(f, 0, 4096, h, 0, 1), -EBADF },	/* read-only fd */
		{ entry(wronly, 0, 4096, h, 0, 0), -EBADF },
		{ entry(buffered, 0, 4096, h, 0, 0), -EINVAL },
		{ entry(pipefd[0], 0, 4096, h, 0, 0), -EOPNOTSUPP },
		{ entry(self->fd, 0, 4096, h, 0, 0), -EOPNOTSUPP },
		{ entry(-1, 0, 4096, h, 0, 0), -EBADF },
		{ entry(f, 0, 4096, h + 1000, 0, 0), -ENOENT },
		{ entry(f, 0, (1ULL << 30) + 4096, h, 0, 0), -EINVAL },
		{ entry(f, 0, 4096, h, 0, 0), 4096 },
	};
	unsigned int n = sizeof(c) / sizeof(c[0]);
	struct kvcache_xfer_entry all[sizeof(c) / sizeof(c[0])];

	for (unsigned int i = 0; i < n; i++)
		all[i] = c[i].e;
	ASSERT_EQ(0, xfer(self->fd, all, n, &failed));
	EXPECT_EQ(n - 1, failed);
	for (unsigned int i = 0; i < n; i++) {
		EXPECT_EQ(c[i].want, all[i].result) TH_LOG("entry %u", i);
	}

	/* Entry fields that must be zero, and flags. */
	e = entry(f, 0, 4096, h, 0, 0);
	e.flags = 1u << 7;
	EXPECT_EQ(-EINVAL, xfer1(self->fd, &e));
	e = entry(f, 0, 4096, h, 0, 0);
	e.result = 5;
	EXPECT_EQ(-EINVAL, xfer1(self->fd, &e));
	e = entry(f, 0, 4096, h, 0, 0);
	e.flags = KVCACHE_XFER_BLOCK | KVCACHE_XFER_BOUNCE;
	EXPECT_EQ(-EINVAL, xfer1(self->fd, &e));

	/* The header. */
	e = entry(f, 0, 4096, h, 0, 0);
	x.entries = (uintptr_t)&e;
	EXPECT_EQ(-EINVAL, kvc_ioc(self->fd, KVCACHE_IOC_XFER, &x)); /* count 0 */
	x.count = KVCACHE_MAX_BATCH + 1;
	EXPECT_EQ(-EINVAL, kvc_ioc(self->fd, KVCACHE_IOC_XFER, &x));
	x.count = 1;
	x.flags = 2;
	EXPECT_EQ(-EINVAL, kvc_ioc(self->fd, KVCACHE_IOC_XFER, &x));
	x.flags = 0;
	x.entries = 16;
	EXPECT_EQ(-EFAULT, kvc_ioc(self->fd, KVCACHE_IOC_XFER, &x));
	x.entries = (uintptr_t)&e;
	x.flags = KVCACHE_XFER_ASYNC;
	x.eventfd = f;			/* not an eventfd */
	EXPECT_EQ(-EINVAL, kvc_ioc(self->fd, KVCACHE_IOC_XFER, &x));
	x.eventfd = -2;
	EXPECT_EQ(-EINVAL, kvc_ioc(self->fd, KVCACHE_IOC_XFER, &x));
	EXPECT_EQ(-ENOENT, reap(self->fd, 12345, &e, 1, 0));
	rp = (struct kvcache_xfer_reap){
		.size = sizeof(rp), .flags = 2, .count = 1, .id = 1,
		.entries = (uintptr_t)&e,
	};
	ret = kvc_ioc(self->fd, KVCACHE_IOC_XFER_REAP, &rp);
	EXPECT_EQ(-EINVAL, ret);
	rp.flags = 0;
	rp.failed = 1;		/* an output */
	ret = kvc_ioc(self->fd, KVCACHE_IOC_XFER_REAP, &rp);
	EXPECT_EQ(-EINVAL, ret);
	rp.failed = 0;
	rp.id = 1ULL << 32;	/* no id is that large */
	ret = kvc_ioc(self->fd, KVCACHE_IOC_XFER_REAP, &rp);
	EXPECT_EQ(-EINVAL, ret);

	EXPECT_EQ(0, region_unreg(self->fd, h));
	EXPECT_EQ(-ENOENT, region_unreg(self->fd, h));
	close(pipefd[0]);
	close(pipefd[1]);
	close(wronly);
	close(buffered);
	close(f);
}

TEST_F_TIMEOUT(p2p, another_files_region_is_not_yours, 600)
{
	int other = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	int f = pattern_file("theirs", 1 << 20, 2, O_RDONLY);
	uint32_t h;

	ASSERT_LE(0, other);
	ASSERT_LE(0, f);
	ASSERT_EQ(0, region_reg(other, self->prov, 0, 1 << 20, &h));
	struct kvcache_xfer_entry e = entry(f, 0, 4096, h, 0, 0);

	EXPECT_EQ(-EPERM, xfer1(self->fd, &e));
	EXPECT_EQ(-EPERM, region_unreg(self->fd, h));
	EXPECT_EQ(1, provider_u64(self->prov, "regions"));
	/* Closing the owner unregisters it. */
	close(other);
	EXPECT_EQ(0, provider_u64(self->prov, "regions"));
	e = entry(f, 0, 4096, h, 0, 0);
	EXPECT_EQ(-ENOENT, xfer1(self->fd, &e));
	close(f);
}

/* Four 16 MiB entries: the whole of file @f into the whole BAR region @h. */
static void whole_bar(struct kvcache_xfer_entry e[4], int f, uint32_t h)
{
	for (int i = 0; i < 4; i++)
		e[i] = entry(f, (uint64_t)i << 24, 16 << 20, h,
			     (uint64_t)i << 24, 0);
}

TEST_F_TIMEOUT(p2p, unregister_during_io_lets_the_io_finish, 600)
{
	struct kvcache_xfer_entry e[4];
	uint64_t id;
	uint32_t h;
	int f = pattern_file("unreg", 64 << 20, 44, O_RDONLY);

	ASSERT_LE(0, f);
	ASSERT_EQ(0, region_reg(self->fd, self->prov, 0, BAR_SIZE, &h));
	whole_bar(e, f, h);
	ASSERT_EQ(0, xfer_async(self->fd, e, 4, -1, &id));
	EXPECT_EQ(0, region_unreg(self->fd, h));
	ASSERT_EQ(0, reap(self->fd, id, e, 4, 0));
	for (int i = 0; i < 4; i++)
		EXPECT_EQ(16 << 20, e[i].result);
	EXPECT_EQ(-1, check((const void *)self->bar, 0, BAR_SIZE, 44));
	EXPECT_EQ(0, provider_u64(self->prov, "regions"));
	close(f);
}

TEST_F_TIMEOUT(p2p, unbind_during_io_fails_cleanly, 600)
{
	struct kvcache_xfer_entry e[4];
	uint64_t id;
	uint32_t h;
	int f = pattern_file("unbind", 64 << 20, 45, O_RDONLY);

	ASSERT_LE(0, f);
	ASSERT_EQ(0, region_reg(self->fd, self->prov, 0, BAR_SIZE, &h));
	whole_bar(e, f, h);
	ASSERT_EQ(0, xfer_async(self->fd, e, 4, -1, &id));
	/* Waits for the running entry, revokes the region's memory. */
	ASSERT_EQ(0, write_str("/sys/bus/pci/drivers/kvcache/unbind",
			       self->gpu));
	EXPECT_GT(0, provider_of(self->gpu));
	ASSERT_EQ(0, reap(self->fd, id, e, 4, 0));
	for (int i = 0; i < 4; i++) {
		EXPECT_TRUE(e[i].result == 16 << 20 || e[i].result == -ENODEV)
			TH_LOG("entry %d: %lld", i, (long long)e[i].result);
	}
	e[0] = entry(f, 0, 4096, h, 0, 0);
	EXPECT_EQ(-ENODEV, xfer1(self->fd, &e[0]));
	EXPECT_EQ(0, region_unreg(self->fd, h));
	/* Bound again, a new provider. */
	EXPECT_LE(0, bind_gpu(self->gpu));
	close(f);
}

TEST_F_TIMEOUT(p2p, killed_mid_transfer_leaks_nothing, 600)
{
	int f = pattern_file("kill", 64 << 20, 46, O_RDONLY);
	uint64_t regions;
	pid_t pid;
	int status;

	ASSERT_LE(0, f);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int fd = open(KVCACHE_DEVICE_PATH, O_RDWR);
		struct kvcache_xfer_entry e[4];
		uint64_t id;
		uint32_t h;

		if (fd < 0 || region_reg(fd, self->prov, 0, BAR_SIZE, &h))
			_exit(1);
		whole_bar(e, f, h);
		xfer_async(fd, e, 4, -1, &id);
		for (;;)	/* and a synchronous one, until killed */
			xfer(fd, e, 4, NULL);
	}
	usleep(300000);
	kill(pid, SIGKILL);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFSIGNALED(status));
	/*
	 * The exit released the file: its region is unregistered at once,
	 * and its cancelled batch lets go of it at the worker's next chunk
	 * (release does not wait for workers, so a hung file system cannot
	 * keep a killed process alive): within seconds, not at once.
	 */
	regions = provider_u64(self->prov, "regions");
	for (int i = 0; i < 100 && regions; i++) {
		usleep(100000);
		regions = provider_u64(self->prov, "regions");
	}
	EXPECT_EQ(0, regions);
	close(f);
}

TEST_F_TIMEOUT(p2p, nvme_cmb_as_a_p2pmem_provider, 600)
{
	char path[PATH_MAX], buf[64];
	uint64_t len = 1 << 20;
	uint32_t h;
	void *mem;
	int cmb, f, out, r;

	r = write_str(PROVIDERS "/add", self->nvme);
	ASSERT_TRUE(r == 0 || r == -EEXIST);
	EXPECT_EQ(-EEXIST, write_str(PROVIDERS "/add", self->nvme));
	/* Its BAR is registered, but not published for others to use. */
	EXPECT_EQ(-EOPNOTSUPP, write_str(PROVIDERS "/add", self->gpu));
	EXPECT_EQ(-EINVAL, write_str(PROVIDERS "/add", "not-a-device"));
	EXPECT_EQ(-ENODEV, write_str(PROVIDERS "/add", "0000:7f:1f.7"));
	EXPECT_EQ(-EINVAL, write_str(PROVIDERS "/remove", "not-a-number"));
	EXPECT_EQ(-ENOENT, write_str(PROVIDERS "/remove", "99999"));
	cmb = provider_of(self->nvme);
	ASSERT_LE(0, cmb);
	snprintf(path, sizeof(path), PROVIDERS "/%d/kind", cmb);
	ASSERT_EQ(0, kvc_read_file(path, buf, sizeof(buf)));
	EXPECT_STREQ("p2pmem\n", buf);

	EXPECT_EQ(-EINVAL, region_reg(self->fd, cmb, 4096, len, &h));
	ASSERT_EQ(0, region_reg(self->fd, cmb, 0, len, &h));
	f = pattern_file("cmb-in", len, 77, O_RDONLY);
	out = pattern_file("cmb-out", 0, 0, O_RDWR);
	ASSERT_LE(0, f);
	ASSERT_LE(0, out);
	ASSERT_EQ(0, posix_memalign(&mem, 4096, len));

	/* A fresh region reads back as zeroes. */
	struct kvcache_xfer_entry e = entry(out, 0, len, h, 0, 1);

	ASSERT_EQ(0, xfer1(self->fd, &e));
	EXPECT_EQ(KVCACHE_PATH_P2P, e.path);	/* the NVMe to itself */
	ASSERT_EQ((ssize_t)len, pread(out, mem, len, 0));
	for (size_t i = 0; i < len; i++)
		if (((uint8_t *)mem)[i]) {
			EXPECT_EQ(0, ((uint8_t *)mem)[i]) TH_LOG("byte %zu", i);
			break;
		}
	/* File -> CMB -> another file. */
	e = entry(f, 0, len, h, 0, 0);
	ASSERT_EQ(0, xfer1(self->fd, &e));
	e = entry(out, 0, len, h, 0, 1);
	ASSERT_EQ(0, xfer1(self->fd, &e));
	ASSERT_EQ((ssize_t)len, pread(out, mem, len, 0));
	EXPECT_EQ(-1, check(mem, 0, len, 77));
	EXPECT_LE(2 * len, provider_u64(cmb, "p2p_bytes"));

	/* Removing the provider revokes the region it still has. */
	snprintf(path, sizeof(path), "%d", self->prov);
	EXPECT_EQ(-EPERM, write_str(PROVIDERS "/remove", path));
	snprintf(buf, sizeof(buf), "%d", cmb);
	ASSERT_EQ(0, write_str(PROVIDERS "/remove", buf));
	EXPECT_EQ(-ENOENT, write_str(PROVIDERS "/remove", buf));
	e = entry(f, 0, len, h, 0, 0);
	EXPECT_EQ(-ENODEV, xfer1(self->fd, &e));
	EXPECT_EQ(0, region_unreg(self->fd, h));
	free(mem);
	close(out);
	close(f);
}

/*
 * A user region: the CMB mapped into this process through sysfs
 * p2pmem/allocate (real P2PDMA pages in a user mapping, what a GPU driver
 * in P2PDMA mode gives an engine). Transfers land in the caller's own
 * mapping, by P2P (the NVMe to its own CMB) or bounced; what is not that
 * provider's P2PDMA memory is refused with its errno; the pages are pinned
 * only while a transfer moves them, so an munmap gives them back at once
 * and the region then fails cleanly, never writing what is mapped there
 * later; the provider's removal revokes it.
 */
TEST_F_TIMEOUT(p2p, user_mapping_of_p2pdma_memory, 600)
{
	const uint64_t len = 1 << 20;
	struct kvcache_info info = { .size = sizeof(info) };
	struct kvcache_xfer_entry e;
	int64_t avail;
	uint8_t *map, *anon, *guard;
	uint32_t h, h2;
	void *mem;
	int cmb, f, out, r, other;
	char buf[16];

	ASSERT_EQ(0, kvc_ioc(self->fd, KVCACHE_IOC_INFO, &info));
	ASSERT_TRUE(info.features & KVCACHE_FEAT_USER_REGION);
	r = write_str(PROVIDERS "/add", self->nvme);
	ASSERT_TRUE(r == 0 || r == -EEXIST);
	cmb = provider_of(self->nvme);
	ASSERT_LE(0, cmb);
	avail = p2pmem_available(self->nvme);
	ASSERT_LE((int64_t)(2 * len), avail);
	/* The mapping, with an inaccessible page range right after it. */
	guard = mmap(NULL, 2 * len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
		     -1, 0);
	ASSERT_NE(MAP_FAILED, guard);
	map = map_p2pmem(self->nvme, guard, len);
	ASSERT_EQ(guard, map);
	EXPECT_EQ(avail - (int64_t)len, p2pmem_available(self->nvme));
	f = pattern_file("user-in", len, 91, O_RDONLY);
	out = pattern_file("user-out", 0, 0, O_RDWR);
	ASSERT_LE(0, f);
	ASSERT_LE(0, out);
	ASSERT_EQ(0, posix_memalign(&mem, 4096, len));

	/* Not that provider's P2PDMA memory, or not a valid range. */
	anon = mmap(NULL, len, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, anon);
	memset(anon, 1, len);
	EXPECT_EQ(-EINVAL, region_reg_user(self->fd, cmb, anon, len, &h));
	munmap(anon, len);
	EXPECT_EQ(-EXDEV, region_reg_user(self->fd, self->prov, map, len, &h));
	EXPECT_EQ(-EINVAL, region_reg_user(self->fd, cmb, map + 100, 4096, &h));
	EXPECT_EQ(-EINVAL, region_reg_user(self->fd, cmb, map, 100, &h));
	EXPECT_EQ(-EINVAL, region_reg_user(self->fd, cmb, map, 0, &h));
	EXPECT_EQ(-EINVAL, region_reg_user(self->fd, cmb,
					   (void *)(UINTPTR_MAX & ~4095UL),
					   8192, &h));
	EXPECT_EQ(-ERANGE, region_reg_user(self->fd, cmb, map, 1ULL << 40,
					   &h));
	EXPECT_EQ(-EFAULT, region_reg_user(self->fd, cmb, map, 2 * len, &h));
	EXPECT_EQ(-ENODEV, region_reg_user(self->fd, 999, map, len, &h));

	ASSERT_EQ(0, region_reg_user(self->fd, cmb, map, len, &h));
	/* File -> the caller's mapping, by the NVMe into its own CMB. */
	e = entry(f, 0, len, h, 0, 0);
	ASSERT_EQ(0, xfer1(self->fd, &e));
	EXPECT_EQ(KVCACHE_PATH_P2P, e.path);
	EXPECT_EQ(-1, check(map, 0, len, 91));
	/* The caller writes through its mapping; region -> file, bounced. */
	fill(map, 0, len, 92);
	e = entry(out, 0, len, h, 0, 1);
	e.flags |= KVCACHE_XFER_BOUNCE;
	ASSERT_EQ(0, xfer1(self->fd, &e));
	EXPECT_EQ(KVCACHE_PATH_BOUNCE, e.path);
	ASSERT_EQ((ssize_t)len, pread(out, mem, len, 0));
	EXPECT_EQ(-1, check(mem, 0, len, 92));
	/* Bounced into the middle of the region, across pages: byte-exact. */
	e = entry(f, 8192, 3 * 4096, h, 5 * 4096, 0);
	e.flags |= KVCACHE_XFER_BOUNCE;
	ASSERT_EQ(0, xfer1(self->fd, &e));
	EXPECT_EQ(-1, check(map, 0, 5 * 4096, 92));
	EXPECT_EQ(-1, check(map + 5 * 4096, 8192, 3 * 4096, 91));
	EXPECT_EQ(-1, check(map + 8 * 4096, 8 * 4096, len - 8 * 4096, 92));
	/* And by P2P, region -> file, at an offset. */
	e = entry(out, 0, 4 * 4096, h, 5 * 4096, 1);
	ASSERT_EQ(0, xfer1(self->fd, &e));
	EXPECT_EQ(KVCACHE_PATH_P2P, e.path);
	ASSERT_EQ(4 * 4096, pread(out, mem, 4 * 4096, 0));
	EXPECT_EQ(-1, check(mem, 8192, 3 * 4096, 91));
	EXPECT_EQ(-1, check((uint8_t *)mem + 3 * 4096, 8 * 4096, 4096, 92));
	/* Another open file cannot use it. */
	other = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, other);
	e = entry(f, 0, 4096, h, 0, 0);
	EXPECT_EQ(-EPERM, xfer1(other, &e));
	close(other);

	/*
	 * Pinned only while moved: an munmap gives the memory back at once,
	 * and the region then fails with -EFAULT; memory mapped at the same
	 * address later is not the region's (-EINVAL) and is never written.
	 */
	ASSERT_EQ(0, munmap(map, len));
	EXPECT_EQ(avail, p2pmem_available(self->nvme));
	e = entry(f, 0, len, h, 0, 0);
	EXPECT_EQ(-EFAULT, xfer1(self->fd, &e));
	e = entry(f, 0, len, h, 0, 0);
	e.flags |= KVCACHE_XFER_BOUNCE;
	EXPECT_EQ(-EFAULT, xfer1(self->fd, &e));
	anon = mmap(map, len, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	ASSERT_EQ(map, anon);
	memset(anon, 7, len);
	e = entry(f, 0, len, h, 0, 0);
	EXPECT_EQ(-EINVAL, xfer1(self->fd, &e));
	e = entry(f, 0, len, h, 0, 0);
	e.flags |= KVCACHE_XFER_BOUNCE;
	EXPECT_EQ(-EINVAL, xfer1(self->fd, &e));
	for (size_t i = 0; i < len; i++)
		if (anon[i] != 7) {
			EXPECT_EQ(7, anon[i]) TH_LOG("byte %zu written", i);
			break;
		}
	EXPECT_EQ(0, region_unreg(self->fd, h));
	munmap(guard, 2 * len);

	/* The provider's removal revokes a user region. */
	map = map_p2pmem(self->nvme, NULL, len);
	ASSERT_NE(MAP_FAILED, map);
	ASSERT_EQ(0, region_reg_user(self->fd, cmb, map, len, &h2));
	snprintf(buf, sizeof(buf), "%d", cmb);
	ASSERT_EQ(0, write_str(PROVIDERS "/remove", buf));
	e = entry(f, 0, 4096, h2, 0, 0);
	EXPECT_EQ(-ENODEV, xfer1(self->fd, &e));
	EXPECT_EQ(0, region_unreg(self->fd, h2));
	ASSERT_EQ(0, munmap(map, len));
	EXPECT_EQ(avail, p2pmem_available(self->nvme));
	free(mem);
	close(out);
	close(f);
}

/*
 * kvcachectl p2pcheck names the path each pair's transfers take, as the
 * tests above see them: the fake GPU to the NVMe by P2P through their
 * switch, or bounced where the GPU sits on the root complex (the path
 * then crosses the host bridge); the CMB to its own controller by P2P.
 */
TEST_F_TIMEOUT(p2p, p2pcheck_names_each_pairs_path, 600)
{
	const char *top = getenv("KVC_TOP");
	char cmd[512], line[2048], gpu[96], cmb[96];
	int r, seen = 0, seen_cmb = 0;
	FILE *out;

	if (!top)
		SKIP(return, "KVC_TOP not set (run under scripts/vm)");
	r = write_str(PROVIDERS "/add", self->nvme);
	ASSERT_TRUE(r == 0 || r == -EEXIST);
	snprintf(cmd, sizeof(cmd), "%s/build/helper/kvcachectl p2pcheck 2>&1",
		 top);
	snprintf(gpu, sizeof(gpu), "verdict: %s -> %s: ", self->gpu,
		 self->nvme);
	snprintf(cmb, sizeof(cmb), "verdict: %s -> %s: ", self->nvme,
		 self->nvme);
	out = popen(cmd, "r");
	ASSERT_NE(NULL, out);
	while (fgets(line, sizeof(line), out)) {
		printf("# %s", line);
		if (!strncmp(line, gpu, strlen(gpu))) {
			const char *v = line + strlen(gpu);

			const char *want = self->want_path == KVCACHE_PATH_P2P ?
				"P2P: P2PDMA distance " :
				"bounce: no PCIe switch joins them";

			seen++;
			EXPECT_EQ(0, strncmp(v, want, strlen(want)));
			EXPECT_TRUE(self->want_path == KVCACHE_PATH_BOUNCE ||
				    strstr(v, "through the switch at "));
		}
		if (!strncmp(line, cmb, strlen(cmb))) {
			seen_cmb++;
			EXPECT_EQ(0, strncmp(line + strlen(cmb),
					     "P2P: the controller's own memory",
					     32));
		}
	}
	EXPECT_EQ(0, pclose(out));
	EXPECT_EQ(1, seen);
	EXPECT_EQ(1, seen_cmb);
}

/* Last: the pattern scripts/check finds in the host file behind the BAR. */
TEST_F_TIMEOUT(p2p, zz_leave_a_pattern_for_the_host, 600)
{
	uint32_t h;
	int f = pattern_file("host", BAR_SIZE, HOST_SEED, O_RDONLY);

	ASSERT_LE(0, f);
	ASSERT_EQ(0, region_reg(self->fd, self->prov, 0, BAR_SIZE, &h));
	struct kvcache_xfer_entry e = entry(f, 0, BAR_SIZE, h, 0, 0);

	ASSERT_EQ(0, xfer1(self->fd, &e));
	EXPECT_EQ(self->want_path, e.path);
	EXPECT_EQ(-1, check((const void *)self->bar, 0, BAR_SIZE, HOST_SEED));
	EXPECT_EQ(0, region_unreg(self->fd, h));
	close(f);
}

TEST_HARNESS_MAIN
