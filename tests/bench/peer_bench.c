// SPDX-License-Identifier: GPL-2.0
/*
 * peer_bench: kvcache against the stores a deployment would pick instead,
 * on the same block store/load workload, side by side in one process.
 *
 * The peers:
 *   - Redis (redis-server, client hiredis): the remote store LMCache
 *     deployments commonly put their KV in. Started here on a Unix socket,
 *     in memory only (no RDB, no AOF), noeviction, as they run it.
 *   - LMDB (liblmdb): an embedded memory-mapped B+tree, the role of a
 *     local store. Opened with MDB_NOSYNC: commits write to the page cache
 *     and never wait for the disk, so it is compared as an in-memory store
 *     backed by the page cache, not as a durable one.
 *   - kvcache: the real kvcached (memfd mode, the DRAM tier only: no g3 or
 *     g4, as the peers are in memory too) through libkvcache.
 *
 * The workload, per block size (64 KiB x 1024 blocks, one layer of a
 * 16-token block of an 8B model; 256 KiB x 256; 2 MiB x 128): a
 * chain of 32-byte keys from kvcache_ns_keys() over token ids (the same
 * key bytes for every system), each block filled with its own pattern.
 * Per system and size: store every block, one call per block; load every
 * block, one call per block, into a host buffer; then the same with 64
 * blocks per call (kvcache: one kvcache_store()/kvcache_load() of 64 keys;
 * Redis: a pipeline of 64 SET or GET; LMDB: one transaction of 64 puts or
 * gets). Every load is compared with what was stored, outside the clock:
 * a system that returns a wrong byte ends the bench with exit status 1.
 *
 * Each call is timed alone (CLOCK_MONOTONIC); a phase's throughput is its
 * payload bytes over the sum of its calls' times (MB/s, 10^6 bytes/s),
 * so the checks between calls do not count. Latency percentiles are over
 * the single-block calls only (1024, 256 or 128 per phase); a batch
 * phase has 16, 4 or 2 calls, too few for a percentile, and reports
 * throughput alone.
 *
 * The machine is shared and noisy, so every figure is a ratio of two
 * measurements of the same run: in each run the systems take turns (the
 * order rotates from run to run so that drift hits all alike), after an
 * untimed warm-up run. Every run uses fresh keys; between runs each
 * system is emptied (kvcachectl flush as root, FLUSHALL, mdb_drop).
 *
 * Output on stdout: '#' comment lines describing the setup, then CSV
 * "metric,run,kvcache,peer,ratio" with metrics PEER_OP_SIZE_UNIT, e.g.
 * redis_load_256K_mbps, lmdb_store_2M_p99_us, redis_load_batch64_2M_mbps.
 * The ratio is kvcache/peer for throughput and peer/kvcache for
 * latency: above 1 always means kvcache did better. On stderr, at the
 * end, min / median / max of every metric over the runs.
 *
 * Usage: peer_bench [RUNS] [KVCACHED]   (RUNS 5, KVCACHED
 * build/helper/kvcached; kvcachectl is taken from the same directory).
 * As root the pool is flushed between runs; otherwise it is made large
 * enough to hold every run (the memfd is only populated where written).
 * Needs redis-server on $PATH.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <lmdb.h>

#include "bench.h"
#include "libkvcache.h"

#define KEY		KVCACHE_LIB_KEY_SIZE
#define BATCH		64
#define TOKENS		16		/* tokens per block, for the keys */
#define NS_ID		7
#define MAX_RUNS	100

/* The block sizes and how many blocks of each a phase moves. */
static const struct size_cfg {
	const char *name;
	size_t bytes;
	unsigned int nblocks;
} sizes[] = {
	{ "64K", 64 << 10, 1024 },
	{ "256K", 256 << 10, 256 },
	{ "2M", 2 << 20, 128 },
};

#define NSIZES	(sizeof(sizes) / sizeof(sizes[0]))

enum { SYS_KVCACHE, SYS_REDIS, SYS_LMDB, NSYS };
static const char *const sys_name[NSYS] = { "kvcache", "redis", "lmdb" };

enum { OP_STORE, OP_LOAD, OP_STORE_BATCH, OP_LOAD_BATCH, NOPS };
static const char *const op_name[NOPS] = {
	"store", "load", "store_batch64", "load_batch64",
};

/* ---- cleanup: children and the temp directory, on every exit ---------- */

static pid_t children[8];
static int nchildren;
static char tmpdir[64];

