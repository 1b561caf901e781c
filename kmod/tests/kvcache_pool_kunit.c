// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for the block pool's state machine (kvcache_pool.c): every
 * transition and its refusals, refusals that reveal no state or
 * generation, generation wrap-around, all-or-nothing allocation, zeroing,
 * namespace permission bits, bounded quarantine reaping, pin racing
 * evict on two threads, and the unmapping of pool views before a free. Part of kvcache_kunit.ko.
 */
#include <kunit/test.h>
#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/fs.h>
#include <linux/highmem.h>
#include <linux/kthread.h>
#include <linux/mm.h>
#include <linux/sizes.h>

#include "kvcache.h"
#include "kvcache_pool.h"

#define NR_TEST_BLOCKS	8

static const u8 test_key[KVCACHE_KEY_SIZE] = { 0xaa, 0xbb };
static int owner_a, owner_b;	/* their addresses are the owners */

static struct kvc_pool *test_pool(struct kunit *test, u64 block_size)
{
	const struct kvc_geometry geo = {
		.block_size = block_size,
		.pool_size = block_size * NR_TEST_BLOCKS,
	};
	struct kvc_pool *pool = kvc_pool_create(&geo);

	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, pool);
	return pool;
}

/*
 * Free every block the test left behind, then the pool. Every test ends
 * with it (an assertion that fails before leaks the pool; the failure is
 * reported either way).
 */
static void drain(struct kvc_pool *pool)
{
	struct kvcache_handle h;
	u32 i, ns;

	for (i = 0; i < pool->nr_blocks; i++) {
		struct kvc_block *b = &pool->blocks[i];

		h.index = i;
		h.gen = b->gen;
		if (b->pins)
			kvc_block_unpin_n(pool, i, b->pins);
		if (b->state == KVC_BLOCK_WRITABLE)
			kvc_block_discard(pool, i, b->owner, &ns);
		else if (b->state == KVC_BLOCK_SEALED &&
			 kvc_block_evict(pool, h, &ns) == KVC_EVICT_ZAP)
			kvc_block_evict(pool, h, &ns);
	}
	kvc_pool_destroy(pool);
}

/*
 * A block a pool view maps is not freed by the evict that finds it
 * unpinned: that evict asks for the views to be unmapped first, and
 * forgets the mark only then, so the next evict frees it. A pin taken
 * meanwhile (for a new fault) makes the block busy and keeps the mark.
 */
static void viewed_blocks_are_unmapped_before_free(struct kunit *test)
{
	struct kvc_pool *pool = test_pool(test, SZ_4K);
	struct kvcache_handle h;
	u32 ns = 0;

	KUNIT_ASSERT_EQ(test, kvc_pool_alloc(pool, 1, 7, &owner_a, &h), 0);
	KUNIT_ASSERT_EQ(test, kvc_block_seal(pool, h, &owner_a, 1, test_key,
					     false), 0);
	KUNIT_ASSERT_EQ(test, kvc_block_pin(pool, h, NULL, NULL), 0);
	KUNIT_EXPECT_TRUE(test, kvc_block_mark_viewed(pool, h.index));
	/* Pinned: busy, and the mark stays for the evict after the unpin. */
	KUNIT_EXPECT_EQ(test, kvc_block_evict(pool, h, &ns), -EBUSY);
	KUNIT_EXPECT_TRUE(test, pool->blocks[h.index].viewed);
	KUNIT_EXPECT_EQ(test, kvc_block_unpin(pool, h), 0);
	KUNIT_EXPECT_EQ(test, kvc_block_evict(pool, h, &ns), KVC_EVICT_ZAP);
	KUNIT_EXPECT_FALSE(test, pool->blocks[h.index].viewed);
	KUNIT_EXPECT_EQ(test, pool->blocks[h.index].state, KVC_BLOCK_SEALED);

	/* A fault between the zap and the retry: busy, marked again. */
	KUNIT_ASSERT_EQ(test, kvc_block_pin(pool, h, NULL, NULL), 0);
	KUNIT_EXPECT_TRUE(test, kvc_block_mark_viewed(pool, h.index));
	KUNIT_EXPECT_EQ(test, kvc_block_evict(pool, h, &ns), -EBUSY);
	KUNIT_EXPECT_EQ(test, kvc_block_unpin(pool, h), 0);
	KUNIT_EXPECT_EQ(test, kvc_block_evict(pool, h, &ns), KVC_EVICT_ZAP);
	KUNIT_EXPECT_EQ(test, kvc_block_evict(pool, h, &ns), 0);
	KUNIT_EXPECT_EQ(test, ns, 7U);
	KUNIT_EXPECT_EQ(test, pool->blocks[h.index].state, KVC_BLOCK_FREE);
	/* A free block is not marked, and nothing marks it. */
	KUNIT_EXPECT_FALSE(test, pool->blocks[h.index].viewed);
	KUNIT_EXPECT_FALSE(test, kvc_block_mark_viewed(pool, pool->nr_blocks));
	drain(pool);
}

