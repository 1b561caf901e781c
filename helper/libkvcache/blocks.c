// SPDX-License-Identifier: GPL-2.0
/*
 * libkvcache: lookup, load and store, in both pool modes.
 *
 * Kernel mode: the daemon names blocks, the kernel guards them. A store
 * allocates, maps, writes and seals blocks through the client's own
 * /dev/kvcache descriptor, then STOREs their handles; a load asks the
 * daemon to LOAD (it makes the blocks resident) and pins the handles it
 * answers with the client's descriptor, so the kernel checks that this
 * process may read the namespace. A handle evicted in between pins with
 * ESTALE: a miss from there on.
 *
 * memfd mode: the daemon does all of it over the socket (ALLOC, SEAL,
 * STORE, LOAD, RELEASE) and the block bytes are read and written in the
 * shared pool mapping; a lookup or a copying load first takes what the
 * daemon's fast index shows in the pool, with no round trip (fast.c).
 * Pins belong to the connection that took them, so a load keeps its
 * connection until it has copied the bytes and released the pins; a
 * block from kvcache_load_map() remembers its connection.
 *
 * Every batch is cut to what one message carries; a prefix that ends
 * inside a chunk ends the whole call.
 */
#include "lib_priv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

uint32_t lib_batch(const struct kvcache *c)
{
	uint32_t b = c->max_batch;

	if (!b || b > KVC_PROTO_MAX_STORE)
		b = KVC_PROTO_MAX_STORE;
	return b;
}

static const uint8_t *key_at(const uint8_t *keys, size_t i)
{
	return keys + i * KVCACHE_KEY_SIZE;
}

static bool kernel_mode(struct kvcache *c)
{
	return c->mode == KVC_PROTO_MODE_KERNEL;
}

/* ---- lookup ------------------------------------------------------------ */

LIB_EXPORT int kvcache_lookup(struct kvcache_namespace *ns,
			      const uint8_t *keys, size_t n, uint32_t *tiers)
{
	struct kvcache *c;
	struct lib_conn *k;
	size_t done = 0, fast = 0;
	int ret = 0;

	if (!ns || (!keys && n) || n > INT32_MAX)
		return -EINVAL;
	c = ns->c;
	if (!n)
		return 0;
	/* As far as the pool goes, without asking (fast.c). */
	done = fast = lib_fast_lookup(ns, keys, n, tiers);
	if (done == n)
		return (int)n;
	k = lib_conn_get(c, -1, &ret);
	if (!k)
		return fast ? (int)fast : ret;
	while (done < n) {
		/*
		 * Past the first message, the next one starts with the last
		 * key matched, flagged CONTINUE: the daemon checks the chain
		 * from there on (a message's first key need not be a root).
		 */
		size_t from = done ? done - 1 : 0;
		uint32_t chunk = (uint32_t)(n - from < lib_batch(c) ?
					    n - from : lib_batch(c));
		uint32_t flags = done ? KVC_PROTO_LOOKUP_CONTINUE : 0;
		uint32_t matched, fresh;

		ret = lib_call(c, k, kvc_proto_encode_lookup_flags(LIB_TX(k),
				ns->ns_id, KVC_PROTO_TIERS_ALL, flags,
				key_at(keys, from), chunk),
			       KVC_MSG_LOOKUP_REPLY);
		if (ret)
			break;
		matched = k->msg.lookup_reply.matched;
		if (matched > chunk) {
			ret = -EPROTO;
			break;
		}
		/* Keys matched beyond those known before this message. */
		fresh = matched - (done && matched ? 1 : 0);
		for (uint32_t i = 0; tiers && i < fresh; i++) {
			struct kvc_lookup_entry e;

			kvc_proto_lookup_entry(&k->msg.lookup_reply,
					       i + (matched - fresh), &e);
			tiers[done + i] = e.tiers;
		}
		done += fresh;
		if (matched < chunk || !fresh)
			break;
	}
	lib_conn_put(c, k);
	/* The daemon failed us: what the pool showed still holds. */
	if (ret && fast)
		return (int)fast;
	return ret ? ret : (int)done;
}

/* ---- load -------------------------------------------------------------- */

