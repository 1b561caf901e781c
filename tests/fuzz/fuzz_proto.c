// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer harness for kvcached's wire format (helper/common/proto.c): every
 * datagram a client or the daemon may receive goes through
 * kvc_proto_decode(), requests and replies alike.
 *
 * Invariants checked on each input, beyond "no crash, no sanitizer
 * report":
 *
 *  - a refusal carries a documented errno and a printable reason, and the
 *    ERROR reply the daemon would send for it (kvc_proto_encode_decode_
 *    error) decodes back to the same errno, seq, type and reason;
 *  - an accepted message's header is what the bytes say, its counts fit
 *    both the documented limits and the datagram exactly (fixed part plus
 *    count entries, nothing more), every pointer into the body stays
 *    inside the input, and every entry obeys its rules (tier masks,
 *    statuses, handles, ascending namespaces...);
 *  - the message re-encodes, through the real encoder of its type, to
 *    exactly the input bytes (proto.c promises one valid encoding), the
 *    encoder answers -ENOSPC without touching a buffer one byte short,
 *    and the re-encoded bytes decode and re-encode again identically;
 *  - one byte fewer or one more is refused (the length field);
 *  - restamped with each version this code speaks (kvc_proto_set_version),
 *    the message still decodes, at the version it says: HELLO, its reply
 *    and ERROR stay at 1, no message goes below the one it needs.
 *
 * Inputs that start with ENCODER_MODE (0xE5) fuzz the other direction:
 * they are an encoder's arguments, and whatever it accepts must decode
 * and pass all of the above (see check_encoder()).
 *
 * The encoders write the lowest version a message needs; a decoded one is
 * re-encoded and then restamped with its own header version before the
 * bytes are compared.
 *
 * The harness finds the message types by asking the decoder, version by
 * version (a header-only message of a type it does not know is refused
 * with -EOPNOTSUPP), so a type added to proto.c is fuzzed at once with
 * the generic checks; at start-up it prints the types it has no
 * re-encoder for, and aborts if it lists one the decoder dropped or if
 * kvc_proto_is_request() disagrees with the types the decoder knows.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "proto.h"

#define HDR	KVC_PROTO_HDR_SIZE
#define KEY	KVCACHE_KEY_SIZE
#define BATCH	KVC_PROTO_MAX_BATCH

/* The input being checked, for the pointer checks. */
static const uint8_t *in_buf;
static size_t in_len;

/* Scratch for the re-encoders: the largest batch of each kind. */
static struct kvc_lookup_entry lookup_e[BATCH];
static struct kvc_store_entry store_e[KVC_PROTO_MAX_STORE];
static int32_t status_e[BATCH];
static struct kvc_load_result load_e[BATCH];
static struct kvcache_handle handle_e[BATCH];
static struct kvc_seal_entry seal_e[KVC_PROTO_MAX_SEAL];
static struct kvc_stat stat_e[BATCH];
static struct kvc_ns_entry ns_e[BATCH];

static uint8_t enc[KVC_PROTO_MSG_MAX + 1];
static uint8_t enc2[KVC_PROTO_MSG_MAX + 1];

/*
 * Which types kvc_proto_decode() knows: known_in[v][t] in version v, and
 * known[t] in any version; filled at start-up.
 */
#define NR_VERSIONS	(KVC_PROTO_VERSION_MAX + 1)
static bool known_in[NR_VERSIONS][65536];
static bool known[65536];

/* [p, p + n) lies inside the body of the input. */
static void check_in_body(const void *p, size_t n)
{
	const uint8_t *b = p;

	FUZZ_CHECK(b >= in_buf + HDR);
	FUZZ_CHECK(b <= in_buf + in_len);
	FUZZ_CHECK(n <= (size_t)(in_buf + in_len - b));
}

static size_t body_len(void)
{
	return in_len - HDR;
}

static bool ns_in_range(uint32_t ns)
{
	return ns >= 1 && ns <= KVCACHE_NS_MAX;
}

static bool tiers_valid(uint32_t t)
{
	return t && !(t & ~KVC_PROTO_TIERS_ALL);
}

static bool status_valid(int32_t s)
{
	return s <= 0 && s >= -KVC_PROTO_ERRNO_MAX;
}

static bool handle_zero(const struct kvcache_handle *h)
{
	return !h->index && !h->gen;
}

static bool key_zero(const uint8_t *k)
{
	for (int i = 0; i < KEY; i++)
		if (k[i])
			return false;
	return true;
}

/* A batch of count entries of esize bytes after fixed bytes: exactly. */
static void check_batch(uint32_t count, uint32_t min, uint32_t max,
			size_t fixed, size_t esize)
{
	FUZZ_CHECK(count >= min && count <= max);
	FUZZ_CHECK(body_len() == fixed + (size_t)count * esize);
}

/*
 * One re-encoder per type: checks the decoded fields against the rules of
 * proto.h, then encodes them with the type's own encoder into buf, so the
 * caller can compare with the input. Returns what the encoder returned.
 */
typedef int (*reencode_fn)(const struct kvc_msg *m, uint8_t *buf,
			   size_t size);

static int re_hello(const struct kvc_msg *m, uint8_t *buf, size_t size)
{
	const struct kvc_hello *h = &m->hello;

	int v = kvc_proto_choose_version(h->min_version, h->max_version);

	FUZZ_CHECK(body_len() == 16);
	FUZZ_CHECK(h->min_version >= 1 && h->min_version <= h->max_version);
	/* The daemon's answer: the highest version both sides speak. */
	if (h->max_version < KVC_PROTO_VERSION_MIN ||
	    h->min_version > KVC_PROTO_VERSION_MAX)
		FUZZ_CHECK(v == -EPROTONOSUPPORT);
	else
		FUZZ_CHECK(v == (h->max_version < KVC_PROTO_VERSION_MAX ?
				 h->max_version : KVC_PROTO_VERSION_MAX));
	return kvc_proto_encode_hello(buf, size, m->seq, h);
}

