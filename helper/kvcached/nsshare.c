// SPDX-License-Identifier: GPL-2.0
/*
 * nsshare: namespaces shared through g4 (kvcd.h).
 *
 * Nodes that share a g4 directory must agree on each namespace's owner,
 * mode and key salt, or a block one node published is never a hit on
 * another (its key mixes the salt in). Each namespace is described in
 * its own g4 directory:
 *
 *   <g4>/ns<id>/namespace     mode 0644 as its block files, written by
 *                             the node that first had the namespace
 *
 * The ns<id> directory lets in only those who may read the namespace
 * (r-x for them, nothing for the others: namespaces.c), the same peers
 * NS_SALT gives the salt to; nobody else can open the description, as
 * nobody else can open the blocks. The format is text,
 * one "name value" line each, in this order, closed by a CRC-32C of the
 * lines before it (helper/common/nsdesc.h; Documentation/design/tiers.md,
 * "Namespaces across nodes").
 *
 * A node learns a namespace it lacks from its description: at start,
 * before the tiers are recovered (so its blocks are found), then every
 * KVCD_NSSHARE_RETRY_S from the tick (g4's top directory and the new
 * descriptions read by g4's metadata worker, learn_async()), and at an
 * NS_CREATE of it (kvcd_nsshare_learn()). A namespace this node has
 * and g4 does not describe is published: at NS_CREATE, at start, and
 * retried every KVCD_NSSHARE_RETRY_S while g4 refuses (a server in its
 * grace period). Publication is a temp file linked to the final name,
 * so two nodes publishing at once leave one description; the loser
 * adopts the winner's salt when the two agree on owner and mode.
 *
 * A description is trusted only as a regular file (not a link), not
 * writable by group or others, owned by this daemon's user or by the one
 * uid [g4] trusted_uid names (the id root_squash maps kvcached's root to
 * on the g4 server, alike for every node: anonuid=, set to an id of its
 * own). Never by a squash uid: nobody (65534), nfsnobody, -1 or this
 * system's overflow uid, which every squashed or unmapped user of every
 * node has, whatever the configuration says (config.c refuses them as
 * trusted_uid; desc_trusted() refuses them again, the overflow uid being
 * known only here). The g4 directory's owner is not trusted for being
 * it: under root_squash it is commonly nobody. Anything else, or a file
 * that does not parse or check, is logged and ignored: a tenant that may
 * write in g4 cannot make a node grant it a namespace, nor give a salt to
 * a namespace an administrator creates later (NS_CREATE learns only a
 * trusted description; an untrusted one under the name blocks the
 * publication, said at every retry, until it is removed).
 *
 * A pass (at start, then each KVCD_NSSHARE_RETRY_S) learns at most
 * [g4] ns_learn_max namespaces and opens at most NSSHARE_READS_PER_LEARNED
 * times as many descriptions, going on where the last pass stopped (in
 * id order); the others wait for the next passes, so thousands of
 * descriptions, trusted or not, cost bounded work per pass, and every
 * namespace learned is logged with the node that made it and the owner
 * of its description.
 *
 * A namespace that this node and g4 describe differently (two nodes
 * created it apart, or a salt was set on one node only) is a conflict:
 * logged, counted (ns_conflicts), and this node keeps its own. Its keys
 * then differ from the other nodes', so nothing wrong is ever served;
 * the namespace is just not shared. NS_SALT SET rewrites the
 * description, so the node where the salt was set wins; the others
 * follow when they are given the same salt or restarted without the
 * namespace.
 */
#include "kvcd.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blockfile.h"
#include "clock.h"
#include "log.h"
#include "nsdesc.h"

#define NSSHARE_NAME		"namespace"
#define KVCD_NSSHARE_RETRY_S	5.0

/*
 * /proc/sys/fs/overflowuid, the uid this system shows for one it cannot
 * map (NFSv4 ids without an idmap entry): read once by
 * kvcd_nsshare_start(), before the first learning, on the daemon's
 * thread; only read afterwards, also on g4's worker.
 */
static uint32_t overflow_uid = 65534;

_Static_assert(KVC_NSDESC_SALT == KVC_PROTO_SALT_SIZE, "one salt size");

static bool shared_on(const struct kvcd *d)
{
	return d->cfg.g4.directory[0] != '\0';
}

