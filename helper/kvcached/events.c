// SPDX-License-Identifier: GPL-2.0
/*
 * events: KV events on a ZeroMQ PUB socket (events.h).
 *
 * The index's observer queues one record per change; the tick (or a
 * queue of EVENTS_BATCH records) encodes them as one KVEventBatch, as
 * msgspec encodes vLLM's (0.32: kv_events.py): the batch an array, each
 * event a map tagged by "type", its fields in order, defaults left out:
 *
 *   [ts, [event, ...], nil]                  ts: wall clock, float 64
 *   {type: "BlockStored", block_hashes: [hash], parent_block_hash,
 *    token_ids: [], block_size: 0, lora_id: nil, medium, lora_name: nil,
 *    locality}
 *   {type: "BlockRemoved", block_hashes: [hash], medium, locality}
 *   {type: "AllBlocksCleared"}
 *
 * A hash is the block's 32-byte key as a byte string, vLLM's
 * ExternalBlockHash; token_ids is empty and block_size 0, for the daemon
 * never sees tokens: a router matches the hashes it computes the way
 * keys.md derives keys.
 *
 * Lifetime: the socket and the queue live from kvcd_events_open() to
 * kvcd_events_close(); the queue is emptied by each flush.
 */
#include "events.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "index.h"
#include "kvcd.h"
#include "log.h"
#include "msgpack.h"

#define EVENTS_BATCH	512		/* events per message at most */
#define EVENTS_HWM	10000		/* messages queued per subscriber */

struct event {
	bool stored;
	bool has_parent;
	uint8_t tier;
	uint8_t key[KVCACHE_KEY_SIZE];
	uint8_t parent[KVCACHE_KEY_SIZE];
};

struct kvcd_events {
	void *ctx, *sock;
	char topic[KVC_CONFIG_TOPIC_MAX];
	uint64_t seq;
	bool cleared;			/* AllBlocksCleared still to send */
	struct event *q;
	size_t n, cap;
	struct kvc_mp mp;
	uint64_t sent, dropped;
};

/* vLLM's media (kv_events.py): g3 is local storage, g4 remote storage
 * that every node sharing it reads. */
static const char *const medium[KVC_NR_TIERS] = {
	[KVC_TIER_POOL] = "CPU",
	[KVC_TIER_G3] = "STORAGE",
	[KVC_TIER_G4] = "STORAGE",
};

static const char *const locality[KVC_NR_TIERS] = {
	[KVC_TIER_POOL] = "LOCAL",
	[KVC_TIER_G3] = "LOCAL",
	[KVC_TIER_G4] = "REMOTE",
};

/* A key and a string value of an event's map. */
static void field(struct kvc_mp *m, const char *name, const char *value)
{
	kvc_mp_str(m, name);
	kvc_mp_str(m, value);
}

static void hashes(struct kvc_mp *m, const uint8_t *key)
{
	kvc_mp_str(m, "block_hashes");
	kvc_mp_array(m, 1);
	kvc_mp_bin(m, key, KVCACHE_KEY_SIZE);
}

static void encode(struct kvcd_events *ev, size_t from, size_t n)
{
	struct timespec ts;
	struct kvc_mp *m = &ev->mp;

	clock_gettime(CLOCK_REALTIME, &ts);
	kvc_mp_reset(m);
	kvc_mp_array(m, 3);
	kvc_mp_double(m, (double)ts.tv_sec + (double)ts.tv_nsec / 1e9);
	kvc_mp_array(m, (uint32_t)(n + ev->cleared));
	if (ev->cleared) {
		kvc_mp_map(m, 1);
		field(m, "type", "AllBlocksCleared");
	}
	for (size_t i = from; i < from + n; i++) {
		const struct event *e = &ev->q[i];

		if (!e->stored) {
			kvc_mp_map(m, 4);
			field(m, "type", "BlockRemoved");
			hashes(m, e->key);
			field(m, "medium", medium[e->tier]);
			field(m, "locality", locality[e->tier]);
			continue;
		}
		kvc_mp_map(m, 9);
		field(m, "type", "BlockStored");
		hashes(m, e->key);
		kvc_mp_str(m, "parent_block_hash");
		if (e->has_parent)
			kvc_mp_bin(m, e->parent, KVCACHE_KEY_SIZE);
		else
			kvc_mp_nil(m);
		kvc_mp_str(m, "token_ids");
		kvc_mp_array(m, 0);
		kvc_mp_str(m, "block_size");
		kvc_mp_uint(m, 0);
		kvc_mp_str(m, "lora_id");
		kvc_mp_nil(m);
		field(m, "medium", medium[e->tier]);
		kvc_mp_str(m, "lora_name");
		kvc_mp_nil(m);
		field(m, "locality", locality[e->tier]);
	}
	kvc_mp_nil(m);		/* data_parallel_rank */
}

