# SPDX-License-Identifier: GPL-2.0
"""What makes a vLLM engine's KV reusable by another: the namespace
identity (Documentation/userspace-api/keys.md) derived from the vLLM configuration.

Two engines share a block only when every field below is equal; any
difference makes different keys, so a hit is never the KV of another
model, precision, layout or shard:

- model: the configured model_id, else vLLM's model (a hub name or a
  local path);
- weights_revision: the configured revision, else vLLM's revision, else
  (a local directory without one) a digest of its config.json and of the
  names and sizes of its weight files;
- tokenizer: vLLM's tokenizer and its revision;
- kv_layout: vLLM's version, the platform and attention backend, the KV
  cache spec (kind, layers, KV heads, head size, block size, bytes per
  block and layer) and the model architecture;
- kv_dtype: the KV cache dtype, the model dtype and its quantization;
- tokens_per_block: vLLM's block size;
- tp/pp rank and size: each rank stores its own shard;
- per request: the LoRA adapter (name and path) and cache_salt, with the
  configured salt.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Any

from .config import ConnectorConfig


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
    block_bytes: int            # bytes of one block, all layers
    layer_bytes: int            # bytes of one block of one layer
    num_layers: int

    def args(self, tp_rank: int, pp_rank: int, lora: str,
             salt: bytes) -> dict[str, Any]:
        """kvcache.Client.namespace()'s identity arguments."""
        return dict(model=self.model, weights_revision=self.weights_revision,
                    tokenizer=self.tokenizer, kv_layout=self.kv_layout,
                    kv_dtype=self.kv_dtype, lora=lora, salt=salt,
                    tokens_per_block=self.tokens_per_block,
                    tp_rank=tp_rank, tp_size=self.tp_size,
                    pp_rank=pp_rank, pp_size=self.pp_size)


def _dir_digest(path: str) -> str:
    """A local model directory's fingerprint: config.json's bytes, then
    each weight file's name and size (reading gigabytes of weights at
    every start would cost more than the cache saves)."""
    h = hashlib.sha256()
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return ""
    for name in names:
        full = os.path.join(path, name)
        if name == "config.json":
            with open(full, "rb") as f:
                h.update(b"config\0" + f.read())
        elif name.endswith((".safetensors", ".bin", ".pt", ".gguf")):
            h.update(f"{name}\0{os.path.getsize(full)}\0".encode())
    return "dir-sha256:" + h.hexdigest()[:32]


def _one_group(kv_cache_config: Any) -> tuple[Any, int]:
    """The KV cache spec and layer count of a model with one group of
    full attention; ValueError for what the connector cannot key."""
    if kv_cache_config is None:
        raise ValueError("vLLM gave no KV cache configuration (a vLLM "
                         "older than the KV connector API of 0.32?)")
    groups = list(getattr(kv_cache_config, "kv_cache_groups", []) or [])
    if len(groups) != 1:
        raise ValueError(f"{len(groups)} KV cache groups (hybrid or "
                         f"sliding-window models are not supported yet)")
    spec = groups[0].kv_cache_spec
    kind = type(spec).__name__
    if kind not in ("FullAttentionSpec",):
        raise ValueError(f"KV cache spec {kind} is not supported (full "
                         f"attention only)")
    return spec, len(groups[0].layer_names)


def derive(vllm_config: Any, kv_cache_config: Any,
           cfg: ConnectorConfig) -> Identity:
    import vllm
    from vllm.platforms import current_platform

    mc = vllm_config.model_config
    cc = vllm_config.cache_config
    pc = vllm_config.parallel_config
    spec, layers = _one_group(kv_cache_config)

    model = cfg.model_id or str(mc.model)
    rev = cfg.revision or getattr(mc, "revision", None) or ""
    if not rev and os.path.isdir(str(mc.model)):
        rev = _dir_digest(str(mc.model))
    tok = f"{getattr(mc, 'tokenizer', '') or ''}@" \
          f"{getattr(mc, 'tokenizer_revision', '') or ''}"
    attn = getattr(vllm_config, "attention_config", None)
    backend = getattr(attn, "backend", None) if attn is not None else None
    archs = ",".join(getattr(mc.hf_config, "architectures", None) or [])
    page = int(spec.page_size_bytes)
    layout = "/".join([
        f"vllm-{vllm.__version__}",
        f"{current_platform.device_type}",
        f"attn-{backend or 'default'}",
        type(spec).__name__,
        archs or "arch-unknown",
        f"L{layers}", f"H{spec.num_kv_heads}", f"D{spec.head_size}",
        f"B{spec.block_size}", f"page{page}",
    ])
    dtype = f"{cc.cache_dtype}/{str(mc.dtype).replace('torch.', '')}"
    quant = getattr(mc, "quantization", None)
    if quant:
        dtype += f"/{quant}"
    return Identity(model=model, weights_revision=str(rev), tokenizer=tok,
                    kv_layout=layout, kv_dtype=dtype,
                    tokens_per_block=int(spec.block_size),
                    tp_size=int(pc.tensor_parallel_size),
                    pp_size=int(pc.pipeline_parallel_size),
                    block_bytes=page * layers, layer_bytes=page,
                    num_layers=layers)


def request_fields(request: Any, cfg: ConnectorConfig) -> tuple[str, bytes]:
    """A request's own identity fields: (lora, salt)."""
    lora = ""
    lr = getattr(request, "lora_request", None)
    if lr is not None:
        lora = f"{lr.lora_name}:{getattr(lr, 'lora_path', '') or ''}"
    salt = cfg.salt
    cs = getattr(request, "cache_salt", None)
    if cs:
        salt = f"{salt}\0{cs}"
    return lora, salt.encode()

