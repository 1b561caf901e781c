// SPDX-License-Identifier: GPL-2.0
/*
 * libkvcache: the fast path, DRAM hits without a round trip.
 *
 * kvcached publishes the blocks its index holds in the pool in read-only
 * segments (common/fastidx.h). memfd mode: one segment for the whole
 * pool, which FAST_MAP hands to a client given the pool. Kernel mode:
 * one segment per namespace, which FAST_NS hands only to a client that
 * may read the namespace; it is asked for when a namespace is opened,
 * and again (at most once per LIB_FAST_RETRY_NS) while there is none.
 *
 * A copying load looks each key up in the segment and copies the block:
 *  - memfd mode: out of the pool mapping, keeping the copy only if the
 *    block was not taken back meanwhile (kvc_fastidx_still());
 *  - kernel mode: out of the pool view, after pinning the handle the
 *    segment showed with our own /dev/kvcache file. The kernel checks the
 *    generation and our read permission at PIN: a block evicted and
 *    reused since it was published is refused (ESTALE), so the bytes
 *    copied are always the ones published under the key; the pin keeps
 *    the block from eviction while they are copied, and goes right after.
 *    kvcache_load_map() hands the pinned blocks out instead, as the
 *    daemon's path does, until kvcache_release().
 * The first key that misses (not in the pool, a bucket that was full, a
 * block changing hands, a refused pin) and everything after it go to the
 * daemon as before, which also brings blocks up from g3/g4.
 *
 * A lookup is answered the same way, as far as the pool goes: the keys
 * the fast index shows are DRAM hits (the daemon would also name g3/g4
 * where they have a copy), and the daemon is asked from the first one it
 * does not, continuing the chain there (LOOKUP's CONTINUE).
 *
 * The daemon still hears of every hit, for its eviction policy and its
 * counters: the handles gather here and go in one TOUCH (no reply) per
 * LIB_TOUCH_MAX hits, or with the next call after LIB_TOUCH_NS, or at
 * kvcache_stat() and kvcache_close(), with the counts of the lookups
 * answered here.
 *
 * memfd mode: the segment and the pool mapping come from the same
 * daemon, and are swapped together under c->lock (conn.c drops the
 * segment when it maps a new pool): a call takes both in one snapshot.
 * A replaced segment stays mapped until kvcache_close(), as a replaced
 * pool does, for loads still reading it.
 * Both modes: a call first polls a pidfd of the daemon that gave the
 * segments (at most once per LIB_FAST_CHECK_NS: a system call costs as
 * much as the rest of a small load), so a dead daemon's segments are
 * dropped within that, however it died, and the call goes to the
 * socket, which reconnects.
 * Where the daemon's pid cannot be seen (another pid namespace) there is
 * no pidfd: a daemon that exits still retires its segments, so every
 * check fails; one killed outright cannot. In memfd mode its pool (which
 * nobody writes any more) keeps serving the blocks it held, their own
 * bytes, until the next call that needs the daemon, at the latest the
 * next TOUCH, reconnects; in kernel mode the kernel's generation check
 * keeps every hit right whoever published it.
 */
#include "lib_priv.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "fastidx.h"

/* A replaced segment and its daemon's pidfd, kept until close. */
struct lib_old_fast {
	struct lib_old_fast *next;
	struct kvc_fastidx *f;
	int pidfd;
};

/* Under c->lock: keep segment f (and pidfd) until close. */
static void fast_retire_locked(struct kvcache *c, struct kvc_fastidx *f,
			       int pidfd)
{
	struct lib_old_fast *o;

	if (!f && pidfd < 0)
		return;
	o = malloc(sizeof(*o));
	if (!o)
		return;	/* rare enough to leak the view, not unmap it live */
	o->f = f;
	o->pidfd = pidfd;
	o->next = c->old_fast;
	c->old_fast = o;
}

/* Under c->lock: retire the current segments to the old list. */
void lib_fast_drop_locked(struct kvcache *c)
{
	for (uint32_t i = 0; i < c->nr_fast_ns; i++) {
		fast_retire_locked(c, c->fast_ns[i].f, -1);
		c->fast_ns[i].f = NULL;
		c->fast_ns[i].asked = 0;	/* ask the next daemon at once */
	}
	fast_retire_locked(c, c->fast, c->fast_pidfd);
	c->fast = NULL;
	c->fast_pidfd = -1;
	c->fast_pid = 0;
}

