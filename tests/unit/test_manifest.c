// SPDX-License-Identifier: GPL-2.0
/*
 * Host tests for helper/common/manifest.c, on real files in a temporary
 * directory:
 *
 *  - append then read back: every field, first flags, sizes at and above
 *    4 GiB, a second descriptor appending at the end, enough records to
 *    cross the reader's buffer and its array's first capacity;
 *  - what is not a manifest: a missing file (-ENOENT), an empty one, a
 *    directory, a symbolic link (not followed);
 *  - damage: a torn last record, a bit flip (in the body, the CRC, the
 *    magic), records whose CRC is right but whose fields are not (reserved
 *    bytes, ns 0, unknown flags, another magic), garbage and zeros
 *    appended: each skipped and counted in bad, every intact record
 *    around it still read;
 *  - kvc_mf_rewrite: replaces the content whole, leaves no .new file, and
 *    keeps the old content when it fails (a directory it may not write, as
 *    nobody; a rename that fails);
 *  - the golden bytes of a record against the layout in manifest.h, its
 *    checksum computed by a bit-at-a-time CRC32C written here.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blockfile.h"
#include "manifest.h"
#include "tap.h"
#include "scratch.h"

#define REC		KVC_MF_REC_SIZE
#define KEY		KVC_BF_KEY_SIZE

static char tmpdir[64];

/* ---- helpers ---------------------------------------------------------- */

/*
 * CRC32C, one bit at a time from the polynomial's definition (reflected
 * 0x82F63B78, initial and final XOR all ones): deliberately nothing like
 * kvc_crc32c()'s tables or instructions, so a shared mistake cannot hide.
 */
static uint32_t ref_crc32c(const uint8_t *p, size_t len)
{
	uint32_t crc = 0xffffffff;

	while (len--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = crc & 1 ? (crc >> 1) ^ 0x82f63b78 : crc >> 1;
	}
	return ~crc;
}

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* Recompute a record's CRC after editing a covered field behind its back. */
static void reseal(uint8_t *b)
{
	put_le32(b + 88, ref_crc32c(b, 88));
}

static void fill_key(uint8_t *k, uint8_t start)
{
	for (int i = 0; i < KEY; i++)
		k[i] = (uint8_t)(start + i);
}

/* A path in the scratch directory (all short: a truncation is a bug here). */
static void path_of(char *out, size_t len, const char *name)
{
	TAP_CHECK((size_t)snprintf(out, len, "%s/%s", tmpdir, name) < len);
}

/* Record @i of a test sequence: every field differs from its neighbours'. */
static void make_rec(struct kvc_mf_rec *r, unsigned int i)
{
	memset(r, 0, sizeof(*r));
	r->ns = 1 + i % 7;
	r->first = i % 3 == 0;
	r->size = kvc_bf_file_size(1 + (uint64_t)i * 4097);
	fill_key(r->key, (uint8_t)i);
	r->key[KEY - 1] = (uint8_t)(i >> 8);	/* unique past 256 */
	if (!r->first)
		fill_key(r->parent, (uint8_t)(i + 0x80));
}

static bool rec_eq(const struct kvc_mf_rec *a, const struct kvc_mf_rec *b)
{
	/* Field by field: the struct has padding. */
	return a->ns == b->ns && a->first == b->first && a->size == b->size &&
	       !memcmp(a->key, b->key, KEY) &&
	       !memcmp(a->parent, b->parent, KEY);
}

/* Create @path afresh (O_TRUNC) and append @n records to it. */
static void write_recs(const char *path, const struct kvc_mf_rec *r,
		       size_t n)
{
	int fd;

	unlink(path);
	fd = kvc_mf_open(path);
	TAP_ASSERT_GE(fd, 0);
	for (size_t i = 0; i < n; i++)
		TAP_CHECK(kvc_mf_append(fd, &r[i]) == 0);
	close(fd);
}

/* Append raw bytes to @path, as a crash or a stray writer would. */
static void append_raw(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_APPEND);

	TAP_ASSERT_GE(fd, 0);
	TAP_CHECK(write(fd, buf, len) == (ssize_t)len);
	close(fd);
}

static void read_raw(const char *path, off_t off, uint8_t *buf, size_t len)
{
	int fd = open(path, O_RDONLY);

	TAP_ASSERT_GE(fd, 0);
	TAP_CHECK(pread(fd, buf, len, off) == (ssize_t)len);
	close(fd);
}

