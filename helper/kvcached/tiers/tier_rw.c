// SPDX-License-Identifier: GPL-2.0
/*
 * tier_rw: spills and fetches of block files through tierio's io_uring
 * (tierio.h, tier_priv.h), and what their completions change: a write
 * is published (and noted in the manifest) before the entry is present;
 * a read is verified before its payload goes up.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "log.h"
#include "manifest.h"
#include "policy.h"
#include "tier_priv.h"

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
	uint8_t bit = (uint8_t)(1u << (ns & 7));
	char name[16];
	int ret;

	tier_ns_dir(t, ns, d, len);
	/* Made or seen once: not a round trip to the server per spill. */
	if (t->ns_made[ns / 8] & bit)
		return 0;
	snprintf(name, sizeof(name), "ns%u", ns);
	if (mkdirat(t->root_fd, name, 0700) == 0)
		ret = fsync(t->root_fd) && errno != EINVAL ? -errno : 0;
	else
		ret = errno == EEXIST ? 0 : -errno;
	if (!ret)
		t->ns_made[ns / 8] |= bit;
	return ret;
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
		tier_mf_compact(t);
	if (t->mf_fd < 0)
		return;
	memcpy(r.key, h->key, KVC_BF_KEY_SIZE);
	memcpy(r.parent, h->parent, KVC_BF_KEY_SIZE);
	if (!kvc_mf_append(t->mf_fd, &r))
		t->mf_records++;
}

/*
 * A block file another writer published: present. Its size is the one
 * ours would have had (the same key: the same payload), not a stat()
 * on the shared filesystem; a rescan measures it anyway.
 */
static void found_published(struct kvc_tier *t, uint32_t id, uint64_t size)
{
	tier_set_present(t, id, size);
}

static void spill_failed(struct kvc_tier *t, int err)
{
	if (err == -EEXIST) {
		t->st.spill_exists++;
		return;
	}
	t->st.spill_errors++;
	/* A new error is said; a failing disk under STOREs is not a flood. */
	if (err != t->st.last_error)
		kvc_err_ratelimited("g%u %s: spill failed: %s",
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

	ret = !e ? -ENOENT : tier_is_present(t, id) ? -EEXIST :
	      tier_ensure_ids(t, id);
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
	tier_gc(t, size);
	if (!tier_room(t, size)) {
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
			found_published(t, id, size);
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

bool kvc_tier_can_fetch(const struct kvc_tier *t)
{
	if (!kvc_tio_idle_slots(t->tio))
		return false;
	for (unsigned int i = 0; i < t->cfg.depth; i++)
		if (!t->pend[i].used)
			return true;
	return false;
}

int kvc_tier_fetch(struct kvc_tier *t, uint32_t id, uint64_t cookie)
{
	return kvc_tier_fetch_into(t, id, cookie, NULL, 0);
}

int kvc_tier_fetch_into(struct kvc_tier *t, uint32_t id, uint64_t cookie,
			uint8_t *dst, uint64_t dst_len)
{
	const struct kvc_entry *e = kvc_index_entry(t->idx, id);
	char d[PATH_MAX];
	int64_t now = tier_now_s();
	int p, ret;

	if (!e || !(e->tiers & (1u << t->cfg.tier)))
		return -ENOENT;
	p = pend_get(t);
	if (p < 0)
		return p;
	tier_ns_dir(t, e->ns, d, sizeof(d));
	tier_gc_cancel(t, e->ns, e->key);
	/*
	 * Renew the lease: GC on any node skips a file read within the
	 * grace period. Every grace/4 at most, so reads do not turn into
	 * metadata writes on the shared filesystem; by the worker, as
	 * every metadata operation there.
	 */
	if (t->cfg.shared && t->writable &&
	    now - (int64_t)t->touched[id] >
	    (int64_t)(t->cfg.grace_ms / 4000)) {
		struct tier_job *j = tier_job_new(TJ_TOUCH);

		if (j && tier_file_path(t, e->ns, e->key, j->path,
					sizeof(j->path))) {
			tier_job_free(j);
			j = NULL;
		}
		/* Posted is as good as done: a renewal that fails is retried
		 * at the next read after grace/4. */
		if (j && !tier_job_post(t, j))
			t->touched[id] = (uint32_t)now;
	}
	ret = kvc_tio_read_into(t->tio, d, e->key, (uint64_t)p, dst, dst_len);
	if (ret == -ESTALE)
		ret = -ENOENT;		/* as in read_finished() */
	if (ret) {
		t->pend[p].used = false;
		/* EINVAL at once: a destination the read could not take,
		 * which says nothing of the file. */
		if (ret == -EBUSY || (ret == -EINVAL && dst))
			return ret;
		if (tier_corrupt_err(ret))
			tier_quarantine(t, e->ns, e->key);
		if (ret == -ENOENT)
			t->st.misses++;
		else
			t->st.read_errors++;
		if (ret != -EFBIG)
			tier_set_absent(t, id);
		return ret;
	}
	t->pend[p] = (struct pend){
		.used = true, .ns = e->ns, .id = id, .cookie = cookie,
	};
	memcpy(t->pend[p].key, e->key, KVC_BF_KEY_SIZE);
	kvc_policy_on_access(t->policy, id);
	return 0;
}

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
		found_published(t, id, p->size);
		o->id = id;
		return;
	}
	if (d->status) {
		/* Its namespace's directory went (removed by hand)? Made
		 * again by the next spill. */
		if (d->status == -ENOENT)
			t->ns_made[p->ns / 8] &= (uint8_t)~(1u << (p->ns & 7));
		spill_failed(t, d->status);
		/* Kept for the spill (spill.c); nothing holds it now. */
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
	tier_set_present(t, id, d->file_size);
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
	/* NFS: the file another node removed, through a handle cached
	 * here. Gone, as ENOENT says. */
	if (o->status == -ESTALE)
		o->status = -ENOENT;
	if (!o->status) {
		t->st.reads++;
		t->st.read_bytes += d->file_size;
		o->payload = d->payload;
		o->payload_len = d->h->payload_len;
		return;
	}
	if (tier_corrupt_err(o->status)) {
		tier_quarantine(t, p->ns, p->key);
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
		tier_set_absent(t, id);
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
