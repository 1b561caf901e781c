/* SPDX-License-Identifier: GPL-2.0 */
/*
 * proto: the wire format between kvcached and its clients
 * (Documentation/userspace-api/protocol.md has the byte layout and the rules).
 *
 * Clients talk to kvcached over a SOCK_SEQPACKET Unix socket: one message
 * per datagram, at most KVC_PROTO_MSG_MAX bytes. Every integer is
 * little-endian on the wire and is encoded and decoded field by field, so
 * the format does not depend on the host's endianness, struct layout or
 * padding. These functions are pure: no I/O, no allocation, no global
 * state. The decoder validates everything a peer could get wrong; the
 * encoders refuse to produce what the decoder would refuse, so an encoded
 * message always decodes.
 */
#ifndef KVC_PROTO_H
#define KVC_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include <linux/kvcache.h>

/* The bytes "KVCP" at offset 0, read as a little-endian u32. */
#define KVC_PROTO_MAGIC		0x5043564Bu

/*
 * Versions this code speaks; HELLO picks one (kvc_proto_choose_version).
 * Version 2 is version 1 plus NS_SALT: every version-1 layout is the same
 * in version 2. Version 3 is version 2 plus STORE's SEAL flag, which gives
 * the entry's last field (reserved before) a meaning. The encoders write
 * KVC_PROTO_VERSION (1) into the header, NS_SALT's write 2 and a STORE
 * with a SEAL entry 3 (the first version that has them); a peer that
 * negotiated more restamps the rest with kvc_proto_set_version().
 * Version 4 adds FAST_MAP and TOUCH (memfd mode's fast path), written
 * with version 4. Version 5 adds FAST_NS (kernel mode's fast path: one
 * namespace's segment), written with version 5.
 */
#define KVC_PROTO_VERSION_MIN	1
#define KVC_PROTO_VERSION_MAX	5
#define KVC_PROTO_VERSION	1	/* what most encoders write */
#define KVC_PROTO_VERSION_NS_SALT 2	/* the first version with NS_SALT */
#define KVC_PROTO_VERSION_STORE_SEAL 3	/* the first with STORE's SEAL */
#define KVC_PROTO_VERSION_FAST	4	/* the first with FAST_MAP, TOUCH */
#define KVC_PROTO_VERSION_FAST_NS 5	/* the first with FAST_NS */

#define KVC_PROTO_HDR_SIZE	24
/* Bytes in one message (one datagram), header included. */
#define KVC_PROTO_MSG_MAX	65536

/*
 * Batch limits. No count may exceed KVC_PROTO_MAX_BATCH. Each per-type
 * limit is what fits one message, capped at KVC_PROTO_MAX_BATCH (proto.c
 * checks the arithmetic). A STORE entry is 80 bytes, so only
 * KVC_PROTO_MAX_STORE of them fit, the smallest limit; a SEAL entry is 48
 * bytes, and 1364 would fit, so SEAL gets the full KVC_PROTO_MAX_BATCH;
 * the other batches (keys, handles, 16- and 24-byte entries) fit at full
 * size too.
 * The HELLO reply's max_batch, which the daemon sets to at most
 * KVC_PROTO_MAX_STORE, is the one number a client needs: every batched
 * request it sends may carry that many entries.
 */
#define KVC_PROTO_MAX_BATCH	1024
#define KVC_PROTO_MAX_STORE	818
#define KVC_PROTO_MAX_SEAL	1024

#define KVC_PROTO_NAME_MAX	63	/* bytes in a STATS counter name */
#define KVC_PROTO_ERRMSG_MAX	255	/* bytes in an ERROR message */
#define KVC_PROTO_ERRNO_MAX	4095	/* statuses are 0 or -1..-4095 */

