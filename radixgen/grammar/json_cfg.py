"""A JSON Schema too large for one regex, compiled to the CFG matcher (cfg.CfgGrammar).

schema_grammar writes the rules, json_tokens the lexer of their terminals (atoms); here the rules
become an LALR table (Lark's analysis, fed the rules directly: a schema grammar has thousands of
rules, and Lark's grammar-text front end would double the time) and the matcher gets the atoms'
lexer instead of one built from terminals' regexes. A terminal matched by one atom is that atom
in the rules; one matched by several is a rule choosing among them.

The grammar may be ambiguous where the schema is (anyOf alternatives that both accept `{}`, two
objects starting with the same property): the LALR table then keeps one action per conflict, a
reduce/reduce by the rules' priorities (each rule has its own) and a shift/reduce as the shift.
Every text the table accepts is still derived by the grammar, so it is valid; the table only
accepts fewer of the schema's texts, and every stack it reaches still has a completion (a kept
action leads to items the grammar completes), which the corpus walks check.
"""

from __future__ import annotations

from collections import defaultdict
from types import SimpleNamespace

from lark.common import ParserConf
from lark.exceptions import LarkError
from lark.grammar import NonTerminal, Rule, RuleOptions, Terminal
from lark.parsers.grammar_analysis import LR0ItemSet, RulePtr
from lark.parsers.lalr_analysis import LALR_Analyzer

from .cfg import CfgGrammar
from .json_tokens import TokenAtoms
from .matcher import GrammarError
from .schema_grammar import PUNCTUATION, JsonGrammar
from .tokenizer_info import TokenizerInfo
from .unique_items import UniqueGuard


def check_json_grammar(grammar: JsonGrammar) -> None:
    """What can refuse a schema grammar, without its LALR table (whose conflicts are resolved):
    its tokens (each a JSON scalar token) and the size of their lexer."""
    TokenAtoms(grammar.terminals, _not_json_checked(grammar), grammar.whitespace)


def compile_json_grammar(grammar: JsonGrammar, info: TokenizerInfo, precompute: bool = True,
                         guard: UniqueGuard | None = None) -> CfgGrammar:
    """The matcher's grammar; `precompute` as in cfg.compile_cfg; `guard` what the schema needs
    beside its grammar (json_schema's unique paths, as beside its regex)."""
    atoms = TokenAtoms(grammar.terminals, _not_json_checked(grammar), grammar.whitespace)
    rules = dict(grammar.rules)
    symbols: dict[str, str] = {}
    for name in grammar.terminals:
        found = atoms.atoms_of[name]
        if len(found) == 1:
            symbols[name] = found[0]
        else:
            symbols[name] = f"x{name.lower()}"
            rules[symbols[name]] = [[atom] for atom in found]
    atom_names = set(atoms.type_names)
    conf = ParserConf(_lark_rules(rules, symbols, atom_names), {}, [grammar.start])
    try:
        analyzer = _Analyzer(conf)
        analyzer.compute_lalr()
    except LarkError as exc:
        first = str(exc).splitlines()[0]
        raise GrammarError(f"json_schema is too large for one regex, and its grammar is ambiguous where "
                           f"it would need to be deterministic ({first})") from None
    table = SimpleNamespace(parser=SimpleNamespace(parse_table=analyzer.parse_table))
    parsed = SimpleNamespace(parser=SimpleNamespace(parser=table, parser_conf=conf))  # (a Lark object's shape)
    compiled = CfgGrammar(parsed, info, lexer=atoms.lexer(), guard=guard)
    if precompute:
        compiled.precompute()
    return compiled


def _not_json_checked(grammar: JsonGrammar) -> frozenset[str]:
    """The terminals TokenAtoms does not check to be JSON scalar tokens: punctuation, tags."""
    return frozenset(PUNCTUATION.values()) | frozenset(grammar.tags)


