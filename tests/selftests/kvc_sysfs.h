/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Small sysfs helpers shared by the kvcache selftests (header-only: each
 * selftest is one binary).
 */
#ifndef KVC_SYSFS_H
#define KVC_SYSFS_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KVC_SYSFS "/sys/class/misc/kvcache"

/* Read a sysfs file into buf (NUL-terminated). Returns 0 or -errno. */
static inline int kvc_read_file(const char *path, char *buf, size_t len)
{
	ssize_t n;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	if (n < 0) {
		n = -errno;
		close(fd);
		return (int)n;
	}
	close(fd);
	buf[n] = '\0';
	return 0;
}

/* Parse a sysfs file holding one number (base auto-detected). */
static inline int kvc_read_u64(const char *path, uint64_t *val)
{
	char buf[64], *end;
	int ret = kvc_read_file(path, buf, sizeof(buf));

	if (ret)
		return ret;
	errno = 0;
	*val = strtoull(buf, &end, 0);
	if (errno || end == buf)
		return -EINVAL;
	return 0;
}

/* Write a string with one write(2). Returns 0 or -errno of the write. */
static inline int kvc_write_file(const char *path, const char *s)
{
	ssize_t n;
	int fd = open(path, O_WRONLY);

	if (fd < 0)
		return -errno;
	n = write(fd, s, strlen(s));
	if (n < 0) {
		n = -errno;
		close(fd);
		return (int)n;
	}
	close(fd);
	return n == (ssize_t)strlen(s) ? 0 : -EIO;
}

/* A sysfs attribute of the device, e.g. kvc_attr("pool/block_size"). */
static inline const char *kvc_attr(const char *name)
{
	static char path[256];

	snprintf(path, sizeof(path), KVC_SYSFS "/%s", name);
	return path;
}

static inline uint64_t kvc_attr_u64(const char *name)
{
	uint64_t v = UINT64_MAX;

	if (kvc_read_u64(kvc_attr(name), &v))
		return UINT64_MAX;
	return v;
}

#endif /* KVC_SYSFS_H */
