// SPDX-License-Identifier: GPL-2.0
/*
 * parents: the parents journal (journal.h) and the rebuild of the index
 * from the module's pool after a restart (kernel mode, kvcd.h).
 *
 * The module keeps sealed blocks across a kvcached restart, with their
 * namespace and key but not their chain: which block is whose parent
 * lives only in the daemon's index. Each STORE appends the links of its
 * entries to the journal before it is answered; a start reads it back,
 * places every sealed block whose parent is placed (parents first), and
 * compacts the journal to what is left. A block whose link is lost is
 * not indexed and goes as an orphan (reclaim.c). In memfd mode the pool
 * dies with the daemon, and so nothing is journalled.
 */
#include "kvcd.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "fault.h"
#include "journal.h"
#include "log.h"

/* The link of entry id, as the index has it now. */
static void kvcd_link_of(struct kvcd *d, uint32_t id, struct kvc_link *l)
{
	const struct kvc_entry *e = kvc_index_entry(d->index, id);

	memset(l, 0, sizeof(*l));
	l->ns = e->ns;
	l->first = e->parent == KVC_ID_NONE;
	memcpy(l->key, e->key, KVCACHE_KEY_SIZE);
	if (!l->first)
		memcpy(l->parent, kvc_index_entry(d->index, e->parent)->key,
		       KVCACHE_KEY_SIZE);
}

/*
 * Replace the journal by the links of the blocks the pool holds for the
 * index now: what a restart needs, nothing of the blocks evicted since.
 * At start (after the rebuild) and whenever the appends made it due.
 */
int kvcd_journal_compact(struct kvcd *d)
{
	struct kvc_link *links;
	char path[PATH_MAX];
	size_t n = 0;
	int fd, ret;

	links = malloc(((size_t)d->nr_blocks + 1) * sizeof(*links));
	if (!links)
		return -ENOMEM;
	for (uint32_t i = 0; i < d->nr_blocks; i++) {
		const struct kvc_entry *e;

		if (d->by_block[i] == KVC_ID_NONE)
			continue;
		e = kvc_index_entry(d->index, d->by_block[i]);
		if (e && (e->tiers & (1u << KVC_TIER_POOL)))
			kvcd_link_of(d, d->by_block[i], &links[n++]);
	}
	kvcd_path(d, "parents", path);
	ret = kvc_journal_rewrite(path, links, n, &fd);
	free(links);
	if (ret) {
		/* Keep appending to the old file; try again when it doubled. */
		d->journal_last = d->journal_bytes;
		kvc_err("compacting %s: %s", path,
			strerror(-ret));
		return ret;
	}
	if (d->journal_fd >= 0)
		close(d->journal_fd);
	d->journal_fd = fd;
	d->journal_bytes = (uint64_t)n * KVC_JOURNAL_REC;
	d->journal_last = d->journal_bytes;
	d->journal_compactions++;
	kvc_debug("%s compacted: %zu records", path, n);
	return 0;
}

/* A journal append failed (or there is no journal): count it, say it once. */
static void kvcd_journal_failed(struct kvcd *d, int err)
{
	d->journal_errors++;
	kvc_metric_add(d->dm.journal_errors, 1);
	if (err != d->journal_last_error)
		kvc_err("%s/parents: %s: STOREs are refused until the journal can be written (a block it does not list would be an orphan after a restart)",
			d->state_dir, strerror(-err));
	d->journal_last_error = err;
}

/*
 * Entry id was just stored in the pool: append its link. In kernel mode
 * a block is kept across a restart only through its record, so a STORE
 * whose record cannot be written is refused (kvcd_store_one()): 0 or
 * -errno. With no journal open (the start could not write one) it is
 * tried again, once a second at most.
 */
