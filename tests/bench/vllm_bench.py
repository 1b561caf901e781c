# SPDX-License-Identifier: GPL-2.0
"""vllm_bench: vLLM's time to first token with kvcache's connector, side
by side with no connector, vLLM's own CPU offloading and LMCache.

One vLLM (the CPU build of scripts/vllm-env), one random-weight Llama
built locally (tests/vllm/tiny_model.py: bf16, hidden 512, 8 layers, 8
heads, 4 KV heads, head_dim 64: a 4K-token prefill takes seconds on two
cores, so prefill dominates), in eager mode (enforce_eager: torch.compile
costs one to five minutes per engine start on two shared CPUs, and this
vLLM's compile cache does not load back, "'function' object has no
attribute 'finalize_loading'", so every engine would compile again), two
long-context workloads, run one request at a time, each request its own
generate() call:

- doc: one shared 4096-token document with 8 different 64-token
  questions appended (8 requests, 8 tokens generated each);
- chat: a 7-turn chat; turn 1 is a 1536-token prompt, each later turn's
  prompt is the previous prompt + the answer the engine gave (16 tokens)
  + 400 new user tokens (the last prompt is about 4K tokens).

The configurations, each a vLLM engine in a process of its own (all
started, and warmed up untimed, before the first measured request):

- none: no connector;
- vllm-prefix: no connector, vLLM's own prefix cache left to work (the
  in-process baseline);
- kvcache: kvcache.vllm's KvcacheConnector on a kvcached of its own
  (memfd mode, the DRAM tier; tests/python/conftest.py's Daemon, pool
  blocks of one vLLM block of all layers);
- offload: vLLM's OffloadingConnector with its CPUOffloadingSpec
  (cpu_bytes_to_use 512 MiB);
- lmcache: LMCache 0.5.6's LMCacheConnectorV1 (local CPU backend), run by
  the Python of a separate venv (--lmcache-python): LMCache pins an older
  numpy, protobuf and OpenTelemetry than this vLLM's venv.

The requests go one at a time over the whole machine, request i of every
configuration before request i + 1 of any, the order rotating: these two
CPUs are shared, and a neighbour's load then slows every configuration
alike, which makes the ratios of one run comparable.

Fairness: vLLM's own prefix cache (on in every engine) would serve the
repeated document and the chat's history from the engine's memory, and a
connector would never be asked. So before every measured request of
none, kvcache, offload and lmcache, the bench calls
llm.reset_prefix_cache() (its default reset_connector=False leaves the
external tier alone): every request starts with nothing in vLLM's own
cache, as it would on a fresh engine or one that evicted it, and whatever
it does not compute comes from the external tier. A fresh engine per
request would measure the same and cost a minute or more of start each.
vllm-prefix resets once at the start of each workload only. Stores are
asynchronous in kvcache's connector: between requests, outside the
clock, the bench waits for them (kvcache.vllm.wait_for_saves), so the
next lookup sees them; the wait is recorded (save_wait_s).

Per request: TTFT is vLLM's own RequestOutput.metrics.first_token_latency
(arrival to first token, the engine's clock), wall the generate() call,
cpu the engine process's CPU time over it (all threads; a neighbour's
load inflates it less than wall time); cached_tokens vLLM's
num_cached_tokens (after a reset: the external hit); the generated token
ids (greedy, temperature 0). Per configuration and workload: TTFT of the
first request (cold: nothing cached yet), the median TTFT and CPU time
of the others (warm), requests/s = requests / the sum of their
generate() wall times, and the speedups against "none" from the same
run. --runs N repeats the workloads with fresh tokens (medians over the
runs). kvcache's generated tokens must equal those of vLLM's own prefix
cache ("vllm-prefix"), request by request: both compute the new tokens
on top of a cached prefix, so they must round alike, and a difference is
a failure (exit status 1). Against "none" (one pass over the whole
prompt) bf16 rounding may differ on long prompts for both of them; that
is reported ("identical"), not failed, and the report says whether
kvcache and the prefix cache differ from "none" in the same requests.
Without a prefix-cache run, "none" is the reference.

A configuration that cannot run is recorded with the exception, or the
ERROR lines of its log (LMCache keeps vLLM running when its own worker
side fails), and the bench goes on.

Usage (from the repository root, with scripts/vllm-env's Python, as root
or not; make helper lib first):
    PY tests/bench/vllm_bench.py [--out DIR] [--lmcache-python PY |
        --lmcache-skip WHY] [--only none,kvcache,...] [--runs N]
  writes DIR/vllm.json (default Documentation/bench) and DIR/vllm.png,
  prints the side-by-side table; logs under build/bench/vllm/.
    python3 tests/bench/vllm_bench.py --report DIR/vllm.json [--plot PNG]
  (any Python, no vLLM): prints the Markdown table of benchmarks.md's
  "vLLM" section (scripts/bench), and redraws the plot.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shlex
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]

# The model (tests/vllm/tiny_model.py's Shape fields).
MODEL = dict(hidden=512, layers=8, heads=8, kv_heads=4, head_dim=64,
             intermediate=1536, vocab=8192, max_positions=16384,
             dtype="bfloat16", seed=1234)
BLOCK = 32                      # vLLM's block size (CPU: a multiple of 32)
WORKLOADS = {
    "doc": dict(doc_tokens=4096, questions=8, question_tokens=64,
                max_tokens=8, seed=11),
    "chat": dict(first_tokens=1536, turns=7, user_tokens=400,
                 max_tokens=16, seed=22),
}
PASSES = ["none", "vllm-prefix", "kvcache", "offload", "lmcache"]
LABEL = {"none": "no connector", "vllm-prefix": "vLLM prefix cache "
         "(in-process)", "kvcache": "kvcache", "offload":
         "vLLM OffloadingConnector (CPU)", "lmcache": "LMCache 0.5.6"}
KV_MEMORY = 512 << 20
OFFLOAD_BYTES = 512 << 20


def block_bytes() -> int:
    """One vLLM block of every layer: K and V, bf16."""
    return MODEL["layers"] * MODEL["kv_heads"] * 2 * MODEL["head_dim"] * \
        BLOCK * 2


# -- the workloads --------------------------------------------------------


def _toks(rng: random.Random, n: int) -> list[int]:
    return [rng.randrange(1, MODEL["vocab"]) for _ in range(n)]


def doc_prompts(run: int = 0) -> list[list[int]]:
    w = WORKLOADS["doc"]
    rng = random.Random(w["seed"] + 1000 * run)
    doc = _toks(rng, w["doc_tokens"])
    return [doc + _toks(rng, w["question_tokens"])
            for _ in range(w["questions"])]


def chat_user_turns(run: int = 0) -> list[list[int]]:
    """The user's tokens of each turn; the answers come from the engine."""
    w = WORKLOADS["chat"]
    rng = random.Random(w["seed"] + 1000 * run)
    return [_toks(rng, w["first_tokens"])] + \
        [_toks(rng, w["user_tokens"]) for _ in range(w["turns"] - 1)]