static void transitions_and_refusals(struct kunit *test)
{
	struct kvc_pool *pool = test_pool(test, SZ_4K);
	struct kvcache_handle h[2];
	u32 ns = 0;

	KUNIT_EXPECT_EQ(test, kvc_pool_nr_free(pool), NR_TEST_BLOCKS);
	KUNIT_ASSERT_EQ(test, kvc_pool_alloc(pool, 2, 7, &owner_a, h), 0);
	KUNIT_EXPECT_EQ(test, kvc_pool_nr_free(pool), NR_TEST_BLOCKS - 2);
	KUNIT_EXPECT_EQ(test, atomic_read(&pool->nr_writable), 2);
	KUNIT_EXPECT_EQ(test, pool->blocks[h[0].index].state,
			KVC_BLOCK_WRITABLE);

	/* WRITABLE: only its owner seals, not while mapped, not empty. */
	KUNIT_EXPECT_EQ(test, kvc_block_seal(pool, h[0], &owner_b, 1, test_key, false),
			-EPERM);
	KUNIT_EXPECT_EQ(test, kvc_block_seal(pool, h[0], &owner_a, 0, test_key, false),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, kvc_block_seal(pool, h[0], &owner_a, SZ_4K + 1,
					     test_key, false), -EINVAL);
	KUNIT_EXPECT_EQ(test, kvc_block_map(pool, h[0].index, &owner_a, true), 1);
	KUNIT_EXPECT_EQ(test, kvc_block_map(pool, h[0].index, &owner_b, false),
			-EACCES);
	KUNIT_EXPECT_EQ(test, kvc_block_seal(pool, h[0], &owner_a, 1, test_key, false),
			-EBUSY);
	kvc_block_unmap(pool, h[0].index, true);
	/* Nobody pins or evicts a block that is still being written. */
	KUNIT_EXPECT_EQ(test, kvc_block_pin(pool, h[0], NULL, NULL), -EBUSY);
	KUNIT_EXPECT_EQ(test, kvc_block_evict(pool, h[0], &ns), -EBUSY);

	/* WRITABLE -> SEALED */
	KUNIT_EXPECT_EQ(test, kvc_block_seal(pool, h[0], &owner_a, 100,
					     test_key, false), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&pool->nr_sealed), 1);
	/* Not a writable block of the caller any more: EPERM, as for others. */
	KUNIT_EXPECT_EQ(test, kvc_block_seal(pool, h[0], &owner_a, 100,
					     test_key, false), -EPERM);
	KUNIT_EXPECT_EQ(test, kvc_block_map(pool, h[0].index, &owner_a, true),
			-EACCES);

	/* SEALED: pins hold it against evict. */
	KUNIT_EXPECT_EQ(test, kvc_block_pin(pool, h[0], NULL, NULL), 0);
	KUNIT_EXPECT_EQ(test, kvc_block_pin(pool, h[0], NULL, NULL), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&pool->nr_pinned), 1);
	KUNIT_EXPECT_EQ(test, kvc_block_evict(pool, h[0], &ns), -EBUSY);
	KUNIT_EXPECT_EQ(test, kvc_block_unpin(pool, h[0]), 0);
	KUNIT_EXPECT_EQ(test, kvc_block_evict(pool, h[0], &ns), -EBUSY);
	KUNIT_EXPECT_EQ(test, kvc_block_unpin(pool, h[0]), 0);
	KUNIT_EXPECT_EQ(test, kvc_block_unpin(pool, h[0]), -EINVAL);
	KUNIT_EXPECT_EQ(test, atomic_read(&pool->nr_pinned), 0);

	/* A read-only mapping is a pin too. */
	KUNIT_EXPECT_EQ(test, kvc_block_map(pool, h[0].index, &owner_b, false), 0);
	KUNIT_EXPECT_EQ(test, kvc_block_evict(pool, h[0], &ns), -EBUSY);
	kvc_block_unmap(pool, h[0].index, false);

	/* SEALED -> FREE, and the handle goes stale. */
	KUNIT_EXPECT_EQ(test, kvc_block_evict(pool, h[0], &ns), 0);
	KUNIT_EXPECT_EQ(test, ns, 7U);
	KUNIT_EXPECT_EQ(test, atomic_read(&pool->nr_sealed), 0);
	KUNIT_EXPECT_EQ(test, kvc_block_pin(pool, h[0], NULL, NULL), -ESTALE);
	KUNIT_EXPECT_EQ(test, kvc_block_evict(pool, h[0], &ns), -ESTALE);
	KUNIT_EXPECT_EQ(test, kvc_block_seal(pool, h[0], &owner_a, 1, test_key, false),
			-EPERM);

	/* WRITABLE -> FREE when the writer goes away. */
	KUNIT_EXPECT_EQ(test, kvc_block_discard(pool, h[1].index, &owner_b, &ns),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, kvc_block_discard(pool, h[1].index, &owner_a, &ns),
			0);
	KUNIT_EXPECT_EQ(test, kvc_block_pin(pool, h[1], NULL, NULL), -ESTALE);
	KUNIT_EXPECT_EQ(test, atomic_read(&pool->nr_writable), 0);
	KUNIT_EXPECT_EQ(test, kvc_pool_nr_free(pool), NR_TEST_BLOCKS);
	KUNIT_EXPECT_TRUE(test, kvc_pool_idle(pool));

	/* Out-of-range indexes. */
	h[0].index = NR_TEST_BLOCKS;
	KUNIT_EXPECT_EQ(test, kvc_block_pin(pool, h[0], NULL, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kvc_block_evict(pool, h[0], &ns), -EINVAL);
	KUNIT_EXPECT_EQ(test, kvc_block_map(pool, U32_MAX, &owner_a, false),
			-EINVAL);
	drain(pool);
}

