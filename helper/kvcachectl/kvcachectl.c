// SPDX-License-Identifier: GPL-2.0
/*
 * kvcachectl: the admin CLI of kvcache.
 *
 *   kvcachectl [-d DEVICE] [-s SYSFS_DIR] info
 *   kvcachectl [-d DEVICE] blocks [NAMESPACE]
 *   kvcachectl [-S SOCKET] status | stats | tiers
 *   kvcachectl [-S SOCKET] ns-create ID UID GID MODE [SALT]
 *   kvcachectl [-S SOCKET] ns-salt ID [SALT]
 *   kvcachectl [-S SOCKET] namespaces
 *   kvcachectl [-S SOCKET] evict NAMESPACE KEY...
 *   kvcachectl [-S SOCKET] flush [NAMESPACE|all [pool,g3,g4]]
 *   kvcachectl config [FILE]
 *   kvcachectl [-r ROOT] p2pcheck
 *
 * info prints what the module reports through KVCACHE_IOC_INFO, then its
 * sysfs knobs and counters. blocks lists the sealed blocks of the pool (of
 * one namespace, or of every namespace the caller may read) with their
 * metadata. status, stats, tiers and ns-create ask kvcached over its
 * socket (default /run/kvcache/kvcached.sock): its mode and pool, its
 * counters, the persistent tiers (g3, g4: use against capacity, spills,
 * reads, corrupt files, evictions),
 * a new namespace (as root; with SALT, 64 hex digits, its key salt is
 * that one instead of a random one, so that nodes sharing one g4 agree),
 * a namespace's salt (printed for a reader; set as root), the namespaces
 * with their owners, modes and
 * pool blocks. evict drops blocks by key (64 hex digits
 * each; a chain's keys are taken deepest first; from every tier), flush
 * everything that is not in use in one namespace or all, from every tier
 * or those named (both as root). config prints the
 * effective daemon settings
 * of FILE (default /etc/kvcache/kvcached.conf, or the defaults).
 * p2pcheck says, for every provider and NVMe controller, whether a
 * transfer between them goes P2P, bounces or cannot run, and why
 * (p2pcheck.h; ROOT: a copy of /sys to read instead, for tests).
 * Exit status: 0; 1 when the device, the daemon or a call fails; 2 on a
 * usage error (both with a message on stderr).
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "client.h"
#include "config.h"
#include "devinfo.h"
#include "p2pcheck.h"

#define KVCACHED_SOCKET	"/run/kvcache/kvcached.sock"
#define KVCACHED_CONFIG	"/etc/kvcache/kvcached.conf"

static const char *const sysfs_attrs[] = {
	"abi_version",
	"features",
	"pool/block_size",
	"pool/pool_size",
	"pool/nr_blocks",
	"pool/max_pool_size",
	"pool/huge_chunks",
	"pool/free_blocks",
	"pool/writable_blocks",
	"pool/sealed_blocks",
	"pool/pinned_blocks",
	"pool/quarantined_blocks",
	"pool/low_watermark",
	"pool/high_watermark",
	"stats/open_files",
	"stats/opens",
	"stats/ioctls",
	"stats/ioctl_errors",
	"stats/allocs",
	"stats/alloc_failures",
	"stats/seals",
	"stats/pins",
	"stats/unpins",
	"stats/evictions",
	"stats/discards",
	"stats/events",
	"stats/event_failures",
};

static void usage(FILE *f)
{
	fprintf(f, "usage: kvcachectl [-d DEVICE] [-s SYSFS_DIR] info\n"
		   "       kvcachectl [-d DEVICE] blocks [NAMESPACE]\n"
		   "       kvcachectl [-S SOCKET] status | stats | tiers\n"
		   "       kvcachectl [-S SOCKET] ns-create ID UID GID MODE [SALT]\n"
		   "       kvcachectl [-S SOCKET] ns-salt ID [SALT]\n"
		   "       kvcachectl [-S SOCKET] namespaces\n"
		   "       kvcachectl [-S SOCKET] evict NAMESPACE KEY...\n"
		   "       kvcachectl [-S SOCKET] flush [NAMESPACE|all [pool,g3,g4]]\n"
		   "       kvcachectl config [FILE]\n"
		   "       kvcachectl [-r ROOT] p2pcheck\n");
}

static int cmd_info(const char *dev, const char *sysfs)
{
	struct kvcache_info info;
	char feat[128], bs[32], pool[32], val[128];
	size_t i;
	int fd, ret;

	fd = open(dev, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "kvcachectl: %s: %s%s\n", dev, strerror(errno),
			errno == ENOENT ? " (is kvcache.ko loaded?)" : "");
		return 1;
	}
	ret = kvc_dev_info(fd, &info);
	close(fd);
	if (ret) {
		fprintf(stderr, "kvcachectl: %s: info: %s\n", dev,
			ret == -EPROTO ? "ABI version not understood"
				       : strerror(-ret));
		return 1;
	}

	kvc_feature_names(info.features, feat, sizeof(feat));
	kvc_format_bytes(info.block_size, bs, sizeof(bs));
	kvc_format_bytes(info.block_size * info.nr_blocks, pool, sizeof(pool));
	printf("device       %s\n", dev);
	printf("abi_version  %" PRIu32 "\n", info.abi_version);
	printf("features     %s\n", feat);
	printf("max_batch    %" PRIu32 "\n", info.max_batch);
	printf("block_size   %s\n", bs);
	printf("nr_blocks    %llu\n", (unsigned long long)info.nr_blocks);
	printf("pool_size    %s\n", pool);

	printf("\nsysfs (%s)\n", sysfs ? sysfs : KVC_SYSFS_DIR);
	for (i = 0; i < sizeof(sysfs_attrs) / sizeof(sysfs_attrs[0]); i++) {
		ret = kvc_sysfs_read(sysfs, sysfs_attrs[i], val, sizeof(val));
		printf("  %-20s %s\n", sysfs_attrs[i],
		       ret ? strerror(-ret) : val);
	}
	return 0;
}

static int cmd_blocks(const char *dev, const char *ns_arg)
{
	struct kvcache_block_info b[256];
	struct kvcache_query q;
	unsigned long ns = 0;
	char *end;
	unsigned int total = 0, i, k;
	int fd;

	if (ns_arg) {
		errno = 0;
		ns = strtoul(ns_arg, &end, 0);
		if (errno || *end || !ns || ns > KVCACHE_NS_MAX) {
			fprintf(stderr, "kvcachectl: bad namespace '%s'\n", ns_arg);
			return 2;
		}
	}
	fd = open(dev, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "kvcachectl: %s: %s\n", dev, strerror(errno));
		return 1;
	}
	printf("%-8s %-10s %-6s %-10s %-5s %s\n", "index", "gen", "ns",
	       "payload", "pins", "key");
	memset(&q, 0, sizeof(q));
	do {
		q.size = sizeof(q);
		q.count = sizeof(b) / sizeof(b[0]);
		q.ns_id = (__u32)ns;
		q.entries = (uintptr_t)b;
		q.start = q.next;
		q.next = 0;
		if (ioctl(fd, KVCACHE_IOC_QUERY, &q)) {
			fprintf(stderr, "kvcachectl: query: %s\n", strerror(errno));
			close(fd);
			return 1;
		}
		for (i = 0; i < q.count; i++, total++) {
			printf("%-8u %-10u %-6u %-10u %-5u ", b[i].handle.index,
			       b[i].handle.gen, b[i].ns_id, b[i].payload_len,
			       b[i].pins);
			for (k = 0; k < KVCACHE_KEY_SIZE; k++)
				printf("%02x", b[i].key[k]);
			printf("\n");
		}
	} while (q.count);
	close(fd);
	printf("%u sealed block%s\n", total, total == 1 ? "" : "s");
	return 0;
}

static int daemon_open(struct kvc_client *c, const char *sock)
{
	int ret = kvc_client_open(c, sock);

	if (ret)
		fprintf(stderr, "kvcachectl: kvcached at %s: %s\n", sock,
			strerror(-ret));
	return ret;
}

/* Counter name of a STATS reply into *val: false when it is not there. */
static bool find_stat(const struct kvc_msg *m, const char *name,
		      uint64_t *val)
{
	struct kvc_stat st;
	size_t pos = 0;

	*val = 0;
	while (kvc_proto_stats_next(&m->stats_reply, &pos, &st))
		if (st.name_len == strlen(name) &&
		    !memcmp(st.name, name, st.name_len)) {
			*val = st.value;
			return true;
		}
	return false;
}