static int re_hello_reply(const struct kvc_msg *m, uint8_t *buf,
			  size_t size)
{
	const struct kvc_hello_reply *r = &m->hello_reply;

	FUZZ_CHECK(body_len() == 32);
	FUZZ_CHECK(r->version >= KVC_PROTO_VERSION_MIN &&
		   r->version <= KVC_PROTO_VERSION_MAX);
	FUZZ_CHECK(r->mode == KVC_PROTO_MODE_KERNEL ||
		   r->mode == KVC_PROTO_MODE_MEMFD);
	FUZZ_CHECK(r->max_batch >= 1 && r->max_batch <= KVC_PROTO_MAX_STORE);
	FUZZ_CHECK(!(r->caps & ~KVC_PROTO_CAP_ALL));
	FUZZ_CHECK(r->block_size);
	return kvc_proto_encode_hello_reply(buf, size, m->seq, r);
}

static int re_lookup(const struct kvc_msg *m, uint8_t *buf, size_t size)
{
	const struct kvc_lookup *l = &m->lookup;

	FUZZ_CHECK(ns_in_range(l->ns_id));
	FUZZ_CHECK(tiers_valid(l->tiers));
	FUZZ_CHECK(!(l->flags & ~KVC_PROTO_LOOKUP_FLAGS_ALL));
	check_batch(l->count, 1, BATCH, 16, KEY);
	check_in_body(l->keys, (size_t)l->count * KEY);
	return kvc_proto_encode_lookup_flags(buf, size, m->seq, l->ns_id,
					     l->tiers, l->flags, l->keys,
					     l->count);
}

static int re_lookup_reply(const struct kvc_msg *m, uint8_t *buf,
			   size_t size)
{
	const struct kvc_lookup_reply *r = &m->lookup_reply;

	check_batch(r->matched, 0, BATCH, 8, 16);
	check_in_body(r->raw, (size_t)r->matched * 16);
	for (uint32_t i = 0; i < r->matched; i++) {
		kvc_proto_lookup_entry(r, i, &lookup_e[i]);
		FUZZ_CHECK(tiers_valid(lookup_e[i].tiers));
		/* A handle only where the pool holds the block. */
		FUZZ_CHECK((lookup_e[i].tiers & KVC_PROTO_TIER_POOL) ||
			   handle_zero(&lookup_e[i].handle));
	}
	return kvc_proto_encode_lookup_reply(buf, size, m->seq, lookup_e,
					     r->matched);
}

static int re_store(const struct kvc_msg *m, uint8_t *buf, size_t size)
{
	const struct kvc_store *s = &m->store;

	FUZZ_CHECK(ns_in_range(s->ns_id));
	check_batch(s->count, 1, KVC_PROTO_MAX_STORE, 8, 80);
	check_in_body(s->raw, (size_t)s->count * 80);
	for (uint32_t i = 0; i < s->count; i++) {
		kvc_proto_store_entry(s, i, &store_e[i]);
		FUZZ_CHECK(!(store_e[i].flags & ~KVC_PROTO_STORE_FLAGS_ALL));
		FUZZ_CHECK(!(store_e[i].flags & KVC_PROTO_STORE_FIRST) ||
			   key_zero(store_e[i].parent));
		/* payload_len with SEAL only, and SEAL from version 3. */
		FUZZ_CHECK(!(store_e[i].flags & KVC_PROTO_STORE_SEAL) ==
			   !store_e[i].payload_len);
		FUZZ_CHECK(!(store_e[i].flags & KVC_PROTO_STORE_SEAL) ||
			   m->version >= KVC_PROTO_VERSION_STORE_SEAL);
	}
	return kvc_proto_encode_store(buf, size, m->seq, s->ns_id, store_e,
				      s->count);
}

/* The status lists: STORE, RELEASE, SEAL and EVICT replies. */
static void check_status_list(const struct kvc_status_list *l)
{
	check_batch(l->count, 0, BATCH, 8, 4);
	check_in_body(l->raw, (size_t)l->count * 4);
	for (uint32_t i = 0; i < l->count; i++) {
		status_e[i] = kvc_proto_status(l, i);
		FUZZ_CHECK(status_valid(status_e[i]));
	}
}

static int re_store_reply(const struct kvc_msg *m, uint8_t *buf,
			  size_t size)
{
	check_status_list(&m->store_reply);
	return kvc_proto_encode_store_reply(buf, size, m->seq, status_e,
					    m->store_reply.count);
}

static int re_release_reply(const struct kvc_msg *m, uint8_t *buf,
			    size_t size)
{
	check_status_list(&m->release_reply);
	return kvc_proto_encode_release_reply(buf, size, m->seq, status_e,
					      m->release_reply.count);
}

static int re_seal_reply(const struct kvc_msg *m, uint8_t *buf, size_t size)
{
	check_status_list(&m->seal_reply);
	return kvc_proto_encode_seal_reply(buf, size, m->seq, status_e,
					   m->seal_reply.count);
}

static int re_evict_reply(const struct kvc_msg *m, uint8_t *buf,
			  size_t size)
{
	check_status_list(&m->evict_reply);
	return kvc_proto_encode_evict_reply(buf, size, m->seq, status_e,
					    m->evict_reply.count);
}

static int re_load(const struct kvc_msg *m, uint8_t *buf, size_t size)
{
	const struct kvc_load *l = &m->load;

	FUZZ_CHECK(ns_in_range(l->ns_id));
	check_batch(l->count, 1, BATCH, 8, KEY);
	check_in_body(l->keys, (size_t)l->count * KEY);
	return kvc_proto_encode_load(buf, size, m->seq, l->ns_id, l->keys,
				     l->count);
}

static int re_evict(const struct kvc_msg *m, uint8_t *buf, size_t size)
{
	const struct kvc_evict *v = &m->evict;

	FUZZ_CHECK(ns_in_range(v->ns_id));
	check_batch(v->count, 1, BATCH, 8, KEY);
	check_in_body(v->keys, (size_t)v->count * KEY);
	return kvc_proto_encode_evict(buf, size, m->seq, v->ns_id, v->keys,
				      v->count);
}