static void generation_wraps_around(struct kunit *test)
{
	struct kvc_pool *pool = test_pool(test, SZ_4K);
	struct kvcache_handle h, old;
	u32 ns;

	/* The next block out is index 0: give it the last generation. */
	pool->blocks[0].gen = U32_MAX;
	KUNIT_ASSERT_EQ(test, kvc_pool_alloc(pool, 1, 1, &owner_a, &h), 0);
	KUNIT_ASSERT_EQ(test, h.index, 0U);
	KUNIT_EXPECT_EQ(test, h.gen, U32_MAX);
	KUNIT_ASSERT_EQ(test, kvc_block_seal(pool, h, &owner_a, 1, test_key, false), 0);
	KUNIT_ASSERT_EQ(test, kvc_block_evict(pool, h, &ns), 0);
	old = h;

	KUNIT_ASSERT_EQ(test, kvc_pool_alloc(pool, 1, 1, &owner_a, &h), 0);
	KUNIT_EXPECT_EQ(test, h.index, 0U);
	KUNIT_EXPECT_EQ(test, h.gen, 0U);
	KUNIT_ASSERT_EQ(test, kvc_block_seal(pool, h, &owner_a, 1, test_key, false), 0);
	KUNIT_EXPECT_EQ(test, kvc_block_pin(pool, old, NULL, NULL), -ESTALE);
	KUNIT_EXPECT_EQ(test, kvc_block_pin(pool, h, NULL, NULL), 0);
	drain(pool);
}

static void alloc_is_all_or_nothing(struct kunit *test)
{
	struct kvc_pool *pool = test_pool(test, SZ_4K);
	struct kvcache_handle h[NR_TEST_BLOCKS + 1];

	KUNIT_EXPECT_EQ(test, kvc_pool_alloc(pool, 0, 1, &owner_a, h), -EINVAL);
	KUNIT_EXPECT_EQ(test, kvc_pool_alloc(pool, KVCACHE_MAX_BATCH + 1, 1,
					     &owner_a, h), -EINVAL);
	KUNIT_EXPECT_EQ(test, kvc_pool_alloc(pool, NR_TEST_BLOCKS + 1, 1,
					     &owner_a, h), -ENOSPC);
	KUNIT_EXPECT_EQ(test, kvc_pool_nr_free(pool), NR_TEST_BLOCKS);
	KUNIT_EXPECT_EQ(test, kvc_pool_alloc(pool, NR_TEST_BLOCKS, 1, &owner_a,
					     h), 0);
	KUNIT_EXPECT_EQ(test, kvc_pool_nr_free(pool), 0U);
	KUNIT_EXPECT_EQ(test, kvc_pool_alloc(pool, 1, 1, &owner_a, h), -ENOSPC);
	drain(pool);
}

static void blocks_come_back_zeroed(struct kunit *test)
{
	struct kvc_pool *pool = test_pool(test, SZ_16K);
	struct kvcache_handle h;
	struct page **pages;
	u32 ns, i;
	u8 *p;

	KUNIT_EXPECT_EQ(test, pool->pages_per_block, SZ_16K / PAGE_SIZE);
	KUNIT_ASSERT_EQ(test, kvc_pool_alloc(pool, 1, 1, &owner_a, &h), 0);
	pages = kvc_block_pages(pool, h.index);
	for (i = 0; i < pool->pages_per_block; i++)
		memset(page_address(pages[i]), 0x5a, PAGE_SIZE);
	KUNIT_ASSERT_EQ(test, kvc_block_discard(pool, h.index, &owner_a, &ns), 0);

	KUNIT_ASSERT_EQ(test, kvc_pool_alloc(pool, 1, 1, &owner_b, &h), 0);
	pages = kvc_block_pages(pool, h.index);
	for (i = 0; i < pool->pages_per_block; i++) {
		p = page_address(pages[i]);
		KUNIT_EXPECT_TRUE(test, !memchr_inv(p, 0, PAGE_SIZE));
	}
	drain(pool);
}

/*
 * KVCACHE_IOC_DISCARD: a writer gives one unsealed block back and keeps
 * its others. Only its own, current, unmapped writable block; what it
 * wrote is zeroed before the next writer gets the block.
 */