static int rm_entry(const char *path, const struct stat *st, int flag,
		    struct FTW *ftw)
{
	(void)st; (void)flag; (void)ftw;
	remove(path);
	return 0;
}

static void cleanup(void)
{
	for (int i = 0; i < nchildren; i++)
		if (children[i] > 0)
			kill(children[i], SIGTERM);
	for (int i = 0; i < nchildren; i++)
		if (children[i] > 0)
			waitpid(children[i], NULL, 0);
	nchildren = 0;
	if (tmpdir[0])
		nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	tmpdir[0] = 0;
}

/*
 * Interrupted: the same cleanup. Not async-signal-safe (nftw), so it is
 * best effort; SA_RESETHAND lets a second signal end us regardless, and
 * the daemons die with us through PR_SET_PDEATHSIG anyway.
 */
static void on_signal(int sig)
{
	cleanup();
	_exit(128 + sig);
}

static void die(const char *what, int err)
{
	bench_die(what, err);	/* exit(1): cleanup() runs from atexit */
}

/*
 * Start a daemon: its stdout goes to our stderr (stdout is the CSV), and
 * it dies with us even if we are killed without a chance to clean up.
 */
static pid_t spawn(char *const argv[], bool quiet)
{
	pid_t parent = getpid(), pid;

	pid = fork();
	if (pid < 0)
		die("fork", errno);
	if (pid == 0) {
		int fd = quiet ? open("/dev/null", O_WRONLY) : 2;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		if (fd >= 0)
			dup2(fd, 1);
		execvp(argv[0], argv);
		fprintf(stderr, "peer_bench: %s: %s\n", argv[0],
			strerror(errno));
		_exit(127);
	}
	return pid;
}

static void track(pid_t pid)
{
	if (nchildren == (int)(sizeof(children) / sizeof(children[0])))
		die("too many children", EINVAL);
	children[nchildren++] = pid;
}

