// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for kvcache.ko internals: admin input parsing, geometry
 * validation, and the size-first ioctl argument rules. Built as
 * kvcache_kunit.ko on kernels with CONFIG_KUNIT; it needs kvcache.ko
 * loaded (the functions under test are exported to the KUnit namespace).
 */
#include <kunit/test.h>
#include <linux/mman.h>
#include <linux/sizes.h>
#include <linux/uaccess.h>

#include "compat.h"
#include "kvcache.h"

static void parse_size_accepts(struct kunit *test)
{
	static const struct {
		const char *in;
		u64 want;
	} cases[] = {
		{ "0", 0 },
		{ "4096", 4096 },
		{ "4096\n", 4096 },
		{ "0x1000", 4096 },
		{ "4K", SZ_4K },
		{ "4k\n", SZ_4K },
		{ "2M", SZ_2M },
		{ "64m", SZ_64M },
		{ "1G", SZ_1G },
		{ "16383G", 16383ULL << 30 },
		{ "18446744073709551615", U64_MAX },
	};
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		u64 v = 0xdead;

		KUNIT_EXPECT_EQ_MSG(test, kvc_parse_size(cases[i].in, &v), 0,
				    "input \"%s\"", cases[i].in);
		KUNIT_EXPECT_EQ_MSG(test, v, cases[i].want,
				    "input \"%s\"", cases[i].in);
	}
}

static void parse_size_rejects(struct kunit *test)
{
	static const char *const bad[] = {
		"", "\n", "K", "M\n", "abc", "12X", "-1", " 1", "1 ",
		"4K\n\n", "1.5M", "0x", "18446744073709551616",
		"18446744073709551615K", "17179869184G",
		"123456789012345678901234567890123",
	};
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		u64 v = 0xdead;

		KUNIT_EXPECT_EQ_MSG(test, kvc_parse_size(bad[i], &v), -EINVAL,
				    "input \"%s\"", bad[i]);
		KUNIT_EXPECT_EQ_MSG(test, v, 0xdeadULL,
				    "input \"%s\" changed the output", bad[i]);
	}
}

static void block_size_bounds(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, kvc_check_block_size(SZ_4K), 0);
	KUNIT_EXPECT_EQ(test, kvc_check_block_size(SZ_2M), 0);
	KUNIT_EXPECT_EQ(test, kvc_check_block_size(SZ_64M), 0);
	KUNIT_EXPECT_EQ(test, kvc_check_block_size(0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kvc_check_block_size(SZ_2K), -EINVAL);
	KUNIT_EXPECT_EQ(test, kvc_check_block_size(SZ_4K - 1), -EINVAL);
	KUNIT_EXPECT_EQ(test, kvc_check_block_size(SZ_4K + SZ_2K), -EINVAL);
	KUNIT_EXPECT_EQ(test, kvc_check_block_size(SZ_128M), -EINVAL);
	KUNIT_EXPECT_EQ(test, kvc_check_block_size(1ULL << 63), -EINVAL);
}

static void geometry_rules(struct kunit *test)
{
	const u64 max = SZ_1G;
	struct kvc_geometry g;

	g = (struct kvc_geometry){ .block_size = SZ_2M, .pool_size = SZ_256M };
	KUNIT_EXPECT_EQ(test, kvc_check_geometry(&g, max), 0);

	/* An empty pool is allowed: the tier is switched off. */
	g.pool_size = 0;
	KUNIT_EXPECT_EQ(test, kvc_check_geometry(&g, max), 0);

	/* Not a whole number of blocks. */
	g.pool_size = SZ_2M + SZ_4K;
	KUNIT_EXPECT_EQ(test, kvc_check_geometry(&g, max), -EINVAL);

	/* Over the RAM ceiling, by one block and by a lot. */
	g.pool_size = max + SZ_2M;
	KUNIT_EXPECT_EQ(test, kvc_check_geometry(&g, max), -EINVAL);
	g.pool_size = U64_MAX & ~(u64)(SZ_2M - 1);
	KUNIT_EXPECT_EQ(test, kvc_check_geometry(&g, max), -EINVAL);

	/* Exactly the ceiling is fine. */
	g.pool_size = max;
	KUNIT_EXPECT_EQ(test, kvc_check_geometry(&g, max), 0);

	/* More blocks than a handle can index. */
	g = (struct kvc_geometry){ .block_size = SZ_4K,
				   .pool_size = (u64)(KVC_MAX_BLOCKS + 1) * SZ_4K };
	KUNIT_EXPECT_EQ(test, kvc_check_geometry(&g, U64_MAX), -EINVAL);
	g.pool_size = (u64)KVC_MAX_BLOCKS * SZ_4K;
	KUNIT_EXPECT_EQ(test, kvc_check_geometry(&g, U64_MAX), 0);

	/* A bad block size is caught before the division by it. */
	g = (struct kvc_geometry){ .block_size = 0, .pool_size = SZ_2M };
	KUNIT_EXPECT_EQ(test, kvc_check_geometry(&g, max), -EINVAL);
}

