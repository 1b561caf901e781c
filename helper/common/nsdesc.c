// SPDX-License-Identifier: GPL-2.0
/*
 * nsdesc: a namespace's description in a shared tier (see nsdesc.h).
 */
#include "nsdesc.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "blockfile.h"

#define MAGIC		"kvcache-namespace 1\n"
#define NS_MAX		65535u
#define ID_MAX		4294967294u	/* (uid_t)-1 means "no change" */

static bool node_ok(const char *s, size_t n)
{
	if (n < 1 || n >= KVC_NSDESC_NODE_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] <= ' ' || s[i] > '~')
			return false;
	return true;
}

int kvc_nsdesc_encode(const struct kvc_nsdesc *d, char *buf, size_t len)
{
	size_t nlen = strnlen(d->node, KVC_NSDESC_NODE_MAX);
	int m;

	if (d->id < 1 || d->id > NS_MAX || d->uid > ID_MAX ||
	    d->gid > ID_MAX || d->mode > 0777 || !node_ok(d->node, nlen))
		return -EINVAL;
	m = snprintf(buf, len, MAGIC "id %" PRIu32 "\nuid %" PRIu32 "\ngid %"
		     PRIu32 "\nmode %o\nsalt ", d->id, d->uid, d->gid, d->mode);
	for (int i = 0; m > 0 && i < KVC_NSDESC_SALT; i++)
		if ((size_t)m < len)
			m += snprintf(buf + m, len - (size_t)m, "%02x",
				      d->salt[i]);
	if (m > 0 && (size_t)m < len)
		m += snprintf(buf + m, len - (size_t)m, "\nnode %s\n", d->node);
	if (m > 0 && (size_t)m < len)
		m += snprintf(buf + m, len - (size_t)m, "crc32c %08" PRIx32 "\n",
			      kvc_crc32c(0, buf, (size_t)m));
	return m > 0 && (size_t)m < len ? m : -ENOSPC;
}

/* "name " at *p, then the value up to '\n': its bounds, *p past it. */
static bool field(const char **p, const char *end, const char *name,
		  const char **v, size_t *vlen)
{
	size_t n = strlen(name);
	const char *nl;

	if ((size_t)(end - *p) < n + 1 || memcmp(*p, name, n) ||
	    (*p)[n] != ' ')
		return false;
	*v = *p + n + 1;
	nl = memchr(*v, '\n', (size_t)(end - *v));
	if (!nl)
		return false;
	*vlen = (size_t)(nl - *v);
	*p = nl + 1;
	return true;
}

/* Digits of base (8, 10, 16 lower-case), no leading zero, at most max. */
static bool number(const char *s, size_t n, unsigned int base, uint64_t max,
		   uint64_t *out)
{
	uint64_t v = 0;

	if (n < 1 || n > 20 || (n > 1 && s[0] == '0'))
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned int c = (unsigned char)s[i], dv;

		if (c >= '0' && c <= '9')
			dv = c - '0';
		else if (base == 16 && c >= 'a' && c <= 'f')
			dv = c - 'a' + 10;
		else
			return false;
		if (dv >= base || v > (max - dv) / base)
			return false;
		v = v * base + dv;
	}
	*out = v;
	return true;
}

int kvc_nsdesc_parse(const char *buf, size_t len, struct kvc_nsdesc *d)
{
	const char *p = buf, *end = buf + len, *v;
	uint64_t id, uid, gid, mode, crc;
	size_t vlen, body;

	memset(d, 0, sizeof(*d));
	if (len > KVC_NSDESC_MAX || len < sizeof(MAGIC) - 1 ||
	    memcmp(buf, MAGIC, sizeof(MAGIC) - 1))
		return -EBADMSG;
	p += sizeof(MAGIC) - 1;
	if (!field(&p, end, "id", &v, &vlen) ||
	    !number(v, vlen, 10, NS_MAX, &id) || !id ||
	    !field(&p, end, "uid", &v, &vlen) ||
	    !number(v, vlen, 10, ID_MAX, &uid) ||
	    !field(&p, end, "gid", &v, &vlen) ||
	    !number(v, vlen, 10, ID_MAX, &gid) ||
	    !field(&p, end, "mode", &v, &vlen) ||
	    !number(v, vlen, 8, 0777, &mode) ||
	    !field(&p, end, "salt", &v, &vlen) ||
	    vlen != 2 * KVC_NSDESC_SALT)
		return -EBADMSG;
	for (int i = 0; i < KVC_NSDESC_SALT; i++) {
		uint64_t b;

		/* Two digits each: "0a" is a byte, not a leading zero. */
		if (!number(v + 2 * i + (v[2 * i] == '0'),
			    v[2 * i] == '0' ? 1 : 2, 16, 255, &b))
			return -EBADMSG;
		d->salt[i] = (uint8_t)b;
	}
	if (!field(&p, end, "node", &v, &vlen) || !node_ok(v, vlen))
		return -EBADMSG;
	memcpy(d->node, v, vlen);
	body = (size_t)(p - buf);
	if (!field(&p, end, "crc32c", &v, &vlen) || vlen != 8 || p != end)
		return -EBADMSG;
	/* The CRC's 8 digits may start with zeros: read them two by two. */
	crc = 0;
	for (int i = 0; i < 8; i++) {
		uint64_t dv;

		if (!number(v + i, 1, 16, 15, &dv))
			return -EBADMSG;
		crc = crc << 4 | dv;
	}
	if (kvc_crc32c(0, buf, body) != (uint32_t)crc)
		return -EBADMSG;
	d->id = (uint32_t)id;
	d->uid = (uint32_t)uid;
	d->gid = (uint32_t)gid;
	d->mode = (uint32_t)mode;
	return 0;
}
