"""The NVFP4 decode kernel in CUDA C++ (csrc/nvfp4_decode.cu), compiled at first use by NVRTC.

decode_attention.py dispatches NVFP4 pools here when `available` and `supports` say so, and to
the Triton kernel (decode_tile.py) otherwise: this kernel is the same contract (one program per
(KV head, request, split) writing partial (o, lse) at split_base + split of split_stride), with the
dequantize cut from about six instructions per value to about two (the source's header says how).
It needs an NVIDIA GPU of compute capability 8.9 or newer (cvt e4m3x2, movmatrix) and the NVRTC
library of the CUDA runtime torch was built with; nothing is downloaded, and without either the
Triton kernel runs. RADIXGEN_CUDA_KERNELS=0 turns it off.

Two pipelines (CONFIG["stages"]): by default CTAs of the (up to 8) KV heads of a (request, split)
copy each token's codes and scales for all of them, one contiguous run of the slot, into shared
memory by cp.async, two tiles deep; the register pipeline (one warp per CTA loading its head's
64-byte rows itself) is kept for pools whose scales are not 16-byte aligned or whose stages do
not fit a CTA's shared memory (`_stageable`, `_fits`). On an H100 at 64 x
4096 tokens the shared-memory one took 0.130 ms, the register one 0.151 (0.125 timed as ten calls
per graph, without one launch's floor; docs/benchmarks-history.md).

A sequence split between an FP8 pool and an NVFP4 pool (the mixed-precision radix tree's prefix
and branch pools) takes one launch of the staged pipeline compiled with FP8_PART (`MixedCall`;
decode_attention.USE_CUDA_MIXED). Two launches paid two ramps and two tails: on an H100 at 64 x
4096 tokens, half in each pool, 0.172 ms (+8.8% over the average of the parts) against 0.164
(+4.2%) in one launch whose first CTAs attend the FP8 part and the others the NVFP4 part, all
writing split partials for one reduce (docs/benchmarks-history.md). Compiled with PAIRED as well, each CTA
attends one split of both parts in one pipeline and one softmax state (decode_attention.MIXED_PAIRED).

The kernel is launched through the CUDA driver API (ctypes): no torch extension build, no host
compiler. Compiled kernels are kept per (device, head dim, group, KV heads, dtypes, pipeline).
"""

from __future__ import annotations

import ctypes
import glob
import logging
import os
from pathlib import Path

import torch

from ._common import ctas_per_sm, interpreting
from .kv_layout import FMT_FP8, FMT_NVFP4, KVBuffers

log = logging.getLogger(__name__)

_SOURCE = Path(__file__).parent / "csrc" / "nvfp4_decode.cu"
HEAD_DIMS = (64, 128, 256)
MAX_GROUP = 8  # query heads per KV head: the S^T MMA's n8 columns
# The kernel's pipeline and occupancy, module-level so a benchmark can sweep them. "stages" 0: the
# register pipeline, "warps" programs per CTA and the occupancy hint "min_warps" per SM; "stages"
# >= 2: the shared-memory pipeline (CTAs of the KV heads of a (request, split), so each token's
# codes are fetched as one run), "min_ctas" CTAs per SM as its hint (csrc/nvfp4_decode.cu says how).
CONFIG = {"stages": 2, "warps": 1, "min_warps": 10, "min_ctas": 2}
_OUT_KINDS = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
_state: dict = {}  # "error": why the kernel is unavailable; "kernels": compiled kernels by key


def available(device: torch.device) -> bool:
    """True when the kernel can run on `device`: CUDA, sm_89+, NVRTC present, not turned off."""
    if (
        device.type != "cuda"
        or interpreting()
        or os.environ.get("RADIXGEN_CUDA_KERNELS", "1") == "0"
    ):
        return False
    if torch.cuda.get_device_capability(device) < (8, 9):
        return False
    if "nvrtc" not in _state:
        _state["nvrtc"] = _load_nvrtc()
    return _state["nvrtc"] is not None and "error" not in _state


