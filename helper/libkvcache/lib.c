// SPDX-License-Identifier: GPL-2.0
/*
 * libkvcache: opening and closing a client, namespaces, keys, counters
 * (libkvcache.h is the API, lib_priv.h the internals and their locking).
 */
#include "lib_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "keys.h"

static int copy_str(char *dst, size_t size, const char *src)
{
	if (strlen(src) >= size)
		return -ENAMETOOLONG;
	strcpy(dst, src);
	return 0;
}

static int open_device(struct kvcache *c)
{
	struct kvcache_info info = { .size = sizeof(info) };

	c->dev = open(c->device, O_RDWR | O_CLOEXEC);
	c->dev_writable = c->dev >= 0;
	/* A reader may use the cache without the right to fill it. */
	if (c->dev < 0 && (errno == EACCES || errno == EPERM))
		c->dev = open(c->device, O_RDONLY | O_CLOEXEC);
	if (c->dev < 0)
		return -errno;
	if (ioctl(c->dev, KVCACHE_IOC_INFO, &info))
		return -errno;
	/* The daemon and the device must describe the same pool. */
	if (info.block_size != c->block_size || info.nr_blocks != c->nr_blocks)
		return -EPROTO;
	if ((info.features & KVCACHE_FEAT_VIEW) && !c->fast_off) {
		void *v;

		c->view_len = (size_t)(info.block_size * info.nr_blocks);
		v = mmap(NULL, c->view_len, PROT_READ, MAP_SHARED, c->dev,
			 (off_t)KVCACHE_VIEW_OFFSET);
		/* Without it, loads map block by block as before. */
		c->view = v == MAP_FAILED ? NULL : v;
	}
	return 0;
}

LIB_EXPORT int kvcache_open(const struct kvcache_options *opts,
			    struct kvcache **out)
{
	struct kvcache_options o = { 0 };
	const char *sock;
	struct lib_conn *k;
	struct kvcache *c;
	int ret;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (opts)
		o = *opts;
	if (o.connections > LIB_MAX_THREADS || o.workers > LIB_MAX_THREADS ||
	    o.timeout_ms < 0)
		return -EINVAL;
	sock = o.socket ? o.socket : getenv("KVCACHE_SOCKET");
	if (!sock || !*sock)
		sock = KVCACHE_DEFAULT_SOCKET;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->dev = -1;
	c->fast_pidfd = -1;
	/* The fast path is on unless the environment turns it off. */
	c->fast_off = getenv("KVCACHE_FAST_PATH") &&
		      !strcmp(getenv("KVCACHE_FAST_PATH"), "0");
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	c->timeout_ms = o.timeout_ms ? o.timeout_ms : LIB_DEFAULT_TIMEOUT;
	ret = copy_str(c->socket, sizeof(c->socket), sock);
	if (!ret)
		ret = copy_str(c->device, sizeof(c->device),
			       o.device ? o.device : "/dev/kvcache");
	if (!ret && o.g3_directory)
		ret = copy_str(c->g3_dir, sizeof(c->g3_dir), o.g3_directory);
	if (!ret)
		ret = lib_conn_init(c, o.connections ? o.connections :
					   LIB_DEFAULT_CONNS);
	if (ret)
		goto err;
	/* Connect once now, so a missing daemon is an error of open. */
	k = lib_conn_get(c, 0, &ret);
	if (!k)
		goto err;
	lib_conn_put(c, k);
	if (c->mode == KVC_PROTO_MODE_KERNEL) {
		ret = open_device(c);
		if (ret)
			goto err;
	}
	ret = lib_async_start(c, o.workers ? o.workers : LIB_DEFAULT_WORKERS);
	if (ret)
		goto err;
	*out = c;
	return 0;
err:
	kvcache_close(c);
	return ret;
}

