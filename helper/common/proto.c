// SPDX-License-Identifier: GPL-2.0
/*
 * proto: encode, decode and validate kvcached's client messages (see
 * proto.h and Documentation/userspace-api/protocol.md).
 *
 * Every field is read and written byte by byte in little-endian order.
 * Messages have exactly one valid encoding (reserved fields zero, unused
 * handles and parents zero), so decoding and re-encoding give back the
 * same bytes; the tests rely on that.
 */
#include "proto.h"

#include <errno.h>
#include <string.h>

/* Sizes of the fixed parts and entries; the offsets are in protocol.md. */
#define HELLO_SIZE		16
#define HELLO_REPLY_SIZE	32
#define LOOKUP_FIXED		16
#define LOOKUP_ENTRY		16	/* reply entry */
#define STORE_FIXED		8
#define STORE_ENTRY		80
#define BATCH_FIXED		8	/* count, reserved: the other batches */
#define HANDLE_SIZE		8
#define TOUCH_FIXED		24	/* count, reserved, three counts, reserved */
#define STATUS_SIZE		4
#define LOAD_ENTRY		16	/* reply entry */
#define STAT_FIXED		10	/* value u64, name_len u16 */
#define ERROR_FIXED		12
#define NS_CREATE_SIZE		20
#define ALLOC_SIZE		8	/* ns_id, count: no entries */
#define SEAL_ENTRY		48
#define FLUSH_SIZE		8	/* ns_id, reserved */
#define FLUSH_REPLY_SIZE	16	/* evicted, busy */
#define NS_LIST_SIZE		8	/* start, reserved */
#define NS_LIST_FIXED		8	/* count, next */
#define NS_ENTRY		24	/* NS_LIST reply entry */
#define NS_SALT_SIZE		40	/* ns_id, flags, salt: request and reply */
#define FAST_NS_SIZE		8	/* ns_id, reserved */

_Static_assert(KVC_PROTO_MAX_STORE ==
	       (KVC_PROTO_MSG_MAX - KVC_PROTO_HDR_SIZE - STORE_FIXED) /
	       STORE_ENTRY, "KVC_PROTO_MAX_STORE is what fits one message");
/* SEAL: what fits one message, capped at the batch limit. */
#define SEAL_FIT \
	((KVC_PROTO_MSG_MAX - KVC_PROTO_HDR_SIZE - BATCH_FIXED) / SEAL_ENTRY)
_Static_assert(KVC_PROTO_MAX_SEAL ==
	       (SEAL_FIT < KVC_PROTO_MAX_BATCH ? SEAL_FIT :
		KVC_PROTO_MAX_BATCH),
	       "KVC_PROTO_MAX_SEAL is what fits one message, at most 1024");
/* max_batch (HELLO reply) is at most KVC_PROTO_MAX_STORE: every limit. */
_Static_assert(KVC_PROTO_MAX_STORE <= KVC_PROTO_MAX_BATCH &&
	       KVC_PROTO_MAX_STORE <= KVC_PROTO_MAX_SEAL,
	       "STORE is the tightest batch");
/* The other fixed-size batches fit at full size; so max_batch is enough. */
_Static_assert(KVC_PROTO_HDR_SIZE + LOOKUP_FIXED +
	       KVC_PROTO_MAX_BATCH * KVCACHE_KEY_SIZE <= KVC_PROTO_MSG_MAX,
	       "LOOKUP of KVC_PROTO_MAX_BATCH keys fits");
_Static_assert(KVC_PROTO_HDR_SIZE + BATCH_FIXED +
	       KVC_PROTO_MAX_BATCH * LOAD_ENTRY <= KVC_PROTO_MSG_MAX,
	       "LOOKUP and LOAD replies of KVC_PROTO_MAX_BATCH entries fit");
_Static_assert(HANDLE_SIZE <= LOAD_ENTRY && STATUS_SIZE <= LOAD_ENTRY,
	       "RELEASE, ALLOC reply and status lists fit at full size");
/* EVICT: LOAD's layout, keys after ns_id and count. */
_Static_assert(KVC_PROTO_HDR_SIZE + BATCH_FIXED +
	       KVC_PROTO_MAX_BATCH * KVCACHE_KEY_SIZE <= KVC_PROTO_MSG_MAX,
	       "LOAD and EVICT of KVC_PROTO_MAX_BATCH keys fit");
_Static_assert(KVC_PROTO_HDR_SIZE + NS_LIST_FIXED +
	       KVC_PROTO_MAX_BATCH * NS_ENTRY <= KVC_PROTO_MSG_MAX,
	       "NS_LIST reply of KVC_PROTO_MAX_BATCH namespaces fits");
_Static_assert(KVC_PROTO_ERRMSG_MAX <= UINT16_MAX &&
	       KVC_PROTO_NAME_MAX <= UINT16_MAX, "lengths are u16");

/* ---- little-endian fields ------------------------------------------------ */

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (unsigned int)p[1] << 8);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

/* ---- rules shared by the encoders and the decoder -------------------- */

static int ns_ok(uint32_t ns_id)
{
	return ns_id >= 1 && ns_id <= KVCACHE_NS_MAX;
}

static int tiers_ok(uint32_t tiers)
{
	return tiers && !(tiers & ~KVC_PROTO_TIERS_ALL);
}

static int status_ok(int32_t s)
{
	return s <= 0 && s >= -KVC_PROTO_ERRNO_MAX;
}

static int handle_is_zero(const struct kvcache_handle *h)
{
	return !h->index && !h->gen;
}

static int key_is_zero(const uint8_t *k)
{
	uint8_t acc = 0;

	for (int i = 0; i < KVCACHE_KEY_SIZE; i++)
		acc |= k[i];
	return !acc;
}

/* Counter names end up in logs and metrics labels: keep them tame. */
static int name_ok(const char *s, size_t len)
{
	if (!s || !len || len > KVC_PROTO_NAME_MAX)
		return 0;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '.' ||
		      c == '-'))
			return 0;
	}
	return 1;
}

/* Error messages are for humans and logs: printable ASCII only. */
static int printable(uint8_t c)
{
	return c >= 0x20 && c <= 0x7e;
}

static int lookup_entry_ok(const struct kvc_lookup_entry *e)
{
	if (!tiers_ok(e->tiers))
		return 0;
	return (e->tiers & KVC_PROTO_TIER_POOL) ||
	       handle_is_zero(&e->handle);
}

/* payload_len is set with SEAL, and only then. */
static int store_entry_ok(const struct kvc_store_entry *e)
{
	if (e->flags & ~KVC_PROTO_STORE_FLAGS_ALL)
		return 0;
	if (!(e->flags & KVC_PROTO_STORE_SEAL) != !e->payload_len)
		return 0;
	return !(e->flags & KVC_PROTO_STORE_FIRST) || key_is_zero(e->parent);
}

static int load_result_ok(const struct kvc_load_result *r)
{
	return status_ok(r->status) &&
	       (!r->status || handle_is_zero(&r->handle));
}

static int ns_create_ok(const struct kvc_ns_create *c)
{
	/* Any uid and gid: the daemon refuses ids it cannot map. */
	return ns_ok(c->ns_id) && c->mode <= KVC_PROTO_NS_MODE_MAX;
}

static int flush_ns_ok(uint32_t ns_id)
{
	return ns_id == KVC_PROTO_NS_ALL || ns_ok(ns_id);
}

/* NS_LIST start: 0 and 1 both mean the first namespace. */
static int ns_list_start_ok(uint32_t start)
{
	return start <= KVCACHE_NS_MAX;
}

/*
 * An NS_LIST reply's next: 0 (complete), or where the following page
 * starts, above the last entry (last: its ns_id, 0 with no entries, so an
 * empty page is always the last) and a namespace id itself.
 */
static int ns_list_next_ok(uint32_t next, uint32_t last)
{
	return !next || (last && next > last && next <= KVCACHE_NS_MAX);
}

/* prev: the entry before it, or NULL for the first. */
static int ns_entry_ok(const struct kvc_ns_entry *e,
		       const struct kvc_ns_entry *prev)
{
	/* Any uid, gid and block count: they are the daemon's. */
	return ns_ok(e->ns_id) && e->mode <= KVC_PROTO_NS_MODE_MAX &&
	       (!prev || e->ns_id > prev->ns_id);
}

static int seal_entry_ok(const struct kvc_seal_entry *e)
{
	/* The upper bound, block_size, is the daemon's to check. */
	return !(e->flags & ~KVC_PROTO_SEAL_FLAGS_ALL) && e->payload_len;
}

static int hello_ok(const struct kvc_hello *h)
{
	return h->min_version >= 1 && h->min_version <= h->max_version;
}

