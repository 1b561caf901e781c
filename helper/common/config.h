/* SPDX-License-Identifier: GPL-2.0 */
/*
 * config: kvcached's configuration file (Documentation/admin-guide/kvcached-config.md).
 *
 * The file is INI-like: "[section]" headers, "key = value" lines, whole-line
 * "#" comments and blank lines. Every key has a default, so an empty file
 * is valid, and kvc_config_dump() writes the effective settings back in the
 * same format (the dump parses to the same values).
 *
 * Errors (unknown section or key, malformed or out-of-range value,
 * duplicate key, settings that contradict each other) are reported as
 * "file:line: reason" in a caller buffer; parsing stops at the first one.
 */
#ifndef KVC_CONFIG_H
#define KVC_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/*
 * Longest Unix socket path, NUL included: sizeof(sockaddr_un.sun_path) on
 * Linux (config.c checks this). A longer path could never be bound, so it
 * is refused when the file is read, not when the daemon starts.
 */
#define KVC_CONFIG_SOCK_PATH_MAX	108
#define KVC_CONFIG_DIR_MAX		4096	/* PATH_MAX */
#define KVC_CONFIG_NODE_MAX		65	/* 64 characters and NUL */
#define KVC_CONFIG_ADDR_MAX		46	/* INET6_ADDRSTRLEN */
#define KVC_CONFIG_GROUP_MAX		33	/* a group name (32) or number */
#define KVC_CONFIG_EVENTS_MAX		128	/* a ZeroMQ endpoint */
#define KVC_CONFIG_TOPIC_MAX		64
#define KVC_CONFIG_GROUP_MAX		33	/* a group name (32) or a gid */
#define KVC_CONFIG_EVENTS_NS_MAX	64	/* [events] namespaces: ranges */
/*
 * [daemon] touch_rate's default: blocks a second one connection may
 * report in TOUCH (256 Ki: 512 GiB/s of 2 MiB blocks, 16 GiB/s of 64 KiB).
 */
#define KVC_CONFIG_TOUCH_RATE		262144
#define KVC_CONFIG_UID_MAX		11	/* "4294967295" and NUL */

/* The largest file kvc_config_load() reads; a config is a few kB. */
#define KVC_CONFIG_FILE_MAX		(1024 * 1024)

enum kvc_config_log_level {
	KVC_CONFIG_LOG_ERROR,
	KVC_CONFIG_LOG_WARN,
	KVC_CONFIG_LOG_INFO,
	KVC_CONFIG_LOG_DEBUG,
};

/* Where blocks live in DRAM. */
enum kvc_config_mode {
	KVC_CONFIG_MODE_AUTO,		/* kernel when /dev/kvcache exists, else memfd */
	KVC_CONFIG_MODE_KERNEL,	/* the kvcache.ko pool, as its helper */
	KVC_CONFIG_MODE_MEMFD,		/* a memfd pool owned by the daemon */
};

enum kvc_config_hugetlb {
	KVC_CONFIG_HUGETLB_AUTO,	/* huge pages when available, else small */
	KVC_CONFIG_HUGETLB_YES,	/* huge pages or fail */
	KVC_CONFIG_HUGETLB_NO,
};

enum kvc_config_policy {
	KVC_CONFIG_POLICY_LRU,
	KVC_CONFIG_POLICY_S3FIFO,
	KVC_CONFIG_POLICY_COST,	/* weighs recompute cost against size */
	KVC_CONFIG_POLICY_DENSITY,	/* hit density, learned online */
};

/* When a tier gets a copy of a block. */
enum kvc_config_write {
	KVC_CONFIG_WRITE_BACK,		/* when the pool evicts it */
	KVC_CONFIG_WRITE_THROUGH,	/* when it is stored */
};

enum kvc_config_fsync {
	KVC_CONFIG_FSYNC_ALWAYS,	/* each file and its directory */
	KVC_CONFIG_FSYNC_NEVER,	/* the kernel's writeback decides */
};

enum kvc_config_listen_kind {
	KVC_CONFIG_LISTEN_OFF,
	KVC_CONFIG_LISTEN_UNIX,
	KVC_CONFIG_LISTEN_TCP,
};

/* The metrics endpoint: off, a Unix socket path or a TCP port. */
struct kvc_config_listen {
	int kind;			/* enum kvc_config_listen_kind */
	char path[KVC_CONFIG_SOCK_PATH_MAX];	/* KVC_CONFIG_LISTEN_UNIX */
	uint16_t port;			/* KVC_CONFIG_LISTEN_TCP */
};

/* Namespaces lo..hi (lo == hi: one), 1..KVCACHE_NS_MAX. */
struct kvc_config_ns_range {
	uint16_t lo, hi;
};

/*
 * The fields holding an enum are plain int so that the parser can store
 * through one pointer type; they only ever hold the enum's constants.
 * Sizes are bytes, durations milliseconds, percentages 0..100.
 */
