# SPDX-License-Identifier: GPL-2.0
"""kvcached's KV events ([events] endpoint), read as a cache-aware router
reads vLLM's: a ZeroMQ SUB socket, each message decoded with vLLM's own
KVEventBatch (vllm.distributed.kv_events). Every block stored is a
BlockStored in "CPU" (the pool) and, written through, in "STORAGE" (g3,
locality LOCAL), with its key as the hash and its parent's key as the
parent; a flush of the pool is a BlockRemoved in "CPU" for each, the g3
copies stay; the sequence numbers count up by one. Off by default; only
the namespaces [events] namespaces lists are published; tcp:// takes only
the CURVE keys of curve_clients."""

from __future__ import annotations

import socket
import time
from typing import Any

import msgspec
import pytest
import zmq

from conftest import Daemon, REPO  # noqa: F401

import kvcache
from vllm.distributed.kv_events import (AllBlocksCleared, BlockRemoved,
                                        BlockStored, KVEventBatch)

IDENTITY = dict(model="kvcache-events/model", weights_revision="r1",
                tokenizer="tok-1", kv_layout="paged-nhd", kv_dtype="bf16",
                tokens_per_block=16)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Router:
    """A subscriber, as vLLM's examples/online_serving/kv_events_subscriber
    is: topic, 8-byte big-endian sequence number, msgpack batch."""

    def __init__(self, endpoint: str) -> None:
        self.ctx = zmq.Context()
        self.sub = self.ctx.socket(zmq.SUB)
        self.sub.setsockopt(zmq.SUBSCRIBE, b"")
        self.sub.connect(endpoint)
        self.decoder = msgspec.msgpack.Decoder(type=KVEventBatch)
        self.seqs: list[int] = []
        self.topics: set[bytes] = set()
        self.events: list[Any] = []

    def drain(self, until, timeout: float = 20.0) -> None:
        """Receive until until(events) holds (or fail after timeout)."""
        end = time.monotonic() + timeout
        while not until(self.events):
            left = end - time.monotonic()
            assert left > 0, f"events so far: {self.events!r}"
            if not self.sub.poll(int(min(left, 0.5) * 1000)):
                continue
            topic, seq, payload = self.sub.recv_multipart()
            self.topics.add(topic)
            self.seqs.append(int.from_bytes(seq, "big"))
            batch = self.decoder.decode(payload)
            assert abs(batch.ts - time.time()) < 60
            self.events.extend(batch.events)

    def close(self) -> None:
        self.sub.close(0)
        self.ctx.term()


def counters(d: Daemon) -> dict[str, int]:
    """kvcached's STATS (kvcachectl stats)."""
    return {f[0]: int(f[1]) for f in
            (line.split() for line in d.ctl("stats").splitlines())
            if len(f) >= 2 and f[1].isdigit()}


def of(events: list[Any], cls: type, medium: str) -> list[Any]:
    return [e for e in events if isinstance(e, cls) and e.medium == medium]


@pytest.fixture
def published() -> Any:
    # Namespace 1 (the first new_ns()) is published, 2 is not.
    d = Daemon(g3=True)
    endpoint = f"ipc://{d.dir / 'events.sock'}"
    with open(d.conf, "a") as f:
        f.write(f"[events]\nendpoint = {endpoint}\ntopic = node-a\n"
                "namespaces = 1\n")
    # The router is there first: a SUB connects (and reconnects) to an
    # endpoint before its PUB binds.
    r = Router(endpoint)
    try:
        d.start()
        yield d, r
    finally:
        d.cleanup()
        r.close()


