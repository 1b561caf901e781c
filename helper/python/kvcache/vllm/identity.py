# SPDX-License-Identifier: GPL-2.0
"""What makes a vLLM engine's KV reusable by another: the namespace
identity (Documentation/userspace-api/keys.md) derived from the vLLM
configuration.

Two engines share a block only when every field below is equal; any
difference makes different keys, so a hit is never the KV of another
model, precision, layout or shard:

- model: the configured model_id, else vLLM's model (a hub name or a
  local path);
- weights_revision: the configured revision (the administrator's word),
  else the commit of the weights: vLLM's revision when it is a commit, else
  the commit a Hugging Face cache snapshot of the model resolves to (a
  branch or tag name, "main" by default, is followed to its commit: a
  name alone would keep serving KV of weights that moved on), else (a
  local directory that is no snapshot) a SHA-256 of its config and weight
  files' content; a hub model with none of these disables the connector
  (set its revision);
- tokenizer: vLLM's tokenizer and its revision;
- kv_layout: vLLM's version, the platform and attention backend, the
  model architecture and, for each KV cache group, its spec (kind,
  sliding window or attention chunk with the tokens kept below it,
  layers, KV heads, head size, block size, bytes per block and layer).
  A model of several groups (hybrid sliding-window models) keys each
  group's blocks apart: a group's blocks are found only under its own
  spec (_groups(), Group);
- kv_dtype: the KV cache dtype, the model dtype and its quantization;
- tokens_per_block: vLLM's block size;
- tp/pp rank and size: each rank stores its own shard;
- per request: the LoRA adapter (its name, path and a fingerprint of its
  content, or its snapshot's commit) and cache_salt, with the configured
  salt.

A field made of several parts encodes each with its length first
(pack_str(), pack_bytes()), so no two different tuples of parts give the
same field: ("fin", "s3://b/fin") is not ("fin:s3", "//b/fin").
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import struct
from dataclasses import dataclass
from typing import Any

from .config import ConnectorConfig


# KV cache spec classes the connector keys, by vLLM's class name, and the
# kind of hit each makes (hits.py): "full" needs every block of a
# prefix, "sliding" the blocks of the window before its end, "chunked"
# those of its last attention chunk, "mamba" (Mamba and linear-attention
# state, in vLLM's "align" mode) the state in the prefix's last block.
# MLA's latent blocks and Mamba states are copied as raw bytes like any
# other. Anything else (sinks kept in the cache, ring buffers, encoder
# and cross attention) is declined.
SPEC_KINDS = {
    "FullAttentionSpec": "full",
    "MLAAttentionSpec": "full",
    "SlidingWindowSpec": "sliding",
    "ChunkedLocalAttentionSpec": "chunked",
    "MambaSpec": "mamba",
}


@dataclass(frozen=True)
class Group:
    """One KV cache group of vLLM's: layers sharing a block table."""
    kind: str                   # SPEC_KINDS' values
    window: int                 # sliding window or attention chunk, tokens
    retained: int               # extra tokens kept below a window
    layers: tuple[str, ...]     # vLLM's layer names, in its order
    layer_bytes: int            # one block of one layer
    spec: str                   # the group's part of kv_layout
    # Every tensor-parallel rank holds the same bytes (MLA's latent KV
    # is not split by heads): one copy is stored, for every rank.
    replicated: bool = False

    @property
    def block_bytes(self) -> int:
        return self.layer_bytes * len(self.layers)