static uint64_t stat_of(const struct kvc_msg *m, const char *name)
{
	uint64_t v;

	find_stat(m, name, &v);
	return v;
}

/* STATS of the connected daemon into *m: 0, or 1 with a message. */
static int fetch_stats(struct kvc_client *c, struct kvc_msg *m)
{
	uint8_t req[64];
	int len, ret;

	len = kvc_proto_encode_stats(req, sizeof(req), kvc_client_next_seq(c));
	ret = kvc_client_call(c, req, (size_t)len, m);
	if (ret)
		fprintf(stderr, "kvcachectl: stats: %s\n", strerror(-ret));
	return ret ? 1 : 0;
}

/* status (brief) or stats (every counter) of the daemon. */
static int cmd_stats(const char *sock, bool brief)
{
	struct kvc_client c;
	struct kvc_msg m;
	struct kvc_stat st;
	size_t pos = 0;

	if (daemon_open(&c, sock))
		return 1;
	if (brief)
		printf("mode:       %s\nprotocol:   %u\nblock size: %" PRIu64
		       "\nblocks:     %" PRIu64 "\n",
		       c.hello.mode == KVC_PROTO_MODE_KERNEL ? "kernel" : "memfd",
		       c.hello.version, c.hello.block_size, c.hello.nr_blocks);
	if (fetch_stats(&c, &m)) {
		kvc_client_close(&c);
		return 1;
	}
	while (kvc_proto_stats_next(&m.stats_reply, &pos, &st))
		if (!brief || !strncmp(st.name, "index_keys", st.name_len) ||
		    !strncmp(st.name, "pool_free", st.name_len))
			printf("%.*s %" PRIu64 "\n", (int)st.name_len, st.name,
			       st.value);
	kvc_client_close(&c);
	return 0;
}

