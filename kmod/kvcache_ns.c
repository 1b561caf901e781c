// SPDX-License-Identifier: GPL-2.0
/*
 * Namespaces and the helper role.
 *
 * Every block carries a namespace id. A namespace has an owner, a group and
 * permission bits, checked like a file's against the calling process's
 * credentials: read lets a process pin, map and list the namespace's
 * blocks, write lets it allocate blocks in it. Only the helper file
 * (KVCACHE_IOC_HELPER, needs CAP_SYS_ADMIN once) or a CAP_SYS_ADMIN caller
 * creates and destroys namespaces, evicts blocks, and bypasses the checks.
 *
 * Locking: dev->ns_lock (mutex) serialises create, destroy and the block
 * count of each namespace (a namespace with blocks cannot be destroyed).
 * Readers on the pin path look namespaces up under RCU only; a destroyed
 * namespace is freed after a grace period.
 */
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/fs.h>
#include <linux/slab.h>
#include <linux/user_namespace.h>
#include <linux/string.h>
#include <kunit/visibility.h>

#include "kvcache.h"

/*
 * Not auditing: an unprivileged engine asks this on every batch, and a
 * denial here only means "check the namespace instead".
 */
bool kvc_is_privileged(struct kvc_file *kf)
{
	return READ_ONCE(kf->dev->helper) == kf ||
	       ns_capable_noaudit(&init_user_ns, CAP_SYS_ADMIN);
}

/**
 * kvc_ns_mode_allows() - the permission bits that apply to a caller
 * @mode: the namespace's mode (0..0777)
 * @owner: the caller is the namespace's owner
 * @group: the caller is in the namespace's group
 * @mask: MAY_READ and/or MAY_WRITE
 *
 * Like a file: the owner bits for the owner, else the group bits for a
 * group member, else the other bits.
 */
bool kvc_ns_mode_allows(umode_t mode, bool owner, bool group, int mask)
{
	if (owner)
		mode >>= 6;
	else if (group)
		mode >>= 3;
	return (mode & mask & 7) == (mask & 7);
}
EXPORT_SYMBOL_IF_KUNIT(kvc_ns_mode_allows);

static bool kvc_ns_allows(const struct kvc_ns *ns, int mask)
{
	return kvc_ns_mode_allows(ns->mode, uid_eq(current_fsuid(), ns->uid),
				  in_group_p(ns->gid), mask);
}

/*
 * Pin-path permission callback (kvc_block_pin() may_read, @arg the
 * device): runs under a block spinlock, so RCU lookup only. Privileged
 * callers skip it; the caller decides that once per batch.
 */
bool kvc_ns_may_read(u32 ns_id, void *arg)
{
	struct kvc_dev *dev = arg;
	struct kvc_ns *ns;
	bool ok;

	rcu_read_lock();
	ns = xa_load(&dev->namespaces, ns_id);
	ok = ns && kvc_ns_allows(ns, MAY_READ);
	rcu_read_unlock();
	return ok;
}

/**
 * kvc_ns_charge() - account @count new blocks to a namespace
 * @kf: the allocating file
 * @ns_id: the namespace
 * @count: blocks
 *
 * Return: 0; -ENOENT (no such namespace); -EACCES (no write permission).
 */
int kvc_ns_charge(struct kvc_file *kf, u32 ns_id, u32 count)
{
	struct kvc_dev *dev = kf->dev;
	struct kvc_ns *ns;
	int ret = 0;

	mutex_lock(&dev->ns_lock);
	ns = xa_load(&dev->namespaces, ns_id);
	if (!ns)
		ret = -ENOENT;
	else if (!kvc_is_privileged(kf) && !kvc_ns_allows(ns, MAY_WRITE))
		ret = -EACCES;
	else
		ns->nr_blocks += count;
	mutex_unlock(&dev->ns_lock);
	return ret;
}

void kvc_ns_uncharge(struct kvc_dev *dev, u32 ns_id, u32 count)
{
	struct kvc_ns *ns;

	mutex_lock(&dev->ns_lock);
	ns = xa_load(&dev->namespaces, ns_id);
	if (!WARN_ON(!ns || ns->nr_blocks < count))
		ns->nr_blocks -= count;
	mutex_unlock(&dev->ns_lock);
}

