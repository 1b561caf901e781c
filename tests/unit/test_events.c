// SPDX-License-Identifier: GPL-2.0
/*
 * Host tests for helper/kvcached/events.c, with real ZeroMQ subscribers in
 * this process: who reads the KV events and what a subscriber may cost.
 *
 * - only the namespaces [events] namespaces lists are published, none
 *   when it lists none;
 * - an ipc:// socket file has ipc_mode and ipc_group, and a non-socket
 *   at its path is refused, not replaced;
 * - over tcp://, a CURVE subscriber whose public key is in curve_clients
 *   gets the events; one with another key, or without CURVE, gets none;
 * - stalled subscribers hold at most about hwm messages: the heap
 *   grows by that much, not by what was published;
 * - a frame larger than the limit from a subscriber drops its connection.
 *
 * The daemon is a struct kvcd with a config and an index only: events.c
 * needs no more. Blocks "enter the pool" through kvc_index_set(), which
 * calls the events' observer as the daemon's does. A message carries each
 * key as 32 raw bytes, so a key is looked for in the payload as is.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <zmq.h>

#include "config.h"
#include "events.h"
#include "index.h"
#include "kvcd.h"
#include "scratch.h"
#include "tap.h"

/* ASan's count of live heap bytes (sanitizer/allocator_interface.h). */
size_t __sanitizer_get_current_allocated_bytes(void);

#define KS		KVCACHE_KEY_SIZE
#define PAYLOAD_MAX	(1 << 20)

static char dir[64];
static uint64_t key_counter;

static void new_key(uint8_t key[KS])
{
	/* Distinct, and not a byte pattern a payload holds by chance. */
	for (int i = 0; i < KS; i += 8) {
		uint64_t v = ++key_counter * 0x9e3779b97f4a7c15ULL ^
			     0xa5a5a5a5a5a5a5a5ULL;

		memcpy(key + i, &v, 8);
	}
}

/* A daemon with config text conf and an index; events opened: 0, -errno. */
static int open_daemon(struct kvcd **out, const char *conf)
{
	char err[512];
	struct kvcd *d = calloc(1, sizeof(*d));
	int ret;

	TAP_ASSERT_TRUE(d);
	kvc_config_defaults(&d->cfg);
	ret = kvc_config_parse(&d->cfg, conf, strlen(conf), "test.conf", err,
			       sizeof(err));
	if (ret)
		printf("# %s\n", err);
	TAP_ASSERT_EQ(ret, 0);
	TAP_ASSERT_EQ(kvc_index_create(&d->index, 1024, 7), 0);
	ret = kvcd_events_open(d);
	*out = d;
	return ret;
}

static void close_daemon(struct kvcd *d)
{
	kvcd_events_close(d);
	kvc_index_destroy(d->index);
	free(d);
}

/* A first block of namespace ns enters the pool: its id. */
static uint32_t store(struct kvcd *d, uint32_t ns, uint8_t key[KS])
{
	union kvc_loc loc = { .u64 = 1 };
	uint32_t id;

	new_key(key);
	TAP_ASSERT_EQ(kvc_index_insert(d->index, ns, key, NULL, &id), 0);
	TAP_ASSERT_EQ(kvc_index_set(d->index, id, KVC_TIER_POOL, loc), 0);
	return id;
}

/* One message's payload into buf within ms: its length, or -1. */
static int recv_msg(void *sub, uint8_t *buf, int ms)
{
	zmq_pollitem_t it = { .socket = sub, .events = ZMQ_POLLIN };
	int n = -1, len, more;
	size_t sz = sizeof(more);

	if (zmq_poll(&it, 1, ms) <= 0)
		return -1;
	do {
		len = zmq_recv(sub, buf, PAYLOAD_MAX, 0);
		if (len < 0)
			return -1;
		n = len > PAYLOAD_MAX ? PAYLOAD_MAX : len;
		zmq_getsockopt(sub, ZMQ_RCVMORE, &more, &sz);
	} while (more);
	return n;		/* the last frame: the batch */
}

/*
 * Until sub gets something: a block of listed namespace ns is published
 * at each try (a PUB drops what it sends before a subscription is in).
 * true once a message came, with the rest drained.
 */
