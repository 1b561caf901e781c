// SPDX-License-Identifier: GPL-2.0
/*
 * daemon: kvcached's state and its answers to clients (see daemon.h).
 *
 * Who may do what. The peer's credentials come from SO_PEERCRED when it
 * connects. A namespace has an owner, a group and mode bits like a file
 * (read: LOOKUP and LOAD; write: STORE and, in memfd mode, ALLOC); uid 0
 * may do everything, and only uid 0 creates namespaces. In kernel mode the
 * kernel enforces the same rules again on every block a client pins or
 * maps, so the daemon's answers never grant access by themselves; they
 * must still not reveal to one tenant which prefixes another has cached.
 *
 * Blocks the daemon cannot account for: in kernel mode a client seals a
 * block with its own /dev/kvcache file and then STOREs it here. A block
 * sealed but never stored (the client died in between) is an orphan: the
 * eviction pass frees orphans it has seen twice, so a client between
 * SEAL and STORE is never raced. A block whose STORE was refused can go
 * sooner: kvcd_drop_refused() says when.
 */
#include "daemon.h"
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
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "blockfile.h"
#include "devinfo.h"
#include "fault.h"
#include "index.h"
#include "journal.h"
#include "log.h"
#include "metrics.h"
#include "policy.h"
#include "proto.h"

/* Victims refused in a row (in use, or a full write queue) end a pass. */
#define KVCD_EVICT_REFUSED_MAX	64
#define KVCD_ORPHAN_GAP_S	0.5	/* between two orphan passes */
/* orphan_seen[]: a STORE refused the block (kvcd_drop_refused()). */
#define KVCD_ORPHAN_REFUSED	0x80

/* ---- namespaces ------------------------------------------------------- */

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