static void give_back_frees_one_writable_block(struct kunit *test)
{
	struct kvc_pool *pool = test_pool(test, SZ_4K);
	struct kvcache_handle h[2], stale, again;
	u32 ns = 0;
	u8 *p;

	KUNIT_ASSERT_EQ(test, kvc_pool_alloc(pool, 2, 3, &owner_a, h), 0);
	p = page_address(kvc_block_pages(pool, h[0].index)[0]);
	memset(p, 0x5a, PAGE_SIZE);

	KUNIT_EXPECT_EQ(test, kvc_block_give_back(pool, h[0], &owner_b, &ns),
			-EPERM);
	stale = h[0];
	stale.gen++;
	KUNIT_EXPECT_EQ(test, kvc_block_give_back(pool, stale, &owner_a, &ns),
			-ESTALE);
	KUNIT_EXPECT_EQ(test, kvc_block_map(pool, h[0].index, &owner_a, true),
			1);
	KUNIT_EXPECT_EQ(test, kvc_block_give_back(pool, h[0], &owner_a, &ns),
			-EBUSY);
	kvc_block_unmap(pool, h[0].index, true);
	stale.index = NR_TEST_BLOCKS;
	KUNIT_EXPECT_EQ(test, kvc_block_give_back(pool, stale, &owner_a, &ns),
			-EINVAL);

	KUNIT_EXPECT_EQ(test, kvc_block_give_back(pool, h[0], &owner_a, &ns), 0);
	KUNIT_EXPECT_EQ(test, ns, 3U);
	KUNIT_EXPECT_EQ(test, atomic_read(&pool->nr_writable), 1);
	/* Gone: its handle is stale, and not ours to give back twice. */
	KUNIT_EXPECT_EQ(test, kvc_block_give_back(pool, h[0], &owner_a, &ns),
			-EPERM);
	KUNIT_EXPECT_EQ(test, kvc_block_seal(pool, h[0], &owner_a, 1, test_key,
					     false), -EPERM);
	/* The other one is still the writer's; sealed, it is not given back. */
	KUNIT_EXPECT_EQ(test, kvc_block_seal(pool, h[1], &owner_a, 1, test_key,
					     false), 0);
	KUNIT_EXPECT_EQ(test, kvc_block_give_back(pool, h[1], &owner_a, &ns),
			-EPERM);

	/* The next writer of that block finds zeroes. */
	while (!kvc_pool_alloc(pool, 1, 4, &owner_b, &again) &&
	       again.index != h[0].index)
		;
	KUNIT_EXPECT_EQ(test, again.index, h[0].index);
	KUNIT_EXPECT_TRUE(test, !memchr_inv(p, 0, PAGE_SIZE));
	drain(pool);
}

static void referenced_pages_block_seal_evict_and_reuse(struct kunit *test)
{
	struct kvc_pool *pool = test_pool(test, SZ_4K);
	struct kvcache_handle h, h2;
	struct page *page;
	u32 ns;

	KUNIT_ASSERT_EQ(test, kvc_pool_alloc(pool, 1, 1, &owner_a, &h), 0);
	page = kvc_block_pages(pool, h.index)[0];

	/* Someone else (a pipe, I/O in flight) holds a page: no seal. */
	get_page(page);
	KUNIT_EXPECT_EQ(test, kvc_block_seal(pool, h, &owner_a, 1, test_key, false),
			-EBUSY);
	put_page(page);
	KUNIT_ASSERT_EQ(test, kvc_block_seal(pool, h, &owner_a, 1, test_key, false), 0);

	/* ... no evict either. */
	get_page(page);
	KUNIT_EXPECT_EQ(test, kvc_block_evict(pool, h, &ns), -EBUSY);
	put_page(page);
	KUNIT_ASSERT_EQ(test, kvc_block_evict(pool, h, &ns), 0);

	/* A writer gone with a page still referenced: quarantined. */
	KUNIT_ASSERT_EQ(test, kvc_pool_alloc(pool, 1, 1, &owner_a, &h), 0);
	page = kvc_block_pages(pool, h.index)[0];
	get_page(page);
	KUNIT_ASSERT_EQ(test, kvc_block_discard(pool, h.index, &owner_a, &ns), 0);
	KUNIT_EXPECT_EQ(test, kvc_pool_nr_quarantined(pool), 1U);
	KUNIT_EXPECT_EQ(test, kvc_pool_nr_free(pool), NR_TEST_BLOCKS - 1);
	KUNIT_EXPECT_FALSE(test, kvc_pool_idle(pool));
	/* Every other block can be handed out, the quarantined one cannot. */
	KUNIT_EXPECT_EQ(test, kvc_pool_alloc(pool, NR_TEST_BLOCKS, 1, &owner_b,
					     &h2), -ENOSPC);
	put_page(page);
	/* Once the reference is gone, the next allocation reaps it. */
	KUNIT_ASSERT_EQ(test, kvc_pool_alloc(pool, 1, 1, &owner_b, &h2), 0);
	KUNIT_EXPECT_EQ(test, kvc_pool_nr_quarantined(pool), 0U);
	KUNIT_EXPECT_EQ(test, h2.index, h.index);
	KUNIT_EXPECT_EQ(test, h2.gen, h.gen + 1);
	drain(pool);
}

static bool deny_ns_3(u32 ns_id, void *arg)
{
	return ns_id != 3;
}

