// SPDX-License-Identifier: GPL-2.0
/*
 * tiers: kvcached's persistent tiers, g3 and g4 (tier.h), and how blocks
 * move between them and the DRAM pool (Documentation/design/tiers.md):
 * their completions, the loop's hooks, the stats, setup and teardown.
 * spill.c copies blocks out, promote.c reads them back, loads.c answers
 * the LOADs that waited (tiers_priv.h).
 *
 * Evictions that need room now (an ALLOC, a promotion, the kernel's
 * pressure event) wait for the writes they started, like direct reclaim
 * waits for writeback (kvcd_tiers_wait()); the background watermark
 * pass does not. A completion may promote, and a promotion may evict,
 * but a completion never waits: a promotion that finds no room inside a
 * reap is deferred to tiers_run_promotions(), which the loop runs
 * outside any reap or wait. At shutdown, writes in flight are reaped,
 * not abandoned.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "fault.h"
#include "log.h"
#include "tier_fs.h"
#include "tiers_priv.h"

/* A failed spill (write-through, or a dirty held block's) is tried again
 * this often, at most. */
#define RETRY_INTERVAL_S	1.0
/*
 * Tests that wait for many rounds of retries (faults_test, under TCG in
 * a VM) shorten it with KVCACHED_RETRY_MS, read once by
 * kvcd_tiers_open(); like KVCACHED_FAULT it is not a configuration
 * setting: a real disk that failed needs the full second.
 */
#define RETRY_ENV		"KVCACHED_RETRY_MS"

static const char *const tier_names[KVC_NR_TIERS] = { "pool", "g3", "g4" };

static bool ns_ok(void *arg, uint32_t ns)
{
	const struct kvcd *d = arg;

	return ns >= 1 && ns <= KVCACHE_NS_MAX && d->ns[ns].used;
}

struct done_ctx {
	struct kvcd *d;
	unsigned int tier;
};

static void tier_done(void *arg, const struct kvc_tier_done *o)
{
	struct done_ctx *c = arg;
	struct kvcd *d = c->d;
	struct kvcd_tiers *tr = d->tiers;
	int ret;

	if (o->op == KVC_TIO_WRITE) {
		uint32_t id;

		if (!o->status)
			kvc_metric_add(d->dm.written_bytes[c->tier],
				       o->bytes);
		if (kvc_index_find(d->index, o->ns, o->key, &id) ||
		    !tiers_present(d, id, KVC_TIER_POOL))
			return;
		if (kvcd_tiers_held(d, id))
			tiers_held_done(d, id, o->status);
		else if (o->status && tiers_write_through(d, c->tier) &&
			 tiers_retryable(o->status))
			tiers_queue_retry(d, id);
		return;
	}
	if (tiers_cookie_id(o->cookie) < tr->nfetching)
		tr->fetching[tiers_cookie_id(o->cookie)] = 0;
	if (o->id == KVC_ID_NONE || o->status ||
	    tiers_present(d, o->id, KVC_TIER_POOL))
		tiers_place_drop(d, o->cookie);
	if (o->id == KVC_ID_NONE)
		return;
	if (o->status) {
		kvc_metric_add(d->dm.misses[c->tier], 1);
		/*
		 * The next tier may still have a good copy. Only the next:
		 * a block this tier failed to read (EIO) stays present in
		 * it, and asking it again would loop on a bad sector.
		 */
		tiers_fetch_from(d, o->id, c->tier + 1);
		return;
	}
	kvc_metric_add(d->dm.hits[c->tier], 1);
	kvc_metric_add(d->dm.read_bytes[c->tier], o->bytes);
	if (tiers_present(d, o->id, KVC_TIER_POOL))
		return;		/* stored again meanwhile */
	/* Read in place: checked, so only the seal is left. */
	ret = tiers_place_seal(d, o->cookie, o->id, o->payload_len);
	/* A completion, inside a reap: no waiting for room here. */
	if (ret == -ENOENT)
		ret = tiers_promote(d, o->id, o->payload, o->payload_len,
				    false);
	if (ret == -ENOSPC &&
	    tiers_defer_promote(d, o->id, o->payload, o->payload_len)) {
		/* LOADs waiting on it keep waiting: tiers_run_promotions(). */
		tiers_set_fetching(d, o->id, 1);
		return;
	}
	if (ret) {
		tr->promote_errors++;
		return;
	}
	tr->promotions++;
	/* Pin it for the LOADs waiting on it before anything can evict it
	 * to make room for the next promotion. */
	tiers_settle(d);
}

