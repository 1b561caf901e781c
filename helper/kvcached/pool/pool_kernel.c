// SPDX-License-Identifier: GPL-2.0
/*
 * pool_kernel: the pool of kvcache.ko, as the daemon sees it (pool.h).
 *
 * kvcached holds /dev/kvcache in the helper role (kdev.h): it may query,
 * evict and pin any block, and it creates the namespaces the kernel
 * enforces. Clients do everything else with their own file descriptor,
 * and the kernel checks each of them, so the client entries here are
 * refusals (pin: nothing to do). Pressure comes as generic netlink
 * events (kevents.h); without them the daemon's periodic check still
 * runs, so a failure to subscribe is not fatal.
 *
 * The daemon's own copies (spill out, promotion in) go through a pin of
 * its own and a mapping of one block, held only for the copy. A
 * promotion in place (reserve) holds a writable mapping of its block from
 * the reserve until the seal or the discard, which unmap it first (the
 * module refuses both while it is mapped writable): the mappings held
 * are in maps[], a few at a time (the tiers' places bound them), looked
 * up by block index. Without KVCACHE_FEAT_DISCARD (an older module) a
 * failed read could not give its block back, so there is no reserve.
 *
 * The fast path ([pool] fast_index): the blocks the index holds are
 * published in one segment per namespace (common/fastidx.h), and passed
 * by FAST_NS only to peers that may read the namespace: no tenant sees
 * another's keys. A segment is a memfd, so a descriptor: it is made at
 * the namespace's first FAST_NS, not with the namespace (a node may have
 * up to KVCACHE_NS_MAX of them, most never read through the fast path),
 * and the caller then publishes what the pool already holds of it. At
 * most fast_max segments exist (kvc_pool_config): past that FAST_NS is
 * refused with EMFILE and clients ask the daemon, which keeps the
 * descriptors the rest of the daemon needs. A client finds a
 * key there and pins the block itself; the kernel checks the generation
 * and the namespace at PIN, so a descriptor gone stale (the block
 * evicted and reused before it was taken back here) is refused with
 * ESTALE, never another block's bytes. pub_ns[] says which segment each
 * block is published in.
 */
#include "pool.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "devinfo.h"
#include "fastidx.h"
#include "kdev.h"
#include "log.h"
#include "proto.h"

/* A reserved block's writable mapping, held until its seal or discard. */
struct kvc_kmap {
	uint32_t index;
	uint8_t *mem;
};

struct kvc_pool_kernel {
	struct kvc_pool pool;
	struct kvc_kdev kdev;
	struct kvc_kevents *ev;		/* NULL: no events, polling only */
	struct kvc_kmap *maps;
	uint32_t nr_maps, cap_maps;
	/* The fast path; fast NULL when it is off. */
	struct kvc_fastidx **fast;	/* by namespace id, made on demand */
	uint32_t *pub_ns;		/* by block: its segment's ns, or 0 */
	uint32_t nr_fast, fast_max;	/* segments made; the most allowed */
};

static struct kvc_pool_kernel *to_kernel(struct kvc_pool *p)
{
	return (struct kvc_pool_kernel *)p;
}

/* Namespace ns's segment, made if create; NULL (and *err) if none. */
static struct kvc_fastidx *kernel_fast_seg(struct kvc_pool_kernel *k,
					   uint32_t ns, bool create, int *err)
{
	int ret;

	*err = -EOPNOTSUPP;
	if (!k->fast || ns < 1 || ns > KVCACHE_NS_MAX)
		return NULL;
	if (k->fast[ns] || !create)
		return k->fast[ns];
	ret = k->nr_fast < k->fast_max ?
	      kvc_fastidx_create(k->pool.nr_blocks, &k->fast[ns]) : -EMFILE;
	if (ret) {
		kvc_warn_ratelimited("pool: fast index of namespace %" PRIu32 ": %s%s",
				     ns, strerror(-ret),
				     ret == -EMFILE ?
				     " (segments at their limit: the rest is kept for clients and tiers)" :
				     "");
		*err = ret;
		return NULL;
	}
	k->nr_fast++;
	return k->fast[ns];
}

