// SPDX-License-Identifier: GPL-2.0
/*
 * Host tests for helper/kvcached/pool/mpool.c, the no-module pool: the same state
 * machine and errors as the kernel's pool (kmod/tests/kvcache_pool_kunit.c
 * checks those), zeroing through the memfd a client maps, pins per client,
 * and a closed client's release.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>

#include "mpool.h"
#include "tap.h"

#define BS	(64 * 1024)
#define NR	8

static const uint8_t key[KVCACHE_KEY_SIZE] = { 1, 2, 3 };

static struct kvc_mpool *pool(void)
{
	struct kvc_mpool_config cfg = {
		.block_size = BS, .pool_size = BS * NR, .hugetlb = -1,
	};
	struct kvc_mpool *p = NULL;

	TAP_CHECK(kvc_mpool_create(&cfg, &p) == 0);
	return p;
}

static void geometry_is_checked(void)
{
	struct kvc_mpool_config cfg = { .block_size = 3000, .pool_size = 6000 };
	struct kvc_mpool *p = NULL;

	TAP_EXPECT_EQ(kvc_mpool_create(&cfg, &p), -EINVAL);
	cfg.block_size = BS;
	cfg.pool_size = BS + 1;
	TAP_EXPECT_EQ(kvc_mpool_create(&cfg, &p), -EINVAL);
	cfg.pool_size = 0;
	TAP_EXPECT_EQ(kvc_mpool_create(&cfg, &p), -EINVAL);
	/* Huge pages required, but the pool is not whole huge pages. */
	cfg.pool_size = BS * NR;
	cfg.hugetlb = 1;
	TAP_EXPECT_EQ(kvc_mpool_create(&cfg, &p), -EINVAL);
	p = pool();
	TAP_CHECK(kvc_mpool_nr_blocks(p) == NR);
	TAP_CHECK(kvc_mpool_block_size(p) == BS);
	TAP_CHECK(kvc_mpool_nr_free(p) == NR);
	TAP_CHECK(!kvc_mpool_hugetlb(p));	/* 512 KiB: not whole huge pages */
	TAP_CHECK(kvc_mpool_fd(p) >= 0);
	kvc_mpool_destroy(p);
}