static void pin_checks_namespace_and_saturation(struct kunit *test)
{
	struct kvc_pool *pool = test_pool(test, SZ_4K);
	struct kvcache_handle h[2];

	KUNIT_ASSERT_EQ(test, kvc_pool_alloc(pool, 1, 3, &owner_a, &h[0]), 0);
	KUNIT_ASSERT_EQ(test, kvc_pool_alloc(pool, 1, 4, &owner_a, &h[1]), 0);
	KUNIT_ASSERT_EQ(test, kvc_block_seal(pool, h[0], &owner_a, 1, test_key, false), 0);
	KUNIT_ASSERT_EQ(test, kvc_block_seal(pool, h[1], &owner_a, 1, test_key, false), 0);
	KUNIT_EXPECT_EQ(test, kvc_block_pin(pool, h[0], deny_ns_3, NULL), -EACCES);
	KUNIT_EXPECT_EQ(test, kvc_block_pin(pool, h[1], deny_ns_3, NULL), 0);

	pool->blocks[h[1].index].pins = U32_MAX;
	KUNIT_EXPECT_EQ(test, kvc_block_pin(pool, h[1], NULL, NULL), -EOVERFLOW);
	/* Mappings are counted apart from pins: saturated pins do not matter. */
	KUNIT_EXPECT_EQ(test, kvc_block_map(pool, h[1].index, &owner_a, false), 0);
	kvc_block_map_dup(pool, h[1].index, false);
	kvc_block_unmap(pool, h[1].index, false);
	kvc_block_unmap(pool, h[1].index, false);
	pool->blocks[h[1].index].pins = 1;
	pool->blocks[h[1].index].rmaps = U32_MAX;
	KUNIT_EXPECT_EQ(test, kvc_block_map(pool, h[1].index, &owner_a, false),
			-EOVERFLOW);
	pool->blocks[h[1].index].rmaps = 0;
	drain(pool);
}

static void namespace_mode_bits(struct kunit *test)
{
	/* Owner bits for the owner, group bits for the group, else other. */
	KUNIT_EXPECT_TRUE(test, kvc_ns_mode_allows(0700, true, false, MAY_READ));
	KUNIT_EXPECT_TRUE(test, kvc_ns_mode_allows(0700, true, true,
						   MAY_READ | MAY_WRITE));
	KUNIT_EXPECT_FALSE(test, kvc_ns_mode_allows(0700, false, true, MAY_READ));
	KUNIT_EXPECT_FALSE(test, kvc_ns_mode_allows(0700, false, false, MAY_READ));
	KUNIT_EXPECT_TRUE(test, kvc_ns_mode_allows(0640, false, true, MAY_READ));
	KUNIT_EXPECT_FALSE(test, kvc_ns_mode_allows(0640, false, true, MAY_WRITE));
	KUNIT_EXPECT_TRUE(test, kvc_ns_mode_allows(0604, false, false, MAY_READ));
	/* The owner is not helped by generous group or other bits. */
	KUNIT_EXPECT_FALSE(test, kvc_ns_mode_allows(0077, true, true, MAY_READ));
	KUNIT_EXPECT_FALSE(test, kvc_ns_mode_allows(0007, false, true, MAY_READ));
}

struct pin_racer {
	struct kvc_pool *pool;
	struct kvcache_handle h;
	struct completion done;
	int pinned;
	int violations;
};

/* Pin and unpin until the block is gone; a pin must never see it freed. */
static int pin_racer_fn(void *arg)
{
	struct pin_racer *r = arg;
	struct kvc_block *b = &r->pool->blocks[r->h.index];
	int ret;

	for (;;) {
		ret = kvc_block_pin(r->pool, r->h, NULL, NULL);
		if (ret == -ESTALE)
			break;
		if (ret)
			continue;
		r->pinned++;
		spin_lock(&b->lock);
		if (b->state != KVC_BLOCK_SEALED || b->gen != r->h.gen)
			r->violations++;
		spin_unlock(&b->lock);
		if (kvc_block_unpin(r->pool, r->h))
			r->violations++;
		cond_resched();
	}
	complete(&r->done);
	return 0;
}

static void pin_races_evict(struct kunit *test)
{
	struct kvc_pool *pool = test_pool(test, SZ_4K);
	struct task_struct *t;
	struct pin_racer r = { .pool = pool };
	int round, busy = 0;
	u32 ns;

	for (round = 0; round < 20; round++) {
		KUNIT_ASSERT_EQ(test, kvc_pool_alloc(pool, 1, 1, &owner_a, &r.h), 0);
		KUNIT_ASSERT_EQ(test, kvc_block_seal(pool, r.h, &owner_a, 1,
						     test_key, false), 0);
		init_completion(&r.done);
		t = kthread_run(pin_racer_fn, &r, "kvc-pin-racer");
		KUNIT_ASSERT_FALSE(test, IS_ERR(t));
		/* Let the racer get going, then evict until it works. */
		while (!READ_ONCE(r.pinned))
			cond_resched();
		while (kvc_block_evict(pool, r.h, &ns) == -EBUSY) {
			busy++;
			cond_resched();
		}
		wait_for_completion(&r.done);
		KUNIT_EXPECT_EQ(test, pool->blocks[r.h.index].pins, 0U);
	}
	KUNIT_EXPECT_EQ(test, r.violations, 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&pool->nr_pinned), 0);
	KUNIT_EXPECT_EQ(test, kvc_pool_nr_free(pool), NR_TEST_BLOCKS);
	kunit_info(test, "%d pins, evict refused %d times", r.pinned, busy);
	drain(pool);
}