/*
 * The tiers count their errors (tier.h); the metrics endpoint's counters
 * follow them, by the difference since the last look.
 */
static void sync_error_metrics(struct kvcd *d)
{
	struct kvcd_tiers *tr = d->tiers;

	for (unsigned int t = KVC_TIER_G3; t < KVC_NR_TIERS; t++) {
		const struct kvc_tier_stats *s;
		uint64_t seen;

		if (!tr->tier[t])
			continue;
		s = kvc_tier_stats(tr->tier[t]);
		seen = kvc_metric_counter_value(d->dm.spill_errors[t]);
		if (s->spill_errors > seen)
			kvc_metric_add(d->dm.spill_errors[t],
				       s->spill_errors - seen);
		seen = kvc_metric_counter_value(d->dm.read_errors[t]);
		if (s->read_errors > seen)
			kvc_metric_add(d->dm.read_errors[t],
				       s->read_errors - seen);
	}
}

/*
 * Reap tier t's completions (with wait: at least one, if any is in
 * flight). tier_done() may promote, and a promotion may evict, but never
 * waits for completions: it would reap inside this reap.
 */
static void reap(struct kvcd *d, unsigned int t, bool wait)
{
	struct done_ctx c = { d, t };

	kvc_tier_reap(d->tiers->tier[t], wait, tier_done, &c);
}

/* What a reap's completions made possible (promotions: from the loop). */
static void after_reap(struct kvcd *d, bool promotions)
{
	if (promotions)
		tiers_run_promotions(d);
	tiers_drain_fetches(d);
	tiers_drain_spills(d);
	sync_error_metrics(d);
	tiers_settle(d);
}

bool kvcd_tiers_wait(struct kvcd *d)
{
	struct kvcd_tiers *tr = d->tiers;

	for (unsigned int t = KVC_TIER_G3; t < KVC_NR_TIERS; t++) {
		if (!tr->tier[t] || !kvc_tier_in_flight(tr->tier[t]))
			continue;
		reap(d, t, true);
		/* The other tier's completions too, without waiting. */
		for (unsigned int u = KVC_TIER_G3; u < KVC_NR_TIERS; u++)
			if (u != t && tr->tier[u])
				reap(d, u, false);
		/* An eviction is waiting: promotions would evict in turn. */
		after_reap(d, false);
		return true;
	}
	return false;
}

bool kvcd_tiers_readable(struct kvcd *d, int fd)
{
	struct kvcd_tiers *tr = d->tiers;

	for (unsigned int t = KVC_TIER_G3; t < KVC_NR_TIERS; t++) {
		if (!tr->tier[t] || fd != kvc_tier_fd(tr->tier[t]))
			continue;
		reap(d, t, false);
		after_reap(d, true);
		/* Evictions waiting for write-back slots can go on now. */
		kvcd_check_pool(d);
		return true;
	}
	return false;
}

void kvcd_tiers_tick(struct kvcd *d)
{
	struct kvcd_tiers *tr = d->tiers;

	for (unsigned int t = KVC_TIER_G3; t < KVC_NR_TIERS; t++)
		if (tr->tier[t])
			kvc_tier_tick(tr->tier[t], ns_ok, d);
	kvcd_nsshare_tick(d);
	tiers_run_promotions(d);
	tiers_drain_fetches(d);
	tiers_drain_spills(d);
	tiers_retry_spills(d);
	sync_error_metrics(d);
	if (tr->waits)
		tiers_settle(d);
}

