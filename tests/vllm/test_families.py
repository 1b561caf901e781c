# SPDX-License-Identifier: GPL-2.0
"""Model families other than dense full attention, with the connector
on: the engine starts, keeps vLLM's hybrid KV cache manager, and its
greedy tokens equal vLLM's own without any connector, for prompts that
are a local hit, an external hit and new tokens, at prefix lengths
around the sliding window. Hybrid sliding-window models are cached and
loaded; what the connector cannot key is declined with one log line and
never touched (Documentation/userspace-api/vllm.md, "Model families")."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import types

import pytest

import tiny_model
from conftest import BS, HERE, Engine, corrupt_g3, ktc, model_dir, tokens

# Cached: family -> its groups' kinds (tiny_model.FAMILIES: window 96
# tokens, 3 blocks).
CACHED = {
    "gpt-oss": {"full", "sliding"},
    "gemma3": {"full", "sliding"},
    "mistral-sw": {"sliding"},
}
# Declined: case -> the family, its engine's settings, and what the
# one log line says.
DECLINED = {
    # Mamba states without vLLM's prefix caching ("align" mode): vLLM
    # keeps no state a later prompt could reuse, nor can kvcache.
    "qwen3-next-no-prefix-caching": ("qwen3-next",
                                     dict(enable_prefix_caching=False),
                                     "mamba_cache_mode 'none'"),
}
WINDOW_BLOCKS = 3


def _delta(after, before, name):
    return after.get(name, 0) - before.get(name, 0)


def _no_hma_off(e: Engine) -> None:
    """vLLM kept its hybrid manager: the connector says SupportsHMA."""
    sc = e.llm.llm_engine.vllm_config.scheduler_config
    assert not getattr(sc, "disable_hybrid_kv_cache_manager", False)


@pytest.mark.parametrize("family", sorted(CACHED))
def test_hybrid_family_cached_and_identical(baseline, family, daemon,
                                            engines, kvlog):
    ns = daemon.new_ns()
    doc = tokens(21, 10 * BS)
    a = doc + tokens(22, 40)                    # stores 11 blocks
    # b: a local hit of 2 blocks; c..: external hits of a's prefix whose
    # ends sit around the window (window-1, window, window+1 blocks past
    # the local hit, and the whole document).
    b = doc[:2 * BS] + tokens(23, 50)
    ends = [2 + WINDOW_BLOCKS - 1, 2 + WINDOW_BLOCKS, 2 + WINDOW_BLOCKS + 1,
            10]
    cs = [doc[:k * BS] + tokens(30 + k, 45) for k in ends]
    want = baseline(family, [a, b] + cs)
    e = Engine(model_dir(family), ktc(daemon.sock, ns))
    engines.append(e)
    _no_hma_off(e)
    assert e.run([a])[0]["tokens"] == want[0]
    for k, c, w in zip(ends, cs, want[2:]):
        e.fresh()                               # kvcache keeps a's blocks
        assert e.run([b])[0]["tokens"] == want[1]
        before = e.counters()
        out = e.run([c])[0]
        after = e.counters()
        assert out["tokens"] == w, (family, k)
        ext = _delta(after, before, "vllm:external_prefix_cache_hits")
        local = _delta(after, before, "vllm:prefix_cache_hits")
        # Everything past b's local blocks, up to c's last full block
        # before its new tokens, comes from kvcache.
        assert local + ext == k * BS, (family, k, local, ext)
        assert ext >= (k - 2) * BS, (family, k, local, ext)
        # Several KV cache groups: loaded in the background, DRAM hits
        # too (the only way vLLM takes a failed load of such a model).
        bg = 1 if ext and len(CACHED[family]) > 1 else 0
        assert _delta(after, before, "vllm:kvcache_background_loads") == bg
    assert not [r for r in kvlog.at(logging.ERROR)], kvlog.dump()


@pytest.mark.parametrize("family", ["gpt-oss"])
def test_hybrid_failed_load_recomputes_the_request(baseline, family,
                                                   daemon_g3, engines,
                                                   kvlog):
    """g3 files corrupted under a hybrid model's hit: kvcached's checksum
    refuses them at load. vLLM cannot map block ids back to a request
    when a model has several KV cache groups (it stops the engine), so
    the connector fails the request instead (failed_recving): vLLM
    recomputes it, its tokens are vLLM's."""
    d = daemon_g3
    ns = d.new_ns()
    doc = tokens(51, 6 * BS)
    a = doc + tokens(52, 40)
    c = doc + tokens(53, 50)
    want = baseline(family, [a, c])
    # No lookup on arrival: its read-up would find the corruption first
    # (a miss then), and this is about a load that fails.
    e = Engine(model_dir(family), ktc(d.sock, ns, lookup_on_arrival=False))
    engines.append(e)
    assert e.run([a])[0]["tokens"] == want[0]
    e.fresh()
    d.stop()
    corrupt_g3(d)
    d.start()
    before = e.counters()
    assert e.run([c])[0]["tokens"] == want[1]
    after = e.counters()
    # (The warning is said once a process: test_connector.py's own
    # corrupted-file test may have said it.)
    assert _delta(after, before, "vllm:kvcache_load_failed_blocks") > 0
    assert not kvlog.at(logging.ERROR), kvlog.dump()


