// SPDX-License-Identifier: GPL-2.0
/*
 * journal: kvcached's parents file, its records and its file handling (see
 * journal.h for the layout, the locking and the lifetime).
 */
#include "journal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blockfile.h"

/* Not "KVPJ", the unversioned records of older daemons: see kvcached.md. */
static const uint8_t jr_magic[4] = { 'K', 'V', 'P', 'R' };

#define OFF_VERSION	4
#define OFF_FLAGS	6
#define OFF_RESERVED	7
#define OFF_NS		8
#define OFF_KEY		12
#define OFF_PARENT	44
#define OFF_CRC		76

#define FLAG_FIRST	0x01

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

void kvc_journal_encode(const struct kvc_link *l,
			uint8_t rec[KVC_JOURNAL_REC])
{
	memset(rec, 0, KVC_JOURNAL_REC);
	memcpy(rec, jr_magic, sizeof(jr_magic));
	put16(rec + OFF_VERSION, KVC_JOURNAL_VERSION);
	rec[OFF_FLAGS] = l->first ? FLAG_FIRST : 0;
	put32(rec + OFF_NS, l->ns);
	memcpy(rec + OFF_KEY, l->key, KVCACHE_KEY_SIZE);
	/* One encoding per link: a first block's parent is not stored. */
	if (!l->first)
		memcpy(rec + OFF_PARENT, l->parent, KVCACHE_KEY_SIZE);
	put32(rec + OFF_CRC, kvc_crc32c(0, rec, OFF_CRC));
}

static bool all_zero(const uint8_t *p, size_t n)
{
	while (n--)
		if (*p++)
			return false;
	return true;
}

int kvc_journal_decode(const uint8_t rec[KVC_JOURNAL_REC],
		       struct kvc_link *l)
{
	uint32_t ns;

	if (memcmp(rec, jr_magic, sizeof(jr_magic)) ||
	    get16(rec + OFF_VERSION) != KVC_JOURNAL_VERSION ||
	    get32(rec + OFF_CRC) != kvc_crc32c(0, rec, OFF_CRC))
		return -EBADMSG;
	/* Behind a good CRC only a writer's bug or a forgery gets here. */
	if ((rec[OFF_FLAGS] & ~FLAG_FIRST) || rec[OFF_RESERVED])
		return -EBADMSG;
	if ((rec[OFF_FLAGS] & FLAG_FIRST) &&
	    !all_zero(rec + OFF_PARENT, KVCACHE_KEY_SIZE))
		return -EBADMSG;
	ns = get32(rec + OFF_NS);
	if (ns < 1 || ns > KVCACHE_NS_MAX)
		return -ERANGE;
	l->ns = ns;
	l->first = rec[OFF_FLAGS] & FLAG_FIRST;
	memcpy(l->key, rec + OFF_KEY, KVCACHE_KEY_SIZE);
	memcpy(l->parent, rec + OFF_PARENT, KVCACHE_KEY_SIZE);
	return 0;
}

int kvc_journal_parse(const uint8_t *buf, size_t len, struct kvc_link **out,
		      size_t *n, size_t *bad)
{
	size_t whole = len / KVC_JOURNAL_REC;
	struct kvc_link *links = NULL;

	*out = NULL;
	*n = 0;
	/* A torn tail is what a crash mid-append leaves: not a record. */
	*bad = len % KVC_JOURNAL_REC ? 1 : 0;
	if (whole) {
		links = malloc(whole * sizeof(*links));
		if (!links)
			return -ENOMEM;
	}
	/*
	 * Each record stands alone: a bad one costs its own block, and the
	 * records after it are still in step (appends cut off their own
	 * partial writes, and a restart rewrites the file before appending).
	 */
	for (size_t i = 0; i < whole; i++) {
		if (kvc_journal_decode(buf + i * KVC_JOURNAL_REC, &links[*n]))
			(*bad)++;
		else
			(*n)++;
	}
	if (!*n) {
		free(links);
		links = NULL;
	}
	*out = links;
	return 0;
}

