// SPDX-License-Identifier: GPL-2.0
/*
 * tier: a persistent tier's directory, accounting, GC and rescans (see
 * tier.h and Documentation/design/tiers.md).
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
 */
#include "tier.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "manifest.h"
#include "policy.h"

#define TIER_GC_SLACK		32	/* GC tries past one per block */
#define TIER_TMP_MAX_AGE	3600	/* s: any write is done by then */
#define TIER_GC_MAX_LOOKS	1024	/* victims one gc() may examine */
#define TIER_ORPHAN_AGE		600	/* s: any chain is published by then */

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
	char mf_path[PATH_MAX];
	uint64_t mf_records;		/* appended since it was rewritten */
	bool bg_pass;			/* g3: one scan after a recovery */
	int64_t opened;			/* wall clock at open, seconds */
	struct kvc_tier_stats st;

	uint32_t *mark, *touched;
	uint8_t *spilling;
	size_t nids;			/* length of the arrays */

	struct pend *pend;		/* cfg.depth records */

	/* The rescan in progress (shared tiers). */
	uint32_t pass;			/* number of the pass, from 1 */
	bool in_pass;
	uint32_t *scan_ns;		/* namespaces of this pass */
	size_t scan_nns, scan_pos;	/* position: ns index * 256 + aa */
	struct rec *recs;
	size_t nrecs, caprecs;
	size_t *chain, capchain;	/* insert_rec()'s stack */
	uint64_t pass_bytes;		/* bytes of files seen this pass */
	uint64_t orphan_bytes;		/* unreachable files' bytes */
	struct timespec pass_start, last_step;
};

static void mf_compact(struct kvc_tier *t);

static int64_t now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec;
}

static double mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The namespace's directory: dir/ns<id> (t->dir leaves room for it). */
static void ns_dir(const struct kvc_tier *t, uint32_t ns, char *out,
		   size_t len)
{
	if (snprintf(out, len, "%s/ns%u", t->dir, ns) >= (int)len)
		out[0] = '\0';
}

static int ensure_ids(struct kvc_tier *t, uint32_t id)
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

/* ---- presence ------------------------------------------------------------ */

static bool is_present(const struct kvc_tier *t, uint32_t id)
{
	const struct kvc_entry *e = kvc_index_entry(t->idx, id);

	return e && (e->tiers & (1u << t->cfg.tier));
}

