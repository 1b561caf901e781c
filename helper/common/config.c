// SPDX-License-Identifier: GPL-2.0
/*
 * config: parse, check and dump kvcached.conf (see config.h and
 * Documentation/admin-guide/kvcached-config.md).
 *
 * One table describes every key: its section, value type, where it lives
 * in struct kvc_config and its range. The parser, the duplicate check,
 * the dump and the diff all walk that table, so a key added there is
 * parsed, checked, dumped and compared without further code; only
 * checks that involve two keys are written out (check_combined()).
 */
#include "config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/un.h>

_Static_assert(KVC_CONFIG_SOCK_PATH_MAX == sizeof(((struct sockaddr_un *)0)->sun_path),
	       "KVC_CONFIG_SOCK_PATH_MAX must match sun_path");

/* Defaults, also quoted in kvcached.conf and the documentation. */
#define DEF_SOCKET		"/run/kvcache/kvcached.sock"
#define DEF_METRICS		"/run/kvcache/metrics.sock"
#define DEF_METRICS_ADDRESS	"127.0.0.1"
/* Persistent: the salts must outlive a reboot (kvcached.service's
 * StateDirectory=kvcache/state). */
#define DEF_STATE_DIR		"/var/lib/kvcache/state"

/* The kernel module's limits for the same pool settings (Documentation/admin-guide/index.md). */
#define MIN_BLOCK_SIZE		4096ULL
#define MAX_BLOCK_SIZE		(64ULL << 20)
#define MAX_POOL_BLOCKS		16777216ULL

enum vtype {
	V_STRING,	/* char[size]; check() may refuse it */
	V_OCTAL,	/* unsigned int, always read as octal */
	V_UINT,		/* unsigned int, size suffixes allowed */
	V_SIZE,		/* uint64_t bytes, size suffixes allowed */
	V_DURATION,	/* uint64_t milliseconds, unit required */
	V_BOOL,		/* bool */
	V_ENUM,		/* int, index into names[] */
	V_LISTEN,	/* struct kvc_config_listen */
	V_NSLIST,	/* [events] namespaces: ns[] and nr_ns */
};

/* Keys, in file and dump order; indices into keys[]. */
enum {
	K_SOCKET,
	K_SOCKET_MODE,
	K_METRICS,
	K_METRICS_ADDRESS,
	K_METRICS_MODE,
	K_METRICS_GROUP,
	K_METRICS_TIMEOUT,
	K_LOG_LEVEL,
	K_MODE,
	K_STATE_DIR,
	K_ALLOW_MISSING_STATE,
	K_LOAD_TIMEOUT,
	K_TOUCH_RATE,
	K_MEMFD_SIZE,
	K_BLOCK_SIZE,
	K_HUGETLB,
	K_MLOCK,
	K_FAST_INDEX,
	K_LOW_WATERMARK,
	K_HIGH_WATERMARK,
	K_PREFETCH,
	K_POLICY,
	K_POOL_ADMIT,
	K_G3_ADMIT,
	K_G4_ADMIT,
	K_G3_POLICY,
	K_G4_POLICY,
	K_S3FIFO_SMALL,
	K_INTERVAL,
	K_G3_DIRECTORY,
	K_G3_CAPACITY,
	K_G3_WRITE,
	K_G3_FSYNC,
	K_G3_IO_PRIORITY,
	K_G3_QUEUE_DEPTH,
	K_G4_DIRECTORY,
	K_G4_CAPACITY,
	K_G4_NODE,
	K_G4_SCAN_INTERVAL,
	K_G4_WRITE,
	K_G4_FSYNC,
	K_G4_IO_PRIORITY,
	K_G4_QUEUE_DEPTH,
	K_G4_GRACE,
	K_G4_TRUSTED_UID,
	K_G4_NS_LEARN_MAX,
	K_EVENTS_ENDPOINT,
	K_EVENTS_TOPIC,
	K_EVENTS_NAMESPACES,
	K_EVENTS_HWM,
	K_EVENTS_IPC_MODE,
	K_EVENTS_IPC_GROUP,
	K_EVENTS_CURVE_SECRET_KEY,
	K_EVENTS_CURVE_CLIENTS,
	NKEYS
};

struct key {
	const char *section;
	const char *name;
	enum vtype type;
	size_t offset;		/* of the field in struct kvc_config */
	size_t size;		/* V_STRING: the field's size, NUL included */
	uint64_t min, max;	/* V_OCTAL, V_UINT, V_SIZE, V_DURATION */
	bool pow2;		/* V_SIZE: must be a power of two */
	const char *const *names;	/* V_ENUM, indexed by value */
	/* V_STRING: NULL, or a reason why value is not acceptable. */
	const char *(*check)(const char *value);
};

static const char *const log_level_names[] = {
	"error", "warn", "info", "debug", NULL
};
static const char *const mode_names[] = { "auto", "kernel", "memfd", NULL };
static const char *const hugetlb_names[] = { "auto", "yes", "no", NULL };
static const char *const policy_names[] = {
	"lru", "s3fifo", "cost", "density", NULL,
};
static const char *const write_names[] = { "back", "through", NULL };
static const char *const fsync_names[] = { "always", "never", NULL };

static const char *check_abs_path(const char *v)
{
	return v[0] == '/' ? NULL : "must be an absolute path";
}

/* Tier directories may be empty: that switches the tier off. */
static const char *check_dir(const char *v)
{
	return v[0] == '\0' || v[0] == '/' ? NULL :
	       "must be empty or an absolute path";
}

/*
 * The node name names this node's directory in the shared g4 storage, so
 * it must be a plain file name on every file system: no '/', no "." or
 * "..", nothing a shell or NFS export would mangle.
 */
static const char *check_node(const char *v)
{
	size_t i;

	if (v[0] == '\0')
		return NULL;
	if (!isalnum((unsigned char)v[0]))
		return "must start with a letter or digit";
	for (i = 0; v[i]; i++) {
		if (!isalnum((unsigned char)v[i]) && !strchr("._-", v[i]))
			return "may only hold letters, digits, '.', '_' and '-'";
	}
	return NULL;
}

