// SPDX-License-Identifier: GPL-2.0
/*
 * ioctl fuzzer for /dev/kvcache, meant for the test VM, whose kernel has
 * KASAN, lockdep and kmemleak: scripts/vm turns any report into exit
 * status 120, so a run "passes" only when the kernel stayed silent too.
 *
 * What it throws at the module, from FUZZ_THREADS threads at once:
 *  - every ioctl of uapi/linux/kvcache.h (0x00..0x0D) with arguments that
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
 *    threads and unmapped under their loads and stores, namespaces are
 *    destroyed and recreated under allocations, the helper role moves
 *    between files that get closed, asynchronous transfers are left
 *    in flight when their file goes, and fork()ed children (some of them
 *    unprivileged) inherit the files and mappings, fuzz, and are SIGKILLed
 *    mid-flight;
 *  - an unprivileged user (UNPRIV_ID, a process of its own for the whole
 *    run, with device files of its own and none of root's) throwing
 *    transfers at the canaries, whose namespace it may not read: random
 *    batches, most of them asynchronous (the kernel worker that runs them
 *    is not the submitter), reaped with and without KVCACHE_REAP_NOWAIT,
 *    between its blocks and files of its own opened O_DIRECT, and the
 *    exact attack (a canary's real handle, whole, to its file) again and
 *    again.
 *
 * It is bounded: KVC_FUZZ_CALLS ioctls in all (default 1000000), under a
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
 * They must also stay unread: no transfer of the unprivileged fuzzer that
 * names one succeeds, and no byte of theirs is in any file it wrote. (So
 * that this holds by construction, the privileged fuzzers, who may read
 * the canaries, never copy one out: its bytes could travel on from their
 * file into a block the unprivileged one may read.)
 *
 * KVC_FUZZ_SEED repeats a run's random choices (thread scheduling still
 * differs). A table of results per ioctl (ok, then each errno) is printed
 * as TAP comments.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <execinfo.h>
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
#include "kvc_p2p.h"
#include "kvc_sysfs.h"

#define FUZZ_THREADS	8
#define SHARED_FDS	4	/* fd slots every thread uses and replaces */
#define MAP_SLOTS	16	/* block mappings published to all threads */
#define CANARIES	4
#define HANDLES		64	/* handles a thread remembers */
#define XIDS		16	/* async batches a thread remembers */
#define REGIONS		8	/* region handles a thread remembers */
#define CANARY_NS	64999
#define FUZZ_NS		65000	/* FUZZ_NS .. FUZZ_NS + FUZZ_NSES - 1 */
#define FUZZ_NSES	4
#define XFILE_SIZE	(1 << 20)
#define UNPRIV_ID	65533	/* uid and gid of the unprivileged fuzzer */
#define UNPRIV_NS	64998	/* its own namespace (UNPRIV_ID's, 0700) */
#define UNPRIV_BLOCKS	6	/* blocks it allocates in all, at most */
#define UFILES		2	/* its files */
#define CANARY_WORD	0x6b7663616e617279ULL	/* "kvcanary" */
#define ENTRY_ROOM	(KVCACHE_MAX_BATCH + 1)

/* Result table rows: one per ioctl number, then the rest. */
enum { ROW_FOREIGN = 14, ROW_MMAP, ROWS };
#define ERRS		136	/* errno values counted one by one; above: last */

static const char *const row_name[ROWS] = {
	"INFO", "ALLOC", "SEAL", "PIN", "UNPIN", "EVICT", "QUERY",
	"NS_CREATE", "NS_DESTROY", "HELPER", "REGION_REGISTER",
	"REGION_UNREGISTER", "XFER", "XFER_REAP", "other commands", "mmap",
};

/* What every thread shares. */
static struct {
	uint64_t bs, nr_blocks;
	int prov;			/* the fake GPU's provider id, or -1 */
	uint64_t prov_size;
	int xfd;			/* a data file for transfers */
	int efd;			/* an eventfd for async transfers */
	int keep[2];			/* files the fuzzers must not use */
	_Atomic int fds[SHARED_FDS];
	_Atomic uintptr_t maps[MAP_SLOTS];
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
	struct unpriv *us;		/* shared with the unprivileged fuzzer */
	void *bt_prime;
} g;

