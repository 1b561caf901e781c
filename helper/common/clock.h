/* SPDX-License-Identifier: GPL-2.0 */
/*
 * clock: seconds on CLOCK_MONOTONIC, as a double, for deadlines and
 * rates. Never goes back with the wall clock; microsecond resolution is
 * more than any deadline here needs (the smallest is a millisecond).
 */
#ifndef KVC_CLOCK_H
#define KVC_CLOCK_H

#include <time.h>

static inline double kvc_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#endif /* KVC_CLOCK_H */
