// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests of the fault injection points (kvcache_fault.c) where no open
 * file is needed: the pool's page allocation, armed directly (no debugfs)
 * and only for the test's own task, as the selftest does from user space.
 * Part of kvcache_kunit.ko, built only with CONFIG_FAULT_INJECTION.
 */
#include <kunit/test.h>
#include <linux/fault-inject.h>
#include <linux/sched.h>
#include <linux/sizes.h>

#include "kvcache.h"
#include "kvcache_fault.h"
#include "kvcache_pool.h"

/* Two 2 MiB runs' worth of pool: the page hook is consulted per run. */
static const struct kvc_geometry fault_geo = {
	.block_size = SZ_1M,
	.pool_size = SZ_4M,
};

/* Fail @times times (-1: always), for this task only. */
static void fault_arm(struct kunit *test, enum kvc_fault fault, int times)
{
	struct fault_attr *attr = kvc_fault_attr(fault);

	KUNIT_ASSERT_NOT_NULL(test, attr);
	attr->task_filter = true;
	attr->interval = 1;
	attr->verbose = 0;
	atomic_set(&attr->space, 0);
	atomic_set(&attr->times, times);
	current->make_it_fail = true;
	/* Last, as from debugfs: the point is live once this is set. */
	WRITE_ONCE(attr->probability, 100);
}

/* Suite exit: runs after every test, failed ones too. */
static void fault_disarm(struct kunit *test)
{
	int i;

	for (i = 0; i < KVC_NR_FAULTS; i++) {
		struct fault_attr *attr = kvc_fault_attr(i);

		WRITE_ONCE(attr->probability, 0);
		attr->task_filter = false;
		attr->verbose = 2;
		atomic_set(&attr->times, 1);
	}
	current->make_it_fail = false;
}

static void fault_pool_create_fails_with_enomem(struct kunit *test)
{
	struct kvc_pool *pool;

	fault_arm(test, KVC_FAULT_PAGE_ALLOC, -1);
	pool = kvc_pool_create(&fault_geo);
	KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(pool), -ENOMEM);
	if (!IS_ERR(pool))
		kvc_pool_destroy(pool);
}

/* One failure hits the first 2 MiB run, which falls back to pages. */
static void fault_failed_run_falls_back_to_pages(struct kunit *test)
{
	struct kvcache_handle h[4];
	struct kvc_pool *pool;
	int owner;

	fault_arm(test, KVC_FAULT_PAGE_ALLOC, 1);
	pool = kvc_pool_create(&fault_geo);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, pool);
	KUNIT_EXPECT_EQ(test, atomic_read(&kvc_fault_attr(KVC_FAULT_PAGE_ALLOC)->times), 0);
	KUNIT_EXPECT_LT(test, pool->nr_huge_chunks, 2UL);
	/* Every page is there and every block usable. */
	KUNIT_EXPECT_EQ(test, pool->nr_blocks, 4U);
	KUNIT_EXPECT_EQ(test, kvc_pool_alloc(pool, 4, 0, &owner, h), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&pool->nr_writable), 4);
	for (int i = 0; i < 4; i++) {
		u32 ns;

		KUNIT_EXPECT_EQ(test, kvc_block_discard(pool, h[i].index,
							&owner, &ns), 0);
	}
	KUNIT_EXPECT_TRUE(test, kvc_pool_idle(pool));
	kvc_pool_destroy(pool);
}

/* task-filter: a task without make-it-fail is never failed. */
static void fault_task_filter_spares_other_tasks(struct kunit *test)
{
	struct kvc_pool *pool;

	fault_arm(test, KVC_FAULT_PAGE_ALLOC, -1);
	current->make_it_fail = false;
	pool = kvc_pool_create(&fault_geo);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, pool);
	KUNIT_EXPECT_EQ(test, atomic_read(&kvc_fault_attr(KVC_FAULT_PAGE_ALLOC)->times), -1);
	kvc_pool_destroy(pool);
}

/* Disarmed (the state at load), the hooks never fire. */
static void fault_disarmed_points_never_fail(struct kunit *test)
{
	int i;

	fault_disarm(test);
	current->make_it_fail = true;
	for (i = 0; i < KVC_NR_FAULTS; i++)
		KUNIT_EXPECT_FALSE(test, kvc_should_fail(i, 1));
}

static struct kunit_case kvcache_fault_cases[] = {
	KUNIT_CASE(fault_pool_create_fails_with_enomem),
	KUNIT_CASE(fault_failed_run_falls_back_to_pages),
	KUNIT_CASE(fault_task_filter_spares_other_tasks),
	KUNIT_CASE(fault_disarmed_points_never_fail),
	{}
};

static struct kunit_suite kvcache_fault_suite = {
	.name = "kvcache_fault",
	.exit = fault_disarm,
	.test_cases = kvcache_fault_cases,
};

kunit_test_suite(kvcache_fault_suite);
