"""GrammarCompiler: Constraint -> CompiledGrammar, cached, synchronously or on a worker thread.

    compiler = GrammarCompiler(TokenizerInfo.from_hf(tokenizer))
    future = compiler.submit(constraint)      # scheduler: never blocks, polls future.done()
    grammar = future.result()                 # CompiledGrammar, or raises GrammarError
    matcher = grammar.matcher()

kinds: json_schema and regex (outlines-core token index), choices (an alternation of the escaped
strings), tool_calls (text, or a JSON Schema instance between two tags), lark and ebnf
(`radixgen.grammar.cfg.grammar.compile_cfg`, imported lazily). Results are cached by (constraint,
tokenizer, whitespace); errors are cached too, so a bad schema fails fast again.
"""

from __future__ import annotations

import json
import re
import threading
import warnings
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor

from radixgen.core import Constraint
from radixgen.grammar.index.regex_matcher import RegexGrammar
from radixgen.grammar.index.size_budget import INDEX_ENTRY_BUDGET, check_index_size
from radixgen.grammar.index.token_index import build_index, outlines_vocabulary
from radixgen.grammar.json_grammar.rules import JsonGrammar
from radixgen.grammar.json_schema import WHITESPACE, schema_to_compiled_form
from radixgen.grammar.matcher import CompiledGrammar, GrammarError, RegexTooLarge
from radixgen.grammar.regex.leaves import escape_literal
from radixgen.grammar.regex.lookaround import LookaroundError, lookarounds_written_out
from radixgen.grammar.regex.markers import exclude_chars
from radixgen.grammar.tokenizer_info import TokenizerInfo
from radixgen.grammar.tool_calls import TextOrCallGrammar
from radixgen.grammar.unique.guard import UniqueGuard

__all__ = ["GrammarCompiler", "GrammarError", "choices_regex", "tool_calls_regex", "JSON_OBJECT"]

CACHE_ENTRY_BUDGET = 4 * INDEX_ENTRY_BUDGET  # cached grammars' token-index entries (~4 GB)
# OpenAI response_format {"type": "json_object"}: any JSON object
JSON_OBJECT = Constraint("json_schema", {"type": "object"})


def choices_regex(choices) -> str:
    """A regex matching exactly one of `choices` (each escaped)."""
    return "(?:" + "|".join(escape_literal(c) for c in choices) + ")"


