# SPDX-License-Identifier: GPL-2.0
"""kvcache's figures in vLLM's own channels: KVConnectorStats (the
periodic "KV Transfer metrics" log line) and Prometheus series on vLLM's
/metrics, next to vllm:external_prefix_cache_hits.

Each side counts what it does between two of vLLM's collections and
hands a Stats over (get_kv_connector_stats()); vLLM adds up the
workers' and the scheduler's (aggregate()), ships the dict to its
logger process and gives it to the connector class's PromMetrics
(observe()). Plain data only: the dict crosses processes.

    series (Documentation/userspace-api/vllm.md, "Metrics")
    vllm:kvcache_hit_tokens_total{tier}      tokens claimed, by fastest tier
    vllm:kvcache_lookups_total               requests looked up
    vllm:kvcache_load_blocks_total           blocks copied into vLLM
    vllm:kvcache_load_bytes_total            their bytes
    vllm:kvcache_load_failed_blocks_total    claimed, not loadable: recomputed
    vllm:kvcache_background_loads_total      requests loaded in the background
    vllm:kvcache_load_seconds                one step's loads, histogram
    vllm:kvcache_stored_blocks_total         blocks kvcached took
    vllm:kvcache_store_failures_total        stores failed or declined
    vllm:kvcache_store_backlog_blocks        blocks waiting to be stored
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vllm.distributed.kv_transfer.kv_connector.v1.metrics import (
    KVConnectorPromMetrics, KVConnectorStats)

TIERS = ("dram", "g3", "g4")
# Summed between collections, and over the sides and ranks.
COUNTERS = ("lookups", "load_blocks", "load_bytes", "load_failed_blocks",
            "stored_blocks", "store_failures", "background_loads") + \
    tuple(f"hit_tokens_{t}" for t in TIERS)
# The largest value reported: vLLM aggregates the workers' stats of one
# step and the steps of one logging interval alike, so a sum would count
# a backlog once per step.
GAUGES = ("store_backlog_blocks",)
# Observations (seconds), concatenated.
SERIES = ("load_seconds",)
# At most this many observations travel per collection: a histogram
# needs no more, and the dict crosses processes every step.
SERIES_MAX = 1024


def empty() -> dict[str, Any]:
    d: dict[str, Any] = {k: 0 for k in COUNTERS + GAUGES}
    d.update({k: [] for k in SERIES})
    return d


@dataclass
class Stats(KVConnectorStats):
    def __post_init__(self) -> None:
        base = empty()
        base.update(self.data or {})
        self.data = base

    def reset(self) -> None:
        self.data = empty()

    def aggregate(self, other: KVConnectorStats) -> "Stats":
        o = other.data if isinstance(other, KVConnectorStats) else {}
        out = empty()
        for k in COUNTERS:
            out[k] = self.data.get(k, 0) + o.get(k, 0)
        for k in GAUGES:
            out[k] = max(self.data.get(k, 0), o.get(k, 0))
        for k in SERIES:
            out[k] = (list(self.data.get(k, [])) +
                      list(o.get(k, [])))[-SERIES_MAX:]
        return Stats(out)

    def reduce(self) -> dict[str, int | float]:
        d = self.data
        secs = d.get("load_seconds", [])
        out: dict[str, int | float] = {k: d.get(k, 0) for k in COUNTERS}
        out["store_backlog_blocks"] = d.get("store_backlog_blocks", 0)
        out["load_seconds_avg"] = round(sum(secs) / len(secs), 6) \
            if secs else 0.0
        return out

    def is_empty(self) -> bool:
        return not any(self.data.get(k) for k in COUNTERS + GAUGES + SERIES)


class PromMetrics(KVConnectorPromMetrics):
    def __init__(self, vllm_config: Any, metric_types: dict,
                 labelnames: list[str],
                 per_engine_labelvalues: dict[int, list[object]]) -> None:
        super().__init__(vllm_config, metric_types, labelnames,
                         per_engine_labelvalues)
        c, g, h = self._counter_cls, self._gauge_cls, self._histogram_cls
        ln = self._labelnames
        self._hits = c(name="vllm:kvcache_hit_tokens",
                       documentation="Tokens kvcache served past vLLM's own "
                       "prefix cache, by the fastest tier that held them",
                       labelnames=ln + ["tier"])
        self._counters = {
            "lookups": c(name="vllm:kvcache_lookups",
                         documentation="Requests looked up in kvcache",
                         labelnames=ln),
            "load_blocks": c(name="vllm:kvcache_load_blocks",
                             documentation="Blocks loaded from kvcache "
                             "into vLLM's KV cache", labelnames=ln),
            "load_bytes": c(name="vllm:kvcache_load_bytes",
                            documentation="Bytes loaded from kvcache",
                            labelnames=ln),
            "load_failed_blocks": c(
                name="vllm:kvcache_load_failed_blocks",
                documentation="Blocks found at lookup that could not be "
                "loaded (recomputed by vLLM)", labelnames=ln),
            "stored_blocks": c(name="vllm:kvcache_stored_blocks",
                               documentation="Blocks kvcached took",
                               labelnames=ln),
            "store_failures": c(name="vllm:kvcache_store_failures",
                                documentation="Stores that failed or "
                                "that kvcached declined", labelnames=ln),
            "background_loads": c(
                name="vllm:kvcache_background_loads",
                documentation="Requests whose hit was loaded in the "
                "background (read up from g3/g4 first)", labelnames=ln),
        }
        self._backlog = g(name="vllm:kvcache_store_backlog_blocks",
                          documentation="Blocks waiting to be stored in "
                          "kvcache", labelnames=ln,
                          multiprocess_mode="mostrecent")
        self._seconds = h(name="vllm:kvcache_load_seconds",
                          documentation="Seconds of one step's loads from "
                          "kvcache (pin, map and copy)", labelnames=ln,
                          buckets=[0.0005, 0.001, 0.0025, 0.005, 0.01,
                                   0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5])

    def observe(self, transfer_stats_data: dict[str, Any],
                engine_idx: int = 0) -> None:
        d = transfer_stats_data or {}
        lv = list(self.per_engine_labelvalues[engine_idx])
        for t in TIERS:
            n = d.get(f"hit_tokens_{t}", 0)
            if n:
                self._hits.labels(*(lv + [t])).inc(n)
        for k, m in self._counters.items():
            n = d.get(k, 0)
            if n:
                m.labels(*lv).inc(n)
        if "store_backlog_blocks" in d:
            self._backlog.labels(*lv).set(d["store_backlog_blocks"])
        for s in d.get("load_seconds", []):
            self._seconds.labels(*lv).observe(s)
