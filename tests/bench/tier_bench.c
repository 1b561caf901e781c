// SPDX-License-Identifier: GPL-2.0
/*
 * Persistent tier I/O benchmark (helper/kvcached/tiers/tierio.c): spill and promote
 * bandwidth of block files, against fio on the same filesystem with the
 * same transfer size and queue depth, measured side by side.
 *
 * Spill: N blocks written through kvc_tio_write_begin/_submit/_reap with
 * the queue kept full, as kvcached spills: the payload is copied from a
 * source block (the pool's) into the slot, and each block becomes its own
 * file (temp file, one write of header + payload, fsync linked when fsync
 * is on, link to the final name, fsync of the directory). Promote: the N
 * blocks read back through kvc_tio_read_into/_reap straight into their
 * destination blocks (open, one read of header and payload, CRC32C check
 * in place), as kvcached promotes into its pool (either mode); page cache
 * dropped first. promote_staged reads through kvc_tio_read instead (the
 * whole file into a staging slot, checked there) and copies the payload
 * out, as kvcached does when it cannot reserve a block at once (or on a
 * kvcache.ko without DISCARD), and as every promote did before the reads
 * went in place.
 *
 * Baselines, each one fio process run next to ours in the same run (ours
 * first in even runs, last in odd ones):
 *   raw      one file of N * FILE bytes, --ioengine=io_uring --direct=1
 *            --bs=FILE --iodepth=QD (--fsync=1 when fsync is on: an fsync
 *            after every write). What the 0.9 target is measured against.
 *   perfile  the same bytes as N files of FILE bytes, one write or read
 *            each (--nrfiles=N --filesize=FILE --file_service_type=
 *            sequential --openfiles=QD). Context: fio creates its files
 *            before it starts the clock, so this still excludes the
 *            create, link and directory fsync a spill pays.
 * Both write into files deleted beforehand (--fallocate=none), so that,
 * like a spill, every write allocates its blocks.
 *
 * Figures are payload bytes per second (10^6 bytes/s); a block's file is
 * FILE = 4096 + the payload padded to 4 KiB bytes, and that is what both
 * sides move. fio's time is its own I/O runtime (ms resolution, from its
 * JSON), not its start-up; ours is CLOCK_MONOTONIC from the first request
 * to the last completion.
 *
 * Promote is measured twice: with page cache, dentries and inodes
 * dropped (drop_caches 3: a restart), and with the page cache alone
 * dropped (1: promote_warmmeta, the fan-out directories and inodes cached
 * as in a running daemon), since a cold open walks three directories.
 * Last in each run, fio's raw read is run twice in a row: the ratio of
 * the two (noise_fio_read_vs_itself) is what a ratio means here.
 *
 * Output: CSV "metric,run,kvcache_MBps,fio_MBps,ratio,kvcache_ns,fio_ns,
 * kvcache_cpu" (ratio: kvcache bandwidth over fio's, same run; cpu: the
 * share of one CPU our one thread used meanwhile, user + system, not
 * counting io_uring's own workers: near 1, the thread is the bottleneck)
 * on stdout, a summary on stderr. Runs as root so that it can drop the
 * page cache; otherwise the reads are warm and it says so.
 *
 * Usage: tier_bench [-r RUNS] [-d DIR] [-b PAYLOAD] [-q DEPTH] [-n BLOCKS]
 *   defaults: 5 runs, a fresh directory under /var/tmp (the machine's
 *   disk, not a tmpfs), 2 MiB (the pool's block size), depth 8, 256
 *   blocks. With -d, the bench works in a fresh directory inside DIR.
 *   Everything it created is removed at the end.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "tierio.h"

#define NS		1
#define TAG		"bench"
#define NSRC		16	/* source/destination blocks, cycled */

enum {
	SPILL_NOFSYNC, SPILL_FSYNC, PROMOTE, PROMOTE_META, PROMOTE_STAGED,
	NOISE, NOPS
};
enum { RAW, PERFILE, NBASE };

