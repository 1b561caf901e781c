# SPDX-License-Identifier: GPL-2.0
"""The worker side of the connector: copies blocks between kvcache's
pool and vLLM's paged KV tensors.

Loads (start_load_kv, wait_for_layer_load): every block of the step's
loads is pinned and mapped first (kvcache_load_map: no copy), so a block
evicted since the lookup, a daemon gone or a g3/g4 file that fails its
checksum is known before the forward pass and reported through
get_block_ids_with_load_errors; vLLM recomputes those blocks. A copier
thread then moves the mapped bytes into the KV tensors layer by layer,
from a tensor view over the mapping (no intermediate buffer), and the
forward pass waits only for the layer it is about to compute. On CUDA
the mapping is registered with the driver once (cudaHostRegister) and the
copies are asynchronous on a stream of their own, each layer's wait an
event on it.

Saves (wait_for_save): at the end of the step, the blocks the step
completed are gathered from the KV tensors into a staging buffer and
handed to kvcached with an asynchronous store; the stores complete while
the next steps run. A reaper thread collects their completions as they
come, also while the engine is idle. A request's stores are submitted
one at a time, in order (each continues the chain of the one before,
whose last block kvcached must hold first): the reaper submits the next
when one completes; one that fails or is declined drops the rest of that
request's queue. The gather is synchronous, so vLLM may reuse the
blocks as soon as the step is over.

Hybrid models: each KV cache group's layers make their own pool blocks
(layout.py), in their own namespace (identity.Group). A sliding-window
or chunked group's blocks are stored one by one, each a chain of its
own (scheduler.py): they go straight to kvcached, outside the request's
queue, which orders only full-attention chains.

Objects: the step's _Loads (mapped blocks, the copier, its events) live
from start_load_kv to wait_for_save, which releases the mappings; a
store's staging buffer (_Store) lives until its completion is collected.
Locking: _store_cv guards _stores, _busy and _waiting (the engine's
thread adds, the reaper completes); no copy and no call to kvcached runs
under it except a store's submission, which only queues.
"""

from __future__ import annotations

import logging
import threading
import time
import warnings
import weakref
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import torch

from .config import ConnectorConfig
from .estimate import tier_of
from .identity import Identity
from .layout import Layer, describe, layers_of
from . import stats
from .meta import Rank, StepMeta, WorkerReport
from .session import Disabled, Session

_live: "weakref.WeakSet[WorkerSide]" = weakref.WeakSet()
# Blocks claimed at lookup but not loadable are said once per process
# (WARNING), then counted at DEBUG: a steady trickle is normal under
# eviction, and vLLM recomputes them.
_miss_said = threading.Event()


def wait_for_saves(timeout_s: float = 30.0) -> bool:
    """Wait until every store of this process's workers completed (for
    in-process engines: tests, a script that exits right after
    generate()). Returns whether all did within timeout_s."""
    deadline = time.monotonic() + timeout_s
    ok = True
    for w in list(_live):
        ok = w.drain(max(deadline - time.monotonic(), 0.0)) and ok
    return ok


def _rank() -> Rank:
    try:
        from vllm.distributed.parallel_state import (get_pp_group,
                                                     get_tp_group)
        return get_tp_group().rank_in_group, get_pp_group().rank_in_group
    except Exception:  # noqa: BLE001 - not initialised: a single rank
        return 0, 0


@dataclass
class _Store:
    """One store: its staging buffer lives until its completion."""
    tag: int
    req_id: str
    lora: str
    salt: bytes
    keys: list[bytes]
    parent: bytes | None
    buf: Any
    group: int = 0
    chained: bool = True        # in the request's queue (SaveOp.chained)
    op_id: int = 0              # SaveOp.op_id, and its keys from first
    first: int = 0


@dataclass
class _Loads:
    # (mapping, vLLM block ids, group)
    maps: list[tuple[Any, list[int], int]] = field(default_factory=list)
    tier_bytes: dict[str, int] = field(default_factory=dict)
    events: dict[str, Any] = field(default_factory=dict)
    thread: threading.Thread | None = None
    error: BaseException | None = None
    failed_ids: set[int] = field(default_factory=set)
    # the requests of those blocks (block ids repeat across groups)
    failed_reqs: set[str] = field(default_factory=set)
    t0: float = 0.0
    t1: float = 0.0


