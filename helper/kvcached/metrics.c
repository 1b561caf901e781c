// SPDX-License-Identifier: GPL-2.0
/*
 * metrics: a registry of metric families and their Prometheus text
 * rendering (see metrics.h).
 *
 * Format reference: the Prometheus "text-based format", version 0.0.4.
 * Each family is a "# HELP" line, a "# TYPE" line and one sample line per
 * series; a histogram series is a cumulative _bucket line per bound (the
 * last with le="+Inf", equal to _count), then _sum and _count.
 */
#include "metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct kvc_metric {
	const struct kvc_metric_family *family;
	char *values[KVC_METRIC_MAX_LABELS];
	uint64_t counter;
	double gauge;
	/* Histograms: per-bucket (not cumulative) counts, so that observe
	 * touches one bucket; render adds them up. [nbuckets] is +Inf. */
	uint64_t buckets[KVC_METRIC_MAX_BUCKETS + 1];
	uint64_t count;
	double sum;
};

struct kvc_metric_family {
	enum kvc_metric_type type;
	char *name;
	char *help;
	char *labels[KVC_METRIC_MAX_LABELS];
	size_t nlabels;
	double bounds[KVC_METRIC_MAX_BUCKETS];
	size_t nbounds;
	/* Pointers, so that a series handed out never moves. */
	struct kvc_metric **series;
	size_t nseries, cap;
};

struct kvc_metrics {
	struct kvc_metric_family **families;
	size_t nfamilies, cap;
};

/*
 * Room for one more pointer in an array that doubles as it fills. Two
 * typed copies, rather than one through void **, which would access the
 * arrays through the wrong pointer type.
 */
static int grow_families(struct kvc_metrics *reg)
{
	struct kvc_metric_family **p;
	size_t cap;

	if (reg->nfamilies < reg->cap)
		return 0;
	cap = reg->cap ? reg->cap * 2 : 8;
	p = realloc(reg->families, cap * sizeof(*p));
	if (!p)
		return -ENOMEM;
	reg->families = p;
	reg->cap = cap;
	return 0;
}

static int grow_series(struct kvc_metric_family *f)
{
	struct kvc_metric **p;
	size_t cap;

	if (f->nseries < f->cap)
		return 0;
	cap = f->cap ? f->cap * 2 : 4;
	p = realloc(f->series, cap * sizeof(*p));
	if (!p)
		return -ENOMEM;
	f->series = p;
	f->cap = cap;
	return 0;
}

struct kvc_metrics *kvc_metrics_new(void)
{
	return calloc(1, sizeof(struct kvc_metrics));
}

static void series_free(struct kvc_metric *m)
{
	size_t i;

	for (i = 0; i < KVC_METRIC_MAX_LABELS; i++)
		free(m->values[i]);
	free(m);
}

static void family_free(struct kvc_metric_family *f)
{
	size_t i;

	for (i = 0; i < f->nseries; i++)
		series_free(f->series[i]);
	free(f->series);
	for (i = 0; i < f->nlabels; i++)
		free(f->labels[i]);
	free(f->name);
	free(f->help);
	free(f);
}

void kvc_metrics_free(struct kvc_metrics *reg)
{
	size_t i;

	if (!reg)
		return;
	for (i = 0; i < reg->nfamilies; i++)
		family_free(reg->families[i]);
	free(reg->families);
	free(reg);
}

/* ---- validation --------------------------------------------------------- */

