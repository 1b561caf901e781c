// SPDX-License-Identifier: GPL-2.0
/*
 * tierio: asynchronous block-file I/O on io_uring (see tierio.h).
 *
 * Slot lifetime:
 *
 *   FREE --write_begin--> BEGUN --write_submit--> WRITE --(fsync)--> DIRSYNC
 *     ^                     |                       |                  |
 *     +------cancel---------+                       +--------+---------+
 *     +--read--> READ ---------------------------------------+--> callback
 *
 * A write's stages, each a request on the ring: look for the final name
 * (there: nothing to write), create the temp file (its fan-out
 * directories first where the create finds them missing), write (+
 * linked fsync), close, link to the final name (or a rename that never
 * replaces, where there are no hard links), unlink the temp name; with
 * fsync, fsync the leaf directory, and the parent of each directory
 * this write made. On a shared filesystem every one of these is a round
 * trip to a server that may be slow, or gone for a while: on the ring
 * they wait in the kernel's workers, and the daemon's loop goes on
 * serving from DRAM meanwhile.
 *
 * Reads come first, as a load waits for them and a spill waits for no
 * one: writes may hold at most depth - KVC_TIO_READ_RESERVE(depth)
 * slots, so a burst of spills never leaves a promotion without one, and
 * with io_priority each data request carries an I/O priority (reads
 * above writes, and above a neighbour's best-effort I/O where the
 * daemon may ask for the realtime class), which the block layer's
 * scheduler honours (mq-deadline, bfq; "none" ignores it).
 *
 * A slot owns its staging buffer (registered, index = slot number), the
 * descriptor of the file being written or read and its paths. Every SQE
 * carries (slot, stage) in its user data; a slot counts the CQEs it still
 * expects and moves on only when that is zero, so a linked fsync that the
 * kernel cancels after a failed or short write is always accounted for
 * before the slot is reused.
 */
#include "tierio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <linux/ioprio.h>
#include <linux/magic.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include "beneath.h"
#include "fault.h"

enum slot_state { S_FREE, S_BEGUN, S_WRITE, S_DIRSYNC, S_READ };
enum stage {
	ST_WRITE = 1, ST_FSYNC, ST_DIRSYNC, ST_OPEN, ST_READ,
	ST_STATX, ST_MKDIR, ST_CREATE, ST_CLOSE, ST_LINK, ST_RENAME,
	ST_UNLINK, ST_DIROPEN, ST_HELD,
};

struct slot {
	int state;			/* enum slot_state */
	int fd;				/* the file, or the directory */
	bool direct;
	bool synced;			/* the linked fsync succeeded */
	bool recreate;			/* the create removed a leftover */
	int mkdir;			/* fan-out level being made, 1 or 2 */
	int made;			/* fan-out directories made */
	int dirsyncs;			/* directories still to fsync */
	struct statx stx;
	struct open_how how;		/* an openat2 on the ring reads it */
	int oflags;			/* read: how the file is opened */
	int pending;			/* CQEs still expected */
	int held_res;			/* an open's result a fault holds */
	struct __kernel_timespec hold;	/* ... for so long */
	int err;
	uint64_t size, done;		/* file bytes, bytes transferred */
	uint64_t cookie;
	struct kvc_bf_header h;
	uint8_t key[KVC_BF_KEY_SIZE];
	char final[PATH_MAX], tmp[PATH_MAX];
	char dir[PATH_MAX];		/* the directory a stage works on */
	/* A read in place: the payload goes to dst, not to the slot. */
	uint8_t *dst;
	uint64_t dst_len;
	struct iovec iov[3];
	uint8_t *buf;
};

struct kvc_tio {
	struct io_uring ring;
	int efd;
	unsigned int depth, busy;
	unsigned int writing;		/* slots a write holds */
	uint16_t read_prio, write_prio;	/* the SQEs' ioprio, 0: the task's */
	uint64_t completed;		/* callbacks run, ever */
	uint64_t slot_size;		/* the largest block file */
	uint64_t buf_size;		/* a slot's buffer: one page more */
	bool fsync;
	bool chmod;			/* the umask may take mode bits away */
	bool async_open;		/* cfg->remote, or a network root */
	int root_fd;			/* cfg->root, or AT_FDCWD */
	char *root;			/* a copy of cfg->root */
	size_t root_len;		/* strlen(cfg->root) */
	char tag[KVC_BF_MAX_TAG + 1];
	uint8_t *mem;			/* every slot's buffer, one mapping */
	size_t mem_len;
	struct slot *slots;
};

static uint64_t udata(int slot, int stage)
{
	return (uint64_t)slot << 8 | (uint64_t)stage;
}

/*
 * A path as the ring resolves it: below the root, relative to its
 * descriptor (tio_path_ok() checked the prefix), or as given where the
 * tio has no root (tools and tests).
 */
static const char *rel(const struct kvc_tio *t, const char *path)
{
	if (t->root_fd == AT_FDCWD)
		return path;
	return path[t->root_len] ? path + t->root_len + 1 : ".";
}

/* Is @path below the root (where there is one)? */
static bool tio_path_ok(const struct kvc_tio *t, const char *path)
{
	return t->root_fd == AT_FDCWD ||
	       (!strncmp(path, t->root, t->root_len) &&
		path[t->root_len] == '/' && path[t->root_len + 1]);
}

