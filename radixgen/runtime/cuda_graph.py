"""Decode steps replayed from CUDA graphs.

A decode step on the GPU is bound by the host: ~30 kernels per layer, each a few microseconds of
Python and launch overhead, while the device works ~15% of the step (docs/benchmarks-history.md,
"where a decode step's time goes"). `DecodeGraphs` records the whole decode forward once per (padded
batch size, context bucket) and replays it: one launch per step.

What makes the forward capturable:
- its inputs live in static buffers, refreshed before each replay with one host-to-device copy;
- the batch is padded to a captured size: padding rows read no keys (length 0) and write their
  K/V to the pool's `pad_slot` (-1, which the quantized pools' device stores skip, or a plain
  pool's spare row past its last slot);
- the attention backend builds its slot CSR from the device lengths with fixed shapes
  (`slot_csr.slot_csr_padded`): the context bucket `width` bounds the table columns read, and
  the split-KV heuristic sees `padded batch x width` keys (so each graph has one split count);
- no host sync in between (the pools' device-side stores, the kernels' launchers).

Eligible: `KernelAttention` on CUDA, or an MLA model's `LatentAttention` whose decode runs the
latent decode kernel (kernels/mla_decode.py: split-KV scratch allocated inside the graph, from
its pool, at the split count of the bucket); a pool whose store has no host sync (a plain pool,
a fused quantized pool, or a mixed pool of two fused quantized pools); and a pure decode batch
(no prefill chunk, no speculative tree: verify steps run eagerly for every model). Everything
else runs eagerly.
"""

from __future__ import annotations

import logging

import torch

from radixgen.runtime.forward_batch import ForwardBatch, ForwardMode
from radixgen.runtime.lora.batch import LoraBatch

logger = logging.getLogger(__name__)

BATCH_SIZES = (1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256)
MIN_WIDTH = 256  # smallest context bucket


def padded_batch(n: int, max_bs: int) -> int | None:
    """The captured batch size a batch of n runs at; None above max_bs."""
    return next((b for b in BATCH_SIZES if n <= b <= max_bs), None)


def context_width(max_len: int, table_width: int) -> int:
    """The context bucket of a batch whose longest sequence is max_len: MIN_WIDTH * 4^k (few
    buckets, so few graphs; the CSR build reads up to 4x the table columns it needs, ~1 us per
    100k entries), capped at the table's width."""
    width = MIN_WIDTH
    while width < max_len:
        width *= 4
    return min(width, table_width)


