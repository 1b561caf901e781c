// SPDX-License-Identifier: GPL-2.0
/*
 * beneath: paths resolved below a directory, never through a link (see
 * beneath.h).
 *
 * openat2() does the whole resolution in the kernel, atomically: no
 * component can be swapped for a link between two checks. Kernels
 * before 5.6 lack it (ENOSYS; seccomp filters that do not know it say
 * EPERM or ENOSYS): there each component is opened with O_NOFOLLOW from
 * the one before, which refuses a link at every step as well.
 */
#include "beneath.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A relative path with no ".." component and no empty name. */
static bool rel_ok(const char *rel)
{
	const char *p = rel;

	if (!rel[0] || rel[0] == '/')
		return false;
	while (*p) {
		size_t n = strcspn(p, "/");

		if (!n || (n == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		p += n;
		if (*p == '/')
			p++;
	}
	return true;
}

/* The walk of O_NOFOLLOW opens, for kernels without openat2(). */
static int open_walk(int dirfd, const char *rel, int flags, mode_t mode)
{
	char name[NAME_MAX + 1];
	const char *p = rel;
	int fd = dirfd, next;

	for (;;) {
		size_t n = strcspn(p, "/");
		bool last = !p[n];

		if (n > NAME_MAX) {
			next = -ENAMETOOLONG;
		} else {
			memcpy(name, p, n);
			name[n] = '\0';
			next = openat(fd, name, last ? flags | O_NOFOLLOW :
				      O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
				      O_CLOEXEC, mode);
			if (next < 0)
				next = -errno;
		}
		if (fd != dirfd)
			close(fd);
		if (next < 0 || last)
			return next;
		fd = next;
		p += n + 1;
	}
}

int kvc_open_beneath(int dirfd, const char *rel, int flags, mode_t mode)
{
	struct open_how how = {
		.flags = (unsigned int)flags,
		/* openat2 refuses a mode without O_CREAT or O_TMPFILE (which
		 * holds O_DIRECTORY's bit: test it whole). */
		.mode = (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ?
			mode : 0,
		.resolve = KVC_RESOLVE_FLAGS,
	};
	long fd;

	if (!rel_ok(rel))
		return -EINVAL;
	fd = syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
	if (fd >= 0)
		return (int)fd;
	if (errno == ENOSYS)
		return open_walk(dirfd, rel, flags, mode);
	return -errno;
}

bool kvc_dir_foreign(int fd, uid_t owner)
{
	struct stat st;

	if (fstat(fd, &st) || !S_ISDIR(st.st_mode))
		return true;
	if (st.st_uid != geteuid() && st.st_uid != owner)
		return true;
	return (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
}

int kvc_private_dir(int dirfd, const char *name, uid_t owner)
{
	struct stat st;
	int fd;

	if (mkdirat(dirfd, name, 0700) && errno != EEXIST)
		return -errno;
	fd = kvc_open_beneath(dirfd, name, O_RDONLY | O_DIRECTORY |
			      O_CLOEXEC, 0);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st)) {
		int err = -errno;

		close(fd);
		return err;
	}
	if ((st.st_uid != geteuid() && st.st_uid != owner) ||
	    (st.st_mode & 077)) {
		close(fd);
		return -EPERM;
	}
	return fd;
}