static int version_known(uint16_t v)
{
	return v >= KVC_PROTO_VERSION_MIN && v <= KVC_PROTO_VERSION_MAX;
}

static int hello_reply_ok(const struct kvc_hello_reply *r)
{
	return (r->mode == KVC_PROTO_MODE_KERNEL ||
		r->mode == KVC_PROTO_MODE_MEMFD) &&
	       r->max_batch >= 1 && r->max_batch <= KVC_PROTO_MAX_STORE &&
	       !(r->caps & ~KVC_PROTO_CAP_ALL) && r->block_size;
}

/* ---- decoding -------------------------------------------------------- */

static int fail(struct kvc_msg *m, int err, const char *reason)
{
	m->reason = reason;
	return err;
}

/*
 * A batch's body is its fixed part and count entries of esize bytes, and
 * nothing else. Checks the count against 1 (when a batch may not be
 * empty) and max, then the size.
 */
static int batch_size(struct kvc_msg *m, size_t blen, size_t fixed,
		      uint32_t count, uint32_t min, uint32_t max, size_t esize)
{
	size_t want;

	if (count < min)
		return fail(m, -EINVAL, "empty batch");
	if (count > max)
		return fail(m, -E2BIG, "too many entries in one batch");
	want = fixed + (size_t)count * esize;
	if (blen < want)
		return fail(m, -EBADMSG, "count does not fit the payload");
	if (blen > want)
		return fail(m, -EBADMSG, "trailing bytes after the last entry");
	return 0;
}

static int decode_hello(struct kvc_msg *m, const uint8_t *b, size_t blen)
{
	struct kvc_hello *h = &m->hello;

	if (blen != HELLO_SIZE)
		return fail(m, -EBADMSG, "HELLO body is not 16 bytes");
	h->min_version = get16(b);
	h->max_version = get16(b + 2);
	h->caps = get64(b + 8);
	if (get32(b + 4))
		return fail(m, -EINVAL, "reserved field is not zero");
	/* Unknown capability bits are a newer client's: allowed. */
	if (!hello_ok(h))
		return fail(m, -EINVAL, "bad version range");
	return 0;
}

static int decode_hello_reply(struct kvc_msg *m, const uint8_t *b,
			      size_t blen)
{
	struct kvc_hello_reply *r = &m->hello_reply;

	if (blen != HELLO_REPLY_SIZE)
		return fail(m, -EBADMSG, "HELLO reply body is not 32 bytes");
	r->version = get16(b);
	r->mode = get16(b + 2);
	r->max_batch = get32(b + 4);
	r->caps = get64(b + 8);
	r->block_size = get64(b + 16);
	r->nr_blocks = get64(b + 24);
	if (!version_known(r->version))
		return fail(m, -EPROTONOSUPPORT, "chosen version not spoken");
	if (!hello_reply_ok(r))
		return fail(m, -EINVAL,
			    "bad mode, max_batch, caps or block size");
	return 0;
}

static int decode_lookup(struct kvc_msg *m, const uint8_t *b, size_t blen)
{
	struct kvc_lookup *l = &m->lookup;
	int ret;

	if (blen < LOOKUP_FIXED)
		return fail(m, -EBADMSG, "truncated LOOKUP");
	l->ns_id = get32(b);
	l->tiers = get32(b + 4);
	l->count = get32(b + 8);
	l->flags = get32(b + 12);
	if (l->flags & ~KVC_PROTO_LOOKUP_FLAGS_ALL)
		return fail(m, -EINVAL, "unknown LOOKUP flags");
	if (!ns_ok(l->ns_id))
		return fail(m, -EINVAL, "namespace id out of range");
	if (!tiers_ok(l->tiers))
		return fail(m, -EINVAL, "bad tier mask");
	ret = batch_size(m, blen, LOOKUP_FIXED, l->count, 1,
			 KVC_PROTO_MAX_BATCH, KVCACHE_KEY_SIZE);
	if (ret)
		return ret;
	l->keys = b + LOOKUP_FIXED;
	return 0;
}

static int decode_lookup_reply(struct kvc_msg *m, const uint8_t *b,
			       size_t blen)
{
	struct kvc_lookup_reply *r = &m->lookup_reply;
	struct kvc_lookup_entry e;
	int ret;

	if (blen < BATCH_FIXED)
		return fail(m, -EBADMSG, "truncated LOOKUP reply");
	r->matched = get32(b);
	if (get32(b + 4))
		return fail(m, -EINVAL, "reserved field is not zero");
	ret = batch_size(m, blen, BATCH_FIXED, r->matched, 0,
			 KVC_PROTO_MAX_BATCH, LOOKUP_ENTRY);
	if (ret)
		return ret;
	r->raw = b + BATCH_FIXED;
	for (uint32_t i = 0; i < r->matched; i++) {
		if (get32(r->raw + (size_t)i * LOOKUP_ENTRY + 4))
			return fail(m, -EINVAL, "reserved field is not zero");
		kvc_proto_lookup_entry(r, i, &e);
		if (!lookup_entry_ok(&e))
			return fail(m, -EINVAL,
				    "bad tier mask, or a handle off the pool");
	}
	return 0;
}

static int decode_store(struct kvc_msg *m, const uint8_t *b, size_t blen)
{
	struct kvc_store *s = &m->store;
	struct kvc_store_entry e;
	int ret;

	if (blen < STORE_FIXED)
		return fail(m, -EBADMSG, "truncated STORE");
	s->ns_id = get32(b);
	s->count = get32(b + 4);
	if (!ns_ok(s->ns_id))
		return fail(m, -EINVAL, "namespace id out of range");
	ret = batch_size(m, blen, STORE_FIXED, s->count, 1,
			 KVC_PROTO_MAX_STORE, STORE_ENTRY);
	if (ret)
		return ret;
	s->raw = b + STORE_FIXED;
	for (uint32_t i = 0; i < s->count; i++) {
		kvc_proto_store_entry(s, i, &e);
		/* Before version 3 the last field is reserved, SEAL unknown. */
		if ((e.flags & KVC_PROTO_STORE_SEAL) &&
		    m->version < KVC_PROTO_VERSION_STORE_SEAL)
			return fail(m, -EINVAL,
				    "SEAL in a STORE needs version 3");
		if (!store_entry_ok(&e))
			return fail(m, -EINVAL,
				    "bad flags, FIRST with a parent, or payload_len without SEAL");
	}
	return 0;
}

/* STORE, RELEASE, SEAL and EVICT replies. */
static int decode_status_list(struct kvc_msg *m, struct kvc_status_list *l,
			      const uint8_t *b, size_t blen)
{
	int ret;

	if (blen < BATCH_FIXED)
		return fail(m, -EBADMSG, "truncated reply");
	l->count = get32(b);
	if (get32(b + 4))
		return fail(m, -EINVAL, "reserved field is not zero");
	ret = batch_size(m, blen, BATCH_FIXED, l->count, 0,
			 KVC_PROTO_MAX_BATCH, STATUS_SIZE);
	if (ret)
		return ret;
	l->raw = b + BATCH_FIXED;
	for (uint32_t i = 0; i < l->count; i++)
		if (!status_ok(kvc_proto_status(l, i)))
			return fail(m, -EINVAL, "status is not 0 or -errno");
	return 0;
}

/*
 * The body LOAD and EVICT share: ns_id, count, then count keys. The
 * fields land in *ns, *count and *keys of the caller's union member.
 */
static int decode_ns_keys(struct kvc_msg *m, const uint8_t *b, size_t blen,
			  const char *truncated, uint32_t *ns, uint32_t *count,
			  const uint8_t **keys)
{
	int ret;

	if (blen < BATCH_FIXED)
		return fail(m, -EBADMSG, truncated);
	*ns = get32(b);
	*count = get32(b + 4);
	if (!ns_ok(*ns))
		return fail(m, -EINVAL, "namespace id out of range");
	ret = batch_size(m, blen, BATCH_FIXED, *count, 1,
			 KVC_PROTO_MAX_BATCH, KVCACHE_KEY_SIZE);
	if (ret)
		return ret;
	*keys = b + BATCH_FIXED;
	return 0;
}

static int decode_load(struct kvc_msg *m, const uint8_t *b, size_t blen)
{
	struct kvc_load *l = &m->load;

	return decode_ns_keys(m, b, blen, "truncated LOAD", &l->ns_id,
			      &l->count, &l->keys);
}

