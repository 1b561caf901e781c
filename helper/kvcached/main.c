// SPDX-License-Identifier: GPL-2.0
/*
 * kvcached: the kvcache helper daemon.
 *
 *   kvcached [--config FILE] [--mode auto|kernel|memfd] [--socket PATH]
 *            [--state-dir DIR] [--device PATH] [--print-config]
 *
 * Runs in the foreground, a systemd Type=notify service (kvcached.service
 * next to this file), and logs to stderr ([daemon] log_level; log.h).
 * Ready when the socket accepts connections, which it tells the service
 * manager (notify.h). SIGHUP reads the configuration again and applies what can
 * change while it runs (kvcd_reconfigure()); SIGINT or SIGTERM stop it
 * cleanly. The handlers only set flags: the loop does the work between
 * its rounds. Settings: helper/kvcached/kvcached.conf and
 * Documentation/admin-guide/kvcached-config.md; the options override the
 * file, at start and at every reload.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>

#include <linux/kvcache.h>

#include "config.h"
#include "daemon.h"
#include "fault.h"
#include "log.h"
#include "notify.h"
#include "server.h"

#define KVCACHED_CONFIG		"/etc/kvcache/kvcached.conf"

/*
 * The loop wakes at least this often, so that a signal caught just
 * before it began to wait is not left waiting for the next tick.
 */
#define KVCACHED_WAKE_MS	1000

/* Set by the handler; woken ends kvc_server_run(). */
static volatile sig_atomic_t stop, reload, woken;

static void on_signal(int sig)
{
	if (sig == SIGHUP)
		reload = 1;
	else
		stop = 1;
	woken = 1;
}

/* What the command line sets: over the file, at start and at reloads. */
struct options {
	const char *config;		/* --config, or NULL: the default */
	const char *mode, *sock, *state;
};

/*
 * The file to read: the one named, else the default one if it exists,
 * else none (NULL: the defaults).
 */
static const char *config_path(const struct options *o)
{
	if (o->config)
		return o->config;
	return access(KVCACHED_CONFIG, F_OK) ? NULL : KVCACHED_CONFIG;
}

/*
 * The defaults, the file (config_path(), as decided by the caller) and
 * the options, into *cfg (left alone on an error). 0; 1: the file is
 * wrong; 2: an option is (the reason in err).
 */
static int read_config(struct kvc_config *cfg, const char *path,
		       const struct options *o, char *err, size_t len)
{
	struct kvc_config c;

	kvc_config_defaults(&c);
	if (path && kvc_config_load(&c, path, err, len))
		return 1;
	if (o->mode) {
		if (!strcmp(o->mode, "auto")) {
			c.daemon.mode = KVC_CONFIG_MODE_AUTO;
		} else if (!strcmp(o->mode, "kernel")) {
			c.daemon.mode = KVC_CONFIG_MODE_KERNEL;
		} else if (!strcmp(o->mode, "memfd")) {
			c.daemon.mode = KVC_CONFIG_MODE_MEMFD;
		} else {
			snprintf(err, len, "unknown mode '%s'", o->mode);
			return 2;
		}
	}
	if (o->sock) {
		if (strlen(o->sock) >= sizeof(c.daemon.socket)) {
			snprintf(err, len, "socket path too long");
			return 2;
		}
		strcpy(c.daemon.socket, o->sock);
	}
	if (o->state) {
		if (o->state[0] != '/' ||
		    strlen(o->state) >= sizeof(c.daemon.state_dir)) {
			snprintf(err, len, "--state-dir: want an absolute path, shorter than %zu",
				 sizeof(c.daemon.state_dir));
			return 2;
		}
		strcpy(c.daemon.state_dir, o->state);
	}
	*cfg = c;
	return 0;
}

/*
 * SIGHUP: the file read again. A file that does not parse changes
 * nothing; either way the manager hears READY=1 at the end.
 */
