"""Lookarounds and inner anchors written out: a pattern as an equal pattern without them.

outlines-core's regexes have no lookaround, and the pattern translation (regex_leaves) reads `^` and
`$` only at the ends. (A `regex` constraint, matched whole, goes through here too: `whole`.) A lookahead or lookbehind without backreferences keeps a language regular, so
`lookarounds_written_out` builds the automaton of the whole strings a pattern accepts (as a JSON
Schema pattern: a search, lookarounds seeing the whole string) and writes it back as a pattern of
classes, groups and `* ? |` that the translation takes like any other. What CloudFormation writes
(`^[a-zA-Z_](?!.*--)[a-zA-Z0-9_-]*$`, `^(?!svc-)(?![-])(?!.*[-]$)[a-z0-9-]+$`,
`^[0-9a-z.-]*(?<!\\.)$`, `(^s3://.+$)|(^(?=(.{4})*$)[A-Za-z0-9+/]*={0,2}$)`) comes out exact.

The automaton runs threads of a Thompson automaton of `.*` pattern `.*` in step over the string
(its subset construction over atoms: the classes of the pattern cut into disjoint sets):
- `^` holds at position 0 only, `$` marks a thread that any further character kills;
- a lookahead `(?=X)` / `(?!X)` gives its thread an obligation: the threads of X started there, run
  alongside; the thread lives on once X has matched (positive) or can no longer match (negative),
  and dies in the other case; at the end of the string pending obligations are decided by whether
  X matches up to the end;
- a lookbehind `(?<=Y)` / `(?<!Y)` reads the state of an automaton of `.*Y` run from the start.
Word boundaries are lookarounds too (`\\b`: a word character before and none after, or the
other way round). Lookarounds inside lookarounds, backreferences and flags are refused.

Classes keep the rule of the rest of the translation: the output is a subset of the pattern's
language in ECMA-262 and in Python's `re` alike. Where the two read a class differently (`\\s`,
`\\d`, `\\w`, `.`), a class counted positively takes the characters both put in it, and one under
a negation (a negative lookaround, a negated class) every character either puts in it, so what
is excluded is never too small; a Unicode property under a negation is refused (the translation
narrows properties to ASCII). Characters JSON strings must escape, lone surrogates and characters
past U+FFFF are never generated.
"""

from __future__ import annotations

import re
import warnings
from re import _constants as C, _parser

from .code_point_sets import MAX_CP, negated, normalized
from .regex_lookahead import _group_end
from .regex_properties import pattern_tokens

MAX_STATES = 2000  # automaton states before the pattern is refused
MAX_TEXT = 150_000  # characters of the written-out pattern (one of 125,000 compiled in 5 s)
# group nesting of the written-out pattern (Rust's regex parser stops at 250, Python's around 300)
MAX_DEPTH = 120
# what a string written out may hold: no control character, '"', '\\', surrogate or astral character
# (nor a line terminator: then `.` is every character, and `(?=.{m,n}$)` a length)
_UNIVERSE = ((0x20, 0x21), (0x23, 0x5B), (0x5D, 0x2027), (0x202A, 0xD7FF), (0xE000, 0xFFFD))
_ANY_TEXT = ((0, 0xD7FF), (0xE000, 0xFFFD))  # (whole texts: astral characters left out too)
_NON_ASCII = ((0x80, MAX_CP),)
_DIGIT = ((0x30, 0x39),)
_WORD = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
# white space in both ECMA-262 and Python, and in either
_SPACE_BOTH = ((0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A), (0x2028, 0x2029),
               (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000))
_SPACE_EITHER = _SPACE_BOTH + ((0x1C, 0x1F), (0x85, 0x85), (0xFEFF, 0xFEFF))
_LOOKAROUND = re.compile(r"\(\?<?[=!]")


class LookaroundError(ValueError):
    """The pattern cannot be written out (the message says why)."""


