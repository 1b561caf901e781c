// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer harness for a namespace's description in g4
 * (helper/common/nsdesc.c): the file another node wrote, by which this
 * node learns a namespace's owner, mode and salt. The input is the file.
 *
 * Each input is tried as it is and "fixed up" (a last line starting with
 * "crc32c " given the right CRC of the bytes before it), so the fuzzer
 * reaches the field checks behind the checksum too.
 *
 * Invariants, beyond "no crash, no sanitizer report":
 *  - a description parsed is in range (id 1..65535, mode at most 0777, a
 *    node name of 1..64 characters without space or control character);
 *  - encoded again it gives exactly the input's bytes: one encoding per
 *    description, so no two files mean the same namespace differently;
 *  - an input over KVC_NSDESC_MAX bytes never parses.
 */
#include <errno.h>
#include <string.h>

#include "blockfile.h"
#include "fuzz.h"
#include "nsdesc.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

static void check(const uint8_t *data, size_t size)
{
	char again[KVC_NSDESC_MAX + 1];
	struct kvc_nsdesc d;
	int n;

	if (kvc_nsdesc_parse((const char *)data, size, &d))
		return;
	FUZZ_CHECK(size <= KVC_NSDESC_MAX);
	FUZZ_CHECK(d.id >= 1 && d.id <= 65535 && d.mode <= 0777);
	n = (int)strnlen(d.node, sizeof(d.node));
	FUZZ_CHECK(n >= 1 && n < KVC_NSDESC_NODE_MAX);
	for (int i = 0; i < n; i++)
		FUZZ_CHECK(d.node[i] > ' ' && d.node[i] <= '~');
	n = kvc_nsdesc_encode(&d, again, sizeof(again));
	FUZZ_CHECK(n > 0 && (size_t)n == size && !memcmp(again, data, size));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t fixed[KVC_NSDESC_MAX + 64];
	const uint8_t *last;
	size_t body;

	check(data, size);
	/* Fixed up: the CRC line (the last line) made right. */
	if (size < 17 || size > KVC_NSDESC_MAX || data[size - 1] != '\n')
		return 0;
	last = data + size - 17;
	if (memcmp(last, "crc32c ", 7) || (last > data && last[-1] != '\n'))
		return 0;
	body = (size_t)(last - data);
	memcpy(fixed, data, body);
	snprintf((char *)fixed + body, sizeof(fixed) - body, "crc32c %08x\n",
		 kvc_crc32c(0, data, body));
	check(fixed, size);
	return 0;
}
