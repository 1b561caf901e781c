/* SPDX-License-Identifier: GPL-2.0 */
/*
 * fdpass: the descriptors that come with a message on a Unix socket
 * (SCM_RIGHTS), for every receiver of kvcached's replies: kvcachectl's
 * client, libkvcache, the tests' raw client.
 *
 * A reply carries at most one descriptor (the pool memfd at HELLO, a
 * tier file for a region load); a peer that sends more must not make the
 * receiver leak them, so every one but the first is closed here.
 */
#ifndef KVC_FDPASS_H
#define KVC_FDPASS_H

#include <sys/socket.h>

/*
 * Take the descriptors of a message recvmsg() filled in. The first goes
 * to *fd when fd is not NULL and *fd < 0; every other one is closed
 * (receive with MSG_CMSG_CLOEXEC, so none leaks into a child meanwhile).
 * Returns how many came.
 */
unsigned int kvc_fdpass_take(struct msghdr *mh, int *fd);

#endif /* KVC_FDPASS_H */