static void big_blocks_span_runs(struct kunit *test)
{
	const struct kvc_geometry geo = {
		.block_size = SZ_4M, .pool_size = SZ_8M,
	};
	struct kvc_pool *pool = kvc_pool_create(&geo);
	unsigned long i;

	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, pool);
	KUNIT_EXPECT_EQ(test, pool->nr_blocks, 2U);
	KUNIT_EXPECT_EQ(test, pool->nr_pages, (unsigned long)SZ_8M / PAGE_SIZE);
	for (i = 0; i < pool->nr_pages; i++)
		KUNIT_ASSERT_NOT_NULL(test, pool->pages[i]);
	kunit_info(test, "%lu of 4 possible 2 MiB runs", pool->nr_huge_chunks);
	kvc_pool_destroy(pool);
}

/*
 * The transfer engine's view of a block: I/O page references make seal and
 * evict refuse, a sealed block is readable only when the caller says so,
 * and the range is checked.
 */
static void io_references_hold_the_block(struct kunit *test)
{
	struct kvc_pool *pool = test_pool(test, SZ_16K);
	struct kvcache_handle h;
	u32 ns;

	KUNIT_ASSERT_EQ(test, kvc_pool_alloc(pool, 1, 1, &owner_a, &h), 0);
	KUNIT_EXPECT_EQ(test, kvc_block_io_get(pool, h, &owner_b, false, 0,
					       SZ_4K), -EACCES);
	KUNIT_EXPECT_EQ(test, kvc_block_io_get(pool, h, &owner_a, false, 0,
					       0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kvc_block_io_get(pool, h, &owner_a, false,
					       SZ_8K, SZ_16K), -EINVAL);
	KUNIT_EXPECT_EQ(test, kvc_block_io_get(pool, h, &owner_a, false,
					       SZ_16K, 1), -EINVAL);

	/* Writing into the writer's block: seal waits for the I/O. */
	KUNIT_ASSERT_EQ(test, kvc_block_io_get(pool, h, &owner_a, false,
					       SZ_4K + 1, SZ_4K), 0);
	KUNIT_EXPECT_EQ(test, kvc_block_seal(pool, h, &owner_a, 1, test_key, false),
			-EBUSY);
	kvc_block_io_put(pool, h.index, SZ_4K + 1, SZ_4K);
	KUNIT_ASSERT_EQ(test, kvc_block_seal(pool, h, &owner_a, 1, test_key, false),
			0);

	/* Sealed: only readable, and evict waits for the I/O. */
	KUNIT_EXPECT_EQ(test, kvc_block_io_get(pool, h, &owner_a, false, 0,
					       SZ_16K), -EACCES);
	KUNIT_ASSERT_EQ(test, kvc_block_io_get(pool, h, &owner_b, true, 0,
					       SZ_16K), 0);
	KUNIT_EXPECT_EQ(test, kvc_block_evict(pool, h, &ns), -EBUSY);
	kvc_block_io_put(pool, h.index, 0, SZ_16K);
	KUNIT_ASSERT_EQ(test, kvc_block_evict(pool, h, &ns), 0);
	KUNIT_EXPECT_EQ(test, kvc_block_io_get(pool, h, &owner_a, true, 0,
					       SZ_4K), -ESTALE);
	/* Without a pin the answer never tells a live generation apart. */
	KUNIT_EXPECT_EQ(test, kvc_block_io_get(pool, h, &owner_b, false, 0,
					       SZ_4K), -EACCES);
	KUNIT_ASSERT_EQ(test, kvc_pool_alloc(pool, 1, 1, &owner_a, &h), 0);
	h.gen++;
	KUNIT_EXPECT_EQ(test, kvc_block_io_get(pool, h, &owner_b, false, 0,
					       SZ_4K), -EACCES);
	KUNIT_EXPECT_EQ(test, kvc_block_io_get(pool, h, &owner_a, false, 0,
					       SZ_4K), -ESTALE);
	drain(pool);
}

/* A bounce block is an ordinary writable block, not zeroed, given back. */
static void bounce_blocks_come_from_the_pool(struct kunit *test)
{
	struct kvc_pool *pool = test_pool(test, SZ_4K);
	struct kvcache_handle h[NR_TEST_BLOCKS], b;
	u32 ns;

	KUNIT_ASSERT_EQ(test, kvc_pool_alloc(pool, NR_TEST_BLOCKS, 1, &owner_a,
					     h), 0);
	KUNIT_EXPECT_EQ(test, kvc_pool_alloc_bounce(pool, &owner_b, &b),
			-ENOSPC);
	KUNIT_ASSERT_EQ(test, kvc_block_discard(pool, h[0].index, &owner_a,
						&ns), 0);
	KUNIT_ASSERT_EQ(test, kvc_pool_alloc_bounce(pool, &owner_b, &b), 0);
	KUNIT_EXPECT_EQ(test, kvc_pool_nr_free(pool), 0U);
	KUNIT_EXPECT_EQ(test, kvc_block_discard(pool, b.index, &owner_b, &ns),
			0);
	KUNIT_EXPECT_EQ(test, kvc_pool_nr_free(pool), 1U);
	drain(pool);
}

/*
 * SEAL by anyone but the block's writer gets one answer, whatever the
 * block's state and whatever generation the handle names: free, written
 * by another, sealed, right or wrong generation.
 */
static void seal_refusals_tell_nothing(struct kunit *test)
{
	struct kvc_pool *pool = test_pool(test, SZ_4K);
	struct kvcache_handle h[3], g;
	u32 ns, i;

	KUNIT_ASSERT_EQ(test, kvc_pool_alloc(pool, 3, 3, &owner_a, h), 0);
	KUNIT_ASSERT_EQ(test, kvc_block_seal(pool, h[1], &owner_a, 1, test_key,
					     false), 0);
	KUNIT_ASSERT_EQ(test, kvc_block_seal(pool, h[2], &owner_a, 1, test_key,
					     false), 0);
	KUNIT_ASSERT_EQ(test, kvc_block_evict(pool, h[2], &ns), 0);
	/* h[0] writable by A, h[1] sealed, h[2] free; index 5 never used. */
	for (i = 0; i < 4; i++) {
		g = i < 3 ? h[i] : (struct kvcache_handle){ .index = 5 };
		KUNIT_EXPECT_EQ(test, kvc_block_seal(pool, g, &owner_b, 1,
						     test_key, false), -EPERM);
		g.gen++;
		KUNIT_EXPECT_EQ(test, kvc_block_seal(pool, g, &owner_b, 1,
						     test_key, false), -EPERM);
		g.gen -= 2;
		KUNIT_EXPECT_EQ(test, kvc_block_seal(pool, g, &owner_b, 1,
						     test_key, true), -EPERM);
	}
	/* The writer's own block under an older handle: only it learns. */
	g = h[0];
	g.gen--;
	KUNIT_EXPECT_EQ(test, kvc_block_seal(pool, g, &owner_a, 1, test_key,
					     false), -ESTALE);
	drain(pool);
}

static bool allow_ns_4(u32 ns_id, void *arg)
{
	return ns_id == 4;
}

/*
 * A free block is judged by the namespace of its last life, so a caller
 * without read permission there cannot tell free from live, nor one
 * generation from another; a block never handed out has no namespace.
 */
static void pin_judges_free_blocks_by_last_namespace(struct kunit *test)
{
	struct kvc_pool *pool = test_pool(test, SZ_4K);
	struct kvcache_handle h3[2], h4, g;
	u32 ns, i;

	KUNIT_ASSERT_EQ(test, kvc_pool_alloc(pool, 2, 3, &owner_a, h3), 0);
	KUNIT_ASSERT_EQ(test, kvc_pool_alloc(pool, 1, 4, &owner_a, &h4), 0);
	for (i = 0; i < 2; i++)
		KUNIT_ASSERT_EQ(test, kvc_block_seal(pool, h3[i], &owner_a, 1,
						     test_key, false), 0);
	KUNIT_ASSERT_EQ(test, kvc_block_seal(pool, h4, &owner_a, 1, test_key,
					     false), 0);
	KUNIT_ASSERT_EQ(test, kvc_block_evict(pool, h3[1], &ns), 0);
	KUNIT_ASSERT_EQ(test, kvc_block_evict(pool, h4, &ns), 0);

	/* Namespace 3, live and free, any generation: EACCES. */
	for (i = 0; i < 2; i++) {
		g = h3[i];
		KUNIT_EXPECT_EQ(test, kvc_block_pin(pool, g, allow_ns_4, NULL),
				-EACCES);
		g.gen++;
		KUNIT_EXPECT_EQ(test, kvc_block_pin(pool, g, allow_ns_4, NULL),
				-EACCES);
	}
	/* Never used: no namespace anyone may read. */
	g = (struct kvcache_handle){ .index = 6 };
	KUNIT_EXPECT_EQ(test, kvc_block_pin(pool, g, allow_ns_4, NULL), -EACCES);
	/* Its own namespace's free block: a reader learns it is stale. */
	KUNIT_EXPECT_EQ(test, kvc_block_pin(pool, h4, allow_ns_4, NULL),
			-ESTALE);
	/* Reused by namespace 4: the namespace of the new life counts. */
	KUNIT_ASSERT_EQ(test, kvc_pool_alloc(pool, 1, 4, &owner_b, &g), 0);
	KUNIT_EXPECT_EQ(test, g.index, h4.index);
	KUNIT_EXPECT_EQ(test, kvc_block_pin(pool, g, allow_ns_4, NULL), -EBUSY);
	drain(pool);
}

/* SEAL with keep_pin: sealed and pinned at once, so evict cannot win. */
static void seal_keep_pin_is_atomic(struct kunit *test)
{
	struct kvc_pool *pool = test_pool(test, SZ_4K);
	struct kvcache_handle h;
	u32 ns;

	KUNIT_ASSERT_EQ(test, kvc_pool_alloc(pool, 1, 1, &owner_a, &h), 0);
	KUNIT_ASSERT_EQ(test, kvc_block_seal(pool, h, &owner_a, 1, test_key,
					     true), 0);
	KUNIT_EXPECT_EQ(test, pool->blocks[h.index].pins, 1U);
	KUNIT_EXPECT_EQ(test, atomic_read(&pool->nr_pinned), 1);
	KUNIT_EXPECT_EQ(test, atomic_read(&pool->nr_sealed), 1);
	KUNIT_EXPECT_EQ(test, kvc_block_evict(pool, h, &ns), -EBUSY);
	KUNIT_EXPECT_EQ(test, kvc_block_unpin(pool, h), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&pool->nr_pinned), 0);
	KUNIT_EXPECT_EQ(test, kvc_block_evict(pool, h, &ns), 0);
	/* A refused seal takes no pin. */
	KUNIT_ASSERT_EQ(test, kvc_pool_alloc(pool, 1, 1, &owner_a, &h), 0);
	KUNIT_EXPECT_EQ(test, kvc_block_seal(pool, h, &owner_b, 1, test_key,
					     true), -EPERM);
	KUNIT_EXPECT_EQ(test, pool->blocks[h.index].pins, 0U);
	KUNIT_EXPECT_EQ(test, atomic_read(&pool->nr_pinned), 0);
	drain(pool);
}

