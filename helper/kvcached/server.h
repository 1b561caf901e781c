/* SPDX-License-Identifier: GPL-2.0 */
/*
 * server: kvcached's event loop, on io_uring (liburing).
 *
 * One SOCK_SEQPACKET listening socket (a datagram is a message, so there
 * is no framing to get wrong); per client one receive in flight, re-armed
 * after each message; the peer's credentials taken with SO_PEERCRED when
 * it connects (never from what it sends). Extra descriptors (the kernel's
 * netlink events, the metrics socket) are polled through the same ring,
 * and a timeout gives the daemon a periodic tick.
 *
 * Out of descriptors, a connection that cannot be taken is closed at once
 * (with a spare descriptor held for that) rather than left queued, and
 * the loop does not spin on the failing accept (server.c).
 *
 * Replies are sent at once, non-blocking: a client that does not read its
 * replies until its socket buffer is full is disconnected rather than
 * allowed to stall every other client. Descriptors a client sends are
 * closed unread; a datagram larger than KVC_PROTO_MSG_MAX is handed to
 * the daemon truncated, with the flag that says so.
 *
 * Single-threaded: every callback runs on the loop's thread.
 */
#ifndef KVC_SERVER_H
#define KVC_SERVER_H

#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define KVC_SERVER_MAX_CLIENTS	1024

struct kvc_peer {
	uint32_t id;		/* 0..KVC_SERVER_MAX_CLIENTS-1, unique while open */
	int fd;
	pid_t pid;		/* SO_PEERCRED, at connect */
	uid_t uid;
	gid_t gid;
	gid_t *groups;		/* SO_PEERGROUPS: supplementary groups */
	uint32_t ngroups;
	uint64_t serial;	/* unique for the server's life, unlike id */
};

/*
 * request() returns this to answer later, with kvc_server_reply(): the
 * client's next message is not read until then, so replies stay in order.
 */
#define KVC_SERVER_DEFER	INT_MAX

struct kvc_server_ops {
	/*
	 * One datagram of a client (truncated: it was larger than the
	 * buffer). Write the reply into reply (KVC_PROTO_MSG_MAX bytes) and
	 * return its length, 0 for no reply; set *pass_fd to send a
	 * descriptor with it. A negative return disconnects the client.
	 */
	int (*request)(void *ctx, struct kvc_peer *p, const uint8_t *msg,
		       size_t len, bool truncated, uint8_t *reply,
		       int *pass_fd);
	/* A client connected (non-zero refuses it) or went away. */
	int (*connected)(void *ctx, struct kvc_peer *p);
	void (*closed)(void *ctx, struct kvc_peer *p);
	/* A watched descriptor is readable; its poll is re-armed after. */
	void (*readable)(void *ctx, int fd);
	/* Every tick_ms (see kvc_server_open). */
	void (*tick)(void *ctx);
	/*
	 * Optional: a round of the loop begins, before its completions are
	 * handled. Every message a client had sent when the round began is
	 * handled in it (the kernel posts a receive's completion before the
	 * wait returns), so once a round has begun after a moment and ended,
	 * no message sent before that moment is still unread.
	 */
	void (*round)(void *ctx);
};

struct kvc_server;

/*
 * Listen on a Unix socket at path (an existing socket there is replaced,
 * anything else is -EEXIST), with permission bits mode. Returns 0 or
 * -errno.
 */
int kvc_server_open(struct kvc_server **out, const char *path,
		    unsigned int mode, uint64_t tick_ms,
		    const struct kvc_server_ops *ops, void *ctx);
/*
 * Make the directory a socket path is in (one level, mode 0755), as
 * systemd's RuntimeDirectory= would: 0 when it is there.
 */
int kvc_server_mkdir_parent(const char *path);

/* Poll fd for input from the loop (at most 8 descriptors). */
int kvc_server_watch(struct kvc_server *s, int fd);
/*
 * Run the loop until *wake is set (by a signal handler: the signal also
 * ends the wait) or timeout_ms have passed (0: no limit), then return 0
 * so that the caller can act on it; called again, the loop goes on where
 * it was. A signal that comes just before the loop waits is seen at its
 * next wake, at the latest when the tick or the timeout ends the wait.
 * Returns 0, or -errno when the ring fails.
 */
int kvc_server_run(struct kvc_server *s, volatile sig_atomic_t *wake,
		   uint64_t timeout_ms);
/* Tick every tick_ms (> 0) from the next tick on (a reload's interval). */
void kvc_server_set_tick(struct kvc_server *s, uint64_t tick_ms);
/*
 * The deferred reply to the client (id, serial): sent, and its next
 * message read. -ENOTCONN when it has gone (or could not take the reply,
 * which disconnects it).
 */
int kvc_server_reply(struct kvc_server *s, uint32_t id, uint64_t serial,
		     const uint8_t *msg, size_t len, int pass_fd);

/* Disconnect every client (closed() for each) and remove the socket. */
void kvc_server_close(struct kvc_server *s);

#endif /* KVC_SERVER_H */
