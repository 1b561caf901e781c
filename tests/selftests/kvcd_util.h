/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kvcd_util: the kvcached suites' helpers that need no fixture (they
 * take a client, a descriptor or a path), compiled once (kvcd_util.c)
 * into the selftests' support library. kvcd_fixture.h includes it.
 */
#ifndef KVCD_UTIL_H
#define KVCD_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/kvcache.h>

#include "kvc_client.h"

#define TPB		16		/* tokens per block */
#define PAYLOAD		4096		/* bytes written and sealed per block */
#define LOW_PCT		10
#define HIGH_PCT	20
#define MEMFD_POOL	(64ull << 20)
#define MEMFD_BS	(2ull << 20)
#define NOBODY		65534
#define MAX_CHAIN	1024		/* longest chain a test builds */

typedef uint8_t kvc_key[KVCACHE_KEY_SIZE];

int wanted_mode(void);

void msleep(unsigned int ms);

double now_s(void);

/* Kernel mode: evict what a namespace still holds, then drop it. */
void kernel_ns_cleanup(int fd, uint32_t ns);

/* What a block holds: its key, then its first byte repeated. */
void fill_block(uint8_t *p, const uint8_t *key);

int block_ok(const uint8_t *p, const uint8_t *key);

/* Kernel mode: seal n blocks with their real keys. */
int kernel_seal(int fd, const struct kvcache_handle *h,
		       const kvc_key *keys, uint32_t n, uint32_t flags);

/*
 * STORE n sealed blocks as a chain: keys[0] under parent (NULL: the first
 * block of its chain), keys[i] under keys[i-1]. Statuses into st (may be
 * NULL); returns the call's error or the first non-zero status.
 */
int store_blocks(struct kvcc *c, uint32_t ns, const kvc_key *keys,
			const uint8_t *parent, const struct kvcache_handle *h,
			uint32_t n, int32_t *st);

/* Poll the evictions counter until it exceeds base (timeout_s at most). */
uint64_t wait_evictions(struct kvcc *c, uint64_t base, double timeout_s);

bool same_handle(struct kvcache_handle a, struct kvcache_handle b);

/* Send a raw datagram; receive the answer, which must be an ERROR. */
int raw_error(struct kvcc *c, const void *buf, size_t len,
		     struct kvc_error *err);

void rm_rf(const char *path);

/* Regular files under dir whose name starts with prefix, recursively. */
int count_files(const char *dir, const char *prefix);

/* Does the text file at path hold s (a daemon's log, say)? */
bool file_has(const char *path, const char *s);

/* A fresh directory $TMPDIR/kvcd-<pid>.<name>. */
void tier_dir(char *out, size_t len, const char *name);

/* A fresh g3 directory, and the configuration of a write-through g3 on it. */
void g3_through(char *dir, size_t dlen, char *conf, size_t clen);

/* Drop the pool's copies of the namespace: what follows comes from disk. */
int flush_pool(struct kvcc *c, uint32_t ns);

/* Poll a counter until it reaches want (timeout_s at most); its value. */
uint64_t wait_stat(struct kvcc *c, const char *name, uint64_t want,
			  double timeout_s);

#endif /* KVCD_UTIL_H */
