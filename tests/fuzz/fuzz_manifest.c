// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer harness for a tier's manifest (helper/common/manifest.c): the file
 * of 96-byte records a restart reads to rebuild the index. The input is
 * the manifest file; kvc_mf_read() is the code under test, through the
 * filesystem as kvcached uses it (a scratch directory under $TMPDIR,
 * removed at exit).
 *
 * Each input is tried as it is and "fixed up" (every record's CRC
 * recomputed), so the fuzzer reaches the field checks behind the
 * checksum too.
 *
 * Invariants, beyond "no crash, no sanitizer report", against a reference
 * decoder written here from the layout in manifest.h:
 *  - kvc_mf_read() returns exactly the intact records, in file order, with
 *    their fields, and counts every other whole record and a torn tail in
 *    bad: n + bad is the number of records the file's size holds;
 *  - the records read, written back (kvc_mf_rewrite() for the file as it
 *    is, kvc_mf_append() one by one for the fixed-up one), give exactly
 *    the bytes of the intact records: one encoding per record;
 *  - that file reads back to the same records, none bad.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_files.h"
#include "manifest.h"

#define REC	KVC_MF_REC_SIZE

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_files_init("fuzz_manifest");
	return 0;
}

/* The reference: manifest.h's layout, checked field by field. */
static bool ref_decode(const uint8_t *b, struct kvc_mf_rec *r)
{
	uint32_t flags = fuzz_le32(b + 8);

	if (memcmp(b, "KVMF", 4) ||
	    fuzz_le32(b + 88) != kvc_crc32c_sw(0, b, 88) ||
	    fuzz_le32(b + 12) || fuzz_le32(b + 92) || flags > 1 ||
	    !fuzz_le32(b + 4))
		return false;
	r->ns = fuzz_le32(b + 4);
	r->first = flags;
	r->size = fuzz_le32(b + 16) | (uint64_t)fuzz_le32(b + 20) << 32;
	memcpy(r->key, b + 24, KVC_BF_KEY_SIZE);
	memcpy(r->parent, b + 56, KVC_BF_KEY_SIZE);
	return true;
}

static bool same(const struct kvc_mf_rec *a, const struct kvc_mf_rec *b)
{
	return a->ns == b->ns && a->first == b->first && a->size == b->size &&
	       !memcmp(a->key, b->key, KVC_BF_KEY_SIZE) &&
	       !memcmp(a->parent, b->parent, KVC_BF_KEY_SIZE);
}

/* The manifest in p (size bytes); append: write back by kvc_mf_append. */
static void try_manifest(const uint8_t *p, size_t size, bool append)
{
	struct kvc_mf_rec *recs, *back, ref;
	size_t n, bad, n2, bad2, whole = size / REC, intact = 0, len;

	write_file(in_path, p, size);
	FUZZ_CHECK(kvc_mf_read(in_path, &recs, &n, &bad) == 0);
	FUZZ_CHECK(n + bad == whole + (size % REC ? 1 : 0));
	for (size_t i = 0; i < whole; i++) {
		if (!ref_decode(p + i * REC, &ref))
			continue;
		FUZZ_CHECK(intact < n);
		FUZZ_CHECK(same(&recs[intact], &ref));
		memcpy(want + intact * REC, p + i * REC, REC);
		intact++;
	}
	FUZZ_CHECK(intact == n);

	unlink(out_path);
	if (append) {
		int fd = kvc_mf_open(out_path);

		FUZZ_CHECK(fd >= 0);
		for (size_t i = 0; i < n; i++)
			FUZZ_CHECK(kvc_mf_append(fd, &recs[i]) == 0);
		close(fd);
	} else {
		FUZZ_CHECK(kvc_mf_rewrite(out_path, recs, n) == 0);
	}
	len = read_file(out_path, size);
	FUZZ_CHECK(len == n * REC);
	FUZZ_CHECK(!memcmp(got, want, len));

	FUZZ_CHECK(kvc_mf_read(out_path, &back, &n2, &bad2) == 0);
	FUZZ_CHECK(n2 == n && bad2 == 0);
	for (size_t i = 0; i < n; i++)
		FUZZ_CHECK(same(&back[i], &recs[i]));
	free(back);
	free(recs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	grow(size ? size : 1);
	try_manifest(data, size, false);

	memcpy(fixed, data, size);
	for (size_t off = 0; off + REC <= size; off += REC)
		fuzz_put32(fixed + off + 88, kvc_crc32c(0, fixed + off, 88));
	try_manifest(fixed, size, true);
	return 0;
}