/*
 * LOAD chunk keys; the handles of the leading hits into h. Returns their
 * count, or -errno. *extra gets the successes after the first miss (memfd
 * mode: pinned for the connection too, so the caller releases them), at
 * h[count..count + *extra).
 */
static int load_chunk(struct kvcache *c, struct lib_conn *k, uint32_t ns_id,
		      const uint8_t *keys, uint32_t chunk,
		      struct kvcache_handle *h, uint32_t *extra)
{
	uint32_t hits = 0, more = 0;
	bool gap = false;
	int ret;

	*extra = 0;
	ret = lib_call(c, k, kvc_proto_encode_load(LIB_TX(k), ns_id, keys,
						   chunk),
		       KVC_MSG_LOAD_REPLY);
	if (ret)
		return ret;
	if (k->msg.load_reply.count != chunk)
		return -EPROTO;
	for (uint32_t i = 0; i < chunk; i++) {
		struct kvc_load_result r;

		kvc_proto_load_result(&k->msg.load_reply, i, &r);
		if (r.status) {
			gap = true;
			continue;
		}
		if (r.handle.index >= c->nr_blocks)
			return -EPROTO;
		if (gap)
			h[hits + more++] = r.handle;
		else
			h[hits++] = r.handle;
	}
	*extra = more;
	return (int)hits;
}

/* memfd mode: RELEASE n pins of connection k (best effort). */
static void release_pins(struct kvcache *c, struct lib_conn *k,
			 const struct kvcache_handle *h, uint32_t n)
{
	if (n)
		lib_call(c, k, kvc_proto_encode_release(LIB_TX(k), h, n),
			 KVC_MSG_RELEASE_REPLY);
}

/* Kernel mode: pin n handles with our descriptor; returns how many took. */
uint32_t lib_kernel_pin(struct kvcache *c, struct kvcache_handle *h,
			uint32_t n)
{
	struct kvcache_batch b = {
		.size = sizeof(b), .count = n,
		.entries = (uintptr_t)h,
	};

	if (!n)
		return 0;
	if (!ioctl(c->dev, KVCACHE_IOC_PIN, &b))
		return n;
	return b.done <= n ? b.done : 0;
}

void lib_kernel_unpin(struct kvcache *c, struct kvcache_handle *h,
		      uint32_t n)
{
	struct kvcache_batch b = {
		.size = sizeof(b), .count = n,
		.entries = (uintptr_t)h,
	};

	if (n)
		ioctl(c->dev, KVCACHE_IOC_UNPIN, &b);
}

static void *kernel_map(struct kvcache *c, struct kvcache_handle h, int prot)
{
	void *p = mmap(NULL, c->block_size, prot, MAP_SHARED, c->dev,
		       (off_t)((uint64_t)h.index * c->block_size));

	return p == MAP_FAILED ? NULL : p;
}

/*
 * Copy or map the blocks of one LOAD chunk. out: the destination of block
 * i (buf + i * stride) when copying; blocks: the descriptors when mapping.
 * Returns the blocks done (a prefix), or -errno if none.
 */
