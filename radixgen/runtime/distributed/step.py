"""The step message: what rank 0 tells the other ranks before each forward it runs.

A message is two broadcasts from rank 0 of int64 tensors on the rank's device: a fixed header
(the kind and the sizes) and one flat payload (the fields back to back), so a step costs two
small collectives, no pickling and no Python objects on the wire. Kinds:
- FORWARD: a ForwardBatch (token ids, positions, the KV slots written and read, lengths, the
  rows that need logits, speculative tree masks); followers run the same model forward.
- DECODE_GRAPH: a decode step replayed from a CUDA graph: token ids, positions, slots, the
  request-table rows and those rows' KV slots (followers copy them into their own table, then
  replay their own graph, whose all-reduces were captured inside it).
- MOVE_KV: prefix-pool slots demoted to branch-pool slots (the mixed pool's branch window).
- HEARTBEAT: nothing to run (rank 0 is idle; the followers' wait restarts its timeout).
- STOP: rank 0 is shutting down; followers exit.
Grammar masks, sampling and drafting stay on rank 0: they act on the gathered logits only."""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist

from radixgen.runtime.forward_batch import ForwardBatch, ForwardMode

_MODES = list(ForwardMode)
HEARTBEAT_S = 5.0  # an idle rank 0 tells the followers it is alive this often
HEADER_LEN = 8  # kind, mode, num_tokens, batch, max_seq, num_logits, num_decode, mask values


class StepKind(enum.IntEnum):
    FORWARD = 1
    DECODE_GRAPH = 2
    MOVE_KV = 3
    HEARTBEAT = 4
    STOP = 5


@dataclass
class StepMessage:
    """One decoded message; the tensors are int64 views of the payload on the rank's device."""

    kind: StepKind
    batch: ForwardBatch | None = None
    rows: list[int] | None = None  # DECODE_GRAPH: the request-table rows
    move: tuple[torch.Tensor, torch.Tensor] | None = None  # MOVE_KV: (from slots, to slots)


def _i64(values, device: torch.device) -> torch.Tensor:
    return torch.as_tensor(values, dtype=torch.int64).to(device).reshape(-1)


def encode_batch(batch: ForwardBatch, device: torch.device) -> tuple[list[int], torch.Tensor]:
    """(header, payload) of a FORWARD message."""
    masks = batch.tree_masks or []
    mask_lens = [-1 if m is None else m.shape[0] for m in masks]
    mask_bits = [m.reshape(-1).to(torch.int64) for m in masks if m is not None]
    parts = [
        batch.input_ids,
        batch.positions,
        batch.out_slots,
        torch.tensor(batch.seq_lens),
        torch.tensor(batch.extend_lens),
        batch.logits_indices,
        batch.kv_slots,
        torch.tensor(mask_lens, dtype=torch.int64),
        *mask_bits,
    ]
    payload = torch.cat([_i64(p, device) for p in parts])
    header = [
        StepKind.FORWARD,
        _MODES.index(batch.mode),
        batch.input_ids.numel(),
        len(batch.seq_lens),
        batch.kv_slots.shape[1],
        batch.logits_indices.numel(),
        batch.num_decode,
        len(mask_lens),
    ]
    return header, payload


def decode_batch(header: list[int], payload: torch.Tensor) -> ForwardBatch:
    _, mode, num_tokens, bs, max_seq, num_logits, num_decode, num_masks = header
    sizes = [num_tokens] * 3 + [bs, bs, num_logits, bs * max_seq, num_masks]
    parts = list(payload[: sum(sizes)].split(sizes))
    seq_lens, extend_lens, mask_lens = (parts[i].tolist() for i in (3, 4, 7))
    tree_masks, offset = None, sum(sizes)
    if num_masks:
        tree_masks = []
        for n in mask_lens:
            if n < 0:
                tree_masks.append(None)
                continue
            tree_masks.append(payload[offset : offset + n * n].view(n, n).bool())
            offset += n * n
    return ForwardBatch(
        mode=_MODES[mode],
        input_ids=parts[0],
        positions=parts[1],
        out_slots=parts[2],
        kv_slots=parts[6].view(bs, max_seq),
        seq_lens=seq_lens,
        extend_lens=extend_lens,
        logits_indices=parts[5],
        num_decode=num_decode,
        tree_masks=tree_masks,
    )


