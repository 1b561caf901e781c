// SPDX-License-Identifier: GPL-2.0
/*
 * Host tests for helper/common/fault.c, kvcached's fault injection, and for how
 * the tier I/O handles what it injects, on real files and a real
 * io_uring:
 *
 *  - the facility: the spec's syntax and its errors, skip / interval /
 *    times / probability, a repeatable seed, nothing counted disarmed;
 *  - tierio: EIO or ENOSPC at each point of a spill (mkdir, create,
 *    write, fsync, close, link, directory fsync) fails the spill with
 *    that error and leaves no temp file, no final file, no descriptor
 *    and no busy slot, and the same block written once the fault is
 *    spent reads back exact; short writes are completed (never a file
 *    published with missing bytes); EIO at the read's open or read is a
 *    failed read without a leaked descriptor; short reads are completed
 *    and the payload is exact;
 *  - a G3 tier: a failed spill is counted, its space reservation given
 *    back and the block not present, and a later spill works; a failed
 *    read is counted, leaves the block present and a later read returns
 *    it exact;
 *  - the manifest: a failed or short append leaves only whole records; a
 *    rewrite whose fsync or rename fails keeps the old manifest and no
 *    temp file.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "blockfile.h"
#include "fault.h"
#include "index.h"
#include "manifest.h"
#include "tier.h"
#include "tierio.h"
#include "tap.h"
#include "scratch.h"

#define KEY		KVC_BF_KEY_SIZE
#define MAXP		(3 * 4096 + 100)	/* a 4-page file, padded */

static char tmpdir[64];

struct seen {
	int n, op, status;
	uint64_t cookie, payload_len;
	uint8_t payload[MAXP];
};

static struct seen seen;

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

static void fill_key(uint8_t *k, uint8_t start)
{
	for (int i = 0; i < KEY; i++)
		k[i] = (uint8_t)(start + 3 * i);
}

static uint8_t pat(size_t i, unsigned int seed)
{
	return (uint8_t)((i * 2654435761U + seed * 40503U) >> 9);
}

static void fill(uint8_t *p, size_t len, unsigned int seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = pat(i, seed);
}

static bool same(const uint8_t *p, size_t len, unsigned int seed)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != pat(i, seed))
			return false;
	return true;
}

/* Descriptors open in this process: a leak shows as a larger number. */
static int nfds(void)
{
	DIR *dp = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!dp)
		return -1;
	while ((e = readdir(dp)))
		n += e->d_name[0] != '.';
	closedir(dp);
	return n - 1;	/* the directory's own */
}

static int ntmp, nkvb;

static int count_one(const char *path, const struct stat *st, int type,
		     struct FTW *ftw)
{
	const char *name = path + ftw->base;
	size_t len = strlen(name);

	(void)st;
	if (type != FTW_F)
		return 0;
	if (!strncmp(name, ".tmp.", 5)) {
		printf("# left behind: %s\n", path);
		ntmp++;
	} else if (len > 4 && !strcmp(name + len - 4, ".kvb")) {
		nkvb++;
	}
	return 0;
}

/* Temp files and block files under @d. */
static void count_files(const char *d, int *tmp, int *kvb)
{
	ntmp = 0;
	nkvb = 0;
	nftw(d, count_one, 16, FTW_PHYS);
	*tmp = ntmp;
	*kvb = nkvb;
}

static void arm(const char *spec)
{
	char why[256] = "";
	int ret = kvc_fault_configure(spec, why, sizeof(why));

	if (ret)
		printf("# %s: %s\n", spec, why);
	TAP_CHECK(ret == 0);
	TAP_CHECK(kvc_fault_armed == (spec && spec[0]));
}

/* ---- the facility --------------------------------------------------------- */

