// SPDX-License-Identifier: GPL-2.0
/*
 * Providers: devices whose memory transfers may target.
 *
 * A provider is one PCI device with P2PDMA memory, in one of two kinds:
 *  - "bar": kvcache.ko's own PCI driver (kvcache_bar.c) bound to the
 *    device registers one of its BARs as P2PDMA memory and allocates all of
 *    it, so a region is a window at a chosen offset, as GPU memory is;
 *  - "p2pmem": another driver already publishes P2PDMA memory (the NVMe
 *    driver does with a controller memory buffer); an admin adds it by
 *    writing the PCI name to providers/add, and each region is a fresh,
 *    zeroed allocation from that driver's pool.
 *
 * Every provider has a directory /sys/class/misc/kvcache/providers/<id>
 * with its counters; the id is what KVCACHE_IOC_REGION_REGISTER takes.
 * Documentation/ABI/testing/sysfs-kvcache lists the files.
 *
 * Removal (unbind, providers/remove, module unload) marks the provider
 * dead, waits for the transfers touching its memory at that moment and
 * then revokes the memory of every region still registered; the regions
 * themselves stay until their owners let go, and transfers on them fail
 * with -ENODEV. What removal waits for is bounded: a bounce transfer
 * holds the provider only while the CPU copies (not while its file I/O
 * runs, which a hung file system could make endless), a P2P one for one
 * block-layer request, which the disk's timeout bounds. A
 * "p2pmem" provider is removed before its device's driver unbinds (a PCI
 * bus notifier), since that driver frees the memory on unbind.
 *
 * Locking: kvc_providers.lock (mutex) guards the registry list; each
 * provider's ->lock guards its regions, its dead flag and the memory of
 * its regions. A file's lock (kf->lock) nests outside ->lock. No lock is
 * held while waiting for transfers.
 */
#include <linux/device.h>
#include <linux/kernel.h>
#include <linux/pci.h>
#include <linux/pci-p2pdma.h>
#include <linux/slab.h>
#include <linux/sysfs.h>

#include "kvcache.h"
#include "kvcache_p2p.h"

/* How often a removal still waiting for transfers says so. */
#define KVC_PROVIDER_WAIT_WARN	(10 * HZ)

static struct {
	struct mutex lock;		/* ->list */
	struct list_head list;
	struct ida ids;
	struct kobject *dir;		/* .../kvcache/providers */
} kvc_providers = {
	.lock = __MUTEX_INITIALIZER(kvc_providers.lock),
	.list = LIST_HEAD_INIT(kvc_providers.list),
};

static struct kvc_provider *to_provider(struct kobject *kobj)
{
	return container_of(kobj, struct kvc_provider, kobj);
}

static ssize_t kind_show(struct kobject *kobj, struct kobj_attribute *attr,
			 char *buf)
{
	return sysfs_emit(buf, "%s\n", to_provider(kobj)->kind ==
			  KVC_PROVIDER_BAR ? "bar" : "p2pmem");
}

static ssize_t bar_show(struct kobject *kobj, struct kobj_attribute *attr,
			char *buf)
{
	return sysfs_emit(buf, "%d\n", to_provider(kobj)->bar);
}

static ssize_t size_show(struct kobject *kobj, struct kobj_attribute *attr,
			 char *buf)
{
	return sysfs_emit(buf, "%llu\n", to_provider(kobj)->size);
}

static ssize_t regions_show(struct kobject *kobj, struct kobj_attribute *attr,
			    char *buf)
{
	struct kvc_provider *prov = to_provider(kobj);
	u32 n;

	mutex_lock(&prov->lock);
	n = prov->nr_regions;
	mutex_unlock(&prov->lock);
	return sysfs_emit(buf, "%u\n", n);
}

static ssize_t p2p_bytes_show(struct kobject *kobj,
			      struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%lld\n",
			  atomic64_read(&to_provider(kobj)->p2p_bytes));
}

static ssize_t bounce_bytes_show(struct kobject *kobj,
				 struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%lld\n",
			  atomic64_read(&to_provider(kobj)->bounce_bytes));
}

static ssize_t cpu_copy_bytes_show(struct kobject *kobj,
				   struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%lld\n",
			  atomic64_read(&to_provider(kobj)->cpu_copy_bytes));
}

static ssize_t errors_show(struct kobject *kobj, struct kobj_attribute *attr,
			   char *buf)
{
	return sysfs_emit(buf, "%lld\n",
			  atomic64_read(&to_provider(kobj)->errors));
}