size_t kvcd_tiers_fds(const struct kvcd *d, int *fds, size_t max)
{
	struct kvcd_tiers *tr = d->tiers;
	size_t n = 0;

	for (unsigned int t = KVC_TIER_G3; t < KVC_NR_TIERS && n < max; t++)
		if (tr->tier[t])
			fds[n++] = kvc_tier_fd(tr->tier[t]);
	return n;
}

#define TIER_NSTATS	15

size_t kvcd_tiers_stats(struct kvcd *d, struct kvc_stat *st, size_t max)
{
	struct kvcd_tiers *tr = d->tiers;
	static char names[KVC_NR_TIERS][TIER_NSTATS][32];
	static const char *const what[TIER_NSTATS] = {
		"blocks", "bytes", "capacity", "spills", "spill_errors",
		"spill_exists", "reads", "read_errors", "misses", "corrupt",
		"evictions", "lease_skips", "found", "lost", "scans",
	};
	size_t n = 0;

	for (unsigned int t = KVC_TIER_G3; t < KVC_NR_TIERS; t++) {
		const struct kvc_tier_stats *s;
		uint64_t v[TIER_NSTATS];

		if (!tr->tier[t])
			continue;
		s = kvc_tier_stats(tr->tier[t]);
		v[0] = s->blocks;
		v[1] = s->usage;
		v[2] = kvc_tier_capacity(tr->tier[t]);
		v[3] = s->spills;
		v[4] = s->spill_errors;
		v[5] = s->spill_exists;
		v[6] = s->reads;
		v[7] = s->read_errors;
		v[8] = s->misses;
		v[9] = s->corrupt;
		v[10] = s->evictions;
		v[11] = s->lease_skips;
		v[12] = s->found;
		v[13] = s->lost;
		v[14] = s->scans;
		for (size_t i = 0; i < TIER_NSTATS && n < max; i++) {
			snprintf(names[t][i], sizeof(names[t][i]), "%s_%s",
				 tier_names[t], what[i]);
			st[n++] = (struct kvc_stat){ names[t][i], 0, v[i] };
		}
	}
	if (n + 12 <= max) {
		st[n++] = (struct kvc_stat){ "pool_writeback", 0,
					     tr->held_writing };
		st[n++] = (struct kvc_stat){ "pool_dirty", 0, tr->held_dirty };
		st[n++] = (struct kvc_stat){ "promotions", 0, tr->promotions };
		st[n++] = (struct kvc_stat){ "promote_errors", 0,
					     tr->promote_errors };
		st[n++] = (struct kvc_stat){ "promote_in_place", 0,
					     tr->promote_in_place };
		st[n++] = (struct kvc_stat){ "prefetches", 0, tr->prefetches };
		st[n++] = (struct kvc_stat){ "spill_retries", 0,
					     tr->spill_retries };
		st[n++] = (struct kvc_stat){ "load_timeouts", 0,
					     tr->load_timeouts };
		st[n++] = (struct kvc_stat){ "through_dropped", 0,
					     tr->through_dropped };
		st[n++] = (struct kvc_stat){ "spill_deferred", 0,
					     tr->spill_deferred };
		st[n++] = (struct kvc_stat){ "through_shed", 0,
					     tr->through_shed };
		st[n++] = (struct kvc_stat){ "fetch_elsewhere", 0,
					     tr->fetch_elsewhere };
	}
	/* Only in a daemon started with KVCACHED_FAULT (fault.h). */
	if (kvc_fault_armed && n < max)
		st[n++] = (struct kvc_stat){ "faults_injected", 0,
					     kvc_fault_injected_total() };
	return n;
}

