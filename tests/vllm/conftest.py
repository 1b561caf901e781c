# SPDX-License-Identifier: GPL-2.0
"""Fixtures of the vLLM connector's tests: real vLLM (CPU build, in this
process: VLLM_ENABLE_V1_MULTIPROCESSING=0), random-weight models built
locally (tiny_model.py), and real kvcached daemons in memfd mode
(tests/python/conftest.py's Daemon).

Run with the venv's python (make vllm-check; scripts/vllm-env makes it).
"""

from __future__ import annotations

import json
import logging
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
os.environ.setdefault("DO_NOT_TRACK", "1")

import pytest  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
# This tree's kvcache package, whatever the shared venv's editable
# install points at (another checkout may have run scripts/vllm-env).
sys.path.insert(0, str(REPO / "helper" / "python"))


def _python_fixtures():
    """tests/python/conftest.py (its Daemon), under a name of its own."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "kvc_python_fixtures", REPO / "tests" / "python" / "conftest.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


Daemon = _python_fixtures().Daemon
import tiny_model  # noqa: E402

MODELS = Path(os.environ.get("KVC_VLLM_MODELS") or
              Path.home() / ".cache" / "kvcache" / "models")

# Two shapes: layers, KV heads and head size all differ.
SHAPES = {
    "small": tiny_model.Shape(hidden=128, layers=2, heads=4, kv_heads=2,
                              head_dim=32, intermediate=256),
    "other": tiny_model.Shape(hidden=192, layers=3, heads=6, kv_heads=3,
                              head_dim=64, intermediate=384),
}
BS = 32                         # vLLM's block size (CPU: a multiple of 32)
POOL_BLOCK = 1 << 20            # kvcached's pool block (>= a vLLM block)


def model_dir(name: str) -> str:
    """A Llama shape of SHAPES, a family of tiny_model.FAMILIES, or the
    vision-language model (tiny_model.build_vlm)."""
    if name == "idefics3":
        return str(tiny_model.build_vlm(MODELS))
    if name in tiny_model.FAMILIES:
        return str(tiny_model.build_family(MODELS, name))
    return str(tiny_model.build(MODELS, SHAPES[name]))


def image(rgb: list[int]) -> Any:
    """A solid-colour image of the VLM's size (tiny_model.VLM_IMAGE)."""
    from PIL import Image
    return Image.new("RGB", (tiny_model.VLM_IMAGE, tiny_model.VLM_IMAGE),
                     tuple(rgb))


def corrupt_g3(d: Daemon) -> None:
    """With d stopped: one byte of every g3 block file's payload
    flipped, so kvcached's checksum refuses each at its next read."""
    files = [f for f in Path(d.g3).rglob("*") if f.is_file() and
             f.stat().st_size > 4096]
    assert files, "nothing reached g3"
    for f in files:
        with open(f, "r+b") as fh:
            fh.seek(f.stat().st_size - 100)
            b = fh.read(1)
            fh.seek(-1, 1)
            fh.write(bytes([b[0] ^ 0xff]))


def tokens(seed: int, n: int) -> list[int]:
    r = random.Random(seed)
    return [r.randrange(1, 4000) for _ in range(n)]


def make_daemon(g3: bool = False) -> Daemon:
    d = Daemon(g3=g3, pool_size=128 << 20)
    conf = d.conf.read_text().replace("block_size = 64K",
                                      f"block_size = {POOL_BLOCK >> 10}K")
    d.conf.write_text(conf)
    return d.start()


@pytest.fixture
def daemon() -> Iterator[Daemon]:
    d = make_daemon()
    try:
        yield d
    finally:
        d.cleanup()


@pytest.fixture
def daemon_g3() -> Iterator[Daemon]:
    d = make_daemon(g3=True)
    try:
        yield d
    finally:
        d.cleanup()


def ktc(sock: str, ns: int, **extra: Any) -> dict[str, Any]:
    return {"kv_connector": "KvcacheConnector",
            "kv_connector_module_path": "kvcache.vllm",
            "kv_role": "kv_both",
            "kv_connector_extra_config": {"socket": sock, "namespace": ns,
                                          **extra}}