/*
 * One line per NVMe controller in the system: its PCI name and the
 * P2PDMA distance from this provider, -1 when P2P between them is not
 * possible (transfers with files on it take the bounce path).
 */
static ssize_t distances_show(struct kobject *kobj,
			      struct kobj_attribute *attr, char *buf)
{
	struct kvc_provider *prov = to_provider(kobj);
	struct pci_dev *nvme = NULL;
	int len = 0;

	while ((nvme = pci_get_class(PCI_CLASS_STORAGE_EXPRESS, nvme))) {
		/* A full page ends the table rather than overflowing it. */
		if (len > PAGE_SIZE - 32) {
			pci_dev_put(nvme);
			break;
		}
		len += sysfs_emit_at(buf, len, "%s %d\n", pci_name(nvme),
				     pci_p2pdma_distance(prov->pdev,
							 &nvme->dev, false));
	}
	return len;
}

static struct kobj_attribute kvc_prov_attrs[] = {
	__ATTR_RO(kind),
	__ATTR_RO(bar),
	__ATTR_RO(size),
	__ATTR_RO(regions),
	__ATTR_RO(p2p_bytes),
	__ATTR_RO(bounce_bytes),
	__ATTR_RO(cpu_copy_bytes),
	__ATTR_RO(errors),
	__ATTR_RO(distances),
};

static struct attribute *kvc_prov_attr_list[ARRAY_SIZE(kvc_prov_attrs) + 1];

static const struct attribute_group kvc_prov_group = {
	.attrs = kvc_prov_attr_list,
};

static const struct attribute_group *kvc_prov_groups[] = {
	&kvc_prov_group,
	NULL
};

static void kvc_provider_release(struct kobject *kobj)
{
	struct kvc_provider *prov = to_provider(kobj);

	WARN_ON(!list_empty(&prov->regions) || prov->base);
	pci_dev_put(prov->pdev);
	ida_free(&kvc_providers.ids, prov->id);
	mutex_destroy(&prov->lock);
	kfree(prov);
}

static const struct kobj_type kvc_provider_ktype = {
	.release	= kvc_provider_release,
	.sysfs_ops	= &kobj_sysfs_ops,
	.default_groups	= kvc_prov_groups,
};

/* The registered provider with this id, referenced; NULL if none. */
struct kvc_provider *kvc_provider_get(u32 id)
{
	struct kvc_provider *prov, *found = NULL;

	mutex_lock(&kvc_providers.lock);
	list_for_each_entry(prov, &kvc_providers.list, node) {
		if (prov->id == id) {
			found = prov;
			kobject_get(&prov->kobj);
			break;
		}
	}
	mutex_unlock(&kvc_providers.lock);
	return found;
}

void kvc_provider_put(struct kvc_provider *prov)
{
	kobject_put(&prov->kobj);
}

static struct kvc_provider *kvc_provider_find_pdev(struct pci_dev *pdev)
{
	struct kvc_provider *prov;

	lockdep_assert_held(&kvc_providers.lock);
	list_for_each_entry(prov, &kvc_providers.list, node)
		if (prov->pdev == pdev)
			return prov;
	return NULL;
}

/**
 * kvc_provider_add() - make a device's P2PDMA memory a provider
 * @pdev: the device
 * @kind: bar or p2pmem
 * @bar: for KVC_PROVIDER_BAR, the BAR; -1 otherwise
 * @base: for KVC_PROVIDER_BAR, the whole BAR as allocated P2PDMA memory
 * @size: for KVC_PROVIDER_BAR, its length; 0 otherwise
 *
 * Return: the provider (the registry holds it until kvc_provider_remove())
 * or an ERR_PTR: -EEXIST (the device already is one), -ENOMEM.
 */