static int open_tier(struct kvcd *d, unsigned int tier, const char *node)
{
	struct kvcd_tiers *tr = d->tiers;
	bool g3 = tier == KVC_TIER_G3;
	struct kvc_tier_config tc = {
		.tier = tier,
		.dir = g3 ? d->cfg.g3.directory : d->cfg.g4.directory,
		.capacity = g3 ? d->cfg.g3.capacity : d->cfg.g4.capacity,
		.shared = !g3,
		.fsync = (g3 ? d->cfg.g3.fsync : d->cfg.g4.fsync) ==
			 KVC_CONFIG_FSYNC_ALWAYS,
		.depth = g3 ? d->cfg.g3.queue_depth : d->cfg.g4.queue_depth,
		.max_payload = d->block_size,
		.node = node,
		.grace_ms = d->cfg.g4.grace_ms,
		.scan_interval_ms = d->cfg.g4.scan_interval_ms,
		.policy = kvc_config_policy_name(g3 ? d->cfg.eviction.g3_policy :
						 d->cfg.eviction.g4_policy),
		.io_priority = g3 ? d->cfg.g3.io_priority : d->cfg.g4.io_priority,
	};
	unsigned int k = g3 ? d->cfg.eviction.g3_admit :
			 d->cfg.eviction.g4_admit;
	const struct kvc_tier_stats *s;
	uint32_t trusted;
	struct kvc_tier_fs fs;
	double t0;
	long found;
	int ret;

	if (!tc.dir[0])
		return 0;
	tc.trusted_uid = !g3 && kvc_config_trusted_uid(&d->cfg, &trusted) ?
			 (uid_t)trusted : (uid_t)-1;
	ret = kvc_tier_open(&tr->tier[tier], &tc, d->index);
	if (ret) {
		kvc_err("%s %s: %s%s", tier_names[tier],
			tc.dir, strerror(-ret), ret != -ENOMEM ? "" :
			" (its I/O buffers, queue_depth blocks, are locked memory: raise RLIMIT_MEMLOCK or lower queue_depth)");
		return ret;
	}
	/* What its filesystem can do; refused if it cannot publish. */
	if (kvc_tier_fs_probe(tc.dir, node, &fs))
		kvc_warn("%s %s: its mount is not in /proc/self/mountinfo: its filesystem is not checked",
			 tier_names[tier], tc.dir);
	ret = kvc_tier_fs_judge(&fs, tier_names[tier], tc.dir, tc.shared,
				tc.grace_ms);
	if (ret)
		return ret;
	if (!kvc_tier_writable(tr->tier[tier])) {
		kvc_warn("%s %s is not writable (%s): blocks there are read, none are written",
			 tier_names[tier], tc.dir,
			 strerror(-kvc_tier_stats(tr->tier[tier])->last_error));
	} else if (tc.shared) {
		/* Nothing written under a name another node uses. */
		char why[512];

		ret = kvc_tier_node_claim(tr->tier[tier], why, sizeof(why));
		if (ret) {
			kvc_err("%s %s: %s", tier_names[tier], tc.dir,
				why[0] ? why : strerror(-ret));
			return ret;
		}
		if (why[0])
			kvc_warn("%s %s: %s", tier_names[tier], tc.dir, why);
	}
	ret = kvc_admit_create(&tr->tier_admit[tier], k, d->nr_blocks);
	if (ret)
		return ret;
	t0 = kvc_now();
	found = kvc_tier_recover(tr->tier[tier], ns_ok, d);
	if (found < 0) {
		kvc_err("%s %s: recovery: %s",
			tier_names[tier], tc.dir, strerror((int)-found));
		return (int)found;
	}
	s = kvc_tier_stats(tr->tier[tier]);
	kvc_info("%s %s: %ld blocks, %" PRIu64 " of %" PRIu64
		 " bytes, %" PRIu64 " quarantined, recovered in %.3f s",
		 tier_names[tier], tc.dir, found, s->usage, tc.capacity,
		 s->corrupt, kvc_now() - t0);
	return 0;
}

struct kvcd_tiers *kvcd_tiers_new(void)
{
	struct kvcd_tiers *tr = calloc(1, sizeof(*tr));