class DecodeGraphs:
    """Replays decode forwards of `model` from CUDA graphs (module docstring). capture=False runs
    the same static-buffer forward eagerly (used by CPU tests of the padding and CSR logic)."""

    def __init__(
        self,
        model,
        pool,
        attn,
        table,
        device: torch.device,
        max_bs: int,
        capture: bool = True,
        lora_pool=None,
    ):
        self.model, self.pool, self.attn, self.table = model, pool, attn, table
        # LoRA: each row's adapter slot (0: the base model) in a static buffer the captured
        # BGMV kernels read; the pool's weights are written in place, so graphs stay valid
        self.lora_pool = lora_pool
        self.device, self.capture = device, capture
        self.max_bs = max(b for b in BATCH_SIZES if b <= max(max_bs, 1))
        self.pad_slot = pool.pad_slot
        if self.pad_slot is None:
            raise ValueError("CUDA graphs need a KV pool whose store has no host sync")
        n = self.max_bs
        # rows of `inputs`: input ids, positions, table rows, sequence lengths
        self.inputs = torch.zeros((4, n), dtype=torch.int64, device=device)
        self.out_slots = torch.full((n,), self.pad_slot, dtype=torch.int64, device=device)
        self.lora_slots = torch.zeros((n,), dtype=torch.int32, device=device)
        # (padded batch, context bucket, with adapters) -> graph: base-only batches replay
        # graphs without the LoRA kernels
        self.graphs: dict[tuple[int, int, bool], tuple[object, torch.Tensor]] = {}
        # every graph writes its logits here: one [max_bs, vocab] buffer instead of one per graph
        # (20 batch sizes x 4 buckets of a 128k vocabulary would hold GBs of them)
        self.logits: torch.Tensor | None = None
        self.mempool = torch.cuda.graph_pool_handle() if capture else None
        self.replays = 0

    def run(
        self,
        rows: list[int],
        ids: list[int],
        positions: list[int],
        out_slots: torch.Tensor,
        lora_slots: list[int] | None = None,
    ) -> torch.Tensor:
        """Logits [len(rows), vocab] of one decode step of at most max_bs requests: token ids[i]
        of the request in table row rows[i] at positions[i], its KV written to out_slots[i], its
        LoRA adapter in pool slot lora_slots[i] (None: all on the base model). The table must
        already hold the new slots."""
        n = len(rows)
        bp = padded_batch(n, self.max_bs)
        seq_lens = [p + 1 for p in positions]
        width = context_width(max(seq_lens), self.table.max_context_len)
        pad = bp - n
        host = torch.tensor(
            [ids + [0] * pad, positions + [0] * pad, rows + [0] * pad, seq_lens + [0] * pad],
            dtype=torch.int64,
        )
        self.inputs[:, :bp].copy_(host, non_blocking=True)
        self.out_slots[:n].copy_(out_slots)
        self.out_slots[n:bp].fill_(self.pad_slot)
        with_lora = lora_slots is not None
        if with_lora:
            slots = torch.tensor(lora_slots + [0] * pad, dtype=torch.int32)
            self.lora_slots[:bp].copy_(slots, non_blocking=True)
        graph, logits = self._graph(bp, width, with_lora)
        if graph is None:
            logits = self._forward(bp, width, with_lora)
        else:
            graph.replay()
            self.replays += 1
        return logits[:n].clone()

    def prepare(self, max_len: int, batch_sizes=None) -> None:
        """Capture now the graphs of every batch size (or those given) at the context bucket of
        max_len, instead of at their first use (benchmarks call this before timing)."""
        width = context_width(max_len, self.table.max_context_len)
        for bp in batch_sizes or [b for b in BATCH_SIZES if b <= self.max_bs]:
            self._graph(bp, width, False)
            if self.lora_pool is not None:
                self._graph(bp, width, True)

    def prepare_like(self, other: "DecodeGraphs") -> None:
        """Capture now every (batch, context bucket) graph `other` has (a standby weight
        version's graphs, captured before it is switched in, so the switch captures nothing)."""
        for key in list(other.graphs):
            self._graph(*key)

    def _graph(self, bp: int, width: int, with_lora: bool) -> tuple[object, torch.Tensor]:
        """The (graph, logits) of one (padded batch, width, adapters or not), recorded at its
        first use."""
        key = (bp, width, with_lora)
        if key not in self.graphs:
            self.graphs[key] = self._record(*key)
        return self.graphs[key]

    def _forward(self, bp: int, width: int, with_lora: bool = False) -> torch.Tensor:
        ids, positions, rows, lens = self.inputs[:, :bp]
        batch = ForwardBatch(
            mode=ForwardMode.DECODE,
            input_ids=ids,
            positions=positions,
            out_slots=self.out_slots[:bp],
            kv_slots=self.table.table[rows, :width],
            seq_lens=[width] * bp,
            extend_lens=[1] * bp,
            logits_indices=torch.arange(bp, device=self.device),
            device_seq_lens=lens,
            lora=LoraBatch(self.lora_pool, self.lora_slots[:bp]) if with_lora else None,
        )
        return self.model.forward(batch, self.pool, self.attn)

    def _record(self, bp: int, width: int, with_lora: bool) -> tuple[object, torch.Tensor]:
        """The graph of one (padded batch, width) and its logits buffer; the forward runs twice
        eagerly first (Triton compiles, cuBLAS picks its kernels, the pool's buffers are made)."""
        if not self.capture:
            return None, None
        real = self.inputs[:, :bp].clone(), self.out_slots[:bp].clone()
        self.inputs[3, :bp].zero_()  # warm-up and capture read no keys and write no KV
        self.out_slots[:bp].fill_(self.pad_slot)
        stream = torch.cuda.Stream(self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            for _ in range(2):
                self._forward(bp, width, with_lora)
        torch.cuda.current_stream(self.device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        if self.logits is None:
            vocab = self.model.lm_head.shape[0]
            self.logits = torch.empty((self.max_bs, vocab), dtype=torch.float32, device=self.device)
        logits = self.logits[:bp]
        # thread_local: another thread's CUDA calls (a weight version loading, or capturing its
        # own graphs) must not invalidate this capture
        with torch.cuda.graph(graph, pool=self.mempool, capture_error_mode="thread_local"):
            logits.copy_(self._forward(bp, width, with_lora))  # its own output is pool scratch
        self.inputs[:, :bp].copy_(real[0])
        self.out_slots[:bp].copy_(real[1])
        logger.info(
            "captured a decode CUDA graph: batch %d, context %d (%d graphs)",
            bp,
            width,
            len(self.graphs) + 1,
        )
        return graph, logits

    def summary(self) -> dict:
        return {
            "cuda_graph_max_bs": self.max_bs,
            "cuda_graphs": len(self.graphs),
            "cuda_graph_replays": self.replays,
        }