/*
 * An open on the ring: with a root, openat2() below it through no link
 * (beneath.h): nothing a tenant could plant redirects a create or a
 * read. s->how lives in the slot: the kernel reads it at submission.
 */
static void prep_open(struct kvc_tio *t, struct slot *s,
		      struct io_uring_sqe *sqe, const char *path, int flags,
		      mode_t mode)
{
	if (t->root_fd == AT_FDCWD) {
		io_uring_prep_openat(sqe, AT_FDCWD, path, flags, mode);
	} else {
		memset(&s->how, 0, sizeof(s->how));
		s->how.flags = (uint64_t)(unsigned int)flags;
		s->how.mode = flags & O_CREAT ? mode : 0;
		s->how.resolve = KVC_RESOLVE_FLAGS;
		io_uring_prep_openat2(sqe, t->root_fd, rel(t, path), &s->how);
	}
	/* See kvc_tio_config.remote: the loop never waits for a server. */
	if (t->async_open)
		io_uring_sqe_set_flags(sqe, sqe->flags | IOSQE_ASYNC);
}

/* Does fd's filesystem answer opens from a server over the network? */
static bool fs_remote(int fd)
{
	static const unsigned long magic[] = {
		NFS_SUPER_MAGIC, SMB_SUPER_MAGIC, CIFS_SUPER_MAGIC,
		SMB2_SUPER_MAGIC, CEPH_SUPER_MAGIC, AFS_FS_MAGIC, V9FS_MAGIC,
		FUSE_SUPER_MAGIC, OCFS2_SUPER_MAGIC,
	};
	struct statfs sf;

	if (fd == AT_FDCWD || fstatfs(fd, &sf))
		return false;
	for (size_t i = 0; i < sizeof(magic) / sizeof(magic[0]); i++)
		if ((unsigned long)sf.f_type == magic[i])
			return true;
	return false;
}

/* unlink(2) of a path below the root, from the root's descriptor. */
static int tio_unlink(const struct kvc_tio *t, const char *path)
{
	return unlinkat(t->root_fd, rel(t, path), 0);
}

/* The user data of a close that nobody waits for (fd_release()). */
#define UDATA_ORPHAN	UINT64_MAX

/* May this process ask for the realtime I/O class? */
static bool may_ioprio_rt(void)
{
	struct __user_cap_header_struct h = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct c[_LINUX_CAPABILITY_U32S_3] = { 0 };

	if (syscall(SYS_capget, &h, c))
		return false;
	return (c[0].effective & (1u << CAP_SYS_ADMIN)) ||
	       (c[0].effective & (1u << CAP_SYS_NICE));
}

