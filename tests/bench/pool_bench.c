// SPDX-License-Identifier: GPL-2.0
/*
 * Block pool benchmark, run in the test VM by scripts/bench. Every figure
 * is a ratio against a baseline measured in the same process, interleaved
 * run by run, because the machines are shared and noisy:
 *
 *   pin_unpin_64   PIN + UNPIN of a 64-handle batch, against two null
 *                  ioctls (an unknown command: the cheapest round trip
 *                  into the driver)
 *   map_read       memcpy out of a read-only block mapping, against memcpy
 *                  of the same number of bytes between two private buffers
 *
 * Output: CSV lines "metric,run,kvcache_ns,baseline_ns,ratio" on stdout.
 * Usage: pool_bench [RUNS]
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <linux/kvcache.h>

#define BATCH		64
#define NS_ID		64999

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, "pool_bench: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int xioctl(int fd, unsigned long cmd, void *arg)
{
	return ioctl(fd, cmd, arg) ? -errno : 0;
}

static void batch(int fd, unsigned long cmd, struct kvcache_handle *h)
{
	struct kvcache_batch b = {
		.size = sizeof(b), .count = BATCH, .entries = (uintptr_t)h,
	};

	if (ioctl(fd, cmd, &b))
		die("batch");
}

int main(int argc, char **argv)
{
	int runs = argc > 1 ? atoi(argv[1]) : 5;
	struct kvcache_info info = { .size = sizeof(info) };
	struct kvcache_ns ns = {
		.size = sizeof(ns), .ns_id = NS_ID, .mode = 0700,
	};
	struct kvcache_alloc a = { .size = sizeof(a), .ns_id = NS_ID };
	struct kvcache_seal_entry se[BATCH];
	struct kvcache_handle h[BATCH];
	struct kvcache_batch sb = { .size = sizeof(sb), .count = BATCH };
	uint8_t *map, *src, *dst;
	uint64_t bs, t0, t1, t2;
	volatile uint64_t sink = 0;
	int fd, run, i, iters;

	fd = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		die(KVCACHE_DEVICE_PATH);
	if (xioctl(fd, KVCACHE_IOC_INFO, &info))
		die("info");
	bs = info.block_size;
	if (info.nr_blocks < BATCH) {
		fprintf(stderr, "pool_bench: need %d blocks, pool has %llu\n",
			BATCH, (unsigned long long)info.nr_blocks);
		return 1;
	}
	if (xioctl(fd, KVCACHE_IOC_NS_CREATE, &ns) && errno != EEXIST)
		die("namespace");
	a.count = BATCH;
	a.handles = (uintptr_t)h;
	if (xioctl(fd, KVCACHE_IOC_ALLOC, &a))
		die("alloc");
	for (i = 0; i < BATCH; i++) {
		memset(&se[i], 0, sizeof(se[i]));
		se[i].handle = h[i];
		se[i].payload_len = (uint32_t)bs;
		se[i].key[0] = (uint8_t)i;
	}
	sb.entries = (uintptr_t)se;
	if (xioctl(fd, KVCACHE_IOC_SEAL, &sb))
		die("seal");

	/* One block mapped read-only, and two private buffers as the limit. */
	batch(fd, KVCACHE_IOC_PIN, h);
	map = mmap(NULL, bs, PROT_READ, MAP_SHARED, fd,
		   (off_t)(h[0].index * bs));
	if (map == MAP_FAILED)
		die("mmap");
	src = aligned_alloc(4096, bs);
	dst = aligned_alloc(4096, bs);
	if (!src || !dst)
		die("malloc");
	memset(src, 1, bs);
	memset(dst, 2, bs);
	sink += map[0];
	batch(fd, KVCACHE_IOC_UNPIN, h);

	printf("metric,run,kvcache_ns,baseline_ns,ratio\n");
	for (run = 0; run < runs; run++) {
		struct kvcache_info null_arg = { .size = sizeof(null_arg) };
		unsigned long null_cmd = _IOWR(KVCACHE_IOC_MAGIC, 0x7f,
					       struct kvcache_info);

		iters = 2000;
		t0 = now_ns();
		for (i = 0; i < iters; i++) {
			batch(fd, KVCACHE_IOC_PIN, h);
			batch(fd, KVCACHE_IOC_UNPIN, h);
		}
		t1 = now_ns();
		for (i = 0; i < 2 * iters; i++)
			ioctl(fd, null_cmd, &null_arg);
		t2 = now_ns();
		printf("pin_unpin_64,%d,%.1f,%.1f,%.3f\n", run,
		       (double)(t1 - t0) / iters, (double)(t2 - t1) / iters,
		       (double)(t1 - t0) / (double)(t2 - t1));

		iters = (int)(((uint64_t)512 << 20) / bs);
		t0 = now_ns();
		for (i = 0; i < iters; i++) {
			memcpy(dst, map, bs);
			sink += dst[i % bs];
		}
		t1 = now_ns();
		for (i = 0; i < iters; i++) {
			memcpy(dst, src, bs);
			sink += dst[i % bs];
		}
		t2 = now_ns();
		/* Bandwidth ratio: baseline time over kvcache time. */
		printf("map_read,%d,%.1f,%.1f,%.3f\n", run,
		       (double)(t1 - t0) / iters, (double)(t2 - t1) / iters,
		       (double)(t2 - t1) / (double)(t1 - t0));
		fflush(stdout);
	}

	munmap(map, bs);
	{
		struct kvcache_batch eb = {
			.size = sizeof(eb), .count = BATCH,
			.entries = (uintptr_t)h,
		};
		if (xioctl(fd, KVCACHE_IOC_EVICT, &eb))
			die("evict");
	}
	xioctl(fd, KVCACHE_IOC_NS_DESTROY, &(struct kvcache_ns){
		.size = sizeof(struct kvcache_ns), .ns_id = NS_ID });
	free(src);
	free(dst);
	close(fd);
	return 0;
}
