/* SPDX-License-Identifier: GPL-2.0 */
/*
 * tier_priv: one persistent tier's private state (tier.h), shared by
 *   tier.c          presence, open and close, the periodic work
 *   tier_rw.c       spills and fetches through tierio, their completions
 *   tier_scan.c     rescans of a shared directory
 *   tier_recover.c  recovery from the nodes' manifests at open
 *   tier_gc.c       capacity: eviction of files, delayed deletion
 *   tier_worker.c   the metadata worker: the jobs the loop posts
 * and by nothing else.
 *
 * Per-entry state lives in arrays indexed by index id, grown on demand:
 *   mark[id]      the rescan pass that last saw (or wrote) the file
 *   touched[id]   when this node last renewed the file's lease, seconds
 *   spilling[id]  a write of the block is in flight
 * Ids are reused after an entry leaves the index, so these are hints
 * (a stale one costs at most a skipped spill or an early lease renewal);
 * what a finished request applies to is found again by (ns, key).
 *
 * A request in flight has a pend record (one per I/O slot) holding its
 * namespace, key and size; its index is the tierio cookie.
 *
 * Threads: the daemon's loop owns everything here but struct
 * tier_worker's lists (its mutex), the walk cache (wcache, nwcache),
 * which only the worker touches, and a queued job's cancel flag, which
 * the loop sets and the worker reads (atomics). The worker reads the fixed
 * configuration (cfg, dir, node, opened, writable) and runs jobs
 * (tier_worker.c); the loop applies their results. cfg.capacity alone
 * changes (kvc_tier_set_capacity(), a reload): only the loop reads it.
 */
#ifndef KVC_TIER_PRIV_H
#define KVC_TIER_PRIV_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "blockfile.h"
#include "tier.h"
#include "tierio.h"

/* The loop's time per tick for applying a walk, at most. */
#define TIER_SCAN_BUDGET_S	0.005
/* GC jobs in flight at most, and how often .gc/ is swept, seconds. */
#define TIER_GC_MAX_JOBS	64
#define TIER_TRASH_EVERY_S	1.0

struct pend {
	bool used;
	bool write;
	bool first;			/* write: no parent */
	uint32_t ns;
	uint32_t id;
	uint8_t key[KVC_BF_KEY_SIZE];
	uint8_t parent[KVC_BF_KEY_SIZE];	/* write */
	uint64_t size;			/* file bytes */
	uint64_t cookie;
};

/* A block file a scan found and the index does not have yet. */
struct rec {
	uint32_t ns;
	bool first;
	uint8_t key[KVC_BF_KEY_SIZE];
	uint8_t parent[KVC_BF_KEY_SIZE];
	uint64_t size;
	int64_t mtime;
};

/* A walk of the directory (the worker's) and its application (the loop's). */
struct tier_walk {
	struct rec *recs;		/* every block file, sorted */
	size_t nrecs, cap;
	uint64_t corrupt;		/* files it quarantined */
	size_t pos;			/* the loop: next record to apply */
	uint32_t last_ns;		/* the loop: ns_ok() of the last ns */
	bool last_ok;
};

enum tier_job_kind {
	TJ_WALK,		/* a rescan's walk: walk */
	TJ_GC,			/* a victim: path, ns, key, size */
	TJ_UNLINK_OLD,		/* an unreachable file: path, age, size */
	TJ_TOUCH,		/* a lease renewal: path */
	TJ_TRASH,		/* delete what waited its grace in .gc/ */
	TJ_QUARANTINE,		/* a corrupt file: ns, key */
	TJ_CALL,		/* kvc_tier_call(): run, then done */
};