# -- one configuration, in its own process -----------------------------------


def engine_args(spec: dict, name: str) -> dict:
    args = dict(model=spec["model"], skip_tokenizer_init=True,
                block_size=BLOCK, dtype="bfloat16",
                kv_cache_memory_bytes=KV_MEMORY, max_model_len=8192,
                max_num_batched_tokens=8192, enable_prefix_caching=True,
                disable_log_stats=False, seed=0, enforce_eager=True)
    if name == "kvcache":
        args["kv_transfer_config"] = {
            "kv_connector": "KvcacheConnector",
            "kv_connector_module_path": "kvcache.vllm",
            "kv_role": "kv_both",
            "kv_connector_extra_config": {"socket": spec["socket"],
                                          "namespace": spec["namespace"]}}
    elif name == "offload":
        args["kv_transfer_config"] = {
            "kv_connector": "OffloadingConnector",
            "kv_role": "kv_both",
            "kv_connector_extra_config": {"cpu_bytes_to_use":
                                          OFFLOAD_BYTES}}
    elif name == "lmcache":
        args["kv_transfer_config"] = {"kv_connector": "LMCacheConnectorV1",
                                      "kv_role": "kv_both"}
    return args


def _counters(llm) -> dict[str, float]:
    out: dict[str, float] = {}
    try:
        for m in llm.get_metrics():
            if "prefix_cache" in m.name and hasattr(m, "value"):
                out[m.name] = out.get(m.name, 0) + m.value
    except Exception:  # noqa: BLE001 - a figure less, not a failure
        pass
    return out


def _kvcache_stats() -> dict[str, int]:
    try:
        from kvcache.vllm.worker import _live
    except ImportError:
        return {}
    out = {"loaded_blocks": 0, "saved_blocks": 0, "failed_blocks": 0}
    for w in list(_live):
        for k in out:
            out[k] += getattr(w, k, 0)
    return out