static const char *check_address(const char *v)
{
	unsigned char buf[16];

	if (inet_pton(AF_INET, v, buf) == 1 || inet_pton(AF_INET6, v, buf) == 1)
		return NULL;
	return "not an IPv4 or IPv6 address";
}

bool kvc_config_squash_uid(uint32_t uid)
{
	return uid == 65534 || uid == UINT32_MAX - 1 || uid == UINT32_MAX;
}

/*
 * [g4] trusted_uid: empty (none), or a decimal uid that is not one every
 * squashed user of an NFS client becomes: trusting that one would trust
 * any process on any node (Documentation/admin-guide/kvcached-config.md).
 */
static const char *check_trusted_uid(const char *v)
{
	unsigned long long uid;
	char *end;

	if (!v[0])
		return NULL;
	if (strspn(v, "0123456789") != strlen(v) || strlen(v) > 10)
		return "is not a uid (a decimal number)";
	errno = 0;
	uid = strtoull(v, &end, 10);
	if (errno || *end || uid > UINT32_MAX)
		return "is not a uid (a decimal number)";
	if (kvc_config_squash_uid((uint32_t)uid))
		return "is a squash uid (nobody, nfsnobody, -1): every squashed user of every node has it; set anonuid= on the export to an id of its own";
	return NULL;
}

bool kvc_config_trusted_uid(const struct kvc_config *cfg, uint32_t *uid)
{
	if (!cfg->g4.trusted_uid[0])
		return false;
	/* Checked by check_trusted_uid() when it was parsed. */
	*uid = (uint32_t)strtoul(cfg->g4.trusted_uid, NULL, 10);
	return true;
}

/* A ZeroMQ endpoint to bind: tcp://ADDRESS:PORT or ipc:///PATH. */
static const char *check_endpoint(const char *v)
{
	const char *colon;

	if (!v[0])
		return NULL;	/* off */
	if (!strncmp(v, "ipc://", 6))
		return v[6] == '/' ? NULL : "ipc:// needs an absolute path";
	if (strncmp(v, "tcp://", 6))
		return "not tcp://ADDRESS:PORT or ipc:///PATH";
	colon = strrchr(v + 6, ':');
	if (!colon || colon == v + 6 || !colon[1] ||
	    strspn(colon + 1, "0123456789") != strlen(colon + 1) ||
	    atol(colon + 1) < 1 || atol(colon + 1) > 65535)
		return "tcp:// needs ADDRESS:PORT, a port from 1 to 65535";
	return NULL;
}

/*
 * A group for a socket (the events' ipc:// one, the metrics endpoint's):
 * empty (the daemon's own), a name as useradd allows it, or a number, so
 * that nothing odd reaches getgrnam(). Whether it exists is known only
 * where kvcached starts.
 */
static const char *check_group(const char *v)
{
	size_t i;

	for (i = 0; v[i]; i++) {
		if (!isalnum((unsigned char)v[i]) && !strchr("._-", v[i]))
			return "may only hold letters, digits, '.', '_' and '-'";
	}
	return v[0] == '-' ? "must not start with '-'" : NULL;
}