static int re_load_reply(const struct kvc_msg *m, uint8_t *buf, size_t size)
{
	const struct kvc_load_reply *r = &m->load_reply;

	check_batch(r->count, 0, BATCH, 8, 16);
	check_in_body(r->raw, (size_t)r->count * 16);
	for (uint32_t i = 0; i < r->count; i++) {
		kvc_proto_load_result(r, i, &load_e[i]);
		FUZZ_CHECK(status_valid(load_e[i].status));
		/* A pinned handle only with success. */
		FUZZ_CHECK(!load_e[i].status ||
			   handle_zero(&load_e[i].handle));
	}
	return kvc_proto_encode_load_reply(buf, size, m->seq, load_e,
					   r->count);
}

static int re_release(const struct kvc_msg *m, uint8_t *buf, size_t size)
{
	const struct kvc_release *r = &m->release;

	check_batch(r->count, 1, BATCH, 8, 8);
	check_in_body(r->raw, (size_t)r->count * 8);
	for (uint32_t i = 0; i < r->count; i++)
		kvc_proto_release_handle(r, i, &handle_e[i]);
	return kvc_proto_encode_release(buf, size, m->seq, handle_e,
					r->count);
}

static int re_touch(const struct kvc_msg *m, uint8_t *buf, size_t size)
{
	const struct kvc_touch *t = &m->touch;

	FUZZ_CHECK(m->version >= KVC_PROTO_VERSION_FAST);
	check_batch(t->count, 0, BATCH, 24, 8);
	check_in_body(t->raw, (size_t)t->count * 8);
	FUZZ_CHECK(t->count || t->lookup_keys);
	FUZZ_CHECK(t->hit_keys <= t->lookup_keys &&
		   t->lookups <= t->lookup_keys);
	for (uint32_t i = 0; i < t->count; i++)
		kvc_proto_touch_handle(t, i, &handle_e[i]);
	return kvc_proto_encode_touch(buf, size, m->seq, t, handle_e);
}

static int re_fast_map(const struct kvc_msg *m, uint8_t *buf, size_t size)
{
	FUZZ_CHECK(body_len() == 0 && m->version >= KVC_PROTO_VERSION_FAST);
	return kvc_proto_encode_fast_map(buf, size, m->seq);
}

static int re_fast_map_reply(const struct kvc_msg *m, uint8_t *buf,
			     size_t size)
{
	FUZZ_CHECK(body_len() == 0 && m->version >= KVC_PROTO_VERSION_FAST);
	return kvc_proto_encode_fast_map_reply(buf, size, m->seq);
}

static int re_fast_ns(const struct kvc_msg *m, uint8_t *buf, size_t size)
{
	FUZZ_CHECK(body_len() == 8 &&
		   m->version >= KVC_PROTO_VERSION_FAST_NS);
	return kvc_proto_encode_fast_ns(buf, size, m->seq, m->fast_ns.ns_id);
}

static int re_fast_ns_reply(const struct kvc_msg *m, uint8_t *buf,
			    size_t size)
{
	FUZZ_CHECK(body_len() == 0 &&
		   m->version >= KVC_PROTO_VERSION_FAST_NS);
	return kvc_proto_encode_fast_ns_reply(buf, size, m->seq);
}

static int re_stats(const struct kvc_msg *m, uint8_t *buf, size_t size)
{
	FUZZ_CHECK(body_len() == 0);
	return kvc_proto_encode_stats(buf, size, m->seq);
}

static bool name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}

static int re_stats_reply(const struct kvc_msg *m, uint8_t *buf,
			  size_t size)
{
	const struct kvc_stats_reply *r = &m->stats_reply;
	size_t pos = 0, prev = 0;
	uint32_t n = 0;

	FUZZ_CHECK(r->count <= BATCH);
	FUZZ_CHECK(r->raw_len == body_len() - 8);
	check_in_body(r->raw, r->raw_len);
	/* The walk yields exactly count counters, each inside the body. */
	while (kvc_proto_stats_next(r, &pos, &stat_e[n])) {
		const struct kvc_stat *st = &stat_e[n];

		FUZZ_CHECK(n < r->count);
		FUZZ_CHECK(pos > prev && pos <= r->raw_len);
		FUZZ_CHECK(st->name_len >= 1 &&
			   st->name_len <= KVC_PROTO_NAME_MAX);
		check_in_body(st->name, st->name_len);
		for (uint16_t i = 0; i < st->name_len; i++)
			FUZZ_CHECK(name_char(st->name[i]));
		prev = pos;
		n++;
	}
	FUZZ_CHECK(n == r->count);
	FUZZ_CHECK(pos == r->raw_len);
	return kvc_proto_encode_stats_reply(buf, size, m->seq, stat_e, n);
}

static int re_ns_create(const struct kvc_msg *m, uint8_t *buf, size_t size)
{
	const struct kvc_ns_create *c = &m->ns_create;

	FUZZ_CHECK(body_len() == 20);
	FUZZ_CHECK(ns_in_range(c->ns_id));
	FUZZ_CHECK(c->mode <= KVC_PROTO_NS_MODE_MAX);
	return kvc_proto_encode_ns_create(buf, size, m->seq, c);
}

static int re_ns_create_reply(const struct kvc_msg *m, uint8_t *buf,
			      size_t size)
{
	FUZZ_CHECK(body_len() == 0);
	return kvc_proto_encode_ns_create_reply(buf, size, m->seq);
}

static int re_alloc(const struct kvc_msg *m, uint8_t *buf, size_t size)
{
	const struct kvc_alloc *a = &m->alloc;

	FUZZ_CHECK(body_len() == 8);
	FUZZ_CHECK(ns_in_range(a->ns_id));
	FUZZ_CHECK(a->count >= 1 && a->count <= BATCH);
	return kvc_proto_encode_alloc(buf, size, m->seq, a->ns_id, a->count);
}

static int re_alloc_reply(const struct kvc_msg *m, uint8_t *buf,
			  size_t size)
{
	const struct kvc_alloc_reply *r = &m->alloc_reply;

	/* All or nothing: never an empty list. */
	check_batch(r->count, 1, BATCH, 8, 8);
	check_in_body(r->raw, (size_t)r->count * 8);
	for (uint32_t i = 0; i < r->count; i++)
		kvc_proto_alloc_handle(r, i, &handle_e[i]);
	return kvc_proto_encode_alloc_reply(buf, size, m->seq, handle_e,
					    r->count);
}

