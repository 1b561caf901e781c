/* SPDX-License-Identifier: GPL-2.0 */
/*
 * bench: what the host benchmarks share: a monotonic clock, a key
 * generator (rand.h's), a comparator for medians, and how they give up.
 */
#ifndef KVC_BENCH_H
#define KVC_BENCH_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rand.h"	/* kvc_mix64(): random-looking keys from counters */

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* qsort() comparator of doubles, for medians. */
static inline int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Print "prog: what: error" and exit 1; err is an errno, either sign. */
static inline void bench_die(const char *what, int err)
{
	fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what,
		err ? strerror(err < 0 ? -err : err) : "failed");
	exit(1);
}

#endif /* KVC_BENCH_H */
