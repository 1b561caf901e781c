/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Fault injection points of kvcache.ko (see kvcache_fault.c).
 *
 * Each point is a struct fault_attr of the kernel's fault injection
 * framework, configured under /sys/kernel/debug/kvcache/<name>/. Without
 * CONFIG_FAULT_INJECTION the hooks are constant false and the compiler
 * drops the failure branches they guard.
 */
#ifndef _KVCACHE_FAULT_H
#define _KVCACHE_FAULT_H

#include <linux/types.h>

enum kvc_fault {
	KVC_FAULT_PAGE_ALLOC,	/* pool memory, when a pool is created */
	KVC_FAULT_BLOCK_ALLOC,	/* a block handed to a writer (ALLOC) */
	KVC_FAULT_IO,		/* one direct I/O request of a transfer */
	KVC_FAULT_PIN,		/* a file's pin table entry (PIN, SEAL) */
	KVC_FAULT_NETLINK,	/* a pressure event send */
	KVC_NR_FAULTS
};

#ifdef CONFIG_FAULT_INJECTION
struct fault_attr;

bool kvc_should_fail(enum kvc_fault fault, size_t size);
struct fault_attr *kvc_fault_attr(enum kvc_fault fault);
void kvc_fault_init(void);
void kvc_fault_exit(void);
#else
static inline bool kvc_should_fail(enum kvc_fault fault, size_t size)
{
	return false;
}

static inline void kvc_fault_init(void)
{
}

static inline void kvc_fault_exit(void)
{
}
#endif

#endif /* _KVCACHE_FAULT_H */