/* Message types. A reply's type is its request's type | KVC_MSG_REPLY. */
#define KVC_MSG_REPLY		0x8000
#define KVC_MSG_HELLO		0x0001
#define KVC_MSG_LOOKUP		0x0002
#define KVC_MSG_STORE		0x0003
#define KVC_MSG_LOAD		0x0004
#define KVC_MSG_RELEASE		0x0005
#define KVC_MSG_STATS		0x0006
#define KVC_MSG_NS_CREATE	0x0007	/* privileged peers only */
#define KVC_MSG_ALLOC		0x0008	/* memfd mode only */
#define KVC_MSG_SEAL		0x0009	/* memfd mode only */
#define KVC_MSG_EVICT		0x000A	/* privileged peers only */
#define KVC_MSG_FLUSH		0x000B	/* privileged peers only */
#define KVC_MSG_NS_LIST		0x000C
#define KVC_MSG_NS_SALT		0x000D	/* version 2 on */
#define KVC_MSG_FAST_MAP	0x000E	/* version 4 on, memfd mode */
#define KVC_MSG_TOUCH		0x000F	/* version 4 on: never answered */
#define KVC_MSG_FAST_NS		0x0010	/* version 5 on, kernel mode */
#define KVC_MSG_HELLO_REPLY	(KVC_MSG_HELLO | KVC_MSG_REPLY)
#define KVC_MSG_LOOKUP_REPLY	(KVC_MSG_LOOKUP | KVC_MSG_REPLY)
#define KVC_MSG_STORE_REPLY	(KVC_MSG_STORE | KVC_MSG_REPLY)
#define KVC_MSG_LOAD_REPLY	(KVC_MSG_LOAD | KVC_MSG_REPLY)
#define KVC_MSG_RELEASE_REPLY	(KVC_MSG_RELEASE | KVC_MSG_REPLY)
#define KVC_MSG_STATS_REPLY	(KVC_MSG_STATS | KVC_MSG_REPLY)
#define KVC_MSG_NS_CREATE_REPLY	(KVC_MSG_NS_CREATE | KVC_MSG_REPLY)
#define KVC_MSG_ALLOC_REPLY	(KVC_MSG_ALLOC | KVC_MSG_REPLY)
#define KVC_MSG_SEAL_REPLY	(KVC_MSG_SEAL | KVC_MSG_REPLY)
#define KVC_MSG_EVICT_REPLY	(KVC_MSG_EVICT | KVC_MSG_REPLY)
#define KVC_MSG_FLUSH_REPLY	(KVC_MSG_FLUSH | KVC_MSG_REPLY)
#define KVC_MSG_NS_LIST_REPLY	(KVC_MSG_NS_LIST | KVC_MSG_REPLY)
#define KVC_MSG_NS_SALT_REPLY	(KVC_MSG_NS_SALT | KVC_MSG_REPLY)
#define KVC_MSG_FAST_MAP_REPLY	(KVC_MSG_FAST_MAP | KVC_MSG_REPLY)
#define KVC_MSG_FAST_NS_REPLY	(KVC_MSG_FAST_NS | KVC_MSG_REPLY)
#define KVC_MSG_ERROR		0x8000	/* a reply to any request */

/*
 * Tier masks: bit n is tier n, numbered as KVC_TIER_* in index.h (0 the
 * DRAM pool, 1 g3 on local NVMe, 2 g4 on the shared filesystem).
 */
#define KVC_PROTO_TIER_POOL	(1u << 0)
#define KVC_PROTO_TIER_G3	(1u << 1)
#define KVC_PROTO_TIER_G4	(1u << 2)
#define KVC_PROTO_TIERS_ALL	0x7u

/*
 * HELLO reply: how the daemon holds the pool. Wire values, fixed: the
 * daemon maps its configured mode (config.h) onto them.
 */
#define KVC_PROTO_MODE_KERNEL	1	/* /dev/kvcache is there */
#define KVC_PROTO_MODE_MEMFD	2	/* no module: blocks are memfds */

/*
 * Capabilities. A client advertises what it can do; unknown bits in a HELLO
 * are allowed (a newer client) and ignored. The reply carries the bits the
 * daemon will rely on, a subset of the client's, so never an unknown one.
 *   DEVICE: can open /dev/kvcache and mmap blocks by handle
 *   MEMFD:  can take blocks as memfds passed with SCM_RIGHTS
 */