class _Analyzer(LALR_Analyzer):
    """Lark's LALR(1) analysis, with the includes/lookback relations (DeRemer and Pennello)
    computed from each state's items grouped by the rule they expand, instead of a scan of the
    whole closure per nonterminal transition: a schema grammar's states hold hundreds of items
    (an object's optional properties), and the scan took most of the compile time. Set up with
    only what the LALR(1) analysis reads (the LR(0) start state, the nullable nonterminals):
    Lark's setup also computes FIRST and FOLLOW sets by rounds over every rule (a fifth of
    the time on large schemas), which the analysis never reads."""

    def __init__(self, parser_conf: ParserConf, debug: bool = False) -> None:
        self.debug, self.strict = debug, False
        (start,) = parser_conf.start
        root = Rule(NonTerminal("$root_" + start), [NonTerminal(start)])
        rules = parser_conf.rules + [root]
        self.lr0_rules_by_origin: dict = {}
        for rule in rules:
            self.lr0_rules_by_origin.setdefault(rule.origin, []).append(rule)
        self._expanded: dict = {}
        closure = self.expand_rule(root.origin, self.lr0_rules_by_origin)
        self.lr0_start_states = {start: LR0ItemSet([RulePtr(root, 0)], closure)}
        self.NULLABLE = _nullable(rules)
        self.nonterminal_transitions = []
        self.directly_reads, self.reads = defaultdict(set), defaultdict(set)
        self.includes, self.lookback = defaultdict(set), defaultdict(set)

    def expand_rule(self, source_rule, rules_by_origin=None):
        """The items that start `source_rule`'s expansions, transitively: the same for every
        state whose kernel needs them, so computed once per nonterminal (Lark recomputes them
        per kernel item)."""
        found = self._expanded.get(source_rule)
        if found is None:
            found = frozenset(super().expand_rule(source_rule, rules_by_origin or self.lr0_rules_by_origin))
            self._expanded[source_rule] = found
        return found

    def compute_includes_lookback(self):
        by_origin: dict = {}
        for transition in self.nonterminal_transitions:
            state, nonterminal = transition
            items = by_origin.get(state)
            if items is None:
                items = by_origin[state] = {}
                for item in state.closure:
                    items.setdefault(item.rule.origin, []).append(item)
            for item in items.get(nonterminal, ()):
                expansion, at = item.rule.expansion, state
                for i in range(item.index, len(expansion)):
                    inner = (at, expansion[i])
                    at = at.transitions[expansion[i]]
                    if inner in self.reads and all(x in self.NULLABLE for x in expansion[i + 1:]):
                        self.includes[inner].add(transition)
                if item.index == 0:  # `at` holds the rule's completed item
                    self.lookback[transition].add((at, item.rule))


def _nullable(rules: list[Rule]) -> set:
    """The nonterminals that derive the empty text: each rule waits for the nonterminals of its
    expansion (none with a terminal can be empty), its origin nullable once they all are."""
    waiting: dict = {}
    left, todo = [], []
    for k, rule in enumerate(rules):
        if any(symbol.is_term for symbol in rule.expansion):
            left.append(-1)
            continue
        left.append(len(rule.expansion))
        for symbol in rule.expansion:
            waiting.setdefault(symbol, []).append(k)
        if not rule.expansion:
            todo.append(rule.origin)
    nullable: set = set()
    while todo:
        symbol = todo.pop()
        if symbol in nullable:
            continue
        nullable.add(symbol)
        for k in waiting.get(symbol, ()):
            left[k] -= 1  # (once per occurrence: the rule is listed per occurrence)
            if left[k] == 0:
                todo.append(rules[k].origin)
    return nullable


def _lark_rules(rules: dict[str, list[list[str]]], symbols: dict[str, str], atoms: set[str]) -> list[Rule]:
    """Lark's rules, each with a priority of its own (earlier rules higher), which decides its
    reduce/reduce conflicts."""
    out, priority = [], len(rules)
    for name, alternatives in rules.items():
        options = RuleOptions(priority=priority)
        priority -= 1
        origin = NonTerminal(name)
        for order, alt in enumerate(alternatives):
            expansion = [Terminal(s) if s in atoms else NonTerminal(s) for s in (symbols.get(x, x) for x in alt)]
            out.append(Rule(origin, expansion, order, options=options))
    return out