static int set_present(struct kvc_tier *t, uint32_t id, uint64_t size)
{
	union kvc_loc loc = { .u64 = size };
	int ret;

	if (is_present(t, id))
		return 0;
	ret = ensure_ids(t, id);
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
static void set_absent(struct kvc_tier *t, uint32_t id)
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

static int file_path(const struct kvc_tier *t, uint32_t ns,
		     const uint8_t *key, char *out, size_t len)
{
	char d[PATH_MAX];

	ns_dir(t, ns, d, sizeof(d));
	return kvc_bf_path(d, key, out, len);
}

/* Move a corrupt file aside for examination; count it. */
static void quarantine(struct kvc_tier *t, uint32_t ns, const uint8_t *key)
{
	char d[PATH_MAX];

	ns_dir(t, ns, d, sizeof(d));
	t->st.corrupt++;
	if (kvc_bf_quarantine(d, key) && t->writable)
		kvc_warn("%s: cannot quarantine a corrupt block",
			d);
}

static bool corrupt_err(int err)
{
	return err == -EBADMSG || err == -EPROTO || err == -EPROTONOSUPPORT ||
	       err == -EINVAL;
}

/* ---- open and close ------------------------------------------------------- */

int kvc_tier_open(struct kvc_tier **out, const struct kvc_tier_config *cfg,
		  struct kvc_index *idx)
{
	struct kvc_tio_config tc = {
		.depth = cfg->depth, .max_payload = cfg->max_payload,
		.fsync = cfg->fsync, .tag = cfg->node,
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
	t->cfg = *cfg;
	strcpy(t->dir, cfg->dir);
	strcpy(t->node, cfg->node);
	t->cfg.dir = t->dir;
	t->cfg.node = t->node;
	t->idx = idx;
	t->opened = now_s();
	t->pass = 1;
	t->mf_fd = -1;
	t->writable = access(t->dir, W_OK) == 0;
	t->write_err = t->writable ? 0 : -errno;
	t->st.last_error = t->write_err;
	if (snprintf(t->mf_path, sizeof(t->mf_path), "%s/.manifest.%s", t->dir,
		     t->node) >= (int)sizeof(t->mf_path))
		t->mf_path[0] = '\0';
	/* The manifest is opened by the recovery (or scan) that rewrites
	 * it: before that, whether there is one decides how to recover. */
	t->pend = calloc(cfg->depth ? cfg->depth : 1, sizeof(*t->pend));
	ret = t->pend ? 0 : -ENOMEM;
	if (!ret)
		ret = kvc_policy_create(&t->policy, "lru", idx, cfg->tier, 1024);
	if (!ret)
		ret = kvc_tio_create(&t->tio, &tc);
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
	kvc_tio_destroy(t->tio);
	if (t->mf_fd >= 0)
		close(t->mf_fd);
	kvc_policy_destroy(t->policy);
	free(t->pend);
	free(t->mark);
	free(t->touched);
	free(t->spilling);
	free(t->scan_ns);
	free(t->recs);
	free(t->chain);
	free(t);
}

/* ---- scanning ------------------------------------------------------------- */

static int rec_cmp(const void *a, const void *b)
{
	const struct rec *x = a, *y = b;

	if (x->ns != y->ns)
		return x->ns < y->ns ? -1 : 1;
	return memcmp(x->key, y->key, KVC_BF_KEY_SIZE);
}

static int push_rec(struct kvc_tier *t, const struct rec *r)
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
static void scan_tmp(struct kvc_tier *t, const char *path, const char *name,
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
			scan_tmp(t, path, de->d_name, now);
			continue;
		}
		if (kvc_bf_parse_name(de->d_name, r.key))
			continue;	/* not ours: left alone */
		if (!kvc_index_find(t->idx, ns, r.key, &id) &&
		    is_present(t, id)) {
			t->mark[id] = t->pass;
			t->pass_bytes +=
				kvc_index_entry(t->idx, id)->loc[t->cfg.tier].u64;
			continue;
		}
		err = kvc_bf_read_header(path, &h, &st);
		if (corrupt_err(err) ||
		    (!err && (h.ns_id != ns ||
			      memcmp(h.key, r.key, KVC_BF_KEY_SIZE)))) {
			quarantine(t, ns, r.key);
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
		push_rec(t, &r);
	}
	closedir(dp);
}

/* ns<id>/aa: its up to 256 leaves. */
static void scan_step(struct kvc_tier *t, uint32_t ns, unsigned int aa,
		      int64_t now)
{
	char d[PATH_MAX], leaf[PATH_MAX];
	struct dirent *de;
	DIR *dp;

	ns_dir(t, ns, d, sizeof(d));
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
		if (!file_path(t, r->ns, r->key, path, sizeof(path)))
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
		if (!set_present(t, id, r->size))
			t->st.found++;
		r->size = 0;
	}
	return 0;
}

/* The namespaces of a new pass: ns<id> directories ns_ok() accepts. */
static int pass_begin(struct kvc_tier *t, kvc_tier_ns_fn ns_ok, void *arg)
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
static void pass_end(struct kvc_tier *t)
{
	int64_t now = now_s();
	uint64_t usage = 0;

	if (t->nrecs)	/* recs is NULL until a first one */
		qsort(t->recs, t->nrecs, sizeof(*t->recs), rec_cmp);
	t->st.unreachable = 0;
	for (size_t i = 0; i < t->nrecs; i++)
		insert_rec(t, i, now);
	for (uint32_t id = kvc_index_next(t->idx, 0); id != KVC_ID_NONE;
	     id = kvc_index_next(t->idx, id + 1)) {
		const struct kvc_entry *e;

		if (!is_present(t, id))
			continue;
		if (t->mark[id] != t->pass) {
			set_absent(t, id);
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
	int64_t now = now_s();
	int ret;

	ret = pass_begin(t, ns_ok, arg);
	if (ret)
		return ret;
	for (size_t i = 0; i < t->scan_nns; i++)
		for (unsigned int aa = 0; aa < 256; aa++)
			scan_step(t, t->scan_ns[i], aa, now);
	pass_end(t);
	mf_compact(t);		/* the next start reads this instead */
	return (long)(t->st.found - found);
}

/* ---- recovery from manifests ------------------------------------------- */

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
	char leaf[PATH_MAX], path[PATH_MAX];
	struct dirent *de;
	DIR *dp;

	if (snprintf(leaf, sizeof(leaf), "%s", final) >= (int)sizeof(leaf))
		return;
	*strrchr(leaf, '/') = '\0';
	dp = opendir(leaf);
	if (!dp)
		return;
	while ((de = readdir(dp)))
		if (!strncmp(de->d_name, ".tmp.", 5) &&
		    snprintf(path, sizeof(path), "%s/%s", leaf, de->d_name) <
		    (int)sizeof(path))
			scan_tmp(t, path, de->d_name, now);
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
		if (!file_path(t, r[i].ns, r[i].key, path, sizeof(path)))
			clean_leaf_tmp(t, path, now);
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
		    !is_present(t, id))
			continue;
		out[(*n)++] = r[i];
	}
	free(r);
}

