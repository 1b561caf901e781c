# SPDX-License-Identifier: GPL-2.0
"""Where one vLLM block's KV lies in the engine's tensors, and in a pool
block.

A pool block holds one vLLM block of every layer this worker owns, one
after the other in the order vLLM registered the layers, each as the raw
bytes of that layer's block: kv.select(block_dim, block_id), whatever
the attention backend's layout (the CPU backend's [blocks, kv_heads,
block_size, 2 * head_dim], FlashAttention's [2, blocks, block_size,
kv_heads, head_dim], ...). Bytes are copied, never reinterpreted: the CPU
backend keeps K transposed inside each head's slice, and that is the
backend's business.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Layer:
    name: str
    kv: torch.Tensor
    block_dim: int
    shape: tuple[int, ...]      # of one block's slice
    nbytes: int                 # of one block's slice
    offset: int                 # in the pool block

    def block(self, block_id: int) -> torch.Tensor:
        return self.kv.select(self.block_dim, block_id)


def _block_dim(kv: torch.Tensor, num_blocks: int) -> int:
    """The dimension that indexes blocks: the one of num_blocks entries,
    the outermost such when several are (a model whose KV heads or head
    size equal the block count)."""
    dims = [d for d, n in enumerate(kv.shape) if n == num_blocks]
    if not dims:
        raise ValueError(f"no dimension of {tuple(kv.shape)} has "
                         f"{num_blocks} blocks")
    # FlashAttention-style layouts put K/V (2) first: prefer a later
    # dimension only when the first one is that K/V split.
    if len(dims) > 1 and dims[0] == 0 and kv.shape[0] == 2:
        return dims[1]
    return dims[0]


def layers_of(kv_caches: dict[str, torch.Tensor],
              num_blocks: int) -> list[Layer]:
    out: list[Layer] = []
    off = 0
    for name, kv in kv_caches.items():
        if isinstance(kv, (list, tuple)):
            raise ValueError(f"layer {name}: a list of tensors (a split "
                             f"K/V cache) is not supported")
        bd = _block_dim(kv, num_blocks)
        one = kv.select(bd, 0)
        nbytes = one.numel() * one.element_size()
        out.append(Layer(name, kv, bd, tuple(one.shape), nbytes, off))
        off += nbytes
    return out


def describe(layers: list[Layer]) -> str:
    if not layers:
        return "no layers"
    l0 = layers[0]
    return (f"{len(layers)} layers of {l0.nbytes} bytes per block "
            f"(block dim {l0.block_dim} of {tuple(l0.kv.shape)}, "
            f"{l0.kv.dtype}, {l0.kv.device})")