static const char *node_name(const struct kvcd *d, char *buf, size_t len)
{
	if (d->cfg.g4.node[0])
		return d->cfg.g4.node;
	if (gethostname(buf, len - 1))
		return "?";
	buf[len - 1] = '\0';
	return buf;
}

/* May a description owned by uid be believed? (the file's comment) */
static bool desc_trusted(const struct kvcd *d, uint32_t uid)
{
	uint32_t trusted;

	if (kvc_config_squash_uid(uid) || uid == overflow_uid)
		return false;
	if (uid == (uint32_t)geteuid())
		return true;
	return kvc_config_trusted_uid(&d->cfg, &trusted) && uid == trusted;
}

static int desc_path(const struct kvcd *d, uint32_t ns, const char *name,
		     char *out, size_t len)
{
	int n = snprintf(out, len, "%s/ns%" PRIu32 "/%s", d->cfg.g4.directory,
			 ns, name);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/*
 * Read namespace ns's description from g4. 0 with *n, node and *owner
 * (the file's uid) filled; -ENOENT when there is none; -EPERM when it is
 * not to be trusted, -EBADMSG when it does not parse, with why set;
 * another -errno when g4 could not be read.
 */
static int desc_read(const struct kvcd *d, uint32_t ns, struct kvcd_ns *n,
		     char *node, size_t nlen, uint32_t *owner,
		     const char **why)
{
	char path[PATH_MAX], buf[KVC_NSDESC_MAX + 1];
	struct kvc_nsdesc nd;
	struct stat st;
	ssize_t len;
	size_t got;
	int fd, ret;

	*why = "";
	ret = desc_path(d, ns, NSSHARE_NAME, path, sizeof(path));
	if (ret)
		return ret;
	/* O_NONBLOCK: a FIFO planted under the name must not hang us. */
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY |
		  O_NONBLOCK);
	if (fd < 0)
		return errno == ELOOP ? (*why = "a symbolic link", -EPERM) :
		       -errno;
	if (fstat(fd, &st)) {
		ret = -errno;
		close(fd);
		return ret;
	}
	*owner = (uint32_t)st.st_uid;
	if (!S_ISREG(st.st_mode))
		*why = "not a regular file";
	else if (st.st_mode & (S_IWGRP | S_IWOTH))
		*why = "writable by group or others";
	else if (!desc_trusted(d, (uint32_t)st.st_uid))
		*why = "owned by neither kvcached's user nor [g4] trusted_uid";
	if (**why) {
		close(fd);
		return -EPERM;
	}
	len = read(fd, buf, sizeof(buf));
	ret = len < 0 ? -errno : 0;
	close(fd);
	if (ret)
		return ret;
	got = (size_t)len;
	if (got > KVC_NSDESC_MAX) {
		*why = "too long";
		return -EBADMSG;
	}
	if (kvc_nsdesc_parse(buf, got, &nd) || nd.id != ns ||
	    strlen(nd.node) >= nlen) {
		*why = "not a whole namespace description of it";
		return -EBADMSG;
	}
	memset(n, 0, sizeof(*n));
	n->used = true;
	n->uid = nd.uid;
	n->gid = nd.gid;
	n->mode = nd.mode;
	memcpy(n->salt, nd.salt, KVC_PROTO_SALT_SIZE);
	strcpy(node, nd.node);
	return 0;
}

/*
 * What g4 makes of a file kvcached wrote: under root_squash its owner is
 * the export's anonuid, not kvcached's uid, and unless trusted_uid names
 * it no node (this one included) believes any description. Said once.
 */
static void check_own_owner(const struct kvcd *d, int fd)
{
	static bool said;
	struct stat st;

	if (said || fstat(fd, &st) || desc_trusted(d, (uint32_t)st.st_uid))
		return;
	said = true;
	kvc_err("g4 %s: a file kvcached writes there is owned by uid %u, which no node trusts as the writer of namespace descriptions: namespaces are not shared. Under root_squash, give the export anonuid=/anongid= of their own and set [g4] trusted_uid to that uid (never nobody)",
		d->cfg.g4.directory, (unsigned int)st.st_uid);
}

/*
 * Write namespace ns's description to g4: a temp file linked to the
 * final name (replace: renamed over it). 0; -EEXIST when another is
 * there (not replace); another -errno when g4 refused.
 */
