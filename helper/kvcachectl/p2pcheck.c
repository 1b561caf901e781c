// SPDX-License-Identifier: GPL-2.0
/*
 * p2pcheck: the path a transfer between each provider and each NVMe
 * controller takes, and why (p2pcheck.h).
 *
 * The kernel decides per transfer (Documentation/design/p2p.md): P2P when
 * the file's disk queue takes P2PDMA pages and pci_p2pdma_distance() from
 * the provider to the controller is not negative, the bounce path
 * otherwise. This tool does not guess the distance: each provider's
 * `distances` file is the kernel's own answer. What it adds is the why,
 * read from the PCI tree and configuration:
 *  - the bridges between the two devices and their ACS P2P redirect bits
 *    (Request, Completion and Egress Control redirect send peer traffic
 *    up to the root complex, which the kernel then refuses unless the
 *    host bridge is on its list), read from each bridge's extended config
 *    space (root only: an unprivileged read stops at 64 bytes);
 *  - whether the path crosses the host bridge at all (no common switch);
 *  - NVMe native multipath: files on a multipath head (nvmeXnY over
 *    nvmeXcYnZ paths) go through the head's queue, which does not take
 *    P2PDMA pages (drivers/nvme/host/multipath.c sets no
 *    BLK_FEAT_PCI_P2PDMA), so they bounce even where the distance allows;
 *  - the IOMMU (translated or identity), the provider's BAR size, and
 *    whether kvcache.ko was built with P2PDMA at all.
 *
 * Paths are joined under a root so that the unit test can run it on a
 * tree it made; nothing here writes anything.
 */
#include "p2pcheck.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KVC_SYSFS	"/sys/class/misc/kvcache"
#define PCI_DEVS	"/sys/bus/pci/devices"
#define MAX_HOPS	32
#define CFG_MAX		4096
#define ACS_CAP_ID	0x000d
/* ACS control: P2P Request, Completion and Egress Control redirect. */
#define ACS_REDIRECT	(0x0004 | 0x0008 | 0x0020)
#define FEAT_P2P	(1ULL << 2)
#define FEAT_USER	(1ULL << 6)

struct p2pc {
	const char *root;
	FILE *out;
};

/* @rel under the root, in @buf (PATH_MAX). */
static const char *at(const struct p2pc *c, char *buf, const char *rel)
{
	snprintf(buf, PATH_MAX, "%s%s", c->root, rel);
	return buf;
}

/* The first line of a sysfs file, without its newline; false if absent. */
static bool read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	bool ok;

	if (!f)
		return false;
	ok = fgets(buf, (int)len, f) != NULL;
	fclose(f);
	if (ok)
		buf[strcspn(buf, "\n")] = '\0';
	return ok;
}

static bool read_u64(const char *path, uint64_t *v)
{
	char buf[64], *end;

	if (!read_line(path, buf, sizeof(buf)))
		return false;
	errno = 0;
	*v = strtoull(buf, &end, 0);
	return !errno && end != buf;
}

/* @src into @dst if it fits (a sysfs name always does); else unchanged. */
static void copy_name(char *dst, size_t len, const char *src)
{
	size_t n = strlen(src);

	if (n < len)
		memcpy(dst, src, n + 1);
}

/* Is @s a PCI name, DDDD:BB:DD.F? */
static bool is_pci_name(const char *s)
{
	unsigned int d, b, dev, fn;
	char tail;

	return strlen(s) == 12 &&
	       sscanf(s, "%4x:%2x:%2x.%1x%c", &d, &b, &dev, &fn, &tail) == 4;
}

/*
 * The PCI devices from the root bus down to @pci (itself last), from its
 * place in /sys/devices. Returns how many, 0 when it cannot be resolved.
 */
static int pci_path(const struct p2pc *c, const char *pci,
		    char hops[MAX_HOPS][16])
{
	char rel[PATH_MAX], p[PATH_MAX], real[PATH_MAX];
	char *save = NULL, *tok;
	int n = 0;

	snprintf(rel, sizeof(rel), PCI_DEVS "/%s", pci);
	if (!realpath(at(c, p, rel), real))
		return 0;
	for (tok = strtok_r(real, "/", &save); tok;
	     tok = strtok_r(NULL, "/", &save))
		if (is_pci_name(tok) && n < MAX_HOPS)
			copy_name(hops[n++], 16, tok);
	return n && !strcmp(hops[n - 1], pci) ? n : 0;
}