/*
 * Under c->lock: the segments of daemon pid from now on. Another
 * daemon's go (it died, or is going).
 */
static void fast_daemon_locked(struct kvcache *c, pid_t daemon)
{
	if (c->fast_pid == daemon && (c->fast || c->nr_fast_ns))
		return;
	lib_fast_drop_locked(c);
	c->fast_pid = daemon;
	/*
	 * A pidfd turns readable when the daemon exits, however it does:
	 * one poll(2) tells a load whether the segment still speaks for a
	 * live daemon. None where the daemon's pid is not visible (another
	 * pid namespace): see the top of this file.
	 */
	if (daemon > 0)
		c->fast_pidfd = (int)syscall(SYS_pidfd_open, daemon, 0);
}

/* Under c->lock: the slot of namespace ns_id, made if need be; or NULL. */
static struct lib_fast_ns *fast_ns_slot_locked(struct kvcache *c,
					       uint32_t ns_id, bool make)
{
	struct lib_fast_ns *t;

	for (uint32_t i = 0; i < c->nr_fast_ns; i++)
		if (c->fast_ns[i].ns_id == ns_id)
			return &c->fast_ns[i];
	if (!make)
		return NULL;
	if (c->nr_fast_ns == c->cap_fast_ns) {
		uint32_t cap = c->cap_fast_ns ? 2 * c->cap_fast_ns : 4;

		t = realloc(c->fast_ns, cap * sizeof(*t));
		if (!t)
			return NULL;
		c->fast_ns = t;
		c->cap_fast_ns = cap;
	}
	t = &c->fast_ns[c->nr_fast_ns++];
	*t = (struct lib_fast_ns) { .ns_id = ns_id };
	return t;
}

void lib_fast_install(struct kvcache *c, int fd, pid_t daemon)
{
	struct kvc_fastidx *f;

	if (kvc_fastidx_attach(fd, (uint32_t)c->nr_blocks, &f))
		return;		/* not a segment we understand: no fast path */
	pthread_mutex_lock(&c->lock);
	lib_fast_drop_locked(c);
	fast_daemon_locked(c, daemon);
	c->fast = f;
	pthread_mutex_unlock(&c->lock);
}

void lib_fast_ns_install(struct kvcache *c, uint32_t ns_id, int fd,
			 pid_t daemon)
{
	struct lib_fast_ns *t;
	struct kvc_fastidx *f;

	if (kvc_fastidx_attach(fd, (uint32_t)c->nr_blocks, &f))
		return;		/* not a segment we understand: no fast path */
	pthread_mutex_lock(&c->lock);
	fast_daemon_locked(c, daemon);
	t = fast_ns_slot_locked(c, ns_id, true);
	if (t) {
		/* Two threads asked at once: keep one, the other until close. */
		fast_retire_locked(c, t->f, -1);
		t->f = f;
	} else {
		fast_retire_locked(c, f, -1);
	}
	pthread_mutex_unlock(&c->lock);
}

void lib_fast_fini(struct kvcache *c)
{
	struct lib_old_fast *o, *on;

	for (o = c->old_fast; o; o = on) {
		on = o->next;
		kvc_fastidx_detach(o->f);
		if (o->pidfd >= 0)
			close(o->pidfd);
		free(o);
	}
	c->old_fast = NULL;
	for (uint32_t i = 0; i < c->nr_fast_ns; i++)
		kvc_fastidx_detach(c->fast_ns[i].f);
	free(c->fast_ns);
	c->fast_ns = NULL;
	c->nr_fast_ns = c->cap_fast_ns = 0;
	kvc_fastidx_detach(c->fast);
	c->fast = NULL;
	if (c->fast_pidfd >= 0)
		close(c->fast_pidfd);
	c->fast_pidfd = -1;
}

