// SPDX-License-Identifier: GPL-2.0
/*
 * blockfile: one KV block per file in the persistent tiers (see
 * blockfile.h and Documentation/design/blockfile.md).
 *
 * The header is encoded field by field at fixed little-endian offsets,
 * never by copying a struct, so the format does not depend on the
 * compiler's padding or the host's byte order. Writes go through an
 * aligned buffer holding the whole file image with O_DIRECT where
 * the filesystem takes it (a 64 MiB block then does not evict the page
 * cache the DRAM tier lives in), buffered otherwise.
 */
/* O_DIRECT and renameat2(): also when a test builds this file alone. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "blockfile.h"

#include "beneath.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Header field offsets (Documentation/design/blockfile.md has the table). */
enum {
	OFF_MAGIC = 0,
	OFF_VERSION = 8,
	OFF_HDR_SIZE = 12,
	OFF_FLAGS = 16,
	OFF_RESERVED = 20,
	OFF_KEY = 24,
	OFF_PARENT = 56,
	OFF_NS_ID = 88,
	OFF_RESERVED2 = 92,
	OFF_PAYLOAD_LEN = 120,
	OFF_PAYLOAD_CRC = 128,
	OFF_CTIME = 132,
	OFF_NODE_ID = 140,
	OFF_HDR_CRC = 204,
	OFF_TAIL = 208,
};

static const uint8_t kvc_bf_magic[8] = { 'K', 'V', 'C', 'B', 'L', 'K', 0, 1 };


/* ---- CRC32C ------------------------------------------------------------ */

/*
 * Slicing-by-8: eight 256-entry tables, one load per input byte but eight
 * bytes per step with no dependency between the lookups, several times
 * the speed of the byte-at-a-time table. The tables
 * are built once; pthread_once makes that safe from any thread.
 */
static uint32_t crc_tab[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0x82F63B78U & (0U - (c & 1)));
		crc_tab[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc_tab[t][i] = (crc_tab[t - 1][i] >> 8) ^
					crc_tab[0][crc_tab[t - 1][i] & 0xff];
}

#if defined(__x86_64__)
/*
 * SSE 4.2's crc32 instruction computes exactly this CRC, 8 bytes per
 * instruction: several times the tables' speed, which matters since every
 * spilled and every promoted byte is checksummed on the daemon's thread.
 */
