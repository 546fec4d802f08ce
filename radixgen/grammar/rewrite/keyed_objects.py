"""Free-form objects whose names follow rules (keyed objects): their rewrite into a carrier
(`rewrite_keyed_object`, for rewrite.objects), and their regex, written around the regex
outlines-core builds for their values once the whole schema is rewritten (`KeyedObjects`)."""

from __future__ import annotations

import math
import re

from radixgen.grammar.index.size_budget import check_regex_size, written_size
from radixgen.grammar.matcher import GrammarError, RegexTooLarge, refuse
from radixgen.grammar.regex.leaves import json_literal
from radixgen.grammar.rewrite.guarded import STRING_CHAR
from radixgen.grammar.rewrite.outlines import (
    NODE_BUDGET,
    bound_any_depth,
    outlines_regex,
    ref_target,
)
from radixgen.grammar.rewrite.state import RewriteState, resolved
from radixgen.grammar.rewrite.walk import first_enforceable, rewrite
from radixgen.grammar.schema.rules import NothingValid

KEYED = "x-radixgen-keyed"  # marks the carrier of a keyed object (`rewrite_keyed_object`)


def rewrite_keyed_object(state: RewriteState, node: dict, path: str) -> dict:
    """A free-form object whose names follow `propertyNames` (pydantic's dict[Literal[...], X]
    or dict[constr(pattern=...), X]) or the first `patternProperties` pattern (its names match
    it; other names are never generated; values meet every pattern's schema). Returned as a
    carrier, {"type": "object", "additionalProperties": <values>, KEYED: <placeholder>}, so
    references and recursion in the values are handled as elsewhere; json_schema then writes the
    object's regex."""
    patterns = node.get("patternProperties", {})
    if "propertyNames" in node and patterns:
        refuse("patternProperties", path, "it is not supported together with propertyNames")
    if not isinstance(patterns, dict):
        refuse("patternProperties", path, "it must be an object")
    if isinstance(node.get("type"), list) and len(node["type"]) > 1:
        refuse(
            next(k for k in ("propertyNames", "patternProperties") if k in node),
            path,
            "it is only supported with the single type object",
        )
    if node.get("required"):
        refuse("required", path, "it is not supported on an object whose names follow a pattern")
    if node.get("minProperties", 0) > node.get("maxProperties", math.inf):
        refuse("minProperties", path, "it exceeds maxProperties: no object is valid", NothingValid)
    if node.get("minProperties", 0) > 1:
        refuse("minProperties", path, "values above 1 need properties (keys could repeat)")
    if patterns:
        # names follow the first pattern; a name may match the others too, so its value meets
        # every pattern's schema (SageMaker's Environment: `[\S\s]*` and `[a-zA-Z_]\w*`): a
        # subset where a name matches fewer of them
        pattern, values = next(iter(patterns.items()))
        if len(patterns) > 1:
            values = {"allOf": list(patterns.values())}
        names = _name_schema(state, {"pattern": pattern}, f"{path}.patternProperties")
    else:
        values = node.get("additionalProperties", True)
        names = _name_schema(state, node["propertyNames"], f"{path}.propertyNames")
    if values is False or node.get("maxProperties") == 0:  # no name may be there: the empty object
        if node.get("minProperties"):
            refuse("minProperties", path, "no property is allowed")
        return {"type": "object", "maxProperties": 0}
    try:
        values = rewrite(state, values, f"{path}.additionalProperties")
    except GrammarError as exc:
        if len(patterns) < 2:
            raise
        refuse(
            "patternProperties",
            path,
            "several patterns may apply to one name, and its value "
            f"would have to meet all their schemas, which cannot be enforced here ({exc})",
        )
    # after the values' placeholders, which its regex holds (json_schema replaces it first)
    carrier = state.placeholder("", quoted=False)["const"]  # its regex: rewrite.keyed_objects
    # (a name written twice counts once after parsing: maxProperties bounds the pairs written)
    state.keyed_objects[f'"{carrier}"'] = (
        _string_regex(state, names, path),
        node.get("minProperties", 0) == 1,
        node.get("maxProperties"),
    )
    return {"type": "object", "additionalProperties": values, KEYED: carrier}


def _name_schema(state: RewriteState, schema, path: str) -> dict:
    """propertyNames' schema, rewritten as a string schema (names are strings)."""
    if isinstance(schema, dict) and "$ref" in schema:  # pydantic's dict[SomeEnum, X]
        schema = resolved(state, schema)
    if not isinstance(schema, dict) or schema.get("type", "string") != "string":
        refuse("propertyNames", path, "only a string schema is supported")
    pattern = schema.get("pattern")
    if isinstance(pattern, str) and not re.search(r"(?<!\\)(?:\\\\)*\$$", pattern):
        # a pattern matches names that contain a match: one open at its end takes any rest
        # (a name is not one match repeated: {"x-": 1, "x-": 2} is no use); where that cannot
        # be written (an alternative anchored at its end), the matches alone
        return first_enforceable(
            state,
            lambda: rewrite(
                state, {**schema, "type": "string", "pattern": f"{pattern}(?:.*)"}, path
            ),
            lambda: _name_strings(state, schema, path),
        )
    return _name_strings(state, schema, path)