static void lifecycle_and_errors_match_the_kernel(void)
{
	struct kvc_mpool *p = pool();
	struct kvcache_handle h[NR + 1], stale;
	uint32_t ns = 0;

	TAP_EXPECT_EQ(kvc_mpool_alloc(p, 0, 5, 0, h), -EINVAL);
	TAP_CHECK(kvc_mpool_alloc(p, KVC_MPOOL_MAX_CLIENTS, 5, 1, h) == -EINVAL);
	TAP_EXPECT_EQ(kvc_mpool_alloc(p, 0, 5, NR + 1, h), -ENOSPC);
	TAP_CHECK(kvc_mpool_nr_free(p) == NR);	/* all or nothing */
	TAP_CHECK(kvc_mpool_alloc(p, 1, 5, 2, h) == 0);
	TAP_CHECK(h[0].index != h[1].index);

	/* Seal: owner only, once, bounded length. */
	TAP_EXPECT_EQ(kvc_mpool_seal(p, 2, h[0], 10, key), -EPERM);
	TAP_EXPECT_EQ(kvc_mpool_seal(p, 1, h[0], 0, key), -EINVAL);
	TAP_EXPECT_EQ(kvc_mpool_seal(p, 1, h[0], BS + 1, key), -EINVAL);
	TAP_CHECK(kvc_mpool_pin(p, 1, h[0]) == -EBUSY);	/* not sealed */
	TAP_EXPECT_EQ(kvc_mpool_evict(p, h[0], &ns), -EBUSY);
	TAP_CHECK(kvc_mpool_seal(p, 1, h[0], 10, key) == 0);
	TAP_EXPECT_EQ(kvc_mpool_seal(p, 1, h[0], 10, key), -EINVAL);

	/* Pins per client; evict waits for every one. */
	TAP_CHECK(kvc_mpool_pin(p, 2, h[0]) == 0);
	TAP_CHECK(kvc_mpool_pin(p, 3, h[0]) == 0);
	TAP_EXPECT_EQ(kvc_mpool_unpin(p, 4, h[0]), -EINVAL);
	TAP_EXPECT_EQ(kvc_mpool_evict(p, h[0], &ns), -EBUSY);
	TAP_CHECK(kvc_mpool_unpin(p, 2, h[0]) == 0);
	TAP_EXPECT_EQ(kvc_mpool_unpin(p, 2, h[0]), -EINVAL);
	TAP_EXPECT_EQ(kvc_mpool_evict(p, h[0], &ns), -EBUSY);
	TAP_CHECK(kvc_mpool_unpin(p, 3, h[0]) == 0);
	TAP_CHECK(kvc_mpool_evict(p, h[0], &ns) == 0);
	TAP_CHECK(ns == 5);

	/* The old handle is stale now, even once the block is reused. */
	stale = h[0];
	TAP_EXPECT_EQ(kvc_mpool_pin(p, 2, stale), -ESTALE);
	TAP_CHECK(kvc_mpool_zero_ahead(p, 1) == 1);	/* on top again */
	TAP_CHECK(kvc_mpool_alloc(p, 1, 5, 1, &h[2]) == 0);
	TAP_CHECK(h[2].index == stale.index && h[2].gen != stale.gen);
	TAP_EXPECT_EQ(kvc_mpool_seal(p, 1, stale, 10, key), -ESTALE);
	stale.index = NR;
	TAP_EXPECT_EQ(kvc_mpool_evict(p, stale, &ns), -EINVAL);
	kvc_mpool_destroy(p);
}

/* Is block idx of the mapping m all zero? */
static bool zero_block(const uint8_t *m, uint32_t idx)
{
	for (size_t i = 0; i < BS; i++)
		if (m[(size_t)idx * BS + i])
			return false;
	return true;
}

/* A fresh block through one life: written with @fill, sealed, evicted. */
static void one_life(struct kvc_mpool *p, uint8_t *m, uint8_t fill,
		     struct kvcache_handle *h)
{
	uint32_t ns;

	TAP_CHECK(kvc_mpool_alloc(p, 0, 1, 1, h) == 0);
	memset(m + (size_t)h->index * BS, fill, BS);
	TAP_CHECK(kvc_mpool_seal(p, 0, *h, BS, key) == 0);
	TAP_CHECK(kvc_mpool_evict(p, *h, &ns) == 0);
}

/*
 * A block handed to a writer is zero, whichever way it got there: zeroed
 * ahead of time (kvc_mpool_zero_ahead(), the daemon's tick) or, when no
 * clean block is left, by ALLOC itself. Clean blocks go first, so ALLOC
 * zeroes only when it must; dirty ones count as free all the same.
 */