LIB_EXPORT void kvcache_close(struct kvcache *c)
{
	struct kvcache_namespace *ns, *next;
	struct lib_old_map *m, *mn;

	if (!c)
		return;
	lib_async_stop(c);
	if (c->conns)
		lib_touch_flush(c);
	lib_conn_fini(c);
	lib_fast_fini(c);
	for (ns = c->namespaces; ns; ns = next) {
		next = ns->next;
		free(ns);
	}
	for (m = c->old_maps; m; m = mn) {
		mn = m->next;
		munmap(m->addr, m->len);
		free(m);
	}
	if (c->pool)
		munmap(c->pool, c->pool_len);
	free(c->pool_touched);
	if (c->view)
		munmap(c->view, c->view_len);
	if (c->dev >= 0)
		close(c->dev);
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

LIB_EXPORT int kvcache_get_info(struct kvcache *c,
				struct kvcache_client_info *info)
{
	if (!c || !info)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	info->mode = c->mode == KVC_PROTO_MODE_KERNEL ? KVCACHE_MODE_KERNEL :
							 KVCACHE_MODE_MEMFD;
	info->max_batch = c->max_batch;
	info->block_size = c->block_size;
	info->nr_blocks = c->nr_blocks;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

LIB_EXPORT const char *kvcache_strerror(int err)
{
	switch (-err) {
	case 0:
		return "success";
	case ENOENT:
		return "not found (a key, a parent key, or kvcached's socket: "
		       "is kvcached running?)";
	case ECONNREFUSED:
		return "kvcached is not accepting connections (not running?)";
	case ECONNRESET:
		return "the connection to kvcached broke (daemon restarted or "
		       "stopped); the next call reconnects";
	case ENOTCONN:
		return "not connected to kvcached";
	case ETIMEDOUT:
		return "kvcached did not answer in time";
	case EPROTO:
		return "kvcached's reply made no sense (protocol error)";
	case EPROTONOSUPPORT:
		return "kvcached speaks no protocol version this library does";
	case EACCES:
		return "permission denied (namespace, socket or device)";
	case EPERM:
		return "operation not permitted";
	case EINVAL:
		return "invalid argument";
	case ENOSPC:
		return "the pool has no free block";
	case EAGAIN:
		return "not admitted yet (the cache admits a block once it has "
		       "been wanted often enough)";
	case ESTALE:
		return "the block was evicted";
	case EOPNOTSUPP:
		return "not supported in this mode or configuration";
	case ENOMEM:
		return "out of memory";
	case ESHUTDOWN:
		return "the client is closing";
	default:
		return err < 0 ? strerror(-err) : "not an error code";
	}
}

LIB_EXPORT int kvcache_stat(struct kvcache *c, const char *name,
			    uint64_t *value)
{
	struct kvc_stat st;
	struct lib_conn *k;
	size_t pos = 0;
	int ret;

	if (!c || !name || !value)
		return -EINVAL;
	/* Our own fast-path hits count before we read the counters. */
	lib_touch_flush(c);
	k = lib_conn_get(c, -1, &ret);
	if (!k)
		return ret;
	ret = lib_call(c, k, kvc_proto_encode_stats(LIB_TX(k)),
		       KVC_MSG_STATS_REPLY);
	if (!ret) {
		ret = -ENOENT;
		while (kvc_proto_stats_next(&k->msg.stats_reply, &pos, &st))
			if (st.name_len == strlen(name) &&
			    !memcmp(st.name, name, st.name_len)) {
				*value = st.value;
				ret = 0;
				break;
			}
	}
	lib_conn_put(c, k);
	return ret;
}

/* The namespace's salt, from the daemon (NS_SALT, protocol version 2). */
static int ns_salt(struct kvcache *c, uint32_t ns_id,
		   uint8_t salt[KVC_PROTO_SALT_SIZE])
{
	struct kvc_ns_salt req = { .ns_id = ns_id };
	struct lib_conn *k;
	int ret;

	k = lib_conn_get(c, -1, &ret);
	if (!k)
		return ret;
	if (k->version < KVC_PROTO_VERSION_NS_SALT) {
		lib_conn_put(c, k);
		return -EPROTONOSUPPORT;
	}
	ret = lib_call(c, k, kvc_proto_encode_ns_salt(LIB_TX(k), &req),
		       KVC_MSG_NS_SALT_REPLY);
	if (!ret && k->msg.ns_salt_reply.ns_id != ns_id)
		ret = -EPROTO;
	if (!ret)
		memcpy(salt, k->msg.ns_salt_reply.salt, KVC_PROTO_SALT_SIZE);
	lib_conn_put(c, k);
	return ret;
}

LIB_EXPORT int kvcache_ns_open_flags(struct kvcache *c, uint32_t ns_id,
				     const struct kvcache_identity *id,
				     size_t block_bytes, uint32_t flags,
				     struct kvcache_namespace **out)
{
	uint8_t salt[KVC_PROTO_SALT_SIZE], seed[KVCACHE_KEY_SIZE];
	struct kvcache_namespace *ns;
	struct kvc_ns_identity kid;
	int ret;

	if (!c || !id || !out || !ns_id || ns_id > KVCACHE_NS_MAX ||
	    !block_bytes || block_bytes > c->block_size ||
	    (id->salt_len && !id->salt) || (flags & ~KVCACHE_NS_NO_SALT))
		return -EINVAL;
	kid = (struct kvc_ns_identity) {
		.model = id->model,
		.weights_revision = id->weights_revision,
		.tokenizer = id->tokenizer,
		.kv_layout = id->kv_layout,
		.kv_dtype = id->kv_dtype,
		.lora = id->lora,
		.salt = id->salt,
		.salt_len = id->salt_len,
		.tokens_per_block = id->tokens_per_block,
		.tp_rank = id->tp_rank, .tp_size = id->tp_size,
		.pp_rank = id->pp_rank, .pp_size = id->pp_size,
	};
	/* A bad identity is refused before asking the daemon anything. */
	ret = kvc_ns_seed(&kid, seed);
	if (ret)
		return ret;
	if (!(flags & KVCACHE_NS_NO_SALT)) {
		ret = ns_salt(c, ns_id, salt);
		if (ret)
			return ret;
		kid.ns_salt = salt;
		kid.ns_salt_len = sizeof(salt);
	}
	ns = calloc(1, sizeof(*ns));
	if (!ns)
		return -ENOMEM;
	ret = kvc_ns_seed(&kid, ns->seed);
	if (ret) {
		free(ns);
		return ret;
	}
	ns->c = c;
	ns->ns_id = ns_id;
	ns->tokens_per_block = id->tokens_per_block;
	ns->block_bytes = block_bytes;
	pthread_mutex_lock(&c->lock);
	ns->next = c->namespaces;
	c->namespaces = ns;
	pthread_mutex_unlock(&c->lock);
	/*
	 * Kernel mode: this namespace's fast index now, so the first hits
	 * need no round trip either. Refused (no read permission, an older
	 * daemon, the index off) is no error: the daemon answers instead.
	 */
	if (c->mode == KVC_PROTO_MODE_KERNEL && c->view && !c->fast_off)
		lib_conn_fast_ns(c, ns_id);
	*out = ns;
	return 0;
}

LIB_EXPORT int kvcache_ns_open(struct kvcache *c, uint32_t ns_id,
			       const struct kvcache_identity *id,
			       size_t block_bytes,
			       struct kvcache_namespace **out)
{
	return kvcache_ns_open_flags(c, ns_id, id, block_bytes, 0, out);
}

LIB_EXPORT void kvcache_ns_close(struct kvcache_namespace *ns)
{
	struct kvcache_namespace **p;
	struct kvcache *c;

	if (!ns)
		return;
	c = ns->c;
	pthread_mutex_lock(&c->lock);
	for (p = &c->namespaces; *p; p = &(*p)->next)
		if (*p == ns) {
			*p = ns->next;
			break;
		}
	pthread_mutex_unlock(&c->lock);
	free(ns);
}

LIB_EXPORT size_t kvcache_ns_keys(const struct kvcache_namespace *ns,
				  const uint32_t *tokens, size_t ntokens,
				  uint8_t *keys, size_t max_keys)
{
	if (!ns || (!tokens && ntokens) || (!keys && max_keys))
		return 0;
	return kvc_chain_keys(ns->seed, tokens, ntokens, ns->tokens_per_block,
			      (uint8_t (*)[KVCACHE_KEY_SIZE])keys, max_keys);
}

LIB_EXPORT uint32_t
kvcache_ns_tokens_per_block(const struct kvcache_namespace *ns)
{
	return ns ? ns->tokens_per_block : 0;
}

LIB_EXPORT size_t kvcache_ns_block_bytes(const struct kvcache_namespace *ns)
{
	return ns ? ns->block_bytes : 0;
}
