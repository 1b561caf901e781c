// SPDX-License-Identifier: GPL-2.0
/*
 * Selftests for the test bench itself (scripts/vm): the NVMe's controller
 * memory buffer is published as P2PDMA memory, the ivshmem "GPU" sits under
 * the same PCIe switch, and its BAR2 is the host file scripts/vm created.
 * Later P2P tests rely on all three.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "kvc_sysfs.h"

#define PCI_DEVICES "/sys/bus/pci/devices"
#define BAR2_SIZE (64ULL << 20)

static uint64_t pci_attr(const char *bdf, const char *attr)
{
	char path[PATH_MAX];
	uint64_t v = UINT64_MAX;

	snprintf(path, sizeof(path), PCI_DEVICES "/%s/%s", bdf, attr);
	if (kvc_read_u64(path, &v))
		return UINT64_MAX;
	return v;
}

/* First PCI device matching vendor/device, or class when vendor is 0. */
static int find_pci(uint64_t vendor, uint64_t device, uint64_t class,
		    char *bdf, size_t len)
{
	struct dirent *de;
	DIR *d = opendir(PCI_DEVICES);
	int found = 0;

	if (!d)
		return 0;
	while (!found && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (vendor ? (pci_attr(de->d_name, "vendor") == vendor &&
			      pci_attr(de->d_name, "device") == device)
			   : pci_attr(de->d_name, "class") == class) {
			snprintf(bdf, len, "%s", de->d_name);
			found = 1;
		}
	}
	closedir(d);
	return found;
}

static uint64_t bar_size(const char *bdf, int bar)
{
	char path[PATH_MAX], line[256];
	unsigned long long start, end, flags;
	FILE *f;
	int i;

	snprintf(path, sizeof(path), PCI_DEVICES "/%s/resource", bdf);
	f = fopen(path, "r");
	if (!f)
		return 0;
	for (i = 0; i <= bar; i++) {
		if (!fgets(line, sizeof(line), f)) {
			fclose(f);
			return 0;
		}
	}
	fclose(f);
	if (sscanf(line, "%llx %llx %llx", &start, &end, &flags) != 3 || !end)
		return 0;
	return end - start + 1;
}

/* The upstream switch port above a device: its grandparent in sysfs. */
static int upstream_port(const char *bdf, char *out, size_t len)
{
	char path[PATH_MAX], real[PATH_MAX], *p;
	int i;

	snprintf(path, sizeof(path), PCI_DEVICES "/%s", bdf);
	if (!realpath(path, real))
		return -1;
	for (i = 0; i < 2; i++) {
		p = strrchr(real, '/');
		if (!p)
			return -1;
		*p = '\0';
	}
	snprintf(out, len, "%s", real);
	return 0;
}

TEST(nvme_cmb_is_published_p2pmem)
{
	char nvme[NAME_MAX + 1];

	ASSERT_TRUE(find_pci(0, 0, 0x010802, nvme, sizeof(nvme)))
		TH_LOG("no NVMe controller in the VM");
	EXPECT_EQ(1, pci_attr(nvme, "p2pmem/published"));
	EXPECT_EQ(64ULL << 20, pci_attr(nvme, "p2pmem/size"));
}

TEST(ivshmem_gpu_is_under_the_nvme_switch)
{
	char gpu[NAME_MAX + 1], nvme[NAME_MAX + 1], up_gpu[PATH_MAX], up_nvme[PATH_MAX];

	ASSERT_TRUE(find_pci(0x1af4, 0x1110, 0, gpu, sizeof(gpu)))
		TH_LOG("no ivshmem device in the VM");
	ASSERT_TRUE(find_pci(0, 0, 0x010802, nvme, sizeof(nvme)));
	EXPECT_EQ(BAR2_SIZE, bar_size(gpu, 2));
	ASSERT_EQ(0, upstream_port(gpu, up_gpu, sizeof(up_gpu)));
	ASSERT_EQ(0, upstream_port(nvme, up_nvme, sizeof(up_nvme)));
	EXPECT_STREQ(up_nvme, up_gpu);
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = seed >> 24;
	}
}

TEST(ivshmem_bar2_is_the_host_file)
{
	const char *file = getenv("KVC_GPU_FILE");
	uint8_t want[8192], got[8192];
	char gpu[NAME_MAX + 1], path[PATH_MAX];
	volatile uint8_t *bar;
	int fd, bfd;

	if (!file)
		SKIP(return, "KVC_GPU_FILE not set (scripts/vm --gpu FILE)");
	ASSERT_TRUE(find_pci(0x1af4, 0x1110, 0, gpu, sizeof(gpu)));
	snprintf(path, sizeof(path), PCI_DEVICES "/%s/enable", gpu);
	ASSERT_EQ(0, kvc_write_file(path, "1"));

	snprintf(path, sizeof(path), PCI_DEVICES "/%s/resource2", gpu);
	bfd = open(path, O_RDWR | O_SYNC);
	ASSERT_LE(0, bfd);
	bar = mmap(NULL, BAR2_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, bfd, 0);
	ASSERT_NE(MAP_FAILED, bar);
	fd = open(file, O_RDWR);
	ASSERT_LE(0, fd);

	/* Guest writes through the BAR show up in the host file ... */
	fill(want, sizeof(want), 42);
	for (size_t i = 0; i < sizeof(want); i++)
		bar[BAR2_SIZE - sizeof(want) + i] = want[i];
	ASSERT_EQ(sizeof(got), pread(fd, got, sizeof(got),
				     BAR2_SIZE - sizeof(got)));
	EXPECT_EQ(0, memcmp(want, got, sizeof(want)));

	/* ... and host file writes show up in the BAR. */
	fill(want, sizeof(want), 7);
	ASSERT_EQ(sizeof(want), pwrite(fd, want, sizeof(want), 4096));
	for (size_t i = 0; i < sizeof(got); i++)
		got[i] = bar[4096 + i];
	EXPECT_EQ(0, memcmp(want, got, sizeof(want)));

	close(fd);
	munmap((void *)bar, BAR2_SIZE);
	close(bfd);
	snprintf(path, sizeof(path), PCI_DEVICES "/%s/enable", gpu);
	kvc_write_file(path, "0");
}

TEST_HARNESS_MAIN