#define NR_REAP_BLOCKS	64

/*
 * An allocation looks at a few quarantined blocks only (their page walks
 * are the cost a user could multiply), all of them only when the free
 * stack cannot serve it; kvc_pool_idle() looks at all of them.
 */
static void quarantine_reaping_is_bounded(struct kunit *test)
{
	const struct kvc_geometry geo = {
		.block_size = SZ_4K, .pool_size = SZ_4K * NR_REAP_BLOCKS,
	};
	struct kvc_pool *pool = kvc_pool_create(&geo);
	struct kvcache_handle h[NR_REAP_BLOCKS];
	struct page *page;
	u32 i, ns, q;

	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, pool);
	KUNIT_ASSERT_EQ(test, kvc_pool_alloc(pool, 48, 1, &owner_a, h), 0);
	for (i = 0; i < 48; i++) {
		page = kvc_block_pages(pool, h[i].index)[0];
		get_page(page);
		KUNIT_ASSERT_EQ(test, kvc_block_discard(pool, h[i].index,
							&owner_a, &ns), 0);
		put_page(page);	/* reapable, but nobody has looked yet */
	}
	KUNIT_EXPECT_EQ(test, kvc_pool_nr_quarantined(pool), 48U);

	/* 16 free blocks serve one: a bounded look at the quarantine. */
	KUNIT_ASSERT_EQ(test, kvc_pool_alloc(pool, 1, 1, &owner_b, h), 0);
	q = kvc_pool_nr_quarantined(pool);
	KUNIT_EXPECT_LT(test, q, 48U);
	KUNIT_EXPECT_GE(test, q, 48U - 8);
	/* More than the free stack has: everything reapable is reaped. */
	KUNIT_ASSERT_EQ(test, kvc_pool_alloc(pool, NR_REAP_BLOCKS - 1, 1,
					     &owner_b, h + 1), 0);
	KUNIT_EXPECT_EQ(test, kvc_pool_nr_quarantined(pool), 0U);
	for (i = 0; i < NR_REAP_BLOCKS; i++)
		KUNIT_EXPECT_EQ(test, kvc_block_discard(pool, h[i].index,
							&owner_b, &ns), 0);
	KUNIT_EXPECT_TRUE(test, kvc_pool_idle(pool));
	kvc_pool_destroy(pool);
}

