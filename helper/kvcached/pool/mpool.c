// SPDX-License-Identifier: GPL-2.0
/*
 * mpool: the block pool in a memfd, for hosts without kvcache.ko (see
 * mpool.h for what it promises and what it cannot).
 *
 * Memory: an unlocked pool zeroes a block handed to a writer by punching
 * a hole (fallocate), which also gives the pages back; the first touch of
 * the writer's mapping then faults in zeroed pages. A locked pool
 * (mlock = yes) populates and locks every page of its own mapping at
 * start and zeroes blocks in place instead: a hole would free locked
 * pages, and the writer would fault new, unlocked ones in (one fault per
 * 4 KiB page, which is most of a store's cost). The daemon keeps one
 * mapping of the whole file, which reserves hugetlb pages up front when
 * the pool uses them (so a shortage shows at start, not on a client's
 * page fault).
 *
 * Huge pages: the pool uses them whatever its block size, when its size
 * is whole huge pages. A client's first write into a block then maps a
 * 2 MiB page with one fault, not 512 pages of 4 KiB with one each, which
 * was most of the cost of a store into blocks the client never wrote.
 * Blocks smaller than a huge page share one, so such a block is always
 * zeroed by memset: a hole punched in part of a huge page frees nothing,
 * and kernels before 6.3 do not even zero that part.
 *
 * Zeroing ahead: a freed block goes on the dirty stack, and the daemon
 * zeroes dirty blocks between requests (kvc_mpool_zero_ahead(), from its
 * tick), moving them to the clean stack. ALLOC takes clean blocks first
 * and zeroes a dirty one only when no clean one is left, so a store does
 * not pay for the memset of its block. Either way a block handed to a
 * writer is zero: no writer sees the bytes of the block's last life.
 */
#include "mpool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <linux/memfd.h>

#define KVC_HUGE_SIZE	(2ULL << 20)

enum { KVC_MB_FREE, KVC_MB_WRITABLE, KVC_MB_SEALED };

struct kvc_mblock {
	uint8_t state;
	uint32_t gen;
	uint32_t pins;		/* all clients' pins together */
	uint32_t owner;		/* WRITABLE: the client */
	uint32_t ns;
	uint32_t payload_len;
	uint8_t key[KVCACHE_KEY_SIZE];
};

struct kvc_mpool {
	int fd;
	bool huge;
	bool locked;		/* every page resident and locked */
	void *base;
	uint64_t block_size;
	uint32_t nr_blocks;
	struct kvc_mblock *blocks;
	uint32_t *free_stack;	/* free and zero */
	uint32_t nr_free;
	uint32_t *dirty_stack;	/* free, holding a former life's bytes */
	uint32_t nr_dirty;
	/* Per client, per block pin counts; allocated on a client's first pin. */
	uint16_t *pins[KVC_MPOOL_MAX_CLIENTS];
};

static int kvc_mpool_file(struct kvc_mpool *p, uint64_t size, bool huge)
{
	unsigned int flags = MFD_CLOEXEC | MFD_ALLOW_SEALING;
	int err;

	if (huge)
		flags = MFD_CLOEXEC | MFD_HUGETLB | MFD_HUGE_2MB;
	p->fd = memfd_create("kvcache-pool", flags);
	if (p->fd < 0)
		return -errno;
	/* The size is fixed: no client may shrink the file under the pool. */
	if (ftruncate(p->fd, (off_t)size) ||
	    (!huge && fcntl(p->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW |
			    F_SEAL_SEAL)))
		goto err;
	p->base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, p->fd, 0);
	if (p->base == MAP_FAILED)
		goto err;
	p->huge = huge;
	return 0;
err:
	err = -errno;
	close(p->fd);
	p->fd = -1;
	p->base = NULL;
	return err;
}

int kvc_mpool_create(const struct kvc_mpool_config *cfg,
		     struct kvc_mpool **out)
{
	uint64_t bs = cfg->block_size, size = cfg->pool_size;
	/* Blocks may be smaller than a huge page, but the file is whole ones. */
	bool huge_ok = size % KVC_HUGE_SIZE == 0;
	struct kvc_mpool *p;
	int ret;

