// SPDX-License-Identifier: GPL-2.0
/*
 * events: KV events on a ZeroMQ PUB socket (events.h).
 *
 * The index's observer queues one record per change; the tick (or a
 * queue of EVENTS_BATCH records) encodes them as one KVEventBatch, as
 * msgspec encodes vLLM's (0.32: kv_events.py): the batch an array, each
 * event a map tagged by "type", its fields in order, defaults left out:
 *
 *   [ts, [event, ...], nil]                  ts: wall clock, float 64
 *   {type: "BlockStored", block_hashes: [hash], parent_block_hash,
 *    token_ids: [], block_size: 0, lora_id: nil, medium, lora_name: nil,
 *    locality}
 *   {type: "BlockRemoved", block_hashes: [hash], medium, locality}
 *   {type: "AllBlocksCleared"}
 *
 * A hash is the block's 32-byte key as a byte string, vLLM's
 * ExternalBlockHash; token_ids is empty and block_size 0, for the daemon
 * never sees tokens: a router matches the hashes it computes the way
 * keys.md derives keys.
 *
 * Who reads: the feed is read access to every namespace it publishes
 * (a router that guesses a prompt of an unsalted namespace confirms it
 * by the keys), so only the namespaces [events] namespaces lists are
 * published, an ipc:// socket file gets the configured mode and group
 * before anyone can reach it (bind_ipc()), and a tcp:// endpoint takes
 * only CURVE clients whose public key is in curve_clients (config.c
 * refuses TCP without them). What a subscriber may cost: hwm messages
 * of at most EVENTS_BATCH events each (about 70 KB) queued for it, and
 * nothing larger than EVENTS_MAXMSG read from it.
 *
 * Threads: everything here runs on the daemon's loop, except the ZAP
 * handler (zap_main()), which libzmq's I/O thread asks about each CURVE
 * client. It owns its REP socket and reads only ev->allowed and
 * ev->nallowed, which are set before it starts and freed after it has
 * been joined; its one counter (denied) is atomic.
 *
 * Lifetime: the socket and the queue live from kvcd_events_open() to
 * kvcd_events_close(); the queue is emptied by each flush.
 */
#include "events.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <zmq.h>

#include "index.h"
#include "kvcd.h"
#include "log.h"
#include "msgpack.h"

#define EVENTS_BATCH	512		/* events per message at most */
/*
 * The largest frame read from a subscriber. What a subscriber sends is a
 * subscription (a topic, at most 63 bytes) and its handshake: a CURVE
 * INITIATE with its metadata is about 350 bytes. Anything larger is no
 * router of ours, and libzmq drops the connection instead of buffering it.
 */
#define EVENTS_MAXMSG	4096
#define EVENTS_CLIENTS_MAX	4096	/* keys in curve_clients */
#define CURVE_KEY	32		/* bytes; 40 characters in Z85 */
#define ZAP_ENDPOINT	"inproc://zeromq.zap.01"	/* fixed by RFC 27 */
#define ZAP_DOMAIN	"kvcache-events"
/* libzmq's draft ZMQ_ZAP_ENFORCE_DOMAIN: set when the library has it. */
#define EVENTS_ZAP_ENFORCE	93

struct event {
	bool stored;
	bool has_parent;
	uint8_t tier;
	uint8_t key[KVCACHE_KEY_SIZE];
	uint8_t parent[KVCACHE_KEY_SIZE];
};

struct kvcd_events {
	void *ctx, *sock;
	char topic[KVC_CONFIG_TOPIC_MAX];
	uint8_t published[(KVCACHE_NS_MAX + 8) / 8];	/* bit ns */
	/* ipc://: the socket file bind_ipc() made, to remove at close. */
	char ipc_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	dev_t ipc_dev;
	ino_t ipc_ino;
	/* CURVE: the clients' public keys, sorted; the ZAP handler. */
	uint8_t (*allowed)[CURVE_KEY];
	size_t nallowed;
	void *zap;
	pthread_t zap_thread;
	bool zap_running;
	atomic_uint_fast64_t denied;
	uint64_t seq;
	bool cleared;			/* AllBlocksCleared still to send */
	struct event *q;
	size_t n, cap;
	struct kvc_mp mp;
	uint64_t sent, dropped;
};