int kvc_tio_create(struct kvc_tio **out, const struct kvc_tio_config *cfg)
{
	struct iovec *iov = NULL;
	struct kvc_tio *t;
	int ret;

	if (!cfg->depth || cfg->depth > KVC_TIO_MAX_DEPTH ||
	    !cfg->max_payload || cfg->max_payload > KVC_BF_MAX_PAYLOAD ||
	    !cfg->tag || !cfg->tag[0] || strlen(cfg->tag) > KVC_BF_MAX_TAG ||
	    strchr(cfg->tag, '/'))
		return -EINVAL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->efd = -1;
	t->root_fd = AT_FDCWD;
	if (cfg->root) {
		t->root = strdup(cfg->root);
		t->root_len = strlen(cfg->root);
		t->root_fd = open(cfg->root, O_RDONLY | O_DIRECTORY |
				  O_CLOEXEC);
		if (!t->root || t->root_fd < 0) {
			ret = t->root ? -errno : -ENOMEM;
			if (t->root_fd >= 0)
				close(t->root_fd);
			free(t->root);
			free(t);
			return ret;
		}
	}
	t->depth = cfg->depth;
	t->fsync = cfg->fsync;
	t->async_open = cfg->remote || fs_remote(t->root_fd);
	if (cfg->io_priority) {
		t->read_prio = may_ioprio_rt() ?
			       IOPRIO_PRIO_VALUE(IOPRIO_CLASS_RT, 4) :
			       IOPRIO_PRIO_VALUE(IOPRIO_CLASS_BE, 0);
		t->write_prio = IOPRIO_PRIO_VALUE(IOPRIO_CLASS_BE, 7);
	}
	/*
	 * A temp file is created with its mode; only a umask that takes
	 * more than group and other write away needs the fchmod after.
	 */
	{
		mode_t mask = umask(0);

		umask(mask);
		t->chmod = (mask & ~(mode_t)022) != 0;
	}
	strcpy(t->tag, cfg->tag);
	t->slot_size = kvc_bf_file_size(cfg->max_payload);
	/* A read asks for a page more than the largest file: getting it
	 * means the file is larger than any block of ours. */
	t->buf_size = t->slot_size + KVC_BF_ALIGN;
	t->mem_len = (size_t)(t->buf_size * cfg->depth);
	t->slots = calloc(cfg->depth, sizeof(*t->slots));
	iov = calloc(cfg->depth, sizeof(*iov));
	ret = -ENOMEM;
	if (!t->slots || !iov)
		goto err_noring;
	t->mem = mmap(NULL, t->mem_len, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (t->mem == MAP_FAILED) {
		t->mem = NULL;
		goto err_noring;
	}
	for (unsigned int i = 0; i < cfg->depth; i++) {
		t->slots[i].fd = -1;
		t->slots[i].buf = t->mem + i * t->buf_size;
		iov[i].iov_base = t->slots[i].buf;
		iov[i].iov_len = (size_t)t->buf_size;
	}
	/* Two SQEs per slot at most (write + fsync), and room to spare. */
	ret = io_uring_queue_init(2 * cfg->depth + 8, &t->ring, 0);
	if (ret)
		goto err_noring;
	ret = io_uring_register_buffers(&t->ring, iov, cfg->depth);
	if (ret)
		goto err;
	t->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (t->efd < 0) {
		ret = -errno;
		goto err;
	}
	ret = io_uring_register_eventfd(&t->ring, t->efd);
	if (ret)
		goto err;
	free(iov);
	*out = t;
	return 0;
err:
	io_uring_queue_exit(&t->ring);
err_noring:
	if (t->efd >= 0)
		close(t->efd);
	if (t->root_fd >= 0)
		close(t->root_fd);
	free(t->root);
	if (t->mem)
		munmap(t->mem, t->mem_len);
	free(t->slots);
	free(t);
	free(iov);
	return ret;
}

/*
 * Close a descriptor the slot is done with, through the ring: on NFS a
 * close(2) waits for the CLOSE round trip to the server, and while the
 * server is away (a hard mount) that would hold the daemon's loop for
 * as long. The kernel takes the descriptor out of the table when it
 * starts the request, so its number is not reused before; nothing waits
 * for the completion, which handle() skips. A full ring closes here.
 */
static void fd_release(struct kvc_tio *t, int fd)
{
	struct io_uring_sqe *sqe;

	if (fd < 0)
		return;
	sqe = io_uring_get_sqe(&t->ring);
	if (!sqe) {
		io_uring_submit(&t->ring);
		sqe = io_uring_get_sqe(&t->ring);
	}
	if (!sqe) {
		close(fd);
		return;
	}
	io_uring_prep_close(sqe, fd);
	io_uring_sqe_set_data64(sqe, UDATA_ORPHAN);
	io_uring_submit(&t->ring);
}

static bool writing(const struct slot *s)
{
	return s->state == S_BEGUN || s->state == S_WRITE ||
	       s->state == S_DIRSYNC;
}

static void slot_free(struct kvc_tio *t, struct slot *s)
{
	fd_release(t, s->fd);
	s->fd = -1;
	if (writing(s))
		t->writing--;
	if (s->state != S_FREE)
		t->busy--;
	s->state = S_FREE;
}

void kvc_tio_destroy(struct kvc_tio *t)
{
	if (!t)
		return;
	/* Let the kernel finish with the buffers before they go. */
	while (kvc_tio_in_flight(t)) {
		struct io_uring_cqe *cqe;
		struct slot *s;

		if (io_uring_wait_cqe(&t->ring, &cqe))
			break;
		if (cqe->user_data == UDATA_ORPHAN) {
			io_uring_cqe_seen(&t->ring, cqe);
			continue;
		}
		s = &t->slots[cqe->user_data >> 8];
		io_uring_cqe_seen(&t->ring, cqe);
		if (--s->pending == 0) {
			if (s->state == S_WRITE)
				tio_unlink(t, s->tmp);
			slot_free(t, s);
		}
	}
	/* At the end, closed here: the ring goes with what it queued. */
	for (unsigned int i = 0; i < t->depth; i++) {
		if (t->slots[i].fd >= 0)
			close(t->slots[i].fd);
		t->slots[i].fd = -1;
		slot_free(t, &t->slots[i]);
	}
	io_uring_queue_exit(&t->ring);
	close(t->efd);
	if (t->root_fd >= 0)
		close(t->root_fd);
	free(t->root);
	munmap(t->mem, t->mem_len);
	free(t->slots);
	free(t);
}

int kvc_tio_fd(const struct kvc_tio *t)
{
	return t->efd;
}

unsigned int kvc_tio_idle_slots(const struct kvc_tio *t)
{
	return t->depth - t->busy;
}

unsigned int kvc_tio_in_flight(const struct kvc_tio *t)
{
	unsigned int n = 0;

	for (unsigned int i = 0; i < t->depth; i++)
		n += t->slots[i].pending > 0;
	return n;
}

static int slot_get(struct kvc_tio *t)
{
	for (unsigned int i = 0; i < t->depth; i++) {
		struct slot *s = &t->slots[i];

		if (s->state == S_FREE) {
			memset(s, 0, offsetof(struct slot, buf));
			s->fd = -1;
			t->busy++;
			return (int)i;
		}
	}
	return -EBUSY;
}

static struct io_uring_sqe *sqe_get(struct kvc_tio *t)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&t->ring);

	if (!sqe) {	/* cannot happen: the ring has 2 SQEs per slot */
		io_uring_submit(&t->ring);
		sqe = io_uring_get_sqe(&t->ring);
	}
	return sqe;
}

