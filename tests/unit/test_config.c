// SPDX-License-Identifier: GPL-2.0
/*
 * Host tests for helper/common/config.c: the defaults, every value type, every
 * error (with its file name and line number), that a failed parse leaves
 * the caller's config alone, that the dump parses back to the same values,
 * and that helper/kvcached/kvcached.conf lists every key at its default.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "tap.h"

/*
 * The Makefile passes the absolute path; the fallback works when the test
 * runs from the top of the tree, as "make unit" does.
 */
#ifndef KVC_EXAMPLE_CONF
#define KVC_EXAMPLE_CONF "helper/kvcached/kvcached.conf"
#endif

static char err[512];

static int parse(struct kvc_config *cfg, const char *text)
{
	return kvc_config_parse(cfg, text, strlen(text), "test.conf", err,
				sizeof(err));
}

/* Field by field: memcmp would also compare padding. */
static int cfg_equal(const struct kvc_config *a, const struct kvc_config *b)
{
	return !strcmp(a->daemon.socket, b->daemon.socket) &&
	       a->daemon.socket_mode == b->daemon.socket_mode &&
	       a->daemon.metrics.kind == b->daemon.metrics.kind &&
	       !strcmp(a->daemon.metrics.path, b->daemon.metrics.path) &&
	       a->daemon.metrics.port == b->daemon.metrics.port &&
	       !strcmp(a->daemon.metrics_address, b->daemon.metrics_address) &&
	       a->daemon.metrics_mode == b->daemon.metrics_mode &&
	       !strcmp(a->daemon.metrics_group, b->daemon.metrics_group) &&
	       a->daemon.metrics_timeout_ms == b->daemon.metrics_timeout_ms &&
	       a->daemon.log_level == b->daemon.log_level &&
	       a->daemon.mode == b->daemon.mode &&
	       a->pool.memfd_size == b->pool.memfd_size &&
	       a->pool.block_size == b->pool.block_size &&
	       a->pool.hugetlb == b->pool.hugetlb &&
	       a->pool.mlock == b->pool.mlock &&
	       a->pool.fast_index == b->pool.fast_index &&
	       a->pool.low_watermark == b->pool.low_watermark &&
	       a->pool.high_watermark == b->pool.high_watermark &&
	       a->eviction.policy == b->eviction.policy &&
	       a->eviction.pool_admit == b->eviction.pool_admit &&
	       a->eviction.g3_admit == b->eviction.g3_admit &&
	       a->eviction.g4_admit == b->eviction.g4_admit &&
	       a->eviction.g3_policy == b->eviction.g3_policy &&
	       a->eviction.g4_policy == b->eviction.g4_policy &&
	       a->eviction.s3fifo_small == b->eviction.s3fifo_small &&
	       a->eviction.interval_ms == b->eviction.interval_ms &&
	       !strcmp(a->g3.directory, b->g3.directory) &&
	       a->g3.capacity == b->g3.capacity &&
	       a->g3.io_priority == b->g3.io_priority &&
	       a->g4.io_priority == b->g4.io_priority &&
	       !strcmp(a->g4.directory, b->g4.directory) &&
	       a->g4.capacity == b->g4.capacity &&
	       !strcmp(a->g4.node, b->g4.node) &&
	       a->g4.scan_interval_ms == b->g4.scan_interval_ms &&
	       !strcmp(a->events.endpoint, b->events.endpoint) &&
	       !strcmp(a->events.topic, b->events.topic) &&
	       a->events.nr_ns == b->events.nr_ns &&
	       !memcmp(a->events.ns, b->events.ns, sizeof(a->events.ns)) &&
	       a->events.hwm == b->events.hwm &&
	       a->events.ipc_mode == b->events.ipc_mode &&
	       !strcmp(a->events.ipc_group, b->events.ipc_group) &&
	       !strcmp(a->events.curve_secret_key,
		       b->events.curve_secret_key) &&
	       !strcmp(a->events.curve_clients, b->events.curve_clients);
}

/* kvc_config_dump() into a malloc'ed string. */
static char *dump(const struct kvc_config *cfg)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		return NULL;
	kvc_config_dump(cfg, f);
	fclose(f);
	return text;
}

static void test_defaults(void)
{
	struct kvc_config c;

	kvc_config_defaults(&c);
	TAP_CHECK(!strcmp(c.daemon.socket, "/run/kvcache/kvcached.sock"));
	TAP_CHECK(c.daemon.socket_mode == 0660);
	TAP_CHECK(c.daemon.metrics.kind == KVC_CONFIG_LISTEN_UNIX);
	TAP_CHECK(!strcmp(c.daemon.metrics.path, "/run/kvcache/metrics.sock"));
	TAP_CHECK(!strcmp(c.daemon.metrics_address, "127.0.0.1"));
	TAP_CHECK(c.daemon.metrics_mode == 0600);
	TAP_CHECK(c.daemon.metrics_group[0] == '\0');
	TAP_CHECK(c.daemon.metrics_timeout_ms == 2000);
	TAP_CHECK(c.daemon.log_level == KVC_CONFIG_LOG_INFO);
	TAP_CHECK(c.daemon.mode == KVC_CONFIG_MODE_AUTO);
	TAP_CHECK(c.pool.memfd_size == 256ULL << 20);
	TAP_CHECK(c.pool.block_size == 2ULL << 20);
	TAP_CHECK(c.pool.hugetlb == KVC_CONFIG_HUGETLB_AUTO);
	TAP_CHECK(c.pool.mlock);
	TAP_CHECK(c.pool.fast_index);
	TAP_CHECK(c.pool.low_watermark == 5 && c.pool.high_watermark == 10);
	TAP_CHECK(c.eviction.policy == KVC_CONFIG_POLICY_DENSITY);
	TAP_CHECK(c.eviction.pool_admit == 1);
	TAP_CHECK(c.eviction.g3_admit == 2 && c.eviction.g4_admit == 2);
	TAP_CHECK(c.eviction.s3fifo_small == 10);
	TAP_CHECK(c.eviction.interval_ms == 100);
	TAP_CHECK(c.g3.directory[0] == '\0' && c.g3.capacity == 0);
	TAP_CHECK(c.g4.directory[0] == '\0' && c.g4.capacity == 0);
	TAP_CHECK(c.g4.node[0] == '\0');
	TAP_CHECK(c.g4.scan_interval_ms == 10000);
	TAP_CHECK(!strcmp(kvc_config_mode_name(c.daemon.mode), "auto"));
	TAP_CHECK(!strcmp(kvc_config_log_level_name(KVC_CONFIG_LOG_DEBUG), "debug"));
	TAP_CHECK(!strcmp(kvc_config_hugetlb_name(KVC_CONFIG_HUGETLB_NO), "no"));
	TAP_CHECK(!strcmp(kvc_config_policy_name(KVC_CONFIG_POLICY_S3FIFO), "s3fifo"));
}

