/* SPDX-License-Identifier: GPL-2.0 */
/*
 * crash_pattern: what a block holds in the crash tests (crash_test.c and
 * tests/vm-crash-tool.c), derived from its key alone so that whoever
 * reads a block back, in any process, after any restart or reboot, can
 * tell a whole, right block from a partial, stale or foreign one.
 *
 * Layout of the len bytes: the key (32 bytes), then a keyed xorshift64
 * stream, then in the last 8 bytes an FNV-1a hash of everything before.
 * A block cut short (a writer killed half way), a block of another key
 * (a stale or reused pool block) or a flipped bit all fail crash_check();
 * the hash catches damage even where a reader only samples the stream.
 */
#ifndef CRASH_PATTERN_H
#define CRASH_PATTERN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define CRASH_KEY_BYTES	32

static inline uint64_t crash_fnv(uint64_t h, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

/* The stream's state from the key; never 0, which xorshift cannot leave. */
static inline uint64_t crash_seed(const uint8_t *key)
{
	return crash_fnv(0xcbf29ce484222325ull, key, CRASH_KEY_BYTES) | 1;
}

static inline uint64_t crash_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

/* len: a multiple of 8, at least 48. */
static inline void crash_fill(uint8_t *p, const uint8_t *key, size_t len)
{
	uint64_t s = crash_seed(key), h;

	memcpy(p, key, CRASH_KEY_BYTES);
	for (size_t i = CRASH_KEY_BYTES; i < len - 8; i += 8) {
		uint64_t w = crash_next(&s);

		memcpy(p + i, &w, 8);
	}
	h = crash_fnv(0xcbf29ce484222325ull, p, len - 8);
	memcpy(p + len - 8, &h, 8);
}

/* 1 when p holds exactly what crash_fill() writes for key, else 0. */
static inline int crash_check(const uint8_t *p, const uint8_t *key,
			      size_t len)
{
	uint64_t s = crash_seed(key), h;

	if (memcmp(p, key, CRASH_KEY_BYTES))
		return 0;
	for (size_t i = CRASH_KEY_BYTES; i < len - 8; i += 8) {
		uint64_t w = crash_next(&s), got;

		memcpy(&got, p + i, 8);
		if (got != w)
			return 0;
	}
	h = crash_fnv(0xcbf29ce484222325ull, p, len - 8);
	return !memcmp(p + len - 8, &h, 8);
}

#endif /* CRASH_PATTERN_H */
