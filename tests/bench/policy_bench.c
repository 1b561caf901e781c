// SPDX-License-Identifier: GPL-2.0
/*
 * policy_bench: hit rate against capacity for each eviction policy on
 * request traces (trace.h), next to Belady's bound (policy_sim.h).
 *
 *   policy_bench [-p lru,s3fifo,...] [-c 5,10,20] [-d|-n] [-o CSV]
 *                [-a CSV] TRACE...
 *
 * A policy is a name of policy.h, or "s3fifo:PCT" for S3-FIFO with its
 * small queue at PCT percent ([eviction] s3fifo_small in the daemon).
 * For every trace, capacity (percent of the trace's distinct blocks) and
 * policy, the trace is replayed two ways: through the offline simulator,
 * and, unless -n, through a real kvcached (memfd mode, one 4 KiB pool
 * block per trace block, started for that run with the policy and
 * capacity) by a client that sends what an engine would: per request a
 * LOOKUP of the chain, then ALLOC and STORE of what missed. The two must
 * match request by request: the bench fails at the first request where
 * they do not, and says which. -d replays through the daemon only for
 * the first capacity (the agreement check; faster), -n never.
 *
 * Output: one table row per (trace, capacity, policy) on stdout, the
 * same as CSV into -o.
 *
 * -a adds g3 below the pool (simulated only: its I/O is asynchronous,
 * so no replay could be compared block for block): the pool at the
 * first capacity with the first policy, g3 four times as large, under
 * each g3 policy of -p and admission on the 1st, 2nd and 3rd access.
 * It prints the hits g3 adds and the blocks written to it for them,
 * and writes the rows to the CSV -a names. $KVC_KVCACHED names the daemon, else
 * ../helper/kvcached beside this binary.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "bench.h"
#include "client.h"
#include "policy_sim.h"
#include "proto.h"

#define BS		4096u		/* pool block: only the count matters */
#define HIGH_PCT	1		/* [pool] high_watermark */
#define MAX_POLICIES	8
#define MAX_CAPS	16

static char kvcd_bin[PATH_MAX];
static char dir[64];
static pid_t kvcd_pid = -1;

static void stop_daemon(void)
{
	char cmd[128];
	int st;

	if (kvcd_pid > 0) {
		kill(kvcd_pid, SIGTERM);
		waitpid(kvcd_pid, &st, 0);
		kvcd_pid = -1;
	}
	if (dir[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd))
			fprintf(stderr, "policy_bench: could not remove %s\n",
				dir);
		dir[0] = '\0';
	}
}

static void die(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "policy_bench: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	stop_daemon();
	exit(1);
}

static void find_daemon(void)
{
	const char *env = getenv("KVC_KVCACHED");
	char self[PATH_MAX - 32], *slash;
	ssize_t n;

	if (env && *env) {
		snprintf(kvcd_bin, sizeof(kvcd_bin), "%s", env);
		return;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n < 0)
		die("/proc/self/exe: %s", strerror(errno));
	self[n] = '\0';
	slash = strrchr(self, '/');
	*slash = '\0';
	snprintf(kvcd_bin, sizeof(kvcd_bin), "%s/../helper/kvcached", self);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (!f || fputs(text, f) < 0 || fclose(f))
		die("%s: %s", path, strerror(errno));
}

/* "s3fifo:25" -> "s3fifo" in name, 25 in *small; else 0. */
static void policy_of(const char *arg, char *name, size_t len,
		      unsigned int *small)
{
	const char *colon = strchr(arg, ':');
	char *end;

	size_t n = colon ? (size_t)(colon - arg) : strlen(arg);

	*small = 0;
	if (n >= len)
		die("%s: no such policy", arg);
	memcpy(name, arg, n);
	name[n] = '\0';
	if (!colon)
		return;
	*small = (unsigned int)strtoul(colon + 1, &end, 10);
	if (*end || !*small || *small > 50)
		die("%s: the small queue's share is 1..50 percent", arg);
}

