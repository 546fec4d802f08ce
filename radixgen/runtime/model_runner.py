"""Owns the model, the KV pool, the slot allocator and the request-to-token table, and turns
lists of requests into forward batches."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch

from radixgen.config import CacheConfig, LoraConfig, ModelConfig
from radixgen.radix.kv_pool import ReqToTokenTable, SlotAllocator
from radixgen.radix.latent_pool import LatentPool
from radixgen.radix.mixed_kv_pool import MixedKVPool, TieredSlotAllocator
from radixgen.radix.quant_kv_pool import kv_bytes_per_token, make_kv_pool
from radixgen.runtime.attention_kernels import KernelAttention, make_attention
from radixgen.runtime.cuda_graph import DecodeGraphs
from radixgen.runtime.distributed.group import TensorParallel
from radixgen.runtime.distributed.sharding import attach_parallel, rank_arch
from radixgen.runtime.distributed.step import NO_STEPS
from radixgen.runtime.forward_batch import ForwardBatch, ForwardMode
from radixgen.runtime.lora.manager import LoraManager
from radixgen.runtime.mla_attention import LatentAttention
from radixgen.runtime.model.arch import ModelArch
from radixgen.runtime.model.loader import load_state_dict, resolve_dtype
from radixgen.runtime.model.registry import build_model
from radixgen.runtime.quant.checkpoint import quantized_weights
from radixgen.runtime.quant.linear import check_weight_kernels
from radixgen.runtime.quant.weight import QuantizedWeight
from radixgen.runtime.request import Request
from radixgen.runtime.weights.version import sampled_checksum

logger = logging.getLogger(__name__)

# the CPU's default KV pool: this many full contexts (at the model dtype), so it is the same on
# every run and machine; --max-total-tokens sets any other size
CPU_CONTEXTS_PER_POOL = 4


@dataclass
class TreeInput:
    """A token tree fed as an extend of `req` whose new tokens attend to each other by `mask`:
    a speculative tree to verify (the root, then draft nodes: TokenTree.verify_mask) or a
    group of scoring prompts (score_group.py)."""

    req: Request
    token_ids: torch.Tensor  # int64 [R]
    positions: torch.Tensor  # int64 [R]
    mask: torch.Tensor  # bool [R, R]
    slots: torch.Tensor  # int64 [R]: the KV slot each row is written to
    logit_rows: torch.Tensor | None = None  # int64: the rows that need logits (None: all)

    def rows_with_logits(self) -> torch.Tensor:
        return torch.arange(len(self.slots)) if self.logit_rows is None else self.logit_rows


def _nbytes(weight: torch.Tensor | QuantizedWeight) -> int:
    return (
        weight.nbytes
        if isinstance(weight, QuantizedWeight)
        else weight.numel() * weight.element_size()
    )


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


class ModelRunner:
    def __init__(
        self,
        model_path: Path,
        model_cfg: ModelConfig,
        cache_cfg: CacheConfig,
        max_running_requests: int,
        lora_cfg: LoraConfig | None = None,
        parallel: TensorParallel | None = None,
    ):
        self.device = resolve_device(model_cfg.device)
        # with tp: self.arch is this rank's share (its heads, widths, experts), `full` the model's
        full, self.arch, shard = rank_arch(ModelArch.from_folder(model_path), parallel)
        self.max_context_len = context_len(self.arch, model_cfg.context_length)
        self.dtype = resolve_dtype(model_cfg.dtype, self.arch, self.device)
        weights = load_state_dict(
            model_path, full, self.dtype, model_cfg.load_format, self.device, model_cfg.seed, shard
        )
        self.weights_checksum = sampled_checksum(weights)  # of the checkpoint as loaded
        weights, self.quantization = quantized_weights(
            model_path,
            weights,
            model_cfg.quantization,
            model_cfg.quantize_lm_head,
            model_cfg.nvfp4_scale_search,
            model_cfg.load_format,
        )
        if self.device.type == "cuda" and self.quantization != "none":
            check_weight_kernels(weights, self.dtype)
        self.weight_bytes = weight_bytes = sum(_nbytes(t) for t in weights.values())
        self.model = build_model(self.arch, weights, self.device)
        attach_parallel(self.model, parallel)
        self.steps = NO_STEPS  # rank 0 of a tp group: a StepBroadcaster (distributed/step.py)
        a = self.arch
        self.kv_dtypes = resolve_kv_dtypes(cache_cfg)  # (prefix, branch)
        self.kv_rotation = resolve_kv_rotation(cache_cfg, self.kv_dtypes)
        if self.kv_rotation:
            self.model.rotate_qk()
        self._build_kv(cache_cfg, weight_bytes)
        self.branch_window = cache_cfg.branch_window if self.mixed_kv else None
        self.table = ReqToTokenTable(max_running_requests + 1, self.max_context_len, self.device)
        self.attn = make_attention(
            model_cfg.attention_backend, a, self.device, model_cfg.mla_expand_threshold
        )
        self.model_cfg, self.max_running_requests = model_cfg, max_running_requests
        self.lora = (  # adapters, and their pool that every weight version's forwards read
            LoraManager(lora_cfg, self.arch, self.dtype, self.device)
            if lora_cfg is not None and lora_cfg.enable_lora
            else None
        )
        self.graphs = self._decode_graphs(model_cfg, max_running_requests)
        logger.info(
            "weights: %.1f MB %s (quantization %s) on %s; context %d tokens",
            weight_bytes / 1e6,
            str(self.dtype).removeprefix("torch."),
            self.quantization,
            self.device,
            self.max_context_len,
        )
        logger.info("KV pool: %s (%.3g GiB)", self.kv_summary(), self.kv_bytes() / 2**30)
        if self.device.type == "cuda":
            logger.info(
                "CUDA graphs: %s",
                f"decode batches up to {self.graphs.max_bs}, each captured at its first use"
                if self.graphs is not None
                else "off (eager decode)",
            )

    @property
    def mixed_kv(self) -> bool:
        return self.kv_dtypes[0] != self.kv_dtypes[1]

    def _build_kv(self, cfg: CacheConfig, weight_bytes: int) -> None:
        """One pool, or (mixed precision) a prefix and a branch pool splitting one byte budget."""
        a = self.arch
        make = lambda kind, n: make_kv_pool(
            kind, n, a.num_layers, *a.pool_shape, self.dtype, self.device
        )
        if not self.mixed_kv:
            self.num_slots = self._capacity(cfg, weight_bytes)
            self.capacity = (self.num_slots,)
            self.pool = make(self.kv_dtypes[0], self.num_slots)
            self.allocator = SlotAllocator(self.num_slots, self.device)
            return
        budget = self._byte_budget(cfg, weight_bytes)
        shares = (1 - cfg.kv_branch_fraction, cfg.kv_branch_fraction)
        sizes = [
            int(min(budget * f // self._token_bytes(kind), 1 << 22))
            for f, kind in zip(shares, self.kv_dtypes)
        ]
        if min(sizes) < 16:
            raise ValueError(f"the KV budget leaves {sizes} tokens for the prefix and branch pools")
        self.capacity, self.num_slots = tuple(sizes), sum(sizes)
        self.pool = MixedKVPool(
            make(self.kv_dtypes[0], sizes[0]), make(self.kv_dtypes[1], sizes[1]), sizes[0]
        )
        self.allocator = TieredSlotAllocator(sizes[0], sizes[1], self.device)

    def _decode_graphs(self, cfg: ModelConfig, max_running_requests: int) -> DecodeGraphs | None:
        """CUDA graphs for decode steps (runtime/cuda_graph.py), where they apply: on CUDA, with
        an attention backend whose decode has no host sync (the kernel backend, or an MLA
        model's latent decode kernel) and a pool whose store has none."""
        if (
            cfg.disable_cuda_graph
            or self.device.type != "cuda"
            or not self._decode_capturable()
            or getattr(self.pool, "pad_slot", None) is None
        ):
            return None
        return DecodeGraphs(
            self.model,
            self.pool,
            self.attn,
            self.table,
            self.device,
            min(cfg.cuda_graph_max_bs, max_running_requests),
            lora_pool=self.lora.pool if self.lora else None,
        )

    def _decode_capturable(self) -> bool:
        """Whether this runner's decode attention can be captured in a CUDA graph."""
        if isinstance(self.attn, LatentAttention):
            latent = LatentPool(self.pool, *self.arch.pool_shape)
            return self.attn.decodes_in_place(latent, self.device)
        return isinstance(self.attn, KernelAttention)

    def standby_graphs(self, model) -> DecodeGraphs:
        """Decode graphs for another weight version's `model` over the same KV pool and table,
        with their own input buffers, graph pool and attention backend (so they can be captured
        on another thread while this runner's graphs replay)."""
        a, cfg = self.arch, self.model_cfg
        attn = make_attention(cfg.attention_backend, a, self.device, cfg.mla_expand_threshold)
        return DecodeGraphs(
            model,
            self.pool,
            attn,
            self.table,
            self.device,
            min(cfg.cuda_graph_max_bs, self.max_running_requests),
            lora_pool=self.lora.pool if self.lora else None,
        )

    def move_kv(self, src: torch.Tensor, dst: torch.Tensor) -> None:
        """Copy every layer's KV of prefix-pool slots `src` to branch-pool slots `dst` (the
        branch window's demotion: dequantize, quantize again)."""
        self.steps.move_kv(src, dst)
        for layer in range(self.arch.num_layers):
            self.pool.demote(layer, src, dst)

    def kv_summary(self) -> str:
        model_dtype = str(self.dtype).removeprefix("torch.")
        pools = ", ".join(
            f"{n} tokens {model_dtype if kind == 'auto' else kind}"
            for n, kind in zip(self.capacity, self.kv_dtypes)
        )
        return pools + (", q/k Hadamard-rotated" if self.kv_rotation else "")

    def kv_bytes(self) -> float:
        """Bytes the KV pools hold, all layers."""
        return sum(n * self._token_bytes(kind) for n, kind in zip(self.capacity, self.kv_dtypes))

    def _token_bytes(self, kind: str) -> float:
        a = self.arch
        return kv_bytes_per_token(kind, a.num_layers, *a.pool_shape, self.dtype)

    def _byte_budget(self, cfg: CacheConfig, weight_bytes: int) -> float:
        """KV bytes: --max-total-tokens tokens at the model dtype, else what memory allows."""
        if cfg.max_total_tokens is not None:
            if cfg.max_total_tokens < 1:
                raise ValueError("max_total_tokens must be >= 1")
            return cfg.max_total_tokens * self._token_bytes("auto")
        budget = _device_memory(self.device) * cfg.mem_fraction_static - weight_bytes
        if budget < self._token_bytes("auto") * 256:
            raise ValueError(
                f"--mem-fraction-static {cfg.mem_fraction_static} leaves no room for the KV pool"
            )
        if self.device.type == "cpu":  # a fixed size, not whatever RAM happens to be free
            budget = min(
                budget, CPU_CONTEXTS_PER_POOL * self.max_context_len * self._token_bytes("auto")
            )
        return self.model.parallel.agree_min(budget)  # tp: every rank has the same slots

    def _capacity(self, cfg: CacheConfig, weight_bytes: int) -> int:
        """Slots of a single pool: --max-total-tokens, else what memory allows."""
        if cfg.max_total_tokens is not None:
            self._byte_budget(cfg, weight_bytes)  # validates
            return cfg.max_total_tokens
        budget = self._byte_budget(cfg, weight_bytes)
        return int(min(budget // self._token_bytes(self.kv_dtypes[0]), 1 << 22))

    def forward_mixed(
        self,
        ext_reqs: list[Request],
        extend_lens: list[int],
        ext_slots: list[torch.Tensor],
        dec_reqs: list[Request],
        dec_slots: torch.Tensor | None,
        extra_rows: list[tuple[int, int]] | None = None,
        trees: Sequence[TreeInput] = (),
    ) -> torch.Tensor:
        """Prefill chunks of ext_reqs, the token trees of speculative verification and one
        decode token of dec_reqs in one forward; logits [len(ext_reqs) + len(dec_reqs) + extra
        + tree rows, vocab]: the last position of each prefill chunk, then the decode rows, then
        for each ext_req i the `extra_rows[i] = (offset, count)` chunk positions offset ..
        offset + count - 1 (prompt-token logprobs), then each tree's rows with logits (all of a
        speculative tree's), tree by tree."""
        if dec_reqs:
            dec_pos, dec_ids = (
                [req.kv_len for req in dec_reqs],
                [req.all_ids[-1] for req in dec_reqs],
            )
            dec_rows = [req.row for req in dec_reqs]
            self.table.write_positions(dec_rows, dec_pos, dec_slots)  # one indexed write
            if (
                self.graphs is not None
                and not ext_reqs
                and not trees
                and len(dec_reqs) <= self.graphs.max_bs
            ):  # a pure decode step: replayed
                lora_slots = self.lora.request_slots(dec_reqs) if self.lora else None
                self.steps.decode_graph(dec_rows, dec_ids, dec_pos, dec_slots, self.table)
                return self.graphs.run(dec_rows, dec_ids, dec_pos, dec_slots, lora_slots)
        ids, positions, seq_lens, out_slots = [], [], [], list(ext_slots)
        for req, ext, slots in zip(ext_reqs, extend_lens, ext_slots):
            self.table.write(req.row, req.kv_len, slots)
            ids.extend(req.all_ids[req.kv_len : req.kv_len + ext])
            positions.append(torch.arange(req.kv_len, req.kv_len + ext))
            seq_lens.append(req.kv_len + ext)
        for tree in trees:  # extends whose new tokens attend by the tree mask
            self.table.write(tree.req.row, tree.req.kv_len, tree.slots)
            ids.extend(tree.token_ids.tolist())
            positions.append(tree.positions)
            seq_lens.append(tree.req.kv_len + len(tree.slots))
            out_slots.append(tree.slots)
        if dec_reqs:
            ids.extend(dec_ids)
            positions.append(torch.tensor(dec_pos))
            seq_lens.extend(p + 1 for p in dec_pos)
            out_slots.append(dec_slots)
        ext_lens = list(extend_lens) + [len(t.slots) for t in trees]
        t_ext = sum(ext_lens)
        starts = [0, *torch.tensor(ext_lens, dtype=torch.int64).cumsum(0).tolist()]
        rows = torch.cat(
            [
                torch.tensor(starts[1 : len(ext_reqs) + 1], dtype=torch.int64) - 1,
                torch.arange(t_ext, t_ext + len(dec_reqs)),
                *[
                    torch.arange(start + off, start + off + count)
                    for start, (off, count) in zip(starts, extra_rows or [])
                ],
                *[start + t.rows_with_logits() for start, t in zip(starts[len(ext_reqs) :], trees)],
            ]
        )
        reqs = ext_reqs + [t.req for t in trees] + dec_reqs
        tree_masks = [None] * len(ext_reqs) + [t.mask for t in trees] if trees else None
        mode = (
            ForwardMode.MIXED
            if ext_lens and dec_reqs
            else ForwardMode.EXTEND
            if ext_lens
            else ForwardMode.DECODE
        )
        return self._run(
            mode,
            reqs,
            ids,
            torch.cat(positions),
            torch.cat(out_slots),
            seq_lens,
            ext_lens + [1] * len(dec_reqs),
            rows,
            len(dec_reqs),
            tree_masks,
        )

    def _run(
        self,
        mode,
        reqs,
        ids,
        positions,
        out_slots,
        seq_lens,
        extend_lens,
        logits_rows,
        num_decode,
        tree_masks=None,
    ):
        rows = torch.tensor([r.row for r in reqs], device=self.device)
        batch = ForwardBatch(
            mode=mode,
            input_ids=torch.tensor(ids, device=self.device),
            positions=positions.to(self.device),
            out_slots=out_slots.to(self.device),
            kv_slots=self.table.table[rows, : max(seq_lens)],
            seq_lens=seq_lens,
            extend_lens=extend_lens,
            logits_indices=logits_rows.to(self.device),
            num_decode=num_decode if mode is ForwardMode.MIXED else 0,
            tree_masks=tree_masks,
            lora=self.lora.batch(reqs, extend_lens, mode is ForwardMode.DECODE)
            if self.lora
            else None,
        )
        self.steps.forward(batch)
        return self.model.forward(batch, self.pool, self.attn)


def resolve_kv_dtypes(cfg: CacheConfig) -> tuple[str, str]:
    """(prefix, branch) KV precisions. --kv-cache-dtype sets both ('auto': the model dtype, on a
    GPU too, where FP8 and FP8 prefix + NVFP4 branch pools were measured slower than bf16: they
    trade speed for 2-3x the tokens, docs/BENCHMARKS.md); the two specific flags override."""
    prefix = cfg.kv_cache_dtype if cfg.kv_prefix_dtype is None else cfg.kv_prefix_dtype
    branch = cfg.kv_cache_dtype if cfg.kv_branch_dtype is None else cfg.kv_branch_dtype
    return prefix, branch


def resolve_kv_rotation(cfg: CacheConfig, kv_dtypes: tuple[str, str]) -> bool:
    """--kv-rotation: 'auto' rotates q and k when either pool quantizes (fp8_e4m3, nvfp4)."""
    if cfg.kv_rotation not in ("auto", "on", "off"):
        raise ValueError(f"kv_rotation must be auto, on or off, got {cfg.kv_rotation!r}")
    if cfg.kv_rotation == "auto":
        return any(kind in ("fp8_e4m3", "nvfp4") for kind in kv_dtypes)
    return cfg.kv_rotation == "on"


def context_len(arch: ModelArch, requested: int | None) -> int:
    """Max tokens per sequence: the model's positions, capped by its sliding window (attention
    here is always full, which equals sliding-window attention only while the whole context
    fits in the window) and by --context-length; a longer --context-length is refused."""
    limit = arch.max_position_embeddings
    if arch.sliding_window is not None and arch.sliding_window < limit:
        logger.warning("context capped at the sliding window: %d tokens", arch.sliding_window)
        limit = arch.sliding_window
    if requested is None:
        return limit
    if requested > limit:
        raise ValueError(
            f"--context-length {requested} exceeds this model's context of {limit} tokens"
        )
    return requested


def _device_memory(device: torch.device) -> int:
    """Free memory on a GPU; total RAM on the CPU (free RAM changes from run to run, and the
    pool would change with it)."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return free
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