class Session:
    """One engine's side of the workloads: its prompts and chat history."""

    def __init__(self, llm, name: str) -> None:
        self.llm = llm
        self.name = name
        self.reset_each = name != "vllm-prefix"
        self.run = -1
        self.chat: list[int] = []
        self.wait = None
        if name == "kvcache":
            from kvcache.vllm import wait_for_saves
            self.wait = wait_for_saves

    def _reset(self) -> None:
        if not self.llm.reset_prefix_cache():
            raise RuntimeError("reset_prefix_cache() refused")

    def _generate(self, prompt: list[int], max_tokens: int):
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt
        sp = SamplingParams(temperature=0, max_tokens=max_tokens,
                            ignore_eos=True, detokenize=False)
        return self.llm.generate([TokensPrompt(prompt_token_ids=prompt)],
                                 sp, use_tqdm=False)[0]

    def warmup(self) -> float:
        """Untimed, tokens of its own: a prompt, the same with more
        tokens (a hit in vLLM's own cache) and that again after a reset
        (an external hit, with a connector): the first call of each of
        these paths pays one-off costs that are not the cache's."""
        t0 = time.perf_counter()
        rng = random.Random(99)
        p = _toks(rng, 512)
        q = p + _toks(rng, 64)
        self._reset()
        self._generate(p, 4)
        if self.wait is not None:
            self.wait(60.0)
        self._generate(q, 4)
        if self.wait is not None:
            self.wait(60.0)
        self._reset()
        self._generate(q, 4)
        if self.wait is not None:
            self.wait(60.0)
        self._reset()
        return time.perf_counter() - t0

    def prompt(self, run: int, wl: str, i: int) -> list[int]:
        if run != self.run:
            self.run = run
            self.doc = doc_prompts(run)
            self.users = chat_user_turns(run)
        if wl == "doc":
            return self.doc[i]
        if i == 0:
            self.chat = []
        self.chat = self.chat + self.users[i]
        return self.chat

    def one(self, run: int, wl: str, i: int) -> dict:
        prompt = self.prompt(run, wl, i)
        if self.reset_each or i == 0:
            self._reset()
        c0 = time.process_time()
        t0 = time.perf_counter()
        out = self._generate(prompt, WORKLOADS[wl]["max_tokens"])
        wall = time.perf_counter() - t0
        cpu = time.process_time() - c0
        m = getattr(out, "metrics", None)
        ttft = getattr(m, "first_token_latency", 0.0) or None
        rec = dict(run=run, workload=wl, i=i, prompt_tokens=len(prompt),
                   ttft_s=ttft if ttft is not None else wall,
                   ttft_source="metrics" if ttft is not None else "wall",
                   wall_s=wall, cpu_s=cpu, cached_tokens=out.num_cached_tokens,
                   save_wait_s=0.0, output_ids=list(out.outputs[0].token_ids))
        if self.wait is not None:
            # Outside the clock: the next request's lookup sees the stores.
            t1 = time.perf_counter()
            rec["saves_done"] = self.wait(60.0)
            rec["save_wait_s"] = time.perf_counter() - t1
        if wl == "chat":
            self.chat = self.chat + rec["output_ids"]
        return rec


def worker(spec_path: str, name: str, cmd_fd: int, reply_fd: int) -> int:
    """One configuration's engine, serving the driver's requests: one
    JSON line in per request, one JSON line out."""
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
    spec = json.loads(Path(spec_path).read_text())
    for wl, w in spec["workloads"].items():
        WORKLOADS[wl] = w
    cmds = os.fdopen(cmd_fd, "r")
    replies = os.fdopen(reply_fd, "w")

    def reply(**kw) -> None:
        replies.write(json.dumps(kw) + "\n")
        replies.flush()

    def failed(what: str, e: BaseException) -> None:
        reply(op="error", error=f"{what}: {type(e).__name__}: {e}",
              traceback=traceback.format_exc()[-4000:])

    try:
        from importlib.metadata import version

        import torch
        import vllm
        from vllm import LLM
        versions = {"vllm": vllm.__version__, "torch": torch.__version__}
        if name == "kvcache":
            import kvcache
            versions["kvcache_package"] = os.path.dirname(kvcache.__file__)
        if name == "lmcache":
            # Not imported here: importing lmcache before the engine
            # starts changes what vLLM's start sees (numba's llvmlite in
            # sys.modules); vLLM imports it itself, as in a deployment.
            versions["lmcache"] = version("lmcache")
        t0 = time.perf_counter()
        llm = LLM(**engine_args(spec, name))
        init = time.perf_counter() - t0
        sess = Session(llm, name)
        warm = sess.warmup()
    except BaseException as e:  # noqa: BLE001 - reported, not raised
        failed("engine start", e)
        os._exit(0)
    reply(op="ready", engine_init_s=init, warmup_s=warm, versions=versions)
    before = _counters(llm)
    for line in cmds:
        cmd = json.loads(line)
        if cmd["op"] == "req":
            try:
                reply(op="req", **sess.one(cmd["run"], cmd["wl"],
                                           cmd["i"]))
            except BaseException as e:  # noqa: BLE001
                failed(f"{cmd['wl']} request {cmd['i']}", e)
        elif cmd["op"] == "done":
            after = _counters(llm)
            reply(op="done",
                  counters={k: v - before.get(k, 0) for k, v in
                            after.items()},
                  connector=_kvcache_stats() if name == "kvcache" else None)
            break
    # Leave at once: a connector's threads must not hold the exit up.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


# -- the driver ---------------------------------------------------------------


def _log_errors(log: Path) -> list[str]:
    """A worker log's errors: its ERROR lines and the exceptions at the
    end of its tracebacks, not those logged at WARNING (vLLM's chat
    template warm-up fails without a tokenizer, harmlessly), each once,
    with how many times it came ("(x N)"), timestamps left out."""
    import re
    seen: dict[str, int] = {}
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return []
    for ln in text.splitlines():
        ln = re.sub(r"\x1b\[[0-9;]*m", "", ln).strip()
        if re.search(r"\b(WARNING|INFO|DEBUG)\b", ln):
            continue
        if not re.search(r"\bERROR\b|^[A-Za-z_.]*(Error|Exception): ", ln):
            continue
        ln = re.sub(r"^\[[-0-9 :,]+\] ", "", ln)
        ln = re.sub(r"^\(\w+ pid=\d+\) ", "", ln)
        ln = re.sub(r"^ERROR \d\d-\d\d [0-9:]+ ", "ERROR ", ln)
        seen[ln[:400]] = seen.get(ln[:400], 0) + 1
    return [k + (f" (x {n})" if n > 1 else "") for k, n in seen.items()][:12]


