// SPDX-License-Identifier: GPL-2.0
/*
 * gen_corpus: writes the fuzz harnesses' seed corpus (tests/fuzz/corpus/)
 * with the real encoders, so every seed is something kvcached or a
 * client really sends or writes: each message type of the wire format,
 * requests and replies, each block file header variant, manifests,
 * parents journals and configuration files. A few known-bad seeds per harness (truncated,
 * wrong magic, a flipped bit...) start the fuzzer on the refusal paths.
 *
 * Usage: gen_corpus OUTDIR [kvcached.conf]
 * Writes OUTDIR/{proto,blockfile,manifest,journal,nsdesc,config}/<name>; `make
 * fuzz-corpus` runs it into tests/fuzz/corpus and the result is
 * committed. The encoders are deterministic and no clock is read (every
 * ctime is given), so a rerun gives the same files.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blockfile.h"
#include "config.h"
#include "nsdesc.h"
#include "journal.h"
#include "manifest.h"
#include "proto.h"

static const char *outdir;
static unsigned int written;

static void die(const char *what)
{
	fprintf(stderr, "gen_corpus: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void put(const char *sub, const char *name, const void *p, size_t n)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", outdir, sub);
	if (mkdir(path, 0755) && errno != EEXIST)
		die(path);
	snprintf(path, sizeof(path), "%s/%s/%s", outdir, sub, name);
	f = fopen(path, "wb");
	if (!f || fwrite(p, 1, n, f) != n || fclose(f))
		die(path);
	written++;
}

/* ---- proto --------------------------------------------------------------- */

static uint8_t buf[KVC_PROTO_MSG_MAX];

/* An encoder's result: a seed, or a bug in this generator. */
static void msg(const char *name, int n)
{
	if (n < 0) {
		fprintf(stderr, "gen_corpus: encoding %s: %d\n", name, n);
		exit(1);
	}
	put("proto", name, buf, (size_t)n);
}

static void key_of(uint8_t *k, unsigned int i)
{
	for (int b = 0; b < KVCACHE_KEY_SIZE; b++)
		k[b] = (uint8_t)(i * 37 + b * 11 + 1);
}