#define KVC_PROTO_CAP_DEVICE	(1ull << 0)
#define KVC_PROTO_CAP_MEMFD	(1ull << 1)
#define KVC_PROTO_CAP_ALL	(KVC_PROTO_CAP_DEVICE | KVC_PROTO_CAP_MEMFD)

/*
 * LOOKUP flags. CONTINUE: the request continues a chain a previous LOOKUP
 * matched, so keys[0] (the last key matched then) need not start a chain:
 * its parent is not checked, the rest are as usual. It lets a client look
 * up chains longer than one message.
 */
#define KVC_PROTO_LOOKUP_CONTINUE	(1u << 0)
#define KVC_PROTO_LOOKUP_FLAGS_ALL	KVC_PROTO_LOOKUP_CONTINUE

/*
 * STORE entry flags. FIRST: the first block of a chain, no parent. SEAL
 * (version 3 on, memfd mode): the handle is a block this connection
 * allocated and has not sealed; the daemon seals it with the entry's key
 * and payload_len first, as SEAL would, and the block needs no pin
 * between the two. A block so sealed that the STORE then refuses is
 * freed at once.
 */
#define KVC_PROTO_STORE_FIRST		(1u << 0)
#define KVC_PROTO_STORE_SEAL		(1u << 1)
#define KVC_PROTO_STORE_FLAGS_ALL	(KVC_PROTO_STORE_FIRST | \
					 KVC_PROTO_STORE_SEAL)

/*
 * SEAL entry flags. KEEP_PIN: the connection keeps a pin on the sealed
 * block (dropped with RELEASE or when the connection closes).
 */
#define KVC_PROTO_SEAL_KEEP_PIN		(1u << 0)
#define KVC_PROTO_SEAL_FLAGS_ALL	KVC_PROTO_SEAL_KEEP_PIN

/* NS_CREATE, NS_LIST: the permission bits a namespace's mode may have. */
#define KVC_PROTO_NS_MODE_MAX		0777u

/* FLUSH: the ns_id that means every namespace. */
#define KVC_PROTO_NS_ALL		0u

/*
 * NS_SALT flags. SET: replace the namespace's salt with the one given
 * (privileged peers only); without it the salt field must be zero and the
 * request only asks for the salt.
 */
#define KVC_PROTO_NS_SALT_SET		(1u << 0)
#define KVC_PROTO_NS_SALT_FLAGS_ALL	KVC_PROTO_NS_SALT_SET
#define KVC_PROTO_SALT_SIZE		32	/* bytes of a namespace salt */

/* ---- decoded messages ---------------------------------------------------
 *
 * Decoded batches point into the buffer given to kvc_proto_decode(): they
 * are valid only while that buffer is, and unchanged. Keys are plain bytes
 * and are pointed to directly; other entries are read with the accessors
 * below (the wire is little-endian and unaligned, so there is no C array to
 * point at). An accessor's index must be below the batch's count.
 */

struct kvc_hello {
	uint16_t min_version;	/* 1 <= min_version <= max_version */
	uint16_t max_version;
	uint64_t caps;		/* KVC_PROTO_CAP_*, unknown bits allowed */
};

struct kvc_hello_reply {
	uint16_t version;	/* chosen; every later message carries it */
	uint16_t mode;		/* KVC_MODE_* */
	uint32_t max_batch;	/* 1..KVC_PROTO_MAX_STORE */
	uint64_t caps;		/* subset of KVC_PROTO_CAP_ALL */
	uint64_t block_size;	/* bytes per pool block, non-zero */
	uint64_t nr_blocks;
};

struct kvc_lookup {
	uint32_t ns_id;		/* 1..KVCACHE_NS_MAX */
	uint32_t tiers;		/* non-zero subset of KVC_PROTO_TIERS_ALL */
	uint32_t count;		/* 1..KVC_PROTO_MAX_BATCH keys, chain order */
	uint32_t flags;		/* KVC_PROTO_LOOKUP_* */
	const uint8_t *keys;	/* count keys, key i at keys + i * 32 */
};