static void info_check_rejects_every_nonzero_byte(struct kunit *test)
{
	struct kvcache_info in;
	size_t off;

	memset(&in, 0, sizeof(in));
	in.size = sizeof(in);
	KUNIT_EXPECT_EQ(test, kvc_info_check(&in), 0);

	/* Every byte after size is an output or reserved: must be zero. */
	for (off = sizeof(in.size); off < sizeof(in); off++) {
		memset(&in, 0, sizeof(in));
		in.size = sizeof(in);
		((u8 *)&in)[off] = 0x01;
		KUNIT_EXPECT_EQ_MSG(test, kvc_info_check(&in), -EINVAL,
				    "byte %zu", off);
	}
}

static void info_fill_reports_geometry(struct kunit *test)
{
	const struct kvc_geometry g = { .block_size = SZ_1M,
					.pool_size = SZ_64M };
	struct kvcache_info info = { .size = sizeof(info) };

	kvc_info_fill(&info, &g);
	KUNIT_EXPECT_EQ(test, info.size, (u32)sizeof(info));
	KUNIT_EXPECT_EQ(test, info.abi_version, (u32)KVCACHE_ABI_VERSION);
	KUNIT_EXPECT_EQ(test, info.max_batch, (u32)KVCACHE_MAX_BATCH);
	KUNIT_EXPECT_EQ(test, info.block_size, (u64)SZ_1M);
	KUNIT_EXPECT_EQ(test, info.nr_blocks, 64ULL);
	KUNIT_EXPECT_EQ(test, info.features & ~KVCACHE_FEAT_ALL, 0ULL);
	KUNIT_EXPECT_TRUE(test, !memchr_inv(info.reserved, 0,
					    sizeof(info.reserved)));
}

#if KVC_HAVE_KUNIT_VM_MMAP
/* Map two user pages and return the address of the first. */
static u8 __user *user_pages(struct kunit *test)
{
	unsigned long addr;

	addr = kunit_vm_mmap(test, NULL, 0, 2 * PAGE_SIZE,
			     PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE,
			     0);
	KUNIT_ASSERT_NE(test, addr, 0UL);
	KUNIT_ASSERT_LT(test, addr, (unsigned long)TASK_SIZE);
	return (u8 __user *)addr;
}

static int put_size(u8 __user *u, u32 size)
{
	return put_user(size, (u32 __user *)u);
}