static void gen_proto(void)
{
	static uint8_t keys[4][KVCACHE_KEY_SIZE];
	static int32_t many[KVC_PROTO_MAX_BATCH];
	static struct kvcache_handle handles[KVC_PROTO_MAX_BATCH];
	const struct kvc_hello hello = { 1, 1, KVC_PROTO_CAP_ALL | (1ull << 40) };
	const struct kvc_hello_reply hr_kernel = {
		1, KVC_PROTO_MODE_KERNEL, KVC_PROTO_MAX_STORE,
		KVC_PROTO_CAP_DEVICE, 2 << 20, 4096
	};
	const struct kvc_hello_reply hr_memfd = {
		1, KVC_PROTO_MODE_MEMFD, 64, KVC_PROTO_CAP_MEMFD, 65536, 128
	};
	const struct kvc_lookup_entry le[2] = {
		{ KVC_PROTO_TIER_POOL | KVC_PROTO_TIER_G3, { 7, 3 } },
		{ KVC_PROTO_TIER_G4, { 0, 0 } },
	};
	struct kvc_store_entry se[2];
	const int32_t status[3] = { 0, -ENOSPC, -EPERM };
	const struct kvc_load_result lr[2] = { { 0, { 5, 1 } }, { -ENOENT, { 0, 0 } } };
	const struct kvc_stat st[3] = {
		{ "blocks_free", 11, 1000 }, { "hits", 4, 42 },
		{ "g3.bytes-written", 16, 1ull << 40 },
	};
	const struct kvc_ns_create nc = { 3, 1000, 1000, 0750 };
	struct kvc_seal_entry seal[2];
	const struct kvc_flush_reply fr = { 12, 3 };
	const struct kvc_ns_entry ne[2] = {
		{ 1, 0, 0, 0700, 10 }, { 3, 1000, 100, 0750, 0 },
	};
	int n;

	for (unsigned int i = 0; i < 4; i++)
		key_of(keys[i], i);
	memset(se, 0, sizeof(se));
	memcpy(se[0].key, keys[0], KVCACHE_KEY_SIZE);
	se[0].handle = (struct kvcache_handle){ 1, 1 };
	se[0].flags = KVC_PROTO_STORE_FIRST;
	memcpy(se[1].key, keys[1], KVCACHE_KEY_SIZE);
	memcpy(se[1].parent, keys[0], KVCACHE_KEY_SIZE);
	se[1].handle = (struct kvcache_handle){ 2, 9 };
	memset(seal, 0, sizeof(seal));
	seal[0] = (struct kvc_seal_entry){ { 4, 2 }, 4096,
					   KVC_PROTO_SEAL_KEEP_PIN, { 0 } };
	memcpy(seal[0].key, keys[2], KVCACHE_KEY_SIZE);
	seal[1] = (struct kvc_seal_entry){ { 5, 2 }, 1, 0, { 0 } };
	memcpy(seal[1].key, keys[3], KVCACHE_KEY_SIZE);
	for (unsigned int i = 0; i < KVC_PROTO_MAX_BATCH; i++) {
		many[i] = -(int32_t)(i % KVC_PROTO_ERRNO_MAX);
		handles[i] = (struct kvcache_handle){ i, i * 3 + 1 };
	}

	msg("hello", kvc_proto_encode_hello(buf, sizeof(buf), 1, &hello));
	msg("hello_reply_kernel",
	    kvc_proto_encode_hello_reply(buf, sizeof(buf), 1, &hr_kernel));
	msg("hello_reply_memfd",
	    kvc_proto_encode_hello_reply(buf, sizeof(buf), 1, &hr_memfd));
	msg("lookup", kvc_proto_encode_lookup(buf, sizeof(buf), 2, 1,
					      KVC_PROTO_TIERS_ALL, keys[0], 3));
	msg("lookup_continue",
	    kvc_proto_encode_lookup_flags(buf, sizeof(buf), 3, KVCACHE_NS_MAX,
					  KVC_PROTO_TIER_POOL,
					  KVC_PROTO_LOOKUP_CONTINUE, keys[1], 1));
	msg("lookup_reply", kvc_proto_encode_lookup_reply(buf, sizeof(buf), 2,
							  le, 2));
	msg("lookup_reply_miss",
	    kvc_proto_encode_lookup_reply(buf, sizeof(buf), 3, NULL, 0));
	msg("store", kvc_proto_encode_store(buf, sizeof(buf), 4, 2, se, 2));
	/* Version 3: the second block sealed by the STORE itself. */
	se[1].flags = KVC_PROTO_STORE_SEAL;
	se[1].payload_len = 65536;
	msg("store_seal", kvc_proto_encode_store(buf, sizeof(buf), 4, 2, se,
						 2));
	se[1].flags = 0;
	se[1].payload_len = 0;
	msg("store_reply",
	    kvc_proto_encode_store_reply(buf, sizeof(buf), 4, status, 3));
	msg("store_reply_max",
	    kvc_proto_encode_store_reply(buf, sizeof(buf), 4, many,
					 KVC_PROTO_MAX_BATCH));
	msg("load", kvc_proto_encode_load(buf, sizeof(buf), 5, 2, keys[0], 2));
	msg("load_reply",
	    kvc_proto_encode_load_reply(buf, sizeof(buf), 5, lr, 2));
	msg("release", kvc_proto_encode_release(buf, sizeof(buf), 6,
						handles, 2));
	msg("release_max",
	    kvc_proto_encode_release(buf, sizeof(buf), 6, handles,
				     KVC_PROTO_MAX_BATCH));
	msg("release_reply",
	    kvc_proto_encode_release_reply(buf, sizeof(buf), 6, status, 1));
	msg("stats", kvc_proto_encode_stats(buf, sizeof(buf), 7));
	msg("stats_reply",
	    kvc_proto_encode_stats_reply(buf, sizeof(buf), 7, st, 3));
	msg("stats_reply_empty",
	    kvc_proto_encode_stats_reply(buf, sizeof(buf), 7, NULL, 0));
	msg("ns_create", kvc_proto_encode_ns_create(buf, sizeof(buf), 8, &nc));
	msg("ns_create_reply",
	    kvc_proto_encode_ns_create_reply(buf, sizeof(buf), 8));
	msg("alloc", kvc_proto_encode_alloc(buf, sizeof(buf), 9, 2, 4));
	msg("alloc_reply",
	    kvc_proto_encode_alloc_reply(buf, sizeof(buf), 9, handles, 4));
	msg("seal", kvc_proto_encode_seal(buf, sizeof(buf), 10, seal, 2));
	msg("seal_reply",
	    kvc_proto_encode_seal_reply(buf, sizeof(buf), 10, status, 2));
	msg("evict", kvc_proto_encode_evict(buf, sizeof(buf), 11, 2, keys[0], 1));
	msg("evict_reply",
	    kvc_proto_encode_evict_reply(buf, sizeof(buf), 11, status, 1));
	msg("flush", kvc_proto_encode_flush(buf, sizeof(buf), 12,
					    KVC_PROTO_NS_ALL));
	msg("flush_tiers",
	    kvc_proto_encode_flush_tiers(buf, sizeof(buf), 12, 5,
					 KVC_PROTO_TIER_G3 | KVC_PROTO_TIER_G4));
	msg("flush_reply", kvc_proto_encode_flush_reply(buf, sizeof(buf), 12,
							&fr));
	msg("ns_list", kvc_proto_encode_ns_list(buf, sizeof(buf), 13, 0));
	msg("ns_list_reply",
	    kvc_proto_encode_ns_list_reply(buf, sizeof(buf), 13, 0, ne, 2));
	msg("ns_list_reply_page",
	    kvc_proto_encode_ns_list_reply(buf, sizeof(buf), 13, 4, ne, 2));
	{
		struct kvc_ns_salt get = { 4, 0, { 0 } }, set = { 4, 0, { 0 } };
		struct kvc_ns_salt_reply sr = { 4, { 0 } };

		set.flags = KVC_PROTO_NS_SALT_SET;
		for (int i = 0; i < KVC_PROTO_SALT_SIZE; i++)
			set.salt[i] = sr.salt[i] = (uint8_t)(0xc0 + i);
		msg("ns_salt_get",
		    kvc_proto_encode_ns_salt(buf, sizeof(buf), 16, &get));
		msg("ns_salt_set",
		    kvc_proto_encode_ns_salt(buf, sizeof(buf), 16, &set));
		msg("ns_salt_reply",
		    kvc_proto_encode_ns_salt_reply(buf, sizeof(buf), 16, &sr));
		/* Under version 1, which has no NS_SALT. */
		n = kvc_proto_encode_ns_salt(buf, sizeof(buf), 16, &get);
		buf[4] = 1;
		msg("bad_ns_salt_v1", n);
	}
	{
		const struct kvcache_handle th[2] = { { 1, 2 }, { 3, 4 } };
		struct kvc_touch t = { .count = 2, .lookups = 1,
				       .lookup_keys = 6, .hit_keys = 6 };
		struct kvc_touch tl = { .lookups = 2, .lookup_keys = 9,
					.hit_keys = 9 };

		msg("fast_map", kvc_proto_encode_fast_map(buf, sizeof(buf), 18));
		msg("fast_map_reply",
		    kvc_proto_encode_fast_map_reply(buf, sizeof(buf), 18));
		msg("fast_ns", kvc_proto_encode_fast_ns(buf, sizeof(buf), 18, 7));
		msg("fast_ns_reply",
		    kvc_proto_encode_fast_ns_reply(buf, sizeof(buf), 18));
		msg("touch", kvc_proto_encode_touch(buf, sizeof(buf), 19, &t,
						    th));
		msg("touch_lookups_only",
		    kvc_proto_encode_touch(buf, sizeof(buf), 19, &tl, NULL));
		/* Under version 3, which has no fast index. */
		n = kvc_proto_encode_touch(buf, sizeof(buf), 19, &t, th);
		buf[4] = 3;
		msg("bad_touch_v3", n);
	}
	/* A version-1 layout sent after a HELLO that chose version 2. */
	n = kvc_proto_encode_lookup(buf, sizeof(buf), 17, 2,
				    KVC_PROTO_TIER_POOL, keys[2], 2);
	msg("lookup_v2", kvc_proto_set_version(buf, n, 2));
	msg("error", kvc_proto_encode_error(buf, sizeof(buf), -EPERM, 14,
					    KVC_MSG_NS_CREATE,
					    "not a privileged peer"));
	msg("error_nomsg", kvc_proto_encode_error(buf, sizeof(buf), -EIO, 15,
						  KVC_MSG_LOAD, NULL));

	/*
	 * Encoder mode (fuzz_proto.c, check_encoder()): 0xE5, which encoder,
	 * its seq, then its arguments; here every field 1 or 2, for the
	 * fuzzer to vary.
	 */
	for (unsigned int w = 0; w < 27; w++) {
		uint8_t a[6 + 96];
		char name[32];

		a[0] = 0xE5;
		a[1] = (uint8_t)w;
		memset(a + 2, 0, sizeof(a) - 2);
		a[2] = 9;				/* seq */
		for (size_t i = 6; i + 4 <= sizeof(a); i += 4)
			a[i] = (uint8_t)(1 + (i / 4) % 2);
		snprintf(name, sizeof(name), "encoder_%02u", w);
		put("proto", name, a, sizeof(a));
	}

	/* Known-bad: each refused by one check. */
	n = kvc_proto_encode_hello(buf, sizeof(buf), 1, &hello);
	buf[0] ^= 0x20;
	msg("bad_magic", n);
	msg("bad_truncated_header", 10);
	n = kvc_proto_encode_stats(buf, sizeof(buf), 7);
	buf[4] = KVC_PROTO_VERSION_MAX + 1;
	msg("bad_version", n);
	buf[4] = 1;
	buf[6] = 0x7f;
	msg("bad_type", n);
	n = kvc_proto_encode_load(buf, sizeof(buf), 5, 2, keys[0], 2);
	buf[n] = 0;
	msg("bad_length_field", n + 1);
	n = kvc_proto_encode_lookup(buf, sizeof(buf), 2, 1, 1, keys[0], 1);
	buf[KVC_PROTO_HDR_SIZE + 8] = 0x01;	/* count 1025 */
	buf[KVC_PROTO_HDR_SIZE + 9] = 0x04;
	msg("bad_count_over_limit", n);
	n = kvc_proto_encode_flush(buf, sizeof(buf), 12, 1);
	buf[20] = 1;				/* header reserved */
	msg("bad_reserved", n);
	n = kvc_proto_encode_error(buf, sizeof(buf), -EIO, 15, 0, "x");
	buf[n - 1] = 0x07;			/* not printable */
	msg("bad_error_text", n);
}