def supports(q: torch.Tensor, kv: KVBuffers) -> bool:
    """The shapes and dtypes this kernel is built for (the Triton kernel takes the rest)."""
    return (
        kv.fmt == FMT_NVFP4
        and kv.head_dim in HEAD_DIMS
        and q.dtype in (torch.float16, torch.bfloat16)
        and q.shape[1] % kv.num_kv_heads == 0
        and q.shape[1] // kv.num_kv_heads <= MAX_GROUP
    )


class DecodeCall:
    """One launch of the kernel for a pool, less its split count (as decode_attention's _KernelCall)."""

    def __init__(
        self,
        q: torch.Tensor,
        kv: KVBuffers,
        kv_indptr: torch.Tensor,
        kv_indices: torch.Tensor,
        scale_log2: float,
    ):
        self.q, self.kv, self.indptr, self.indices = q, kv, kv_indptr, kv_indices
        self.batch, self.device, self.scale_log2 = q.shape[0], q.device, scale_log2
        self.head_groups = kv.num_kv_heads
        self.stages = (
            CONFIG["stages"] if _stageable(kv) and _fits(q.device, kv, CONFIG["stages"]) else 0
        )

    def compiled(self, out_dtype: torch.dtype) -> "_Kernel":
        return kernel(self.device, self.defines(out_dtype))

    def defines(self, out_dtype: torch.dtype) -> dict:
        """The kernel's compile-time constants for this call."""
        q, kv = self.q, self.kv
        defines = dict(
            HEAD_DIM=kv.head_dim,
            GROUP=q.shape[1] // kv.num_kv_heads,
            HKV=kv.num_kv_heads,
            Q_BF16=int(q.dtype == torch.bfloat16),
            OUT_KIND=_OUT_KINDS[out_dtype],
            INDPTR64=int(self.indptr.dtype == torch.int64),
            INDICES64=int(self.indices.dtype == torch.int64),
            STAGES=self.stages,
        )
        if self.stages:
            hc = heads_per_cta(kv.num_kv_heads)
            # at head dim 256 two CTAs of 8 warps would cap registers at 128 and spill
            defines.update(
                HC=hc,
                MIN_CTAS=CONFIG["min_ctas"] if kv.head_dim <= 128 else 1,
                SMEM_BYTES=self.stages * stage_bytes(kv.head_dim, hc),
            )
        else:
            defines.update(
                WARPS=CONFIG["warps"], MIN_WARPS=max(CONFIG["min_warps"], CONFIG["warps"])
            )
        return defines

    def _warps_per_cta(self, k: "_Kernel") -> int:
        return k.defines["HC"] if self.stages else k.defines["WARPS"]

    def launch(
        self,
        mid_o: torch.Tensor,
        mid_lse: torch.Tensor,
        splits: int,
        split_base: int,
        stride: int,
        gdc: int = 0,
    ) -> None:
        """Write (o, lse) per (request, head, split) into mid_o [B, Hq, stride, D] / mid_lse [B, Hq,
        stride] at split_base + split (stride 1: the final o [B, Hq, D], lse [B, Hq]). Always a plain
        launch that lets the next launch start early (sm_90+), whatever `gdc` asks."""
        kv = self.kv
        programs = kv.num_kv_heads * self.batch * splits
        k = self.compiled(mid_o.dtype)
        warps = self._warps_per_cta(k)
        k.launch(
            (programs + warps - 1) // warps,
            32 * warps,
            self.args(mid_o, mid_lse, splits, split_base, stride),
            torch.cuda.current_stream(self.device),
        )

    def args(
        self, mid_o: torch.Tensor, mid_lse: torch.Tensor, splits: int, split_base: int, stride: int
    ) -> list:
        kv = self.kv
        args = [
            (ctypes.c_void_p, t.data_ptr())
            for t in (
                self.q,
                kv.k,
                kv.v,
                kv.k_bscale,
                kv.v_bscale,
                kv.k_scale,
                kv.v_scale,
                self.indptr,
                self.indices,
                mid_o,
                mid_lse,
            )
        ]
        return args + [
            (ctypes.c_float, self.scale_log2),
            (ctypes.c_int, self.batch),
            (ctypes.c_int, split_base),
            (ctypes.c_int, splits),
            (ctypes.c_int, stride),
        ]

    def resident(self) -> int:
        """Programs (warps) resident at once on the device, from the compiled kernel's registers
        and shared memory."""
        k = self.compiled(torch.float32)
        props = torch.cuda.get_device_properties(self.device)
        warps = self._warps_per_cta(k)
        return ctas_per_sm(k.num_regs, k.smem, warps, props) * warps * props.multi_processor_count


