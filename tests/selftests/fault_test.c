// SPDX-License-Identifier: GPL-2.0
/*
 * Fault injection selftests for kvcache.ko: each injection point under
 * /sys/kernel/debug/kvcache/ (kmod/kvcache_fault.c) is armed for this
 * test's task only (task-filter and /proc/self/make-it-fail), the
 * operation it guards is run, and the test checks that
 *  - the caller gets the documented error, not success and not a crash;
 *  - the stats/ counter of that failure moved by exactly the failures;
 *  - the pool is back at rest afterwards (no block, pin or page leaked);
 *  - a block sealed before the fault, pinned and mapped by another file,
 *    is still there, byte for byte;
 *  - the operation works again once the point is disarmed.
 * Runs as root in the test VM (scripts/vm; --kmemleak checks the failure
 * paths for leaks). Without /dev/kvcache or without the debugfs points (a
 * kernel without CONFIG_FAULT_INJECTION_DEBUG_FS) every test skips.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>

#include "kselftest_harness.h"
#include "kvc_ioctl.h"
#include "kvc_p2p.h"
#include "kvc_sysfs.h"

#define FAULT_DIR	"/sys/kernel/debug/kvcache"

static const char *const fault_names[] = {
	"fail_page_alloc", "fail_block_alloc", "fail_io", "fail_pin",
	"fail_netlink",
};

static const char *fault_knob(const char *fault, const char *knob)
{
	static char path[PATH_MAX];

	snprintf(path, sizeof(path), FAULT_DIR "/%s/%s", fault, knob);
	return path;
}

static int fault_present(void)
{
	for (size_t i = 0; i < sizeof(fault_names) / sizeof(fault_names[0]); i++)
		if (access(fault_knob(fault_names[i], "probability"), W_OK))
			return 0;
	return 1;
}

/*
 * Arm @fault to fail @times times (-1: every time) for this task only,
 * after letting calls pass while their sizes fit in @space (see the
 * kernel's fault-injection.rst). 0 or -errno.
 */
static int fault_arm(const char *fault, int times, unsigned long long space)
{
	char buf[32];
	int ret;

	ret = kvc_write_file(fault_knob(fault, "task-filter"), "Y");
	if (!ret)
		ret = kvc_write_file(fault_knob(fault, "interval"), "1");
	snprintf(buf, sizeof(buf), "%llu", space);
	if (!ret)
		ret = kvc_write_file(fault_knob(fault, "space"), buf);
	snprintf(buf, sizeof(buf), "%d", times);
	if (!ret)
		ret = kvc_write_file(fault_knob(fault, "times"), buf);
	/* verbose 1: one line in the kernel log per injected failure. */
	if (!ret)
		ret = kvc_write_file(fault_knob(fault, "verbose"), "1");
	if (!ret)
		ret = kvc_write_file("/proc/self/make-it-fail", "1");
	/* Last: the point fires only once everything above is in place. */
	if (!ret)
		ret = kvc_write_file(fault_knob(fault, "probability"), "100");
	return ret;
}

/* Every point off, whatever a test did; safe to call twice. */
static void fault_disarm_all(void)
{
	for (size_t i = 0; i < sizeof(fault_names) / sizeof(fault_names[0]); i++) {
		kvc_write_file(fault_knob(fault_names[i], "probability"), "0");
		kvc_write_file(fault_knob(fault_names[i], "space"), "0");
		kvc_write_file(fault_knob(fault_names[i], "times"), "1");
		kvc_write_file(fault_knob(fault_names[i], "task-filter"), "N");
	}
	kvc_write_file("/proc/self/make-it-fail", "0");
}

static long long fault_times_left(const char *fault)
{
	char buf[32];

	if (kvc_read_file(fault_knob(fault, "times"), buf, sizeof(buf)))
		return LLONG_MIN;
	return strtoll(buf, NULL, 10);
}

/* A byte pattern that differs at every offset and between seeds. */
static uint8_t pat(uint32_t seed, uint64_t i)
{
	return (uint8_t)(seed * 131 + i * 7 + (i >> 12) * 13);
}

static void pattern_fill(uint8_t *p, uint64_t n, uint32_t seed)
{
	for (uint64_t i = 0; i < n; i++)
		p[i] = pat(seed, i);
}

/* Offset of the first byte that differs, or -1 when all match. */
static long long pattern_diff(const uint8_t *p, uint64_t n, uint32_t seed)
{
	for (uint64_t i = 0; i < n; i++)
		if (p[i] != pat(seed, i))
			return (long long)i;
	return -1;
}

/* The pool's gauges: equal before and after a test means nothing leaked. */
struct rest {
	uint64_t free, writable, sealed, pinned, quarantined, open_files;
};