/* Empty, blank, comment-only and CRLF text: all the defaults. */
static void test_empty_and_layout(void)
{
	struct kvc_config c, d;

	kvc_config_defaults(&d);
	memset(&c, 0xa5, sizeof(c));
	TAP_CHECK(kvc_config_parse(&c, "", 0, "e", err, sizeof(err)) == 0);
	TAP_CHECK(cfg_equal(&c, &d));
	TAP_CHECK(err[0] == '\0');
	TAP_CHECK(parse(&c, "\n\n   \t\n# comment\n   # indented\n") == 0);
	TAP_CHECK(cfg_equal(&c, &d));

	/* CRLF, blanks around everything, no final newline, a repeated
	 * section header. */
	TAP_CHECK(parse(&c, "[pool]\r\n  low_watermark\t=  7 \r\n"
			"[ daemon ]\r\n[pool]\nhigh_watermark=20") == 0);
	TAP_CHECK(c.pool.low_watermark == 7 && c.pool.high_watermark == 20);
	TAP_CHECK(c.daemon.socket_mode == 0660);

	/* Only len bytes count: the text need not be NUL-terminated. */
	TAP_CHECK(kvc_config_parse(&c, "[pool]\nlow_watermark = 3x",
				   sizeof("[pool]\nlow_watermark = 3") - 1, "n",
				   err, sizeof(err)) == 0);
	TAP_CHECK(c.pool.low_watermark == 3);
}

static void test_integers_and_sizes(void)
{
	struct kvc_config c;

	TAP_CHECK(parse(&c, "[pool]\nmemfd_size = 1G\nblock_size = 4K\n") == 0);
	TAP_CHECK(c.pool.memfd_size == 1ULL << 30);
	TAP_CHECK(c.pool.block_size == 4096);
	TAP_CHECK(parse(&c, "[pool]\nmemfd_size = 0\nblock_size = 64m\n") == 0);
	TAP_CHECK(c.pool.memfd_size == 0 && c.pool.block_size == 64ULL << 20);
	TAP_CHECK(parse(&c, "[g3]\ndirectory = /d\ncapacity = 3T\n") == 0);
	TAP_CHECK(c.g3.capacity == 3ULL << 40);
	TAP_CHECK(parse(&c, "[g3]\ndirectory = /d\ncapacity = 12345\n") == 0);
	TAP_CHECK(c.g3.capacity == 12345);
	TAP_CHECK(parse(&c, "[g3]\ndirectory = /d\n"
			"capacity = 18446744073709551615\n") == 0);
	TAP_CHECK(c.g3.capacity == UINT64_MAX);
	TAP_CHECK(parse(&c, "[g3]\ndirectory = /d\ncapacity = 16777215T\n") == 0);
	TAP_CHECK(c.g3.capacity == 16777215ULL << 40);
	TAP_CHECK(parse(&c, "[eviction]\ns3fifo_small = 50\npool_admit = 255\n"
			"g3_admit = 1\ng4_admit = 7\n") == 0);
	TAP_CHECK(c.eviction.s3fifo_small == 50);
	TAP_CHECK(c.eviction.pool_admit == 255);
	TAP_CHECK(c.eviction.g3_admit == 1 && c.eviction.g4_admit == 7);
	/* Octal with or without the leading 0. */
	TAP_CHECK(parse(&c, "[daemon]\nsocket_mode = 600\n") == 0);
	TAP_CHECK(c.daemon.socket_mode == 0600);
	TAP_CHECK(parse(&c, "[daemon]\nsocket_mode = 0777\n") == 0);
	TAP_CHECK(c.daemon.socket_mode == 0777);
	TAP_CHECK(parse(&c, "[daemon]\nsocket_mode = 0\n") == 0);
	TAP_CHECK(c.daemon.socket_mode == 0);
}

static void test_durations(void)
{
	struct kvc_config c;

	TAP_CHECK(parse(&c, "[eviction]\ninterval = 1ms\n") == 0);
	TAP_CHECK(c.eviction.interval_ms == 1);
	TAP_CHECK(parse(&c, "[eviction]\ninterval = 2s\n") == 0);
	TAP_CHECK(c.eviction.interval_ms == 2000);
	TAP_CHECK(parse(&c, "[eviction]\ninterval = 1m\n") == 0);
	TAP_CHECK(c.eviction.interval_ms == 60000);
	TAP_CHECK(parse(&c, "[g4]\nscan_interval = 60m\n") == 0);
	TAP_CHECK(c.g4.scan_interval_ms == 3600000);
	TAP_CHECK(parse(&c, "[g4]\nscan_interval = 100ms\n") == 0);
	TAP_CHECK(c.g4.scan_interval_ms == 100);
}

