// SPDX-License-Identifier: GPL-2.0
/*
 * Host tests for helper/common/blockfile.c: CRC32C against the standard vectors
 * (the check value and RFC 3720's iSCSI vectors), the header's golden
 * bytes (its checksum computed independently, with a bit-at-a-time
 * CRC32C in Python), every decode error, the path scheme, and the file
 * protocol in a temporary directory: publish then read, idempotent
 * publication, truncation, bit flips, a file under the wrong name,
 * quarantine, and a directory the writer may not write.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "blockfile.h"
#include "tap.h"
#include "scratch.h"

/* base/ns1: a tier's directory and a namespace's, as kvcached lays them. */
static char base[64], tmpdir[96];

static void fill_key(uint8_t *k, uint8_t start)
{
	for (int i = 0; i < KVC_BF_KEY_SIZE; i++)
		k[i] = (uint8_t)(start + i);
}

/* The fixed header of the golden test: every field distinct. */
static void fixed_header(struct kvc_bf_header *h)
{
	memset(h, 0, sizeof(*h));
	h->flags = 0;
	fill_key(h->key, 0x00);
	fill_key(h->parent, 0x20);
	h->ns_id = 0x44434241;
	h->payload_len = 0x10000;
	h->payload_crc = 0xdeadbeef;
	h->ctime_ns = 0x0102030405060708ULL;
	strcpy(h->node_id, "node-a");
}

/* Recompute the header checksum after editing a field behind its back. */
static void reseal(uint8_t *b)
{
	uint32_t c = kvc_crc32c(0, b, 204);

	for (int i = 0; i < 4; i++)
		b[204 + i] = (uint8_t)(c >> (8 * i));
}

static void crc32c_vectors(void)
{
	uint8_t buf[32];

	TAP_CHECK(kvc_crc32c(0, "123456789", 9) == 0xE3069283);
	TAP_CHECK(kvc_crc32c(0, "", 0) == 0);
	/* Continuing from a previous value equals one pass. */
	TAP_CHECK(kvc_crc32c(kvc_crc32c(0, "12345", 5), "6789", 4) ==
		  0xE3069283);
	/* RFC 3720, B.4. */
	memset(buf, 0, sizeof(buf));
	TAP_CHECK(kvc_crc32c(0, buf, 32) == 0x8A9136AA);
	memset(buf, 0xff, sizeof(buf));
	TAP_CHECK(kvc_crc32c(0, buf, 32) == 0x62A8AB43);
	for (int i = 0; i < 32; i++)
		buf[i] = (uint8_t)i;
	TAP_CHECK(kvc_crc32c(0, buf, 32) == 0x46DD794E);
	for (int i = 0; i < 32; i++)
		buf[i] = (uint8_t)(31 - i);
	TAP_CHECK(kvc_crc32c(0, buf, 32) == 0x113FDB5C);
	/* Unaligned start and odd lengths go through the same tables. */
	for (int i = 0; i < 32; i++)
		buf[i] = (uint8_t)i;
	for (size_t off = 0; off < 8; off++)
		TAP_CHECK(kvc_crc32c(kvc_crc32c(0, buf, off), buf + off,
				     32 - off) == 0x46DD794E);
}

/* The SSE 4.2 path and the tables agree, at every length and offset. */
static void crc32c_hw_matches_sw(void)
{
	uint8_t buf[4096 + 64];

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 2654435761U >> 13);
	for (size_t off = 0; off < 16; off++)
		for (size_t len = 0; len < sizeof(buf) - 16; len += 1 + len / 3)
			if (kvc_crc32c(0x1234, buf + off, len) !=
			    kvc_crc32c_sw(0x1234, buf + off, len)) {
				TAP_CHECK(!"hardware and table CRC differ");
				printf("# off %zu len %zu\n", off, len);
				return;
			}
	TAP_CHECK(kvc_crc32c_sw(0, "123456789", 9) == 0xE3069283);
}