static int desc_write(const struct kvcd *d, uint32_t ns, bool replace)
{
	char path[PATH_MAX], tmp[PATH_MAX], name[128], host[64];
	char buf[KVC_NSDESC_MAX + 1];
	const char *node = node_name(d, host, sizeof(host));
	struct kvc_nsdesc nd = {
		.id = ns, .uid = d->ns[ns].uid, .gid = d->ns[ns].gid,
		.mode = d->ns[ns].mode,
	};
	int fd, len, ret = 0;

	memcpy(nd.salt, d->ns[ns].salt, KVC_NSDESC_SALT);
	snprintf(nd.node, sizeof(nd.node), "%s", node);
	len = kvc_nsdesc_encode(&nd, buf, sizeof(buf));
	if (len < 0)
		return len;
	snprintf(name, sizeof(name), "." NSSHARE_NAME ".new.%s.%ld", node,
		 (long)getpid());
	if (desc_path(d, ns, NSSHARE_NAME, path, sizeof(path)) ||
	    desc_path(d, ns, name, tmp, sizeof(tmp)))
		return -ENAMETOOLONG;
	/*
	 * Ours alone: a leftover of an earlier daemon with our pid goes
	 * first, and O_EXCL (which never follows a link or opens a FIFO
	 * someone planted) makes a new file or nothing.
	 */
	if (unlink(tmp) && errno != ENOENT)
		return -errno;
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC |
		  O_NONBLOCK, 0644);
	if (fd < 0)
		return -errno;
	/* As the block files, whatever the umask: the directory guards it. */
	if (fchmod(fd, 0644) || write(fd, buf, (size_t)len) != len ||
	    fsync(fd))
		ret = errno ? -errno : -EIO;
	if (!ret)
		check_own_owner(d, fd);
	if (close(fd) && !ret)
		ret = -errno;	/* NFS reports a failed write here */
	if (!ret && replace && rename(tmp, path))
		ret = -errno;
	if (!ret && !replace && link(tmp, path))
		ret = -errno;
	if (!replace || ret)
		unlink(tmp);
	if (!ret) {
		/* The directory of path: cut at its last '/'. */
		*strrchr(path, '/') = '\0';
		ret = kvc_bf_fsync_dir(path);
	}
	return ret;
}

static bool same_ns(const struct kvcd_ns *a, const struct kvcd_ns *b)
{
	return a->uid == b->uid && a->gid == b->gid && a->mode == b->mode &&
	       !memcmp(a->salt, b->salt, KVC_PROTO_SALT_SIZE);
}

static void conflict(struct kvcd *d, uint32_t ns, const struct kvcd_ns *g4,
		     const char *node)
{
	const struct kvcd_ns *n = &d->ns[ns];
	bool salt_only = g4->uid == n->uid && g4->gid == n->gid &&
			 g4->mode == n->mode;

	if (n->share == KVCD_SHARE_CONFLICT)
		return;
	d->ns[ns].share = KVCD_SHARE_CONFLICT;
	d->ns_conflicts++;
	kvc_metric_set(d->dm.ns_conflicts, d->ns_conflicts);
	kvc_err("namespace %" PRIu32 ": g4 %s describes it as node %s made it (uid %" PRIu32 " gid %" PRIu32 " mode %03o%s), not as this node has it (uid %" PRIu32 " gid %" PRIu32 " mode %03o): keeping this node's, whose blocks are not shared with the other nodes. Give it the same salt everywhere (kvcachectl ns-salt)",
		ns, d->cfg.g4.directory, node, g4->uid, g4->gid, g4->mode,
		salt_only ? ", another salt" : "", n->uid, n->gid, n->mode);
}

/*
 * Make n (read from g4, written by node, in a file owner owns) namespace
 * ns here. 0 or -errno.
 */