static int decode_load_reply(struct kvc_msg *m, const uint8_t *b,
			     size_t blen)
{
	struct kvc_load_reply *r = &m->load_reply;
	struct kvc_load_result res;
	int ret;

	if (blen < BATCH_FIXED)
		return fail(m, -EBADMSG, "truncated LOAD reply");
	r->count = get32(b);
	if (get32(b + 4))
		return fail(m, -EINVAL, "reserved field is not zero");
	ret = batch_size(m, blen, BATCH_FIXED, r->count, 0,
			 KVC_PROTO_MAX_BATCH, LOAD_ENTRY);
	if (ret)
		return ret;
	r->raw = b + BATCH_FIXED;
	for (uint32_t i = 0; i < r->count; i++) {
		if (get32(r->raw + (size_t)i * LOAD_ENTRY + 4))
			return fail(m, -EINVAL, "reserved field is not zero");
		kvc_proto_load_result(r, i, &res);
		if (!load_result_ok(&res))
			return fail(m, -EINVAL,
				    "bad status, or a handle with an error");
	}
	return 0;
}

static int decode_release(struct kvc_msg *m, const uint8_t *b, size_t blen)
{
	struct kvc_release *r = &m->release;
	int ret;

	if (blen < BATCH_FIXED)
		return fail(m, -EBADMSG, "truncated RELEASE");
	r->count = get32(b);
	if (get32(b + 4))
		return fail(m, -EINVAL, "reserved field is not zero");
	ret = batch_size(m, blen, BATCH_FIXED, r->count, 1,
			 KVC_PROTO_MAX_BATCH, HANDLE_SIZE);
	if (ret)
		return ret;
	r->raw = b + BATCH_FIXED;
	return 0;
}

static int decode_touch(struct kvc_msg *m, const uint8_t *b, size_t blen)
{
	struct kvc_touch *t = &m->touch;
	int ret;

	if (blen < TOUCH_FIXED)
		return fail(m, -EBADMSG, "truncated TOUCH");
	t->count = get32(b);
	t->lookups = get32(b + 8);
	t->lookup_keys = get32(b + 12);
	t->hit_keys = get32(b + 16);
	if (get32(b + 4) || get32(b + 20))
		return fail(m, -EINVAL, "reserved field is not zero");
	ret = batch_size(m, blen, TOUCH_FIXED, t->count, 0,
			 KVC_PROTO_MAX_BATCH, HANDLE_SIZE);
	if (ret)
		return ret;
	if (!t->count && !t->lookup_keys)
		return fail(m, -EINVAL, "TOUCH reports nothing");
	if (t->hit_keys > t->lookup_keys || t->lookups > t->lookup_keys)
		return fail(m, -EINVAL,
			    "TOUCH: more hits or lookups than keys");
	t->raw = b + TOUCH_FIXED;
	return 0;
}

static int decode_ns_create(struct kvc_msg *m, const uint8_t *b,
			    size_t blen)
{
	struct kvc_ns_create *c = &m->ns_create;

	if (blen != NS_CREATE_SIZE)
		return fail(m, -EBADMSG, "NS_CREATE body is not 20 bytes");
	c->ns_id = get32(b);
	c->uid = get32(b + 4);
	c->gid = get32(b + 8);
	c->mode = get32(b + 12);
	if (get32(b + 16))
		return fail(m, -EINVAL, "reserved field is not zero");
	if (!ns_ok(c->ns_id))
		return fail(m, -EINVAL, "namespace id out of range");
	if (!ns_create_ok(c))
		return fail(m, -EINVAL, "mode has bits beyond 0777");
	return 0;
}

static int decode_alloc(struct kvc_msg *m, const uint8_t *b, size_t blen)
{
	struct kvc_alloc *a = &m->alloc;

	if (blen < ALLOC_SIZE)
		return fail(m, -EBADMSG, "truncated ALLOC");
	a->ns_id = get32(b);
	a->count = get32(b + 4);
	if (!ns_ok(a->ns_id))
		return fail(m, -EINVAL, "namespace id out of range");
	/* A batch without entries: the count's checks, then trailing bytes. */
	return batch_size(m, blen, ALLOC_SIZE, a->count, 1,
			  KVC_PROTO_MAX_BATCH, 0);
}

static int decode_alloc_reply(struct kvc_msg *m, const uint8_t *b,
			      size_t blen)
{
	struct kvc_alloc_reply *r = &m->alloc_reply;
	int ret;

	if (blen < BATCH_FIXED)
		return fail(m, -EBADMSG, "truncated ALLOC reply");
	r->count = get32(b);
	if (get32(b + 4))
		return fail(m, -EINVAL, "reserved field is not zero");
	/* All or nothing: a failed ALLOC gets ERROR, never zero handles. */
	ret = batch_size(m, blen, BATCH_FIXED, r->count, 1,
			 KVC_PROTO_MAX_BATCH, HANDLE_SIZE);
	if (ret)
		return ret;
	r->raw = b + BATCH_FIXED;
	return 0;
}

static int decode_seal(struct kvc_msg *m, const uint8_t *b, size_t blen)
{
	struct kvc_seal *s = &m->seal;
	struct kvc_seal_entry e;
	int ret;

	if (blen < BATCH_FIXED)
		return fail(m, -EBADMSG, "truncated SEAL");
	s->count = get32(b);
	if (get32(b + 4))
		return fail(m, -EINVAL, "reserved field is not zero");
	ret = batch_size(m, blen, BATCH_FIXED, s->count, 1,
			 KVC_PROTO_MAX_SEAL, SEAL_ENTRY);
	if (ret)
		return ret;
	s->raw = b + BATCH_FIXED;
	for (uint32_t i = 0; i < s->count; i++) {
		kvc_proto_seal_entry(s, i, &e);
		if (!seal_entry_ok(&e))
			return fail(m, -EINVAL,
				    "bad flags, or an empty payload");
	}
	return 0;
}

static int decode_evict(struct kvc_msg *m, const uint8_t *b, size_t blen)
{
	struct kvc_evict *v = &m->evict;

	return decode_ns_keys(m, b, blen, "truncated EVICT", &v->ns_id,
			      &v->count, &v->keys);
}

static int decode_flush(struct kvc_msg *m, const uint8_t *b, size_t blen)
{
	struct kvc_flush *f = &m->flush;

	if (blen != FLUSH_SIZE)
		return fail(m, -EBADMSG, "FLUSH body is not 8 bytes");
	f->ns_id = get32(b);
	f->tiers = get32(b + 4);
	if (f->tiers & ~KVC_PROTO_TIERS_ALL)
		return fail(m, -EINVAL, "unknown tier in the mask");
	if (!flush_ns_ok(f->ns_id))
		return fail(m, -EINVAL, "namespace id out of range");
	return 0;
}

static int decode_flush_reply(struct kvc_msg *m, const uint8_t *b,
			      size_t blen)
{
	struct kvc_flush_reply *r = &m->flush_reply;

	/* Any counts: how many blocks there were is the daemon's. */
	if (blen != FLUSH_REPLY_SIZE)
		return fail(m, -EBADMSG, "FLUSH reply body is not 16 bytes");
	r->evicted = get64(b);
	r->busy = get64(b + 8);
	return 0;
}

static int decode_ns_list(struct kvc_msg *m, const uint8_t *b, size_t blen)
{
	struct kvc_ns_list *l = &m->ns_list;

	if (blen != NS_LIST_SIZE)
		return fail(m, -EBADMSG, "NS_LIST body is not 8 bytes");
	l->start = get32(b);
	if (get32(b + 4))
		return fail(m, -EINVAL, "reserved field is not zero");
	if (!ns_list_start_ok(l->start))
		return fail(m, -EINVAL, "start out of range");
	return 0;
}

static int decode_ns_list_reply(struct kvc_msg *m, const uint8_t *b,
				size_t blen)
{
	struct kvc_ns_list_reply *r = &m->ns_list_reply;
	struct kvc_ns_entry e, prev;
	uint32_t last = 0;	/* the last entry's ns_id; 0: none */
	int ret;

	if (blen < NS_LIST_FIXED)
		return fail(m, -EBADMSG, "truncated NS_LIST reply");
	r->count = get32(b);
	r->next = get32(b + 4);
	/* A fixed-part field: its range before the count, like an ns_id. */
	if (r->next > KVCACHE_NS_MAX)
		return fail(m, -EINVAL, "next out of range");
	ret = batch_size(m, blen, NS_LIST_FIXED, r->count, 0,
			 KVC_PROTO_MAX_BATCH, NS_ENTRY);
	if (ret)
		return ret;
	r->raw = b + NS_LIST_FIXED;
	for (uint32_t i = 0; i < r->count; i++) {
		kvc_proto_ns_entry(r, i, &e);
		if (!ns_entry_ok(&e, i ? &prev : NULL))
			return fail(m, -EINVAL,
				    "bad namespace id or mode, or out of order");
		prev = e;
		last = e.ns_id;
	}
	if (!ns_list_next_ok(r->next, last))
		return fail(m, -EINVAL,
			    "next not above the last entry, or with no entries");
	return 0;
}