class MixedCall:
    """One launch for an FP8 part and an NVFP4 part of the same requests (the kernel compiled with
    FP8_PART). Paired (where decode_attention._use_paired says): each CTA attends split j of both
    parts, the FP8 part's tiles then the NVFP4 part's, into one state, so a split writes one
    partial (none to reduce at one split). Otherwise CTAs [0, fp8 splits x CTAs per split) attend
    the FP8 pool's slots, the rest the NVFP4 pool's, each writing its split's partials at its
    part's split base. Built only where `mixed_supported` holds; a failed compile raises (the
    caller launches the parts separately)."""

    def __init__(
        self, q: torch.Tensor, fp8: tuple, nvfp4: tuple, scale_log2: float, paired: bool = False
    ):
        self.nv = DecodeCall(q, *nvfp4, scale_log2)
        self.fp8_kv, self.fp8_indptr, self.fp8_indices = fp8
        self.batch, self.device, self.paired = self.nv.batch, self.nv.device, paired
        self._resident = None  # (asked for by the split rule and by the pairing rule)
        self.hc = heads_per_cta(self.fp8_kv.num_kv_heads)
        self.head_groups = self.fp8_kv.num_kv_heads // self.hc  # CTAs per (request, split)

    def compiled(self, out_dtype: torch.dtype) -> "_Kernel":
        defines = self.nv.defines(out_dtype)
        defines.update(
            FP8_PART=1,
            PAIRED=int(self.paired),
            SMEM_BYTES=self.nv.stages
            * max(
                stage_bytes(self.nv.kv.head_dim, self.hc),
                fp8_stage_bytes(self.nv.kv.head_dim, self.hc),
            ),
        )
        return kernel(self.device, defines)

    def launch(
        self,
        mid_o: torch.Tensor,
        mid_lse: torch.Tensor,
        fp8_splits: int,
        fp8_base: int,
        nvfp4_splits: int,
        nvfp4_base: int,
        stride: int,
    ) -> None:
        """Both parts' (o, lse) partials into mid_o / mid_lse (as DecodeCall.launch) in one launch.
        Paired, the two parts' split counts must be equal and the partials of split j land at
        nvfp4_base + j (fp8_base unused)."""
        if self.paired and fp8_splits != nvfp4_splits:
            raise ValueError(
                f"a paired launch splits both parts alike, got {fp8_splits} and {nvfp4_splits}"
            )
        k = self.compiled(mid_o.dtype)
        kv = self.fp8_kv
        args = self.nv.args(mid_o, mid_lse, nvfp4_splits, nvfp4_base, stride)
        args += [
            (ctypes.c_void_p, t.data_ptr())
            for t in (kv.k, kv.v, kv.k_scale, kv.v_scale, self.fp8_indptr, self.fp8_indices)
        ]
        args += [(ctypes.c_int, fp8_base), (ctypes.c_int, fp8_splits)]
        ctas = (
            self.head_groups
            * self.batch
            * (nvfp4_splits if self.paired else fp8_splits + nvfp4_splits)
        )
        k.launch(ctas, 32 * self.hc, args, torch.cuda.current_stream(self.device))

    def resident(self) -> int:
        """CTAs resident at once on the device."""
        if self._resident is None:
            k = self.compiled(torch.float32)
            props = torch.cuda.get_device_properties(self.device)
            self._resident = (
                ctas_per_sm(k.num_regs, k.smem, self.hc, props) * props.multi_processor_count
            )
        return self._resident


