"""The item values `UniqueGuard` (unique.guard) can keep unique: their regexes, spelt one way so
that two items are equal exactly when their texts are; whether they can always grow (then a ban
never dead-ends); and, for items that can run out of values, how many values each prefix can
still become (`ItemCounts`) and which prefixes earlier items have exhausted."""

from __future__ import annotations

import functools

from radixgen.grammar.automata.probe import default_probe

CANONICAL_INTEGER = "(?:0|-?[1-9][0-9]*)"
_CANONICAL_CHAR = r'(?:[^"\\\x00-\x1F\x7F-\x9F]|\\["\\bfnrt])'


def canonical_string_regex(min_length: int = 0) -> str:
    """A JSON string of at least `min_length` characters, each value spelt one way."""
    return f'"{_CANONICAL_CHAR}{{{min_length},}}"' if min_length else f'"{_CANONICAL_CHAR}*"'


# unique strings with a maxLength: printable ASCII but '"' and '\\' (a subset: every text is its
# value's only spelling, and the automaton stays one state per character)
BOUNDED_ITEM_MAX = (
    256  # longer bounds are narrowed to this (a subset; the automaton has a state per character)
)


def bounded_string_regex(min_length: int, max_length: int) -> str:
    """A JSON string of `min_length`..`max_length` printable ASCII characters, no escapes."""
    return f'"[ !#-\\[\\]-~]{{{min_length},{max_length}}}"'


def grows_wherever_it_closes(item_regex: str) -> bool:
    """Whether a string item regex (quotes included) can take another character wherever it can
    close: then banning an earlier item's closing quote never leaves a dead end, and the items
    are infinitely many (patterns like `^[a-z0-9-]+$`; not `^[a-z]{2}$` or a date)."""
    _, finals, moves, live = _byte_automaton(item_regex)
    quote = ord('"')
    return all(
        any(b != quote and nxt in live for b, nxt in out.items())
        for out in moves.values()
        if out.get(quote) in finals
    )


def integer_grows(item_regex: str) -> bool:
    """Whether an integer item regex spells each value one way (digits after an optional minus,
    no leading zero, no -0) and can take another digit wherever it can end, but after a lone 0
    (UniqueGuard bans a second 0 up front): then a ban never leaves a dead end. Integers from a
    bound >= 0 up (`minimum: 1`, pydantic's PositiveInt); not `minimum: -5`, whose -5 cannot grow."""
    # followed by a comma, as in the array (alone, leftmost-first alternation would stop the
    # automaton at the first alternative's end: "[1-9]|[1-9][0-9]+" would take one digit)
    start, _, moves, live = _byte_automaton(f"(?:{item_regex}),")
    comma, digits = ord(","), set(b"0123456789")
    finals = {state for state, out in moves.items() if comma in out}
    if any(set(out) - digits - {ord("-"), comma} for out in moves.values()):
        return False
    after_minus = moves.get(start, {}).get(ord("-"))
    zero = moves.get(start, {}).get(ord("0"))
    if (zero is not None and set(moves.get(zero, {})) - {comma}) or ord("0") in moves.get(
        after_minus, {}
    ):
        return False  # a leading zero, or -0
    if sum(nxt == zero for out in moves.values() for nxt in out.values()) > 1:
        zero = None  # another item ends where 0 does (e.g. -5 with `minimum: -5`): it must grow too
    return all(
        any(b in digits and nxt in live for b, nxt in moves.get(state, {}).items())
        for state in finals
        if state != zero
    )


def length_guard_start(item_regex: str, limit: int) -> int | None:
    """For a string item regex (quotes included) that takes strings of any length: the fewest
    characters F <= `limit` past which every state of its automaton can both close the string
    and take another character, else None. Then the guard's length bounds beside the unbounded
    regex never dead-end for a maxLength >= F: at maxLength the string can close, short of
    minLength it can grow (`^[a-z0-9_]+$`: F = 1; not `^(ab)+$`, whose "a" cannot close)."""
    start, finals, moves, live = _byte_automaton(item_regex)
    quote = ord('"')

    def closes_and_grows(state) -> bool:
        out = moves.get(state, {})
        return out.get(quote) in finals and any(
            b != quote and nxt in live for b, nxt in out.items()
        )

    successors: dict = {}  # state -> the live states one character after it (computed once)

    def after(state) -> set:
        if state not in successors:
            successors[state] = _char_steps(moves, live, {state})
        return successors[state]

    level = _char_steps(moves, live, {start}, opening=True)
    for first in range(limit + 1):
        region, todo = set(level), list(level)
        while todo:
            for nxt in after(todo.pop()):
                if nxt not in region:
                    region.add(nxt)
                    todo.append(nxt)
        if not region:
            return None
        if all(closes_and_grows(state) for state in region):
            return first
        level = set().union(*map(after, level))
    return None


