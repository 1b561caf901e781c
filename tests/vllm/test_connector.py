# SPDX-License-Identifier: GPL-2.0
"""The vLLM connector (kvcache.vllm) inside real vLLM, against real
kvcached daemons: outputs identical with and without it, hits counted by
vLLM's own metrics, sharing between processes and across a restart,
identity, failures, and the load-or-recompute rule."""

from __future__ import annotations

import errno
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from conftest import (BS, HERE, REPO, Engine, corrupt_g3, ktc, model_dir,
                      tokens)

def _stat(d: Any, name: str) -> int:
    """One of kvcached's counters (kvcachectl stats)."""
    for line in d.ctl("stats").splitlines():
        f = line.split()
        if len(f) >= 2 and f[0] == name:
            return int(f[1])
    raise KeyError(name)


def wait_stat(d: Any, name: str, at_least: int, timeout: float = 20.0
              ) -> bool:
    """Wait until kvcached's counter reaches at_least."""
    end = time.monotonic() + timeout
    while _stat(d, name) < at_least:
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


def delta(after: dict[str, float], before: dict[str, float],
          name: str) -> float:
    return after.get(name, 0) - before.get(name, 0)


# ---- outputs and hits ---------------------------------------------------------

@pytest.mark.parametrize("shape", ["small", "other"])
def test_outputs_identical_local_external_and_new(baseline, shape, daemon, engines):
    """Greedy outputs equal an engine without kvcache, for a prompt that
    is a local hit, then an external hit, then new tokens; vLLM's own
    metrics count the external tokens, and the prefill skips them."""
    ns = daemon.new_ns()
    e = Engine(model_dir(shape), ktc(daemon.sock, ns))
    engines.append(e)
    doc = tokens(1, 8 * BS)                 # 8 blocks
    a = doc + tokens(2, 40)                 # stored: 9 full blocks
    b = doc[:3 * BS] + tokens(3, 50)        # local: doc's first 3 blocks
    c = a + tokens(4, 70)                   # 3 local + 6 external + new
    want = baseline(shape, [a, b, c])

    out_a = e.run([a])[0]
    assert out_a["tokens"] == want[0]
    e.fresh()                               # kvcache keeps a's blocks
    out_b = e.run([b])[0]                   # hits kvcache for 3 blocks
    assert out_b["tokens"] == want[1]
    assert out_b["cached"] == 3 * BS
    before = e.counters()
    out_c = e.run([c])[0]
    after = e.counters()
    assert out_c["tokens"] == want[2]
    # vLLM's prefix cache: b's 3 blocks; kvcache: a's blocks 3..8
    assert delta(after, before, "vllm:prefix_cache_hits") == 3 * BS
    assert delta(after, before, "vllm:external_prefix_cache_hits") == 6 * BS
    assert out_c["cached"] == 9 * BS        # the prefill skipped them


def test_figures_on_vllms_own_metrics(baseline, daemon, engines):
    """kvcache's series on vLLM's Prometheus registry (its /metrics),
    through vLLM's KVConnectorStats: hit tokens by tier equal vLLM's
    external hits, loads and stores counted, nothing left waiting."""
    ns = daemon.new_ns()
    e = Engine(model_dir("small"), ktc(daemon.sock, ns))
    engines.append(e)
    doc = tokens(51, 6 * BS)
    a = doc + tokens(52, 40)
    c = doc + tokens(53, 50)
    e.run([a])
    e.fresh()
    before = e.counters()
    e.run([c])
    e.run([tokens(54, 2 * BS)])     # one more step: the stats travel
    after = e.counters()
    ext = delta(after, before, "vllm:external_prefix_cache_hits")
    assert ext == 6 * BS
    assert delta(after, before, "vllm:kvcache_hit_tokens") == ext
    assert delta(after, before, "vllm:kvcache_load_blocks") == 6
    assert delta(after, before, "vllm:kvcache_load_bytes") > 0
    assert delta(after, before, "vllm:kvcache_lookups") == 2
    assert after.get("vllm:kvcache_stored_blocks", 0) >= 7
    assert after.get("vllm:kvcache_load_failed_blocks", 0) == 0
    assert after.get("vllm:kvcache_store_failures", 0) == 0
    assert "vllm:kvcache_load_seconds" in {m.name for m in
                                           e.llm.get_metrics()}