__attribute__((target("sse4.2")))
static uint32_t crc_hw(uint32_t crc, const uint8_t *p, size_t len)
{
	uint64_t c = ~crc;

	while (len >= 8) {
		uint64_t v;

		memcpy(&v, p, 8);	/* unaligned, little-endian on x86 */
		c = __builtin_ia32_crc32di(c, v);
		p += 8;
		len -= 8;
	}
	while (len--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	return ~(uint32_t)c;
}

static bool crc_has_hw(void)
{
	static int has = -1;

	if (has < 0)
		has = __builtin_cpu_supports("sse4.2") ? 1 : 0;
	return has;
}
#else
static uint32_t crc_hw(uint32_t crc, const uint8_t *p, size_t len)
{
	(void)p;
	(void)len;
	return crc;
}

static bool crc_has_hw(void)
{
	return false;
}
#endif

uint32_t kvc_crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	pthread_once(&crc_once, crc_init);
	crc = ~crc;
	while (len >= 8) {
		/* Assemble little-endian words byte by byte: no alignment
		 * or byte-order assumption, and compilers turn it into one
		 * load on x86 and arm64. */
		uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 |
				     (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
		uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 |
			      (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;

		crc = crc_tab[7][lo & 0xff] ^ crc_tab[6][(lo >> 8) & 0xff] ^
		      crc_tab[5][(lo >> 16) & 0xff] ^ crc_tab[4][lo >> 24] ^
		      crc_tab[3][hi & 0xff] ^ crc_tab[2][(hi >> 8) & 0xff] ^
		      crc_tab[1][(hi >> 16) & 0xff] ^ crc_tab[0][hi >> 24];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = (crc >> 8) ^ crc_tab[0][(crc ^ *p++) & 0xff];
	return ~crc;
}

uint32_t kvc_crc32c(uint32_t crc, const void *buf, size_t len)
{
	if (crc_has_hw())
		return crc_hw(crc, buf, len);
	return kvc_crc32c_sw(crc, buf, len);
}

/* ---- header ------------------------------------------------------------ */

static void put_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p)
{
	uint32_t v = 0;

	for (int i = 3; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint64_t get_u64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/*
 * The rules both directions share. A later block with an all-zero parent
 * is refused too: a SHA-256 output is never all zero in practice, so it
 * can only be a writer that forgot the parent or lost the flag.
 */
static int check_fields(uint32_t flags, const uint8_t *parent,
			uint64_t payload_len)
{
	if (flags & ~KVC_BF_F_FIRST)
		return -EINVAL;
	if (payload_len < 1 || payload_len > KVC_BF_MAX_PAYLOAD)
		return -EINVAL;
	if (!!(flags & KVC_BF_F_FIRST) != all_zero(parent, KVC_BF_KEY_SIZE))
		return -EINVAL;
	return 0;
}

int kvc_bf_encode_header(const struct kvc_bf_header *h,
			 uint8_t out[KVC_BF_HEADER_SIZE])
{
	size_t node_len;
	int err;

	err = check_fields(h->flags, h->parent, h->payload_len);
	if (err)
		return err;
	node_len = strnlen(h->node_id, sizeof(h->node_id));
	if (node_len > KVC_BF_NODE_ID_SIZE)
		return -EINVAL;

	memset(out, 0, KVC_BF_HEADER_SIZE);
	memcpy(out + OFF_MAGIC, kvc_bf_magic, sizeof(kvc_bf_magic));
	put_u32(out + OFF_VERSION, KVC_BF_VERSION);
	put_u32(out + OFF_HDR_SIZE, KVC_BF_HEADER_SIZE);
	put_u32(out + OFF_FLAGS, h->flags);
	put_u32(out + OFF_RESERVED, 0);
	memcpy(out + OFF_KEY, h->key, KVC_BF_KEY_SIZE);
	memcpy(out + OFF_PARENT, h->parent, KVC_BF_KEY_SIZE);
	put_u32(out + OFF_NS_ID, h->ns_id);
	put_u64(out + OFF_PAYLOAD_LEN, h->payload_len);
	put_u32(out + OFF_PAYLOAD_CRC, h->payload_crc);
	put_u64(out + OFF_CTIME, h->ctime_ns);
	memcpy(out + OFF_NODE_ID, h->node_id, node_len);	/* NUL-padded */
	put_u32(out + OFF_HDR_CRC, kvc_crc32c(0, out, OFF_HDR_CRC));
	return 0;
}

int kvc_bf_decode_header(const uint8_t in[KVC_BF_HEADER_SIZE],
			 struct kvc_bf_header *h)
{
	size_t node_len;
	int err;

	/* Cheapest and most telling first: is it a block file at all, of
	 * a version we know, intact? Only then do field values mean
	 * anything. */
	if (memcmp(in + OFF_MAGIC, kvc_bf_magic, sizeof(kvc_bf_magic)))
		return -EPROTO;
	if (get_u32(in + OFF_VERSION) != KVC_BF_VERSION)
		return -EPROTONOSUPPORT;
	if (get_u32(in + OFF_HDR_CRC) != kvc_crc32c(0, in, OFF_HDR_CRC))
		return -EBADMSG;
	if (get_u32(in + OFF_HDR_SIZE) != KVC_BF_HEADER_SIZE ||
	    get_u32(in + OFF_RESERVED) != 0 ||
	    !all_zero(in + OFF_RESERVED2, OFF_PAYLOAD_LEN - OFF_RESERVED2))
		return -EINVAL;
	err = check_fields(get_u32(in + OFF_FLAGS), in + OFF_PARENT,
			   get_u64(in + OFF_PAYLOAD_LEN));
	if (err)
		return err;
	/* Zero tail: so a later version can use it, and a version 1 reader
	 * never silently ignores what a writer meant. */
	if (!all_zero(in + OFF_TAIL, KVC_BF_HEADER_SIZE - OFF_TAIL))
		return -EINVAL;
	node_len = strnlen((const char *)in + OFF_NODE_ID,
			   KVC_BF_NODE_ID_SIZE);
	if (!all_zero(in + OFF_NODE_ID + node_len,
		      KVC_BF_NODE_ID_SIZE - node_len))
		return -EINVAL;

	memset(h, 0, sizeof(*h));
	h->flags = get_u32(in + OFF_FLAGS);
	memcpy(h->key, in + OFF_KEY, KVC_BF_KEY_SIZE);
	memcpy(h->parent, in + OFF_PARENT, KVC_BF_KEY_SIZE);
	h->ns_id = get_u32(in + OFF_NS_ID);
	h->payload_len = get_u64(in + OFF_PAYLOAD_LEN);
	h->payload_crc = get_u32(in + OFF_PAYLOAD_CRC);
	h->ctime_ns = get_u64(in + OFF_CTIME);
	memcpy(h->node_id, in + OFF_NODE_ID, node_len);
	return 0;
}

/* ---- paths ------------------------------------------------------------- */

static void hex(const uint8_t *b, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 0xf];
	}
	out[2 * n] = '\0';
}

static int fits(int n, size_t len)
{
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int kvc_bf_path(const char *dir, const uint8_t key[KVC_BF_KEY_SIZE],
		char *out, size_t len)
{
	char kh[2 * KVC_BF_KEY_SIZE + 1];

	hex(key, KVC_BF_KEY_SIZE, kh);
	return fits(snprintf(out, len, "%s/%.2s/%.2s/%s.kvb", dir, kh,
			     kh + 2, kh), len);
}

static int unhex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

int kvc_bf_parse_name(const char *name, uint8_t key[KVC_BF_KEY_SIZE])
{
	if (strlen(name) != 2 * KVC_BF_KEY_SIZE + 4 ||
	    strcmp(name + 2 * KVC_BF_KEY_SIZE, ".kvb"))
		return -EINVAL;
	for (int i = 0; i < KVC_BF_KEY_SIZE; i++) {
		int hi = unhex(name[2 * i]), lo = unhex(name[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -EINVAL;
		key[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/*
 * fsync a directory, so that the entries created or removed in it
 * survive a crash. Some FUSE filesystems refuse fsync on a directory with
 * EINVAL: nothing more can be done there, so that is not an error.
 */
int kvc_bf_fsync_dir(const char *path)
{
	int fd, err = 0;

	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fsync(fd) && errno != EINVAL)
		err = -errno;
	close(fd);
	return err;
}

int kvc_bf_fsync_dir_of(const char *file)
{
	char d[PATH_MAX];
	char *slash;

	if (fits(snprintf(d, sizeof(d), "%s", file), sizeof(d)))
		return -ENAMETOOLONG;
	slash = strrchr(d, '/');
	if (!slash)
		return kvc_bf_fsync_dir(".");
	*slash = '\0';
	return kvc_bf_fsync_dir(d[0] ? d : "/");
}

/* mkdir that accepts an existing directory; a new one is made durable
 * in its parent. */
static int mkdir_one(const char *path, const char *parent)
{
	if (mkdir(path, KVC_BF_DIR_MODE) == 0) {
		/* The umask must not take the readers' search bit away. */
		if (chmod(path, KVC_BF_DIR_MODE))
			return -errno;
		return kvc_bf_fsync_dir(parent);
	}
	return errno == EEXIST ? 0 : -errno;
}

/* ---- file images ------------------------------------------------------- */

uint64_t kvc_bf_file_size(uint64_t payload_len)
{
	return KVC_BF_HEADER_SIZE +
	       ((payload_len + KVC_BF_ALIGN - 1) & ~(uint64_t)(KVC_BF_ALIGN - 1));
}

int kvc_bf_build(struct kvc_bf_header *h, uint8_t *image)
{
	uint64_t len = h->payload_len, size;
	int err;

	if (len < 1 || len > KVC_BF_MAX_PAYLOAD)
		return -EINVAL;
	size = kvc_bf_file_size(len);
	h->payload_crc = kvc_crc32c(0, image + KVC_BF_HEADER_SIZE,
				    (size_t)len);
	if (!h->ctime_ns)
		h->ctime_ns = now_ns();
	err = kvc_bf_encode_header(h, image);
	if (err)
		return err;
	memset(image + KVC_BF_HEADER_SIZE + len, 0,
	       (size_t)(size - KVC_BF_HEADER_SIZE - len));
	return 0;
}

int kvc_bf_check_split(const uint8_t hdr[KVC_BF_HEADER_SIZE],
		       const uint8_t *payload, uint64_t size,
		       const uint8_t key[KVC_BF_KEY_SIZE],
		       struct kvc_bf_header *h)
{
	uint64_t len;
	int err;

	if (size < KVC_BF_HEADER_SIZE)
		return -EBADMSG;
	err = kvc_bf_decode_header(hdr, h);
	if (err)
		return err;
	len = h->payload_len;
	/* A file under another key's name, cut short or extended. */
	if (memcmp(h->key, key, KVC_BF_KEY_SIZE) ||
	    size != kvc_bf_file_size(len))
		return -EBADMSG;
	if (kvc_crc32c(0, payload, (size_t)len) != h->payload_crc)
		return -EBADMSG;
	/* The padding is outside the CRC: zero, or the file is not ours. */
	if (!all_zero(payload + len, (size_t)(size - KVC_BF_HEADER_SIZE - len)))
		return -EBADMSG;
	return 0;
}

int kvc_bf_check(const uint8_t *image, uint64_t size,
		 const uint8_t key[KVC_BF_KEY_SIZE], struct kvc_bf_header *h)
{
	return kvc_bf_check_split(image, image + KVC_BF_HEADER_SIZE, size,
				  key, h);
}

/* ---- publication ------------------------------------------------------- */

int kvc_bf_paths(const char *dir, const uint8_t key[KVC_BF_KEY_SIZE],
		 const char *tmp_tag, char *final, char *tmp, size_t len)
{
	static atomic_uint tmp_seq;
	char kh[2 * KVC_BF_KEY_SIZE + 1];
	size_t tag_len;
	int err;

	tag_len = tmp_tag ? strnlen(tmp_tag, KVC_BF_MAX_TAG + 1) : 0;
	if (tag_len < 1 || tag_len > KVC_BF_MAX_TAG || strchr(tmp_tag, '/'))
		return -EINVAL;
	hex(key, KVC_BF_KEY_SIZE, kh);
	err = fits(snprintf(final, len, "%s/%.2s/%.2s/%s.kvb", dir, kh,
			    kh + 2, kh), len);
	/* Tag (the node), pid and a counter: unique across nodes, processes
	 * and threads; the key makes a leftover easy to attribute. */
	if (!err)
		err = fits(snprintf(tmp, len, "%s/%.2s/%.2s/.tmp.%s.%ld.%u.%s",
				    dir, kh, kh + 2, tmp_tag, (long)getpid(),
				    atomic_fetch_add(&tmp_seq, 1), kh), len);
	return err;
}

int kvc_bf_prepare(const char *dir, const uint8_t key[KVC_BF_KEY_SIZE],
		   const char *tmp_tag, char *final, char *tmp, size_t len)
{
	char d1[PATH_MAX], d2[PATH_MAX];
	struct stat st;
	int err = kvc_bf_paths(dir, key, tmp_tag, final, tmp, len);

	if (err)
		return err;
	/* The fan-out directories: the final path up to its last two '/'. */
	snprintf(d2, sizeof(d2), "%s", final);
	*strrchr(d2, '/') = '\0';
	snprintf(d1, sizeof(d1), "%s", d2);
	*strrchr(d1, '/') = '\0';
	err = mkdir_one(d1, dir);
	if (!err)
		err = mkdir_one(d2, d1);
	if (err)
		return err;
	/* Already there: skip writing up to 4 GiB to find out at link. */
	return lstat(final, &st) == 0 ? -EEXIST : 0;
}

/*
 * O_EXCL: a name already there is a leftover of a crashed writer with the
 * same tag, pid and counter (a name is ours by construction), so it is
 * removed and the create tried once more.
 */
int kvc_bf_open_tmp(const char *tmp, bool *direct)
{
	int base = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC;

	*direct = false;
	for (int tries = 0; tries < 2; tries++) {
		int fd = open(tmp, base | O_DIRECT, KVC_BF_FILE_MODE);

		if (fd < 0 && errno == EINVAL)	/* no O_DIRECT here */
			fd = open(tmp, base, KVC_BF_FILE_MODE);
		else if (fd >= 0)
			*direct = true;
		/* Its mode whatever the umask (a file read by tenants). */
		if (fd >= 0 && fchmod(fd, KVC_BF_FILE_MODE)) {
			int err = -errno;

			close(fd);
			unlink(tmp);
			return err;
		}
		if (fd >= 0)
			return fd;
		if (errno != EEXIST || tries)
			return -errno;
		if (unlink(tmp) && errno != ENOENT)
			return -errno;
	}
	return -EEXIST;
}

int kvc_bf_install(const char *tmp, const char *final)
{
	struct stat st;
	bool linked = false;
	int err = 0;

	if (link(tmp, final) == 0) {
		linked = true;
	} else {
		err = -errno;
		/* NFS: a retransmitted LINK whose first try succeeded
		 * answers with an error; the link count tells the truth
		 * (open(2)'s advice). */
		if (err != -EEXIST && stat(tmp, &st) == 0 &&
		    st.st_nlink == 2) {
			linked = true;
			err = 0;
		} else if (err == -EPERM || err == -EOPNOTSUPP ||
			   err == -ENOSYS || err == -EMLINK) {
			/* No hard links here (some FUSE and object-store
			 * gateways): a rename that refuses to replace is as
			 * good, and leaves no temp name behind. */
			err = renameat2(AT_FDCWD, tmp, AT_FDCWD, final,
					RENAME_NOREPLACE) ? -errno : 0;
			if (!err)
				return 0;
		}
	}
	if (linked || err)
		unlink(tmp);
	return err;
}

static int write_all(int fd, const uint8_t *buf, size_t n, uint64_t off)
{
	while (n) {
		ssize_t w = pwrite(fd, buf, n, (off_t)off);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (w == 0)
			return -EIO;
		buf += w;
		n -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

static int write_tmp(const char *tmp, const uint8_t *image, uint64_t size)
{
	bool direct;
	int fd, err;

	fd = kvc_bf_open_tmp(tmp, &direct);
	if (fd < 0)
		return fd;
	err = write_all(fd, image, (size_t)size, 0);
	if (err == -EINVAL && direct) {
		/* The open took O_DIRECT but the write did not (a device
		 * with larger sectors, a filesystem that checks late):
		 * start over buffered. */
		if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_DIRECT) ||
		    ftruncate(fd, 0))
			err = -errno;
		else
			err = write_all(fd, image, (size_t)size, 0);
	}
	if (!err && fsync(fd))
		err = -errno;
	/* Closed before the link: on NFS, an open file that gets unlinked
	 * is renamed to .nfsXXXX instead of going away. */
	if (close(fd) && !err)
		err = -errno;
	if (err)
		unlink(tmp);
	return err;
}

int kvc_bf_publish(const char *dir, const struct kvc_bf_header *h,
		   const void *payload, const char *tmp_tag)
{
	char final[PATH_MAX], tmp[PATH_MAX];
	struct kvc_bf_header copy = *h;
	uint8_t *image;
	uint64_t size;
	void *mem;
	int err;

	if (!payload || h->payload_len < 1 ||
	    h->payload_len > KVC_BF_MAX_PAYLOAD)
		return -EINVAL;
	/* Refuse a bad header before touching the directory. */
	copy.payload_crc = 0;
	err = kvc_bf_encode_header(&copy, (uint8_t[KVC_BF_HEADER_SIZE]){ 0 });
	if (err)
		return err;
	err = kvc_bf_prepare(dir, h->key, tmp_tag, final, tmp, PATH_MAX);
	if (err)
		return err;
	size = kvc_bf_file_size(h->payload_len);
	if (size > SIZE_MAX || posix_memalign(&mem, KVC_BF_ALIGN, (size_t)size))
		return -ENOMEM;
	image = mem;
	memcpy(image + KVC_BF_HEADER_SIZE, payload, (size_t)h->payload_len);
	err = kvc_bf_build(&copy, image);
	if (!err)
		err = write_tmp(tmp, image, size);
	free(mem);
	if (!err)
		err = kvc_bf_install(tmp, final);
	/* Both the new name and the temp's removal must survive a crash. */
	return err ? err : kvc_bf_fsync_dir_of(final);
}

/* ---- read -------------------------------------------------------------- */

/* Read exactly @n bytes; end of file before that is a short file. */
static int read_all(int fd, uint8_t *buf, size_t n, uint64_t off)
{
	while (n) {
		ssize_t r = pread(fd, buf, n, (off_t)off);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -EBADMSG;
		buf += r;
		n -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

int kvc_bf_read_header_at(int dirfd, const char *name,
			  struct kvc_bf_header *h, struct stat *st)
{
	uint8_t hdr[KVC_BF_HEADER_SIZE];
	int fd, err;

	/* O_NONBLOCK: a FIFO planted under a block's name must not hang
	 * the open (it fails the S_ISREG check below). */
	fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW |
		    O_NONBLOCK);
	if (fd < 0)
		return errno == ELOOP ? -EBADMSG : -errno;
	if (fstat(fd, st)) {
		err = -errno;
	} else if (!S_ISREG(st->st_mode) || st->st_size < KVC_BF_HEADER_SIZE) {
		err = -EBADMSG;
	} else {
		err = read_all(fd, hdr, sizeof(hdr), 0);
		if (!err)
			err = kvc_bf_decode_header(hdr, h);
		if (!err && (uint64_t)st->st_size !=
			    kvc_bf_file_size(h->payload_len))
			err = -EBADMSG;
	}
	close(fd);
	return err;
}

int kvc_bf_read_header(const char *path, struct kvc_bf_header *h,
		       struct stat *st)
{
	return kvc_bf_read_header_at(AT_FDCWD, path, h, st);
}

int kvc_bf_read(const char *dir, const uint8_t key[KVC_BF_KEY_SIZE],
		struct kvc_bf_header *h, void *payload, size_t cap)
{
	char path[PATH_MAX];
	struct stat st;
	uint64_t size;
	void *mem = NULL;
	int fd, err;

	err = kvc_bf_path(dir, key, path, sizeof(path));
	if (err)
		return err;
	err = kvc_bf_read_header(path, h, &st);
	size = (uint64_t)st.st_size;
	if (err)
		return err;
	if (memcmp(h->key, key, KVC_BF_KEY_SIZE))
		return -EBADMSG;
	if (h->payload_len > cap)
		return -ENOSPC;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (size > SIZE_MAX || posix_memalign(&mem, KVC_BF_ALIGN, (size_t)size))
		err = -ENOMEM;
	else
		err = read_all(fd, mem, (size_t)size, 0);
	/* Checked again as a whole: the file may have changed since. */
	if (!err)
		err = kvc_bf_check(mem, size, key, h);
	if (!err)
		memcpy(payload, (uint8_t *)mem + KVC_BF_HEADER_SIZE,
		       (size_t)h->payload_len);
	free(mem);
	close(fd);
	return err;
}

int kvc_bf_quarantine(const char *root, const char *sub,
		      const uint8_t key[KVC_BF_KEY_SIZE], uid_t owner)
{
	char kh[2 * KVC_BF_KEY_SIZE + 1], name[2 * KVC_BF_KEY_SIZE + 5];
	char leaf[PATH_MAX], qname[NAME_MAX + 1];
	int rootfd, leaffd = -1, qfd = -1, err;

	hex(key, KVC_BF_KEY_SIZE, kh);
	err = fits(snprintf(leaf, sizeof(leaf), "%s/%.2s/%.2s", sub, kh,
			    kh + 2), sizeof(leaf));
	if (!err && strchr(sub, '/'))
		err = -EINVAL;
	if (!err)
		err = fits(snprintf(qname, sizeof(qname), "%s.%s.%llu", sub, kh,
				    (unsigned long long)now_ns()),
			   sizeof(qname));
	if (err)
		return err;
	rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return -errno;
	leaffd = kvc_open_beneath(rootfd, leaf, O_RDONLY | O_DIRECTORY |
				  O_CLOEXEC, 0);
	if (leaffd < 0) {
		err = leaffd;
		goto out;
	}
	qfd = kvc_private_dir(rootfd, KVC_BF_QUARANTINE_DIR, owner);
	if (qfd < 0) {
		err = qfd;
		goto out;
	}
	snprintf(name, sizeof(name), "%s.kvb", kh);
	if (renameat(leaffd, name, qfd, qname)) {
		err = -errno;
		goto out;
	}
	/* The removal from the fan-out directory matters most: a crash
	 * must not bring the corrupt file back at its final path. */
	if (fsync(leaffd) && errno != EINVAL)
		err = -errno;
	else if (fsync(qfd) && errno != EINVAL)
		err = -errno;
out:
	if (qfd >= 0)
		close(qfd);
	if (leaffd >= 0)
		close(leaffd);
	close(rootfd);
	return err;
}