/* vLLM's media (kv_events.py): g3 is local storage, g4 remote storage
 * that every node sharing it reads. */
static const char *const medium[KVC_NR_TIERS] = {
	[KVC_TIER_POOL] = "CPU",
	[KVC_TIER_G3] = "STORAGE",
	[KVC_TIER_G4] = "STORAGE",
};

static const char *const locality[KVC_NR_TIERS] = {
	[KVC_TIER_POOL] = "LOCAL",
	[KVC_TIER_G3] = "LOCAL",
	[KVC_TIER_G4] = "REMOTE",
};

/* A key and a string value of an event's map. */
static void field(struct kvc_mp *m, const char *name, const char *value)
{
	kvc_mp_str(m, name);
	kvc_mp_str(m, value);
}

static void hashes(struct kvc_mp *m, const uint8_t *key)
{
	kvc_mp_str(m, "block_hashes");
	kvc_mp_array(m, 1);
	kvc_mp_bin(m, key, KVCACHE_KEY_SIZE);
}

static void encode(struct kvcd_events *ev, size_t from, size_t n)
{
	struct timespec ts;
	struct kvc_mp *m = &ev->mp;

	clock_gettime(CLOCK_REALTIME, &ts);
	kvc_mp_reset(m);
	kvc_mp_array(m, 3);
	kvc_mp_double(m, (double)ts.tv_sec + (double)ts.tv_nsec / 1e9);
	kvc_mp_array(m, (uint32_t)(n + ev->cleared));
	if (ev->cleared) {
		kvc_mp_map(m, 1);
		field(m, "type", "AllBlocksCleared");
	}
	for (size_t i = from; i < from + n; i++) {
		const struct event *e = &ev->q[i];

		if (!e->stored) {
			kvc_mp_map(m, 4);
			field(m, "type", "BlockRemoved");
			hashes(m, e->key);
			field(m, "medium", medium[e->tier]);
			field(m, "locality", locality[e->tier]);
			continue;
		}
		kvc_mp_map(m, 9);
		field(m, "type", "BlockStored");
		hashes(m, e->key);
		kvc_mp_str(m, "parent_block_hash");
		if (e->has_parent)
			kvc_mp_bin(m, e->parent, KVCACHE_KEY_SIZE);
		else
			kvc_mp_nil(m);
		kvc_mp_str(m, "token_ids");
		kvc_mp_array(m, 0);
		kvc_mp_str(m, "block_size");
		kvc_mp_uint(m, 0);
		kvc_mp_str(m, "lora_id");
		kvc_mp_nil(m);
		field(m, "medium", medium[e->tier]);
		kvc_mp_str(m, "lora_name");
		kvc_mp_nil(m);
		field(m, "locality", locality[e->tier]);
	}
	kvc_mp_nil(m);		/* data_parallel_rank */
}

/* One message: topic, sequence number, batch. Never waits. */
static void send_batch(struct kvcd_events *ev, size_t from, size_t n)
{
	uint8_t seq[8];
	int ret;

	encode(ev, from, n);
	ev->cleared = false;	/* in this message, sent or lost */
	if (ev->mp.err) {
		ev->dropped += n;
		return;
	}
	for (int i = 0; i < 8; i++)
		seq[i] = (uint8_t)(ev->seq >> (8 * (7 - i)));
	ret = zmq_send(ev->sock, ev->topic, strlen(ev->topic),
		       ZMQ_SNDMORE | ZMQ_DONTWAIT);
	if (ret >= 0)
		ret = zmq_send(ev->sock, seq, sizeof(seq),
			       ZMQ_SNDMORE | ZMQ_DONTWAIT);
	if (ret >= 0)
		ret = zmq_send(ev->sock, ev->mp.buf, ev->mp.len, ZMQ_DONTWAIT);
	ev->seq++;
	if (ret < 0)
		ev->dropped += n;
	else
		ev->sent++;
}