static const char *const op_name[NOPS] = {
	"spill_nofsync", "spill_fsync", "promote", "promote_warmmeta",
	"promote_staged", "noise",
};
static const char *const base_name[NBASE] = { "raw", "perfile" };

static struct {
	int runs;
	uint64_t payload, fsize;
	unsigned int qd, n;
	char work[PATH_MAX - 64], nsdir[PATH_MAX], raw[PATH_MAX];
	char files[PATH_MAX];
	uint8_t (*keys)[KVC_BF_KEY_SIZE];
	uint8_t *src;
	uint8_t *dst;			/* ndst blocks of dlen, page-aligned */
	uint64_t dlen;
	unsigned int ndst;
	bool warm;			/* could not drop the page cache */
} B;

/* ---- the directory --------------------------------------------------- */

static bool rm_dirs_too;

static int rm_one(const char *path, const struct stat *st, int type,
		  struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (type == FTW_DP) {
		if (rm_dirs_too && rmdir(path))
			return -1;
	} else if (unlink(path) && errno != ENOENT) {
		return -1;
	}
	return 0;
}

/*
 * Remove the files under @path; the directories too when @dirs. Between
 * runs the fan-out directories stay, as in a tier that has been in use:
 * creating one costs a directory fsync, whatever the fsync setting.
 */
static void rm_tree(const char *path, bool dirs)
{
	struct stat st;

	if (lstat(path, &st))
		return;
	rm_dirs_too = dirs;
	if (nftw(path, rm_one, 32, FTW_DEPTH | FTW_PHYS))
		bench_die(path, errno);
}

/*
 * sync first, so that no writeback of the previous step (nor the discards
 * of the files just deleted, on a filesystem mounted with -o discard)
 * runs during the next one. Then drop the page cache (@drop "1") and the
 * dentries and inodes too ("3"), or nothing (NULL).
 */
static void quiesce(const char *drop)
{
	int fd;

	sync();
	if (!drop || B.warm)
		return;
	fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, drop, 1) != 1) {
		fprintf(stderr, "tier_bench: cannot drop the page cache (%s):"
			" the reads are warm\n", strerror(errno));
		B.warm = true;
	}
	if (fd >= 0)
		close(fd);
}

/* ---- ours ------------------------------------------------------------ */

struct ctx {
	unsigned int done;
};

static void on_done(void *arg, const struct kvc_tio_done *d)
{
	struct ctx *c = arg;

	if (d->status)
		bench_die(d->op == KVC_TIO_READ ? "promote" : "spill", d->status);
	if (d->op == KVC_TIO_READ) {
		uint8_t *blk = B.dst + (d->cookie % B.ndst) * B.dlen;

		if (d->h->payload_len != B.payload)
			bench_die("promote: wrong payload length", EBADMSG);
		/* Staged: into the pool, as kvcached does with a promoted
		 * block; in place, it is there already. */
		if (d->payload != blk)
			memcpy(blk, d->payload, B.payload);
	}
	c->done++;
}

static void reap(struct kvc_tio *t, struct ctx *c)
{
	int ret = kvc_tio_reap(t, true, on_done, c);

	if (ret < 0)
		bench_die("reap", ret);
}

static uint64_t ours_spill(struct kvc_tio *t)
{
	struct ctx c = { 0 };
	unsigned int next = 0;
	uint64_t t0 = now_ns();

	while (c.done < B.n) {
		while (next < B.n) {
			struct kvc_bf_header h;
			uint8_t *p;
			int slot = kvc_tio_write_begin(t, &p), ret;

			if (slot == -EBUSY)
				break;
			if (slot < 0)
				bench_die("write_begin", slot);
			/* The copy out of the pool is part of a spill. */
			memcpy(p, B.src + (next % NSRC) * B.payload, B.payload);
			memset(&h, 0, sizeof(h));
			h.flags = KVC_BF_F_FIRST;
			memcpy(h.key, B.keys[next], KVC_BF_KEY_SIZE);
			h.ns_id = NS;
			h.payload_len = B.payload;
			strcpy(h.node_id, TAG);
			ret = kvc_tio_write_submit(t, slot, B.nsdir, &h, next);
			if (ret)
				bench_die("write_submit", ret);
			next++;
		}
		reap(t, &c);
	}
	return now_ns() - t0;
}

