"""Multi-head latent attention (DeepSeek-V2/V3), in the absorbed and the expanded form.

HF's reference expands the cached latent into per-head keys and values (kv_b_proj = W_UK, W_UV)
and runs ordinary attention: the expanded form, which costs r * (nope + v) per head and context
token to decompress, then attends at the small per-head dims. The absorbed form folds W_UK into
the query instead: for head h, q_nope . (c_kv @ W_UK[h]) = (q_nope @ W_UK[h].T) . c_kv, so every
head attends over the same cached vector [c_kv, k_pe] with the query [q_nope @ W_UK[h].T, q_pe]
(one KV head of width kv_lora_rank + rope: multi-query attention); the values are c_kv itself,
and W_UV is applied to each head's output afterwards. Nothing is decompressed, but every
(query, key) pair costs the latent's width. Decode is always absorbed (one query per request);
an extend takes whichever form LatentAttention picks for its lengths (runtime/mla_attention.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from radixgen.radix.latent_pool import LatentPool
from radixgen.runtime.mla_attention import LatentAttention
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
        attn: LatentAttention,
        rotation: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Attention output [T, hidden] of the normed hidden states x [T, hidden]; writes the
        batch's latents into `pool`. `rotation` (orthonormal, symmetric [W, W]) rotates queries
        and latents before the cache, and the outputs back (LlamaModel.rotate_qk's reason)."""
        q_nope, q_pe, latent = self._project(x, rope)
        heads = LatentHeads(self, rotation)
        o = attn.attend_mla(layer, q_nope, q_pe, heads.rotate(latent), pool, heads)
        return linear(o.reshape(x.shape[0], -1), self.o_proj)  # o: [T, H, v_head_dim]

    def _project(
        self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(q_nope [T, H, nope], roped q_pe [T, H, rope], latent [T, 1, r + rope])."""
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
        return q_nope, q_pe, torch.cat([c_kv.view(t, 1, -1), k_pe], dim=-1)

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


@dataclass
class LatentHeads:
    """One MLA layer's maps between its per-head queries, the cached latent and the per-head
    outputs, in both forms (what LatentAttention needs of the layer). `rotation`: see
    MLAttention.__call__; being symmetric and orthonormal, it is its own inverse."""

    layer: MLAttention
    rotation: torch.Tensor | None

    @property
    def softmax_scale(self) -> float:
        return self.layer.mla.softmax_scale

    def rotate(self, x: torch.Tensor) -> torch.Tensor:
        """x [..., W] into (or back out of) the rotated latent space."""
        return x if self.rotation is None else x @ self.rotation

    def absorb(self, q_nope: torch.Tensor, q_pe: torch.Tensor) -> torch.Tensor:
        """The absorbed query [t, H, W] of q_nope [t, H, nope] and q_pe [t, H, rope], scaled for
        a backend that scales by W^-0.5, rotated as the cache is."""
        m, w_uk_t = self.layer.mla, self.layer.w_uk_t.to(q_nope.dtype)
        q_lat = torch.bmm(q_nope.transpose(0, 1), w_uk_t).transpose(0, 1)  # [t, H, r]
        q = torch.cat([q_lat, q_pe], dim=-1) * (m.softmax_scale * m.latent_dim**0.5)
        return self.rotate(q)

    def absorbed_values(self, out: torch.Tensor) -> torch.Tensor:
        """Per-head outputs [t, H, v] of absorbed attention outputs over the latent [t, H, W]."""
        o_lat = self.rotate(out)[..., : self.layer.mla.kv_lora_rank].transpose(0, 1)  # [H, t, r]
        return torch.bmm(o_lat, self.layer.w_uv_t.to(o_lat.dtype)).transpose(0, 1)

    def expand(self, latent: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-head keys [H, L, nope + rope] and values [H, L, v] of cached latents [L, W]."""
        m, layer = self.layer.mla, self.layer
        c_kv, k_pe = self.rotate(latent).split([m.kv_lora_rank, m.qk_rope_head_dim], dim=-1)
        w_uk = layer.w_uk_t.to(c_kv.dtype).view(-1, m.kv_lora_rank)  # [H * nope, r]
        k_nope = (c_kv @ w_uk.T).view(-1, layer.num_heads, m.qk_nope_head_dim).transpose(0, 1)
        k_pe = k_pe.expand(layer.num_heads, -1, -1)  # [H, L, rope]: one rope key for all heads
        values = torch.matmul(c_kv, layer.w_uv_t.to(c_kv.dtype))  # [H, L, v]
        return torch.cat([k_nope, k_pe], dim=-1), values


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
