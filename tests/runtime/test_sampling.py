import torch

from radixgen.core import SamplingParams
from radixgen.runtime.request import Request
from radixgen.runtime.sampling import draw, filter_probs, sample


def _req(seed=0, output=(), **params):
    req = Request(
        "r", [5, 6, 7], SamplingParams(**params), generator=torch.Generator().manual_seed(seed)
    )
    req.output_ids = list(output)
    return req


def test_greedy_is_argmax_and_logprobs_are_log_softmax():
    logits = torch.randn(3, 50)
    reqs = [_req(temperature=0, top_logprobs_num=3, return_logprob=True) for _ in range(3)]
    res = sample(logits.clone(), reqs)
    assert res.token_ids == logits.argmax(-1).tolist()
    ref = torch.log_softmax(logits, -1)
    for i, token in enumerate(res.token_ids):
        assert abs(res.logprobs[i] - ref[i, token].item()) < 1e-5
        assert [t for t, _ in res.top_logprobs[i]] == ref[i].topk(3).indices.tolist()


def test_filters_keep_the_right_tokens():
    probs = torch.tensor([0.5, 0.3, 0.15, 0.05])
    assert (filter_probs(probs, 2, 1.0, 0.0) > 0).tolist() == [True, True, False, False]
    assert (filter_probs(probs, -1, 0.7, 0.0) > 0).tolist() == [True, True, False, False]
    assert (filter_probs(probs, -1, 0.5, 0.0) > 0).tolist() == [True, False, False, False]
    assert (filter_probs(probs, -1, 1.0, 0.25) > 0).tolist() == [True, True, True, False]
    assert abs(filter_probs(probs, 2, 1.0, 0.0).sum().item() - 1) < 1e-6


def test_seeded_sampling_is_reproducible_and_follows_distribution():
    logits = torch.log(torch.tensor([[0.6, 0.3, 0.1]]))
    a = [sample(logits.clone(), [_req(seed=7, temperature=1.0)]).token_ids[0] for _ in range(1)]
    b = [sample(logits.clone(), [_req(seed=7, temperature=1.0)]).token_ids[0] for _ in range(1)]
    assert a == b
    req = _req(seed=1, temperature=1.0)
    counts = torch.bincount(
        torch.tensor([sample(logits.clone(), [req]).token_ids[0] for _ in range(3000)]), minlength=3
    )
    assert torch.allclose(counts.float() / 3000, torch.tensor([0.6, 0.3, 0.1]), atol=0.04)


def test_draw_inverts_the_cdf_and_never_picks_a_zero():
    """draw: frequencies follow the (unnormalised) weights, zero weights are never drawn,
    the first and last indices are reachable, and a seed repeats the stream."""
    weights = torch.tensor([0.0, 2.0, 0.0, 1.0, 1.0, 0.0])
    gen = torch.Generator().manual_seed(3)
    counts = torch.bincount(torch.tensor([draw(weights, gen) for _ in range(8000)]), minlength=6)
    assert counts[[0, 2, 5]].sum() == 0
    assert torch.allclose(counts.float() / 8000, weights / 4, atol=0.02)
    ends = torch.tensor([1.0, 0.0, 0.0, 1.0])
    assert {draw(ends, gen) for _ in range(200)} == {0, 3}
    seq = lambda: [draw(weights, torch.Generator().manual_seed(11)) for _ in range(5)]  # noqa: E731
    assert seq() == seq()


def test_penalties_change_logits_as_specified():
    logits = torch.tensor([[2.0, -1.0, 0.5, 0.0]])
    req = _req(output=[0, 0, 2], temperature=0, frequency_penalty=0.5, presence_penalty=0.25)
    from radixgen.runtime.sampling import _apply_penalties

    out = logits.clone()
    _apply_penalties(out, [req])
    assert torch.allclose(out, torch.tensor([[2.0 - 1.0 - 0.25, -1.0, 0.5 - 0.5 - 0.25, 0.0]]))
    rep = _req(temperature=0, repetition_penalty=2.0)  # prompt ids 5, 6, 7 are "seen"
    big = torch.ones(1, 10)
    big[0, 6] = -1.0
    _apply_penalties(big, [rep])
    assert big[0, 5].item() == 0.5 and big[0, 6].item() == -2.0 and big[0, 0].item() == 1.0


def test_engine_applies_every_sampling_option_end_to_end(tiny_model_path):
    from radixgen.runtime.engine import Engine

    engine = Engine(str(tiny_model_path), load_format="dummy", max_total_tokens=512)
    params = {
        "max_new_tokens": 6,
        "temperature": 0.8,
        "top_p": 0.9,
        "top_k": 40,
        "min_p": 0.01,
        "seed": 5,
        "repetition_penalty": 1.2,
        "frequency_penalty": 0.4,
        "presence_penalty": 0.3,
        "ignore_eos": True,
        "top_logprobs_num": 2,
    }
    first = engine.generate(input_ids=[11, 12, 13], sampling_params=params)
    again = engine.generate(input_ids=[11, 12, 13], sampling_params=params)
    assert len(first["output_ids"]) == 6 and first["output_ids"] == again["output_ids"]
    assert len(first["meta_info"]["output_top_logprobs"]) == 6
    greedy = {
        "max_new_tokens": 6,
        "temperature": 0,
        "ignore_eos": True,
        "repetition_penalty": 1.5,
        "frequency_penalty": 1.0,
    }
    penalised = [
        engine.generate(input_ids=[11, 12, 13], sampling_params=greedy)["output_ids"]
        for _ in range(2)
    ]
    assert len(penalised[0]) == 6 and penalised[0] == penalised[1]


def test_batched_filters_equal_row_by_row():
    """filter_probs over a batch with per-row parameters equals filtering each row alone."""
    gen = torch.Generator().manual_seed(5)
    probs = torch.softmax(torch.randn(6, 300, generator=gen) * 3, -1)
    params = [
        (0, 1.0, 0.0),
        (5, 1.0, 0.0),
        (0, 0.8, 0.0),
        (0, 1.0, 0.1),
        (20, 0.9, 0.05),
        (1, 0.5, 0.5),
    ]
    got = filter_probs(probs, *[list(c) for c in zip(*params)])
    for row, (k, p, m) in zip(range(6), params):
        want = filter_probs(probs[row], k, p, m)
        assert torch.allclose(got[row], want, atol=1e-7)
        assert 1 <= int((want > 0).sum()) <= (k if k > 0 else 300)


def test_batched_sampling_draws_each_row_with_its_generator():
    """A batch of sampled requests draws what each request draws alone, from its own seed."""
    logits = torch.randn(4, 200, generator=torch.Generator().manual_seed(2))
    specs = [
        dict(temperature=0.7, top_k=20),
        dict(temperature=1.3),
        dict(temperature=0),
        dict(temperature=1.0, top_p=0.9, min_p=0.02),
    ]
    together = sample(logits.clone(), [_req(seed=i, **s) for i, s in enumerate(specs)]).token_ids
    alone = [
        sample(logits[i : i + 1].clone(), [_req(seed=i, **s)]).token_ids[0]
        for i, s in enumerate(specs)
    ]
    assert together == alone and together[2] == int(logits[2].argmax())


def test_filters_take_one_value_for_every_row():
    probs = torch.softmax(torch.randn(3, 40, generator=torch.Generator().manual_seed(1)), -1)
    got = filter_probs(probs, 4, 0.9, 0.0)
    assert all(torch.equal(got[i], filter_probs(probs[i], 4, 0.9, 0.0)) for i in range(3))
    assert ((got > 0).sum(-1) <= 4).all()