class GrammarCompiler:
    """Compiles constraints for one tokenizer. Thread-safe; one instance per scheduler."""

    def __init__(
        self,
        tokenizer_info: TokenizerInfo,
        whitespace: str = "compact",
        max_cached: int = 256,
        num_threads: int = 1,
    ) -> None:
        if not isinstance(whitespace, str):
            raise ValueError(f"whitespace must be one of {sorted(WHITESPACE)} or a regex string")
        self.tokenizer_info = tokenizer_info
        self.whitespace = whitespace
        self.max_cached = max_cached
        self._cache: OrderedDict[tuple, Future] = OrderedDict()
        self._entries: dict[tuple, int] = {}  # estimated token-index entries of cached grammars
        self._checked: OrderedDict[tuple, str | None] = OrderedDict()  # validate(): key -> error
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=num_threads, thread_name_prefix="grammar")
        self.num_compiled = 0  # compiles that succeeded (cache hits not counted)

    def compile(self, constraint: Constraint) -> CompiledGrammar:
        """Compile (or fetch from the cache) on the calling thread. Raises GrammarError."""
        future, owner = self._entry(constraint)
        if owner:
            self._run(future, constraint)
        return future.result()

    def submit(self, constraint: Constraint) -> Future:
        """A Future of the CompiledGrammar, compiled on the worker thread (already done on a
        cache hit). Its `result()` raises GrammarError for a bad constraint."""
        future, owner = self._entry(constraint)
        if owner:
            self._pool.submit(self._run, future, constraint)
        return future

    def validate(self, constraint: Constraint) -> None:
        """Raise GrammarError if `constraint` cannot compile, doing only the cheap part (schema
        checks, regex and grammar parsing; no vocabulary index): for the HTTP edge, so a bad
        constraint is a 400 before it is queued. Results are cached."""
        key = self._key(constraint)
        with self._lock:
            error = self._checked.get(key, False)
        if error is False:
            error = None
            try:
                self._validate_now(constraint)
            except GrammarError as exc:
                error = str(exc)
            except (
                TypeError,
                AttributeError,
                KeyError,
                IndexError,
                ValueError,
                RecursionError,
            ) as exc:
                # a malformed spec the checks did not name: still the client's error
                error = f"invalid constraint ({type(exc).__name__}: {exc})"
            except (
                MemoryError
            ):  # a size the budgets did not foresee: the client's constraint, a 400
                error = "constraint too large to compile: checking it ran out of memory"
            with self._lock:
                self._checked[key] = error
                while len(self._checked) > 4 * self.max_cached:
                    self._checked.popitem(last=False)
        if error is not None:
            raise GrammarError(error)

    def _validate_now(self, constraint: Constraint) -> None:
        if constraint.kind in ("lark", "ebnf"):
            from radixgen.grammar.cfg.grammar import compile_cfg

            compile_cfg(constraint, self.tokenizer_info, precompute=False)
            return
        form = self._indexable(constraint)[0]
        if isinstance(form, JsonGrammar):
            from radixgen.grammar.json_grammar.cfg import check_json_grammar

            check_json_grammar(form)

    def checked(self, constraint: Constraint) -> bool:
        """True when `validate` has a result for `constraint` (so it returns at once)."""
        with self._lock:
            return self._key(constraint) in self._checked

    def cached(self, constraint: Constraint) -> bool:
        """True when a finished compile of `constraint` is in the cache."""
        with self._lock:
            future = self._cache.get(self._key(constraint))
            return future is not None and future.done()

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()
            self._entries.clear()

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------ internals

    def _key(self, constraint: Constraint) -> tuple:
        return (constraint.kind, constraint.spec, id(self.tokenizer_info), self.whitespace)

    def _entry(self, constraint: Constraint) -> tuple[Future, bool]:
        """The cache entry of `constraint`, and whether the caller must compile it."""
        if not isinstance(constraint, Constraint):
            raise TypeError(f"expected a Constraint, got {type(constraint).__name__}")
        key = self._key(constraint)
        with self._lock:
            future = self._cache.get(key)
            if future is not None:
                self._cache.move_to_end(key)
                return future, False
            future = Future()
            future.set_running_or_notify_cancel()
            self._cache[key] = future
            while len(self._cache) > self.max_cached:
                self._entries.pop(self._cache.popitem(last=False)[0], None)
            return future, True

    def _run(self, future: Future, constraint: Constraint) -> None:
        try:
            grammar, entries = self._compile_now(constraint)
            with self._lock:
                self.num_compiled += 1
                self._keep_within_budget(self._key(constraint), entries)
            future.set_result(grammar)
        except GrammarError as exc:
            future.set_exception(_detached(exc))
        except Exception as exc:  # an internal failure must still reach the waiting request
            future.set_exception(_detached(GrammarError(f"grammar compilation failed: {exc!r}")))

    def _keep_within_budget(self, key: tuple, entries: int) -> None:
        """Record a new grammar's index entries and drop the least recently used others that
        hold some while the cache holds more than CACHE_ENTRY_BUDGET (a large schema's index
        takes a GB)."""
        self._entries[key] = entries
        total = sum(self._entries.values())
        for old in list(self._cache):
            if total <= CACHE_ENTRY_BUDGET:
                break
            if old != key and self._cache[old].done() and self._entries.get(old, 0):
                total -= self._entries.pop(old, 0)
                del self._cache[old]

    def _compile_now(self, constraint: Constraint) -> tuple[CompiledGrammar, int]:
        """The grammar and its estimated token-index entries (0 for a CFG)."""
        kind, info = constraint.kind, self.tokenizer_info
        if kind in ("lark", "ebnf"):
            return _compile_cfg(constraint, info), 0
        regex, unique_paths, prefix, entries = self._indexable(constraint)
        guard = UniqueGuard(unique_paths, info, prefix) if unique_paths else None
        if isinstance(regex, JsonGrammar):  # a schema too large for one regex
            grammar = _compile_json_grammar(regex, info, guard)
            if kind == "tool_calls":
                grammar = TextOrCallGrammar(grammar, info, json.loads(constraint.spec)["open"])
            return grammar, 0
        return RegexGrammar(build_index(regex, info, entries), regex, kind, guard), entries

    def _indexable(self, constraint: Constraint) -> tuple["str | JsonGrammar", tuple, bytes, int]:
        """`_regex`'s result and the regex's estimated token-index entries, checked against
        their budget; a JSON Schema whose regex's automaton or index is too large comes back as
        its grammar (0 entries), any other constraint is refused."""
        regex, unique_paths, prefix = self._regex(constraint)
        if isinstance(regex, JsonGrammar):
            return regex, unique_paths, prefix, 0
        try:
            return regex, unique_paths, prefix, check_index_size(regex, self.tokenizer_info)
        except RegexTooLarge as exc:
            if constraint.kind == "tool_calls":
                return (*tool_calls_form(constraint.spec, too_large=exc), 0)
            if constraint.kind != "json_schema":
                raise
            return (
                *schema_to_compiled_form(constraint.spec, self.whitespace, too_large=exc),
                prefix,
                0,
            )

    def _regex(self, constraint: Constraint) -> tuple["str | JsonGrammar", tuple, bytes]:
        """(regex, the paths UniqueGuard keeps, the text before the guarded JSON) of a
        constraint compiled to a token index; a JsonGrammar instead of the regex for a JSON
        Schema too large for one."""
        kind = constraint.kind
        if kind == "json_schema":
            return (*schema_to_compiled_form(constraint.spec, self.whitespace), b"")
        if kind == "tool_calls":
            return tool_calls_form(constraint.spec)
        if kind == "regex":
            vocab = outlines_vocabulary(self.tokenizer_info)
            return (
                exclude_chars(_checked_regex(constraint.spec), vocab.start + vocab.sentinel),
                (),
                b"",
            )
        if kind == "choices":
            return choices_regex(constraint.spec), (), b""
        raise GrammarError(f"unknown constraint kind {kind!r}")