static void write_raw(const char *path, off_t off, const uint8_t *buf,
		      size_t len)
{
	int fd = open(path, O_WRONLY);

	TAP_ASSERT_GE(fd, 0);
	TAP_CHECK(pwrite(fd, buf, len, off) == (ssize_t)len);
	close(fd);
}

static off_t size_of(const char *path)
{
	struct stat st;

	return stat(path, &st) ? -1 : st.st_size;
}

static bool exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

/*
 * Read @path and check it holds exactly @want[0..n-1] in order, with @bad
 * records skipped.
 */
static void expect(const char *path, const struct kvc_mf_rec *want, size_t n,
		   size_t bad)
{
	struct kvc_mf_rec *got = NULL;
	size_t ngot = 99, nbad = 99;

	TAP_CHECK(kvc_mf_read(path, &got, &ngot, &nbad) == 0);
	TAP_CHECK(ngot == n);
	TAP_CHECK(nbad == bad);
	if (ngot != n || nbad != bad)
		printf("# %s: %zu records, %zu bad; want %zu, %zu\n", path,
		       ngot, nbad, n, bad);
	for (size_t i = 0; i < n && i < ngot; i++)
		if (!rec_eq(&got[i], &want[i])) {
			TAP_CHECK(!"record differs");
			printf("# record %zu\n", i);
			break;
		}
	free(got);
}

/* ---- tests ------------------------------------------------------------ */

/* The reference CRC against the standard check value, then the records. */
static void golden_record(void)
{
	/*
	 * Bytes 0..23 of the record below, as manifest.h lays them out;
	 * the key and the parent follow, then the CRC of all that.
	 */
	static const uint8_t head[24] = {
		'K', 'V', 'M', 'F',			/* 0: magic */
		0x41, 0x42, 0x43, 0x44,			/* 4: ns, LE */
		0x00, 0x00, 0x00, 0x00,			/* 8: flags */
		0x00, 0x00, 0x00, 0x00,			/* 12: reserved */
		/* 16: the file size, LE */
		0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,
	};
	struct kvc_mf_rec r, *got = NULL;
	uint8_t want[2][REC], b[2 * REC];
	size_t n, bad;
	char path[PATH_MAX];
	int fd;

	TAP_CHECK(ref_crc32c((const uint8_t *)"123456789", 9) == 0xE3069283);

	memset(&r, 0, sizeof(r));
	r.ns = 0x44434241;
	r.first = false;
	r.size = 0x1122334455667788ULL;	/* both halves, above 4 GiB */
	fill_key(r.key, 0x00);
	fill_key(r.parent, 0x20);

	memset(want, 0, sizeof(want));
	memcpy(want[0], head, sizeof(head));
	for (int i = 0; i < KEY; i++) {
		want[0][24 + i] = (uint8_t)i;		/* key */
		want[0][56 + i] = (uint8_t)(0x20 + i);	/* parent */
	}
	put_le32(want[0] + 88, ref_crc32c(want[0], 88));
	/* 92..95 stay zero. The same block as the first of a chain: flag
	 * bit 0, and no parent. */
	memcpy(want[1], want[0], REC);
	want[1][8] = 0x01;
	memset(want[1] + 56, 0, KEY);
	put_le32(want[1] + 88, ref_crc32c(want[1], 88));

	path_of(path, sizeof(path), "golden");
	fd = kvc_mf_open(path);
	TAP_ASSERT_GE(fd, 0);
	TAP_CHECK(kvc_mf_append(fd, &r) == 0);
	r.first = true;
	memset(r.parent, 0, KEY);
	TAP_CHECK(kvc_mf_append(fd, &r) == 0);
	close(fd);
	TAP_CHECK(size_of(path) == 2 * REC);
	read_raw(path, 0, b, sizeof(b));
	for (int k = 0; k < 2; k++)
		for (int i = 0; i < REC; i++)
			if (b[k * REC + i] != want[k][i]) {
				TAP_CHECK(!"golden byte differs");
				printf("# record %d byte %d: %02x, want %02x\n",
				       k, i, b[k * REC + i], want[k][i]);
				break;
			}

	/* And they decode to what was encoded. */
	TAP_CHECK(kvc_mf_read(path, &got, &n, &bad) == 0);
	TAP_CHECK(n == 2 && bad == 0);
	if (got && n == 2) {
		TAP_CHECK(!got[0].first && got[1].first);
		TAP_CHECK(got[0].ns == 0x44434241 &&
			  got[0].size == 0x1122334455667788ULL);
		TAP_CHECK(rec_eq(&got[1], &r));
	}
	free(got);
}

