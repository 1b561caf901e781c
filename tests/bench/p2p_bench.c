// SPDX-License-Identifier: GPL-2.0
/*
 * P2P against bounce, in the test VM: the same transfers, file on ext4 on
 * the NVMe -> the fake GPU's BAR, once peer to peer and once forced
 * through the bounce path (KVCACHE_XFER_BOUNCE), alternating run by run.
 *
 * Under TCG absolute times say nothing about hardware, so the CSV has the
 * ratios: wall time, and CPU time per MiB moved (user + system time of
 * this process: the synchronous transfers run in its context, so the
 * kernel's copies are charged to it).
 *
 * Usage (as root, in the VM): p2p_bench [RUNS] [MIB]
 * Output: CSV "metric,run,kvcache_ns,baseline_ns,ratio": kvcache is P2P,
 * the baseline is bounce.
 */
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

/* One batch of @n 1 MiB entries; wall and CPU nanoseconds it took. */
static void run(int kfd, int file, uint32_t region, uint32_t n, int bounce,
		uint64_t *wall, uint64_t *cpu)
{
	struct kvcache_xfer_entry *e = calloc(n, sizeof(*e));
	uint64_t w0, c0;
	uint32_t failed;

	if (!e)
		die("calloc");
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
	*wall = wall_ns() - w0;
	*cpu = cpu_ns() - c0;
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
		die("usage: p2p_bench [RUNS] [MIB <= 64]");
	if (nvme_fs())
		die("ext4 on /dev/nvme0n1");
	if (find_pci(0x1af4, 0x1110, 0, gpu, sizeof(gpu)))
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
		uint64_t pw, pc, bw, bc;

		run(kfd, file, region, mib / ENTRY_MIB, 0, &pw, &pc);
		run(kfd, file, region, mib / ENTRY_MIB, 1, &bw, &bc);
		/* Wall time of the batch: how much faster P2P is. */
		printf("p2p_wall,%d,%llu,%llu,%.3f\n", r,
		       (unsigned long long)pw, (unsigned long long)bw,
		       (double)bw / (double)pw);
		/* CPU time per MiB moved: what each path costs the host. */
		printf("p2p_cpu_per_mib,%d,%.0f,%.0f,%.3f\n", r,
		       (double)pc / mib, (double)bc / mib,
		       pc ? (double)bc / (double)pc : 0.0);
		fflush(stdout);
	}
	region_unreg(kfd, region);
	close(file);
	close(kfd);
	return 0;
}
