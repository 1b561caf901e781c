/* SPDX-License-Identifier: GPL-2.0 */
/*
 * clock: CLOCK_MONOTONIC, which never goes back with the wall clock.
 * kvc_now(): seconds as a double, for deadlines and rates (microsecond
 * resolution is more than any deadline here needs: the smallest is a
 * millisecond). kvc_now_ns(): nanoseconds as an integer, for times kept
 * in structures and compared exactly, or handed on (sd_notify's
 * MONOTONIC_USEC).
 */
#ifndef KVC_CLOCK_H
#define KVC_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline double kvc_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline uint64_t kvc_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif /* KVC_CLOCK_H */
