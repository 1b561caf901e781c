/* SPDX-License-Identifier: GPL-2.0 */
/*
 * msgpack: an encoder of the MessagePack format (https://msgpack.org/),
 * the part kvcached's KV events need (helper/kvcached/events.c): arrays,
 * maps, strings, byte strings, unsigned integers, nil and float 64. Each value
 * is written in its shortest form, as the specification asks, so an
 * encoding is unique and a test can compare bytes.
 *
 * The buffer grows as needed; an allocation that fails sets err and every
 * later write is a no-op, so a caller checks once, at the end. No state
 * outside the struct: any thread, one struct per thread.
 */
#ifndef KVC_MSGPACK_H
#define KVC_MSGPACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kvc_mp {
	uint8_t *buf;
	size_t len, cap;
	bool err;			/* out of memory: buf is incomplete */
};

void kvc_mp_init(struct kvc_mp *m);
void kvc_mp_free(struct kvc_mp *m);
/* Empty again, keeping the buffer. */
void kvc_mp_reset(struct kvc_mp *m);

/* An array of n values: the next n values written are its elements. */
void kvc_mp_array(struct kvc_mp *m, uint32_t n);
/* A map of n pairs: the next 2n values are its keys and values. */
void kvc_mp_map(struct kvc_mp *m, uint32_t n);
void kvc_mp_str(struct kvc_mp *m, const char *s);
void kvc_mp_bin(struct kvc_mp *m, const void *p, uint32_t n);
void kvc_mp_uint(struct kvc_mp *m, uint64_t v);
void kvc_mp_nil(struct kvc_mp *m);
void kvc_mp_double(struct kvc_mp *m, double v);

#endif /* KVC_MSGPACK_H */