static int load_kernel(struct kvcache_namespace *ns, struct lib_conn **kp,
		       const uint8_t *keys, uint32_t chunk, uint8_t *out,
		       size_t stride, struct kvcache_block *blocks)
{
	struct kvcache *c = ns->c;
	struct kvcache_handle h[KVC_PROTO_MAX_BATCH];
	struct kvcache_handle drop[KVC_PROTO_MAX_BATCH];
	uint32_t extra, pinned, i, ndrop = 0;
	int ret;

	ret = load_chunk(c, *kp, ns->ns_id, keys, chunk, h, &extra);
	/* The kernel guards the blocks from here: free the connection. */
	lib_conn_put(c, *kp);
	*kp = NULL;
	if (ret <= 0)
		return ret;
	pinned = lib_kernel_pin(c, h, (uint32_t)ret);
	for (i = 0; i < pinned; i++) {
		/*
		 * Through the pool view: no mmap, munmap and TLB shootdown
		 * per block. A copy unpins at once; a block handed to the
		 * caller keeps our pin until kvcache_release(), since the
		 * view shows a block only while it is pinned. Without the
		 * view, the block's own mapping, which holds the block.
		 */
		bool in_view = c->view && (uint64_t)h[i].index < c->nr_blocks;
		uint8_t *p = in_view ?
			     c->view + (size_t)h[i].index * c->block_size :
			     kernel_map(c, h[i], PROT_READ);

		if (!p)
			break;
		if (blocks) {
			blocks[i] = (struct kvcache_block) {
				.data = p, .len = ns->block_bytes,
				.index = h[i].index, .gen = h[i].gen,
				.conn = in_view ? LIB_CONN_KERNEL_PIN : 0,
				.map = in_view ? NULL : p,
			};
			if (in_view)
				continue;
		} else {
			memcpy(out + i * stride, p, ns->block_bytes);
			if (!in_view)
				munmap(p, c->block_size);
		}
		drop[ndrop++] = h[i];
	}
	/* And the pins from a failed mapping on. */
	for (uint32_t j = i; j < pinned; j++)
		drop[ndrop++] = h[j];
	lib_kernel_unpin(c, drop, ndrop);
	if (!i && pinned < (uint32_t)ret)
		return 0;	/* evicted between LOAD and PIN: a miss */
	return (int)i;
}

static int load_memfd(struct kvcache_namespace *ns, struct lib_conn **kp,
		      const uint8_t *keys, uint32_t chunk, uint8_t *out,
		      size_t stride, struct kvcache_block *blocks)
{
	struct kvcache *c = ns->c;
	struct lib_conn *k = *kp;
	struct kvcache_handle h[KVC_PROTO_MAX_BATCH];
	uint32_t extra, i, hits;
	int ret;

	ret = load_chunk(c, k, ns->ns_id, keys, chunk, h, &extra);
	if (ret < 0)
		return ret;
	hits = (uint32_t)ret;
	for (i = 0; i < hits; i++) {
		uint8_t *p = lib_pool_block(c, h[i].index);

		if (!p)
			break;
		if (blocks) {
			blocks[i] = (struct kvcache_block) {
				.data = p, .len = ns->block_bytes,
				.index = h[i].index, .gen = h[i].gen,
				.conn = lib_conn_index(c, k),
				.epoch = k->epoch,
			};
			continue;
		}
		memcpy(out + i * stride, p, ns->block_bytes);
	}
	/* Copied (or not kept): their pins go back now. */
	if (blocks)
		release_pins(c, k, h + i, hits - i + extra);
	else
		release_pins(c, k, h, hits + extra);
	return (int)i;
}

static int load_common(struct kvcache_namespace *ns, const uint8_t *keys,
		       size_t n, uint8_t *buf, size_t stride,
		       struct kvcache_block *blocks)
{
	struct kvcache *c = ns->c;
	size_t done = 0;
	int ret = 0;

	/*
	 * What the pool holds, without asking (fast.c): copies in both
	 * modes, mapped blocks in kernel mode (pinned with our own file;
	 * memfd mode's pins are the daemon's to count).
	 */
	if (buf || kernel_mode(c))
		done = lib_fast_load(ns, keys, n, buf, stride, blocks);
	while (done < n) {
		uint32_t chunk = (uint32_t)(n - done < lib_batch(c) ?
					    n - done : lib_batch(c));
		struct lib_conn *k = lib_conn_get(c, -1, &ret);

		if (!k)
			break;
		if (kernel_mode(c))
			ret = load_kernel(ns, &k, key_at(keys, done), chunk,
					  buf ? buf + done * stride : NULL,
					  stride, blocks ? blocks + done : NULL);
		else
			ret = load_memfd(ns, &k, key_at(keys, done), chunk,
					 buf ? buf + done * stride : NULL,
					 stride, blocks ? blocks + done : NULL);
		if (k)
			lib_conn_put(c, k);
		if (ret < 0)
			break;
		done += (size_t)ret;
		if ((uint32_t)ret < chunk)
			break;
	}
	/* A failure after some blocks: the caller has those. */
	if (ret < 0 && done)
		ret = 0;
	return ret < 0 ? ret : (int)done;
}