void kvcd_events_flush(struct kvcd *d)
{
	struct kvcd_events *ev = d->events;

	if (!ev || (!ev->n && !ev->cleared))
		return;
	/* At least one message: an AllBlocksCleared alone. */
	for (size_t i = 0; i == 0 || i < ev->n; i += EVENTS_BATCH) {
		size_t n = ev->n - i < EVENTS_BATCH ? ev->n - i : EVENTS_BATCH;

		send_batch(ev, i, n);
	}
	ev->n = 0;
}

static bool is_published(const struct kvcd_events *ev, uint32_t ns)
{
	return ns <= KVCACHE_NS_MAX && (ev->published[ns / 8] >> (ns % 8) & 1);
}

static void observed(void *arg, const struct kvc_index *idx, uint32_t id,
		     unsigned int tier, bool present)
{
	struct kvcd *d = arg;
	struct kvcd_events *ev = d->events;
	const struct kvc_entry *e = kvc_index_entry(idx, id);
	struct event *q;

	/* Not listed: the feed must not tell anyone of its blocks. */
	if (!e || tier >= KVC_NR_TIERS || !is_published(ev, e->ns))
		return;
	if (ev->n == ev->cap) {
		size_t cap = ev->cap ? ev->cap * 2 : EVENTS_BATCH;

		q = realloc(ev->q, cap * sizeof(*q));
		if (!q) {
			ev->dropped++;
			return;
		}
		ev->q = q;
		ev->cap = cap;
	}
	q = &ev->q[ev->n++];
	q->stored = present;
	q->tier = (uint8_t)tier;
	memcpy(q->key, e->key, KVCACHE_KEY_SIZE);
	q->has_parent = e->parent != KVC_ID_NONE;
	if (q->has_parent)
		memcpy(q->parent, kvc_index_entry(idx, e->parent)->key,
		       KVCACHE_KEY_SIZE);
	/* A start with a full g4 finds its blocks by the hundred thousand. */
	if (ev->n >= 64 * EVENTS_BATCH)
		kvcd_events_flush(d);
}

/* ---- ipc:// ------------------------------------------------------------- */

/* "" (kvcached's own group), a group name or a number: the gid, or -errno. */
static int group_id(const char *name, gid_t *gid)
{
	struct group gr, *res = NULL;
	char buf[4096], *end;
	unsigned long v;
	int ret;

	if (!name[0]) {
		*gid = getegid();
		return 0;
	}
	ret = getgrnam_r(name, &gr, buf, sizeof(buf), &res);
	if (!ret && res) {
		*gid = gr.gr_gid;
		return 0;
	}
	errno = 0;
	v = strtoul(name, &end, 10);
	if (!*end && !errno && v < (gid_t)-1) {
		*gid = (gid_t)v;
		return 0;
	}
	return ret ? -ret : -ENOENT;
}

/*
 * The ipc:// socket, bound by hand and given to libzmq (ZMQ_USE_FD): a
 * Unix socket file gets the umask's mode when bind() makes it, and
 * whoever connects between that and a chmod() is in. So it is bound in a
 * directory only kvcached can enter (mkdtemp(), 0700) next to the final
 * path, given its group and mode there, and renamed into place: it is
 * never reachable with other permissions. A non-socket at the path is
 * refused, not replaced. 0 with the listening fd in *fd, or -errno.
 */