/*
 * The ACS redirect bits @pci has set: >= 0, or -1 when its extended
 * config space cannot be read (not root), -2 when it has no ACS.
 */
static int acs_redirect(const struct p2pc *c, const char *pci)
{
	char rel[PATH_MAX], p[PATH_MAX];
	uint8_t cfg[CFG_MAX];
	unsigned int off = 0x100;
	ssize_t n;
	int fd, i;

	snprintf(rel, sizeof(rel), PCI_DEVS "/%s/config", pci);
	fd = open(at(c, p, rel), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = pread(fd, cfg, sizeof(cfg), 0);
	close(fd);
	if (n < 0x104)
		return -1;
	for (i = 0; i < 64 && off >= 0x100 && off + 8 <= (size_t)n; i++) {
		uint32_t hdr = cfg[off] | cfg[off + 1] << 8 |
			       cfg[off + 2] << 16 | (uint32_t)cfg[off + 3] << 24;

		if ((hdr & 0xffff) == ACS_CAP_ID)
			return (cfg[off + 6] | cfg[off + 7] << 8) & ACS_REDIRECT;
		off = (hdr >> 20) & 0xffc;
	}
	return -2;
}

/* Size of @pci's largest memory BAR, from its `resource` file; 0 if none. */
static uint64_t largest_bar(const struct p2pc *c, const char *pci)
{
	char rel[PATH_MAX], p[PATH_MAX], line[128];
	uint64_t best = 0, start, end, flags;
	FILE *f;
	int i = 0;

	snprintf(rel, sizeof(rel), PCI_DEVS "/%s/resource", pci);
	f = fopen(at(c, p, rel), "r");
	if (!f)
		return 0;
	while (i++ < 6 && fgets(line, sizeof(line), f))
		if (sscanf(line, "%" SCNx64 " %" SCNx64 " %" SCNx64, &start,
			   &end, &flags) == 3 && (flags & 0x200) && end > start &&
		    end - start + 1 > best)
			best = end - start + 1;
	fclose(f);
	return best;
}

/*
 * The namespaces of controller @pci, as "nvme0n1 nvme0n2" in @names, and
 * whether they are reached through native multipath heads (the controller
 * has path devices nvmeXcYnZ). The controller's name goes to @ctrl.
 */
static void nvme_namespaces(const struct p2pc *c, const char *pci,
			    char *ctrl, size_t clen, char *names,
			    size_t nlen, bool *mpath)
{
	char rel[PATH_MAX], p[PATH_MAX];
	struct dirent *de;
	DIR *d;
	size_t used = 0;

	*mpath = false;
	snprintf(ctrl, clen, "?");
	names[0] = '\0';
	snprintf(rel, sizeof(rel), PCI_DEVS "/%s/nvme", pci);
	d = opendir(at(c, p, rel));
	if (!d)
		return;
	while ((de = readdir(d)))
		if (!strncmp(de->d_name, "nvme", 4))
			copy_name(ctrl, clen, de->d_name);
	closedir(d);
	snprintf(rel, sizeof(rel), "/sys/class/nvme/%s", ctrl);
	d = opendir(at(c, p, rel));
	if (!d)
		return;
	while ((de = readdir(d))) {
		unsigned int a, b, e;
		char tail;
		int n;

		if (sscanf(de->d_name, "nvme%uc%un%u%c", &a, &b, &e,
			   &tail) == 3) {
			*mpath = true;
			n = snprintf(names + used, nlen - used, "%snvme%un%u",
				     used ? " " : "", a, e);
		} else if (sscanf(de->d_name, "nvme%un%u%c", &a, &b,
				  &tail) == 2) {
			n = snprintf(names + used, nlen - used, "%s%s",
				     used ? " " : "", de->d_name);
		} else {
			continue;
		}
		if (n > 0 && (size_t)n < nlen - used)
			used += (size_t)n;
	}
	closedir(d);
}

/* The IOMMU's handling of @pci's DMA: "off", "identity", "DMA-FQ"... */
static void iommu_of(const struct p2pc *c, const char *pci, char *buf,
		     size_t len)
{
	char rel[PATH_MAX], p[PATH_MAX];

	snprintf(rel, sizeof(rel), PCI_DEVS "/%s/iommu_group/type", pci);
	if (!read_line(at(c, p, rel), buf, len))
		snprintf(buf, len, "off");
}

/* Why the kernel said no for this pair, as far as the tree tells. */
static void why_not(const struct p2pc *c, const char *prov, const char *nvme,
		    char *why, size_t len)
{
	char a[MAX_HOPS][16], b[MAX_HOPS][16];
	int na = pci_path(c, prov, a), nb = pci_path(c, nvme, b);
	int common = 0, i;

	if (!na || !nb) {
		snprintf(why, len, "the kernel refuses the pair (distance -1); "
			 "their place in the PCI tree could not be read");
		return;
	}
	while (common < na - 1 && common < nb - 1 &&
	       !strcmp(a[common], b[common]))
		common++;
	/* The bridges peer traffic crosses below the common one. */
	for (i = common; i < na - 1 + nb - 1 - common; i++) {
		const char *br = i < na - 1 ? a[i] : b[common + i - (na - 1)];
		int acs = acs_redirect(c, br);

		if (acs > 0) {
			snprintf(why, len, "ACS P2P redirect is set on bridge "
				 "%s (control bits %#x): peer traffic goes up "
				 "to the root complex, which refuses it; clear "
				 "it (pci=disable_acs_redir=%s) if the IOMMU "
				 "isolation it gives is not needed", br, acs,
				 br);
			return;
		}
	}
	if (!common) {
		snprintf(why, len, "no PCIe switch joins them: the path "
			 "crosses the host bridge, which the kernel allows "
			 "only for host bridges it knows to forward peer "
			 "traffic; put both under one switch");
		return;
	}
	snprintf(why, len, "the kernel refuses the pair (distance -1) below "
		 "%s, though no ACS redirect was seen%s", a[common - 1],
		 getuid() ? " (not root: ACS bits unread)" : "");
}

/* One provider and its NVMe pairs. */
static void check_provider(const struct p2pc *c, const char *id,
			   uint64_t feats)
{
	char rel[PATH_MAX], p[PATH_MAX], lnk[PATH_MAX], kind[32], line[128];
	char prov[16] = "?", iommu[32];
	const char *base;
	uint64_t size = 0, regions = 0;
	ssize_t n;
	FILE *f;
	int pairs = 0;

	snprintf(rel, sizeof(rel), KVC_SYSFS "/providers/%s/device", id);
	n = readlink(at(c, p, rel), lnk, sizeof(lnk) - 1);
	if (n > 0) {
		lnk[n] = '\0';
		base = strrchr(lnk, '/');
		copy_name(prov, sizeof(prov), base ? base + 1 : lnk);
	}
	snprintf(rel, sizeof(rel), KVC_SYSFS "/providers/%s/kind", id);
	if (!read_line(at(c, p, rel), kind, sizeof(kind)))
		snprintf(kind, sizeof(kind), "?");
	snprintf(rel, sizeof(rel), KVC_SYSFS "/providers/%s/regions", id);
	read_u64(at(c, p, rel), &regions);
	if (!strcmp(kind, "bar")) {
		snprintf(rel, sizeof(rel), KVC_SYSFS "/providers/%s/size", id);
		read_u64(at(c, p, rel), &size);
	} else {
		snprintf(rel, sizeof(rel), PCI_DEVS "/%s/p2pmem/size", prov);
		read_u64(at(c, p, rel), &size);
	}
	iommu_of(c, prov, iommu, sizeof(iommu));
	fprintf(c->out, "provider %s: %s %s, %" PRIu64 " MiB of P2PDMA memory "
		"(largest BAR %" PRIu64 " MiB), %" PRIu64 " regions, IOMMU %s"
		"%s\n", id, kind, prov, size >> 20, largest_bar(c, prov) >> 20,
		regions, iommu,
		(feats & FEAT_USER) ? "; user regions (KVCACHE_REGION_USER) "
		"supported" : "");

	snprintf(rel, sizeof(rel), KVC_SYSFS "/providers/%s/distances", id);
	f = fopen(at(c, p, rel), "r");
	while (f && fgets(line, sizeof(line), f)) {
		char nvme[32], ctrl[32], names[256], why[512];
		const char *verdict;
		bool mpath;
		int dist;

		if (sscanf(line, "%31s %d", nvme, &dist) != 2)
			continue;
		pairs++;
		nvme_namespaces(c, nvme, ctrl, sizeof(ctrl), names,
				sizeof(names), &mpath);
		iommu_of(c, nvme, iommu, sizeof(iommu));
		if (dist < 0) {
			verdict = "bounce";
			why_not(c, prov, nvme, why, sizeof(why));
		} else if (mpath) {
			verdict = "bounce";
			snprintf(why, sizeof(why), "P2PDMA distance %d, but "
				 "files on %s go through NVMe native multipath "
				 "heads, whose queues do not take P2PDMA pages "
				 "(nvme_core.multipath=N, or a single-controller "
				 "subsystem, gives a direct path)", dist, names);
		} else if (!strcmp(prov, nvme)) {
			verdict = "P2P";
			snprintf(why, sizeof(why), "the controller's own "
				 "memory (distance %d)", dist);
		} else {
			char a[MAX_HOPS][16], b[MAX_HOPS][16];
			int na = pci_path(c, prov, a), nb = pci_path(c, nvme,
								       b);
			int k = 0;

			while (k < na - 1 && k < nb - 1 && !strcmp(a[k], b[k]))
				k++;
			verdict = "P2P";
			snprintf(why, sizeof(why), "P2PDMA distance %d%s%s",
				 dist, k ? ", through the switch at " : "",
				 k ? a[k - 1] : "");
		}
		fprintf(c->out, "  nvme %s (%s: %s), IOMMU %s\n", nvme, ctrl,
			*names ? names : "no namespaces", iommu);
		fprintf(c->out, "verdict: %s -> %s: %s: %s\n", prov, nvme,
			verdict, why);
	}
	if (f)
		fclose(f);
	if (!pairs)
		fprintf(c->out, "  no NVMe controller in this system\n");
}

int kvc_p2pcheck(const char *root, FILE *out)
{
	struct p2pc c = { .root = root ? root : "", .out = out };
	char p[PATH_MAX], mp[16];
	struct dirent **ids = NULL;
	uint64_t feats = 0;
	int n, i, shown = 0;

	if (!read_u64(at(&c, p, KVC_SYSFS "/features"), &feats)) {
		fprintf(out, "verdict: -: impossible: kvcache.ko is not loaded "
			"(no %s)\n", KVC_SYSFS);
		return 1;
	}
	fprintf(out, "kvcache.ko: P2PDMA %s, user regions %s\n",
		(feats & FEAT_P2P) ? "built in (CONFIG_PCI_P2PDMA)" : "absent",
		(feats & FEAT_USER) ? "yes" : "no (needs Linux 6.5+)");
	if (!read_line(at(&c, p, "/sys/module/nvme_core/parameters/multipath"),
		       mp, sizeof(mp)))
		snprintf(mp, sizeof(mp), "not built");
	fprintf(out, "NVMe native multipath: %s\n", mp);
	if (!(feats & FEAT_P2P)) {
		fprintf(out, "verdict: -: impossible: this kernel has no "
			"CONFIG_PCI_P2PDMA, so no provider or region can exist; "
			"transfers use pool blocks only\n");
		return 0;
	}
	n = scandir(at(&c, p, KVC_SYSFS "/providers"), &ids, NULL, alphasort);
	for (i = 0; i < n; i++) {
		char *end;

		strtoul(ids[i]->d_name, &end, 10);
		if (*end || end == ids[i]->d_name) {
			free(ids[i]);
			continue;
		}
		check_provider(&c, ids[i]->d_name, feats);
		shown++;
		free(ids[i]);
	}
	free(ids);
	if (!shown)
		fprintf(out, "verdict: -: impossible: no provider: add a device "
			"that publishes P2PDMA memory (echo PCI_NAME > %s/"
			"providers/add) or bind the kvcache driver to a BAR\n",
			KVC_SYSFS);
	return 0;
}
