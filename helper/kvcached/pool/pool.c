// SPDX-License-Identifier: GPL-2.0
/*
 * pool: which backend holds the pool (pool.h).
 */
#include "pool.h"

#include <errno.h>
#include <string.h>

#include "log.h"

/* [daemon] mode: auto takes the module's pool when the device is there. */
int kvc_pool_open(const struct kvc_pool_config *cfg, struct kvc_pool **out)
{
	int ret;

	if (cfg->want != KVC_POOL_WANT_MEMFD) {
		ret = kvc_pool_kernel_open(cfg, out);
		if (!ret)
			return 0;
		if (cfg->want == KVC_POOL_WANT_KERNEL || ret != -ENOENT) {
			kvc_err("%s: %s", cfg->device, strerror(-ret));
			return ret;
		}
	}
	return kvc_pool_memfd_open(cfg, out);
}
