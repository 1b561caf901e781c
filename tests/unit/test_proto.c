// SPDX-License-Identifier: GPL-2.0
/*
 * Host tests for helper/common/proto.c: every message type round trips with its
 * fields intact, golden bytes pin the wire format (written out by hand
 * from Documentation/userspace-api/protocol.md, not produced by the encoder), every
 * malformed case gets its documented errno, the encoders refuse what the
 * decoder would refuse, and a seeded fuzz loop over random and mutated
 * datagrams never crashes and only ever accepts canonical messages.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"
#include "rand.h"
#include "tap.h"

#define FUZZ_ITERATIONS	200000

static uint8_t buf[KVC_PROTO_MSG_MAX + 64];
static uint8_t buf2[KVC_PROTO_MSG_MAX + 64];

static uint64_t rng_state;

static uint64_t rnd(void)
{
	/* xorshift64: fixed seed, so a failure reproduces. */
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static uint32_t rnd_below(uint32_t n)
{
	return (uint32_t)(rnd() % n);
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void fill_key(uint8_t *k, unsigned int salt)
{
	for (int i = 0; i < KVCACHE_KEY_SIZE; i++)
		k[i] = (uint8_t)(salt * 31 + i * 7 + 1);
}

/*
 * Decode a copy in a buffer of exactly len bytes, so ASan sees any read
 * past the datagram.
 */
static int decode_exact(const void *p, size_t len, struct kvc_msg *m,
			uint8_t **copy)
{
	*copy = malloc(len ? len : 1);
	if (!*copy)
		abort();
	memcpy(*copy, p, len);
	return kvc_proto_decode(*copy, len, m);
}

/* Encode a decoded message again through the typed encoders. */
static int reencode_body(const struct kvc_msg *m, uint8_t *out, size_t size)
{
	static struct kvc_lookup_entry le[KVC_PROTO_MAX_BATCH];
	static struct kvc_store_entry se[KVC_PROTO_MAX_BATCH];
	static struct kvc_load_result lr[KVC_PROTO_MAX_BATCH];
	static struct kvcache_handle h[KVC_PROTO_MAX_BATCH];
	static struct kvc_stat st[KVC_PROTO_MAX_BATCH];
	static struct kvc_seal_entry sl[KVC_PROTO_MAX_SEAL];
	static struct kvc_ns_entry ne[KVC_PROTO_MAX_BATCH];
	static int32_t status[KVC_PROTO_MAX_BATCH];
	size_t pos = 0;
	uint32_t i;

	switch (m->type) {
	case KVC_MSG_HELLO:
		return kvc_proto_encode_hello(out, size, m->seq, &m->hello);
	case KVC_MSG_HELLO_REPLY:
		return kvc_proto_encode_hello_reply(out, size, m->seq,
						    &m->hello_reply);
	case KVC_MSG_LOOKUP:
		return kvc_proto_encode_lookup_flags(out, size, m->seq,
						     m->lookup.ns_id,
						     m->lookup.tiers,
						     m->lookup.flags,
						     m->lookup.keys,
						     m->lookup.count);
	case KVC_MSG_LOOKUP_REPLY:
		for (i = 0; i < m->lookup_reply.matched; i++)
			kvc_proto_lookup_entry(&m->lookup_reply, i, &le[i]);
		return kvc_proto_encode_lookup_reply(out, size, m->seq, le,
						     m->lookup_reply.matched);
	case KVC_MSG_STORE:
		for (i = 0; i < m->store.count; i++)
			kvc_proto_store_entry(&m->store, i, &se[i]);
		return kvc_proto_encode_store(out, size, m->seq,
					      m->store.ns_id, se,
					      m->store.count);
	case KVC_MSG_STORE_REPLY:
		for (i = 0; i < m->store_reply.count; i++)
			status[i] = kvc_proto_status(&m->store_reply, i);
		return kvc_proto_encode_store_reply(out, size, m->seq, status,
						    m->store_reply.count);
	case KVC_MSG_LOAD:
		return kvc_proto_encode_load(out, size, m->seq, m->load.ns_id,
					     m->load.keys, m->load.count);
	case KVC_MSG_LOAD_REPLY:
		for (i = 0; i < m->load_reply.count; i++)
			kvc_proto_load_result(&m->load_reply, i, &lr[i]);
		return kvc_proto_encode_load_reply(out, size, m->seq, lr,
						   m->load_reply.count);
	case KVC_MSG_RELEASE:
		for (i = 0; i < m->release.count; i++)
			kvc_proto_release_handle(&m->release, i, &h[i]);
		return kvc_proto_encode_release(out, size, m->seq, h,
						m->release.count);
	case KVC_MSG_RELEASE_REPLY:
		for (i = 0; i < m->release_reply.count; i++)
			status[i] = kvc_proto_status(&m->release_reply, i);
		return kvc_proto_encode_release_reply(out, size, m->seq,
						      status,
						      m->release_reply.count);
	case KVC_MSG_STATS:
		return kvc_proto_encode_stats(out, size, m->seq);
	case KVC_MSG_STATS_REPLY:
		for (i = 0; i < KVC_PROTO_MAX_BATCH &&
			    kvc_proto_stats_next(&m->stats_reply, &pos, &st[i]);
		     i++)
			;
		if (i != m->stats_reply.count ||
		    kvc_proto_stats_next(&m->stats_reply, &pos, &st[0]))
			return -EBADMSG;
		return kvc_proto_encode_stats_reply(out, size, m->seq, st, i);
	case KVC_MSG_NS_CREATE:
		return kvc_proto_encode_ns_create(out, size, m->seq,
						  &m->ns_create);
	case KVC_MSG_NS_CREATE_REPLY:
		return kvc_proto_encode_ns_create_reply(out, size, m->seq);
	case KVC_MSG_ALLOC:
		return kvc_proto_encode_alloc(out, size, m->seq, m->alloc.ns_id,
					      m->alloc.count);
	case KVC_MSG_ALLOC_REPLY:
		for (i = 0; i < m->alloc_reply.count; i++)
			kvc_proto_alloc_handle(&m->alloc_reply, i, &h[i]);
		return kvc_proto_encode_alloc_reply(out, size, m->seq, h,
						    m->alloc_reply.count);
	case KVC_MSG_SEAL:
		for (i = 0; i < m->seal.count; i++)
			kvc_proto_seal_entry(&m->seal, i, &sl[i]);
		return kvc_proto_encode_seal(out, size, m->seq, sl,
					     m->seal.count);
	case KVC_MSG_SEAL_REPLY:
		for (i = 0; i < m->seal_reply.count; i++)
			status[i] = kvc_proto_status(&m->seal_reply, i);
		return kvc_proto_encode_seal_reply(out, size, m->seq, status,
						   m->seal_reply.count);
	case KVC_MSG_EVICT:
		return kvc_proto_encode_evict(out, size, m->seq,
					      m->evict.ns_id, m->evict.keys,
					      m->evict.count);
	case KVC_MSG_EVICT_REPLY:
		for (i = 0; i < m->evict_reply.count; i++)
			status[i] = kvc_proto_status(&m->evict_reply, i);
		return kvc_proto_encode_evict_reply(out, size, m->seq, status,
						    m->evict_reply.count);
	case KVC_MSG_FLUSH:
		return kvc_proto_encode_flush_tiers(out, size, m->seq,
						    m->flush.ns_id,
						    m->flush.tiers);
	case KVC_MSG_FLUSH_REPLY:
		return kvc_proto_encode_flush_reply(out, size, m->seq,
						    &m->flush_reply);
	case KVC_MSG_NS_LIST:
		return kvc_proto_encode_ns_list(out, size, m->seq,
						m->ns_list.start);
	case KVC_MSG_NS_LIST_REPLY:
		for (i = 0; i < m->ns_list_reply.count; i++)
			kvc_proto_ns_entry(&m->ns_list_reply, i, &ne[i]);
		return kvc_proto_encode_ns_list_reply(out, size, m->seq,
						      m->ns_list_reply.next,
						      ne,
						      m->ns_list_reply.count);
	case KVC_MSG_NS_SALT:
		return kvc_proto_encode_ns_salt(out, size, m->seq, &m->ns_salt);
	case KVC_MSG_NS_SALT_REPLY:
		return kvc_proto_encode_ns_salt_reply(out, size, m->seq,
						      &m->ns_salt_reply);
	case KVC_MSG_ERROR: {
		/* The message is not NUL-terminated on the wire. */
		char msg[KVC_PROTO_ERRMSG_MAX + 1];

		memcpy(msg, m->error.msg, m->error.msg_len);
		msg[m->error.msg_len] = '\0';
		return kvc_proto_encode_error(out, size, m->error.error,
					      m->error.bad_seq,
					      m->error.bad_type, msg);
	}
	}
	return -EOPNOTSUPP;
}

/*
 * The typed encoders write each message's lowest version; a peer that
 * negotiated a higher one restamps it, as the daemon and library do.
 */
static int reencode(const struct kvc_msg *m, uint8_t *out, size_t size)
{
	return kvc_proto_set_version(out, reencode_body(m, out, size),
				     m->version);
}

/* Decode p and encode the result again: must give back the same bytes. */
static int same_after_roundtrip(const uint8_t *p, int len)
{
	struct kvc_msg m;
	uint8_t *copy;
	int ret, n;

	if (len < 0)
		return 0;
	ret = decode_exact(p, (size_t)len, &m, &copy);
	n = ret ? ret : reencode(&m, buf2, sizeof(buf2));
	free(copy);
	if (ret) {
		printf("# decode: %d (%s)\n", ret, m.reason);
		return 0;
	}
	return n == len && !memcmp(p, buf2, (size_t)len);
}

/* ---- round trips ----------------------------------------------------- */

static void hello_roundtrip(void)
{
	struct kvc_hello h = { .min_version = 1, .max_version = 3,
			       .caps = KVC_PROTO_CAP_MEMFD | (1ull << 40) };
	struct kvc_hello_reply r = {
		.version = 1, .mode = KVC_PROTO_MODE_MEMFD, .max_batch = 512,
		.caps = KVC_PROTO_CAP_MEMFD, .block_size = 2u << 20,
		.nr_blocks = 1ull << 33,
	};
	struct kvc_msg m;
	int n;

	n = kvc_proto_encode_hello(buf, sizeof(buf), 77, &h);
	TAP_CHECK(n == 40);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.type == KVC_MSG_HELLO && m.seq == 77 && m.version == 1);
	TAP_CHECK(m.reason == NULL);
	TAP_CHECK(m.hello.min_version == 1 && m.hello.max_version == 3);
	/* An unknown capability of a newer client survives decoding. */
	TAP_CHECK(m.hello.caps == (KVC_PROTO_CAP_MEMFD | (1ull << 40)));
	TAP_CHECK(same_after_roundtrip(buf, n));

	n = kvc_proto_encode_hello_reply(buf, sizeof(buf), 77, &r);
	TAP_CHECK(n == 56);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.type == KVC_MSG_HELLO_REPLY && m.seq == 77);
	TAP_CHECK(!memcmp(&m.hello_reply, &r, sizeof(r)));
	TAP_CHECK(same_after_roundtrip(buf, n));
}

static void lookup_roundtrip(void)
{
	static uint8_t keys[KVC_PROTO_MAX_BATCH][KVCACHE_KEY_SIZE];
	struct kvc_lookup_entry e[3] = {
		{ .tiers = KVC_PROTO_TIER_POOL |
			   KVC_PROTO_TIER_G3,
		  .handle = { .index = 0xdeadbeef, .gen = 0xfeedface } },
		{ .tiers = KVC_PROTO_TIER_G4 },
		{ .tiers = KVC_PROTO_TIERS_ALL, .handle = { .index = 1 } },
	}, got;
	struct kvc_msg m;
	int n;

	for (int i = 0; i < KVC_PROTO_MAX_BATCH; i++)
		fill_key(keys[i], (unsigned int)i);
	n = kvc_proto_encode_lookup(buf, sizeof(buf), 5, KVCACHE_NS_MAX,
				    KVC_PROTO_TIERS_ALL, keys[0], 3);
	TAP_CHECK(n == 40 + 3 * 32);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.type == KVC_MSG_LOOKUP && m.lookup.count == 3);
	TAP_CHECK(m.lookup.ns_id == KVCACHE_NS_MAX);
	TAP_CHECK(m.lookup.tiers == KVC_PROTO_TIERS_ALL);
	/* Keys are not copied: they point into the datagram. */
	TAP_CHECK(m.lookup.keys == buf + 40);
	TAP_CHECK(!memcmp(m.lookup.keys, keys, 3 * 32));
	TAP_CHECK(m.lookup.flags == 0);
	TAP_CHECK(same_after_roundtrip(buf, n));

	/* CONTINUE is the one flag; offset 36 holds it. */
	n = kvc_proto_encode_lookup_flags(buf, sizeof(buf), 5, 1, 1,
					  KVC_PROTO_LOOKUP_CONTINUE, keys[0], 2);
	TAP_CHECK(n == 40 + 2 * 32 && buf[36] == 1 && !buf[37] && !buf[38] &&
		  !buf[39]);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.lookup.flags == KVC_PROTO_LOOKUP_CONTINUE);
	TAP_CHECK(same_after_roundtrip(buf, n));
	put32(buf + 36, 2);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == -EINVAL);
	TAP_CHECK(kvc_proto_encode_lookup_flags(buf, sizeof(buf), 5, 1, 1, 2,
						keys[0], 2) == -EINVAL);

	/* The largest batch fits one message. */
	n = kvc_proto_encode_lookup(buf, sizeof(buf), 5, 1, 1, keys[0],
				    KVC_PROTO_MAX_BATCH);
	TAP_CHECK(n == 40 + KVC_PROTO_MAX_BATCH * 32);
	TAP_CHECK(same_after_roundtrip(buf, n));

	n = kvc_proto_encode_lookup_reply(buf, sizeof(buf), 5, e, 3);
	TAP_CHECK(n == 32 + 3 * 16);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.type == KVC_MSG_LOOKUP_REPLY);
	TAP_CHECK(m.lookup_reply.matched == 3);
	for (uint32_t i = 0; i < 3; i++) {
		kvc_proto_lookup_entry(&m.lookup_reply, i, &got);
		TAP_CHECK(got.tiers == e[i].tiers);
		TAP_CHECK(got.handle.index == e[i].handle.index);
		TAP_CHECK(got.handle.gen == e[i].handle.gen);
	}
	TAP_CHECK(same_after_roundtrip(buf, n));

	/* No match at all is a valid answer. */
	n = kvc_proto_encode_lookup_reply(buf, sizeof(buf), 6, NULL, 0);
	TAP_CHECK(n == 32);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.lookup_reply.matched == 0);
	TAP_CHECK(same_after_roundtrip(buf, n));
}

static void store_roundtrip(void)
{
	static struct kvc_store_entry e[KVC_PROTO_MAX_STORE + 1];
	struct kvc_store_entry got;
	int32_t st[3] = { 0, -EACCES, -ESTALE };
	struct kvc_msg m;
	int n;

	for (int i = 0; i <= KVC_PROTO_MAX_STORE; i++) {
		fill_key(e[i].key, (unsigned int)i + 100);
		if (i)
			memcpy(e[i].parent, e[i - 1].key, KVCACHE_KEY_SIZE);
		else
			e[i].flags = KVC_PROTO_STORE_FIRST;
		e[i].handle.index = (uint32_t)i * 3;
		e[i].handle.gen = 0x80000000u + (uint32_t)i;
	}
	n = kvc_proto_encode_store(buf, sizeof(buf), 9, 42, e, 3);
	TAP_CHECK(n == 32 + 3 * 80);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.type == KVC_MSG_STORE && m.store.ns_id == 42);
	TAP_CHECK(m.store.count == 3);
	for (uint32_t i = 0; i < 3; i++) {
		kvc_proto_store_entry(&m.store, i, &got);
		TAP_CHECK(!memcmp(&got, &e[i], sizeof(got)));
	}
	TAP_CHECK(same_after_roundtrip(buf, n));
	TAP_CHECK(buf[4] == 1);		/* nothing that needs more */

	/*
	 * SEAL: the entry's block is sealed by the STORE, with the length
	 * given; the message needs version 3, and says so.
	 */
	e[1].flags |= KVC_PROTO_STORE_SEAL;
	e[1].payload_len = 65536;
	n = kvc_proto_encode_store(buf, sizeof(buf), 9, 42, e, 3);
	TAP_CHECK(n == 32 + 3 * 80 && buf[4] == KVC_PROTO_VERSION_STORE_SEAL);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.version == KVC_PROTO_VERSION_STORE_SEAL);
	for (uint32_t i = 0; i < 3; i++) {
		kvc_proto_store_entry(&m.store, i, &got);
		TAP_CHECK(!memcmp(&got, &e[i], sizeof(got)));
	}
	TAP_CHECK(same_after_roundtrip(buf, n));
	/* Never restamped below what it needs. */
	TAP_CHECK(kvc_proto_set_version(buf, n, 2) == n &&
		  buf[4] == KVC_PROTO_VERSION_STORE_SEAL);
	e[1].flags &= ~KVC_PROTO_STORE_SEAL;
	e[1].payload_len = 0;

	/* Exactly KVC_PROTO_MAX_STORE entries fit in the size limit. */
	n = kvc_proto_encode_store(buf, sizeof(buf), 9, 42, e,
				   KVC_PROTO_MAX_STORE);
	TAP_CHECK(n > 0 && n <= KVC_PROTO_MSG_MAX);
	TAP_CHECK(n + 80 > KVC_PROTO_MSG_MAX);
	TAP_CHECK(same_after_roundtrip(buf, n));
	TAP_CHECK(kvc_proto_encode_store(buf, sizeof(buf), 9, 42, e,
					 KVC_PROTO_MAX_STORE + 1) == -EINVAL);

	n = kvc_proto_encode_store_reply(buf, sizeof(buf), 9, st, 3);
	TAP_CHECK(n == 32 + 3 * 4);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.type == KVC_MSG_STORE_REPLY && m.store_reply.count == 3);
	for (uint32_t i = 0; i < 3; i++)
		TAP_CHECK(kvc_proto_status(&m.store_reply, i) == st[i]);
	TAP_CHECK(same_after_roundtrip(buf, n));
}

