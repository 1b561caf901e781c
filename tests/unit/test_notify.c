// SPDX-License-Identifier: GPL-2.0
/*
 * Host tests for helper/kvcached/notify.c, against a real AF_UNIX datagram
 * receiver standing in for the service manager: a notification arrives
 * as one datagram with exactly the text sent, from this process (the
 * kernel's credentials, which the manager trusts), at a path and at an
 * abstract name; without NOTIFY_SOCKET nothing is sent and nothing
 * fails; NOTIFY_SOCKET values that are not an absolute path or an @name
 * fitting sun_path are refused, and then nothing is sent either; the
 * watchdog is this process's only when WATCHDOG_PID says so (or is
 * unset), and pings at half its interval.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "notify.h"
#include "scratch.h"
#include "tap.h"

static char dir[64];
static char why[256];

/* A receiver bound at name ("/path" or "@abstract"), with credentials. */
static int receiver(const char *name)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t len = strlen(name);
	int fd, one = 1;

	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	memcpy(sa.sun_path, name, len);
	if (name[0] == '@')
		sa.sun_path[0] = '\0';
	else
		len++;
	if (bind(fd, (struct sockaddr *)&sa,
		 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len)) ||
	    setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one))) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * One datagram into buf (NUL-terminated), waiting up to ms: its length,
 * -1 when none came. *pid: the sender's pid, from its credentials.
 */
static ssize_t receive(int fd, char *buf, size_t len, int ms, pid_t *pid)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(struct ucred))];
	} cmsg;
	struct iovec iov = { .iov_base = buf, .iov_len = len - 1 };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = cmsg.buf, .msg_controllen = sizeof(cmsg.buf),
	};
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	struct cmsghdr *cm;
	ssize_t n;

	*pid = 0;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	n = recvmsg(fd, &mh, 0);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		struct ucred uc;

		if (cm->cmsg_level != SOL_SOCKET ||
		    cm->cmsg_type != SCM_CREDENTIALS)
			continue;
		memcpy(&uc, CMSG_DATA(cm), sizeof(uc));
		*pid = uc.pid;
	}
	return n;
}

static void clear_env(void)
{
	unsetenv(KVC_NOTIFY_SOCKET_ENV);
	unsetenv(KVC_NOTIFY_WATCHDOG_ENV);
	unsetenv(KVC_NOTIFY_WDPID_ENV);
}

/* Unset, or empty: no manager, every call a quiet no-op. */
static void test_unset_is_a_no_op(void)
{
	struct kvc_notify n;

	clear_env();
	TAP_EXPECT_EQ(0, kvc_notify_open(&n, why, sizeof(why)));
	TAP_EXPECT_FALSE(kvc_notify_enabled(&n));
	TAP_EXPECT_EQ(0, kvc_notify(&n, "READY=1"));
	TAP_EXPECT_EQ(0, kvc_notify_watchdog(&n));
	kvc_notify_close(&n);

	setenv(KVC_NOTIFY_SOCKET_ENV, "", 1);
	setenv(KVC_NOTIFY_WATCHDOG_ENV, "1000000", 1);
	TAP_EXPECT_EQ(0, kvc_notify_open(&n, why, sizeof(why)));
	TAP_EXPECT_FALSE(kvc_notify_enabled(&n));
	TAP_EXPECT_EQ(0, kvc_notify_watchdog_usec(&n));
	kvc_notify_close(&n);
	clear_env();
}