static int bind_ipc(struct kvcd_events *ev, const char *path,
		    unsigned int mode, const char *group, int *fd)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char tmpdir[sizeof(sa.sun_path)];
	const char *slash = strrchr(path, '/');
	struct stat st;
	gid_t gid;
	int s = -1, ret;

	ret = group_id(group, &gid);
	if (ret) {
		kvc_err("[events] ipc_group %s: %s", group,
			ret == -ENOENT ? "no such group" : strerror(-ret));
		return ret;
	}
	if (lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode)) {
		kvc_err("[events] %s exists and is not a socket", path);
		return -EEXIST;
	}
	/* dir/.kvcev.XXXXXX/s must fit where path would. */
	if (snprintf(tmpdir, sizeof(tmpdir), "%.*s/.kvcev.XXXXXX",
		     (int)(slash - path), path) >= (int)sizeof(tmpdir) - 2) {
		kvc_err("[events] %s: path too long", path);
		return -ENAMETOOLONG;
	}
	if (!mkdtemp(tmpdir)) {
		ret = -errno;
		kvc_err("[events] a directory next to %s: %s", path,
			strerror(-ret));
		return ret;
	}
	/* Fits: tmpdir is at least 2 bytes shorter than sun_path. */
	if (snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/s", tmpdir) >=
	    (int)sizeof(sa.sun_path)) {
		rmdir(tmpdir);
		return -ENAMETOOLONG;
	}
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof(sa)) ||
	    chown(sa.sun_path, (uid_t)-1, gid) ||
	    chmod(sa.sun_path, mode) || listen(s, SOMAXCONN) ||
	    rename(sa.sun_path, path) || stat(path, &st)) {
		ret = -errno;
		kvc_err("[events] %s (group %u, mode %04o): %s", path,
			(unsigned int)gid, mode, strerror(-ret));
		unlink(sa.sun_path);
		rmdir(tmpdir);
		if (s >= 0)
			close(s);
		return ret;
	}
	rmdir(tmpdir);
	strcpy(ev->ipc_path, path);
	ev->ipc_dev = st.st_dev;
	ev->ipc_ino = st.st_ino;
	*fd = s;
	return 0;
}

/* Remove the socket file if it is still the one bind_ipc() made. */
static void unlink_ipc(struct kvcd_events *ev)
{
	struct stat st;

	if (ev->ipc_path[0] && !lstat(ev->ipc_path, &st) &&
	    st.st_dev == ev->ipc_dev && st.st_ino == ev->ipc_ino)
		unlink(ev->ipc_path);
	ev->ipc_path[0] = '\0';
}

/* ---- CURVE -------------------------------------------------------------- */

/*
 * Each key file is lines of one Z85 key (40 characters), '#' comments
 * and blank lines. fn gets each key decoded; 0, or -errno said in the log.
 */
static int read_keys(const char *path, bool secret,
		     int (*fn)(void *arg, const uint8_t *key, const char *z85),
		     void *arg)
{
	char line[256], *s, *e;
	uint8_t key[CURVE_KEY];
	unsigned int lineno = 0;
	struct stat st;
	FILE *f;
	int fd, ret = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		ret = -errno;
		kvc_err("[events] %s: %s", path, strerror(-ret));
		if (fd >= 0)
			close(fd);
		return ret;
	}
	if (!S_ISREG(st.st_mode) || (secret && (st.st_mode & 077)) ||
	    (st.st_mode & 002)) {
		kvc_err("[events] %s: %s", path, !S_ISREG(st.st_mode) ?
			"not a regular file" : secret ?
			"group or others may read it (chmod 600)" :
			"others may write it");
		close(fd);
		return -EPERM;
	}
	f = fdopen(fd, "r");
	if (!f) {
		ret = -errno;
		close(fd);
		return ret;
	}
	while (!ret && fgets(line, sizeof(line), f)) {
		lineno++;
		for (s = line; *s == ' ' || *s == '\t'; s++)
			;
		for (e = s + strlen(s); e > s && strchr(" \t\r\n", e[-1]); e--)
			;
		*e = '\0';
		if (!*s || *s == '#')
			continue;
		if (e - s != 40 || !zmq_z85_decode(key, s)) {
			kvc_err("[events] %s:%u: not a Z85 CURVE key (40 characters)",
				path, lineno);
			ret = -EINVAL;
			break;
		}
		ret = fn(arg, key, s);
		memset(key, 0, sizeof(key));
	}
	if (!ret && ferror(f))
		ret = -EIO;
	memset(line, 0, sizeof(line));
	fclose(f);
	return ret;
}

