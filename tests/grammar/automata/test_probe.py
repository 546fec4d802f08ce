"""The automaton probe: byte automata built in a helper process, so a regex whose automaton
explodes (outlines-core spends minutes, then aborts the process) is a GrammarError, and the
probe recovers for the next regex."""

import re
import time

import pytest

from radixgen.core import Constraint
from radixgen.grammar.automata import probe as automaton_probe
from radixgen.grammar.automata.probe import AutomatonProbe
from radixgen.grammar.matcher import GrammarError

EXPLODING = "(?:a|b)*a(?:a|b){40}"  # 2^40 states: the DFA remembers the last 41 letters


def _fullmatch(automaton: tuple, data: bytes) -> bool:
    state, finals, moves = automaton
    for byte in data:
        state = moves.get(state, {}).get(byte)
        if state is None:
            return False
    return state in finals


def test_automaton_accepts_what_the_regex_matches():
    probe = AutomatonProbe()
    try:
        automaton = probe.automaton('"[a-z]{2}(?:x|yz)?"')
        for text in ('"ab"', '"abx"', '"abyz"', '"a"', '"abz"', '"aby"', '"ab'):
            assert _fullmatch(automaton, text.encode()) == bool(
                re.fullmatch('"[a-z]{2}(?:x|yz)?"', text)
            )
        with pytest.raises(GrammarError, match="cannot compile regex"):
            probe.automaton("(")
        assert (
            probe.weighted_moves("ab", (), [1] * 256) == 2
        )  # one allowed byte per state before the end
    finally:
        probe.close()


@pytest.mark.parametrize("limit", ["seconds", "memory"])
def test_an_exploding_automaton_is_refused_and_the_probe_recovers(limit):
    probe = (
        AutomatonProbe(seconds=2)
        if limit == "seconds"
        else AutomatonProbe(memory=400 << 20, seconds=60)
    )
    try:
        start = time.perf_counter()
        with pytest.raises(GrammarError, match="too large to compile.*exponentially many states"):
            probe.automaton(EXPLODING)
        assert time.perf_counter() - start < 30
        assert _fullmatch(probe.automaton("ab+"), b"abbb")  # a fresh child took over
    finally:
        probe.close()


def test_compiling_an_exploding_regex_is_a_grammar_error(smol_compiler, monkeypatch):
    """Before the probe, this aborted the server process (a failed allocation in outlines-core)
    after minutes of CPU."""
    monkeypatch.setattr(automaton_probe, "_default", AutomatonProbe(seconds=3))
    try:
        for check in (smol_compiler.validate, smol_compiler.compile):
            with pytest.raises(GrammarError, match="too large to compile"):
                check(Constraint("regex", EXPLODING))
        smol_compiler.compile(Constraint("regex", "(?:a|b)*a(?:a|b){3}"))  # small enough
    finally:
        automaton_probe._default.close()
