/* SPDX-License-Identifier: GPL-2.0 */
/*
 * libkvcache: the library inference engines link to use kvcache
 * (Documentation/userspace-api/libkvcache.md has the guide and examples).
 *
 * An engine opens a client (a few connections to kvcached, and
 * /dev/kvcache when the module is loaded), opens a namespace with the
 * identity of its model, hashes its token blocks into keys, looks the
 * keys up, loads the longest cached prefix and stores the blocks it
 * computed. The same calls work with kvcache.ko (kernel mode) and without
 * it (memfd mode): the library learns the mode from the daemon.
 *
 * Conventions:
 *   - Every function that can fail returns a negative errno; counts are
 *     returned as non-negative ints. kvcache_strerror() explains errors,
 *     including the library's own uses of errno values.
 *   - Keys are arrays of KVCACHE_LIB_KEY_SIZE-byte keys, n * 32 bytes.
 *   - A prefix: lookups and loads stop at the first key that is missing,
 *     because a block is useless without the blocks before it.
 *   - Thread safety: a client and its namespaces may be used from any
 *     number of threads at once; each call takes one of the client's
 *     connections for as long as it talks to the daemon. A call never
 *     keeps a lock while it copies block data.
 *   - The daemon restarting: a call caught by it fails with -ECONNRESET
 *     (-ENOENT or -ECONNREFUSED while the daemon is down); later calls
 *     reconnect by themselves. Blocks mapped with kvcache_load_map() stay
 *     readable until released.
 *   - Keys passed to one call must be a chain as kvcache_ns_keys() made
 *     it (key i the child of key i-1): loads trust that.
 */
#ifndef LIBKVCACHE_H
#define LIBKVCACHE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KVCACHE_LIB_VERSION	1	/* of this header's API */
#define KVCACHE_LIB_KEY_SIZE	32	/* bytes of one block key */

/* Where a block is: bits of the tier masks lookup reports. */
#define KVCACHE_TIER_DRAM	(1u << 0)	/* the pinned pool (G2) */
#define KVCACHE_TIER_G3		(1u << 1)	/* local NVMe */
#define KVCACHE_TIER_G4		(1u << 2)	/* the shared filesystem */
#define KVCACHE_TIERS_ALL	0x7u

/* kvcache_client_info.mode */
#define KVCACHE_MODE_KERNEL	1	/* blocks live in kvcache.ko's pool */
#define KVCACHE_MODE_MEMFD	2	/* no module: kvcached's memfd pool */

struct kvcache;			/* a client */
struct kvcache_namespace;	/* a namespace opened by a client */

/* Options of kvcache_open(); a zeroed struct (or NULL) takes defaults. */
struct kvcache_options {
	/* kvcached's socket; NULL: $KVCACHE_SOCKET, else the default */
	const char *socket;
	/* the device; NULL: /dev/kvcache (used in kernel mode only) */
	const char *device;
	/* connections to the daemon, 1..64; 0: 4 */
	unsigned int connections;
	/* threads that run asynchronous calls, 1..64; 0: 2 */
	unsigned int workers;
	/* how long one reply may take, in ms; 0: 30000 */
	int timeout_ms;
	/* kvcached's g3 directory, for kvcache_load_region(); may be NULL */
	const char *g3_directory;
};

#define KVCACHE_DEFAULT_SOCKET	"/run/kvcache/kvcached.sock"

struct kvcache_client_info {
	uint32_t mode;		/* KVCACHE_MODE_* */
	uint32_t max_batch;	/* keys the daemon takes per message */
	uint64_t block_size;	/* bytes of one pool block */
	uint64_t nr_blocks;	/* blocks in the pool */
};

/*
 * Connect to kvcached. Returns 0 and the client in *out, or -ENOENT /
 * -ECONNREFUSED (no daemon), -EACCES (the socket or the device refused
 * us), -EPROTONOSUPPORT (no common protocol version), -EPROTO (the
 * daemon's replies do not make sense), -EINVAL (bad options), -ENOMEM.
 */
int kvcache_open(const struct kvcache_options *opts, struct kvcache **out);

/*
 * Close a client: waits for its queued asynchronous calls, frees its
 * namespaces (their pointers become invalid) and everything else. Release
 * mapped blocks first: their mappings are not tracked. NULL is ignored.
 */
