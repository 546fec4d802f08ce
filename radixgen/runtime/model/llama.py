"""Llama-family decoder (Llama 2/3, SmolLM2, Qwen2, Mistral, Qwen3) in plain PyTorch, over
flattened ragged batches and a paged KV pool. q/k/v and gate/up projections are fused into one
GEMM each. Mixture-of-experts families (moe_models.py) reuse it and replace the feed-forward."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from radixgen.radix.kv_pool import KVPool
from radixgen.runtime.attention import AttentionBackend
from radixgen.runtime.distributed.group import SINGLE_RANK
from radixgen.runtime.forward_batch import ForwardBatch
from radixgen.runtime.model.arch import ModelArch
from radixgen.runtime.model.layers import (
    DenseMLP,
    RotaryEmbedding,
    hadamard_rotation,
    linear,
    prepare_weight,
    rms_norm,
)
from radixgen.runtime.quant.weight import QuantizedWeight, join_weights


@dataclass
class DecoderLayer:
    input_norm: torch.Tensor  # [hidden]
    qkv: torch.Tensor  # [q_size + 2 * kv_size, hidden]
    qkv_bias: torch.Tensor | None
    qk_norm: tuple[torch.Tensor, torch.Tensor] | None  # q_norm, k_norm [head_dim] (Qwen3)
    o_proj: torch.Tensor  # [hidden, q_size]
    post_norm: torch.Tensor  # [hidden]
    mlp: Callable[[torch.Tensor], torch.Tensor]  # [T, hidden] -> [T, hidden]


class LlamaModel:
    def __init__(self, arch: ModelArch, weights: dict[str, torch.Tensor], device: torch.device):
        self.arch = arch
        self.embed = weights.pop("model.embed_tokens.weight")  # [vocab, hidden]
        lm_head = weights.pop("lm_head.weight", None)
        if lm_head is None or (
            arch.tie_word_embeddings and not isinstance(lm_head, QuantizedWeight)
        ):
            lm_head = self.embed  # a quantized lm_head (--quantize-lm-head) replaces the tied one
        self.lm_head = prepare_weight(lm_head)  # [vocab, hidden]
        self.final_norm = weights.pop("model.norm.weight")
        self.layers = [self._take_layer(weights, n) for n in range(arch.num_layers)]
        unused = [k for k in weights if "rotary_emb" not in k]
        if unused:
            raise ValueError(f"unexpected weights in checkpoint: {unused[:5]}")
        self.rope = self._rope(arch, device)
        self.dtype = self.embed.dtype
        self.qk_rotation: torch.Tensor | None = None  # [D, D], see rotate_qk
        # the tp collectives (distributed/group.py); the identity on one rank
        self.parallel = SINGLE_RANK

    @classmethod
    def param_shapes(cls, arch: ModelArch) -> dict[str, tuple[int, ...]]:
        """HF parameter name -> shape of every weight a checkpoint of `arch` holds (what the
        dummy loader builds, in this order)."""
        h, q, kv = arch.hidden_size, arch.q_size, arch.kv_size
        shapes = {"model.embed_tokens.weight": (arch.vocab_size, h), "model.norm.weight": (h,)}
        if not arch.tie_word_embeddings:
            shapes["lm_head.weight"] = (arch.vocab_size, h)
        for n in range(arch.num_layers):
            p = f"model.layers.{n}."
            shapes.update(
                {
                    p + "input_layernorm.weight": (h,),
                    p + "post_attention_layernorm.weight": (h,),
                    **cls._attention_shapes(arch, p + "self_attn."),
                }
            )
            shapes.update(cls._mlp_shapes(arch, n))
            if arch.qkv_bias:
                shapes.update(
                    {
                        p + f"self_attn.{proj}.bias": (size,)
                        for proj, size in (("q_proj", q), ("k_proj", kv), ("v_proj", kv))
                    }
                )
            if arch.qk_norm:
                shapes.update(
                    {
                        p + "self_attn.q_norm.weight": (arch.head_dim,),
                        p + "self_attn.k_norm.weight": (arch.head_dim,),
                    }
                )
        return shapes

    @classmethod
    def _attention_shapes(cls, arch: ModelArch, prefix: str) -> dict[str, tuple[int, ...]]:
        """The attention projections under `prefix` (= `model.layers.N.self_attn.`)."""
        h, q, kv = arch.hidden_size, arch.q_size, arch.kv_size
        return {
            prefix + "q_proj.weight": (q, h),
            prefix + "k_proj.weight": (kv, h),
            prefix + "v_proj.weight": (kv, h),
            prefix + "o_proj.weight": (h, q),
        }

    @staticmethod
    def _rope(arch: ModelArch, device: torch.device) -> RotaryEmbedding:
        return RotaryEmbedding(
            arch.head_dim, arch.rope_theta, arch.max_position_embeddings, arch.rope_scaling, device
        )

    @classmethod
    def _mlp_shapes(cls, arch: ModelArch, n: int) -> dict[str, tuple[int, ...]]:
        return dense_mlp_shapes(f"model.layers.{n}.mlp.", arch.hidden_size, arch.intermediate_size)

    def _take_mlp(
        self, weights: dict[str, torch.Tensor], n: int
    ) -> Callable[[torch.Tensor], torch.Tensor]:
        return DenseMLP.take(weights, f"model.layers.{n}.mlp.")

    def rotate_qk(self) -> None:
        """Multiply q and k by a Hadamard matrix after RoPE (layers.hadamard_rotation), before
        attention and before k is stored: attention is unchanged in exact arithmetic, and
        quantized KV pools store keys with their large channels spread out. Every key of every
        pool must then be rotated, so this is set once, before the first forward."""
        self.qk_rotation = hadamard_rotation(self.arch.head_dim, self.dtype, self.embed.device)

    @torch.inference_mode()
    def forward(self, batch: ForwardBatch, pool: KVPool, attn: AttentionBackend) -> torch.Tensor:
        """Run the batch, writing its KV into `pool`; logits [num_logits, vocab] (float32) of
        the rows in batch.logits_indices."""
        attn.begin(batch)
        hidden = self.parallel.embed(batch.input_ids, self.embed)  # [T, hidden]
        rope = self.rope.tables(batch.positions, self.dtype)
        for n, layer in enumerate(self.layers):
            hidden = self._layer(n, layer, hidden, rope, pool, attn, batch.lora)
        hidden = hidden[batch.logits_indices]
        hidden = rms_norm(hidden, self.final_norm, self.arch.rms_norm_eps)
        return self.parallel.gather_vocab(linear(hidden, self.lm_head)).float()

    def _layer(
        self,
        n: int,
        layer: DecoderLayer,
        hidden: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor],
        pool: KVPool,
        attn: AttentionBackend,
        lora=None,
    ) -> torch.Tensor:
        """One decoder layer; `lora` (runtime/lora/batch.py, None: no adapter in the batch)
        adds each row's adapter delta to the projections' outputs."""
        a = self.arch
        x = rms_norm(hidden, layer.input_norm, a.rms_norm_eps)
        qkv = linear(x, layer.qkv, layer.qkv_bias)  # [T, q_size + 2 * kv_size]
        if lora is not None:
            lora.add(n, "qkv", x, qkv)
        qk, v = qkv.split([a.q_size + a.kv_size, a.kv_size], dim=-1)
        qk = qk.view(-1, a.num_heads + a.num_kv_heads, a.head_dim)
        if layer.qk_norm is not None:  # per head, before RoPE
            q, k = qk.split([a.num_heads, a.num_kv_heads], dim=1)
            qk = torch.cat(
                [
                    rms_norm(q, layer.qk_norm[0], a.rms_norm_eps),
                    rms_norm(k, layer.qk_norm[1], a.rms_norm_eps),
                ],
                dim=1,
            )
        qk = self.rope.apply(qk, *rope)
        if self.qk_rotation is not None:
            qk = qk @ self.qk_rotation  # symmetric: each head's row times H
        q, k = qk.split([a.num_heads, a.num_kv_heads], dim=1)  # [T, Hq, D], [T, Hkv, D]
        out = attn.attend(n, q, k, v.view(-1, a.num_kv_heads, a.head_dim), pool)  # [T, Hq, D]
        out = out.reshape(-1, a.q_size)
        o = self.parallel.all_reduce(linear(out, layer.o_proj))  # row-parallel: partial sums
        if lora is None:
            return self._mlp(layer, hidden + o)
        lora.add(n, "o", out, o)
        hidden = hidden + o
        x = rms_norm(hidden, layer.post_norm, a.rms_norm_eps)
        if isinstance(layer.mlp, DenseMLP):  # a MoE block has no dense projection to adapt
            return hidden + layer.mlp(x, lambda proj, xi, yi: lora.add(n, proj, xi, yi))
        return hidden + layer.mlp(x)

    def _mlp(self, layer: DecoderLayer, hidden: torch.Tensor) -> torch.Tensor:
        x = rms_norm(hidden, layer.post_norm, self.arch.rms_norm_eps)
        return hidden + self.parallel.all_reduce(layer.mlp(x))  # row-parallel down / experts

    def _take_layer(self, w: dict[str, torch.Tensor], n: int) -> DecoderLayer:
        p = f"model.layers.{n}."
        take = lambda name: w.pop(p + name)  # noqa: E731
        qkv = join_weights(
            [
                take("self_attn.q_proj.weight"),
                take("self_attn.k_proj.weight"),
                take("self_attn.v_proj.weight"),
            ]
        )
        bias = qk_norm = None
        if p + "self_attn.q_proj.bias" in w:
            bias = torch.cat(
                [
                    take("self_attn.q_proj.bias"),
                    take("self_attn.k_proj.bias"),
                    take("self_attn.v_proj.bias"),
                ]
            )
        if self.arch.qk_norm:
            qk_norm = take("self_attn.q_norm.weight"), take("self_attn.k_norm.weight")
        return DecoderLayer(
            input_norm=take("input_layernorm.weight"),
            qkv=prepare_weight(qkv),
            qkv_bias=bias,
            qk_norm=qk_norm,
            o_proj=prepare_weight(take("self_attn.o_proj.weight")),
            post_norm=take("post_attention_layernorm.weight"),
            mlp=self._take_mlp(w, n),
        )


def dense_mlp_shapes(
    prefix: str, hidden: int, inter: int, names=("gate_proj", "up_proj", "down_proj")
):
    """Shapes of one SwiGLU MLP's HF weights under `prefix` (gate, up, down)."""
    gate, up, down = names
    return {
        f"{prefix}{gate}.weight": (inter, hidden),
        f"{prefix}{up}.weight": (inter, hidden),
        f"{prefix}{down}.weight": (hidden, inter),
    }
