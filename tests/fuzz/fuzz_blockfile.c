// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer harness for the block file format of the persistent tiers
 * (helper/common/blockfile.c, Documentation/design/blockfile.md): the 4096-byte header
 * decoder, the whole-image check a read goes through, the file name
 * parser of the recovery scan, and the CRC32C they rest on.
 *
 * A checksum stops a fuzzer cold: random bytes almost never carry a
 * right CRC. So each input is tried twice, as it is (what a corrupt disk
 * gives) and "fixed up" (the payload CRC and then the header CRC
 * recomputed, what a buggy writer would produce), which lets the fuzzer
 * reach every field check behind the checksum.
 *
 * Invariants, beyond "no crash, no sanitizer report":
 *  - decode returns 0 or one of its documented errors; a header it
 *    accepts has fields within their documented ranges and re-encodes to
 *    exactly the 4096 input bytes (the encoder accepts exactly what the
 *    decoder produces);
 *  - every single-bit flip of an accepted header is refused: the ones in
 *    the CRC-covered bytes 0..207 as corrupt, the ones in the zero tail
 *    as invalid; so are a few flips of 2 and 3 bits in the covered area
 *    (CRC32C's Hamming distance at this length is above 3);
 *  - kvc_bf_check() accepts an image only with a size, payload CRC and
 *    padding that match its header;
 *  - a file name parses only if it is the name kvc_bf_path() gives;
 *  - the SSE 4.2 and table CRC32C agree, and a CRC continued over a split
 *    input equals the one computed in one go.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "blockfile.h"
#include "fuzz.h"

#define HS		KVC_BF_HEADER_SIZE
#define OFF_PAYLOAD_CRC	128
#define OFF_HDR_CRC	204
#define COVERED		208	/* bytes under the header CRC, and the CRC */
#define OFF_KEY		24

/* The largest image tried whole: header plus two pages of payload. */
#define IMAGE_MAX	(HS + 2 * KVC_BF_ALIGN)

static uint8_t hdr[HS], fixed[IMAGE_MAX], flip[HS], enc[HS];

static bool documented(int ret)
{
	return ret == 0 || ret == -EPROTO || ret == -EPROTONOSUPPORT ||
	       ret == -EBADMSG || ret == -EINVAL;
}

static bool zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

static void check_fields(const struct kvc_bf_header *h)
{
	size_t nl = strnlen(h->node_id, sizeof(h->node_id));

	FUZZ_CHECK(!(h->flags & ~KVC_BF_F_FIRST));
	FUZZ_CHECK(h->payload_len >= 1 && h->payload_len <= KVC_BF_MAX_PAYLOAD);
	FUZZ_CHECK(!!(h->flags & KVC_BF_F_FIRST) ==
		   zero(h->parent, KVC_BF_KEY_SIZE));
	FUZZ_CHECK(nl <= KVC_BF_NODE_ID_SIZE);
	/* NUL-terminated, and nothing after the NUL. */
	FUZZ_CHECK(zero((const uint8_t *)h->node_id + nl,
			sizeof(h->node_id) - nl));
}

static void flip_bit(uint8_t *p, size_t bit)
{
	p[bit / 8] ^= (uint8_t)(1u << (bit % 8));
}

/* in: 4096 bytes that decoded to *h. */
static void check_accepted(const uint8_t *in, const struct kvc_bf_header *h,
			   const uint8_t *data, size_t size)
{
	struct kvc_bf_header h2;
	uint32_t seed;
	int ret;

	check_fields(h);
	/* Exactly what the encoder writes for these fields. */
	FUZZ_CHECK(kvc_bf_encode_header(h, enc) == 0);
	FUZZ_CHECK(!memcmp(enc, in, HS));

	/* Any one bit off, anywhere, and the header is refused. */
	memcpy(flip, in, HS);
	for (size_t bit = 0; bit < COVERED * 8; bit++) {
		flip_bit(flip, bit);
		ret = kvc_bf_decode_header(flip, &h2);
		/* The magic (bytes 0..7) and version (8..11) are checked
		 * before the CRC, and named as such. */
		if (bit < 64)
			FUZZ_CHECK(ret == -EPROTO);
		else if (bit < 96)
			FUZZ_CHECK(ret == -EPROTONOSUPPORT);
		else
			FUZZ_CHECK(ret == -EBADMSG);
		flip_bit(flip, bit);
	}
	/* The tail is all zero: a few bits of it, chosen by the input. */
	seed = kvc_crc32c_sw(0, data, size);
	for (int i = 0; i < 16; i++) {
		size_t bit = COVERED * 8 +
			     (seed % ((HS - COVERED) * 8));

		flip_bit(flip, bit);
		FUZZ_CHECK(kvc_bf_decode_header(flip, &h2) == -EINVAL);
		flip_bit(flip, bit);
		seed = seed * 1103515245u + 12345u;
	}
	/* Two and three bits in the covered area (after the magic and
	 * version, so the CRC is what must catch them). */
	for (int i = 0; i < 8; i++) {
		size_t bits[3];
		int nb = 2 + i % 2;

		for (int k = 0; k < nb; k++) {
			seed = seed * 1103515245u + 12345u;
			bits[k] = 12 * 8 + (seed >> 8) % ((COVERED - 12) * 8);
			flip_bit(flip, bits[k]);
		}
		/* Flips that cancel out leave the header intact. */
		if (memcmp(flip, in, HS))
			FUZZ_CHECK(kvc_bf_decode_header(flip, &h2) == -EBADMSG);
		for (int k = 0; k < nb; k++)
			flip_bit(flip, bits[k]);
	}
}

/* The header of img (size bytes, size >= 4096): raw or fixed up. */
static void try_header(const uint8_t *in, const uint8_t *data, size_t size)
{
	struct kvc_bf_header h;
	int ret;

	memset(&h, 0x5a, sizeof(h));
	ret = kvc_bf_decode_header(in, &h);
	FUZZ_CHECK(documented(ret));
	if (!ret)
		check_accepted(in, &h, data, size);
}

static void try_image(const uint8_t *img, size_t size)
{
	struct kvc_bf_header h;
	uint64_t len;
	int ret;

	ret = kvc_bf_check(img, size, img + OFF_KEY, &h);
	FUZZ_CHECK(documented(ret));
	if (ret)
		return;
	check_fields(&h);
	len = h.payload_len;
	FUZZ_CHECK(!memcmp(h.key, img + OFF_KEY, KVC_BF_KEY_SIZE));
	FUZZ_CHECK(size == kvc_bf_file_size(len));
	FUZZ_CHECK(len <= size - HS);
	FUZZ_CHECK(kvc_crc32c_sw(0, img + HS, (size_t)len) == h.payload_crc);
	FUZZ_CHECK(zero(img + HS + len, size - HS - (size_t)len));
	/* Another key's name for the same file: refused. */
	{
		uint8_t other[KVC_BF_KEY_SIZE];

		memcpy(other, img + OFF_KEY, sizeof(other));
		other[size % sizeof(other)] ^= 1;
		FUZZ_CHECK(kvc_bf_check(img, size, other, &h) == -EBADMSG);
	}
}

static void try_name(const uint8_t *data, size_t size)
{
	char name[128], path[256];
	uint8_t key[KVC_BF_KEY_SIZE];
	size_t n = size < sizeof(name) - 1 ? size : sizeof(name) - 1;
	const char *base;

	memcpy(name, data, n);
	name[n] = '\0';
	if (kvc_bf_parse_name(name, key))
		return;
	/* Only the canonical name: lower-case hex of the key, ".kvb". */
	FUZZ_CHECK(kvc_bf_path("d", key, path, sizeof(path)) == 0);
	base = strrchr(path, '/');
	FUZZ_CHECK(base && !strcmp(base + 1, name));
	FUZZ_CHECK(!strncmp(path + 2, name, 2) && !strncmp(path + 5, name + 2, 2));
}

static void try_crc(const uint8_t *data, size_t size)
{
	size_t split = size ? data[0] % (size + 1) : 0;
	uint32_t whole = kvc_crc32c(0, data, size);

	FUZZ_CHECK(whole == kvc_crc32c_sw(0, data, size));
	FUZZ_CHECK(whole == kvc_crc32c(kvc_crc32c(0, data, split),
				       data + split, size - split));
	FUZZ_CHECK(whole == kvc_crc32c_sw(kvc_crc32c_sw(0, data, split),
					  data + split, size - split));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t isize = size > IMAGE_MAX ? IMAGE_MAX : size;
	uint64_t len;

	try_crc(data, size);
	try_name(data, size);

	/* As read from a corrupt disk: the first 4096 bytes, zero-padded. */
	memset(hdr, 0, HS);
	memcpy(hdr, data, size < HS ? size : HS);
	try_header(hdr, data, size);

	/* As a buggy writer would make it: checksums right, fields not. */
	memset(fixed, 0, sizeof(fixed));
	memcpy(fixed, data, isize);
	if (isize < HS)
		isize = HS;
	len = (uint64_t)fixed[120] | (uint64_t)fixed[121] << 8 |
	      (uint64_t)fixed[122] << 16 | (uint64_t)fixed[123] << 24;
	if (fixed[124] | fixed[125] | fixed[126] | fixed[127])
		len = UINT64_MAX;	/* above 4 GiB: no payload to sum */
	if (len <= isize - HS)
		fuzz_put32(fixed + OFF_PAYLOAD_CRC,
			   kvc_crc32c(0, fixed + HS, (size_t)len));
	fuzz_put32(fixed + OFF_HDR_CRC, kvc_crc32c(0, fixed, OFF_HDR_CRC));
	try_header(fixed, data, size);
	try_image(fixed, isize);
	return 0;
}
