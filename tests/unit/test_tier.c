// SPDX-License-Identifier: GPL-2.0
/*
 * Host tests for helper/kvcached/tiers/tierio.c and helper/kvcached/tiers/tier.c, on real files in a
 * temporary directory and a real io_uring (no mocks):
 *
 *  - tierio: write then read back at the sizes around the 4 KiB padding
 *    and the largest payload, with and without fsync; idempotent
 *    publication; the queue-depth bound (-EBUSY, cancel); misses,
 *    truncation, bit flips and a failing write (RLIMIT_FSIZE), never
 *    leaving a temp file behind.
 *  - a G3 tier: spill and fetch of a chain, recovery by a scan into a
 *    fresh index (stale temp files, unreachable chains, corrupt files,
 *    namespaces not ours), a 100-block chain recovered leaf first and
 *    forged parent cycles, quarantine of a corrupt block found by a read,
 *    LRU eviction of no more than needed to stay under the capacity.
 *  - a shared G4 tier used by two nodes: one sees the other's blocks and
 *    removals, leases keep a block being read, a rescan ending during a
 *    spill keeps its reservation, GC moves victims to .gc/ and deletes
 *    them only after the grace period.
 *  - recovery from manifests (kvc_tier_recover): a full scan, which
 *    writes the manifest, when there is none; the chain found from it
 *    after a restart; a file deleted behind its back not found, one of
 *    another size quarantined; a file no manifest names found by the
 *    background pass (paced, once for g3) and named from then on; a
 *    crashed writer's temp file removed by the recovery itself; a torn
 *    manifest; the rewrite of a manifest whose records pile up keeping
 *    the spills in flight; on G4, one node's recovery reading another's
 *    manifest.
 *  - a tier on a directory the process may not write: read-only, reads
 *    still served.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "blockfile.h"
#include "index.h"
#include "manifest.h"
#include "tier.h"
#include "tier_priv.h"
#include "tierio.h"
#include "tap.h"
#include "scratch.h"

#define KEY		KVC_BF_KEY_SIZE
/* Not a multiple of 4096: the largest block has padding too. */
#define TIO_MAX		(65536 + 1)
#define TIER_MAX	65536
#define G3_BIT		(1u << KVC_TIER_G3)
#define G4_BIT		(1u << KVC_TIER_G4)

static char tmpdir[64];

/* What the callbacks saw; payloads copied, as they die with the call. */
struct seen {
	int n;
	int op, status;
	uint32_t ns, id;
	uint64_t cookie, file_size;
	uint8_t key[KEY];
	struct kvc_bf_header h;
	uint64_t payload_len;
	uint8_t payload[TIO_MAX];
};

static struct seen seen;	/* too big for the stack with ASan */

static void fill_key(uint8_t *k, uint8_t start)
{
	for (int i = 0; i < KEY; i++)
		k[i] = (uint8_t)(start + i);
}

static void fill_pattern(uint8_t *p, size_t len, unsigned int seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)((i * 2654435761U + seed * 40503U) >> 7);
}

static bool same_pattern(const uint8_t *p, size_t len, unsigned int seed)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != (uint8_t)((i * 2654435761U + seed * 40503U) >> 7))
			return false;
	return true;
}

/*
 * snprintf for paths, checked: every path here is short (under /tmp), so
 * a truncation is a bug of the test. Through vsnprintf, as GCC cannot
 * prove these fit and would warn at each call.
 */
static void pathf(char *out, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void pathf(char *out, size_t len, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(out, len, fmt, ap);
	va_end(ap);
	TAP_CHECK(n >= 0 && (size_t)n < len);
}

static void subdir(char *out, size_t len, const char *name)
{
	pathf(out, len, "%s/%s", tmpdir, name);
}

/* dir/ns<ns>/aa/bb/<hex>.kvb, where a tier keeps the block. */
static void tier_path(const char *dir, uint32_t ns, const uint8_t *key,
		      char *out, size_t len)
{
	char d[PATH_MAX];

	pathf(d, sizeof(d), "%s/ns%u", dir, ns);
	if (kvc_bf_path(d, key, out, len))
		out[0] = '\0';
}

static bool exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

static off_t file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) ? -1 : st.st_size;
}

static int count_entries(const char *d)
{
	DIR *dp = opendir(d);
	struct dirent *e;
	int n = 0;

	if (!dp)
		return errno == ENOENT ? 0 : -1;
	while ((e = readdir(dp)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(dp);
	return n;
}

static int ntmp;

static int tmp_one(const char *path, const struct stat *st, int type,
		   struct FTW *ftw)
{
	(void)st;
	(void)type;
	if (!strncmp(path + ftw->base, ".tmp.", 5)) {
		printf("# left behind: %s\n", path);
		ntmp++;
	}
	return 0;
}

/* Temp files anywhere under @d: a writer must never leave one. */
static int count_tmp(const char *d)
{
	ntmp = 0;
	if (nftw(d, tmp_one, 16, FTW_PHYS))
		return -1;
	return ntmp;
}

static void flip(const char *path, off_t off)
{
	int fd = open(path, O_RDWR);
	uint8_t c = 0;

	TAP_ASSERT_GE(fd, 0);
	TAP_CHECK(pread(fd, &c, 1, off) == 1);
	c ^= 0x10;
	TAP_CHECK(pwrite(fd, &c, 1, off) == 1);
	close(fd);
}

/* Set a file's times to now less @ms milliseconds (an old lease). */
static int age_ms(const char *path, long ms)
{
	struct timespec ts[2];

	clock_gettime(CLOCK_REALTIME, &ts[0]);
	ts[0].tv_nsec -= ms % 1000 * 1000000;
	ts[0].tv_sec -= ms / 1000;
	if (ts[0].tv_nsec < 0) {
		ts[0].tv_nsec += 1000000000;
		ts[0].tv_sec--;
	}
	ts[1] = ts[0];
	return utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW);
}

/* The same, @ago seconds. */
static int age(const char *path, time_t ago)
{
	return age_ms(path, (long)ago * 1000);
}

static void make_header(struct kvc_bf_header *h, const uint8_t *key,
			const uint8_t *parent, uint32_t ns, uint64_t len)
{
	memset(h, 0, sizeof(*h));
	memcpy(h->key, key, KEY);
	if (parent)
		memcpy(h->parent, parent, KEY);
	else
		h->flags = KVC_BF_F_FIRST;
	h->ns_id = ns;
	h->payload_len = len;
	strcpy(h->node_id, "node-a");
}

/* ---- tierio ------------------------------------------------------------- */

/*
 * Where reads go: NULL, a slot; else in place, into tio_dst (a pool
 * block's stand-in: page-aligned, the largest padded payload long).
 */
static uint8_t *tio_dst;
#define TIO_DST_LEN	(kvc_bf_file_size(TIO_MAX) - KVC_BF_HEADER_SIZE)

static void tio_cb(void *arg, const struct kvc_tio_done *d)
{
	struct seen *s = arg;

	s->n++;
	s->op = d->op;
	s->status = d->status;
	s->cookie = d->cookie;
	s->file_size = d->file_size;
	s->payload_len = 0;
	if (d->op == KVC_TIO_READ && !d->status) {
		/* In place, the payload is where the caller said. */
		if (tio_dst)
			TAP_CHECK(d->payload == tio_dst);
		s->h = *d->h;
		s->payload_len = d->h->payload_len;
		if (s->payload_len <= sizeof(s->payload))
			memcpy(s->payload, d->payload, s->payload_len);
	}
}

/* Reap until @want callbacks came (each reset seen.n first). */
static int tio_wait(struct kvc_tio *t, int want)
{
	for (int i = 0; i < 10000 && seen.n < want; i++) {
		int ret = kvc_tio_reap(t, true, tio_cb, &seen);

		if (ret < 0)
			return ret;
	}
	return seen.n >= want ? 0 : -ETIMEDOUT;
}

/*
 * Write a block through the ring: the submit's error, or the callback's
 * status once it came.
 */
static int tio_put(struct kvc_tio *t, const char *dir,
		   const struct kvc_bf_header *h, unsigned int seed)
{
	uint8_t *p;
	int slot, ret;

	slot = kvc_tio_write_begin(t, &p);
	if (slot < 0)
		return slot;
	fill_pattern(p, (size_t)h->payload_len, seed);
	ret = kvc_tio_write_submit(t, slot, dir, h, seed);
	if (ret)
		return ret;
	seen.n = 0;
	ret = tio_wait(t, 1);
	if (ret)
		return ret;
	TAP_CHECK(seen.op == KVC_TIO_WRITE && seen.cookie == seed);
	return seen.status;
}

static int tio_start(struct kvc_tio *t, const char *dir, const uint8_t *key,
		     uint64_t cookie)
{
	return tio_dst ? kvc_tio_read_into(t, dir, key, cookie, tio_dst,
					   TIO_DST_LEN) :
			 kvc_tio_read(t, dir, key, cookie);
}

/* Read a block: an error at once, or the callback's status. */
static int tio_get(struct kvc_tio *t, const char *dir, const uint8_t *key,
		   uint64_t cookie)
{
	int ret;

	seen.n = 0;
	ret = tio_start(t, dir, key, cookie);
	if (ret)
		return ret;
	ret = tio_wait(t, 1);
	if (ret)
		return ret;
	TAP_CHECK(seen.op == KVC_TIO_READ && seen.cookie == cookie);
	return seen.status;
}

static struct kvc_tio *tio_new(unsigned int depth, bool fsync)
{
	struct kvc_tio_config c = {
		.depth = depth, .max_payload = TIO_MAX, .fsync = fsync,
		.tag = "node-a",
	};
	struct kvc_tio *t = NULL;
	int ret = kvc_tio_create(&t, &c);

	if (ret)
		printf("# kvc_tio_create: %s\n", strerror(-ret));
	return t;
}

static void tio_config_errors(void)
{
	struct kvc_tio_config c = {
		.depth = 1, .max_payload = 4096, .tag = "node-a",
	};
	struct kvc_tio *t;

	c.depth = 0;
	TAP_EXPECT_EQ(kvc_tio_create(&t, &c), -EINVAL);
	c.depth = KVC_TIO_MAX_DEPTH + 1;
	TAP_EXPECT_EQ(kvc_tio_create(&t, &c), -EINVAL);
	c.depth = 1;
	c.max_payload = 0;
	TAP_EXPECT_EQ(kvc_tio_create(&t, &c), -EINVAL);
	c.max_payload = KVC_BF_MAX_PAYLOAD + 1;
	TAP_EXPECT_EQ(kvc_tio_create(&t, &c), -EINVAL);
	c.max_payload = 4096;
	c.tag = "";
	TAP_EXPECT_EQ(kvc_tio_create(&t, &c), -EINVAL);
	c.tag = "a/b";		/* the tag is part of a file name */
	TAP_EXPECT_EQ(kvc_tio_create(&t, &c), -EINVAL);
	c.tag = NULL;
	TAP_EXPECT_EQ(kvc_tio_create(&t, &c), -EINVAL);
}

/* Write and read back at every interesting size, fsync on or off. */
static void tio_round_trip(bool fsync, const char *name)
{
	static const size_t sizes[] = { 1, 4095, 4096, 4097, TIO_MAX };
	char dir[PATH_MAX], path[PATH_MAX];
	struct kvc_bf_header h, got;
	struct kvc_tio *t;
	uint8_t key[KEY], parent[KEY];

	subdir(dir, sizeof(dir), name);
	TAP_CHECK(mkdir(dir, 0755) == 0);
	t = tio_new(4, fsync);
	TAP_ASSERT_TRUE(t != NULL);
	TAP_CHECK(kvc_tio_fd(t) >= 0);
	TAP_CHECK(kvc_tio_idle_slots(t) == 4 && kvc_tio_in_flight(t) == 0);
	fill_key(parent, 0xf0);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t len = sizes[i];
		unsigned int seed = 100 + (unsigned int)i;

		fill_key(key, (uint8_t)(0x10 * (i + 1)));
		/* Odd ones are later blocks of a chain. */
		make_header(&h, key, i % 2 ? parent : NULL, 7, len);
		TAP_CHECK(tio_put(t, dir, &h, seed) == 0);
		TAP_CHECK(seen.file_size == kvc_bf_file_size(len));
		TAP_CHECK(kvc_bf_path(dir, key, path, sizeof(path)) == 0);
		TAP_CHECK((uint64_t)file_size(path) == kvc_bf_file_size(len));
		TAP_CHECK(file_size(path) % 4096 == 0);
		TAP_CHECK(kvc_tio_idle_slots(t) == 4);

		memset(seen.payload, 0, sizeof(seen.payload));
		TAP_CHECK(tio_get(t, dir, key, 1000 + i) == 0);
		TAP_CHECK(seen.file_size == kvc_bf_file_size(len));
		TAP_CHECK(seen.payload_len == len);
		TAP_CHECK(same_pattern(seen.payload, len, seed));
		TAP_CHECK(seen.h.flags == h.flags);
		TAP_CHECK(memcmp(seen.h.key, key, KEY) == 0);
		TAP_CHECK(memcmp(seen.h.parent, h.parent, KEY) == 0);
		TAP_CHECK(seen.h.ns_id == 7);
		TAP_CHECK(seen.h.payload_len == len);
		TAP_CHECK(seen.h.payload_crc ==
			  kvc_crc32c(0, seen.payload, len));
		TAP_CHECK(seen.h.ctime_ns != 0);
		TAP_CHECK(strcmp(seen.h.node_id, "node-a") == 0);
		TAP_CHECK(kvc_tio_idle_slots(t) == 4);

		/* The synchronous reader agrees on the same file. */
		memset(seen.payload, 0, sizeof(seen.payload));
		TAP_CHECK(kvc_bf_read(dir, key, &got, seen.payload,
				      sizeof(seen.payload)) == 0);
		TAP_CHECK(same_pattern(seen.payload, len, seed));
		TAP_CHECK(got.ctime_ns == seen.h.ctime_ns);
	}

	/*
	 * A byte more than a slot holds (the largest block and its
	 * padding): refused, and the slot comes back. Not filled, as the
	 * bytes would not fit.
	 */
	fill_key(key, 0x07);
	make_header(&h, key, NULL, 7,
		    kvc_bf_file_size(TIO_MAX) - KVC_BF_HEADER_SIZE + 1);
	{
		uint8_t *p;
		int slot = kvc_tio_write_begin(t, &p);

		TAP_CHECK(slot >= 0);
		TAP_CHECK(kvc_tio_write_submit(t, slot, dir, &h, 1) ==
			  -EINVAL);
	}
	TAP_CHECK(kvc_bf_path(dir, key, path, sizeof(path)) == 0);
	TAP_CHECK(!exists(path));
	TAP_CHECK(kvc_tio_idle_slots(t) == 4);
	kvc_tio_destroy(t);
	TAP_CHECK(count_tmp(dir) == 0);
}

static void tio_round_trip_fsync(void)
{
	tio_round_trip(true, "tio-fsync");
}

static void tio_round_trip_nofsync(void)
{
	tio_round_trip(false, "tio-nofsync");
}

