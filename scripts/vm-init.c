// SPDX-License-Identifier: GPL-2.0
/*
 * First stage of the test VM's init (PID 1), linked statically.
 *
 * Under TCG every exec of a dynamically linked program over 9p costs about
 * half a second, so the mounts and console setup that every boot needs are
 * done here with plain system calls; then it execs the shell stage,
 * scripts/vm-init, which loads the module and runs the command.
 *
 * The kernel passes KVC_TOP and KVC_MODE from its command line (scripts/vm
 * puts them there) as environment variables.
 */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

static void die(const char *what)
{
	fprintf(stderr, "vm-init: %s: %s\n", what, strerror(errno));
	sync();
	reboot(RB_AUTOBOOT);
	_exit(1);
}

static void mnt(const char *src, const char *dst, const char *type,
		unsigned long flags, const char *data)
{
	if (mkdir(dst, 0755) && errno != EEXIST && errno != EROFS)
		die(dst);
	if (mount(src, dst, type, flags, data))
		die(dst);
}

static void loopback_up(void)
{
	struct ifreq ifr;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (s < 0)
		return;
	memset(&ifr, 0, sizeof(ifr));
	strcpy(ifr.ifr_name, "lo");
	if (!ioctl(s, SIOCGIFFLAGS, &ifr)) {
		ifr.ifr_flags |= IFF_UP;
		ioctl(s, SIOCSIFFLAGS, &ifr);
	}
	close(s);
}

/* The command's stdio is the virtio console, or /dev/console without it. */
static void console(int raw_newlines)
{
	struct termios t;
	int fd = open("/dev/hvc0", O_RDWR | O_NOCTTY);

	if (fd < 0)
		fd = open("/dev/console", O_RDWR | O_NOCTTY);
	if (fd < 0)
		die("console");
	/* Output to a pipe or file on the host wants \n, not \r\n. */
	if (raw_newlines && !tcgetattr(fd, &t)) {
		t.c_oflag &= ~ONLCR;
		tcsetattr(fd, TCSANOW, &t);
	}
	dup2(fd, 0);
	dup2(fd, 1);
	dup2(fd, 2);
	if (fd > 2)
		close(fd);
}

int main(void)
{
	const char *top = getenv("KVC_TOP");
	const char *mode = getenv("KVC_MODE");
	static char stage2[4096];

	mnt("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	mnt("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	if (mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, NULL) &&
	    errno != EBUSY)
		die("/dev");
	mnt("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755");
	mnt("debugfs", "/sys/kernel/debug", "debugfs", 0, NULL);
	mnt("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
	    "ptmxmode=0666");
	mnt("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
	/* What udev would make: bash's <(...) needs /dev/fd. */
	symlink("/proc/self/fd", "/dev/fd");
	symlink("/proc/self/fd/0", "/dev/stdin");
	symlink("/proc/self/fd/1", "/dev/stdout");
	symlink("/proc/self/fd/2", "/dev/stderr");
	mnt("kvcrun", "/run/kvc", "9p", 0,
	    "trans=virtio,version=9p2000.L,msize=512000,cache=none");
	if (mkdir("/run/tmp", 01777) || chmod("/run/tmp", 01777) ||
	    mkdir("/run/home", 0700))
		die("/run");
	sethostname("kvcache-vm", strlen("kvcache-vm"));
	loopback_up();

	if (!top)
		die("KVC_TOP not set on the kernel command line");
	console(mode && !strcmp(mode, "run"));
	snprintf(stage2, sizeof(stage2), "%s/scripts/vm-init", top);
	execl("/bin/bash", "bash", stage2, (char *)NULL);
	die(stage2);
	return 1;
}