static bool sync_sub(struct kvcd *d, void *sub, uint32_t ns, uint8_t *buf)
{
	uint8_t key[KS];

	for (int i = 0; i < 400; i++) {
		store(d, ns, key);
		kvcd_events_flush(d);
		if (recv_msg(sub, buf, 10) >= 0) {
			while (recv_msg(sub, buf, 50) >= 0)
				;
			return true;
		}
	}
	return false;
}

static bool has_key(const uint8_t *buf, int len, const uint8_t key[KS])
{
	return len >= KS && memmem(buf, (size_t)len, key, KS) != NULL;
}

static void *subscriber(void *ctx, int type, const char *ep)
{
	void *s = zmq_socket(ctx, type);
	int linger = 0;

	TAP_ASSERT_TRUE(s);
	zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof(linger));
	if (type == ZMQ_SUB)
		zmq_setsockopt(s, ZMQ_SUBSCRIBE, "", 0);
	TAP_ASSERT_EQ(zmq_connect(s, ep), 0);
	return s;
}

/* ---- who is published --------------------------------------------------- */

static void only_listed_namespaces(void)
{
	uint8_t *buf = malloc(PAYLOAD_MAX), k1[KS], k2[KS], k3[KS], k9[KS];
	char conf[512], ep[300];
	struct kvcd *d;
	void *ctx = zmq_ctx_new(), *sub;
	int len;
	bool got1 = false, got3 = false, got2 = false, got9 = false;
	uint32_t id1, id2;

	TAP_ASSERT_TRUE(buf && ctx);
	snprintf(ep, sizeof(ep), "ipc://%s/ns.sock", dir);
	snprintf(conf, sizeof(conf),
		 "[events]\nendpoint = %s\nnamespaces = 1, 3-4\n", ep);
	TAP_ASSERT_EQ(open_daemon(&d, conf), 0);
	sub = subscriber(ctx, ZMQ_SUB, ep);
	TAP_ASSERT_TRUE(sync_sub(d, sub, 1, buf));

	/* Unlisted first: they are in the same message as the listed. */
	id2 = store(d, 2, k2);
	store(d, 9, k9);
	id1 = store(d, 1, k1);
	store(d, 3, k3);
	kvcd_events_flush(d);
	while ((len = recv_msg(sub, buf, 500)) >= 0) {
		got1 |= has_key(buf, len, k1);
		got3 |= has_key(buf, len, k3);
		got2 |= has_key(buf, len, k2);
		got9 |= has_key(buf, len, k9);
		if (got1 && got3)
			break;
	}
	TAP_EXPECT_TRUE(got1 && got3);
	TAP_EXPECT_FALSE(got2);
	TAP_EXPECT_FALSE(got9);
	/* Nor does an unlisted block leaving a tier tell of it. */
	got1 = got2 = false;
	TAP_EXPECT_EQ(kvc_index_clear(d->index, id2, KVC_TIER_POOL), 0);
	TAP_EXPECT_EQ(kvc_index_clear(d->index, id1, KVC_TIER_POOL), 0);
	kvcd_events_flush(d);
	while (!got1 && (len = recv_msg(sub, buf, 500)) >= 0) {
		got1 |= has_key(buf, len, k1);
		got2 |= has_key(buf, len, k2);
	}
	TAP_EXPECT_TRUE(got1);
	TAP_EXPECT_FALSE(got2);
	zmq_close(sub);
	close_daemon(d);
	zmq_ctx_term(ctx);
	free(buf);
}

/* No namespaces listed: the socket is there and says nothing of blocks. */
static void nothing_listed_nothing_published(void)
{
	uint8_t *buf = malloc(PAYLOAD_MAX), key[KS];
	char conf[512], ep[300];
	struct kvcd *d;
	void *ctx = zmq_ctx_new(), *sub;
	int len, msgs = 0;
	bool got = false;

	TAP_ASSERT_TRUE(buf && ctx);
	snprintf(ep, sizeof(ep), "ipc://%s/none.sock", dir);
	snprintf(conf, sizeof(conf), "[events]\nendpoint = %s\n", ep);
	TAP_ASSERT_EQ(open_daemon(&d, conf), 0);
	sub = subscriber(ctx, ZMQ_SUB, ep);
	usleep(200 * 1000);	/* the subscription reaches the PUB */
	for (int i = 0; i < 20; i++) {
		store(d, 1 + i % 3, key);
		kvcd_events_flush(d);
		while ((len = recv_msg(sub, buf, 20)) >= 0) {
			msgs++;
			got |= has_key(buf, len, key);
		}
	}
	TAP_EXPECT_FALSE(got);
	/* At most the AllBlocksCleared of the start, with no key. */
	TAP_EXPECT_LE(msgs, 1);
	zmq_close(sub);
	close_daemon(d);
	zmq_ctx_term(ctx);
	free(buf);
}

