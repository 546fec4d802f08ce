"""A JSON Schema too large for one regex, compiled to the CFG matcher (cfg.CfgGrammar).

json_grammar.rules writes the rules, json_grammar.tokens the lexer of their terminals (atoms); here the rules
become an LALR table (cfg.lalr_table: Lark's construction and table format over integer items, fed
the rules directly: a schema grammar has thousands of rules, and Lark's grammar-text front end
and object-based analysis took most of the compile time) and the matcher gets the atoms' lexer instead of one built from terminals' regexes. A terminal matched by one atom is that atom
in the rules; one matched by several is a rule choosing among them.

The grammar may be ambiguous where the schema is (anyOf alternatives that both accept `{}`, two
objects starting with the same property): the LALR table then keeps one action per conflict, a
reduce/reduce by the rules' priorities (each rule has its own) and a shift/reduce as the shift.
Every text the table accepts is still derived by the grammar, so it is valid; the table only
accepts fewer of the schema's texts, and every stack it reaches still has a completion (a kept
action leads to items the grammar completes), which the corpus walks check.
"""

from __future__ import annotations

from types import SimpleNamespace

from lark.common import ParserConf
from lark.exceptions import LarkError
from lark.grammar import NonTerminal, Rule, RuleOptions, Terminal

from radixgen.grammar.cfg.grammar import CfgGrammar
from radixgen.grammar.cfg.lalr_table import LalrTable, terminal_follows
from radixgen.grammar.json_grammar.rules import PUNCTUATION, JsonGrammar, keep_productive
from radixgen.grammar.json_grammar.tokens import LexerTooLarge, TokenAtoms
from radixgen.grammar.matcher import GrammarError
from radixgen.grammar.tokenizer_info import TokenizerInfo
from radixgen.grammar.unique.guard import UniqueGuard


def check_json_grammar(grammar: JsonGrammar) -> None:
    """What can refuse a schema grammar, without its LALR table (whose conflicts are resolved):
    its tokens (each a JSON scalar token) and the size of their lexer."""
    _atoms(grammar)


def compile_json_grammar(
    grammar: JsonGrammar,
    info: TokenizerInfo,
    precompute: bool = True,
    guard: UniqueGuard | None = None,
) -> CfgGrammar:
    """The matcher's grammar; `precompute` as in cfg.compile_cfg; `guard` what the schema needs
    beside its grammar (json_schema's unique paths, as beside its regex)."""
    atoms = _atoms(grammar)
    rules = {name: list(alternatives) for name, alternatives in grammar.rules.items()}
    # (a terminal no context reads is in no text: its rules' alternatives go, as unreachable)
    keep_productive(rules, {name for name in grammar.terminals if atoms.atoms_of[name]})
    symbols: dict[str, str] = {}
    for name in grammar.terminals:
        found = atoms.atoms_of[name]
        if not found:
            continue
        if len(found) == 1:
            symbols[name] = found[0]
        else:
            symbols[name] = f"x{name.lower()}"
            rules[symbols[name]] = [[atom] for atom in found]
    atom_names = set(atoms.type_names)
    conf = ParserConf(_lark_rules(rules, symbols, atom_names), {}, [grammar.start])
    try:
        built = LalrTable(conf.rules, grammar.start)
    except LarkError as exc:
        first = str(exc).splitlines()[0]
        raise GrammarError(
            f"json_schema is too large for one regex, and its grammar is ambiguous where "
            f"it would need to be deterministic ({first})"
        ) from None
    table = SimpleNamespace(parser=SimpleNamespace(parse_table=built.table))
    # (a Lark object's shape, with the states' kernels for the shortest completions, cfg.items)
    parsed = SimpleNamespace(
        parser=SimpleNamespace(parser=table, parser_conf=conf, kernels=built.kernels())
    )
    compiled = CfgGrammar(parsed, info, lexer=atoms.lexer(), guard=guard)
    if precompute:
        compiled.precompute()
    return compiled


def _atoms(grammar: JsonGrammar) -> TokenAtoms:
    """The token lexer's atoms: every token read among all terminals, or where that lexer
    would be too large (long counted patterns in overlapping strings multiply), among those
    that can follow the one before it (more states for most schemas: each context has its own
    product, so only when the first is too large)."""
    try:
        return TokenAtoms(grammar.terminals, _not_json_checked(grammar), grammar.whitespace)
    except LexerTooLarge:
        follows = terminal_follows(grammar.rules, list(grammar.terminals), grammar.start)
        return TokenAtoms(
            grammar.terminals, _not_json_checked(grammar), grammar.whitespace, follows
        )


def _not_json_checked(grammar: JsonGrammar) -> frozenset[str]:
    """The terminals TokenAtoms does not check to be JSON scalar tokens: punctuation, tags."""
    return frozenset(PUNCTUATION.values()) | frozenset(grammar.tags)


def _lark_rules(
    rules: dict[str, list[list[str]]], symbols: dict[str, str], atoms: set[str]
) -> list[Rule]:
    """Lark's rules, each with a priority of its own (earlier rules higher), which decides its
    reduce/reduce conflicts."""
    out, priority = [], len(rules)
    for name, alternatives in rules.items():
        options = RuleOptions(priority=priority)
        priority -= 1
        origin = NonTerminal(name)
        for order, alt in enumerate(alternatives):
            expansion = [
                Terminal(s) if s in atoms else NonTerminal(s)
                for s in (symbols.get(x, x) for x in alt)
            ]
            out.append(Rule(origin, expansion, order, options=options))
    return out
