// SPDX-License-Identifier: GPL-2.0
/*
 * Host tests for helper/common/devinfo.c: feature names, byte formatting, sysfs
 * reads from a fake sysfs directory, and the INFO call's error paths on
 * file descriptors that are not /dev/kvcache.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "devinfo.h"
#include "tap.h"

static void feature_names_known_and_unknown(void)
{
	char buf[64];

	kvc_feature_names(0, buf, sizeof(buf));
	TAP_CHECK(!strcmp(buf, "none"));
	kvc_feature_names(KVCACHE_FEAT_POOL, buf, sizeof(buf));
	TAP_CHECK(!strcmp(buf, "pool"));
	kvc_feature_names(KVCACHE_FEAT_ALL, buf, sizeof(buf));
	TAP_CHECK(!strcmp(buf, "pool,netlink,p2p,view,discard,query_exact,user_region"));
	kvc_feature_names(KVCACHE_FEAT_P2P | (1ULL << 40), buf, sizeof(buf));
	TAP_CHECK(!strcmp(buf, "p2p,0x10000000000"));
	kvc_feature_names(1ULL << 63, buf, sizeof(buf));
	TAP_CHECK(!strcmp(buf, "0x8000000000000000"));
}

static void feature_names_truncate_safely(void)
{
	char buf[8];
	size_t need;

	memset(buf, 'x', sizeof(buf));
	need = kvc_feature_names(KVCACHE_FEAT_ALL | (1ULL << 50), buf,
				 sizeof(buf));
	TAP_CHECK(need ==
		  strlen("pool,netlink,p2p,view,discard,query_exact,"
			 "user_region,0x4000000000000"));
	TAP_CHECK(buf[sizeof(buf) - 1] == '\0');
	TAP_CHECK(!strncmp(buf, "pool,ne", 7));
	/* A zero-length buffer is never written. */
	buf[0] = 'x';
	need = kvc_feature_names(KVCACHE_FEAT_POOL, buf, 0);
	TAP_CHECK(need == 4 && buf[0] == 'x');
}

static void bytes_format_exactly(void)
{
	char buf[32];

	kvc_format_bytes(0, buf, sizeof(buf));
	TAP_CHECK(!strcmp(buf, "0 B"));
	kvc_format_bytes(1536, buf, sizeof(buf));
	TAP_CHECK(!strcmp(buf, "1536 B"));
	kvc_format_bytes(4096, buf, sizeof(buf));
	TAP_CHECK(!strcmp(buf, "4 KiB"));
	kvc_format_bytes(3ULL << 20, buf, sizeof(buf));
	TAP_CHECK(!strcmp(buf, "3 MiB"));
	kvc_format_bytes((1ULL << 30) + 4096, buf, sizeof(buf));
	TAP_CHECK(!strcmp(buf, "1048580 KiB"));
	kvc_format_bytes(1ULL << 63, buf, sizeof(buf));
	TAP_CHECK(!strcmp(buf, "8 EiB"));
}

static void sysfs_read_strips_newline_and_reports_errors(void)
{
	const char *tmp = getenv("TMPDIR");
	char dir[256], path[300], buf[16];
	FILE *f;

	snprintf(dir, sizeof(dir), "%s/kvc-sysfs-XXXXXX", tmp ? tmp : "/tmp");
	TAP_CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/pool", dir);
	TAP_CHECK(mkdir(path, 0755) == 0);
	snprintf(path, sizeof(path), "%s/pool/block_size", dir);
	f = fopen(path, "w");
	TAP_ASSERT_TRUE(f != NULL);
	fputs("2097152\n", f);
	fclose(f);

	TAP_CHECK(kvc_sysfs_read(dir, "pool/block_size", buf, sizeof(buf)) == 0);
	TAP_CHECK(!strcmp(buf, "2097152"));
	/* Truncated to the buffer, still terminated. */
	TAP_CHECK(kvc_sysfs_read(dir, "pool/block_size", buf, 4) == 0);
	TAP_CHECK(!strcmp(buf, "209"));
	TAP_CHECK(kvc_sysfs_read(dir, "pool/missing", buf, sizeof(buf)) ==
		  -ENOENT);
	TAP_CHECK(kvc_sysfs_read(dir, "pool/block_size", buf, 0) == -EINVAL);

	unlink(path);
	snprintf(path, sizeof(path), "%s/pool", dir);
	rmdir(path);
	rmdir(dir);
}

static void info_on_wrong_files_fails_cleanly(void)
{
	struct kvcache_info info;
	int fd = open("/dev/null", O_RDWR);

	TAP_CHECK(fd >= 0);
	TAP_EXPECT_EQ(kvc_dev_info(fd, &info), -ENOTTY);
	close(fd);
	TAP_EXPECT_EQ(kvc_dev_info(-1, &info), -EBADF);
}

int main(void)
{
	TAP_RUN(feature_names_known_and_unknown);
	TAP_RUN(feature_names_truncate_safely);
	TAP_RUN(bytes_format_exactly);
	TAP_RUN(sysfs_read_strips_newline_and_reports_errors);
	TAP_RUN(info_on_wrong_files_fails_cleanly);
	return tap_done();
}