# word boundaries as lookarounds: a word character on one side only (`\\B`: on both or neither);
# the polarity rule then takes a word character ECMA-262 and Python both count where one must be
# there, and any either counts where none may be (ECMA-262's \\w is ASCII, Python's Unicode)
_BOUNDARIES = {"\\b": "(?:(?<=\\w)(?!\\w)|(?<!\\w)(?=\\w))", "\\B": "(?:(?<=\\w)(?=\\w)|(?<!\\w)(?!\\w))"}


def needs_writing_out(pattern: str) -> bool:
    return bool(_LOOKAROUND.search(pattern)) or any(
        text in _BOUNDARIES and not in_class for _, text, in_class in pattern_tokens(pattern))


def _boundaries_as_lookarounds(python_text: str) -> str:
    return "".join(_BOUNDARIES.get(text, text) if not in_class else text
                   for _, text, in_class in pattern_tokens(python_text))


def lookarounds_written_out(pattern: str, python_text: str, whole: bool = False) -> tuple[str, int, int | None]:
    """`pattern` (its Python view, `python_text`: properties as ASCII classes) as an anchored
    pattern without lookarounds or inner anchors, and a length range: the pattern's strings of
    those lengths are the same strings (see the module docstring for the classes). Lengths keep
    counted repeats out of the automaton (`_lengths_taken_out`). `whole`: the pattern matches the
    whole text, any character but a surrogate (a `regex` constraint), not a JSON string's
    contents found by a search; no lengths then. Raises LookaroundError."""
    _refuse_properties_under_lookarounds(pattern)
    try:
        with warnings.catch_warnings():  # (re's FutureWarning for `||` in a class: two characters)
            warnings.simplefilter("ignore", FutureWarning)
            parsed = _parser.parse(_boundaries_as_lookarounds(python_text))
    except re.error as exc:
        raise LookaroundError(f"not a valid regular expression ({exc})") from None
    except RecursionError:
        raise LookaroundError("its groups nest too deeply") from None
    if parsed.state.flags & (re.IGNORECASE | re.MULTILINE | re.DOTALL | re.VERBOSE):
        raise LookaroundError("inline flags are not supported")
    items, least, most = (list(parsed), 0, None) if whole else _lengths_taken_out(list(parsed), parsed.state)
    nfa = _Nfa(_ANY_TEXT if whole else _UNIVERSE)
    start = nfa.new()
    if not whole:  # a search: anything before the match
        nfa.edge(start, ("c", nfa.universe), start)
    body_start, body_end = nfa.build(items, True, "main")
    nfa.edge(start, ("e",), body_start)
    final = nfa.new()
    nfa.edge(body_end, ("e",), final)
    if not whole:  # and after it
        nfa.edge(final, ("c", nfa.universe), final)
    nfa.final = final
    dfa = _Dfa(nfa)
    text = _write_out(*dfa.minimal(), dfa.atom_sets)
    if len(text) > MAX_TEXT:
        raise LookaroundError(f"written out without lookarounds it is {len(text)} characters long (limit {MAX_TEXT})")
    return "^(?:" + text + ")$", least, most


