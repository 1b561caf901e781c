/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kvcd: the daemon's state, shared by the daemon's files (daemon.c
 * lists them) and the tiers' glue (tiers/: spill, promotion,
 * prefetch). Nothing else includes it.
 *
 * Single-threaded, as the whole daemon: the server loop's thread.
 */
#ifndef KVC_KVCD_H
#define KVC_KVCD_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "index.h"
#include "metrics.h"
#include "policy.h"
#include "pool.h"
#include "proto.h"
#include "server.h"
#include "tier.h"

/* What g4 says of a namespace this node has (nsshare.c). */
enum kvcd_share {
	KVCD_SHARE_UNKNOWN,	/* not looked, or g4 refused: try again */
	KVCD_SHARE_OK,		/* g4 describes it as this node has it */
	KVCD_SHARE_CONFLICT,	/* ... otherwise: this node keeps its own */
	KVCD_SHARE_REPLACE,	/* a new salt g4 has not taken yet */
};

struct kvcd_ns {
	bool used;
	uint32_t uid, gid, mode;
	/* Mixed into its keys by libkvcache (NS_SALT, keys.md). */
	uint8_t salt[KVC_PROTO_SALT_SIZE];
	uint8_t share;		/* enum kvcd_share */
};

struct kvcd_client {
	bool hello;
	uint16_t version;	/* negotiated by HELLO: replies carry it */
	/*
	 * TOUCH's budget ([daemon] touch_rate): blocks it may still report,
	 * refilled at touch_rate a second up to one second's worth, as of
	 * touch_at (kvc_now_ns(); 0: none yet, the budget is full).
	 */
	double touch_tokens;
	uint64_t touch_at;
};

/* A LOAD result still coming up from g3/g4 (kvcd_tiers_want()). */
#define KVCD_WAIT_PENDING	1

/*
 * memfd mode: the credentials of a non-root peer that was given the pool
 * memfd. A memfd cannot be taken back (the peer may keep its mapping
 * after it hangs up), so these stay until the daemon, and with it the
 * pool, goes away. At most KVCD_HOLDER_GROUPS supplementary groups are
 * kept; a peer with more, or a table that is full, sets holders_unknown.
 */
#define KVCD_MAX_HOLDERS	64
#define KVCD_HOLDER_GROUPS	32
struct kvcd_holder {
	uid_t uid;
	gid_t gid;
	uint32_t ngroups;
	gid_t groups[KVCD_HOLDER_GROUPS];
};

struct kvcd {
	struct kvc_config cfg;
	char state_dir[PATH_MAX];
	struct kvc_pool *pool;		/* the DRAM tier's blocks (pool.h) */
	struct kvcd_holder holders[KVCD_MAX_HOLDERS];	/* memfd mode */
	uint32_t nholders;
	bool holders_unknown;		/* some holder is not recorded */
	uint64_t block_size;
	uint32_t nr_blocks;

	struct kvc_index *index;
	struct kvcd_events *events;	/* KV events, or NULL (events.c) */
	struct kvc_policy *policy;	/* the pool tier */
	struct kvc_admit *admit;	/* the pool tier's admission filter */
	uint32_t *by_block;		/* pool block index -> entry id */
	uint8_t *orphan_seen;		/* kernel mode: sealed, not stored */
	uint32_t *orphan_gen;		/* the generation orphan_seen saw */
	double orphan_at;		/* the next orphan pass, monotonic */
	uint64_t orphan_round;		/* ... and not before this round */
	uint64_t round;			/* rounds of the server loop begun */
	uint32_t orphans_seen;		/* the last pass saw and left them */

	/* The persistent tiers' state, private to tiers/ (tiers_priv.h). */
	struct kvcd_tiers *tiers;
	struct kvc_server *srv;		/* for deferred LOAD replies */

	struct kvc_metrics *metrics;
	struct kvc_daemon_metrics dm;
	int metrics_fd;			/* the loop watches it; -1: off */
	struct kvcd_scrapes *scrapes;	/* metrics_http.c; NULL: off */
	char *metrics_buf;
	size_t metrics_cap;
	struct kvcd_ns ns[KVCACHE_NS_MAX + 1];
	bool ns_table;			/* the state dir had a namespace table */
	bool state_missing;		/* ... no, and allow_missing_state */
	uint32_t unknown_ns;		/* tier ns<id> dirs nobody can reach */
	uint64_t ns_learned;		/* namespaces taken from g4 */
	uint64_t ns_conflicts;		/* ... described otherwise there */
	double nsshare_at;		/* the next look at unshared ones */
	bool nsshare_job;		/* a learning on g4's worker */
	uint32_t nsshare_after;		/* its next pass reads past this id */
	int journal_fd;			/* parents (journal.h); -1: none */
	uint64_t journal_bytes;		/* its size */
	uint64_t journal_last;		/* its size after the last compaction */
	uint64_t journal_compactions;
	uint64_t journal_min;		/* compact from this size on */
	uint64_t journal_errors;	/* appends that failed */
	int journal_last_error;		/* the last one's -errno, 0: none */
	double journal_retry_at;	/* no journal: when to try again */
	uint64_t state_errors;		/* namespace table saves refused */
	uint64_t refused_freed;		/* blocks of refused STOREs freed */
	struct kvcd_client clients[KVC_SERVER_MAX_CLIENTS];

