// SPDX-License-Identifier: GPL-2.0
/*
 * P2P against bounce, in the test VM: the same transfers, file on ext4 on
 * the NVMe -> the fake GPU's BAR, once peer to peer and once forced
 * through the bounce path (KVCACHE_XFER_BOUNCE), alternating run by run.
 *
 * Under TCG absolute times say nothing about hardware, so the CSV has the
 * ratios: wall time, and CPU time per MiB moved (user + system time of
 * this process: the synchronous transfers run in its context, so the
 * kernel's copies are charged to it). And two counts that do not depend
 * on the machine, where the emulator's timings say nothing: the bytes
 * the CPU copied per MiB moved (the provider's cpu_copy_bytes: the
 * bounce path's copy), and the bytes of the file found in the page
 * cache after the batch (mincore(2); the cache is dropped before it), a
 * copy through it that direct I/O should never make. A P2P path with an
 * extra copy would show in one of them.
 *
 * Usage (as root, in the VM): p2p_bench [RUNS] [MIB] [PCI]
 * PCI: the device whose BAR to use (default: the VM's ivshmem "GPU").
 * Output: CSV "metric,run,kvcache_ns,baseline_ns,ratio": kvcache is P2P,
 * the baseline is bounce.
 */
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

#include "kvc_p2p.h"

#define ENTRY_MIB	1

static uint64_t wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static uint64_t cpu_ns(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) *
		1000000000ULL + ((uint64_t)ru.ru_utime.tv_usec +
				 (uint64_t)ru.ru_stime.tv_usec) * 1000ULL;
}

static void die(const char *what)
{
	fprintf(stderr, "p2p_bench: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* Bytes of the first @len of @fd in the page cache. */
static uint64_t cached_bytes(int fd, uint64_t len)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t pages = (len + (uint64_t)page - 1) / (uint64_t)page;
	unsigned char *vec = malloc(pages);
	uint64_t n = 0;
	void *p;

	p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED || !vec || mincore(p, len, vec))
		die("mincore");
	for (size_t i = 0; i < pages; i++)
		n += vec[i] & 1;
	munmap(p, len);
	free(vec);
	return n * (uint64_t)page;
}

/* What one batch cost. */
struct cost {
	uint64_t wall, cpu;	/* ns */
	uint64_t copied;	/* bytes the CPU copied (cpu_copy_bytes) */
	uint64_t cached;	/* bytes of the file in the page cache after */
};

/* One batch of @n 1 MiB entries of provider @prov's region. */
static void run(int kfd, int prov, int file, uint32_t region, uint32_t n,
		int bounce, struct cost *c)
{
	struct kvcache_xfer_entry *e = calloc(n, sizeof(*e));
	uint64_t w0, c0, copied0;
	uint32_t failed;

	if (!e)
		die("calloc");
	/* Nothing of the file cached before: what is there after came in
	 * through the page cache. */
	if (posix_fadvise(file, 0, 0, POSIX_FADV_DONTNEED))
		die("posix_fadvise");
	copied0 = provider_u64(prov, "cpu_copy_bytes");
	for (uint32_t i = 0; i < n; i++) {
		e[i] = entry(file, (uint64_t)i << 20, 1 << 20, region,
			     (uint64_t)i << 20, 0);
		if (bounce)
			e[i].flags |= KVCACHE_XFER_BOUNCE;
	}
	w0 = wall_ns();
	c0 = cpu_ns();
	if (xfer(kfd, e, n, &failed) || failed)
		die("transfer");
	c->wall = wall_ns() - w0;
	c->cpu = cpu_ns() - c0;
	c->copied = provider_u64(prov, "cpu_copy_bytes") - copied0;
	c->cached = cached_bytes(file, (uint64_t)n << 20);
	if (e[0].path != (bounce ? KVCACHE_PATH_BOUNCE : KVCACHE_PATH_P2P)) {
		fprintf(stderr, "p2p_bench: path %u, P2P not possible here?\n",
			e[0].path);
		exit(1);
	}
	free(e);
}

int main(int argc, char **argv)
{
	int runs = argc > 1 ? atoi(argv[1]) : 5;
	uint32_t mib = argc > 2 ? (uint32_t)atoi(argv[2]) : 16;
	char gpu[32];
	uint32_t region;
	int prov, kfd, file;

	if (runs < 1 || !mib || mib > 64)
		die("usage: p2p_bench [RUNS] [MIB <= 64] [PCI]");
	if (nvme_fs())
		die("ext4 on /dev/nvme0n1");
	if (argc > 3)
		snprintf(gpu, sizeof(gpu), "%s", argv[3]);
	else if (find_pci(0x1af4, 0x1110, 0, gpu, sizeof(gpu)))
		die("no ivshmem device");
	prov = bind_gpu(gpu);
	if (prov < 0)
		die("binding the ivshmem device to kvcache");
	kfd = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (kfd < 0)
		die(KVCACHE_DEVICE_PATH);
	file = pattern_file("bench", (uint64_t)mib << 20, 1, O_RDONLY);
	if (file < 0)
		die("pattern file");
	if (region_reg(kfd, prov, 0, (uint64_t)mib << 20, &region))
		die("region");

	printf("metric,run,kvcache_ns,baseline_ns,ratio\n");
	for (int r = 1; r <= runs; r++) {
		struct cost p, b;

		run(kfd, prov, file, region, mib / ENTRY_MIB, 0, &p);
		run(kfd, prov, file, region, mib / ENTRY_MIB, 1, &b);
		/* Wall time of the batch: how much faster P2P is. */
		printf("p2p_wall,%d,%llu,%llu,%.3f\n", r,
		       (unsigned long long)p.wall, (unsigned long long)b.wall,
		       (double)b.wall / (double)p.wall);
		/* CPU time per MiB moved: what each path costs the host. */
		printf("p2p_cpu_per_mib,%d,%.0f,%.0f,%.3f\n", r,
		       (double)p.cpu / mib, (double)b.cpu / mib,
		       p.cpu ? (double)b.cpu / (double)p.cpu : 0.0);
		/* Bytes the CPU copied per byte moved; the ratio is P2P's
		 * over bounce's (0 when P2P copies nothing). */
		printf("p2p_cpu_copied_per_byte,%d,%.3f,%.3f,%.3f\n", r,
		       (double)p.copied / (double)(mib << 20),
		       (double)b.copied / (double)(mib << 20),
		       b.copied ? (double)p.copied / (double)b.copied : 0.0);
		/* Bytes through the page cache per byte moved (both 0). */
		printf("p2p_page_cache_per_byte,%d,%.3f,%.3f,%.3f\n", r,
		       (double)p.cached / (double)(mib << 20),
		       (double)b.cached / (double)(mib << 20), 0.0);
		fflush(stdout);
	}
	region_unreg(kfd, region);
	close(file);
	close(kfd);
	return 0;
}
