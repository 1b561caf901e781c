# SPDX-License-Identifier: GPL-2.0
"""KvcacheConnector: vLLM's KV connector (KVConnectorBase_V1) for
kvcache. vLLM makes one per role: the scheduler's (SchedulerSide: what to
load and save) and each worker's (WorkerSide: the copies). This class
only checks the configuration, derives the identity and hands each call
to its side; Documentation/userspace-api/vllm.md is the user's guide.

Enable it with vLLM's own flag:

    --kv-transfer-config '{"kv_connector": "KvcacheConnector",
        "kv_connector_module_path": "kvcache.vllm",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {"namespace": 7}}'
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1, KVConnectorMetadata, KVConnectorRole,
    KVConnectorWorkerMetadata, SupportsHMA)

from . import config as _config
from .identity import derive
from .interface import check_interface
from .meta import StepMeta

if TYPE_CHECKING:
    import torch

# vLLM shows only loggers under "vllm."
log = logging.getLogger("vllm.kvcache")


class KvcacheConnector(KVConnectorBase_V1, SupportsHMA):
    """SupportsHMA: without it vLLM switches its hybrid KV cache manager
    off for the whole engine, connector or not, and that path is wrong
    or does not start for hybrid models (gpt-oss, Qwen3-Next). With it,
    the manager stays on whatever the connector then does with the
    model: a model it cannot key is declined, and vLLM serves it as it
    would without any connector."""

    def __init__(self, vllm_config: Any, role: KVConnectorRole,
                 kv_cache_config: Any = None) -> None:
        super().__init__(vllm_config=vllm_config, role=role,
                         kv_cache_config=kv_cache_config)
        ktc = self._kv_transfer_config
        # Refuses unknown keys and bad values at engine start.
        self.cfg = _config.parse(ktc.kv_connector_extra_config)
        self.ident = None
        self.sched = None
        self.worker = None
        try:
            # vLLM's side of the interface first: a release that moved
            # it is declined, not half served.
            check_interface(KVConnectorBase_V1, SupportsHMA)
            self.ident = derive(vllm_config, kv_cache_config, self.cfg)
        except ValueError as e:
            # One line per engine (the scheduler's); each worker says it
            # at debug level.
            log.log(logging.ERROR if role == KVConnectorRole.SCHEDULER
                    else logging.DEBUG,
                    "kvcache: connector disabled: %s; vLLM serves "
                    "without it", e)
            return
        if role == KVConnectorRole.SCHEDULER:
            # A block that fails to load is recomputed, never an error
            # of the request: kvcache is a cache.
            if getattr(ktc, "kv_load_failure_policy", "recompute") != \
                    "recompute":
                log.info("kvcache: kv_load_failure_policy set to "
                         "'recompute' (blocks that fail to load are "
                         "recomputed)")
                ktc.kv_load_failure_policy = "recompute"
            from .scheduler import SchedulerSide
            self.sched = SchedulerSide(
                self.cfg, self.ident, log,
                getattr(kv_cache_config, "hash_block_size", None) or 0)
        else:
            from .worker import WorkerSide
            self.worker = WorkerSide(self.cfg, self.ident, kv_cache_config,
                                     log)
        log.info("kvcache: %s side, namespace %d, model %s, layout %s, "
                 "%d tokens and %d bytes per block",
                 "scheduler" if self.sched else "worker",
                 self.cfg.namespace, self.ident.model, self.ident.kv_layout,
                 self.ident.tokens_per_block, self.ident.block_bytes)

    @property
    def requires_kv_delivery(self) -> bool:
        return False            # a dropped save is only a future miss

    # -- worker side ------------------------------------------------------------

    def register_kv_caches(self, kv_caches: dict[str, "torch.Tensor"]):
        if self.worker is not None:
            self.worker.register_kv_caches(kv_caches)

    def bind_connector_metadata(self, connector_metadata: KVConnectorMetadata
                                ) -> None:
        super().bind_connector_metadata(connector_metadata)
        if self.worker is not None and isinstance(connector_metadata,
                                                  StepMeta):
            self.worker.bind(connector_metadata)

    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
        if self.worker is not None:
            self.worker.start_load()

    def wait_for_layer_load(self, layer_name: str) -> None:
        if self.worker is not None:
            self.worker.wait_for_layer(layer_name)

    def save_kv_layer(self, layer_name: str, kv_layer: "torch.Tensor",
                      attn_metadata: Any, **kwargs: Any) -> None:
        # Saved whole at wait_for_save(), once every layer is computed.
        return

    def wait_for_save(self) -> None:
        if self.worker is not None:
            self.worker.wait_for_save()

    def get_finished(self, finished_req_ids: set[str]
                     ) -> tuple[set[str] | None, set[str] | None]:
        """Requests whose background loads are over (worker.py)."""
        if self.worker is None:
            return None, None
        done, failed = self.worker.get_finished()
        if failed:
            # Only get_transfer_results can say these failed; vLLM calls
            # it, not this, in 0.32 (interface.py checks it is there).
            raise RuntimeError("kvcache: failed loads reported through "
                               "get_finished")
        return None, done or None

    def get_transfer_results(self, finished_req_ids: set[str]) -> Any:
        """get_finished's requests, and those whose load failed: vLLM
        recomputes them. The way to report a failed load of a model of
        several KV cache groups, whose block ids vLLM cannot map back."""
        from vllm.distributed.kv_transfer.kv_connector.v1.base import \
            KVConnectorTransferResults
        if self.worker is None:
            return KVConnectorTransferResults()
        done, failed = self.worker.get_finished()
        return KVConnectorTransferResults(finished_recving=set(done),
                                          failed_recving=set(failed))

    def get_block_ids_with_load_errors(self) -> set[int]:
        return self.worker.load_errors() if self.worker is not None \
            else set()

    def build_connector_worker_meta(self) -> KVConnectorWorkerMetadata | None:
        return self.worker.report() if self.worker is not None else None

    # -- vLLM's stats and metrics (stats.py) --------------------------------------

    def get_kv_connector_stats(self) -> Any:
        side = self.worker if self.worker is not None else self.sched
        return side.take_stats() if side is not None else None

    @classmethod
    def build_kv_connector_stats(cls, data: dict[str, Any] | None = None
                                 ) -> Any:
        from .stats import Stats
        return Stats(dict(data) if data else {})

    @classmethod
    def build_prom_metrics(cls, vllm_config: Any, metric_types: Any,
                           labelnames: list[str],
                           per_engine_labelvalues: dict[int, list[object]]
                           ) -> Any:
        from .stats import PromMetrics
        return PromMetrics(vllm_config, metric_types, labelnames,
                           per_engine_labelvalues)

    def take_events(self) -> Any:
        """vLLM's BlockStored / BlockRemoved for kvcache's blocks
        (scheduler.py, "Events")."""
        return self.sched.take_events() if self.sched is not None else ()

    def handle_preemptions(self, kv_connector_metadata: Any) -> None:
        """Nothing in flight reads vLLM's blocks: a step's saves are
        copied out before the step ends (worker.py), so a block a
        preemption frees may be reused at once."""
        return

    def shutdown(self) -> None:
        if self.worker is not None:
            self.worker.shutdown()
        if self.sched is not None:
            self.sched.shutdown()

    # -- scheduler side ---------------------------------------------------------

    def on_new_request(self, request: Any) -> None:
        """The lookup when vLLM first has the request (scheduler.py)."""
        if self.sched is not None:
            self.sched.on_new_request(request)

    def get_num_new_matched_tokens(self, request: Any,
                                   num_computed_tokens: int
                                   ) -> tuple[int | None, bool]:
        if self.sched is None:
            return 0, False
        return self.sched.get_num_new_matched_tokens(request,
                                                     num_computed_tokens)

    def update_state_after_alloc(self, request: Any, blocks: Any,
                                 num_external_tokens: int) -> None:
        if self.sched is not None:
            self.sched.update_state_after_alloc(request, blocks,
                                                num_external_tokens)

    def build_connector_meta(self, scheduler_output: Any
                             ) -> KVConnectorMetadata:
        if self.sched is None:
            return StepMeta()
        return self.sched.build_connector_meta(scheduler_output)

    def update_connector_output(self, connector_output: Any) -> None:
        if self.sched is not None:
            self.sched.update_connector_output(connector_output)

    def request_finished(self, request: Any, block_ids: list[int]
                         ) -> tuple[bool, dict[str, Any] | None]:
        if self.sched is None:
            return False, None
        return self.sched.request_finished(request, block_ids)

    def request_finished_all_groups(self, request: Any,
                                    block_ids: tuple[list[int], ...]
                                    ) -> tuple[bool, dict[str, Any] | None]:
        """vLLM's call with SupportsHMA, once per request: every group's
        blocks. Saves are made in the step that completes each block,
        so the free is never delayed."""
        if self.sched is None:
            return False, None
        return self.sched.request_finished(request,
                                           list(block_ids[0]) if block_ids
                                           else [])