static void load_release_roundtrip(void)
{
	uint8_t keys[2][KVCACHE_KEY_SIZE];
	struct kvc_load_result r[2] = {
		{ .status = 0, .handle = { .index = 12, .gen = 34 } },
		{ .status = -ENOENT },
	}, got;
	struct kvcache_handle h[2] = { { 1, 2 }, { 0xffffffffu, 0 } }, gh;
	int32_t st[2] = { 0, -ESTALE };
	struct kvc_msg m;
	int n;

	fill_key(keys[0], 1);
	fill_key(keys[1], 2);
	n = kvc_proto_encode_load(buf, sizeof(buf), 11, 3, keys[0], 2);
	TAP_CHECK(n == 32 + 2 * 32);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.type == KVC_MSG_LOAD && m.load.ns_id == 3);
	TAP_CHECK(m.load.count == 2 && !memcmp(m.load.keys, keys, 64));
	TAP_CHECK(same_after_roundtrip(buf, n));

	n = kvc_proto_encode_load_reply(buf, sizeof(buf), 11, r, 2);
	TAP_CHECK(n == 32 + 2 * 16);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.type == KVC_MSG_LOAD_REPLY && m.load_reply.count == 2);
	for (uint32_t i = 0; i < 2; i++) {
		kvc_proto_load_result(&m.load_reply, i, &got);
		TAP_CHECK(got.status == r[i].status);
		TAP_CHECK(got.handle.index == r[i].handle.index &&
			  got.handle.gen == r[i].handle.gen);
	}
	TAP_CHECK(same_after_roundtrip(buf, n));

	n = kvc_proto_encode_release(buf, sizeof(buf), 12, h, 2);
	TAP_CHECK(n == 32 + 2 * 8);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.type == KVC_MSG_RELEASE && m.release.count == 2);
	kvc_proto_release_handle(&m.release, 1, &gh);
	TAP_CHECK(gh.index == 0xffffffffu && gh.gen == 0);
	TAP_CHECK(same_after_roundtrip(buf, n));

	n = kvc_proto_encode_release_reply(buf, sizeof(buf), 12, st, 2);
	TAP_CHECK(n == 32 + 2 * 4);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.type == KVC_MSG_RELEASE_REPLY);
	TAP_CHECK(kvc_proto_status(&m.release_reply, 1) == -ESTALE);
	TAP_CHECK(same_after_roundtrip(buf, n));
}

static void stats_error_roundtrip(void)
{
	struct kvc_stat st[3] = {
		{ "pool.free_blocks", 16, 1000 },
		{ "g3-hits", 7, 1ull << 63 },
		{ "x", 1, 0 },
	}, got;
	struct kvc_msg m;
	size_t pos = 0;
	int n, i;

	n = kvc_proto_encode_stats(buf, sizeof(buf), 13);
	TAP_CHECK(n == 24);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.type == KVC_MSG_STATS && m.seq == 13);
	TAP_CHECK(same_after_roundtrip(buf, n));

	n = kvc_proto_encode_stats_reply(buf, sizeof(buf), 13, st, 3);
	TAP_CHECK(n == 32 + 3 * 10 + 16 + 7 + 1);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.type == KVC_MSG_STATS_REPLY && m.stats_reply.count == 3);
	for (i = 0; kvc_proto_stats_next(&m.stats_reply, &pos, &got); i++) {
		TAP_CHECK(i < 3);
		if (i >= 3)
			break;
		TAP_CHECK(got.name_len == st[i].name_len);
		TAP_CHECK(!memcmp(got.name, st[i].name, got.name_len));
		TAP_CHECK(got.value == st[i].value);
	}
	TAP_CHECK(i == 3);
	TAP_CHECK(same_after_roundtrip(buf, n));

	n = kvc_proto_encode_error(buf, sizeof(buf), -EACCES, 99,
				   KVC_MSG_STORE, "namespace 7: no write");
	TAP_CHECK(n == 36 + 21);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.type == KVC_MSG_ERROR && m.seq == 99);
	TAP_CHECK(m.error.error == -EACCES && m.error.bad_seq == 99);
	TAP_CHECK(m.error.bad_type == KVC_MSG_STORE);
	TAP_CHECK(m.error.msg_len == 21 &&
		  !memcmp(m.error.msg, "namespace 7: no write", 21));
	TAP_CHECK(same_after_roundtrip(buf, n));
}

static void ns_alloc_seal_roundtrip(void)
{
	static struct kvc_seal_entry e[KVC_PROTO_MAX_SEAL + 1];
	static struct kvcache_handle h[KVC_PROTO_MAX_BATCH + 1];
	struct kvc_ns_create c = { .ns_id = KVCACHE_NS_MAX, .uid = 60001,
				   .gid = 0xffffffffu, .mode = 0777 };
	struct kvc_seal_entry got;
	struct kvcache_handle gh;
	int32_t st[3] = { 0, -EBUSY, -EINVAL };
	struct kvc_msg m;
	int n;

	n = kvc_proto_encode_ns_create(buf, sizeof(buf), 21, &c);
	TAP_CHECK(n == 44);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.type == KVC_MSG_NS_CREATE && m.seq == 21);
	TAP_CHECK(!memcmp(&m.ns_create, &c, sizeof(c)));
	TAP_CHECK(same_after_roundtrip(buf, n));
	c.mode = 0;
	n = kvc_proto_encode_ns_create(buf, sizeof(buf), 21, &c);
	TAP_CHECK(n == 44 && same_after_roundtrip(buf, n));

	n = kvc_proto_encode_ns_create_reply(buf, sizeof(buf), 21);
	TAP_CHECK(n == 24);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.type == KVC_MSG_NS_CREATE_REPLY && m.seq == 21);
	TAP_CHECK(same_after_roundtrip(buf, n));

	n = kvc_proto_encode_alloc(buf, sizeof(buf), 22, 7,
				   KVC_PROTO_MAX_BATCH);
	TAP_CHECK(n == 32);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.type == KVC_MSG_ALLOC && m.alloc.ns_id == 7);
	TAP_CHECK(m.alloc.count == KVC_PROTO_MAX_BATCH);
	TAP_CHECK(same_after_roundtrip(buf, n));

	for (uint32_t i = 0; i <= KVC_PROTO_MAX_BATCH; i++) {
		h[i].index = i * 5;
		h[i].gen = 0xfffffff0u + i;
	}
	n = kvc_proto_encode_alloc_reply(buf, sizeof(buf), 22, h, 3);
	TAP_CHECK(n == 32 + 3 * 8);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.type == KVC_MSG_ALLOC_REPLY && m.alloc_reply.count == 3);
	for (uint32_t i = 0; i < 3; i++) {
		kvc_proto_alloc_handle(&m.alloc_reply, i, &gh);
		TAP_CHECK(gh.index == h[i].index && gh.gen == h[i].gen);
	}
	TAP_CHECK(same_after_roundtrip(buf, n));
	/* The largest ALLOC reply fits one message. */
	n = kvc_proto_encode_alloc_reply(buf, sizeof(buf), 22, h,
					 KVC_PROTO_MAX_BATCH);
	TAP_CHECK(n == 32 + KVC_PROTO_MAX_BATCH * 8);
	TAP_CHECK(same_after_roundtrip(buf, n));
	TAP_CHECK(kvc_proto_encode_alloc_reply(buf, sizeof(buf), 22, h,
					       KVC_PROTO_MAX_BATCH + 1) ==
		  -EINVAL);

	for (uint32_t i = 0; i <= KVC_PROTO_MAX_SEAL; i++) {
		fill_key(e[i].key, i + 200);
		e[i].handle.index = i;
		e[i].handle.gen = 0x7fffffffu + i;
		e[i].payload_len = 1 + i * 4096;
		e[i].flags = i & 1 ? KVC_PROTO_SEAL_KEEP_PIN : 0;
	}
	n = kvc_proto_encode_seal(buf, sizeof(buf), 23, e, 3);
	TAP_CHECK(n == 32 + 3 * 48);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.type == KVC_MSG_SEAL && m.seal.count == 3);
	for (uint32_t i = 0; i < 3; i++) {
		kvc_proto_seal_entry(&m.seal, i, &got);
		TAP_CHECK(!memcmp(&got, &e[i], sizeof(got)));
	}
	TAP_CHECK(same_after_roundtrip(buf, n));

	/* SEAL's limit is the batch limit; such a message fits easily. */
	n = kvc_proto_encode_seal(buf, sizeof(buf), 23, e,
				  KVC_PROTO_MAX_SEAL);
	TAP_CHECK(n == 32 + KVC_PROTO_MAX_SEAL * 48);
	TAP_CHECK(n <= KVC_PROTO_MSG_MAX);
	TAP_CHECK(same_after_roundtrip(buf, n));
	TAP_CHECK(kvc_proto_encode_seal(buf, sizeof(buf), 23, e,
					KVC_PROTO_MAX_SEAL + 1) == -EINVAL);
	/* max_batch's bound is the smallest per-type limit. */
	TAP_CHECK(KVC_PROTO_MAX_STORE <= KVC_PROTO_MAX_SEAL);

	n = kvc_proto_encode_seal_reply(buf, sizeof(buf), 23, st, 3);
	TAP_CHECK(n == 32 + 3 * 4);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.type == KVC_MSG_SEAL_REPLY && m.seal_reply.count == 3);
	for (uint32_t i = 0; i < 3; i++)
		TAP_CHECK(kvc_proto_status(&m.seal_reply, i) == st[i]);
	TAP_CHECK(same_after_roundtrip(buf, n));
}

static void admin_roundtrip(void)
{
	static uint8_t keys[KVC_PROTO_MAX_BATCH + 1][KVCACHE_KEY_SIZE];
	static struct kvc_ns_entry ne[KVC_PROTO_MAX_BATCH + 1];
	struct kvc_flush_reply fr = { .evicted = 0x123456789abcdefull,
				      .busy = UINT64_MAX };
	struct kvc_ns_entry got;
	int32_t st[3] = { 0, -ENOENT, -EBUSY };
	struct kvc_msg m;
	int n;

	for (uint32_t i = 0; i <= KVC_PROTO_MAX_BATCH; i++)
		fill_key(keys[i], i + 300);
	n = kvc_proto_encode_evict(buf, sizeof(buf), 31, KVCACHE_NS_MAX,
				   keys[0], 3);
	TAP_CHECK(n == 32 + 3 * 32);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.type == KVC_MSG_EVICT && m.seq == 31);
	TAP_CHECK(m.evict.ns_id == KVCACHE_NS_MAX && m.evict.count == 3);
	/* Keys are not copied: they point into the datagram. */
	TAP_CHECK(m.evict.keys == buf + 32);
	TAP_CHECK(!memcmp(m.evict.keys, keys, 3 * 32));
	TAP_CHECK(same_after_roundtrip(buf, n));
	/* The largest batch fits one message. */
	n = kvc_proto_encode_evict(buf, sizeof(buf), 31, 1, keys[0],
				   KVC_PROTO_MAX_BATCH);
	TAP_CHECK(n == 32 + KVC_PROTO_MAX_BATCH * 32);
	TAP_CHECK(same_after_roundtrip(buf, n));
	TAP_CHECK(kvc_proto_encode_evict(buf, sizeof(buf), 31, 1, keys[0],
					 KVC_PROTO_MAX_BATCH + 1) == -EINVAL);

	n = kvc_proto_encode_evict_reply(buf, sizeof(buf), 31, st, 3);
	TAP_CHECK(n == 32 + 3 * 4);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.type == KVC_MSG_EVICT_REPLY && m.evict_reply.count == 3);
	for (uint32_t i = 0; i < 3; i++)
		TAP_CHECK(kvc_proto_status(&m.evict_reply, i) == st[i]);
	TAP_CHECK(same_after_roundtrip(buf, n));

	/* FLUSH: one namespace, or all of them. */
	n = kvc_proto_encode_flush(buf, sizeof(buf), 32, KVCACHE_NS_MAX);
	TAP_CHECK(n == 32);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.type == KVC_MSG_FLUSH && m.seq == 32);
	TAP_CHECK(m.flush.ns_id == KVCACHE_NS_MAX);
	TAP_CHECK(same_after_roundtrip(buf, n));
	n = kvc_proto_encode_flush(buf, sizeof(buf), 32, KVC_PROTO_NS_ALL);
	TAP_CHECK(n == 32);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.flush.ns_id == KVC_PROTO_NS_ALL);
	TAP_CHECK(same_after_roundtrip(buf, n));

	n = kvc_proto_encode_flush_reply(buf, sizeof(buf), 32, &fr);
	TAP_CHECK(n == 40);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.type == KVC_MSG_FLUSH_REPLY);
	TAP_CHECK(m.flush_reply.evicted == fr.evicted);
	TAP_CHECK(m.flush_reply.busy == fr.busy);
	TAP_CHECK(same_after_roundtrip(buf, n));

	/* NS_LIST: from the first (0 or 1), or from any id up to the last. */
	for (uint32_t i = 0; i < 4; i++) {
		static const uint32_t starts[] = { 0, 1, 12345,
						   KVCACHE_NS_MAX };

		n = kvc_proto_encode_ns_list(buf, sizeof(buf), 33, starts[i]);
		TAP_CHECK(n == 32);
		TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
		TAP_CHECK(m.type == KVC_MSG_NS_LIST && m.seq == 33);
		TAP_CHECK(m.ns_list.start == starts[i]);
		TAP_CHECK(same_after_roundtrip(buf, n));
	}
	TAP_CHECK(kvc_proto_encode_ns_list(buf, sizeof(buf), 33,
					   KVCACHE_NS_MAX + 1) == -EINVAL);

	for (uint32_t i = 0; i <= KVC_PROTO_MAX_BATCH; i++) {
		ne[i].ns_id = 1 + i * 63;	/* ascending, up to 64513 */
		ne[i].uid = 0xfffffff0u + i;
		ne[i].gid = i;
		ne[i].mode = i % (KVC_PROTO_NS_MODE_MAX + 1);
		ne[i].blocks = (uint64_t)i << 40 | i;
	}
	n = kvc_proto_encode_ns_list_reply(buf, sizeof(buf), 33, 0, ne, 3);
	TAP_CHECK(n == 32 + 3 * 24);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.type == KVC_MSG_NS_LIST_REPLY);
	TAP_CHECK(m.ns_list_reply.count == 3 && m.ns_list_reply.next == 0);
	for (uint32_t i = 0; i < 3; i++) {
		kvc_proto_ns_entry(&m.ns_list_reply, i, &got);
		TAP_CHECK(!memcmp(&got, &ne[i], sizeof(got)));
	}
	TAP_CHECK(same_after_roundtrip(buf, n));
	/* A page with more to come: next is above the last entry. */
	n = kvc_proto_encode_ns_list_reply(buf, sizeof(buf), 33,
					   ne[2].ns_id + 1, ne, 3);
	TAP_CHECK(n == 32 + 3 * 24);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.ns_list_reply.next == ne[2].ns_id + 1);
	TAP_CHECK(same_after_roundtrip(buf, n));
	n = kvc_proto_encode_ns_list_reply(buf, sizeof(buf), 33,
					   KVCACHE_NS_MAX, ne, 3);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.ns_list_reply.next == KVCACHE_NS_MAX);
	TAP_CHECK(same_after_roundtrip(buf, n));
	/* No namespace at all is a valid answer, and a complete one. */
	n = kvc_proto_encode_ns_list_reply(buf, sizeof(buf), 33, 0, NULL, 0);
	TAP_CHECK(n == 32);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.ns_list_reply.count == 0 && m.ns_list_reply.next == 0);
	TAP_CHECK(same_after_roundtrip(buf, n));
	/* The largest NS_LIST reply fits one message. */
	n = kvc_proto_encode_ns_list_reply(buf, sizeof(buf), 33,
					   ne[KVC_PROTO_MAX_BATCH].ns_id, ne,
					   KVC_PROTO_MAX_BATCH);
	TAP_CHECK(n == 32 + KVC_PROTO_MAX_BATCH * 24);
	TAP_CHECK(n <= KVC_PROTO_MSG_MAX);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.ns_list_reply.next == ne[KVC_PROTO_MAX_BATCH].ns_id);
	TAP_CHECK(same_after_roundtrip(buf, n));
	TAP_CHECK(kvc_proto_encode_ns_list_reply(buf, sizeof(buf), 33, 0, ne,
						 KVC_PROTO_MAX_BATCH + 1) ==
		  -EINVAL);
}

/*
 * Paging: every namespace there can be, listed page by page the way a
 * client does (start 0, then each reply's next), comes back exactly
 * once and in order, in 65535 / 1024 rounded up = 64 replies.
 */
static void ns_list_paging(void)
{
	static struct kvc_ns_entry ne[KVC_PROTO_MAX_BATCH];
	struct kvc_ns_entry got;
	struct kvc_msg m;
	uint32_t start = 0, seen = 0, pages = 0;
	int n, ok = 1;

	do {
		uint32_t first, count, next;

		/* The client's request. */
		n = kvc_proto_encode_ns_list(buf, sizeof(buf), pages, start);
		if (n != 32 || kvc_proto_decode(buf, (size_t)n, &m) ||
		    m.ns_list.start != start) {
			ok = 0;
			break;
		}
		/* The daemon's page: ids from start, at most 1024. */
		first = start ? start : 1;
		count = KVCACHE_NS_MAX - first + 1;
		if (count > KVC_PROTO_MAX_BATCH)
			count = KVC_PROTO_MAX_BATCH;
		for (uint32_t i = 0; i < count; i++)
			ne[i] = (struct kvc_ns_entry){ .ns_id = first + i };
		next = first + count <= KVCACHE_NS_MAX ? first + count : 0;
		n = kvc_proto_encode_ns_list_reply(buf, sizeof(buf), pages,
						   next, ne, count);
		/* The client reads it and asks for the next page. */
		if (n < 0 || kvc_proto_decode(buf, (size_t)n, &m)) {
			ok = 0;
			break;
		}
		for (uint32_t i = 0; i < m.ns_list_reply.count; i++) {
			kvc_proto_ns_entry(&m.ns_list_reply, i, &got);
			if (got.ns_id != ++seen)
				ok = 0;
		}
		start = m.ns_list_reply.next;
		pages++;
	} while (start && ok && pages < 100);
	TAP_CHECK(ok);
	TAP_CHECK(seen == KVCACHE_NS_MAX);
	TAP_CHECK(pages == (KVCACHE_NS_MAX + KVC_PROTO_MAX_BATCH - 1) /
			   KVC_PROTO_MAX_BATCH);
}

/* ---- golden bytes ---------------------------------------------------- */