static void names_parse(void)
{
	uint8_t key[32], back[32];
	char path[256];

	fill_key(key, 0xf0);
	TAP_CHECK(kvc_bf_path("/d", key, path, sizeof(path)) == 0);
	TAP_CHECK(kvc_bf_parse_name(strrchr(path, '/') + 1, back) == 0);
	TAP_CHECK(memcmp(key, back, 32) == 0);
	TAP_CHECK(kvc_bf_parse_name(".tmp.a.1.2.f0f1", back) == -EINVAL);
	TAP_CHECK(kvc_bf_parse_name("quarantine", back) == -EINVAL);
	path[strlen(path) - 5] = 'G';	/* not hex */
	TAP_EXPECT_EQ(kvc_bf_parse_name(strrchr(path, '/') + 1, back), -EINVAL);
	TAP_CHECK(kvc_bf_parse_name("", back) == -EINVAL);
	TAP_CHECK(kvc_bf_file_size(1) == 8192);
	TAP_CHECK(kvc_bf_file_size(4096) == 8192);
	TAP_CHECK(kvc_bf_file_size(4097) == 12288);
}

static void header_golden_and_round_trip(void)
{
	static const uint8_t golden[64] = {
		'K', 'V', 'C', 'B', 'L', 'K', 0x00, 0x01,	/* magic */
		0x01, 0x00, 0x00, 0x00,				/* version */
		0x00, 0x10, 0x00, 0x00,				/* 4096 */
		0x00, 0x00, 0x00, 0x00,				/* flags */
		0x00, 0x00, 0x00, 0x00,				/* reserved */
		0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,	/* key */
		0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
		0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17,
		0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,
		0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27,	/* parent */
	};
	static const uint8_t golden_tail[] = {	/* bytes 120..139 */
		0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00,	/* len */
		0xef, 0xbe, 0xad, 0xde,				/* crc */
		0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,	/* ctime */
	};
	struct kvc_bf_header h, back;
	uint8_t b[KVC_BF_HEADER_SIZE];
	int zero_tail = 1;

	fixed_header(&h);
	TAP_CHECK(kvc_bf_encode_header(&h, b) == 0);
	TAP_CHECK(memcmp(b, golden, sizeof(golden)) == 0);
	TAP_CHECK(b[88] == 0x41 && b[91] == 0x44);	/* namespace id */
	for (int i = 92; i < 120; i++)			/* reserved */
		if (b[i])
			zero_tail = 0;
	TAP_CHECK(memcmp(b + 120, golden_tail, sizeof(golden_tail)) == 0);
	TAP_CHECK(memcmp(b + 140, "node-a", 7) == 0 && b[203] == 0);
	/* Header checksum, little-endian at 204 (computed in Python). */
	TAP_CHECK(b[204] == 0x8d && b[205] == 0xf7 && b[206] == 0x05 &&
		  b[207] == 0x3f);
	for (int i = 208; i < KVC_BF_HEADER_SIZE; i++)
		if (b[i])
			zero_tail = 0;
	TAP_CHECK(zero_tail);

	memset(&back, 0xaa, sizeof(back));
	TAP_CHECK(kvc_bf_decode_header(b, &back) == 0);
	TAP_CHECK(back.flags == h.flags);
	TAP_CHECK(memcmp(back.key, h.key, 32) == 0);
	TAP_CHECK(memcmp(back.parent, h.parent, 32) == 0);
	TAP_CHECK(back.ns_id == h.ns_id);
	TAP_CHECK(back.payload_len == h.payload_len);
	TAP_CHECK(back.payload_crc == h.payload_crc);
	TAP_CHECK(back.ctime_ns == h.ctime_ns);
	TAP_CHECK(strcmp(back.node_id, "node-a") == 0);

	/* A first block, the largest payload, a 64-character node name. */
	h.flags = KVC_BF_F_FIRST;
	memset(h.parent, 0, sizeof(h.parent));
	h.payload_len = KVC_BF_MAX_PAYLOAD;
	memset(h.node_id, 'n', KVC_BF_NODE_ID_SIZE);
	TAP_CHECK(kvc_bf_encode_header(&h, b) == 0);
	TAP_CHECK(kvc_bf_decode_header(b, &back) == 0);
	TAP_CHECK(back.flags == KVC_BF_F_FIRST);
	TAP_CHECK(back.payload_len == KVC_BF_MAX_PAYLOAD);
	TAP_CHECK(strlen(back.node_id) == KVC_BF_NODE_ID_SIZE);
}

