// SPDX-License-Identifier: GPL-2.0
/*
 * Eviction policies and the admission filter (policy.h,
 * Documentation/design/eviction.md).
 *
 * Leaf first is kept cheap by never letting a non-leaf be a candidate:
 * "lru" and "cost" keep only leaves in their heap (a parent leaves the heap
 * when a child arrives in the tier and comes back when the last one goes),
 * and "s3fifo" moves a non-leaf it meets at a queue's tail to the head of
 * main, as it does with a block that was hit. Scanning past ancestors at
 * the cold end would otherwise cost O(depth) per victim, and ancestors are
 * exactly what a prefix cache keeps hitting first.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"
#include "policy_density.h"

enum kind { K_LRU, K_S3FIFO, K_COST, K_DENSITY };
enum state { ST_NONE, ST_TRACKED, ST_PICKED };
enum queue { Q_NONE, Q_SMALL, Q_MAIN };

#define NONE		KVC_ID_NONE
#define FREQ_MAX	3	/* S3-FIFO's 2-bit frequency */
/* The small queue's share of tracked blocks, unless set (s3fifo_small). */
#define SMALL_PCT	10

/* Per-id heap data ("lru", "cost"). */
struct hnode {
	uint64_t h;		/* priority: L + cost, 0 for "lru" */
	uint64_t seq;		/* tick of the last insert or access */
	uint32_t pos;		/* place in the heap, NONE when out */
	uint32_t depth;
};

/* Per-id queue data ("s3fifo"). next goes towards the tail (older). */
struct qnode {
	uint32_t prev, next;
	uint8_t freq, queue;
};

struct fifo {
	uint32_t head, tail;
	size_t len;
};

/* Ghost: fingerprints of the last gcap blocks evicted from small. */
struct gslot {
	uint64_t fp;		/* 0: empty */
	uint64_t pos;		/* its place in ring */
};

struct kvc_policy {
	enum kind kind;
	const struct kvc_index *idx;
	unsigned int tier;
	size_t cap;			/* length of the per-id arrays */
	uint8_t *state;
	size_t tracked;
	uint64_t tick;
	/* "lru", "cost" */
	struct hnode *hn;
	uint32_t *heap;
	size_t heap_len, heap_cap;
	uint64_t L;
	/* "s3fifo" */
	struct qnode *qn;
	struct fifo small, main;
	unsigned int small_pct;		/* small's share, percent */
	size_t hint;			/* capacity hint, sizes the ghost */
	uint64_t *ring;
	size_t gcap, gnext;
	struct gslot *gtab;
	size_t gmask;
	/* "density" */
	struct kvc_density *dm;
};

static int leaf(const struct kvc_policy *p, uint32_t id)
{
	const struct kvc_entry *e = kvc_index_entry(p->idx, id);

	return e && !e->child_in[p->tier];
}

/* Grow the per-id arrays to cover id. */
static int ensure(struct kvc_policy *p, uint32_t id)
{
	size_t cap = p->cap ? p->cap : 64, old = p->cap;
	void *n;

	if (id < p->cap)
		return 0;
	while (cap <= id)
		cap *= 2;
	n = realloc(p->state, cap);
	if (!n)
		return -ENOMEM;
	p->state = n;
	memset(p->state + old, ST_NONE, cap - old);
	if (p->kind == K_DENSITY) {
		if (kvc_density_ensure(p->dm, cap))
			return -ENOMEM;
	} else if (p->kind == K_S3FIFO) {
		n = realloc(p->qn, cap * sizeof(*p->qn));
		if (!n)
			return -ENOMEM;
		p->qn = n;
	} else {
		n = realloc(p->hn, cap * sizeof(*p->hn));
		if (!n)
			return -ENOMEM;
		p->hn = n;
	}
	p->cap = cap;
	return 0;
}

/* ---- binary min-heap of leaves, by (h, seq) --------------------------- */

static int before(const struct kvc_policy *p, uint32_t a, uint32_t b)
{
	const struct hnode *x = &p->hn[a], *y = &p->hn[b];

	return x->h < y->h || (x->h == y->h && x->seq < y->seq);
}

static void heap_put(struct kvc_policy *p, size_t i, uint32_t id)
{
	p->heap[i] = id;
	p->hn[id].pos = (uint32_t)i;
}

