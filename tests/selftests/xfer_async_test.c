// SPDX-License-Identifier: GPL-2.0
/*
 * xfer_async_test: what an asynchronous KVCACHE_IOC_XFER may and may not
 * do that its synchronous form does, in the test VM (issue 16, findings 2
 * and 5).
 *
 * An async batch runs in a kworker. The file system must still see the
 * submitter, not the kernel:
 *   - a set-user-ID / set-group-ID file written through an async block ->
 *     file transfer loses both bits, as write(2) by its unprivileged
 *     owner would make it (a kworker has CAP_FSETID and would keep them);
 *   - the submitter's RLIMIT_FSIZE applies: an entry that would write
 *     past it fails with -EFBIG and the file does not grow.
 * Both run as an unprivileged user (uid 1002, a namespace of its own) on
 * the VM's ext4 on the NVMe, with the synchronous form as control.
 *
 * And an async batch, or a transfer to a region, stuck in a file system
 * that never answers must not hold anything else up. The stalled file
 * system is a FUSE server in this test (kvc_fuse.h) that holds READ and
 * WRITE until the test lets them go:
 *   - a process killed with an async batch stuck in a FUSE write exits at
 *     once (its release does not wait for the worker), and once the
 *     write is answered everything settles: the worker lets go of the
 *     module and the file, and no block or pin is left;
 *   - removing a provider (unbinding the fake GPU, the ivshmem device)
 *     while a file -> region transfer through the bounce path is stuck in
 *     a FUSE read completes at once; when the read is answered the entry
 *     fails with -ENODEV (the region's memory is revoked), and the device
 *     is bound again for the tests after.
 *
 * Every wait is bounded, and teardown always answers what is held,
 * reaps the children and unmounts, so a failing check (as on a module
 * without the fixes) fails the test instead of hanging the VM. The file
 * system the children hold is a thread of this process: if the harness
 * kills the test, the FUSE connection dies with it and what it held
 * fails.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "kvc_p2p.h"
#include "kvc_fuse.h"

#define UID_U		1002
#define GID_U		1002
#define XLEN		(64 << 10)	/* bytes of every transfer */
#define FSIZE_LIMIT	(64 << 10)	/* RLIMIT_FSIZE of fsize_limit_* */
#define SEED		0x5a17u
#define MODREF		"/sys/module/kvcache/refcnt"
#define UNBIND		"/sys/bus/pci/drivers/kvcache/unbind"
/*
 * How long "at once" may take: TCG with KASAN on a busy host is slow, but
 * a wait that hangs never ends, so the margin costs nothing.
 */
#define PROMPT_MS	10000
#define SETTLE_MS	30000

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* waitpid with a deadline: 0 (and *status), or -ETIMEDOUT. */
static int wait_child(pid_t pid, int ms, int *status)
{
	double end = now_ms() + ms;

	do {
		pid_t r = waitpid(pid, status, WNOHANG);

		if (r == pid)
			return 0;
		if (r < 0)
			return -errno;
		usleep(20000);
	} while (now_ms() < end);
	return -ETIMEDOUT;
}

/* A child that must go: killed, then waited for (bounded). 0 if reaped. */
static int end_child(pid_t *pid, int ms)
{
	int st;

	if (*pid <= 0)
		return 0;
	kill(*pid, SIGKILL);
	if (wait_child(*pid, ms, &st))
		return -1;
	*pid = 0;
	return 0;
}

/* KVCACHE_IOC_XFER_REAP of a one-entry batch, polled up to @ms. */
static int reap_bounded(int fd, uint64_t id, struct kvcache_xfer_entry *e,
			int ms)
{
	double end = now_ms() + ms;
	int ret;

	do {
		ret = reap(fd, id, e, 1, KVCACHE_REAP_NOWAIT);
		if (ret != -EAGAIN)
			return ret;
		usleep(20000);
	} while (now_ms() < end);
	return -ETIMEDOUT;
}

static uint64_t module_refs(void)
{
	uint64_t v = UINT64_MAX;

	kvc_read_u64(MODREF, &v);
	return v;
}

