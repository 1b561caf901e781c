// SPDX-License-Identifier: GPL-2.0
/*
 * tier_worker: a tier's metadata work, on a thread of its own (tier_priv.h).
 *
 * The reads and writes of block files go through io_uring (tierio.c),
 * but a rescan lists directories, and readdir has no io_uring
 * operation; GC stats and renames, lease renewals touch mtimes. On a
 * shared filesystem each of those is a round trip to a server that may
 * be slow, restarting (its grace period: tens of seconds) or, on a hard
 * mount whose link is cut, gone for as long as the cut lasts. Done on
 * the daemon's one thread they would stop every engine it serves. So
 * the loop posts them here as jobs and goes on; the worker runs them one
 * at a time, in order, and the loop applies their results at its next
 * tick (kvc_tier_tick -> tier_jobs_reap).
 *
 * Lifetime: a job is malloc()ed by the loop, owned by the queue from
 * tier_job_post() until the worker has run it, then by the done list,
 * then by the loop again, which applies and frees it. The worker reads
 * the tier's fixed configuration (dir, node, opened, writable, grace)
 * and its own walk cache; it never touches the index, the policy, the
 * counters or anything else of the loop's.
 *
 * Locking: one mutex guards the two lists, the queue length and stop;
 * the condition variable wakes the worker. Nothing else is shared.
 *
 * A worker stuck in the filesystem (a hard mount, a cut link) at close:
 * the close waits TIER_WORKER_JOIN_S for it, then leaves it, and the
 * tier with it, to the process's exit rather than hang the shutdown.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include "beneath.h"
#include "clock.h"
#include "log.h"
#include "tier_priv.h"

#define TIER_JOBS_MAX		4096	/* queued at most: then refused */
#define TIER_WORKER_JOIN_S	2

#define TIER_CLOCK_EVERY_S	60	/* the server's clock, measured again */
#define NSEC			1000000000LL

/*
 * A lease is a file's mtime, and its age is judged by the server's
 * clock. A renewal sets the mtime with utimensat(2) and no times, which
 * NFS sends as SET_TO_SERVER_TIME: the server's clock, not the reader's.
 * Compared with this node's clock, every lease would be shorter (or
 * longer) by the difference of the two clocks, and nodes without a
 * common time source differ by seconds or more. So the worker reads the
 * server's clock the same way: it touches this node's claim file (whose
 * mtime is a heart beat anyway), reads the mtime back and keeps the
 * difference, measured again every TIER_CLOCK_EVERY_S. A local
 * filesystem measures 0.
 *
 * The difference is kept against CLOCK_MONOTONIC, not this node's wall
 * clock: a wall clock stepped between two measures (NTP coming up, an
 * admin's date -s) would otherwise age every lease by the step until
 * the next measure, and GC would collect files being read. The wall
 * clock serves only the warning that the two clocks differ.
 */
static int64_t wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * NSEC + ts.tv_nsec;
}

int64_t tier_server_now_ns(struct kvc_tier *t)
{
	struct tier_worker *w = &t->w;
	int64_t now = (int64_t)kvc_now_ns(), a, b, mid, d;
	struct timespec wall;
	struct stat st;

	if (!t->cfg.shared || !t->node_path[0])
		return wall_ns();
	/* The last measure stands; none yet: this node's clock. */
	if (w->clock_at && now - w->clock_at < TIER_CLOCK_EVERY_S * NSEC)
		return w->clock_known ? now + w->offset : wall_ns();
	w->clock_at = now;	/* a failed measure is not tried at once */
	a = (int64_t)kvc_now_ns();
	/* Our claim's descriptor, never its name: the name can be made to
	 * point at another file (tier_node.c). */
	if (t->node_fd < 0 || futimens(t->node_fd, NULL) ||
	    fstat(t->node_fd, &st))
		return w->clock_known ? now + w->offset : wall_ns();
	b = (int64_t)kvc_now_ns();
	clock_gettime(CLOCK_REALTIME, &wall);
	w->clock_known = true;
	/* Against the middle of the round trip. */
	mid = a + (b - a) / 2;
	w->offset = (int64_t)st.st_mtim.tv_sec * NSEC + st.st_mtim.tv_nsec -
		    mid;
	/* The server's clock less this node's wall clock, nearest second. */
	d = b + w->offset - ((int64_t)wall.tv_sec * NSEC + wall.tv_nsec);
	d = (d + (d < 0 ? -NSEC / 2 : NSEC / 2)) / NSEC;
	if (!w->clock_warned && llabs(d) > 1 &&
	    llabs(d) * 4000 > (int64_t)t->cfg.grace_ms) {
		w->clock_warned = true;
		kvc_warn("%s: this node's clock and the server's differ by %" PRId64 " s: leases are judged by the server's clock, but keep every node in time (NTP, chrony)",
			 t->dir, d);
	}
	return b + w->offset;
}

