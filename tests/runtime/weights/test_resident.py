"""The pinned-host switch's tensor exchange (run here on CPU tensors): two models of one
architecture pair up tensor by tensor, and an exchange swaps their weights in place, keeping
each model's tensor objects (what keeps CUDA graphs valid on a GPU)."""

from __future__ import annotations

import torch

from radixgen.runtime.model.arch import ModelArch
from radixgen.runtime.model.layers import host_staging, prepare_weight
from radixgen.runtime.model.registry import build_model
from radixgen.runtime.weights.checks import canary_logits
from radixgen.runtime.weights.resident import exchange, model_tensors
from tests.runtime.checkpoints import tiny_weights

PROBES = ((1, 2, 3, 4), (5, 6))


def plain_model(tiny_model_path, seed: int):
    with host_staging():  # plain tensors (no oneDNN packing), as a pinned-host standby holds
        return build_model(
            ModelArch.from_folder(tiny_model_path),
            tiny_weights(tiny_model_path, seed),
            torch.device("cpu"),
        )


def test_exchange_swaps_weights_in_place(tiny_model_path):
    arch = ModelArch.from_folder(tiny_model_path)
    serving, staged = plain_model(tiny_model_path, 0), plain_model(tiny_model_path, 7)
    cpu = torch.device("cpu")
    logits_serving, logits_staged = (canary_logits(m, arch, cpu, PROBES) for m in (serving, staged))
    assert not torch.allclose(logits_serving, logits_staged)
    assert not any(t.is_mkldnn for t in model_tensors(staged))
    ids = [id(t) for t in model_tensors(serving)]
    assert len(ids) == len(list(model_tensors(staged))) > 2 * arch.num_layers
    exchange(serving, staged)
    assert [id(t) for t in model_tensors(serving)] == ids
    assert torch.equal(canary_logits(serving, arch, cpu, PROBES), logits_staged)
    assert torch.equal(canary_logits(staged, arch, cpu, PROBES), logits_serving)


def test_host_staging_leaves_weights_plain_only_inside_it():
    weight = torch.randn(16, 16)
    with host_staging():
        assert not prepare_weight(weight).is_mkldnn
    if torch.backends.mkldnn.is_available():
        assert prepare_weight(weight).is_mkldnn