/* Wait up to @ms for the module's reference count to be @want. */
static int wait_module_refs(uint64_t want, int ms)
{
	double end = now_ms() + ms;

	do {
		if (module_refs() == want)
			return 0;
		usleep(20000);
	} while (now_ms() < end);
	return -ETIMEDOUT;
}

/* The pool's gauges: the same before and after means nothing leaked. */
struct rest {
	uint64_t free, writable, sealed, pinned, quarantined;
};

static void rest_read(struct rest *r)
{
	r->free = kvc_attr_u64("pool/free_blocks");
	r->writable = kvc_attr_u64("pool/writable_blocks");
	r->sealed = kvc_attr_u64("pool/sealed_blocks");
	r->pinned = kvc_attr_u64("pool/pinned_blocks");
	r->quarantined = kvc_attr_u64("pool/quarantined_blocks");
}

/*
 * Evict every sealed block of @ns (the caller is root): what the
 * children sealed stays in the pool as cache after they are gone, and
 * the namespace cannot be destroyed while it has blocks.
 */
static int evict_ns(int fd, uint32_t ns)
{
	struct kvcache_block_info bi[32];
	int evicted = 0;

	for (int round = 0; round < 64; round++) {
		struct kvcache_query q = {
			.size = sizeof(q), .count = 32, .ns_id = ns,
			.entries = (uintptr_t)bi,
		};

		if (kvc_ioc(fd, KVCACHE_IOC_QUERY, &q))
			return -errno;
		if (!q.count)
			return evicted;
		for (uint32_t i = 0; i < q.count; i++)
			if (!kvc_evict(fd, bi[i].handle))
				evicted++;
	}
	return evicted;
}

/* Fresh namespace @ns (an earlier, failed run may have left it). */
static int fresh_ns(int fd, uint32_t ns, uid_t uid, gid_t gid)
{
	evict_ns(fd, ns);
	kvc_ns(fd, 0, ns, 0, 0, 0);
	return kvc_ns(fd, 1, ns, uid, gid, 0700);
}

/*
 * A sealed block of @ns holding @seed's pattern, pinned by @fd: written
 * through its mapping and sealed with KEEP_PIN, the pin being what lets
 * an unprivileged owner send it to a file.
 */
static int make_pinned(int fd, uint32_t ns, uint64_t bs, uint32_t seed,
		       struct kvcache_handle *h)
{
	int ret = kvc_alloc(fd, ns, 1, h);
	void *p;

	if (ret)
		return ret;
	p = kvc_map(fd, h->index, bs, PROT_READ | PROT_WRITE);
	if (!p)
		return -errno;
	fill(p, 0, bs, seed);
	munmap(p, bs);
	return kvc_seal(fd, *h, (uint32_t)bs, (uint8_t)seed,
			KVCACHE_SEAL_KEEP_PIN);
}

static struct kvcache_xfer_entry block_to_file(int file, uint64_t foff,
					       uint64_t len,
					       struct kvcache_handle h)
{
	struct kvcache_xfer_entry e = {
		.fd = file, .flags = KVCACHE_XFER_TO_FILE | KVCACHE_XFER_BLOCK,
		.file_offset = foff, .length = len, .block = h,
	};

	return e;
}

/*
 * One transfer, synchronous or not: the ioctl's own error, with the
 * entry's result in *e. The async form is reaped with a wait; the
 * caller's alarm() bounds it.
 */
static int xfer_one(int fd, bool async, struct kvcache_xfer_entry *e)
{
	uint64_t id;
	int ret;

	if (!async)
		return xfer(fd, e, 1, NULL);
	ret = xfer_async(fd, e, 1, -1, &id);
	return ret ? ret : reap(fd, id, e, 1, 0);
}

/* ---- as the unprivileged user ------------------------------------------ */

enum { SYNC, ASYNC };

/* What a user's child reports; in shared memory, read after it exits. */
struct report {
	char why[512];
	/* setid: per SYNC/ASYNC */
	int64_t result[2];
	uint32_t mode_before[2], mode_after[2];
	long bad_word[2];
	/* fsize: per SYNC/ASYNC, per case (straddling, beyond, within) */
	int64_t fs_result[2][3];
	int64_t fs_before[2][3], fs_size[2][3];
};

struct user {
	int dev;
	uint32_t ns;
	uint64_t bs;
	const char *dir;
	struct report *rep;
};

