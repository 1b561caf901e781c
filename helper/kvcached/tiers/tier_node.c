// SPDX-License-Identifier: GPL-2.0
/*
 * tier_node: a node's claim on its name in a shared tier (tier.h).
 *
 * Everything a node writes in g4 carries its name: its manifest, its
 * temp files, the tag recovery uses to tell its own leftovers (removed at
 * once) from another node's (left an hour). Two nodes with one name
 * would remove each other's temp files mid-write and rewrite one
 * manifest in turn. So a daemon claims its name when it opens g4:
 *
 *   <g4>/.nodes/<name>    "kvcache-node 1\nhost H\nboot B\npid P S\n"
 *
 * (host name, the kernel's boot id, pid and the process's start time in
 * clock ticks since boot, which tell a live daemon from a pid reused).
 * The file is rewritten every KVC_NODE_BEAT_S (its mtime is the heart
 * beat other machines read; a buffered write, flushed by the kernel, so
 * the beat costs the loop no round trip) and removed at a clean stop.
 *
 * A claim finding a file there: the same boot (this machine, running):
 * refused while that process lives. The same host, another boot: this
 * machine rebooted; taken over. Another host: refused while its beat is
 * younger than KVC_NODE_STALE_S, taken over (with a warning) after.
 * A file that does not parse is taken over with a warning.
 *
 * .nodes/ is kvcached's own: made 0755 by kvcached, it must belong to
 * kvcached's uid (or to [g4] trusted_uid, the uid a root-squashing
 * server gives kvcached's files) and be writable by its owner alone. One that is not was made by someone else, who could have
 * planted claims that keep every node from starting: it is moved aside
 * (.nodes.untrusted.<time>, with a warning) and a new one made. Every
 * call in it is made on its descriptor, through no link, and the beat
 * goes to the descriptor of the file we wrote, never reopened by name:
 * a name swapped for a hard link to another file must not make kvcached
 * write there.
 */
#include "tier_priv.h"

#include "beneath.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define KVC_NODE_BEAT_S		30
#define KVC_NODE_STALE_S	300

struct claim {
	char host[65];
	char boot[40];
	long pid;
	unsigned long long start;
};

/*
 * Process pid's start time, clock ticks after boot (proc(5) field 22); 0
 * when it is gone, or a zombie (killed, not yet reaped: it holds nothing).
 */
static unsigned long long proc_start(long pid)
{
	char path[64], buf[1024], *p;
	unsigned long long v = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* After the command's closing parenthesis: fields 3 onwards. */
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X')
		return 0;
	for (int field = 2; p && field < 22; field++)
		p = strchr(p + 1, ' ');
	if (p)
		v = strtoull(p + 1, NULL, 10);
	return v;
}

static void read_line(const char *path, char *out, size_t len)
{
	FILE *f = fopen(path, "re");

	out[0] = '\0';
	if (!f)
		return;
	if (fgets(out, (int)len, f))
		out[strcspn(out, "\n")] = '\0';
	fclose(f);
}

static void self_claim(struct claim *c)
{
	memset(c, 0, sizeof(*c));
	if (gethostname(c->host, sizeof(c->host) - 1))
		snprintf(c->host, sizeof(c->host), "?");
	read_line("/proc/sys/kernel/random/boot_id", c->boot, sizeof(c->boot));
	c->pid = (long)getpid();
	c->start = proc_start(c->pid);
}

static int encode(const struct claim *c, char *buf, size_t len)
{
	return snprintf(buf, len, "kvcache-node 1\nhost %s\nboot %s\npid %ld %llu\n",
			c->host[0] ? c->host : "?", c->boot[0] ? c->boot : "?",
			c->pid, c->start);
}

static int parse(const char *buf, struct claim *c)
{
	memset(c, 0, sizeof(*c));
	return sscanf(buf, "kvcache-node 1\nhost %64s\nboot %39s\npid %ld %llu",
		      c->host, c->boot, &c->pid, &c->start) == 4 ? 0 : -EBADMSG;
}

/* Write our claim: a temp file in .nodes/ (@dfd), then renamed over the
 * name (replace) or linked to it (first). The temp file's descriptor in
 * *@out: the claim's own, for the beats. 0, -EEXIST (not replace,
 * another was first), -errno. */
static int write_claim(struct kvc_tier *t, int dfd, const struct claim *me,
		       bool replace, int *out)
{
	char tmp[NAME_MAX + 1], buf[256];
	int fd, n = encode(me, buf, sizeof(buf)), ret = 0;

	if (snprintf(tmp, sizeof(tmp), "%s.new.%ld", t->node, me->pid) >=
	    (int)sizeof(tmp))
		return -ENAMETOOLONG;
	/* A new file of ours, never a link or a FIFO someone planted. */
	if (unlinkat(dfd, tmp, 0) && errno != ENOENT)
		return -errno;
	fd = openat(dfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC |
		    O_NOFOLLOW | O_NONBLOCK, 0644);
	if (fd < 0)
		return -errno;
	if (write(fd, buf, (size_t)n) != n || fsync(fd))
		ret = errno ? -errno : -EIO;
	if (!ret && (replace ? renameat(dfd, tmp, dfd, t->node) :
		     linkat(dfd, tmp, dfd, t->node, 0)))
		ret = -errno;
	if (ret || !replace)
		unlinkat(dfd, tmp, 0);
	if (ret)
		close(fd);
	else
		*out = fd;
	return ret;
}