/* kvcached for one run, memfd mode, pool of cap blocks; its socket. */
static void start_daemon(const char *arg, uint32_t cap, char *sock,
			 size_t len)
{
	char policy[32];
	unsigned int small;
	const char *tmp = getenv("TMPDIR");
	char conf[128], state[128], path[160], text[512];

	if (len > 100)
		len = 100;	/* sun_path */
	policy_of(arg, policy, sizeof(policy), &small);
	pid_t parent = getpid();

	snprintf(dir, sizeof(dir), "%.30s/kvcache-policy.XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		dir[0] = '\0';
		die("mkdtemp: %s", strerror(errno));
	}
	snprintf(conf, sizeof(conf), "%s/kvcached.conf", dir);
	snprintf(state, sizeof(state), "%s/state", dir);
	snprintf(sock, len, "%s/kvcached.sock", dir);
	/*
	 * Eviction only when an ALLOC does not fit (low_watermark 0), as
	 * the simulator models it: no timer decides when a pass runs.
	 */
	snprintf(text, sizeof(text),
		 "[daemon]\nmetrics = off\nlog_level = warn\n"
		 "[pool]\nblock_size = %u\nmemfd_size = %llu\n"
		 "low_watermark = 0\nhigh_watermark = %d\n"
		 "[eviction]\npolicy = %s\ns3fifo_small = %u\n", BS,
		 (unsigned long long)cap * BS, HIGH_PCT, policy,
		 small ? small : 10);
	write_file(conf, text);
	if (mkdir(state, 0700))
		die("%s: %s", state, strerror(errno));
	snprintf(path, sizeof(path), "%s/namespaces", state);
	snprintf(text, sizeof(text), "%u %u %u %o\n", KVC_PSIM_NS,
		 (unsigned int)geteuid(), (unsigned int)getegid(), 0700);
	write_file(path, text);
	kvcd_pid = fork();
	if (kvcd_pid < 0)
		die("fork: %s", strerror(errno));
	if (!kvcd_pid) {
		char log[160];
		int fd;

		snprintf(log, sizeof(log), "%s/kvcached.log", dir);
		fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execl(kvcd_bin, "kvcached", "--config", conf, "--mode", "memfd",
		      "--socket", sock, "--state-dir", state, (char *)NULL);
		dprintf(2, "exec %s: %s\n", kvcd_bin, strerror(errno));
		_exit(127);
	}
	for (uint64_t end = now_ns() + 30000000000ULL;;) {
		struct sockaddr_un a = { .sun_family = AF_UNIX };
		int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
		int st;

		snprintf(a.sun_path, sizeof(a.sun_path), "%.100s", sock);
		if (fd >= 0 && !connect(fd, (struct sockaddr *)&a, sizeof(a))) {
			close(fd);
			return;
		}
		if (fd >= 0)
			close(fd);
		if (waitpid(kvcd_pid, &st, WNOHANG) == kvcd_pid) {
			kvcd_pid = -1;
			die("kvcached exited (status %#x) before listening; "
			    "its log: %s/kvcached.log", st, dir);
		}
		if (now_ns() > end)
			die("kvcached did not listen within 30 s");
		usleep(10000);
	}
}

static uint8_t req[KVC_PROTO_MSG_MAX];

/* One request; the reply in *m. Dies on a transport error. */
static int call(struct kvc_client *c, int len, struct kvc_msg *m,
		const char *what)
{
	int ret;

	if (len < 0)
		die("encoding %s: %s", what, strerror(-len));
	ret = kvc_client_call(c, req, (size_t)len, m);
	if (ret && ret != -ENOSPC)
		die("%s: %s", what, strerror(-ret));
	return ret;
}

/*
 * The trace through kvcached, as an engine would send it; per request
 * the blocks its LOOKUP matched into r->matched.
 */