static void encode_errors(void)
{
	struct kvc_bf_header h;
	uint8_t b[KVC_BF_HEADER_SIZE];

	fixed_header(&h);
	h.flags = 2;
	TAP_EXPECT_EQ(kvc_bf_encode_header(&h, b), -EINVAL);
	fixed_header(&h);
	h.payload_len = 0;
	TAP_EXPECT_EQ(kvc_bf_encode_header(&h, b), -EINVAL);
	h.payload_len = KVC_BF_MAX_PAYLOAD + 1;
	TAP_EXPECT_EQ(kvc_bf_encode_header(&h, b), -EINVAL);
	fixed_header(&h);
	h.flags = KVC_BF_F_FIRST;	/* with a parent */
	TAP_EXPECT_EQ(kvc_bf_encode_header(&h, b), -EINVAL);
	fixed_header(&h);
	memset(h.parent, 0, sizeof(h.parent));	/* later block, no parent */
	TAP_EXPECT_EQ(kvc_bf_encode_header(&h, b), -EINVAL);
	fixed_header(&h);
	memset(h.node_id, 'n', sizeof(h.node_id));	/* no NUL */
	TAP_EXPECT_EQ(kvc_bf_encode_header(&h, b), -EINVAL);
}

static void decode_errors(void)
{
	struct kvc_bf_header h;
	uint8_t good[KVC_BF_HEADER_SIZE], b[KVC_BF_HEADER_SIZE];

	fixed_header(&h);
	TAP_CHECK(kvc_bf_encode_header(&h, good) == 0);

	memcpy(b, good, sizeof(b));
	b[0] = 'X';
	TAP_EXPECT_EQ(kvc_bf_decode_header(b, &h), -EPROTO);
	memcpy(b, good, sizeof(b));
	b[7] = 2;		/* the magic's last byte is part of it */
	TAP_EXPECT_EQ(kvc_bf_decode_header(b, &h), -EPROTO);

	memcpy(b, good, sizeof(b));
	b[8] = 2;
	reseal(b);
	TAP_EXPECT_EQ(kvc_bf_decode_header(b, &h), -EPROTONOSUPPORT);
	b[8] = 2;		/* even without a valid checksum */
	b[30] ^= 1;
	TAP_EXPECT_EQ(kvc_bf_decode_header(b, &h), -EPROTONOSUPPORT);

	/* Any bit of the checked range, and the checksum itself. */
	for (int i = 8 * 8 + 32; i < 204 * 8; i += 37) {
		memcpy(b, good, sizeof(b));
		b[i / 8] ^= (uint8_t)(1 << (i % 8));
		if (kvc_bf_decode_header(b, &h) != -EBADMSG) {
			TAP_CHECK(!"bit flip not caught");
			printf("# bit %d\n", i);
			break;
		}
	}
	memcpy(b, good, sizeof(b));
	b[207] ^= 0x80;
	TAP_EXPECT_EQ(kvc_bf_decode_header(b, &h), -EBADMSG);

	memcpy(b, good, sizeof(b));
	b[13] = 0x20;		/* header size 8192 */
	reseal(b);
	TAP_EXPECT_EQ(kvc_bf_decode_header(b, &h), -EINVAL);
	memcpy(b, good, sizeof(b));
	b[20] = 1;		/* reserved */
	reseal(b);
	TAP_EXPECT_EQ(kvc_bf_decode_header(b, &h), -EINVAL);
	memcpy(b, good, sizeof(b));
	b[100] = 1;		/* reserved, after the namespace id */
	reseal(b);
	TAP_EXPECT_EQ(kvc_bf_decode_header(b, &h), -EINVAL);
	memcpy(b, good, sizeof(b));
	b[16] = 2;		/* unknown flag */
	reseal(b);
	TAP_EXPECT_EQ(kvc_bf_decode_header(b, &h), -EINVAL);
	memcpy(b, good, sizeof(b));
	b[19] = 0x80;
	reseal(b);
	TAP_EXPECT_EQ(kvc_bf_decode_header(b, &h), -EINVAL);
	memcpy(b, good, sizeof(b));
	b[16] = 1;		/* first block, parent not zero */
	reseal(b);
	TAP_EXPECT_EQ(kvc_bf_decode_header(b, &h), -EINVAL);
	memcpy(b, good, sizeof(b));
	memset(b + 56, 0, 32);	/* later block, parent zero */
	reseal(b);
	TAP_EXPECT_EQ(kvc_bf_decode_header(b, &h), -EINVAL);
	memcpy(b, good, sizeof(b));
	memset(b + 120, 0, 8);	/* payload length 0 */
	reseal(b);
	TAP_EXPECT_EQ(kvc_bf_decode_header(b, &h), -EINVAL);
	memcpy(b, good, sizeof(b));
	memset(b + 120, 0, 8);
	b[124] = 1;		/* 2^32 is the largest */
	reseal(b);
	TAP_CHECK(kvc_bf_decode_header(b, &h) == 0);
	b[120] = 1;		/* 2^32 + 1 */
	reseal(b);
	TAP_EXPECT_EQ(kvc_bf_decode_header(b, &h), -EINVAL);
	memcpy(b, good, sizeof(b));
	b[127] = 0x80;
	reseal(b);
	TAP_EXPECT_EQ(kvc_bf_decode_header(b, &h), -EINVAL);
	memcpy(b, good, sizeof(b));
	b[150] = 'x';		/* after the node id's NUL */
	reseal(b);
	TAP_EXPECT_EQ(kvc_bf_decode_header(b, &h), -EINVAL);
	/* The tail is outside the checksum but must be zero. */
	memcpy(b, good, sizeof(b));
	b[208] = 1;
	TAP_EXPECT_EQ(kvc_bf_decode_header(b, &h), -EINVAL);
	memcpy(b, good, sizeof(b));
	b[KVC_BF_HEADER_SIZE - 1] = 0x40;
	TAP_EXPECT_EQ(kvc_bf_decode_header(b, &h), -EINVAL);
}