/* Where one matched key lives; handle is zero unless tiers has the pool. */
struct kvc_lookup_entry {
	uint32_t tiers;		/* non-zero subset of KVC_PROTO_TIERS_ALL */
	struct kvcache_handle handle;
};

struct kvc_lookup_reply {
	uint32_t matched;	/* keys of the request's prefix found, 0.. */
	const uint8_t *raw;	/* read with kvc_proto_lookup_entry() */
};

/* parent is all zero, and must be, with KVC_PROTO_STORE_FIRST. */
struct kvc_store_entry {
	uint8_t key[KVCACHE_KEY_SIZE];
	uint8_t parent[KVCACHE_KEY_SIZE];
	struct kvcache_handle handle;	/* a sealed pool block */
	uint32_t flags;			/* KVC_PROTO_STORE_* */
	/* With SEAL: the bytes that hold data, 1..block size; else 0. */
	uint32_t payload_len;
};

struct kvc_store {
	uint32_t ns_id;
	uint32_t count;		/* 1..KVC_PROTO_MAX_STORE */
	const uint8_t *raw;	/* read with kvc_proto_store_entry() */
};

/*
 * STORE, RELEASE, SEAL and EVICT replies: one status (0 or -errno) per
 * entry.
 */
struct kvc_status_list {
	uint32_t count;		/* 0..KVC_PROTO_MAX_BATCH */
	const uint8_t *raw;	/* read with kvc_proto_status() */
};

struct kvc_load {
	uint32_t ns_id;
	uint32_t count;		/* 1..KVC_PROTO_MAX_BATCH */
	const uint8_t *keys;	/* count keys, key i at keys + i * 32 */
};

/* handle is zero unless status is 0 (then the block is pinned for us). */
struct kvc_load_result {
	int32_t status;
	struct kvcache_handle handle;
};

struct kvc_load_reply {
	uint32_t count;		/* 0..KVC_PROTO_MAX_BATCH */
	const uint8_t *raw;	/* read with kvc_proto_load_result() */
};

struct kvc_release {
	uint32_t count;		/* 1..KVC_PROTO_MAX_BATCH */
	const uint8_t *raw;	/* read with kvc_proto_release_handle() */
};

/*
 * TOUCH (version 4): what a client did through the fast index since its
 * last TOUCH: blocks it loaded (count handles, 0..KVC_PROTO_MAX_BATCH),
 * and the LOOKUPs it answered by itself, with their keys and hits.
 * Something must be reported: count and lookup_keys are not both 0.
 */
struct kvc_touch {
	uint32_t count;
	uint32_t lookups;
	uint32_t lookup_keys;
	uint32_t hit_keys;
	const uint8_t *raw;	/* read with kvc_proto_touch_handle() */
};

/*
 * NS_CREATE: a new namespace, owned by uid and gid (ids as the daemon
 * sees them, not the sender's: only a privileged peer may send it).
 * Its reply has no body: success is the reply, failure an ERROR.
 */
struct kvc_ns_create {
	uint32_t ns_id;		/* 1..KVCACHE_NS_MAX */
	uint32_t uid;
	uint32_t gid;
	uint32_t mode;		/* 0..KVC_PROTO_NS_MODE_MAX */
};

/* ALLOC: count fresh writable blocks in a namespace (memfd mode). */
struct kvc_alloc {
	uint32_t ns_id;		/* 1..KVCACHE_NS_MAX */
	uint32_t count;		/* 1..KVC_PROTO_MAX_BATCH */
};

/* All or nothing: one handle per block asked for, never none. */
struct kvc_alloc_reply {
	uint32_t count;		/* 1..KVC_PROTO_MAX_BATCH */
	const uint8_t *raw;	/* read with kvc_proto_alloc_handle() */
};

struct kvc_seal_entry {
	struct kvcache_handle handle;	/* a block this connection wrote */
	uint32_t payload_len;		/* non-zero; <= block_size */
	uint32_t flags;			/* KVC_PROTO_SEAL_* */
	uint8_t key[KVCACHE_KEY_SIZE];
};

struct kvc_seal {
	uint32_t count;		/* 1..KVC_PROTO_MAX_SEAL */
	const uint8_t *raw;	/* read with kvc_proto_seal_entry() */
};