static void replay(const struct kvc_trace *t, const char *policy,
		   uint32_t cap, struct kvc_psim_result *r)
{
	static struct kvc_store_entry se[KVC_PROTO_MAX_STORE];
	static uint8_t keys[KVC_PROTO_MAX_BATCH][32];
	uint32_t batch = kvc_psim_batch(cap);
	struct kvc_client c;
	struct kvc_msg m;
	char sock[128];
	int ret;

	start_daemon(policy, cap, sock, sizeof(sock));
	ret = kvc_client_open(&c, sock);
	if (ret)
		die("connecting to kvcached: %s", strerror(-ret));
	if (c.hello.block_size != BS || c.hello.nr_blocks != cap)
		die("kvcached has %" PRIu64 " blocks of %" PRIu64 ", not %"
		    PRIu32 " of %u", (uint64_t)c.hello.nr_blocks,
		    (uint64_t)c.hello.block_size,
		    cap, BS);
	for (size_t i = 0; i < t->nr_reqs; i++) {
		const struct kvc_trace_req *q = &t->req[i];
		uint32_t n;

		for (uint32_t k = 0; k < q->n; k++)
			kvc_psim_key(t->blocks[q->off + k], keys[k]);
		call(&c, kvc_proto_encode_lookup(req, sizeof(req),
						 kvc_client_next_seq(&c),
						 KVC_PSIM_NS,
						 KVC_PROTO_TIERS_ALL,
						 &keys[0][0], q->n),
		     &m, "LOOKUP");
		n = m.lookup_reply.matched;
		kvc_psim_count(t, i, n, r);
		for (uint32_t k = n; k < q->n;) {
			uint32_t cnt = q->n - k < batch ? q->n - k : batch;
			bool stored = true;

			if (call(&c, kvc_proto_encode_alloc(req, sizeof(req),
						kvc_client_next_seq(&c),
						KVC_PSIM_NS, cnt), &m,
				 "ALLOC")) {
				r->refused++;
				break;
			}
			for (uint32_t j = 0; j < cnt; j++) {
				struct kvc_store_entry *e = &se[j];

				memset(e, 0, sizeof(*e));
				memcpy(e->key, keys[k + j], 32);
				if (k + j)
					memcpy(e->parent, keys[k + j - 1], 32);
				else
					e->flags = KVC_PROTO_STORE_FIRST;
				e->flags |= KVC_PROTO_STORE_SEAL;
				e->payload_len = BS;
				kvc_proto_alloc_handle(&m.alloc_reply, j,
						       &e->handle);
			}
			call(&c, kvc_proto_encode_store(req, sizeof(req),
							kvc_client_next_seq(&c),
							KVC_PSIM_NS, se, cnt),
			     &m, "STORE");
			for (uint32_t j = 0; j < cnt; j++) {
				if (kvc_proto_status(&m.store_reply, j)) {
					r->refused++;
					stored = false;
				}
			}
			k += cnt;
			if (!stored)
				break;
		}
	}
	kvc_client_close(&c);
	stop_daemon();
}

static double pct(uint64_t a, uint64_t b)
{
	return b ? 100.0 * (double)a / (double)b : 0.0;
}

static void row(FILE *csv, const char *trace, double capfrac, uint32_t cap,
		const char *policy, const struct kvc_psim_result *r,
		const struct kvc_psim_result *opt, const char *daemon)
{
	double bh = pct(r->hit_blocks, r->blocks);
	double th = pct(r->hit_tokens, r->tokens);
	double ob = pct(opt->hit_blocks, opt->blocks);

	printf("%-24s %5.1f %8" PRIu32 " %-8s %7.2f %7.2f %6.3f %10" PRIu64
	       " %s\n", trace, capfrac, cap, policy, bh, th,
	       ob > 0 ? bh / ob : 1.0, r->evictions, daemon);
	if (csv)
		fprintf(csv, "%s,%.1f,%" PRIu32 ",%s,%.4f,%.4f,%.4f,%" PRIu64
			",%s\n", trace, capfrac, cap, policy, bh, th,
			ob > 0 ? bh / ob : 1.0, r->evictions, daemon);
}

