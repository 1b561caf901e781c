// SPDX-License-Identifier: GPL-2.0
/*
 * fastidx: the pool's resident blocks in shared memory (fastidx.h).
 *
 * The sequences and slots are read and written with the compiler's
 * __atomic builtins, as they are shared with other processes; the
 * descriptor's other fields are plain, guarded by the sequence as in a
 * seqlock. One writer (the daemon's one thread), any number of readers in
 * other processes. The writer's side is the kernel's write_seqcount_begin()
 * and _end(): make the sequence odd, a release fence (its smp_wmb()), the
 * fields, then the even sequence with a release store. A store to the
 * sequence orders nothing after it, however strong its memory order: C11
 * and ARMv8 let later plain stores become visible before it, so without
 * the fence a reader could see new fields under the old even sequence.
 * The readers' side is kvc_fastidx_find() and kvc_fastidx_still().
 */
#include "fastidx.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct kvc_fastidx_hdr {
	uint32_t magic;
	uint32_t version;
	uint32_t nr_blocks;
	uint32_t nr_buckets;
	uint32_t retired;	/* the daemon is going: nothing is valid */
	uint32_t reserved[11];
};

struct kvc_fastidx_desc {
	uint64_t seq;		/* even and not 0: published */
	uint32_t ns;
	uint32_t gen;
	uint8_t key[KVCACHE_KEY_SIZE];
	/*
	 * The parent's first 8 key bytes: a key commits to its parent, so
	 * these only have to tell the real parent from keys a caller put
	 * out of order.
	 */
	uint8_t parent[8];
	uint8_t has_parent;
	uint8_t tiers;
	uint8_t reserved[6];
};

_Static_assert(sizeof(struct kvc_fastidx_hdr) == 64, "header is 64 bytes");
_Static_assert(sizeof(struct kvc_fastidx_desc) == 64,
	       "a descriptor is one cache line");

#define BUCKET_BYTES	(KVC_FASTIDX_WAYS * sizeof(uint64_t))

static struct kvc_fastidx_hdr *hdr(const struct kvc_fastidx *f)
{
	return (struct kvc_fastidx_hdr *)f->map;
}

static struct kvc_fastidx_desc *desc(const struct kvc_fastidx *f,
				     uint32_t index)
{
	return (struct kvc_fastidx_desc *)(f->map + sizeof(struct kvc_fastidx_hdr)) +
	       index;
}

static uint64_t *bucket(const struct kvc_fastidx *f, uint64_t hash)
{
	uint8_t *b = f->map + sizeof(struct kvc_fastidx_hdr) +
		     (size_t)f->nr_blocks * sizeof(struct kvc_fastidx_desc);

	return (uint64_t *)(b + (hash & (f->nr_buckets - 1)) * BUCKET_BYTES);
}

static size_t seg_size(uint32_t nr_blocks, uint32_t nr_buckets)
{
	return sizeof(struct kvc_fastidx_hdr) +
	       (size_t)nr_blocks * sizeof(struct kvc_fastidx_desc) +
	       (size_t)nr_buckets * BUCKET_BYTES;
}

/*
 * Keys are salted cryptographic hashes (keys.h): their bytes are already
 * uniform, and nobody can aim a prompt at one bucket without the salt.
 * The high half of the hash tags the slot, the low half picks the bucket.
 */
static uint64_t key_hash(uint32_t ns, const uint8_t key[KVCACHE_KEY_SIZE])
{
	uint64_t h;

	memcpy(&h, key, sizeof(h));
	return h ^ ((uint64_t)ns * 0x9E3779B97F4A7C15ull);
}

static uint64_t slot_of(uint64_t hash, uint32_t index)
{
	return (hash >> 32) << 32 | ((uint64_t)index + 1);
}

/* Buckets for nr_blocks: on average one or two blocks in each of 8 slots. */
static uint32_t buckets_for(uint32_t nr_blocks)
{
	uint32_t n = 1;

	while (n < nr_blocks / 2 && n < (1u << 30))
		n <<= 1;
	return n;
}

