# SPDX-License-Identifier: GPL-2.0
"""vllm_itl_bench: a decoding request's inter-token latency while another
request's prefix is loaded from g3, with the connector's background
loads (vLLM's asynchronous KV loads) against loads inside the step
(background_loads = false), as ratios from one run.

One vLLM (the CPU build of scripts/vllm-env), one random-weight Llama
built locally (tests/vllm/tiny_model.py: bf16, hidden 512, 8 layers, 8
KV heads of 64: 512 KiB of KV a 32-token block), one kvcached (memfd
mode, a g3 directory; tests/vllm/conftest.py's daemon). Per run and per
mode, in a process of its own (vLLM keeps one connector per process):

1. a 2048-token document (64 blocks, 32 MiB of KV) is prefilled and
   stored; once g3 holds it, the pool is flushed (the blocks are on g3
   only) and, as root, the page cache dropped, so the load reads the
   disk as a cold g3 hit does;
2. another request (256 prompt tokens) starts decoding; after 20 of
   its tokens, the document with 64 new tokens arrives: a g3 hit of 64
   blocks;
3. the engine is stepped by hand (LLMEngine.step) and the time of each
   of the decoding request's tokens recorded, until it has 120.

Its inter-token latencies (ITL) are split at the hit's arrival and its
first token: before (the decode alone), during (the hit's load and
prefill). Per mode: the median ITL before, the largest and the median
ITL during, the hit's time to its first token, and vLLM's own counters
(external hits, kvcache's background loads) to show what happened. The
modes alternate within a run, their order rotating between runs, so a
neighbour's load on these shared CPUs slows both alike. The ratio that
matters: the largest ITL during the load, inside the step over in the
background. Both include the hit's prefill of its 64 new tokens (it
runs in a step either way).

Usage (from the repository root, with scripts/vllm-env's Python; make
helper lib first):
    PY tests/bench/vllm_itl_bench.py [--out DIR] [--runs N]
  writes DIR/vllm-itl.json (default Documentation/bench) and prints the
  table; each mode's log under build/bench/vllm-itl/.
    python3 tests/bench/vllm_itl_bench.py --report DIR/vllm-itl.json
  (any Python, no vLLM): prints the Markdown of benchmarks.md's section.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]
MODES = ("background", "inline")
DOC_BLOCKS = 64
BS = 32
OTHER_PROMPT = 256
OTHER_TOKENS = 120
HIT_AFTER = 20          # the other request's tokens before the hit arrives
HIT_NEW = 64


def one(mode: str, seed: int) -> dict:
    """One mode's measurement, in this process."""
    sys.path.insert(0, str(TOP / "tests" / "vllm"))
    import conftest                     # sets vLLM's environment first
    import tiny_model
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    import kvcache.vllm

    shape = tiny_model.Shape(hidden=512, layers=8, heads=8, kv_heads=8,
                             head_dim=64, intermediate=1024,
                             dtype="bfloat16")
    model = str(tiny_model.build(conftest.MODELS, shape))
    d = conftest.make_daemon(g3=True)
    try:
        ns = d.new_ns()
        e = conftest.Engine(model, conftest.ktc(
            d.sock, ns, background_loads=mode == "background"),
            kv_cache_memory_bytes=256 << 20)
        doc = conftest.tokens(1000 + seed, DOC_BLOCKS * BS)
        e.run([doc + conftest.tokens(2000 + seed, 40)], max_tokens=1)
        assert kvcache.vllm.wait_for_saves(60)
        end = time.monotonic() + 60
        while _stat(d, "g3_blocks") < DOC_BLOCKS:
            if time.monotonic() > end:
                raise RuntimeError("the document did not reach g3")
            time.sleep(0.1)
        d.ctl("flush", str(ns), "pool")
        e.fresh()
        dropped = _drop_caches()
        before = e.counters()
        eng = e.llm.llm_engine
        greedy = dict(temperature=0, ignore_eos=True, detokenize=False)
        eng.add_request("other", TokensPrompt(
            prompt_token_ids=conftest.tokens(3000 + seed, OTHER_PROMPT)),
            SamplingParams(max_tokens=OTHER_TOKENS, **greedy))
        times: list[float] = []
        t_add = t_hit = None
        while True:
            outs = eng.step()
            now = time.perf_counter()
            for o in outs:
                if o.request_id == "other":
                    n = len(o.outputs[0].token_ids)
                    times.extend([now] * (n - len(times)))
                elif o.request_id == "hit" and t_hit is None and \
                        o.outputs[0].token_ids:
                    t_hit = now
            if t_add is None and len(times) >= HIT_AFTER:
                eng.add_request("hit", TokensPrompt(
                    prompt_token_ids=doc + conftest.tokens(4000 + seed,
                                                           HIT_NEW)),
                    SamplingParams(max_tokens=1, **greedy))
                t_add = time.perf_counter()
            if len(times) >= OTHER_TOKENS and t_hit is not None:
                break
            if not eng.has_unfinished_requests():
                break
        after = e.counters()
        e.close()
    finally:
        d.cleanup()
    itl = [(b, b - a) for a, b in zip(times, times[1:])]
    pre = [x for t, x in itl if t <= t_add]
    during = [x for t, x in itl if t_add < t <= (t_hit or t)]
    # The step that gave the hit its first token ran its prefill (64
    # new tokens over the 2048 loaded): the other steps of the window
    # ran beside the load alone.
    prefill = [x for t, x in itl if t == t_hit]
    beside = [x for t, x in itl if t_add < t < (t_hit or t)]

    def delta(name: str) -> float:
        return after.get(name, 0) - before.get(name, 0)

    return {
        "mode": mode, "seed": seed, "page_cache_dropped": dropped,
        "itl_before_median_s": statistics.median(pre),
        "itl_during_max_s": max(during) if during else None,
        "itl_during_median_s": statistics.median(during) if during
        else None,
        "tokens_during": len(during),
        "itl_prefill_step_s": prefill[0] if prefill else None,
        "itl_beside_load_max_s": max(beside) if beside else None,
        "hit_ttft_s": (t_hit - t_add) if t_hit else None,
        "external_hit_tokens": delta("vllm:external_prefix_cache_hits"),
        "background_loads": delta("vllm:kvcache_background_loads"),
        "g3_hit_tokens": delta("vllm:kvcache_hit_tokens"),
    }