def _lengths_taken_out(items: list, state) -> tuple[list, int, int | None]:
    """Counted repeats as lengths, where that is exact: a leading `(?=^.{m,n}$)` at the start of
    the string bounds its length (no string written out holds a line terminator, so `.` is any
    character); in a pattern anchored at both ends whose pieces all have one width but one
    counted repeat `X{a,b}` of a piece of one width, that repeat becomes `X{a,}` and its counts
    lengths. (Counted repeats in the automaton multiply its states: `[a-z0-9-]{1,48}` after a
    lookahead would take a state per count and lookahead state.) Returns (items, least, most)."""
    least, most = 0, None
    while len(items) == 1 and items[0][0] == C.SUBPATTERN and not any(items[0][1][1:3]):
        items = list(items[0][1][3])  # `(^...$)`: the group's own items
    anchored = bool(items) and items[0] == (C.AT, C.AT_BEGINNING)
    head = 1 if anchored else 0
    if head < len(items) and items[head][0] == C.ASSERT and items[head][1][0] == 1:
        inner = list(items[head][1][1])
        at_start = anchored or (inner and inner[0] == (C.AT, C.AT_BEGINNING))
        inner = inner[1:] if inner and inner[0] == (C.AT, C.AT_BEGINNING) else inner
        if (at_start and len(inner) == 2 and inner[1] == (C.AT, C.AT_END) and inner[0][0] == C.MAX_REPEAT
                and list(inner[0][1][2]) == [(C.ANY, None)]):
            least, count = inner[0][1][0], inner[0][1][1]
            most = None if count == C.MAXREPEAT else count
            items = items[:head] + items[head + 1:] if anchored else [(C.AT, C.AT_BEGINNING)] + items[head + 1:]
            anchored = True
    if not (anchored and items[-1] == (C.AT, C.AT_END)):
        return items, least, most
    widths = [_parser.SubPattern(state, [item]).getwidth() for item in items]
    variable = [i for i, (lo, hi) in enumerate(widths) if lo != hi]
    if len(variable) != 1 or items[variable[0]][0] not in (C.MAX_REPEAT, C.MIN_REPEAT):
        return items, least, most
    i = variable[0]
    low, high, sub = items[i][1]
    piece = _parser.SubPattern(state, list(sub)).getwidth()
    if high == C.MAXREPEAT or piece[0] != piece[1] or piece[0] == 0 or high - low < 4:
        return items, least, most
    fixed = sum(lo for k, (lo, _) in enumerate(widths) if k != i)
    items = items[:i] + [(C.MAX_REPEAT, (low, C.MAXREPEAT, sub))] + items[i + 1:]
    least = max(least, fixed + piece[0] * low)
    most = fixed + piece[0] * high if most is None else min(most, fixed + piece[0] * high)
    return items, least, most


def _refuse_properties_under_lookarounds(pattern: str) -> None:
    for m in _LOOKAROUND.finditer(pattern):
        end = _group_end(pattern[m.start():])
        inside = pattern[m.start():m.start() + end + 1] if end is not None else pattern[m.start():]
        if re.search(r"\\[pP]", inside):
            raise LookaroundError("a Unicode property inside a lookaround is not supported")


# ---------------------------------------------------------------- sets of code points


def _norm(ranges) -> tuple:
    return tuple(normalized(ranges))


def _complement(a) -> tuple:
    return tuple(negated(a))


def _intersect(a, b) -> tuple:
    return _complement(_norm(_complement(a) + _complement(b)))


def _category(name, positive: bool) -> tuple:
    """A shorthand class: the characters ECMA-262 and Python both put in it (positive), or
    either does (under a negation)."""
    negated = name in (C.CATEGORY_NOT_DIGIT, C.CATEGORY_NOT_WORD, C.CATEGORY_NOT_SPACE)
    if negated:
        plain = {C.CATEGORY_NOT_DIGIT: C.CATEGORY_DIGIT, C.CATEGORY_NOT_WORD: C.CATEGORY_WORD,
                 C.CATEGORY_NOT_SPACE: C.CATEGORY_SPACE}[name]
        return _complement(_category(plain, not positive))
    if name == C.CATEGORY_DIGIT:
        return _DIGIT if positive else _norm(_DIGIT + _NON_ASCII)
    if name == C.CATEGORY_WORD:
        return _WORD if positive else _norm(_WORD + _NON_ASCII)
    if name == C.CATEGORY_SPACE:
        return _SPACE_BOTH if positive else _SPACE_EITHER
    raise LookaroundError(f"unsupported class {name}")


def _char_set(op, arg, positive: bool) -> tuple:
    if op == C.LITERAL:
        return ((arg, arg),)
    if op == C.NOT_LITERAL:
        return _complement(((arg, arg),))
    if op == C.ANY:  # ECMA-262 leaves out \n \r U+2028 U+2029, Python \n alone
        return _complement(((0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)) if positive else ((0x0A, 0x0A),))
    if op == C.RANGE:
        return (arg,)
    if op == C.CATEGORY:
        return _category(arg, positive)
    if op == C.IN:
        negate = bool(arg) and arg[0][0] == C.NEGATE
        items = arg[1:] if negate else arg
        members = _norm([r for o, a in items for r in _char_set(o, a, positive != negate)])
        return _complement(members) if negate else members
    raise LookaroundError(f"unsupported class item {op}")


