// SPDX-License-Identifier: GPL-2.0
/*
 * pool_memfd: a pool in a memfd kvcached made itself, for machines
 * without the module (pool.h, mpool.h).
 *
 * The block state lives in mpool; the bytes in the memfd, which every
 * client is given at HELLO and maps whole (KVC_POOL_SHARED_MAP). So the
 * daemon does for clients what the kernel does in kernel mode: ALLOC,
 * SEAL, pins for LOADs, RELEASE, and the release of a client that hangs
 * up. The daemon keeps one mapping of the whole pool for its own copies
 * to and from g3/g4. With [pool] fast_index, it also publishes the
 * blocks the index holds in a read-only segment (common/fastidx.h) that
 * clients search themselves, and takes a block back before anything can
 * free it. The pool dies with the daemon: nothing to rebuild,
 * no journal, no pressure events (the daemon's checks at ALLOC and on
 * its tick do that work).
 */
#include "pool.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "fastidx.h"
#include "log.h"
#include "mpool.h"
#include "proto.h"

struct kvc_pool_memfd {
	struct kvc_pool pool;
	struct kvc_mpool *mp;
	uint8_t *map;			/* the whole pool, read-write */
	struct kvc_fastidx *fast;	/* NULL: no fast path */
};

static struct kvc_pool_memfd *to_memfd(struct kvc_pool *p)
{
	return (struct kvc_pool_memfd *)p;
}

static void memfd_close(struct kvc_pool *p)
{
	struct kvc_pool_memfd *m = to_memfd(p);

	if (m->map)
		munmap(m->map, p->block_size * p->nr_blocks);
	if (m->fast)
		kvc_fastidx_retire(m->fast);
	kvc_fastidx_destroy(m->fast);
	kvc_mpool_destroy(m->mp);
	free(m);
}

static int memfd_nr_free(struct kvc_pool *p, uint32_t *n)
{
	*n = kvc_mpool_nr_free(to_memfd(p)->mp);
	return 0;
}

static int memfd_query(struct kvc_pool *p, uint32_t start,
		       struct kvcache_block_info *out, uint32_t max,
		       uint32_t *count, uint32_t *next)
{
	*count = kvc_mpool_query(to_memfd(p)->mp, start, KVCACHE_NS_ANY, out,
				 max, next);
	return 0;
}

static int memfd_block(struct kvc_pool *p, struct kvcache_handle h,
		       struct kvcache_block_info *out)
{
	/* This index alone: never a walk to the next sealed block. */
	if (!kvc_mpool_block(to_memfd(p)->mp, h.index, out))
		return -ENOENT;
	return out->handle.gen != h.gen ? -ESTALE : 0;
}

static int memfd_evict(struct kvc_pool *p, struct kvcache_handle h)
{
	struct kvc_pool_memfd *m = to_memfd(p);
	uint32_t ns;
	int ret;

	ret = kvc_mpool_evict(m->mp, h, &ns);
	/* Whatever the caller forgot: a freed block is never findable. */
	if (!ret && m->fast)
		kvc_fastidx_unpublish(m->fast, h.index);
	return ret;
}

static int memfd_fast_fd(struct kvc_pool *p)
{
	struct kvc_pool_memfd *m = to_memfd(p);

	return m->fast ? m->fast->fd : -1;
}

static void memfd_publish(struct kvc_pool *p, struct kvcache_handle h,
			  uint32_t ns, const uint8_t key[KVCACHE_KEY_SIZE],
			  const uint8_t *parent, uint8_t tiers)
{
	struct kvc_pool_memfd *m = to_memfd(p);

	if (m->fast)
		kvc_fastidx_publish(m->fast, h, ns, key, parent, tiers);
}

static void memfd_set_tiers(struct kvc_pool *p, struct kvcache_handle h,
			    uint8_t tiers)
{
	struct kvc_pool_memfd *m = to_memfd(p);

	if (m->fast)
		kvc_fastidx_set_tiers(m->fast, h.index, tiers);
}

static void memfd_unpublish(struct kvc_pool *p, struct kvcache_handle h)
{
	struct kvc_pool_memfd *m = to_memfd(p);

	if (m->fast)
		kvc_fastidx_unpublish(m->fast, h.index);
}

