/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kvcd_fixture: the fixture the kvcached suites share (kvcached_test.c,
 * tiers_test.c, libkvcache_test.c): one daemon per test, started from the
 * binary next to the test (or $KVC_KVCACHED) with a small configuration
 * of its own, in the mode $KVC_DAEMON_MODE asks for, the helpers that
 * make, store and check blocks through it, and restarts with tier
 * directories. Include it after kselftest_harness.h and kvc_client.h.
 *
 * What needs the fixture's data (SELF) or the harness's context stays
 * here, static inline: FIXTURE() defines that struct in each test, and
 * kselftest_harness.h cannot be compiled into a second file. The rest is
 * kvcd_util.c, compiled once.
 */
#ifndef KVCD_FIXTURE_H
#define KVCD_FIXTURE_H

#include <dirent.h>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>

#include "kvcd_util.h"

/* ---- environment ---------------------------------------------------------- */

/* The daemon: $KVC_KVCACHED, else ../helper/kvcached from this binary. */
static inline int find_daemon(char *out, size_t len)
{
	const char *env = getenv("KVC_KVCACHED");
	char self[PATH_MAX - 32], *slash;
	ssize_t n;

	if (env && *env) {
		snprintf(out, len, "%s", env);
		return access(out, X_OK) ? -errno : 0;
	}
	if (strchr(program_invocation_name, '/')) {
		snprintf(self, sizeof(self), "%s", program_invocation_name);
	} else {
		n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (n < 0)
			return -errno;
		self[n] = '\0';
	}
	slash = strrchr(self, '/');
	*slash = '\0';
	snprintf(out, len, "%.*s/../helper/kvcached", (int)(len - 32), self);
	return access(out, X_OK) ? -errno : 0;
}

/* ---- the fixture: one daemon per test ------------------------------------- */

FIXTURE(kvcd) {
	int mode;			/* KVC_PROTO_MODE_* asked for */
	char bin[PATH_MAX];
	char sock[108];
	char state[PATH_MAX];
	char conf[PATH_MAX];
	char log[PATH_MAX];
	const char *extra_conf;		/* appended to the configuration */
	/* [daemon] lines in place of "metrics = off" (NULL: that). */
	const char *daemon_conf;
	const char *policy;		/* [eviction] policy; NULL: lru */
	int low_pct, high_pct;		/* [pool] watermarks; 0: LOW_PCT, HIGH_PCT */
	/* memfd mode's pool and block size; 0: MEMFD_POOL, MEMFD_BS. */
	uint64_t memfd_size, memfd_bs;
	/* Run the daemon through this command (argv, NULL-terminated). */
	char *const *wrap;
	/* A directory of the test's own, removed by the teardown ("": none). */
	char scratch[PATH_MAX];
	pid_t daemon;
	int dev;			/* kernel mode: our /dev/kvcache */
	struct kvcc c;			/* connected, after HELLO */
	uint64_t bs;
	uint32_t nr;
	uint32_t ns;			/* created by the setup, 0700 root */
	uint32_t made[8];		/* namespaces created, to clean up */
	int nmade;
	uint8_t seed[KVCACHE_KEY_SIZE];
};

#define SELF	struct _test_data_kvcd

static inline int write_config(SELF *self)
{
	FILE *f = fopen(self->conf, "we");

	if (!f)
		return -errno;
	fprintf(f,
		"# kvcached_test\n"
		"[daemon]\n"
		"socket_mode = 0666\n"
		"%s"
		"[pool]\n"
		"memfd_size = %lluK\n"
		"block_size = %lluK\n"
		"hugetlb = no\n"
		"mlock = no\n"
		"low_watermark = %d\n"
		"high_watermark = %d\n"
		"[eviction]\n"
		"policy = %s\n"
		"interval = 100ms\n"
		"g3_admit = 1\n"
		"g4_admit = 1\n"
		"%s",
		self->daemon_conf ? self->daemon_conf : "metrics = off\n",
		(unsigned long long)(self->memfd_size ? self->memfd_size :
				     MEMFD_POOL) >> 10,
		(unsigned long long)(self->memfd_bs ? self->memfd_bs :
				     MEMFD_BS) >> 10,
		self->low_pct ? self->low_pct : LOW_PCT,
		self->high_pct ? self->high_pct : HIGH_PCT,
		self->policy ? self->policy : "lru",
		self->extra_conf ? self->extra_conf : "");
	return fclose(f) ? -errno : 0;
}