static int salt_is_zero(const uint8_t *salt)
{
	for (size_t i = 0; i < KVC_PROTO_SALT_SIZE; i++)
		if (salt[i])
			return 0;
	return 1;
}

static int ns_salt_ok(const struct kvc_ns_salt *s)
{
	return ns_ok(s->ns_id) && !(s->flags & ~KVC_PROTO_NS_SALT_FLAGS_ALL) &&
	       ((s->flags & KVC_PROTO_NS_SALT_SET) || salt_is_zero(s->salt));
}

static int decode_fast_ns(struct kvc_msg *m, const uint8_t *b, size_t blen)
{
	if (blen != FAST_NS_SIZE)
		return fail(m, -EBADMSG, "FAST_NS body is not 8 bytes");
	m->fast_ns.ns_id = get32(b);
	if (!ns_ok(m->fast_ns.ns_id))
		return fail(m, -EINVAL, "namespace id out of range");
	if (get32(b + 4))
		return fail(m, -EINVAL, "reserved field is not zero");
	return 0;
}

static int decode_ns_salt(struct kvc_msg *m, const uint8_t *b, size_t blen)
{
	struct kvc_ns_salt *s = &m->ns_salt;

	if (blen != NS_SALT_SIZE)
		return fail(m, -EBADMSG, "NS_SALT body is not 40 bytes");
	s->ns_id = get32(b);
	s->flags = get32(b + 4);
	memcpy(s->salt, b + 8, KVC_PROTO_SALT_SIZE);
	if (!ns_ok(s->ns_id))
		return fail(m, -EINVAL, "namespace id out of range");
	if (s->flags & ~KVC_PROTO_NS_SALT_FLAGS_ALL)
		return fail(m, -EINVAL, "unknown NS_SALT flags");
	/* One encoding: a request that only asks carries no salt. */
	if (!ns_salt_ok(s))
		return fail(m, -EINVAL, "salt given without SET");
	return 0;
}

static int decode_ns_salt_reply(struct kvc_msg *m, const uint8_t *b,
				size_t blen)
{
	struct kvc_ns_salt_reply *r = &m->ns_salt_reply;

	if (blen != NS_SALT_SIZE)
		return fail(m, -EBADMSG, "NS_SALT reply body is not 40 bytes");
	r->ns_id = get32(b);
	memcpy(r->salt, b + 8, KVC_PROTO_SALT_SIZE);
	if (!ns_ok(r->ns_id))
		return fail(m, -EINVAL, "namespace id out of range");
	if (get32(b + 4))
		return fail(m, -EINVAL, "reserved field is not zero");
	return 0;
}

static int decode_stats_reply(struct kvc_msg *m, const uint8_t *b,
			      size_t blen)
{
	struct kvc_stats_reply *r = &m->stats_reply;
	size_t pos = BATCH_FIXED;

	if (blen < BATCH_FIXED)
		return fail(m, -EBADMSG, "truncated STATS reply");
	r->count = get32(b);
	if (get32(b + 4))
		return fail(m, -EINVAL, "reserved field is not zero");
	if (r->count > KVC_PROTO_MAX_BATCH)
		return fail(m, -E2BIG, "too many counters");
	/* Entries vary in size: walk them, checking each length prefix. */
	for (uint32_t i = 0; i < r->count; i++) {
		uint16_t nlen;

		if (blen - pos < STAT_FIXED)
			return fail(m, -EBADMSG,
				    "counter count does not fit the payload");
		nlen = get16(b + pos + 8);
		if (nlen > KVC_PROTO_NAME_MAX)
			return fail(m, -E2BIG, "counter name too long");
		if (nlen > blen - pos - STAT_FIXED)
			return fail(m, -EBADMSG,
				    "counter name runs past the end");
		if (!name_ok((const char *)b + pos + STAT_FIXED, nlen))
			return fail(m, -EINVAL, "bad counter name");
		pos += STAT_FIXED + nlen;
	}
	if (pos != blen)
		return fail(m, -EBADMSG,
			    "trailing bytes after the last counter");
	r->raw = b + BATCH_FIXED;
	r->raw_len = blen - BATCH_FIXED;
	return 0;
}

static int decode_error(struct kvc_msg *m, const uint8_t *b, size_t blen)
{
	struct kvc_error *e = &m->error;

	if (blen < ERROR_FIXED)
		return fail(m, -EBADMSG, "truncated ERROR");
	e->error = (int32_t)get32(b);
	e->bad_seq = get32(b + 4);
	e->bad_type = get16(b + 8);
	e->msg_len = get16(b + 10);
	if (e->error >= 0 || !status_ok(e->error))
		return fail(m, -EINVAL, "error is not -errno");
	/* Like every reply, an ERROR carries the seq it answers: once. */
	if (e->bad_seq != m->seq)
		return fail(m, -EINVAL, "bad_seq differs from the header seq");
	if (e->msg_len > KVC_PROTO_ERRMSG_MAX)
		return fail(m, -E2BIG, "error message too long");
	if (blen - ERROR_FIXED < e->msg_len)
		return fail(m, -EBADMSG, "error message runs past the end");
	if (blen - ERROR_FIXED > e->msg_len)
		return fail(m, -EBADMSG, "trailing bytes after the message");
	e->msg = (const char *)b + ERROR_FIXED;
	for (uint16_t i = 0; i < e->msg_len; i++)
		if (!printable(b[ERROR_FIXED + i]))
			return fail(m, -EINVAL, "error message not printable");
	return 0;
}