/* A second publication keeps the first copy and reports -EEXIST. */
static void tio_publish_twice(void)
{
	char dir[PATH_MAX];
	struct kvc_bf_header h;
	struct kvc_tio *t = tio_new(2, true);
	uint8_t key[KEY];

	TAP_ASSERT_TRUE(t != NULL);
	subdir(dir, sizeof(dir), "tio-twice");
	TAP_CHECK(mkdir(dir, 0755) == 0);
	fill_key(key, 0x20);
	make_header(&h, key, NULL, 7, 5000);
	TAP_CHECK(tio_put(t, dir, &h, 1) == 0);
	seen.n = 0;
	/* Found by the look before the create: nothing written. */
	TAP_EXPECT_EQ(tio_put(t, dir, &h, 2), -EEXIST);
	TAP_EXPECT_EQ(seen.n, 1);	/* its callback says so */
	TAP_CHECK(kvc_tio_idle_slots(t) == 2);
	TAP_CHECK(tio_get(t, dir, key, 3) == 0);
	TAP_CHECK(same_pattern(seen.payload, 5000, 1));
	kvc_tio_destroy(t);
	TAP_CHECK(count_tmp(dir) == 0);
}

/*
 * At most depth requests: -EBUSY beyond, until one is reaped or
 * cancelled; and writes at most depth minus a quarter (rounded up): at
 * depth 3, two writes, and the third slot is a read's.
 */
static void tio_queue_depth(void)
{
	char dir[PATH_MAX], path[PATH_MAX];
	struct kvc_bf_header h;
	struct kvc_tio *t = tio_new(3, true);
	struct pollfd pfd;
	uint8_t *p0, *p1, *p2, *px;
	uint8_t k0[KEY], k2[KEY];
	int s0, s1, s2;

	TAP_ASSERT_TRUE(t != NULL);
	subdir(dir, sizeof(dir), "tio-depth");
	TAP_CHECK(mkdir(dir, 0755) == 0);
	s0 = kvc_tio_write_begin(t, &p0);
	s1 = kvc_tio_write_begin(t, &p1);
	TAP_CHECK(s0 >= 0 && s1 >= 0 && s0 != s1 && p0 != p1);
	TAP_CHECK(kvc_tio_idle_slots(t) == 1);
	TAP_EXPECT_EQ(kvc_tio_write_begin(t, &px), -EBUSY);
	/* The slot writes may not take is a read's; then none is left. */
	fill_key(k0, 0x30);
	TAP_CHECK(kvc_tio_read(t, dir, k0, 9) == 0);
	TAP_EXPECT_EQ(kvc_tio_read(t, dir, k0, 9), -EBUSY);
	seen.n = 0;
	TAP_CHECK(tio_wait(t, 1) == 0);
	TAP_EXPECT_EQ(seen.status, -ENOENT);	/* not written yet */
	TAP_CHECK(kvc_tio_idle_slots(t) == 1);

	/* A cancelled slot is free again; cancelling twice is harmless. */
	kvc_tio_write_cancel(t, s1);
	kvc_tio_write_cancel(t, s1);
	TAP_CHECK(kvc_tio_idle_slots(t) == 2);
	s2 = kvc_tio_write_begin(t, &p2);
	TAP_CHECK(s2 >= 0 && s2 != s0);
	TAP_EXPECT_EQ(kvc_tio_write_begin(t, &px), -EBUSY);
	/* Submitting a slot that was not begun is refused. */
	make_header(&h, k0, NULL, 7, 100);
	TAP_EXPECT_EQ(kvc_tio_write_submit(t, 2, dir, &h, 0), -EINVAL);
	TAP_EXPECT_EQ(kvc_tio_write_submit(t, -1, dir, &h, 0), -EINVAL);

	/* Both in flight at once; the queue stays full until reaped. */
	fill_pattern(p0, 100, 10);
	TAP_CHECK(kvc_tio_write_submit(t, s0, dir, &h, 10) == 0);
	fill_key(k2, 0x32);
	make_header(&h, k2, NULL, 7, 9000);
	fill_pattern(p2, 9000, 12);
	TAP_CHECK(kvc_tio_write_submit(t, s2, dir, &h, 12) == 0);
	TAP_EXPECT_EQ(kvc_tio_write_submit(t, s2, dir, &h, 12), -EINVAL);
	TAP_EXPECT_EQ(kvc_tio_write_begin(t, &px), -EBUSY);
	TAP_CHECK(kvc_tio_in_flight(t) == 2);

	/* The eventfd says when there is something to reap. */
	pfd.fd = kvc_tio_fd(t);
	pfd.events = POLLIN;
	TAP_CHECK(poll(&pfd, 1, 5000) == 1 && (pfd.revents & POLLIN));
	seen.n = 0;
	TAP_CHECK(tio_wait(t, 2) == 0);
	TAP_CHECK(seen.status == 0);
	TAP_CHECK(kvc_tio_idle_slots(t) == 3 && kvc_tio_in_flight(t) == 0);
	TAP_CHECK(kvc_bf_path(dir, k0, path, sizeof(path)) == 0 &&
		  exists(path));
	TAP_CHECK(kvc_bf_path(dir, k2, path, sizeof(path)) == 0 &&
		  exists(path));
	/* Nothing in flight: a waiting reap returns at once. */
	TAP_CHECK(kvc_tio_reap(t, true, tio_cb, &seen) == 0);

	/* A read in flight holds its slot too; reads may take them all. */
	TAP_CHECK(kvc_tio_read(t, dir, k0, 1) == 0);
	TAP_CHECK(kvc_tio_read(t, dir, k2, 2) == 0);
	TAP_CHECK(kvc_tio_read(t, dir, k2, 3) == 0);
	TAP_EXPECT_EQ(kvc_tio_read(t, dir, k2, 4), -EBUSY);
	seen.n = 0;
	TAP_CHECK(tio_wait(t, 3) == 0);
	TAP_CHECK(seen.status == 0 && kvc_tio_idle_slots(t) == 3);

	/* Destroyed with a write in flight: it waits, and cleans up. */
	make_header(&h, k0, NULL, 7, 100);
	h.key[5] ^= 1;
	s0 = kvc_tio_write_begin(t, &p0);
	TAP_CHECK(s0 >= 0);
	if (s0 >= 0) {
		fill_pattern(p0, 100, 1);
		TAP_CHECK(kvc_tio_write_submit(t, s0, dir, &h, 1) == 0);
	}
	kvc_tio_destroy(t);
	TAP_CHECK(count_tmp(dir) == 0);
}

/* Misses, truncation, bit flips: each detected, at once or on read. */
static void tio_read_errors(void)
{
	char dir[PATH_MAX], path[PATH_MAX];
	struct kvc_bf_header h;
	struct kvc_tio *t = tio_new(2, false);
	uint8_t key[KEY];
	const size_t len = 3 * 4096 + 5;	/* a 20 KiB file */
	const off_t size = (off_t)kvc_bf_file_size(len);
	int ret;

	TAP_ASSERT_TRUE(t != NULL);
	subdir(dir, sizeof(dir), tio_dst ? "tio-errors-in-place" :
	       "tio-errors");
	TAP_CHECK(mkdir(dir, 0755) == 0);

	fill_key(key, 0x40);
	TAP_EXPECT_EQ(tio_get(t, dir, key, 1), -ENOENT);
	TAP_CHECK(kvc_tio_idle_slots(t) == 2);

	/* Cut by a byte: no block file has that size. */
	make_header(&h, key, NULL, 7, len);
	TAP_CHECK(tio_put(t, dir, &h, 1) == 0);
	TAP_CHECK(kvc_bf_path(dir, key, path, sizeof(path)) == 0);
	TAP_CHECK(truncate(path, size - 1) == 0);
	TAP_EXPECT_EQ(tio_get(t, dir, key, 2), -EBADMSG);
	/* Shorter than a header. */
	TAP_CHECK(truncate(path, 100) == 0);
	TAP_EXPECT_EQ(tio_get(t, dir, key, 2), -EBADMSG);
	/* A whole page shorter: a plausible size, caught on reading. */
	TAP_CHECK(truncate(path, size - 4096) == 0);
	seen.n = 0;
	ret = tio_start(t, dir, key, 3);
	TAP_CHECK(ret == 0);
	if (!ret) {
		TAP_CHECK(tio_wait(t, 1) == 0);
		TAP_CHECK(seen.status == -EBADMSG);
	}
	/* Longer than its header says. */
	TAP_CHECK(truncate(path, size + 4096) == 0);
	TAP_EXPECT_EQ(tio_get(t, dir, key, 4), -EBADMSG);
	/* Larger than any block this engine was made for. */
	TAP_CHECK(truncate(path, (off_t)kvc_bf_file_size(TIO_MAX) + 4096) ==
		  0);
	TAP_EXPECT_EQ(tio_get(t, dir, key, 4), -EFBIG);
	TAP_CHECK(kvc_tio_idle_slots(t) == 2);

	/* A bit flip in the payload: found by the CRC, in the callback. */
	fill_key(key, 0x41);
	make_header(&h, key, NULL, 7, len);
	TAP_CHECK(tio_put(t, dir, &h, 5) == 0);
	TAP_CHECK(tio_get(t, dir, key, 5) == 0);
	TAP_CHECK(kvc_bf_path(dir, key, path, sizeof(path)) == 0);
	flip(path, KVC_BF_HEADER_SIZE + 1234);
	seen.n = 0;
	ret = tio_start(t, dir, key, 6);
	TAP_CHECK(ret == 0);
	if (!ret) {
		TAP_CHECK(tio_wait(t, 1) == 0);
		TAP_CHECK(seen.status == -EBADMSG);
		TAP_CHECK(seen.file_size == 0 && seen.payload_len == 0);
	}
	/* In the padding, which the CRC does not cover. */
	flip(path, KVC_BF_HEADER_SIZE + 1234);
	TAP_CHECK(tio_get(t, dir, key, 7) == 0);
	flip(path, KVC_BF_HEADER_SIZE + (off_t)len + 3);
	TAP_EXPECT_EQ(tio_get(t, dir, key, 8), -EBADMSG);
	/* In the header. */
	flip(path, KVC_BF_HEADER_SIZE + (off_t)len + 3);
	flip(path, 30);
	TAP_EXPECT_EQ(tio_get(t, dir, key, 9), -EBADMSG);
	/* A valid file under another key's name. */
	flip(path, 30);
	TAP_CHECK(tio_get(t, dir, key, 10) == 0);
	{
		char other[PATH_MAX];
		uint8_t okey[KEY];

		memcpy(okey, key, KEY);
		okey[31] ^= 1;		/* same fan-out directory */
		TAP_CHECK(kvc_bf_path(dir, okey, other, sizeof(other)) == 0);
		TAP_CHECK(link(path, other) == 0);
		TAP_EXPECT_EQ(tio_get(t, dir, okey, 11), -EBADMSG);
	}
	TAP_CHECK(kvc_tio_idle_slots(t) == 2);
	kvc_tio_destroy(t);
	TAP_CHECK(count_tmp(dir) == 0);
}

