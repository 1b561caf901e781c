// SPDX-License-Identifier: GPL-2.0
/*
 * Host tests for helper/kvcached/pool/kevents.c: the parser of the "kvcache" generic
 * netlink messages, fed messages built with libnl the way the kernel
 * builds them, and broken ones. (The sockets themselves need kvcache.ko:
 * the VM tests cover them.)
 */
#include <errno.h>
#include <string.h>

#include <netlink/genl/genl.h>
#include <netlink/msg.h>

#include <linux/kvcache.h>

#include "kevents.h"
#include "tap.h"

/* A message of @cmd with the pool attributes; skip attribute @skip. */
static struct nl_msg *pool_msg(uint8_t cmd, int skip, int short_u32)
{
	struct nl_msg *msg = nlmsg_alloc();
	uint16_t half = 7;

	if (!msg || !genlmsg_put(msg, 0, 0, 0x1c, 0, 0, cmd, 1))
		return NULL;
	if (skip != KVCACHE_A_FREE_BLOCKS) {
		if (short_u32)
			nla_put(msg, KVCACHE_A_FREE_BLOCKS, sizeof(half), &half);
		else
			nla_put_u32(msg, KVCACHE_A_FREE_BLOCKS, 12);
	}
	if (skip != KVCACHE_A_NR_BLOCKS)
		nla_put_u32(msg, KVCACHE_A_NR_BLOCKS, 128);
	if (skip != KVCACHE_A_LOW_WATERMARK)
		nla_put_u32(msg, KVCACHE_A_LOW_WATERMARK, 13);
	if (skip != KVCACHE_A_HIGH_WATERMARK)
		nla_put_u32(msg, KVCACHE_A_HIGH_WATERMARK, 26);
	if (skip != KVCACHE_A_PRESSURE)
		nla_put_u8(msg, KVCACHE_A_PRESSURE, 1);
	return msg;
}

static void parses_what_the_kernel_sends(void)
{
	struct kvc_pool_state st;
	struct nl_msg *msg;

	for (uint8_t cmd = KVCACHE_CMD_GET_POOL; cmd <= KVCACHE_CMD_PRESSURE;
	     cmd++) {
		msg = pool_msg(cmd, 0, 0);
		TAP_ASSERT_TRUE(msg);
		memset(&st, 0xff, sizeof(st));
		TAP_CHECK(kvc_kevents_parse(nlmsg_hdr(msg), &st) == 0);
		TAP_CHECK(st.free_blocks == 12 && st.nr_blocks == 128);
		TAP_CHECK(st.low_watermark == 13 && st.high_watermark == 26);
		TAP_CHECK(st.pressure == 1);
		nlmsg_free(msg);
	}
}

static void refuses_broken_messages(void)
{
	struct kvc_pool_state st;
	struct nl_msg *msg;

	/* Each attribute missing in turn. */
	for (int a = 1; a <= KVCACHE_A_MAX; a++) {
		msg = pool_msg(KVCACHE_CMD_PRESSURE, a, 0);
		TAP_CHECK(kvc_kevents_parse(nlmsg_hdr(msg), &st) == -EBADMSG);
		nlmsg_free(msg);
	}
	/* A u32 attribute two bytes long. */
	msg = pool_msg(KVCACHE_CMD_PRESSURE, 0, 1);
	TAP_CHECK(kvc_kevents_parse(nlmsg_hdr(msg), &st) == -EBADMSG);
	nlmsg_free(msg);
	/* A command of another kind. */
	msg = pool_msg(KVCACHE_CMD_UNSPEC, 0, 0);
	TAP_CHECK(kvc_kevents_parse(nlmsg_hdr(msg), &st) == -EOPNOTSUPP);
	nlmsg_free(msg);
	/* Truncated below the generic netlink header. */
	msg = pool_msg(KVCACHE_CMD_PRESSURE, 0, 0);
	nlmsg_hdr(msg)->nlmsg_len = NLMSG_HDRLEN + 2;
	TAP_CHECK(kvc_kevents_parse(nlmsg_hdr(msg), &st) == -EBADMSG);
	nlmsg_free(msg);
}

int main(void)
{
	TAP_RUN(parses_what_the_kernel_sends);
	TAP_RUN(refuses_broken_messages);
	return tap_done();
}
