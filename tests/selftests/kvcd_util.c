// SPDX-License-Identifier: GPL-2.0
/*
 * kvcd_util: helpers of the kvcached suites (kvcd_util.h).
 */
#define _GNU_SOURCE
#include "kvcd_util.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "kvc_ioctl.h"

static int rm_one(const char *path, const struct stat *st, int type,
		  struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return type == FTW_DP ? rmdir(path) : unlink(path);
}

int wanted_mode(void)
{
	const char *m = getenv("KVC_DAEMON_MODE");

	if (m && !strcmp(m, "kernel"))
		return KVC_PROTO_MODE_KERNEL;
	if (m && !strcmp(m, "memfd"))
		return KVC_PROTO_MODE_MEMFD;
	if (!access(KVCACHE_DEVICE_PATH, F_OK) && geteuid() == 0)
		return KVC_PROTO_MODE_KERNEL;
	return KVC_PROTO_MODE_MEMFD;
}

void msleep(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void kernel_ns_cleanup(int fd, uint32_t ns)
{
	struct kvcache_block_info b[64];
	struct kvcache_query q;
	int rounds = 0;

	for (;;) {
		q = (struct kvcache_query){
			.size = sizeof(q), .count = 64, .ns_id = ns,
			.entries = (uintptr_t)b,
		};
		if (ioctl(fd, KVCACHE_IOC_QUERY, &q) || !q.count ||
		    rounds++ > 1000)
			break;
		for (uint32_t i = 0; i < q.count; i++)
			kvc_evict(fd, b[i].handle);
	}
	kvc_ns(fd, 0, ns, 0, 0, 0);
}

void fill_block(uint8_t *p, const uint8_t *key)
{
	memcpy(p, key, KVCACHE_KEY_SIZE);
	memset(p + KVCACHE_KEY_SIZE, key[0], PAYLOAD - KVCACHE_KEY_SIZE);
}

int block_ok(const uint8_t *p, const uint8_t *key)
{
	if (memcmp(p, key, KVCACHE_KEY_SIZE))
		return 0;
	for (size_t i = KVCACHE_KEY_SIZE; i < PAYLOAD; i += 97)
		if (p[i] != key[0])
			return 0;
	return 1;
}

int kernel_seal(int fd, const struct kvcache_handle *h,
		const kvc_key *keys, uint32_t n, uint32_t flags)
{
	struct kvcache_seal_entry *e = calloc(n, sizeof(*e));
	struct kvcache_batch b = {
		.size = sizeof(b), .flags = flags, .count = n,
		.entries = (uintptr_t)e,
	};
	int ret;

	if (!e)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		e[i].handle = h[i];
		e[i].payload_len = PAYLOAD;
		memcpy(e[i].key, keys[i], KVCACHE_KEY_SIZE);
	}
	ret = kvc_ioc(fd, KVCACHE_IOC_SEAL, &b);
	free(e);
	return ret;
}

int store_blocks(struct kvcc *c, uint32_t ns, const kvc_key *keys,
		 const uint8_t *parent, const struct kvcache_handle *h,
		 uint32_t n, int32_t *st)
{
	struct kvc_store_entry *e = calloc(n, sizeof(*e));
	int32_t *own = st ? NULL : calloc(n, sizeof(*own));
	int ret;

	if (!e || (!st && !own)) {
		free(e);
		free(own);
		return -ENOMEM;
	}
	if (!st)
		st = own;
	for (uint32_t i = 0; i < n; i++) {
		const uint8_t *par = i ? keys[i - 1] : parent;

		memcpy(e[i].key, keys[i], KVCACHE_KEY_SIZE);
		if (par)
			memcpy(e[i].parent, par, KVCACHE_KEY_SIZE);
		else
			e[i].flags = KVC_PROTO_STORE_FIRST;
		e[i].handle = h[i];
	}
	ret = kvcc_store(c, ns, e, n, st);
	for (uint32_t i = 0; !ret && i < n; i++)
		ret = st[i];
	free(e);
	free(own);
	return ret;
}

uint64_t wait_evictions(struct kvcc *c, uint64_t base, double timeout_s)
{
	uint64_t v = UINT64_MAX;

	for (double end = now_s() + timeout_s; now_s() < end; msleep(50)) {
		v = kvcc_stat1(c, "evictions");
		if (v == UINT64_MAX || v > base)
			break;
	}
	return v;
}

bool same_handle(struct kvcache_handle a, struct kvcache_handle b)
{
	return a.index == b.index && a.gen == b.gen;
}

int raw_error(struct kvcc *c, const void *buf, size_t len,
	      struct kvc_error *err)
{
	ssize_t n;
	int ret = kvcc_send_raw(c, buf, len);

	if (ret)
		return ret;
	n = kvcc_recv_raw(c, KVCC_TIMEOUT_MS);
	if (n <= 0)
		return n ? (int)n : -EPIPE;
	ret = kvc_proto_decode(c->rx, (size_t)n, &c->msg);
	if (ret)
		return KVCC_BROKEN;
	if (c->msg.type != KVC_MSG_ERROR)
		return KVCC_BROKEN;
	*err = c->msg.error;
	return 0;
}

void rm_rf(const char *path)
{
	nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int count_files(const char *dir, const char *prefix)
{
	struct dirent *de;
	DIR *dp = opendir(dir);
	int n = 0;

	if (!dp)
		return 0;
	while ((de = readdir(dp))) {
		char p[PATH_MAX];
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		if (lstat(p, &st))
			continue;
		if (S_ISDIR(st.st_mode))
			n += count_files(p, prefix);
		else if (!strncmp(de->d_name, prefix, strlen(prefix)))
			n++;
	}
	closedir(dp);
	return n;
}

void tier_dir(char *out, size_t len, const char *name)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(out, len, "%s/kvcd-%d.%s", tmp && *tmp ? tmp : "/tmp",
		 (int)getpid(), name);
	rm_rf(out);
	mkdir(out, 0755);
}

void g3_through(char *dir, size_t dlen, char *conf, size_t clen)
{
	tier_dir(dir, dlen, "g3");
	snprintf(conf, clen,
		 "[g3]\ndirectory = %s\ncapacity = 64M\nwrite = through\n",
		 dir);
}

int flush_pool(struct kvcc *c, uint32_t ns)
{
	struct kvc_flush_reply r;

	return kvcc_flush_tiers(c, ns, KVC_PROTO_TIER_POOL, &r);
}

uint64_t wait_stat(struct kvcc *c, const char *name, uint64_t want,
		   double timeout_s)
{
	uint64_t v = UINT64_MAX;

	for (double end = now_s() + timeout_s; now_s() < end; msleep(20)) {
		v = kvcc_stat1(c, name);
		if (v != UINT64_MAX && v >= want)
			break;
	}
	return v;
}

bool file_has(const char *path, const char *s)
{
	char line[1024];
	bool found = false;
	FILE *f = fopen(path, "re");

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, s) != NULL;
	fclose(f);
	return found;
}
