// SPDX-License-Identifier: GPL-2.0
/*
 * Selftests for /dev/kvcache basics: the node, KVCACHE_IOC_INFO and its
 * size-first argument rules, bad ioctls and pointers, the sysfs knobs and
 * counters, and the module parameters. Runs as root in the test VM with
 * kvcache.ko loaded (scripts/vm); module_params_are_validated unloads and
 * reloads the module (with the parameters the VM used).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <linux/kvcache.h>

#include "kselftest_harness.h"
#include "kvc_sysfs.h"

static int info_ioctl(int fd, void *arg)
{
	return ioctl(fd, KVCACHE_IOC_INFO, arg) ? -errno : 0;
}

static int info_with_size(int fd, uint32_t size)
{
	uint8_t buf[KVCACHE_STRUCT_MAX + 64] = { 0 };

	memcpy(buf, &size, sizeof(size));
	return info_ioctl(fd, buf);
}

/* Run fn in a child that dropped root; returns the child's exit code. */
static int as_nobody(int (*fn)(void))
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		if (setgid(65534) || setuid(65534))
			_exit(99);
		_exit(fn());
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

FIXTURE(dev) {
	int fd;
};

FIXTURE_SETUP(dev)
{
	self->fd = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->fd) TH_LOG("open: %s", strerror(errno));
}

FIXTURE_TEARDOWN(dev)
{
	close(self->fd);
}

TEST(node_is_misc_char_device_with_param_mode)
{
	uint64_t mode;
	struct stat st;

	ASSERT_EQ(0, stat(KVCACHE_DEVICE_PATH, &st));
	EXPECT_TRUE(S_ISCHR(st.st_mode));
	ASSERT_EQ(0, kvc_read_u64("/sys/module/kvcache/parameters/dev_mode",
				  &mode));
	EXPECT_EQ(mode, st.st_mode & 07777);
}

static int try_open_dev(void)
{
	int fd = open(KVCACHE_DEVICE_PATH, O_RDWR);

	if (fd >= 0)
		return 0;
	return errno == EACCES ? 1 : 2;
}

TEST(unprivileged_open_follows_mode)
{
	struct stat st;

	ASSERT_EQ(0, stat(KVCACHE_DEVICE_PATH, &st));
	if (st.st_mode & 0006)
		SKIP(return, "device is world-accessible (dev_mode param)");
	EXPECT_EQ(1, as_nobody(try_open_dev));
}

TEST_F(dev, info_reports_abi_and_geometry)
{
	struct kvcache_info info = { .size = sizeof(info) };

	ASSERT_EQ(0, info_ioctl(self->fd, &info));
	EXPECT_EQ(sizeof(info), info.size);
	EXPECT_EQ(KVCACHE_ABI_VERSION, info.abi_version);
	EXPECT_EQ(KVCACHE_MAX_BATCH, info.max_batch);
	EXPECT_EQ(0, info.flags);
	EXPECT_EQ(0, info.features & ~KVCACHE_FEAT_ALL);
	EXPECT_EQ(kvc_attr_u64("features"), info.features);
	EXPECT_EQ(kvc_attr_u64("abi_version"), info.abi_version);
	EXPECT_EQ(kvc_attr_u64("pool/block_size"), info.block_size);
	EXPECT_EQ(kvc_attr_u64("pool/nr_blocks"), info.nr_blocks);
	EXPECT_EQ(kvc_attr_u64("pool/pool_size"),
		  info.block_size * info.nr_blocks);
	for (size_t i = 0; i < sizeof(info.reserved) / 8; i++)
		EXPECT_EQ(0, info.reserved[i]);
}

TEST_F(dev, info_rejects_bad_sizes)
{
	EXPECT_EQ(-EINVAL, info_with_size(self->fd, 0));
	EXPECT_EQ(-EINVAL, info_with_size(self->fd, 4));
	EXPECT_EQ(-EINVAL, info_with_size(self->fd, KVCACHE_INFO_SIZE_VER1 - 1));
	EXPECT_EQ(-EINVAL, info_with_size(self->fd, KVCACHE_STRUCT_MAX + 1));
	EXPECT_EQ(-EINVAL, info_with_size(self->fd, UINT32_MAX));
	EXPECT_EQ(0, info_with_size(self->fd, KVCACHE_INFO_SIZE_VER1));
	EXPECT_EQ(0, info_with_size(self->fd, KVCACHE_STRUCT_MAX));
}

