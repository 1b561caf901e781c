// SPDX-License-Identifier: GPL-2.0
/*
 * daemon: kvcached's setup and teardown, the server's callbacks and
 * what a reload changes (daemon.h). The state is struct kvcd (kvcd.h);
 * the work is done in
 *   namespaces.c    rights and the namespace table
 *   requests.c      the answers to clients
 *   reclaim.c       the pool tier: accounting, eviction, orphans
 *   nsshare.c       namespaces shared by the nodes of one g4
 *   parents.c       the parents journal, the rebuild after a restart
 *   metrics_http.c  the metrics endpoint
 *   pool/           the pool behind one interface (kernel, memfd)
 *   tiers/          g3 and g4
 *
 * Single-threaded: everything runs on the server loop's thread.
 */
#include "daemon.h"
#include "events.h"
#include "kvcd.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "devinfo.h"
#include "journal.h"
#include "log.h"

static int kvcd_connected(void *ctx, struct kvc_peer *p)
{
	struct kvcd *d = ctx;

	d->clients[p->id].hello = false;
	d->clients[p->id].version = 0;
	/* No TOUCH yet: its first finds a full budget (kvcd_touch()). */
	d->clients[p->id].touch_tokens = 0;
	d->clients[p->id].touch_at = 0;
	kvc_debug("client %" PRIu32 " connected: pid %d uid %u gid %u", p->id,
		  (int)p->pid, (unsigned int)p->uid, (unsigned int)p->gid);
	kvc_metric_add(d->dm.connections, 1);
	kvc_metric_add(d->dm.connections_total, 1);
	return 0;
}

static void kvcd_closed(void *ctx, struct kvc_peer *p)
{
	struct kvcd *d = ctx;

	/* memfd mode: its pins and unsealed blocks go, as at close(2). */
	kvc_pool_release(d->pool, p->id);
	kvcd_tiers_closed(d, p);
	kvc_debug("client %" PRIu32 " closed: pid %d", p->id, (int)p->pid);
	d->clients[p->id].hello = false;
	kvc_metric_sub(d->dm.connections, 1);
}

static void kvcd_pressure(const struct kvc_pool_state *st, void *arg)
{
	struct kvcd *d = arg;

	/* A client's ALLOC failed or will: free blocks, written back. */
	if (st->pressure)
		kvcd_evict_to_wait(d, st->high_watermark);
}

static void kvcd_readable(void *ctx, int fd)
{
	struct kvcd *d = ctx;

	if (kvcd_tiers_readable(d, fd))
		return;
	if (fd >= 0 && fd == kvc_pool_events_fd(d->pool))
		kvc_pool_events_read(d->pool, kvcd_pressure, d);
	else if (fd == d->metrics_fd)
		kvcd_scrape(d);
}

static void kvcd_tick(void *ctx)
{
	kvcd_check_pool(ctx);
	kvcd_tiers_tick(ctx);
	kvcd_events_flush(ctx);
}

static void kvcd_loop_round(void *ctx)
{
	kvcd_round(ctx);
}

const struct kvc_server_ops kvcd_server_ops = {
	.request	= kvcd_request,
	.connected	= kvcd_connected,
	.closed		= kvcd_closed,
	.readable	= kvcd_readable,
	.tick		= kvcd_tick,
	.round		= kvcd_loop_round,
};

/* ---- setup --------------------------------------------------------------- */

/*
 * Descriptors kept for everything but the fast index's segments: a
 * socket per client, the tiers' files in flight at their deepest queues,
 * and the rest (rings, listening sockets, scrapers, journal, namespace
 * table, directories, events). Segments get what the soft RLIMIT_NOFILE
 * (main.c raised it to the hard one) leaves above that, and never more
 * than half of it, so a low limit still leaves clients their share.
 */
#define KVCD_FD_RESERVE		(KVC_SERVER_MAX_CLIENTS + 2 * 256 + 256)

uint32_t kvcd_fd_budget(void)
{
	struct rlimit rl;
	rlim_t cur;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return 0;
	cur = rl.rlim_cur;
	if (cur > 2 * (rlim_t)KVCD_FD_RESERVE)
		cur -= KVCD_FD_RESERVE;
	else
		cur /= 2;
	return cur > KVCACHE_NS_MAX ? KVCACHE_NS_MAX : (uint32_t)cur;
}

