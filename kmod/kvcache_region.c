// SPDX-License-Identifier: GPL-2.0
/*
 * Regions: the device memory an open file may transfer into.
 *
 * A region is a range of one provider's memory, registered by an open file
 * of /dev/kvcache and usable by that file only. Handles are unique across
 * the device (dev->regions), so another file's handle is recognised as
 * such (-EPERM) instead of silently naming one of the caller's regions.
 * A "bar" region is a window of the BAR the provider owns; a "p2pmem"
 * region is allocated from the publishing driver's pool and zeroed, so no
 * earlier user's bytes are ever visible through it. A user region
 * (KVCACHE_REGION_USER) is memory the caller already has mapped: P2PDMA
 * pages of the provider's device. The kernel refuses long-term pins of
 * P2PDMA pages (FOLL_LONGTERM with FOLL_PCI_P2PDMA warns and fails:
 * their pgmap must stay unpluggable), so a user region keeps the address
 * range and the owner's mm, not the pages: registration pins the whole
 * range once to check it, and each transfer pins the pages of the piece
 * it moves for as long as its DMA or copy runs (kvc_region_pin()), as
 * O_DIRECT does. A range unmapped meanwhile fails the next piece with
 * -EFAULT, one remapped to other memory with -EINVAL or -EXDEV: nothing
 * is written into memory the region no longer names.
 *
 * References (see kvcache_p2p.h): the registration holds one, each
 * transfer another; the last put frees the memory and the region.
 *
 * Locking: kf->lock (the file's region list, and registration against
 * unregistration of the same handle) nests outside prov->lock (the
 * provider's region list and the regions' memory). Lookups take the
 * xarray's own spinlock only.
 */
#include <linux/capability.h>
#include <linux/io.h>
#include <linux/memremap.h>
#include <linux/mm.h>
#include <linux/pci.h>
#include <linux/pci-p2pdma.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>

#include "kvcache.h"
#include "kvcache_p2p.h"

/* Called with prov->lock held, by the last put or by provider removal. */
void kvc_region_release_memory(struct kvc_region *region)
{
	struct kvc_provider *prov = region->prov;

	lockdep_assert_held(&prov->lock);
	if (region->kaddr && prov->kind == KVC_PROVIDER_P2PMEM)
		pci_free_p2pmem(prov->pdev, region->kaddr, region->length);
	region->kaddr = NULL;
}

#if KVC_HAVE_USER_P2PDMA
/* Is @page P2PDMA memory in one of @pdev's BARs? */
static bool kvc_page_of_device(struct pci_dev *pdev, struct page *page)
{
	phys_addr_t pa = page_to_phys(page);
	int bar;

	for (bar = 0; bar < PCI_STD_NUM_BARS; bar++) {
		resource_size_t start = pci_resource_start(pdev, bar);

		if (pci_resource_len(pdev, bar) && pa >= start &&
		    pa - start < pci_resource_len(pdev, bar))
			return true;
	}
	return false;
}
#endif

/* Bytes of @pdev's BARs: no user region of it can be longer. */
static u64 kvc_device_bar_bytes(struct pci_dev *pdev)
{
	u64 sum = 0;
	int bar;

	for (bar = 0; bar < PCI_STD_NUM_BARS; bar++)
		sum += pci_resource_len(pdev, bar);
	return sum;
}

/**
 * kvc_region_pin() - pin a piece of a user region for one transfer
 * @region: a user region
 * @off: first byte of the piece in the region
 * @len: bytes, at most KVC_REGION_PIN_MAX pages' worth from @off's page
 * @write: the transfer writes the memory
 * @pages: out: the pages from @off's page on
 *
 * Pins the pages in the owner's mm (transfers may run on a worker) and
 * checks that each is still P2PDMA memory of the region's provider.
 *
 * Return: the number of pages pinned (release with kvc_region_unpin()),
 * or -EFAULT (no longer mapped whole; the owner gone), -EINVAL (not
 * P2PDMA memory), -EXDEV (another device's), -EOPNOTSUPP (a kernel
 * without FOLL_PCI_P2PDMA).
 */