static void test_booleans(void)
{
	static const struct {
		const char *text;
		bool value;
	} cases[] = {
		{ "yes", true }, { "no", false }, { "true", true },
		{ "false", false }, { "1", true }, { "0", false },
		{ "YES", true }, { "False", false },
	};
	char text[64];
	struct kvc_config c;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(text, sizeof(text), "[pool]\nmlock = %s\n",
			 cases[i].text);
		c.pool.mlock = !cases[i].value;
		TAP_CHECK(parse(&c, text) == 0);
		TAP_CHECK(c.pool.mlock == cases[i].value);
	}
}

static void test_enums(void)
{
	struct kvc_config c;

	TAP_CHECK(parse(&c, "[daemon]\nlog_level = error\nmode = kernel\n") == 0);
	TAP_CHECK(c.daemon.log_level == KVC_CONFIG_LOG_ERROR);
	TAP_CHECK(c.daemon.mode == KVC_CONFIG_MODE_KERNEL);
	TAP_CHECK(parse(&c, "[daemon]\nlog_level = WARN\nmode = memfd\n") == 0);
	TAP_CHECK(c.daemon.log_level == KVC_CONFIG_LOG_WARN);
	TAP_CHECK(c.daemon.mode == KVC_CONFIG_MODE_MEMFD);
	TAP_CHECK(parse(&c, "[daemon]\nlog_level = debug\n") == 0);
	TAP_CHECK(c.daemon.log_level == KVC_CONFIG_LOG_DEBUG);
	TAP_CHECK(parse(&c, "[pool]\nhugetlb = yes\n") == 0);
	TAP_CHECK(c.pool.hugetlb == KVC_CONFIG_HUGETLB_YES);
	TAP_CHECK(parse(&c, "[pool]\nhugetlb = no\n") == 0);
	TAP_CHECK(c.pool.hugetlb == KVC_CONFIG_HUGETLB_NO);
	TAP_CHECK(parse(&c, "[eviction]\npolicy = s3fifo\n") == 0);
	TAP_CHECK(c.eviction.policy == KVC_CONFIG_POLICY_S3FIFO);
	TAP_CHECK(parse(&c, "[eviction]\npolicy = cost\n") == 0);
	TAP_CHECK(c.eviction.policy == KVC_CONFIG_POLICY_COST);
}

static void test_strings_and_listen(void)
{
	struct kvc_config c;
	char text[512], path[200];

	TAP_CHECK(parse(&c, "[daemon]\nsocket = /tmp/a b#c.sock\n") == 0);
	TAP_CHECK(!strcmp(c.daemon.socket, "/tmp/a b#c.sock"));
	TAP_CHECK(parse(&c, "[daemon]\nmetrics = 9464\n"
			"metrics_address = ::1\n") == 0);
	TAP_CHECK(c.daemon.metrics.kind == KVC_CONFIG_LISTEN_TCP);
	TAP_CHECK(c.daemon.metrics.port == 9464);
	TAP_CHECK(!strcmp(c.daemon.metrics_address, "::1"));
	TAP_CHECK(parse(&c, "[daemon]\nmetrics_mode = 660\n"
			"metrics_group = prometheus\nmetrics_timeout = 500ms\n") == 0);
	TAP_CHECK(c.daemon.metrics_mode == 0660);
	TAP_CHECK(!strcmp(c.daemon.metrics_group, "prometheus"));
	TAP_CHECK(c.daemon.metrics_timeout_ms == 500);
	TAP_CHECK(parse(&c, "[daemon]\nmetrics_group = 998\n") == 0);
	TAP_CHECK(!strcmp(c.daemon.metrics_group, "998"));
	TAP_CHECK(parse(&c, "[daemon]\nmetrics = 0\n") == 0);
	TAP_CHECK(c.daemon.metrics.kind == KVC_CONFIG_LISTEN_OFF);
	TAP_CHECK(parse(&c, "[daemon]\nmetrics = off\n") == 0);
	TAP_CHECK(c.daemon.metrics.kind == KVC_CONFIG_LISTEN_OFF);
	TAP_CHECK(parse(&c, "[daemon]\nmetrics = 65535\n") == 0);
	TAP_CHECK(c.daemon.metrics.port == 65535);
	TAP_CHECK(parse(&c, "[daemon]\nmetrics = /run/m.sock\n") == 0);
	TAP_CHECK(c.daemon.metrics.kind == KVC_CONFIG_LISTEN_UNIX);
	TAP_CHECK(!strcmp(c.daemon.metrics.path, "/run/m.sock"));

	/* The longest socket path that can be bound: 107 bytes. */
	memset(path, 'a', sizeof(path));
	path[0] = '/';
	path[107] = '\0';
	snprintf(text, sizeof(text), "[daemon]\nsocket = %s\nmetrics = %s\n",
		 path, "/m");
	TAP_CHECK(parse(&c, text) == 0);
	TAP_CHECK(strlen(c.daemon.socket) == 107);

	TAP_CHECK(parse(&c, "[g3]\ndirectory = /var/lib/kvcache/g3\n"
			"capacity = 100G\n[g4]\ndirectory = /mnt/g4\n"
			"capacity = 1T\nnode = gpu-node_07.rack2\n") == 0);
	TAP_CHECK(!strcmp(c.g3.directory, "/var/lib/kvcache/g3"));
	TAP_CHECK(!strcmp(c.g4.directory, "/mnt/g4"));
	TAP_CHECK(!strcmp(c.g4.node, "gpu-node_07.rack2"));
	/* An empty value is an empty string. */
	TAP_CHECK(parse(&c, "[g4]\nnode =\n") == 0);
	TAP_CHECK(c.g4.node[0] == '\0');
}