# ---------------------------------------------------------------- the Thompson automaton


class _Nfa:
    """States with edges (kind, ...): ("c", set) reads a character of the set; ("e",) epsilon;
    ("^",) / ("$",) anchors; ("la", start, final, positive) a lookahead of the automaton
    start..final; ("lb", index, positive) lookbehind `index` (self.behind)."""

    def __init__(self, universe: tuple):
        self.universe = universe  # the characters a string written out may hold
        self.edges: list[list] = []
        self.behind: list[tuple[int, int]] = []  # (start, final) of each lookbehind's automaton
        self.final = -1

    def new(self) -> int:
        self.edges.append([])
        return len(self.edges) - 1

    def edge(self, src: int, label: tuple, dst: int) -> None:
        self.edges[src].append((label, dst))

    def build(self, items: list, positive: bool, where: str) -> tuple[int, int]:
        """A fragment (start, end) for a sequence of parsed items; `where`: "main", "ahead" (a
        lookahead's body) or "behind" (a lookbehind's body)."""
        start = cur = self.new()
        for op, arg in items:
            nxt = self.new()
            self._item(op, arg, positive, where, cur, nxt)
            cur = nxt
        return start, cur

    def _item(self, op, arg, positive: bool, where: str, src: int, dst: int) -> None:
        if op in (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN):
            self.edge(src, ("c", _intersect(_char_set(op, arg, positive), self.universe)), dst)
        elif op == C.SUBPATTERN:
            _, add_flags, del_flags, sub = arg
            if add_flags or del_flags:
                raise LookaroundError("inline flags are not supported")
            self._sequence(list(sub), positive, where, src, dst)
        elif op == C.BRANCH:
            for alternative in arg[1]:
                self._sequence(list(alternative), positive, where, src, dst)
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT):
            self._repeat(*arg, positive, where, src, dst)
        elif op == C.AT:
            if where == "behind" or arg not in (C.AT_BEGINNING, C.AT_END):
                raise LookaroundError(f"anchor {arg} is not supported here")
            self.edge(src, ("^",) if arg == C.AT_BEGINNING else ("$",), dst)
        elif op in (C.ASSERT, C.ASSERT_NOT):
            if where != "main":
                raise LookaroundError("a lookaround inside a lookaround is not supported")
            direction, sub = arg
            keep = op == C.ASSERT
            body = self.build(list(sub), positive == keep, "ahead" if direction == 1 else "behind")
            if direction == 1:
                self.edge(src, ("la", body[0], body[1], keep), dst)
            else:
                self.behind.append(body)
                self.edge(src, ("lb", len(self.behind) - 1, keep), dst)
        else:
            raise LookaroundError(f"{op} is not supported")

    def _sequence(self, items, positive, where, src, dst) -> None:
        start, end = self.build(items, positive, where)
        self.edge(src, ("e",), start)
        self.edge(end, ("e",), dst)

    def _repeat(self, least: int, most, sub, positive, where, src, dst) -> None:
        if least > 1024 or (most != C.MAXREPEAT and most > 1024):
            raise LookaroundError("repeat counts above 1024 are not supported")
        cur = src
        for _ in range(least):
            nxt = self.new()
            self._sequence(list(sub), positive, where, cur, nxt)
            cur = nxt
        if most == C.MAXREPEAT:  # a loop
            loop = self.new()
            self.edge(cur, ("e",), loop)
            self._sequence(list(sub), positive, where, loop, loop)
            self.edge(loop, ("e",), dst)
            return
        for _ in range(most - least):
            nxt = self.new()
            self.edge(cur, ("e",), dst)
            self._sequence(list(sub), positive, where, cur, nxt)
            cur = nxt
        self.edge(cur, ("e",), dst)


# ---------------------------------------------------------------- subset construction