int kvc_fastidx_create(uint32_t nr_blocks, struct kvc_fastidx **out)
{
	struct kvc_fastidx *f;
	int ret;

	if (!nr_blocks || nr_blocks >= UINT32_MAX)
		return -EINVAL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->writer = true;
	f->nr_blocks = nr_blocks;
	f->nr_buckets = buckets_for(nr_blocks);
	f->len = seg_size(nr_blocks, f->nr_buckets);
	f->fd = memfd_create("kvcache-fastidx", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (f->fd < 0 || ftruncate(f->fd, (off_t)f->len)) {
		ret = -errno;
		goto fail;
	}
	f->map = mmap(NULL, f->len, PROT_READ | PROT_WRITE, MAP_SHARED, f->fd,
		      0);
	if (f->map == MAP_FAILED) {
		ret = -errno;
		f->map = NULL;
		goto fail;
	}
	/*
	 * Only this mapping may write: a client's mmap(PROT_WRITE) of the
	 * memfd fails with EPERM from here on. A kernel without
	 * F_SEAL_FUTURE_WRITE (before 5.1) cannot promise that: refuse.
	 */
	if (fcntl(f->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW |
		  F_SEAL_FUTURE_WRITE | F_SEAL_SEAL)) {
		ret = -errno;
		goto fail;
	}
	/*
	 * Descriptors start at sequence 0, never published (see
	 * fastidx.h): no page of them is touched until a block is, so a
	 * segment per namespace costs only the pages its blocks use.
	 */
	hdr(f)->magic = KVC_FASTIDX_MAGIC;
	hdr(f)->version = KVC_FASTIDX_VERSION;
	hdr(f)->nr_blocks = nr_blocks;
	hdr(f)->nr_buckets = f->nr_buckets;
	*out = f;
	return 0;
fail:
	kvc_fastidx_destroy(f);
	return ret;
}

void kvc_fastidx_destroy(struct kvc_fastidx *f)
{
	if (!f)
		return;
	if (f->map)
		munmap(f->map, f->len);
	if (f->fd >= 0)
		close(f->fd);
	free(f);
}

void kvc_fastidx_retire(struct kvc_fastidx *f)
{
	__atomic_store_n(&hdr(f)->retired, 1, __ATOMIC_SEQ_CST);
}

void kvc_fastidx_unpublish(struct kvc_fastidx *f, uint32_t index)
{
	struct kvc_fastidx_desc *d;
	uint64_t hash, *b;

	if (index >= f->nr_blocks)
		return;
	d = desc(f, index);
	if (d->seq & 1 || !d->seq)
		return;
	hash = key_hash(d->ns, d->key);
	b = bucket(f, hash);
	for (unsigned int i = 0; i < KVC_FASTIDX_WAYS; i++)
		if (b[i] == slot_of(hash, index))
			__atomic_store_n(&b[i], 0, __ATOMIC_RELAXED);
	/*
	 * Odd before the block can change hands: whoever frees, zeroes or
	 * writes it next learns of it from this thread afterwards (a reply
	 * on a socket, at least), so a reader that saw any of that sees this
	 * sequence too and drops its copy.
	 */
	__atomic_store_n(&d->seq, d->seq + 1, __ATOMIC_SEQ_CST);
}

void kvc_fastidx_publish(struct kvc_fastidx *f, struct kvcache_handle h,
			 uint32_t ns, const uint8_t key[KVCACHE_KEY_SIZE],
			 const uint8_t *parent, uint8_t tiers)
{
	struct kvc_fastidx_desc *d;
	uint64_t hash = key_hash(ns, key), *b;
	unsigned int i;

	if (h.index >= f->nr_blocks)
		return;
	kvc_fastidx_unpublish(f, h.index);
	d = desc(f, h.index);
	/* Never published: odd (1) while the fields are written. */
	if (!d->seq)
		__atomic_store_n(&d->seq, 1, __ATOMIC_SEQ_CST);
	/* The odd sequence visible before any field changes (smp_wmb()). */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	d->ns = ns;
	d->gen = h.gen;
	memcpy(d->key, key, KVCACHE_KEY_SIZE);
	memset(d->parent, 0, sizeof(d->parent));
	if (parent)
		memcpy(d->parent, parent, sizeof(d->parent));
	d->has_parent = !!parent;
	d->tiers = tiers;
	__atomic_store_n(&d->seq, d->seq + 1, __ATOMIC_RELEASE);
	b = bucket(f, hash);
	for (i = 0; i < KVC_FASTIDX_WAYS; i++)
		if (!b[i])
			break;
	if (i == KVC_FASTIDX_WAYS) {
		f->full++;	/* only the daemon finds this one */
		return;
	}
	__atomic_store_n(&b[i], slot_of(hash, h.index), __ATOMIC_RELEASE);
}

void kvc_fastidx_set_tiers(struct kvc_fastidx *f, uint32_t index,
			   uint8_t tiers)
{
	struct kvc_fastidx_desc *d;

	if (index >= f->nr_blocks)
		return;
	d = desc(f, index);
	if (d->seq & 1 || !d->seq || d->tiers == tiers)
		return;
	/* Odd while it changes: a reader that saw the old tiers retries. */
	__atomic_store_n(&d->seq, d->seq + 1, __ATOMIC_SEQ_CST);
	/* The odd sequence visible before the new tiers (smp_wmb()). */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	d->tiers = tiers;
	__atomic_store_n(&d->seq, d->seq + 1, __ATOMIC_RELEASE);
}

int kvc_fastidx_attach(int fd, uint32_t nr_blocks, struct kvc_fastidx **out)
{
	struct kvc_fastidx_hdr h;
	struct kvc_fastidx *f;
	struct stat st;
	size_t len;

	if (fstat(fd, &st))
		return -errno;
	if ((size_t)st.st_size < sizeof(h) ||
	    pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
		return -EPROTO;
	if (h.magic != KVC_FASTIDX_MAGIC || h.version != KVC_FASTIDX_VERSION ||
	    h.nr_blocks != nr_blocks || h.nr_buckets != buckets_for(nr_blocks))
		return -EPROTO;
	len = seg_size(nr_blocks, h.nr_buckets);
	if ((uint64_t)st.st_size < len)
		return -EPROTO;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->fd = -1;
	f->nr_blocks = nr_blocks;
	f->nr_buckets = h.nr_buckets;
	f->len = len;
	f->map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	if (f->map == MAP_FAILED) {
		int ret = -errno;

		free(f);
		return ret;
	}
	*out = f;
	return 0;
}

void kvc_fastidx_detach(struct kvc_fastidx *f)
{
	kvc_fastidx_destroy(f);
}

/* Is d's chain place the one asked for (KVC_FASTIDX_CHAIN)? */
static bool chain_ok(const struct kvc_fastidx_desc *d, const uint8_t *parent)
{
	if (!parent)
		return !d->has_parent;
	return d->has_parent && !memcmp(d->parent, parent, sizeof(d->parent));
}

bool kvc_fastidx_find(const struct kvc_fastidx *f, uint32_t ns,
		      const uint8_t key[KVCACHE_KEY_SIZE],
		      const uint8_t *parent, unsigned int flags,
		      struct kvc_fastidx_hit *hit)
{
	uint64_t hash = key_hash(ns, key);
	const uint64_t *b = bucket(f, hash);

	if (__atomic_load_n(&hdr(f)->retired, __ATOMIC_ACQUIRE))
		return false;
	for (unsigned int i = 0; i < KVC_FASTIDX_WAYS; i++) {
		uint64_t v = __atomic_load_n(&b[i], __ATOMIC_ACQUIRE);
		const struct kvc_fastidx_desc *d;
		uint64_t s;
		uint32_t index;

		if (!v || v >> 32 != hash >> 32)
			continue;
		/* A slot names a block of this pool: trust no more than that. */
		index = (uint32_t)v - 1;
		if (index >= f->nr_blocks)
			continue;
		d = desc(f, index);
		s = __atomic_load_n(&d->seq, __ATOMIC_ACQUIRE);
		if (s & 1 || !s || d->ns != ns ||
		    memcmp(d->key, key, KVCACHE_KEY_SIZE))
			continue;
		if ((flags & KVC_FASTIDX_CHAIN) && !chain_ok(d, parent))
			continue;
		hit->h.index = index;
		hit->h.gen = d->gen;
		hit->tiers = d->tiers;
		/* The fields were one publication's: the sequence held. */
		if (!kvc_fastidx_still(f, index, s))
			continue;
		hit->seq = s;
		return true;
	}
	return false;
}

bool kvc_fastidx_retired(const struct kvc_fastidx *f)
{
	return __atomic_load_n(&hdr(f)->retired, __ATOMIC_ACQUIRE);
}

bool kvc_fastidx_still(const struct kvc_fastidx *f, uint32_t index,
		       uint64_t seq)
{
	const struct kvc_fastidx_desc *d = desc(f, index);

	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return __atomic_load_n(&d->seq, __ATOMIC_RELAXED) == seq &&
	       !__atomic_load_n(&hdr(f)->retired, __ATOMIC_RELAXED);
}