long kvc_region_pin(struct kvc_region *region, u64 off, size_t len,
		    bool write, struct page **pages)
{
#if KVC_HAVE_USER_P2PDMA
	unsigned long start = region->offset + off;
	unsigned long nr = DIV_ROUND_UP(offset_in_page(start) + len, PAGE_SIZE);
	struct mm_struct *mm = region->mm;
	long n, i;

	if (WARN_ON_ONCE(!nr || nr > KVC_REGION_PIN_MAX))
		return -EINVAL;
	if (!mmget_not_zero(mm))
		return -EFAULT;
	mmap_read_lock(mm);
	n = pin_user_pages_remote(mm, start & PAGE_MASK, nr,
				  FOLL_PCI_P2PDMA | (write ? FOLL_WRITE : 0),
				  pages, NULL);
	mmap_read_unlock(mm);
	mmput(mm);
	if (n >= 0 && n < nr) {
		unpin_user_pages(pages, n);
		n = -EFAULT;
	}
	for (i = 0; n > 0 && i < nr; i++) {
		int bad = 0;

		if (!is_pci_p2pdma_page(pages[i]))
			bad = -EINVAL;
		else if (!kvc_page_of_device(region->prov->pdev, pages[i]))
			bad = -EXDEV;
		if (bad) {
			unpin_user_pages(pages, nr);
			n = bad;
		}
	}
	return n ? n : -EFAULT;
#else
	return -EOPNOTSUPP;
#endif
}

void kvc_region_unpin(struct page **pages, long nr)
{
	unpin_user_pages(pages, nr);
}

/* Check a user region's whole range once, a piece at a time. */
static int kvc_region_check_user(struct kvc_region *region)
{
	const size_t piece = (KVC_REGION_PIN_MAX - 1) * PAGE_SIZE;
	struct page **pages;
	u64 off;
	long n = 0;

	pages = kvmalloc_array(KVC_REGION_PIN_MAX, sizeof(*pages), GFP_KERNEL);
	if (!pages)
		return -ENOMEM;
	for (off = 0; off < region->length; off += piece) {
		n = kvc_region_pin(region, off,
				   min_t(u64, piece, region->length - off),
				   true, pages);
		if (n < 0)
			break;
		kvc_region_unpin(pages, n);
		if (fatal_signal_pending(current)) {
			n = -EINTR;
			break;
		}
		cond_resched();
	}
	kvfree(pages);
	return n < 0 ? n : 0;
}

static void kvc_region_free(struct kref *ref)
{
	struct kvc_region *region = container_of(ref, struct kvc_region, ref);
	struct kvc_provider *prov = region->prov;

	mutex_lock(&prov->lock);
	list_del(&region->prov_node);
	prov->nr_regions--;
	kvc_region_release_memory(region);
	mutex_unlock(&prov->lock);
	kvc_provider_put(prov);
	if (region->mm)
		mmdrop(region->mm);
	kfree(region);
}

void kvc_region_put(struct kvc_region *region)
{
	kref_put(&region->ref, kvc_region_free);
}

static bool kvc_region_overlaps(struct kvc_provider *prov, u64 off, u64 len)
{
	struct kvc_region *r;

	list_for_each_entry(r, &prov->regions, prov_node)
		if (r->kaddr && off < r->offset + r->length &&
		    r->offset < off + len)
			return true;
	return false;
}

/* Give @region its memory and put it on @prov's list. */
static int kvc_region_attach(struct kvc_provider *prov,
			     struct kvc_region *region)
{
	void *kaddr = NULL;
	int ret = 0;

	if (region->user) {
		if (region->length > kvc_device_bar_bytes(prov->pdev))
			return -ERANGE;
		ret = kvc_region_check_user(region);
		if (ret)
			return ret;
	} else if (prov->kind == KVC_PROVIDER_P2PMEM) {
		if (region->offset)
			return -EINVAL;
		kaddr = pci_alloc_p2pmem(prov->pdev, region->length);
		if (!kaddr)
			return -ENOMEM;
		memset_io((void __iomem __force *)kaddr, 0, region->length);
	} else if (!capable(CAP_SYS_RAWIO)) {
		return -EPERM;
	} else if (region->offset >= prov->size ||
		   region->length > prov->size - region->offset) {
		return -ERANGE;
	}

	mutex_lock(&prov->lock);
	if (prov->dead) {
		ret = -ENODEV;
	} else if (region->user) {
		/* Nothing to give it: its memory is the owner's mapping. */
	} else if (prov->kind == KVC_PROVIDER_BAR) {
		if (kvc_region_overlaps(prov, region->offset, region->length))
			ret = -EBUSY;
		else
			kaddr = prov->base + region->offset;
	}
	if (!ret) {
		region->kaddr = kaddr;
		list_add_tail(&region->prov_node, &prov->regions);
		prov->nr_regions++;
	}
	mutex_unlock(&prov->lock);
	if (ret && !region->user && prov->kind == KVC_PROVIDER_P2PMEM)
		pci_free_p2pmem(prov->pdev, kaddr, region->length);
	return ret;
}