static int memfd_read(struct kvc_pool *p, struct kvcache_handle h, void *dst,
		      uint64_t *len)
{
	struct kvcache_block_info info;

	/* Gone or reused since it was indexed: the same to the caller. */
	if (memfd_block(p, h, &info))
		return -ESTALE;
	*len = info.payload_len;
	memcpy(dst, to_memfd(p)->map + (uint64_t)h.index * p->block_size,
	       info.payload_len);
	return 0;
}

static int memfd_write(struct kvc_pool *p, uint32_t ns, const void *payload,
		       uint32_t len, const uint8_t key[KVCACHE_KEY_SIZE],
		       struct kvcache_handle *h)
{
	struct kvc_pool_memfd *m = to_memfd(p);
	int ret;

	ret = kvc_mpool_alloc(m->mp, KVC_MPOOL_SELF, ns, 1, h);
	if (ret)
		return ret;
	memcpy(m->map + (uint64_t)h->index * p->block_size, payload, len);
	ret = kvc_mpool_seal(m->mp, KVC_MPOOL_SELF, *h, len, key);
	/* This block only: others of ours may be promotions in flight. */
	if (ret)
		kvc_mpool_discard(m->mp, KVC_MPOOL_SELF, *h);
	return ret;
}

static int memfd_reserve(struct kvc_pool *p, uint32_t ns,
			 struct kvcache_handle *h, uint8_t **mem)
{
	struct kvc_pool_memfd *m = to_memfd(p);
	int ret;

	ret = kvc_mpool_alloc(m->mp, KVC_MPOOL_SELF, ns, 1, h);
	if (!ret)
		*mem = m->map + (uint64_t)h->index * p->block_size;
	return ret;
}

static void memfd_discard(struct kvc_pool *p, struct kvcache_handle h)
{
	kvc_mpool_discard(to_memfd(p)->mp, KVC_MPOOL_SELF, h);
}

/* The daemon enforces namespaces itself here: nothing to tell. */
static int memfd_ns_create(struct kvc_pool *p, uint32_t ns, uint32_t uid,
			   uint32_t gid, uint32_t mode)
{
	(void)p, (void)ns, (void)uid, (void)gid, (void)mode;
	return 0;
}

static void memfd_ns_destroy(struct kvc_pool *p, uint32_t ns)
{
	(void)p, (void)ns;
}

static int memfd_client_fd(struct kvc_pool *p)
{
	return kvc_mpool_fd(to_memfd(p)->mp);
}

static int memfd_alloc(struct kvc_pool *p, uint32_t client, uint32_t ns,
		       uint32_t count, struct kvcache_handle *out)
{
	return kvc_mpool_alloc(to_memfd(p)->mp, client, ns, count, out);
}

static int memfd_seal(struct kvc_pool *p, uint32_t client,
		      struct kvcache_handle h, uint32_t payload_len,
		      const uint8_t key[KVCACHE_KEY_SIZE])
{
	return kvc_mpool_seal(to_memfd(p)->mp, client, h, payload_len, key);
}

static int memfd_pin(struct kvc_pool *p, uint32_t client,
		     struct kvcache_handle h)
{
	return kvc_mpool_pin(to_memfd(p)->mp, client, h);
}

static int memfd_unpin(struct kvc_pool *p, uint32_t client,
		       struct kvcache_handle h)
{
	return kvc_mpool_unpin(to_memfd(p)->mp, client, h);
}

static void memfd_release(struct kvc_pool *p, uint32_t client)
{
	kvc_mpool_release_client(to_memfd(p)->mp, client);
}

static uint32_t memfd_zero_ahead(struct kvc_pool *p, uint32_t max)
{
	return kvc_mpool_zero_ahead(to_memfd(p)->mp, max);
}

static int memfd_events_fd(const struct kvc_pool *p)
{
	(void)p;
	return -1;
}

static void memfd_events_read(struct kvc_pool *p,
			      void (*cb)(const struct kvc_pool_state *st,
					 void *arg),
			      void *arg)
{
	(void)p, (void)cb, (void)arg;
}