def _stat(d, name: str) -> int:
    for line in d.ctl("stats").splitlines():
        f = line.split()
        if len(f) >= 2 and f[0] == name:
            return int(f[1])
    return 0


def _drop_caches() -> bool:
    """As root: the page cache dropped, so g3's reads go to the disk."""
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1\n")
        return True
    except OSError:
        return False


def _med(rs: list[dict], k: str):
    v = [r[k] for r in rs if r.get(k) is not None]
    return statistics.median(v) if v else None


def summarize(results: list[dict]) -> dict:
    out: dict = {"modes": {}}
    for m in MODES:
        rs = [r for r in results if r["mode"] == m and "error" not in r]
        out["modes"][m] = {k: _med(rs, k) for k in (
            "itl_before_median_s", "itl_during_max_s", "itl_during_median_s",
            "itl_prefill_step_s", "itl_beside_load_max_s",
            "hit_ttft_s", "external_hit_tokens", "background_loads")}
        out["modes"][m]["runs"] = len(rs)
    bg = out["modes"]["background"].get("itl_during_max_s")
    il = out["modes"]["inline"].get("itl_during_max_s")
    out["stall_ratio"] = il / bg if bg and il else None
    return out


def _ms(v) -> str:
    return "-" if v is None else f"{v * 1000:.1f}"