static void mf_compact(struct kvc_tier *t)
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
	int64_t now = now_s();
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
	for (size_t i = 0; i < n; i++) {
		const struct kvc_mf_rec *m = &all[i];
		char path[PATH_MAX];
		struct stat st;
		struct rec r;

		if ((u && !mf_cmp(m, &all[u - 1])) || !ns_ok(arg, m->ns))
			continue;
		all[u++] = *m;
		if (file_path(t, m->ns, m->key, path, sizeof(path)))
			continue;
		if (lstat(path, &st)) {
			/* Written or deleted: a writer killed mid-spill may
			 * have left its temp file next to where it would be. */
			if (errno == ENOENT)
				clean_leaf_tmp(t, path, now);
			continue;
		}
		/* Same key, same bytes, same size: anything else is not the
		 * file that was written. */
		if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != m->size) {
			quarantine(t, m->ns, m->key);
			continue;
		}
		r.ns = m->ns;
		r.first = m->first;
		memcpy(r.key, m->key, KVC_BF_KEY_SIZE);
		memcpy(r.parent, m->parent, KVC_BF_KEY_SIZE);
		r.size = m->size;
		r.mtime = st.st_mtime;
		push_rec(t, &r);
	}
	free(all);
	pass_end(t);
	mf_compact(t);
	/* What no manifest names (power loss, a lost append) and stale
	 * temp files: a scan in the background finds them. */
	t->bg_pass = true;
	return (long)(t->st.found - found);
}

/* ---- GC -------------------------------------------------------------------- */

/* Delete collected files whose grace is over (shared tiers). */
static void gc_trash(struct kvc_tier *t)
{
	char d[PATH_MAX], path[PATH_MAX];
	int64_t now = now_s();
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

	if (file_path(t, e->ns, e->key, path, sizeof(path)))
		return -ENAMETOOLONG;
	if (!t->cfg.shared)
		return unlink(path) && errno != ENOENT ? -errno : 0;
	if (stat(path, &st))
		return errno == ENOENT ? 0 : -errno;
	if (now_s() - st.st_mtime < (int64_t)(t->cfg.grace_ms / 1000))
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
static void gc(struct kvc_tier *t, uint64_t need)
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
		set_absent(t, v);
		t->st.evictions++;
	}
}

/* ---- spill --------------------------------------------------------------- */

int kvc_tier_spill_begin(struct kvc_tier *t, uint8_t **payload)
{
	if (!t->writable) {
		/* Said once at open; counted every time. */
		t->st.spill_errors++;
		return t->write_err ? t->write_err : -EROFS;
	}
	return kvc_tio_write_begin(t->tio, payload);
}

void kvc_tier_spill_cancel(struct kvc_tier *t, int slot)
{
	kvc_tio_write_cancel(t->tio, slot);
}

static int pend_get(struct kvc_tier *t)
{
	for (unsigned int i = 0; i < t->cfg.depth; i++)
		if (!t->pend[i].used) {
			memset(&t->pend[i], 0, sizeof(t->pend[i]));
			t->pend[i].used = true;
			return (int)i;
		}
	return -EBUSY;
}

/*
 * Create dir/ns<id> (and make it durable) when it is not there. 0700: the
 * daemon gives it the namespace's owner, group and read bits when it
 * knows the namespace (kvcd_ns_dirs()); until then nobody else reads it.
 */
static int ensure_ns_dir(struct kvc_tier *t, uint32_t ns, char *d,
			 size_t len)
{
	ns_dir(t, ns, d, len);
	if (mkdir(d, 0700) == 0)
		return kvc_bf_fsync_dir(t->dir);
	return errno == EEXIST ? 0 : -errno;
}

/*
 * Record the block in the manifest before its file is written: then a
 * crash leaves no published file, and no temp file, without a record. A
 * failed append costs only speed at the next start (the background scan
 * finds the file).
 */