static void append_read_round_trip(void)
{
	static const uint64_t sizes[] = {
		8192, 4ULL << 30, (5ULL << 30) + 12345, 1ULL << 40, UINT64_MAX,
	};
	struct kvc_mf_rec r[6];
	char path[PATH_MAX];
	struct stat st;
	mode_t mask = umask(0);
	int fd, fd2;

	umask(mask);
	path_of(path, sizeof(path), "round-trip");
	for (unsigned int i = 0; i < 6; i++) {
		make_rec(&r[i], i);
		if (i < sizeof(sizes) / sizeof(sizes[0]))
			r[i].size = sizes[i];
	}
	fd = kvc_mf_open(path);
	TAP_ASSERT_GE(fd, 0);
	TAP_CHECK(stat(path, &st) == 0 && S_ISREG(st.st_mode));
	/* 0600: a manifest lists every tenant's keys and namespaces. */
	TAP_CHECK((st.st_mode & 0777) == (0600 & ~mask));
	for (int i = 0; i < 5; i++)
		TAP_CHECK(kvc_mf_append(fd, &r[i]) == 0);
	TAP_CHECK(size_of(path) == 5 * REC);
	expect(path, r, 5, 0);

	/* Reopened (a restart): appends land after what is there. */
	fd2 = kvc_mf_open(path);
	TAP_CHECK(fd2 >= 0);
	TAP_CHECK(kvc_mf_append(fd2, &r[5]) == 0);
	TAP_CHECK(size_of(path) == 6 * REC);
	expect(path, r, 6, 0);
	close(fd2);
	close(fd);

	/* A descriptor that cannot write: the error, nothing appended. */
	fd = open(path, O_RDONLY);
	TAP_CHECK(fd >= 0);
	TAP_EXPECT_EQ(kvc_mf_append(fd, &r[0]), -EBADF);
	close(fd);
	TAP_CHECK(size_of(path) == 6 * REC);
	TAP_EXPECT_EQ(kvc_mf_open(tmpdir), -EISDIR);
}

/*
 * More records than the reader's buffer holds (64) and than its array's
 * first allocation (1024): the reads and the growth keep them whole and
 * in order, a torn tail after them included.
 */
#define MANY	3000

static void many_records(void)
{
	static struct kvc_mf_rec r[MANY];
	char path[PATH_MAX];
	uint8_t half[REC / 2];

	path_of(path, sizeof(path), "many");
	for (unsigned int i = 0; i < MANY; i++)
		make_rec(&r[i], i);
	write_recs(path, r, MANY);
	TAP_CHECK(size_of(path) == (off_t)MANY * REC);
	expect(path, r, MANY, 0);
	memset(half, 0x5a, sizeof(half));
	append_raw(path, half, sizeof(half));
	expect(path, r, MANY, 1);
}

static void not_a_manifest(void)
{
	struct kvc_mf_rec *got = (struct kvc_mf_rec *)1;
	char path[PATH_MAX], link[PATH_MAX];
	size_t n = 99, bad = 99;
	int fd;

	path_of(path, sizeof(path), "missing");
	TAP_EXPECT_EQ(kvc_mf_read(path, &got, &n, &bad), -ENOENT);
	TAP_CHECK(got == NULL && n == 0 && bad == 0);

	/* Empty: a node that has written nothing yet. */
	path_of(path, sizeof(path), "empty");
	fd = kvc_mf_open(path);
	TAP_CHECK(fd >= 0);
	close(fd);
	expect(path, NULL, 0, 0);

	/* A directory under the name: an error, not an empty manifest. */
	n = bad = 99;
	TAP_EXPECT_EQ(kvc_mf_read(tmpdir, &got, &n, &bad), -EISDIR);
	TAP_CHECK(got == NULL && n == 0);

	/* A link is not followed (the directory may be shared). */
	path_of(link, sizeof(link), "link");
	TAP_CHECK(symlink(path, link) == 0);
	TAP_EXPECT_EQ(kvc_mf_read(link, &got, &n, &bad), -ELOOP);
	TAP_CHECK(got == NULL && n == 0);
}