def start_kvcached(tmp_root: Path):
    """A kvcached in memfd mode as the Python tests start one, its pool
    blocks one vLLM block of all layers; and a namespace of ours."""
    sys.path.insert(0, str(TOP / "tests" / "python"))
    import conftest
    bb = block_bytes()
    pool_block = 4096
    while pool_block < bb:
        pool_block <<= 1

    class BenchDaemon(conftest.Daemon):
        def __init__(self) -> None:
            super().__init__(pool_size=512 << 20)
            conf = self.conf.read_text().replace(
                f"block_size = {conftest.BLOCK_SIZE >> 10}K",
                f"block_size = {pool_block >> 10}K")
            self.conf.write_text(conf)

    d = BenchDaemon()
    d.start()
    return d, d.new_ns(), pool_block


def summarize(results: dict) -> dict:
    """Per configuration and workload, over the runs: TTFT of the first
    request of each run (cold: median over the runs), of the others
    (warm: median), of all (mean); CPU seconds of the warm ones (the
    engine process's, median: what a neighbour's load does not change);
    requests/s; speedups against "none"; whether the outputs equal
    "none"'s, request by request."""
    def key(r: dict) -> tuple:
        return (r.get("run", 0), r["workload"], r["i"])
    base = {key(r): r for r in results.get("none", {}).get("requests", [])}
    pref = {key(r): r for r in
            results.get("vllm-prefix", {}).get("requests", [])}
    out: dict[str, dict] = {}
    for p in PASSES:
        res = results.get(p)
        if not res:
            continue
        for wl in WORKLOADS:
            reqs = [r for r in res.get("requests", []) if r["workload"] == wl]
            if not reqs:
                continue
            first = [r["ttft_s"] for r in reqs if r["i"] == 0]
            rest = [r for r in reqs if r["i"] > 0]
            s = dict(requests=len(reqs),
                     ttft_first_s=statistics.median(first) if first
                     else None,
                     ttft_rest_median_s=statistics.median(
                         [r["ttft_s"] for r in rest]) if rest else None,
                     ttft_mean_s=statistics.mean(r["ttft_s"] for r in reqs),
                     cpu_rest_median_s=statistics.median(
                         [r["cpu_s"] for r in rest]) if rest and
                     all("cpu_s" in r for r in rest) else None,
                     req_per_s=len(reqs) / sum(r["wall_s"] for r in reqs),
                     cached_tokens=sum(r["cached_tokens"] or 0
                                       for r in reqs),
                     prompt_tokens=sum(r["prompt_tokens"] for r in reqs),
                     save_wait_s=sum(r.get("save_wait_s", 0) for r in reqs))
            bad = [f"{r.get('run', 0) + 1}.{r['i'] + 1}" for r in reqs
                   if base.get(key(r), {}).get("output_ids")
                   != r["output_ids"]]
            missing = len([k for k in base if k[1] == wl]) - len(reqs)
            s["identical"] = not bad and missing == 0
            s["mismatched_requests"] = bad
            if pref and p != "vllm-prefix":
                s["mismatched_vs_prefix_cache"] = [
                    f"{r.get('run', 0) + 1}.{r['i'] + 1}" for r in reqs
                    if pref.get(key(r), {}).get("output_ids")
                    != r["output_ids"]]
            b = out.get(f"none/{wl}")
            if b:
                for k in ("ttft_first_s", "ttft_rest_median_s",
                          "ttft_mean_s", "cpu_rest_median_s"):
                    s[k[:-2] + "_speedup"] = \
                        b[k] / s[k] if b[k] and s[k] else None
                s["req_per_s_ratio"] = s["req_per_s"] / b["req_per_s"]
            out[f"{p}/{wl}"] = s
    return out


def _fmt(v, spec=".3f", suffix="") -> str:
    return "-" if v is None else f"{v:{spec}}{suffix}"


HEADER = ["configuration", "workload", "TTFT cold (s)", "speedup",
          "TTFT warm, median (s)", "speedup", "CPU s warm, median",
          "speedup", "req/s", "ratio", "cached / prompt tokens",
          "output = no connector's", "= vLLM prefix cache's"]


def table_rows(doc: dict) -> list[list[str]]:
    rows = []
    for p in PASSES:
        res = doc["results"].get(p)
        if res is None:
            continue
        for wl in WORKLOADS:
            s = doc["summary"].get(f"{p}/{wl}")
            if s is None:
                rows.append([LABEL[p], wl, "not run (below)"] +
                            [""] * (len(HEADER) - 3))
                continue
            rows.append([
                LABEL[p], wl, _fmt(s["ttft_first_s"]),
                _fmt(s.get("ttft_first_speedup"), ".2f", "x"),
                _fmt(s["ttft_rest_median_s"]),
                _fmt(s.get("ttft_rest_median_speedup"), ".2f", "x"),
                _fmt(s.get("cpu_rest_median_s")),
                _fmt(s.get("cpu_rest_median_speedup"), ".2f", "x"),
                _fmt(s["req_per_s"], ".3f"),
                _fmt(s.get("req_per_s_ratio"), ".2f", "x"),
                f"{s['cached_tokens']} / {s['prompt_tokens']}",
                "yes" if s["identical"] else "NO (requests " +
                ", ".join(s["mismatched_requests"]) + ")",
                "-" if "mismatched_vs_prefix_cache" not in s else
                "yes" if not s["mismatched_vs_prefix_cache"] else
                "no (requests " + ", ".join(s["mismatched_vs_prefix_cache"])
                + ")"])
    return rows


