"""The JSON walk of `unique.guard.UniqueGuard`: its state (described there) after each byte of the
output (`advance`), and where in the JSON a state is (`guarded_item`, `keyed_bounded`). A mixin:
the methods use the guard's `prefix` and its guarded paths (`paths`, `lengths`, `counts`)."""

from __future__ import annotations

from radixgen.grammar.unique.tables import LITERAL

_STRUCTURE = frozenset(b'{}[],"') | LITERAL
OBJECT, ARRAY = 0, 1
# container phases: expecting a key (object) or an item (array), after a key, after a value
_EXPECT, _VALUE, _AFTER = 0, 1, 2
INACTIVE = "inactive"  # the text left the guarded JSON (after it, or a prefix mismatch)


class JsonWalk:
    @property
    def initial(self):
        return (0, (), None, 0)

    def advance(self, state, data: bytes, seen):
        """(state after `data`, the (instance, text) items it closed), or None when `data`
        closes a guarded item equal to an earlier one (in `seen` or earlier in `data`)."""
        closed: list = []
        for c in data:
            if state is INACTIVE:
                break
            state = self._step(state, c, seen, closed)
            if state is None:
                return None
        return state, closed

    def _step(self, state, c: int, seen, closed: list):
        done, stack, lexeme, arrays = state
        if done < len(self.prefix):
            return (done + 1, stack, lexeme, arrays) if c == self.prefix[done] else INACTIVE
        if lexeme is not None:
            kind, text = lexeme
            if kind == "s":
                return self._length_step(state, c)
            if kind in "ln":
                if c in LITERAL:
                    return (
                        state if kind == "l" else (done, stack, (kind, text + bytes((c,))), arrays)
                    )
                if kind == "n":
                    instance = guarded_item(stack)[0]
                    if text in seen.get(instance, ()) or (instance, text) in closed:
                        return None
                    closed.append((instance, text))
                state = _after_value(done, stack, arrays)
                if state is INACTIVE:
                    return state
                done, stack, lexeme, arrays = state
            elif c != ord('"') or (text.endswith(b"\\") and not escaped_backslash(text)):
                if kind == "v":  # only an escape still pending is kept
                    text = b"\\" if c == ord("\\") and text != b"\\" else b""
                    return (done, stack, (kind, text), arrays)
                return (done, stack, (kind, text + bytes((c,))), arrays)
            elif kind == "k":
                return (done, stack[:-1] + ((OBJECT, _VALUE, text),), None, arrays)
            elif kind == "g":
                instance = guarded_item(stack)[0]
                if text in seen.get(instance, ()) or (instance, text) in closed:
                    return None
                closed.append((instance, text))
                return _after_value(done, stack, arrays)
            else:
                return _after_value(done, stack, arrays)
        if c not in _STRUCTURE:  # whitespace (a custom whitespace regex may allow more than JSON's)
            return state
        top = stack[-1] if stack else None
        if c == ord(","):
            if top[0] == OBJECT:
                return (done, stack[:-1] + ((OBJECT, _EXPECT, None),), None, arrays)
            counted = top[3]
            if counted is not None:  # (separators so far, maxItems)
                if counted[0] + 1 >= counted[1]:
                    return None
                counted = (counted[0] + 1, counted[1])
            return (done, stack[:-1] + ((ARRAY, _EXPECT, top[2], counted),), None, arrays)
        if c in b"}]":
            return _after_value(done, stack[:-1], arrays)
        if c == ord("{"):
            return (done, stack + ((OBJECT, _EXPECT, None),), None, arrays)
        if c == ord("["):
            kind = _at(self.paths, stack)  # the item kind of a unique array here
            most = _at(self.counts, stack)  # the maxItems kept here
            counted = None if most is None else (0, most)
            if kind is not None:
                return (
                    done,
                    stack + ((ARRAY, _EXPECT, (arrays, kind), counted),),
                    None,
                    arrays + 1,
                )
            return (done, stack + ((ARRAY, _EXPECT, None, counted),), None, arrays)
        if c == ord('"'):
            if top is not None and top[0] == OBJECT and top[1] == _EXPECT:
                return (done, stack, ("k", b""), arrays)
            if guarded_item(stack, "string"):
                return (done, stack, ("g", b""), arrays)
            bounds = _at(self.lengths, stack)  # (minLength, maxLength) of a guarded string here
            return (done, stack, ("v", b"") if bounds is None else ("s", (0, 0, *bounds)), arrays)
        if c in b"-0123456789" and guarded_item(stack, "integer"):
            return (done, stack, ("n", bytes((c,))), arrays)
        return (done, stack, ("l", b""), arrays)  # a number, true, false or null

    def _length_step(self, state, c: int):
        """One byte inside a length-guarded string: lexeme ("s", (characters so far, 1 after a
        backslash, minLength, maxLength)); None past maxLength or closing short of minLength."""
        done, stack, (_, (count, escaped, least, most)), arrays = state
        if escaped:  # the escape's second byte: counted with the backslash
            return (done, stack, ("s", (count, 0, least, most)), arrays)
        if c == ord('"'):
            return None if count < least else _after_value(done, stack, arrays)
        if c == ord("\\") or c & 0xC0 != 0x80:  # a backslash or a character's first byte
            count += 1
            if count > most:
                return None
        return (done, stack, ("s", (count, int(c == ord("\\")), least, most)), arrays)


