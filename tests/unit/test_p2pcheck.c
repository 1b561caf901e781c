// SPDX-License-Identifier: GPL-2.0
/*
 * kvcachectl p2pcheck on sysfs trees made here: the verdict and its reason
 * for each case the test VM's two topologies do not show (ACS redirect on
 * a switch port, NVMe native multipath, a kernel without P2PDMA, no
 * module, no provider). The VM runs it on the real tree (p2p_test).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kvcachectl/p2pcheck.h"
#include "tap.h"

#define SWITCH	"/sys/devices/pci0000:00/0000:00:02.0/0000:01:00.0"
#define NVME	SWITCH "/0000:02:00.0/0000:03:00.0"
#define GPU	SWITCH "/0000:02:01.0/0000:04:00.0"
#define GPU_RC	"/sys/devices/pci0000:00/0000:00:05.0"
#define KVC	"/sys/class/misc/kvcache"

static char root[PATH_MAX];

static void mkdirs(const char *rel)
{
	char p[PATH_MAX], *s;

	snprintf(p, sizeof(p), "%s%s", root, rel);
	for (s = p + strlen(root) + 1; (s = strchr(s, '/')); s++) {
		*s = '\0';
		mkdir(p, 0755);
		*s = '/';
	}
	mkdir(p, 0755);
}

static void put(const char *rel, const char *text)
{
	char p[PATH_MAX];
	FILE *f;

	snprintf(p, sizeof(p), "%s%s", root, rel);
	f = fopen(p, "w");
	TAP_ASSERT_TRUE(f != NULL);
	fputs(text, f);
	fclose(f);
}

/* @rel -> the tree's @target (an absolute link inside the root). */
static void link_to(const char *rel, const char *target)
{
	char p[PATH_MAX], t[PATH_MAX];

	snprintf(p, sizeof(p), "%s%s", root, rel);
	snprintf(t, sizeof(t), "%s%s", root, target);
	TAP_ASSERT_EQ(symlink(t, p), 0);
}

/* A PCI device at @path, listed under /sys/bus/pci/devices. */
static void pci_dev(const char *path)
{
	char rel[PATH_MAX];

	mkdirs(path);
	snprintf(rel, sizeof(rel), "/sys/bus/pci/devices/%s",
		 strrchr(path, '/') + 1);
	link_to(rel, path);
	snprintf(rel, sizeof(rel), "%s/resource", path);
	put(rel, "0x00000000fe000000 0x00000000ffffffff 0x0000000000140204\n");
}

/* @pci's config space with an ACS capability whose control is @ctrl. */
static void acs(const char *path, unsigned int ctrl)
{
	unsigned char cfg[4096] = { 0 };
	char p[2 * PATH_MAX];
	FILE *f;

	cfg[0x100] = 0x0d;		/* ACS, version 1, last capability */
	cfg[0x102] = 0x01;
	cfg[0x104] = 0x1f;		/* capabilities */
	cfg[0x106] = ctrl & 0xff;
	cfg[0x107] = ctrl >> 8;
	snprintf(p, sizeof(p), "%s%s/config", root, path);
	f = fopen(p, "wb");
	TAP_ASSERT_TRUE(f != NULL);
	fwrite(cfg, 1, sizeof(cfg), f);
	fclose(f);
}

static void provider(int id, const char *kind, const char *dev,
		     const char *distances)
{
	char rel[PATH_MAX];

	snprintf(rel, sizeof(rel), KVC "/providers/%d", id);
	mkdirs(rel);
	snprintf(rel, sizeof(rel), KVC "/providers/%d/device", id);
	link_to(rel, dev);
	snprintf(rel, sizeof(rel), KVC "/providers/%d/kind", id);
	put(rel, kind);
	snprintf(rel, sizeof(rel), KVC "/providers/%d/size", id);
	put(rel, "67108864\n");
	snprintf(rel, sizeof(rel), KVC "/providers/%d/regions", id);
	put(rel, "2\n");
	snprintf(rel, sizeof(rel), KVC "/providers/%d/distances", id);
	put(rel, distances);
}