def _where(tb: str) -> str:
    """Where a traceback's exception was raised: file:line (function)."""
    import re
    hits = re.findall(r'File "([^"]+)", line (\d+), in (\S+)', tb or "")
    if not hits:
        return ""
    f, line, fn = hits[-1]
    f = f.split("site-packages/", 1)[-1]
    return f"{f}:{line} ({fn})"


def notes(doc: dict) -> list[str]:
    """What did not run, or ran without serving a block, and why."""
    out = []
    for p in PASSES:
        res = doc["results"].get(p)
        if res is None:
            continue
        why = res.get("status") or res.get("error")
        hits = (res.get("counters") or {}).get(
            "vllm:external_prefix_cache_hits")
        errs = res.get("log_errors") or []
        if why:
            note = f"{LABEL[p]}: did not run: {why}"
            if _where(res.get("traceback", "")):
                note += f" (raised at {_where(res['traceback'])})"
        elif p in ("kvcache", "offload", "lmcache") and hits == 0:
            note = (f"{LABEL[p]}: ran, but its connector served no block "
                    f"(vllm:external_prefix_cache_hits = 0): every token "
                    f"was computed")
            if p == "lmcache" and any("Timeout occurred" in e
                                      for e in errs):
                note += (", and each request first waited for its "
                         "lookup to time out (lookup_timeout_ms, 3000 by "
                         "default: its scheduler side asks the worker "
                         "side, which did not start), which its TTFT "
                         "pays over no connector's")
        elif p in ("offload", "lmcache") and errs:
            note = f"{LABEL[p]}: ran"
        else:
            continue
        if errs:
            note += "; the errors in its log: " + " / ".join(errs[:4])
        out.append(note)
    return out


def said(doc: dict) -> list[str]:
    """The table's main figures in words."""
    sm = doc["summary"]

    def x(p: str, wl: str, k: str):
        v = sm.get(f"{p}/{wl}", {}).get(k)
        return None if v is None else f"{v:.2f}x"
    if "kvcache/doc" not in sm:
        return ["kvcache did not run: no figures."]
    out = (f"What they say. kvcache against no connector, warm requests "
           f"(median TTFT): {x('kvcache', 'doc', 'ttft_rest_median_speedup')}"
           f" on the shared document, "
           f"{x('kvcache', 'chat', 'ttft_rest_median_speedup')} on the chat "
           f"(CPU time: {x('kvcache', 'doc', 'cpu_rest_median_speedup')} and "
           f"{x('kvcache', 'chat', 'cpu_rest_median_speedup')}); requests/s "
           f"{x('kvcache', 'doc', 'req_per_s_ratio')} and "
           f"{x('kvcache', 'chat', 'req_per_s_ratio')}. The cold requests, "
           f"which compute everything and store it: "
           f"{x('kvcache', 'doc', 'ttft_first_speedup')} and "
           f"{x('kvcache', 'chat', 'ttft_first_speedup')} of no connector's "
           f"speed (below 1: slower).")
    vp = [sm.get(f"vllm-prefix/{wl}", {}).get("ttft_rest_median_s")
          for wl in WORKLOADS]
    kv = [sm.get(f"kvcache/{wl}", {}).get("ttft_rest_median_s")
          for wl in WORKLOADS]
    if all(vp) and all(kv):
        out += (" Against vLLM's own prefix cache in the engine's memory "
                "(warm TTFT, the prefix cache's over kvcache's: above 1, "
                "kvcache is faster): " + ", ".join(
                    f"{a / b:.2f}x ({wl})" for a, b, wl in
                    zip(vp, kv, WORKLOADS)) + ".")
    kv = [k for k in sm if k.startswith("kvcache/")]
    if all(sm[k]["identical"] for k in kv):
        out += (" kvcache's outputs are no connector's, token for token, "
                "in every request.")
        return [out]
    out += (" kvcache's outputs differ from no connector's in "
            "requests " + "; ".join(
                f"{k.split('/')[1]} {', '.join(sm[k]['mismatched_requests'])}"
                for k in kv if sm[k]["mismatched_requests"]) + " (run.request).")
    vp = [k.replace("kvcache/", "vllm-prefix/") for k in kv]
    if all(sm.get(k, {}).get("mismatched_vs_prefix_cache") == [] for k in
           kv) and all(sm.get(v, {}).get("mismatched_requests") ==
                       sm[k]["mismatched_requests"] for k, v in zip(kv, vp)):
        out += (" vLLM's own prefix cache differs from no connector in the "
                "same requests, and kvcache's outputs equal the prefix "
                "cache's token for token in every request: the tokens "
                "computed on top of a cached prefix are not rounded (bf16) "
                "as in one pass over the whole prompt, and greedy "
                "decoding of random weights turns that into other tokens "
                "a few tokens in (and a chat turn's prompt holds the "
                "earlier answers: once one differs, the later turns do). "
                "Reusing a prefix changes them, not kvcache's copy of "
                "it.")
    return [out]