	uint64_t lookups, lookup_keys, hit_keys, stores, evictions, errors;
	/* Blocks clients loaded through the fast index; TOUCH messages. */
	uint64_t fast_hits, touches;
	/* TOUCHes dropped over their connection's touch_rate. */
	uint64_t touches_dropped;
	/*
	 * What clients report in TOUCH of the lookups they answered from
	 * the fast index, clamped (kvcd_touch()): their word, kept apart
	 * from lookups, lookup_keys and hit_keys, which the daemon counted.
	 */
	uint64_t client_lookups, client_lookup_keys, client_hit_keys;
};

/* orphan_seen[]: a STORE refused the block (kvcd_drop_refused()). */
#define KVCD_ORPHAN_REFUSED	0x80

/* namespaces.c */
/* May peer p do want (4: read, 2: write) in namespace ns? */
bool kvcd_may(const struct kvcd *d, const struct kvc_peer *p, uint32_t ns,
	      unsigned int want);
/* memfd mode: may p read and write every namespace there is? */
bool kvcd_may_every_ns(const struct kvcd *d, const struct kvc_peer *p);
/* memfd mode: p was given the pool; remember who it is. */
void kvcd_holder_add(struct kvcd *d, const struct kvc_peer *p);
/* memfd mode: may every holder of the pool read and write n? */
bool kvcd_holders_allow(const struct kvcd *d, const struct kvcd_ns *n);
/* The state directory's file name, in out (PATH_MAX). */
void kvcd_path(const struct kvcd *d, const char *name, char *out);
int kvcd_new_salt(uint8_t salt[KVC_PROTO_SALT_SIZE]);
/* The namespace table: written whole, synced, renamed; read at start. */
int kvcd_ns_save(const struct kvcd *d);
int kvcd_ns_load(struct kvcd *d);
/*
 * Namespace ns's directories in g3 and g4: kvcached's, readable as the
 * namespace says. NOW: here (NS_CREATE); REPAIR: here, and everything
 * below made kvcached's (a start, before anything is served); WORKER:
 * g3 here, g4 by its metadata worker (a namespace learned while serving:
 * a server away holds the worker, not the loop).
 */
enum kvcd_ns_dirs {
	KVCD_NS_DIRS_NOW,
	KVCD_NS_DIRS_REPAIR,
	KVCD_NS_DIRS_WORKER,
};
void kvcd_ns_dirs(const struct kvcd *d, uint32_t ns, enum kvcd_ns_dirs how);
/* At start: blocks in g3 of namespaces the table does not know. */
int kvcd_check_state(struct kvcd *d);

/* nsshare.c: namespaces shared through g4's descriptions */
/* At start, before the tiers: learn the namespaces g4 describes. */
void kvcd_nsshare_start(struct kvcd *d);
/* Unknown namespace ns has a g4 directory: learn it; true if known now. */
bool kvcd_nsshare_learn(struct kvcd *d, uint32_t ns);
/* Describe (or check) this node's namespaces g4 lacks; rate-limited. */
void kvcd_nsshare_tick(struct kvcd *d);
/* Namespace ns was just created here: describe it. 0 or -errno. */
int kvcd_nsshare_created(struct kvcd *d, uint32_t ns);
/* Its salt was set here: rewrite its description. */
void kvcd_nsshare_salt_set(struct kvcd *d, uint32_t ns);

/* parents.c */
/* Journal entry id's link before its STORE is answered: 0 or -errno. */
int kvcd_journal_add(struct kvcd *d, uint32_t id);
/* Rewrite the journal with the links the index has now. */
int kvcd_journal_compact(struct kvcd *d);
/* Kernel mode, at start: index the sealed blocks the journal places. */
int kvcd_rebuild(struct kvcd *d);

/* requests.c: the server's request callback (server.h). */
int kvcd_request(void *ctx, struct kvc_peer *p, const uint8_t *msg,
		 size_t len, bool truncated, uint8_t *reply, int *pass_fd);

/* daemon.c: how many fast index segments the descriptors allow. */
uint32_t kvcd_fd_budget(void);

/* metrics_http.c */
int kvcd_metrics_open(struct kvcd *d);
/* metrics_fd is readable: serve the scrapers, without waiting on any. */
void kvcd_scrape(struct kvcd *d);
/* Cut every scraper, close the endpoint and remove its socket. */
void kvcd_metrics_close(struct kvcd *d);