/* ---- ipc:// ------------------------------------------------------------- */

static void ipc_mode_and_group(void)
{
	uint8_t *buf = malloc(PAYLOAD_MAX);
	char conf[512], ep[320], path[300];
	gid_t gid = geteuid() == 0 ? 4242 : getegid();
	struct kvcd *d;
	struct stat st;
	void *ctx = zmq_ctx_new(), *sub;
	int fd;

	TAP_ASSERT_TRUE(buf && ctx);
	snprintf(path, sizeof(path), "%s/mode.sock", dir);
	snprintf(ep, sizeof(ep), "ipc://%s", path);
	snprintf(conf, sizeof(conf),
		 "[events]\nendpoint = %s\nnamespaces = 1\nipc_mode = 0640\n"
		 "ipc_group = %u\n", ep, (unsigned int)gid);
	/* A stale socket file of an earlier run is replaced. */
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	{
		struct sockaddr_un sa = { .sun_family = AF_UNIX };

		TAP_ASSERT_LT(strlen(path), sizeof(sa.sun_path));
		memcpy(sa.sun_path, path, strlen(path) + 1);
		TAP_ASSERT_EQ(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
		close(fd);
	}
	TAP_ASSERT_EQ(open_daemon(&d, conf), 0);
	TAP_ASSERT_EQ(lstat(path, &st), 0);
	TAP_EXPECT_TRUE(S_ISSOCK(st.st_mode));
	TAP_EXPECT_EQ(st.st_mode & 07777, 0640);
	TAP_EXPECT_EQ(st.st_gid, gid);
	/* It is the socket kvcached listens on. */
	sub = subscriber(ctx, ZMQ_SUB, ep);
	TAP_EXPECT_TRUE(sync_sub(d, sub, 1, buf));
	zmq_close(sub);
	close_daemon(d);
	/* Removed at close, and nothing left of the private directory. */
	TAP_EXPECT_NE(lstat(path, &st), 0);
	{
		DIR *dh = opendir(dir);
		struct dirent *de;

		TAP_ASSERT_TRUE(dh);
		while ((de = readdir(dh)))
			TAP_EXPECT_TRUE(!strstr(de->d_name, "kvcev"));
		closedir(dh);
	}
	zmq_ctx_term(ctx);
	free(buf);
}

static void ipc_refuses_to_replace_a_file(void)
{
	char conf[512], path[300], back[8] = "";
	struct kvcd *d;
	int fd;

	snprintf(path, sizeof(path), "%s/not-a-socket", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	TAP_ASSERT_TRUE(fd >= 0);
	TAP_ASSERT_EQ(write(fd, "data", 4), 4);
	close(fd);
	snprintf(conf, sizeof(conf), "[events]\nendpoint = ipc://%s\n", path);
	TAP_EXPECT_EQ(open_daemon(&d, conf), -EEXIST);
	TAP_EXPECT_TRUE(d->events == NULL);
	close_daemon(d);
	fd = open(path, O_RDONLY);
	TAP_ASSERT_TRUE(fd >= 0);
	TAP_EXPECT_EQ(read(fd, back, sizeof(back)), 4);
	TAP_EXPECT_TRUE(!memcmp(back, "data", 4));
	close(fd);

	/* An unknown group stops the start too. */
	snprintf(conf, sizeof(conf),
		 "[events]\nendpoint = ipc://%s/g.sock\n"
		 "ipc_group = no-such-group-kvc\n", dir);
	TAP_EXPECT_EQ(open_daemon(&d, conf), -ENOENT);
	close_daemon(d);
}

/* ---- CURVE -------------------------------------------------------------- */

static void write_file(const char *path, mode_t mode, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);

	TAP_ASSERT_TRUE(fd >= 0);
	TAP_ASSERT_EQ(fchmod(fd, mode), 0);
	TAP_ASSERT_EQ(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

static int free_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	int s = socket(AF_INET, SOCK_STREAM, 0), port;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	TAP_ASSERT_EQ(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	TAP_ASSERT_EQ(getsockname(s, (struct sockaddr *)&sa, &len), 0);
	port = ntohs(sa.sin_port);
	close(s);
	return port;
}

static void *curve_sub(void *ctx, const char *ep, const char *server_pub,
		       const char *pub, const char *sec)
{
	void *s = zmq_socket(ctx, ZMQ_SUB);
	int linger = 0;

	TAP_ASSERT_TRUE(s);
	zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof(linger));
	if (server_pub) {
		TAP_ASSERT_EQ(zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY,
					     server_pub, 40), 0);
		TAP_ASSERT_EQ(zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, pub, 40),
			      0);
		TAP_ASSERT_EQ(zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, sec, 40),
			      0);
	}
	zmq_setsockopt(s, ZMQ_SUBSCRIBE, "", 0);
	TAP_ASSERT_EQ(zmq_connect(s, ep), 0);
	return s;
}

