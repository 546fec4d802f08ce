"""Matcher over a regex token automaton (JSON Schema, regex and choices constraints).

Jump-forward rule: `jump_forward_token_ids` only forces tokens that are the *single* token the
grammar allows in their state (and EOS is not allowed there). The sampler would have had to pick
exactly those tokens, so greedy output is token-for-token identical with jump-forward on and off.
The longer forced text (e.g. `"name":` spelt by several competing tokenisations) is available as
`jump_forward_string()` for a caller that re-tokenizes it (SGLang-style); that caller must keep
the last token of the re-tokenized text back so the model can merge across the boundary.
"""

from __future__ import annotations

from radixgen.grammar.bitmask import numpy_rows
from radixgen.grammar.index.token_index import TokenIndex
from radixgen.grammar.unique.guard import UniqueGuard
from radixgen.grammar.unique.guarded_matcher import GuardedMatcher

_EOS_STATE = -1  # pushed when an EOS token is accepted: the matcher is then terminated
MAX_JUMP_TOKENS = 256
MAX_JUMP_BYTES = 1024


class RegexGrammar:
    """CompiledGrammar: an immutable token automaton plus the source it came from."""

    def __init__(
        self, index: TokenIndex, source: str, kind: str, guard: "UniqueGuard | None" = None
    ) -> None:
        self.index = index
        self.source = source  # the regex the automaton was built from
        self.kind = kind
        self.guard = guard  # keeps the string items of some arrays unique (json_schema uniqueItems)

    def matcher(self) -> "RegexMatcher | GuardedMatcher":
        """A fresh matcher at the start state."""
        if self.guard is not None:
            return GuardedMatcher(RegexMatcher(self.index), self.guard)
        return RegexMatcher(self.index)

    def __repr__(self) -> str:
        return f"RegexGrammar(kind={self.kind!r}, states={self.index.num_states})"


class RegexMatcher:
    """One request's cursor: a stack of automaton states, one per accepted token (+ start)."""

    __slots__ = ("_index", "_states", "_eos_ids", "_deadline")

    def __init__(
        self, index: TokenIndex, states: list[int] | None = None, deadline: int | None = None
    ) -> None:
        self._index = index
        self._states = states if states is not None else [index.initial_state]
        self._eos_ids = frozenset(index.info.eos_ids)
        self._deadline = deadline  # the most tokens num_accepted may reach (None: no limit)

    def limit_tokens(self, num_tokens: int) -> None:
        """From here on at most `num_tokens` more tokens will be accepted (the request's
        max_new_tokens left): fill_bitmask keeps to the tokens from which a complete match is
        still that close, so a long output closes its JSON in time instead of being cut off."""
        self._deadline = self.num_accepted + num_tokens

    @property
    def num_accepted(self) -> int:
        """Tokens accepted so far (the most `rollback` can undo)."""
        return len(self._states) - 1

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; False (state unchanged) if the grammar rejects it. An EOS id is
        accepted only in an accepting state, and terminates the matcher."""
        state = self._states[-1]
        if state == _EOS_STATE:
            return False
        if token_id in self._eos_ids:
            if not self._index.is_accepting(state):
                return False
            self._states.append(_EOS_STATE)
            return True
        nxt = self._index.next_state(state, token_id)
        if nxt is None:
            return False
        self._states.append(nxt)
        return True

    def fill_bitmask(self, bitmask, row: int, within_limit: bool = True) -> bool:
        """Write the allowed-next-token set into row `row` of a CPU int32 bitmask (that row
        only): under `limit_tokens`, unless `within_limit` is False, the tokens that can still
        finish in time. After termination nothing is allowed. True when the limit narrowed it."""
        state = self._states[-1]
        if state == _EOS_STATE:
            bitmask[row].zero_()
            return False
        if within_limit and self._deadline is not None:
            narrowed = self._index.row_within(state, self._deadline - len(self._states) + 1)
            if narrowed is not None:
                numpy_rows(bitmask)[row] = narrowed
                return True
        numpy_rows(bitmask)[row] = self._index.row(state)
        return False

    def keep_closest(self, words) -> None:
        """Narrow an allowed row of this state (numpy int32 words, in place) to the tokens after
        which a complete match is nearest (GuardedMatcher: where its guard bans every token that
        finishes in time)."""
        if self._states[-1] != _EOS_STATE:
            self._index.keep_closest(self._states[-1], words)

    def rollback(self, num_tokens: int) -> None:
        """Undo the last `num_tokens` accepted tokens (EOS included). ValueError if more than
        were accepted."""
        if num_tokens < 0 or num_tokens > len(self._states) - 1:
            raise ValueError(
                f"cannot roll back {num_tokens} tokens; {len(self._states) - 1} accepted"
            )
        if num_tokens:
            del self._states[-num_tokens:]

    def fork(self) -> "RegexMatcher":
        """An independent copy in the same state (shares the immutable automaton)."""
        return RegexMatcher(self._index, list(self._states), self._deadline)

    def is_terminated(self) -> bool:
        """True once an EOS token was accepted."""
        return self._states[-1] == _EOS_STATE

    def is_accepting(self) -> bool:
        """True when the text so far is a complete match (EOS would be accepted)."""
        state = self._states[-1]
        return state != _EOS_STATE and self._index.is_accepting(state)

    def reset(self) -> None:
        """Back to the start state."""
        del self._states[1:]

    def jump_forward_token_ids(self) -> list[int]:
        """Tokens forced from here: each is the only token its state allows (see module doc).
        Not accepted yet."""
        state, out = self._states[-1], []
        while state != _EOS_STATE and len(out) < MAX_JUMP_TOKENS:
            token_id = self._index.single_token(state)
            if token_id is None:
                break
            out.append(token_id)
            state = self._index.next_state(state, token_id)
        return out

    def jump_forward_string(self) -> str:
        """The text every continuation from here starts with (possibly spanning several token
        states), decoded as UTF-8 up to the last complete character. Not accepted yet."""
        state, forced = self._states[-1], b""
        while state != _EOS_STATE and len(forced) < MAX_JUMP_BYTES:
            prefix = self._index.forced_bytes(state)
            if not prefix:
                break
            forced += prefix
            nxt = self._exact_token(state, prefix)
            if nxt is None:
                break
            state = nxt
        return _decode_complete(forced)

    def _exact_token(self, state: int, data: bytes) -> int | None:
        """The state after the token spelling exactly `data`, if the grammar allows one."""
        for token_id in self._index.token_ids_of(data):
            nxt = self._index.next_state(state, token_id)
            if nxt is not None:
                return nxt
        return None


def _decode_complete(data: bytes) -> str:
    """UTF-8 text of `data`, leaving out an incomplete character at its end."""
    for cut in range(min(4, len(data) + 1)):
        try:
            return data[: len(data) - cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
    return data.decode("utf-8", errors="replace")