/* tiers: one line per persistent tier the daemon runs. */
static int cmd_tiers(const char *sock)
{
	static const char *const cols[] = {
		"blocks", "spills", "spill_errors", "reads", "read_errors",
		"corrupt", "evictions", "lease_skips",
	};
	static const char *const tiers[] = { "g3", "g4" };
	struct kvc_client c;
	struct kvc_msg m;
	char name[64];
	int shown = 0;

	if (daemon_open(&c, sock))
		return 1;
	if (fetch_stats(&c, &m)) {
		kvc_client_close(&c);
		return 1;
	}
	printf("%-4s %14s %14s %5s", "tier", "bytes", "capacity", "use%");
	for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++)
		printf(" %12s", cols[i]);
	printf("\n");
	for (size_t t = 0; t < 2; t++) {
		uint64_t used, cap;

		snprintf(name, sizeof(name), "%s_capacity", tiers[t]);
		if (!find_stat(&m, name, &cap))
			continue;
		snprintf(name, sizeof(name), "%s_bytes", tiers[t]);
		used = stat_of(&m, name);
		printf("%-4s %14" PRIu64 " %14" PRIu64 " %5.1f", tiers[t], used,
		       cap, cap ? 100.0 * (double)used / (double)cap : 0.0);
		for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++) {
			snprintf(name, sizeof(name), "%s_%s", tiers[t], cols[i]);
			printf(" %12" PRIu64, stat_of(&m, name));
		}
		printf("\n");
		shown++;
	}
	if (!shown)
		printf("(no persistent tier: set [g3] or [g4] directory)\n");
	else
		printf("promotions %" PRIu64 ", promote errors %" PRIu64
		       ", prefetches %" PRIu64 "\n",
		       stat_of(&m, "promotions"), stat_of(&m, "promote_errors"),
		       stat_of(&m, "prefetches"));
	kvc_client_close(&c);
	return 0;
}