int kvcd_journal_add(struct kvcd *d, uint32_t id)
{
	struct kvc_link l;
	double now;
	int ret;

	if (!kvc_pool_has(d->pool, KVC_POOL_PERSISTENT))
		return 0;	/* memfd mode: the pool dies with us */
	if (d->journal_fd < 0) {
		now = kvc_now();
		ret = -EIO;
		if (now >= d->journal_retry_at) {
			d->journal_retry_at = now + 1.0;
			ret = kvcd_journal_compact(d);
		}
		if (ret) {
			kvcd_journal_failed(d, ret);
			return ret;
		}
	}
	kvcd_link_of(d, id, &l);
	ret = kvc_fault_err(KVC_FAULT_JOURNAL_WRITE);
	if (!ret)
		ret = kvc_journal_append(d->journal_fd, &l);
	if (ret) {
		kvcd_journal_failed(d, ret);
		return ret;
	}
	if (d->journal_last_error) {
		kvc_info("%s/parents: appends work again", d->state_dir);
		d->journal_last_error = 0;
	}
	d->journal_bytes += KVC_JOURNAL_REC;
	/* Bounded: one append per store, compacted as evictions pile up. */
	if (kvc_journal_due(d->journal_bytes, kvc_policy_count(d->policy),
			    d->journal_last, d->journal_min))
		kvcd_journal_compact(d);
	return 0;
}

/* Every valid record of the journal, sorted by (ns, key). */
static struct kvc_link *kvcd_journal_read(struct kvcd *d, size_t *n)
{
	struct kvc_link *links;
	char path[PATH_MAX];
	size_t bad;
	int ret;

	kvcd_path(d, "parents", path);
	ret = kvc_journal_read(path, &links, n, &bad);
	if (ret && ret != -ENOENT)
		kvc_err("%s: %s", path, strerror(-ret));
	if (bad)
		kvc_warn("%s: %zu records refused (damaged, torn, or an older format); their blocks will be reclaimed",
			 path, bad);
	if (links)
		qsort(links, *n, sizeof(*links), kvc_link_cmp);
	return links;
}


/* ---- rebuilding after a restart (kernel mode) -------------------------- */

struct kvcd_sealed {
	struct kvcache_block_info info;
	const struct kvc_link *link;
};

int kvcd_rebuild(struct kvcd *d)
{
	struct kvcache_block_info info[64];
	struct kvcd_sealed *sealed = NULL, *tmp;
	struct kvc_link *links, probe;
	size_t nlinks, n = 0, cap = 0, placed = 0;
	uint32_t start = 0, count, next;
	bool progress = true;

	links = kvcd_journal_read(d, &nlinks);
	while (start < d->nr_blocks &&
	       !kvc_pool_query(d->pool, start, info, 64, &count, &next)) {
		for (uint32_t i = 0; i < count; i++) {
			if (n == cap) {
				cap = cap ? cap * 2 : 256;
				tmp = realloc(sealed, cap * sizeof(*sealed));
				if (!tmp)
					goto out;
				sealed = tmp;
			}
			sealed[n].info = info[i];
			probe.ns = info[i].ns_id;
			memcpy(probe.key, info[i].key, KVCACHE_KEY_SIZE);
			sealed[n].link = links ?
				bsearch(&probe, links, nlinks, sizeof(*links),
					kvc_link_cmp) : NULL;
			n++;
		}
		if (next <= start)
			break;
		start = next;
	}
	/* Parents before children: a chain is rebuilt from its first block. */
	while (progress) {
		progress = false;
		for (size_t i = 0; i < n; i++) {
			const struct kvc_link *l = sealed[i].link;
			uint32_t id;

			if (!l)
				continue;
			if (kvc_index_insert(d->index, l->ns, l->key,
					     l->first ? NULL : l->parent,
					     &id) ||
			    kvcd_set_pool(d, id, sealed[i].info.handle))
				continue;
			sealed[i].link = NULL;
			placed++;
			progress = true;
		}
	}
	if (n)
		kvc_info("%zu sealed blocks in the pool, %zu back in the index; the rest will be reclaimed",
			 n, placed);
out:
	free(sealed);
	free(links);
	return 0;
}
