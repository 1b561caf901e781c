// SPDX-License-Identifier: GPL-2.0
/*
 * manifest: a tier's record of the block files written (see manifest.h).
 */
#include "manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fault.h"

static const uint8_t mf_magic[4] = { 'K', 'V', 'M', 'F' };

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static void encode(const struct kvc_mf_rec *r, uint8_t *b)
{
	memset(b, 0, KVC_MF_REC_SIZE);
	memcpy(b, mf_magic, 4);
	put32(b + 4, r->ns);
	put32(b + 8, r->first ? 1 : 0);
	put32(b + 16, (uint32_t)r->size);
	put32(b + 20, (uint32_t)(r->size >> 32));
	memcpy(b + 24, r->key, KVC_BF_KEY_SIZE);
	memcpy(b + 56, r->parent, KVC_BF_KEY_SIZE);
	put32(b + 88, kvc_crc32c(0, b, 88));
}

/* 0, or -EBADMSG for anything but an intact record. */
static int decode(const uint8_t *b, struct kvc_mf_rec *r)
{
	uint32_t flags = get32(b + 8);

	if (memcmp(b, mf_magic, 4) || get32(b + 88) != kvc_crc32c(0, b, 88) ||
	    get32(b + 12) || get32(b + 92) || flags > 1 || !get32(b + 4))
		return -EBADMSG;
	r->ns = get32(b + 4);
	r->first = flags & 1;
	r->size = (uint64_t)get32(b + 16) | (uint64_t)get32(b + 20) << 32;
	memcpy(r->key, b + 24, KVC_BF_KEY_SIZE);
	memcpy(r->parent, b + 56, KVC_BF_KEY_SIZE);
	return 0;
}

/*
 * 0600 whatever the umask: a manifest lists the keys and namespaces of
 * every tenant. Set on every open, so a manifest an older kvcached left
 * readable is made private again.
 */
static int mf_private(int fd)
{
	int err;

	if (fd < 0 || !fchmod(fd, KVC_BF_PRIVATE_MODE))
		return fd < 0 ? -errno : fd;
	err = -errno;
	close(fd);
	return err;
}

int kvc_mf_open(const char *path)
{
	return mf_private(open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
			       KVC_BF_PRIVATE_MODE));
}

int kvc_mf_append(int fd, const struct kvc_mf_rec *r)
{
	uint8_t b[KVC_MF_REC_SIZE];
	ssize_t w;

	encode(r, b);
	/* O_APPEND: one write lands at the end, whole as a rule. */
	w = kvc_fault_write(KVC_FAULT_MANIFEST_WRITE, fd, b, sizeof(b));
	if (w < 0)
		return -errno;
	if (w == (ssize_t)sizeof(b))
		return 0;
	/*
	 * Part of a record (the disk filled up): cut it off, or every later
	 * record would be read out of step. This node is the file's only
	 * writer, so its end is the part just written.
	 */
	if (w > 0) {
		off_t end = lseek(fd, 0, SEEK_END);

		if (end >= w && ftruncate(fd, end - w))
			return -errno;
	}
	return -EIO;
}

int kvc_mf_read(const char *path, struct kvc_mf_rec **out, size_t *n,
		size_t *bad)
{
	struct kvc_mf_rec *recs = NULL;
	uint8_t b[KVC_MF_REC_SIZE * 64];
	size_t cap = 0, have = 0;
	ssize_t got;
	int fd, ret = 0;

	*out = NULL;
	*n = 0;
	*bad = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	/*
	 * Whole records only: a torn last record (a crash mid-append) is a
	 * short tail. Records after one stay in step because the recovery
	 * that reads a torn manifest rewrites it before anything is appended
	 * again, and kvc_mf_append() cuts off its own partial writes.
	 */
	while ((got = read(fd, b + have, sizeof(b) - have)) > 0 ||
	       (got < 0 && errno == EINTR)) {
		size_t len, off;

		if (got < 0)
			continue;
		len = have + (size_t)got;
		for (off = 0; off + KVC_MF_REC_SIZE <= len;
		     off += KVC_MF_REC_SIZE) {
			if (*n == cap) {
				struct kvc_mf_rec *p;

				cap = cap ? cap * 2 : 1024;
				p = realloc(recs, cap * sizeof(*p));
				if (!p) {
					ret = -ENOMEM;
					goto out;
				}
				recs = p;
			}
			if (decode(b + off, &recs[*n]))
				(*bad)++;
			else
				(*n)++;
		}
		have = len - off;
		memmove(b, b + off, have);
	}
	if (got < 0)
		ret = -errno;
	if (have)
		(*bad)++;
out:
	close(fd);
	if (ret) {
		free(recs);
		*n = 0;
		return ret;
	}
	*out = recs;
	return 0;
}

int kvc_mf_rewrite(const char *path, const struct kvc_mf_rec *r, size_t n)
{
	char tmp[PATH_MAX];
	uint8_t b[KVC_MF_REC_SIZE];
	FILE *f;
	int fd, ret = 0;

	if (snprintf(tmp, sizeof(tmp), "%s.new", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = mf_private(open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
			     KVC_BF_PRIVATE_MODE));
	if (fd < 0)
		return fd;
	f = fdopen(fd, "w");
	if (!f) {
		ret = -errno;
		close(fd);
		unlink(tmp);
		return ret;
	}
	for (size_t i = 0; i < n && !ret; i++) {
		encode(&r[i], b);
		if (fwrite(b, sizeof(b), 1, f) != 1)
			ret = -EIO;
	}
	if (!ret && (fflush(f) || kvc_fault_sys(KVC_FAULT_MANIFEST_FSYNC) ||
		     fsync(fileno(f))))
		ret = -errno;
	if (fclose(f) && !ret)
		ret = -errno;
	if (!ret && (kvc_fault_sys(KVC_FAULT_MANIFEST_RENAME) ||
		     rename(tmp, path)))
		ret = -errno;
	if (ret) {
		unlink(tmp);
		return ret;
	}
	return kvc_bf_fsync_dir_of(path);
}