@dataclass(frozen=True)
class Identity:
    model: str
    weights_revision: str
    tokenizer: str
    kv_layout: str
    kv_dtype: str
    tokens_per_block: int
    tp_size: int
    pp_size: int
    groups: tuple[Group, ...] = ()

    @property
    def block_bytes(self) -> int:
        """Bytes of one block position, every group's layers."""
        return sum(g.block_bytes for g in self.groups)

    @property
    def max_group_bytes(self) -> int:
        """The largest block kvcached holds: one group's."""
        return max((g.block_bytes for g in self.groups), default=0)

    def args(self, tp_rank: int, pp_rank: int, lora: str,
             salt: bytes, group: int = 0) -> dict[str, Any]:
        """kvcache.Client.namespace()'s identity arguments. Each group of
        a hybrid model keys its own blocks (its layers only): its index
        is part of the layout. A model of one group keys as it always did."""
        layout = self.kv_layout if len(self.groups) <= 1 else \
            pack_str(self.kv_layout, f"group{group}")
        tp_size = self.tp_size
        if group < len(self.groups) and self.groups[group].replicated:
            tp_rank, tp_size = 0, 1     # one identity for every rank
        return dict(model=self.model, weights_revision=self.weights_revision,
                    tokenizer=self.tokenizer, kv_layout=layout,
                    kv_dtype=self.kv_dtype, lora=lora, salt=salt,
                    tokens_per_block=self.tokens_per_block,
                    tp_rank=tp_rank, tp_size=tp_size,
                    pp_rank=pp_rank, pp_size=self.pp_size)


def pack_str(*parts: str) -> str:
    """Parts of a string field, each as its UTF-8 length in decimal, ':'
    and itself: a netstring without the comma, unambiguous because the
    length comes first."""
    return "".join(f"{len(p.encode())}:{p}" for p in parts)


def pack_bytes(*parts: bytes) -> bytes:
    """Parts of a bytes field, each as a u32 little-endian length and
    itself (the encoding of keys.md's fields)."""
    return b"".join(struct.pack("<I", len(p)) + p for p in parts)


# Multimodal prompts. A prompt's tokens hold the same placeholder ids
# whatever the image (or audio, video) behind them: the item itself must
# be in the key. vLLM's own block hash adds ("mm", identifier, offset)
# to each block an item overlaps, and later blocks depend on it through
# the chain. The same here: mm_items() lists the items, fold_mm() makes
# each block key that ends past an item's first token a digest of the
# token key and every item that starts before that block's end. Blocks
# before the first item keep their keys, so a text prefix is shared
# with the same text without an image, as in vLLM.
_MM_TAG = b"kvcache-mm-v1\0"


def mm_items(features: Any) -> list[tuple[int, int, bytes]]:
    """(offset, length, encoded identity) of each multimodal item of a
    request (vLLM's MultiModalFeatureSpec: its modality and identifier,
    the content hash vLLM's encoder cache and prefix cache use), in
    offset order; ValueError for an item vLLM gave no identifier."""
    out = []
    for f in features or ():
        pos = getattr(f, "mm_position", None)
        ident = getattr(f, "identifier", None) or getattr(f, "mm_hash", None)
        if pos is None or not ident:
            raise ValueError("a multimodal item without a position or an "
                             "identifier")
        out.append((int(pos.offset), int(pos.length),
                    pack_bytes(str(getattr(f, "modality", "") or "").encode(),
                               str(ident).encode())))
    return sorted(out)


def fold_mm(keys: list[bytes], items: list[tuple[int, int, bytes]],
            tokens_per_block: int) -> list[bytes]:
    """keys (one per block, from the token ids) with the items folded in:
    block i's key is SHA-256(tag, every item starting before the block's
    end as offset, length and identity, the token key); a block ending at
    or before the first item keeps its key."""
    if not items:
        return keys
    acc = hashlib.sha256(_MM_TAG)
    out: list[bytes] = []
    j = 0
    for i, k in enumerate(keys):
        end = (i + 1) * tokens_per_block
        while j < len(items) and items[j][0] < end:
            off, length, ident = items[j]
            acc.update(struct.pack("<QQ", off, length) + ident)
            j += 1
        if j == 0:
            out.append(k)
            continue
        d = acc.copy()
        d.update(k)
        out.append(d.digest())
    return out


_COMMIT = re.compile(r"[0-9a-f]{40}")
# The files whose content is the model or adapter: its configuration
# (config.json, adapter_config.json, the index of a sharded checkpoint)
# and its weights.
_CONTENT_SUFFIXES = (".json", ".safetensors", ".bin", ".pt", ".pth",
                     ".gguf")
# A digest is reused while every file's name, size, mtime and inode stay
# the same: an adapter's is asked for at every request.
_digests: dict[tuple, str] = {}
_DIGESTS_MAX = 256


