// SPDX-License-Identifier: GPL-2.0
/*
 * End-to-end tests of reuse with the reference engine (kvc-engine, found
 * at ../engine/kvc-engine from this binary or at $KVC_ENGINE): a real
 * transformer's KV computed in one process, stored through libkvcache into
 * a real kvcached (kvcd_fixture.h: memfd mode on the host, kernel mode in
 * the VM), loaded in another process, after a daemon restart, and from
 * each tier; every time the next-token logits with the reused KV must be
 * bit-identical to a full recompute (kvc-engine verify checks that itself
 * and prints a hash of the logits, which must also match the storing
 * process's).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "kvc_client.h"
#include "kvc_ioctl.h"
#include "keys.h"
#include "proto.h"

#include "kvcd_fixture.h"

/* The tiny model: 512 bytes of KV a token, 32 KiB blocks of 64 tokens. */
#define CONTEXT	"1000"		/* 15 full blocks, 15 reusable */

struct verify_out {
	int status;		/* exit status, or -1 */
	unsigned int reused, dram, g3, g4;
	char identical[8];
	char hash[32];
	char line[512];
};

static int find_engine(char *out, size_t len)
{
	const char *env = getenv("KVC_ENGINE");
	char daemon[PATH_MAX];
	int ret;

	if (env && *env) {
		snprintf(out, len, "%s", env);
		return access(out, X_OK) ? -errno : 0;
	}
	/* Beside the daemon: ../helper/kvcached -> ../engine/kvc-engine. */
	ret = find_daemon(daemon, sizeof(daemon));
	if (ret)
		return ret;
	*strrchr(daemon, '/') = '\0';
	snprintf(out, len, "%s/../engine/kvc-engine", daemon);
	return access(out, X_OK) ? -errno : 0;
}

/* Run kvc-engine verify --phase PHASE against the fixture's daemon. */
static int run_verify(SELF *self, const char *phase, struct verify_out *v)
{
	char engine[PATH_MAX], cmd[2 * PATH_MAX + 256], ns[16];
	FILE *p;
	int st;

	memset(v, 0, sizeof(*v));
	v->status = -1;
	if (find_engine(engine, sizeof(engine)))
		return -ENOENT;
	snprintf(ns, sizeof(ns), "%u", self->ns);
	snprintf(cmd, sizeof(cmd),
		 "%s --socket %s --ns %s --model tiny --threads 1 --quiet "
		 "verify --context " CONTEXT " --phase %s 2>&1",
		 engine, self->sock, ns, phase);
	p = popen(cmd, "r");
	if (!p)
		return -errno;
	while (fgets(v->line, sizeof(v->line), p)) {
		char *h = strstr(v->line, "logits_hash=");
		char *r = strstr(v->line, "reused_tokens=");

		if (!h || !r)
			continue;
		sscanf(r, "reused_tokens=%u", &v->reused);
		sscanf(strstr(v->line, "from_dram="),
		       "from_dram=%u from_g3=%u from_g4=%u identical=%7s",
		       &v->dram, &v->g3, &v->g4, v->identical);
		sscanf(h, "logits_hash=%31s", v->hash);
		break;
	}
	while (fgetc(p) != EOF)
		;
	st = pclose(p);
	v->status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	return 0;
}

/* g3 and g4, both written through, in fresh directories. */
static void two_tiers(char *g3, char *g4, size_t len, char *conf,
		      size_t clen)
{
	tier_dir(g3, len, "g3");
	tier_dir(g4, len, "g4");
	snprintf(conf, clen,
		 "[g3]\ndirectory = %s\ncapacity = 64M\nwrite = through\n"
		 "[g4]\ndirectory = %s\ncapacity = 64M\nwrite = through\n"
		 "node = engine-test\n", g3, g4);
}

