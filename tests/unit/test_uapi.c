// SPDX-License-Identifier: GPL-2.0
/*
 * The uapi header is an ABI: once published, a struct's members keep their
 * offsets and sizes forever, and no struct may have implicit padding (it
 * would differ between 32- and 64-bit callers and leak kernel stack). These
 * tests pin the published layout; a change that moves a member fails here.
 */
#include <stddef.h>
#include <string.h>

#include <linux/kvcache.h>

#include "tap.h"

static void info_layout_is_frozen(void)
{
	TAP_CHECK(sizeof(struct kvcache_info) == KVCACHE_INFO_SIZE_VER1);
	TAP_CHECK(offsetof(struct kvcache_info, size) == 0);
	TAP_CHECK(offsetof(struct kvcache_info, flags) == 4);
	TAP_CHECK(offsetof(struct kvcache_info, abi_version) == 8);
	TAP_CHECK(offsetof(struct kvcache_info, max_batch) == 12);
	TAP_CHECK(offsetof(struct kvcache_info, features) == 16);
	TAP_CHECK(offsetof(struct kvcache_info, block_size) == 24);
	TAP_CHECK(offsetof(struct kvcache_info, nr_blocks) == 32);
	TAP_CHECK(offsetof(struct kvcache_info, reserved) == 40);
}

static void info_has_no_padding(void)
{
	struct kvcache_info i;
	size_t members = sizeof(i.size) + sizeof(i.flags) +
			 sizeof(i.abi_version) + sizeof(i.max_batch) +
			 sizeof(i.features) + sizeof(i.block_size) +
			 sizeof(i.nr_blocks) + sizeof(i.reserved);

	TAP_CHECK(members == sizeof(i));
	/* 64-bit members on 8-byte boundaries, as on every ABI. */
	TAP_CHECK(offsetof(struct kvcache_info, features) % 8 == 0);
	TAP_CHECK(sizeof(i) % 8 == 0);
}

static void size_is_the_first_member(void)
{
	struct kvcache_info i;

	memset(&i, 0, sizeof(i));
	i.size = 0x11223344;
	TAP_CHECK(*(unsigned int *)(void *)&i == 0x11223344);
}

static void ioctl_numbers_are_stable(void)
{
	/* _IOWR(0xBC, 0x00, 64 bytes) */
	TAP_CHECK(KVCACHE_IOC_INFO == 0xc040bc00u);
	TAP_CHECK(_IOC_TYPE(KVCACHE_IOC_INFO) == KVCACHE_IOC_MAGIC);
	TAP_CHECK(_IOC_DIR(KVCACHE_IOC_INFO) == (_IOC_READ | _IOC_WRITE));
}

static void feature_bits_are_distinct(void)
{
	TAP_CHECK((KVCACHE_FEAT_POOL & KVCACHE_FEAT_NETLINK) == 0);
	TAP_CHECK((KVCACHE_FEAT_POOL & KVCACHE_FEAT_P2P) == 0);
	TAP_CHECK((KVCACHE_FEAT_NETLINK & KVCACHE_FEAT_P2P) == 0);
	TAP_CHECK(KVCACHE_FEAT_ALL == (KVCACHE_FEAT_POOL |
				       KVCACHE_FEAT_NETLINK |
				       KVCACHE_FEAT_P2P));
	TAP_CHECK(KVCACHE_STRUCT_MAX >= KVCACHE_INFO_SIZE_VER1);
}

int main(void)
{
	TAP_RUN(info_layout_is_frozen);
	TAP_RUN(info_has_no_padding);
	TAP_RUN(size_is_the_first_member);
	TAP_RUN(ioctl_numbers_are_stable);
	TAP_RUN(feature_bits_are_distinct);
	return tap_done();
}
