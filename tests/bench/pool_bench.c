// SPDX-License-Identifier: GPL-2.0
/*
 * Block pool benchmark, run in the test VM by scripts/bench. Every figure
 * is a ratio against a baseline measured in the same process, interleaved
 * run by run, because the machines are shared and noisy:
 *
 *   pin_unpin_64   PIN + UNPIN of a 64-handle batch, against two null
 *                  ioctls (an unknown command: the cheapest round trip
 *                  into the driver)
 *   info_mutex     KVCACHE_IOC_INFO, whose only lock is one mutex round
 *                  trip, against a null ioctl: what one uncontended lock
 *                  costs on this kernel (lockdep makes it dear), to read
 *                  pin_unpin_64 against
 *   map_read       memcpy out of a read-only block mapping, against memcpy
 *                  of the same number of bytes between two private buffers
 *   hit_map        one DRAM hit in kernel mode as libkvcache did it before
 *                  the pool view: PIN, mmap, memcpy of the block, munmap,
 *                  UNPIN, cycling over 64 blocks, against memcpy of the
 *                  block between private buffers
 *   hit_view       the same hit through the pool view (KVCACHE_VIEW_OFFSET,
 *                  mapped once): PIN, memcpy, UNPIN
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

/*
 * The guest's clock may tick as coarsely as 10 ms (jiffies under TCG), so
 * every measurement runs for at least MIN_NS and is reported per
 * iteration: one tick is then at most 2% of it.
 */
#define MIN_NS	500000000ULL

static void die(const char *what)
{
	fprintf(stderr, "pool_bench: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int xioctl(int fd, unsigned long cmd, void *arg)
{
	return ioctl(fd, cmd, arg) ? -errno : 0;
}

static void batch(int fd, unsigned long cmd, struct kvcache_handle *h,
		  uint32_t count)
{
	struct kvcache_batch b = {
		.size = sizeof(b), .count = count, .entries = (uintptr_t)h,
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
	uint8_t *map, *src, *dst, *view;
	uint64_t bs, t0, t1;
	volatile uint64_t sink = 0;
	int fd, run, i;

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
	batch(fd, KVCACHE_IOC_PIN, h, BATCH);
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
	batch(fd, KVCACHE_IOC_UNPIN, h, BATCH);
	view = mmap(NULL, bs * info.nr_blocks, PROT_READ, MAP_SHARED, fd,
		    (off_t)KVCACHE_VIEW_OFFSET);
	if (view == MAP_FAILED)
		die("mmap of the pool view");

	printf("metric,run,kvcache_ns,baseline_ns,ratio\n");
	for (run = 0; run < runs; run++) {
		struct kvcache_info null_arg = { .size = sizeof(null_arg) };
		unsigned long null_cmd = _IOWR(KVCACHE_IOC_MAGIC, 0x7f,
					       struct kvcache_info);
		double kv, base;
		long n;

		t0 = now_ns();
		for (n = 0; (t1 = now_ns()) - t0 < MIN_NS; n++) {
			batch(fd, KVCACHE_IOC_PIN, h, BATCH);
			batch(fd, KVCACHE_IOC_UNPIN, h, BATCH);
		}
		kv = (double)(t1 - t0) / n;
		t0 = now_ns();
		for (n = 0; (t1 = now_ns()) - t0 < MIN_NS; n++) {
			ioctl(fd, null_cmd, &null_arg);
			ioctl(fd, null_cmd, &null_arg);
		}
		base = (double)(t1 - t0) / n;
		printf("pin_unpin_64,%d,%.1f,%.1f,%.3f\n", run, kv, base,
		       kv / base);

		t0 = now_ns();
		for (n = 0; (t1 = now_ns()) - t0 < MIN_NS; n++) {
			struct kvcache_info ia = { .size = sizeof(ia) };

			ioctl(fd, KVCACHE_IOC_INFO, &ia);
		}
		kv = (double)(t1 - t0) / n;
		/* base is two null ioctls */
		printf("info_mutex,%d,%.1f,%.1f,%.3f\n", run, kv, base / 2,
		       kv / (base / 2));

		t0 = now_ns();
		for (n = 0; (t1 = now_ns()) - t0 < MIN_NS; n++) {
			memcpy(dst, map, bs);
			sink += dst[n % bs];
		}
		kv = (double)(t1 - t0) / n;
		t0 = now_ns();
		for (n = 0; (t1 = now_ns()) - t0 < MIN_NS; n++) {
			memcpy(dst, src, bs);
			sink += dst[n % bs];
		}
		base = (double)(t1 - t0) / n;
		/* Bandwidth ratio: baseline time over kvcache time. */
		printf("map_read,%d,%.1f,%.1f,%.3f\n", run, kv, base, base / kv);

		/* One hit per iteration, over the 64 blocks in turn. */
		t0 = now_ns();
		for (n = 0; (t1 = now_ns()) - t0 < MIN_NS; n++) {
			struct kvcache_handle *hh = &h[n % BATCH];
			uint8_t *p;

			batch(fd, KVCACHE_IOC_PIN, hh, 1);
			p = mmap(NULL, bs, PROT_READ, MAP_SHARED, fd,
				 (off_t)(hh->index * bs));
			if (p == MAP_FAILED)
				die("mmap");
			memcpy(dst, p, bs);
			munmap(p, bs);
			batch(fd, KVCACHE_IOC_UNPIN, hh, 1);
			sink += dst[n % bs];
		}
		kv = (double)(t1 - t0) / n;
		printf("hit_map,%d,%.1f,%.1f,%.3f\n", run, kv, base, base / kv);
		t0 = now_ns();
		for (n = 0; (t1 = now_ns()) - t0 < MIN_NS; n++) {
			struct kvcache_handle *hh = &h[n % BATCH];

			batch(fd, KVCACHE_IOC_PIN, hh, 1);
			memcpy(dst, view + (uint64_t)hh->index * bs, bs);
			batch(fd, KVCACHE_IOC_UNPIN, hh, 1);
			sink += dst[n % bs];
		}
		kv = (double)(t1 - t0) / n;
		printf("hit_view,%d,%.1f,%.1f,%.3f\n", run, kv, base, base / kv);
		fflush(stdout);
	}

	munmap(map, bs);
	munmap(view, bs * info.nr_blocks);
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