def markdown(doc: dict) -> str:
    s = doc["summary"]
    lines = [
        f"- commit: {doc['commit']}; host CPU: {doc['cpu']}; "
        f"{doc['date']}",
        f"- command: `{doc['command']}`; raw data in "
        f"`Documentation/bench/vllm-itl.json`",
        f"- {doc['runs']} run(s); page cache dropped before each hit: "
        f"{'yes' if doc['dropped'] else 'no (not root)'}",
        "",
        "| loads | ITL before the hit, median (ms) | ITL while it "
        "loads, largest (ms) | median (ms) | largest / before | of "
        "which: the step with the hit's prefill (ms) | the largest of "
        "the steps beside the load (ms) | the hit's TTFT (s) | "
        "external hit tokens | background loads |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for m, label in (("background", "in the background (default)"),
                     ("inline", "inside the step")):
        r = s["modes"][m]
        before, worst = r.get("itl_before_median_s"), \
            r.get("itl_during_max_s")
        ratio = f"{worst / before:.1f}x" if before and worst else "-"
        ttft = r.get("hit_ttft_s")
        lines.append(
            f"| {label} | {_ms(before)} | {_ms(worst)} | "
            f"{_ms(r.get('itl_during_median_s'))} | {ratio} | "
            f"{_ms(r.get('itl_prefill_step_s'))} | "
            f"{_ms(r.get('itl_beside_load_max_s'))} | "
            f"{'-' if ttft is None else f'{ttft:.3f}'} | "
            f"{r.get('external_hit_tokens')} | "
            f"{r.get('background_loads')} |")
    ratio = s.get("stall_ratio")
    lines += ["", "The largest ITL of the decoding request while the hit "
              "loads, inside the step over in the background: "
              + (f"**{ratio:.2f}x**." if ratio else "not measured.")]
    bg = s["modes"]["background"]
    if bg.get("itl_beside_load_max_s") and bg.get("itl_before_median_s"):
        lines.append(
            "In the background, the steps that ran beside the load took "
            f"up to {bg['itl_beside_load_max_s'] / bg['itl_before_median_s']:.1f}x "
            "a decode step before it (the load's copy and kvcached's read "
            "share these two CPUs with the forward pass), and the step "
            "with the hit's own prefill "
            f"{_ms(bg.get('itl_prefill_step_s'))} ms, which no load mode "
            "avoids: inside the step, that one step also waits for the "
            "read and the copy.")
    return "\n".join(lines)


def run(args) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    logs = TOP / "build" / "bench" / "vllm-itl"
    logs.mkdir(parents=True, exist_ok=True)
    results = []
    for r in range(args.runs):
        order = MODES if r % 2 == 0 else MODES[::-1]
        for m in order:
            res = logs / f"{m}-{r}.json"
            with open(logs / f"{m}-{r}.log", "w") as log:
                p = subprocess.run([sys.executable, __file__, "--one", m,
                                    "--seed", str(r), "--json", str(res)],
                                   stdout=log, stderr=subprocess.STDOUT,
                                   timeout=args.timeout)
            if p.returncode != 0 or not res.exists():
                results.append({"mode": m, "seed": r,
                                "error": f"exit {p.returncode}, log "
                                         f"{logs / f'{m}-{r}.log'}"})
                continue
            results.append(json.loads(res.read_text()))
            print(json.dumps(results[-1]), flush=True)

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from vllm_bench import host_facts
    commit, cpu = host_facts()
    doc = {"commit": commit, "cpu": f"{cpu}, {os.cpu_count()} CPUs",
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "command": args.command or " ".join(sys.argv),
           "runs": args.runs,
           "dropped": all(r.get("page_cache_dropped") for r in results
                          if "error" not in r),
           "results": results, "summary": summarize(results)}
    (out / "vllm-itl.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(markdown(doc))
    return 1 if any("error" in r for r in results) else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(TOP / "Documentation" / "bench"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--command", help="the command to record")
    ap.add_argument("--report", help="print the Markdown of this JSON")
    ap.add_argument("--one", choices=MODES, help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--json", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.report:
        print(markdown(json.loads(Path(a.report).read_text())))
        return 0
    if a.one:
        Path(a.json).write_text(json.dumps(one(a.one, a.seed)) + "\n")
        return 0
    return run(a)


if __name__ == "__main__":
    sys.exit(main())