/* Send two notifications to a receiver at name; check text and sender. */
static void round_trip(const char *name)
{
	static const char first[] = "READY=1\nSTATUS=memfd mode, 32 blocks";
	struct kvc_notify n;
	char buf[2048];
	pid_t pid;
	int fd = receiver(name);

	TAP_ASSERT_LE(0, fd);
	setenv(KVC_NOTIFY_SOCKET_ENV, name, 1);
	TAP_EXPECT_EQ(0, kvc_notify_open(&n, why, sizeof(why)));
	TAP_EXPECT_STREQ("", why);
	TAP_EXPECT_TRUE(kvc_notify_enabled(&n));
	TAP_EXPECT_EQ(0, kvc_notify(&n, "READY=1\nSTATUS=%s mode, %d blocks",
				    "memfd", 32));
	TAP_EXPECT_EQ(0, kvc_notify(&n, "STOPPING=1"));
	/* One datagram each, in order, as sent, from this process. */
	TAP_EXPECT_EQ(strlen(first), receive(fd, buf, sizeof(buf), 1000, &pid));
	TAP_EXPECT_STREQ(first, buf);
	TAP_EXPECT_EQ(getpid(), pid);
	TAP_EXPECT_EQ(10, receive(fd, buf, sizeof(buf), 1000, &pid));
	TAP_EXPECT_STREQ("STOPPING=1", buf);
	TAP_EXPECT_EQ(-1, receive(fd, buf, sizeof(buf), 50, &pid));
	kvc_notify_close(&n);
	TAP_EXPECT_FALSE(kvc_notify_enabled(&n));
	close(fd);
	clear_env();
}

static void test_path_socket(void)
{
	char path[128];

	snprintf(path, sizeof(path), "%s/notify", dir);
	round_trip(path);
	unlink(path);
}

static void test_abstract_socket(void)
{
	char name[64];

	snprintf(name, sizeof(name), "@kvc-test-notify-%d", (int)getpid());
	round_trip(name);
}

/* The longest addresses that fit, and one byte more. */
static void test_lengths(void)
{
	struct sockaddr_un sa;
	size_t max = sizeof(sa.sun_path);
	char name[sizeof(sa.sun_path) + 8];
	struct kvc_notify n;

	clear_env();
	/* A path: max - 1 bytes and its NUL. */
	memset(name, 'p', sizeof(name));
	name[0] = '/';
	name[max - 1] = '\0';
	setenv(KVC_NOTIFY_SOCKET_ENV, name, 1);
	TAP_EXPECT_EQ(0, kvc_notify_open(&n, why, sizeof(why)));
	TAP_EXPECT_TRUE(kvc_notify_enabled(&n));
	kvc_notify_close(&n);
	name[max - 1] = 'p';
	name[max] = '\0';
	setenv(KVC_NOTIFY_SOCKET_ENV, name, 1);
	TAP_EXPECT_EQ(-EINVAL, kvc_notify_open(&n, why, sizeof(why)));
	TAP_EXPECT_FALSE(kvc_notify_enabled(&n));
	TAP_EXPECT_NE(NULL, strstr(why, "NOTIFY_SOCKET"));
	/* An abstract name has no NUL: all max bytes are its own. */
	name[0] = '@';
	setenv(KVC_NOTIFY_SOCKET_ENV, name, 1);
	TAP_EXPECT_EQ(0, kvc_notify_open(&n, why, sizeof(why)));
	TAP_EXPECT_TRUE(kvc_notify_enabled(&n));
	kvc_notify_close(&n);
	name[max] = 'p';
	name[max + 1] = '\0';
	setenv(KVC_NOTIFY_SOCKET_ENV, name, 1);
	TAP_EXPECT_EQ(-EINVAL, kvc_notify_open(&n, why, sizeof(why)));
	TAP_EXPECT_FALSE(kvc_notify_enabled(&n));
	clear_env();
}

/* What a manager never sets: refused, and then nothing is sent. */
static void test_bad_values_refused(void)
{
	static const char *const bad[] = {
		"run/systemd/notify", "./notify", "@", "/",
		"vsock:2:1234", " /run/notify", "notify",
	};
	struct kvc_notify n;

	clear_env();
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setenv(KVC_NOTIFY_SOCKET_ENV, bad[i], 1);
		why[0] = '\0';
		TAP_EXPECT_EQ(-EINVAL, kvc_notify_open(&n, why, sizeof(why)));
		TAP_EXPECT_FALSE(kvc_notify_enabled(&n));
		TAP_EXPECT_NE(0, why[0]);
		TAP_EXPECT_EQ(0, kvc_notify(&n, "READY=1"));
		kvc_notify_close(&n);
	}
	clear_env();
}