/* The same errors, read in place: caught the same, in the same order. */
static void tio_read_errors_in_place(void)
{
	tio_dst = mmap(NULL, TIO_DST_LEN, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TAP_ASSERT_TRUE(tio_dst != MAP_FAILED);
	tio_read_errors();
	munmap(tio_dst, TIO_DST_LEN);
	tio_dst = NULL;
}

/*
 * A read in place: the payload lands in the caller's block (and nowhere
 * else need be copied), padding zero, the rest of the block untouched;
 * a block too small for the file is EFBIG, and a destination O_DIRECT
 * could not take is refused before anything starts.
 */
static void tio_read_in_place(void)
{
	static const size_t sizes[] = { 1, 4096, 4097, TIO_MAX };
	const uint64_t dlen = TIO_DST_LEN;
	char dir[PATH_MAX];
	struct kvc_bf_header h;
	struct kvc_tio *t = tio_new(2, false);
	uint8_t key[KEY], *dst;

	TAP_ASSERT_TRUE(t != NULL);
	subdir(dir, sizeof(dir), "tio-in-place");
	TAP_CHECK(mkdir(dir, 0755) == 0);
	dst = mmap(NULL, dlen, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TAP_ASSERT_TRUE(dst != MAP_FAILED);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t len = sizes[i], pad = kvc_bf_file_size(len) -
					     KVC_BF_HEADER_SIZE;

		fill_key(key, (uint8_t)(0x60 + i));
		make_header(&h, key, NULL, 7, len);
		TAP_CHECK(tio_put(t, dir, &h, 200 + (unsigned int)i) == 0);
		memset(dst, 0x5a, dlen);
		seen.n = 0;
		TAP_CHECK(kvc_tio_read_into(t, dir, key, 30 + i, dst, dlen) ==
			  0);
		TAP_CHECK(tio_wait(t, 1) == 0);
		TAP_CHECK(seen.status == 0 && seen.cookie == 30 + i);
		TAP_CHECK(seen.payload_len == len);
		TAP_CHECK(same_pattern(dst, len, 200 + (unsigned int)i));
		/*
		 * The padding came from the file (zero). Past the file's
		 * end, the block's own bytes, or zero: a direct read may
		 * zero what it asked for past the end (ext4 does); never
		 * anything else.
		 */
		for (size_t j = len; j < pad; j++)
			if (dst[j]) {
				TAP_CHECK(!"padding read as zero");
				break;
			}
		for (size_t j = pad; j < dlen; j++)
			if (dst[j] && dst[j] != 0x5a) {
				TAP_CHECK(!"past the end: untouched or zero");
				break;
			}
		TAP_CHECK(kvc_tio_idle_slots(t) == 2);
	}
	/* The last file (TIO_MAX) does not fit a block of two pages. */
	seen.n = 0;
	TAP_CHECK(kvc_tio_read_into(t, dir, key, 40, dst, 2 * 4096) == 0);
	TAP_CHECK(tio_wait(t, 1) == 0);
	TAP_EXPECT_EQ(seen.status, -EFBIG);
	/* Not page-aligned, not whole pages, none, larger than a slot. */
	TAP_EXPECT_EQ(kvc_tio_read_into(t, dir, key, 41, dst + 512, 4096),
		      -EINVAL);
	TAP_EXPECT_EQ(kvc_tio_read_into(t, dir, key, 41, dst, 4095), -EINVAL);
	TAP_EXPECT_EQ(kvc_tio_read_into(t, dir, key, 41, dst, 0), -EINVAL);
	TAP_EXPECT_EQ(kvc_tio_read_into(t, dir, key, 41, dst, dlen + 4096),
		      -EINVAL);
	TAP_CHECK(kvc_tio_idle_slots(t) == 2);
	munmap(dst, dlen);
	kvc_tio_destroy(t);
}

/*
 * A write that fails in the kernel, after its temp file was created: the
 * file size limit cuts it short (the rest is retried and fails with
 * EFBIG). The temp file goes, no block appears, the slot comes back.
 */
static void tio_write_failure(void)
{
	char dir[PATH_MAX], path[PATH_MAX];
	struct kvc_bf_header h;
	struct rlimit old, lim;
	struct kvc_tio *t;
	uint8_t key[KEY];

	subdir(dir, sizeof(dir), "tio-fail");
	TAP_CHECK(mkdir(dir, 0755) == 0);
	for (int with_fsync = 0; with_fsync < 2; with_fsync++) {
		t = tio_new(2, with_fsync);
		TAP_ASSERT_TRUE(t != NULL);
		TAP_CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
		lim = old;
		lim.rlim_cur = 8192;
		signal(SIGXFSZ, SIG_IGN);
		TAP_CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
		fill_key(key, (uint8_t)(0x50 + with_fsync));
		make_header(&h, key, NULL, 7, 3 * 4096);
		TAP_EXPECT_EQ(tio_put(t, dir, &h, 1), -EFBIG);
		TAP_CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
		signal(SIGXFSZ, SIG_DFL);
		TAP_CHECK(kvc_bf_path(dir, key, path, sizeof(path)) == 0);
		TAP_CHECK(!exists(path));
		TAP_CHECK(count_tmp(dir) == 0);
		TAP_CHECK(kvc_tio_idle_slots(t) == 2);
		/* And the same block goes through once it fits. */
		TAP_CHECK(tio_put(t, dir, &h, 2) == 0);
		TAP_CHECK(tio_get(t, dir, key, 3) == 0);
		TAP_CHECK(same_pattern(seen.payload, 3 * 4096, 2));
		kvc_tio_destroy(t);
	}
	TAP_CHECK(count_tmp(dir) == 0);
}

/* ---- tier: helpers ------------------------------------------------------ */

static void tier_cb(void *arg, const struct kvc_tier_done *d)
{
	struct seen *s = arg;

	s->n++;
	s->op = d->op;
	s->status = d->status;
	s->ns = d->ns;
	s->id = d->id;
	s->cookie = d->cookie;
	memcpy(s->key, d->key, KEY);
	s->payload_len = 0;
	if (d->op == KVC_TIO_READ && !d->status) {
		s->payload_len = d->payload_len;
		if (d->payload_len <= sizeof(s->payload))
			memcpy(s->payload, d->payload, d->payload_len);
	}
}

static int tier_wait(struct kvc_tier *t, int want)
{
	for (int i = 0; i < 10000 && seen.n < want; i++) {
		int ret = kvc_tier_reap(t, true, tier_cb, &seen);

		if (ret < 0)
			return ret;
	}
	return seen.n >= want ? 0 : -ETIMEDOUT;
}

/* Spill entry @id and wait: the error at once, or the callback's. */
static int spill(struct kvc_tier *t, uint32_t id, size_t len,
		 unsigned int seed)
{
	uint8_t *p;
	int slot, ret;

	slot = kvc_tier_spill_begin(t, &p);
	if (slot < 0)
		return slot;
	fill_pattern(p, len, seed);
	ret = kvc_tier_spill_submit(t, slot, id, len);
	if (ret)
		return ret;
	TAP_CHECK(kvc_tier_spilling(t, id));
	seen.n = 0;
	ret = tier_wait(t, 1);
	if (ret)
		return ret;
	TAP_CHECK(seen.op == KVC_TIO_WRITE);
	TAP_CHECK(!kvc_tier_spilling(t, id));
	return seen.status;
}

/* Fetch entry @id and wait: the error at once, or the callback's. */
static int fetch(struct kvc_tier *t, uint32_t id, uint64_t cookie)
{
	int ret;

	seen.n = 0;
	ret = kvc_tier_fetch(t, id, cookie);
	if (ret)
		return ret;
	ret = tier_wait(t, 1);
	if (ret)
		return ret;
	TAP_CHECK(seen.op == KVC_TIO_READ && seen.cookie == cookie);
	return seen.status;
}

static bool ns1_only(void *arg, uint32_t ns)
{
	(void)arg;
	return ns == 1;
}

static bool has_tier(const struct kvc_index *idx, uint32_t id,
		     unsigned int bit)
{
	const struct kvc_entry *e = kvc_index_entry(idx, id);

	return e && (e->tiers & bit);
}

/* Present in the tier, by key (the id may have been pruned and reused). */
static bool key_in(const struct kvc_index *idx, const uint8_t *key,
		   unsigned int bit)
{
	uint32_t id;

	return !kvc_index_find(idx, 1, key, &id) && has_tier(idx, id, bit);
}

static struct kvc_tier_config tier_cfg(unsigned int tier, const char *dir,
				       uint64_t capacity, const char *node,
				       uint64_t grace_ms)
{
	struct kvc_tier_config c = {
		.tier = tier, .dir = dir, .capacity = capacity,
		.shared = tier == KVC_TIER_G4, .fsync = true, .depth = 4,
		.max_payload = TIER_MAX, .node = node, .grace_ms = grace_ms,
		.scan_interval_ms = 1000, .trusted_uid = (uid_t)-1,
	};

	return c;
}

static struct kvc_tier *tier_new(const struct kvc_tier_config *c,
				 struct kvc_index *idx)
{
	struct kvc_tier *t = NULL;
	int ret = kvc_tier_open(&t, c, idx);

	if (ret)
		printf("# kvc_tier_open %s: %s\n", c->dir, strerror(-ret));
	return t;
}

static struct kvc_index *index_new(void)
{
	struct kvc_index *idx = NULL;

	TAP_CHECK(kvc_index_create(&idx, 1024, 42) == 0);
	return idx;
}

/* The test chain: three blocks of namespace 1, keys 0x10.., 0x30.., 0x50.. */
#define CHAIN_LEN	3
static const size_t chain_len[CHAIN_LEN] = { 5000, 4096, 1 };

static void chain_key(uint8_t *key, int i)
{
	fill_key(key, (uint8_t)(0x10 + 0x20 * i));
}

static void chain_keys(uint8_t keys[CHAIN_LEN][KEY])
{
	for (int i = 0; i < CHAIN_LEN; i++)
		chain_key(keys[i], i);
}

static uint64_t chain_bytes(void)
{
	uint64_t n = 0;

	for (int i = 0; i < CHAIN_LEN; i++)
		n += kvc_bf_file_size(chain_len[i]);
	return n;
}

static int chain_insert(struct kvc_index *idx, uint32_t *ids)
{
	uint8_t keys[CHAIN_LEN][KEY];
	int ret = 0;

	chain_keys(keys);
	for (int i = 0; i < CHAIN_LEN && !ret; i++)
		ret = kvc_index_insert(idx, 1, keys[i],
				       i ? keys[i - 1] : NULL, &ids[i]);
	return ret;
}

/* The chain's ids after a scan found it. */
static int chain_find(struct kvc_index *idx, uint32_t *ids)
{
	uint8_t keys[CHAIN_LEN][KEY];
	int ret = 0;

	chain_keys(keys);
	for (int i = 0; i < CHAIN_LEN && !ret; i++)
		ret = kvc_index_find(idx, 1, keys[i], &ids[i]);
	return ret;
}

static int chain_present(struct kvc_index *idx, unsigned int bit)
{
	uint8_t keys[CHAIN_LEN][KEY];

	chain_keys(keys);
	return kvc_index_lookup(idx, 1, (const uint8_t (*)[KEY])keys,
				CHAIN_LEN, bit, NULL);
}

/* ---- G3 ------------------------------------------------------------------ */

static char g3dir[PATH_MAX];

static void tier_open_errors(void)
{
	struct kvc_index *idx = index_new();
	struct kvc_tier_config c;
	struct kvc_tier *t;
	char file[PATH_MAX];
	int fd;

	if (!idx)
		return;
	c = tier_cfg(KVC_TIER_G3, tmpdir, 1 << 20, "node-a", 1000);
	c.dir = "/nonexistent-kvc-tier";
	TAP_EXPECT_EQ(kvc_tier_open(&t, &c, idx), -ENOENT);
	subdir(file, sizeof(file), "a-file");
	fd = open(file, O_CREAT | O_WRONLY, 0644);
	TAP_CHECK(fd >= 0);
	close(fd);
	c.dir = file;
	TAP_EXPECT_EQ(kvc_tier_open(&t, &c, idx), -ENOTDIR);
	TAP_CHECK(unlink(file) == 0);
	c.dir = "relative";
	TAP_EXPECT_EQ(kvc_tier_open(&t, &c, idx), -EINVAL);
	c.dir = tmpdir;
	c.tier = KVC_TIER_POOL;
	TAP_EXPECT_EQ(kvc_tier_open(&t, &c, idx), -EINVAL);
	c.tier = KVC_TIER_G3;
	c.node = NULL;
	TAP_EXPECT_EQ(kvc_tier_open(&t, &c, idx), -EINVAL);
	c.node = "a/b";
	TAP_EXPECT_EQ(kvc_tier_open(&t, &c, idx), -EINVAL);
	c.node = "node-a";
	c.depth = 0;
	TAP_EXPECT_EQ(kvc_tier_open(&t, &c, idx), -EINVAL);
	c.depth = 1;
	c.policy = "mru";
	TAP_EXPECT_EQ(kvc_tier_open(&t, &c, idx), -EINVAL);
	kvc_index_destroy(idx);
}

static void g3_spill_and_fetch(void)
{
	uint8_t keys[CHAIN_LEN][KEY];
	char path[PATH_MAX], want[PATH_MAX];
	struct kvc_bf_header h;
	struct kvc_tier_config c;
	struct kvc_index *idx = index_new();
	struct kvc_tier *t;
	struct stat st;
	uint32_t ids[CHAIN_LEN];
	uint8_t *p, *p2;
	int s1, s2;

	subdir(g3dir, sizeof(g3dir), "g3");
	TAP_CHECK(mkdir(g3dir, 0755) == 0);
	if (!idx)
		return;
	TAP_CHECK(chain_insert(idx, ids) == 0);
	chain_keys(keys);
	c = tier_cfg(KVC_TIER_G3, g3dir, 1 << 20, "node-a", 1000);
	t = tier_new(&c, idx);
	TAP_ASSERT_TRUE(t != NULL);
	TAP_CHECK(kvc_tier_writable(t));
	TAP_CHECK(kvc_tier_index(t) == KVC_TIER_G3);
	TAP_CHECK(kvc_tier_capacity(t) == 1 << 20);
	TAP_CHECK(kvc_tier_fd(t) >= 0);

	/* Not present yet: nothing to read. */
	TAP_EXPECT_EQ(kvc_tier_fetch(t, ids[0], 1), -ENOENT);

	for (int i = 0; i < CHAIN_LEN; i++) {
		TAP_CHECK(spill(t, ids[i], chain_len[i], 10 + i) == 0);
		TAP_CHECK(seen.ns == 1 && seen.id == ids[i]);
		TAP_CHECK(memcmp(seen.key, keys[i], KEY) == 0);
		TAP_CHECK(has_tier(idx, ids[i], G3_BIT));
		/* dir/ns1/aa/bb/<hex>.kvb, its header naming its parent. */
		pathf(want, sizeof(want), "%s/ns1/%02x/%02x/", g3dir,
		      keys[i][0], keys[i][1]);
		tier_path(g3dir, 1, keys[i], path, sizeof(path));
		TAP_CHECK(!strncmp(path, want, strlen(want)));
		TAP_CHECK(kvc_bf_read_header(path, &h, &st) == 0);
		TAP_CHECK((uint64_t)st.st_size ==
			  kvc_bf_file_size(chain_len[i]));
		TAP_CHECK(h.ns_id == 1 && h.payload_len == chain_len[i]);
		TAP_CHECK(!strcmp(h.node_id, "node-a"));
		if (i) {
			TAP_CHECK(!(h.flags & KVC_BF_F_FIRST));
			TAP_CHECK(!memcmp(h.parent, keys[i - 1], KEY));
		} else {
			TAP_CHECK(h.flags & KVC_BF_F_FIRST);
		}
	}
	TAP_CHECK(chain_present(idx, G3_BIT) == CHAIN_LEN);
	TAP_CHECK(kvc_tier_stats(t)->spills == CHAIN_LEN);
	TAP_CHECK(kvc_tier_stats(t)->spill_bytes == chain_bytes());
	TAP_CHECK(kvc_tier_stats(t)->usage == chain_bytes());
	TAP_CHECK(kvc_tier_stats(t)->blocks == CHAIN_LEN);

	/* Already there: -EEXIST, counted, nothing written. */
	TAP_EXPECT_EQ(spill(t, ids[1], chain_len[1], 99), -EEXIST);
	TAP_CHECK(kvc_tier_stats(t)->spill_exists == 1);
	TAP_CHECK(kvc_tier_stats(t)->spill_errors == 0);

	for (int i = CHAIN_LEN - 1; i >= 0; i--) {
		memset(seen.payload, 0, sizeof(seen.payload));
		TAP_CHECK(fetch(t, ids[i], 500 + i) == 0);
		TAP_CHECK(seen.id == ids[i] && seen.ns == 1);
		TAP_CHECK(memcmp(seen.key, keys[i], KEY) == 0);
		TAP_CHECK(seen.payload_len == chain_len[i]);
		TAP_CHECK(same_pattern(seen.payload, chain_len[i], 10 + i));
	}
	TAP_CHECK(kvc_tier_stats(t)->reads == CHAIN_LEN);
	TAP_CHECK(kvc_tier_stats(t)->read_bytes == chain_bytes());

	/* Two spills of one entry at once: the second is refused. */
	{
		uint8_t k[KEY];
		uint32_t id;

		fill_key(k, 0x70);
		TAP_CHECK(kvc_index_insert(idx, 1, k, keys[2], &id) == 0);
		s1 = kvc_tier_spill_begin(t, &p);
		s2 = kvc_tier_spill_begin(t, &p2);
		TAP_CHECK(s1 >= 0 && s2 >= 0);
		if (s1 >= 0 && s2 >= 0) {
			fill_pattern(p, 300, 1);
			fill_pattern(p2, 300, 1);
			TAP_CHECK(kvc_tier_spill_submit(t, s1, id, 300) == 0);
			TAP_CHECK(kvc_tier_spill_submit(t, s2, id, 300) ==
				  -EALREADY);
			seen.n = 0;
			TAP_CHECK(tier_wait(t, 1) == 0);
			TAP_CHECK(seen.status == 0 && seen.id == id);
		}
		/*
		 * The refused spill's slot came back: the three of the four
		 * that writes may hold are free (one is kept for reads).
		 */
		{
			int sl[3];

			for (int i = 0; i < 3; i++) {
				sl[i] = kvc_tier_spill_begin(t, &p);
				TAP_CHECK(sl[i] >= 0);
			}
			TAP_EXPECT_EQ(kvc_tier_spill_begin(t, &p), -EBUSY);
			for (int i = 0; i < 3; i++)
				kvc_tier_spill_cancel(t, sl[i]);
		}
		/*
		 * An admin EVICT removes the file (a leaf: it leaves the
		 * index too, as nothing else holds it).
		 */
		TAP_CHECK(kvc_tier_drop(t, id) == 0);
		tier_path(g3dir, 1, k, path, sizeof(path));
		TAP_CHECK(!exists(path));
		TAP_CHECK(!key_in(idx, k, G3_BIT));
		TAP_EXPECT_EQ(kvc_tier_drop(t, id), -ENOENT);
	}
	/* No payload, or more than a slot holds: refused (not filled). */
	{
		uint8_t k[KEY];
		uint32_t id;

		fill_key(k, 0x71);
		TAP_CHECK(kvc_index_insert(idx, 1, k, keys[2], &id) == 0);
		s1 = kvc_tier_spill_begin(t, &p);
		TAP_CHECK(s1 >= 0);
		TAP_CHECK(kvc_tier_spill_submit(t, s1, id, TIER_MAX + 1) ==
			  -EINVAL);
		s1 = kvc_tier_spill_begin(t, &p);
		TAP_CHECK(s1 >= 0);
		TAP_EXPECT_EQ(kvc_tier_spill_submit(t, s1, id, 0), -EINVAL);
		TAP_CHECK(kvc_tier_stats(t)->spill_errors == 2);
		TAP_CHECK(!has_tier(idx, id, G3_BIT));
		tier_path(g3dir, 1, k, path, sizeof(path));
		TAP_CHECK(!exists(path));
	}
	TAP_CHECK(kvc_tier_stats(t)->usage == chain_bytes());
	TAP_CHECK(kvc_tier_stats(t)->blocks == CHAIN_LEN);
	kvc_tier_close(t);
	kvc_index_destroy(idx);
	TAP_CHECK(count_tmp(g3dir) == 0);
}

/* Write a file of @len bytes of junk at @path. */
static void junk_file(const char *path, size_t len)
{
	uint8_t buf[8192];
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);

	TAP_CHECK(fd >= 0 && len <= sizeof(buf));
	if (fd < 0)
		return;
	memset(buf, 0x5a, sizeof(buf));
	TAP_CHECK(write(fd, buf, len) == (ssize_t)len);
	close(fd);
}