/*
 * Kernel mode, under c->lock: namespace ns_id's segment, or NULL. While
 * there is none, ask for it (unlocked) at most once per LIB_FAST_RETRY_NS.
 */
static const struct kvc_fastidx *fast_ns_locked(struct kvcache *c,
						uint32_t ns_id, uint64_t now)
{
	struct lib_fast_ns *t = fast_ns_slot_locked(c, ns_id, true);

	if (!t)
		return NULL;
	/*
	 * Retired: its daemon exited, and no pidfd told us (another pid
	 * namespace). Ask whoever serves the socket now.
	 */
	if (t->f && kvc_fastidx_retired(t->f)) {
		fast_retire_locked(c, t->f, -1);
		t->f = NULL;
	}
	if (t->f)
		return t->f;
	if (t->asked && now - t->asked < LIB_FAST_RETRY_NS)
		return NULL;
	t->asked = now;
	pthread_mutex_unlock(&c->lock);
	lib_conn_fast_ns(c, ns_id);
	pthread_mutex_lock(&c->lock);
	t = fast_ns_slot_locked(c, ns_id, false);
	return t ? t->f : NULL;
}

/*
 * The segment and the block bytes (memfd: the pool mapping; kernel: the
 * pool view) of one daemon, if it is alive: NULL when there is no fast
 * path now. A dead daemon's segments are retired here, so the caller
 * asks the socket, which reconnects.
 */
static const struct kvc_fastidx *fast_get(struct kvcache *c, uint32_t ns_id,
					  uint8_t **pool)
{
	const struct kvc_fastidx *f;
	struct pollfd pfd = { .events = POLLIN };

	uint64_t now = kvc_now_ns();

	pthread_mutex_lock(&c->lock);
	if (c->mode == KVC_PROTO_MODE_KERNEL) {
		*pool = c->view;
		f = c->view && !c->fast_off ? fast_ns_locked(c, ns_id, now) :
					      NULL;
	} else {
		*pool = c->pool;
		f = c->fast;
	}
	pfd.fd = c->fast_pidfd;
	/*
	 * One look at the daemon per LIB_FAST_CHECK_NS is enough: skip it
	 * while the last look that found it alive is that recent. (Only a
	 * look that found it alive counts: calls racing the first look
	 * after a death look too.)
	 */
	if (now - c->fast_alive < LIB_FAST_CHECK_NS)
		pfd.fd = -1;
	pthread_mutex_unlock(&c->lock);
	if (!f || !*pool)
		return NULL;
	if (pfd.fd < 0)
		return f;
	if (poll(&pfd, 1, 0) != 0) {
		pthread_mutex_lock(&c->lock);
		if (c->fast_pidfd == pfd.fd)
			lib_fast_drop_locked(c);
		pthread_mutex_unlock(&c->lock);
		return NULL;
	}
	pthread_mutex_lock(&c->lock);
	if (c->fast_pidfd == pfd.fd)
		c->fast_alive = now;
	pthread_mutex_unlock(&c->lock);
	return f;
}

/*
 * Send n handles, and the lookups, in TOUCHes (the counts with the first);
 * dropped if the daemon cannot take them.
 */
static void touch_send(struct kvcache *c, const struct kvcache_handle *h,
		       uint32_t n, uint32_t lookups, uint32_t keys)
{
	struct lib_conn *k;
	int err;

	if (!n && !keys)
		return;
	k = lib_conn_get(c, -1, &err);
	if (!k)
		return;
	for (uint32_t done = 0; (done < n || keys) && k->fd >= 0;) {
		uint32_t m = n - done < lib_batch(c) ? n - done : lib_batch(c);
		struct kvc_touch t = {
			.count = m, .lookups = lookups,
			.lookup_keys = keys, .hit_keys = keys,
		};

		if (k->version < KVC_PROTO_VERSION_FAST)
			break;
		lib_send(c, k, kvc_proto_encode_touch(LIB_TX(k), &t, h + done));
		done += m;
		lookups = keys = 0;
	}
	lib_conn_put(c, k);
}

/*
 * Take what waits to be sent, under c->lock, when it is due (full, old,
 * or force); returns whether there is anything to send.
 */
