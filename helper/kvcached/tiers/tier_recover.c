// SPDX-License-Identifier: GPL-2.0
/*
 * tier_recover: a tier's index at open, from the manifests (manifest.h,
 * tier_priv.h). Each node appends what it publishes and removes to its
 * own manifest; recovery reads every node's, checks each file named,
 * cleans temp files a crash left, and compacts this node's manifest to
 * what is there. A directory without manifests is scanned instead.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <liburing.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "manifest.h"
#include "tier_priv.h"

static int mf_cmp(const void *a, const void *b)
{
	const struct kvc_mf_rec *x = a, *y = b;

	if (x->ns != y->ns)
		return x->ns < y->ns ? -1 : 1;
	return memcmp(x->key, y->key, KVC_BF_KEY_SIZE);
}

/* The temp files in the leaf directory of @final: stale ones go. */
static void clean_leaf_tmp(struct kvc_tier *t, const char *final,
			   int64_t now)
{
	const char *name;
	struct dirent *de;
	DIR *dp;
	int dfd = tier_open_parent(t, final, &name);

	if (dfd < 0)
		return;
	dp = fdopendir(dfd);
	if (!dp) {
		close(dfd);
		return;
	}
	while ((de = readdir(dp)))
		if (!strncmp(de->d_name, ".tmp.", 5))
			tier_scan_tmp(t, dirfd(dp), de->d_name, now);
	closedir(dp);
}

/*
 * A writer killed after the link but before removing its temp name
 * leaves both: the spills in flight then are the last records of its
 * manifest (appended in submission order, at most one per I/O slot, and
 * a rewrite keeps them last), so their leaf directories are looked at
 * whether their files are there or not.
 */
static void clean_tail_tmp(struct kvc_tier *t, const struct kvc_mf_rec *r,
			   size_t n, int64_t now)
{
	char path[PATH_MAX];

	for (size_t i = n > t->cfg.depth ? n - t->cfg.depth : 0; i < n; i++)
		if (!tier_file_path(t, r[i].ns, r[i].key, path, sizeof(path)))
			clean_leaf_tmp(t, path, now);
}

/* One manifest record's file, as its stat says it is. */
static void check_one(struct kvc_tier *t, const struct kvc_mf_rec *m,
		      const char *path, int err, const struct statx *stx,
		      int64_t now)
{
	struct rec r;

	if (err) {
		/* Written or deleted: a writer killed mid-spill may have
		 * left its temp file next to where it would be. */
		if (err == -ENOENT)
			clean_leaf_tmp(t, path, now);
		return;
	}
	/* Same key, same bytes, same size: anything else is not the file
	 * that was written. */
	if (!S_ISREG(stx->stx_mode) || stx->stx_size != m->size) {
		tier_quarantine(t, m->ns, m->key);
		return;
	}
	r.ns = m->ns;
	r.first = m->first;
	memcpy(r.key, m->key, KVC_BF_KEY_SIZE);
	memcpy(r.parent, m->parent, KVC_BF_KEY_SIZE);
	r.size = m->size;
	r.mtime = stx->stx_mtime.tv_sec;
	tier_push_rec(t, &r);
}

/*
 * Every file the manifests name, checked with one stat each, at once
 * RECOVER_DEPTH at a time on a ring of its own: on a shared filesystem
 * each is a round trip to the server, and a start with 100,000 blocks
 * would otherwise wait for them one after the other. Without io_uring
 * (a kernel that refuses the ring), one at a time.
 */
#define RECOVER_DEPTH	64

