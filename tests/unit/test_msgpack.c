// SPDX-License-Identifier: GPL-2.0
/*
 * msgpack (helper/common/msgpack.h): every form the encoder writes, byte
 * for byte against the MessagePack specification, at the edges where the
 * shortest form changes; a KV event as vLLM's decoder reads it; an
 * allocation failure latched in err.
 */
#include <stdint.h>
#include <string.h>

#include "msgpack.h"
#include "tap.h"

/* m holds exactly the n bytes of want; then it is emptied. */
static void same(struct kvc_mp *m, const uint8_t *want, size_t n)
{
	TAP_EXPECT_EQ(m->len, n);
	if (m->len == n)
		TAP_EXPECT_MEMEQ(m->buf, want, n);
	kvc_mp_reset(m);
}

/* The bytes of a literal array, and how many. */
#define BYTES(...)	(const uint8_t[]){ __VA_ARGS__ }, \
			sizeof((const uint8_t[]){ __VA_ARGS__ })
#define SAME(m, ...)	same(m, BYTES(__VA_ARGS__))

static void integers(void)
{
	struct kvc_mp m;

	kvc_mp_init(&m);
	kvc_mp_uint(&m, 0);
	SAME(&m, 0x00);
	kvc_mp_uint(&m, 127);
	SAME(&m, 0x7f);
	kvc_mp_uint(&m, 128);
	SAME(&m, 0xcc, 0x80);
	kvc_mp_uint(&m, 255);
	SAME(&m, 0xcc, 0xff);
	kvc_mp_uint(&m, 256);
	SAME(&m, 0xcd, 0x01, 0x00);
	kvc_mp_uint(&m, 65535);
	SAME(&m, 0xcd, 0xff, 0xff);
	kvc_mp_uint(&m, 65536);
	SAME(&m, 0xce, 0x00, 0x01, 0x00, 0x00);
	kvc_mp_uint(&m, 0xffffffffu);
	SAME(&m, 0xce, 0xff, 0xff, 0xff, 0xff);
	kvc_mp_uint(&m, 0x100000000ull);
	SAME(&m, 0xcf, 0, 0, 0, 1, 0, 0, 0, 0);
	kvc_mp_nil(&m);
	SAME(&m, 0xc0);
	kvc_mp_double(&m, 1.5);
	SAME(&m, 0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0);
	TAP_CHECK(!m.err);
	kvc_mp_free(&m);
}

static void containers(void)
{
	static const uint8_t key[32] = { 1, 2, 3 };
	char s32[33], s256[257];
	struct kvc_mp m;

	kvc_mp_init(&m);
	kvc_mp_array(&m, 0);
	SAME(&m, 0x90);
	kvc_mp_array(&m, 15);
	SAME(&m, 0x9f);
	kvc_mp_array(&m, 16);
	SAME(&m, 0xdc, 0x00, 0x10);
	kvc_mp_array(&m, 65536);
	SAME(&m, 0xdd, 0x00, 0x01, 0x00, 0x00);
	kvc_mp_str(&m, "");
	SAME(&m, 0xa0);
	kvc_mp_str(&m, "CPU");
	SAME(&m, 0xa3, 'C', 'P', 'U');
	memset(s32, 'x', 32);
	s32[32] = '\0';
	kvc_mp_str(&m, s32);
	TAP_EXPECT_EQ(m.len, 34);
	TAP_EXPECT_EQ(m.buf[0], 0xd9);
	TAP_EXPECT_EQ(m.buf[1], 32);
	kvc_mp_reset(&m);
	memset(s256, 'y', 256);
	s256[256] = '\0';
	kvc_mp_str(&m, s256);
	TAP_EXPECT_EQ(m.len, 259);
	TAP_EXPECT_EQ(m.buf[0], 0xda);
	TAP_EXPECT_EQ(m.buf[1], 0x01);
	TAP_EXPECT_EQ(m.buf[2], 0x00);
	kvc_mp_reset(&m);
	kvc_mp_bin(&m, key, 32);
	TAP_EXPECT_EQ(m.len, 34);
	TAP_EXPECT_EQ(m.buf[0], 0xc4);
	TAP_EXPECT_EQ(m.buf[1], 32);
	TAP_EXPECT_EQ(m.buf[2], 1);
	kvc_mp_reset(&m);
	kvc_mp_bin(&m, NULL, 0);
	SAME(&m, 0xc4, 0x00);
	TAP_CHECK(!m.err);
	kvc_mp_free(&m);
}

/*
 * A batch at time 1.0 of a BlockRemoved of one 2-byte hash from medium
 * "CPU" and an AllBlocksCleared: the bytes msgspec writes for vLLM's
 * KVEventBatch (an array) and its events (tagged maps), taken from
 * msgspec.msgpack.encode() in the vLLM venv. tests/vllm decodes what
 * kvcached sends with vLLM's own decoder.
 */
static void event(void)
{
	static const uint8_t h[2] = { 0x61, 0x62 };
	struct kvc_mp m;

	kvc_mp_init(&m);
	kvc_mp_array(&m, 3);
	kvc_mp_double(&m, 1.0);
	kvc_mp_array(&m, 2);
	kvc_mp_map(&m, 3);
	kvc_mp_str(&m, "type");
	kvc_mp_str(&m, "BlockRemoved");
	kvc_mp_str(&m, "block_hashes");
	kvc_mp_array(&m, 1);
	kvc_mp_bin(&m, h, 2);
	kvc_mp_str(&m, "medium");
	kvc_mp_str(&m, "CPU");
	kvc_mp_map(&m, 1);
	kvc_mp_str(&m, "type");
	kvc_mp_str(&m, "AllBlocksCleared");
	kvc_mp_nil(&m);		/* data_parallel_rank */
	SAME(&m, 0x93, 0xcb, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0, 0x92, 0x83,
	     0xa4, 't', 'y', 'p', 'e',
	     0xac, 'B', 'l', 'o', 'c', 'k', 'R', 'e', 'm', 'o', 'v', 'e', 'd',
	     0xac, 'b', 'l', 'o', 'c', 'k', '_', 'h', 'a', 's', 'h', 'e', 's',
	     0x91, 0xc4, 0x02, 0x61, 0x62,
	     0xa6, 'm', 'e', 'd', 'i', 'u', 'm', 0xa3, 'C', 'P', 'U',
	     0x81, 0xa4, 't', 'y', 'p', 'e',
	     0xb0, 'A', 'l', 'l', 'B', 'l', 'o', 'c', 'k', 's', 'C', 'l', 'e',
	     'a', 'r', 'e', 'd', 0xc0);
	kvc_mp_map(&m, 16);
	SAME(&m, 0xde, 0x00, 0x10);
	kvc_mp_free(&m);
}

/* After a failed allocation, nothing more is written and err stays. */
static void latched_error(void)
{
	struct kvc_mp m;

	kvc_mp_init(&m);
	m.err = true;
	kvc_mp_uint(&m, 5);
	kvc_mp_str(&m, "lost");
	TAP_EXPECT_EQ(m.len, 0);
	TAP_CHECK(m.err);
	kvc_mp_reset(&m);
	TAP_CHECK(!m.err);
	kvc_mp_uint(&m, 5);
	SAME(&m, 0x05);
	kvc_mp_free(&m);
}

int main(void)
{
	TAP_RUN(integers);
	TAP_RUN(containers);
	TAP_RUN(event);
	TAP_RUN(latched_error);
	return tap_done();
}