/* [events]: the namespaces published, and what a tcp:// endpoint needs. */
static void test_events_keys(void)
{
	struct kvc_config c;

	kvc_config_defaults(&c);
	TAP_EXPECT_EQ(c.events.nr_ns, 0);	/* nothing published */
	TAP_EXPECT_EQ(c.events.hwm, 32);
	TAP_EXPECT_EQ(c.events.ipc_mode, 0600);
	TAP_ASSERT_EQ(parse(&c, "[events]\nnamespaces = 3, 10-12\t65535\n"),
		      0);
	TAP_ASSERT_EQ(c.events.nr_ns, 3);
	TAP_EXPECT_TRUE(c.events.ns[0].lo == 3 && c.events.ns[0].hi == 3);
	TAP_EXPECT_TRUE(c.events.ns[1].lo == 10 && c.events.ns[1].hi == 12);
	TAP_EXPECT_TRUE(c.events.ns[2].lo == 65535 &&
			c.events.ns[2].hi == 65535);
	TAP_EXPECT_EQ(c.events.ns[3].lo, 0);
	TAP_ASSERT_EQ(parse(&c, "[events]\nnamespaces =\n"), 0);
	TAP_EXPECT_EQ(c.events.nr_ns, 0);
	/* ipc:// without CURVE; tcp:// with both files. */
	TAP_EXPECT_EQ(parse(&c, "[events]\nendpoint = ipc:///run/e.sock\n"
			    "ipc_group = kvcache-routers\n"), 0);
	TAP_EXPECT_EQ(parse(&c, "[events]\nendpoint = tcp://0.0.0.0:5557\n"
			    "curve_secret_key = /k\ncurve_clients = /c\n"),
		      0);
}

/*
 * [g4] trusted_uid (issue #36, finding 4): a uid of its own or none,
 * never one that every squashed user of an NFS client has; and
 * ns_learn_max, at least 1.
 */
static void test_g4_trust(void)
{
	static const char *const squash[] = {
		"65534", "4294967294", "4294967295",
	};
	static const char *const junk[] = {
		"-1", "nobody", "12a", "4294967296", " 1 2", "0x10",
	};
	struct kvc_config c;
	char text[128];
	uint32_t uid = 7;

	TAP_CHECK(parse(&c, "") == 0);
	TAP_CHECK(!kvc_config_trusted_uid(&c, &uid));
	TAP_CHECK(uid == 7);
	TAP_CHECK(c.g4.ns_learn_max == 64);
	TAP_CHECK(parse(&c, "[g4]\ntrusted_uid = 4321\nns_learn_max = 2\n") == 0);
	TAP_CHECK(kvc_config_trusted_uid(&c, &uid) && uid == 4321);
	TAP_CHECK(c.g4.ns_learn_max == 2);
	TAP_CHECK(parse(&c, "[g4]\ntrusted_uid = 0\n") == 0);
	TAP_CHECK(kvc_config_trusted_uid(&c, &uid) && uid == 0);
	TAP_CHECK(parse(&c, "[g4]\ntrusted_uid =\n") == 0);
	TAP_CHECK(!kvc_config_trusted_uid(&c, &uid));
	for (size_t i = 0; i < sizeof(squash) / sizeof(squash[0]); i++) {
		snprintf(text, sizeof(text), "[g4]\ntrusted_uid = %s\n",
			 squash[i]);
		TAP_EXPECT_EQ(parse(&c, text), -EINVAL);
		TAP_CHECK(strstr(err, "test.conf:2: trusted_uid: ") == err);
		TAP_CHECK(strstr(err, "squash uid") != NULL);
		TAP_CHECK(kvc_config_squash_uid((uint32_t)strtoul(squash[i],
								  NULL, 10)));
	}
	for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
		snprintf(text, sizeof(text), "[g4]\ntrusted_uid = %s\n",
			 junk[i]);
		TAP_EXPECT_EQ(parse(&c, text), -EINVAL);
		TAP_CHECK(strstr(err, "is not a uid") != NULL);
	}
	TAP_CHECK(!kvc_config_squash_uid(0));
	TAP_CHECK(!kvc_config_squash_uid(4321));
	TAP_EXPECT_EQ(parse(&c, "[g4]\nns_learn_max = 0\n"), -EINVAL);
}

/*
 * Every error: the text, and the message it must produce. The messages
 * are checked whole, so the file name and line number are checked too.
 */
