/* SPDX-License-Identifier: GPL-2.0 */
/*
 * tierio: asynchronous block-file I/O for the persistent tiers, on
 * io_uring (liburing).
 *
 * A fixed set of slots, each a staging buffer big enough for one whole
 * block file (kvc_bf_file_size(max_payload)), registered with the ring
 * once (IORING_REGISTER_BUFFERS), so the kernel does not pin and unpin
 * pages per I/O. The number of slots is the queue depth: at most that
 * many block files are being written or read at once, so memory and the
 * device's queue stay bounded whatever the daemon asks for; a request
 * when every slot is busy gets -EBUSY and is retried later by the caller.
 *
 * A write (spill) follows kvc_bf_publish()'s rules exactly: temp file
 * (O_DIRECT when the filesystem takes it), one write of the whole image
 * with a linked fsync, close, link (never replacing), fsync of the leaf
 * directory. All of it goes through the ring, the temp file's create,
 * close, link and unlink too: on a shared filesystem each is a round
 * trip to a server, which must not stop the caller's thread; so do the
 * look for an existing file (statx) and the fan-out directories' mkdir
 * where the create finds them missing. Needs Linux 5.15 or later (the
 * ring's mkdirat and linkat).
 * A read (promotion) opens the file through the ring (a cold-cache open
 * reads directory and inode blocks: it must not block the thread), reads
 * the whole file into a slot in one request and verifies it
 * (kvc_bf_check) before anyone sees the bytes. A read in place
 * (kvc_tio_read_into) puts only the header in the slot and the payload
 * straight into the caller's memory (a pool block), and checks it there.
 *
 * Completions: the ring signals an eventfd (kvc_tio_fd) that the caller
 * polls; kvc_tio_reap() then runs the callback once per finished request.
 * A read's payload is valid only during its callback.
 *
 * Single-threaded: one thread calls everything.
 */
#ifndef KVC_TIERIO_H
#define KVC_TIERIO_H

#include <stdbool.h>
#include <stdint.h>

#include "blockfile.h"

#define KVC_TIO_MAX_DEPTH	256
/* Slots writes leave to reads: a quarter, rounded up (none at depth 1). */
#define KVC_TIO_READ_RESERVE(depth)	((depth) > 1 ? ((depth) + 3) / 4 : 0)

enum kvc_tio_op {
	KVC_TIO_WRITE,
	KVC_TIO_READ,
};

struct kvc_tio_config {
	unsigned int depth;		/* slots, 1..KVC_TIO_MAX_DEPTH */
	uint64_t max_payload;		/* largest block, bytes */
	bool fsync;			/* fsync file and directory */
	const char *tag;		/* temp-file tag: the node name */
	/*
	 * The tier's directory: every path given later must be below it,
	 * and is resolved from it through no link (beneath.h: opens by
	 * openat2() on the ring, the rest relative to its descriptor).
	 * NULL: paths as given (tools and tests).
	 */
	const char *root;
	/*
	 * Reads before writes at the block layer: reads in the realtime
	 * class where the daemon may ask for it (CAP_SYS_ADMIN or
	 * CAP_SYS_NICE), else best effort, highest level; writes best
	 * effort, lowest level. Without it, both take the task's own.
	 */
	bool io_priority;
	/*
	 * Every open to the kernel's workers, never tried in the submitting
	 * thread: on a network filesystem an open whose path is cached is
	 * done at submission, and that sends the server an OPEN and waits
	 * for it (a restarted NFS server refuses it for its whole grace
	 * period). Set for a shared tier; found by itself for a root on a
	 * network filesystem.
	 */
	bool remote;
};

/* One finished request, as the callback sees it. */
struct kvc_tio_done {
	int op;				/* enum kvc_tio_op */
	int status;			/* 0 or -errno */
	uint64_t cookie;		/* the caller's */
	uint64_t file_size;		/* bytes of the file, when status is 0 */
	/* READ with status 0: the verified header and payload. */
	const struct kvc_bf_header *h;
	const uint8_t *payload;
};

typedef void (*kvc_tio_done_fn)(void *arg, const struct kvc_tio_done *d);

struct kvc_tio;

/* 0, -EINVAL (config), -ENOMEM, or -errno of io_uring setup. */
int kvc_tio_create(struct kvc_tio **out, const struct kvc_tio_config *cfg);
/* Waits for every request in flight (their callbacks are not run). */
void kvc_tio_destroy(struct kvc_tio *t);

/* The eventfd to poll; readable when kvc_tio_reap() has work. */
int kvc_tio_fd(const struct kvc_tio *t);
unsigned int kvc_tio_idle_slots(const struct kvc_tio *t);
unsigned int kvc_tio_in_flight(const struct kvc_tio *t);

/*
 * Spill, in two steps so the payload is copied once, straight into the
 * registered buffer: kvc_tio_write_begin() reserves a slot and returns it
 * (or -EBUSY), with *payload pointing where h->payload_len bytes go;
 * kvc_tio_write_submit() starts writing it as @h's block under @dir.
 * submit returns 0 (the callback will come), or -EEXIST (already
 * published), -EINVAL, -ENAMETOOLONG or -errno of a synchronous step
 * (ENOSPC, EROFS, EACCES ...): then no callback comes and the slot is
 * free again. kvc_tio_write_cancel() frees a begun slot unsubmitted.
 */
int kvc_tio_write_begin(struct kvc_tio *t, uint8_t **payload);
int kvc_tio_write_submit(struct kvc_tio *t, int slot, const char *dir,
			 const struct kvc_bf_header *h, uint64_t cookie);
void kvc_tio_write_cancel(struct kvc_tio *t, int slot);

/*
 * Promote: read @key's block file under @dir. The open, too, goes
 * through the ring; the read asks for the whole buffer and the file's
 * end says its size. 0: the callback will come, with status 0, -ENOENT
 * (a miss), -EBADMSG and the other corruption errors of kvc_bf_check()
 * (also for a symlink, directory or FIFO under the name), -EFBIG (a
 * file larger than any block of ours) or -errno. At once: -EBUSY (no
 * slot) or -ENAMETOOLONG.
 */
int kvc_tio_read(struct kvc_tio *t, const char *dir,
		 const uint8_t key[KVC_BF_KEY_SIZE], uint64_t cookie);

/*
 * The same, reading the payload in place into @dst (a pool block:
 * page-aligned, @dst_len a multiple of KVC_BF_ALIGN) rather than into
 * the slot, so the caller copies nothing; only the header lands in the
 * slot. The callback's payload is then @dst. A file whose payload and
 * padding do not fit in @dst_len is -EFBIG. On any error @dst holds
 * whatever the read left: the caller throws it away. -EINVAL at once
 * for a @dst not so aligned or larger than a slot's payload.
 */
int kvc_tio_read_into(struct kvc_tio *t, const char *dir,
		      const uint8_t key[KVC_BF_KEY_SIZE], uint64_t cookie,
		      uint8_t *dst, uint64_t dst_len);

/*
 * Run the callbacks of finished requests. wait: block until at least one
 * request finishes (when any is in flight). Returns how many finished.
 */
int kvc_tio_reap(struct kvc_tio *t, bool wait, kvc_tio_done_fn fn,
		 void *arg);

#endif /* KVC_TIERIO_H */