static void kernel_fast_drop(struct kvc_pool_kernel *k, uint32_t ns)
{
	kvc_fastidx_retire(k->fast[ns]);
	kvc_fastidx_destroy(k->fast[ns]);
	k->fast[ns] = NULL;
	k->nr_fast--;
}

/* Take block index back from the segment it is published in. */
static void kernel_unpublish_index(struct kvc_pool_kernel *k, uint32_t index)
{
	uint32_t ns;

	if (!k->fast || index >= k->pool.nr_blocks)
		return;
	ns = k->pub_ns[index];
	if (ns && k->fast[ns])
		kvc_fastidx_unpublish(k->fast[ns], index);
	k->pub_ns[index] = 0;
}

static void kernel_publish(struct kvc_pool *p, struct kvcache_handle h,
			   uint32_t ns, const uint8_t key[KVCACHE_KEY_SIZE],
			   const uint8_t *parent, uint8_t tiers)
{
	struct kvc_pool_kernel *k = to_kernel(p);
	struct kvc_fastidx *f;
	int err;

	if (!k->fast || h.index >= p->nr_blocks)
		return;
	if (k->pub_ns[h.index] != ns)
		kernel_unpublish_index(k, h.index);
	/* None until the first FAST_NS, which publishes what is here. */
	f = kernel_fast_seg(k, ns, false, &err);
	if (!f)
		return;		/* reachable through the daemon only */
	kvc_fastidx_publish(f, h, ns, key, parent, tiers);
	k->pub_ns[h.index] = ns;
}

static void kernel_unpublish(struct kvc_pool *p, struct kvcache_handle h)
{
	kernel_unpublish_index(to_kernel(p), h.index);
}

static void kernel_set_tiers(struct kvc_pool *p, struct kvcache_handle h,
			     uint8_t tiers)
{
	struct kvc_pool_kernel *k = to_kernel(p);
	uint32_t ns;

	if (!k->fast || h.index >= p->nr_blocks)
		return;
	ns = k->pub_ns[h.index];
	if (ns && k->fast[ns])
		kvc_fastidx_set_tiers(k->fast[ns], h.index, tiers);
}

/* FAST_NS: the segment of namespace ns (the caller checked the peer). */
static int kernel_fast_ns_fd(struct kvc_pool *p, uint32_t ns, bool *made)
{
	struct kvc_pool_kernel *k = to_kernel(p);
	struct kvc_fastidx *f;
	bool had = k->fast && ns >= 1 && ns <= KVCACHE_NS_MAX && k->fast[ns];
	int err;

	f = kernel_fast_seg(k, ns, true, &err);
	*made = f && !had;
	return f ? f->fd : err;
}

/* Every segment tells its readers that nothing in it holds any more. */
static void kernel_fast_close(struct kvc_pool_kernel *k)
{
	if (!k->fast)
		return;
	for (uint32_t ns = 1; ns <= KVCACHE_NS_MAX; ns++)
		if (k->fast[ns])
			kernel_fast_drop(k, ns);
	free(k->fast);
	free(k->pub_ns);
	k->fast = NULL;
	k->pub_ns = NULL;
}

static void kernel_close(struct kvc_pool *p)
{
	struct kvc_pool_kernel *k = to_kernel(p);

	kernel_fast_close(k);
	kvc_kevents_close(k->ev);
	for (uint32_t i = 0; i < k->nr_maps; i++)
		munmap(k->maps[i].mem, p->block_size);
	free(k->maps);
	/* The module frees reserved blocks with the file. */
	kvc_kdev_close(&k->kdev);
	free(k);
}

/* The module says how many are free; the helper role has no ioctl for it. */
static int kernel_nr_free(struct kvc_pool *p, uint32_t *n)
{
	char buf[32];
	int ret;

	(void)p;
	ret = kvc_sysfs_read(NULL, "pool/free_blocks", buf, sizeof(buf));
	if (!ret)
		*n = (uint32_t)strtoul(buf, NULL, 10);
	return ret;
}