static void spec_errors(void)
{
	static const char *const bad[] = {
		"tier_write",			/* no kind */
		"tier_wrte=eio",		/* unknown point */
		"tier_write=eagain",		/* unknown kind */
		"tier_fsync=short",		/* short where nothing moves */
		"tier_link=short",
		"tier_write=eio,probability=101",
		"tier_write=eio,probability=-1",
		"tier_write=eio,interval=0",
		"tier_write=eio,times=0",
		"tier_write=eio,times=",
		"tier_write=eio,times=2x",
		"tier_write=eio,often=2",
		"tier_write=eio,times",
		"seed=abc",
		"seed=1,times=2",
		"tier_read=short;tier_open=eio;bogus=eio",
		"tier_fsync=delay,ms=0",
		"tier_fsync=delay,ms=60001",
		"tier_fsync=eio,ms=5",		/* ms is delay's and hold's */
		"tier_read=hold",		/* hold is tier_open's only */
		"tier_open=hold,ms=0",
	};
	char why[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = '\0';
		TAP_CHECK(kvc_fault_configure(bad[i], why, sizeof(why)) ==
			  -EINVAL);
		/* A bad spec arms nothing, not even its good entries. */
		TAP_CHECK(!kvc_fault_armed);
		TAP_CHECK(why[0] != '\0');
		if (kvc_fault_armed || !why[0])
			printf("# accepted: %s\n", bad[i]);
	}
	TAP_CHECK(kvc_fault_lookup("tier_dirsync") == KVC_FAULT_TIER_DIRSYNC);
	TAP_CHECK(kvc_fault_lookup("nope") == -ENOENT);
	TAP_CHECK(!strcmp(kvc_fault_name(KVC_FAULT_MANIFEST_WRITE),
			  "manifest_write"));
	/* Spaces around entries, empty entries, every kind. */
	arm(" tier_write=short ; ;tier_read=enospc,times=2;seed=7 ");
	arm("tier_fsync=delay;tier_open=delay,ms=5,times=1");
	arm("");
	arm(NULL);
	TAP_CHECK(kvc_fault_err(KVC_FAULT_TIER_WRITE) == 0);
}

