/* SPDX-License-Identifier: GPL-2.0 */
/*
 * blockfile: the on-disk format of one KV block in the persistent tiers
 * (G3: a local NVMe directory, G4: a directory shared by several nodes),
 * described in Documentation/design/blockfile.md.
 *
 * One file per block: a 4096-byte header, then the payload padded with
 * zeros to a multiple of 4096, so every read and write of a whole file
 * can be O_DIRECT. The header is self-describing (key, parent key,
 * namespace id, writer) and checksummed; the payload has its own CRC32C.
 * Files are content-addressed,
 *
 *   dir/aa/bb/<64 hex digits of the key>.kvb
 *
 * and published atomically (temp file, fsync, link or RENAME_NOREPLACE,
 * fsync of the directory), so a reader on any node sees a whole block or
 * none, and a block published twice keeps its first copy. Only POSIX
 * semantics are assumed (NFS, Lustre, CephFS, GPFS).
 *
 * kvcached keeps one such directory per namespace (tier.h), so a block of
 * one tenant is never found under another's.
 *
 * No state: every function may be called from any thread.
 */
#ifndef KVC_BLOCKFILE_H
#define KVC_BLOCKFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#define KVC_BF_HEADER_SIZE	4096
#define KVC_BF_ALIGN		4096	/* payload padding, O_DIRECT unit */
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
	uint32_t ns_id;				/* the fleet-wide namespace */
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
/* The portable table version, which kvc_crc32c() uses without SSE 4.2. */
uint32_t kvc_crc32c_sw(uint32_t crc, const void *buf, size_t len);

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
 * other than 4096, non-zero reserved bytes, unknown flags, a payload
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

/* Bytes in the file of a @payload_len-byte block: 4096 + padded payload. */
uint64_t kvc_bf_file_size(uint64_t payload_len);

/*
 * Parse a block file's name, "<64 hex digits>.kvb", into @key: 0, or
 * -EINVAL for any other name (temp files, quarantine, strays).
 */
int kvc_bf_parse_name(const char *name, uint8_t key[KVC_BF_KEY_SIZE]);

/*
 * Finish a file image in @image, kvc_bf_file_size(h->payload_len) bytes
 * whose payload the caller has put at image + KVC_BF_HEADER_SIZE: compute
 * h->payload_crc, set h->ctime_ns to now when it is 0, encode the header
 * and zero the padding. Returns 0 or -EINVAL (as kvc_bf_encode_header).
 */
int kvc_bf_build(struct kvc_bf_header *h, uint8_t *image);

/*
 * Verify a whole file image of @size bytes read back for @key: the
 * header decodes, names @key, the size is kvc_bf_file_size() of its
 * payload length, the payload CRC matches and the padding is zero.
 * Returns 0 (with the header in @h), -EBADMSG, or the errors of
 * kvc_bf_decode_header(). The namespace id is the caller's to check.
 */
int kvc_bf_check(const uint8_t *image, uint64_t size,
		 const uint8_t key[KVC_BF_KEY_SIZE], struct kvc_bf_header *h);
/*
 * The same for an image read in two pieces: the header at @hdr and the
 * rest of the file (payload and padding, @size - KVC_BF_HEADER_SIZE
 * bytes) at @payload, as a read straight into a pool block leaves it.
 */
int kvc_bf_check_split(const uint8_t hdr[KVC_BF_HEADER_SIZE],
		       const uint8_t *payload, uint64_t size,
		       const uint8_t key[KVC_BF_KEY_SIZE],
		       struct kvc_bf_header *h);

/*
 * The steps of kvc_bf_publish(), for callers that do the writing
 * themselves (tierio.c, with io_uring):
 *
 * kvc_bf_paths: validate @tmp_tag (1..KVC_BF_MAX_TAG characters, no
 * '/'), build the final path and a temp path unique to this writer (each
 * @len bytes). Returns 0, -EINVAL or -ENAMETOOLONG.
 *
 * kvc_bf_prepare: kvc_bf_paths(), then create the fan-out directories
 * (each new one with KVC_BF_DIR_MODE, its parent fsynced) and look for
 * the final name. Returns 0, -EEXIST (the block is already published:
 * nothing to write), the errors of kvc_bf_paths() or -errno.
 *
 * kvc_bf_open_tmp: create the temp file, with O_DIRECT when the
 * filesystem takes it (*direct says). Returns the descriptor or -errno.
 *
 * kvc_bf_install: once the temp file is written, fsynced and closed,
 * give it its final name without ever replacing a file there (link, or
 * renameat2 RENAME_NOREPLACE where there are no hard links). The temp
 * name is gone afterwards in every case. Returns 0, -EEXIST (another
 * writer was first: its copy stays) or -errno. Then fsync the leaf
 * directory (kvc_bf_fsync_dir_of(final)) to make the name durable.
 */
