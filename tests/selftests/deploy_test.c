// SPDX-License-Identifier: GPL-2.0
/*
 * kvcached as it is deployed: under the sandbox of its own systemd unit
 * (helper/kvcached/kvcached.service), with its state directory kept and its
 * runtime directory wiped as a reboot does, with the file modes the
 * documentation promises, and what a start does when the state is gone.
 *
 *   unit_sandbox_survives_reboot  the unit's CapabilityBoundingSet, User,
 *       NoNewPrivileges, UMask and paths, read from the unit file (so the
 *       test cannot drift from it) and applied with setpriv(1), since
 *       systemd is not PID 1 here. A namespace owned by another user
 *       (kvcached must chown and chmod its directories), blocks stored
 *       and spilled to g3, then a "reboot": the daemon stopped, its
 *       runtime directory (/run) removed, the state directory kept. The
 *       new daemon must give every g3 block back, under the same salt.
 *   files_have_their_modes        every file kvcached writes in the state
 *       and tier directories, after a restart, under umask 022.
 *   lost_state_refuses_to_start   g3 holds blocks, the namespace table is
 *       gone: the start is refused (exit status 3), allow_missing_state
 *       starts it and counts, and the namespace comes back with its old
 *       salt (NS_CREATE, NS_SALT SET, restart).
 *   ns_create_refused_on_full_state_dir  the namespace table cannot be
 *       written: NS_CREATE answers the error and creates nothing.
 *   journal_append_failure_refuses_store  (kernel mode) a STORE whose
 *       parents journal record cannot be written is refused, counted, and
 *       is not taken for stored.
 *   notify_ready_reload_stop  the unit's Type=notify and ExecReload=, with
 *       the test as the service manager: NOTIFY_SOCKET is its datagram
 *       socket. READY=1 comes, and a client connects right after it with
 *       no retry; watchdog pings come when WATCHDOG_USEC asks; SIGHUP
 *       with new watermarks and log_level gives RELOADING=1 (with a
 *       MONOTONIC_USEC of this boot's monotonic clock), READY=1, an
 *       eviction down to the new high watermark and debug lines, while a
 *       g3 switched on in the file stays off (a restart key, named in a
 *       warning); SIGHUP with a file that does not parse keeps every old
 *       value and ends with READY=1 saying so; SIGTERM gives STOPPING=1.
 *
 * The first, third, fourth and the last run in memfd mode (scripts/check
 * runs the file with KVC_DAEMON_MODE=memfd on the host) and skip in
 * kernel mode; journal_append_failure_refuses_store runs only in kernel
 * mode (the journal is kernel mode's), in the test VM. Most need root
 * (setpriv, NS_CREATE, a tmpfs) and skip without it; the last does not.
 * Documentation/dev-tools/testing.md says what the sandbox does not
 * reproduce.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pwd.h>
#include <grp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>
#include <linux/capability.h>

#include "kselftest_harness.h"
#include "kvc_client.h"
#include "kvc_ioctl.h"
#include "keys.h"
#include "proto.h"

#include "kvcd_fixture.h"

/* The unit's Group= where no such group exists: a gid no one has. */
#define DEPLOY_STANDIN_GID 64097

#ifndef KVC_UNIT_FILE
#define KVC_UNIT_FILE "helper/kvcached/kvcached.service"
#endif

#define TENANT_UID	1000
#define TENANT_GID	1000
#define CHAIN		8

/* -------------------------------------------------------------------------- */

struct unit {
	char caps[1024];	/* CapabilityBoundingSet, names joined by ' ' */
	char ambient[512];	/* AmbientCapabilities */
	char user[64], group[64];
	bool nnp;		/* NoNewPrivileges */
	mode_t umask;		/* UMask, systemd's default 0022 */
	char state[256];	/* StateDirectory, relative to /var/lib */
	mode_t state_mode;	/* StateDirectoryMode, default 0755 */
	char runtime[256];	/* RuntimeDirectory, relative to /run */
	char rw[1024];		/* ReadWritePaths */
	char doc[512];		/* Documentation */
	char exec[512];		/* ExecStart */
	char type[32];		/* Type */
	char notify_access[32];	/* NotifyAccess */
	char reload[512];	/* ExecReload */
	unsigned long long nofile;	/* LimitNOFILE (the hard one), 0: unset */
};

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

static void append(char *dst, size_t len, const char *v)
{
	size_t n = strlen(dst);

	snprintf(dst + n, len - n, "%s%s", n ? " " : "", v);
}

/* Read the [Service] and [Unit] keys the sandbox needs; 0 or -errno. */
static int unit_read(const char *path, struct unit *u, char *why, size_t wlen)
{
	char line[1024];
	FILE *f = fopen(path, "re");

	memset(u, 0, sizeof(*u));
	u->umask = 022;
	u->state_mode = 0755;
	if (!f) {
		snprintf(why, wlen, "%s: %s", path, strerror(errno));
		return -errno;
	}
	while (fgets(line, sizeof(line), f)) {
		char *l = trim(line), *eq = strchr(l, '='), *k, *v;

		if (!*l || *l == '#' || *l == ';' || *l == '[' || !eq)
			continue;
		*eq = '\0';
		k = trim(l);
		v = trim(eq + 1);
		if (!strcmp(k, "CapabilityBoundingSet")) {
			if (*v == '~') {
				snprintf(why, wlen, "an inverted bounding set: not modelled");
				fclose(f);
				return -EINVAL;
			}
			append(u->caps, sizeof(u->caps), v);
		} else if (!strcmp(k, "AmbientCapabilities")) {
			append(u->ambient, sizeof(u->ambient), v);
		} else if (!strcmp(k, "User")) {
			snprintf(u->user, sizeof(u->user), "%s", v);
		} else if (!strcmp(k, "Group")) {
			snprintf(u->group, sizeof(u->group), "%s", v);
		} else if (!strcmp(k, "NoNewPrivileges")) {
			u->nnp = !strcmp(v, "yes") || !strcmp(v, "true");
		} else if (!strcmp(k, "UMask")) {
			u->umask = (mode_t)strtoul(v, NULL, 8);
		} else if (!strcmp(k, "StateDirectory")) {
			snprintf(u->state, sizeof(u->state), "%s", v);
		} else if (!strcmp(k, "StateDirectoryMode")) {
			u->state_mode = (mode_t)strtoul(v, NULL, 8);
		} else if (!strcmp(k, "RuntimeDirectory")) {
			snprintf(u->runtime, sizeof(u->runtime), "%s", v);
		} else if (!strcmp(k, "ReadWritePaths")) {
			append(u->rw, sizeof(u->rw), v);
		} else if (!strcmp(k, "Documentation")) {
			/* The page make install puts under share/doc (the
			 * man: entries are checked by tests/check-man).
			 */
			if (!strncmp(v, "file://", 7))
				snprintf(u->doc, sizeof(u->doc), "%s", v);
		} else if (!strcmp(k, "ExecStart")) {
			snprintf(u->exec, sizeof(u->exec), "%s", v);
		} else if (!strcmp(k, "Type")) {
			snprintf(u->type, sizeof(u->type), "%s", v);
		} else if (!strcmp(k, "NotifyAccess")) {
			snprintf(u->notify_access, sizeof(u->notify_access),
				 "%s", v);
		} else if (!strcmp(k, "ExecReload")) {
			snprintf(u->reload, sizeof(u->reload), "%s", v);
		} else if (!strcmp(k, "LimitNOFILE")) {
			/* N, or SOFT:HARD */
			u->nofile = strtoull(strchr(v, ':') ? strchr(v, ':') + 1 : v,
					     NULL, 10);
		}
	}
	fclose(f);
	return 0;
}