/* What the unprivileged fuzzer reports, in memory shared with the test. */
struct unpriv {
	_Atomic int stop;
	_Atomic long calls;
	_Atomic long async;		/* batches submitted */
	_Atomic long reaped;		/* batches reaped */
	_Atomic long canary_out;	/* entries canary -> file, with results */
	_Atomic long exact;		/* of those, the whole real handle */
	_Atomic long exact_eacces;	/* ... refused with EACCES */
	_Atomic long leaks;		/* canary -> file entries that moved bytes */
	char why[256];			/* the first leak, or why it stopped */
	char odd[256];			/* the first whole canary not EACCES */
};

struct fuzzer {
	pthread_t thread;
	uint64_t rng;
	int pfd;			/* this thread's own file */
	int child;			/* a forked child: never counts */
	int unpriv;			/* the unprivileged fuzzer (g.us) */
	int ufd[UFILES];		/* its files, O_DIRECT */
	int blocks;			/* blocks it allocated */
	struct kvcache_handle h[HANDLES];
	uint32_t nh;
	uint64_t xid[XIDS];
	uint32_t xcount[XIDS];
	uint8_t xfresh[XIDS];		/* its entries were made for it */
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
	static void *bt[32];

	if (cur && cur->armed) {
		cur->armed = 0;
		siglongjmp(cur->jb, 1);
	}
	/* Not ours: say where, then fault again, for real. */
	dprintf(2, "# signal %d at %p (code %d) in %s, pid %d; stack:\n", sig,
		si->si_addr, si->si_code, cur ? "a fuzzer" : "no fuzzer",
		(int)getpid());
	backtrace_symbols_fd(bt, backtrace(bt, 32), 2);
	signal(sig, SIG_DFL);
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
	if (f->unpriv)
		atomic_fetch_add_explicit(&g.us->calls, 1,
					  memory_order_relaxed);
	else if (!f->child)
		atomic_fetch_add_explicit(&g.calls, 1, memory_order_relaxed);
	else if (g.child_calls)
		atomic_fetch_add_explicit(g.child_calls, 1,
					  memory_order_relaxed);
	return e ? -e : 0;
}

