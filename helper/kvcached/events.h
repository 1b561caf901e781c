/* SPDX-License-Identifier: GPL-2.0 */
/*
 * events: KV events for cache-aware routers, in vLLM's format
 * (Documentation/admin-guide/kv-events.md). Off unless [events] endpoint
 * is set; then kvcached binds a ZeroMQ PUB socket there and publishes,
 * for every block of a namespace [events] namespaces lists entering or
 * leaving one of its tiers, a BlockStored or BlockRemoved whose medium
 * and locality name the tier ("CPU" "LOCAL": the pool in DRAM;
 * "STORAGE" "LOCAL": g3; "STORAGE" "REMOTE": g4, which every node
 * sharing it can load), and an AllBlocksCleared when it starts. Each
 * message is vLLM's ZmqEventPublisher's: the topic, an 8-byte big-endian
 * sequence number and a msgpack KVEventBatch.
 *
 * Who may subscribe: an ipc:// socket file has [events] ipc_mode and
 * ipc_group from the moment it can be reached; a tcp:// endpoint (and an
 * ipc:// one that asks) takes only CURVE clients whose public key is in
 * curve_clients.
 *
 * The daemon's loop only (but for the ZAP thread, events.c): the index
 * tells it of each change (kvc_index_observe), and the tick publishes
 * what piled up. A send never waits: a subscriber too slow for [events]
 * hwm messages loses messages, as with vLLM's publisher (the PUB socket
 * drops them for that subscriber alone, silently).
 */
#ifndef KVCD_EVENTS_H
#define KVCD_EVENTS_H

#include <stdint.h>

struct kvcd;

/* Bind and start listening to the index: 0 (also when off), -errno. */
int kvcd_events_open(struct kvcd *d);
/* Publish what piled up since the last call (the tick). */
void kvcd_events_flush(struct kvcd *d);
void kvcd_events_close(struct kvcd *d);
/* Messages sent; events lost to an encoding error, memory or a failed send. */
uint64_t kvcd_events_sent(const struct kvcd *d);
uint64_t kvcd_events_dropped(const struct kvcd *d);
/* CURVE subscribers the ZAP handler turned away. */
uint64_t kvcd_events_denied(const struct kvcd *d);

#endif /* KVCD_EVENTS_H */