static void golden_hello(void)
{
	static const uint8_t want[] = {
		'K', 'V', 'C', 'P',		/* magic */
		0x01, 0x00,			/* version 1 */
		0x01, 0x00,			/* type HELLO */
		0x04, 0x03, 0x02, 0x01,		/* seq 0x01020304 */
		0x28, 0x00, 0x00, 0x00,		/* length 40 */
		0x00, 0x00, 0x00, 0x00,		/* flags */
		0x00, 0x00, 0x00, 0x00,		/* reserved */
		0x01, 0x00,			/* min_version 1 */
		0x02, 0x00,			/* max_version 2 */
		0x00, 0x00, 0x00, 0x00,		/* reserved */
		0x03, 0x00, 0x00, 0x00,		/* caps DEVICE|MEMFD ... */
		0x00, 0x00, 0x00, 0x80,		/* ... | bit 63 */
	};
	static const uint8_t want_reply[] = {
		'K', 'V', 'C', 'P', 0x01, 0x00, 0x01, 0x80,
		0x04, 0x03, 0x02, 0x01, 0x38, 0x00, 0x00, 0x00,
		0, 0, 0, 0, 0, 0, 0, 0,
		0x01, 0x00,			/* version 1 */
		0x01, 0x00,			/* mode kernel */
		0x00, 0x02, 0x00, 0x00,		/* max_batch 512 */
		0x01, 0, 0, 0, 0, 0, 0, 0,	/* caps DEVICE */
		0x00, 0x00, 0x20, 0, 0, 0, 0, 0,	/* block_size 2 MiB */
		0x78, 0x56, 0x34, 0x12, 0x01, 0, 0, 0,	/* nr_blocks */
	};
	struct kvc_hello h = { 1, 2, KVC_PROTO_CAP_ALL | (1ull << 63) };
	struct kvc_hello_reply r = {
		.version = 1, .mode = KVC_PROTO_MODE_KERNEL, .max_batch = 512,
		.caps = KVC_PROTO_CAP_DEVICE, .block_size = 2u << 20,
		.nr_blocks = 0x112345678ull,
	};
	struct kvc_msg m;
	int n;

	n = kvc_proto_encode_hello(buf, sizeof(buf), 0x01020304, &h);
	TAP_CHECK(n == (int)sizeof(want) && !memcmp(buf, want, sizeof(want)));
	TAP_CHECK(kvc_proto_decode(want, sizeof(want), &m) == 0);
	TAP_CHECK(m.hello.max_version == 2 && m.hello.caps == h.caps);

	n = kvc_proto_encode_hello_reply(buf, sizeof(buf), 0x01020304, &r);
	TAP_CHECK(n == (int)sizeof(want_reply) &&
		  !memcmp(buf, want_reply, sizeof(want_reply)));
	TAP_CHECK(kvc_proto_decode(want_reply, sizeof(want_reply), &m) == 0);
	TAP_CHECK(m.hello_reply.nr_blocks == 0x112345678ull);
}

static void golden_lookup(void)
{
	static const uint8_t want[] = {
		'K', 'V', 'C', 'P', 0x01, 0x00,
		0x02, 0x00,			/* type LOOKUP */
		0x07, 0x00, 0x00, 0x00,		/* seq 7 */
		0x68, 0x00, 0x00, 0x00,		/* length 104 */
		0, 0, 0, 0, 0, 0, 0, 0,
		0x34, 0x12, 0x00, 0x00,		/* ns_id 0x1234 */
		0x05, 0x00, 0x00, 0x00,		/* tiers pool|g4 */
		0x02, 0x00, 0x00, 0x00,		/* count 2 */
		0x00, 0x00, 0x00, 0x00,		/* reserved */
		/* key 0: 0x00..0x1f, as bytes */
		0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
		0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
		0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17,
		0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,
		/* key 1: 0xff..0xe0 */
		0xff, 0xfe, 0xfd, 0xfc, 0xfb, 0xfa, 0xf9, 0xf8,
		0xf7, 0xf6, 0xf5, 0xf4, 0xf3, 0xf2, 0xf1, 0xf0,
		0xef, 0xee, 0xed, 0xec, 0xeb, 0xea, 0xe9, 0xe8,
		0xe7, 0xe6, 0xe5, 0xe4, 0xe3, 0xe2, 0xe1, 0xe0,
	};
	static const uint8_t want_reply[] = {
		'K', 'V', 'C', 'P', 0x01, 0x00, 0x02, 0x80,
		0x07, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00,
		0, 0, 0, 0, 0, 0, 0, 0,
		0x02, 0x00, 0x00, 0x00,		/* matched 2 */
		0x00, 0x00, 0x00, 0x00,		/* reserved */
		0x03, 0x00, 0x00, 0x00,		/* tiers pool|g3 */
		0x00, 0x00, 0x00, 0x00,		/* reserved */
		0x0d, 0x0c, 0x0b, 0x0a,		/* index 0x0a0b0c0d */
		0x01, 0x00, 0x00, 0x00,		/* gen 1 */
		0x04, 0x00, 0x00, 0x00,		/* tiers g4 */
		0x00, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00,		/* no pool handle */
		0x00, 0x00, 0x00, 0x00,
	};
	uint8_t keys[2][KVCACHE_KEY_SIZE];
	struct kvc_lookup_entry e[2] = {
		{ .tiers = 3, .handle = { 0x0a0b0c0d, 1 } },
		{ .tiers = 4 },
	};
	int n;

	for (int i = 0; i < KVCACHE_KEY_SIZE; i++) {
		keys[0][i] = (uint8_t)i;
		keys[1][i] = (uint8_t)(0xff - i);
	}
	n = kvc_proto_encode_lookup(buf, sizeof(buf), 7, 0x1234,
				    KVC_PROTO_TIER_POOL |
				    KVC_PROTO_TIER_G4, keys[0], 2);
	TAP_CHECK(n == (int)sizeof(want) && !memcmp(buf, want, sizeof(want)));
	TAP_CHECK(same_after_roundtrip(want, sizeof(want)));

	n = kvc_proto_encode_lookup_reply(buf, sizeof(buf), 7, e, 2);
	TAP_CHECK(n == (int)sizeof(want_reply) &&
		  !memcmp(buf, want_reply, sizeof(want_reply)));
	TAP_CHECK(same_after_roundtrip(want_reply, sizeof(want_reply)));
}

static void golden_error(void)
{
	static const uint8_t want[] = {
		'K', 'V', 'C', 'P', 0x01, 0x00,
		0x00, 0x80,			/* type ERROR */
		0x2a, 0x00, 0x00, 0x00,		/* seq 42: the one answered */
		0x28, 0x00, 0x00, 0x00,		/* length 40 */
		0, 0, 0, 0, 0, 0, 0, 0,
		0xea, 0xff, 0xff, 0xff,		/* -EINVAL (-22) */
		0x2a, 0x00, 0x00, 0x00,		/* bad_seq 42 */
		0x03, 0x00,			/* bad_type STORE */
		0x04, 0x00,			/* msg_len 4 */
		'o', 'o', 'p', 's',
	};
	int n = kvc_proto_encode_error(buf, sizeof(buf), -EINVAL, 42,
				       KVC_MSG_STORE, "oops");

	TAP_CHECK(n == (int)sizeof(want) && !memcmp(buf, want, sizeof(want)));
	TAP_CHECK(same_after_roundtrip(want, sizeof(want)));
}

static void golden_ns_create(void)
{
	static const uint8_t want[] = {
		'K', 'V', 'C', 'P', 0x01, 0x00,
		0x07, 0x00,			/* type NS_CREATE */
		0x05, 0x00, 0x00, 0x00,		/* seq 5 */
		0x2c, 0x00, 0x00, 0x00,		/* length 44 */
		0, 0, 0, 0, 0, 0, 0, 0,
		0xff, 0xff, 0x00, 0x00,		/* ns_id 65535 */
		0x61, 0xea, 0x00, 0x00,		/* uid 60001 */
		0xe8, 0x03, 0x00, 0x00,		/* gid 1000 */
		0xe8, 0x01, 0x00, 0x00,		/* mode 0750 */
		0x00, 0x00, 0x00, 0x00,		/* reserved */
	};
	static const uint8_t want_reply[] = {
		'K', 'V', 'C', 'P', 0x01, 0x00,
		0x07, 0x80,			/* type NS_CREATE reply */
		0x05, 0x00, 0x00, 0x00,		/* seq 5 */
		0x18, 0x00, 0x00, 0x00,		/* length 24: no body */
		0, 0, 0, 0, 0, 0, 0, 0,
	};
	struct kvc_ns_create c = { 65535, 60001, 1000, 0750 };
	int n;

	n = kvc_proto_encode_ns_create(buf, sizeof(buf), 5, &c);
	TAP_CHECK(n == (int)sizeof(want) && !memcmp(buf, want, sizeof(want)));
	TAP_CHECK(same_after_roundtrip(want, sizeof(want)));

	n = kvc_proto_encode_ns_create_reply(buf, sizeof(buf), 5);
	TAP_CHECK(n == (int)sizeof(want_reply) &&
		  !memcmp(buf, want_reply, sizeof(want_reply)));
	TAP_CHECK(same_after_roundtrip(want_reply, sizeof(want_reply)));
}

static void golden_alloc(void)
{
	static const uint8_t want[] = {
		'K', 'V', 'C', 'P', 0x01, 0x00,
		0x08, 0x00,			/* type ALLOC */
		0x10, 0x00, 0x00, 0x00,		/* seq 16 */
		0x20, 0x00, 0x00, 0x00,		/* length 32 */
		0, 0, 0, 0, 0, 0, 0, 0,
		0x02, 0x01, 0x00, 0x00,		/* ns_id 0x102 */
		0x02, 0x00, 0x00, 0x00,		/* count 2 */
	};
	static const uint8_t want_reply[] = {
		'K', 'V', 'C', 'P', 0x01, 0x00,
		0x08, 0x80,			/* type ALLOC reply */
		0x10, 0x00, 0x00, 0x00,		/* seq 16 */
		0x30, 0x00, 0x00, 0x00,		/* length 48 */
		0, 0, 0, 0, 0, 0, 0, 0,
		0x02, 0x00, 0x00, 0x00,		/* count 2 */
		0x00, 0x00, 0x00, 0x00,		/* reserved */
		0x0d, 0x0c, 0x0b, 0x0a,		/* index 0x0a0b0c0d */
		0x01, 0x00, 0x00, 0x00,		/* gen 1 */
		0x00, 0x00, 0x00, 0x00,		/* index 0 */
		0xff, 0xff, 0xff, 0xff,		/* gen 0xffffffff */
	};
	struct kvcache_handle h[2] = { { 0x0a0b0c0d, 1 }, { 0, 0xffffffffu } };
	int n;

	n = kvc_proto_encode_alloc(buf, sizeof(buf), 16, 0x102, 2);
	TAP_CHECK(n == (int)sizeof(want) && !memcmp(buf, want, sizeof(want)));
	TAP_CHECK(same_after_roundtrip(want, sizeof(want)));

	n = kvc_proto_encode_alloc_reply(buf, sizeof(buf), 16, h, 2);
	TAP_CHECK(n == (int)sizeof(want_reply) &&
		  !memcmp(buf, want_reply, sizeof(want_reply)));
	TAP_CHECK(same_after_roundtrip(want_reply, sizeof(want_reply)));
}

static void golden_seal(void)
{
	static const uint8_t want[] = {
		'K', 'V', 'C', 'P', 0x01, 0x00,
		0x09, 0x00,			/* type SEAL */
		0x11, 0x00, 0x00, 0x00,		/* seq 17 */
		0x80, 0x00, 0x00, 0x00,		/* length 128 */
		0, 0, 0, 0, 0, 0, 0, 0,
		0x02, 0x00, 0x00, 0x00,		/* count 2 */
		0x00, 0x00, 0x00, 0x00,		/* reserved */
		/* entry 0 */
		0x0d, 0x0c, 0x0b, 0x0a,		/* index 0x0a0b0c0d */
		0x02, 0x00, 0x00, 0x00,		/* gen 2 */
		0x00, 0x00, 0x20, 0x00,		/* payload_len 2 MiB */
		0x01, 0x00, 0x00, 0x00,		/* flags KEEP_PIN */
		/* key 0: 0x00..0x1f */
		0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
		0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
		0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17,
		0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,
		/* entry 1 */
		0x07, 0x00, 0x00, 0x00,		/* index 7 */
		0x00, 0x00, 0x00, 0x80,		/* gen 0x80000000 */
		0x01, 0x00, 0x00, 0x00,		/* payload_len 1 */
		0x00, 0x00, 0x00, 0x00,		/* flags none */
		/* key 1: 0xff..0xe0 */
		0xff, 0xfe, 0xfd, 0xfc, 0xfb, 0xfa, 0xf9, 0xf8,
		0xf7, 0xf6, 0xf5, 0xf4, 0xf3, 0xf2, 0xf1, 0xf0,
		0xef, 0xee, 0xed, 0xec, 0xeb, 0xea, 0xe9, 0xe8,
		0xe7, 0xe6, 0xe5, 0xe4, 0xe3, 0xe2, 0xe1, 0xe0,
	};
	static const uint8_t want_reply[] = {
		'K', 'V', 'C', 'P', 0x01, 0x00,
		0x09, 0x80,			/* type SEAL reply */
		0x11, 0x00, 0x00, 0x00,		/* seq 17 */
		0x28, 0x00, 0x00, 0x00,		/* length 40 */
		0, 0, 0, 0, 0, 0, 0, 0,
		0x02, 0x00, 0x00, 0x00,		/* count 2 */
		0x00, 0x00, 0x00, 0x00,		/* reserved */
		0x00, 0x00, 0x00, 0x00,		/* 0 */
		0xf0, 0xff, 0xff, 0xff,		/* -EBUSY (-16) */
	};
	struct kvc_seal_entry e[2] = {
		{ .handle = { 0x0a0b0c0d, 2 }, .payload_len = 2u << 20,
		  .flags = KVC_PROTO_SEAL_KEEP_PIN },
		{ .handle = { 7, 0x80000000u }, .payload_len = 1 },
	};
	int32_t st[2] = { 0, -EBUSY };
	int n;

	for (int i = 0; i < KVCACHE_KEY_SIZE; i++) {
		e[0].key[i] = (uint8_t)i;
		e[1].key[i] = (uint8_t)(0xff - i);
	}
	n = kvc_proto_encode_seal(buf, sizeof(buf), 17, e, 2);
	TAP_CHECK(n == (int)sizeof(want) && !memcmp(buf, want, sizeof(want)));
	TAP_CHECK(same_after_roundtrip(want, sizeof(want)));

	n = kvc_proto_encode_seal_reply(buf, sizeof(buf), 17, st, 2);
	TAP_CHECK(n == (int)sizeof(want_reply) &&
		  !memcmp(buf, want_reply, sizeof(want_reply)));
	TAP_CHECK(same_after_roundtrip(want_reply, sizeof(want_reply)));
}

static void golden_evict(void)
{
	static const uint8_t want[] = {
		'K', 'V', 'C', 'P', 0x01, 0x00,
		0x0a, 0x00,			/* type EVICT */
		0x12, 0x00, 0x00, 0x00,		/* seq 18 */
		0x60, 0x00, 0x00, 0x00,		/* length 96 */
		0, 0, 0, 0, 0, 0, 0, 0,
		0x34, 0x12, 0x00, 0x00,		/* ns_id 0x1234 */
		0x02, 0x00, 0x00, 0x00,		/* count 2 */
		/* key 0: 0x00..0x1f */
		0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
		0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
		0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17,
		0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,
		/* key 1: 0xff..0xe0 */
		0xff, 0xfe, 0xfd, 0xfc, 0xfb, 0xfa, 0xf9, 0xf8,
		0xf7, 0xf6, 0xf5, 0xf4, 0xf3, 0xf2, 0xf1, 0xf0,
		0xef, 0xee, 0xed, 0xec, 0xeb, 0xea, 0xe9, 0xe8,
		0xe7, 0xe6, 0xe5, 0xe4, 0xe3, 0xe2, 0xe1, 0xe0,
	};
	static const uint8_t want_reply[] = {
		'K', 'V', 'C', 'P', 0x01, 0x00,
		0x0a, 0x80,			/* type EVICT reply */
		0x12, 0x00, 0x00, 0x00,		/* seq 18 */
		0x28, 0x00, 0x00, 0x00,		/* length 40 */
		0, 0, 0, 0, 0, 0, 0, 0,
		0x02, 0x00, 0x00, 0x00,		/* count 2 */
		0x00, 0x00, 0x00, 0x00,		/* reserved */
		0xfe, 0xff, 0xff, 0xff,		/* -ENOENT (-2) */
		0xf0, 0xff, 0xff, 0xff,		/* -EBUSY (-16) */
	};
	uint8_t keys[2][KVCACHE_KEY_SIZE];
	int32_t st[2] = { -ENOENT, -EBUSY };
	int n;

	for (int i = 0; i < KVCACHE_KEY_SIZE; i++) {
		keys[0][i] = (uint8_t)i;
		keys[1][i] = (uint8_t)(0xff - i);
	}
	n = kvc_proto_encode_evict(buf, sizeof(buf), 18, 0x1234, keys[0], 2);
	TAP_CHECK(n == (int)sizeof(want) && !memcmp(buf, want, sizeof(want)));
	TAP_CHECK(same_after_roundtrip(want, sizeof(want)));

	n = kvc_proto_encode_evict_reply(buf, sizeof(buf), 18, st, 2);
	TAP_CHECK(n == (int)sizeof(want_reply) &&
		  !memcmp(buf, want_reply, sizeof(want_reply)));
	TAP_CHECK(same_after_roundtrip(want_reply, sizeof(want_reply)));
}