LIB_EXPORT int kvcache_load(struct kvcache_namespace *ns, const uint8_t *keys,
			    size_t n, void *buf, size_t stride)
{
	if (!ns || (!keys && n) || (!buf && n) || n > INT32_MAX ||
	    stride < ns->block_bytes)
		return -EINVAL;
	return load_common(ns, keys, n, buf, stride, NULL);
}

LIB_EXPORT int kvcache_load_map(struct kvcache_namespace *ns,
				const uint8_t *keys, size_t n,
				struct kvcache_block *blocks)
{
	if (!ns || (!keys && n) || (!blocks && n) || n > INT32_MAX)
		return -EINVAL;
	return load_common(ns, keys, n, NULL, 0, blocks);
}

LIB_EXPORT void kvcache_release(struct kvcache *c,
				struct kvcache_block *blocks, size_t n)
{
	struct kvcache_handle h[KVC_PROTO_MAX_BATCH];

	if (!c || !blocks)
		return;
	for (size_t i = 0; i < n; i++) {
		struct kvcache_block *b = &blocks[i];
		struct lib_conn *k;
		uint32_t cnt = 0;
		int err;

		if (!b->data)
			continue;
		if (b->map) {
			munmap(b->map, c->block_size);
			memset(b, 0, sizeof(*b));
			continue;
		}
		if (b->conn == LIB_CONN_KERNEL_PIN) {
			/* Kernel mode, through the view: our own pins. */
			for (size_t j = i; j < n && cnt < KVC_PROTO_MAX_BATCH;
			     j++) {
				struct kvcache_block *o = &blocks[j];

				if (!o->data || o->map ||
				    o->conn != LIB_CONN_KERNEL_PIN)
					continue;
				h[cnt++] = (struct kvcache_handle) {
					.index = o->index, .gen = o->gen,
				};
				memset(o, 0, sizeof(*o));
			}
			lib_kernel_unpin(c, h, cnt);
			continue;
		}
		if (b->conn >= c->nconns)
			continue;
		/*
		 * Release this block and every later one pinned on the same
		 * connection in one message.
		 */
		k = lib_conn_get(c, (int)b->conn, &err);
		for (size_t j = i; j < n && cnt < KVC_PROTO_MAX_BATCH; j++) {
			struct kvcache_block *o = &blocks[j];

			if (!o->data || o->map || o->conn != b->conn ||
			    o->epoch != b->epoch)
				continue;
			/* A dropped connection took its pins with it. */
			if (k && o->epoch == k->epoch)
				h[cnt++] = (struct kvcache_handle) {
					.index = o->index, .gen = o->gen,
				};
			if (o != b)
				memset(o, 0, sizeof(*o));
		}
		memset(b, 0, sizeof(*b));
		if (k) {
			release_pins(c, k, h, cnt);
			lib_conn_put(c, k);
		}
	}
}

/* ---- store ------------------------------------------------------------- */

/* Kernel mode: allocate n writable blocks of our file. */
static int kernel_alloc(struct kvcache *c, uint32_t ns_id, uint32_t n,
			struct kvcache_handle *h)
{
	struct kvcache_alloc a = {
		.size = sizeof(a), .ns_id = ns_id, .count = n,
		.handles = (uintptr_t)h,
	};

	if (!c->dev_writable)
		return -EACCES;
	return ioctl(c->dev, KVCACHE_IOC_ALLOC, &a) ? -errno : 0;
}

/*
 * Kernel mode: write and seal. Every allocated block is sealed even when
 * its write failed: an unsealed block would stay with our file until it
 * closes, a sealed one that is never stored is reclaimed by the daemon as
 * an orphan. The seal keeps our pin until the STORE is answered: the
 * daemon frees unpinned orphans, and under pool pressure its eviction
 * passes (one per failed allocation of any client) can come twice between
 * our SEAL and our STORE. Returns the blocks written and sealed, a prefix;
 * *pinned: how many leading blocks were sealed, each pinned for the caller
 * to unpin.
 */