def print_table(doc: dict) -> None:
    rows = [HEADER] + table_rows(doc)
    w = [max(len(r[i]) for r in rows if r[i] != "not run (below)")
         for i in range(len(HEADER))]
    for r in rows:
        print("  ".join(c.ljust(w[i]) for i, c in enumerate(r)).rstrip())
    for n in notes(doc):
        print("- " + n)


def markdown(doc: dict) -> str:
    m = doc["meta"]
    wd, wc = m["workloads"]["doc"], m["workloads"]["chat"]
    lines = [
        f"- commit: {m['commit']}; host CPU: {m['cpu']}, {m['cpus']} CPUs; "
        f"kernel: {m['kernel']}; {m['date']}",
        f"- command: `{m['command']}`; raw data (every request's TTFT, "
        "wall and CPU time, cached tokens and output tokens) in "
        "`Documentation/bench/vllm.json`",
        f"- vLLM {m.get('vllm', '?')} (CPU build), torch "
        f"{m.get('torch', '?')}" + (f", LMCache {m['lmcache']}" if
                                    m.get("lmcache") else "") +
        f"; model `{m['model_name']}` (tests/vllm/tiny_model.py, random "
        f"weights); vLLM blocks of {BLOCK} tokens, {m['block_bytes']} "
        f"bytes of KV each (all layers); kvcached pool blocks of "
        f"{m['pool_block']} bytes",
        f"- doc: a {wd['doc_tokens']}-token document + {wd['questions']} "
        f"different {wd['question_tokens']}-token questions, "
        f"{wd['max_tokens']} tokens generated each; chat: {wc['turns']} "
        f"turns, the first {wc['first_tokens']} tokens, then the previous "
        f"prompt + its {wc['max_tokens']}-token answer + "
        f"{wc['user_tokens']} new tokens; {m.get('runs', 1)} run(s), "
        "fresh tokens each",
        "",
        "| " + " | ".join(HEADER) + " |",
        "|" + "---|" * len(HEADER),
    ]
    for r in table_rows(doc):
        lines.append("| " + " | ".join(c.replace("|", "/") for c in r)
                     + " |")
    lines += ["", *said(doc)]
    n = notes(doc)
    if n:
        lines += ["", "What did not run, or ran without its cache:", ""]
        lines += [f"- {x}" for x in n]
    return "\n".join(lines)


def plot(doc: dict, png: Path) -> bool:
    """Per-request TTFT of each configuration, one panel per workload,
    with scripts/bench-plots' gnuplot helpers."""
    from importlib.machinery import SourceFileLoader
    bp = SourceFileLoader("bench_plots",
                          str(TOP / "scripts" / "bench-plots")).load_module()
    import shutil
    import tempfile
    if not shutil.which("gnuplot"):
        print("vllm_bench: no gnuplot: plot not drawn", file=sys.stderr)
        return False
    tmp = Path(tempfile.mkdtemp(prefix="vllm-plot."))
    panels = []
    wd = doc["meta"]["workloads"]["doc"]
    wc = doc["meta"]["workloads"]["chat"]
    runs = doc["meta"].get("runs", 1)
    for wl, title in (
            ("doc", f"a shared {wd['doc_tokens']}-token document, "
             f"{wd['questions']} questions"),
            ("chat", f"a {wc['turns']}-turn chat, {wc['first_tokens']} "
             f"tokens, +{wc['user_tokens'] + wc['max_tokens']} a turn")):
        plots = []
        for p in PASSES:
            by_i: dict[int, list[float]] = {}
            for r in doc["results"].get(p, {}).get("requests", []):
                if r["workload"] == wl:
                    by_i.setdefault(r["i"], []).append(r["ttft_s"])
            if not by_i:
                continue
            dat = tmp / f"{wl}-{p}.dat"
            bp.write_dat(str(dat), [f"{i + 1} {statistics.median(v)}"
                                    for i, v in sorted(by_i.items())])
            plots.append(f'"{dat}" u 1:2 w linespoints lw 2 '
                         f't "{LABEL[p]}"')
        if plots:
            panels.append(f'set title "{title}"\n'
                          'set xlabel "request (chat: turn)"\n'
                          'set xtics 1\n'
                          'set ylabel "TTFT (s)' +
                          (f', median of {runs} runs' if runs > 1 else '') +
                          '"\nset logscale y\n'
                          'set key bottom right\nplot ' + ", ".join(plots))
    if not panels:
        return False
    ok = bp.gnuplot(bp.HEAD.replace("900,480", "1200,480") +
                    f'set output "{png}"\nset multiplot layout 1,'
                    f'{len(panels)}\n' + "\n".join(panels) +
                    "\nunset multiplot\n")
    shutil.rmtree(tmp, ignore_errors=True)
    return ok


def host_facts() -> tuple[str, str]:
    """The commit measured ("+dirty" when code differs from it; a
    previous run's outputs do not count) and the host's CPU model."""
    def sh(*cmd: str) -> str:
        try:
            return subprocess.run(cmd, capture_output=True, text=True,
                                  cwd=TOP).stdout.strip()
        except OSError:
            return ""
    commit = sh("git", "rev-parse", "--short", "HEAD") or "unknown"
    if sh("git", "status", "--porcelain", "--", ".",
          ":!Documentation/bench", ":!Documentation/benchmarks.md"):
        commit += "+dirty"
    cpu = ""
    try:
        for ln in open("/proc/cpuinfo"):
            if ln.startswith("model name"):
                cpu = ln.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return commit, cpu