static const struct {
	const char *text;
	const char *msg;
} bad[] = {
	/* structure */
	{ "\n[nope]\n", "test.conf:2: unknown section [nope]" },
	{ "[pool\n", "test.conf:1: expected [section]" },
	{ "[]\n", "test.conf:1: unknown section []" },
	{ "socket = /x\n", "test.conf:1: socket: key outside a [section]" },
	{ "[pool]\n\n# c\nbogus = 1\n",
	  "test.conf:4: unknown key 'bogus' in [pool]" },
	{ "[daemon]\nblock_size = 4K\n",
	  "test.conf:2: unknown key 'block_size' in [daemon]" },
	{ "[pool]\nmlock\n", "test.conf:2: expected key = value" },
	{ "[pool]\n = 3\n", "test.conf:2: missing key before '='" },
	{ "[pool]\nmlock = yes\n\n[daemon]\n[pool]\nmlock = no\n",
	  "test.conf:6: duplicate key 'mlock' (first set on line 2)" },
	{ "[pool]\nlow_watermark = 5\nlow_watermark = 5\n",
	  "test.conf:3: duplicate key 'low_watermark' (first set on line 2)" },
	/* malformed values */
	{ "[pool]\nlow_watermark =\n", "test.conf:2: low_watermark: missing value" },
	{ "[pool]\nlow_watermark = -1\n",
	  "test.conf:2: low_watermark: \"-1\" not a number" },
	{ "[pool]\nlow_watermark = 5 # five\n",
	  "test.conf:2: low_watermark: \"5 # five\" not a number (suffixes: K, M, G, T)" },
	{ "[pool]\nblock_size = 2X\n",
	  "test.conf:2: block_size: \"2X\" not a number (suffixes: K, M, G, T)" },
	{ "[pool]\nblock_size = 2MB\n",
	  "test.conf:2: block_size: \"2MB\" not a number (suffixes: K, M, G, T)" },
	{ "[pool]\nblock_size = 0x1000\n",
	  "test.conf:2: block_size: \"0x1000\" not a number (suffixes: K, M, G, T)" },
	{ "[g3]\ncapacity = 18446744073709551616\n",
	  "test.conf:2: capacity: \"18446744073709551616\" too large" },
	{ "[g3]\ncapacity = 16777216T\n",
	  "test.conf:2: capacity: \"16777216T\" too large" },
	{ "[daemon]\nsocket_mode = 0689\n",
	  "test.conf:2: socket_mode: \"0689\" not an octal number" },
	{ "[eviction]\ninterval = 100\n",
	  "test.conf:2: interval: \"100\" not a duration (a number and ms, s or m)" },
	{ "[eviction]\ninterval = 1h\n",
	  "test.conf:2: interval: \"1h\" not a duration (a number and ms, s or m)" },
	{ "[eviction]\ninterval = 307445734561826m\n",
	  "test.conf:2: interval: \"307445734561826m\" too large" },
	{ "[pool]\nmlock = maybe\n",
	  "test.conf:2: mlock: \"maybe\" not a boolean (yes, no, true, false, 1, 0)" },
	{ "[eviction]\npolicy = fifo\n",
	  "test.conf:2: policy: \"fifo\" is not one of lru|s3fifo|cost|density" },
	{ "[daemon]\nmode = Kernel2\n",
	  "test.conf:2: mode: \"Kernel2\" is not one of auto|kernel|memfd" },
	{ "[daemon]\nmetrics = 65536\n",
	  "test.conf:2: metrics: \"65536\" TCP port out of range (0 to 65535)" },
	{ "[daemon]\nmetrics = run/m.sock\n",
	  "test.conf:2: metrics: \"run/m.sock\" not a socket path, a TCP port or off" },
	{ "[daemon]\nsocket = kvcached.sock\n",
	  "test.conf:2: socket: \"kvcached.sock\" must be an absolute path" },
	{ "[daemon]\nsocket = /a\tb\n",
	  "test.conf:2: socket: control character in value" },
	{ "[daemon]\nmetrics_group = -x\n",
	  "test.conf:2: metrics_group: \"-x\" must not start with '-'" },
	{ "[daemon]\nmetrics_group = a/b\n",
	  "test.conf:2: metrics_group: \"a/b\" may only hold letters, digits, '.', '_' and '-'" },
	{ "[daemon]\nmetrics_address = localhost\n",
	  "test.conf:2: metrics_address: \"localhost\" not an IPv4 or IPv6 address" },
	{ "[events]\nendpoint = udp://1.2.3.4:5\n",
	  "test.conf:2: endpoint: \"udp://1.2.3.4:5\" not tcp://ADDRESS:PORT or ipc:///PATH" },
	{ "[events]\nendpoint = tcp://127.0.0.1\n",
	  "test.conf:2: endpoint: \"tcp://127.0.0.1\" tcp:// needs ADDRESS:PORT, a port from 1 to 65535" },
	{ "[events]\nendpoint = tcp://127.0.0.1:0\n",
	  "test.conf:2: endpoint: \"tcp://127.0.0.1:0\" tcp:// needs ADDRESS:PORT, a port from 1 to 65535" },
	{ "[events]\nendpoint = tcp://:5557\n",
	  "test.conf:2: endpoint: \"tcp://:5557\" tcp:// needs ADDRESS:PORT, a port from 1 to 65535" },
	{ "[events]\nendpoint = ipc://run/e.sock\n",
	  "test.conf:2: endpoint: \"ipc://run/e.sock\" ipc:// needs an absolute path" },
	{ "[events]\nnamespaces = 0\n",
	  "test.conf:2: namespaces: \"0\" has a namespace out of range (1 to 65535, low-high)" },
	{ "[events]\nnamespaces = 7-3\n",
	  "test.conf:2: namespaces: \"7-3\" has a namespace out of range (1 to 65535, low-high)" },
	{ "[events]\nnamespaces = 65536\n",
	  "test.conf:2: namespaces: \"65536\" has a namespace out of range (1 to 65535, low-high)" },
	{ "[events]\nnamespaces = 1;2\n",
	  "test.conf:2: namespaces: \"1;2\" not a list of namespace ids and ranges (1 4-7)" },
	{ "[events]\nnamespaces = all\n",
	  "test.conf:2: namespaces: \"all\" not a list of namespace ids and ranges (1 4-7)" },
	{ "[events]\nhwm = 0\n",
	  "test.conf:2: hwm: \"0\" out of range (1 to 1K)" },
	{ "[events]\nipc_group = a/b\n",
	  "test.conf:2: ipc_group: \"a/b\" may only hold letters, digits, '.', '_' and '-'" },
	{ "[events]\nendpoint = tcp://0.0.0.0:5557\n",
	  "test.conf:2: [events] a tcp:// endpoint needs curve_secret_key and curve_clients" },
	{ "[events]\ncurve_secret_key = /k\n",
	  "test.conf:2: [events] curve_secret_key and curve_clients go together" },
	{ "[g3]\ndirectory = var/g3\n",
	  "test.conf:2: directory: \"var/g3\" must be empty or an absolute path" },
	{ "[g4]\nnode = ..\n",
	  "test.conf:2: node: \"..\" must start with a letter or digit" },
	{ "[g4]\nnode = a/b\n",
	  "test.conf:2: node: \"a/b\" may only hold letters, digits, '.', '_' and '-'" },
	{ "[g4]\nnode = 0123456789012345678901234567890123456789012345678901234567890123x\n",
	  "test.conf:2: node: value too long (at most 64 bytes)" },
	/* out of range */
	{ "[daemon]\nsocket_mode = 01000\n",
	  "test.conf:2: socket_mode: \"01000\" out of range (0000 to 0777)" },
	{ "[pool]\nlow_watermark = 100\n",
	  "test.conf:2: low_watermark: \"100\" out of range (0 to 99)" },
	{ "[pool]\nhigh_watermark = 0\n",
	  "test.conf:2: high_watermark: \"0\" out of range (1 to 100)" },
	{ "[pool]\nblock_size = 2K\n",
	  "test.conf:2: block_size: \"2K\" out of range (4K to 64M)" },
	{ "[pool]\nblock_size = 128M\n",
	  "test.conf:2: block_size: \"128M\" out of range (4K to 64M)" },
	{ "[pool]\nblock_size = 12K\n",
	  "test.conf:2: block_size: \"12K\" is not a power of two" },
	{ "[eviction]\ns3fifo_small = 0\n",
	  "test.conf:2: s3fifo_small: \"0\" out of range (1 to 50)" },
	{ "[eviction]\ng4_admit = 256\n",
	  "test.conf:2: g4_admit: \"256\" out of range (1 to 255)" },
	{ "[eviction]\ninterval = 0ms\n",
	  "test.conf:2: interval: \"0ms\" out of range (1ms to 1m)" },
	{ "[g4]\nscan_interval = 61m\n",
	  "test.conf:2: scan_interval: \"61m\" out of range (100ms to 60m)" },
	/* settings that contradict each other: the later line is blamed */
	{ "[pool]\nblock_size = 1M\nmemfd_size = 1536K\n",
	  "test.conf:3: memfd_size is not a multiple of block_size" },
	{ "[pool]\nmemfd_size = 3M\n",
	  "test.conf:2: memfd_size is not a multiple of block_size" },
	{ "[pool]\nmemfd_size = 128G\nblock_size = 4K\n",
	  "test.conf:3: memfd_size holds more than 16777216 blocks" },
	{ "[pool]\nhigh_watermark = 20\nlow_watermark = 20\n",
	  "test.conf:3: low_watermark must be below high_watermark" },
	{ "[pool]\nhigh_watermark = 4\n",
	  "test.conf:2: low_watermark must be below high_watermark" },
	{ "[g3]\ndirectory = /g3\n",
	  "test.conf:2: [g3] directory is set but capacity is 0" },
	{ "[g4]\ncapacity = 1G\n",
	  "test.conf:2: [g4] capacity is set but directory is empty" },
	{ "[g3]\ndirectory = /t\ncapacity = 1G\n[g4]\ndirectory = /t\n"
	  "capacity = 1G\n",
	  "test.conf:5: g3 and g4 use the same directory" },
	{ "[daemon]\nmetrics = /run/x.sock\nsocket = /run/x.sock\n",
	  "test.conf:3: metrics and socket are the same path" },
};