/* .nodes/, kvcached's own (see the top of this file): its descriptor. */
static int nodes_dir(struct kvc_tier *t)
{
	char aside[64];
	int fd;

	for (int tries = 0; tries < 2; tries++) {
		if (mkdirat(t->root_fd, ".nodes", 0755) == 0) {
			/* Its mode whatever the umask, as the fan-out
			 * directories. */
			fd = kvc_open_beneath(t->root_fd, ".nodes", O_RDONLY |
					      O_DIRECTORY | O_CLOEXEC, 0);
			if (fd >= 0 && fchmod(fd, 0755)) {
				close(fd);
				return -errno;
			}
			return fd;
		}
		if (errno != EEXIST)
			return -errno;
		fd = kvc_open_beneath(t->root_fd, ".nodes", O_RDONLY |
				      O_DIRECTORY | O_CLOEXEC, 0);
		if (fd >= 0 && !kvc_dir_foreign(fd, t->owner))
			return fd;
		if (fd >= 0)
			close(fd);
		else if (fd != -ELOOP && fd != -ENOTDIR)
			return fd;
		snprintf(aside, sizeof(aside), ".nodes.untrusted.%" PRId64,
			 tier_now_s());
		kvc_warn("%s/.nodes is not kvcached's (a link, another owner than uid %u or %u, or writable by others): its claims are not trusted; moved to %s",
			 t->dir, (unsigned int)geteuid(),
			 (unsigned int)t->owner, aside);
		if (renameat(t->root_fd, ".nodes", t->root_fd, aside))
			return -errno;
	}
	return -EPERM;
}

int kvc_tier_node_claim(struct kvc_tier *t, char *why, size_t len)
{
	char buf[256];
	struct claim me, them;
	struct stat st;
	int64_t age;
	ssize_t n;
	int dfd, fd, ret = 0;

	why[0] = '\0';
	if (snprintf(t->node_path, sizeof(t->node_path), "%s/.nodes/%s",
		     t->dir, t->node) >= (int)sizeof(t->node_path))
		return -ENAMETOOLONG;
	dfd = nodes_dir(t);
	if (dfd < 0)
		return dfd;
	self_claim(&me);
	for (int tries = 0; tries < 2; tries++) {
		bool replace = true;

		fd = openat(dfd, t->node, O_RDONLY | O_CLOEXEC | O_NOFOLLOW |
			    O_NONBLOCK);
		if (fd < 0 && errno != ENOENT) {
			ret = -errno;
			break;
		}
		if (fd < 0) {
			replace = false;
		} else {
			n = read(fd, buf, sizeof(buf) - 1);
			ret = fstat(fd, &st) ? -errno : 0;
			close(fd);
			if (ret)
				break;
			buf[n > 0 ? n : 0] = '\0';
			age = tier_now_s() - (int64_t)st.st_mtime;
			if (!S_ISREG(st.st_mode) || parse(buf, &them)) {
				snprintf(why, len, "%s held a claim that does not parse: taken over",
					 t->node_path);
			} else if (!strcmp(them.boot, me.boot)) {
				/* This machine, this boot: is it alive? */
				if (them.pid != me.pid && them.start &&
				    proc_start(them.pid) == them.start) {
					snprintf(why, len, "node name '%s' is in use on this machine by pid %ld: every kvcached sharing g4 needs its own [g4] node",
						 t->node, them.pid);
					ret = -EADDRINUSE;
					break;
				}
			} else if (strcmp(them.host, me.host)) {
				if (age < KVC_NODE_STALE_S) {
					snprintf(why, len, "node name '%s' is in use by host %s (pid %ld, its claim renewed %" PRId64 " s ago): every node sharing g4 needs its own [g4] node",
						 t->node, them.host, them.pid,
						 age > 0 ? age : 0);
					ret = -EADDRINUSE;
					break;
				}
				snprintf(why, len, "node name '%s' was host %s's, silent for %" PRId64 " s: taken over",
					 t->node, them.host, age);
			}
		}
		ret = write_claim(t, dfd, &me, replace, &t->node_fd);
		if (ret != -EEXIST)
			break;
		/* Another daemon claimed it between our look and our link. */
	}
	close(dfd);
	if (ret)
		return ret;	/* without a descriptor no beat: no claim */
	t->node_beat = tier_now_s();
	return 0;
}

/* Is the claim at node_path still the file we hold (not taken over)? */
static bool still_ours(const struct kvc_tier *t)
{
	struct stat a, b;

	return !fstat(t->node_fd, &a) && !stat(t->node_path, &b) &&
	       a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

void kvc_tier_node_beat(struct kvc_tier *t)
{
	struct claim me;
	char buf[256];
	int n;

	if (t->node_fd < 0 || tier_now_s() - t->node_beat < KVC_NODE_BEAT_S)
		return;
	t->node_beat = tier_now_s();
	self_claim(&me);
	n = encode(&me, buf, sizeof(buf));
	/* Buffered: the kernel flushes it, the server's mtime follows. */
	if (pwrite(t->node_fd, buf, (size_t)n, 0) != n)
		t->node_beat -= KVC_NODE_BEAT_S / 2;	/* sooner again */
}

void kvc_tier_node_release(struct kvc_tier *t)
{
	if (t->node_fd < 0)
		return;
	/* Taken over meanwhile (we were silent too long): not ours to go. */
	if (still_ours(t))
		unlink(t->node_path);
	close(t->node_fd);
	t->node_fd = -1;
}
