"""Exact regexes for JSON Schema leaves that outlines-core would not enforce exactly.

Each function returns Rust-regex text for the *inside* of a JSON value (string contents without
the quotes, or a number) whose language is a subset of what the schema allows, so every output
validates. Unsupported input raises GrammarError.

- `string_pattern_regex`: a JSON Schema `pattern` (ECMA/Python syntax, unanchored search) turned
  into a fullmatch regex over raw JSON string contents: no `"`, `\\` or control characters are
  ever generated (the raw text then equals the decoded string), `^`/`$` at the ends are dropped
  (fullmatch implies the anchored search; so are those at the ends of top-level alternatives),
  shorthand classes (`\\d \\w \\s \\D \\W \\S`) are narrowed to printable ASCII (Python's and
  Rust's Unicode tables differ), and constructs whose meaning differs between the two engines
  (backreferences, inline flags) are refused; lookaheads of a few common shapes are rewritten
  (`regex.lookahead`), other lookarounds, word boundaries and anchors inside the pattern written
  out through an automaton (`regex.lookaround`); Unicode
  properties (`\\p{L}`) are narrowed to ASCII like the shorthands (`regex.properties`). Escapes
  and character classes are translated in `regex.classes`.

String formats are in `regex.formats`, numbers between bounds in `regex.number_ranges`.
"""

from __future__ import annotations

import json
import re

from radixgen.grammar.matcher import GrammarError
from radixgen.grammar.regex.classes import (
    ANY_SAFE,
    char_class,
    escape_piece,
    without_optional_controls,
)
from radixgen.grammar.regex.lengths import (
    LENGTH_REFUSAL,
    alternatives_of,
    both_lengths,
    fit_lengths,
)
from radixgen.grammar.regex.lookahead import (
    leading_excluded_prefixes,
    leading_not_only,
    length_lookahead,
    not_blank_written_out,
    not_only_written_out,
    without_prefixes,
)
from radixgen.grammar.regex.lookaround import (
    LookaroundError,
    lookarounds_written_out,
    needs_writing_out,
)
from radixgen.grammar.regex.properties import (
    pattern_tokens,
    python_compiled,
    python_view,
    without_single_negations,
)


def escape_literal(text: str) -> str:
    """`text` as a regex matching itself (Rust accepts escaping every char escaped here)."""
    return "".join("\\" + ch if ch in ".^$*+?()[]{}|\\-&~#" else ch for ch in text)