/* Durations are in milliseconds: 1ms to 1m, 100ms to 60m. */
static const struct key keys[NKEYS] = {
	[K_SOCKET] = {
		.section = "daemon", .name = "socket", .type = V_STRING,
		.offset = offsetof(struct kvc_config, daemon.socket),
		.size = KVC_CONFIG_SOCK_PATH_MAX, .check = check_abs_path,
	},
	[K_SOCKET_MODE] = {
		.section = "daemon", .name = "socket_mode", .type = V_OCTAL,
		.offset = offsetof(struct kvc_config, daemon.socket_mode),
		.min = 0, .max = 0777,
	},
	[K_METRICS] = {
		.section = "daemon", .name = "metrics", .type = V_LISTEN,
		.offset = offsetof(struct kvc_config, daemon.metrics),
	},
	[K_METRICS_ADDRESS] = {
		.section = "daemon", .name = "metrics_address", .type = V_STRING,
		.offset = offsetof(struct kvc_config, daemon.metrics_address),
		.size = KVC_CONFIG_ADDR_MAX, .check = check_address,
	},
	[K_METRICS_MODE] = {
		.section = "daemon", .name = "metrics_mode", .type = V_OCTAL,
		.offset = offsetof(struct kvc_config, daemon.metrics_mode),
		.min = 0, .max = 0777,
	},
	[K_METRICS_GROUP] = {
		.section = "daemon", .name = "metrics_group", .type = V_STRING,
		.offset = offsetof(struct kvc_config, daemon.metrics_group),
		.size = KVC_CONFIG_GROUP_MAX, .check = check_group,
	},
	[K_METRICS_TIMEOUT] = {
		.section = "daemon", .name = "metrics_timeout",
		.type = V_DURATION,
		.offset = offsetof(struct kvc_config, daemon.metrics_timeout_ms),
		.min = 100, .max = 600000,
	},
	[K_LOG_LEVEL] = {
		.section = "daemon", .name = "log_level", .type = V_ENUM,
		.offset = offsetof(struct kvc_config, daemon.log_level),
		.names = log_level_names,
	},
	[K_MODE] = {
		.section = "daemon", .name = "mode", .type = V_ENUM,
		.offset = offsetof(struct kvc_config, daemon.mode),
		.names = mode_names,
	},
	[K_STATE_DIR] = {
		.section = "daemon", .name = "state_dir", .type = V_STRING,
		.offset = offsetof(struct kvc_config, daemon.state_dir),
		.size = KVC_CONFIG_DIR_MAX, .check = check_abs_path,
	},
	[K_ALLOW_MISSING_STATE] = {
		.section = "daemon", .name = "allow_missing_state",
		.type = V_BOOL,
		.offset = offsetof(struct kvc_config, daemon.allow_missing_state),
	},
	[K_LOAD_TIMEOUT] = {
		.section = "daemon", .name = "load_timeout", .type = V_DURATION,
		.offset = offsetof(struct kvc_config, daemon.load_timeout_ms),
		.min = 10, .max = 600000,
	},
	[K_TOUCH_RATE] = {
		.section = "daemon", .name = "touch_rate", .type = V_UINT,
		.offset = offsetof(struct kvc_config, daemon.touch_rate),
		.min = 0, .max = 1u << 30,
	},
	[K_MEMFD_SIZE] = {
		.section = "pool", .name = "memfd_size", .type = V_SIZE,
		.offset = offsetof(struct kvc_config, pool.memfd_size),
		.min = 0, .max = UINT64_MAX,
	},
	[K_BLOCK_SIZE] = {
		.section = "pool", .name = "block_size", .type = V_SIZE,
		.offset = offsetof(struct kvc_config, pool.block_size),
		.min = MIN_BLOCK_SIZE, .max = MAX_BLOCK_SIZE, .pow2 = true,
	},
	[K_HUGETLB] = {
		.section = "pool", .name = "hugetlb", .type = V_ENUM,
		.offset = offsetof(struct kvc_config, pool.hugetlb),
		.names = hugetlb_names,
	},
	[K_MLOCK] = {
		.section = "pool", .name = "mlock", .type = V_BOOL,
		.offset = offsetof(struct kvc_config, pool.mlock),
	},
	[K_FAST_INDEX] = {
		.section = "pool", .name = "fast_index", .type = V_BOOL,
		.offset = offsetof(struct kvc_config, pool.fast_index),
	},
	[K_LOW_WATERMARK] = {
		.section = "pool", .name = "low_watermark", .type = V_UINT,
		.offset = offsetof(struct kvc_config, pool.low_watermark),
		.min = 0, .max = 99,
	},
	[K_HIGH_WATERMARK] = {
		.section = "pool", .name = "high_watermark", .type = V_UINT,
		.offset = offsetof(struct kvc_config, pool.high_watermark),
		.min = 1, .max = 100,
	},
	[K_POLICY] = {
		.section = "eviction", .name = "policy", .type = V_ENUM,
		.offset = offsetof(struct kvc_config, eviction.policy),
		.names = policy_names,
	},
	[K_POOL_ADMIT] = {
		.section = "eviction", .name = "pool_admit", .type = V_UINT,
		.offset = offsetof(struct kvc_config, eviction.pool_admit),
		.min = 1, .max = 255,
	},
	[K_G3_ADMIT] = {
		.section = "eviction", .name = "g3_admit", .type = V_UINT,
		.offset = offsetof(struct kvc_config, eviction.g3_admit),
		.min = 1, .max = 255,
	},
	[K_G4_ADMIT] = {
		.section = "eviction", .name = "g4_admit", .type = V_UINT,
		.offset = offsetof(struct kvc_config, eviction.g4_admit),
		.min = 1, .max = 255,
	},
	[K_G3_POLICY] = {
		.section = "eviction", .name = "g3_policy", .type = V_ENUM,
		.offset = offsetof(struct kvc_config, eviction.g3_policy),
		.names = policy_names,
	},
	[K_G4_POLICY] = {
		.section = "eviction", .name = "g4_policy", .type = V_ENUM,
		.offset = offsetof(struct kvc_config, eviction.g4_policy),
		.names = policy_names,
	},
	[K_S3FIFO_SMALL] = {
		.section = "eviction", .name = "s3fifo_small", .type = V_UINT,
		.offset = offsetof(struct kvc_config, eviction.s3fifo_small),
		.min = 1, .max = 50,
	},
	[K_INTERVAL] = {
		.section = "eviction", .name = "interval", .type = V_DURATION,
		.offset = offsetof(struct kvc_config, eviction.interval_ms),
		.min = 1, .max = 60000,
	},
	[K_G3_DIRECTORY] = {
		.section = "g3", .name = "directory", .type = V_STRING,
		.offset = offsetof(struct kvc_config, g3.directory),
		.size = KVC_CONFIG_DIR_MAX, .check = check_dir,
	},
	[K_G3_CAPACITY] = {
		.section = "g3", .name = "capacity", .type = V_SIZE,
		.offset = offsetof(struct kvc_config, g3.capacity),
		.min = 0, .max = UINT64_MAX,
	},
	[K_G4_DIRECTORY] = {
		.section = "g4", .name = "directory", .type = V_STRING,
		.offset = offsetof(struct kvc_config, g4.directory),
		.size = KVC_CONFIG_DIR_MAX, .check = check_dir,
	},
	[K_G4_CAPACITY] = {
		.section = "g4", .name = "capacity", .type = V_SIZE,
		.offset = offsetof(struct kvc_config, g4.capacity),
		.min = 0, .max = UINT64_MAX,
	},
	[K_G4_NODE] = {
		.section = "g4", .name = "node", .type = V_STRING,
		.offset = offsetof(struct kvc_config, g4.node),
		.size = KVC_CONFIG_NODE_MAX, .check = check_node,
	},
	[K_G4_SCAN_INTERVAL] = {
		.section = "g4", .name = "scan_interval", .type = V_DURATION,
		.offset = offsetof(struct kvc_config, g4.scan_interval_ms),
		.min = 100, .max = 3600000,
	},
	[K_PREFETCH] = {
		.section = "pool", .name = "prefetch", .type = V_UINT,
		.offset = offsetof(struct kvc_config, pool.prefetch),
		.min = 0, .max = 1024,
	},
	[K_G3_WRITE] = {
		.section = "g3", .name = "write", .type = V_ENUM,
		.offset = offsetof(struct kvc_config, g3.write),
		.names = write_names,
	},
	[K_G3_FSYNC] = {
		.section = "g3", .name = "fsync", .type = V_ENUM,
		.offset = offsetof(struct kvc_config, g3.fsync),
		.names = fsync_names,
	},
	[K_G3_IO_PRIORITY] = {
		.section = "g3", .name = "io_priority", .type = V_BOOL,
		.offset = offsetof(struct kvc_config, g3.io_priority),
	},
	[K_G3_QUEUE_DEPTH] = {
		.section = "g3", .name = "queue_depth", .type = V_UINT,
		.offset = offsetof(struct kvc_config, g3.queue_depth),
		.min = 1, .max = 256,
	},
	[K_G4_WRITE] = {
		.section = "g4", .name = "write", .type = V_ENUM,
		.offset = offsetof(struct kvc_config, g4.write),
		.names = write_names,
	},
	[K_G4_FSYNC] = {
		.section = "g4", .name = "fsync", .type = V_ENUM,
		.offset = offsetof(struct kvc_config, g4.fsync),
		.names = fsync_names,
	},
	[K_G4_IO_PRIORITY] = {
		.section = "g4", .name = "io_priority", .type = V_BOOL,
		.offset = offsetof(struct kvc_config, g4.io_priority),
	},
	[K_G4_QUEUE_DEPTH] = {
		.section = "g4", .name = "queue_depth", .type = V_UINT,
		.offset = offsetof(struct kvc_config, g4.queue_depth),
		.min = 1, .max = 256,
	},
	[K_G4_GRACE] = {
		.section = "g4", .name = "grace", .type = V_DURATION,
		.offset = offsetof(struct kvc_config, g4.grace_ms),
		.min = 1000, .max = 86400000,
	},
	[K_G4_TRUSTED_UID] = {
		.section = "g4", .name = "trusted_uid", .type = V_STRING,
		.offset = offsetof(struct kvc_config, g4.trusted_uid),
		.size = KVC_CONFIG_UID_MAX, .check = check_trusted_uid,
	},
	[K_G4_NS_LEARN_MAX] = {
		.section = "g4", .name = "ns_learn_max", .type = V_UINT,
		.offset = offsetof(struct kvc_config, g4.ns_learn_max),
		.min = 1, .max = 65535,
	},
	[K_EVENTS_ENDPOINT] = {
		.section = "events", .name = "endpoint", .type = V_STRING,
		.offset = offsetof(struct kvc_config, events.endpoint),
		.size = KVC_CONFIG_EVENTS_MAX, .check = check_endpoint,
	},
	[K_EVENTS_TOPIC] = {
		.section = "events", .name = "topic", .type = V_STRING,
		.offset = offsetof(struct kvc_config, events.topic),
		.size = KVC_CONFIG_TOPIC_MAX,
	},
	[K_EVENTS_NAMESPACES] = {
		.section = "events", .name = "namespaces", .type = V_NSLIST,
		.offset = offsetof(struct kvc_config, events.ns),
	},
	/* A message is about 70 KB at most: 32 of them 2.2 MB. */
	[K_EVENTS_HWM] = {
		.section = "events", .name = "hwm", .type = V_UINT,
		.offset = offsetof(struct kvc_config, events.hwm),
		.min = 1, .max = 1024,
	},
	[K_EVENTS_IPC_MODE] = {
		.section = "events", .name = "ipc_mode", .type = V_OCTAL,
		.offset = offsetof(struct kvc_config, events.ipc_mode),
		.min = 0, .max = 0777,
	},
	[K_EVENTS_IPC_GROUP] = {
		.section = "events", .name = "ipc_group", .type = V_STRING,
		.offset = offsetof(struct kvc_config, events.ipc_group),
		.size = KVC_CONFIG_GROUP_MAX, .check = check_group,
	},
	[K_EVENTS_CURVE_SECRET_KEY] = {
		.section = "events", .name = "curve_secret_key",
		.type = V_STRING,
		.offset = offsetof(struct kvc_config, events.curve_secret_key),
		.size = KVC_CONFIG_DIR_MAX, .check = check_dir,
	},
	[K_EVENTS_CURVE_CLIENTS] = {
		.section = "events", .name = "curve_clients", .type = V_STRING,
		.offset = offsetof(struct kvc_config, events.curve_clients),
		.size = KVC_CONFIG_DIR_MAX, .check = check_dir,
	},
};

