// SPDX-License-Identifier: GPL-2.0
/*
 * How kvcache scales, on the host: the DRAM tier against memcpy, and the
 * cost of kvcached + libkvcache against the number of blocks indexed, the
 * number of concurrent clients and the block size.
 *
 * The bench drives the real daemon (KVCACHED, in memfd mode, so no module
 * is needed) through libkvcache, as an engine does. Each section starts a
 * daemon of its own ("size" one per block size, since a pool's block size
 * is fixed), with its own config and state in a fresh directory under
 * /tmp, and stops it and removes the directory when done, and also when
 * anything fails: the daemon dies with the bench (PR_SET_PDEATHSIG), an
 * atexit handler and the SIGINT/SIGTERM/SIGHUP handlers clean up.
 * Namespace 1 is created with kvcachectl (the one next to KVCACHED) as
 * root, otherwise seeded in the state directory's namespaces file. The
 * pools are plain 4 KiB shmem pages (hugetlb = no) so that every run
 * measures the same thing whatever huge pages the host has reserved;
 * only the size section's *_huge_* rows ask for huge pages (hugetlb =
 * yes), and only when the host has enough free (scripts/bench reserves
 * them as root).
 *
 * Every figure is a ratio against a baseline measured in the same run,
 * interleaved with it, because the machine is shared and noisy. Each run
 * prints one row per metric; whoever reports takes min/median/max over
 * the runs. Output: CSV on stdout, "metric,run,kvcache,baseline,ratio",
 * the unit in the metric's name (mbps: 10^6 bytes/s; ns, us: per
 * operation; ops: operations/s); progress and notes ("# ...") on stderr.
 *
 * Ratios. For a bandwidth or a throughput (*_mbps, *_ops) the ratio is
 * kvcache / baseline: 1 is the baseline's speed, above 1 faster. For a
 * time (*_ns, *_us) it is kvcache / baseline too, so there it is a cost:
 * 1 is the baseline's cost, above 1 slower.
 *
 * dram: 64 blocks of 2 MiB (the pool's default block size) stored once,
 *   then, per run, DRAM_REPS times each, interleaved:
 *   dram_load_copy_mbps   kvcache_load() of the chain into a host buffer,
 *                         against memcpy() of the same 128 MiB between
 *                         two private buffers (the machine's limit).
 *   dram_load_map_mbps    kvcache_load_map() of the chain, a read of every
 *                         byte of the mappings (a sum), kvcache_release(),
 *                         against the same memcpy(): bytes that reached
 *                         the CPU per second.
 *   dram_map_read_mbps    the same kvcache figure against the same sum
 *                         over a private buffer: a read against a read,
 *                         where memcpy() also writes.
 *
 * blocks: cost against the number of blocks in the index, two ways.
 *   (a) The daemon path, through the socket: a pool of 4 KiB blocks holds
 *   chains of 16 blocks, filled up to 1K, 10K, 100K and 1M blocks (the
 *   count rounded up to whole chains), one daemon growing through the
 *   sizes; the pool is sized for the largest (its index too: kvcached
 *   sizes its table for the pool). The bench, its threads and the daemon
 *   run on one CPU (see pin_one_cpu()). Per run, BLK_ITERS operations on
 *   random stored chains, each next to its baseline, the medians:
 *   blocks_lookup_ns_N    kvcache_lookup() of a 16-key chain, against a
 *                         round trip of datagrams of the same sizes (the
 *                         real LOOKUP and its reply) to an echo thread
 *                         over a SOCK_SEQPACKET socketpair: the socket
 *                         alone, which no daemon can go below.
 *   blocks_load_ns_N      kvcache_load() of the 16 blocks (64 KiB), against
 *                         the echo round trips of its LOAD and RELEASE
 *                         plus memcpy() of the 64 KiB.
 *   Those two go through the daemon (a client opened with
 *   KVCACHE_FAST_PATH=0); a second client, with the fast index (memfd
 *   mode's default: no round trip for a block in the pool), gives the
 *   same against the same baselines:
 *   blocks_fast_lookup_ns_N, blocks_fast_load_ns_N
 *   blocks_fast_lookup128_ns_N  kvcache_lookup() of one stored chain of
 *                         128 blocks, against the echo round trip of a
 *                         128-key LOOKUP and its reply (socket_bench's
 *                         figure, now without the socket).
 *   10M blocks of 4 KiB would be 40 GB of pool (more than this 23 GB
 *   machine has) and over two minutes of stores (1M take about 15 s), so
 *   10M is measured only as:
 *   (b) The index alone, in this process (helper/kvcached/index.c, what kvcached
 *   runs for a LOOKUP), at 1K, 10K, 100K, 1M and 10M blocks in chains of
 *   16, each size in a fresh index sized for it, against a textbook
 *   chained hash table of the same keys (u32 bucket heads, nodes of key
 *   and next, one bucket per key) that stores nothing but the keys: a
 *   lower bound, not an equal. Mean over >= IDX_MIN_NS per measurement:
 *   blocks_index_find_ns_N      kvc_index_find() of one random key.
 *   blocks_index_prefix16_ns_N  kvc_index_lookup() of a random 16-key
 *                               chain, against 16 baseline lookups.
 *
 * clients: 64 chains of 16 blocks of 256 KiB (4 MiB), each with its own
 *   destination buffer; thread i of T loads chains i, i + T, i + 2T... in
 *   turn (lookup, then load into that chain's buffer), so that 1 thread
 *   and 64 touch the same 512 MiB, more than any cache, and no thread
 *   keeps its chain warm in the cache. Per run and per T (1..64),
 *   CL_SLICES times in turn for CL_NS each: 1 thread, T threads with a
 *   client each (connections 1), T threads sharing one client with T
 *   connections, and T threads of memcpy() of the same buffers:
 *   clients_ops_T         aggregate ops/s with a client per thread,
 *                         against T times the 1-thread figure of the same
 *                         run: the ratio is the parallel efficiency (at
 *                         most CPUs / T once the CPUs are all busy).
 *   clients_shared_ops_T  the same with the one shared client.
 *   clients_p50_us_T      the median time of one op at T threads, against
 *   clients_p99_us_T      1 thread (same run): how much slower an op gets.
 *   clients_p99_vs_memcpy_us_T  the p99 at T threads against the p99 of
 *                         T threads of memcpy() of the same bytes: what
 *                         is kvcache's own, once T threads share the
 *                         CPUs (on 2 CPUs, 8 runnable threads wait for
 *                         each other whatever they do).
 *   clients_mbps_T        bytes loaded per second at T threads, against
 *                         T threads of memcpy() of the same bytes, each
 *                         yielding its CPU after a copy as an op of
 *                         kvcache does when it waits for the daemon: the
 *                         machine's limit for those bytes.
 *
 * size: per block size S (64 KiB .. 32 MiB), a daemon of its own whose
 *   pool holds every run's chain (no eviction), and a chain of 64 MiB
 *   (64 MiB / S blocks). Per run: a store of a new chain, a load of it
 *   (SZ_LOAD_REPS times), each next to its memcpy() of 64 MiB:
 *   size_store_mbps_S       kvcache_store() against memcpy() between
 *                           private buffers that are already faulted in.
 *   size_store_fault_mbps_S the same store against memcpy() into a memfd
 *                           whose pages were just punched out: a fresh
 *                           pool block is punched the same way (mpool.c)
 *                           and faults in zeroed pages on its first write,
 *                           so this baseline pays what the pool pays.
 *   size_load_mbps_S        kvcache_load() against memcpy().
 *   size_huge_store_mbps_S  size_store_mbps_S with the pool on 2 MiB huge
 *   size_huge_load_mbps_S   pages: a daemon of its own per size, after
 *                           the 4 KiB one, when /proc/meminfo says enough
 *                           huge pages are free (else a note, no rows).
 *                           A client's first write into a block maps a
 *                           2 MiB page with one fault instead of 512.
 *
 * kernel: only when named, and only where kvcache.ko is loaded (the test
 *   VM, scripts/bench's "kernel" part): kvcached in kernel mode on the
 *   module's pool; per payload S of 64 KiB, 256 KiB and 2 MiB (up to the
 *   module's block size), KH_KEYS blocks stored in a namespace, then per
 *   run one-block kvcache_load() calls by each of two clients, each next
 *   to memcpy() of the same S bytes; each side repeats its operation for
 *   KH_MIN_NS (the guest's clock may tick in milliseconds):
 *   khit_fast_mbps_S      a client with the fast index (the namespace's
 *                         segment: find, PIN, copy from the pool view,
 *                         UNPIN; no round trip).
 *   khit_daemon_mbps_S    a client opened with KVCACHE_FAST_PATH=0: a
 *                         LOAD round trip to kvcached, then the same
 *                         pin, copy and unpin.
 *   The section fails if the first client counted no fast hit.
 *
 * Usage: scale_bench [RUNS] [KVCACHED] [SECTION]
 *   RUNS      runs per figure, default 5
 *   KVCACHED  the daemon, default build/helper/kvcached
 *   SECTION   all (default), dram, blocks (= blocks-daemon and
 *             blocks-index), clients, size, or kernel (not in all)
 * Memory: about 5 GiB at the peak (the 1M-block pool, and 10M keys in
 * two tables). On a 2-CPU VM "all" takes about 2 minutes with 5 runs,
 * most of it in clients (70 s) and blocks (30 s, 10 s of it storing the
 * 1M blocks).
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "chained.h"
#include "index.h"
#include "libkvcache.h"
#include "proto.h"

#define KEY		KVCACHE_LIB_KEY_SIZE
#define NS_ID		1
#define KiB		1024ULL
#define MiB		(1024ULL * 1024)
/* Blocks stored over blocks in the pool: eviction starts at 95%. */
#define POOL_FILL	85

