// SPDX-License-Identifier: GPL-2.0
/*
 * libkvcache: asynchronous loads and stores.
 *
 * A call queues a job and returns; the client's worker threads run jobs
 * in order with the synchronous code and queue a completion, which
 * kvcache_poll() collects. An eventfd counts while completions wait, so an
 * engine can wait for them in its own epoll loop.
 *
 * Locking: a->lock guards both queues, the pending count and the eventfd's
 * state; a->work wakes workers, a->done wakes pollers. The eventfd is
 * written and drained under a->lock, so it is readable exactly while the
 * completion queue is not empty.
 */
#include "lib_priv.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

enum job_kind { JOB_LOAD, JOB_STORE };

struct job {
	struct job *next;
	enum job_kind kind;
	struct kvcache_namespace *ns;
	const uint8_t *parent;
	const uint8_t *keys;
	size_t n;
	void *buf;
	size_t stride;
	struct kvcache_completion done;
};

struct lib_async {
	pthread_mutex_t lock;
	pthread_cond_t work, done;
	struct job *todo, **todo_tail;
	struct job *finished, **finished_tail;
	unsigned int pending;	/* queued, running or finished, not polled */
	bool stopping;
	int efd;
	unsigned int nthreads;
	pthread_t threads[LIB_MAX_THREADS];
};

static void *worker(void *arg)
{
	struct lib_async *a = arg;
	struct job *j;

	pthread_mutex_lock(&a->lock);
	for (;;) {
		while (!a->todo && !a->stopping)
			pthread_cond_wait(&a->work, &a->lock);
		if (!a->todo)
			break;
		j = a->todo;
		a->todo = j->next;
		if (!a->todo)
			a->todo_tail = &a->todo;
		pthread_mutex_unlock(&a->lock);

		if (j->kind == JOB_LOAD)
			j->done.result = kvcache_load(j->ns, j->keys, j->n,
						      j->buf, j->stride);
		else
			j->done.result = kvcache_store(j->ns, j->parent,
						       j->keys, j->n, j->buf,
						       j->stride);

		pthread_mutex_lock(&a->lock);
		j->next = NULL;
		*a->finished_tail = j;
		a->finished_tail = &j->next;
		/* The counter cannot overflow at one per job. */
		(void)eventfd_write(a->efd, 1);
		pthread_cond_broadcast(&a->done);
	}
	pthread_mutex_unlock(&a->lock);
	return NULL;
}

int lib_async_start(struct kvcache *c, unsigned int workers)
{
	struct lib_async *a = calloc(1, sizeof(*a));

	if (!a)
		return -ENOMEM;
	pthread_mutex_init(&a->lock, NULL);
	pthread_cond_init(&a->work, NULL);
	pthread_cond_init(&a->done, NULL);
	a->todo_tail = &a->todo;
	a->finished_tail = &a->finished;
	a->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	c->async = a;
	if (a->efd < 0)
		return -errno;
	for (unsigned int i = 0; i < workers; i++) {
		int ret = pthread_create(&a->threads[i], NULL, worker, a);

		if (ret)
			return -ret;
		a->nthreads++;
	}
	return 0;
}

void lib_async_stop(struct kvcache *c)
{
	struct lib_async *a = c->async;
	struct job *j;

	if (!a)
		return;
	/* Workers finish what was queued: the caller's buffers are in it. */
	pthread_mutex_lock(&a->lock);
	a->stopping = true;
	pthread_cond_broadcast(&a->work);
	pthread_mutex_unlock(&a->lock);
	for (unsigned int i = 0; i < a->nthreads; i++)
		pthread_join(a->threads[i], NULL);
	while ((j = a->finished)) {
		a->finished = j->next;
		free(j);
	}
	if (a->efd >= 0)
		close(a->efd);
	pthread_cond_destroy(&a->done);
	pthread_cond_destroy(&a->work);
	pthread_mutex_destroy(&a->lock);
	free(a);
	c->async = NULL;
}

static int queue(struct kvcache *c, struct job *j)
{
	struct lib_async *a = c->async;

	pthread_mutex_lock(&a->lock);
	if (a->stopping || !a->nthreads) {
		pthread_mutex_unlock(&a->lock);
		free(j);
		return -ESHUTDOWN;
	}
	*a->todo_tail = j;
	a->todo_tail = &j->next;
	a->pending++;
	pthread_cond_signal(&a->work);
	pthread_mutex_unlock(&a->lock);
	return 0;
}

LIB_EXPORT int kvcache_load_async(struct kvcache_namespace *ns,
				  const uint8_t *keys, size_t n, void *buf,
				  size_t stride, uint64_t tag)
{
	struct job *j;

	/* Refuse here what the call would refuse, so errors come early. */
	if (!ns || (!keys && n) || (!buf && n) || n > INT32_MAX ||
	    stride < ns->block_bytes)
		return -EINVAL;
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	*j = (struct job) {
		.kind = JOB_LOAD, .ns = ns, .keys = keys, .n = n, .buf = buf,
		.stride = stride, .done.tag = tag,
	};
	return queue(ns->c, j);
}

LIB_EXPORT int kvcache_store_async(struct kvcache_namespace *ns,
				   const uint8_t *parent, const uint8_t *keys,
				   size_t n, const void *buf, size_t stride,
				   uint64_t tag)
{
	struct job *j;

	if (!ns || (!keys && n) || (!buf && n) || n > INT32_MAX ||
	    stride < ns->block_bytes)
		return -EINVAL;
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	*j = (struct job) {
		.kind = JOB_STORE, .ns = ns, .parent = parent, .keys = keys,
		.n = n, .buf = (void *)buf, .stride = stride,
		.done.tag = tag,
	};
	return queue(ns->c, j);
}

LIB_EXPORT int kvcache_poll(struct kvcache *c,
			    struct kvcache_completion *out, unsigned int max,
			    int timeout_ms)
{
	struct lib_async *a;
	struct timespec end;
	unsigned int got = 0;
	eventfd_t drain;

	if (!c || (!out && max) || timeout_ms < -1)
		return -EINVAL;
	a = c->async;
	clock_gettime(CLOCK_REALTIME, &end);
	if (timeout_ms > 0) {
		end.tv_sec += timeout_ms / 1000;
		end.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
		if (end.tv_nsec >= 1000000000) {
			end.tv_sec++;
			end.tv_nsec -= 1000000000;
		}
	}
	pthread_mutex_lock(&a->lock);
	while (!a->finished && timeout_ms && max) {
		if (timeout_ms < 0)
			pthread_cond_wait(&a->done, &a->lock);
		else if (pthread_cond_timedwait(&a->done, &a->lock, &end))
			break;
	}
	while (got < max && a->finished) {
		struct job *j = a->finished;

		a->finished = j->next;
		if (!a->finished)
			a->finished_tail = &a->finished;
		out[got++] = j->done;
		a->pending--;
		free(j);
	}
	if (!a->finished)
		eventfd_read(a->efd, &drain);
	pthread_mutex_unlock(&a->lock);
	return (int)got;
}

LIB_EXPORT int kvcache_event_fd(struct kvcache *c)
{
	return c && c->async ? c->async->efd : -EINVAL;
}

LIB_EXPORT unsigned int kvcache_pending(struct kvcache *c)
{
	unsigned int n;

	if (!c || !c->async)
		return 0;
	pthread_mutex_lock(&c->async->lock);
	n = c->async->pending;
	pthread_mutex_unlock(&c->async->lock);
	return n;
}