TEST_F(dev, info_accepts_newer_struct_with_zero_tail)
{
	uint8_t buf[128] = { 0 };
	struct kvcache_info *info = (struct kvcache_info *)buf;

	info->size = sizeof(buf);
	ASSERT_EQ(0, info_ioctl(self->fd, buf));
	/* The kernel wrote what it knows and said so. */
	EXPECT_EQ(sizeof(struct kvcache_info), info->size);
	EXPECT_EQ(KVCACHE_ABI_VERSION, info->abi_version);
	for (size_t i = sizeof(*info); i < sizeof(buf); i++)
		EXPECT_EQ(0, buf[i]);
}

TEST_F(dev, info_rejects_newer_struct_with_unknown_fields_set)
{
	uint8_t buf[128] = { 0 };
	struct kvcache_info *info = (struct kvcache_info *)buf;

	info->size = sizeof(buf);
	buf[100] = 1;
	EXPECT_EQ(-E2BIG, info_ioctl(self->fd, buf));
	/* Nothing was written back on failure. */
	EXPECT_EQ(sizeof(buf), info->size);
	EXPECT_EQ(0, info->abi_version);
}

TEST_F(dev, info_rejects_nonzero_flags_reserved_and_outputs)
{
	struct kvcache_info info;

	memset(&info, 0, sizeof(info));
	info.size = sizeof(info);
	info.flags = 1;
	EXPECT_EQ(-EINVAL, info_ioctl(self->fd, &info));

	memset(&info, 0, sizeof(info));
	info.size = sizeof(info);
	info.reserved[2] = 1ULL << 63;
	EXPECT_EQ(-EINVAL, info_ioctl(self->fd, &info));

	memset(&info, 0, sizeof(info));
	info.size = sizeof(info);
	info.block_size = 4096;
	EXPECT_EQ(-EINVAL, info_ioctl(self->fd, &info));
}

TEST_F(dev, bad_pointers_fault)
{
	long page = sysconf(_SC_PAGESIZE);
	struct kvcache_info *info;
	uint8_t *map;

	EXPECT_EQ(-EFAULT, info_ioctl(self->fd, NULL));
	EXPECT_EQ(-EFAULT, info_ioctl(self->fd, (void *)1));
	EXPECT_EQ(-EFAULT, info_ioctl(self->fd, (void *)0xffffffff81000000UL));

	map = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, map);

	/* A struct that runs into an inaccessible page. */
	ASSERT_EQ(0, mprotect(map + page, page, PROT_NONE));
	info = (struct kvcache_info *)(map + page - 16);
	info->size = sizeof(*info);
	EXPECT_EQ(-EFAULT, info_ioctl(self->fd, info));

	/* Wholly inaccessible. */
	EXPECT_EQ(-EFAULT, info_ioctl(self->fd, map + page));

	/* Readable but not writable: the result cannot be returned. */
	info = (struct kvcache_info *)map;
	memset(info, 0, sizeof(*info));
	info->size = sizeof(*info);
	ASSERT_EQ(0, mprotect(map, page, PROT_READ));
	EXPECT_EQ(-EFAULT, info_ioctl(self->fd, info));

	munmap(map, 2 * page);
}

TEST_F(dev, unknown_ioctls_are_enotty)
{
	struct kvcache_info info = { .size = sizeof(info) };
	struct termios tio;

	EXPECT_EQ(-1, ioctl(self->fd, _IOWR(KVCACHE_IOC_MAGIC, 0x7f,
					    struct kvcache_info), &info));
	EXPECT_EQ(ENOTTY, errno);
	EXPECT_EQ(-1, ioctl(self->fd, _IOWR('x', 0, struct kvcache_info),
			    &info));
	EXPECT_EQ(ENOTTY, errno);
	/* Right number, wrong direction. */
	EXPECT_EQ(-1, ioctl(self->fd, _IOR(KVCACHE_IOC_MAGIC, 0,
					   struct kvcache_info), &info));
	EXPECT_EQ(ENOTTY, errno);
	EXPECT_EQ(-1, ioctl(self->fd, _IO(KVCACHE_IOC_MAGIC, 0)));
	EXPECT_EQ(ENOTTY, errno);
	EXPECT_EQ(-1, tcgetattr(self->fd, &tio));
	EXPECT_EQ(ENOTTY, errno);
}

