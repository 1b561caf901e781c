/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A file system that answers when the test says so: a minimal FUSE server
 * speaking the raw /dev/fuse protocol (no libfuse), for the selftests
 * that need file I/O which hangs the way a dead NFS server or a stuck
 * FUSE daemon makes it hang. Header-only: each selftest is one binary.
 *
 * The mount holds one regular file, KVC_FUSE_NAME, of a fixed size. Its
 * READ answers carry fill()'s pattern (kvc_p2p.h) for the seed given at
 * start; its WRITEs are accepted and counted. While the server is
 * stalled (kvc_fuse_stall()), every READ and WRITE of the file is held:
 * read from /dev/fuse and left unanswered, so the kernel task that sent
 * it waits in fuse's request_wait_answer() until kvc_fuse_unstall()
 * answers it. Everything else (LOOKUP, GETATTR, OPEN, RELEASE...) is
 * answered at once, so only the data path hangs.
 *
 * The file is opened with FOPEN_DIRECT_IO | FOPEN_NOFLUSH: direct I/O so
 * every read and write reaches the server (no page cache in between), and
 * no FLUSH because fuse_flush() takes the inode lock, which a stalled
 * direct write holds: a process closing its descriptor of the file (as
 * exit does) would then hang in FUSE itself, whatever the caller of the
 * stalled write does.
 *
 * The server is a thread of the test process: if the test dies, its
 * /dev/fuse descriptor goes with it and the kernel aborts the connection,
 * which fails every held request. So even a test killed by the harness's
 * timeout leaves nothing stuck behind it.
 */
#ifndef KVC_FUSE_H
#define KVC_FUSE_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <linux/fuse.h>

#include "kvc_p2p.h"

#define KVC_FUSE_NAME		"f"
#define KVC_FUSE_ROOT		FUSE_ROOT_ID
#define KVC_FUSE_FILE		2		/* the file's node id */
#define KVC_FUSE_MAX_WRITE	(128 << 10)
/* A request is at most a header, fuse_write_in and max_write of data. */
#define KVC_FUSE_BUF		(KVC_FUSE_MAX_WRITE + 4096)
#define KVC_FUSE_MAX_HELD	64

struct kvc_fuse_held {
	uint64_t unique;
	uint32_t opcode;
	uint32_t size;
	uint64_t offset;
};

struct kvc_fuse {
	int fd;				/* /dev/fuse, -1 when not started */
	int quit[2];			/* pipe: stops the server thread */
	bool mounted;
	bool thread_started;
	pthread_t thread;
	char dir[PATH_MAX];
	char path[PATH_MAX + 8];	/* the file */
	uint64_t size;
	uint32_t seed;

	pthread_mutex_t lock;		/* everything below */
	pthread_cond_t cond;		/* ->held or a counter changed */
	bool stall;
	unsigned int nheld;
	struct kvc_fuse_held held[KVC_FUSE_MAX_HELD];
	unsigned int held_total;	/* requests ever held */
	unsigned int opens, releases;	/* of the file */
	uint64_t read_bytes, written_bytes;	/* answered */
};

static inline void kvc_fuse_attr(struct fuse_attr *a, uint64_t node,
				 uint64_t size)
{
	memset(a, 0, sizeof(*a));
	a->ino = node;
	a->blksize = 4096;
	if (node == KVC_FUSE_ROOT) {
		a->mode = S_IFDIR | 0755;
		a->nlink = 2;
	} else {
		a->mode = S_IFREG | 0666;
		a->nlink = 1;
		a->size = size;
		a->blocks = (size + 511) / 512;
	}
}

