"""Quantized KV pools: FP8 E4M3 and NVFP4, with the same store / gather interface as `KVPool`.

Layouts, per layer (the runtime's attention kernels read these buffers directly):
  fp8     k[l], v[l]              float8_e4m3fn [num_slots, Hkv, D]
          k_scale, v_scale        float32 [num_layers, Hkv]          x ~= q * scale
  nvfp4   k_codes[l], v_codes[l]  uint8 [num_slots, Hkv, D/2]         two E2M1 codes per byte
          k_bscale[l], v_bscale[l] float8_e4m3fn [num_slots, Hkv, D/16]
          k_tscale, v_tscale      float32 [num_layers, Hkv]          s_T per layer and head

Scales are calibrated from the data, per layer and head: the first store into a layer sets
scale = HEADROOM * amax / max_representable (FP8: 448; NVFP4 s_T: 6 * 448). The headroom costs
no precision (E4M3's relative precision is the same across its normal range; only values below
amax * 2^-6 * HEADROOM / 448 become subnormal) and makes growth rare: a later store whose amax
still exceeds the range grows that head's scale by a power of two, 2^k, and rescales what the
head already holds by 2^-k (FP8 values, or NVFP4 block scales; only slots up to the highest one
ever written): exact except where a value falls into the E4M3 subnormal range. So nothing ever
saturates and nothing is silently 1.0.

`gather` dequantizes to the compute dtype (the torch path); GPU kernels dequantize in registers.
"""

from __future__ import annotations

import torch

from radixgen.kernels import dequantize_fp8, dequantize_nvfp4, quantize_fp8, quantize_nvfp4

E4M3_MAX = 448.0
NVFP4_RANGE = 6.0 * 448.0  # the largest value an s_T of 1 represents
HEADROOM = 16.0
KV_DTYPES = ("auto", "bf16", "fp16", "fp32", "fp8_e4m3", "nvfp4")