/*
 * Restart: a fresh index, the tier reopened, a scan. It rebuilds the
 * chain and cleans what a crash and other writers left.
 */
static void g3_recovery(void)
{
	uint8_t keys[CHAIN_LEN][KEY], k[KEY], kp[KEY], kc[KEY];
	char leaf[PATH_MAX], stale[PATH_MAX], mine[PATH_MAX], other[PATH_MAX];
	char path[PATH_MAX], orphan[PATH_MAX], old_orphan[PATH_MAX];
	char bad[PATH_MAX], d[PATH_MAX], orphan_child[PATH_MAX];
	char old_child[PATH_MAX], foreign[PATH_MAX];
	struct kvc_bf_header h;
	struct kvc_tier_config c;
	struct kvc_index *idx = index_new();
	struct kvc_tier *t;
	uint32_t ids[CHAIN_LEN];
	uint8_t payload[100];

	if (!idx)
		return;
	chain_keys(keys);
	tier_path(g3dir, 1, keys[0], path, sizeof(path));
	pathf(leaf, sizeof(leaf), "%.*s", (int)(strrchr(path, '/') - path),
	      path);

	/* A crashed earlier run of this node: its pid is not ours. */
	pathf(stale, sizeof(stale), "%s/.tmp.node-a.%ld.0.1010", leaf,
	      (long)getpid() + 100000);
	junk_file(stale, 100);
	/* Ours, in flight (another tier of this process): kept. */
	pathf(mine, sizeof(mine), "%s/.tmp.node-a.%ld.7.1010", leaf,
	      (long)getpid());
	junk_file(mine, 100);
	/* Another node's, recent: it may be writing it now. Kept. */
	pathf(other, sizeof(other), "%s/.tmp.node-b.123.0.1010", leaf);
	junk_file(other, 100);

	/*
	 * Blocks whose parent is nowhere: recent, perhaps another writer's
	 * chain in the making (kept, not indexed, counted); old: removed.
	 */
	memset(payload, 7, sizeof(payload));
	pathf(d, sizeof(d), "%s/ns1", g3dir);
	fill_key(k, 0x90);
	fill_key(kp, 0x91);
	make_header(&h, k, kp, 1, sizeof(payload));
	TAP_CHECK(kvc_bf_publish(d, &h, payload, "node-a") == 0);
	tier_path(g3dir, 1, k, orphan, sizeof(orphan));
	/* Its child is unreachable too (and sorts first: seen first). */
	fill_key(kc, 0x88);
	make_header(&h, kc, k, 1, sizeof(payload));
	TAP_CHECK(kvc_bf_publish(d, &h, payload, "node-a") == 0);
	tier_path(g3dir, 1, kc, orphan_child, sizeof(orphan_child));
	fill_key(k, 0xa0);
	make_header(&h, k, kp, 1, sizeof(payload));
	TAP_CHECK(kvc_bf_publish(d, &h, payload, "node-a") == 0);
	tier_path(g3dir, 1, k, old_orphan, sizeof(old_orphan));
	TAP_CHECK(age(old_orphan, 3600) == 0);
	fill_key(kc, 0x98);
	make_header(&h, kc, k, 1, sizeof(payload));
	TAP_CHECK(kvc_bf_publish(d, &h, payload, "node-a") == 0);
	tier_path(g3dir, 1, kc, old_child, sizeof(old_child));
	TAP_CHECK(age(old_child, 3600) == 0);
	/* Not a block file, under a block's name: quarantined. */
	fill_key(k, 0xb0);
	make_header(&h, k, NULL, 1, sizeof(payload));
	TAP_CHECK(kvc_bf_publish(d, &h, payload, "node-a") == 0);
	tier_path(g3dir, 1, k, bad, sizeof(bad));
	junk_file(bad, 8192);
	/* A namespace this node does not have: ignored. */
	pathf(d, sizeof(d), "%s/ns2", g3dir);
	TAP_CHECK(mkdir(d, 0755) == 0);
	fill_key(k, 0xc0);
	make_header(&h, k, NULL, 2, sizeof(payload));
	TAP_CHECK(kvc_bf_publish(d, &h, payload, "node-a") == 0);
	/* A valid block of ns2 under ns1: never another tenant's bytes. */
	fill_key(k, 0xc1);
	make_header(&h, k, NULL, 2, sizeof(payload));
	TAP_CHECK(kvc_bf_publish(d, &h, payload, "node-a") == 0);
	tier_path(g3dir, 2, k, path, sizeof(path));
	tier_path(g3dir, 1, k, foreign, sizeof(foreign));
	pathf(d, sizeof(d), "%s/ns1/c1", g3dir);
	TAP_CHECK(mkdir(d, 0755) == 0);
	pathf(d, sizeof(d), "%s/ns1/c1/c2", g3dir);
	TAP_CHECK(mkdir(d, 0755) == 0);
	TAP_CHECK(rename(path, foreign) == 0);

	/* A minute's grace: "recent" must hold however slow the fsyncs. */
	c = tier_cfg(KVC_TIER_G3, g3dir, 1 << 20, "node-a", 60000);
	t = tier_new(&c, idx);
	TAP_ASSERT_TRUE(t != NULL);
	TAP_CHECK(kvc_tier_scan(t, ns1_only, NULL) == CHAIN_LEN);
	TAP_CHECK(kvc_index_count(idx) == CHAIN_LEN);
	TAP_CHECK(chain_present(idx, G3_BIT) == CHAIN_LEN);
	TAP_CHECK(chain_find(idx, ids) == 0);
	TAP_CHECK(kvc_index_depth(idx, ids[2]) == 2);
	TAP_CHECK(kvc_tier_stats(t)->found == CHAIN_LEN);
	TAP_CHECK(kvc_tier_stats(t)->blocks == CHAIN_LEN);
	TAP_CHECK(kvc_tier_stats(t)->scans == 1);
	TAP_CHECK(kvc_tier_stats(t)->unreachable == 4);
	/* The junk file; ns2's block under ns1 is not corrupt but not
	 * ns1's either: left where it is (reported), not moved. */
	TAP_CHECK(kvc_tier_stats(t)->corrupt == 1);
	/* The recent unreachable files are on disk: they count. */
	TAP_CHECK(kvc_tier_stats(t)->usage ==
		  chain_bytes() + 2 * kvc_bf_file_size(sizeof(payload)));

	kvc_tier_settle(t);	/* the worker removes the old ones */
	TAP_CHECK(!exists(stale));
	TAP_CHECK(exists(mine));
	TAP_CHECK(exists(other));
	TAP_CHECK(exists(orphan) && exists(orphan_child));
	TAP_CHECK(!exists(old_orphan) && !exists(old_child));
	TAP_CHECK(!exists(bad) && exists(foreign));
	/* Quarantine is the tier's own .quarantine/, no tenant's. */
	pathf(d, sizeof(d), "%s/.quarantine", g3dir);
	TAP_CHECK(count_entries(d) == 1);
	pathf(d, sizeof(d), "%s/ns1/quarantine", g3dir);
	TAP_CHECK(!exists(d));

	/* What was found reads back as written. */
	for (int i = 0; i < CHAIN_LEN; i++) {
		TAP_CHECK(fetch(t, ids[i], 9) == 0);
		TAP_CHECK(same_pattern(seen.payload, chain_len[i], 10 + i));
	}

	/* A second scan finds nothing new and loses nothing. */
	TAP_CHECK(kvc_tier_scan(t, ns1_only, NULL) == 0);
	TAP_CHECK(kvc_tier_stats(t)->lost == 0);
	TAP_CHECK(chain_present(idx, G3_BIT) == CHAIN_LEN);

	kvc_tier_close(t);
	kvc_index_destroy(idx);
	unlink(mine);
	unlink(other);
	unlink(orphan);
	unlink(orphan_child);
	TAP_CHECK(count_tmp(g3dir) == 0);
}

/* Corrupt files found by reads are quarantined and leave the tier. */
static void g3_corrupt_quarantine(void)
{
	uint8_t keys[CHAIN_LEN][KEY];
	char path[PATH_MAX], qdir[PATH_MAX];
	struct kvc_tier_config c;
	struct kvc_index *idx = index_new();
	struct kvc_tier *t;
	uint32_t ids[CHAIN_LEN];
	int q0, ret;

	if (!idx)
		return;
	chain_keys(keys);
	pathf(qdir, sizeof(qdir), "%s/.quarantine", g3dir);
	q0 = count_entries(qdir);
	c = tier_cfg(KVC_TIER_G3, g3dir, 1 << 20, "node-a", 1000);
	t = tier_new(&c, idx);
	TAP_ASSERT_TRUE(t != NULL);
	TAP_CHECK(kvc_tier_scan(t, ns1_only, NULL) == CHAIN_LEN);
	TAP_CHECK(chain_find(idx, ids) == 0);

	/* A bit flip in the leaf's payload: the read finds it. */
	tier_path(g3dir, 1, keys[2], path, sizeof(path));
	flip(path, KVC_BF_HEADER_SIZE);
	seen.n = 0;
	ret = kvc_tier_fetch(t, ids[2], 1);
	TAP_CHECK(ret == 0);
	if (!ret) {
		TAP_CHECK(tier_wait(t, 1) == 0);
		TAP_CHECK(seen.status == -EBADMSG);
		TAP_CHECK(seen.payload_len == 0);
	}
	TAP_CHECK(!exists(path));
	TAP_CHECK(count_entries(qdir) == q0 + 1);
	TAP_CHECK(kvc_tier_stats(t)->corrupt == 1);
	TAP_CHECK(!key_in(idx, keys[2], G3_BIT));
	TAP_CHECK(chain_present(idx, G3_BIT) == 2);

	/* Cut short: refused, quarantined the same way. */
	tier_path(g3dir, 1, keys[1], path, sizeof(path));
	TAP_CHECK(truncate(path, file_size(path) - 1) == 0);
	TAP_EXPECT_EQ(fetch(t, ids[1], 2), -EBADMSG);
	TAP_CHECK(!exists(path));
	TAP_CHECK(count_entries(qdir) == q0 + 2);
	TAP_CHECK(kvc_tier_stats(t)->corrupt == 2);
	TAP_CHECK(!key_in(idx, keys[1], G3_BIT));
	TAP_CHECK(chain_present(idx, G3_BIT) == 1);
	TAP_CHECK(kvc_tier_stats(t)->usage ==
		  kvc_bf_file_size(chain_len[0]));
	TAP_CHECK(kvc_tier_stats(t)->blocks == 1);

	/* Gone behind the tier's back: a miss, and the bit goes. */
	tier_path(g3dir, 1, keys[0], path, sizeof(path));
	TAP_CHECK(unlink(path) == 0);
	TAP_EXPECT_EQ(fetch(t, ids[0], 3), -ENOENT);
	TAP_CHECK(kvc_tier_stats(t)->misses == 1);
	TAP_CHECK(!key_in(idx, keys[0], G3_BIT));
	TAP_CHECK(kvc_tier_stats(t)->usage == 0);
	TAP_CHECK(kvc_tier_stats(t)->blocks == 0);
	kvc_tier_close(t);
	kvc_index_destroy(idx);
}

/*
 * Capacity for three and a half files: spilling five evicts two, least
 * recently used first (a touch counts as a use) under lru and s3fifo
 * (the touched block moved to main), any two under density (a model
 * with no data samples). A block larger than the whole tier fails
 * without evicting anything.
 */
static void g3_capacity(const char *policy)
{
	bool exact = strcmp(policy, "density");
	const size_t len = 10000;
	const uint64_t fs = kvc_bf_file_size(len);
	char dir[PATH_MAX], path[PATH_MAX];
	struct kvc_tier_config c;
	struct kvc_index *idx = index_new();
	struct kvc_tier *t;
	uint8_t keys[5][KEY];
	uint32_t ids[5];
	static const bool kept[5] = { true, false, false, true, true };

	if (!idx)
		return;
	snprintf(path, sizeof(path), "g3-cap-%s", policy);
	subdir(dir, sizeof(dir), path);
	TAP_CHECK(mkdir(dir, 0755) == 0);
	c = tier_cfg(KVC_TIER_G3, dir, 3 * fs + fs / 2, "node-a", 1000);
	c.policy = policy;
	t = tier_new(&c, idx);
	TAP_ASSERT_TRUE(t != NULL);
	for (int i = 0; i < 5; i++) {
		fill_key(keys[i], (uint8_t)(0x60 + 0x10 * i));
		TAP_CHECK(kvc_index_insert(idx, 1, keys[i], NULL, &ids[i]) ==
			  0);
	}
	for (int i = 0; i < 5; i++) {
		TAP_CHECK(spill(t, ids[i], len, (unsigned int)i) == 0);
		TAP_CHECK(kvc_tier_stats(t)->usage <= c.capacity);
		/* Block 0 is used again: block 1 is now the oldest. */
		if (i == 2)
			kvc_tier_touch(t, ids[0]);
	}
	TAP_CHECK(kvc_tier_stats(t)->evictions == 2);
	TAP_CHECK(kvc_tier_stats(t)->usage == 3 * fs);
	TAP_CHECK(kvc_tier_stats(t)->blocks == 3);
	for (int i = 0; i < 5; i++) {
		tier_path(dir, 1, keys[i], path, sizeof(path));
		TAP_CHECK(exists(path) == key_in(idx, keys[i], G3_BIT));
		TAP_CHECK(!exact || exists(path) == kept[i]);
	}

	/* Never fits: refused, and the tier keeps what it has. */
	{
		uint8_t k[KEY];
		uint32_t id;

		fill_key(k, 0xe0);
		TAP_CHECK(kvc_index_insert(idx, 1, k, NULL, &id) == 0);
		TAP_EXPECT_EQ(spill(t, id, TIER_MAX, 1), -ENOSPC);
		TAP_CHECK(kvc_tier_stats(t)->spill_errors == 1);
		TAP_CHECK(kvc_tier_stats(t)->last_error == -ENOSPC);
		TAP_CHECK(kvc_tier_stats(t)->evictions == 2);
		TAP_CHECK(kvc_tier_stats(t)->blocks == 3);
		TAP_CHECK(kvc_tier_stats(t)->usage == 3 * fs);
	}
	kvc_tier_close(t);
	kvc_index_destroy(idx);
	TAP_CHECK(count_tmp(dir) == 0);
}

