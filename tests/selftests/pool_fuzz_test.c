// SPDX-License-Identifier: GPL-2.0
/*
 * Random-ioctl fuzz loop against /dev/kvcache: several threads issue random
 * pool calls (valid, stale and garbage handles, random sizes, flags and
 * pointers, random command numbers), map and unmap blocks, close and reopen
 * their files, and fork children that are killed mid-flight. The kernel
 * must survive it with no KASAN, lockdep or kmemleak report (scripts/vm
 * checks the log), and the pool must be back at rest afterwards.
 *
 * KVC_FUZZ_CALLS sets the total number of calls (default 100000).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "kvc_ioctl.h"
#include "kvc_sysfs.h"

#define THREADS		4
#define HANDLES		64

struct fuzzer {
	pthread_t thread;
	uint64_t rng;
	uint32_t ns;
	uint64_t bs;
	uint64_t nr_blocks;
	long calls;
	long done;
	int fd;
	struct kvcache_handle h[HANDLES];
	uint32_t nh;
	uint8_t junk[512];
};

static uint64_t next(struct fuzzer *f)
{
	f->rng ^= f->rng << 13;
	f->rng ^= f->rng >> 7;
	f->rng ^= f->rng << 17;
	return f->rng;
}

/* A handle: one we were given, a mutated one, or garbage. */
static struct kvcache_handle pick(struct fuzzer *f)
{
	struct kvcache_handle h = { 0 };
	uint64_t r = next(f);

	if (f->nh && (r & 3)) {
		h = f->h[r % f->nh];
		if (!(r & 0x30))
			h.gen += 1 + (r >> 40) % 3;
	} else {
		h.index = (r & 0x100) ? (uint32_t)(r >> 8) :
			  (uint32_t)((r >> 8) % (f->nr_blocks + 2));
		h.gen = (uint32_t)(r >> 32);
	}
	return h;
}

/* A user pointer: a good buffer, NULL, unmapped, or a kernel address. */
static void *pointer(struct fuzzer *f, void *good)
{
	switch (next(f) % 16) {
	case 0:
		return NULL;
	case 1:
		return (void *)0xffffffff81000000UL;
	case 2:
		return (void *)(uintptr_t)16;
	default:
		return good;
	}
}

static void remember(struct fuzzer *f, const struct kvcache_handle *h,
		     uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		f->h[(f->nh < HANDLES ? f->nh++ : next(f) % HANDLES)] = h[i];
}

static void one_call(struct fuzzer *f)
{
	struct kvcache_handle hs[8];
	struct kvcache_seal_entry se[4];
	struct kvcache_block_info bi[8];
	uint64_t r = next(f);
	uint32_t n = 1 + (r >> 8) % 4, i;

	switch (r % 12) {
	case 0: {
		uint32_t ns = (r & 0x1000) ? (uint32_t)(r >> 20) : f->ns;

		if (!kvc_alloc(f->fd, ns, n, hs))
			remember(f, hs, n);
		break;
	}
	case 1:
		for (i = 0; i < n; i++) {
			se[i].handle = pick(f);
			se[i].payload_len = (uint32_t)(next(f) % (f->bs + 2));
			se[i].reserved = !(next(f) % 32);
			memset(se[i].key, (int)i, sizeof(se[i].key));
		}
		{
			struct kvcache_batch b = {
				.size = sizeof(b), .count = n,
				.flags = (uint32_t)(next(f) % 3),
				.entries = (uintptr_t)pointer(f, se),
			};
			kvc_ioc(f->fd, KVCACHE_IOC_SEAL, &b);
		}
		break;
	case 2:
	case 3:
	case 4:
		for (i = 0; i < n; i++)
			hs[i] = pick(f);
		kvc_batch(f->fd, (r % 12) == 2 ? KVCACHE_IOC_PIN :
			  (r % 12) == 3 ? KVCACHE_IOC_UNPIN : KVCACHE_IOC_EVICT,
			  pointer(f, hs), n, NULL);
		break;
	case 5: {
		struct kvcache_query q = {
			.size = sizeof(q), .start = (uint32_t)(next(f) % (f->nr_blocks + 4)),
			.count = 1 + (uint32_t)(next(f) % 8),
			.ns_id = (next(f) & 1) ? f->ns : KVCACHE_NS_ANY,
			.entries = (uintptr_t)pointer(f, bi),
		};
		kvc_ioc(f->fd, KVCACHE_IOC_QUERY, &q);
		break;
	}
	case 6: {
		struct kvcache_handle h = pick(f);
		uint64_t len = (next(f) & 7) ? f->bs : f->bs * (1 + next(f) % 3);
		int prot = (next(f) & 1) ? PROT_READ : PROT_READ | PROT_WRITE;
		void *p = mmap(NULL, len, prot, MAP_SHARED, f->fd,
			       (off_t)((uint64_t)h.index * f->bs));

		if (p != MAP_FAILED) {
			if (prot & PROT_WRITE)
				((volatile uint8_t *)p)[next(f) % len] = 1;
			else
				(void)((volatile uint8_t *)p)[next(f) % len];
			munmap(p, len);
		}
		break;
	}
	case 7: {
		/* Any command number of ours, any size, any content. */
		uint32_t size = (uint32_t)next(f) % 600;
		unsigned long cmd = _IOC(next(f) % 4, KVCACHE_IOC_MAGIC,
					 next(f) % 16, next(f) % 128);

		for (i = 0; i < sizeof(f->junk); i += 8)
			*(uint64_t *)(f->junk + i) = (next(f) & 3) ? 0 : next(f);
		memcpy(f->junk, &size, sizeof(size));
		ioctl(f->fd, cmd, pointer(f, f->junk));
		break;
	}
	case 8:
		if (!(r & 0xf00)) {
			/* Drop everything this file holds. */
			close(f->fd);
			f->fd = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
			f->nh = 0;
		}
		break;
	default: {
		struct kvcache_info info = { .size = sizeof(info) };

		kvc_ioc(f->fd, KVCACHE_IOC_INFO, pointer(f, &info));
		break;
	}
	}
}