static uint64_t ours_promote(struct kvc_tio *t, bool staged)
{
	struct ctx c = { 0 };
	unsigned int next = 0;
	uint64_t t0 = now_ns();

	while (c.done < B.n) {
		while (next < B.n) {
			uint8_t *blk = B.dst + (next % B.ndst) * B.dlen;
			int ret = staged ?
				  kvc_tio_read(t, B.nsdir, B.keys[next], next) :
				  kvc_tio_read_into(t, B.nsdir, B.keys[next],
						    next, blk, B.dlen);

			if (ret == -EBUSY)
				break;
			if (ret)
				bench_die("read", ret);
			next++;
		}
		reap(t, &c);
	}
	return now_ns() - t0;
}

/* ---- fio ------------------------------------------------------------- */

/* Run fio with @argv, its JSON output into a malloc'd string. */
static char *run(char *const argv[])
{
	size_t len = 0, cap = 1 << 16;
	char *out = malloc(cap);
	int pfd[2], status;
	pid_t pid;
	ssize_t r;

	if (!out || pipe(pfd))
		bench_die("fio: pipe", errno);
	pid = fork();
	if (pid < 0)
		bench_die("fork", errno);
	if (pid == 0) {
		dup2(pfd[1], 1);
		close(pfd[0]);
		close(pfd[1]);
		execvp(argv[0], argv);
		fprintf(stderr, "tier_bench: cannot run %s: %s (install it:"
			" scripts/deps)\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(pfd[1]);
	while ((r = read(pfd[0], out + len, cap - len - 1)) != 0) {
		if (r < 0) {
			if (errno == EINTR)
				continue;
			bench_die("fio: read", errno);
		}
		len += (size_t)r;
		if (cap - len < 4096) {
			cap *= 2;
			out = realloc(out, cap);
			if (!out)
				bench_die("fio output", ENOMEM);
		}
	}
	out[len] = '\0';
	close(pfd[0]);
	if (waitpid(pid, &status, 0) < 0)
		bench_die("waitpid", errno);
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "%s\n", out);
		bench_die("fio failed", 0);
	}
	return out;
}

/* A number following "@name" : in @from (fio's JSON layout). */
static uint64_t json_u64(const char *from, const char *name)
{
	char key[64];
	const char *p;

	snprintf(key, sizeof(key), "\"%s\" : ", name);
	p = strstr(from, key);
	if (!p)
		bench_die("fio: unexpected output", EPROTO);
	return strtoull(p + strlen(key), NULL, 10);
}

