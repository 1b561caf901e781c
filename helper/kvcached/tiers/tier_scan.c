// SPDX-License-Identifier: GPL-2.0
/*
 * tier_scan: rescans of a tier's directory (tier_priv.h). A shared tier
 * (g4) is written by other nodes: every scan interval the metadata
 * worker walks ns<id>/aa/bb (tier_walk_run, on its thread: directory
 * listings and header reads are round trips to the server), and the
 * loop applies what it found a slice per tick: it indexes the files it
 * did not know (parents first), forgets the ones another node removed,
 * and takes the measured usage. Temp files of dead writers go (the
 * worker), and unreachable files (no parent anywhere) are left to age
 * and be collected.
 */
#include <dirent.h>
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
#include "tier_priv.h"

#define TIER_TMP_MAX_AGE	3600	/* s: any write is done by then */
#define TIER_ORPHAN_AGE		600	/* s: any chain is published by then */
#define TIER_ORPHAN_FULL_AGE	30	/* s: ... any parent's write is done */

static int rec_cmp(const void *a, const void *b)
{
	const struct rec *x = a, *y = b;

	if (x->ns != y->ns)
		return x->ns < y->ns ? -1 : 1;
	return memcmp(x->key, y->key, KVC_BF_KEY_SIZE);
}

/* Append r to the growing array *recs of *n records (room for *cap). */
static int rec_append(struct rec **recs, size_t *n, size_t *cap,
		      const struct rec *r)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 1024;
		struct rec *m = realloc(*recs, c * sizeof(*m));

		if (!m)
			return -ENOMEM;
		*recs = m;
		*cap = c;
	}
	(*recs)[(*n)++] = *r;
	return 0;
}

int tier_push_rec(struct kvc_tier *t, const struct rec *r)
{
	return rec_append(&t->recs, &t->nrecs, &t->caprecs, r);
}

/*
 * The writer tag and pid of a temp file's name, ".tmp.<tag>.<pid>.<seq>.
 * <64 hex>" (kvc_bf_prepare). Tags may hold dots, so the name is read
 * from the right. 0, or -EINVAL for a name not of this form.
 */
static int tmp_owner(const char *name, char *tag, size_t len, long *pid)
{
	const char *end = name + strlen(name), *p = end;
	const char *fields[3];

	for (int i = 0; i < 3; i++) {	/* hex, seq, pid: from the end */
		while (p > name && p[-1] != '.')
			p--;
		if (p <= name + 5 || p == end)
			return -EINVAL;
		fields[i] = p;
		end = --p;
	}
	if (end - (name + 5) < 1 || (size_t)(end - (name + 5)) >= len)
		return -EINVAL;
	for (const char *c = fields[2]; *c != '.'; c++)
		if (*c < '0' || *c > '9')
			return -EINVAL;
	memcpy(tag, name + 5, (size_t)(end - (name + 5)));
	tag[end - (name + 5)] = '\0';
	*pid = atol(fields[2]);
	return 0;
}

/*
 * A temp file: ours from an earlier run of this node (it crashed
 * mid-write) goes now; anyone's older than an hour goes too. An earlier
 * run is told by its pid, or, with our own pid, by a file last written
 * before this tier was opened: after a reboot the new daemon often gets
 * the dead one's pid (the same boot order; pid 1 in a container), and
 * only files this run has written since it opened the tier can be its
 * writes in flight. A second of slack for the filesystem's timestamps.
 */
void tier_scan_tmp(struct kvc_tier *t, int dirfd, const char *name,
		   int64_t now)
{
	char tag[KVC_BF_MAX_TAG + 1];
	struct stat st;
	long pid;

	if (!t->writable || fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW))
		return;
	if (!tmp_owner(name, tag, sizeof(tag), &pid) &&
	    !strcmp(tag, t->node)) {
		if (pid != (long)getpid() || st.st_mtime < t->opened - 1)
			unlinkat(dirfd, name, 0);
	} else if (now - st.st_mtime > TIER_TMP_MAX_AGE) {
		unlinkat(dirfd, name, 0);
	}
}

static int walk_push(struct tier_walk *w, const struct rec *r)
{
	return rec_append(&w->recs, &w->nrecs, &w->cap, r);
}