static bool is_alpha_(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* [a-zA-Z_:][a-zA-Z0-9_:]* */
static bool valid_metric_name(const char *s)
{
	if (!is_alpha_(*s) && *s != ':')
		return false;
	for (s++; *s; s++) {
		if (!is_alpha_(*s) && !is_digit(*s) && *s != ':')
			return false;
	}
	return true;
}

/* [a-zA-Z_][a-zA-Z0-9_]*, and "__" prefixes are Prometheus' own. */
static bool valid_label_name(const char *s)
{
	if (!is_alpha_(*s) || (s[0] == '_' && s[1] == '_'))
		return false;
	for (s++; *s; s++) {
		if (!is_alpha_(*s) && !is_digit(*s))
			return false;
	}
	return true;
}

static const char *const histogram_suffixes[] = {
	"", "_bucket", "_sum", "_count", NULL
};
static const char *const plain_suffixes[] = { "", NULL };

static const char *const *suffixes_of(enum kvc_metric_type type)
{
	return type == KVC_METRIC_HISTOGRAM ? histogram_suffixes :
					      plain_suffixes;
}

/* Whether a||as and b||bs are the same string. */
static bool concat_eq(const char *a, const char *as, const char *b,
		      const char *bs)
{
	for (;;) {
		if (!*a) {
			a = as;
			as = "";
		}
		if (!*b) {
			b = bs;
			bs = "";
		}
		if (*a != *b)
			return false;
		if (!*a)
			return true;
		a++;
		b++;
	}
}

/*
 * Two families clash when any sample name of one (a histogram's name with
 * _bucket, _sum or _count) is a sample or family name of the other:
 * Prometheus could not tell their lines apart.
 */
static bool name_taken(const struct kvc_metrics *reg, enum kvc_metric_type type,
		       const char *name)
{
	const char *const *ns = suffixes_of(type);
	size_t i, j, k;

	for (i = 0; i < reg->nfamilies; i++) {
		const struct kvc_metric_family *f = reg->families[i];
		const char *const *fs = suffixes_of(f->type);

		for (j = 0; ns[j]; j++) {
			for (k = 0; fs[k]; k++) {
				if (concat_eq(name, ns[j], f->name, fs[k]))
					return true;
			}
		}
	}
	return false;
}

static int check_labels(enum kvc_metric_type type, const char *const *labels,
			size_t *nlabels)
{
	size_t i, j;

	*nlabels = 0;
	if (!labels)
		return 0;
	for (i = 0; labels[i]; i++) {
		if (i == KVC_METRIC_MAX_LABELS || !valid_label_name(labels[i]))
			return -EINVAL;
		/* le is the histogram's own bucket label. */
		if (type == KVC_METRIC_HISTOGRAM && !strcmp(labels[i], "le"))
			return -EINVAL;
		for (j = 0; j < i; j++) {
			if (!strcmp(labels[i], labels[j]))
				return -EINVAL;
		}
	}
	*nlabels = i;
	return 0;
}

static int check_buckets(enum kvc_metric_type type, const double *buckets,
			 size_t nbuckets)
{
	size_t i;

	if (type != KVC_METRIC_HISTOGRAM)
		return buckets || nbuckets ? -EINVAL : 0;
	if (nbuckets > KVC_METRIC_MAX_BUCKETS || (nbuckets && !buckets))
		return -EINVAL;
	for (i = 0; i < nbuckets; i++) {
		if (!isfinite(buckets[i]))
			return -EINVAL;
		if (i && !(buckets[i] > buckets[i - 1]))
			return -EINVAL;
	}
	return 0;
}

/* ---- registration and series -------------------------------------------- */

static struct kvc_metric *series_new(struct kvc_metric_family *f,
				     const char *const *values)
{
	struct kvc_metric *m;
	size_t i;

	if (grow_series(f))
		return NULL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->family = f;
	for (i = 0; i < f->nlabels; i++) {
		m->values[i] = strdup(values[i]);
		if (!m->values[i]) {
			series_free(m);
			return NULL;
		}
	}
	f->series[f->nseries++] = m;
	return m;
}

struct kvc_metric_family *
kvc_metrics_register(struct kvc_metrics *reg, enum kvc_metric_type type,
		     const char *name, const char *help,
		     const char *const *labels, const double *buckets,
		     size_t nbuckets)
{
	struct kvc_metric_family *f;
	size_t nlabels, i;

	if (!reg || !name || !help || !valid_metric_name(name) ||
	    (type != KVC_METRIC_COUNTER && type != KVC_METRIC_GAUGE &&
	     type != KVC_METRIC_HISTOGRAM) ||
	    check_labels(type, labels, &nlabels) ||
	    check_buckets(type, buckets, nbuckets)) {
		errno = EINVAL;
		return NULL;
	}
	if (name_taken(reg, type, name)) {
		errno = EEXIST;
		return NULL;
	}
	if (grow_families(reg))
		goto nomem;
	f = calloc(1, sizeof(*f));
	if (!f)
		goto nomem;
	f->type = type;
	f->name = strdup(name);
	f->help = strdup(help);
	if (!f->name || !f->help)
		goto nomem_free;
	for (i = 0; i < nlabels; i++) {
		f->labels[i] = strdup(labels[i]);
		if (!f->labels[i])
			goto nomem_free;
		f->nlabels = i + 1;
	}
	for (i = 0; i < nbuckets; i++)
		f->bounds[i] = buckets[i];
	f->nbounds = nbuckets;
	if (!nlabels && !series_new(f, NULL))
		goto nomem_free;
	reg->families[reg->nfamilies++] = f;
	return f;

nomem_free:
	family_free(f);
nomem:
	errno = ENOMEM;
	return NULL;
}

struct kvc_metric *kvc_metric_get(struct kvc_metric_family *f,
				  const char *const *values)
{
	struct kvc_metric *m;
	size_t i, j;

	if (!f || (f->nlabels && !values)) {
		errno = EINVAL;
		return NULL;
	}
	for (i = 0; i < f->nlabels; i++) {
		if (!values[i]) {
			errno = EINVAL;
			return NULL;
		}
	}
	for (i = 0; i < f->nseries; i++) {
		m = f->series[i];
		for (j = 0; j < f->nlabels; j++) {
			if (strcmp(m->values[j], values[j]))
				break;
		}
		if (j == f->nlabels)
			return m;
	}
	m = series_new(f, values);
	if (!m)
		errno = ENOMEM;
	return m;
}

/* ---- updates ------------------------------------------------------------ */

int kvc_metric_add(struct kvc_metric *m, uint64_t n)
{
	switch (m->family->type) {
	case KVC_METRIC_COUNTER:
		m->counter += n;
		return 0;
	case KVC_METRIC_GAUGE:
		m->gauge += (double)n;
		return 0;
	default:
		return -EINVAL;
	}
}

int kvc_metric_sub(struct kvc_metric *m, uint64_t n)
{
	if (m->family->type != KVC_METRIC_GAUGE)
		return -EINVAL;
	m->gauge -= (double)n;
	return 0;
}

int kvc_metric_set(struct kvc_metric *m, double v)
{
	if (m->family->type != KVC_METRIC_GAUGE)
		return -EINVAL;
	m->gauge = v;
	return 0;
}

int kvc_metric_observe(struct kvc_metric *m, double v)
{
	const struct kvc_metric_family *f = m->family;
	size_t i;

	/* A NaN would sit in no finite bucket and poison _sum for good. */
	if (f->type != KVC_METRIC_HISTOGRAM || isnan(v))
		return -EINVAL;
	/* Bounds are inclusive upper limits ("le"). */
	for (i = 0; i < f->nbounds && v > f->bounds[i]; i++)
		;
	m->buckets[i]++;
	m->count++;
	m->sum += v;
	return 0;
}

uint64_t kvc_metric_counter_value(const struct kvc_metric *m)
{
	return m->counter;
}

double kvc_metric_gauge_value(const struct kvc_metric *m)
{
	return m->gauge;
}

/* ---- rendering ---------------------------------------------------------- */

/* Like snprintf over many calls: counts everything, stores what fits. */
struct out {
	char *buf;
	size_t len;
	size_t pos;
};

static void put_n(struct out *o, const char *s, size_t n)
{
	if (o->pos < o->len) {
		size_t room = o->len - o->pos;

		memcpy(o->buf + o->pos, s, n < room ? n : room);
	}
	o->pos += n;
}

static void put(struct out *o, const char *s)
{
	put_n(o, s, strlen(s));
}

/*
 * Escape for the exposition format: backslash and newline always, the
 * double quote only inside label values (help text leaves it as is).
 */
static void put_escaped(struct out *o, const char *s, bool quote)
{
	for (; *s; s++) {
		if (*s == '\\')
			put(o, "\\\\");
		else if (*s == '\n')
			put(o, "\\n");
		else if (*s == '"' && quote)
			put(o, "\\\"");
		else
			put_n(o, s, 1);
	}
}

/*
 * Shortest of %.15g and %.17g that reads back as the same double, so that
 * 0.25 prints as "0.25" and not "0.25000000000000000"; Go's
 * strconv.FormatFloat(v, 'g', -1, 64), which Prometheus' own clients use,
 * gives the same text for the values we print. Assumes the "C" locale
 * (the daemon never calls setlocale()).
 */
static void fmt_double(double v, char *out, size_t len)
{
	if (isnan(v)) {
		snprintf(out, len, "NaN");
	} else if (isinf(v)) {
		snprintf(out, len, v > 0 ? "+Inf" : "-Inf");
	} else {
		snprintf(out, len, "%.15g", v);
		if (strtod(out, NULL) != v)
			snprintf(out, len, "%.17g", v);
	}
}

static void put_double(struct out *o, double v)
{
	char buf[40];

	fmt_double(v, buf, sizeof(buf));
	put(o, buf);
}

static void put_u64(struct out *o, uint64_t v)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "%" PRIu64, v);
	put(o, buf);
}

