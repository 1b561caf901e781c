// SPDX-License-Identifier: GPL-2.0
/*
 * Host tests for helper/kvcached/metrics.c: the exact exposition text of a small
 * registry, escaping, cumulative histogram buckets ending in +Inf, number
 * formatting, the snprintf-like render contract, refused names and
 * arguments, and kvcached's predefined metrics.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "tap.h"

/* Render into a malloc'ed string of exactly the needed size. */
static char *render(const struct kvc_metrics *reg)
{
	size_t n = kvc_metrics_render(reg, NULL, 0);
	char *buf = malloc(n + 1);

	if (buf && kvc_metrics_render(reg, buf, n + 1) != n) {
		free(buf);
		return NULL;
	}
	return buf;
}

static const char *const tier[] = { "tier", NULL };

static void test_golden(void)
{
	static const char *const two[] = { "tier", "op", NULL };
	static const double bounds[] = { 0.5, 1, 4 };
	static const char expected[] =
		"# HELP t_requests_total Requests served.\n"
		"# TYPE t_requests_total counter\n"
		"t_requests_total{tier=\"pool\",op=\"get\"} 3\n"
		"t_requests_total{tier=\"g3\",op=\"put\"} 0\n"
		"# HELP t_temperature Degrees.\n"
		"# TYPE t_temperature gauge\n"
		"t_temperature -0.5\n"
		"# HELP t_lookup_seconds Lookup time.\n"
		"# TYPE t_lookup_seconds histogram\n"
		"t_lookup_seconds_bucket{tier=\"pool\",le=\"0.5\"} 2\n"
		"t_lookup_seconds_bucket{tier=\"pool\",le=\"1\"} 2\n"
		"t_lookup_seconds_bucket{tier=\"pool\",le=\"4\"} 3\n"
		"t_lookup_seconds_bucket{tier=\"pool\",le=\"+Inf\"} 4\n"
		"t_lookup_seconds_sum{tier=\"pool\"} 10.75\n"
		"t_lookup_seconds_count{tier=\"pool\"} 4\n"
		"# HELP t_size_bytes Sizes.\n"
		"# TYPE t_size_bytes histogram\n"
		"t_size_bytes_bucket{le=\"+Inf\"} 0\n"
		"t_size_bytes_sum 0\n"
		"t_size_bytes_count 0\n"
		"# HELP t_empty_total Never used.\n"
		"# TYPE t_empty_total counter\n";
	struct kvc_metrics *reg = kvc_metrics_new();
	struct kvc_metric_family *c, *g, *h, *s, *e;
	struct kvc_metric *m;
	char *text;

	TAP_ASSERT_TRUE(reg != NULL);
	c = kvc_metrics_register(reg, KVC_METRIC_COUNTER, "t_requests_total",
				 "Requests served.", two, NULL, 0);
	g = kvc_metrics_register(reg, KVC_METRIC_GAUGE, "t_temperature",
				 "Degrees.", NULL, NULL, 0);
	h = kvc_metrics_register(reg, KVC_METRIC_HISTOGRAM, "t_lookup_seconds",
				 "Lookup time.", tier, bounds, 3);
	s = kvc_metrics_register(reg, KVC_METRIC_HISTOGRAM, "t_size_bytes",
				 "Sizes.", NULL, NULL, 0);
	e = kvc_metrics_register(reg, KVC_METRIC_COUNTER, "t_empty_total",
				 "Never used.", tier, NULL, 0);
	TAP_ASSERT_TRUE(c && g && h && s && e);

	m = kvc_metric_get(c, (const char *[]){ "pool", "get" });
	TAP_CHECK(m && kvc_metric_add(m, 2) == 0);
	TAP_CHECK(kvc_metric_get(c, (const char *[]){ "g3", "put" }) != NULL);
	/* The same values give the same series. */
	TAP_CHECK(kvc_metric_get(c, (const char *[]){ "pool", "get" }) == m);
	TAP_CHECK(m && kvc_metric_add(m, 1) == 0);
	TAP_CHECK(m && kvc_metric_counter_value(m) == 3);

	m = kvc_metric_get(g, NULL);
	TAP_CHECK(m && kvc_metric_set(m, 2) == 0);
	TAP_CHECK(m && kvc_metric_sub(m, 4) == 0);
	TAP_CHECK(m && kvc_metric_add(m, 1) == 0);
	TAP_CHECK(m && kvc_metric_set(m, kvc_metric_gauge_value(m) + 0.5) == 0);

	/* 0.5 sits on a bound and counts in it (le is "less or equal"). */
	m = kvc_metric_get(h, (const char *[]){ "pool" });
	TAP_CHECK(m && kvc_metric_observe(m, 0.5) == 0);
	TAP_CHECK(m && kvc_metric_observe(m, 0.25) == 0);
	TAP_CHECK(m && kvc_metric_observe(m, 2) == 0);
	TAP_CHECK(m && kvc_metric_observe(m, 8) == 0);

	text = render(reg);
	TAP_CHECK(text && !strcmp(text, expected));
	if (text && strcmp(text, expected))
		printf("# got:\n%s# wanted:\n%s", text, expected);
	free(text);
	kvc_metrics_free(reg);
}