static const struct { const char *name; int bit; } cap_names[] = {
	{ "CAP_CHOWN", CAP_CHOWN }, { "CAP_DAC_OVERRIDE", CAP_DAC_OVERRIDE },
	{ "CAP_DAC_READ_SEARCH", CAP_DAC_READ_SEARCH },
	{ "CAP_FOWNER", CAP_FOWNER }, { "CAP_FSETID", CAP_FSETID },
	{ "CAP_KILL", CAP_KILL }, { "CAP_SETGID", CAP_SETGID },
	{ "CAP_SETUID", CAP_SETUID }, { "CAP_SETPCAP", CAP_SETPCAP },
	{ "CAP_NET_BIND_SERVICE", CAP_NET_BIND_SERVICE },
	{ "CAP_IPC_LOCK", CAP_IPC_LOCK }, { "CAP_IPC_OWNER", CAP_IPC_OWNER },
	{ "CAP_SYS_ADMIN", CAP_SYS_ADMIN }, { "CAP_SYS_RESOURCE", CAP_SYS_RESOURCE },
	{ "CAP_SYS_NICE", CAP_SYS_NICE },
};

/*
 * "CAP_A CAP_B" as setpriv's "-all,+a,+b" (into out) and as a bit mask;
 * -EINVAL for a name this table does not know.
 */
static int caps_parse(const char *list, char *out, size_t len, uint64_t *mask,
		      char *why, size_t wlen)
{
	char copy[1024], *save = NULL, *t;

	snprintf(copy, sizeof(copy), "%s", list);
	snprintf(out, len, "-all");
	*mask = 0;
	for (t = strtok_r(copy, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) {
		size_t i, n = strlen(out);

		for (i = 0; i < sizeof(cap_names) / sizeof(cap_names[0]); i++)
			if (!strcmp(t, cap_names[i].name))
				break;
		if (i == sizeof(cap_names) / sizeof(cap_names[0])) {
			snprintf(why, wlen, "capability %s: not in the test's table", t);
			return -EINVAL;
		}
		*mask |= 1ull << cap_names[i].bit;
		snprintf(out + n, len - n, ",+");
		for (const char *c = t + 4; *c && strlen(out) < len - 1; c++) {
			n = strlen(out);
			out[n] = (char)tolower((unsigned char)*c);
			out[n + 1] = '\0';
		}
	}
	return 0;
}

/* The effective capabilities of process pid (/proc/pid/status CapEff). */
static uint64_t cap_eff(pid_t pid)
{
	char path[64], line[256];
	uint64_t v = UINT64_MAX;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return v;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "CapEff:", 7))
			v = strtoull(line + 7, NULL, 16);
	fclose(f);
	return v;
}

static bool find_in_path(const char *name, char *out, size_t len)
{
	const char *dirs[] = { "/usr/bin", "/bin", "/usr/sbin", "/sbin" };

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(out, len, "%s/%s", dirs[i], name);
		if (!access(out, X_OK))
			return true;
	}
	return false;
}

/* One line of `kvcached --print-config` starting with key: its value. */
static int print_config(const char *bin, const char *key, char *out,
			size_t len)
{
	char cmd[PATH_MAX + 64], line[512];
	size_t klen = strlen(key);
	int found = -ENOENT;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "%s --print-config --config /dev/null", bin);
	p = popen(cmd, "re");
	if (!p)
		return -errno;
	while (fgets(line, sizeof(line), p))
		if (!strncmp(line, key, klen) && line[klen] == ' ') {
			char *v = strchr(line, '=');

			snprintf(out, len, "%s", v ? trim(v + 1) : "");
			found = 0;
		}
	pclose(p);
	return found;
}

/* -------------------------------------------------------------------------- */

/* LOAD n keys and check the bytes (memfd mode): how many are right. */
static int load_ok(SELF *self, uint32_t ns, const kvc_key *keys, uint32_t n)
{
	struct kvc_load_result res[CHAIN];
	int good = 0;

	if (n > CHAIN || kvcc_load(&self->c, ns, keys[0], n, res))
		return -1;
	for (uint32_t i = 0; i < n; i++) {
		int32_t st;

		if (res[i].status)
			continue;
		good += block_ok(self->c.pool +
				 (size_t)res[i].handle.index * self->bs,
				 keys[i]);
		kvcc_release(&self->c, &res[i].handle, 1, &st);
	}
	return good;
}

/* -------------------------------------------------------------------------- */

struct mode_walk {
	struct __test_metadata *md;
	uid_t ns_uid;		/* what ns<id>/ must be */
	gid_t ns_gid;
	mode_t ns_mode;
	int files, bad;
	char first_bad[PATH_MAX + 64];
};