static struct kunit_case kvcache_pool_cases[] = {
	KUNIT_CASE(seal_refusals_tell_nothing),
	KUNIT_CASE(pin_judges_free_blocks_by_last_namespace),
	KUNIT_CASE(seal_keep_pin_is_atomic),
	KUNIT_CASE(quarantine_reaping_is_bounded),
	KUNIT_CASE(io_references_hold_the_block),
	KUNIT_CASE(bounce_blocks_come_from_the_pool),
	KUNIT_CASE(transitions_and_refusals),
	KUNIT_CASE(viewed_blocks_are_unmapped_before_free),
	KUNIT_CASE(generation_wraps_around),
	KUNIT_CASE(alloc_is_all_or_nothing),
	KUNIT_CASE(blocks_come_back_zeroed),
	KUNIT_CASE(give_back_frees_one_writable_block),
	KUNIT_CASE(pin_checks_namespace_and_saturation),
	KUNIT_CASE(referenced_pages_block_seal_evict_and_reuse),
	KUNIT_CASE(namespace_mode_bits),
	KUNIT_CASE(pin_races_evict),
	KUNIT_CASE(big_blocks_span_runs),
	{}
};

static struct kunit_suite kvcache_pool_suite = {
	.name = "kvcache_pool",
	.test_cases = kvcache_pool_cases,
};

kunit_test_suite(kvcache_pool_suite);