/*
 * How long ago, by the server's clock, a file time was set. In
 * nanoseconds, not whole seconds: with a grace of a few seconds, an age
 * counted from the second's start would shorten a lease by up to a
 * second, and a block written or read at x.9 would be collectable at x+1.
 */
int64_t tier_age_ns(struct kvc_tier *t, const struct timespec *ts)
{
	return tier_server_now_ns(t) -
	       ((int64_t)ts->tv_sec * NSEC + ts->tv_nsec);
}

static bool gc_cancelled(struct tier_job *j)
{
	return __atomic_load_n(&j->cancel, __ATOMIC_ACQUIRE);
}

/*
 * GC of one victim: skip it when leased (its mtime, which readers on
 * every node renew, or a read on this node since the job was posted),
 * else move it to .gc/.
 */
static int run_gc(struct kvc_tier *t, struct tier_job *j)
{
	char trash[NAME_MAX + 1];
	struct stat st = { 0 };	/* st_mode 0: nothing to collect */
	const char *name;
	int dfd, gfd, ret;

	if (gc_cancelled(j))
		return -EBUSY;
	/* Every step from the tier's root, through no link (beneath.h). */
	dfd = tier_open_parent(t, j->path, &name);
	if (dfd < 0)
		return dfd == -ENOENT ? 0 : dfd;
	ret = 0;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW))
		ret = errno == ENOENT ? 0 : -errno;
	else if (!S_ISREG(st.st_mode))
		ret = -EINVAL;	/* not a block file: nothing to collect */
	else if (tier_age_ns(t, &st.st_mtim) <
		 (int64_t)t->cfg.grace_ms * 1000000)
		ret = -EBUSY;
	else if (snprintf(trash, sizeof(trash), "%s.%u.%s", t->node, j->ns,
			  name) >= (int)sizeof(trash))
		ret = -ENAMETOOLONG;
	if (ret || !S_ISREG(st.st_mode)) {
		close(dfd);
		return ret;
	}
	/* Private: what waits there is other tenants' KV. */
	gfd = kvc_private_dir(t->root_fd, ".gc", t->owner);
	if (gfd < 0) {
		if (gfd == -EPERM)
			kvc_warn_ratelimited("%s/.gc is not kvcached's own (0700): nothing is collected into it",
					     t->dir);
		close(dfd);
		return gfd;
	}
	if (gc_cancelled(j))
		ret = -EBUSY;
	else if (renameat(dfd, name, gfd, trash))
		ret = errno == ENOENT ? 0 : -errno;
	close(gfd);
	close(dfd);
	return ret;
}

/* A file left unreachable: removed if it is still old (its mtime now). */
static int run_unlink_old(struct kvc_tier *t, struct tier_job *j)
{
	const char *name;
	struct stat st;
	int dfd, ret = 0;

	dfd = tier_open_parent(t, j->path, &name);
	if (dfd < 0)
		return dfd;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW))
		ret = -errno;
	else if (tier_age_ns(t, &st.st_mtim) <= j->age * NSEC)
		ret = -EBUSY;
	else if (unlinkat(dfd, name, 0))
		ret = -errno;
	close(dfd);
	return ret;
}

/* A lease renewed: the file's times, not a link's target's. */
static int run_touch(struct kvc_tier *t, struct tier_job *j)
{
	const char *name;
	int dfd, ret = 0;

	dfd = tier_open_parent(t, j->path, &name);
	if (dfd < 0)
		return dfd;
	if (utimensat(dfd, name, NULL, AT_SYMLINK_NOFOLLOW))
		ret = -errno;
	close(dfd);
	return ret;
}