/*
 * EVICT: drop these blocks from the cache, every tier (privileged peers
 * only). Its reply is a status list, one per key.
 */
struct kvc_evict {
	uint32_t ns_id;		/* 1..KVCACHE_NS_MAX */
	uint32_t count;		/* 1..KVC_PROTO_MAX_BATCH */
	const uint8_t *keys;	/* count keys, key i at keys + i * 32 */
};

/* FLUSH: evict everything evictable (privileged peers only). */
struct kvc_flush {
	uint32_t ns_id;		/* KVC_PROTO_NS_ALL, or 1..KVCACHE_NS_MAX */
	uint32_t tiers;		/* subset of KVC_PROTO_TIERS_ALL; 0: all */
};

struct kvc_flush_reply {
	uint64_t evicted;	/* blocks dropped */
	uint64_t busy;		/* blocks left: pinned or mapped */
};

/*
 * NS_LIST: the namespaces with ns_id >= start, in ascending order, one
 * page (at most KVC_PROTO_MAX_BATCH) at a time. 0 and 1 both list from
 * the first; a page's reply says where the next one starts.
 */
struct kvc_ns_list {
	uint32_t start;		/* 0..KVCACHE_NS_MAX */
};

/* One namespace of an NS_LIST reply. */
struct kvc_ns_entry {
	uint32_t ns_id;		/* 1..KVCACHE_NS_MAX */
	uint32_t uid;
	uint32_t gid;
	uint32_t mode;		/* 0..KVC_PROTO_NS_MODE_MAX */
	uint64_t blocks;	/* its blocks in the pool */
};

/*
 * Entries in strictly ascending ns_id order. next: the start of the
 * following page, 0 when the list is complete; else above the last
 * entry's ns_id and at most KVCACHE_NS_MAX (so an empty reply has next 0,
 * and a client paging with it always moves forward).
 */
struct kvc_ns_list_reply {
	uint32_t count;		/* 0..KVC_PROTO_MAX_BATCH */
	uint32_t next;		/* 0, or last ns_id + 1..KVCACHE_NS_MAX */
	const uint8_t *raw;	/* read with kvc_proto_ns_entry() */
};

/*
 * NS_SALT (version 2): get a namespace's salt (read permission needed),
 * or with KVC_PROTO_NS_SALT_SET replace it (privileged peers only). The
 * reply carries the salt now in force. Documentation/userspace-api/keys.md says how
 * libkvcache mixes it into the namespace seed.
 */
struct kvc_ns_salt {
	uint32_t ns_id;		/* 1..KVCACHE_NS_MAX */
	uint32_t flags;		/* KVC_PROTO_NS_SALT_* */
	uint8_t salt[KVC_PROTO_SALT_SIZE];	/* zero unless SET */
};

/* FAST_NS: the fast index of one namespace (its reply has no body). */
struct kvc_fast_ns {
	uint32_t ns_id;		/* 1..KVCACHE_NS_MAX */
};

struct kvc_ns_salt_reply {
	uint32_t ns_id;		/* 1..KVCACHE_NS_MAX */
	uint8_t salt[KVC_PROTO_SALT_SIZE];
};

/*
 * A named counter. name is not NUL-terminated: name_len bytes of
 * [A-Za-z0-9_.-], 1..KVC_PROTO_NAME_MAX of them.
 */
struct kvc_stat {
	const char *name;
	uint16_t name_len;
	uint64_t value;
};

struct kvc_stats_reply {
	uint32_t count;		/* 0..KVC_PROTO_MAX_BATCH */
	const uint8_t *raw;	/* walk with kvc_proto_stats_next() */
	size_t raw_len;
};

/* msg is not NUL-terminated: msg_len printable ASCII bytes. */
struct kvc_error {
	int32_t error;		/* -errno, -1..-KVC_PROTO_ERRNO_MAX */
	uint32_t bad_seq;	/* seq of the message it answers */
	uint16_t bad_type;	/* its type, 0 when that could not be read */
	uint16_t msg_len;	/* 0..KVC_PROTO_ERRMSG_MAX */
	const char *msg;
};