def test_stored_and_removed_in_vllm_format(published) -> None:
    d, r = published
    ns_id = d.new_ns()
    time.sleep(0.5)         # the subscription reaches the PUB socket
    with kvcache.Client(socket=d.sock) as c:
        ns = c.namespace(ns_id, **IDENTITY, block_bytes=4096)
        keys = ns.keys(list(range(1, 16 * 6 + 1)))
        assert len(keys) == 6
        assert ns.store(keys, [bytes([i]) * 4096 for i in range(6)]) == 6

        r.drain(lambda ev: len(of(ev, BlockStored, "CPU")) >= 6 and
                len(of(ev, BlockStored, "STORAGE")) >= 6)
        for medium in ("CPU", "STORAGE"):
            stored = of(r.events, BlockStored, medium)
            # Each block with its parent; spills complete in any order.
            assert all(len(e.block_hashes) == 1 for e in stored)
            assert {e.block_hashes[0]: e.parent_block_hash
                    for e in stored} == dict(zip(keys, [None] + keys[:-1]))
            assert len(stored) == 6
            assert all(e.token_ids == [] and e.lora_id is None and
                       e.locality == "LOCAL" for e in stored)
        assert r.topics == {b"node-a"}

        d.ctl("flush", str(ns_id), "pool")
        r.drain(lambda ev: len(of(ev, BlockRemoved, "CPU")) >= 6)
        removed = of(r.events, BlockRemoved, "CPU")
        assert sorted(h for e in removed for h in e.block_hashes) == \
            sorted(keys)
        assert not of(r.events, BlockRemoved, "STORAGE")
        # What is still there: served from g3, and published again as it
        # comes back up into the pool.
        assert ns.load(keys) == [bytes([i]) * 4096 for i in range(6)]
        r.drain(lambda ev: len(of(ev, BlockStored, "CPU")) >= 12)
    assert not [e for e in r.events if isinstance(e, AllBlocksCleared)
                and r.events.index(e) > 0]
    assert r.seqs == list(range(r.seqs[0], r.seqs[0] + len(r.seqs)))
    stats = counters(d)
    assert stats["events_sent"] >= len(r.seqs)
    assert stats["events_dropped"] == 0


def test_unlisted_namespace_not_published(published) -> None:
    d, r = published
    listed, unlisted = d.new_ns(), d.new_ns()
    time.sleep(0.5)         # the subscription reaches the PUB socket
    with kvcache.Client(socket=d.sock) as c:
        hidden = c.namespace(unlisted, **IDENTITY, block_bytes=4096)
        shown = c.namespace(listed, **IDENTITY, block_bytes=4096)
        hkeys = hidden.keys(list(range(1, 16 * 3 + 1)))
        skeys = shown.keys(list(range(1, 16 * 3 + 1)))
        assert hidden.store(hkeys, [b"h" * 4096] * 3) == 3
        assert shown.store(skeys, [b"s" * 4096] * 3) == 3
        r.drain(lambda ev: len(of(ev, BlockStored, "CPU")) >= 3)
        time.sleep(0.3)
        r.drain(lambda ev: True)
    seen = {h for e in r.events if isinstance(e, BlockStored)
            for h in e.block_hashes}
    assert set(skeys) <= seen
    assert not set(hkeys) & seen


def test_tcp_admits_listed_curve_keys_only(tmp_path) -> None:
    if not zmq.has("curve"):
        pytest.skip("pyzmq without CURVE")
    spub, ssec = zmq.curve_keypair()
    apub, asec = zmq.curve_keypair()
    bpub, bsec = zmq.curve_keypair()
    (tmp_path / "server.key").write_bytes(ssec + b"\n")
    (tmp_path / "server.key").chmod(0o600)
    (tmp_path / "clients").write_bytes(b"# router a\n" + apub + b"\n")
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    routers = []
    for pub, sec in ((apub, asec), (bpub, bsec)):
        r = Router.__new__(Router)
        r.ctx = zmq.Context()
        r.sub = r.ctx.socket(zmq.SUB)
        r.sub.curve_serverkey = spub
        r.sub.curve_publickey, r.sub.curve_secretkey = pub, sec
        r.sub.setsockopt(zmq.SUBSCRIBE, b"")
        r.sub.connect(endpoint)
        r.decoder = msgspec.msgpack.Decoder(type=KVEventBatch)
        r.seqs, r.topics, r.events = [], set(), []
        routers.append(r)
    d = Daemon(extra_conf="[events]\n"
               f"endpoint = {endpoint}\nnamespaces = 1\n"
               f"curve_secret_key = {tmp_path / 'server.key'}\n"
               f"curve_clients = {tmp_path / 'clients'}\n")
    try:
        d.start()
        ns_id = d.new_ns()
        time.sleep(0.5)
        with kvcache.Client(socket=d.sock) as c:
            ns = c.namespace(ns_id, **IDENTITY, block_bytes=4096)
            keys = ns.keys(list(range(1, 16 * 2 + 1)))
            assert ns.store(keys, [b"k" * 4096] * 2) == 2
        a, b = routers
        a.drain(lambda ev: len(of(ev, BlockStored, "CPU")) >= 2)
        assert not b.sub.poll(500)
        assert "not in curve_clients" in d.log()
    finally:
        d.cleanup()
        for r in routers:
            r.close()