/* A fresh tree: kvcache.ko with @features, the switch, both GPUs, the NVMe. */
static void tree(const char *features)
{
	char cmd[PATH_MAX + 16];

	if (root[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
		TAP_ASSERT_EQ(system(cmd), 0);
	}
	snprintf(root, sizeof(root), "/tmp/p2pc-XXXXXX");
	TAP_ASSERT_TRUE(mkdtemp(root) != NULL);
	mkdirs("/sys/bus/pci/devices");
	mkdirs("/sys/class/nvme/nvme0");
	mkdirs("/sys/module/nvme_core/parameters");
	put("/sys/module/nvme_core/parameters/multipath", "Y\n");
	pci_dev("/sys/devices/pci0000:00/0000:00:02.0");
	pci_dev(SWITCH);
	pci_dev(SWITCH "/0000:02:00.0");
	pci_dev(SWITCH "/0000:02:01.0");
	pci_dev(NVME);
	pci_dev(GPU);
	pci_dev(GPU_RC);
	mkdirs(NVME "/nvme/nvme0");
	mkdirs("/sys/class/nvme/nvme0/nvme0n1");
	if (features) {
		mkdirs(KVC "/providers");
		put(KVC "/features", features);
	}
}

/* kvc_p2pcheck()'s output on the tree, and its status in @rc. */
static char *run(int *rc)
{
	static char out[16384];
	FILE *f = fmemopen(out, sizeof(out) - 1, "w");

	TAP_ASSERT_TRUE(f != NULL);
	*rc = kvc_p2pcheck(root, f);
	fclose(f);
	return out;
}

static void through_a_switch_is_p2p(void)
{
	char *out;
	int rc;

	tree("0x47\n");
	provider(0, "bar\n", GPU, "0000:03:00.0 4\n");
	out = run(&rc);
	TAP_EXPECT_EQ(rc, 0);
	TAP_EXPECT_TRUE(strstr(out, "verdict: 0000:04:00.0 -> 0000:03:00.0: "
				    "P2P: P2PDMA distance 4, through the "
				    "switch at 0000:01:00.0\n") != NULL);
	TAP_EXPECT_TRUE(strstr(out, "provider 0: bar 0000:04:00.0, 64 MiB "
				    "of P2PDMA memory (largest BAR 32 MiB), "
				    "2 regions") != NULL);
	TAP_EXPECT_TRUE(strstr(out, "user regions yes") != NULL);
}

static void acs_redirect_is_named(void)
{
	char *out;
	int rc;

	tree("0x47\n");
	acs(SWITCH "/0000:02:00.0", 0x0001);	/* source validation only */
	acs(SWITCH "/0000:02:01.0", 0x001d);	/* SV, RR, CR, UF */
	provider(0, "bar\n", GPU, "0000:03:00.0 -1\n");
	out = run(&rc);
	TAP_EXPECT_EQ(rc, 0);
	TAP_EXPECT_TRUE(strstr(out, "verdict: 0000:04:00.0 -> 0000:03:00.0: "
				    "bounce: ACS P2P redirect is set on bridge "
				    "0000:02:01.0 (control bits 0xc)") != NULL);
	/* The NVMe's side of the switch is looked at too. */
	tree("0x47\n");
	acs(SWITCH "/0000:02:00.0", 0x0020);	/* egress control */
	acs(SWITCH "/0000:02:01.0", 0x0001);
	provider(0, "bar\n", GPU, "0000:03:00.0 -1\n");
	out = run(&rc);
	TAP_EXPECT_TRUE(strstr(out, "redirect is set on bridge 0000:02:00.0 "
				    "(control bits 0x20)") != NULL);
}

static void root_complex_is_the_host_bridge(void)
{
	char *out;
	int rc;

	tree("0x4f\n");
	provider(3, "bar\n", GPU_RC, "0000:03:00.0 -1\n");
	out = run(&rc);
	TAP_EXPECT_EQ(rc, 0);
	TAP_EXPECT_TRUE(strstr(out, "verdict: 0000:00:05.0 -> 0000:03:00.0: "
				    "bounce: no PCIe switch joins them") !=
			NULL);
}

static void multipath_heads_bounce(void)
{
	char *out;
	int rc;

	tree("0x47\n");
	rmdir(strcat(strcpy((char[PATH_MAX]){ 0 }, root),
		     "/sys/class/nvme/nvme0/nvme0n1"));
	mkdirs("/sys/class/nvme/nvme0/nvme0c0n1");
	provider(1, "p2pmem\n", NVME, "0000:03:00.0 0\n");
	provider(0, "bar\n", GPU, "0000:03:00.0 4\n");
	out = run(&rc);
	TAP_EXPECT_EQ(rc, 0);
	TAP_EXPECT_TRUE(strstr(out, "verdict: 0000:04:00.0 -> 0000:03:00.0: "
				    "bounce: P2PDMA distance 4, but files on "
				    "nvme0n1 go through NVMe native multipath "
				    "heads") != NULL);
	TAP_EXPECT_TRUE(strstr(out, "verdict: 0000:03:00.0 -> 0000:03:00.0: "
				    "bounce: P2PDMA distance 0") != NULL);
	TAP_EXPECT_TRUE(strstr(out, "NVMe native multipath: Y") != NULL);
	/* Providers in id order: 0 before 1. */
	TAP_EXPECT_TRUE(strstr(out, "provider 0:") <
			strstr(out, "provider 1:"));
}

static void nothing_to_check_says_why(void)
{
	char *out;
	int rc;

	tree(NULL);
	out = run(&rc);
	TAP_EXPECT_EQ(rc, 1);
	TAP_EXPECT_TRUE(strstr(out, "impossible: kvcache.ko is not loaded") !=
			NULL);
	tree("0x3b\n");			/* no P2P feature */
	out = run(&rc);
	TAP_EXPECT_EQ(rc, 0);
	TAP_EXPECT_TRUE(strstr(out, "impossible: this kernel has no "
				    "CONFIG_PCI_P2PDMA") != NULL);
	tree("0x07\n");
	out = run(&rc);
	TAP_EXPECT_EQ(rc, 0);
	TAP_EXPECT_TRUE(strstr(out, "impossible: no provider") != NULL);
	TAP_EXPECT_TRUE(strstr(out, "user regions no") != NULL);
}

int main(void)
{
	char cmd[PATH_MAX + 16];
	int ret;

	TAP_RUN(through_a_switch_is_p2p);
	TAP_RUN(acs_redirect_is_named);
	TAP_RUN(root_complex_is_the_host_bridge);
	TAP_RUN(multipath_heads_bounce);
	TAP_RUN(nothing_to_check_says_why);
	ret = tap_done();
	if (root[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
		if (system(cmd))
			ret = 1;
	}
	return ret;
}