static int kvcd_open_pool(struct kvcd *d, const char *device)
{
	struct kvc_pool_config pc = {
		.want = d->cfg.daemon.mode == KVC_CONFIG_MODE_MEMFD ?
			KVC_POOL_WANT_MEMFD :
			d->cfg.daemon.mode == KVC_CONFIG_MODE_KERNEL ?
			KVC_POOL_WANT_KERNEL : KVC_POOL_WANT_AUTO,
		.device = device,
		.block_size = d->cfg.pool.block_size,
		.pool_size = d->cfg.pool.memfd_size,
		.hugetlb = d->cfg.pool.hugetlb == KVC_CONFIG_HUGETLB_YES ? 1 :
			   d->cfg.pool.hugetlb == KVC_CONFIG_HUGETLB_NO ? 0 : -1,
		.mlock = d->cfg.pool.mlock,
		.fast_index = d->cfg.pool.fast_index,
		.fast_max = kvcd_fd_budget(),
	};
	int ret;

	ret = kvc_pool_open(&pc, &d->pool);
	if (ret)
		return ret;
	d->block_size = d->pool->block_size;
	d->nr_blocks = d->pool->nr_blocks;
	return 0;
}

static const char *kvcd_policy_name(int policy)
{
	switch (policy) {
	case KVC_CONFIG_POLICY_S3FIFO:
		return "s3fifo";
	case KVC_CONFIG_POLICY_COST:
		return "cost";
	case KVC_CONFIG_POLICY_DENSITY:
		return "density";
	default:
		return "lru";
	}
}

int kvcd_create(struct kvcd **out, const struct kvcd_options *opt)
{
	char path[PATH_MAX];
	uint64_t seed = 0;
	const char *env;
	struct kvcd *d;
	int ret;

	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->cfg = *opt->cfg;
	d->tiers = kvcd_tiers_new();
	if (!d->tiers) {
		free(d);
		return -ENOMEM;
	}
	d->journal_fd = -1;
	d->metrics_fd = -1;
	/* Room for the longest file name in it, "namespaces.new". */
	if (strlen(opt->state_dir) + 16 > sizeof(d->state_dir)) {
		ret = -ENAMETOOLONG;
		goto err;
	}
	strcpy(d->state_dir, opt->state_dir);
	if (mkdir(d->state_dir, 0700) && errno != EEXIST) {
		ret = -errno;
		kvc_err("%s: %s", d->state_dir,
			strerror(errno));
		goto err;
	}
	/* It holds the salts: kvcached's alone, whatever made it. */
	if (chmod(d->state_dir, 0700))
		kvc_warn("chmod %s: %s", d->state_dir, strerror(errno));
	ret = kvcd_open_pool(d, opt->device);
	if (ret)
		goto err;
	/* A random hash seed: nobody can aim keys at one place of the table. */
	if (getrandom(&seed, sizeof(seed), 0) != sizeof(seed))
		seed = (uint64_t)time(NULL) ^ (uint64_t)getpid() << 32;
	d->by_block = malloc(d->nr_blocks * sizeof(*d->by_block));
	d->orphan_seen = calloc(d->nr_blocks, 1);
	d->orphan_gen = calloc(d->nr_blocks, sizeof(*d->orphan_gen));
	d->metrics = kvc_metrics_new();
	ret = -ENOMEM;
	if (!d->by_block || !d->orphan_seen || !d->orphan_gen || !d->metrics)
		goto err;
	memset(d->by_block, 0xff, d->nr_blocks * sizeof(*d->by_block));
	ret = kvc_index_create(&d->index, d->nr_blocks, seed);
	if (!ret)
		ret = kvc_index_observe(d->index, kvcd_pool_observed, d);
	if (!ret)
		ret = kvc_policy_create(&d->policy,
					kvcd_policy_name(d->cfg.eviction.policy),
					d->index, KVC_TIER_POOL, d->nr_blocks);
	if (!ret && d->cfg.eviction.policy == KVC_CONFIG_POLICY_S3FIFO)
		ret = kvc_policy_set_small(d->policy,
					   d->cfg.eviction.s3fifo_small);
	if (!ret)
		ret = kvc_admit_create(&d->admit, d->cfg.eviction.pool_admit,
				       d->nr_blocks);
	if (!ret)
		ret = kvc_metrics_register_daemon(d->metrics, &d->dm);
	if (ret)
		goto err;
	ret = kvcd_ns_load(d);
	/* Namespaces other nodes described in g4 are not unknown ones. */
	if (!ret)
		kvcd_nsshare_start(d);
	if (!ret)
		ret = kvcd_check_state(d);
	if (ret)
		goto err;
	ret = kvcd_metrics_open(d);
	if (ret) {
		kvc_err("metrics endpoint: %s",
			strerror(-ret));
		goto err;
	}
	/* Before the pool's rebuild and the tiers' recovery: what they
	 * find is published as stored. */
	ret = kvcd_events_open(d);
	if (ret)
		goto err;
	/*
	 * The journal restarts with the blocks that are still there: the
	 * rebuild places them, the compaction writes their links. In memfd
	 * mode the pool dies with the daemon and no journal could help a
	 * restart: none is written, and a stale one goes.
	 */
	kvcd_path(d, "parents", path);
	d->journal_min = KVC_JOURNAL_MIN_COMPACT;
	/* Tests compact sooner, to see it happen within a few STOREs. */
	env = getenv("KVCACHED_JOURNAL_MIN");
	if (env && strtoull(env, NULL, 10) >= KVC_JOURNAL_REC)
		d->journal_min = strtoull(env, NULL, 10);
	if (kvc_pool_has(d->pool, KVC_POOL_PERSISTENT)) {
		kvcd_rebuild(d);
		if (kvcd_journal_compact(d))
			kvc_err("%s: no journal (restarts will lose chains)",
				path);
	} else {
		char tmp[PATH_MAX];

		kvcd_path(d, "parents.new", tmp);
		if ((unlink(path) && errno != ENOENT) ||
		    (unlink(tmp) && errno != ENOENT))
			kvc_warn("stale %s: %s", path,
				 strerror(errno));
	}
	/* After the pool: blocks found in both get both presence bits. */
	ret = kvcd_tiers_open(d);
	if (ret)
		goto err;
	/* Directories made by hand or by an older kvcached get them too. */
	for (uint32_t i = 1; i <= KVCACHE_NS_MAX; i++)
		if (d->ns[i].used)
			kvcd_ns_dirs(d, i, KVCD_NS_DIRS_REPAIR);
	/* This node's namespaces g4 does not describe yet. */
	kvcd_nsshare_tick(d);
	*out = d;
	return 0;
err:
	kvcd_destroy(d);
	return ret;
}