static uint32_t kernel_fill(struct kvcache_namespace *ns,
			    const struct kvcache_handle *h, uint32_t n,
			    const uint8_t *keys, const uint8_t *buf,
			    size_t stride, uint32_t *pinned)
{
	struct kvcache *c = ns->c;
	struct kvcache_seal_entry e[KVC_PROTO_MAX_BATCH];
	struct kvcache_batch b = {
		.size = sizeof(b), .flags = KVCACHE_SEAL_KEEP_PIN, .count = n,
		.entries = (uintptr_t)e,
	};
	uint32_t ok = n;

	memset(e, 0, sizeof(e[0]) * n);
	for (uint32_t i = 0; i < n; i++) {
		uint8_t *p = kernel_map(c, h[i], PROT_READ | PROT_WRITE);

		e[i].handle = h[i];
		e[i].payload_len = (uint32_t)ns->block_bytes;
		memcpy(e[i].key, key_at(keys, i), KVCACHE_KEY_SIZE);
		if (!p) {
			if (ok == n)
				ok = i;
			continue;
		}
		memcpy(p, buf + i * stride, ns->block_bytes);
		munmap(p, c->block_size);
	}
	*pinned = n;
	if (ioctl(c->dev, KVCACHE_IOC_SEAL, &b)) {
		*pinned = b.done <= n ? b.done : 0;
		if (b.done < ok)
			ok = b.done;
	}
	return ok;
}

/*
 * How many blocks connection k keeps allocated ahead (LIB_RESERVE_*): none
 * before protocol version 3, where a SEAL round trip follows every ALLOC
 * anyway.
 */
static uint32_t reserve_cap(const struct kvcache *c, const struct lib_conn *k)
{
	uint64_t n;

	if (k->version < KVC_PROTO_VERSION_STORE_SEAL || !c->block_size)
		return 0;
	n = LIB_RESERVE_BYTES / c->block_size;
	return n < LIB_RESERVE_MAX ? (uint32_t)n : LIB_RESERVE_MAX;
}

/* Up to n of k's blocks ahead for namespace ns, into h; how many. */
static uint32_t reserve_take(struct lib_conn *k, uint32_t ns,
			     struct kvcache_handle *h, uint32_t n)
{
	uint32_t got = 0, kept = 0;

	for (uint32_t i = 0; i < k->nr_reserved; i++) {
		if (got < n && k->reserve[i].ns == ns)
			h[got++] = k->reserve[i].h;
		else
			k->reserve[kept++] = k->reserve[i];
	}
	k->nr_reserved = kept;
	return got;
}

/* Blocks of namespace ns back into k's reserve (there is room: they came
 * from it, or the ALLOC asked for no more than the room). */
static void reserve_put(struct lib_conn *k, uint32_t ns,
			const struct kvcache_handle *h, uint32_t n)
{
	for (uint32_t i = 0; i < n && k->nr_reserved < LIB_RESERVE_MAX; i++)
		k->reserve[k->nr_reserved++] = (struct lib_reserved){
			.ns = ns, .h = h[i],
		};
}

/*
 * n writable blocks of ns into h: from k's reserve first, then one ALLOC
 * for the rest and, for a store smaller than the reserve, for the
 * reserve's empty places (fewer when the pool has no room for those). A
 * store of the reserve's size or more pays its one ALLOC over as many
 * blocks and takes none ahead: blocks ahead are pool memory nobody else
 * can use, and a client that stores one batch and goes idle would hold
 * them for nothing. 0 or -errno.
 */
static int memfd_alloc(struct kvcache_namespace *ns, struct lib_conn *k,
		       uint32_t n, struct kvcache_handle *h)
{
	struct kvcache *c = ns->c;
	uint32_t cap = reserve_cap(c, k);
	uint32_t got = cap ? reserve_take(k, ns->ns_id, h, n) : 0;
	uint32_t want = n - got, ahead = 0;
	int ret;

	if (!want)
		return 0;
	if (n < cap && cap > k->nr_reserved)
		ahead = cap - k->nr_reserved;
	if (want + ahead > lib_batch(c))
		ahead = lib_batch(c) - want;
	ret = lib_call(c, k, kvc_proto_encode_alloc(LIB_TX(k), ns->ns_id,
						    want + ahead),
		       KVC_MSG_ALLOC_REPLY);
	if (ret == -ENOSPC && ahead) {
		ahead = 0;
		ret = lib_call(c, k, kvc_proto_encode_alloc(LIB_TX(k),
							    ns->ns_id, want),
			       KVC_MSG_ALLOC_REPLY);
	}
	if (!ret && k->msg.alloc_reply.count != want + ahead)
		ret = -EPROTO;
	if (ret) {
		/* Still ours, unless the connection dropped with them. */
		if (k->fd >= 0)
			reserve_put(k, ns->ns_id, h, got);
		return ret;
	}
	for (uint32_t i = 0; i < want + ahead; i++) {
		struct kvcache_handle a;

		kvc_proto_alloc_handle(&k->msg.alloc_reply, i, &a);
		if (i < want)
			h[got + i] = a;
		else
			reserve_put(k, ns->ns_id, &a, 1);
	}
	return 0;
}