def _char_steps(moves: dict, live: set, states: set, opening: bool = False) -> set:
    """The live states one character of string content after `states` (at character
    boundaries), or, with `opening`, one opening quote after. A JSON escape is one character,
    as the guard counts it."""
    out = set()
    for state in states:
        for b, nxt in moves.get(state, {}).items():
            if (b == ord('"')) != opening or nxt not in live:
                continue
            tail = 0 if b < 0x80 and b != 0x5C else 1 if b < 0xE0 else 2 if b < 0xF0 else 3
            frontier = {nxt}
            for _ in range(tail):
                frontier = {
                    n
                    for s in frontier
                    for c, n in moves.get(s, {}).items()
                    if n in live and (b == 0x5C or 0x80 <= c < 0xC0)
                }
            out |= frontier
    return out


@functools.lru_cache(maxsize=256)
def _byte_automaton(regex: str) -> tuple:
    """(start, final states, byte moves per state, states from which a final one is reachable);
    cached (read only): a pattern item is checked by grows_wherever_it_closes, then counted."""
    start, finals, moves = default_probe().automaton(regex)
    before: dict = {}  # state -> the states with a move into it
    for state, out in moves.items():
        for nxt in set(out.values()):
            before.setdefault(nxt, set()).add(state)
    live, todo = set(finals), list(finals)
    while todo:
        for state in before.get(todo.pop(), ()):
            if state not in live:
                live.add(state)
                todo.append(state)
    return start, finals, moves, live


class ItemCounts:
    """The byte automaton of a string item regex (quotes included, each value spelt one way),
    with how many item texts each state can still complete (None: infinitely many): the
    guard's measure of what an item can still become."""

    def __init__(self, item_regex: str) -> None:
        start, finals, moves, live = _byte_automaton(item_regex)
        self.moves = moves
        self.opened = moves[start][ord('"')]  # after the opening quote
        self.counts = _path_counts(finals, moves, live)
        self.total = self.counts.get(self.opened)  # the values there are (None: infinitely many)

    def completions(self, text: bytes) -> int | None:
        """How many item texts start with `text` (the bytes after the opening quote)."""
        return self.along(text)[-1]

    def along(self, text: bytes) -> list:
        """`completions` of each prefix of `text`, from the empty one to `text` itself."""
        state, out = self.opened, [self.counts.get(self.opened, 0)]
        for c in text:
            state = self.moves.get(state, {}).get(c)
            if state is None:
                return out + [0] * (len(text) + 1 - len(out))
            out.append(self.counts.get(state, 0))
        return out


@functools.lru_cache(maxsize=256)
def item_counts(item_regex: str) -> ItemCounts:
    return ItemCounts(item_regex)


def fullmatches(regex: str, data: bytes) -> bool:
    """Whether the Rust-syntax `regex` (outlines-core's engine) matches all of `data`."""
    start, finals, moves, _ = _byte_automaton(regex)
    state = start
    for c in data:
        state = moves.get(state, {}).get(c)
        if state is None:
            return False
    return state in finals


def _path_counts(finals: set, moves: dict, live: set) -> dict:
    """Per live state, the number of byte paths from it to a final state, None where a cycle
    makes them infinitely many (successors counted before their states: Kahn's order)."""
    succ = {s: [n for n in moves.get(s, {}).values() if n in live] for s in live}
    preds: dict = {}
    pending = {s: len(out) for s, out in succ.items()}
    for s, out in succ.items():
        for n in out:
            preds.setdefault(n, []).append(s)
    ready = [s for s, n in pending.items() if n == 0]
    counts: dict = {}
    while ready:
        s = ready.pop()
        counts[s] = int(s in finals) + sum(counts[n] for n in succ[s])
        for p in preds.get(s, ()):
            pending[p] -= 1
            if pending[p] == 0:
                ready.append(p)
    return {s: counts.get(s) for s in live}


def exhausted_prefixes(items, counts: ItemCounts) -> set:
    """The prefixes (texts so far) of a string item every one of whose completions is one of
    `items`: such an item could neither close nor grow into a new value (at maxLength, one
    equal to an earlier item; with enough items, shorter prefixes all of whose extensions are
    taken). A prefix's completions are at least its extension's, so each item's prefixes are
    counted from the longest while they have no more completions than there are items."""
    seen: dict[bytes, list] = {}  # prefix -> [its completions, items that start with it]
    for item in items:
        along = counts.along(item)
        for length in range(len(item), -1, -1):
            left = along[length]
            if left is None or left > len(items):
                break
            seen.setdefault(item[:length], [left, 0])[1] += 1
    return {prefix for prefix, (left, n) in seen.items() if n >= left}


def is_exhausted(text: bytes, items, counts: ItemCounts) -> bool:
    """Whether prefix `text` is one of `exhausted_prefixes(items, counts)`."""
    left = counts.completions(text)
    return (
        left is not None
        and left <= len(items)
        and sum(item.startswith(text) for item in items) >= left
    )