static void g3_capacity_lru(void)
{
	g3_capacity("lru");
}

/* [eviction] g3_policy reaches the tier. */
static void g3_capacity_s3fifo(void)
{
	g3_capacity("s3fifo");
}

static void g3_capacity_density(void)
{
	g3_capacity("density");
}

/*
 * Recovery of a long chain (a long prompt: hundreds of blocks) whose
 * files sort leaf first, so the scan climbs the whole chain from its
 * first record: every block is found, none is taken for unreachable.
 */
#define LONG_CHAIN	100

static void long_key(uint8_t *key, int i)
{
	fill_key(key, 0x42);
	key[0] = (uint8_t)(0xf0 - i);	/* descending: the leaf first */
}

static void g3_long_chain(void)
{
	static uint8_t keys[LONG_CHAIN][KEY];
	char dir[PATH_MAX], path[PATH_MAX];
	struct kvc_tier_config c;
	struct kvc_index *idx = index_new();
	struct kvc_tier *t;
	uint32_t id;
	int ret = 0;

	if (!idx)
		return;
	subdir(dir, sizeof(dir), "g3-long");
	TAP_CHECK(mkdir(dir, 0755) == 0);
	c = tier_cfg(KVC_TIER_G3, dir, 1 << 20, "node-a", 1000);
	c.fsync = false;	/* 100 files: keep it quick */
	t = tier_new(&c, idx);
	TAP_CHECK(t != NULL);
	for (int i = 0; t && i < LONG_CHAIN && !ret; i++) {
		long_key(keys[i], i);
		ret = kvc_index_insert(idx, 1, keys[i],
				       i ? keys[i - 1] : NULL, &id);
		if (!ret)
			ret = spill(t, id, 1, (unsigned int)i);
	}
	TAP_CHECK(ret == 0);
	kvc_tier_close(t);
	kvc_index_destroy(idx);
	/* Restarted after a while: older than any grace period. */
	for (int i = 0; i < LONG_CHAIN; i++) {
		tier_path(dir, 1, keys[i], path, sizeof(path));
		TAP_CHECK(age(path, 3600) == 0);
	}

	idx = index_new();
	if (!idx)
		return;
	t = tier_new(&c, idx);
	TAP_CHECK(t != NULL);
	if (t) {
		TAP_CHECK(kvc_tier_scan(t, ns1_only, NULL) == LONG_CHAIN);
		TAP_CHECK(kvc_tier_stats(t)->unreachable == 0);
		TAP_CHECK(kvc_tier_stats(t)->usage ==
			  LONG_CHAIN * kvc_bf_file_size(1));
	}
	TAP_CHECK(kvc_index_lookup(idx, 1, (const uint8_t (*)[KEY])keys,
				   LONG_CHAIN, G3_BIT, NULL) == LONG_CHAIN);
	for (int i = 0; i < LONG_CHAIN; i++) {
		tier_path(dir, 1, keys[i], path, sizeof(path));
		if (!exists(path)) {
			TAP_CHECK(!"block file of the chain removed");
			printf("# block %d\n", i);
			break;
		}
	}

	/*
	 * Forged parents that make a cycle (two blocks naming each other,
	 * one naming itself): the scan ends, and they are unreachable.
	 */
	if (t) {
		struct kvc_bf_header h;
		uint8_t a[KEY], b[KEY], payload[10] = { 0 };

		pathf(path, sizeof(path), "%s/ns1", dir);
		fill_key(a, 0x01);
		fill_key(b, 0x02);
		make_header(&h, a, b, 1, sizeof(payload));
		TAP_CHECK(kvc_bf_publish(path, &h, payload, "node-x") == 0);
		make_header(&h, b, a, 1, sizeof(payload));
		TAP_CHECK(kvc_bf_publish(path, &h, payload, "node-x") == 0);
		fill_key(a, 0x03);
		make_header(&h, a, a, 1, sizeof(payload));
		TAP_CHECK(kvc_bf_publish(path, &h, payload, "node-x") == 0);
		TAP_CHECK(kvc_tier_scan(t, ns1_only, NULL) == 0);
		TAP_CHECK(kvc_tier_stats(t)->unreachable == 3);
		TAP_CHECK(kvc_index_count(idx) == LONG_CHAIN);
	}
	kvc_tier_close(t);
	kvc_index_destroy(idx);
}

/* ---- G4: a directory two nodes share ------------------------------------- */

static char g4dir[PATH_MAX];

/*
 * A node of a g4 in dir (a 60 s grace). With ids: the chain inserted in
 * idx, and spilled by this node (its ids in ids). NULL when it failed.
 */
static struct kvc_tier *g4_node(const char *dir, const char *node,
				uint64_t capacity, struct kvc_index *idx,
				uint32_t *ids)
{
	struct kvc_tier_config c = tier_cfg(KVC_TIER_G4, dir, capacity, node,
					    60000);
	struct kvc_tier *t;

	if (ids && chain_insert(idx, ids)) {
		TAP_CHECK(!"chain_insert");
		return NULL;
	}
	t = tier_new(&c, idx);
	TAP_CHECK(t != NULL);
	for (int i = 0; t && ids && i < CHAIN_LEN; i++)
		TAP_CHECK(spill(t, ids[i], chain_len[i], 20 + i) == 0);
	return t;
}

/*
 * Node A spills a chain; node B, with its own index, finds it by a scan
 * and reads it; B's reads renew the lease; B's GC over capacity skips
 * leased files; B's rescans follow A's publications and removals.
 */
static void g4_two_nodes(void)
{
	uint8_t keys[CHAIN_LEN][KEY], k3[KEY];
	char path[PATH_MAX], leaf[PATH_MAX], tmp_a[PATH_MAX], tmp_c[PATH_MAX];
	struct kvc_tier_config cb;
	struct kvc_index *ia = index_new(), *ib = index_new();
	struct kvc_tier *a = NULL, *b = NULL;
	uint32_t ids[CHAIN_LEN], bids[CHAIN_LEN], id3;
	struct stat st;
	uint8_t *p;
	int slot;

	subdir(g4dir, sizeof(g4dir), "g4");
	TAP_CHECK(mkdir(g4dir, 0755) == 0);
	if (!ia || !ib)
		goto out;
	chain_keys(keys);
	a = g4_node(g4dir, "node-a", 1 << 20, ia, ids);
	/* B holds less than the chain: its GC will want to evict. */
	cb = tier_cfg(KVC_TIER_G4, g4dir, chain_bytes() - 1, "node-b", 60000);
	b = g4_node(g4dir, "node-b", cb.capacity, ib, NULL);
	if (!a || !b)
		goto out;
	TAP_CHECK(chain_present(ia, G4_BIT) == CHAIN_LEN);

	/*
	 * A's temp file in flight is not B's to remove; an hour-old one of
	 * a crashed node is.
	 */
	tier_path(g4dir, 1, keys[1], path, sizeof(path));
	pathf(leaf, sizeof(leaf), "%.*s", (int)(strrchr(path, '/') - path),
	      path);
	pathf(tmp_a, sizeof(tmp_a), "%s/.tmp.node-a.1.0.3030", leaf);
	pathf(tmp_c, sizeof(tmp_c), "%s/.tmp.node-c.1.0.3030", leaf);
	junk_file(tmp_a, 10);
	junk_file(tmp_c, 10);
	TAP_CHECK(age(tmp_c, 7200) == 0);

	TAP_CHECK(kvc_tier_scan(b, ns1_only, NULL) == CHAIN_LEN);
	TAP_CHECK(chain_present(ib, G4_BIT) == CHAIN_LEN);
	TAP_CHECK(chain_find(ib, bids) == 0);
	TAP_CHECK(kvc_tier_stats(b)->usage == chain_bytes());
	TAP_CHECK(exists(tmp_a) && !exists(tmp_c));
	unlink(tmp_a);

	/* B's reads renew the files' leases: their mtime moves to now. */
	tier_path(g4dir, 1, keys[2], path, sizeof(path));
	TAP_CHECK(age(path, 3600) == 0);
	for (int i = 0; i < CHAIN_LEN; i++) {
		TAP_CHECK(fetch(b, bids[i], 40 + i) == 0);
		TAP_CHECK(same_pattern(seen.payload, chain_len[i], 20 + i));
	}
	kvc_tier_settle(b);	/* the worker renews them */
	TAP_CHECK(stat(path, &st) == 0 && time(NULL) - st.st_mtime < 60);
	/* Not at every read: a read is not a metadata write each time. */
	TAP_CHECK(age(path, 3600) == 0);
	TAP_CHECK(fetch(b, bids[2], 50) == 0);
	kvc_tier_settle(b);
	TAP_CHECK(stat(path, &st) == 0 && time(NULL) - st.st_mtime > 3000);
	TAP_CHECK(age(path, 0) == 0);	/* leased, for the GC below */

	/* Over capacity, but every file is leased: nothing goes. */
	kvc_tier_tick(b, ns1_only, NULL);
	kvc_tier_settle(b);
	TAP_CHECK(kvc_tier_stats(b)->lease_skips > 0);
	TAP_CHECK(kvc_tier_stats(b)->evictions == 0);
	TAP_CHECK(exists(path));
	TAP_CHECK(chain_present(ib, G4_BIT) == CHAIN_LEN);

	/* A publishes more: B's next scan finds it. */
	fill_key(k3, 0x80);
	TAP_CHECK(kvc_index_insert(ia, 1, k3, NULL, &id3) == 0);
	TAP_CHECK(spill(a, id3, 700, 3) == 0);
	TAP_CHECK(kvc_tier_scan(b, ns1_only, NULL) == 1);
	TAP_CHECK(key_in(ib, k3, G4_BIT));
	/* A removes it: B's next scan forgets it. */
	TAP_CHECK(kvc_tier_drop(a, id3) == 0);
	TAP_CHECK(kvc_tier_scan(b, ns1_only, NULL) == 0);
	TAP_CHECK(kvc_tier_stats(b)->lost == 1);
	TAP_CHECK(!key_in(ib, k3, G4_BIT));
	TAP_CHECK(kvc_tier_stats(b)->usage == chain_bytes());

	/*
	 * A pass that ends while a spill is in flight (a tick's rescan can
	 * end at any time on a shared tier) keeps the spill's reservation.
	 */
	fill_key(k3, 0x84);
	TAP_CHECK(kvc_index_insert(ia, 1, k3, NULL, &id3) == 0);
	TAP_CHECK(kvc_tier_stats(a)->usage == chain_bytes());
	slot = kvc_tier_spill_begin(a, &p);
	TAP_CHECK(slot >= 0);
	if (slot >= 0) {
		fill_pattern(p, 700, 5);
		TAP_CHECK(kvc_tier_spill_submit(a, slot, id3, 700) == 0);
		TAP_CHECK(kvc_tier_stats(a)->usage ==
			  chain_bytes() + kvc_bf_file_size(700));
		TAP_CHECK(kvc_tier_scan(a, ns1_only, NULL) == 0);
		TAP_CHECK(kvc_tier_stats(a)->usage ==
			  chain_bytes() + kvc_bf_file_size(700));
		seen.n = 0;
		TAP_CHECK(tier_wait(a, 1) == 0 && seen.status == 0);
		TAP_CHECK(kvc_tier_stats(a)->usage ==
			  chain_bytes() + kvc_bf_file_size(700));
		TAP_CHECK(kvc_tier_drop(a, id3) == 0);
	}
	TAP_CHECK(kvc_tier_stats(a)->usage == chain_bytes());
out:
	kvc_tier_close(a);
	kvc_tier_close(b);
	kvc_index_destroy(ia);
	kvc_index_destroy(ib);
	TAP_CHECK(count_tmp(g4dir) == 0);
}

static double now_mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * GC on a shared tier: a victim whose lease ran out moves to .gc/ (a
 * node that opened it can still read it) and is deleted by a later tick
 * once the grace period is over.
 */
static void g4_gc(void)
{
	uint8_t keys[CHAIN_LEN][KEY];
	char path[PATH_MAX], gcdir[PATH_MAX];
	struct kvc_tier_config ca, cb;
	struct kvc_index *ia = index_new(), *ib = index_new();
	struct kvc_tier *a = NULL, *b = NULL;
	uint32_t aids[CHAIN_LEN];
	double start;

	if (!ia || !ib)
		goto out;
	chain_keys(keys);
	pathf(gcdir, sizeof(gcdir), "%s/.gc", g4dir);
	ca = tier_cfg(KVC_TIER_G4, g4dir, 1 << 20, "node-a", 60000);
	/* Room for all but the leaf; a one-second grace. */
	cb = tier_cfg(KVC_TIER_G4, g4dir,
		      chain_bytes() - kvc_bf_file_size(chain_len[2]),
		      "node-b", 1000);
	a = tier_new(&ca, ia);
	b = tier_new(&cb, ib);
	TAP_CHECK(a && b);
	if (!a || !b)
		goto out;
	TAP_CHECK(kvc_tier_scan(a, ns1_only, NULL) == CHAIN_LEN);
	TAP_CHECK(chain_find(ia, aids) == 0);
	TAP_CHECK(kvc_tier_scan(b, ns1_only, NULL) == CHAIN_LEN);

	/* Nobody read the leaf for an hour. */
	tier_path(g4dir, 1, keys[2], path, sizeof(path));
	TAP_CHECK(age(path, 3600) == 0);
	kvc_tier_tick(b, ns1_only, NULL);
	/* The worker collects it; the loop learns of it after. */
	kvc_tier_settle(b);
	TAP_CHECK(kvc_tier_stats(b)->evictions == 1);
	TAP_CHECK(kvc_tier_stats(b)->usage <= cb.capacity);
	TAP_CHECK(!exists(path));
	TAP_CHECK(count_entries(gcdir) == 1);
	TAP_CHECK(chain_present(ib, G4_BIT) == 2);
	/* Collected, not deleted: still there right after. */
	kvc_tier_tick(b, ns1_only, NULL);
	TAP_CHECK(count_entries(gcdir) == 1);

	/* Node A finds it gone: a miss, and A forgets it. */
	TAP_EXPECT_EQ(fetch(a, aids[2], 1), -ENOENT);
	TAP_CHECK(chain_present(ia, G4_BIT) == 2);

	/* Deleted by a tick once the grace is over (a second, to the ns). */
	start = now_mono();
	while (count_entries(gcdir) > 0 && now_mono() - start < 5) {
		struct timespec ts = { 0, 100 * 1000 * 1000 };

		nanosleep(&ts, NULL);
		kvc_tier_tick(b, ns1_only, NULL);
	}
	TAP_CHECK(count_entries(gcdir) == 0);
	TAP_CHECK(now_mono() - start >= 0.9);	/* not at once */
	/* The rest stayed, and B's rescans (a pass per second) agree. */
	while (kvc_tier_stats(b)->scans < 2 && now_mono() - start < 5) {
		struct timespec ts = { 0, 100 * 1000 * 1000 };

		nanosleep(&ts, NULL);
		kvc_tier_tick(b, ns1_only, NULL);
	}
	kvc_tier_settle(b);
	TAP_CHECK(chain_present(ib, G4_BIT) == 2);
	TAP_CHECK(kvc_tier_stats(b)->scans >= 2);
	TAP_CHECK(kvc_tier_stats(b)->lost == 0);
	TAP_CHECK(kvc_tier_stats(b)->usage ==
		  chain_bytes() - kvc_bf_file_size(chain_len[2]));
out:
	kvc_tier_close(a);
	kvc_tier_close(b);
	kvc_index_destroy(ia);
	kvc_index_destroy(ib);
	TAP_CHECK(count_tmp(g4dir) == 0);
}

