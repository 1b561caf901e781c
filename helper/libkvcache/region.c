// SPDX-License-Identifier: GPL-2.0
/*
 * libkvcache: GPU regions, and loads from the local disk tier straight
 * into them (Documentation/design/p2p.md has the kernel side).
 *
 * A G3 block file is a 4096-byte header and the payload padded to 4096
 * bytes (Documentation/design/blockfile.md), so its payload is one O_DIRECT
 * extent the kernel can DMA from the NVMe device into the region (P2P),
 * or bounce through a pool block when the topology does not allow P2P.
 * The payload then never passes through this process, so its checksum is
 * verified by a second, host-side read of the same file: a block whose
 * header or payload does not check out ends the loaded prefix, and the
 * bytes already moved into the region for it are simply not counted.
 * That read costs host bandwidth; the engine wanting none of it can load
 * through the pool instead.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE	/* O_DIRECT */
#endif
#include "lib_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blockfile.h"

#define ALIGN4K(x)	(((x) + 4095) & ~(uint64_t)4095)

LIB_EXPORT int kvcache_region_register(struct kvcache *c, uint32_t provider,
				       uint64_t offset, uint64_t length,
				       uint32_t *region)
{
	struct kvcache_region r = {
		.size = sizeof(r), .provider = provider,
		.offset = offset, .length = length,
	};

	if (!c || !region)
		return -EINVAL;
	if (c->mode != KVC_PROTO_MODE_KERNEL)
		return -EOPNOTSUPP;
	if (ioctl(c->dev, KVCACHE_IOC_REGION_REGISTER, &r))
		return -errno;
	*region = r.handle;
	return 0;
}

LIB_EXPORT int kvcache_region_unregister(struct kvcache *c, uint32_t region)
{
	struct kvcache_region r = { .size = sizeof(r), .handle = region };

	if (!c)
		return -EINVAL;
	if (c->mode != KVC_PROTO_MODE_KERNEL)
		return -EOPNOTSUPP;
	return ioctl(c->dev, KVCACHE_IOC_REGION_UNREGISTER, &r) ? -errno : 0;
}

/*
 * Open key's G3 file and check its header: the right key, namespace and
 * length. Returns the O_DIRECT descriptor and the payload CRC, or -errno.
 */
static int open_block(struct kvcache_namespace *ns, const uint8_t *key,
		      uint8_t *hdr, uint32_t *crc, char *path, size_t plen)
{
	struct kvcache *c = ns->c;
	struct kvc_bf_header h;
	char dir[PATH_MAX];
	struct stat st;
	int fd, ret;

	if (snprintf(dir, sizeof(dir), "%s/ns%u", c->g3_dir, ns->ns_id) >=
	    (int)sizeof(dir))
		return -ENAMETOOLONG;
	ret = kvc_bf_path(dir, key, path, plen);
	if (ret)
		return ret;
	fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (pread(fd, hdr, KVC_BF_HEADER_SIZE, 0) != KVC_BF_HEADER_SIZE ||
	    fstat(fd, &st))
		ret = -EIO;
	if (!ret)
		ret = kvc_bf_decode_header(hdr, &h);
	if (!ret && (memcmp(h.key, key, KVCACHE_KEY_SIZE) ||
		     h.ns_id != ns->ns_id || h.payload_len != ns->block_bytes ||
		     (uint64_t)st.st_size != kvc_bf_file_size(h.payload_len)))
		ret = -EBADMSG;
	if (ret) {
		close(fd);
		return ret;
	}
	*crc = h.payload_crc;
	return fd;
}

/* The host-side check of a payload that went to the GPU. */
static bool payload_ok(int fd, uint8_t *buf, size_t len, uint32_t crc)
{
	ssize_t n = pread(fd, buf, ALIGN4K(len), KVC_BF_HEADER_SIZE);

	return n >= (ssize_t)len && kvc_crc32c(0, buf, len) == crc;
}

LIB_EXPORT int kvcache_load_region(struct kvcache_namespace *ns,
				   const uint8_t *keys, size_t n,
				   uint32_t region, uint64_t offset,
				   uint64_t stride)
{
	struct kvcache_xfer_entry *e = NULL;
	uint32_t *crc = NULL;
	uint8_t *hdr = NULL, *check = NULL;
	struct kvcache *c;
	uint32_t *tiers = NULL;
	size_t want, done = 0;
	uint64_t len;
	int ret, *fds = NULL;

	if (!ns || (!keys && n) || n > KVCACHE_MAX_BATCH)
		return -EINVAL;
	c = ns->c;
	len = ALIGN4K(ns->block_bytes);
	if (c->mode != KVC_PROTO_MODE_KERNEL || !c->g3_dir[0])
		return -EOPNOTSUPP;
	if ((offset | stride) & 4095 || stride < len)
		return -EINVAL;
	if (!n)
		return 0;
	tiers = calloc(n, sizeof(*tiers));
	fds = malloc(n * sizeof(*fds));
	crc = calloc(n, sizeof(*crc));
	e = calloc(n, sizeof(*e));
	if (!tiers || !fds || !crc || !e ||
	    posix_memalign((void **)&hdr, 4096, KVC_BF_HEADER_SIZE) ||
	    posix_memalign((void **)&check, 4096, len)) {
		ret = -ENOMEM;
		goto out;
	}
	ret = kvcache_lookup(ns, keys, n, tiers);
	if (ret < 0)
		goto out;
	/* The leading blocks G3 holds, their headers checked. */
	for (want = 0; want < (size_t)ret; want++) {
		char path[PATH_MAX];
		int fd;

		if (!(tiers[want] & KVCACHE_TIER_G3))
			break;
		fd = open_block(ns, keys + want * KVCACHE_KEY_SIZE, hdr,
				&crc[want], path, sizeof(path));
		if (fd < 0)
			break;
		fds[want] = fd;
		e[want] = (struct kvcache_xfer_entry) {
			.fd = fd, .file_offset = KVC_BF_HEADER_SIZE,
			.length = len, .region = region,
			.offset = offset + want * stride,
		};
	}
	ret = 0;
	if (want) {
		struct kvcache_xfer x = {
			.size = sizeof(x), .count = (uint32_t)want,
			.eventfd = -1, .entries = (uintptr_t)e,
		};

		if (ioctl(c->dev, KVCACHE_IOC_XFER, &x))
			ret = -errno;
		for (done = 0; !ret && done < want; done++)
			if (e[done].result != (int64_t)len ||
			    !payload_ok(fds[done], check, ns->block_bytes,
					crc[done]))
				break;
		if (ret == 0 && !done && e[0].result < 0)
			ret = (int)e[0].result;
		for (size_t i = 0; i < want; i++)
			close(fds[i]);
	}
out:
	free(tiers);
	free(fds);
	free(crc);
	free(e);
	free(hdr);
	free(check);
	return ret < 0 ? ret : (int)done;
}
