/* SPDX-License-Identifier: GPL-2.0 */
/*
 * trace: request traces in the JSONL shape of the public Mooncake traces
 * (Documentation/benchmarks.md#eviction-policies): one request a line,
 *
 *   {"timestamp": 0, "input_length": 6758, "output_length": 500,
 *    "hash_ids": [0, 1, 2, ...]}
 *
 * one hash id per block of KVC_TRACE_BLOCK_TOKENS tokens, prefix-chained:
 * equal ids at the same place mean equal prefixes. Loading gives every
 * distinct block a dense id 0..nr_blocks-1 by (parent's dense id, hash
 * id), so a trace whose ids are not chained (the same id after two
 * different prefixes) still makes a forest: a block is its whole prefix.
 */
#ifndef KVC_TRACE_H
#define KVC_TRACE_H

#include <stddef.h>
#include <stdint.h>

#define KVC_TRACE_BLOCK_TOKENS	512
#define KVC_TRACE_NO_PARENT	UINT32_MAX

struct kvc_trace_req {
	uint64_t ts_ms;
	uint32_t input_len, output_len;
	uint32_t off, n;		/* its blocks: blocks[off .. off+n-1] */
};

struct kvc_trace {
	size_t nr_reqs;
	struct kvc_trace_req *req;
	uint32_t *blocks;		/* dense ids, request after request */
	size_t nr_accesses;		/* length of blocks[] */
	uint32_t nr_blocks;		/* distinct blocks */
	uint32_t *parent;		/* per dense id, or KVC_TRACE_NO_PARENT */
	uint32_t *depth;		/* per dense id, 0 for a first block */
	uint32_t truncated;		/* requests cut to max_chain blocks */
	uint64_t tokens;		/* sum of the requests' block tokens */
};

/*
 * Load path; requests longer than max_chain blocks keep their first
 * max_chain. 0, or -errno with err saying what and on which line (a
 * line that is not a request, a number out of range, no hash_ids).
 */
int kvc_trace_load(const char *path, uint32_t max_chain,
		   struct kvc_trace *t, char *err, size_t errlen);
void kvc_trace_free(struct kvc_trace *t);

/*
 * Tokens in block i of request r: a full block, except the last, which
 * holds what is left of input_length (a full block if that does not fit).
 */
uint32_t kvc_trace_block_tokens(const struct kvc_trace_req *r, uint32_t i);

#endif /* KVC_TRACE_H */