struct tier_job {
	struct tier_job *next;
	int kind;			/* enum tier_job_kind */
	int status;			/* the worker's result */
	int cancel;			/* TJ_GC: a read wants the file
					 * (set by the loop, read by the
					 * worker: atomic) */
	uint32_t ns;
	uint8_t key[KVC_BF_KEY_SIZE];
	uint64_t size;
	int64_t age;			/* seconds */
	struct tier_walk *walk;
	kvc_tier_call_fn run, done;	/* TJ_CALL */
	void *arg;
	char path[PATH_MAX];
};

struct tier_worker {
	bool on;			/* the thread runs */
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct tier_job *todo, *todo_tail;	/* mu */
	struct tier_job *done, *done_tail;	/* mu */
	struct tier_job *running;		/* mu */
	bool stop, exited;			/* mu */
	unsigned int queued;		/* the loop's: posted, not reaped */
	/* The worker's: the server's clock (tier_server_now_ns()). */
	int64_t clock_at;		/* last measured, CLOCK_MONOTONIC ns */
	int64_t offset;			/* server's wall clock - it, ns */
	bool clock_known;		/* offset measured at least once */
	bool clock_warned;
};

struct kvc_tier {
	struct kvc_tier_config cfg;
	char dir[PATH_MAX - 64];	/* room for ns<id>/aa/bb/<key>.kvb */
	char node[KVC_BF_MAX_TAG + 1];
	struct kvc_index *idx;
	struct kvc_policy *policy;
	struct kvc_tio *tio;
	bool writable;
	int write_err;			/* why not writable */
	int mf_fd;			/* this node's manifest, or -1 */
	int root_fd;			/* t->dir: every path below is
					 * resolved from it (beneath.h) */
	uid_t owner;			/* cfg.trusted_uid: besides the
					 * effective uid, whose files are
					 * kvcached's here */
	char mf_path[PATH_MAX];
	int node_fd;			/* shared: our claim on the name */
	char node_path[PATH_MAX];	/* <dir>/.nodes/<node> */
	int64_t node_beat;		/* its last rewrite, wall clock */
	uint64_t mf_records;		/* appended since it was rewritten */
	bool bg_pass;			/* g3: one scan after a recovery */
	int64_t opened;			/* wall clock at open, seconds */
	struct kvc_tier_stats st;

	uint32_t *mark, *touched;
	uint8_t *spilling;
	size_t nids;			/* length of the arrays */

	struct pend *pend;		/* cfg.depth records */

	struct tier_worker w;
	struct rec *wcache;		/* the worker's: its last walk */
	size_t nwcache;
	uint8_t *ns_made;		/* bit per ns: its directory exists */
	uint64_t gc_pending;		/* bytes of GC jobs in flight */
	bool gc_no_credit;		/* spills take only room that is there */
	unsigned int gc_jobs;
	struct tier_job *gc_flight[TIER_GC_MAX_JOBS];	/* those jobs */
	bool trash_posted;
	double trash_last;

	/* The rescan in progress. */
	uint32_t pass;			/* number of the pass, from 1 */
	bool in_pass;			/* walk posted, or being applied */
	struct tier_walk *walk;		/* back from the worker */
	struct rec *recs;
	size_t nrecs, caprecs;
	size_t *chain, capchain;	/* insert_rec()'s stack */
	uint64_t pass_bytes;		/* bytes of files seen this pass */
	uint64_t orphan_bytes;		/* unreachable files' bytes */
	double pass_start;		/* kvc_now() */
};

/* tier.c */
/* Wall clock, seconds: leases and ages are compared across nodes. */
int64_t tier_now_s(void);
/* The namespace's directory: dir/ns<id> (t->dir leaves room for it). */
void tier_ns_dir(const struct kvc_tier *t, uint32_t ns, char *out,
		 size_t len);
/* Grow the per-entry arrays to hold id: 0 or -ENOMEM. */
int tier_ensure_ids(struct kvc_tier *t, uint32_t id);
/* Block (ns, key)'s file path: 0, or -ENAMETOOLONG. */
int tier_file_path(const struct kvc_tier *t, uint32_t ns,
		   const uint8_t *key, char *out, size_t len);