/* ---- block files --------------------------------------------------------- */

static uint8_t image[KVC_BF_HEADER_SIZE + 2 * KVC_BF_ALIGN];

static void header(struct kvc_bf_header *h, uint32_t flags, unsigned int k,
		   uint64_t len, const char *node)
{
	memset(h, 0, sizeof(*h));
	h->flags = flags;
	key_of(h->key, k);
	if (!(flags & KVC_BF_F_FIRST))
		key_of(h->parent, k + 100);
	h->ns_id = 7;
	h->payload_len = len;
	h->payload_crc = 0x12345678;
	h->ctime_ns = 1700000000000000000ull;
	snprintf(h->node_id, sizeof(h->node_id), "%s", node);
}

static void hdr_seed(const char *name, const struct kvc_bf_header *h)
{
	if (kvc_bf_encode_header(h, image)) {
		fprintf(stderr, "gen_corpus: encoding %s\n", name);
		exit(1);
	}
	put("blockfile", name, image, KVC_BF_HEADER_SIZE);
}

/* A whole file image with a payload of len bytes (len <= 2 pages). */
static void image_seed(const char *name, struct kvc_bf_header *h)
{
	uint64_t len = h->payload_len;

	for (uint64_t i = 0; i < len; i++)
		image[KVC_BF_HEADER_SIZE + i] = (uint8_t)(i * 7 + 3);
	if (kvc_bf_build(h, image)) {
		fprintf(stderr, "gen_corpus: building %s\n", name);
		exit(1);
	}
	put("blockfile", name, image, kvc_bf_file_size(len));
}

