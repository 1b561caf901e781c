// SPDX-License-Identifier: GPL-2.0
/*
 * devinfo: the INFO ioctl, feature names and sysfs reads (see devinfo.h).
 */
#include "devinfo.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

int kvc_dev_info(int fd, struct kvcache_info *info)
{
	memset(info, 0, sizeof(*info));
	info->size = sizeof(*info);
	if (ioctl(fd, KVCACHE_IOC_INFO, info))
		return -errno;
	if (info->abi_version != KVCACHE_ABI_VERSION ||
	    info->size < KVCACHE_INFO_SIZE_VER1)
		return -EPROTO;
	return 0;
}

static const struct {
	uint64_t bit;
	const char *name;
} feature_names[] = {
	{ KVCACHE_FEAT_POOL, "pool" },
	{ KVCACHE_FEAT_NETLINK, "netlink" },
	{ KVCACHE_FEAT_P2P, "p2p" },
	{ KVCACHE_FEAT_VIEW, "view" },
	{ KVCACHE_FEAT_DISCARD, "discard" },
	{ KVCACHE_FEAT_QUERY_EXACT, "query_exact" },
	{ KVCACHE_FEAT_USER_REGION, "user_region" },
};

size_t kvc_feature_names(uint64_t features, char *out, size_t len)
{
	size_t used = 0, i;
	int n;

	if (len)
		out[0] = '\0';
	if (!features)
		return (size_t)snprintf(out, len, "none");

	for (i = 0; i < sizeof(feature_names) / sizeof(feature_names[0]); i++) {
		if (!(features & feature_names[i].bit))
			continue;
		features &= ~feature_names[i].bit;
		n = snprintf(out + (used < len ? used : len),
			     used < len ? len - used : 0, "%s%s",
			     used ? "," : "", feature_names[i].name);
		used += (size_t)n;
	}
	if (features) {
		n = snprintf(out + (used < len ? used : len),
			     used < len ? len - used : 0, "%s%#" PRIx64,
			     used ? "," : "", features);
		used += (size_t)n;
	}
	return used;
}

void kvc_format_bytes(uint64_t bytes, char *out, size_t len)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB",
					    "PiB", "EiB" };
	unsigned int u = 0;

	while (u < 6 && bytes && !(bytes & 1023)) {
		bytes >>= 10;
		u++;
	}
	snprintf(out, len, "%" PRIu64 " %s", bytes, unit[u]);
}

int kvc_sysfs_read(const char *dir, const char *attr, char *out, size_t len)
{
	char path[512];
	ssize_t n;
	int fd, err;

	if (!len)
		return -EINVAL;
	if (snprintf(path, sizeof(path), "%s/%s", dir ? dir : KVC_SYSFS_DIR,
		     attr) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, out, len - 1);
	err = errno;
	close(fd);
	if (n < 0)
		return -err;
	out[n] = '\0';
	if (n && out[n - 1] == '\n')
		out[n - 1] = '\0';
	return 0;
}