static const char *const sections[] = {
	"daemon", "pool", "eviction", "g3", "g4", "events", NULL
};

void kvc_config_defaults(struct kvc_config *cfg)
{
	/* Zero first: unset string bytes and padding compare equal. */
	memset(cfg, 0, sizeof(*cfg));
	strcpy(cfg->daemon.socket, DEF_SOCKET);
	cfg->daemon.socket_mode = 0660;
	cfg->daemon.metrics.kind = KVC_CONFIG_LISTEN_UNIX;
	strcpy(cfg->daemon.metrics.path, DEF_METRICS);
	strcpy(cfg->daemon.metrics_address, DEF_METRICS_ADDRESS);
	cfg->daemon.metrics_mode = 0600;
	cfg->daemon.metrics_timeout_ms = 2000;
	cfg->daemon.log_level = KVC_CONFIG_LOG_INFO;
	cfg->daemon.mode = KVC_CONFIG_MODE_AUTO;
	strcpy(cfg->daemon.state_dir, DEF_STATE_DIR);
	cfg->daemon.allow_missing_state = false;
	cfg->daemon.load_timeout_ms = 2000;
	cfg->daemon.touch_rate = KVC_CONFIG_TOUCH_RATE;

	cfg->pool.memfd_size = 256ULL << 20;
	cfg->pool.block_size = 2ULL << 20;
	cfg->pool.hugetlb = KVC_CONFIG_HUGETLB_AUTO;
	cfg->pool.mlock = true;
	cfg->pool.fast_index = true;
	cfg->pool.low_watermark = 5;
	cfg->pool.high_watermark = 10;

	cfg->eviction.policy = KVC_CONFIG_POLICY_DENSITY;
	cfg->eviction.pool_admit = 1;
	cfg->eviction.g3_admit = 2;
	cfg->eviction.g4_admit = 2;
	cfg->eviction.s3fifo_small = 10;
	cfg->eviction.interval_ms = 100;

	cfg->pool.prefetch = 64;

	/* g3 and g4 stay off (empty directory, zero capacity). */
	cfg->g3.write = KVC_CONFIG_WRITE_BACK;
	cfg->g3.fsync = KVC_CONFIG_FSYNC_ALWAYS;
	cfg->g3.queue_depth = 8;
	cfg->g3.io_priority = true;
	cfg->g4.write = KVC_CONFIG_WRITE_THROUGH;
	cfg->g4.fsync = KVC_CONFIG_FSYNC_ALWAYS;
	cfg->g4.queue_depth = 8;
	cfg->g4.io_priority = true;
	cfg->g4.scan_interval_ms = 10000;
	cfg->g4.grace_ms = 60000;

	/* Events stay off (no endpoint) and publish no namespace. */
	cfg->events.hwm = 32;
	cfg->events.ipc_mode = 0600;
	cfg->g4.ns_learn_max = 64;
}

