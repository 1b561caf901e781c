/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rand: splitmix64 (Steele, Lea, Flood), the one pseudo-random stream
 * of the tree. Not for anything secret: it is here because it is
 * reproducible, so a seed gives the same sequence on every machine and
 * in every process. The engine's model weights and its prompts are
 * derived from it, and tests compare against those, so the constants
 * and shifts must never change.
 *
 * kvc_splitmix64() steps a state by the golden gamma and returns the
 * mixed value; kvc_mix64() is the finalizer alone, which turns counters
 * (or any numbers that differ in a few bits) into unrelated-looking
 * 64-bit values.
 */
#ifndef KVC_RAND_H
#define KVC_RAND_H

#include <stdint.h>

/* 2^64 / the golden ratio, odd: the step between splitmix64 states. */
#define KVC_GOLDEN_GAMMA	0x9e3779b97f4a7c15ULL

static inline uint64_t kvc_mix64(uint64_t x)
{
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static inline uint64_t kvc_splitmix64(uint64_t *state)
{
	return kvc_mix64(*state += KVC_GOLDEN_GAMMA);
}

#endif /* KVC_RAND_H */