static uint64_t fio(unsigned int op, unsigned int base)
{
	char bs[32], qd[32], size[64], nr[32], of[32], dir[PATH_MAX + 16];
	char name[PATH_MAX + 16];
	char *argv[24], *out;
	const char *p;
	uint64_t bytes, ms;
	bool write = op < PROMOTE;
	int a = 0;

	snprintf(bs, sizeof(bs), "--bs=%llu", (unsigned long long)B.fsize);
	snprintf(qd, sizeof(qd), "--iodepth=%u", B.qd);
	argv[a++] = "fio";
	argv[a++] = "--name=kvc";
	argv[a++] = "--ioengine=io_uring";
	argv[a++] = "--direct=1";
	argv[a++] = write ? "--rw=write" : "--rw=read";
	argv[a++] = bs;
	argv[a++] = qd;
	argv[a++] = "--fallocate=none";
	argv[a++] = "--output-format=json";
	if (op == SPILL_FSYNC)
		argv[a++] = "--fsync=1";
	if (base == RAW) {
		snprintf(name, sizeof(name), "--filename=%s", B.raw);
		snprintf(size, sizeof(size), "--size=%llu",
			 (unsigned long long)B.fsize * B.n);
		argv[a++] = name;
		argv[a++] = size;
	} else {
		snprintf(dir, sizeof(dir), "--directory=%s", B.files);
		snprintf(nr, sizeof(nr), "--nrfiles=%u", B.n);
		snprintf(size, sizeof(size), "--filesize=%llu",
			 (unsigned long long)B.fsize);
		/* One file open per request in flight, as a slot has. */
		snprintf(of, sizeof(of), "--openfiles=%u", B.qd);
		argv[a++] = dir;
		argv[a++] = "--filename_format=blk.$filenum";
		argv[a++] = nr;
		argv[a++] = size;
		argv[a++] = "--file_service_type=sequential";
		argv[a++] = of;
	}
	argv[a] = NULL;
	out = run(argv);
	p = strstr(out, write ? "\"write\" : {" : "\"read\" : {");
	if (!p || json_u64(out, "error"))
		bench_die("fio: no result", EPROTO);
	bytes = json_u64(p, "io_bytes");
	ms = json_u64(p, "runtime");
	if (bytes != B.fsize * B.n || !ms)
		bench_die("fio moved the wrong number of bytes", EPROTO);
	free(out);
	return ms * 1000000ULL;
}

/* ---- the runs -------------------------------------------------------- */

static double mbps(uint64_t ns)
{
	return (double)B.payload * B.n / ((double)ns / 1e9) / 1e6;
}

/* CPU time of this thread (the only one of ours that works), ns. */
static uint64_t cpu_ns(void)
{
	struct rusage ru;

	getrusage(RUSAGE_THREAD, &ru);
	return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) *
	       1000000000ULL + ((uint64_t)ru.ru_utime.tv_usec +
				(uint64_t)ru.ru_stime.tv_usec) * 1000ULL;
}

static uint64_t fio_side(unsigned int op, unsigned int b, const char *drop)
{
	/* Fresh files to write; the reads take what fio wrote. */
	if (op < PROMOTE && b == RAW)
		unlink(B.raw);
	if (op < PROMOTE && b == PERFILE)
		rm_tree(B.files, false);
	quiesce(drop);
	return fio(op, b);
}

/*
 * The three sides of one operation: ours, fio raw, fio per file; ours
 * first in even runs and last in odd ones (A B B A ...), so that what
 * comes first or writes last gains nothing over the runs: on this kind
 * of machine (a virtual disk on a shared host) it can.
 * Reads start cold: page cache, dentries and inodes dropped (promote), or
 * the page cache only (promote_warmmeta: the directories and inodes a
 * running daemon has cached, so the cost of cold path lookups shows).
 */
static void measure(unsigned int op, int run, struct kvc_tio *t,
		    double res[NOPS][NBASE][3][64])
{
	const char *drop = op == PROMOTE || op == PROMOTE_STAGED ? "3" :
			   op == PROMOTE_META ? "1" : NULL;
	uint64_t ours, cpu, base[NBASE];
	bool fio_first = run % 2;

	for (unsigned int b = 0; fio_first && b < NBASE; b++)
		base[b] = fio_side(op, b, drop);
	quiesce(drop);
	cpu = cpu_ns();
	ours = op >= PROMOTE ? ours_promote(t, op == PROMOTE_STAGED) :
			       ours_spill(t);
	cpu = cpu_ns() - cpu;
	for (unsigned int b = 0; !fio_first && b < NBASE; b++)
		base[b] = fio_side(op, b, drop);
	for (unsigned int b = 0; b < NBASE; b++) {
		double o = mbps(ours), f = mbps(base[b]);

		printf("%s_%s,%d,%.1f,%.1f,%.3f,%llu,%llu,%.2f\n",
		       op_name[op], base_name[b], run, o, f, o / f,
		       (unsigned long long)ours, (unsigned long long)base[b],
		       (double)cpu / (double)ours);
		res[op][b][0][run] = o;
		res[op][b][1][run] = f;
		res[op][b][2][run] = o / f;
	}
	fflush(stdout);
}

