// SPDX-License-Identifier: GPL-2.0
/*
 * kvcached over its socket, on the host: a LOOKUP of a 128-key prefix,
 * request to reply, as an engine sees it.
 *
 * The bench starts the real daemon (memfd mode, so no module is needed:
 * the lookup path is the same in both modes), stores one chain of 128
 * blocks and times LOOKUPs of the whole chain. The baseline, interleaved
 * with it run by run, is the same round trip of datagrams of the same
 * sizes to an echo thread over a SOCK_SEQPACKET socketpair in this
 * process: the cost of the socket itself, which no daemon can go below.
 *
 * Output: CSV "metric,run,kvcache_ns,baseline_ns,ratio" for the median
 * and the 99th percentile of each run (ratio: kvcached over the socket
 * alone), the metric names ending in LABEL when one is given.
 * Usage (as root): socket_bench [RUNS] [KVCACHED] [LABEL]
 *
 * Where the processes run matters more than anything the daemon does: a
 * request that must wake a sleeping CPU pays that CPU's wake-up latency
 * (tens of microseconds for an idle virtual CPU). scripts/bench runs it
 * twice: every process on one CPU, and free to spread.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "keys.h"
#include "proto.h"

#define CHAIN		128
#define ITERS		20000
#define NS		7

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void die(const char *what, int err)
{
	fprintf(stderr, "socket_bench: %s: %s\n", what, strerror(err));
	exit(1);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The baseline's far end: answer every datagram with reply_len bytes. */
struct echo {
	int fd;
	size_t reply_len;
};

static void *echo_thread(void *arg)
{
	struct echo *e = arg;
	static uint8_t buf[KVC_PROTO_MSG_MAX];

	while (recv(e->fd, buf, sizeof(buf), 0) > 0)
		if (send(e->fd, buf, e->reply_len, 0) < 0)
			break;
	return NULL;
}