/*
 * A lease lasts its whole grace, to the nanosecond: with a one-second
 * grace, files read 0.3 s ago stay, wherever in the second the read
 * fell. (Counted in whole seconds, as it once was, they were a
 * second old as soon as the second turned: here, at once.) Once the
 * grace is over, GC takes the leaf.
 */
static void g4_lease_not_rounded(void)
{
	uint8_t keys[CHAIN_LEN][KEY];
	char dir[PATH_MAX], path[PATH_MAX];
	struct kvc_index *ia = index_new(), *ib = index_new();
	struct kvc_tier *a = NULL, *b = NULL;
	struct kvc_tier_config cb;
	uint32_t ids[CHAIN_LEN];
	struct timespec ts;

	subdir(dir, sizeof(dir), "g4-frac");
	TAP_CHECK(mkdir(dir, 0755) == 0);
	if (!ia || !ib)
		goto out;
	chain_keys(keys);
	a = g4_node(dir, "node-a", 1 << 20, ia, ids);
	/* Room for all but the leaf; a one-second grace. */
	cb = tier_cfg(KVC_TIER_G4, dir,
		      chain_bytes() - kvc_bf_file_size(chain_len[2]),
		      "node-b", 1000);
	b = tier_new(&cb, ib);
	TAP_CHECK(a && b);
	if (!a || !b)
		goto out;
	kvc_tier_settle(a);
	TAP_CHECK(kvc_tier_scan(b, ns1_only, NULL) == CHAIN_LEN);

	/* Early in a second, so that half a second ago was the last one. */
	for (;;) {
		clock_gettime(CLOCK_REALTIME, &ts);
		if (ts.tv_nsec < 200000000)
			break;
		ts = (struct timespec){ 0, 1000000000 - ts.tv_nsec };
		nanosleep(&ts, NULL);
	}
	for (int i = 0; i < CHAIN_LEN; i++) {
		tier_path(dir, 1, keys[i], path, sizeof(path));
		TAP_CHECK(age_ms(path, 300) == 0);
	}
	kvc_tier_tick(b, ns1_only, NULL);
	kvc_tier_settle(b);
	TAP_EXPECT_EQ(kvc_tier_stats(b)->evictions, 0);
	TAP_CHECK(kvc_tier_stats(b)->lease_skips > 0);
	TAP_CHECK(chain_present(ib, G4_BIT) == CHAIN_LEN);

	/* The grace over: the leaf goes, and only it. */
	ts = (struct timespec){ 1, 0 };
	nanosleep(&ts, NULL);
	kvc_tier_tick(b, ns1_only, NULL);
	kvc_tier_settle(b);
	TAP_EXPECT_EQ(kvc_tier_stats(b)->evictions, 1);
	TAP_CHECK(!exists(path));
	TAP_CHECK(chain_present(ib, G4_BIT) == CHAIN_LEN - 1);
out:
	kvc_tier_close(a);
	kvc_tier_close(b);
	kvc_index_destroy(ia);
	kvc_index_destroy(ib);
}

/* A job that holds the worker until a byte comes down the pipe. */
static void gate_run(void *arg)
{
	char c;

	while (read(*(int *)arg, &c, 1) < 0 && errno == EINTR)
		;
}

static void gate_done(void *arg)
{
	(void)arg;
}

/*
 * A victim's GC job waits in the worker's queue (here: behind a job that
 * holds the worker) while the node reads the victim: the read cancels
 * the job, and the block stays, though its mtime says nobody read it for
 * an hour (the read's own renewal was not due yet).
 */
static void g4_gc_read_cancels(void)
{
	uint8_t keys[CHAIN_LEN][KEY];
	char dir[PATH_MAX], path[PATH_MAX];
	struct kvc_index *ia = index_new(), *ib = index_new();
	struct kvc_tier *a = NULL, *b = NULL;
	uint32_t ids[CHAIN_LEN], bids[CHAIN_LEN];
	int gate[2] = { -1, -1 };

	subdir(dir, sizeof(dir), "g4-cancel");
	TAP_CHECK(mkdir(dir, 0755) == 0);
	if (!ia || !ib || pipe(gate))
		goto out;
	chain_keys(keys);
	a = g4_node(dir, "node-a", 1 << 20, ia, ids);
	b = g4_node(dir, "node-b",
		    chain_bytes() - kvc_bf_file_size(chain_len[2]), ib, NULL);
	if (!a || !b)
		goto out;
	TAP_CHECK(kvc_tier_scan(b, ns1_only, NULL) == CHAIN_LEN);
	TAP_CHECK(chain_find(ib, bids) == 0);
	/* Read once (the lease renewed), then made to look an hour old. */
	TAP_CHECK(fetch(b, bids[2], 1) == 0);
	kvc_tier_settle(b);
	tier_path(dir, 1, keys[2], path, sizeof(path));
	TAP_CHECK(age(path, 3600) == 0);

	TAP_CHECK(kvc_tier_call(b, gate_run, gate_done, &gate[0]) == 0);
	kvc_tier_tick(b, ns1_only, NULL);	/* over capacity: GC posted */
	TAP_CHECK(fetch(b, bids[2], 2) == 0);	/* read meanwhile */
	TAP_CHECK(same_pattern(seen.payload, chain_len[2], 22));
	TAP_CHECK(write(gate[1], "x", 1) == 1);
	kvc_tier_settle(b);
	TAP_EXPECT_EQ(kvc_tier_stats(b)->evictions, 0);
	TAP_CHECK(kvc_tier_stats(b)->lease_skips > 0);
	TAP_CHECK(exists(path));
	TAP_CHECK(chain_present(ib, G4_BIT) == CHAIN_LEN);
out:
	kvc_tier_close(a);
	kvc_tier_close(b);
	kvc_index_destroy(ia);
	kvc_index_destroy(ib);
	if (gate[0] >= 0) {
		close(gate[0]);
		close(gate[1]);
	}
}

/*
 * A directory full of files within their grace (here: just written). A
 * spill over capacity is admitted on the credit of the GC job it posts;
 * once that victim comes back leased, spills take only room that is
 * there: the directory stays within one block of its capacity, rather
 * than growing by a block per spill, each on the credit of a victim
 * that stays.
 */
static void g4_leased_full_refuses(void)
{
	const size_t len = 4096;
	char dir[PATH_MAX];
	struct kvc_tier_config c;
	struct kvc_index *ix = index_new();
	struct kvc_tier *t = NULL;
	uint32_t ids[12];
	int admitted = 0;

	subdir(dir, sizeof(dir), "g4-leased");
	TAP_CHECK(mkdir(dir, 0755) == 0);
	if (!ix)
		goto out;
	c = tier_cfg(KVC_TIER_G4, dir, 4 * kvc_bf_file_size(len), "node-a",
		     60000);
	t = tier_new(&c, ix);
	TAP_CHECK(t != NULL);
	if (!t)
		goto out;
	for (int i = 0; i < 12; i++) {
		uint8_t key[KEY];

		fill_key(key, (uint8_t)(0x80 + 7 * i));
		TAP_CHECK(kvc_index_insert(ix, 1, key, NULL, &ids[i]) == 0);
	}
	for (int i = 0; i < 12; i++) {
		admitted += spill(t, ids[i], len, 40 + i) == 0;
		kvc_tier_settle(t);	/* its GC job is back */
	}
	TAP_EXPECT_EQ(admitted, 5);
	TAP_CHECK(kvc_tier_stats(t)->lease_skips > 0);
	TAP_CHECK(kvc_tier_stats(t)->usage == 5 * kvc_bf_file_size(len));
out:
	kvc_tier_close(t);
	kvc_index_destroy(ix);
}

/*
 * Unreachable files (their parent taken by another node's GC, or by an
 * admin) hold room that GC cannot free: no chain of the index leads to
 * them. While the directory has room they wait TIER_ORPHAN_AGE (ten
 * minutes); once it has none, spills are refused and the next pass takes
 * those past the grace and 30 s, so that spills are admitted again. A
 * recent one stays either way: its parent's write may be in flight.
 */
static void g4_full_collects_orphans(void)
{
	const size_t len = 4096;
	const uint64_t fsz = kvc_bf_file_size(len);
	uint8_t k[KEY], parent[KEY], payload[4096];
	char dir[PATH_MAX], d[PATH_MAX], old[4][PATH_MAX], young[PATH_MAX];
	struct kvc_bf_header h;
	struct kvc_tier_config c;
	struct kvc_index *ix = index_new();
	struct kvc_tier *t = NULL;
	uint32_t id;

	subdir(dir, sizeof(dir), "g4-orphans");
	TAP_CHECK(mkdir(dir, 0755) == 0);
	pathf(d, sizeof(d), "%s/ns1", dir);
	TAP_CHECK(mkdir(d, 0755) == 0);
	if (!ix)
		goto out;
	memset(payload, 3, sizeof(payload));
	fill_key(parent, 0x70);		/* never published */
	for (int i = 0; i < 5; i++) {
		char *path = i < 4 ? old[i] : young;

		fill_key(k, (uint8_t)(0x71 + 9 * i));
		make_header(&h, k, parent, 1, len);
		TAP_CHECK(kvc_bf_publish(d, &h, payload, "node-b") == 0);
		tier_path(dir, 1, k, path, PATH_MAX);
		if (i < 4)	/* last read two minutes ago */
			TAP_CHECK(age(path, 120) == 0);
	}
	/* Room for the five: full. */
	c = tier_cfg(KVC_TIER_G4, dir, 5 * fsz, "node-a", 1000);
	c.max_payload = len;
	t = tier_new(&c, ix);
	TAP_CHECK(t != NULL);
	if (!t)
		goto out;

	/* The first pass measures the directory: room until then, so the
	 * ten minutes hold; the files stay, counted. */
	TAP_CHECK(kvc_tier_scan(t, ns1_only, NULL) == 0);
	kvc_tier_settle(t);
	TAP_CHECK(kvc_tier_stats(t)->unreachable == 5);
	TAP_CHECK(kvc_tier_stats(t)->usage == 5 * fsz);
	for (int i = 0; i < 4; i++)
		TAP_CHECK(exists(old[i]));

	/* A spill is refused: nothing indexed to collect. */
	fill_key(k, 0xe0);
	TAP_CHECK(kvc_index_insert(ix, 1, k, NULL, &id) == 0);
	TAP_EXPECT_EQ(spill(t, id, len, 50), -ENOSPC);
	TAP_CHECK(kvc_tier_stats(t)->evictions == 0);

	/* The next pass finds the directory full: the old ones go. */
	TAP_CHECK(kvc_tier_scan(t, ns1_only, NULL) == 0);
	kvc_tier_settle(t);
	for (int i = 0; i < 4; i++)
		TAP_CHECK(!exists(old[i]));
	TAP_CHECK(exists(young));
	TAP_CHECK(kvc_tier_stats(t)->usage == fsz);
	TAP_CHECK(spill(t, id, len, 50) == 0);
	TAP_CHECK(kvc_tier_stats(t)->usage == 2 * fsz);
out:
	kvc_tier_close(t);
	kvc_index_destroy(ix);
}

/* A job that holds the worker until its gate opens, then does what a
 * walk does between two directories, and looks at the file's mtime. */
struct renew_probe {
	int gate, started;
	struct kvc_tier *t;
	const char *path;
	time_t mtime;
};

static void renew_run(void *arg)
{
	struct renew_probe *p = arg;
	struct stat st;

	if (write(p->started, "x", 1) != 1)
		return;
	gate_run(&p->gate);
	tier_worker_renew(p->t);
	p->mtime = stat(p->path, &st) ? 0 : st.st_mtime;
}

/*
 * A lease renewal posted while a long job runs (a walk of a large
 * directory on a slow server) does not wait for the whole job: the walk
 * runs the renewals queued meanwhile between its directories, or another
 * node's GC could take the block while this node reads it.
 */
static void g4_renewal_in_long_job(void)
{
	uint8_t keys[CHAIN_LEN][KEY];
	char dir[PATH_MAX], path[PATH_MAX];
	struct kvc_index *ix = index_new();
	struct kvc_tier *t = NULL;
	uint32_t ids[CHAIN_LEN];
	struct renew_probe p = { .gate = -1 };
	int gate[2] = { -1, -1 }, started[2] = { -1, -1 };

	subdir(dir, sizeof(dir), "g4-renew");
	TAP_CHECK(mkdir(dir, 0755) == 0);
	if (!ix || pipe(gate) || pipe(started))
		goto out;
	chain_keys(keys);
	t = g4_node(dir, "node-a", 1 << 20, ix, ids);
	if (!t)
		goto out;
	kvc_tier_settle(t);
	tier_path(dir, 1, keys[2], path, sizeof(path));
	TAP_CHECK(age(path, 3600) == 0);

	p.gate = gate[0];
	p.started = started[1];
	p.t = t;
	p.path = path;
	TAP_CHECK(kvc_tier_call(t, renew_run, gate_done, &p) == 0);
	gate_run(&started[0]);			/* the worker is in it */
	TAP_CHECK(fetch(t, ids[2], 1) == 0);	/* its renewal queued behind */
	TAP_CHECK(write(gate[1], "x", 1) == 1);
	kvc_tier_settle(t);
	/* Renewed inside the long job, not after it. */
	TAP_CHECK(p.mtime > time(NULL) - 600);
	/* The server's clock, on a local filesystem: this one's. */
	TAP_CHECK(llabs((long long)(tier_server_now_ns(t) / 1000000000 - time(NULL))) <= 1);
out:
	kvc_tier_close(t);
	kvc_index_destroy(ix);
	for (int i = 0; i < 2; i++) {
		if (gate[i] >= 0)
			close(gate[i]);
		if (started[i] >= 0)
			close(started[i]);
	}
}

/* ---- recovery from manifests --------------------------------------------- */

/* dir/.manifest.<node>: the node's manifest in a tier's directory. */
static void mf_file(const char *dir, const char *node, char *out, size_t len)
{
	pathf(out, len, "%s/.manifest.%s", dir, node);
}

/* Records in the manifest at @path (-1: unreadable), and whether @key
 * (namespace 1) is among them. */
static long mf_count(const char *path, const uint8_t *key, bool *named)
{
	struct kvc_mf_rec *r;
	size_t n, bad;

	if (named)
		*named = false;
	if (kvc_mf_read(path, &r, &n, &bad))
		return -1;
	for (size_t i = 0; named && key && i < n; i++)
		if (r[i].ns == 1 && !memcmp(r[i].key, key, KEY))
			*named = true;
	free(r);
	return bad ? -1 : (long)n;
}

static bool mf_names(const char *path, const uint8_t *key)
{
	bool named;

	return mf_count(path, key, &named) >= 0 && named;
}

/*
 * A node's first run with manifests: recovered (none there, so a full
 * scan finds nothing), then the chain spilled, each block recorded
 * before its file is written. The tier is closed as a crash would leave
 * it (nothing is written at close).
 */