class _ScaledPool:
    """Per-layer quantized K and V planes with per-(layer, head) scales grown on demand."""

    range_max: float = 1.0

    def __init__(self, num_slots: int, num_layers: int, num_kv_heads: int, head_dim: int,
                 compute_dtype: torch.dtype, device: torch.device | str = "cpu"):
        self.num_slots, self.dtype = num_slots, compute_dtype
        self.num_kv_heads, self.head_dim = num_kv_heads, head_dim
        # 0 = not calibrated yet; [num_layers, Hkv] for K and for V
        self.scales = {n: torch.zeros(num_layers, num_kv_heads, device=device) for n in ("k", "v")}
        self.high_water = 0  # every slot ever written is below this

    def store(self, layer: int, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """Quantize k, v [n, Hkv, D] with the layer's scales (calibrating or growing them first)
        and write them at `slots` [n]."""
        if slots.numel():
            self.high_water = max(self.high_water, int(slots.max()) + 1)
        for name, x in (("k", k), ("v", v)):
            scale = self._fit_scale(layer, name, x)
            self._write(layer, name, slots, x, scale)

    def gather(self, layer: int, slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Dequantized K and V at `slots` (any shape S): [*S, Hkv, D] in the compute dtype."""
        flat = slots.reshape(-1)
        shape = (*slots.shape, self.num_kv_heads, self.head_dim)
        return tuple(self._read(layer, n, flat).view(shape) for n in ("k", "v"))

    def gather_segment(self, layer: int, slots: torch.Tensor,
                       span: tuple[int, int] | None) -> tuple[torch.Tensor, torch.Tensor]:
        return self.gather(layer, slots)

    def _fit_scale(self, layer: int, name: str, x: torch.Tensor) -> torch.Tensor:
        """The [Hkv] scale that represents x: calibrated on first use, grown by 2^k if x
        exceeds it (and the head's stored values rescaled by 2^-k)."""
        scale = self.scales[name][layer]
        amax = x.detach().abs().float().amax(dim=(0, 2))  # [Hkv]
        need = (amax / self.range_max).clamp(min=torch.finfo(torch.float32).tiny)
        if not bool((scale == 0).any() | (need > scale).any()):
            return scale
        fresh = scale == 0
        grow = torch.where(~fresh & (need > scale), torch.exp2(torch.ceil(torch.log2(need / scale))),
                           torch.ones_like(scale))
        if bool((grow > 1).any()):
            self._rescale(layer, name, grow)
        scale.copy_(torch.where(fresh, need * HEADROOM, scale * grow))
        return scale

    @staticmethod
    def bytes_per_token(num_layers: int, num_kv_heads: int, head_dim: int) -> float:
        raise NotImplementedError


class FP8KVPool(_ScaledPool):
    """FP8 E4M3 K and V with per-(layer, head) scales: 8 bits per value."""

    range_max = E4M3_MAX

    def __init__(self, num_slots, num_layers, num_kv_heads, head_dim, compute_dtype, device="cpu"):
        super().__init__(num_slots, num_layers, num_kv_heads, head_dim, compute_dtype, device)
        shape = (num_slots, num_kv_heads, head_dim)
        self.k = [torch.zeros(shape, dtype=torch.float8_e4m3fn, device=device) for _ in range(num_layers)]
        self.v = [torch.zeros(shape, dtype=torch.float8_e4m3fn, device=device) for _ in range(num_layers)]
        self.k_scale, self.v_scale = self.scales["k"], self.scales["v"]

    @staticmethod
    def bytes_per_token(num_layers: int, num_kv_heads: int, head_dim: int) -> float:
        return 2 * num_layers * num_kv_heads * head_dim

    def kv_buffers(self, layer: int):
        """This layer's buffers as the attention kernels take them (kernels.KVBuffers)."""
        from radixgen.kernels import KVBuffers  # lazily: it imports triton

        return KVBuffers(self.k[layer], self.v[layer], self.k_scale[layer], self.v_scale[layer])

    def _write(self, layer, name, slots, x, scale) -> None:
        q, _ = quantize_fp8(x, scale.view(1, -1, 1))  # [n, Hkv, D]
        _put(getattr(self, name)[layer], slots, q)

    def _read(self, layer, name, flat) -> torch.Tensor:
        q = _take(getattr(self, name)[layer], flat)
        scale = self.scales[name][layer].clamp(min=torch.finfo(torch.float32).tiny)
        return dequantize_fp8(q, scale.view(1, -1, 1), self.dtype)

    def _rescale(self, layer, name, grow) -> None:
        buf = getattr(self, name)[layer][:self.high_water]  # [N, Hkv, D]; exact above subnormals
        buf.copy_((buf.float() / grow.view(1, -1, 1)).to(torch.float8_e4m3fn))


class NVFP4KVPool(_ScaledPool):
    """NVFP4 K and V: 4-bit E2M1 codes + an E4M3 scale per 16 values + an FP32 scale per
    (layer, head): 4.5 bits per value."""

    range_max = NVFP4_RANGE

    def __init__(self, num_slots, num_layers, num_kv_heads, head_dim, compute_dtype, device="cpu"):
        if head_dim % 16:
            raise ValueError(f"an nvfp4 KV pool needs head_dim divisible by 16, got {head_dim}")
        super().__init__(num_slots, num_layers, num_kv_heads, head_dim, compute_dtype, device)
        codes, bscale = (num_slots, num_kv_heads, head_dim // 2), (num_slots, num_kv_heads, head_dim // 16)
        for name in ("k", "v"):
            setattr(self, f"{name}_codes", [torch.zeros(codes, dtype=torch.uint8, device=device)
                                            for _ in range(num_layers)])
            setattr(self, f"{name}_bscale", [torch.ones(bscale, device=device).to(torch.float8_e4m3fn)
                                             for _ in range(num_layers)])
        self.k_tscale, self.v_tscale = self.scales["k"], self.scales["v"]

    @staticmethod
    def bytes_per_token(num_layers: int, num_kv_heads: int, head_dim: int) -> float:
        return 2 * num_layers * num_kv_heads * (head_dim // 2 + head_dim // 16)

    def kv_buffers(self, layer: int):
        """This layer's buffers as the attention kernels take them (kernels.KVBuffers)."""
        from radixgen.kernels import KVBuffers  # lazily: it imports triton

        return KVBuffers(self.k_codes[layer], self.v_codes[layer], self.k_tscale[layer], self.v_tscale[layer],
                         self.k_bscale[layer], self.v_bscale[layer])

    def _write(self, layer, name, slots, x, scale) -> None:
        codes, bscale, _ = quantize_nvfp4(x, scale.view(-1, 1))  # [n, Hkv, D/2], [n, Hkv, D/16]
        getattr(self, f"{name}_codes")[layer].index_copy_(0, slots, codes)
        _put(getattr(self, f"{name}_bscale")[layer], slots, bscale)

    def _read(self, layer, name, flat) -> torch.Tensor:
        codes = getattr(self, f"{name}_codes")[layer].index_select(0, flat)
        bscale = _take(getattr(self, f"{name}_bscale")[layer], flat)
        scale = self.scales[name][layer].clamp(min=torch.finfo(torch.float32).tiny)
        return dequantize_nvfp4(codes, bscale, scale.view(-1, 1), self.dtype)

    def _rescale(self, layer, name, grow) -> None:
        buf = getattr(self, f"{name}_bscale")[layer][:self.high_water]  # [N, Hkv, D/16]
        buf.copy_((buf.float() / grow.view(1, -1, 1)).to(torch.float8_e4m3fn))


def _put(buf: torch.Tensor, slots: torch.Tensor, rows: torch.Tensor) -> None:
    """buf[slots] = rows, for any 1-byte dtype (index_copy_ lacks fp8 kernels on the CPU)."""
    buf.view(torch.uint8).index_copy_(0, slots, rows.view(torch.uint8))


def _take(buf: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
    return buf.view(torch.uint8).index_select(0, slots).view(buf.dtype)


def kv_bytes_per_token(kind: str, num_layers: int, num_kv_heads: int, head_dim: int,
                       model_dtype: torch.dtype) -> float:
    """Bytes one token's K and V take in every layer of a pool of `kind` (see KV_DTYPES)."""
    if kind == "fp8_e4m3":
        return FP8KVPool.bytes_per_token(num_layers, num_kv_heads, head_dim)
    if kind == "nvfp4":
        return NVFP4KVPool.bytes_per_token(num_layers, num_kv_heads, head_dim)
    bits = torch.finfo(dense_kv_dtype(kind, model_dtype)).bits
    return 2 * num_layers * num_kv_heads * head_dim * bits / 8


def dense_kv_dtype(kind: str, model_dtype: torch.dtype) -> torch.dtype:
    return {"auto": model_dtype, "bf16": torch.bfloat16, "fp16": torch.float16,
            "fp32": torch.float32}[kind]


def make_kv_pool(kind: str, num_slots: int, num_layers: int, num_kv_heads: int, head_dim: int,
                 model_dtype: torch.dtype, device: torch.device | str = "cpu"):
    """A KV pool of `kind` (KV_DTYPES); quantized pools dequantize to `model_dtype`."""
    from radixgen.radix.kv_pool import KVPool

    if kind not in KV_DTYPES:
        raise ValueError(f"kv cache dtype must be one of {', '.join(KV_DTYPES)}, got {kind!r}")
    if kind == "fp8_e4m3":
        return FP8KVPool(num_slots, num_layers, num_kv_heads, head_dim, model_dtype, device)
    if kind == "nvfp4":
        return NVFP4KVPool(num_slots, num_layers, num_kv_heads, head_dim, model_dtype, device)
    return KVPool(num_slots, num_layers, num_kv_heads, head_dim, dense_kv_dtype(kind, model_dtype), device,
                  compute_dtype=model_dtype)