static void golden_flush(void)
{
	static const uint8_t want[] = {
		'K', 'V', 'C', 'P', 0x01, 0x00,
		0x0b, 0x00,			/* type FLUSH */
		0x13, 0x00, 0x00, 0x00,		/* seq 19 */
		0x20, 0x00, 0x00, 0x00,		/* length 32 */
		0, 0, 0, 0, 0, 0, 0, 0,
		0x00, 0x00, 0x00, 0x00,		/* ns_id 0: every one */
		0x00, 0x00, 0x00, 0x00,		/* reserved */
	};
	static const uint8_t want_reply[] = {
		'K', 'V', 'C', 'P', 0x01, 0x00,
		0x0b, 0x80,			/* type FLUSH reply */
		0x13, 0x00, 0x00, 0x00,		/* seq 19 */
		0x28, 0x00, 0x00, 0x00,		/* length 40 */
		0, 0, 0, 0, 0, 0, 0, 0,
		0x78, 0x56, 0x34, 0x12,		/* evicted 0x112345678 */
		0x01, 0x00, 0x00, 0x00,
		0x03, 0x00, 0x00, 0x00,		/* busy 3 */
		0x00, 0x00, 0x00, 0x00,
	};
	struct kvc_flush_reply r = { .evicted = 0x112345678ull, .busy = 3 };
	int n;

	n = kvc_proto_encode_flush(buf, sizeof(buf), 19, KVC_PROTO_NS_ALL);
	TAP_CHECK(n == (int)sizeof(want) && !memcmp(buf, want, sizeof(want)));
	TAP_CHECK(same_after_roundtrip(want, sizeof(want)));

	n = kvc_proto_encode_flush_reply(buf, sizeof(buf), 19, &r);
	TAP_CHECK(n == (int)sizeof(want_reply) &&
		  !memcmp(buf, want_reply, sizeof(want_reply)));
	TAP_CHECK(same_after_roundtrip(want_reply, sizeof(want_reply)));
}

static void golden_ns_list(void)
{
	static const uint8_t want[] = {
		'K', 'V', 'C', 'P', 0x01, 0x00,
		0x0c, 0x00,			/* type NS_LIST */
		0x14, 0x00, 0x00, 0x00,		/* seq 20 */
		0x20, 0x00, 0x00, 0x00,		/* length 32 */
		0, 0, 0, 0, 0, 0, 0, 0,
		0x07, 0x00, 0x00, 0x00,		/* start 7 */
		0x00, 0x00, 0x00, 0x00,		/* reserved */
	};
	static const uint8_t want_reply[] = {
		'K', 'V', 'C', 'P', 0x01, 0x00,
		0x0c, 0x80,			/* type NS_LIST reply */
		0x14, 0x00, 0x00, 0x00,		/* seq 20 */
		0x50, 0x00, 0x00, 0x00,		/* length 80 */
		0, 0, 0, 0, 0, 0, 0, 0,
		0x02, 0x00, 0x00, 0x00,		/* count 2 */
		0xff, 0xff, 0x00, 0x00,		/* next 65535: more to come */
		/* entry 0 */
		0x07, 0x00, 0x00, 0x00,		/* ns_id 7 */
		0x00, 0x00, 0x00, 0x00,		/* uid 0 */
		0xe8, 0x03, 0x00, 0x00,		/* gid 1000 */
		0xa4, 0x01, 0x00, 0x00,		/* mode 0644 */
		0x00, 0x00, 0x00, 0x00,		/* blocks 0 */
		0x00, 0x00, 0x00, 0x00,
		/* entry 1 */
		0xfe, 0xff, 0x00, 0x00,		/* ns_id 65534 */
		0x61, 0xea, 0x00, 0x00,		/* uid 60001 */
		0xff, 0xff, 0xff, 0xff,		/* gid 0xffffffff */
		0xff, 0x01, 0x00, 0x00,		/* mode 0777 */
		0x0d, 0x0c, 0x0b, 0x0a,		/* blocks 0x1000000a0b0c0d */
		0x00, 0x00, 0x10, 0x00,
	};
	struct kvc_ns_entry e[2] = {
		{ 7, 0, 1000, 0644, 0 },
		{ 65534, 60001, 0xffffffffu, 0777, 0x1000000a0b0c0dull },
	};
	struct kvc_msg m;
	int n;

	n = kvc_proto_encode_ns_list(buf, sizeof(buf), 20, 7);
	TAP_CHECK(n == (int)sizeof(want) && !memcmp(buf, want, sizeof(want)));
	TAP_CHECK(same_after_roundtrip(want, sizeof(want)));
	TAP_CHECK(kvc_proto_decode(want, sizeof(want), &m) == 0);
	TAP_CHECK(m.ns_list.start == 7);

	n = kvc_proto_encode_ns_list_reply(buf, sizeof(buf), 20,
					   KVCACHE_NS_MAX, e, 2);
	TAP_CHECK(n == (int)sizeof(want_reply) &&
		  !memcmp(buf, want_reply, sizeof(want_reply)));
	TAP_CHECK(same_after_roundtrip(want_reply, sizeof(want_reply)));
	TAP_CHECK(kvc_proto_decode(want_reply, sizeof(want_reply), &m) == 0);
	TAP_CHECK(m.ns_list_reply.count == 2 &&
		  m.ns_list_reply.next == KVCACHE_NS_MAX);
}

/* NS_SALT (version 2): golden bytes of a get, a set and the reply. */
static void golden_ns_salt(void)
{
	static const uint8_t want[] = {
		'K', 'V', 'C', 'P', 0x02, 0x00,	/* version 2 */
		0x0d, 0x00,			/* type NS_SALT */
		0x15, 0x00, 0x00, 0x00,		/* seq 21 */
		0x40, 0x00, 0x00, 0x00,		/* length 64 */
		0, 0, 0, 0, 0, 0, 0, 0,
		0x34, 0x12, 0x00, 0x00,		/* ns_id 0x1234 */
		0x00, 0x00, 0x00, 0x00,		/* flags: get */
		0, 0, 0, 0, 0, 0, 0, 0,		/* salt: zero */
		0, 0, 0, 0, 0, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0, 0,
	};
	static const uint8_t want_reply[] = {
		'K', 'V', 'C', 'P', 0x02, 0x00,
		0x0d, 0x80,			/* type NS_SALT reply */
		0x15, 0x00, 0x00, 0x00,
		0x40, 0x00, 0x00, 0x00,
		0, 0, 0, 0, 0, 0, 0, 0,
		0x34, 0x12, 0x00, 0x00,		/* ns_id */
		0x00, 0x00, 0x00, 0x00,		/* reserved */
		0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
		0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
		0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17,
		0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,
	};
	struct kvc_ns_salt s = { .ns_id = 0x1234 };
	struct kvc_ns_salt_reply r = { .ns_id = 0x1234 };
	struct kvc_msg m;
	int n;

	n = kvc_proto_encode_ns_salt(buf, sizeof(buf), 21, &s);
	TAP_CHECK(n == (int)sizeof(want) && !memcmp(buf, want, sizeof(want)));
	TAP_CHECK(same_after_roundtrip(want, sizeof(want)));
	TAP_CHECK(kvc_proto_decode(want, sizeof(want), &m) == 0);
	TAP_CHECK(m.version == 2 && m.ns_salt.ns_id == 0x1234 &&
		  m.ns_salt.flags == 0);

	for (int i = 0; i < KVC_PROTO_SALT_SIZE; i++)
		r.salt[i] = (uint8_t)i;
	n = kvc_proto_encode_ns_salt_reply(buf, sizeof(buf), 21, &r);
	TAP_CHECK(n == (int)sizeof(want_reply) &&
		  !memcmp(buf, want_reply, sizeof(want_reply)));
	TAP_CHECK(same_after_roundtrip(want_reply, sizeof(want_reply)));
	TAP_CHECK(kvc_proto_decode(want_reply, sizeof(want_reply), &m) == 0);
	TAP_CHECK(m.ns_salt_reply.ns_id == 0x1234 &&
		  !memcmp(m.ns_salt_reply.salt, r.salt, KVC_PROTO_SALT_SIZE));

	/* SET carries the salt: flags bit 0 and the bytes at 32. */
	s.flags = KVC_PROTO_NS_SALT_SET;
	memcpy(s.salt, r.salt, KVC_PROTO_SALT_SIZE);
	n = kvc_proto_encode_ns_salt(buf, sizeof(buf), 21, &s);
	TAP_CHECK(n == 64 && buf[28] == 1 && !memcmp(buf + 32, r.salt, 32));
	TAP_CHECK(same_after_roundtrip(buf, n));
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.ns_salt.flags == KVC_PROTO_NS_SALT_SET &&
		  !memcmp(m.ns_salt.salt, r.salt, KVC_PROTO_SALT_SIZE));
}

/* ---- malformed input ------------------------------------------------- */

/* Decode len bytes of buf (exact-size copy); the errno. */
static int dec(size_t len)
{
	struct kvc_msg m;
	uint8_t *copy;
	int ret = decode_exact(buf, len, &m, &copy);

	free(copy);
	/* Every failure names its reason; success names none. */
	if ((ret != 0) != (m.reason != NULL))
		return -1000;
	return ret;
}

/* A valid LOOKUP of n keys in buf; its length. */
static size_t lookup_msg(uint32_t n)
{
	static uint8_t keys[KVC_PROTO_MAX_BATCH][KVCACHE_KEY_SIZE];
	int len = kvc_proto_encode_lookup(buf, sizeof(buf), 1, 1, 1,
					  keys[0], n);

	if (len < 0)
		abort();
	return (size_t)len;
}

/* Change the length field and the datagram size together. */
static size_t resize(size_t len)
{
	put32(buf + 12, (uint32_t)len);
	return len;
}

static void bad_header(void)
{
	size_t len = lookup_msg(2);

	TAP_CHECK(dec(len) == 0);
	buf[0] ^= 1;
	TAP_CHECK(dec(len) == -EPROTO);
	TAP_CHECK(dec(4) == -EPROTO);	/* the magic is named first */
	buf[0] ^= 1;
	TAP_CHECK(dec(0) == -EBADMSG);
	TAP_CHECK(dec(3) == -EBADMSG);
	TAP_CHECK(dec(23) == -EBADMSG);

	put16(buf + 4, 0);
	TAP_CHECK(dec(len) == -EPROTONOSUPPORT);
	put16(buf + 4, KVC_PROTO_VERSION_MAX + 1);
	TAP_CHECK(dec(len) == -EPROTONOSUPPORT);
	put16(buf + 4, KVC_PROTO_VERSION);

	/* The length field must be the datagram's size. */
	TAP_CHECK(dec(len - 1) == -EBADMSG);
	memset(buf + len, 0, 8);
	TAP_CHECK(dec(len + 1) == -EBADMSG);
	put32(buf + 12, (uint32_t)len + 1);
	TAP_CHECK(dec(len) == -EBADMSG);
	put32(buf + 12, (uint32_t)len);

	TAP_CHECK(dec(KVC_PROTO_MSG_MAX + 1) == -EMSGSIZE);
	put32(buf + 12, KVC_PROTO_MSG_MAX + 1);
	TAP_CHECK(dec(KVC_PROTO_MSG_MAX + 1) == -EMSGSIZE);
	put32(buf + 12, (uint32_t)len);

	put32(buf + 16, 1);
	TAP_CHECK(dec(len) == -EINVAL);		/* unknown header flag */
	put32(buf + 16, 0x80000000u);
	TAP_CHECK(dec(len) == -EINVAL);
	put32(buf + 16, 0);
	buf[23] = 1;
	TAP_CHECK(dec(len) == -EINVAL);		/* reserved */
	buf[23] = 0;

	put16(buf + 6, 0);
	TAP_CHECK(dec(len) == -EOPNOTSUPP);
	put16(buf + 6, KVC_MSG_NS_LIST + 1);
	TAP_CHECK(dec(len) == -EOPNOTSUPP);
	put16(buf + 6, KVC_MSG_NS_LIST_REPLY + 1);
	TAP_CHECK(dec(len) == -EOPNOTSUPP);
	put16(buf + 6, 0x7fff);
	TAP_CHECK(dec(len) == -EOPNOTSUPP);
	put16(buf + 6, KVC_MSG_LOOKUP);
	TAP_CHECK(dec(len) == 0);
}

static void bad_counts(void)
{
	size_t len = lookup_msg(2);

	/* A count that does not fit the payload, both ways. */
	put32(buf + 32, 3);
	TAP_CHECK(dec(len) == -EBADMSG);
	put32(buf + 32, 1);
	TAP_CHECK(dec(len) == -EBADMSG);	/* 32 bytes of garbage left */
	put32(buf + 32, 0);
	TAP_CHECK(dec(len) == -EINVAL);		/* empty request */
	put32(buf + 32, 2);
	/* Truncated inside a key, with a consistent length field. */
	TAP_CHECK(dec(resize(len - 1)) == -EBADMSG);
	TAP_CHECK(dec(resize(len - 32)) == -EBADMSG);
	TAP_CHECK(dec(resize(39)) == -EBADMSG);	/* inside the fixed part */
	/* Trailing garbage. */
	buf[len] = 0;
	TAP_CHECK(dec(resize(len + 1)) == -EBADMSG);
	TAP_CHECK(dec(resize(len)) == 0);

	/* Above the limit: -E2BIG even before the size is looked at. */
	len = lookup_msg(KVC_PROTO_MAX_BATCH);
	TAP_CHECK(dec(len) == 0);
	put32(buf + 32, KVC_PROTO_MAX_BATCH + 1);
	TAP_CHECK(dec(len) == -E2BIG);
	put32(buf + 32, 0xffffffffu);
	TAP_CHECK(dec(len) == -E2BIG);		/* and no overflow */
	memset(buf + len, 0, 32);
	put32(buf + 32, KVC_PROTO_MAX_BATCH + 1);
	TAP_CHECK(dec(resize(len + 32)) == -E2BIG);
}

static void bad_store(void)
{
	struct kvc_store_entry e[2] = { { .flags = KVC_PROTO_STORE_FIRST } };
	size_t len;

	fill_key(e[0].key, 1);
	fill_key(e[1].key, 2);
	memcpy(e[1].parent, e[0].key, KVCACHE_KEY_SIZE);
	len = (size_t)kvc_proto_encode_store(buf, sizeof(buf), 1, 5, e, 2);
	TAP_CHECK(len == 32 + 160 && dec(len) == 0);

	put32(buf + 24, 0);
	TAP_CHECK(dec(len) == -EINVAL);		/* namespace 0 */
	put32(buf + 24, KVCACHE_NS_MAX + 1);
	TAP_CHECK(dec(len) == -EINVAL);
	put32(buf + 24, 5);

	/* count above what fits a message: -E2BIG, not a size error. */
	put32(buf + 28, KVC_PROTO_MAX_STORE + 1);
	TAP_CHECK(dec(len) == -E2BIG);
	put32(buf + 28, 3);
	TAP_CHECK(dec(len) == -EBADMSG);
	put32(buf + 28, 2);

	/*
	 * Entry 1 starts at 32 + 80 = 112: flags at +72, payload_len at +76
	 * (reserved before version 3, and without SEAL).
	 */
	buf[112 + 72] = 4;
	TAP_CHECK(dec(len) == -EINVAL);		/* unknown entry flag */
	buf[112 + 72] = 2;
	buf[112 + 76] = 1;
	TAP_CHECK(dec(len) == -EINVAL);		/* SEAL under version 1 */
	put16(buf + 4, 2);
	TAP_CHECK(dec(len) == -EINVAL);		/* and under 2 */
	put16(buf + 4, 3);
	TAP_CHECK(dec(len) == 0);		/* from 3 on */
	buf[112 + 76] = 0;
	TAP_CHECK(dec(len) == -EINVAL);		/* SEAL without a length */
	buf[112 + 72] = 0;
	buf[112 + 79] = 1;
	TAP_CHECK(dec(len) == -EINVAL);		/* a length without SEAL */
	buf[112 + 79] = 0;
	put16(buf + 4, 1);
	/* FIRST with a parent: the entry contradicts itself. */
	buf[32 + 32 + 31] = 1;
	TAP_CHECK(dec(len) == -EINVAL);
	buf[32 + 32 + 31] = 0;
	TAP_CHECK(dec(len) == 0);

	/* The encoder refuses the same things. */
	e[0].parent[0] = 1;
	TAP_CHECK(kvc_proto_encode_store(buf, sizeof(buf), 1, 5, e, 2) ==
		  -EINVAL);
	e[0].parent[0] = 0;
	e[1].flags = 4;
	TAP_CHECK(kvc_proto_encode_store(buf, sizeof(buf), 1, 5, e, 2) ==
		  -EINVAL);
	e[1].flags = KVC_PROTO_STORE_SEAL;
	TAP_CHECK(kvc_proto_encode_store(buf, sizeof(buf), 1, 5, e, 2) ==
		  -EINVAL);			/* SEAL without a length */
	e[1].flags = 0;
	e[1].payload_len = 4096;
	TAP_CHECK(kvc_proto_encode_store(buf, sizeof(buf), 1, 5, e, 2) ==
		  -EINVAL);			/* a length without SEAL */
	e[1].payload_len = 0;
	TAP_CHECK(kvc_proto_encode_store(buf, sizeof(buf), 1, 0, e, 2) ==
		  -EINVAL);
	TAP_CHECK(kvc_proto_encode_store(buf, sizeof(buf), 1, 5, e, 0) ==
		  -EINVAL);
}

