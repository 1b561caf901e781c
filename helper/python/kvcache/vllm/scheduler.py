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

Hybrid models (several KV cache groups: full attention with sliding
windows or chunked local attention) key each group's blocks apart
(identity.Group): a full-attention group's blocks form a chain, as a
dense model's; a sliding or chunked group's are stored one by one, each
a chain of its own, because vLLM keeps only the last window of them and
a later hit needs only that window (hits.py), wherever the earlier ones
went. vLLM's null blocks (the positions it does not keep) are never
saved nor loaded.

Events (take_events): vLLM's own BlockStored for each block kvcache
took (as rank (0, 0)'s worker reports its stores complete), and
BlockRemoved for a block announced so that a later lookup no longer
finds, in vLLM's own hash space (the request's block hashes) with the
group's index and medium "CPU" (kvcache: its DRAM pool, g3 and g4
behind it), so that a router reading vLLM's KV events sees kvcache's
blocks with no code of kvcache's. kvcached's own node-level feed
(kv-events.md) tells the tiers apart.

Only the engine's thread calls in here; the estimator is shared with
update_connector_output, on the same thread.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from .config import ConnectorConfig
from .estimate import TIER_DRAM, Estimator, tier_of
from .hits import longest, needed
from .identity import Identity, fold_mm, mm_items, request_fields
from . import stats
from .meta import LoadOp, Rank, SaveOp, StepMeta, WorkerReport
from .session import Session


NULL_BLOCK = 0       # vLLM's null block: BlockPool's first block
MEDIUM = "CPU"       # vLLM's name for host memory: kvcache's pool
# Events kept track of: saves waiting for their completion, and blocks
# announced (BlockStored) that a miss would withdraw; the oldest go first.
PENDING_MAX = 8192
ANNOUNCED_MAX = 1 << 16
EARLY_MAX = 4096        # requests looked up on arrival, not yet scheduled


@dataclass
class _Pending:
    """A SaveOp whose completions make BlockStored events."""
    request: Any
    group: int
    pos: list[int]                  # the block positions of its keys
    calls: int                      # store completions still to come


@dataclass
class _Req:
    request: Any                    # vLLM's Request: its live token list
    lora: str
    salt: bytes
    mm: list[tuple[int, int, bytes]]    # identity.mm_items()
    local_blocks: int = 0           # vLLM's own prefix hit
    claimed: int = 0                # blocks claimed past local_blocks
    tiers: list[int] = field(default_factory=list)
    # per group: the leading blocks kvcache holds or that need no save
    saved: list[int] = field(default_factory=list)
    # per group: vLLM's blocks of the request, in order (nulls included)
    block_ids: list[list[int]] = field(default_factory=list)
    # per group, per rank: the keys of the first keyed_tokens tokens
    keys: list[dict[Rank, list[bytes]]] = field(default_factory=list)
    keyed_tokens: int = 0
    background: bool = False        # its load is a background one
    loading: bool = False           # ... and vLLM's blocks are being written