static void mf_fill(const struct kvc_tier_config *c)
{
	struct kvc_index *idx = index_new();
	struct kvc_tier *t;
	uint32_t ids[CHAIN_LEN];

	if (!idx)
		return;
	TAP_CHECK(chain_insert(idx, ids) == 0);
	t = tier_new(c, idx);
	TAP_CHECK(t != NULL);
	if (t) {
		TAP_CHECK(kvc_tier_recover(t, ns1_only, NULL) == 0);
		for (int i = 0; i < CHAIN_LEN; i++)
			TAP_CHECK(spill(t, ids[i], chain_len[i], 70 + i) == 0);
	}
	kvc_tier_close(t);
	kvc_index_destroy(idx);
}

/* A restart: a fresh index, the tier reopened and recovered. */
static struct kvc_tier *mf_restart(const struct kvc_tier_config *c,
				   struct kvc_index **idx, long *found)
{
	struct kvc_tier *t;

	*idx = index_new();
	*found = -1;
	if (!*idx)
		return NULL;
	t = tier_new(c, *idx);
	TAP_CHECK(t != NULL);
	if (t)
		*found = kvc_tier_recover(t, ns1_only, NULL);
	return t;
}

/* Tick until a pass ends (or 5 s): whether one did, and how long it took. */
static bool pass_done(struct kvc_tier *t, double *took)
{
	uint64_t scans = kvc_tier_stats(t)->scans;
	double start = now_mono();

	while (kvc_tier_stats(t)->scans == scans && now_mono() - start < 5) {
		struct timespec ts = { 0, 5 * 1000 * 1000 };

		kvc_tier_tick(t, ns1_only, NULL);
		if (kvc_tier_stats(t)->scans == scans)
			nanosleep(&ts, NULL);
	}
	*took = now_mono() - start;
	return kvc_tier_stats(t)->scans == scans + 1;
}

/* The chain reads back as mf_fill() wrote it. */
static void chain_reads_back(struct kvc_tier *t, struct kvc_index *idx)
{
	uint32_t ids[CHAIN_LEN];

	TAP_CHECK(chain_find(idx, ids) == 0);
	for (int i = 0; i < CHAIN_LEN; i++) {
		TAP_CHECK(fetch(t, ids[i], 80 + i) == 0);
		TAP_CHECK(same_pattern(seen.payload, chain_len[i], 70 + i));
	}
}

/*
 * A tier that never had a manifest (blocks written by an older version,
 * or its manifest lost): recovered by a full scan, which writes the
 * manifest the next start reads.
 */
static void g3_recover_no_manifest(void)
{
	uint8_t keys[CHAIN_LEN][KEY];
	char dir[PATH_MAX], mf[PATH_MAX];
	struct kvc_tier_config c;
	struct kvc_index *idx = index_new();
	struct kvc_mf_rec *r = NULL;
	struct kvc_tier *t;
	uint32_t ids[CHAIN_LEN];
	size_t n = 0, bad = 0;
	long found;

	if (!idx)
		return;
	chain_keys(keys);
	subdir(dir, sizeof(dir), "g3-mf-none");
	TAP_CHECK(mkdir(dir, 0755) == 0);
	mf_file(dir, "node-a", mf, sizeof(mf));
	c = tier_cfg(KVC_TIER_G3, dir, 1 << 20, "node-a", 60000);
	/* Spilled by a tier that was never recovered: no manifest open. */
	TAP_CHECK(chain_insert(idx, ids) == 0);
	t = tier_new(&c, idx);
	TAP_CHECK(t != NULL);
	for (int i = 0; t && i < CHAIN_LEN; i++)
		TAP_CHECK(spill(t, ids[i], chain_len[i], 70 + i) == 0);
	kvc_tier_close(t);
	kvc_index_destroy(idx);
	TAP_CHECK(!exists(mf));

	t = mf_restart(&c, &idx, &found);
	TAP_CHECK(found == CHAIN_LEN);
	if (!t)
		goto out;
	TAP_CHECK(kvc_tier_stats(t)->scans == 1);
	TAP_CHECK(kvc_tier_stats(t)->found == CHAIN_LEN);
	TAP_CHECK(chain_present(idx, G3_BIT) == CHAIN_LEN);
	TAP_CHECK(kvc_tier_stats(t)->usage == chain_bytes());
	chain_reads_back(t, idx);

	/* The manifest now names the chain: key, parent, first, size. */
	TAP_CHECK(kvc_mf_read(mf, &r, &n, &bad) == 0);
	TAP_CHECK(n == CHAIN_LEN && bad == 0);
	for (int i = 0; i < CHAIN_LEN && n == CHAIN_LEN; i++) {
		size_t j;

		for (j = 0; j < n; j++)
			if (!memcmp(r[j].key, keys[i], KEY))
				break;
		TAP_CHECK(j < n);
		if (j == n)
			continue;
		TAP_CHECK(r[j].ns == 1 && r[j].first == (i == 0));
		TAP_CHECK(r[j].size == kvc_bf_file_size(chain_len[i]));
		if (i)
			TAP_CHECK(!memcmp(r[j].parent, keys[i - 1], KEY));
	}
	free(r);
out:
	kvc_tier_close(t);
	kvc_index_destroy(idx);
}

/* After spills, a restart finds the chain from the manifest. */
static void g3_recover_from_manifest(void)
{
	uint8_t keys[CHAIN_LEN][KEY];
	char dir[PATH_MAX], mf[PATH_MAX];
	struct kvc_tier_config c;
	struct kvc_index *idx;
	struct kvc_tier *t;
	uint32_t ids[CHAIN_LEN];
	long found;

	chain_keys(keys);
	subdir(dir, sizeof(dir), "g3-mf");
	TAP_CHECK(mkdir(dir, 0755) == 0);
	mf_file(dir, "node-a", mf, sizeof(mf));
	c = tier_cfg(KVC_TIER_G3, dir, 1 << 20, "node-a", 60000);
	mf_fill(&c);
	/* A record per spill, appended as it went. */
	TAP_CHECK(mf_count(mf, NULL, NULL) == CHAIN_LEN);

	t = mf_restart(&c, &idx, &found);
	TAP_CHECK(found == CHAIN_LEN);
	if (!t)
		goto out;
	TAP_CHECK(kvc_tier_stats(t)->found == CHAIN_LEN);
	TAP_CHECK(kvc_tier_stats(t)->blocks == CHAIN_LEN);
	TAP_CHECK(kvc_tier_stats(t)->usage == chain_bytes());
	TAP_CHECK(kvc_tier_stats(t)->corrupt == 0);
	TAP_CHECK(kvc_tier_stats(t)->unreachable == 0);
	TAP_CHECK(chain_present(idx, G3_BIT) == CHAIN_LEN);
	TAP_CHECK(chain_find(idx, ids) == 0);
	TAP_CHECK(kvc_index_depth(idx, ids[2]) == 2);
	chain_reads_back(t, idx);
	/* Rewritten from what was found: the same three. */
	for (int i = 0; i < CHAIN_LEN; i++)
		TAP_CHECK(mf_names(mf, keys[i]));
	TAP_CHECK(mf_count(mf, NULL, NULL) == CHAIN_LEN);
out:
	kvc_tier_close(t);
	kvc_index_destroy(idx);
	TAP_CHECK(count_tmp(dir) == 0);
}

/*
 * Each record is checked against its file: one deleted behind the
 * tier's back is simply not found; one whose size is not the recorded
 * one is not the file that was written, and is quarantined.
 */
static void g3_recover_checks_files(void)
{
	uint8_t kd[KEY], kt[KEY];
	char dir[PATH_MAX], mf[PATH_MAX], pd[PATH_MAX], pt[PATH_MAX];
	char qdir[PATH_MAX];
	struct kvc_tier_config c;
	struct kvc_index *idx = index_new();
	struct kvc_tier *t;
	uint32_t ids[CHAIN_LEN], id;
	long found;

	if (!idx)
		return;
	subdir(dir, sizeof(dir), "g3-mf-check");
	TAP_CHECK(mkdir(dir, 0755) == 0);
	mf_file(dir, "node-a", mf, sizeof(mf));
	pathf(qdir, sizeof(qdir), "%s/.quarantine", dir);
	c = tier_cfg(KVC_TIER_G3, dir, 1 << 20, "node-a", 60000);
	/* The chain, and two more first blocks: one to delete, one to cut. */
	fill_key(kd, 0xa0);
	fill_key(kt, 0xb0);
	TAP_CHECK(chain_insert(idx, ids) == 0);
	t = tier_new(&c, idx);
	TAP_CHECK(t != NULL);
	if (t) {
		TAP_CHECK(kvc_tier_recover(t, ns1_only, NULL) == 0);
		for (int i = 0; i < CHAIN_LEN; i++)
			TAP_CHECK(spill(t, ids[i], chain_len[i], 70 + i) == 0);
		TAP_CHECK(kvc_index_insert(idx, 1, kd, NULL, &id) == 0);
		TAP_CHECK(spill(t, id, 100, 1) == 0);
		TAP_CHECK(kvc_index_insert(idx, 1, kt, NULL, &id) == 0);
		TAP_CHECK(spill(t, id, 5000, 2) == 0);
	}
	kvc_tier_close(t);
	kvc_index_destroy(idx);
	TAP_CHECK(mf_count(mf, NULL, NULL) == CHAIN_LEN + 2);
	tier_path(dir, 1, kd, pd, sizeof(pd));
	tier_path(dir, 1, kt, pt, sizeof(pt));
	TAP_CHECK(unlink(pd) == 0);
	/* A page short: a size a block file could have, not this one's. */
	TAP_CHECK(truncate(pt, file_size(pt) - 4096) == 0);

	t = mf_restart(&c, &idx, &found);
	TAP_CHECK(found == CHAIN_LEN);
	if (!t)
		goto out;
	TAP_CHECK(chain_present(idx, G3_BIT) == CHAIN_LEN);
	TAP_CHECK(!key_in(idx, kd, G3_BIT) && !key_in(idx, kt, G3_BIT));
	TAP_CHECK(kvc_tier_stats(t)->corrupt == 1);
	TAP_CHECK(kvc_tier_stats(t)->lost == 0);
	TAP_CHECK(kvc_tier_stats(t)->blocks == CHAIN_LEN);
	TAP_CHECK(kvc_tier_stats(t)->usage == chain_bytes());
	TAP_CHECK(!exists(pd) && !exists(pt));
	TAP_CHECK(count_entries(qdir) == 1);
	/* Neither is named any more. */
	TAP_CHECK(mf_count(mf, NULL, NULL) == CHAIN_LEN);
	TAP_CHECK(!mf_names(mf, kd) && !mf_names(mf, kt));
out:
	kvc_tier_close(t);
	kvc_index_destroy(idx);
}

/*
 * A block file no manifest names (a lost append, another writer): not
 * found by the recovery, found by the pass that follows it in the
 * background, paced by the scan interval, once; and named from then on.
 */
static void g3_recover_background_scan(void)
{
	uint8_t kx[KEY], payload[100];
	char dir[PATH_MAX], mf[PATH_MAX], d[PATH_MAX];
	struct kvc_bf_header h;
	struct kvc_tier_config c;
	struct kvc_index *idx;
	struct kvc_tier *t;
	uint64_t scans;
	double took, start;
	long found;

	subdir(dir, sizeof(dir), "g3-mf-bg");
	TAP_CHECK(mkdir(dir, 0755) == 0);
	mf_file(dir, "node-a", mf, sizeof(mf));
	c = tier_cfg(KVC_TIER_G3, dir, 1 << 20, "node-a", 60000);
	c.scan_interval_ms = 100;
	mf_fill(&c);
	pathf(d, sizeof(d), "%s/ns1", dir);
	fill_key(kx, 0xc0);
	make_header(&h, kx, NULL, 1, sizeof(payload));
	memset(payload, 9, sizeof(payload));
	TAP_CHECK(kvc_bf_publish(d, &h, payload, "node-a") == 0);

	t = mf_restart(&c, &idx, &found);
	TAP_CHECK(found == CHAIN_LEN);
	if (!t)
		goto out;
	TAP_CHECK(!key_in(idx, kx, G3_BIT));
	TAP_CHECK(!mf_names(mf, kx));
	scans = kvc_tier_stats(t)->scans;

	/* A slice per tick, not the whole pass in the first one. */
	kvc_tier_tick(t, ns1_only, NULL);
	TAP_CHECK(kvc_tier_stats(t)->scans == scans);
	TAP_CHECK(!key_in(idx, kx, G3_BIT));

	TAP_CHECK(pass_done(t, &took));
	TAP_CHECK(key_in(idx, kx, G3_BIT));
	TAP_CHECK(kvc_tier_stats(t)->found == CHAIN_LEN + 1);
	TAP_CHECK(kvc_tier_stats(t)->lost == 0);
	TAP_CHECK(chain_present(idx, G3_BIT) == CHAIN_LEN);
	TAP_CHECK(kvc_tier_stats(t)->usage ==
		  chain_bytes() + kvc_bf_file_size(sizeof(payload)));
	/* The next start need not scan for it. */
	TAP_CHECK(mf_names(mf, kx));

	/* A g3 tier is rescanned once after a recovery, not forever. */
	scans = kvc_tier_stats(t)->scans;
	start = now_mono();
	while (now_mono() - start < 0.25) {
		struct timespec ts = { 0, 10 * 1000 * 1000 };

		kvc_tier_tick(t, ns1_only, NULL);
		nanosleep(&ts, NULL);
	}
	TAP_CHECK(kvc_tier_stats(t)->scans == scans);
	kvc_tier_close(t);
	kvc_index_destroy(idx);

	/* Restarted: found from the manifest this time. */
	t = mf_restart(&c, &idx, &found);
	TAP_CHECK(found == CHAIN_LEN + 1);
	TAP_CHECK(key_in(idx, kx, G3_BIT));
out:
	kvc_tier_close(t);
	kvc_index_destroy(idx);
}

/* The temp file name of @node's writer @pid for @key: as kvc_bf_prepare. */
static void tmp_name(char *out, size_t len, const char *leaf,
		     const char *node, long pid, const uint8_t *key)
{
	char hex[2 * KEY + 1];

	for (int i = 0; i < KEY; i++)
		snprintf(hex + 2 * i, 3, "%02x", key[i]);
	pathf(out, len, "%s/.tmp.%s.%ld.0.%s", leaf, node, pid, hex);
}

/*
 * A crash mid-spill: the block's record is there, its final file is not,
 * its temp file is. The recovery itself removes this node's temp file of
 * an earlier run (another pid), before any background pass; it keeps
 * another node's recent one and one of this very process.
 */
static void g3_recover_stale_tmp(void)
{
	uint8_t keys[CHAIN_LEN][KEY];
	char dir[PATH_MAX], path[PATH_MAX], leaf[PATH_MAX];
	char stale[PATH_MAX], other[PATH_MAX], mine[PATH_MAX];
	struct kvc_tier_config c;
	struct kvc_index *idx;
	struct kvc_tier *t;
	long found;

	chain_keys(keys);
	subdir(dir, sizeof(dir), "g3-mf-tmp");
	TAP_CHECK(mkdir(dir, 0755) == 0);
	c = tier_cfg(KVC_TIER_G3, dir, 1 << 20, "node-a", 60000);
	mf_fill(&c);
	tier_path(dir, 1, keys[2], path, sizeof(path));
	pathf(leaf, sizeof(leaf), "%.*s", (int)(strrchr(path, '/') - path),
	      path);
	TAP_CHECK(unlink(path) == 0);
	tmp_name(stale, sizeof(stale), leaf, "node-a",
		 (long)getpid() + 100000, keys[2]);
	tmp_name(other, sizeof(other), leaf, "node-b", 123, keys[2]);
	tmp_name(mine, sizeof(mine), leaf, "node-a", (long)getpid(), keys[2]);
	junk_file(stale, 4096);
	junk_file(other, 4096);
	junk_file(mine, 4096);

	t = mf_restart(&c, &idx, &found);
	TAP_CHECK(found == CHAIN_LEN - 1);
	TAP_CHECK(chain_present(idx, G3_BIT) == CHAIN_LEN - 1);
	TAP_CHECK(!key_in(idx, keys[2], G3_BIT));
	TAP_CHECK(!exists(stale));
	TAP_CHECK(exists(other) && exists(mine));
	kvc_tier_close(t);
	kvc_index_destroy(idx);
	unlink(other);
	unlink(mine);
	TAP_CHECK(count_tmp(dir) == 0);
}