static const char *enum_name(const char *const *names, int v)
{
	int i;

	for (i = 0; names[i]; i++) {
		if (i == v)
			return names[i];
	}
	return "?";
}

const char *kvc_config_log_level_name(int level)
{
	return enum_name(log_level_names, level);
}

const char *kvc_config_mode_name(int mode)
{
	return enum_name(mode_names, mode);
}

const char *kvc_config_hugetlb_name(int hugetlb)
{
	return enum_name(hugetlb_names, hugetlb);
}

const char *kvc_config_policy_name(int policy)
{
	return enum_name(policy_names, policy);
}

/* ---- formatting values (dump and messages) ------------------------------ */

/* Bytes with the largest exact suffix: 2097152 -> "2M", 1000 -> "1000". */
static void fmt_size(uint64_t v, char *out, size_t len)
{
	static const char suffix[] = "KMGT";
	int i = -1;

	while (i < 3 && v && !(v & 1023)) {
		v >>= 10;
		i++;
	}
	if (i < 0)
		snprintf(out, len, "%" PRIu64, v);
	else
		snprintf(out, len, "%" PRIu64 "%c", v, suffix[i]);
}

/* Milliseconds with the largest exact unit: 60000 -> "1m". */
static void fmt_duration(uint64_t ms, char *out, size_t len)
{
	if (ms && ms % 60000 == 0)
		snprintf(out, len, "%" PRIu64 "m", ms / 60000);
	else if (ms && ms % 1000 == 0)
		snprintf(out, len, "%" PRIu64 "s", ms / 1000);
	else
		snprintf(out, len, "%" PRIu64 "ms", ms);
}

/* ---- parsing values ----------------------------------------------------- */

/*
 * Each parser takes the NUL-terminated, trimmed value and returns NULL or
 * the reason it is malformed. Ranges are checked by the caller.
 */

/* Decimal digits; sets *end past them. */
static const char *parse_digits(const char *s, uint64_t *out, const char **end)
{
	uint64_t v = 0;

	if (!isdigit((unsigned char)*s))
		return "not a number";
	for (; isdigit((unsigned char)*s); s++) {
		unsigned int d = (unsigned int)(*s - '0');

		if (v > (UINT64_MAX - d) / 10)
			return "too large";
		v = v * 10 + d;
	}
	*out = v;
	*end = s;
	return NULL;
}

/* An integer with an optional K, M, G or T suffix (powers of 1024). */
static const char *parse_size(const char *s, uint64_t *out)
{
	const char *end, *why;
	unsigned int shift = 0;
	uint64_t v;

	why = parse_digits(s, &v, &end);
	if (why)
		return why;
	switch (*end) {
	case '\0':
		break;
	case 'K': case 'k':
		shift = 10;
		break;
	case 'M': case 'm':
		shift = 20;
		break;
	case 'G': case 'g':
		shift = 30;
		break;
	case 'T': case 't':
		shift = 40;
		break;
	default:
		return "not a number (suffixes: K, M, G, T)";
	}
	if (shift && end[1] != '\0')
		return "not a number (suffixes: K, M, G, T)";
	if (shift && v > (UINT64_MAX >> shift))
		return "too large";
	*out = v << shift;
	return NULL;
}

/*
 * A duration needs its unit: a bare "30" could be meant as seconds or
 * milliseconds, and guessing wrong by 1000x is worse than an error.
 */
static const char *parse_duration(const char *s, uint64_t *out)
{
	const char *end, *why;
	uint64_t v, mult;

	why = parse_digits(s, &v, &end);
	if (why)
		return why;
	if (!strcmp(end, "ms"))
		mult = 1;
	else if (!strcmp(end, "s"))
		mult = 1000;
	else if (!strcmp(end, "m"))
		mult = 60000;
	else
		return "not a duration (a number and ms, s or m)";
	if (v > UINT64_MAX / mult)
		return "too large";
	*out = v * mult;
	return NULL;
}

static const char *parse_octal(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (!*s)
		return "not an octal number";
	for (; *s; s++) {
		if (*s < '0' || *s > '7')
			return "not an octal number";
		if (v > (UINT64_MAX >> 3))
			return "too large";
		v = v * 8 + (uint64_t)(*s - '0');
	}
	*out = v;
	return NULL;
}

static const char *parse_bool(const char *s, bool *out)
{
	if (!strcasecmp(s, "yes") || !strcasecmp(s, "true") || !strcmp(s, "1"))
		*out = true;
	else if (!strcasecmp(s, "no") || !strcasecmp(s, "false") ||
		 !strcmp(s, "0"))
		*out = false;
	else
		return "not a boolean (yes, no, true, false, 1, 0)";
	return NULL;
}

/* "off" or "0", a TCP port, or an absolute Unix socket path. */
static const char *parse_listen(const char *s, struct kvc_config_listen *out)
{
	const char *end, *why;
	uint64_t port;

	memset(out, 0, sizeof(*out));
	if (!strcasecmp(s, "off")) {
		out->kind = KVC_CONFIG_LISTEN_OFF;
		return NULL;
	}
	if (s[0] == '/') {
		if (strlen(s) >= sizeof(out->path))
			return "socket path too long (at most 107 bytes)";
		out->kind = KVC_CONFIG_LISTEN_UNIX;
		strcpy(out->path, s);
		return NULL;
	}
	why = parse_digits(s, &port, &end);
	if (why || *end)
		return "not a socket path, a TCP port or off";
	if (port > 65535)
		return "TCP port out of range (0 to 65535)";
	out->kind = port ? KVC_CONFIG_LISTEN_TCP : KVC_CONFIG_LISTEN_OFF;
	out->port = (uint16_t)port;
	return NULL;
}