static void blocks_come_back_zeroed(void)
{
	struct kvc_mpool *p = pool();
	struct kvcache_handle h, again, rest[NR];
	uint8_t *m;

	m = mmap(NULL, BS * NR, PROT_READ | PROT_WRITE, MAP_SHARED,
		 kvc_mpool_fd(p), 0);
	TAP_ASSERT_TRUE(m != MAP_FAILED);

	/* Zeroed ahead: the same block again, zero. */
	one_life(p, m, 0xa5, &h);
	TAP_CHECK(kvc_mpool_nr_free(p) == NR);
	TAP_CHECK(kvc_mpool_nr_dirty(p) == 1);
	TAP_CHECK(kvc_mpool_zero_ahead(p, 4) == 1);
	TAP_CHECK(kvc_mpool_nr_dirty(p) == 0);
	TAP_CHECK(zero_block(m, h.index));
	TAP_CHECK(kvc_mpool_alloc(p, 1, 1, 1, &again) == 0);
	TAP_CHECK(again.index == h.index && zero_block(m, again.index));
	kvc_mpool_release_client(p, 1);

	/* Not zeroed ahead: the clean blocks go first, then ALLOC zeroes. */
	TAP_CHECK(kvc_mpool_zero_ahead(p, NR) == 1);	/* the released one */
	one_life(p, m, 0x5a, &h);
	TAP_CHECK(kvc_mpool_alloc(p, 1, 1, NR - 1, rest) == 0);
	for (uint32_t i = 0; i < NR - 1; i++)
		TAP_CHECK(rest[i].index != h.index &&
			  zero_block(m, rest[i].index));
	TAP_CHECK(kvc_mpool_nr_free(p) == 1 && kvc_mpool_nr_dirty(p) == 1);
	TAP_CHECK(kvc_mpool_alloc(p, 1, 1, 1, &again) == 0);
	TAP_CHECK(again.index == h.index && zero_block(m, again.index));
	TAP_CHECK(kvc_mpool_nr_free(p) == 0);
	TAP_CHECK(kvc_mpool_alloc(p, 1, 1, 1, &again) == -ENOSPC);
	munmap(m, BS * NR);
	kvc_mpool_destroy(p);
}

/*
 * mlock: blocks are zeroed in place (a punched hole would free locked
 * pages and the writer would fault in new, unlocked ones): a reused block
 * is zero and its pages stayed resident. (Whether mlock itself took is
 * not checked here: ASan turns mlock into a no-op.)
 */
static bool resident(const uint8_t *addr, size_t len)
{
	unsigned char vec[BS / 4096];

	if (mincore((void *)addr, len, vec))
		return false;
	for (size_t i = 0; i < len / 4096; i++)
		if (!(vec[i] & 1))
			return false;
	return true;
}

static void a_locked_pool_zeroes_in_place(void)
{
	struct kvc_mpool_config cfg = {
		.block_size = BS, .pool_size = BS * NR, .hugetlb = 0,
		.mlock = true,
	};
	struct kvcache_handle h, again;
	struct kvc_mpool *p = NULL;
	uint8_t *m, *blk;
	uint32_t ns;

	/* 512 KiB fits the default RLIMIT_MEMLOCK (8 MiB) even unprivileged. */
	TAP_ASSERT_EQ(kvc_mpool_create(&cfg, &p), 0);
	TAP_CHECK(kvc_mpool_locked(p));
	m = mmap(NULL, BS * NR, PROT_READ | PROT_WRITE, MAP_SHARED,
		 kvc_mpool_fd(p), 0);
	TAP_CHECK(m != MAP_FAILED);
	if (m != MAP_FAILED) {
		TAP_CHECK(kvc_mpool_alloc(p, 0, 1, 1, &h) == 0);
		blk = m + (size_t)h.index * BS;
		memset(blk, 0x5a, BS);
		TAP_CHECK(kvc_mpool_seal(p, 0, h, BS, key) == 0);
		TAP_CHECK(kvc_mpool_evict(p, h, &ns) == 0);
		TAP_CHECK(kvc_mpool_zero_ahead(p, NR) == 1);
		TAP_CHECK(kvc_mpool_alloc(p, 1, 1, 1, &again) == 0);
		TAP_CHECK(again.index == h.index);
		/* Zeroed without giving the pages back. */
		TAP_CHECK(resident(blk, BS));
		for (size_t i = 0; i < BS; i++)
			if (blk[i]) {
				TAP_CHECK(!"a reused locked block is zeroed");
				break;
			}
		munmap(m, BS * NR);
	}
	kvc_mpool_destroy(p);
}

/*
 * Huge pages under blocks smaller than one: a freed block is zeroed by
 * memset, never by a hole (which, in part of a huge page, frees nothing
 * and before Linux 6.3 zeroes nothing either), and its neighbours on
 * the same huge page keep their bytes. Locked or not. Needs two free
 * huge pages (scripts/check reserves a few); skipped without them.
 */