static pid_t start_daemon(const char *bin, const char *dir, char *sock)
{
	char conf[512], state[512];
	FILE *f;
	pid_t pid;

	snprintf(conf, sizeof(conf), "%s/kvcached.conf", dir);
	snprintf(state, sizeof(state), "%s/state", dir);
	snprintf(sock, 108, "%s/kvcached.sock", dir);
	f = fopen(conf, "w");
	if (!f)
		die(conf, errno);
	fprintf(f, "[daemon]\nmetrics = off\n[pool]\nmemfd_size = 16M\n"
		   "block_size = 64K\nhugetlb = no\nmlock = no\n");
	fclose(f);
	pid = fork();
	if (pid == 0) {
		execl(bin, bin, "--config", conf, "--mode", "memfd", "--socket",
		      sock, "--state-dir", state, (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* Connect, retrying while the daemon starts. */
static void connect_daemon(struct kvc_client *c, const char *sock)
{
	int ret = -ENOENT;

	for (int i = 0; i < 200 && ret; i++) {
		ret = kvc_client_open(c, sock);
		if (ret)
			usleep(50000);
	}
	if (ret)
		die("connecting to kvcached", -ret);
}

/* One chain of CHAIN blocks, allocated, sealed and stored. */
static void store_chain(struct kvc_client *c, uint8_t (*keys)[32])
{
	static uint8_t req[KVC_PROTO_MSG_MAX];
	struct kvc_store_entry st[CHAIN];
	struct kvc_seal_entry se[CHAIN];
	struct kvc_ns_create nc = { .ns_id = NS, .mode = 0700 };
	struct kvcache_handle h[CHAIN];
	struct kvc_msg m;
	int len, ret;

	len = kvc_proto_encode_ns_create(req, sizeof(req),
					 kvc_client_next_seq(c), &nc);
	ret = kvc_client_call(c, req, (size_t)len, &m);
	if (ret)
		die("NS_CREATE (run as root)", -ret);
	len = kvc_proto_encode_alloc(req, sizeof(req), kvc_client_next_seq(c),
				     NS, CHAIN);
	ret = kvc_client_call(c, req, (size_t)len, &m);
	if (ret)
		die("ALLOC", -ret);
	for (uint32_t i = 0; i < CHAIN; i++) {
		kvc_proto_alloc_handle(&m.alloc_reply, i, &h[i]);
		memset(&se[i], 0, sizeof(se[i]));
		se[i].handle = h[i];
		se[i].payload_len = 4096;
		memcpy(se[i].key, keys[i], 32);
		memset(&st[i], 0, sizeof(st[i]));
		memcpy(st[i].key, keys[i], 32);
		if (i)
			memcpy(st[i].parent, keys[i - 1], 32);
		else
			st[i].flags = KVC_PROTO_STORE_FIRST;
		st[i].handle = h[i];
	}
	len = kvc_proto_encode_seal(req, sizeof(req), kvc_client_next_seq(c),
				    se, CHAIN);
	ret = kvc_client_call(c, req, (size_t)len, &m);
	for (uint32_t i = 0; !ret && i < CHAIN; i++)
		ret = kvc_proto_status(&m.seal_reply, i);
	if (ret)
		die("SEAL", -ret);
	len = kvc_proto_encode_store(req, sizeof(req), kvc_client_next_seq(c),
				     NS, st, CHAIN);
	ret = kvc_client_call(c, req, (size_t)len, &m);
	for (uint32_t i = 0; !ret && i < CHAIN; i++)
		ret = kvc_proto_status(&m.store_reply, i);
	if (ret)
		die("STORE", -ret);
}

int main(int argc, char **argv)
{
	int runs = argc > 1 ? atoi(argv[1]) : 5;
	const char *bin = argc > 2 ? argv[2] : "build/helper/kvcached";
	const char *label = argc > 3 ? argv[3] : "";
	static uint8_t req[KVC_PROTO_MSG_MAX], reply[KVC_PROTO_MSG_MAX];
	static uint64_t kv[ITERS], base[ITERS];
	uint8_t keys[CHAIN][32], seed[32];
	uint32_t tokens[CHAIN * 16];
	char dir[] = "/tmp/kvcache-sockbench.XXXXXX", sock[108];
	struct kvc_client c;
	struct echo echo;
	pthread_t thr;
	struct kvc_msg m;
	char path[600];
	int sv[2], len;
	pid_t pid;

	if (runs < 1 || !mkdtemp(dir))
		die("usage: socket_bench [RUNS] [KVCACHED]", EINVAL);
	pid = start_daemon(bin, dir, sock);
	connect_daemon(&c, sock);
	memset(seed, 0x5a, sizeof(seed));
	for (uint32_t i = 0; i < CHAIN * 16; i++)
		tokens[i] = i * 2654435761u;
	kvc_chain_keys(seed, tokens, CHAIN * 16, 16, keys, CHAIN);
	store_chain(&c, keys);

	len = kvc_proto_encode_lookup(req, sizeof(req), 0, NS,
				      KVC_PROTO_TIERS_ALL, keys[0], CHAIN);
	/* The reply's size, for the baseline to send back the same bytes. */
	if (kvc_client_call(&c, req, (size_t)len, &m) ||
	    m.lookup_reply.matched != CHAIN)
		die("LOOKUP of the stored chain", EIO);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv))
		die("socketpair", errno);
	echo.fd = sv[1];
	echo.reply_len = KVC_PROTO_HDR_SIZE + 8 + CHAIN * 16;
	if (pthread_create(&thr, NULL, echo_thread, &echo))
		die("pthread_create", EAGAIN);

	printf("metric,run,kvcache_ns,baseline_ns,ratio\n");
	for (int r = 1; r <= runs; r++) {
		for (int i = 0; i < ITERS; i++) {
			uint64_t t0 = now_ns();

			if (send(c.fd, req, (size_t)len, 0) != len ||
			    recv(c.fd, reply, sizeof(reply), 0) <= 0)
				die("LOOKUP round trip", errno);
			kv[i] = now_ns() - t0;
			t0 = now_ns();
			if (send(sv[0], req, (size_t)len, 0) != len ||
			    recv(sv[0], reply, sizeof(reply), 0) <= 0)
				die("echo round trip", errno);
			base[i] = now_ns() - t0;
		}
		qsort(kv, ITERS, sizeof(kv[0]), cmp_u64);
		qsort(base, ITERS, sizeof(base[0]), cmp_u64);
		printf("lookup128_socket_median%s,%d,%llu,%llu,%.3f\n", label, r,
		       (unsigned long long)kv[ITERS / 2],
		       (unsigned long long)base[ITERS / 2],
		       (double)kv[ITERS / 2] / (double)base[ITERS / 2]);
		printf("lookup128_socket_p99%s,%d,%llu,%llu,%.3f\n", label, r,
		       (unsigned long long)kv[ITERS * 99 / 100],
		       (unsigned long long)base[ITERS * 99 / 100],
		       (double)kv[ITERS * 99 / 100] /
		       (double)base[ITERS * 99 / 100]);
		fflush(stdout);
	}
	shutdown(sv[0], SHUT_RDWR);
	pthread_join(thr, NULL);
	kvc_client_close(&c);
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	/* What the daemon and the bench left in the directory. */
	static const char *const files[] = {
		"kvcached.conf", "state/namespaces", "state/parents", "state",
	};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		remove(path);
	}
	rmdir(dir);
	return 0;
}
