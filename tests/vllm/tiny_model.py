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


# Model families other than Llama, each as small as vLLM's CPU build
# runs it: the transformers class and its configuration. The sliding
# windows are a few 32-token blocks, so that prompts of a few hundred
# tokens cross them. Each builds once per cache, named by its settings.
FAMILIES: dict[str, tuple[str, str, dict]] = {
    # Alternating sliding-window and full attention, attention sinks,
    # a mixture of experts: the reference system's model.
    "gpt-oss": ("GptOssConfig", "GptOssForCausalLM", dict(
        hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=64, intermediate_size=128,
        num_local_experts=4, num_experts_per_tok=2, sliding_window=96,
        vocab_size=4096, max_position_embeddings=4096,
        layer_types=["sliding_attention", "full_attention"])),
    # Five sliding layers to one full, as Gemma 3 interleaves them.
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM", dict(
        hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=64, intermediate_size=256,
        sliding_window=96, vocab_size=4096, max_position_embeddings=4096,
        layer_types=["sliding_attention", "full_attention"])),
    # Every layer sliding: one group of SlidingWindowSpec.
    "mistral-sw": ("MistralConfig", "MistralForCausalLM", dict(
        hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=32, intermediate_size=256,
        sliding_window=96, vocab_size=4096, max_position_embeddings=4096)),
    # Linear attention (gated delta net) and full attention.
    "qwen3-next": ("Qwen3NextConfig", "Qwen3NextForCausalLM", dict(
        hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=64, intermediate_size=256,
        linear_num_key_heads=2, linear_num_value_heads=2,
        linear_key_head_dim=128, linear_value_head_dim=128,
        num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64,
        shared_expert_intermediate_size=64, vocab_size=4096,
        max_position_embeddings=4096,
        layer_types=["linear_attention", "full_attention"])),
    # Multi-head latent attention: one latent vector per token (its
    # kv_lora_rank 512 + rope 64 are what the CPU MLA backend takes);
    # its layers all dense (first_k_dense_replace), as the CPU MoE router
    # wants group settings a tiny model has no use for.
    "deepseek-v2": ("DeepseekV2Config", "DeepseekV2ForCausalLM", dict(
        hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, intermediate_size=256,
        moe_intermediate_size=64, n_routed_experts=4, num_experts_per_tok=2,
        n_shared_experts=1, first_k_dense_replace=2, kv_lora_rank=512,
        q_lora_rank=None, qk_rope_head_dim=64, qk_nope_head_dim=64,
        v_head_dim=64, vocab_size=4096, max_position_embeddings=4096,
        initializer_range=0.1)),
}


# Weights set after the random init, by family. Qwen3-Next's gated delta
# net forgets its state within a token or two as initialised (A up to 16,
# so a decay of about e^-10 a token): a prompt's tokens after a block
# boundary would not depend on the state loaded there, and a test could
# not tell a right state from none. A slow decay makes them depend on it.
TUNED = {
    "qwen3-next": "slow-decay",
}


def _tune(model, family: str) -> None:
    import math

    import torch
    if TUNED.get(family) == "slow-decay":
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name.endswith("A_log"):
                    p.fill_(math.log(0.05))
                elif name.endswith("dt_bias"):
                    p.fill_(-4.0)


def build_family(root: str | os.PathLike[str], family: str,
                 seed: int = 1234) -> Path:
    """A random-weight model of one of FAMILIES, built if not there."""
    cfg_cls, model_cls, kw = FAMILIES[family]
    tag = json.dumps(kw, sort_keys=True) + TUNED.get(family, "")
    import hashlib
    out = Path(root) / (f"{family}-{hashlib.sha256(tag.encode()).hexdigest()[:12]}"
                        f"-s{seed}")
    if (out / ".complete").exists():
        return out
    import torch
    import transformers

    torch.manual_seed(seed)
    cfg = getattr(transformers, cfg_cls)(**kw)
    model = getattr(transformers, model_cls)(cfg).to(torch.float32)
    _tune(model, family)
    tmp = out.with_name(out.name + ".tmp")
    model.save_pretrained(tmp, safe_serialization=True)
    (tmp / ".complete").touch()
    if out.exists():
        import shutil
        shutil.rmtree(out)
    tmp.rename(out)
    return out


