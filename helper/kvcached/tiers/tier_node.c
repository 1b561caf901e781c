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
 */
#include "tier_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
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

/* Write our claim to path: a temp file, then renamed over (replace) or
 * linked (first). 0, -EEXIST (not replace, another was first), -errno. */
static int write_claim(struct kvc_tier *t, const struct claim *me,
		       bool replace)
{
	char tmp[PATH_MAX + 32], buf[256];
	int fd, n = encode(me, buf, sizeof(buf)), ret = 0;

	snprintf(tmp, sizeof(tmp), "%s.new.%ld", t->node_path, me->pid);
	/* A new file of ours, never a link or a FIFO someone planted. */
	if (unlink(tmp) && errno != ENOENT)
		return -errno;
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW |
		  O_NONBLOCK, 0644);
	if (fd < 0)
		return -errno;
	if (write(fd, buf, (size_t)n) != n || fsync(fd))
		ret = errno ? -errno : -EIO;
	if (close(fd) && !ret)
		ret = -errno;
	if (!ret && (replace ? rename(tmp, t->node_path) :
		     link(tmp, t->node_path)))
		ret = -errno;
	if (ret || !replace)
		unlink(tmp);
	return ret;
}

int kvc_tier_node_claim(struct kvc_tier *t, char *why, size_t len)
{
	char dir[PATH_MAX], buf[256];
	struct claim me, them;
	struct stat st;
	int64_t age;
	ssize_t n;
	int fd, ret;

	why[0] = '\0';
	if (snprintf(dir, sizeof(dir), "%s/.nodes", t->dir) >= (int)sizeof(dir) ||
	    snprintf(t->node_path, sizeof(t->node_path), "%s/%s", dir,
		     t->node) >= (int)sizeof(t->node_path))
		return -ENAMETOOLONG;
	if (!mkdir(dir, 0755)) {
		/* Its mode whatever the umask, as the fan-out directories. */
		if (chmod(dir, 0755))
			return -errno;
	} else if (errno != EEXIST) {
		return -errno;
	}
	self_claim(&me);
	for (int tries = 0; tries < 2; tries++) {
		bool replace = true;

		fd = open(t->node_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW |
			  O_NONBLOCK);
		if (fd < 0 && errno != ENOENT)
			return -errno;
		if (fd < 0) {
			replace = false;
		} else {
			n = read(fd, buf, sizeof(buf) - 1);
			ret = fstat(fd, &st) ? -errno : 0;
			close(fd);
			if (ret)
				return ret;
			buf[n > 0 ? n : 0] = '\0';
			age = tier_now_s() - (int64_t)st.st_mtime;
			if (parse(buf, &them)) {
				snprintf(why, len, "%s held a claim that does not parse: taken over",
					 t->node_path);
			} else if (!strcmp(them.boot, me.boot)) {
				/* This machine, this boot: is it alive? */
				if (them.pid != me.pid && them.start &&
				    proc_start(them.pid) == them.start) {
					snprintf(why, len, "node name '%s' is in use on this machine by pid %ld: every kvcached sharing g4 needs its own [g4] node",
						 t->node, them.pid);
					return -EADDRINUSE;
				}
			} else if (strcmp(them.host, me.host)) {
				if (age < KVC_NODE_STALE_S) {
					snprintf(why, len, "node name '%s' is in use by host %s (pid %ld, its claim renewed %" PRId64 " s ago): every node sharing g4 needs its own [g4] node",
						 t->node, them.host, them.pid,
						 age > 0 ? age : 0);
					return -EADDRINUSE;
				}
				snprintf(why, len, "node name '%s' was host %s's, silent for %" PRId64 " s: taken over",
					 t->node, them.host, age);
			}
		}
		ret = write_claim(t, &me, replace);
		if (ret != -EEXIST)
			break;
		/* Another daemon claimed it between our look and our link. */
	}
	if (ret)
		return ret;
	t->node_fd = open(t->node_path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW |
			  O_NONBLOCK);
	if (t->node_fd < 0)
		return -errno;	/* no beat: the claim would go stale */
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