static void bad_fields(void)
{
	uint8_t keys[1][KVCACHE_KEY_SIZE] = { { 0 } };
	struct kvc_hello h = { 1, 1, 0 };
	struct kvc_hello_reply hr = {
		1, KVC_PROTO_MODE_KERNEL, 16, 0, 4096, 8
	};
	struct kvc_lookup_entry le[1] = { { .tiers = 1, .handle = { 3, 4 } } };
	struct kvc_load_result lr[1] = { { .status = 0 } };
	struct kvc_stat st[1] = { { "a", 1, 0 } };
	int32_t status[1] = { 0 };
	size_t len;

	len = (size_t)kvc_proto_encode_hello(buf, sizeof(buf), 1, &h);
	buf[28] = 1;
	TAP_CHECK(dec(len) == -EINVAL);		/* reserved */
	buf[28] = 0;
	put16(buf + 24, 2);
	TAP_CHECK(dec(len) == -EINVAL);		/* min > max */
	put16(buf + 24, 0);
	TAP_CHECK(dec(len) == -EINVAL);		/* version 0 */
	put16(buf + 24, 1);
	buf[len] = 0;
	TAP_CHECK(dec(resize(len + 1)) == -EBADMSG);
	TAP_CHECK(dec(resize(len - 1)) == -EBADMSG);

	len = (size_t)kvc_proto_encode_hello_reply(buf, sizeof(buf), 1, &hr);
	put16(buf + 24, KVC_PROTO_VERSION_MAX + 1);
	TAP_CHECK(dec(len) == -EPROTONOSUPPORT);	/* chosen version */
	put16(buf + 24, 1);
	put16(buf + 26, 3);
	TAP_CHECK(dec(len) == -EINVAL);		/* mode */
	put16(buf + 26, KVC_PROTO_MODE_MEMFD);
	put32(buf + 28, KVC_PROTO_MAX_STORE + 1);
	TAP_CHECK(dec(len) == -EINVAL);		/* max_batch */
	put32(buf + 28, 0);
	TAP_CHECK(dec(len) == -EINVAL);
	put32(buf + 28, 1);
	buf[32] = 4;
	TAP_CHECK(dec(len) == -EINVAL);		/* unknown cap in a reply */
	buf[32] = 0;
	TAP_CHECK(dec(len) == 0);

	len = (size_t)kvc_proto_encode_lookup(buf, sizeof(buf), 1, 1, 1,
					      keys[0], 1);
	put32(buf + 28, 0);
	TAP_CHECK(dec(len) == -EINVAL);		/* no tier */
	put32(buf + 28, 8);
	TAP_CHECK(dec(len) == -EINVAL);		/* unknown tier */
	put32(buf + 28, 1);
	put32(buf + 24, 0);
	TAP_CHECK(dec(len) == -EINVAL);		/* namespace 0 */
	put32(buf + 24, 0x10000);
	TAP_CHECK(dec(len) == -EINVAL);
	put32(buf + 24, 1);
	buf[36] = 2;
	TAP_CHECK(dec(len) == -EINVAL);		/* unknown flag */
	buf[36] = 0;
	buf[39] = 0x80;
	TAP_CHECK(dec(len) == -EINVAL);
	buf[39] = 0;

	len = (size_t)kvc_proto_encode_lookup_reply(buf, sizeof(buf), 1, le,
						    1);
	buf[32 + 4] = 1;
	TAP_CHECK(dec(len) == -EINVAL);		/* entry reserved */
	buf[32 + 4] = 0;
	put32(buf + 32, KVC_PROTO_TIER_G3);
	TAP_CHECK(dec(len) == -EINVAL);		/* a handle off the pool */
	put32(buf + 32, 0);
	TAP_CHECK(dec(len) == -EINVAL);		/* matched, but nowhere */
	put32(buf + 32, 1);
	TAP_CHECK(dec(len) == 0);

	len = (size_t)kvc_proto_encode_load(buf, sizeof(buf), 1, 9, keys[0],
					    1);
	put32(buf + 24, 0);
	TAP_CHECK(dec(len) == -EINVAL);
	put32(buf + 24, 9);
	put32(buf + 28, KVC_PROTO_MAX_BATCH + 1);
	TAP_CHECK(dec(len) == -E2BIG);

	len = (size_t)kvc_proto_encode_load_reply(buf, sizeof(buf), 1, lr, 1);
	put32(buf + 40, 7);
	TAP_CHECK(dec(len) == 0);		/* a handle with status 0 */
	put32(buf + 32, (uint32_t)-ENOENT);
	TAP_CHECK(dec(len) == -EINVAL);		/* a handle with an error */
	put32(buf + 40, 0);
	TAP_CHECK(dec(len) == 0);
	put32(buf + 32, 1);
	TAP_CHECK(dec(len) == -EINVAL);		/* positive status */
	put32(buf + 32, (uint32_t)-(KVC_PROTO_ERRNO_MAX + 1));
	TAP_CHECK(dec(len) == -EINVAL);

	len = (size_t)kvc_proto_encode_release_reply(buf, sizeof(buf), 1,
						     status, 1);
	put32(buf + 32, 5);
	TAP_CHECK(dec(len) == -EINVAL);
	put32(buf + 24, 2);
	TAP_CHECK(dec(len) == -EBADMSG);

	TAP_CHECK(kvc_proto_encode_release(buf, sizeof(buf), 1, NULL, 0) ==
		  -EINVAL);

	len = (size_t)kvc_proto_encode_stats(buf, sizeof(buf), 1);
	put32(buf + 24, 0);
	TAP_CHECK(dec(resize(len + 4)) == -EBADMSG);	/* STATS has no body */

	len = (size_t)kvc_proto_encode_stats_reply(buf, sizeof(buf), 1, st, 1);
	TAP_CHECK(len == 43 && dec(len) == 0);
	buf[42] = ' ';
	TAP_CHECK(dec(len) == -EINVAL);		/* name character */
	buf[42] = 'a';
	put16(buf + 40, 0);
	TAP_CHECK(dec(resize(len - 1)) == -EINVAL);	/* empty name */
	resize(len);
	put16(buf + 40, 2);
	TAP_CHECK(dec(len) == -EBADMSG);	/* runs past the end */
	put16(buf + 40, KVC_PROTO_NAME_MAX + 1);
	TAP_CHECK(dec(len) == -E2BIG);
	put16(buf + 40, 1);
	put32(buf + 24, 2);
	TAP_CHECK(dec(len) == -EBADMSG);	/* count does not fit */
	put32(buf + 24, KVC_PROTO_MAX_BATCH + 1);
	TAP_CHECK(dec(len) == -E2BIG);
	put32(buf + 24, 0);
	TAP_CHECK(dec(len) == -EBADMSG);	/* trailing counter */
	put32(buf + 24, 1);
	TAP_CHECK(dec(len) == 0);

	len = (size_t)kvc_proto_encode_error(buf, sizeof(buf), -EIO, 1, 1,
					     "ab");
	buf[36] = '\n';
	TAP_CHECK(dec(len) == -EINVAL);		/* not printable */
	buf[36] = 'a';
	put32(buf + 24, 0);
	TAP_CHECK(dec(len) == -EINVAL);		/* error 0 */
	put32(buf + 24, 5);
	TAP_CHECK(dec(len) == -EINVAL);		/* positive errno */
	put32(buf + 24, (uint32_t)-EIO);
	put16(buf + 34, 3);
	TAP_CHECK(dec(len) == -EBADMSG);
	put16(buf + 34, KVC_PROTO_ERRMSG_MAX + 1);
	TAP_CHECK(dec(len) == -E2BIG);
	put16(buf + 34, 1);
	TAP_CHECK(dec(len) == -EBADMSG);	/* trailing byte */
	put16(buf + 34, 2);
	TAP_CHECK(dec(len) == 0);
	put32(buf + 28, 2);
	TAP_CHECK(dec(len) == -EINVAL);		/* bad_seq != header seq */
	put32(buf + 28, 1);
	TAP_CHECK(dec(len) == 0);
}

static void bad_ns_create(void)
{
	struct kvc_ns_create c = { .ns_id = 3, .uid = 1, .gid = 2,
				   .mode = 0640 };
	size_t len;

	len = (size_t)kvc_proto_encode_ns_create(buf, sizeof(buf), 1, &c);
	TAP_CHECK(len == 44 && dec(len) == 0);

	/* Fixed size: truncated or trailing bytes, length field honest. */
	TAP_CHECK(dec(resize(len - 1)) == -EBADMSG);
	TAP_CHECK(dec(resize(24)) == -EBADMSG);		/* no body at all */
	buf[len] = 0;
	TAP_CHECK(dec(resize(len + 1)) == -EBADMSG);
	TAP_CHECK(dec(resize(len)) == 0);

	buf[43] = 1;
	TAP_CHECK(dec(len) == -EINVAL);		/* reserved */
	buf[43] = 0;
	put32(buf + 24, 0);
	TAP_CHECK(dec(len) == -EINVAL);		/* namespace 0 */
	put32(buf + 24, KVCACHE_NS_MAX + 1);
	TAP_CHECK(dec(len) == -EINVAL);
	put32(buf + 24, KVCACHE_NS_MAX);
	TAP_CHECK(dec(len) == 0);
	put32(buf + 36, 01000);
	TAP_CHECK(dec(len) == -EINVAL);		/* mode > 0777 (sticky) */
	put32(buf + 36, 0x80000000u);
	TAP_CHECK(dec(len) == -EINVAL);
	/* A bad mode in a truncated body: the size is named first. */
	TAP_CHECK(dec(resize(len - 4)) == -EBADMSG);
	resize(len);
	put32(buf + 36, 0777);
	TAP_CHECK(dec(len) == 0);
	/* Any uid and gid: the daemon judges them. */
	put32(buf + 28, 0xffffffffu);
	put32(buf + 32, 0);
	TAP_CHECK(dec(len) == 0);

	/* The reply has no body. */
	len = (size_t)kvc_proto_encode_ns_create_reply(buf, sizeof(buf), 1);
	TAP_CHECK(len == 24 && dec(len) == 0);
	memset(buf + len, 0, 8);
	TAP_CHECK(dec(resize(len + 1)) == -EBADMSG);
	TAP_CHECK(dec(resize(len + 4)) == -EBADMSG);

	/* The encoder refuses the same things. */
	c.mode = 01777;
	TAP_CHECK(kvc_proto_encode_ns_create(buf, sizeof(buf), 1, &c) ==
		  -EINVAL);
	c.mode = 0;
	c.ns_id = 0;
	TAP_CHECK(kvc_proto_encode_ns_create(buf, sizeof(buf), 1, &c) ==
		  -EINVAL);
	c.ns_id = KVCACHE_NS_MAX + 1;
	TAP_CHECK(kvc_proto_encode_ns_create(buf, sizeof(buf), 1, &c) ==
		  -EINVAL);
}

static void bad_alloc(void)
{
	struct kvcache_handle h[2] = { { 1, 2 }, { 3, 4 } };
	size_t len;

	len = (size_t)kvc_proto_encode_alloc(buf, sizeof(buf), 1, 9, 4);
	TAP_CHECK(len == 32 && dec(len) == 0);

	TAP_CHECK(dec(resize(31)) == -EBADMSG);		/* truncated */
	TAP_CHECK(dec(resize(28)) == -EBADMSG);
	TAP_CHECK(dec(resize(24)) == -EBADMSG);
	buf[32] = 0;
	TAP_CHECK(dec(resize(33)) == -EBADMSG);		/* trailing byte */
	memset(buf + 32, 0, 8);
	TAP_CHECK(dec(resize(40)) == -EBADMSG);		/* a stray handle */
	TAP_CHECK(dec(resize(32)) == 0);

	put32(buf + 24, 0);
	TAP_CHECK(dec(len) == -EINVAL);		/* namespace 0 */
	put32(buf + 24, KVCACHE_NS_MAX + 1);
	TAP_CHECK(dec(len) == -EINVAL);
	put32(buf + 24, 9);
	put32(buf + 28, 0);
	TAP_CHECK(dec(len) == -EINVAL);		/* count 0 */
	put32(buf + 28, KVC_PROTO_MAX_BATCH);
	TAP_CHECK(dec(len) == 0);
	put32(buf + 28, KVC_PROTO_MAX_BATCH + 1);
	TAP_CHECK(dec(len) == -E2BIG);
	put32(buf + 28, 0xffffffffu);
	TAP_CHECK(dec(len) == -E2BIG);
	/* The count is checked before the size. */
	TAP_CHECK(dec(resize(33)) == -E2BIG);
	resize(32);
	put32(buf + 28, 4);
	TAP_CHECK(dec(len) == 0);

	/* The reply: 1..1024 handles, never none. */
	len = (size_t)kvc_proto_encode_alloc_reply(buf, sizeof(buf), 1, h, 2);
	TAP_CHECK(len == 48 && dec(len) == 0);
	put32(buf + 24, 3);
	TAP_CHECK(dec(len) == -EBADMSG);	/* count does not fit */
	put32(buf + 24, 1);
	TAP_CHECK(dec(len) == -EBADMSG);	/* trailing handle */
	put32(buf + 24, 0);
	TAP_CHECK(dec(len) == -EINVAL);		/* empty */
	TAP_CHECK(dec(resize(32)) == -EINVAL);	/* even when it fits */
	resize(len);
	put32(buf + 24, KVC_PROTO_MAX_BATCH + 1);
	TAP_CHECK(dec(len) == -E2BIG);
	put32(buf + 24, 2);
	buf[31] = 1;
	TAP_CHECK(dec(len) == -EINVAL);		/* reserved */
	buf[31] = 0;
	TAP_CHECK(dec(resize(len - 1)) == -EBADMSG);	/* inside a handle */
	TAP_CHECK(dec(resize(31)) == -EBADMSG);	/* inside the fixed part */
	TAP_CHECK(dec(resize(len)) == 0);

	TAP_CHECK(kvc_proto_encode_alloc(buf, sizeof(buf), 1, 0, 1) ==
		  -EINVAL);
	TAP_CHECK(kvc_proto_encode_alloc(buf, sizeof(buf), 1,
					 KVCACHE_NS_MAX + 1, 1) == -EINVAL);
	TAP_CHECK(kvc_proto_encode_alloc(buf, sizeof(buf), 1, 1, 0) ==
		  -EINVAL);
	TAP_CHECK(kvc_proto_encode_alloc(buf, sizeof(buf), 1, 1,
					 KVC_PROTO_MAX_BATCH + 1) == -EINVAL);
	TAP_CHECK(kvc_proto_encode_alloc_reply(buf, sizeof(buf), 1, h, 0) ==
		  -EINVAL);
	TAP_CHECK(kvc_proto_encode_alloc_reply(buf, sizeof(buf), 1, NULL,
					       1) == -EINVAL);
}

static void bad_seal(void)
{
	static struct kvc_seal_entry big[KVC_PROTO_MAX_SEAL + 1];
	struct kvc_seal_entry e[2] = {
		{ .handle = { 1, 1 }, .payload_len = 4096,
		  .flags = KVC_PROTO_SEAL_KEEP_PIN },
		{ .handle = { 2, 1 }, .payload_len = 1 },
	};
	int32_t status[2] = { 0, -ENOSPC };
	size_t len;

	fill_key(e[0].key, 1);
	fill_key(e[1].key, 2);
	len = (size_t)kvc_proto_encode_seal(buf, sizeof(buf), 1, e, 2);
	TAP_CHECK(len == 32 + 96 && dec(len) == 0);

	/* Counts: empty, above the limit, not fitting either way. */
	put32(buf + 24, 0);
	TAP_CHECK(dec(len) == -EINVAL);
	put32(buf + 24, KVC_PROTO_MAX_SEAL + 1);
	TAP_CHECK(dec(len) == -E2BIG);
	put32(buf + 24, 0xffffffffu);
	TAP_CHECK(dec(len) == -E2BIG);
	put32(buf + 24, 3);
	TAP_CHECK(dec(len) == -EBADMSG);
	put32(buf + 24, 1);
	TAP_CHECK(dec(len) == -EBADMSG);	/* 48 bytes left over */
	put32(buf + 24, 2);

	/* Truncated, with a consistent length field. */
	TAP_CHECK(dec(resize(len - 1)) == -EBADMSG);	/* inside a key */
	TAP_CHECK(dec(resize(len - 48)) == -EBADMSG);
	TAP_CHECK(dec(resize(31)) == -EBADMSG);	/* inside the fixed part */
	TAP_CHECK(dec(resize(24)) == -EBADMSG);
	/* Trailing bytes. */
	buf[len] = 0;
	TAP_CHECK(dec(resize(len + 1)) == -EBADMSG);
	TAP_CHECK(dec(resize(len)) == 0);

	buf[28] = 1;
	TAP_CHECK(dec(len) == -EINVAL);		/* reserved */
	buf[28] = 0;

	/* Entry 1 starts at 32 + 48 = 80: payload_len +8, flags +12. */
	put32(buf + 80 + 12, 2);
	TAP_CHECK(dec(len) == -EINVAL);		/* unknown flag */
	put32(buf + 80 + 12, 0x80000000u);
	TAP_CHECK(dec(len) == -EINVAL);
	put32(buf + 80 + 12, KVC_PROTO_SEAL_KEEP_PIN);
	TAP_CHECK(dec(len) == 0);
	put32(buf + 32 + 8, 0);
	TAP_CHECK(dec(len) == -EINVAL);		/* empty payload */
	put32(buf + 32 + 8, 0xffffffffu);
	TAP_CHECK(dec(len) == 0);		/* block_size: the daemon's */

	/* At the limit it decodes; one more is -E2BIG though it fits. */
	for (int i = 0; i <= KVC_PROTO_MAX_SEAL; i++)
		big[i].payload_len = 1;
	len = (size_t)kvc_proto_encode_seal(buf, sizeof(buf), 1, big,
					    KVC_PROTO_MAX_SEAL);
	TAP_CHECK(len == 32 + KVC_PROTO_MAX_SEAL * 48 && dec(len) == 0);
	memset(buf + len, 0, 48);
	put32(buf + len + 8, 1);
	put32(buf + 24, KVC_PROTO_MAX_SEAL + 1);
	TAP_CHECK(len + 48 <= KVC_PROTO_MSG_MAX);
	TAP_CHECK(dec(resize(len + 48)) == -E2BIG);

	/* The reply is a status list. */
	len = (size_t)kvc_proto_encode_seal_reply(buf, sizeof(buf), 1, status,
						  2);
	TAP_CHECK(len == 40 && dec(len) == 0);
	put32(buf + 36, 1);
	TAP_CHECK(dec(len) == -EINVAL);		/* positive status */
	put32(buf + 36, (uint32_t)-(KVC_PROTO_ERRNO_MAX + 1));
	TAP_CHECK(dec(len) == -EINVAL);
	put32(buf + 36, (uint32_t)-ENOSPC);
	put32(buf + 24, 3);
	TAP_CHECK(dec(len) == -EBADMSG);
	put32(buf + 24, KVC_PROTO_MAX_BATCH + 1);
	TAP_CHECK(dec(len) == -E2BIG);
	put32(buf + 24, 2);
	buf[29] = 1;
	TAP_CHECK(dec(len) == -EINVAL);		/* reserved */
	buf[29] = 0;
	TAP_CHECK(dec(len) == 0);

	/* The encoders refuse the same things. */
	e[1].flags = 2;
	TAP_CHECK(kvc_proto_encode_seal(buf, sizeof(buf), 1, e, 2) ==
		  -EINVAL);
	e[1].flags = 0;
	e[0].payload_len = 0;
	TAP_CHECK(kvc_proto_encode_seal(buf, sizeof(buf), 1, e, 2) ==
		  -EINVAL);
	e[0].payload_len = 1;
	TAP_CHECK(kvc_proto_encode_seal(buf, sizeof(buf), 1, e, 0) ==
		  -EINVAL);
	TAP_CHECK(kvc_proto_encode_seal(buf, sizeof(buf), 1, NULL, 1) ==
		  -EINVAL);
	TAP_CHECK(kvc_proto_encode_seal(buf, sizeof(buf), 1, big,
					KVC_PROTO_MAX_SEAL + 1) == -EINVAL);
	status[1] = 7;
	TAP_CHECK(kvc_proto_encode_seal_reply(buf, sizeof(buf), 1, status,
					      2) == -EINVAL);
	TAP_CHECK(kvc_proto_encode_seal_reply(buf, sizeof(buf), 1, NULL,
					      1) == -EINVAL);
	TAP_CHECK(kvc_proto_encode_seal(buf, sizeof(buf), 1, e, 2) == 128);
}