/* Queue the rest of the write (and, when asked, its fsync). */
static int queue_write(struct kvc_tio *t, int i)
{
	struct slot *s = &t->slots[i];
	struct io_uring_sqe *sqe = sqe_get(t);

	if (!sqe)
		return -EAGAIN;
	io_uring_prep_write_fixed(sqe, s->fd, s->buf + s->done,
				  (unsigned int)(s->size - s->done),
				  s->done, i);
	sqe->ioprio = t->write_prio;
	io_uring_sqe_set_data64(sqe, udata(i, ST_WRITE));
	s->pending++;
	if (t->fsync) {
		sqe->flags |= IOSQE_IO_LINK;
		sqe = sqe_get(t);
		if (!sqe)
			return -EAGAIN;
		io_uring_prep_fsync(sqe, s->fd, 0);
		io_uring_sqe_set_data64(sqe, udata(i, ST_FSYNC));
		s->pending++;
	}
	io_uring_submit(&t->ring);
	return 0;
}

/*
 * The open goes through the ring too: on a cold cache it reads directory
 * and inode blocks, and a synchronous open would serialize those reads on
 * the daemon's thread however deep the queue.
 */
static int queue_open(struct kvc_tio *t, int i)
{
	struct slot *s = &t->slots[i];
	struct io_uring_sqe *sqe = sqe_get(t);

	if (!sqe)
		return -EAGAIN;
	prep_open(t, s, sqe, s->final, s->oflags, 0);
	io_uring_sqe_set_data64(sqe, udata(i, ST_OPEN));
	s->pending++;
	io_uring_submit(&t->ring);
	return 0;
}

/* The leaf directory's fsync (s->fd is the directory). */
static int sqe_fsync(struct kvc_tio *t, int i)
{
	struct io_uring_sqe *sqe = sqe_get(t);

	if (!sqe)
		return -EAGAIN;
	io_uring_prep_fsync(sqe, t->slots[i].fd, 0);
	io_uring_sqe_set_data64(sqe, udata(i, ST_DIRSYNC));
	t->slots[i].pending++;
	io_uring_submit(&t->ring);
	return 0;
}

/* One metadata request of slot i's write: its stage says which. */
static int queue_meta(struct kvc_tio *t, int i, int stage)
{
	struct slot *s = &t->slots[i];
	struct io_uring_sqe *sqe = sqe_get(t);
	char *dir;

	if (!sqe)
		return -EAGAIN;
	switch (stage) {
	case ST_STATX:
		io_uring_prep_statx(sqe, t->root_fd, rel(t, s->final),
				    AT_SYMLINK_NOFOLLOW, STATX_TYPE, &s->stx);
		break;
	case ST_MKDIR:
		/* Level 1: the final path up to its last two '/'; 2: one. */
		snprintf(s->dir, sizeof(s->dir), "%s", s->final);
		for (int up = 0; up < 3 - s->mkdir; up++)
			*strrchr(s->dir, '/') = '\0';
		io_uring_prep_mkdirat(sqe, t->root_fd, rel(t, s->dir),
				      KVC_BF_DIR_MODE);
		break;
	case ST_CREATE:
		prep_open(t, s, sqe, s->tmp, O_WRONLY | O_CREAT | O_EXCL |
			  O_CLOEXEC | (s->direct ? O_DIRECT : 0),
			  KVC_BF_FILE_MODE);
		break;
	case ST_CLOSE:
		io_uring_prep_close(sqe, s->fd);
		s->fd = -1;	/* the kernel's now, whatever comes back */
		break;
	case ST_LINK:
		io_uring_prep_linkat(sqe, t->root_fd, rel(t, s->tmp),
				     t->root_fd, rel(t, s->final), 0);
		break;
	case ST_RENAME:
		io_uring_prep_renameat(sqe, t->root_fd, rel(t, s->tmp),
				       t->root_fd, rel(t, s->final),
				       RENAME_NOREPLACE);
		break;
	case ST_UNLINK:
		io_uring_prep_unlinkat(sqe, t->root_fd, rel(t, s->tmp), 0);
		break;
	case ST_DIROPEN:
		/* The leaf directory first, then each one up from it. */
		if (!s->dir[0])
			snprintf(s->dir, sizeof(s->dir), "%s", s->final);
		dir = strrchr(s->dir, '/');
		if (dir)
			*dir = '\0';
		prep_open(t, s, sqe, s->dir, O_RDONLY | O_DIRECTORY |
			  O_CLOEXEC, 0);
		break;
	}
	io_uring_sqe_set_data64(sqe, udata(i, stage));
	s->pending++;
	io_uring_submit(&t->ring);
	return 0;
}

/*
 * A read in place reads the file as three pieces, from wherever the last
 * read stopped: the header into the slot, the payload and its padding
 * into dst, and a page more into the slot again (getting it means the
 * file is larger than dst). O_DIRECT takes it: every piece is whole
 * pages at page-aligned addresses.
 */
static unsigned int place_iov(struct slot *s)
{
	const struct { uint8_t *base; uint64_t len; } piece[3] = {
		{ s->buf, KVC_BF_HEADER_SIZE },
		{ s->dst, s->dst_len },
		{ s->buf + KVC_BF_HEADER_SIZE, KVC_BF_ALIGN },
	};
	uint64_t skip = s->done;
	unsigned int n = 0;

	for (unsigned int k = 0; k < 3; k++) {
		if (skip >= piece[k].len) {
			skip -= piece[k].len;
			continue;
		}
		s->iov[n].iov_base = piece[k].base + skip;
		s->iov[n].iov_len = (size_t)(piece[k].len - skip);
		skip = 0;
		n++;
	}
	return n;
}