def test_stats_add_up_as_vllm_aggregates_them():
    """Counters add up over workers and steps, the backlog gauge keeps
    its largest value, the load-time series is capped, and what vLLM's
    logger rebuilds from the dict is the same."""
    from kvcache.vllm import stats
    from kvcache.vllm.connector import KvcacheConnector
    a = stats.Stats({"load_blocks": 3, "store_backlog_blocks": 5,
                     "load_seconds": [0.1] * 1000})
    b = stats.Stats({"load_blocks": 4, "store_backlog_blocks": 2,
                     "hit_tokens_g3": 64, "load_seconds": [0.2] * 100})
    c = a.aggregate(b)
    assert c.data["load_blocks"] == 7
    assert c.data["store_backlog_blocks"] == 5
    assert c.data["hit_tokens_g3"] == 64
    assert len(c.data["load_seconds"]) == stats.SERIES_MAX
    assert not c.is_empty() and stats.Stats().is_empty()
    r = c.reduce()
    assert r["load_blocks"] == 7 and 0.1 < r["load_seconds_avg"] < 0.2
    again = KvcacheConnector.build_kv_connector_stats(c.to_dict())
    assert again.data == c.data


def test_never_the_last_token(baseline, daemon, engines):
    """A prompt of whole blocks, all cached, still computes its last
    block's last token (its logits make the first output)."""
    ns = daemon.new_ns()
    e = Engine(model_dir("small"), ktc(daemon.sock, ns))
    engines.append(e)
    p = tokens(5, 4 * BS)
    want = baseline("small", [p])
    assert e.run([p])[0]["tokens"] == want[0]
    e.fresh()
    out = e.run([p])[0]
    assert out["tokens"] == want[0]
    assert out["cached"] == 3 * BS


def test_chunked_prefill_stores_the_chain_in_order(baseline, daemon,
                                                   engines):
    """A prompt prefilled over several steps (chunked prefill) stores a
    run of blocks per step, each continuing the last: all of it must be
    loadable afterwards."""
    ns = daemon.new_ns()
    e = Engine(model_dir("small"), ktc(daemon.sock, ns),
               max_num_batched_tokens=2 * BS, enable_chunked_prefill=True)
    engines.append(e)
    p = tokens(13, 10 * BS + 5)
    want = baseline("small", [p])
    assert e.run([p])[0]["tokens"] == want[0]
    # The engine is idle now: its queued stores still go out (the
    # worker's reaper submits each when the one before completes).
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if _stat(daemon, "index_keys") >= 10:
            break
        time.sleep(0.1)
    assert _stat(daemon, "index_keys") == 10
    e.fresh()
    out = e.run([p])[0]
    assert out["tokens"] == want[0]
    assert out["cached"] == 10 * BS


# A KV budget of PREEMPT_BLOCKS vLLM blocks of the "small" shape (2
# layers, 2 KV heads of 32, 16-bit: 16 KiB a block): less than the batch
# below needs as it decodes, so vLLM preempts and reuses blocks at once.
PREEMPT_BLOCKS = 20
PREEMPT_BUDGET = dict(max_model_len=8 * BS, max_num_seqs=4,
                      kv_cache_memory_bytes=PREEMPT_BLOCKS * 16 << 10)


def test_preemption_keeps_tokens_and_stored_blocks(baseline, daemon,
                                                   engines):
    """Four requests that outgrow the KV budget while they decode: vLLM
    preempts some, frees their blocks and gives them to others. Tokens
    equal vLLM's own under the same budget; a preempted request coming
    back may load what kvcache stored of it. Then every prompt's blocks
    load back from kvcache into the same tokens as vLLM's: no save read
    a block after vLLM had reused it."""
    ns = daemon.new_ns()
    ps = [tokens(90 + i, 3 * BS + 7) for i in range(4)]
    want = baseline("small", ps, max_tokens=4 * BS, **PREEMPT_BUDGET)
    e = Engine(model_dir("small"), ktc(daemon.sock, ns), **PREEMPT_BUDGET)
    engines.append(e)
    before = e.counters()
    out = e.run(ps, max_tokens=4 * BS)
    after = e.counters()
    assert [o["tokens"] for o in out] == want
    assert delta(after, before, "vllm:num_preemptions") > 0
    e.fresh()
    cs = [p[:3 * BS] + tokens(100 + i, 20) for i, p in enumerate(ps)]
    want = baseline("small", cs, max_tokens=8, **PREEMPT_BUDGET)
    before = e.counters()
    out = e.run(cs, max_tokens=8)
    after = e.counters()
    assert [o["tokens"] for o in out] == want
    assert delta(after, before, "vllm:external_prefix_cache_hits") == \
        4 * 3 * BS


