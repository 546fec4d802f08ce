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

On CUDA (`store_backend="auto"`) a store runs all of this on the device, with no host sync:
`kernels.kv_store.pool_store` finds the amax, grows the scale and rescales the head behind a
device-side branch, and quantizes the rows, in one launch per K or V for decode-sized stores;
NaN/Inf inputs set a flag that `check_finite` reads. The CPU path does the same arithmetic in
torch ops (bit-identical; the growth factor is computed from the exponents, never from a
rounded log2).

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

    def __init__(
        self,
        num_slots: int,
        num_layers: int,
        num_kv_heads: int,
        head_dim: int,
        compute_dtype: torch.dtype,
        device: torch.device | str = "cpu",
        store_backend: str = "auto",
    ):
        self.num_slots, self.dtype = num_slots, compute_dtype
        self.num_kv_heads, self.head_dim = num_kv_heads, head_dim
        # 0 = not calibrated yet; [num_layers, Hkv] for K and for V
        self.scales = {n: torch.zeros(num_layers, num_kv_heads, device=device) for n in ("k", "v")}
        if store_backend not in ("auto", "triton", "torch"):
            raise ValueError(f"store_backend must be auto, triton or torch, got {store_backend!r}")
        # triton: calibrate, grow and quantize on the device (kernels.kv_store.pool_store), no host
        # sync; torch: the same arithmetic in torch ops (the CPU path)
        self.fused_store = store_backend == "triton" or (
            store_backend == "auto" and torch.device(device).type == "cuda"
        )
        self._hw_host = 0  # torch path: every slot ever written is below this
        self._hw_dev = torch.zeros(1, dtype=torch.int32, device=device)  # the same, triton path
        self._nonfinite = torch.zeros(
            1, dtype=torch.int32, device=device
        )  # triton path: NaN/Inf seen

    @property
    def high_water(self) -> int:
        """Every slot ever written is below this (reads the device counter: a host sync)."""
        return max(self._hw_host, int(self._hw_dev.item()))

    @property
    def masked_store(self) -> bool:
        """store_range skips rows outside its slot range on the device (no host sync)."""
        return self.fused_store

    @property
    def pad_slot(self) -> int | None:
        """The slot padding rows of CUDA-graph decode batches write to: -1, which the device store
        skips; None where the store is not host-sync-free (the torch path)."""
        return -1 if self.fused_store else None

    def store(self, layer: int, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """Quantize k, v [n, Hkv, D] with the layer's scales (calibrating or growing them first)
        and write them at `slots` [n]."""
        self.store_range(layer, slots, k, v, 0, self.num_slots)

    def store_range(
        self, layer: int, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lo: int, hi: int
    ) -> None:
        """store() of the rows whose slot lies in [lo, hi), at slot - lo; scales are calibrated
        from those rows only. Without a host sync on the triton path."""
        if self.fused_store:
            from radixgen.kernels.kv_store import pool_store  # lazily: it imports triton

            for name, x in (("k", k), ("v", v)):
                values, bscale = self._planes(layer, name)
                pool_store(
                    values,
                    bscale,
                    self.scales[name][layer],
                    slots,
                    x,
                    self._hw_dev,
                    self._nonfinite,
                    self.range_max,
                    HEADROOM,
                    lo,
                    hi,
                )
            return
        if lo != 0 or hi != self.num_slots:
            keep = (slots >= lo) & (slots < hi)
            slots, k, v = slots[keep] - lo, k[keep], v[keep]
        if not slots.numel():
            return
        self._hw_host = max(self._hw_host, int(slots.max()) + 1)
        for name, x in (("k", k), ("v", v)):
            scale = self._fit_scale(layer, name, x)
            self._write(layer, name, slots, x, scale)

    def check_finite(self) -> None:
        """Raise ValueError if a device-side store got NaN or Inf (a host sync; the torch path
        raises in the store itself)."""
        if int(self._nonfinite.item()):
            raise ValueError("a KV store got NaN or Inf values; they cannot be quantized")

    def gather(self, layer: int, slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Dequantized K and V at `slots` (any shape S): [*S, Hkv, D] in the compute dtype."""
        flat = slots.reshape(-1)
        shape = (*slots.shape, self.num_kv_heads, self.head_dim)
        return tuple(self._read(layer, n, flat).view(shape) for n in ("k", "v"))

    def gather_segment(
        self, layer: int, slots: torch.Tensor, span: tuple[int, int] | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return self.gather(layer, slots)

    def _fit_scale(self, layer: int, name: str, x: torch.Tensor) -> torch.Tensor:
        """The [Hkv] scale that represents x: calibrated on first use, grown by 2^k if x
        exceeds it (and the head's stored values rescaled by 2^-k)."""
        scale = self.scales[name][layer]
        amax = x.detach().abs().float().amax(dim=(0, 2))  # [Hkv]
        # a tensor divisor: exact division on every device (as the kernel's div_rn)
        need = (amax / torch.full_like(amax, self.range_max)).clamp(
            min=torch.finfo(torch.float32).tiny
        )
        if not bool((scale == 0).any() | (need > scale).any()):
            return scale
        fresh = scale == 0
        grow = torch.where(
            ~fresh & (need > scale), _pow2_at_least(need, scale), torch.ones_like(scale)
        )
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

    def __init__(
        self,
        num_slots,
        num_layers,
        num_kv_heads,
        head_dim,
        compute_dtype,
        device="cpu",
        store_backend="auto",
    ):
        super().__init__(
            num_slots, num_layers, num_kv_heads, head_dim, compute_dtype, device, store_backend
        )
        shape = (num_slots, num_kv_heads, head_dim)
        self.k = [
            torch.zeros(shape, dtype=torch.float8_e4m3fn, device=device) for _ in range(num_layers)
        ]
        self.v = [
            torch.zeros(shape, dtype=torch.float8_e4m3fn, device=device) for _ in range(num_layers)
        ]
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

    def _planes(self, layer, name):
        return getattr(self, name)[layer], None

    def _rescale(self, layer, name, grow) -> None:
        buf = getattr(self, name)[layer][: self._hw_host]  # [N, Hkv, D]; exact above subnormals
        buf.copy_((buf.float() / grow.view(1, -1, 1)).to(torch.float8_e4m3fn))


class NVFP4KVPool(_ScaledPool):
    """NVFP4 K and V: 4-bit E2M1 codes + an E4M3 scale per 16 values + an FP32 scale per
    (layer, head): 4.5 bits per value."""

    range_max = NVFP4_RANGE

    def __init__(
        self,
        num_slots,
        num_layers,
        num_kv_heads,
        head_dim,
        compute_dtype,
        device="cpu",
        store_backend="auto",
    ):
        if head_dim % 16:
            raise ValueError(f"an nvfp4 KV pool needs head_dim divisible by 16, got {head_dim}")
        super().__init__(
            num_slots, num_layers, num_kv_heads, head_dim, compute_dtype, device, store_backend
        )
        codes, bscale = (
            (num_slots, num_kv_heads, head_dim // 2),
            (num_slots, num_kv_heads, head_dim // 16),
        )
        for name in ("k", "v"):
            setattr(
                self,
                f"{name}_codes",
                [torch.zeros(codes, dtype=torch.uint8, device=device) for _ in range(num_layers)],
            )
            setattr(
                self,
                f"{name}_bscale",
                [
                    torch.ones(bscale, device=device).to(torch.float8_e4m3fn)
                    for _ in range(num_layers)
                ],
            )
        self.k_tscale, self.v_tscale = self.scales["k"], self.scales["v"]

    @staticmethod
    def bytes_per_token(num_layers: int, num_kv_heads: int, head_dim: int) -> float:
        return 2 * num_layers * num_kv_heads * (head_dim // 2 + head_dim // 16)

    def kv_buffers(self, layer: int):
        """This layer's buffers as the attention kernels take them (kernels.KVBuffers)."""
        from radixgen.kernels import KVBuffers  # lazily: it imports triton

        return KVBuffers(
            self.k_codes[layer],
            self.v_codes[layer],
            self.k_tscale[layer],
            self.v_tscale[layer],
            self.k_bscale[layer],
            self.v_bscale[layer],
        )

    def _write(self, layer, name, slots, x, scale) -> None:
        codes, bscale, _ = quantize_nvfp4(x, scale.view(-1, 1))  # [n, Hkv, D/2], [n, Hkv, D/16]
        getattr(self, f"{name}_codes")[layer].index_copy_(0, slots, codes)
        _put(getattr(self, f"{name}_bscale")[layer], slots, bscale)

    def _read(self, layer, name, flat) -> torch.Tensor:
        codes = getattr(self, f"{name}_codes")[layer].index_select(0, flat)
        bscale = _take(getattr(self, f"{name}_bscale")[layer], flat)
        scale = self.scales[name][layer].clamp(min=torch.finfo(torch.float32).tiny)
        return dequantize_nvfp4(codes, bscale, scale.view(-1, 1), self.dtype)

    def _planes(self, layer, name):
        return getattr(self, f"{name}_codes")[layer], getattr(self, f"{name}_bscale")[layer]

    def _rescale(self, layer, name, grow) -> None:
        buf = getattr(self, f"{name}_bscale")[layer][: self._hw_host]  # [N, Hkv, D/16]
        buf.copy_((buf.float() / grow.view(1, -1, 1)).to(torch.float8_e4m3fn))


def _exp2i(e: torch.Tensor) -> torch.Tensor:
    """2^e as float32 for int32 e in [-126, 127] (exact, from the exponent bits)."""
    return ((e + 127) << 23).to(torch.int32).view(torch.float32)


def _pow2_at_least(need: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """2^k with k = ceil(log2(need / scale)), exactly (no log2 rounding), for positive normal
    float32 need and scale: need / scale lies in (2^(e-1), 2^(e+1)) for e the exponent difference.
    The same arithmetic as the device-side store (kernels.kv_store._fit_store_kernel)."""
    e = ((need.view(torch.int32) >> 23) & 255) - ((scale.view(torch.int32) >> 23) & 255)
    e = e.clamp(-126, 126)
    return _exp2i(torch.where(need <= scale * _exp2i(e), e, e + 1))


def _put(buf: torch.Tensor, slots: torch.Tensor, rows: torch.Tensor) -> None:
    """buf[slots] = rows, for any 1-byte dtype (index_copy_ lacks fp8 kernels on the CPU)."""
    buf.view(torch.uint8).index_copy_(0, slots, rows.view(torch.uint8))


def _take(buf: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
    return buf.view(torch.uint8).index_select(0, slots).view(buf.dtype)


def kv_bytes_per_token(
    kind: str, num_layers: int, num_kv_heads: int, head_dim: int, model_dtype: torch.dtype
) -> float:
    """Bytes one token's K and V take in every layer of a pool of `kind` (see KV_DTYPES)."""
    if kind == "fp8_e4m3":
        return FP8KVPool.bytes_per_token(num_layers, num_kv_heads, head_dim)
    if kind == "nvfp4":
        return NVFP4KVPool.bytes_per_token(num_layers, num_kv_heads, head_dim)
    bits = torch.finfo(dense_kv_dtype(kind, model_dtype)).bits
    return 2 * num_layers * num_kv_heads * head_dim * bits / 8


def dense_kv_dtype(kind: str, model_dtype: torch.dtype) -> torch.dtype:
    return {
        "auto": model_dtype,
        "bf16": torch.bfloat16,
        "fp16": torch.float16,
        "fp32": torch.float32,
    }[kind]


def make_kv_pool(
    kind: str,
    num_slots: int,
    num_layers: int,
    num_kv_heads: int,
    head_dim: int,
    model_dtype: torch.dtype,
    device: torch.device | str = "cpu",
):
    """A KV pool of `kind` (KV_DTYPES); quantized pools dequantize to `model_dtype`."""
    from radixgen.radix.kv_pool import KVPool

    if kind not in KV_DTYPES:
        raise ValueError(f"kv cache dtype must be one of {', '.join(KV_DTYPES)}, got {kind!r}")
    if kind == "fp8_e4m3":
        return FP8KVPool(num_slots, num_layers, num_kv_heads, head_dim, model_dtype, device)
    if kind == "nvfp4":
        return NVFP4KVPool(num_slots, num_layers, num_kv_heads, head_dim, model_dtype, device)
    return KVPool(
        num_slots,
        num_layers,
        num_kv_heads,
        head_dim,
        dense_kv_dtype(kind, model_dtype),
        device,
        compute_dtype=model_dtype,
    )