/*
 * Namespace ids and ranges, "1 4-7, 9": blanks or commas between them.
 * Empty: none. Zeroes the entries after the last, so that equal lists
 * compare equal byte for byte.
 */
static const char *parse_nslist(const char *s, struct kvc_config_ns_range *ns,
				unsigned int *nr)
{
	uint64_t lo, hi;
	const char *end, *why;
	unsigned int n = 0;

	memset(ns, 0, KVC_CONFIG_EVENTS_NS_MAX * sizeof(*ns));
	for (;;) {
		while (*s == ' ' || *s == '\t' || *s == ',')
			s++;
		if (!*s)
			break;
		why = parse_digits(s, &lo, &end);
		if (why)
			return "not a list of namespace ids and ranges (1 4-7)";
		hi = lo;
		if (*end == '-') {
			why = parse_digits(end + 1, &hi, &end);
			if (why)
				return "not a list of namespace ids and ranges (1 4-7)";
		}
		if (*end && !strchr(" \t,", *end))
			return "not a list of namespace ids and ranges (1 4-7)";
		if (lo < 1 || hi > 65535 || lo > hi)
			return "has a namespace out of range (1 to 65535, low-high)";
		if (n == KVC_CONFIG_EVENTS_NS_MAX)
			return "has more than 64 ids and ranges";
		ns[n].lo = (uint16_t)lo;
		ns[n].hi = (uint16_t)hi;
		n++;
		s = end;
	}
	*nr = n;
	return NULL;
}

/* ---- the parser --------------------------------------------------------- */

struct parser {
	const char *name;	/* file name for messages */
	char *err;
	size_t errlen;
	unsigned int line;	/* current line, 1-based */
	unsigned int key_line[NKEYS];	/* where each key was set, 0: default */
};