struct secret {
	uint8_t key[CURVE_KEY];
	char public[41];
	unsigned int n;
};

static int take_secret(void *arg, const uint8_t *key, const char *z85)
{
	struct secret *sk = arg;

	if (sk->n++)
		return 0;	/* counted: more than one is refused */
	memcpy(sk->key, key, CURVE_KEY);
	return zmq_curve_public(sk->public, z85) ? -EINVAL : 0;
}

static int take_client(void *arg, const uint8_t *key, const char *z85)
{
	struct kvcd_events *ev = arg;

	(void)z85;
	if (ev->nallowed == EVENTS_CLIENTS_MAX)
		return -E2BIG;
	memcpy(ev->allowed[ev->nallowed++], key, CURVE_KEY);
	return 0;
}

static int cmp_key(const void *a, const void *b)
{
	return memcmp(a, b, CURVE_KEY);
}

static bool is_allowed(const struct kvcd_events *ev, const void *key)
{
	return bsearch(key, ev->allowed, ev->nallowed, CURVE_KEY,
		       cmp_key) != NULL;
}

/* Receive one frame into buf (at most len bytes kept): its size, or -1. */
static int zap_frame(void *s, char *buf, size_t len, bool *more)
{
	zmq_msg_t m;
	int n;

	zmq_msg_init(&m);
	n = zmq_msg_recv(&m, s, 0);
	if (n >= 0) {
		memcpy(buf, zmq_msg_data(&m), (size_t)n < len ? (size_t)n : len);
		*more = zmq_msg_more(&m);
	}
	zmq_msg_close(&m);
	return n;
}

/* One frame of a ZAP reply: 0, or -1 (zmq_errno()). */
static int zap_send(void *s, const void *buf, size_t len, bool more)
{
	int ret;

	do
		ret = zmq_send(s, buf, len, more ? ZMQ_SNDMORE : 0);
	while (ret < 0 && zmq_errno() == EINTR);
	return ret < 0 ? -1 : 0;
}

/*
 * The ZAP handler (RFC 27): a request is version, request id, domain,
 * address, identity, mechanism and, for CURVE, the client's 32-byte
 * public key. The answer is 200 for a key in the allow-list and 400 for
 * anything else, a request malformed included. Runs until the context
 * is shut down; a ZAP handler that went away would let libzmq admit
 * every CURVE client, so no other error ends it.
 */
static void *zap_main(void *arg)
{
	static struct kvc_ratelimit rs = KVC_RATELIMIT_INIT;
	struct kvcd_events *ev = arg;
	char frame[7][64];
	int len[7], n;
	bool more, ok;

	for (;;) {
		n = 0;
		more = true;
		while (more) {
			int r = zap_frame(ev->zap, frame[n < 7 ? n : 6],
					  sizeof(frame[0]), &more);

			if (r < 0) {
				if (zmq_errno() == ETERM)
					return NULL;
				if (zmq_errno() == EINTR)
					continue;
				/* Never seen; not a hot loop should it be. */
				nanosleep(&(struct timespec){ 0, 10000000 },
					  NULL);
				break;
			}
			if (n < 7)
				len[n] = r;
			n++;
		}
		if (more)
			continue;
		ok = n == 7 && len[0] == 3 && !memcmp(frame[0], "1.0", 3) &&
		     len[5] == 5 && !memcmp(frame[5], "CURVE", 5) &&
		     len[6] == CURVE_KEY && is_allowed(ev, frame[6]);
		if (!ok) {
			atomic_fetch_add(&ev->denied, 1);
			if (kvc_ratelimit(&rs)) {
				char z85[41] = "?";

				if (n == 7 && len[6] == CURVE_KEY)
					zmq_z85_encode(z85, (uint8_t *)frame[6],
						       CURVE_KEY);
				kvc_warn("[events] subscriber refused: key %s not in curve_clients",
					 z85);
			}
		}
		/* The request id echoed back (up to 63 bytes: libzmq's is 1). */
		if ((zap_send(ev->zap, "1.0", 3, true) ||
		     zap_send(ev->zap, frame[1], n > 1 && len[1] < 64 ?
			      (size_t)len[1] : 0, true) ||
		     zap_send(ev->zap, ok ? "200" : "400", 3, true) ||
		     zap_send(ev->zap, ok ? "OK" : "not allowed",
			      ok ? 2 : 11, true) ||
		     zap_send(ev->zap, "", 0, true) ||
		     zap_send(ev->zap, "", 0, false)) &&
		    zmq_errno() == ETERM)
			return NULL;
	}
}

