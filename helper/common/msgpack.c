// SPDX-License-Identifier: GPL-2.0
/*
 * msgpack: the MessagePack encoder (see msgpack.h). Multi-byte lengths
 * and numbers are big-endian, as the format says.
 */
#include "msgpack.h"

#include <stdlib.h>
#include <string.h>

void kvc_mp_init(struct kvc_mp *m)
{
	memset(m, 0, sizeof(*m));
}

void kvc_mp_free(struct kvc_mp *m)
{
	free(m->buf);
	kvc_mp_init(m);
}

void kvc_mp_reset(struct kvc_mp *m)
{
	m->len = 0;
	m->err = false;
}

static uint8_t *room(struct kvc_mp *m, size_t n)
{
	uint8_t *p;

	if (m->err)
		return NULL;
	if (m->len + n > m->cap) {
		size_t cap = m->cap ? m->cap : 256;

		while (cap < m->len + n)
			cap *= 2;
		p = realloc(m->buf, cap);
		if (!p) {
			m->err = true;
			return NULL;
		}
		m->buf = p;
		m->cap = cap;
	}
	p = m->buf + m->len;
	m->len += n;
	return p;
}

/* A marker byte and a big-endian number of width bytes. */
static void tagged(struct kvc_mp *m, uint8_t tag, uint64_t v, int width)
{
	uint8_t *p = room(m, 1 + (size_t)width);

	if (!p)
		return;
	p[0] = tag;
	for (int i = 0; i < width; i++)
		p[1 + i] = (uint8_t)(v >> (8 * (width - 1 - i)));
}

void kvc_mp_array(struct kvc_mp *m, uint32_t n)
{
	if (n < 16)
		tagged(m, (uint8_t)(0x90 | n), 0, 0);
	else if (n <= 0xffff)
		tagged(m, 0xdc, n, 2);
	else
		tagged(m, 0xdd, n, 4);
}

void kvc_mp_map(struct kvc_mp *m, uint32_t n)
{
	if (n < 16)
		tagged(m, (uint8_t)(0x80 | n), 0, 0);
	else if (n <= 0xffff)
		tagged(m, 0xde, n, 2);
	else
		tagged(m, 0xdf, n, 4);
}

static void raw(struct kvc_mp *m, const void *p, size_t n)
{
	uint8_t *d = n ? room(m, n) : NULL;

	if (d)
		memcpy(d, p, n);
}

void kvc_mp_str(struct kvc_mp *m, const char *s)
{
	size_t n = strlen(s);

	if (n < 32)
		tagged(m, (uint8_t)(0xa0 | n), 0, 0);
	else if (n <= 0xff)
		tagged(m, 0xd9, n, 1);
	else if (n <= 0xffff)
		tagged(m, 0xda, n, 2);
	else
		tagged(m, 0xdb, n, 4);
	raw(m, s, n);
}

void kvc_mp_bin(struct kvc_mp *m, const void *p, uint32_t n)
{
	if (n <= 0xff)
		tagged(m, 0xc4, n, 1);
	else if (n <= 0xffff)
		tagged(m, 0xc5, n, 2);
	else
		tagged(m, 0xc6, n, 4);
	raw(m, p, n);
}

void kvc_mp_uint(struct kvc_mp *m, uint64_t v)
{
	if (v < 128)
		tagged(m, (uint8_t)v, 0, 0);
	else if (v <= 0xff)
		tagged(m, 0xcc, v, 1);
	else if (v <= 0xffff)
		tagged(m, 0xcd, v, 2);
	else if (v <= 0xffffffff)
		tagged(m, 0xce, v, 4);
	else
		tagged(m, 0xcf, v, 8);
}

void kvc_mp_nil(struct kvc_mp *m)
{
	tagged(m, 0xc0, 0, 0);
}

void kvc_mp_double(struct kvc_mp *m, double v)
{
	uint64_t bits;

	memcpy(&bits, &v, sizeof(bits));
	tagged(m, 0xcb, bits, 8);
}