def test_mamba_states_cached_and_identical(baseline, daemon, engines,
                                           kvlog, tmp_path):
    """Qwen3-Next (gated delta net and full attention), vLLM's prefix
    caching on: its "align" mode keeps the state after a block boundary
    where a prefill step ended there (one block before the prompt's end
    at least), and kvcache stores those states with the attention
    blocks. The same document with other text after it loads the
    attention blocks and the state at its boundary; a prefix ending
    where no state was kept is not claimed (vLLM keeps none there
    either). Tokens equal vLLM's own each time, and in a second engine
    process, whose blocks never held the first one's states."""
    ns = daemon.new_ns()
    e = Engine(model_dir("qwen3-next"), ktc(daemon.sock, ns))
    engines.append(e)
    _no_hma_off(e)
    bs = e.llm.llm_engine.vllm_config.cache_config.block_size
    doc = tokens(91, 3 * bs)
    a = doc + tokens(92, 40)
    c = doc + tokens(93, 50)
    d = doc[:2 * bs] + tokens(94, 30)
    want = baseline("qwen3-next", [a, c, d])
    assert e.run([a])[0]["tokens"] == want[0]
    for p, w, hit in ((c, want[1], 3 * bs), (d, want[2], 0)):
        e.fresh()
        before = e.counters()
        assert e.run([p])[0]["tokens"] == w
        after = e.counters()
        assert _delta(after, before,
                      "vllm:external_prefix_cache_hits") == hit, (bs, hit)
    assert not kvlog.at(logging.ERROR), kvlog.dump()
    out = tmp_path / "second.json"
    r = subprocess.run(
        [sys.executable, str(HERE / "run_engine.py"),
         "--model", model_dir("qwen3-next"), "--socket", daemon.sock,
         "--namespace", str(ns), "--prompt", json.dumps(c),
         "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    second = json.loads(out.read_text())
    assert second["tokens"] == want[1]
    assert second["external_hits"] == 3 * bs


def _words(seed: int, n: int) -> list[int]:
    """Token ids of the VLM's plain words (past its special tokens)."""
    import random
    r = random.Random(seed)
    return [r.randrange(60, tiny_model.VLM_VOCAB) for _ in range(n)]


def test_multimodal_same_image_hits_another_never(baseline, daemon,
                                                  engines, kvlog):
    """A vision-language model (Idefics3): the blocks an image's
    placeholder tokens reach carry the image's identity in their keys.
    The same image comes back from kvcache past the placeholder; another
    image of the same size, same tokens, hits only the blocks that end
    before the placeholder, as vLLM's own prefix cache does. Tokens
    equal vLLM's own each time."""
    vlm = dict(skip_tokenizer_init=False, limit_mm_per_prompt={"image": 1})
    red, blue = [200, 30, 30], [30, 30, 200]
    ns = daemon.new_ns()
    pre, post = _words(61, 70), _words(62, 120)
    img = [tiny_model.VLM_IMAGE_ID]
    a = {"ids": pre + img + post, "image": red}
    c = {"ids": pre + img + post[:100] + _words(63, 30), "image": red}
    d = {"ids": c["ids"], "image": blue}
    want = baseline("idefics3", [a, c, d], **vlm)
    e = Engine(model_dir("idefics3"), ktc(daemon.sock, ns), **vlm)
    engines.append(e)
    assert e.run([a])[0]["tokens"] == want[0]
    # c shares a's first 70 + 19 + 100 tokens, the image included: five
    # whole blocks. d differs from c in its image only (at token 70, in
    # block 2): blocks 0 and 1.
    for p, w, hit in ((c, want[1], 5 * BS), (d, want[2], 2 * BS)):
        e.fresh()
        before = e.counters()
        assert e.run([p])[0]["tokens"] == w
        after = e.counters()
        assert _delta(after, before,
                      "vllm:external_prefix_cache_hits") == hit, p["image"]
    assert not kvlog.at(logging.ERROR), kvlog.dump()


def test_mla_declined_where_vllm_cannot_attend_loaded_kv(baseline, daemon,
                                                       engines, kvlog):
    """DeepSeek-V2-shaped MLA on the CPU build: vLLM forces 16-token
    blocks and turns its own prefix cache off, as its CPU MLA prefill
    attends only to the tokens of the pass. KV loaded before it would
    not be attended (tried: other tokens from the first one), so the
    connector declines MLA there, and the engine's tokens stay vLLM's."""
    ns = daemon.new_ns()
    doc = tokens(41, 160)                   # 10 blocks of 16 tokens
    a = doc + tokens(42, 20)
    c = doc + tokens(43, 30)
    # One prompt a batch, as the engine runs them: the CPU MLA backend's
    # results depend on the batch.
    want = [baseline("deepseek-v2", [p])[0] for p in (a, c)]
    e = Engine(model_dir("deepseek-v2"), ktc(daemon.sock, ns))
    engines.append(e)
    kv = e.llm.llm_engine.vllm_config.cache_config
    assert kv.block_size == 16 and not kv.enable_prefix_caching
    assert e.run([a])[0]["tokens"] == want[0]
    e.fresh()
    before = e.counters()
    assert e.run([c])[0]["tokens"] == want[1]
    after = e.counters()
    assert _delta(after, before, "vllm:external_prefix_cache_hits") == 0
    declined = [r for r in kvlog.at(logging.ERROR)
                if "connector disabled" in r]
    assert len(declined) == 1 and "MLAAttentionSpec" in declined[0], \
        kvlog.dump()


@pytest.mark.parametrize("case", sorted(DECLINED))
def test_declined_family_starts_and_tokens_equal(baseline, case, daemon,
                                                 engines, kvlog):
    family, kw, says = DECLINED[case]
    ns = daemon.new_ns()
    doc = tokens(11, 6 * BS)
    a = doc + tokens(12, 40)
    c = a + tokens(14, 70)
    want = baseline(family, [a, c], **kw)
    e = Engine(model_dir(family), ktc(daemon.sock, ns), **kw)
    engines.append(e)
    _no_hma_off(e)
    assert e.run([a])[0]["tokens"] == want[0]
    e.fresh()
    assert e.run([c])[0]["tokens"] == want[1]
    declined = [r for r in kvlog.at(logging.ERROR)
                if "connector disabled" in r]
    assert len(declined) == 1, kvlog.dump()     # one line an engine
    assert says in declined[0], declined


def test_windows_as_vllm_keeps_them():
    """hits.skipped() restates vLLM's own managers: checked against
    them for windows, retained tokens and chunks around block edges, and
    Mamba's one state."""
    from vllm.v1.core.single_type_kv_cache_manager import (
        ChunkedLocalAttentionManager, MambaManager, SlidingWindowManager)

    from kvcache.vllm.hits import skipped
    from kvcache.vllm.identity import Group

    for bs in (16, 32):
        for w in (1, 31, 32, 33, 96, 128, 4096):
            for r in (0, 1, 32):
                g = Group("sliding", w, r, ("l",), 1, "")
                me = types.SimpleNamespace(sliding_window=w,
                                           extra_retained_tokens=r)
                for n in range(0, 300):
                    theirs = SlidingWindowManager.get_num_skipped_tokens(
                        me, n * bs) // bs
                    assert skipped(g, n, bs) == theirs, (bs, w, r, n)
            g = Group("chunked", w, 0, ("l",), 1, "")
            me = types.SimpleNamespace(attention_chunk_size=w)
            for n in range(0, 300):
                theirs = ChunkedLocalAttentionManager.get_num_skipped_tokens(
                    me, n * bs) // bs
                assert skipped(g, n, bs) == theirs, (bs, w, n)
        g = Group("mamba", 0, 0, ("l",), 1, "")
        for n in range(1, 300):
            theirs = MambaManager.get_num_skipped_tokens(None, n * bs) // bs
            assert skipped(g, n, bs) == theirs, (bs, n)