static int queue_read(struct kvc_tio *t, int i)
{
	struct slot *s = &t->slots[i];
	struct io_uring_sqe *sqe = sqe_get(t);

	if (!sqe)
		return -EAGAIN;
	if (s->dst)
		io_uring_prep_readv(sqe, s->fd, s->iov, place_iov(s), s->done);
	else
		io_uring_prep_read_fixed(sqe, s->fd, s->buf + s->done,
					 (unsigned int)(s->size - s->done),
					 s->done, i);
	sqe->ioprio = t->read_prio;
	io_uring_sqe_set_data64(sqe, udata(i, ST_READ));
	s->pending++;
	io_uring_submit(&t->ring);
	return 0;
}

int kvc_tio_write_begin(struct kvc_tio *t, uint8_t **payload)
{
	int i;

	if (t->writing >= t->depth - KVC_TIO_READ_RESERVE(t->depth))
		return -EBUSY;
	i = slot_get(t);
	if (i < 0)
		return i;
	t->writing++;
	t->slots[i].state = S_BEGUN;
	*payload = t->slots[i].buf + KVC_BF_HEADER_SIZE;
	return i;
}

void kvc_tio_write_cancel(struct kvc_tio *t, int slot)
{
	if (slot >= 0 && (unsigned int)slot < t->depth &&
	    t->slots[slot].state == S_BEGUN)
		slot_free(t, &t->slots[slot]);
}

int kvc_tio_write_submit(struct kvc_tio *t, int i, const char *dir,
			 const struct kvc_bf_header *h, uint64_t cookie)
{
	struct slot *s;
	int ret;

	if (i < 0 || (unsigned int)i >= t->depth ||
	    t->slots[i].state != S_BEGUN)
		return -EINVAL;
	s = &t->slots[i];
	s->h = *h;
	s->cookie = cookie;
	ret = -EINVAL;
	if (h->payload_len > t->slot_size - KVC_BF_HEADER_SIZE)
		goto fail;
	ret = kvc_bf_build(&s->h, s->buf);
	if (!ret)
		ret = kvc_fault_err(KVC_FAULT_TIER_MKDIR);
	if (!ret)
		ret = kvc_bf_paths(dir, h->key, t->tag, s->final, s->tmp,
				   sizeof(s->final));
	if (!ret && !tio_path_ok(t, s->final))
		ret = -EINVAL;
	if (ret)
		goto fail;
	s->size = kvc_bf_file_size(h->payload_len);
	/* O_DIRECT when the filesystem takes it (create_settled()). */
	s->direct = true;
	s->state = S_WRITE;
	ret = queue_meta(t, i, ST_STATX);
	if (!ret)
		return 0;
fail:
	slot_free(t, s);
	return ret;
}

int kvc_tio_read(struct kvc_tio *t, const char *dir,
		 const uint8_t key[KVC_BF_KEY_SIZE], uint64_t cookie)
{
	return kvc_tio_read_into(t, dir, key, cookie, NULL, 0);
}

int kvc_tio_read_into(struct kvc_tio *t, const char *dir,
		      const uint8_t key[KVC_BF_KEY_SIZE], uint64_t cookie,
		      uint8_t *dst, uint64_t dst_len)
{
	struct slot *s;
	int i, ret;

	if (dst && (!dst_len || dst_len % KVC_BF_ALIGN ||
		    (uintptr_t)dst % KVC_BF_ALIGN ||
		    dst_len > t->slot_size - KVC_BF_HEADER_SIZE))
		return -EINVAL;
	i = slot_get(t);
	if (i < 0)
		return i;
	s = &t->slots[i];
	s->state = S_READ;
	s->cookie = cookie;
	memcpy(s->key, key, KVC_BF_KEY_SIZE);
	ret = kvc_bf_path(dir, key, s->final, sizeof(s->final));
	if (!ret && !tio_path_ok(t, s->final))
		ret = -EINVAL;
	if (ret)
		goto fail;
	/* O_NONBLOCK: a FIFO planted under a block's name must not hang
	 * the read; it fails as a short file instead. */
	s->oflags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_DIRECT;
	s->direct = true;
	/* The whole buffer: the file's size is where the read stops. */
	s->size = t->buf_size;
	if (dst) {
		s->dst = dst;
		s->dst_len = dst_len;
		s->size = KVC_BF_HEADER_SIZE + dst_len + KVC_BF_ALIGN;
	}
	ret = queue_open(t, i);
	if (!ret)
		return 0;
fail:
	slot_free(t, s);
	return ret;
}

static void complete(struct kvc_tio *t, struct slot *s, int status,
		     kvc_tio_done_fn fn, void *arg)
{
	struct kvc_tio_done d = {
		.op = s->state == S_READ ? KVC_TIO_READ : KVC_TIO_WRITE,
		.status = status,
		.cookie = s->cookie,
		.file_size = status ? 0 : s->size,
	};

	if (s->state == S_READ && !status) {
		d.h = &s->h;
		d.payload = s->dst ? s->dst : s->buf + KVC_BF_HEADER_SIZE;
	}
	fd_release(t, s->fd);
	s->fd = -1;
	t->completed++;
	/* The slot stays busy during the callback: the payload is in it. */
	if (fn)
		fn(arg, &d);
	slot_free(t, s);
}

/*
 * The temp file's create came back: write to it, or create it again
 * without O_DIRECT (a filesystem that refuses it) or after removing a
 * leftover of a crashed writer with our tag, pid and counter (a name is
 * ours by construction: kvc_bf_open_tmp()'s rule).
 */