static int kernel_query(struct kvc_pool *p, uint32_t start,
			struct kvcache_block_info *out, uint32_t max,
			uint32_t *count, uint32_t *next)
{
	return kvc_kdev_query(&to_kernel(p)->kdev, start, KVCACHE_NS_ANY, out,
			      max, count, next);
}

static int kernel_block(struct kvc_pool *p, struct kvcache_handle h,
			struct kvcache_block_info *out)
{
	return kvc_kdev_block(&to_kernel(p)->kdev, h, out);
}

static int kernel_evict(struct kvc_pool *p, struct kvcache_handle h)
{
	struct kvc_pool_kernel *k = to_kernel(p);
	uint32_t done;
	int ret;

	ret = kvc_kdev_evict(&k->kdev, &h, 1, &done);
	/*
	 * Whatever the caller forgot: a freed block is not findable. (A
	 * client that found it just before pins a stale generation: ESTALE.)
	 */
	if (!ret)
		kernel_unpublish_index(k, h.index);
	return ret;
}

/* A pin of our own makes the block mappable and keeps it while copied. */
static int kernel_read(struct kvc_pool *p, struct kvcache_handle h, void *dst,
		       uint64_t *len)
{
	struct kvc_pool_kernel *k = to_kernel(p);
	struct kvcache_block_info info;
	void *map;
	int ret;

	ret = kvc_kdev_block(&k->kdev, h, &info);
	if (!ret)
		ret = kvc_kdev_pin(&k->kdev, h);
	if (ret)
		return ret;
	map = mmap(NULL, p->block_size, PROT_READ, MAP_SHARED, k->kdev.fd,
		   (off_t)((uint64_t)h.index * p->block_size));
	if (map == MAP_FAILED) {
		ret = -errno;
	} else {
		*len = info.payload_len;
		memcpy(dst, map, info.payload_len);
		munmap(map, p->block_size);
	}
	kvc_kdev_unpin(&k->kdev, h);
	return ret;
}

/*
 * A new writable block of namespace ns, mapped writable: the mapping, or
 * NULL with *ret set (a block whose mapping failed is given back).
 */
static void *kernel_map_new(struct kvc_pool_kernel *k, uint32_t ns,
			    struct kvcache_handle *h, int *ret)
{
	uint64_t bs = k->pool.block_size;
	void *map;

	*ret = kvc_kdev_alloc(&k->kdev, ns, h);
	if (*ret)
		return NULL;
	map = mmap(NULL, bs, PROT_READ | PROT_WRITE, MAP_SHARED, k->kdev.fd,
		   (off_t)((uint64_t)h->index * bs));
	if (map == MAP_FAILED) {
		*ret = -errno;
		kvc_kdev_discard(&k->kdev, *h);
		return NULL;
	}
	return map;
}

static int kernel_write(struct kvc_pool *p, uint32_t ns, const void *payload,
			uint32_t len, const uint8_t key[KVCACHE_KEY_SIZE],
			struct kvcache_handle *h)
{
	struct kvc_pool_kernel *k = to_kernel(p);
	void *map;
	int ret;

	map = kernel_map_new(k, ns, h, &ret);
	if (!map)
		return ret;
	memcpy(map, payload, len);
	munmap(map, p->block_size);
	ret = kvc_kdev_seal(&k->kdev, *h, len, key);
	/* Unsealed: back now where the module can take it (else at close). */
	if (ret)
		kvc_kdev_discard(&k->kdev, *h);
	return ret;
}

static int kernel_reserve(struct kvc_pool *p, uint32_t ns,
			  struct kvcache_handle *h, uint8_t **mem)
{
	struct kvc_pool_kernel *k = to_kernel(p);
	void *map;
	int ret;

