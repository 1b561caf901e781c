// SPDX-License-Identifier: GPL-2.0
/*
 * kvcachectl: the admin CLI of kvcache.
 *
 *   kvcachectl [-d DEVICE] [-s SYSFS_DIR] info
 *
 * info prints what the module reports through KVCACHE_IOC_INFO, then its
 * sysfs knobs and counters. Exit status: 0, or 1 with a message on stderr.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "devinfo.h"

static const char *const sysfs_attrs[] = {
	"abi_version",
	"features",
	"pool/block_size",
	"pool/pool_size",
	"pool/nr_blocks",
	"pool/max_pool_size",
	"stats/open_files",
	"stats/opens",
	"stats/ioctls",
	"stats/ioctl_errors",
};

static void usage(FILE *f)
{
	fprintf(f, "usage: kvcachectl [-d DEVICE] [-s SYSFS_DIR] info\n");
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
	fprintf(stderr, "kvcachectl: unknown command '%s'\n", argv[optind]);
	usage(stderr);
	return 2;
}