static void create_settled(struct kvc_tio *t, int i, int res,
			   kvc_tio_done_fn fn, void *arg)
{
	struct slot *s = &t->slots[i];
	int ret;

	if (res == -EINVAL && s->direct) {
		s->direct = false;
		ret = queue_meta(t, i, ST_CREATE);
	} else if (res == -ENOENT && !s->mkdir) {
		/* A leaf directory's first use: make it (and its parent). */
		s->mkdir = 1;
		ret = queue_meta(t, i, ST_MKDIR);
	} else if (res == -EEXIST && !s->recreate) {
		s->recreate = true;
		ret = tio_unlink(t, s->tmp) && errno != ENOENT ? -errno :
		      queue_meta(t, i, ST_CREATE);
	} else if (res < 0) {
		/* Our temp name taken twice is no "already published". */
		ret = res == -EEXIST ? -EIO : res;
	} else {
		s->fd = res;
		/* Its mode whatever the umask (a file read by tenants). */
		ret = t->chmod && fchmod(s->fd, KVC_BF_FILE_MODE) ? -errno : 0;
		if (!ret)
			ret = queue_write(t, i);
		if (ret) {
			close(s->fd);
			s->fd = -1;
			tio_unlink(t, s->tmp);
		}
	}
	if (ret)
		complete(t, s, ret, fn, arg);
}

/* The file is written and (with fsync) on stable storage: name it. */
static void write_done(struct kvc_tio *t, int i, kvc_tio_done_fn fn,
		       void *arg)
{
	/* Closed before the link: NFS turns an unlinked open file into a
	 * .nfsXXXX file, and reports a failed write back here. */
	int ret = queue_meta(t, i, ST_CLOSE);

	if (ret) {
		tio_unlink(t, t->slots[i].tmp);
		complete(t, &t->slots[i], ret, fn, arg);
	}
}

/* Named (or failed, in s->err): the directory's fsync, or the end. */
static void published(struct kvc_tio *t, int i, kvc_tio_done_fn fn,
		      void *arg)
{
	struct slot *s = &t->slots[i];
	int ret = s->err;

	/* The new name, and the temp name's removal, must be durable; so
	 * must the entry of each directory this write made. */
	if (!ret && t->fsync) {
		s->dirsyncs = 1 + s->made;
		s->dir[0] = '\0';
		ret = queue_meta(t, i, ST_DIROPEN);
		if (!ret)
			return;
		tio_unlink(t, s->final);	/* see ST_DIRSYNC in handle() */
	}
	complete(t, s, ret, fn, arg);
}

/*
 * The link came back (res). Linked: the temp name goes. Refused for
 * want of hard links: a rename that never replaces is as good. Refused
 * otherwise (-EEXIST: another writer was first) the temp name goes too,
 * and the write ends with that error.
 */
static void link_settled(struct kvc_tio *t, int i, int res,
			 kvc_tio_done_fn fn, void *arg)
{
	struct slot *s = &t->slots[i];
	struct stat st;
	int ret;

	/* NFS: a retransmitted LINK whose first try succeeded answers
	 * with an error; the link count tells the truth (open(2)). */
	if (res && res != -EEXIST && !fstatat(t->root_fd, rel(t, s->tmp), &st, AT_SYMLINK_NOFOLLOW) && st.st_nlink == 2)
		res = 0;
	if (res == -EPERM || res == -EOPNOTSUPP || res == -ENOSYS ||
	    res == -EMLINK)
		ret = queue_meta(t, i, ST_RENAME);
	else {
		s->err = res;
		ret = queue_meta(t, i, ST_UNLINK);
	}
	if (ret) {
		tio_unlink(t, s->tmp);
		s->err = s->err ? s->err : ret;
		published(t, i, fn, arg);
	}
}

/* Every CQE of the write (and its fsync) is in. */
static void write_settled(struct kvc_tio *t, int i, kvc_tio_done_fn fn,
			  void *arg)
{
	struct slot *s = &t->slots[i];

	if (s->err == -EINVAL && s->direct && !s->done) {
		/* The open took O_DIRECT but the write did not (a device
		 * with larger sectors): go on buffered. */
		s->direct = false;
		s->err = fcntl(s->fd, F_SETFL,
			       fcntl(s->fd, F_GETFL) & ~O_DIRECT) ? -errno : 0;
	}
	if (!s->err && (s->done < s->size || (t->fsync && !s->synced))) {
		s->synced = false;
		s->err = queue_write(t, i);
		if (!s->err)
			return;
	}
	if (s->err) {
		close(s->fd);
		s->fd = -1;
		tio_unlink(t, s->tmp);
		complete(t, s, s->err, fn, arg);
		return;
	}
	write_done(t, i, fn, arg);
}

/* The open finished: read, or retry the open without O_DIRECT. */
static void open_settled(struct kvc_tio *t, int i, int res,
			 kvc_tio_done_fn fn, void *arg)
{
	struct slot *s = &t->slots[i];
	int ret;

	if (res == -EINVAL && s->direct) {	/* no O_DIRECT here */
		s->direct = false;
		s->oflags &= ~O_DIRECT;
		ret = queue_open(t, i);
	} else if (res < 0) {
		/* O_NOFOLLOW on a symlink: not a block file. */
		ret = res == -ELOOP ? -EBADMSG : res;
	} else {
		s->fd = res;
		ret = queue_read(t, i);
	}
	if (ret)
		complete(t, s, ret, fn, arg);
}

