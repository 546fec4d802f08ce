"""`GuardedMatcher`: a regex matcher with a `UniqueGuard` beside it (the Matcher protocol)."""

from __future__ import annotations

from radixgen.grammar.bitmask import numpy_rows
from radixgen.grammar.unique.guard import UniqueGuard, repeats


class GuardedMatcher:
    """A RegexMatcher plus a UniqueGuard: the Matcher protocol, one guard state per token, and
    the items of the guarded arrays (instance -> set of texts) with, per token, the items it
    added (undone by rollback)."""

    __slots__ = ("_inner", "_guard", "_scans", "_seen", "_added")

    def __init__(
        self,
        inner,
        guard: UniqueGuard,
        scans: list | None = None,
        seen: dict | None = None,
        added: list | None = None,
    ) -> None:
        self._inner = inner
        self._guard = guard
        self._scans = scans if scans is not None else [guard.initial]
        self._seen: dict[int, set] = seen if seen is not None else {}
        self._added: list = added if added is not None else []

    @property
    def num_accepted(self) -> int:
        return self._inner.num_accepted

    def accept_token(self, token_id: int) -> bool:
        if not self._inner.accept_token(token_id):
            return False
        data = (
            self._guard.info.token_bytes[token_id]
            if token_id < len(self._guard.info.token_bytes)
            else b""
        )
        step = self._guard.advance(self._scans[-1], data, self._seen)
        if repeats(step, self._seen):
            self._inner.rollback(1)
            return False
        scan, closed = step
        for instance, text in closed:
            self._seen.setdefault(instance, set()).add(text)
        self._scans.append(scan)
        self._added.append(closed)
        return True

    def limit_tokens(self, num_tokens: int) -> None:
        self._inner.limit_tokens(num_tokens)

    def fill_bitmask(self, bitmask, row: int) -> None:
        narrowed = self._inner.fill_bitmask(bitmask, row)
        if self._inner.is_terminated():
            return
        words = numpy_rows(bitmask)[row]
        self._guard.ban(self._scans[-1], words, self._seen)
        if (
            narrowed and not words.any()
        ):  # the guard bans every token that finishes in time: head for the end
            self._inner.fill_bitmask(bitmask, row, within_limit=False)
            self._guard.ban(self._scans[-1], words, self._seen)
            self._inner.keep_closest(words)

    def rollback(self, num_tokens: int) -> None:
        self._inner.rollback(num_tokens)
        for _ in range(num_tokens):
            self._scans.pop()
            for instance, text in self._added.pop():
                self._seen[instance].discard(text)

    def fork(self) -> "GuardedMatcher":
        return GuardedMatcher(
            self._inner.fork(),
            self._guard,
            list(self._scans),
            {k: set(v) for k, v in self._seen.items()},
            list(self._added),
        )

    def is_terminated(self) -> bool:
        return self._inner.is_terminated()

    def is_accepting(self) -> bool:
        return self._inner.is_accepting()

    def reset(self) -> None:
        self._inner.reset()
        del self._scans[1:]
        self._seen.clear()
        self._added.clear()

    def jump_forward_token_ids(self) -> list[int]:
        """The inner matcher's forced tokens, up to the first the guard would reject (one that
        would close a repeated item, or leave a bounded one where no new value is left)."""
        scan, out, closed = self._scans[-1], [], set()
        seen = _Overlay(self._seen, closed)
        for token_id in self._inner.jump_forward_token_ids():
            step = self._guard.advance(scan, self._guard.info.token_bytes[token_id], seen)
            if repeats(step, seen):
                break
            scan = step[0]
            closed.update(step[1])
            out.append(token_id)
        return out

    def jump_forward_string(self) -> str:
        return self._inner.jump_forward_string()


class _Overlay:
    """`seen` plus (instance, text) items closed since, for a walk ahead that must not change it."""

    def __init__(self, seen: dict, closed: set) -> None:
        self.seen, self.closed = seen, closed

    def get(self, instance, default=()):
        return _Items(self.seen.get(instance, ()), instance, self.closed)


class _Items:
    """An instance's items in `seen` plus those closed since: a read-only set."""

    def __init__(self, items, instance, closed) -> None:
        self.items, self.instance, self.closed = items, instance, closed

    def __contains__(self, text) -> bool:
        return text in self.items or (self.instance, text) in self.closed

    def __iter__(self):
        return iter(set(self.items) | {text for i, text in self.closed if i == self.instance})

    def __len__(self) -> int:
        return sum(1 for _ in self)