static void gen_blockfile(void)
{
	struct kvc_bf_header h;
	char node[KVC_BF_NODE_ID_SIZE + 1], name[80];
	uint8_t key[KVC_BF_KEY_SIZE];

	header(&h, KVC_BF_F_FIRST, 1, 4096, "node-a");
	hdr_seed("header_first", &h);
	header(&h, 0, 2, 1, "");
	hdr_seed("header_later_no_node", &h);
	memset(node, 'n', KVC_BF_NODE_ID_SIZE);
	node[KVC_BF_NODE_ID_SIZE] = '\0';
	header(&h, 0, 3, KVC_BF_MAX_PAYLOAD, node);
	hdr_seed("header_max_payload_long_node", &h);

	header(&h, KVC_BF_F_FIRST, 4, 100, "node-b");
	image_seed("image_small", &h);
	header(&h, 0, 5, KVC_BF_ALIGN, "node-b");
	image_seed("image_one_page", &h);
	header(&h, 0, 6, KVC_BF_ALIGN + 1, "node-c");
	image_seed("image_two_pages", &h);

	/* Known-bad headers. */
	header(&h, KVC_BF_F_FIRST, 1, 4096, "node-a");
	kvc_bf_encode_header(&h, image);
	image[0] = 'X';
	put("blockfile", "bad_magic", image, KVC_BF_HEADER_SIZE);
	kvc_bf_encode_header(&h, image);
	image[8] = 2;
	put("blockfile", "bad_version", image, KVC_BF_HEADER_SIZE);
	kvc_bf_encode_header(&h, image);
	image[100] ^= 0x10;
	put("blockfile", "bad_crc", image, KVC_BF_HEADER_SIZE);
	kvc_bf_encode_header(&h, image);
	image[4000] = 1;
	put("blockfile", "bad_tail", image, KVC_BF_HEADER_SIZE);
	put("blockfile", "bad_short", image, 200);

	/* File names, for the name parser of the recovery scan. */
	key_of(key, 9);
	kvc_bf_path(".", key, name, sizeof(name));
	put("blockfile", "name", name + 8, strlen(name + 8));
	name[10] = 'A';
	put("blockfile", "bad_name_upper", name + 8, strlen(name + 8));
	put("blockfile", "bad_name_tmp", ".tmp.node.1.2.x", 15);
}