static const struct kvc_pool_ops memfd_ops = {
	.name		= "memfd",
	.flags		= KVC_POOL_SHARED_MAP,
	.proto_mode	= KVC_PROTO_MODE_MEMFD,
	.client_caps	= KVC_PROTO_CAP_MEMFD,
	.client_hint	= "no module here: the client must take the pool memfd",
	.close		= memfd_close,
	.nr_free	= memfd_nr_free,
	.query		= memfd_query,
	.block		= memfd_block,
	.evict		= memfd_evict,
	.read		= memfd_read,
	.write		= memfd_write,
	.reserve	= memfd_reserve,
	.discard	= memfd_discard,
	.ns_create	= memfd_ns_create,
	.ns_destroy	= memfd_ns_destroy,
	.client_fd	= memfd_client_fd,
	.alloc		= memfd_alloc,
	.seal		= memfd_seal,
	.pin		= memfd_pin,
	.unpin		= memfd_unpin,
	.release	= memfd_release,
	.zero_ahead	= memfd_zero_ahead,
	.fast_fd	= memfd_fast_fd,
	.publish	= memfd_publish,
	.unpublish	= memfd_unpublish,
	.set_tiers	= memfd_set_tiers,
	.events_fd	= memfd_events_fd,
	.events_read	= memfd_events_read,
};

int kvc_pool_memfd_open(const struct kvc_pool_config *cfg,
			struct kvc_pool **out)
{
	struct kvc_mpool_config mc = {
		.block_size = cfg->block_size,
		.pool_size = cfg->pool_size,
		.hugetlb = cfg->hugetlb,
		.mlock = cfg->mlock,
	};
	struct kvc_pool_memfd *m = calloc(1, sizeof(*m));
	int ret;

	if (!m)
		return -ENOMEM;
	m->pool.ops = &memfd_ops;
	ret = kvc_mpool_create(&mc, &m->mp);
	/*
	 * Locking needs CAP_IPC_LOCK or a large RLIMIT_MEMLOCK (the unit
	 * file gives both). Without them the pool still works, unlocked:
	 * say so, rather than refuse to start over a tuning knob.
	 */
	if (mc.mlock && (ret == -EPERM || ret == -ENOMEM || ret == -EAGAIN)) {
		kvc_warn("cannot lock the memfd pool in "
			 "memory (%s): running it unlocked (give kvcached "
			 "CAP_IPC_LOCK or a larger RLIMIT_MEMLOCK, or set "
			 "[pool] mlock = no)", strerror(-ret));
		mc.mlock = false;
		ret = kvc_mpool_create(&mc, &m->mp);
	}
	if (ret) {
		kvc_err("memfd pool of %" PRIu64 " bytes: %s",
			mc.pool_size, strerror(-ret));
		free(m);
		return ret;
	}
	m->pool.block_size = kvc_mpool_block_size(m->mp);
	m->pool.nr_blocks = kvc_mpool_nr_blocks(m->mp);
	m->pool.can_reserve = true;
	/* Whether huge pages took is the first thing a slow store asks. */
	kvc_info("memfd pool: %" PRIu32 " blocks of %" PRIu64 " bytes, %s pages, %s",
		 m->pool.nr_blocks, m->pool.block_size,
		 kvc_mpool_hugetlb(m->mp) ? "2 MiB huge" : "4 KiB",
		 kvc_mpool_locked(m->mp) ? "locked" : "not locked");
	/* The daemon copies blocks to and from g3/g4 through this. */
	m->map = mmap(NULL, m->pool.block_size * m->pool.nr_blocks,
		      PROT_READ | PROT_WRITE, MAP_SHARED, kvc_mpool_fd(m->mp), 0);
	if (m->map == MAP_FAILED) {
		ret = -errno;
		m->map = NULL;
		memfd_close(&m->pool);
		return ret;
	}
	if (cfg->fast_index) {
		ret = kvc_fastidx_create(m->pool.nr_blocks, &m->fast);
		if (ret) {
			kvc_err("fast index of %" PRIu32 " blocks: %s (set [pool] fast_index = no to run without it)",
				m->pool.nr_blocks, strerror(-ret));
			memfd_close(&m->pool);
			return ret;
		}
	}
	*out = &m->pool;
	return 0;
}