static void read_settled(struct kvc_tio *t, int i, bool eof,
			 kvc_tio_done_fn fn, void *arg)
{
	struct slot *s = &t->slots[i];
	struct kvc_bf_header h;
	int ret;

	if (s->err == -EINVAL && s->direct && !s->done) {
		s->direct = false;
		s->err = fcntl(s->fd, F_SETFL,
			       fcntl(s->fd, F_GETFL) & ~O_DIRECT) ? -errno : 0;
		if (!s->err)
			s->err = queue_read(t, i);
		if (!s->err)
			return;
	}
	if (s->err) {
		/* A directory, a FIFO: not a block file. */
		complete(t, s, s->err == -EISDIR || s->err == -EAGAIN ?
			 -EBADMSG : s->err, fn, arg);
		return;
	}
	/* The extra page came in full: larger than ours (or than dst). */
	if (s->done >= (s->dst ? s->size : t->buf_size)) {
		complete(t, s, -EFBIG, fn, arg);
		return;
	}
	/*
	 * Short of a header: without one the file's size is unknown, so
	 * read on until the end of the file says it (a file that short is
	 * corrupt anyway, and costs one more read). With O_DIRECT only from
	 * an aligned offset: an unaligned end is the file's.
	 */
	if (!eof && s->done && s->done < KVC_BF_HEADER_SIZE &&
	    (!s->direct || !(s->done % KVC_BF_ALIGN))) {
		ret = queue_read(t, i);
		if (ret)
			complete(t, s, ret, fn, arg);
		return;
	}
	/*
	 * A read that stops short of the buffer has reached the end of the
	 * file, as reads of regular files do; if the header says the file
	 * is longer than that, it was only a short read: go on.
	 */
	if (!eof && s->done >= KVC_BF_HEADER_SIZE &&
	    !kvc_bf_decode_header(s->buf, &h) &&
	    kvc_bf_file_size(h.payload_len) > s->done &&
	    kvc_bf_file_size(h.payload_len) <
	    (s->dst ? s->size : t->buf_size)) {
		ret = queue_read(t, i);
		if (ret)
			complete(t, s, ret, fn, arg);
		return;
	}
	s->size = s->done;
	ret = kvc_bf_check_split(s->buf, s->dst ? s->dst :
				 s->buf + KVC_BF_HEADER_SIZE, s->size, s->key,
				 &s->h);
	complete(t, s, ret, fn, arg);
}

/*
 * An armed fault (fault.h) replaces the completion's result here, where
 * the kernel's goes in: what follows is the handling of a real one. Not
 * on a request already failed (the fsync linked to a write made to fail
 * still runs): the fault would be spent on nothing.
 */
static int inject(const struct kvc_tio *t, const struct slot *s, int stage,
		  int res)
{
	if (s->err)
		return res;
	int err;

	switch (stage) {
	case ST_WRITE:
		return (int)kvc_fault_xfer(KVC_FAULT_TIER_WRITE, res);
	case ST_READ:
		return (int)kvc_fault_xfer(KVC_FAULT_TIER_READ, res);
	case ST_FSYNC:
		return res ? res : kvc_fault_err(KVC_FAULT_TIER_FSYNC);
	case ST_DIRSYNC:
		return res ? res : kvc_fault_err(KVC_FAULT_TIER_DIRSYNC);
	case ST_CLOSE:
		return res ? res : kvc_fault_err(KVC_FAULT_TIER_CLOSE);
	case ST_LINK:
		if (res)
			return res;
		/* As a real failure: no final name (undone here), and the
		 * temp name goes (link_settled()). */
		err = kvc_fault_err(KVC_FAULT_TIER_LINK);
		if (err)
			tio_unlink(t, s->final);
		return err;
	case ST_CREATE:
		if (res < 0)
			return res;
		/* Created, and the fault says not: it must not stay. */
		err = kvc_fault_err(KVC_FAULT_TIER_CREATE);
		if (err) {
			close(res);
			tio_unlink(t, s->tmp);
		}
		return err ? err : res;
	case ST_OPEN:
		/* A hold point holds; it never fails the open. */
		if (res < 0 ||
		    kvc_fault_kind(KVC_FAULT_TIER_OPEN) == KVC_FAULT_HOLD)
			return res;
		/* The open did succeed: its descriptor must not leak. */
		err = kvc_fault_err(KVC_FAULT_TIER_OPEN);
		if (err)
			close(res);
		return err ? err : res;
	}
	return res;
}

/*
 * A hold fault on an open's completion: the result waits in the slot,
 * behind a timeout on the ring, while the daemon goes on (fault.h). The
 * descriptor is the slot's meanwhile, so a teardown closes it. true
 * when held.
 */
static bool hold(struct kvc_tio *t, int i, int res)
{
	unsigned int ms = kvc_fault_hold(KVC_FAULT_TIER_OPEN);
	struct slot *s = &t->slots[i];
	struct io_uring_sqe *sqe;

	if (!ms)
		return false;
	sqe = sqe_get(t);
	if (!sqe)
		return false;
	s->held_res = res;
	if (res >= 0)
		s->fd = res;
	s->hold.tv_sec = ms / 1000;
	s->hold.tv_nsec = (long long)(ms % 1000) * 1000000;
	io_uring_prep_timeout(sqe, &s->hold, 0, 0);
	io_uring_sqe_set_data64(sqe, udata(i, ST_HELD));
	s->pending++;
	io_uring_submit(&t->ring);
	return true;
}