static void test_escaping(void)
{
	static const char expected[] =
		"# HELP t_esc_total A \\\\ B \\n C \"quoted\".\n"
		"# TYPE t_esc_total counter\n"
		"t_esc_total{tier=\"a\\\\b\\\"c\\nd\"} 1\n"
		"t_esc_total{tier=\"\"} 0\n";
	struct kvc_metrics *reg = kvc_metrics_new();
	struct kvc_metric_family *f;
	struct kvc_metric *m;
	char *text;

	TAP_ASSERT_TRUE(reg != NULL);
	f = kvc_metrics_register(reg, KVC_METRIC_COUNTER, "t_esc_total",
				 "A \\ B \n C \"quoted\".", tier, NULL, 0);
	TAP_CHECK(f != NULL);
	if (f) {
		m = kvc_metric_get(f, (const char *[]){ "a\\b\"c\nd" });
		TAP_CHECK(m && kvc_metric_add(m, 1) == 0);
		TAP_CHECK(kvc_metric_get(f, (const char *[]){ "" }) != NULL);
	}
	text = render(reg);
	TAP_CHECK(text && !strcmp(text, expected));
	if (text && strcmp(text, expected))
		printf("# got:\n%s# wanted:\n%s", text, expected);
	free(text);
	kvc_metrics_free(reg);
}