int kvc_proto_decode(const void *buf, size_t len, struct kvc_msg *out)
{
	const uint8_t *p = buf;
	const uint8_t *body;
	size_t blen;

	memset(out, 0, sizeof(*out));
	if (len > KVC_PROTO_MSG_MAX)
		return fail(out, -EMSGSIZE, "message larger than 64 KiB");
	/* The magic first: a stranger's datagram is best named as such. */
	if (len < 4)
		return fail(out, -EBADMSG, "truncated header");
	if (get32(p) != KVC_PROTO_MAGIC)
		return fail(out, -EPROTO, "bad magic: not a kvcache message");
	if (len < KVC_PROTO_HDR_SIZE)
		return fail(out, -EBADMSG, "truncated header");
	out->version = get16(p + 4);
	out->type = get16(p + 6);
	out->seq = get32(p + 8);
	if (!version_known(out->version))
		return fail(out, -EPROTONOSUPPORT,
			    "unsupported protocol version");
	if (get32(p + 12) != len)
		return fail(out, -EBADMSG,
			    "length field differs from the datagram size");
	if (get32(p + 16))
		return fail(out, -EINVAL, "unknown header flags");
	if (get32(p + 20))
		return fail(out, -EINVAL, "reserved field is not zero");

	body = p + KVC_PROTO_HDR_SIZE;
	blen = len - KVC_PROTO_HDR_SIZE;
	/* Frozen at 1 (see kvc_proto_set_version()): one encoding each. */
	if ((out->type == KVC_MSG_HELLO || out->type == KVC_MSG_HELLO_REPLY ||
	     out->type == KVC_MSG_ERROR) && out->version != 1)
		return fail(out, -EPROTONOSUPPORT,
			    "HELLO, its reply and ERROR are version 1");
	/* A type a version does not define is unknown in that version. */
	if ((out->type & ~KVC_MSG_REPLY) == KVC_MSG_NS_SALT &&
	    out->version < KVC_PROTO_VERSION_NS_SALT)
		return fail(out, -EOPNOTSUPP,
			    "message type not in this protocol version");
	if (((out->type & ~KVC_MSG_REPLY) == KVC_MSG_FAST_MAP ||
	     out->type == KVC_MSG_TOUCH) &&
	    out->version < KVC_PROTO_VERSION_FAST)
		return fail(out, -EOPNOTSUPP,
			    "message type not in this protocol version");
	if ((out->type & ~KVC_MSG_REPLY) == KVC_MSG_FAST_NS &&
	    out->version < KVC_PROTO_VERSION_FAST_NS)
		return fail(out, -EOPNOTSUPP,
			    "message type not in this protocol version");
	switch (out->type) {
	case KVC_MSG_HELLO:
		return decode_hello(out, body, blen);
	case KVC_MSG_HELLO_REPLY:
		return decode_hello_reply(out, body, blen);
	case KVC_MSG_LOOKUP:
		return decode_lookup(out, body, blen);
	case KVC_MSG_LOOKUP_REPLY:
		return decode_lookup_reply(out, body, blen);
	case KVC_MSG_STORE:
		return decode_store(out, body, blen);
	case KVC_MSG_STORE_REPLY:
		return decode_status_list(out, &out->store_reply, body, blen);
	case KVC_MSG_LOAD:
		return decode_load(out, body, blen);
	case KVC_MSG_LOAD_REPLY:
		return decode_load_reply(out, body, blen);
	case KVC_MSG_RELEASE:
		return decode_release(out, body, blen);
	case KVC_MSG_RELEASE_REPLY:
		return decode_status_list(out, &out->release_reply, body,
					  blen);
	case KVC_MSG_STATS:
		if (blen)
			return fail(out, -EBADMSG, "STATS has no body");
		return 0;
	case KVC_MSG_STATS_REPLY:
		return decode_stats_reply(out, body, blen);
	case KVC_MSG_NS_CREATE:
		return decode_ns_create(out, body, blen);
	case KVC_MSG_NS_CREATE_REPLY:
		if (blen)
			return fail(out, -EBADMSG,
				    "NS_CREATE reply has no body");
		return 0;
	case KVC_MSG_ALLOC:
		return decode_alloc(out, body, blen);
	case KVC_MSG_ALLOC_REPLY:
		return decode_alloc_reply(out, body, blen);
	case KVC_MSG_SEAL:
		return decode_seal(out, body, blen);
	case KVC_MSG_SEAL_REPLY:
		return decode_status_list(out, &out->seal_reply, body, blen);
	case KVC_MSG_EVICT:
		return decode_evict(out, body, blen);
	case KVC_MSG_EVICT_REPLY:
		return decode_status_list(out, &out->evict_reply, body, blen);
	case KVC_MSG_FLUSH:
		return decode_flush(out, body, blen);
	case KVC_MSG_FLUSH_REPLY:
		return decode_flush_reply(out, body, blen);
	case KVC_MSG_NS_LIST:
		return decode_ns_list(out, body, blen);
	case KVC_MSG_NS_LIST_REPLY:
		return decode_ns_list_reply(out, body, blen);
	case KVC_MSG_FAST_MAP:
		if (blen)
			return fail(out, -EBADMSG, "FAST_MAP has no body");
		return 0;
	case KVC_MSG_FAST_MAP_REPLY:
		if (blen)
			return fail(out, -EBADMSG,
				    "FAST_MAP reply has no body");
		return 0;
	case KVC_MSG_FAST_NS:
		return decode_fast_ns(out, body, blen);
	case KVC_MSG_FAST_NS_REPLY:
		if (blen)
			return fail(out, -EBADMSG, "FAST_NS reply has no body");
		return 0;
	case KVC_MSG_TOUCH:
		return decode_touch(out, body, blen);
	case KVC_MSG_NS_SALT:
		return decode_ns_salt(out, body, blen);
	case KVC_MSG_NS_SALT_REPLY:
		return decode_ns_salt_reply(out, body, blen);
	case KVC_MSG_ERROR:
		return decode_error(out, body, blen);
	default:
		return fail(out, -EOPNOTSUPP, "unknown message type");
	}
}

/* ---- accessors ------------------------------------------------------- */

static void get_handle(const uint8_t *p, struct kvcache_handle *h)
{
	h->index = get32(p);
	h->gen = get32(p + 4);
}

void kvc_proto_lookup_entry(const struct kvc_lookup_reply *r, uint32_t i,
			    struct kvc_lookup_entry *e)
{
	const uint8_t *p = r->raw + (size_t)i * LOOKUP_ENTRY;

	e->tiers = get32(p);
	get_handle(p + 8, &e->handle);
}

void kvc_proto_store_entry(const struct kvc_store *s, uint32_t i,
			   struct kvc_store_entry *e)
{
	const uint8_t *p = s->raw + (size_t)i * STORE_ENTRY;

	memcpy(e->key, p, KVCACHE_KEY_SIZE);
	memcpy(e->parent, p + 32, KVCACHE_KEY_SIZE);
	get_handle(p + 64, &e->handle);
	e->flags = get32(p + 72);
	e->payload_len = get32(p + 76);
}

int32_t kvc_proto_status(const struct kvc_status_list *l, uint32_t i)
{
	return (int32_t)get32(l->raw + (size_t)i * STATUS_SIZE);
}

void kvc_proto_load_result(const struct kvc_load_reply *r, uint32_t i,
			   struct kvc_load_result *res)
{
	const uint8_t *p = r->raw + (size_t)i * LOAD_ENTRY;

	res->status = (int32_t)get32(p);
	get_handle(p + 8, &res->handle);
}

void kvc_proto_release_handle(const struct kvc_release *r, uint32_t i,
			      struct kvcache_handle *h)
{
	get_handle(r->raw + (size_t)i * HANDLE_SIZE, h);
}

void kvc_proto_touch_handle(const struct kvc_touch *t, uint32_t i,
			    struct kvcache_handle *h)
{
	get_handle(t->raw + (size_t)i * HANDLE_SIZE, h);
}

void kvc_proto_alloc_handle(const struct kvc_alloc_reply *r, uint32_t i,
			    struct kvcache_handle *h)
{
	get_handle(r->raw + (size_t)i * HANDLE_SIZE, h);
}

void kvc_proto_seal_entry(const struct kvc_seal *s, uint32_t i,
			  struct kvc_seal_entry *e)
{
	const uint8_t *p = s->raw + (size_t)i * SEAL_ENTRY;

	get_handle(p, &e->handle);
	e->payload_len = get32(p + 8);
	e->flags = get32(p + 12);
	memcpy(e->key, p + 16, KVCACHE_KEY_SIZE);
}

void kvc_proto_ns_entry(const struct kvc_ns_list_reply *r, uint32_t i,
			struct kvc_ns_entry *e)
{
	const uint8_t *p = r->raw + (size_t)i * NS_ENTRY;

	e->ns_id = get32(p);
	e->uid = get32(p + 4);
	e->gid = get32(p + 8);
	e->mode = get32(p + 12);
	e->blocks = get64(p + 16);
}

int kvc_proto_stats_next(const struct kvc_stats_reply *r, size_t *pos,
			 struct kvc_stat *st)
{
	const uint8_t *p;

	/* The decoder checked every length, so only the end needs a test. */
	if (*pos >= r->raw_len)
		return 0;
	p = r->raw + *pos;
	st->value = get64(p);
	st->name_len = get16(p + 8);
	st->name = (const char *)p + STAT_FIXED;
	*pos += STAT_FIXED + st->name_len;
	return 1;
}

/* ---- encoding -------------------------------------------------------- */

/* Room for a message of total bytes, and its header written. */
static int begin(void *buf, size_t size, size_t total, uint16_t type,
		 uint32_t seq)
{
	uint8_t *p = buf;

	if (total > KVC_PROTO_MSG_MAX)
		return -EINVAL;
	if (total > size)
		return -ENOSPC;
	put32(p, KVC_PROTO_MAGIC);
	put16(p + 4, KVC_PROTO_VERSION);
	put16(p + 6, type);
	put32(p + 8, seq);
	put32(p + 12, (uint32_t)total);
	put32(p + 16, 0);	/* flags */
	put32(p + 20, 0);	/* reserved */
	return 0;
}

static void put_handle(uint8_t *p, const struct kvcache_handle *h)
{
	put32(p, h->index);
	put32(p + 4, h->gen);
}

int kvc_proto_encode_hello(void *buf, size_t size, uint32_t seq,
			   const struct kvc_hello *h)
{
	const size_t total = KVC_PROTO_HDR_SIZE + HELLO_SIZE;
	uint8_t *b = (uint8_t *)buf + KVC_PROTO_HDR_SIZE;
	int ret;

	if (!hello_ok(h))
		return -EINVAL;
	ret = begin(buf, size, total, KVC_MSG_HELLO, seq);
	if (ret)
		return ret;
	put16(b, h->min_version);
	put16(b + 2, h->max_version);
	put32(b + 4, 0);
	put64(b + 8, h->caps);
	return (int)total;
}

int kvc_proto_encode_hello_reply(void *buf, size_t size, uint32_t seq,
				 const struct kvc_hello_reply *r)
{
	const size_t total = KVC_PROTO_HDR_SIZE + HELLO_REPLY_SIZE;
	uint8_t *b = (uint8_t *)buf + KVC_PROTO_HDR_SIZE;
	int ret;

	if (!version_known(r->version) || !hello_reply_ok(r))
		return -EINVAL;
	ret = begin(buf, size, total, KVC_MSG_HELLO_REPLY, seq);
	if (ret)
		return ret;
	put16(b, r->version);
	put16(b + 2, r->mode);
	put32(b + 4, r->max_batch);
	put64(b + 8, r->caps);
	put64(b + 16, r->block_size);
	put64(b + 24, r->nr_blocks);
	return (int)total;
}