static struct mode_walk *walk;

static void walk_bad(const char *path, mode_t got, const char *want)
{
	if (!walk->bad++)
		snprintf(walk->first_bad, sizeof(walk->first_bad),
			 "%s: mode %04o, want %s", path, (unsigned int)got, want);
	fprintf(stderr, "# %s: mode %04o, want %s\n", path, (unsigned int)got,
		want);
}

/*
 * Every entry of a state or tier directory: the modes
 * Documentation/admin-guide/index.md and design/tiers.md give, and nothing
 * else.
 */
static int walk_one(const char *path, const struct stat *st, int type,
		    struct FTW *ftw)
{
	const char *name = path + ftw->base;
	mode_t m = st->st_mode & 07777;

	(void)type;
	if (ftw->level == 0)
		return 0;	/* the directory itself: checked by the caller */
	walk->files++;
	if (S_ISDIR(st->st_mode)) {
		if (!strncmp(name, "ns", 2) && ftw->level == 1) {
			if (m != walk->ns_mode || st->st_uid != walk->ns_uid ||
			    st->st_gid != walk->ns_gid)
				walk_bad(path, m, "the namespace's owner and read bits");
		} else if (!strcmp(name, ".gc") ||
			   !strcmp(name, ".quarantine")) {
			if (m != 0700)
				walk_bad(path, m, "0700");
		} else if (m != 0755) {	/* aa/bb fan-out, .nodes */
			walk_bad(path, m, "0755");
		}
	} else if (!S_ISREG(st->st_mode)) {
		walk_bad(path, m, "a regular file or a directory");
	} else if (!strcmp(name, "namespaces") || !strcmp(name, "parents") ||
		   !strncmp(name, ".manifest.", 10)) {
		if (m != 0600 || strstr(name, ".new"))
			walk_bad(path, m, "0600, no temp file left");
	} else if ((strlen(name) == 64 + 4 && !strcmp(name + 64, ".kvb")) ||
		   (!strcmp(name, "namespace") && ftw->level == 2)) {
		/* Block files; g4's namespace descriptions (nsshare.c). */
		if (m != 0644)
			walk_bad(path, m, "0644");
	} else {
		walk_bad(path, m, "no such file");
	}
	return 0;
}

static void check_modes(struct mode_walk *w, const char *dir, mode_t want)
{
	struct stat st;

	walk = w;
	if (stat(dir, &st) || (st.st_mode & 07777) != want)
		walk_bad(dir, st.st_mode & 07777, "its own mode");
	nftw(dir, walk_one, 16, FTW_PHYS);
}

/* -------------------------------------------------------------------------- */

/* Where the unit's absolute paths land under the test's root. */
static void under(char *out, size_t len, const char *root, const char *path)
{
	snprintf(out, len, "%s%s", root, path);
}

static int mkdirs(const char *path, mode_t mode)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s", path);
	for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = '\0';
		if (mkdir(p, 0755) && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	if (mkdir(p, mode) && errno != EEXIST)
		return -errno;
	return chmod(p, mode) ? -errno : 0;
}