def meta(args, spec: dict, pool_block: int, model_dir: Path) -> dict:
    commit, cpu = host_facts()
    py = os.path.relpath(sys.executable, TOP) if \
        sys.executable.startswith(str(TOP)) else sys.executable
    argv = [os.path.relpath(os.path.abspath(sys.argv[0]), TOP)] + \
        sys.argv[1:]
    return dict(commit=commit, cpu=cpu, cpus=os.cpu_count(),
                kernel=platform.release(),
                date=time.strftime("%Y-%m-%d %H:%M %Z"),
                command=args.command or shlex.join([py] + argv).replace(
                    str(Path.home()), "~"),
                model_name=model_dir.name, model_dtype=MODEL["dtype"],
                model=MODEL, block_bytes=block_bytes(), runs=args.runs,
                pool_block=pool_block, workloads=WORKLOADS,
                engine=engine_args(spec, "none"))


def _die_with_parent() -> None:
    import ctypes
    import signal
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)


class Worker:
    """The driver's end of one configuration's process."""

    def __init__(self, name: str, py: str, spec: Path, logs: Path,
                 env: dict) -> None:
        self.name = name
        self.log = logs / f"{name}.log"
        self.res: dict = dict(requests=[], errors=[])
        self.alive = False
        self.t0 = time.monotonic()
        c_r, c_w = os.pipe()
        r_r, r_w = os.pipe()
        with open(self.log, "wb") as lf:
            self.proc = subprocess.Popen(
                [py, os.path.abspath(__file__), "--worker", name, "--spec",
                 str(spec), "--cmd-fd", str(c_r), "--reply-fd", str(r_w)],
                stdin=subprocess.DEVNULL, stdout=lf,
                stderr=subprocess.STDOUT, env=env, cwd=TOP,
                pass_fds=(c_r, r_w), preexec_fn=_die_with_parent)
        os.close(c_r)
        os.close(r_w)
        self.cmd = os.fdopen(c_w, "w")
        self.rfd = r_r
        self.buf = b""

    def send(self, **kw) -> None:
        try:
            self.cmd.write(json.dumps(kw) + "\n")
            self.cmd.flush()
        except OSError:
            pass                # it died: recv() says so

    def recv(self, timeout: float) -> dict:
        import select
        end = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = end - time.monotonic()
            if left <= 0:
                return dict(op="error", error=f"no answer in {timeout:.0f} "
                            "s")
            if select.select([self.rfd], [], [], left)[0]:
                got = os.read(self.rfd, 1 << 20)
                if not got:
                    rc = self.proc.wait()
                    return dict(op="error", error=f"its process exited "
                                f"(status {rc}) without an answer")
                self.buf += got
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def fail(self, r: dict) -> None:
        self.res["error"] = r.get("error", "?")
        if r.get("traceback"):
            self.res["traceback"] = r["traceback"]
        self.alive = False
        self.stop()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.res["log_errors"] = _log_errors(self.log)
        self.res["seconds"] = time.monotonic() - self.t0


def drive(workers: list[Worker], args) -> None:
    """Start every engine, then the requests round-robin, one at a time
    on the whole machine: request i of every configuration before
    request i + 1 of any, the order rotating, so a noisy neighbour slows
    all of them alike."""
    t0 = time.monotonic()
    for w in workers:
        r = w.recv(max(args.timeout - (time.monotonic() - t0), 1))
        if r["op"] == "ready":
            w.alive = True
            w.res["engine_init_s"] = r["engine_init_s"]
            w.res["warmup_s"] = r["warmup_s"]
            w.res["versions"] = r["versions"]
        else:
            w.fail(r)
        print(f"vllm_bench: {w.name}: " + (
            f"engine up in {r['engine_init_s']:.0f} s" if w.alive else
            f"not running: {w.res['error']}"), file=sys.stderr, flush=True)
    steps = [(run, wl, i, n) for run in range(args.runs)
             for wl, spec in WORKLOADS.items()
             for n in [spec.get("questions") or spec["turns"]]
             for i in range(n)]
    for k, (run, wl, i, n) in enumerate(steps):
        live = [w for w in workers if w.alive]
        if not live:
            break
        turn = k % max(len(live), 1)
        for w in live[turn:] + live[:turn]:
            w.send(op="req", run=run, wl=wl, i=i)
            r = w.recv(args.request_timeout)
            if r["op"] != "req":
                w.fail(r)
                print(f"vllm_bench: {w.name}: {w.res['error']}",
                      file=sys.stderr, flush=True)
                continue
            del r["op"]
            w.res["requests"].append(r)
        print(f"vllm_bench: run {run + 1}/{args.runs}: {wl} {i + 1}/{n} "
              f"({time.monotonic() - t0:.0f} s)", file=sys.stderr,
              flush=True)
    for w in workers:
        if w.alive:
            w.send(op="done")
            r = w.recv(60)
            if r["op"] == "done":
                w.res["counters"] = r["counters"]
                if r.get("connector"):
                    w.res["connector"] = r["connector"]
        w.stop()