static int adopt(struct kvcd *d, uint32_t ns, const struct kvcd_ns *n,
		 const char *node, uint32_t owner)
{
	struct kvcd_ns old = d->ns[ns];
	int ret;

	if (kvc_pool_has(d->pool, KVC_POOL_SHARED_MAP) &&
	    !kvcd_holders_allow(d, n))
		return -EACCES;	/* memfd mode: see kvcd_ns_create() */
	if (!old.used) {
		ret = kvc_pool_ns_create(d->pool, ns, n->uid, n->gid, n->mode);
		if (ret && ret != -EEXIST)
			return ret;
	}
	d->ns[ns] = *n;
	d->ns[ns].share = KVCD_SHARE_OK;
	ret = kvcd_ns_save(d);
	if (ret) {
		d->state_errors++;
		d->ns[ns] = old;
		if (!old.used)
			kvc_pool_ns_destroy(d->pool, ns);
		return ret;
	}
	d->ns_learned++;
	kvc_metric_add(d->dm.ns_learned, 1);
	kvc_info("namespace %" PRIu32 " %s from g4 (made by node %s, description owned by uid %"
		 PRIu32 "): uid %" PRIu32 " gid %" PRIu32 " mode %03o", ns,
		 old.used ? "takes the salt" : "learned", node, owner, n->uid,
		 n->gid, n->mode);
	kvcd_ns_dirs(d, ns, KVCD_NS_DIRS_WORKER);
	return 0;
}

bool kvcd_nsshare_learn(struct kvcd *d, uint32_t ns)
{
	struct kvcd_ns n;
	char node[KVC_CONFIG_NODE_MAX];
	const char *why;
	uint32_t owner;
	int ret;

	if (!shared_on(d) || ns < 1 || ns > KVCACHE_NS_MAX)
		return false;
	if (d->ns[ns].used)
		return true;
	ret = desc_read(d, ns, &n, node, sizeof(node), &owner, &why);
	if (ret == -ENOENT)
		return false;	/* blocks, no description (yet) */
	if (!ret)
		ret = adopt(d, ns, &n, node, owner);
	if (ret)
		kvc_log_ratelimited(KVC_LOG_WARN, "g4 %s/ns%" PRIu32 "/" NSSHARE_NAME ": %s%s%s: namespace %" PRIu32 " not learned",
				    d->cfg.g4.directory, ns, strerror(-ret),
				    *why ? ", " : "", why, ns);
	return !ret;
}

/*
 * Namespace ns, which this node has, against g4: described alike
 * (shared), described otherwise (a conflict), or not described (now
 * published, or -errno to try again). fresh: created here a moment ago,
 * so nothing was stored under its salt yet; if another node described
 * it first with the same owner, group and mode (both created it at
 * once), its salt is taken.
 */
static int share_one(struct kvcd *d, uint32_t ns, bool fresh)
{
	char node[KVC_CONFIG_NODE_MAX];
	struct kvcd_ns n;
	const char *why;
	uint32_t owner;
	int ret;

	for (int tries = 0; tries < 2; tries++) {
		ret = desc_read(d, ns, &n, node, sizeof(node), &owner, &why);
		if (!ret) {
			const struct kvcd_ns *o = &d->ns[ns];

			if (same_ns(&n, o))
				d->ns[ns].share = KVCD_SHARE_OK;
			else if (fresh && n.uid == o->uid && n.gid == o->gid &&
				 n.mode == o->mode &&
				 !adopt(d, ns, &n, node, owner))
				return 0;
			else
				conflict(d, ns, &n, node);
			return 0;
		}
		if (ret != -ENOENT) {
			kvc_log_ratelimited(KVC_LOG_WARN, "g4 %s/ns%" PRIu32 "/" NSSHARE_NAME ": %s%s%s%s",
					    d->cfg.g4.directory, ns,
					    strerror(-ret), *why ? ", " : "",
					    why, ret == -EPERM ?
					    ": namespace not shared, its own salt kept, until that file is removed" :
					    "");
			return ret;
		}
		ret = desc_write(d, ns, false);
		if (!ret) {
			d->ns[ns].share = KVCD_SHARE_OK;
			kvc_debug("namespace %" PRIu32 " described in g4",
				  ns);
			return 0;
		}
		if (ret != -EEXIST)
			return ret;
		/* Another node was first: read what it wrote. */
	}
	return ret;
}

/*
 * The tick's learning, on g4's metadata worker: g4's top directory read
 * and each description of a namespace this node did not have when the
 * job was posted, so that a slow or absent server holds the worker, not
 * the daemon. The daemon adopts what it found when the job is back.
 */
struct learn_job {
	struct kvcd *d;
	bool ran;
	uint8_t known[KVCACHE_NS_MAX / 8 + 1];	/* bit per namespace */
	uint32_t after;		/* in: read from the first id past it */
	uint32_t last;		/* out: the last id read; 0: none */
	size_t n, cap;
	unsigned int good;	/* trusted descriptions in found[] */
	size_t more;		/* ns<id>/ left unread: a cap was reached */
	struct learned {
		uint32_t ns;
		int ret;
		const char *why;
		uint32_t owner;
		struct kvcd_ns desc;
		char node[KVC_CONFIG_NODE_MAX];
	} *found;
};

