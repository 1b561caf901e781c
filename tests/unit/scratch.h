/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Scratch directories for the host unit tests that touch the filesystem,
 * and running a check as an unprivileged user (root ignores directory
 * permissions, so permission tests drop to nobody in a child).
 * scratch.c has the code, compiled once.
 */
#ifndef KVC_SCRATCH_H
#define KVC_SCRATCH_H

#include <stddef.h>

#define SCRATCH_NOBODY	65534

/* A fresh directory /tmp/<prefix>-XXXXXX in buf: 0, or -1 (perror'd). */
int scratch_make(char *buf, size_t len, const char *prefix);

/* Remove dir and everything under it. */
void scratch_remove(const char *dir);

/*
 * Run body(arg) as nobody in a child (when root; else right here), with
 * pass (the scratch directory) opened to others for the duration. The
 * child's check failures (and a TAP_ASSERT_*() that stops it) make it
 * exit 1, which fails the caller's check.
 */
void scratch_as_nobody(const char *pass, void (*body)(const char *arg),
		       const char *arg);

#endif /* KVC_SCRATCH_H */