/* Some non-zero byte in [from, to) of the struct: reserved, flags, outputs. */
static void spoil(struct fuzzer *f, uint8_t *s, uint32_t from, uint32_t to)
{
	if (one_in(f, 12))
		s[from + rnd(f) % (to - from)] = (uint8_t)(1 | rnd(f));
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
	spoil(f, u->bytes, 4, sizeof(u->alloc));
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
	spoil(f, u->bytes, 16, sizeof(u->query));
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
		switch ((r >> 40) % 16) {
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

static int is_canary(uint32_t index)
{
	for (int i = 0; i < CANARIES; i++)
		if (g.canary[i].index == index)
			return 1;
	return 0;
}

/*
 * The unprivileged fuzzer looks at what came back: an entry that moved a
 * canary to a file is a leak; in entries made for the call (@fresh: not
 * taken from memory the kernel wrote results into, which it refuses as
 * input) the whole real handle must be refused with EACCES, whatever
 * else the batch held.
 */
static void note_results(struct fuzzer *f, const char *how, int fresh,
			 const struct kvcache_xfer_entry *e, uint32_t n)
{
	const uint32_t out = KVCACHE_XFER_TO_FILE | KVCACHE_XFER_BLOCK;
	struct unpriv *us = g.us;

	if (n > ENTRY_ROOM)
		n = ENTRY_ROOM;
	for (uint32_t i = 0; i < n; i++) {
		int exact = 0;

		if ((e[i].flags & out) != out || !is_canary(e[i].block.index))
			continue;
		atomic_fetch_add(&us->canary_out, 1);
		for (int k = 0; k < CANARIES; k++)
			exact |= e[i].block.index == g.canary[k].index &&
				 e[i].block.gen == g.canary[k].gen;
		exact &= fresh && e[i].flags == out && !e[i].offset &&
			 e[i].length == g.bs && !e[i].region &&
			 !e[i].reserved && !e[i].reserved2 &&
			 (e[i].fd == f->ufd[0] || e[i].fd == f->ufd[1]);
		if (exact) {
			atomic_fetch_add(&us->exact, 1);
			if (e[i].result == -EACCES)
				atomic_fetch_add(&us->exact_eacces, 1);
			else if (!us->odd[0])
				snprintf(us->odd, sizeof(us->odd),
					 "%s: entry %u of %u: %lld, path %u",
					 how, i, n,
					 (long long)e[i].result, e[i].path);
		}
		if (e[i].result > 0 && !atomic_fetch_add(&us->leaks, 1))
			snprintf(us->why, sizeof(us->why),
				 "block {%u, %u} -> fd %d at %llu: %lld bytes",
				 e[i].block.index, e[i].block.gen, e[i].fd,
				 (unsigned long long)e[i].file_offset,
				 (long long)e[i].result);
	}
}

/* Reap the unprivileged fuzzer's oldest batch, waiting, and forget it. */
static void reap_oldest(struct fuzzer *f)
{
	struct kvcache_xfer_entry *e = (struct kvcache_xfer_entry *)f->ent;
	struct kvcache_xfer_reap r = {
		.size = sizeof(r), .count = f->xcount[0], .id = f->xid[0],
		.entries = (uintptr_t)e,
	};

	if (!ioctl(f->pfd, KVCACHE_IOC_XFER_REAP, &r)) {
		atomic_fetch_add(&g.us->reaped, 1);
		note_results(f, "reaped, waiting", f->xfresh[0], e, r.count);
	}
	f->nx--;
	memmove(f->xid, f->xid + 1, f->nx * sizeof(f->xid[0]));
	memmove(f->xcount, f->xcount + 1, f->nx * sizeof(f->xcount[0]));
	memmove(f->xfresh, f->xfresh + 1, f->nx * sizeof(f->xfresh[0]));
}

static void op_xfer(struct fuzzer *f, union args *u)
{
	struct kvcache_xfer_entry *e = (struct kvcache_xfer_entry *)f->ent;
	uint32_t n = pick_count(f), i;
	int async = one_in(f, 2), fd = pick_fd(f);

	/*
	 * The unprivileged fuzzer: mostly asynchronous, on its own file and
	 * never more than it can reap, so that when it stops, every batch
	 * it started has finished writing the files that are scanned.
	 */
	if (f->unpriv) {
		async = !one_in(f, 4);
		if (async) {
			fd = f->pfd;
			if (f->nx >= XIDS)
				reap_oldest(f);
		}
	}
	for (i = 0; i < n && i < 4; i++) {
		uint64_t r = rnd(f);
		int xfd = f->unpriv ? f->ufd[(r >> 60) % UFILES] : g.xfd;

		memset(&e[i], 0, sizeof(e[i]));
		e[i].fd = (r & 3) ? xfd : (r & 4) ? -1 :
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
		if (f->unpriv && one_in(f, 3)) {
			/* The attack itself: a canary, whole, to its file. */
			memset(&e[i], 0, sizeof(e[i]));
			e[i].fd = xfd;
			e[i].flags = KVCACHE_XFER_TO_FILE | KVCACHE_XFER_BLOCK;
			e[i].file_offset = (r & 0x10) ? g.bs : 0;
			e[i].length = g.bs;
			e[i].block = g.canary[(r >> 5) % CANARIES];
		}
		/* Privileged (or perhaps the helper): no canary out, see top. */
		if (!f->unpriv && (e[i].flags & KVCACHE_XFER_BLOCK) &&
		    is_canary(e[i].block.index))
			e[i].flags &= ~KVCACHE_XFER_TO_FILE;
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
	spoil(f, u->bytes, 4, sizeof(u->xfer));
	if (do_ioctl(f, fd, KVCACHE_IOC_XFER, 12, u, sizeof(u->xfer)))
		return;
	if (f->unpriv && async)
		atomic_fetch_add(&g.us->async, 1);
	if (f->unpriv && !async && u->xfer.entries == (uintptr_t)e)
		note_results(f, "sync", 1, e, n);
	if (async && fd == f->pfd && f->nx < XIDS) {
		/*
		 * Entries from elsewhere (g.vol, say) may be ones the kernel
		 * wrote back, result and path set: refused as input.
		 */
		f->xfresh[f->nx] = u->xfer.entries == (uintptr_t)e;
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
	spoil(f, u->bytes, 4, sizeof(u->reap));
	if (!do_ioctl(f, fd, KVCACHE_IOC_XFER_REAP, 13, u, sizeof(u->reap)) &&
	    known) {
		if (f->unpriv) {
			atomic_fetch_add(&g.us->reaped, 1);
			if (u->reap.entries == (uintptr_t)f->ent)
				note_results(f, "reaped", f->xfresh[k],
					     (struct kvcache_xfer_entry *)
					     f->ent, u->reap.count);
		}
		f->xid[k] = f->xid[--f->nx];
		f->xcount[k] = f->xcount[f->nx];
		f->xfresh[k] = f->xfresh[f->nx];
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
		cmd = _IOWR(KVCACHE_IOC_MAGIC, 0x0E + (r >> 8) % 242,
			    struct kvcache_info);
		break;
	case 1:		/* a real number, other size bits (ignored) */
		cmd = _IOC(_IOC_READ | _IOC_WRITE, KVCACHE_IOC_MAGIC,
			   (r >> 8) % 14, (r >> 16) % (1 << _IOC_SIZEBITS));
		break;
	case 2:		/* a real number, another direction */
		cmd = _IOC((r >> 8) % 3, KVCACHE_IOC_MAGIC, (r >> 16) % 14,
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

/* Loads and stores through someone's published mapping. */
static void op_touch(struct fuzzer *f)
{
	uint64_t r = rnd(f);
	uintptr_t m = atomic_load(&g.maps[r % MAP_SLOTS]);

	if (m)
		touch(f, (volatile uint8_t *)(m + (r >> 8) % g.bs), (r >> 60) & 1);
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
	f->rng = (seed | 1) * 0x9e3779b97f4a7c15ULL * (uint64_t)(i + 1) | 1;
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

/* ---- the unprivileged fuzzer -------------------------------------------- */

/* One block of its own namespace, now and then (the pool is shared). */
static void unpriv_alloc(struct fuzzer *f)
{
	struct kvcache_handle h;

	if (f->blocks >= UNPRIV_BLOCKS || kvc_alloc(f->pfd, UNPRIV_NS, 1, &h))
		return;
	f->blocks++;
	remember(f, &h, 1);
}

/*
 * Its mix: transfers and reaps first, then what makes blocks to transfer
 * (its own, written from its files and sealed), and calls that must be
 * refused (pins of the canaries, regions, other namespaces).
 */
static void unpriv_op(struct fuzzer *f)
{
	union args u;
	uint64_t r = rnd(f) % 16;

	memset(&u, 0, sizeof(u));
	if (r < 7)
		op_xfer(f, &u);
	else if (r < 10)
		op_reap(f, &u);
	else if (r < 11)
		unpriv_alloc(f);
	else if (r < 12)
		op_batch(f, &u, KVCACHE_IOC_SEAL);
	else if (r < 13)
		op_batch(f, &u, KVCACHE_IOC_PIN);
	else if (r < 14)
		op_batch(f, &u, KVCACHE_IOC_UNPIN);
	else if (r < 15)
		op_query(f, &u);
	else
		op_region(f, &u, one_in(f, 2));
}

/*
 * Close every descriptor of /dev/kvcache this process inherited: one of
 * root's files may hold the helper role (op_helper moves it around), and
 * a call through it would be privileged.
 */
static void close_inherited_devices(void)
{
	struct stat dev, st;

	if (stat(KVCACHE_DEVICE_PATH, &dev))
		return;
	for (int fd = 3; fd < 1024; fd++)
		if (!fstat(fd, &st) && S_ISCHR(st.st_mode) &&
		    st.st_rdev == dev.st_rdev)
			close(fd);
}

/*
 * The unprivileged fuzzer's process, forked before the threads start and
 * running until the test says stop or the cap: its device files are
 * opened here as root (the kernel judges every call by the caller's
 * credentials, not the opener's), then it becomes UNPRIV_ID, with no
 * supplementary group, and makes its own files in @dir. Before it exits
 * it reaps every batch it knows of. Exit status 0, or what failed in
 * g.us->why.
 */
static void __attribute__((noreturn)) run_unpriv(uint64_t seed,
						 const char *dir)
{
	static struct fuzzer u;
	char path[PATH_MAX];
	int i;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	close_inherited_devices();
	close(g.xfd);
	g.xfd = -1;
	if (setup_fuzzer(&u, seed, FUZZ_THREADS + 2, 0))
		_exit(2);
	for (i = 0; i < SHARED_FDS; i++)
		g.fds[i] = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	u.unpriv = 1;
	if (setgroups(0, NULL) || setresgid(UNPRIV_ID, UNPRIV_ID, UNPRIV_ID) ||
	    setresuid(UNPRIV_ID, UNPRIV_ID, UNPRIV_ID) ||
	    geteuid() != UNPRIV_ID) {
		snprintf(g.us->why, sizeof(g.us->why), "dropping to %d: %s",
			 UNPRIV_ID, strerror(errno));
		_exit(3);
	}
	/*
	 * A change of credentials clears the parent-death signal: set it
	 * again, or a test that dies leaves this process fuzzing the device
	 * under the suites that come after it.
	 */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() == 1)
		_exit(5);
	for (i = 0; i < UFILES; i++) {
		snprintf(path, sizeof(path), "%.4000s/u%d", dir, i);
		u.ufd[i] = open(path, O_RDWR | O_CREAT | O_EXCL | O_DIRECT |
				O_CLOEXEC, 0600);
		if (u.ufd[i] < 0 || ftruncate(u.ufd[i], XFILE_SIZE)) {
			snprintf(g.us->why, sizeof(g.us->why), "%.180s: %s", path,
				 strerror(errno));
			_exit(4);
		}
	}
	cur = &u;
	/*
	 * Paced, as the mapper is: one process more on two CPUs would
	 * otherwise slow the threads' million calls by a third.
	 */
	while (!atomic_load(&g.us->stop) && !time_up()) {
		unpriv_op(&u);
		usleep(10000);
	}
	while (u.nx)
		reap_oldest(&u);
	_exit(0);
}

/*
 * Where a canary's bytes are in @buf, at positions below @scan (the
 * buffer holds 64 bytes more, where it can): 8-byte words that decode as
 * canary i's word at offset o (see the setup), confirmed over 64 bytes
 * against @want. @base: where @buf is in @name. Returns how many; prints
 * the first.
 */
static long canary_bytes(const char *name, uint64_t base, const uint8_t *buf,
			 size_t scan, size_t len, uint8_t *const *want)
{
	long hits = 0;

	for (size_t p = 0; p < scan && p + 64 <= len; p += 8) {
		uint64_t w, i, o;

		memcpy(&w, buf + p, 8);
		w ^= CANARY_WORD;
		i = w >> 56;
		o = w & ((1ULL << 56) - 1);
		if (i >= CANARIES || o % 8 || o + 64 > g.bs ||
		    memcmp(buf + p, want[i] + o, 64))
			continue;
		if (!hits++)
			printf("# %s: canary %llu's bytes from %llu at %llu\n",
			       name, (unsigned long long)i,
			       (unsigned long long)o,
			       (unsigned long long)(base + p));
	}
	return hits;
}

/*
 * canary_bytes() of a file, its data only: a transfer at a random offset
 * leaves a sparse file that may be petabytes long.
 */
static long canary_bytes_file(const char *path, uint8_t *buf, size_t chunk,
			      uint8_t *const *want)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	long hits = 0;
	off_t pos, end;
	ssize_t n;

	if (fd < 0)
		return -1;
	for (pos = lseek(fd, 0, SEEK_DATA); pos >= 0;
	     pos = lseek(fd, end, SEEK_DATA)) {
		end = lseek(fd, pos, SEEK_HOLE);
		if (end < 0)
			break;
		for (; pos < end; pos += chunk) {
			n = pread(fd, buf, chunk + 64, pos);
			if (n <= 0)
				break;
			hits += canary_bytes(path, pos, buf, chunk, n, want);
		}
	}
	close(fd);
	return hits;
}

/* canary_bytes() of every file in @dir (the unprivileged fuzzer's). */
static long canary_bytes_in(const char *dir, uint8_t *const *want)
{
	const size_t chunk = 1 << 20;
	uint8_t *buf = map_anon(chunk + 64, PROT_READ | PROT_WRITE);
	char path[PATH_MAX];
	struct dirent *d;
	long hits = 0, n;
	DIR *dp = opendir(dir);

	if (!dp || !buf) {
		printf("# %s: %s\n", dir, strerror(errno));
		return -1;
	}
	while ((d = readdir(dp))) {
		snprintf(path, sizeof(path), "%.3000s/%.255s", dir, d->d_name);
		if (d->d_type != DT_REG)
			continue;
		n = canary_bytes_file(path, buf, chunk, want);
		if (n < 0) {
			printf("# %s: %s\n", path, strerror(errno));
			hits = -1;
			break;
		}
		hits += n;
	}
	closedir(dp);
	munmap(buf, chunk + 64);
	return hits;
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

	for (int i = 0; i < 100 && v != want; i++) {
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
	char gpu[64];

	self->fd = open(KVCACHE_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->fd);
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
	/* backtrace() loads its unwinder once: now, not in on_fault(). */
	backtrace(&g.bt_prime, 1);

	/* The fake GPU, when this VM has one: region calls then succeed. */
	g.prov = -1;
	if (!find_pci(0x1af4, 0x1110, 0, gpu, sizeof(gpu)))
		g.prov = bind_gpu(gpu);
	g.prov_size = g.prov >= 0 ? provider_u64(g.prov, "size") : 64 << 20;
	TH_LOG("fake GPU provider %d", g.prov);

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
	close(self->fd);
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

/* $TMPDIR/kvc-fuzz-u-PID, the unprivileged fuzzer's (0700). 0 or -errno. */
static int unpriv_dir(char *dir, size_t len)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(dir, len, "%s/kvc-fuzz-u-%d", tmp && *tmp ? tmp : "/tmp",
		 getpid());
	if (mkdir(dir, 0700) || chown(dir, UNPRIV_ID, UNPRIV_ID))
		return -errno;
	return 0;
}

static void unpriv_dir_remove(const char *dir)
{
	char path[PATH_MAX];

	for (int i = 0; i < UFILES; i++) {
		snprintf(path, sizeof(path), "%.4000s/u%d", dir, i);
		unlink(path);
	}
	rmdir(dir);
}

/* Wait up to @secs for @pid, then SIGKILL it. Its wait status. */
static int wait_exit(pid_t pid, int secs)
{
	int st = -1;

	for (int i = 0; i < secs * 10; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return st;
		usleep(100000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return st;
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
	char udir[PATH_MAX];
	uint64_t tsc0;
	double secs;
	pid_t upid;
	int i, n, ust;

	g.target = env_long("KVC_FUZZ_CALLS", 1000000);
	TH_LOG("seed %#llx (KVC_FUZZ_SEED repeats it), %ld calls, cap %ld s",
	       (unsigned long long)seed, g.target, seconds);
	g.child_calls = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, g.child_calls);
	g.us = mmap(NULL, sizeof(*g.us), PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, g.us);
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
	/*
	 * The unprivileged fuzzer, forked while this process has no other
	 * thread yet (so it may allocate), under the same cap.
	 */
	ASSERT_EQ(0, unpriv_dir(udir, sizeof(udir)));
	ASSERT_EQ(0, kvc_ns(self->fd, 1, UNPRIV_NS, UNPRIV_ID, UNPRIV_ID,
			    0700));
	upid = fork();
	ASSERT_LE(0, upid);
	if (!upid)
		run_unpriv(seed, udir);
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
	/* The unprivileged fuzzer stops too, once it has reaped its batches. */
	atomic_store(&g.us->stop, 1);
	ust = wait_exit(upid, 120);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	secs = (double)(t1.tv_sec - t0.tv_sec) +
	       (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;

	printf("# %ld ioctls in %.1f s (%.0f/s) from %d threads and the "
	       "mapper, %ld mmaps; %ld of %ld children forked (last failure: "
	       "%s) and killed mid-flight made %ld more\n", calls, secs,
	       (double)calls / secs, FUZZ_THREADS, maps, g.forks, rounds,
	       g.fork_errno ? strerror(g.fork_errno) : "none",
	       atomic_load(g.child_calls));
	printf("# unprivileged (uid %d): %ld calls, %ld async batches, %ld "
	       "reaped; %ld canary -> file entries came back, %ld of them a "
	       "whole canary by its real handle (%ld EACCES), %ld moved bytes\n",
	       UNPRIV_ID, atomic_load(&g.us->calls), atomic_load(&g.us->async),
	       atomic_load(&g.us->reaped), atomic_load(&g.us->canary_out),
	       atomic_load(&g.us->exact), atomic_load(&g.us->exact_eacces),
	       atomic_load(&g.us->leaks));
	report(f, FUZZ_THREADS + 1, (double)(__rdtsc() - tsc0) / secs);
	EXPECT_LE(g.target, calls) {
		TH_LOG("the %ld s cap came before %ld calls", seconds,
		       g.target);
	}
	EXPECT_LT(0, calls);
	EXPECT_TRUE(WIFEXITED(ust) && !WEXITSTATUS(ust)) {
		TH_LOG("the unprivileged fuzzer: status %#x (%s)", ust,
		       g.us->why);
	}
	EXPECT_EQ(0, atomic_load(&g.us->leaks)) {
		TH_LOG("the unprivileged fuzzer read a canary: %s", g.us->why);
	}
	/* It really attacked, asynchronously, and each time was refused. */
	EXPECT_LT(0, atomic_load(&g.us->reaped));
	EXPECT_LT(0, atomic_load(&g.us->exact));
	EXPECT_EQ(atomic_load(&g.us->exact), atomic_load(&g.us->exact_eacces)) {
		TH_LOG("%s", g.us->odd);
	}

	/* Every fuzz file and mapping goes. */
	for (i = 0; i < MAP_SLOTS; i++)
		if (g.maps[i])
			munmap((void *)g.maps[i], g.bs);
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

	/*
	 * Not a byte of the canaries in the unprivileged fuzzer's files (the
	 * scan itself finds them where they are).
	 */
	EXPECT_LT(0, canary_bytes("the scan's own check", 0, self->want[1],
				  g.bs, g.bs, self->want));
	EXPECT_EQ(0, canary_bytes_in(udir, self->want));
	unpriv_dir_remove(udir);

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
	EXPECT_EQ(0, kvc_ns(self->fd, 0, UNPRIV_NS, 0, 0, 0));
	for (i = 0; i < FUZZ_NSES; i++) {
		int ret = kvc_ns(self->fd, 0, FUZZ_NS + i, 0, 0, 0);

		EXPECT_TRUE(ret == 0 || ret == -ENOENT);
	}
}

TEST_HARNESS_MAIN
