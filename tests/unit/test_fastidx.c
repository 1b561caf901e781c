// SPDX-License-Identifier: GPL-2.0
/*
 * Host tests for helper/common/fastidx.c, the segment of resident blocks
 * clients search without a round trip: what a reader finds
 * after publish, move, take-back and retire; that a sequence read before
 * a take-back fails its check after; that clients cannot write the
 * segment; that a reader refuses a segment of another geometry; a full
 * bucket; and that a new segment leaves its descriptor pages untouched.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fastidx.h"
#include "tap.h"

#define NR	100

static void key_of(uint8_t key[KVCACHE_KEY_SIZE], unsigned int i)
{
	memset(key, 0, KVCACHE_KEY_SIZE);
	for (unsigned int b = 0; b < KVCACHE_KEY_SIZE; b++)
		key[b] = (uint8_t)(i * 131 + b * 7 + (i >> 3));
}

static bool found(const struct kvc_fastidx *r, uint32_t ns,
		  const uint8_t *key, uint32_t index, uint32_t gen)
{
	struct kvc_fastidx_hit hit;

	return kvc_fastidx_find(r, ns, key, NULL, 0, &hit) &&
	       hit.h.index == index && hit.h.gen == gen &&
	       kvc_fastidx_still(r, index, hit.seq);
}

static bool find(const struct kvc_fastidx *r, uint32_t ns, const uint8_t *key,
		 uint64_t *seq)
{
	struct kvc_fastidx_hit hit;

	if (!kvc_fastidx_find(r, ns, key, NULL, 0, &hit))
		return false;
	*seq = hit.seq;
	return true;
}

static void publish_find_take_back(void)
{
	struct kvc_fastidx *w = NULL, *r = NULL;
	uint8_t k1[KVCACHE_KEY_SIZE], k2[KVCACHE_KEY_SIZE];
	uint64_t seq;

	key_of(k1, 1);
	key_of(k2, 2);
	TAP_CHECK(kvc_fastidx_create(NR, &w) == 0);
	TAP_CHECK(kvc_fastidx_attach(w->fd, NR, &r) == 0);
	TAP_CHECK(!find(r, 3, k1, &seq));

	kvc_fastidx_publish(w, (struct kvcache_handle){ 5, 11 }, 3, k1, NULL, 1);
	TAP_CHECK(found(r, 3, k1, 5, 11));
	/* Another namespace, or another key, is not this block. */
	TAP_CHECK(!find(r, 4, k1, &seq));
	TAP_CHECK(!find(r, 3, k2, &seq));

	/* A sequence read before the take-back fails after it. */
	TAP_CHECK(find(r, 3, k1, &seq));
	kvc_fastidx_unpublish(w, 5);
	TAP_CHECK(!kvc_fastidx_still(r, 5, seq));
	TAP_CHECK(!find(r, 3, k1, &seq));
	kvc_fastidx_unpublish(w, 5);		/* twice: a no-op */
	kvc_fastidx_unpublish(w, NR + 7);	/* out of range: ignored */

	/* The block reused for another key: the old one is gone for good. */
	kvc_fastidx_publish(w, (struct kvcache_handle){ 5, 12 }, 3, k1, NULL, 1);
	TAP_CHECK(find(r, 3, k1, &seq));
	kvc_fastidx_publish(w, (struct kvcache_handle){ 5, 13 }, 3, k2, NULL, 1);
	TAP_CHECK(!kvc_fastidx_still(r, 5, seq));
	TAP_CHECK(!find(r, 3, k1, &seq));
	TAP_CHECK(found(r, 3, k2, 5, 13));

	/* A daemon going away: nothing is valid any more. */
	TAP_CHECK(find(r, 3, k2, &seq));
	TAP_CHECK(!kvc_fastidx_retired(r));
	kvc_fastidx_retire(w);
	TAP_CHECK(kvc_fastidx_retired(r));
	TAP_CHECK(!kvc_fastidx_still(r, 5, seq));
	TAP_CHECK(!find(r, 3, k2, &seq));
	kvc_fastidx_detach(r);
	kvc_fastidx_destroy(w);
}

/*
 * A lookup's view: the block's place in its chain (first block, or the
 * child of one parent) and the tiers its entry is in, kept current.
 */