static void reload_config(const struct options *o, struct kvcd *d,
			  struct kvc_notify *n)
{
	unsigned int changed, restart;
	char err[512], status[512];
	struct kvc_config cfg;
	const char *path;

	kvc_notify(n, "RELOADING=1\nMONOTONIC_USEC=%" PRIu64 "\nSTATUS=reloading",
		   kvc_notify_monotonic_usec());
	path = config_path(o);
	if (path)
		kvc_info("SIGHUP: reading %s again", path);
	else
		kvc_info("SIGHUP: no configuration file, the defaults apply");
	if (read_config(&cfg, path, o, err, sizeof(err))) {
		/* A STATUS= is one line. */
		for (char *c = err; *c; c++)
			if (*c == '\n')
				*c = ' ';
		kvc_err("reload failed, the settings stay as they were: %s",
			err);
		kvc_notify(n, "READY=1\nSTATUS=reload failed, running with the previous settings: %s",
			   err);
		return;
	}
	changed = kvcd_reconfigure(d, &cfg, &restart);
	kvc_info("reload done: %u setting%s changed, %u need%s a restart",
		 changed, changed == 1 ? "" : "s", restart,
		 restart == 1 ? "s" : "");
	kvcd_status(d, status, sizeof(status));
	if (restart)
		kvc_notify(n, "READY=1\nSTATUS=%s; %u setting%s of the file wait%s for a restart",
			   status, restart, restart == 1 ? "" : "s",
			   restart == 1 ? "s" : "");
	else
		kvc_notify(n, "READY=1\nSTATUS=%s", status);
}

/*
 * The loop, a stretch at a time: back here on a signal, when the
 * watchdog is due, and at least every KVCACHED_WAKE_MS.
 */
static int run(struct kvc_server *srv, struct kvcd *d,
	       const struct options *o, struct kvc_notify *n)
{
	uint64_t wait_ms;
	int ret = 0;

	while (!stop) {
		wait_ms = kvc_notify_watchdog(n);
		if (!wait_ms || wait_ms > KVCACHED_WAKE_MS)
			wait_ms = KVCACHED_WAKE_MS;
		ret = kvc_server_run(srv, &woken, wait_ms);
		if (ret)
			break;
		/* Before looking at the flags: a later signal wakes again. */
		woken = 0;
		if (reload && !stop) {
			reload = 0;
			reload_config(o, d, n);
		}
	}
	return ret;
}

/*
 * The soft RLIMIT_NOFILE up to the hard one. The soft limit's usual 1024
 * exists for select(), which kvcached does not use, and the daemon needs
 * a descriptor per client, per tier file in flight and, in kernel mode,
 * per fast index segment (kvcd_fd_budget() divides them). The hard limit
 * is the administrator's (LimitNOFILE= in kvcached.service).
 */
