// SPDX-License-Identifier: GPL-2.0
/*
 * fault: fault injection at named points of the tier I/O (see fault.h).
 */
#include "fault.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FAULT_SPEC_MAX	4096

bool kvc_fault_armed;

struct point {
	int kind;			/* enum kvc_fault_kind; NONE: off */
	unsigned int probability;	/* percent */
	uint64_t interval;		/* every interval-th eligible hit */
	int64_t times;			/* injections left; -1: no limit */
	uint64_t skip;			/* hits let through first */
	unsigned int ms;		/* delay, hold: how long a hit lasts */
	uint64_t hits, injected;
};

static const char *const names[KVC_FAULT_NR] = {
	[KVC_FAULT_TIER_MKDIR] = "tier_mkdir",
	[KVC_FAULT_TIER_CREATE] = "tier_create",
	[KVC_FAULT_TIER_WRITE] = "tier_write",
	[KVC_FAULT_TIER_FSYNC] = "tier_fsync",
	[KVC_FAULT_TIER_CLOSE] = "tier_close",
	[KVC_FAULT_TIER_LINK] = "tier_link",
	[KVC_FAULT_TIER_DIRSYNC] = "tier_dirsync",
	[KVC_FAULT_TIER_OPEN] = "tier_open",
	[KVC_FAULT_TIER_READ] = "tier_read",
	[KVC_FAULT_MANIFEST_WRITE] = "manifest_write",
	[KVC_FAULT_MANIFEST_FSYNC] = "manifest_fsync",
	[KVC_FAULT_MANIFEST_RENAME] = "manifest_rename",
	[KVC_FAULT_JOURNAL_WRITE] = "journal_write",
	[KVC_FAULT_STATE_SAVE] = "state_save",
};

static struct point points[KVC_FAULT_NR];
static uint64_t rng = 1;

/* xorshift64*: repeatable from its seed, which is what tests want. */
static uint64_t rnd(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 2685821657736338717ULL;
}

static bool can_short(int p)
{
	return p == KVC_FAULT_TIER_WRITE || p == KVC_FAULT_TIER_READ ||
	       p == KVC_FAULT_MANIFEST_WRITE;
}

void kvc_fault_reset(void)
{
	memset(points, 0, sizeof(points));
	kvc_fault_armed = false;
	rng = 1;
}

int kvc_fault_lookup(const char *name)
{
	for (int i = 0; i < KVC_FAULT_NR; i++)
		if (!strcmp(name, names[i]))
			return i;
	return -ENOENT;
}

const char *kvc_fault_name(enum kvc_fault_point p)
{
	return (unsigned int)p < KVC_FAULT_NR ? names[p] : "?";
}

uint64_t kvc_fault_hits(enum kvc_fault_point p)
{
	return (unsigned int)p < KVC_FAULT_NR ? points[p].hits : 0;
}

uint64_t kvc_fault_injected(enum kvc_fault_point p)
{
	return (unsigned int)p < KVC_FAULT_NR ? points[p].injected : 0;
}

uint64_t kvc_fault_injected_total(void)
{
	uint64_t n = 0;

	for (int i = 0; i < KVC_FAULT_NR; i++)
		n += points[i].injected;
	return n;
}