class _Dfa:
    """The automaton over atoms: a configuration is (at the start, each lookbehind's states,
    threads); a thread is (state, must end, obligations), an obligation (positive, final of
    the lookahead, its threads (state, must end))."""

    def __init__(self, nfa: _Nfa):
        self.nfa = nfa
        sets = {label[1] for edges in nfa.edges for label, _ in edges if label[0] == "c"}
        self.atom_sets, self.atoms_of = _atoms(sets, nfa.universe)
        start = (True, tuple(self._behind_start(i) for i in range(len(nfa.behind))))
        first = self._config(start, [(0, False, frozenset())])  # state 0: the start
        self.states, self.moves, self.accepting = [first], [], []
        index = {first: 0}
        i = 0
        while i < len(self.states):
            config = self.states[i]
            self.accepting.append(self._accepts(config))
            row = {}
            for atom in range(len(self.atom_sets)):
                nxt = self._step(config, atom)
                if not nxt[2]:
                    continue
                if nxt not in index:
                    if len(self.states) >= MAX_STATES:
                        raise LookaroundError(f"its automaton has more than {MAX_STATES} states")
                    index[nxt] = len(self.states)
                    self.states.append(nxt)
                row[atom] = index[nxt]
            self.moves.append(row)
            i += 1

    # -- lookbehinds: the states of `.*Y` after the prefix read so far
    def _plain_closure(self, states) -> frozenset:
        seen, stack = set(states), list(states)
        while stack:
            for label, dst in self.nfa.edges[stack.pop()]:
                if label[0] == "e" and dst not in seen:
                    seen.add(dst)
                    stack.append(dst)
        return frozenset(seen)

    def _behind_start(self, i: int) -> frozenset:
        return self._plain_closure([self.nfa.behind[i][0]])

    def _read(self, state: int, atom: int):
        for label, dst in self.nfa.edges[state]:
            if label[0] == "c" and atom in self.atoms_of[label[1]]:
                yield dst

    # -- threads
    def _config(self, glob, threads) -> tuple:
        out = set()
        for state, must_end, obligations in threads:
            self._closure(glob, state, must_end, obligations, out)
        return (glob[0], glob[1], frozenset(out))

    def _closure(self, glob, state, must_end, obligations, out: set) -> None:
        stack, seen = [(state, must_end, obligations)], set()
        while stack:
            thread = stack.pop()
            if thread in seen:
                continue
            seen.add(thread)
            s, end, obs = thread
            if s == self.nfa.final or any(label[0] == "c" for label, _ in self.nfa.edges[s]):
                out.add(thread)
            for label, dst in self.nfa.edges[s]:
                kind = label[0]
                if kind == "e" or (kind == "^" and glob[0]):
                    stack.append((dst, end, obs))
                elif kind == "$":
                    stack.append((dst, True, obs))
                elif kind == "lb":
                    if (self.nfa.behind[label[1]][1] in glob[1][label[1]]) == label[2]:
                        stack.append((dst, end, obs))
                elif kind == "la":
                    ahead = self._ahead_closure(glob, [(label[1], False)])
                    decided = _decide(label[3], label[2], ahead)
                    if decided != "dead":
                        stack.append((dst, end, obs if decided == "ok" else obs | {decided}))

    def _ahead_closure(self, glob, threads) -> frozenset:
        seen, stack = set(threads), list(threads)
        while stack:
            s, end = stack.pop()
            for label, dst in self.nfa.edges[s]:
                nxt = None
                if label[0] == "e" or (label[0] == "^" and glob[0]):
                    nxt = (dst, end)
                elif label[0] == "$":
                    nxt = (dst, True)
                if nxt is not None and nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return frozenset(seen)

    def _step(self, config, atom: int) -> tuple:
        behind = tuple(self._plain_closure([d for s in states for d in self._read(s, atom)]) | self._behind_start(i)
                       for i, states in enumerate(config[1]))
        glob = (False, behind)
        threads = []
        for state, must_end, obligations in config[2]:
            if must_end:
                continue
            targets = list(self._read(state, atom))
            if not targets:
                continue
            kept, alive = set(), True
            for positive, final, ahead in obligations:
                moved = self._ahead_closure(glob, [(d, False) for s, end in ahead if not end
                                                   for d in self._read(s, atom)])
                decided = _decide(positive, final, moved)
                if decided == "dead":
                    alive = False
                    break
                if decided != "ok":
                    kept.add(decided)
            if alive:
                threads += [(d, False, frozenset(kept)) for d in targets]
        return self._config(glob, threads)

    def _accepts(self, config) -> bool:
        return any(state == self.nfa.final and all(
            any(s == final for s, _ in ahead) == positive for positive, final, ahead in obligations)
            for state, _, obligations in config[2])

    def minimal(self) -> tuple[list[dict], list[bool]]:
        """The minimal automaton of the states that can reach acceptance: (moves, accepting),
        state 0 the start."""
        n = len(self.states)
        live = {i for i in range(n) if self.accepting[i]}
        changed = True
        while changed:
            changed = False
            for i in range(n):
                if i not in live and any(j in live for j in self.moves[i].values()):
                    live.add(i)
                    changed = True
        if 0 not in live:
            raise LookaroundError("it matches no string that can be written out (JSON string contents "
                                  "hold no control character, '\"' or '\\' unescaped)")
        block = {i: int(self.accepting[i]) for i in live}
        while True:
            keys = {i: (block[i], tuple(sorted((a, block[j]) for a, j in self.moves[i].items() if j in live)))
                    for i in live}
            names: dict = {}
            new = {i: names.setdefault(keys[i], len(names)) for i in sorted(live)}
            if len(names) == len(set(block.values())):
                break
            block = new
        order = {}
        for i in sorted(live):  # the start's block first
            order.setdefault(new[i], len(order))
        moves: list[dict] = [{} for _ in order]
        accepting = [False] * len(order)
        for i in live:
            b = order[new[i]]
            accepting[b] = self.accepting[i]
            for a, j in self.moves[i].items():
                if j in live:
                    moves[b][a] = order[new[j]]
        return moves, accepting