static void run(struct kvc_tier *t, struct tier_job *j)
{
	char d[PATH_MAX];

	switch (j->kind) {
	case TJ_WALK:
		j->status = tier_walk_run(t, j->walk, true);
		break;
	case TJ_GC:
		j->status = run_gc(t, j);
		break;
	case TJ_UNLINK_OLD:
		j->status = run_unlink_old(t, j);
		break;
	case TJ_TOUCH:
		j->status = run_touch(t, j);
		break;
	case TJ_TRASH:
		tier_gc_trash(t);
		j->status = 0;
		break;
	case TJ_QUARANTINE:
		snprintf(d, sizeof(d), "ns%u", j->ns);
		j->status = kvc_bf_quarantine(t->dir, d, j->key, t->owner);
		break;
	case TJ_CALL:
		j->run(j->arg);
		j->status = 0;
		break;
	default:
		j->status = -EINVAL;
	}
}

/* Take j, which follows prev, out of the queue (w->mu held). */
static void unqueue(struct tier_worker *w, struct tier_job *prev,
		    struct tier_job *j)
{
	if (prev)
		prev->next = j->next;
	else
		w->todo = j->next;
	if (w->todo_tail == j)
		w->todo_tail = prev;
	j->next = NULL;
}

/*
 * The next job: a lease renewal before anything else, as another node's
 * GC may be about to stat that file; the rest in order (w->mu held).
 */
static struct tier_job *take_next(struct tier_worker *w)
{
	struct tier_job *prev = NULL, *j = w->todo;

	while (j && j->kind != TJ_TOUCH) {
		prev = j;
		j = j->next;
	}
	if (!j) {
		prev = NULL;
		j = w->todo;
	}
	unqueue(w, prev, j);
	return j;
}

/* j at the end of the list head..tail (w->mu held). */
static void append(struct tier_job **head, struct tier_job **tail,
		   struct tier_job *j)
{
	j->next = NULL;
	if (*tail)
		(*tail)->next = j;
	else
		*head = j;
	*tail = j;
}

/* j has run: on the done list for the loop (w->mu held). */
static void finished(struct tier_worker *w, struct tier_job *j)
{
	append(&w->done, &w->done_tail, j);
	pthread_cond_broadcast(&w->cv);	/* tier_jobs_wait() */
}

/*
 * A walk of a large directory on a slow server takes seconds; a lease
 * renewal queued behind it would let another node's GC take a block
 * this one is reading. So the walk calls this between directories: the
 * renewals queued meanwhile run now, the rest waits its turn.
 */
void tier_worker_renew(struct kvc_tier *t)
{
	struct tier_worker *w = &t->w;
	struct tier_job *prev = NULL, *j, *touch = NULL, **tail = &touch;

	if (!w->on || !pthread_equal(pthread_self(), w->thread))
		return;
	pthread_mutex_lock(&w->mu);
	j = w->todo;
	while (j) {
		struct tier_job *next = j->next;

		if (j->kind == TJ_TOUCH) {
			unqueue(w, prev, j);
			*tail = j;
			tail = &j->next;
		} else {
			prev = j;
		}
		j = next;
	}
	pthread_mutex_unlock(&w->mu);
	while (touch) {
		j = touch;
		touch = j->next;
		run(t, j);
		pthread_mutex_lock(&w->mu);
		finished(w, j);
		pthread_mutex_unlock(&w->mu);
	}
}

static void *worker(void *arg)
{
	struct kvc_tier *t = arg;
	struct tier_worker *w = &t->w;

	pthread_mutex_lock(&w->mu);
	for (;;) {
		struct tier_job *j;

		while (!w->todo && !w->stop)
			pthread_cond_wait(&w->cv, &w->mu);
		if (w->stop)
			break;
		j = take_next(w);
		w->running = j;
		pthread_mutex_unlock(&w->mu);

		run(t, j);

		pthread_mutex_lock(&w->mu);
		w->running = NULL;
		finished(w, j);
	}
	w->exited = true;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

int tier_worker_start(struct kvc_tier *t)
{
	struct tier_worker *w = &t->w;
	sigset_t all, old;
	int ret;

	ret = pthread_mutex_init(&w->mu, NULL);
	if (ret)
		return -ret;
	ret = pthread_cond_init(&w->cv, NULL);
	if (ret) {
		pthread_mutex_destroy(&w->mu);
		return -ret;
	}
	/* Signals are the loop's (a SIGTERM must interrupt its wait): the
	 * worker starts with all of them blocked. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = pthread_create(&w->thread, NULL, worker, t);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret) {
		pthread_cond_destroy(&w->cv);
		pthread_mutex_destroy(&w->mu);
		return -ret;
	}
	w->on = true;
	return 0;
}

static void free_jobs(struct tier_job *j)
{
	while (j) {
		struct tier_job *next = j->next;

		/* Its owner frees arg there (a job never run says so). */
		if (j->kind == TJ_CALL)
			j->done(j->arg);
		tier_job_free(j);
		j = next;
	}
}