int kvc_journal_read(const char *path, struct kvc_link **out, size_t *n,
		     size_t *bad)
{
	uint8_t *buf = NULL, *tmp;
	size_t len = 0, cap = 0;
	ssize_t got;
	int fd, ret;

	*out = NULL;
	*n = 0;
	*bad = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	for (;;) {
		if (len == cap) {
			cap = cap ? cap * 2 : 64 * KVC_JOURNAL_REC;
			tmp = realloc(buf, cap);
			if (!tmp) {
				ret = -ENOMEM;
				goto out;
			}
			buf = tmp;
		}
		got = read(fd, buf + len, cap - len);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			ret = -errno;
			goto out;
		}
		if (!got)
			break;
		len += (size_t)got;
	}
	ret = kvc_journal_parse(buf, len, out, n, bad);
out:
	close(fd);
	free(buf);
	return ret;
}

int kvc_link_cmp(const void *a, const void *b)
{
	const struct kvc_link *x = a, *y = b;

	if (x->ns != y->ns)
		return x->ns < y->ns ? -1 : 1;
	return memcmp(x->key, y->key, KVCACHE_KEY_SIZE);
}

int kvc_journal_append(int fd, const struct kvc_link *l)
{
	uint8_t rec[KVC_JOURNAL_REC];
	ssize_t w;

	kvc_journal_encode(l, rec);
	do {
		w = write(fd, rec, sizeof(rec));
	} while (w < 0 && errno == EINTR);
	if (w < 0)
		return -errno;
	if (w == (ssize_t)sizeof(rec))
		return 0;
	/*
	 * Part of a record (the disk filled up): cut it off, or every later
	 * record would be read out of step. The daemon is the file's only
	 * writer, so its end is the part just written.
	 */
	if (w > 0) {
		off_t end = lseek(fd, 0, SEEK_END);

		if (end >= w && ftruncate(fd, end - w))
			return -errno;
	}
	return -ENOSPC;
}

static int write_all(int fd, const uint8_t *p, size_t len)
{
	while (len) {
		ssize_t w = write(fd, p, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		if (!w)
			return -ENOSPC;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

int kvc_journal_rewrite(const char *path, const struct kvc_link *l, size_t n,
			int *fd)
{
	uint8_t buf[64 * KVC_JOURNAL_REC];
	char tmp[PATH_MAX];
	size_t used = 0;
	int nfd, ret = 0;

	if (snprintf(tmp, sizeof(tmp), "%s.new", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	/* 0600 whatever the umask: it lists every tenant's keys. */
	nfd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC,
		   0600);
	if (nfd < 0)
		return -errno;
	if (fchmod(nfd, 0600)) {
		ret = -errno;
		close(nfd);
		unlink(tmp);
		return ret;
	}
	for (size_t i = 0; i < n && !ret; i++) {
		kvc_journal_encode(&l[i], buf + used);
		used += KVC_JOURNAL_REC;
		if (used == sizeof(buf) || i + 1 == n) {
			ret = write_all(nfd, buf, used);
			used = 0;
		}
	}
	/* Durable before its name is: a crash leaves one file or the other. */
	if (!ret && fsync(nfd))
		ret = -errno;
	if (!ret && rename(tmp, path))
		ret = -errno;
	/*
	 * The name is in place: a failed directory fsync only means a crash
	 * could bring the old file back, a valid journal too (every link it
	 * had, a superset). Appends must go to the new file either way.
	 */
	if (!ret)
		kvc_bf_fsync_dir_of(path);
	if (ret) {
		close(nfd);
		unlink(tmp);
		return ret;
	}
	if (fd)
		*fd = nfd;
	else
		close(nfd);
	return 0;
}

bool kvc_journal_due(uint64_t bytes, uint64_t live, uint64_t last,
		     uint64_t min)
{
	uint64_t floor = 4 * live * KVC_JOURNAL_REC;

	if (floor < min)
		floor = min;
	return bytes > floor && bytes >= 2 * last;
}
