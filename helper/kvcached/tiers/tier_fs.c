// SPDX-License-Identifier: GPL-2.0
/*
 * tier_fs: the filesystem under a tier, checked at open (tier_fs.h).
 */
#include "tier_fs.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape(char *s)
{
	char *out = s;

	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '7' &&
		    s[2] >= '0' && s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*out++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 +
					(s[3] - '0'));
			s += 4;
		} else {
			*out++ = *s++;
		}
	}
	*out = '\0';
}

/* Is mount point m a path prefix of path ("/" of all of them)? */
static size_t covers(const char *m, const char *path)
{
	size_t n = strlen(m);

	if (!strcmp(m, "/"))
		return 1;
	if (strncmp(m, path, n) || (path[n] && path[n] != '/'))
		return 0;
	return n;
}

/* Does the comma-separated list opts hold the option word? */
static bool has_opt(const char *opts, const char *word)
{
	size_t n = strlen(word);

	for (const char *p = opts; p && *p; p = strchr(p, ',')) {
		if (*p == ',')
			p++;
		if (!strncmp(p, word, n) && (p[n] == ',' || !p[n]))
			return true;
	}
	return false;
}

void kvc_tier_fs_nfs_options(const char *opts, struct kvc_tier_fs *fs)
{
	char buf[1024], *save = NULL;

	fs->acregmax = KVC_NFS_ACREGMAX_DEFAULT;
	fs->acdirmax = KVC_NFS_ACDIRMAX_DEFAULT;
	fs->nconnect = 1;
	strcpy(fs->lookupcache, "all");
	snprintf(buf, sizeof(buf), "%s", opts);
	for (char *o = strtok_r(buf, ",", &save); o;
	     o = strtok_r(NULL, ",", &save)) {
		char *v = strchr(o, '=');
		unsigned long n = 0;

		if (v) {
			*v++ = '\0';
			n = strtoul(v, NULL, 10);
		}
		if (!strcmp(o, "soft") || !strcmp(o, "softerr")) {
			fs->soft = true;
		} else if (!strcmp(o, "hard")) {
			fs->soft = false;
		} else if (!strcmp(o, "noac")) {
			fs->acregmax = fs->acdirmax = 0;
		} else if (v && !strcmp(o, "actimeo")) {
			fs->acregmax = fs->acdirmax = (unsigned int)n;
		} else if (v && !strcmp(o, "acregmax")) {
			fs->acregmax = (unsigned int)n;
		} else if (v && !strcmp(o, "acdirmax")) {
			fs->acdirmax = (unsigned int)n;
		} else if (v && !strcmp(o, "nconnect")) {
			fs->nconnect = (unsigned int)n;
		} else if (v && !strcmp(o, "lookupcache")) {
			snprintf(fs->lookupcache, sizeof(fs->lookupcache), "%s",
				 !strcmp(v, "positive") ? "pos" : v);
		} else if (v && (!strcmp(o, "vers") || !strcmp(o, "nfsvers"))) {
			char *dot;

			fs->vers_major = (unsigned int)n;
			dot = strchr(v, '.');
			fs->vers_minor = dot ? (unsigned int)strtoul(dot + 1,
								     NULL, 10) : 0;
		}
	}
}

int kvc_tier_fs_mountinfo(FILE *f, const char *path, struct kvc_tier_fs *fs)
{
	char line[4096];
	size_t best = 0;

	memset(fs, 0, sizeof(*fs));
	while (fgets(line, sizeof(line), f)) {
		char *field[32], *save = NULL, *sep;
		int n = 0, dash = -1;
		size_t len;

		line[strcspn(line, "\n")] = '\0';
		for (char *w = strtok_r(line, " ", &save); w && n < 32;
		     w = strtok_r(NULL, " ", &save))
			field[n++] = w;
		for (int i = 6; i < n; i++)
			if (!strcmp(field[i], "-")) {
				dash = i;
				break;
			}
		/*
		 * id, parent, dev, root, mount point, options, optional
		 * fields, "-", type, source, super options. A line of
		 * another shape (a newer kernel's) is not ours to judge.
		 */
		if (n < 6 || dash < 0 || dash + 3 >= n)
			continue;
		sep = field[dash + 3];
		unescape(field[4]);
		len = covers(field[4], path);
		if (!len || len < best)
			continue;
		best = len;
		memset(fs, 0, sizeof(*fs));
		snprintf(fs->mount, sizeof(fs->mount), "%s", field[4]);
		snprintf(fs->type, sizeof(fs->type), "%s", field[dash + 1]);
		fs->readonly = has_opt(field[5], "ro");
		fs->nfs = !strcmp(fs->type, "nfs") || !strcmp(fs->type, "nfs4");
		if (fs->nfs)
			kvc_tier_fs_nfs_options(sep, fs);
	}
	return best ? 0 : -ENOENT;
}