def _file_sha256(path: str) -> bytes:
    with open(path, "rb") as f:
        if hasattr(hashlib, "file_digest"):
            return hashlib.file_digest(f, "sha256").digest()
        h = hashlib.sha256()
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
        return h.digest()


def content_digest(path: str) -> str | None:
    """A local model or adapter directory's fingerprint (or a single
    weight file's): the SHA-256 of its configuration and weight files'
    names, sizes and content (two fine-tunes of one base have the same
    names and sizes, not the same bytes). Costs one read of the weights
    at start, which vLLM makes too; a configured revision skips it. None
    when it cannot be read."""
    try:
        files = []
        if os.path.isfile(path):
            # One file (a GGUF checkpoint): itself, under its own name.
            path, one = os.path.split(os.path.abspath(path))
            names = [one]
        else:
            names = [n for n in sorted(os.listdir(path))
                     if n.endswith(_CONTENT_SUFFIXES)]
        for name in names:
            st = os.stat(os.path.join(path, name))
            if stat.S_ISREG(st.st_mode):
                files.append((name, st.st_size, st.st_mtime_ns,
                              st.st_ino, st.st_dev))
        memo = (os.path.realpath(path), tuple(files))
        if memo in _digests:
            return _digests[memo]
        h = hashlib.sha256(b"kvcache-weights-v2\0")
        for name, size, *_ in files:
            h.update(pack_bytes(name.encode(), struct.pack("<Q", size),
                                _file_sha256(os.path.join(path, name))))
    except OSError:
        return None
    if not files:
        return None
    digest = "dir-sha256:" + h.hexdigest()
    if len(_digests) >= _DIGESTS_MAX:
        _digests.clear()
    _digests[memo] = digest
    return digest


def _hub_caches(download_dir: str | None) -> list[str]:
    """Where a Hugging Face cache may be: vLLM's download_dir, then
    huggingface_hub's own order ($HF_HUB_CACHE, $HF_HOME/hub, ~/.cache)."""
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
        "huggingface")
    dirs = [download_dir, os.environ.get("HF_HUB_CACHE"),
            os.environ.get("HUGGINGFACE_HUB_CACHE"), os.path.join(home, "hub")]
    return [d for d in dirs if d]


def snapshot_commit(path: str) -> str | None:
    """The commit of a directory that is a Hugging Face cache snapshot
    (<cache>/models--org--name/snapshots/<commit>), else None."""
    real = os.path.realpath(path)
    commit = os.path.basename(real)
    parent = os.path.dirname(real)
    if _COMMIT.fullmatch(commit) and os.path.basename(parent) == "snapshots" \
            and os.path.basename(os.path.dirname(parent)).startswith(
                ("models--", "lora--")):
        return commit
    return None


def hub_commit(repo_id: str, revision: str | None,
               caches: list[str]) -> str | None:
    """The commit a hub name and revision stand for: the revision itself
    when it is a commit, else what the cache's refs/<revision> (main by
    default) names, as huggingface_hub resolved it when it downloaded."""
    if revision and _COMMIT.fullmatch(revision):
        return revision
    ref = revision or "main"
    if ref.startswith("/") or ".." in ref.split("/"):
        return None
    repo = "models--" + repo_id.replace("/", "--")
    for cache in caches:
        try:
            with open(os.path.join(cache, repo, "refs", ref)) as f:
                commit = f.read().strip()
        except OSError:
            continue
        if _COMMIT.fullmatch(commit) and \
                os.path.isdir(os.path.join(cache, repo, "snapshots", commit)):
            return commit
    return None


def weights_revision(model: str, configured: str | None,
                     vllm_revision: str | None,
                     download_dir: str | None = None) -> str:
    """The identity's weights_revision (the module's docstring);
    ValueError when the weights have no revision the connector can
    trust."""
    if configured:
        return configured
    if os.path.isdir(model) or os.path.isfile(model):
        rev = (os.path.isdir(model) and snapshot_commit(model)) or \
            content_digest(model)
        if not rev:
            raise ValueError(f"model directory {model!r}: no weight files "
                             f"to fingerprint (set the connector's "
                             f"revision)")
        return rev
    rev = hub_commit(model, vllm_revision, _hub_caches(download_dir))
    if not rev:
        raise ValueError(f"model {model!r} (revision "
                         f"{vllm_revision or 'main'!r}): no commit found "
                         f"in the Hugging Face cache; set vLLM's revision "
                         f"to a commit or the connector's revision")
    return rev