/* ---- manifests ----------------------------------------------------------- */

/* Records appended with the real encoder, then the file's bytes. */
static size_t manifest(const char *path, unsigned int nr, uint8_t *out,
		       size_t cap)
{
	struct kvc_mf_rec r;
	size_t n = 0;
	ssize_t got;
	int fd;

	unlink(path);
	fd = kvc_mf_open(path);
	if (fd < 0) {
		errno = -fd;
		die(path);
	}
	for (unsigned int i = 0; i < nr; i++) {
		memset(&r, 0, sizeof(r));
		r.ns = 1 + i % 3;
		r.first = !(i % 4);
		r.size = kvc_bf_file_size(4096ull << (i % 5));
		if (i == 2)
			r.size = 5ull << 32;	/* above 4 GiB */
		key_of(r.key, i);
		if (!r.first)
			key_of(r.parent, i - 1);
		if (kvc_mf_append(fd, &r))
			die("kvc_mf_append");
	}
	close(fd);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		die(path);
	while ((got = read(fd, out + n, cap - n)) > 0)
		n += (size_t)got;
	close(fd);
	unlink(path);
	return n;
}

static void gen_manifest(void)
{
	static uint8_t m[KVC_MF_REC_SIZE * 80];
	char path[4096];
	size_t n;

	snprintf(path, sizeof(path), "%s/.manifest.tmp", outdir);
	put("manifest", "one", m, manifest(path, 1, m, sizeof(m)));
	put("manifest", "five", m, manifest(path, 5, m, sizeof(m)));
	/* More than the reader's 64-record buffer. */
	put("manifest", "seventy", m, manifest(path, 70, m, sizeof(m)));

	n = manifest(path, 3, m, sizeof(m));
	put("manifest", "bad_torn_tail", m, n - 40);
	m[KVC_MF_REC_SIZE + 30] ^= 1;		/* the middle record's key */
	put("manifest", "bad_flipped_middle", m, n);
	n = manifest(path, 2, m, sizeof(m));
	memset(m + KVC_MF_REC_SIZE, 0, KVC_MF_REC_SIZE);
	put("manifest", "bad_zero_record", m, n);
}

