// SPDX-License-Identifier: GPL-2.0
/*
 * kvcachectl: the admin CLI of kvcache.
 *
 *   kvcachectl [-d DEVICE] [-s SYSFS_DIR] info
 *   kvcachectl [-d DEVICE] blocks [NAMESPACE]
 *
 * info prints what the module reports through KVCACHE_IOC_INFO, then its
 * sysfs knobs and counters. blocks lists the sealed blocks of the pool (of
 * one namespace, or of every namespace the caller may read) with their
 * metadata. Exit status: 0; 1 when the device or an ioctl fails; 2 on a
 * usage error (both with a message on stderr).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "devinfo.h"

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
		   "       kvcachectl [-d DEVICE] blocks [NAMESPACE]\n");
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

int main(int argc, char **argv)
{
	const char *dev = KVCACHE_DEVICE_PATH, *sysfs = NULL;
	int opt;

	while ((opt = getopt(argc, argv, "d:s:h")) != -1) {
		switch (opt) {
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
	fprintf(stderr, "kvcachectl: unknown command '%s'\n", argv[optind]);
	usage(stderr);
	return 2;
}