/* The value of the sample line that starts with prefix, or -1. */
static double sample(const char *text, const char *prefix)
{
	const char *p = text;
	size_t n = strlen(prefix);

	while (p && *p) {
		if (!strncmp(p, prefix, n))
			return strtod(p + n, NULL);
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return -1;
}

static void test_histogram_buckets(void)
{
	struct kvc_metrics *reg = kvc_metrics_new();
	struct kvc_metric_family *f;
	struct kvc_metric *m;
	double prev = 0, v;
	char *text, prefix[128];
	size_t i, count = 0;
	unsigned int seed = 1;

	TAP_ASSERT_TRUE(reg != NULL);
	f = kvc_metrics_register(reg, KVC_METRIC_HISTOGRAM, "t_lat_seconds",
				 "Latency.", NULL, kvc_metrics_latency_buckets,
				 KVC_METRICS_LATENCY_BUCKETS);
	m = f ? kvc_metric_get(f, NULL) : NULL;
	TAP_ASSERT_TRUE(m != NULL);
	/* Values spread over all buckets, below the first and above the
	 * last, a negative one and an infinite one. */
	for (i = 0; i < 1000; i++) {
		seed = seed * 1103515245 + 12345;
		v = (double)(seed >> 8 & 0xffff) / (double)(1ULL << (seed >> 24 & 31));
		v *= 1e-6;
		count++;
		TAP_CHECK(kvc_metric_observe(m, v) == 0);
	}
	TAP_CHECK(kvc_metric_observe(m, -1) == 0);
	TAP_CHECK(kvc_metric_observe(m, 1) == 0);	/* on the last bound */
	TAP_CHECK(kvc_metric_observe(m, INFINITY) == 0);
	TAP_CHECK(kvc_metric_observe(m, NAN) == -EINVAL);
	count += 3;

	text = render(reg);
	TAP_ASSERT_TRUE(text != NULL);
	TAP_CHECK(strstr(text, "t_lat_seconds_bucket{le=\"1e-06\"} ") != NULL);
	TAP_CHECK(strstr(text, "t_lat_seconds_bucket{le=\"1.6e-05\"} ") != NULL);
	TAP_CHECK(strstr(text, "t_lat_seconds_bucket{le=\"0.00025\"} ") != NULL);
	TAP_CHECK(strstr(text, "t_lat_seconds_bucket{le=\"0.25\"} ") != NULL);
	/* Cumulative: never decreasing, and each is the count of values up
	 * to its bound (recounted here independently). */
	for (i = 0; i < KVC_METRICS_LATENCY_BUCKETS; i++) {
		double b = kvc_metrics_latency_buckets[i], got;
		unsigned int s2 = 1;
		size_t want = 1, j;	/* the -1 */

		for (j = 0; j < 1000; j++) {
			s2 = s2 * 1103515245 + 12345;
			v = (double)(s2 >> 8 & 0xffff) /
			    (double)(1ULL << (s2 >> 24 & 31));
			if (v * 1e-6 <= b)
				want++;
		}
		if (b >= 1)
			want++;
		snprintf(prefix, sizeof(prefix), "t_lat_seconds_bucket{le=\"%.15g\"} ", b);
		got = sample(text, prefix);
		TAP_CHECK(got >= prev);
		TAP_CHECK(got == (double)want);
		prev = got;
	}
	/* +Inf holds everything and equals _count; the sum is infinite. */
	TAP_CHECK(sample(text, "t_lat_seconds_bucket{le=\"+Inf\"} ") == (double)count);
	TAP_CHECK(sample(text, "t_lat_seconds_count ") == (double)count);
	TAP_CHECK(strstr(text, "\nt_lat_seconds_sum +Inf\n") != NULL);
	TAP_CHECK(prev < (double)count);
	free(text);
	kvc_metrics_free(reg);
}

static void test_number_format(void)
{
	static const struct {
		double v;
		const char *text;
	} cases[] = {
		{ 0, "t_g 0\n" },
		{ 0.1, "t_g 0.1\n" },
		{ 1e-06, "t_g 1e-06\n" },
		{ 123456789, "t_g 123456789\n" },
		{ 1.0 / 3, "t_g 0.33333333333333331\n" },
		{ 1e300, "t_g 1e+300\n" },
		{ -2.5, "t_g -2.5\n" },
		{ INFINITY, "t_g +Inf\n" },
		{ -INFINITY, "t_g -Inf\n" },
		{ NAN, "t_g NaN\n" },
	};
	struct kvc_metrics *reg = kvc_metrics_new();
	struct kvc_metric_family *f;
	struct kvc_metric *m, *c;
	char *text;
	size_t i;

	f = reg ? kvc_metrics_register(reg, KVC_METRIC_GAUGE, "t_g", "G.",
				       NULL, NULL, 0) : NULL;
	m = f ? kvc_metric_get(f, NULL) : NULL;
	f = m ? kvc_metrics_register(reg, KVC_METRIC_COUNTER, "t_c", "C.",
				     NULL, NULL, 0) : NULL;
	c = f ? kvc_metric_get(f, NULL) : NULL;
	TAP_ASSERT_TRUE(c != NULL);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		TAP_CHECK(kvc_metric_set(m, cases[i].v) == 0);
		text = render(reg);
		TAP_CHECK(text && strstr(text, cases[i].text));
		if (text && !strstr(text, cases[i].text))
			printf("# wanted %s", cases[i].text);
		free(text);
	}
	/* Counters are exact integers, even past 2^53. */
	TAP_CHECK(kvc_metric_add(c, UINT64_MAX - 1) == 0);
	TAP_CHECK(kvc_metric_add(c, 1) == 0);
	text = render(reg);
	TAP_CHECK(text && strstr(text, "\nt_c 18446744073709551615\n"));
	free(text);
	kvc_metrics_free(reg);
}

