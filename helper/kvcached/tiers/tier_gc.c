// SPDX-License-Identifier: GPL-2.0
/*
 * tier_gc: a tier's capacity (tier_priv.h). Spills that would pass it
 * evict files first, leaves first by the tier's policy; on a shared
 * tier a file is moved to trash and deleted only after the lease grace,
 * as another node may be reading it.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "policy.h"
#include "tier_priv.h"

#define TIER_GC_SLACK		32	/* GC tries past one per block */
#define TIER_GC_MAX_LOOKS	1024	/* victims one tier_gc() may examine */

/* Delete collected files whose grace is over (shared tiers). */
void tier_gc_trash(struct kvc_tier *t)
{
	char d[PATH_MAX], path[PATH_MAX];
	int64_t now = tier_now_s();
	struct dirent *de;
	struct stat st;
	DIR *dp;

	if (snprintf(d, sizeof(d), "%s/.gc", t->dir) >= (int)sizeof(d))
		return;
	dp = opendir(d);
	if (!dp)
		return;
	while ((de = readdir(dp))) {
		if (de->d_name[0] == '.')
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", d, de->d_name) >=
		    (int)sizeof(path))
			continue;
		/* rename() updates ctime: the time it was collected. */
		if (!lstat(path, &st) &&
		    now - st.st_ctime > (int64_t)(t->cfg.grace_ms / 1000))
			unlink(path);
	}
	closedir(dp);
}

/*
 * Remove one victim's file. Shared: skip it when another node read it
 * within the grace (its lease), else move it to .gc/. 0 when it went,
 * -EBUSY when leased, -errno.
 */
static int gc_one(struct kvc_tier *t, uint32_t id)
{
	const struct kvc_entry *e = kvc_index_entry(t->idx, id);
	char path[PATH_MAX], trash[PATH_MAX];
	struct stat st;

	if (tier_file_path(t, e->ns, e->key, path, sizeof(path)))
		return -ENAMETOOLONG;
	if (!t->cfg.shared)
		return unlink(path) && errno != ENOENT ? -errno : 0;
	if (stat(path, &st))
		return errno == ENOENT ? 0 : -errno;
	if (tier_now_s() - st.st_mtime < (int64_t)(t->cfg.grace_ms / 1000))
		return -EBUSY;
	if (snprintf(trash, sizeof(trash), "%s/.gc", t->dir) >=
	    (int)sizeof(trash))
		return -ENAMETOOLONG;
	/* Private: what waits there is other tenants' KV. */
	if (mkdir(trash, 0700) && errno != EEXIST)
		return -errno;
	if (snprintf(trash, sizeof(trash), "%s/.gc/%s.%u.%s", t->dir, t->node,
		     e->ns, strrchr(path, '/') + 1) >= (int)sizeof(trash))
		return -ENAMETOOLONG;
	if (rename(path, trash))
		return errno == ENOENT ? 0 : -errno;
	return 0;
}

/* Evict until @need more bytes fit under the capacity. */
void tier_gc(struct kvc_tier *t, uint64_t need)
{
	size_t budget = kvc_policy_count(t->policy) + TIER_GC_SLACK;
	uint32_t v;

	if (!t->writable)
		return;
	/*
	 * A bounded number of looks per call: on g4 each is a stat() on the
	 * shared filesystem, and a directory whose every block is leased
	 * must not hold the daemon's thread; the next tick goes on.
	 */
	if (budget > TIER_GC_MAX_LOOKS)
		budget = TIER_GC_MAX_LOOKS;
	/*
	 * One victim at a time, so that no more go than needed: a picked
	 * victim is detached, and one given back counts as just used.
	 */
	while (t->st.usage + need > t->cfg.capacity && budget-- &&
	       kvc_policy_pick(t->policy, &v, 1)) {
		int ret = gc_one(t, v);

		if (ret) {
			/* Leased by a reader, or not removable now: back in
			 * as if just used. */
			if (ret == -EBUSY)
				t->st.lease_skips++;
			kvc_policy_on_insert(t->policy, v);
			continue;
		}
		tier_set_absent(t, v);
		t->st.evictions++;
	}
}
