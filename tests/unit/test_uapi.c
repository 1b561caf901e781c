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

static void feature_bits_are_frozen(void)
{
	TAP_CHECK(KVCACHE_FEAT_POOL == 1);
	TAP_CHECK(KVCACHE_FEAT_NETLINK == 2);
	TAP_CHECK(KVCACHE_FEAT_P2P == 4);
	TAP_CHECK(KVCACHE_FEAT_VIEW == 8);
	TAP_CHECK(KVCACHE_FEAT_DISCARD == 16);
	TAP_CHECK(KVCACHE_FEAT_QUERY_EXACT == 32);
	TAP_CHECK(KVCACHE_FEAT_USER_REGION == 64);
	TAP_CHECK(KVCACHE_REGION_USER == 1);
	TAP_CHECK(KVCACHE_QUERY_EXACT == 1);
	TAP_CHECK(KVCACHE_SEAL_KEEP_PIN == 1);
	TAP_CHECK(KVCACHE_KEY_SIZE == 32);
	TAP_CHECK(KVCACHE_MAX_BATCH == 1024);
	TAP_CHECK(KVCACHE_NS_MAX == 65535);
}

/* Every published struct: size = first published size, offsets fixed. */
static void pool_layouts_are_frozen(void)
{
	TAP_CHECK(sizeof(struct kvcache_handle) == 8);
	TAP_CHECK(offsetof(struct kvcache_handle, gen) == 4);

	TAP_CHECK(sizeof(struct kvcache_alloc) == KVCACHE_ALLOC_SIZE_VER1);
	TAP_CHECK(offsetof(struct kvcache_alloc, flags) == 4);
	TAP_CHECK(offsetof(struct kvcache_alloc, ns_id) == 8);
	TAP_CHECK(offsetof(struct kvcache_alloc, count) == 12);
	TAP_CHECK(offsetof(struct kvcache_alloc, handles) == 16);
	TAP_CHECK(offsetof(struct kvcache_alloc, reserved) == 24);

	TAP_CHECK(sizeof(struct kvcache_seal_entry) == 48);
	TAP_CHECK(offsetof(struct kvcache_seal_entry, payload_len) == 8);
	TAP_CHECK(offsetof(struct kvcache_seal_entry, reserved) == 12);
	TAP_CHECK(offsetof(struct kvcache_seal_entry, key) == 16);

	TAP_CHECK(sizeof(struct kvcache_batch) == KVCACHE_BATCH_SIZE_VER1);
	TAP_CHECK(offsetof(struct kvcache_batch, count) == 8);
	TAP_CHECK(offsetof(struct kvcache_batch, done) == 12);
	TAP_CHECK(offsetof(struct kvcache_batch, entries) == 16);
	TAP_CHECK(offsetof(struct kvcache_batch, reserved) == 24);

	TAP_CHECK(sizeof(struct kvcache_block_info) == 56);
	TAP_CHECK(offsetof(struct kvcache_block_info, ns_id) == 8);
	TAP_CHECK(offsetof(struct kvcache_block_info, payload_len) == 12);
	TAP_CHECK(offsetof(struct kvcache_block_info, pins) == 16);
	TAP_CHECK(offsetof(struct kvcache_block_info, key) == 24);

	TAP_CHECK(sizeof(struct kvcache_query) == KVCACHE_QUERY_SIZE_VER1);
	TAP_CHECK(offsetof(struct kvcache_query, start) == 8);
	TAP_CHECK(offsetof(struct kvcache_query, count) == 12);
	TAP_CHECK(offsetof(struct kvcache_query, next) == 16);
	TAP_CHECK(offsetof(struct kvcache_query, ns_id) == 20);
	TAP_CHECK(offsetof(struct kvcache_query, entries) == 24);
	TAP_CHECK(offsetof(struct kvcache_query, reserved) == 32);

	TAP_CHECK(sizeof(struct kvcache_ns) == KVCACHE_NS_SIZE_VER1);
	TAP_CHECK(offsetof(struct kvcache_ns, ns_id) == 8);
	TAP_CHECK(offsetof(struct kvcache_ns, uid) == 12);
	TAP_CHECK(offsetof(struct kvcache_ns, gid) == 16);
	TAP_CHECK(offsetof(struct kvcache_ns, mode) == 20);
	TAP_CHECK(offsetof(struct kvcache_ns, reserved) == 24);

	TAP_CHECK(sizeof(struct kvcache_helper) == KVCACHE_HELPER_SIZE_VER1);
	TAP_CHECK(offsetof(struct kvcache_helper, reserved) == 8);
}