/* A crash mid-append: the intact records are read, the tail is bad. */
static void torn_last_record(void)
{
	struct kvc_mf_rec r[3];
	char path[PATH_MAX];

	path_of(path, sizeof(path), "torn");
	for (unsigned int i = 0; i < 3; i++)
		make_rec(&r[i], 10 + i);
	write_recs(path, r, 3);
	TAP_CHECK(truncate(path, 2 * REC + 50) == 0);
	expect(path, r, 2, 1);
	/* A byte short of whole. */
	write_recs(path, r, 3);
	TAP_CHECK(truncate(path, 3 * REC - 1) == 0);
	expect(path, r, 2, 1);
	/* Torn in the first record: nothing intact. */
	TAP_CHECK(truncate(path, 10) == 0);
	expect(path, r, 0, 1);
}

/*
 * A bit flip anywhere in a record (its body, its CRC, its magic): that
 * record is skipped, and the records after it are still read.
 */
static void bit_flip(void)
{
	static const int where[] = { 40, 88, 0, 17, 70 };
	struct kvc_mf_rec r[5], want[4];
	char path[PATH_MAX];

	path_of(path, sizeof(path), "flip");
	for (unsigned int i = 0; i < 5; i++)
		make_rec(&r[i], 20 + i);
	for (size_t w = 0; w < sizeof(where) / sizeof(where[0]); w++) {
		uint8_t c;
		int n = 0;

		write_recs(path, r, 5);
		read_raw(path, 2 * REC + where[w], &c, 1);
		c ^= 0x04;
		write_raw(path, 2 * REC + where[w], &c, 1);
		for (int i = 0; i < 5; i++)
			if (i != 2)
				want[n++] = r[i];
		expect(path, want, 4, 1);
	}
}

/*
 * Records whose CRC is right but whose fields are not: a writer of
 * another version, or not a writer of manifests at all. Each skipped;
 * the valid ones between them read.
 */
static void invalid_fields(void)
{
	struct kvc_mf_rec r[7], zero_ns;
	char path[PATH_MAX];
	uint8_t b[REC];
	int fd;

	path_of(path, sizeof(path), "fields");
	for (unsigned int i = 0; i < 7; i++)
		make_rec(&r[i], 30 + i);
	write_recs(path, r, 1);
	read_raw(path, 0, b, REC);	/* a valid record to edit */

	/* Reserved word at 12, under the CRC: resealed. */
	b[13] = 1;
	reseal(b);
	append_raw(path, b, REC);
	b[13] = 0;
	reseal(b);
	fd = kvc_mf_open(path);
	TAP_CHECK(fd >= 0);
	TAP_CHECK(kvc_mf_append(fd, &r[1]) == 0);
	close(fd);
	/* Reserved word at 92, after the CRC: not covered, still checked. */
	b[95] = 0x80;
	append_raw(path, b, REC);
	b[95] = 0;
	append_raw(path, b, REC);	/* intact again: a copy of r[0] */
	/* Namespace 0 is no namespace: encoded as given, refused read. */
	zero_ns = r[2];
	zero_ns.ns = 0;
	fd = kvc_mf_open(path);
	TAP_CHECK(fd >= 0);
	TAP_CHECK(kvc_mf_append(fd, &zero_ns) == 0);
	TAP_CHECK(kvc_mf_append(fd, &r[3]) == 0);
	close(fd);
	/* A flag this version does not know. */
	b[8] |= 0x02;
	reseal(b);
	append_raw(path, b, REC);
	b[8] &= 0x01;
	/* Another magic (e.g. a later format), sealed. */
	b[3] = 'G';
	reseal(b);
	append_raw(path, b, REC);
	{
		struct kvc_mf_rec want[4] = { r[0], r[1], r[0], r[3] };

		expect(path, want, 4, 5);
	}
}

/*
 * Garbage appended (another writer, a bad copy, zeros from a crash that
 * extended the file without its data): the records before it are read,
 * and every 96 bytes of it, and its tail, count as bad.
 */