/*
 * One leaf directory (ns<id>/aa/bb, @dfd) of a walk. A block file's
 * header is read once: block files are immutable under their name (the
 * name is the key), so what the worker's last walk read of a name still
 * holds; a file replaced by a forgery is caught by the read's
 * verification.
 *
 * A file whose header names another namespace is not this namespace's
 * to move: it was copied or linked here by someone (kvcached writes each
 * block under its own namespace), so it is reported and left where it
 * is, never indexed, and never moved into anything a tenant reaches.
 */
static void walk_leaf(struct kvc_tier *t, struct tier_walk *w, uint32_t ns,
		      int dfd, const char *leaf, int64_t now, bool cached)
{
	struct dirent *de;
	char nsname[16];
	DIR *dp;
	int fd = fcntl(dfd, F_DUPFD_CLOEXEC, 0);

	if (fd < 0)
		return;
	snprintf(nsname, sizeof(nsname), "ns%u", ns);
	dp = fdopendir(fd);
	if (!dp) {
		close(fd);
		return;
	}
	while ((de = readdir(dp))) {
		struct kvc_bf_header h;
		struct rec r, *c;
		struct stat st;
		int err;

		if (de->d_name[0] == '.' && strncmp(de->d_name, ".tmp.", 5))
			continue;
		if (!strncmp(de->d_name, ".tmp.", 5)) {
			tier_scan_tmp(t, dfd, de->d_name, now);
			continue;
		}
		if (kvc_bf_parse_name(de->d_name, r.key))
			continue;	/* not ours: left alone */
		r.ns = ns;
		c = cached && t->nwcache ?
		    bsearch(&r, t->wcache, t->nwcache, sizeof(r), rec_cmp) :
		    NULL;
		if (c) {
			walk_push(w, c);
			continue;
		}
		err = kvc_bf_read_header_at(dfd, de->d_name, &h, &st);
		if (!err && h.ns_id != ns) {
			kvc_warn_ratelimited("%s/%s/%s: a block of namespace %u in namespace %u's directory: not kvcached's doing; left where it is, not indexed",
					     t->dir, leaf, de->d_name,
					     h.ns_id, ns);
			continue;
		}
		if (tier_corrupt_err(err) ||
		    (!err && memcmp(h.key, r.key, KVC_BF_KEY_SIZE))) {
			w->corrupt++;
			kvc_bf_quarantine(t->dir, nsname, r.key, t->owner);
			continue;
		}
		if (err)
			continue;	/* gone meanwhile, or unreadable */
		r.first = h.flags & KVC_BF_F_FIRST;
		memcpy(r.parent, h.parent, KVC_BF_KEY_SIZE);
		r.size = (uint64_t)st.st_size;
		r.mtime = st.st_mtime;
		walk_push(w, &r);
	}
	closedir(dp);
}

/*
 * The entries of the directory @dfd whose names are two characters, not
 * dot files: the fan-out levels.
 */
static size_t fanout(int dfd, char (*names)[3], size_t max)
{
	struct dirent *de;
	size_t n = 0;
	DIR *dp;
	int fd = fcntl(dfd, F_DUPFD_CLOEXEC, 0);

	if (fd < 0)
		return 0;
	dp = fdopendir(fd);
	if (!dp) {
		close(fd);
		return 0;
	}
	while ((de = readdir(dp)) && n < max) {
		if (strlen(de->d_name) != 2 || de->d_name[0] == '.')
			continue;
		memcpy(names[n++], de->d_name, 3);
	}
	closedir(dp);
	return n;
}

/* A directory below @dfd, never through a link. */
static int sub_dir(int dfd, const char *name)
{
	return kvc_open_beneath(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC,
				0);
}

