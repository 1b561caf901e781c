// SPDX-License-Identifier: GPL-2.0
/*
 * Fault injection: make kvcache.ko's rare failures happen on demand, so
 * tests can check that every caller gets its error, every counter moves and
 * nothing leaks or is lost.
 *
 * Each injection point is a struct fault_attr of the kernel's framework
 * (Documentation/fault-injection/fault-injection.rst), with the same knobs
 * as failslab: probability, interval, times, space, verbose, task-filter
 * (with /proc/<pid>/make-it-fail) and the per-task fail-nth. They live in
 * /sys/kernel/debug/kvcache/ (Documentation/ABI/testing/debugfs-kvcache):
 *
 *   fail_page_alloc   pool memory when a pool is created (pool_size or
 *                     block_size written): a 2 MiB run that fails falls
 *                     back to single pages, a single page that fails makes
 *                     the write fail with ENOMEM. size: bytes asked for.
 *   fail_block_alloc  the bookkeeping of one block handed out by
 *                     KVCACHE_IOC_ALLOC: the ioctl gives back every block
 *                     of the batch and fails with ENOMEM. size: block size.
 *   fail_io           one direct I/O request of a transfer completes with
 *                     EIO, as a failed bio or DMA would; the bytes it moved
 *                     may or may not have arrived. size: request bytes.
 *   fail_pin          the pin table entry a file needs the first time it
 *                     pins a block (PIN, SEAL with KEEP_PIN): ENOMEM.
 *   fail_netlink      a pressure event is dropped instead of multicast.
 *
 * Each point is consulted where the real failure would happen, so the
 * injected failure takes the same unwind path as a real one. Every point is
 * reached in process context only; task-filter therefore works for all of
 * them except transfers of an asynchronous batch, which run in a kworker.
 *
 * Locking and lifetime: the fault_attrs are static, live as long as the
 * module text, and are only touched through should_fail() and debugfs,
 * both of which synchronise internally (atomics), so the hooks take no lock
 * and may be called under any of the module's locks, spinlocks included.
 * The debugfs directory is created at module load and removed at unload;
 * debugfs_remove_recursive() waits for readers and writers of its files.
 * If debugfs is unavailable the points stay disarmed (probability 0).
 */
#include <linux/debugfs.h>
#include <linux/err.h>
#include <linux/fault-inject.h>
#include <kunit/visibility.h>

#include "kvcache_fault.h"

static struct fault_attr kvc_faults[KVC_NR_FAULTS] = {
	[0 ... KVC_NR_FAULTS - 1] = FAULT_ATTR_INITIALIZER,
};

static const char * const kvc_fault_names[KVC_NR_FAULTS] = {
	[KVC_FAULT_PAGE_ALLOC] = "fail_page_alloc",
	[KVC_FAULT_BLOCK_ALLOC] = "fail_block_alloc",
	[KVC_FAULT_IO] = "fail_io",
	[KVC_FAULT_PIN] = "fail_pin",
	[KVC_FAULT_NETLINK] = "fail_netlink",
};

static struct dentry *kvc_fault_dir;

/**
 * kvc_should_fail() - should this use of an injection point fail?
 * @fault: the point
 * @size: what the operation asks for (bytes, or 1), checked against the
 *        point's "space" budget
 *
 * Return: true when the caller must fail as the point documents.
 */
bool kvc_should_fail(enum kvc_fault fault, size_t size)
{
	if (WARN_ON_ONCE(fault >= KVC_NR_FAULTS))
		return false;
	return should_fail(&kvc_faults[fault], size);
}
EXPORT_SYMBOL_IF_KUNIT(kvc_should_fail);

/* The point itself, for KUnit to arm without debugfs. */
struct fault_attr *kvc_fault_attr(enum kvc_fault fault)
{
	return fault < KVC_NR_FAULTS ? &kvc_faults[fault] : NULL;
}
EXPORT_SYMBOL_IF_KUNIT(kvc_fault_attr);

void kvc_fault_init(void)
{
	struct dentry *dir;
	int i;

	dir = debugfs_create_dir("kvcache", NULL);
	if (IS_ERR(dir))
		return;
	for (i = 0; i < KVC_NR_FAULTS; i++) {
		/* Errors only mean no knob: the point stays disarmed. */
		fault_create_debugfs_attr(kvc_fault_names[i], dir,
					  &kvc_faults[i]);
	}
	kvc_fault_dir = dir;
}

void kvc_fault_exit(void)
{
	debugfs_remove_recursive(kvc_fault_dir);
	kvc_fault_dir = NULL;
}