int kvc_proto_encode_lookup(void *buf, size_t size, uint32_t seq,
			    uint32_t ns_id, uint32_t tiers,
			    const uint8_t *keys,
			    uint32_t count)
{
	return kvc_proto_encode_lookup_flags(buf, size, seq, ns_id, tiers, 0,
					     keys, count);
}

int kvc_proto_encode_lookup_flags(void *buf, size_t size, uint32_t seq,
				  uint32_t ns_id, uint32_t tiers,
				  uint32_t flags, const uint8_t *keys,
				  uint32_t count)
{
	uint8_t *b = (uint8_t *)buf + KVC_PROTO_HDR_SIZE;
	size_t total;
	int ret;

	if (!ns_ok(ns_id) || !tiers_ok(tiers) || !count ||
	    count > KVC_PROTO_MAX_BATCH || !keys ||
	    (flags & ~KVC_PROTO_LOOKUP_FLAGS_ALL))
		return -EINVAL;
	total = KVC_PROTO_HDR_SIZE + LOOKUP_FIXED +
		(size_t)count * KVCACHE_KEY_SIZE;
	ret = begin(buf, size, total, KVC_MSG_LOOKUP, seq);
	if (ret)
		return ret;
	put32(b, ns_id);
	put32(b + 4, tiers);
	put32(b + 8, count);
	put32(b + 12, flags);
	/* Keys are bytes, not integers: they go out as they are. */
	memcpy(b + LOOKUP_FIXED, keys, (size_t)count * KVCACHE_KEY_SIZE);
	return (int)total;
}

int kvc_proto_encode_lookup_reply(void *buf, size_t size, uint32_t seq,
				  const struct kvc_lookup_entry *e,
				  uint32_t matched)
{
	uint8_t *b = (uint8_t *)buf + KVC_PROTO_HDR_SIZE;
	size_t total;
	int ret;

	if (matched > KVC_PROTO_MAX_BATCH || (matched && !e))
		return -EINVAL;
	for (uint32_t i = 0; i < matched; i++)
		if (!lookup_entry_ok(&e[i]))
			return -EINVAL;
	total = KVC_PROTO_HDR_SIZE + BATCH_FIXED +
		(size_t)matched * LOOKUP_ENTRY;
	ret = begin(buf, size, total, KVC_MSG_LOOKUP_REPLY, seq);
	if (ret)
		return ret;
	put32(b, matched);
	put32(b + 4, 0);
	b += BATCH_FIXED;
	for (uint32_t i = 0; i < matched; i++, b += LOOKUP_ENTRY) {
		put32(b, e[i].tiers);
		put32(b + 4, 0);
		put_handle(b + 8, &e[i].handle);
	}
	return (int)total;
}

int kvc_proto_encode_store(void *buf, size_t size, uint32_t seq,
			   uint32_t ns_id, const struct kvc_store_entry *e,
			   uint32_t count)
{
	uint8_t *b = (uint8_t *)buf + KVC_PROTO_HDR_SIZE;
	uint32_t seal = 0;
	size_t total;
	int ret;

	if (!ns_ok(ns_id) || !count || count > KVC_PROTO_MAX_STORE || !e)
		return -EINVAL;
	for (uint32_t i = 0; i < count; i++) {
		if (!store_entry_ok(&e[i]))
			return -EINVAL;
		seal |= e[i].flags & KVC_PROTO_STORE_SEAL;
	}
	total = KVC_PROTO_HDR_SIZE + STORE_FIXED + (size_t)count * STORE_ENTRY;
	ret = begin(buf, size, total, KVC_MSG_STORE, seq);
	if (ret)
		return ret;
	if (seal)
		put16((uint8_t *)buf + 4, KVC_PROTO_VERSION_STORE_SEAL);
	put32(b, ns_id);
	put32(b + 4, count);
	b += STORE_FIXED;
	for (uint32_t i = 0; i < count; i++, b += STORE_ENTRY) {
		memcpy(b, e[i].key, KVCACHE_KEY_SIZE);
		memcpy(b + 32, e[i].parent, KVCACHE_KEY_SIZE);
		put_handle(b + 64, &e[i].handle);
		put32(b + 72, e[i].flags);
		put32(b + 76, e[i].payload_len);
	}
	return (int)total;
}

static int encode_status_list(void *buf, size_t size, uint16_t type,
			      uint32_t seq, const int32_t *status,
			      uint32_t count)
{
	uint8_t *b = (uint8_t *)buf + KVC_PROTO_HDR_SIZE;
	size_t total;
	int ret;

	if (count > KVC_PROTO_MAX_BATCH || (count && !status))
		return -EINVAL;
	for (uint32_t i = 0; i < count; i++)
		if (!status_ok(status[i]))
			return -EINVAL;
	total = KVC_PROTO_HDR_SIZE + BATCH_FIXED + (size_t)count * STATUS_SIZE;
	ret = begin(buf, size, total, type, seq);
	if (ret)
		return ret;
	put32(b, count);
	put32(b + 4, 0);
	b += BATCH_FIXED;
	for (uint32_t i = 0; i < count; i++)
		put32(b + (size_t)i * STATUS_SIZE, (uint32_t)status[i]);
	return (int)total;
}

int kvc_proto_encode_store_reply(void *buf, size_t size, uint32_t seq,
				 const int32_t *status, uint32_t count)
{
	return encode_status_list(buf, size, KVC_MSG_STORE_REPLY, seq, status,
				  count);
}

/* LOAD and EVICT: ns_id, count, then the keys. */
static int encode_ns_keys(void *buf, size_t size, uint16_t type, uint32_t seq,
			  uint32_t ns_id, const uint8_t *keys, uint32_t count)
{
	uint8_t *b = (uint8_t *)buf + KVC_PROTO_HDR_SIZE;
	size_t total;
	int ret;

	if (!ns_ok(ns_id) || !count || count > KVC_PROTO_MAX_BATCH || !keys)
		return -EINVAL;
	total = KVC_PROTO_HDR_SIZE + BATCH_FIXED +
		(size_t)count * KVCACHE_KEY_SIZE;
	ret = begin(buf, size, total, type, seq);
	if (ret)
		return ret;
	put32(b, ns_id);
	put32(b + 4, count);
	memcpy(b + BATCH_FIXED, keys, (size_t)count * KVCACHE_KEY_SIZE);
	return (int)total;
}

int kvc_proto_encode_load(void *buf, size_t size, uint32_t seq,
			  uint32_t ns_id,
			  const uint8_t *keys,
			  uint32_t count)
{
	return encode_ns_keys(buf, size, KVC_MSG_LOAD, seq, ns_id, keys,
			      count);
}

int kvc_proto_encode_load_reply(void *buf, size_t size, uint32_t seq,
				const struct kvc_load_result *r,
				uint32_t count)
{
	uint8_t *b = (uint8_t *)buf + KVC_PROTO_HDR_SIZE;
	size_t total;
	int ret;

	if (count > KVC_PROTO_MAX_BATCH || (count && !r))
		return -EINVAL;
	for (uint32_t i = 0; i < count; i++)
		if (!load_result_ok(&r[i]))
			return -EINVAL;
	total = KVC_PROTO_HDR_SIZE + BATCH_FIXED + (size_t)count * LOAD_ENTRY;
	ret = begin(buf, size, total, KVC_MSG_LOAD_REPLY, seq);
	if (ret)
		return ret;
	put32(b, count);
	put32(b + 4, 0);
	b += BATCH_FIXED;
	for (uint32_t i = 0; i < count; i++, b += LOAD_ENTRY) {
		put32(b, (uint32_t)r[i].status);
		put32(b + 4, 0);
		put_handle(b + 8, &r[i].handle);
	}
	return (int)total;
}

int kvc_proto_encode_release(void *buf, size_t size, uint32_t seq,
			     const struct kvcache_handle *h, uint32_t count)
{
	uint8_t *b = (uint8_t *)buf + KVC_PROTO_HDR_SIZE;
	size_t total;
	int ret;

	if (!count || count > KVC_PROTO_MAX_BATCH || !h)
		return -EINVAL;
	total = KVC_PROTO_HDR_SIZE + BATCH_FIXED + (size_t)count * HANDLE_SIZE;
	ret = begin(buf, size, total, KVC_MSG_RELEASE, seq);
	if (ret)
		return ret;
	put32(b, count);
	put32(b + 4, 0);
	b += BATCH_FIXED;
	for (uint32_t i = 0; i < count; i++)
		put_handle(b + (size_t)i * HANDLE_SIZE, &h[i]);
	return (int)total;
}