/* ---- the parents journal ------------------------------------------------- */

/* nr links encoded with the real encoder, as kvcached appends them. */
static size_t journal(unsigned int nr, uint8_t *out)
{
	struct kvc_link l;

	for (unsigned int i = 0; i < nr; i++) {
		memset(&l, 0, sizeof(l));
		l.ns = i == 1 ? KVCACHE_NS_MAX : 1 + i % 3;
		l.first = !(i % 4);
		key_of(l.key, i);
		if (!l.first)
			key_of(l.parent, i - 1);
		kvc_journal_encode(&l, out + (size_t)i * KVC_JOURNAL_REC);
	}
	return (size_t)nr * KVC_JOURNAL_REC;
}

static void gen_journal(void)
{
	static uint8_t j[KVC_JOURNAL_REC * 80];
	size_t n;

	put("journal", "one", j, journal(1, j));
	put("journal", "five", j, journal(5, j));
	put("journal", "seventy", j, journal(70, j));

	n = journal(3, j);
	put("journal", "bad_torn_tail", j, n - 40);
	j[KVC_JOURNAL_REC + 30] ^= 1;		/* the middle record's key */
	put("journal", "bad_flipped_middle", j, n);
	n = journal(2, j);
	memset(j + KVC_JOURNAL_REC, 0, KVC_JOURNAL_REC);
	put("journal", "bad_zero_record", j, n);
	/* An older daemon's record: "KVPJ" as a host-order u32, no CRC. */
	n = journal(2, j);
	memset(j, 0, KVC_JOURNAL_REC);
	memcpy(j, "KVPJ\x03\0\0\0", 8);
	key_of(j + 8, 7);
	put("journal", "bad_old_format", j, n);
}

/* ---- namespace descriptions -------------------------------------------- */

