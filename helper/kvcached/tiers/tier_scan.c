// SPDX-License-Identifier: GPL-2.0
/*
 * tier_scan: rescans of a tier's directory (tier_priv.h). A shared tier
 * (g4) is written by other nodes: a pass walks ns<id>/aa/ a step at a
 * time from the tick, indexes the files it did not know (parents
 * first), forgets the ones another node removed, and measures the
 * directory's usage; temp files of dead writers go, and unreachable
 * files (no parent anywhere) are left to age and be collected.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include "tier_priv.h"

#define TIER_TMP_MAX_AGE	3600	/* s: any write is done by then */
#define TIER_ORPHAN_AGE		600	/* s: any chain is published by then */

static int rec_cmp(const void *a, const void *b)
{
	const struct rec *x = a, *y = b;

	if (x->ns != y->ns)
		return x->ns < y->ns ? -1 : 1;
	return memcmp(x->key, y->key, KVC_BF_KEY_SIZE);
}

int tier_push_rec(struct kvc_tier *t, const struct rec *r)
{
	if (t->nrecs == t->caprecs) {
		size_t cap = t->caprecs ? t->caprecs * 2 : 1024;
		struct rec *n = realloc(t->recs, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		t->recs = n;
		t->caprecs = cap;
	}
	t->recs[t->nrecs++] = *r;
	return 0;
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
void tier_scan_tmp(struct kvc_tier *t, const char *path, const char *name,
		   int64_t now)
{
	char tag[KVC_BF_MAX_TAG + 1];
	struct stat st;
	long pid;

	if (!t->writable || lstat(path, &st))
		return;
	if (!tmp_owner(name, tag, sizeof(tag), &pid) &&
	    !strcmp(tag, t->node)) {
		if (pid != (long)getpid() || st.st_mtime < t->opened - 1)
			unlink(path);
	} else if (now - st.st_mtime > TIER_TMP_MAX_AGE) {
		unlink(path);
	}
}

/* One leaf directory (ns<id>/aa/bb) of a scan. */
static void scan_leaf(struct kvc_tier *t, uint32_t ns, const char *leaf,
		      int64_t now)
{
	char path[PATH_MAX];
	struct dirent *de;
	DIR *dp = opendir(leaf);

	if (!dp)
		return;
	while ((de = readdir(dp))) {
		struct kvc_bf_header h;
		struct stat st;
		struct rec r;
		uint32_t id;
		int err;

		if (de->d_name[0] == '.' && strncmp(de->d_name, ".tmp.", 5))
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", leaf, de->d_name) >=
		    (int)sizeof(path))
			continue;
		if (!strncmp(de->d_name, ".tmp.", 5)) {
			tier_scan_tmp(t, path, de->d_name, now);
			continue;
		}
		if (kvc_bf_parse_name(de->d_name, r.key))
			continue;	/* not ours: left alone */
		if (!kvc_index_find(t->idx, ns, r.key, &id) &&
		    tier_is_present(t, id)) {
			t->mark[id] = t->pass;
			t->pass_bytes +=
				kvc_index_entry(t->idx, id)->loc[t->cfg.tier].u64;
			continue;
		}
		err = kvc_bf_read_header(path, &h, &st);
		if (tier_corrupt_err(err) ||
		    (!err && (h.ns_id != ns ||
			      memcmp(h.key, r.key, KVC_BF_KEY_SIZE)))) {
			tier_quarantine(t, ns, r.key);
			continue;
		}
		if (err)
			continue;	/* gone meanwhile, or unreadable */
		r.ns = ns;
		r.first = h.flags & KVC_BF_F_FIRST;
		memcpy(r.parent, h.parent, KVC_BF_KEY_SIZE);
		r.size = (uint64_t)st.st_size;
		r.mtime = st.st_mtime;
		t->pass_bytes += r.size;
		tier_push_rec(t, &r);
	}
	closedir(dp);
}

/* ns<id>/aa: its up to 256 leaves. */
void tier_scan_step(struct kvc_tier *t, uint32_t ns, unsigned int aa,
		    int64_t now)
{
	char d[PATH_MAX], leaf[PATH_MAX];
	struct dirent *de;
	DIR *dp;

	tier_ns_dir(t, ns, d, sizeof(d));
	if (snprintf(leaf, sizeof(leaf), "%s/%02x", d, aa & 0xff) >=
	    (int)sizeof(leaf))
		return;
	dp = opendir(leaf);
	if (!dp)
		return;
	while ((de = readdir(dp))) {
		char sub[PATH_MAX];

		if (strlen(de->d_name) != 2 || de->d_name[0] == '.')
			continue;
		if (snprintf(sub, sizeof(sub), "%s/%s", leaf, de->d_name) >=
		    (int)sizeof(sub))
			continue;
		scan_leaf(t, ns, sub, now);
	}
	closedir(dp);
}

/*
 * A file whose parent is nowhere, nor any ancestor's. Writers publish a
 * chain's blocks concurrently, so a scan that passes between two
 * publications sees a child before its parent: only a file left like
 * that for TIER_ORPHAN_AGE (and the grace) is taken for a leftover of a
 * writer that died, or of a GC that took the parent, and removed.
 */
static void unreachable(struct kvc_tier *t, struct rec *r, int64_t now)
{
	int64_t age = (int64_t)(t->cfg.grace_ms / 1000);
	char path[PATH_MAX];

	if (r->size == 0)	/* already counted: a cycle */
		return;
	t->st.unreachable++;
	if (age < TIER_ORPHAN_AGE)
		age = TIER_ORPHAN_AGE;
	if (t->writable && now - r->mtime > age) {
		if (!tier_file_path(t, r->ns, r->key, path, sizeof(path)))
			unlink(path);
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

/* The namespaces of a new pass: ns<id> directories ns_ok() accepts. */
int tier_pass_begin(struct kvc_tier *t, kvc_tier_ns_fn ns_ok, void *arg)
{
	struct dirent *de;
	size_t cap = 0;
	DIR *dp = opendir(t->dir);

	if (!dp)
		return -errno;
	t->in_pass = true;
	t->scan_nns = 0;
	t->scan_pos = 0;
	t->nrecs = 0;
	t->pass_bytes = 0;
	t->orphan_bytes = 0;
	clock_gettime(CLOCK_MONOTONIC, &t->pass_start);
	while ((de = readdir(dp))) {
		char *end;
		unsigned long ns;

		if (strncmp(de->d_name, "ns", 2))
			continue;
		ns = strtoul(de->d_name + 2, &end, 10);
		if (*end || ns < 1 || ns > KVCACHE_NS_MAX || !ns_ok(arg, (uint32_t)ns))
			continue;
		if (t->scan_nns == cap) {
			uint32_t *n;

			cap = cap ? cap * 2 : 16;
			n = realloc(t->scan_ns, cap * sizeof(*n));
			if (!n)
				break;
			t->scan_ns = n;
		}
		t->scan_ns[t->scan_nns++] = (uint32_t)ns;
	}
	closedir(dp);
	return 0;
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
	uint64_t found = t->st.found;
	int64_t now = tier_now_s();
	int ret;

	ret = tier_pass_begin(t, ns_ok, arg);
	if (ret)
		return ret;
	for (size_t i = 0; i < t->scan_nns; i++)
		for (unsigned int aa = 0; aa < 256; aa++)
			tier_scan_step(t, t->scan_ns[i], aa, now);
	tier_pass_end(t);
	tier_mf_compact(t);		/* the next start reads this instead */
	return (long)(t->st.found - found);
}