static void admission(FILE *csv, const char *name, const struct kvc_trace *t,
		      const char *pool_policy, uint32_t cap, char **pols,
		      int npol)
{
	struct kvc_psim_opts po = {
		.capacity = cap, .high_pct = HIGH_PCT,
	};
	struct kvc_psim_result base = { 0 };
	char pname[32], g3name[32];

	policy_of(pool_policy, pname, sizeof(pname), &po.small_pct);
	po.policy = pname;
	if (kvc_psim_run(t, &po, &base))
		die("simulating %s", pool_policy);
	printf("\n%-24s %8s %8s %-8s %5s %7s %9s %9s %9s\n", "trace", "pool",
	       "g3", "g3pol", "admit", "blk%", "gained", "written",
	       "w/gained");
	for (int pi = 0; pi < npol; pi++) {
		for (unsigned int k = 1; k <= 3; k++) {
			struct kvc_psim_tier_opts o = {
				.pool = po, .g3_policy = g3name,
				.g3_capacity = 4 * cap, .admit = k,
			};
			unsigned int unused;
			struct kvc_psim_tier_result r = { 0 };
			int64_t gained;
			double per;

			/* A tier's s3fifo keeps the default share. */
			policy_of(pols[pi], g3name, sizeof(g3name), &unused);
			if (kvc_psim_tiers(t, &o, &r))
				die("simulating g3 under %s", pool_policy);
			gained = (int64_t)r.r.hit_blocks -
				 (int64_t)base.hit_blocks;
			per = gained > 0 ? (double)r.written / (double)gained :
			      0;
			printf("%-24s %8" PRIu32 " %8" PRIu32 " %-8s %5u %7.2f "
			       "%9" PRId64 " %9" PRIu64 " %9.3f\n", name, cap,
			       4 * cap, pols[pi], k,
			       pct(r.r.hit_blocks, r.r.blocks), gained,
			       r.written, per);
			if (csv)
				fprintf(csv, "%s,%s,%" PRIu32 ",%" PRIu32
					",%s,%u,%.4f,%" PRId64 ",%" PRIu64
					",%.4f\n", name, pool_policy, cap,
					4 * cap, pols[pi], k,
					pct(r.r.hit_blocks, r.r.blocks),
					gained, r.written, per);
		}
	}
}

static int split(char *s, char **out, int max)
{
	int n = 0;

	for (char *tok = strtok(s, ","); tok; tok = strtok(NULL, ",")) {
		if (n == max)
			die("too many items in a list (at most %d)", max);
		out[n++] = tok;
	}
	return n;
}

static void usage(void)
{
	fprintf(stderr, "usage: policy_bench [-p POLICIES] [-c PERCENTS] "
		"[-d | -n] [-o CSV] [-a CSV] TRACE...\n");
	exit(2);
}