# The vision-language model: Idefics3 (a SigLIP vision tower and a
# Llama text model), the one VLM of vLLM's CPU build here that needs no
# torchvision (Qwen2-VL, LLaVA and Gemma 3's vision models import it).
# Each image is resized to VLM_IMAGE pixels square and takes
# VLM_IMAGE_TOKENS prompt tokens: <fake> <global-img> <image>x16 <fake>.
VLM_IMAGE = 64
VLM_PATCH = 8
VLM_SCALE = 2
VLM_VOCAB = 512
VLM_IMAGE_ID = 5                # "<image>": one in a prompt per image
VLM_IMAGE_TOKENS = (VLM_IMAGE // VLM_PATCH) ** 2 // VLM_SCALE ** 2 + 3


def build_vlm(root: str | os.PathLike[str], seed: int = 1234) -> Path:
    """The random-weight Idefics3 model, with the tokenizer and image
    processor vLLM needs for its images (a word-level vocabulary of
    VLM_VOCAB: "<image>" and the other special tokens, then w0, w1...),
    built if not there."""
    out = Path(root) / f"idefics3-i{VLM_IMAGE}-v{VLM_VOCAB}-s{seed}"
    if (out / ".complete").exists():
        return out
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import (Idefics3Config,
                              Idefics3ForConditionalGeneration,
                              Idefics3Processor, PreTrainedTokenizerFast)
    from transformers.models.idefics3.image_processing_pil_idefics3 import \
        Idefics3ImageProcessorPil

    specials = ["<unk>", "<s>", "</s>", "<pad>", "<fake_token_around_image>",
                "<image>", "<end_of_utterance>", "<global-img>"]
    grid = [f"<row_{i}_col_{j}>" for i in range(1, 7) for j in range(1, 7)]
    vocab = {t: i for i, t in enumerate(specials + grid)}
    for i in range(VLM_VOCAB - len(vocab)):
        vocab[f"w{i}"] = len(vocab)
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tk.decoder = decoders.WordPiece()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk, unk_token="<unk>", bos_token="<s>",
        eos_token="</s>", pad_token="<pad>",
        additional_special_tokens=specials[4:] + grid)
    tok.model_max_length = 4096
    assert tok.convert_tokens_to_ids("<image>") == VLM_IMAGE_ID
    imgp = Idefics3ImageProcessorPil(
        do_resize=True, size={"longest_edge": VLM_IMAGE},
        max_image_size={"longest_edge": VLM_IMAGE},
        do_image_splitting=False)
    proc = Idefics3Processor(image_processor=imgp, tokenizer=tok,
                             image_seq_len=VLM_IMAGE_TOKENS - 3)
    cfg = Idefics3Config(
        image_token_id=VLM_IMAGE_ID, pad_token_id=tok.pad_token_id,
        scale_factor=VLM_SCALE, tie_word_embeddings=False,
        vision_config=dict(hidden_size=64, intermediate_size=128,
                           num_hidden_layers=1, num_attention_heads=2,
                           image_size=VLM_IMAGE, patch_size=VLM_PATCH),
        text_config=dict(model_type="llama", hidden_size=128,
                         num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, head_dim=32,
                         intermediate_size=256, vocab_size=VLM_VOCAB,
                         max_position_embeddings=4096, rms_norm_eps=1e-5,
                         pad_token_id=tok.pad_token_id, bos_token_id=1,
                         eos_token_id=2, tie_word_embeddings=False))
    cfg.torch_dtype = "float32"
    torch.manual_seed(seed)
    model = Idefics3ForConditionalGeneration(cfg).to(torch.float32)
    tmp = out.with_name(out.name + ".tmp")
    model.save_pretrained(tmp, safe_serialization=True)
    proc.save_pretrained(tmp)
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