def mixed_supported(
    q: torch.Tensor, fp8: KVBuffers, nvfp4: KVBuffers, fp8_index: tuple, nvfp4_index: tuple
) -> bool:
    """Whether MixedCall takes this FP8 part and NVFP4 part in one launch: the NVFP4 part runs the
    staged pipeline, both pools have the same heads, the FP8 rows are 16-byte aligned for cp.async,
    both parts' index tensors have the same dtypes, and the stages fit a CTA's shared memory."""
    if not (fp8.fmt == FMT_FP8 and supports(q, nvfp4) and available(q.device)):
        return False
    if (fp8.num_kv_heads, fp8.head_dim) != (nvfp4.num_kv_heads, nvfp4.head_dim):
        return False
    if [t.dtype for t in fp8_index] != [t.dtype for t in nvfp4_index]:
        return False
    if not (
        CONFIG["stages"]
        and _stageable(nvfp4)
        and all(t.data_ptr() % 16 == 0 for t in (fp8.k, fp8.v))
    ):
        return False
    hc = heads_per_cta(fp8.num_kv_heads)
    return _fits(q.device, nvfp4, CONFIG["stages"], fp8_stage_bytes(fp8.head_dim, hc))


def heads_per_cta(num_kv_heads: int) -> int:
    """KV heads per CTA of the staged pipeline: the largest power of two <= 8 dividing the count."""
    return next(n for n in (8, 4, 2, 1) if num_kv_heads % n == 0)