#define DRAM_BS		(2 * MiB)
#define DRAM_CHAIN	64
#define DRAM_REPS	5

#define BLK_BS		(4 * KiB)
#define BLK_CHAIN	16
#define BLK_ITERS	4000
#define IDX_MIN_NS	50000000ULL
#define IDX_QUERIES	(1u << 16)	/* single keys: 2 MiB */
#define IDX_PREFIXES	(1u << 12)	/* 16-key chains: 2 MiB */

#define CL_BS		(256 * KiB)
#define CL_CHAIN	16
#define CL_MAX		64
#define CL_NS		250000000ULL	/* per slice */
#define CL_SLICES	2
#define CL_SAMPLES	8192		/* per thread and slice */

#define SZ_BYTES	(64 * MiB)

#define KH_KEYS		16	/* blocks stored per payload size */
#define KH_MIN_NS	300000000ULL	/* each side of a figure, per run */
#define SZ_LOAD_REPS	3

static const uint64_t blk_daemon_sizes[] = { 1000, 10000, 100000, 1000000 };
static const uint64_t blk_index_sizes[] = {
	1000, 10000, 100000, 1000000, 10000000,
};
static const unsigned int cl_threads[] = { 1, 2, 4, 8, 16, 32, 64 };
static const uint64_t kh_sizes[] = { 64 * KiB, 256 * KiB, 2 * MiB };
static const uint64_t sz_sizes[] = {
	64 * KiB, 256 * KiB, 1 * MiB, 4 * MiB, 16 * MiB, 32 * MiB,
};

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

static void fail(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));

static void fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "scale_bench: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);	/* the atexit handler stops the daemon */
}

static double secs(uint64_t ns)
{
	return (double)ns / 1e9;
}

static double mbps(uint64_t bytes, uint64_t ns)
{
	return (double)bytes * 1e3 / (double)ns;
}

/* "1K", "10M": a count as the metric names carry it. */
static void count_label(char *buf, size_t len, uint64_t n)
{
	if (n >= 1000000 && n % 1000000 == 0)
		snprintf(buf, len, "%lluM", (unsigned long long)(n / 1000000));
	else if (n >= 1000 && n % 1000 == 0)
		snprintf(buf, len, "%lluK", (unsigned long long)(n / 1000));
	else
		snprintf(buf, len, "%llu", (unsigned long long)n);
}

/* "64K", "32M": a byte size, in powers of 1024. */
static void size_label(char *buf, size_t len, uint64_t n)
{
	if (n >= MiB && n % MiB == 0)
		snprintf(buf, len, "%lluM", (unsigned long long)(n / MiB));
	else
		snprintf(buf, len, "%lluK", (unsigned long long)(n / KiB));
}

static void row(const char *metric, const char *label, int run, double kv,
		double base)
{
	printf("%s_%s,%d,%.1f,%.1f,%.3f\n", metric, label, run, kv, base,
	       kv / base);
	fflush(stdout);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Sorts v; the q-th quantile (0 <= q < 1). */
static uint64_t quantile(uint64_t *v, size_t n, double q)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	return v[(size_t)((double)n * q)];
}

/*
 * Page-aligned memory, faulted in now: a buffer that faults during a
 * measurement would charge page faults to whichever side touches it first.
 * Not inherited by a child: every fork() of kvcached or kvcachectl would
 * otherwise make its pages copy-on-write, and the next write to each of
 * them a fault (16384 for 64 MiB), in the middle of some measurement.
 */
static void *buffer(size_t len, int fill)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		fail("mmap of %zu bytes: %s", len, strerror(errno));
	if (madvise(p, len, MADV_DONTFORK))
		fail("madvise: %s", strerror(errno));
	memset(p, fill, len);
	return p;
}

/* Recognizable bytes, so that a load that copies the wrong block shows. */
static void pattern(uint8_t *p, size_t len, uint64_t seed)
{
	for (size_t i = 0; i + 8 <= len; i += 8) {
		uint64_t v = kvc_mix64(seed + i);

		memcpy(p + i, &v, 8);
	}
}

/*
 * Key d of chain c: random-looking, like the SHA-256 output of
 * kvcache_ns_keys(), and cheap to recompute, so no section keeps millions
 * of keys around. salt tells the sections' chains apart.
 */
static void key_of(uint64_t salt, uint64_t c, uint64_t d, uint8_t *k)
{
	uint64_t base = kvc_mix64(salt << 40 ^ c) << 12;

	for (uint64_t j = 0; j < 4; j++) {
		uint64_t v = kvc_mix64(base + (d << 2 | j));

		memcpy(k + 8 * j, &v, 8);
	}
}

static void chain_keys(uint64_t salt, uint64_t c, uint64_t n, uint8_t *keys)
{
	for (uint64_t d = 0; d < n; d++)
		key_of(salt, c, d, keys + d * KEY);
}

static uint64_t sum_words(const void *p, size_t len)
{
	const uint64_t *w = p;
	uint64_t a = 0, b = 0, c = 0, d = 0;

	/* Four sums, so that the adds are not one dependency chain. */
	for (size_t i = 0; i + 4 <= len / 8; i += 4) {
		a += w[i];
		b += w[i + 1];
		c += w[i + 2];
		d += w[i + 3];
	}
	return a + b + c + d;
}

static volatile uint64_t sink;

/* ---- the daemon -------------------------------------------------------- */

static const char *kvcd_bin;
static pid_t kvcd_pid = -1;
static char kvcd_dir[64];		/* "" when there is none */
static char kvcd_sock[108];

/*
 * Everything the bench and the daemon create in the directory, children
 * first, and "" for the directory itself: the signal handler can only
 * remove known names (nftw() is not async-signal-safe). The atexit path
 * removes whatever is there.
 */
static const char *const kvcd_files[] = {
	"state/namespaces", "state/parents", "state/parents.new", "state",
	"kvcached.sock", "kvcached.conf", "kvcached.log", "",
};

static int rm_one(const char *path, const struct stat *st, int type,
		  struct FTW *ftw)
{
	(void)st;
	(void)type;
	(void)ftw;
	remove(path);
	return 0;
}