static void counting(void)
{
	int got[12];

	/* Disarmed: nothing injected, nothing even counted. */
	arm(NULL);
	TAP_CHECK(kvc_fault_err(KVC_FAULT_TIER_CREATE) == 0);
	TAP_CHECK(kvc_fault_sys(KVC_FAULT_MANIFEST_FSYNC) == 0);
	TAP_CHECK(kvc_fault_xfer(KVC_FAULT_TIER_READ, 8192) == 8192);
	TAP_CHECK(kvc_fault_hits(KVC_FAULT_TIER_CREATE) == 0);

	/* skip 2, then every 3rd hit, 2 times: hits 5 and 8. */
	arm("tier_create=enospc,skip=2,interval=3,times=2");
	for (int i = 0; i < 12; i++)
		got[i] = kvc_fault_err(KVC_FAULT_TIER_CREATE);
	for (int i = 0; i < 12; i++)
		TAP_CHECK(got[i] == (i == 4 || i == 7 ? -ENOSPC : 0));
	TAP_CHECK(kvc_fault_hits(KVC_FAULT_TIER_CREATE) == 12);
	TAP_CHECK(kvc_fault_injected(KVC_FAULT_TIER_CREATE) == 2);
	TAP_CHECK(kvc_fault_injected_total() == 2);
	/* Other points are untouched. */
	TAP_CHECK(kvc_fault_err(KVC_FAULT_TIER_LINK) == 0);

	/* The system-call style: -1 and errno. */
	arm("manifest_rename=eio,times=1");
	errno = 0;
	TAP_CHECK(kvc_fault_sys(KVC_FAULT_MANIFEST_RENAME) == -1 &&
		  errno == EIO);
	TAP_CHECK(kvc_fault_sys(KVC_FAULT_MANIFEST_RENAME) == 0);

	/* Transfers: errors replace a success, never a failure or EOF. */
	arm("tier_write=enospc");
	TAP_EXPECT_EQ(kvc_fault_xfer(KVC_FAULT_TIER_WRITE, 12288), -ENOSPC);
	TAP_EXPECT_EQ(kvc_fault_xfer(KVC_FAULT_TIER_WRITE, -EIO), -EIO);
	TAP_CHECK(kvc_fault_xfer(KVC_FAULT_TIER_WRITE, 0) == 0);
	arm("tier_read=short");
	TAP_CHECK(kvc_fault_xfer(KVC_FAULT_TIER_READ, 16384) == 8192);
	TAP_CHECK(kvc_fault_xfer(KVC_FAULT_TIER_READ, 12288) == 4096);
	TAP_CHECK(kvc_fault_xfer(KVC_FAULT_TIER_READ, 8191) == 0 + 8191);
	TAP_CHECK(kvc_fault_xfer(KVC_FAULT_TIER_READ, 4096) == 4096);
	TAP_CHECK(kvc_fault_injected(KVC_FAULT_TIER_READ) == 2);
	arm(NULL);
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* delay stalls the caller, then lets the real call go on. */
static void delays(void)
{
	double t0;

	arm("tier_fsync=delay,ms=40,skip=1,times=2");
	t0 = mono_s();
	TAP_EXPECT_EQ(kvc_fault_err(KVC_FAULT_TIER_FSYNC), 0);	/* skipped */
	TAP_CHECK(mono_s() - t0 < 0.03);
	t0 = mono_s();
	TAP_EXPECT_EQ(kvc_fault_err(KVC_FAULT_TIER_FSYNC), 0);
	TAP_EXPECT_EQ(kvc_fault_sys(KVC_FAULT_TIER_FSYNC), 0);
	TAP_CHECK(mono_s() - t0 >= 0.08);	/* two stalls of 40 ms */
	TAP_EXPECT_EQ(kvc_fault_injected(KVC_FAULT_TIER_FSYNC), 2);
	/* A transfer keeps its result; the third hit is past times. */
	arm("tier_read=delay,ms=1");
	TAP_EXPECT_EQ(kvc_fault_xfer(KVC_FAULT_TIER_READ, 16384), 16384);
	TAP_EXPECT_EQ(kvc_fault_injected(KVC_FAULT_TIER_READ), 1);
	arm(NULL);
}

/* hold says how long to hold, once a hit, and never fails the call. */
static void holds(void)
{
	arm("tier_open=hold,ms=250,skip=1,times=2");
	TAP_EXPECT_EQ(kvc_fault_kind(KVC_FAULT_TIER_OPEN), KVC_FAULT_HOLD);
	TAP_EXPECT_EQ(kvc_fault_kind(KVC_FAULT_TIER_READ), KVC_FAULT_NONE);
	TAP_EXPECT_EQ(kvc_fault_hold(KVC_FAULT_TIER_OPEN), 0);	/* skipped */
	TAP_EXPECT_EQ(kvc_fault_hold(KVC_FAULT_TIER_OPEN), 250);
	TAP_EXPECT_EQ(kvc_fault_hold(KVC_FAULT_TIER_OPEN), 250);
	TAP_EXPECT_EQ(kvc_fault_hold(KVC_FAULT_TIER_OPEN), 0);	/* spent */
	TAP_EXPECT_EQ(kvc_fault_injected(KVC_FAULT_TIER_OPEN), 2);
	/* Not a hold point: no hit taken. */
	TAP_EXPECT_EQ(kvc_fault_hold(KVC_FAULT_TIER_READ), 0);
	TAP_EXPECT_EQ(kvc_fault_hits(KVC_FAULT_TIER_READ), 0);
	arm("tier_open=hold");
	TAP_EXPECT_EQ(kvc_fault_hold(KVC_FAULT_TIER_OPEN), 100);
	arm(NULL);
}

static void probability(void)
{
	int a = 0, b = 0, c = 0;
	bool differ = false;

	arm("tier_open=eio,probability=0");
	for (int i = 0; i < 1000; i++)
		a += kvc_fault_err(KVC_FAULT_TIER_OPEN) != 0;
	TAP_CHECK(a == 0);
	TAP_CHECK(kvc_fault_hits(KVC_FAULT_TIER_OPEN) == 1000);

	/* Roughly the asked share, and the same draws from the same seed. */
	arm("tier_open=eio,probability=30;seed=99");
	int first[200];

	for (int i = 0; i < 200; i++) {
		first[i] = kvc_fault_err(KVC_FAULT_TIER_OPEN);
		b += first[i] != 0;
	}
	arm("tier_open=eio,probability=30;seed=99");
	for (int i = 0; i < 200; i++) {
		int r = kvc_fault_err(KVC_FAULT_TIER_OPEN);

		differ |= r != first[i];
	}
	TAP_CHECK(!differ);
	TAP_CHECK(b >= 30 && b <= 90);
	arm("tier_open=eio,probability=30;seed=12345");
	for (int i = 0; i < 200; i++)
		c += kvc_fault_err(KVC_FAULT_TIER_OPEN) != 0;
	TAP_CHECK(c >= 30 && c <= 90);
	if (b < 30 || b > 90 || c < 30 || c > 90)
		printf("# 30%%: %d and %d of 200\n", b, c);
	arm(NULL);
}

static off_t size_of(const char *path)
{
	struct stat st;

	return stat(path, &st) ? -1 : st.st_size;
}

/* ---- tierio --------------------------------------------------------------- */

static void tio_cb(void *arg, const struct kvc_tio_done *d)
{
	struct seen *s = arg;

	s->n++;
	s->op = d->op;
	s->status = d->status;
	s->cookie = d->cookie;
	s->payload_len = 0;
	if (d->op == KVC_TIO_READ && !d->status &&
	    d->h->payload_len <= sizeof(s->payload)) {
		s->payload_len = d->h->payload_len;
		memcpy(s->payload, d->payload, s->payload_len);
	}
}

static int tio_wait(struct kvc_tio *t)
{
	for (int i = 0; i < 10000 && seen.n < 1; i++) {
		int ret = kvc_tio_reap(t, true, tio_cb, &seen);

		if (ret < 0)
			return ret;
	}
	return seen.n ? 0 : -ETIMEDOUT;
}

static void header(struct kvc_bf_header *h, const uint8_t *key, uint64_t len)
{
	memset(h, 0, sizeof(*h));
	memcpy(h->key, key, KEY);
	h->flags = KVC_BF_F_FIRST;
	h->ns_id = 1;
	h->payload_len = len;
	strcpy(h->node_id, "node-f");
}

/* Spill a block: the submit's error or the callback's status. */
static int put(struct kvc_tio *t, const char *dir, const uint8_t *key,
	       uint64_t len, unsigned int seed)
{
	struct kvc_bf_header h;
	uint8_t *p;
	int slot, ret;

	header(&h, key, len);
	slot = kvc_tio_write_begin(t, &p);
	if (slot < 0)
		return slot;
	fill(p, (size_t)len, seed);
	ret = kvc_tio_write_submit(t, slot, dir, &h, seed);
	if (ret)
		return ret;
	seen.n = 0;
	ret = tio_wait(t);
	return ret ? ret : seen.status;
}

static int get(struct kvc_tio *t, const char *dir, const uint8_t *key)
{
	int ret;

	seen.n = 0;
	seen.payload_len = 0;
	ret = kvc_tio_read(t, dir, key, 7);
	if (ret)
		return ret;
	ret = tio_wait(t);
	return ret ? ret : seen.status;
}

static struct kvc_tio *tio_new(bool fsync)
{
	struct kvc_tio_config c = {
		.depth = 2, .max_payload = MAXP, .fsync = fsync,
		.tag = "node-f",
	};
	struct kvc_tio *t = NULL;

	TAP_CHECK(kvc_tio_create(&t, &c) == 0);
	return t;
}

/* After a failed spill: nothing on disk, nothing held. */
static void nothing_left(struct kvc_tio *t, const char *dir, int fds,
			 const char *what)
{
	int tmp, kvb;

	count_files(dir, &tmp, &kvb);
	TAP_CHECK(tmp == 0);
	TAP_CHECK(kvb == 0);
	TAP_CHECK(nfds() == fds);
	TAP_CHECK(kvc_tio_idle_slots(t) == 2);
	TAP_CHECK(kvc_tio_in_flight(t) == 0);
	if (tmp || kvb || nfds() != fds)
		printf("# %s: %d temp, %d block files, %d fds (was %d)\n",
		       what, tmp, kvb, nfds(), fds);
}

static void tio_spill_faults(void)
{
	static const struct {
		const char *spec;
		int err;
	} cases[] = {
		{ "tier_mkdir=eio,times=1", -EIO },
		{ "tier_create=enospc,times=1", -ENOSPC },
		{ "tier_write=eio,times=1", -EIO },
		{ "tier_write=enospc,times=1", -ENOSPC },
		{ "tier_fsync=eio,times=1", -EIO },
		{ "tier_close=eio,times=1", -EIO },
		{ "tier_link=enospc,times=1", -ENOSPC },
		{ "tier_dirsync=eio,times=1", -EIO },
	};
	char dir[PATH_MAX];
	uint8_t key[KEY];

	for (int fs = 0; fs < 2; fs++) {
		struct kvc_tio *t = tio_new(fs);

		if (!t)
			return;
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			const char *spec = cases[i].spec;
			int err = cases[i].err, fds, ret;

			/* Without fsync there is no fsync to fail. */
			if (!fs && (strstr(spec, "fsync") ||
				    strstr(spec, "dirsync")))
				continue;
			pathf(dir, sizeof(dir), "%s/tio-%d-%zu", tmpdir, fs, i);
			TAP_CHECK(mkdir(dir, 0755) == 0);
			fill_key(key, (uint8_t)(i * 16 + (size_t)fs));
			fds = nfds();
			arm(spec);
			ret = put(t, dir, key, MAXP, (unsigned int)i);
			TAP_CHECK(ret == err);
			if (ret != err)
				printf("# %s (fsync %d): %d\n", spec, fs, ret);
			TAP_CHECK(kvc_fault_injected_total() == 1);
			nothing_left(t, dir, fds, spec);
			TAP_EXPECT_EQ(get(t, dir, key), -ENOENT);
			/* Spent (times=1): the same block goes through. */
			TAP_CHECK(put(t, dir, key, MAXP, 100 + (unsigned int)i)
				  == 0);
			TAP_CHECK(get(t, dir, key) == 0);
			TAP_CHECK(seen.payload_len == MAXP &&
				  same(seen.payload, MAXP,
				       100 + (unsigned int)i));
			TAP_CHECK(nfds() == fds);
			arm(NULL);
		}
		kvc_tio_destroy(t);
	}
}