static int parse_u32(const char *s, uint32_t max, uint32_t *out, int base)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(s, &end, base);
	if (errno || *end || end == s || v > max)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

/* A salt: exactly 64 hex digits. */
static int parse_salt(const char *s, uint8_t salt[KVC_PROTO_SALT_SIZE])
{
	if (strlen(s) != 2 * KVC_PROTO_SALT_SIZE ||
	    strspn(s, "0123456789abcdefABCDEF") != 2 * KVC_PROTO_SALT_SIZE)
		return -1;
	for (int i = 0; i < KVC_PROTO_SALT_SIZE; i++)
		sscanf(s + 2 * i, "%2hhx", &salt[i]);
	return 0;
}

/*
 * NS_SALT on an open connection: get (salt NULL) or set, and print the
 * salt in force when print. 0, or 1 with a message.
 */
static int ns_salt_call(struct kvc_client *c, uint32_t ns,
			const uint8_t *salt, bool print)
{
	struct kvc_ns_salt req = { .ns_id = ns };
	uint8_t buf[128];
	struct kvc_msg m;
	int ret, len;

	if (salt) {
		req.flags = KVC_PROTO_NS_SALT_SET;
		memcpy(req.salt, salt, KVC_PROTO_SALT_SIZE);
	}
	if (c->hello.version < KVC_PROTO_VERSION_NS_SALT) {
		fprintf(stderr, "kvcachectl: kvcached speaks protocol %u, "
			"salts need %u\n", c->hello.version,
			KVC_PROTO_VERSION_NS_SALT);
		return 1;
	}
	len = kvc_proto_encode_ns_salt(buf, sizeof(buf),
				       kvc_client_next_seq(c), &req);
	ret = len < 0 ? len : kvc_client_call(c, buf, (size_t)len, &m);
	if (!ret && m.type != KVC_MSG_NS_SALT_REPLY)
		ret = -EBADMSG;
	if (ret) {
		fprintf(stderr, "kvcachectl: salt of namespace %u: %s\n", ns,
			strerror(-ret));
		return 1;
	}
	for (int i = 0; print && i < KVC_PROTO_SALT_SIZE; i++)
		printf("%02x%s", m.ns_salt_reply.salt[i],
		       i + 1 < KVC_PROTO_SALT_SIZE ? "" : "\n");
	return 0;
}

static int cmd_ns_create(const char *sock, char **args, int n)
{
	uint8_t salt[KVC_PROTO_SALT_SIZE];
	struct kvc_ns_create nc;
	struct kvc_client c;
	struct kvc_msg m;
	uint8_t req[64];
	int ret, len;

	if ((n != 4 && n != 5) ||
	    parse_u32(args[0], KVCACHE_NS_MAX, &nc.ns_id, 0) ||
	    !nc.ns_id || parse_u32(args[1], UINT32_MAX, &nc.uid, 0) ||
	    parse_u32(args[2], UINT32_MAX, &nc.gid, 0) ||
	    parse_u32(args[3], 0777, &nc.mode, 8) ||
	    (n == 5 && parse_salt(args[4], salt))) {
		usage(stderr);
		return 2;
	}
	if (daemon_open(&c, sock))
		return 1;
	len = kvc_proto_encode_ns_create(req, sizeof(req),
					 kvc_client_next_seq(&c), &nc);
	ret = len < 0 ? len : kvc_client_call(&c, req, (size_t)len, &m);
	if (ret) {
		kvc_client_close(&c);
		fprintf(stderr, "kvcachectl: namespace %u: %s\n", nc.ns_id,
			strerror(-ret));
		return 1;
	}
	/*
	 * Created with a random salt, replaced at once: no engine can have
	 * derived keys from the first one (nobody asked for it yet).
	 */
	ret = n == 5 ? ns_salt_call(&c, nc.ns_id, salt, false) : 0;
	kvc_client_close(&c);
	return ret;
}