/* A whole decimal number in [min, max], or -EINVAL. */
static int number(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

/* One entry, "point=kind,opt=val..." or "seed=N", parsed in place. */
static int entry(char *e, struct point *pts, uint64_t *seed, char *why,
		 size_t len)
{
	char *save = NULL, *tok, *eq;
	struct point p = { .probability = 100, .interval = 1, .times = -1,
			   .ms = 100 };
	uint64_t v;
	int i;

	tok = strtok_r(e, ",", &save);
	eq = tok ? strchr(tok, '=') : NULL;
	if (!eq) {
		snprintf(why, len, "fault '%s': expected POINT=KIND", e);
		return -EINVAL;
	}
	*eq = '\0';
	if (!strcmp(tok, "seed")) {
		if (number(eq + 1, 0, UINT64_MAX, &v) ||
		    strtok_r(NULL, ",", &save)) {
			snprintf(why, len, "fault seed: expected one number");
			return -EINVAL;
		}
		*seed = v ? v : 1;	/* xorshift stays at 0 forever */
		return 0;
	}
	i = kvc_fault_lookup(tok);
	if (i < 0) {
		snprintf(why, len, "fault: unknown point '%s'", tok);
		return -EINVAL;
	}
	if (!strcmp(eq + 1, "eio")) {
		p.kind = KVC_FAULT_EIO;
	} else if (!strcmp(eq + 1, "enospc")) {
		p.kind = KVC_FAULT_ENOSPC;
	} else if (!strcmp(eq + 1, "short") && can_short(i)) {
		p.kind = KVC_FAULT_SHORT;
	} else if (!strcmp(eq + 1, "delay")) {
		p.kind = KVC_FAULT_DELAY;
	} else if (!strcmp(eq + 1, "hold") && i == KVC_FAULT_TIER_OPEN) {
		p.kind = KVC_FAULT_HOLD;
	} else {
		snprintf(why, len,
			 "fault %s: unknown kind '%s' (eio, enospc, delay%s)",
			 tok, eq + 1, can_short(i) ? ", short" :
			 i == KVC_FAULT_TIER_OPEN ? ", hold" : "");
		return -EINVAL;
	}
	while ((tok = strtok_r(NULL, ",", &save))) {
		int ret = -EINVAL;

		eq = strchr(tok, '=');
		if (eq) {
			*eq++ = '\0';
			if (!strcmp(tok, "probability"))
				ret = number(eq, 0, 100, &v);
			else if (!strcmp(tok, "interval"))
				ret = number(eq, 1, UINT32_MAX, &v);
			else if (!strcmp(tok, "times"))
				ret = number(eq, 1, INT64_MAX, &v);
			else if (!strcmp(tok, "skip"))
				ret = number(eq, 0, UINT64_MAX, &v);
			else if (!strcmp(tok, "ms") &&
				 (p.kind == KVC_FAULT_DELAY ||
				  p.kind == KVC_FAULT_HOLD))
				ret = number(eq, 1, 60000, &v);
		}
		if (ret) {
			snprintf(why, len,
				 "fault %s: bad option '%s%s%s' (probability=0..100, interval=N>=1, times=N>=1, skip=N, ms=1..60000 for delay and hold)",
				 names[i], tok, eq ? "=" : "", eq ? eq : "");
			return ret;
		}
		if (!strcmp(tok, "probability"))
			p.probability = (unsigned int)v;
		else if (!strcmp(tok, "interval"))
			p.interval = v;
		else if (!strcmp(tok, "times"))
			p.times = (int64_t)v;
		else if (!strcmp(tok, "ms"))
			p.ms = (unsigned int)v;
		else
			p.skip = v;
	}
	pts[i] = p;
	return 0;
}

int kvc_fault_configure(const char *spec, char *why, size_t len)
{
	struct point pts[KVC_FAULT_NR];
	char buf[FAULT_SPEC_MAX], *save = NULL, *e;
	uint64_t seed = 1;
	bool any = false;

	kvc_fault_reset();
	if (!spec || !spec[0])
		return 0;
	if (strlen(spec) >= sizeof(buf)) {
		snprintf(why, len, "fault: spec longer than %d bytes",
			 FAULT_SPEC_MAX - 1);
		return -EINVAL;
	}
	strcpy(buf, spec);
	memset(pts, 0, sizeof(pts));
	for (e = strtok_r(buf, ";", &save); e; e = strtok_r(NULL, ";", &save)) {
		int ret;

		while (*e == ' ' || *e == '\t' || *e == '\n')
			e++;
		for (char *end = e + strlen(e); end > e &&
		     (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\n');)
			*--end = '\0';
		if (!*e)
			continue;
		ret = entry(e, pts, &seed, why, len);
		if (ret)
			return ret;
	}
	for (int i = 0; i < KVC_FAULT_NR; i++)
		any |= pts[i].kind != KVC_FAULT_NONE;
	memcpy(points, pts, sizeof(points));
	rng = seed;
	kvc_fault_armed = any;
	return 0;
}

int kvc_fault_should(enum kvc_fault_point i)
{
	struct point *p;
	uint64_t n;

	if ((unsigned int)i >= KVC_FAULT_NR)
		return KVC_FAULT_NONE;
	p = &points[i];
	if (!p->kind)
		return KVC_FAULT_NONE;
	n = ++p->hits;
	if (n <= p->skip || !p->times || (n - p->skip) % p->interval)
		return KVC_FAULT_NONE;
	if (p->probability < 100 && rnd() % 100 >= p->probability)
		return KVC_FAULT_NONE;
	if (p->times > 0)
		p->times--;
	p->injected++;
	if (p->kind == KVC_FAULT_DELAY) {
		/* A stall, then the real call: a slow disk, a hung server. */
		struct timespec ts = { p->ms / 1000,
				       (long)(p->ms % 1000) * 1000000L };

		while (nanosleep(&ts, &ts) && errno == EINTR)
			;
		return KVC_FAULT_NONE;
	}
	return p->kind;
}

int kvc_fault_kind(enum kvc_fault_point p)
{
	return (unsigned int)p < KVC_FAULT_NR ? points[p].kind :
	       KVC_FAULT_NONE;
}

unsigned int kvc_fault_hold(enum kvc_fault_point p)
{
	if (kvc_fault_kind(p) != KVC_FAULT_HOLD ||
	    kvc_fault_should(p) != KVC_FAULT_HOLD)
		return 0;
	return points[p].ms ? points[p].ms : 100;
}

int kvc_fault_fail_sys(enum kvc_fault_point p)
{
	int k = kvc_fault_should(p);

	if (k == KVC_FAULT_EIO || k == KVC_FAULT_ENOSPC) {
		errno = k == KVC_FAULT_EIO ? EIO : ENOSPC;
		return -1;
	}
	return 0;
}

long kvc_fault_xfer_slow(enum kvc_fault_point p, long res)
{
	long cut = (res / 2) & ~4095L;
	int k;

	if ((unsigned int)p >= KVC_FAULT_NR)
		return res;
	/* Nothing to cut: not a hit (0 bytes would mean end of file). */
	if (points[p].kind == KVC_FAULT_SHORT && !cut)
		return res;
	k = kvc_fault_should(p);
	if (k == KVC_FAULT_EIO)
		return -EIO;
	if (k == KVC_FAULT_ENOSPC)
		return -ENOSPC;
	return k == KVC_FAULT_SHORT ? cut : res;
}

ssize_t kvc_fault_write_slow(enum kvc_fault_point p, int fd, const void *buf,
			     size_t n)
{
	int k = n ? kvc_fault_should(p) : KVC_FAULT_NONE;

	if (k == KVC_FAULT_EIO || k == KVC_FAULT_ENOSPC) {
		errno = k == KVC_FAULT_EIO ? EIO : ENOSPC;
		return -1;
	}
	if (k == KVC_FAULT_SHORT)
		n = n / 2 ? n / 2 : 1;
	return write(fd, buf, n);
}