/*
 * The noise floor of a ratio here: fio's cold raw read against itself,
 * twice in a row. A kvcache / fio ratio is only as good as this one's
 * distance from 1.
 */
static void noise(int run, double res[NOPS][NBASE][3][64])
{
	uint64_t a, b;

	quiesce("3");
	a = fio(PROMOTE, RAW);
	quiesce("3");
	b = fio(PROMOTE, RAW);
	printf("noise_fio_read_vs_itself,%d,%.1f,%.1f,%.3f,%llu,%llu,\n",
	       run, mbps(a), mbps(b), mbps(a) / mbps(b),
	       (unsigned long long)a, (unsigned long long)b);
	res[NOISE][RAW][0][run] = mbps(a);
	res[NOISE][RAW][1][run] = mbps(b);
	res[NOISE][RAW][2][run] = mbps(a) / mbps(b);
	fflush(stdout);
}

static double median(double *v, int n)
{
	double s[64];

	memcpy(s, v, (size_t)n * sizeof(*v));
	qsort(s, (size_t)n, sizeof(*s), cmp_double);
	return s[(n - 1) / 2];
}

static double min_of(const double *v, int n)
{
	double m = v[0];

	for (int i = 1; i < n; i++)
		m = v[i] < m ? v[i] : m;
	return m;
}

static double max_of(const double *v, int n)
{
	double m = v[0];

	for (int i = 1; i < n; i++)
		m = v[i] > m ? v[i] : m;
	return m;
}