static void mf_note(struct kvc_tier *t, const struct kvc_bf_header *h,
		    uint64_t size)
{
	struct kvc_mf_rec r = {
		.ns = h->ns_id, .first = h->flags & KVC_BF_F_FIRST,
		.size = size,
	};

	/*
	 * Records of collected blocks pile up: start afresh now and then.
	 * Before this block's record, not after: the rewrite names what the
	 * index has, and this block is not there until its write is done.
	 */
	if (t->mf_records >= 2 * t->st.blocks + 4096)
		mf_compact(t);
	if (t->mf_fd < 0)
		return;
	memcpy(r.key, h->key, KVC_BF_KEY_SIZE);
	memcpy(r.parent, h->parent, KVC_BF_KEY_SIZE);
	if (!kvc_mf_append(t->mf_fd, &r))
		t->mf_records++;
}

/* A block file another writer published: present, at its size. */
static void found_published(struct kvc_tier *t, uint32_t id, uint32_t ns,
			    const uint8_t *key)
{
	char path[PATH_MAX];
	struct stat st;

	if (!file_path(t, ns, key, path, sizeof(path)) && !stat(path, &st))
		set_present(t, id, (uint64_t)st.st_size);
}

static void spill_failed(struct kvc_tier *t, int err)
{
	if (err == -EEXIST) {
		t->st.spill_exists++;
		return;
	}
	t->st.spill_errors++;
	if (err != t->st.last_error)
		kvc_err("g%u %s: spill failed: %s",
			t->cfg.tier + 2, t->dir, strerror(-err));
	t->st.last_error = err;
}

int kvc_tier_spill_submit(struct kvc_tier *t, int slot, uint32_t id,
			  uint64_t payload_len)
{
	const struct kvc_entry *e = kvc_index_entry(t->idx, id);
	uint64_t size = kvc_bf_file_size(payload_len);
	struct kvc_bf_header h;
	char d[PATH_MAX];
	int p, ret;

	ret = !e ? -ENOENT : is_present(t, id) ? -EEXIST :
	      ensure_ids(t, id);
	if (!ret && t->spilling[id])
		ret = -EALREADY;
	if (ret)
		goto out;
	/* Larger than a slot, or than the whole tier: nothing to evict. */
	if (payload_len < 1 || payload_len > t->cfg.max_payload) {
		ret = -EINVAL;
		goto out;
	}
	if (size > t->cfg.capacity) {
		ret = -ENOSPC;
		goto out;
	}
	gc(t, size);
	if (t->st.usage + size > t->cfg.capacity) {
		ret = -ENOSPC;
		goto out;
	}
	ret = ensure_ns_dir(t, e->ns, d, sizeof(d));
	if (ret)
		goto out;
	memset(&h, 0, sizeof(h));
	memcpy(h.key, e->key, KVC_BF_KEY_SIZE);
	if (e->parent == KVC_ID_NONE)
		h.flags = KVC_BF_F_FIRST;
	else
		memcpy(h.parent, kvc_index_entry(t->idx, e->parent)->key,
		       KVC_BF_KEY_SIZE);
	h.ns_id = e->ns;
	h.payload_len = payload_len;
	snprintf(h.node_id, sizeof(h.node_id), "%s", t->node);
	p = pend_get(t);
	if (p < 0) {
		ret = p;
		goto out;
	}
	mf_note(t, &h, size);
	ret = kvc_tio_write_submit(t->tio, slot, d, &h, (uint64_t)p);
	slot = -1;	/* submit frees the slot on failure */
	if (ret) {
		t->pend[p].used = false;
		/* Another node published it first: it is here now. */
		if (ret == -EEXIST)
			found_published(t, id, e->ns, e->key);
		goto out;
	}
	t->pend[p] = (struct pend){
		.used = true, .write = true, .ns = e->ns, .id = id,
		.size = size, .first = h.flags & KVC_BF_F_FIRST,
	};
	memcpy(t->pend[p].key, e->key, KVC_BF_KEY_SIZE);
	memcpy(t->pend[p].parent, h.parent, KVC_BF_KEY_SIZE);
	t->spilling[id] = 1;
	/* Reserved now, so concurrent spills cannot overshoot together. */
	t->st.usage += size;
	return 0;
out:
	if (slot >= 0)
		kvc_tio_write_cancel(t->tio, slot);
	if (ret == -EEXIST && e)
		t->st.spill_exists++;
	else if (ret != -EALREADY)
		spill_failed(t, ret);
	return ret;
}

bool kvc_tier_spilling(const struct kvc_tier *t, uint32_t id)
{
	return id < t->nids && t->spilling[id];
}

