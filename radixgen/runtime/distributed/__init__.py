"""Tensor and expert parallelism on torch.distributed (gloo on the CPU, nccl on CUDA).

One scheduler process per tp rank. Rank 0 alone schedules (requests, radix cache, grammar,
speculation, sampling) and, before every forward it runs, broadcasts one small typed step
message (`step.py`: the forward batch's token ids, positions, KV slots, lengths, tree masks);
ranks 1 .. tp-1 run a follower loop (`follower.py`) that receives it and runs the same forward
on their shard of the weights and of the KV pools. Broadcasting is chosen over every rank
scheduling deterministically: the scheduler's choices depend on request arrival times, on when
a grammar finishes compiling on its thread and on clocks (aging, timeouts), none of which is
the same on two processes, and one diverging choice would deadlock the collectives.

Modules: `group.py` (ranks, the process group, the collectives the model calls),
`sharding.py` (the rank-local architecture and the load-time slicing of HF weights),
`step.py` (the step message and its broadcast), `follower.py` (the follower loop and the rank
processes' entry point)."""