/* One message: topic, sequence number, batch. Never waits. */
static void send_batch(struct kvcd_events *ev, size_t from, size_t n)
{
	uint8_t seq[8];
	int ret;

	encode(ev, from, n);
	ev->cleared = false;	/* in this message, sent or lost */
	if (ev->mp.err) {
		ev->dropped += n;
		return;
	}
	for (int i = 0; i < 8; i++)
		seq[i] = (uint8_t)(ev->seq >> (8 * (7 - i)));
	ret = zmq_send(ev->sock, ev->topic, strlen(ev->topic),
		       ZMQ_SNDMORE | ZMQ_DONTWAIT);
	if (ret >= 0)
		ret = zmq_send(ev->sock, seq, sizeof(seq),
			       ZMQ_SNDMORE | ZMQ_DONTWAIT);
	if (ret >= 0)
		ret = zmq_send(ev->sock, ev->mp.buf, ev->mp.len, ZMQ_DONTWAIT);
	ev->seq++;
	if (ret < 0)
		ev->dropped += n;
	else
		ev->sent++;
}

void kvcd_events_flush(struct kvcd *d)
{
	struct kvcd_events *ev = d->events;

	if (!ev || (!ev->n && !ev->cleared))
		return;
	/* At least one message: an AllBlocksCleared alone. */
	for (size_t i = 0; i == 0 || i < ev->n; i += EVENTS_BATCH) {
		size_t n = ev->n - i < EVENTS_BATCH ? ev->n - i : EVENTS_BATCH;

		send_batch(ev, i, n);
	}
	ev->n = 0;
}

static void observed(void *arg, const struct kvc_index *idx, uint32_t id,
		     unsigned int tier, bool present)
{
	struct kvcd *d = arg;
	struct kvcd_events *ev = d->events;
	const struct kvc_entry *e = kvc_index_entry(idx, id);
	struct event *q;

	if (!e || tier >= KVC_NR_TIERS)
		return;
	if (ev->n == ev->cap) {
		size_t cap = ev->cap ? ev->cap * 2 : EVENTS_BATCH;

		q = realloc(ev->q, cap * sizeof(*q));
		if (!q) {
			ev->dropped++;
			return;
		}
		ev->q = q;
		ev->cap = cap;
	}
	q = &ev->q[ev->n++];
	q->stored = present;
	q->tier = (uint8_t)tier;
	memcpy(q->key, e->key, KVCACHE_KEY_SIZE);
	q->has_parent = e->parent != KVC_ID_NONE;
	if (q->has_parent)
		memcpy(q->parent, kvc_index_entry(idx, e->parent)->key,
		       KVCACHE_KEY_SIZE);
	/* A start with a full g4 finds its blocks by the hundred thousand. */
	if (ev->n >= 64 * EVENTS_BATCH)
		kvcd_events_flush(d);
}

int kvcd_events_open(struct kvcd *d)
{
	const char *ep = d->cfg.events.endpoint;
	struct kvcd_events *ev;
	int hwm = EVENTS_HWM, linger = 0;

	if (!ep[0])
		return 0;
	ev = calloc(1, sizeof(*ev));
	if (!ev)
		return -ENOMEM;
	kvc_mp_init(&ev->mp);
	strcpy(ev->topic, d->cfg.events.topic);
	ev->ctx = zmq_ctx_new();
	ev->sock = ev->ctx ? zmq_socket(ev->ctx, ZMQ_PUB) : NULL;
	if (!ev->sock ||
	    zmq_setsockopt(ev->sock, ZMQ_SNDHWM, &hwm, sizeof(hwm)) ||
	    zmq_setsockopt(ev->sock, ZMQ_LINGER, &linger, sizeof(linger)) ||
	    zmq_bind(ev->sock, ep)) {
		int err = zmq_errno();

		kvc_err("[events] endpoint %s: %s", ep, zmq_strerror(err));
		if (ev->sock)
			zmq_close(ev->sock);
		if (ev->ctx)
			zmq_ctx_term(ev->ctx);
		free(ev);
		return err > 0 ? -err : -EINVAL;
	}
	/* Whatever a router knew of this node's last run is gone. */
	ev->cleared = true;
	d->events = ev;
	if (kvc_index_observe(d->index, observed, d))
		kvc_warn("[events] no observer slot left in the index");
	kvc_info("KV events on %s (topic '%s')", ep, ev->topic);
	return 0;
}

void kvcd_events_close(struct kvcd *d)
{
	struct kvcd_events *ev = d->events;

	if (!ev)
		return;
	kvc_index_unobserve(d->index, observed);
	zmq_close(ev->sock);
	zmq_ctx_term(ev->ctx);
	kvc_mp_free(&ev->mp);
	free(ev->q);
	free(ev);
	d->events = NULL;
}

uint64_t kvcd_events_sent(const struct kvcd *d)
{
	return d->events ? d->events->sent : 0;
}

uint64_t kvcd_events_dropped(const struct kvcd *d)
{
	return d->events ? d->events->dropped : 0;
}