def _name_strings(state: RewriteState, schema: dict, path: str) -> dict:
    names = rewrite(state, {**schema, "type": "string"}, path)
    if "enum" in names:
        names["enum"] = [v for v in names["enum"] if isinstance(v, str)]
        if not names["enum"]:
            refuse("propertyNames", path, "no value is a string")
    _string_regex(state, names, path)  # refuses what it cannot write
    return names


def _string_regex(state: RewriteState, rewritten: dict, path: str) -> str:
    """The regex of a rewritten string schema (with its quotes): an enum, a const (or the
    placeholder of a pattern or format), length bounds, or anyOf over those."""
    if len(rewritten) == 1 and next(iter(rewritten)) in ("anyOf", "oneOf"):  # (oneOf: disjoint)
        branches = next(iter(rewritten.values()))
        return "(?:" + "|".join(_string_regex(state, b, path) for b in branches) + ")"
    if "enum" in rewritten:
        return "(?:" + "|".join(json_literal(v) for v in rewritten["enum"]) + ")"
    if "const" in rewritten:
        name = f'"{rewritten["const"]}"'
        if name in state.length_strings:  # names are not guarded: the counted regex
            return state.length_strings[name][2]
        return state.placeholders.get(name, json_literal(rewritten["const"]))
    if rewritten.get("type") != "string" or set(rewritten) - {"type", "minLength", "maxLength"}:
        refuse(
            "propertyNames",
            path,
            "only enum, const, pattern, format, minLength and maxLength "
            "(or anyOf/oneOf over such schemas) are supported for property names",
        )
    least, most = rewritten.get("minLength", 0), rewritten.get("maxLength", "")
    return f'"{STRING_CHAR}{{{least},{most}}}"'


class KeyedObjects:
    """Replaces every keyed-object carrier (`rewrite_keyed_object`) by its placeholder,
    whose regex is written here: names from the carrier's name regex, values from the regex
    outlines-core builds for its additionalProperties schema alone (references inlined, inner
    carriers replaced, and the placeholders in it filled in)."""

    def __init__(self, root, state: RewriteState, whitespace: str) -> None:
        self.root = root
        self.state = state
        self.ws = whitespace
        self.nodes = 0

    def run(self):
        return self._node(self.root)

    def _node(self, node):
        self._count()
        if isinstance(node, list):
            return [self._node(sub) for sub in node]
        if not isinstance(node, dict):
            return node
        if KEYED not in node:
            return {k: self._node(v) for k, v in node.items()}
        name = f'"{node[KEYED]}"'
        keys, nonempty, most = self.state.keyed_objects[name]
        ws = self.ws
        if "additionalProperties" not in node:  # the recursion was cut there: the empty object
            if nonempty:
                raise GrammarError(
                    "recursive $ref without an exit: an object needing a property "
                    "recurses at every level"
                )
            self.state.placeholders[name] = rf"\{{{ws}\}}"
            return {"const": node[KEYED]}
        values = self._node(self._inlined(node["additionalProperties"]))
        bound_any_depth(values)
        value = outlines_regex(values, ws)
        # (the keyed object's regex holds its value twice: checked before either is written)
        check_regex_size(2 * written_size(value, self.state.placeholders))
        for placeholder, leaf in self.state.placeholders.items():
            value = value.replace(placeholder, f"(?:{leaf})")
        pair = f"{keys}{ws}:{ws}(?:{value})"
        body = f"{pair}(?:{ws},{ws}{pair})" + ("*" if most is None else f"{{0,{most - 1}}}")
        self.state.placeholders[name] = rf"\{{{ws}{body if nonempty else f'(?:{body})?'}{ws}\}}"
        return {"const": node[KEYED]}

    def _inlined(self, node):
        """`node` with every (acyclic, by now) reference replaced by its target."""
        self._count()
        if isinstance(node, list):
            return [self._inlined(sub) for sub in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            return self._inlined(ref_target(self.root, node["$ref"]))
        return {k: self._inlined(v) for k, v in node.items() if k not in ("$defs", "definitions")}

    def _count(self) -> None:
        self.nodes += 1
        if self.nodes > NODE_BUDGET:
            raise RegexTooLarge(
                "json_schema expands to too large a grammar (its references written out)"
            )
