# SPDX-License-Identifier: GPL-2.0
"""The scheduler side of the connector: which prefix of a request to
load, which of its blocks to save, and the metadata carrying both.

Lifetime of a request's state (_Req): made by get_num_new_matched_tokens
(the first thing vLLM asks of a request it schedules, again after a
preemption), given vLLM's blocks by update_state_after_alloc and by each
step's scheduler output, dropped by request_finished.

Saves: a block is saved in the step that completes it (its last token's
KV computed), by the worker at the end of that step's forward pass, so
vLLM may free or reuse a request's blocks as soon as it finishes:
request_finished never delays the free.

Only the engine's thread calls in here; the estimator is shared with
update_connector_output, on the same thread.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from .config import ConnectorConfig
from .estimate import Estimator
from .identity import Identity, request_fields
from .meta import LoadOp, Rank, SaveOp, StepMeta, WorkerReport
from .session import Session


@dataclass
class _Req:
    request: Any                    # vLLM's Request: its live token list
    lora: str
    salt: bytes
    local_blocks: int = 0           # vLLM's own prefix hit
    claimed: int = 0                # blocks claimed past local_blocks
    tiers: list[int] = field(default_factory=list)
    saved: int = 0                  # leading blocks kvcache holds
    block_ids: list[int] = field(default_factory=list)
    keys: dict[Rank, list[bytes]] = field(default_factory=dict)
    keyed_tokens: int = 0


class SchedulerSide:
    def __init__(self, cfg: ConnectorConfig, ident: Identity,
                 log: logging.Logger) -> None:
        self.cfg = cfg
        self.ident = ident
        self.log = log
        self.bs = ident.tokens_per_block
        self.session = Session(cfg, ident, log, "scheduler")
        self.estimator = Estimator(cfg, ident.block_bytes, self.bs)
        self.ranks: list[Rank] = [(t, p) for p in range(ident.pp_size)
                                  for t in range(ident.tp_size)]
        self._reqs: dict[str, _Req] = {}
        self._loads: list[LoadOp] = []
        self.lookups = 0
        self.hit_blocks = 0
        self.claimed_blocks = 0

    # -- keys -----------------------------------------------------------------

    def _ns(self, st: _Req, rank: Rank):
        return self.session.namespace(rank[0], rank[1], st.lora, st.salt,
                                      self.ident.block_bytes)

    def _keys(self, st: _Req, nblocks: int) -> dict[Rank, list[bytes]]:
        """Each rank's keys of the request's first nblocks blocks."""
        ntok = nblocks * self.bs
        if ntok > st.keyed_tokens:
            toks = list(st.request.all_token_ids[:ntok])
            st.keys = {r: self._ns(st, r).keys(toks) for r in self.ranks}
            st.keyed_tokens = ntok
        return {r: k[:nblocks] for r, k in st.keys.items()}

    # -- vLLM's calls ---------------------------------------------------------

    def get_num_new_matched_tokens(self, request: Any,
                                   num_computed_tokens: int
                                   ) -> tuple[int, bool]:
        if getattr(request, "mm_features", None) or \
                getattr(request, "prompt_embeds", None) is not None:
            # Keys are token ids: a multimodal or embeddings prompt is
            # not what its tokens say. Neither loaded nor saved.
            self._reqs.pop(request.request_id, None)
            return 0, False
        fields = request_fields(request, self.cfg)
        if fields is None:
            # A LoRA adapter whose weights cannot be fingerprinted: its
            # KV could be another adapter's. Neither loaded nor saved.
            self._reqs.pop(request.request_id, None)
            return 0, False
        lora, salt = fields
        st = _Req(request=request, lora=lora, salt=salt,
                  local_blocks=num_computed_tokens // self.bs)
        self._reqs[request.request_id] = st
        if self.session.disabled or not (self.cfg.load or self.cfg.save):
            return 0, False
        ntok = len(request.all_token_ids)
        # Never the last token: its logits must come from a forward pass.
        max_blocks = max(ntok - 1, 0) // self.bs

        def look() -> list[int]:
            keys = self._keys(st, max_blocks)
            hit: list[int] | None = None
            for r in self.ranks:
                t = self._ns(st, r).lookup(keys[r])
                hit = t if hit is None or len(t) < len(hit) else hit
            return hit or []

        tiers = self.session.call("lookup", look, []) if max_blocks else []
        self.lookups += 1
        st.saved = len(tiers)
        self.hit_blocks += len(tiers)
        if not self.cfg.load or len(tiers) <= st.local_blocks:
            return 0, False
        claim = self.estimator.claim(tiers[st.local_blocks:])
        if claim.blocks < len(tiers) - st.local_blocks:
            self.log.debug("kvcache: %s: %d blocks cached past vLLM's %d, "
                           "loading %d (load %.4f s vs recompute %.4f s)",
                           request.request_id,
                           len(tiers) - st.local_blocks, st.local_blocks,
                           claim.blocks, claim.load_s, claim.recompute_s)
        st.claimed = claim.blocks
        st.tiers = tiers[st.local_blocks:st.local_blocks + claim.blocks]
        self.claimed_blocks += claim.blocks
        return claim.blocks * self.bs, False

    def update_state_after_alloc(self, request: Any, blocks: Any,
                                 num_external_tokens: int) -> None:
        st = self._reqs.get(request.request_id)
        if st is None:
            return
        ids = list(blocks.get_block_ids()[0])
        if len(ids) > len(st.block_ids):
            st.block_ids = ids
        n = num_external_tokens // self.bs
        if n <= 0:
            st.claimed = 0
            return
        first = st.local_blocks
        keys = self._keys(st, first + n)
        self._loads.append(LoadOp(
            req_id=request.request_id, lora=st.lora, salt=st.salt,
            keys={r: k[first:first + n] for r, k in keys.items()},
            block_ids=ids[first:first + n], tiers=st.tiers[:n]))

    def build_connector_meta(self, out: Any) -> StepMeta:
        meta = StepMeta(loads=self._loads,
                        tokens=int(out.total_num_scheduled_tokens),
                        block_bytes=self.ident.block_bytes)
        self._loads = []
        sched = out.num_scheduled_tokens
        for nr in out.scheduled_new_reqs:
            st = self._reqs.get(nr.req_id)
            if st is None:
                continue
            st.block_ids = list(nr.block_ids[0])
            self._save(meta, nr.req_id, st,
                       nr.num_computed_tokens + sched.get(nr.req_id, 0))
        cr = out.scheduled_cached_reqs
        for i, rid in enumerate(cr.req_ids):
            st = self._reqs.get(rid)
            if st is None:
                continue
            new = cr.new_block_ids[i]
            if rid in cr.resumed_req_ids:
                st.block_ids = list(new[0]) if new is not None else []
            elif new is not None:
                st.block_ids.extend(new[0])
            self._save(meta, rid, st,
                       cr.num_computed_tokens[i] + sched.get(rid, 0))
        return meta

    def _save(self, meta: StepMeta, rid: str, st: _Req,
              computed: int) -> None:
        """Save the blocks this step completes that kvcache lacks."""
        if not self.cfg.save or self.session.disabled:
            return
        full = min(computed, len(st.request.all_token_ids)) // self.bs
        full = min(full, len(st.block_ids))
        if full <= st.saved:
            return
        first = st.saved

        def keys() -> dict[Rank, list[bytes]]:
            return self._keys(st, full)

        k = self.session.call("key derivation", keys, None, remote=False)
        if k is None:
            return
        meta.saves.append(SaveOp(
            req_id=rid, lora=st.lora, salt=st.salt,
            parent={r: (v[first - 1] if first else None)
                    for r, v in k.items()},
            keys={r: v[first:full] for r, v in k.items()},
            block_ids=st.block_ids[first:full]))
        st.saved = full

    def update_connector_output(self, output: Any) -> None:
        bad = getattr(output, "invalid_block_ids", None)
        if bad:
            # Blocks that failed to load are recomputed by vLLM: save
            # them again from the first one, or kvcache would refuse the
            # request's later blocks (their parent missing).
            for st in self._reqs.values():
                for i, bid in enumerate(st.block_ids[:st.saved]):
                    if bid in bad:
                        st.saved = i
                        break
        rep = getattr(output, "kv_connector_worker_meta", None)
        if not isinstance(rep, WorkerReport):
            return
        for tier_bytes, secs in rep.loads:
            self.estimator.record_load(tier_bytes, secs)
        for tokens, secs in rep.forwards:
            self.estimator.record_forward(tokens, secs)

    def request_finished(self, request: Any, block_ids: list[int]
                         ) -> tuple[bool, dict[str, Any] | None]:
        self._reqs.pop(request.request_id, None)
        return False, None

    def shutdown(self) -> None:
        # The side's counters, once: what the cache did for this engine.
        self.log.info("kvcache: scheduler: %d lookups, %d blocks cached, "
                      "%d claimed", self.lookups, self.hit_blocks,
                      self.claimed_blocks)
        self.session.close()