def test_off_by_default() -> None:
    d = Daemon()
    try:
        d.start()
        assert "KV events" not in d.log()
        assert counters(d)["events_sent"] == 0
    finally:
        d.cleanup()


@pytest.mark.parametrize("endpoint", ["udp://1.2.3.4:5", "tcp://127.0.0.1",
                                      "tcp://127.0.0.1:0", "ipc://rel",
                                      # no CURVE: anyone could subscribe
                                      "tcp://127.0.0.1:5557"])
def test_bad_endpoint_refused(endpoint: str) -> None:
    d = Daemon(extra_conf=f"[events]\nendpoint = {endpoint}\n")
    try:
        with pytest.raises(RuntimeError):
            d.start(timeout=5)
        assert "endpoint" in d.log()
    finally:
        d.cleanup()


# ---- the connector's events, in vLLM's own feed ----------------------------------

def test_connector_blocks_in_vllms_own_events(daemon, engines) -> None:
    """With vLLM's KV events on, a router reading vLLM's feed sees
    kvcache's blocks with no code of kvcache's: BlockStored in medium
    "CPU" with group_idx, in vLLM's own hash space (the same hashes as
    vLLM's GPU events for those blocks), once kvcached took them; and
    BlockRemoved when a lookup no longer finds them (a flush here)."""
    from vllm.config import KVEventsConfig

    from conftest import BS, Engine, ktc, model_dir, tokens
    import kvcache.vllm

    endpoint = f"tcp://127.0.0.1:{free_port()}"
    r = Router(endpoint)
    ns = daemon.new_ns()
    try:
        e = Engine(model_dir("small"), ktc(daemon.sock, ns),
                   kv_events_config=KVEventsConfig(
                       enable_kv_cache_events=True, publisher="zmq",
                       endpoint=endpoint.replace("127.0.0.1", "*"),
                       topic="kv"))
        engines.append(e)
        a = tokens(61, 6 * BS + 40)             # 7 full blocks
        e.run([a], cache_salt="tenant-a")
        assert kvcache.vllm.wait_for_saves(30)
        # The completions reach the scheduler with a later step.
        e.run([tokens(62, 40)])
        r.drain(lambda ev: sum(len(x.block_hashes) for x in
                               of(ev, BlockStored, "CPU")) >= 7)
        cpu = of(r.events, BlockStored, "CPU")
        gpu = of(r.events, BlockStored, "GPU")
        mine = [h for x in cpu for h in x.block_hashes]
        assert len(mine) == 7 and len(set(mine)) == 7
        assert set(mine) <= {h for x in gpu for h in x.block_hashes}
        assert all(x.group_idx == 0 and x.block_size == BS and
                   x.kv_cache_spec_kind == "full" for x in cpu)
        first = next(x for x in cpu if x.parent_block_hash is None)
        assert first.token_ids[:BS] == a[:BS]
        # The extra keys of each block (here the first one's cache_salt)
        # as vLLM's own event for it has them.
        def extras(evs):
            return {h: (x.extra_keys or [None] * len(x.block_hashes))[i]
                    for x in evs for i, h in enumerate(x.block_hashes)}
        gx = extras(gpu)
        assert {h: gx[h] for h in mine} == extras(cpu)
        assert extras(cpu)[first.block_hashes[0]] == ("tenant-a",)
        # Gone from kvcache: the next lookup of that prefix withdraws
        # what it no longer finds.
        daemon.ctl("flush", str(ns), "pool")
        e.fresh()
        e.run([a[:6 * BS] + tokens(63, 50)], cache_salt="tenant-a")
        r.drain(lambda ev: of(ev, BlockRemoved, "CPU"))
        gone = [h for x in of(r.events, BlockRemoved, "CPU")
                for h in x.block_hashes]
        assert gone and set(gone) <= set(mine), (gone, mine)
        assert all(x.group_idx == 0
                   for x in of(r.events, BlockRemoved, "CPU"))
    finally:
        r.close()