TEST_F_TIMEOUT(kvcd, unit_sandbox_survives_reboot, 180)
{
	const char *unit_path = getenv("KVC_UNIT_FILE");
	char root[PATH_MAX], state[PATH_MAX], run[PATH_MAX], g3[PATH_MAX];
	char why[512] = "", setpriv[64], bset[1024], ambient[512];
	char conf[PATH_MAX + 256], doc[PATH_MAX], def[512], rwp[512];
	const char *page;
	char *argv[16];
	uint8_t salt[KVC_PROTO_SALT_SIZE], salt2[KVC_PROTO_SALT_SIZE];
	struct kvcache_handle h[CHAIN];
	struct mode_walk w = { .ns_uid = 0, .ns_gid = TENANT_GID };
	kvc_key keys[CHAIN];
	uint64_t mask, amask;
	struct unit u;
	uint32_t ns = self->ns + 1;
	struct stat st;
	mode_t old_umask;
	gid_t gid = 0;
	int n = 0, gid_arg = -1;

	if (!unit_path || !*unit_path)
		unit_path = KVC_UNIT_FILE;
	if (self->mode != KVC_PROTO_MODE_MEMFD)
		SKIP(return, "memfd mode: the blocks are checked in the pool memfd");
	if (geteuid() != 0)
		SKIP(return, "needs root: setpriv drops capabilities from a full set");
	if (!find_in_path("setpriv", setpriv, sizeof(setpriv)))
		SKIP(return, "no setpriv(1)");
	if (access(unit_path, R_OK))
		SKIP(return, "no unit file at %s", unit_path);
	ASSERT_EQ(0, unit_read(unit_path, &u, why, sizeof(why))) TH_LOG("%s", why);
	ASSERT_NE(0, u.caps[0]) TH_LOG("%s has no CapabilityBoundingSet", unit_path);
	ASSERT_EQ(0, caps_parse(u.caps, bset, sizeof(bset), &mask, why,
				sizeof(why))) TH_LOG("%s", why);
	ASSERT_EQ(0, caps_parse(u.ambient, ambient, sizeof(ambient), &amask,
				why, sizeof(why))) TH_LOG("%s", why);
	/* root unless User= says otherwise (it does not: kernel mode). */
	ASSERT_TRUE(!u.user[0] || !strcmp(u.user, "root"))
		TH_LOG("User=%s: extend the test to --reuid", u.user);

	/* The unit's paths are the daemon's defaults: they cannot drift. */
	ASSERT_NE(0, u.state[0]) TH_LOG("no StateDirectory=: state on /run is lost at reboot");
	ASSERT_NE(0, u.runtime[0]);
	ASSERT_EQ(0, print_config(self->bin, "state_dir", def, sizeof(def)));
	snprintf(conf, sizeof(conf), "/var/lib/%s", u.state);
	EXPECT_STREQ(conf, def);
	ASSERT_EQ(0, print_config(self->bin, "socket", def, sizeof(def)));
	snprintf(conf, sizeof(conf), "/run/%s/", u.runtime);
	EXPECT_EQ(0, strncmp(def, conf, strlen(conf))) TH_LOG("socket %s", def);
	EXPECT_EQ(0700, u.state_mode);
	EXPECT_EQ(NULL, strstr(u.exec, "--state-dir"));
	/*
	 * LimitNOFILE=: a fast index segment for every namespace there can
	 * be, and the 1024 clients and tier files besides (kvcached.md,
	 * "Descriptors"); systemd's default soft 1024 would not do.
	 */
	EXPECT_LE((unsigned long long)KVCACHE_NS_MAX + 2048, u.nofile)
		TH_LOG("LimitNOFILE=%llu", u.nofile);
	/*
	 * Documentation= names a page make install puts there: the path below
	 * share/doc/kvcache/ is the page's path below Documentation/.
	 */
	ASSERT_EQ(0, strncmp(u.doc, "file://", 7)) TH_LOG("%s", u.doc);
	page = strstr(u.doc, "/share/doc/kvcache/");
	ASSERT_NE(NULL, page) TH_LOG("%s", u.doc);
	page += strlen("/share/doc/kvcache/");
	snprintf(def, sizeof(def), "%s", self->bin);
	*strrchr(def, '/') = '\0';	/* build/helper */
	snprintf(doc, sizeof(doc), "%s/../../Documentation/%s", def, page);
	EXPECT_EQ(0, access(doc, R_OK)) TH_LOG("%s: not in Documentation/", u.doc);

	/* A root of our own; g3 is the first of ReadWritePaths. */
	tier_dir(root, sizeof(root), "root");
	chmod(root, 0755);
	snprintf(self->scratch, sizeof(self->scratch), "%s", root);
	under(state, sizeof(state), root, "/var/lib/");
	strncat(state, u.state, sizeof(state) - strlen(state) - 1);
	snprintf(rwp, sizeof(rwp), "%s", u.rw);
	*strchrnul(rwp, ' ') = '\0';
	under(g3, sizeof(g3), root, rwp[0] == '-' ? rwp + 1 : rwp);
	ASSERT_EQ(0, mkdirs(state, u.state_mode));
	ASSERT_EQ(0, mkdirs(g3, 0755));

	/* setpriv: exactly the unit's capabilities and privileges. */
	argv[n++] = setpriv;
	snprintf(def, sizeof(def), "--bounding-set=%s", bset);
	argv[n++] = strdup(def);
	argv[n++] = "--inh-caps=-all";
	snprintf(def, sizeof(def), "--ambient-caps=%s", ambient);
	argv[n++] = strdup(def);
	if (u.nnp)
		argv[n++] = "--no-new-privs";
	/*
	 * Group=: root, with that group as its own (the socket's group). Where
	 * the group does not exist (a test machine, not a package install),
	 * a stand-in gid no one else has.
	 */
	if (u.group[0]) {
		struct group *gr = getgrnam(u.group);

		gid = gr ? gr->gr_gid : DEPLOY_STANDIN_GID;
		snprintf(def, sizeof(def), "--regid=%u", (unsigned int)gid);
		gid_arg = n;
		argv[n++] = strdup(def);
		argv[n++] = "--clear-groups";
	}
	argv[n++] = "--";
	argv[n] = NULL;

	kvcc_close(&self->c);
	daemon_stop(self);
	rm_rf(self->state);	/* the fixture's: ours is under root */
	snprintf(self->state, sizeof(self->state), "%s", state);
	under(run, sizeof(run), root, "/run/");
	strncat(run, u.runtime, sizeof(run) - strlen(run) - 1);
	snprintf(self->sock, sizeof(self->sock), "%.90s/s.sock", run);
	ASSERT_LT(strlen(run) + 8, sizeof(self->sock)) TH_LOG("TMPDIR too long");
	self->wrap = argv;
	snprintf(conf, sizeof(conf),
		 "[g3]\ndirectory = %s\ncapacity = 64M\nwrite = through\n", g3);
	old_umask = umask(u.umask);
	ASSERT_EQ(0, mkdirs(run, 0755));	/* RuntimeDirectory= */
	ASSERT_EQ(0, restart(self, conf, why, sizeof(why))) TH_LOG("%s", why);
	EXPECT_EQ(mask, cap_eff(self->daemon))
		TH_LOG("the daemon's CapEff is not the unit's bounding set");
	/* Engines of the unit's group may reach the socket. */
	ASSERT_EQ(0, stat(self->sock, &st));
	if (u.group[0])
		EXPECT_EQ(gid, st.st_gid) TH_LOG("the socket's group is %u",
						 (unsigned int)st.st_gid);

	/* Another user's namespace: its directories are given away. */
	ASSERT_EQ(0, kvcc_ns_create(&self->c, ns, TENANT_UID, TENANT_GID, 0750))
		TH_LOG("%s", self->c.why);
	ASSERT_EQ(0, kvcc_ns_salt(&self->c, ns, NULL, salt)) TH_LOG("%s", self->c.why);
	chain_keys(self, 41, CHAIN, keys);
	ASSERT_EQ(0, store_chain(self, ns, keys, CHAIN, false, h))
		TH_LOG("%s", self->c.why);
	for (double end = now_s() + 30; now_s() < end; msleep(50))
		if (kvcc_stat1(&self->c, "g3_spills") +
		    kvcc_stat1(&self->c, "g3_spill_errors") >= CHAIN)
			break;
	EXPECT_EQ(0, kvcc_stat1(&self->c, "g3_spill_errors"))
		TH_LOG("spills fail under the unit's capabilities");
	ASSERT_EQ(CHAIN, kvcc_stat1(&self->c, "g3_spills"));

	/* The reboot: /run is gone, /var/lib stays. */
	kvcc_close(&self->c);
	daemon_stop(self);
	rm_rf(run);
	ASSERT_NE(0, stat(run, &st));
	ASSERT_EQ(0, mkdirs(run, 0755));
	ASSERT_EQ(0, restart(self, conf, why, sizeof(why))) TH_LOG("%s", why);
	ASSERT_EQ(0, kvcc_ns_salt(&self->c, ns, NULL, salt2)) TH_LOG("%s", self->c.why);
	EXPECT_EQ(0, memcmp(salt, salt2, sizeof(salt)))
		TH_LOG("the namespace came back with another salt");
	EXPECT_EQ(CHAIN, kvcc_lookup(&self->c, ns, KVC_PROTO_TIER_G3, keys[0],
				     CHAIN, NULL));
	EXPECT_EQ(CHAIN, load_ok(self, ns, keys, CHAIN));
	EXPECT_EQ(0, kvcc_stat1(&self->c, "unknown_namespaces"));

	/* What the reboot found on disk has the modes it must have: ns<id>/
	 * kvcached's, r-x for the group of a 0750 namespace (and for its
	 * owner, through an ACL). */
	w.ns_mode = 0750;
	check_modes(&w, state, 0700);
	check_modes(&w, g3, 0755);
	EXPECT_EQ(0, w.bad) TH_LOG("%s", w.first_bad);
	EXPECT_LE(CHAIN + 2, w.files);

	umask(old_umask);
	kvcc_close(&self->c);
	daemon_stop(self);
	self->wrap = NULL;
	free(argv[1]);
	free(argv[3]);
	if (gid_arg >= 0)
		free(argv[gid_arg]);
}