/*
 * memfd mode: before the first write of block index through our mapping,
 * fault its pages in with one system call (MADV_POPULATE_WRITE, Linux
 * 5.14; a no-op before), not one fault per 4 KiB page in the copy: that
 * halves the time of a store into blocks this process never wrote. The
 * pages stay mapped: the daemon zeroes freed blocks in place.
 */
static void pool_prefault(struct kvcache *c, uint32_t index, uint8_t *p,
			  size_t len)
{
	uint64_t bit = 1ull << (index % 64), *w;

	if (!c->pool_touched || index >= c->nr_blocks)
		return;
	w = &c->pool_touched[index / 64];
	if (__atomic_load_n(w, __ATOMIC_RELAXED) & bit)
		return;
	madvise(p, len, MADV_POPULATE_WRITE);
	__atomic_fetch_or(w, bit, __ATOMIC_RELAXED);
}

/*
 * memfd mode: the same over the socket, on connection k, which keeps a pin
 * on each block sealed (*pinned of them, leading) for the caller to
 * release after its STORE. With protocol version 3, when every block was
 * written, the STORE seals them itself (*seal_len: their payload length)
 * and nothing is sealed or pinned here: two round trips fewer, and the
 * blocks come from the connection's reserve (memfd_alloc()), so that most
 * stores are the STORE alone.
 */
static int memfd_alloc_fill(struct kvcache_namespace *ns, struct lib_conn *k,
			    uint32_t n, const uint8_t *keys,
			    const uint8_t *buf, size_t stride,
			    struct kvcache_handle *h, uint32_t *pinned,
			    uint32_t *seal_len)
{
	struct kvcache *c = ns->c;
	struct kvc_seal_entry e[KVC_PROTO_MAX_BATCH];
	uint32_t ok = n;
	int ret;

	ret = memfd_alloc(ns, k, n, h);
	if (ret)
		return ret;
	for (uint32_t i = 0; i < n; i++) {
		uint8_t *p;

		p = lib_pool_block(c, h[i].index);
		e[i] = (struct kvc_seal_entry) {
			.handle = h[i],
			.payload_len = (uint32_t)ns->block_bytes,
			.flags = KVC_PROTO_SEAL_KEEP_PIN,
		};
		memcpy(e[i].key, key_at(keys, i), KVCACHE_KEY_SIZE);
		if (!p) {
			if (ok == n)
				ok = i;
			continue;
		}
		pool_prefault(c, h[i].index, p, ns->block_bytes);
		memcpy(p, buf + i * stride, ns->block_bytes);
	}
	*pinned = 0;
	*seal_len = 0;
	if (ok == n && k->version >= KVC_PROTO_VERSION_STORE_SEAL) {
		*seal_len = (uint32_t)ns->block_bytes;
		return (int)n;
	}
	ret = lib_call(c, k, kvc_proto_encode_seal(LIB_TX(k), e, n),
		       KVC_MSG_SEAL_REPLY);
	if (ret)
		return ret;
	if (k->msg.seal_reply.count != n)
		return -EPROTO;
	/* An entry that failed was not pinned: pins are a prefix too. */
	*pinned = n;
	for (uint32_t i = 0; i < n; i++)
		if (kvc_proto_status(&k->msg.seal_reply, i)) {
			*pinned = i;
			break;
		}
	if (ok > *pinned)
		ok = *pinned;
	return (int)ok;
}

