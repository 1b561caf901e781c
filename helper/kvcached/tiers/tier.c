// SPDX-License-Identifier: GPL-2.0
/*
 * tier: a persistent tier's directory: presence of entries, open and
 * close, the periodic work (tier.h, tier_priv.h,
 * Documentation/design/tiers.md). The reads and writes are tier_rw.c,
 * rescans tier_scan.c, recovery at open tier_recover.c, capacity
 * tier_gc.c.
 */
#include "tier.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include "beneath.h"
#include "clock.h"
#include "log.h"
#include "policy.h"
#include "tier_priv.h"

int64_t tier_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec;
}

/* The namespace's directory: dir/ns<id> (t->dir leaves room for it). */
void tier_ns_dir(const struct kvc_tier *t, uint32_t ns, char *out,
		 size_t len)
{
	if (snprintf(out, len, "%s/ns%u", t->dir, ns) >= (int)len)
		out[0] = '\0';
}

int tier_ensure_ids(struct kvc_tier *t, uint32_t id)
{
	size_t n = t->nids ? t->nids : 1024;
	uint32_t *m, *tc;
	uint8_t *sp;

	if (id < t->nids)
		return 0;
	while (n <= id)
		n *= 2;
	m = realloc(t->mark, n * sizeof(*m));
	if (m)
		t->mark = m;
	tc = realloc(t->touched, n * sizeof(*tc));
	if (tc)
		t->touched = tc;
	sp = realloc(t->spilling, n);
	if (sp)
		t->spilling = sp;
	if (!m || !tc || !sp)
		return -ENOMEM;
	memset(m + t->nids, 0, (n - t->nids) * sizeof(*m));
	memset(tc + t->nids, 0, (n - t->nids) * sizeof(*tc));
	memset(sp + t->nids, 0, n - t->nids);
	t->nids = n;
	return 0;
}

bool tier_is_present(const struct kvc_tier *t, uint32_t id)
{
	const struct kvc_entry *e = kvc_index_entry(t->idx, id);

	return e && (e->tiers & (1u << t->cfg.tier));
}

int tier_set_present(struct kvc_tier *t, uint32_t id, uint64_t size)
{
	union kvc_loc loc = { .u64 = size };
	int ret;

	if (tier_is_present(t, id))
		return 0;
	ret = tier_ensure_ids(t, id);
	if (!ret)
		ret = kvc_index_set(t->idx, id, t->cfg.tier, loc);
	if (ret)
		return ret;
	kvc_policy_on_insert(t->policy, id);
	t->mark[id] = t->pass;
	t->st.usage += size;
	t->st.blocks++;
	return 0;
}

/* The file is gone (or going): the entry is no longer in this tier. */
void tier_set_absent(struct kvc_tier *t, uint32_t id)
{
	const struct kvc_entry *e = kvc_index_entry(t->idx, id);
	uint64_t size;

	if (!e || !(e->tiers & (1u << t->cfg.tier)))
		return;
	size = e->loc[t->cfg.tier].u64;
	kvc_index_clear(t->idx, id, t->cfg.tier);
	kvc_policy_on_remove(t->policy, id);
	t->st.usage -= size < t->st.usage ? size : t->st.usage;
	t->st.blocks--;
	kvc_index_prune(t->idx, id);
}

int tier_open_parent(const struct kvc_tier *t, const char *path,
		     const char **name)
{
	size_t n = strlen(t->dir);
	char rel[PATH_MAX];
	const char *slash;

	if (strncmp(path, t->dir, n) || path[n] != '/')
		return -EINVAL;
	slash = strrchr(path, '/');
	*name = slash + 1;
	if (slash == path + n) {
		int fd = fcntl(t->root_fd, F_DUPFD_CLOEXEC, 0);

		return fd < 0 ? -errno : fd;
	}
	if ((size_t)(slash - (path + n + 1)) >= sizeof(rel))
		return -ENAMETOOLONG;
	memcpy(rel, path + n + 1, (size_t)(slash - (path + n + 1)));
	rel[slash - (path + n + 1)] = '\0';
	return kvc_open_beneath(t->root_fd, rel, O_RDONLY | O_DIRECTORY |
				O_CLOEXEC, 0);
}

int tier_file_path(const struct kvc_tier *t, uint32_t ns,
		   const uint8_t *key, char *out, size_t len)
{
	char d[PATH_MAX];

	tier_ns_dir(t, ns, d, sizeof(d));
	return kvc_bf_path(d, key, out, len);
}