/* -------------------------------------------------------------------------- */

TEST_F_TIMEOUT(kvcd, files_have_their_modes, 120)
{
	char g3[PATH_MAX], g4[PATH_MAX], conf[2 * PATH_MAX + 256];
	char why[512] = "";
	struct kvcache_handle h[CHAIN];
	struct mode_walk w = { .ns_uid = 0, .ns_gid = 0, .ns_mode = 0700 };
	kvc_key keys[CHAIN];
	mode_t old = umask(022);

	if (geteuid() != 0) {
		w.ns_uid = geteuid();
		w.ns_gid = getegid();
		w.ns_mode = 0700;	/* kvcached not root: its own */
	}
	tier_dir(g3, sizeof(g3), "g3");
	tier_dir(g4, sizeof(g4), "g4");
	snprintf(self->scratch, sizeof(self->scratch), "%s", g3);
	snprintf(conf, sizeof(conf),
		 "[g3]\ndirectory = %s\ncapacity = 64M\nwrite = through\n"
		 "[g4]\ndirectory = %s\ncapacity = 64M\nwrite = through\n"
		 "node = n1\n", g3, g4);
	ASSERT_EQ(0, restart(self, conf, why, sizeof(why))) TH_LOG("%s", why);
	chain_keys(self, 42, CHAIN, keys);
	ASSERT_EQ(0, store_chain(self, self->ns, keys, CHAIN, false, h))
		TH_LOG("%s", self->c.why);
	ASSERT_EQ(CHAIN, wait_stat(&self->c, "g3_spills", CHAIN, 30));
	ASSERT_EQ(CHAIN, wait_stat(&self->c, "g4_spills", CHAIN, 30));
	/* The restart's recovery rewrites the manifests. */
	ASSERT_EQ(0, restart(self, conf, why, sizeof(why))) TH_LOG("%s", why);
	EXPECT_EQ(CHAIN, kvcc_lookup(&self->c, self->ns, KVC_PROTO_TIER_G3,
				     keys[0], CHAIN, NULL));
	kvcc_close(&self->c);
	daemon_stop(self);
	check_modes(&w, self->state, 0700);
	check_modes(&w, g3, 0755);
	check_modes(&w, g4, 0755);
	EXPECT_EQ(0, w.bad) TH_LOG("%s", w.first_bad);
	/* 8 files in each tier, 2 manifests, the namespace table. */
	EXPECT_LE(2 * CHAIN + 3, w.files);
	umask(old);
	rm_rf(g4);
}

/* -------------------------------------------------------------------------- */

TEST_F_TIMEOUT(kvcd, lost_state_refuses_to_start, 120)
{
	char g3[PATH_MAX], conf[PATH_MAX + 256], conf2[PATH_MAX + 320];
	char why[512] = "", path[PATH_MAX + 32];
	uint8_t salt[KVC_PROTO_SALT_SIZE];
	struct kvcache_handle h[CHAIN];
	kvc_key keys[CHAIN];
	struct stat st;
	int files;

	if (self->mode != KVC_PROTO_MODE_MEMFD)
		SKIP(return, "memfd mode: the blocks are checked in the pool memfd");
	if (geteuid() != 0)
		SKIP(return, "NS_CREATE and NS_SALT SET need root");
	tier_dir(g3, sizeof(g3), "g3");
	snprintf(self->scratch, sizeof(self->scratch), "%s", g3);
	snprintf(conf, sizeof(conf),
		 "[g3]\ndirectory = %s\ncapacity = 64M\nwrite = through\n", g3);
	snprintf(conf2, sizeof(conf2), "%s[daemon]\nallow_missing_state = yes\n",
		 conf);
	ASSERT_EQ(0, restart(self, conf, why, sizeof(why))) TH_LOG("%s", why);
	ASSERT_EQ(0, kvcc_ns_salt(&self->c, self->ns, NULL, salt));
	chain_keys(self, 43, CHAIN, keys);
	ASSERT_EQ(0, store_chain(self, self->ns, keys, CHAIN, false, h))
		TH_LOG("%s", self->c.why);
	ASSERT_EQ(CHAIN, wait_stat(&self->c, "g3_spills", CHAIN, 30));
	files = count_files(g3, "");

	/* A reboot with the state on a tmpfs: the table is gone. */
	kvcc_close(&self->c);
	daemon_stop(self);
	rm_rf(self->state);
	EXPECT_NE(0, restart(self, conf, why, sizeof(why)));
	EXPECT_NE(NULL, strstr(why, "status 0x300")) TH_LOG("%s", why);
	EXPECT_NE(NULL, strstr(why, "exited")) TH_LOG("%s", why);
	snprintf(path, sizeof(path), "%s/namespaces", self->state);
	EXPECT_NE(0, stat(path, &st));	/* no fresh table either */
	EXPECT_EQ(files, count_files(g3, ""));

	/* Told to go on: it starts, says so, keeps the files. */
	ASSERT_EQ(0, restart(self, conf2, why, sizeof(why))) TH_LOG("%s", why);
	EXPECT_EQ(1, kvcc_stat1(&self->c, "state_missing"));
	EXPECT_EQ(1, kvcc_stat1(&self->c, "unknown_namespaces"));
	EXPECT_EQ(files, count_files(g3, ""));
	EXPECT_EQ(0, stat(path, &st));	/* decided: the next start has one */

	/* The namespace back, with its old salt: its blocks are again. */
	ASSERT_EQ(0, ns_create(self, &self->c, self->ns, 0, 0, 0700));
	ASSERT_EQ(0, kvcc_ns_salt(&self->c, self->ns, salt, NULL));
	ASSERT_EQ(0, restart(self, conf, why, sizeof(why))) TH_LOG("%s", why);
	EXPECT_EQ(0, kvcc_stat1(&self->c, "state_missing"));
	EXPECT_EQ(0, kvcc_stat1(&self->c, "unknown_namespaces"));
	for (double end = now_s() + 20; now_s() < end; msleep(100))
		if (kvcc_lookup(&self->c, self->ns, KVC_PROTO_TIER_G3, keys[0],
				CHAIN, NULL) == CHAIN)
			break;
	EXPECT_EQ(CHAIN, kvcc_lookup(&self->c, self->ns, KVC_PROTO_TIER_G3,
				     keys[0], CHAIN, NULL));
	EXPECT_EQ(CHAIN, load_ok(self, self->ns, keys, CHAIN));
}