static void rest_read(struct rest *r)
{
	r->free = kvc_attr_u64("pool/free_blocks");
	r->writable = kvc_attr_u64("pool/writable_blocks");
	r->sealed = kvc_attr_u64("pool/sealed_blocks");
	r->pinned = kvc_attr_u64("pool/pinned_blocks");
	r->quarantined = kvc_attr_u64("pool/quarantined_blocks");
	r->open_files = kvc_attr_u64("stats/open_files");
}

FIXTURE(fault) {
	int fd;			/* the writer the tests fault */
	int wfd;		/* holds the witness: pinned and mapped */
	uint32_t ns;
	uint64_t bs;
	struct kvcache_handle witness;
	uint8_t *wmap;
	struct rest rest;
	uint64_t low_wm, high_wm;
};

/* A fresh sealed block (key byte = seed) holding seed's pattern. */
static int make_sealed(int fd, uint32_t ns, uint64_t bs, uint32_t seed,
		       struct kvcache_handle *h)
{
	return kvc_make_sealed(fd, ns, bs, seed, pattern_fill, h);
}

FIXTURE_SETUP(fault)
{
	self->fd = self->wfd = -1;
	self->wmap = NULL;
	if (access(KVCACHE_DEVICE_PATH, F_OK))
		SKIP(return, "no " KVCACHE_DEVICE_PATH " (kvcache.ko not loaded)");
	if (!fault_present())
		SKIP(return, "no " FAULT_DIR "/fail_* (no CONFIG_FAULT_INJECTION_DEBUG_FS, or debugfs not mounted)");
	fault_disarm_all();
	rest_read(&self->rest);
	self->low_wm = kvc_attr_u64("pool/low_watermark");
	self->high_wm = kvc_attr_u64("pool/high_watermark");
	self->fd = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->fd);
	self->wfd = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->wfd);
	self->bs = kvc_block_size(self->fd);
	ASSERT_NE(0, self->bs);
	self->ns = (uint32_t)(getpid() % 60000) + 1;
	ASSERT_EQ(0, kvc_ns(self->fd, 1, self->ns, 0, 0, 0700));
	/* The witness: sealed before any fault, pinned and mapped elsewhere. */
	ASSERT_EQ(0, make_sealed(self->fd, self->ns, self->bs, 0x5a,
				 &self->witness));
	ASSERT_EQ(0, kvc_pin(self->wfd, self->witness));
	self->wmap = kvc_map(self->wfd, self->witness.index, self->bs,
			     PROT_READ);
	ASSERT_NE(NULL, self->wmap);
}

/* Evict every sealed block of ns the test left; how many failed. */
static int evict_ns(int fd, uint32_t ns)
{
	struct kvcache_block_info b[64];
	struct kvcache_query q;
	int bad = 0;

	for (;;) {
		q = (struct kvcache_query){
			.size = sizeof(q), .count = 64, .ns_id = ns,
			.entries = (uintptr_t)b,
		};
		if (ioctl(fd, KVCACHE_IOC_QUERY, &q) || !q.count)
			return bad;
		for (uint32_t i = 0; i < q.count; i++)
			if (kvc_evict(fd, b[i].handle))
				return bad + 1;
	}
}

static int set_watermarks(uint64_t low, uint64_t high)
{
	char lo[32], hi[32];

	snprintf(lo, sizeof(lo), "%llu", (unsigned long long)low);
	snprintf(hi, sizeof(hi), "%llu", (unsigned long long)high);
	/* Lower low first, so low <= high holds at every step. */
	if (kvc_write_file(kvc_attr("pool/low_watermark"), "0") ||
	    kvc_write_file(kvc_attr("pool/high_watermark"), hi))
		return -1;
	return kvc_write_file(kvc_attr("pool/low_watermark"), lo);
}

FIXTURE_TEARDOWN(fault)
{
	int fd;

	/* Off first, whatever happened, so nothing else is hit. */
	fault_disarm_all();
	if (self->wmap)
		munmap(self->wmap, self->bs);
	if (self->wfd >= 0)
		close(self->wfd);
	if (self->fd >= 0)
		close(self->fd);
	fd = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return;
	evict_ns(fd, self->ns);
	kvc_ns(fd, 0, self->ns, 0, 0, 0);
	close(fd);
	/* Put back the watermarks a test may have moved. */
	set_watermarks(self->low_wm, self->high_wm);
}

