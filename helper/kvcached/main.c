// SPDX-License-Identifier: GPL-2.0
/*
 * kvcached: the kvcache helper daemon.
 *
 *   kvcached [--config FILE] [--mode auto|kernel|memfd] [--socket PATH]
 *            [--state-dir DIR] [--device PATH] [--print-config]
 *
 * Runs in the foreground (systemd's Type=simple; helper/kvcached.service),
 * logs to stderr ([daemon] log_level; log.h), stops cleanly on SIGINT or SIGTERM. Ready when the
 * socket accepts connections. Settings: helper/kvcached.conf and
 * Documentation/admin-guide/kvcached-config.md; the options override the file.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/kvcache.h>

#include "config.h"
#include "daemon.h"
#include "fault.h"
#include "log.h"
#include "server.h"

#define KVCACHED_CONFIG		"/etc/kvcache/kvcached.conf"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
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
	const char *config = NULL, *mode = NULL, *sock = NULL, *state = NULL;
	struct kvcd_options dopt = { .device = KVCACHE_DEVICE_PATH };
	struct sigaction sa = { .sa_handler = on_signal };
	struct kvc_server *srv = NULL;
	size_t nfds;
	int fds[8];
	struct kvc_config cfg;
	struct kvcd *d = NULL;
	bool print = false;
	char err[512];
	int c, ret;

	while ((c = getopt_long(argc, argv, "c:m:s:S:d:ph", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			config = optarg;
			break;
		case 'm':
			mode = optarg;
			break;
		case 's':
			sock = optarg;
			break;
		case 'S':
			state = optarg;
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

	kvc_config_defaults(&cfg);
	/* The default file is optional; a named one must exist. */
	if (config || !access(KVCACHED_CONFIG, F_OK)) {
		ret = kvc_config_load(&cfg, config ? config : KVCACHED_CONFIG,
				      err, sizeof(err));
		if (ret) {
			kvc_err("%s", err);
			return 1;
		}
	}
	if (mode) {
		if (!strcmp(mode, "auto")) {
			cfg.daemon.mode = KVC_CONFIG_MODE_AUTO;
		} else if (!strcmp(mode, "kernel")) {
			cfg.daemon.mode = KVC_CONFIG_MODE_KERNEL;
		} else if (!strcmp(mode, "memfd")) {
			cfg.daemon.mode = KVC_CONFIG_MODE_MEMFD;
		} else {
			kvc_err("unknown mode '%s'", mode);
			return 2;
		}
	}
	if (sock) {
		if (strlen(sock) >= sizeof(cfg.daemon.socket)) {
			kvc_err("socket path too long");
			return 2;
		}
		strcpy(cfg.daemon.socket, sock);
	}
	if (state) {
		if (state[0] != '/' ||
		    strlen(state) >= sizeof(cfg.daemon.state_dir)) {
			kvc_err("--state-dir: want an absolute path, shorter than %zu",
				sizeof(cfg.daemon.state_dir));
			return 2;
		}
		strcpy(cfg.daemon.state_dir, state);
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

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	dopt.cfg = &cfg;
	dopt.state_dir = cfg.daemon.state_dir;
	ret = kvcd_create(&d, &dopt);
	if (ret)
		return ret == -ENOKEY ? KVCD_EXIT_STATE_MISSING : 1;
	ret = kvc_server_open(&srv, cfg.daemon.socket, cfg.daemon.socket_mode,
			      cfg.eviction.interval_ms, &kvcd_server_ops, d);
	if (ret) {
		kvc_err("%s: %s", cfg.daemon.socket,
			strerror(-ret));
		kvcd_destroy(d);
		return 1;
	}
	nfds = kvcd_watch_fds(d, fds, sizeof(fds) / sizeof(fds[0]));
	for (size_t i = 0; i < nfds; i++)
		kvc_server_watch(srv, fds[i]);
	kvcd_set_server(d, srv);
	kvc_info("%s mode, listening on %s",
		kvcd_mode_name(d), cfg.daemon.socket);

	ret = kvc_server_run(srv, &stop);
	if (ret)
		kvc_err("event loop: %s", strerror(-ret));
	kvc_server_close(srv);
	kvcd_destroy(d);
	return ret ? 1 : 0;
}