/* ns-salt ID [SALT]: print a namespace's salt, or set it (as root). */
static int cmd_ns_salt(const char *sock, char **args, int n)
{
	uint8_t salt[KVC_PROTO_SALT_SIZE];
	struct kvc_client c;
	uint32_t ns;
	int ret;

	if ((n != 1 && n != 2) || parse_u32(args[0], KVCACHE_NS_MAX, &ns, 0) ||
	    !ns || (n == 2 && parse_salt(args[1], salt))) {
		usage(stderr);
		return 2;
	}
	if (daemon_open(&c, sock))
		return 1;
	ret = ns_salt_call(&c, ns, n == 2 ? salt : NULL, n == 1);
	kvc_client_close(&c);
	return ret;
}

static int cmd_namespaces(const char *sock)
{
	struct kvc_client c;
	struct kvc_ns_entry e;
	struct kvc_msg m;
	uint8_t req[64];
	uint32_t start = 0;
	int ret, len;

	if (daemon_open(&c, sock))
		return 1;
	printf("%-6s %-10s %-10s %-5s %s\n", "ns", "uid", "gid", "mode",
	       "blocks");
	do {	/* page by page, as the reply's next says */
		len = kvc_proto_encode_ns_list(req, sizeof(req),
					       kvc_client_next_seq(&c), start);
		ret = len < 0 ? len : kvc_client_call(&c, req, (size_t)len, &m);
		if (ret) {
			fprintf(stderr, "kvcachectl: namespaces: %s\n",
				strerror(-ret));
			kvc_client_close(&c);
			return 1;
		}
		for (uint32_t i = 0; i < m.ns_list_reply.count; i++) {
			kvc_proto_ns_entry(&m.ns_list_reply, i, &e);
			printf("%-6u %-10u %-10u %04o  %" PRIu64 "\n", e.ns_id,
			       e.uid, e.gid, e.mode, e.blocks);
		}
		start = m.ns_list_reply.next;
	} while (start);
	kvc_client_close(&c);
	return 0;
}

/* 64 hex digits into a key. */
static int parse_key(const char *hex, uint8_t *key)
{
	if (strlen(hex) != 2 * KVCACHE_KEY_SIZE)
		return -1;
	for (int i = 0; i < KVCACHE_KEY_SIZE; i++) {
		unsigned int b;

		if (sscanf(hex + 2 * i, "%2x", &b) != 1)
			return -1;
		key[i] = (uint8_t)b;
	}
	return 0;
}

static int cmd_evict(const char *sock, char **args, int n)
{
	static uint8_t keys[KVC_PROTO_MAX_BATCH][KVCACHE_KEY_SIZE];
	static uint8_t req[KVC_PROTO_MSG_MAX];
	struct kvc_client c;
	struct kvc_msg m;
	uint32_t ns;
	int ret, len, failed = 0;

	if (n < 2 || n - 1 > KVC_PROTO_MAX_BATCH ||
	    parse_u32(args[0], KVCACHE_NS_MAX, &ns, 0) || !ns) {
		usage(stderr);
		return 2;
	}
	for (int i = 1; i < n; i++)
		if (parse_key(args[i], keys[i - 1])) {
			fprintf(stderr, "kvcachectl: bad key '%s'\n", args[i]);
			return 2;
		}
	if (daemon_open(&c, sock))
		return 1;
	len = kvc_proto_encode_evict(req, sizeof(req), kvc_client_next_seq(&c),
				     ns, keys[0], (uint32_t)(n - 1));
	ret = len < 0 ? len : kvc_client_call(&c, req, (size_t)len, &m);
	if (ret) {
		fprintf(stderr, "kvcachectl: evict: %s\n", strerror(-ret));
		kvc_client_close(&c);
		return 1;
	}
	for (uint32_t i = 0; i < m.evict_reply.count; i++) {
		int32_t st = kvc_proto_status(&m.evict_reply, i);

		printf("%s %s\n", args[i + 1], st ? strerror(-st) : "evicted");
		failed += st != 0;
	}
	kvc_client_close(&c);
	return failed ? 1 : 0;
}