/* In a child: record the failed check and fail. */
#define UCHK(cond)							\
	do {								\
		if (!(cond)) {						\
			snprintf(u->rep->why, sizeof(u->rep->why),	\
				 "line %d: %s (errno %d %s)", __LINE__,	\
				 #cond, errno, strerror(errno));	\
			return -1;					\
		}							\
	} while (0)

typedef int (*user_fn)(struct user *u);

FIXTURE(creds) {
	int fd;
	uint32_t ns;
	uint64_t bs;
	char dir[PATH_MAX];
	struct report *rep;
	struct rest rest;
};

/*
 * Run @fn as uid/gid 1002 with no supplementary group, in a child that
 * opens its own /dev/kvcache first (as root: the module judges the
 * credentials of each ioctl's caller, so this changes nothing but the
 * device node's mode). 0, or -1 with rep->why.
 */
static int as_user(FIXTURE_DATA(creds) *self, user_fn fn)
{
	pid_t pid;
	int st;

	memset(self->rep, 0, sizeof(*self->rep));
	pid = fork();
	if (pid < 0)
		return -1;
	if (!pid) {
		struct user u = {
			.ns = self->ns, .bs = self->bs, .dir = self->dir,
			.rep = self->rep,
		};

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		alarm(60);	/* a reap that never returns ends here */
		close(self->fd);
		u.dev = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
		if (u.dev < 0 || setgroups(0, NULL) ||
		    setresgid(GID_U, GID_U, GID_U) ||
		    setresuid(UID_U, UID_U, UID_U) || geteuid() != UID_U) {
			snprintf(self->rep->why, sizeof(self->rep->why),
				 "open/drop to %u: %s", UID_U, strerror(errno));
			_exit(1);
		}
		_exit(fn(&u) ? 1 : 0);
	}
	if (wait_child(pid, 90000, &st)) {
		end_child(&pid, SETTLE_MS);
		snprintf(self->rep->why, sizeof(self->rep->why),
			 "the user's child did not finish");
		return -1;
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		if (!self->rep->why[0])
			snprintf(self->rep->why, sizeof(self->rep->why),
				 "child status %#x", st);
		return -1;
	}
	return 0;
}

FIXTURE_SETUP(creds)
{
	self->fd = -1;
	self->rep = mmap(NULL, sizeof(*self->rep), PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, self->rep);
	if (geteuid())
		SKIP(return, "needs root (creates a namespace, drops to uid %d)",
		     UID_U);
	if (access(KVCACHE_DEVICE_PATH, F_OK))
		SKIP(return, "no " KVCACHE_DEVICE_PATH " (kvcache.ko not loaded)");
	/* ext4: O_DIRECT, set-id bits and size limits as in production. */
	ASSERT_EQ(0, nvme_fs());
	snprintf(self->dir, sizeof(self->dir), MNT "/xfer-async-%d", getpid());
	ASSERT_EQ(0, mkdir(self->dir, 0700));
	ASSERT_EQ(0, chown(self->dir, UID_U, GID_U));
	self->fd = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->fd);
	self->bs = kvc_block_size(self->fd);
	ASSERT_LE(XLEN, self->bs);
	self->ns = 40000 + (uint32_t)(getpid() % 20000);
	ASSERT_EQ(0, fresh_ns(self->fd, self->ns, UID_U, GID_U));
	rest_read(&self->rest);
}

FIXTURE_TEARDOWN(creds)
{
	char cmd[PATH_MAX + 16];

	if (self->fd >= 0) {
		evict_ns(self->fd, self->ns);
		kvc_ns(self->fd, 0, self->ns, 0, 0, 0);
		close(self->fd);
	}
	if (self->dir[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", self->dir);
		if (system(cmd))
			TH_LOG("could not remove %s", self->dir);
	}
	munmap(self->rep, sizeof(*self->rep));
}

/*
 * The user's child is gone: its one sealed block is all it left (its pin
 * went with its file), and once that is evicted the pool is as before.
 */
static void expect_rest(struct __test_metadata *_metadata,
			FIXTURE_DATA(creds) *self)
{
	struct rest now;

	EXPECT_EQ(1, evict_ns(self->fd, self->ns));
	rest_read(&now);
	EXPECT_EQ(self->rest.free, now.free);
	EXPECT_EQ(self->rest.writable, now.writable);
	EXPECT_EQ(self->rest.sealed, now.sealed);
	EXPECT_EQ(self->rest.pinned, now.pinned);
	EXPECT_EQ(self->rest.quarantined, now.quarantined);
}

/* The user's file @name in the test directory: created, O_DIRECT. */
static int user_file(struct user *u, const char *name, int flags)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", u->dir, name);
	unlink(path);
	return open(path, flags | O_CREAT | O_EXCL | O_DIRECT | O_CLOEXEC,
		    0755);
}