/* Answer request @unique: @error, or 0 and @len bytes of @data. */
static inline int kvc_fuse_reply(struct kvc_fuse *f, uint64_t unique,
				 int error, const void *data, size_t len)
{
	struct fuse_out_header out = {
		.len = (uint32_t)(sizeof(out) + (error ? 0 : len)),
		.error = error, .unique = unique,
	};
	struct iovec iov[2] = {
		{ .iov_base = &out, .iov_len = sizeof(out) },
		{ .iov_base = (void *)data, .iov_len = error ? 0 : len },
	};

	/* ENOENT: the request was interrupted and is gone; nothing to do. */
	if (writev(f->fd, iov, 2) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

/* Answer a READ or WRITE of the file as the file system would. */
static inline void kvc_fuse_answer_io(struct kvc_fuse *f,
				      const struct kvc_fuse_held *h)
{
	if (h->opcode == FUSE_WRITE) {
		struct fuse_write_out wo = { .size = h->size };

		pthread_mutex_lock(&f->lock);
		f->written_bytes += h->size;
		pthread_mutex_unlock(&f->lock);
		kvc_fuse_reply(f, h->unique, 0, &wo, sizeof(wo));
		return;
	}
	/* READ: the pattern, cut at end of file. */
	uint64_t n = h->offset >= f->size ? 0 : f->size - h->offset;
	void *buf;

	if (n > h->size)
		n = h->size;
	buf = calloc(1, n + 8);
	if (!buf) {
		kvc_fuse_reply(f, h->unique, -ENOMEM, NULL, 0);
		return;
	}
	/* fill() works in words of the stream: offsets are 8-aligned here. */
	fill(buf, h->offset, (n + 7) & ~7ULL, f->seed);
	pthread_mutex_lock(&f->lock);
	f->read_bytes += n;
	pthread_mutex_unlock(&f->lock);
	kvc_fuse_reply(f, h->unique, 0, buf, n);
	free(buf);
}

/* One request from /dev/fuse. */
static inline void kvc_fuse_handle(struct kvc_fuse *f, const uint8_t *req)
{
	const struct fuse_in_header *in = (const void *)req;
	const void *arg = req + sizeof(*in);
	uint64_t node = in->nodeid;

	switch (in->opcode) {
	case FUSE_INIT: {
		const struct fuse_init_in *ii = arg;
		struct fuse_init_out io = {
			.major = FUSE_KERNEL_VERSION,
			.minor = ii->minor < FUSE_KERNEL_MINOR_VERSION ?
				 ii->minor : FUSE_KERNEL_MINOR_VERSION,
			.max_readahead = ii->max_readahead,
			.max_background = 16, .congestion_threshold = 12,
			.max_write = KVC_FUSE_MAX_WRITE, .time_gran = 1,
		};

		kvc_fuse_reply(f, in->unique, 0, &io, sizeof(io));
		return;
	}
	case FUSE_LOOKUP: {
		struct fuse_entry_out eo = {
			.nodeid = KVC_FUSE_FILE, .generation = 1,
			.entry_valid = 3600, .attr_valid = 3600,
		};

		if (node != KVC_FUSE_ROOT || strcmp(arg, KVC_FUSE_NAME)) {
			kvc_fuse_reply(f, in->unique, -ENOENT, NULL, 0);
			return;
		}
		kvc_fuse_attr(&eo.attr, KVC_FUSE_FILE, f->size);
		kvc_fuse_reply(f, in->unique, 0, &eo, sizeof(eo));
		return;
	}
	case FUSE_GETATTR:
	case FUSE_SETATTR: {
		struct fuse_attr_out ao = { .attr_valid = 3600 };

		/* SETATTR (say, a chmod) is accepted and changes nothing. */
		kvc_fuse_attr(&ao.attr, node, f->size);
		kvc_fuse_reply(f, in->unique, 0, &ao, sizeof(ao));
		return;
	}
	case FUSE_OPEN: {
		struct fuse_open_out oo = {
			.fh = 1, .open_flags = FOPEN_DIRECT_IO | FOPEN_NOFLUSH,
		};

		pthread_mutex_lock(&f->lock);
		f->opens++;
		pthread_mutex_unlock(&f->lock);
		kvc_fuse_reply(f, in->unique, 0, &oo, sizeof(oo));
		return;
	}
	case FUSE_READ:
	case FUSE_WRITE: {
		/* fuse_read_in and fuse_write_in agree up to ->size. */
		const struct fuse_read_in *ri = arg;
		struct kvc_fuse_held h = {
			.unique = in->unique, .opcode = in->opcode,
			.size = ri->size, .offset = ri->offset,
		};

		pthread_mutex_lock(&f->lock);
		if (f->stall && f->nheld < KVC_FUSE_MAX_HELD) {
			f->held[f->nheld++] = h;
			f->held_total++;
			pthread_cond_broadcast(&f->cond);
			pthread_mutex_unlock(&f->lock);
			return;
		}
		pthread_mutex_unlock(&f->lock);
		kvc_fuse_answer_io(f, &h);
		return;
	}
	case FUSE_RELEASE:
		pthread_mutex_lock(&f->lock);
		f->releases++;
		pthread_cond_broadcast(&f->cond);
		pthread_mutex_unlock(&f->lock);
		kvc_fuse_reply(f, in->unique, 0, NULL, 0);
		return;
	case FUSE_FLUSH:
	case FUSE_FSYNC:
	case FUSE_DESTROY:
		kvc_fuse_reply(f, in->unique, 0, NULL, 0);
		return;
	case FUSE_FORGET:
	case FUSE_BATCH_FORGET:
	case FUSE_INTERRUPT:
		return;		/* never answered */
	default:
		/* The kernel remembers ENOSYS and stops asking. */
		kvc_fuse_reply(f, in->unique, -ENOSYS, NULL, 0);
		return;
	}
}

static inline void *kvc_fuse_serve(void *arg)
{
	struct kvc_fuse *f = arg;
	uint8_t *buf = malloc(KVC_FUSE_BUF);
	struct pollfd pfd[2] = {
		{ .fd = f->fd, .events = POLLIN },
		{ .fd = f->quit[0], .events = POLLIN },
	};
	ssize_t n;

	while (buf) {
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pfd[1].revents)
			break;
		if (!(pfd[0].revents & POLLIN)) {
			if (pfd[0].revents & (POLLERR | POLLHUP))
				break;	/* unmounted or aborted */
			continue;
		}
		n = read(f->fd, buf, KVC_FUSE_BUF);
		if (n < 0) {
			/* ENOENT: a request interrupted before we read it. */
			if (errno == EINTR || errno == EAGAIN ||
			    errno == ENOENT)
				continue;
			break;	/* ENODEV: the connection is gone */
		}
		if ((size_t)n >= sizeof(struct fuse_in_header))
			kvc_fuse_handle(f, buf);
	}
	free(buf);
	return NULL;
}

/*
 * Mount the file system at @dir (created), with the file of @size bytes
 * holding pattern @seed. Needs root. 0, or -errno (-ENODEV: no FUSE).
 */
static inline int kvc_fuse_start(struct kvc_fuse *f, const char *dir,
				 uint64_t size, uint32_t seed)
{
	char opts[128];
	int ret;

	memset(f, 0, sizeof(*f));
	f->quit[0] = f->quit[1] = -1;
	f->size = size;
	f->seed = seed;
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	snprintf(f->dir, sizeof(f->dir), "%s", dir);
	snprintf(f->path, sizeof(f->path), "%s/" KVC_FUSE_NAME, f->dir);
	/* Non-blocking: the thread polls, and a stray read cannot block. */
	f->fd = open("/dev/fuse", O_RDWR | O_CLOEXEC | O_NONBLOCK);
	if (f->fd < 0)
		return -errno;
	if (pipe2(f->quit, O_CLOEXEC))
		return -errno;
	if (mkdir(dir, 0755) && errno != EEXIST)
		return -errno;
	snprintf(opts, sizeof(opts),
		 "fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other",
		 f->fd);
	/* The kernel queues FUSE_INIT; the thread answers it. */
	if (mount("kvc-fuse", dir, "fuse", MS_NOSUID | MS_NODEV, opts))
		return -errno;
	f->mounted = true;
	ret = pthread_create(&f->thread, NULL, kvc_fuse_serve, f);
	if (ret)
		return -ret;
	f->thread_started = true;
	return 0;
}

/* From now on hold every READ and WRITE of the file. */
static inline void kvc_fuse_stall(struct kvc_fuse *f)
{
	pthread_mutex_lock(&f->lock);
	f->stall = true;
	pthread_mutex_unlock(&f->lock);
}

/* Answer what is held and stop holding. Harmless when not stalled. */
static inline void kvc_fuse_unstall(struct kvc_fuse *f)
{
	struct kvc_fuse_held held[KVC_FUSE_MAX_HELD];
	unsigned int n;

	if (f->fd < 0)
		return;
	pthread_mutex_lock(&f->lock);
	f->stall = false;
	n = f->nheld;
	memcpy(held, f->held, n * sizeof(held[0]));
	f->nheld = 0;
	pthread_mutex_unlock(&f->lock);
	/* Replies may come from any thread: each is one write(2). */
	for (unsigned int i = 0; i < n; i++)
		kvc_fuse_answer_io(f, &held[i]);
}

static inline void kvc_fuse_deadline(struct timespec *ts, int ms)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts->tv_nsec >= 1000000000) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000;
	}
}