def _decide(positive: bool, final: int, ahead: frozenset):
    """An obligation's fate: "ok" (kept no longer), "dead" (its thread dies), or the obligation."""
    if any(s == final and not end for s, end in ahead):  # the lookahead has matched
        return "ok" if positive else "dead"
    if not ahead:
        return "dead" if positive else "ok"
    return (positive, final, ahead)


def _atoms(sets, universe: tuple) -> tuple[list[tuple], dict]:
    """The universe cut into atoms (sets of code points no class of `sets` tells apart), and the
    atoms of each set."""
    sets = list(sets)
    cuts = {lo for lo, _ in universe} | {hi + 1 for _, hi in universe}
    for s in sets:
        cuts |= {lo for lo, _ in s} | {hi + 1 for _, hi in s}
    cuts = sorted(cuts)
    pieces = [(a, b - 1) for a, b in zip(cuts, cuts[1:]) if _intersect(((a, b - 1),), universe)]
    groups: dict = {}
    for lo, hi in pieces:
        signature = tuple(any(a <= lo and hi <= b for a, b in s) for s in sets)
        groups.setdefault(signature, []).append((lo, hi))
    atom_sets = [_norm(v) for v in groups.values()]
    signatures = list(groups)
    atoms_of = {s: frozenset(i for i, sig in enumerate(signatures) if sig[k]) for k, s in enumerate(sets)}
    return atom_sets, atoms_of


# ---------------------------------------------------------------- writing the automaton out