def json_literal(value) -> str:
    """A regex matching exactly `value`'s compact JSON text."""
    return escape_literal(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def increasing_subsequence_regex(items: list[str], separator: str, nonempty: bool) -> str:
    """Regex for items[i1] sep items[i2] sep ... with i1 < i2 < ...: every item at most once, in
    the given order (how `uniqueItems` over a finite set is generated). One alternative per last
    item: O(n^2) text, an automaton of O(n) states."""
    alternatives = [
        "".join(f"(?:{item}{separator})?" for item in items[:k]) + items[k]
        for k in range(len(items))
    ]
    body = "(?:" + "|".join(alternatives) + ")"
    return body if nonempty else f"{body}?"


# ---------------------------------------------------------------- string patterns


def string_pattern_regex(
    pattern: str,
    path: str,
    min_length: int = 0,
    max_length: int | None = None,
    keyword: str = "pattern",
    name: str | None = None,
    open_from: int | None = None,
) -> str:
    """Translate a JSON Schema `pattern` into a safe fullmatch regex over raw string contents,
    whose strings are `min_length`..`max_length` characters long (see `regex.lengths.fit_length`). A format's
    regex goes through here too when the format has length bounds (keyword "format", name: the
    format's name, for error messages). With `open_from` (default: max_length + 1), a repeat `{a,b}`
    with b >= open_from becomes `{a,}`: for strings of at most open_from characters the same
    strings (no repeat counts past the string's length), which fit_length then bounds, or a
    string length guard does, in one automaton state per piece. A pattern with lookarounds or
    anchors inside that the rewrites here do not take is written out without them through an
    automaton first (`regex.lookaround`)."""
    try:
        return _fitted_pattern_regex(
            pattern, path, min_length, max_length, keyword, name, open_from
        )
    except GrammarError as exc:
        if not (
            _WRITTEN_OUT_REFUSAL.search(str(exc))
            and (needs_writing_out(pattern) or "anchor" in str(exc))
        ):
            raise
        try:
            written, least, most = _written_out(pattern)
        except LookaroundError as why:
            raise GrammarError(f"{exc} (nor can it be written out without them: {why})") from None
        lengths = both_lengths(min_length, max_length, least, most)
        return _fitted_written_out(
            pattern, written, lengths, path, keyword, name or pattern, open_from
        )


def _written_out(pattern: str) -> tuple[str, int, int | None]:
    return lookarounds_written_out(
        pattern, python_view(without_single_negations(_python_group_names(pattern)))
    )


def _fitted_written_out(
    pattern: str,
    written: str,
    lengths: tuple,
    path: str,
    keyword: str,
    name: str,
    open_from: int | None,
) -> str:
    """_fitted_pattern_regex of `written`, `pattern` written out; where its repeats cannot be
    counted to fit a maxLength up to _WRITTEN_LENGTH_MAX (`\\b([0-9]|[0-9][0-9])\\b` under
    maxLength 2), `pattern` written out again with the lengths in the automaton too, as a
    lookahead over the whole string."""
    least, most = lengths
    try:
        return _fitted_pattern_regex(written, path, least, most, keyword, name, open_from)
    except GrammarError as fitting:
        if not (
            LENGTH_REFUSAL.search(str(fitting)) and most is not None and most <= _WRITTEN_LENGTH_MAX
        ):
            raise
        try:
            written, *bounds = _written_out(
                f"(?=^[\\s\\S]{{{least},{most}}}$)[\\s\\S]*?(?:{pattern})"
            )
        except LookaroundError:
            raise fitting from None
    return _fitted_pattern_regex(
        written, path, *both_lengths(least, most, *bounds), keyword, name, open_from
    )


_WRITTEN_LENGTH_MAX = 64  # (the automaton of a length lookahead has a state per length)


# refusals `lookarounds_written_out` may lift
_WRITTEN_OUT_REFUSAL = re.compile(
    "lookaround and inline flags|negative lookahead is supported only|anchor '.' inside"
    r"|escape \\[bB] is not supported"
)


def _fitted_pattern_regex(
    pattern: str,
    path: str,
    min_length: int,
    max_length: int | None,
    keyword: str,
    name: str | None,
    open_from: int | None,
) -> str:
    """string_pattern_regex without the automaton: the whole pattern, else (under lengths) its
    top-level alternatives one by one."""
    try:
        return _pattern_regex(pattern, path, min_length, max_length, keyword, name, open_from)
    except GrammarError as exc:
        alternatives = alternatives_of(pattern) if min_length or max_length is not None else []
        if len(alternatives) < 2 or not LENGTH_REFUSAL.search(str(exc)):
            raise
        # `^$|^[a-z](?:-?[a-z0-9]){0,62}$` under minLength 1: each alternative fitted on its own,
        # those that cannot fit left out (the union of subsets of the alternatives: a subset)
        kept = []
        for alternative in alternatives:
            try:
                kept.append(
                    _pattern_regex(
                        alternative, path, min_length, max_length, keyword, name, open_from
                    )
                )
            except GrammarError:
                continue
        if not kept:
            raise
        return "(?:" + "|".join(kept) + ")"


def _pattern_regex(
    pattern: str,
    path: str,
    min_length: int,
    max_length: int | None,
    keyword: str,
    name: str | None,
    open_from: int | None,
) -> str:
    """string_pattern_regex of the whole pattern at once."""

    def refuse(why: str) -> GrammarError:
        return GrammarError(f"unsupported {keyword} {name or pattern!r} at {path}.{keyword}: {why}")

    body = without_single_negations(_python_group_names(pattern))
    flags = _ANCHOR_THEN_FLAGS.match(body)
    if flags:  # `^(?s).+$`: Java's reading, the flags first (where Python wants them)
        body = body[1 : flags.end()] + "^" + body[flags.end() :]
    try:
        python_compiled(body)
    except re.error as exc:
        raise refuse(f"not a valid regular expression ({exc})") from None
    except RecursionError:
        raise refuse("its groups nest too deeply") from None
    body = without_optional_controls(body[len(_NO_OP_FLAGS.match(body)[0]) :])
    if body.startswith("^"):
        body = body[1:]
    end_anchored = body.endswith("$") and not _escaped_at(body, len(body) - 1)
    if end_anchored:
        body = body[:-1]
    bounded = length_lookahead(body)  # `(?=^.{m,n}$)X` and `(?=^X$).{m,n}`: X, m..n characters long
    if bounded is not None:
        body, least, most = bounded
        min_length, max_length = both_lengths(min_length, max_length, least, most)
    not_only, body = leading_not_only(body)  # `(?!^[0-9]+$)[a-z0-9-]+`: D, and the class repeated
    excluded, body = leading_excluded_prefixes(not_blank_written_out(body))
    if excluded and not body and not end_anchored:  # `^(?!aws:.*)`: a search, so any continuation
        body = ".*"
    if (
        open_from is None and max_length is not None
    ):  # a repeat past maxLength counts as open: fit_length
        open_from = max_length + 1  # bounds it (`[a-z]{2,64}` under maxLength 33)
    out, unbounded, bounded, i = [], [], [], 0
    edges = _edge_anchors(body, end_anchored)
    while i < len(body):
        if (
            i in edges
        ):  # an anchor that can only match at an end of the string: fullmatch implies it
            i += 1
            continue
        if body[i] == "+" and out and _is_quantifier(out[-1]):
            # after a quantifier (a literal brace is "\\}" here): Python 3.11's possessive form
            raise refuse("possessive quantifiers are not supported")
        counted = _QUANTIFIER.match(body, i) if open_from is not None else None
        if (
            counted and counted[1] and counted[1][1:] and int(counted[1][1:]) >= open_from
        ):  # {a,b} as {a,}
            least = int(body[i + 1 : counted.start(1)])
            unbounded.append((len(out), i, counted.end(), least))
            out.append(f"{{{least},}}")
            i = counted.end()
            continue
        quantifier = _UNBOUNDED.match(body, i)
        if quantifier:  # the scan consumes escapes and classes whole: this is a real quantifier
            least = 1 if quantifier[0] == "+" else int(quantifier[1] or 0)
            unbounded.append((len(out), quantifier.start(), quantifier.end(), least))
            out.append(quantifier[0])
            i = quantifier.end()
            continue
        ranged = _RANGED.match(body, i)
        optional = body[i] == "?" and out and not _is_quantifier(out[-1])  # not a lazy `*?`
        if optional or (ranged and int(ranged[1]) < int(ranged[2])):  # fit_length may narrow it
            least, most, end = (
                (0, 1, i + 1) if optional else (int(ranged[1]), int(ranged[2]), ranged.end())
            )
            bounded.append((len(out), i, end, least, most))
            out.append(body[i:end])
            i = end
            continue
        piece, i = _pattern_piece(body, i, refuse)
        out.append(piece)
    if min_length or max_length is not None:
        body = fit_lengths(
            body,
            out,
            unbounded,
            bounded,
            min_length,
            max_length,
            refuse,
            open_end=not (end_anchored or excluded),
        )
    if excluded:
        return without_prefixes(body, out, excluded, refuse)
    if not_only:
        excluded_text = (
            escape_piece(not_only, 0, refuse, in_class=False)
            if not_only.startswith("\\")
            else char_class(not_only, 0, refuse)
        )[0]
        return not_only_written_out(body, out, not_only, excluded_text, refuse)
    return "(?:" + "".join(out) + ")"


def _is_quantifier(piece: str) -> bool:
    """Whether a translated piece is a quantifier (a literal brace is "\\}" here)."""
    return piece in ("*", "+", "?", "}") or piece.startswith("{")


def _edge_anchors(body: str, end_anchored: bool = False) -> set[int]:
    """Positions of the anchors that can only match at an end of the string, which fullmatch
    implies: a `^` with nothing consumed before it on its path (only group openings, and bars of
    alternatives of groups opened at the start: `(^a|^b)`, `^(^arn:...)`), a `$` followed only
    by group closings up to the end or a top-level `|` (`(^[a-z]$)|(^x$)`), and in a pattern
    anchored at its end (`end_anchored`: its final `$` taken off) also one that ends an
    alternative of groups that end the pattern (CloudFormation's `^(^$|arn:...{0,1023})$`). A
    `^` in a group that is quantified is not one (a second repetition would not be at the start)."""
    tokens = [(i, text) for i, text, in_class in pattern_tokens(body) if not in_class]
    edges: set[int] = set()
    at_start, groups, k = True, [], 0  # groups: per open group, (at_start when opened, its ^s)
    while k < len(tokens):
        i, text = tokens[k]
        if text == "^" and at_start:
            edges.add(i)
            for _, anchors in groups:
                anchors.append(i)
        elif text == "$":
            if _nothing_after(tokens, k, len(groups), end_anchored):
                edges.add(i)
        elif text == "(":
            groups.append((at_start, []))
            while (
                k + 1 < len(tokens)
                and body.startswith("(?", i)
                and tokens[k + 1][1] not in (":", ">")
            ):
                k += 1  # the group's "?P<name>" / "?:" prefix consumes nothing
            k += body.startswith("(?", i)
        elif text == "|":
            at_start = groups[-1][0] if groups else True
        elif text == ")" and groups:
            _, anchors = groups.pop()
            if k + 1 < len(tokens) and tokens[k + 1][1][0] in "*+?{":
                edges.difference_update(anchors)
            at_start = False
        else:
            at_start = False
        k += 1
    return edges


def _nothing_after(tokens: list, k: int, depth: int, end_anchored: bool) -> bool:
    """Whether token k (inside `depth` groups) is followed only by group closings up to the end
    or a top-level bar; with `end_anchored`, a bar of an inner group also passes, to that group's
    closing (the rest of its alternatives is skipped)."""
    j = k + 1
    while j < len(tokens):
        text = tokens[j][1]
        if text == ")":
            depth, j = depth - 1, j + 1
        elif text == "|" and depth == 0:
            return True
        elif text == "|" and end_anchored:
            level = 0  # to the ")" closing the group this bar belongs to
            while j < len(tokens) and level >= 0:
                j += 1
                if j < len(tokens):
                    level += (tokens[j][1] == "(") - (tokens[j][1] == ")")
            if j >= len(tokens):
                return False
        else:
            return False
    return True


_QUANTIFIER = re.compile(r"\{[0-9]+(,[0-9]*)?\}")
_UNBOUNDED = re.compile(r"[*+]|\{([0-9]+),\}")
_RANGED = re.compile(r"\{([0-9]+),([0-9]+)\}")


def _literal_brace(body: str, i: int) -> bool:
    """Whether the brace at i is a literal: no quantifier ({n}, {n,} or {n,m}) starts or ends there."""
    if body[i] == "{":
        return not _QUANTIFIER.match(body, i)
    j = body.rfind("{", 0, i)
    return j < 0 or not _QUANTIFIER.fullmatch(body, j, i + 1)


def _python_group_names(pattern: str) -> str:
    """`pattern` with ECMA-262's named groups `(?<name>...)` in Python's `(?P<name>...)` form."""
    out, skip = [], 0
    for i, text, in_class in pattern_tokens(pattern):
        if skip:
            skip -= 1
        elif (
            not in_class
            and pattern.startswith("(?<", i)
            and pattern[i + 3 : i + 4] not in ("=", "!", "")
        ):
            out.append("(?P<")
            skip = 2
        else:
            out.append(text)
    return "".join(out)


# Python's global flags at the start that change nothing on the strings generated here: `s` (a
# "." takes "\n" too; "." is translated to characters JSON need not escape, never "\n"), `m`
# (^ and $ at line ends: the strings hold no line break), `u` (the default). ECMA-262 has no
# global inline flags: it cannot compile such a pattern, so Python's reading is the one left.
_NO_OP_FLAGS = re.compile(r"(?:\(\?[smu]+\))*")
_ANCHOR_THEN_FLAGS = re.compile(r"\^(?:\(\?[smu]+\))+")  # the same flags right after a leading ^


def _escaped_at(text: str, pos: int) -> bool:
    backslashes = len(text[:pos]) - len(text[:pos].rstrip("\\"))
    return backslashes % 2 == 1


def _pattern_piece(body: str, i: int, refuse) -> tuple[str, int]:
    """One translated token of `body` starting at i, and the index after it."""
    c = body[i]
    if c == "\\":
        return escape_piece(body, i, refuse, in_class=False)
    if c == "[":
        return char_class(body, i, refuse)
    if c == ".":
        return ANY_SAFE, i + 1
    if c in "^$":
        raise refuse(f"anchor {c!r} inside the pattern")
    if c == "(" and body.startswith("(?", i):
        if body.startswith("(?:", i):
            return "(?:", i + 3
        if body.startswith("(?P<", i):  # a named group (names could clash in the whole regex)
            return "(?:", body.index(">", i) + 1
        raise refuse("lookaround and inline flags are not supported")
    if c == "{" and body.startswith("{,", i):
        raise refuse("'{,n}' quantifiers are not supported")
    if c in "{}" and _literal_brace(body, i):
        return (
            "\\" + c,
            i + 1,
        )  # a literal brace (ECMA and Python), which Rust's regex wants escaped
    if c == '"' or ord(c) < 0x20:
        raise refuse("it matches characters that JSON strings must escape")
    return c, i + 1
