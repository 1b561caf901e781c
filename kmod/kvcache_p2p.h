/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Device memory for transfers: providers, regions and the I/O engine.
 *
 *   kvcache_provider.c  providers: the registry, sysfs, "p2pmem" providers
 *   kvcache_bar.c       the PCI driver behind "bar" providers
 *   kvcache_region.c    regions: register, unregister, lookup
 *   kvcache_xfer.c      the transfer engine: path choice, P2P, bounce, async
 *
 * Object lifetimes:
 *  - struct kvc_provider lives in its kobject: created when a device is
 *    bound (bar) or added through sysfs (p2pmem), "removed" when the device
 *    goes (unbind, sysfs remove, module unload) and freed by the last
 *    kobject_put(). Each region holds a reference. Removal waits for the
 *    transfers touching its memory (->inflight: a CPU copy or one P2P
 *    request, never file I/O of the bounce path) and then takes the memory
 *    away from every region that is still registered: those fail with
 *    -ENODEV.
 *  - struct kvc_region: one reference for the registration (dropped by
 *    UNREGISTER or close) and one per transfer using it. Its memory stays
 *    until the last reference is gone or the provider is removed.
 *  - An async batch (struct kvc_xfer, kvcache_xfer.c) has two references:
 *    its file's ->xfers (until reaped or the file is released) and its
 *    worker. Release cancels running batches without waiting for them;
 *    the worker holds the struct kvc_file and the module until it is done,
 *    so a killed process exits at once and leaks nothing.
 */
#ifndef _KVCACHE_P2P_H
#define _KVCACHE_P2P_H

#include <linux/kobject.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/wait.h>

struct kvc_dev;
struct kvc_file;
struct pci_dev;

enum kvc_provider_kind {
	KVC_PROVIDER_BAR,	/* a BAR kvcache.ko registered as P2PDMA memory */
	KVC_PROVIDER_P2PMEM,	/* P2PDMA memory another driver publishes */
};

struct kvc_provider {
	struct kobject kobj;		/* its sysfs directory and refcount */
	u32 id;
	enum kvc_provider_kind kind;
	struct pci_dev *pdev;		/* referenced until the kobject goes */
	int bar;			/* BAR kind: which BAR, else -1 */
	u64 size;			/* bytes regions may use */
	void *base;			/* BAR kind: the whole BAR, allocated */

	struct mutex lock;		/* ->regions, ->dead, region memory */
	struct list_head regions;
	u32 nr_regions;
	/* Removed: no new transfers. Written under ->lock; read as a hint. */
	bool dead;
	atomic_t inflight;		/* copies and P2P requests on its memory */
	wait_queue_head_t idle;		/* woken when ->inflight drops to 0 */

	atomic64_t p2p_bytes;
	atomic64_t bounce_bytes;
	atomic64_t cpu_copy_bytes;	/* copied by the CPU, either way */
	atomic64_t errors;
	struct list_head node;		/* in the registry */
};

struct kvc_region {
	struct kref ref;
	u32 handle;
	struct kvc_file *owner;
	struct kvc_provider *prov;
	/* in the provider (BAR kind); a user region: the caller's address */
	u64 offset;
	u64 length;
	bool user;			/* KVCACHE_REGION_USER */
	struct mm_struct *mm;		/* user: the owner's (mmgrab) */
	void *kaddr;			/* its memory; NULL once revoked */
	struct list_head prov_node;	/* under prov->lock */
	struct list_head file_node;	/* under owner->lock */
};

/* kvcache_provider.c */
int kvc_providers_init(struct kvc_dev *dev);
void kvc_providers_exit(void);
struct kvc_provider *kvc_provider_get(u32 id);
void kvc_provider_put(struct kvc_provider *prov);
struct kvc_provider *kvc_provider_add(struct pci_dev *pdev,
				      enum kvc_provider_kind kind, int bar,
				      void *base, u64 size);
void kvc_provider_remove(struct kvc_provider *prov);
bool kvc_provider_begin_io(struct kvc_provider *prov);
void kvc_provider_end_io(struct kvc_provider *prov);

/* kvcache_bar.c */
int kvc_bar_driver_register(void);
void kvc_bar_driver_unregister(void);

/* kvcache_region.c */
int kvc_ioctl_region(struct kvc_file *kf, void __user *uarg, bool reg);
struct kvc_region *kvc_region_lookup(struct kvc_file *kf, u32 handle,
				     int *err);
void kvc_region_put(struct kvc_region *region);
void kvc_region_release_memory(struct kvc_region *region);
void kvc_regions_release(struct kvc_file *kf);

/* Most pages of a user region one transfer piece pins at once. */
#define KVC_REGION_PIN_MAX	(SZ_4M / PAGE_SIZE + 1)
long kvc_region_pin(struct kvc_region *region, u64 off, size_t len,
		    bool write, struct page **pages);
void kvc_region_unpin(struct page **pages, long nr);

/* A range of a region or block an incoming transfer is writing. */
struct kvc_inbound {
	struct list_head node;		/* in kf->inbound */
	u64 target;
	u64 start, end;
};

/* kvcache_xfer.c */
int kvc_inbound_claim(struct kvc_file *kf, struct kvc_inbound *ib, u64 target,
		      u64 off, u64 len);
void kvc_inbound_release(struct kvc_file *kf, struct kvc_inbound *ib);
int kvc_xfer_init(void);
void kvc_xfer_exit(void);
int kvc_ioctl_xfer(struct kvc_file *kf, void __user *uarg);
int kvc_ioctl_xfer_reap(struct kvc_file *kf, void __user *uarg);
void kvc_xfers_release(struct kvc_file *kf);

#endif /* _KVCACHE_P2P_H */