/* The witness is still sealed, with its key, length and every byte. */
#define CHECK_WITNESS() do {						\
	struct kvcache_block_info _b;					\
	struct kvcache_query _q = {					\
		.size = sizeof(_q), .count = 1, .ns_id = self->ns,	\
		.start = self->witness.index, .entries = (uintptr_t)&_b,\
	};								\
	uint8_t *_p;							\
	ASSERT_EQ(0, kvc_ioc(self->fd, KVCACHE_IOC_QUERY, &_q));	\
	ASSERT_EQ(1, _q.count);						\
	EXPECT_EQ(self->witness.index, _b.handle.index);		\
	EXPECT_EQ(self->witness.gen, _b.handle.gen);			\
	EXPECT_EQ(self->bs, _b.payload_len);				\
	EXPECT_EQ(0x5a, _b.key[0]);					\
	EXPECT_EQ(0x5a, _b.key[KVCACHE_KEY_SIZE - 1]);			\
	EXPECT_EQ(-1, pattern_diff(self->wmap, self->bs, 0x5a));	\
	/* And through a fresh mapping of a fresh pin. */		\
	ASSERT_EQ(0, kvc_pin(self->fd, self->witness));			\
	_p = kvc_map(self->fd, self->witness.index, self->bs, PROT_READ);\
	ASSERT_NE(NULL, _p);						\
	EXPECT_EQ(-1, pattern_diff(_p, self->bs, 0x5a));		\
	munmap(_p, self->bs);						\
	EXPECT_EQ(0, kvc_unpin(self->fd, self->witness));		\
} while (0)

/*
 * Give everything back (the witness and the test's blocks) and check the
 * pool is exactly where it was before the test.
 */
#define CHECK_AT_REST() do {						\
	struct rest _r;							\
	if (self->wmap)							\
		munmap(self->wmap, self->bs);				\
	self->wmap = NULL;						\
	if (self->wfd >= 0)						\
		close(self->wfd);					\
	self->wfd = -1;							\
	close(self->fd);						\
	self->fd = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);	\
	ASSERT_LE(0, self->fd);						\
	EXPECT_EQ(0, evict_ns(self->fd, self->ns));			\
	close(self->fd);						\
	self->fd = -1;							\
	rest_read(&_r);							\
	EXPECT_EQ(self->rest.free, _r.free);				\
	EXPECT_EQ(self->rest.writable, _r.writable);			\
	EXPECT_EQ(self->rest.sealed, _r.sealed);			\
	EXPECT_EQ(self->rest.pinned, _r.pinned);			\
	EXPECT_EQ(self->rest.quarantined, _r.quarantined);		\
	EXPECT_EQ(self->rest.open_files, _r.open_files);		\
} while (0)

/* ---- fail_block_alloc ----------------------------------------------- */

TEST_F(fault, block_alloc_fails_the_whole_batch)
{
	uint64_t fails0 = kvc_attr_u64("stats/alloc_failures");
	uint64_t allocs0 = kvc_attr_u64("stats/allocs");
	uint64_t free0 = kvc_attr_u64("pool/free_blocks");
	uint64_t writable0 = kvc_attr_u64("pool/writable_blocks");
	struct kvcache_handle h[4];
	uint8_t *p;

	if (free0 < 4)
		SKIP(return, "fewer than 4 free blocks");
	/* The first block of a batch fails. */
	ASSERT_EQ(0, fault_arm("fail_block_alloc", 1, 0));
	EXPECT_EQ(-ENOMEM, kvc_alloc(self->fd, self->ns, 4, h));
	EXPECT_EQ(0, fault_times_left("fail_block_alloc"));
	/* The third: the two before it were taken and must come back. */
	ASSERT_EQ(0, fault_arm("fail_block_alloc", 1, 2 * self->bs + 1));
	EXPECT_EQ(-ENOMEM, kvc_alloc(self->fd, self->ns, 4, h));
	EXPECT_EQ(0, fault_times_left("fail_block_alloc"));
	fault_disarm_all();

	EXPECT_EQ(fails0 + 2, kvc_attr_u64("stats/alloc_failures"));
	EXPECT_EQ(allocs0, kvc_attr_u64("stats/allocs"));
	EXPECT_EQ(free0, kvc_attr_u64("pool/free_blocks"));
	EXPECT_EQ(writable0, kvc_attr_u64("pool/writable_blocks"));
	CHECK_WITNESS();

	/* Disarmed, the same batch works, zeroed, and seals. */
	ASSERT_EQ(0, kvc_alloc(self->fd, self->ns, 4, h));
	EXPECT_EQ(free0 - 4, kvc_attr_u64("pool/free_blocks"));
	for (int i = 0; i < 4; i++) {
		p = kvc_map(self->fd, h[i].index, self->bs,
			    PROT_READ | PROT_WRITE);
		ASSERT_NE(NULL, p);
		for (uint64_t j = 0; j < self->bs; j += 64)
			ASSERT_EQ(0, p[j]);
		pattern_fill(p, self->bs, (uint32_t)i);
		munmap(p, self->bs);
		EXPECT_EQ(0, kvc_seal(self->fd, h[i], (uint32_t)self->bs,
				      (uint8_t)i, 0));
	}
	CHECK_AT_REST();
}

