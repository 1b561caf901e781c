// SPDX-License-Identifier: GPL-2.0
/*
 * tier_gc: a tier's capacity (tier_priv.h). Spills that would pass it
 * evict files first, leaves first by the tier's policy; on a shared
 * tier a file is moved to trash and deleted only after the lease grace,
 * as another node may be reading it.
 *
 * A victim's GC job can wait in the worker's queue for a while (behind
 * a walk, or other GC jobs on a slow server). A read of the victim that
 * starts meanwhile cancels the job, so that this node does not collect
 * a block it has just used: the job's lease renewal, queued behind it,
 * would come too late for its stat.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "policy.h"
#include "beneath.h"
#include "tier_priv.h"

#define TIER_GC_SLACK		32	/* GC tries past one per block */
#define TIER_GC_MAX_LOOKS	1024	/* victims one tier_gc() may examine */

/* Delete collected files whose grace is over (shared tiers). */
void tier_gc_trash(struct kvc_tier *t)
{
	struct dirent *de;
	struct stat st;
	DIR *dp;
	int fd = kvc_open_beneath(t->root_fd, ".gc", O_RDONLY | O_DIRECTORY |
				  O_CLOEXEC, 0);

	if (fd < 0)
		return;
	dp = fdopendir(fd);
	if (!dp) {
		close(fd);
		return;
	}
	while ((de = readdir(dp))) {
		if (de->d_name[0] == '.')
			continue;
		/* rename() updates ctime: the time it was collected. */
		if (!fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) &&
		    tier_age_ns(t, &st.st_ctim) >
		    (int64_t)t->cfg.grace_ms * 1000000)
			unlinkat(fd, de->d_name, 0);
	}
	closedir(dp);
}

/*
 * Remove one victim's file. Local: now. Shared: a TJ_GC job, which skips
 * the file when another node read it within the grace (its lease) and
 * else moves it to .gc/; tier_gc_done() applies the outcome. 0 when it
 * went, 1 when it is going, -errno.
 */
static int gc_one(struct kvc_tier *t, uint32_t id)
{
	const struct kvc_entry *e = kvc_index_entry(t->idx, id);
	struct tier_job *j;
	char path[PATH_MAX];

	if (tier_file_path(t, e->ns, e->key, path, sizeof(path)))
		return -ENAMETOOLONG;
	if (!t->cfg.shared) {
		const char *name;
		int dfd = tier_open_parent(t, path, &name), ret = 0;

		if (dfd < 0)
			return dfd == -ENOENT ? 0 : dfd;
		if (unlinkat(dfd, name, 0) && errno != ENOENT)
			ret = -errno;
		close(dfd);
		return ret;
	}
	j = tier_job_new(TJ_GC);
	if (!j)
		return -ENOMEM;
	strcpy(j->path, path);
	j->ns = e->ns;
	memcpy(j->key, e->key, KVC_BF_KEY_SIZE);
	j->size = e->loc[t->cfg.tier].u64;
	if (tier_job_post(t, j))
		return -EAGAIN;
	for (unsigned int i = 0; i < TIER_GC_MAX_JOBS; i++)
		if (!t->gc_flight[i]) {
			t->gc_flight[i] = j;
			break;
		}
	t->gc_pending += j->size;
	t->gc_jobs++;
	return 1;
}

void tier_gc_cancel(struct kvc_tier *t, uint32_t ns, const uint8_t *key)
{
	for (unsigned int i = 0; t->gc_jobs && i < TIER_GC_MAX_JOBS; i++) {
		struct tier_job *j = t->gc_flight[i];

		if (j && j->ns == ns && !memcmp(j->key, key, KVC_BF_KEY_SIZE))
			__atomic_store_n(&j->cancel, 1, __ATOMIC_RELEASE);
	}
}

/* A victim's GC job is back: gone, or given back to the policy. */
void tier_gc_done(struct kvc_tier *t, const struct tier_job *j)
{
	uint32_t id;

	for (unsigned int i = 0; i < TIER_GC_MAX_JOBS; i++)
		if (t->gc_flight[i] == j)
			t->gc_flight[i] = NULL;
	t->gc_pending -= j->size <= t->gc_pending ? j->size : t->gc_pending;
	t->gc_jobs--;
	/* Forgotten meanwhile (a rescan, a failed read): nothing to do. */
	if (kvc_index_find(t->idx, j->ns, j->key, &id) ||
	    !tier_is_present(t, id))
		return;
	if (!j->status) {
		tier_set_absent(t, id);
		t->st.evictions++;
		t->gc_no_credit = false;
		return;
	}
	/* Leased by a reader (here or on another node), or not removable
	 * now: back in as if just used. */
	if (j->status == -EBUSY) {
		t->st.lease_skips++;
		if (t->st.usage > t->cfg.capacity)
			t->gc_no_credit = true;
	}
	kvc_policy_on_insert(t->policy, id);
}

/* Usage less what GC jobs in flight are taking away. */
uint64_t tier_used(const struct kvc_tier *t)
{
	return t->st.usage > t->gc_pending ? t->st.usage - t->gc_pending : 0;
}

/*
 * The bytes of GC jobs in flight count as gone already: a spill need not
 * wait for the server's round trips. But once a victim has come back
 * leased with the directory over its capacity, that credit is not good:
 * a directory full of files within their grace would grow by a block
 * per spill, each admitted against a victim that stays. Then a spill
 * takes only room that is there, until a victim goes again.
 */
bool tier_room(const struct kvc_tier *t, uint64_t size)
{
	uint64_t used = t->gc_no_credit ? t->st.usage : tier_used(t);

	return used + size <= t->cfg.capacity;
}

/*
 * Evict until @need more bytes fit under the capacity. On a shared tier
 * the bytes whose GC is in flight count as gone already; a victim that
 * turns out leased comes back, and the tier is over its capacity by at
 * most TIER_GC_MAX_JOBS blocks meanwhile (tier_room()).
 */
void tier_gc(struct kvc_tier *t, uint64_t need)
{
	size_t budget = kvc_policy_count(t->policy) + TIER_GC_SLACK;
	uint32_t v;

	if (!t->writable)
		return;
	/*
	 * A bounded number of looks per call: a directory whose every
	 * block is leased must not take the daemon's thread; the next tick
	 * goes on.
	 */
	if (budget > TIER_GC_MAX_LOOKS)
		budget = TIER_GC_MAX_LOOKS;
	/*
	 * One victim at a time, so that no more go than needed: a picked
	 * victim is detached, and one given back counts as just used.
	 */
	while (tier_used(t) + need > t->cfg.capacity &&
	       t->gc_jobs < TIER_GC_MAX_JOBS && budget-- &&
	       kvc_policy_pick(t->policy, &v, 1)) {
		int ret = gc_one(t, v);

		if (ret == 1)
			continue;	/* tier_gc_done() */
		if (ret) {
			kvc_policy_on_insert(t->policy, v);
			if (ret == -EAGAIN)
				break;	/* the worker's queue is full */
			continue;
		}
		tier_set_absent(t, v);
		t->st.evictions++;
	}
}
