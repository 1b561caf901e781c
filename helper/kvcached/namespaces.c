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
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "beneath.h"
#include "blockfile.h"
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
 * files. It is kvcached's: owned by kvcached's uid, writable by it alone,
 * with the namespace's group, and r-x for each class that may read the
 * namespace; the namespace's owner gets r-x through an ACL entry
 * (user:<uid>:r-x) when the owner's read bit is set. libkvcache's
 * kvcache_load_region() opens g3 files itself, so a reader must reach
 * them; anyone else can neither list nor open them, and no tenant can
 * create, link or rename anything below (a directory the tenant owned
 * could be made writable again by the tenant, and kvcached running as
 * root would follow what it planted there). Where the filesystem has no
 * ACLs, an owner outside the namespace's group loads through the pool.
 * A kvcached running as another user keeps it 0700 (its readers then
 * load through the pool). Failures are logged, not fatal: a shared
 * filesystem may refuse chown (root squashing), and the files are still
 * only reachable through the directory.
 */

/* Linux's POSIX ACL xattr (posix_acl_xattr.h): little-endian entries. */
#define ACL_XATTR_VERSION	2
enum { ACL_TAG_USER_OBJ = 0x01, ACL_TAG_USER = 0x02, ACL_TAG_GROUP_OBJ = 0x04,
       ACL_TAG_MASK = 0x10, ACL_TAG_OTHER = 0x20 };

static size_t acl_put(uint8_t *b, size_t off, uint16_t tag, uint16_t perm,
		      uint32_t id)
{
	uint8_t e[8] = { tag & 0xff, tag >> 8, perm & 0xff, perm >> 8,
			 id & 0xff, (id >> 8) & 0xff, (id >> 16) & 0xff,
			 id >> 24 };

	memcpy(b + off, e, sizeof(e));
	return off + sizeof(e);
}

/*
 * The access ACL of the directory fd: the mode's classes, and the
 * namespace's owner r-x as a named user. 0, or -errno (-EOPNOTSUPP where
 * the filesystem has none).
 */
static int ns_dir_acl(int fd, uid_t owner, mode_t mode)
{
	uint8_t b[4 + 5 * 8] = { ACL_XATTR_VERSION, 0, 0, 0 };
	size_t n = 4;

	n = acl_put(b, n, ACL_TAG_USER_OBJ, (mode >> 6) & 7, UINT32_MAX);
	n = acl_put(b, n, ACL_TAG_USER, 5, (uint32_t)owner);
	n = acl_put(b, n, ACL_TAG_GROUP_OBJ, (mode >> 3) & 7, UINT32_MAX);
	n = acl_put(b, n, ACL_TAG_MASK, 5, UINT32_MAX);
	n = acl_put(b, n, ACL_TAG_OTHER, mode & 7, UINT32_MAX);
	return fsetxattr(fd, "system.posix_acl_access", b, n, 0) ? -errno : 0;
}

/*
 * Below ns<id>/ (@fd) at a start: every entry is made kvcached's again,
 * and each one kvcached did not make is reported. A link, FIFO, socket
 * or device is never kvcached's and goes; a directory or file of
 * another owner (a tenant that owned ns<id>/ under an older kvcached)
 * is given back to kvcached, so that its owner can no longer write in
 * it. Nothing is followed: every call is on a descriptor and a name.
 *
 * Only a directory someone else could write holds entries kvcached did
 * not make: the walk descends into a subdirectory when @foreign (its
 * parent was not kvcached's alone) or when the subdirectory itself is
 * not. A tier kvcached always owned costs one listing of ns<id>/ per
 * start, not a stat of every block file.
 */
static bool foreign_dir(const struct stat *st)
{
	return st->st_uid != geteuid() || (st->st_mode & (S_IWGRP | S_IWOTH));
}

static void ns_dir_repair(int fd, const char *where, int depth, bool foreign)
{
	struct dirent *de;
	DIR *dp;
	int dfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);

	if (dfd < 0 || !(dp = fdopendir(dfd))) {
		if (dfd >= 0)
			close(dfd);
		return;
	}
	while ((de = readdir(dp))) {
		const char *name = de->d_name;
		struct stat st;
		int sub;

		if (!strcmp(name, ".") || !strcmp(name, "..") ||
		    fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW))
			continue;
		if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
			kvc_warn("%s/%s: a %s kvcached did not make: removed",
				 where, name, S_ISLNK(st.st_mode) ?
				 "symbolic link" : "special file");
			unlinkat(fd, name, 0);
			continue;
		}
		if (st.st_uid != geteuid()) {
			kvc_warn("%s/%s: owned by uid %u, not kvcached: made kvcached's",
				 where, name, (unsigned int)st.st_uid);
			if (fchownat(fd, name, geteuid(), getegid(),
				     AT_SYMLINK_NOFOLLOW))
				kvc_warn("chown %s/%s: %s", where, name,
					 strerror(errno));
		}
		if (S_ISREG(st.st_mode)) {
			if (st.st_nlink > 1)
				kvc_warn("%s/%s: %ju hard links: not kvcached's doing",
					 where, name, (uintmax_t)st.st_nlink);
			if ((st.st_mode & 07777) != KVC_BF_FILE_MODE &&
			    fchmodat(fd, name, KVC_BF_FILE_MODE, 0))
				kvc_warn("chmod %s/%s: %s", where, name,
					 strerror(errno));
			continue;
		}
		if ((st.st_mode & 07777) != KVC_BF_DIR_MODE &&
		    fchmodat(fd, name, KVC_BF_DIR_MODE, 0))
			kvc_warn("chmod %s/%s: %s", where, name,
				 strerror(errno));
		if (depth <= 0 || !(foreign || foreign_dir(&st)))
			continue;
		sub = kvc_open_beneath(fd, name, O_RDONLY | O_DIRECTORY |
				       O_CLOEXEC, 0);
		if (sub >= 0) {
			char path[PATH_MAX];

			snprintf(path, sizeof(path), "%s/%s", where, name);
			ns_dir_repair(sub, path, depth - 1,
				      foreign || foreign_dir(&st));
			close(sub);
		}
	}
	closedir(dp);
}