static void handle(struct kvc_tio *t, uint64_t data, int res,
		   kvc_tio_done_fn fn, void *arg)
{
	int i = (int)(data >> 8), stage = (int)(data & 0xff);
	bool eof = false;
	struct slot *s;

	if (data == UDATA_ORPHAN || i < 0 || (unsigned int)i >= t->depth)
		return;
	s = &t->slots[i];
	s->pending--;
	if (stage == ST_HELD) {
		stage = ST_OPEN;	/* its hold is over */
		res = s->held_res;
	} else if (kvc_fault_armed) {
		if (stage == ST_OPEN && hold(t, i, res))
			return;
		res = inject(t, s, stage, res);
	}
	switch (stage) {
	case ST_OPEN:
		open_settled(t, i, res, fn, arg);
		return;
	case ST_STATX:
		/* Already there: skip writing up to 4 GiB to find out at link. */
		res = res ? queue_meta(t, i, ST_CREATE) : -EEXIST;
		if (res)
			complete(t, s, res, fn, arg);
		return;
	case ST_MKDIR:
		if (!res) {
			s->made++;
			/* The umask must not take the readers' search bit. */
			if (t->chmod && fchmodat(t->root_fd, rel(t, s->dir), KVC_BF_DIR_MODE, 0))
				res = -errno;
		} else if (res == -EEXIST) {
			res = 0;
		}
		if (!res)
			res = queue_meta(t, i, s->mkdir++ == 1 ? ST_MKDIR :
					 ST_CREATE);
		if (res)
			complete(t, s, res, fn, arg);
		return;
	case ST_CREATE:
		create_settled(t, i, res, fn, arg);
		return;
	case ST_CLOSE:
		if (res) {
			tio_unlink(t, s->tmp);
			complete(t, s, res, fn, arg);
			return;
		}
		res = queue_meta(t, i, ST_LINK);
		if (res) {
			tio_unlink(t, s->tmp);
			complete(t, s, res, fn, arg);
		}
		return;
	case ST_LINK:
		link_settled(t, i, res, fn, arg);
		return;
	case ST_RENAME:
		if (res)
			tio_unlink(t, s->tmp);
		s->err = res;
		published(t, i, fn, arg);
		return;
	case ST_UNLINK:
		/* The temp name's removal failing leaves a leftover the
		 * next recovery removes; the write stands or fails as is. */
		published(t, i, fn, arg);
		return;
	case ST_DIROPEN:
		if (res < 0) {
			tio_unlink(t, s->final);
			complete(t, s, res, fn, arg);
			return;
		}
		s->fd = res;
		s->state = S_DIRSYNC;
		res = sqe_fsync(t, i);
		if (res) {
			tio_unlink(t, s->final);
			complete(t, s, res, fn, arg);
		}
		return;
	case ST_WRITE:
	case ST_READ:
		if (res < 0 && !s->err)
			s->err = res;
		else if (res == 0 && stage == ST_WRITE)
			s->err = s->err ? s->err : -EIO;	/* no progress */
		else if (res == 0)
			eof = true;
		else if (res > 0)
			s->done += (uint64_t)res;
		break;
	case ST_FSYNC:
		if (res == 0)
			s->synced = true;
		else if (res != -ECANCELED && !s->err)
			s->err = res;
		break;
	case ST_DIRSYNC:
		/* Some FUSE filesystems refuse fsync on a directory. */
		if (res == -EINVAL)
			res = 0;
		/*
		 * The name may not survive a crash, and the spill is reported
		 * failed: the caller does not account the file, so it must
		 * not stay either (it would take space no one counts).
		 */
		if (res)
			tio_unlink(t, s->final);
		if (!res && --s->dirsyncs > 0) {
			close(s->fd);
			s->fd = -1;
			res = queue_meta(t, i, ST_DIROPEN);
			if (!res)
				return;
			tio_unlink(t, s->final);
		}
		complete(t, s, res, fn, arg);
		return;
	}
	if (s->pending)
		return;
	if (stage == ST_READ)
		read_settled(t, i, eof, fn, arg);
	else
		write_settled(t, i, fn, arg);
}

int kvc_tio_reap(struct kvc_tio *t, bool wait, kvc_tio_done_fn fn,
		 void *arg)
{
	struct io_uring_cqe *cqe;
	uint64_t junk, before = t->completed;

	if (read(t->efd, &junk, sizeof(junk)) < 0 && errno != EAGAIN)
		return -errno;
	if (wait && kvc_tio_in_flight(t) && !io_uring_peek_cqe(&t->ring, &cqe))
		wait = false;
	if (wait && kvc_tio_in_flight(t)) {
		int ret = io_uring_wait_cqe(&t->ring, &cqe);

		if (ret)
			return ret;
	}
	/* One at a time: a callback may submit, which may add CQEs. */
	while (!io_uring_peek_cqe(&t->ring, &cqe)) {
		uint64_t data = cqe->user_data;
		int res = cqe->res;

		io_uring_cqe_seen(&t->ring, cqe);
		handle(t, data, res, fn, arg);
	}
	return (int)(t->completed - before);
}