	if (bs < 4096 || bs > (64ULL << 20) || (bs & (bs - 1)) || !size ||
	    size % bs || size / bs > (1U << 24))
		return -EINVAL;
	if (cfg->hugetlb == 1 && !huge_ok)
		return -EINVAL;	/* the pool must be whole huge pages */
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->fd = -1;
	p->block_size = bs;
	p->nr_blocks = (uint32_t)(size / bs);
	p->blocks = calloc(p->nr_blocks, sizeof(*p->blocks));
	p->free_stack = calloc(p->nr_blocks, sizeof(*p->free_stack));
	p->dirty_stack = calloc(p->nr_blocks, sizeof(*p->dirty_stack));
	if (!p->blocks || !p->free_stack || !p->dirty_stack) {
		ret = -ENOMEM;
		goto err;
	}
	ret = -ENOMEM;
	if (cfg->hugetlb != 0 && huge_ok)
		ret = kvc_mpool_file(p, size, true);
	if (ret && cfg->hugetlb == 1)
		goto err;
	if (ret)
		ret = kvc_mpool_file(p, size, false);
	if (ret)
		goto err;
	if (cfg->mlock) {
		if (mlock(p->base, size)) {
			ret = -errno;
			goto err;
		}
		p->locked = true;
	}
	/* Lowest index on top, so a fresh pool hands out blocks in order. */
	for (uint32_t i = 0; i < p->nr_blocks; i++)
		p->free_stack[i] = p->nr_blocks - 1 - i;
	p->nr_free = p->nr_blocks;
	*out = p;
	return 0;
err:
	kvc_mpool_destroy(p);
	return ret;
}

void kvc_mpool_destroy(struct kvc_mpool *p)
{
	if (!p)
		return;
	if (p->base)
		munmap(p->base, p->block_size * p->nr_blocks);
	if (p->fd >= 0)
		close(p->fd);
	for (uint32_t c = 0; c < KVC_MPOOL_MAX_CLIENTS; c++)
		free(p->pins[c]);
	free(p->blocks);
	free(p->free_stack);
	free(p->dirty_stack);
	free(p);
}

int kvc_mpool_fd(const struct kvc_mpool *p)
{
	return p->fd;
}

bool kvc_mpool_locked(const struct kvc_mpool *p)
{
	return p->locked;
}

bool kvc_mpool_hugetlb(const struct kvc_mpool *p)
{
	return p->huge;
}

uint64_t kvc_mpool_block_size(const struct kvc_mpool *p)
{
	return p->block_size;
}

uint32_t kvc_mpool_nr_blocks(const struct kvc_mpool *p)
{
	return p->nr_blocks;
}

uint32_t kvc_mpool_nr_free(const struct kvc_mpool *p)
{
	return p->nr_free + p->nr_dirty;
}

uint32_t kvc_mpool_nr_dirty(const struct kvc_mpool *p)
{
	return p->nr_dirty;
}

/*
 * Zero a block: punch its pages out (cheap, and returns the memory) when
 * they are its own, else memset (a locked pool; a block that shares a
 * huge page with others).
 */
static void kvc_mpool_zero(struct kvc_mpool *p, uint32_t idx)
{
	off_t off = (off_t)(p->block_size * idx);
	bool own_pages = !p->huge || p->block_size % KVC_HUGE_SIZE == 0;

	if (p->locked || !own_pages ||
	    fallocate(p->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off,
		      (off_t)p->block_size))
		memset((char *)p->base + off, 0, p->block_size);
}

static void kvc_mpool_free_block(struct kvc_mpool *p, uint32_t idx)
{
	struct kvc_mblock *b = &p->blocks[idx];

	b->state = KVC_MB_FREE;
	b->gen++;
	b->payload_len = 0;
	b->ns = 0;
	memset(b->key, 0, sizeof(b->key));
	p->dirty_stack[p->nr_dirty++] = idx;
}

uint32_t kvc_mpool_zero_ahead(struct kvc_mpool *p, uint32_t max)
{
	uint32_t n = 0;

	for (; n < max && p->nr_dirty; n++) {
		uint32_t idx = p->dirty_stack[--p->nr_dirty];

		kvc_mpool_zero(p, idx);
		p->free_stack[p->nr_free++] = idx;
	}
	return n;
}

int kvc_mpool_alloc(struct kvc_mpool *p, uint32_t client, uint32_t ns,
		    uint32_t count, struct kvcache_handle *out)
{
	if (!count || count > KVCACHE_MAX_BATCH ||
	    client >= KVC_MPOOL_MAX_CLIENTS)
		return -EINVAL;
	if (p->nr_free + p->nr_dirty < count)
		return -ENOSPC;
	for (uint32_t i = 0; i < count; i++) {
		uint32_t idx;
		struct kvc_mblock *b;

		if (p->nr_free) {
			idx = p->free_stack[--p->nr_free];
		} else {
			idx = p->dirty_stack[--p->nr_dirty];
			kvc_mpool_zero(p, idx);
		}
		b = &p->blocks[idx];
		b->state = KVC_MB_WRITABLE;
		b->owner = client;
		b->ns = ns;
		out[i].index = idx;
		out[i].gen = b->gen;
	}
	return 0;
}

/* The block a handle names, or NULL with *err set. */
static struct kvc_mblock *kvc_mpool_get(struct kvc_mpool *p,
					struct kvcache_handle h, int *err)
{
	struct kvc_mblock *b;

	if (h.index >= p->nr_blocks) {
		*err = -EINVAL;
		return NULL;
	}
	b = &p->blocks[h.index];
	if (b->gen != h.gen || b->state == KVC_MB_FREE) {
		*err = -ESTALE;
		return NULL;
	}
	*err = 0;
	return b;
}

