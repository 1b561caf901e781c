/* SPDX-License-Identifier: GPL-2.0 */
/*
 * manifest: a tier's record of the block files a node wrote, so a restart
 * rebuilds the index from one sequential read and a stat() per block
 * instead of opening and reading every file (Documentation/design/tiers.md has
 * the measurement at 1M blocks: 7 times faster with a cold cache, 4.5
 * times warm).
 *
 * A manifest is a hint, never the truth: the files are. Every record is
 * checked against its file at recovery (present, a regular file, of the
 * recorded size), and a background scan later finds what no manifest
 * names. A record is appended before its file is written, so after a
 * crash of the writer every file it published, and every temp file it
 * left, has a record.
 *
 * File: a sequence of 96-byte records, each with its own CRC32C, so a
 * record torn by a crash mid-append is recognised and skipped:
 *
 *   0  magic "KVMF"   4  ns id   8  flags (bit 0: first block)
 *  12  reserved 0    16  file size (u64)
 *  24  key (32)      56  parent key (32, zero for a first block)
 *  88  CRC32C of bytes 0..87     92  reserved 0
 *
 * All integers little-endian. No state: any thread.
 */
#ifndef KVC_MANIFEST_H
#define KVC_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "blockfile.h"

#define KVC_MF_REC_SIZE		96

struct kvc_mf_rec {
	uint32_t ns;
	bool first;
	uint64_t size;			/* bytes of the block file */
	uint8_t key[KVC_BF_KEY_SIZE];
	uint8_t parent[KVC_BF_KEY_SIZE];
};

/*
 * Open @path for appending, created if need be, mode 0600 whatever the
 * umask (set again on an existing file): a descriptor or -errno.
 */
int kvc_mf_open(const char *path);

/* Append one record (one write(2) of 96 bytes): 0 or -errno. */
int kvc_mf_append(int fd, const struct kvc_mf_rec *r);

/*
 * Read every intact record of @path into a malloc'd array (*out, *n);
 * *bad counts records skipped (torn, or not records at all). Returns 0,
 * or -errno (-ENOENT: no manifest).
 */
int kvc_mf_read(const char *path, struct kvc_mf_rec **out, size_t *n,
		size_t *bad);

/*
 * Replace @path by the @n records given: a temp file (0600), fsync,
 * rename, directory fsync. 0 or -errno (the old manifest stays then).
 */
int kvc_mf_rewrite(const char *path, const struct kvc_mf_rec *r, size_t n);

#endif /* KVC_MANIFEST_H */