static void path_format(void)
{
	uint8_t key[32];
	char out[256], small[80];
	const char *want = "/d/ab/cd/abcdef00000000000000000000000000"
			   "000000000000000000000000000000ff.kvb";

	memset(key, 0, sizeof(key));
	key[0] = 0xab;
	key[1] = 0xcd;
	key[2] = 0xef;
	key[31] = 0xff;
	TAP_CHECK(kvc_bf_path("/d", key, out, sizeof(out)) == 0);
	TAP_CHECK(strcmp(out, want) == 0);
	TAP_CHECK(strlen(want) == 2 + 6 + 64 + 4 + 1);
	/* Exactly fits (with its NUL), one byte short. */
	TAP_CHECK(kvc_bf_path("/d", key, small, strlen(want) + 1) == 0);
	TAP_CHECK(kvc_bf_path("/d", key, small, strlen(want)) ==
		  -ENAMETOOLONG);
	TAP_CHECK(kvc_bf_path("/d", key, small, 0) == -ENAMETOOLONG);
}

/* ---- files ------------------------------------------------------------- */

static void make_header(struct kvc_bf_header *h, uint8_t keystart,
			uint64_t len)
{
	memset(h, 0, sizeof(*h));
	fill_key(h->key, keystart);
	h->flags = KVC_BF_F_FIRST;
	h->ns_id = 7;
	h->payload_len = len;
	strcpy(h->node_id, "test-node");
}

static uint8_t *pattern(size_t len, unsigned int seed)
{
	uint8_t *p = malloc(len);

	for (size_t i = 0; p && i < len; i++)
		p[i] = (uint8_t)((i * 2654435761U + seed) >> 7);
	return p;
}

/* Entries of @d whose names start with ".tmp.". */
static int count_tmp(const char *d)
{
	DIR *dp = opendir(d);
	struct dirent *e;
	int n = 0;

	if (!dp)
		return -1;
	while ((e = readdir(dp)))
		if (!strncmp(e->d_name, ".tmp.", 5))
			n++;
	closedir(dp);
	return n;
}