/* render() behaves like snprintf for every buffer size. */
static void test_small_buffer(void)
{
	struct kvc_metrics *reg = kvc_metrics_new();
	struct kvc_daemon_metrics dm;
	size_t n, len, got;
	char *full, *buf;

	TAP_ASSERT_TRUE(reg && kvc_metrics_register_daemon(reg, &dm) == 0);
	full = render(reg);
	TAP_ASSERT_TRUE(full != NULL);
	n = strlen(full);
	TAP_CHECK(n > 1000);
	TAP_CHECK(kvc_metrics_render(reg, NULL, 0) == n);
	for (len = 1; len <= n + 1; len++) {
		/* Exactly len bytes, so ASan sees any write past them. */
		buf = malloc(len);
		TAP_CHECK(buf != NULL);
		if (!buf)
			break;
		got = kvc_metrics_render(reg, buf, len);
		if (got != n || strlen(buf) != (len <= n ? len - 1 : n) ||
		    strncmp(buf, full, len - 1)) {
			printf("# len %zu: got %zu\n", len, got);
			TAP_CHECK(0);
			free(buf);
			break;
		}
		free(buf);
	}
	/* Growing the buffer to the return value + 1 gets it all. */
	buf = malloc(64);
	got = buf ? kvc_metrics_render(reg, buf, 64) : 0;
	TAP_CHECK(got == n);
	buf = buf ? realloc(buf, got + 1) : NULL;
	TAP_CHECK(buf && kvc_metrics_render(reg, buf, got + 1) == n);
	TAP_CHECK(buf && !strcmp(buf, full));
	free(buf);
	free(full);
	kvc_metrics_free(reg);
}