static void small_blocks_on_huge_pages(void)
{
	for (int locked = 0; locked < 2; locked++) {
		struct kvc_mpool_config cfg = {
			.block_size = BS, .pool_size = 4ull << 20,
			.hugetlb = 1, .mlock = locked,
		};
		const uint32_t nr = (uint32_t)(cfg.pool_size / BS);
		struct kvcache_handle h[64], again;
		struct kvc_mpool *p = NULL;
		uint8_t *m;
		uint32_t ns;
		int ret;

		ret = kvc_mpool_create(&cfg, &p);
		if (ret == -ENOMEM) {
			tap_skip("no free huge pages on this host");
			return;
		}
		TAP_ASSERT_EQ(ret, 0);
		TAP_CHECK(kvc_mpool_hugetlb(p));
		m = mmap(NULL, cfg.pool_size, PROT_READ | PROT_WRITE,
			 MAP_SHARED, kvc_mpool_fd(p), 0);
		TAP_ASSERT_TRUE(m != MAP_FAILED);
		/* Every block written and sealed, each with its own byte. */
		TAP_CHECK(kvc_mpool_alloc(p, 0, 1, nr, h) == 0);
		for (uint32_t i = 0; i < nr; i++) {
			memset(m + (size_t)h[i].index * BS, (int)(i + 1), BS);
			TAP_CHECK(kvc_mpool_seal(p, 0, h[i], BS, key) == 0);
		}
		/* Block 5 freed, zeroed ahead; block 9 freed, zeroed by ALLOC. */
		TAP_CHECK(kvc_mpool_evict(p, h[5], &ns) == 0);
		TAP_CHECK(kvc_mpool_zero_ahead(p, nr) == 1);
		TAP_CHECK(kvc_mpool_evict(p, h[9], &ns) == 0);
		for (int k = 0; k < 2; k++) {
			TAP_CHECK(kvc_mpool_alloc(p, 1, 2, 1, &again) == 0);
			TAP_CHECK(again.index == h[5].index ||
				  again.index == h[9].index);
		}
		for (uint32_t i = 0; i < nr; i++) {
			const uint8_t *b = m + (size_t)h[i].index * BS;
			uint8_t want = i == 5 || i == 9 ? 0 : (uint8_t)(i + 1);
			size_t j = 0;

			while (j < BS && b[j] == want)
				j++;
			if (j < BS) {
				tap_fail(__FILE__, __LINE__,
					 "%s pool, block %u: byte %zu is %u, not %u",
					 locked ? "locked" : "unlocked", i, j,
					 b[j], want);
				break;
			}
		}
		munmap(m, cfg.pool_size);
		kvc_mpool_destroy(p);
	}
}

static void closing_a_client_releases_what_it_held(void)
{
	struct kvc_mpool *p = pool();
	struct kvcache_handle mine[2], theirs;
	struct kvcache_block_info info[NR];
	uint32_t next, ns;

	TAP_CHECK(kvc_mpool_alloc(p, 7, 9, 2, mine) == 0);
	TAP_CHECK(kvc_mpool_alloc(p, 8, 9, 1, &theirs) == 0);
	TAP_CHECK(kvc_mpool_seal(p, 8, theirs, 1, key) == 0);
	TAP_CHECK(kvc_mpool_pin(p, 7, theirs) == 0);
	TAP_CHECK(kvc_mpool_pin(p, 7, theirs) == 0);
	TAP_CHECK(kvc_mpool_seal(p, 7, mine[0], 1, key) == 0);

	kvc_mpool_release_client(p, 7);
	/* Its unsealed block is gone, its sealed one stays, its pins drop. */
	TAP_EXPECT_EQ(kvc_mpool_seal(p, 7, mine[1], 1, key), -ESTALE);
	TAP_CHECK(kvc_mpool_nr_free(p) == NR - 2);
	TAP_CHECK(kvc_mpool_evict(p, theirs, &ns) == 0);
	TAP_CHECK(kvc_mpool_query(p, 0, KVCACHE_NS_ANY, info, NR, &next) == 1);
	TAP_CHECK(next == NR);
	TAP_CHECK(info[0].handle.index == mine[0].index && info[0].ns_id == 9);
	TAP_CHECK(info[0].payload_len == 1 && info[0].key[2] == 3);
	kvc_mpool_destroy(p);
}