int kvc_proto_encode_touch(void *buf, size_t size, uint32_t seq,
			   const struct kvc_touch *t,
			   const struct kvcache_handle *h)
{
	uint8_t *b = (uint8_t *)buf + KVC_PROTO_HDR_SIZE;
	size_t total;
	int ret;

	if (!t || t->count > KVC_PROTO_MAX_BATCH || (t->count && !h) ||
	    (!t->count && !t->lookup_keys) || t->hit_keys > t->lookup_keys ||
	    t->lookups > t->lookup_keys)
		return -EINVAL;
	total = KVC_PROTO_HDR_SIZE + TOUCH_FIXED +
		(size_t)t->count * HANDLE_SIZE;
	ret = begin(buf, size, total, KVC_MSG_TOUCH, seq);
	if (ret)
		return ret;
	put16((uint8_t *)buf + 4, KVC_PROTO_VERSION_FAST);
	put32(b, t->count);
	put32(b + 4, 0);
	put32(b + 8, t->lookups);
	put32(b + 12, t->lookup_keys);
	put32(b + 16, t->hit_keys);
	put32(b + 20, 0);
	b += TOUCH_FIXED;
	for (uint32_t i = 0; i < t->count; i++)
		put_handle(b + (size_t)i * HANDLE_SIZE, &h[i]);
	return (int)total;
}

int kvc_proto_encode_fast_map(void *buf, size_t size, uint32_t seq)
{
	int ret = begin(buf, size, KVC_PROTO_HDR_SIZE, KVC_MSG_FAST_MAP, seq);

	if (ret)
		return ret;
	put16((uint8_t *)buf + 4, KVC_PROTO_VERSION_FAST);
	return KVC_PROTO_HDR_SIZE;
}

int kvc_proto_encode_fast_map_reply(void *buf, size_t size, uint32_t seq)
{
	int ret = begin(buf, size, KVC_PROTO_HDR_SIZE, KVC_MSG_FAST_MAP_REPLY,
			seq);

	if (ret)
		return ret;
	put16((uint8_t *)buf + 4, KVC_PROTO_VERSION_FAST);
	return KVC_PROTO_HDR_SIZE;
}

int kvc_proto_encode_fast_ns(void *buf, size_t size, uint32_t seq,
			     uint32_t ns_id)
{
	const size_t total = KVC_PROTO_HDR_SIZE + FAST_NS_SIZE;
	uint8_t *b = (uint8_t *)buf + KVC_PROTO_HDR_SIZE;
	int ret;

	if (!ns_ok(ns_id))
		return -EINVAL;
	ret = begin(buf, size, total, KVC_MSG_FAST_NS, seq);
	if (ret)
		return ret;
	put16((uint8_t *)buf + 4, KVC_PROTO_VERSION_FAST_NS);
	put32(b, ns_id);
	put32(b + 4, 0);
	return (int)total;
}

int kvc_proto_encode_fast_ns_reply(void *buf, size_t size, uint32_t seq)
{
	int ret = begin(buf, size, KVC_PROTO_HDR_SIZE, KVC_MSG_FAST_NS_REPLY,
			seq);

	if (ret)
		return ret;
	put16((uint8_t *)buf + 4, KVC_PROTO_VERSION_FAST_NS);
	return KVC_PROTO_HDR_SIZE;
}

int kvc_proto_encode_release_reply(void *buf, size_t size, uint32_t seq,
				   const int32_t *status, uint32_t count)
{
	return encode_status_list(buf, size, KVC_MSG_RELEASE_REPLY, seq,
				  status, count);
}

int kvc_proto_encode_stats(void *buf, size_t size, uint32_t seq)
{
	int ret = begin(buf, size, KVC_PROTO_HDR_SIZE, KVC_MSG_STATS, seq);

	return ret ? ret : KVC_PROTO_HDR_SIZE;
}

int kvc_proto_encode_stats_reply(void *buf, size_t size, uint32_t seq,
				 const struct kvc_stat *st, uint32_t count)
{
	uint8_t *b = (uint8_t *)buf + KVC_PROTO_HDR_SIZE;
	size_t total = KVC_PROTO_HDR_SIZE + BATCH_FIXED;
	int ret;

	if (count > KVC_PROTO_MAX_BATCH || (count && !st))
		return -EINVAL;
	/* Bounded names and count: the sum cannot overflow. */
	for (uint32_t i = 0; i < count; i++) {
		if (!name_ok(st[i].name, st[i].name_len))
			return -EINVAL;
		total += STAT_FIXED + st[i].name_len;
	}
	ret = begin(buf, size, total, KVC_MSG_STATS_REPLY, seq);
	if (ret)
		return ret;
	put32(b, count);
	put32(b + 4, 0);
	b += BATCH_FIXED;
	for (uint32_t i = 0; i < count; i++) {
		put64(b, st[i].value);
		put16(b + 8, st[i].name_len);
		memcpy(b + STAT_FIXED, st[i].name, st[i].name_len);
		b += STAT_FIXED + st[i].name_len;
	}
	return (int)total;
}

int kvc_proto_encode_ns_create(void *buf, size_t size, uint32_t seq,
			       const struct kvc_ns_create *c)
{
	const size_t total = KVC_PROTO_HDR_SIZE + NS_CREATE_SIZE;
	uint8_t *b = (uint8_t *)buf + KVC_PROTO_HDR_SIZE;
	int ret;

	if (!ns_create_ok(c))
		return -EINVAL;
	ret = begin(buf, size, total, KVC_MSG_NS_CREATE, seq);
	if (ret)
		return ret;
	put32(b, c->ns_id);
	put32(b + 4, c->uid);
	put32(b + 8, c->gid);
	put32(b + 12, c->mode);
	put32(b + 16, 0);
	return (int)total;
}

int kvc_proto_encode_ns_create_reply(void *buf, size_t size, uint32_t seq)
{
	int ret = begin(buf, size, KVC_PROTO_HDR_SIZE,
			KVC_MSG_NS_CREATE_REPLY, seq);

	return ret ? ret : KVC_PROTO_HDR_SIZE;
}

int kvc_proto_encode_alloc(void *buf, size_t size, uint32_t seq,
			   uint32_t ns_id, uint32_t count)
{
	const size_t total = KVC_PROTO_HDR_SIZE + ALLOC_SIZE;
	uint8_t *b = (uint8_t *)buf + KVC_PROTO_HDR_SIZE;
	int ret;

	if (!ns_ok(ns_id) || !count || count > KVC_PROTO_MAX_BATCH)
		return -EINVAL;
	ret = begin(buf, size, total, KVC_MSG_ALLOC, seq);
	if (ret)
		return ret;
	put32(b, ns_id);
	put32(b + 4, count);
	return (int)total;
}

int kvc_proto_encode_alloc_reply(void *buf, size_t size, uint32_t seq,
				 const struct kvcache_handle *h,
				 uint32_t count)
{
	uint8_t *b = (uint8_t *)buf + KVC_PROTO_HDR_SIZE;
	size_t total;
	int ret;

	if (!count || count > KVC_PROTO_MAX_BATCH || !h)
		return -EINVAL;
	total = KVC_PROTO_HDR_SIZE + BATCH_FIXED + (size_t)count * HANDLE_SIZE;
	ret = begin(buf, size, total, KVC_MSG_ALLOC_REPLY, seq);
	if (ret)
		return ret;
	put32(b, count);
	put32(b + 4, 0);
	b += BATCH_FIXED;
	for (uint32_t i = 0; i < count; i++)
		put_handle(b + (size_t)i * HANDLE_SIZE, &h[i]);
	return (int)total;
}

int kvc_proto_encode_seal(void *buf, size_t size, uint32_t seq,
			  const struct kvc_seal_entry *e, uint32_t count)
{
	uint8_t *b = (uint8_t *)buf + KVC_PROTO_HDR_SIZE;
	size_t total;
	int ret;

	if (!count || count > KVC_PROTO_MAX_SEAL || !e)
		return -EINVAL;
	for (uint32_t i = 0; i < count; i++)
		if (!seal_entry_ok(&e[i]))
			return -EINVAL;
	total = KVC_PROTO_HDR_SIZE + BATCH_FIXED + (size_t)count * SEAL_ENTRY;
	ret = begin(buf, size, total, KVC_MSG_SEAL, seq);
	if (ret)
		return ret;
	put32(b, count);
	put32(b + 4, 0);
	b += BATCH_FIXED;
	for (uint32_t i = 0; i < count; i++, b += SEAL_ENTRY) {
		put_handle(b, &e[i].handle);
		put32(b + 8, e[i].payload_len);
		put32(b + 12, e[i].flags);
		memcpy(b + 16, e[i].key, KVCACHE_KEY_SIZE);
	}
	return (int)total;
}

