# SPDX-License-Identifier: GPL-2.0
"""One side's link to kvcached: the client, its namespaces, and what
happens when kvcached is absent, restarts or refuses us.

The connector must never take the engine down: every call to kvcached
goes through Session.call(), which turns a failure into "no cache for
this call" and logs it once (the first failure of an outage at WARNING,
the rest at DEBUG, recovery once at INFO; one outage for the process,
whichever side sees it). An absent kvcached is tried
again every retry_interval_s; a kvcached of a protocol we do not speak,
a namespace this engine may not read, or blocks larger than the pool's
disable the connector for good, with one ERROR line: those need an
operator.

Thread safety: a Session is used by the engine's thread and the
worker's copy and store threads; its state is under _lock, and
libkvcache's calls are themselves thread-safe.
"""

from __future__ import annotations

import errno
import logging
import threading
import time
from collections import OrderedDict
from typing import Callable, TypeVar

import kvcache

from .config import ConnectorConfig
from .identity import Identity

T = TypeVar("T")

# Errors that need an operator: stop trying.
_FATAL = {errno.EPROTONOSUPPORT, errno.EACCES, errno.EPERM}


class _Outage:
    """Whether kvcached is failing us, for the whole process: the
    scheduler and worker sides share it, so an outage is logged once
    however many calls (of either side) it fails."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.failing = False

    def fail(self) -> bool:
        """Note a failure; True when it starts an outage."""
        with self.lock:
            first, self.failing = not self.failing, True
            return first

    def ok(self) -> bool:
        """Note a success; True when it ends an outage."""
        with self.lock:
            was, self.failing = self.failing, False
            return was


_outage = _Outage()


class Disabled(Exception):
    """The connector is off (for good or until kvcached is back)."""


class Session:
    def __init__(self, cfg: ConnectorConfig, ident: Identity,
                 log: logging.Logger, side: str) -> None:
        self.cfg = cfg
        self.ident = ident
        self.log = log
        self.side = side
        self._lock = threading.Lock()
        self._client: kvcache.Client | None = None
        self._ns: OrderedDict[tuple, kvcache.Namespace] = OrderedDict()
        self._dead: str | None = None       # why disabled for good
        self._next_try = 0.0
        self.block_size = 0                 # the pool's, once connected
        self.errors = 0
        if cfg.library:
            kvcache.load_library(cfg.library)

    # -- state --------------------------------------------------------------

    @property
    def disabled(self) -> str | None:
        return self._dead

    def _disable(self, why: str) -> None:
        if self._dead is None:
            self._dead = why
            self.log.error("kvcache: connector disabled (%s): %s; vLLM "
                           "serves without it", self.side, why)
        self._drop()

    def _drop(self) -> None:
        for ns in self._ns.values():
            try:
                ns.close()
            except Exception:  # noqa: BLE001 - best effort on a dead link
                pass
        self._ns.clear()
        if self._client is not None:
            try:
                self._client.close()
            except Exception:  # noqa: BLE001
                pass
        self._client = None

    def note_failure(self, what: str, err: BaseException) -> None:
        """Count a failure; log it at WARNING only when it is the first
        since kvcached last served us (so an outage is said once), at
        DEBUG otherwise."""
        self.errors += 1
        first = _outage.fail()
        (self.log.warning if first else self.log.debug)(
            "kvcache: %s failed (%s): %s%s", what, self.side, err,
            "; vLLM recomputes what kvcache cannot serve until it is back"
            if first else "")

    def _recovered(self, what: str) -> None:
        if _outage.ok():
            self.log.info("kvcache: kvcached reachable again (%s, %s)",
                          self.side, what)

    # -- the client and namespaces -----------------------------------------

    def _connect(self) -> kvcache.Client:
        if self._dead is not None:
            raise Disabled(self._dead)
        if self._client is not None:
            return self._client
        now = time.monotonic()
        if now < self._next_try:
            raise Disabled("kvcached unreachable")
        self._next_try = now + self.cfg.retry_interval_s
        try:
            c = kvcache.Client(socket=self.cfg.resolved_socket(),
                               connections=self.cfg.connections,
                               timeout_ms=self.cfg.timeout_ms)
        except OSError as e:
            if getattr(e, "errno", None) in _FATAL:
                self._disable(f"kvcached refused this engine: {e}")
                raise Disabled(self._dead) from e
            self.note_failure("connecting to kvcached", e)
            raise Disabled("kvcached unreachable") from e
        info = c.info
        if self.ident.max_group_bytes > info.block_size:
            c.close()
            self._disable(f"a vLLM block holds {self.ident.max_group_bytes} "
                          f"bytes of KV, more than kvcached's pool block "
                          f"({info.block_size}); raise the pool's "
                          f"block_size or lower vLLM's block_size")
            raise Disabled(self._dead)
        self.block_size = info.block_size
        self._client = c
        self.log.info("kvcache: connected to kvcached (%s, %s mode, pool "
                      "blocks of %d bytes, namespace %d)", self.side,
                      "kernel" if info.mode == kvcache.MODE_KERNEL
                      else "memfd", info.block_size, self.cfg.namespace)
        return c

    def namespace(self, tp_rank: int, pp_rank: int, lora: str,
                  salt: bytes, block_bytes: int,
                  group: int = 0) -> kvcache.Namespace:
        """The namespace of this identity and KV cache group (opened on
        first use)."""
        key = (tp_rank, pp_rank, lora, salt, block_bytes, group)
        with self._lock:
            ns = self._ns.get(key)
            if ns is not None:
                self._ns.move_to_end(key)
                return ns
            c = self._connect()
            try:
                ns = c.namespace(self.cfg.namespace,
                                 **self.ident.args(tp_rank, pp_rank, lora,
                                                   salt, group),
                                 block_bytes=block_bytes,
                                 ns_salt=self.cfg.namespace_salt)
            except OSError as e:
                if getattr(e, "errno", None) in _FATAL:
                    self._disable(f"namespace {self.cfg.namespace}: {e} "
                                  f"(the engine's user may not read it, "
                                  f"or kvcached is too old)")
                    raise Disabled(self._dead) from e
                raise
            self._ns[key] = ns
            # at least one per rank of the scheduler's lookups
            room = max(self.cfg.max_open_namespaces,
                       self.ident.tp_size * self.ident.pp_size *
                       max(len(self.ident.groups), 1))
            while len(self._ns) > room:
                _, old = self._ns.popitem(last=False)
                old.close()
            return ns

    def call(self, what: str, fn: Callable[[], T], default: T,
             remote: bool = True) -> T:
        """fn(), or default when kvcached cannot serve it (logged once).
        remote=False: fn may not talk to kvcached (key derivation), so
        its success says nothing of kvcached's health."""
        try:
            out = fn()
        except Disabled:
            return default
        except OSError as e:
            # The library reconnects by itself after a restart, and a
            # namespace stays valid across one (its salt is kept in
            # kvcached's state), so the next call simply tries again.
            self.note_failure(what, e)
            return default
        except Exception as e:  # noqa: BLE001 - the engine must go on
            self.note_failure(what, e)
            return default
        if remote:
            self._recovered(what)
        return out

    def close(self) -> None:
        with self._lock:
            self._drop()
