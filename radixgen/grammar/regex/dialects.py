"""Patterns written for other engines than ECMA-262, in the syntax the translation reads.

- Python's string anchors `\\A` and `\\Z` (CloudFormation's `\\A[0-9a-zA-Z-_]+\\Z`) are `^` and
  `$` (`caret_dollar`): Python validators (jsonschema) search with `re`, where they match at the
  string's ends only, as `^` does and `$` does at the end of the strings generated (nothing
  follows it). (ECMA-262 with the u flag refuses `\\A`; without it, `\\A` is a letter A.)
- Java and PCRE take `(?i)` anywhere, turning case-insensitive matching on until the end of the
  enclosing group (CloudFormation's `^(?!(?i)aws)[A-Za-z0-9]{2,64}$`); Python takes it only at the
  very start, and the scoped `(?i:...)` anywhere; ECMA-262 takes neither. `case_spelt` writes
  each letter of such a part as a class of its cases (`a` -> `[aA]`) and adds to each class the
  other case of its letters (`[a-f]` -> `[a-fA-F]`), which is Java's (ASCII) reading. Python's
  Unicode reading also folds `ſ` into s, the Kelvin sign into k, `İ` and `ı` into i, and the
  `regex` module (version 0) applies an inline flag anywhere to the whole pattern: where a wider
  set excludes more (a letter or class inside a negative lookaround, a negated class outside
  one) it takes every case and fold, inside the flag's part or not, so what is generated is
  valid under each of these readings. Patterns with
  other inline flags, or with escapes whose case the spelling would have to know (`\\p{Lower}`,
  `\\x41`) inside such a part, are left as written (and refused as before).
"""

from __future__ import annotations

import functools
import re

from radixgen.grammar.regex.properties import pattern_tokens

# what Python's re with IGNORECASE matches beyond a letter's two ASCII cases
_UNICODE_FOLDS = {"i": "\u0130\u0131", "k": "\u212a", "s": "\u017f"}
_SCOPED = re.compile(
    r"\(\?i(\)|:)"
)  # `(?i)` (to the end of the group) or `(?i:` (a group of its own)
_GROUP_SYNTAX = re.compile(
    r"\(\?(?:P?<[A-Za-z_]\w*>|<?[=!]|:)"
)  # (?:, (?=, (?!, (?<=, (?<!, named groups
_NEGATIVE = re.compile(r"\(\?<?!")
_CASED_ESCAPE = re.compile(
    r"\\[pPxuUcNk0-9]"
)  # escapes of letters or of sets the spelling would have to know
_STRING_ANCHORS = {"\\A": "^", "\\Z": "$"}


class _Unspellable(Exception):
    pass


@functools.lru_cache(maxsize=4096)
def neutral(pattern: str) -> str:
    """`pattern` with its string anchors and case-insensitive parts spelt as above (memoized:
    a pattern is read so at each of its uses: translated, searched, its values checked)."""
    return case_spelt(caret_dollar(pattern))


def caret_dollar(pattern: str) -> str:
    """`pattern` with Python's `\\A` and `\\Z` outside classes spelt `^` and `$`."""
    return "".join(
        _STRING_ANCHORS.get(text, text) if not in_class else text
        for _, text, in_class in pattern_tokens(pattern)
    )


def case_spelt(pattern: str) -> str:
    """`pattern` with its `(?i)` and `(?i:...)` parts spelt as classes of both cases; the
    pattern itself where it has none, or where they cannot be spelt."""
    if not _SCOPED.search(pattern):
        return pattern
    try:
        return _spelt(pattern)
    except _Unspellable:
        return pattern