/*
 * For each form: a file of the user's own made 06755, written from a
 * pinned block; what the mode and the data are afterwards.
 */
static int setid_write(struct user *u)
{
	static const char *const names[] = { "setid-sync", "setid-async" };
	char path[PATH_MAX];
	struct kvcache_handle h;
	struct stat st;
	void *buf;

	UCHK(!make_pinned(u->dev, u->ns, u->bs, SEED, &h));
	UCHK(!posix_memalign(&buf, 4096, XLEN));
	for (int m = SYNC; m <= ASYNC; m++) {
		int fd = user_file(u, names[m], O_WRONLY);
		int rd;

		UCHK(fd >= 0);
		UCHK(!fchmod(fd, 06755));
		UCHK(!fstat(fd, &st));
		u->rep->mode_before[m] = st.st_mode & 07777;
		struct kvcache_xfer_entry e = block_to_file(fd, 0, XLEN, h);

		UCHK(!xfer_one(u->dev, m == ASYNC, &e));
		u->rep->result[m] = e.result;
		UCHK(!fstat(fd, &st));
		u->rep->mode_after[m] = st.st_mode & 07777;
		close(fd);
		/* The write happened, and carried the block's bytes. */
		snprintf(path, sizeof(path), "%s/%s", u->dir, names[m]);
		rd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
		UCHK(rd >= 0);
		UCHK(pread(rd, buf, XLEN, 0) == XLEN);
		u->rep->bad_word[m] = check(buf, 0, XLEN, SEED);
		close(rd);
	}
	free(buf);
	return 0;
}

/*
 * A set-id file written through a transfer loses its set-id bits, as a
 * write(2) by its unprivileged owner makes it: file_remove_privs() sees
 * the worker's credentials, and only the submitter's lack CAP_FSETID.
 * The synchronous form, run by the user itself, is the control.
 */
TEST_F_TIMEOUT(creds, async_write_drops_setid_bits, 120)
{
	ASSERT_EQ(0, as_user(self, setid_write)) TH_LOG("%s", self->rep->why);
	for (int m = SYNC; m <= ASYNC; m++) {
		const char *form = m == ASYNC ? "async" : "sync";

		/* Without this the check below proves nothing. */
		ASSERT_EQ(06755, self->rep->mode_before[m]) TH_LOG("%s", form);
		EXPECT_EQ(XLEN, self->rep->result[m]) TH_LOG("%s", form);
		EXPECT_EQ(-1, self->rep->bad_word[m]) TH_LOG("%s", form);
		EXPECT_EQ(0, self->rep->mode_after[m] & (S_ISUID | S_ISGID))
			TH_LOG("%s: mode %#o after the write: set-id bits kept (the worker ran with kernel credentials?)",
			       form, self->rep->mode_after[m]);
		EXPECT_EQ(0755, self->rep->mode_after[m] & 0777) TH_LOG("%s", form);
	}
	expect_rest(_metadata, self);
}

/* RLIMIT_FSIZE: the three cases, for each form. */
static const struct {
	uint64_t foff, len;
	const char *what;
} fs_cases[3] = {
	{ FSIZE_LIMIT / 2, XLEN, "straddling the limit" },
	{ FSIZE_LIMIT, 4096, "starting at the limit" },
	{ 0, FSIZE_LIMIT, "within the limit" },
};