/*
 * Descriptions a pass reads at most, for each it may learn: a g4 full
 * of untrusted or broken ones (or of ns<id>/ with no description) costs
 * a bounded number of opens a pass, not one per directory.
 */
#define NSSHARE_READS_PER_LEARNED	4

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * The ns<id>/ of g4's top directory this node lacks, ascending into
 * *ids (malloc'ed). Their count, or 0 with *ids NULL.
 */
static size_t unknown_ids(const struct learn_job *j, uint32_t **ids)
{
	size_t n = 0, cap = 0;
	struct dirent *de;
	uint32_t *v = NULL;
	DIR *dp;

	*ids = NULL;
	dp = opendir(j->d->cfg.g4.directory);
	if (!dp)
		return 0;
	while ((de = readdir(dp))) {
		unsigned long ns;
		char *end;

		if (strncmp(de->d_name, "ns", 2) ||
		    !isdigit((unsigned char)de->d_name[2]))
			continue;
		ns = strtoul(de->d_name + 2, &end, 10);
		if (*end || ns < 1 || ns > KVCACHE_NS_MAX ||
		    (j->known[ns / 8] & (1u << (ns & 7))))
			continue;
		if (n == cap) {
			uint32_t *w;

			cap = cap ? cap * 2 : 64;
			w = realloc(v, cap * sizeof(*v));
			if (!w)
				break;
			v = w;
		}
		v[n++] = (uint32_t)ns;
	}
	closedir(dp);
	if (v)
		qsort(v, n, sizeof(*v), cmp_u32);
	*ids = v;
	return v ? n : 0;
}

/*
 * One pass: the unknown ids in ascending order from the first past
 * j->after, around, until ns_learn_max trusted descriptions were read
 * or NSSHARE_READS_PER_LEARNED times as many files were opened. The next
 * pass goes on after the last one read, so every id is reached however
 * many come before it.
 */
static void learn_run(void *arg)
{
	struct learn_job *j = arg;
	unsigned int learn_max = j->d->cfg.g4.ns_learn_max;
	size_t read_max = (size_t)learn_max * NSSHARE_READS_PER_LEARNED;
	size_t nids, first = 0, k;
	uint32_t *ids;

	j->ran = true;
	nids = unknown_ids(j, &ids);
	while (first < nids && ids[first] <= j->after)
		first++;
	for (k = 0; k < nids; k++) {
		struct learned *l;

		if (j->good >= learn_max || k >= read_max)
			break;
		if (j->n == j->cap) {
			size_t cap = j->cap ? j->cap * 2 : 16;

			l = realloc(j->found, cap * sizeof(*l));
			if (!l)
				break;
			j->found = l;
			j->cap = cap;
		}
		l = &j->found[j->n];
		l->ns = ids[(first + k) % nids];
		j->last = l->ns;
		/* desc_read reads the daemon's fixed configuration only. */
		l->ret = desc_read(j->d, l->ns, &l->desc, l->node,
				   sizeof(l->node), &l->owner, &l->why);
		if (l->ret == -ENOENT)	/* blocks, no description (yet) */
			continue;
		j->good += !l->ret;
		j->n++;
	}
	j->more = nids - k;
	free(ids);
}

static void learn_done(void *arg)
{
	struct learn_job *j = arg;
	struct kvcd *d = j->d;

	for (size_t i = 0; j->ran && i < j->n; i++) {
		struct learned *l = &j->found[i];
		int ret = l->ret;

		if (d->ns[l->ns].used)
			continue;	/* created or learned meanwhile */
		if (!ret)
			ret = adopt(d, l->ns, &l->desc, l->node, l->owner);
		if (ret)
			kvc_log_ratelimited(KVC_LOG_WARN, "g4 %s/ns%" PRIu32 "/" NSSHARE_NAME ": %s%s%s: namespace %" PRIu32 " not learned",
					    d->cfg.g4.directory, l->ns,
					    strerror(-ret), *l->why ? ", " : "",
					    l->why, l->ns);
	}
	if (j->ran && j->more)
		kvc_info("g4 %s: %u namespace description%s taken this pass ([g4] ns_learn_max = %u); %zu more ns<id> director%s left for the next passes",
			 d->cfg.g4.directory, j->good, j->good == 1 ? "" : "s",
			 d->cfg.g4.ns_learn_max, j->more,
			 j->more == 1 ? "y" : "ies");
	if (j->ran && j->last)
		d->nsshare_after = j->last;
	d->nsshare_job = false;
	free(j->found);
	free(j);
}

/* A learning of what this node lacks now. */
static struct learn_job *learn_job_new(struct kvcd *d)
{
	struct learn_job *j = calloc(1, sizeof(*j));

	if (!j)
		return NULL;
	j->d = d;
	j->after = d->nsshare_after;
	for (uint32_t ns = 1; ns <= KVCACHE_NS_MAX; ns++)
		if (d->ns[ns].used)
			j->known[ns / 8] |= (uint8_t)(1u << (ns & 7));
	return j;
}

/* Post the learning to g4's worker, unless one is on its way. */
static void learn_async(struct kvcd *d)
{
	struct learn_job *j;

	if (d->nsshare_job)
		return;
	j = learn_job_new(d);
	if (!j)
		return;
	if (kvc_tier_call(kvcd_tier(d, KVC_TIER_G4), learn_run, learn_done,
			  j)) {
		free(j);
		return;
	}
	d->nsshare_job = true;
}

/* Learn every namespace g4 describes that this node lacks (at start,
 * before anything is served: here, on the daemon's thread). */
static void learn_all(struct kvcd *d)
{
	struct learn_job *j = learn_job_new(d);

	if (!j)
		return;
	learn_run(j);
	d->nsshare_job = true;
	learn_done(j);
}

/* The overflow uid (overflow_uid), 65534 when it cannot be read. */
static void read_overflow_uid(void)
{
	FILE *f = fopen("/proc/sys/fs/overflowuid", "re");
	unsigned int uid;

	if (!f)
		return;
	if (fscanf(f, "%u", &uid) == 1)
		overflow_uid = uid;
	fclose(f);
}

void kvcd_nsshare_start(struct kvcd *d)
{
	uint32_t trusted;

	if (!shared_on(d))
		return;
	read_overflow_uid();
	if (kvc_config_trusted_uid(&d->cfg, &trusted) &&
	    !desc_trusted(d, trusted))
		kvc_err("g4: [g4] trusted_uid = %" PRIu32 " is this system's overflow uid, which every unmapped user has: not trusted",
			trusted);
	learn_all(d);
}

void kvcd_nsshare_tick(struct kvcd *d)
{
	double now = kvc_now();

	if (!shared_on(d) || !kvcd_tier(d, KVC_TIER_G4) ||
	    now < d->nsshare_at)
		return;
	d->nsshare_at = now + KVCD_NSSHARE_RETRY_S;
	/*
	 * Other nodes' new namespaces, within KVCD_NSSHARE_RETRY_S: a
	 * rescan would learn them too, but a pass over a large or slow
	 * directory takes far longer (one directory read of the top), on
	 * the worker.
	 */
	learn_async(d);
	for (uint32_t ns = 1; ns <= KVCACHE_NS_MAX; ns++) {
		if (!d->ns[ns].used)
			continue;
		if (d->ns[ns].share == KVCD_SHARE_UNKNOWN)
			share_one(d, ns, false);
		else if (d->ns[ns].share == KVCD_SHARE_REPLACE)
			kvcd_nsshare_salt_set(d, ns);
	}
}

int kvcd_nsshare_created(struct kvcd *d, uint32_t ns)
{
	if (!shared_on(d) || !kvcd_tier(d, KVC_TIER_G4))
		return 0;
	/* Refused now (g4 away): kvcd_nsshare_tick() tries again. */
	return share_one(d, ns, true);
}

void kvcd_nsshare_salt_set(struct kvcd *d, uint32_t ns)
{
	int ret;

	if (!shared_on(d) || !kvcd_tier(d, KVC_TIER_G4))
		return;
	ret = desc_write(d, ns, true);
	if (ret) {
		/* The old description stays: kvcd_nsshare_tick() retries. */
		d->ns[ns].share = KVCD_SHARE_REPLACE;
		kvc_warn("namespace %" PRIu32 ": the new salt is not in g4 %s yet: %s",
			 ns, d->cfg.g4.directory, strerror(-ret));
		return;
	}
	d->ns[ns].share = KVCD_SHARE_OK;
}