	if (k->nr_maps == k->cap_maps) {
		uint32_t cap = k->cap_maps ? 2 * k->cap_maps : 16;
		struct kvc_kmap *m = realloc(k->maps, cap * sizeof(*m));

		if (!m)
			return -ENOMEM;
		k->maps = m;
		k->cap_maps = cap;
	}
	map = kernel_map_new(k, ns, h, &ret);
	if (!map)
		return ret;
	k->maps[k->nr_maps++] = (struct kvc_kmap){ h->index, map };
	*mem = map;
	return 0;
}

/* Unmap reserved block index, if it is one: true when it was. */
static bool kernel_unmap_reserved(struct kvc_pool_kernel *k, uint32_t index)
{
	for (uint32_t i = 0; i < k->nr_maps; i++) {
		if (k->maps[i].index != index)
			continue;
		munmap(k->maps[i].mem, k->pool.block_size);
		k->maps[i] = k->maps[--k->nr_maps];
		return true;
	}
	return false;
}

static void kernel_discard(struct kvc_pool *p, struct kvcache_handle h)
{
	struct kvc_pool_kernel *k = to_kernel(p);
	int ret;

	if (!kernel_unmap_reserved(k, h.index))
		return;
	/* Should not fail (it is our block, unmapped); if it does, the
	 * module frees it with our file. */
	ret = kvc_kdev_discard(&k->kdev, h);
	if (ret)
		kvc_warn("pool: DISCARD of block %" PRIu32 ": %s",
			 h.index, strerror(-ret));
}

static int kernel_ns_create(struct kvc_pool *p, uint32_t ns, uint32_t uid,
			    uint32_t gid, uint32_t mode)
{
	struct kvc_pool_kernel *k = to_kernel(p);

	/* No segment yet: the first FAST_NS makes it (see the top). */
	return kvc_kdev_ns_create(&k->kdev, ns, uid, gid, mode);
}

static void kernel_ns_destroy(struct kvc_pool *p, uint32_t ns)
{
	struct kvc_pool_kernel *k = to_kernel(p);

	kvc_kdev_ns_destroy(&k->kdev, ns);
	/*
	 * A namespace made again under this id may have another owner: it
	 * gets a new segment, and whoever holds this one finds nothing.
	 */
	if (!k->fast || ns < 1 || ns > KVCACHE_NS_MAX || !k->fast[ns])
		return;
	kernel_fast_drop(k, ns);
	for (uint32_t i = 0; i < p->nr_blocks; i++)
		if (k->pub_ns[i] == ns)
			k->pub_ns[i] = 0;
}

static int kernel_client_fd(struct kvc_pool *p)
{
	(void)p;
	return -1;	/* clients open /dev/kvcache themselves */
}

static int kernel_alloc(struct kvc_pool *p, uint32_t client, uint32_t ns,
			uint32_t count, struct kvcache_handle *out)
{
	(void)p, (void)client, (void)ns, (void)count, (void)out;
	return -EOPNOTSUPP;	/* KVCACHE_IOC_ALLOC on the client's file */
}

/*
 * The daemon's own reserved block, its read checked: unmapped, then
 * sealed; a seal that fails gives the block back at once (the caller's
 * discard then finds no mapping and does nothing). A client seals with
 * KVCACHE_IOC_SEAL on its own file.
 */
static int kernel_seal(struct kvc_pool *p, uint32_t client,
		       struct kvcache_handle h, uint32_t payload_len,
		       const uint8_t key[KVCACHE_KEY_SIZE])
{
	struct kvc_pool_kernel *k = to_kernel(p);
	int ret;

	if (client != KVC_POOL_SELF || !kernel_unmap_reserved(k, h.index))
		return -EOPNOTSUPP;
	ret = kvc_kdev_seal(&k->kdev, h, payload_len, key);
	if (ret)
		kvc_kdev_discard(&k->kdev, h);
	return ret;
}

/* The client pins with its own file, where the kernel checks it. */
static int kernel_pin(struct kvc_pool *p, uint32_t client,
		      struct kvcache_handle h)
{
	(void)p, (void)client, (void)h;
	return 0;
}

