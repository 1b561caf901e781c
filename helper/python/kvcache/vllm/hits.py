# SPDX-License-Identifier: GPL-2.0
"""Which blocks of a prefix each KV cache group needs, and how long a
hit every group can serve: the rules of vLLM's own hybrid KV cache
manager (vllm/v1/core/single_type_kv_cache_manager.py), restated.

For a prefix of n blocks (n * block_size tokens computed), vLLM keeps a
group's blocks from skipped(group, n) to n and puts its null block in
the positions before:

- full attention: every block (skipped is 0);
- sliding window W (plus the tokens it retains below the window):
  tokens before n * bs - W + 1 - retained are skipped;
- chunked local attention C: the tokens before the chunk that holds the
  next token, (n * bs // C) * C;
- Mamba / linear attention ("align" mode): every block but the last,
  whose state is the one after the prefix.

So a hit of n blocks past vLLM's local hit of `local` blocks needs, from
kvcache, each group's blocks from max(local, skipped) to n: all of a
full-attention group's, only the last window's (or chunk's) of the
others. longest() finds the largest such n from what each group holds.

Pure functions over identity.Group: no vLLM, no kvcached.
"""

from __future__ import annotations

from typing import Callable, Sequence

from .identity import Group


def skipped(g: Group, nblocks: int, bs: int) -> int:
    """The leading blocks of an nblocks prefix that vLLM does not keep
    for group g (its null blocks)."""
    tokens = nblocks * bs
    if g.kind == "sliding":
        return max(0, tokens - g.window + 1 - g.retained) // bs
    if g.kind == "chunked":
        return (tokens // g.window) * g.window // bs
    if g.kind == "mamba":
        # One state: the one after the prefix's last token, in its last
        # block.
        return max(nblocks - 1, 0)
    return 0


def needed(g: Group, nblocks: int, local: int, bs: int) -> range:
    """The blocks of an nblocks prefix group g loads from kvcache, vLLM
    holding the first `local` itself."""
    return range(max(local, skipped(g, nblocks, bs)), nblocks)


def longest(groups: Sequence[Group], bs: int, local: int, limit: int,
            has: Callable[[int, int], bool]) -> int:
    """The largest n in [local, limit] such that every group g holds
    (has(g, i)) each block needed(g, n, local): local when none is.

    has() is asked about a block at most once, and only about blocks some
    n could need, from the longest prefix down: a missing block j of a
    group rules out every n whose window (or prefix) covers it, so the
    next n tried is the largest that does not."""
    known: dict[tuple[int, int], bool] = {}

    def holds(gi: int, i: int) -> bool:
        v = known.get((gi, i))
        if v is None:
            v = known[(gi, i)] = bool(has(gi, i))
        return v

    n = limit
    while n > local:
        nxt = n
        for gi, g in enumerate(groups):
            # The last missing block of the range, if any: n must end at
            # or before it.
            for i in reversed(needed(g, n, local, bs)):
                if not holds(gi, i):
                    nxt = min(nxt, i)
                    break
        if nxt == n:
            return n
        n = nxt
    return local
