/* SPDX-License-Identifier: GPL-2.0 */
/*
 * devinfo: what /dev/kvcache is and offers, for kvcachectl and the helper.
 */
#ifndef KVC_DEVINFO_H
#define KVC_DEVINFO_H

#include <stddef.h>
#include <stdint.h>

#include <linux/kvcache.h>

/* Where the module's sysfs directory lives. */
#define KVC_SYSFS_DIR "/sys/class/misc/" KVCACHE_DEVICE_NAME

/*
 * Issue KVCACHE_IOC_INFO on fd. Fills *info (which the caller need not
 * zero). Returns 0 or -errno; -EPROTO when the kernel answered with a
 * struct this program cannot use (ABI version it does not speak).
 */
int kvc_dev_info(int fd, struct kvcache_info *info);

/*
 * Names of the feature bits in features, comma-separated, unknown bits as
 * hex ("pool,netlink,0x40"); "none" for 0. Returns the length the full
 * string needs (like snprintf); out is always NUL-terminated when len > 0.
 */
size_t kvc_feature_names(uint64_t features, char *out, size_t len);

/*
 * Bytes in binary units for people: "4096" -> "4 KiB", "3145728" ->
 * "3 MiB", "1536" -> "1536 B" (exact values only, never rounded).
 */
void kvc_format_bytes(uint64_t bytes, char *out, size_t len);

/*
 * Read one value of the module's sysfs directory, e.g. "pool/block_size",
 * into out without the trailing newline. dir overrides KVC_SYSFS_DIR (for
 * tests). Returns 0 or -errno.
 */
int kvc_sysfs_read(const char *dir, const char *attr, char *out, size_t len);

#endif /* KVC_DEVINFO_H */
