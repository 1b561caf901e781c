# SPDX-License-Identifier: GPL-2.0
"""kvcache.vllm: vLLM's KV connector for kvcache (Documentation/userspace-api/vllm.md).

    kv_transfer_config={"kv_connector": "KvcacheConnector",
                        "kv_connector_module_path": "kvcache.vllm",
                        "kv_role": "kv_both",
                        "kv_connector_extra_config": {"namespace": 7}}

Modules: config (the extra-config keys), identity (what makes KV
reusable, per KV cache group), hits (which blocks each group needs),
estimate (load or recompute), session (the link to kvcached and its
failures), scheduler and worker (the two sides), layout (where a block
lies), meta (what the sides tell each other), stats (kvcache's figures
in vLLM's metrics), interface (the vLLM methods relied on), connector
(the class vLLM loads). Only connector, scheduler, worker and meta import vLLM and
torch; they are imported on first use, so config, estimate and session
work in any Python.
"""

from __future__ import annotations

from typing import Any

__all__ = ["KvcacheConnector", "wait_for_saves"]


def __getattr__(name: str) -> Any:
    if name == "KvcacheConnector":
        from .connector import KvcacheConnector
        return KvcacheConnector
    if name == "wait_for_saves":
        from .worker import wait_for_saves
        return wait_for_saves
    raise AttributeError(f"module 'kvcache.vllm' has no attribute {name!r}")