static void curve_allow_list(void)
{
	char spub[41], ssec[41], apub[41], asec[41], bpub[41], bsec[41];
	char conf[1024], ep[64], skf[300], clf[300], text[256];
	uint8_t *buf = malloc(PAYLOAD_MAX), key[KS];
	void *ctx = zmq_ctx_new(), *a, *b, *plain;
	bool a_got = false, b_got = false, plain_got = false;
	struct kvcd *d;
	int len;

	TAP_ASSERT_TRUE(buf && ctx);
	if (!zmq_has("curve")) {
		tap_skip("libzmq without CURVE");
		return;
	}
	TAP_ASSERT_EQ(zmq_curve_keypair(spub, ssec), 0);
	TAP_ASSERT_EQ(zmq_curve_keypair(apub, asec), 0);
	TAP_ASSERT_EQ(zmq_curve_keypair(bpub, bsec), 0);
	snprintf(skf, sizeof(skf), "%s/server.key", dir);
	snprintf(clf, sizeof(clf), "%s/clients", dir);
	snprintf(text, sizeof(text), "# kvcached's events\n%s\n", ssec);
	write_file(skf, 0600, text);
	snprintf(text, sizeof(text), "# router a\n  %s  \n\n", apub);
	write_file(clf, 0644, text);
	snprintf(ep, sizeof(ep), "tcp://127.0.0.1:%d", free_port());
	snprintf(conf, sizeof(conf),
		 "[events]\nendpoint = %s\nnamespaces = 5\n"
		 "curve_secret_key = %s\ncurve_clients = %s\n", ep, skf, clf);
	TAP_ASSERT_EQ(open_daemon(&d, conf), 0);

	b = curve_sub(ctx, ep, spub, bpub, bsec);
	plain = curve_sub(ctx, ep, NULL, NULL, NULL);
	a = curve_sub(ctx, ep, spub, apub, asec);
	TAP_ASSERT_TRUE(sync_sub(d, a, 5, buf));
	/* a is in: b and plain had as long to be, and longer. */
	for (int i = 0; i < 5; i++) {
		store(d, 5, key);
		kvcd_events_flush(d);
		while ((len = recv_msg(a, buf, 100)) >= 0)
			a_got |= has_key(buf, len, key);
		while (recv_msg(b, buf, 10) >= 0)
			b_got = true;
		while (recv_msg(plain, buf, 10) >= 0)
			plain_got = true;
	}
	TAP_EXPECT_TRUE(a_got);
	TAP_EXPECT_FALSE(b_got);
	TAP_EXPECT_FALSE(plain_got);
	/* The handler turned b away (plain fails CURVE's handshake first). */
	TAP_EXPECT_GE(kvcd_events_denied(d), 1);
	zmq_close(a);
	zmq_close(b);
	zmq_close(plain);
	close_daemon(d);
	zmq_ctx_term(ctx);
	free(buf);
}