static void raise_nofile(void)
{
	struct rlimit rl;
	rlim_t was;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return;
	was = rl.rlim_cur;
	if (was < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl)) {
			kvc_warn("RLIMIT_NOFILE: soft limit stays %llu: %s",
				 (unsigned long long)was, strerror(errno));
			return;
		}
		kvc_info("RLIMIT_NOFILE: soft limit raised from %llu to %llu",
			 (unsigned long long)was,
			 (unsigned long long)rl.rlim_cur);
	}
	if (rl.rlim_cur < 4096)
		kvc_warn("RLIMIT_NOFILE is %llu: clients, tier files and fast index segments share it (LimitNOFILE=, kvcached.md)",
			 (unsigned long long)rl.rlim_cur);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: kvcached [--config FILE] [--mode auto|kernel|memfd] [--socket PATH]\n"
		"                [--state-dir DIR] [--device PATH] [--print-config]\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "mode", required_argument, NULL, 'm' },
		{ "socket", required_argument, NULL, 's' },
		{ "state-dir", required_argument, NULL, 'S' },
		{ "device", required_argument, NULL, 'd' },
		{ "print-config", no_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct kvcd_options dopt = { .device = KVCACHE_DEVICE_PATH };
	struct sigaction sa = { .sa_handler = on_signal };
	struct kvc_server *srv = NULL;
	struct options o = { 0 };
	struct kvc_notify notify;
	size_t nfds;
	int fds[8];
	struct kvc_config cfg;
	struct kvcd *d = NULL;
	bool print = false;
	char err[512], status[512];
	int c, ret;

	while ((c = getopt_long(argc, argv, "c:m:s:S:d:ph", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			o.config = optarg;
			break;
		case 'm':
			o.mode = optarg;
			break;
		case 's':
			o.sock = optarg;
			break;
		case 'S':
			o.state = optarg;
			break;
		case 'd':
			dopt.device = optarg;
			break;
		case 'p':
			print = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}

	ret = read_config(&cfg, config_path(&o), &o, err, sizeof(err));
	if (ret) {
		kvc_err("%s", err);
		return ret;
	}
	if (print) {
		kvc_config_dump(&cfg, stdout);
		return 0;
	}
	/* From here on, messages below [daemon] log_level are not printed. */
	kvc_log_set_level(cfg.daemon.log_level);
	/*
	 * Fault injection, for tests only: nothing is armed unless the
	 * variable is set, and a spec with a mistake stops the start rather
	 * than run with faults other than those asked for.
	 */
	if (getenv(KVC_FAULT_ENV) && getenv(KVC_FAULT_ENV)[0]) {
		ret = kvc_fault_configure(getenv(KVC_FAULT_ENV), err,
					  sizeof(err));
		if (ret) {
			kvc_err("%s: %s", KVC_FAULT_ENV,
				err);
			return 2;
		}
		kvc_warn("FAULT INJECTION ARMED (%s=%s)",
			KVC_FAULT_ENV, getenv(KVC_FAULT_ENV));
	}
	/* A manager's socket we cannot use: run, unannounced. */
	if (kvc_notify_open(&notify, err, sizeof(err)))
		kvc_err("%s: the service manager is not told when kvcached is ready",
			err);

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	raise_nofile();
	dopt.cfg = &cfg;
	dopt.state_dir = cfg.daemon.state_dir;
	ret = kvcd_create(&d, &dopt);
	if (ret) {
		kvc_notify_close(&notify);
		return ret == -ENOKEY ? KVCD_EXIT_STATE_MISSING : 1;
	}
	ret = kvc_server_open(&srv, cfg.daemon.socket, cfg.daemon.socket_mode,
			      cfg.eviction.interval_ms, &kvcd_server_ops, d);
	if (ret) {
		kvc_err("%s: %s", cfg.daemon.socket,
			strerror(-ret));
		kvcd_destroy(d);
		kvc_notify_close(&notify);
		return 1;
	}
	nfds = kvcd_watch_fds(d, fds, sizeof(fds) / sizeof(fds[0]));
	for (size_t i = 0; i < nfds; i++)
		kvc_server_watch(srv, fds[i]);
	kvcd_set_server(d, srv);
	kvc_info("%s mode, listening on %s",
		kvcd_mode_name(d), cfg.daemon.socket);
	/*
	 * Ready: the recovery is done and the socket listens, so a client
	 * that connects now is queued until the loop accepts it.
	 */
	kvcd_status(d, status, sizeof(status));
	kvc_notify(&notify, "READY=1\nSTATUS=%s", status);
	if (kvc_notify_watchdog_usec(&notify))
		kvc_info("watchdog: WATCHDOG=1 every %" PRIu64 " ms",
			 kvc_notify_watchdog_usec(&notify) / 2000);

	ret = run(srv, d, &o, &notify);
	if (ret)
		kvc_err("event loop: %s", strerror(-ret));
	kvc_notify(&notify, "STOPPING=1\nSTATUS=stopping");
	kvc_server_close(srv);
	kvcd_destroy(d);
	kvc_notify_close(&notify);
	return ret ? 1 : 0;
}
