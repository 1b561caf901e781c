/* SPDX-License-Identifier: GPL-2.0 */
/*
 * daemon: what kvcached knows and decides, behind the server loop.
 *
 * It owns the prefix index, the pool tier's eviction policy, the
 * namespaces and the pool backend: the kernel's pool (kernel mode, as
 * /dev/kvcache's helper) or its own memfd pool (memfd mode, without the
 * module). The server hands it each client's datagrams; it answers them
 * (Documentation/userspace-api/protocol.md), evicts when the pool runs low (the
 * kernel's pressure events, and a periodic check), and keeps enough in
 * its state directory to rebuild after a restart:
 *   namespaces   one line per namespace: id uid gid mode
 *   parents      the chain link of every block stored, appended as
 *                blocks are stored; the kernel keeps blocks and keys but
 *                not which block follows which
 *
 * Single-threaded: everything runs on the server loop's thread.
 */
#ifndef KVC_DAEMON_H
#define KVC_DAEMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "server.h"

struct kvcd;

/*
 * kvcached's exit status when it refuses to start because its state was
 * lost (kvcd_create() -ENOKEY): kvcached.service does not restart it.
 */
#define KVCD_EXIT_STATE_MISSING	3

struct kvcd_options {
	const struct kvc_config *cfg;
	const char *device;		/* /dev/kvcache, for tests */
	const char *state_dir;		/* namespaces and parents live here */
};

/*
 * Set the daemon up: choose the mode (cfg->daemon.mode), open the kernel
 * pool or create the memfd pool, load the namespaces, and in kernel mode
 * rebuild the index from the sealed blocks the kernel still holds.
 * Returns 0 or -errno (with a message on stderr); -ENOKEY: the state
 * directory has no namespace table but g3 holds blocks, and
 * allow_missing_state is off (the state was lost: see kvcached.md).
 */
int kvcd_create(struct kvcd **out, const struct kvcd_options *opt);
void kvcd_destroy(struct kvcd *d);

/* The server callbacks; ctx is the struct kvcd. */
extern const struct kvc_server_ops kvcd_server_ops;

/*
 * Every descriptor the server loop must watch (the kernel's events, the
 * metrics endpoint, the persistent tiers' I/O completions), up to max:
 * how many.
 */
size_t kvcd_watch_fds(const struct kvcd *d, int *fds, size_t max);

/* The server, for replies the daemon defers (LOAD from g3/g4). */
void kvcd_set_server(struct kvcd *d, struct kvc_server *s);

/* "kernel" or "memfd". */
const char *kvcd_mode_name(const struct kvcd *d);

/*
 * One line for the service manager's STATUS=: the mode, the pool, the
 * sockets ("memfd mode, pool 256 MiB in 128 blocks of 2 MiB, socket
 * /run/kvcache/kvcached.sock, metrics /run/kvcache/metrics.sock").
 */
void kvcd_status(const struct kvcd *d, char *buf, size_t len);

/*
 * A reload: take from cfg (the file read again, the command line's
 * options applied) what can change while the daemon runs, and keep the
 * rest as it started. Applied: [daemon] log_level and load_timeout,
 * [pool] low_watermark, high_watermark and prefetch, [eviction] interval,
 * and the capacity of g3 or g4 while the tier stays on its directory;
 * each change is logged at info. Every other key that differs is logged
 * as a warning that names it and says it needs a restart. Returns how
 * many keys changed; *restart: how many need a restart.
 */
unsigned int kvcd_reconfigure(struct kvcd *d, const struct kvc_config *cfg,
			      unsigned int *restart);

#endif /* KVC_DAEMON_H */
