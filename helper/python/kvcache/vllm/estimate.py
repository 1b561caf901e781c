# SPDX-License-Identifier: GPL-2.0
"""Load or recompute: which part of a cached prefix is worth loading.

A block of a cached prefix is taken only when loading it is faster than
recomputing it. The model (Documentation/userspace-api/vllm.md#load-or-recompute):

    load(k)      = latency + sum over the k blocks of bytes / bandwidth[tier]
    recompute(k) = k * tokens_per_block / prefill_tokens_per_s

and the connector claims the k (from 0 to the blocks cached past what
vLLM holds) where recompute(k) - load(k) is largest, if it is positive.
A block's tier is the fastest that holds it (a lookup reports each
block's tier mask). The figures start from the configuration and are
moved by what the engine measures (an exponentially weighted mean, so a
tier that slows down is claimed less within a few loads):

- bandwidth[tier], from each load: its bytes over its seconds, the
  seconds first shared out by the current estimates when a load spans
  tiers;
- prefill_tokens_per_s, from the forward passes that computed at least
  two blocks' worth of tokens (decode steps say little about prefill):
  their tokens over their seconds, minus the seconds spent waiting for
  loads.

Recompute cost is linear here while attention makes it grow with the
position; that errs towards recomputing long prefixes, never towards a
load that is slower than the recompute it replaces.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from .config import TIERS, ConnectorConfig

TIER_DRAM, TIER_G3, TIER_G4 = 1, 2, 4
_WEIGHT = 0.3           # of a new measurement in the running figure


def tier_of(mask: int) -> str:
    """The fastest tier of a lookup's tier mask."""
    if mask & TIER_DRAM:
        return "dram"
    if mask & TIER_G3:
        return "g3"
    return "g4"


@dataclass
class Claim:
    blocks: int                 # blocks to load, past what vLLM holds
    load_s: float               # their estimated load time
    recompute_s: float          # their estimated recompute time


class Estimator:
    """The running figures and the claim rule; thread-safe."""

    def __init__(self, cfg: ConnectorConfig, block_bytes: int,
                 tokens_per_block: int) -> None:
        self._lock = threading.Lock()
        self.policy = cfg.load_policy
        self.measure = cfg.measure
        self.min_blocks = cfg.min_blocks
        self.latency = cfg.load_latency_s
        self.block_bytes = block_bytes
        self.tpb = tokens_per_block
        self.bandwidth = {t: float(cfg.tier_bandwidth[t]) for t in TIERS}
        self.prefill_tps = cfg.prefill_tokens_per_s
        self.loads = 0
        self.prefills = 0

    # -- the rule ---------------------------------------------------------

    def claim(self, tiers: list[int]) -> Claim:
        """How many of these cached blocks (their tier masks, in prefix
        order, all past vLLM's own hit) to load."""
        n = len(tiers)
        if n < self.min_blocks:
            return Claim(0, 0.0, 0.0)
        with self._lock:
            bw = dict(self.bandwidth)
            tps = self.prefill_tps
        per_block = [self.block_bytes / bw[tier_of(m)] for m in tiers]
        if self.policy == "always" or tps is None:
            return Claim(n, self.latency + sum(per_block),
                         n * self.tpb / tps if tps else 0.0)
        best, best_gain, load = 0, 0.0, self.latency
        rec_block = self.tpb / tps
        for k in range(1, n + 1):
            load += per_block[k - 1]
            gain = k * rec_block - load
            if gain > best_gain:
                best, best_gain = k, gain
        if best < self.min_blocks:
            return Claim(0, 0.0, 0.0)
        return Claim(best, self.latency + sum(per_block[:best]),
                     best * rec_block)

    # -- measurements ------------------------------------------------------

    def record_load(self, tier_bytes: dict[str, int], seconds: float) -> None:
        """A load moved tier_bytes (bytes per tier) in seconds."""
        total = sum(tier_bytes.values())
        if not self.measure or total <= 0 or seconds <= 0:
            return
        with self._lock:
            self.loads += 1
            # Share the time out by the current estimates, then move each
            # tier's figure towards what its share implies.
            est = {t: b / self.bandwidth[t] for t, b in tier_bytes.items()
                   if b > 0}
            span = sum(est.values())
            for t, b in tier_bytes.items():
                if b <= 0:
                    continue
                secs = seconds * est[t] / span
                got = b / max(secs, 1e-9)
                self.bandwidth[t] += _WEIGHT * (got - self.bandwidth[t])

    def record_forward(self, tokens: int, seconds: float) -> None:
        """A forward pass computed tokens in seconds (load waits out)."""
        if not self.measure or tokens < 2 * self.tpb or seconds <= 0:
            return
        got = tokens / seconds
        with self._lock:
            self.prefills += 1
            if self.prefill_tps is None:
                self.prefill_tps = got
            else:
                self.prefill_tps += _WEIGHT * (got - self.prefill_tps)

    def snapshot(self) -> dict[str, object]:
        with self._lock:
            return {"bandwidth": dict(self.bandwidth),
                    "prefill_tokens_per_s": self.prefill_tps,
                    "loads_measured": self.loads,
                    "forwards_measured": self.prefills}
