// SPDX-License-Identifier: GPL-2.0
/*
 * The "kvcache" PCI driver: a device's BAR as a "bar" provider.
 *
 * The driver matches no device by itself; an admin binds it to one:
 *
 *   echo kvcache > /sys/bus/pci/devices/0000:04:00.0/driver_override
 *   echo 0000:04:00.0 > /sys/bus/pci/drivers_probe
 *
 * It takes the device's largest memory BAR, registers it as P2PDMA memory
 * and allocates all of it at once, so nothing else (not even the device's
 * p2pmem/allocate file) can hand the same memory out, and a region is a
 * window at a chosen offset, as GPU memory is. On the test bench the
 * device is QEMU's ivshmem, whose BAR 2 is backed by a host file.
 *
 * Unbinding removes the provider; remove() returns only once transfers
 * into the BAR have finished and the memory is back in the P2PDMA pool,
 * which the PCI core then tears down.
 */
#include <linux/pci.h>
#include <linux/pci-p2pdma.h>

#include "kvcache.h"
#include "kvcache_p2p.h"

/* The largest memory BAR: the device memory on a GPU and on ivshmem. */
static int kvc_bar_pick(struct pci_dev *pdev)
{
	resource_size_t best_len = 0;
	int bar, best = -1;

	for (bar = 0; bar < PCI_STD_NUM_BARS; bar++) {
		if (!(pci_resource_flags(pdev, bar) & IORESOURCE_MEM))
			continue;
		if (pci_resource_len(pdev, bar) > best_len) {
			best_len = pci_resource_len(pdev, bar);
			best = bar;
		}
	}
	return best_len >= PAGE_SIZE ? best : -1;
}

static int kvc_bar_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct kvc_provider *prov;
	u64 size;
	void *base;
	int bar, ret;

	if (!IS_ENABLED(CONFIG_PCI_P2PDMA))
		return -EOPNOTSUPP;
	bar = kvc_bar_pick(pdev);
	if (bar < 0)
		return -ENODEV;
	/* The BAR does not decode until the device is enabled. */
	ret = pcim_enable_device(pdev);
	if (ret)
		return ret;
	size = pci_resource_len(pdev, bar);
	ret = pci_p2pdma_add_resource(pdev, bar, 0, 0);
	if (ret) {
		pci_err(pdev, "kvcache: BAR %d is not usable for P2PDMA: %d\n",
			bar, ret);
		return ret;
	}
	base = pci_alloc_p2pmem(pdev, size);
	if (!base)
		return -ENOMEM;
	/* The pool was empty, so the allocation is the BAR from its start. */
	if (pci_p2pmem_virt_to_bus(pdev, base) != pci_bus_address(pdev, bar)) {
		pci_free_p2pmem(pdev, base, size);
		return -EBUSY;
	}
	prov = kvc_provider_add(pdev, KVC_PROVIDER_BAR, bar, base, size);
	if (IS_ERR(prov)) {
		pci_free_p2pmem(pdev, base, size);
		return PTR_ERR(prov);
	}
	pci_set_drvdata(pdev, prov);
	pci_info(pdev, "kvcache: BAR %d, %llu bytes, is provider %u\n", bar,
		 size, prov->id);
	return 0;
}

static void kvc_bar_remove(struct pci_dev *pdev)
{
	kvc_provider_remove(pci_get_drvdata(pdev));
}

static struct pci_driver kvc_bar_driver = {
	.name		= KVCACHE_DEVICE_NAME,
	.probe		= kvc_bar_probe,
	.remove		= kvc_bar_remove,
};

int kvc_bar_driver_register(void)
{
	return pci_register_driver(&kvc_bar_driver);
}

void kvc_bar_driver_unregister(void)
{
	pci_unregister_driver(&kvc_bar_driver);
}