/*
 * Move a corrupt file aside for examination; count it. Shared: by the
 * worker (a rename on the server).
 */
void tier_quarantine(struct kvc_tier *t, uint32_t ns, const uint8_t *key)
{
	struct tier_job *j;
	char d[PATH_MAX];

	t->st.corrupt++;
	if (!t->cfg.shared) {
		int err;

		snprintf(d, sizeof(d), "ns%u", ns);
		err = kvc_bf_quarantine(t->dir, d, key, t->owner);
		if (err && t->writable)
			kvc_warn_ratelimited("%s/%s: cannot quarantine a corrupt block: %s",
					     t->dir, d, strerror(-err));
		return;
	}
	j = tier_job_new(TJ_QUARANTINE);
	if (!j)
		return;
	j->ns = ns;
	memcpy(j->key, key, KVC_BF_KEY_SIZE);
	tier_job_post(t, j);
}

bool tier_job_done(struct kvc_tier *t, struct tier_job *j)
{
	char d[PATH_MAX];

	switch (j->kind) {
	case TJ_WALK:
		tier_pass_walked(t, j->walk, j->status);
		j->walk = NULL;		/* the pass's now */
		break;
	case TJ_GC:
		tier_gc_done(t, j);
		break;
	case TJ_TRASH:
		t->trash_posted = false;
		break;
	case TJ_QUARANTINE:
		tier_ns_dir(t, j->ns, d, sizeof(d));
		if (j->status && j->status != -ENOENT && t->writable)
			/* Anyone who can write the shared directory can
			 * cause it. */
			kvc_warn_ratelimited("%s: cannot quarantine a corrupt block: %s",
					     d, strerror(-j->status));
		break;
	case TJ_CALL:
		j->done(j->arg);
		break;
	case TJ_UNLINK_OLD:
		/* Kept (read since the walk, or not removable): it counts
		 * again, until the next pass measures. */
		if (j->status && j->status != -ENOENT)
			t->st.usage += j->size;
		break;
	default:
		break;	/* TOUCH: nothing to apply */
	}
	return true;
}

bool tier_corrupt_err(int err)
{
	return err == -EBADMSG || err == -EPROTO || err == -EPROTONOSUPPORT ||
	       err == -EINVAL;
}

int kvc_tier_open(struct kvc_tier **out, const struct kvc_tier_config *cfg,
		  struct kvc_index *idx)
{
	struct kvc_tio_config tc = {
		.depth = cfg->depth, .max_payload = cfg->max_payload,
		.fsync = cfg->fsync, .tag = cfg->node, .root = cfg->dir,
		.io_priority = cfg->io_priority, .remote = cfg->shared,
	};
	struct kvc_tier *t;
	struct stat st;
	int ret;

