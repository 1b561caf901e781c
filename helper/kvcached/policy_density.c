// SPDX-License-Identifier: GPL-2.0
/*
 * policy_density: hit density, learned per class and age
 * (policy_density.h). All state is in one struct kvc_density: the
 * per-id data, the candidate set, the counters and the density table
 * computed from them.
 *
 * Ages are in ticks (inserts and hits of the tier), counted in buckets
 * of 2^shift ticks. The shift adapts: when more than 1/64 of the events
 * fall in the last bucket the buckets are too fine for the tier's
 * lifetimes, and two become one; when none fall in the upper half they
 * are too coarse, and one becomes two.
 */
#include "policy_density.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "index.h"
#include "rand.h"

#define NONE		KVC_ID_NONE
#define AGES		128		/* age buckets */
#define HIT_CLASSES	4		/* hit 0, 1, 2-3, 4+ times */
#define CLASSES		(HIT_CLASSES * 2)	/* and: a child or not */
#define HITS_MAX	255
/* Events a class needs (from an age on) before its own figure counts. */
#define CLASS_MIN_EVENTS	16.0
/*
 * Ticks between recomputations: the capacity, within these bounds. A
 * model that learns late costs a short trace (or a fresh daemon) more
 * than recomputing often costs anyone: 8 classes of 128 ages is a few
 * microseconds of arithmetic.
 */
#define PERIOD_MIN	1024
#define PERIOD_MAX	(1u << 20)
#define SEED		0x6b7663616368656bULL	/* fixed: reproducible */

struct dnode {
	uint64_t last;		/* tick of the last insert or hit */
	uint32_t pos;		/* place in the candidate set, NONE if out */
	uint8_t hits;		/* saturating */
	uint8_t child;		/* something was stored under it */
};

struct kvc_density {
	struct dnode *n;
	size_t cap;
	uint32_t *set;			/* the candidates */
	size_t len, set_cap;
	uint64_t tick, next_recompute, period;
	unsigned int shift;
	uint64_t rng;
	double hits[CLASSES][AGES], ends[CLASSES][AGES];
	double density[CLASSES][AGES];
};

static unsigned int klass(const struct dnode *n)
{
	unsigned int h = n->hits == 0 ? 0 : n->hits == 1 ? 1 :
			 n->hits < 4 ? 2 : 3;

	return h * 2 + n->child;
}

static unsigned int age_of(const struct kvc_density *m, const struct dnode *n)
{
	uint64_t a = (m->tick - n->last) >> m->shift;

	return a < AGES ? (unsigned int)a : AGES - 1;
}

int kvc_density_create(struct kvc_density **out, size_t capacity_hint)
{
	struct kvc_density *m = calloc(1, sizeof(*m));
	uint64_t span = 16 * (uint64_t)(capacity_hint ? capacity_hint : 1024);

	*out = NULL;
	if (!m)
		return -ENOMEM;
	/* Ages first span 16 times the capacity in ticks. */
	while (((uint64_t)AGES << m->shift) < span && m->shift < 40)
		m->shift++;
	m->period = capacity_hint < PERIOD_MIN ? PERIOD_MIN :
		    capacity_hint > PERIOD_MAX ? PERIOD_MAX : capacity_hint;
	m->next_recompute = m->period;
	m->rng = SEED;
	*out = m;
	return 0;
}

void kvc_density_destroy(struct kvc_density *m)
{
	if (!m)
		return;
	free(m->n);
	free(m->set);
	free(m);
}

int kvc_density_ensure(struct kvc_density *m, size_t cap)
{
	struct dnode *n;

	if (cap <= m->cap)
		return 0;
	n = realloc(m->n, cap * sizeof(*n));
	if (!n)
		return -ENOMEM;
	memset(n + m->cap, 0, (cap - m->cap) * sizeof(*n));
	for (size_t i = m->cap; i < cap; i++)
		n[i].pos = NONE;
	m->n = n;
	m->cap = cap;
	return 0;
}

/* Merge (coarser) or split (finer) the age buckets of every counter. */
static void rescale(double t[CLASSES][AGES], bool coarser)
{
	for (unsigned int c = 0; c < CLASSES; c++) {
		if (coarser) {
			for (unsigned int a = 0; a < AGES / 2; a++)
				t[c][a] = t[c][2 * a] + t[c][2 * a + 1];
			for (unsigned int a = AGES / 2; a < AGES; a++)
				t[c][a] = 0;
		} else {
			for (unsigned int a = AGES / 2; a--;) {
				t[c][2 * a + 1] = t[c][a] / 2;
				t[c][2 * a] = t[c][a] / 2;
			}
		}
	}
}