bool tier_worker_stop(struct kvc_tier *t)
{
	struct tier_worker *w = &t->w;
	struct timespec until;
	bool exited;

	if (!w->on)
		return true;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += TIER_WORKER_JOIN_S;
	pthread_mutex_lock(&w->mu);
	w->stop = true;
	pthread_cond_broadcast(&w->cv);
	while (!w->exited &&
	       pthread_cond_timedwait(&w->cv, &w->mu, &until) != ETIMEDOUT)
		;
	exited = w->exited;
	pthread_mutex_unlock(&w->mu);
	if (!exited) {
		/* In the filesystem still: its job, its tier stay. */
		kvc_warn("%s: the metadata worker is still waiting for the filesystem after %d s: left to the exit",
			 t->dir, TIER_WORKER_JOIN_S);
		pthread_detach(w->thread);
		return false;
	}
	pthread_join(w->thread, NULL);
	free_jobs(w->todo);
	free_jobs(w->done);
	w->todo = w->todo_tail = w->done = w->done_tail = NULL;
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	w->on = false;
	return true;
}

struct tier_job *tier_job_new(int kind)
{
	struct tier_job *j = calloc(1, sizeof(*j));

	if (j)
		j->kind = kind;
	return j;
}

void tier_job_free(struct tier_job *j)
{
	if (!j)
		return;
	if (j->walk)
		tier_walk_free(j->walk);
	free(j);
}

int tier_job_post(struct kvc_tier *t, struct tier_job *j)
{
	struct tier_worker *w = &t->w;

	if (!w->on) {
		/* No worker (it could not start): run it here. */
		run(t, j);
		j->next = w->done;
		w->done = j;
		if (!w->done_tail)
			w->done_tail = j;
		w->queued++;
		return 0;
	}
	pthread_mutex_lock(&w->mu);
	if (w->queued >= TIER_JOBS_MAX) {
		pthread_mutex_unlock(&w->mu);
		tier_job_free(j);
		return -EAGAIN;
	}
	append(&w->todo, &w->todo_tail, j);
	w->queued++;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	return 0;
}

/* Take the finished jobs (in the order they ran). */
static struct tier_job *take_done(struct kvc_tier *t)
{
	struct tier_worker *w = &t->w;
	struct tier_job *j;

	if (w->on)
		pthread_mutex_lock(&w->mu);
	j = w->done;
	w->done = w->done_tail = NULL;
	for (struct tier_job *k = j; k; k = k->next)
		w->queued--;
	if (w->on)
		pthread_mutex_unlock(&w->mu);
	return j;
}

void tier_jobs_reap(struct kvc_tier *t)
{
	struct tier_job *j = take_done(t);

	while (j) {
		struct tier_job *next = j->next;

		j->next = NULL;
		if (tier_job_done(t, j))
			tier_job_free(j);
		j = next;
	}
}

int kvc_tier_call(struct kvc_tier *t, kvc_tier_call_fn run,
		  kvc_tier_call_fn done, void *arg)
{
	struct tier_job *j = tier_job_new(TJ_CALL);

	if (!j)
		return -ENOMEM;
	j->run = run;
	j->done = done;
	j->arg = arg;
	return tier_job_post(t, j);
}

void tier_jobs_wait(struct kvc_tier *t)
{
	struct tier_worker *w = &t->w;

	if (!w->on)
		return;
	pthread_mutex_lock(&w->mu);
	while (w->todo || w->running)
		pthread_cond_wait(&w->cv, &w->mu);
	pthread_mutex_unlock(&w->mu);
}
