"""Is a grammar's language non-empty? Checked when a CFG compiles, before any search runs on it.

A nonterminal is productive when one of its expansions consists of productive symbols only; a
terminal is productive when the lexer can end a token as it (some lexer state has it as its
winner: a terminal whose pattern matches nothing, or that a higher-priority terminal always
shadows, is never produced). The productive set is the least fixpoint of that rule. When the
start symbol is not in it, the grammar admits no finite string (`start: "a" start`,
`start: start "a"`, `a: "x" b  b: "y" a`): every derivation of start refers back to a
nonterminal still being derived, so constrained decoding could never end, and the searches for
a shortest completion (cfg.closing) would look for one forever. Such a grammar is refused.
"""

from __future__ import annotations

from radixgen.grammar.matcher import GrammarError


def productive_symbols(rules: list, terminals: set[str]) -> set[str]:
    """The names of the nonterminals of `rules` (Lark `Rule`s) that derive a string of the
    given productive `terminals`, and those terminals. Linear passes until nothing changes."""
    productive = set(terminals)
    pending = list(rules)
    changed = True
    while changed:
        changed, left = False, []
        for rule in pending:
            origin = rule.origin.name
            if origin in productive:
                continue
            if all(s.name in productive for s in rule.expansion):
                productive.add(origin)
                changed = True
            else:
                left.append(rule)
        pending = left
    return productive


def check_finite_string(rules: list, lexer, start: str = "start") -> None:
    """GrammarError unless `start` derives some finite string of terminals `lexer` can produce."""
    winners = {lexer.type_names[w] for w in set(int(w) for w in lexer.winner) if w >= 0}
    productive = productive_symbols(rules, winners)
    if start in productive:
        return
    stuck = sorted({r.origin.name for r in rules} - productive)
    shown = ", ".join(_user_name(n) for n in stuck[:8]) + (", ..." if len(stuck) > 8 else "")
    raise GrammarError(
        f"the grammar admits no finite string: every derivation of {_user_name(start)} refers back "
        f"to a rule that never ends in terminals alone ({shown}); give each recursive rule an "
        f'alternative without the recursion (e.g. start: "a" start | "a")'
    )


def _user_name(name: str) -> str:
    """A rule name as the user wrote it: Lark's inlined helpers (`__start_star_0`) stay."""
    return name.lstrip("?!")