struct kvc_provider *kvc_provider_add(struct pci_dev *pdev,
				      enum kvc_provider_kind kind, int bar,
				      void *base, u64 size)
{
	struct kvc_provider *prov;
	int ret;

	if (!kvc_providers.dir)
		return ERR_PTR(-ENODEV);
	prov = kzalloc(sizeof(*prov), GFP_KERNEL);
	if (!prov)
		return ERR_PTR(-ENOMEM);
	ret = ida_alloc_max(&kvc_providers.ids, INT_MAX, GFP_KERNEL);
	if (ret < 0) {
		kfree(prov);
		return ERR_PTR(ret);
	}
	prov->id = ret;
	prov->kind = kind;
	prov->pdev = pci_dev_get(pdev);
	prov->bar = bar;
	prov->base = base;
	prov->size = size;
	mutex_init(&prov->lock);
	INIT_LIST_HEAD(&prov->regions);
	init_waitqueue_head(&prov->idle);
	INIT_LIST_HEAD(&prov->node);

	mutex_lock(&kvc_providers.lock);
	if (kvc_provider_find_pdev(pdev)) {
		ret = -EEXIST;
		goto err;
	}
	/* From here on the kobject owns prov: errors free it through put. */
	ret = kobject_init_and_add(&prov->kobj, &kvc_provider_ktype,
				   kvc_providers.dir, "%u", prov->id);
	if (!ret)
		ret = sysfs_create_link(&prov->kobj, &pdev->dev.kobj, "device");
	if (ret) {
		mutex_unlock(&kvc_providers.lock);
		prov->base = NULL;	/* the caller still owns it */
		kobject_put(&prov->kobj);
		return ERR_PTR(ret);
	}
	list_add_tail(&prov->node, &kvc_providers.list);
	mutex_unlock(&kvc_providers.lock);
	kobject_uevent(&prov->kobj, KOBJ_ADD);
	pci_info(pdev, "kvcache: provider %u (%s)\n", prov->id,
		 kind == KVC_PROVIDER_BAR ? "bar" : "p2pmem");
	return prov;

err:
	mutex_unlock(&kvc_providers.lock);
	pci_dev_put(pdev);
	ida_free(&kvc_providers.ids, prov->id);
	mutex_destroy(&prov->lock);
	kfree(prov);
	return ERR_PTR(ret);
}

/* A transfer is about to use the provider's memory: false once removed. */
bool kvc_provider_begin_io(struct kvc_provider *prov)
{
	bool live;

	mutex_lock(&prov->lock);
	live = !prov->dead;
	if (live)
		atomic_inc(&prov->inflight);
	mutex_unlock(&prov->lock);
	return live;
}

void kvc_provider_end_io(struct kvc_provider *prov)
{
	if (atomic_dec_and_test(&prov->inflight))
		wake_up(&prov->idle);
}

/**
 * kvc_provider_remove() - take a provider away
 * @prov: a provider kvc_provider_add() returned
 *
 * Waits for running transfers on its memory, revokes the memory of its
 * regions and gives a "bar" provider's BAR back to its pool. The device
 * may go once this returns. Removing a provider twice is harmless.
 */
void kvc_provider_remove(struct kvc_provider *prov)
{
	struct kvc_region *region;
	bool listed;

	mutex_lock(&kvc_providers.lock);
	listed = !list_empty(&prov->node);
	list_del_init(&prov->node);
	mutex_unlock(&kvc_providers.lock);
	if (!listed)
		return;

	mutex_lock(&prov->lock);
	WRITE_ONCE(prov->dead, true);
	mutex_unlock(&prov->lock);
	/*
	 * Only the CPU copies of the bounce path and P2P requests hold the
	 * provider (kvcache_xfer.c): never a wait on a file system, so this
	 * ends once the block layer completes or times out what the disk
	 * has. Say so if it takes long rather than sit silent.
	 */
	while (!wait_event_timeout(prov->idle, !atomic_read(&prov->inflight),
				   KVC_PROVIDER_WAIT_WARN))
		pci_warn(prov->pdev,
			 "kvcache: provider %u: removal waits for %d P2P transfers\n",
			 prov->id, atomic_read(&prov->inflight));

	mutex_lock(&prov->lock);
	list_for_each_entry(region, &prov->regions, prov_node)
		kvc_region_release_memory(region);
	if (prov->base) {
		pci_free_p2pmem(prov->pdev, prov->base, prov->size);
		prov->base = NULL;
	}
	mutex_unlock(&prov->lock);

	pci_info(prov->pdev, "kvcache: provider %u removed\n", prov->id);
	kobject_del(&prov->kobj);
	kobject_put(&prov->kobj);
}

/*
 * Take a provider for removal, referenced: the "p2pmem" provider of @pdev,
 * or with @pdev NULL any provider at all. NULL when there is none.
 */
static struct kvc_provider *kvc_provider_take(struct pci_dev *pdev)
{
	struct kvc_provider *prov;

	mutex_lock(&kvc_providers.lock);
	if (pdev)
		prov = kvc_provider_find_pdev(pdev);
	else
		prov = list_first_entry_or_null(&kvc_providers.list,
						struct kvc_provider, node);
	if (prov && pdev && prov->kind != KVC_PROVIDER_P2PMEM)
		prov = NULL;	/* kvcache_bar.c removes its own */
	if (prov)
		kobject_get(&prov->kobj);
	mutex_unlock(&kvc_providers.lock);
	return prov;
}