static void pool_ioctl_numbers_are_stable(void)
{
	TAP_CHECK(KVCACHE_IOC_ALLOC == 0xc028bc01u);
	TAP_CHECK(KVCACHE_IOC_SEAL == 0xc028bc02u);
	TAP_CHECK(KVCACHE_IOC_PIN == 0xc028bc03u);
	TAP_CHECK(KVCACHE_IOC_UNPIN == 0xc028bc04u);
	TAP_CHECK(KVCACHE_IOC_EVICT == 0xc028bc05u);
	TAP_CHECK(KVCACHE_IOC_QUERY == 0xc030bc06u);
	TAP_CHECK(KVCACHE_IOC_NS_CREATE == 0xc028bc07u);
	TAP_CHECK(KVCACHE_IOC_NS_DESTROY == 0xc028bc08u);
	TAP_CHECK(KVCACHE_IOC_HELPER == 0xc020bc09u);
	TAP_CHECK(KVCACHE_IOC_DISCARD == 0xc028bc0eu);
}

/* Regions and transfers: layouts, constants and numbers are frozen too. */
static void p2p_layouts_are_frozen(void)
{
	TAP_CHECK(sizeof(struct kvcache_region) == KVCACHE_REGION_SIZE_VER1);
	TAP_CHECK(offsetof(struct kvcache_region, provider) == 8);
	TAP_CHECK(offsetof(struct kvcache_region, handle) == 12);
	TAP_CHECK(offsetof(struct kvcache_region, offset) == 16);
	TAP_CHECK(offsetof(struct kvcache_region, length) == 24);
	TAP_CHECK(offsetof(struct kvcache_region, reserved) == 32);

	TAP_CHECK(sizeof(struct kvcache_xfer_entry) == 64);
	TAP_CHECK(offsetof(struct kvcache_xfer_entry, flags) == 4);
	TAP_CHECK(offsetof(struct kvcache_xfer_entry, file_offset) == 8);
	TAP_CHECK(offsetof(struct kvcache_xfer_entry, length) == 16);
	TAP_CHECK(offsetof(struct kvcache_xfer_entry, region) == 24);
	TAP_CHECK(offsetof(struct kvcache_xfer_entry, block) == 32);
	TAP_CHECK(offsetof(struct kvcache_xfer_entry, offset) == 40);
	TAP_CHECK(offsetof(struct kvcache_xfer_entry, result) == 48);
	TAP_CHECK(offsetof(struct kvcache_xfer_entry, path) == 56);

	TAP_CHECK(sizeof(struct kvcache_xfer) == KVCACHE_XFER_SIZE_VER1);
	TAP_CHECK(offsetof(struct kvcache_xfer, count) == 8);
	TAP_CHECK(offsetof(struct kvcache_xfer, eventfd) == 12);
	TAP_CHECK(offsetof(struct kvcache_xfer, entries) == 16);
	TAP_CHECK(offsetof(struct kvcache_xfer, id) == 24);
	TAP_CHECK(offsetof(struct kvcache_xfer, failed) == 32);
	TAP_CHECK(offsetof(struct kvcache_xfer, reserved) == 40);

	TAP_CHECK(sizeof(struct kvcache_xfer_reap) ==
		  KVCACHE_XFER_REAP_SIZE_VER1);
	TAP_CHECK(offsetof(struct kvcache_xfer_reap, count) == 8);
	TAP_CHECK(offsetof(struct kvcache_xfer_reap, failed) == 12);
	TAP_CHECK(offsetof(struct kvcache_xfer_reap, id) == 16);
	TAP_CHECK(offsetof(struct kvcache_xfer_reap, entries) == 24);

	TAP_CHECK(KVCACHE_XFER_TO_FILE == 1 && KVCACHE_XFER_BLOCK == 2 &&
		  KVCACHE_XFER_BOUNCE == 4 && KVCACHE_XFER_ASYNC == 1 &&
		  KVCACHE_REAP_NOWAIT == 1);
	TAP_CHECK(KVCACHE_PATH_NONE == 0 && KVCACHE_PATH_P2P == 1 &&
		  KVCACHE_PATH_BOUNCE == 2 && KVCACHE_PATH_HOST == 3);
	TAP_CHECK(KVCACHE_XFER_MAX_LEN == 1ULL << 30);
	TAP_CHECK(KVCACHE_XFER_MAX_ASYNC == 64);
	TAP_CHECK(KVCACHE_IOC_REGION_REGISTER == 0xc030bc0au);
	TAP_CHECK(KVCACHE_IOC_REGION_UNREGISTER == 0xc030bc0bu);
	TAP_CHECK(KVCACHE_IOC_XFER == 0xc038bc0cu);
	TAP_CHECK(KVCACHE_IOC_XFER_REAP == 0xc030bc0du);
}

int main(void)
{
	TAP_RUN(info_layout_is_frozen);
	TAP_RUN(info_has_no_padding);
	TAP_RUN(size_is_the_first_member);
	TAP_RUN(ioctl_numbers_are_stable);
	TAP_RUN(feature_bits_are_frozen);
	TAP_RUN(pool_layouts_are_frozen);
	TAP_RUN(pool_ioctl_numbers_are_stable);
	TAP_RUN(p2p_layouts_are_frozen);
	return tap_done();
}