int kvc_mpool_seal(struct kvc_mpool *p, uint32_t client,
		   struct kvcache_handle h, uint32_t payload_len,
		   const uint8_t key[KVCACHE_KEY_SIZE])
{
	struct kvc_mblock *b;
	int err;

	b = kvc_mpool_get(p, h, &err);
	if (!b)
		return err;
	if (!payload_len || payload_len > p->block_size ||
	    b->state == KVC_MB_SEALED)
		return -EINVAL;
	if (b->owner != client)
		return -EPERM;
	memcpy(b->key, key, KVCACHE_KEY_SIZE);
	b->payload_len = payload_len;
	b->state = KVC_MB_SEALED;
	return 0;
}

int kvc_mpool_pin(struct kvc_mpool *p, uint32_t client,
		  struct kvcache_handle h)
{
	struct kvc_mblock *b;
	uint16_t *pins;
	int err;

	if (client >= KVC_MPOOL_MAX_CLIENTS)
		return -EINVAL;
	b = kvc_mpool_get(p, h, &err);
	if (!b)
		return err;
	if (b->state != KVC_MB_SEALED)
		return -EBUSY;	/* as the kernel: not sealed yet */
	if (!p->pins[client]) {
		p->pins[client] = calloc(p->nr_blocks, sizeof(uint16_t));
		if (!p->pins[client])
			return -ENOMEM;
	}
	pins = &p->pins[client][h.index];
	if (*pins == UINT16_MAX)
		return -EOVERFLOW;
	(*pins)++;
	b->pins++;
	return 0;
}

int kvc_mpool_unpin(struct kvc_mpool *p, uint32_t client,
		    struct kvcache_handle h)
{
	struct kvc_mblock *b;
	int err;

	if (client >= KVC_MPOOL_MAX_CLIENTS)
		return -EINVAL;
	b = kvc_mpool_get(p, h, &err);
	if (!b)
		return err;
	if (!p->pins[client] || !p->pins[client][h.index])
		return -EINVAL;	/* this client holds no pin on it */
	p->pins[client][h.index]--;
	b->pins--;
	return 0;
}

int kvc_mpool_evict(struct kvc_mpool *p, struct kvcache_handle h,
		    uint32_t *ns)
{
	struct kvc_mblock *b;
	int err;

	b = kvc_mpool_get(p, h, &err);
	if (!b)
		return err;
	if (b->state != KVC_MB_SEALED || b->pins)
		return -EBUSY;
	*ns = b->ns;
	kvc_mpool_free_block(p, h.index);
	return 0;
}

int kvc_mpool_discard(struct kvc_mpool *p, uint32_t client,
		      struct kvcache_handle h)
{
	struct kvc_mblock *b;
	int err;

	b = kvc_mpool_get(p, h, &err);
	if (!b)
		return err;
	if (b->state != KVC_MB_WRITABLE)
		return -EBUSY;
	if (b->owner != client)
		return -EPERM;
	/* Its bytes may be anything a failed read left: dirty. */
	kvc_mpool_free_block(p, h.index);
	return 0;
}

void kvc_mpool_release_client(struct kvc_mpool *p, uint32_t client)
{
	uint16_t *pins;

	if (client >= KVC_MPOOL_MAX_CLIENTS)
		return;
	pins = p->pins[client];
	for (uint32_t i = 0; i < p->nr_blocks; i++) {
		struct kvc_mblock *b = &p->blocks[i];

		if (pins && pins[i]) {
			b->pins -= pins[i];
			pins[i] = 0;
		}
		/* Never sealed: it goes back and is never visible. */
		if (b->state == KVC_MB_WRITABLE && b->owner == client)
			kvc_mpool_free_block(p, i);
	}
	free(pins);
	p->pins[client] = NULL;
}

bool kvc_mpool_block(const struct kvc_mpool *p, uint32_t index,
		     struct kvcache_block_info *out)
{
	const struct kvc_mblock *b;

	if (index >= p->nr_blocks)
		return false;
	b = &p->blocks[index];
	if (b->state != KVC_MB_SEALED)
		return false;
	memset(out, 0, sizeof(*out));
	out->handle.index = index;
	out->handle.gen = b->gen;
	out->ns_id = b->ns;
	out->payload_len = b->payload_len;
	out->pins = b->pins;
	memcpy(out->key, b->key, KVCACHE_KEY_SIZE);
	return true;
}

uint32_t kvc_mpool_query(const struct kvc_mpool *p, uint32_t start,
			 uint32_t ns, struct kvcache_block_info *out,
			 uint32_t max, uint32_t *next)
{
	uint32_t n = 0, i;

	for (i = start; i < p->nr_blocks && n < max; i++) {
		if (!kvc_mpool_block(p, i, &out[n]) ||
		    (ns != KVCACHE_NS_ANY && out[n].ns_id != ns))
			continue;
		n++;
	}
	*next = i;
	return n;
}
