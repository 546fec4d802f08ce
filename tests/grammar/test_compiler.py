"""GrammarCompiler: dispatch, cache, async submit, errors; regex/choices on the SmolLM2 tokenizer."""

import re
import time

import pytest

from radixgen.core import Constraint
from radixgen.grammar.compiler import GrammarCompiler, choices_regex
from radixgen.grammar.matcher import GrammarError
from tests.grammar.walks import info_text, random_walk

REGEXES = [
    r"[a-z]{3,8}@[a-z]+\.(com|org)",
    r"^\d{3}-\d{4}$",
    r"(yes|no)!?",
    r"[A-Z][a-z]* [0-9]{2}",
    r"-?\d+(\.\d+)?",
]


def test_cache_hit_is_fast(small_compiler):
    constraint = Constraint("regex", r"\d{3}-\d{4}")
    first = small_compiler.compile(constraint)
    compiled = small_compiler.num_compiled
    start = time.perf_counter()
    again = small_compiler.compile(constraint)
    assert time.perf_counter() - start < 1e-3
    assert again is first
    assert small_compiler.num_compiled == compiled >= 1  # a hit is not a new compile
    assert small_compiler.cached(constraint)


def test_submit_is_async_and_cached(small_compiler):
    constraint = Constraint("regex", r"[ab]{2,5}c")
    future = small_compiler.submit(constraint)
    grammar = future.result(timeout=60)
    assert small_compiler.submit(constraint).done()
    assert small_compiler.submit(constraint).result() is grammar


def test_submit_reports_errors_through_the_future(small_compiler):
    future = small_compiler.submit(
        Constraint("json_schema", {"type": "integer", "multipleOf": 0.7})
    )
    with pytest.raises(GrammarError, match="multipleOf"):
        future.result(timeout=60)


def test_running_out_of_memory_is_the_constraints_error(small_compiler, monkeypatch):
    """A constraint whose checking runs out of memory past every size budget is refused like
    any constraint too large (a 400 at the HTTP edge), on validation and on compile alike."""

    def out_of_memory(constraint):
        raise MemoryError

    constraint = Constraint(
        "regex", "out-of-memory-[a-c]{2}"
    )  # (its error stays cached: a pattern no other test uses)
    monkeypatch.setattr(small_compiler, "_validate_now", out_of_memory)
    monkeypatch.setattr(small_compiler, "_compile_now", out_of_memory)
    with pytest.raises(GrammarError, match="too large"):
        small_compiler.validate(constraint)
    with pytest.raises(GrammarError, match="MemoryError"):
        small_compiler.submit(constraint).result(timeout=60)


def test_invalid_regex(small_compiler):
    with pytest.raises(GrammarError):
        small_compiler.compile(Constraint("regex", "a("))
    with pytest.raises(
        GrammarError, match="matches no string"
    ):  # nothing can follow the whole text
        small_compiler.compile(Constraint("regex", "a(?=b)"))
    with pytest.raises(GrammarError, match="backreferences"):
        small_compiler.compile(Constraint("regex", "(a)\\1"))
    with pytest.raises(GrammarError, match="inside a lookaround"):
        small_compiler.compile(Constraint("regex", "(?=(?!a)b)b"))


@pytest.mark.parametrize(
    "pattern",
    [
        "(?!abc)[a-c]{3}",
        "[a-c]+(?<!a)",
        "\\bab\\b cd|x\\B\\w",
        "(?=.*[0-9])[a-c0-9]{2,4}",
        "(?!\\s)[^,]{1,3}",
    ],
)
def test_regex_lookarounds_are_written_out(pattern, small_compiler, small_info):
    """A regex constraint matches the whole output: lookarounds and word boundaries written out
    through the automaton (regex.lookaround), every output a full match."""
    grammar = small_compiler.compile(Constraint("regex", pattern))
    for seed in range(8):
        _, text = random_walk(grammar, small_info, seed)
        assert re.fullmatch(pattern, text), (pattern, text)


def test_cfg_kinds_go_to_the_cfg_compiler(small_compiler, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "radixgen.grammar.cfg.grammar", None)  # as if absent
    with pytest.raises(GrammarError, match="radixgen.grammar.cfg.grammar"):
        GrammarCompiler(small_compiler.tokenizer_info).compile(Constraint("lark", 'start: "a"'))


@pytest.mark.parametrize("pattern", REGEXES)
def test_regex_outputs_fullmatch(pattern, smol_compiler, smol_info):
    grammar = smol_compiler.compile(Constraint("regex", pattern))
    for seed in range(3):
        _, text = random_walk(grammar, smol_info, seed)
        assert re.fullmatch(pattern, text), text


def test_choices_output_is_exactly_one_choice(smol_compiler, smol_info):
    choices = ["yes", "no", "maybe (later)", "a.b*c", "yes please"]
    grammar = smol_compiler.compile(Constraint("choices", choices))
    seen = set()
    for seed in range(12):
        _, text = random_walk(grammar, smol_info, seed)
        assert text in choices
        seen.add(text)
    assert len(seen) > 1
    assert re.fullmatch(choices_regex(choices), "a.b*c")


def test_jump_forward_tokens_decode_to_forced_text(smol_compiler, smol_info, smol_tokenizer):
    schema = {
        "type": "object",
        "properties": {"temperature_celsius": {"type": "integer"}},
        "required": ["temperature_celsius"],
    }
    matcher = smol_compiler.compile(Constraint("json_schema", schema)).matcher()
    forced = matcher.jump_forward_string()
    assert forced == '{"temperature_celsius":'
    for token in smol_tokenizer.encode('{"temperature', add_special_tokens=False):
        assert matcher.accept_token(token)
    forced = matcher.jump_forward_string()
    assert forced == '_celsius":'
    jump = matcher.jump_forward_token_ids()  # only single-token states: here just "_"
    assert jump and forced.startswith(smol_tokenizer.decode(jump))
    assert smol_tokenizer.decode(jump) == info_text(smol_info, jump)
    for token in jump:
        assert matcher.accept_token(token)