def _write_out(moves: list[dict], accepting: list[bool], atom_sets: list) -> str:
    """A regex for the automaton, by state elimination (fewest paths through a state first)."""
    n = len(moves)
    start, end = n, n + 1
    succ: dict = {i: {} for i in range(n + 2)}
    pred: dict = {i: set() for i in range(n + 2)}

    def put(a: int, b: int, r: "_Re") -> None:
        if len(r.text) > MAX_TEXT:
            raise LookaroundError(f"written out without lookarounds it is over {MAX_TEXT} characters long")
        succ[a][b] = succ[a][b].alt(r) if b in succ[a] else r
        pred[b].add(a)

    for i, row in enumerate(moves):
        by_target: dict = {}
        for atom, j in row.items():
            by_target.setdefault(j, []).append(atom)
        for j, atoms in by_target.items():
            put(i, j, _Re("atom", _class_text(_norm([r for a in atoms for r in atom_sets[a]]))))
    put(start, 0, _EPS)
    for i in range(n):
        if accepting[i]:
            put(i, end, _EPS)
    remaining = set(range(n))
    while remaining:
        k = min(remaining, key=lambda s: (_weight(s, succ, pred), s))
        remaining.discard(k)
        loop = succ[k].pop(k, None)
        pred[k].discard(k)
        ins = [(a, succ[a].pop(k)) for a in pred.pop(k)]
        outs = list(succ.pop(k).items())
        for b, _ in outs:
            pred[b].discard(k)
        middle = _EPS if loop is None else loop.star()
        for a, r_in in ins:
            for b, r_out in outs:
                put(a, b, r_in.cat(middle).cat(r_out))
    return succ[start][end].text


def _weight(k: int, succ: dict, pred: dict) -> int:
    """How much text eliminating state k adds (Delgado and Morais' measure): each incoming label
    is copied once per further outgoing one, and the other way round, the loop once per path."""
    ins = [len(succ[a][k].text) for a in pred[k] if a != k]
    outs = [len(r.text) for b, r in succ[k].items() if b != k]
    loop = len(succ[k][k].text) if k in succ[k] else 0
    return sum(ins) * (len(outs) - 1) + sum(outs) * (len(ins) - 1) + loop * (len(ins) * len(outs) - 1)


class _Re:
    """Regex text with what it needs around it: kind "eps" (empty), "atom" (takes a quantifier
    as it is), "quant" (X*, X?), "cat" or "alt"; depth: how deep its groups nest."""

    def __init__(self, kind: str, text: str, depth: int = 0):
        self.kind, self.text, self.depth = kind, text, depth
        if depth > MAX_DEPTH:
            raise LookaroundError(f"written out without lookarounds its groups nest more than {MAX_DEPTH} deep")

    def _quantifiable(self) -> tuple[str, int]:
        return (self.text, self.depth) if self.kind == "atom" else (f"(?:{self.text})", self.depth + 1)

    def _concatenable(self) -> tuple[str, int]:
        return (f"(?:{self.text})", self.depth + 1) if self.kind == "alt" else (self.text, self.depth)

    def star(self) -> "_Re":
        if self.kind == "eps":
            return self
        text, depth = self._quantifiable()
        return _Re("quant", text + "*", depth)

    def opt(self) -> "_Re":
        if self.kind == "eps" or self.text.endswith("*") and self.kind == "quant":
            return self
        text, depth = self._quantifiable()
        return _Re("quant", text + "?", depth)

    def cat(self, other: "_Re") -> "_Re":
        if self.kind == "eps":
            return other
        if other.kind == "eps":
            return self
        (a, da), (b, db) = self._concatenable(), other._concatenable()
        return _Re("cat", a + b, max(da, db))

    def alt(self, other: "_Re") -> "_Re":
        if self.text == other.text and self.kind == other.kind:
            return self
        if self.kind == "eps":
            return other.opt()
        if other.kind == "eps":
            return self.opt()
        return _Re("alt", self.text + "|" + other.text, max(self.depth, other.depth))


_EPS = _Re("eps", "")


def _char_text(code: int) -> str:
    ch = chr(code)
    return ch if ch.isascii() and ch.isalnum() else f"\\u{code:04x}"


def _class_text(ranges: tuple) -> str:
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return _char_text(ranges[0][0])
    parts = [_char_text(lo) if lo == hi else f"{_char_text(lo)}-{_char_text(hi)}" for lo, hi in ranges]
    return "[" + "".join(parts) + "]"