/*
 * Start kvcached (self->daemon), without waiting for it. Returns 0, or
 * -errno with why filled.
 */
static inline int daemon_spawn(SELF *self, char *why, size_t wlen)
{
	const char *mode = self->mode == KVC_PROTO_MODE_KERNEL ? "kernel" :
			   "memfd";
	pid_t parent = getpid(), pid;

	pid = fork();
	if (pid < 0) {
		snprintf(why, wlen, "fork: %s", strerror(errno));
		return -errno;
	}
	if (!pid) {
		int log = open(self->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		int nul = open("/dev/null", O_RDONLY);

		/* Never outlive the test, even one that crashed. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		if (nul >= 0)
			dup2(nul, 0);
		if (log >= 0) {
			dup2(log, 1);
			dup2(log, 2);
		}
		if (self->wrap) {
			char *argv[64];
			int n = 0;

			while (self->wrap[n] && n < 50) {
				argv[n] = self->wrap[n];
				n++;
			}
			argv[n++] = self->bin;
			argv[n++] = "--mode";
			argv[n++] = (char *)mode;
			argv[n++] = "--socket";
			argv[n++] = self->sock;
			argv[n++] = "--state-dir";
			argv[n++] = self->state;
			argv[n++] = "--config";
			argv[n++] = self->conf;
			argv[n] = NULL;
			execv(argv[0], argv);
			dprintf(2, "exec %s: %s\n", argv[0], strerror(errno));
			_exit(127);
		}
		execl(self->bin, "kvcached", "--mode", mode, "--socket",
		      self->sock, "--state-dir", self->state, "--config",
		      self->conf, (char *)NULL);
		dprintf(2, "exec %s: %s\n", self->bin, strerror(errno));
		_exit(127);
	}
	self->daemon = pid;
	return 0;
}

/*
 * Start kvcached and wait until its socket accepts (20 s at most).
 * Returns 0, or -errno with why filled.
 */
static inline int daemon_start(SELF *self, char *why, size_t wlen)
{
	pid_t pid;
	int st, ret;

	ret = daemon_spawn(self, why, wlen);
	if (ret)
		return ret;
	pid = self->daemon;
	for (double end = now_s() + 20; now_s() < end;) {
		int fd = kvcc_connect_fd(self->sock);

		if (fd >= 0) {
			close(fd);
			return 0;
		}
		if (waitpid(pid, &st, WNOHANG) == pid) {
			self->daemon = -1;
			snprintf(why, wlen,
				 "kvcached exited (status %#x) before listening",
				 st);
			return -ECHILD;
		}
		msleep(10);
	}
	snprintf(why, wlen, "%s did not accept within 20 s", self->sock);
	return -ETIMEDOUT;
}

/* SIGTERM, and wait (10 s, then SIGKILL). Returns the wait status. */
static inline int daemon_stop(SELF *self)
{
	int st = -1;

	if (self->daemon <= 0)
		return -1;
	kill(self->daemon, SIGTERM);
	for (double end = now_s() + 10; now_s() < end;) {
		if (waitpid(self->daemon, &st, WNOHANG) == self->daemon) {
			self->daemon = -1;
			return st;
		}
		msleep(10);
	}
	kill(self->daemon, SIGKILL);
	waitpid(self->daemon, &st, 0);
	self->daemon = -1;
	return st;
}

static inline void dump_log(struct __test_metadata *_metadata, SELF *self)
{
	char line[512];
	FILE *f = fopen(self->log, "re");

	if (!f)
		return;
	TH_LOG("kvcached's log (%s):", self->log);
	while (fgets(line, sizeof(line), f))
		fprintf(TH_LOG_STREAM, "#   %s", line);
	fclose(f);
}

static inline void fixture_down(struct __test_metadata *_metadata, SELF *self)
{
	char path[PATH_MAX + 32];
	static const char *const files[] = {
		"namespaces", "namespaces.new", "parents", "parents.new",
	};

	kvcc_close(&self->c);
	daemon_stop(self);
	if (self->mode == KVC_PROTO_MODE_KERNEL) {
		/* Our pins go with our file; a fresh one cleans up. */
		if (self->dev >= 0)
			close(self->dev);
		self->dev = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
		for (int i = 0; self->dev >= 0 && i < self->nmade; i++)
			kernel_ns_cleanup(self->dev, self->made[i]);
	}
	if (self->dev >= 0)
		close(self->dev);
	self->dev = -1;
	if (_metadata->exit_code == KSFT_FAIL)
		dump_log(_metadata, self);
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", self->state, files[i]);
		unlink(path);
	}
	rmdir(self->state);
	unlink(self->sock);
	unlink(self->conf);
	unlink(self->log);
	if (self->scratch[0])
		rm_rf(self->scratch);
}

/* NS_CREATE through the daemon, remembered for the cleanup. */
static inline int ns_create(SELF *self, struct kvcc *c, uint32_t ns, uint32_t uid,
			    uint32_t gid, uint32_t mode)
{
	int ret = kvcc_ns_create(c, ns, uid, gid, mode);

	if (!ret && self->nmade < 8)
		self->made[self->nmade++] = ns;
	return ret;
}

/*
 * Only a peer of uid 0 may send NS_CREATE, so a daemon run by another
 * user has no namespace but those of its state directory: when not root,
 * the test writes that file (kvcd_ns_load()'s format) before starting it,
 * with our namespace and the extra ones tests use, all 0700 and ours.
 */
#define NS_EXTRA	3

static inline int seed_namespaces(SELF *self)
{
	char path[PATH_MAX + 32];
	FILE *f;

	if (mkdir(self->state, 0700) && errno != EEXIST)
		return -errno;
	snprintf(path, sizeof(path), "%s/namespaces", self->state);
	f = fopen(path, "we");
	if (!f)
		return -errno;
	for (uint32_t i = 0; i <= NS_EXTRA; i++)
		fprintf(f, "%u %u %u %o\n", self->ns + i, (unsigned)geteuid(),
			(unsigned)getegid(), 0700);
	return fclose(f) ? -errno : 0;
}

/* Namespace ns + i (i <= NS_EXTRA), 0700: created as root, seeded if not. */
static inline int ns_extra(SELF *self, struct kvcc *c, uint32_t i)
{
	if (geteuid() != 0)
		return 0;
	return ns_create(self, c, self->ns + i, 0, 0, 0700);
}

static inline int fixture_up(SELF *self, char *why, size_t wlen)
{
	const char *tmp = getenv("TMPDIR");
	struct kvc_ns_identity id = {
		.model = "kvcached-test/model", .weights_revision = "r1",
		.tokenizer = "tok-1", .kv_layout = "paged-nhd",
		.kv_dtype = "bf16", .lora = "", .salt = NULL, .salt_len = 0,
		.tokens_per_block = TPB, .tp_rank = 0, .tp_size = 1,
		.pp_rank = 0, .pp_size = 1,
	};
	int pid = getpid(), ret;

	if (!tmp || !*tmp)
		tmp = "/tmp";
	if ((size_t)snprintf(self->sock, sizeof(self->sock), "%s/kvcd-%d.sock",
			     tmp, pid) >= sizeof(self->sock)) {
		snprintf(why, wlen, "socket path too long under %s", tmp);
		return -ENAMETOOLONG;
	}
	snprintf(self->state, sizeof(self->state), "%s/kvcd-%d.state", tmp, pid);
	/* A killed run can leave a state dir of a process with our pid. */
	rm_rf(self->state);
	snprintf(self->conf, sizeof(self->conf), "%s/kvcd-%d.conf", tmp, pid);
	snprintf(self->log, sizeof(self->log), "%s/kvcd-%d.log", tmp, pid);
	ret = find_daemon(self->bin, sizeof(self->bin));
	if (ret) {
		snprintf(why, wlen, "no kvcached at %.300s: %s (set KVC_KVCACHED)",
			 self->bin, strerror(-ret));
		return ret;
	}
	ret = kvc_ns_seed(&id, self->seed);
	if (ret) {
		snprintf(why, wlen, "kvc_ns_seed: %s", strerror(-ret));
		return ret;
	}
	ret = write_config(self);
	if (ret) {
		snprintf(why, wlen, "%.300s: %s", self->conf, strerror(-ret));
		return ret;
	}
	/* Ids only matter in kernel mode, where the module keeps them. */
	self->ns = (uint32_t)(pid % 60000) + 1;
	if (geteuid() != 0) {
		ret = seed_namespaces(self);
		if (ret) {
			snprintf(why, wlen, "%.300s/namespaces: %s", self->state,
				 strerror(-ret));
			return ret;
		}
	}
	ret = daemon_start(self, why, wlen);
	if (ret)
		return ret;
	ret = kvcc_open(&self->c, self->sock);
	if (ret) {
		snprintf(why, wlen, "connect: %s", strerror(-ret));
		return ret;
	}
	ret = kvcc_hello(&self->c);
	if (ret) {
		snprintf(why, wlen, "HELLO: %d %s", ret, self->c.why);
		return ret < 0 ? ret : -EIO;
	}
	self->bs = self->c.hello.block_size;
	self->nr = (uint32_t)self->c.hello.nr_blocks;
	if (self->mode == KVC_PROTO_MODE_KERNEL) {
		self->dev = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
		if (self->dev < 0) {
			snprintf(why, wlen, "%s: %s", KVCACHE_DEVICE_PATH,
				 strerror(errno));
			return -errno;
		}
	}
	/* A namespace of our own, 0700 root (seeded above when not root). */
	ret = geteuid() ? 0 : ns_create(self, &self->c, self->ns, 0, 0, 0700);
	if (ret) {
		snprintf(why, wlen, "NS_CREATE %u: %d %s", self->ns, ret,
			 self->c.why);
		return ret < 0 ? ret : -EIO;
	}
	return 0;
}

FIXTURE_SETUP(kvcd)
{
	char why[512] = "";
	int ret;

	self->dev = -1;
	self->daemon = -1;
	self->nmade = 0;
	kvcc_init(&self->c);
	self->mode = wanted_mode();
	ret = fixture_up(self, why, sizeof(why));
	if (ret) {
		TH_LOG("setup (%s mode): %s",
		       self->mode == KVC_PROTO_MODE_KERNEL ? "kernel" : "memfd",
		       why);
		dump_log(_metadata, self);
		/* The harness skips the teardown after a failed setup. */
		fixture_down(_metadata, self);
	}
	ASSERT_EQ(0, ret);
}

FIXTURE_TEARDOWN(kvcd)
{
	fixture_down(_metadata, self);
}

/* ---- blocks and chains ------------------------------------------------------ */

/* Keys of a chain of n blocks; chains with different salts share nothing. */
static inline void chain_keys(SELF *self, uint32_t salt, uint32_t n, kvc_key *keys)
{
	uint32_t *tok = calloc((size_t)n * TPB, sizeof(*tok));

	for (size_t i = 0; i < (size_t)n * TPB; i++)
		tok[i] = salt * 100003u + (uint32_t)i;
	kvc_chain_keys(self->seed, tok, (size_t)n * TPB, TPB, keys, n);
	free(tok);
}

/*
 * n fresh blocks of ns, written and sealed under keys (keep_pin: our
 * connection, or in kernel mode our file, keeps a pin on each). Kernel
 * mode through dev, memfd mode through c. 0 or an error.
 */
static inline int make_blocks(SELF *self, struct kvcc *c, int dev, uint32_t ns,
			      const kvc_key *keys, uint32_t n, bool keep_pin,
			      struct kvcache_handle *h)
{
	int ret;

	if (self->mode == KVC_PROTO_MODE_KERNEL) {
		ret = kvc_alloc(dev, ns, n, h);
		if (ret)
			return ret;
		for (uint32_t i = 0; i < n; i++) {
			uint8_t *p = kvc_map(dev, h[i].index, self->bs,
					     PROT_READ | PROT_WRITE);

			if (!p)
				return -errno;
			fill_block(p, keys[i]);
			munmap(p, self->bs);
		}
		return kernel_seal(dev, h, keys, n,
				   keep_pin ? KVCACHE_SEAL_KEEP_PIN : 0);
	} else {
		struct kvc_seal_entry *e = calloc(n, sizeof(*e));
		int32_t *st = calloc(n, sizeof(*st));

		ret = -ENOMEM;
		if (!e || !st)
			goto out;
		ret = kvcc_alloc(c, ns, n, h);
		if (ret)
			goto out;
		for (uint32_t i = 0; i < n; i++) {
			fill_block(c->pool + (size_t)h[i].index * self->bs,
				   keys[i]);
			e[i].handle = h[i];
			e[i].payload_len = PAYLOAD;
			e[i].flags = keep_pin ? KVC_PROTO_SEAL_KEEP_PIN : 0;
			memcpy(e[i].key, keys[i], KVCACHE_KEY_SIZE);
		}
		ret = kvcc_seal(c, e, n, st);
		for (uint32_t i = 0; !ret && i < n; i++)
			ret = st[i];
out:
		free(e);
		free(st);
		return ret;
	}
}

static inline int store_chain(SELF *self, uint32_t ns, const kvc_key *keys,
		       uint32_t n, bool keep_pin, struct kvcache_handle *h)
{
	int ret = make_blocks(self, &self->c, self->dev, ns, keys, n, keep_pin,
			      h);

	return ret ? ret : store_blocks(&self->c, ns, keys, NULL, h, n, NULL);
}

/* Drop one pin per block: RELEASE (memfd mode) or UNPIN (kernel mode). */
static inline int unpin_blocks(SELF *self, const struct kvcache_handle *h,
			       uint32_t n)
{
	int32_t *st;
	uint32_t done = 0;
	int ret;

	if (self->mode == KVC_PROTO_MODE_KERNEL) {
		ret = kvc_batch(self->dev, KVCACHE_IOC_UNPIN, h, n, &done);
		return ret ? ret : done == n ? 0 : -EIO;
	}
	st = calloc(n, sizeof(*st));
	if (!st)
		return -ENOMEM;
	ret = kvcc_release(&self->c, h, n, st);
	for (uint32_t i = 0; !ret && i < n; i++)
		ret = st[i];
	free(st);
	return ret;
}

static inline uint32_t low_blocks(SELF *self)
{
	return (uint32_t)((uint64_t)self->nr * LOW_PCT / 100);
}

static inline uint32_t high_blocks(SELF *self)
{
	return (uint32_t)((uint64_t)self->nr * HIGH_PCT / 100);
}

/* Blocks to take so that free blocks fall just below the low watermark. */
static inline uint32_t blocks_to_pressure(SELF *self)
{
	uint64_t free_blocks = kvcc_stat1(&self->c, "pool_free");
	uint32_t low = low_blocks(self);

	if (free_blocks == UINT64_MAX || free_blocks < low)
		return 0;
	return (uint32_t)(free_blocks - low + 1);
}

/* ---- tier directories and restarts ------------------------------------------ */

/* Stop the daemon, start it again with extra configuration, reconnect. */
static inline int restart(SELF *self, const char *extra, char *why, size_t wlen)
{
	int ret;

	why[0] = '\0';
	kvcc_close(&self->c);
	daemon_stop(self);
	/*
	 * A killed daemon's listening socket can outlive it for a moment
	 * (its io_uring is torn down asynchronously) and accept: connect
	 * must only succeed once the new daemon is there.
	 */
	unlink(self->sock);
	self->extra_conf = extra;
	ret = write_config(self);
	if (!ret)
		ret = daemon_start(self, why, wlen);
	if (!ret)
		ret = kvcc_open(&self->c, self->sock);
	if (!ret)
		ret = kvcc_hello(&self->c);
	if (ret && !why[0])
		snprintf(why, wlen, "reconnect: %d %s", ret, self->c.why);
	if (ret)
		fprintf(stderr, "# restart: %s (daemon %d)\n", why,
			(int)self->daemon);
	return ret;
}

#endif /* KVCD_FIXTURE_H */
