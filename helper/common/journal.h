/* SPDX-License-Identifier: GPL-2.0 */
/*
 * journal: kvcached's `parents` file (kernel mode only), which block of
 * the pool follows which. The kernel keeps every sealed block with its
 * namespace and key across a daemon restart, but not the chains; a
 * restart reads this file to put the blocks back under their parents
 * (Documentation/admin-guide/kvcached.md, "parents").
 *
 * File: a sequence of 80-byte records, each checked on its own, so a
 * record torn by a crash mid-append, or damaged later, costs only its own
 * block (an orphan, reclaimed) and never the records after it:
 *
 *   0  magic "KVPR"    4  version (u16, 1)    6  flags (bit 0: first)
 *   7  reserved 0      8  ns id (u32, 1..KVCACHE_NS_MAX)
 *  12  key (32)       44  parent key (32, zero for a first block)
 *  76  CRC32C of bytes 0..75
 *
 * All integers little-endian, written byte by byte (the file may move
 * between hosts with its disk, as the tiers' files do).
 *
 * Lifetime and locking: no state here. The daemon's event loop is the only
 * writer of its file (one descriptor, O_APPEND) and the only caller.
 */
#ifndef KVC_JOURNAL_H
#define KVC_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/kvcache.h>

#define KVC_JOURNAL_REC		80
#define KVC_JOURNAL_VERSION	1
/* The smallest size at which a running daemon compacts its journal. */
#define KVC_JOURNAL_MIN_COMPACT	(1u << 20)

/* One record: block (ns, key) follows parent, or starts a chain. */
struct kvc_link {
	uint32_t ns;
	bool first;
	uint8_t key[KVCACHE_KEY_SIZE];
	uint8_t parent[KVCACHE_KEY_SIZE];	/* ignored when first */
};

/* The record for l (its parent written as zeros when first). */
void kvc_journal_encode(const struct kvc_link *l,
			uint8_t rec[KVC_JOURNAL_REC]);

/*
 * Check and decode one record: 0, or -EBADMSG (magic, version, CRC, flag
 * or reserved bits, or a first block with a parent) or -ERANGE (the
 * namespace is not 1..KVCACHE_NS_MAX). *l is written only on success.
 */
int kvc_journal_decode(const uint8_t rec[KVC_JOURNAL_REC],
		       struct kvc_link *l);

/*
 * Every valid record of the @len bytes at @buf, in file order, into a
 * malloc'd array (*out, *n; NULL when none). *bad counts the whole
 * records refused, plus one for a torn tail (len not a multiple of 80):
 * *n + *bad records for the size. 0 or -ENOMEM.
 */
int kvc_journal_parse(const uint8_t *buf, size_t len, struct kvc_link **out,
		      size_t *n, size_t *bad);

/* kvc_journal_parse() of the file @path: 0 or -errno (-ENOENT: none). */
int kvc_journal_read(const char *path, struct kvc_link **out, size_t *n,
		     size_t *bad);

/* Order by (ns, key), for qsort() and bsearch(). */
int kvc_link_cmp(const void *a, const void *b);

/*
 * Append one record to @fd (opened O_APPEND by kvc_journal_rewrite()):
 * 0 or -errno. A partial write (a full disk) is cut off again, so the
 * records after it stay in step.
 */
int kvc_journal_append(int fd, const struct kvc_link *l);

/*
 * Replace @path by the @n records given: @path.new, fsync, rename over
 * @path, fsync of the directory; a crash at any point leaves the old file
 * or the new one, whole. On success *fd (if not NULL) is the new file
 * opened for appending. 0 or -errno (the old file stays then).
 */
int kvc_journal_rewrite(const char *path, const struct kvc_link *l, size_t n,
			int *fd);

/*
 * Is a journal of @bytes due for compaction, with @live blocks to keep
 * and @last bytes after the previous compaction? When it is over
 * max(@min, 4 x the live records' bytes) and has at least doubled since
 * then: with @min = KVC_JOURNAL_MIN_COMPACT (1 MiB; tests pass less) the
 * file stays within max(1 MiB, 320 B x pool blocks) + 80 B, and each
 * compaction is paid for by as many appends as it writes.
 */
bool kvc_journal_due(uint64_t bytes, uint64_t live, uint64_t last,
		     uint64_t min);

#endif /* KVC_JOURNAL_H */