static int fsize_write(struct user *u)
{
	static const char *const names[] = { "fsize-sync", "fsize-async" };
	struct rlimit rl = { FSIZE_LIMIT, FSIZE_LIMIT };
	struct kvcache_handle h;
	struct stat st;
	int fd[2];

	UCHK(!make_pinned(u->dev, u->ns, u->bs, SEED + 1, &h));
	for (int m = SYNC; m <= ASYNC; m++) {
		fd[m] = user_file(u, names[m], O_WRONLY);
		UCHK(fd[m] >= 0);
	}
	/* write(2) past the limit sends SIGXFSZ; the test wants the error. */
	UCHK(signal(SIGXFSZ, SIG_IGN) != SIG_ERR);
	UCHK(!setrlimit(RLIMIT_FSIZE, &rl));
	for (int m = SYNC; m <= ASYNC; m++) {
		for (int c = 0; c < 3; c++) {
			struct kvcache_xfer_entry e =
				block_to_file(fd[m], fs_cases[c].foff,
					      fs_cases[c].len, h);

			UCHK(!fstat(fd[m], &st));
			u->rep->fs_before[m][c] = st.st_size;
			UCHK(!xfer_one(u->dev, m == ASYNC, &e));
			u->rep->fs_result[m][c] = e.result;
			UCHK(!fstat(fd[m], &st));
			u->rep->fs_size[m][c] = st.st_size;
		}
		close(fd[m]);
	}
	return 0;
}

/*
 * The submitter's RLIMIT_FSIZE bounds an async transfer as it bounds
 * its own write(2): an entry that would write past it is refused whole
 * with -EFBIG (a transfer cut short would not be O_DIRECT-aligned) and
 * the file does not grow; within the limit it succeeds. The synchronous
 * form must say the same.
 */
TEST_F_TIMEOUT(creds, fsize_limit_applies_to_async_writes, 120)
{
	ASSERT_EQ(0, as_user(self, fsize_write)) TH_LOG("%s", self->rep->why);
	for (int m = SYNC; m <= ASYNC; m++) {
		const char *form = m == ASYNC ? "async" : "sync";

		for (int c = 0; c < 2; c++) {
			EXPECT_EQ(-EFBIG, self->rep->fs_result[m][c])
				TH_LOG("%s, %s: result %lld", form,
				       fs_cases[c].what,
				       (long long)self->rep->fs_result[m][c]);
			EXPECT_EQ(self->rep->fs_before[m][c],
				  self->rep->fs_size[m][c])
				TH_LOG("%s, %s: the file grew from %lld to %lld",
				       form, fs_cases[c].what,
				       (long long)self->rep->fs_before[m][c],
				       (long long)self->rep->fs_size[m][c]);
		}
		EXPECT_EQ(FSIZE_LIMIT, self->rep->fs_result[m][2])
			TH_LOG("%s, %s", form, fs_cases[2].what);
		EXPECT_EQ(FSIZE_LIMIT, self->rep->fs_size[m][2])
			TH_LOG("%s, %s", form, fs_cases[2].what);
	}
	expect_rest(_metadata, self);
}

/*
 * The eventfd says the batch is done: a REAP_NOWAIT right after it fires
 * must find it done, every time (a worker that signalled before it marked
 * the batch done answered EAGAIN there now and then, on two CPUs about
 * once in fifty batches).
 */
#define EFD_ROUNDS	2000

TEST_F_TIMEOUT(creds, eventfd_fires_once_the_batch_is_reapable, 300)
{
	struct kvcache_xfer_entry e;
	struct kvcache_handle h;
	char path[PATH_MAX + 8];
	int f, efd, eagain = 0, bad = 0;
	uint64_t id, v;

	ASSERT_EQ(0, make_pinned(self->fd, self->ns, self->bs, 61, &h));
	snprintf(path, sizeof(path), "%s/efd", self->dir);
	f = open(path, O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);
	ASSERT_LE(0, f);
	efd = eventfd(0, EFD_CLOEXEC);
	ASSERT_LE(0, efd);
	for (int i = 0; i < EFD_ROUNDS && !bad; i++) {
		struct pollfd p = { .fd = efd, .events = POLLIN };
		int r;

		e = block_to_file(f, 0, 4096, h);
		ASSERT_EQ(0, xfer_async(self->fd, &e, 1, efd, &id));
		ASSERT_EQ(1, poll(&p, 1, 10000));
		ASSERT_EQ(8, read(efd, &v, sizeof(v)));
		r = reap(self->fd, id, &e, 1, KVCACHE_REAP_NOWAIT);
		if (r == -EAGAIN) {
			eagain++;
			r = reap(self->fd, id, &e, 1, 0);
		}
		if (r || e.result != 4096)
			bad++;
	}
	EXPECT_EQ(0, eagain) TH_LOG("%d of %d reaps right after the eventfd were EAGAIN",
				    eagain, EFD_ROUNDS);
	EXPECT_EQ(0, bad);
	EXPECT_EQ(0, kvc_unpin(self->fd, h));
	close(efd);
	close(f);
}

