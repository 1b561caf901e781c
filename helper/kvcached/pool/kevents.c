// SPDX-License-Identifier: GPL-2.0
/*
 * kevents: the kernel's pool events over generic netlink (see kevents.h).
 */
#include "kevents.h"

#include <errno.h>
#include <stdlib.h>

#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>
#include <netlink/netlink.h>

#include <linux/kvcache.h>

struct kvc_kevents {
	struct nl_sock *ev;	/* joined to "events" */
	struct nl_sock *req;	/* GET_POOL requests and replies */
	int family;

	/* Where the receive callbacks deliver, for the call in progress. */
	void (*cb)(const struct kvc_pool_state *st, void *arg);
	void *arg;
	int delivered;
	struct kvc_pool_state *reply;
	int reply_err;
};

/* libnl errors are positive NLE_* codes; the helper speaks -errno. */
static int kvc_nl_errno(int nle)
{
	switch (nle < 0 ? -nle : nle) {
	case NLE_NOMEM:
		return -ENOMEM;
	case NLE_OBJ_NOTFOUND:
		return -ENOENT;
	case NLE_PERM:
		return -EPERM;
	case NLE_AGAIN:
		return -EAGAIN;
	case NLE_MSG_TRUNC:
	case NLE_MSG_TOOSHORT:
	case NLE_INVAL:
		return -EBADMSG;
	default:
		return -EIO;
	}
}

/* The exact size of each attribute; libnl's policy checks minimums only. */
static const unsigned int kvc_attr_len[KVCACHE_A_MAX + 1] = {
	[KVCACHE_A_FREE_BLOCKS] = 4,
	[KVCACHE_A_NR_BLOCKS] = 4,
	[KVCACHE_A_LOW_WATERMARK] = 4,
	[KVCACHE_A_HIGH_WATERMARK] = 4,
	[KVCACHE_A_PRESSURE] = 1,
};

int kvc_kevents_parse(const struct nlmsghdr *nlh, struct kvc_pool_state *st)
{
	struct nlattr *tb[KVCACHE_A_MAX + 1];
	struct genlmsghdr *gh;
	int a;

	if (!genlmsg_valid_hdr((struct nlmsghdr *)nlh, 0))
		return -EBADMSG;
	gh = nlmsg_data(nlh);
	if (gh->cmd != KVCACHE_CMD_GET_POOL && gh->cmd != KVCACHE_CMD_PRESSURE)
		return -EOPNOTSUPP;
	if (genlmsg_parse((struct nlmsghdr *)nlh, 0, tb, KVCACHE_A_MAX, NULL))
		return -EBADMSG;
	for (a = 1; a <= KVCACHE_A_MAX; a++)
		if (!tb[a] || nla_len(tb[a]) != (int)kvc_attr_len[a])
			return -EBADMSG;
	st->free_blocks = nla_get_u32(tb[KVCACHE_A_FREE_BLOCKS]);
	st->nr_blocks = nla_get_u32(tb[KVCACHE_A_NR_BLOCKS]);
	st->low_watermark = nla_get_u32(tb[KVCACHE_A_LOW_WATERMARK]);
	st->high_watermark = nla_get_u32(tb[KVCACHE_A_HIGH_WATERMARK]);
	st->pressure = nla_get_u8(tb[KVCACHE_A_PRESSURE]) ? 1 : 0;
	return 0;
}

static int kvc_event_cb(struct nl_msg *msg, void *arg)
{
	struct nlmsghdr *nlh = nlmsg_hdr(msg);
	struct kvc_kevents *ev = arg;
	struct kvc_pool_state st;

	/* Only PRESSURE is multicast; anything else is not ours to act on. */
	if (kvc_kevents_parse(nlh, &st) ||
	    ((struct genlmsghdr *)nlmsg_data(nlh))->cmd != KVCACHE_CMD_PRESSURE)
		return NL_OK;
	ev->cb(&st, ev->arg);
	ev->delivered++;
	return NL_OK;
}

static int kvc_reply_cb(struct nl_msg *msg, void *arg)
{
	struct kvc_kevents *ev = arg;

	ev->reply_err = kvc_kevents_parse(nlmsg_hdr(msg), ev->reply);
	return NL_OK;
}

void kvc_kevents_close(struct kvc_kevents *ev)
{
	if (!ev)
		return;
	nl_socket_free(ev->ev);
	nl_socket_free(ev->req);
	free(ev);
}

int kvc_kevents_open(struct kvc_kevents **out)
{
	struct kvc_kevents *ev = calloc(1, sizeof(*ev));
	int ret, grp;

	if (!ev)
		return -ENOMEM;
	ev->req = nl_socket_alloc();
	ev->ev = nl_socket_alloc();
	if (!ev->req || !ev->ev) {
		ret = -ENOMEM;
		goto err;
	}
	ret = genl_connect(ev->req);
	if (ret)
		goto err_nl;
	ev->family = genl_ctrl_resolve(ev->req, KVCACHE_GENL_NAME);
	if (ev->family < 0) {
		ret = ev->family;
		goto err_nl;
	}
	grp = genl_ctrl_resolve_grp(ev->req, KVCACHE_GENL_NAME,
				    KVCACHE_GENL_MCGRP);
	if (grp < 0) {
		ret = grp;
		goto err_nl;
	}
	/* Events carry no sequence numbers we asked for. */
	nl_socket_disable_seq_check(ev->ev);
	ret = genl_connect(ev->ev);
	if (!ret)
		ret = nl_socket_add_membership(ev->ev, grp);
	if (!ret)
		ret = nl_socket_set_nonblocking(ev->ev);
	if (!ret)
		ret = nl_socket_modify_cb(ev->ev, NL_CB_VALID, NL_CB_CUSTOM,
					  kvc_event_cb, ev);
	if (!ret)
		ret = nl_socket_modify_cb(ev->req, NL_CB_VALID, NL_CB_CUSTOM,
					  kvc_reply_cb, ev);
	if (ret)
		goto err_nl;
	*out = ev;
	return 0;

err_nl:
	ret = kvc_nl_errno(ret);
err:
	kvc_kevents_close(ev);
	return ret;
}

int kvc_kevents_fd(const struct kvc_kevents *ev)
{
	return nl_socket_get_fd(ev->ev);
}

int kvc_kevents_read(struct kvc_kevents *ev,
		     void (*cb)(const struct kvc_pool_state *st, void *arg),
		     void *arg)
{
	int ret;

	ev->cb = cb;
	ev->arg = arg;
	ev->delivered = 0;
	for (;;) {
		ret = nl_recvmsgs_default(ev->ev);
		if (ret < 0)
			break;
	}
	ret = kvc_nl_errno(ret);
	return ret == -EAGAIN ? ev->delivered : ret;
}

int kvc_kevents_get_pool(struct kvc_kevents *ev, struct kvc_pool_state *st)
{
	struct nl_msg *msg = nlmsg_alloc();
	int ret;

	if (!msg)
		return -ENOMEM;
	if (!genlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, ev->family, 0, 0,
			 KVCACHE_CMD_GET_POOL, KVCACHE_GENL_VERSION)) {
		nlmsg_free(msg);
		return -ENOMEM;
	}
	ret = nl_send_auto(ev->req, msg);
	nlmsg_free(msg);
	if (ret < 0)
		return kvc_nl_errno(ret);
	ev->reply = st;
	ev->reply_err = -EBADMSG;	/* until a reply is parsed */
	ret = nl_recvmsgs_default(ev->req);
	ev->reply = NULL;
	if (ret < 0)
		return kvc_nl_errno(ret);
	return ev->reply_err;
}