static void sift_up(struct kvc_policy *p, size_t i)
{
	uint32_t id = p->heap[i];

	while (i && before(p, id, p->heap[(i - 1) / 2])) {
		heap_put(p, i, p->heap[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
	heap_put(p, i, id);
}

static void sift_down(struct kvc_policy *p, size_t i)
{
	uint32_t id = p->heap[i];

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= p->heap_len)
			break;
		if (c + 1 < p->heap_len && before(p, p->heap[c + 1], p->heap[c]))
			c++;
		if (!before(p, p->heap[c], id))
			break;
		heap_put(p, i, p->heap[c]);
		i = c;
	}
	heap_put(p, i, id);
}

static int heap_push(struct kvc_policy *p, uint32_t id)
{
	if (p->heap_len == p->heap_cap) {
		size_t cap = p->heap_cap ? 2 * p->heap_cap : 64;
		uint32_t *n = realloc(p->heap, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		p->heap = n;
		p->heap_cap = cap;
	}
	p->heap[p->heap_len++] = id;
	sift_up(p, p->heap_len - 1);
	return 0;
}

static void heap_remove(struct kvc_policy *p, uint32_t id)
{
	size_t i = p->hn[id].pos;
	uint32_t last = p->heap[--p->heap_len];

	p->hn[id].pos = NONE;
	if (i == p->heap_len)
		return;
	heap_put(p, i, last);
	sift_up(p, i);
	sift_down(p, p->hn[last].pos);
}

/* A new priority for a tracked id: now, plus the recompute cost. */
static void touch(struct kvc_policy *p, uint32_t id)
{
	struct hnode *n = &p->hn[id];

	n->seq = ++p->tick;
	n->h = p->kind == K_COST ? p->L + KVC_COST_BASE + n->depth : 0;
	if (n->pos != NONE) {
		/* Priorities only grow (L never falls), but be general. */
		sift_up(p, n->pos);
		sift_down(p, n->pos);
	}
}

static int heap_insert(struct kvc_policy *p, uint32_t id,
		       const struct kvc_entry *e)
{
	struct hnode *n = &p->hn[id];
	uint32_t par = e->parent;

	if (par == NONE)
		n->depth = 0;
	else if (par < p->cap && p->state[par] != ST_NONE)
		n->depth = p->hn[par].depth + 1;	/* tracked: known */
	else
		n->depth = kvc_index_depth(p->idx, id);
	n->pos = NONE;
	touch(p, id);
	if (leaf(p, id) && heap_push(p, id))
		return -ENOMEM;
	/* The parent has a child in the tier now: not a candidate. */
	if (par != NONE && par < p->cap && p->state[par] == ST_TRACKED &&
	    p->hn[par].pos != NONE && !leaf(p, par))
		heap_remove(p, par);
	return 0;
}

/* After id left the tier: its parent may have become a leaf. */
static int heap_parent_check(struct kvc_policy *p, uint32_t id)
{
	const struct kvc_entry *e = kvc_index_entry(p->idx, id);
	uint32_t par = e ? e->parent : NONE;

	if (par != NONE && par < p->cap && p->state[par] == ST_TRACKED &&
	    p->hn[par].pos == NONE && leaf(p, par))
		return heap_push(p, par);
	return 0;
}

static size_t heap_pick(struct kvc_policy *p, uint32_t *out, size_t n)
{
	size_t k = 0;

	while (k < n && p->heap_len) {
		uint32_t id = p->heap[0];

		heap_remove(p, id);
		/*
		 * Only if the caller changed the tier without telling us:
		 * leave it out until its children's on_remove.
		 */
		if (!leaf(p, id))
			continue;
		p->state[id] = ST_PICKED;
		p->tracked--;
		if (p->kind == K_COST)
			p->L = p->hn[id].h;
		out[k++] = id;
	}
	return k;
}

/* ---- S3-FIFO ------------------------------------------------------------ */

static void q_push_head(struct kvc_policy *p, struct fifo *q, uint8_t which,
			uint32_t id)
{
	struct qnode *n = &p->qn[id];

	n->queue = which;
	n->prev = NONE;
	n->next = q->head;
	if (q->head != NONE)
		p->qn[q->head].prev = id;
	else
		q->tail = id;
	q->head = id;
	q->len++;
}

static void q_unlink(struct kvc_policy *p, uint32_t id)
{
	struct qnode *n = &p->qn[id];
	struct fifo *q = n->queue == Q_SMALL ? &p->small : &p->main;

	if (n->prev != NONE)
		p->qn[n->prev].next = n->next;
	else
		q->head = n->next;
	if (n->next != NONE)
		p->qn[n->next].prev = n->prev;
	else
		q->tail = n->prev;
	q->len--;
	n->queue = Q_NONE;
}

static size_t g_home(const struct kvc_policy *p, uint64_t fp)
{
	return (size_t)fp & p->gmask;	/* fingerprints are hashes already */
}

static size_t g_find(const struct kvc_policy *p, uint64_t fp)
{
	size_t s = g_home(p, fp);

	while (p->gtab[s].fp && p->gtab[s].fp != fp)
		s = (s + 1) & p->gmask;
	return s;
}

/* Empty slot hole and shift the rest of its probe run back (index.c). */
static void g_delete(struct kvc_policy *p, size_t hole)
{
	size_t j = hole;

	for (;;) {
		size_t home;

		j = (j + 1) & p->gmask;
		if (!p->gtab[j].fp)
			break;
		home = g_home(p, p->gtab[j].fp);
		if (((j - home) & p->gmask) >= ((j - hole) & p->gmask)) {
			p->gtab[hole] = p->gtab[j];
			hole = j;
		}
	}
	p->gtab[hole].fp = 0;
}

/* Remember fp, forgetting the oldest of the last gcap additions. */
static void ghost_add(struct kvc_policy *p, uint64_t fp)
{
	uint64_t old = p->ring[p->gnext];
	size_t s;

	if (old) {
		s = g_find(p, old);
		if (p->gtab[s].fp && p->gtab[s].pos == p->gnext)
			g_delete(p, s);
	}
	p->ring[p->gnext] = fp;
	s = g_find(p, fp);
	p->gtab[s].fp = fp;
	p->gtab[s].pos = p->gnext;
	p->gnext = (p->gnext + 1) % p->gcap;
}

/* Is fp remembered? If so, forget it (it is coming back). */
static int ghost_take(struct kvc_policy *p, uint64_t fp)
{
	size_t s = g_find(p, fp);

	if (!p->gtab[s].fp)
		return 0;
	p->ring[p->gtab[s].pos] = 0;
	g_delete(p, s);
	return 1;
}

static void s3_insert(struct kvc_policy *p, uint32_t id)
{
	p->qn[id].freq = 0;
	if (ghost_take(p, kvc_index_fingerprint(p->idx, id)))
		q_push_head(p, &p->main, Q_MAIN, id);
	else
		q_push_head(p, &p->small, Q_SMALL, id);
}

/*
 * One victim. Small is evicted from while it holds at least small_pct% of
 * the tracked blocks (or main is empty): its tail goes to main if it was
 * hit (or is a non-leaf), else out, into the ghost. Otherwise main's tail
 * goes back to the head with its frequency decremented if it was hit (or
 * unchanged if it is a non-leaf), else out. The budget only matters if
 * the tier holds no leaf at all, which a consistent caller never sees.
 */
static uint32_t s3_evict(struct kvc_policy *p)
{
	size_t budget = 8 * (p->small.len + p->main.len) + 8;

	while (budget--) {
		size_t s = p->small.len, m = p->main.len;
		uint32_t t;

		if (s && (100 * s >= p->small_pct * (s + m) || !m)) {
			t = p->small.tail;
			q_unlink(p, t);
			if (!leaf(p, t) || p->qn[t].freq) {
				p->qn[t].freq = 0;
				q_push_head(p, &p->main, Q_MAIN, t);
				continue;
			}
			ghost_add(p, kvc_index_fingerprint(p->idx, t));
			return t;
		}
		if (!m)
			break;
		t = p->main.tail;
		q_unlink(p, t);
		if (!leaf(p, t) || p->qn[t].freq) {
			if (leaf(p, t))
				p->qn[t].freq--;
			q_push_head(p, &p->main, Q_MAIN, t);
			continue;
		}
		return t;
	}
	return NONE;
}

/*
 * The ghost remembers as many blocks as main holds when the tier is
 * full: (100 - small_pct)% of the capacity hint, at least one.
 */
static int ghost_alloc(struct kvc_policy *p)
{
	size_t main_pct = 100 - p->small_pct, tab = 2;

	free(p->ring);
	free(p->gtab);
	p->gcap = p->hint / 100 * main_pct + p->hint % 100 * main_pct / 100;
	if (!p->gcap)
		p->gcap = 1;
	p->gnext = 0;
	while (tab < 2 * p->gcap)
		tab *= 2;
	p->gmask = tab - 1;
	p->ring = calloc(p->gcap, sizeof(*p->ring));
	p->gtab = calloc(tab, sizeof(*p->gtab));
	return p->ring && p->gtab ? 0 : -ENOMEM;
}

/* ---- hit density (policy_density.c): leaves in its candidate set ------- */

static bool tracked(const struct kvc_policy *p, uint32_t id)
{
	return id != NONE && id < p->cap && p->state[id] == ST_TRACKED;
}

static int dens_insert(struct kvc_policy *p, uint32_t id,
		       const struct kvc_entry *e)
{
	uint32_t par = e->parent;

	kvc_density_insert(p->dm, id, par);
	if (leaf(p, id) && kvc_density_add(p->dm, id))
		return -ENOMEM;
	/* The parent has a child in the tier now: not a candidate. */
	if (tracked(p, par) && kvc_density_has(p->dm, par) && !leaf(p, par))
		kvc_density_del(p->dm, par);
	return 0;
}

/* After id left the tier: its parent may have become a leaf. */
static int dens_parent_check(struct kvc_policy *p, uint32_t id)
{
	const struct kvc_entry *e = kvc_index_entry(p->idx, id);
	uint32_t par = e ? e->parent : NONE;

	if (tracked(p, par) && !kvc_density_has(p->dm, par) && leaf(p, par))
		return kvc_density_add(p->dm, par);
	return 0;
}

static size_t dens_pick(struct kvc_policy *p, uint32_t *out, size_t n)
{
	size_t k = 0;

	while (k < n) {
		uint32_t id = kvc_density_pick(p->dm);

		if (id == NONE)
			break;
		/* As heap_pick(): out until its children's on_remove. */
		if (!leaf(p, id))
			continue;
		kvc_density_end(p->dm, id);
		p->state[id] = ST_PICKED;
		p->tracked--;
		out[k++] = id;
	}
	return k;
}

/* ---- the API -------------------------------------------------------------- */

int kvc_policy_create(struct kvc_policy **out, const char *name,
		      const struct kvc_index *idx, unsigned int tier,
		      size_t capacity_hint)
{
	struct kvc_policy *p;
	enum kind kind;

	*out = NULL;
	if (!name || !idx || tier >= KVC_NR_TIERS)
		return -EINVAL;
	if (!strcmp(name, "lru"))
		kind = K_LRU;
	else if (!strcmp(name, "s3fifo"))
		kind = K_S3FIFO;
	else if (!strcmp(name, "cost"))
		kind = K_COST;
	else if (!strcmp(name, "density"))
		kind = K_DENSITY;
	else
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->kind = kind;
	p->idx = idx;
	p->tier = tier;
	p->small.head = p->small.tail = NONE;
	p->main.head = p->main.tail = NONE;
	p->small_pct = SMALL_PCT;
	p->hint = capacity_hint;
	if ((kind == K_S3FIFO && ghost_alloc(p)) ||
	    (kind == K_DENSITY && kvc_density_create(&p->dm, capacity_hint)) ||
	    (capacity_hint && ensure(p, (uint32_t)(capacity_hint < NONE ?
						   capacity_hint - 1 :
						   NONE - 1)))) {
		kvc_policy_destroy(p);
		return -ENOMEM;
	}
	*out = p;
	return 0;
}

int kvc_policy_set_small(struct kvc_policy *p, unsigned int pct)
{
	if (p->kind != K_S3FIFO || pct < 1 || pct > 99)
		return -EINVAL;
	/* Blocks already queued were placed under the old share. */
	if (p->tracked || p->small.len || p->main.len)
		return -EBUSY;
	if (pct == p->small_pct)
		return 0;
	p->small_pct = pct;
	return ghost_alloc(p);
}

void kvc_policy_destroy(struct kvc_policy *p)
{
	if (!p)
		return;
	free(p->state);
	free(p->hn);
	free(p->heap);
	free(p->qn);
	free(p->ring);
	free(p->gtab);
	kvc_density_destroy(p->dm);
	free(p);
}

const char *kvc_policy_name(const struct kvc_policy *p)
{
	static const char *const names[] = {
		"lru", "s3fifo", "cost", "density",
	};

	return names[p->kind];
}

int kvc_policy_on_insert(struct kvc_policy *p, uint32_t id)
{
	const struct kvc_entry *e = kvc_index_entry(p->idx, id);

	if (!e || !(e->tiers & (1u << p->tier)))
		return -ENOENT;
	if (ensure(p, id))
		return -ENOMEM;
	if (p->state[id] == ST_TRACKED)
		return -EEXIST;
	if (p->kind == K_S3FIFO) {
		s3_insert(p, id);
	} else if (p->kind == K_DENSITY) {
		if (dens_insert(p, id, e))
			return -ENOMEM;
	} else if (heap_insert(p, id, e)) {
		return -ENOMEM;
	}
	p->state[id] = ST_TRACKED;
	p->tracked++;
	return 0;
}

int kvc_policy_on_access(struct kvc_policy *p, uint32_t id)
{
	if (id >= p->cap || p->state[id] != ST_TRACKED)
		return -ENOENT;
	if (p->kind == K_S3FIFO) {
		if (p->qn[id].freq < FREQ_MAX)
			p->qn[id].freq++;
	} else if (p->kind == K_DENSITY) {
		kvc_density_access(p->dm, id);
	} else {
		touch(p, id);
	}
	return 0;
}

int kvc_policy_on_remove(struct kvc_policy *p, uint32_t id)
{
	if (id >= p->cap || p->state[id] == ST_NONE)
		return -ENOENT;
	if (p->state[id] == ST_TRACKED) {
		if (p->kind == K_S3FIFO) {
			q_unlink(p, id);
		} else if (p->kind == K_DENSITY) {
			if (kvc_density_has(p->dm, id))
				kvc_density_del(p->dm, id);
			kvc_density_end(p->dm, id);
		} else if (p->hn[id].pos != NONE) {
			heap_remove(p, id);
		}
		p->tracked--;
	}
	p->state[id] = ST_NONE;
	if (p->kind == K_DENSITY)
		return dens_parent_check(p, id);
	if (p->kind != K_S3FIFO)
		return heap_parent_check(p, id);
	return 0;
}

size_t kvc_policy_pick(struct kvc_policy *p, uint32_t *out, size_t n)
{
	size_t k = 0;

	if (p->kind == K_DENSITY)
		return dens_pick(p, out, n);
	if (p->kind != K_S3FIFO)
		return heap_pick(p, out, n);
	while (k < n) {
		uint32_t id = s3_evict(p);

		if (id == NONE)
			break;
		p->state[id] = ST_PICKED;
		p->tracked--;
		out[k++] = id;
	}
	return k;
}

size_t kvc_policy_count(const struct kvc_policy *p)
{
	return p->tracked;
}

/* ---- admission: count-min sketch ---------------------------------------- */

#define CMS_ROWS	4
#define CMS_MAX		255

struct kvc_admit {
	unsigned int k;
	size_t width;			/* power of two */
	uint64_t seen, window;		/* accesses since the last halving */
	uint8_t *c;			/* CMS_ROWS rows of width counters */
};

int kvc_admit_create(struct kvc_admit **out, unsigned int k,
		     size_t width_hint)
{
	struct kvc_admit *a;

	*out = NULL;
	if (k < 1 || k > CMS_MAX)
		return -EINVAL;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->k = k;
	if (k > 1) {
		a->width = 64;
		while (a->width < width_hint && a->width < SIZE_MAX / 64)
			a->width *= 2;
		a->window = 10 * (uint64_t)a->width;
		a->c = calloc(CMS_ROWS, a->width);
		if (!a->c) {
			free(a);
			return -ENOMEM;
		}
	}
	*out = a;
	return 0;
}

void kvc_admit_destroy(struct kvc_admit *a)
{
	if (a)
		free(a->c);
	free(a);
}

/*
 * Row r's counter for fp: double hashing, i_r = h1 + r * h2, with h2 odd
 * so the rows' positions differ. fp is a hash already.
 */
static uint8_t *cell(const struct kvc_admit *a, uint64_t fp, unsigned int r)
{
	uint64_t h2 = ((fp >> 32) | (fp << 32)) | 1;

	return &a->c[r * a->width + ((fp + r * h2) & (a->width - 1))];
}

unsigned int kvc_admit_estimate(const struct kvc_admit *a, uint64_t fp)
{
	unsigned int r, min = CMS_MAX;

	if (a->k == 1)
		return 0;
	for (r = 0; r < CMS_ROWS; r++)
		if (*cell(a, fp, r) < min)
			min = *cell(a, fp, r);
	return min;
}

bool kvc_admit_access(struct kvc_admit *a, uint64_t fp)
{
	unsigned int r, est;

	if (a->k == 1)
		return true;
	est = kvc_admit_estimate(a, fp);
	/*
	 * Conservative update: raise only the counters at the minimum. The
	 * others already count more than fp's accesses (collisions), so the
	 * estimate stays an upper bound and drifts up less.
	 */
	if (est < CMS_MAX) {
		for (r = 0; r < CMS_ROWS; r++)
			if (*cell(a, fp, r) == est)
				(*cell(a, fp, r))++;
		est++;
	}
	if (++a->seen == a->window) {
		size_t i;

		for (i = 0; i < CMS_ROWS * a->width; i++)
			a->c[i] >>= 1;
		a->seen = 0;
	}
	return est >= a->k;
}

size_t kvc_admit_bytes(const struct kvc_admit *a)
{
	return sizeof(*a) + CMS_ROWS * a->width;
}