static void test_invalid(void)
{
	static const char *const bad_names[] = {
		"", "1abc", "a-b", "a b", "a.b", "caf\xc3\xa9", "a{b}",
	};
	static const char *const good_names[] = {
		"a", "_a", ":a", "a:b_1", "A9",
	};
	static const double up_down[] = { 1, 0.5 };
	static const double equal[] = { 1, 1 };
	static const double inf[] = { 1, INFINITY };
	static const double nan_b[] = { NAN };
	double many[KVC_METRIC_MAX_BUCKETS + 1];
	struct kvc_metrics *reg = kvc_metrics_new();
	struct kvc_metric_family *f, *h;
	struct kvc_metric *m;
	size_t i;

	TAP_ASSERT_TRUE(reg != NULL);
	for (i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++) {
		errno = 0;
		TAP_CHECK(!kvc_metrics_register(reg, KVC_METRIC_COUNTER,
						bad_names[i], "h", NULL, NULL, 0));
		TAP_CHECK(errno == EINVAL);
	}
	for (i = 0; i < sizeof(good_names) / sizeof(good_names[0]); i++)
		TAP_CHECK(kvc_metrics_register(reg, KVC_METRIC_GAUGE,
					       good_names[i], "h", NULL, NULL, 0));

	/* Label names. */
	TAP_CHECK(!kvc_metrics_register(reg, KVC_METRIC_COUNTER, "l1", "h",
		(const char *[]){ "__x", NULL }, NULL, 0) && errno == EINVAL);
	TAP_CHECK(!kvc_metrics_register(reg, KVC_METRIC_COUNTER, "l2", "h",
		(const char *[]){ "1x", NULL }, NULL, 0) && errno == EINVAL);
	TAP_CHECK(!kvc_metrics_register(reg, KVC_METRIC_COUNTER, "l3", "h",
		(const char *[]){ "a:b", NULL }, NULL, 0) && errno == EINVAL);
	TAP_CHECK(!kvc_metrics_register(reg, KVC_METRIC_COUNTER, "l4", "h",
		(const char *[]){ "x", "x", NULL }, NULL, 0) && errno == EINVAL);
	TAP_CHECK(!kvc_metrics_register(reg, KVC_METRIC_COUNTER, "l5", "h",
		(const char *[]){ "a", "b", "c", "d", "e", NULL }, NULL, 0) &&
		errno == EINVAL);
	TAP_CHECK(!kvc_metrics_register(reg, KVC_METRIC_HISTOGRAM, "l6", "h",
		(const char *[]){ "le", NULL }, NULL, 0) && errno == EINVAL);
	/* "le" is only the histogram's. */
	TAP_CHECK(kvc_metrics_register(reg, KVC_METRIC_COUNTER, "l7", "h",
		(const char *[]){ "le", "_x", NULL }, NULL, 0));

	/* Buckets. */
	TAP_CHECK(!kvc_metrics_register(reg, KVC_METRIC_HISTOGRAM, "b1", "h",
					NULL, up_down, 2) && errno == EINVAL);
	TAP_CHECK(!kvc_metrics_register(reg, KVC_METRIC_HISTOGRAM, "b2", "h",
					NULL, equal, 2) && errno == EINVAL);
	TAP_CHECK(!kvc_metrics_register(reg, KVC_METRIC_HISTOGRAM, "b3", "h",
					NULL, inf, 2) && errno == EINVAL);
	TAP_CHECK(!kvc_metrics_register(reg, KVC_METRIC_HISTOGRAM, "b4", "h",
					NULL, nan_b, 1) && errno == EINVAL);
	for (i = 0; i < KVC_METRIC_MAX_BUCKETS + 1; i++)
		many[i] = (double)i;
	TAP_CHECK(!kvc_metrics_register(reg, KVC_METRIC_HISTOGRAM, "b5", "h",
					NULL, many, KVC_METRIC_MAX_BUCKETS + 1) &&
		  errno == EINVAL);
	TAP_CHECK(kvc_metrics_register(reg, KVC_METRIC_HISTOGRAM, "b6", "h",
				       NULL, many, KVC_METRIC_MAX_BUCKETS));
	TAP_CHECK(!kvc_metrics_register(reg, KVC_METRIC_COUNTER, "b7", "h",
					NULL, many, 1) && errno == EINVAL);
	TAP_CHECK(!kvc_metrics_register(reg, KVC_METRIC_HISTOGRAM, "b8", "h",
					NULL, NULL, 1) && errno == EINVAL);
	TAP_CHECK(!kvc_metrics_register(reg, KVC_METRIC_COUNTER, "n1", NULL,
					NULL, NULL, 0) && errno == EINVAL);
	TAP_CHECK(!kvc_metrics_register(reg, (enum kvc_metric_type)7, "n2",
					"h", NULL, NULL, 0) && errno == EINVAL);

	/* Names taken, also through a histogram's sample names. */
	TAP_CHECK(!kvc_metrics_register(reg, KVC_METRIC_COUNTER, "a", "h",
					NULL, NULL, 0) && errno == EEXIST);
	h = kvc_metrics_register(reg, KVC_METRIC_HISTOGRAM, "h", "h", NULL,
				 many, 2);
	TAP_CHECK(h != NULL);
	TAP_CHECK(!kvc_metrics_register(reg, KVC_METRIC_GAUGE, "h_sum", "h",
					NULL, NULL, 0) && errno == EEXIST);
	TAP_CHECK(!kvc_metrics_register(reg, KVC_METRIC_GAUGE, "h_bucket", "h",
					NULL, NULL, 0) && errno == EEXIST);
	TAP_CHECK(kvc_metrics_register(reg, KVC_METRIC_GAUGE, "h_total", "h",
				       NULL, NULL, 0));
	TAP_CHECK(kvc_metrics_register(reg, KVC_METRIC_COUNTER, "x_count", "h",
				       NULL, NULL, 0));
	TAP_CHECK(!kvc_metrics_register(reg, KVC_METRIC_HISTOGRAM, "x", "h",
					NULL, NULL, 0) && errno == EEXIST);

	/* Operations that do not fit the type change nothing. */
	f = kvc_metrics_register(reg, KVC_METRIC_COUNTER, "c", "h", tier,
				 NULL, 0);
	TAP_CHECK(f != NULL);
	if (!f || !h)
		goto out;
	errno = 0;
	TAP_CHECK(!kvc_metric_get(f, NULL) && errno == EINVAL);
	TAP_CHECK(!kvc_metric_get(f, (const char *[]){ NULL }) &&
		  errno == EINVAL);
	m = kvc_metric_get(f, (const char *[]){ "pool" });
	TAP_CHECK(m != NULL);
	if (m) {
		TAP_CHECK(kvc_metric_set(m, 5) == -EINVAL);
		TAP_CHECK(kvc_metric_sub(m, 1) == -EINVAL);
		TAP_CHECK(kvc_metric_observe(m, 1) == -EINVAL);
		TAP_CHECK(kvc_metric_counter_value(m) == 0);
	}
	m = kvc_metric_get(h, NULL);
	TAP_CHECK(m && kvc_metric_add(m, 1) == -EINVAL);
	TAP_CHECK(m && kvc_metric_set(m, 1) == -EINVAL);
out:
	kvc_metrics_free(reg);
	kvc_metrics_free(NULL);
}

