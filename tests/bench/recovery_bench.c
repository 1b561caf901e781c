// SPDX-License-Identifier: GPL-2.0
/*
 * Recovery benchmark (issue 6): after a restart, how long does rebuilding
 * the index of a G3 tier take, by a scan of its files or from a journal?
 *
 *   scan          kvc_tier_scan(), what kvcached runs at a first start
 *                 (and in the background after a recovery): readdir of
 *                 the fan-out directories, open and read the 4096-byte
 *                 header of every block file, insert parents first, then
 *                 rewrite the node's manifest from the index.
 *   journal       the baseline: one append-only file of fixed-size
 *                 records (ns, key, parent, first flag, file size, ctime,
 *                 CRC32C of the record), read sequentially, each record
 *                 inserted the same way (kvc_index_insert, kvc_index_set
 *                 in G3 with the file size, the LRU policy's on_insert).
 *                 Records whose parent is not in yet (spills finish out of
 *                 order in a real one) are inserted once it is.
 *   journal_stat  the journal, each record checked with one stat() of its
 *                 file (exists, regular, the size recorded), in the
 *                 journal's order. A journal alone cannot be trusted after
 *                 a crash (the tail may name files that never became
 *                 durable, or miss files that did) nor on a directory
 *                 other nodes delete from, so this is the fair comparison.
 *   recover       kvc_tier_recover(), what kvcached runs at a restart: the
 *                 node's manifest (manifest.h, appended per block when the
 *                 files were made), sorted by key, one lstat() per record,
 *                 insertion parents first, the manifest rewritten.
 *
 * Each is measured with a cold page cache (sync, drop_caches before it)
 * and warm (after an untimed scan has read everything), in that order
 * within each run, so the scan and each journal alternate run by run.
 *
 * The files are made here with the real on-disk format (kvc_bf_build, a
 * 1-byte payload: 8 KiB per file) under dir/ns1/aa/bb/<key>.kvb, in
 * chains of 64 blocks with random 32-byte keys and real parent links,
 * written with plain write() and no fsync, in chain order, with the
 * journal and manifest records of each appended as it is made. That takes
 * minutes for a million: progress goes to stderr. A directory given with
 * -d that already holds a complete set of the same size is reused, so the
 * cold and warm runs can be repeated without recreating it.
 *
 * Output: CSV "metric,run,scan_s,other_s,ratio,scan_blocks_s,
 * other_blocks_s" on stdout, one row per other method (ratio: the scan's
 * time over the other's, same run), a summary on stderr. Run as root
 * (drop_caches).
 *
 * Usage: recovery_bench [-r RUNS] [-n BLOCKS] [-d DIR] [-k]
 *   defaults: 3 runs, 1000000 blocks, a fresh directory under /var/tmp.
 *   -k keeps the directory (for a later -d); else it is deleted.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "manifest.h"
#include "policy.h"
#include "tier.h"

#define NS		1
#define CHAIN		64
#define TAG		"bench"
#define FILE_SIZE	(2 * KVC_BF_ALIGN)	/* header + 1 byte, padded */
#define JREC_ADD	0x4b564a41u		/* "KVJA" */
#define JBUF_RECS	8192			/* records per read, 768 KiB */
#define MARKER		".recovery_bench"

/* One journal record: what a real journal of spills would hold. */
struct jrec {
	uint32_t magic;			/* JREC_ADD */
	uint32_t ns;
	uint32_t flags;			/* KVC_BF_F_FIRST */
	uint32_t crc;			/* CRC32C of the record, crc = 0 */
	uint8_t key[KVC_BF_KEY_SIZE];
	uint8_t parent[KVC_BF_KEY_SIZE];
	uint64_t file_size;
	uint64_t ctime_ns;
};

_Static_assert(sizeof(struct jrec) == 96, "journal record layout");

enum { SCAN, JOURNAL, JOURNAL_STAT, RECOVER, NMETHODS };

static const char *const method_name[NMETHODS] = {
	"scan", "journal", "journal_stat", "recover",
};

