// SPDX-License-Identifier: GPL-2.0
/*
 * loads: LOADs waiting for blocks to come up from g3/g4 (tiers_priv.h).
 *
 * A LOAD whose keys are partly in g3/g4 only is parked, one per client
 * (the client's next request waits for the reply, server.h). Waiting
 * LOADs are settled by key, not by id, after every batch of
 * completions: a key whose block reached the pool is answered with it
 * (pinned for the client in memfd mode), one that is neither in the
 * pool nor being read is a miss. That holds however the index changed
 * meanwhile.
 *
 * A LOAD waits load_timeout at most ([daemon], 2 s by default): a block
 * still being read then is a miss, and the read goes on to promote it
 * for the next request. A tier that stopped answering (a shared
 * filesystem whose server is gone, a hard mount waiting for it) holds
 * its reads, not the engine.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "fault.h"
#include "tiers_priv.h"

bool kvcd_tiers_defer(struct kvcd *d, const struct kvc_peer *p,
		      const struct kvc_msg *m,
		      const struct kvc_load_result *res)
{
	struct kvcd_tiers *tr = d->tiers;
	const struct kvc_load *l = &m->load;
	struct kvcd_wait *w = NULL;

	for (uint32_t i = 0; i < KVC_SERVER_MAX_CLIENTS && !w; i++)
		if (!tr->waits[i].used)
			w = &tr->waits[i];
	if (!w)
		return false;
	w->keys = malloc((size_t)l->count * KVCACHE_KEY_SIZE);
	w->res = malloc((size_t)l->count * sizeof(*w->res));
	if (!w->keys || !w->res) {
		free(w->keys);
		free(w->res);
		return false;
	}
	memcpy(w->keys, l->keys, (size_t)l->count * KVCACHE_KEY_SIZE);
	memcpy(w->res, res, (size_t)l->count * sizeof(*w->res));
	w->used = true;
	w->peer = p->id;
	w->serial = p->serial;
	w->seq = m->seq;
	w->ns = l->ns_id;
	w->count = l->count;
	w->since = kvc_now();
	w->outstanding = 0;
	for (uint32_t i = 0; i < l->count; i++)
		w->outstanding += res[i].status == KVCD_WAIT_PENDING;
	return true;
}

void tiers_wait_free(struct kvcd_wait *w)
{
	free(w->keys);
	free(w->res);
	memset(w, 0, sizeof(*w));
}

/* Answer what can be answered now; reply to LOADs that are complete. */
void tiers_settle(struct kvcd *d)
{
	static uint8_t reply[KVC_PROTO_MSG_MAX];
	double limit = (double)d->cfg.daemon.load_timeout_ms / 1e3;
	double now = kvc_now();

	for (uint32_t wi = 0; wi < KVC_SERVER_MAX_CLIENTS; wi++) {
		struct kvcd_wait *w = &d->tiers->waits[wi];
		bool late, cut = false;
		int len;

		if (!w->used)
			continue;
		late = now - w->since >= limit;
		for (uint32_t i = 0; i < w->count; i++) {
			struct kvc_load_result *r = &w->res[i];
			const struct kvc_entry *e;
			uint32_t id;

			if (r->status != KVCD_WAIT_PENDING)
				continue;
			if (kvc_index_find(d->index, w->ns, w->keys[i], &id)) {
				r->status = -ENOENT;
			} else if ((e = kvc_index_entry(d->index, id))->tiers &
				   (1u << KVC_TIER_POOL)) {
				r->handle = e->loc[KVC_TIER_POOL].pool;
				r->status = kvc_pool_pin(d->pool, w->peer,
							 r->handle);
				if (r->status)
					memset(&r->handle, 0,
					       sizeof(r->handle));
				else
					kvc_policy_on_access(d->policy, id);
			} else if (tiers_is_fetching(d, id)) {
				if (!late)
					continue;
				r->status = -ENOENT;
				cut = true;
			} else {
				r->status = -ENOENT;
			}
			w->outstanding--;
		}
		if (w->outstanding)
			continue;
		if (cut)
			d->tiers->load_timeouts++;
		len = kvc_proto_encode_load_reply(reply, sizeof(reply),
						  (uint32_t)w->seq, w->res,
						  w->count);
		/* In the version its HELLO chose, as every reply. */
		len = kvc_proto_set_version(reply, len,
					    d->clients[w->peer].version);
		if (len > 0 &&
		    kvc_server_reply(d->srv, w->peer, w->serial, reply,
				     (size_t)len, -1) == -ENOTCONN)
			/* Gone: closed() already dropped its pins, except
			 * the ones given just now (memfd mode). */
			kvc_pool_release(d->pool, w->peer);
		tiers_wait_free(w);
	}
}

void kvcd_tiers_closed(struct kvcd *d, const struct kvc_peer *p)
{
	struct kvcd_tiers *tr = d->tiers;

	if (!tr->waits)
		return;
	for (uint32_t i = 0; i < KVC_SERVER_MAX_CLIENTS; i++)
		if (tr->waits[i].used && tr->waits[i].peer == p->id &&
		    tr->waits[i].serial == p->serial)
			tiers_wait_free(&tr->waits[i]);
}