/*
 * Every write short: the rest is asked for again until the file is
 * whole, and only then published; the file reads back exact. (A short
 * write whose rest fails is test_tier's tio_write_failure, with a real
 * RLIMIT_FSIZE.)
 */
static void tio_short_writes(void)
{
	char dir[PATH_MAX], path[PATH_MAX], d[PATH_MAX];
	uint8_t key[KEY];

	for (int fs = 0; fs < 2; fs++) {
		struct kvc_tio *t = tio_new(fs);
		int fds = nfds(), tmp, kvb;

		if (!t)
			return;
		pathf(dir, sizeof(dir), "%s/short-%d", tmpdir, fs);
		TAP_CHECK(mkdir(dir, 0755) == 0);
		fill_key(key, (uint8_t)(0xa0 + fs));
		arm("tier_write=short");
		TAP_CHECK(put(t, dir, key, MAXP, 5) == 0);
		/* 20480 bytes: cut to 8192, the rest 12288 to 4096, the
		 * rest 8192 to 4096; the last page is whole. */
		TAP_CHECK(kvc_fault_injected(KVC_FAULT_TIER_WRITE) == 3);
		TAP_CHECK(kvc_fault_hits(KVC_FAULT_TIER_WRITE) == 3);
		arm(NULL);
		pathf(d, sizeof(d), "%s", dir);
		TAP_CHECK(kvc_bf_path(d, key, path, sizeof(path)) == 0);
		TAP_CHECK(size_of(path) == (off_t)kvc_bf_file_size(MAXP));
		TAP_CHECK(get(t, dir, key) == 0);
		TAP_CHECK(seen.payload_len == MAXP &&
			  same(seen.payload, MAXP, 5));
		count_files(dir, &tmp, &kvb);
		TAP_CHECK(tmp == 0 && kvb == 1);
		TAP_CHECK(nfds() == fds);
		kvc_tio_destroy(t);
	}
}