class WorkerSide:
    def __init__(self, cfg: ConnectorConfig, ident: Identity,
                 kv_cache_config: Any, log: logging.Logger) -> None:
        self.cfg = cfg
        self.ident = ident
        self.log = log
        self.num_blocks = int(kv_cache_config.num_blocks)
        self.session = Session(cfg, ident, log, "worker")
        self.rank: Rank = (0, 0)
        self.layers: list[Layer] = []
        self.by_name: dict[str, Layer] = {}
        self.group_layers: list[list[Layer]] = []
        self.group_of: dict[str, int] = {}
        self.group_bytes: list[int] = []
        self.block_bytes = 0
        self.cuda = False
        self._stream = None
        self._registered: set[int] = set()
        self._meta: StepMeta | None = None
        self._loads: _Loads | None = None
        self._errors: set[int] = set()
        self._report = WorkerReport()
        self._step_t0 = 0.0
        self._load_wait = 0.0
        self._stores: dict[int, _Store] = {}   # in flight, by tag
        self._busy: set[str] = set()           # requests with one in flight
        self._waiting: dict[str, deque[_Store]] = {}   # behind it, in order
        # The three above are under _store_cv, shared with the reaper
        # thread, which collects completions and submits what waits.
        self._store_cv = threading.Condition()
        self._reaper: threading.Thread | None = None
        self._stopping = False
        self._tag = 0
        self.loaded_blocks = 0
        self.saved_blocks = 0
        self.failed_blocks = 0
        # Since vLLM last collected (take_stats); under _store_cv, as
        # the reaper adds the stores' outcomes.
        self._stats = stats.empty()
        self._stored: list[tuple[int, int, int]] = []   # for the report
        # Background loads (under _store_cv): their threads, the
        # requests done, and the blocks of those that failed.
        self._bg_threads: set[threading.Thread] = set()
        self._bg_slots = threading.BoundedSemaphore(
            max(1, cfg.connections - 1))
        self._recv_done: set[str] = set()
        self._recv_errors: set[int] = set()
        self._recv_failed: set[str] = set()
        # vLLM maps failed block ids back to requests only for a model
        # of one KV cache group (ids are unique per group); with more it
        # stops the engine. There a failed load fails its request, which
        # vLLM recomputes (failed_recving), and every load is a
        # background one (the scheduler side sees to it).
        self.by_request = len(ident.groups) > 1
        _live.add(self)

    # -- setup ------------------------------------------------------------------

    def register_kv_caches(self, kv_caches: dict[str, torch.Tensor]) -> None:
        self.rank = _rank()
        groups: list[list[Layer]] = []
        try:
            for gi, g in enumerate(self.ident.groups):
                # This rank's layers of the group (pipeline parallelism
                # gives each rank some of them).
                mine = {n: kv_caches[n] for n in g.layers if n in kv_caches}
                groups.append(layers_of(mine, self.num_blocks))
            if len(self.ident.groups) == 1:
                # One group: every tensor vLLM registered, as before.
                groups = [layers_of(kv_caches, self.num_blocks)]
        except ValueError as e:
            self.session._disable(f"KV cache layout: {e}")
            return
        self.group_layers = groups
        self.group_of = {l.name: gi for gi, ls in enumerate(groups)
                         for l in ls}
        self.layers = [l for ls in groups for l in ls]
        self.by_name = {l.name: l for l in self.layers}
        self.group_bytes = [sum(l.nbytes for l in ls) for ls in groups]
        self.block_bytes = sum(self.group_bytes)
        self.cuda = any(l.kv.is_cuda for l in self.layers)
        if self.ident.pp_size == 1:
            for gi, g in enumerate(self.ident.groups):
                if self.group_bytes[gi] != g.block_bytes:
                    self.session._disable(
                        f"the KV tensors of group {gi} hold "
                        f"{self.group_bytes[gi]} bytes per block, the KV "
                        f"cache spec says {g.block_bytes}")
                    self.layers = []
                    return
        if self.cuda:
            self._stream = torch.cuda.Stream()
        self.log.info("kvcache: worker rank %s: %s, %d bytes per block",
                      self.rank, describe(self.layers), self.block_bytes)

    def _ns(self, lora: str, salt: bytes, group: int = 0):
        return self.session.namespace(self.rank[0], self.rank[1], lora,
                                      salt, self.group_bytes[group], group)

    # -- loads ------------------------------------------------------------------

    def bind(self, meta: StepMeta) -> None:
        self._meta = meta
        self._step_t0 = time.perf_counter()
        self._load_wait = 0.0

    def start_load(self) -> None:
        meta = self._meta
        if meta is None or not meta.loads:
            return
        if not self.layers:
            # Disabled before it learnt the layout: the scheduler may
            # still have claimed blocks; none of them is loaded.
            with self._store_cv:
                for op in meta.loads:
                    self.failed_blocks += len(op.block_ids)
                    if self.by_request and op.background:
                        self._recv_failed.add(op.req_id)
                    else:
                        self._errors.update(op.block_ids)
                    if op.background:
                        self._recv_done.add(op.req_id)
            return
        per_req: dict[str, list[Any]] = {}
        for op in meta.loads:
            if op.background:
                per_req.setdefault(op.req_id, []).append(op)
        for ops in per_req.values():
            # Mapping waits for g3/g4 reads in kvcached: on a thread of
            # its own, as the copies; the step goes on without them.
            # One thread per request, so a request is ready when its
            # own blocks are, not when the slowest of the step's are.
            t = threading.Thread(target=self._load_background, args=(ops,),
                                 name="kvcache-load-bg", daemon=True)
            with self._store_cv:
                self._bg_threads.add(t)
            t.start()
        ld = self._map([op for op in meta.loads if not op.background])
        with self._store_cv:
            self._errors |= ld.failed_ids
        if not ld.maps:
            return
        for l in self.layers:
            ld.events[l.name] = threading.Event()
        self._loads = ld
        ld.thread = threading.Thread(target=self._copy_in, args=(ld,),
                                     name="kvcache-load", daemon=True)
        ld.thread.start()

    def _map(self, ops: list[Any]) -> _Loads:
        """Pin and map every block of ops; those that cannot be are the
        _Loads' failed_ids (counted and said here)."""
        ld = _Loads(t0=time.perf_counter())
        for op in ops:
            if not op.block_ids:
                continue        # a background load with nothing to write
            keys = op.keys.get(self.rank, [])
            mapped = None
            if not self.session.disabled and len(keys) == len(op.block_ids):
                mapped = self.session.call(
                    "loading blocks",
                    lambda op=op, keys=keys:
                        self._ns(op.lora, op.salt,
                                 op.group).load_map(keys),
                    None)
            got = len(mapped) if mapped is not None else 0
            if got < len(op.block_ids):
                ld.failed_ids.update(op.block_ids[got:])
                ld.failed_reqs.add(op.req_id)
                if got == 0 and mapped is not None:
                    mapped.release()
                    mapped = None
            if mapped is not None:
                ld.maps.append((mapped, op.block_ids[:got], op.group))
                for m in op.tiers[:got]:
                    t = tier_of(m)
                    ld.tier_bytes[t] = ld.tier_bytes.get(t, 0) + \
                        self.group_bytes[op.group]
        with self._store_cv:
            self.failed_blocks += len(ld.failed_ids)
            self._stats["load_failed_blocks"] += len(ld.failed_ids)
        if ld.failed_ids:
            first = not _miss_said.is_set()
            _miss_said.set()
            (self.log.warning if first else self.log.debug)(
                "kvcache: %d block(s) found at lookup could not be loaded "
                "(evicted since, failed verification, or kvcached gone); "
                "vLLM recomputes them%s", len(ld.failed_ids),
                " (said once; later ones at DEBUG)" if first else "")
        return ld

    def _load_background(self, ops: list[Any]) -> None:
        """One request's background loads: map, copy every layer, release;
        then their requests are done (get_finished) with the blocks that
        failed, which vLLM recomputes."""
        try:
            # A LOAD waiting for g3/g4 holds one of libkvcache's
            # connections until kvcached answers: leave one to the
            # step's own loads and saves.
            with self._bg_slots:
                ld = self._map(ops)
            if ld.maps:
                self._copy_in(ld)
            bad = self._settle(ld)
            # A copy that failed half-way leaves every request suspect.
            reqs = {op.req_id for op in ops} if ld.error is not None \
                else ld.failed_reqs
        except BaseException as e:  # noqa: BLE001 - reported, not raised
            self.session.note_failure("loading blocks", e)
            bad = {b for op in ops for b in op.block_ids}
            reqs = {op.req_id for op in ops}
        with self._store_cv:
            if self.by_request:
                # A request fails whole when any of its blocks did (in
                # any group: the ids say nothing across groups).
                self._recv_failed |= reqs
            else:
                self._recv_errors |= bad
            self._recv_done.update(op.req_id for op in ops)
            self._bg_threads.discard(threading.current_thread())
            self._store_cv.notify_all()

    def get_finished(self) -> tuple[set[str], set[str]]:
        """Requests whose background loads are over, and those of them
        that failed (a model of several groups: vLLM recomputes them
        whole). A one-group model's failed blocks go to the next
        load_errors() instead, which vLLM asks for right after."""
        with self._store_cv:
            done, self._recv_done = self._recv_done, set()
            failed, self._recv_failed = self._recv_failed, set()
            self._errors |= self._recv_errors
            self._recv_errors = set()
        return done, failed

    def _src(self, view: memoryview, layer: Layer) -> torch.Tensor:
        with warnings.catch_warnings():
            # the mapping is read-only, and only read here
            warnings.simplefilter("ignore", UserWarning)
            t = torch.frombuffer(view, dtype=torch.uint8,
                                 count=layer.nbytes, offset=layer.offset)
        return t.view(layer.kv.dtype).view(layer.shape)

    def _copy_in(self, ld: _Loads) -> None:
        """The copier: layer by layer, every mapped block into its vLLM
        block; each layer's event set once it is in place."""
        try:
            for layer in self.layers:
                gi = self.group_of[layer.name]
                if self.cuda:
                    self._copy_layer_cuda(ld, layer, gi)
                else:
                    for mapped, ids, g in ld.maps:
                        if g != gi:
                            continue
                        for j, bid in enumerate(ids):
                            layer.block(bid).copy_(self._src(mapped[j],
                                                             layer))
                ev = ld.events.get(layer.name)
                if ev is not None:     # none for a background load
                    ev.set()
        except BaseException as e:  # noqa: BLE001 - reported, not raised
            ld.error = e
            for ev in ld.events.values():
                ev.set()
        finally:
            ld.t1 = time.perf_counter()

    def _copy_layer_cuda(self, ld: _Loads, layer: Layer, gi: int) -> None:
        # GPU path: untested here (no GPU in CI); Documentation/userspace-api/vllm.md.
        cudart = torch.cuda.cudart()
        with torch.cuda.stream(self._stream):
            for mapped, ids, g in ld.maps:
                if g != gi:
                    continue
                for j, bid in enumerate(ids):
                    src = self._src(mapped[j], layer)
                    addr = src.data_ptr() - layer.offset
                    if addr not in self._registered:
                        # Once per pool block: the driver pins it for
                        # async DMA. The mapping is read-only
                        # (cudaHostRegisterReadOnly, 0x08).
                        err = cudart.cudaHostRegister(
                            addr, self.group_bytes[gi], 0x08)
                        if int(err) != 0:
                            raise RuntimeError(f"cudaHostRegister: {err}")
                        self._registered.add(addr)
                    layer.block(bid).copy_(src, non_blocking=True)
            ev = torch.cuda.Event()
            ev.record(self._stream)
        ev.synchronize()

    def wait_for_layer(self, name: str) -> None:
        ld = self._loads
        if ld is None:
            return
        ev = ld.events.get(name)
        if ev is None or ev.is_set():
            return
        t = time.perf_counter()
        ev.wait()
        self._load_wait += time.perf_counter() - t

    def _settle(self, ld: _Loads) -> set[int]:
        """After a _Loads' copier: count it, release its mappings; the
        blocks vLLM must recompute (all of a copy that failed half-way:
        every block of it is suspect)."""
        n = sum(len(ids) for _, ids, _ in ld.maps)
        bad = set(ld.failed_ids)
        if ld.error is not None:
            self.session.note_failure("copying loaded blocks", ld.error)
            for _, ids, _ in ld.maps:
                bad.update(ids)
        with self._store_cv:
            if ld.error is not None:
                self.failed_blocks += n
                self._stats["load_failed_blocks"] += n
            else:
                self.loaded_blocks += n
                self._report.loads.append((ld.tier_bytes, ld.t1 - ld.t0))
                self._stats["load_blocks"] += n
                self._stats["load_bytes"] += sum(ld.tier_bytes.values())
                secs = self._stats["load_seconds"]
                secs.append(ld.t1 - ld.t0)
                del secs[:-stats.SERIES_MAX]
        for mapped, _, _ in ld.maps:
            try:
                mapped.release()
            except (BufferError, OSError):
                pass            # released with the client at the latest
        return bad

    def _finish_loads(self) -> None:
        ld, self._loads = self._loads, None
        if ld is None:
            return
        t = time.perf_counter()
        if ld.thread is not None:
            ld.thread.join()
        self._load_wait += time.perf_counter() - t
        bad = self._settle(ld) - ld.failed_ids     # those said at _map
        with self._store_cv:
            self._errors |= bad

    # -- saves ------------------------------------------------------------------

    def wait_for_save(self) -> None:
        self._finish_loads()
        meta, self._meta = self._meta, None
        if meta is None:
            return
        if self.cuda:
            # the forward pass ran asynchronously: time its end
            torch.cuda.current_stream().synchronize()
        secs = time.perf_counter() - self._step_t0 - self._load_wait
        if meta.tokens and secs > 0:
            with self._store_cv:
                self._report.forwards.append((meta.tokens, secs))
        if meta.saves and self.layers and not self.session.disabled:
            for op in meta.saves:
                self._save(op)

    def _save(self, op: Any) -> None:
        keys = op.keys.get(self.rank)
        if not keys or len(keys) != len(op.block_ids):
            return
        if self.ident.groups[op.group].replicated and self.rank[0] != 0:
            return              # tensor-parallel rank 0 stores it for all
        n = len(keys)
        gi = op.group
        bb = self.group_bytes[gi]
        staging = torch.empty(n * bb, dtype=torch.uint8)
        for layer in self.group_layers[gi]:
            for j, bid in enumerate(op.block_ids):
                o = j * bb + layer.offset
                dst = staging[o:o + layer.nbytes].view(layer.kv.dtype)
                dst.view(layer.shape).copy_(layer.block(bid))
        buf = staging.numpy()
        if not op.chained:
            # Each block a chain of its own: nothing to order.
            for j, k in enumerate(keys):
                self._tag += 1
                self._submit(_Store(self._tag, op.req_id, op.lora, op.salt,
                                    [k], None, buf[j * bb:(j + 1) * bb], gi,
                                    chained=False, op_id=op.op_id, first=j))
            return
        self._tag += 1
        st = _Store(self._tag, op.req_id, op.lora, op.salt, keys,
                    op.parent.get(self.rank), buf, gi, op_id=op.op_id)
        # A request's stores go one at a time, in order: each continues
        # the chain of the one before, which kvcached must hold first.
        with self._store_cv:
            if op.req_id in self._busy:
                self._waiting.setdefault(op.req_id, deque()).append(st)
                return
        self._submit(st)

    def _submit(self, st: _Store) -> None:
        def submit() -> bool:
            self._ns(st.lora, st.salt, st.group).store_async(
                st.keys, st.buf, tag=st.tag, parent=st.parent)
            return True

        with self._store_cv:
            # Queued, not done: only its completion says kvcached
            # served it.
            if self.session.call("storing blocks", submit, False,
                                 remote=False):
                self._stores[st.tag] = st
                if st.chained:
                    self._busy.add(st.req_id)
                self._start_reaper()
            elif st.chained:
                # the rest of its chain has no parent in kvcached now
                self._waiting.pop(st.req_id, None)
                self._busy.discard(st.req_id)
            self._store_cv.notify_all()

    def _start_reaper(self) -> None:
        if self._reaper is None or not self._reaper.is_alive():
            self._reaper = threading.Thread(target=self._reap_loop,
                                            name="kvcache-store",
                                            daemon=True)
            self._reaper.start()

    def _reap_loop(self) -> None:
        """The store reaper: collects completions as they come, also while
        the engine is idle, and submits each request's next store."""
        while True:
            with self._store_cv:
                while not self._stores and not self._stopping:
                    self._store_cv.wait()
                if not self._stores:
                    return
                c = self.session._client
            if c is None:
                with self._store_cv:
                    self._stores.clear()
                    self._waiting.clear()
                    self._busy.clear()
                    self._store_cv.notify_all()
                continue
            try:
                done = c.poll(max=64, timeout_ms=100)
            except (OSError, ValueError) as e:
                self.session.note_failure("collecting stores", e)
                time.sleep(0.1)
                continue
            for comp in done:
                self._completed(comp)

    def _completed(self, comp: Any) -> None:
        with self._store_cv:
            st = self._stores.pop(comp.tag, None)
            if st is None:
                return
            nxt = None
            if not st.chained:
                pass            # in no request's queue
            elif comp.result < 0 or comp.result < len(st.keys):
                # failed, or declined (no room, not admitted): the rest
                # of the chain would have no parent
                self._waiting.pop(st.req_id, None)
            else:
                q = self._waiting.get(st.req_id)
                if q:
                    nxt = q.popleft()
                    if not q:
                        del self._waiting[st.req_id]
            if nxt is None and st.chained:
                # else it stays busy until nxt is in: a store the engine
                # adds meanwhile must queue behind nxt, not pass it
                self._busy.discard(st.req_id)
            self._store_cv.notify_all()
        with self._store_cv:
            if comp.result < 0 or comp.result < len(st.keys):
                self._stats["store_failures"] += 1
            if comp.result > 0:
                self._stats["stored_blocks"] += comp.result
            if self.rank == (0, 0):
                # The scheduler's events follow one rank's stores.
                self._stored.append((st.op_id, st.first,
                                     max(min(comp.result, len(st.keys)),
                                         0)))
        if comp.result < 0:
            self.session.note_failure("storing blocks", comp.error())
        else:
            self.saved_blocks += comp.result
            self.session._recovered("storing blocks")
        if nxt is not None:
            self._submit(nxt)

    def drain(self, timeout_s: float) -> bool:
        """Wait until every store was collected, up to timeout_s."""
        deadline = time.monotonic() + timeout_s
        with self._store_cv:
            while self._stores or self._waiting:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._store_cv.wait(min(left, 0.1))
        return True

    # -- reports ----------------------------------------------------------------

    def take_stats(self) -> "stats.Stats":
        """What this worker did since vLLM last asked (stats.py)."""
        with self._store_cv:
            out, self._stats = self._stats, stats.empty()
            out["store_backlog_blocks"] = \
                sum(len(st.keys) for st in self._stores.values()) + \
                sum(len(st.keys) for q in self._waiting.values()
                    for st in q)
        out["load_seconds"] = out["load_seconds"][-stats.SERIES_MAX:]
        return stats.Stats(out)

    def load_errors(self) -> set[int]:
        with self._store_cv:
            out, self._errors = self._errors, set()
        return out

    def report(self) -> WorkerReport | None:
        with self._store_cv:
            rep = self._report
            rep.stored, self._stored = self._stored, []
            if not rep.loads and not rep.forwards and not rep.stored:
                return None
            self._report = WorkerReport()
        return rep

    def shutdown(self) -> None:
        self._finish_loads()
        with self._store_cv:
            threads = list(self._bg_threads)
        for t in threads:
            t.join(30.0)
        ok = self.drain(30.0)
        with self._store_cv:
            self._stopping = True
            self._store_cv.notify_all()
        if not ok:
            self.log.warning("kvcache: %d stores still pending at "
                             "shutdown", len(self._stores) +
                             sum(len(q) for q in self._waiting.values()))
        self.log.info("kvcache: worker rank %s: %d blocks loaded, %d "
                      "failed to load, %d stored", self.rank,
                      self.loaded_blocks, self.failed_blocks,
                      self.saved_blocks)
        self.session.close()


__all__ = ["WorkerSide", "wait_for_saves", "Disabled"]
