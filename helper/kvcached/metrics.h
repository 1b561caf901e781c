/* SPDX-License-Identifier: GPL-2.0 */
/*
 * metrics: counters, gauges and histograms rendered in the Prometheus text
 * exposition format, version 0.0.4 (Documentation/admin-guide/kvcached-config.md lists
 * what kvcached exports).
 *
 * A registry (struct kvc_metrics) holds metric families; a family has a
 * name, help text, a type and a fixed list of label names. A series is
 * one family plus one value per label ("tier" = "pool"); the caller looks
 * a series up once and keeps the pointer, so updating it on a hot path is
 * a plain add. There is no global state and no locking: the daemon is one
 * event loop, and a registry belongs to it.
 *
 * Families render in registration order and series in creation order, so
 * the output is stable (and testable byte for byte).
 */
#ifndef KVC_METRICS_H
#define KVC_METRICS_H

#include <stddef.h>
#include <stdint.h>

#define KVC_METRIC_MAX_LABELS	4
#define KVC_METRIC_MAX_BUCKETS	32	/* finite ones; +Inf is implicit */

enum kvc_metric_type {
	KVC_METRIC_COUNTER,	/* uint64_t, only goes up */
	KVC_METRIC_GAUGE,	/* double, set or moved either way */
	KVC_METRIC_HISTOGRAM,	/* bucket counts, sum and count */
};

struct kvc_metrics;
struct kvc_metric_family;
struct kvc_metric;

struct kvc_metrics *kvc_metrics_new(void);
void kvc_metrics_free(struct kvc_metrics *reg);

/*
 * Register a family. name must match [a-zA-Z_:][a-zA-Z0-9_:]*; label names
 * [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__" (reserved by Prometheus),
 * no duplicates, and for a histogram not "le". labels is a NULL-terminated
 * array, or NULL for none. help is any text (escaped on output).
 * buckets (histograms only, else NULL and 0) are the finite upper bounds,
 * strictly increasing; a +Inf bucket is always added.
 * A family without labels gets its one series at once (kvc_metric_get(f,
 * NULL) returns it), so it renders as 0 from the start.
 * Returns the family, or NULL with errno EINVAL (bad argument), EEXIST (the
 * name, or a histogram's _bucket/_sum/_count name, is taken) or ENOMEM.
 */
struct kvc_metric_family *
kvc_metrics_register(struct kvc_metrics *reg, enum kvc_metric_type type,
		     const char *name, const char *help,
		     const char *const *labels, const double *buckets,
		     size_t nbuckets);

/*
 * The series of family f with these label values (as many as the family
 * has label names; NULL when it has none), created at its first use.
 * Values may be any string. Returns NULL with errno EINVAL or ENOMEM.
 */
struct kvc_metric *kvc_metric_get(struct kvc_metric_family *f,
				  const char *const *values);

/*
 * Updates. Each returns 0, or -EINVAL when the operation does not fit the
 * series' type (a programming error; the value is left alone):
 *   add:       counters (n) and gauges (+n)
 *   set, sub:  gauges
 *   observe:   histograms; v must not be NaN
 */
int kvc_metric_add(struct kvc_metric *m, uint64_t n);
int kvc_metric_sub(struct kvc_metric *m, uint64_t n);
int kvc_metric_set(struct kvc_metric *m, double v);
int kvc_metric_observe(struct kvc_metric *m, double v);

/* Current values, for tests and kvcachectl. */
uint64_t kvc_metric_counter_value(const struct kvc_metric *m);
double kvc_metric_gauge_value(const struct kvc_metric *m);

/*
 * Render every family into buf. Returns the length of the whole text (NUL
 * not included), like snprintf: when it is >= len the text was cut short
 * and the caller grows buf to at least the return value + 1 and renders
 * again. buf is NUL-terminated whenever len > 0.
 */
size_t kvc_metrics_render(const struct kvc_metrics *reg, char *buf,
			  size_t len);

/* The Content-Type this text is served with. */
#define KVC_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* ---- what kvcached exports ---------------------------------------------- */

/*
 * Tier numbers index the per-tier arrays below. They are the numbers
 * index.h and proto.h give the tiers; defining the same macros with the
 * same values here is allowed by C, and a header that ever changed one
 * would make every file including both fail to compile rather than count
 * hits under the wrong tier.
 */
#define KVC_TIER_POOL	0	/* DRAM: the kernel or memfd pool */
#define KVC_TIER_G3	1	/* local disk */
#define KVC_TIER_G4	2	/* shared storage */
#define KVC_METRICS_TIERS	3

/* "pool", "g3", "g4": the values of the "tier" label; "?" for others. */
const char *kvc_metrics_tier_name(unsigned int tier);

/* Latency buckets in seconds: 1us to 1s in steps of about 4. */
#define KVC_METRICS_LATENCY_BUCKETS	11
extern const double kvc_metrics_latency_buckets[KVC_METRICS_LATENCY_BUCKETS];

struct kvc_daemon_metrics {
	struct kvc_metric *hits[KVC_METRICS_TIERS];
	struct kvc_metric *misses[KVC_METRICS_TIERS];
	struct kvc_metric *read_bytes[KVC_METRICS_TIERS];
	struct kvc_metric *written_bytes[KVC_METRICS_TIERS];
	struct kvc_metric *evictions[KVC_METRICS_TIERS];
	struct kvc_metric *spill_errors[KVC_METRICS_TIERS];
	struct kvc_metric *read_errors[KVC_METRICS_TIERS];
	struct kvc_metric *lookup_seconds;	/* histogram */
	struct kvc_metric *connections;		/* gauge: open now */
	struct kvc_metric *connections_total;	/* counter: accepted */
	struct kvc_metric *protocol_errors;	/* counter */
	/* The parents journal refused an append: STOREs refused for it. */
	struct kvc_metric *journal_errors;	/* counter */
	/* Started without the namespace table although g3 had blocks. */
	struct kvc_metric *state_missing;	/* gauge: 0 or 1 */
	/* ns<id> directories with files, of namespaces the table lacks. */
	struct kvc_metric *unknown_namespaces;	/* gauge */
	/* Namespaces g4 describes otherwise than this node has them. */
	struct kvc_metric *ns_conflicts;	/* gauge */
	struct kvc_metric *ns_learned;		/* counter */
	/* TOUCH: dropped over touch_rate; the lookups clients reported. */
	struct kvc_metric *touches_dropped;	/* counter */
	struct kvc_metric *client_lookup_keys;	/* counter */
	struct kvc_metric *client_hit_keys;	/* counter */
};

/*
 * Register kvcached's metrics in reg and fill *dm with their series (every
 * tier's series exists from the start, at 0). Returns 0 or -errno.
 */
int kvc_metrics_register_daemon(struct kvc_metrics *reg,
				struct kvc_daemon_metrics *dm);

#endif /* KVC_METRICS_H */