int main(int argc, char **argv)
{
	char pol_arg[256] = "lru,s3fifo,cost", cap_arg[128] = "5,10,20,40";
	char *pols[MAX_POLICIES], *caps[MAX_CAPS];
	int npol, ncap, opt, daemon = 2;
	FILE *csv = NULL, *acsv = NULL;
	bool adm = false;

	while ((opt = getopt(argc, argv, "p:c:dno:a:")) != -1) {
		switch (opt) {
		case 'p':
			snprintf(pol_arg, sizeof(pol_arg), "%s", optarg);
			break;
		case 'c':
			snprintf(cap_arg, sizeof(cap_arg), "%s", optarg);
			break;
		case 'd':
			daemon = 1;
			break;
		case 'n':
			daemon = 0;
			break;
		case 'o':
			csv = fopen(optarg, "w");
			if (!csv)
				die("%s: %s", optarg, strerror(errno));
			fprintf(csv, "trace,capacity_pct,capacity_blocks,"
				"policy,block_hit_pct,token_hit_pct,"
				"of_belady,evictions,daemon\n");
			break;
		case 'a':
			adm = true;
			acsv = fopen(optarg, "w");
			if (!acsv)
				die("%s: %s", optarg, strerror(errno));
			fprintf(acsv, "trace,pool_policy,pool_blocks,g3_blocks,"
				"g3_policy,admit,block_hit_pct,hits_gained,"
				"written,written_per_hit_gained\n");
			break;
		default:
			usage();
		}
	}
	if (optind == argc)
		usage();
	npol = split(pol_arg, pols, MAX_POLICIES);
	ncap = split(cap_arg, caps, MAX_CAPS);
	if (daemon)
		find_daemon();
	printf("%-24s %5s %8s %-8s %7s %7s %6s %10s %s\n", "trace", "cap%",
	       "blocks", "policy", "blk%", "tok%", "/opt", "evictions",
	       "daemon");
	for (int a = optind; a < argc; a++) {
		const char *name = strrchr(argv[a], '/');
		struct kvc_trace t;
		char err[256];
		int ret;

		name = name ? name + 1 : argv[a];
		ret = kvc_trace_load(argv[a], KVC_PROTO_MAX_BATCH, &t, err,
				     sizeof(err));
		if (ret)
			die("%s", err);
		fprintf(stderr, "# %s: %zu requests, %u distinct blocks, %zu "
			"accesses, %u cut to %d blocks\n", name, t.nr_reqs,
			t.nr_blocks, t.nr_accesses, t.truncated,
			KVC_PROTO_MAX_BATCH);
		for (int ci = 0; ci < ncap; ci++) {
			double frac = strtod(caps[ci], NULL);
			uint64_t c64 = (uint64_t)(frac / 100.0 * t.nr_blocks + 0.5);
			uint32_t cap = c64 < 8 ? 8 : (uint32_t)c64;
			struct kvc_psim_result opt = { 0 };

			if (frac <= 0 || frac > 100)
				die("capacity %s: a percentage in (0, 100]",
				    caps[ci]);
			if (kvc_psim_belady(&t, cap, &opt))
				die("belady: out of memory");
			row(csv, name, frac, cap, "belady", &opt, &opt, "-");
			for (int pi = 0; pi < npol; pi++) {
				struct kvc_psim_opts o = {
					.capacity = cap, .high_pct = HIGH_PCT,
				};
				struct kvc_psim_result s = { 0 }, d = { 0 };
				const char *verdict = "-";
				char pname[32];

				policy_of(pols[pi], pname, sizeof(pname),
					  &o.small_pct);
				o.policy = pname;
				s.matched = calloc(t.nr_reqs, sizeof(uint32_t));
				d.matched = calloc(t.nr_reqs, sizeof(uint32_t));
				if (!s.matched || !d.matched)
					die("out of memory");
				ret = kvc_psim_run(&t, &o, &s);
				if (ret)
					die("simulating %s: %s", pols[pi],
					    strerror(-ret));
				if (daemon == 2 || (daemon == 1 && !ci)) {
					replay(&t, pols[pi], cap, &d);
					for (size_t i = 0; i < t.nr_reqs; i++)
						if (s.matched[i] != d.matched[i])
							die("%s, %s, %" PRIu32
							    " blocks: request %zu (line %zu) matched %" PRIu32
							    " blocks in kvcached, %" PRIu32
							    " in the simulator",
							    name, pols[pi], cap,
							    i, i + 1,
							    d.matched[i],
							    s.matched[i]);
					verdict = "agrees";
				}
				row(csv, name, frac, cap, pols[pi], &s, &opt,
				    verdict);
				free(s.matched);
				free(d.matched);
			}
		}
		if (adm) {
			double frac = strtod(caps[0], NULL);
			uint64_t c64 = (uint64_t)(frac / 100.0 * t.nr_blocks + 0.5);

			admission(acsv, name, &t, pols[0],
				  c64 < 8 ? 8 : (uint32_t)c64, pols, npol);
		}
		kvc_trace_free(&t);
	}
	if (csv && fclose(csv))
		die("writing the CSV: %s", strerror(errno));
	if (acsv && fclose(acsv))
		die("writing the CSV: %s", strerror(errno));
	return 0;
}