/* name+suffix{label="value",...,le="bound"} followed by a space. */
static void put_sample_name(struct out *o, const struct kvc_metric *m,
			    const char *suffix, const char *le)
{
	const struct kvc_metric_family *f = m->family;
	size_t i;

	put(o, f->name);
	put(o, suffix);
	if (f->nlabels || le) {
		put(o, "{");
		for (i = 0; i < f->nlabels; i++) {
			if (i)
				put(o, ",");
			put(o, f->labels[i]);
			put(o, "=\"");
			put_escaped(o, m->values[i], true);
			put(o, "\"");
		}
		if (le) {
			if (f->nlabels)
				put(o, ",");
			put(o, "le=\"");
			put(o, le);
			put(o, "\"");
		}
		put(o, "}");
	}
	put(o, " ");
}

static void put_histogram(struct out *o, const struct kvc_metric *m)
{
	const struct kvc_metric_family *f = m->family;
	uint64_t cumulative = 0;
	char le[40];
	size_t i;

	for (i = 0; i < f->nbounds; i++) {
		cumulative += m->buckets[i];
		fmt_double(f->bounds[i], le, sizeof(le));
		put_sample_name(o, m, "_bucket", le);
		put_u64(o, cumulative);
		put(o, "\n");
	}
	cumulative += m->buckets[f->nbounds];
	put_sample_name(o, m, "_bucket", "+Inf");
	put_u64(o, cumulative);
	put(o, "\n");
	put_sample_name(o, m, "_sum", NULL);
	put_double(o, m->sum);
	put(o, "\n");
	put_sample_name(o, m, "_count", NULL);
	put_u64(o, m->count);
	put(o, "\n");
}

