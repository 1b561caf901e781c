// SPDX-License-Identifier: GPL-2.0
/*
 * mmap of pool blocks.
 *
 * One mapping is one block: MAP_SHARED (through a read-only descriptor
 * too, for sealed blocks), length block_size, offset
 * index * block_size. A writable block is mapped by its writer (the file
 * that allocated it) and counts as mapped writable until unmapped: seal
 * refuses while it is. A sealed block is mapped read-only, only by a file
 * that holds a pin on it; VM_MAYWRITE is cleared so mprotect cannot make it
 * writable, and the mapping counts against eviction itself, so unpin or
 * evict cannot free the pages under it. Mappings are not inherited across
 * fork (VM_DONTCOPY, unless the process undoes it with MADV_DOFORK: then
 * the child's copy is counted like any other) and cannot grow or be
 * split, so every mapping covers exactly its block and each open()/close()
 * of the VMA is one count.
 *
 * Offsets from KVCACHE_VIEW_OFFSET up are the pool view (kvcache_view.c).
 *
 * The pages are ordinary pool pages inserted with vm_insert_pages(), so
 * O_DIRECT I/O and GPU registration can use them like any user memory.
 *
 * Locking: called under mmap_lock; takes dev->pool_sem (read), kf->lock and
 * a block lock, in that order (see kvcache_blocks.c).
 */
#include <linux/fs.h>
#include <linux/mm.h>

#include "compat.h"
#include "kvcache.h"
#include "kvcache_pool.h"

/* vm_private_data: block index << 1 | writable */
static u32 kvc_vma_index(struct vm_area_struct *vma)
{
	return (unsigned long)vma->vm_private_data >> 1;
}

static bool kvc_vma_writable(struct vm_area_struct *vma)
{
	return (unsigned long)vma->vm_private_data & 1;
}

static struct kvc_dev *kvc_vma_dev(struct vm_area_struct *vma)
{
	struct kvc_file *kf = vma->vm_file->private_data;

	return kf->dev;
}

/* A copy of the VMA (mremap, fork after MADV_DOFORK): one more user. */
static void kvc_vm_open(struct vm_area_struct *vma)
{
	struct kvc_dev *dev = kvc_vma_dev(vma);

	percpu_down_read(&dev->pool_sem);
	kvc_block_map_dup(dev->pool, kvc_vma_index(vma), kvc_vma_writable(vma));
	percpu_up_read(&dev->pool_sem);
}

static void kvc_vm_close(struct vm_area_struct *vma)
{
	struct kvc_dev *dev = kvc_vma_dev(vma);

	percpu_down_read(&dev->pool_sem);
	kvc_block_unmap(dev->pool, kvc_vma_index(vma), kvc_vma_writable(vma));
	percpu_up_read(&dev->pool_sem);
}

static int kvc_vm_may_split(struct vm_area_struct *vma, unsigned long addr)
{
	return -EINVAL;
}

static const struct vm_operations_struct kvc_vm_ops = {
	.open = kvc_vm_open,
	.close = kvc_vm_close,
	.may_split = kvc_vm_may_split,
};

int kvc_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct kvc_file *kf = file->private_data;
	struct kvc_dev *dev = kf->dev;
	unsigned long len = vma->vm_end - vma->vm_start;
	u64 off = (u64)vma->vm_pgoff << PAGE_SHIFT;
	bool want_write = vma->vm_flags & VM_WRITE;
	unsigned long npages;
	struct kvc_pool *pool;
	u32 index;
	int ret, writable;

	/*
	 * MAP_SHARED only. do_mmap() keeps VM_SHARED only for files open for
	 * writing; a read-only descriptor's shared mapping has VM_MAYSHARE
	 * alone (and no VM_WRITE or VM_MAYWRITE), which is all a reader
	 * needs: pinning and mapping sealed blocks takes no write access.
	 */
	if (!(vma->vm_flags & VM_MAYSHARE))
		return -EINVAL;
	if (off >= KVCACHE_VIEW_OFFSET)
		return kvc_view_mmap(kf, vma);

	percpu_down_read(&dev->pool_sem);
	pool = dev->pool;
	if (!pool->nr_blocks || len != pool->block_size ||
	    off & (pool->block_size - 1) ||
	    off / pool->block_size >= pool->nr_blocks) {
		ret = -EINVAL;
		goto out;
	}
	index = off / pool->block_size;

	mutex_lock(&kf->lock);
	ret = kvc_block_map(pool, index, kf, want_write);
	if (ret == 0 && !kvc_file_has_pin(kf, index)) {
		/* Sealed, but this file never pinned it. */
		kvc_block_unmap(pool, index, false);
		ret = -EACCES;
	}
	mutex_unlock(&kf->lock);
	if (ret < 0)
		goto out;

	writable = ret;
	vma->vm_private_data = (void *)(((unsigned long)index << 1) | writable);
	kvc_vm_flags_set(vma, VM_DONTEXPAND | VM_DONTDUMP | VM_DONTCOPY);
	if (!writable)
		kvc_vm_flags_clear(vma, VM_MAYWRITE);
	vma->vm_ops = &kvc_vm_ops;

	npages = pool->pages_per_block;
	ret = vm_insert_pages(vma, vma->vm_start, kvc_block_pages(pool, index),
			      &npages);
	/*
	 * A failed ->mmap is unmapped without ->close: drop the count here.
	 * The caller zaps whatever pages were inserted.
	 */
	if (ret)
		kvc_block_unmap(pool, index, writable);
out:
	percpu_up_read(&dev->pool_sem);
	return ret;
}