	if (tr)
		tr->retry_interval = RETRY_INTERVAL_S;
	return tr;
}

struct kvc_tier *kvcd_tier(const struct kvcd *d, unsigned int tier)
{
	return tier < KVC_NR_TIERS ? d->tiers->tier[tier] : NULL;
}

int kvcd_tiers_open(struct kvcd *d)
{
	struct kvcd_tiers *tr = d->tiers;
	char host[KVC_CONFIG_NODE_MAX] = "";
	const char *node = d->cfg.g4.node;
	const char *env = getenv(RETRY_ENV);
	int ret;

	if (env && env[0]) {
		char *end;
		unsigned long ms;

		errno = 0;
		ms = strtoul(env, &end, 10);
		/* 1 ms to the default: longer or garbage is a test bug. */
		if (errno || *end || env[0] == '-' || !ms || ms > 1000) {
			kvc_err("%s=%s: want 1..1000 (milliseconds)",
				RETRY_ENV, env);
			return -EINVAL;
		}
		tr->retry_interval = ms / 1000.0;
		kvc_info("spill retries every %lu ms (%s)",
			 ms, RETRY_ENV);
	}
	tr->waits = calloc(KVC_SERVER_MAX_CLIENTS, sizeof(*tr->waits));
	if (!tr->waits)
		return -ENOMEM;
	if (!node[0]) {
		/* Temp names carry it: no '/' (config.c checks a set one). */
		if (gethostname(host, sizeof(host) - 1) || !host[0])
			strcpy(host, "node");
		for (char *c = host; *c; c++)
			if (*c == '/')
				*c = '_';
		node = host;
	}
	ret = open_tier(d, KVC_TIER_G3, node);
	if (!ret)
		ret = open_tier(d, KVC_TIER_G4, node);
	return ret;
}

void kvcd_tiers_close(struct kvcd *d)
{
	struct kvcd_tiers *tr = d->tiers;
	uint64_t unwritten = 0;

	if (!d->tiers)
		return;	/* kvcd_create() failed before it */
	/*
	 * Writes in flight are finished and published, not abandoned: a
	 * block held for its write-back has no other copy. Without the
	 * daemon's callbacks: the clients are gone.
	 */
	for (unsigned int t = KVC_TIER_G3; t < KVC_NR_TIERS; t++)
		while (tr->tier[t] && kvc_tier_in_flight(tr->tier[t]))
			if (kvc_tier_reap(tr->tier[t], true, NULL, NULL) < 0)
				break;
	for (size_t id = 0; id < tr->nheld; id++)
		unwritten += tr->held[id] && !tiers_on_a_tier(d, (uint32_t)id);
	if (unwritten)
		kvc_err("%" PRIu64 " dirty blocks (written back at eviction, every write failed) reached no tier%s",
			unwritten, kvc_pool_has(d->pool, KVC_POOL_PERSISTENT) ?
			"; they stay in kvcache.ko's pool" : "");
	for (unsigned int t = KVC_TIER_G3; t < KVC_NR_TIERS; t++) {
		kvc_tier_close(tr->tier[t]);
		kvc_admit_destroy(tr->tier_admit[t]);
	}
	if (tr->waits)
		for (uint32_t i = 0; i < KVC_SERVER_MAX_CLIENTS; i++)
			if (tr->waits[i].used)
				tiers_wait_free(&tr->waits[i]);
	free(tr->waits);
	free(tr->fetchq);
	free(tr->spillq);
	free(tr->retryq);
	free(tr->fetching);
	/* Reads into them are over (reaped above): back to the pool. */
	for (uint32_t i = 0; tr->places && i < KVCD_NR_PLACES; i++)
		if (tr->places[i].used)
			kvc_pool_discard(d->pool, tr->places[i].h);
	free(tr->places);
	free(tr->held);
	while (tr->npromo)
		free(tr->promo[--tr->npromo].payload);
	free(tr->promo);
	free(d->tiers);
	d->tiers = NULL;
}