static const char *type_name(enum kvc_metric_type type)
{
	switch (type) {
	case KVC_METRIC_COUNTER:
		return "counter";
	case KVC_METRIC_GAUGE:
		return "gauge";
	default:
		return "histogram";
	}
}

size_t kvc_metrics_render(const struct kvc_metrics *reg, char *buf,
			  size_t len)
{
	struct out o = { .buf = buf, .len = len };
	size_t i, j;

	for (i = 0; i < reg->nfamilies; i++) {
		const struct kvc_metric_family *f = reg->families[i];

		put(&o, "# HELP ");
		put(&o, f->name);
		put(&o, " ");
		put_escaped(&o, f->help, false);
		put(&o, "\n# TYPE ");
		put(&o, f->name);
		put(&o, " ");
		put(&o, type_name(f->type));
		put(&o, "\n");
		for (j = 0; j < f->nseries; j++) {
			const struct kvc_metric *m = f->series[j];

			if (f->type == KVC_METRIC_HISTOGRAM) {
				put_histogram(&o, m);
				continue;
			}
			put_sample_name(&o, m, "", NULL);
			if (f->type == KVC_METRIC_COUNTER)
				put_u64(&o, m->counter);
			else
				put_double(&o, m->gauge);
			put(&o, "\n");
		}
	}
	if (len)
		buf[o.pos < len ? o.pos : len - 1] = '\0';
	return o.pos;
}

/* ---- kvcached's metrics ------------------------------------------------- */

const double kvc_metrics_latency_buckets[KVC_METRICS_LATENCY_BUCKETS] = {
	1e-6, 4e-6, 16e-6, 64e-6, 250e-6,
	1e-3, 4e-3, 16e-3, 64e-3, 250e-3,
	1.0,
};

const char *kvc_metrics_tier_name(unsigned int tier)
{
	switch (tier) {
	case KVC_TIER_POOL:
		return "pool";
	case KVC_TIER_G3:
		return "g3";
	case KVC_TIER_G4:
		return "g4";
	default:
		return "?";
	}
}

/* A counter family labelled by tier, with all its series created. */
static int per_tier(struct kvc_metrics *reg, const char *name,
		    const char *help, struct kvc_metric **out)
{
	static const char *const tier_label[] = { "tier", NULL };
	struct kvc_metric_family *f;
	unsigned int t;

	f = kvc_metrics_register(reg, KVC_METRIC_COUNTER, name, help,
				 tier_label, NULL, 0);
	if (!f)
		return -errno;
	for (t = 0; t < KVC_METRICS_TIERS; t++) {
		const char *value[] = { kvc_metrics_tier_name(t) };

		out[t] = kvc_metric_get(f, value);
		if (!out[t])
			return -errno;
	}
	return 0;
}

/* The single series of an unlabelled family. */
static int single(struct kvc_metrics *reg, enum kvc_metric_type type,
		  const char *name, const char *help, const double *buckets,
		  size_t nbuckets, struct kvc_metric **out)
{
	struct kvc_metric_family *f;

	f = kvc_metrics_register(reg, type, name, help, NULL, buckets,
				 nbuckets);
	if (!f)
		return -errno;
	*out = kvc_metric_get(f, NULL);
	return *out ? 0 : -errno;
}

