# SPDX-License-Identifier: GPL-2.0
"""The vLLM connector's identity (helper/python/kvcache/vllm/identity.py)
without vLLM: derive() on a stand-in vLLM configuration, request_fields()
on stand-in requests, and the namespace seed of keys.md (py_seed) over
what they give. Issue #36, finding 8: each collision below gave one key
to two different things."""

from __future__ import annotations

import os
import shutil
import sys
import types
from pathlib import Path

import pytest

from test_kvcache import py_seed

from kvcache.vllm.config import ConnectorConfig
from kvcache.vllm.identity import derive, request_fields

COMMIT_A = "a" * 40
COMMIT_B = "0123456789abcdef0123456789abcdef01234567"


class FullAttentionSpec:
    """derive() keys by the spec's class name: vLLM's, stood in."""
    block_size = 16
    num_kv_heads = 2
    head_size = 32
    page_size_bytes = 4096


@pytest.fixture(autouse=True)
def fake_vllm(monkeypatch, tmp_path):
    """derive() imports vllm and vllm.platforms: two stand-ins. The
    Hugging Face cache is the test's own (empty unless a test fills it)."""
    vllm = types.ModuleType("vllm")
    vllm.__version__ = "0.0-test"
    platforms = types.ModuleType("vllm.platforms")
    platforms.current_platform = types.SimpleNamespace(device_type="cpu")
    vllm.platforms = platforms
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.platforms", platforms)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)


def vllm_config(model: str, revision: str | None = None) -> tuple:
    mc = types.SimpleNamespace(
        model=model, revision=revision, tokenizer=model,
        tokenizer_revision=None, dtype="torch.bfloat16", quantization=None,
        hf_config=types.SimpleNamespace(architectures=["LlamaForCausalLM"]))
    vc = types.SimpleNamespace(
        model_config=mc,
        cache_config=types.SimpleNamespace(cache_dtype="auto"),
        parallel_config=types.SimpleNamespace(tensor_parallel_size=1,
                                              pipeline_parallel_size=1),
        load_config=types.SimpleNamespace(download_dir=None))
    kv = types.SimpleNamespace(kv_cache_groups=[types.SimpleNamespace(
        kv_cache_spec=FullAttentionSpec(), layer_names=["l0", "l1"])])
    return vc, kv


def seed(ident, lora: str = "", salt: bytes = b"") -> bytes:
    return py_seed(**ident.args(0, 0, lora, salt))


def model_dir(path: Path, weights: bytes) -> str:
    """A local checkpoint: a config and one weight file."""
    path.mkdir(parents=True)
    (path / "config.json").write_text('{"architectures": ["Llama"]}')
    (path / "model.safetensors").write_bytes(weights)
    return str(path)


def hub_cache(root: Path, repo: str, refs: dict[str, str]) -> Path:
    """A Hugging Face cache holding snapshots of repo, refs -> commits."""
    d = root / ("models--" + repo.replace("/", "--"))
    for ref, commit in refs.items():
        (d / "refs" / ref).parent.mkdir(parents=True, exist_ok=True)
        (d / "refs" / ref).write_text(commit)
        snap = d / "snapshots" / commit
        snap.mkdir(parents=True, exist_ok=True)
        (snap / "config.json").write_text("{}")
    return d


# ---- the model's weights ----------------------------------------------------