static void kvcd_stop(void)
{
	int st;

	if (kvcd_pid > 0) {
		kill(kvcd_pid, SIGTERM);
		for (int i = 0; i < 1000; i++) {
			if (waitpid(kvcd_pid, &st, WNOHANG) == kvcd_pid) {
				kvcd_pid = -1;
				break;
			}
			usleep(10000);
		}
		if (kvcd_pid > 0) {
			kill(kvcd_pid, SIGKILL);
			waitpid(kvcd_pid, &st, 0);
			kvcd_pid = -1;
		}
	}
	if (kvcd_dir[0]) {
		nftw(kvcd_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
		kvcd_dir[0] = '\0';
	}
}

static void on_exit_cleanup(void)
{
	kvcd_stop();
}

static void on_signal(int sig)
{
	char path[128];

	if (kvcd_pid > 0) {
		kill(kvcd_pid, SIGKILL);
		waitpid(kvcd_pid, NULL, 0);
	}
	for (size_t i = 0; kvcd_dir[0] && i < ARRAY_SIZE(kvcd_files); i++) {
		/* No snprintf here: it is not async-signal-safe either. */
		size_t n = strlen(kvcd_dir), m = strlen(kvcd_files[i]);

		if (n + m + 2 > sizeof(path))
			continue;
		memcpy(path, kvcd_dir, n);
		path[n] = '/';
		memcpy(path + n + 1, kvcd_files[i], m + 1);
		if (unlink(path))
			rmdir(path);
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

static void kvcd_path(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", kvcd_dir, name);
}

/* The daemon's log on stderr, then give up. */
static void kvcd_fail(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));

static void kvcd_fail(const char *fmt, ...)
{
	char path[128], line[512];
	va_list ap;
	FILE *f;

	kvcd_path(path, sizeof(path), "kvcached.log");
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		fprintf(stderr, "kvcached: %s", line);
	if (f)
		fclose(f);
	fprintf(stderr, "scale_bench: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static int run_quiet(const char *bin, char *const argv[])
{
	char log[128];
	pid_t pid;
	int st;

	kvcd_path(log, sizeof(log), "kvcached.log");
	pid = fork();
	if (pid < 0)
		return -errno;
	if (!pid) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		if (strchr(bin, '/'))
			execv(bin, argv);
		else
			execvp(bin, argv);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) != pid)
		return -errno;
	return WIFEXITED(st) && !WEXITSTATUS(st) ? 0 : -EIO;
}

/* Namespace 1, mode 0700, owned by us: through kvcachectl as root. */
static void kvcd_namespace(void)
{
	char ctl[4096], *slash;
	char *argv[] = {
		"kvcachectl", "-S", kvcd_sock, "ns-create", "1", "0", "0",
		"0700", NULL,
	};

	snprintf(ctl, sizeof(ctl), "%s", kvcd_bin);
	slash = strrchr(ctl, '/');
	if (slash)
		snprintf(slash + 1, sizeof(ctl) - (size_t)(slash + 1 - ctl),
			 "kvcachectl");
	else
		snprintf(ctl, sizeof(ctl), "kvcachectl");
	if (run_quiet(ctl, argv))
		kvcd_fail("%s -S %s ns-create 1 0 0 0700 failed", ctl,
			  kvcd_sock);
}

/*
 * Start kvcached in mode (memfd or kernel) with the [pool] lines given,
 * wait until it accepts, and give it namespace 1. Its directory goes
 * under $TMPDIR (the test VM's /tmp is read-only).
 */
static void kvcd_launch(const char *mode, const char *pool_conf)
{
	const char *tmp = getenv("TMPDIR");
	char conf[128], state[128], log[128];
	pid_t parent = getpid();
	FILE *f;

	snprintf(kvcd_dir, sizeof(kvcd_dir), "%.30s/kvcache-scalebench.XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(kvcd_dir)) {
		kvcd_dir[0] = '\0';
		fail("mkdtemp: %s", strerror(errno));
	}
	kvcd_path(conf, sizeof(conf), "kvcached.conf");
	kvcd_path(state, sizeof(state), "state");
	kvcd_path(log, sizeof(log), "kvcached.log");
	kvcd_path(kvcd_sock, sizeof(kvcd_sock), "kvcached.sock");
	f = fopen(conf, "w");
	if (!f)
		fail("%s: %s", conf, strerror(errno));
	fprintf(f, "[daemon]\nmetrics = off\nlog_level = warn\n"
		   "[pool]\n%s", pool_conf);
	if (fclose(f))
		fail("%s: %s", conf, strerror(errno));
	if (geteuid()) {
		/* Not root: what the daemon reads at start (kvcd_fixture.h). */
		char path[160];

		if (mkdir(state, 0700))
			fail("%s: %s", state, strerror(errno));
		kvcd_path(path, sizeof(path), "state/namespaces");
		f = fopen(path, "w");
		if (!f)
			fail("%s: %s", path, strerror(errno));
		fprintf(f, "%u %u %u %o\n", NS_ID, (unsigned int)geteuid(),
			(unsigned int)getegid(), 0700);
		if (fclose(f))
			fail("%s: %s", path, strerror(errno));
	}
	kvcd_pid = fork();
	if (kvcd_pid < 0)
		fail("fork: %s", strerror(errno));
	if (!kvcd_pid) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int nul = open("/dev/null", O_RDONLY);

		/* Never outlive the bench, even one that crashed. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		if (nul >= 0)
			dup2(nul, 0);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execl(kvcd_bin, "kvcached", "--config", conf, "--mode", mode,
		      "--socket", kvcd_sock, "--state-dir", state,
		      (char *)NULL);
		dprintf(2, "exec %s: %s\n", kvcd_bin, strerror(errno));
		_exit(127);
	}
	for (uint64_t end = now_ns() + 30000000000ULL;;) {
		struct sockaddr_un a = { .sun_family = AF_UNIX };
		int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
		int st;

		snprintf(a.sun_path, sizeof(a.sun_path), "%s", kvcd_sock);
		if (fd >= 0 && !connect(fd, (struct sockaddr *)&a, sizeof(a))) {
			close(fd);
			break;
		}
		if (fd >= 0)
			close(fd);
		if (waitpid(kvcd_pid, &st, WNOHANG) == kvcd_pid) {
			kvcd_pid = -1;
			kvcd_fail("kvcached exited (status %#x) before "
				  "listening", st);
		}
		if (now_ns() > end)
			kvcd_fail("kvcached did not listen within 30 s");
		usleep(10000);
	}
	if (!geteuid())
		kvcd_namespace();
}

/* ---- libkvcache clients ------------------------------------------------ */

static struct kvcache *client_open(unsigned int conns)
{
	struct kvcache_options o = {
		.socket = kvcd_sock, .connections = conns, .workers = 1,
	};
	struct kvcache *c;
	int ret = kvcache_open(&o, &c);

	if (ret)
		kvcd_fail("kvcache_open: %s", kvcache_strerror(ret));
	return c;
}

static struct kvcache_namespace *ns_open(struct kvcache *c, size_t bytes)
{
	static const struct kvcache_identity id = {
		.model = "scale-bench/model", .weights_revision = "r1",
		.tokenizer = "tok", .kv_layout = "paged-nhd",
		.kv_dtype = "bf16", .lora = "", .tokens_per_block = 16,
		.tp_rank = 0, .tp_size = 1, .pp_rank = 0, .pp_size = 1,
	};
	struct kvcache_namespace *ns;
	int ret = kvcache_ns_open(c, NS_ID, &id, bytes, &ns);

	if (ret)
		fail("kvcache_ns_open: %s", kvcache_strerror(ret));
	return ns;
}

/* Store a whole chain, or give up: every section needs all of it. */
static void store_all(struct kvcache_namespace *ns, const uint8_t *keys,
		      size_t n, const void *buf, size_t stride)
{
	int ret = kvcache_store(ns, NULL, keys, n, buf, stride);

	if (ret != (int)n)
		kvcd_fail("kvcache_store of %zu blocks: %d (%s)", n, ret,
			  ret < 0 ? kvcache_strerror(ret) : "short");
}

/* kvcached in memfd mode, a pool of pool_bytes in blocks of bs. */
static void kvcd_start_pages(uint64_t bs, uint64_t pool_bytes, bool huge)
{
	char pool[160];

	snprintf(pool, sizeof(pool),
		 "memfd_size = %llu\nblock_size = %llu\nhugetlb = %s\n"
		 "mlock = yes\n", (unsigned long long)pool_bytes,
		 (unsigned long long)bs, huge ? "yes" : "no");
	kvcd_launch("memfd", pool);
}

static void kvcd_start(uint64_t bs, uint64_t pool_bytes)
{
	kvcd_start_pages(bs, pool_bytes, false);
}

/* Pool bytes for `blocks` stored blocks of bs, below the watermark. */
static uint64_t pool_for(uint64_t blocks, uint64_t bs)
{
	return ((blocks * 100 + POOL_FILL - 1) / POOL_FILL + 2) * bs;
}

/* ---- dram -------------------------------------------------------------- */

static void section_dram(int runs)
{
	const size_t bytes = DRAM_CHAIN * DRAM_BS;
	static struct kvcache_block blocks[DRAM_CHAIN];
	uint8_t keys[DRAM_CHAIN * KEY];
	uint8_t *src = buffer(bytes, 0), *dst = buffer(bytes, 1);
	uint8_t *psrc = buffer(bytes, 2), *pdst = buffer(bytes, 3);
	struct kvcache_namespace *ns;
	struct kvcache *c;

	fprintf(stderr, "# dram: %d blocks of %llu KiB, %d reps per run; "
		"baseline memcpy() between private buffers\n", DRAM_CHAIN,
		(unsigned long long)(DRAM_BS / KiB), DRAM_REPS);
	kvcd_start(DRAM_BS, pool_for(DRAM_CHAIN, DRAM_BS));
	c = client_open(1);
	ns = ns_open(c, DRAM_BS);
	pattern(src, bytes, 1);
	pattern(psrc, bytes, 2);
	chain_keys(1, 0, DRAM_CHAIN, keys);
	store_all(ns, keys, DRAM_CHAIN, src, DRAM_BS);
	/* One untimed pass of each, and a check that the bytes are ours. */
	if (kvcache_load(ns, keys, DRAM_CHAIN, dst, DRAM_BS) != DRAM_CHAIN ||
	    memcmp(dst, src, bytes))
		kvcd_fail("the loaded chain is not what was stored");
	if (kvcache_load_map(ns, keys, DRAM_CHAIN, blocks) != DRAM_CHAIN)
		kvcd_fail("kvcache_load_map of the chain");
	for (int i = 0; i < DRAM_CHAIN; i++)
		if (blocks[i].len != DRAM_BS ||
		    memcmp(blocks[i].data, src + i * DRAM_BS, DRAM_BS))
			kvcd_fail("mapped block %d is not what was stored", i);
	kvcache_release(c, blocks, DRAM_CHAIN);
	memcpy(pdst, psrc, bytes);
	sink += sum_words(psrc, bytes);

	for (int run = 1; run <= runs; run++) {
		uint64_t copy = 0, map = 0, mc1 = 0, mc2 = 0, rd = 0, t;

		for (int rep = 0; rep < DRAM_REPS; rep++) {
			int ret;

			t = now_ns();
			ret = kvcache_load(ns, keys, DRAM_CHAIN, dst, DRAM_BS);
			copy += now_ns() - t;
			if (ret != DRAM_CHAIN)
				kvcd_fail("kvcache_load: %d", ret);

			t = now_ns();
			memcpy(pdst, psrc, bytes);
			mc1 += now_ns() - t;

			t = now_ns();
			ret = kvcache_load_map(ns, keys, DRAM_CHAIN, blocks);
			for (int i = 0; i < ret; i++)
				sink += sum_words(blocks[i].data,
						  blocks[i].len);
			kvcache_release(c, blocks, ret > 0 ? (size_t)ret : 0);
			map += now_ns() - t;
			if (ret != DRAM_CHAIN)
				kvcd_fail("kvcache_load_map: %d", ret);

			t = now_ns();
			memcpy(pdst, psrc, bytes);
			mc2 += now_ns() - t;

			t = now_ns();
			sink += sum_words(psrc, bytes);
			rd += now_ns() - t;
		}
		row("dram_load_copy", "mbps", run,
		    mbps(bytes * DRAM_REPS, copy),
		    mbps(bytes * DRAM_REPS, mc1));
		row("dram_load_map", "mbps", run, mbps(bytes * DRAM_REPS, map),
		    mbps(bytes * DRAM_REPS, mc2));
		row("dram_map_read", "mbps", run, mbps(bytes * DRAM_REPS, map),
		    mbps(bytes * DRAM_REPS, rd));
	}
	kvcache_close(c);
	kvcd_stop();
	munmap(src, bytes);
	munmap(dst, bytes);
	munmap(psrc, bytes);
	munmap(pdst, bytes);
}

/* ---- blocks (a): the daemon path --------------------------------------- */

/*
 * The baseline's far end. Each datagram carries the length of the answer
 * it wants in its first 4 bytes (where the real message has its magic:
 * this peer decodes nothing), and gets that many bytes back.
 */
static void *echo_main(void *arg)
{
	int fd = *(int *)arg;
	static uint8_t buf[KVC_PROTO_MSG_MAX];
	ssize_t n;

	while ((n = recv(fd, buf, sizeof(buf), 0)) >= 4) {
		uint32_t len;

		memcpy(&len, buf, 4);
		if (len > sizeof(buf) ||
		    send(fd, buf, len, MSG_NOSIGNAL) < 0)
			break;
	}
	return NULL;
}

/* A request as the baseline sends it: the real bytes, the reply's size. */
struct dgram {
	uint8_t buf[KVC_PROTO_MSG_MAX];
	size_t len;
};

static void dgram_set(struct dgram *d, int req_len, int reply_len)
{
	uint32_t want = (uint32_t)reply_len;

	if (req_len < 4 || reply_len < 0)
		fail("encoding the baseline's datagrams");
	d->len = (size_t)req_len;
	memcpy(d->buf, &want, 4);
}

static void echo_rt(int fd, const struct dgram *d)
{
	static uint8_t rx[KVC_PROTO_MSG_MAX];

	if (send(fd, d->buf, d->len, 0) != (ssize_t)d->len ||
	    recv(fd, rx, sizeof(rx), 0) <= 0)
		fail("echo round trip: %s", strerror(errno));
}

/*
 * Run this thread, and what it forks or creates from now on, on one CPU:
 * the first it may use. Returns the CPU; *saved gets the old set.
 */
static int pin_one_cpu(cpu_set_t *saved)
{
	cpu_set_t one;
	int cpu;

	if (sched_getaffinity(0, sizeof(*saved), saved))
		fail("sched_getaffinity: %s", strerror(errno));
	for (cpu = 0; cpu < CPU_SETSIZE && !CPU_ISSET(cpu, saved); cpu++)
		;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	if (sched_setaffinity(0, sizeof(one), &one))
		fail("sched_setaffinity: %s", strerror(errno));
	return cpu;
}

/*
 * blocks (a), through the fast index: lookups and loads of random stored
 * chains by a client that finds them in the pool itself, against the
 * daemon path's baselines.
 */
static void fast_rows(struct kvcache_namespace *ns, uint64_t chains,
		      uint64_t rng, const char *label, int run, int echo,
		      const struct dgram *lookup, const struct dgram *load,
		      const struct dgram *release, uint8_t *dst,
		      const uint8_t *psrc, uint8_t *pdst)
{
	static uint64_t kv[BLK_ITERS], base[BLK_ITERS];
	uint8_t keys[BLK_CHAIN * KEY];
	uint64_t t;

	for (int op = 0; op < 2; op++) {
		for (int i = 0; i < BLK_ITERS; i++) {
			int ret;

			rng = kvc_mix64(rng + (uint64_t)i + 1);
			chain_keys(2, rng % chains, BLK_CHAIN, keys);
			t = now_ns();
			ret = op ? kvcache_load(ns, keys, BLK_CHAIN, dst, BLK_BS) :
			      kvcache_lookup(ns, keys, BLK_CHAIN, NULL);
			kv[i] = now_ns() - t;
			if (ret != BLK_CHAIN)
				kvcd_fail("fast %s: %d", op ? "load" : "lookup",
					  ret);
			t = now_ns();
			if (op) {
				echo_rt(echo, load);
				memcpy(pdst, psrc, BLK_CHAIN * BLK_BS);
				echo_rt(echo, release);
			} else {
				echo_rt(echo, lookup);
			}
			base[i] = now_ns() - t;
		}
		row(op ? "blocks_fast_load_ns" : "blocks_fast_lookup_ns", label,
		    run, (double)quantile(kv, BLK_ITERS, 0.5),
		    (double)quantile(base, BLK_ITERS, 0.5));
	}
}

static void section_blocks_daemon(int runs)
{
	const size_t nsizes = ARRAY_SIZE(blk_daemon_sizes);
	const uint64_t max_chains = (blk_daemon_sizes[nsizes - 1] +
				     BLK_CHAIN - 1) / BLK_CHAIN;
	const size_t bytes = BLK_CHAIN * BLK_BS;
	static struct dgram lookup, load, release, lookup128;
	static uint64_t kv[BLK_ITERS], base[BLK_ITERS];
	static struct kvc_lookup_entry le128[128];
	static uint8_t keys128[128 * KEY];
	uint8_t *src128 = buffer(128 * BLK_BS, 4);
	struct kvcache_namespace *fns;
	struct kvcache *fc;
	struct kvc_lookup_entry le[BLK_CHAIN];
	struct kvc_load_result lr[BLK_CHAIN];
	struct kvcache_handle h[BLK_CHAIN];
	int32_t status[BLK_CHAIN] = { 0 };
	uint8_t keys[BLK_CHAIN * KEY], scratch[KVC_PROTO_MSG_MAX];
	uint8_t *src = buffer(bytes, 0), *dst = buffer(bytes, 1);
	uint8_t *psrc = buffer(bytes, 2), *pdst = buffer(bytes, 3);
	struct kvcache_namespace *ns;
	uint64_t stored = 0, fill_ns = 0, t;
	struct kvcache *c;
	cpu_set_t saved;
	pthread_t echo;
	int sv[2], cpu;

	/*
	 * The bench, its echo thread and the daemon on one CPU, as
	 * socket_bench's headline figure: a request that wakes a sleeping
	 * CPU pays that CPU's wake-up, tens of microseconds on a VM, at
	 * random from one request to the next, which would bury what the
	 * index adds as it grows.
	 */
	cpu = pin_one_cpu(&saved);
	fprintf(stderr, "# blocks (a), the daemon path, all on CPU %d: "
		"chains of %d blocks of %llu KiB, lookup and load of random "
		"chains, medians of %d; baseline: the same datagrams over a "
		"socketpair to an echo thread (+ memcpy() for load)\n", cpu,
		BLK_CHAIN, (unsigned long long)(BLK_BS / KiB), BLK_ITERS);
	pattern(src, bytes, 3);
	pattern(psrc, bytes, 4);
	kvcd_start(BLK_BS, pool_for(max_chains * BLK_CHAIN + 128, BLK_BS));
	/* The daemon path, and the fast index's. */
	setenv("KVCACHE_FAST_PATH", "0", 1);
	c = client_open(1);
	unsetenv("KVCACHE_FAST_PATH");
	ns = ns_open(c, BLK_BS);
	fc = client_open(1);
	fns = ns_open(fc, BLK_BS);
	chain_keys(5, 0, 128, keys128);
	pattern(src128, 128 * BLK_BS, 5);
	store_all(ns, keys128, 128, src128, BLK_BS);
	for (int i = 0; i < 128; i++)
		le128[i] = (struct kvc_lookup_entry) {
			.tiers = KVC_PROTO_TIER_POOL,
			.handle = { .index = (uint32_t)i, .gen = 1 },
		};
	dgram_set(&lookup128, kvc_proto_encode_lookup(lookup128.buf,
			sizeof(lookup128.buf), 1, NS_ID, KVC_PROTO_TIERS_ALL,
			keys128, 128),
		  kvc_proto_encode_lookup_reply(scratch, sizeof(scratch), 1,
						le128, 128));

	/* The real messages' sizes, from the encoders themselves. */
	chain_keys(2, 0, BLK_CHAIN, keys);
	for (int i = 0; i < BLK_CHAIN; i++) {
		h[i] = (struct kvcache_handle) { .index = (uint32_t)i,
						 .gen = 1 };
		le[i] = (struct kvc_lookup_entry) {
			.tiers = KVC_PROTO_TIER_POOL, .handle = h[i],
		};
		lr[i] = (struct kvc_load_result) { .handle = h[i] };
	}
	dgram_set(&lookup, kvc_proto_encode_lookup(lookup.buf,
			sizeof(lookup.buf), 1, NS_ID, KVC_PROTO_TIERS_ALL, keys,
			BLK_CHAIN),
		  kvc_proto_encode_lookup_reply(scratch, sizeof(scratch), 1,
						le, BLK_CHAIN));
	dgram_set(&load, kvc_proto_encode_load(load.buf, sizeof(load.buf), 1,
					       NS_ID, keys, BLK_CHAIN),
		  kvc_proto_encode_load_reply(scratch, sizeof(scratch), 1, lr,
					      BLK_CHAIN));
	dgram_set(&release, kvc_proto_encode_release(release.buf,
			sizeof(release.buf), 1, h, BLK_CHAIN),
		  kvc_proto_encode_release_reply(scratch, sizeof(scratch), 1,
						 status, BLK_CHAIN));
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		fail("socketpair: %s", strerror(errno));
	if (pthread_create(&echo, NULL, echo_main, &sv[1]))
		fail("pthread_create");

	for (size_t s = 0; s < nsizes; s++) {
		uint64_t chains = (blk_daemon_sizes[s] + BLK_CHAIN - 1) /
				  BLK_CHAIN;
		uint64_t t0 = now_ns(), before = stored, rng = 77 + s;
		char label[24];

		count_label(label, sizeof(label), blk_daemon_sizes[s]);
		for (; stored < chains; stored++) {
			chain_keys(2, stored, BLK_CHAIN, keys);
			store_all(ns, keys, BLK_CHAIN, src, BLK_BS);
		}
		t = now_ns() - t0;
		fill_ns += t;
		fprintf(stderr, "# blocks %s: %llu blocks in the index, %llu "
			"stored in %.2f s (%.1f us per block)\n", label,
			(unsigned long long)(stored * BLK_CHAIN),
			(unsigned long long)((stored - before) * BLK_CHAIN),
			secs(t), stored > before ? (double)t / 1e3 /
			(double)((stored - before) * BLK_CHAIN) : 0.0);

		for (int run = 1; run <= runs; run++) {
			for (int i = 0; i < BLK_ITERS; i++) {
				int ret;

				rng = kvc_mix64(rng + (uint64_t)i);
				chain_keys(2, rng % chains, BLK_CHAIN, keys);
				t = now_ns();
				ret = kvcache_lookup(ns, keys, BLK_CHAIN, NULL);
				kv[i] = now_ns() - t;
				if (ret != BLK_CHAIN)
					kvcd_fail("kvcache_lookup: %d", ret);
				t = now_ns();
				echo_rt(sv[0], &lookup);
				base[i] = now_ns() - t;
			}
			row("blocks_lookup_ns", label, run,
			    (double)quantile(kv, BLK_ITERS, 0.5),
			    (double)quantile(base, BLK_ITERS, 0.5));
			for (int i = 0; i < BLK_ITERS; i++) {
				int ret;

				rng = kvc_mix64(rng + (uint64_t)i);
				chain_keys(2, rng % chains, BLK_CHAIN, keys);
				t = now_ns();
				ret = kvcache_load(ns, keys, BLK_CHAIN, dst,
						   BLK_BS);
				kv[i] = now_ns() - t;
				if (ret != BLK_CHAIN)
					kvcd_fail("kvcache_load: %d", ret);
				t = now_ns();
				echo_rt(sv[0], &load);
				memcpy(pdst, psrc, bytes);
				echo_rt(sv[0], &release);
				base[i] = now_ns() - t;
			}
			row("blocks_load_ns", label, run,
			    (double)quantile(kv, BLK_ITERS, 0.5),
			    (double)quantile(base, BLK_ITERS, 0.5));
			fast_rows(fns, chains, rng, label, run, sv[0], &lookup,
				  &load, &release, dst, psrc, pdst);
			for (int i = 0; i < BLK_ITERS; i++) {
				int ret;

				t = now_ns();
				ret = kvcache_lookup(fns, keys128, 128, NULL);
				kv[i] = now_ns() - t;
				if (ret != 128)
					kvcd_fail("kvcache_lookup of 128: %d",
						  ret);
				t = now_ns();
				echo_rt(sv[0], &lookup128);
				base[i] = now_ns() - t;
			}
			row("blocks_fast_lookup128_ns", label, run,
			    (double)quantile(kv, BLK_ITERS, 0.5),
			    (double)quantile(base, BLK_ITERS, 0.5));
		}
	}
	fprintf(stderr, "# blocks (a): filling took %.1f s in all\n",
		secs(fill_ns));
	shutdown(sv[0], SHUT_RDWR);
	pthread_join(echo, NULL);
	close(sv[0]);
	close(sv[1]);
	kvcache_close(fc);
	kvcache_close(c);
	kvcd_stop();
	munmap(src128, 128 * BLK_BS);
	if (sched_setaffinity(0, sizeof(saved), &saved))
		fail("sched_setaffinity: %s", strerror(errno));
	munmap(src, bytes);
	munmap(dst, bytes);
	munmap(psrc, bytes);
	munmap(pdst, bytes);
}

/* ---- blocks (b): the index alone --------------------------------------- */

/* The baseline: tests/bench/chained.h, keys only. */

static void index_one(int runs, uint64_t want)
{
	const uint64_t chains = (want + BLK_CHAIN - 1) / BLK_CHAIN;
	const size_t n = chains * BLK_CHAIN;
	uint8_t (*q)[KEY] = malloc((size_t)IDX_QUERIES * KEY);
	uint8_t (*pq)[KEY] = malloc((size_t)IDX_PREFIXES * BLK_CHAIN * KEY);
	struct kvc_match out[BLK_CHAIN];
	union kvc_loc loc = { .u64 = 0 };
	struct kvc_index *idx;
	struct chained tab;
	uint64_t t0, t1, rng = 99;
	char label[24];

	count_label(label, sizeof(label), want);
	if (!q || !pq || kvc_index_create(&idx, n, 0x5eed))
		fail("no memory for the index");
	if (chained_init(&tab, n))
		fail("no memory for the baseline table");
	t0 = now_ns();
	for (uint64_t c = 0; c < chains; c++) {
		uint8_t k[KEY], parent[KEY];

		for (uint64_t d = 0; d < BLK_CHAIN; d++) {
			uint32_t id;

			key_of(3, c, d, k);
			if (kvc_index_insert(idx, NS_ID, k, d ? parent : NULL,
					     &id) ||
			    kvc_index_set(idx, id, KVC_TIER_POOL, loc))
				fail("index insert");
			chained_add(&tab, k);
			memcpy(parent, k, KEY);
		}
	}
	fprintf(stderr, "# index %s: %zu keys inserted in %.2f s (both "
		"tables), %.1f bytes per key in the index\n", label, n,
		secs(now_ns() - t0), (double)kvc_index_bytes(idx) / (double)n);
	for (uint32_t i = 0; i < IDX_QUERIES; i++) {
		rng = kvc_mix64(rng + i);
		key_of(3, rng % chains, (rng >> 40) % BLK_CHAIN, q[i]);
	}
	for (uint32_t i = 0; i < IDX_PREFIXES; i++) {
		rng = kvc_mix64(rng + i);
		chain_keys(3, rng % chains, BLK_CHAIN, pq[i * BLK_CHAIN]);
	}

	for (int run = 1; run <= runs; run++) {
		double kv, base;
		size_t m;

		t0 = now_ns();
		for (m = 0; (t1 = now_ns()) - t0 < IDX_MIN_NS;)
			for (int i = 0; i < 1024; i++, m++) {
				uint32_t id;

				if (kvc_index_find(idx, NS_ID,
						   q[m % IDX_QUERIES], &id))
					fail("index lookup missed");
				sink += id;
			}
		kv = (double)(t1 - t0) / (double)m;
		t0 = now_ns();
		for (m = 0; (t1 = now_ns()) - t0 < IDX_MIN_NS;)
			for (int i = 0; i < 1024; i++, m++)
				sink += chained_find(&tab, q[m % IDX_QUERIES]);
		base = (double)(t1 - t0) / (double)m;
		row("blocks_index_find_ns", label, run, kv, base);

		t0 = now_ns();
		for (m = 0; (t1 = now_ns()) - t0 < IDX_MIN_NS; m++) {
			const uint8_t (*keys)[KEY] = (const uint8_t (*)[KEY])
				pq[(m % IDX_PREFIXES) * BLK_CHAIN];

			if (kvc_index_lookup(idx, NS_ID, keys, BLK_CHAIN,
					     KVC_TIERS_ALL, out) != BLK_CHAIN)
				fail("index prefix lookup short");
			sink += out[BLK_CHAIN - 1].id;
		}
		kv = (double)(t1 - t0) / (double)m;
		t0 = now_ns();
		for (m = 0; (t1 = now_ns()) - t0 < IDX_MIN_NS; m++) {
			const uint8_t (*keys)[KEY] = (const uint8_t (*)[KEY])
				pq[(m % IDX_PREFIXES) * BLK_CHAIN];

			for (int i = 0; i < BLK_CHAIN; i++) {
				uint32_t id = chained_find(&tab, keys[i]);

				if (id == UINT32_MAX)
					break;
				sink += id;
			}
		}
		base = (double)(t1 - t0) / (double)m;
		row("blocks_index_prefix16_ns", label, run, kv, base);
	}
	kvc_index_destroy(idx);
	chained_free(&tab);
	free(q);
	free(pq);
}

static void section_blocks_index(int runs)
{
	fprintf(stderr, "# blocks (b), the index alone (helper/kvcached/index.c, no "
		"daemon, no socket): chains of %d keys; baseline a plain "
		"chained hash table of the same keys\n", BLK_CHAIN);
	for (size_t s = 0; s < ARRAY_SIZE(blk_index_sizes); s++)
		index_one(runs, blk_index_sizes[s]);
}

/* ---- clients ----------------------------------------------------------- */

/*
 * CL_MAX chains, each with a private destination (the loads' and the
 * memcpy()s') and a private source (what was stored, and the memcpy()s'
 * source). Thread i of n works through chains i, i + n, i + 2n... in
 * turn, so every measurement, 1 thread or 64, touches all of them: 256
 * MiB of pool and 256 MiB of destinations, more than any cache, and the
 * 1-thread baseline is not flattered by a chain that stays in the cache.
 */
struct cl_chain {
	uint8_t keys[CL_CHAIN * KEY];
	uint8_t *dst, *src;
};

static struct cl_chain cl_chains[CL_MAX];

struct crowd {
	pthread_barrier_t start;
	uint64_t deadline;		/* set before the barrier opens */
};

struct worker {
	pthread_t thr;
	struct crowd *crowd;
	struct kvcache_namespace *ns;	/* NULL: the memcpy() baseline */
	unsigned int first, stride;	/* its chains */
	uint64_t *lat;			/* CL_SAMPLES */
	size_t nlat, ops;
	uint64_t end;
	int err;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	unsigned int j = w->first;
	uint64_t t;

	pthread_barrier_wait(&w->crowd->start);
	for (t = now_ns(); t < w->crowd->deadline;) {
		struct cl_chain *ch = &cl_chains[j];
		uint64_t t0 = t;

		if (w->ns) {
			int ret = kvcache_lookup(w->ns, ch->keys, CL_CHAIN,
						 NULL);

			if (ret == CL_CHAIN)
				ret = kvcache_load(w->ns, ch->keys, CL_CHAIN,
						   ch->dst, CL_BS);
			if (ret != CL_CHAIN) {
				/* A chain evicted under us: fewer blocks. */
				w->err = ret < 0 ? ret : -ENODATA;
				break;
			}
		} else {
			memcpy(ch->dst, ch->src, CL_CHAIN * CL_BS);
			/*
			 * An op of kvcache blocks on the daemon, and another
			 * thread gets the CPU. A copy does not: with 32 or
			 * 64 threads, one time slice would be several copies
			 * into a destination that stays in the cache, the
			 * bandwidth of a cache, not of memory. Not more
			 * threads than CPUs: no other thread, no cost.
			 */
			sched_yield();
		}
		t = now_ns();
		if (w->nlat < CL_SAMPLES)
			w->lat[w->nlat++] = t - t0;
		w->ops++;
		j += w->stride;
		if (j >= CL_MAX)
			j = w->first;
	}
	w->end = now_ns();
	return NULL;
}

/* What the slices of one configuration add up to. */
struct tally {
	size_t ops;
	uint64_t ns;
	uint64_t *lat;		/* CL_SLICES * CL_MAX * CL_SAMPLES */
	size_t nlat;
};

/*
 * n threads for CL_NS: thread i uses ns[i] (ns NULL: memcpy()). Its
 * time is from the start to the last thread's end, so an operation that
 * runs past the deadline is counted with the time it took.
 */
static void crowd_run(struct worker *w, unsigned int n,
		      struct kvcache_namespace **ns, struct tally *tl)
{
	struct crowd cr;
	uint64_t t0, end = 0;

	if (pthread_barrier_init(&cr.start, NULL, n + 1))
		fail("pthread_barrier_init");
	for (unsigned int i = 0; i < n; i++) {
		w[i].crowd = &cr;
		w[i].ns = ns ? ns[i] : NULL;
		w[i].first = i;
		w[i].stride = n;
		w[i].nlat = w[i].ops = 0;
		w[i].err = 0;
		if (pthread_create(&w[i].thr, NULL, worker_main, &w[i]))
			fail("pthread_create");
	}
	t0 = now_ns();
	cr.deadline = t0 + CL_NS;
	pthread_barrier_wait(&cr.start);
	for (unsigned int i = 0; i < n; i++) {
		pthread_join(w[i].thr, NULL);
		if (w[i].err)
			kvcd_fail("thread %u: lookup + load: %s", i,
				  kvcache_strerror(w[i].err));
		if (w[i].end > end)
			end = w[i].end;
		tl->ops += w[i].ops;
		memcpy(tl->lat + tl->nlat, w[i].lat,
		       w[i].nlat * sizeof(*tl->lat));
		tl->nlat += w[i].nlat;
	}
	pthread_barrier_destroy(&cr.start);
	tl->ns += end - t0;
}

static double tally_ops(const struct tally *tl)
{
	return (double)tl->ops * 1e9 / (double)tl->ns;
}

static double tally_us(struct tally *tl, double q)
{
	if (!tl->nlat)
		fail("no operation finished in %.2f s", secs(CL_NS));
	return (double)quantile(tl->lat, tl->nlat, q) / 1e3;
}

static void section_clients(int runs)
{
	const size_t bytes = CL_CHAIN * CL_BS;
	const size_t nt = ARRAY_SIZE(cl_threads);
	static struct worker w[CL_MAX];
	static struct kvcache *own[CL_MAX], *shared[ARRAY_SIZE(cl_threads)];
	static struct kvcache_namespace *own_ns[CL_MAX];
	static struct kvcache_namespace
		*shared_ns[ARRAY_SIZE(cl_threads)][CL_MAX];
	struct tally one, many, sh, mc, *all[] = { &one, &many, &sh, &mc };

	fprintf(stderr, "# clients: threads doing lookup + load of chains of "
		"%d blocks of %llu KiB (%d chains in turn) for %d x %.2f s; "
		"baselines: 1 thread (same run), memcpy() of the same %zu MiB "
		"per op\n", CL_CHAIN, (unsigned long long)(CL_BS / KiB),
		CL_MAX, CL_SLICES, secs(CL_NS), (size_t)(bytes / MiB));
	for (size_t i = 0; i < ARRAY_SIZE(all); i++) {
		all[i]->lat = malloc(sizeof(uint64_t) * CL_SLICES * CL_MAX *
				     CL_SAMPLES);
		if (!all[i]->lat)
			fail("no memory for the latencies");
	}
	kvcd_start(CL_BS, pool_for(CL_MAX * CL_CHAIN, CL_BS));
	for (unsigned int i = 0; i < CL_MAX; i++) {
		struct cl_chain *ch = &cl_chains[i];

		ch->dst = buffer(bytes, 1);
		ch->src = buffer(bytes, 2);
		w[i].lat = malloc(sizeof(*w[i].lat) * CL_SAMPLES);
		if (!w[i].lat)
			fail("no memory for the latencies");
		pattern(ch->src, bytes, 10 + i);
		chain_keys(4, i, CL_CHAIN, ch->keys);
		own[i] = client_open(1);
		own_ns[i] = ns_open(own[i], CL_BS);
		store_all(own_ns[i], ch->keys, CL_CHAIN, ch->src, CL_BS);
		/* Untimed: check it, and warm the client's mapping up. */
		if (kvcache_load(own_ns[i], ch->keys, CL_CHAIN, ch->dst,
				 CL_BS) != CL_CHAIN ||
		    memcmp(ch->dst, ch->src, bytes))
			kvcd_fail("chain %u: the loaded bytes are wrong", i);
	}
	for (size_t s = 0; s < nt; s++) {
		shared[s] = client_open(cl_threads[s]);
		shared_ns[s][0] = ns_open(shared[s], CL_BS);
		for (unsigned int i = 1; i < CL_MAX; i++)
			shared_ns[s][i] = shared_ns[s][0];
	}

	for (int run = 1; run <= runs; run++) {
		for (size_t s = 0; s < nt; s++) {
			unsigned int n = cl_threads[s];
			char label[24];

			snprintf(label, sizeof(label), "%u", n);
			for (size_t i = 0; i < ARRAY_SIZE(all); i++)
				all[i]->ops = all[i]->ns = all[i]->nlat = 0;
			/* Slices, so that a slow moment hits all four. */
			for (int sl = 0; sl < CL_SLICES; sl++) {
				crowd_run(w, 1, own_ns, &one);
				crowd_run(w, n, own_ns, &many);
				crowd_run(w, n, shared_ns[s], &sh);
				crowd_run(w, n, NULL, &mc);
			}
			row("clients_ops", label, run, tally_ops(&many),
			    n * tally_ops(&one));
			row("clients_shared_ops", label, run, tally_ops(&sh),
			    n * tally_ops(&one));
			row("clients_p50_us", label, run, tally_us(&many, 0.5),
			    tally_us(&one, 0.5));
			row("clients_p99_us", label, run,
			    tally_us(&many, 0.99), tally_us(&one, 0.99));
			row("clients_p99_vs_memcpy_us", label, run,
			    tally_us(&many, 0.99), tally_us(&mc, 0.99));
			row("clients_mbps", label, run,
			    tally_ops(&many) * (double)bytes / 1e6,
			    tally_ops(&mc) * (double)bytes / 1e6);
			fprintf(stderr, "# clients %u, run %d: %.0f ops/s "
				"(shared client %.0f, 1 thread %.0f, memcpy() "
				"%.0f)\n", n, run, tally_ops(&many),
				tally_ops(&sh), tally_ops(&one),
				tally_ops(&mc));
		}
	}
	for (size_t s = 0; s < nt; s++)
		kvcache_close(shared[s]);
	for (unsigned int i = 0; i < CL_MAX; i++) {
		kvcache_close(own[i]);
		munmap(cl_chains[i].dst, bytes);
		munmap(cl_chains[i].src, bytes);
		free(w[i].lat);
	}
	for (size_t i = 0; i < ARRAY_SIZE(all); i++)
		free(all[i]->lat);
	kvcd_stop();
}

/* ---- size -------------------------------------------------------------- */

struct size_bufs {
	uint8_t *src, *dst, *psrc, *pdst;
	uint8_t *fresh;			/* a memfd's mapping */
	int fresh_fd;
};

/* Bytes of free huge pages, from /proc/meminfo (0 when none). */
static uint64_t huge_free_bytes(void)
{
	unsigned long long nfree = 0, kb = 0;
	FILE *f = fopen("/proc/meminfo", "r");
	char line[128];

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "HugePages_Free: %llu", &nfree);
		sscanf(line, "Hugepagesize: %llu kB", &kb);
	}
	fclose(f);
	return (uint64_t)nfree * kb * 1024;
}

/* A size run's pool: every run's chain and the warm-up's (no eviction). */
static uint64_t size_pool(int runs, uint64_t bs, bool huge)
{
	uint64_t bytes = pool_for((uint64_t)(runs + 1) * (SZ_BYTES / bs), bs);

	return huge ? (bytes + 2 * MiB - 1) / (2 * MiB) * (2 * MiB) : bytes;
}

static void size_one(int runs, uint64_t bs, struct size_bufs *b, bool huge)
{
	const size_t nblk = SZ_BYTES / bs;
	const size_t bytes = nblk * bs;
	uint8_t *keys = malloc(nblk * KEY);
	struct kvcache_namespace *ns;
	struct kvcache *c;
	char label[24];
	uint64_t t;

	size_label(label, sizeof(label), bs);
	if (!keys)
		fail("no memory for keys");
	kvcd_start_pages(bs, size_pool(runs, bs, huge), huge);
	c = client_open(1);
	ns = ns_open(c, bs);
	chain_keys(5, 0, nblk, keys);
	store_all(ns, keys, nblk, b->src, bs);
	if (kvcache_load(ns, keys, nblk, b->dst, bs) != (int)nblk ||
	    memcmp(b->dst, b->src, bytes))
		kvcd_fail("size %s: the loaded chain is wrong", label);

	for (int run = 1; run <= runs; run++) {
		uint64_t st, mc, fr, ld = 0, mc2 = 0;
		int ret;

		chain_keys(5, (uint64_t)run, nblk, keys);
		t = now_ns();
		ret = kvcache_store(ns, NULL, keys, nblk, b->src, bs);
		st = now_ns() - t;
		if (ret != (int)nblk)
			kvcd_fail("size %s: kvcache_store: %d", label, ret);

		t = now_ns();
		memcpy(b->pdst, b->psrc, bytes);
		mc = now_ns() - t;

		if (fallocate(b->fresh_fd, FALLOC_FL_PUNCH_HOLE |
			      FALLOC_FL_KEEP_SIZE, 0, (off_t)SZ_BYTES))
			fail("fallocate: %s", strerror(errno));
		t = now_ns();
		memcpy(b->fresh, b->psrc, bytes);
		fr = now_ns() - t;

		for (int rep = 0; rep < SZ_LOAD_REPS; rep++) {
			t = now_ns();
			ret = kvcache_load(ns, keys, nblk, b->dst, bs);
			ld += now_ns() - t;
			if (ret != (int)nblk)
				kvcd_fail("size %s: kvcache_load: %d", label,
					  ret);
			t = now_ns();
			memcpy(b->pdst, b->psrc, bytes);
			mc2 += now_ns() - t;
		}
		row(huge ? "size_huge_store_mbps" : "size_store_mbps", label,
		    run, mbps(bytes, st), mbps(bytes, mc));
		if (!huge)
			row("size_store_fault_mbps", label, run,
			    mbps(bytes, st), mbps(bytes, fr));
		row(huge ? "size_huge_load_mbps" : "size_load_mbps", label, run,
		    mbps(bytes * SZ_LOAD_REPS, ld),
		    mbps(bytes * SZ_LOAD_REPS, mc2));
	}
	kvcache_close(c);
	kvcd_stop();
	free(keys);
}

static void section_size(int runs)
{
	struct size_bufs b;

	fprintf(stderr, "# size: a chain of %llu MiB per block size, store "
		"and load; baseline memcpy() of the same bytes (and into "
		"freshly punched memfd pages for the store)\n",
		(unsigned long long)(SZ_BYTES / MiB));
	b.src = buffer(SZ_BYTES, 0);
	b.dst = buffer(SZ_BYTES, 1);
	b.psrc = buffer(SZ_BYTES, 2);
	b.pdst = buffer(SZ_BYTES, 3);
	pattern(b.src, SZ_BYTES, 20);
	pattern(b.psrc, SZ_BYTES, 21);
	b.fresh_fd = memfd_create("scale-bench-fresh", MFD_CLOEXEC);
	if (b.fresh_fd < 0 || ftruncate(b.fresh_fd, (off_t)SZ_BYTES))
		fail("memfd: %s", strerror(errno));
	b.fresh = mmap(NULL, SZ_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED,
		       b.fresh_fd, 0);
	if (b.fresh == MAP_FAILED)
		fail("mmap of the memfd: %s", strerror(errno));
	for (size_t s = 0; s < ARRAY_SIZE(sz_sizes); s++) {
		uint64_t want = size_pool(runs, sz_sizes[s], true);

		size_one(runs, sz_sizes[s], &b, false);
		if (huge_free_bytes() >= want)
			size_one(runs, sz_sizes[s], &b, true);
		else
			fprintf(stderr, "# size: no huge-page rows at %llu KiB "
				"blocks: %llu MiB of huge pages free, the pool "
				"needs %llu (scripts/bench reserves them as "
				"root)\n",
				(unsigned long long)(sz_sizes[s] >> 10),
				(unsigned long long)(huge_free_bytes() / MiB),
				(unsigned long long)(want / MiB));
	}
	munmap(b.fresh, SZ_BYTES);
	close(b.fresh_fd);
	munmap(b.src, SZ_BYTES);
	munmap(b.dst, SZ_BYTES);
	munmap(b.psrc, SZ_BYTES);
	munmap(b.pdst, SZ_BYTES);
}

/* ---- kernel: one-block DRAM hits in kernel mode (the test VM) ---------- */

/* One side of a kernel-section measurement: loads of ns, or memcpy(). */
struct kh_op {
	struct kvcache_namespace *ns;	/* NULL: memcpy() from src */
	const uint8_t *keys;
	const uint8_t *src;
	uint8_t *dst;
	uint64_t sz;
};

/*
 * MB/s of one-block operations repeated for KH_MIN_NS at least, cycling
 * through the KH_KEYS blocks: the guest's clock may tick in milliseconds
 * (no ACPI: jiffies), so only intervals far above that are timed.
 */
static double kh_timed(const struct kh_op *op, const char *label)
{
	uint64_t t0 = now_ns(), t, n = 0;

	do {
		size_t i = n % KH_KEYS;

		if (op->ns) {
			int ret = kvcache_load(op->ns, op->keys + i * KEY, 1,
					       op->dst, op->sz);

			if (ret != 1)
				kvcd_fail("a one-block load of %s: %d", label,
					  ret);
		} else {
			memcpy(op->dst, op->src + i * op->sz, op->sz);
		}
		n++;
		t = now_ns();
	} while (t - t0 < KH_MIN_NS);
	return mbps(n * op->sz, t - t0);
}

static void section_kernel(int runs)
{
	struct kvcache_client_info ci;
	struct kvcache *fast, *slow;
	uint64_t hits = 0;

	if (access("/dev/kvcache", R_OK | W_OK))
		fail("kernel: no /dev/kvcache here; run it in the test VM "
		     "(scripts/vm run -- build/bench/scale_bench RUNS "
		     "build/helper/kvcached kernel)");
	kvcd_launch("kernel", "");
	fast = client_open(1);
	/* The same loads through the daemon: LOAD, then PIN, copy, UNPIN. */
	setenv("KVCACHE_FAST_PATH", "0", 1);
	slow = client_open(1);
	unsetenv("KVCACHE_FAST_PATH");
	if (kvcache_get_info(fast, &ci) || ci.mode != KVCACHE_MODE_KERNEL)
		kvcd_fail("kvcached is not in kernel mode");
	fprintf(stderr, "# kernel: %d keys per size, one block per load, "
		"each side timed for %llu ms per run, pool blocks of %llu "
		"KiB; baseline memcpy() of the same bytes between private "
		"buffers\n", KH_KEYS,
		(unsigned long long)(KH_MIN_NS / 1000000),
		(unsigned long long)(ci.block_size / KiB));
	for (size_t s = 0; s < ARRAY_SIZE(kh_sizes); s++) {
		const uint64_t sz = kh_sizes[s];
		const size_t bytes = KH_KEYS * sz;
		uint8_t keys[KH_KEYS * KEY], *src, *dst, *psrc, *pdst;
		struct kvcache_namespace *nf, *nsl;
		char label[24];

		if (sz > ci.block_size)
			continue;
		size_label(label, sizeof(label), sz);
		src = buffer(bytes, 0);
		dst = buffer(sz, 1);
		psrc = buffer(bytes, 2);
		pdst = buffer(sz, 3);
		pattern(src, bytes, 10 + s);
		pattern(psrc, bytes, 20 + s);
		nf = ns_open(fast, sz);
		nsl = ns_open(slow, sz);
		chain_keys(100 + s, 0, KH_KEYS, keys);
		store_all(nf, keys, KH_KEYS, src, sz);
		for (int i = 0; i < KH_KEYS; i++)
			if (kvcache_load(nf, keys + i * KEY, 1, dst, sz) != 1 ||
			    memcmp(dst, src + i * sz, sz) ||
			    kvcache_load(nsl, keys + i * KEY, 1, dst, sz) != 1 ||
			    memcmp(dst, src + i * sz, sz))
				kvcd_fail("block %d of %s is not what was "
					  "stored", i, label);
		for (int run = 1; run <= runs; run++) {
			struct kh_op ops[4] = {
				{ .ns = nf, .keys = keys, .dst = dst, .sz = sz },
				{ .src = psrc, .dst = pdst, .sz = sz },
				{ .ns = nsl, .keys = keys, .dst = dst, .sz = sz },
				{ .src = psrc, .dst = pdst, .sz = sz },
			};
			double r[4];

			/* Interleaved: fast, memcpy, daemon, memcpy. */
			for (int i = 0; i < 4; i++)
				r[i] = kh_timed(&ops[i], label);
			row("khit_fast_mbps", label, run, r[0], r[1]);
			row("khit_daemon_mbps", label, run, r[2], r[3]);
		}
		kvcache_ns_close(nf);
		kvcache_ns_close(nsl);
		munmap(src, bytes);
		munmap(dst, sz);
		munmap(psrc, bytes);
		munmap(pdst, sz);
	}
	/* The fast client's hits must have gone the fast way. */
	if (kvcache_stat(fast, "fast_hits", &hits) || !hits)
		kvcd_fail("no fast hit counted: the fast path was not taken");
	fprintf(stderr, "# kernel: fast_hits %llu\n",
		(unsigned long long)hits);
	kvcache_close(fast);
	kvcache_close(slow);
	kvcd_stop();
}

/* ---- main -------------------------------------------------------------- */

static const struct {
	const char *name;
	void (*fn)(int runs);
} sections[] = {
	{ "dram", section_dram },
	{ "blocks-daemon", section_blocks_daemon },
	{ "blocks-index", section_blocks_index },
	{ "clients", section_clients },
	{ "size", section_size },
	/* Only when named: it needs kvcache.ko (the test VM). */
	{ "kernel", section_kernel },
};

int main(int argc, char **argv)
{
	int runs = argc > 1 ? atoi(argv[1]) : 5;
	const char *which = argc > 3 ? argv[3] : "all";
	double took[ARRAY_SIZE(sections)] = { 0 };
	bool chosen[ARRAY_SIZE(sections)], any = false;

	kvcd_bin = argc > 2 ? argv[2] : "build/helper/kvcached";
	if (runs < 1 || argc > 4) {
		fprintf(stderr, "usage: scale_bench [RUNS] [KVCACHED] "
			"[all|dram|blocks|blocks-daemon|blocks-index|clients|"
			"size|kernel]\n");
		return 2;
	}
	if (access(kvcd_bin, X_OK))
		fail("%s: %s", kvcd_bin, strerror(errno));
	atexit(on_exit_cleanup);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);
	/* A dead echo peer or daemon is an error to report, not a signal. */
	signal(SIGPIPE, SIG_IGN);

	for (size_t i = 0; i < ARRAY_SIZE(sections); i++) {
		const char *name = sections[i].name;

		chosen[i] = (!strcmp(which, "all") &&
			     strcmp(name, "kernel")) || !strcmp(which, name) ||
			    (!strcmp(which, "blocks") &&
			     !strncmp(name, "blocks-", 7));
		any |= chosen[i];
	}
	if (!any)
		fail("no section called %s", which);

	printf("metric,run,kvcache,baseline,ratio\n");
	fflush(stdout);
	for (size_t i = 0; i < ARRAY_SIZE(sections); i++) {
		uint64_t t;

		if (!chosen[i])
			continue;
		t = now_ns();
		sections[i].fn(runs);
		took[i] = secs(now_ns() - t);
		fprintf(stderr, "# section %s: %.1f s\n", sections[i].name,
			took[i]);
	}
	for (size_t i = 0; i < ARRAY_SIZE(sections); i++)
		if (took[i] > 0)
			fprintf(stderr, "# %-14s %6.1f s\n", sections[i].name,
				took[i]);
	return 0;
}
