// SPDX-License-Identifier: GPL-2.0
/*
 * ioctl fuzzer for /dev/kvcache, meant for the test VM, whose kernel has
 * KASAN, lockdep and kmemleak: scripts/vm turns any report into exit
 * status 120, so a run "passes" only when the kernel stayed silent too.
 *
 * What it throws at the module, from FUZZ_THREADS threads at once:
 *  - every ioctl of uapi/linux/kvcache.h (0x00..0x0E) with arguments that
 *    are random in a structured way: the struct's size field exact, too
 *    small, too big with a zero or a non-zero tail, or past
 *    KVCACHE_STRUCT_MAX; reserved, flag and output fields non-zero; batch
 *    counts 0, 1, max, max + 1 and huge; handles valid, stale, out of range
 *    or garbage; user pointers NULL, unmapped, kernel addresses, misaligned,
 *    read-only (for what the kernel writes back), or inside pages another
 *    thread is replacing or unmapping at that moment;
 *  - command numbers of the wrong type, number, direction or size bits;
 *  - races: shared files are closed and replaced (dup, reopen) while other
 *    threads call through them, block mappings are published to other
 *    threads and unmapped under their loads and stores, pool views (good
 *    and malformed) are mapped and touched while blocks are pinned,
 *    unpinned and evicted under them, namespaces are
 *    destroyed and recreated under allocations, the helper role moves
 *    between files that get closed, asynchronous transfers are left
 *    in flight when their file goes, and fork()ed children (some of them
 *    unprivileged) inherit the files and mappings, fuzz, and are SIGKILLed
 *    mid-flight.
 *
 * It is bounded: KVC_FUZZ_CALLS ioctls in all (default 600000), under a
 * wall-clock cap of KVC_FUZZ_SECONDS (default 600). Reaching the cap first
 * is a failure, so "at least N calls" is checked, not hoped for. With
 * KVC_FUZZ_CALLS=0 it runs by time alone, until the cap (make fuzz-ioctl).
 * Cheap calls dominate the mix, and the expensive system calls under TCG
 * (mmap, munmap, fork: milliseconds each, under mmap_lock) are paced.
 *
 * Afterwards every fuzz file is closed and the pool must be at rest: no
 * writable block, no pin but the canaries', no region left, every sealed
 * block evictable. The canaries are blocks sealed, pinned and mapped by a
 * file of their own before the fuzzing starts; the fuzz threads know their
 * handles and attack them, and they must come out byte for byte intact.
 *
 * KVC_FUZZ_SEED repeats a run's random choices (thread scheduling still
 * differs). A table of results per ioctl (ok, then each errno) is printed
 * as TAP comments.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <x86intrin.h>

#include "kselftest_harness.h"
#include "kvc_ioctl.h"
#include "rand.h"
#include "kvc_p2p.h"
#include "kvc_sysfs.h"

#define FUZZ_THREADS	8
#define SHARED_FDS	4	/* fd slots every thread uses and replaces */
#define MAP_SLOTS	16	/* block mappings published to all threads */
#define VIEW_SLOTS	4	/* pool views published to all threads */
#define CANARIES	4
#define HANDLES		64	/* handles a thread remembers */
#define XIDS		16	/* async batches a thread remembers */
#define REGIONS		8	/* region handles a thread remembers */
#define UMAP_SIZE	(256 << 10)	/* the CMB mapped for user regions */
#define CANARY_NS	64999
#define FUZZ_NS		65000	/* FUZZ_NS .. FUZZ_NS + FUZZ_NSES - 1 */
#define FUZZ_NSES	4
#define XFILE_SIZE	(1 << 20)
#define ENTRY_ROOM	(KVCACHE_MAX_BATCH + 1)

/* Result table rows: one per ioctl number, then the rest. */
enum { ROW_FOREIGN = 15, ROW_MMAP, ROWS };
#define ERRS		136	/* errno values counted one by one; above: last */

static const char *const row_name[ROWS] = {
	"INFO", "ALLOC", "SEAL", "PIN", "UNPIN", "EVICT", "QUERY",
	"NS_CREATE", "NS_DESTROY", "HELPER", "REGION_REGISTER",
	"REGION_UNREGISTER", "XFER", "XFER_REAP", "DISCARD", "other commands",
	"mmap",
};

/* What every thread shares. */
static struct {
	uint64_t bs, nr_blocks;
	int prov;			/* the fake GPU's provider id, or -1 */
	uint64_t prov_size;
	int cmb;			/* the NVMe CMB's provider id, or -1 */
	uint8_t *umap;			/* UMAP_SIZE of the CMB, mapped here */
	int xfd;			/* a data file for transfers */
	int efd;			/* an eventfd for async transfers */
	int keep[2];			/* files the fuzzers must not use */
	_Atomic int fds[SHARED_FDS];
	_Atomic uintptr_t maps[MAP_SLOTS];
	_Atomic uintptr_t views[VIEW_SLOTS];
	struct kvcache_handle canary[CANARIES];
	uint8_t *guard;			/* a PROT_NONE page */
	uint8_t *ro;			/* a read-only page of zeros */
	uint8_t *vol;			/* a page the mapper keeps replacing */
	_Atomic long calls;		/* ioctls of the fuzz threads */
	_Atomic int stop;
	long target;
	struct timespec deadline;
	_Atomic long *child_calls;	/* shared with the children */
	long forks;			/* children forked */
	int fork_errno;			/* why the last fork failed */
} g;

struct fuzzer {
	pthread_t thread;
	uint64_t rng;
	int pfd;			/* this thread's own file */
	int child;			/* a forked child: never counts */
	struct kvcache_handle h[HANDLES];
	uint32_t nh;
	uint64_t xid[XIDS];
	uint32_t xcount[XIDS];
	uint32_t nx;
	uint32_t region[REGIONS];
	uint32_t nregions;
	uint8_t *arg;			/* 2 pages, then g.guard-like guard */
	uint8_t *ent;			/* room for ENTRY_ROOM xfer entries + guard */
	size_t ent_len;
	uint8_t *roarg;			/* read-only: a struct per row, see do_ioctl */
	uint32_t ro_ready;		/* rows whose read-only struct is there */
	sigjmp_buf jb;
	volatile sig_atomic_t armed;
	long calls, maps;
	long res[ROWS][ERRS + 1];
	uint64_t ticks[ROWS], worst[ROWS];	/* time in each kind of call */
};

static __thread struct fuzzer *cur;

static uint64_t rnd(struct fuzzer *f)
{
	f->rng ^= f->rng << 13;
	f->rng ^= f->rng >> 7;
	f->rng ^= f->rng << 17;
	return f->rng;
}

static int one_in(struct fuzzer *f, unsigned int n)
{
	return rnd(f) % n == 0;
}

/* Loads and stores through pointers that may be gone: SIGSEGV is expected. */
static void on_fault(int sig, siginfo_t *si, void *uc)
{
	if (cur && cur->armed) {
		cur->armed = 0;
		siglongjmp(cur->jb, 1);
	}
	signal(sig, SIG_DFL);	/* not ours: fault again, for real */
}

/*
 * Touch a byte that may be unmapped, read-only or replaced at any moment.
 * The store is an atomic add of zero: if the address now belongs to some
 * other mapping of this process (it was unmapped and reused), the contents
 * stay as they were and no concurrent update is lost.
 */
static void touch(struct fuzzer *f, volatile uint8_t *p, int write)
{
	if (sigsetjmp(f->jb, 1))
		return;
	f->armed = 1;
	if (write)
		__atomic_fetch_add(p, 0, __ATOMIC_RELAXED);
	else
		(void)*p;
	f->armed = 0;
}

/* Fill a fresh mapping, which may be a file's past its end (SIGBUS). */
static void scribble(struct fuzzer *f, uint8_t *p, size_t len, int c)
{
	if (sigsetjmp(f->jb, 1))
		return;
	f->armed = 1;
	memset(p, c, len);
	f->armed = 0;
}

