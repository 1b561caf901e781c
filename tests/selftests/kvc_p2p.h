/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the P2P selftest and benchmark share (header-only: each is one
 * binary): finding the bench's devices, binding the fake GPU to kvcache's
 * PCI driver, the NVMe file system, pattern files, and the region and
 * transfer ioctls.
 */
#ifndef KVC_P2P_H
#define KVC_P2P_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kvc_ioctl.h"
#include "kvc_sysfs.h"

#define MNT		"/run/kvc-nvme"
#define PROVIDERS	KVC_SYSFS "/providers"
#define PCI_DEVICES	"/sys/bus/pci/devices"

/* The word at byte offset @off of a pattern stream: (seed << 32) + off/8. */
static inline void fill(void *buf, uint64_t off, size_t len, uint32_t seed)
{
	uint64_t *w = buf;

	for (size_t i = 0; i < len / 8; i++)
		w[i] = ((uint64_t)seed << 32) + off / 8 + i;
}

/* Index of the first word that differs from the pattern, or -1. */
static inline long check(const void *buf, uint64_t off, size_t len, uint32_t seed)
{
	const volatile uint64_t *w = buf;

	for (size_t i = 0; i < len / 8; i++)
		if (w[i] != ((uint64_t)seed << 32) + off / 8 + i)
			return (long)i;
	return -1;
}

static inline int write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, s, strlen(s));
	n = n < 0 ? -errno : 0;
	close(fd);
	return (int)n;
}

/* PCI name of the first device with this vendor:device, or of this class. */
static inline int find_pci(unsigned int vendor, unsigned int device,
		    unsigned int class, char *name, size_t len)
{
	char path[PATH_MAX];
	struct dirent *d;
	uint64_t v, dv, c;
	DIR *dir = opendir(PCI_DEVICES);
	int ret = -ENOENT;

	if (!dir)
		return -errno;
	while ((d = readdir(dir))) {
		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), PCI_DEVICES "/%s/vendor", d->d_name);
		if (kvc_read_u64(path, &v))
			continue;
		snprintf(path, sizeof(path), PCI_DEVICES "/%s/device", d->d_name);
		if (kvc_read_u64(path, &dv))
			continue;
		snprintf(path, sizeof(path), PCI_DEVICES "/%s/class", d->d_name);
		if (kvc_read_u64(path, &c))
			continue;
		if ((class && c == class) || (!class && v == vendor &&
					      dv == device)) {
			ret = strlen(d->d_name) < len ? 0 : -ENAMETOOLONG;
			if (!ret)
				memcpy(name, d->d_name, strlen(d->d_name) + 1);
			break;
		}
	}
	closedir(dir);
	return ret;
}

/* The provider whose "device" link points at PCI device @pci, or -1. */
static inline int provider_of(const char *pci)
{
	char path[PATH_MAX], link[PATH_MAX];
	struct dirent *d;
	DIR *dir = opendir(PROVIDERS);
	int id = -1;
	ssize_t n;

	if (!dir)
		return -1;
	while ((d = readdir(dir))) {
		if (d->d_name[0] < '0' || d->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), PROVIDERS "/%s/device", d->d_name);
		n = readlink(path, link, sizeof(link) - 1);
		if (n < 0)
			continue;
		link[n] = '\0';
		if (!strcmp(strrchr(link, '/') + 1, pci)) {
			id = atoi(d->d_name);
			break;
		}
	}
	closedir(dir);
	return id;
}

static inline uint64_t provider_u64(int id, const char *file)
{
	char path[PATH_MAX];
	uint64_t v = UINT64_MAX;

	snprintf(path, sizeof(path), PROVIDERS "/%d/%s", id, file);
	kvc_read_u64(path, &v);
	return v;
}

/* Bind the ivshmem device to the kvcache driver (idempotent). */
static inline int bind_gpu(const char *pci)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), PCI_DEVICES "/%s/driver_override", pci);
	if (write_str(path, "kvcache"))
		return -1;
	if (provider_of(pci) < 0)
		write_str("/sys/bus/pci/drivers/kvcache/bind", pci);
	return provider_of(pci);
}

/* An ext4 file system on the NVMe, made once per boot. */
static inline int nvme_fs(void)
{
	char line[512];
	FILE *m = fopen("/proc/mounts", "r");
	int found = 0;

	if (!m)
		return -1;
	while (fgets(line, sizeof(line), m))
		if (strstr(line, " " MNT " "))
			found = 1;
	fclose(m);
	if (found)
		return 0;
	mkdir(MNT, 0755);
	if (system("mkfs.ext4 -q -F -E lazy_itable_init=1,lazy_journal_init=1 /dev/nvme0n1"))
		return -1;
	return mount("/dev/nvme0n1", MNT, "ext4", 0, NULL) ? -1 : 0;
}

