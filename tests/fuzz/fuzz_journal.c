// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer harness for kvcached's parents journal (helper/common/journal.c): the
 * file of 80-byte records a restart in kernel mode reads to put the pool's
 * blocks back under their parents. The input is the journal file:
 * kvc_journal_parse() is the code under test, and kvc_journal_read() of
 * the same bytes through the filesystem (a scratch directory under
 * $TMPDIR, removed at exit), as kvcached reads it.
 *
 * Each input is tried as it is and "fixed up" (every whole record's CRC
 * recomputed), so the fuzzer reaches the field checks behind the
 * checksum too.
 *
 * Invariants, beyond "no crash, no sanitizer report", against a reference
 * decoder written here from the layout in journal.h:
 *  - the parser returns exactly the records the reference accepts, in
 *    file order, with their fields, and counts every other whole record
 *    and a torn tail in bad: n + bad is the number of records the size
 *    holds; the file reader agrees with the parser;
 *  - every link returned has a namespace in 1..KVCACHE_NS_MAX;
 *  - the links, encoded again, give exactly the bytes of the records they
 *    came from (one encoding per record), and kvc_journal_rewrite() of
 *    them (the compaction) writes exactly those bytes, which read back to
 *    the same links, none bad.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "blockfile.h"
#include "fuzz_files.h"
#include "journal.h"

#define REC	KVC_JOURNAL_REC
#define KEY	KVCACHE_KEY_SIZE

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_files_init("fuzz_journal");
	return 0;
}

static bool zero(const uint8_t *p, size_t n)
{
	while (n--)
		if (*p++)
			return false;
	return true;
}

/* The reference: journal.h's layout, checked field by field. */
static bool ref_decode(const uint8_t *b, struct kvc_link *l)
{
	uint32_t ns = fuzz_le32(b + 8);

	if (memcmp(b, "KVPR", 4) || fuzz_le16(b + 4) != 1 || b[6] > 1 ||
	    b[7] || fuzz_le32(b + 76) != kvc_crc32c_sw(0, b, 76) ||
	    ns < 1 || ns > KVCACHE_NS_MAX || (b[6] && !zero(b + 44, KEY)))
		return false;
	l->ns = ns;
	l->first = b[6];
	memcpy(l->key, b + 12, KEY);
	memcpy(l->parent, b + 44, KEY);
	return true;
}

static bool same(const struct kvc_link *a, const struct kvc_link *b)
{
	return a->ns == b->ns && a->first == b->first &&
	       !memcmp(a->key, b->key, KEY) &&
	       !memcmp(a->parent, b->parent, KEY);
}

static void try_journal(const uint8_t *p, size_t size)
{
	struct kvc_link *links, *back, ref;
	size_t n, bad, n2, bad2, whole = size / REC, intact = 0, len;
	uint8_t rec[REC];
	int fd;

	FUZZ_CHECK(kvc_journal_parse(p, size, &links, &n, &bad) == 0);
	FUZZ_CHECK(n + bad == whole + (size % REC ? 1 : 0));
	FUZZ_CHECK(!n == !links);
	for (size_t i = 0; i < whole; i++) {
		if (!ref_decode(p + i * REC, &ref))
			continue;
		FUZZ_CHECK(intact < n);
		FUZZ_CHECK(same(&links[intact], &ref));
		FUZZ_CHECK(links[intact].ns >= 1 &&
			   links[intact].ns <= KVCACHE_NS_MAX);
		kvc_journal_encode(&links[intact], rec);
		FUZZ_CHECK(!memcmp(rec, p + i * REC, REC));
		memcpy(want + intact * REC, rec, REC);
		intact++;
	}
	FUZZ_CHECK(intact == n);

	/* The file reader sees the same as the parser. */
	write_file(in_path, p, size);
	FUZZ_CHECK(kvc_journal_read(in_path, &back, &n2, &bad2) == 0);
	FUZZ_CHECK(n2 == n && bad2 == bad);
	for (size_t i = 0; i < n; i++)
		FUZZ_CHECK(same(&back[i], &links[i]));
	free(back);

	/* The compaction writes the intact records, and only those. */
	unlink(out_path);
	FUZZ_CHECK(kvc_journal_rewrite(out_path, links, n, &fd) == 0);
	close(fd);
	len = read_file(out_path, size);
	FUZZ_CHECK(len == n * REC);
	FUZZ_CHECK(!memcmp(got, want, len));
	FUZZ_CHECK(kvc_journal_read(out_path, &back, &n2, &bad2) == 0);
	FUZZ_CHECK(n2 == n && bad2 == 0);
	for (size_t i = 0; i < n; i++)
		FUZZ_CHECK(same(&back[i], &links[i]));
	free(back);
	free(links);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	grow(size ? size : 1);
	try_journal(data, size);

	memcpy(fixed, data, size);
	for (size_t off = 0; off + REC <= size; off += REC)
		fuzz_put32(fixed + off + 76, kvc_crc32c(0, fixed + off, 76));
	try_journal(fixed, size);
	return 0;
}