static void tio_read_faults(void)
{
	struct kvc_tio *t = tio_new(true);
	char dir[PATH_MAX];
	uint8_t key[KEY];
	int fds;

	if (!t)
		return;
	pathf(dir, sizeof(dir), "%s/reads", tmpdir);
	TAP_CHECK(mkdir(dir, 0755) == 0);
	fill_key(key, 0x40);
	TAP_CHECK(put(t, dir, key, MAXP, 9) == 0);
	fds = nfds();

	arm("tier_open=eio,times=1");
	TAP_EXPECT_EQ(get(t, dir, key), -EIO);
	TAP_CHECK(seen.payload_len == 0);
	TAP_CHECK(nfds() == fds);	/* the opened file was closed */
	TAP_CHECK(get(t, dir, key) == 0 && same(seen.payload, MAXP, 9));

	arm("tier_read=eio,times=1");
	TAP_EXPECT_EQ(get(t, dir, key), -EIO);
	TAP_CHECK(seen.payload_len == 0);
	TAP_CHECK(nfds() == fds);

	/* One read cut short: the rest is read, the payload exact. */
	arm("tier_read=short,times=1");
	TAP_CHECK(get(t, dir, key) == 0 && same(seen.payload, MAXP, 9));
	TAP_CHECK(kvc_fault_injected(KVC_FAULT_TIER_READ) == 1);
	TAP_CHECK(kvc_fault_hits(KVC_FAULT_TIER_READ) >= 2);

	/* Every read short: completed piece by piece, payload exact. */
	arm("tier_read=short");
	TAP_CHECK(get(t, dir, key) == 0);
	TAP_CHECK(seen.payload_len == MAXP && same(seen.payload, MAXP, 9));
	TAP_CHECK(kvc_fault_injected(KVC_FAULT_TIER_READ) >= 2);
	TAP_CHECK(nfds() == fds);
	arm(NULL);
	TAP_CHECK(kvc_tio_idle_slots(t) == 2);
	kvc_tio_destroy(t);
}