static void bad_evict(void)
{
	static uint8_t big[KVC_PROTO_MAX_BATCH + 1][KVCACHE_KEY_SIZE];
	uint8_t keys[2][KVCACHE_KEY_SIZE];
	int32_t status[2] = { 0, -EBUSY };
	size_t len;

	fill_key(keys[0], 1);
	fill_key(keys[1], 2);
	len = (size_t)kvc_proto_encode_evict(buf, sizeof(buf), 1, 5, keys[0],
					     2);
	TAP_CHECK(len == 32 + 64 && dec(len) == 0);

	put32(buf + 24, 0);
	TAP_CHECK(dec(len) == -EINVAL);		/* namespace 0 */
	put32(buf + 24, KVCACHE_NS_MAX + 1);
	TAP_CHECK(dec(len) == -EINVAL);
	put32(buf + 24, 0xffffffffu);
	TAP_CHECK(dec(len) == -EINVAL);
	put32(buf + 24, KVCACHE_NS_MAX);
	TAP_CHECK(dec(len) == 0);

	/* Counts: empty, above the limit, not fitting either way. */
	put32(buf + 28, 0);
	TAP_CHECK(dec(len) == -EINVAL);
	put32(buf + 28, KVC_PROTO_MAX_BATCH + 1);
	TAP_CHECK(dec(len) == -E2BIG);
	put32(buf + 28, 0xffffffffu);
	TAP_CHECK(dec(len) == -E2BIG);
	put32(buf + 28, 3);
	TAP_CHECK(dec(len) == -EBADMSG);
	put32(buf + 28, 1);
	TAP_CHECK(dec(len) == -EBADMSG);	/* a key left over */
	put32(buf + 28, 2);

	/* Truncated, with a consistent length field. */
	TAP_CHECK(dec(resize(len - 1)) == -EBADMSG);	/* inside a key */
	TAP_CHECK(dec(resize(len - 32)) == -EBADMSG);
	TAP_CHECK(dec(resize(31)) == -EBADMSG);	/* inside the fixed part */
	TAP_CHECK(dec(resize(24)) == -EBADMSG);
	/* Trailing bytes. */
	buf[len] = 0;
	TAP_CHECK(dec(resize(len + 1)) == -EBADMSG);
	TAP_CHECK(dec(resize(len)) == 0);

	/* At the limit it decodes; one more is -E2BIG though it fits. */
	len = (size_t)kvc_proto_encode_evict(buf, sizeof(buf), 1, 5, big[0],
					     KVC_PROTO_MAX_BATCH);
	TAP_CHECK(len == 32 + KVC_PROTO_MAX_BATCH * 32 && dec(len) == 0);
	memset(buf + len, 0, 32);
	put32(buf + 28, KVC_PROTO_MAX_BATCH + 1);
	TAP_CHECK(len + 32 <= KVC_PROTO_MSG_MAX);
	TAP_CHECK(dec(resize(len + 32)) == -E2BIG);

	/* The reply is a status list. */
	len = (size_t)kvc_proto_encode_evict_reply(buf, sizeof(buf), 1,
						   status, 2);
	TAP_CHECK(len == 40 && dec(len) == 0);
	put32(buf + 36, 1);
	TAP_CHECK(dec(len) == -EINVAL);		/* positive status */
	put32(buf + 36, (uint32_t)-(KVC_PROTO_ERRNO_MAX + 1));
	TAP_CHECK(dec(len) == -EINVAL);
	put32(buf + 36, (uint32_t)-ENOENT);
	put32(buf + 24, 3);
	TAP_CHECK(dec(len) == -EBADMSG);
	put32(buf + 24, 1);
	TAP_CHECK(dec(len) == -EBADMSG);	/* a status left over */
	put32(buf + 24, KVC_PROTO_MAX_BATCH + 1);
	TAP_CHECK(dec(len) == -E2BIG);
	put32(buf + 24, 2);
	buf[30] = 1;
	TAP_CHECK(dec(len) == -EINVAL);		/* reserved */
	buf[30] = 0;
	TAP_CHECK(dec(resize(len - 1)) == -EBADMSG);
	TAP_CHECK(dec(resize(31)) == -EBADMSG);
	buf[len] = 0;
	TAP_CHECK(dec(resize(len + 1)) == -EBADMSG);
	TAP_CHECK(dec(resize(len)) == 0);

	/* The encoders refuse the same things. */
	TAP_CHECK(kvc_proto_encode_evict(buf, sizeof(buf), 1, 0, keys[0],
					 1) == -EINVAL);
	TAP_CHECK(kvc_proto_encode_evict(buf, sizeof(buf), 1,
					 KVCACHE_NS_MAX + 1, keys[0], 1) ==
		  -EINVAL);
	TAP_CHECK(kvc_proto_encode_evict(buf, sizeof(buf), 1, 1, keys[0],
					 0) == -EINVAL);
	TAP_CHECK(kvc_proto_encode_evict(buf, sizeof(buf), 1, 1, NULL, 1) ==
		  -EINVAL);
	TAP_CHECK(kvc_proto_encode_evict(buf, sizeof(buf), 1, 1, big[0],
					 KVC_PROTO_MAX_BATCH + 1) == -EINVAL);
	status[1] = 7;
	TAP_CHECK(kvc_proto_encode_evict_reply(buf, sizeof(buf), 1, status,
					       2) == -EINVAL);
	TAP_CHECK(kvc_proto_encode_evict_reply(buf, sizeof(buf), 1, NULL,
					       1) == -EINVAL);
	TAP_CHECK(kvc_proto_encode_evict_reply(buf, sizeof(buf), 1, status,
					       KVC_PROTO_MAX_BATCH + 1) ==
		  -EINVAL);
}

static void bad_flush(void)
{
	struct kvc_flush_reply r = { 5, 6 };
	size_t len;

	len = (size_t)kvc_proto_encode_flush(buf, sizeof(buf), 1, 9);
	TAP_CHECK(len == 32 && dec(len) == 0);

	/* Fixed size: truncated or trailing bytes, length field honest. */
	TAP_CHECK(dec(resize(31)) == -EBADMSG);
	TAP_CHECK(dec(resize(28)) == -EBADMSG);
	TAP_CHECK(dec(resize(24)) == -EBADMSG);		/* no body at all */
	memset(buf + 32, 0, 8);
	TAP_CHECK(dec(resize(33)) == -EBADMSG);
	TAP_CHECK(dec(resize(40)) == -EBADMSG);
	TAP_CHECK(dec(resize(32)) == 0);

	buf[28] = 8;
	TAP_CHECK(dec(len) == -EINVAL);		/* not a tier */
	buf[28] = 0;
	buf[31] = 1;
	TAP_CHECK(dec(len) == -EINVAL);
	buf[31] = 0;
	buf[28] = KVC_PROTO_TIER_POOL | KVC_PROTO_TIER_G4;
	TAP_CHECK(dec(len) == 0);
	TAP_CHECK(kvc_proto_encode_flush_tiers(buf, sizeof(buf), 1, 9, 8) ==
		  -EINVAL);
	len = (size_t)kvc_proto_encode_flush_tiers(buf, sizeof(buf), 1, 9, 2);
	TAP_CHECK(len == 32 && dec(len) == 0);
	TAP_CHECK(buf[28] == 2 && !buf[29] && !buf[30] && !buf[31]);
	buf[31] = 1;
	TAP_CHECK(dec(len) == -EINVAL);
	buf[31] = 0;
	put32(buf + 28, 0x80000000u);
	TAP_CHECK(dec(len) == -EINVAL);
	put32(buf + 28, 0);
	/* 0 is every namespace; 1..65535 one of them; nothing else. */
	put32(buf + 24, KVC_PROTO_NS_ALL);
	TAP_CHECK(dec(len) == 0);
	put32(buf + 24, KVCACHE_NS_MAX);
	TAP_CHECK(dec(len) == 0);
	put32(buf + 24, KVCACHE_NS_MAX + 1);
	TAP_CHECK(dec(len) == -EINVAL);
	put32(buf + 24, 0xffffffffu);
	TAP_CHECK(dec(len) == -EINVAL);
	/* A bad namespace in a truncated body: the size is named first. */
	TAP_CHECK(dec(resize(28)) == -EBADMSG);
	resize(32);
	put32(buf + 24, 1);
	TAP_CHECK(dec(len) == 0);

	/* The reply: exactly 16 bytes, any counts. */
	len = (size_t)kvc_proto_encode_flush_reply(buf, sizeof(buf), 1, &r);
	TAP_CHECK(len == 40 && dec(len) == 0);
	TAP_CHECK(dec(resize(39)) == -EBADMSG);
	TAP_CHECK(dec(resize(32)) == -EBADMSG);
	TAP_CHECK(dec(resize(24)) == -EBADMSG);
	memset(buf + 40, 0, 8);
	TAP_CHECK(dec(resize(41)) == -EBADMSG);
	TAP_CHECK(dec(resize(48)) == -EBADMSG);
	resize(40);
	memset(buf + 24, 0xff, 16);
	TAP_CHECK(dec(len) == 0);

	/* The encoders refuse the same things. */
	TAP_CHECK(kvc_proto_encode_flush(buf, sizeof(buf), 1,
					 KVCACHE_NS_MAX + 1) == -EINVAL);
	TAP_CHECK(kvc_proto_encode_flush(buf, sizeof(buf), 1, 0xffffffffu) ==
		  -EINVAL);
	TAP_CHECK(kvc_proto_encode_flush_reply(buf, sizeof(buf), 1, NULL) ==
		  -EINVAL);
}

static void bad_ns_salt(void)
{
	struct kvc_ns_salt s = { .ns_id = 9 };
	struct kvc_ns_salt_reply r = { .ns_id = 9 };
	size_t len;

	len = (size_t)kvc_proto_encode_ns_salt(buf, sizeof(buf), 1, &s);
	TAP_CHECK(len == 64 && dec(len) == 0);
	/* Exactly 40 bytes of body. */
	TAP_CHECK(dec(resize(63)) == -EBADMSG);
	TAP_CHECK(dec(resize(24)) == -EBADMSG);
	buf[64] = 0;
	TAP_CHECK(dec(resize(65)) == -EBADMSG);
	TAP_CHECK(dec(resize(64)) == 0);
	/* Version 1 does not have it: an unknown type there. */
	put16(buf + 4, 1);
	TAP_CHECK(dec(len) == -EOPNOTSUPP);
	put16(buf + 4, 2);
	/* Namespace id 1..65535. */
	put32(buf + 24, 0);
	TAP_CHECK(dec(len) == -EINVAL);
	put32(buf + 24, KVCACHE_NS_MAX + 1);
	TAP_CHECK(dec(len) == -EINVAL);
	put32(buf + 24, 9);
	/* Unknown flags; a salt without SET (two encodings of a get). */
	put32(buf + 28, 2);
	TAP_CHECK(dec(len) == -EINVAL);
	put32(buf + 28, 0);
	buf[63] = 1;
	TAP_CHECK(dec(len) == -EINVAL);
	put32(buf + 28, KVC_PROTO_NS_SALT_SET);
	TAP_CHECK(dec(len) == 0);
	/* The encoder refuses what the decoder would. */
	s.salt[5] = 1;
	TAP_CHECK(kvc_proto_encode_ns_salt(buf, sizeof(buf), 1, &s) == -EINVAL);
	s.flags = 4;
	TAP_CHECK(kvc_proto_encode_ns_salt(buf, sizeof(buf), 1, &s) == -EINVAL);
	s = (struct kvc_ns_salt){ .ns_id = 0 };
	TAP_CHECK(kvc_proto_encode_ns_salt(buf, sizeof(buf), 1, &s) == -EINVAL);
	s.ns_id = 9;
	TAP_CHECK(kvc_proto_encode_ns_salt(buf, 63, 1, &s) == -ENOSPC);

	len = (size_t)kvc_proto_encode_ns_salt_reply(buf, sizeof(buf), 1, &r);
	TAP_CHECK(len == 64 && dec(len) == 0);
	TAP_CHECK(dec(resize(56)) == -EBADMSG);
	resize(len);
	put32(buf + 28, 1);
	TAP_CHECK(dec(len) == -EINVAL);		/* reserved */
	put32(buf + 28, 0);
	put32(buf + 24, 0);
	TAP_CHECK(dec(len) == -EINVAL);
	put32(buf + 24, 9);
	put16(buf + 4, 1);
	TAP_CHECK(dec(len) == -EOPNOTSUPP);
	put16(buf + 4, 2);
	TAP_CHECK(dec(len) == 0);
	r.ns_id = KVCACHE_NS_MAX + 1;
	TAP_CHECK(kvc_proto_encode_ns_salt_reply(buf, sizeof(buf), 1, &r) ==
		  -EINVAL);
}

static void bad_ns_list(void)
{
	struct kvc_ns_entry e[2] = {
		{ 3, 1000, 1000, 0750, 12 },
		{ 4, 0, 0, 0, 0 },
	};
	size_t len;

	/* The request: start and reserved, exactly 8 bytes. */
	len = (size_t)kvc_proto_encode_ns_list(buf, sizeof(buf), 1, 9);
	TAP_CHECK(len == 32 && dec(len) == 0);
	TAP_CHECK(dec(resize(31)) == -EBADMSG);
	TAP_CHECK(dec(resize(28)) == -EBADMSG);
	TAP_CHECK(dec(resize(24)) == -EBADMSG);		/* no body at all */
	memset(buf + 32, 0, 8);
	TAP_CHECK(dec(resize(33)) == -EBADMSG);
	TAP_CHECK(dec(resize(40)) == -EBADMSG);
	TAP_CHECK(dec(resize(32)) == 0);

	buf[31] = 1;
	TAP_CHECK(dec(len) == -EINVAL);		/* reserved */
	buf[31] = 0;
	put32(buf + 28, 0x80000000u);
	TAP_CHECK(dec(len) == -EINVAL);
	put32(buf + 28, 0);
	/* 0 and 1 both start at the first; up to 65535; nothing else. */
	put32(buf + 24, 0);
	TAP_CHECK(dec(len) == 0);
	put32(buf + 24, 1);
	TAP_CHECK(dec(len) == 0);
	put32(buf + 24, KVCACHE_NS_MAX);
	TAP_CHECK(dec(len) == 0);
	put32(buf + 24, KVCACHE_NS_MAX + 1);
	TAP_CHECK(dec(len) == -EINVAL);
	put32(buf + 24, 0xffffffffu);
	TAP_CHECK(dec(len) == -EINVAL);
	/* A bad start in a truncated body: the size is named first. */
	TAP_CHECK(dec(resize(28)) == -EBADMSG);
	resize(32);
	put32(buf + 24, 9);
	TAP_CHECK(dec(len) == 0);

	len = (size_t)kvc_proto_encode_ns_list_reply(buf, sizeof(buf), 1, 0,
						     e, 2);
	TAP_CHECK(len == 32 + 48 && dec(len) == 0);

	/* Counts: above the limit, not fitting either way. */
	put32(buf + 24, KVC_PROTO_MAX_BATCH + 1);
	TAP_CHECK(dec(len) == -E2BIG);
	put32(buf + 24, 0xffffffffu);
	TAP_CHECK(dec(len) == -E2BIG);
	put32(buf + 24, 3);
	TAP_CHECK(dec(len) == -EBADMSG);
	put32(buf + 24, 1);
	TAP_CHECK(dec(len) == -EBADMSG);	/* an entry left over */
	put32(buf + 24, 0);
	TAP_CHECK(dec(len) == -EBADMSG);	/* two left over */
	TAP_CHECK(dec(resize(32)) == 0);	/* empty is valid */
	resize(len);
	put32(buf + 24, 2);

	/* next: 0, or above the last entry (4) and at most 65535. */
	put32(buf + 28, 5);
	TAP_CHECK(dec(len) == 0);
	put32(buf + 28, KVCACHE_NS_MAX);
	TAP_CHECK(dec(len) == 0);
	put32(buf + 28, 4);
	TAP_CHECK(dec(len) == -EINVAL);		/* the last entry again */
	put32(buf + 28, 3);
	TAP_CHECK(dec(len) == -EINVAL);		/* backwards */
	put32(buf + 28, 1);
	TAP_CHECK(dec(len) == -EINVAL);
	put32(buf + 28, KVCACHE_NS_MAX + 1);
	TAP_CHECK(dec(len) == -EINVAL);
	put32(buf + 28, 0x80000000u);
	TAP_CHECK(dec(len) == -EINVAL);
	/* Out of range, it is a fixed-part field: named before the count. */
	put32(buf + 24, 3);
	TAP_CHECK(dec(len) == -EINVAL);
	put32(buf + 24, KVC_PROTO_MAX_BATCH + 1);
	TAP_CHECK(dec(len) == -EINVAL);
	/* In range, it is checked against the entries, so after them. */
	put32(buf + 28, 5);
	TAP_CHECK(dec(len) == -E2BIG);
	put32(buf + 24, 3);
	TAP_CHECK(dec(len) == -EBADMSG);
	/* No entries: nothing to be above, so the list is complete. */
	put32(buf + 24, 0);
	TAP_CHECK(dec(resize(32)) == -EINVAL);
	put32(buf + 28, 0);
	TAP_CHECK(dec(resize(32)) == 0);
	resize(len);
	put32(buf + 24, 2);
	TAP_CHECK(dec(len) == 0);

	/* Truncated, with a consistent length field. */
	TAP_CHECK(dec(resize(len - 1)) == -EBADMSG);	/* inside blocks */
	TAP_CHECK(dec(resize(len - 24)) == -EBADMSG);
	TAP_CHECK(dec(resize(31)) == -EBADMSG);	/* inside the fixed part */
	TAP_CHECK(dec(resize(24)) == -EBADMSG);
	/* Trailing bytes. */
	buf[len] = 0;
	TAP_CHECK(dec(resize(len + 1)) == -EBADMSG);
	TAP_CHECK(dec(resize(len)) == 0);

	/* Entry 1 starts at 32 + 24 = 56: ns_id +0, mode +12. */
	put32(buf + 56, 0);
	TAP_CHECK(dec(len) == -EINVAL);		/* namespace 0 */
	put32(buf + 56, KVCACHE_NS_MAX + 1);
	TAP_CHECK(dec(len) == -EINVAL);
	put32(buf + 56, 3);
	TAP_CHECK(dec(len) == -EINVAL);		/* a duplicate id */
	put32(buf + 56, 2);
	TAP_CHECK(dec(len) == -EINVAL);		/* ids out of order */
	put32(buf + 56, KVCACHE_NS_MAX);
	TAP_CHECK(dec(len) == 0);
	put32(buf + 56 + 12, 01000);
	TAP_CHECK(dec(len) == -EINVAL);		/* mode > 0777 */
	put32(buf + 56 + 12, 0x80000000u);
	TAP_CHECK(dec(len) == -EINVAL);
	put32(buf + 56 + 12, 0777);
	TAP_CHECK(dec(len) == 0);
	put32(buf + 32, 0);
	TAP_CHECK(dec(len) == -EINVAL);		/* the first entry too */
	put32(buf + 32, 1);
	/* Any uid, gid and block count. */
	memset(buf + 56 + 4, 0xff, 8);
	memset(buf + 56 + 16, 0xff, 8);
	TAP_CHECK(dec(len) == 0);

	/* The encoders refuse the same things. */
	TAP_CHECK(kvc_proto_encode_ns_list(buf, sizeof(buf), 1,
					   KVCACHE_NS_MAX + 1) == -EINVAL);
	TAP_CHECK(kvc_proto_encode_ns_list(buf, sizeof(buf), 1,
					   0xffffffffu) == -EINVAL);
	e[1].ns_id = 3;
	TAP_CHECK(kvc_proto_encode_ns_list_reply(buf, sizeof(buf), 1, 0, e,
						 2) == -EINVAL);
	e[1].ns_id = 2;
	TAP_CHECK(kvc_proto_encode_ns_list_reply(buf, sizeof(buf), 1, 0, e,
						 2) == -EINVAL);
	e[1].ns_id = KVCACHE_NS_MAX + 1;
	TAP_CHECK(kvc_proto_encode_ns_list_reply(buf, sizeof(buf), 1, 0, e,
						 2) == -EINVAL);
	e[1].ns_id = 4;
	e[0].ns_id = 0;
	TAP_CHECK(kvc_proto_encode_ns_list_reply(buf, sizeof(buf), 1, 0, e,
						 1) == -EINVAL);
	e[0].ns_id = 3;
	e[0].mode = 01777;
	TAP_CHECK(kvc_proto_encode_ns_list_reply(buf, sizeof(buf), 1, 0, e,
						 2) == -EINVAL);
	e[0].mode = 0777;
	TAP_CHECK(kvc_proto_encode_ns_list_reply(buf, sizeof(buf), 1, 0, NULL,
						 1) == -EINVAL);
	TAP_CHECK(kvc_proto_encode_ns_list_reply(buf, sizeof(buf), 1, 4, e,
						 2) == -EINVAL);
	TAP_CHECK(kvc_proto_encode_ns_list_reply(buf, sizeof(buf), 1, 3, e,
						 2) == -EINVAL);
	TAP_CHECK(kvc_proto_encode_ns_list_reply(buf, sizeof(buf), 1,
						 KVCACHE_NS_MAX + 1, e, 2) ==
		  -EINVAL);
	/* next is checked against the entries given, not the array. */
	TAP_CHECK(kvc_proto_encode_ns_list_reply(buf, sizeof(buf), 1, 4, e,
						 1) == 56);
	TAP_CHECK(kvc_proto_encode_ns_list_reply(buf, sizeof(buf), 1, 5, NULL,
						 0) == -EINVAL);
	TAP_CHECK(kvc_proto_encode_ns_list_reply(buf, sizeof(buf), 1, 0, NULL,
						 0) == 32);
	TAP_CHECK(kvc_proto_encode_ns_list_reply(buf, sizeof(buf), 1, 5, e,
						 2) == 80);
}