/* ---- fail_page_alloc ------------------------------------------------ */

TEST_F(fault, page_alloc_keeps_the_old_pool_or_falls_back)
{
	uint64_t pool_size = kvc_attr_u64("pool/pool_size");
	uint64_t nr_runs = pool_size >> 21;
	uint64_t fails0 = kvc_attr_u64("stats/pool_alloc_failures");
	struct kvcache_handle h;
	char buf[32];
	uint8_t *p;

	/* Replacing the pool needs every block free: no witness here. */
	munmap(self->wmap, self->bs);
	self->wmap = NULL;
	close(self->wfd);
	self->wfd = -1;
	ASSERT_EQ(0, evict_ns(self->fd, self->ns));
	ASSERT_EQ(kvc_attr_u64("pool/nr_blocks"),
		  kvc_attr_u64("pool/free_blocks"));
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)pool_size);

	/* Every page fails: the write fails and the old pool stays. */
	ASSERT_EQ(0, fault_arm("fail_page_alloc", -1, 0));
	EXPECT_EQ(-ENOMEM, kvc_write_file(kvc_attr("pool/pool_size"), buf));
	fault_disarm_all();
	EXPECT_EQ(fails0 + 1, kvc_attr_u64("stats/pool_alloc_failures"));
	EXPECT_EQ(pool_size, kvc_attr_u64("pool/pool_size"));
	EXPECT_EQ(kvc_attr_u64("pool/nr_blocks"),
		  kvc_attr_u64("pool/free_blocks"));
	/* ... and still works. */
	ASSERT_EQ(0, make_sealed(self->fd, self->ns, self->bs, 3, &h));
	ASSERT_EQ(0, kvc_evict(self->fd, h));

	/*
	 * One failure, on the first 2 MiB run: the pool falls back to single
	 * pages there and the write succeeds with one run fewer.
	 */
	if (nr_runs) {
		ASSERT_EQ(0, fault_arm("fail_page_alloc", 1, 0));
		EXPECT_EQ(0, kvc_write_file(kvc_attr("pool/pool_size"), buf));
		EXPECT_EQ(0, fault_times_left("fail_page_alloc"));
		fault_disarm_all();
		EXPECT_GT(nr_runs, kvc_attr_u64("pool/huge_chunks"));
		EXPECT_EQ(fails0 + 1, kvc_attr_u64("stats/pool_alloc_failures"));
		ASSERT_EQ(0, make_sealed(self->fd, self->ns, self->bs, 4, &h));
		ASSERT_EQ(0, kvc_pin(self->fd, h));
		p = kvc_map(self->fd, h.index, self->bs, PROT_READ);
		ASSERT_NE(NULL, p);
		EXPECT_EQ(-1, pattern_diff(p, self->bs, 4));
		munmap(p, self->bs);
		ASSERT_EQ(0, kvc_unpin(self->fd, h));
	}
	CHECK_AT_REST();
}

/* ---- fail_pin ------------------------------------------------------- */