unsigned int kvc_tier_in_flight(const struct kvc_tier *t)
{
	return kvc_tio_in_flight(t->tio);
}

/* ---- fetch ----------------------------------------------------------------- */

int kvc_tier_fetch(struct kvc_tier *t, uint32_t id, uint64_t cookie)
{
	const struct kvc_entry *e = kvc_index_entry(t->idx, id);
	char d[PATH_MAX], path[PATH_MAX];
	int64_t now = now_s();
	int p, ret;

	if (!e || !(e->tiers & (1u << t->cfg.tier)))
		return -ENOENT;
	p = pend_get(t);
	if (p < 0)
		return p;
	ns_dir(t, e->ns, d, sizeof(d));
	/*
	 * Renew the lease: GC on any node skips a file read within the
	 * grace period. Every grace/4 at most, so reads do not turn into
	 * metadata writes on the shared filesystem.
	 */
	if (t->cfg.shared && t->writable &&
	    now - (int64_t)t->touched[id] >
	    (int64_t)(t->cfg.grace_ms / 4000) &&
	    !file_path(t, e->ns, e->key, path, sizeof(path)) &&
	    !utimensat(AT_FDCWD, path, NULL, 0))
		t->touched[id] = (uint32_t)now;
	ret = kvc_tio_read(t->tio, d, e->key, (uint64_t)p);
	if (ret) {
		t->pend[p].used = false;
		if (ret == -EBUSY)
			return ret;
		if (corrupt_err(ret))
			quarantine(t, e->ns, e->key);
		if (ret == -ENOENT)
			t->st.misses++;
		else
			t->st.read_errors++;
		if (ret != -EFBIG)
			set_absent(t, id);
		return ret;
	}
	t->pend[p] = (struct pend){
		.used = true, .ns = e->ns, .id = id, .cookie = cookie,
	};
	memcpy(t->pend[p].key, e->key, KVC_BF_KEY_SIZE);
	kvc_policy_on_access(t->policy, id);
	return 0;
}

/* ---- completions ----------------------------------------------------------- */

struct reap_ctx {
	struct kvc_tier *t;
	kvc_tier_done_fn fn;
	void *arg;
};

static void write_finished(struct kvc_tier *t, struct pend *p,
			   const struct kvc_tio_done *d, struct kvc_tier_done *o)
{
	uint32_t id;
	int ret;

	t->st.usage -= p->size <= t->st.usage ? p->size : t->st.usage;
	if (p->id < t->nids)
		t->spilling[p->id] = 0;
	o->status = d->status;
	ret = kvc_index_find(t->idx, p->ns, p->key, &id);
	if (d->status == -EEXIST && !ret) {
		/* Published by another node between our check and link. */
		t->st.spill_exists++;
		found_published(t, id, p->ns, p->key);
		o->id = id;
		return;
	}
	if (d->status) {
		spill_failed(t, d->status);
		/* Kept for the spill (daemon_tiers.c); nothing holds it now. */
		if (!ret)
			kvc_index_prune(t->idx, id);
		return;
	}
	t->st.spills++;
	t->st.spill_bytes += d->file_size;
	/*
	 * The entry may have left the index meanwhile (its parent's pool
	 * copy was evicted and nothing held it): the block is on disk, so
	 * it comes back, under its parent if that is still known.
	 */
	if (ret)
		ret = kvc_index_insert(t->idx, p->ns, p->key,
				       p->first ? NULL : p->parent, &id);
	if (ret && ret != -EEXIST) {
		t->st.usage += d->file_size;	/* on disk, unindexed */
		t->orphan_bytes += d->file_size;
		return;
	}
	set_present(t, id, d->file_size);
	o->id = id;
}

static void read_finished(struct kvc_tier *t, struct pend *p,
			  const struct kvc_tio_done *d, struct kvc_tier_done *o)
{
	uint32_t id;
	bool same = !kvc_index_find(t->idx, p->ns, p->key, &id);

	o->id = same ? id : KVC_ID_NONE;
	o->status = d->status;
	if (!d->status && d->h->ns_id != p->ns)
		o->status = -EBADMSG;	/* a file of another namespace */
	if (!o->status) {
		t->st.reads++;
		t->st.read_bytes += d->file_size;
		o->payload = d->payload;
		o->payload_len = d->h->payload_len;
		return;
	}
	if (corrupt_err(o->status)) {
		quarantine(t, p->ns, p->key);
		o->status = -EBADMSG;
	} else if (o->status == -ENOENT) {
		t->st.misses++;
	} else {
		t->st.read_errors++;
	}
	/*
	 * Gone or corrupt: forgotten. Any other error (EIO, a short read
	 * the retries could not complete, EFBIG) says nothing certain of
	 * the file, which may read well next time: it stays, accounted,
	 * and this read is only a miss.
	 */
	if (same && (o->status == -EBADMSG || o->status == -ENOENT))
		set_absent(t, id);
	/* set_absent may have pruned it from the index. */
	o->id = kvc_index_find(t->idx, p->ns, p->key, &id) ? KVC_ID_NONE : id;
}

