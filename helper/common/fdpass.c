// SPDX-License-Identifier: GPL-2.0
/*
 * fdpass: SCM_RIGHTS descriptors of a received message (fdpass.h).
 */
#include "fdpass.h"

#include <string.h>
#include <unistd.h>

unsigned int kvc_fdpass_take(struct msghdr *mh, int *fd)
{
	unsigned int count = 0;
	struct cmsghdr *cm;

	for (cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
		size_t nfd;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		nfd = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < nfd; i++) {
			int got;

			/* CMSG_DATA need not be aligned for an int. */
			memcpy(&got, CMSG_DATA(cm) + i * sizeof(int),
			       sizeof(got));
			count++;
			if (fd && *fd < 0)
				*fd = got;
			else
				close(got);
		}
	}
	return count;
}