/* "pool,g3,g4" (any of them, comma-separated) into a tier mask. */
static int parse_tiers(const char *arg, uint32_t *mask)
{
	static const char *const names[] = { "pool", "g3", "g4" };
	const char *p = arg;

	*mask = 0;
	while (*p) {
		size_t len = strcspn(p, ",");
		size_t t;

		for (t = 0; t < 3; t++)
			if (len == strlen(names[t]) &&
			    !strncmp(p, names[t], len))
				break;
		if (t == 3)
			return -1;
		*mask |= 1u << t;
		p += len + (p[len] == ',');
	}
	return *mask ? 0 : -1;
}

static int cmd_flush(const char *sock, const char *ns_arg,
		     const char *tiers_arg)
{
	struct kvc_client c;
	struct kvc_msg m;
	uint8_t req[64];
	uint32_t ns = KVC_PROTO_NS_ALL, tiers = 0;
	int ret, len;

	if ((ns_arg && strcmp(ns_arg, "all") &&
	     (parse_u32(ns_arg, KVCACHE_NS_MAX, &ns, 0) || !ns)) ||
	    (tiers_arg && parse_tiers(tiers_arg, &tiers))) {
		usage(stderr);
		return 2;
	}
	if (daemon_open(&c, sock))
		return 1;
	len = kvc_proto_encode_flush_tiers(req, sizeof(req),
					   kvc_client_next_seq(&c), ns, tiers);
	ret = len < 0 ? len : kvc_client_call(&c, req, (size_t)len, &m);
	kvc_client_close(&c);
	if (ret) {
		fprintf(stderr, "kvcachectl: flush: %s\n", strerror(-ret));
		return 1;
	}
	printf("evicted %" PRIu64 " blocks, %" PRIu64 " in use\n",
	       m.flush_reply.evicted, m.flush_reply.busy);
	return 0;
}

static int cmd_config(const char *file)
{
	struct kvc_config cfg;
	char err[512];

	kvc_config_defaults(&cfg);
	if (file || !access(KVCACHED_CONFIG, F_OK)) {
		if (kvc_config_load(&cfg, file ? file : KVCACHED_CONFIG, err,
				    sizeof(err))) {
			fprintf(stderr, "kvcachectl: %s\n", err);
			return 1;
		}
	}
	kvc_config_dump(&cfg, stdout);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 'S' },
		{ "device", required_argument, NULL, 'd' },
		{ "sysfs", required_argument, NULL, 's' },
		{ "root", required_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *dev = KVCACHE_DEVICE_PATH, *sysfs = NULL;
	const char *sock = KVCACHED_SOCKET, *root = "";
	int opt;

	while ((opt = getopt_long(argc, argv, "d:s:S:r:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'r':
			root = optarg;
			break;
		case 'S':
			sock = optarg;
			break;
		case 'd':
			dev = optarg;
			break;
		case 's':
			sysfs = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[optind], "info"))
		return cmd_info(dev, sysfs);
	if (!strcmp(argv[optind], "blocks"))
		return cmd_blocks(dev, argv[optind + 1]);
	if (!strcmp(argv[optind], "status"))
		return cmd_stats(sock, true);
	if (!strcmp(argv[optind], "tiers"))
		return cmd_tiers(sock);
	if (!strcmp(argv[optind], "stats"))
		return cmd_stats(sock, false);
	if (!strcmp(argv[optind], "ns-create"))
		return cmd_ns_create(sock, argv + optind + 1,
				     argc - optind - 1);
	if (!strcmp(argv[optind], "ns-salt"))
		return cmd_ns_salt(sock, argv + optind + 1, argc - optind - 1);
	if (!strcmp(argv[optind], "namespaces"))
		return cmd_namespaces(sock);
	if (!strcmp(argv[optind], "evict"))
		return cmd_evict(sock, argv + optind + 1, argc - optind - 1);
	if (!strcmp(argv[optind], "flush"))
		return cmd_flush(sock, argv[optind + 1],
				 argv[optind + 1] ? argv[optind + 2] : NULL);
	if (!strcmp(argv[optind], "config"))
		return cmd_config(argv[optind + 1]);
	if (!strcmp(argv[optind], "p2pcheck"))
		return kvc_p2pcheck(root, stdout);
	fprintf(stderr, "kvcachectl: unknown command '%s'\n", argv[optind]);
	usage(stderr);
	return 2;
}