/* -------------------------------------------------------------------------- */

/*
 * The state directory is a full filesystem: a small tmpfs, filled up,
 * in a mount namespace of this test's own (the daemon, its child, sees
 * it; it goes with them). NS_CREATE must fail and create nothing: a
 * namespace whose salt is not saved loses its blocks at the next start.
 */
TEST_F_TIMEOUT(kvcd, ns_create_refused_on_full_state_dir, 60)
{
	char path[PATH_MAX + 32], why[512] = "", buf[4096];
	uint8_t salt[KVC_PROTO_SALT_SIZE];
	uint32_t ns = self->ns + 2;
	int fd;

	if (self->mode != KVC_PROTO_MODE_MEMFD)
		SKIP(return, "memfd mode (kernel mode would also undo the kernel's namespace)");
	if (geteuid() != 0)
		SKIP(return, "NS_CREATE and mounting a tmpfs need root");
	ASSERT_EQ(0, unshare(CLONE_NEWNS)) TH_LOG("unshare: %s", strerror(errno));
	ASSERT_EQ(0, mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL));
	ASSERT_EQ(0, mount("tmpfs", self->state, "tmpfs", 0, "size=64k,mode=0700"))
		TH_LOG("mount: %s", strerror(errno));
	/* The daemon restarts in the namespace, on the (empty) tmpfs. */
	ASSERT_EQ(0, restart(self, NULL, why, sizeof(why))) TH_LOG("%s", why);
	snprintf(path, sizeof(path), "%s/fill", self->state);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	ASSERT_LE(0, fd);
	memset(buf, 'x', sizeof(buf));
	while (write(fd, buf, sizeof(buf)) > 0)
		;
	close(fd);

	EXPECT_EQ(-ENOSPC, kvcc_ns_create(&self->c, ns, 0, 0, 0700))
		TH_LOG("%s", self->c.why);
	EXPECT_EQ(-ENOENT, kvcc_ns_salt(&self->c, ns, NULL, salt));
	EXPECT_EQ(1, kvcc_stat1(&self->c, "state_errors"));
	/* Room again: created, and still there after a restart. */
	unlink(path);
	ASSERT_EQ(0, ns_create(self, &self->c, ns, 0, 0, 0700))
		TH_LOG("%s", self->c.why);
	ASSERT_EQ(0, restart(self, NULL, why, sizeof(why))) TH_LOG("%s", why);
	EXPECT_EQ(0, kvcc_ns_salt(&self->c, ns, NULL, salt));
	/* The teardown removes the state directory under the tmpfs. */
	kvcc_close(&self->c);
	daemon_stop(self);
	EXPECT_EQ(0, umount2(self->state, MNT_DETACH));
}

/* -------------------------------------------------------------------------- */

TEST_F_TIMEOUT(kvcd, journal_append_failure_refuses_store, 90)
{
	struct kvcache_handle h[2], h2[2];
	kvc_key keys[2];
	int32_t st[2];
	char why[512] = "";

	if (self->mode != KVC_PROTO_MODE_KERNEL)
		SKIP(return, "the parents journal is kernel mode's");
	setenv("KVCACHED_FAULT", "journal_write=enospc,times=1", 1);
	ASSERT_EQ(0, restart(self, NULL, why, sizeof(why))) TH_LOG("%s", why);
	unsetenv("KVCACHED_FAULT");
	chain_keys(self, 44, 2, keys);
	ASSERT_EQ(0, make_blocks(self, &self->c, self->dev, self->ns, keys, 2,
				 false, h));
	/* The first record fails: refused, and so is its child. */
	EXPECT_NE(0, store_blocks(&self->c, self->ns, keys, NULL, h, 2, st));
	EXPECT_EQ(-ENOSPC, st[0]);
	EXPECT_EQ(-ENOENT, st[1]);
	EXPECT_EQ(1, kvcc_stat1(&self->c, "journal_errors"));
	EXPECT_EQ(0, kvcc_stat1(&self->c, "stores"));
	EXPECT_EQ(0, kvcc_lookup(&self->c, self->ns, KVC_PROTO_TIERS_ALL,
				 keys[0], 2, NULL));
	/* The fault is spent: the same chain again, stored and durable. */
	ASSERT_EQ(0, make_blocks(self, &self->c, self->dev, self->ns, keys, 2,
				 false, h2));
	EXPECT_EQ(0, store_blocks(&self->c, self->ns, keys, NULL, h2, 2, st));
	ASSERT_EQ(0, restart(self, NULL, why, sizeof(why))) TH_LOG("%s", why);
	EXPECT_EQ(2, kvcc_lookup(&self->c, self->ns, KVC_PROTO_TIERS_ALL,
				 keys[0], 2, NULL));
}

/* -------------------------------------------------------------------------- */