TEST_F(fault, pin_fails_cleanly_and_seal_keep_pin_does_not_half_seal)
{
	uint64_t fails0 = kvc_attr_u64("stats/pin_failures");
	uint64_t pins0 = kvc_attr_u64("stats/pins");
	uint64_t seals0 = kvc_attr_u64("stats/seals");
	struct kvcache_handle h[3], s;
	uint64_t pinned0, sealed0, writable0;
	uint32_t done = 99;
	int pfd;
	uint8_t *p;

	for (int i = 0; i < 3; i++)
		ASSERT_EQ(0, make_sealed(self->fd, self->ns, self->bs,
					 (uint32_t)(10 + i), &h[i]));
	pinned0 = kvc_attr_u64("pool/pinned_blocks");
	/* A file that never pinned these: each first pin needs memory. */
	pfd = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, pfd);

	ASSERT_EQ(0, fault_arm("fail_pin", 1, 0));
	EXPECT_EQ(-ENOMEM, kvc_batch(pfd, KVCACHE_IOC_PIN, h, 3, &done));
	EXPECT_EQ(0, done);
	/* Fails at the second entry: the first stays pinned, no more. */
	ASSERT_EQ(0, fault_arm("fail_pin", 1, 1 + 1));
	EXPECT_EQ(-ENOMEM, kvc_batch(pfd, KVCACHE_IOC_PIN, h, 3, &done));
	EXPECT_EQ(1, done);
	EXPECT_EQ(0, fault_times_left("fail_pin"));
	fault_disarm_all();
	EXPECT_EQ(fails0 + 2, kvc_attr_u64("stats/pin_failures"));
	EXPECT_EQ(pins0 + 1, kvc_attr_u64("stats/pins"));
	EXPECT_EQ(pinned0 + 1, kvc_attr_u64("pool/pinned_blocks"));
	/* The unpinned ones are evictable: no pin leaked in the pool. */
	EXPECT_EQ(-EBUSY, kvc_evict(self->fd, h[0]));
	EXPECT_EQ(-EINVAL, kvc_unpin(pfd, h[1]));	/* never pinned here */
	EXPECT_EQ(0, kvc_evict(self->fd, h[1]));
	/* The one that did pin reads back intact; then all unpin. */
	p = kvc_map(pfd, h[0].index, self->bs, PROT_READ);
	ASSERT_NE(NULL, p);
	EXPECT_EQ(-1, pattern_diff(p, self->bs, 10));
	munmap(p, self->bs);
	EXPECT_EQ(0, kvc_pin(pfd, h[2]));
	EXPECT_EQ(0, kvc_unpin(pfd, h[0]));
	EXPECT_EQ(0, kvc_unpin(pfd, h[2]));
	EXPECT_EQ(pinned0, kvc_attr_u64("pool/pinned_blocks"));

	/*
	 * SEAL with KEEP_PIN: the pin's memory is taken before sealing, so
	 * a failure leaves the block writable and the entry not done.
	 */
	ASSERT_EQ(0, kvc_alloc(pfd, self->ns, 1, &s));
	p = kvc_map(pfd, s.index, self->bs, PROT_READ | PROT_WRITE);
	ASSERT_NE(NULL, p);
	pattern_fill(p, self->bs, 20);
	munmap(p, self->bs);
	sealed0 = kvc_attr_u64("pool/sealed_blocks");
	writable0 = kvc_attr_u64("pool/writable_blocks");
	seals0 = kvc_attr_u64("stats/seals");
	ASSERT_EQ(0, fault_arm("fail_pin", 1, 0));
	EXPECT_EQ(-ENOMEM, kvc_seal(pfd, s, (uint32_t)self->bs, 20,
				    KVCACHE_SEAL_KEEP_PIN));
	fault_disarm_all();
	EXPECT_EQ(fails0 + 3, kvc_attr_u64("stats/pin_failures"));
	EXPECT_EQ(sealed0, kvc_attr_u64("pool/sealed_blocks"));
	EXPECT_EQ(writable0, kvc_attr_u64("pool/writable_blocks"));
	EXPECT_EQ(seals0, kvc_attr_u64("stats/seals"));
	/* Still the writer's: it can seal it now, pinned. */
	EXPECT_EQ(0, kvc_seal(pfd, s, (uint32_t)self->bs, 20,
			      KVCACHE_SEAL_KEEP_PIN));
	EXPECT_EQ(-EBUSY, kvc_evict(self->fd, s));
	p = kvc_map(pfd, s.index, self->bs, PROT_READ);
	ASSERT_NE(NULL, p);
	EXPECT_EQ(-1, pattern_diff(p, self->bs, 20));
	munmap(p, self->bs);
	close(pfd);

	CHECK_WITNESS();
	CHECK_AT_REST();
}

/* ---- fail_io -------------------------------------------------------- */

/* A file of @len bytes of seed's pattern in $TMPDIR, reopened O_DIRECT. */
static int tmp_pattern_file(uint64_t len, uint32_t seed)
{
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char path[PATH_MAX];
	uint8_t *buf = malloc(len);
	int fd, dfd = -1;

	snprintf(path, sizeof(path), "%s/kvc-fault-XXXXXX", dir);
	fd = mkstemp(path);
	if (fd < 0 || !buf)
		goto out;
	pattern_fill(buf, len, seed);
	if (pwrite(fd, buf, len, 0) == (ssize_t)len && !fsync(fd))
		dfd = open(path, O_RDWR | O_DIRECT | O_CLOEXEC);
out:
	if (fd >= 0) {
		unlink(path);
		close(fd);
	}
	free(buf);
	return dfd;
}

static int xfer_block(int fd, int file, struct kvcache_handle h, uint64_t len,
		      int to_file, int64_t *result)
{
	struct kvcache_xfer_entry e = {
		.fd = file, .length = len, .block = h,
		.flags = KVCACHE_XFER_BLOCK | (to_file ? KVCACHE_XFER_TO_FILE : 0),
	};
	struct kvcache_xfer x = {
		.size = sizeof(x), .count = 1, .eventfd = -1,
		.entries = (uintptr_t)&e,
	};
	int ret = kvc_ioc(fd, KVCACHE_IOC_XFER, &x);

	*result = e.result;
	if (!ret && x.failed != (e.result < 0))
		return -EPROTO;
	return ret;
}