static void recompute(struct kvc_density *m)
{
	double all_h[AGES] = { 0 }, all_e[AGES] = { 0 }, all_d[AGES];
	double last = 0, upper = 0, total = 0;

	for (unsigned int c = 0; c < CLASSES; c++)
		for (unsigned int a = 0; a < AGES; a++) {
			double ev = m->hits[c][a] + m->ends[c][a];

			all_h[a] += m->hits[c][a];
			all_e[a] += ev;
			total += ev;
			if (a >= AGES / 2)
				upper += ev;
			if (a == AGES - 1)
				last += ev;
		}
	/* The whole tier's density: what a class without data gets. */
	double h = 0, e = 0, l = 0;

	for (unsigned int a = AGES; a--;) {
		h += all_h[a];
		e += all_e[a];
		l += e;
		all_d[a] = l > 0 ? h / l : 0;
	}
	for (unsigned int c = 0; c < CLASSES; c++) {
		h = e = l = 0;
		for (unsigned int a = AGES; a--;) {
			h += m->hits[c][a];
			e += m->hits[c][a] + m->ends[c][a];
			l += e;
			m->density[c][a] = e >= CLASS_MIN_EVENTS ? h / l :
					   all_d[a];
		}
	}
	/* Decay: the model follows the workload. */
	for (unsigned int c = 0; c < CLASSES; c++)
		for (unsigned int a = 0; a < AGES; a++) {
			m->hits[c][a] *= 0.875;
			m->ends[c][a] *= 0.875;
		}
	if (total > 0 && last * 64 > total && m->shift < 40) {
		m->shift++;
		rescale(m->hits, true);
		rescale(m->ends, true);
	} else if (total > 0 && upper == 0 && m->shift > 0) {
		m->shift--;
		rescale(m->hits, false);
		rescale(m->ends, false);
	}
}

static void tick(struct kvc_density *m)
{
	if (++m->tick >= m->next_recompute) {
		recompute(m);
		m->next_recompute = m->tick + m->period;
	}
}

void kvc_density_insert(struct kvc_density *m, uint32_t id, uint32_t parent)
{
	struct dnode *n = &m->n[id];

	n->last = m->tick;
	n->hits = 0;
	n->child = 0;
	if (parent != NONE && parent < m->cap)
		m->n[parent].child = 1;
	tick(m);
}

void kvc_density_access(struct kvc_density *m, uint32_t id)
{
	struct dnode *n = &m->n[id];

	m->hits[klass(n)][age_of(m, n)] += 1;
	if (n->hits < HITS_MAX)
		n->hits++;
	n->last = m->tick;
	tick(m);
}

void kvc_density_end(struct kvc_density *m, uint32_t id)
{
	struct dnode *n = &m->n[id];

	m->ends[klass(n)][age_of(m, n)] += 1;
}

int kvc_density_add(struct kvc_density *m, uint32_t id)
{
	if (m->len == m->set_cap) {
		size_t cap = m->set_cap ? 2 * m->set_cap : 64;
		uint32_t *s = realloc(m->set, cap * sizeof(*s));

		if (!s)
			return -ENOMEM;
		m->set = s;
		m->set_cap = cap;
	}
	m->n[id].pos = (uint32_t)m->len;
	m->set[m->len++] = id;
	return 0;
}

void kvc_density_del(struct kvc_density *m, uint32_t id)
{
	uint32_t pos = m->n[id].pos, last = m->set[--m->len];

	m->set[pos] = last;
	m->n[last].pos = pos;
	m->n[id].pos = NONE;
}

bool kvc_density_has(const struct kvc_density *m, uint32_t id)
{
	return id < m->cap && m->n[id].pos != NONE;
}

size_t kvc_density_count(const struct kvc_density *m)
{
	return m->len;
}

uint32_t kvc_density_pick(struct kvc_density *m)
{
	uint32_t best = NONE;
	double best_d = 0;
	uint64_t best_age = 0;

	if (!m->len)
		return NONE;
	for (unsigned int i = 0; i < KVC_DENSITY_SAMPLES; i++) {
		uint32_t id = m->set[kvc_splitmix64(&m->rng) % m->len];
		const struct dnode *n = &m->n[id];
		double d = m->density[klass(n)][age_of(m, n)];
		uint64_t age = m->tick - n->last;

		if (best == NONE || d < best_d ||
		    (d == best_d && age > best_age)) {
			best = id;
			best_d = d;
			best_age = age;
		}
	}
	kvc_density_del(m, best);
	return best;
}
