# SPDX-License-Identifier: GPL-2.0
"""What the scheduler side tells the workers each step, and what the
workers report back. Plain data: vLLM pickles it between processes.

Keys travel per rank (tp_rank, pp_rank): every rank's shard has its own
identity, hence its own keys, and the scheduler computes them all so a
worker never hashes tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorMetadata, KVConnectorWorkerMetadata)

Rank = tuple[int, int]          # (tp_rank, pp_rank)


@dataclass
class LoadOp:
    req_id: str
    lora: str
    salt: bytes
    keys: dict[Rank, list[bytes]]   # of the blocks to load, in order
    block_ids: list[int]            # vLLM blocks they go to
    tiers: list[int]                # each block's tier mask at lookup
    group: int = 0                  # the KV cache group: its layers
    # loaded outside the forward pass, finished through get_finished()
    # (the request waits in WAITING_FOR_REMOTE_KVS meanwhile)
    background: bool = False


@dataclass
class SaveOp:
    req_id: str
    lora: str
    salt: bytes
    parent: dict[Rank, bytes | None]  # the key before keys[0]
    keys: dict[Rank, list[bytes]]
    block_ids: list[int]            # vLLM blocks to copy out, in order
    group: int = 0                  # the KV cache group: its layers
    # keys[i]'s parent is keys[i - 1] (a full-attention chain); else each
    # block is stored as a chain of its own (sliding / chunked groups)
    chained: bool = True
    op_id: int = 0                  # the scheduler's, for its events


@dataclass
class StepMeta(KVConnectorMetadata):
    loads: list[LoadOp] = field(default_factory=list)
    saves: list[SaveOp] = field(default_factory=list)
    tokens: int = 0                 # tokens this step computes
    block_bytes: int = 0            # the scheduler's view of a block


@dataclass
class WorkerReport(KVConnectorWorkerMetadata):
    # (bytes per tier, seconds) of each load
    loads: list[tuple[dict[str, int], float]] = field(default_factory=list)
    # (tokens, seconds) of each forward pass, load waits left out
    forwards: list[tuple[int, float]] = field(default_factory=list)
    # rank (0, 0)'s completed stores: (op_id, first, n): SaveOp op_id's
    # keys[first:first + n] are in kvcache now
    stored: list[tuple[int, int, int]] = field(default_factory=list)

    def aggregate(self, other: KVConnectorWorkerMetadata
                  ) -> KVConnectorWorkerMetadata:
        if isinstance(other, WorkerReport):
            return WorkerReport(self.loads + other.loads,
                                self.forwards + other.forwards,
                                self.stored + other.stored)
        return self