/* Can a file be published here as kvc_bf_install() does? */
static void probe_publish(const char *dir, const char *tag,
			  struct kvc_tier_fs *fs)
{
	char a[PATH_MAX], b[PATH_MAX];
	int fd;

	if (snprintf(a, sizeof(a), "%s/.fsprobe.%s.%d", dir, tag,
		     (int)getpid()) >= (int)sizeof(a) ||
	    snprintf(b, sizeof(b), "%s.2", a) >= (int)sizeof(b))
		return;
	unlink(b);
	fd = open(a, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	close(fd);
	fs->probed = true;
	fs->hardlinks = link(a, b) == 0;
	unlink(b);
	fs->noreplace = renameat2(AT_FDCWD, a, AT_FDCWD, b,
				  RENAME_NOREPLACE) == 0;
	unlink(fs->noreplace ? b : a);
}

int kvc_tier_fs_probe(const char *dir, const char *tag,
		      struct kvc_tier_fs *fs)
{
	char real[PATH_MAX];
	FILE *f;
	int ret;

	memset(fs, 0, sizeof(*fs));
	if (!realpath(dir, real))
		return -errno;
	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -errno;
	ret = kvc_tier_fs_mountinfo(f, real, fs);
	fclose(f);
	if (!access(dir, W_OK))
		probe_publish(dir, tag, fs);
	return ret;
}

int kvc_tier_fs_judge(const struct kvc_tier_fs *fs, const char *name,
		      const char *dir, bool shared, uint64_t grace_ms)
{
	if (fs->probed && !fs->hardlinks && !fs->noreplace) {
		kvc_err("%s %s: its filesystem (%s) has neither hard links nor renameat2(RENAME_NOREPLACE): no block could be published atomically",
			name, dir, fs->type[0] ? fs->type : "unknown");
		return -EOPNOTSUPP;
	}
	if (!fs->nfs) {
		if (shared && fs->type[0])
			kvc_info("%s %s: on %s, shared only by daemons that see this filesystem",
				 name, dir, fs->type);
		return 0;
	}
	kvc_info("%s %s: NFS (%s, version %u.%u, %s, attribute cache up to %u s, lookupcache=%s, nconnect=%u)",
		 name, dir, fs->mount, fs->vers_major, fs->vers_minor,
		 fs->soft ? "soft" : "hard", fs->acregmax, fs->lookupcache,
		 fs->nconnect);
	if (fs->soft)
		kvc_warn("%s %s is a soft NFS mount: I/O the server does not answer in time fails (misses and spill errors, never a torn block), so a server restart costs hits; mount it hard to wait a restart out",
			 name, dir);
	/*
	 * A reader renews its lease every grace/4; another node's GC sees
	 * that mtime up to acregmax late. Both within the grace, or that
	 * node may collect a block being read.
	 */
	if (shared && (uint64_t)fs->acregmax * 1000 >= grace_ms * 3 / 4)
		kvc_warn("%s %s: NFS caches attributes up to %u s, not below 3/4 of [g4] grace (%" PRIu64 " ms): another node may collect a block this one is reading; mount with actimeo=%" PRIu64 " or less, or raise grace",
			 name, dir, fs->acregmax, grace_ms,
			 grace_ms * 3 / 4000 > 1 ? grace_ms * 3 / 4000 - 1 : 0);
	return 0;
}