static int re_seal(const struct kvc_msg *m, uint8_t *buf, size_t size)
{
	const struct kvc_seal *s = &m->seal;

	check_batch(s->count, 1, KVC_PROTO_MAX_SEAL, 8, 48);
	check_in_body(s->raw, (size_t)s->count * 48);
	for (uint32_t i = 0; i < s->count; i++) {
		kvc_proto_seal_entry(s, i, &seal_e[i]);
		FUZZ_CHECK(seal_e[i].payload_len);
		FUZZ_CHECK(!(seal_e[i].flags & ~KVC_PROTO_SEAL_FLAGS_ALL));
	}
	return kvc_proto_encode_seal(buf, size, m->seq, seal_e, s->count);
}

static int re_flush(const struct kvc_msg *m, uint8_t *buf, size_t size)
{
	const struct kvc_flush *f = &m->flush;

	FUZZ_CHECK(body_len() == 8);
	FUZZ_CHECK(f->ns_id == KVC_PROTO_NS_ALL || ns_in_range(f->ns_id));
	FUZZ_CHECK(!(f->tiers & ~KVC_PROTO_TIERS_ALL));
	return kvc_proto_encode_flush_tiers(buf, size, m->seq, f->ns_id,
					    f->tiers);
}

static int re_flush_reply(const struct kvc_msg *m, uint8_t *buf,
			  size_t size)
{
	FUZZ_CHECK(body_len() == 16);
	return kvc_proto_encode_flush_reply(buf, size, m->seq,
					    &m->flush_reply);
}

static int re_ns_list(const struct kvc_msg *m, uint8_t *buf, size_t size)
{
	FUZZ_CHECK(body_len() == 8);
	FUZZ_CHECK(m->ns_list.start <= KVCACHE_NS_MAX);
	return kvc_proto_encode_ns_list(buf, size, m->seq, m->ns_list.start);
}

static int re_ns_list_reply(const struct kvc_msg *m, uint8_t *buf,
			    size_t size)
{
	const struct kvc_ns_list_reply *r = &m->ns_list_reply;
	uint32_t last = 0;

	check_batch(r->count, 0, BATCH, 8, 24);
	check_in_body(r->raw, (size_t)r->count * 24);
	for (uint32_t i = 0; i < r->count; i++) {
		kvc_proto_ns_entry(r, i, &ns_e[i]);
		FUZZ_CHECK(ns_in_range(ns_e[i].ns_id));
		FUZZ_CHECK(ns_e[i].mode <= KVC_PROTO_NS_MODE_MAX);
		/* Strictly ascending: a pager never sees one twice. */
		FUZZ_CHECK(ns_e[i].ns_id > last);
		last = ns_e[i].ns_id;
	}
	/* next: 0 (done), else past the last entry and a valid start. */
	FUZZ_CHECK(r->next <= KVCACHE_NS_MAX);
	FUZZ_CHECK(!r->next || (r->count && r->next > last));
	return kvc_proto_encode_ns_list_reply(buf, size, m->seq, r->next, ns_e,
					      r->count);
}

static int re_ns_salt(const struct kvc_msg *m, uint8_t *buf, size_t size)
{
	const struct kvc_ns_salt *s = &m->ns_salt;
	uint8_t acc = 0;

	FUZZ_CHECK(body_len() == 40);
	FUZZ_CHECK(m->version >= KVC_PROTO_VERSION_NS_SALT);
	FUZZ_CHECK(ns_in_range(s->ns_id));
	FUZZ_CHECK(!(s->flags & ~KVC_PROTO_NS_SALT_FLAGS_ALL));
	for (int i = 0; i < KVC_PROTO_SALT_SIZE; i++)
		acc |= s->salt[i];
	/* A request that only asks carries no salt. */
	FUZZ_CHECK((s->flags & KVC_PROTO_NS_SALT_SET) || !acc);
	return kvc_proto_encode_ns_salt(buf, size, m->seq, s);
}

static int re_ns_salt_reply(const struct kvc_msg *m, uint8_t *buf,
			    size_t size)
{
	FUZZ_CHECK(body_len() == 40);
	FUZZ_CHECK(m->version >= KVC_PROTO_VERSION_NS_SALT);
	FUZZ_CHECK(ns_in_range(m->ns_salt_reply.ns_id));
	return kvc_proto_encode_ns_salt_reply(buf, size, m->seq,
					      &m->ns_salt_reply);
}

static int re_error(const struct kvc_msg *m, uint8_t *buf, size_t size)
{
	const struct kvc_error *e = &m->error;
	char msg[KVC_PROTO_ERRMSG_MAX + 1];

	FUZZ_CHECK(e->error < 0 && e->error >= -KVC_PROTO_ERRNO_MAX);
	FUZZ_CHECK(e->bad_seq == m->seq);
	FUZZ_CHECK(e->msg_len <= KVC_PROTO_ERRMSG_MAX);
	FUZZ_CHECK(body_len() == 12u + e->msg_len);
	check_in_body(e->msg, e->msg_len);
	for (uint16_t i = 0; i < e->msg_len; i++)
		FUZZ_CHECK(e->msg[i] >= 0x20 && e->msg[i] <= 0x7e);
	/* The encoder takes a C string: printable bytes hold no NUL. */
	memcpy(msg, e->msg, e->msg_len);
	msg[e->msg_len] = '\0';
	return kvc_proto_encode_error(buf, size, e->error, e->bad_seq,
				      e->bad_type, msg);
}

