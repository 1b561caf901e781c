// SPDX-License-Identifier: GPL-2.0
/*
 * Host tests for helper/common/journal.c, kvcached's parents journal, on real
 * files in a temporary directory:
 *
 *  - a round trip of links (first and not, every namespace bound), and a
 *    first block's parent never stored;
 *  - the golden bytes of a record against the layout in journal.h, its
 *    checksum computed by a bit-at-a-time CRC32C written here (itself
 *    checked against the standard check value);
 *  - every byte of a record flipped: refused; every field made wrong
 *    behind a recomputed CRC (magic, version, flags, reserved byte, a
 *    first block with a parent, ns 0 and above KVCACHE_NS_MAX): refused
 *    with the right error; an older daemon's host-order record: refused;
 *  - a file: a torn tail ignored, a bad record in the middle costs only
 *    itself, a partial append (RLIMIT_FSIZE) cut off so later appends stay
 *    in step, a missing file, a symbolic link not followed;
 *  - the rewrite (compaction): the file holds exactly the live links
 *    given, appends after it land in the new file, no .new is left, and a
 *    rewrite that fails keeps the old file;
 *  - when a compaction is due.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "journal.h"
#include "tap.h"
#include "scratch.h"

#define REC	KVC_JOURNAL_REC
#define KEY	KVCACHE_KEY_SIZE

static char tmpdir[64];

/* CRC32C (Castagnoli, reflected 0x82F63B78), one bit at a time. */
static uint32_t ref_crc32c(const uint8_t *p, size_t n)
{
	uint32_t crc = 0xffffffffu;

	while (n--) {
		crc ^= *p++;
		for (int b = 0; b < 8; b++)
			crc = crc & 1 ? (crc >> 1) ^ 0x82f63b78u : crc >> 1;
	}
	return ~crc;
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* Recompute a record's CRC after a field was changed on purpose. */
static void fix_crc(uint8_t *rec)
{
	put32(rec + 76, ref_crc32c(rec, 76));
}

static void make_link(struct kvc_link *l, uint32_t ns, unsigned int seed,
		      bool first)
{
	memset(l, 0, sizeof(*l));
	l->ns = ns;
	l->first = first;
	for (int i = 0; i < KEY; i++) {
		l->key[i] = (uint8_t)(seed * 31 + i);
		if (!first)
			l->parent[i] = (uint8_t)(seed * 17 + 3 * i + 1);
	}
}

static bool same_link(const struct kvc_link *a, const struct kvc_link *b)
{
	return a->ns == b->ns && a->first == b->first &&
	       !memcmp(a->key, b->key, KEY) &&
	       (a->first || !memcmp(a->parent, b->parent, KEY));
}

static void path_of(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", tmpdir, name);
}

static void test_round_trip(void)
{
	static const uint32_t nss[] = { 1, 2, 77, KVCACHE_NS_MAX };
	uint8_t rec[REC];
	struct kvc_link in, out;

	for (size_t i = 0; i < sizeof(nss) / sizeof(nss[0]); i++) {
		for (int first = 0; first < 2; first++) {
			make_link(&in, nss[i], (unsigned int)i, first);
			kvc_journal_encode(&in, rec);
			memset(&out, 0xa5, sizeof(out));
			TAP_CHECK(kvc_journal_decode(rec, &out) == 0);
			TAP_CHECK(same_link(&in, &out));
		}
	}
	/* A first block's parent is not part of it: stored as zeros. */
	make_link(&in, 5, 9, false);
	in.first = true;
	kvc_journal_encode(&in, rec);
	TAP_CHECK(kvc_journal_decode(rec, &out) == 0);
	TAP_CHECK(out.first);
	for (int i = 0; i < KEY; i++)
		TAP_CHECK(out.parent[i] == 0 && rec[44 + i] == 0);
}

static void test_golden(void)
{
	static const uint8_t check[] = "123456789";
	uint8_t want[REC], rec[REC];
	struct kvc_link l;

	TAP_CHECK(ref_crc32c(check, 9) == 0xe3069283u);
	make_link(&l, 0x0102, 4, false);
	memset(want, 0, sizeof(want));
	memcpy(want, "KVPR", 4);
	want[4] = 1;			/* version 1, little-endian */
	want[5] = 0;
	want[6] = 0;			/* not first */
	want[8] = 0x02;			/* ns 0x0102, little-endian */
	want[9] = 0x01;
	memcpy(want + 12, l.key, KEY);
	memcpy(want + 44, l.parent, KEY);
	fix_crc(want);
	kvc_journal_encode(&l, rec);
	TAP_CHECK(!memcmp(rec, want, REC));

	l.first = true;
	want[6] = 1;
	memset(want + 44, 0, KEY);
	fix_crc(want);
	kvc_journal_encode(&l, rec);
	TAP_CHECK(!memcmp(rec, want, REC));
}

static void test_every_byte(void)
{
	uint8_t rec[REC], bad[REC];
	struct kvc_link l, out;

	make_link(&l, 3, 7, false);
	kvc_journal_encode(&l, rec);
	for (int i = 0; i < REC; i++) {
		for (int bit = 0; bit < 8; bit++) {
			memcpy(bad, rec, REC);
			bad[i] ^= (uint8_t)(1u << bit);
			memset(&out, 0x5a, sizeof(out));
			if (kvc_journal_decode(bad, &out) != -EBADMSG) {
				printf("# byte %d bit %d accepted\n", i, bit);
				TAP_CHECK(0);
			}
			/* Nothing written on failure. */
			TAP_CHECK(out.ns == 0x5a5a5a5au);
		}
	}
}

static void test_fields(void)
{
	uint8_t rec[REC], bad[REC];
	struct kvc_link l, out;

	make_link(&l, 3, 8, false);
	kvc_journal_encode(&l, rec);

#define TRY(edit, err)							\
	do {								\
		memcpy(bad, rec, REC);					\
		edit;							\
		fix_crc(bad);						\
		TAP_CHECK(kvc_journal_decode(bad, &out) == (err));	\
	} while (0)

	TRY((void)0, 0);			/* the fix-up itself is right */
	TRY(bad[0] = 'X', -EBADMSG);		/* magic */
	TRY(bad[3] = 'J', -EBADMSG);		/* an older daemon's magic */
	TRY(bad[4] = 2, -EBADMSG);		/* version */
	TRY(bad[5] = 1, -EBADMSG);		/* version, high byte */
	TRY(bad[6] = 2, -EBADMSG);		/* an unknown flag */
	TRY(bad[6] = 0x81, -EBADMSG);
	TRY(bad[7] = 1, -EBADMSG);		/* reserved */
	TRY(bad[6] = 1, -EBADMSG);		/* first, but with a parent */
	TRY(put32(bad + 8, 0), -ERANGE);
	TRY(put32(bad + 8, KVCACHE_NS_MAX + 1), -ERANGE);
	TRY(put32(bad + 8, 0xffffffffu), -ERANGE);
	TRY(put32(bad + 8, 0x00010001u), -ERANGE);
	TRY(put32(bad + 8, KVCACHE_NS_MAX), 0);
	TRY((bad[6] = 1, memset(bad + 44, 0, KEY)), 0);
#undef TRY

	/* What daemons before the versioned format wrote (x86: LE u32s). */
	memset(bad, 0, REC);
	put32(bad, 0x4a50564bu);
	put32(bad + 4, 3);
	memcpy(bad + 8, l.key, KEY);
	memcpy(bad + 40, l.parent, KEY);
	TAP_EXPECT_EQ(kvc_journal_decode(bad, &out), -EBADMSG);
}

static void test_parse(void)
{
	struct kvc_link l[5], *out;
	uint8_t buf[5 * REC + 40];
	size_t n, bad;

	for (int i = 0; i < 5; i++) {
		make_link(&l[i], (uint32_t)i + 1, (unsigned int)i, i == 0);
		kvc_journal_encode(&l[i], buf + i * REC);
	}
	memset(buf + 5 * REC, 0x11, 40);

	TAP_CHECK(kvc_journal_parse(buf, 0, &out, &n, &bad) == 0);
	TAP_CHECK(!out && n == 0 && bad == 0);

	/* A torn tail: every whole record, the tail counted. */
	TAP_CHECK(kvc_journal_parse(buf, 5 * REC + 40, &out, &n, &bad) == 0);
	TAP_CHECK(n == 5 && bad == 1);
	for (size_t i = 0; out && i < n; i++)
		TAP_CHECK(same_link(&out[i], &l[i]));
	free(out);

	/* Damage in the middle costs only that record. */
	buf[2 * REC + 20] ^= 0x40;
	TAP_CHECK(kvc_journal_parse(buf, 5 * REC, &out, &n, &bad) == 0);
	TAP_CHECK(n == 4 && bad == 1);
	if (out && n == 4) {
		TAP_CHECK(same_link(&out[1], &l[1]));
		TAP_CHECK(same_link(&out[2], &l[3]));
		TAP_CHECK(same_link(&out[3], &l[4]));
	}
	free(out);

	/* Nothing valid at all. */
	memset(buf, 0, sizeof(buf));
	TAP_CHECK(kvc_journal_parse(buf, 3 * REC, &out, &n, &bad) == 0);
	TAP_CHECK(!out && n == 0 && bad == 3);
}

static void test_files(void)
{
	struct kvc_link l[4], *out;
	char path[PATH_MAX], lnk[PATH_MAX], tmp[PATH_MAX + 8];
	size_t n, bad;
	int fd;

	path_of(path, sizeof(path), "parents");
	TAP_EXPECT_EQ(kvc_journal_read(path, &out, &n, &bad), -ENOENT);

	for (int i = 0; i < 4; i++)
		make_link(&l[i], 9, (unsigned int)i + 40, i == 0);
	TAP_CHECK(kvc_journal_rewrite(path, l, 2, &fd) == 0);
	TAP_CHECK(fd >= 0);
	TAP_CHECK(kvc_journal_append(fd, &l[2]) == 0);
	TAP_CHECK(kvc_journal_append(fd, &l[3]) == 0);
	snprintf(tmp, sizeof(tmp), "%s.new", path);
	TAP_CHECK(access(tmp, F_OK) && errno == ENOENT);

	/* A crash mid-append: half a record at the end. */
	TAP_CHECK(write(fd, "KVPR0123456789", 14) == 14);
	close(fd);
	TAP_CHECK(kvc_journal_read(path, &out, &n, &bad) == 0);
	TAP_CHECK(n == 4 && bad == 1);
	for (size_t i = 0; out && i < n; i++)
		TAP_CHECK(same_link(&out[i], &l[i]));
	free(out);

	/* Not followed: the file is the daemon's own. */
	path_of(lnk, sizeof(lnk), "link");
	TAP_CHECK(symlink(path, lnk) == 0);
	TAP_EXPECT_EQ(kvc_journal_read(lnk, &out, &n, &bad), -ELOOP);
	unlink(lnk);
	unlink(path);
}

/* The disk fills up mid-record: the part written is cut off again. */
static void test_partial_append(void)
{
	struct kvc_link l[4], *out;
	char path[PATH_MAX];
	size_t n, bad;
	pid_t pid;
	int st, fd;

	path_of(path, sizeof(path), "partial");
	for (int i = 0; i < 4; i++)
		make_link(&l[i], 2, (unsigned int)i + 60, i == 0);
	TAP_CHECK(kvc_journal_rewrite(path, l, 2, &fd) == 0);
	pid = fork();
	if (!pid) {
		struct rlimit r = { 2 * REC + 30, 2 * REC + 30 };

		signal(SIGXFSZ, SIG_IGN);
		if (setrlimit(RLIMIT_FSIZE, &r))
			_exit(2);
		/* 30 bytes fit each time: none may stay. */
		if (kvc_journal_append(fd, &l[2]) != -ENOSPC)
			_exit(3);
		if (lseek(fd, 0, SEEK_END) != 2 * REC)
			_exit(4);
		if (kvc_journal_append(fd, &l[2]) != -ENOSPC)
			_exit(5);
		_exit(0);
	}
	TAP_CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
	TAP_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		printf("# child status %#x\n", st);
	TAP_CHECK(lseek(fd, 0, SEEK_END) == 2 * REC);
	/* Room again: the next record is in step. */
	TAP_CHECK(kvc_journal_append(fd, &l[3]) == 0);
	close(fd);
	TAP_CHECK(kvc_journal_read(path, &out, &n, &bad) == 0);
	TAP_CHECK(n == 3 && bad == 0);
	if (out && n == 3) {
		TAP_CHECK(same_link(&out[0], &l[0]));
		TAP_CHECK(same_link(&out[1], &l[1]));
		TAP_CHECK(same_link(&out[2], &l[3]));
	}
	free(out);
	unlink(path);
}

/*
 * A compaction: a journal of 100 appends where only some blocks are
 * still live is rewritten with the live ones; exactly those are read.
 */
static void test_compaction(void)
{
	struct kvc_link all[100], live[100], *out;
	char path[PATH_MAX], tmp[PATH_MAX + 8];
	size_t n, nlive = 0, bad;
	struct stat sb;
	int fd;

	path_of(path, sizeof(path), "compact");
	TAP_CHECK(kvc_journal_rewrite(path, NULL, 0, &fd) == 0);
	for (int i = 0; i < 100; i++) {
		make_link(&all[i], (uint32_t)(i % 7) + 1, (unsigned int)i,
			  i % 10 == 0);
		TAP_CHECK(kvc_journal_append(fd, &all[i]) == 0);
		if (i % 3 == 0)
			live[nlive++] = all[i];
	}
	close(fd);
	TAP_CHECK(stat(path, &sb) == 0 && sb.st_size == 100 * REC);
	TAP_CHECK(kvc_journal_rewrite(path, live, nlive, &fd) == 0);
	TAP_CHECK(stat(path, &sb) == 0 &&
		  sb.st_size == (off_t)(nlive * REC));
	TAP_CHECK((sb.st_mode & 0777) == 0600);
	/* Appends after the compaction go to the new file. */
	make_link(&live[nlive], 4, 1000, false);
	TAP_CHECK(kvc_journal_append(fd, &live[nlive]) == 0);
	nlive++;
	close(fd);
	TAP_CHECK(kvc_journal_read(path, &out, &n, &bad) == 0);
	TAP_CHECK(n == nlive && bad == 0);
	if (out && n == nlive) {
		qsort(out, n, sizeof(*out), kvc_link_cmp);
		qsort(live, nlive, sizeof(*live), kvc_link_cmp);
		for (size_t i = 0; i < n; i++)
			TAP_CHECK(same_link(&out[i], &live[i]));
	}
	free(out);
	snprintf(tmp, sizeof(tmp), "%s.new", path);
	TAP_CHECK(access(tmp, F_OK) && errno == ENOENT);

	/* A rewrite that fails (.new cannot be made) keeps the old file. */
	TAP_CHECK(mkdir(tmp, 0700) == 0);
	TAP_EXPECT_EQ(kvc_journal_rewrite(path, all, 100, &fd), -EISDIR);
	TAP_CHECK(stat(path, &sb) == 0 &&
		  sb.st_size == (off_t)(nlive * REC));
	rmdir(tmp);
	unlink(path);
}

static void test_due(void)
{
	const uint64_t mib = KVC_JOURNAL_MIN_COMPACT;

	/* Never below 1 MiB (or the smaller size a test asks for). */
	TAP_CHECK(!kvc_journal_due(mib, 0, 0, mib));
	TAP_CHECK(kvc_journal_due(mib + REC, 0, 0, mib));
	TAP_CHECK(!kvc_journal_due(10 * REC, 0, 0, 10 * REC));
	TAP_CHECK(kvc_journal_due(11 * REC, 0, 0, 10 * REC));
	/* Above 4 x the live records' bytes. */
	TAP_CHECK(!kvc_journal_due(4 * 100000ull * REC, 100000, 0, mib));
	TAP_CHECK(kvc_journal_due(4 * 100000ull * REC + REC, 100000, 0, mib));
	TAP_CHECK(!kvc_journal_due(4 * 3 * REC, 3, 0, REC));
	/* And at least twice the size after the last compaction. */
	TAP_CHECK(!kvc_journal_due(2 * mib - REC, 0, mib, mib));
	TAP_CHECK(kvc_journal_due(2 * mib, 0, mib, mib));
}

int main(void)
{
	if (scratch_make(tmpdir, sizeof(tmpdir), "kvc-journal"))
		return 1;
	TAP_RUN(test_round_trip);
	TAP_RUN(test_golden);
	TAP_RUN(test_every_byte);
	TAP_RUN(test_fields);
	TAP_RUN(test_parse);
	TAP_RUN(test_files);
	TAP_RUN(test_partial_append);
	TAP_RUN(test_compaction);
	TAP_RUN(test_due);
	scratch_remove(tmpdir);
	return tap_done();
}