class SchedulerSide:
    def __init__(self, cfg: ConnectorConfig, ident: Identity,
                 log: logging.Logger, hash_block_size: int = 0) -> None:
        self.cfg = cfg
        self.ident = ident
        self.log = log
        self.bs = ident.tokens_per_block
        # vLLM's hashes per block: request.block_hashes has one per
        # hash_block_size tokens
        self.hash_step = max(self.bs // (hash_block_size or self.bs), 1)
        self._events: list[Any] = []
        self._pending: OrderedDict[int, _Pending] = OrderedDict()
        self._announced: OrderedDict[tuple[int, Any], None] = OrderedDict()
        # on_new_request's lookups, by request, until it is scheduled
        self._early: OrderedDict[str, _Req] = OrderedDict()
        self._op_id = 0
        self.groups = list(ident.groups)
        self.chained = [g.kind == "full" for g in self.groups]
        self.session = Session(cfg, ident, log, "scheduler")
        self.estimator = Estimator(cfg, ident.block_bytes, self.bs)
        self.ranks: list[Rank] = [(t, p) for p in range(ident.pp_size)
                                  for t in range(ident.tp_size)]
        self._reqs: dict[str, _Req] = {}
        self._loads: list[LoadOp] = []
        self.lookups = 0
        self.hit_blocks = 0
        self.claimed_blocks = 0
        self._stats = stats.empty()     # since vLLM last collected

    # -- keys -----------------------------------------------------------------

    def _ns(self, st: _Req, rank: Rank, group: int):
        return self.session.namespace(rank[0], rank[1], st.lora, st.salt,
                                      self.groups[group].block_bytes, group)

    def _ranks(self, group: int) -> list[Rank]:
        """The ranks whose keys differ in a group: one per pipeline stage
        where every tensor-parallel rank holds the same bytes (MLA)."""
        if self.groups[group].replicated:
            return [r for r in self.ranks if r[0] == 0]
        return self.ranks

    def _keys(self, st: _Req, nblocks: int) -> list[dict[Rank, list[bytes]]]:
        """Each group's, each rank's keys of the first nblocks blocks (a
        replicated group's the same for every tensor-parallel rank)."""
        ntok = nblocks * self.bs
        if ntok > st.keyed_tokens:
            toks = list(st.request.all_token_ids[:ntok])
            st.keys = []
            for g in range(len(self.groups)):
                own = {r: fold_mm(self._ns(st, r, g).keys(toks), st.mm,
                                  self.bs)
                       for r in self._ranks(g)}
                st.keys.append({r: own.get(r, own.get((0, r[1])))
                                for r in self.ranks})
            st.keyed_tokens = ntok
        return [{r: k[:nblocks] for r, k in gk.items()} for gk in st.keys]

    def _lookup(self, st: _Req, local: int, max_blocks: int
                ) -> tuple[int, list[int], list[int]]:
        """The longest prefix every group can serve past local, each
        position's tier mask, and each group's leading blocks kvcache
        holds (what needs no save)."""
        keys = self._keys(st, max_blocks)
        limit = max_blocks
        chains: dict[int, list[int]] = {}
        for gi, chained in enumerate(self.chained):
            if not chained:
                continue
            hit: list[int] | None = None
            for r in self._ranks(gi):
                t = self._ns(st, r, gi).lookup(keys[gi][r])
                hit = t if hit is None or len(t) < len(hit) else hit
            chains[gi] = hit or []
            limit = min(limit, len(chains[gi]))
        tiers = [0] * max_blocks

        def has(gi: int, i: int) -> bool:
            if gi in chains:
                return i < len(chains[gi])
            mask = None
            for r in self._ranks(gi):
                t = self._ns(st, r, gi).lookup([keys[gi][r][i]])
                if not t:
                    self._withdraw(st.request, gi, (i,))
                    return False
                mask = t[0] if mask is None else mask & t[0]
            tiers[i] |= mask or 0
            return True

        n = longest(self.groups, self.bs, local, limit, has)
        for gi, t in chains.items():
            for i in range(min(n, len(t))):
                tiers[i] |= t[i]
            self._withdraw(st.request, gi, range(len(t), max_blocks))
        # A position no group loads (a window group's block before its
        # window, a model without a full-attention group) is part of the
        # same hit: it counts as the tier of the blocks after it.
        for i in range(n - 2, -1, -1):
            if not tiers[i]:
                tiers[i] = tiers[i + 1]
        # A chain holds its prefix; a window group's blocks before n were
        # not all asked for: those vLLM computes are stored (again).
        saved = [len(chains[gi]) if gi in chains else local
                 for gi in range(len(self.groups))]
        return n, tiers[:n], saved

    # -- vLLM's calls ---------------------------------------------------------

    def _new_req(self, request: Any, local: int) -> _Req | None:
        """The request's state, or None for one kvcache neither loads
        nor saves."""
        if getattr(request, "prompt_embeds", None) is not None:
            # Keys are token ids: an embeddings prompt is not what its
            # tokens say.
            return None
        try:
            # Multimodal items are in the keys (identity.fold_mm).
            mm = mm_items(getattr(request, "mm_features", None))
        except ValueError:
            return None
        fields = request_fields(request, self.cfg)
        if fields is None:
            # A LoRA adapter whose weights cannot be fingerprinted: its
            # KV could be another adapter's.
            return None
        lora, salt = fields
        return _Req(request=request, lora=lora, salt=salt, mm=mm,
                    local_blocks=local, saved=[local] * len(self.groups),
                    block_ids=[[] for _ in self.groups])

    def on_new_request(self, request: Any) -> None:
        """The request's lookup as soon as vLLM has it, before it is
        scheduled: kvcached starts reading what a lookup finds on g3/g4
        into its pool (kvcd_tiers_prefetch), so a request that waits in
        vLLM's queue finds its blocks in DRAM when it is scheduled, and
        its load is a DRAM one. Its keys are kept for that
        get_num_new_matched_tokens. Only the full-attention chains are
        looked up here: the blocks of a window or a Mamba state depend
        on the hit's length, known then."""
        if self.session.disabled or not self.cfg.load or \
                not self.cfg.lookup_on_arrival:
            return
        st = self._new_req(request, 0)
        max_blocks = max(len(request.all_token_ids) - 1, 0) // self.bs
        if st is None or not max_blocks or not any(self.chained):
            return

        def look() -> bool:
            keys = self._keys(st, max_blocks)
            for gi, chained in enumerate(self.chained):
                if chained:
                    for r in self._ranks(gi):
                        self._ns(st, r, gi).lookup(keys[gi][r])
            return True

        if self.session.call("lookup", look, False):
            self._early[request.request_id] = st
            while len(self._early) > EARLY_MAX:
                self._early.popitem(last=False)

    def get_num_new_matched_tokens(self, request: Any,
                                   num_computed_tokens: int
                                   ) -> tuple[int, bool]:
        local = num_computed_tokens // self.bs
        st = self._new_req(request, local)
        early = self._early.pop(request.request_id, None)
        if st is None:
            # Neither loaded nor saved.
            self._reqs.pop(request.request_id, None)
            return 0, False
        if early is not None and (early.lora, early.salt, early.mm) == \
                (st.lora, st.salt, st.mm):
            st.keys, st.keyed_tokens = early.keys, early.keyed_tokens
        self._reqs[request.request_id] = st
        if self.session.disabled or not (self.cfg.load or self.cfg.save):
            return 0, False
        ntok = len(request.all_token_ids)
        # Never the last token: its logits must come from a forward pass.
        max_blocks = max(ntok - 1, 0) // self.bs

        n, tiers, saved = self.session.call(
            "lookup", lambda: self._lookup(st, local, max_blocks),
            (local, [], [local] * len(self.groups))) if max_blocks else \
            (local, [], st.saved)
        self.lookups += 1
        self._stats["lookups"] += 1
        st.saved = [max(s, local) for s in saved]
        self.hit_blocks += len(tiers)
        if not self.cfg.load or n <= local:
            return 0, False
        claim = self.estimator.claim(tiers[local:n])
        if claim.blocks < n - local:
            self.log.debug("kvcache: %s: %d blocks cached past vLLM's %d, "
                           "loading %d (load %.4f s vs recompute %.4f s)",
                           request.request_id, n - local, local,
                           claim.blocks, claim.load_s, claim.recompute_s)
            if len(self.groups) > 1 and claim.blocks:
                # A shorter prefix needs other window blocks: ask again.
                n2, tiers, _ = self.session.call(
                    "lookup",
                    lambda: self._lookup(st, local, local + claim.blocks),
                    (local, [], []))
                claim.blocks = max(n2 - local, 0)
        st.claimed = claim.blocks
        st.tiers = tiers[local:local + claim.blocks]
        self.claimed_blocks += claim.blocks
        # A block kvcached must first read up from g3/g4 is loaded in
        # the background: the request waits, the batch does not. A DRAM
        # hit is mapped at once and copied inside the step, layer by
        # layer, faster than a step's round trip.
        st.background = self.cfg.background_loads and \
            any(not (m & TIER_DRAM) for m in st.tiers)
        if len(self.groups) > 1:
            # A model of several KV cache groups: a failed load can be
            # reported only for a request loaded in the background
            # (failed_recving; vLLM stops on the block ids of an
            # in-step load's failure), so every load is one.
            st.background = True
        for m in st.tiers:
            self._stats[f"hit_tokens_{tier_of(m)}"] += self.bs
        if st.background and claim.blocks:
            self._stats["background_loads"] += 1
        return claim.blocks * self.bs, st.background and claim.blocks > 0

    def update_state_after_alloc(self, request: Any, blocks: Any,
                                 num_external_tokens: int) -> None:
        st = self._reqs.get(request.request_id)
        if st is None:
            return
        per_group = blocks.get_block_ids()
        for gi in range(min(len(per_group), len(self.groups))):
            ids = list(per_group[gi])
            if len(ids) > len(st.block_ids[gi]):
                st.block_ids[gi] = ids
        n = num_external_tokens // self.bs
        if n <= 0:
            st.claimed = 0
            return
        first = st.local_blocks
        keys = self._keys(st, first + n)
        for gi, g in enumerate(self.groups):
            ids = st.block_ids[gi]
            want = [i for i in needed(g, first + n, first, self.bs)
                    if i < len(ids) and ids[i] != NULL_BLOCK]
            if not want:
                continue
            st.loading = st.background
            self._loads.append(LoadOp(
                req_id=request.request_id, lora=st.lora, salt=st.salt,
                group=gi, background=st.background,
                keys={r: [k[i] for i in want] for r, k in keys[gi].items()},
                block_ids=[ids[i] for i in want],
                tiers=[st.tiers[i - first] if i - first < len(st.tiers)
                       else 0 for i in want]))
        if st.background and not st.loading:
            # Nothing to write after all: vLLM still waits for the
            # request's get_finished, which an empty load gives it.
            st.loading = True
            self._loads.append(LoadOp(
                req_id=request.request_id, lora=st.lora, salt=st.salt,
                keys={}, block_ids=[], tiers=[], background=True))
        # What was loaded is held by kvcache: not saved again.
        for gi in range(len(self.groups)):
            st.saved[gi] = max(st.saved[gi], first + n)

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
            st.block_ids = [list(nr.block_ids[gi]) if gi < len(nr.block_ids)
                            else [] for gi in range(len(self.groups))]
            self._save(meta, nr.req_id, st,
                       nr.num_computed_tokens + sched.get(nr.req_id, 0))
        cr = out.scheduled_cached_reqs
        for i, rid in enumerate(cr.req_ids):
            st = self._reqs.get(rid)
            if st is None:
                continue
            new = cr.new_block_ids[i]
            for gi in range(len(self.groups)):
                add = list(new[gi]) if new is not None and \
                    gi < len(new) else []
                if rid in cr.resumed_req_ids:
                    st.block_ids[gi] = add
                else:
                    st.block_ids[gi].extend(add)
            self._save(meta, rid, st,
                       cr.num_computed_tokens[i] + sched.get(rid, 0))
        self._save_states(meta, out)
        return meta

    def _save_states(self, meta: StepMeta, out: Any) -> None:
        """Mamba groups: the states vLLM hands off this step, each the
        state after a block boundary's token, in the block it names
        (kv_connector_block_state.boundary_state_offloads). In "align"
        mode vLLM keeps a state only where a step ended on a block
        boundary, nulls interior ones and reuses their blocks: its block
        table does not say where states are, these hand-offs do. vLLM
        writes the state in this step's forward pass; the save gathers
        it at the step's end (wait_for_save), before vLLM may free it."""
        bst = getattr(out, "kv_connector_block_state", None)
        offers = getattr(bst, "boundary_state_offloads", None) or {}
        if not offers or not self.cfg.save or self.session.disabled:
            return
        for rid, entries in offers.items():
            st = self._reqs.get(rid)
            if st is None:
                continue
            ntok = st.request.num_prompt_tokens
            for gi, block_id, boundary in entries:
                if not (0 <= gi < len(self.groups)) or \
                        self.groups[gi].kind != "mamba" or \
                        block_id == NULL_BLOCK or boundary <= 0 or \
                        boundary % self.bs or boundary > ntok:
                    # Not a whole-block state of the prompt (a decode
                    # step's state is no prefix another prompt shares).
                    continue
                i = boundary // self.bs - 1
                k = self.session.call("key derivation",
                                      lambda: self._keys(st, i + 1), None,
                                      remote=False)
                if k is None:
                    return
                self._op_id += 1
                self._pending[self._op_id] = _Pending(st.request, gi, [i], 1)
                while len(self._pending) > PENDING_MAX:
                    self._pending.popitem(last=False)
                meta.saves.append(SaveOp(
                    req_id=rid, lora=st.lora, salt=st.salt, group=gi,
                    chained=False, op_id=self._op_id,
                    parent={r: None for r in k[gi]},
                    keys={r: [v[i]] for r, v in k[gi].items()},
                    block_ids=[block_id]))

    def _save(self, meta: StepMeta, rid: str, st: _Req,
              computed: int) -> None:
        """Save the blocks this step completes that kvcache lacks: each
        group's, never a null block."""
        if not self.cfg.save or self.session.disabled:
            return
        full = min(computed, len(st.request.all_token_ids)) // self.bs
        if all(full <= s for s in st.saved):
            return

        def keys() -> list[dict[Rank, list[bytes]]]:
            return self._keys(st, full)

        k = self.session.call("key derivation", keys, None, remote=False)
        if k is None:
            return
        for gi in range(len(self.groups)):
            if self.groups[gi].kind == "mamba":
                # States are saved from vLLM's hand-offs only
                # (_save_states): its table of them is not positional.
                st.saved[gi] = max(st.saved[gi], full)
                continue
            ids = st.block_ids[gi]
            end = min(full, len(ids))
            first = st.saved[gi]
            if end <= first:
                continue
            pos = [i for i in range(first, end) if ids[i] != NULL_BLOCK]
            st.saved[gi] = end
            if not pos:
                continue
            if self.chained[gi] and pos != list(range(first, end)):
                # A full-attention chain with a hole: vLLM never makes
                # one; this group saves nothing past it rather than a
                # broken chain (the other groups go on).
                continue
            self._op_id += 1
            self._pending[self._op_id] = _Pending(
                st.request, gi, pos, 1 if self.chained[gi] else len(pos))
            while len(self._pending) > PENDING_MAX:
                self._pending.popitem(last=False)
            meta.saves.append(SaveOp(
                req_id=rid, lora=st.lora, salt=st.salt, group=gi,
                chained=self.chained[gi], op_id=self._op_id,
                parent={r: (v[first - 1] if first and self.chained[gi]
                            else None) for r, v in k[gi].items()},
                keys={r: [v[i] for i in pos] for r, v in k[gi].items()},
                block_ids=[ids[i] for i in pos]))

    def update_connector_output(self, output: Any) -> None:
        for rid in getattr(output, "finished_recving", None) or ():
            st = self._reqs.get(rid)
            if st is not None:
                st.loading = False
        bad = getattr(output, "invalid_block_ids", None)
        if bad:
            # Blocks that failed to load are recomputed by vLLM: save
            # them again from the first one, or kvcache would refuse the
            # request's later blocks (their parent missing).
            for st in self._reqs.values():
                for gi, ids in enumerate(st.block_ids):
                    for i, bid in enumerate(ids[:st.saved[gi]]):
                        if bid in bad and bid != NULL_BLOCK:
                            st.saved[gi] = i
                            break
        rep = getattr(output, "kv_connector_worker_meta", None)
        if not isinstance(rep, WorkerReport):
            return
        for op_id, first, n in rep.stored:
            self._stored(op_id, first, n)
        for tier_bytes, secs in rep.loads:
            self.estimator.record_load(tier_bytes, secs)
        for tokens, secs in rep.forwards:
            self.estimator.record_forward(tokens, secs)

    def request_finished(self, request: Any, block_ids: Any
                         ) -> tuple[bool, dict[str, Any] | None]:
        st = self._reqs.pop(request.request_id, None)
        self._early.pop(request.request_id, None)
        # Aborted while a background load writes its blocks: vLLM frees
        # them once the worker says the load is over (get_finished).
        return bool(st is not None and st.loading), None

    # -- events ---------------------------------------------------------------

    def _vhash(self, request: Any, i: int) -> Any:
        """vLLM's hash of block i of the request (as its own KV events
        carry it), or None when vLLM has not hashed it."""
        hashes = getattr(request, "block_hashes", None) or []
        j = (i + 1) * self.hash_step - 1
        if i < 0 or j >= len(hashes):
            return None
        from vllm.v1.core.kv_cache_utils import maybe_convert_block_hash
        return maybe_convert_block_hash(hashes[j])

    def _stored(self, op_id: int, first: int, n: int) -> None:
        p = self._pending.get(op_id)
        if p is None:
            return
        p.calls -= 1
        if p.calls <= 0:
            del self._pending[op_id]
        pos = p.pos[first:first + n]
        hashes = [self._vhash(p.request, i) for i in pos]
        if not pos or any(h is None for h in hashes):
            return
        from vllm.distributed.kv_events import BlockStored
        lr = getattr(p.request, "lora_request", None)
        toks = p.request.all_token_ids
        g = self.groups[p.group]
        # One event per contiguous run, as vLLM's own.
        start = 0
        for k in range(1, len(pos) + 1):
            if k < len(pos) and pos[k] == pos[k - 1] + 1:
                continue
            run, rh = pos[start:k], hashes[start:k]
            self._events.append(BlockStored(
                extra_keys=self._extra_keys(p.request, run),
                block_hashes=rh,
                parent_block_hash=self._vhash(p.request, run[0] - 1),
                token_ids=list(toks[run[0] * self.bs:(run[-1] + 1) * self.bs]),
                block_size=self.bs,
                lora_id=lr.adapter_id if lr else None,
                medium=MEDIUM,
                lora_name=lr.name if lr else None,
                group_idx=p.group,
                kv_cache_spec_kind=g.kind,
                kv_cache_spec_sliding_window=g.window or None))
            for h in rh:
                self._announced[(p.group, h)] = None
                self._announced.move_to_end((p.group, h))
            start = k
        while len(self._announced) > ANNOUNCED_MAX:
            self._announced.popitem(last=False)

    def _extra_keys(self, request: Any, run: list[int]) -> Any:
        """The extra keys vLLM's own BlockStored carries for these blocks
        (LoRA, multimodal items with their offsets, cache_salt), made by
        vLLM's own function, so a router reads ours as it reads vLLM's."""
        try:
            # vLLM's internals, not its connector interface: an event
            # without them beats a scheduler that raises.
            from vllm.v1.core.kv_cache_utils import (
                generate_block_hash_extra_keys, to_event_extra_keys)
            out, mm_idx = [], 0
            for i in run:
                keys, mm_idx = generate_block_hash_extra_keys(
                    request, i * self.bs, (i + 1) * self.bs, mm_idx)
                out.append(keys)
            return to_event_extra_keys(out)
        except (ImportError, AttributeError, TypeError, ValueError):
            return None

    def _withdraw(self, request: Any, group: int, positions: Any) -> None:
        """BlockRemoved for announced blocks a lookup no longer finds.
        Nothing announced (events off, or all withdrawn): no hash to
        compute for the positions, which run to the request's end."""
        if not self._announced:
            return
        gone = []
        for i in positions:
            h = self._vhash(request, i)
            if h is None:
                break
            if (group, h) in self._announced:
                del self._announced[(group, h)]
                gone.append(h)
        if gone:
            from vllm.distributed.kv_events import BlockRemoved
            self._events.append(BlockRemoved(block_hashes=gone,
                                             medium=MEDIUM,
                                             group_idx=group))

    def take_events(self) -> list[Any]:
        out, self._events = self._events, []
        return out

    def take_stats(self) -> "stats.Stats":
        out, self._stats = self._stats, stats.empty()
        return stats.Stats(out)

    def shutdown(self) -> None:
        # The side's counters, once: what the cache did for this engine.
        self.log.info("kvcache: scheduler: %d lookups, %d blocks cached, "
                      "%d claimed", self.lookups, self.hit_blocks,
                      self.claimed_blocks)
        self.session.close()