static const struct {
	uint16_t type;
	reencode_fn fn;
} reencoders[] = {
	{ KVC_MSG_HELLO, re_hello },
	{ KVC_MSG_HELLO_REPLY, re_hello_reply },
	{ KVC_MSG_LOOKUP, re_lookup },
	{ KVC_MSG_LOOKUP_REPLY, re_lookup_reply },
	{ KVC_MSG_STORE, re_store },
	{ KVC_MSG_STORE_REPLY, re_store_reply },
	{ KVC_MSG_LOAD, re_load },
	{ KVC_MSG_LOAD_REPLY, re_load_reply },
	{ KVC_MSG_RELEASE, re_release },
	{ KVC_MSG_RELEASE_REPLY, re_release_reply },
	{ KVC_MSG_STATS, re_stats },
	{ KVC_MSG_STATS_REPLY, re_stats_reply },
	{ KVC_MSG_NS_CREATE, re_ns_create },
	{ KVC_MSG_NS_CREATE_REPLY, re_ns_create_reply },
	{ KVC_MSG_ALLOC, re_alloc },
	{ KVC_MSG_ALLOC_REPLY, re_alloc_reply },
	{ KVC_MSG_SEAL, re_seal },
	{ KVC_MSG_SEAL_REPLY, re_seal_reply },
	{ KVC_MSG_EVICT, re_evict },
	{ KVC_MSG_EVICT_REPLY, re_evict_reply },
	{ KVC_MSG_FLUSH, re_flush },
	{ KVC_MSG_FLUSH_REPLY, re_flush_reply },
	{ KVC_MSG_NS_LIST, re_ns_list },
	{ KVC_MSG_NS_LIST_REPLY, re_ns_list_reply },
	{ KVC_MSG_NS_SALT, re_ns_salt },
	{ KVC_MSG_NS_SALT_REPLY, re_ns_salt_reply },
	{ KVC_MSG_FAST_MAP, re_fast_map },
	{ KVC_MSG_FAST_MAP_REPLY, re_fast_map_reply },
	{ KVC_MSG_TOUCH, re_touch },
	{ KVC_MSG_FAST_NS, re_fast_ns },
	{ KVC_MSG_FAST_NS_REPLY, re_fast_ns_reply },
	{ KVC_MSG_ERROR, re_error },
};

#define NR_REENCODERS (sizeof(reencoders) / sizeof(reencoders[0]))

static reencode_fn reencoder(uint16_t type)
{
	for (size_t i = 0; i < NR_REENCODERS; i++)
		if (reencoders[i].type == type)
			return reencoders[i].fn;
	return NULL;
}

/* A header-only message of this type: refused with -EOPNOTSUPP iff the
 * decoder does not know the type in that version (every other check
 * comes first or concerns the body). */
static bool decoder_knows(uint16_t version, uint16_t type)
{
	uint8_t h[HDR] = { 0 };
	struct kvc_msg m;

	fuzz_put32(h, KVC_PROTO_MAGIC);
	h[4] = version & 0xff;
	h[5] = version >> 8;
	h[6] = type & 0xff;
	h[7] = type >> 8;
	fuzz_put32(h + 12, HDR);
	return kvc_proto_decode(h, sizeof(h), &m) != -EOPNOTSUPP;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	unsigned int nr_known = 0;

	(void)argc;
	(void)argv;
	for (uint32_t t = 0; t < 65536; t++) {
		for (uint16_t v = KVC_PROTO_VERSION_MIN;
		     v <= KVC_PROTO_VERSION_MAX; v++) {
			known_in[v][t] = decoder_knows(v, (uint16_t)t);
			known[t] |= known_in[v][t];
		}
		nr_known += known[t];
	}
	for (size_t i = 0; i < NR_REENCODERS; i++)
		if (!known[reencoders[i].type]) {
			fprintf(stderr, "fuzz_proto: type 0x%04x has a "
				"re-encoder but the decoder refuses it\n",
				reencoders[i].type);
			abort();
		}
	for (uint32_t t = 0; t < 65536; t++) {
		uint16_t type = (uint16_t)t;
		bool reply = type & KVC_MSG_REPLY;

		/* The daemon answers exactly the requests it can decode,
		 * and each of them but TOUCH (never answered) has a reply
		 * type the client decodes. */
		FUZZ_CHECK(!!kvc_proto_is_request(type) == (known[t] && !reply));
		if (known[t] && !reply)
			FUZZ_CHECK(known[t | KVC_MSG_REPLY] ==
				   (type != KVC_MSG_TOUCH));
		if (known[t] && reply && type != KVC_MSG_ERROR)
			FUZZ_CHECK(known[t & ~KVC_MSG_REPLY]);
		if (known[t] && !reencoder(type))
			fprintf(stderr, "fuzz_proto: no re-encoder for type "
				"0x%04x: generic checks only\n", type);
	}
	fprintf(stderr, "fuzz_proto: the decoder knows %u message types\n",
		nr_known);
	return 0;
}

static bool errno_documented(int ret)
{
	return ret == -EMSGSIZE || ret == -EBADMSG || ret == -EPROTO ||
	       ret == -EPROTONOSUPPORT || ret == -EINVAL ||
	       ret == -EOPNOTSUPP || ret == -E2BIG;
}

/*
 * A refused datagram: the reason is fit for a reply, the header fields
 * that were read are the input's, and the daemon's ERROR reply for it
 * round-trips.
 */
static void check_refusal(const uint8_t *data, size_t size, int ret,
			  const struct kvc_msg *m)
{
	uint8_t reply[HDR + 12 + KVC_PROTO_ERRMSG_MAX];
	size_t rlen = strlen(m->reason ? m->reason : "");
	struct kvc_msg e;
	int n;

	FUZZ_CHECK(errno_documented(ret));
	FUZZ_CHECK(m->reason && rlen > 0);
	for (size_t i = 0; i < rlen; i++)
		FUZZ_CHECK(m->reason[i] >= 0x20 && m->reason[i] <= 0x7e);
	if (size > KVC_PROTO_MSG_MAX)
		FUZZ_CHECK(ret == -EMSGSIZE);
	else if (size >= 4 && fuzz_le32(data) != KVC_PROTO_MAGIC)
		FUZZ_CHECK(ret == -EPROTO);
	if (ret == -EOPNOTSUPP)
		FUZZ_CHECK(!known_in[m->version][m->type]);
	/* What the decoder says it read, it read from the input. */
	if (m->type || m->seq || m->version) {
		FUZZ_CHECK(size >= HDR && size <= KVC_PROTO_MSG_MAX);
		FUZZ_CHECK(m->version == fuzz_le16(data + 4));
		FUZZ_CHECK(m->type == fuzz_le16(data + 6));
		FUZZ_CHECK(m->seq == fuzz_le32(data + 8));
	}

	n = kvc_proto_encode_decode_error(reply, sizeof(reply), ret, m);
	FUZZ_CHECK(n >= HDR + 12 && (size_t)n <= sizeof(reply));
	FUZZ_CHECK(kvc_proto_decode(reply, (size_t)n, &e) == 0);
	FUZZ_CHECK(e.type == KVC_MSG_ERROR && e.seq == m->seq);
	FUZZ_CHECK(e.error.error == ret && e.error.bad_seq == m->seq &&
		   e.error.bad_type == m->type);
	FUZZ_CHECK(e.error.msg_len ==
		   (rlen < KVC_PROTO_ERRMSG_MAX ? rlen : KVC_PROTO_ERRMSG_MAX));
	FUZZ_CHECK(!memcmp(e.error.msg, m->reason, e.error.msg_len));
}