/* Run a short command to completion; its exit status. */
static int run_cmd(char *const argv[])
{
	pid_t pid = spawn(argv, true);
	int st;

	if (waitpid(pid, &st, 0) < 0)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ---- kvcache ------------------------------------------------------------- */

struct kvc_side {
	struct kvcache *c;
	struct kvcache_namespace *ns;
	char sock[108];
};

static struct kvc_side kvc[NSIZES];
static char kvcachectl[512];
static bool kvc_flush;

static size_t pow2_at_least(size_t n)
{
	size_t p = 4096;

	while (p < n)
		p <<= 1;
	return p;
}

/*
 * One daemon per block size, so that each pool's block is the payload
 * rounded up to a power of two, as a deployment would size it. The
 * namespace is written into the state directory before the start (what
 * kvcached reloads at every start), which works with or without root.
 */
static void kvc_start(const char *bin, int s, int runs)
{
	const struct size_cfg *sz = &sizes[s];
	size_t bs = pow2_at_least(sz->bytes);
	/* Both phases' blocks; all runs' if nothing flushes them. */
	unsigned long long need = 2ULL * sz->nblocks * bs;
	unsigned long long pool = need * (kvc_flush ? 2 : 2 * (runs + 1));
	char conf[256], state[256], path[300];
	struct kvcache_options o = { 0 };
	struct kvcache_identity id = {
		.model = "peer-bench", .weights_revision = "1",
		.tokenizer = "ids", .kv_layout = "blocks", .kv_dtype = "u8",
		.lora = "", .tokens_per_block = TOKENS,
		.tp_size = 1, .pp_size = 1,
	};
	int ret = -ENOENT;
	FILE *f;

	snprintf(conf, sizeof(conf), "%s/kvcached-%s.conf", tmpdir, sz->name);
	snprintf(state, sizeof(state), "%s/state-%s", tmpdir, sz->name);
	snprintf(kvc[s].sock, sizeof(kvc[s].sock), "%s/kvcached-%s.sock",
		 tmpdir, sz->name);
	f = fopen(conf, "w");
	if (!f)
		die(conf, errno);
	fprintf(f, "[daemon]\nmetrics = off\nlog_level = warn\n"
		   "[pool]\nmemfd_size = %llu\nblock_size = %zu\n"
		   "hugetlb = no\nmlock = yes\n[eviction]\npool_admit = 1\n",
		pool, bs);
	if (fclose(f))
		die(conf, errno);
	if (mkdir(state, 0700))
		die(state, errno);
	snprintf(path, sizeof(path), "%s/namespaces", state);
	f = fopen(path, "w");
	if (!f)
		die(path, errno);
	fprintf(f, "%u %u %u %o\n", NS_ID, (unsigned int)geteuid(),
		(unsigned int)getegid(), 0700);
	if (fclose(f))
		die(path, errno);

	char *argv[] = {
		(char *)bin, "--config", conf, "--mode", "memfd", "--socket",
		kvc[s].sock, "--state-dir", state, NULL,
	};
	track(spawn(argv, false));

	o.socket = kvc[s].sock;
	for (int i = 0; i < 200 && ret; i++) {
		ret = kvcache_open(&o, &kvc[s].c);
		if (ret == -ENOENT || ret == -ECONNREFUSED)
			usleep(50000);
		else if (ret)
			break;
	}
	if (ret)
		die("connecting to kvcached", ret);
	ret = kvcache_ns_open(kvc[s].c, NS_ID, &id, sz->bytes, &kvc[s].ns);
	if (ret)
		die("kvcache_ns_open", ret);
}

static void kvc_store(int s, const uint8_t *parent, const uint8_t *keys,
		      unsigned int n, const uint8_t *src)
{
	int ret = kvcache_store(kvc[s].ns, parent, keys, n, src,
				sizes[s].bytes);

	if (ret != (int)n)
		die("kvcache_store stored fewer blocks than asked",
		    ret < 0 ? ret : EIO);
}

static void kvc_load(int s, const uint8_t *keys, unsigned int n,
		     uint8_t *dst)
{
	int ret = kvcache_load(kvc[s].ns, keys, n, dst, sizes[s].bytes);

	if (ret != (int)n)
		die("kvcache_load found fewer blocks than stored",
		    ret < 0 ? ret : ENOENT);
}

static void kvc_reset(int s)
{
	char *argv[] = {
		kvcachectl, "-S", kvc[s].sock, "flush", "all", NULL,
	};

	if (kvc_flush && run_cmd(argv))
		die("kvcachectl flush", EIO);
}

/* ---- Redis --------------------------------------------------------------- */

static redisContext *rds;

static void rds_start(void)
{
	char sock[128], log[128], line[512];
	pid_t pid;
	FILE *f;

	snprintf(sock, sizeof(sock), "%s/redis.sock", tmpdir);
	snprintf(log, sizeof(log), "%s/redis.log", tmpdir);

	char *argv[] = {
		"redis-server", "--port", "0", "--unixsocket", sock,
		"--unixsocketperm", "700", "--save", "", "--appendonly", "no",
		/* Flushed after each size: 2 phases of 256 MiB at most. */
		"--maxmemory", "4gb", "--maxmemory-policy", "noeviction",
		"--dir", tmpdir, "--loglevel", "warning", "--logfile", log,
		"--daemonize", "no", NULL,
	};
	/* Its banner goes to stdout before the logfile is set: dropped. */
	pid = spawn(argv, true);
	track(pid);
	for (int i = 0; i < 200; i++) {
		rds = redisConnectUnix(sock);
		if (rds && !rds->err)
			return;
		if (rds)
			redisFree(rds);
		rds = NULL;
		if (waitpid(pid, NULL, WNOHANG) == pid)
			break;
		usleep(50000);
	}
	/* The log is removed with the directory: show why it failed. */
	f = fopen(log, "r");
	while (f && fgets(line, sizeof(line), f))
		fputs(line, stderr);
	if (f)
		fclose(f);
	die("connecting to redis-server", ECONNREFUSED);
}

static void rds_check(redisReply *r, const char *what)
{
	if (!r)
		die(what, rds->err == REDIS_ERR_IO ? errno : EIO);
	if (r->type == REDIS_REPLY_ERROR) {
		fprintf(stderr, "peer_bench: %s: %s\n", what, r->str);
		exit(1);
	}
}

static void rds_store(int s, const uint8_t *keys, unsigned int n,
		      const uint8_t *src)
{
	size_t len[3] = { 3, KEY, sizes[s].bytes };
	const char *argv[3] = { "SET" };
	redisReply *r;

	for (unsigned int i = 0; i < n; i++) {
		argv[1] = (const char *)keys + i * KEY;
		argv[2] = (const char *)src + i * sizes[s].bytes;
		if (redisAppendCommandArgv(rds, 3, argv, len))
			die("redis SET", ENOMEM);
	}
	for (unsigned int i = 0; i < n; i++) {
		if (redisGetReply(rds, (void **)&r))
			r = NULL;
		rds_check(r, "redis SET");
		freeReplyObject(r);
	}
}

static void rds_load(int s, const uint8_t *keys, unsigned int n,
		     uint8_t *dst)
{
	size_t len[2] = { 3, KEY };
	const char *argv[2] = { "GET" };
	redisReply *r;

	for (unsigned int i = 0; i < n; i++) {
		argv[1] = (const char *)keys + i * KEY;
		if (redisAppendCommandArgv(rds, 2, argv, len))
			die("redis GET", ENOMEM);
	}
	for (unsigned int i = 0; i < n; i++) {
		if (redisGetReply(rds, (void **)&r))
			r = NULL;
		rds_check(r, "redis GET");
		if (r->type != REDIS_REPLY_STRING || r->len != sizes[s].bytes)
			die("redis GET: no block of the stored size", ENOENT);
		/* Into the caller's buffer, as a load must end. */
		memcpy(dst + i * sizes[s].bytes, r->str, sizes[s].bytes);
		freeReplyObject(r);
	}
}

static void rds_reset(int s)
{
	redisReply *r = redisCommand(rds, "FLUSHALL SYNC");

	(void)s;
	rds_check(r, "redis FLUSHALL");
	freeReplyObject(r);
}

/* ---- LMDB ---------------------------------------------------------------- */

struct lmdb_side {
	MDB_env *env;
	MDB_dbi dbi;
	MDB_txn *rtxn;		/* a read transaction, reset between loads */
};

static struct lmdb_side ldb[NSIZES];

static void ldb_die(const char *what, int rc)
{
	fprintf(stderr, "peer_bench: %s: %s\n", what, mdb_strerror(rc));
	exit(1);
}

static void ldb_open(int s)
{
	char dir[256];
	MDB_txn *txn;
	int rc;

	snprintf(dir, sizeof(dir), "%s/lmdb-%s", tmpdir, sizes[s].name);
	if (mkdir(dir, 0700))
		die(dir, errno);
	rc = mdb_env_create(&ldb[s].env);
	if (!rc)	/* address space only: the file grows as it is used */
		rc = mdb_env_set_mapsize(ldb[s].env, 8ULL << 30);
	if (!rc)
		rc = mdb_env_open(ldb[s].env, dir, MDB_NOSYNC, 0600);
	if (!rc)
		rc = mdb_txn_begin(ldb[s].env, NULL, 0, &txn);
	if (!rc)
		rc = mdb_dbi_open(txn, NULL, 0, &ldb[s].dbi);
	if (!rc)
		rc = mdb_txn_commit(txn);
	if (!rc)
		rc = mdb_txn_begin(ldb[s].env, NULL, MDB_RDONLY, &ldb[s].rtxn);
	if (rc)
		ldb_die(dir, rc);
	mdb_txn_reset(ldb[s].rtxn);
}

static void ldb_store(int s, const uint8_t *keys, unsigned int n,
		      const uint8_t *src)
{
	MDB_txn *txn;
	int rc = mdb_txn_begin(ldb[s].env, NULL, 0, &txn);

	for (unsigned int i = 0; !rc && i < n; i++) {
		MDB_val k = { KEY, (void *)(keys + i * KEY) };
		MDB_val v = {
			sizes[s].bytes, (void *)(src + i * sizes[s].bytes),
		};

		rc = mdb_put(txn, ldb[s].dbi, &k, &v, 0);
	}
	if (!rc)
		rc = mdb_txn_commit(txn);
	else
		mdb_txn_abort(txn);
	if (rc)
		ldb_die("lmdb put", rc);
}

static void ldb_load(int s, const uint8_t *keys, unsigned int n,
		     uint8_t *dst)
{
	int rc = mdb_txn_renew(ldb[s].rtxn);

	for (unsigned int i = 0; !rc && i < n; i++) {
		MDB_val k = { KEY, (void *)(keys + i * KEY) }, v;

		rc = mdb_get(ldb[s].rtxn, ldb[s].dbi, &k, &v);
		if (!rc && v.mv_size != sizes[s].bytes)
			rc = MDB_CORRUPTED;
		/* The value lives in the map only while the txn is open. */
		if (!rc)
			memcpy(dst + i * sizes[s].bytes, v.mv_data,
			       sizes[s].bytes);
	}
	mdb_txn_reset(ldb[s].rtxn);
	if (rc)
		ldb_die("lmdb get", rc);
}

static void ldb_reset(int s)
{
	MDB_txn *txn;
	int rc = mdb_txn_begin(ldb[s].env, NULL, 0, &txn);

	if (!rc)
		rc = mdb_drop(txn, ldb[s].dbi, 0);
	if (!rc)
		rc = mdb_txn_commit(txn);
	if (rc)
		ldb_die("lmdb drop", rc);
}

/* ---- the workload ------------------------------------------------------- */

static void sys_store(int sys, int s, const uint8_t *parent,
		      const uint8_t *keys, unsigned int n, const uint8_t *src)
{
	if (sys == SYS_KVCACHE)
		kvc_store(s, parent, keys, n, src);
	else if (sys == SYS_REDIS)
		rds_store(s, keys, n, src);
	else
		ldb_store(s, keys, n, src);
}

static void sys_load(int sys, int s, const uint8_t *keys, unsigned int n,
		     uint8_t *dst)
{
	if (sys == SYS_KVCACHE)
		kvc_load(s, keys, n, dst);
	else if (sys == SYS_REDIS)
		rds_load(s, keys, n, dst);
	else
		ldb_load(s, keys, n, dst);
}

static void sys_reset(int sys, int s)
{
	if (sys == SYS_KVCACHE)
		kvc_reset(s);
	else if (sys == SYS_REDIS)
		rds_reset(s);
	else
		ldb_reset(s);
}

/* What one phase measured. */
struct phase {
	double mbps, p50_us, p99_us;
};

/* results[run][size][system][op] */
static struct phase results[MAX_RUNS + 1][NSIZES][NSYS][NOPS];

static uint8_t *src_blocks[NSIZES];	/* the patterns, block after block */
static uint8_t *dst_buf;		/* loads land here: BATCH blocks */
static uint64_t lat[1024];

/* Each block its own bytes, so a block returned for another key fails. */
static void fill_pattern(int s)
{
	size_t words = sizes[s].bytes / 8 * sizes[s].nblocks;
	uint64_t *w;

	src_blocks[s] = malloc(words * 8);
	if (!src_blocks[s])
		die("malloc", ENOMEM);
	w = (uint64_t *)src_blocks[s];
	for (size_t i = 0; i < words; i++)
		w[i] = kvc_mix64(((uint64_t)(s + 1) << 56) ^ i);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Nearest rank: the smallest value at or above fraction q of them. */
static double pct_us(uint64_t *v, unsigned int n, double q)
{
	unsigned int r = (unsigned int)(q * n + 0.999999);

	return (double)v[r ? r - 1 : 0] / 1e3;
}

/* The keys of run r's chain for size s, variant v (single or batched). */
static void make_keys(int s, int r, int v, uint8_t *keys)
{
	unsigned int n = sizes[s].nblocks;
	uint32_t *tok = malloc((size_t)n * TOKENS * sizeof(*tok));

	if (!tok)
		die("malloc", ENOMEM);
	for (size_t t = 0; t < (size_t)n * TOKENS; t++)
		tok[t] = (uint32_t)kvc_mix64(((uint64_t)r << 48) ^
					     ((uint64_t)s << 40) ^
					     ((uint64_t)v << 32) ^ t);
	if (kvcache_ns_keys(kvc[s].ns, tok, (size_t)n * TOKENS, keys, n) != n)
		die("kvcache_ns_keys", EINVAL);
	free(tok);
}

static void check_block(int sys, int s, unsigned int blk, const uint8_t *p)
{
	size_t bytes = sizes[s].bytes;

	if (memcmp(p, src_blocks[s] + (size_t)blk * bytes, bytes)) {
		fprintf(stderr, "peer_bench: %s returned wrong bytes for "
			"%s block %u\n", sys_name[sys], sizes[s].name, blk);
		exit(1);
	}
}

/*
 * One system, one size: the four phases. per is the number of blocks a
 * call moves (1 or BATCH); the keys are a fresh chain per variant.
 */
static void run_phases(int sys, int s, int r, struct phase *out)
{
	unsigned int n = sizes[s].nblocks;
	size_t bytes = sizes[s].bytes;
	uint8_t keys[2][1024 * KEY];

	for (int v = 0; v < 2; v++) {
		unsigned int per = v ? BATCH : 1, calls = n / per;
		struct phase *st = &out[v ? OP_STORE_BATCH : OP_STORE];
		struct phase *ld = &out[v ? OP_LOAD_BATCH : OP_LOAD];
		uint64_t total = 0;

		make_keys(s, r, v, keys[v]);
		for (unsigned int i = 0; i < calls; i++) {
			unsigned int b = i * per;
			const uint8_t *parent = b ? keys[v] + (b - 1) * KEY :
						    NULL;
			uint64_t t0 = now_ns();

			sys_store(sys, s, parent, keys[v] + b * KEY, per,
				  src_blocks[s] + b * bytes);
			lat[i] = now_ns() - t0;
			total += lat[i];
		}
		st->mbps = (double)n * bytes / (double)total * 1e3;
		qsort(lat, calls, sizeof(lat[0]), cmp_u64);
		st->p50_us = pct_us(lat, calls, 0.50);
		st->p99_us = pct_us(lat, calls, 0.99);

		total = 0;
		for (unsigned int i = 0; i < calls; i++) {
			unsigned int b = i * per;
			uint64_t t0;

			/* Stale bytes from the last call must not pass. */
			memset(dst_buf, 0xa5, per * bytes);
			t0 = now_ns();
			sys_load(sys, s, keys[v] + b * KEY, per, dst_buf);
			lat[i] = now_ns() - t0;
			total += lat[i];
			for (unsigned int j = 0; j < per; j++)
				check_block(sys, s, b + j,
					    dst_buf + j * bytes);
		}
		ld->mbps = (double)n * bytes / (double)total * 1e3;
		qsort(lat, calls, sizeof(lat[0]), cmp_u64);
		ld->p50_us = pct_us(lat, calls, 0.50);
		ld->p99_us = pct_us(lat, calls, 0.99);
	}
	sys_reset(sys, s);
}

/* ---- output ------------------------------------------------------------- */

/* One metric's kvcache and peer values over the runs, for the summary. */
struct row {
	char name[48];
	bool latency;
	double kv[MAX_RUNS], peer[MAX_RUNS], ratio[MAX_RUNS];
};

static struct row rows[NSIZES * 2 * NOPS * 3];
static int nrows;

static void emit(int r, const char *name, bool latency, double kv,
		 double peer)
{
	/* Above 1: kvcache better (more MB/s, or fewer microseconds). */
	double ratio = latency ? peer / kv : kv / peer;
	struct row *w = NULL;

	printf("%s,%d,%.1f,%.1f,%.3f\n", name, r, kv, peer, ratio);
	for (int i = 0; i < nrows && !w; i++)
		if (!strcmp(rows[i].name, name))
			w = &rows[i];
	if (!w) {
		w = &rows[nrows++];
		snprintf(w->name, sizeof(w->name), "%s", name);
		w->latency = latency;
	}
	w->kv[r - 1] = kv;
	w->peer[r - 1] = peer;
	w->ratio[r - 1] = ratio;
}

static void emit_run(int r)
{
	char name[48];

	for (size_t s = 0; s < NSIZES; s++)
		for (int p = SYS_REDIS; p < NSYS; p++)
			for (int op = 0; op < NOPS; op++) {
				const struct phase *k =
					&results[r][s][SYS_KVCACHE][op];
				const struct phase *q = &results[r][s][p][op];

				snprintf(name, sizeof(name), "%s_%s_%s_mbps",
					 sys_name[p], op_name[op],
					 sizes[s].name);
				emit(r, name, false, k->mbps, q->mbps);
				if (op == OP_STORE_BATCH || op == OP_LOAD_BATCH)
					continue;
				snprintf(name, sizeof(name), "%s_%s_%s_p50_us",
					 sys_name[p], op_name[op],
					 sizes[s].name);
				emit(r, name, true, k->p50_us, q->p50_us);
				snprintf(name, sizeof(name), "%s_%s_%s_p99_us",
					 sys_name[p], op_name[op],
					 sizes[s].name);
				emit(r, name, true, k->p99_us, q->p99_us);
			}
	fflush(stdout);
}

static void med3(double *v, int n, double out[3])
{
	double t[MAX_RUNS];

	memcpy(t, v, n * sizeof(*t));
	qsort(t, n, sizeof(*t), cmp_double);
	out[0] = t[0];
	out[1] = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
	out[2] = t[n - 1];
}

static void summary(int runs)
{
	fprintf(stderr, "\n%-30s %-22s %-22s %s\n", "min / median / max",
		"kvcache", "peer", "ratio (>1: kvcache better)");
	for (int i = 0; i < nrows; i++) {
		double k[3], p[3], q[3];

		med3(rows[i].kv, runs, k);
		med3(rows[i].peer, runs, p);
		med3(rows[i].ratio, runs, q);
		fprintf(stderr, "%-30s %.0f/%.0f/%.0f  %.0f/%.0f/%.0f  "
			"%.3f / %.3f / %.3f\n", rows[i].name, k[0], k[1], k[2],
			p[0], p[1], p[2], q[0], q[1], q[2]);
	}
}

static void header(int runs, const char *bin)
{
	printf("# peer_bench: kvcache (kvcached %s, memfd mode, DRAM tier "
	       "only, libkvcache) against\n"
	       "#   redis: redis-server on a Unix socket, in memory (no "
	       "RDB/AOF, noeviction), hiredis client\n"
	       "#   lmdb: liblmdb, MDB_NOSYNC in %s: commits go to the page "
	       "cache and never wait for the disk,\n"
	       "#         i.e. a local store held by the page cache, not a "
	       "durable one\n", bin, tmpdir);
	for (size_t s = 0; s < NSIZES; s++)
		printf("# %s: %u blocks of %zu bytes, 32-byte keys; single "
		       "calls and %d-block calls (kvcache batch, redis "
		       "pipeline, lmdb txn)\n", sizes[s].name,
		       sizes[s].nblocks, sizes[s].bytes, BATCH);
	printf("# %d runs after one untimed warm-up; systems take turns in "
	       "each run, order rotating; kvcache pool %s between runs\n"
	       "# mbps: payload 10^6 bytes/s over the calls' summed time; "
	       "p50/p99_us: single-block calls\n"
	       "# ratio: kvcache/peer for mbps, peer/kvcache for latency: "
	       "> 1 means kvcache is better\n", runs,
	       kvc_flush ? "flushed" : "sized for every run, not flushed");
	printf("metric,run,kvcache,peer,ratio\n");
	fflush(stdout);
}

int main(int argc, char **argv)
{
	int runs = argc > 1 ? atoi(argv[1]) : 5;
	const char *bin = argc > 2 ? argv[2] : "build/helper/kvcached";
	struct sigaction sa = { .sa_handler = on_signal,
				.sa_flags = SA_RESETHAND };
	const char *slash = strrchr(bin, '/');
	size_t maxbytes = 0;

	if (runs < 1 || runs > MAX_RUNS || argc > 3) {
		fprintf(stderr, "usage: peer_bench [RUNS] [KVCACHED]\n");
		return 2;
	}
	snprintf(kvcachectl, sizeof(kvcachectl), "%.*skvcachectl",
		 slash ? (int)(slash - bin + 1) : 0, bin);
	kvc_flush = geteuid() == 0 && access(kvcachectl, X_OK) == 0;

	snprintf(tmpdir, sizeof(tmpdir), "/var/tmp/kvcache-peerbench.XXXXXX");
	if (!mkdtemp(tmpdir)) {
		tmpdir[0] = 0;
		die("mkdtemp in /var/tmp", errno);
	}
	atexit(cleanup);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGPIPE, &sa, NULL);	/* stdout or stderr closed early */

	rds_start();
	for (size_t s = 0; s < NSIZES; s++) {
		kvc_start(bin, (int)s, runs);
		ldb_open((int)s);
		fill_pattern((int)s);
		if (sizes[s].bytes * BATCH > maxbytes)
			maxbytes = sizes[s].bytes * BATCH;
	}
	dst_buf = malloc(maxbytes);
	if (!dst_buf)
		die("malloc", ENOMEM);

	header(runs, bin);
	/* Run 0 warms every path up and is not reported. */
	for (int r = 0; r <= runs; r++) {
		for (size_t s = 0; s < NSIZES; s++)
			for (int i = 0; i < NSYS; i++) {
				int sys = (i + r) % NSYS;

				run_phases(sys, (int)s, r, results[r][s][sys]);
			}
		if (r)
			emit_run(r);
	}
	summary(runs);

	for (size_t s = 0; s < NSIZES; s++) {
		kvcache_close(kvc[s].c);
		mdb_txn_abort(ldb[s].rtxn);
		mdb_env_close(ldb[s].env);
		free(src_blocks[s]);
	}
	redisFree(rds);
	free(dst_buf);
	return 0;
}
