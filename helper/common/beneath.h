/* SPDX-License-Identifier: GPL-2.0 */
/*
 * beneath: paths resolved below a directory that kvcached owns, never
 * through a link.
 *
 * A tier's directory tree is walked, written and renamed in by kvcached
 * running as root. Nothing below the tier root may redirect it: a
 * symbolic link, a ".." or a mount point planted by anyone who could
 * write there must make the call fail, not reach another tenant's files
 * or a directory outside the tier. Every open below a tier root goes
 * through kvc_open_beneath() (openat2() with RESOLVE_BENEATH and
 * RESOLVE_NO_SYMLINKS, or a walk of O_NOFOLLOW opens on kernels older
 * than 5.6), and the other calls (rename, unlink, link, mkdir) are made
 * relative to a directory descriptor opened that way, on a single name.
 */
#ifndef KVC_BENEATH_H
#define KVC_BENEATH_H

#include <stdbool.h>
#include <sys/types.h>
#include <linux/openat2.h>

/* The resolve flags of every open below a tier root (openat2(2)). */
#define KVC_RESOLVE_FLAGS	(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | \
				 RESOLVE_NO_MAGICLINKS)

/*
 * Open @rel (relative, no ".." component) below the directory @dirfd
 * with @flags and @mode, following no symbolic link in any component.
 * Returns the descriptor, or -errno: -ELOOP where a component is a
 * link, -EXDEV where it would leave @dirfd, -EINVAL for an absolute path
 * or a ".." component.
 */
int kvc_open_beneath(int dirfd, const char *rel, int flags, mode_t mode);

/*
 * A directory @name in @dirfd that only this process's user may use:
 * made 0700 when missing; an existing one must be a directory (not a
 * link) owned by the effective uid (or by @owner when that is not -1: a
 * root-squashed shared filesystem gives kvcached's files another owner)
 * with no group or other permission. Returns an O_RDONLY|O_DIRECTORY
 * descriptor, or -errno (-EPERM: it exists but is not private; the
 * caller says where).
 */
int kvc_private_dir(int dirfd, const char *name, uid_t owner);

/*
 * Whether the directory @fd is writable by anyone but its owner, or is
 * owned by neither the effective uid nor @owner: a place a tenant could
 * plant entries in.
 */
bool kvc_dir_foreign(int fd, uid_t owner);

#endif /* KVC_BENEATH_H */