/*
 * CURVE on the PUB socket: the server's secret key, the clients allowed
 * and the ZAP handler that checks them, bound before the PUB socket is.
 */
static int setup_curve(struct kvcd_events *ev, const struct kvc_config *cfg)
{
	struct secret sk = { 0 };
	sigset_t all, old;
	int one = 1, ret;

	if (!zmq_has("curve")) {
		kvc_err("[events] this libzmq has no CURVE");
		return -EOPNOTSUPP;
	}
	ret = read_keys(cfg->events.curve_secret_key, true, take_secret, &sk);
	if (!ret && sk.n != 1) {
		kvc_err("[events] %s: must hold one secret key",
			cfg->events.curve_secret_key);
		ret = -EINVAL;
	}
	ev->allowed = ret ? NULL : calloc(EVENTS_CLIENTS_MAX, CURVE_KEY);
	if (!ret && !ev->allowed)
		ret = -ENOMEM;
	if (!ret)
		ret = read_keys(cfg->events.curve_clients, false, take_client,
				ev);
	if (ret == -E2BIG)
		kvc_err("[events] %s: more than %d keys",
			cfg->events.curve_clients, EVENTS_CLIENTS_MAX);
	if (!ret && !ev->nallowed) {
		kvc_err("[events] %s: lists no key", cfg->events.curve_clients);
		ret = -EINVAL;
	}
	if (ret)
		goto out;
	qsort(ev->allowed, ev->nallowed, CURVE_KEY, cmp_key);

	ev->zap = zmq_socket(ev->ctx, ZMQ_REP);
	if (!ev->zap || zmq_bind(ev->zap, ZAP_ENDPOINT) ||
	    zmq_setsockopt(ev->sock, ZMQ_CURVE_SERVER, &one, sizeof(one)) ||
	    zmq_setsockopt(ev->sock, ZMQ_CURVE_SECRETKEY, sk.key,
			   CURVE_KEY) ||
	    zmq_setsockopt(ev->sock, ZMQ_ZAP_DOMAIN, ZAP_DOMAIN,
			   strlen(ZAP_DOMAIN))) {
		ret = -zmq_errno();
		kvc_err("[events] CURVE: %s", zmq_strerror(-ret));
		goto out;
	}
	/* Refuse, rather than admit, should the handler be gone. */
	zmq_setsockopt(ev->sock, EVENTS_ZAP_ENFORCE, &one, sizeof(one));
	/* Signals are the loop's (a SIGTERM must interrupt its wait): the
	 * handler starts with all of them blocked, as the tier workers. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = -pthread_create(&ev->zap_thread, NULL, zap_main, ev);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret) {
		kvc_err("[events] ZAP thread: %s", strerror(-ret));
		goto out;
	}
	ev->zap_running = true;
	kvc_info("[events] CURVE, server public key %s, %zu clients allowed",
		 sk.public, ev->nallowed);
out:
	memset(&sk, 0, sizeof(sk));
	return ret;
}

/* ---- the socket --------------------------------------------------------- */

static void teardown(struct kvcd_events *ev)
{
	if (ev->sock)
		zmq_close(ev->sock);
	if (ev->zap_running) {
		/* Wakes the handler's receive with ETERM. */
		zmq_ctx_shutdown(ev->ctx);
		pthread_join(ev->zap_thread, NULL);
	}
	if (ev->zap)
		zmq_close(ev->zap);
	if (ev->ctx)
		zmq_ctx_term(ev->ctx);
	unlink_ipc(ev);
	free(ev->allowed);
	kvc_mp_free(&ev->mp);
	free(ev->q);
	free(ev);
}

int kvcd_events_open(struct kvcd *d)
{
	const struct kvc_config *cfg = &d->cfg;
	const char *ep = cfg->events.endpoint;
	struct kvcd_events *ev;
	int hwm = (int)cfg->events.hwm, linger = 0, fd = -1, ret = 0;
	int64_t maxmsg = EVENTS_MAXMSG;

	if (!ep[0])
		return 0;
	ev = calloc(1, sizeof(*ev));
	if (!ev)
		return -ENOMEM;
	kvc_mp_init(&ev->mp);
	strcpy(ev->topic, cfg->events.topic);
	for (unsigned int i = 0; i < cfg->events.nr_ns; i++) {
		for (uint32_t ns = cfg->events.ns[i].lo;
		     ns <= cfg->events.ns[i].hi; ns++)
			ev->published[ns / 8] |= (uint8_t)(1u << (ns % 8));
	}
	ev->ctx = zmq_ctx_new();
	ev->sock = ev->ctx ? zmq_socket(ev->ctx, ZMQ_PUB) : NULL;
	if (!ev->sock ||
	    zmq_setsockopt(ev->sock, ZMQ_SNDHWM, &hwm, sizeof(hwm)) ||
	    zmq_setsockopt(ev->sock, ZMQ_MAXMSGSIZE, &maxmsg,
			   sizeof(maxmsg)) ||
	    zmq_setsockopt(ev->sock, ZMQ_LINGER, &linger, sizeof(linger))) {
		ret = -zmq_errno();
		kvc_err("[events] endpoint %s: %s", ep, zmq_strerror(-ret));
		goto fail;
	}
	if (cfg->events.curve_secret_key[0]) {
		ret = setup_curve(ev, cfg);
		if (ret)
			goto fail;
	}
	if (!strncmp(ep, "ipc://", 6)) {
		ret = bind_ipc(ev, ep + 6, cfg->events.ipc_mode,
			       cfg->events.ipc_group, &fd);
		if (ret)
			goto fail;
		if (zmq_setsockopt(ev->sock, ZMQ_USE_FD, &fd, sizeof(fd))) {
			ret = -zmq_errno();
			close(fd);
			kvc_err("[events] endpoint %s: %s", ep,
				zmq_strerror(-ret));
			goto fail;
		}
	}
	/* From here on libzmq owns fd, and closes it with the socket. */
	if (zmq_bind(ev->sock, ep)) {
		ret = -zmq_errno();
		kvc_err("[events] endpoint %s: %s", ep, zmq_strerror(-ret));
		if (fd >= 0)
			close(fd);
		goto fail;
	}
	/* Whatever a router knew of this node's last run is gone. */
	ev->cleared = true;
	d->events = ev;
	if (kvc_index_observe(d->index, observed, d))
		kvc_warn("[events] no observer slot left in the index");
	kvc_info("KV events on %s (topic '%s', hwm %u)", ep, ev->topic,
		 cfg->events.hwm);
	/* An endpoint set before namespaces existed published everything. */
	if (!cfg->events.nr_ns)
		kvc_warn("[events] namespaces lists none: no block is published");
	return 0;
fail:
	teardown(ev);
	return ret < 0 ? ret : -EINVAL;
}

void kvcd_events_close(struct kvcd *d)
{
	struct kvcd_events *ev = d->events;

	if (!ev)
		return;
	kvc_index_unobserve(d->index, observed);
	teardown(ev);
	d->events = NULL;
}

uint64_t kvcd_events_denied(const struct kvcd *d)
{
	return d->events ? atomic_load(&d->events->denied) : 0;
}

uint64_t kvcd_events_sent(const struct kvcd *d)
{
	return d->events ? d->events->sent : 0;
}

uint64_t kvcd_events_dropped(const struct kvcd *d)
{
	return d->events ? d->events->dropped : 0;
}
