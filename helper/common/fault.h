/* SPDX-License-Identifier: GPL-2.0 */
/*
 * fault: fault injection in kvcached's tier I/O, after the kernel's
 * fault_attr (Documentation/fault-injection): named points on the I/O
 * paths of the persistent tiers, each of which can be made to fail with
 * EIO or ENOSPC, or to transfer fewer bytes than asked (a short read or
 * write), with a probability, every interval-th time, at most a number of
 * times.
 *
 * The injected result enters the code where the real one would: the
 * result of an io_uring completion (tierio.c), the return of open,
 * close, link, write, fsync or rename, with errno set; in the state
 * directory, the append of a parents journal record (parents.c) and the
 * fsync of a new namespace table (namespaces.c). So what a test with a
 * fault exercises is the daemon's handling of the real error.
 *
 * Off unless armed: kvcached arms it only from the KVCACHED_FAULT
 * environment variable, read once at start (Documentation/admin-guide/
 * kvcached-config.md). Disarmed, every point costs one load of a global
 * and a branch not taken: kvc_fault_armed is false and nothing else runs.
 *
 * Spec: entries separated by ';' (spaces around them ignored),
 *
 *   POINT=KIND[,probability=P][,interval=N][,times=N][,skip=N][,ms=N]
 *   seed=N
 *
 * KIND is eio, enospc, delay, short (only at tier_write, tier_read and
 * manifest_write) or hold (only at tier_open). delay[,ms=N] stalls the
 * daemon's one thread for N ms (default 100, at most 60000) and then
 * lets the real call go on: a slow disk or a hung server, as the loop
 * feels it. hold[,ms=N] holds the completion of a block file's open for
 * N ms while the daemon goes on serving: the read of a hard-mounted
 * share whose server is gone, as the engine feels it. A hit
 * is one pass through the point; the first skip hits pass untouched,
 * then every interval-th hit (default 1) fails with probability P
 * percent (default 100), times times at most (default: no limit). seed
 * seeds the random numbers (default 1: runs repeat).
 *
 * Single-threaded, like the daemon's I/O: one thread calls everything.
 */
#ifndef KVC_FAULT_H
#define KVC_FAULT_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <unistd.h>

#define KVC_FAULT_ENV	"KVCACHED_FAULT"

enum kvc_fault_point {
	KVC_FAULT_TIER_MKDIR,		/* spill: the fan-out directories */
	KVC_FAULT_TIER_CREATE,		/* spill: create the temp file */
	KVC_FAULT_TIER_WRITE,		/* spill: a write's completion */
	KVC_FAULT_TIER_FSYNC,		/* spill: the file's fsync */
	KVC_FAULT_TIER_CLOSE,		/* spill: close before the link */
	KVC_FAULT_TIER_LINK,		/* spill: link to the final name */
	KVC_FAULT_TIER_DIRSYNC,		/* spill: the leaf directory's fsync */
	KVC_FAULT_TIER_OPEN,		/* promote: the open's completion */
	KVC_FAULT_TIER_READ,		/* promote: a read's completion */
	KVC_FAULT_MANIFEST_WRITE,	/* a manifest record's append */
	KVC_FAULT_MANIFEST_FSYNC,	/* a manifest rewrite's fsync */
	KVC_FAULT_MANIFEST_RENAME,	/* a manifest rewrite's rename */
	KVC_FAULT_JOURNAL_WRITE,	/* a parents journal append */
	KVC_FAULT_STATE_SAVE,		/* the namespace table's rewrite */
	KVC_FAULT_NR
};

enum kvc_fault_kind {
	KVC_FAULT_NONE,
	KVC_FAULT_EIO,
	KVC_FAULT_ENOSPC,
	KVC_FAULT_SHORT,
	KVC_FAULT_DELAY,	/* never returned: kvc_fault_should() sleeps */
	KVC_FAULT_HOLD,		/* tier_open: kvc_fault_hold() */
};

/* True when any point is configured: the only thing a disarmed point reads. */
extern bool kvc_fault_armed;

/*
 * Configure from @spec, replacing any earlier configuration (NULL or ""
 * disarms). 0, or -EINVAL with a message in @why (@len bytes): then
 * nothing is armed.
 */
int kvc_fault_configure(const char *spec, char *why, size_t len);
/* Forget every point and its counters. */
void kvc_fault_reset(void);

/* The point named @name ("tier_write" ...), or -ENOENT. */
int kvc_fault_lookup(const char *name);
const char *kvc_fault_name(enum kvc_fault_point p);

/* Passes through @p and injections there, since it was configured. */
uint64_t kvc_fault_hits(enum kvc_fault_point p);
uint64_t kvc_fault_injected(enum kvc_fault_point p);
uint64_t kvc_fault_injected_total(void);

/* One hit of @p: the kind to inject now, or KVC_FAULT_NONE. */
int kvc_fault_should(enum kvc_fault_point p);

/* The kind @p is configured with (no hit): KVC_FAULT_NONE when off. */
int kvc_fault_kind(enum kvc_fault_point p);

/*
 * One hit of a hold point: how many ms to hold the completion now, or 0
 * (let it through). 0 without a hit where @p is not configured to hold.
 */
unsigned int kvc_fault_hold(enum kvc_fault_point p);

/*
 * An error-only point: 0 (go on with the real call) or the -errno to
 * return instead of calling it. A short kind is refused at configuration
 * for these points.
 */
static inline int kvc_fault_err(enum kvc_fault_point p)
{
	int k;

	if (__builtin_expect(!kvc_fault_armed, 1))
		return 0;
	k = kvc_fault_should(p);
	return k == KVC_FAULT_EIO ? -EIO : k == KVC_FAULT_ENOSPC ? -ENOSPC : 0;
}

/* As kvc_fault_err(), in the style of a system call: -1 with errno set. */
int kvc_fault_fail_sys(enum kvc_fault_point p);
static inline int kvc_fault_sys(enum kvc_fault_point p)
{
	if (__builtin_expect(!kvc_fault_armed, 1))
		return 0;
	return kvc_fault_fail_sys(p);
}

/*
 * The result @res of a transfer (a read or write completion) as the
 * fault at @p makes it: unchanged unless the transfer succeeded (res > 0)
 * and a fault fires; then -EIO, -ENOSPC, or for short, half of @res
 * rounded down to a multiple of 4096 (an O_DIRECT transfer is never cut
 * elsewhere, and the rest is then asked at an aligned offset). A transfer
 * of 4096 bytes or less is not shortened: 0 would read as end of file.
 */
long kvc_fault_xfer_slow(enum kvc_fault_point p, long res);
static inline long kvc_fault_xfer(enum kvc_fault_point p, long res)
{
	if (__builtin_expect(!kvc_fault_armed, 1) || res <= 0)
		return res;
	return kvc_fault_xfer_slow(p, res);
}

/*
 * write(2) through a point: a short fault really writes half of @n bytes
 * (at least one), so that what is left on the file is a partial write.
 */
ssize_t kvc_fault_write_slow(enum kvc_fault_point p, int fd, const void *buf,
			     size_t n);
static inline ssize_t kvc_fault_write(enum kvc_fault_point p, int fd,
				      const void *buf, size_t n)
{
	if (__builtin_expect(!kvc_fault_armed, 1))
		return write(fd, buf, n);
	return kvc_fault_write_slow(p, fd, buf, n);
}

#endif /* KVC_FAULT_H */