struct kvc_msg {
	uint16_t version;
	uint16_t type;		/* KVC_MSG_*; selects the union member */
	uint32_t seq;
	/*
	 * After a failed decode: a static string naming the first check
	 * that failed, for the ERROR reply and logs. NULL after success.
	 * version, type and seq then hold what could be read (else 0).
	 */
	const char *reason;
	union {
		struct kvc_hello hello;
		struct kvc_hello_reply hello_reply;
		struct kvc_lookup lookup;
		struct kvc_lookup_reply lookup_reply;
		struct kvc_store store;
		struct kvc_status_list store_reply;
		struct kvc_load load;
		struct kvc_load_reply load_reply;
		struct kvc_release release;
		struct kvc_status_list release_reply;
		/* FAST_MAP and its reply have no body, nor FAST_NS's reply */
		struct kvc_fast_ns fast_ns;
		struct kvc_touch touch;
		/* STATS requests have no body */
		struct kvc_stats_reply stats_reply;
		struct kvc_ns_create ns_create;
		/* NS_CREATE replies have no body */
		struct kvc_alloc alloc;
		struct kvc_alloc_reply alloc_reply;
		struct kvc_seal seal;
		struct kvc_status_list seal_reply;
		struct kvc_evict evict;
		struct kvc_status_list evict_reply;
		struct kvc_flush flush;
		struct kvc_flush_reply flush_reply;
		struct kvc_ns_list ns_list;
		struct kvc_ns_list_reply ns_list_reply;
		struct kvc_ns_salt ns_salt;
		struct kvc_ns_salt_reply ns_salt_reply;
		struct kvc_error error;
	};
};

/*
 * Decode and validate one datagram of len bytes (len as received, not as
 * the message claims). Returns 0, or the first failure:
 *   -EMSGSIZE         len > KVC_PROTO_MSG_MAX
 *   -EBADMSG          truncated, length field != len, counts that do not
 *                     fit the payload, trailing bytes
 *   -EPROTO           wrong magic
 *   -EPROTONOSUPPORT  version outside KVC_PROTO_VERSION_MIN..MAX
 *   -EINVAL           non-zero flags or reserved fields, unknown flag
 *                     bits, out-of-range values (namespace id, tiers,
 *                     statuses, names, mode, payload_len...), an empty
 *                     request batch or ALLOC reply, NS_LIST entries not
 *                     in ascending ns_id order, an NS_LIST start or next
 *                     above KVCACHE_NS_MAX, a next not above the last
 *                     entry (or non-zero with no entries)
 *   -EOPNOTSUPP       unknown type, or one its header's version does
 *                     not have (NS_SALT under version 1)
 *   -E2BIG            a count above its limit
 * On failure out->reason says which check failed.
 */
int kvc_proto_decode(const void *buf, size_t len, struct kvc_msg *out);

/* Accessors for decoded batches (see above); i < count. */
void kvc_proto_lookup_entry(const struct kvc_lookup_reply *r, uint32_t i,
			    struct kvc_lookup_entry *e);
void kvc_proto_store_entry(const struct kvc_store *s, uint32_t i,
			   struct kvc_store_entry *e);
int32_t kvc_proto_status(const struct kvc_status_list *l, uint32_t i);
void kvc_proto_load_result(const struct kvc_load_reply *r, uint32_t i,
			   struct kvc_load_result *res);
void kvc_proto_release_handle(const struct kvc_release *r, uint32_t i,
			      struct kvcache_handle *h);
void kvc_proto_touch_handle(const struct kvc_touch *t, uint32_t i,
			    struct kvcache_handle *h);
void kvc_proto_alloc_handle(const struct kvc_alloc_reply *r, uint32_t i,
			    struct kvcache_handle *h);
void kvc_proto_seal_entry(const struct kvc_seal *s, uint32_t i,
			  struct kvc_seal_entry *e);
void kvc_proto_ns_entry(const struct kvc_ns_list_reply *r, uint32_t i,
			struct kvc_ns_entry *e);