class Engine:
    """One in-process vLLM engine and the counters the tests read."""

    def __init__(self, model: str, kv_transfer_config: dict | None = None,
                 **kw: Any) -> None:
        from vllm import LLM
        args = dict(model=model, skip_tokenizer_init=True, block_size=BS,
                    max_model_len=4096, kv_cache_memory_bytes=32 << 20,
                    enforce_eager=True, disable_log_stats=False, seed=0)
        args.update(kw)
        self.llm = LLM(kv_transfer_config=kv_transfer_config, **args)

    def run(self, prompts: list[list[int]], max_tokens: int = 6,
            cache_salt: str | None = None) -> list[dict[str, Any]]:
        """Greedy outputs, and each request's cached-token count."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt
        sp = SamplingParams(temperature=0, max_tokens=max_tokens,
                            ignore_eos=True, detokenize=False)
        ps = []
        for p in prompts:
            if isinstance(p, dict):
                # A multimodal prompt: token ids with one image
                # placeholder id, and the image as a solid colour.
                tp = TokensPrompt(prompt_token_ids=p["ids"],
                                  multi_modal_data={"image": image(
                                      p["image"])})
            else:
                tp = TokensPrompt(prompt_token_ids=p)
            if cache_salt is not None:
                tp["cache_salt"] = cache_salt
            ps.append(tp)
        outs = self.llm.generate(ps, sp, use_tqdm=False)
        return [{"tokens": list(o.outputs[0].token_ids),
                 "cached": o.num_cached_tokens or 0} for o in outs]

    def counters(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for m in self.llm.get_metrics():
            v = getattr(m, "value", None)
            if isinstance(v, (int, float)):
                out[m.name] = out.get(m.name, 0) + v
        return out

    def fresh(self) -> None:
        """Forget vLLM's own prefix cache (kvcache keeps its blocks)."""
        import kvcache.vllm
        assert kvcache.vllm.wait_for_saves(30)
        assert self.llm.reset_prefix_cache()

    def close(self) -> None:
        """Shut the engine down, its connector too: vLLM keeps a worker's
        connector in a process-wide global, so in-process engines must
        run one after the other, each closed before the next starts."""
        import gc
        import kvcache.vllm
        from vllm.distributed.kv_transfer.kv_transfer_state import \
            ensure_kv_transfer_shutdown
        if self.llm is None:
            return
        kvcache.vllm.wait_for_saves(30)
        try:
            self.llm.llm_engine.engine_core.shutdown()
        except Exception:  # noqa: BLE001 - best effort between tests
            pass
        ensure_kv_transfer_shutdown()
        self.llm = None
        gc.collect()


class Baseline:
    """Greedy outputs of vLLM without any connector, from a process of
    its own per model (run_engine.py --serve): an in-process engine
    without a connector cannot follow one with it (vLLM's global)."""

    def __init__(self) -> None:
        self._procs: dict[str, subprocess.Popen[str]] = {}

    def __call__(self, shape: str, prompts: list[list[int]],
                 max_tokens: int = 6, **engine_args: Any
                 ) -> list[list[int]]:
        key = shape + json.dumps(engine_args, sort_keys=True)
        p = self._procs.get(key)
        if p is None or p.poll() is not None:
            p = subprocess.Popen(
                [sys.executable, str(HERE / "run_engine.py"), "--serve",
                 "--model", model_dir(shape), "--engine-args",
                 json.dumps(engine_args)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            self._procs[key] = p
        assert p.stdin is not None and p.stdout is not None
        p.stdin.write(json.dumps({"prompts": prompts,
                                  "max_tokens": max_tokens}) + "\n")
        p.stdin.flush()
        line = p.stdout.readline()
        if not line:
            raise RuntimeError(f"the baseline engine of {shape} died "
                               f"({p.wait()})")
        return json.loads(line)

    def close(self) -> None:
        for p in self._procs.values():
            if p.poll() is None:
                p.stdin.close()
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()


@pytest.fixture(scope="session")
def baseline() -> Iterator[Baseline]:
    b = Baseline()
    try:
        yield b
    finally:
        b.close()


@pytest.fixture
def engines() -> Iterator[list[Engine]]:
    made: list[Engine] = []
    try:
        yield made
    finally:
        for e in made:
            e.close()


class Records(logging.Filter):
    """The connector's log records (logger vllm.kvcache). A filter, not a
    handler: vLLM's logging setup (dictConfig, at each engine start)
    empties the handlers of every logger under "vllm", not its filters."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def filter(self, record: logging.LogRecord) -> bool:
        self.records.append(record)
        return True

    def at(self, level: int) -> list[str]:
        return [r.getMessage() for r in self.records if r.levelno == level]

    def dump(self) -> str:
        return "\n".join(f"{r.levelname} {r.getMessage()}"
                         for r in self.records)


@pytest.fixture
def kvlog() -> Iterator[Records]:
    f = Records()
    lg = logging.getLogger("vllm.kvcache")
    lg.addFilter(f)
    try:
        yield f
    finally:
        lg.removeFilter(f)