static void encoder_limits(void)
{
	static uint8_t keys[KVC_PROTO_MAX_BATCH + 1][KVCACHE_KEY_SIZE];
	struct kvc_hello h = { 2, 1, 0 };
	struct kvc_hello_reply hr = {
		1, KVC_PROTO_MODE_KERNEL, 16, 0, 4096, 8
	};
	struct kvc_stat st[1] = { { "bad name", 8, 0 } };
	int32_t status[1] = { 1 };
	uint8_t small[80];
	int n;

	TAP_CHECK(kvc_proto_encode_hello(buf, sizeof(buf), 1, &h) == -EINVAL);
	hr.version = KVC_PROTO_VERSION_MAX + 1;
	TAP_CHECK(kvc_proto_encode_hello_reply(buf, sizeof(buf), 1, &hr) ==
		  -EINVAL);
	hr.version = 1;
	hr.caps = 1ull << 5;
	TAP_CHECK(kvc_proto_encode_hello_reply(buf, sizeof(buf), 1, &hr) ==
		  -EINVAL);
	TAP_CHECK(kvc_proto_encode_lookup(buf, sizeof(buf), 1, 1, 1, keys[0],
					  KVC_PROTO_MAX_BATCH + 1) == -EINVAL);
	TAP_CHECK(kvc_proto_encode_lookup(buf, sizeof(buf), 1, 0, 1, keys[0],
					  1) == -EINVAL);
	TAP_CHECK(kvc_proto_encode_lookup(buf, sizeof(buf), 1, 1, 0, keys[0],
					  1) == -EINVAL);
	TAP_CHECK(kvc_proto_encode_load(buf, sizeof(buf), 1, 1, keys[0], 0) ==
		  -EINVAL);
	TAP_CHECK(kvc_proto_encode_store_reply(buf, sizeof(buf), 1, status,
					       1) == -EINVAL);
	TAP_CHECK(kvc_proto_encode_stats_reply(buf, sizeof(buf), 1, st, 1) ==
		  -EINVAL);
	TAP_CHECK(kvc_proto_encode_error(buf, sizeof(buf), 0, 1, 1, "x") ==
		  -EINVAL);
	TAP_CHECK(kvc_proto_encode_error(buf, sizeof(buf), EIO, 1, 1, "x") ==
		  -EINVAL);

	/* Too small a buffer: -ENOSPC and not a byte written. */
	memset(small, 0xa5, sizeof(small));
	n = kvc_proto_encode_lookup(small, 40 + 31, 1, 1, 1, keys[0], 1);
	TAP_CHECK(n == -ENOSPC);
	n = kvc_proto_encode_stats(small, 23, 1);
	TAP_CHECK(n == -ENOSPC);
	n = kvc_proto_encode_ns_create_reply(small, 23, 1);
	TAP_CHECK(n == -ENOSPC);
	n = kvc_proto_encode_alloc(small, 31, 1, 1, 1);
	TAP_CHECK(n == -ENOSPC);
	n = kvc_proto_encode_evict(small, 32 + 31, 1, 1, keys[0], 1);
	TAP_CHECK(n == -ENOSPC);
	n = kvc_proto_encode_flush(small, 31, 1, 1);
	TAP_CHECK(n == -ENOSPC);
	n = kvc_proto_encode_flush_reply(small, 39, 1,
					 &(struct kvc_flush_reply){ 1, 2 });
	TAP_CHECK(n == -ENOSPC);
	n = kvc_proto_encode_ns_list(small, 31, 1, 1);
	TAP_CHECK(n == -ENOSPC);
	n = kvc_proto_encode_ns_list_reply(small, 55, 1, 0,
					   &(struct kvc_ns_entry){ 1, 0, 0,
								   0, 0 },
					   1);
	TAP_CHECK(n == -ENOSPC);
	for (size_t i = 0; i < sizeof(small); i++)
		TAP_CHECK(small[i] == 0xa5);
	TAP_CHECK(kvc_proto_encode_lookup(small, 40 + 32, 1, 1, 1, keys[0],
					  1) ==
		  72);
}

static void error_replies(void)
{
	static char longmsg[400];
	struct kvc_msg m, e;
	size_t len = lookup_msg(1);
	uint8_t out[KVC_PROTO_HDR_SIZE + 12 + KVC_PROTO_ERRMSG_MAX];
	int n;

	/* A bad message whose header could be read: answer its seq. */
	put32(buf + 8, 0xabcd);
	put32(buf + 28, 0);
	TAP_CHECK(kvc_proto_decode(buf, len, &m) == -EINVAL);
	n = kvc_proto_encode_decode_error(out, sizeof(out), -EINVAL, &m);
	TAP_CHECK(n > 36 && kvc_proto_decode(out, (size_t)n, &e) == 0);
	TAP_CHECK(e.type == KVC_MSG_ERROR && e.seq == 0xabcd);
	TAP_CHECK(e.error.error == -EINVAL && e.error.bad_seq == 0xabcd);
	TAP_CHECK(e.error.bad_type == KVC_MSG_LOOKUP);
	TAP_CHECK(e.error.msg_len == strlen(m.reason) &&
		  !memcmp(e.error.msg, m.reason, e.error.msg_len));
	printf("# reason: %.*s\n", (int)e.error.msg_len, e.error.msg);

	/* A stranger's datagram: nothing to echo, still an answer. */
	memset(buf, 'x', 100);
	TAP_CHECK(kvc_proto_decode(buf, 100, &m) == -EPROTO);
	TAP_CHECK(m.seq == 0 && m.type == 0);
	n = kvc_proto_encode_decode_error(out, sizeof(out), -EPROTO, &m);
	TAP_CHECK(n > 36 && kvc_proto_decode(out, (size_t)n, &e) == 0);
	TAP_CHECK(e.error.error == -EPROTO && e.error.bad_seq == 0);

	/* Long or unprintable messages are cut and cleaned, not refused. */
	memset(longmsg, 'z', sizeof(longmsg) - 1);
	longmsg[3] = '\n';
	longmsg[4] = (char)0xc3;
	n = kvc_proto_encode_error(out, sizeof(out), -ENOMEM, 1, 0, longmsg);
	TAP_CHECK(n == (int)sizeof(out));
	TAP_CHECK(kvc_proto_decode(out, (size_t)n, &e) == 0);
	TAP_CHECK(e.error.msg_len == KVC_PROTO_ERRMSG_MAX);
	TAP_CHECK(!memcmp(e.error.msg, "zzz??zz", 7));
	n = kvc_proto_encode_error(out, sizeof(out), -ENOMEM, 1, 0, NULL);
	TAP_CHECK(n == 36);
}

static void versions(void)
{
	TAP_CHECK(kvc_proto_choose_version(1, 1) == 1);
	TAP_CHECK(kvc_proto_choose_version(1, 9) == KVC_PROTO_VERSION_MAX);
	TAP_CHECK(kvc_proto_choose_version(KVC_PROTO_VERSION_MAX + 1, 9) ==
		  -EPROTONOSUPPORT);
	TAP_CHECK(kvc_proto_choose_version(2, 1) == -EPROTONOSUPPORT);
	TAP_CHECK(kvc_proto_is_request(KVC_MSG_HELLO));
	TAP_CHECK(kvc_proto_is_request(KVC_MSG_STATS));
	TAP_CHECK(kvc_proto_is_request(KVC_MSG_NS_CREATE));
	TAP_CHECK(kvc_proto_is_request(KVC_MSG_ALLOC));
	TAP_CHECK(kvc_proto_is_request(KVC_MSG_SEAL));
	TAP_CHECK(kvc_proto_is_request(KVC_MSG_EVICT));
	TAP_CHECK(kvc_proto_is_request(KVC_MSG_FLUSH));
	TAP_CHECK(kvc_proto_is_request(KVC_MSG_NS_LIST));
	TAP_CHECK(kvc_proto_is_request(KVC_MSG_NS_LIST + 1));	/* NS_SALT */
	TAP_CHECK(!kvc_proto_is_request(KVC_MSG_SEAL_REPLY));
	TAP_CHECK(!kvc_proto_is_request(KVC_MSG_EVICT_REPLY));
	TAP_CHECK(!kvc_proto_is_request(KVC_MSG_FLUSH_REPLY));
	TAP_CHECK(!kvc_proto_is_request(KVC_MSG_NS_LIST_REPLY));
	TAP_CHECK(!kvc_proto_is_request(KVC_MSG_ERROR));
	TAP_CHECK(!kvc_proto_is_request(KVC_MSG_LOOKUP_REPLY));
	TAP_CHECK(!kvc_proto_is_request(0));
	TAP_CHECK(kvc_proto_is_request(KVC_MSG_NS_SALT));
	TAP_CHECK(kvc_proto_is_request(KVC_MSG_FAST_MAP));
	TAP_CHECK(kvc_proto_is_request(KVC_MSG_TOUCH));
	TAP_CHECK(kvc_proto_is_request(KVC_MSG_FAST_NS));
	TAP_CHECK(!kvc_proto_is_request(KVC_MSG_FAST_NS + 1));
	TAP_CHECK(!kvc_proto_is_request(KVC_MSG_FAST_NS_REPLY));
	TAP_CHECK(!kvc_proto_is_request(KVC_MSG_NS_SALT_REPLY));
	TAP_CHECK(!kvc_proto_is_request(KVC_MSG_FAST_MAP_REPLY));
	/* Version 2 is the one with NS_SALT. */
	TAP_CHECK(KVC_PROTO_VERSION_MAX >= KVC_PROTO_VERSION_NS_SALT);
	TAP_CHECK(kvc_proto_choose_version(1, 2) == 2);
	TAP_CHECK(kvc_proto_choose_version(1, 1) == 1);
	TAP_CHECK(kvc_proto_choose_version(2, 2) == 2);
	/* Version 3 is the one with STORE's SEAL. */
	TAP_CHECK(KVC_PROTO_VERSION_MAX >= KVC_PROTO_VERSION_STORE_SEAL);
	TAP_CHECK(kvc_proto_choose_version(1, 3) == 3);
	TAP_CHECK(kvc_proto_choose_version(2, 9) == KVC_PROTO_VERSION_MAX);
	/* Version 4 is the one with FAST_MAP and TOUCH. */
	TAP_CHECK(KVC_PROTO_VERSION_MAX >= KVC_PROTO_VERSION_FAST);
	TAP_CHECK(kvc_proto_choose_version(1, 4) == 4);
	/* Version 5 is the one with FAST_NS. */
	TAP_CHECK(KVC_PROTO_VERSION_MAX >= KVC_PROTO_VERSION_FAST_NS);
	TAP_CHECK(kvc_proto_choose_version(1, 5) == 5);
}

/*
 * FAST_MAP, its reply and TOUCH: version 4 only, FAST_MAP without a
 * body, TOUCH with RELEASE's (a non-empty list of handles), and TOUCH
 * has no reply type. FAST_NS and its reply: version 5 only, a namespace
 * in range and a zero reserved word.
 */
static void fast_messages(void)
{
	const struct kvcache_handle h[2] = { { 3, 7 }, { 9, 1 } };
	struct kvcache_handle g;
	struct kvc_touch t;
	uint8_t buf[256];
	struct kvc_msg m;
	int n;

	n = kvc_proto_encode_fast_map(buf, sizeof(buf), 5);
	TAP_CHECK(n == KVC_PROTO_HDR_SIZE);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.type == KVC_MSG_FAST_MAP && m.version == 4 && m.seq == 5);
	n = kvc_proto_encode_fast_map_reply(buf, sizeof(buf), 5);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.type == KVC_MSG_FAST_MAP_REPLY);

	/* Under an older header the types do not exist. */
	put16(buf + 4, 3);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == -EOPNOTSUPP);
	n = kvc_proto_encode_fast_map(buf, sizeof(buf), 5);
	put16(buf + 4, 3);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == -EOPNOTSUPP);

	/* FAST_MAP has no body. */
	n = kvc_proto_encode_fast_map(buf, sizeof(buf), 5);
	memset(buf + n, 0, 8);
	put32(buf + 12, (uint32_t)n + 8);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n + 8, &m) == -EBADMSG);

	t = (struct kvc_touch){ .count = 2, .lookups = 1, .lookup_keys = 5,
				.hit_keys = 5 };
	n = kvc_proto_encode_touch(buf, sizeof(buf), 6, &t, h);
	TAP_CHECK(n == KVC_PROTO_HDR_SIZE + 24 + 16);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.type == KVC_MSG_TOUCH && m.version == 4);
	TAP_CHECK(m.touch.count == 2 && m.touch.lookups == 1 &&
		  m.touch.lookup_keys == 5 && m.touch.hit_keys == 5);
	kvc_proto_touch_handle(&m.touch, 1, &g);
	TAP_CHECK(g.index == 9 && g.gen == 1);
	put16(buf + 4, 3);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == -EOPNOTSUPP);
	/* Lookups alone are something to report; nothing at all is not. */
	t = (struct kvc_touch){ .lookups = 1, .lookup_keys = 3, .hit_keys = 3 };
	n = kvc_proto_encode_touch(buf, sizeof(buf), 6, &t, NULL);
	TAP_CHECK(n > 0 && kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.touch.count == 0 && m.touch.lookup_keys == 3);
	t = (struct kvc_touch){ 0 };
	TAP_CHECK(kvc_proto_encode_touch(buf, sizeof(buf), 6, &t, h) == -EINVAL);
	t = (struct kvc_touch){ .lookup_keys = 1, .hit_keys = 2 };
	TAP_CHECK(kvc_proto_encode_touch(buf, sizeof(buf), 6, &t, h) == -EINVAL);
	/* Nothing, more hits than keys, reserved fields, a count too far. */
	t = (struct kvc_touch){ .count = 1 };
	n = kvc_proto_encode_touch(buf, sizeof(buf), 6, &t, h);
	put32(buf + KVC_PROTO_HDR_SIZE, 0);
	put32(buf + 12, (uint32_t)n - 8);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n - 8, &m) == -EINVAL);
	put32(buf + 12, (uint32_t)n);
	put32(buf + KVC_PROTO_HDR_SIZE, 1);
	put32(buf + KVC_PROTO_HDR_SIZE + 16, 1);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == -EINVAL);
	put32(buf + KVC_PROTO_HDR_SIZE + 16, 0);
	put32(buf + KVC_PROTO_HDR_SIZE + 20, 1);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == -EINVAL);
	put32(buf + KVC_PROTO_HDR_SIZE + 20, 0);
	put32(buf + KVC_PROTO_HDR_SIZE, 2);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == -EBADMSG);
	put32(buf + KVC_PROTO_HDR_SIZE, 1);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	/* Nobody answers a TOUCH: its reply type is unknown. */
	put16(buf + 6, KVC_MSG_TOUCH | KVC_MSG_REPLY);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == -EOPNOTSUPP);

	/* FAST_NS: version 5, one namespace id and a zero reserved word. */
	n = kvc_proto_encode_fast_ns(buf, sizeof(buf), 8, 42);
	TAP_CHECK(n == KVC_PROTO_HDR_SIZE + 8);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.type == KVC_MSG_FAST_NS && m.version == 5 &&
		  m.seq == 8 && m.fast_ns.ns_id == 42);
	put16(buf + 4, 4);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == -EOPNOTSUPP);
	put16(buf + 4, 5);
	put32(buf + KVC_PROTO_HDR_SIZE + 4, 1);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == -EINVAL);
	put32(buf + KVC_PROTO_HDR_SIZE + 4, 0);
	put32(buf + KVC_PROTO_HDR_SIZE, 0);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == -EINVAL);
	put32(buf + KVC_PROTO_HDR_SIZE, KVCACHE_NS_MAX + 1);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == -EINVAL);
	put32(buf + 12, (uint32_t)n - 4);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n - 4, &m) == -EBADMSG);
	TAP_CHECK(kvc_proto_encode_fast_ns(buf, sizeof(buf), 8, 0) == -EINVAL);
	TAP_CHECK(kvc_proto_encode_fast_ns(buf, sizeof(buf), 8,
					   KVCACHE_NS_MAX + 1) == -EINVAL);
	n = kvc_proto_encode_fast_ns_reply(buf, sizeof(buf), 8);
	TAP_CHECK(n == KVC_PROTO_HDR_SIZE);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0);
	TAP_CHECK(m.type == KVC_MSG_FAST_NS_REPLY && m.version == 5);
	memset(buf + n, 0, 8);
	put32(buf + 12, (uint32_t)n + 8);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n + 8, &m) == -EBADMSG);
}

