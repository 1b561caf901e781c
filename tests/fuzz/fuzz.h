/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the fuzz harnesses share (tests/fuzz/README in testing.md).
 *
 * A harness is more than "it does not crash": each checks invariants a
 * logic bug would break (a decoded message re-encodes to the same bytes,
 * counts stay within the input and the documented limits...). A broken
 * invariant calls abort() through FUZZ_CHECK, which libFuzzer reports as
 * a crash and saves the input that caused it, like any sanitizer report.
 */
#ifndef KVC_FUZZ_H
#define KVC_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* The entry point libFuzzer calls for each input. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/*
 * Abort with the failed condition and where it is: the message is what a
 * reader of the crash report needs to tell which rule broke.
 */
#define FUZZ_CHECK(cond)						\
	do {								\
		if (!(cond)) {						\
			fprintf(stderr, "%s:%d: invariant broken: %s\n",\
				__FILE__, __LINE__, #cond);		\
			abort();					\
		}							\
	} while (0)

/* A little-endian field of the input, read byte by byte. */
static inline uint32_t fuzz_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline uint16_t fuzz_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static inline void fuzz_put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

#endif /* KVC_FUZZ_H */