def lora_fingerprint(path: str, download_dir: str | None = None
                     ) -> str | None:
    """What an adapter's weights are: a local directory's snapshot commit
    or content digest, a hub name's cached commit; None when neither can
    be known (its requests are then neither loaded nor saved)."""
    if not path:
        return None
    if os.path.isdir(path):
        return snapshot_commit(path) or content_digest(path)
    return hub_commit(path, None, _hub_caches(download_dir))


def _groups(kv_cache_config: Any) -> tuple[list[Group], int]:
    """The KV cache groups the connector keys, and vLLM's block size;
    ValueError for a model it cannot key (one line: the decline)."""
    if kv_cache_config is None:
        raise ValueError("vLLM gave no KV cache configuration (a vLLM "
                         "older than the KV connector API of 0.32?)")
    groups = list(getattr(kv_cache_config, "kv_cache_groups", []) or [])
    if not groups:
        raise ValueError("the model has no KV cache groups")
    out: list[Group] = []
    block_size = 0
    for i, g in enumerate(groups):
        spec = g.kv_cache_spec
        name = type(spec).__name__
        kind = SPEC_KINDS.get(name)
        if kind is None:
            what = "not a kind the connector keys"
            raise ValueError(f"KV cache group {i} is {name} ({what}); "
                             f"supported: {', '.join(sorted(SPEC_KINDS))}")
        if kind == "mamba":
            _mamba_ok(i, spec)
        if getattr(g, "enable_kv_transfer", True) is False:
            raise ValueError(f"KV cache group {i} ({name}) is not "
                             f"transferable")
        bs = int(spec.block_size)
        if block_size and bs != block_size:
            raise ValueError(f"KV cache groups of {block_size} and {bs} "
                             f"tokens per block")
        block_size = bs
        if kind == "sliding":
            window = int(spec.sliding_window)
        elif kind == "chunked":
            window = int(spec.attention_chunk_size)
        else:
            window = 0
        retained = int(getattr(spec, "extra_retained_tokens", 0) or 0)
        page = int(spec.page_size_bytes)
        layers = tuple(str(n) for n in g.layer_names)
        if kind == "mamba":
            # The state's bytes, not the page padded to the attention
            # groups' size: what the worker's tensor view holds.
            page = int(spec.real_page_size_bytes)
            desc = "/".join([name, f"L{len(layers)}", f"B{bs}",
                             f"page{page}", _mamba_desc(spec)])
        else:
            desc = "/".join([name, f"L{len(layers)}",
                             f"H{getattr(spec, 'num_kv_heads', 0)}",
                             f"D{getattr(spec, 'head_size', 0)}",
                             f"B{bs}", f"page{page}"])
        if kind in ("sliding", "chunked"):
            desc += f"/W{window}+{retained}"
        out.append(Group(kind=kind, window=window, retained=retained,
                         layers=layers, layer_bytes=page, spec=desc,
                         replicated=name == "MLAAttentionSpec" or
                         (kind == "mamba" and
                          bool(getattr(spec, "tp_replicated", False)))))
    return out, block_size


def _mamba_ok(i: int, spec: Any) -> None:
    """ValueError unless a Mamba group's states can be stored per block:
    vLLM's "align" prefix caching, where the state after a block's last
    token is kept in that block (the only states vLLM itself reuses),
    without the speculative blocks (MTP/EAGLE) that move states around.
    Prefill checkpoint blocks need no check: their states reach the
    connector through the same hand-offs (scheduler._save_states)."""
    mode = getattr(spec, "mamba_cache_mode", "none")
    if mode != "align":
        raise ValueError(f"KV cache group {i} is MambaSpec in "
                         f"mamba_cache_mode {mode!r}: only 'align' (vLLM's "
                         f"prefix caching of Mamba states) is cached")
    if int(getattr(spec, "num_speculative_blocks", 0) or 0):
        raise ValueError(f"KV cache group {i} is MambaSpec with speculative "
                         f"blocks (MTP/EAGLE): not cached")