static bool touch_take(struct kvcache *c, uint64_t now, bool force,
		       struct kvcache_handle *out, uint32_t *n,
		       uint32_t *lookups, uint32_t *keys)
{
	bool due = c->nr_touch == LIB_TOUCH_MAX ||
		   c->touch_keys >= LIB_TOUCH_KEYS_MAX ||
		   now - c->touch_since >= LIB_TOUCH_NS;

	if (!c->nr_touch && !c->touch_keys)
		return false;
	if (!force && !due)
		return false;
	*n = c->nr_touch;
	memcpy(out, c->touch, sizeof(out[0]) * c->nr_touch);
	*lookups = c->touch_lookups;
	*keys = c->touch_keys;
	c->nr_touch = 0;
	c->touch_lookups = 0;
	c->touch_keys = 0;
	return true;
}

void lib_touch_flush(struct kvcache *c)
{
	struct kvcache_handle h[LIB_TOUCH_MAX];
	uint32_t n = 0, lookups = 0, keys = 0;
	bool send;

	pthread_mutex_lock(&c->lock);
	send = touch_take(c, kvc_now_ns(), true, h, &n, &lookups, &keys);
	pthread_mutex_unlock(&c->lock);
	if (send)
		touch_send(c, h, n, lookups, keys);
}

/*
 * Note n blocks the fast path found, and (lookups, keys) lookups it
 * answered; send them when the buffer is full or old.
 */
static void touch_add(struct kvcache *c, const struct kvcache_handle *h,
		      uint32_t n, uint32_t lookups, uint32_t keys)
{
	struct kvcache_handle out[LIB_TOUCH_MAX];
	uint64_t now = kvc_now_ns();

	for (;;) {
		uint32_t room, take, sn = 0, sl = 0, sk = 0;
		bool send;

		pthread_mutex_lock(&c->lock);
		if (!c->nr_touch && !c->touch_keys)
			c->touch_since = now;
		room = LIB_TOUCH_MAX - c->nr_touch;
		take = n < room ? n : room;
		memcpy(c->touch + c->nr_touch, h, sizeof(h[0]) * take);
		c->nr_touch += take;
		c->touch_lookups += lookups;
		c->touch_keys += keys;
		h += take;
		n -= take;
		lookups = keys = 0;
		send = touch_take(c, now, false, out, &sn, &sl, &sk);
		pthread_mutex_unlock(&c->lock);
		if (send)
			touch_send(c, out, sn, sl, sk);
		if (!n)
			break;
	}
}

/*
 * The leading keys of a chain the fast index shows in the pool: hits
 * into hit (up to max); how many. parent: the key before keys[0] in the
 * chain (NULL: keys[0] must be a first block). No bytes are read.
 */
static uint32_t fast_prefix(struct kvcache_namespace *ns,
			    const struct kvc_fastidx *f, const uint8_t *parent,
			    const uint8_t *keys, uint32_t max,
			    struct kvc_fastidx_hit *hit)
{
	uint32_t i;

	for (i = 0; i < max; i++) {
		const uint8_t *key = keys + (size_t)i * KVCACHE_KEY_SIZE;

		if (!kvc_fastidx_find(f, ns->ns_id, key, parent,
				      KVC_FASTIDX_CHAIN, &hit[i]))
			break;
		parent = key;
	}
	return i;
}

size_t lib_fast_lookup(struct kvcache_namespace *ns, const uint8_t *keys,
		       size_t n, uint32_t *tiers)
{
	struct kvcache *c = ns->c;
	struct kvc_fastidx_hit hit[64];
	struct kvcache_handle h[64];
	const struct kvc_fastidx *f;
	size_t done = 0;
	uint8_t *pool;

	f = fast_get(c, ns->ns_id, &pool);
	if (!f)
		return 0;
	while (done < n) {
		uint32_t want = n - done < 64 ? (uint32_t)(n - done) : 64;
		const uint8_t *parent = done ?
			keys + (done - 1) * KVCACHE_KEY_SIZE : NULL;
		uint32_t got = fast_prefix(ns, f, parent,
					   keys + done * KVCACHE_KEY_SIZE,
					   want, hit);

		for (uint32_t i = 0; i < got; i++) {
			h[i] = hit[i].h;
			if (tiers)	/* the same bits as LOOKUP's */
				tiers[done + i] = hit[i].tiers;
		}
		done += got;
		/* The whole call answered here counts as a lookup. */
		touch_add(c, h, got, done == n ? 1 : 0, got);
		if (got < want)
			break;
	}
	return done;
}