static void usage(void)
{
	fprintf(stderr, "usage: tier_bench [-r RUNS] [-d DIR] [-b PAYLOAD]"
		" [-q DEPTH] [-n BLOCKS]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static double res[NOPS][NBASE][3][64];
	const char *parent = "/var/tmp";
	struct kvc_tio *tio[2];
	struct statfs sfs;
	char probe[PATH_MAX];
	int opt, fd;

	B.runs = 5;
	B.payload = 2 << 20;
	B.qd = 8;
	B.n = 256;
	while ((opt = getopt(argc, argv, "r:d:b:q:n:")) != -1) {
		switch (opt) {
		case 'r':
			B.runs = atoi(optarg);
			break;
		case 'd':
			parent = optarg;
			break;
		case 'b':
			B.payload = strtoull(optarg, NULL, 0);
			break;
		case 'q':
			B.qd = (unsigned int)atoi(optarg);
			break;
		case 'n':
			B.n = (unsigned int)atoi(optarg);
			break;
		default:
			usage();
		}
	}
	if (optind != argc || B.runs < 1 || B.runs > 64 || !B.payload ||
	    B.payload > KVC_BF_MAX_PAYLOAD || !B.qd ||
	    B.qd > KVC_TIO_MAX_DEPTH || !B.n)
		usage();
	B.fsize = kvc_bf_file_size(B.payload);

	if (snprintf(B.work, sizeof(B.work), "%s/kvc-tier-bench.XXXXXX",
		     parent) >= (int)sizeof(B.work) || !mkdtemp(B.work))
		bench_die(parent, errno);
	snprintf(B.nsdir, sizeof(B.nsdir), "%s/ns%u", B.work, NS);
	snprintf(B.raw, sizeof(B.raw), "%s/fio.raw", B.work);
	snprintf(B.files, sizeof(B.files), "%s/fio", B.work);
	if (mkdir(B.nsdir, 0755) || mkdir(B.files, 0755))
		bench_die(B.work, errno);
	/* fio --direct=1 needs it, and tierio would silently go buffered. */
	snprintf(probe, sizeof(probe), "%s/probe", B.work);
	fd = open(probe, O_CREAT | O_WRONLY | O_DIRECT, 0644);
	if (fd < 0) {
		rm_tree(B.work, true);
		bench_die("this filesystem takes no O_DIRECT", errno);
	}
	close(fd);
	unlink(probe);

	B.keys = malloc((size_t)B.n * KVC_BF_KEY_SIZE);
	B.src = malloc(NSRC * B.payload);
	/* The pool's stand-in: whole pages, one block per read in flight
	 * at least. */
	B.dlen = B.fsize - KVC_BF_HEADER_SIZE;
	B.ndst = B.qd > NSRC ? B.qd : NSRC;
	B.dst = mmap(NULL, B.ndst * B.dlen, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!B.keys || !B.src || B.dst == MAP_FAILED)
		bench_die("memory", ENOMEM);
	for (size_t i = 0; i < (size_t)B.n * KVC_BF_KEY_SIZE / 8; i++) {
		uint64_t v = kvc_mix64(i + KVC_GOLDEN_GAMMA);

		memcpy((uint8_t *)B.keys + 8 * i, &v, 8);
	}
	/* Incompressible, like KV data, and resident before the clock. */
	for (size_t i = 0; i < NSRC * B.payload / 8; i++) {
		uint64_t v = kvc_mix64(i);

		memcpy(B.src + 8 * i, &v, 8);
	}
	memset(B.dst, 0, B.ndst * B.dlen);
	for (int f = 0; f < 2; f++) {
		struct kvc_tio_config cfg = {
			.depth = B.qd, .max_payload = B.payload,
			.fsync = f, .tag = TAG,
		};
		int ret = kvc_tio_create(&tio[f], &cfg);

		if (ret)
			bench_die("kvc_tio_create", ret);
	}

	statfs(B.work, &sfs);
	fprintf(stderr, "# %s (filesystem magic 0x%lx): %u blocks of %llu"
		" bytes payload, %llu bytes per file, queue depth %u,"
		" %d runs\n", B.work, (unsigned long)sfs.f_type, B.n,
		(unsigned long long)B.payload, (unsigned long long)B.fsize,
		B.qd, B.runs);
	/* Untimed: creates the fan-out directories (see rm_tree). */
	ours_spill(tio[0]);

	printf("metric,run,kvcache_MBps,fio_MBps,ratio,kvcache_ns,fio_ns,"
	       "kvcache_cpu\n");
	for (int run = 0; run < B.runs; run++) {
		for (unsigned int op = SPILL_NOFSYNC; op <= SPILL_FSYNC; op++) {
			rm_tree(B.nsdir, false);
			measure(op, run, tio[op == SPILL_FSYNC], res);
		}
		/* Reads the files the fsync'd spill and fio just wrote. */
		measure(PROMOTE, run, tio[0], res);
		measure(PROMOTE_META, run, tio[0], res);
		measure(PROMOTE_STAGED, run, tio[0], res);
		noise(run, res);
		fprintf(stderr, "# run %d done\n", run);
	}

	fprintf(stderr, "# medians over %d runs, payload MB/s (10^6 bytes/s;"
		" files are %.4fx that):\n", B.runs,
		(double)B.fsize / (double)B.payload);
	for (unsigned int op = 0; op < NOISE; op++)
		for (unsigned int b = 0; b < NBASE; b++)
			fprintf(stderr, "#   %-16s kvcache %7.1f  fio %-7s"
				" %7.1f  ratio %.3f%s\n", op_name[op],
				median(res[op][b][0], B.runs), base_name[b],
				median(res[op][b][1], B.runs),
				median(res[op][b][2], B.runs),
				b == RAW ? " (target >= 0.9)" : "");
	fprintf(stderr, "#   fio's read against itself: ratios %.3f to %.3f"
		" (the noise)\n", min_of(res[NOISE][RAW][2], B.runs),
		max_of(res[NOISE][RAW][2], B.runs));
	if (B.warm)
		fprintf(stderr, "# the reads were warm: run as root\n");
	kvc_tio_destroy(tio[0]);
	kvc_tio_destroy(tio[1]);
	rm_tree(B.work, true);
	free(B.keys);
	free(B.src);
	munmap(B.dst, B.ndst * B.dlen);
	return 0;
}