static int kvc_pci_notify(struct notifier_block *nb, unsigned long action,
			  void *data)
{
	struct kvc_provider *prov;

	if (action != BUS_NOTIFY_UNBIND_DRIVER)
		return NOTIFY_DONE;
	prov = kvc_provider_take(to_pci_dev(data));
	if (prov) {
		kvc_provider_remove(prov);
		kvc_provider_put(prov);
	}
	return NOTIFY_OK;
}

static struct notifier_block kvc_pci_nb = {
	.notifier_call = kvc_pci_notify,
};

/* providers/add: "DDDD:BB:DD.F" of a device that publishes p2pmem. */
static ssize_t add_store(struct kobject *kobj, struct kobj_attribute *attr,
			 const char *buf, size_t count)
{
	unsigned int domain, bus, slot, fn;
	struct kvc_provider *prov;
	struct pci_dev *pdev;
	char name[32], end;

	if (count >= sizeof(name))
		return -EINVAL;
	memcpy(name, buf, count);
	name[count] = '\0';
	if (sscanf(strim(name), "%x:%x:%x.%x%c", &domain, &bus, &slot, &fn,
		   &end) != 4 || bus > 0xff || slot > 0x1f || fn > 7)
		return -EINVAL;
	pdev = pci_get_domain_bus_and_slot(domain, bus, PCI_DEVFN(slot, fn));
	if (!pdev)
		return -ENODEV;
	/*
	 * Holding the device lock keeps its driver bound while we look: the
	 * unbind notifier cannot run between the check and the add.
	 */
	device_lock(&pdev->dev);
	if (!pdev->dev.driver || !kvc_pci_has_p2pmem(pdev))
		prov = ERR_PTR(-EOPNOTSUPP);
	else
		prov = kvc_provider_add(pdev, KVC_PROVIDER_P2PMEM, -1, NULL,
					0);
	device_unlock(&pdev->dev);
	pci_dev_put(pdev);
	return IS_ERR(prov) ? PTR_ERR(prov) : count;
}

/* providers/remove: the id of a "p2pmem" provider. */
static ssize_t remove_store(struct kobject *kobj, struct kobj_attribute *attr,
			    const char *buf, size_t count)
{
	struct kvc_provider *prov;
	u32 id;
	int ret;

	ret = kstrtou32(buf, 10, &id);
	if (ret)
		return ret;
	prov = kvc_provider_get(id);
	if (!prov)
		return -ENOENT;
	if (prov->kind != KVC_PROVIDER_P2PMEM) {
		ret = -EPERM;	/* unbind the device from "kvcache" instead */
	} else {
		kvc_provider_remove(prov);
		ret = count;
	}
	kvc_provider_put(prov);
	return ret;
}

static struct kobj_attribute kvc_add_attr = __ATTR_WO(add);
static struct kobj_attribute kvc_remove_attr = __ATTR_WO(remove);

static const struct attribute *kvc_dir_attrs[] = {
	&kvc_add_attr.attr,
	&kvc_remove_attr.attr,
	NULL
};

int kvc_providers_init(struct kvc_dev *dev)
{
	struct kobject *dir;
	int i, ret;

	for (i = 0; i < ARRAY_SIZE(kvc_prov_attrs); i++)
		kvc_prov_attr_list[i] = &kvc_prov_attrs[i].attr;
	ida_init(&kvc_providers.ids);
	dir = kobject_create_and_add("providers", &dev->misc.this_device->kobj);
	if (!dir)
		return -ENOMEM;
	ret = sysfs_create_files(dir, kvc_dir_attrs);
	if (ret)
		goto err_dir;
	ret = bus_register_notifier(&pci_bus_type, &kvc_pci_nb);
	if (ret)
		goto err_dir;
	kvc_providers.dir = dir;
	ret = kvc_bar_driver_register();
	if (ret)
		goto err_nb;
	return 0;

err_nb:
	kvc_providers.dir = NULL;
	bus_unregister_notifier(&pci_bus_type, &kvc_pci_nb);
err_dir:
	kobject_put(dir);
	return ret;
}

/* Module unload: no file is open, so no region or transfer is left. */
void kvc_providers_exit(void)
{
	struct kvc_provider *prov;

	kvc_bar_driver_unregister();
	bus_unregister_notifier(&pci_bus_type, &kvc_pci_nb);
	while ((prov = kvc_provider_take(NULL))) {
		kvc_provider_remove(prov);
		kvc_provider_put(prov);
	}
	kobject_put(kvc_providers.dir);
	kvc_providers.dir = NULL;
	ida_destroy(&kvc_providers.ids);
}
