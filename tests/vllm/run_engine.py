# SPDX-License-Identifier: GPL-2.0
"""vLLM in a process of its own, for the tests:

- with the kvcache connector: runs one prompt and writes its greedy
  output and vLLM's external-hit count as JSON (the two-process test runs
  it twice, as two engines of one node would);
- --serve: without any connector, the baseline outputs the tests compare
  with, one request per stdin line."""

from __future__ import annotations

import argparse
import json
import os
import sys

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def serve(model: str, engine_args: dict) -> int:
    """Without a connector: each stdin line {"prompts", "max_tokens"}
    gets a line of greedy outputs, computed from scratch."""
    # Our replies get the pipe to ourselves: whatever vLLM or torch
    # prints to fd 1 goes to stderr.
    real_out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    from conftest import Engine
    e = Engine(model, **engine_args)
    for line in sys.stdin:
        req = json.loads(line)
        e.llm.reset_prefix_cache()
        outs = e.run(req["prompts"], max_tokens=req.get("max_tokens", 6))
        real_out.write(json.dumps([o["tokens"] for o in outs]) + "\n")
        real_out.flush()
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--serve", action="store_true")
    ap.add_argument("--engine-args", default="{}",
                    help="--serve: more arguments of vLLM's LLM(), JSON")
    ap.add_argument("--socket")
    ap.add_argument("--namespace", type=int)
    ap.add_argument("--prompt")
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.serve:
        return serve(a.model, json.loads(a.engine_args))
    from conftest import Engine, ktc
    import kvcache.vllm
    e = Engine(a.model, ktc(a.socket, a.namespace))
    before = e.counters()
    out = e.run([json.loads(a.prompt)])[0]
    after = e.counters()
    name = "vllm:external_prefix_cache_hits"
    out["external_hits"] = after.get(name, 0) - before.get(name, 0)
    assert kvcache.vllm.wait_for_saves(30)
    with open(a.out, "w") as f:
        json.dump(out, f)
    e.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