/* Wait up to @ms for at least @n requests held now. 0 or -ETIMEDOUT. */
static inline int kvc_fuse_wait_held(struct kvc_fuse *f, unsigned int n,
				     int ms)
{
	struct timespec ts;
	int ret = 0;

	kvc_fuse_deadline(&ts, ms);
	pthread_mutex_lock(&f->lock);
	while (f->nheld < n && !ret)
		ret = pthread_cond_timedwait(&f->cond, &f->lock, &ts);
	pthread_mutex_unlock(&f->lock);
	return f->nheld >= n ? 0 : -ETIMEDOUT;
}

/* Wait up to @ms until every open of the file has been released. */
static inline int kvc_fuse_wait_closed(struct kvc_fuse *f, int ms)
{
	struct timespec ts;
	bool closed;
	int ret = 0;

	kvc_fuse_deadline(&ts, ms);
	pthread_mutex_lock(&f->lock);
	while (f->releases < f->opens && !ret)
		ret = pthread_cond_timedwait(&f->cond, &f->lock, &ts);
	closed = f->releases >= f->opens;
	pthread_mutex_unlock(&f->lock);
	return closed ? 0 : -ETIMEDOUT;
}

/*
 * Unstall, unmount (lazily: a file still open elsewhere must not make
 * this fail) and stop the server. Closing /dev/fuse aborts the connection,
 * so whatever is still waiting for an answer then fails instead of
 * waiting. Safe on a half-started or already stopped server.
 */
static inline void kvc_fuse_stop(struct kvc_fuse *f)
{
	kvc_fuse_unstall(f);
	if (f->mounted && !umount2(f->dir, MNT_DETACH))
		f->mounted = false;
	if (f->thread_started) {
		if (write(f->quit[1], "q", 1) == 1)
			pthread_join(f->thread, NULL);
		f->thread_started = false;
	}
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
	for (int i = 0; i < 2; i++)
		if (f->quit[i] >= 0)
			close(f->quit[i]);
	f->quit[0] = f->quit[1] = -1;
	if (f->dir[0])
		rmdir(f->dir);
}

#endif /* KVC_FUSE_H */