int kvc_metrics_register_daemon(struct kvc_metrics *reg,
				struct kvc_daemon_metrics *dm)
{
	int ret;

	memset(dm, 0, sizeof(*dm));
	ret = per_tier(reg, "kvcache_hits_total",
		       "Block lookups answered by the tier.", dm->hits);
	if (!ret)
		ret = per_tier(reg, "kvcache_misses_total",
			       "Block lookups the tier could not answer.",
			       dm->misses);
	if (!ret)
		ret = per_tier(reg, "kvcache_read_bytes_total",
			       "Bytes read from the tier.", dm->read_bytes);
	if (!ret)
		ret = per_tier(reg, "kvcache_written_bytes_total",
			       "Bytes written to the tier.", dm->written_bytes);
	if (!ret)
		ret = per_tier(reg, "kvcache_evictions_total",
			       "Blocks evicted from the tier.", dm->evictions);
	if (!ret)
		ret = per_tier(reg, "kvcache_spill_errors_total",
			       "Blocks the tier failed to write (I/O error, disk full).",
			       dm->spill_errors);
	if (!ret)
		ret = per_tier(reg, "kvcache_read_errors_total",
			       "Reads from the tier that failed (I/O error), not counting misses and corrupt files.",
			       dm->read_errors);
	if (!ret)
		ret = single(reg, KVC_METRIC_HISTOGRAM,
			     "kvcache_lookup_duration_seconds",
			     "Time from a lookup request to its reply.",
			     kvc_metrics_latency_buckets, KVC_METRICS_LATENCY_BUCKETS,
			     &dm->lookup_seconds);
	if (!ret)
		ret = single(reg, KVC_METRIC_GAUGE,
			     "kvcache_client_connections_open",
			     "Client connections open now.", NULL, 0,
			     &dm->connections);
	if (!ret)
		ret = single(reg, KVC_METRIC_COUNTER,
			     "kvcache_client_connections_total",
			     "Client connections accepted.", NULL, 0,
			     &dm->connections_total);
	if (!ret)
		ret = single(reg, KVC_METRIC_COUNTER,
			     "kvcache_protocol_errors_total",
			     "Client messages refused as malformed.", NULL, 0,
			     &dm->protocol_errors);
	if (!ret)
		ret = single(reg, KVC_METRIC_COUNTER,
			     "kvcache_journal_errors_total",
			     "Appends to the parents journal that failed: each one's STORE entry was refused.",
			     NULL, 0, &dm->journal_errors);
	if (!ret)
		ret = single(reg, KVC_METRIC_GAUGE, "kvcache_state_missing",
			     "1 when kvcached started without its namespace table although g3 held blocks (allow_missing_state).",
			     NULL, 0, &dm->state_missing);
	if (!ret)
		ret = single(reg, KVC_METRIC_GAUGE,
			     "kvcache_unknown_namespaces",
			     "Namespace directories of g3 and g4 holding files, of namespaces the namespace table does not have.",
			     NULL, 0, &dm->unknown_namespaces);
	if (!ret)
		ret = single(reg, KVC_METRIC_COUNTER,
			     "kvcache_namespaces_learned_total",
			     "Namespaces taken from their description in g4 (made by another node).",
			     NULL, 0, &dm->ns_learned);
	if (!ret)
		ret = single(reg, KVC_METRIC_GAUGE,
			     "kvcache_namespace_conflicts",
			     "Namespaces that g4 describes with another owner, mode or salt than this node has: not shared.",
			     NULL, 0, &dm->ns_conflicts);
	if (!ret)
		ret = single(reg, KVC_METRIC_COUNTER,
			     "kvcache_touches_dropped_total",
			     "TOUCH messages dropped for going over their connection's touch_rate.",
			     NULL, 0, &dm->touches_dropped);
	if (!ret)
		ret = single(reg, KVC_METRIC_COUNTER,
			     "kvcache_client_lookup_keys_total",
			     "Keys clients report (TOUCH) their own fast-index lookups found in the pool; their word, not in kvcache_hits_total.",
			     NULL, 0, &dm->client_lookup_keys);
	if (!ret)
		ret = single(reg, KVC_METRIC_COUNTER,
			     "kvcache_client_hit_keys_total",
			     "Of those keys, the hits clients report (TOUCH).",
			     NULL, 0, &dm->client_hit_keys);
	return ret;
}
