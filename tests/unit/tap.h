/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Minimal TAP output for the host unit tests.
 *
 * Each test is a function; tap_run() calls it and prints one "ok N name"
 * or "not ok N name" line. Inside a test, TAP_CHECK(cond) records a failure
 * with its file and line and keeps going. tap_done() prints the plan and
 * returns the exit status for main().
 */
#ifndef KVC_TAP_H
#define KVC_TAP_H

#include <stdio.h>

static int tap_count, tap_failed, tap_cur_failed;

#define TAP_CHECK(cond)							\
	do {								\
		if (!(cond)) {						\
			tap_cur_failed = 1;				\
			printf("# %s:%d: check failed: %s\n",		\
			       __FILE__, __LINE__, #cond);		\
		}							\
	} while (0)

static inline void tap_run(const char *name, void (*fn)(void))
{
	tap_cur_failed = 0;
	fn();
	tap_count++;
	if (tap_cur_failed)
		tap_failed++;
	printf("%sok %d %s\n", tap_cur_failed ? "not " : "", tap_count, name);
	fflush(stdout);
}

#define TAP_RUN(fn) tap_run(#fn, fn)

static inline int tap_done(void)
{
	printf("1..%d\n", tap_count);
	return tap_failed ? 1 : 0;
}

#endif /* KVC_TAP_H */
