// SPDX-License-Identifier: GPL-2.0
/*
 * The pool view: one read-only mapping of the whole pool per client.
 *
 * A per-block mapping (kvcache_mmap.c) costs an mmap, a munmap and its TLB
 * shootdown for every block loaded. A client that loads blocks one after
 * the other maps the view once instead (MAP_SHARED, offset
 * KVCACHE_VIEW_OFFSET, length the pool's size) and then pays a pin, a copy
 * and an unpin per block.
 *
 * Nothing is mapped at first. A fault maps the pages of the block it falls
 * in, from the faulting page to the block's end, and only for a file that
 * holds a pin on that block: the pin is where the namespace and the
 * generation were checked. A fault anywhere else is SIGBUS. The pages stay
 * mapped after the file unpins (a sealed block's bytes do not change, and
 * the file was allowed to read them), until the block is evicted: evict
 * unmaps it from every view before it frees it, so no view ever shows a
 * block in a later life. What makes that hold:
 *  - the fault marks the block viewed (kvc_block_mark_viewed()) and inserts
 *    its pages while holding the file's lock, so the file's pin, and with
 *    it the block's pin count, stays up from the mark to the last page;
 *  - evict finds the block unpinned, clears the mark and has its caller
 *    unmap the block (kvc_view_zap()) before it tries again. A fault after
 *    the zap needs a new pin, so the retry fails with -EBUSY, and that
 *    fault set the mark again for the next evict;
 *  - an inserted page holds a reference, and evict refuses a block whose
 *    pages are referenced: a page still mapped keeps the block alive.
 *
 * One address_space reaches every view: each open file's ->f_mapping is
 * the mapping of one inode of a private pseudo file system (as DRM does),
 * whichever /dev node the file was opened through, so one
 * unmap_mapping_range() finds all views of a block. Per-block mappings
 * live there too, at offsets below KVCACHE_VIEW_OFFSET, and are untouched.
 *
 * Lifetime: the pseudo file system is mounted at module init and
 * unmounted at exit, when no file is open (the fops hold the module), so
 * no VMA is left in the inode's mapping. The file system type has no
 * owner: a mount held by the module itself must not pin the module.
 *
 * Locking: the fault runs under mmap_lock (read) and takes dev->pool_sem
 * (read), kf->lock and a block lock, in that order, as the ioctls do
 * (kvcache_blocks.c). The zap runs under dev->pool_sem (read) and takes
 * only the mapping's i_mmap_rwsem and page table locks.
 */
#include <linux/fs.h>
#include <linux/fs_context.h>
#include <linux/mm.h>
#include <linux/mount.h>
#include <linux/pseudo_fs.h>

#include "compat.h"
#include "kvcache.h"
#include "kvcache_pool.h"

#define KVC_VIEW_FS_MAGIC	0x6b766376	/* "kvcv" */

static struct vfsmount *kvc_view_mnt;

static int kvc_view_init_fs_context(struct fs_context *fc)
{
	return init_pseudo(fc, KVC_VIEW_FS_MAGIC) ? 0 : -ENOMEM;
}

static struct file_system_type kvc_view_fs_type = {
	.name = "kvcache_view",
	.init_fs_context = kvc_view_init_fs_context,
	.kill_sb = kill_anon_super,
};

int kvc_view_init(struct kvc_dev *dev)
{
	struct inode *inode;

	kvc_view_mnt = kern_mount(&kvc_view_fs_type);
	if (IS_ERR(kvc_view_mnt))
		return PTR_ERR(kvc_view_mnt);
	inode = alloc_anon_inode(kvc_view_mnt->mnt_sb);
	if (IS_ERR(inode)) {
		kern_unmount(kvc_view_mnt);
		return PTR_ERR(inode);
	}
	dev->view_inode = inode;
	return 0;
}

void kvc_view_exit(struct kvc_dev *dev)
{
	iput(dev->view_inode);
	dev->view_inode = NULL;
	kern_unmount(kvc_view_mnt);
}

/* open(): every file of the device shares one mapping (see the top). */
void kvc_view_attach(struct kvc_dev *dev, struct file *file)
{
	file->f_mapping = dev->view_inode->i_mapping;
}

