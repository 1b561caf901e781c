# SPDX-License-Identifier: GPL-2.0
"""Random-weight Llama models for the vLLM tests and benchmarks, built
locally (no model hub): transformers' LlamaForCausalLM with a fixed seed,
saved as safetensors. A model's directory is named by its shape, so it is
built once per cache and reused; vLLM loads it with
skip_tokenizer_init=True and token-id prompts.

    python tiny_model.py DIR [--hidden 128 --layers 2 ...]  # prints DIR/name
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class Shape:
    hidden: int = 128
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 32
    intermediate: int = 256
    vocab: int = 4096
    max_positions: int = 16384
    dtype: str = "float32"
    seed: int = 1234

    def name(self) -> str:
        return (f"llama-h{self.hidden}-l{self.layers}-a{self.heads}"
                f"-kv{self.kv_heads}-d{self.head_dim}-i{self.intermediate}"
                f"-v{self.vocab}-p{self.max_positions}-{self.dtype}"
                f"-s{self.seed}")


def build(root: str | os.PathLike[str], shape: Shape) -> Path:
    """The model's directory under root, built if it is not there yet."""
    out = Path(root) / shape.name()
    if (out / ".complete").exists():
        return out
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(shape.seed)
    cfg = LlamaConfig(hidden_size=shape.hidden,
                      num_hidden_layers=shape.layers,
                      num_attention_heads=shape.heads,
                      num_key_value_heads=shape.kv_heads,
                      head_dim=shape.head_dim,
                      intermediate_size=shape.intermediate,
                      vocab_size=shape.vocab,
                      max_position_embeddings=shape.max_positions,
                      torch_dtype=shape.dtype)
    model = LlamaForCausalLM(cfg).to(getattr(torch, shape.dtype))
    tmp = out.with_name(out.name + ".tmp")
    model.save_pretrained(tmp, safe_serialization=True)
    (tmp / "kvcache-shape.json").write_text(json.dumps(asdict(shape)))
    (tmp / ".complete").touch()
    if out.exists():
        import shutil
        shutil.rmtree(out)
    tmp.rename(out)
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root")
    for f, v in asdict(Shape()).items():
        ap.add_argument("--" + f.replace("_", "-"), type=type(v), default=v)
    a = vars(ap.parse_args(argv))
    root = a.pop("root")
    print(build(root, Shape(**a)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