def run(args) -> int:
    sys.path.insert(0, str(TOP / "tests" / "vllm"))
    import tiny_model
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
    logs = TOP / "build" / "bench" / "vllm"
    logs.mkdir(parents=True, exist_ok=True)
    cache = Path(os.environ.get("KVCACHE_CACHE_DIR") or Path(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        / "kvcache")
    model_dir = tiny_model.build(cache / "models", tiny_model.Shape(**MODEL))
    only = args.only.split(",") if args.only else PASSES
    daemon = None
    pool_block = 0
    results: dict[str, dict] = {}
    workers: list[Worker] = []
    if args.quick:
        WORKLOADS["doc"].update(doc_tokens=1024, questions=3)
        WORKLOADS["chat"].update(first_tokens=512, turns=3, user_tokens=128)
    spec = dict(model=str(model_dir), socket=None, namespace=0,
                workloads=WORKLOADS)
    try:
        if "kvcache" in only:
            daemon, ns, pool_block = start_kvcached(logs)
            spec.update(socket=daemon.sock, namespace=ns)
        spec_path = logs / "spec.json"
        spec_path.write_text(json.dumps(spec))
        for name in PASSES:
            if name not in only:
                continue
            py = sys.executable
            env = dict(os.environ)
            # This tree's kvcache package, whatever a shared venv's
            # editable install points at.
            env["PYTHONPATH"] = os.pathsep.join(
                [str(TOP / "helper" / "python")] +
                ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
            if name == "lmcache":
                if args.lmcache_skip or not args.lmcache_python:
                    results[name] = dict(requests=[], errors=[], status=
                                         args.lmcache_skip or
                                         "not run (no --lmcache-python)")
                    continue
                py = args.lmcache_python
                env.update(LMCACHE_CHUNK_SIZE="256", LMCACHE_LOCAL_CPU="True",
                           LMCACHE_MAX_LOCAL_CPU_SIZE="1.0")
            print(f"vllm_bench: starting {name} (log: "
                  f"{os.path.relpath(logs / (name + '.log'), TOP)})",
                  file=sys.stderr, flush=True)
            w = Worker(name, py, spec_path, logs, env)
            workers.append(w)
        drive(workers, args)
    finally:
        for w in workers:
            w.stop()
            results[w.name] = w.res
        if daemon is not None:
            if results.get("kvcache", {}).get("error"):
                sys.stderr.write(daemon.log()[-4000:])
            daemon.cleanup()

    m = meta(args, spec, pool_block, model_dir)
    for r in results.values():
        for k, v in (r.get("versions") or {}).items():
            m.setdefault(k, v)
    doc = dict(meta=m, results=results, summary=summarize(results))
    outdir = Path(args.out)
    outdir.mkdir(parents=True, exist_ok=True)
    (outdir / "vllm.json").write_text(json.dumps(doc, indent=1) + "\n")
    print_table(doc)
    plot(doc, outdir / "vllm.png")
    # The reference: vLLM's own prefix cache (the same arithmetic: new
    # tokens on top of a cached prefix); "none" when it did not run.
    bad = []
    for k, s in doc["summary"].items():
        if not k.startswith("kvcache/"):
            continue
        vs = s.get("mismatched_vs_prefix_cache")
        if vs is None:
            if not s["identical"]:
                bad.append(k)
        elif vs:
            bad.append(k)
    if results.get("kvcache", {}).get("error"):
        print(f"vllm_bench: FAIL: kvcache did not run: "
              f"{results['kvcache']['error']}", file=sys.stderr)
        return 1
    if bad:
        print(f"vllm_bench: FAIL: kvcache's output differs from the "
              f"reference (vLLM's prefix cache, else no connector): "
              f"{', '.join(bad)}", file=sys.stderr)
        return 1
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(TOP / "Documentation" / "bench"))
    ap.add_argument("--only", help="comma-separated: " + ",".join(PASSES))
    ap.add_argument("--lmcache-python", help="a Python with vLLM and "
                    "lmcache 0.5.6")
    ap.add_argument("--lmcache-skip", help="why LMCache is not run")
    ap.add_argument("--timeout", type=int, default=300,
                    help="seconds for every engine to start")
    ap.add_argument("--request-timeout", type=int, default=120,
                    help="seconds for one request")
    ap.add_argument("--command", help="the command to record")
    ap.add_argument("--runs", type=int, default=1,
                    help="runs of the workloads (fresh tokens each)")
    ap.add_argument("--quick", action="store_true",
                    help="small workloads (a smoke test, not a result)")
    ap.add_argument("--report", help="print the Markdown table of a JSON")
    ap.add_argument("--plot", help="with --report: redraw this PNG")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--spec", help=argparse.SUPPRESS)
    ap.add_argument("--cmd-fd", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--reply-fd", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.spec, args.worker, args.cmd_fd, args.reply_fd)
    if args.report:
        doc = json.loads(Path(args.report).read_text())
        doc["summary"] = summarize(doc["results"])
        print(markdown(doc))
        if args.plot:
            plot(doc, Path(args.plot))
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