/**
 * kvc_view_zap() - unmap a block from every pool view
 * @dev: the device
 * @pool: the pool, under dev->pool_sem (read)
 * @index: the block
 *
 * Sleeps. Returns when no page table maps the block's pages through a view
 * and their references are dropped.
 */
void kvc_view_zap(struct kvc_dev *dev, struct kvc_pool *pool, u32 index)
{
	loff_t start = KVCACHE_VIEW_OFFSET + (loff_t)index * pool->block_size;

	unmap_mapping_range(dev->view_inode->i_mapping, start,
			    pool->block_size, 1);
}

static vm_fault_t kvc_view_fault(struct vm_fault *vmf)
{
	struct vm_area_struct *vma = vmf->vma;
	struct kvc_file *kf = vma->vm_file->private_data;
	struct kvc_dev *dev = kf->dev;
	unsigned long page, first, npages, addr;
	struct kvc_pool *pool;
	vm_fault_t ret = VM_FAULT_SIGBUS;
	u32 index;
	int err;

	page = vmf->pgoff - (KVCACHE_VIEW_OFFSET >> PAGE_SHIFT);
	percpu_down_read(&dev->pool_sem);
	pool = dev->pool;
	/* Mapped for another geometry: the pool was resized since. */
	if (pool->block_size != (unsigned long)vma->vm_private_data)
		goto out;
	index = page / pool->pages_per_block;
	first = page % pool->pages_per_block;
	if (index >= pool->nr_blocks)
		goto out;
	addr = vmf->address & PAGE_MASK;
	npages = pool->pages_per_block - first;
	if (addr + npages * PAGE_SIZE > vma->vm_end)
		goto out;

	mutex_lock(&kf->lock);
	if (kvc_file_has_pin(kf, index) && kvc_block_mark_viewed(pool, index)) {
		err = vm_insert_pages(vma, addr,
				      kvc_block_pages(pool, index) + first,
				      &npages);
		/*
		 * -EBUSY: another thread's fault mapped a page first. It is
		 * mapped either way, so the access is retried and succeeds
		 * (or faults again past that page).
		 */
		ret = err && err != -EBUSY ? vmf_error(err) : VM_FAULT_NOPAGE;
	}
	mutex_unlock(&kf->lock);
out:
	percpu_up_read(&dev->pool_sem);
	if (ret == VM_FAULT_SIGBUS)
		kvc_stat_inc(dev, KVC_STAT_VIEW_REFUSED);
	else
		kvc_stat_inc(dev, KVC_STAT_VIEW_FAULTS);
	return ret;
}

static int kvc_view_may_split(struct vm_area_struct *vma, unsigned long addr)
{
	return -EINVAL;
}

static const struct vm_operations_struct kvc_view_vm_ops = {
	.fault = kvc_view_fault,
	.may_split = kvc_view_may_split,
};

/* kvc_mmap() at KVCACHE_VIEW_OFFSET and above. */
int kvc_view_mmap(struct kvc_file *kf, struct vm_area_struct *vma)
{
	struct kvc_dev *dev = kf->dev;
	unsigned long len = vma->vm_end - vma->vm_start;
	int ret = 0;

	if (vma->vm_pgoff != KVCACHE_VIEW_OFFSET >> PAGE_SHIFT)
		return -EINVAL;
	if (vma->vm_flags & (VM_WRITE | VM_EXEC))
		return -EACCES;
	percpu_down_read(&dev->pool_sem);
	if (!dev->pool->nr_blocks ||
	    len != dev->pool->block_size * dev->pool->nr_blocks)
		ret = -EINVAL;
	else
		vma->vm_private_data = (void *)(unsigned long)dev->pool->block_size;
	percpu_up_read(&dev->pool_sem);
	if (ret)
		return ret;
	/*
	 * VM_MIXEDMAP now, under the write lock: vm_insert_pages() in the
	 * fault, under the read lock, may not set it.
	 */
	kvc_vm_flags_set(vma, VM_MIXEDMAP | VM_DONTEXPAND | VM_DONTDUMP |
			 VM_DONTCOPY);
	kvc_vm_flags_clear(vma, VM_MAYWRITE | VM_MAYEXEC);
	vma->vm_ops = &kvc_view_vm_ops;
	return 0;
}