/* ---- a file system that does not answer --------------------------------- */

FIXTURE(hung) {
	int fd;
	uint32_t ns;
	uint64_t bs;
	struct kvc_fuse fuse;
	bool fuse_up;
	pid_t child;		/* the killed owner, or the remover */
	int file;		/* the FUSE file, test 4 */
	uint64_t xid;		/* an async batch of fd not reaped yet */
	bool xid_pending;
	char gpu[32];		/* unbound by the test: bind again */
	bool unbound;
	uint64_t refs;		/* the module's, at rest */
	struct rest rest;
};

FIXTURE_SETUP(hung)
{
	char dir[PATH_MAX];
	int ret;

	self->fd = self->file = -1;
	self->fuse.fd = self->fuse.quit[0] = self->fuse.quit[1] = -1;
	if (geteuid())
		SKIP(return, "needs root (mounts a FUSE file system)");
	if (access(KVCACHE_DEVICE_PATH, F_OK))
		SKIP(return, "no " KVCACHE_DEVICE_PATH " (kvcache.ko not loaded)");
	if (access("/dev/fuse", F_OK))
		SKIP(return, "no /dev/fuse (a kernel without CONFIG_FUSE_FS)");
	snprintf(dir, sizeof(dir), "/run/kvc-fuse-%d", getpid());
	ret = kvc_fuse_start(&self->fuse, dir, 1 << 20, SEED);
	self->fuse_up = true;
	ASSERT_EQ(0, ret) TH_LOG("FUSE mount at %s: %s", dir, strerror(-ret));
	self->fd = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->fd);
	self->bs = kvc_block_size(self->fd);
	ASSERT_LE(XLEN, self->bs);
	self->ns = 40000 + (uint32_t)((getpid() + 1) % 20000);
	ASSERT_EQ(0, fresh_ns(self->fd, self->ns, 0, 0));
	self->refs = module_refs();
	ASSERT_NE(UINT64_MAX, self->refs);
	rest_read(&self->rest);
}

/*
 * Whatever the test left, in an order that cannot hang: answer what the
 * server holds (every stalled task then moves on), reap the children,
 * wait for the workers to let go of the module, unmount, bind the GPU
 * again.
 */
FIXTURE_TEARDOWN(hung)
{
	struct kvcache_xfer_entry e;

	if (self->fuse_up)
		kvc_fuse_unstall(&self->fuse);
	if (self->child > 0 && end_child(&self->child, SETTLE_MS))
		TH_LOG("child %d does not exit", self->child);
	if (self->xid_pending && reap_bounded(self->fd, self->xid, &e,
					      SETTLE_MS))
		TH_LOG("batch %llu never completed",
		       (unsigned long long)self->xid);
	if (self->file >= 0)
		close(self->file);
	if (self->fd >= 0 && self->refs != UINT64_MAX &&
	    wait_module_refs(self->refs, SETTLE_MS))
		TH_LOG("module references: %llu, %llu at rest",
		       (unsigned long long)module_refs(),
		       (unsigned long long)self->refs);
	if (self->fuse_up)
		kvc_fuse_stop(&self->fuse);
	if (self->unbound && bind_gpu(self->gpu) < 0)
		TH_LOG("could not bind %s again", self->gpu);
	if (self->fd >= 0) {
		evict_ns(self->fd, self->ns);
		kvc_ns(self->fd, 0, self->ns, 0, 0, 0);
		close(self->fd);
	}
}

/* In a forked child: it must not keep the server's connection alive. */
static void drop_fuse_fds(struct kvc_fuse *f)
{
	close(f->fd);
	close(f->quit[0]);
	close(f->quit[1]);
}

