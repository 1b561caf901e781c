// SPDX-License-Identifier: GPL-2.0
/*
 * nsdesc (helper/common/nsdesc.h): a namespace's description in g4. A
 * golden description, byte for byte; encode and parse round trip; the
 * one encoding (leading zeros, upper-case hex, any other spelling of the
 * same values refused); every field out of range, every line missing,
 * moved or doubled, a wrong CRC, bytes after the end, a truncation at
 * every length: -EBADMSG, and encode refuses what parse would.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "blockfile.h"
#include "nsdesc.h"
#include "tap.h"

static struct kvc_nsdesc sample(void)
{
	struct kvc_nsdesc d = { .id = 7, .uid = 1000, .gid = 100,
				.mode = 0750 };

	for (int i = 0; i < KVC_NSDESC_SALT; i++)
		d.salt[i] = (uint8_t)(i % 16 * 17);
	snprintf(d.node, sizeof(d.node), "node-a");
	return d;
}

/* body (the lines before the CRC) closed with its CRC line, into out. */
static size_t close_crc(const char *body, char *out, size_t len)
{
	int n = snprintf(out, len, "%scrc32c %08x\n", body,
			 kvc_crc32c(0, body, strlen(body)));

	return n > 0 ? (size_t)n : 0;
}

static int parse_str(const char *s)
{
	struct kvc_nsdesc d;

	return kvc_nsdesc_parse(s, strlen(s), &d);
}

static void golden(void)
{
	static const char body[] =
		"kvcache-namespace 1\nid 7\nuid 1000\ngid 100\nmode 750\n"
		"salt 00112233445566778899aabbccddeeff"
		"00112233445566778899aabbccddeeff\nnode node-a\n";
	struct kvc_nsdesc d = sample(), back;
	char want[KVC_NSDESC_MAX], got[KVC_NSDESC_MAX];
	size_t n = close_crc(body, want, sizeof(want));
	int len = kvc_nsdesc_encode(&d, got, sizeof(got));

	TAP_EXPECT_EQ(len, (int)n);
	TAP_CHECK(len > 0 && !memcmp(got, want, n));
	TAP_EXPECT_EQ(kvc_nsdesc_parse(want, n, &back), 0);
	TAP_CHECK(back.id == 7 && back.uid == 1000 && back.gid == 100 &&
		  back.mode == 0750 && !strcmp(back.node, "node-a") &&
		  !memcmp(back.salt, d.salt, sizeof(d.salt)));
	/* Not NUL-terminated: only len bytes are read. */
	want[n] = 'x';
	TAP_EXPECT_EQ(kvc_nsdesc_parse(want, n, &back), 0);
}

static void round_trips(void)
{
	static const struct { uint32_t id, uid, gid, mode; } v[] = {
		{ 1, 0, 0, 0 }, { 65535, 4294967294u, 4294967294u, 0777 },
		{ 300, 1, 2, 07 }, { 10, 10, 10, 010 },
	};

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		struct kvc_nsdesc d = sample(), back;
		char buf[KVC_NSDESC_MAX];
		int n;

		d.id = v[i].id;
		d.uid = v[i].uid;
		d.gid = v[i].gid;
		d.mode = v[i].mode;
		memset(d.salt, (int)(i * 0x5a), sizeof(d.salt));
		n = kvc_nsdesc_encode(&d, buf, sizeof(buf));
		TAP_ASSERT_TRUE(n > 0);
		TAP_EXPECT_EQ(kvc_nsdesc_parse(buf, (size_t)n, &back), 0);
		TAP_CHECK(!memcmp(&back, &d, sizeof(d)));
	}
}

static void encode_refuses(void)
{
	char buf[KVC_NSDESC_MAX];
	struct kvc_nsdesc d;

	d = sample(); d.id = 0;
	TAP_EXPECT_EQ(kvc_nsdesc_encode(&d, buf, sizeof(buf)), -EINVAL);
	d = sample(); d.id = 65536;
	TAP_EXPECT_EQ(kvc_nsdesc_encode(&d, buf, sizeof(buf)), -EINVAL);
	d = sample(); d.uid = 4294967295u;
	TAP_EXPECT_EQ(kvc_nsdesc_encode(&d, buf, sizeof(buf)), -EINVAL);
	d = sample(); d.mode = 01000;
	TAP_EXPECT_EQ(kvc_nsdesc_encode(&d, buf, sizeof(buf)), -EINVAL);
	d = sample(); d.node[0] = '\0';
	TAP_EXPECT_EQ(kvc_nsdesc_encode(&d, buf, sizeof(buf)), -EINVAL);
	d = sample(); snprintf(d.node, sizeof(d.node), "a b");
	TAP_EXPECT_EQ(kvc_nsdesc_encode(&d, buf, sizeof(buf)), -EINVAL);
	d = sample(); snprintf(d.node, sizeof(d.node), "a\nid 9");
	TAP_EXPECT_EQ(kvc_nsdesc_encode(&d, buf, sizeof(buf)), -EINVAL);
	d = sample();
	TAP_EXPECT_EQ(kvc_nsdesc_encode(&d, buf, 40), -ENOSPC);
}

