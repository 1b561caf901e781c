# SPDX-License-Identifier: GPL-2.0
"""The connector's settings: vLLM's kv_connector_extra_config, checked.

Every key is documented in Documentation/userspace-api/vllm.md; an unknown or mistyped
key, or a value of the wrong type or range, is refused when the engine
starts (ValueError), naming the key and what was meant.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field, fields
from typing import Any

TIERS = ("dram", "g3", "g4")
NS_MAX = 65535                  # KVCACHE_NS_MAX

# What each tier is assumed to deliver, in bytes/s, until measured: a
# pinned-pool copy, a local NVMe read, a shared filesystem read.
DEFAULT_BANDWIDTH = {"dram": 8e9, "g3": 1.5e9, "g4": 4e8}


@dataclass
class ConnectorConfig:
    # kvcached's socket; None: $KVCACHE_SOCKET, else the library default
    socket: str | None = None
    # the namespace id the administrator created for this engine
    namespace: int = 1
    # libkvcache.so to load; None: the binding's search ($KVCACHE_LIB, ...)
    library: str | None = None
    # the model's name in the identity; None: vLLM's model (path or name)
    model_id: str | None = None
    # the weights' revision in the identity, as given; None: the commit
    # of vLLM's revision or hub snapshot, else a content digest of the
    # model directory (identity.py)
    revision: str | None = None
    # mixed into every key of this engine (a deployment-wide salt)
    salt: str = ""
    # cover the namespace's salt too (kvcache_ns_open's default)
    namespace_salt: bool = True
    # look up and load cached prefixes
    load: bool = True
    # store the blocks this engine computes
    save: bool = True
    # a hit kvcached must read up from g3/g4 loads outside the forward
    # pass (vLLM's asynchronous loads): the request waits, not the batch
    background_loads: bool = True
    # look a request up when vLLM first has it (on_new_request), so
    # kvcached reads its g3/g4 blocks into DRAM while it waits
    lookup_on_arrival: bool = True
    # "auto": load a prefix only when that beats recomputing it;
    # "always": load every hit
    load_policy: str = "auto"
    # this engine's prefill speed, tokens/s; None: measured (until the
    # first measurement every hit is taken)
    prefill_tokens_per_s: float | None = None
    # the load bandwidth assumed per tier, bytes/s, until measured
    tier_bandwidth: dict[str, float] = field(
        default_factory=lambda: dict(DEFAULT_BANDWIDTH))
    # fixed latency of one load, seconds (lookup, pin, map)
    load_latency_s: float = 0.0005
    # update the figures above from what the engine measures
    measure: bool = True
    # fewest new blocks worth a load
    min_blocks: int = 1
    # connections to kvcached, and the reply timeout
    connections: int = 4
    timeout_ms: int = 10000
    # seconds between attempts to reach an absent kvcached
    retry_interval_s: float = 5.0
    # how many namespaces (LoRA adapters x cache salts) stay open
    max_open_namespaces: int = 64

    def resolved_socket(self) -> str | None:
        return self.socket or os.environ.get("KVCACHE_SOCKET") or None


_TYPES: dict[str, tuple[type, ...]] = {
    "socket": (str, type(None)),
    "namespace": (int,),
    "library": (str, type(None)),
    "model_id": (str, type(None)),
    "revision": (str, type(None)),
    "salt": (str,),
    "namespace_salt": (bool,),
    "load": (bool,),
    "save": (bool,),
    "background_loads": (bool,),
    "lookup_on_arrival": (bool,),
    "load_policy": (str,),
    "prefill_tokens_per_s": (int, float, type(None)),
    "tier_bandwidth": (dict,),
    "load_latency_s": (int, float),
    "measure": (bool,),
    "min_blocks": (int,),
    "connections": (int,),
    "timeout_ms": (int,),
    "retry_interval_s": (int, float),
    "max_open_namespaces": (int,),
}


def _bad(key: str, why: str) -> ValueError:
    return ValueError(f"kvcache connector: kv_connector_extra_config "
                      f"'{key}': {why}")


def parse(extra: dict[str, Any] | None) -> ConnectorConfig:
    """A ConnectorConfig from the extra config dict; ValueError on any
    key this version does not know or any bad value."""
    cfg = ConnectorConfig()
    known = {f.name for f in fields(ConnectorConfig)}
    for key, value in (extra or {}).items():
        if key not in known:
            near = difflib.get_close_matches(str(key), sorted(known), n=1)
            hint = f" (did you mean '{near[0]}'?)" if near else ""
            raise _bad(str(key), f"unknown key{hint}; known keys: "
                       f"{', '.join(sorted(known))}")
        types = _TYPES[key]
        # bool is an int in Python: refuse True where a count is meant
        if (not isinstance(value, types) or
                (isinstance(value, bool) and bool not in types)):
            want = " or ".join("null" if t is type(None) else t.__name__
                               for t in types)
            raise _bad(key, f"{value!r} is not {want}")
        setattr(cfg, key, value)
    _check(cfg)
    return cfg


def _check(cfg: ConnectorConfig) -> None:
    if not 1 <= cfg.namespace <= NS_MAX:
        raise _bad("namespace", f"{cfg.namespace}: ids are 1..{NS_MAX}")
    if cfg.load_policy not in ("auto", "always"):
        raise _bad("load_policy", f"{cfg.load_policy!r}: 'auto' or 'always'")
    if cfg.prefill_tokens_per_s is not None and cfg.prefill_tokens_per_s <= 0:
        raise _bad("prefill_tokens_per_s", "must be > 0")
    bw = dict(DEFAULT_BANDWIDTH)
    for tier, v in cfg.tier_bandwidth.items():
        if tier not in TIERS:
            raise _bad("tier_bandwidth", f"unknown tier {tier!r}; tiers: "
                       f"{', '.join(TIERS)}")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
            raise _bad("tier_bandwidth", f"{tier}: {v!r} is not a number "
                       f"of bytes/s > 0")
        bw[tier] = float(v)
    cfg.tier_bandwidth = bw
    if cfg.load_latency_s < 0:
        raise _bad("load_latency_s", "must be >= 0")
    if cfg.min_blocks < 1:
        raise _bad("min_blocks", "must be >= 1")
    if not 1 <= cfg.connections <= 64:
        raise _bad("connections", "1..64")
    if not 1 <= cfg.timeout_ms <= 3600 * 1000:
        raise _bad("timeout_ms", "1..3600000")
    if cfg.retry_interval_s < 0:
        raise _bad("retry_interval_s", "must be >= 0")
    if cfg.max_open_namespaces < 1:
        raise _bad("max_open_namespaces", "must be >= 1")