/* ---- a G3 tier ------------------------------------------------------------- */

struct tseen {
	int n, op, status;
	uint64_t payload_len;
	uint8_t payload[MAXP];
};

static struct tseen tseen;

static void tier_cb(void *arg, const struct kvc_tier_done *d)
{
	struct tseen *s = arg;

	s->n++;
	s->op = d->op;
	s->status = d->status;
	s->payload_len = 0;
	if (d->op == KVC_TIO_READ && !d->status &&
	    d->payload_len <= sizeof(s->payload)) {
		s->payload_len = d->payload_len;
		memcpy(s->payload, d->payload, d->payload_len);
	}
}

static int tier_wait(struct kvc_tier *t)
{
	tseen.n = 0;
	for (int i = 0; i < 10000 && !tseen.n; i++) {
		int ret = kvc_tier_reap(t, true, tier_cb, &tseen);

		if (ret < 0)
			return ret;
	}
	return tseen.n ? tseen.status : -ETIMEDOUT;
}

static int tier_spill(struct kvc_tier *t, uint32_t id, unsigned int seed)
{
	uint8_t *p;
	int slot, ret;

	slot = kvc_tier_spill_begin(t, &p);
	if (slot < 0)
		return slot;
	fill(p, MAXP, seed);
	ret = kvc_tier_spill_submit(t, slot, id, MAXP);
	return ret ? ret : tier_wait(t);
}