static void tio_done(void *arg, const struct kvc_tio_done *d)
{
	struct reap_ctx *c = arg;
	struct kvc_tier *t = c->t;
	struct pend *p;
	struct kvc_tier_done o;

	if (d->cookie >= t->cfg.depth || !t->pend[d->cookie].used)
		return;
	p = &t->pend[d->cookie];
	memset(&o, 0, sizeof(o));
	o.op = d->op;
	o.ns = p->ns;
	o.key = p->key;
	o.id = KVC_ID_NONE;
	o.cookie = p->cookie;
	o.bytes = d->file_size;
	if (d->op == KVC_TIO_WRITE)
		write_finished(t, p, d, &o);
	else
		read_finished(t, p, d, &o);
	if (c->fn)
		c->fn(c->arg, &o);
	p->used = false;
}

int kvc_tier_reap(struct kvc_tier *t, bool wait, kvc_tier_done_fn fn,
		  void *arg)
{
	struct reap_ctx c = { t, fn, arg };

	return kvc_tio_reap(t->tio, wait, tio_done, &c);
}

int kvc_tier_fd(const struct kvc_tier *t)
{
	return kvc_tio_fd(t->tio);
}

/* ---- periodic work ----------------------------------------------------------- */

void kvc_tier_tick(struct kvc_tier *t, kvc_tier_ns_fn ns_ok, void *arg)
{
	/* g4 rescans without end; g3 once, after a recovery. */
	if (t->cfg.shared || t->bg_pass) {
		double now, begun, frac;
		double interval = (double)t->cfg.scan_interval_ms / 1e3;
		size_t total, want;
		int64_t wall = now_s();

		if (!t->in_pass && pass_begin(t, ns_ok, arg))
			return;
		/*
		 * Steps so far should match the share of the interval, from
		 * this pass's start: read after pass_begin(), or a new pass
		 * would be timed from the last one's start (from 0 after a
		 * recovery) and done whole in one tick.
		 */
		now = mono();
		begun = (double)t->pass_start.tv_sec +
			(double)t->pass_start.tv_nsec / 1e9;
		total = t->scan_nns * 256;
		frac = (now - begun) / interval;
		want = frac >= 1 ? total : (size_t)(frac * (double)total) + 1;
		while (t->scan_pos < total && t->scan_pos < want) {
			scan_step(t, t->scan_ns[t->scan_pos / 256],
				  (unsigned int)(t->scan_pos % 256), wall);
			t->scan_pos++;
		}
		if (t->scan_pos >= total && frac >= 1) {
			uint64_t found = t->st.found;

			pass_end(t);
			/* The pass after a recovery found blocks no manifest
			 * names: name them, or every start finds them late. */
			if (t->bg_pass && t->st.found != found)
				mf_compact(t);
			t->bg_pass = false;
		}
		if (t->cfg.shared)
			gc_trash(t);
	}
	if (t->st.usage > t->cfg.capacity)
		gc(t, 0);
}

int kvc_tier_drop(struct kvc_tier *t, uint32_t id)
{
	const struct kvc_entry *e = kvc_index_entry(t->idx, id);
	char path[PATH_MAX];

	if (!e || !(e->tiers & (1u << t->cfg.tier)))
		return -ENOENT;
	if (!t->writable)
		return t->write_err ? t->write_err : -EROFS;
	if (file_path(t, e->ns, e->key, path, sizeof(path)))
		return -ENAMETOOLONG;
	if (unlink(path) && errno != ENOENT)
		return -errno;
	set_absent(t, id);
	t->st.evictions++;
	return 0;
}

void kvc_tier_touch(struct kvc_tier *t, uint32_t id)
{
	if (is_present(t, id))
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

bool kvc_tier_writable(const struct kvc_tier *t)
{
	return t->writable;
}

unsigned int kvc_tier_index(const struct kvc_tier *t)
{
	return t->cfg.tier;
}