/*
 * One tier's ns<id>/, as kvcd_ns_dirs() makes it: all it needs, copied,
 * so that g4's metadata worker can make it while the daemon goes on.
 */
struct ns_dir {
	char tier[PATH_MAX];		/* the tier's directory */
	char name[16];			/* "ns<id>" */
	uid_t owner;			/* the namespace's */
	gid_t gid;
	mode_t mode;			/* of ns<id>/ */
	bool acl;			/* owner r-x by an ACL entry */
	bool repair;			/* and everything below it */
};

static void ns_dir_make(const struct ns_dir *nd)
{
	bool root = geteuid() == 0;
	char path[PATH_MAX + 16];
	int rootfd, fd;
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", nd->tier, nd->name);
	rootfd = open(nd->tier, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return;	/* the tier says why */
	if (mkdirat(rootfd, nd->name, 0700) && errno != EEXIST)
		kvc_err("%s: %s", path, strerror(errno));
	fd = kvc_open_beneath(rootfd, nd->name, O_RDONLY | O_DIRECTORY |
			      O_CLOEXEC, 0);
	close(rootfd);
	if (fd < 0) {
		kvc_err("%s: %s: not a directory of kvcached's; its blocks are not stored there",
			path, strerror(-fd));
		return;
	}
	if (fstat(fd, &st))
		st.st_uid = (uid_t)-1;	/* unknown: walk it all */
	if (nd->repair && st.st_uid != geteuid())
		kvc_warn("%s: owned by uid %u: made kvcached's (uid %u), the namespace's readers keep r-x",
			 path, (unsigned int)st.st_uid,
			 (unsigned int)geteuid());
	if (root && fchown(fd, 0, nd->gid))
		kvc_warn("chown %s: %s", path, strerror(errno));
	if (fchmod(fd, nd->mode))
		kvc_warn("chmod %s: %s", path, strerror(errno));
	if (nd->acl) {
		int err = ns_dir_acl(fd, nd->owner, nd->mode);

		if (err)
			kvc_info("%s: no ACL (%s): its owner uid %u reads it through the namespace's group or the pool",
				 path, strerror(-err), (unsigned int)nd->owner);
	}
	if (nd->repair)
		ns_dir_repair(fd, path, 2, foreign_dir(&st));
	close(fd);
}

/* g4's worker: the daemon's loop never waits for a server (nsshare.c). */
static void ns_dir_run(void *arg)
{
	ns_dir_make(arg);
}

static void ns_dir_free(void *arg)
{
	free(arg);
}

void kvcd_ns_dirs(const struct kvcd *d, uint32_t ns, enum kvcd_ns_dirs how)
{
	const char *dirs[2] = { d->cfg.g3.directory, d->cfg.g4.directory };
	const struct kvcd_ns *n = &d->ns[ns];
	struct ns_dir nd = {
		.owner = n->uid, .gid = n->gid, .mode = 0700,
		.repair = how == KVCD_NS_DIRS_REPAIR,
	};
	bool root = geteuid() == 0;

	for (int shift = 0; root && shift <= 3; shift += 3)
		if ((n->mode >> shift) & 4)
			nd.mode |= (mode_t)5 << shift;
	nd.acl = root && ((n->mode >> 6) & 4) && n->uid != 0;
	snprintf(nd.name, sizeof(nd.name), "ns%" PRIu32, ns);
	for (int i = 0; i < 2; i++) {
		struct kvc_tier *t = kvcd_tier(d, i ? KVC_TIER_G4 : KVC_TIER_G3);
		struct ns_dir *copy;

		if (!dirs[i][0] || !t ||
		    snprintf(nd.tier, sizeof(nd.tier), "%s", dirs[i]) >=
		    (int)sizeof(nd.tier))
			continue;
		if (!i || how != KVCD_NS_DIRS_WORKER) {
			ns_dir_make(&nd);
			continue;
		}
		copy = malloc(sizeof(*copy));
		if (copy) {
			*copy = nd;
			if (!kvc_tier_call(t, ns_dir_run, ns_dir_free, copy))
				continue;
			free(copy);
		}
		/* Its blocks still go there, 0700: readers use the pool. */
		kvc_warn("%s/%s: g4's worker is full: the directory gets the namespace's readers at the next start",
			 dirs[i], nd.name);
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