static void check_header(const uint8_t *data, size_t size,
			 const struct kvc_msg *m)
{
	FUZZ_CHECK(!m->reason);
	FUZZ_CHECK(size >= HDR && size <= KVC_PROTO_MSG_MAX);
	FUZZ_CHECK(fuzz_le32(data) == KVC_PROTO_MAGIC);
	FUZZ_CHECK(m->version >= KVC_PROTO_VERSION_MIN &&
		   m->version <= KVC_PROTO_VERSION_MAX);
	FUZZ_CHECK(m->version == fuzz_le16(data + 4));
	FUZZ_CHECK(m->type == fuzz_le16(data + 6));
	FUZZ_CHECK(m->seq == fuzz_le32(data + 8));
	FUZZ_CHECK(fuzz_le32(data + 12) == size);
	FUZZ_CHECK(!fuzz_le32(data + 16) && !fuzz_le32(data + 20));
	FUZZ_CHECK(known_in[m->version][m->type]);
}

static bool frozen(uint16_t type)
{
	return type == KVC_MSG_HELLO || type == KVC_MSG_HELLO_REPLY ||
	       type == KVC_MSG_ERROR;
}

/*
 * Restamped with any version, a message decodes at the version it then
 * says: its own for HELLO, its reply and ERROR (1), else the higher of
 * its own and the new one.
 */
static void check_restamp(const uint8_t *data, size_t size,
			  const struct kvc_msg *m)
{
	struct kvc_msg r;

	for (uint16_t v = KVC_PROTO_VERSION_MIN; v <= KVC_PROTO_VERSION_MAX;
	     v++) {
		uint16_t want = frozen(m->type) || v < m->version ?
				m->version : v;

		memcpy(enc2, data, size);
		FUZZ_CHECK(kvc_proto_set_version(enc2, (int)size, v) ==
			   (int)size);
		FUZZ_CHECK(fuzz_le16(enc2 + 4) == want);
		FUZZ_CHECK(!memcmp(enc2 + 6, data + 6, size - 6));
		FUZZ_CHECK(kvc_proto_decode(enc2, size, &r) == 0);
		FUZZ_CHECK(r.version == want && r.type == m->type &&
			   r.seq == m->seq);
	}
}

/* A datagram as received: the decoder's side. */
static void check_datagram(const uint8_t *data, size_t size)
{
	struct kvc_msg m, again;
	reencode_fn fn;
	int ret, n;

	ret = kvc_proto_decode(data, size, &m);
	FUZZ_CHECK(ret <= 0);
	if (ret) {
		check_refusal(data, size, ret, &m);
		return;
	}
	check_header(data, size, &m);
	in_buf = data;
	in_len = size;

	/* The length field must match the datagram, both ways. */
	FUZZ_CHECK(kvc_proto_decode(data, size - 1, &again) == -EBADMSG);
	if (size < KVC_PROTO_MSG_MAX) {
		memcpy(enc2, data, size);
		enc2[size] = 0;
		FUZZ_CHECK(kvc_proto_decode(enc2, size + 1, &again) ==
			   -EBADMSG);
	}

	check_restamp(data, size, &m);

	fn = reencoder(m.type);
	if (!fn)
		return;	/* a type added after this harness */

	/* The one valid encoding: the input itself, once restamped with the
	 * version the sender negotiated. */
	n = fn(&m, enc, sizeof(enc));
	FUZZ_CHECK(n == (int)size);
	FUZZ_CHECK(fuzz_le16(enc + 4) <= m.version);
	FUZZ_CHECK(kvc_proto_set_version(enc, n, m.version) == n);
	FUZZ_CHECK(!memcmp(enc, data, size));

	/* One byte short: -ENOSPC, and the buffer untouched. */
	memset(enc2, 0xa5, size);
	FUZZ_CHECK(fn(&m, enc2, size - 1) == -ENOSPC);
	for (size_t i = 0; i < size; i++)
		FUZZ_CHECK(enc2[i] == 0xa5);

	/* The re-encoded bytes decode and re-encode identically. */
	FUZZ_CHECK(kvc_proto_decode(enc, (size_t)n, &again) == 0);
	FUZZ_CHECK(again.type == m.type && again.seq == m.seq &&
		   again.version == m.version);
	in_buf = enc;
	n = fn(&again, enc2, sizeof(enc2));
	FUZZ_CHECK(n == (int)size);
	kvc_proto_set_version(enc2, n, again.version);
	FUZZ_CHECK(!memcmp(enc2, enc, size));
}

/* ---- the encoders' side ---------------------------------------------------
 *
 * An input that starts with ENCODER_MODE is not a datagram but the
 * arguments of one encoder: the next byte picks it, the rest fills its
 * fields and entries (zeros once the input runs out). Whatever the
 * encoder accepts must decode, as the type it names with the seq it was
 * given, and then pass every check of the decoder's side: proto.h's
 * promise that an encoded message always decodes, and the encoders'
 * checks of their arguments, fuzzed. The ERROR encoder must also clean
 * its text: cut to KVC_PROTO_ERRMSG_MAX bytes, '?' for what is not
 * printable ASCII.
 */
#define ENCODER_MODE	0xE5	/* never a datagram's first byte ('K') */