static void parse_refuses(void)
{
	static const char *const body[] = {
		/* leading zeros, other spellings of the same values */
		"kvcache-namespace 1\nid 07\nuid 1\ngid 1\nmode 750\nsalt %s\nnode a\n",
		"kvcache-namespace 1\nid 7\nuid 01\ngid 1\nmode 750\nsalt %s\nnode a\n",
		"kvcache-namespace 1\nid 7\nuid 1\ngid 1\nmode 0750\nsalt %s\nnode a\n",
		"kvcache-namespace 1\nid +7\nuid 1\ngid 1\nmode 750\nsalt %s\nnode a\n",
		"kvcache-namespace 1\nid  7\nuid 1\ngid 1\nmode 750\nsalt %s\nnode a\n",
		/* out of range */
		"kvcache-namespace 1\nid 0\nuid 1\ngid 1\nmode 750\nsalt %s\nnode a\n",
		"kvcache-namespace 1\nid 65536\nuid 1\ngid 1\nmode 750\nsalt %s\nnode a\n",
		"kvcache-namespace 1\nid 7\nuid 4294967295\ngid 1\nmode 750\nsalt %s\nnode a\n",
		"kvcache-namespace 1\nid 7\nuid 1\ngid 99999999999999999999\nmode 750\nsalt %s\nnode a\n",
		"kvcache-namespace 1\nid 7\nuid 1\ngid 1\nmode 1000\nsalt %s\nnode a\n",
		"kvcache-namespace 1\nid 7\nuid 1\ngid 1\nmode 758\nsalt %s\nnode a\n",
		/* lines missing, moved, doubled, unknown; another version */
		"kvcache-namespace 1\nuid 1\ngid 1\nmode 750\nsalt %s\nnode a\n",
		"kvcache-namespace 1\nuid 1\nid 7\ngid 1\nmode 750\nsalt %s\nnode a\n",
		"kvcache-namespace 1\nid 7\nid 7\nuid 1\ngid 1\nmode 750\nsalt %s\nnode a\n",
		"kvcache-namespace 1\nid 7\nuid 1\ngid 1\nmode 750\nsalt %s\n",
		"kvcache-namespace 1\nid 7\nuid 1\ngid 1\nmode 750\nsalt %s\nnode a\nextra 1\n",
		"kvcache-namespace 2\nid 7\nuid 1\ngid 1\nmode 750\nsalt %s\nnode a\n",
		/* node: empty, a space, too long */
		"kvcache-namespace 1\nid 7\nuid 1\ngid 1\nmode 750\nsalt %s\nnode \n",
		"kvcache-namespace 1\nid 7\nuid 1\ngid 1\nmode 750\nsalt %s\nnode a b\n",
		"kvcache-namespace 1\nid 7\nuid 1\ngid 1\nmode 750\nsalt %s\nnode "
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n",
	};
	static const char good_salt[] =
		"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
	static const char *const bad_salt[] = {
		"00112233445566778899AABBCCDDEEFF00112233445566778899aabbccddeeff",
		"00112233445566778899aabbccddeeff00112233445566778899aabbccddee",
		"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff0",
		"0011223344556677 899aabbccddeeff00112233445566778899aabbccddeeff",
	};
	char b[KVC_NSDESC_MAX], full[KVC_NSDESC_MAX + 64];
	struct kvc_nsdesc d;
	size_t n;

	for (size_t i = 0; i < sizeof(body) / sizeof(body[0]); i++) {
		snprintf(b, sizeof(b), body[i], good_salt);
		close_crc(b, full, sizeof(full));
		TAP_EXPECT_EQ(parse_str(full), -EBADMSG);
		if (parse_str(full) != -EBADMSG)
			printf("# accepted: %s", full);
	}
	for (size_t i = 0; i < sizeof(bad_salt) / sizeof(bad_salt[0]); i++) {
		snprintf(b, sizeof(b),
			 "kvcache-namespace 1\nid 7\nuid 1\ngid 1\nmode 750\nsalt %s\nnode a\n",
			 bad_salt[i]);
		close_crc(b, full, sizeof(full));
		TAP_EXPECT_EQ(parse_str(full), -EBADMSG);
	}
	/* The good one, then broken: CRC, upper-case CRC, bytes after. */
	snprintf(b, sizeof(b),
		 "kvcache-namespace 1\nid 7\nuid 1\ngid 1\nmode 750\nsalt %s\nnode a\n",
		 good_salt);
	n = close_crc(b, full, sizeof(full));
	TAP_EXPECT_EQ(parse_str(full), 0);
	for (size_t len = 0; len < n; len++)	/* every truncation */
		TAP_CHECK(kvc_nsdesc_parse(full, len, &d) == -EBADMSG);
	full[n - 2] ^= 1;
	TAP_EXPECT_EQ(parse_str(full), -EBADMSG);
	full[n - 2] ^= 1;
	strcat(full, "\n");
	TAP_EXPECT_EQ(parse_str(full), -EBADMSG);
	TAP_EXPECT_EQ(kvc_nsdesc_parse(full, KVC_NSDESC_MAX + 1, &d), -EBADMSG);
}

int main(void)
{
	TAP_RUN(golden);
	TAP_RUN(round_trips);
	TAP_RUN(encode_refuses);
	TAP_RUN(parse_refuses);
	return tap_done();
}