int kvc_bf_paths(const char *dir, const uint8_t key[KVC_BF_KEY_SIZE],
		 const char *tmp_tag, char *final, char *tmp, size_t len);
int kvc_bf_prepare(const char *dir, const uint8_t key[KVC_BF_KEY_SIZE],
		   const char *tmp_tag, char *final, char *tmp, size_t len);
int kvc_bf_open_tmp(const char *tmp, bool *direct);
/*
 * The modes of what a tier holds, set explicitly whatever the umask:
 * block files are readable by all and fan-out directories searchable by
 * all, because access is decided one level up, by ns<id>/ (the
 * namespace's owner, group and read bits; libkvcache's readers open the
 * files themselves). Manifests list every tenant's keys: 0600.
 */
#define KVC_BF_FILE_MODE	0644
#define KVC_BF_DIR_MODE		0755
#define KVC_BF_PRIVATE_MODE	0600
int kvc_bf_install(const char *tmp, const char *final);

/* fsync a directory, or the directory @file is in: 0 or -errno. */
int kvc_bf_fsync_dir(const char *path);
int kvc_bf_fsync_dir_of(const char *file);

/*
 * Publish one block under @dir, which must exist (it is not created: an
 * unmounted shared filesystem must fail, not fill the root filesystem).
 * The fan-out directories are created as needed. @h->payload_crc is
 * computed here (the caller's value is ignored), and @h->ctime_ns is set
 * to now when it is 0. @tmp_tag names the writer (e.g. its node name: no
 * '/', 1..KVC_BF_MAX_TAG characters) so that writers on several nodes
 * never share a temp file.
 *
 * Synchronous, through one aligned buffer of the file's size: for tools
 * and tests; the daemon writes through tierio.h.
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
 * Read the header of the block file at @path, and its attributes into
 * *@st.
 * Returns 0, or -EBADMSG when the file is not a regular file or its size
 * does not match the header, the errors of kvc_bf_decode_header(), or
 * -errno of open/read. The payload is not read (a recovery scan).
 */
int kvc_bf_read_header(const char *path, struct kvc_bf_header *h,
		       struct stat *st);

/*
 * Read and verify @key's block under @dir into @h and @payload (@cap
 * bytes). Returns 0; -ENOENT (no such block: a miss); -ENOSPC (@cap is
 * below the payload length, which is in @h->payload_len then); -EBADMSG
 * (the header's key is not @key, the file size is not
 * kvc_bf_file_size(), the padding is not zero or a checksum mismatches);
 * the errors of kvc_bf_decode_header(); or another -errno from open/read
 * (-EIO ...).
 *
 * -EBADMSG, -EPROTO, -EPROTONOSUPPORT and -EINVAL mean the file is
 * corrupt: the caller counts it, calls kvc_bf_quarantine() and treats
 * the lookup as a miss.
 */
int kvc_bf_read(const char *dir, const uint8_t key[KVC_BF_KEY_SIZE],
		struct kvc_bf_header *h, void *payload, size_t cap);

/*
 * Move @key's block file of the namespace directory @sub ("ns<id>", one
 * name) under the tier directory @root to
 * @root/.quarantine/<sub>.<hex>.<ns since the epoch>, so it is never
 * read again but can be examined. The quarantine is kvcached's own
 * (kvc_private_dir(): 0700, owned by the effective uid or by @owner),
 * never a directory a tenant can reach, and no component of either path
 * is followed through a link (beneath.h). Returns 0, -ENOENT (already
 * gone, e.g. quarantined by another node), -ELOOP (a link where a
 * directory should be), -EPERM (.quarantine is not private),
 * -ENAMETOOLONG or -errno.
 */
#define KVC_BF_QUARANTINE_DIR	".quarantine"
int kvc_bf_quarantine(const char *root, const char *sub,
		      const uint8_t key[KVC_BF_KEY_SIZE], uid_t owner);

/*
 * kvc_bf_read_header() of the entry @name of the directory @dirfd,
 * without following a link there (-EBADMSG for a link).
 */
int kvc_bf_read_header_at(int dirfd, const char *name,
			  struct kvc_bf_header *h, struct stat *st);

#endif /* KVC_BLOCKFILE_H */