void kvcd_destroy(struct kvcd *d)
{
	if (!d)
		return;
	kvcd_tiers_close(d);
	if (d->journal_fd >= 0)
		close(d->journal_fd);
	kvcd_metrics_close(d);
	free(d->metrics_buf);
	kvcd_events_close(d);
	kvc_admit_destroy(d->admit);
	kvc_policy_destroy(d->policy);
	kvc_index_destroy(d->index);
	kvc_metrics_free(d->metrics);
	kvc_pool_close(d->pool);
	free(d->by_block);
	free(d->orphan_seen);
	free(d->orphan_gen);
	free(d);
}

void kvcd_set_server(struct kvcd *d, struct kvc_server *s)
{
	d->srv = s;
}

size_t kvcd_watch_fds(const struct kvcd *d, int *fds, size_t max)
{
	size_t n = 0;

	if (kvc_pool_events_fd(d->pool) >= 0 && n < max)
		fds[n++] = kvc_pool_events_fd(d->pool);
	if (d->metrics_fd >= 0 && n < max)
		fds[n++] = d->metrics_fd;
	return n + kvcd_tiers_fds(d, fds + n, max - n);
}

const char *kvcd_mode_name(const struct kvcd *d)
{
	return kvc_pool_name(d->pool);
}

void kvcd_status(const struct kvcd *d, char *buf, size_t len)
{
	const struct kvc_config_listen *m = &d->cfg.daemon.metrics;
	char total[32], bs[32], metrics[KVC_CONFIG_SOCK_PATH_MAX + 64];

	kvc_format_bytes((uint64_t)d->nr_blocks * d->block_size, total,
			 sizeof(total));
	kvc_format_bytes(d->block_size, bs, sizeof(bs));
	if (m->kind == KVC_CONFIG_LISTEN_UNIX)
		snprintf(metrics, sizeof(metrics), "metrics %s", m->path);
	else if (m->kind == KVC_CONFIG_LISTEN_TCP)
		snprintf(metrics, sizeof(metrics), "metrics on %s port %u",
			 d->cfg.daemon.metrics_address, (unsigned int)m->port);
	else
		snprintf(metrics, sizeof(metrics), "metrics off");
	snprintf(buf, len, "%s mode, pool %s in %" PRIu32 " blocks of %s, socket %s, %s",
		 kvcd_mode_name(d), total, d->nr_blocks, bs,
		 d->cfg.daemon.socket, metrics);
}