static int kernel_unpin(struct kvc_pool *p, uint32_t client,
			struct kvcache_handle h)
{
	(void)p, (void)client, (void)h;
	return -EOPNOTSUPP;	/* KVCACHE_IOC_UNPIN on the client's file */
}

/* Its file's release does it in the kernel. */
static void kernel_release(struct kvc_pool *p, uint32_t client)
{
	(void)p, (void)client;
}

/* The module zeroes a block in place when it hands it out. */
static uint32_t kernel_zero_ahead(struct kvc_pool *p, uint32_t max)
{
	(void)p, (void)max;
	return 0;
}

static int kernel_events_fd(const struct kvc_pool *p)
{
	const struct kvc_pool_kernel *k = (const struct kvc_pool_kernel *)p;

	return k->ev ? kvc_kevents_fd(k->ev) : -1;
}

static void kernel_events_read(struct kvc_pool *p,
			       void (*cb)(const struct kvc_pool_state *st,
					  void *arg),
			       void *arg)
{
	struct kvc_pool_kernel *k = to_kernel(p);

	if (k->ev)
		kvc_kevents_read(k->ev, cb, arg);
}

static const struct kvc_pool_ops kernel_ops = {
	.name		= "kernel",
	.flags		= KVC_POOL_PERSISTENT,
	.proto_mode	= KVC_PROTO_MODE_KERNEL,
	.client_caps	= KVC_PROTO_CAP_DEVICE,
	.client_hint	= "kernel mode: the client must use /dev/kvcache",
	.close		= kernel_close,
	.nr_free	= kernel_nr_free,
	.query		= kernel_query,
	.block		= kernel_block,
	.evict		= kernel_evict,
	.read		= kernel_read,
	.write		= kernel_write,
	.reserve	= kernel_reserve,
	.discard	= kernel_discard,
	.ns_create	= kernel_ns_create,
	.ns_destroy	= kernel_ns_destroy,
	.client_fd	= kernel_client_fd,
	.alloc		= kernel_alloc,
	.seal		= kernel_seal,
	.pin		= kernel_pin,
	.unpin		= kernel_unpin,
	.release	= kernel_release,
	.zero_ahead	= kernel_zero_ahead,
	.fast_ns_fd	= kernel_fast_ns_fd,
	.publish	= kernel_publish,
	.unpublish	= kernel_unpublish,
	.set_tiers	= kernel_set_tiers,
	.events_fd	= kernel_events_fd,
	.events_read	= kernel_events_read,
};

int kvc_pool_kernel_open(const struct kvc_pool_config *cfg,
			 struct kvc_pool **out)
{
	struct kvc_pool_kernel *k = calloc(1, sizeof(*k));
	int ret;

	if (!k)
		return -ENOMEM;
	ret = kvc_kdev_open(&k->kdev, cfg->device);
	if (ret) {
		free(k);
		return ret;
	}
	k->pool.ops = &kernel_ops;
	k->pool.block_size = k->kdev.info.block_size;
	k->pool.nr_blocks = (uint32_t)k->kdev.info.nr_blocks;
	k->pool.can_reserve = k->kdev.info.features & KVCACHE_FEAT_DISCARD;
	if (cfg->fast_index) {
		k->fast_max = cfg->fast_max;
		k->fast = calloc(KVCACHE_NS_MAX + 1, sizeof(*k->fast));
		k->pub_ns = calloc(k->pool.nr_blocks ? k->pool.nr_blocks : 1,
				   sizeof(*k->pub_ns));
		if (!k->fast || !k->pub_ns) {
			kernel_fast_close(k);
			kvc_kdev_close(&k->kdev);
			free(k);
			return -ENOMEM;
		}
	}
	/* Without the events the periodic check still runs. */
	if (kvc_kevents_open(&k->ev))
		k->ev = NULL;
	*out = &k->pool;
	return 0;
}
