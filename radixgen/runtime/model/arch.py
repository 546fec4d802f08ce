"""The decoder architecture read from an HF `config.json`: dense Llama-family models (Llama 2/3,
SmolLM2, Qwen2, Mistral, Qwen3), mixture-of-experts ones (Qwen2-MoE, Qwen3-MoE, Mixtral) and
DeepSeek-V2/V3 (multi-head latent attention, MLAArch, over MoE)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SUPPORTED_ARCHITECTURES = (
    "LlamaForCausalLM",
    "Qwen2ForCausalLM",
    "MistralForCausalLM",
    "Qwen3ForCausalLM",
    "Qwen2MoeForCausalLM",
    "Qwen3MoeForCausalLM",
    "MixtralForCausalLM",
    "DeepseekV2ForCausalLM",
    "DeepseekV3ForCausalLM",
)
_BY_MODEL_TYPE = {
    "llama": "LlamaForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "mistral": "MistralForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "qwen2_moe": "Qwen2MoeForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM",
    "mixtral": "MixtralForCausalLM",
    "deepseek_v2": "DeepseekV2ForCausalLM",
    "deepseek_v3": "DeepseekV3ForCausalLM",
}
_MLA = ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM")
_QK_NORM = ("Qwen3ForCausalLM", "Qwen3MoeForCausalLM")  # RMSNorm of each q and k head before RoPE
_QKV_BIAS = ("Qwen2ForCausalLM", "Qwen2MoeForCausalLM")


@dataclass(frozen=True)
class MoEArch:
    """The sparse feed-forward of a mixture-of-experts model: a router picks `top_k` of
    `num_experts` experts per token (each a SwiGLU MLP of width `expert_size`), optionally
    beside always-on shared experts.

    Routing (moe.route): scores = softmax or sigmoid of the router logits; with `num_groups`,
    experts form groups and only the `topk_groups` best groups are eligible (a group's score is
    its best expert's, or with `correction_bias` the sum of its two best biased scores); top_k
    by score (+ the per-expert correction bias, which only chooses, never weighs); the weights
    renormalised to sum 1 if `renormalize`, then times `routed_scaling_factor`."""

    num_experts: int
    top_k: int
    expert_size: int
    renormalize: bool
    scoring: str = "softmax"  # or "sigmoid"
    num_groups: int | None = None
    topk_groups: int | None = None
    correction_bias: bool = False  # DeepSeek-V3's e_score_correction_bias (topk_method noaux_tc)
    routed_scaling_factor: float = 1.0
    shared_expert_size: int = 0  # 0: no shared expert
    shared_expert_gate: bool = False  # Qwen2-MoE: the shared output times sigmoid(x @ w)
    dense_layers: tuple[int, ...] = ()  # layers with a dense MLP of intermediate_size instead

    @classmethod
    def from_config(cls, arch: str, cfg: dict[str, Any]) -> "MoEArch | None":
        """The MoE fields of an HF config (Qwen2/3-MoE, Mixtral, DeepSeek-V2/V3 keys); None for
        a dense model."""
        num_experts = (
            cfg.get("num_experts") or cfg.get("num_local_experts") or cfg.get("n_routed_experts")
        )
        if not num_experts:
            return None
        layers = cfg["num_hidden_layers"]
        step = cfg.get("decoder_sparse_step") or cfg.get("moe_layer_freq") or 1
        dense = set(cfg.get("mlp_only_layers") or ()) | {n for n in range(layers) if (n + 1) % step}
        dense |= set(range(cfg.get("first_k_dense_replace") or 0))
        shared = cfg.get("shared_expert_intermediate_size") or 0
        if cfg.get("n_shared_experts"):
            shared = cfg["n_shared_experts"] * cfg["moe_intermediate_size"]
        method = cfg.get("topk_method") or ("noaux_tc" if cfg.get("n_group") else "greedy")
        grouped = method != "greedy" and (cfg.get("n_group") or 1) > 1
        return cls(
            num_experts=num_experts,
            top_k=cfg["num_experts_per_tok"],
            expert_size=cfg.get("moe_intermediate_size") or cfg["intermediate_size"],
            renormalize=arch == "MixtralForCausalLM" or bool(cfg.get("norm_topk_prob", False)),
            scoring=cfg.get("scoring_func") or ("sigmoid" if method == "noaux_tc" else "softmax"),
            num_groups=cfg["n_group"] if grouped else None,
            topk_groups=cfg["topk_group"] if grouped else None,
            correction_bias=method == "noaux_tc",
            routed_scaling_factor=float(cfg.get("routed_scaling_factor") or 1.0),
            shared_expert_size=shared,
            shared_expert_gate=arch == "Qwen2MoeForCausalLM",
            dense_layers=tuple(sorted(dense)),
        )


@dataclass(frozen=True)
class MLAArch:
    """Multi-head latent attention (DeepSeek-V2/V3). Per token, the KV cache holds the latent
    c_kv = kv_a_layernorm(x @ W_DKV) [kv_lora_rank] and one shared rope key k_pe
    [qk_rope_head_dim]; each head's key is [c_kv @ W_UK[h], k_pe] and its value c_kv @ W_UV[h]
    (W_UK, W_UV: the two parts of kv_b_proj). Queries come from q_proj, or with `q_lora_rank`
    from q_b_proj(q_a_layernorm(q_a_proj x)); each is [q_nope (qk_nope_head_dim), q_pe]."""

    q_lora_rank: int | None
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    rope_interleave: bool  # rope on adjacent pairs (x0, x1), (x2, x3), ... instead of halves
    softmax_scale: float  # qk_head_dim ** -0.5, times YaRN's mscale(mscale_all_dim) squared

    @property
    def latent_dim(self) -> int:
        """Values cached per token and layer: the latent, then the rope key."""
        return self.kv_lora_rank + self.qk_rope_head_dim

    @classmethod
    def from_config(cls, arch: str, cfg: dict[str, Any]) -> "MLAArch | None":
        if arch not in _MLA:
            return None
        rope_dim, nope_dim = cfg["qk_rope_head_dim"], cfg["qk_nope_head_dim"]
        return cls(
            q_lora_rank=cfg.get("q_lora_rank"),
            kv_lora_rank=cfg["kv_lora_rank"],
            qk_nope_head_dim=nope_dim,
            qk_rope_head_dim=rope_dim,
            v_head_dim=cfg["v_head_dim"],
            # V2 rotates adjacent pairs (complex multiply); V3 does where rope_interleave is set
            rope_interleave=bool(cfg.get("rope_interleave", True)),
            softmax_scale=(nope_dim + rope_dim) ** -0.5 * _mscale_squared(_rope(cfg)[1]),
        )


def _mscale_squared(scaling: dict[str, Any] | None) -> float:
    """YaRN's factor on the softmax scale of MLA models: mscale(factor, mscale_all_dim)^2."""
    if not scaling or (scaling.get("rope_type") or scaling.get("type")) in (None, "default"):
        return 1.0
    from radixgen.runtime.model.layers import yarn_mscale  # lazily: it imports torch

    mscale_all_dim = scaling.get("mscale_all_dim") or 0
    return yarn_mscale(float(scaling["factor"]), mscale_all_dim) ** 2 if mscale_all_dim else 1.0


@dataclass(frozen=True)
class ModelArch:
    architecture: str
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    rms_norm_eps: float
    rope_theta: float
    rope_scaling: dict[str, Any] | None
    max_position_embeddings: int
    tie_word_embeddings: bool
    qkv_bias: bool
    sliding_window: int | None
    eos_token_ids: tuple[int, ...]
    torch_dtype: str
    qk_norm: bool = False
    moe: MoEArch | None = None
    mla: MLAArch | None = None

    @property
    def attention_shape(self) -> tuple[int, int, int]:
        """(query heads, KV heads, head dim) the attention backend sees: with MLA, one KV head
        of the latent width (queries absorbed into the latent space, see model/mla.py)."""
        if self.mla is not None:
            return self.num_heads, 1, self.mla.latent_dim
        return self.num_heads, self.num_kv_heads, self.head_dim

    @property
    def pool_shape(self) -> tuple[int, int]:
        """(heads, head dim) of the K and V planes of this model's KV pools: with MLA, the latent
        split over both planes in groups (radix/latent_pool.py), so no value is stored twice."""
        if self.mla is not None:
            from radixgen.radix.latent_pool import latent_groups

            return latent_groups(self.mla.kv_lora_rank, self.mla.qk_rope_head_dim)
        return self.num_kv_heads, self.head_dim

    def is_moe_layer(self, n: int) -> bool:
        return self.moe is not None and n not in self.moe.dense_layers

    @property
    def q_size(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.num_kv_heads * self.head_dim

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> "ModelArch":
        arch = (cfg.get("architectures") or [_BY_MODEL_TYPE.get(cfg.get("model_type"), "")])[0]
        if arch not in SUPPORTED_ARCHITECTURES:
            raise ValueError(
                f"unsupported architecture {arch or cfg.get('model_type')!r}; supported: "
                f"{', '.join(SUPPORTED_ARCHITECTURES)}"
            )
        heads = cfg["num_attention_heads"]
        eos = cfg.get("eos_token_id")
        eos_ids = tuple(eos) if isinstance(eos, list) else ((eos,) if eos is not None else ())
        rope_theta, rope_scaling = _rope(cfg)
        return cls(
            architecture=arch,
            hidden_size=cfg["hidden_size"],
            intermediate_size=cfg["intermediate_size"],
            num_layers=cfg["num_hidden_layers"],
            num_heads=heads,
            num_kv_heads=cfg.get("num_key_value_heads") or heads,
            head_dim=cfg.get("head_dim") or cfg["hidden_size"] // heads,
            vocab_size=cfg["vocab_size"],
            rms_norm_eps=cfg.get("rms_norm_eps", 1e-6),
            rope_theta=rope_theta,
            rope_scaling=rope_scaling,
            max_position_embeddings=cfg.get("max_position_embeddings", 4096),
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            qkv_bias=bool(
                cfg.get("qkv_bias", arch in _QKV_BIAS) or cfg.get("attention_bias", False)
            ),
            sliding_window=cfg.get("sliding_window")
            if cfg.get("use_sliding_window", True)
            else None,
            eos_token_ids=eos_ids,
            torch_dtype=str(cfg.get("torch_dtype") or cfg.get("dtype") or "float32"),
            qk_norm=arch in _QK_NORM,
            moe=MoEArch.from_config(arch, cfg),
            mla=MLAArch.from_config(arch, cfg),
        )

    @classmethod
    def from_folder(cls, folder: str | Path) -> "ModelArch":
        path = Path(folder) / "config.json"
        if not path.is_file():
            raise FileNotFoundError(f"{folder} is not an HF model folder: config.json is missing")
        return cls.from_config(json.loads(path.read_text()))


def _rope(cfg: dict[str, Any]) -> tuple[float, dict[str, Any] | None]:
    """(theta, scaling) from `rope_theta` + `rope_scaling` (transformers 4) or from the single
    `rope_parameters` dict that transformers 5 writes instead."""
    params = cfg.get("rope_parameters") or {}
    theta = float(cfg.get("rope_theta") or params.get("rope_theta") or 10000.0)
    scaling = cfg.get("rope_scaling")
    if scaling is None and params.get("rope_type", "default") != "default":
        scaling = {k: v for k, v in params.items() if k != "rope_theta"}
    return theta, scaling