static int tier_fetch(struct kvc_tier *t, uint32_t id)
{
	int ret = kvc_tier_fetch(t, id, 3);

	return ret ? ret : tier_wait(t);
}

static bool in_g3(struct kvc_index *idx, uint32_t id)
{
	const struct kvc_entry *e = kvc_index_entry(idx, id);

	return e && (e->tiers & (1u << KVC_TIER_G3));
}

static bool ns1(void *arg, uint32_t ns)
{
	(void)arg;
	return ns == 1;
}

static void g3_faults(void)
{
	struct kvc_index *idx = NULL;
	struct kvc_tier *t = NULL;
	const struct kvc_tier_stats *st;
	char dir[PATH_MAX];
	uint8_t key[KEY];
	uint32_t id;
	int tmp, kvb, fds;
	struct kvc_tier_config c = {
		.tier = KVC_TIER_G3, .capacity = 1 << 20, .fsync = true,
		.depth = 2, .max_payload = MAXP, .node = "node-f",
		.grace_ms = 1000, .scan_interval_ms = 1000,
		.trusted_uid = (uid_t)-1,
	};

	pathf(dir, sizeof(dir), "%s/g3", tmpdir);
	TAP_CHECK(mkdir(dir, 0755) == 0);
	c.dir = dir;
	TAP_ASSERT_EQ(kvc_index_create(&idx, 64, 5), 0);
	fill_key(key, 0x60);
	TAP_CHECK(kvc_index_insert(idx, 1, key, NULL, &id) == 0);
	TAP_ASSERT_EQ(kvc_tier_open(&t, &c, idx), 0);
	TAP_CHECK(kvc_tier_recover(t, ns1, NULL) == 0);
	/* The pool's copy, which keeps the entry through failed spills. */
	TAP_CHECK(kvc_index_set(idx, id, KVC_TIER_POOL,
				(union kvc_loc){ .u64 = 0 }) == 0);
	st = kvc_tier_stats(t);
	fds = nfds();

	/* Each failing point of a spill: counted, nothing kept. */
	static const char *const specs[] = {
		"tier_write=eio,times=1", "tier_fsync=eio,times=1",
		"tier_create=enospc,times=1", "tier_dirsync=eio,times=1",
	};
	for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
		arm(specs[i]);
		TAP_CHECK(tier_spill(t, id, 1) != 0);
		TAP_CHECK(st->spill_errors == i + 1);
		TAP_CHECK(st->usage == 0 && st->blocks == 0);
		TAP_CHECK(!in_g3(idx, id));
		TAP_CHECK(!kvc_tier_spilling(t, id));
		count_files(dir, &tmp, &kvb);
		TAP_CHECK(tmp == 0 && kvb == 0);
		TAP_CHECK(nfds() == fds);
	}
	TAP_CHECK(st->last_error == -EIO);

	/* Disarmed: the spill that failed goes through. */
	arm(NULL);
	TAP_CHECK(tier_spill(t, id, 2) == 0);
	TAP_CHECK(st->spills == 1 && in_g3(idx, id));
	TAP_CHECK(st->usage == kvc_bf_file_size(MAXP));

	/* A failed read: a read error, not a miss; the block stays. */
	arm("tier_read=eio,times=1");
	TAP_EXPECT_EQ(tier_fetch(t, id), -EIO);
	TAP_CHECK(st->read_errors == 1 && st->misses == 0);
	TAP_CHECK(st->corrupt == 0);
	TAP_CHECK(in_g3(idx, id));
	TAP_CHECK(st->usage == kvc_bf_file_size(MAXP));
	arm("tier_open=enospc,times=1");
	TAP_EXPECT_EQ(tier_fetch(t, id), -ENOSPC);
	TAP_CHECK(st->read_errors == 2 && in_g3(idx, id));
	/* Short reads: completed, exact. */
	arm("tier_read=short");
	TAP_CHECK(tier_fetch(t, id) == 0);
	TAP_CHECK(tseen.payload_len == MAXP && same(tseen.payload, MAXP, 2));
	arm(NULL);
	TAP_CHECK(tier_fetch(t, id) == 0);
	TAP_CHECK(same(tseen.payload, MAXP, 2));
	TAP_CHECK(st->reads == 2 && st->corrupt == 0);
	TAP_CHECK(nfds() == fds);
	kvc_tier_close(t);
	kvc_index_destroy(idx);
}

