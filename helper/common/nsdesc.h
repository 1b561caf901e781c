/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nsdesc: a namespace's description in a shared tier (g4/ns<id>/namespace),
 * by which nodes sharing g4 agree on its owner, mode and key salt
 * (helper/kvcached/nsshare.c; Documentation/design/tiers.md, "Namespaces
 * across nodes").
 *
 * Text, one "name value" line each, in this order, nothing else:
 *
 *   kvcache-namespace 1
 *   id <1..65535>
 *   uid <0..4294967294>
 *   gid <0..4294967294>
 *   mode <octal, at most 777>
 *   salt <64 lower-case hex digits>
 *   node <1..64 printable characters, no space>
 *   crc32c <8 lower-case hex digits: CRC-32C of every byte before this line>
 *
 * Numbers are written without leading zeros (0 itself as "0"), so a
 * description has exactly one encoding; the parser accepts nothing else.
 * At most KVC_NSDESC_MAX bytes. No state: any thread.
 */
#ifndef KVC_NSDESC_H
#define KVC_NSDESC_H

#include <stddef.h>
#include <stdint.h>

#define KVC_NSDESC_MAX		1024
#define KVC_NSDESC_SALT		32
#define KVC_NSDESC_NODE_MAX	65	/* 64 characters and NUL */

struct kvc_nsdesc {
	uint32_t id, uid, gid, mode;
	uint8_t salt[KVC_NSDESC_SALT];
	char node[KVC_NSDESC_NODE_MAX];
};

/*
 * Encode d into buf (len bytes), NUL-terminated. Returns the length
 * without the NUL, or -EINVAL (a field out of range, a node name empty,
 * too long or with a space or control character) or -ENOSPC.
 */
int kvc_nsdesc_encode(const struct kvc_nsdesc *d, char *buf, size_t len);

/*
 * Parse the len bytes at buf (need not be NUL-terminated) into *d: 0, or
 * -EBADMSG for anything but a whole, checked description in the one
 * encoding above.
 */
int kvc_nsdesc_parse(const char *buf, size_t len, struct kvc_nsdesc *d);

#endif /* KVC_NSDESC_H */