static void garbage_appended(void)
{
	struct kvc_mf_rec r[3];
	char path[PATH_MAX];
	uint8_t junk[200], zeros[REC];

	path_of(path, sizeof(path), "garbage");
	for (unsigned int i = 0; i < 3; i++)
		make_rec(&r[i], 40 + i);
	write_recs(path, r, 3);
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)(i * 37 + 11);
	append_raw(path, junk, sizeof(junk));
	expect(path, r, 3, 3);		/* 2 * 96 + 8 */

	write_recs(path, r, 3);
	memset(zeros, 0, sizeof(zeros));
	append_raw(path, zeros, sizeof(zeros));
	append_raw(path, zeros, sizeof(zeros));
	expect(path, r, 3, 2);
	/* Garbage only. */
	write_recs(path, NULL, 0);
	append_raw(path, junk, sizeof(junk));
	expect(path, NULL, 0, 3);
}

static void rewrite_replaces(void)
{
	struct kvc_mf_rec r[4], s[2];
	char path[PATH_MAX], tmp[PATH_MAX], dir[PATH_MAX], new[PATH_MAX];
	struct stat before, after;
	int fd;

	path_of(path, sizeof(path), "rewrite");
	path_of(tmp, sizeof(tmp), "rewrite.new");
	for (unsigned int i = 0; i < 4; i++)
		make_rec(&r[i], 50 + i);
	for (unsigned int i = 0; i < 2; i++)
		make_rec(&s[i], 60 + i);
	write_recs(path, r, 4);
	/* Torn and flipped records in the old one: gone with it. */
	append_raw(path, "xx", 2);
	TAP_CHECK(stat(path, &before) == 0);

	TAP_CHECK(kvc_mf_rewrite(path, s, 2) == 0);
	TAP_CHECK(size_of(path) == 2 * REC);
	expect(path, s, 2, 0);
	TAP_CHECK(!exists(tmp));
	/* Atomically: a new file took the name (a rename, not a rewrite in
	 * place a crash could leave half done). */
	TAP_CHECK(stat(path, &after) == 0 && after.st_ino != before.st_ino);

	/* A descriptor opened before the rewrite appends to the old file:
	 * the caller reopens after each rewrite. */
	fd = kvc_mf_open(path);
	TAP_CHECK(fd >= 0);
	TAP_CHECK(kvc_mf_rewrite(path, r, 1) == 0);
	TAP_CHECK(kvc_mf_append(fd, &r[3]) == 0);
	close(fd);
	expect(path, r, 1, 0);

	/* Nothing to keep: an empty manifest, not none. */
	TAP_CHECK(kvc_mf_rewrite(path, NULL, 0) == 0);
	TAP_CHECK(size_of(path) == 0);
	expect(path, NULL, 0, 0);

	/* A temp file left by a crash mid-rewrite is replaced, not kept. */
	TAP_CHECK(kvc_mf_rewrite(path, r, 4) == 0);
	fd = open(tmp, O_CREAT | O_WRONLY, 0644);
	TAP_CHECK(fd >= 0);
	TAP_CHECK(write(fd, "stale", 5) == 5);
	close(fd);
	TAP_CHECK(kvc_mf_rewrite(path, s, 2) == 0);
	expect(path, s, 2, 0);
	TAP_CHECK(!exists(tmp));

	/* No manifest yet: created. */
	path_of(new, sizeof(new), "rewrite-created");
	TAP_CHECK(kvc_mf_rewrite(new, r, 3) == 0);
	expect(new, r, 3, 0);

	/*
	 * The rename fails (a non-empty directory holds the name): the
	 * error, the old content where it was, no temp file left.
	 */
	path_of(dir, sizeof(dir), "rewrite-dir");
	TAP_CHECK(mkdir(dir, 0755) == 0);
	path_of(new, sizeof(new), "rewrite-dir/x");
	write_recs(new, r, 1);
	TAP_CHECK(kvc_mf_rewrite(dir, s, 2) < 0);
	path_of(tmp, sizeof(tmp), "rewrite-dir.new");
	TAP_CHECK(!exists(tmp));
	expect(new, r, 1, 0);

	/* A name too long for the temp file's: refused before anything. */
	{
		char longp[PATH_MAX + 8];

		memset(longp, 'a', sizeof(longp) - 1);
		longp[0] = '/';
		longp[sizeof(longp) - 1] = '\0';
		TAP_EXPECT_EQ(kvc_mf_rewrite(longp, s, 2), -ENAMETOOLONG);
	}
}