/* Report "name:line: message"; line 0 leaves the line out. */
__attribute__((format(printf, 3, 4)))
static int fail(struct parser *p, unsigned int line, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!p->errlen)
		return -EINVAL;
	if (line)
		n = snprintf(p->err, p->errlen, "%s:%u: ", p->name, line);
	else
		n = snprintf(p->err, p->errlen, "%s: ", p->name);
	if (n >= 0 && (size_t)n < p->errlen) {
		va_start(ap, fmt);
		vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

/* Trim [*s, *e) of blanks at both ends. */
static void trim(const char **s, const char **e)
{
	while (*s < *e && is_space(**s))
		(*s)++;
	while (*e > *s && is_space((*e)[-1]))
		(*e)--;
}

static const char *find_section(const char *s, size_t n)
{
	int i;

	for (i = 0; sections[i]; i++) {
		if (strlen(sections[i]) == n && !memcmp(sections[i], s, n))
			return sections[i];
	}
	return NULL;
}

static int find_key(const char *section, const char *s, size_t n)
{
	int i;

	for (i = 0; i < NKEYS; i++) {
		if (keys[i].section == section && strlen(keys[i].name) == n &&
		    !memcmp(keys[i].name, s, n))
			return i;
	}
	return -1;
}

/* Store value (NUL-terminated) into key k of cfg. */
static int set_value(struct parser *p, struct kvc_config *cfg, int k,
		     const char *value)
{
	const struct key *key = &keys[k];
	/* void *: the table's offsets keep each field's own alignment. */
	void *field = (char *)cfg + key->offset;
	const char *why = NULL;
	char lo[32], hi[32];
	uint64_t v = 0;
	size_t i;

	if (key->type != V_STRING && key->type != V_NSLIST && !value[0])
		return fail(p, p->line, "%s: missing value", key->name);

	switch (key->type) {
	case V_STRING:
		for (i = 0; value[i]; i++) {
			if (iscntrl((unsigned char)value[i]))
				return fail(p, p->line,
					    "%s: control character in value",
					    key->name);
		}
		if (i >= key->size)
			return fail(p, p->line,
				    "%s: value too long (at most %zu bytes)",
				    key->name, key->size - 1);
		why = key->check ? key->check(value) : NULL;
		if (why)
			return fail(p, p->line, "%s: \"%s\" %s", key->name,
				    value, why);
		memset(field, 0, key->size);
		memcpy(field, value, i);
		return 0;
	case V_BOOL:
		why = parse_bool(value, (bool *)field);
		break;
	case V_ENUM:
		for (i = 0; key->names[i]; i++) {
			if (!strcasecmp(value, key->names[i])) {
				*(int *)field = (int)i;
				return 0;
			}
		}
		/* List the choices: the admin should not need the manual. */
		{
			char list[128] = "";

			for (i = 0; key->names[i]; i++) {
				strncat(list, i ? "|" : "",
					sizeof(list) - strlen(list) - 1);
				strncat(list, key->names[i],
					sizeof(list) - strlen(list) - 1);
			}
			return fail(p, p->line, "%s: \"%s\" is not one of %s",
				    key->name, value, list);
		}
	case V_LISTEN:
		why = parse_listen(value, (struct kvc_config_listen *)field);
		break;
	case V_NSLIST:
		why = parse_nslist(value, cfg->events.ns, &cfg->events.nr_ns);
		break;
	case V_OCTAL:
		why = parse_octal(value, &v);
		break;
	case V_UINT:
	case V_SIZE:
		why = parse_size(value, &v);
		break;
	case V_DURATION:
		why = parse_duration(value, &v);
		break;
	}
	if (why)
		return fail(p, p->line, "%s: \"%s\" %s", key->name, value, why);
	if (key->type == V_BOOL || key->type == V_LISTEN ||
	    key->type == V_NSLIST)
		return 0;

	if (v < key->min || v > key->max) {
		if (key->type == V_OCTAL) {
			snprintf(lo, sizeof(lo), "%04" PRIo64, key->min);
			snprintf(hi, sizeof(hi), "%04" PRIo64, key->max);
		} else if (key->type == V_DURATION) {
			fmt_duration(key->min, lo, sizeof(lo));
			fmt_duration(key->max, hi, sizeof(hi));
		} else {
			fmt_size(key->min, lo, sizeof(lo));
			fmt_size(key->max, hi, sizeof(hi));
		}
		return fail(p, p->line, "%s: \"%s\" out of range (%s to %s)",
			    key->name, value, lo, hi);
	}
	if (key->pow2 && (v & (v - 1)))
		return fail(p, p->line, "%s: \"%s\" is not a power of two",
			    key->name, value);

	switch (key->type) {
	case V_OCTAL:
	case V_UINT:
		*(unsigned int *)field = (unsigned int)v;
		break;
	default:
		*(uint64_t *)field = v;
		break;
	}
	return 0;
}

/* The later of two keys' lines: the one that made the pair inconsistent. */
static unsigned int later(const struct parser *p, int a, int b)
{
	return p->key_line[a] > p->key_line[b] ? p->key_line[a] :
						 p->key_line[b];
}

/* A tier is on with a directory and a capacity; one without the other is
 * almost certainly a half-finished edit, so refuse it. */
static int check_tier(struct parser *p, const char *tier, const char *dir,
		      uint64_t capacity, int kdir, int kcap)
{
	if (dir[0] && !capacity)
		return fail(p, later(p, kdir, kcap),
			    "[%s] directory is set but capacity is 0", tier);
	if (!dir[0] && capacity)
		return fail(p, later(p, kdir, kcap),
			    "[%s] capacity is set but directory is empty", tier);
	return 0;
}

/*
 * The feed is read access to every namespace it publishes: over TCP only
 * to the CURVE clients listed, so TCP without both CURVE files is refused.
 */
static int check_events(struct parser *p, const struct kvc_config *c)
{
	const char *sk = c->events.curve_secret_key;
	const char *cl = c->events.curve_clients;

	if (!sk[0] != !cl[0])
		return fail(p, later(p, K_EVENTS_CURVE_SECRET_KEY,
				     K_EVENTS_CURVE_CLIENTS),
			    "[events] curve_secret_key and curve_clients go together");
	if (!strncmp(c->events.endpoint, "tcp://", 6) && !sk[0])
		return fail(p, p->key_line[K_EVENTS_ENDPOINT],
			    "[events] a tcp:// endpoint needs curve_secret_key and curve_clients");
	return 0;
}

static int check_combined(struct parser *p, const struct kvc_config *c)
{
	int ret;

	if (c->pool.memfd_size % c->pool.block_size)
		return fail(p, later(p, K_MEMFD_SIZE, K_BLOCK_SIZE),
			    "memfd_size is not a multiple of block_size");
	if (c->pool.memfd_size / c->pool.block_size > MAX_POOL_BLOCKS)
		return fail(p, later(p, K_MEMFD_SIZE, K_BLOCK_SIZE),
			    "memfd_size holds more than %llu blocks",
			    MAX_POOL_BLOCKS);
	if (c->pool.low_watermark >= c->pool.high_watermark)
		return fail(p, later(p, K_LOW_WATERMARK, K_HIGH_WATERMARK),
			    "low_watermark must be below high_watermark");
	ret = check_tier(p, "g3", c->g3.directory, c->g3.capacity,
			 K_G3_DIRECTORY, K_G3_CAPACITY);
	if (ret)
		return ret;
	ret = check_tier(p, "g4", c->g4.directory, c->g4.capacity,
			 K_G4_DIRECTORY, K_G4_CAPACITY);
	if (ret)
		return ret;
	/* Both tiers would evict each other's files. */
	if (c->g3.directory[0] && !strcmp(c->g3.directory, c->g4.directory))
		return fail(p, later(p, K_G3_DIRECTORY, K_G4_DIRECTORY),
			    "g3 and g4 use the same directory");
	ret = check_events(p, c);
	if (ret)
		return ret;
	if (c->daemon.metrics.kind == KVC_CONFIG_LISTEN_UNIX &&
	    !strcmp(c->daemon.metrics.path, c->daemon.socket))
		return fail(p, later(p, K_SOCKET, K_METRICS),
			    "metrics and socket are the same path");
	return 0;
}

/* One line, without its '\n'. */
static int parse_line(struct parser *p, struct kvc_config *cfg,
		      const char **section, const char *s, const char *e)
{
	/* Long enough for any valid value; longer ones are refused. */
	char value[KVC_CONFIG_DIR_MAX + 64];
	const char *eq, *ks, *ke;
	int k;

	if (memchr(s, '\0', (size_t)(e - s)))
		return fail(p, p->line, "NUL byte in line");
	trim(&s, &e);
	if (s == e || *s == '#')
		return 0;

	if (*s == '[') {
		if (e[-1] != ']' || e - s < 2)
			return fail(p, p->line, "expected [section]");
		ks = s + 1;
		ke = e - 1;
		trim(&ks, &ke);
		*section = find_section(ks, (size_t)(ke - ks));
		if (!*section)
			return fail(p, p->line, "unknown section [%.*s]",
				    (int)(ke - ks), ks);
		return 0;
	}

	eq = memchr(s, '=', (size_t)(e - s));
	if (!eq)
		return fail(p, p->line, "expected key = value");
	ks = s;
	ke = eq;
	trim(&ks, &ke);
	if (ks == ke)
		return fail(p, p->line, "missing key before '='");
	if (!*section)
		return fail(p, p->line, "%.*s: key outside a [section]",
			    (int)(ke - ks), ks);
	k = find_key(*section, ks, (size_t)(ke - ks));
	if (k < 0)
		return fail(p, p->line, "unknown key '%.*s' in [%s]",
			    (int)(ke - ks), ks, *section);
	if (p->key_line[k])
		return fail(p, p->line, "duplicate key '%s' (first set on line %u)",
			    keys[k].name, p->key_line[k]);

	s = eq + 1;
	trim(&s, &e);
	if ((size_t)(e - s) >= sizeof(value))
		return fail(p, p->line, "%s: value too long", keys[k].name);
	memcpy(value, s, (size_t)(e - s));
	value[e - s] = '\0';
	p->key_line[k] = p->line;
	return set_value(p, cfg, k, value);
}

int kvc_config_parse(struct kvc_config *cfg, const char *text, size_t len,
		     const char *name, char *err, size_t errlen)
{
	struct parser p = { .name = name, .err = err, .errlen = errlen };
	const char *section = NULL, *s = text, *end = text + len, *nl;
	struct kvc_config tmp;
	int ret;

	if (errlen)
		err[0] = '\0';
	/* Into a copy, so that a bad file leaves the caller's config alone. */
	kvc_config_defaults(&tmp);
	while (s < end) {
		p.line++;
		nl = memchr(s, '\n', (size_t)(end - s));
		if (!nl)
			nl = end;
		ret = parse_line(&p, &tmp, &section, s, nl);
		if (ret)
			return ret;
		s = nl + 1;
	}
	ret = check_combined(&p, &tmp);
	if (ret)
		return ret;
	*cfg = tmp;
	return 0;
}

int kvc_config_load(struct kvc_config *cfg, const char *path, char *err,
		    size_t errlen)
{
	size_t len = 0, n;
	char *buf;
	FILE *f;
	int ret;

	if (errlen)
		err[0] = '\0';
	f = fopen(path, "r");
	if (!f) {
		ret = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(-ret));
		return ret;
	}
	/* One byte over the limit tells "too large" from "exactly full". */
	buf = malloc(KVC_CONFIG_FILE_MAX + 1);
	if (!buf) {
		fclose(f);
		snprintf(err, errlen, "%s: %s", path, strerror(ENOMEM));
		return -ENOMEM;
	}
	while ((n = fread(buf + len, 1, KVC_CONFIG_FILE_MAX + 1 - len, f)) > 0)
		len += n;
	if (ferror(f)) {
		ret = errno ? -errno : -EIO;
		snprintf(err, errlen, "%s: %s", path, strerror(-ret));
	} else if (len > KVC_CONFIG_FILE_MAX) {
		ret = -EFBIG;
		snprintf(err, errlen, "%s: larger than %d bytes", path,
			 KVC_CONFIG_FILE_MAX);
	} else {
		ret = kvc_config_parse(cfg, buf, len, path, err, errlen);
	}
	free(buf);
	fclose(f);
	return ret;
}