/* The namespaces under the tier's directory: its ns<id> entries. */
static int walk_namespaces(const struct kvc_tier *t, uint32_t **out,
			   size_t *nout)
{
	uint32_t *nss = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *dp;
	int fd = fcntl(t->root_fd, F_DUPFD_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	dp = fdopendir(fd);
	if (!dp) {
		close(fd);
		return -errno;
	}
	rewinddir(dp);
	while ((de = readdir(dp))) {
		unsigned long ns;
		char *end;

		if (strncmp(de->d_name, "ns", 2))
			continue;
		ns = strtoul(de->d_name + 2, &end, 10);
		if (*end || ns < 1 || ns > KVCACHE_NS_MAX)
			continue;
		if (n == cap) {
			uint32_t *m;

			cap = cap ? cap * 2 : 16;
			m = realloc(nss, cap * sizeof(*m));
			if (!m)
				break;
			nss = m;
		}
		nss[n++] = (uint32_t)ns;
	}
	closedir(dp);
	*out = nss;
	*nout = n;
	return 0;
}

int tier_walk_run(struct kvc_tier *t, struct tier_walk *w, bool cached)
{
	static const size_t max = 256;
	char (*aa)[3] = malloc(max * 3), (*bb)[3] = malloc(max * 3);
	int64_t now = tier_now_s();
	uint32_t *nss = NULL;
	size_t nns = 0;
	int ret;

	ret = aa && bb ? walk_namespaces(t, &nss, &nns) : -ENOMEM;
	for (size_t i = 0; !ret && i < nns; i++) {
		char nsname[16], leaf[32];
		int nfd;
		size_t na;

		snprintf(nsname, sizeof(nsname), "ns%u", nss[i]);
		nfd = sub_dir(t->root_fd, nsname);
		if (nfd < 0) {
			if (nfd == -ELOOP || nfd == -ENOTDIR)
				kvc_warn_ratelimited("%s/%s is not a directory of kvcached's (a link?): not scanned",
						     t->dir, nsname);
			continue;
		}
		na = fanout(nfd, aa, max);
		for (size_t a = 0; a < na; a++) {
			int afd = sub_dir(nfd, aa[a]);
			size_t nb;

			if (afd < 0)
				continue;	/* a link or a file: not ours */
			nb = fanout(afd, bb, max);
			for (size_t b = 0; b < nb; b++) {
				int bfd = sub_dir(afd, bb[b]);

				if (bfd < 0)
					continue;
				snprintf(leaf, sizeof(leaf), "%s/%s/%s",
					 nsname, aa[a], bb[b]);
				walk_leaf(t, w, nss[i], bfd, leaf, now, cached);
				close(bfd);
				tier_worker_renew(t);
			}
			close(afd);
		}
		close(nfd);
	}
	free(nss);
	free(aa);
	free(bb);
	if (ret)
		return ret;
	if (w->nrecs)
		qsort(w->recs, w->nrecs, sizeof(*w->recs), rec_cmp);
	if (cached) {
		/* What this walk read is the next one's cache. */
		struct rec *c = NULL;

		if (w->nrecs) {
			c = malloc(w->nrecs * sizeof(*c));
			if (c)
				memcpy(c, w->recs, w->nrecs * sizeof(*c));
		}
		free(t->wcache);
		t->wcache = c;
		t->nwcache = c ? w->nrecs : 0;
	}
	return 0;
}

void tier_walk_free(struct tier_walk *w)
{
	if (!w)
		return;
	free(w->recs);
	free(w);
}

/*
 * Apply a finished walk to the index, on the loop: a file the index has
 * is marked seen, one it lacks is kept for tier_pass_end(). Within
 * budget_s of the loop's time (one record at least); true once done.
 */
static bool walk_apply(struct kvc_tier *t, struct tier_walk *w,
		       kvc_tier_ns_fn ns_ok, void *arg, double budget_s)
{
	double start = kvc_now();

	while (w->pos < w->nrecs) {
		const struct rec *r = &w->recs[w->pos++];
		uint32_t id;

		if (r->ns != w->last_ns) {
			w->last_ns = r->ns;
			w->last_ok = ns_ok(arg, r->ns);
		}
		if (!w->last_ok)
			continue;
		if (!kvc_index_find(t->idx, r->ns, r->key, &id) &&
		    tier_is_present(t, id)) {
			t->mark[id] = t->pass;
			t->pass_bytes +=
				kvc_index_entry(t->idx, id)->loc[t->cfg.tier].u64;
		} else {
			t->pass_bytes += r->size;
			tier_push_rec(t, r);
		}
		if (!(w->pos & 255) && kvc_now() - start > budget_s)
			break;
	}
	return w->pos >= w->nrecs;
}

/*
 * How old an unreachable file must be to go. Writers publish a chain's
 * blocks concurrently, so a scan that passes between two publications
 * sees a child before its parent: only a file left like that for
 * TIER_ORPHAN_AGE (and the grace) is taken for a leftover of a writer
 * that died, or of a GC that took the parent.
 *
 * A directory with no room for another block cannot wait that long. Its
 * unreachable files hold room that no lookup can use and that GC, which
 * picks among indexed blocks only, cannot free: every chain this node
 * knew may be gone already (the other nodes' GC, an admin), and each
 * spill would be refused for ten minutes. Then an unreachable file goes
 * once past the grace and TIER_ORPHAN_FULL_AGE: a parent's write in
 * flight is done far sooner, and a child taken early costs a miss,
 * never a wrong byte.
 */
static int64_t orphan_age(const struct kvc_tier *t)
{
	int64_t grace = (int64_t)(t->cfg.grace_ms / 1000);
	int64_t floor = TIER_ORPHAN_AGE;

	if (!tier_room(t, kvc_bf_file_size(t->cfg.max_payload)))
		floor = TIER_ORPHAN_FULL_AGE;
	return grace > floor ? grace : floor;
}

/* A file whose parent is nowhere, nor any ancestor's: removed when old
 * (orphan_age()), else counted. */
static void unreachable(struct kvc_tier *t, struct rec *r, int64_t now)
{
	int64_t age = orphan_age(t);
	char path[PATH_MAX];

	if (r->size == 0)	/* already counted: a cycle */
		return;
	t->st.unreachable++;
	if (t->writable && now - r->mtime > age) {
		/* The worker looks at its mtime again, by the server's
		 * clock: a lease may have been renewed since the walk. */
		struct tier_job *j = tier_job_new(TJ_UNLINK_OLD);

		if (j && !tier_file_path(t, r->ns, r->key, path, sizeof(path))) {
			strcpy(j->path, path);
			j->age = age;
			j->size = r->size;
			tier_job_post(t, j);
		} else {
			tier_job_free(j);
		}
	} else {
		t->orphan_bytes += r->size;
	}
	r->size = 0;
}

/*
 * Insert record i, its parents first (they may be later records): climb
 * to a record whose parent is in the index, stacking the way, then insert
 * on the way down. The stack is as deep as a prompt is long, so it grows;
 * it is deeper than there are records only around a cycle, which only a
 * forged file can make.
 */
static int insert_rec(struct kvc_tier *t, size_t i, int64_t now)
{
	struct rec probe;
	size_t depth = 0;
	uint32_t id;

	for (;;) {
		struct rec *r = &t->recs[i], *p;

		if (r->size == 0)	/* already handled */
			break;
		if (depth == t->capchain) {
			size_t cap = t->capchain ? t->capchain * 2 : 64;
			size_t *n = realloc(t->chain, cap * sizeof(*n));

			if (!n)
				return -ENOMEM;
			t->chain = n;
			t->capchain = cap;
		}
		t->chain[depth++] = i;
		if (r->first ||
		    !kvc_index_find(t->idx, r->ns, r->parent, &id))
			break;
		probe.ns = r->ns;
		memcpy(probe.key, r->parent, KVC_BF_KEY_SIZE);
		p = bsearch(&probe, t->recs, t->nrecs, sizeof(*p), rec_cmp);
		if (!p || p->size == 0 || depth > t->nrecs) {
			/* Unreachable, and so is every chain ending here. */
			while (depth)
				unreachable(t, &t->recs[t->chain[--depth]],
					    now);
			return 0;
		}
		i = (size_t)(p - t->recs);
	}
	while (depth) {
		struct rec *r = &t->recs[t->chain[--depth]];
		int ret = kvc_index_insert(t->idx, r->ns, r->key,
					   r->first ? NULL : r->parent, &id);

		if (ret && ret != -EEXIST)
			return ret;
		if (!tier_set_present(t, id, r->size))
			t->st.found++;
		r->size = 0;
	}
	return 0;
}

/* A new pass: the worker walks the directory (a TJ_WALK job). */
int tier_pass_post(struct kvc_tier *t)
{
	struct tier_job *j = tier_job_new(TJ_WALK);
	int ret;

	if (j)
		j->walk = calloc(1, sizeof(*j->walk));
	if (!j || !j->walk) {
		tier_job_free(j);
		return -ENOMEM;
	}
	t->in_pass = true;
	t->walk = NULL;
	t->nrecs = 0;
	t->pass_bytes = 0;
	t->orphan_bytes = 0;
	t->pass_start = kvc_now();
	ret = tier_job_post(t, j);
	if (ret)
		t->in_pass = false;
	return ret;
}

/* The worker's walk is back (tier_job_done): the loop applies it. */
void tier_pass_walked(struct kvc_tier *t, struct tier_walk *w, int status)
{
	if (status || !t->in_pass) {
		tier_walk_free(w);
		t->in_pass = false;
		return;
	}
	t->st.corrupt += w->corrupt;
	t->walk = w;
}

bool tier_pass_step(struct kvc_tier *t, kvc_tier_ns_fn ns_ok, void *arg,
		    double budget_s)
{
	if (!t->walk || !walk_apply(t, t->walk, ns_ok, arg, budget_s))
		return false;
	tier_walk_free(t->walk);
	t->walk = NULL;
	tier_pass_end(t);
	return true;
}

/* A pass in flight, finished now: the worker's walk waited for. */
void tier_pass_finish(struct kvc_tier *t, kvc_tier_ns_fn ns_ok, void *arg)
{
	if (!t->in_pass)
		return;
	tier_jobs_wait(t);
	tier_jobs_reap(t);
	if (t->in_pass)
		tier_pass_step(t, ns_ok, arg, 1e9);
}

/*
 * The pass is over: add what it found, forget what it did not see
 * (another node removed it), and take the measured usage.
 */
void tier_pass_end(struct kvc_tier *t)
{
	int64_t now = tier_now_s();
	uint64_t usage = 0;

	if (t->nrecs)	/* recs is NULL until a first one */
		qsort(t->recs, t->nrecs, sizeof(*t->recs), rec_cmp);
	t->st.unreachable = 0;
	for (size_t i = 0; i < t->nrecs; i++)
		insert_rec(t, i, now);
	for (uint32_t id = kvc_index_next(t->idx, 0); id != KVC_ID_NONE;
	     id = kvc_index_next(t->idx, id + 1)) {
		const struct kvc_entry *e;

		if (!tier_is_present(t, id))
			continue;
		if (t->mark[id] != t->pass) {
			tier_set_absent(t, id);
			t->st.lost++;
			continue;
		}
		e = kvc_index_entry(t->idx, id);
		usage += e->loc[t->cfg.tier].u64;
	}
	/* Spills in flight keep their reservation (see write_finished). */
	for (unsigned int i = 0; i < t->cfg.depth; i++)
		if (t->pend[i].used && t->pend[i].write)
			usage += t->pend[i].size;
	t->st.usage = usage + t->orphan_bytes;
	t->st.scans++;
	t->nrecs = 0;
	t->pass++;
	t->in_pass = false;
}

long kvc_tier_scan(struct kvc_tier *t, kvc_tier_ns_fn ns_ok, void *arg)
{
	struct tier_walk *w = calloc(1, sizeof(*w));
	uint64_t found;
	int ret;

	if (!w)
		return -ENOMEM;
	tier_pass_finish(t, ns_ok, arg);
	found = t->st.found;
	/* Here, on the caller's thread, without the worker's cache: the
	 * worker may be walking at the same time. */
	ret = tier_walk_run(t, w, false);
	if (ret) {
		tier_walk_free(w);
		return ret;
	}
	t->in_pass = true;
	t->nrecs = 0;
	t->pass_bytes = 0;
	t->orphan_bytes = 0;
	t->pass_start = kvc_now();
	tier_pass_walked(t, w, 0);
	tier_pass_step(t, ns_ok, arg, 1e9);
	tier_mf_compact(t);		/* the next start reads this instead */
	return (long)(t->st.found - found);
}