static void chains_and_tiers(void)
{
	struct kvc_fastidx *w = NULL, *r = NULL;
	uint8_t k[3][KVCACHE_KEY_SIZE];
	struct kvc_fastidx_hit hit;
	uint64_t seq;

	for (unsigned int i = 0; i < 3; i++)
		key_of(k[i], 10 + i);
	TAP_CHECK(kvc_fastidx_create(NR, &w) == 0);
	TAP_CHECK(kvc_fastidx_attach(w->fd, NR, &r) == 0);
	kvc_fastidx_publish(w, (struct kvcache_handle){ 1, 1 }, 3, k[0], NULL,
			    1);
	kvc_fastidx_publish(w, (struct kvcache_handle){ 2, 1 }, 3, k[1], k[0],
			    1 | 2);
	/* k[0] is a first block; k[1] only follows k[0]. */
	TAP_CHECK(kvc_fastidx_find(r, 3, k[0], NULL, KVC_FASTIDX_CHAIN, &hit));
	TAP_CHECK(hit.h.index == 1 && hit.tiers == 1);
	TAP_CHECK(!kvc_fastidx_find(r, 3, k[0], k[1], KVC_FASTIDX_CHAIN, &hit));
	TAP_CHECK(kvc_fastidx_find(r, 3, k[1], k[0], KVC_FASTIDX_CHAIN, &hit));
	TAP_CHECK(hit.h.index == 2 && hit.tiers == (1 | 2));
	TAP_CHECK(!kvc_fastidx_find(r, 3, k[1], NULL, KVC_FASTIDX_CHAIN, &hit));
	TAP_CHECK(!kvc_fastidx_find(r, 3, k[1], k[2], KVC_FASTIDX_CHAIN, &hit));
	/* Without the chain check, any place will do (a load's view). */
	TAP_CHECK(kvc_fastidx_find(r, 3, k[1], k[2], 0, &hit));

	/* Tiers change: a reader holding the old sequence retries. */
	TAP_CHECK(find(r, 3, k[1], &seq));
	kvc_fastidx_set_tiers(w, 2, 1 | 2 | 4);
	TAP_CHECK(!kvc_fastidx_still(r, 2, seq));
	TAP_CHECK(kvc_fastidx_find(r, 3, k[1], k[0], KVC_FASTIDX_CHAIN, &hit));
	TAP_CHECK(hit.tiers == (1 | 2 | 4));
	/* The same tiers again change nothing; an unpublished block stays. */
	TAP_CHECK(find(r, 3, k[1], &seq));
	kvc_fastidx_set_tiers(w, 2, 1 | 2 | 4);
	TAP_CHECK(kvc_fastidx_still(r, 2, seq));
	kvc_fastidx_set_tiers(w, 7, 1);
	TAP_CHECK(!find(r, 3, k[2], &seq));
	kvc_fastidx_detach(r);
	kvc_fastidx_destroy(w);
}

static void clients_cannot_write_it(void)
{
	struct kvc_fastidx *w = NULL, *r = NULL;
	void *p;

	TAP_CHECK(kvc_fastidx_create(NR, &w) == 0);
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, w->fd, 0);
	TAP_CHECK(p == MAP_FAILED && errno == EPERM);
	TAP_CHECK(pwrite(w->fd, "x", 1, 0) < 0 && errno == EPERM);
	TAP_CHECK(ftruncate(w->fd, 0) < 0 && errno == EPERM);
	/* Another geometry, or not a segment at all, is refused. */
	TAP_CHECK(kvc_fastidx_attach(w->fd, NR - 1, &r) == -EPROTO);
	TAP_CHECK(kvc_fastidx_attach(w->fd, NR * 4, &r) == -EPROTO);
	TAP_CHECK(kvc_fastidx_create(0, &r) == -EINVAL);
	kvc_fastidx_destroy(w);
}