static void test_errors(void)
{
	struct kvc_config c, d;
	size_t i;

	kvc_config_defaults(&d);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int ret;

		/* A failed parse must leave the config as it was. */
		kvc_config_defaults(&c);
		c.pool.low_watermark = 42;
		ret = parse(&c, bad[i].text);
		TAP_CHECK(ret == -EINVAL);
		TAP_CHECK(c.pool.low_watermark == 42);
		c.pool.low_watermark = d.pool.low_watermark;
		TAP_CHECK(cfg_equal(&c, &d));
		if (ret != -EINVAL || strcmp(err, bad[i].msg)) {
			printf("# case %zu: got \"%s\"\n#   wanted \"%s\"\n", i,
			       err, bad[i].msg);
			TAP_CHECK(!strcmp(err, bad[i].msg));
		}
	}
}

static void test_error_edge_cases(void)
{
	static const char nul_text[] = "[pool]\nmlock = y\0es\n";
	struct kvc_config c;
	char small[12], path[200], text[300];

	/* A NUL byte inside the text. */
	TAP_CHECK(kvc_config_parse(&c, nul_text, sizeof(nul_text) - 1, "n.conf",
				   err, sizeof(err)) == -EINVAL);
	TAP_CHECK(!strcmp(err, "n.conf:2: NUL byte in line"));

	/* One byte over the socket path limit. */
	memset(path, 'a', sizeof(path));
	path[0] = '/';
	path[108] = '\0';
	snprintf(text, sizeof(text), "[daemon]\nsocket = %s\n", path);
	TAP_EXPECT_EQ(parse(&c, text), -EINVAL);
	TAP_CHECK(!strcmp(err, "test.conf:2: socket: value too long (at most 107 bytes)"));
	snprintf(text, sizeof(text), "[daemon]\nmetrics = %s\n", path);
	TAP_EXPECT_EQ(parse(&c, text), -EINVAL);
	TAP_CHECK(strstr(err, "test.conf:2: metrics: ") == err);
	TAP_CHECK(strstr(err, "socket path too long") != NULL);

	/* A message longer than the buffer is cut and still terminated. */
	TAP_CHECK(kvc_config_parse(&c, "[x]\n", 4, "file.conf", small,
				   sizeof(small)) == -EINVAL);
	TAP_CHECK(!strcmp(small, "file.conf:1"));
	/* No buffer at all. */
	TAP_CHECK(kvc_config_parse(&c, "[x]\n", 4, "file.conf", NULL, 0) ==
		  -EINVAL);
	TAP_CHECK(kvc_config_parse(&c, "", 0, "file.conf", NULL, 0) == 0);
}