/* What rewrite_read_only() wrote, for its body to find again. */
static const struct kvc_mf_rec *ro_old;

/* As a user who may not write the directory @path is in. */
static void rewrite_read_only_body(const char *path)
{
	struct kvc_mf_rec s[2];
	char tmp[PATH_MAX];

	for (unsigned int i = 0; i < 2; i++)
		make_rec(&s[i], 80 + i);
	TAP_EXPECT_EQ(kvc_mf_rewrite(path, s, 2), -EACCES);
	expect(path, ro_old, 3, 0);
	TAP_CHECK((size_t)snprintf(tmp, sizeof(tmp), "%s.new", path) <
		  sizeof(tmp));
	TAP_CHECK(!exists(tmp));
}

/*
 * The rewrite fails where the directory cannot be written: the old
 * manifest stays, whole. Root ignores directory permissions, so as root
 * the checks run as nobody, on a root-owned 0755 directory.
 */
static void rewrite_read_only(void)
{
	static struct kvc_mf_rec r[3];
	char dir[PATH_MAX], path[PATH_MAX];

	path_of(dir, sizeof(dir), "ro");
	TAP_CHECK(mkdir(dir, 0755) == 0);
	path_of(path, sizeof(path), "ro/.manifest.node-a");
	for (unsigned int i = 0; i < 3; i++)
		make_rec(&r[i], 70 + i);
	write_recs(path, r, 3);
	/* Readable by the reader below: the test is about the directory. */
	TAP_CHECK(chmod(path, 0644) == 0);
	ro_old = r;
	if (geteuid() != 0) {
		TAP_CHECK(chmod(dir, 0555) == 0);
		rewrite_read_only_body(path);
		TAP_CHECK(chmod(dir, 0755) == 0);
		return;
	}
	scratch_as_nobody(tmpdir, rewrite_read_only_body, path);
	expect(path, r, 3, 0);
}

/* Every manifest file is 0600, whatever the umask or an older file's mode. */
static void modes_whatever_the_umask(void)
{
	static const mode_t masks[] = { 022, 0, 077 };
	struct kvc_mf_rec r[2];
	char path[PATH_MAX];
	struct stat st;

	make_rec(&r[0], 70);
	make_rec(&r[1], 71);
	for (size_t i = 0; i < sizeof(masks) / sizeof(masks[0]); i++) {
		mode_t old = umask(masks[i]);
		int fd;

		path_of(path, sizeof(path), "modes");
		unlink(path);
		fd = kvc_mf_open(path);
		TAP_CHECK(fd >= 0);
		if (fd >= 0)
			close(fd);
		TAP_CHECK(stat(path, &st) == 0 && (st.st_mode & 07777) == 0600);
		/* An older kvcached's world-readable manifest: private again. */
		TAP_CHECK(chmod(path, 0644) == 0);
		fd = kvc_mf_open(path);
		TAP_CHECK(fd >= 0);
		if (fd >= 0)
			close(fd);
		TAP_CHECK(stat(path, &st) == 0 && (st.st_mode & 07777) == 0600);
		/* What recovery does at every start. */
		TAP_CHECK(chmod(path, 0644) == 0);
		TAP_CHECK(kvc_mf_rewrite(path, r, 2) == 0);
		TAP_CHECK(stat(path, &st) == 0 && (st.st_mode & 07777) == 0600);
		umask(old);
	}
	unlink(path);
}

int main(void)
{
	if (scratch_make(tmpdir, sizeof(tmpdir), "kvc-mf"))
		return 1;
	TAP_RUN(golden_record);
	TAP_RUN(append_read_round_trip);
	TAP_RUN(many_records);
	TAP_RUN(not_a_manifest);
	TAP_RUN(torn_last_record);
	TAP_RUN(bit_flip);
	TAP_RUN(invalid_fields);
	TAP_RUN(garbage_appended);
	TAP_RUN(rewrite_replaces);
	TAP_RUN(modes_whatever_the_umask);
	TAP_RUN(rewrite_read_only);
	scratch_remove(tmpdir);
	return tap_done();
}
