// SPDX-License-Identifier: GPL-2.0
/*
 * Host tests for helper/common/log.c: a message below the level set is not
 * printed, one at or above it is, with its level named; error messages
 * always are; under journald (JOURNAL_STREAM naming stderr) each line
 * carries its syslog priority; and a rate-limited call site says at most
 * a burst per interval, then how many it held back.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "tap.h"

static char out[8192];

/* Run fn with stderr sent to a file; what it wrote into out. */
static void capture(void (*fn)(void))
{
	FILE *f = tmpfile();
	int saved = dup(STDERR_FILENO);
	size_t n;

	fflush(stderr);
	dup2(fileno(f), STDERR_FILENO);
	fn();
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	rewind(f);
	n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = '\0';
	fclose(f);
}

static void say_all(void)
{
	kvc_err("e %d", 1);
	kvc_warn("w %d", 2);
	kvc_info("i %d", 3);
	kvc_debug("d %d", 4);
}

static void levels(void)
{
	/* The same numbers as the configuration's log_level. */
	TAP_CHECK((int)KVC_LOG_ERROR == (int)KVC_CONFIG_LOG_ERROR);
	TAP_CHECK((int)KVC_LOG_DEBUG == (int)KVC_CONFIG_LOG_DEBUG);
	TAP_CHECK(kvc_log_get_level() == KVC_LOG_INFO);	/* as left */

	capture(say_all);
	TAP_CHECK(!strcmp(out, "kvcached: error: e 1\nkvcached: warning: w 2\n"
			       "kvcached: i 3\n"));
	kvc_log_set_level(KVC_LOG_DEBUG);
	capture(say_all);
	TAP_CHECK(strstr(out, "kvcached: debug: d 4\n") != NULL);
	TAP_CHECK(strstr(out, "kvcached: i 3\n") != NULL);
	kvc_log_set_level(KVC_LOG_WARN);
	capture(say_all);
	TAP_CHECK(!strcmp(out, "kvcached: error: e 1\nkvcached: warning: w 2\n"));
	kvc_log_set_level(KVC_LOG_ERROR);
	capture(say_all);
	TAP_CHECK(!strcmp(out, "kvcached: error: e 1\n"));
	TAP_CHECK(!kvc_log_enabled(KVC_LOG_WARN) &&
		  kvc_log_enabled(KVC_LOG_ERROR));
	/* Out of range: clamped, errors are never silenced. */
	kvc_log_set_level(-5);
	TAP_CHECK(kvc_log_get_level() == KVC_LOG_ERROR);
	kvc_log_set_level(99);
	TAP_CHECK(kvc_log_get_level() == KVC_LOG_DEBUG);
	kvc_log_set_level(KVC_LOG_INFO);
}

static void journal_priorities(void)
{
	FILE *f = tmpfile();
	int saved = dup(STDERR_FILENO);
	char env[64];
	struct stat st;
	size_t n;

	/* stderr is the stream JOURNAL_STREAM names, as systemd sets it. */
	fstat(fileno(f), &st);
	snprintf(env, sizeof(env), "%llu:%llu", (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino);
	setenv("JOURNAL_STREAM", env, 1);
	fflush(stderr);
	dup2(fileno(f), STDERR_FILENO);
	kvc_log_set_level(KVC_LOG_DEBUG);
	say_all();
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	rewind(f);
	n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = '\0';
	fclose(f);
	unsetenv("JOURNAL_STREAM");
	kvc_log_set_level(KVC_LOG_INFO);
	TAP_CHECK(!strcmp(out, "<3>kvcached: error: e 1\n<4>kvcached: warning: w 2\n"
			       "<6>kvcached: i 3\n<7>kvcached: debug: d 4\n"));
}

static struct kvc_ratelimit quick = { 0.2, 3, 0, 0, 0 };

static void say_limited(void)
{
	for (int i = 0; i < 5; i++)
		kvc_log_limited(&quick, KVC_LOG_WARN, "flood %d", i);
}

static void ratelimit(void)
{
	struct kvc_ratelimit rs = { 0.2, 2, 0, 0, 0 };

	/* A burst goes through, the rest of the interval is counted. */
	TAP_ASSERT_TRUE(kvc_ratelimit(&rs));
	TAP_ASSERT_TRUE(kvc_ratelimit(&rs));
	TAP_EXPECT_FALSE(kvc_ratelimit(&rs));
	TAP_EXPECT_FALSE(kvc_ratelimit(&rs));
	TAP_EXPECT_EQ(rs.missed, 2u);

	capture(say_limited);
	TAP_EXPECT_STREQ(out, "kvcached: warning: flood 0\n"
			      "kvcached: warning: flood 1\n"
			      "kvcached: warning: flood 2\n");
	TAP_EXPECT_EQ(quick.missed, 2u);
	/* The next interval: the count first, then the message. */
	usleep(250 * 1000);
	capture(say_limited);
	TAP_EXPECT_STREQ(out, "kvcached: warning: 2 messages like the next one suppressed\n"
			      "kvcached: warning: flood 0\n"
			      "kvcached: warning: flood 1\n"
			      "kvcached: warning: flood 2\n");
	/* Below the level: neither said nor counted. */
	kvc_log_set_level(KVC_LOG_ERROR);
	quick.missed = 0;
	capture(say_limited);
	TAP_EXPECT_STREQ(out, "");
	TAP_EXPECT_EQ(quick.missed, 0u);
	kvc_log_set_level(KVC_LOG_INFO);
}

int main(void)
{
	TAP_RUN(journal_priorities);
	TAP_RUN(levels);
	TAP_RUN(ratelimit);
	return tap_done();
}