/* A text that sets every key to something other than its default. */
static const char all_keys[] =
	"[daemon]\n"
	"socket = /var/run/kvc.sock\n"
	"socket_mode = 0600\n"
	"metrics = 9100\n"
	"metrics_address = 0.0.0.0\n"
	"log_level = debug\n"
	"mode = memfd\n"
	"[pool]\n"
	"memfd_size = 1537M\n"
	"block_size = 1M\n"
	"hugetlb = yes\n"
	"mlock = no\n"
	"low_watermark = 0\n"
	"high_watermark = 100\n"
	"[eviction]\n"
	"policy = cost\n"
	"pool_admit = 3\n"
	"g3_admit = 4\n"
	"g4_admit = 5\n"
	"s3fifo_small = 25\n"
	"interval = 1500ms\n"
	"[g3]\n"
	"directory = /var/lib/kvcache/g3\n"
	"capacity = 1000000\n"
	"[g4]\n"
	"directory = /mnt/shared/kvcache\n"
	"capacity = 2T\n"
	"node = node-1\n"
	"scan_interval = 2m\n"
	"[events]\n"
	"endpoint = tcp://10.0.0.1:5557\n"
	"topic = node-1\n"
	"namespaces = 1,4-7 65535\n"
	"hwm = 8\n"
	"ipc_mode = 0660\n"
	"ipc_group = routers\n"
	"curve_secret_key = /etc/kvcache/events.key\n"
	"curve_clients = /etc/kvcache/routers\n";

static void test_dump_round_trip(void)
{
	struct kvc_config a, b, d;
	char *t1, *t2;

	kvc_config_defaults(&d);
	TAP_CHECK(parse(&a, all_keys) == 0);
	/* Every key moved away from its default (so the dump is tested on
	 * values it cannot have got from the defaults). */
	TAP_CHECK(a.daemon.metrics.kind == KVC_CONFIG_LISTEN_TCP);
	TAP_CHECK(a.pool.memfd_size == 1537ULL << 20);
	TAP_CHECK(a.eviction.interval_ms == 1500);
	TAP_CHECK(a.g4.scan_interval_ms == 120000);
	TAP_CHECK(!cfg_equal(&a, &d));

	t1 = dump(&a);
	TAP_ASSERT_TRUE(t1 != NULL);
	TAP_CHECK(strstr(t1, "\nmemfd_size = 1537M\n") != NULL);
	TAP_CHECK(strstr(t1, "\ncapacity = 1000000\n") != NULL);
	TAP_CHECK(strstr(t1, "\ncapacity = 2T\n") != NULL);
	TAP_CHECK(strstr(t1, "\nscan_interval = 2m\n") != NULL);
	TAP_CHECK(strstr(t1, "\ninterval = 1500ms\n") != NULL);
	TAP_CHECK(strstr(t1, "\nsocket_mode = 0600\n") != NULL);
	TAP_CHECK(strstr(t1, "\nmetrics = 9100\n") != NULL);
	TAP_CHECK(strstr(t1, "\nmlock = no\n") != NULL);
	TAP_CHECK(strstr(t1, "\nnamespaces = 1 4-7 65535\n") != NULL);
	memset(&b, 0, sizeof(b));
	TAP_CHECK(kvc_config_parse(&b, t1, strlen(t1), "dump", err,
				   sizeof(err)) == 0);
	TAP_CHECK(cfg_equal(&a, &b));
	/* And the dump of the re-parsed config is the same text. */
	t2 = dump(&b);
	TAP_CHECK(t2 && !strcmp(t1, t2));
	free(t1);
	free(t2);

	/* The defaults, including empty strings and the metrics socket. */
	t1 = dump(&d);
	TAP_CHECK(t1 && strstr(t1, "\ndirectory =\n") != NULL);
	TAP_CHECK(t1 && strstr(t1, "\nmetrics = /run/kvcache/metrics.sock\n"));
	TAP_CHECK(t1 && kvc_config_parse(&b, t1, strlen(t1), "dump", err,
					 sizeof(err)) == 0);
	TAP_CHECK(cfg_equal(&b, &d));
	free(t1);

	/* metrics off dumps as "off" and reads back off. */
	TAP_CHECK(parse(&a, "[daemon]\nmetrics = 0\n") == 0);
	t1 = dump(&a);
	TAP_CHECK(t1 && strstr(t1, "\nmetrics = off\n") != NULL);
	TAP_CHECK(t1 && kvc_config_parse(&b, t1, strlen(t1), "dump", err,
					 sizeof(err)) == 0);
	TAP_CHECK(b.daemon.metrics.kind == KVC_CONFIG_LISTEN_OFF);
	free(t1);
}

/* What kvc_config_diff() reported, one "section key: from -> to" a line. */
static char diffs[4096];

static void note_diff(void *arg, const char *section, const char *key,
		      const char *from, const char *to)
{
	size_t n = strlen(diffs);

	(*(int *)arg)++;
	snprintf(diffs + n, sizeof(diffs) - n, "%s %s: %s -> %s\n", section,
		 key, from, to);
}

/*
 * The keys that differ, in file order, with their values as the dump
 * writes them; equal values are equal whatever bytes follow a string's
 * NUL; the count without a callback is the same.
 */
