"""Multi-head latent attention (DeepSeek-V2/V3) in the absorbed form, for decode and extend.

HF's reference expands the cached latent into per-head keys and values (kv_b_proj). Here the
query absorbs W_UK instead: for head h, q_nope . (c_kv @ W_UK[h]) = (q_nope @ W_UK[h].T) . c_kv,
so every head attends over the same cached vector [c_kv, k_pe] with the query
[q_nope @ W_UK[h].T, q_pe] (one KV head of width kv_lora_rank + rope: multi-query attention).
The values are c_kv itself; W_UV is applied to each head's attention output afterwards. The
cache is read once per token for all heads and nothing is decompressed, at any extend length.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from radixgen.radix.latent_pool import LatentPool
from radixgen.runtime.attention import AttentionBackend
from radixgen.runtime.model.arch import MLAArch
from radixgen.runtime.model.layers import RotaryEmbedding, linear, prepare_weight, rms_norm
from radixgen.runtime.quant.weight import QuantizedWeight

LATENT_NORM_EPS = 1e-6  # q_a_layernorm and kv_a_layernorm: HF's default eps, not rms_norm_eps


@dataclass
class MLAttention:
    mla: MLAArch
    num_heads: int
    q_a: torch.Tensor | None  # [q_lora_rank, hidden] (q_lora_rank set), else None
    q_a_norm: torch.Tensor | None  # [q_lora_rank]
    q_b: torch.Tensor  # [H * (nope + rope), q_lora_rank or hidden]: q_b_proj, or q_proj
    kv_a: torch.Tensor  # [kv_lora_rank + rope, hidden]: kv_a_proj_with_mqa
    kv_a_norm: torch.Tensor  # [kv_lora_rank]
    w_uk_t: torch.Tensor  # [H, nope, kv_lora_rank]: kv_b_proj's key rows per head
    w_uv_t: torch.Tensor  # [H, kv_lora_rank, v_head_dim]: its value rows per head, transposed
    o_proj: torch.Tensor  # [hidden, H * v_head_dim]
    rope_order: torch.Tensor | None  # de-interleaves the rope dims (rope_interleave)

    def __call__(
        self,
        layer: int,
        x: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor],
        pool: LatentPool,
        attn: AttentionBackend,
        rotation: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Attention output [T, hidden] of the normed hidden states x [T, hidden]; writes the
        batch's latents into `pool`. `rotation` (orthonormal, symmetric [W, W]) rotates queries
        and latents before the cache, and the outputs back (LlamaModel.rotate_qk's reason)."""
        m = self.mla
        q_lat, q_pe, latent = self._project(x, rope)
        q = torch.cat([q_lat, q_pe], dim=-1) * (m.softmax_scale * m.latent_dim**0.5)  # [T, H, W]
        if rotation is not None:
            q, latent = q @ rotation, latent @ rotation
        out = attn.attend(layer, q, latent, latent, pool)  # [T, H, W]: backends scale by W^-0.5
        if rotation is not None:
            out = out @ rotation
        o_lat = out[..., : m.kv_lora_rank].transpose(0, 1)  # [H, T, r]
        o = torch.bmm(o_lat, self.w_uv_t.to(o_lat.dtype)).transpose(0, 1)  # [T, H, v_head_dim]
        return linear(o.reshape(x.shape[0], -1), self.o_proj)

    def _project(
        self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(absorbed query [T, H, r], roped q_pe [T, H, rope], latent [T, 1, r + rope])."""
        m, t = self.mla, x.shape[0]
        q_in = (
            x if self.q_a is None else rms_norm(linear(x, self.q_a), self.q_a_norm, LATENT_NORM_EPS)
        )
        q = linear(q_in, self.q_b).view(t, self.num_heads, -1)
        q_nope, q_pe = q.split([m.qk_nope_head_dim, m.qk_rope_head_dim], dim=-1)
        c_kv, k_pe = linear(x, self.kv_a).split([m.kv_lora_rank, m.qk_rope_head_dim], dim=-1)
        c_kv = rms_norm(c_kv, self.kv_a_norm, LATENT_NORM_EPS)
        k_pe = k_pe.view(t, 1, -1)
        if self.rope_order is not None:  # adjacent pairs -> halves: the same rotation, permuted
            q_pe, k_pe = q_pe[..., self.rope_order], k_pe[..., self.rope_order]
        q_pe, k_pe = RotaryEmbedding.apply(q_pe, *rope), RotaryEmbedding.apply(k_pe, *rope)
        q_lat = torch.bmm(q_nope.transpose(0, 1), self.w_uk_t.to(q.dtype)).transpose(0, 1)
        return q_lat, q_pe, torch.cat([c_kv.view(t, 1, -1), k_pe], dim=-1)

    @classmethod
    def take(
        cls, w: dict[str, torch.Tensor], prefix: str, mla: MLAArch, num_heads: int
    ) -> "MLAttention":
        """Pop one layer's attention weights (`prefix` = `model.layers.N.self_attn.`)."""
        take = lambda name: w.pop(prefix + name + ".weight")  # noqa: E731
        lora = mla.q_lora_rank is not None
        kv_a_norm = take("kv_a_layernorm")  # in the model dtype
        kv_b = _dense(take("kv_b_proj"), kv_a_norm.dtype)  # [H * (nope + v), r]: absorbed
        kv_b = kv_b.view(num_heads, mla.qk_nope_head_dim + mla.v_head_dim, mla.kv_lora_rank)
        w_uk, w_uv = kv_b.split([mla.qk_nope_head_dim, mla.v_head_dim], dim=1)
        rope = mla.qk_rope_head_dim
        order = torch.cat([torch.arange(0, rope, 2), torch.arange(1, rope, 2)])
        return cls(
            mla=mla,
            num_heads=num_heads,
            q_a=prepare_weight(take("q_a_proj")) if lora else None,
            q_a_norm=take("q_a_layernorm") if lora else None,
            q_b=prepare_weight(take("q_b_proj" if lora else "q_proj")),
            kv_a=prepare_weight(take("kv_a_proj_with_mqa")),
            kv_a_norm=kv_a_norm,
            w_uk_t=w_uk.contiguous(),
            w_uv_t=w_uv.transpose(1, 2).contiguous(),
            o_proj=prepare_weight(take("o_proj")),
            rope_order=order.to(kv_b.device) if mla.rope_interleave else None,
        )


def mla_shapes(prefix: str, mla: MLAArch, hidden: int, num_heads: int) -> dict[str, tuple]:
    """Shapes of one layer's MLA weights under `prefix` (= `model.layers.N.self_attn.`)."""
    qk_head = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    shapes: dict[str, tuple[int, ...]] = {}
    if mla.q_lora_rank is None:
        shapes[prefix + "q_proj.weight"] = (num_heads * qk_head, hidden)
    else:
        shapes[prefix + "q_a_proj.weight"] = (mla.q_lora_rank, hidden)
        shapes[prefix + "q_a_layernorm.weight"] = (mla.q_lora_rank,)
        shapes[prefix + "q_b_proj.weight"] = (num_heads * qk_head, mla.q_lora_rank)
    shapes[prefix + "kv_a_proj_with_mqa.weight"] = (mla.latent_dim, hidden)
    shapes[prefix + "kv_a_layernorm.weight"] = (mla.kv_lora_rank,)
    shapes[prefix + "kv_b_proj.weight"] = (
        num_heads * (mla.qk_nope_head_dim + mla.v_head_dim),
        mla.kv_lora_rank,
    )
    shapes[prefix + "o_proj.weight"] = (hidden, num_heads * mla.v_head_dim)
    return shapes


def _dense(w: torch.Tensor | QuantizedWeight, dtype: torch.dtype) -> torch.Tensor:
    """kv_b_proj is folded into the query and output (bmm per head), so a quantized checkpoint's
    copy runs dequantized."""
    return w.dequantize(dtype) if isinstance(w, QuantizedWeight) else w