def stage_bytes(head_dim: int, hc: int) -> int:
    """Shared memory of one stage of 32 tokens (the kernel's STAGE_BYTES): key and value codes of
    hc heads, and their scale rows, padded by 16 bytes once they are 16 bytes or more."""
    scale_row = hc * head_dim // 16
    pitch = scale_row + 16 if scale_row >= 16 else scale_row
    return 2 * 32 * (hc * head_dim // 2) + 2 * 32 * pitch


def fp8_stage_bytes(head_dim: int, hc: int) -> int:
    """Shared memory of one FP8 stage of 16 tokens (the kernel's STAGE8_BYTES): key and value
    codes of hc heads, one byte per value."""
    return 2 * 16 * hc * head_dim


def _fits(device: torch.device, kv: KVBuffers, stages: int, other_stage: int = 0) -> bool:
    """Whether `stages` stages (of the larger of the NVFP4 stage and `other_stage` bytes) fit one
    CTA's shared memory on `device` (sm_89 gives 99 KiB, so head dim 256 with 8 heads per CTA
    takes the register pipeline there)."""
    if not stages or device.type != "cuda":
        return True
    props = torch.cuda.get_device_properties(device)
    limit = getattr(props, "shared_memory_per_block_optin", 48 * 1024)
    return (
        stages * max(stage_bytes(kv.head_dim, heads_per_cta(kv.num_kv_heads)), other_stage) <= limit
    )


def _stageable(kv: KVBuffers) -> bool:
    """cp.async needs 16-byte aligned code rows and scale chunks aligned to their size."""
    chunk = min(16, heads_per_cta(kv.num_kv_heads) * kv.head_dim // 16)
    return all(t.data_ptr() % 16 == 0 for t in (kv.k, kv.v)) and all(
        t.data_ptr() % chunk == 0 for t in (kv.k_bscale, kv.v_bscale)
    )


# ---------------------------------------------------------------- NVRTC and the driver API


class _Kernel:
    def __init__(
        self, func: ctypes.c_void_p, module: ctypes.c_void_p, defines: dict, num_regs: int
    ):
        self.func, self.module, self.defines, self.num_regs = func, module, defines, num_regs
        self.smem = defines.get("SMEM_BYTES", 0)  # dynamic shared memory per CTA

    def launch(self, blocks: int, threads: int, args: list, stream: torch.cuda.Stream) -> None:
        values = [ctype(value) for ctype, value in args]
        params = (ctypes.c_void_p * len(values))(
            *[ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in values]
        )
        _check(
            _cuda().cuLaunchKernel(
                self.func,
                blocks,
                1,
                1,
                threads,
                1,
                1,
                self.smem,
                ctypes.c_void_p(stream.cuda_stream),
                params,
                None,
            ),
            "cuLaunchKernel",
        )


def kernel(device: torch.device, defines: dict) -> _Kernel:
    """The compiled kernel for these constants on `device` (compiled and loaded once)."""
    kernels = _state.setdefault("kernels", {})
    key = (device.index, tuple(sorted(defines.items())))
    if key not in kernels:
        try:
            kernels[key] = _build(device, defines)
        except Exception as exc:  # a failed compile or load: the Triton kernel from now on
            _state["error"] = f"{type(exc).__name__}: {exc}"
            log.warning(
                "NVFP4 CUDA decode kernel unavailable, using the Triton kernel (%s)",
                _state["error"],
            )
            raise
    return kernels[key]


def _build(device: torch.device, defines: dict) -> _Kernel:
    major, minor = torch.cuda.get_device_capability(device)
    options = [f"--gpu-architecture=sm_{major}{minor}", "-std=c++17", "--fmad=true"]
    options += [f"-D{name}={value}" for name, value in defines.items()]
    cubin = _compile(_SOURCE.read_text(), options)
    with torch.cuda.device(device):
        torch.cuda.current_stream(device).synchronize()  # the primary context is current
        cuda = _cuda()
        module, func, regs = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_int()
        _check(cuda.cuModuleLoadData(ctypes.byref(module), cubin), "cuModuleLoadData")
        _check(
            cuda.cuModuleGetFunction(ctypes.byref(func), module, b"nvfp4_decode"),
            "cuModuleGetFunction",
        )
        _check(
            cuda.cuFuncGetAttribute(ctypes.byref(regs), 4, func), "cuFuncGetAttribute"
        )  # NUM_REGS
        if defines.get("SMEM_BYTES", 0) > 48 * 1024:  # above 48 KiB a kernel must opt in
            _check(
                cuda.cuFuncSetAttribute(
                    func, 8, defines["SMEM_BYTES"]
                ),  # MAX_DYNAMIC_SHARED_SIZE_BYTES
                "cuFuncSetAttribute",
            )
    return _Kernel(func, module, dict(defines), regs.value)


def _compile(source: str, options: list[str]) -> bytes:
    nvrtc = _state.get("nvrtc") or _load_nvrtc()
    if nvrtc is None:
        raise RuntimeError("no NVRTC library")
    prog = ctypes.c_void_p()
    _check_nvrtc(
        nvrtc,
        nvrtc.nvrtcCreateProgram(
            ctypes.byref(prog), source.encode(), b"nvfp4_decode.cu", 0, None, None
        ),
    )
    try:
        opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
        if nvrtc.nvrtcCompileProgram(prog, len(options), opts) != 0:
            size = ctypes.c_size_t()
            nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
            text = ctypes.create_string_buffer(size.value)
            nvrtc.nvrtcGetProgramLog(prog, text)
            raise RuntimeError(f"NVRTC compile failed:\n{text.value.decode(errors='replace')}")
        size = ctypes.c_size_t()
        _check_nvrtc(nvrtc, nvrtc.nvrtcGetCUBINSize(prog, ctypes.byref(size)))
        binary = ctypes.create_string_buffer(size.value)
        _check_nvrtc(nvrtc, nvrtc.nvrtcGetCUBIN(prog, binary))
        return binary.raw
    finally:
        nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))


def _load_nvrtc():
    """The NVRTC library of torch's CUDA version: by soname, else from the nvidia wheels."""
    if torch.version.cuda is None:
        return None
    major = torch.version.cuda.split(".")[0]
    names = [f"libnvrtc.so.{major}", "libnvrtc.so"]
    for site in {str(Path(torch.__file__).parent.parent)}:
        names += sorted(glob.glob(f"{site}/nvidia/**/libnvrtc.so*", recursive=True))
    for name in names:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    _state["error"] = "no NVRTC library found"
    return None


def _cuda():
    if "cuda" not in _state:
        _state["cuda"] = ctypes.CDLL("libcuda.so.1")
    return _state["cuda"]


def _check(result: int, what: str) -> None:
    if result != 0:
        name = ctypes.c_char_p()
        _cuda().cuGetErrorName(result, ctypes.byref(name))
        raise RuntimeError(f"{what} failed: {name.value.decode() if name.value else result}")


def _check_nvrtc(nvrtc, result: int) -> None:
    if result != 0:
        nvrtc.nvrtcGetErrorString.restype = ctypes.c_char_p
        raise RuntimeError(f"NVRTC error: {nvrtc.nvrtcGetErrorString(result).decode()}")