TEST_F(fault, io_error_fails_the_entry_and_holds_nothing)
{
	uint64_t eio0 = kvc_attr_u64("stats/io_errors");
	struct kvcache_handle h;
	int64_t result = 0;
	uint8_t *p, *buf;
	int file;

	file = tmp_pattern_file(self->bs, 33);
	if (file < 0)
		SKIP(return, "no O_DIRECT file in $TMPDIR");

	/* File -> writable block: the entry fails with EIO. */
	ASSERT_EQ(0, kvc_alloc(self->fd, self->ns, 1, &h));
	ASSERT_EQ(0, fault_arm("fail_io", 1, 0));
	EXPECT_EQ(0, xfer_block(self->fd, file, h, self->bs, 0, &result));
	EXPECT_EQ(-EIO, result);
	EXPECT_EQ(0, fault_times_left("fail_io"));
	fault_disarm_all();
	EXPECT_EQ(eio0 + 1, kvc_attr_u64("stats/io_errors"));
	/* Disarmed: the same entry moves every byte. */
	EXPECT_EQ(0, xfer_block(self->fd, file, h, self->bs, 0, &result));
	EXPECT_EQ((int64_t)self->bs, result);
	/* The failed I/O left no page reference behind: seal succeeds. */
	ASSERT_EQ(0, kvc_seal(self->fd, h, (uint32_t)self->bs, 33,
			      KVCACHE_SEAL_KEEP_PIN));
	p = kvc_map(self->fd, h.index, self->bs, PROT_READ);
	ASSERT_NE(NULL, p);
	EXPECT_EQ(-1, pattern_diff(p, self->bs, 33));
	munmap(p, self->bs);

	/* Sealed witness -> file (a spill): EIO, then fine once disarmed. */
	ASSERT_EQ(0, kvc_pin(self->fd, self->witness));
	ASSERT_EQ(0, fault_arm("fail_io", 1, 0));
	EXPECT_EQ(0, xfer_block(self->fd, file, self->witness, self->bs, 1,
				&result));
	EXPECT_EQ(-EIO, result);
	fault_disarm_all();
	EXPECT_EQ(eio0 + 2, kvc_attr_u64("stats/io_errors"));
	EXPECT_EQ(0, xfer_block(self->fd, file, self->witness, self->bs, 1,
				&result));
	EXPECT_EQ((int64_t)self->bs, result);
	EXPECT_EQ(0, kvc_unpin(self->fd, self->witness));
	EXPECT_EQ(eio0 + 2, kvc_attr_u64("stats/io_errors"));
	/* O_DIRECT: an aligned buffer. */
	ASSERT_EQ(0, posix_memalign((void **)&buf, 4096, self->bs));
	EXPECT_EQ((ssize_t)self->bs, pread(file, buf, self->bs, 0));
	EXPECT_EQ(-1, pattern_diff(buf, self->bs, 0x5a));
	free(buf);
	close(file);

	CHECK_WITNESS();
	/* Nothing of the failed I/O holds the blocks: both evict. */
	EXPECT_EQ(0, kvc_unpin(self->fd, h));
	CHECK_AT_REST();
}

/*
 * Region <-> NVMe file, the transfers of an accelerator's memory: through
 * P2P where the bench topology allows it, and through a borrowed pool
 * block (bounce) when asked. Each fails with EIO once and works again.
 */