/* What the owner child reports before it is killed. */
struct owner_report {
	int err;		/* 0, or the first failure's -errno */
	int line;
	struct kvcache_handle h;
};

#define OCHK(cond)						\
	do {							\
		if (!(cond)) {					\
			rep->err = errno ? -errno : -EINVAL;	\
			rep->line = __LINE__;			\
			goto out;				\
		}						\
	} while (0)

/*
 * The owner: a sealed block of its own, written to the FUSE file by an
 * async batch that stalls in the server; then it waits to be killed.
 */
static void owner(FIXTURE_DATA(hung) *self, struct owner_report *rep,
		  int ready)
{
	struct kvcache_xfer_entry e;
	uint64_t id;
	int kfd, file;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	drop_fuse_fds(&self->fuse);
	close(self->fd);
	errno = 0;
	kfd = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	OCHK(kfd >= 0);
	OCHK(!make_pinned(kfd, self->ns, self->bs, SEED, &rep->h));
	file = open(self->fuse.path, O_WRONLY | O_DIRECT | O_CLOEXEC);
	OCHK(file >= 0);
	e = block_to_file(file, 0, XLEN, rep->h);
	OCHK(!xfer_async(kfd, &e, 1, -1, &id));
out:
	if (write(ready, "r", 1) != 1)
		_exit(1);
	for (;;)
		pause();
}

/*
 * Killed while its async batch is stuck in a file system that does not
 * answer, a process exits at once: release cancels the batch and leaves
 * the worker to finish on its own (holding the module, so it cannot be
 * unloaded under it). Once the server answers, everything settles.
 */
TEST_F_TIMEOUT(hung, killed_owner_of_stuck_async_batch_exits, 120)
{
	struct owner_report *rep;
	struct pollfd pfd;
	struct rest now;
	int ready[2], st, ret;
	double t0, waited;
	char c;

	rep = mmap(NULL, sizeof(*rep), PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, rep);
	ASSERT_EQ(0, pipe2(ready, O_CLOEXEC));
	kvc_fuse_stall(&self->fuse);
	self->child = fork();
	ASSERT_LE(0, self->child);
	if (!self->child) {
		close(ready[0]);
		owner(self, rep, ready[1]);
	}
	close(ready[1]);
	pfd = (struct pollfd){ .fd = ready[0], .events = POLLIN };
	ASSERT_EQ(1, poll(&pfd, 1, SETTLE_MS));
	ASSERT_EQ(1, read(ready[0], &c, 1));
	close(ready[0]);
	ASSERT_EQ(0, rep->err) TH_LOG("owner, line %d", rep->line);
	/* The batch's write is in the server, unanswered. */
	ASSERT_EQ(0, kvc_fuse_wait_held(&self->fuse, 1, SETTLE_MS));

	t0 = now_ms();
	ASSERT_EQ(0, kill(self->child, SIGKILL));
	ret = wait_child(self->child, PROMPT_MS, &st);
	waited = now_ms() - t0;
	EXPECT_EQ(0, ret)
		TH_LOG("the killed owner has not exited after %.0f ms: its release waits for the stuck worker",
		       waited);
	if (!ret) {
		self->child = 0;
		EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
		/* The worker, still stuck, holds the module. */
		EXPECT_EQ(self->refs + 1, module_refs());
		TH_LOG("the owner exited %.0f ms after SIGKILL", waited);
	}

	/* Let the write through: the worker ends and lets everything go. */
	kvc_fuse_unstall(&self->fuse);
	if (self->child > 0) {
		EXPECT_EQ(0, wait_child(self->child, SETTLE_MS, &st));
		self->child = 0;
	}
	EXPECT_EQ(0, wait_module_refs(self->refs, SETTLE_MS))
		TH_LOG("module references %llu, %llu at rest",
		       (unsigned long long)module_refs(),
		       (unsigned long long)self->refs);
	EXPECT_EQ(0, kvc_fuse_wait_closed(&self->fuse, SETTLE_MS))
		TH_LOG("the FUSE file is still open: %u opens, %u releases",
		       self->fuse.opens, self->fuse.releases);
	rest_read(&now);
	EXPECT_EQ(self->rest.writable, now.writable);
	EXPECT_EQ(self->rest.pinned, now.pinned);
	EXPECT_EQ(self->rest.quarantined, now.quarantined);
	/* The owner's sealed block is all that is left; evicted, none. */
	EXPECT_EQ(1, evict_ns(self->fd, self->ns));
	rest_read(&now);
	EXPECT_EQ(self->rest.free, now.free);
	EXPECT_EQ(self->rest.sealed, now.sealed);
	munmap(rep, sizeof(*rep));
}