/* The engine's KV in one process, reused bit-exactly by another. */
TEST_F_TIMEOUT(kvcd, reuse_across_processes_is_bit_exact, 300)
{
	struct verify_out store, load;

	ASSERT_EQ(0, run_verify(self, "store", &store));
	ASSERT_EQ(0, store.status) TH_LOG("%s", store.line);
	ASSERT_NE(0, store.hash[0]);
	ASSERT_EQ(0, run_verify(self, "load", &load));
	EXPECT_EQ(0, load.status) TH_LOG("%s", load.line);
	EXPECT_STREQ("yes", load.identical);
	EXPECT_EQ(960, load.reused);	/* 15 blocks of 64 */
	EXPECT_EQ(15, load.dram);
	EXPECT_STREQ(store.hash, load.hash);
}

/*
 * Across a kvcached restart, then from g3 alone and from g4 alone: the
 * same logits every time.
 */
TEST_F_TIMEOUT(kvcd, reuse_from_every_tier_after_restart, 600)
{
	char g3[PATH_MAX], g4[PATH_MAX], conf[3 * PATH_MAX], why[512] = "";
	struct verify_out store, v;
	struct kvc_flush_reply fr;

	two_tiers(g3, g4, sizeof(g3), conf, sizeof(conf));
	ASSERT_EQ(0, restart(self, conf, why, sizeof(why))) TH_LOG("%s", why);
	ASSERT_EQ(0, run_verify(self, "store", &store));
	ASSERT_EQ(0, store.status) TH_LOG("%s", store.line);
	ASSERT_EQ(15, wait_stat(&self->c, "g3_spills", 15, 60));
	ASSERT_EQ(15, wait_stat(&self->c, "g4_spills", 15, 60));

	/* A restart (memfd mode loses the pool; the module keeps it). */
	ASSERT_EQ(0, restart(self, conf, why, sizeof(why))) TH_LOG("%s", why);
	ASSERT_EQ(0, run_verify(self, "load", &v));
	EXPECT_EQ(0, v.status) TH_LOG("%s", v.line);
	EXPECT_EQ(960, v.reused);
	EXPECT_STREQ(store.hash, v.hash);

	/* Only g3 and g4 hold it: the load comes from g3. */
	ASSERT_EQ(0, flush_pool(&self->c, self->ns));
	ASSERT_EQ(0, run_verify(self, "load", &v));
	EXPECT_EQ(0, v.status) TH_LOG("%s", v.line);
	EXPECT_EQ(15, v.g3) TH_LOG("%s", v.line);
	EXPECT_STREQ(store.hash, v.hash);

	/* Only g4: from the shared tier. */
	ASSERT_EQ(0, kvcc_flush_tiers(&self->c, self->ns,
				      KVC_PROTO_TIER_POOL | KVC_PROTO_TIER_G3,
				      &fr));
	ASSERT_EQ(0, run_verify(self, "load", &v));
	EXPECT_EQ(0, v.status) TH_LOG("%s", v.line);
	EXPECT_EQ(15, v.g4) TH_LOG("%s", v.line);
	EXPECT_STREQ(store.hash, v.hash);
	rm_rf(g3);
	rm_rf(g4);
}

/* Nothing cached and no daemon: the engine says so, it does not crash. */
TEST_F_TIMEOUT(kvcd, engine_without_a_daemon, 120)
{
	struct verify_out v;

	/* A cold load phase must fail: nothing to reuse. */
	ASSERT_EQ(0, run_verify(self, "load", &v));
	EXPECT_EQ(1, v.status) TH_LOG("%s", v.line);
	kvcc_close(&self->c);
	daemon_stop(self);
	unlink(self->sock);
	ASSERT_EQ(0, run_verify(self, "store", &v));
	EXPECT_EQ(1, v.status) TH_LOG("%s", v.line);
	EXPECT_NE(NULL, strstr(v.line, "kvcached")) TH_LOG("%s", v.line);
}

TEST_HARNESS_MAIN