static void test_diff(void)
{
	struct kvc_config a, b, d;
	int calls = 0;
	unsigned int lines = 0;

	kvc_config_defaults(&d);
	kvc_config_defaults(&a);
	diffs[0] = '\0';
	TAP_EXPECT_EQ(0, kvc_config_diff(&d, &a, note_diff, &calls));
	TAP_EXPECT_EQ(0, calls);

	TAP_ASSERT_EQ(0, parse(&a, "[g3]\ndirectory = /srv/g3\ncapacity = 1G\n"
			      "[pool]\nhigh_watermark = 60\nlow_watermark = 50\n"
			      "[daemon]\nsocket_mode = 0600\n"));
	TAP_EXPECT_EQ(5, kvc_config_diff(&d, &a, note_diff, &calls));
	TAP_EXPECT_EQ(5, calls);
	TAP_EXPECT_STREQ("daemon socket_mode: 0660 -> 0600\n"
			 "pool low_watermark: 5 -> 50\n"
			 "pool high_watermark: 10 -> 60\n"
			 "g3 directory:  -> /srv/g3\n"
			 "g3 capacity: 0 -> 1G\n", diffs);
	/* The other way round: the values swap. */
	diffs[0] = '\0';
	calls = 0;
	TAP_EXPECT_EQ(5, kvc_config_diff(&a, &d, note_diff, &calls));
	TAP_EXPECT_NE(NULL, strstr(diffs, "g3 directory: /srv/g3 -> \n"));

	/* A shorter string copied over a longer one leaves bytes behind. */
	b = d;
	strcpy(b.daemon.socket, "/x.sock");
	a = d;
	memset(a.daemon.socket, 'z', sizeof(a.daemon.socket));
	strcpy(a.daemon.socket, "/x.sock");
	TAP_EXPECT_EQ(0, kvc_config_diff(&a, &b, NULL, NULL));
	TAP_EXPECT_EQ(1, kvc_config_diff(&d, &b, NULL, NULL));

	/* all_keys moves every key it sets, each reported once. */
	TAP_ASSERT_EQ(0, parse(&a, all_keys));
	for (const char *l = all_keys; *l; l = strchr(l, '\n') + 1)
		lines += l[0] != '[';
	TAP_EXPECT_EQ(lines, kvc_config_diff(&d, &a, NULL, NULL));
}

static char *read_all(const char *path)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *in = fopen(path, "r"), *out;
	int c;

	if (!in)
		return NULL;
	out = open_memstream(&buf, &len);
	if (out) {
		while ((c = fgetc(in)) != EOF)
			fputc(c, out);
		fclose(out);
	}
	fclose(in);
	return buf;
}

/*
 * The example file loads to the defaults, and lists every key: each line
 * of the defaults' dump appears in it, in the same order, word for word.
 */
static void test_example_file(void)
{
	struct kvc_config c, d;
	char *example, *text, *line, *save = NULL, *at;
	int ret;

	kvc_config_defaults(&d);
	memset(&c, 0, sizeof(c));
	ret = kvc_config_load(&c, KVC_EXAMPLE_CONF, err, sizeof(err));
	if (ret)
		printf("# %s\n", err);
	TAP_CHECK(ret == 0);
	TAP_CHECK(cfg_equal(&c, &d));

	example = read_all(KVC_EXAMPLE_CONF);
	text = dump(&d);
	TAP_ASSERT_TRUE(example && text);
	TAP_CHECK(!strncmp(example, "# SPDX-License-Identifier: GPL-2.0\n", 35));
	at = example;
	for (line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char want[512];
		char *found;

		if (line[0] == '#')
			continue;
		snprintf(want, sizeof(want), "\n%s\n", line);
		found = strstr(at, want);
		if (!found)
			printf("# not in %s (in order): %s\n", KVC_EXAMPLE_CONF,
			       line);
		TAP_CHECK(found != NULL);
		if (found)
			at = found + 1;
	}
	free(example);
	free(text);
}

static void test_load_errors(void)
{
	char path[] = "/tmp/kvc_config_testXXXXXX";
	struct kvc_config c;
	FILE *f;
	int fd;
	size_t i;

	TAP_CHECK(kvc_config_load(&c, "/nonexistent/kvcached.conf", err,
				  sizeof(err)) == -ENOENT);
	TAP_CHECK(!strcmp(err, "/nonexistent/kvcached.conf: No such file or directory"));
	TAP_CHECK(kvc_config_load(&c, "/", err, sizeof(err)) == -EISDIR);

	fd = mkstemp(path);
	TAP_ASSERT_GE(fd, 0);
	f = fdopen(fd, "w");
	TAP_ASSERT_TRUE(f != NULL);
	/* A parse error names the file as given. */
	fputs("[pool]\nlow_watermark = 50\n", f);
	fflush(f);
	TAP_EXPECT_EQ(kvc_config_load(&c, path, err, sizeof(err)), -EINVAL);
	TAP_CHECK(strstr(err, path) == err);
	TAP_CHECK(strstr(err, ":2: low_watermark must be below high_watermark"));

	/* Exactly the limit is read; one byte more is refused. */
	rewind(f);
	for (i = 0; i < KVC_CONFIG_FILE_MAX / 2; i++)
		fputs("#\n", f);
	fflush(f);
	TAP_CHECK(kvc_config_load(&c, path, err, sizeof(err)) == 0);
	fputc('\n', f);
	fclose(f);
	TAP_EXPECT_EQ(kvc_config_load(&c, path, err, sizeof(err)), -EFBIG);
	TAP_CHECK(strstr(err, "larger than") != NULL);
	unlink(path);
}

int main(void)
{
	TAP_RUN(test_defaults);
	TAP_RUN(test_empty_and_layout);
	TAP_RUN(test_integers_and_sizes);
	TAP_RUN(test_durations);
	TAP_RUN(test_booleans);
	TAP_RUN(test_enums);
	TAP_RUN(test_strings_and_listen);
	TAP_RUN(test_events_keys);
	TAP_RUN(test_g4_trust);
	TAP_RUN(test_errors);
	TAP_RUN(test_error_edge_cases);
	TAP_RUN(test_dump_round_trip);
	TAP_RUN(test_diff);
	TAP_RUN(test_example_file);
	TAP_RUN(test_load_errors);
	return tap_done();
}
