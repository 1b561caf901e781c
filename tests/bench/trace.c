// SPDX-License-Identifier: GPL-2.0
/*
 * trace: load a JSONL request trace (trace.h). The parser reads only the
 * four fields it needs, in any order, and rejects a line without them;
 * it is not a general JSON parser (a string value holding one of the
 * field names would confuse it), which the traces it reads never need.
 */
#include "trace.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* (parent, hash id) -> dense id, open addressing. */
struct slot {
	uint64_t hash_id;
	uint32_t parent;
	uint32_t id;			/* UINT32_MAX: empty */
};

struct table {
	struct slot *s;
	size_t mask, used;
};

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	return x ^ (x >> 33);
}

static size_t home(const struct table *tb, uint32_t parent, uint64_t h)
{
	return (size_t)mix(h * 31 + parent) & tb->mask;
}

static int table_grow(struct table *tb)
{
	size_t n = tb->s ? 2 * (tb->mask + 1) : 1024;
	struct slot *s = malloc(n * sizeof(*s));

	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		s[i].id = UINT32_MAX;
	for (size_t i = 0; tb->s && i <= tb->mask; i++) {
		size_t j;

		if (tb->s[i].id == UINT32_MAX)
			continue;
		j = (size_t)mix(tb->s[i].hash_id * 31 + tb->s[i].parent) &
		    (n - 1);
		while (s[j].id != UINT32_MAX)
			j = (j + 1) & (n - 1);
		s[j] = tb->s[i];
	}
	free(tb->s);
	tb->s = s;
	tb->mask = n - 1;
	return 0;
}

/* The slot of (parent, h): its entry, or the empty one to fill. */
static struct slot *table_find(struct table *tb, uint32_t parent, uint64_t h)
{
	size_t i = home(tb, parent, h);

	while (tb->s[i].id != UINT32_MAX &&
	       (tb->s[i].parent != parent || tb->s[i].hash_id != h))
		i = (i + 1) & tb->mask;
	return &tb->s[i];
}

struct grow_arr {
	void *p;
	size_t len, cap, size;
};

static int arr_push(struct grow_arr *a, const void *v)
{
	if (a->len == a->cap) {
		size_t cap = a->cap ? 2 * a->cap : 1024;
		void *n = realloc(a->p, cap * a->size);

		if (!n)
			return -ENOMEM;
		a->p = n;
		a->cap = cap;
	}
	memcpy((char *)a->p + a->len * a->size, v, a->size);
	a->len++;
	return 0;
}

/* The unsigned number after "key": in line, or -EINVAL. */
static int field(const char *line, const char *key, uint64_t max,
		 uint64_t *out, const char **end)
{
	const char *p = strstr(line, key);
	char *e;

	if (!p)
		return -ENOENT;
	p += strlen(key);
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p != ':')
		return -EINVAL;
	p++;
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p < '0' || *p > '9')
		return -EINVAL;
	errno = 0;
	*out = strtoull(p, &e, 10);
	/* A fraction of a millisecond is dropped: the order is kept. */
	if (*e == '.')
		while (*++e >= '0' && *e <= '9')
			;
	if (errno || *out > max)
		return -ERANGE;
	if (end)
		*end = e;
	return 0;
}

static int fail(char *err, size_t errlen, int ret, const char *path,
		size_t line, const char *what)
{
	snprintf(err, errlen, "%s:%zu: %s", path, line, what);
	return ret;
}

int kvc_trace_load(const char *path, uint32_t max_chain,
		   struct kvc_trace *t, char *err, size_t errlen)
{
	struct grow_arr reqs = { .size = sizeof(struct kvc_trace_req) };
	struct grow_arr blocks = { .size = sizeof(uint32_t) };
	struct grow_arr parents = { .size = sizeof(uint32_t) };
	struct grow_arr depths = { .size = sizeof(uint32_t) };
	struct table tb = { 0 };
	char *line = NULL;
	size_t cap = 0, lineno = 0;
	int ret = 0;
	FILE *f;