static void a_full_bucket_leaves_blocks_to_the_daemon(void)
{
	struct kvc_fastidx *w = NULL, *r = NULL;
	uint8_t keys[KVC_FASTIDX_WAYS + 1][KVCACHE_KEY_SIZE];
	uint64_t seq;
	unsigned int i;

	TAP_CHECK(kvc_fastidx_create(NR, &w) == 0);
	TAP_CHECK(kvc_fastidx_attach(w->fd, NR, &r) == 0);
	/* The same first 8 bytes: one bucket, one tag; the keys differ. */
	for (i = 0; i <= KVC_FASTIDX_WAYS; i++) {
		memset(keys[i], 0xab, KVCACHE_KEY_SIZE);
		keys[i][20] = (uint8_t)i;
		kvc_fastidx_publish(w, (struct kvcache_handle){ i, 1 }, 2,
				    keys[i], NULL, 1);
	}
	TAP_EXPECT_EQ(w->full, 1);
	for (i = 0; i < KVC_FASTIDX_WAYS; i++)
		TAP_CHECK(found(r, 2, keys[i], i, 1));
	TAP_CHECK(!find(r, 2, keys[KVC_FASTIDX_WAYS], &seq));
	/* A slot comes free: the next publication takes it. */
	kvc_fastidx_unpublish(w, 0);
	kvc_fastidx_publish(w, (struct kvcache_handle){ KVC_FASTIDX_WAYS, 2 },
			    2, keys[KVC_FASTIDX_WAYS], NULL, 1);
	TAP_CHECK(found(r, 2, keys[KVC_FASTIDX_WAYS], KVC_FASTIDX_WAYS, 2));
	TAP_CHECK(!find(r, 2, keys[0], &seq));
	kvc_fastidx_detach(r);
	kvc_fastidx_destroy(w);
}

/* Resident pages of the segment behind reader r (mincore on its view). */
static size_t resident_pages(const struct kvc_fastidx *r)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t n = (r->len + page - 1) / page, got = 0;
	unsigned char *vec = calloc(n, 1);

	if (!vec || mincore(r->map, r->len, vec)) {
		free(vec);
		return (size_t)-1;
	}
	for (size_t i = 0; i < n; i++)
		got += vec[i] & 1;
	free(vec);
	return got;
}

/*
 * kvcached keeps one segment per namespace in kernel mode: a new one
 * must not fill its descriptors (64 MiB for a million blocks) before
 * any block is published, and a block first published, taken back and
 * published again must behave as in a segment that started filled.
 */
static void a_new_segment_touches_only_what_it_publishes(void)
{
	const uint32_t big = 1u << 20;
	struct kvc_fastidx *w = NULL, *r = NULL;
	uint8_t k[KVCACHE_KEY_SIZE];
	uint64_t seq;

	key_of(k, 9);
	TAP_CHECK(kvc_fastidx_create(big, &w) == 0);
	TAP_CHECK(kvc_fastidx_attach(w->fd, big, &r) == 0);
	TAP_EXPECT_EQ(resident_pages(r), 1);	/* the header */
	kvc_fastidx_publish(w, (struct kvcache_handle){ big - 1, 5 }, 4, k,
			    NULL, 1);
	TAP_CHECK(found(r, 4, k, big - 1, 5));
	/* The header, one descriptor page and one bucket page. */
	TAP_EXPECT_EQ(resident_pages(r), 3);
	TAP_CHECK(find(r, 4, k, &seq));
	kvc_fastidx_unpublish(w, big - 1);
	TAP_CHECK(!kvc_fastidx_still(r, big - 1, seq));
	TAP_CHECK(!find(r, 4, k, &seq));
	/* Never published: taking it back or setting tiers does nothing. */
	kvc_fastidx_unpublish(w, 3);
	kvc_fastidx_set_tiers(w, 3, 7);
	TAP_CHECK(!find(r, 4, k, &seq));
	kvc_fastidx_publish(w, (struct kvcache_handle){ big - 1, 6 }, 4, k,
			    NULL, 1);
	TAP_CHECK(found(r, 4, k, big - 1, 6));
	kvc_fastidx_detach(r);
	kvc_fastidx_destroy(w);
}

int main(void)
{
	TAP_RUN(publish_find_take_back);
	TAP_RUN(chains_and_tiers);
	TAP_RUN(clients_cannot_write_it);
	TAP_RUN(a_full_bucket_leaves_blocks_to_the_daemon);
	TAP_RUN(a_new_segment_touches_only_what_it_publishes);
	return tap_done();
}