static const uint8_t *arg;
static size_t arg_left;
static uint8_t gen[KVC_PROTO_MSG_MAX + 1];
static uint8_t keys_arg[BATCH * KEY];

static void take(void *out, size_t n)
{
	size_t k = n < arg_left ? n : arg_left;

	memcpy(out, arg, k);
	memset((uint8_t *)out + k, 0, n - k);
	arg += k;
	arg_left -= k;
}

static uint32_t take32(void)
{
	uint8_t b[4];

	take(b, 4);
	return fuzz_le32(b);
}

static uint16_t take16(void)
{
	uint8_t b[2];

	take(b, 2);
	return fuzz_le16(b);
}

static uint64_t take64(void)
{
	uint64_t lo = take32();

	return lo | (uint64_t)take32() << 32;
}

static void take_handle(struct kvcache_handle *h)
{
	h->index = take32();
	h->gen = take32();
}

/* A count up to one past max, so the limit itself is tried. */
static uint32_t take_count(uint32_t max)
{
	return take16() % (max + 2);
}

/* gen_message()'s cases, one per type of gen_types[]. */
#define NR_GEN	32

static int gen_message(uint8_t which, uint32_t seq, char *errmsg)
{
	uint32_t count, ns, a, b;

	switch (which % NR_GEN) {
	case 0: {
		struct kvc_hello h;

		h.min_version = take16();
		h.max_version = take16();
		h.caps = take64();
		return kvc_proto_encode_hello(gen, sizeof(gen), seq, &h);
	}
	case 1: {
		struct kvc_hello_reply r;

		r.version = take16();
		r.mode = take16();
		r.max_batch = take32();
		r.caps = take64();
		r.block_size = take64();
		r.nr_blocks = take64();
		return kvc_proto_encode_hello_reply(gen, sizeof(gen), seq, &r);
	}
	case 2:
		ns = take32();
		a = take32();
		b = take32();
		count = take_count(BATCH);
		take(keys_arg, (size_t)(count < BATCH ? count : BATCH) * KEY);
		return kvc_proto_encode_lookup_flags(gen, sizeof(gen), seq, ns,
						     a, b, keys_arg, count);
	case 3:
		count = take_count(BATCH);
		for (uint32_t i = 0; i < count && i < BATCH; i++) {
			lookup_e[i].tiers = take32();
			take_handle(&lookup_e[i].handle);
		}
		return kvc_proto_encode_lookup_reply(gen, sizeof(gen), seq,
						     lookup_e, count);
	case 4:
		ns = take32();
		count = take_count(KVC_PROTO_MAX_STORE);
		for (uint32_t i = 0; i < count && i < KVC_PROTO_MAX_STORE;
		     i++) {
			take(store_e[i].key, KEY);
			take(store_e[i].parent, KEY);
			take_handle(&store_e[i].handle);
			store_e[i].flags = take32();
			store_e[i].payload_len = take32();
		}
		return kvc_proto_encode_store(gen, sizeof(gen), seq, ns,
					      store_e, count);
	case 5: case 6: case 7: case 8:
		count = take_count(BATCH);
		for (uint32_t i = 0; i < count && i < BATCH; i++)
			status_e[i] = (int32_t)take32();
		if (which % NR_GEN == 5)
			return kvc_proto_encode_store_reply(gen, sizeof(gen),
							    seq, status_e,
							    count);
		if (which % NR_GEN == 6)
			return kvc_proto_encode_release_reply(gen, sizeof(gen),
							      seq, status_e,
							      count);
		if (which % NR_GEN == 7)
			return kvc_proto_encode_seal_reply(gen, sizeof(gen),
							   seq, status_e,
							   count);
		return kvc_proto_encode_evict_reply(gen, sizeof(gen), seq,
						    status_e, count);
	case 9: case 10:
		ns = take32();
		count = take_count(BATCH);
		take(keys_arg, (size_t)(count < BATCH ? count : BATCH) * KEY);
		if (which % NR_GEN == 9)
			return kvc_proto_encode_load(gen, sizeof(gen), seq, ns,
						     keys_arg, count);
		return kvc_proto_encode_evict(gen, sizeof(gen), seq, ns,
					      keys_arg, count);
	case 11:
		count = take_count(BATCH);
		for (uint32_t i = 0; i < count && i < BATCH; i++) {
			load_e[i].status = (int32_t)take32();
			take_handle(&load_e[i].handle);
		}
		return kvc_proto_encode_load_reply(gen, sizeof(gen), seq,
						   load_e, count);
	case 12: case 13:
		count = take_count(BATCH);
		for (uint32_t i = 0; i < count && i < BATCH; i++)
			take_handle(&handle_e[i]);
		if (which % NR_GEN == 12)
			return kvc_proto_encode_release(gen, sizeof(gen), seq,
							handle_e, count);
		return kvc_proto_encode_alloc_reply(gen, sizeof(gen), seq,
						    handle_e, count);
	case 14:
		return kvc_proto_encode_stats(gen, sizeof(gen), seq);
	case 15: {
		/* Names point into one buffer of the input's bytes. */
		static char names[BATCH][KVC_PROTO_NAME_MAX + 2];

		count = take_count(BATCH);
		for (uint32_t i = 0; i < count && i < BATCH; i++) {
			stat_e[i].value = take64();
			stat_e[i].name_len = take16() % (KVC_PROTO_NAME_MAX + 2);
			take(names[i], stat_e[i].name_len);
			stat_e[i].name = names[i];
		}
		return kvc_proto_encode_stats_reply(gen, sizeof(gen), seq,
						    stat_e, count);
	}
	case 16: {
		struct kvc_ns_create c;

		c.ns_id = take32();
		c.uid = take32();
		c.gid = take32();
		c.mode = take32();
		return kvc_proto_encode_ns_create(gen, sizeof(gen), seq, &c);
	}
	case 17:
		return kvc_proto_encode_ns_create_reply(gen, sizeof(gen), seq);
	case 18:
		ns = take32();
		return kvc_proto_encode_alloc(gen, sizeof(gen), seq, ns,
					      take32());
	case 19:
		count = take_count(KVC_PROTO_MAX_SEAL);
		for (uint32_t i = 0; i < count && i < KVC_PROTO_MAX_SEAL;
		     i++) {
			take_handle(&seal_e[i].handle);
			seal_e[i].payload_len = take32();
			seal_e[i].flags = take32();
			take(seal_e[i].key, KEY);
		}
		return kvc_proto_encode_seal(gen, sizeof(gen), seq, seal_e,
					     count);
	case 20:
		ns = take32();
		return kvc_proto_encode_flush_tiers(gen, sizeof(gen), seq, ns,
						    take32());
	case 21: {
		struct kvc_flush_reply r;

		r.evicted = take64();
		r.busy = take64();
		return kvc_proto_encode_flush_reply(gen, sizeof(gen), seq, &r);
	}
	case 22:
		return kvc_proto_encode_ns_list(gen, sizeof(gen), seq,
						take32());
	case 23:
		a = take32();
		count = take_count(BATCH);
		for (uint32_t i = 0; i < count && i < BATCH; i++) {
			ns_e[i].ns_id = take32();
			ns_e[i].uid = take32();
			ns_e[i].gid = take32();
			ns_e[i].mode = take32();
			ns_e[i].blocks = take64();
		}
		return kvc_proto_encode_ns_list_reply(gen, sizeof(gen), seq, a,
						      ns_e, count);
	case 24: {
		struct kvc_ns_salt st;

		st.ns_id = take32();
		st.flags = take32();
		take(st.salt, sizeof(st.salt));
		return kvc_proto_encode_ns_salt(gen, sizeof(gen), seq, &st);
	}
	case 25: {
		struct kvc_ns_salt_reply r;

		r.ns_id = take32();
		take(r.salt, sizeof(r.salt));
		return kvc_proto_encode_ns_salt_reply(gen, sizeof(gen), seq,
						      &r);
	}
	case 26:
		return kvc_proto_encode_fast_map(gen, sizeof(gen), seq);
	case 27:
		return kvc_proto_encode_fast_map_reply(gen, sizeof(gen), seq);
	case 28: {
		struct kvc_touch t;

		t.count = take_count(BATCH);
		t.lookups = take32();
		t.lookup_keys = take32();
		t.hit_keys = take32();
		for (uint32_t i = 0; i < t.count && i < BATCH; i++)
			take_handle(&handle_e[i]);
		return kvc_proto_encode_touch(gen, sizeof(gen), seq, &t,
					      handle_e);
	}
	case 29:
		return kvc_proto_encode_fast_ns(gen, sizeof(gen), seq,
						take32());
	case 30:
		return kvc_proto_encode_fast_ns_reply(gen, sizeof(gen), seq);
	default: {
		int32_t err = (int32_t)take32();
		uint16_t type = take16();
		size_t len = take16() % (KVC_PROTO_ERRMSG_MAX + 40);

		take(errmsg, len);
		errmsg[len] = '\0';
		return kvc_proto_encode_error(gen, sizeof(gen), err, seq, type,
					      errmsg);
	}
	}
}

