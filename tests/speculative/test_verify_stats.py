"""Losslessness of tree verification: emitted tokens follow the target distribution.

Toy model: vocabulary of 8, p(. | last token) = softmax(W_target[last]), drafts from
q(. | last) = softmax(W_draft[last]). Many seeded steps; Pearson chi-square of the first and the
second emitted token against their exact distributions (critical value for 7 degrees of freedom
at alpha = 0.001). Fixed seeds, so the test is deterministic; a biased acceptor must fail it.
"""

import pytest
import torch

from radixgen.speculative import (
    DraftModelDrafter,
    TokenTree,
    VerifyResult,
    prune_tree,
    verify_sampling,
)
from tests.speculative.toy_matcher import DfaMatcher

VOCAB, ROOT, RUNS = 8, 2, 600
CHI2_CRITICAL_DF7 = 24.32  # P(chi2_7 > 24.32) = 0.001
W_TARGET = torch.randn(VOCAB, VOCAB, generator=torch.Generator().manual_seed(1)) * 1.5
W_DRAFT = torch.randn(VOCAB, VOCAB, generator=torch.Generator().manual_seed(2)) * 1.5
FORBIDDEN = [1, 5]  # the toy grammar's forbidden tokens (any state)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Thousands of tiny CPU ops: a thread pool only adds contention on a shared machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _target(last: torch.Tensor, masked: bool) -> torch.Tensor:
    logits = W_TARGET[last]
    if masked:
        logits = logits.clone()
        logits[..., FORBIDDEN] = float("-inf")
    return torch.softmax(logits, -1)


def _expected(masked: bool) -> tuple[torch.Tensor, torch.Tensor]:
    first = _target(torch.tensor(ROOT), masked)  # [V]
    second = first @ _target(torch.arange(VOCAB), masked)  # sum_y p(y) p(. | y)
    return first, second


def _chi2(samples: list[int], expected: torch.Tensor) -> float:
    counts = torch.bincount(torch.tensor(samples), minlength=VOCAB).double()
    exp = expected.double() * len(samples)
    live = exp > 0
    assert counts[~live].sum() == 0, "emitted a token of probability 0"
    return float(((counts[live] - exp[live]) ** 2 / exp[live]).sum())


def _anything_but_forbidden() -> DfaMatcher:
    allowed = {t: 0 for t in range(1, VOCAB) if t not in FORBIDDEN}
    return DfaMatcher({0: allowed}, accepting={0})  # EOS (0) allowed in state 0


def _emit_two(drafter, verify, gen: torch.Generator, masked: bool) -> tuple[int, int]:
    out, root = [], ROOT
    while len(out) < 2:
        tree = drafter.propose([root], max_tokens=6, max_depth=3)
        if masked:
            tree = prune_tree(tree, _anything_but_forbidden(), max_forced=0).tree
        probs = _target(tree.verify_input_ids(root), masked)  # [N + 1, V]
        out += verify(tree, probs, gen).token_ids
        root = out[-1]
    return out[0], out[1]


def _run(verify, temperature: float, masked: bool = False, runs: int = RUNS) -> tuple[float, float]:
    gen = torch.Generator().manual_seed(1234)
    draft = DraftModelDrafter(
        lambda ctxs: W_DRAFT[[c[-1] for c in ctxs]],
        branch=2,
        width=2,
        temperature=temperature,
        generator=gen,
    )
    pairs = [_emit_two(draft, verify, gen, masked) for _ in range(runs)]
    first, second = _expected(masked)
    return _chi2([a for a, _ in pairs], first), _chi2([b for _, b in pairs], second)


def _lossless(tree: TokenTree, probs: torch.Tensor, gen: torch.Generator) -> VerifyResult:
    return verify_sampling(tree, probs, generator=gen)


def _always_accept(tree: TokenTree, probs: torch.Tensor, gen: torch.Generator) -> VerifyResult:
    """Biased on purpose: follows the first child to a leaf, then samples the target."""
    path, node = [], -1
    while tree.children(node):
        node = tree.children(node)[0]
        path.append(node)
    bonus = int(torch.multinomial(probs[node + 1], 1, generator=gen))
    return VerifyResult([tree.id_list[i] for i in path] + [bonus], path, [])


def test_sampled_draft_tree_is_lossless():
    chi_first, chi_second = _run(_lossless, temperature=1.0)
    assert chi_first < CHI2_CRITICAL_DF7 and chi_second < CHI2_CRITICAL_DF7


def test_deterministic_draft_tree_is_lossless():
    chi_first, chi_second = _run(_lossless, temperature=0.0)
    assert chi_first < CHI2_CRITICAL_DF7 and chi_second < CHI2_CRITICAL_DF7


def test_grammar_pruned_sampled_tree_is_lossless_wrt_the_masked_target():
    chi_first, chi_second = _run(_lossless, temperature=1.0, masked=True)
    assert chi_first < CHI2_CRITICAL_DF7 and chi_second < CHI2_CRITICAL_DF7


def test_biased_acceptor_fails_the_same_test():
    chi_first, chi_second = _run(_always_accept, temperature=1.0, runs=RUNS // 4)
    assert chi_first > CHI2_CRITICAL_DF7 and chi_second > CHI2_CRITICAL_DF7