static int count_entries(const char *d)
{
	DIR *dp = opendir(d);
	struct dirent *e;
	int n = 0;

	if (!dp)
		return -1;
	while ((e = readdir(dp)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(dp);
	return n;
}

static void fan_dir(const uint8_t *key, char *out, size_t len)
{
	snprintf(out, len, "%s/%02x/%02x", tmpdir, key[0], key[1]);
}

static void publish_then_read(void)
{
	static const size_t sizes[] = { 1, 4095, 4096, 65536 + 3 };

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct kvc_bf_header h, got;
		size_t len = sizes[i];
		uint8_t *p = pattern(len, (unsigned int)i);
		uint8_t *q = malloc(len + 1);
		char path[512];
		struct stat st;

		TAP_ASSERT_TRUE(p && q);
		make_header(&h, (uint8_t)(0x10 * i), len);
		if (i == 3) {	/* a later block of a chain */
			h.flags = 0;
			fill_key(h.parent, 0x77);
		}
		TAP_CHECK(kvc_bf_publish(tmpdir, &h, p, "node-a") == 0);
		TAP_CHECK(kvc_bf_path(tmpdir, h.key, path, sizeof(path)) == 0);
		TAP_CHECK(stat(path, &st) == 0);
		TAP_CHECK((uint64_t)st.st_size == kvc_bf_file_size(len));
		TAP_CHECK(st.st_size % 4096 == 0);

		memset(q, 0, len + 1);
		TAP_CHECK(kvc_bf_read(tmpdir, h.key, &got, q, len) == 0);
		TAP_CHECK(memcmp(p, q, len) == 0);
		TAP_CHECK(q[len] == 0);
		TAP_CHECK(got.payload_len == len);
		TAP_CHECK(got.payload_crc == kvc_crc32c(0, p, len));
		TAP_CHECK(got.flags == h.flags);
		TAP_CHECK(memcmp(got.parent, h.parent, 32) == 0);
		TAP_CHECK(got.ns_id == 7);
		TAP_CHECK(got.ctime_ns != 0);	/* filled in */
		TAP_CHECK(strcmp(got.node_id, "test-node") == 0);

		/* Too small a buffer: -ENOSPC, and the length to retry. */
		memset(&got, 0, sizeof(got));
		TAP_CHECK(kvc_bf_read(tmpdir, h.key, &got, q, len - 1) ==
			  -ENOSPC);
		TAP_CHECK(got.payload_len == len);
		free(p);
		free(q);
	}
}

/*
 * The modes of a published block and its fan-out directories are what
 * blockfile.h says whatever the umask: readers of the namespace open the
 * files themselves, so a umask of 077 must not make them root's alone.
 */
static void modes_whatever_the_umask(void)
{
	static const mode_t masks[] = { 022, 077, 0 };
	uint8_t *p = pattern(4096, 9);
	char dir[128];

	/* A directory of its own: the other tests count .quarantine/. */
	snprintf(dir, sizeof(dir), "%s/ns2", base);
	TAP_CHECK(p != NULL && mkdir(dir, 0755) == 0);
	for (size_t i = 0; p && i < sizeof(masks) / sizeof(masks[0]); i++) {
		struct kvc_bf_header h;
		char path[512], d[512];
		struct stat st;
		mode_t old;

		make_header(&h, (uint8_t)(0xe1 + 2 * i), 4096);
		old = umask(masks[i]);
		TAP_CHECK(kvc_bf_publish(dir, &h, p, "node-m") == 0);
		umask(old);
		TAP_CHECK(kvc_bf_path(dir, h.key, path, sizeof(path)) == 0);
		TAP_CHECK(stat(path, &st) == 0 &&
			  (st.st_mode & 07777) == KVC_BF_FILE_MODE);
		snprintf(d, sizeof(d), "%s/%02x/%02x", dir, h.key[0], h.key[1]);
		TAP_CHECK(stat(d, &st) == 0 &&
			  (st.st_mode & 07777) == KVC_BF_DIR_MODE);
		*strrchr(d, '/') = '\0';
		TAP_CHECK(stat(d, &st) == 0 &&
			  (st.st_mode & 07777) == KVC_BF_DIR_MODE);
		if (i == 1) {	/* .quarantine/: kvcached's alone */
			old = umask(0);
			TAP_CHECK(kvc_bf_quarantine(base, "ns2", h.key,
						    (uid_t)-1) == 0);
			umask(old);
			snprintf(d, sizeof(d), "%s/.quarantine", base);
			TAP_CHECK(stat(d, &st) == 0 &&
				  (st.st_mode & 07777) == 0700);
		}
	}
	free(p);
}

static void publish_is_idempotent(void)
{
	struct kvc_bf_header h, got;
	uint8_t p[100], q[100];
	char d2[512];

	make_header(&h, 0xa0, sizeof(p));
	memset(p, 1, sizeof(p));
	TAP_CHECK(kvc_bf_publish(tmpdir, &h, p, "node-a") == 0);
	/* Another node publishes different bytes: the first copy stays. */
	memset(p, 2, sizeof(p));
	TAP_CHECK(kvc_bf_publish(tmpdir, &h, p, "node-b") == -EEXIST);
	TAP_CHECK(kvc_bf_publish(tmpdir, &h, p, "node-a") == -EEXIST);
	TAP_CHECK(kvc_bf_read(tmpdir, h.key, &got, q, sizeof(q)) == 0);
	TAP_CHECK(q[0] == 1 && q[99] == 1);
	fan_dir(h.key, d2, sizeof(d2));
	TAP_CHECK(count_tmp(d2) == 0);
	TAP_CHECK(count_entries(d2) == 1);

	/* Bad arguments. */
	TAP_CHECK(kvc_bf_publish(tmpdir, &h, p, "") == -EINVAL);
	TAP_EXPECT_EQ(kvc_bf_publish(tmpdir, &h, p, NULL), -EINVAL);
	TAP_CHECK(kvc_bf_publish(tmpdir, &h, p, "a/b") == -EINVAL);
	h.payload_len = 0;
	TAP_CHECK(kvc_bf_publish(tmpdir, &h, p, "node-a") == -EINVAL);
	TAP_CHECK(count_tmp(d2) == 0);
	/* The base directory is not created. */
	make_header(&h, 0xb0, sizeof(p));
	TAP_CHECK(kvc_bf_publish("/nonexistent-kvc-dir", &h, p, "n") ==
		  -ENOENT);
}

/* Publish a block of @len bytes with key @ks; return its path in @path. */
static int put(uint8_t ks, size_t len, char *path, size_t plen)
{
	struct kvc_bf_header h;
	uint8_t *p = pattern(len, ks);
	int err;

	if (!p)
		return -ENOMEM;
	make_header(&h, ks, len);
	err = kvc_bf_publish(tmpdir, &h, p, "node-a");
	free(p);
	if (!err)
		err = kvc_bf_path(tmpdir, h.key, path, plen);
	return err;
}

/* The fan-out directories of key's file in tmpdir, as a publish makes. */
static void make_fanout(const uint8_t *key)
{
	char d[PATH_MAX];

	snprintf(d, sizeof(d), "%s/%02x", tmpdir, key[0]);
	mkdir(d, 0755);
	snprintf(d, sizeof(d), "%s/%02x/%02x", tmpdir, key[0], key[1]);
	mkdir(d, 0755);
}

static void flip(const char *path, off_t off)
{
	int fd = open(path, O_RDWR);
	uint8_t c = 0;

	TAP_ASSERT_GE(fd, 0);
	TAP_CHECK(pread(fd, &c, 1, off) == 1);
	c ^= 0x10;
	TAP_CHECK(pwrite(fd, &c, 1, off) == 1);
	close(fd);
}

static void corruption_is_detected(void)
{
	struct kvc_bf_header h;
	struct stat st;
	uint8_t key[32], buf[5000];
	char path[512], other[512], qdir[512];
	const size_t len = 5000;

	/* Truncated by one byte. */
	TAP_CHECK(put(0xc0, len, path, sizeof(path)) == 0);
	TAP_CHECK(truncate(path, (off_t)kvc_bf_file_size(len) - 1) == 0);
	fill_key(key, 0xc0);
	TAP_EXPECT_EQ(kvc_bf_read(tmpdir, key, &h, buf, sizeof(buf)), -EBADMSG);
	/* Cut to the end of the payload, before the padding. */
	TAP_CHECK(truncate(path, KVC_BF_HEADER_SIZE + len) == 0);
	TAP_EXPECT_EQ(kvc_bf_read(tmpdir, key, &h, buf, sizeof(buf)), -EBADMSG);
	/* Longer than its header says. */
	TAP_CHECK(truncate(path, (off_t)kvc_bf_file_size(len) + 4096) == 0);
	TAP_EXPECT_EQ(kvc_bf_read(tmpdir, key, &h, buf, sizeof(buf)), -EBADMSG);
	/* Shorter than a header. */
	TAP_CHECK(truncate(path, 100) == 0);
	TAP_EXPECT_EQ(kvc_bf_read(tmpdir, key, &h, buf, sizeof(buf)), -EBADMSG);

	/* A bit flip in the payload, then in the header. */
	TAP_CHECK(put(0xc1, len, path, sizeof(path)) == 0);
	fill_key(key, 0xc1);
	TAP_CHECK(kvc_bf_read(tmpdir, key, &h, buf, sizeof(buf)) == 0);
	flip(path, KVC_BF_HEADER_SIZE + 1234);
	TAP_EXPECT_EQ(kvc_bf_read(tmpdir, key, &h, buf, sizeof(buf)), -EBADMSG);
	/* In the padding, which the CRC does not cover. */
	TAP_CHECK(put(0xc5, len, path, sizeof(path)) == 0);
	fill_key(key, 0xc5);
	flip(path, KVC_BF_HEADER_SIZE + len + 7);
	TAP_EXPECT_EQ(kvc_bf_read(tmpdir, key, &h, buf, sizeof(buf)), -EBADMSG);
	TAP_CHECK(put(0xc2, len, path, sizeof(path)) == 0);
	fill_key(key, 0xc2);
	flip(path, 100);	/* in the reserved bytes */
	TAP_EXPECT_EQ(kvc_bf_read(tmpdir, key, &h, buf, sizeof(buf)), -EBADMSG);
	/* Not a block file at all. */
	flip(path, 0);
	TAP_EXPECT_EQ(kvc_bf_read(tmpdir, key, &h, buf, sizeof(buf)), -EPROTO);

	/* A valid file under another key's name. */
	TAP_CHECK(put(0xc3, len, path, sizeof(path)) == 0);
	fill_key(key, 0xc4);
	TAP_CHECK(kvc_bf_path(tmpdir, key, other, sizeof(other)) == 0);
	/* Same fan-out directory? Not with these keys: make it. */
	make_fanout(key);
	TAP_CHECK(rename(path, other) == 0);
	TAP_EXPECT_EQ(kvc_bf_read(tmpdir, key, &h, buf, sizeof(buf)), -EBADMSG);

	/* Quarantine: moved aside, then a miss. */
	TAP_CHECK(kvc_bf_quarantine(base, "ns1", key, (uid_t)-1) == 0);
	TAP_CHECK(access(other, F_OK) == -1 && errno == ENOENT);
	TAP_EXPECT_EQ(kvc_bf_read(tmpdir, key, &h, buf, sizeof(buf)), -ENOENT);
	snprintf(qdir, sizeof(qdir), "%s/.quarantine", base);
	TAP_CHECK(count_entries(qdir) == 2);	/* with ns2's, above */
	TAP_EXPECT_EQ(kvc_bf_quarantine(base, "ns1", key, (uid_t)-1), -ENOENT);
	/* The slot is free again: a good copy can be published. */
	TAP_CHECK(put(0xc4, len, path, sizeof(path)) == 0);
	TAP_CHECK(kvc_bf_read(tmpdir, key, &h, buf, sizeof(buf)) == 0);

	/* Never published. */
	fill_key(key, 0xee);
	TAP_EXPECT_EQ(kvc_bf_read(tmpdir, key, &h, buf, sizeof(buf)), -ENOENT);

	/*
	 * A FIFO under a block's name (anyone who may write the shared
	 * directory can plant one): not a block file, and no open that
	 * waits for a writer forever. The alarm turns a hang into a failure.
	 */
	fill_key(key, 0xc6);
	TAP_CHECK(kvc_bf_path(tmpdir, key, path, sizeof(path)) == 0);
	make_fanout(key);
	TAP_CHECK(mkfifo(path, 0644) == 0);
	alarm(10);
	TAP_EXPECT_EQ(kvc_bf_read_header(path, &h, &st), -EBADMSG);
	TAP_EXPECT_EQ(kvc_bf_read(tmpdir, key, &h, buf, sizeof(buf)), -EBADMSG);
	alarm(0);
	unlink(path);
}

/* The checks of read_only_directory(), as the owner of the directory ro. */
static void read_only_body(const char *ro)
{
	struct kvc_bf_header h;
	uint8_t p[64];
	char d2[256];

	TAP_CHECK(chmod(ro, 0500) == 0);
	make_header(&h, 0x50, sizeof(p));
	memset(p, 3, sizeof(p));
	TAP_CHECK(kvc_bf_publish(ro, &h, p, "node-a") == -EACCES);
	TAP_CHECK(count_entries(ro) == 0);

	/* Fan-out directories exist but the leaf is read-only: the temp
	 * file cannot be created, and nothing is left. */
	TAP_CHECK(chmod(ro, 0700) == 0);
	TAP_CHECK(kvc_bf_publish(ro, &h, p, "node-a") == 0);
	h.key[2] ^= 1;	/* same aa/bb */
	snprintf(d2, sizeof(d2), "%s/%02x/%02x", ro, h.key[0], h.key[1]);
	TAP_CHECK(chmod(d2, 0500) == 0);
	TAP_CHECK(kvc_bf_publish(ro, &h, p, "node-a") == -EACCES);
	TAP_CHECK(count_entries(d2) == 1);
	TAP_CHECK(chmod(d2, 0700) == 0);
}

/*
 * Permission denied: clear errors and nothing left behind. Root ignores
 * directory permissions, so as root the checks run in a child that has
 * dropped to nobody, in a directory nobody owns.
 */
static void read_only_directory(void)
{
	char ro[128];

	snprintf(ro, sizeof(ro), "%s/ro", tmpdir);
	TAP_CHECK(mkdir(ro, 0700) == 0);
	if (geteuid() != 0) {
		read_only_body(ro);
		return;
	}
	TAP_CHECK(chown(ro, SCRATCH_NOBODY, SCRATCH_NOBODY) == 0);
	scratch_as_nobody(base, read_only_body, ro);
}

/*
 * A tenant that could write its namespace's directory links a fan-out
 * directory to another namespace's: a quarantine of a key under it must
 * not follow the link (it would move the other tenant's file into a
 * place of the tenant's choosing), and a .quarantine that is not
 * private is refused.
 */
static void quarantine_follows_no_link(void)
{
	uint8_t *p = pattern(4096, 11);
	struct kvc_bf_header h;
	char victim[160], link_dir[160], path[512], q[160];
	struct stat st;

	snprintf(victim, sizeof(victim), "%s/ns3", base);
	snprintf(link_dir, sizeof(link_dir), "%s/ns4", base);
	TAP_CHECK(p && mkdir(victim, 0755) == 0 && mkdir(link_dir, 0755) == 0);
	make_header(&h, 0x5a, 4096);
	h.ns_id = 3;
	TAP_CHECK(kvc_bf_publish(victim, &h, p, "node-v") == 0);
	TAP_CHECK(kvc_bf_path(victim, h.key, path, sizeof(path)) == 0);
	/* ns4/5a -> ../ns3/5a: the victim's file reachable through ns4. */
	snprintf(q, sizeof(q), "../ns3/%02x", h.key[0]);
	snprintf(link_dir, sizeof(link_dir), "%s/ns4/%02x", base, h.key[0]);
	TAP_CHECK(symlink(q, link_dir) == 0);
	TAP_EXPECT_EQ(kvc_bf_quarantine(base, "ns4", h.key, (uid_t)-1), -ELOOP);
	TAP_CHECK(stat(path, &st) == 0);	/* the victim keeps it */
	TAP_EXPECT_EQ(kvc_bf_quarantine(base, "../ns3", h.key, (uid_t)-1),
		      -EINVAL);
	/* .quarantine open to others: not kvcached's own, refused. */
	snprintf(q, sizeof(q), "%s/.quarantine", base);
	TAP_CHECK(chmod(q, 0777) == 0);
	TAP_EXPECT_EQ(kvc_bf_quarantine(base, "ns3", h.key, (uid_t)-1), -EPERM);
	TAP_CHECK(stat(path, &st) == 0);
	TAP_CHECK(chmod(q, 0700) == 0);
	TAP_CHECK(kvc_bf_quarantine(base, "ns3", h.key, (uid_t)-1) == 0);
	TAP_CHECK(stat(path, &st) == -1 && errno == ENOENT);
	free(p);
}

int main(void)
{
	if (scratch_make(base, sizeof(base), "kvc-bf"))
		return 1;
	snprintf(tmpdir, sizeof(tmpdir), "%s/ns1", base);
	if (mkdir(tmpdir, 0755))
		return 1;
	TAP_RUN(crc32c_vectors);
	TAP_RUN(crc32c_hw_matches_sw);
	TAP_RUN(names_parse);
	TAP_RUN(header_golden_and_round_trip);
	TAP_RUN(encode_errors);
	TAP_RUN(decode_errors);
	TAP_RUN(path_format);
	TAP_RUN(publish_then_read);
	TAP_RUN(publish_is_idempotent);
	TAP_RUN(modes_whatever_the_umask);
	TAP_RUN(corruption_is_detected);
	TAP_RUN(quarantine_follows_no_link);
	TAP_RUN(read_only_directory);
	scratch_remove(base);
	return tap_done();
}