def _detached(exc: GrammarError) -> GrammarError:
    """`exc` without its traceback and the exceptions it was raised in: the cache keeps a failed
    compile's error, and its frames would keep what the compile built until it failed (the
    subsets of a DFA that grew past its budget: tens of MB per cached bomb)."""
    exc.__traceback__ = exc.__context__ = exc.__cause__ = None
    return exc


def tool_calls_regex(spec: str) -> tuple[str, tuple, bytes]:
    """(regex, unique_paths, guard prefix) of a tool_calls constraint: free text that does not
    start with the opening tag's first character, or the opening tag, a JSON instance of the
    schema (compact) and the closing tag. The uniqueness guard starts after the opening tag."""
    return _tool_calls(spec, grammar=False)


def tool_calls_form(
    spec: str, too_large: RegexTooLarge | None = None
) -> tuple["str | JsonGrammar", tuple, bytes]:
    """As `tool_calls_regex`, except that calls whose schema is too large for one regex (or
    whose regex's index is, `too_large`) come back as the grammar of the tagged calls, for
    tool_calls to offer beside free text."""
    return _tool_calls(spec, grammar=True, too_large=too_large)


def _tool_calls(spec: str, grammar: bool, too_large: RegexTooLarge | None = None) -> tuple:
    frame = json.loads(spec)
    opener, closer = frame["open"], frame["close"]
    form, unique_paths = schema_to_compiled_form(
        json.dumps(frame["schema"]), grammar=grammar, too_large=too_large
    )
    if isinstance(form, JsonGrammar):
        return form.framed(opener, closer), unique_paths, opener.encode()
    text = f"[^{escape_literal(opener[0])}][\\s\\S]*"
    return (
        f"(?:{text}|{escape_literal(opener)}(?:{form}){escape_literal(closer)})",
        unique_paths,
        opener.encode(),
    )


def _checked_regex(pattern: str) -> str:
    """Refuse constructs the automaton cannot express. The whole output must match, so a leading
    `^` and a trailing `$` are implicit and dropped."""
    try:
        with (
            warnings.catch_warnings()
        ):  # (Rust-syntax classes like `[[a-z]--[q]]` warn in Python's re)
            warnings.simplefilter("ignore", FutureWarning)
            re.compile(pattern)
    except re.error as exc:
        raise GrammarError(f"invalid regex {pattern!r}: {exc}") from None
    if re.search(
        r"(?<!\\)(?:\\\\)*(?:\\[1-9]|\(\?P=)", pattern
    ):  # (not after an escaped backslash)
        raise GrammarError(f"regex {pattern!r}: backreferences are not supported")
    if re.search(
        r"(?<!\\)(?:\\\\)*(?:\(\?<?[=!]|\\[bB])", pattern
    ):  # (not after an escaped backslash)
        try:  # lookarounds and word boundaries written out through an automaton (regex.lookaround)
            return lookarounds_written_out(pattern, pattern, whole=True)[0][1:-1]
        except LookaroundError as why:
            raise GrammarError(f"regex {pattern!r}: {why}") from None
    if pattern.startswith("^"):
        pattern = pattern[1:]
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1]
    return pattern


def _compile_json_grammar(
    grammar: JsonGrammar, info: TokenizerInfo, guard: UniqueGuard | None
) -> CompiledGrammar:
    from radixgen.grammar.json_grammar.cfg import compile_json_grammar

    return compile_json_grammar(grammar, info, guard=guard)


def _compile_cfg(constraint: Constraint, info: TokenizerInfo) -> CompiledGrammar:
    try:
        from radixgen.grammar.cfg.grammar import compile_cfg
    except ImportError as exc:
        raise GrammarError(
            f"{constraint.kind} constraints need radixgen.grammar.cfg, which is not "
            f"available: {exc}"
        ) from None
    return compile_cfg(constraint, info)