int kvc_proto_encode_seal_reply(void *buf, size_t size, uint32_t seq,
				const int32_t *status, uint32_t count)
{
	return encode_status_list(buf, size, KVC_MSG_SEAL_REPLY, seq, status,
				  count);
}

int kvc_proto_encode_evict(void *buf, size_t size, uint32_t seq,
			   uint32_t ns_id,
			   const uint8_t *keys,
			   uint32_t count)
{
	return encode_ns_keys(buf, size, KVC_MSG_EVICT, seq, ns_id, keys,
			      count);
}

int kvc_proto_encode_evict_reply(void *buf, size_t size, uint32_t seq,
				 const int32_t *status, uint32_t count)
{
	return encode_status_list(buf, size, KVC_MSG_EVICT_REPLY, seq, status,
				  count);
}

int kvc_proto_encode_flush_tiers(void *buf, size_t size, uint32_t seq,
				 uint32_t ns_id, uint32_t tiers)
{
	const size_t total = KVC_PROTO_HDR_SIZE + FLUSH_SIZE;
	uint8_t *b = (uint8_t *)buf + KVC_PROTO_HDR_SIZE;
	int ret;

	if (!flush_ns_ok(ns_id) || (tiers & ~KVC_PROTO_TIERS_ALL))
		return -EINVAL;
	ret = begin(buf, size, total, KVC_MSG_FLUSH, seq);
	if (ret)
		return ret;
	put32(b, ns_id);
	put32(b + 4, tiers);
	return (int)total;
}

int kvc_proto_encode_flush(void *buf, size_t size, uint32_t seq,
			   uint32_t ns_id)
{
	return kvc_proto_encode_flush_tiers(buf, size, seq, ns_id, 0);
}

int kvc_proto_encode_flush_reply(void *buf, size_t size, uint32_t seq,
				 const struct kvc_flush_reply *r)
{
	const size_t total = KVC_PROTO_HDR_SIZE + FLUSH_REPLY_SIZE;
	uint8_t *b = (uint8_t *)buf + KVC_PROTO_HDR_SIZE;
	int ret;

	if (!r)
		return -EINVAL;
	ret = begin(buf, size, total, KVC_MSG_FLUSH_REPLY, seq);
	if (ret)
		return ret;
	put64(b, r->evicted);
	put64(b + 8, r->busy);
	return (int)total;
}

int kvc_proto_encode_ns_list(void *buf, size_t size, uint32_t seq,
			     uint32_t start)
{
	const size_t total = KVC_PROTO_HDR_SIZE + NS_LIST_SIZE;
	uint8_t *b = (uint8_t *)buf + KVC_PROTO_HDR_SIZE;
	int ret;

	if (!ns_list_start_ok(start))
		return -EINVAL;
	ret = begin(buf, size, total, KVC_MSG_NS_LIST, seq);
	if (ret)
		return ret;
	put32(b, start);
	put32(b + 4, 0);
	return (int)total;
}

int kvc_proto_encode_ns_list_reply(void *buf, size_t size, uint32_t seq,
				   uint32_t next,
				   const struct kvc_ns_entry *e,
				   uint32_t count)
{
	uint8_t *b = (uint8_t *)buf + KVC_PROTO_HDR_SIZE;
	size_t total;
	int ret;

	if (count > KVC_PROTO_MAX_BATCH || (count && !e))
		return -EINVAL;
	for (uint32_t i = 0; i < count; i++)
		if (!ns_entry_ok(&e[i], i ? &e[i - 1] : NULL))
			return -EINVAL;
	if (!ns_list_next_ok(next, count ? e[count - 1].ns_id : 0))
		return -EINVAL;
	total = KVC_PROTO_HDR_SIZE + NS_LIST_FIXED +
		(size_t)count * NS_ENTRY;
	ret = begin(buf, size, total, KVC_MSG_NS_LIST_REPLY, seq);
	if (ret)
		return ret;
	put32(b, count);
	put32(b + 4, next);
	b += NS_LIST_FIXED;
	for (uint32_t i = 0; i < count; i++, b += NS_ENTRY) {
		put32(b, e[i].ns_id);
		put32(b + 4, e[i].uid);
		put32(b + 8, e[i].gid);
		put32(b + 12, e[i].mode);
		put64(b + 16, e[i].blocks);
	}
	return (int)total;
}

int kvc_proto_encode_ns_salt(void *buf, size_t size, uint32_t seq,
			     const struct kvc_ns_salt *s)
{
	const size_t total = KVC_PROTO_HDR_SIZE + NS_SALT_SIZE;
	uint8_t *b = (uint8_t *)buf + KVC_PROTO_HDR_SIZE;
	int ret;

	if (!s || !ns_salt_ok(s))
		return -EINVAL;
	ret = begin(buf, size, total, KVC_MSG_NS_SALT, seq);
	if (ret)
		return ret;
	put16((uint8_t *)buf + 4, KVC_PROTO_VERSION_NS_SALT);
	put32(b, s->ns_id);
	put32(b + 4, s->flags);
	memcpy(b + 8, s->salt, KVC_PROTO_SALT_SIZE);
	return (int)total;
}

int kvc_proto_encode_ns_salt_reply(void *buf, size_t size, uint32_t seq,
				   const struct kvc_ns_salt_reply *r)
{
	const size_t total = KVC_PROTO_HDR_SIZE + NS_SALT_SIZE;
	uint8_t *b = (uint8_t *)buf + KVC_PROTO_HDR_SIZE;
	int ret;

	if (!r || !ns_ok(r->ns_id))
		return -EINVAL;
	ret = begin(buf, size, total, KVC_MSG_NS_SALT_REPLY, seq);
	if (ret)
		return ret;
	put16((uint8_t *)buf + 4, KVC_PROTO_VERSION_NS_SALT);
	put32(b, r->ns_id);
	put32(b + 4, 0);
	memcpy(b + 8, r->salt, KVC_PROTO_SALT_SIZE);
	return (int)total;
}

int kvc_proto_set_version(void *buf, int len, uint16_t version)
{
	uint8_t *p = buf;
	uint16_t type;

	if (len < KVC_PROTO_HDR_SIZE || !version_known(version))
		return len;
	type = get16(p + 6);
	/* Frozen at 1, so that any two peers can negotiate and report. */
	if (type == KVC_MSG_HELLO || type == KVC_MSG_HELLO_REPLY ||
	    type == KVC_MSG_ERROR)
		return len;
	/* Never below what the message needs (NS_SALT is 2 on). */
	if (version > get16(p + 4))
		put16(p + 4, version);
	return len;
}

int kvc_proto_encode_error(void *buf, size_t size, int err, uint32_t bad_seq,
			   uint16_t bad_type, const char *msg)
{
	uint8_t *b = (uint8_t *)buf + KVC_PROTO_HDR_SIZE;
	size_t n = msg ? strnlen(msg, KVC_PROTO_ERRMSG_MAX) : 0;
	size_t total = KVC_PROTO_HDR_SIZE + ERROR_FIXED + n;
	int ret;

	if (err >= 0 || err < -KVC_PROTO_ERRNO_MAX)
		return -EINVAL;
	/* The reply's own seq is the one it answers, like any reply's. */
	ret = begin(buf, size, total, KVC_MSG_ERROR, bad_seq);
	if (ret)
		return ret;
	put32(b, (uint32_t)err);
	put32(b + 4, bad_seq);
	put16(b + 8, bad_type);
	put16(b + 10, (uint16_t)n);
	for (size_t i = 0; i < n; i++)
		b[ERROR_FIXED + i] = printable((uint8_t)msg[i]) ?
				     (uint8_t)msg[i] : '?';
	return (int)total;
}

int kvc_proto_encode_decode_error(void *buf, size_t size, int err,
				  const struct kvc_msg *failed)
{
	return kvc_proto_encode_error(buf, size, err, failed->seq,
				      failed->type,
				      failed->reason ? failed->reason :
				      "malformed message");
}

int kvc_proto_choose_version(uint16_t min, uint16_t max)
{
	uint16_t hi = max < KVC_PROTO_VERSION_MAX ? max : KVC_PROTO_VERSION_MAX;
	uint16_t lo = min > KVC_PROTO_VERSION_MIN ? min : KVC_PROTO_VERSION_MIN;

	return lo <= hi ? hi : -EPROTONOSUPPORT;
}

int kvc_proto_is_request(uint16_t type)
{
	return type >= KVC_MSG_HELLO && type <= KVC_MSG_FAST_NS;
}