static void check_named(struct kvc_tier *t, const struct kvc_mf_rec *m,
			size_t n, int64_t now)
{
	char (*path)[PATH_MAX] = malloc(RECOVER_DEPTH * sizeof(*path));
	struct statx *stx = calloc(RECOVER_DEPTH, sizeof(*stx));
	int err[RECOVER_DEPTH];
	struct io_uring ring;
	bool ring_ok;

	if (!path || !stx) {
		free(path);
		free(stx);
		return;
	}
	ring_ok = !io_uring_queue_init(RECOVER_DEPTH, &ring, 0);
	for (size_t i = 0; i < n; i += RECOVER_DEPTH) {
		size_t k = n - i < RECOVER_DEPTH ? n - i : RECOVER_DEPTH;
		unsigned int queued = 0;

		for (size_t j = 0; j < k; j++) {
			struct io_uring_sqe *sqe;

			err[j] = tier_file_path(t, m[i + j].ns, m[i + j].key,
						path[j], sizeof(path[j]));
			if (err[j])
				continue;
			if (!ring_ok || !(sqe = io_uring_get_sqe(&ring))) {
				struct stat st;

				err[j] = lstat(path[j], &st) ? -errno : 0;
				stx[j].stx_mode = st.st_mode;
				stx[j].stx_size = (uint64_t)st.st_size;
				stx[j].stx_mtime.tv_sec = st.st_mtime;
				continue;
			}
			err[j] = 1;	/* in flight */
			io_uring_prep_statx(sqe, AT_FDCWD, path[j],
					    AT_SYMLINK_NOFOLLOW,
					    STATX_TYPE | STATX_SIZE |
					    STATX_MTIME, &stx[j]);
			io_uring_sqe_set_data64(sqe, j);
			queued++;
		}
		if (queued)
			io_uring_submit(&ring);
		while (queued) {
			struct io_uring_cqe *cqe;
			int ret = io_uring_wait_cqe(&ring, &cqe);

			if (ret == -EINTR)
				continue;
			if (ret) {
				/* Gone with the ring: the rest by lstat. */
				io_uring_queue_exit(&ring);
				ring_ok = false;
				break;
			}
			err[cqe->user_data] = cqe->res;
			io_uring_cqe_seen(&ring, cqe);
			queued--;
		}
		for (size_t j = 0; j < k; j++)
			if (err[j] <= 0)	/* 1: its stat was lost */
				check_one(t, &m[i + j], path[j], err[j],
					  &stx[j], now);
	}
	if (ring_ok)
		io_uring_queue_exit(&ring);
	free(path);
	free(stx);
}

/* Append the records of one manifest to *all; 0 or -errno. */
static int mf_gather(const char *path, struct kvc_mf_rec **all, size_t *n,
		     size_t *cap)
{
	struct kvc_mf_rec *r;
	size_t m, bad;
	int ret = kvc_mf_read(path, &r, &m, &bad);

	if (ret)
		return ret;
	if (*n + m > *cap) {
		size_t c = (*n + m) * 2;
		struct kvc_mf_rec *p = realloc(*all, c * sizeof(*p));

		if (!p) {
			free(r);
			return -ENOMEM;
		}
		*all = p;
		*cap = c;
	}
	if (m)
		memcpy(*all + *n, r, m * sizeof(*r));
	*n += m;
	free(r);
	return 0;
}

/*
 * Rewrite this node's manifest from the index: every block present in
 * the tier (for g4 other nodes' too: records are deduplicated at
 * recovery before anything is checked).
 */
/* The records of this node's manifest whose blocks are present, once. */
static void mf_own_present(struct kvc_tier *t, struct kvc_mf_rec *out,
			   size_t *n, size_t max)
{
	struct kvc_mf_rec *r;
	size_t m, bad;
	uint32_t id;

	if (kvc_mf_read(t->mf_path, &r, &m, &bad))
		return;
	if (m)
		qsort(r, m, sizeof(*r), mf_cmp);
	for (size_t i = 0; i < m && *n < max; i++) {
		if (i && !mf_cmp(&r[i], &r[i - 1]))
			continue;
		if (kvc_index_find(t->idx, r[i].ns, r[i].key, &id) ||
		    !tier_is_present(t, id))
			continue;
		out[(*n)++] = r[i];
	}
	free(r);
}