static bool kvcd_may(const struct kvcd *d, const struct kvc_peer *p,
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
static bool kvcd_may_every_ns(const struct kvcd *d, const struct kvc_peer *p)
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
static void kvcd_holder_add(struct kvcd *d, const struct kvc_peer *p)
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
static bool kvcd_holders_allow(const struct kvcd *d, const struct kvcd_ns *n)
{
	if (d->holders_unknown && (n->mode & 06) != 06)
		return false;
	for (uint32_t i = 0; i < d->nholders; i++)
		if (!kvcd_holder_may(&d->holders[i], n))
			return false;
	return true;
}

/* A file of the state directory (kvcd_create() checked the length). */
static void kvcd_path(const struct kvcd *d, const char *name, char *out)
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
static int kvcd_new_salt(uint8_t salt[KVC_PROTO_SALT_SIZE])
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
static int kvcd_ns_save(const struct kvcd *d)
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
static int kvcd_ns_load(struct kvcd *d)
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
static void kvcd_ns_dirs(const struct kvcd *d, uint32_t ns)
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
		if (!dirs[i][0] || !d->tier[i ? KVC_TIER_G4 : KVC_TIER_G3])
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
static int kvcd_check_state(struct kvcd *d)
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

/* ---- the parents journal (kernel mode; journal.h) -------------------- */

static double kvcd_now(void);

/* The link of entry id, as the index has it now. */
static void kvcd_link_of(struct kvcd *d, uint32_t id, struct kvc_link *l)
{
	const struct kvc_entry *e = kvc_index_entry(d->index, id);

	memset(l, 0, sizeof(*l));
	l->ns = e->ns;
	l->first = e->parent == KVC_ID_NONE;
	memcpy(l->key, e->key, KVCACHE_KEY_SIZE);
	if (!l->first)
		memcpy(l->parent, kvc_index_entry(d->index, e->parent)->key,
		       KVCACHE_KEY_SIZE);
}

/*
 * Replace the journal by the links of the blocks the pool holds for the
 * index now: what a restart needs, nothing of the blocks evicted since.
 * At start (after the rebuild) and whenever the appends made it due.
 */
static int kvcd_journal_compact(struct kvcd *d)
{
	struct kvc_link *links;
	char path[PATH_MAX];
	size_t n = 0;
	int fd, ret;

	links = malloc(((size_t)d->nr_blocks + 1) * sizeof(*links));
	if (!links)
		return -ENOMEM;
	for (uint32_t i = 0; i < d->nr_blocks; i++) {
		const struct kvc_entry *e;

		if (d->by_block[i] == KVC_ID_NONE)
			continue;
		e = kvc_index_entry(d->index, d->by_block[i]);
		if (e && (e->tiers & (1u << KVC_TIER_POOL)))
			kvcd_link_of(d, d->by_block[i], &links[n++]);
	}
	kvcd_path(d, "parents", path);
	ret = kvc_journal_rewrite(path, links, n, &fd);
	free(links);
	if (ret) {
		/* Keep appending to the old file; try again when it doubled. */
		d->journal_last = d->journal_bytes;
		kvc_err("compacting %s: %s", path,
			strerror(-ret));
		return ret;
	}
	if (d->journal_fd >= 0)
		close(d->journal_fd);
	d->journal_fd = fd;
	d->journal_bytes = (uint64_t)n * KVC_JOURNAL_REC;
	d->journal_last = d->journal_bytes;
	d->journal_compactions++;
	kvc_debug("%s compacted: %zu records", path, n);
	return 0;
}

/* A journal append failed (or there is no journal): count it, say it once. */
static void kvcd_journal_failed(struct kvcd *d, int err)
{
	d->journal_errors++;
	kvc_metric_add(d->dm.journal_errors, 1);
	if (err != d->journal_last_error)
		kvc_err("%s/parents: %s: STOREs are refused until the journal can be written (a block it does not list would be an orphan after a restart)",
			d->state_dir, strerror(-err));
	d->journal_last_error = err;
}

/*
 * Entry id was just stored in the pool: append its link. In kernel mode
 * a block is kept across a restart only through its record, so a STORE
 * whose record cannot be written is refused (kvcd_store_one()): 0 or
 * -errno. With no journal open (the start could not write one) it is
 * tried again, once a second at most.
 */
static int kvcd_journal_add(struct kvcd *d, uint32_t id)
{
	struct kvc_link l;
	double now;
	int ret;

	if (!kvc_pool_has(d->pool, KVC_POOL_PERSISTENT))
		return 0;	/* memfd mode: the pool dies with us */
	if (d->journal_fd < 0) {
		now = kvcd_now();
		ret = -EIO;
		if (now >= d->journal_retry_at) {
			d->journal_retry_at = now + 1.0;
			ret = kvcd_journal_compact(d);
		}
		if (ret) {
			kvcd_journal_failed(d, ret);
			return ret;
		}
	}
	kvcd_link_of(d, id, &l);
	ret = kvc_fault_err(KVC_FAULT_JOURNAL_WRITE);
	if (!ret)
		ret = kvc_journal_append(d->journal_fd, &l);
	if (ret) {
		kvcd_journal_failed(d, ret);
		return ret;
	}
	if (d->journal_last_error) {
		kvc_info("%s/parents: appends work again", d->state_dir);
		d->journal_last_error = 0;
	}
	d->journal_bytes += KVC_JOURNAL_REC;
	/* Bounded: one append per store, compacted as evictions pile up. */
	if (kvc_journal_due(d->journal_bytes, kvc_policy_count(d->policy),
			    d->journal_last, d->journal_min))
		kvcd_journal_compact(d);
	return 0;
}

/* Every valid record of the journal, sorted by (ns, key). */
static struct kvc_link *kvcd_journal_read(struct kvcd *d, size_t *n)
{
	struct kvc_link *links;
	char path[PATH_MAX];
	size_t bad;
	int ret;

	kvcd_path(d, "parents", path);
	ret = kvc_journal_read(path, &links, n, &bad);
	if (ret && ret != -ENOENT)
		kvc_err("%s: %s", path, strerror(-ret));
	if (bad)
		kvc_warn("%s: %zu records refused (damaged, torn, or an older format); their blocks will be reclaimed",
			path, bad);
	if (links)
		qsort(links, *n, sizeof(*links), kvc_link_cmp);
	return links;
}

/* ---- the pool tier ------------------------------------------------------- */

static int kvcd_pool_free(struct kvcd *d, uint32_t *free_blocks)
{
	return kvc_pool_nr_free(d->pool, free_blocks);
}

/* Record that entry id has its pool copy in block h. */
int kvcd_set_pool(struct kvcd *d, uint32_t id, struct kvcache_handle h)
{
	union kvc_loc loc = { .pool = h };
	int ret;

	if (h.index >= d->nr_blocks)
		return -EINVAL;
	ret = kvc_index_set(d->index, id, KVC_TIER_POOL, loc);
	if (ret)
		return ret;
	d->by_block[h.index] = id;
	/* Claimed: whatever a pass or a refused STORE noted is void. */
	d->orphan_seen[h.index] = 0;
	return kvc_policy_on_insert(d->policy, id);
}

/* Forget entry id's pool copy; drop the entry if nothing is left of it. */
static void kvcd_clear_pool(struct kvcd *d, uint32_t id)
{
	const struct kvc_entry *e = kvc_index_entry(d->index, id);

	if (!e || !(e->tiers & (1u << KVC_TIER_POOL)))
		return;
	d->by_block[e->loc[KVC_TIER_POOL].pool.index] = KVC_ID_NONE;
	kvcd_tiers_forget(d, id);
	kvc_index_clear(d->index, id, KVC_TIER_POOL);
	kvc_policy_on_remove(d->policy, id);
	/* A copy on its way to g3/g4 keeps the entry (tier.c needs it). */
	if (!kvcd_tiers_spilling(d, id))
		kvc_index_prune(d->index, id);
}

static int kvcd_evict_block(struct kvcd *d, struct kvcache_handle h)
{
	return kvc_pool_evict(d->pool, h);
}

/*
 * Free sealed blocks nobody stored (the client died between SEAL and
 * STORE, or its STORE was refused), once they have been seen unclaimed by
 * two passes in a row. Returns how many went.
 */
static uint32_t kvcd_reap_orphans(struct kvcd *d)
{
	struct kvcache_block_info info[64];
	uint32_t start = 0, count, next, freed = 0, seen = 0;
	struct timespec ts;
	double now;

	/*
	 * Passes at least KVCD_ORPHAN_GAP_S apart: eviction may run many
	 * times in a row (each write-back completion lets it go on), and
	 * "seen twice" must still mean a client had time for its STORE.
	 */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
	if (now < d->orphan_at)
		return 0;
	d->orphan_at = now + KVCD_ORPHAN_GAP_S;

	while (start < d->nr_blocks &&
	       !kvc_pool_query(d->pool, start, info, 64, &count, &next)) {
		for (uint32_t i = 0; i < count; i++) {
			uint32_t idx = info[i].handle.index, id;
			const struct kvc_entry *e;

			/* A pool resized under us: not ours to judge. */
			if (idx >= d->nr_blocks)
				continue;
			id = d->by_block[idx];
			e = id == KVC_ID_NONE ? NULL :
			    kvc_index_entry(d->index, id);
			if (e && e->loc[KVC_TIER_POOL].pool.gen ==
			    info[i].handle.gen) {
				d->orphan_seen[idx] = 0;
				continue;
			}
			/* A mark of the block's earlier life does not count. */
			if (d->orphan_gen[idx] != info[i].handle.gen)
				d->orphan_seen[idx] = 0;
			d->orphan_gen[idx] = info[i].handle.gen;
			if (d->orphan_seen[idx]++ &&
			    !kvcd_evict_block(d, info[i].handle)) {
				d->orphan_seen[idx] = 0;
				freed++;
			} else {
				seen++;
			}
		}
		if (next <= start)
			break;
		start = next;
	}
	d->orphans_seen = seen;
	return freed;
}

/* Count an eviction of the pool. */
static void kvcd_evicted(struct kvcd *d)
{
	d->evictions++;
	kvc_metric_add(d->dm.evictions[KVC_TIER_POOL], 1);
}

int kvcd_evict_id(struct kvcd *d, uint32_t id)
{
	const struct kvc_entry *e = kvc_index_entry(d->index, id);
	int ret;

	if (!e || !(e->tiers & (1u << KVC_TIER_POOL)))
		return -ENOENT;
	/* A STORE made it a parent while it was held: leaves go first. */
	if (e->child_in[KVC_TIER_POOL])
		return -EBUSY;
	ret = kvcd_evict_block(d, e->loc[KVC_TIER_POOL].pool);
	if (ret == -EBUSY)
		return ret;
	/* Evicted now, or by someone else before (-ESTALE). */
	kvcd_clear_pool(d, id);
	if (!ret)
		kvcd_evicted(d);
	return ret;
}

/*
 * Evict leaves, oldest first by the policy, until want blocks are free.
 * One victim at a time, and no more than the shortfall: a leaf's parent
 * becomes a candidate only when the leaf is gone, so a batch taken at
 * once would be the oldest leaf of every chain, the chain a LOAD just
 * answered with included, instead of the oldest chains whole. A victim
 * a write-back tier must copy first stays in the pool, held, until its
 * copy is published (daemon_tiers.c), and counts as coming free: the
 * blocks being written back are not replaced by more victims. One that
 * is pinned or mapped, or whose copy must wait for a full write queue,
 * goes back to the policy; a pass stops after KVCD_EVICT_REFUSED_MAX of
 * those in a row, or once every candidate has been tried. With wait, the
 * writes started for victims are waited for, as the page cache's direct
 * reclaim waits for writeback. Returns 0, or -EBUSY when it stopped
 * short: what is left is in use, or dirty (its write failed and waits
 * for a retry).
 */
static int kvcd_evict_pass(struct kvcd *d, uint32_t want, bool wait)
{
	uint32_t free_blocks, id;

	if (kvcd_pool_free(d, &free_blocks) || free_blocks >= want)
		return 0;
	free_blocks += kvcd_reap_orphans(d);
	for (;;) {
		size_t tries = kvc_policy_count(d->policy), refused = 0;

		while (free_blocks + kvcd_tiers_writing(d) < want &&
		       refused < KVCD_EVICT_REFUSED_MAX && tries-- &&
		       kvc_policy_pick(d->policy, &id, 1)) {
			int ret = kvcd_tiers_evicting(d, id);

			/* Held until written: out of the policy. */
			if (ret == -EINPROGRESS) {
				refused = 0;
				continue;
			}
			if (!ret)
				ret = kvcd_evict_id(d, id);
			if (ret == -EBUSY) {
				kvc_policy_on_insert(d->policy, id);
				refused++;
			} else if (!ret) {
				free_blocks++;
				refused = 0;
			}
		}
		if (free_blocks >= want || !wait || !kvcd_tiers_wait(d))
			break;
		/* Completions freed the held blocks whose copy is done. */
		if (kvcd_pool_free(d, &free_blocks))
			break;
	}
	return free_blocks >= want ? 0 : -EBUSY;
}

int kvcd_evict_to(struct kvcd *d, uint32_t want)
{
	return kvcd_evict_pass(d, want, false);
}

int kvcd_evict_to_wait(struct kvcd *d, uint32_t want)
{
	return kvcd_evict_pass(d, want, true);
}

void kvcd_check_pool(struct kvcd *d)
{
	uint32_t free_blocks;
	uint64_t low = (uint64_t)d->nr_blocks * d->cfg.pool.low_watermark / 100;
	uint64_t high = (uint64_t)d->nr_blocks *
			d->cfg.pool.high_watermark / 100;

	if (kvcd_pool_free(d, &free_blocks))
		return;
	if (free_blocks < low)
		kvcd_evict_to(d, (uint32_t)high);
	else if (d->orphans_seen)
		/*
		 * Finish what a pass began: blocks it saw unclaimed once go
		 * at the next look, even if that pass freed enough. Else a
		 * client that died while sealing would hold them until the
		 * next pressure.
		 */
		kvcd_reap_orphans(d);
}

/* ---- rebuilding after a restart (kernel mode) -------------------------- */

struct kvcd_sealed {
	struct kvcache_block_info info;
	const struct kvc_link *link;
};

static int kvcd_rebuild(struct kvcd *d)
{
	struct kvcache_block_info info[64];
	struct kvcd_sealed *sealed = NULL, *tmp;
	struct kvc_link *links, probe;
	size_t nlinks, n = 0, cap = 0, placed = 0;
	uint32_t start = 0, count, next;
	bool progress = true;

	links = kvcd_journal_read(d, &nlinks);
	while (start < d->nr_blocks &&
	       !kvc_pool_query(d->pool, start, info, 64, &count, &next)) {
		for (uint32_t i = 0; i < count; i++) {
			if (n == cap) {
				cap = cap ? cap * 2 : 256;
				tmp = realloc(sealed, cap * sizeof(*sealed));
				if (!tmp)
					goto out;
				sealed = tmp;
			}
			sealed[n].info = info[i];
			probe.ns = info[i].ns_id;
			memcpy(probe.key, info[i].key, KVCACHE_KEY_SIZE);
			sealed[n].link = links ?
				bsearch(&probe, links, nlinks, sizeof(*links),
					kvc_link_cmp) : NULL;
			n++;
		}
		if (next <= start)
			break;
		start = next;
	}
	/* Parents before children: a chain is rebuilt from its first block. */
	while (progress) {
		progress = false;
		for (size_t i = 0; i < n; i++) {
			const struct kvc_link *l = sealed[i].link;
			uint32_t id;

			if (!l)
				continue;
			if (kvc_index_insert(d->index, l->ns, l->key,
					     l->first ? NULL : l->parent,
					     &id) ||
			    kvcd_set_pool(d, id, sealed[i].info.handle))
				continue;
			sealed[i].link = NULL;
			placed++;
			progress = true;
		}
	}
	if (n)
		kvc_info("%zu sealed blocks in the pool, %zu back in the index; the rest will be reclaimed",
			n, placed);
out:
	free(sealed);
	free(links);
	return 0;
}

/* ---- requests ------------------------------------------------------------ */

static int kvcd_error(uint8_t *reply, const struct kvc_msg *m, int err,
		      const char *why)
{
	return kvc_proto_encode_error(reply, KVC_PROTO_MSG_MAX, err, m->seq,
				      m->type, why);
}

static int kvcd_hello(struct kvcd *d, struct kvc_peer *p,
		      const struct kvc_msg *m, uint8_t *reply, int *pass_fd)
{
	struct kvc_hello_reply r = {
		.mode = d->pool->ops->proto_mode,
		.max_batch = KVC_PROTO_MAX_STORE,
		.block_size = d->block_size,
		.nr_blocks = d->nr_blocks,
	};
	int v = kvc_proto_choose_version(m->hello.min_version,
					 m->hello.max_version);
	uint64_t need = d->pool->ops->client_caps;
	bool shared = kvc_pool_has(d->pool, KVC_POOL_SHARED_MAP);

	if (v < 0)
		return kvcd_error(reply, m, v, "no common protocol version");
	/* The reply's caps are a subset of the client's; this mode needs one. */
	if (!(m->hello.caps & need))
		return kvcd_error(reply, m, -EOPNOTSUPP,
				  d->pool->ops->client_hint);
	if (shared && !kvcd_may_every_ns(d, p))
		return kvcd_error(reply, m, -EACCES,
				  "memfd mode shares the whole pool: this peer may not read and write every namespace; use kernel mode or one kvcached per tenant");
	r.version = (uint16_t)v;
	r.caps = need;
	if (shared) {
		*pass_fd = kvc_pool_client_fd(d->pool);
		kvcd_holder_add(d, p);
	}
	d->clients[p->id].hello = true;
	d->clients[p->id].version = (uint16_t)v;
	return kvc_proto_encode_hello_reply(reply, KVC_PROTO_MSG_MAX, m->seq,
					    &r);
}

static double kvcd_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int kvcd_lookup(struct kvcd *d, struct kvc_peer *p,
		       const struct kvc_msg *m, uint8_t *reply)
{
	static struct kvc_match match[KVC_PROTO_MAX_BATCH];
	static struct kvc_lookup_entry out[KVC_PROTO_MAX_BATCH];
	const struct kvc_lookup *l = &m->lookup;
	bool more = l->flags & KVC_PROTO_LOOKUP_CONTINUE;
	double t0 = kvcd_now();
	uint64_t asked, hits;
	int n;

	if (!kvcd_may(d, p, l->ns_id, 4))
		return kvcd_error(reply, m, -EACCES, "namespace not readable");
	n = (more ? kvc_index_lookup_more : kvc_index_lookup)(d->index,
			l->ns_id, (const uint8_t (*)[KVCACHE_KEY_SIZE])l->keys,
			l->count, l->tiers, match);
	if (n < 0)
		return kvcd_error(reply, m, n, "lookup failed");
	for (int i = 0; i < n; i++) {
		memset(&out[i], 0, sizeof(out[i]));
		out[i].tiers = match[i].tiers;
		if (match[i].tiers & (1u << KVC_TIER_POOL)) {
			out[i].handle = match[i].loc[KVC_TIER_POOL].pool;
			kvc_policy_on_access(d->policy, match[i].id);
		}
		kvcd_tiers_access(d, match[i].id);
	}
	/* The engine LOADs what it found next: start reading it up now. */
	kvcd_tiers_prefetch(d, match, (size_t)n);
	/*
	 * A missed block was asked for: one access for the admission filter,
	 * so its STORE is admitted once it has been wanted pool_admit times.
	 * Only the first miss: the rest of the chain follows it anyway.
	 */
	if (d->cfg.eviction.pool_admit > 1 && (uint32_t)n < l->count)
		kvc_admit_access(d->admit,
				 kvc_index_hash(d->index, l->ns_id,
						l->keys + (size_t)n *
						KVCACHE_KEY_SIZE));
	/* A continued chain's first key was counted by the lookup before. */
	asked = l->count - (more ? 1 : 0);
	hits = (uint64_t)n - (more && n ? 1 : 0);
	d->lookups++;
	d->lookup_keys += asked;
	d->hit_keys += hits;
	kvc_metric_add(d->dm.hits[KVC_TIER_POOL], hits);
	kvc_metric_add(d->dm.misses[KVC_TIER_POOL], asked - hits);
	kvc_metric_observe(d->dm.lookup_seconds, kvcd_now() - t0);
	return kvc_proto_encode_lookup_reply(reply, KVC_PROTO_MSG_MAX, m->seq,
					     out, (uint32_t)n);
}

/* Does the index hold block h (this generation) as a pool copy? */
static bool kvcd_pool_holds(struct kvcd *d, struct kvcache_handle h)
{
	uint32_t id = h.index < d->nr_blocks ? d->by_block[h.index] :
		      KVC_ID_NONE;
	const struct kvc_entry *e = id == KVC_ID_NONE ? NULL :
				    kvc_index_entry(d->index, id);

	return e && (e->tiers & (1u << KVC_TIER_POOL)) &&
	       e->loc[KVC_TIER_POOL].pool.gen == h.gen;
}

/*
 * Free block h, which a STORE refused, unless the index holds it now (a
 * later STORE of it succeeded). Still pinned: marked, it goes with its
 * last pin (in memfd mode at that RELEASE), or on the next pressure pass's
 * first sight of it (kernel mode, where the client unpins with its own
 * file and the daemon is not told).
 */
static void kvcd_free_refused(struct kvcd *d, struct kvcache_handle h)
{
	int ret;

	if (h.index >= d->nr_blocks || kvcd_pool_holds(d, h))
		return;
	ret = kvcd_evict_block(d, h);
	if (!ret)
		d->refused_freed++;
	/* Otherwise gone already (-ESTALE): nothing to remember. */
	d->orphan_seen[h.index] = ret == -EBUSY ? KVCD_ORPHAN_REFUSED : 0;
	d->orphan_gen[h.index] = h.gen;
}

/*
 * A STORE by a writer of the block's namespace was refused with @why for
 * block h, which kvcd_check_sealed() showed to be sealed with the
 * namespace and key the client named, and which has @pins pins: free it
 * sooner than two pressure passes would.
 *  - Pinned (libkvcache keeps the seal's pin until the STORE is
 *    answered, then drops it): the client is done with it once its pin
 *    goes, whatever the refusal; marked, it goes then.
 *  - Unpinned and -EEXIST: a second copy of a block the pool holds; at
 *    once.
 *  - Unpinned otherwise (no parent yet, not admitted yet): a client may
 *    STORE it again once the parent is in (kvcached_test's
 *    store_and_prefix_lookup does); the passes take it if it does not.
 * Never when the index holds h itself (a STORE of an already stored
 * handle is -EEXIST too), and never for a STORE refused as a whole for
 * want of write permission: the block would not be the peer's own.
 */
static void kvcd_drop_refused(struct kvcd *d, struct kvcache_handle h,
			      int why, uint32_t pins)
{
	if (h.index >= d->nr_blocks || kvcd_pool_holds(d, h))
		return;
	if (pins) {
		d->orphan_seen[h.index] = KVCD_ORPHAN_REFUSED;
		d->orphan_gen[h.index] = h.gen;
	}
	else if (why == -EEXIST)
		kvcd_free_refused(d, h);
}

/*
 * Is h a sealed block of namespace ns holding key? 0 or -errno; *pins (if
 * not NULL): the pins on it.
 */
static int kvcd_check_sealed(struct kvcd *d, uint32_t ns,
			     struct kvcache_handle h, const uint8_t *key,
			     uint32_t *pins)
{
	struct kvcache_block_info info;
	int ret;

	if (h.index >= d->nr_blocks)
		return -EINVAL;
	ret = kvc_pool_block(d->pool, h, &info);
	if (ret)
		return ret;
	if (info.ns_id != ns || memcmp(info.key, key, KVCACHE_KEY_SIZE))
		return -EINVAL;	/* not the block the client says it is */
	if (pins)
		*pins = info.pins;
	return 0;
}

/* follows: e's parent is the entry before it in this STORE, just stored. */
static int kvcd_store_one(struct kvcd *d, uint32_t ns,
			  const struct kvc_store_entry *e, bool follows)
{
	bool first = e->flags & KVC_PROTO_STORE_FIRST;
	const struct kvc_entry *ent;
	uint32_t id;
	int ret;

	ret = kvcd_check_sealed(d, ns, e->handle, e->key, NULL);
	if (ret)
		return ret;
	/*
	 * Admission (pool_admit = k): the first new block of a chain segment
	 * enters once it has been wanted k times (LOOKUP misses and STOREs
	 * count); until then it is left to be reclaimed as an orphan. The
	 * blocks after it in the same STORE follow it in.
	 */
	if (!first && kvc_index_find(d->index, ns, e->parent, &id))
		return -ENOENT;	/* no chain to hang it on */
	if (d->cfg.eviction.pool_admit > 1 && !follows &&
	    kvc_index_find(d->index, ns, e->key, &id) &&
	    !kvc_admit_access(d->admit, kvc_index_hash(d->index, ns, e->key)))
		return -EAGAIN;
	ret = kvc_index_insert(d->index, ns, e->key, first ? NULL : e->parent,
			       &id);
	if (ret == -EEXIST) {
		ent = kvc_index_entry(d->index, id);
		/* Already cached in the pool: this copy is redundant. */
		if (ent->tiers & (1u << KVC_TIER_POOL))
			return -EEXIST;
	} else if (ret) {
		return ret;
	}
	ret = kvcd_set_pool(d, id, e->handle);
	if (ret)
		return ret;
	/*
	 * Not durable without its journal record (kernel mode): refused, and
	 * out of the index again, as if never stored. The client sees the
	 * error; the block is freed as any refused one (kvcd_drop_refused()).
	 */
	ret = kvcd_journal_add(d, id);
	if (ret) {
		kvcd_clear_pool(d, id);
		return ret;
	}
	d->stores++;
	kvcd_tiers_stored(d, id);
	return 0;
}

static int kvcd_store(struct kvcd *d, struct kvc_peer *p,
		      const struct kvc_msg *m, uint8_t *reply)
{
	static int32_t status[KVC_PROTO_MAX_BATCH];
	uint8_t prev[KVCACHE_KEY_SIZE];
	struct kvc_store_entry e;
	bool stored = false;
	uint32_t pins;

	if (!kvcd_may(d, p, m->store.ns_id, 2))
		return kvcd_error(reply, m, -EACCES, "namespace not writable");

	for (uint32_t i = 0; i < m->store.count; i++) {
		kvc_proto_store_entry(&m->store, i, &e);
		status[i] = kvcd_store_one(d, m->store.ns_id, &e, stored &&
					   !(e.flags & KVC_PROTO_STORE_FIRST) &&
					   !memcmp(e.parent, prev,
						   KVCACHE_KEY_SIZE));
		/* Refused, but the block is the one the client names. */
		if (status[i] && !kvcd_check_sealed(d, m->store.ns_id,
						    e.handle, e.key, &pins))
			kvcd_drop_refused(d, e.handle, status[i], pins);
		stored = !status[i];
		memcpy(prev, e.key, KVCACHE_KEY_SIZE);
	}
	return kvc_proto_encode_store_reply(reply, KVC_PROTO_MSG_MAX, m->seq,
					    status, m->store.count);
}

static int kvcd_load(struct kvcd *d, struct kvc_peer *p,
		     const struct kvc_msg *m, uint8_t *reply)
{
	static struct kvc_load_result res[KVC_PROTO_MAX_BATCH];
	const struct kvc_load *l = &m->load;
	bool later = false;

	if (!kvcd_may(d, p, l->ns_id, 4))
		return kvcd_error(reply, m, -EACCES, "namespace not readable");
	for (uint32_t i = 0; i < l->count; i++) {
		const struct kvc_entry *e;
		uint32_t id;

		memset(&res[i], 0, sizeof(res[i]));
		if (kvc_index_find(d->index, l->ns_id,
				   l->keys + (size_t)i * KVCACHE_KEY_SIZE,
				   &id)) {
			res[i].status = -ENOENT;
			continue;
		}
		e = kvc_index_entry(d->index, id);
		if (!(e->tiers & (1u << KVC_TIER_POOL))) {
			/* In g3/g4: read it up, answer when it is in. */
			res[i].status = kvcd_tiers_want(d, id);
			if (!res[i].status) {
				res[i].status = KVCD_WAIT_PENDING;
				later = true;
			}
			continue;
		}
		/*
		 * memfd mode: the daemon holds the pin for the client. Kernel
		 * mode: the client pins with its own file (the kernel checks
		 * its permission); -ESTALE there means evicted meanwhile.
		 */
		res[i].status = kvc_pool_pin(d->pool, p->id,
					     e->loc[KVC_TIER_POOL].pool);
		if (!res[i].status) {
			res[i].handle = e->loc[KVC_TIER_POOL].pool;
			kvc_policy_on_access(d->policy, id);
		}
	}
	if (later) {
		if (kvcd_tiers_defer(d, p, m, res))
			return KVC_SERVER_DEFER;
		for (uint32_t i = 0; i < l->count; i++)
			if (res[i].status == KVCD_WAIT_PENDING)
				res[i].status = -ENOMEM;
	}
	return kvc_proto_encode_load_reply(reply, KVC_PROTO_MSG_MAX, m->seq,
					   res, l->count);
}

static int kvcd_release(struct kvcd *d, struct kvc_peer *p,
			const struct kvc_msg *m, uint8_t *reply)
{
	static int32_t status[KVC_PROTO_MAX_BATCH];
	struct kvcache_handle h;

	if (!kvc_pool_has(d->pool, KVC_POOL_SHARED_MAP))
		return kvcd_error(reply, m, -EOPNOTSUPP,
				  "kernel mode: unpin with the ioctl");
	for (uint32_t i = 0; i < m->release.count; i++) {
		kvc_proto_release_handle(&m->release, i, &h);
		status[i] = kvc_pool_unpin(d->pool, p->id, h);
		/* The last pin of a block a STORE refused: it goes now. */
		if (!status[i] && h.index < d->nr_blocks &&
		    (d->orphan_seen[h.index] & KVCD_ORPHAN_REFUSED) &&
		    d->orphan_gen[h.index] == h.gen)
			kvcd_free_refused(d, h);
	}
	return kvc_proto_encode_release_reply(reply, KVC_PROTO_MSG_MAX, m->seq,
					      status, m->release.count);
}

static int kvcd_ns_create(struct kvcd *d, struct kvc_peer *p,
			  const struct kvc_msg *m, uint8_t *reply)
{
	const struct kvc_ns_create *c = &m->ns_create;
	struct kvcd_ns ns = { true, c->uid, c->gid, c->mode, { 0 } };
	int ret;

	if (p->uid != 0)
		return kvcd_error(reply, m, -EPERM, "only root creates namespaces");
	if (d->ns[c->ns_id].used)
		return kvcd_error(reply, m, -EEXIST, "namespace exists");
	/*
	 * memfd mode: a process given the pool memfd could read and write
	 * the new namespace's blocks whatever its mode says (see
	 * kvcd_may_every_ns()), even after it hung up, so it is refused
	 * while the pool lives (until kvcached restarts with a new one).
	 */
	if (kvc_pool_has(d->pool, KVC_POOL_SHARED_MAP) &&
	    !kvcd_holders_allow(d, &ns))
		return kvcd_error(reply, m, -EACCES,
				  "memfd mode: a process given the pool may not read and write this namespace; restart kvcached first");
	/* Never a namespace with a guessable salt. */
	ret = kvcd_new_salt(ns.salt);
	if (ret)
		return kvcd_error(reply, m, ret, "no random salt");
	ret = kvc_pool_ns_create(d->pool, c->ns_id, c->uid, c->gid, c->mode);
	if (ret)
		return kvcd_error(reply, m, ret, "kernel refused it");
	/*
	 * Saved before it is answered: a namespace whose salt is not in the
	 * table would lose its g3/g4 blocks at the next start. Refused when
	 * the table cannot be written (and taken back from the kernel).
	 */
	d->ns[c->ns_id] = ns;
	ret = kvcd_ns_save(d);
	if (ret) {
		d->ns[c->ns_id].used = false;
		d->state_errors++;
		kvc_err("saving %s/namespaces: %s: namespace %" PRIu32 " not created",
			d->state_dir, strerror(-ret), c->ns_id);
		kvc_pool_ns_destroy(d->pool, c->ns_id);
		return kvcd_error(reply, m, ret, "saving the namespace table");
	}
	kvc_info("namespace %" PRIu32 " created: uid %" PRIu32 " gid %" PRIu32
		 " mode %03o", c->ns_id, c->uid, c->gid, c->mode);
	kvcd_ns_dirs(d, c->ns_id);
	return kvc_proto_encode_ns_create_reply(reply, KVC_PROTO_MSG_MAX,
						m->seq);
}

/*
 * NS_SALT: a namespace's salt, for peers that may read it (they need it
 * to derive its keys); SET, from root only, replaces it, so that nodes
 * sharing one g4 can give a namespace the same salt. A peer that may not
 * read gets EACCES and not the salt: without it, it cannot compute the
 * keys of another tenant's prompts to probe for them.
 */
static int kvcd_ns_salt(struct kvcd *d, struct kvc_peer *p,
			const struct kvc_msg *m, uint8_t *reply)
{
	const struct kvc_ns_salt *s = &m->ns_salt;
	struct kvc_ns_salt_reply r = { .ns_id = s->ns_id };
	struct kvcd_ns *n = &d->ns[s->ns_id];
	int ret;

	if (s->flags & KVC_PROTO_NS_SALT_SET) {
		if (p->uid != 0)
			return kvcd_error(reply, m, -EPERM,
					  "only root sets a namespace's salt");
		if (!n->used)
			return kvcd_error(reply, m, -ENOENT,
					  "no such namespace");
		uint8_t old[KVC_PROTO_SALT_SIZE];

		memcpy(old, n->salt, KVC_PROTO_SALT_SIZE);
		memcpy(n->salt, s->salt, KVC_PROTO_SALT_SIZE);
		ret = kvcd_ns_save(d);
		if (ret) {
			/* The salt in use stays the one a restart reads. */
			memcpy(n->salt, old, KVC_PROTO_SALT_SIZE);
			d->state_errors++;
			kvc_err("saving %s/namespaces: %s: the salt of namespace %" PRIu32 " is unchanged",
				d->state_dir, strerror(-ret), s->ns_id);
			return kvcd_error(reply, m, ret,
					  "saving the namespace table");
		}
	} else if (!n->used) {
		return kvcd_error(reply, m, -ENOENT, "no such namespace");
	} else if (!kvcd_may(d, p, s->ns_id, 4)) {
		return kvcd_error(reply, m, -EACCES, "namespace not readable");
	}
	memcpy(r.salt, n->salt, KVC_PROTO_SALT_SIZE);
	return kvc_proto_encode_ns_salt_reply(reply, KVC_PROTO_MSG_MAX, m->seq,
					      &r);
}

/* memfd mode: what the kernel's ALLOC ioctl does in kernel mode. */
static int kvcd_alloc(struct kvcd *d, struct kvc_peer *p,
		      const struct kvc_msg *m, uint8_t *reply)
{
	static struct kvcache_handle h[KVC_PROTO_MAX_BATCH];
	int ret;

	if (!kvc_pool_has(d->pool, KVC_POOL_SHARED_MAP))
		return kvcd_error(reply, m, -EOPNOTSUPP,
				  "kernel mode: allocate with the ioctl");
	if (!kvcd_may(d, p, m->alloc.ns_id, 2))
		return kvcd_error(reply, m, -EACCES, "namespace not writable");
	ret = kvc_pool_alloc(d->pool, p->id, m->alloc.ns_id, m->alloc.count,
			     h);
	if (ret == -ENOSPC) {
		/* Make room for the whole batch (and the high watermark, as
		 * the kernel's pressure events would), and retry. */
		uint64_t high = (uint64_t)d->nr_blocks *
				d->cfg.pool.high_watermark / 100;

		kvcd_evict_to_wait(d, (uint32_t)(high > m->alloc.count ?
						 high : m->alloc.count));
		ret = kvc_pool_alloc(d->pool, p->id, m->alloc.ns_id,
				     m->alloc.count, h);
	}
	if (ret)
		return kvcd_error(reply, m, ret, "no free blocks");
	return kvc_proto_encode_alloc_reply(reply, KVC_PROTO_MSG_MAX, m->seq,
					    h, m->alloc.count);
}

static int kvcd_seal(struct kvcd *d, struct kvc_peer *p,
		     const struct kvc_msg *m, uint8_t *reply)
{
	static int32_t status[KVC_PROTO_MAX_SEAL];
	struct kvc_seal_entry e;

	if (!kvc_pool_has(d->pool, KVC_POOL_SHARED_MAP))
		return kvcd_error(reply, m, -EOPNOTSUPP,
				  "kernel mode: seal with the ioctl");
	for (uint32_t i = 0; i < m->seal.count; i++) {
		kvc_proto_seal_entry(&m->seal, i, &e);
		status[i] = kvc_pool_seal(d->pool, p->id, e.handle,
					  e.payload_len, e.key);
		if (!status[i] && (e.flags & KVC_PROTO_SEAL_KEEP_PIN))
			status[i] = kvc_pool_pin(d->pool, p->id, e.handle);
	}
	return kvc_proto_encode_seal_reply(reply, KVC_PROTO_MSG_MAX, m->seq,
					   status, m->seal.count);
}

/*
 * Drop entry id's copies in the tiers of mask now (an admin asked): 0,
 * -EBUSY (the pool copy is pinned or mapped), -ENOTEMPTY (a descendant
 * is still in one of those tiers: it would be orphaned there), or the
 * error of removing a file (-EROFS ...). The entry may be gone after.
 */
static int kvcd_drop(struct kvcd *d, uint32_t id, unsigned int mask)
{
	const struct kvc_entry *e = kvc_index_entry(d->index, id);
	unsigned int have = e->tiers & mask;
	int ret;

	for (unsigned int t = 0; t < KVC_NR_TIERS; t++)
		if ((have & (1u << t)) && e->child_in[t])
			return -ENOTEMPTY;
	/*
	 * Dropping only the pool copy of a block no tier has yet would lose
	 * it: as for an eviction, its write-back comes first (it is held
	 * until then, -EBUSY: kvcd_flush() waits for the writes and tries
	 * again). Dropping it from every tier deletes it, written or not.
	 */
	if ((have & (1u << KVC_TIER_POOL)) &&
	    (mask & KVC_TIERS_ALL) != KVC_TIERS_ALL &&
	    kvcd_tiers_evicting(d, id))
		return -EBUSY;
	if (have & (1u << KVC_TIER_POOL)) {
		ret = kvcd_evict_block(d, e->loc[KVC_TIER_POOL].pool);
		if (ret && ret != -ESTALE)
			return ret;
		kvcd_clear_pool(d, id);
		if (!ret)
			kvcd_evicted(d);
	}
	for (unsigned int t = KVC_TIER_G3; t < KVC_NR_TIERS; t++) {
		if (!(have & (1u << t)) || !d->tier[t])
			continue;
		ret = kvc_tier_drop(d->tier[t], id);
		if (ret && ret != -ENOENT)
			return ret;
		kvc_metric_add(d->dm.evictions[t], 1);
	}
	return 0;
}

/* EVICT: the keys are taken deepest first, so a whole chain can go. */
static int kvcd_evict(struct kvcd *d, struct kvc_peer *p,
		      const struct kvc_msg *m, uint8_t *reply)
{
	static int32_t status[KVC_PROTO_MAX_BATCH];
	const struct kvc_evict *ev = &m->evict;
	uint32_t id;

	if (p->uid != 0)
		return kvcd_error(reply, m, -EPERM, "only root evicts");
	if (!d->ns[ev->ns_id].used)
		return kvcd_error(reply, m, -ENOENT, "no such namespace");
	for (uint32_t i = ev->count; i-- > 0;) {
		const uint8_t *key = ev->keys + (size_t)i * KVCACHE_KEY_SIZE;

		if (kvc_index_find(d->index, ev->ns_id, key, &id) ||
		    !kvc_index_entry(d->index, id)->tiers)
			status[i] = -ENOENT;
		else
			status[i] = kvcd_drop(d, id, KVC_TIERS_ALL);
	}
	return kvc_proto_encode_evict_reply(reply, KVC_PROTO_MSG_MAX, m->seq,
					    status, ev->count);
}

/*
 * FLUSH: evict every block of the namespace (0: of all) that can go, from
 * the tiers asked (0: all), leaves first, pass after pass until nothing
 * more moves. A pinned block stays, and so do its ancestors. Pool blocks
 * that must be written back first are (kvcd_drop()), and the passes wait
 * for those writes: like sync before drop_caches. A dirty block whose
 * write fails stays, counted busy.
 */
static int kvcd_flush(struct kvcd *d, struct kvc_peer *p,
		      const struct kvc_msg *m, uint8_t *reply)
{
	struct kvc_flush_reply r = { 0 };
	uint32_t ns = m->flush.ns_id;
	unsigned int mask = m->flush.tiers ? m->flush.tiers : KVC_TIERS_ALL;
	bool progress = true;

	if (p->uid != 0)
		return kvcd_error(reply, m, -EPERM, "only root flushes");
	if (ns != KVC_PROTO_NS_ALL && !d->ns[ns].used)
		return kvcd_error(reply, m, -ENOENT, "no such namespace");
	while (progress || kvcd_tiers_wait(d)) {
		progress = false;
		r.busy = 0;
		for (uint32_t id = kvc_index_next(d->index, 0); id != KVC_ID_NONE;
		     id = kvc_index_next(d->index, id + 1)) {
			const struct kvc_entry *e = kvc_index_entry(d->index, id);
			int ret;

			if ((ns != KVC_PROTO_NS_ALL && e->ns != ns) ||
			    !(e->tiers & mask))
				continue;
			ret = kvcd_drop(d, id, mask);
			if (!ret) {
				r.evicted++;
				progress = true;
			} else {
				r.busy++;
			}
		}
	}
	return kvc_proto_encode_flush_reply(reply, KVC_PROTO_MSG_MAX, m->seq,
					    &r);
}

/*
 * NS_LIST: namespaces from start on, a page at a time, with pool blocks.
 * Ids, owners and modes are public, as ls -l shows a file's; how many
 * blocks a namespace holds is not: it moves with what its tenant caches,
 * so a peer that may not read a namespace sees 0 there.
 */
static int kvcd_ns_list(struct kvcd *d, struct kvc_peer *p,
			const struct kvc_msg *m, uint8_t *reply)
{
	static struct kvc_ns_entry e[KVC_PROTO_MAX_BATCH];
	uint32_t n = 0, next = 0, ns = m->ns_list.start ? m->ns_list.start : 1;

	for (; ns <= KVCACHE_NS_MAX; ns++) {
		if (!d->ns[ns].used)
			continue;
		if (n == KVC_PROTO_MAX_BATCH) {
			next = ns;	/* another page starts here */
			break;
		}
		e[n] = (struct kvc_ns_entry){
			.ns_id = ns, .uid = d->ns[ns].uid, .gid = d->ns[ns].gid,
			.mode = d->ns[ns].mode,
		};
		n++;
	}
	/* Blocks per namespace: one pass over the index for the page. */
	for (uint32_t id = kvc_index_next(d->index, 0); n && id != KVC_ID_NONE;
	     id = kvc_index_next(d->index, id + 1)) {
		const struct kvc_entry *ent = kvc_index_entry(d->index, id);
		uint32_t lo = 0, hi = n;

		if (!(ent->tiers & (1u << KVC_TIER_POOL)))
			continue;
		while (lo < hi) {	/* e[] is sorted by ns_id */
			uint32_t mid = (lo + hi) / 2;

			if (e[mid].ns_id < ent->ns)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < n && e[lo].ns_id == ent->ns &&
		    kvcd_may(d, p, ent->ns, 4))
			e[lo].blocks++;
	}
	return kvc_proto_encode_ns_list_reply(reply, KVC_PROTO_MSG_MAX, m->seq,
					      next, e, n);
}

static int kvcd_stats(struct kvcd *d, const struct kvc_msg *m, uint8_t *reply)
{
	uint32_t free_blocks = 0;
	struct kvc_stat st[64] = {
		{ "index_keys", 0, kvc_index_count(d->index) },
		{ "index_bytes", 0, kvc_index_bytes(d->index) },
		{ "lookups", 0, d->lookups },
		{ "lookup_keys", 0, d->lookup_keys },
		{ "hit_keys", 0, d->hit_keys },
		{ "stores", 0, d->stores },
		{ "evictions", 0, d->evictions },
		{ "protocol_errors", 0, d->errors },
		{ "pool_blocks", 0, d->nr_blocks },
		{ "pool_free", 0, 0 },
		{ "refused_freed", 0, d->refused_freed },
		{ "journal_bytes", 0, d->journal_bytes },
		{ "journal_compactions", 0, d->journal_compactions },
		{ "journal_errors", 0, d->journal_errors },
		{ "state_errors", 0, d->state_errors },
		{ "state_missing", 0, d->state_missing },
		{ "unknown_namespaces", 0, d->unknown_ns },
	};
	size_t n = 17;

	kvcd_pool_free(d, &free_blocks);
	st[9].value = free_blocks;
	n += kvcd_tiers_stats(d, st + n, sizeof(st) / sizeof(st[0]) - n);
	for (size_t i = 0; i < n; i++)
		st[i].name_len = (uint16_t)strlen(st[i].name);
	return kvc_proto_encode_stats_reply(reply, KVC_PROTO_MSG_MAX, m->seq,
					    st, (uint32_t)n);
}

static int kvcd_dispatch(struct kvcd *d, struct kvc_peer *p,
			 const struct kvc_msg *m, uint8_t *reply,
			 int *pass_fd);

static int kvcd_request(void *ctx, struct kvc_peer *p, const uint8_t *msg,
			size_t len, bool truncated, uint8_t *reply,
			int *pass_fd)
{
	struct kvcd *d = ctx;
	struct kvc_msg m;
	int ret;

	ret = truncated ? -EMSGSIZE : kvc_proto_decode(msg, len, &m);
	if (ret) {
		d->errors++;
		kvc_metric_add(d->dm.protocol_errors, 1);
		if (truncated) {
			memset(&m, 0, sizeof(m));
			m.reason = "message larger than the protocol allows";
		}
		return kvc_proto_encode_decode_error(reply, KVC_PROTO_MSG_MAX,
						     ret, &m);
	}
	if (!kvc_proto_is_request(m.type))
		return 0;	/* never answer a reply */
	if (m.type != KVC_MSG_HELLO && !d->clients[p->id].hello)
		return kvcd_error(reply, &m, -EPROTO, "HELLO first");
	if (m.version > d->clients[p->id].version &&
	    m.type != KVC_MSG_HELLO)
		return kvcd_error(reply, &m, -EPROTONOSUPPORT,
				  "a version above the one HELLO chose");
	/* After HELLO, replies carry the version it chose. */
	return kvc_proto_set_version(reply,
				     kvcd_dispatch(d, p, &m, reply, pass_fd),
				     d->clients[p->id].version);
}

static int kvcd_dispatch(struct kvcd *d, struct kvc_peer *p,
			 const struct kvc_msg *mp, uint8_t *reply,
			 int *pass_fd)
{
	const struct kvc_msg m = *mp;

	switch (m.type) {
	case KVC_MSG_HELLO:
		return kvcd_hello(d, p, &m, reply, pass_fd);
	case KVC_MSG_LOOKUP:
		return kvcd_lookup(d, p, &m, reply);
	case KVC_MSG_STORE:
		return kvcd_store(d, p, &m, reply);
	case KVC_MSG_LOAD:
		return kvcd_load(d, p, &m, reply);
	case KVC_MSG_RELEASE:
		return kvcd_release(d, p, &m, reply);
	case KVC_MSG_STATS:
		return kvcd_stats(d, &m, reply);
	case KVC_MSG_NS_CREATE:
		return kvcd_ns_create(d, p, &m, reply);
	case KVC_MSG_ALLOC:
		return kvcd_alloc(d, p, &m, reply);
	case KVC_MSG_SEAL:
		return kvcd_seal(d, p, &m, reply);
	case KVC_MSG_EVICT:
		return kvcd_evict(d, p, &m, reply);
	case KVC_MSG_FLUSH:
		return kvcd_flush(d, p, &m, reply);
	case KVC_MSG_NS_LIST:
		return kvcd_ns_list(d, p, &m, reply);
	case KVC_MSG_NS_SALT:
		return kvcd_ns_salt(d, p, &m, reply);
	default:	/* a request type newer than this daemon */
		return kvcd_error(reply, &m, -EOPNOTSUPP, "unknown request type");
	}
}

static int kvcd_connected(void *ctx, struct kvc_peer *p)
{
	struct kvcd *d = ctx;

	d->clients[p->id].hello = false;
	d->clients[p->id].version = 0;
	kvc_debug("client %" PRIu32 " connected: pid %d uid %u gid %u", p->id,
		  (int)p->pid, (unsigned int)p->uid, (unsigned int)p->gid);
	kvc_metric_add(d->dm.connections, 1);
	kvc_metric_add(d->dm.connections_total, 1);
	return 0;
}

static void kvcd_closed(void *ctx, struct kvc_peer *p)
{
	struct kvcd *d = ctx;

	/* memfd mode: its pins and unsealed blocks go, as at close(2). */
	kvc_pool_release(d->pool, p->id);
	kvcd_tiers_closed(d, p);
	kvc_debug("client %" PRIu32 " closed: pid %d", p->id, (int)p->pid);
	d->clients[p->id].hello = false;
	kvc_metric_sub(d->dm.connections, 1);
}

static void kvcd_pressure(const struct kvc_pool_state *st, void *arg)
{
	struct kvcd *d = arg;

	/* A client's ALLOC failed or will: free blocks, written back. */
	if (st->pressure)
		kvcd_evict_to_wait(d, st->high_watermark);
}

/*
 * One scrape: accept, answer with the whole exposition as HTTP/1.0 and
 * close. Prometheus (or curl --unix-socket) sends a GET first; the request
 * is not parsed, every path gets the metrics. A scraper that does not read
 * is cut off after a second rather than stalling the loop.
 */
static void kvcd_scrape(struct kvcd *d)
{
	struct timeval tv = { .tv_sec = 1 };
	char head[160], req[1024];
	size_t need;
	int fd;

	fd = accept4(d->metrics_fd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (recv(fd, req, sizeof(req), 0) < 0) {
		close(fd);
		return;
	}
	need = kvc_metrics_render(d->metrics, d->metrics_buf, d->metrics_cap);
	if (need >= d->metrics_cap) {
		char *b = realloc(d->metrics_buf, need + 1);

		if (!b) {
			close(fd);
			return;
		}
		d->metrics_buf = b;
		d->metrics_cap = need + 1;
		kvc_metrics_render(d->metrics, d->metrics_buf, d->metrics_cap);
	}
	snprintf(head, sizeof(head),
		 "HTTP/1.0 200 OK\r\nContent-Type: %s\r\nContent-Length: %zu\r\n\r\n",
		 KVC_METRICS_CONTENT_TYPE, need);
	if (send(fd, head, strlen(head), MSG_NOSIGNAL) > 0)
		send(fd, d->metrics_buf, need, MSG_NOSIGNAL);
	close(fd);
}

static void kvcd_readable(void *ctx, int fd)
{
	struct kvcd *d = ctx;

	if (kvcd_tiers_readable(d, fd))
		return;
	if (fd >= 0 && fd == kvc_pool_events_fd(d->pool))
		kvc_pool_events_read(d->pool, kvcd_pressure, d);
	else if (fd == d->metrics_fd)
		kvcd_scrape(d);
}

/* The metrics endpoint of the configuration: a Unix socket or a TCP port. */
static int kvcd_metrics_open(struct kvcd *d)
{
	const struct kvc_config_listen *l = &d->cfg.daemon.metrics;
	union {
		struct sockaddr_un un;
		struct sockaddr_in in;
		struct sockaddr_in6 in6;
	} a;
	struct stat st;
	socklen_t len;
	int fd, one = 1;

	memset(&a, 0, sizeof(a));
	if (l->kind == KVC_CONFIG_LISTEN_OFF)
		return 0;
	if (l->kind == KVC_CONFIG_LISTEN_UNIX) {
		a.un.sun_family = AF_UNIX;
		strcpy(a.un.sun_path, l->path);
		len = sizeof(a.un);
		if (kvc_server_mkdir_parent(l->path))
			return -ENOENT;
		/* A stale socket of an earlier run goes; anything else stays. */
		if (!lstat(l->path, &st)) {
			if (!S_ISSOCK(st.st_mode))
				return -EEXIST;
			unlink(l->path);
		}
	} else if (inet_pton(AF_INET, d->cfg.daemon.metrics_address,
			     &a.in.sin_addr) == 1) {
		a.in.sin_family = AF_INET;
		a.in.sin_port = htons(l->port);
		len = sizeof(a.in);
	} else if (inet_pton(AF_INET6, d->cfg.daemon.metrics_address,
			     &a.in6.sin6_addr) == 1) {
		a.in6.sin6_family = AF_INET6;
		a.in6.sin6_port = htons(l->port);
		len = sizeof(a.in6);
	} else {
		return -EINVAL;
	}
	fd = socket(((struct sockaddr *)&a)->sa_family,
		    SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, len) || listen(fd, 16)) {
		int err = -errno;

		close(fd);
		return err;
	}
	d->metrics_fd = fd;
	return 0;
}

static void kvcd_tick(void *ctx)
{
	kvcd_check_pool(ctx);
	kvcd_tiers_tick(ctx);
}

const struct kvc_server_ops kvcd_server_ops = {
	.request	= kvcd_request,
	.connected	= kvcd_connected,
	.closed		= kvcd_closed,
	.readable	= kvcd_readable,
	.tick		= kvcd_tick,
};

/* ---- setup --------------------------------------------------------------- */

static int kvcd_open_pool(struct kvcd *d, const char *device)
{
	struct kvc_pool_config pc = {
		.want = d->cfg.daemon.mode == KVC_CONFIG_MODE_MEMFD ?
			KVC_POOL_WANT_MEMFD :
			d->cfg.daemon.mode == KVC_CONFIG_MODE_KERNEL ?
			KVC_POOL_WANT_KERNEL : KVC_POOL_WANT_AUTO,
		.device = device,
		.block_size = d->cfg.pool.block_size,
		.pool_size = d->cfg.pool.memfd_size,
		.hugetlb = d->cfg.pool.hugetlb == KVC_CONFIG_HUGETLB_YES ? 1 :
			   d->cfg.pool.hugetlb == KVC_CONFIG_HUGETLB_NO ? 0 : -1,
		.mlock = d->cfg.pool.mlock,
	};
	int ret;

	ret = kvc_pool_open(&pc, &d->pool);
	if (ret)
		return ret;
	d->block_size = d->pool->block_size;
	d->nr_blocks = d->pool->nr_blocks;
	return 0;
}

static const char *kvcd_policy_name(int policy)
{
	switch (policy) {
	case KVC_CONFIG_POLICY_S3FIFO:
		return "s3fifo";
	case KVC_CONFIG_POLICY_COST:
		return "cost";
	default:
		return "lru";
	}
}

int kvcd_create(struct kvcd **out, const struct kvcd_options *opt)
{
	char path[PATH_MAX];
	uint64_t seed = 0;
	const char *env;
	struct kvcd *d;
	int ret;

	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->cfg = *opt->cfg;
	d->journal_fd = -1;
	d->metrics_fd = -1;
	/* Room for the longest file name in it, "namespaces.new". */
	if (strlen(opt->state_dir) + 16 > sizeof(d->state_dir)) {
		ret = -ENAMETOOLONG;
		goto err;
	}
	strcpy(d->state_dir, opt->state_dir);
	if (mkdir(d->state_dir, 0700) && errno != EEXIST) {
		ret = -errno;
		kvc_err("%s: %s", d->state_dir,
			strerror(errno));
		goto err;
	}
	/* It holds the salts: kvcached's alone, whatever made it. */
	if (chmod(d->state_dir, 0700))
		kvc_warn("chmod %s: %s", d->state_dir, strerror(errno));
	ret = kvcd_open_pool(d, opt->device);
	if (ret)
		goto err;
	/* A random hash seed: nobody can aim keys at one place of the table. */
	if (getrandom(&seed, sizeof(seed), 0) != sizeof(seed))
		seed = (uint64_t)time(NULL) ^ (uint64_t)getpid() << 32;
	d->by_block = malloc(d->nr_blocks * sizeof(*d->by_block));
	d->orphan_seen = calloc(d->nr_blocks, 1);
	d->orphan_gen = calloc(d->nr_blocks, sizeof(*d->orphan_gen));
	d->metrics = kvc_metrics_new();
	ret = -ENOMEM;
	if (!d->by_block || !d->orphan_seen || !d->orphan_gen || !d->metrics)
		goto err;
	memset(d->by_block, 0xff, d->nr_blocks * sizeof(*d->by_block));
	ret = kvc_index_create(&d->index, d->nr_blocks, seed);
	if (!ret)
		ret = kvc_policy_create(&d->policy,
					kvcd_policy_name(d->cfg.eviction.policy),
					d->index, KVC_TIER_POOL, d->nr_blocks);
	if (!ret && d->cfg.eviction.policy == KVC_CONFIG_POLICY_S3FIFO)
		ret = kvc_policy_set_small(d->policy,
					   d->cfg.eviction.s3fifo_small);
	if (!ret)
		ret = kvc_admit_create(&d->admit, d->cfg.eviction.pool_admit,
				       d->nr_blocks);
	if (!ret)
		ret = kvc_metrics_register_daemon(d->metrics, &d->dm);
	if (ret)
		goto err;
	ret = kvcd_ns_load(d);
	if (!ret)
		ret = kvcd_check_state(d);
	if (ret)
		goto err;
	ret = kvcd_metrics_open(d);
	if (ret) {
		kvc_err("metrics endpoint: %s",
			strerror(-ret));
		goto err;
	}
	/*
	 * The journal restarts with the blocks that are still there: the
	 * rebuild places them, the compaction writes their links. In memfd
	 * mode the pool dies with the daemon and no journal could help a
	 * restart: none is written, and a stale one goes.
	 */
	kvcd_path(d, "parents", path);
	d->journal_min = KVC_JOURNAL_MIN_COMPACT;
	/* Tests compact sooner, to see it happen within a few STOREs. */
	env = getenv("KVCACHED_JOURNAL_MIN");
	if (env && strtoull(env, NULL, 10) >= KVC_JOURNAL_REC)
		d->journal_min = strtoull(env, NULL, 10);
	if (kvc_pool_has(d->pool, KVC_POOL_PERSISTENT)) {
		kvcd_rebuild(d);
		if (kvcd_journal_compact(d))
			kvc_err("%s: no journal (restarts will lose chains)",
				path);
	} else {
		char tmp[PATH_MAX];

		kvcd_path(d, "parents.new", tmp);
		if ((unlink(path) && errno != ENOENT) ||
		    (unlink(tmp) && errno != ENOENT))
			kvc_warn("stale %s: %s", path,
				strerror(errno));
	}
	/* After the pool: blocks found in both get both presence bits. */
	ret = kvcd_tiers_open(d);
	if (ret)
		goto err;
	/* Directories made by hand or by an older kvcached get them too. */
	for (uint32_t i = 1; i <= KVCACHE_NS_MAX; i++)
		if (d->ns[i].used)
			kvcd_ns_dirs(d, i);
	*out = d;
	return 0;
err:
	kvcd_destroy(d);
	return ret;
}

void kvcd_destroy(struct kvcd *d)
{
	if (!d)
		return;
	kvcd_tiers_close(d);
	if (d->journal_fd >= 0)
		close(d->journal_fd);
	if (d->metrics_fd >= 0) {
		close(d->metrics_fd);
		if (d->cfg.daemon.metrics.kind == KVC_CONFIG_LISTEN_UNIX)
			unlink(d->cfg.daemon.metrics.path);
	}
	free(d->metrics_buf);
	kvc_admit_destroy(d->admit);
	kvc_policy_destroy(d->policy);
	kvc_index_destroy(d->index);
	kvc_metrics_free(d->metrics);
	kvc_pool_close(d->pool);
	free(d->by_block);
	free(d->orphan_seen);
	free(d->orphan_gen);
	free(d);
}

void kvcd_set_server(struct kvcd *d, struct kvc_server *s)
{
	d->srv = s;
}

size_t kvcd_watch_fds(const struct kvcd *d, int *fds, size_t max)
{
	size_t n = 0;

	if (kvc_pool_events_fd(d->pool) >= 0 && n < max)
		fds[n++] = kvc_pool_events_fd(d->pool);
	if (d->metrics_fd >= 0 && n < max)
		fds[n++] = d->metrics_fd;
	return n + kvcd_tiers_fds(d, fds + n, max - n);
}

const char *kvcd_mode_name(const struct kvcd *d)
{
	return kvc_pool_name(d->pool);
}