class StepChannel:
    """The broadcast itself: rank 0 `send`s, the others `receive`."""

    def __init__(self, device: torch.device):
        self.device = device
        self.last_send = time.monotonic()

    def send(self, header: list[int], payload: torch.Tensor | None = None) -> None:
        self.last_send = time.monotonic()
        size = 0 if payload is None else payload.numel()
        head = _i64([*header, *[0] * (HEADER_LEN - len(header)), size], self.device)
        dist.broadcast(head, src=0)
        if size:
            dist.broadcast(payload.contiguous(), src=0)

    def receive(self) -> tuple[list[int], torch.Tensor | None]:
        head = torch.empty(HEADER_LEN + 1, dtype=torch.int64, device=self.device)
        dist.broadcast(head, src=0)
        values = head.tolist()
        header, size = values[:HEADER_LEN], values[HEADER_LEN]
        if not size:
            return header, None
        payload = torch.empty(size, dtype=torch.int64, device=self.device)
        dist.broadcast(payload, src=0)
        return header, payload


class NoSteps:
    """One rank: nothing to tell anyone (ModelRunner's default)."""

    def forward(self, batch: ForwardBatch) -> None:
        pass

    def decode_graph(self, rows, ids, positions, out_slots, table) -> None:
        pass

    def move_kv(self, src: torch.Tensor, dst: torch.Tensor) -> None:
        pass

    def heartbeat(self) -> None:
        pass

    def stop(self) -> None:
        pass


NO_STEPS = NoSteps()


class StepBroadcaster(NoSteps):
    """Rank 0's side: each call sends one message, before rank 0 runs the same work."""

    def __init__(self, device: torch.device):
        self.channel = StepChannel(device)
        self.device = device

    def forward(self, batch: ForwardBatch) -> None:
        self.channel.send(*encode_batch(batch, self.device))

    def decode_graph(self, rows, ids, positions, out_slots, table) -> None:
        width = max(positions) + 1
        kv = table.table[torch.tensor(rows, device=table.table.device), :width]
        payload = torch.cat([_i64(p, self.device) for p in (ids, positions, out_slots, rows, kv)])
        self.channel.send([StepKind.DECODE_GRAPH, 0, 0, len(rows), width], payload)

    def move_kv(self, src: torch.Tensor, dst: torch.Tensor) -> None:
        payload = torch.cat([_i64(src, self.device), _i64(dst, self.device)])
        self.channel.send([StepKind.MOVE_KV, 0, src.numel()], payload)

    def heartbeat(self) -> None:
        """While idle: a HEARTBEAT at most every HEARTBEAT_S (the followers' waits stay
        under --dist-timeout however long the server idles)."""
        if time.monotonic() - self.channel.last_send >= HEARTBEAT_S:
            self.channel.send([StepKind.HEARTBEAT])

    def stop(self) -> None:
        self.channel.send([StepKind.STOP])


def decode_message(header: list[int], payload: torch.Tensor | None) -> StepMessage:
    kind = StepKind(header[0])
    if kind is StepKind.FORWARD:
        return StepMessage(kind, batch=decode_batch(header, payload))
    if kind is StepKind.MOVE_KV:
        n = header[2]
        return StepMessage(kind, move=(payload[:n], payload[n : 2 * n]))
    if kind is StepKind.DECODE_GRAPH:
        bs, width = header[3], header[4]
        ids, pos, slots, rows, kv = payload.split([bs] * 4 + [bs * width])
        batch = ForwardBatch(
            mode=ForwardMode.DECODE,
            input_ids=ids,
            positions=pos,
            out_slots=slots,
            kv_slots=kv.view(bs, width),
            seq_lens=[p + 1 for p in pos.tolist()],
            extend_lens=[1] * bs,
            logits_indices=torch.arange(bs, device=ids.device),
        )
        return StepMessage(kind, batch=batch, rows=rows.tolist())
    return StepMessage(kind)