/* The type each gen_message() case encodes. */
static const uint16_t gen_types[NR_GEN] = {
	KVC_MSG_HELLO, KVC_MSG_HELLO_REPLY, KVC_MSG_LOOKUP,
	KVC_MSG_LOOKUP_REPLY, KVC_MSG_STORE, KVC_MSG_STORE_REPLY,
	KVC_MSG_RELEASE_REPLY, KVC_MSG_SEAL_REPLY, KVC_MSG_EVICT_REPLY,
	KVC_MSG_LOAD, KVC_MSG_EVICT, KVC_MSG_LOAD_REPLY, KVC_MSG_RELEASE,
	KVC_MSG_ALLOC_REPLY, KVC_MSG_STATS, KVC_MSG_STATS_REPLY,
	KVC_MSG_NS_CREATE, KVC_MSG_NS_CREATE_REPLY, KVC_MSG_ALLOC,
	KVC_MSG_SEAL, KVC_MSG_FLUSH, KVC_MSG_FLUSH_REPLY, KVC_MSG_NS_LIST,
	KVC_MSG_NS_LIST_REPLY, KVC_MSG_NS_SALT, KVC_MSG_NS_SALT_REPLY,
	KVC_MSG_FAST_MAP, KVC_MSG_FAST_MAP_REPLY, KVC_MSG_TOUCH,
	KVC_MSG_FAST_NS, KVC_MSG_FAST_NS_REPLY, KVC_MSG_ERROR,
};

static void check_encoder(const uint8_t *data, size_t size)
{
	static char errmsg[KVC_PROTO_ERRMSG_MAX + 40];
	struct kvc_msg m;
	uint8_t which;
	uint32_t seq;
	int n;

	arg = data;
	arg_left = size;
	take(&which, 1);
	seq = take32();
	n = gen_message(which, seq, errmsg);
	if (n < 0) {
		/* A buffer of KVC_PROTO_MSG_MAX always fits what is valid. */
		FUZZ_CHECK(n == -EINVAL);
		return;
	}
	FUZZ_CHECK(n >= HDR && n <= KVC_PROTO_MSG_MAX);
	if (kvc_proto_decode(gen, (size_t)n, &m)) {
		fprintf(stderr, "encoded type 0x%04x refused: %s\n",
			gen_types[which % NR_GEN], m.reason);
		FUZZ_CHECK(!"an encoded message decodes");
	}
	FUZZ_CHECK(m.type == gen_types[which % NR_GEN] && m.seq == seq);
	if (m.type == KVC_MSG_ERROR) {
		size_t want = strlen(errmsg);

		if (want > KVC_PROTO_ERRMSG_MAX)
			want = KVC_PROTO_ERRMSG_MAX;
		FUZZ_CHECK(m.error.msg_len == want);
		for (size_t i = 0; i < want; i++) {
			uint8_t c = (uint8_t)errmsg[i];

			FUZZ_CHECK((uint8_t)m.error.msg[i] ==
				   (c >= 0x20 && c <= 0x7e ? c : '?'));
		}
	}
	check_datagram(gen, (size_t)n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size && data[0] == ENCODER_MODE)
		check_encoder(data + 1, size - 1);
	else
		check_datagram(data, size);
	return 0;
}