def _spelt(pattern: str) -> str:
    tokens = list(pattern_tokens(pattern))
    out: list[str] = []
    frames = [
        [False, False]
    ]  # per open group: [case-insensitive, inside an odd number of negative lookarounds]
    k = 0
    while k < len(tokens):
        i, text, _ = tokens[k]
        insensitive, negative = frames[-1]
        if text == "(" and pattern.startswith("(?", i):
            scoped = _SCOPED.match(pattern, i)
            syntax = scoped or _GROUP_SYNTAX.match(pattern, i)
            if syntax is None:
                raise _Unspellable  # another inline flag
            k = _skip_to(tokens, syntax.end(), k)
            if scoped and scoped[1] == ")":
                frames[-1][0] = True  # to the end of the enclosing group
                continue
            frames.append(
                [insensitive or bool(scoped), negative != bool(_NEGATIVE.match(pattern, i))]
            )
            out.append("(?:" if scoped else syntax[0])
            continue
        if text == "(":
            frames.append([insensitive, negative])
        elif text == ")" and len(frames) > 1:
            frames.pop()
        elif text.startswith("["):
            end = _class_end(tokens, k)
            members = [t for _, t, _ in tokens[k + 1 : end]]
            out.append(_class_spelt(text, members, insensitive, negative))
            k = end + 1
            continue
        elif (insensitive or negative) and _CASED_ESCAPE.match(text):
            raise _Unspellable
        elif (insensitive or negative) and _is_letter(text):
            text = f"[{_cases(text, wide=negative)}]"
        elif negative and _other_cased(text):
            raise _Unspellable  # (Python folds `é` into `É` too: a negation would miss it)
        out.append(text)
        k += 1
    return "".join(out)


def _skip_to(tokens: list, end: int, k: int) -> int:
    while k < len(tokens) and tokens[k][0] < end:
        k += 1
    return k


def _class_end(tokens: list, k: int) -> int:
    """The index of the "]" closing the class that tokens[k] opens."""
    k += 1
    while k < len(tokens) and not (tokens[k][1] == "]" and tokens[k][2]):
        k += 1
    if k == len(tokens):
        raise _Unspellable  # (an unclosed class: re refuses it later)
    return k


def _class_spelt(opening: str, members: list[str], insensitive: bool, negative: bool) -> str:
    """A class with the other case of each of its letters added where it is case-insensitive,
    and with Python's Unicode folds too where the wider set is the safer one (a class inside a
    negative lookaround, or outside one a negated class), case-insensitive or not; else as
    written."""
    negated = opening == "[^]" or opening == "[" and members[:1] == ["^"]
    listed = members[1:] if opening == "[" and negated else members
    wide = negative != negated
    if not (insensitive or wide):
        return opening + "".join(members) + "]"
    if any(_CASED_ESCAPE.match(m) for m in listed):
        raise _Unspellable
    added: list[str] = []
    n = 0
    while n < len(listed):
        if n + 2 < len(listed) and listed[n + 1] == "-":  # a range
            low, high = listed[n], listed[n + 2]
            if len(low) != 1 or len(high) != 1:
                raise _Unspellable  # (an escape at an end: its letters are not known here)
            span = [chr(c) for c in range(ord(low), ord(high) + 1)]
            n += 3
        else:
            span = [listed[n]]
            n += 1
        if wide and any(_other_cased(c) for c in span):
            raise _Unspellable  # (a non-ASCII letter's other cases are not added)
        letters = [c for c in span if _is_letter(c)]
        added += [c for letter in letters for c in _cases(letter, wide) if c != letter]
    return opening + "".join(members) + "".join(dict.fromkeys(added)) + "]"


def _is_letter(text: str) -> bool:
    return len(text) == 1 and text.isascii() and text.isalpha()


def _other_cased(text: str) -> bool:
    """A non-ASCII character with another case (`é`, `Ω`)."""
    return len(text) == 1 and not text.isascii() and text.lower() != text.upper()


def _cases(letter: str, wide: bool) -> str:
    folds = _UNICODE_FOLDS.get(letter.lower(), "") if wide else ""
    return letter.lower() + letter.upper() + folds