static struct {
	int runs;
	size_t n;
	char dir[PATH_MAX - 128], nsdir[PATH_MAX - 64], journal[PATH_MAX];
	char marker[PATH_MAX], manifest[PATH_MAX];
	bool warm_only;			/* could not drop the page cache */
} B;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The key of block d of chain c: random-looking, like SHA-256 output. */
static void key_of(uint64_t c, uint64_t d, uint8_t *k)
{
	for (uint64_t j = 0; j < 4; j++) {
		uint64_t v = kvc_mix64(((c * CHAIN + d) << 2 | j) +
				       0x6a09e667f3bcc908ULL);

		memcpy(k + 8 * j, &v, 8);
	}
}

static void drop_caches(void)
{
	int fd;

	sync();
	if (B.warm_only)
		return;
	fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, "3", 1) != 1) {
		fprintf(stderr, "recovery_bench: cannot drop the page cache"
			" (%s): the cold runs are warm\n", strerror(errno));
		B.warm_only = true;
	}
	if (fd >= 0)
		close(fd);
}

static uint32_t jrec_crc(const struct jrec *r)
{
	struct jrec c = *r;

	c.crc = 0;
	return kvc_crc32c(0, &c, sizeof(c));
}

/* ---- the directory --------------------------------------------------- */

static size_t removed;

static int rm_one(const char *path, const struct stat *st, int type,
		  struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (type == FTW_DP ? rmdir(path) : unlink(path))
		return errno == ENOENT ? 0 : -1;
	if (type != FTW_DP && ++removed % 200000 == 0)
		fprintf(stderr, "# removed %zu files\n", removed);
	return 0;
}

static void rm_tree(const char *path)
{
	struct stat st;

	if (lstat(path, &st))
		return;
	if (nftw(path, rm_one, 32, FTW_DEPTH | FTW_PHYS))
		bench_die(path, errno);
}

/* The marker's text: what a directory holds once complete. */
static void marker_text(char *out, size_t len)
{
	snprintf(out, len, "recovery_bench blocks=%zu chain=%d version=%d"
		 " journal+manifest\n", B.n, CHAIN, KVC_BF_VERSION);
}