TEST_F(dev, command_size_bits_are_ignored)
{
	struct kvcache_info info = { .size = sizeof(info) };

	/* The struct's own size field rules, not the command's. */
	ASSERT_EQ(0, ioctl(self->fd, _IOC(_IOC_READ | _IOC_WRITE,
					  KVCACHE_IOC_MAGIC, 0, 8), &info));
	EXPECT_EQ(KVCACHE_ABI_VERSION, info.abi_version);
}

TEST_F(dev, not_seekable_readable_or_writable)
{
	char c;

	EXPECT_EQ(-1, lseek(self->fd, 0, SEEK_SET));
	EXPECT_EQ(ESPIPE, errno);
	EXPECT_EQ(-1, read(self->fd, &c, 1));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, write(self->fd, &c, 1));
	EXPECT_EQ(EINVAL, errno);
}

TEST_F(dev, ioctl_counters_move_exactly)
{
	struct kvcache_info info;
	uint64_t calls0, errs0;
	int i;

	calls0 = kvc_attr_u64("stats/ioctls");
	errs0 = kvc_attr_u64("stats/ioctl_errors");
	for (i = 0; i < 10; i++) {
		memset(&info, 0, sizeof(info));
		info.size = sizeof(info);
		ASSERT_EQ(0, info_ioctl(self->fd, &info));
	}
	for (i = 0; i < 5; i++)
		ASSERT_EQ(-EINVAL, info_with_size(self->fd, 1));
	EXPECT_EQ(calls0 + 15, kvc_attr_u64("stats/ioctls"));
	EXPECT_EQ(errs0 + 5, kvc_attr_u64("stats/ioctl_errors"));
}

TEST(open_counters_follow_open_and_close)
{
	uint64_t open0 = kvc_attr_u64("stats/open_files");
	uint64_t opens0 = kvc_attr_u64("stats/opens");
	int fds[3], i;

	for (i = 0; i < 3; i++)
		ASSERT_LE(0, fds[i] = open(KVCACHE_DEVICE_PATH, O_RDWR));
	EXPECT_EQ(open0 + 3, kvc_attr_u64("stats/open_files"));
	EXPECT_EQ(opens0 + 3, kvc_attr_u64("stats/opens"));
	for (i = 0; i < 3; i++)
		close(fds[i]);
	EXPECT_EQ(open0, kvc_attr_u64("stats/open_files"));
}

