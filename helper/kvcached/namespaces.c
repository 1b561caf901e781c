// SPDX-License-Identifier: GPL-2.0
/*
 * namespaces: who may do what, and the namespace table that survives
 * restarts (kvcd.h).
 *
 * The peer's credentials come from SO_PEERCRED when it connects. A
 * namespace has an owner, a group and mode bits like a file (read:
 * LOOKUP and LOAD; write: STORE and, in memfd mode, ALLOC); uid 0 may do
 * everything, and only uid 0 creates namespaces. In kernel mode the
 * kernel enforces the same rules again on every block a client pins or
 * maps, so the daemon's answers never grant access by themselves; they
 * must still not reveal to one tenant which prefixes another has cached.
 *
 * memfd mode gives every client the whole pool: the holders of it are
 * remembered, and a namespace they could not all read and write is
 * refused while the pool lives.
 *
 * The table ("namespaces" in the state directory) holds each
 * namespace's owner, mode and key salt; it is written whole to a new
 * file, synced and renamed over the old one, so a crash leaves one or
 * the other.
 */
#include "kvcd.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "fault.h"
#include "log.h"

/* The peer's primary group or one of its supplementary groups. */
static bool kvcd_in_group(const struct kvc_peer *p, uint32_t gid)
{
	if (p->gid == gid)
		return true;
	for (uint32_t i = 0; i < p->ngroups; i++)
		if (p->groups[i] == gid)
			return true;
	return false;
}

/* Whether peer p has the mode bits want (4 read, 2 write) on n. */
static bool kvcd_ns_may(const struct kvcd_ns *n, const struct kvc_peer *p,
			unsigned int want)
{
	unsigned int bits;

	if (p->uid == 0)
		return true;
	if (p->uid == n->uid)
		bits = n->mode >> 6;
	else if (kvcd_in_group(p, n->gid))
		bits = n->mode >> 3;
	else
		bits = n->mode;
	return (bits & want) == want;
}

bool kvcd_may(const struct kvcd *d, const struct kvc_peer *p,
	      uint32_t ns, unsigned int want)
{
	if (ns < 1 || ns > KVCACHE_NS_MAX || !d->ns[ns].used)
		return false;
	return kvcd_ns_may(&d->ns[ns], p, want);
}

/*
 * memfd mode has no kernel to check each block: a peer with the pool
 * memfd can map, read and overwrite every block of every namespace, and
 * keeps its mapping until it exits. So the pool is one trust domain: only
 * a peer that may read and write every namespace gets the memfd (HELLO),
 * and no namespace is created that such a peer, still connected, could
 * not read and write (NS_CREATE).
 */
bool kvcd_may_every_ns(const struct kvcd *d, const struct kvc_peer *p)
{
	for (uint32_t ns = 1; ns <= KVCACHE_NS_MAX; ns++)
		if (d->ns[ns].used && !kvcd_ns_may(&d->ns[ns], p, 6))
			return false;
	return true;
}

/* Whether a recorded pool holder may read and write namespace n. */
static bool kvcd_holder_may(const struct kvcd_holder *h,
			    const struct kvcd_ns *n)
{
	struct kvc_peer p = {
		.uid = h->uid, .gid = h->gid,
		.groups = (gid_t *)h->groups, .ngroups = h->ngroups,
	};

	return kvcd_ns_may(n, &p, 6);
}

/* Remember who was given the pool memfd (memfd mode, non-root peers). */
void kvcd_holder_add(struct kvcd *d, const struct kvc_peer *p)
{
	struct kvcd_holder *h;

	if (p->uid == 0)
		return;
	for (uint32_t i = 0; i < d->nholders; i++) {
		h = &d->holders[i];
		if (h->uid == p->uid && h->gid == p->gid &&
		    h->ngroups == p->ngroups &&
		    !memcmp(h->groups, p->groups,
			    p->ngroups * sizeof(gid_t)))
			return;
	}
	if (d->nholders == KVCD_MAX_HOLDERS ||
	    p->ngroups > KVCD_HOLDER_GROUPS) {
		d->holders_unknown = true;
		return;
	}
	h = &d->holders[d->nholders++];
	h->uid = p->uid;
	h->gid = p->gid;
	h->ngroups = p->ngroups;
	memcpy(h->groups, p->groups, p->ngroups * sizeof(gid_t));
}