static void copy_in_size_rules(struct kunit *test)
{
	const size_t ksize = sizeof(struct kvcache_info);
	u8 __user *u = user_pages(test);
	struct kvcache_info k;
	u8 one = 1;

	/* Exact size. */
	KUNIT_ASSERT_EQ(test, put_size(u, ksize), 0);
	KUNIT_EXPECT_EQ(test, kvc_copy_in(&k, ksize, ksize, u), 0);
	KUNIT_EXPECT_EQ(test, k.size, (u32)ksize);

	/* Too small, zero, and beyond KVCACHE_STRUCT_MAX. */
	KUNIT_ASSERT_EQ(test, put_size(u, ksize - 8), 0);
	KUNIT_EXPECT_EQ(test, kvc_copy_in(&k, ksize, ksize, u), -EINVAL);
	KUNIT_ASSERT_EQ(test, put_size(u, 0), 0);
	KUNIT_EXPECT_EQ(test, kvc_copy_in(&k, ksize, ksize, u), -EINVAL);
	KUNIT_ASSERT_EQ(test, put_size(u, KVCACHE_STRUCT_MAX + 1), 0);
	KUNIT_EXPECT_EQ(test, kvc_copy_in(&k, ksize, ksize, u), -EINVAL);

	/* A newer, longer struct with a zero tail is accepted ... */
	KUNIT_ASSERT_EQ(test, put_size(u, ksize + 64), 0);
	KUNIT_EXPECT_EQ(test, kvc_copy_in(&k, ksize, ksize, u), 0);
	KUNIT_EXPECT_EQ(test, k.size, (u32)(ksize + 64));

	/* ... one with a non-zero byte this kernel does not know is not. */
	KUNIT_ASSERT_EQ(test, copy_to_user(u + ksize + 63, &one, 1), 0UL);
	KUNIT_EXPECT_EQ(test, kvc_copy_in(&k, ksize, ksize, u), -E2BIG);

	/* A struct running off the end of the mapping faults. */
	KUNIT_ASSERT_EQ(test, put_size(u + 2 * PAGE_SIZE - 8, ksize), 0);
	KUNIT_EXPECT_EQ(test, kvc_copy_in(&k, ksize, ksize,
					  u + 2 * PAGE_SIZE - 8), -EFAULT);

	/* A kernel address is never user memory. */
	KUNIT_EXPECT_EQ(test, kvc_copy_in(&k, ksize, ksize,
					  (void __user *)&k), -EFAULT);
}

static void copy_out_writes_min_size(struct kunit *test)
{
	const size_t ksize = sizeof(struct kvcache_info);
	u8 __user *u = user_pages(test);
	struct kvcache_info k = {};
	u8 tail[16];

	/* A longer caller gets ksize bytes and size == ksize. */
	KUNIT_ASSERT_EQ(test, clear_user(u, PAGE_SIZE), 0UL);
	k.size = ksize + sizeof(tail);
	k.block_size = SZ_2M;
	KUNIT_EXPECT_EQ(test, kvc_copy_out(u, &k, ksize), 0);
	KUNIT_EXPECT_EQ(test, k.size, (u32)ksize);
	memset(&k, 0xff, sizeof(k));
	KUNIT_ASSERT_EQ(test, copy_from_user(&k, u, ksize), 0UL);
	KUNIT_EXPECT_EQ(test, k.size, (u32)ksize);
	KUNIT_EXPECT_EQ(test, k.block_size, (u64)SZ_2M);
	KUNIT_ASSERT_EQ(test, copy_from_user(tail, u + ksize, sizeof(tail)), 0UL);
	KUNIT_EXPECT_TRUE(test, !memchr_inv(tail, 0, sizeof(tail)));

	/* Output to a kernel address faults instead of writing it. */
	k.size = ksize;
	KUNIT_EXPECT_EQ(test, kvc_copy_out((void __user *)tail, &k, ksize),
			-EFAULT);
}
#endif /* KVC_HAVE_KUNIT_VM_MMAP */

static struct kunit_case kvcache_config_cases[] = {
	KUNIT_CASE(parse_size_accepts),
	KUNIT_CASE(parse_size_rejects),
	KUNIT_CASE(block_size_bounds),
	KUNIT_CASE(geometry_rules),
	{}
};

static struct kunit_suite kvcache_config_suite = {
	.name = "kvcache_config",
	.test_cases = kvcache_config_cases,
};

static struct kunit_case kvcache_uapi_cases[] = {
	KUNIT_CASE(info_check_rejects_every_nonzero_byte),
	KUNIT_CASE(info_fill_reports_geometry),
#if KVC_HAVE_KUNIT_VM_MMAP
	KUNIT_CASE(copy_in_size_rules),
	KUNIT_CASE(copy_out_writes_min_size),
#endif
	{}
};

static struct kunit_suite kvcache_uapi_suite = {
	.name = "kvcache_uapi",
	.test_cases = kvcache_uapi_cases,
};

kunit_test_suites(&kvcache_config_suite, &kvcache_uapi_suite);

KVC_IMPORT_KUNIT_NS();
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("KUnit tests for kvcache.ko");