void kvcache_close(struct kvcache *c);

/* The pool geometry and mode, as the daemon announced them. */
int kvcache_get_info(struct kvcache *c, struct kvcache_client_info *info);

/* A static description of a return value of this library. */
const char *kvcache_strerror(int err);

/*
 * A namespace's identity: what makes KV reusable (Documentation/userspace-api/keys.md).
 * Every string is required ("" is allowed for lora); salt may be NULL
 * with salt_len 0.
 */
struct kvcache_identity {
	const char *model;
	const char *weights_revision;
	const char *tokenizer;
	const char *kv_layout;
	const char *kv_dtype;
	const char *lora;
	const uint8_t *salt;
	size_t salt_len;
	uint32_t tokens_per_block;
	uint32_t tp_rank, tp_size;
	uint32_t pp_rank, pp_size;
};

/*
 * Open namespace ns_id (created by the administrator, see
 * Documentation/admin-guide/index.md) for the model of *id, whose blocks hold
 * block_bytes bytes of KV each (1..the pool's block size). The client
 * keeps the namespace; kvcache_close() frees it if the caller did not.
 *
 * By default the keys also cover the namespace's salt, which kvcached
 * keeps for each namespace and hands only to peers that may read it
 * (Documentation/userspace-api/keys.md): two tenants with the same model and prompts
 * get different keys, so neither can learn from a cache hit what the
 * other has cached. id->salt, if any, is hashed in as well, as its own
 * field. kvcache_ns_open() asks the daemon for the salt once, here.
 *
 * Returns 0, -EINVAL (bad identity, id or size, unknown flag), -EACCES
 * (the namespace is not ours to read, so no salt), -ENOENT (no such
 * namespace), -EPROTONOSUPPORT (a kvcached too old to have salts: opt
 * out, or upgrade it), a connection error, -ENOMEM.
 */
int kvcache_ns_open(struct kvcache *c, uint32_t ns_id,
		    const struct kvcache_identity *id, size_t block_bytes,
		    struct kvcache_namespace **out);

/*
 * KVCACHE_NS_NO_SALT: leave the namespace's salt out of the keys (no
 * round trip to the daemon). The keys are then the identity's alone, the
 * same in every namespace and on every node: for fleets that share KV
 * across namespaces or kvcached instances on purpose, and accept that a
 * tenant who can read one of those namespaces can probe, by timing, for
 * prefixes another tenant cached with the same identity.
 */
#define KVCACHE_NS_NO_SALT	(1u << 0)

/* kvcache_ns_open() with KVCACHE_NS_* flags (0: the default). */
int kvcache_ns_open_flags(struct kvcache *c, uint32_t ns_id,
			  const struct kvcache_identity *id,
			  size_t block_bytes, uint32_t flags,
			  struct kvcache_namespace **out);
void kvcache_ns_close(struct kvcache_namespace *ns);

/*
 * The keys of the full blocks of a token sequence, at most max_keys, into
 * keys (max_keys * 32 bytes). A trailing partial block has no key.
 * Returns the number of keys.
 */
size_t kvcache_ns_keys(const struct kvcache_namespace *ns,
		       const uint32_t *tokens, size_t ntokens,
		       uint8_t *keys, size_t max_keys);

uint32_t kvcache_ns_tokens_per_block(const struct kvcache_namespace *ns);
size_t kvcache_ns_block_bytes(const struct kvcache_namespace *ns);

/*
 * How long a prefix of keys is cached, in any tier. tiers (may be NULL)
 * gets each matched key's tier mask (KVCACHE_TIER_*). Returns the count.
 */
int kvcache_lookup(struct kvcache_namespace *ns, const uint8_t *keys,
		   size_t n, uint32_t *tiers);

/*
 * Load the longest cached prefix of keys into host memory: block i's
 * block_bytes go to buf + i * stride (stride >= block_bytes). Blocks only
 * on disk are read back (and verified) by the daemon first. Returns the
 * number of blocks loaded (0: none cached); the bytes after them are
 * untouched.
 */
int kvcache_load(struct kvcache_namespace *ns, const uint8_t *keys, size_t n,
		 void *buf, size_t stride);

/*
 * A block mapped from the pool: data points at its block_bytes bytes,
 * read-only, valid until kvcache_release(). The other fields are the
 * library's.
 */