void tier_mf_compact(struct kvc_tier *t)
{
	size_t n = 0, max = t->st.blocks + 1 + t->cfg.depth;
	struct kvc_mf_rec *r;

	if (!t->writable || !t->mf_path[0])
		return;
	r = malloc(max * sizeof(*r));
	if (!r)
		return;
	/*
	 * g4: only what this node wrote. Every node reads every manifest at
	 * start, so a manifest naming the whole directory would make each
	 * start read it once per node.
	 */
	if (t->cfg.shared)
		mf_own_present(t, r, &n, max);
	for (uint32_t id = kvc_index_next(t->idx, 0);
	     !t->cfg.shared && id != KVC_ID_NONE && n <= t->st.blocks;
	     id = kvc_index_next(t->idx, id + 1)) {
		const struct kvc_entry *e = kvc_index_entry(t->idx, id);

		if (!(e->tiers & (1u << t->cfg.tier)))
			continue;
		memset(&r[n], 0, sizeof(r[n]));
		r[n].ns = e->ns;
		r[n].first = e->parent == KVC_ID_NONE;
		r[n].size = e->loc[t->cfg.tier].u64;
		memcpy(r[n].key, e->key, KVC_BF_KEY_SIZE);
		if (!r[n].first)
			memcpy(r[n].parent,
			       kvc_index_entry(t->idx, e->parent)->key,
			       KVC_BF_KEY_SIZE);
		n++;
	}
	/*
	 * Spills in flight are not in the index yet, but their records were
	 * appended before their files were written: they must outlive the
	 * rewrite, or a crash leaves a file, or a temp file, no record names.
	 */
	for (unsigned int i = 0; i < t->cfg.depth && n < max; i++) {
		const struct pend *p = &t->pend[i];

		if (!p->used || !p->write)
			continue;
		memset(&r[n], 0, sizeof(r[n]));
		r[n].ns = p->ns;
		r[n].first = p->first;
		r[n].size = p->size;
		memcpy(r[n].key, p->key, KVC_BF_KEY_SIZE);
		memcpy(r[n].parent, p->parent, KVC_BF_KEY_SIZE);
		n++;
	}
	if (!kvc_mf_rewrite(t->mf_path, r, n))
		t->mf_records = n;
	/* Reopened whatever the rewrite said: its rename may have happened
	 * before a later step failed, and appends must reach the new file. */
	if (t->mf_fd >= 0)
		close(t->mf_fd);
	t->mf_fd = kvc_mf_open(t->mf_path);
	if (t->mf_fd < 0)
		t->mf_fd = -1;
	free(r);
}

long kvc_tier_recover(struct kvc_tier *t, kvc_tier_ns_fn ns_ok, void *arg)
{
	struct kvc_mf_rec *all = NULL;
	size_t n = 0, cap = 0, u = 0;
	uint64_t found = t->st.found;
	int64_t now = tier_now_s();
	bool any = false, own;
	size_t before;

	if (t->cfg.shared) {
		/* Every node's manifest: each names what its node wrote. */
		struct dirent *de;
		DIR *dp = opendir(t->dir);

		if (!dp)
			return -errno;
		while ((de = readdir(dp))) {
			char path[PATH_MAX];
			size_t len = strlen(de->d_name);

			if (strncmp(de->d_name, ".manifest.", 10) ||
			    (len > 4 && !strcmp(de->d_name + len - 4, ".new")) ||
			    snprintf(path, sizeof(path), "%s/%s", t->dir,
				     de->d_name) >= (int)sizeof(path))
				continue;
			own = !strcmp(de->d_name + 10, t->node);
			before = n;
			if (!mf_gather(path, &all, &n, &cap) && own) {
				any = true;
				clean_tail_tmp(t, all + before, n - before,
					       now);
			}
		}
		closedir(dp);
	} else if (t->mf_path[0]) {
		any = !mf_gather(t->mf_path, &all, &n, &cap);
		if (any)
			clean_tail_tmp(t, all, n, now);
	}
	/* No manifest of ours (a first start, a lost file): scan it all,
	 * and write one for the next start. */
	if (!any) {
		free(all);
		return kvc_tier_scan(t, ns_ok, arg);
	}
	if (n)
		qsort(all, n, sizeof(*all), mf_cmp);
	t->nrecs = 0;
	t->pass_bytes = 0;
	t->orphan_bytes = 0;
	for (size_t i = 0; i < n; i++)
		if ((!u || mf_cmp(&all[i], &all[u - 1])) &&
		    ns_ok(arg, all[i].ns))
			all[u++] = all[i];
	check_named(t, all, u, now);
	free(all);
	tier_pass_end(t);
	tier_mf_compact(t);
	/* What no manifest names (power loss, a lost append) and stale
	 * temp files: a scan in the background finds them. */
	t->bg_pass = true;
	return (long)(t->st.found - found);
}