/* ---- reload -------------------------------------------------------------- */

/* An empty value (a tier switched off) said as "". */
static const char *shown(const char *v)
{
	return v[0] ? v : "\"\"";
}

static void reload_applied(void *arg, const char *section, const char *key,
			   const char *from, const char *to)
{
	(void)arg;
	kvc_info("reload: [%s] %s = %s (was %s)", section, key, shown(to),
		 shown(from));
}

/* from: the value the daemon keeps; to: the file's. */
static void reload_refused(void *arg, const char *section, const char *key,
			   const char *from, const char *to)
{
	(void)arg;
	kvc_warn("reload: [%s] %s = %s needs a restart; running with %s",
		 section, key, shown(to), shown(from));
}

/*
 * A tier's capacity may change while it stays on, on the same directory:
 * it is read at each spill and tick. Switching a tier on or off or moving
 * it is a restart (its recovery, its worker, its manifest).
 */
static void reload_capacity(const struct kvcd *d, unsigned int tier,
			    const char *dir, uint64_t capacity,
			    const char *now_dir, uint64_t *next)
{
	if (kvcd_tier(d, tier) && capacity && !strcmp(dir, now_dir))
		*next = capacity;
}

unsigned int kvcd_reconfigure(struct kvcd *d, const struct kvc_config *cfg,
			      unsigned int *restart)
{
	struct kvc_config next = d->cfg;
	int level = d->cfg.daemon.log_level > cfg->daemon.log_level ?
		    d->cfg.daemon.log_level : cfg->daemon.log_level;
	unsigned int changed;

	/*
	 * Each of these is read where it is used, every time (the log,
	 * loads.c, metrics_http.c, reclaim.c, promote.c, the server's
	 * tick): a new value takes effect at its next use. low < high
	 * holds: both come from one file that passed its checks.
	 */
	next.daemon.log_level = cfg->daemon.log_level;
	next.daemon.load_timeout_ms = cfg->daemon.load_timeout_ms;
	next.daemon.touch_rate = cfg->daemon.touch_rate;
	next.daemon.metrics_timeout_ms = cfg->daemon.metrics_timeout_ms;
	next.pool.low_watermark = cfg->pool.low_watermark;
	next.pool.high_watermark = cfg->pool.high_watermark;
	next.pool.prefetch = cfg->pool.prefetch;
	next.eviction.interval_ms = cfg->eviction.interval_ms;
	reload_capacity(d, KVC_TIER_G3, cfg->g3.directory, cfg->g3.capacity,
			d->cfg.g3.directory, &next.g3.capacity);
	reload_capacity(d, KVC_TIER_G4, cfg->g4.directory, cfg->g4.capacity,
			d->cfg.g4.directory, &next.g4.capacity);

	/* Said at the more verbose of the old and the new level. */
	kvc_log_set_level(level);
	changed = kvc_config_diff(&d->cfg, &next, reload_applied, NULL);
	*restart = kvc_config_diff(&next, cfg, reload_refused, NULL);
	kvc_log_set_level(next.daemon.log_level);

	d->cfg = next;
	if (d->srv)
		kvc_server_set_tick(d->srv, next.eviction.interval_ms);
	if (kvcd_tier(d, KVC_TIER_G3))
		kvc_tier_set_capacity(kvcd_tier(d, KVC_TIER_G3),
				      next.g3.capacity);
	if (kvcd_tier(d, KVC_TIER_G4))
		kvc_tier_set_capacity(kvcd_tier(d, KVC_TIER_G4),
				      next.g4.capacity);
	return changed;
}