/*
 * memfd mode: may namespace n be created? Not if anyone given the pool
 * since the daemon started could not read and write it: that process
 * may still have the pool mapped. When some holder is not recorded, only
 * a namespace every user may read and write is safe.
 */
bool kvcd_holders_allow(const struct kvcd *d, const struct kvcd_ns *n)
{
	if (d->holders_unknown && (n->mode & 06) != 06)
		return false;
	for (uint32_t i = 0; i < d->nholders; i++)
		if (!kvcd_holder_may(&d->holders[i], n))
			return false;
	return true;
}

/* A file of the state directory (kvcd_create() checked the length). */
void kvcd_path(const struct kvcd *d, const char *name, char *out)
{
	size_t n = strlen(d->state_dir);

	memcpy(out, d->state_dir, n);
	out[n] = '/';
	strcpy(out + n + 1, name);
}

/*
 * A namespace's salt: 32 random bytes. getrandom() without GRND_NONBLOCK
 * waits for the pool to be initialised once, early at boot, rather than
 * hand out a guessable salt.
 */
int kvcd_new_salt(uint8_t salt[KVC_PROTO_SALT_SIZE])
{
	size_t got = 0;

	while (got < KVC_PROTO_SALT_SIZE) {
		ssize_t n = getrandom(salt + got, KVC_PROTO_SALT_SIZE - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		got += (size_t)n;
	}
	return 0;
}

/*
 * Write the namespace table: a new file renamed over the old one. One
 * line per namespace: id, uid, gid, octal mode, salt in hex. The file
 * holds the salts, so it is created 0600 (the state directory is 0700).
 */
int kvcd_ns_save(const struct kvcd *d)
{
	char path[PATH_MAX], tmp[PATH_MAX];
	FILE *f;
	int fd, ret = 0;

	kvcd_path(d, "namespaces", path);
	kvcd_path(d, "namespaces.new", tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	/* 0600 whatever the umask: the salts. */
	if (fchmod(fd, 0600)) {
		ret = -errno;
		close(fd);
		unlink(tmp);
		return ret;
	}
	f = fdopen(fd, "w");
	if (!f) {
		ret = -errno;
		close(fd);
		return ret;
	}
	for (uint32_t i = 1; i <= KVCACHE_NS_MAX; i++) {
		if (!d->ns[i].used)
			continue;
		fprintf(f, "%" PRIu32 " %" PRIu32 " %" PRIu32 " %o ", i,
			d->ns[i].uid, d->ns[i].gid, d->ns[i].mode);
		for (int j = 0; j < KVC_PROTO_SALT_SIZE; j++)
			fprintf(f, "%02x", d->ns[i].salt[j]);
		fputc('\n', f);
	}
	if (fflush(f) || kvc_fault_sys(KVC_FAULT_STATE_SAVE) ||
	    fsync(fileno(f)))
		ret = -errno;
	if (fclose(f) && !ret)
		ret = -errno;
	if (!ret && rename(tmp, path))
		ret = -errno;
	if (ret)
		unlink(tmp);
	/* The new table (a namespace's owner, mode and salt) survives a
	 * crash only once the rename is on disk. */
	if (!ret)
		ret = kvc_bf_fsync_dir(d->state_dir);
	return ret;
}

/* 64 hex digits into a salt; -EINVAL for anything else. */
static int kvcd_parse_salt(const char *hex, uint8_t salt[KVC_PROTO_SALT_SIZE])
{
	if (strlen(hex) != 2 * KVC_PROTO_SALT_SIZE ||
	    strspn(hex, "0123456789abcdefABCDEF") != 2 * KVC_PROTO_SALT_SIZE)
		return -EINVAL;
	for (int i = 0; i < KVC_PROTO_SALT_SIZE; i++)
		sscanf(hex + 2 * i, "%2hhx", &salt[i]);
	return 0;
}

/*
 * Read the namespace table. A line without a salt (written by an older
 * kvcached, or by hand) gets a new random one, saved at once so that it
 * stays the namespace's salt from now on.
 */
int kvcd_ns_load(struct kvcd *d)
{
	char path[PATH_MAX], line[256], hex[80];
	unsigned int id, uid, gid, mode;
	bool salted = false;
	FILE *f;
	int lineno = 0, n, ret = 0, err;

	kvcd_path(d, "namespaces", path);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? 0 : -errno;
	d->ns_table = true;
	while (fgets(line, sizeof(line), f)) {
		struct kvcd_ns ns = { .used = true };

		lineno++;
		hex[0] = '\0';
		n = sscanf(line, "%u %u %u %o %79s", &id, &uid, &gid, &mode,
			   hex);
		if (n < 4 || id < 1 || id > KVCACHE_NS_MAX || mode > 0777 ||
		    (n == 5 && kvcd_parse_salt(hex, ns.salt))) {
			kvc_err("%s:%d: bad namespace",
				path, lineno);
			fclose(f);
			return -EINVAL;
		}
		if (n == 4) {
			ret = kvcd_new_salt(ns.salt);
			if (ret) {
				fclose(f);
				return ret;
			}
			salted = true;
		}
		ns.uid = uid;
		ns.gid = gid;
		ns.mode = mode;
		d->ns[id] = ns;
		/* A reloaded module lost them: the kernel learns them again. */
		err = kvc_pool_ns_create(d->pool, id, uid, gid, mode);
		if (err && err != -EEXIST)
			kvc_err("namespace %u: %s", id, strerror(-err));
	}
	ret = ferror(f) ? -EIO : 0;
	if (ret)
		kvc_err("%s: unreadable after line %d",
			path, lineno);
	fclose(f);
	if (!ret && salted)
		ret = kvcd_ns_save(d);
	return ret;
}

/*
 * A namespace's directory on each disk tier, dir/ns<id>, holds its block
 * files; it gets the namespace's permissions: its owner and group, and
 * r-x for each class that may read the namespace, nothing for the others
 * and no write for anyone but root (kvcached). libkvcache's
 * kvcache_load_region() opens G3 files itself, so a reader must reach
 * them; anyone else can neither list nor open them. Only root may give a
 * directory away: a kvcached running as another user keeps it 0700 (its
 * readers then load through the pool). Failures are logged, not fatal: a
 * shared filesystem may refuse chown (root squashing), and the files are
 * still only reachable through the directory.
 */
void kvcd_ns_dirs(const struct kvcd *d, uint32_t ns)
{
	const char *dirs[2] = { d->cfg.g3.directory, d->cfg.g4.directory };
	const struct kvcd_ns *n = &d->ns[ns];
	char path[PATH_MAX];
	mode_t mode = 0;

	for (int shift = 0; shift <= 6; shift += 3)
		if ((n->mode >> shift) & 4)
			mode |= (mode_t)5 << shift;
	if (geteuid() != 0)
		mode = 0700;
	for (int i = 0; i < 2; i++) {
		if (!dirs[i][0] || !kvcd_tier(d, i ? KVC_TIER_G4 : KVC_TIER_G3))
			continue;
		if (snprintf(path, sizeof(path), "%s/ns%" PRIu32, dirs[i],
			     ns) >= (int)sizeof(path))
			continue;
		if (mkdir(path, 0700) && errno != EEXIST) {
			kvc_err("%s: %s", path,
				strerror(errno));
			continue;
		}
		if (geteuid() == 0 && chown(path, n->uid, n->gid))
			kvc_warn("chown %s: %s", path,
				 strerror(errno));
		if (chmod(path, mode))
			kvc_warn("chmod %s: %s", path,
				 strerror(errno));
	}
}

/* Does dir hold a file (not a directory) up to depth levels below it? */
static bool kvcd_has_files(const char *dir, int depth)
{
	char path[PATH_MAX];
	struct dirent *de;
	bool found = false;
	struct stat st;
	DIR *dp;

	dp = opendir(dir);
	if (!dp)
		return false;
	while (!found && (de = readdir(dp))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >=
		    (int)sizeof(path) || lstat(path, &st))
			continue;
		if (!S_ISDIR(st.st_mode))
			found = true;
		else if (depth > 0)
			found = kvcd_has_files(path, depth - 1);
	}
	closedir(dp);
	return found;
}

/*
 * The ns<id> directories of tier directory dir that hold files (blocks,
 * temp files, quarantined ones) but whose namespace the table does not
 * have: nothing can reach those blocks, as their salt is gone with the
 * table. Each is logged; how many there are is returned. Their files are
 * left alone: the namespace may come back (NS_CREATE with the same id,
 * NS_SALT SET with the old salt, then a restart finds them again).
 */
static uint32_t kvcd_unknown_ns(const struct kvcd *d, const char *dir,
				const char *tier, int level)
{
	char path[PATH_MAX];
	struct dirent *de;
	uint32_t n = 0;
	DIR *dp;

	if (!dir[0] || !(dp = opendir(dir)))
		return 0;
	while ((de = readdir(dp))) {
		char *end;
		unsigned long id;

		if (strncmp(de->d_name, "ns", 2) ||
		    !isdigit((unsigned char)de->d_name[2]))
			continue;
		id = strtoul(de->d_name + 2, &end, 10);
		if (*end || id < 1 || id > KVCACHE_NS_MAX || d->ns[id].used ||
		    snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >=
		    (int)sizeof(path))
			continue;
		/* ns<id>/aa/bb/<key>.kvb, ns<id>/quarantine/<key>.<time> */
		if (!kvcd_has_files(path, 2))
			continue;
		n++;
		kvc_log(level, "%s %s holds blocks of namespace %lu, which the namespace table (%s/namespaces) does not have: they cannot be reached",
			tier, path, id, d->state_dir);
	}
	closedir(dp);
	return n;
}

/*
 * Before the tiers are opened (their recovery would drop what belongs to
 * no known namespace from the manifests): blocks on disk whose namespace
 * is unknown. With no namespace table at all and such blocks in g3 (this
 * node's own disk), the state directory was lost: a tmpfs emptied by a
 * reboot, a wrong --state-dir, a restore that forgot it. Starting would
 * leave every g3 block unreachable and hand out fresh salts for the same
 * namespace ids, so kvcached refuses (-ENOKEY: the keys' salts are
 * missing) unless [daemon] allow_missing_state says to go on. In g4, the
 * shared tier, namespaces this node lacks are normal (another node's, or
 * a node joining): they are only counted and logged.
 */
int kvcd_check_state(struct kvcd *d)
{
	uint32_t g3 = kvcd_unknown_ns(d, d->cfg.g3.directory, "g3",
				      d->ns_table ? KVC_LOG_ERROR : KVC_LOG_WARN);
	uint32_t g4 = kvcd_unknown_ns(d, d->cfg.g4.directory, "g4",
				      KVC_LOG_WARN);

	d->unknown_ns = g3 + g4;
	kvc_metric_set(d->dm.unknown_namespaces, d->unknown_ns);
	if (d->ns_table || !g3)
		return 0;
	if (!d->cfg.daemon.allow_missing_state) {
		kvc_err("%s has no namespace table, but g3 %s holds blocks of %" PRIu32
			" namespaces: the state directory was lost (on a tmpfs? another --state-dir?). Refusing to start: new namespaces would get new salts and every g3 block would stay unreachable. Restore %s/namespaces, or set [daemon] allow_missing_state = yes for one start to go on without those blocks",
			d->state_dir, d->cfg.g3.directory, g3, d->state_dir);
		return -ENOKEY;
	}
	d->state_missing = true;
	kvc_metric_set(d->dm.state_missing, 1);
	kvc_err("%s has no namespace table, but g3 %s holds blocks of %" PRIu32
		" namespaces: starting without them (allow_missing_state); their files stay, unreachable",
		d->state_dir, d->cfg.g3.directory, g3);
	/* Decided once: the next start has a table (empty) to read. */
	return kvcd_ns_save(d);
}