/* 1: a complete set of this size; 0: empty; -1: something else. */
static int dir_state(void)
{
	char want[128], have[128] = "";
	struct dirent *de;
	bool empty = true;
	FILE *f;
	DIR *dp;

	f = fopen(B.marker, "r");
	if (f) {
		if (!fgets(have, sizeof(have), f))
			have[0] = '\0';
		fclose(f);
		marker_text(want, sizeof(want));
		return strcmp(have, want) ? -1 : 1;
	}
	dp = opendir(B.dir);
	if (!dp)
		bench_die(B.dir, errno);
	while ((de = readdir(dp)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			empty = false;
	closedir(dp);
	return empty ? 0 : -1;
}

static void check_space(void)
{
	struct statvfs sv;
	double need = (double)B.n * (FILE_SIZE + sizeof(struct jrec)) +
		      65792.0 * 4096 + (2ULL << 30);

	if (statvfs(B.dir, &sv))
		bench_die(B.dir, errno);
	if ((double)sv.f_bavail * (double)sv.f_frsize < need ||
	    sv.f_favail < B.n + 70000) {
		fprintf(stderr, "recovery_bench: %s: %zu blocks need %.1f GiB"
			" and %zu inodes; %.1f GiB and %llu inodes free: use"
			" a smaller -n\n", B.dir, B.n, need / (1 << 30),
			B.n + 70000,
			(double)sv.f_bavail * (double)sv.f_frsize / (1 << 30),
			(unsigned long long)sv.f_favail);
		exit(1);
	}
}

static void mkdir_p(const char *path)
{
	if (mkdir(path, 0755) && errno != EEXIST)
		bench_die(path, errno);
}

static void mrec_of(const struct jrec *j, struct kvc_mf_rec *m)
{
	memset(m, 0, sizeof(*m));
	m->ns = j->ns;
	m->first = j->flags & KVC_BF_F_FIRST;
	m->size = j->file_size;
	memcpy(m->key, j->key, KVC_BF_KEY_SIZE);
	memcpy(m->parent, j->parent, KVC_BF_KEY_SIZE);
}

/*
 * Write the block files and the journal. The fan-out directories are
 * made as keys need them, as kvc_bf_prepare() does, so a small set is
 * laid out as a real tier of that size would be.
 */
static void populate(void)
{
	static uint8_t leaf_made[65536 / 8];
	uint8_t key[KVC_BF_KEY_SIZE], parent[KVC_BF_KEY_SIZE];
	char path[PATH_MAX];
	struct jrec *jb;
	size_t jn = 0, made = 0;
	double t0 = now_s();
	uint8_t *image;
	int jfd, mfd;

	check_space();
	mkdir_p(B.nsdir);
	if (posix_memalign((void **)&image, KVC_BF_ALIGN, FILE_SIZE))
		bench_die("memory", ENOMEM);
	jb = malloc(JBUF_RECS * sizeof(*jb));
	jfd = open(B.journal, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (!jb || jfd < 0)
		bench_die(B.journal, jfd < 0 ? errno : ENOMEM);
	/* The tier's own manifest too, appended per block as kvcached does. */
	unlink(B.manifest);
	mfd = kvc_mf_open(B.manifest);
	if (mfd < 0)
		bench_die(B.manifest, mfd);
	fprintf(stderr, "# creating %zu block files of %d bytes in %s\n",
		B.n, FILE_SIZE, B.nsdir);
	for (size_t c = 0; made < B.n; c++) {
		for (size_t d = 0; d < CHAIN && made < B.n; d++, made++) {
			struct kvc_bf_header h = { 0 };
			struct jrec *r = &jb[jn++];
			struct kvc_mf_rec mrec;
			unsigned int leaf;
			int fd, ret;

			key_of(c, d, key);
			h.flags = d ? 0 : KVC_BF_F_FIRST;
			memcpy(h.key, key, KVC_BF_KEY_SIZE);
			if (d)
				memcpy(h.parent, parent, KVC_BF_KEY_SIZE);
			h.ns_id = NS;
			h.payload_len = 1;
			strcpy(h.node_id, TAG);
			image[KVC_BF_HEADER_SIZE] = (uint8_t)made;
			ret = kvc_bf_build(&h, image);
			if (ret)
				bench_die("kvc_bf_build", ret);
			leaf = (unsigned int)key[0] << 8 | key[1];
			if (!(leaf_made[leaf / 8] & (1u << (leaf % 8)))) {
				snprintf(path, sizeof(path), "%s/%02x", B.nsdir,
					 key[0]);
				mkdir_p(path);
				snprintf(path, sizeof(path), "%s/%02x/%02x",
					 B.nsdir, key[0], key[1]);
				mkdir_p(path);
				leaf_made[leaf / 8] |= 1u << (leaf % 8);
			}
			ret = kvc_bf_path(B.nsdir, key, path, sizeof(path));
			if (ret)
				bench_die("kvc_bf_path", ret);
			fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
				  0644);
			if (fd < 0)
				bench_die(path, errno);
			if (write(fd, image, FILE_SIZE) != FILE_SIZE)
				bench_die(path, errno ? errno : EIO);
			close(fd);

			memset(r, 0, sizeof(*r));
			r->magic = JREC_ADD;
			r->ns = NS;
			r->flags = h.flags;
			memcpy(r->key, key, KVC_BF_KEY_SIZE);
			memcpy(r->parent, h.parent, KVC_BF_KEY_SIZE);
			r->file_size = FILE_SIZE;
			r->ctime_ns = h.ctime_ns;
			r->crc = jrec_crc(r);
			mrec_of(r, &mrec);
			ret = kvc_mf_append(mfd, &mrec);
			if (ret)
				bench_die(B.manifest, ret);
			if (jn == JBUF_RECS) {
				if (write(jfd, jb, jn * sizeof(*jb)) !=
				    (ssize_t)(jn * sizeof(*jb)))
					bench_die(B.journal, errno ? errno : EIO);
				jn = 0;
			}
			memcpy(parent, key, KVC_BF_KEY_SIZE);
			if ((made + 1) % 100000 == 0)
				fprintf(stderr, "# %zu files, %.0f/s\n",
					made + 1, (double)(made + 1) /
					(now_s() - t0));
		}
	}
	if (jn && write(jfd, jb, jn * sizeof(*jb)) !=
		  (ssize_t)(jn * sizeof(*jb)))
		bench_die(B.journal, errno ? errno : EIO);
	if (fsync(jfd) || close(jfd) || fsync(mfd) || close(mfd))
		bench_die(B.journal, errno);
	free(jb);
	free(image);
	fprintf(stderr, "# created in %.0f s; syncing\n", now_s() - t0);
	sync();
}

static void finish_populate(void)
{
	char text[128];
	FILE *f = fopen(B.marker, "w");

	marker_text(text, sizeof(text));
	if (!f || fputs(text, f) < 0 || fclose(f))
		bench_die(B.marker, errno);
	sync();
}

/* ---- the three ways -------------------------------------------------- */

static bool ns_ok(void *arg, uint32_t ns)
{
	(void)arg;
	return ns == NS;
}

/* kvcached's own: kvc_tier_scan(), or kvc_tier_recover() (@recover). */
static double by_tier(struct kvc_index *idx, bool recover)
{
	struct kvc_tier_config cfg = {
		.tier = KVC_TIER_G3, .dir = B.dir, .capacity = 1ULL << 62,
		.depth = 1, .max_payload = 1, .node = TAG,
		.grace_ms = 600000, .scan_interval_ms = 600000,
		.trusted_uid = (uid_t)-1,
	};
	struct kvc_tier *t;
	struct stat st;
	double t0;
	long found;
	int ret;

	/* recover falls back to a scan without a manifest: not that. */
	if (recover && stat(B.manifest, &st))
		bench_die(B.manifest, errno);
	ret = kvc_tier_open(&t, &cfg, idx);
	if (ret)
		bench_die("kvc_tier_open", ret);
	t0 = now_s();
	found = recover ? kvc_tier_recover(t, ns_ok, NULL) :
			  kvc_tier_scan(t, ns_ok, NULL);
	t0 = now_s() - t0;
	if (found != (long)B.n)
		bench_die(recover ? "the recovery did not find every block" :
		    "the scan did not find every block",
		    found < 0 ? (int)found : EBADMSG);
	kvc_tier_close(t);
	return t0;
}

/* Apply one record: 0, or -ENOENT when its parent is not in (yet). */
static int apply(struct kvc_index *idx, struct kvc_policy *pol,
		 const struct jrec *r)
{
	union kvc_loc loc = { .u64 = r->file_size };
	uint32_t id;
	int ret;

	ret = kvc_index_insert(idx, r->ns, r->key,
			       r->flags & KVC_BF_F_FIRST ? NULL : r->parent,
			       &id);
	if (ret == -ENOENT)
		return ret;
	if (ret && ret != -EEXIST)
		bench_die("kvc_index_insert", ret);
	ret = kvc_index_set(idx, id, KVC_TIER_G3, loc);
	if (!ret)
		ret = kvc_policy_on_insert(pol, id);
	if (ret && ret != -EEXIST)
		bench_die("journal: index", ret);
	return 0;
}

/* One stat of the record's file: does it exist, as recorded? */
static bool valid(const struct jrec *r)
{
	char d[PATH_MAX], path[PATH_MAX];
	struct stat st;

	snprintf(d, sizeof(d), "%s/ns%u", B.dir, r->ns);
	if (kvc_bf_path(d, r->key, path, sizeof(path)))
		return false;
	return !stat(path, &st) && S_ISREG(st.st_mode) &&
	       (uint64_t)st.st_size == r->file_size;
}

static int cmp_parent(const struct jrec *x, uint32_t ns, const uint8_t *key)
{
	if (x->ns != ns)
		return x->ns < ns ? -1 : 1;
	return memcmp(x->parent, key, KVC_BF_KEY_SIZE);
}

static int by_parent(const void *a, const void *b)
{
	const struct jrec *y = b;

	return cmp_parent(a, y->ns, y->parent);
}

/*
 * Records logged before their parents (spills finish out of order), in
 * one pass: sorted by parent, each record is inserted once its parent is,
 * its own deferred children right after it (depth first). What is left
 * has no parent anywhere: unreachable, as for the scan. Returns how many
 * went in.
 */
static size_t apply_later(struct kvc_index *idx, struct kvc_policy *pol,
			  struct jrec *later, size_t n)
{
	size_t *stack = malloc(n * sizeof(*stack) + 1), done = 0;
	uint8_t *used = calloc(n + 1, 1);

	if (!stack || !used)
		bench_die("memory", ENOMEM);
	qsort(later, n, sizeof(*later), by_parent);
	for (size_t i = 0; i < n; i++) {
		size_t sp = 0;

		if (used[i] || apply(idx, pol, &later[i]))
			continue;
		used[i] = 1;
		stack[sp++] = i;
		while (sp) {
			const struct jrec *p = &later[stack[--sp]];
			size_t lo = 0, hi = n;

			while (lo < hi) {	/* the first child of p */
				size_t mid = lo + (hi - lo) / 2;

				if (cmp_parent(&later[mid], p->ns, p->key) < 0)
					lo = mid + 1;
				else
					hi = mid;
			}
			for (; lo < n && !cmp_parent(&later[lo], p->ns, p->key);
			     lo++) {
				if (used[lo] || apply(idx, pol, &later[lo]))
					continue;
				used[lo] = 1;
				stack[sp++] = lo;
			}
		}
	}
	for (size_t i = 0; i < n; i++)
		done += used[i];
	free(stack);
	free(used);
	return done;
}

static double by_journal(struct kvc_index *idx, bool validate)
{
	struct jrec *buf = malloc(JBUF_RECS * sizeof(*buf)), *later = NULL;
	size_t nlater = 0, caplater = 0, inserted = 0;
	struct kvc_policy *pol;
	bool torn = false;
	double t0;
	ssize_t r = 0;
	int fd, ret;

	ret = kvc_policy_create(&pol, "lru", idx, KVC_TIER_G3, 1024);
	if (ret || !buf)
		bench_die("policy", ret ? ret : ENOMEM);
	t0 = now_s();
	fd = open(B.journal, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		bench_die(B.journal, errno);
	while (!torn && (r = read(fd, buf, JBUF_RECS * sizeof(*buf))) > 0) {
		size_t n = (size_t)r / sizeof(*buf);

		/* A torn last record (a crash mid-append) ends the log. */
		torn = r % (ssize_t)sizeof(*buf) != 0;
		for (size_t i = 0; i < n && !torn; i++) {
			const struct jrec *j = &buf[i];

			if (j->magic != JREC_ADD || j->crc != jrec_crc(j)) {
				torn = true;
				break;
			}
			if (j->ns != NS || (validate && !valid(j)))
				continue;
			if (!apply(idx, pol, j)) {
				inserted++;
				continue;
			}
			if (nlater == caplater) {
				caplater = caplater ? 2 * caplater : 1024;
				later = realloc(later,
						caplater * sizeof(*later));
				if (!later)
					bench_die("memory", ENOMEM);
			}
			later[nlater++] = *j;
		}
	}
	if (r < 0)
		bench_die(B.journal, errno);
	close(fd);
	inserted += apply_later(idx, pol, later, nlater);
	t0 = now_s() - t0;
	if (inserted != B.n || kvc_index_count(idx) != B.n)
		bench_die("the journal did not give every block", EBADMSG);
	kvc_policy_destroy(pol);
	free(later);
	free(buf);
	return t0;
}

static double measure(int method)
{
	struct kvc_index *idx;
	double s;
	int ret = kvc_index_create(&idx, B.n, 0x5eed);

	if (ret)
		bench_die("kvc_index_create", ret);
	if (method == SCAN || method == RECOVER)
		s = by_tier(idx, method == RECOVER);
	else
		s = by_journal(idx, method == JOURNAL_STAT);
	kvc_index_destroy(idx);
	return s;
}

/* ---- main ------------------------------------------------------------ */

static void usage(void)
{
	fprintf(stderr, "usage: recovery_bench [-r RUNS] [-n BLOCKS] [-d DIR]"
		" [-k]\n");
	exit(2);
}

static double median(const double *v, int n)
{
	double s[64];

	memcpy(s, v, (size_t)n * sizeof(*v));
	qsort(s, (size_t)n, sizeof(*s), cmp_double);
	return s[(n - 1) / 2];
}

int main(int argc, char **argv)
{
	static double res[2][NMETHODS][64];
	char mf_tmp[PATH_MAX + 8];
	const char *given = NULL;
	bool keep = false;
	int opt, state;

	B.runs = 3;
	B.n = 1000000;
	while ((opt = getopt(argc, argv, "r:n:d:k")) != -1) {
		switch (opt) {
		case 'r':
			B.runs = atoi(optarg);
			break;
		case 'n':
			B.n = strtoull(optarg, NULL, 0);
			break;
		case 'd':
			given = optarg;
			break;
		case 'k':
			keep = true;
			break;
		default:
			usage();
		}
	}
	if (optind != argc || B.runs < 1 || B.runs > 64 || B.n < 1 ||
	    B.n > (1u << 30))
		usage();
	if (given) {
		char *abs;

		/* The tier wants an absolute path. */
		mkdir_p(given);
		abs = realpath(given, NULL);
		if (!abs || snprintf(B.dir, sizeof(B.dir), "%s", abs) >=
			    (int)sizeof(B.dir))
			bench_die(given, abs ? ENAMETOOLONG : errno);
		free(abs);
	} else if (snprintf(B.dir, sizeof(B.dir),
			    "/var/tmp/kvc-recovery-bench.XXXXXX") < 0 ||
		   !mkdtemp(B.dir)) {
		bench_die("/var/tmp", errno);
	}
	snprintf(B.nsdir, sizeof(B.nsdir), "%s/ns%d", B.dir, NS);
	snprintf(B.journal, sizeof(B.journal), "%s/journal", B.dir);
	snprintf(B.marker, sizeof(B.marker), "%s/%s", B.dir, MARKER);
	snprintf(B.manifest, sizeof(B.manifest), "%s/.manifest.%s", B.dir,
		 TAG);
	snprintf(mf_tmp, sizeof(mf_tmp), "%s.new", B.manifest);

	state = dir_state();
	if (state < 0) {
		fprintf(stderr, "recovery_bench: %s holds something other than"
			" a complete set of %zu blocks; give an empty or new"
			" directory\n", B.dir, B.n);
		return 1;
	}
	if (state == 0) {
		populate();
		finish_populate();
	} else {
		fprintf(stderr, "# reusing the %zu blocks in %s\n", B.n,
			B.dir);
	}

	printf("metric,run,scan_s,other_s,ratio,scan_blocks_s,"
	       "other_blocks_s\n");
	for (int run = 0; run < B.runs; run++) {
		for (int warm = 0; warm < 2; warm++) {
			if (warm)	/* everything read once, untimed */
				measure(SCAN);
			for (int m = 0; m < NMETHODS; m++) {
				if (!warm)
					drop_caches();
				res[warm][m][run] = measure(m);
			}
			for (int m = JOURNAL; m < NMETHODS; m++) {
				double s = res[warm][SCAN][run];
				double j = res[warm][m][run];

				printf("%s_%s,%d,%.3f,%.3f,%.2f,%.0f,%.0f\n",
				       warm ? "warm" : "cold", method_name[m],
				       run, s, j, s / j, (double)B.n / s,
				       (double)B.n / j);
			}
			fflush(stdout);
			fprintf(stderr, "# run %d %s: scan %.2f s, journal %.2f"
				" s, journal+stat %.2f s, recover %.2f s\n",
				run, warm ? "warm" : "cold",
				res[warm][SCAN][run], res[warm][JOURNAL][run],
				res[warm][JOURNAL_STAT][run],
				res[warm][RECOVER][run]);
		}
	}

	fprintf(stderr, "# medians over %d runs, %zu blocks:\n", B.runs, B.n);
	for (int warm = 0; warm < 2; warm++)
		for (int m = 0; m < NMETHODS; m++) {
			double s = median(res[warm][m], B.runs);

			fprintf(stderr, "#   %s %-13s %8.3f s %10.0f"
				" blocks/s\n", warm ? "warm" : "cold",
				method_name[m], s, (double)B.n / s);
		}
	if (B.warm_only)
		fprintf(stderr, "# the cold runs were warm: run as root\n");

	if (keep) {
		fprintf(stderr, "# kept %s (reuse: -d %s -n %zu)\n", B.dir,
			B.dir, B.n);
		return 0;
	}
	fprintf(stderr, "# removing %s\n", B.dir);
	rm_tree(B.nsdir);
	unlink(B.journal);
	unlink(B.marker);
	unlink(B.manifest);
	unlink(mf_tmp);		/* kvc_mf_rewrite()'s, if it failed */
	rmdir(B.dir);		/* if it is empty now */
	return 0;
}