static void test_daemon_metrics(void)
{
	struct kvc_metrics *reg = kvc_metrics_new(), *other;
	struct kvc_daemon_metrics dm;
	char *text;
	int t;

	TAP_ASSERT_TRUE(reg && kvc_metrics_register_daemon(reg, &dm) == 0);
	for (t = 0; t < KVC_METRICS_TIERS; t++) {
		TAP_CHECK(dm.hits[t] && dm.misses[t] && dm.evictions[t]);
		TAP_CHECK(dm.read_bytes[t] && dm.written_bytes[t]);
	}
	TAP_CHECK(kvc_metric_add(dm.hits[KVC_TIER_G3], 7) == 0);
	TAP_CHECK(kvc_metric_add(dm.read_bytes[KVC_TIER_G4], 2097152) == 0);
	TAP_CHECK(kvc_metric_observe(dm.lookup_seconds, 0.00003) == 0);
	TAP_CHECK(kvc_metric_add(dm.connections, 2) == 0);
	TAP_CHECK(kvc_metric_sub(dm.connections, 1) == 0);
	TAP_CHECK(kvc_metric_add(dm.connections_total, 2) == 0);
	TAP_CHECK(kvc_metric_add(dm.protocol_errors, 1) == 0);
	text = render(reg);
	TAP_CHECK(text != NULL);
	if (text) {
		TAP_CHECK(strstr(text, "# TYPE kvcache_hits_total counter\n"
				 "kvcache_hits_total{tier=\"pool\"} 0\n"
				 "kvcache_hits_total{tier=\"g3\"} 7\n"
				 "kvcache_hits_total{tier=\"g4\"} 0\n"));
		TAP_CHECK(strstr(text, "\nkvcache_misses_total{tier=\"g4\"} 0\n"));
		TAP_CHECK(strstr(text, "\nkvcache_read_bytes_total{tier=\"g4\"} 2097152\n"));
		TAP_CHECK(strstr(text, "\nkvcache_written_bytes_total{tier=\"pool\"} 0\n"));
		TAP_CHECK(strstr(text, "\nkvcache_evictions_total{tier=\"g3\"} 0\n"));
		TAP_CHECK(strstr(text, "# TYPE kvcache_lookup_duration_seconds histogram\n"));
		TAP_CHECK(strstr(text, "\nkvcache_lookup_duration_seconds_bucket{le=\"1.6e-05\"} 0\n"
				 "kvcache_lookup_duration_seconds_bucket{le=\"6.4e-05\"} 1\n"));
		TAP_CHECK(strstr(text, "\nkvcache_lookup_duration_seconds_bucket{le=\"1\"} 1\n"
				 "kvcache_lookup_duration_seconds_bucket{le=\"+Inf\"} 1\n"
				 "kvcache_lookup_duration_seconds_sum 3e-05\n"
				 "kvcache_lookup_duration_seconds_count 1\n"));
		TAP_CHECK(strstr(text, "\nkvcache_client_connections_open 1\n"));
		TAP_CHECK(strstr(text, "\nkvcache_client_connections_total 2\n"));
		TAP_CHECK(strstr(text, "\nkvcache_protocol_errors_total 1\n"));
	}
	free(text);
	/* A second registration in the same registry is refused. */
	TAP_CHECK(kvc_metrics_register_daemon(reg, &dm) == -EEXIST);
	/* Registries are independent objects. */
	other = kvc_metrics_new();
	TAP_CHECK(other && kvc_metrics_register_daemon(other, &dm) == 0);
	kvc_metrics_free(other);
	kvc_metrics_free(reg);
	TAP_CHECK(!strcmp(kvc_metrics_tier_name(KVC_TIER_POOL), "pool"));
	TAP_CHECK(!strcmp(kvc_metrics_tier_name(KVC_TIER_G4), "g4"));
}

int main(void)
{
	TAP_RUN(test_golden);
	TAP_RUN(test_escaping);
	TAP_RUN(test_histogram_buckets);
	TAP_RUN(test_number_format);
	TAP_RUN(test_small_buffer);
	TAP_RUN(test_invalid);
	TAP_RUN(test_daemon_metrics);
	return tap_done();
}
