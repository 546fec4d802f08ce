"""The state one schema rewrite keeps (`RewriteState`): the root its local `$ref`s resolve in, how
its draft reads them, its budgets, and the records json_schema reads afterwards (placeholders and
the places `UniqueGuard` keeps). The reference reading is here too, as functions of the state:
resolved to the target with the keywords beside each `$ref` merged in (`resolved`), as a chain
alone (`resolve_chain`, drafts 3-7's reading), or as validators read it (`as_validators_read`)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from radixgen.grammar.matcher import GrammarError, refuse
from radixgen.grammar.schema.merge import resolve_merged
from radixgen.grammar.schema.one_of import Readings
from radixgen.grammar.schema.refs import MISSING, follow_pointer, pointer_parts, root_base

MERGE_FOLLOW_BUDGET = 20_000

# the records a rewrite keeps, undone when an attempt is abandoned (`snapshot` / `restore`)
_RECORDS = (
    "placeholders",
    "unique_arrays",
    "literal_arrays",
    "keyed_objects",
    "length_strings",
    "counted_arrays",
    "counted_nodes",
    "unique_key_nodes",
)


@dataclass
class RewriteState:
    root: object  # the schema its local `$ref`s resolve in
    nonce: str  # in every placeholder name, so no schema text can spell one
    whitespace: str  # the regex between JSON tokens, for placeholder containers
    # keyword -> handler (rewrite.rewriter.HANDLERS): the first keyword of a node, in the
    # table's order, picks how it is rewritten
    handlers: Mapping[str, Callable[[RewriteState, dict, str], dict]]
    # an items array is a tuple; keywords beside a $ref are ignored by the draft, applied by
    # validators reading the $schema as 2020-12
    draft_3_to_7: bool = False
    # where the keywords beside a $ref cannot be enforced, the draft's reading (the $ref alone)
    # is taken: only when its URI is unambiguous
    ref_fallback: bool = False
    const_unknown: bool = False  # draft 4 validators do not know `const`
    # exclusiveM* are flags: only under a URI every validator reads as draft 4 (jsonschema reads
    # "https://json-schema.org/draft-04/schema#" as 2020-12); elsewhere a flag is refused
    draft_4: bool = False
    inlining: list[str] = field(default_factory=list)  # $refs inlined into the nodes rewritten
    merge_follows: int = 0  # references schema.merge followed (see `merge_target`)
    rewrites: int = 0  # schema nodes rewritten, against walk.REWRITE_BUDGET
    # placeholder const (quoted) -> the exact regex that replaces it
    placeholders: dict[str, str] = field(default_factory=dict)
    # placeholders that are arrays, for json_schema's check of where uniqueness is guarded:
    # uniqueItems kept by UniqueGuard -> item kind ("string", "integer", ("bounded", item regex))
    unique_arrays: dict[str, str | tuple] = field(default_factory=dict)
    # enum/const values holding arrays, and finite sets
    literal_arrays: dict[str, list] = field(default_factory=dict)
    # free-form objects whose names follow a regex: placeholder -> (name regex, nonempty,
    # maxProperties); json_schema builds their regex once their values' regex is known (KEYED)
    keyed_objects: dict[str, tuple[str, bool, int | None]] = field(default_factory=dict)
    # strings whose maxLength UniqueGuard keeps: placeholder -> (minLength, maxLength, the exact
    # counted regex, for json_schema's fallback)
    length_strings: dict[str, tuple[int, int, str]] = field(default_factory=dict)
    # unique arrays whose maxItems UniqueGuard keeps: placeholder -> (maxItems, the exact counted
    # regex); other such arrays are marked in place (COUNTED)
    counted_arrays: dict[str, tuple] = field(default_factory=dict)
    counted_nodes: int = 0
    unique_key_nodes: int = 0  # arrays of objects kept unique by one property (UNIQUE_KEY)

    def placeholder(self, regex: str, quoted: bool) -> dict:
        """A new placeholder const standing for `regex` (in quotes where `quoted`)."""
        name = f"RGPH{self.nonce}x{len(self.placeholders)}"
        self.placeholders[f'"{name}"'] = f'"{regex}"' if quoted else regex
        return {"const": name}

    def snapshot(self) -> dict:
        """The records as they are now, for `restore`."""
        return {name: copy.copy(getattr(self, name)) for name in _RECORDS}

    def restore(self, saved: dict) -> None:
        """The records back to `saved` (what an abandoned attempt recorded is undone)."""
        for name, value in saved.items():
            setattr(self, name, value)


def resolve(state: RewriteState, ref: str, path: str):
    """The schema a local `$ref` names (refused when it is not local or does not resolve)."""
    parts = ref.split("#")
    if len(parts) != 2 or (parts[0] and parts[0] != root_base(state.root)):
        refuse("$ref", path, f"{ref!r} is not a local reference")
    pointer = pointer_parts("#" + parts[1])
    if pointer is None:
        refuse("$ref", path, f"{ref!r} names an anchor (only JSON pointers are supported)")
    node = follow_pointer(state.root, pointer)
    if node is MISSING:
        refuse("$ref", path, f"{ref!r} does not resolve")
    return node


def resolved(state: RewriteState, node):
    """`node` with its `$ref` chain followed, keywords beside each `$ref` merged into the
    target; None when they cannot be merged exactly (under an unambiguous draft 3-7 URI, the
    target alone then: that draft ignores them)."""
    return resolve_merged(node, lambda ref: merge_target(state, ref), state.ref_fallback)


def merge_target(state: RewriteState, ref: str):
    """The schema at `ref`, for schema.merge, which follows references every time it merges
    through them: a reference shared along each level of a chain (A = allOf [B, B], B = allOf
    [C, C], ...) would take exponential work, so the follows are counted."""
    state.merge_follows += 1
    if state.merge_follows > MERGE_FOLLOW_BUDGET:
        raise GrammarError(
            "json_schema expands to too large a grammar (its merges follow "
            f"references more than {MERGE_FOLLOW_BUDGET} times)"
        )
    return resolve(state, ref, "$")


def as_validators_read(state: RewriteState, node):
    """`node` resolved as validators read it, for what must hold under every reading (a
    oneOf option distributed into, schema.merge; an `if` test, schema.conditionals): drafts
    3-7 read a $ref chain alone; under an ambiguous draft URI a chain with keywords beside a
    $ref is read both ways, so None (cannot tell)."""
    if not state.draft_3_to_7:
        return resolved(state, node)
    alone = resolve_chain(state, node)
    return alone if state.ref_fallback or resolved(state, node) == alone else None


def resolve_chain(state: RewriteState, node):
    """`node` with its `$ref` chain followed (at most 32 links), the keywords beside them
    ignored."""
    for _ in range(32):
        if not (isinstance(node, dict) and "$ref" in node):
            return node
        node = resolve(state, node["$ref"], "$")
    return node


def readings(state: RewriteState) -> Readings:
    """How this rewrite reads references, for schema.one_of."""
    return Readings(
        lambda node: resolved(state, node),
        lambda node: resolve_chain(state, node),
        state.draft_3_to_7,
        state.const_unknown,
    )
