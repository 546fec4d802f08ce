"""tool_calls (tool_choice "auto") over a grammar: free text, or the tagged calls' grammar.

A tool_calls constraint is free text that does not start with the opening tag's first byte, or
the opening tag, the calls (a JSON instance) and the closing tag. On the regex path that is one
regex. Where the calls' schema is too large for one regex, the calls compile to the CFG matcher
(json_grammar.cfg, with the tags as terminals); free text cannot be a terminal beside them (its `.*`
would swallow every JSON token under maximal munch), so the choice is made here, on the first
token: one starting with another byte begins free text (any token after it, EOS once there is
text), any other goes to the calls' matcher.
"""

from __future__ import annotations

import numpy as np
import torch

from radixgen.grammar.bitmask import numpy_rows
from radixgen.grammar.cfg.vocabulary_index import pack_ids
from radixgen.grammar.tokenizer_info import TokenizerInfo


class TextOrCallGrammar:
    """The compiled constraint: the calls' grammar and the vocabulary rows of free text."""

    def __init__(self, calls, info: TokenizerInfo, opener: str) -> None:
        self.calls, self.info = calls, info
        self.eos_ids = frozenset(info.eos_ids)
        words = (info.vocab_size + 31) // 32
        tag_byte = opener.encode()[0]
        text = [i for i, data in enumerate(info.token_bytes) if data and i not in info.special_ids]
        self.text_any = _row(text + list(self.eos_ids), words)
        self.text_first = _row([i for i in text if info.token_bytes[i][0] != tag_byte], words)

    def matcher(self) -> "TextOrCallMatcher":
        return TextOrCallMatcher(self, self.calls.matcher(), [])

    def is_text(self, token_id: int, first: bool = False) -> bool:
        """Whether the token may be free text (`first`: may begin it)."""
        row = self.text_first if first else self.text_any
        return 0 <= token_id < row.shape[0] * 32 and bool(row[token_id >> 5] >> (token_id & 31) & 1)


class TextOrCallMatcher:
    """The Matcher protocol: the calls' matcher until the first token starts free text, then
    `_text` (per free-text token: True for the EOS that ended it)."""

    __slots__ = ("_grammar", "_calls", "_text")

    def __init__(self, grammar: TextOrCallGrammar, calls, text: list[bool]) -> None:
        self._grammar, self._calls, self._text = grammar, calls, text

    @property
    def num_accepted(self) -> int:
        return self._calls.num_accepted + len(self._text)

    def limit_tokens(self, num_tokens: int) -> None:
        self._calls.limit_tokens(num_tokens)  # (free text is complete after any token)

    def accept_token(self, token_id: int) -> bool:
        g = self._grammar
        if self._text:
            if self._text[-1]:
                return False
            if g.is_text(token_id):
                self._text.append(token_id in g.eos_ids)
                return True
            return False
        if self._calls.num_accepted == 0 and g.is_text(token_id, first=True):
            self._text.append(False)
            return True
        return self._calls.accept_token(token_id)

    def fill_bitmask(self, bitmask: torch.Tensor, row: int) -> None:
        g = self._grammar
        words = numpy_rows(bitmask)[row]
        if self._text:
            words[:] = 0
            if not self._text[-1]:
                n = min(words.shape[0], g.text_any.shape[0])
                words[:n] = g.text_any[:n]
            return
        self._calls.fill_bitmask(bitmask, row)
        if self._calls.num_accepted == 0:
            n = min(words.shape[0], g.text_first.shape[0])
            np.bitwise_or(words[:n], g.text_first[:n], out=words[:n])

    def rollback(self, num_tokens: int) -> None:
        if not 0 <= num_tokens <= self.num_accepted:
            raise ValueError(f"cannot roll back {num_tokens} tokens: {self.num_accepted} accepted")
        undone = min(num_tokens, len(self._text))
        del self._text[len(self._text) - undone :]
        self._calls.rollback(num_tokens - undone)

    def fork(self) -> "TextOrCallMatcher":
        return TextOrCallMatcher(self._grammar, self._calls.fork(), list(self._text))

    def is_terminated(self) -> bool:
        return self._text[-1] if self._text else self._calls.is_terminated()

    def is_accepting(self) -> bool:
        return not self._text[-1] if self._text else self._calls.is_accepting()

    def reset(self) -> None:
        self._text.clear()
        self._calls.reset()

    def jump_forward_token_ids(self) -> list[int]:
        """The calls' forced tokens once a call has begun (before, text or a call may come)."""
        if self._text or self._calls.num_accepted == 0:
            return []
        return self._calls.jump_forward_token_ids()


def _row(ids: list[int], num_words: int) -> np.ndarray:
    return pack_ids(np.array(ids, dtype=np.intp), num_words).view(np.int32)
