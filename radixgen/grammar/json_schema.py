"""JSON Schema -> regex: checked and rewritten by `rewrite.rewriter`, converted by outlines-core.

The steps, each in its module: references to embedded documents made local (schema.bundles) and
deep ones hoisted into $defs (schema.refs); the schema checked and rewritten (rewrite.rewriter);
reference cycles unrolled to their exits (rewrite.unroll); the places `UniqueGuard` keeps told
apart (rewrite.guard_sites); keyed objects written around their values' regex
(rewrite.keyed_objects); outlines-core's regex (rewrite.outlines), each placeholder in it replaced
by its exact regex. A schema whose regex, reference expansion, automaton or token index would
pass its budget is given as rules for the CFG matcher instead (json_grammar.rules,
json_grammar.cfg).
"""

from __future__ import annotations

import json
import secrets

from radixgen.grammar.index.size_budget import check_regex_size, written_size
from radixgen.grammar.json_grammar.rules import JsonGrammar, SchemaGrammar
from radixgen.grammar.matcher import GrammarError, RegexTooLarge
from radixgen.grammar.rewrite.guard_sites import GuardSites
from radixgen.grammar.rewrite.keyed_objects import KeyedObjects
from radixgen.grammar.rewrite.outlines import bound_any_depth, outlines_regex, ref_target
from radixgen.grammar.rewrite.rewriter import SchemaRewriter
from radixgen.grammar.rewrite.state import RewriteState
from radixgen.grammar.rewrite.unroll import RefWalk, Unroll
from radixgen.grammar.schema.bundles import localize_embedded_refs
from radixgen.grammar.schema.refs import hoist_deep_refs, restore_paths

WHITESPACE = {
    "compact": "",  # no whitespace at all: {"a":1,"b":[1,2]}
    "flexible": r"[ \t\n]{0,32}",  # bounded, so a model cannot emit whitespace forever
}
MAX_NESTING = (
    64  # JSON containers in a schema (outlines-core parses the rewrite with a 128-level limit)
)


def whitespace_pattern(whitespace: str) -> str:
    """ "compact", "flexible", or a custom regex for the whitespace between JSON tokens."""
    return WHITESPACE.get(whitespace, whitespace)


def schema_to_regex(schema_json: str, whitespace: str = "compact") -> str:
    """The regex (Rust syntax) whose matches are exactly-valid JSON instances of the schema.
    Raises GrammarError for invalid or unsupported schemas, and for those that need a
    `UniqueGuard` beside the regex (see `schema_to_guarded_regex`)."""
    regex, unique_paths = schema_to_guarded_regex(schema_json, whitespace)
    if unique_paths:
        raise GrammarError(
            "this schema needs a guard beside its regex (uniqueItems over free strings or "
            "integers, a maxLength or minItems / maxItems of 16 or more), which only a "
            "compiled json_schema or tool_calls constraint has"
        )
    return regex


def schema_to_guarded_regex(schema_json: str, whitespace: str = "compact") -> tuple[str, tuple]:
    """(regex, unique_paths): the schema's regex, and (instance path, item kind) of the arrays
    whose items `UniqueGuard` must keep unique (paths: tuples of property names, None for any key
    or index; kinds "string" or "integer"); the regex's matches that the guard lets through are
    exactly-valid instances."""
    return schema_to_compiled_form(schema_json, whitespace, grammar=False)


def schema_to_compiled_form(
    schema_json: str,
    whitespace: str = "compact",
    grammar: bool = True,
    too_large: RegexTooLarge | None = None,
) -> tuple["str | JsonGrammar", tuple]:
    """As `schema_to_guarded_regex`, except that a schema whose regex would pass its size budget
    comes back as a `JsonGrammar` (json_grammar.rules) where `grammar` allows it; `too_large`: the
    error that the regex's automaton or token index would pass theirs (compiler), for the
    grammar without the regex."""
    try:
        return _schema_to_regex(schema_json, whitespace, grammar, too_large)
    except _SpacedGrammar as spaced:
        # the grammar of the compact rewrite (the regexes it writes for whole containers then
        # hold no whitespace to cut around), its tokens taking the whitespace (json_grammar.tokens)
        form, unique_paths = _schema_to_regex(
            schema_json, "compact", True, spaced.too_large, regex_first=False
        )
        form.whitespace = whitespace_pattern(whitespace)
        return form, unique_paths
    except RecursionError:  # reference chains thousands deep: the walks recurse per level
        raise GrammarError("json_schema nests its references too deeply") from None