/*
 * Next counter of a stats reply: start with *pos = 0. Returns 1 with *st
 * filled, or 0 after the last one.
 */
int kvc_proto_stats_next(const struct kvc_stats_reply *r, size_t *pos,
			 struct kvc_stat *st);

/*
 * Encoders: write one message with header version KVC_PROTO_VERSION and the
 * given seq into buf (size bytes). Return the bytes written, -ENOSPC when
 * size is too small (buf is then unchanged), or -EINVAL for anything the
 * decoder would refuse (including a count above its limit).
 *
 * Keys are passed as count * KVCACHE_KEY_SIZE contiguous bytes (a
 * uint8_t[n][KVCACHE_KEY_SIZE] array's first element, say) rather than
 * as a pointer to const arrays, which ISO C11 will not convert to from a
 * non-const array without a cast.
 */
int kvc_proto_encode_hello(void *buf, size_t size, uint32_t seq,
			   const struct kvc_hello *h);
int kvc_proto_encode_hello_reply(void *buf, size_t size, uint32_t seq,
				 const struct kvc_hello_reply *r);
int kvc_proto_encode_lookup(void *buf, size_t size, uint32_t seq,
			    uint32_t ns_id, uint32_t tiers,
			    const uint8_t *keys,
			    uint32_t count);
/* The same with KVC_PROTO_LOOKUP_* flags. */
int kvc_proto_encode_lookup_flags(void *buf, size_t size, uint32_t seq,
				  uint32_t ns_id, uint32_t tiers,
				  uint32_t flags, const uint8_t *keys,
				  uint32_t count);
int kvc_proto_encode_lookup_reply(void *buf, size_t size, uint32_t seq,
				  const struct kvc_lookup_entry *e,
				  uint32_t matched);
int kvc_proto_encode_store(void *buf, size_t size, uint32_t seq,
			   uint32_t ns_id, const struct kvc_store_entry *e,
			   uint32_t count);
int kvc_proto_encode_store_reply(void *buf, size_t size, uint32_t seq,
				 const int32_t *status, uint32_t count);
int kvc_proto_encode_load(void *buf, size_t size, uint32_t seq,
			  uint32_t ns_id,
			  const uint8_t *keys,
			  uint32_t count);
int kvc_proto_encode_load_reply(void *buf, size_t size, uint32_t seq,
				const struct kvc_load_result *r,
				uint32_t count);
int kvc_proto_encode_release(void *buf, size_t size, uint32_t seq,
			     const struct kvcache_handle *h, uint32_t count);
int kvc_proto_encode_release_reply(void *buf, size_t size, uint32_t seq,
				   const int32_t *status, uint32_t count);
int kvc_proto_encode_stats(void *buf, size_t size, uint32_t seq);
/*
 * FAST_MAP, its reply (the segment comes with it) and TOUCH (the blocks
 * a client loaded by itself; no reply), written with version 4.
 */
int kvc_proto_encode_fast_map(void *buf, size_t size, uint32_t seq);
int kvc_proto_encode_fast_map_reply(void *buf, size_t size, uint32_t seq);
/* FAST_NS and its reply (the segment comes with it), version 5. */
int kvc_proto_encode_fast_ns(void *buf, size_t size, uint32_t seq,
			     uint32_t ns_id);
int kvc_proto_encode_fast_ns_reply(void *buf, size_t size, uint32_t seq);
int kvc_proto_encode_touch(void *buf, size_t size, uint32_t seq,
			   const struct kvc_touch *t,
			   const struct kvcache_handle *h);
int kvc_proto_encode_stats_reply(void *buf, size_t size, uint32_t seq,
				 const struct kvc_stat *st, uint32_t count);
int kvc_proto_encode_ns_create(void *buf, size_t size, uint32_t seq,
			       const struct kvc_ns_create *c);
int kvc_proto_encode_ns_create_reply(void *buf, size_t size, uint32_t seq);
int kvc_proto_encode_alloc(void *buf, size_t size, uint32_t seq,
			   uint32_t ns_id, uint32_t count);
int kvc_proto_encode_alloc_reply(void *buf, size_t size, uint32_t seq,
				 const struct kvcache_handle *h,
				 uint32_t count);