bool tier_is_present(const struct kvc_tier *t, uint32_t id);
/* The entry is in this tier, in a file of size bytes. */
int tier_set_present(struct kvc_tier *t, uint32_t id, uint64_t size);
/* The file is gone (or going): the entry is no longer in this tier. */
void tier_set_absent(struct kvc_tier *t, uint32_t id);
/* Move a corrupt file aside for examination; count it. */
void tier_quarantine(struct kvc_tier *t, uint32_t ns, const uint8_t *key);

/*
 * The directory holding @path (a path under t->dir), opened below the
 * tier root without following a link (beneath.h), and in *@name the
 * last component of @path. The descriptor, or -errno.
 */
int tier_open_parent(const struct kvc_tier *t, const char *path,
		     const char **name);
/* An error that says the file is bad, not the disk? */
bool tier_corrupt_err(int err);

/* tier_scan.c */
/* The worker's walk of every ns<id>/aa/bb (cached: with its cache). */
int tier_walk_run(struct kvc_tier *t, struct tier_walk *w, bool cached);
void tier_walk_free(struct tier_walk *w);
/* A pass: posted, walked (the job is back), applied a step a tick. */
int tier_pass_post(struct kvc_tier *t);
void tier_pass_walked(struct kvc_tier *t, struct tier_walk *w, int status);
bool tier_pass_step(struct kvc_tier *t, kvc_tier_ns_fn ns_ok, void *arg,
		    double budget_s);
void tier_pass_finish(struct kvc_tier *t, kvc_tier_ns_fn ns_ok, void *arg);
void tier_pass_end(struct kvc_tier *t);
int tier_push_rec(struct kvc_tier *t, const struct rec *r);
void tier_scan_tmp(struct kvc_tier *t, int dirfd, const char *name,
		   int64_t now);

/* tier_recover.c */
/* Rewrite this node's manifest with the files it has now. */
void tier_mf_compact(struct kvc_tier *t);

/* tier_gc.c */
void tier_gc(struct kvc_tier *t, uint64_t need);
uint64_t tier_used(const struct kvc_tier *t);
/* Room for size more bytes (a spill's admission)? */
bool tier_room(const struct kvc_tier *t, uint64_t size);
void tier_gc_done(struct kvc_tier *t, const struct tier_job *j);
/* A read of (ns, key) is starting: a GC job in flight for it stops. */
void tier_gc_cancel(struct kvc_tier *t, uint32_t ns, const uint8_t *key);
void tier_gc_trash(struct kvc_tier *t);	/* the worker's */

/* tier_worker.c */
int tier_worker_start(struct kvc_tier *t);
/* false: the worker is stuck in the filesystem and was left running. */
bool tier_worker_stop(struct kvc_tier *t);
struct tier_job *tier_job_new(int kind);
void tier_job_free(struct tier_job *j);
/* Queue j (freed on failure: -EAGAIN when the queue is full). */
int tier_job_post(struct kvc_tier *t, struct tier_job *j);
/* Apply the jobs the worker finished; wait until it has none. */
void tier_jobs_reap(struct kvc_tier *t);
void tier_jobs_wait(struct kvc_tier *t);
/* The worker's, in a long job: run the lease renewals queued meanwhile. */
void tier_worker_renew(struct kvc_tier *t);
/*
 * The worker's: the wall clock of the server that holds a shared tier,
 * nanoseconds, as file times there are set by it; this node's wall
 * clock elsewhere. tier_age_ns(): how long ago by it a file time was.
 */
int64_t tier_server_now_ns(struct kvc_tier *t);
int64_t tier_age_ns(struct kvc_tier *t, const struct timespec *ts);
/* tier.c: apply one finished job; true when it may be freed. */
bool tier_job_done(struct kvc_tier *t, struct tier_job *j);

#endif /* KVC_TIER_PRIV_H */