/* The service manager's end: a datagram socket at path, with credentials. */
static int manager_socket(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, one = 1;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	strcpy(sa.sun_path, path);
	unlink(path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one))) {
		close(fd);
		return -errno;
	}
	return fd;
}

struct manager {
	int fd;
	int pings;		/* WATCHDOG=1 seen (and skipped) */
	pid_t from;		/* the last notification's sender */
};

/*
 * The next notification that is not a watchdog ping, into buf (waiting
 * timeout_s at most): 0, or -ETIMEDOUT.
 */
static int notified(struct manager *m, char *buf, size_t len, double timeout_s)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(struct ucred))];
	} cmsg;

	for (double end = now_s() + timeout_s; now_s() < end;) {
		struct iovec iov = { .iov_base = buf, .iov_len = len - 1 };
		struct msghdr mh = {
			.msg_iov = &iov, .msg_iovlen = 1,
			.msg_control = cmsg.buf,
			.msg_controllen = sizeof(cmsg.buf),
		};
		struct pollfd p = { .fd = m->fd, .events = POLLIN };
		struct cmsghdr *cm;
		ssize_t n;

		if (poll(&p, 1, 50) <= 0)
			continue;
		n = recvmsg(m->fd, &mh, MSG_DONTWAIT);
		if (n < 0)
			continue;
		buf[n] = '\0';
		m->from = 0;
		for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
			struct ucred uc;

			if (cm->cmsg_level == SOL_SOCKET &&
			    cm->cmsg_type == SCM_CREDENTIALS) {
				memcpy(&uc, CMSG_DATA(cm), sizeof(uc));
				m->from = uc.pid;
			}
		}
		if (!strcmp(buf, "WATCHDOG=1")) {
			m->pings++;
			continue;
		}
		return 0;
	}
	buf[0] = '\0';
	return -ETIMEDOUT;
}

/*
 * Read what is queued without waiting: pings are counted; returns how
 * many other notifications there were (the last in buf). Before each
 * signal, so that the manager's queue (net.unix.max_dgram_qlen, 10 by
 * default) has room for what the signal makes kvcached say.
 */
static int drain(struct manager *m, char *buf, size_t len)
{
	int others = 0;

	while (!notified(m, buf, len, 0.001))
		others++;
	return others;
}

/* Does the notification hold the line "line" (whole)? */
static bool has_line(const char *msg, const char *line)
{
	size_t n = strlen(line);

	for (const char *p = msg; p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, line, n) && (p[n] == '\n' || !p[n]))
			return true;
	return false;
}

/* The value of "KEY=" in a notification, or NULL. */
static const char *value_of(const char *msg, const char *key)
{
	size_t n = strlen(key);

	for (const char *p = msg; p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, key, n) && p[n] == '=')
			return p + n + 1;
	return NULL;
}

static uint64_t mono_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* n one-block chains from salt on, sealed, stored and unpinned. */
static int fill(SELF *self, uint32_t salt, uint32_t n)
{
	struct kvcache_handle h;
	kvc_key k;
	int ret = 0;

	for (uint32_t i = 0; !ret && i < n; i++) {
		chain_keys(self, salt + i, 1, &k);
		ret = store_chain(self, self->ns, &k, 1, false, &h);
	}
	return ret;
}

/* Poll pool_free until it is at least want (timeout_s at most). */
static uint64_t wait_free(SELF *self, uint64_t want, double timeout_s)
{
	return wait_stat(&self->c, "pool_free", want, timeout_s);
}

/* Rewrite the configuration and send SIGHUP; RELOADING=1 into buf. */
static int hup(SELF *self, struct manager *m, char *buf, size_t len,
	       uint64_t *before)
{
	int ret = write_config(self);

	if (ret)
		return ret;
	if (drain(m, buf, len))
		return -EPROTO;		/* said before the signal */
	*before = mono_usec();
	if (kill(self->daemon, SIGHUP))
		return -errno;
	return notified(m, buf, len, 10);
}

