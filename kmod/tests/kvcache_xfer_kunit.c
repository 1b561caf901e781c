// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for the transfer engine's pure parts (kvcache_xfer.c): the
 * inbound-range reservations that keep two transfers from writing the
 * same bytes at once. Part of kvcache_kunit.ko.
 */
#include <kunit/test.h>
#include <linux/bits.h>
#include <linux/slab.h>

#include "kvcache.h"
#include "kvcache_p2p.h"

static void inbound_ranges_exclude_overlaps_only(struct kunit *test)
{
	struct kvc_inbound a, b, c, d;
	struct kvc_file *kf;

	kf = kunit_kzalloc(test, sizeof(*kf), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, kf);
	spin_lock_init(&kf->inbound_lock);
	INIT_LIST_HEAD(&kf->inbound);

	KUNIT_ASSERT_EQ(test, kvc_inbound_claim(kf, &a, 7, 4096, 8192), 0);
	/* Overlapping either end, inside, around: refused. */
	KUNIT_EXPECT_EQ(test, kvc_inbound_claim(kf, &b, 7, 0, 4097), -EBUSY);
	KUNIT_EXPECT_EQ(test, kvc_inbound_claim(kf, &b, 7, 12287, 1), -EBUSY);
	KUNIT_EXPECT_EQ(test, kvc_inbound_claim(kf, &b, 7, 5000, 10), -EBUSY);
	KUNIT_EXPECT_EQ(test, kvc_inbound_claim(kf, &b, 7, 0, 1 << 20),
			-EBUSY);
	/* Touching ends, another target, a block with the same number: fine. */
	KUNIT_ASSERT_EQ(test, kvc_inbound_claim(kf, &b, 7, 0, 4096), 0);
	KUNIT_ASSERT_EQ(test, kvc_inbound_claim(kf, &c, 7, 12288, 4096), 0);
	KUNIT_ASSERT_EQ(test, kvc_inbound_claim(kf, &d, BIT_ULL(32) | 7, 4096,
						8192), 0);
	kvc_inbound_release(kf, &d);
	kvc_inbound_release(kf, &c);
	kvc_inbound_release(kf, &b);
	/* Released: the range is free again. */
	kvc_inbound_release(kf, &a);
	KUNIT_ASSERT_EQ(test, kvc_inbound_claim(kf, &a, 7, 5000, 10), 0);
	kvc_inbound_release(kf, &a);
	/* Wrapping and empty ranges are refused. */
	KUNIT_EXPECT_EQ(test, kvc_inbound_claim(kf, &a, 7, U64_MAX - 10, 4096),
			-ERANGE);
	KUNIT_EXPECT_EQ(test, kvc_inbound_claim(kf, &a, 7, 0, 0), -ERANGE);
	KUNIT_EXPECT_TRUE(test, list_empty(&kf->inbound));
}

static struct kunit_case kvcache_xfer_cases[] = {
	KUNIT_CASE(inbound_ranges_exclude_overlaps_only),
	{}
};

static struct kunit_suite kvcache_xfer_suite = {
	.name = "kvcache_xfer",
	.test_cases = kvcache_xfer_cases,
};

kunit_test_suite(kvcache_xfer_suite);