static void *fuzz_thread(void *arg)
{
	struct fuzzer *f = arg;

	for (f->done = 0; f->done < f->calls && f->fd >= 0; f->done++)
		one_call(f);
	return NULL;
}

/*
 * A child that fuzzes on a file of its own until it is killed. @tmpl is
 * the parent's own copy, never one a thread is using.
 */
static void fuzz_child(struct fuzzer *tmpl, int round)
{
	struct fuzzer f = *tmpl;
	pid_t pid = fork();
	int status;

	if (pid < 0)
		return;
	if (pid == 0) {
		f.rng ^= (uint64_t)round << 32 | (uint64_t)getpid();
		f.fd = open(KVCACHE_DEVICE_PATH, O_RDWR);
		f.nh = 0;
		f.calls = 1L << 40;
		fuzz_thread(&f);
		_exit(0);
	}
	usleep(20000 + (next(tmpl) % 50000));
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
}

FIXTURE(fuzz) {
	int fd;
	uint32_t ns;
};

FIXTURE_SETUP(fuzz)
{
	self->fd = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->fd);
	self->ns = 65000;
	ASSERT_EQ(0, kvc_ns(self->fd, 1, self->ns, 0, 0, 0700));
}

FIXTURE_TEARDOWN(fuzz)
{
	close(self->fd);
}

/* Under scripts/vm's default limit of 900 s for the whole VM. */
TEST_F_TIMEOUT(fuzz, random_ioctls_threads_forks_and_closes, 850)
{
	const char *env = getenv("KVC_FUZZ_CALLS");
	const char *seed_env = getenv("KVC_FUZZ_SEED");
	long total = env ? atol(env) : 100000, calls = 0;
	uint64_t seed = seed_env ? strtoull(seed_env, NULL, 0) :
				   (uint64_t)time(NULL);
	struct fuzzer f[THREADS], tmpl;
	struct kvcache_block_info bi[64];
	uint64_t bs = kvc_block_size(self->fd);
	uint64_t nr = kvc_attr_u64("pool/nr_blocks");
	int i, n, round;

	ASSERT_NE(0, bs);
	TH_LOG("seed %#llx (KVC_FUZZ_SEED to repeat)", (unsigned long long)seed);
	for (i = 0; i < THREADS; i++) {
		memset(&f[i], 0, sizeof(f[i]));
		f[i].rng = (seed | 1) * 0x9e3779b97f4a7c15ULL * (uint64_t)(i + 1);
		f[i].ns = self->ns;
		f[i].bs = bs;
		f[i].nr_blocks = nr;
		f[i].calls = total / THREADS;
		f[i].fd = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
		ASSERT_LE(0, f[i].fd);
	}
	tmpl = f[0];
	tmpl.rng ^= 0x5bd1e995;
	for (i = 0; i < THREADS; i++)
		ASSERT_EQ(0, pthread_create(&f[i].thread, NULL, fuzz_thread,
					    &f[i]));
	/* Meanwhile: children killed mid-flight. */
	for (round = 0; round < 20; round++)
		fuzz_child(&tmpl, round);
	for (i = 0; i < THREADS; i++) {
		pthread_join(f[i].thread, NULL);
		calls += f[i].done;
		close(f[i].fd);
	}
	TH_LOG("%ld calls from %d threads, 20 killed children", calls,
	       THREADS);
	EXPECT_LE(total - THREADS, calls);

	/* At rest again: nothing writable or pinned, sealed ones evictable. */
	EXPECT_EQ(0, kvc_attr_u64("pool/writable_blocks"));
	EXPECT_EQ(0, kvc_attr_u64("pool/pinned_blocks"));
	for (;;) {
		struct kvcache_query q = {
			.size = sizeof(q), .count = 64,
			.entries = (uintptr_t)bi,
		};

		ASSERT_EQ(0, kvc_ioc(self->fd, KVCACHE_IOC_QUERY, &q));
		n = (int)q.count;
		if (!n)
			break;
		for (i = 0; i < n; i++)
			ASSERT_EQ(0, kvc_evict(self->fd, bi[i].handle));
	}
	EXPECT_EQ(nr, kvc_attr_u64("pool/free_blocks"));
	EXPECT_EQ(0, kvc_ns(self->fd, 0, self->ns, 0, 0, 0));
}

TEST_HARNESS_MAIN