/*
 * Removing a provider does not wait for a bounce transfer stuck in its
 * file I/O: the provider is held only while the CPU copies. The removal
 * revokes the region, so when the read is finally answered the entry
 * fails with -ENODEV and nothing reaches the (gone) device memory.
 */
TEST_F_TIMEOUT(hung, provider_removal_with_stuck_transfer_completes, 120)
{
	struct kvcache_xfer_entry e;
	struct rest now;
	uint32_t region;
	int prov, st, ret;
	double t0, waited;

	if (find_pci(0x1af4, 0x1110, 0, self->gpu, sizeof(self->gpu)))
		SKIP(return, "no ivshmem device (the fake GPU)");
	prov = bind_gpu(self->gpu);
	ASSERT_LE(0, prov);
	ASSERT_EQ(0, region_reg(self->fd, prov, 0, 1 << 20, &region));
	self->file = open(self->fuse.path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	ASSERT_LE(0, self->file);

	kvc_fuse_stall(&self->fuse);
	/* FUSE has no block device: file -> region takes the bounce path. */
	e = entry(self->file, 0, XLEN, region, 0, 0);
	ASSERT_EQ(0, xfer_async(self->fd, &e, 1, -1, &self->xid));
	self->xid_pending = true;
	ASSERT_EQ(0, kvc_fuse_wait_held(&self->fuse, 1, SETTLE_MS));

	/* The unbind, in a child: on failure it would never return. */
	t0 = now_ms();
	self->child = fork();
	ASSERT_LE(0, self->child);
	if (!self->child) {
		drop_fuse_fds(&self->fuse);
		_exit(write_str(UNBIND, self->gpu) ? 1 : 0);
	}
	self->unbound = true;
	ret = wait_child(self->child, PROMPT_MS, &st);
	waited = now_ms() - t0;
	EXPECT_EQ(0, ret)
		TH_LOG("the unbind has not returned after %.0f ms: removal waits for the stuck file I/O",
		       waited);
	if (!ret) {
		self->child = 0;
		EXPECT_TRUE(WIFEXITED(st) && !WEXITSTATUS(st));
		EXPECT_GT(0, provider_of(self->gpu));
		TH_LOG("the unbind returned after %.0f ms", waited);
	}

	/* Answer the read: the copy into the revoked region must fail. */
	kvc_fuse_unstall(&self->fuse);
	if (self->child > 0) {
		EXPECT_EQ(0, wait_child(self->child, SETTLE_MS, &st));
		self->child = 0;
	}
	ASSERT_EQ(0, reap_bounded(self->fd, self->xid, &e, SETTLE_MS));
	self->xid_pending = false;
	EXPECT_EQ(-ENODEV, e.result)
		TH_LOG("result %lld: the transfer outlived the removal",
		       (long long)e.result);
	EXPECT_EQ(KVCACHE_PATH_BOUNCE, e.path);
	EXPECT_EQ(0, region_unreg(self->fd, region));
	close(self->file);
	self->file = -1;
	EXPECT_EQ(0, kvc_fuse_wait_closed(&self->fuse, SETTLE_MS));
	EXPECT_EQ(0, wait_module_refs(self->refs, SETTLE_MS));
	/* The bounce block went back to the pool. */
	rest_read(&now);
	EXPECT_EQ(self->rest.free, now.free);
	EXPECT_EQ(self->rest.writable, now.writable);
	EXPECT_EQ(self->rest.pinned, now.pinned);
	/* Bound again, a new provider, for whoever comes next. */
	EXPECT_LE(0, bind_gpu(self->gpu));
	self->unbound = provider_of(self->gpu) < 0;
}

TEST_HARNESS_MAIN