static void gen_nsdesc(void)
{
	struct kvc_nsdesc d = { .id = 7, .uid = 1000, .gid = 100,
				.mode = 0750 };
	char buf[KVC_NSDESC_MAX + 1];
	int n;

	for (int i = 0; i < KVC_NSDESC_SALT; i++)
		d.salt[i] = (uint8_t)(i * 37 + 1);
	snprintf(d.node, sizeof(d.node), "node-a");
	n = kvc_nsdesc_encode(&d, buf, sizeof(buf));
	put("nsdesc", "good", buf, (size_t)n);
	d.id = 65535;
	d.uid = d.gid = 0;
	d.mode = 0;
	memset(d.salt, 0, sizeof(d.salt));
	snprintf(d.node, sizeof(d.node), "%s",
		 "n0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd");
	n = kvc_nsdesc_encode(&d, buf, sizeof(buf));
	put("nsdesc", "good_limits", buf, (size_t)n);
	/* Known bad: a wrong CRC, a truncation, a leading zero. */
	buf[n - 2] ^= 1;
	put("nsdesc", "bad_crc", buf, (size_t)n);
	put("nsdesc", "bad_truncated", buf, (size_t)n / 2);
	n = snprintf(buf, sizeof(buf),
		     "kvcache-namespace 1\nid 07\nuid 0\ngid 0\nmode 0\nsalt %064d\nnode a\n",
		     0);
	n += snprintf(buf + n, sizeof(buf) - (size_t)n, "crc32c %08x\n",
		      kvc_crc32c(0, buf, (size_t)n));
	put("nsdesc", "bad_leading_zero", buf, (size_t)n);
}

/* ---- configuration ------------------------------------------------------- */

static void conf(const char *name, const char *text)
{
	put("config", name, text, strlen(text));
}

static void gen_config(const char *example)
{
	struct kvc_config cfg;
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	/* The effective defaults, as kvcached --dump-config writes them. */
	kvc_config_defaults(&cfg);
	f = open_memstream(&text, &len);
	if (!f)
		die("open_memstream");
	kvc_config_dump(&cfg, f);
	fclose(f);
	put("config", "defaults_dump", text, len);
	free(text);

	if (example) {
		static char ex[KVC_CONFIG_FILE_MAX];
		size_t n;

		f = fopen(example, "r");
		if (!f)
			die(example);
		n = fread(ex, 1, sizeof(ex), f);
		fclose(f);
		put("config", "example", ex, n);
	}
	conf("daemon", "[daemon]\nsocket = /tmp/k.sock\nsocket_mode = 0600\n"
	     "metrics = 9100\nmetrics_address = ::1\nlog_level = debug\n"
	     "mode = memfd\n");
	conf("pool", "[pool]\nmemfd_size = 1G\nblock_size = 64K\n"
	     "hugetlb = no\nmlock = yes\nlow_watermark = 5\n"
	     "high_watermark = 20\nprefetch = 8\n");
	conf("eviction", "[eviction]\npolicy = s3fifo\npool_admit = 2\n"
	     "g3_admit = 1\ng4_admit = 3\ns3fifo_small = 10\ninterval = 250ms\n");
	conf("tiers", "# both persistent tiers\n[g3]\ndirectory = /var/cache/g3\n"
	     "capacity = 100G\nwrite = through\nfsync = never\nqueue_depth = 32\n"
	     "\n[g4]\ndirectory = /mnt/shared/kv\ncapacity = 2T\nnode = node-7\n"
	     "scan_interval = 30s\nwrite = back\nfsync = always\n"
	     "queue_depth = 8\ngrace = 10m\n");
	conf("metrics_path", "[daemon]\nmetrics = /run/kvc/m.sock\n");
	conf("empty", "");
	conf("bad_section", "[nope]\nx = 1\n");
	conf("bad_duplicate", "[pool]\nmlock = yes\nmlock = no\n");
	conf("bad_size", "[pool]\nblock_size = 3K\n");
	conf("bad_watermarks", "[pool]\nlow_watermark = 50\nhigh_watermark = 10\n");
	conf("bad_no_section", "socket = /x\n");
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: gen_corpus OUTDIR [kvcached.conf]\n");
		return 2;
	}
	outdir = argv[1];
	if (mkdir(outdir, 0755) && errno != EEXIST)
		die(outdir);
	gen_proto();
	gen_blockfile();
	gen_manifest();
	gen_journal();
	gen_nsdesc();
	gen_config(argc > 2 ? argv[2] : NULL);
	printf("gen_corpus: %u files in %s\n", written, outdir);
	return 0;
}