TEST_F_TIMEOUT(fault, io_error_on_the_p2p_and_bounce_paths, 300)
{
	const char *topo = getenv("KVC_TOPOLOGY");
	const uint64_t len = 1 << 20;
	uint64_t eio0 = kvc_attr_u64("stats/io_errors");
	uint64_t free0 = kvc_attr_u64("pool/free_blocks");
	char gpu[64], nvme[64], path[PATH_MAX];
	volatile void *bar;
	uint64_t perr0;
	uint32_t rh, failed = 0;
	int prov, file, bfd;

	if (nvme_fs() || find_pci(0x1af4, 0x1110, 0, gpu, sizeof(gpu)) ||
	    find_pci(0, 0, 0x010802, nvme, sizeof(nvme)))
		SKIP(return, "no bench NVMe and ivshmem devices");
	prov = bind_gpu(gpu);
	ASSERT_LE(0, prov);
	snprintf(path, sizeof(path), PCI_DEVICES "/%s/resource2", gpu);
	bfd = open(path, O_RDWR | O_SYNC | O_CLOEXEC);
	ASSERT_LE(0, bfd);
	bar = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, bfd, 0);
	close(bfd);
	ASSERT_NE(MAP_FAILED, bar);
	file = pattern_file("fault-io", len, 71, O_RDWR);
	ASSERT_LE(0, file);
	ASSERT_EQ(0, region_reg(self->fd, prov, 0, len, &rh));
	perr0 = provider_u64(prov, "errors");

	for (int bounce = 0; bounce < 2; bounce++) {
		struct kvcache_xfer_entry e = entry(file, 0, len, rh, 0, 0);

		if (bounce)
			e.flags |= KVCACHE_XFER_BOUNCE;
		memset((void *)bar, 0, len);
		ASSERT_EQ(0, fault_arm("fail_io", 1, 0));
		EXPECT_EQ(0, xfer(self->fd, &e, 1, &failed));
		fault_disarm_all();
		EXPECT_EQ(-EIO, e.result);
		EXPECT_EQ(1, failed);
		/* P2P unless asked to bounce or the topology refuses it. */
		EXPECT_EQ(bounce || (topo && !strcmp(topo, "rc")) ?
			  KVCACHE_PATH_BOUNCE : KVCACHE_PATH_P2P, e.path);
		EXPECT_EQ(eio0 + 1 + bounce, kvc_attr_u64("stats/io_errors"));
		EXPECT_EQ(perr0 + 1 + bounce, provider_u64(prov, "errors"));
		/* The bounce block went back to the pool. */
		EXPECT_EQ(free0, kvc_attr_u64("pool/free_blocks"));
		EXPECT_EQ(0, kvc_attr_u64("pool/quarantined_blocks"));

		e = entry(file, 0, len, rh, 0, 0);
		if (bounce)
			e.flags |= KVCACHE_XFER_BOUNCE;
		EXPECT_EQ(0, xfer1(self->fd, &e));
		EXPECT_EQ((int64_t)len, e.result);
		EXPECT_EQ(-1, check((const void *)bar, 0, len, 71));
	}
	EXPECT_EQ(0, region_unreg(self->fd, rh));
	munmap((void *)bar, len);
	close(file);

	CHECK_WITNESS();
	CHECK_AT_REST();
}

/* ---- fail_netlink --------------------------------------------------- */

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

static void *nla_payload(struct nlattr *a)
{
	return (char *)a + NLA_HDRLEN;
}

/* The kvcache family's "events" group id, or 0. */
static uint32_t genl_events_group(int s)
{
	struct nlreq req = { 0 };
	char resp[4096];
	struct nlattr *a, *g, *f;
	int n, rem, grem, frem;
	uint32_t group = 0, id;

	req.n.nlmsg_type = GENL_ID_CTRL;
	req.n.nlmsg_flags = NLM_F_REQUEST;
	req.g.cmd = CTRL_CMD_GETFAMILY;
	req.g.version = 1;
	a = (struct nlattr *)req.buf;
	a->nla_type = CTRL_ATTR_FAMILY_NAME;
	a->nla_len = NLA_HDRLEN + sizeof(KVCACHE_GENL_NAME);
	memcpy(nla_payload(a), KVCACHE_GENL_NAME, sizeof(KVCACHE_GENL_NAME));
	req.n.nlmsg_len = NLMSG_LENGTH(GENL_HDRLEN + NLA_ALIGN(a->nla_len));
	if (send(s, &req, req.n.nlmsg_len, 0) < 0)
		return 0;
	n = recv(s, resp, sizeof(resp), 0);
	if (n <= 0 || ((struct nlmsghdr *)resp)->nlmsg_type == NLMSG_ERROR)
		return 0;
	rem = ((struct nlmsghdr *)resp)->nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN);
	a = (struct nlattr *)(resp + NLMSG_LENGTH(GENL_HDRLEN));
	for (; rem >= (int)NLA_HDRLEN; a = nla_next_attr(a, &rem)) {
		if ((a->nla_type & NLA_TYPE_MASK) != CTRL_ATTR_MCAST_GROUPS)
			continue;
		g = nla_payload(a);
		for (grem = a->nla_len - NLA_HDRLEN; grem >= (int)NLA_HDRLEN;
		     g = nla_next_attr(g, &grem)) {
			int match = 0;

			id = 0;
			f = nla_payload(g);
			for (frem = g->nla_len - NLA_HDRLEN;
			     frem >= (int)NLA_HDRLEN; f = nla_next_attr(f, &frem)) {
				if (f->nla_type == CTRL_ATTR_MCAST_GRP_ID)
					id = *(uint32_t *)nla_payload(f);
				if (f->nla_type == CTRL_ATTR_MCAST_GRP_NAME &&
				    !strcmp(nla_payload(f), KVCACHE_GENL_MCGRP))
					match = 1;
			}
			if (match)
				group = id;
		}
	}
	return group;
}

/*
 * One pressure event: its KVCACHE_A_PRESSURE (and free count), -1 when
 * none came within the socket's timeout, -2 for another message.
 */
