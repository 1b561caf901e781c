// SPDX-License-Identifier: GPL-2.0
/*
 * The "kvcache" generic netlink family: pool pressure events for kvcached.
 *
 * When the number of free blocks falls below pool/low_watermark, one
 * KVCACHE_CMD_PRESSURE message with KVCACHE_A_PRESSURE = 1 goes to the
 * "events" multicast group; when it is back at or above high_watermark,
 * one with KVCACHE_A_PRESSURE = 0. The gap between the two watermarks is
 * the hysteresis that keeps a pool hovering at one level from flooding the
 * helper. KVCACHE_CMD_GET_POOL answers the same attributes on request, so
 * a helper that starts under pressure learns it without waiting.
 *
 * Locking: the pressure state is one bit in dev->flags, flipped with
 * test_and_set_bit()/test_and_clear_bit() so each crossing sends exactly
 * one event; one that could not be sent (counted in stats/event_failures)
 * flips the bit back, to be sent again at the next check. Messages are
 * built and sent in process context with no lock held.
 */
#include <net/genetlink.h>

#include "kvcache.h"
#include "kvcache_fault.h"
#include "kvcache_pool.h"

static struct kvc_dev *kvc_nl_dev;
static struct genl_family kvc_genl_family;

static int kvc_nl_fill(struct sk_buff *skb, struct kvc_dev *dev, u32 nr_free,
		       u32 nr_blocks)
{
	if (nla_put_u32(skb, KVCACHE_A_FREE_BLOCKS, nr_free) ||
	    nla_put_u32(skb, KVCACHE_A_NR_BLOCKS, nr_blocks) ||
	    nla_put_u32(skb, KVCACHE_A_LOW_WATERMARK, READ_ONCE(dev->low_wm)) ||
	    nla_put_u32(skb, KVCACHE_A_HIGH_WATERMARK,
			READ_ONCE(dev->high_wm)) ||
	    nla_put_u8(skb, KVCACHE_A_PRESSURE,
		       test_bit(KVC_DEV_PRESSURE, &dev->flags)))
		return -EMSGSIZE;
	return 0;
}

static int kvc_nl_get_pool(struct sk_buff *skb, struct genl_info *info)
{
	struct kvc_dev *dev = kvc_nl_dev;
	struct sk_buff *msg;
	u32 nr_free, nr_blocks;
	void *hdr;

	msg = genlmsg_new(NLMSG_DEFAULT_SIZE, GFP_KERNEL);
	if (!msg)
		return -ENOMEM;
	hdr = genlmsg_put_reply(msg, info, &kvc_genl_family, 0,
				KVCACHE_CMD_GET_POOL);
	if (!hdr)
		goto err;
	percpu_down_read(&dev->pool_sem);
	nr_free = kvc_pool_nr_free(dev->pool);
	nr_blocks = dev->pool->nr_blocks;
	percpu_up_read(&dev->pool_sem);
	if (kvc_nl_fill(msg, dev, nr_free, nr_blocks))
		goto err;
	genlmsg_end(msg, hdr);
	return genlmsg_reply(msg, info);
err:
	nlmsg_free(msg);
	return -EMSGSIZE;
}

static const struct genl_small_ops kvc_genl_ops[] = {
	{
		.cmd = KVCACHE_CMD_GET_POOL,
		.validate = GENL_DONT_VALIDATE_STRICT | GENL_DONT_VALIDATE_DUMP,
		.doit = kvc_nl_get_pool,
	},
};

static const struct genl_multicast_group kvc_genl_mcgrps[] = {
	{ .name = KVCACHE_GENL_MCGRP },
};

static struct genl_family kvc_genl_family __ro_after_init = {
	.name = KVCACHE_GENL_NAME,
	.version = KVCACHE_GENL_VERSION,
	.maxattr = KVCACHE_A_MAX,
	.module = THIS_MODULE,
	.small_ops = kvc_genl_ops,
	.n_small_ops = ARRAY_SIZE(kvc_genl_ops),
	.resv_start_op = KVCACHE_CMD_PRESSURE + 1,
	.mcgrps = kvc_genl_mcgrps,
	.n_mcgrps = ARRAY_SIZE(kvc_genl_mcgrps),
};

/* Return: whether the event left (or nobody listens). */
static bool kvc_nl_send_pressure(struct kvc_dev *dev, u32 nr_free,
				 u32 nr_blocks)
{
	struct sk_buff *msg;
	void *hdr;
	int ret;

	msg = genlmsg_new(NLMSG_DEFAULT_SIZE, GFP_KERNEL);
	if (!msg)
		goto fail;
	hdr = genlmsg_put(msg, 0, 0, &kvc_genl_family, 0,
			  KVCACHE_CMD_PRESSURE);
	if (!hdr || kvc_nl_fill(msg, dev, nr_free, nr_blocks)) {
		nlmsg_free(msg);
		goto fail;
	}
	genlmsg_end(msg, hdr);
	if (kvc_should_fail(KVC_FAULT_NETLINK, msg->len)) {
		/* Dropped where the multicast would drop it: freed unsent. */
		nlmsg_free(msg);
		goto fail;
	}
	ret = genlmsg_multicast(&kvc_genl_family, msg, 0, 0, GFP_KERNEL);
	/* -ESRCH: nobody listens, which is not a failure to send. */
	if (ret && ret != -ESRCH)
		goto fail;
	kvc_stat_inc(dev, KVC_STAT_EVENTS);
	return true;
fail:
	kvc_stat_inc(dev, KVC_STAT_EVENT_FAILURES);
	return false;
}

/**
 * kvc_pressure_check() - raise or clear the pressure state
 * @dev: the device
 * @nr_free: free blocks, as just seen
 * @nr_blocks: blocks in the pool
 *
 * Called after every change that moves the free count across a watermark
 * (allocation, eviction, discard at close).
 */
void kvc_pressure_check(struct kvc_dev *dev, u32 nr_free, u32 nr_blocks)
{
	if (!nr_blocks)
		return;
	/*
	 * An event that could not be sent puts the bit back, so the next
	 * check past the same watermark tries again instead of leaving the
	 * helper in the old state for good. A concurrent check that flipped
	 * the bit meanwhile has sent its own event, which supersedes ours.
	 */
	if (nr_free < READ_ONCE(dev->low_wm)) {
		if (!test_and_set_bit(KVC_DEV_PRESSURE, &dev->flags) &&
		    !kvc_nl_send_pressure(dev, nr_free, nr_blocks))
			clear_bit(KVC_DEV_PRESSURE, &dev->flags);
	} else if (nr_free >= READ_ONCE(dev->high_wm)) {
		if (test_and_clear_bit(KVC_DEV_PRESSURE, &dev->flags) &&
		    !kvc_nl_send_pressure(dev, nr_free, nr_blocks))
			set_bit(KVC_DEV_PRESSURE, &dev->flags);
	}
}

int kvc_netlink_register(struct kvc_dev *dev)
{
	kvc_nl_dev = dev;
	return genl_register_family(&kvc_genl_family);
}

void kvc_netlink_unregister(void)
{
	genl_unregister_family(&kvc_genl_family);
	kvc_nl_dev = NULL;
}
