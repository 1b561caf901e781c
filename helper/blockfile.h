/* SPDX-License-Identifier: GPL-2.0 */
/*
 * blockfile: the on-disk format of one KV block in the persistent tiers
 * (G3: a local NVMe directory, G4: a directory shared by several nodes),
 * described in Documentation/blockfile.md.
 *
 * One file per block: a 4096-byte header, then the payload, so the
 * payload starts O_DIRECT-aligned. The header is self-describing (key,
 * parent key, namespace seed, writer) and checksummed; the payload has
 * its own CRC32C. Files are content-addressed,
 *
 *   dir/aa/bb/<64 hex digits of the key>.kvb
 *
 * and published atomically (temp file, fsync, link or RENAME_NOREPLACE,
 * fsync of the directory), so a reader on any node sees a whole block or
 * none, and a block published twice keeps its first copy. Only POSIX
 * semantics are assumed (NFS, Lustre, CephFS, GPFS).
 *
 * No state: every function may be called from any thread.
 */
#ifndef KVC_BLOCKFILE_H
#define KVC_BLOCKFILE_H

#include <stddef.h>
#include <stdint.h>

#define KVC_BF_HEADER_SIZE	4096
#define KVC_BF_VERSION		1
#define KVC_BF_KEY_SIZE		32
#define KVC_BF_NODE_ID_SIZE	64
#define KVC_BF_MAX_PAYLOAD	(1ULL << 32)
#define KVC_BF_MAX_TAG		64

/* flags */
#define KVC_BF_F_FIRST		(1U << 0)	/* first block of its chain */

/*
 * The decoded header. Magic, version, header size, the reserved word and
 * the header checksum are not here: encode writes them, decode checks
 * them.
 */
struct kvc_bf_header {
	uint32_t flags;				/* KVC_BF_F_* */
	uint8_t key[KVC_BF_KEY_SIZE];
	uint8_t parent[KVC_BF_KEY_SIZE];	/* zero iff KVC_BF_F_FIRST */
	uint8_t ns_seed[KVC_BF_KEY_SIZE];
	uint64_t payload_len;			/* 1 .. KVC_BF_MAX_PAYLOAD */
	uint32_t payload_crc;			/* CRC32C of the payload */
	uint64_t ctime_ns;			/* creation, ns since the epoch */
	/* The writer's node name, NUL-terminated (at most 64 characters). */
	char node_id[KVC_BF_NODE_ID_SIZE + 1];
};

/*
 * CRC32C (Castagnoli, reflected polynomial 0x82F63B78), in software.
 * Start with crc = 0; pass the previous result to continue over more
 * bytes: kvc_crc32c(kvc_crc32c(0, a, n), b, m) == CRC of a then b.
 */
uint32_t kvc_crc32c(uint32_t crc, const void *buf, size_t len);

/*
 * Encode @h into the 4096 bytes of @out. Returns 0, or -EINVAL for
 * unknown flags, a payload length out of range, a parent key that is not
 * zero on a first block (or zero on a later one), or a node id without
 * its NUL.
 */
int kvc_bf_encode_header(const struct kvc_bf_header *h,
			 uint8_t out[KVC_BF_HEADER_SIZE]);

/*
 * Decode and validate 4096 header bytes. Returns 0, -EPROTO (bad magic:
 * not a block file), -EPROTONOSUPPORT (a version this code does not
 * know), -EBADMSG (header checksum mismatch), or -EINVAL (a header size
 * other than 4096, a non-zero reserved word, unknown flags, a payload
 * length out of range, a parent key inconsistent with the first-block
 * flag, non-zero bytes after the node id's NUL or after the checksum).
 */
int kvc_bf_decode_header(const uint8_t in[KVC_BF_HEADER_SIZE],
			 struct kvc_bf_header *h);

/*
 * The path of @key's block under @dir: dir/aa/bb/<hex>.kvb, aa and bb
 * being the key's first two bytes in hex. Returns 0 or -ENAMETOOLONG.
 */
int kvc_bf_path(const char *dir, const uint8_t key[KVC_BF_KEY_SIZE],
		char *out, size_t len);

/*
 * Publish one block under @dir, which must exist (it is not created: an
 * unmounted shared filesystem must fail, not fill the root filesystem).
 * The fan-out directories are created as needed. @h->payload_crc is
 * computed here (the caller's value is ignored), and @h->ctime_ns is set
 * to now when it is 0. @tmp_tag names the writer (e.g. its node name: no
 * '/', 1..KVC_BF_MAX_TAG characters) so that writers on several nodes
 * never share a temp file.
 *
 * Returns 0 when the block is durable at its final path; -EEXIST when a
 * block with this key was already there (kept as it is: publication is
 * idempotent); -EINVAL (bad header or tag); -ENAMETOOLONG; or -errno of
 * the failing call, in which case no temp file is left behind. A failure
 * of the last directory fsync (-EIO) leaves the block visible but
 * perhaps not durable.
 */
int kvc_bf_publish(const char *dir, const struct kvc_bf_header *h,
		   const void *payload, const char *tmp_tag);

/*
 * Read and verify @key's block under @dir into @h and @payload (@cap
 * bytes). Returns 0; -ENOENT (no such block: a miss); -ENOSPC (@cap is
 * below the payload length, which is in @h->payload_len then); -EBADMSG
 * (the header's key is not @key, the file size is not 4096 + payload
 * length, or a checksum mismatches); the errors of kvc_bf_decode_header();
 * or another -errno from open/read (-EIO ...).
 *
 * -EBADMSG, -EPROTO, -EPROTONOSUPPORT and -EINVAL mean the file is
 * corrupt: the caller counts it, calls kvc_bf_quarantine() and treats
 * the lookup as a miss.
 */
int kvc_bf_read(const char *dir, const uint8_t key[KVC_BF_KEY_SIZE],
		struct kvc_bf_header *h, void *payload, size_t cap);

/*
 * Move @key's block file to dir/quarantine/<hex>.<ns since the epoch>
 * (creating that directory) so it is never read again but can be
 * examined. Returns 0, -ENOENT (already gone, e.g. quarantined by
 * another node), -ENAMETOOLONG or -errno.
 */
int kvc_bf_quarantine(const char *dir, const uint8_t key[KVC_BF_KEY_SIZE]);

#endif /* KVC_BLOCKFILE_H */