static int recv_pressure(int s, uint32_t *nr_free)
{
	char resp[4096];
	struct nlattr *a;
	int n, rem, pressure = -2;

	n = recv(s, resp, sizeof(resp), 0);
	if (n <= 0)
		return -1;
	if (((struct genlmsghdr *)NLMSG_DATA(resp))->cmd != KVCACHE_CMD_PRESSURE)
		return -2;
	rem = ((struct nlmsghdr *)resp)->nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN);
	a = (struct nlattr *)(resp + NLMSG_LENGTH(GENL_HDRLEN));
	for (; rem >= (int)NLA_HDRLEN; a = nla_next_attr(a, &rem)) {
		if (a->nla_type == KVCACHE_A_PRESSURE)
			pressure = *(uint8_t *)nla_payload(a);
		if (a->nla_type == KVCACHE_A_FREE_BLOCKS)
			*nr_free = *(uint32_t *)nla_payload(a);
	}
	return pressure;
}

TEST_F(fault, netlink_drop_is_counted_and_the_event_comes_later)
{
	uint64_t failures0 = kvc_attr_u64("stats/event_failures");
	uint64_t events0 = kvc_attr_u64("stats/events");
	uint64_t free0 = kvc_attr_u64("pool/free_blocks");
	struct timeval tv = { .tv_sec = 0, .tv_usec = 300000 };
	struct kvcache_handle h[2];
	uint32_t group, nr_free = 0;
	int s, wfd;

	if (free0 < 3)
		SKIP(return, "fewer than 3 free blocks");
	s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
	ASSERT_LE(0, s);
	ASSERT_EQ(0, setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)));
	group = genl_events_group(s);
	ASSERT_NE(0, group);
	ASSERT_EQ(0, setsockopt(s, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP,
				&group, sizeof(group)));
	/* The next block taken crosses below low; all back is above high. */
	ASSERT_EQ(0, set_watermarks(free0, free0));
	wfd = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, wfd);

	/* Dropped: the allocation still succeeds, nothing arrives. */
	ASSERT_EQ(0, fault_arm("fail_netlink", 1, 0));
	EXPECT_EQ(0, kvc_alloc(wfd, self->ns, 1, &h[0]));
	EXPECT_EQ(0, fault_times_left("fail_netlink"));
	fault_disarm_all();
	EXPECT_EQ(failures0 + 1, kvc_attr_u64("stats/event_failures"));
	EXPECT_EQ(events0, kvc_attr_u64("stats/events"));
	EXPECT_EQ(-1, recv_pressure(s, &nr_free));
	EXPECT_EQ(free0 - 1, kvc_attr_u64("pool/free_blocks"));

	/* The next check below low sends the event that was lost. */
	tv.tv_sec = 10;
	tv.tv_usec = 0;
	ASSERT_EQ(0, setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)));
	EXPECT_EQ(0, kvc_alloc(wfd, self->ns, 1, &h[1]));
	EXPECT_EQ(1, recv_pressure(s, &nr_free));
	EXPECT_EQ(free0 - 2, nr_free);
	/* Closing the writer gives both back: pressure off, one event. */
	close(wfd);
	EXPECT_EQ(0, recv_pressure(s, &nr_free));
	EXPECT_EQ(free0, nr_free);
	EXPECT_EQ(events0 + 2, kvc_attr_u64("stats/events"));
	EXPECT_EQ(failures0 + 1, kvc_attr_u64("stats/event_failures"));

	/* A dropped "pressure off" is retried the same way. */
	wfd = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, wfd);
	EXPECT_EQ(0, kvc_alloc(wfd, self->ns, 1, &h[0]));
	EXPECT_EQ(1, recv_pressure(s, &nr_free));
	ASSERT_EQ(0, fault_arm("fail_netlink", 1, 0));
	/* Freed by close in this task, so the filter lets it fail. */
	close(wfd);
	fault_disarm_all();
	EXPECT_EQ(failures0 + 2, kvc_attr_u64("stats/event_failures"));
	tv.tv_sec = 0;
	tv.tv_usec = 300000;
	ASSERT_EQ(0, setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)));
	EXPECT_EQ(-1, recv_pressure(s, &nr_free));
	/* Any later check above high sends it: take and give back one. */
	ASSERT_EQ(0, set_watermarks(free0 - 1, free0 - 1));
	wfd = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, wfd);
	tv.tv_sec = 10;
	tv.tv_usec = 0;
	ASSERT_EQ(0, setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)));
	EXPECT_EQ(0, kvc_alloc(wfd, self->ns, 1, &h[0]));
	EXPECT_EQ(0, recv_pressure(s, &nr_free));
	EXPECT_EQ(free0 - 1, nr_free);
	close(wfd);
	EXPECT_EQ(events0 + 4, kvc_attr_u64("stats/events"));
	close(s);

	CHECK_WITNESS();
	CHECK_AT_REST();
}

TEST_HARNESS_MAIN