/* A file of @len bytes holding pattern @seed, opened O_DIRECT with @flags. */
static inline int pattern_file(const char *name, uint64_t len, uint32_t seed,
			int flags)
{
	char path[PATH_MAX];
	size_t chunk = 1 << 20;
	void *buf = malloc(chunk);
	int fd;

	snprintf(path, sizeof(path), MNT "/%s", name);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || !buf)
		goto fail;
	for (uint64_t off = 0; off < len; off += chunk) {
		size_t n = len - off < chunk ? len - off : chunk;

		fill(buf, off, n, seed);
		if (pwrite(fd, buf, n, (off_t)off) != (ssize_t)n)
			goto fail;
	}
	if (fsync(fd))
		goto fail;
	close(fd);
	free(buf);
	return open(path, flags | O_DIRECT | O_CLOEXEC);
fail:
	if (fd >= 0)
		close(fd);
	free(buf);
	return -1;
}

static inline int region_reg(int fd, int prov, uint64_t off, uint64_t len,
		      uint32_t *handle)
{
	struct kvcache_region r = {
		.size = sizeof(r), .provider = (uint32_t)prov,
		.offset = off, .length = len,
	};
	int ret = kvc_ioc(fd, KVCACHE_IOC_REGION_REGISTER, &r);

	*handle = r.handle;
	return ret;
}

/* A user region: the caller's own mapping of P2PDMA memory at @addr. */
static inline int region_reg_user(int fd, int prov, const void *addr,
				  uint64_t len, uint32_t *handle)
{
	struct kvcache_region r = {
		.size = sizeof(r), .flags = KVCACHE_REGION_USER,
		.provider = (uint32_t)prov, .offset = (uintptr_t)addr,
		.length = len,
	};
	int ret = kvc_ioc(fd, KVCACHE_IOC_REGION_REGISTER, &r);

	*handle = r.handle;
	return ret;
}

/*
 * @len bytes of @pci's published P2PDMA memory mapped into this process
 * (sysfs p2pmem/allocate), as a GPU driver in P2PDMA mode maps GPU memory;
 * at @at exactly unless it is NULL.
 */
static inline void *map_p2pmem(const char *pci, void *at, size_t len)
{
	char path[PATH_MAX];
	void *p;
	int fd;

	snprintf(path, sizeof(path), PCI_DEVICES "/%s/p2pmem/allocate", pci);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return MAP_FAILED;
	p = mmap(at, len, PROT_READ | PROT_WRITE,
		 MAP_SHARED | (at ? MAP_FIXED : 0), fd, 0);
	close(fd);
	return p;
}

/* Bytes of @pci's published P2PDMA memory not allocated, or -1. */
static inline int64_t p2pmem_available(const char *pci)
{
	char path[PATH_MAX], buf[32];

	snprintf(path, sizeof(path), PCI_DEVICES "/%s/p2pmem/available", pci);
	if (kvc_read_file(path, buf, sizeof(buf)))
		return -1;
	return strtoll(buf, NULL, 0);
}

static inline int region_unreg(int fd, uint32_t handle)
{
	struct kvcache_region r = { .size = sizeof(r), .handle = handle };

	return kvc_ioc(fd, KVCACHE_IOC_REGION_UNREGISTER, &r);
}

static inline int xfer(int fd, struct kvcache_xfer_entry *e, uint32_t n,
		uint32_t *failed)
{
	struct kvcache_xfer x = {
		.size = sizeof(x), .count = n, .eventfd = -1,
		.entries = (uintptr_t)e,
	};
	int ret = kvc_ioc(fd, KVCACHE_IOC_XFER, &x);

	if (failed)
		*failed = x.failed;
	return ret;
}

static inline int xfer_async(int fd, struct kvcache_xfer_entry *e, uint32_t n,
		      int efd, uint64_t *id)
{
	struct kvcache_xfer x = {
		.size = sizeof(x), .flags = KVCACHE_XFER_ASYNC, .count = n,
		.eventfd = efd, .entries = (uintptr_t)e,
	};
	int ret = kvc_ioc(fd, KVCACHE_IOC_XFER, &x);

	*id = x.id;
	return ret;
}

static inline int reap(int fd, uint64_t id, struct kvcache_xfer_entry *e,
		uint32_t n, uint32_t flags)
{
	struct kvcache_xfer_reap r = {
		.size = sizeof(r), .flags = flags, .count = n, .id = id,
		.entries = (uintptr_t)e,
	};

	return kvc_ioc(fd, KVCACHE_IOC_XFER_REAP, &r);
}

/* One region entry: file -> region unless to_file. */
static inline struct kvcache_xfer_entry entry(int file, uint64_t foff, uint64_t len,
				       uint32_t region, uint64_t roff,
				       int to_file)
{
	struct kvcache_xfer_entry e = {
		.fd = file, .file_offset = foff, .length = len,
		.region = region, .offset = roff,
		.flags = to_file ? KVCACHE_XFER_TO_FILE : 0,
	};

	return e;
}

static inline int xfer1(int fd, struct kvcache_xfer_entry *e)
{
	int ret = xfer(fd, e, 1, NULL);

	return ret ? ret : (e->result < 0 ? (int)e->result : 0);
}

#endif /* KVC_P2P_H */