static void curve_files_checked(void)
{
	char pub[41], sec[41], conf[1024], skf[300], clf[300], text[256];
	struct kvcd *d;
	const char *base;

	TAP_ASSERT_EQ(zmq_curve_keypair(pub, sec), 0);
	snprintf(skf, sizeof(skf), "%s/s.key", dir);
	snprintf(clf, sizeof(clf), "%s/c.keys", dir);
	base = "[events]\nendpoint = ipc://%s/c.sock\n"
	       "curve_secret_key = %s\ncurve_clients = %s\n";
	snprintf(conf, sizeof(conf), base, dir, skf, clf);

	/* A secret key others may read is refused. */
	snprintf(text, sizeof(text), "%s\n", sec);
	write_file(skf, 0644, text);
	snprintf(text, sizeof(text), "%s\n", pub);
	write_file(clf, 0644, text);
	TAP_EXPECT_EQ(open_daemon(&d, conf), -EPERM);
	close_daemon(d);

	/* A line that is no key, or an empty list. */
	snprintf(text, sizeof(text), "%s\n", sec);
	write_file(skf, 0600, text);
	write_file(clf, 0644, "not-a-key\n");
	TAP_EXPECT_EQ(open_daemon(&d, conf), -EINVAL);
	close_daemon(d);
	write_file(clf, 0644, "# nobody\n");
	TAP_EXPECT_EQ(open_daemon(&d, conf), -EINVAL);
	close_daemon(d);

	/* Two secret keys. */
	snprintf(text, sizeof(text), "%s\n%s\n", sec, sec);
	write_file(skf, 0600, text);
	snprintf(text, sizeof(text), "%s\n", pub);
	write_file(clf, 0644, text);
	TAP_EXPECT_EQ(open_daemon(&d, conf), -EINVAL);
	close_daemon(d);

	/* Right: CURVE over ipc:// works as well. */
	snprintf(text, sizeof(text), "%s\n", sec);
	write_file(skf, 0600, text);
	TAP_EXPECT_EQ(open_daemon(&d, conf), 0);
	close_daemon(d);
}

/* ---- what a subscriber may cost ----------------------------------------- */

/*
 * Subscribers that stop reading (four, as in the report of the issue):
 * the publisher goes on with 300 full messages (512 events, 40 to 70 KB
 * each), 16 MB. What it queues for them is bounded by hwm (4 here): ASan's
 * count of live heap bytes grows by a few messages, not by what was
 * published, and each subscriber, reading again, gets about hwm messages
 * and what the socket buffers held, not all of them.
 */
#define NSTALLED	4

static void stalled_subscriber_is_bounded(void)
{
	uint8_t *buf = malloc(PAYLOAD_MAX);
	uint32_t *ids = calloc(512, sizeof(*ids));
	char conf[512], ep[300];
	void *ctx = zmq_ctx_new(), *sub[NSTALLED];
	size_t before, after;
	struct kvcd *d;
	int one = 1, small = 4096, len, total = 0;

	TAP_ASSERT_TRUE(buf && ids && ctx);
	snprintf(ep, sizeof(ep), "ipc://%s/slow.sock", dir);
	snprintf(conf, sizeof(conf),
		 "[events]\nendpoint = %s\nnamespaces = 1\nhwm = 4\n", ep);
	TAP_ASSERT_EQ(open_daemon(&d, conf), 0);
	for (int s = 0; s < NSTALLED; s++) {
		sub[s] = zmq_socket(ctx, ZMQ_SUB);
		TAP_ASSERT_TRUE(sub[s]);
		zmq_setsockopt(sub[s], ZMQ_RCVHWM, &one, sizeof(one));
		zmq_setsockopt(sub[s], ZMQ_RCVBUF, &small, sizeof(small));
		zmq_setsockopt(sub[s], ZMQ_SUBSCRIBE, "", 0);
		TAP_ASSERT_EQ(zmq_connect(sub[s], ep), 0);
		TAP_ASSERT_TRUE(sync_sub(d, sub[s], 1, buf));
	}
	for (int i = 0; i < 512; i++) {
		uint8_t key[KS];

		ids[i] = store(d, 1, key);
	}
	kvcd_events_flush(d);
	usleep(100 * 1000);
	for (int s = 0; s < NSTALLED; s++)
		while (recv_msg(sub[s], buf, 50) >= 0)
			;
	before = __sanitizer_get_current_allocated_bytes();
	/* The subscribers stall from here. */
	for (int round = 0; round < 150; round++) {
		union kvc_loc loc = { .u64 = 1 };

		for (int i = 0; i < 512; i++)
			kvc_index_clear(d->index, ids[i], KVC_TIER_POOL);
		kvcd_events_flush(d);
		for (int i = 0; i < 512; i++)
			kvc_index_set(d->index, ids[i], KVC_TIER_POOL, loc);
		kvcd_events_flush(d);
		total += 2;
	}
	usleep(300 * 1000);	/* the I/O thread fills what it can */
	after = __sanitizer_get_current_allocated_bytes();
	printf("# heap %zu -> %zu bytes while %d messages were published\n",
	       before, after, total);
	/*
	 * hwm 4 of 70 KB (shared by the subscribers), one in flight on each
	 * connection, each subscriber's own one or two: under 3 MB. Without
	 * the bound: 16 MB and more.
	 */
	TAP_EXPECT_LT(after, before + (3u << 20));

	for (int s = 0; s < NSTALLED; s++) {
		int got = 0;

		while ((len = recv_msg(sub[s], buf, 300)) >= 0)
			got++;
		printf("# subscriber %d got %d of %d messages\n", s, got,
		       total);
		TAP_EXPECT_GE(got, 1);
		/* hwm, its own receive queue and the socket buffers. */
		TAP_EXPECT_LE(got, 4 + 16);
		zmq_close(sub[s]);
	}
	close_daemon(d);
	zmq_ctx_term(ctx);
	free(ids);
	free(buf);
}