def test_two_processes_share_and_g3_survives_a_restart(baseline, daemon_g3, tmp_path):
    """One vLLM process stores, another loads; after kvcached restarts
    (its DRAM pool gone) a third loads the blocks back from g3."""
    d = daemon_g3
    ns = d.new_ns()
    p = tokens(6, 6 * BS + 10)
    want = baseline("small", [p])[0]

    def run(tag: str) -> dict[str, Any]:
        out = tmp_path / f"{tag}.json"
        cmd = [sys.executable, str(HERE / "run_engine.py"),
               "--model", model_dir("small"), "--socket", d.sock,
               "--namespace", str(ns), "--prompt", json.dumps(p),
               "--out", str(out)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        return json.loads(out.read_text())

    first = run("store")
    assert first["tokens"] == want
    assert first["external_hits"] == 0
    second = run("load")
    assert second["tokens"] == want
    assert second["external_hits"] == 6 * BS
    d.restart()                     # the memfd pool starts empty
    third = run("after-restart")
    assert third["tokens"] == want
    assert third["external_hits"] == 6 * BS


# ---- identity -----------------------------------------------------------------

@pytest.mark.parametrize("what", ["revision", "dtype", "block_size",
                                  "cache_salt", "salt"])
def test_no_hit_when_identity_differs(what, daemon, engines):
    ns = daemon.new_ns()
    p = tokens(7, 4 * BS + 5)
    e = Engine(model_dir("small"), ktc(daemon.sock, ns))
    engines.append(e)
    e.run([p])
    e.fresh()
    # the control: the same engine hits
    assert e.run([p])[0]["cached"] == 4 * BS
    e.close()
    engines.remove(e)

    conf = ktc(daemon.sock, ns)
    kw: dict[str, Any] = {}
    salt = None
    if what == "revision":
        conf["kv_connector_extra_config"]["revision"] = "other-revision"
    elif what == "dtype":
        kw["dtype"] = "float32"
    elif what == "block_size":
        kw["block_size"] = 2 * BS
    elif what == "cache_salt":
        salt = "tenant-b"
    elif what == "salt":
        conf["kv_connector_extra_config"]["salt"] = "deployment-b"
    f = Engine(model_dir("small"), conf, **kw)
    engines.append(f)
    before = f.counters()
    out = f.run([p], cache_salt=salt)[0]
    assert delta(f.counters(), before,
                 "vllm:external_prefix_cache_hits") == 0
    assert out["cached"] == 0


# ---- failures -----------------------------------------------------------------

def test_kvcached_absent(baseline, tmp_path, engines, kvlog):
    """No daemon at the socket: outputs unchanged, said once."""
    e = Engine(model_dir("small"), ktc(str(tmp_path / "none.sock"), 1,
                                       retry_interval_s=0))
    engines.append(e)
    ps = [tokens(8, 3 * BS + 1), tokens(9, 2 * BS + 7)]
    want = baseline("small", ps)
    for _ in range(3):
        e.llm.reset_prefix_cache()
        assert [o["tokens"] for o in e.run(ps)] == want
    warns = [m for m in kvlog.at(30) if "kvcache" in m]
    assert len(warns) == 1, warns
    assert "connecting to kvcached" in warns[0]


def test_kvcached_killed_mid_run(baseline, daemon, engines, kvlog):
    """kvcached killed while requests run: outputs unchanged, said once;
    when it is back the connector uses it again."""
    ns = daemon.new_ns()
    e = Engine(model_dir("small"), ktc(daemon.sock, ns, retry_interval_s=0))
    engines.append(e)
    ps = [tokens(100 + i, 5 * BS + 3) for i in range(6)]
    want = baseline("small", ps)
    assert [o["tokens"] for o in e.run(ps)] == want
    e.fresh()
    killer = threading.Timer(0.05, daemon.kill)
    killer.start()
    got = [o["tokens"] for o in e.run(ps, max_tokens=6)]
    killer.join()
    assert got == want
    e.llm.reset_prefix_cache()
    assert [o["tokens"] for o in e.run(ps)] == want
    warns = [m for m in kvlog.at(30) if "kvcache" in m]
    assert len(warns) == 1, kvlog.dump()
    # back: stores and hits again (the memfd pool restarted empty)
    daemon.start()
    daemon.ctl("ns-create", str(ns), "0", "0", "700", check=False)
    e.llm.reset_prefix_cache()
    assert [o["tokens"] for o in e.run(ps[:1])] == want[:1]
    e.fresh()
    assert e.run(ps[:1])[0]["cached"] == 5 * BS
    assert any("reachable again" in m for m in kvlog.at(20))


def test_g3_file_corrupted(baseline, daemon_g3, engines, kvlog):
    """A g3 file whose payload was corrupted: kvcached's checksum refuses
    it, the connector reports the blocks, vLLM recomputes them."""
    d = daemon_g3
    ns = d.new_ns()
    p = tokens(10, 4 * BS + 9)
    want = baseline("small", [p])
    # No lookup on arrival: its read-up would find the corruption first
    # (a miss then), and this is about a load that fails.
    e = Engine(model_dir("small"), ktc(d.sock, ns, lookup_on_arrival=False))
    engines.append(e)
    assert e.run([p])[0]["tokens"] == want[0]
    e.fresh()
    d.stop()
    corrupt_g3(d)
    d.start()
    out = e.run([p])[0]
    assert out["tokens"] == want[0]
    assert _stat(d, "g3_corrupt") > 0
    said = [m for m in kvlog.at(30) if "could not be loaded" in m]
    assert len(said) == 1, kvlog.dump()
    # and again: recomputed, stored afresh, then loaded from the pool
    e.fresh()
    again = e.run([p])[0]
    assert again["tokens"] == want[0]
    assert again["cached"] == 4 * BS


@pytest.mark.parametrize("background", [True, False])
def test_g3_hit_loads_in_the_background(baseline, daemon_g3, engines,
                                        background):
    """A hit on g3 only (the pool flushed) is loaded outside the forward
    pass (vLLM's asynchronous loads): the request waits while another
    one decodes, its tokens and the other's equal vLLM's own, and the
    hit counts as external. background_loads false: the same inside the
    step."""
    d = daemon_g3
    ns = d.new_ns()
    # No lookup on arrival: it would read the blocks up into DRAM
    # before the request is scheduled (test_arrival_starts_the_promote).
    e = Engine(model_dir("small"), ktc(d.sock, ns,
                                       background_loads=background,
                                       lookup_on_arrival=False))
    engines.append(e)
    doc = tokens(71, 6 * BS)
    a = doc + tokens(72, 40)
    c = doc + tokens(73, 50)
    other = tokens(74, 3 * BS)
    want = baseline("small", [a, c, other], max_tokens=16)
    assert e.run([a], max_tokens=16)[0]["tokens"] == want[0]
    e.fresh()
    assert wait_stat(d, "g3_blocks", 7)
    d.ctl("flush", str(ns), "pool")
    before = e.counters()
    out = e.run([c, other], max_tokens=16)
    after = e.counters()
    assert [o["tokens"] for o in out] == want[1:]
    assert delta(after, before, "vllm:external_prefix_cache_hits") == 6 * BS
    assert delta(after, before, "vllm:kvcache_hit_tokens") == 6 * BS
    assert delta(after, before, "vllm:kvcache_background_loads") == \
        (1 if background else 0)
    assert delta(after, before, "vllm:kvcache_load_failed_blocks") == 0


def test_background_loads_do_not_wait_for_each_other(baseline, daemon_g3,
                                                     engines, monkeypatch):
    """Two requests scheduled in the same step, each with a g3 hit, load
    in the background side by side: with the first block read held for
    1.5 s (a slow disk: kvcached's tier_open hold), the request that did
    not get that block is ready and decodes while the other still waits,
    instead of both being released together. Tokens equal vLLM's."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    d = daemon_g3
    ns = d.new_ns()
    # No lookup on arrival: both hits must still be on g3 when scheduled.
    e = Engine(model_dir("small"), ktc(d.sock, ns, lookup_on_arrival=False))
    engines.append(e)
    docs = [tokens(81, 6 * BS), tokens(82, 3 * BS)]
    first = [docs[0] + tokens(83, 40), docs[1] + tokens(84, 40)]
    again = [docs[0] + tokens(85, 50), docs[1] + tokens(86, 50)]
    want = baseline("small", again, max_tokens=4)
    e.run(first)
    e.fresh()
    assert wait_stat(d, "g3_blocks", 7 + 4)
    d.stop()
    monkeypatch.setenv("KVCACHED_FAULT", "tier_open=hold,ms=1500,times=1")
    d.start()
    monkeypatch.delenv("KVCACHED_FAULT")
    assert "FAULT INJECTION ARMED" in d.log()
    eng = e.llm.llm_engine
    sp = SamplingParams(temperature=0, max_tokens=4, ignore_eos=True,
                        detokenize=False)
    before = e.counters()
    for i, p in enumerate(again):
        eng.add_request(str(i), TokensPrompt(prompt_token_ids=p), sp)
    step, t0 = 0, time.monotonic()
    token_at: dict[str, int] = {}       # request -> step of its 1st token
    got: dict[str, list[int]] = {}
    while eng.has_unfinished_requests():
        assert time.monotonic() - t0 < 60
        step += 1
        for o in eng.step():
            if o.outputs[0].token_ids:
                token_at.setdefault(o.request_id, step)
            if o.finished:
                got[o.request_id] = list(o.outputs[0].token_ids)
        time.sleep(0.005)
    after = e.counters()
    assert [got["0"], got["1"]] == want
    assert delta(after, before, "vllm:kvcache_background_loads") == 2
    assert delta(after, before, "vllm:external_prefix_cache_hits") == 9 * BS
    # One of them waited for the held read; the other did not wait for it.
    assert token_at["0"] != token_at["1"], token_at


def test_arrival_starts_the_promote(baseline, daemon_g3, engines):
    """on_new_request looks a request up as soon as vLLM has it: kvcached
    starts reading its g3 blocks into the pool then, before any step
    schedules it, and the step that does finds them in DRAM (a load
    inside the step, not a background one)."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    d = daemon_g3
    ns = d.new_ns()
    e = Engine(model_dir("small"), ktc(d.sock, ns))
    engines.append(e)
    doc = tokens(75, 6 * BS)
    a = doc + tokens(76, 40)
    c = doc + tokens(77, 50)
    want = baseline("small", [a, c])
    assert e.run([a])[0]["tokens"] == want[0]
    e.fresh()
    assert wait_stat(d, "g3_blocks", 7)
    d.ctl("flush", str(ns), "pool")
    promoted = _stat(d, "promotions")
    eng = e.llm.llm_engine
    before = e.counters()
    eng.add_request("c", TokensPrompt(prompt_token_ids=c), SamplingParams(
        temperature=0, max_tokens=6, ignore_eos=True, detokenize=False))
    # No step yet: the blocks come up from g3 all the same.
    assert wait_stat(d, "promotions", promoted + 6)
    done = None
    while eng.has_unfinished_requests():
        for o in eng.step():
            if o.finished:
                done = o
    after = e.counters()
    assert done is not None and list(done.outputs[0].token_ids) == want[1]
    assert delta(after, before, "vllm:external_prefix_cache_hits") == 6 * BS
    assert delta(after, before, "vllm:kvcache_background_loads") == 0


def test_unknown_key_refused_at_engine_start(daemon):
    with pytest.raises(Exception) as ei:
        Engine(model_dir("small"), ktc(daemon.sock, 1, namespce=3))
    assert "did you mean 'namespace'" in str(ei.value) or \
        "namespce" in repr(ei.value)


# ---- load or recompute --------------------------------------------------------

def test_slow_tier_claims_less(baseline, daemon, engines):
    """With figures that make loading slower than recomputing, cached
    blocks are not claimed; with the defaults they are."""
    ns = daemon.new_ns()
    p = tokens(11, 6 * BS + 2)
    want = baseline("small", [p])
    slow = Engine(model_dir("small"), ktc(
        daemon.sock, ns, measure=False, prefill_tokens_per_s=1e6,
        tier_bandwidth={"dram": 1e3, "g3": 1e3, "g4": 1e3}))
    engines.append(slow)
    assert slow.run([p])[0]["tokens"] == want[0]
    slow.fresh()
    before = slow.counters()
    out = slow.run([p])[0]
    assert out["tokens"] == want[0]
    assert delta(slow.counters(), before,
                 "vllm:external_prefix_cache_hits") == 0
    slow.close()
    engines.remove(slow)
    fast = Engine(model_dir("small"), ktc(daemon.sock, ns))
    engines.append(fast)
    assert fast.run([p])[0]["cached"] == 6 * BS


# ---- refused at the door --------------------------------------------------------

def _fake_kvcached(path: str) -> threading.Thread:
    """A server at path answering every message with kvcached's ERROR
    for "no common protocol version" (-EPROTONOSUPPORT), as a kvcached
    of another protocol generation does."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    srv.bind(path)
    srv.listen(8)

    def answer(c: socket.socket) -> None:
        with c:
            while True:
                m = c.recv(65536)
                if len(m) < 24:
                    return
                seq = struct.unpack_from("<I", m, 8)[0]
                msg = b"no common protocol version"
                body = struct.pack("<iIHH", -errno.EPROTONOSUPPORT, seq,
                                   struct.unpack_from("<H", m, 6)[0],
                                   len(msg)) + msg
                hdr = struct.pack("<IHHIIII", 0x5043564B, 1, 0x8000, seq,
                                  24 + len(body), 0, 0)
                c.send(hdr + body)

    def serve() -> None:
        with srv:
            while True:
                try:
                    c, _ = srv.accept()
                except OSError:
                    return
                threading.Thread(target=answer, args=(c,),
                                 daemon=True).start()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return t


def test_incompatible_protocol_disables_once(baseline, tmp_path, engines,
                                             kvlog):
    sock = str(tmp_path / "old.sock")
    _fake_kvcached(sock)
    e = Engine(model_dir("small"), ktc(sock, 1, retry_interval_s=0))
    engines.append(e)
    ps = [tokens(12, 3 * BS + 4)]
    want = baseline("small", ps)
    for _ in range(3):
        e.llm.reset_prefix_cache()
        assert [o["tokens"] for o in e.run(ps)] == want
    errs = [m for m in kvlog.at(40) if "kvcache" in m]
    # one line per side (scheduler, worker), each for good
    assert 1 <= len(errs) <= 2, errs
    assert all("disabled" in m for m in errs)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (ns-create, "
                    "a second uid)")
def test_refused_user_disables(daemon, tmp_path):
    """An engine whose user kvcached refuses: the connector turns itself
    off with one ERROR line, for good. A memfd-mode kvcached is one
    trust domain and refuses another uid at the door (EACCES); in kernel
    mode the same answer comes from NS_SALT for a namespace the user may
    not read, and takes the same path (Session.namespace). Run through
    the session in the Python every user can run (the venv is under
    /root)."""
    ns = daemon.new_ns(uid=0, gid=0, mode=0o700)
    code = f"""
import logging, sys
sys.path.insert(0, {str(REPO / 'helper' / 'python')!r})
import kvcache
kvcache.load_library({str(REPO / 'build' / 'lib' / 'libkvcache.so')!r})
from kvcache.vllm.config import parse
from kvcache.vllm.identity import Group, Identity
from kvcache.vllm.session import Disabled, Session
lines = []
class H(logging.Handler):
    def emit(self, r): lines.append((r.levelno, r.getMessage()))
log = logging.getLogger("t"); log.addHandler(H()); log.setLevel(1)
cfg = parse({{"socket": {daemon.sock!r}, "namespace": {ns}}})
ident = Identity("m", "r", "t@", "l", "d", 32, 1, 1,
                 (Group("full", 0, 0, ("l0", "l1"), 2048, "s"),))
s = Session(cfg, ident, log, "scheduler")
for _ in range(3):
    try:
        s.namespace(0, 0, "", b"", 4096)
        print("OPENED"); sys.exit(1)
    except Disabled:
        pass
errs = [m for l, m in lines if l >= 40]
print(len(errs), errs[0] if errs else "")
"""
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534",
                        "--clear-groups", "/usr/bin/python3", "-c", code],
                       capture_output=True, text=True, timeout=60,
                       cwd="/tmp")
    assert r.returncode == 0, r.stdout + r.stderr
    n, _, msg = r.stdout.strip().partition(" ")
    assert n == "1", r.stdout
    assert "disabled" in msg and "permission denied" in msg, msg
