/* SPDX-License-Identifier: GPL-2.0 */
/*
 * p2pcheck: what path a transfer between each provider and each NVMe
 * controller would take, and why (kvcachectl p2pcheck; the role gdscheck
 * plays for GPUDirect Storage).
 *
 * Everything is read from sysfs, under @root ("" for this system; a
 * directory holding a copy of the tree in the unit tests): kvcache.ko's
 * features and providers (their `distances` are the kernel's own
 * pci_p2pdma_distance()), the PCI tree (the bridges between the two
 * devices, their ACS redirect bits from config space, BAR sizes), the
 * IOMMU, and NVMe native multipath.
 */
#ifndef KVC_P2PCHECK_H
#define KVC_P2PCHECK_H

#include <stdio.h>

/*
 * Print the facts and one verdict line per provider and NVMe pair:
 *   verdict: PROVIDER_PCI -> NVME_PCI: P2P|bounce|impossible: reason
 * Returns 0, or 1 when kvcache.ko is not there to ask (said on @out).
 */
int kvc_p2pcheck(const char *root, FILE *out);

#endif /* KVC_P2PCHECK_H */
