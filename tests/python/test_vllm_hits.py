# SPDX-License-Identifier: GPL-2.0
"""kvcache.vllm.hits without vLLM: which blocks each KV cache group of a
hybrid model needs for a prefix, and the longest hit every group can
serve. (tests/vllm/test_families.py checks skipped() against vLLM's own
managers, and the whole connector on real hybrid models.)"""

from __future__ import annotations

import random

from kvcache.vllm.hits import longest, needed, skipped
from kvcache.vllm.identity import Group

BS = 32


def group(kind: str, window: int = 0, retained: int = 0) -> Group:
    return Group(kind=kind, window=window, retained=retained,
                 layers=("l",), layer_bytes=1, spec=kind)


FULL = group("full")
SW = group("sliding", 96)               # 3 blocks of window
CHUNK = group("chunked", 128)           # 4-block chunks
MAMBA = group("mamba")                  # one state, in the last block


def brute(groups, local, limit, held) -> int:
    """The definition, tried for every n."""
    for n in range(limit, local, -1):
        if all(i in held[gi] for gi, g in enumerate(groups)
               for i in needed(g, n, local, BS)):
            return n
    return local


def test_skipped_full_sliding_chunked():
    assert [skipped(FULL, n, BS) for n in range(6)] == [0] * 6
    # window 96 = 3 blocks: tokens before n*32 - 95 are skipped
    assert [skipped(SW, n, BS) for n in range(7)] == [0, 0, 0, 0, 1, 2, 3]
    # window+retained: one more token kept
    assert skipped(group("sliding", 96, 32), 4, BS) == 0
    # chunks of 4 blocks: everything before the current chunk
    assert [skipped(CHUNK, n, BS) for n in range(10)] == \
        [0, 0, 0, 0, 4, 4, 4, 4, 8, 8]


def test_mamba_needs_the_last_block_only():
    assert [skipped(MAMBA, n, BS) for n in range(5)] == [0, 0, 1, 2, 3]
    assert list(needed(MAMBA, 6, 2, BS)) == [5]
    assert list(needed(MAMBA, 2, 2, BS)) == []
    # states are sparse: a missing one at 7 means trying n = 7 (state 6)
    held = [set(range(10)), {2, 6}]
    assert longest([FULL, MAMBA], BS, 0, 10,
                   lambda g, i: i in held[g]) == 7


def test_needed_starts_at_the_local_hit():
    assert list(needed(FULL, 6, 2, BS)) == [2, 3, 4, 5]
    assert list(needed(SW, 6, 2, BS)) == [3, 4, 5]
    assert list(needed(SW, 6, 5, BS)) == [5]
    assert list(needed(CHUNK, 9, 0, BS)) == [8]


def test_a_window_hole_ends_the_hit_before_it():
    groups = [FULL, SW]
    held = [set(range(10)), {0, 1, 2, 3, 4, 6, 7, 8, 9}]    # 5 missing
    # n=10 needs SW 7..9: held.
    assert longest(groups, BS, 0, 10, lambda g, i: i in held[g]) == 10
    # n=8 needs SW 5..7: 5 missing, so n=5 (needs 2..4).
    assert longest(groups, BS, 0, 8, lambda g, i: i in held[g]) == 5


def test_only_window_blocks_are_asked():
    asked = []

    def has(g, i):
        asked.append((g, i))
        return True

    assert longest([SW], BS, 0, 100, has) == 100
    assert sorted(asked) == [(0, 97), (0, 98), (0, 99)]


def test_random_against_the_definition():
    r = random.Random(7)
    for _ in range(400):
        groups = [r.choice([FULL, SW, CHUNK, MAMBA, group("sliding", 40),
                            group("chunked", 64)])
                  for _ in range(r.randint(1, 3))]
        limit = r.randint(0, 24)
        local = r.randint(0, limit)
        held = [{i for i in range(limit) if r.random() < 0.85}
                for _ in groups]
        got = longest(groups, BS, local, limit, lambda g, i: i in held[g])
        assert got == brute(groups, local, limit, held), (groups, local,
                                                           limit, held)