TEST(geometry_knobs_validate_and_apply)
{
	uint64_t bs0 = kvc_attr_u64("pool/block_size");
	uint64_t ps0 = kvc_attr_u64("pool/pool_size");
	uint64_t max = kvc_attr_u64("pool/max_pool_size");
	struct kvcache_info info = { .size = sizeof(info) };
	char buf[64];
	int fd;

	ASSERT_NE(UINT64_MAX, bs0);
	ASSERT_EQ(0, kvc_write_file(kvc_attr("pool/pool_size"), "64M"));
	ASSERT_EQ(0, kvc_write_file(kvc_attr("pool/block_size"), "4096\n"));
	EXPECT_EQ(4096, kvc_attr_u64("pool/block_size"));
	EXPECT_EQ(16384, kvc_attr_u64("pool/nr_blocks"));

	fd = open(KVCACHE_DEVICE_PATH, O_RDWR);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, info_ioctl(fd, &info));
	EXPECT_EQ(4096, info.block_size);
	EXPECT_EQ(16384, info.nr_blocks);
	close(fd);

	/* Each rejected write leaves the knob as it was. */
	static const char *const bad_bs[] = {
		"3000", "0", "2048", "128M", "6K", "junk", "\n", "-4096",
		"0x1000000000000000",
	};
	for (size_t i = 0; i < sizeof(bad_bs) / sizeof(bad_bs[0]); i++) {
		EXPECT_EQ(-EINVAL, kvc_write_file(kvc_attr("pool/block_size"),
						  bad_bs[i]))
			TH_LOG("block_size \"%s\"", bad_bs[i]);
		EXPECT_EQ(4096, kvc_attr_u64("pool/block_size"));
	}

	/* pool_size: whole blocks, within max_pool_size. */
	EXPECT_EQ(-EINVAL, kvc_write_file(kvc_attr("pool/pool_size"), "4097"));
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)(max + 4096));
	EXPECT_EQ(-EINVAL, kvc_write_file(kvc_attr("pool/pool_size"), buf));
	EXPECT_EQ(64ULL << 20, kvc_attr_u64("pool/pool_size"));

	/* A block size the pool size is not a multiple of. */
	ASSERT_EQ(0, kvc_write_file(kvc_attr("pool/pool_size"), "12K"));
	EXPECT_EQ(-EINVAL, kvc_write_file(kvc_attr("pool/block_size"), "8K"));
	EXPECT_EQ(4096, kvc_attr_u64("pool/block_size"));

	/* Restore. */
	ASSERT_EQ(0, kvc_write_file(kvc_attr("pool/pool_size"), "0"));
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)bs0);
	ASSERT_EQ(0, kvc_write_file(kvc_attr("pool/block_size"), buf));
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)ps0);
	ASSERT_EQ(0, kvc_write_file(kvc_attr("pool/pool_size"), buf));
}

static int try_write_knob(void)
{
	int fd = open(KVC_SYSFS "/pool/block_size", O_WRONLY);

	if (fd >= 0)
		return 0;
	return errno == EACCES ? 1 : 2;
}

TEST(knobs_are_root_only)
{
	EXPECT_EQ(1, as_nobody(try_write_knob));
}

/* Load kvcache.ko with params; returns 0 or -errno of finit_module. */
static int load_module(const char *params)
{
	char path[512];
	const char *dir = getenv("KVC_MODULE_DIR");
	int fd, ret = 0;

	snprintf(path, sizeof(path), "%s/kvcache.ko", dir ? dir : ".");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -ENOENT;
	if (syscall(SYS_finit_module, fd, params, 0))
		ret = -errno;
	close(fd);
	return ret;
}

static int unload_module(void)
{
	return syscall(SYS_delete_module, "kvcache", O_NONBLOCK) ? -errno : 0;
}

TEST(module_params_are_validated)
{
	const char *args = getenv("KVC_MODULE_ARGS");
	struct stat st;
	int ret;

	if (!getenv("KVC_MODULE_DIR"))
		SKIP(return, "KVC_MODULE_DIR not set (run under scripts/vm)");
	ASSERT_EQ(0, unload_module());

	EXPECT_EQ(-EINVAL, load_module("block_size=3000"));
	EXPECT_EQ(-EINVAL, load_module("block_size=134217728"));
	EXPECT_EQ(-EINVAL, load_module("block_size=4096 pool_size=4097"));
	EXPECT_EQ(-EINVAL, load_module("pool_size=0x7fffffffffff0000"));
	EXPECT_EQ(-EINVAL, load_module("dev_mode=01777"));
	EXPECT_EQ(-EINVAL, load_module("dev_mode=banana"));
	EXPECT_EQ(-1, stat(KVCACHE_DEVICE_PATH, &st));

	/*
	 * A good set applies. No ASSERT until the module is back: a failure
	 * here must not leave the VM without /dev/kvcache for later tests.
	 */
	ret = load_module("dev_mode=0666 block_size=65536 pool_size=1048576");
	EXPECT_EQ(0, ret);
	if (!ret) {
		EXPECT_EQ(0, stat(KVCACHE_DEVICE_PATH, &st));
		EXPECT_EQ(0666, st.st_mode & 0777);
		EXPECT_EQ(65536, kvc_attr_u64("pool/block_size"));
		EXPECT_EQ(16, kvc_attr_u64("pool/nr_blocks"));
		EXPECT_EQ(0, unload_module());
	}

	/* Put back what the VM loaded. */
	ASSERT_EQ(0, load_module(args ? args : ""));
}

TEST_HARNESS_MAIN