	if ((cfg->tier != KVC_TIER_G3 && cfg->tier != KVC_TIER_G4) ||
	    !cfg->dir || cfg->dir[0] != '/' || !cfg->node ||
	    strlen(cfg->node) > KVC_BF_MAX_TAG)
		return -EINVAL;
	if (strlen(cfg->dir) >= sizeof(t->dir))
		return -ENAMETOOLONG;
	if (stat(cfg->dir, &st))
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->root_fd = open(cfg->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (t->root_fd < 0) {
		ret = -errno;
		free(t);
		return ret;
	}
	t->owner = cfg->trusted_uid;
	/* Whoever may write the tier's directory may replace a namespace's
	 * directory: only kvcached (or its squashed uid on a server) may. */
	if (kvc_dir_foreign(t->root_fd, t->owner))
		kvc_warn("%s: the tier's directory is not kvcached's alone (owner %u, mode %04o): whoever can write it can redirect kvcached; make it uid %u's (or [g4] trusted_uid's) and 0755",
			 cfg->dir, (unsigned int)st.st_uid,
			 (unsigned int)(st.st_mode & 07777),
			 (unsigned int)geteuid());
	t->cfg = *cfg;
	strcpy(t->dir, cfg->dir);
	strcpy(t->node, cfg->node);
	t->cfg.dir = t->dir;
	t->cfg.node = t->node;
	t->idx = idx;
	t->opened = tier_now_s();
	t->pass = 1;
	t->mf_fd = -1;
	t->node_fd = -1;
	t->writable = access(t->dir, W_OK) == 0;
	t->write_err = t->writable ? 0 : -errno;
	t->st.last_error = t->write_err;
	if (snprintf(t->mf_path, sizeof(t->mf_path), "%s/.manifest.%s", t->dir,
		     t->node) >= (int)sizeof(t->mf_path))
		t->mf_path[0] = '\0';
	/* The manifest is opened by the recovery (or scan) that rewrites
	 * it: before that, whether there is one decides how to recover. */
	t->pend = calloc(cfg->depth ? cfg->depth : 1, sizeof(*t->pend));
	t->ns_made = calloc(KVCACHE_NS_MAX / 8 + 1, 1);
	ret = t->pend && t->ns_made ? 0 : -ENOMEM;
	if (!ret)
		ret = kvc_policy_create(&t->policy,
					cfg->policy ? cfg->policy : "lru", idx,
					cfg->tier, 1024);
	if (!ret)
		ret = kvc_tio_create(&t->tio, &tc);
	if (!ret)
		ret = tier_worker_start(t);
	if (ret) {
		kvc_tier_close(t);
		return ret;
	}
	*out = t;
	return 0;
}

void kvc_tier_close(struct kvc_tier *t)
{
	if (!t)
		return;
	/* Stuck in the filesystem: it reads t, so t stays (to the exit). */
	if (!tier_worker_stop(t))
		return;
	tier_walk_free(t->walk);
	free(t->wcache);
	free(t->ns_made);
	kvc_tio_destroy(t->tio);
	kvc_tier_node_release(t);
	if (t->mf_fd >= 0)
		close(t->mf_fd);
	if (t->root_fd >= 0)
		close(t->root_fd);
	kvc_policy_destroy(t->policy);
	free(t->pend);
	free(t->mark);
	free(t->touched);
	free(t->spilling);
	free(t->recs);
	free(t->chain);
	free(t);
}

void kvc_tier_tick(struct kvc_tier *t, kvc_tier_ns_fn ns_ok, void *arg)
{
	double now = kvc_now();

	tier_jobs_reap(t);
	/* g4 rescans without end; g3 once, after a recovery. */
	if (t->cfg.shared || t->bg_pass) {
		double interval = (double)t->cfg.scan_interval_ms / 1e3;

		/* A pass an interval after the last one began, or after it
		 * ended where the walk took longer than that. */
		if (!t->in_pass && now - t->pass_start >= interval)
			tier_pass_post(t);
		if (t->walk) {
			uint64_t found = t->st.found;

			if (tier_pass_step(t, ns_ok, arg, TIER_SCAN_BUDGET_S)) {
				/* The pass after a recovery found blocks no
				 * manifest names: name them, or every start
				 * finds them late. */
				if (t->bg_pass && t->st.found != found)
					tier_mf_compact(t);
				t->bg_pass = false;
			}
		}
		if (t->cfg.shared) {
			if (!t->trash_posted &&
			    now - t->trash_last >= TIER_TRASH_EVERY_S) {
				struct tier_job *j = tier_job_new(TJ_TRASH);

				t->trash_last = now;
				t->trash_posted = j && !tier_job_post(t, j);
			}
			kvc_tier_node_beat(t);
		}
	}
	if (tier_used(t) > t->cfg.capacity)
		tier_gc(t, 0);
}

void kvc_tier_settle(struct kvc_tier *t)
{
	tier_jobs_wait(t);
	tier_jobs_reap(t);
}

int kvc_tier_drop(struct kvc_tier *t, uint32_t id)
{
	const struct kvc_entry *e = kvc_index_entry(t->idx, id);
	char path[PATH_MAX];

	if (!e || !(e->tiers & (1u << t->cfg.tier)))
		return -ENOENT;
	if (!t->writable)
		return t->write_err ? t->write_err : -EROFS;
	if (tier_file_path(t, e->ns, e->key, path, sizeof(path)))
		return -ENAMETOOLONG;
	if (unlink(path) && errno != ENOENT)
		return -errno;
	tier_set_absent(t, id);
	t->st.evictions++;
	return 0;
}

void kvc_tier_touch(struct kvc_tier *t, uint32_t id)
{
	if (tier_is_present(t, id))
		kvc_policy_on_access(t->policy, id);
}

const struct kvc_tier_stats *kvc_tier_stats(const struct kvc_tier *t)
{
	return &t->st;
}

uint64_t kvc_tier_capacity(const struct kvc_tier *t)
{
	return t->cfg.capacity;
}

void kvc_tier_set_capacity(struct kvc_tier *t, uint64_t bytes)
{
	t->cfg.capacity = bytes;
}

bool kvc_tier_writable(const struct kvc_tier *t)
{
	return t->writable;
}

unsigned int kvc_tier_index(const struct kvc_tier *t)
{
	return t->cfg.tier;
}
