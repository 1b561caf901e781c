// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer harness for kvcached's configuration parser (helper/common/config.c,
 * Documentation/admin-guide/kvcached-config.md). The input is the file's text.
 *
 * Invariants, beyond "no crash, no sanitizer report":
 *  - a refused file gets -EINVAL, a NUL-terminated "name:line: reason"
 *    message, and leaves the caller's config untouched;
 *  - an accepted file's dump (kvc_config_dump) parses again, and the
 *    second dump is the first one byte for byte: config.h promises the
 *    dump parses to the same values;
 *  - the message is cut, never overrun, in a small error buffer.
 */
#include <errno.h>
#include <string.h>

#include "config.h"
#include "fuzz.h"

#define NAME	"fuzz.conf"

/* The dump of cfg, malloc'd; its length in *len. */
static char *dump(const struct kvc_config *cfg, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	FUZZ_CHECK(f);
	kvc_config_dump(cfg, f);
	FUZZ_CHECK(fclose(f) == 0);
	return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kvc_config cfg, pristine, again;
	char err[256], small[8];
	char *d1, *d2;
	size_t l1, l2;
	int ret;

	memset(&cfg, 0xa5, sizeof(cfg));
	memcpy(&pristine, &cfg, sizeof(cfg));
	memset(err, 0x5a, sizeof(err));
	ret = kvc_config_parse(&cfg, (const char *)data, size, NAME, err,
			       sizeof(err));
	FUZZ_CHECK(memchr(err, '\0', sizeof(err)));
	if (ret) {
		FUZZ_CHECK(ret == -EINVAL);
		FUZZ_CHECK(!memcmp(&cfg, &pristine, sizeof(cfg)));
		FUZZ_CHECK(!strncmp(err, NAME ":", strlen(NAME ":")));
		FUZZ_CHECK(strlen(err) > strlen(NAME ":"));
		/* The same refusal in a buffer too small for it. */
		memset(small, 0x5a, sizeof(small));
		FUZZ_CHECK(kvc_config_parse(&cfg, (const char *)data, size,
					    NAME, small, sizeof(small)) ==
			   -EINVAL);
		FUZZ_CHECK(memchr(small, '\0', sizeof(small)));
		FUZZ_CHECK(!strncmp(small, err, sizeof(small) - 1));
		return 0;
	}
	FUZZ_CHECK(err[0] == '\0');

	d1 = dump(&cfg, &l1);
	memset(&again, 0, sizeof(again));
	ret = kvc_config_parse(&again, d1, l1, "dump", err, sizeof(err));
	if (ret) {
		fprintf(stderr, "the dump does not parse: %s\n%s", err, d1);
		FUZZ_CHECK(ret == 0);
	}
	d2 = dump(&again, &l2);
	if (l1 != l2 || memcmp(d1, d2, l1))
		fprintf(stderr, "dump 1:\n%s\ndump 2:\n%s", d1, d2);
	FUZZ_CHECK(l1 == l2 && !memcmp(d1, d2, l1));
	free(d1);
	free(d2);
	return 0;
}
