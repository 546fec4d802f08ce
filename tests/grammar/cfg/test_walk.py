"""The trie walk's shortcuts agree with the plain rules they stand for: a multi-group node's
selection by type (`SeqTrie.select`) with `partial_allowed` per group, and the parser's fast-path
tables (`shift_to`, `shift_only`) with `feed` / `acceptable`. (Whole masks are compared with an
independent reference in test_cfg_masks.py.)"""

from __future__ import annotations

import random

import numpy as np

from radixgen.core import Constraint
from radixgen.grammar.cfg.grammar import compile_cfg
from radixgen.grammar.cfg.lexer import FRESH
from radixgen.grammar.cfg.vocabulary_index import ids_of, partial_allowed


def _nodes(root):
    todo = [root]
    while todo:
        node = todo.pop()
        yield node
        todo.extend(node.children.values())


def _ids(lists, rows) -> set[int]:
    out = set(ids_of(list(lists)).tolist())
    for row in rows:
        out.update(np.flatnonzero(np.unpackbits(row.view(np.uint8), bitorder="little")).tolist())
    return out


def test_select_by_type_matches_partial_allowed(small_info):
    grammar = compile_cfg(Constraint("lark", "sql"), small_info, precompute=False)
    terms = sorted({t for row in grammar.parser.actions.values() for t in row if t.isupper()})
    rng = random.Random(5)
    sets = [frozenset(), frozenset(terms)] + [
        frozenset(rng.sample(terms, k)) for k in (1, 2, 5, 20) for _ in range(4)
    ]
    checked = 0
    for q in range(FRESH, min(grammar.lexer.num_states, FRESH + 40)):
        for node in _nodes(grammar.trie(q)):
            if node.num_groups < 2:
                continue
            for acceptable in sets + [frozenset(rng.choice(node.group_types))]:
                expected = [
                    part
                    for part, types, always in zip(node.group_parts, node.group_types, node.always)
                    if partial_allowed(types, always, acceptable)
                ]
                small, rows, num = node.select(acceptable)
                assert num == sum(n for _, _, n in expected)
                assert _ids(small, rows) == _ids(
                    [i for i, _, _ in expected if i is not None],
                    [r for _, r, _ in expected if r is not None],
                )
                checked += 1
    assert checked > 50


def test_parser_fast_paths_match_feed_and_acceptable(small_info):
    grammar = compile_cfg(Constraint("lark", "sql"), small_info, precompute=False)
    parser, rng = grammar.parser, random.Random(2)
    for _ in range(30):  # random parser walks over acceptable terminals
        stack = parser.start_stack
        for _ in range(25):
            acceptable = parser.acceptable(stack)
            if stack[-1] in parser.shift_only:
                assert parser.shift_only[stack[-1]] == acceptable
            for term, state in parser.shift_to[stack[-1]].items():
                assert parser.feed(stack, term) == stack + (state,)
            if not acceptable:
                break
            stack = parser.feed(stack, rng.choice(sorted(acceptable)))
            assert stack is not None