static int kvc_region_register(struct kvc_file *kf, struct kvcache_region *arg)
{
	struct kvc_dev *dev = kf->dev;
	struct kvc_provider *prov;
	struct kvc_region *region;
	int ret;

	if (!arg->length || !PAGE_ALIGNED(arg->length) ||
	    !PAGE_ALIGNED(arg->offset))
		return -EINVAL;
	/* A user range must not wrap. */
	if ((arg->flags & KVCACHE_REGION_USER) &&
	    arg->offset + arg->length < arg->offset)
		return -EINVAL;
	prov = kvc_provider_get(arg->provider);
	if (!prov)
		return -ENODEV;
	region = kzalloc(sizeof(*region), GFP_KERNEL_ACCOUNT);
	if (!region) {
		kvc_provider_put(prov);
		return -ENOMEM;
	}
	kref_init(&region->ref);
	region->owner = kf;
	region->prov = prov;
	region->offset = arg->offset;
	region->length = arg->length;
	region->user = arg->flags & KVCACHE_REGION_USER;
	if (region->user) {
		region->mm = current->mm;
		mmgrab(region->mm);
	}
	ret = kvc_region_attach(prov, region);
	if (ret) {
		kvc_provider_put(prov);
		if (region->mm)
			mmdrop(region->mm);
		kfree(region);
		return ret;
	}

	mutex_lock(&kf->lock);
	ret = xa_alloc_cyclic(&dev->regions, &region->handle, region,
			      XA_LIMIT(1, INT_MAX), &dev->next_region,
			      GFP_KERNEL);
	if (ret >= 0)
		list_add_tail(&region->file_node, &kf->regions);
	mutex_unlock(&kf->lock);
	if (ret < 0) {
		kvc_region_put(region);
		return ret;
	}
	arg->handle = region->handle;
	return 0;
}

static int kvc_region_unregister(struct kvc_file *kf, u32 handle)
{
	struct kvc_region *region;
	int ret = 0;

	mutex_lock(&kf->lock);
	region = xa_load(&kf->dev->regions, handle);
	if (!region) {
		ret = -ENOENT;
	} else if (region->owner != kf) {
		ret = -EPERM;
	} else {
		xa_erase(&kf->dev->regions, handle);
		list_del(&region->file_node);
	}
	mutex_unlock(&kf->lock);
	if (!ret)
		kvc_region_put(region);	/* transfers still running hold theirs */
	return ret;
}

int kvc_ioctl_region(struct kvc_file *kf, void __user *uarg, bool reg)
{
	struct kvcache_region arg;
	int ret;

	ret = kvc_copy_in(&arg, sizeof(arg), KVCACHE_REGION_SIZE_VER1, uarg);
	if (ret)
		return ret;
	ret = kvc_check_unused(arg.flags, reg ? KVCACHE_REGION_USER : 0,
			       arg.reserved, sizeof(arg.reserved));
	if (ret)
		return ret;
	if (!reg) {
		if (arg.provider || arg.offset || arg.length)
			return -EINVAL;
		return kvc_region_unregister(kf, arg.handle);
	}
	if (arg.handle)		/* an output */
		return -EINVAL;
	ret = kvc_region_register(kf, &arg);
	if (ret)
		return ret;
	ret = kvc_copy_out(uarg, &arg, sizeof(arg));
	if (ret)
		kvc_region_unregister(kf, arg.handle);
	return ret;
}

/**
 * kvc_region_lookup() - a region of this file, referenced, for a transfer
 * @kf: the file
 * @handle: the caller's handle
 * @err: out: -ENOENT (no such region) or -EPERM (another file's)
 *
 * Return: the region (drop it with kvc_region_put()) or NULL.
 */
struct kvc_region *kvc_region_lookup(struct kvc_file *kf, u32 handle,
				     int *err)
{
	struct kvc_region *region;

	*err = 0;
	xa_lock(&kf->dev->regions);
	region = xa_load(&kf->dev->regions, handle);
	if (!region)
		*err = -ENOENT;
	else if (region->owner != kf)
		*err = -EPERM;
	else
		kref_get(&region->ref);
	xa_unlock(&kf->dev->regions);
	return *err ? NULL : region;
}

/* The file is going away: unregister every region it still has. */
void kvc_regions_release(struct kvc_file *kf)
{
	struct kvc_region *region, *tmp;
	LIST_HEAD(list);

	mutex_lock(&kf->lock);
	list_splice_init(&kf->regions, &list);
	list_for_each_entry(region, &list, file_node)
		xa_erase(&kf->dev->regions, region->handle);
	mutex_unlock(&kf->lock);
	list_for_each_entry_safe(region, tmp, &list, file_node)
		kvc_region_put(region);
}
