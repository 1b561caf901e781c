/* SPDX-License-Identifier: GPL-2.0 */
/*
 * tier_fs: what the filesystem under a tier's directory can do, and
 * whether that is what kvcache relies on (Documentation/design/tiers.md,
 * "What the filesystem must do"). Looked at once, when the tier opens.
 *
 *  - Atomic publication needs link(2) or renameat2(RENAME_NOREPLACE):
 *    without either a tier cannot be written (an error).
 *  - A soft NFS mount fails I/O the server does not answer in time: those
 *    are misses and spill errors, never a torn block, but a server
 *    restart then costs hits (a warning).
 *  - Leases on a shared tier are mtimes other nodes see through their
 *    attribute cache: one kept longer than 3/4 of the grace lets another
 *    node collect a block this node is reading (a warning).
 *
 * The parsers take text (a mountinfo file, an option string), so that
 * the host tests give them every case without mounting anything.
 */
#ifndef KVC_TIER_FS_H
#define KVC_TIER_FS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* NFS's attribute cache bounds, when the mount does not say (nfs(5)). */
#define KVC_NFS_ACREGMAX_DEFAULT	60
#define KVC_NFS_ACDIRMAX_DEFAULT	60

struct kvc_tier_fs {
	char type[32];		/* mountinfo's: "nfs4", "ext4", "tmpfs" */
	char mount[256];	/* the mount point that holds the directory */
	bool nfs;
	bool soft;		/* soft or softerr */
	bool readonly;
	unsigned int vers_major, vers_minor;	/* NFS; 0: not said */
	unsigned int acregmax, acdirmax;	/* seconds (noac: 0) */
	unsigned int nconnect;
	char lookupcache[8];	/* "all" (the default), "pos", "none" */
	/* From the probe (kvc_tier_fs_probe()). */
	bool probed;
	bool hardlinks;
	bool noreplace;		/* renameat2(RENAME_NOREPLACE) */
};

/*
 * The mount in mountinfo (/proc/self/mountinfo's format) whose mount
 * point is the longest prefix of path (absolute, resolved): 0 with fs
 * filled, or -ENOENT if none is. Lines of another shape are skipped.
 */
int kvc_tier_fs_mountinfo(FILE *f, const char *path, struct kvc_tier_fs *fs);

/* An NFS mount's super options ("rw,vers=4.2,hard,..."), into fs. */
void kvc_tier_fs_nfs_options(const char *opts, struct kvc_tier_fs *fs);

/*
 * The filesystem of directory dir: its mount from /proc/self/mountinfo,
 * and, when dir is writable, a probe of link(2) and RENAME_NOREPLACE
 * with a file of this node's (tag) that is gone again when this
 * returns. 0 or -errno (the mount table unreadable: fs->type empty).
 */
int kvc_tier_fs_probe(const char *dir, const char *tag,
		      struct kvc_tier_fs *fs);

/*
 * What kvcache makes of it, for tier name (g3, g4) in dir, shared with
 * a lease grace of grace_ms: each finding is said through kvc_log at its
 * level. 0, or -EOPNOTSUPP when a writable tier could not publish a
 * block atomically.
 */
int kvc_tier_fs_judge(const struct kvc_tier_fs *fs, const char *name,
		      const char *dir, bool shared, uint64_t grace_ms);

#endif /* KVC_TIER_FS_H */