struct kvcache_block {
	const void *data;
	size_t len;
	uint32_t index, gen;	/* the pool block */
	uint32_t conn;		/* who holds the pin (the library's business) */
	uint32_t epoch;		/* ... and its incarnation */
	void *map;		/* kernel mode without the pool view: the
				 * block's own mapping */
};

/*
 * Load without copying: pin the longest cached prefix of keys in the pool
 * and map it; blocks[i] describes block i. Returns the count. Release
 * every block with kvcache_release() when done: a mapped block cannot be
 * evicted.
 */
int kvcache_load_map(struct kvcache_namespace *ns, const uint8_t *keys,
		     size_t n, struct kvcache_block *blocks);
void kvcache_release(struct kvcache *c, struct kvcache_block *blocks,
		     size_t n);

/*
 * Store n blocks that continue a chain: keys[0]'s parent is parent (NULL:
 * the chain starts with it), keys[i]'s parent keys[i-1]. Block i's
 * block_bytes bytes are read from buf + i * stride. Allocates pool blocks,
 * writes and seals them, and indexes them; the daemon then spills them to
 * its disk tiers by its own policy. Blocks the cache already holds count
 * as stored. Returns the number of blocks stored, a prefix of the n: the
 * daemon may decline the rest (not admitted yet, no room: -EAGAIN and
 * -ENOSPC are not errors of the call then, the count says how far it
 * got), or -errno when nothing could be stored.
 */
int kvcache_store(struct kvcache_namespace *ns, const uint8_t *parent,
		  const uint8_t *keys, size_t n, const void *buf,
		  size_t stride);

/*
 * GPU memory (kernel mode with a P2P provider: Documentation/design/p2p.md).
 * Register length bytes at offset of provider as a region of this client,
 * then load blocks straight from the local disk tier (G3, whose directory
 * kvcache_options.g3_directory names) into it by peer-to-peer DMA, or
 * through a bounce buffer in the kernel when the PCI topology does not
 * allow P2P: block i goes to region offset + i * stride. Each file's
 * header is checked (key, namespace, length, header checksum) before its
 * payload moves. Returns the number of leading blocks loaded; it stops at
 * the first block G3 does not hold (a block only in DRAM is best read by
 * the GPU's copy engine from kvcache_load_map()'s pinned mapping).
 * n is at most 1024; offset and stride are multiples of 4096, stride at
 * least block_bytes rounded up to 4096 (-EINVAL). -EOPNOTSUPP in memfd
 * mode or without a g3_directory.
 */
int kvcache_region_register(struct kvcache *c, uint32_t provider,
			    uint64_t offset, uint64_t length,
			    uint32_t *region);
int kvcache_region_unregister(struct kvcache *c, uint32_t region);
int kvcache_load_region(struct kvcache_namespace *ns, const uint8_t *keys,
			size_t n, uint32_t region, uint64_t offset,
			uint64_t stride);

/*
 * Asynchronous variants: queued to the client's workers, they return 0 at
 * once (or -errno if they could not be queued) and complete later with
 * the result the synchronous call would have returned. keys and buf must
 * stay valid (and buf untouched) until then. tag is the caller's, echoed.
 */
struct kvcache_completion {
	uint64_t tag;
	int result;
};

int kvcache_load_async(struct kvcache_namespace *ns, const uint8_t *keys,
		       size_t n, void *buf, size_t stride, uint64_t tag);
int kvcache_store_async(struct kvcache_namespace *ns, const uint8_t *parent,
			const uint8_t *keys, size_t n, const void *buf,
			size_t stride, uint64_t tag);

/*
 * Collect up to max completions, waiting up to timeout_ms for the first
 * (0: do not wait, -1: wait for ever). Returns the number collected.
 */
int kvcache_poll(struct kvcache *c, struct kvcache_completion *out,
		 unsigned int max, int timeout_ms);

/* Readable (an eventfd) while completions wait; for epoll loops. */
int kvcache_event_fd(struct kvcache *c);

/* Asynchronous calls queued or running, not yet collected. */
unsigned int kvcache_pending(struct kvcache *c);

/* One of the daemon's counters (kvcachectl stats lists them). */
int kvcache_stat(struct kvcache *c, const char *name, uint64_t *value);

#ifdef __cplusplus
}
#endif

#endif /* LIBKVCACHE_H */