TEST_F_TIMEOUT(kvcd, notify_ready_reload_stop, 120)
{
	const char *unit_path = getenv("KVC_UNIT_FILE");
	char why[512] = "", msg[2048], dir[PATH_MAX - 16], path[PATH_MAX];
	char g3[PATH_MAX], extra[PATH_MAX + 128];
	const char *v;
	struct manager m = { .fd = -1 };
	uint64_t before, after, mono, free_now;
	struct unit u;
	int status;

	if (!unit_path || !*unit_path)
		unit_path = KVC_UNIT_FILE;
	if (self->mode != KVC_PROTO_MODE_MEMFD || self->nr != 32)
		SKIP(return, "memfd mode: the watermarks are checked on the test's pool of 32 blocks");

	/* What the unit promises systemd, this test checks of kvcached. */
	if (!access(unit_path, R_OK)) {
		ASSERT_EQ(0, unit_read(unit_path, &u, why, sizeof(why)))
			TH_LOG("%s", why);
		EXPECT_STREQ("notify", u.type);
		EXPECT_STREQ("main", u.notify_access);
		EXPECT_NE(NULL, strstr(u.reload, "-HUP")) TH_LOG("ExecReload=%s", u.reload);
		EXPECT_NE(NULL, strstr(u.reload, "$MAINPID")) TH_LOG("ExecReload=%s", u.reload);
	}

	/* The manager's socket, and a g3 directory (never used). */
	tier_dir(dir, sizeof(dir), "notify");
	snprintf(self->scratch, sizeof(self->scratch), "%s", dir);
	snprintf(path, sizeof(path), "%s/manager.sock", dir);
	snprintf(g3, sizeof(g3), "%s/g3", dir);
	ASSERT_EQ(0, mkdir(g3, 0755));
	m.fd = manager_socket(path);
	ASSERT_LE(0, m.fd) TH_LOG("%s: %s", path, strerror(-m.fd));

	/* A fresh daemon with the test as its manager, a watchdog of 0.4 s. */
	kvcc_close(&self->c);
	daemon_stop(self);
	unlink(self->sock);
	setenv("NOTIFY_SOCKET", path, 1);
	setenv("WATCHDOG_USEC", "400000", 1);
	unsetenv("WATCHDOG_PID");
	ASSERT_EQ(0, daemon_spawn(self, why, sizeof(why))) TH_LOG("%s", why);
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");

	ASSERT_EQ(0, notified(&m, msg, sizeof(msg), 20))
		TH_LOG("no READY=1 within 20 s");
	EXPECT_TRUE(has_line(msg, "READY=1")) TH_LOG("%s", msg);
	EXPECT_EQ(self->daemon, m.from);
	v = value_of(msg, "STATUS");
	ASSERT_NE(NULL, v) TH_LOG("%s", msg);
	EXPECT_NE(NULL, strstr(v, "memfd mode, pool 64 MiB in 32 blocks of 2 MiB"))
		TH_LOG("%s", v);
	EXPECT_NE(NULL, strstr(v, self->sock)) TH_LOG("%s", v);
	/* Ready means accepting: connected at the first try. */
	ASSERT_EQ(0, kvcc_open(&self->c, self->sock)) TH_LOG("not accepting after READY=1");
	ASSERT_EQ(0, kvcc_hello(&self->c)) TH_LOG("%s", self->c.why);
	/* Pings: about every 0.2 s. */
	for (double end = now_s() + 3; now_s() < end && m.pings < 3;)
		EXPECT_EQ(-ETIMEDOUT, notified(&m, msg, sizeof(msg), 0.1))
			TH_LOG("unexpected: %s", msg);
	EXPECT_LE(3, m.pings);
	EXPECT_EQ(self->daemon, m.from);

	/* 20 of 32 blocks taken: 12 free, above 10 % (3): no eviction. */
	ASSERT_EQ(0, fill(self, 500, 20)) TH_LOG("%s", self->c.why);
	msleep(400);
	EXPECT_EQ(0, kvcc_stat1(&self->c, "evictions"));
	free_now = kvcc_stat1(&self->c, "pool_free");
	EXPECT_EQ(12, free_now);
	EXPECT_FALSE(file_has(self->log, "debug:"));

	/*
	 * Reload: watermarks 50/60 % and debug are applied; g3 switched on
	 * is a restart: named, and the tier stays off.
	 */
	self->low_pct = 50;
	self->high_pct = 60;
	snprintf(extra, sizeof(extra),
		 "[daemon]\nlog_level = debug\n[g3]\ndirectory = %s\ncapacity = 64M\n",
		 g3);
	self->extra_conf = extra;
	ASSERT_EQ(0, hup(self, &m, msg, sizeof(msg), &before))
		TH_LOG("no RELOADING=1 within 10 s: %s", msg);
	after = mono_usec();
	EXPECT_TRUE(has_line(msg, "RELOADING=1")) TH_LOG("%s", msg);
	v = value_of(msg, "MONOTONIC_USEC");
	ASSERT_NE(NULL, v) TH_LOG("%s", msg);
	mono = strtoull(v, NULL, 10);
	EXPECT_LE(before, mono);
	EXPECT_GE(after, mono);
	ASSERT_EQ(0, notified(&m, msg, sizeof(msg), 10)) TH_LOG("no READY=1 after the reload");
	EXPECT_TRUE(has_line(msg, "READY=1")) TH_LOG("%s", msg);
	v = value_of(msg, "STATUS");
	EXPECT_TRUE(v && strstr(v, "2 settings of the file wait for a restart"))
		TH_LOG("%s", msg);
	/* 12 free < 50 %: evicted up to 60 % (19 blocks). */
	EXPECT_LE(19, wait_free(self, 19, 10));
	EXPECT_LE(7, kvcc_stat1(&self->c, "evictions"));
	EXPECT_EQ(UINT64_MAX, kvcc_stat1(&self->c, "g3_capacity"));
	EXPECT_TRUE(file_has(self->log, "reload: [pool] low_watermark = 50 (was 10)"));
	EXPECT_TRUE(file_has(self->log, "warning: reload: [g3] directory = "));
	EXPECT_TRUE(file_has(self->log, "needs a restart"));
	/* Debug: a connection is logged. */
	kvcc_close(&self->c);
	ASSERT_EQ(0, kvcc_open(&self->c, self->sock));
	ASSERT_EQ(0, kvcc_hello(&self->c)) TH_LOG("%s", self->c.why);
	EXPECT_NE(UINT64_MAX, kvcc_stat1(&self->c, "stores"));
	EXPECT_TRUE(file_has(self->log, "kvcached: debug: client"));

	/* A file that does not parse: everything stays, still serving. */
	self->extra_conf = "[pool]\nprefetch = lots\n";
	ASSERT_EQ(0, hup(self, &m, msg, sizeof(msg), &before))
		TH_LOG("no RELOADING=1 within 10 s: %s", msg);
	EXPECT_TRUE(has_line(msg, "RELOADING=1")) TH_LOG("%s", msg);
	ASSERT_EQ(0, notified(&m, msg, sizeof(msg), 10)) TH_LOG("no READY=1 after the failed reload");
	EXPECT_TRUE(has_line(msg, "READY=1")) TH_LOG("%s", msg);
	v = value_of(msg, "STATUS");
	EXPECT_TRUE(v && strstr(v, "reload failed") && strstr(v, "prefetch"))
		TH_LOG("%s", msg);
	EXPECT_TRUE(file_has(self->log, "error: reload failed"));
	/* Still 50/60 %: 5 more blocks (14 free, below 16) are evicted again. */
	before = kvcc_stat1(&self->c, "evictions");
	ASSERT_EQ(0, fill(self, 600, 5)) TH_LOG("%s", self->c.why);
	EXPECT_LT(before, wait_evictions(&self->c, before, 10));
	EXPECT_LE(19, wait_free(self, 19, 10));

	/* SIGTERM: STOPPING=1, and a clean exit. */
	kvcc_close(&self->c);
	EXPECT_EQ(0, drain(&m, msg, sizeof(msg))) TH_LOG("unexpected: %s", msg);
	status = daemon_stop(self);
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
		TH_LOG("status %#x", status);
	ASSERT_EQ(0, notified(&m, msg, sizeof(msg), 5)) TH_LOG("no STOPPING=1");
	EXPECT_TRUE(has_line(msg, "STOPPING=1")) TH_LOG("%s", msg);
	close(m.fd);
}

TEST_HARNESS_MAIN
