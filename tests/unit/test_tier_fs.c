// SPDX-License-Identifier: GPL-2.0
/*
 * Host tests for helper/kvcached/tiers/tier_fs.c: mountinfo lines as
 * the kernel writes them (NFS's super options among them), the longest
 * mount point wins, escapes; NFS's options and their defaults; the
 * probe of link(2) and RENAME_NOREPLACE in a real directory, which
 * leaves nothing behind; and what the judge says and refuses.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <unistd.h>

#include "log.h"
#include "scratch.h"
#include "tap.h"
#include "tier_fs.h"

static const char mountinfo[] =
	"22 1 0:21 / / rw,relatime - ext4 /dev/vda1 rw\n"
	"23 22 0:22 / /proc rw,nosuid - proc proc rw\n"
	"40 22 0:40 / /mnt/g4 rw,relatime shared:5 - nfs4 [fe80::1%eth0]:/export rw,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,soft,proto=tcp6,nconnect=4,timeo=600,retrans=2,sec=sys,lookupcache=pos,acregmax=10,local_lock=none,addr=fe80::1\n"
	"41 22 0:41 / /mnt/g40 ro,relatime - tmpfs tmpfs rw\n"
	"42 22 0:42 / /mnt/with\\040space rw - tmpfs none rw\n"
	"this line has no separator at all\n"
	"43 22 0:43 / /mnt/noac rw - nfs srv:/x rw,vers=3,hard,noac\n";

static int parse(const char *path, struct kvc_tier_fs *fs)
{
	FILE *f = fmemopen((void *)mountinfo, sizeof(mountinfo) - 1, "r");
	int ret;

	if (!f)
		return -errno;
	ret = kvc_tier_fs_mountinfo(f, path, fs);
	fclose(f);
	return ret;
}

static void mounts(void)
{
	struct kvc_tier_fs fs;

	TAP_ASSERT_EQ(parse("/mnt/g4/kv", &fs), 0);
	TAP_EXPECT_STREQ(fs.mount, "/mnt/g4");
	TAP_EXPECT_STREQ(fs.type, "nfs4");
	TAP_EXPECT_TRUE(fs.nfs);
	TAP_EXPECT_TRUE(fs.soft);
	TAP_EXPECT_FALSE(fs.readonly);
	TAP_EXPECT_EQ(fs.vers_major, 4u);
	TAP_EXPECT_EQ(fs.vers_minor, 2u);
	TAP_EXPECT_EQ(fs.nconnect, 4u);
	TAP_EXPECT_EQ(fs.acregmax, 10u);
	/* Not said: the default. */
	TAP_EXPECT_EQ(fs.acdirmax, (unsigned int)KVC_NFS_ACDIRMAX_DEFAULT);
	TAP_EXPECT_STREQ(fs.lookupcache, "pos");

	/* A prefix by name is not a parent directory. */
	TAP_ASSERT_EQ(parse("/mnt/g40/x", &fs), 0);
	TAP_EXPECT_STREQ(fs.mount, "/mnt/g40");
	TAP_EXPECT_TRUE(fs.readonly);
	TAP_EXPECT_FALSE(fs.nfs);
	TAP_ASSERT_EQ(parse("/mnt/g4", &fs), 0);
	TAP_EXPECT_STREQ(fs.mount, "/mnt/g4");
	TAP_ASSERT_EQ(parse("/mnt/other", &fs), 0);
	TAP_EXPECT_STREQ(fs.mount, "/");
	TAP_EXPECT_STREQ(fs.type, "ext4");

	TAP_ASSERT_EQ(parse("/mnt/with space/d", &fs), 0);
	TAP_EXPECT_STREQ(fs.mount, "/mnt/with space");

	TAP_ASSERT_EQ(parse("/mnt/noac", &fs), 0);
	TAP_EXPECT_TRUE(fs.nfs);
	TAP_EXPECT_FALSE(fs.soft);
	TAP_EXPECT_EQ(fs.acregmax, 0u);
	TAP_EXPECT_EQ(fs.vers_major, 3u);
	TAP_EXPECT_STREQ(fs.lookupcache, "all");
}

static void nfs_options(void)
{
	struct kvc_tier_fs fs = { 0 };

	kvc_tier_fs_nfs_options("rw,vers=4.1,hard,actimeo=5", &fs);
	TAP_EXPECT_FALSE(fs.soft);
	TAP_EXPECT_EQ(fs.acregmax, 5u);
	TAP_EXPECT_EQ(fs.acdirmax, 5u);
	TAP_EXPECT_EQ(fs.nconnect, 1u);
	memset(&fs, 0, sizeof(fs));
	kvc_tier_fs_nfs_options("rw,softerr,lookupcache=positive", &fs);
	TAP_EXPECT_TRUE(fs.soft);
	TAP_EXPECT_STREQ(fs.lookupcache, "pos");
	TAP_EXPECT_EQ(fs.acregmax, (unsigned int)KVC_NFS_ACREGMAX_DEFAULT);
}

/* Files in dir, the probe's leftovers among them. */
static int entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.' || strncmp(de->d_name, ".fsprobe", 8) == 0;
	closedir(d);
	return n;
}

static void probe(void)
{
	struct kvc_tier_fs fs;
	char dir[256];

	TAP_ASSERT_EQ(scratch_make(dir, sizeof(dir), "tierfs"), 0);
	TAP_EXPECT_EQ(kvc_tier_fs_probe(dir, "node-a", &fs), 0);
	TAP_EXPECT_TRUE(fs.type[0] != '\0');
	TAP_EXPECT_TRUE(fs.probed);
	/* Every filesystem the tests run on has hard links. */
	TAP_EXPECT_TRUE(fs.hardlinks);
	TAP_EXPECT_EQ(entries(dir), 0);
	TAP_EXPECT_EQ(kvc_tier_fs_judge(&fs, "g3", dir, false, 60000), 0);
	TAP_EXPECT_EQ(kvc_tier_fs_probe("/nonexistent/kvc", "a", &fs),
		      -ENOENT);
	scratch_remove(dir);
}

static void judge(void)
{
	struct kvc_tier_fs fs = { .probed = true };
	int saved = kvc_log_get_level();

	/* Said at error level whatever the level set. */
	kvc_log_set_level(KVC_LOG_ERROR);
	strcpy(fs.type, "fuse.gw");
	TAP_EXPECT_EQ(kvc_tier_fs_judge(&fs, "g4", "/g4", true, 60000),
		      -EOPNOTSUPP);
	fs.noreplace = true;
	TAP_EXPECT_EQ(kvc_tier_fs_judge(&fs, "g4", "/g4", true, 60000), 0);
	/* Not writable, so not probed: nothing to publish. */
	fs.probed = fs.noreplace = false;
	TAP_EXPECT_EQ(kvc_tier_fs_judge(&fs, "g4", "/g4", true, 60000), 0);
	/* NFS findings are warnings: the tier opens. */
	fs.probed = fs.hardlinks = true;
	fs.nfs = fs.soft = true;
	fs.acregmax = 60;
	TAP_EXPECT_EQ(kvc_tier_fs_judge(&fs, "g4", "/g4", true, 60000), 0);
	kvc_log_set_level(saved);
}

int main(void)
{
	TAP_RUN(mounts);
	TAP_RUN(nfs_options);
	TAP_RUN(probe);
	TAP_RUN(judge);
	return tap_done();
}