/*
 * STORE the first n of h as a chain under parent, sealing them first if
 * seal_len (their payload length) is not 0. Returns how many leading
 * entries are cached now (stored, or already there), or the first
 * entry's error when none.
 */
static int store_chunk(struct kvcache_namespace *ns, struct lib_conn *k,
		       const uint8_t *parent, const uint8_t *keys,
		       const struct kvcache_handle *h, uint32_t n,
		       uint32_t seal_len)
{
	struct kvcache *c = ns->c;
	struct kvc_store_entry e[KVC_PROTO_MAX_STORE];
	uint32_t i;
	int ret;

	for (i = 0; i < n; i++) {
		const uint8_t *par = i ? key_at(keys, i - 1) : parent;

		memset(&e[i], 0, sizeof(e[i]));
		memcpy(e[i].key, key_at(keys, i), KVCACHE_KEY_SIZE);
		if (par)
			memcpy(e[i].parent, par, KVCACHE_KEY_SIZE);
		else
			e[i].flags = KVC_PROTO_STORE_FIRST;
		if (seal_len) {
			e[i].flags |= KVC_PROTO_STORE_SEAL;
			e[i].payload_len = seal_len;
		}
		e[i].handle = h[i];
	}
	ret = lib_call(c, k, kvc_proto_encode_store(LIB_TX(k), ns->ns_id, e,
						    n),
		       KVC_MSG_STORE_REPLY);
	if (ret)
		return ret;
	if (k->msg.store_reply.count != n)
		return -EPROTO;
	for (i = 0; i < n; i++) {
		int32_t st = kvc_proto_status(&k->msg.store_reply, i);

		if (st && st != -EEXIST)
			return i ? (int)i : st;
	}
	return (int)n;
}

LIB_EXPORT int kvcache_store(struct kvcache_namespace *ns,
			     const uint8_t *parent, const uint8_t *keys,
			     size_t n, const void *buf, size_t stride)
{
	const uint8_t *src = buf;
	struct kvcache *c;
	size_t done = 0;
	int ret = 0;

	if (!ns || (!keys && n) || (!buf && n) || n > INT32_MAX ||
	    stride < ns->block_bytes)
		return -EINVAL;
	c = ns->c;
	while (done < n) {
		uint32_t chunk = (uint32_t)(n - done < lib_batch(c) ?
					    n - done : lib_batch(c));
		const uint8_t *par = done ? key_at(keys, done - 1) : parent;
		struct kvcache_handle h[KVC_PROTO_MAX_STORE];
		struct lib_conn *k;
		uint32_t filled, pinned = 0, seal_len = 0;

		if (kernel_mode(c)) {
			ret = kernel_alloc(c, ns->ns_id, chunk, h);
			if (ret)
				break;
			filled = kernel_fill(ns, h, chunk, key_at(keys, done),
					     src + done * stride, stride,
					     &pinned);
			k = lib_conn_get(c, -1, &ret);
			if (!k) {
				lib_kernel_unpin(c, h, pinned);
				break;
			}
		} else {
			k = lib_conn_get(c, -1, &ret);
			if (!k)
				break;
			ret = memfd_alloc_fill(ns, k, chunk,
					       key_at(keys, done),
					       src + done * stride, stride, h,
					       &pinned, &seal_len);
			filled = ret > 0 ? (uint32_t)ret : 0;
		}
		if (filled)
			ret = store_chunk(ns, k, par, key_at(keys, done), h,
					  filled, seal_len);
		else if (ret >= 0)
			ret = -EIO;	/* no block could be written */
		/*
		 * Indexed now, or refused: either way the seal's pins have
		 * done their job (refused blocks become orphans the daemon
		 * reclaims). A failed connection took its pins with it.
		 */
		if (kernel_mode(c))
			lib_kernel_unpin(c, h, pinned);
		else if (k->fd >= 0)
			release_pins(c, k, h, pinned);
		lib_conn_put(c, k);
		if (ret < 0)
			break;
		done += (size_t)ret;
		if ((uint32_t)ret < chunk)
			break;
	}
	if (ret < 0 && done)
		ret = 0;
	return ret < 0 ? ret : (int)done;
}