/*
 * A discard gives back one unsealed block of its owner, dirty (a failed
 * read may have left anything in it), and leaves the owner's other
 * writable blocks alone: promotions in flight beside it.
 */
static void discard_gives_back_one_block(void)
{
	struct kvc_mpool *p = pool();
	struct kvcache_handle mine[2], theirs;
	uint32_t ns;

	TAP_CHECK(kvc_mpool_alloc(p, KVC_MPOOL_SELF, 3, 2, mine) == 0);
	TAP_CHECK(kvc_mpool_alloc(p, 4, 3, 1, &theirs) == 0);
	TAP_EXPECT_EQ(kvc_mpool_discard(p, KVC_MPOOL_SELF, theirs), -EPERM);
	TAP_CHECK(kvc_mpool_discard(p, KVC_MPOOL_SELF, mine[0]) == 0);
	TAP_CHECK(kvc_mpool_nr_dirty(p) == 1);
	TAP_EXPECT_EQ(kvc_mpool_discard(p, KVC_MPOOL_SELF, mine[0]), -ESTALE);
	TAP_EXPECT_EQ(kvc_mpool_seal(p, KVC_MPOOL_SELF, mine[0], 1, key),
		      -ESTALE);
	/* The other one is still ours to seal; sealed, no discard. */
	TAP_CHECK(kvc_mpool_seal(p, KVC_MPOOL_SELF, mine[1], 1, key) == 0);
	TAP_EXPECT_EQ(kvc_mpool_discard(p, KVC_MPOOL_SELF, mine[1]), -EBUSY);
	mine[1].index = NR;
	TAP_EXPECT_EQ(kvc_mpool_discard(p, KVC_MPOOL_SELF, mine[1]), -EINVAL);
	TAP_CHECK(kvc_mpool_nr_free(p) == NR - 2);
	TAP_CHECK(kvc_mpool_seal(p, 4, theirs, 1, key) == 0);
	TAP_CHECK(kvc_mpool_evict(p, theirs, &ns) == 0 && ns == 3);
	kvc_mpool_destroy(p);
}

static void query_filters_and_pages(void)
{
	struct kvc_mpool *p = pool();
	struct kvcache_block_info info[NR];
	struct kvcache_handle h[NR];
	uint32_t next, n;

	TAP_CHECK(kvc_mpool_alloc(p, 0, 1, NR, h) == 0);
	for (int i = 0; i < NR; i += 2)
		TAP_CHECK(kvc_mpool_seal(p, 0, h[i], 1, key) == 0);
	/* Half the blocks sealed; ask two at a time. */
	n = kvc_mpool_query(p, 0, 1, info, 2, &next);
	TAP_CHECK(n == 2);
	TAP_CHECK(info[1].handle.index == h[2].index);
	TAP_CHECK(kvc_mpool_query(p, next, 1, info, NR, &next) == NR / 2 - 2);
	TAP_CHECK(next == NR);
	TAP_CHECK(kvc_mpool_query(p, 0, 2, info, NR, &next) == 0);
	kvc_mpool_destroy(p);
}

int main(void)
{
	TAP_RUN(geometry_is_checked);
	TAP_RUN(lifecycle_and_errors_match_the_kernel);
	TAP_RUN(blocks_come_back_zeroed);
	TAP_RUN(a_locked_pool_zeroes_in_place);
	TAP_RUN(small_blocks_on_huge_pages);
	TAP_RUN(closing_a_client_releases_what_it_held);
	TAP_RUN(discard_gives_back_one_block);
	TAP_RUN(query_filters_and_pages);
	return tap_done();
}