class _SpacedGrammar(Exception):
    """A schema too large for one regex, with other whitespace than compact (`too_large`: the
    error that came before the regex, if one did)."""

    def __init__(self, too_large: RegexTooLarge | None) -> None:
        super().__init__("a schema too large for one regex, with whitespace")
        self.too_large = too_large


def _schema_to_regex(
    schema_json: str, whitespace: str, grammar: bool, too_large, regex_first: bool = True
) -> tuple:
    try:
        schema = json.loads(schema_json)
    except json.JSONDecodeError as exc:
        raise GrammarError(f"json_schema is not valid JSON: {exc}") from None
    if _depth(schema) > MAX_NESTING:
        raise GrammarError(f"json_schema nests deeper than {MAX_NESTING} levels")
    origins: dict[str, str] = {}
    try:
        return _rewritten_regex(schema, whitespace, origins, grammar, too_large, regex_first)
    except GrammarError as exc:  # name the places the user wrote, not the copies hoisted from them
        exc.args = (restore_paths(str(exc), origins),)
        raise


def _rewritten_regex(
    schema,
    whitespace: str,
    origins: dict[str, str],
    grammar: bool,
    too_large,
    regex_first: bool = True,
) -> tuple:
    """(regex or grammar, unique paths); `too_large`: the regex's error, known before (then
    references are unrolled only for the guard sites: a grammar needs no copies); `regex_first`
    False: the grammar without trying the regex, references unrolled as for it."""
    try:
        schema = hoist_deep_refs(localize_embedded_refs(schema), origins)
        rewriter = SchemaRewriter(
            schema if isinstance(schema, dict) else {},
            secrets.token_hex(4),
            whitespace_pattern(whitespace),
        )
        rewritten = rewriter.rewrite(schema)
    except GrammarError:
        raise
    except (TypeError, AttributeError, KeyError, IndexError, ValueError) as exc:
        # a malformed schema the checks above did not name: still the client's error
        raise GrammarError(f"invalid JSON Schema ({type(exc).__name__}: {exc})") from None
    bound_any_depth(rewritten)
    records = rewriter.state
    guarded = (
        records.unique_arrays
        or records.length_strings
        or records.counted_nodes
        or records.unique_key_nodes
    )
    try:  # (a grammar needs no copies and recursion no unrolling, but the guard sites do)
        if (too_large is None or guarded) and RefWalk(rewritten).needs_unrolling():
            rewritten = Unroll(rewritten).run()
    except RegexTooLarge as exc:  # references copied past the walks' budget: no regex of it
        if not grammar:
            raise
        too_large = exc
    unique_paths = GuardSites(rewritten, records).guard_paths() if guarded else ()
    try:
        if too_large is not None:
            raise too_large
        if not regex_first:
            raise RegexTooLarge("(the grammar asked for)")
        keyed = (
            KeyedObjects(rewritten, records, whitespace_pattern(whitespace)).run()
            if records.keyed_objects
            else rewritten
        )
        return _written_regex(keyed, records, whitespace_pattern(whitespace)), unique_paths
    except RegexTooLarge:
        if not grammar:
            raise
        if whitespace_pattern(whitespace):
            raise _SpacedGrammar(too_large) from None
        # (keyed objects as rules, not as the regexes KeyedObjects writes: their values may be
        # large)
        return SchemaGrammar(
            rewritten, records.placeholders, ref_target, records.keyed_objects
        ).build(), unique_paths


def _written_regex(rewritten: dict, records: RewriteState, whitespace: str) -> str:
    regex = outlines_regex(rewritten, whitespace)
    check_regex_size(written_size(regex, records.placeholders))  # before writing them out
    for name, leaf in records.placeholders.items():
        regex = regex.replace(name, f"(?:{leaf})")
    check_regex_size(len(regex))
    return regex


def _depth(node, level: int = 0) -> int:
    """How deeply JSON containers nest in node (stops counting past MAX_NESTING)."""
    if level > MAX_NESTING or not isinstance(node, (dict, list)):
        return level
    children = node.values() if isinstance(node, dict) else node
    return max((_depth(c, level + 1) for c in children), default=level + 1)