struct kvc_config {
	struct {
		char socket[KVC_CONFIG_SOCK_PATH_MAX];
		unsigned int socket_mode;	/* permission bits, <= 0777 */
		struct kvc_config_listen metrics;
		char metrics_address[KVC_CONFIG_ADDR_MAX]; /* TCP only */
		unsigned int metrics_mode;	/* socket path only, <= 0777 */
		char metrics_group[KVC_CONFIG_GROUP_MAX]; /* "": the daemon's */
		uint64_t metrics_timeout_ms;	/* a scrape's deadline */
		int log_level;			/* enum kvc_config_log_level */
		int mode;			/* enum kvc_config_mode */
		char state_dir[KVC_CONFIG_DIR_MAX];	/* namespaces, parents */
		/* Start although g3 holds blocks and the state is gone. */
		bool allow_missing_state;
		uint64_t load_timeout_ms;	/* a LOAD waits for g3/g4 so long */
		/* Blocks a connection may TOUCH a second; 0: no limit. */
		unsigned int touch_rate;
	} daemon;
	struct {
		uint64_t memfd_size;		/* memfd mode only */
		uint64_t block_size;		/* memfd mode only */
		int hugetlb;			/* enum kvc_config_hugetlb */
		bool mlock;
		bool fast_index;		/* memfd mode: the fast path */
		unsigned int low_watermark;	/* free %, evict below */
		unsigned int high_watermark;	/* free %, stop evicting at */
		unsigned int prefetch;		/* blocks promoted ahead */
	} pool;
	struct {
		int policy;			/* enum kvc_config_policy */
		unsigned int pool_admit;	/* admit on the k-th access */
		unsigned int g3_admit;
		unsigned int g4_admit;
		int g3_policy;			/* enum kvc_config_policy */
		int g4_policy;
		unsigned int s3fifo_small;	/* small queue share, % */
		uint64_t interval_ms;		/* watermark check period */
	} eviction;
	struct {
		char directory[KVC_CONFIG_DIR_MAX];	/* "" = tier off */
		uint64_t capacity;
		int write;			/* enum kvc_config_write */
		int fsync;			/* enum kvc_config_fsync */
		unsigned int queue_depth;	/* block files in flight */
		bool io_priority;		/* reads before writes */
	} g3;
	struct {
		char directory[KVC_CONFIG_DIR_MAX];	/* "" = tier off */
		uint64_t capacity;
		char node[KVC_CONFIG_NODE_MAX];	/* "" = the host name */
		uint64_t scan_interval_ms;	/* look for other nodes' blocks */
		int write;
		int fsync;
		unsigned int queue_depth;
		uint64_t grace_ms;		/* GC lease and grace */
		bool io_priority;
		/*
		 * Who else may write namespace descriptions (nsshare.c):
		 * "" = kvcached's own uid only; else a decimal uid, never a
		 * squash id (kvc_config_trusted_uid()).
		 */
		char trusted_uid[KVC_CONFIG_UID_MAX];
		unsigned int ns_learn_max;	/* namespaces learned a pass */
	} g4;
	struct {
		char endpoint[KVC_CONFIG_EVENTS_MAX];	/* "" = no events */
		char topic[KVC_CONFIG_TOPIC_MAX];
		/* Published namespaces; none listed: nothing is published. */
		struct kvc_config_ns_range ns[KVC_CONFIG_EVENTS_NS_MAX];
		unsigned int nr_ns;
		unsigned int ipc_mode;		/* ipc:// socket file mode */
		char ipc_group[KVC_CONFIG_GROUP_MAX];	/* "" = kvcached's */
		/* CURVE: Z85 secret key file, Z85 public keys allowed. */
		char curve_secret_key[KVC_CONFIG_DIR_MAX];
		char curve_clients[KVC_CONFIG_DIR_MAX];
		unsigned int hwm;		/* messages per subscriber */
	} events;
};

/*
 * The uids no one can be trusted as: "nobody" (65534, also the default
 * overflow uid and NFS anonuid, so every squashed user on every client),
 * the old "nfsnobody" (4294967294) and the invalid -1.
 */
bool kvc_config_squash_uid(uint32_t uid);

/* [g4] trusted_uid: true with *uid when one is set. */
bool kvc_config_trusted_uid(const struct kvc_config *cfg, uint32_t *uid);

/* Fill *cfg with the documented defaults. */
void kvc_config_defaults(struct kvc_config *cfg);

/*
 * Parse len bytes of text (need not be NUL-terminated) over the defaults.
 * name is the file name used in error messages. Returns 0, or -EINVAL with
 * "name:line: reason" in err (always NUL-terminated when errlen > 0); on
 * error *cfg is left unchanged.
 */
int kvc_config_parse(struct kvc_config *cfg, const char *text, size_t len,
		     const char *name, char *err, size_t errlen);

/*
 * Read and parse the file at path. Returns 0, -EINVAL as kvc_config_parse,
 * or another -errno when the file cannot be read (also described in err).
 */
int kvc_config_load(struct kvc_config *cfg, const char *path, char *err,
		    size_t errlen);

/* Write every effective setting in the file format. */
void kvc_config_dump(const struct kvc_config *cfg, FILE *f);

/*
 * The keys whose values differ between from and to, in file order: for
 * each, fn (when not NULL) gets its section and name ("pool",
 * "low_watermark") and both values as the dump writes them (an empty
 * string as ""). Returns how many differ. A reload uses it to say what
 * it changed and what it could not.
 */
typedef void kvc_config_diff_fn(void *arg, const char *section,
				const char *key, const char *from,
				const char *to);
unsigned int kvc_config_diff(const struct kvc_config *from,
			     const struct kvc_config *to,
			     kvc_config_diff_fn *fn, void *arg);

/*
 * Names used in the file: "info", "memfd", "s3fifo"... The policy names are
 * the ones kvc_policy_create() (policy.h) takes.
 */
const char *kvc_config_log_level_name(int level);
const char *kvc_config_mode_name(int mode);
const char *kvc_config_hugetlb_name(int hugetlb);
const char *kvc_config_policy_name(int policy);

#endif /* KVC_CONFIG_H */