/* ---- the manifest ----------------------------------------------------------- */

static void manifest_faults(void)
{
	struct kvc_mf_rec r[3], *back = NULL;
	char path[PATH_MAX], tmp[PATH_MAX + 8];
	size_t n = 0, bad = 0;
	int fd;

	pathf(path, sizeof(path), "%s/manifest", tmpdir);
	pathf(tmp, sizeof(tmp), "%s.new", path);
	memset(r, 0, sizeof(r));
	for (int i = 0; i < 3; i++) {
		r[i].ns = 1;
		r[i].first = true;
		r[i].size = kvc_bf_file_size(100 + (uint64_t)i);
		fill_key(r[i].key, (uint8_t)(0x70 + i));
	}
	fd = kvc_mf_open(path);
	TAP_ASSERT_GE(fd, 0);
	TAP_CHECK(kvc_mf_append(fd, &r[0]) == 0);
	/* A short append is cut off: the file keeps whole records only. */
	arm("manifest_write=short,times=1");
	TAP_EXPECT_EQ(kvc_mf_append(fd, &r[1]), -EIO);
	TAP_CHECK(kvc_fault_injected(KVC_FAULT_MANIFEST_WRITE) == 1);
	TAP_CHECK(size_of(path) == KVC_MF_REC_SIZE);
	arm("manifest_write=enospc,times=1");
	TAP_EXPECT_EQ(kvc_mf_append(fd, &r[1]), -ENOSPC);
	TAP_CHECK(size_of(path) == KVC_MF_REC_SIZE);
	arm(NULL);
	TAP_CHECK(kvc_mf_append(fd, &r[2]) == 0);
	close(fd);
	TAP_CHECK(kvc_mf_read(path, &back, &n, &bad) == 0);
	TAP_CHECK(n == 2 && bad == 0);
	TAP_CHECK(n == 2 && !memcmp(back[0].key, r[0].key, KEY) &&
		  !memcmp(back[1].key, r[2].key, KEY));
	free(back);

	/* A rewrite that cannot be made durable, or named: the old stays. */
	arm("manifest_fsync=eio,times=1");
	TAP_EXPECT_EQ(kvc_mf_rewrite(path, r, 1), -EIO);
	TAP_CHECK(size_of(path) == 2 * KVC_MF_REC_SIZE);
	TAP_CHECK(access(tmp, F_OK) == -1 && errno == ENOENT);
	arm("manifest_rename=enospc,times=1");
	TAP_EXPECT_EQ(kvc_mf_rewrite(path, r, 1), -ENOSPC);
	TAP_CHECK(size_of(path) == 2 * KVC_MF_REC_SIZE);
	TAP_CHECK(access(tmp, F_OK) == -1 && errno == ENOENT);
	arm(NULL);
	TAP_CHECK(kvc_mf_rewrite(path, r, 3) == 0);
	TAP_CHECK(size_of(path) == 3 * KVC_MF_REC_SIZE);
}

int main(void)
{
	if (scratch_make(tmpdir, sizeof(tmpdir), "kvc-fault"))
		return 1;
	TAP_RUN(spec_errors);
	TAP_RUN(counting);
	TAP_RUN(delays);
	TAP_RUN(holds);
	TAP_RUN(probability);
	TAP_RUN(tio_spill_faults);
	TAP_RUN(tio_short_writes);
	TAP_RUN(tio_read_faults);
	TAP_RUN(g3_faults);
	TAP_RUN(manifest_faults);
	scratch_remove(tmpdir);
	return tap_done();
}