/*
 * Kernel mode: up to 64 leading keys the segment shows, pinned with our
 * file, copied from the view or handed out; how many (a prefix).
 */
static uint32_t fast_load_kernel(struct kvcache_namespace *ns,
				 const struct kvc_fastidx *f,
				 const uint8_t *view, const uint8_t *keys,
				 uint32_t want, uint8_t *buf, size_t stride,
				 struct kvcache_block *blocks)
{
	struct kvcache *c = ns->c;
	struct kvcache_handle h[64];
	uint32_t got, pinned, i;

	for (got = 0; got < want; got++) {
		struct kvc_fastidx_hit hit;

		/* A load takes blocks by key, as LOAD does: no chain check. */
		if (!kvc_fastidx_find(f, ns->ns_id,
				      keys + (size_t)got * KVCACHE_KEY_SIZE,
				      NULL, 0, &hit))
			break;
		h[got] = hit.h;
	}
	/*
	 * The kernel pins only the generation the segment showed, and only
	 * for a file that may read its namespace: what it pins is the block
	 * published under the key, now kept from eviction.
	 */
	pinned = lib_kernel_pin(c, h, got);
	for (i = 0; i < pinned; i++) {
		const uint8_t *p = view + (size_t)h[i].index * c->block_size;

		if (blocks) {
			blocks[i] = (struct kvcache_block) {
				.data = (void *)p, .len = ns->block_bytes,
				.index = h[i].index, .gen = h[i].gen,
				.conn = LIB_CONN_KERNEL_PIN,
			};
			continue;
		}
		memcpy(buf + (size_t)i * stride, p, ns->block_bytes);
	}
	if (!blocks)
		lib_kernel_unpin(c, h, pinned);
	touch_add(c, h, pinned, 0, 0);
	return pinned;
}

size_t lib_fast_load(struct kvcache_namespace *ns, const uint8_t *keys,
		     size_t n, uint8_t *buf, size_t stride,
		     struct kvcache_block *blocks)
{
	struct kvcache *c = ns->c;
	struct kvcache_handle h[64];
	const struct kvc_fastidx *f;
	uint32_t nh = 0;
	uint8_t *pool;
	size_t i;

	f = fast_get(c, ns->ns_id, &pool);
	if (!f || ns->block_bytes > c->block_size)
		return 0;
	if (c->mode == KVC_PROTO_MODE_KERNEL) {
		for (i = 0; i < n;) {
			uint32_t want = n - i < 64 ? (uint32_t)(n - i) : 64;
			uint32_t got;

			got = fast_load_kernel(ns, f, pool,
					       keys + i * KVCACHE_KEY_SIZE,
					       want, buf ? buf + i * stride :
					       NULL, stride,
					       blocks ? blocks + i : NULL);
			i += got;
			if (got < want)
				break;
		}
		return i;
	}
	if (!buf)
		return 0;	/* memfd mode's pins are the daemon's */
	for (i = 0; i < n; i++) {
		struct kvc_fastidx_hit hit;

		/* A load takes blocks by key, as LOAD does: no chain check. */
		if (!kvc_fastidx_find(f, ns->ns_id, keys + i * KVCACHE_KEY_SIZE,
				      NULL, 0, &hit))
			break;
		memcpy(buf + i * stride,
		       pool + (size_t)hit.h.index * c->block_size,
		       ns->block_bytes);
		/* Taken back while we copied: those bytes may be another's. */
		if (!kvc_fastidx_still(f, hit.h.index, hit.seq))
			break;
		h[nh] = hit.h;
		if (++nh == sizeof(h) / sizeof(h[0])) {
			touch_add(c, h, nh, 0, 0);
			nh = 0;
		}
	}
	touch_add(c, h, nh, 0, 0);
	return i;
}