def test_two_finetunes_of_one_base_have_different_keys(tmp_path):
    """Same config.json, same weight file names and sizes, other bytes:
    a names-and-sizes digest gave both the same keys."""
    cfg = ConnectorConfig()
    a = model_dir(tmp_path / "ft-a", b"\x01" * 4096)
    b = model_dir(tmp_path / "ft-b", b"\x02" * 4096)
    ia = derive(*vllm_config(a), cfg)
    ib = derive(*vllm_config(b), cfg)
    assert ia.weights_revision != ib.weights_revision
    assert seed(ia) != seed(ib)
    # A copy of the same bytes elsewhere (another node) is the same model.
    shutil.copytree(a, tmp_path / "copy")
    ic = derive(*vllm_config(str(tmp_path / "copy")), cfg)
    assert ic.weights_revision == ia.weights_revision
    # Rewritten in place with other bytes of the same size: new keys.
    w = Path(a) / "model.safetensors"
    st = os.stat(w)
    w.write_bytes(b"\x03" * 4096)
    os.utime(w, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert derive(*vllm_config(a), cfg).weights_revision != \
        ia.weights_revision
    # A single-file checkpoint (GGUF) is fingerprinted by its content too.
    (tmp_path / "a.gguf").write_bytes(b"\x01" * 64)
    (tmp_path / "b.gguf").write_bytes(b"\x02" * 64)
    ga = derive(*vllm_config(str(tmp_path / "a.gguf")), cfg)
    gb = derive(*vllm_config(str(tmp_path / "b.gguf")), cfg)
    assert ga.weights_revision.startswith("dir-sha256:")
    assert ga.weights_revision != gb.weights_revision
    # The administrator's revision is taken as it is, with no reading.
    assert derive(*vllm_config(a), ConnectorConfig(revision="v7")
                  ).weights_revision == "v7"


def test_hub_name_without_revision_is_its_snapshot_commit(tmp_path):
    """A hub name with no revision was keyed by "": every version of the
    model shared keys. It is now the commit its cached snapshot is."""
    cache = tmp_path / "hf-home" / "hub"
    cfg = ConnectorConfig()
    with pytest.raises(ValueError, match="revision"):
        derive(*vllm_config("org/model"), cfg)
    refs = hub_cache(cache, "org/model", {"main": COMMIT_A})
    i1 = derive(*vllm_config("org/model"), cfg)
    assert i1.weights_revision == COMMIT_A
    # main moved on: new keys, never the old weights' KV.
    (refs / "refs" / "main").write_text(COMMIT_B)
    (refs / "snapshots" / COMMIT_B).mkdir()
    i2 = derive(*vllm_config("org/model"), cfg)
    assert i2.weights_revision == COMMIT_B
    assert seed(i1) != seed(i2)
    # A commit given to vLLM is that commit, cached or not; a tag is
    # followed to its commit; the snapshot directory itself too.
    assert derive(*vllm_config("org/other", COMMIT_A), cfg
                  ).weights_revision == COMMIT_A
    hub_cache(cache, "org/model", {"v1": COMMIT_A})
    assert derive(*vllm_config("org/model", "v1"), cfg
                  ).weights_revision == COMMIT_A
    with pytest.raises(ValueError):
        derive(*vllm_config("org/model", "v2"), cfg)
    snap = str(refs / "snapshots" / COMMIT_B)
    assert derive(*vllm_config(snap), cfg).weights_revision == COMMIT_B


# ---- per request: LoRA and salt ---------------------------------------------


def request(lora: tuple[str, str] | None = None, cache_salt=None):
    lr = None
    if lora:
        lr = types.SimpleNamespace(lora_name=lora[0], lora_path=lora[1])
    return types.SimpleNamespace(lora_request=lr, cache_salt=cache_salt)


def test_lora_name_and_path_do_not_run_into_each_other(tmp_path,
                                                        monkeypatch):
    """("fin", "s3:d") and ("fin:s3", "d") were both "fin:s3:d". The two
    adapters here have the same bytes: only the encoding tells them
    apart."""
    monkeypatch.chdir(tmp_path)
    for d in ("s3:d", "d"):
        os.mkdir(d)
        Path(d, "adapter_config.json").write_text('{"r": 8}')
        Path(d, "adapter_model.safetensors").write_bytes(b"\x05" * 512)
    ident = derive(*vllm_config(model_dir(tmp_path / "m", b"w")),
                   ConnectorConfig())
    cfg = ConnectorConfig()
    f1 = request_fields(request(("fin", "s3:d")), cfg)
    f2 = request_fields(request(("fin:s3", "d")), cfg)
    assert f1 is not None and f2 is not None
    assert f1[0] != f2[0]
    assert seed(ident, *f1) != seed(ident, *f2)
    # No adapter is not an adapter with empty fields.
    assert request_fields(request(), cfg)[0] == ""


def test_lora_keys_follow_the_adapter_content(tmp_path):
    """One name and path, the adapter retrained in place: new keys. An
    adapter that cannot be fingerprinted is neither loaded nor saved."""
    cfg = ConnectorConfig()
    ad = tmp_path / "adapter"
    ad.mkdir()
    (ad / "adapter_config.json").write_text('{"r": 8}')
    w = ad / "adapter_model.safetensors"
    w.write_bytes(b"\x06" * 512)
    f1 = request_fields(request(("fin", str(ad))), cfg)
    w.write_bytes(b"\x07" * 512)
    st = os.stat(w)
    os.utime(w, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    f2 = request_fields(request(("fin", str(ad))), cfg)
    assert f1 is not None and f2 is not None and f1[0] != f2[0]
    assert request_fields(request(("fin", "s3://b/fin")), cfg) is None
    # A hub adapter is its cached commit.
    hub_cache(tmp_path / "hf-home" / "hub", "org/fin", {"main": COMMIT_B})
    f3 = request_fields(request(("fin", "org/fin")), cfg)
    assert f3 is not None and COMMIT_B in f3[0]


def test_salt_and_cache_salt_do_not_run_into_each_other(tmp_path):
    """salt "a\\0b" alone and salt "a" with cache_salt "b" were both
    b"a\\0b"."""
    ident = derive(*vllm_config(model_dir(tmp_path / "m", b"w")),
                   ConnectorConfig())
    f1 = request_fields(request(), ConnectorConfig(salt="a\0b"))
    f2 = request_fields(request(cache_salt="b"), ConnectorConfig(salt="a"))
    assert f1[1] != f2[1]
    assert seed(ident, *f1) != seed(ident, *f2)
    # And each is stable: the same request, the same keys.
    assert request_fields(request(cache_salt="b"),
                          ConnectorConfig(salt="a")) == f2


class MLAAttentionSpec(FullAttentionSpec):
    """MLA: the same bytes on every tensor-parallel rank."""
    num_kv_heads = 1
    head_size = 576


class SlidingWindowSpec(FullAttentionSpec):
    sliding_window = 96
    extra_retained_tokens = 0


class MambaSpec:
    block_size = 16
    page_size_bytes = 4096


def _groups_config(*specs, tp: int = 1) -> tuple:
    vc, _ = vllm_config("/m")
    vc.parallel_config.tensor_parallel_size = tp
    kv = types.SimpleNamespace(kv_cache_groups=[
        types.SimpleNamespace(kv_cache_spec=sp, layer_names=[f"l{i}"])
        for i, sp in enumerate(specs)])
    return vc, kv


def test_one_group_keys_as_before_groups():
    """A dense model's layout string is the one it had before groups
    were keyed: its blocks stay hits across the upgrade."""
    ident = derive(*vllm_config("/m"), ConnectorConfig(revision="v1"))
    assert ident.kv_layout == ("vllm-0.0-test/cpu/attn-default/"
                               "FullAttentionSpec/LlamaForCausalLM/L2/H2/"
                               "D32/B16/page4096")
    assert ident.block_bytes == 2 * 4096


def test_each_group_keys_apart():
    ident = derive(*_groups_config(FullAttentionSpec(), SlidingWindowSpec()),
                   ConnectorConfig(revision="v1"))
    assert [g.kind for g in ident.groups] == ["full", "sliding"]
    assert ident.groups[1].window == 96
    g0 = py_seed(**ident.args(0, 0, "", b"", 0))
    g1 = py_seed(**ident.args(0, 0, "", b"", 1))
    assert g0 != g1


def test_mla_one_copy_for_every_tp_rank():
    mla = derive(*_groups_config(MLAAttentionSpec(), tp=2),
                 ConnectorConfig(revision="v1"))
    assert mla.groups[0].replicated
    assert py_seed(**mla.args(0, 0, "", b"")) == \
        py_seed(**mla.args(1, 0, "", b""))
    full = derive(*_groups_config(FullAttentionSpec(), tp=2),
                  ConnectorConfig(revision="v1"))
    assert py_seed(**full.args(0, 0, "", b"")) != \
        py_seed(**full.args(1, 0, "", b""))


def test_mamba_declined_by_name():
    with pytest.raises(ValueError, match="MambaSpec.*Mamba"):
        derive(*_groups_config(FullAttentionSpec(), MambaSpec()),
               ConnectorConfig(revision="v1"))


def _item(offset: int, length: int, ident: str, modality: str = "image"):
    return types.SimpleNamespace(
        modality=modality, identifier=ident, mm_hash=ident,
        mm_position=types.SimpleNamespace(offset=offset, length=length))


def test_multimodal_items_are_in_the_keys():
    """fold_mm(): blocks that end before the first item keep their token
    keys; from the block an item starts in, the key depends on the item's
    identity, modality, offset and length, and on every earlier item."""
    from kvcache.vllm.identity import fold_mm, mm_items

    bs = 16
    keys = [bytes([i]) * 32 for i in range(6)]
    red = mm_items([_item(40, 19, "red")])
    out = fold_mm(keys, red, bs)
    assert out[:2] == keys[:2]              # blocks [0,16) and [16,32)
    assert all(k != o and len(o) == 32 for k, o in zip(keys[2:], out[2:]))
    assert fold_mm(keys, mm_items([_item(40, 19, "red")]), bs) == out
    for other in ([_item(40, 19, "blue")], [_item(41, 19, "red")],
                  [_item(40, 18, "red")], [_item(40, 19, "red", "audio")],
                  [_item(40, 19, "red"), _item(70, 3, "x")]):
        o = fold_mm(keys, mm_items(other), bs)
        assert o[:2] == keys[:2]
        diff = [i for i in range(6) if o[i] != out[i]]
        assert diff, other
        # a second item changes only the blocks from its own start on
        first = min(it[0] for it in mm_items(other)
                    if it not in red) // bs
        assert diff[0] == first, (other, diff)
    # items are taken in offset order whatever order vLLM lists them in
    two = [_item(70, 3, "x"), _item(40, 19, "red")]
    assert fold_mm(keys, mm_items(two), bs) == \
        fold_mm(keys, mm_items(two[::-1]), bs)
    assert fold_mm(keys, [], bs) == keys
    with pytest.raises(ValueError):
        mm_items([_item(40, 19, "")])