/* Half the last record cut off (a crash mid-append): the rest recovers. */
static void g3_recover_torn_manifest(void)
{
	uint8_t keys[CHAIN_LEN][KEY];
	char dir[PATH_MAX], mf[PATH_MAX];
	struct kvc_tier_config c;
	struct kvc_index *idx;
	struct kvc_tier *t;
	double took;
	long found;

	chain_keys(keys);
	subdir(dir, sizeof(dir), "g3-mf-torn");
	TAP_CHECK(mkdir(dir, 0755) == 0);
	mf_file(dir, "node-a", mf, sizeof(mf));
	c = tier_cfg(KVC_TIER_G3, dir, 1 << 20, "node-a", 60000);
	c.scan_interval_ms = 100;
	mf_fill(&c);
	TAP_CHECK(file_size(mf) == CHAIN_LEN * KVC_MF_REC_SIZE);
	TAP_CHECK(truncate(mf, CHAIN_LEN * KVC_MF_REC_SIZE -
			   KVC_MF_REC_SIZE / 2) == 0);

	t = mf_restart(&c, &idx, &found);
	TAP_CHECK(found == CHAIN_LEN - 1);
	if (!t)
		goto out;
	TAP_CHECK(chain_present(idx, G3_BIT) == CHAIN_LEN - 1);
	TAP_CHECK(!key_in(idx, keys[2], G3_BIT));
	TAP_CHECK(kvc_tier_stats(t)->corrupt == 0);
	/* Rewritten whole: no torn tail left for appends to follow. */
	TAP_CHECK(mf_count(mf, NULL, NULL) == CHAIN_LEN - 1);
	TAP_CHECK(file_size(mf) % KVC_MF_REC_SIZE == 0);
	/* The leaf's file is there: the background pass finds it. */
	TAP_CHECK(pass_done(t, &took));
	TAP_CHECK(chain_present(idx, G3_BIT) == CHAIN_LEN);
	chain_reads_back(t, idx);
out:
	kvc_tier_close(t);
	kvc_index_destroy(idx);
}

/*
 * Records of removed blocks pile up until the manifest is rewritten
 * (past 4096 more than twice the blocks): the rewrite must keep the
 * records of the spills in flight, and of the spill that triggers it,
 * though none is in the index yet.
 */
static void g3_manifest_compaction(void)
{
	char dir[PATH_MAX], mf[PATH_MAX];
	struct kvc_tier_config c;
	struct kvc_index *idx = index_new();
	struct kvc_tier *t;
	uint8_t k[KEY], ka[KEY], kb[KEY], *p;
	uint32_t id, ida, idb;
	int ret = 0, sa, sb;
	long found;

	if (!idx)
		return;
	subdir(dir, sizeof(dir), "g3-mf-compact");
	TAP_CHECK(mkdir(dir, 0755) == 0);
	mf_file(dir, "node-a", mf, sizeof(mf));
	c = tier_cfg(KVC_TIER_G3, dir, 1 << 20, "node-a", 60000);
	c.fsync = false;	/* thousands of files: keep it quick */
	t = tier_new(&c, idx);
	TAP_ASSERT_TRUE(t != NULL);
	TAP_CHECK(kvc_tier_recover(t, ns1_only, NULL) == 0);
	/* One block spilled and dropped again and again: a record each. */
	fill_key(k, 0x20);
	for (int i = 0; i < 4095 && !ret; i++) {
		ret = kvc_index_insert(idx, 1, k, NULL, &id);
		if (!ret)
			ret = spill(t, id, 1, 1);
		if (!ret)
			ret = kvc_tier_drop(t, id);
	}
	TAP_CHECK(ret == 0);
	TAP_CHECK(kvc_tier_stats(t)->blocks == 0);
	TAP_CHECK(mf_count(mf, NULL, NULL) == 4095);

	/* Two spills at once; the second's record is past the limit. */
	fill_key(ka, 0x40);
	fill_key(kb, 0x60);
	TAP_CHECK(kvc_index_insert(idx, 1, ka, NULL, &ida) == 0);
	TAP_CHECK(kvc_index_insert(idx, 1, kb, NULL, &idb) == 0);
	sa = kvc_tier_spill_begin(t, &p);
	TAP_CHECK(sa >= 0);
	if (sa >= 0) {
		fill_pattern(p, 300, 1);
		TAP_CHECK(kvc_tier_spill_submit(t, sa, ida, 300) == 0);
	}
	sb = kvc_tier_spill_begin(t, &p);
	TAP_CHECK(sb >= 0);
	if (sb >= 0) {
		fill_pattern(p, 300, 2);
		TAP_CHECK(kvc_tier_spill_submit(t, sb, idb, 300) == 0);
	}
	seen.n = 0;
	TAP_CHECK(tier_wait(t, 2) == 0);
	TAP_CHECK(key_in(idx, ka, G3_BIT) && key_in(idx, kb, G3_BIT));
	/* Rewritten: the piled-up records gone, both blocks named. */
	TAP_CHECK(mf_count(mf, NULL, NULL) == 2);
	TAP_CHECK(mf_names(mf, ka) && mf_names(mf, kb));
	kvc_tier_close(t);
	kvc_index_destroy(idx);

	t = mf_restart(&c, &idx, &found);
	TAP_CHECK(found == 2);
	TAP_CHECK(key_in(idx, ka, G3_BIT) && key_in(idx, kb, G3_BIT));
	kvc_tier_close(t);
	kvc_index_destroy(idx);
}

/*
 * A shared tier: each node's recovery reads every node's manifest. Node
 * B finds what node A spilled from A's manifest (a block no manifest
 * names is left to the rescans), and names it in its own from then on.
 */
static void g4_recover_two_nodes(void)
{
	uint8_t keys[CHAIN_LEN][KEY], kx[KEY], payload[100];
	char dir[PATH_MAX], mfa[PATH_MAX], mfb[PATH_MAX], d[PATH_MAX];
	struct kvc_bf_header h;
	struct kvc_tier_config ca, cb;
	struct kvc_index *ia = index_new(), *ib = index_new();
	struct kvc_tier *a = NULL, *b = NULL;
	uint32_t ids[CHAIN_LEN], bids[CHAIN_LEN];
	long found;

	if (!ia || !ib)
		goto out;
	chain_keys(keys);
	subdir(dir, sizeof(dir), "g4-mf");
	TAP_CHECK(mkdir(dir, 0755) == 0);
	mf_file(dir, "node-a", mfa, sizeof(mfa));
	mf_file(dir, "node-b", mfb, sizeof(mfb));
	ca = tier_cfg(KVC_TIER_G4, dir, 1 << 20, "node-a", 60000);
	cb = tier_cfg(KVC_TIER_G4, dir, 1 << 20, "node-b", 60000);
	a = tier_new(&ca, ia);
	b = tier_new(&cb, ib);
	TAP_CHECK(a && b);
	if (!a || !b)
		goto out;
	/* Both start on an empty directory: a scan, a manifest each. */
	TAP_CHECK(kvc_tier_recover(a, ns1_only, NULL) == 0);
	TAP_CHECK(kvc_tier_recover(b, ns1_only, NULL) == 0);
	TAP_CHECK(mf_count(mfa, NULL, NULL) == 0);
	TAP_CHECK(mf_count(mfb, NULL, NULL) == 0);
	TAP_CHECK(chain_insert(ia, ids) == 0);
	for (int i = 0; i < CHAIN_LEN; i++)
		TAP_CHECK(spill(a, ids[i], chain_len[i], 70 + i) == 0);
	TAP_CHECK(mf_count(mfa, NULL, NULL) == CHAIN_LEN);
	TAP_CHECK(mf_count(mfb, NULL, NULL) == 0);
	pathf(d, sizeof(d), "%s/ns1", dir);
	fill_key(kx, 0xc0);
	make_header(&h, kx, NULL, 1, sizeof(payload));
	memset(payload, 9, sizeof(payload));
	TAP_CHECK(kvc_bf_publish(d, &h, payload, "node-x") == 0);

	/* B restarts. */
	kvc_tier_close(b);
	kvc_index_destroy(ib);
	b = mf_restart(&cb, &ib, &found);
	TAP_CHECK(found == CHAIN_LEN);
	if (!b)
		goto out;
	TAP_CHECK(kvc_tier_stats(b)->found == CHAIN_LEN);
	TAP_CHECK(chain_present(ib, G4_BIT) == CHAIN_LEN);
	TAP_CHECK(!key_in(ib, kx, G4_BIT));
	TAP_CHECK(kvc_tier_stats(b)->usage == chain_bytes());
	TAP_CHECK(chain_find(ib, bids) == 0);
	for (int i = 0; i < CHAIN_LEN; i++) {
		TAP_CHECK(fetch(b, bids[i], 90 + i) == 0);
		TAP_CHECK(same_pattern(seen.payload, chain_len[i], 70 + i));
	}
	/* B's manifest names only what B wrote: every node reads every
	 * manifest at start, so none repeats another's. */
	for (int i = 0; i < CHAIN_LEN; i++)
		TAP_CHECK(!mf_names(mfb, keys[i]));
	/* A's manifest is A's: read, never rewritten by B. */
	TAP_CHECK(mf_count(mfa, NULL, NULL) == CHAIN_LEN);
out:
	kvc_tier_close(a);
	kvc_tier_close(b);
	kvc_index_destroy(ia);
	kvc_index_destroy(ib);
	TAP_CHECK(count_tmp(dir) == 0);
}

/* ---- read-only ----------------------------------------------------------- */

/* The checks of read_only_tier(), as a user who may not write @ro. */
static void read_only_body(const char *ro)
{
	uint8_t keys[CHAIN_LEN][KEY];
	struct kvc_tier_config c;
	struct kvc_index *idx = index_new();
	struct kvc_tier *t;
	uint32_t ids[CHAIN_LEN];
	uint8_t *p;

	if (!idx)
		return;
	chain_keys(keys);
	c = tier_cfg(KVC_TIER_G3, ro, 1 << 20, "node-a", 1000);
	t = tier_new(&c, idx);
	TAP_ASSERT_TRUE(t != NULL);
	TAP_CHECK(!kvc_tier_writable(t));
	TAP_EXPECT_EQ(kvc_tier_spill_begin(t, &p), -EACCES);
	TAP_CHECK(kvc_tier_scan(t, ns1_only, NULL) == CHAIN_LEN);
	TAP_CHECK(chain_find(idx, ids) == 0);
	for (int i = 0; i < CHAIN_LEN; i++) {
		TAP_CHECK(fetch(t, ids[i], 60 + i) == 0);
		TAP_CHECK(same_pattern(seen.payload, chain_len[i], 30 + i));
	}
	TAP_EXPECT_EQ(kvc_tier_drop(t, ids[2]), -EACCES);
	kvc_tier_close(t);
	kvc_index_destroy(idx);
}

/*
 * A directory this process may not write opens read-only. Root ignores
 * directory permissions, so as root the checks run in a child that has
 * dropped to nobody, on a root-owned 0755 directory.
 */
static void read_only_tier(void)
{
	struct kvc_tier_config c;
	struct kvc_index *idx = index_new();
	struct kvc_tier *t;
	char ro[PATH_MAX], nsd[PATH_MAX + 8];
	uint32_t ids[CHAIN_LEN];

	if (!idx)
		return;
	/* Filled by a writable tier first. */
	subdir(ro, sizeof(ro), "ro");
	TAP_CHECK(mkdir(ro, 0755) == 0);
	TAP_CHECK(chain_insert(idx, ids) == 0);
	c = tier_cfg(KVC_TIER_G3, ro, 1 << 20, "node-a", 1000);
	t = tier_new(&c, idx);
	TAP_CHECK(t != NULL);
	for (int i = 0; t && i < CHAIN_LEN; i++)
		TAP_CHECK(spill(t, ids[i], chain_len[i], 30 + i) == 0);
	kvc_tier_close(t);
	kvc_index_destroy(idx);

	/*
	 * The tier makes a namespace's directory 0700 until kvcached gives
	 * it the namespace's read bits (kvcd_ns_dirs()): do that here, as
	 * for a namespace everyone may read.
	 */
	TAP_CHECK((size_t)snprintf(nsd, sizeof(nsd), "%s/ns1", ro) <
		  sizeof(nsd));
	TAP_CHECK(chmod(nsd, 0755) == 0);
	if (geteuid() != 0) {
		TAP_CHECK(chmod(ro, 0555) == 0);
		read_only_body(ro);
		TAP_CHECK(chmod(ro, 0755) == 0);
		return;
	}
	scratch_as_nobody(tmpdir, read_only_body, ro);
}

int main(void)
{
	if (scratch_make(tmpdir, sizeof(tmpdir), "kvc-tier"))
		return 1;
	TAP_RUN(tio_config_errors);
	TAP_RUN(tio_round_trip_fsync);
	TAP_RUN(tio_round_trip_nofsync);
	TAP_RUN(tio_publish_twice);
	TAP_RUN(tio_queue_depth);
	TAP_RUN(tio_read_errors);
	TAP_RUN(tio_read_errors_in_place);
	TAP_RUN(tio_read_in_place);
	TAP_RUN(tio_write_failure);
	TAP_RUN(tier_open_errors);
	TAP_RUN(g3_spill_and_fetch);
	TAP_RUN(g3_recovery);
	TAP_RUN(g3_corrupt_quarantine);
	TAP_RUN(g3_capacity_lru);
	TAP_RUN(g3_capacity_s3fifo);
	TAP_RUN(g3_capacity_density);
	TAP_RUN(g3_long_chain);
	TAP_RUN(g4_two_nodes);
	TAP_RUN(g4_gc);
	TAP_RUN(g4_gc_read_cancels);
	TAP_RUN(g4_lease_not_rounded);
	TAP_RUN(g4_renewal_in_long_job);
	TAP_RUN(g4_leased_full_refuses);
	TAP_RUN(g4_full_collects_orphans);
	TAP_RUN(g3_recover_no_manifest);
	TAP_RUN(g3_recover_from_manifest);
	TAP_RUN(g3_recover_checks_files);
	TAP_RUN(g3_recover_background_scan);
	TAP_RUN(g3_recover_stale_tmp);
	TAP_RUN(g3_recover_torn_manifest);
	TAP_RUN(g3_manifest_compaction);
	TAP_RUN(g4_recover_two_nodes);
	TAP_RUN(read_only_tier);
	scratch_remove(tmpdir);
	return tap_done();
}