static void *map_anon(size_t len, int prot)
{
	void *p = mmap(NULL, len, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/*
 * An area of @len bytes followed by a PROT_NONE page: a mapping, not a
 * hole, which a later mmap() (another buffer, a thread's stack) could
 * fill, and then receive what the kernel writes past the end of the area.
 */
static uint8_t *guarded(size_t len)
{
	uint8_t *p = map_anon(len + 4096, PROT_READ | PROT_WRITE);

	if (p && mprotect(p + len, 4096, PROT_NONE)) {
		munmap(p, len + 4096);
		p = NULL;
	}
	return p;
}

/* ---- structured random values ------------------------------------------ */

/* A file to call: mostly our own or a shared one, sometimes junk. */
static int pick_fd(struct fuzzer *f)
{
	uint64_t r = rnd(f) % 32;

	if (r < 14)
		return f->pfd;
	if (r < 30)
		return atomic_load(&g.fds[r % SHARED_FDS]);
	if (r == 30)
		return -1;
	/*
	 * Any number: closed, reused, not ours. Only ioctl and mmap use it,
	 * never close. The control and canary files are off limits: the
	 * canaries' own file may legitimately unpin and then evict them.
	 */
	r = rnd(f) % 64;
	return r == (uint64_t)g.keep[0] || r == (uint64_t)g.keep[1] ? -1 :
	       (int)r;
}

static struct kvcache_handle pick_handle(struct fuzzer *f)
{
	struct kvcache_handle h = { 0 };
	uint64_t r = rnd(f);

	switch (r % 16) {
	case 0: case 1: case 2: case 3: case 4: case 5: case 6:
		if (f->nh) {
			h = f->h[(r >> 8) % f->nh];
			break;
		}
		/* fall through */
	case 7:
		h.index = (uint32_t)((r >> 8) % g.nr_blocks);
		h.gen = (uint32_t)((r >> 40) % 4);
		break;
	case 8:
		if (f->nh) {	/* stale: the generation before or after */
			h = f->h[(r >> 8) % f->nh];
			h.gen += (r & 0x100) ? 1 : -1;
			break;
		}
		/* fall through */
	case 9:
	case 10:		/* the canaries: must resist */
		h = g.canary[(r >> 8) % CANARIES];
		if (r & 0x10000)
			h.gen++;
		break;
	case 11:
		h.index = (uint32_t)(g.nr_blocks + (r >> 8) % 2);
		break;
	case 12:
		h.index = UINT32_MAX - (uint32_t)((r >> 8) % 2);
		h.gen = (uint32_t)(r >> 32);
		break;
	default:
		h.index = (uint32_t)(r >> 8);
		h.gen = (uint32_t)(r >> 40);
		break;
	}
	return h;
}

static void remember(struct fuzzer *f, const struct kvcache_handle *h,
		     uint32_t n)
{
	for (uint32_t i = 0; i < n && i < HANDLES; i++)
		f->h[f->nh < HANDLES ? f->nh++ : rnd(f) % HANDLES] = h[i];
}

/* A batch count: mostly small, sometimes at and past the limits. */
static uint32_t pick_count(struct fuzzer *f)
{
	uint64_t r = rnd(f);

	switch (r % 32) {
	case 0:
		return 0;
	case 1:
		return KVCACHE_MAX_BATCH;
	case 2:
		return KVCACHE_MAX_BATCH + 1;
	case 3:
		return (r & 0x100) ? UINT32_MAX : (uint32_t)(r >> 32);
	case 4:
		return 1 + (uint32_t)((r >> 8) % KVCACHE_MAX_BATCH);
	default:
		return 1 + (uint32_t)((r >> 8) % 4);
	}
}

/*
 * A namespace id: invalid ones, the canaries', or one of the fuzzers'. A
 * random id that happens to be valid becomes one of the fuzzers', so no
 * namespace is created or destroyed that the end of the test does not
 * know about (the tests after this one run on the same module).
 */
static uint32_t pick_ns(struct fuzzer *f)
{
	uint64_t r = rnd(f);
	uint32_t id;

	switch (r % 16) {
	case 0:
		return 0;
	case 1:
		return KVCACHE_NS_MAX + 1 + (uint32_t)((r >> 8) % 2);
	case 2:
		id = (uint32_t)(r >> 32);
		if (id > KVCACHE_NS_MAX)
			return id;
		break;
	case 3:
		return CANARY_NS;
	}
	return FUZZ_NS + (uint32_t)((r >> 8) % FUZZ_NSES);
}

/*
 * A user pointer for a buffer of @len bytes whose good copy is @good.
 * @out: the kernel writes there; then only addresses that can never be
 * some other object of this process are used (a page another thread
 * unmaps could be reused by any mmap, such as a thread's stack).
 */
static uint64_t pick_ptr(struct fuzzer *f, void *good, size_t len, int out)
{
	uint64_t r = rnd(f);
	uintptr_t m;

	switch (r % 32) {
	case 0:
		return 0;
	case 1:
		return 0xffffffff81000000ULL;		/* kernel text */
	case 2:
		return 0xffff888000000000ULL + ((r >> 8) & 0xfff000);
	case 3:
		return (uintptr_t)g.guard;		/* unmapped */
	case 4:
		return (uintptr_t)good + 1 + (r >> 8) % 7;	/* misaligned */
	case 5:
		return (uintptr_t)g.ro;			/* read-only */
	case 6:
		return (uintptr_t)g.vol;		/* being replaced */
	case 7:
		/* Someone's block mapping, perhaps being unmapped now. */
		m = atomic_load(&g.maps[(r >> 8) % MAP_SLOTS]);
		if (m && !out)
			return m + ((r >> 16) % 64) * 8;
		return (uintptr_t)good;
	case 8:
		return 0x8000000000000000ULL;		/* not canonical */
	case 9:
		return 16;
	case 10:
		/* Runs into the guard page of the entry area. */
		if (len < f->ent_len)
			return (uintptr_t)f->ent + f->ent_len - len / 2;
		return (uintptr_t)good;
	default:
		return (uintptr_t)good;
	}
}

/*
 * The size field of a struct of @full bytes (first published size @ver1),
 * and the bytes after the struct: a tail of zeros, or one non-zero byte,
 * which the kernel must refuse (-E2BIG) without reading past the size.
 */
static uint32_t pick_size(struct fuzzer *f, uint8_t *s, uint32_t ver1,
			  uint32_t full)
{
	uint64_t r = rnd(f);
	uint32_t size;

	switch (r % 16) {
	case 0:
		return ver1;
	case 1:
		return (uint32_t)((r >> 8) % ver1);		/* too small */
	case 2:
		return full + 8 * (1 + (uint32_t)((r >> 8) % 16));	/* zero tail */
	case 3:
		size = full + 1 + (uint32_t)((r >> 8) %
					     (KVCACHE_STRUCT_MAX - full));
		s[full + (r >> 32) % (size - full)] = (uint8_t)(1 | r >> 24);
		return size;
	case 4:
		return KVCACHE_STRUCT_MAX + 1 + (uint32_t)((r >> 8) % 2);
	case 5:
		return (r & 0x100) ? UINT32_MAX : (uint32_t)(r >> 32);
	case 6:
		return KVCACHE_STRUCT_MAX;
	default:
		return full;
	}
}

/* ---- one ioctl -------------------------------------------------------- */

/*
 * Put the struct @s (size field already chosen) where the call will find
 * it, call, and count the result under @row. Most calls use a normal
 * buffer; some put the struct against the end of mapped memory, in a
 * read-only page (the kernel's write-back fails after the work is done)
 * or at a bad address.
 */
static int do_ioctl(struct fuzzer *f, int fd, unsigned long cmd, int row,
		    void *s, uint32_t len)
{
	uint64_t r = rnd(f);
	uint8_t *where = f->arg;
	uint32_t size = *(uint32_t *)s;
	uint64_t t;
	int ret, e;

	/* The whole struct as the size field claims it, tail included. */
	if (size > len)
		len = size < KVCACHE_STRUCT_MAX + 64 ? size :
		      KVCACHE_STRUCT_MAX + 64;
	switch (r % 64) {
	case 0:
		where = NULL;
		break;
	case 1:
		where = (uint8_t *)0xffffffff81000000ULL;
		break;
	case 2:
		where = g.guard;
		break;
	case 3:
	case 4:
		/* Flush against the guard page: the tail is not there. */
		where = f->arg + 2 * 4096 - (len < 64 ? len : 64 +
				(r >> 8) % (len - 63));
		memcpy(where, s, f->arg + 2 * 4096 - where);
		break;
	case 5:
		/*
		 * A struct in read-only memory: the kernel does the work,
		 * then cannot write the result back. mprotect() costs
		 * milliseconds under TCG, so each row's struct is stored
		 * once, the first time one of the exact size comes by, and
		 * used again from then on.
		 */
		if (!(f->ro_ready & 1u << row) && size == len && size <= 256 &&
		    !mprotect(f->roarg, 4096, PROT_READ | PROT_WRITE)) {
			memcpy(f->roarg + 256 * row, s, size);
			mprotect(f->roarg, 4096, PROT_READ);
			f->ro_ready |= 1u << row;
		}
		if (f->ro_ready & 1u << row)
			where = f->roarg + 256 * row;
		break;
	case 6:
		where = g.vol;	/* may be there or not */
		break;
	default:
		memcpy(where, s, len);
		break;
	}
	t = __rdtsc();
	ret = ioctl(fd, cmd, where);
	e = ret < 0 ? errno : 0;
	t = __rdtsc() - t;
	f->ticks[row] += t;
	if (t > f->worst[row])
		f->worst[row] = t;
	if (where == f->arg)
		memcpy(s, where, len);	/* outputs */
	f->res[row][e > ERRS ? ERRS : e]++;
	f->calls++;
	if (!f->child)
		atomic_fetch_add_explicit(&g.calls, 1, memory_order_relaxed);
	else if (g.child_calls)
		atomic_fetch_add_explicit(g.child_calls, 1,
					  memory_order_relaxed);
	return e ? -e : 0;
}

/* No field to keep (spoil_but()). */
#define KEEP_NONE	UINT32_MAX

/*
 * Some non-zero byte in [from, to) of the struct: reserved, flags,
 * outputs; never one of the 8 bytes at @keep, the user pointer the
 * kernel writes results through. pick_ptr() chose that one so that the
 * kernel's writes land nowhere but in memory of its own: one byte
 * changed would move it anywhere within a few GiB, onto a thread's stack
 * or the test harness's shared pages (whose corruption once killed the
 * harness's parent after both tests had passed).
 */
static void spoil_but(struct fuzzer *f, uint8_t *s, uint32_t from,
		      uint32_t to, uint32_t keep)
{
	uint32_t at;

	if (!one_in(f, 12))
		return;
	at = from + (uint32_t)(rnd(f) % (to - from));
	if (keep != KEEP_NONE && at >= keep && at < keep + 8)
		return;
	s[at] = (uint8_t)(1 | rnd(f));
}

static void spoil(struct fuzzer *f, uint8_t *s, uint32_t from, uint32_t to)
{
	spoil_but(f, s, from, to, KEEP_NONE);
}

union args {
	struct kvcache_info info;
	struct kvcache_alloc alloc;
	struct kvcache_batch batch;
	struct kvcache_query query;
	struct kvcache_ns ns;
	struct kvcache_helper helper;
	struct kvcache_region region;
	struct kvcache_xfer xfer;
	struct kvcache_xfer_reap reap;
	uint8_t bytes[KVCACHE_STRUCT_MAX + 64];
};

#define SIZED(f, u, field, ver1)					\
	((u)->field.size = pick_size(f, (u)->bytes, ver1, sizeof((u)->field)))

static void op_info(struct fuzzer *f, union args *u)
{
	SIZED(f, u, info, KVCACHE_INFO_SIZE_VER1);
	spoil(f, u->bytes, 4, sizeof(u->info));
	do_ioctl(f, pick_fd(f), KVCACHE_IOC_INFO, 0, u, sizeof(u->info) + 64);
}

static void op_alloc(struct fuzzer *f, union args *u)
{
	struct kvcache_handle *h = (struct kvcache_handle *)f->ent;
	uint32_t n = pick_count(f);
	int fd = pick_fd(f);

	u->alloc.ns_id = pick_ns(f);
	u->alloc.count = n;
	u->alloc.handles = pick_ptr(f, h, (size_t)n * sizeof(*h), 1);
	SIZED(f, u, alloc, KVCACHE_ALLOC_SIZE_VER1);
	spoil_but(f, u->bytes, 4, sizeof(u->alloc),
		  offsetof(struct kvcache_alloc, handles));
	if (!do_ioctl(f, fd, KVCACHE_IOC_ALLOC, 1, u, sizeof(u->alloc)) &&
	    fd == f->pfd && u->alloc.handles == (uintptr_t)h)
		remember(f, h, n);
}

static void op_batch(struct fuzzer *f, union args *u, unsigned long cmd)
{
	int seal = cmd == KVCACHE_IOC_SEAL;
	size_t esize = seal ? sizeof(struct kvcache_seal_entry) :
			      sizeof(struct kvcache_handle);
	uint32_t n = pick_count(f), i;

	for (i = 0; i < n && i < 8; i++) {
		if (seal) {
			struct kvcache_seal_entry *e =
				(struct kvcache_seal_entry *)f->ent + i;
			uint64_t r = rnd(f);

			e->handle = pick_handle(f);
			e->payload_len = (r & 3) ? 1 + (uint32_t)((r >> 8) % g.bs) :
					 (r & 4) ? (uint32_t)g.bs + (uint32_t)(r >> 60) :
					 (uint32_t)(r >> 32) % 2;
			e->reserved = one_in(f, 32);
			memset(e->key, (int)r, sizeof(e->key));
		} else {
			((struct kvcache_handle *)f->ent)[i] = pick_handle(f);
		}
	}
	u->batch.count = n;
	u->batch.flags = one_in(f, 2) ? 0 : one_in(f, 2) ?
			 KVCACHE_SEAL_KEEP_PIN : (uint32_t)rnd(f);
	u->batch.entries = pick_ptr(f, f->ent, (size_t)n * esize, 0);
	SIZED(f, u, batch, KVCACHE_BATCH_SIZE_VER1);
	spoil(f, u->bytes, 12, sizeof(u->batch));
	do_ioctl(f, pick_fd(f), cmd, (int)_IOC_NR(cmd), u, sizeof(u->batch));
}

static void op_query(struct fuzzer *f, union args *u)
{
	uint32_t n = pick_count(f);
	uint64_t r = rnd(f);

	u->query.start = (r & 3) ? (uint32_t)((r >> 8) % g.nr_blocks) :
			 (r & 4) ? (uint32_t)g.nr_blocks : (uint32_t)(r >> 32);
	u->query.count = n;
	u->query.ns_id = one_in(f, 2) ? KVCACHE_NS_ANY : pick_ns(f);
	u->query.entries = pick_ptr(f, f->ent,
				    (size_t)n * sizeof(struct kvcache_block_info), 1);
	SIZED(f, u, query, KVCACHE_QUERY_SIZE_VER1);
	spoil_but(f, u->bytes, 16, sizeof(u->query),
		  offsetof(struct kvcache_query, entries));
	do_ioctl(f, pick_fd(f), KVCACHE_IOC_QUERY, 6, u, sizeof(u->query));
}

static void op_ns(struct fuzzer *f, union args *u, int create)
{
	uint64_t r = rnd(f);

	u->ns.ns_id = pick_ns(f);
	if (create) {
		u->ns.uid = (r & 3) ? 0 : (r & 4) ? UINT32_MAX : (uint32_t)(r >> 32);
		u->ns.gid = (r & 0x30) ? 0 : (r & 0x40) ? UINT32_MAX : 65534;
		u->ns.mode = (r & 0x300) ? (uint32_t)(r >> 12) % 01000 :
			     (uint32_t)(r >> 12);
	}
	SIZED(f, u, ns, KVCACHE_NS_SIZE_VER1);
	spoil(f, u->bytes, 4, sizeof(u->ns));
	do_ioctl(f, pick_fd(f), create ? KVCACHE_IOC_NS_CREATE :
		 KVCACHE_IOC_NS_DESTROY, create ? 7 : 8, u, sizeof(u->ns));
}

static void op_helper(struct fuzzer *f, union args *u)
{
	SIZED(f, u, helper, KVCACHE_HELPER_SIZE_VER1);
	spoil(f, u->bytes, 4, sizeof(u->helper));
	do_ioctl(f, pick_fd(f), KVCACHE_IOC_HELPER, 9, u, sizeof(u->helper));
}

/*
 * KVCACHE_REGION_USER: a range of this process, the CMB's P2PDMA mapping
 * (valid with the CMB's provider, -EXDEV with the fake GPU's) or memory
 * that is not P2PDMA (the heap, a page being replaced, a PROT_NONE page,
 * a kernel address), whole or overrunning, aligned or not.
 */
static void user_region(struct fuzzer *f, union args *u)
{
	uint64_t r = rnd(f);

	u->region.flags = KVCACHE_REGION_USER;
	if (g.cmb >= 0 && (r & 3))
		u->region.provider = (uint32_t)g.cmb;
	u->region.length = (1 + (r >> 8) % 8) * 4096;
	switch ((r >> 16) % 8) {
	case 0:
		u->region.offset = (uintptr_t)f->ent & ~4095UL;
		break;
	case 1:
		u->region.offset = (uintptr_t)g.vol;
		break;
	case 2:
		u->region.offset = (uintptr_t)g.guard;
		break;
	case 3:
		u->region.offset = 0xffff888000000000ULL +
				   ((r >> 24) % 1024) * 4096;
		break;
	case 4:
		u->region.length = UMAP_SIZE + 4096;	/* overruns it */
		__attribute__((fallthrough));
	default:
		u->region.offset = (uintptr_t)g.umap +
				   ((r >> 24) % (UMAP_SIZE / 4096 - 8)) * 4096;
		break;
	}
	if (one_in(f, 16))
		u->region.offset += 1 + (r >> 40) % 4095;
}

static void op_region(struct fuzzer *f, union args *u, int reg)
{
	uint64_t r = rnd(f);
	int fd = pick_fd(f);

	if (reg) {
		u->region.provider = (g.prov >= 0 && (r & 3)) ?
				     (uint32_t)g.prov : (uint32_t)(r >> 8) % 4;
		if (r & 0x10000)
			u->region.provider = (uint32_t)(r >> 32);
		/* Small regions near each other: overlaps are frequent. */
		u->region.offset = ((r >> 20) % 64) * 4096;
		u->region.length = (1 + (r >> 28) % 8) * 4096;
		if (one_in(f, 4))
			user_region(f, u);
		else switch ((r >> 40) % 16) {
		case 0:
			u->region.offset += 1 + (r >> 48) % 4095;
			break;
		case 1:
			u->region.length = (r >> 48) % 2 ? 0 : 4095;
			break;
		case 2:
			u->region.length = UINT64_MAX & ~4095ULL;
			break;
		case 3:
			u->region.offset = g.prov_size - 4096 *
					   ((r >> 48) % 2);
			break;
		case 4:
			u->region.offset = UINT64_MAX & ~4095ULL;
			break;
		}
	} else {
		u->region.handle = f->nregions && (r & 3) ?
				   f->region[(r >> 8) % f->nregions] :
				   (uint32_t)((r >> 8) % 64);
	}
	SIZED(f, u, region, KVCACHE_REGION_SIZE_VER1);
	spoil(f, u->bytes, 4, sizeof(u->region));
	if (!do_ioctl(f, fd, reg ? KVCACHE_IOC_REGION_REGISTER :
		      KVCACHE_IOC_REGION_UNREGISTER, reg ? 10 : 11, u,
		      sizeof(u->region)) && reg && fd == f->pfd) {
		f->region[f->nregions < REGIONS ? f->nregions++ :
			  rnd(f) % REGIONS] = u->region.handle;
	}
}

static void op_xfer(struct fuzzer *f, union args *u)
{
	struct kvcache_xfer_entry *e = (struct kvcache_xfer_entry *)f->ent;
	uint32_t n = pick_count(f), i;
	int async = one_in(f, 2), fd = pick_fd(f);

	for (i = 0; i < n && i < 4; i++) {
		uint64_t r = rnd(f);

		memset(&e[i], 0, sizeof(e[i]));
		e[i].fd = (r & 3) ? g.xfd : (r & 4) ? -1 :
			  (r & 8) ? g.efd : f->pfd;
		e[i].flags = (uint32_t)(r >> 8) & 7;
		if (one_in(f, 16))
			e[i].flags |= (uint32_t)rnd(f);
		e[i].file_offset = ((r >> 12) % (XFILE_SIZE / 512 + 2)) * 512;
		e[i].length = 512 * (1 + (r >> 24) % 16);
		if (one_in(f, 16))
			e[i].length = (r & 0x20) ? 0 : (r & 0x40) ?
				      KVCACHE_XFER_MAX_LEN + 512 : 100;
		if (one_in(f, 16))
			e[i].file_offset += 1;
		e[i].offset = (r >> 32) % 3 ? 0 : ((r >> 34) % 16) * 512 +
			      (r >> 40) % 2;
		if (e[i].flags & KVCACHE_XFER_BLOCK)
			e[i].block = pick_handle(f);
		else
			e[i].region = f->nregions && (r >> 44) % 4 ?
				      f->region[(r >> 46) % f->nregions] :
				      (uint32_t)((r >> 46) % 64);
		if (one_in(f, 24))
			((uint8_t *)&e[i])[rnd(f) % sizeof(e[i])] = 0xff;
	}
	/*
	 * The rest of a long batch: zero entries, refused one by one. Not
	 * leftovers of other calls: a random fd, offset and length could
	 * write gigabytes into a file of the guest's tmpfs.
	 */
	if (n > i)
		memset(&e[i], 0, (size_t)((n < ENTRY_ROOM ? n : ENTRY_ROOM) - i) *
		       sizeof(*e));
	u->xfer.flags = async ? KVCACHE_XFER_ASYNC : 0;
	if (one_in(f, 16))
		u->xfer.flags = (uint32_t)rnd(f);
	u->xfer.count = n;
	u->xfer.eventfd = async ? (one_in(f, 2) ? g.efd : -1) :
			  (one_in(f, 2) ? -1 : 0);
	if (one_in(f, 16))
		u->xfer.eventfd = (int32_t)(rnd(f) % 80) - 2;
	u->xfer.entries = pick_ptr(f, e, (size_t)n * sizeof(*e),
				   !async);	/* sync writes results back */
	SIZED(f, u, xfer, KVCACHE_XFER_SIZE_VER1);
	spoil_but(f, u->bytes, 4, sizeof(u->xfer), async ? KEEP_NONE :
		  offsetof(struct kvcache_xfer, entries));
	if (!do_ioctl(f, fd, KVCACHE_IOC_XFER, 12, u, sizeof(u->xfer)) &&
	    async && fd == f->pfd && f->nx < XIDS) {
		f->xid[f->nx] = u->xfer.id;
		f->xcount[f->nx++] = n;
	}
}

static void op_reap(struct fuzzer *f, union args *u)
{
	uint64_t r = rnd(f);
	uint32_t k = f->nx ? (uint32_t)((r >> 8) % f->nx) : 0;
	int known = f->nx && (r & 3), fd = known ? f->pfd : pick_fd(f);

	u->reap.id = known ? f->xid[k] : (r >> 16) % 8;
	u->reap.count = known && (r & 4) ? f->xcount[k] : pick_count(f);
	/* Wait only for a batch of our own, whose entries are small. */
	u->reap.flags = known && (r & 0x30) == 0 ? 0 : KVCACHE_REAP_NOWAIT;
	u->reap.entries = pick_ptr(f, f->ent, (size_t)u->reap.count *
				   sizeof(struct kvcache_xfer_entry), 1);
	SIZED(f, u, reap, KVCACHE_XFER_REAP_SIZE_VER1);
	spoil_but(f, u->bytes, 4, sizeof(u->reap),
		  offsetof(struct kvcache_xfer_reap, entries));
	if (!do_ioctl(f, fd, KVCACHE_IOC_XFER_REAP, 13, u, sizeof(u->reap)) &&
	    known) {
		f->xid[k] = f->xid[--f->nx];
		f->xcount[k] = f->xcount[f->nx];
	}
}

/* Command numbers that are not quite ours. */
static void op_foreign(struct fuzzer *f, union args *u)
{
	uint64_t r = rnd(f);
	unsigned long cmd;
	uint32_t type;

	switch (r % 5) {
	case 0:		/* our type, a number past the last */
		cmd = _IOWR(KVCACHE_IOC_MAGIC, 0x0F + (r >> 8) % 241,
			    struct kvcache_info);
		break;
	case 1:		/* a real number, other size bits (ignored) */
		cmd = _IOC(_IOC_READ | _IOC_WRITE, KVCACHE_IOC_MAGIC,
			   (r >> 8) % 15, (r >> 16) % (1 << _IOC_SIZEBITS));
		break;
	case 2:		/* a real number, another direction */
		cmd = _IOC((r >> 8) % 3, KVCACHE_IOC_MAGIC, (r >> 16) % 15,
			   (r >> 24) % 128);
		break;
	default:
		/*
		 * Another type, on a kvcache file only (on a tty or a tmpfs
		 * file it would reach their ioctls). Not those the VFS serves
		 * for any file before the driver sees them ('X': freeze,
		 * FICLONE's 0x94, 'f'): they would act on /dev's file system.
		 */
		type = (uint32_t)(r >> 8) & 0xff;
		if (type == 'X' || type == 0x94 || type == 'f' ||
		    type == KVCACHE_IOC_MAGIC)
			type = 0x01;
		cmd = _IOC((r >> 16) % 4, type, (r >> 24) % 256,
			   (r >> 32) % (1 << _IOC_SIZEBITS));
		break;
	}
	/* A plausible size first, random bytes after. */
	u->info.size = (uint32_t)pick_size(f, u->bytes, 32, 64);
	for (uint32_t i = 4; i < 128; i += 8)
		if (one_in(f, 4))
			memcpy(u->bytes + i, &(uint64_t){ rnd(f) }, 8);
	/*
	 * Never a user address where a pointer could be (an aligned word):
	 * the kernel may write through it, as in spoil_but(). Such a word
	 * gets bit 63, non-canonical.
	 */
	for (uint32_t i = 8; i < 128; i += 8) {
		uint64_t v;

		memcpy(&v, u->bytes + i, 8);
		if (v >= 4096 && v < 1ULL << 47) {
			v |= 1ULL << 63;
			memcpy(u->bytes + i, &v, 8);
		}
	}
	do_ioctl(f, (r & 0x80) ? f->pfd : atomic_load(&g.fds[r % SHARED_FDS]),
		 cmd, ROW_FOREIGN, u, 128);
}

/*
 * Map a block, use it, publish it to the other threads, and unmap the
 * mapping it replaces (which other threads may be touching right now).
 */
static void op_mmap(struct fuzzer *f)
{
	struct kvcache_handle h = pick_handle(f);
	uint64_t r = rnd(f);
	int prot = (r & 1) ? PROT_READ : PROT_READ | PROT_WRITE;
	uint64_t len = (r & 0x30) ? g.bs : (r & 0x40) ? 2 * g.bs : 4096;
	off_t off = (off_t)((uint64_t)h.index * g.bs) + ((r & 0x780) ? 0 : 4096);
	int fd = (r & 0x800) ? f->pfd : pick_fd(f);
	int flags = (r & 0xf000) ? MAP_SHARED : MAP_PRIVATE;
	uintptr_t old;
	uint64_t t;
	uint8_t *p;
	int e;

	t = __rdtsc();
	p = mmap(NULL, len, prot, flags, fd, off);
	e = p == MAP_FAILED ? errno : 0;
	t = __rdtsc() - t;
	f->ticks[ROW_MMAP] += t;
	if (t > f->worst[ROW_MMAP])
		f->worst[ROW_MMAP] = t;
	f->res[ROW_MMAP][e > ERRS ? ERRS : e]++;
	f->maps++;
	if (p == MAP_FAILED)
		return;
	if (prot & PROT_WRITE)
		scribble(f, p + (rnd(f) % (len / 64)) * 64, 64, (int)r);
	else
		touch(f, p + rnd(f) % len, 0);
	if (one_in(f, 4))
		madvise(p, len, MADV_DOFORK);	/* children inherit it */
	if (len != g.bs || one_in(f, 4)) {
		munmap(p, len);
		return;
	}
	old = atomic_exchange(&g.maps[rnd(f) % MAP_SLOTS], (uintptr_t)p);
	if (old)
		munmap((void *)old, g.bs);
}

/*
 * Map the pool view (KVCACHE_VIEW_OFFSET), or get it wrong: another
 * length or offset, writable, private. A good one is published for the
 * others to touch (whatever blocks their files pin or evict meanwhile)
 * and the one it replaces is unmapped under them.
 */
static void op_view(struct fuzzer *f)
{
	uint64_t r = rnd(f), len = g.bs * g.nr_blocks;
	off_t off = (off_t)KVCACHE_VIEW_OFFSET;
	int prot = PROT_READ, flags = MAP_SHARED;
	int fd = (r & 1) ? f->pfd : pick_fd(f);
	uintptr_t old;
	uint8_t *p;
	int e;

	switch ((r >> 8) % 8) {
	case 0:
		len -= g.bs;
		break;
	case 1:
		off += (off_t)g.bs;
		break;
	case 2:
		prot |= PROT_WRITE;
		break;
	case 3:
		flags = MAP_PRIVATE;
		break;
	}
	p = mmap(NULL, len, prot, flags, fd, off);
	e = p == MAP_FAILED ? errno : 0;
	f->res[ROW_MMAP][e > ERRS ? ERRS : e]++;
	f->maps++;
	if (p == MAP_FAILED)
		return;
	touch(f, p + rnd(f) % len, 0);
	if (one_in(f, 4))
		madvise(p, len, MADV_DOFORK);
	if (len != g.bs * g.nr_blocks || one_in(f, 4)) {
		munmap(p, len);
		return;
	}
	old = atomic_exchange(&g.views[rnd(f) % VIEW_SLOTS], (uintptr_t)p);
	if (old)
		munmap((void *)old, len);
}

/* Loads and stores through someone's published mapping or view. */
static void op_touch(struct fuzzer *f)
{
	uint64_t r = rnd(f);
	uintptr_t m = atomic_load(&g.maps[r % MAP_SLOTS]);
	uintptr_t v = atomic_load(&g.views[(r >> 4) % VIEW_SLOTS]);

	if (m)
		touch(f, (volatile uint8_t *)(m + (r >> 8) % g.bs), (r >> 60) & 1);
	if (v)
		touch(f, (volatile uint8_t *)(v + (r >> 8) % (g.bs * g.nr_blocks)),
		      (r >> 62) & 1);
	touch(f, g.vol + (r >> 16) % 4096, (r >> 61) & 1);
}

/* Replace a shared file: closed while other threads are inside calls on it. */
static void op_fd_churn(struct fuzzer *f)
{
	uint64_t r = rnd(f);
	int slot = (int)(r % SHARED_FDS), nfd, old;

	if (r & 0x100)
		nfd = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	else if (r & 0x200)
		nfd = fcntl(f->pfd, F_DUPFD_CLOEXEC, 0);
	else
		nfd = fcntl(atomic_load(&g.fds[(slot + 1) % SHARED_FDS]),
			    F_DUPFD_CLOEXEC, 0);
	if (nfd < 0)
		nfd = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (nfd < 0)
		return;
	old = atomic_exchange(&g.fds[slot], nfd);
	if (old >= 0)
		close(old);
}

/* Drop everything this thread's own file holds, by closing it. */
static void op_reopen(struct fuzzer *f)
{
	int nfd = open(KVCACHE_DEVICE_PATH,
		       (one_in(f, 8) ? O_RDONLY : O_RDWR) | O_CLOEXEC);

	if (nfd < 0)
		return;
	if (f->pfd >= 0)
		close(f->pfd);
	f->pfd = nfd;
	f->nh = f->nx = f->nregions = 0;
}

/*
 * The mix. Measured in the VM (TCG, KASAN, two CPUs, nine threads), a
 * refused call costs a few hundred microseconds, an ALLOC that succeeds
 * or an XFER that moves data ten times more (zeroing 2 MiB, direct I/O):
 * the cheap calls, refused early for their size, pointers, flags or
 * handles, make most of the mix, so a million calls fit in the time, and
 * every path that does work still runs thousands of times.
 */
static void one_op(struct fuzzer *f)
{
	union args u;
	uint64_t r = rnd(f) % 128;

	memset(&u, 0, sizeof(u));
	if (r < 30)
		op_info(f, &u);
	else if (r < 34)
		op_alloc(f, &u);
	else if (r < 39)
		op_batch(f, &u, KVCACHE_IOC_SEAL);
	else if (r < 47)
		op_batch(f, &u, KVCACHE_IOC_PIN);
	else if (r < 55)
		op_batch(f, &u, KVCACHE_IOC_UNPIN);
	else if (r < 59)
		op_batch(f, &u, KVCACHE_IOC_EVICT);
	else if (r < 62)
		op_query(f, &u);
	else if (r < 66)
		op_ns(f, &u, 1);
	else if (r < 70)
		op_ns(f, &u, 0);
	else if (r < 73)
		op_helper(f, &u);
	else if (r < 77)
		op_region(f, &u, 1);
	else if (r < 80)
		op_region(f, &u, 0);
	else if (r < 83)
		op_xfer(f, &u);
	else if (r < 86)
		op_reap(f, &u);
	else if (r < 89)
		op_batch(f, &u, KVCACHE_IOC_DISCARD);
	else if (r < 122)
		op_foreign(f, &u);
	else if (r < 124)
		op_touch(f);
	else if (r < 125 && one_in(f, 4))
		op_fd_churn(f);
	else if (r < 126 && one_in(f, 64))
		op_reopen(f);
	else
		op_info(f, &u);
}

static int time_up(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > g.deadline.tv_sec ||
	       (now.tv_sec == g.deadline.tv_sec &&
		now.tv_nsec >= g.deadline.tv_nsec);
}

static void *fuzz_thread(void *arg)
{
	struct fuzzer *f = arg;
	long i;

	cur = f;
	for (i = 0; !atomic_load(&g.stop); i++) {
		one_op(f);
		if (!(i & 63) && ((g.target && atomic_load(&g.calls) >=
				   g.target) || time_up()))
			atomic_store(&g.stop, 1);
	}
	return NULL;
}

/*
 * The mapper: the address-space churn. Under TCG with KASAN an mmap() or
 * munmap() costs milliseconds and takes mmap_lock for writing, so one
 * thread does all of it while the others call ioctls: it maps blocks
 * (its own writable ones, sealed ones it pinned, the canaries, garbage),
 * publishes them for the others to load from and store to, unmaps the
 * ones it replaces under them, and keeps replacing g.vol, mapped or not,
 * never leaving a hole another mmap could fill. Between those it fuzzes
 * like the others.
 */
static void *mapper_thread(void *arg)
{
	struct fuzzer *f = arg;
	int n = 0;

	cur = f;
	while (!atomic_load(&g.stop)) {
		if (one_in(f, 4))
			op_view(f);
		else
			op_mmap(f);
		mmap(g.vol, 4096, (n++ & 1) ? PROT_NONE : PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		for (int i = 0; i < 16; i++)
			one_op(f);
		if (one_in(f, 64))
			op_reopen(f);
		/*
		 * Paced: mmap_lock held for writing stalls every ioctl of the
		 * others that faults on a bad pointer.
		 */
		usleep(10000);
	}
	return NULL;
}

/*
 * Memory of the fuzz threads is MADV_DONTFORK: a fork() write-protects
 * every private page it copies, and each of the threads' next writes to
 * them would be a copy-on-write fault, milliseconds under TCG, all taken
 * under mmap_lock. The children bring their own (see fork_child()).
 */
static void *thread_mem(size_t len, int dontfork)
{
	void *p = map_anon(len, PROT_READ | PROT_WRITE);

	if (p && dontfork)
		madvise(p, len, MADV_DONTFORK);
	return p;
}

static int setup_fuzzer(struct fuzzer *f, uint64_t seed, int i, int dontfork)
{
	memset(f, 0, sizeof(*f));
	f->rng = (seed | 1) * KVC_GOLDEN_GAMMA * (uint64_t)(i + 1) | 1;
	f->pfd = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	f->arg = guarded(2 * 4096);
	f->ent_len = ENTRY_ROOM * sizeof(struct kvcache_xfer_entry);
	f->ent_len = (f->ent_len + 4095) & ~4095UL;
	f->ent = guarded(f->ent_len);
	f->roarg = map_anon(4096, PROT_READ);
	if (!f->arg || !f->ent || !f->roarg || f->pfd < 0)
		return -1;
	if (dontfork) {
		madvise(f->arg, 2 * 4096, MADV_DONTFORK);
		madvise(f->ent, f->ent_len, MADV_DONTFORK);
		madvise(f->roarg, 4096, MADV_DONTFORK);
	}
	return 0;
}

/*
 * A child that inherits every file and any MADV_DOFORK mapping, fuzzes on
 * them (as an unprivileged user one time in three) and is SIGKILLed.
 * @f is a fuzzer prepared before fork: the child allocates nothing, as
 * another thread may have held the allocator's lock at the fork.
 */
static void fork_child(struct fuzzer *f, int round)
{
	pid_t pid;

	f->rng ^= (uint64_t)round * 0x2545f4914f6cdd1dULL;
	pid = fork();
	if (pid < 0) {
		g.fork_errno = errno;
		return;
	}
	g.forks++;
	if (pid == 0) {
		struct timespec t0, now;

		cur = f;
		f->child = 1;
		if (round % 3 == 0 && setresgid(65534, 65534, 65534) == 0)
			(void)!setresuid(65534, 65534, 65534);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (long i = 0;; i++) {
			one_op(f);
			clock_gettime(CLOCK_MONOTONIC, &now);
			if (now.tv_sec - t0.tv_sec > 10)	/* never killed? */
				_exit(3);
		}
	}
	/*
	 * Long enough to get through its first copy-on-write faults (tens
	 * of milliseconds each under TCG) while nine threads compete for two
	 * CPUs, and make calls of its own.
	 */
	usleep(500000 + rnd(f) % 1500000);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/*
 * The table: per kind of call, how many, their mean and worst time (TSC
 * ticks scaled by @tps, ticks per second), then ok and each errno.
 */
static void report(struct fuzzer *f, int n, double tps)
{
	for (int row = 0; row < ROWS; row++) {
		uint64_t ticks = 0, worst = 0;
		char line[2048];
		long total = 0;
		int len;

		for (int i = 0; i < n; i++) {
			for (int e = 0; e <= ERRS; e++)
				total += f[i].res[row][e];
			ticks += f[i].ticks[row];
			if (f[i].worst[row] > worst)
				worst = f[i].worst[row];
		}
		len = snprintf(line, sizeof(line),
			       "# %-17s %8ld, mean %6.0f us, worst %6.0f ms:",
			       row_name[row], total, total ?
			       (double)ticks / total / tps * 1e6 : 0.0,
			       (double)worst / tps * 1e3);
		for (int e = 0; e <= ERRS && len < (int)sizeof(line) - 40; e++) {
			long c = 0;

			for (int i = 0; i < n; i++)
				c += f[i].res[row][e];
			if (!c)
				continue;
			len += snprintf(line + len, sizeof(line) - len, " %s %ld",
					!e ? "ok" : e == ERRS ? "other" :
					strerrorname_np(e) ?: "?", c);
		}
		printf("%s\n", line);
	}
	fflush(stdout);
}

/* A sysfs gauge once it has settled (files release in the background). */
static uint64_t settled(const char *attr, uint64_t want)
{
	uint64_t v = kvc_attr_u64(attr);

	/* Up to 60 s: a slow machine (TCG, a loaded host) takes its time. */
	for (int i = 0; i < 600 && v != want; i++) {
		usleep(100000);
		v = kvc_attr_u64(attr);
	}
	return v;
}

static int open_xfer_file(void)
{
	const char *dir = getenv("TMPDIR") ?: "/tmp";
	char path[256];
	uint8_t buf[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/kvc-fuzz-%d", dir, getpid());
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	for (size_t off = 0; off < XFILE_SIZE; off += sizeof(buf)) {
		memset(buf, (int)(off >> 12), sizeof(buf));
		if (pwrite(fd, buf, sizeof(buf), (off_t)off) != sizeof(buf))
			break;
	}
	close(fd);
	/* Transfers need O_DIRECT; without it they fail (-EINVAL), also fine. */
	fd = open(path, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (fd < 0)
		fd = open(path, O_RDWR | O_CLOEXEC);
	unlink(path);
	return fd;
}

#define UNPRIV_NS	64998	/* the unprivileged fuzzer's namespace */

/*
 * Leave the device as a case found it, whatever the case did or where
 * it stopped: every sealed block evicted, every namespace of these cases
 * gone. Without it, one failed case would leave blocks and namespaces
 * behind and fail every later case and suite for a reason of its own.
 * Only fd may still be open.
 */
static void scrub(int fd)
{
	struct kvcache_block_info bi[64];

	settled("stats/open_files", 1);
	for (int round = 0; round < 1024; round++) {
		struct kvcache_query q = {
			.size = sizeof(q), .count = 64,
			.entries = (uintptr_t)bi,
		};
		uint32_t evicted = 0;

		if (kvc_ioc(fd, KVCACHE_IOC_QUERY, &q) || !q.count)
			break;
		for (uint32_t i = 0; i < q.count; i++)
			evicted += !kvc_evict(fd, bi[i].handle);
		if (!evicted)
			break;	/* pinned by something else: nothing to do */
	}
	kvc_ns(fd, 0, CANARY_NS, 0, 0, 0);
	kvc_ns(fd, 0, UNPRIV_NS, 0, 0, 0);
	for (int i = 0; i < FUZZ_NSES; i++)
		kvc_ns(fd, 0, FUZZ_NS + i, 0, 0, 0);
}

FIXTURE(fuzz) {
	int fd;		/* control: namespaces, final checks */
	int cfd;	/* the canaries' own file */
	uint8_t *cmap[CANARIES];
	uint8_t *want[CANARIES];
};

FIXTURE_SETUP(fuzz)
{
	struct sigaction sa = { .sa_sigaction = on_fault,
				.sa_flags = SA_SIGINFO | SA_NODEFER };
	char gpu[64], nvme[64];

	self->fd = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->fd);
	scrub(self->fd);	/* what an earlier, failed run left */
	self->cfd = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->cfd);
	g.keep[0] = self->fd;
	g.keep[1] = self->cfd;
	g.bs = kvc_block_size(self->fd);
	g.nr_blocks = kvc_attr_u64("pool/nr_blocks");
	ASSERT_NE(0, g.bs);
	ASSERT_LT(CANARIES + 16, g.nr_blocks);
	ASSERT_EQ(0, sigaction(SIGSEGV, &sa, NULL));
	ASSERT_EQ(0, sigaction(SIGBUS, &sa, NULL));

	/* The fake GPU, when this VM has one: region calls then succeed. */
	g.prov = -1;
	if (!find_pci(0x1af4, 0x1110, 0, gpu, sizeof(gpu)))
		g.prov = bind_gpu(gpu);
	g.prov_size = g.prov >= 0 ? provider_u64(g.prov, "size") : 64 << 20;
	TH_LOG("fake GPU provider %d", g.prov);
	/* The NVMe's CMB mapped here, for user regions. */
	g.cmb = -1;
	g.umap = NULL;
	if (!find_pci(0, 0, 0x010802, nvme, sizeof(nvme))) {
		int r = write_str(PROVIDERS "/add", nvme);

		if (r == 0 || r == -EEXIST)
			g.cmb = provider_of(nvme);
		g.umap = map_p2pmem(nvme, NULL, UMAP_SIZE);
		if (g.umap == MAP_FAILED)
			g.umap = NULL;
	}
	TH_LOG("CMB provider %d, mapped: %s", g.cmb, g.umap ? "yes" : "no");

	g.xfd = open_xfer_file();
	ASSERT_LE(0, g.xfd);
	g.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	ASSERT_LE(0, g.efd);

	ASSERT_EQ(0, kvc_ns(self->fd, 1, CANARY_NS, 0, 0, 0700));
	for (int i = 0; i < FUZZ_NSES; i++) {
		int ret = kvc_ns(self->fd, 1, FUZZ_NS + i, 0, 0, 0700);

		ASSERT_TRUE(ret == 0 || ret == -EEXIST);
	}

	/* Canaries: random bytes, sealed, pinned and mapped by cfd. */
	ASSERT_EQ(0, kvc_alloc(self->cfd, CANARY_NS, CANARIES, g.canary));
	for (int i = 0; i < CANARIES; i++) {
		uint8_t *p = kvc_map(self->cfd, g.canary[i].index, g.bs,
				     PROT_READ | PROT_WRITE);

		ASSERT_NE(NULL, p);
		self->want[i] = map_anon(g.bs, PROT_READ | PROT_WRITE);
		ASSERT_NE(NULL, self->want[i]);
		for (uint64_t off = 0; off < g.bs; off += 8) {
			uint64_t v = ((uint64_t)i << 56) ^ off ^
				     0x6b7663616e617279ULL;

			memcpy(self->want[i] + off, &v, 8);
		}
		memcpy(p, self->want[i], g.bs);
		munmap(p, g.bs);
		ASSERT_EQ(0, kvc_seal(self->cfd, g.canary[i], (uint32_t)g.bs,
				      (uint8_t)(0xc0 + i),
				      KVCACHE_SEAL_KEEP_PIN));
		self->cmap[i] = kvc_map(self->cfd, g.canary[i].index, g.bs,
					PROT_READ);
		ASSERT_NE(NULL, self->cmap[i]);
		/* The reference itself out of reach of any stray write. */
		ASSERT_EQ(0, mprotect(self->want[i], g.bs, PROT_READ));
	}
}

FIXTURE_TEARDOWN(fuzz)
{
	if (self->cfd >= 0)
		close(self->cfd);
	scrub(self->fd);
	close(self->fd);
	if (g.umap)
		munmap(g.umap, UMAP_SIZE);
}

/* Offset of the first byte that differs, -1 if none; prints the spot. */
static long first_diff(const uint8_t *got, const uint8_t *want)
{
	uint64_t off, n = 0, first = UINT64_MAX;

	for (off = 0; off < g.bs; off++)
		if (got[off] != want[off] && !n++)
			first = off;
	if (!n)
		return -1;
	printf("# %llu bytes differ, the first at %llu:", (unsigned long long)n,
	       (unsigned long long)first);
	for (off = first; off < first + 16 && off < g.bs; off++)
		printf(" %02x/%02x", got[off], want[off]);
	printf("\n");
	return (long)first;
}

static long env_long(const char *name, long def)
{
	const char *v = getenv(name);

	return v && *v ? atol(v) : def;
}

/*
 * KVC_FUZZ_SECONDS bounds the run; the harness's own timeout only has to
 * be longer than any cap a long run asks for (scripts/vm --timeout bounds
 * the VM).
 */
TEST_F_TIMEOUT(fuzz, ioctls_threads_forks_closes_munmaps, 3600 * 24)
{
	const char *seed_env = getenv("KVC_FUZZ_SEED");
	uint64_t seed = seed_env ? strtoull(seed_env, NULL, 0) :
				   (uint64_t)time(NULL) ^ (uint64_t)getpid();
	long seconds = env_long("KVC_FUZZ_SECONDS", 600);
	static struct fuzzer *f, child;
	pthread_attr_t attr;
	size_t stack = 1 << 20;
	struct kvcache_block_info bi[64];
	struct timespec t0, t1;
	long calls = 0, maps = 0, rounds = 0, progress = 0;
	uint64_t tsc0;
	double secs;
	int i, n;

	g.target = env_long("KVC_FUZZ_CALLS", 600000);
	TH_LOG("seed %#llx (KVC_FUZZ_SEED repeats it), %ld calls, cap %ld s",
	       (unsigned long long)seed, g.target, seconds);
	g.child_calls = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, g.child_calls);
	g.guard = map_anon(4096, PROT_NONE);
	g.ro = map_anon(4096, PROT_READ);
	/*
	 * g.vol between two unmapped pages: the kernel writes arrays there
	 * that are longer than the page, and must hit a guard, not whatever
	 * the next mapping holds.
	 */
	g.vol = map_anon(3 * 4096, PROT_NONE);
	ASSERT_TRUE(g.guard && g.ro && g.vol);
	g.vol += 4096;
	ASSERT_EQ(0, mprotect(g.vol, 4096, PROT_READ | PROT_WRITE));
	for (i = 0; i < SHARED_FDS; i++) {
		g.fds[i] = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
		ASSERT_LE(0, g.fds[i]);
	}
	f = thread_mem((FUZZ_THREADS + 1) * sizeof(*f), 1);
	ASSERT_NE(NULL, f);
	for (i = 0; i <= FUZZ_THREADS; i++)
		ASSERT_EQ(0, setup_fuzzer(&f[i], seed, i, 1));
	ASSERT_EQ(0, setup_fuzzer(&child, seed, FUZZ_THREADS + 1, 0));
	ASSERT_EQ(0, pthread_attr_init(&attr));

	clock_gettime(CLOCK_MONOTONIC, &t0);
	tsc0 = __rdtsc();
	g.deadline = t0;
	g.deadline.tv_sec += seconds;
	for (i = 0; i <= FUZZ_THREADS; i++) {
		/*
		 * Not MADV_DONTFORK: each thread's descriptor lives in its
		 * stack, and glibc walks all of them in the child of a fork.
		 */
		void *st = thread_mem(stack, 0);

		ASSERT_NE(NULL, st);
		ASSERT_EQ(0, pthread_attr_setstack(&attr, st, stack));
		ASSERT_EQ(0, pthread_create(&f[i].thread, &attr,
					    i < FUZZ_THREADS ? fuzz_thread :
					    mapper_thread, &f[i]));
	}
	/*
	 * Meanwhile: children that inherit everything and get SIGKILLed. A
	 * fork costs a few hundred milliseconds under TCG, with mmap_lock
	 * held: one every second or two.
	 */
	while (!atomic_load(&g.stop)) {
		fork_child(&child, (int)rounds++);
		usleep(500000 + rnd(&child) % 1000000);
		if (time_up())
			atomic_store(&g.stop, 1);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (t1.tv_sec - t0.tv_sec >= 10 * (progress + 1)) {
			progress = (t1.tv_sec - t0.tv_sec) / 10;
			printf("# %ld s: %ld calls\n", (long)(t1.tv_sec - t0.tv_sec),
			       atomic_load(&g.calls));
			fflush(stdout);
		}
	}
	for (i = 0; i <= FUZZ_THREADS; i++) {
		pthread_join(f[i].thread, NULL);
		calls += f[i].calls;
		maps += f[i].maps;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	secs = (double)(t1.tv_sec - t0.tv_sec) +
	       (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;

	printf("# %ld ioctls in %.1f s (%.0f/s) from %d threads and the "
	       "mapper, %ld mmaps; %ld of %ld children forked (last failure: "
	       "%s) and killed mid-flight made %ld more\n", calls, secs,
	       (double)calls / secs, FUZZ_THREADS, maps, g.forks, rounds,
	       g.fork_errno ? strerror(g.fork_errno) : "none",
	       atomic_load(g.child_calls));
	report(f, FUZZ_THREADS + 1, (double)(__rdtsc() - tsc0) / secs);
	EXPECT_LE(g.target, calls) {
		TH_LOG("the %ld s cap came before %ld calls", seconds,
		       g.target);
	}
	EXPECT_LT(0, calls);

	/* Every fuzz file and mapping goes. */
	for (i = 0; i < MAP_SLOTS; i++)
		if (g.maps[i])
			munmap((void *)g.maps[i], g.bs);
	for (i = 0; i < VIEW_SLOTS; i++)
		if (g.views[i])
			munmap((void *)g.views[i], g.bs * g.nr_blocks);
	for (i = 0; i < SHARED_FDS; i++)
		close(g.fds[i]);
	for (i = 0; i <= FUZZ_THREADS; i++)
		close(f[i].pfd);
	close(child.pfd);
	close(g.xfd);
	close(g.efd);

	/* At rest: only the canaries pinned, no writable block, no region. */
	EXPECT_EQ(2, settled("stats/open_files", 2));
	EXPECT_EQ(0, settled("pool/writable_blocks", 0));
	EXPECT_EQ(CANARIES, settled("pool/pinned_blocks", CANARIES));
	if (g.prov >= 0)
		EXPECT_EQ(0, provider_u64(g.prov, "regions"));

	/* The canaries: same handles, same key and length, same bytes. */
	for (i = 0; i < CANARIES; i++) {
		struct kvcache_query q = {
			.size = sizeof(q), .start = g.canary[i].index,
			.count = 1, .entries = (uintptr_t)bi,
		};
		uint8_t key[KVCACHE_KEY_SIZE];
		uint8_t *p;

		EXPECT_EQ(-1, first_diff(self->cmap[i], self->want[i])) {
			TH_LOG("canary %d (block %u) changed", i,
			       g.canary[i].index);
		}
		ASSERT_EQ(0, kvc_ioc(self->fd, KVCACHE_IOC_QUERY, &q));
		ASSERT_EQ(1, q.count);
		EXPECT_EQ(g.canary[i].index, bi[0].handle.index);
		EXPECT_EQ(g.canary[i].gen, bi[0].handle.gen);
		EXPECT_EQ(CANARY_NS, bi[0].ns_id);
		EXPECT_EQ(g.bs, bi[0].payload_len);
		memset(key, 0xc0 + i, sizeof(key));
		EXPECT_EQ(0, memcmp(key, bi[0].key, sizeof(key)));
		/* A fresh pin and mapping see the same bytes. */
		ASSERT_EQ(0, kvc_pin(self->fd, g.canary[i]));
		p = kvc_map(self->fd, g.canary[i].index, g.bs, PROT_READ);
		ASSERT_NE(NULL, p);
		EXPECT_EQ(-1, first_diff(p, self->want[i]));
		munmap(p, g.bs);
		EXPECT_EQ(0, kvc_unpin(self->fd, g.canary[i]));
		munmap(self->cmap[i], g.bs);
		munmap(self->want[i], g.bs);
	}
	close(self->cfd);
	self->cfd = -1;
	EXPECT_EQ(0, settled("pool/pinned_blocks", 0));

	/* Every sealed block, the fuzzers' and the canaries', evictable. */
	for (;;) {
		struct kvcache_query q = {
			.size = sizeof(q), .count = 64,
			.entries = (uintptr_t)bi,
		};

		ASSERT_EQ(0, kvc_ioc(self->fd, KVCACHE_IOC_QUERY, &q));
		n = (int)q.count;
		if (!n)
			break;
		for (i = 0; i < n; i++)
			ASSERT_EQ(0, kvc_evict(self->fd, bi[i].handle));
	}
	EXPECT_EQ(g.nr_blocks, settled("pool/free_blocks", g.nr_blocks));

	/* Namespaces: empty now, so each one left goes; none is stuck. */
	EXPECT_EQ(0, kvc_ns(self->fd, 0, CANARY_NS, 0, 0, 0));
	for (i = 0; i < FUZZ_NSES; i++) {
		int ret = kvc_ns(self->fd, 0, FUZZ_NS + i, 0, 0, 0);

		EXPECT_TRUE(ret == 0 || ret == -ENOENT);
	}
}

/* ---- an unprivileged tenant's asynchronous batches ---------------------- */

#define UNPRIV_ID	65533	/* uid and gid of the unprivileged fuzzer */
/* UNPRIV_NS (above): its own namespace, UNPRIV_ID's, 0700 */
#define UNPRIV_BLOCKS	4	/* its own sealed blocks */
#define UFILES		2	/* its O_DIRECT files */
#define UFILE_SIZE	(8 << 20)
#define UINFLIGHT	8	/* async batches it keeps in flight */
#define CANARY_WORD	0x6b7663616e617279ULL	/* the canaries' pattern */

/* What the unprivileged child reports, in memory shared with the test. */
struct unpriv_report {
	long batches, entries;		/* submitted */
	long canary, exact, exact_eacces;	/* entries naming a canary */
	long own_ok;			/* its own blocks out: the control */
	long moved;			/* canary entries that moved a byte */
	long hits;			/* canary words found in its files */
	char why[256];
	char odd[256];			/* the first exact entry not EACCES */
};

static uint64_t urnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* One random entry: mostly the attack on a canary, some of its own. */
static void unpriv_entry(struct kvcache_xfer_entry *e, uint64_t *rng,
			 const int *ufd, const struct kvcache_handle *own)
{
	uint64_t r = urnd(rng);

	memset(e, 0, sizeof(*e));
	e->fd = ufd[(r >> 4) % UFILES];
	e->flags = KVCACHE_XFER_BLOCK | ((r & 1) ? KVCACHE_XFER_TO_FILE : 0);
	e->file_offset = ((r >> 8) % (UFILE_SIZE / g.bs)) * g.bs;
	e->length = g.bs;
	switch ((r >> 16) % 8) {
	case 0:	/* its own block: this works, so the others mean something */
		e->block = own[(r >> 20) % UNPRIV_BLOCKS];
		e->flags = KVCACHE_XFER_BLOCK | KVCACHE_XFER_TO_FILE;
		return;
	case 1:	/* a canary, a generation off */
		e->block = g.canary[(r >> 20) % CANARIES];
		e->block.gen += 1 + (r >> 24) % 3;
		break;
	case 2:	/* part of a canary */
		e->block = g.canary[(r >> 20) % CANARIES];
		e->offset = ((r >> 24) % (g.bs / 4096)) * 4096;
		e->length = 4096 * (1 + (r >> 40) % 4);
		if (e->offset + e->length > g.bs)
			e->length = g.bs - e->offset;
		break;
	case 3:	/* any block at all */
		e->block.index = (uint32_t)((r >> 20) % g.nr_blocks);
		e->block.gen = (uint32_t)((r >> 44) % 4);
		break;
	default: /* the canary, whole, by its real handle */
		e->block = g.canary[(r >> 20) % CANARIES];
		break;
	}
}

static int is_own(const struct kvcache_handle *own, struct kvcache_handle h)
{
	for (int i = 0; i < UNPRIV_BLOCKS; i++)
		if (own[i].index == h.index && own[i].gen == h.gen)
			return 1;
	return 0;
}

/* Judge a batch's entries once they came back. */
static void unpriv_judge(struct unpriv_report *rep,
			 const struct kvcache_xfer_entry *e, uint32_t n,
			 const struct kvcache_handle *own)
{
	for (uint32_t i = 0; i < n; i++) {
		int exact = 0;

		if (is_own(own, e[i].block)) {
			rep->own_ok += e[i].result == (int64_t)g.bs;
			continue;
		}
		rep->canary++;
		for (int k = 0; k < CANARIES; k++)
			exact |= e[i].block.index == g.canary[k].index &&
				 e[i].block.gen == g.canary[k].gen &&
				 !e[i].offset && e[i].length == g.bs;
		if (exact) {
			rep->exact++;
			rep->exact_eacces += e[i].result == -EACCES;
			if (e[i].result != -EACCES && !rep->odd[0])
				snprintf(rep->odd, sizeof(rep->odd),
					 "block {%u, %u} %s fd %d at %llu: "
					 "%lld", e[i].block.index,
					 e[i].block.gen,
					 e[i].flags & KVCACHE_XFER_TO_FILE ?
					 "->" : "<-", e[i].fd,
					 (unsigned long long)e[i].file_offset,
					 (long long)e[i].result);
		}
		if (e[i].result > 0 && !rep->moved++)
			snprintf(rep->why, sizeof(rep->why),
				 "block {%u, %u} %s fd %d: %lld bytes",
				 e[i].block.index, e[i].block.gen,
				 e[i].flags & KVCACHE_XFER_TO_FILE ? "->" : "<-",
				 e[i].fd, (long long)e[i].result);
	}
}

/* Canary words (kvc pattern of index < CANARIES) in a file: how many. */
static long canary_words(int fd)
{
	static uint64_t buf[1 << 15];
	long hits = 0;
	ssize_t got;
	off_t pos = 0;

	while ((got = pread(fd, buf, sizeof(buf), pos)) > 0) {
		for (size_t i = 0; i < (size_t)got / 8; i++) {
			uint64_t x = buf[i] ^ CANARY_WORD;

			if (x >> 56 < CANARIES &&
			    (x & ((1ULL << 56) - 1)) < g.bs)
				hits++;
		}
		pos += got;
	}
	return hits;
}

static void __attribute__((noreturn))
unpriv_child(struct unpriv_report *rep, const char *dir, uint64_t seed,
	     long rounds)
{
	struct kvcache_xfer_entry e[UINFLIGHT][8];
	struct kvcache_handle own[UNPRIV_BLOCKS];
	uint64_t id[UINFLIGHT], rng = seed | 1;
	uint32_t cnt[UINFLIGHT];
	int ufd[UFILES], dev, nx = 0;
	char path[PATH_MAX];

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* Opened as root; every call is judged by the caller's credentials. */
	dev = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (dev < 0 || setgroups(0, NULL) ||
	    setresgid(UNPRIV_ID, UNPRIV_ID, UNPRIV_ID) ||
	    setresuid(UNPRIV_ID, UNPRIV_ID, UNPRIV_ID)) {
		snprintf(rep->why, sizeof(rep->why), "setup: %s",
			 strerror(errno));
		_exit(2);
	}
	/* A change of credentials clears it. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	for (int i = 0; i < UFILES; i++) {
		snprintf(path, sizeof(path), "%.4000s/u%d", dir, i);
		ufd[i] = open(path, O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC,
			      0600);
		if (ufd[i] < 0 || ftruncate(ufd[i], UFILE_SIZE))
			_exit(3);
	}
	for (int i = 0; i < UNPRIV_BLOCKS; i++) {
		uint8_t *p;

		if (kvc_alloc(dev, UNPRIV_NS, 1, &own[i]))
			_exit(4);
		p = kvc_map(dev, own[i].index, g.bs, PROT_READ | PROT_WRITE);
		if (!p)
			_exit(5);
		memset(p, 0x5a + i, g.bs);
		munmap(p, g.bs);
		if (kvc_seal(dev, own[i], (uint32_t)g.bs, (uint8_t)i,
			     KVCACHE_SEAL_KEEP_PIN))
			_exit(6);
	}
	for (long r = 0; r < rounds || nx; r++) {
		uint32_t n = 1 + (uint32_t)(urnd(&rng) % 8);
		int async = urnd(&rng) % 4;

		/* Full, or done: reap the oldest, waiting or not. */
		if (nx && (nx == UINFLIGHT || r >= rounds || !async)) {
			int ret = reap(dev, id[0], e[0], cnt[0],
				       (urnd(&rng) & 1) ? KVCACHE_REAP_NOWAIT : 0);

			if (ret == -EAGAIN)
				ret = reap(dev, id[0], e[0], cnt[0], 0);
			if (!ret)
				unpriv_judge(rep, e[0], cnt[0], own);
			nx--;
			memmove(id, id + 1, nx * sizeof(id[0]));
			memmove(cnt, cnt + 1, nx * sizeof(cnt[0]));
			memmove(e, e + 1, nx * sizeof(e[0]));
			continue;
		}
		if (r >= rounds)
			continue;
		for (uint32_t i = 0; i < n; i++)
			unpriv_entry(&e[nx][i], &rng, ufd, own);
		rep->batches++;
		rep->entries += n;
		if (!async) {
			if (!xfer(dev, e[nx], n, NULL))
				unpriv_judge(rep, e[nx], n, own);
		} else if (!xfer_async(dev, e[nx], n, -1, &id[nx])) {
			cnt[nx++] = n;
		}
	}
	for (int i = 0; i < UFILES; i++)
		rep->hits += canary_words(ufd[i]);
	_exit(0);
}

/*
 * The device's one tenant without read permission on the canaries'
 * namespace, alone now, fuzzing asynchronous (and synchronous) transfers
 * at them: the canary by its real handle, whole and in part, with the
 * generation off, any block at all, in both directions, between them and
 * its own O_DIRECT files, reaped with and without REAP_NOWAIT. The
 * kernel worker that runs an async batch is not the submitter: every
 * entry naming a canary must come back refused (the exact attack with
 * EACCES), no byte of a canary may be in its files, the canaries stay
 * intact; its own blocks do go out (the control).
 */
TEST_F_TIMEOUT(fuzz, unprivileged_async_batches_never_read_the_canaries, 900)
{
	long rounds = env_long("KVC_FUZZ_UNPRIV_ROUNDS", 3000);
	struct unpriv_report *rep;
	struct kvcache_block_info bi[64];
	const char *tmp = getenv("TMPDIR");
	char dir[PATH_MAX];
	pid_t pid;
	int st = -1;

	rep = mmap(NULL, sizeof(*rep), PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, rep);
	memset(rep, 0, sizeof(*rep));
	snprintf(dir, sizeof(dir), "%s/kvc-fuzz-u-%d",
		 tmp && *tmp ? tmp : "/tmp", getpid());
	ASSERT_EQ(0, mkdir(dir, 0700));
	ASSERT_EQ(0, chown(dir, UNPRIV_ID, UNPRIV_ID));
	kvc_ns(self->fd, 0, UNPRIV_NS, 0, 0, 0);
	ASSERT_EQ(0, kvc_ns(self->fd, 1, UNPRIV_NS, UNPRIV_ID, UNPRIV_ID,
			    0700));

	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid)
		unpriv_child(rep, dir, (uint64_t)time(NULL) ^ getpid(), rounds);
	for (int i = 0; i < 6000; i++) {	/* ten minutes at the most */
		if (waitpid(pid, &st, WNOHANG) == pid)
			break;
		usleep(100000);
	}
	if (!WIFEXITED(st)) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
	}
	TH_LOG("unprivileged (uid %d): %ld batches, %ld entries; %ld named a "
	       "canary (%ld whole by its real handle, %ld EACCES); %ld of its "
	       "own blocks went out", UNPRIV_ID, rep->batches, rep->entries,
	       rep->canary, rep->exact, rep->exact_eacces, rep->own_ok);
	EXPECT_TRUE(WIFEXITED(st) && !WEXITSTATUS(st)) {
		TH_LOG("status %#x: %s", st, rep->why);
	}
	EXPECT_EQ(0, rep->moved) TH_LOG("%s", rep->why);
	EXPECT_EQ(0, rep->hits);
	EXPECT_LT(0, rep->exact);
	EXPECT_EQ(rep->exact, rep->exact_eacces) TH_LOG("%s", rep->odd);
	EXPECT_LT(0, rep->own_ok);
	for (int i = 0; i < CANARIES; i++)
		EXPECT_EQ(-1, first_diff(self->cmap[i], self->want[i]));

	/* Its blocks and the canaries go, then their namespaces. */
	for (int i = 0; i < CANARIES; i++) {
		munmap(self->cmap[i], g.bs);
		munmap(self->want[i], g.bs);
	}
	close(self->cfd);
	self->cfd = -1;
	for (;;) {
		struct kvcache_query q = {
			.size = sizeof(q), .count = 64,
			.entries = (uintptr_t)bi,
		};
		int n;

		ASSERT_EQ(0, kvc_ioc(self->fd, KVCACHE_IOC_QUERY, &q));
		n = (int)q.count;
		if (!n)
			break;
		for (int i = 0; i < n; i++)
			kvc_evict(self->fd, bi[i].handle);
		if (q.next >= g.nr_blocks && n < 64)
			break;
	}
	EXPECT_EQ(0, kvc_ns(self->fd, 0, UNPRIV_NS, 0, 0, 0));
	EXPECT_EQ(0, kvc_ns(self->fd, 0, CANARY_NS, 0, 0, 0));
	for (int i = 0; i < FUZZ_NSES; i++)
		kvc_ns(self->fd, 0, FUZZ_NS + i, 0, 0, 0);
	for (int i = 0; i < UFILES; i++) {
		char path[PATH_MAX + 8];

		snprintf(path, sizeof(path), "%s/u%d", dir, i);
		unlink(path);
	}
	rmdir(dir);
	munmap(rep, sizeof(*rep));
}

TEST_HARNESS_MAIN