def _mamba_desc(spec: Any) -> str:
    """A Mamba state's layout: the shapes and dtypes of its parts (conv
    and SSM state), the kind of layer and how vLLM orients the conv
    state (VLLM_SSM_CONV_STATE_LAYOUT): all change its bytes."""
    parts = ",".join(
        "x".join(str(d) for d in shape) + ":" +
        str(dtype).replace("torch.", "")
        for shape, dtype in zip(spec.shapes, spec.dtypes))
    kind = getattr(spec, "mamba_type", "")
    kind = getattr(kind, "name", None) or str(kind)
    conv = os.environ.get("VLLM_SSM_CONV_STATE_LAYOUT", "")
    return f"{kind}/{parts}/conv{conv or 'default'}"


def derive(vllm_config: Any, kv_cache_config: Any,
           cfg: ConnectorConfig) -> Identity:
    import vllm
    from vllm.platforms import current_platform

    mc = vllm_config.model_config
    cc = vllm_config.cache_config
    pc = vllm_config.parallel_config
    groups, block_size = _groups(kv_cache_config)
    if any(g.replicated for g in groups) and \
            getattr(cc, "enable_prefix_caching", True) is False:
        # vLLM's CPU MLA backend computes a prefill with plain SDPA over
        # the new tokens only, and so turns prefix caching off: KV loaded
        # before the pass would not be attended (measured: other tokens).
        raise ValueError("MLAAttentionSpec with vLLM's prefix caching "
                         "off: this platform's MLA backend cannot attend "
                         "to KV it did not compute in the same pass")

    model = cfg.model_id or str(mc.model)
    load = getattr(vllm_config, "load_config", None)
    rev = weights_revision(str(mc.model), cfg.revision,
                           getattr(mc, "revision", None),
                           getattr(load, "download_dir", None))
    tok = f"{getattr(mc, 'tokenizer', '') or ''}@" \
          f"{getattr(mc, 'tokenizer_revision', '') or ''}"
    attn = getattr(vllm_config, "attention_config", None)
    backend = getattr(attn, "backend", None) if attn is not None else None
    archs = ",".join(getattr(mc.hf_config, "architectures", None) or [])
    parts = [f"vllm-{vllm.__version__}", f"{current_platform.device_type}",
             f"attn-{backend or 'default'}"]
    if len(groups) == 1:
        # The layout of a one-group model as before groups were keyed:
        # its blocks stay hits across the upgrade.
        g = groups[0]
        spec = g.spec.split("/")
        parts += [spec[0], archs or "arch-unknown"] + spec[1:]
    else:
        parts += [archs or "arch-unknown", f"groups{len(groups)}"] + \
            [pack_str(g.spec) for g in groups]
    layout = "/".join(parts)
    dtype = f"{cc.cache_dtype}/{str(mc.dtype).replace('torch.', '')}"
    quant = getattr(mc, "quantization", None)
    if quant:
        dtype += f"/{quant}"
    return Identity(model=model, weights_revision=str(rev), tokenizer=tok,
                    kv_layout=layout, kv_dtype=dtype,
                    tokens_per_block=block_size,
                    tp_size=int(pc.tensor_parallel_size),
                    pp_size=int(pc.pipeline_parallel_size),
                    groups=tuple(groups))


def request_fields(request: Any, cfg: ConnectorConfig
                   ) -> tuple[str, bytes] | None:
    """A request's own identity fields: (lora, salt), each part with its
    length first; None when the request's adapter cannot be fingerprinted
    (neither loaded nor saved, like a multimodal prompt)."""
    lora = ""
    lr = getattr(request, "lora_request", None)
    if lr is not None:
        path = getattr(lr, "lora_path", "") or ""
        fp = lora_fingerprint(path)
        if fp is None:
            return None
        lora = "lora-v2:" + pack_str(str(lr.lora_name), path, fp)
    salt = pack_bytes(cfg.salt.encode())
    cs = getattr(request, "cache_salt", None)
    if cs:
        salt += pack_bytes(str(cs).encode())
    return lora, salt