/* reclaim.c */
int kvcd_set_pool(struct kvcd *d, uint32_t id, struct kvcache_handle h);
/* Forget entry id's pool copy; drop the entry if nothing is left of it. */
void kvcd_clear_pool(struct kvcd *d, uint32_t id);
/* Index observer: a pool copy's entry gained or lost a g3/g4 copy. */
void kvcd_pool_observed(void *arg, const struct kvc_index *idx, uint32_t id,
			unsigned int tier, bool present);
/*
 * FAST_NS: namespace ns's segment (-errno: none); a segment made now
 * gets the blocks the pool already holds of ns.
 */
int kvcd_fast_ns_fd(struct kvcd *d, uint32_t ns);
/* Count an eviction of the pool. */
void kvcd_evicted(struct kvcd *d);
void kvcd_check_pool(struct kvcd *d);
void kvcd_round(struct kvcd *d);
int kvcd_evict_to(struct kvcd *d, uint32_t want);
/*
 * The same, waiting for write-back spills of victims (kvcd_tiers_wait());
 * never from a tier completion, which would reap inside a reap.
 */
int kvcd_evict_to_wait(struct kvcd *d, uint32_t want);
/*
 * Evict entry id's pool block now: 0, -ESTALE (evicted already: its
 * entry is cleared), -EBUSY (pinned or mapped, or it has a child in the
 * pool) or the error of the eviction.
 */
int kvcd_evict_id(struct kvcd *d, uint32_t id);

/* tiers/: the daemon's side of g3 and g4 */
struct kvcd_tiers;
/* The tiers' state, off (d->tiers, before anything can call them). */
struct kvcd_tiers *kvcd_tiers_new(void);
/* Open g3 and g4 as configured; close: reap, then free d->tiers. */
int kvcd_tiers_open(struct kvcd *d);
void kvcd_tiers_close(struct kvcd *d);
/* Tier g3 or g4, NULL when off. */
struct kvc_tier *kvcd_tier(const struct kvcd *d, unsigned int tier);
/* Entry id was just stored in the pool: write-through spills. */
void kvcd_tiers_stored(struct kvcd *d, uint32_t id);
/*
 * The pool is about to evict entry id: write-back spills copy it out
 * first. 0: go ahead; -EBUSY: the write queue is full, keep it for now
 * (give it back to the policy); -EINPROGRESS: held in the pool until its
 * write is done (kept out of the policy; tiers/spill.c frees it).
 */
int kvcd_tiers_evicting(struct kvcd *d, uint32_t id);
/* Entry id's pool copy is gone (evicted, dropped): no longer held. */
void kvcd_tiers_forget(struct kvcd *d, uint32_t id);
/* Is entry id held in the pool for a write-back spill? */
bool kvcd_tiers_held(const struct kvcd *d, uint32_t id);
/*
 * Pool blocks held while their write-back spill is in flight: each is
 * freed when its write is published, so eviction counts them as coming
 * free rather than pick more victims for the same need.
 */
size_t kvcd_tiers_writing(const struct kvcd *d);
/*
 * Wait for one batch of tier completions, if any I/O is in flight, for
 * an eviction (promotions they defer run later, from the loop). false:
 * nothing was in flight.
 */
bool kvcd_tiers_wait(struct kvcd *d);
/*
 * LOAD of a key present in g3/g4 only: start bringing it up. 0 when the
 * result will come later (res->status set to KVCD_WAIT_PENDING), or the
 * status to return now.
 */
int kvcd_tiers_want(struct kvcd *d, uint32_t id);
/* Park a LOAD reply until its pending keys are in; false: no memory. */
bool kvcd_tiers_defer(struct kvcd *d, const struct kvc_peer *p,
		      const struct kvc_msg *m,
		      const struct kvc_load_result *res);
/* LOOKUP matched these: read ahead the ones only g3/g4 hold. */
void kvcd_tiers_prefetch(struct kvcd *d, const struct kvc_match *m,
			 size_t n);
void kvcd_tiers_access(struct kvcd *d, uint32_t id);
/* Is a copy of entry id being written to g3 or g4? */
bool kvcd_tiers_spilling(const struct kvcd *d, uint32_t id);
bool kvcd_tiers_readable(struct kvcd *d, int fd);
void kvcd_tiers_tick(struct kvcd *d);
void kvcd_tiers_closed(struct kvcd *d, const struct kvc_peer *p);
/* STATS entries of the tiers: fills up to max, returns how many. */
size_t kvcd_tiers_stats(struct kvcd *d, struct kvc_stat *st, size_t max);
/* The server's descriptors to watch (up to max); returns how many. */
size_t kvcd_tiers_fds(const struct kvcd *d, int *fds, size_t max);

#endif /* KVC_KVCD_H */
