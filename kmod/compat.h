/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Kernel-version differences, all in one place.
 *
 * kvcache.ko builds against every kernel from 6.1 (Debian bookworm) on; the
 * test kernel is 6.12. Code elsewhere in kmod/ uses only the kvc_ names
 * defined here where an interface changed between those versions.
 */
#ifndef _KVCACHE_COMPAT_H
#define _KVCACHE_COMPAT_H

#include <linux/version.h>
#include <linux/fs.h>
#include <linux/module.h>
#include <linux/pci-p2pdma.h>

#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 1, 0)
#error "kvcache needs Linux 6.1 or later"
#endif

/*
 * 6.13 turned symbol namespaces from bare identifiers into string
 * literals: MODULE_IMPORT_NS(FOO) became MODULE_IMPORT_NS("FOO").
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 13, 0)
#define KVC_IMPORT_KUNIT_NS() MODULE_IMPORT_NS("EXPORTED_FOR_KUNIT_TESTING")
#else
#define KVC_IMPORT_KUNIT_NS() MODULE_IMPORT_NS(EXPORTED_FOR_KUNIT_TESTING)
#endif

/* kunit_vm_mmap(), to give a test real user memory, arrived in 6.11. */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 11, 0)
#define KVC_HAVE_KUNIT_VM_MMAP 1
#else
#define KVC_HAVE_KUNIT_VM_MMAP 0
#endif

/*
 * Pinning a user mapping of P2PDMA pages: GUP refuses them unless asked
 * with FOLL_PCI_P2PDMA, which arrived in 6.2 (an enum member, so only the
 * version tells), and pin_user_pages_remote() took a vmas argument until
 * 6.5. User regions need 6.5 (6.2 to 6.4 were not long-term releases);
 * before, they are refused with -EOPNOTSUPP.
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 5, 0) && IS_ENABLED(CONFIG_PCI_P2PDMA)
#define KVC_HAVE_USER_P2PDMA 1
#else
#define KVC_HAVE_USER_P2PDMA 0
#endif

/*
 * Whether @pdev publishes P2PDMA memory for others: pci_has_p2pmem() went
 * private with the P2PDMA provider rework of 6.19. After it, the closest
 * published P2PDMA memory to a device is its own when it publishes any
 * (distance 0; any other device is further away), so
 * pci_p2pmem_find_many() with the device as the one client answers the
 * same question.
 */
static inline bool kvc_pci_has_p2pmem(struct pci_dev *pdev)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 19, 0)
	struct device *client = &pdev->dev;
	struct pci_dev *found = pci_p2pmem_find_many(&client, 1);

	pci_dev_put(found);
	return found == pdev;
#else
	return pci_has_p2pmem(pdev);
#endif
}

/* vm_flags became read-only behind vm_flags_set()/vm_flags_clear() in 6.3. */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 3, 0)
#define kvc_vm_flags_set(vma, flags)	vm_flags_set(vma, flags)
#define kvc_vm_flags_clear(vma, flags)	vm_flags_clear(vma, flags)
#else
#define kvc_vm_flags_set(vma, flags)	((vma)->vm_flags |= (flags))
#define kvc_vm_flags_clear(vma, flags)	((vma)->vm_flags &= ~(flags))
#endif

/* eventfd_signal() lost its count argument in 6.8. */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 8, 0)
#define kvc_eventfd_signal(ctx)		eventfd_signal(ctx)
#else
#define kvc_eventfd_signal(ctx)		eventfd_signal(ctx, 1)
#endif

/*
 * vfs_iter_write() takes the file system's freeze protection itself since
 * 6.7; before, its callers did.
 */
static inline ssize_t kvc_iter_write(struct file *file, struct iov_iter *iter,
				     loff_t *pos)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 7, 0)
	return vfs_iter_write(file, iter, pos, 0);
#else
	ssize_t ret;

	file_start_write(file);
	ret = vfs_iter_write(file, iter, pos, 0);
	file_end_write(file);
	return ret;
#endif
}

#endif /* _KVCACHE_COMPAT_H */