static int kvc_ns_create(struct kvc_dev *dev, const struct kvcache_ns *arg)
{
	struct kvc_ns *ns;
	int ret;

	ns = kzalloc(sizeof(*ns), GFP_KERNEL);
	if (!ns)
		return -ENOMEM;
	ns->id = arg->ns_id;
	ns->uid = make_kuid(current_user_ns(), arg->uid);
	ns->gid = make_kgid(current_user_ns(), arg->gid);
	ns->mode = arg->mode;
	if (!uid_valid(ns->uid) || !gid_valid(ns->gid)) {
		kfree(ns);
		return -EINVAL;
	}
	mutex_lock(&dev->ns_lock);
	ret = xa_insert(&dev->namespaces, ns->id, ns, GFP_KERNEL);
	mutex_unlock(&dev->ns_lock);
	if (ret) {
		kfree(ns);
		return ret == -EBUSY ? -EEXIST : ret;
	}
	return 0;
}

static int kvc_ns_destroy(struct kvc_dev *dev, u32 ns_id)
{
	struct kvc_ns *ns;
	int ret = 0;

	mutex_lock(&dev->ns_lock);
	ns = xa_load(&dev->namespaces, ns_id);
	if (!ns)
		ret = -ENOENT;
	else if (ns->nr_blocks)
		ret = -EBUSY;
	else
		xa_erase(&dev->namespaces, ns_id);
	mutex_unlock(&dev->ns_lock);
	if (!ret)
		kfree_rcu(ns, rcu);
	return ret;
}

/* KVCACHE_IOC_NS_CREATE and KVCACHE_IOC_NS_DESTROY */
int kvc_ioctl_ns(struct kvc_file *kf, void __user *uarg, bool create)
{
	struct kvcache_ns arg;
	int ret;

	ret = kvc_copy_in(&arg, sizeof(arg), KVCACHE_NS_SIZE_VER1, uarg);
	if (ret)
		return ret;
	if (kvc_check_unused(arg.flags, 0, arg.reserved, sizeof(arg.reserved)))
		return -EINVAL;
	if (!arg.ns_id || arg.ns_id > KVCACHE_NS_MAX)
		return -EINVAL;
	if (!create && (arg.uid || arg.gid || arg.mode))
		return -EINVAL;
	if (arg.mode & ~0777)
		return -EINVAL;
	if (!kvc_is_privileged(kf))
		return -EPERM;

	ret = create ? kvc_ns_create(kf->dev, &arg)
		     : kvc_ns_destroy(kf->dev, arg.ns_id);
	if (ret)
		return ret;
	return kvc_copy_out(uarg, &arg, sizeof(arg));
}

/* KVCACHE_IOC_HELPER: this file becomes the helper until it is closed. */
int kvc_ioctl_helper(struct kvc_file *kf, void __user *uarg)
{
	struct kvcache_helper arg;
	int ret;

	ret = kvc_copy_in(&arg, sizeof(arg), KVCACHE_HELPER_SIZE_VER1, uarg);
	if (ret)
		return ret;
	if (kvc_check_unused(arg.flags, 0, arg.reserved, sizeof(arg.reserved)))
		return -EINVAL;
	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	/* Asking twice from the helper file itself is harmless. */
	if (cmpxchg(&kf->dev->helper, NULL, kf) &&
	    READ_ONCE(kf->dev->helper) != kf)
		return -EBUSY;
	return kvc_copy_out(uarg, &arg, sizeof(arg));
}

/* Module unload: no file is open and no block is in use. */
void kvc_ns_destroy_all(struct kvc_dev *dev)
{
	struct kvc_ns *ns;
	unsigned long id;

	xa_for_each(&dev->namespaces, id, ns) {
		xa_erase(&dev->namespaces, id);
		kfree_rcu(ns, rcu);
	}
	xa_destroy(&dev->namespaces);
}