/*
 * A key's value as the file writes it, into out: "" for an empty string
 * (written "key =", which parses back to empty), never "" otherwise.
 */
static void format_value(const struct key *key, const struct kvc_config *cfg,
			 char *out, size_t len)
{
	const void *field = (const char *)cfg + key->offset;
	const struct kvc_config_listen *l;
	size_t at;

	switch (key->type) {
	case V_STRING:
		snprintf(out, len, "%s", (const char *)field);
		break;
	case V_OCTAL:
		snprintf(out, len, "%04o", *(const unsigned int *)field);
		break;
	case V_UINT:
		snprintf(out, len, "%u", *(const unsigned int *)field);
		break;
	case V_SIZE:
		fmt_size(*(const uint64_t *)field, out, len);
		break;
	case V_DURATION:
		fmt_duration(*(const uint64_t *)field, out, len);
		break;
	case V_BOOL:
		snprintf(out, len, "%s", *(const bool *)field ? "yes" : "no");
		break;
	case V_ENUM:
		snprintf(out, len, "%s", enum_name(key->names,
						   *(const int *)field));
		break;
	case V_LISTEN:
		l = (const struct kvc_config_listen *)field;
		if (l->kind == KVC_CONFIG_LISTEN_UNIX)
			snprintf(out, len, "%s", l->path);
		else if (l->kind == KVC_CONFIG_LISTEN_TCP)
			snprintf(out, len, "%u", (unsigned int)l->port);
		else
			snprintf(out, len, "off");
		break;
	case V_NSLIST:
		/* At most 64 entries of 11 characters: VALUE_MAX holds them. */
		out[0] = '\0';
		at = 0;
		for (unsigned int i = 0; i < cfg->events.nr_ns; i++) {
			const struct kvc_config_ns_range *r = &cfg->events.ns[i];

			if (r->lo == r->hi)
				snprintf(out + at, len - at, "%s%u",
					 i ? " " : "", (unsigned int)r->lo);
			else
				snprintf(out + at, len - at, "%s%u-%u",
					 i ? " " : "", (unsigned int)r->lo,
					 (unsigned int)r->hi);
			at += strlen(out + at);
		}
		break;
	}
}

/* Room for the longest value: a directory. */
#define VALUE_MAX	(KVC_CONFIG_DIR_MAX + 32)

void kvc_config_dump(const struct kvc_config *cfg, FILE *f)
{
	const char *section = NULL;
	char buf[VALUE_MAX];
	int k;

	fprintf(f, "# kvcached effective configuration\n");
	for (k = 0; k < NKEYS; k++) {
		const struct key *key = &keys[k];

		if (key->section != section) {
			section = key->section;
			fprintf(f, "\n[%s]\n", section);
		}
		format_value(key, cfg, buf, sizeof(buf));
		fprintf(f, "%s =%s%s\n", key->name, buf[0] ? " " : "", buf);
	}
}

unsigned int kvc_config_diff(const struct kvc_config *from,
			     const struct kvc_config *to,
			     kvc_config_diff_fn *fn, void *arg)
{
	char a[VALUE_MAX], b[VALUE_MAX];
	unsigned int n = 0;
	int k;

	for (k = 0; k < NKEYS; k++) {
		format_value(&keys[k], from, a, sizeof(a));
		format_value(&keys[k], to, b, sizeof(b));
		if (!strcmp(a, b))
			continue;
		n++;
		if (fn)
			fn(arg, keys[k].section, keys[k].name, a, b);
	}
	return n;
}