/* Gone manager, oversized message: errors, not crashes or hangs. */
static void test_send_errors(void)
{
	char path[128], big[KVC_NOTIFY_MAX + 2];
	struct kvc_notify n;
	pid_t pid;
	int fd;

	snprintf(path, sizeof(path), "%s/gone", dir);
	fd = receiver(path);
	TAP_ASSERT_LE(0, fd);
	setenv(KVC_NOTIFY_SOCKET_ENV, path, 1);
	TAP_ASSERT_EQ(0, kvc_notify_open(&n, why, sizeof(why)));
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	TAP_EXPECT_EQ(-EMSGSIZE, kvc_notify(&n, "STATUS=%s", big));
	big[KVC_NOTIFY_MAX - 7] = '\0';	/* "STATUS=" and this: the most */
	TAP_EXPECT_EQ(0, kvc_notify(&n, "STATUS=%s", big));
	TAP_EXPECT_EQ(KVC_NOTIFY_MAX, receive(fd, big, sizeof(big), 1000,
					      &pid));
	close(fd);
	unlink(path);
	TAP_EXPECT_EQ(-ENOENT, kvc_notify(&n, "READY=1"));
	kvc_notify_close(&n);
	clear_env();
}

static void sleep_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static void test_watchdog(void)
{
	char path[128], buf[64], pidbuf[32];
	struct kvc_notify n;
	uint64_t ms, t0;
	pid_t pid;
	int fd;

	snprintf(path, sizeof(path), "%s/wd", dir);
	fd = receiver(path);
	TAP_ASSERT_LE(0, fd);
	setenv(KVC_NOTIFY_SOCKET_ENV, path, 1);

	/* Asked of another process: not ours. */
	setenv(KVC_NOTIFY_WATCHDOG_ENV, "200000", 1);
	snprintf(pidbuf, sizeof(pidbuf), "%d", (int)getpid() + 1);
	setenv(KVC_NOTIFY_WDPID_ENV, pidbuf, 1);
	TAP_EXPECT_EQ(0, kvc_notify_open(&n, why, sizeof(why)));
	TAP_EXPECT_EQ(0, kvc_notify_watchdog_usec(&n));
	TAP_EXPECT_EQ(0, kvc_notify_watchdog(&n));
	kvc_notify_close(&n);
	TAP_EXPECT_EQ(-1, receive(fd, buf, sizeof(buf), 50, &pid));

	/* Malformed: refused. */
	setenv(KVC_NOTIFY_WDPID_ENV, "12x", 1);
	TAP_EXPECT_EQ(-EINVAL, kvc_notify_open(&n, why, sizeof(why)));
	kvc_notify_close(&n);
	unsetenv(KVC_NOTIFY_WDPID_ENV);
	setenv(KVC_NOTIFY_WATCHDOG_ENV, "0", 1);
	TAP_EXPECT_EQ(-EINVAL, kvc_notify_open(&n, why, sizeof(why)));
	kvc_notify_close(&n);
	setenv(KVC_NOTIFY_WATCHDOG_ENV, "2s", 1);
	TAP_EXPECT_EQ(-EINVAL, kvc_notify_open(&n, why, sizeof(why)));
	kvc_notify_close(&n);

	/* Ours (no WATCHDOG_PID, or ours): a ping now, the next at 100 ms. */
	setenv(KVC_NOTIFY_WATCHDOG_ENV, "200000", 1);
	snprintf(pidbuf, sizeof(pidbuf), "%d", (int)getpid());
	setenv(KVC_NOTIFY_WDPID_ENV, pidbuf, 1);
	TAP_ASSERT_EQ(0, kvc_notify_open(&n, why, sizeof(why)));
	TAP_EXPECT_EQ(200000, kvc_notify_watchdog_usec(&n));
	t0 = kvc_notify_monotonic_usec();
	ms = kvc_notify_watchdog(&n);
	TAP_EXPECT_GE(ms, 1);
	TAP_EXPECT_LE(ms, 100);
	TAP_EXPECT_EQ(10, receive(fd, buf, sizeof(buf), 1000, &pid));
	TAP_EXPECT_STREQ("WATCHDOG=1", buf);
	/* Not due yet: nothing sent, and less time left. */
	ms = kvc_notify_watchdog(&n);
	TAP_EXPECT_LE(ms, 100);
	TAP_EXPECT_EQ(-1, receive(fd, buf, sizeof(buf), 20, &pid));
	sleep_ms(110);
	ms = kvc_notify_watchdog(&n);
	TAP_EXPECT_GE(ms, 90);	/* just sent: a whole half interval */
	TAP_EXPECT_EQ(10, receive(fd, buf, sizeof(buf), 1000, &pid));
	TAP_EXPECT_GE(kvc_notify_monotonic_usec() - t0, 100000);
	kvc_notify_close(&n);
	close(fd);
	unlink(path);
	clear_env();
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * A manager that does not read: its queue full, a ping is dropped at
 * once (the loop never waits for one), a notification waits a second at
 * most for room, then fails.
 */
static void test_full_queue(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char path[128];
	struct kvc_notify n;
	int fd, filler, sent = 0;
	double t0;

	snprintf(path, sizeof(path), "%s/full", dir);
	fd = receiver(path);
	TAP_ASSERT_LE(0, fd);
	filler = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	TAP_ASSERT_LE(0, filler);
	strcpy(sa.sun_path, path);
	while (sent < 100000 &&
	       sendto(filler, "x", 1, MSG_DONTWAIT, (struct sockaddr *)&sa,
		      sizeof(sa)) == 1)
		sent++;
	TAP_ASSERT_LT(sent, 100000);
	TAP_ASSERT_TRUE(errno == EAGAIN);

	setenv(KVC_NOTIFY_SOCKET_ENV, path, 1);
	setenv(KVC_NOTIFY_WATCHDOG_ENV, "60000000", 1);
	TAP_ASSERT_EQ(0, kvc_notify_open(&n, why, sizeof(why)));
	t0 = now_s();
	TAP_EXPECT_GE(kvc_notify_watchdog(&n), 29000);
	TAP_EXPECT_TRUE(now_s() - t0 < 0.5);
	t0 = now_s();
	TAP_EXPECT_EQ(-EAGAIN, kvc_notify(&n, "READY=1"));
	TAP_EXPECT_TRUE(now_s() - t0 > 0.8 && now_s() - t0 < 5);
	kvc_notify_close(&n);
	close(filler);
	close(fd);
	unlink(path);
	clear_env();
}

/* MONOTONIC_USEC is CLOCK_MONOTONIC, not the wall clock. */
static void test_monotonic(void)
{
	struct timespec ts;
	uint64_t a, b, c;

	a = kvc_notify_monotonic_usec();
	clock_gettime(CLOCK_MONOTONIC, &ts);
	b = (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
	c = kvc_notify_monotonic_usec();
	TAP_EXPECT_LE(a, b);
	TAP_EXPECT_LE(b, c);
	TAP_EXPECT_LT(c - a, 1000000);
}

int main(void)
{
	if (scratch_make(dir, sizeof(dir), "kvc-notify"))
		return 1;
	TAP_RUN(test_unset_is_a_no_op);
	TAP_RUN(test_path_socket);
	TAP_RUN(test_abstract_socket);
	TAP_RUN(test_lengths);
	TAP_RUN(test_bad_values_refused);
	TAP_RUN(test_send_errors);
	TAP_RUN(test_watchdog);
	TAP_RUN(test_full_queue);
	TAP_RUN(test_monotonic);
	scratch_remove(dir);
	return tap_done();
}