def guarded_item(stack: tuple, kind: str | None = None):
    """(instance, item kind) of the guarded value a value starting at `stack`'s place is (of item
    kind `kind` when given), else None: an item of a unique array of strings or integers, or the
    keeping property's value in an object item of an array kept unique by key."""
    if not stack:
        return None
    top = stack[-1]
    guarded = None
    if top[0] == ARRAY:
        guarded = top[2] if top[2] is not None and not _keeps_by_key(top[2][1]) else None
    elif top[1] == _VALUE:
        keyed = _keyed_array(stack)
        if keyed is not None and keyed[1] == top[2]:
            guarded = (keyed[0], keyed[2])
    return guarded if guarded is None or kind is None or _lexical(guarded[1]) == kind else None


def _keyed_array(stack: tuple):
    """(instance, name, item kind) when the top of `stack` is the object holding the keeping
    property `name` of an array kept unique by key: its object item, or (names of two) the object
    value of the item's property names[0], else None."""
    for depth in (1, 2):
        if len(stack) <= depth or stack[-1 - depth][0] != ARRAY or stack[-1 - depth][2] is None:
            continue
        instance, keeping = stack[-1 - depth][2]
        if not _keeps_by_key(keeping) or len(keeping[1]) != depth:
            continue
        objects = stack[-depth:]
        if all(f[0] == OBJECT for f in objects) and all(
            f[2] == name for f, name in zip(objects, keeping[1][:-1])
        ):
            return (instance, keeping[1][-1], keeping[2])
    return None


def keyed_bounded(stack: tuple):
    """(instance, item kind) when the top of `stack` is an object item of an array kept unique
    by a property of bounded values, else None."""
    keyed = _keyed_array(stack)
    return (keyed[0], keyed[2]) if keyed is not None and not isinstance(keyed[2], str) else None


def _keeps_by_key(kind) -> bool:
    return isinstance(kind, tuple) and kind[0] == "key"


def _lexical(kind) -> str:
    """ "string" or "integer": how an item of `kind` is written ("bounded": a string)."""
    return kind if isinstance(kind, str) else "string"


def _at(table: dict, stack: tuple):
    """The entry of `table` (guarded path -> value; None in a path: any key or index) for the
    place `stack` is at, or None."""
    path = tuple(f[2] if f[0] == OBJECT else None for f in stack)
    return next(
        (
            value
            for p, value in table.items()
            if len(p) == len(path) and all(a is None or a == b for a, b in zip(p, path))
        ),
        None,
    )


def _after_value(done: int, stack: tuple, arrays: int):
    """The state once a value inside `stack` ended (the whole JSON: inactive)."""
    if not stack:
        return INACTIVE
    return (done, stack[:-1] + (stack[-1][:1] + (_AFTER,) + stack[-1][2:],), None, arrays)


def escaped_backslash(text: bytes) -> bool:
    """Whether `text`'s trailing backslash is itself escaped (an even run of backslashes)."""
    run = len(text) - len(text.rstrip(b"\\"))
    return run % 2 == 0