	memset(t, 0, sizeof(*t));
	if (!max_chain)
		return fail(err, errlen, -EINVAL, path, 0, "max_chain is 0");
	f = fopen(path, "r");
	if (!f) {
		ret = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return ret;
	}
	if (table_grow(&tb)) {
		fclose(f);
		return fail(err, errlen, -ENOMEM, path, 0, "out of memory");
	}
	while (getline(&line, &cap, f) > 0) {
		struct kvc_trace_req r = { .off = (uint32_t)blocks.len };
		uint64_t ts, in, out, h;
		uint32_t parent = KVC_TRACE_NO_PARENT;
		bool cut = false;
		const char *p;
		char *e;

		lineno++;
		if (strspn(line, " \t\r\n") == strlen(line))
			continue;
		if (field(line, "\"timestamp\"", UINT64_MAX, &ts, NULL) ||
		    field(line, "\"input_length\"", UINT32_MAX, &in, NULL) ||
		    field(line, "\"output_length\"", UINT32_MAX, &out, NULL)) {
			ret = fail(err, errlen, -EINVAL, path, lineno,
				   "timestamp, input_length or output_length missing or not a number");
			goto out;
		}
		p = strstr(line, "\"hash_ids\"");
		if (p)
			p = strchr(p, '[');
		if (!p) {
			ret = fail(err, errlen, -EINVAL, path, lineno,
				   "no hash_ids list");
			goto out;
		}
		p++;
		for (;;) {
			struct slot *s;
			uint32_t id;

			p += strspn(p, " \t\r\n");
			if (*p == ']')
				break;
			if (*p < '0' || *p > '9') {
				ret = fail(err, errlen, -EINVAL, path, lineno,
					   "hash_ids holds something other than unsigned integers");
				goto out;
			}
			errno = 0;
			h = strtoull(p, &e, 10);
			if (errno) {
				ret = fail(err, errlen, -ERANGE, path, lineno,
					   "a hash id does not fit 64 bits");
				goto out;
			}
			p = e + strspn(e, " \t\r\n");
			if (*p == ',')
				p++;
			else if (*p != ']') {
				ret = fail(err, errlen, -EINVAL, path, lineno,
					   "hash_ids is not a list of integers");
				goto out;
			}
			if (r.n == max_chain) {
				cut = true;
				continue;
			}
			s = table_find(&tb, parent, h);
			if (s->id == UINT32_MAX) {
				uint32_t d = parent == KVC_TRACE_NO_PARENT ? 0 :
					((uint32_t *)depths.p)[parent] + 1;

				if (parents.len >= UINT32_MAX - 1) {
					ret = fail(err, errlen, -E2BIG, path,
						   lineno, "too many blocks");
					goto out;
				}
				s->hash_id = h;
				s->parent = parent;
				s->id = (uint32_t)parents.len;
				if (arr_push(&parents, &parent) ||
				    arr_push(&depths, &d)) {
					ret = -ENOMEM;
					goto out;
				}
				if (++tb.used * 4 > (tb.mask + 1) * 3 &&
				    table_grow(&tb)) {
					ret = -ENOMEM;
					goto out;
				}
				s = table_find(&tb, parent, h);
			}
			id = s->id;
			if (arr_push(&blocks, &id)) {
				ret = -ENOMEM;
				goto out;
			}
			parent = id;
			r.n++;
		}
		if (cut)
			t->truncated++;
		if (!r.n) {
			ret = fail(err, errlen, -EINVAL, path, lineno,
				   "hash_ids is empty");
			goto out;
		}
		r.ts_ms = ts;
		r.input_len = (uint32_t)in;
		r.output_len = (uint32_t)out;
		for (uint32_t i = 0; i < r.n; i++)
			t->tokens += kvc_trace_block_tokens(&r, i);
		if (arr_push(&reqs, &r)) {
			ret = -ENOMEM;
			goto out;
		}
	}
	if (ferror(f)) {
		ret = fail(err, errlen, -EIO, path, lineno, "read error");
		goto out;
	}
	if (!reqs.len) {
		ret = fail(err, errlen, -EINVAL, path, lineno, "no requests");
		goto out;
	}
	t->nr_reqs = reqs.len;
	t->req = reqs.p;
	t->blocks = blocks.p;
	t->nr_accesses = blocks.len;
	t->nr_blocks = (uint32_t)parents.len;
	t->parent = parents.p;
	t->depth = depths.p;
	reqs.p = blocks.p = parents.p = depths.p = NULL;
out:
	if (ret == -ENOMEM)
		fail(err, errlen, ret, path, lineno, "out of memory");
	free(reqs.p);
	free(blocks.p);
	free(parents.p);
	free(depths.p);
	free(tb.s);
	free(line);
	fclose(f);
	return ret;
}

void kvc_trace_free(struct kvc_trace *t)
{
	free(t->req);
	free(t->blocks);
	free(t->parent);
	free(t->depth);
	memset(t, 0, sizeof(*t));
}

uint32_t kvc_trace_block_tokens(const struct kvc_trace_req *r, uint32_t i)
{
	uint64_t before = (uint64_t)i * KVC_TRACE_BLOCK_TOKENS;

	if (i + 1 < r->n || r->input_len <= before ||
	    r->input_len - before > KVC_TRACE_BLOCK_TOKENS)
		return KVC_TRACE_BLOCK_TOKENS;
	return (uint32_t)(r->input_len - before);
}