int kvc_proto_encode_seal(void *buf, size_t size, uint32_t seq,
			  const struct kvc_seal_entry *e, uint32_t count);
int kvc_proto_encode_seal_reply(void *buf, size_t size, uint32_t seq,
				const int32_t *status, uint32_t count);
int kvc_proto_encode_evict(void *buf, size_t size, uint32_t seq,
			   uint32_t ns_id,
			   const uint8_t *keys,
			   uint32_t count);
int kvc_proto_encode_evict_reply(void *buf, size_t size, uint32_t seq,
				 const int32_t *status, uint32_t count);
/* ns_id: KVC_PROTO_NS_ALL, or one namespace. */
/* kvc_proto_encode_flush() is every tier; _tiers() some (0: all). */
int kvc_proto_encode_flush_tiers(void *buf, size_t size, uint32_t seq,
				 uint32_t ns_id, uint32_t tiers);
int kvc_proto_encode_flush(void *buf, size_t size, uint32_t seq,
			   uint32_t ns_id);
int kvc_proto_encode_flush_reply(void *buf, size_t size, uint32_t seq,
				 const struct kvc_flush_reply *r);
/* start: 0 or 1 for the first page, else a reply's next. */
int kvc_proto_encode_ns_list(void *buf, size_t size, uint32_t seq,
			     uint32_t start);
/*
 * e in strictly ascending ns_id order; next 0 (the list is complete), or
 * above e[count - 1].ns_id and at most KVCACHE_NS_MAX; else -EINVAL.
 */
int kvc_proto_encode_ns_list_reply(void *buf, size_t size, uint32_t seq,
				   uint32_t next,
				   const struct kvc_ns_entry *e,
				   uint32_t count);

/*
 * NS_SALT and its reply, written with header version
 * KVC_PROTO_VERSION_NS_SALT. s->salt must be zero without
 * KVC_PROTO_NS_SALT_SET (else -EINVAL, as the decoder would refuse it).
 */
int kvc_proto_encode_ns_salt(void *buf, size_t size, uint32_t seq,
			     const struct kvc_ns_salt *s);
int kvc_proto_encode_ns_salt_reply(void *buf, size_t size, uint32_t seq,
				   const struct kvc_ns_salt_reply *r);

/*
 * Restamp the header version of an encoded message (len bytes, as an
 * encoder returned) with the version a HELLO negotiated, so that after
 * HELLO both sides send that version's messages. HELLO, its reply and
 * ERROR stay at version 1 (they are frozen), and so does a message the
 * version cannot carry: a message keeps the lowest version it needs.
 * Returns len, or a negative len unchanged (an encoder's error).
 */
int kvc_proto_set_version(void *buf, int len, uint16_t version);

/*
 * An ERROR reply: err is a negative errno (-1..-KVC_PROTO_ERRNO_MAX, else
 * -EINVAL is returned); its header seq is bad_seq. msg may be NULL. So the
 * daemon can always answer, msg is not a reason to fail: it is cut to
 * KVC_PROTO_ERRMSG_MAX bytes and bytes that are not printable ASCII become
 * '?'.
 */
int kvc_proto_encode_error(void *buf, size_t size, int err, uint32_t bad_seq,
			   uint16_t bad_type, const char *msg);

/*
 * The ERROR reply to a datagram that kvc_proto_decode() refused with err,
 * from the *failed it filled: answers the seq and type it could read, with
 * its reason as the message. buf of KVC_PROTO_HDR_SIZE + 12 +
 * KVC_PROTO_ERRMSG_MAX bytes is always enough.
 */
int kvc_proto_encode_decode_error(void *buf, size_t size, int err,
				  const struct kvc_msg *failed);

/*
 * The version to use with a client that speaks min..max: the highest both
 * sides speak, or -EPROTONOSUPPORT.
 */
int kvc_proto_choose_version(uint16_t min, uint16_t max);

/* Whether type is a request the daemon should answer (else never reply). */
int kvc_proto_is_request(uint16_t type);

#endif /* KVC_PROTO_H */
