// SPDX-License-Identifier: GPL-2.0
/*
 * Scratch directories and running as nobody, for the host unit tests:
 * see scratch.h.
 */
#include <ftw.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "scratch.h"
#include "tap.h"

int scratch_make(char *buf, size_t len, const char *prefix)
{
	snprintf(buf, len, "/tmp/%s-XXXXXX", prefix);
	if (!mkdtemp(buf)) {
		perror("mkdtemp");
		return -1;
	}
	return 0;
}

static int scratch_rm_one(const char *path, const struct stat *st,
			  int type, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return type == FTW_DP ? rmdir(path) : unlink(path);
}

void scratch_remove(const char *dir)
{
	if (nftw(dir, scratch_rm_one, 16, FTW_DEPTH | FTW_PHYS))
		perror("cleanup");
}

void scratch_as_nobody(const char *pass, void (*body)(const char *arg),
		       const char *arg)
{
	pid_t pid;
	int st;

	if (geteuid() != 0) {
		body(arg);
		return;
	}
	TAP_CHECK(chmod(pass, 0711) == 0);	/* nobody may pass through */
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		if (setgroups(0, NULL) || setgid(SCRATCH_NOBODY) ||
		    setuid(SCRATCH_NOBODY))
			_exit(2);
		body(arg);
		fflush(stdout);
		_exit(tap_cur_failed ? 1 : 0);
	}
	TAP_CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
		  WEXITSTATUS(st) == 0);
	TAP_CHECK(chmod(pass, 0700) == 0);
}