/*
 * After HELLO a peer restamps its messages with the negotiated version:
 * a version-1 layout under header 2 decodes as the same message; HELLO,
 * its reply and ERROR stay (and must be) version 1; nothing goes below
 * the version a message needs.
 */
static void restamp(void)
{
	static uint8_t keys[2][KVCACHE_KEY_SIZE];
	struct kvc_hello h = { .min_version = 1, .max_version = 2 };
	struct kvc_ns_salt s = { .ns_id = 3 };
	struct kvc_msg m;
	int n;

	n = kvc_proto_encode_lookup(buf, sizeof(buf), 5, 3, 1, keys[0], 2);
	TAP_CHECK(n > 0 && buf[4] == 1);
	TAP_CHECK(kvc_proto_set_version(buf, n, 2) == n && buf[4] == 2);
	TAP_CHECK(kvc_proto_decode(buf, (size_t)n, &m) == 0 &&
		  m.version == 2 && m.type == KVC_MSG_LOOKUP &&
		  m.lookup.count == 2);
	TAP_CHECK(same_after_roundtrip(buf, n));
	/* An unknown version is left alone (the encoder's stays). */
	TAP_CHECK(kvc_proto_set_version(buf, n, KVC_PROTO_VERSION_MAX + 1) ==
		  n && buf[4] == 2);

	n = kvc_proto_encode_hello(buf, sizeof(buf), 5, &h);
	TAP_CHECK(kvc_proto_set_version(buf, n, 2) == n && buf[4] == 1);
	put16(buf + 4, 2);
	TAP_CHECK(dec((size_t)n) == -EPROTONOSUPPORT);
	n = kvc_proto_encode_error(buf, sizeof(buf), -EIO, 5, 2, "x");
	TAP_CHECK(kvc_proto_set_version(buf, n, 2) == n && buf[4] == 1);
	put16(buf + 4, 2);
	TAP_CHECK(dec((size_t)n) == -EPROTONOSUPPORT);

	n = kvc_proto_encode_ns_salt(buf, sizeof(buf), 5, &s);
	TAP_CHECK(kvc_proto_set_version(buf, n, 1) == n && buf[4] == 2);
	/* An encoder's error passes through. */
	TAP_CHECK(kvc_proto_set_version(buf, -ENOSPC, 2) == -ENOSPC);
}

/* ---- fuzz ------------------------------------------------------------ */

static const char *const stat_names[] = { "a", "pool.hits", "g4-misses" };

/* A random valid message of a random type in p; its length. */
static size_t random_valid(uint8_t *p, size_t size)
{
	static uint8_t keys[8][KVCACHE_KEY_SIZE];
	struct kvc_lookup_entry le[8];
	struct kvc_store_entry se[8];
	struct kvc_load_result lr[8];
	struct kvcache_handle h[8];
	struct kvc_stat st[8];
	struct kvc_seal_entry sl[8];
	struct kvc_ns_entry ne[8];
	int32_t status[8];
	uint32_t n = rnd_below(8), seq = (uint32_t)rnd();
	uint32_t next_ns = 1 + rnd_below(KVCACHE_NS_MAX - 8 * 256);
	uint32_t ns = 1 + rnd_below(KVCACHE_NS_MAX);
	int len = -1;

	for (uint32_t i = 0; i < 8; i++) {
		fill_key(keys[i], (unsigned int)rnd());
		memset(&se[i], 0, sizeof(se[i]));
		memcpy(se[i].key, keys[i], KVCACHE_KEY_SIZE);
		if (rnd() & 1)
			se[i].flags = KVC_PROTO_STORE_FIRST;
		else
			fill_key(se[i].parent, (unsigned int)rnd());
		if (rnd() & 1) {
			se[i].flags |= KVC_PROTO_STORE_SEAL;
			se[i].payload_len = 1 + rnd_below(1u << 30);
		}
		se[i].handle.index = (uint32_t)rnd();
		se[i].handle.gen = (uint32_t)rnd();
		le[i].tiers = 1 + rnd_below(7);		/* 1..7 */
		le[i].handle.index = le[i].tiers & 1 ? (uint32_t)rnd() : 0;
		le[i].handle.gen = le[i].tiers & 1 ? (uint32_t)rnd() : 0;
		status[i] = rnd() & 1 ? 0 : -(int32_t)(1 + rnd_below(200));
		lr[i].status = status[i];
		lr[i].handle.index = status[i] ? 0 : (uint32_t)rnd();
		lr[i].handle.gen = status[i] ? 0 : (uint32_t)rnd();
		h[i].index = (uint32_t)rnd();
		h[i].gen = (uint32_t)rnd();
		st[i].name = stat_names[i % 3];
		st[i].name_len = (uint16_t)strlen(st[i].name);
		st[i].value = rnd();
		memcpy(sl[i].key, keys[i], KVCACHE_KEY_SIZE);
		sl[i].handle = h[i];
		sl[i].payload_len = 1 + (uint32_t)(rnd() % 0xffffffffu);
		sl[i].flags = (uint32_t)(rnd() & KVC_PROTO_SEAL_FLAGS_ALL);
		/* Ascending ids, as NS_LIST replies need them. */
		ne[i].ns_id = next_ns;
		next_ns += 1 + rnd_below(256);
		ne[i].uid = (uint32_t)rnd();
		ne[i].gid = (uint32_t)rnd();
		ne[i].mode = rnd_below(KVC_PROTO_NS_MODE_MAX + 1);
		ne[i].blocks = rnd() >> rnd_below(64);
	}
	switch (rnd_below(27)) {
	/*
	 * One rnd() per statement: the order of evaluation inside an
	 * initializer list is unspecified, and the sequence must not depend
	 * on the compiler.
	 */
	case 0: {
		struct kvc_hello hh = { .min_version = 1 };

		hh.max_version = (uint16_t)(1 + rnd_below(3));
		hh.caps = rnd();
		len = kvc_proto_encode_hello(p, size, seq, &hh);
		break;
	}
	case 1: {
		struct kvc_hello_reply r = { .version = 1 };

		r.mode = KVC_PROTO_MODE_KERNEL + (uint16_t)rnd_below(2);
		r.max_batch = 1 + rnd_below(KVC_PROTO_MAX_STORE);
		r.caps = rnd() & KVC_PROTO_CAP_ALL;
		r.block_size = 1 + rnd_below(1u << 24);
		r.nr_blocks = rnd();
		len = kvc_proto_encode_hello_reply(p, size, seq, &r);
		break;
	}
	case 2:
		len = kvc_proto_encode_lookup(p, size, seq, ns,
					      1 + rnd_below(7), keys[0],
					      n + 1);
		break;
	case 3:
		len = kvc_proto_encode_lookup_reply(p, size, seq, le, n);
		break;
	case 4:
		len = kvc_proto_encode_store(p, size, seq, ns, se, n + 1);
		break;
	case 5:
		len = kvc_proto_encode_store_reply(p, size, seq, status, n);
		break;
	case 6:
		len = kvc_proto_encode_load(p, size, seq, ns, keys[0],
					    n + 1);
		break;
	case 7:
		len = kvc_proto_encode_load_reply(p, size, seq, lr, n);
		break;
	case 8:
		len = kvc_proto_encode_release(p, size, seq, h, n + 1);
		break;
	case 9:
		len = kvc_proto_encode_release_reply(p, size, seq, status, n);
		break;
	case 10:
		len = kvc_proto_encode_stats(p, size, seq);
		break;
	case 11:
		len = kvc_proto_encode_stats_reply(p, size, seq, st, n);
		break;
	case 12:
		len = kvc_proto_encode_error(p, size,
					     status[0] ? status[0] : -1, seq,
					     (uint16_t)rnd(),
					     stat_names[n % 3]);
		break;
	case 13: {
		struct kvc_ns_create c = { .ns_id = ns };

		c.uid = (uint32_t)rnd();
		c.gid = (uint32_t)rnd();
		c.mode = rnd_below(KVC_PROTO_NS_MODE_MAX + 1);
		len = kvc_proto_encode_ns_create(p, size, seq, &c);
		break;
	}
	case 14:
		len = kvc_proto_encode_ns_create_reply(p, size, seq);
		break;
	case 15:
		len = kvc_proto_encode_alloc(p, size, seq, ns,
					     1 + rnd_below(KVC_PROTO_MAX_BATCH));
		break;
	case 16:
		len = kvc_proto_encode_alloc_reply(p, size, seq, h, n + 1);
		break;
	case 17:
		len = kvc_proto_encode_seal(p, size, seq, sl, n + 1);
		break;
	case 18:
		len = kvc_proto_encode_seal_reply(p, size, seq, status, n);
		break;
	case 19:
		len = kvc_proto_encode_evict(p, size, seq, ns, keys[0],
					     n + 1);
		break;
	case 20:
		len = kvc_proto_encode_evict_reply(p, size, seq, status, n);
		break;
	case 21:
		len = kvc_proto_encode_flush(p, size, seq,
					     rnd() & 1 ? KVC_PROTO_NS_ALL : ns);
		break;
	case 22: {
		struct kvc_flush_reply r;

		r.evicted = rnd() >> rnd_below(64);
		r.busy = rnd() >> rnd_below(64);
		len = kvc_proto_encode_flush_reply(p, size, seq, &r);
		break;
	}
	case 23:
		len = kvc_proto_encode_ns_list(p, size, seq,
					       rnd_below(KVCACHE_NS_MAX + 1));
		break;
	case 24: {
		/* next: 0 (complete), or anywhere above the last entry. */
		uint32_t next = 0;

		if (n && (rnd() & 1))
			next = ne[n - 1].ns_id + 1 +
			       rnd_below(KVCACHE_NS_MAX - ne[n - 1].ns_id);
		len = kvc_proto_encode_ns_list_reply(p, size, seq, next, ne,
						     n);
		break;
	}
	case 25: {
		struct kvc_ns_salt sa = { .ns_id = ns };

		if (rnd() & 1) {
			sa.flags = KVC_PROTO_NS_SALT_SET;
			memcpy(sa.salt, keys[1], KVC_PROTO_SALT_SIZE);
		}
		len = kvc_proto_encode_ns_salt(p, size, seq, &sa);
		break;
	}
	case 26: {
		struct kvc_ns_salt_reply sr = { .ns_id = ns };

		memcpy(sr.salt, keys[2], KVC_PROTO_SALT_SIZE);
		len = kvc_proto_encode_ns_salt_reply(p, size, seq, &sr);
		break;
	}
	}
	/* After a HELLO both sides restamp with the negotiated version. */
	if (len > 0 && (rnd() & 1))
		len = kvc_proto_set_version(p, len, 2);
	if (len < 0)
		abort();	/* the generator builds valid messages only */
	return (size_t)len;
}

static int documented_errno(int err)
{
	return err == -EMSGSIZE || err == -EBADMSG || err == -EPROTO ||
	       err == -EPROTONOSUPPORT || err == -EINVAL ||
	       err == -EOPNOTSUPP || err == -E2BIG;
}

struct fuzz_counts {
	unsigned long accepted, rejected, bad;
};

/* One datagram: accepted and canonical, or refused with a usable ERROR. */
static void fuzz_one(const uint8_t *p, size_t len, struct fuzz_counts *c)
{
	uint8_t out[KVC_PROTO_HDR_SIZE + 12 + KVC_PROTO_ERRMSG_MAX];
	struct kvc_msg m, e;
	uint8_t *copy;
	int ret, n;

	ret = decode_exact(p, len, &m, &copy);
	if (!ret) {
		n = reencode(&m, buf2, sizeof(buf2));
		if (n < 0 || (size_t)n != len || memcmp(buf2, p, len)) {
			if (c->bad++ < 5)
				printf("# accepted, not canonical: type %#x len %zu -> %d\n",
				       m.type, len, n);
		} else {
			c->accepted++;
		}
	} else {
		c->rejected++;
		n = kvc_proto_encode_decode_error(out, sizeof(out), ret, &m);
		if (!documented_errno(ret) || !m.reason || n < 0 ||
		    kvc_proto_decode(out, (size_t)n, &e) ||
		    e.type != KVC_MSG_ERROR || e.error.error != ret) {
			if (c->bad++ < 5)
				printf("# bad rejection: %d\n", ret);
		}
	}
	free(copy);
}

static void fuzz(void)
{
	static uint8_t msg[4096];
	struct fuzz_counts c = { 0 };
	unsigned long mutated_ok = 0;

	rng_state = KVC_GOLDEN_GAMMA;
	for (int it = 0; it < FUZZ_ITERATIONS; it++) {
		size_t len = random_valid(msg, sizeof(msg)), cut;
		unsigned long before = c.accepted;
		int flips;

		switch (it % 5) {
		case 0:	/* random bytes, sometimes behind a valid header */
			len = rnd_below(400);
			for (size_t i = 0; i < len; i++)
				msg[i] = (uint8_t)rnd();
			if (len >= KVC_PROTO_HDR_SIZE && (rnd() & 1)) {
				put32(msg, KVC_PROTO_MAGIC);
				put16(msg + 4, KVC_PROTO_VERSION);
				put32(msg + 12, (uint32_t)len);
				memset(msg + 16, 0, 8);
				put16(msg + 6, (uint16_t)(1 + rnd_below(13)) |
					       (rnd() & 1 ? KVC_MSG_REPLY : 0));
			}
			break;
		case 1:	/* truncated, with or without a fixed length field */
			cut = rnd_below((uint32_t)len + 1);
			if (cut >= 16 && (rnd() & 1))
				put32(msg + 12, (uint32_t)cut);
			len = cut;
			break;
		case 2:	/* bit flips */
			flips = 1 + (int)rnd_below(4);
			for (int i = 0; i < flips; i++)
				msg[rnd_below((uint32_t)len)] ^=
					(uint8_t)(1u << rnd_below(8));
			break;
		case 3:	/* a byte of the body set to an edge value */
			if (len > KVC_PROTO_HDR_SIZE) {
				static const uint8_t edge[] = {
					0, 1, 2, 0x7f, 0x80, 0xff,
				};

				size_t at = KVC_PROTO_HDR_SIZE +
					    rnd_below((uint32_t)len -
						      KVC_PROTO_HDR_SIZE);

				msg[at] = edge[rnd_below(sizeof(edge))];
			}
			break;
		case 4:	/* grown by random bytes, length field kept honest */
			cut = rnd_below(40);
			for (size_t i = 0; i < cut; i++)
				msg[len + i] = (uint8_t)rnd();
			len += cut;
			put32(msg + 12, (uint32_t)len);
			break;
		}
		fuzz_one(msg, len, &c);
		if (it % 5 && c.accepted > before)
			mutated_ok++;
	}
	printf("# fuzz: %lu accepted (%lu after a mutation), %lu rejected\n",
	       c.accepted, mutated_ok, c.rejected);
	TAP_CHECK(c.bad == 0);
	/* The loop must exercise both outcomes, deep into the bodies. */
	TAP_CHECK(c.rejected > FUZZ_ITERATIONS / 4);
	TAP_CHECK(mutated_ok > FUZZ_ITERATIONS / 20);
}

int main(void)
{
	TAP_RUN(hello_roundtrip);
	TAP_RUN(lookup_roundtrip);
	TAP_RUN(store_roundtrip);
	TAP_RUN(load_release_roundtrip);
	TAP_RUN(stats_error_roundtrip);
	TAP_RUN(ns_alloc_seal_roundtrip);
	TAP_RUN(admin_roundtrip);
	TAP_RUN(ns_list_paging);
	TAP_RUN(golden_hello);
	TAP_RUN(golden_lookup);
	TAP_RUN(golden_error);
	TAP_RUN(golden_ns_create);
	TAP_RUN(golden_alloc);
	TAP_RUN(golden_seal);
	TAP_RUN(golden_evict);
	TAP_RUN(golden_flush);
	TAP_RUN(golden_ns_list);
	TAP_RUN(golden_ns_salt);
	TAP_RUN(bad_header);
	TAP_RUN(bad_counts);
	TAP_RUN(bad_store);
	TAP_RUN(bad_fields);
	TAP_RUN(bad_ns_create);
	TAP_RUN(bad_alloc);
	TAP_RUN(bad_seal);
	TAP_RUN(bad_evict);
	TAP_RUN(bad_flush);
	TAP_RUN(bad_ns_list);
	TAP_RUN(bad_ns_salt);
	TAP_RUN(encoder_limits);
	TAP_RUN(error_replies);
	TAP_RUN(versions);
	TAP_RUN(fast_messages);
	TAP_RUN(restamp);
	TAP_RUN(fuzz);
	return tap_done();
}