/*
 * A subscriber sends a 64 KB frame: no subscription is that large (a
 * topic is 63 bytes at most), and kvcached drops the connection rather
 * than read it. Seen from the subscriber's side: a disconnect.
 */
static void large_frame_drops_the_connection(void)
{
	uint8_t *buf = malloc(PAYLOAD_MAX);
	char conf[512], ep[300];
	void *ctx = zmq_ctx_new(), *xsub, *mon;
	struct kvcd *d;
	bool disconnected = false;
	uint8_t sub_all = 1;

	TAP_ASSERT_TRUE(buf && ctx);
	snprintf(ep, sizeof(ep), "ipc://%s/big.sock", dir);
	snprintf(conf, sizeof(conf),
		 "[events]\nendpoint = %s\nnamespaces = 1\n", ep);
	TAP_ASSERT_EQ(open_daemon(&d, conf), 0);
	xsub = subscriber(ctx, ZMQ_XSUB, ep);
	TAP_ASSERT_EQ(zmq_socket_monitor(xsub, "inproc://mon",
					 ZMQ_EVENT_DISCONNECTED), 0);
	mon = zmq_socket(ctx, ZMQ_PAIR);
	TAP_ASSERT_EQ(zmq_connect(mon, "inproc://mon"), 0);
	TAP_ASSERT_EQ(zmq_send(xsub, &sub_all, 1, 0), 1);
	TAP_ASSERT_TRUE(sync_sub(d, xsub, 1, buf));

	/* Not a subscription (first byte 2): a PUB would read and drop it. */
	memset(buf, 2, 65536);
	TAP_ASSERT_EQ(zmq_send(xsub, buf, 65536, 0), 65536);
	for (int i = 0; i < 30 && !disconnected; i++) {
		zmq_pollitem_t it = { .socket = mon, .events = ZMQ_POLLIN };

		if (zmq_poll(&it, 1, 100) > 0) {
			zmq_msg_t m;

			zmq_msg_init(&m);
			while (zmq_msg_recv(&m, mon, ZMQ_DONTWAIT) >= 0) {
				if (zmq_msg_size(&m) >= 2 &&
				    *(uint16_t *)zmq_msg_data(&m) ==
				    ZMQ_EVENT_DISCONNECTED)
					disconnected = true;
			}
			zmq_msg_close(&m);
		}
	}
	TAP_EXPECT_TRUE(disconnected);
	zmq_socket_monitor(xsub, NULL, 0);
	zmq_close(mon);
	zmq_close(xsub);
	close_daemon(d);
	zmq_ctx_term(ctx);
	free(buf);
}

int main(void)
{
	if (scratch_make(dir, sizeof(dir), "kvc_events"))
		return 1;
	TAP_RUN(only_listed_namespaces);
	TAP_RUN(nothing_listed_nothing_published);
	TAP_RUN(ipc_mode_and_group);
	TAP_RUN(ipc_refuses_to_replace_a_file);
	TAP_RUN(curve_allow_list);
	TAP_RUN(curve_files_checked);
	TAP_RUN(stalled_subscriber_is_bounded);
	TAP_RUN(large_frame_drops_the_connection);
	scratch_remove(dir);
	return tap_done();
}
