"""A rewritten JSON Schema (rewrite.rewriter's output) as a context-free grammar over JSON tokens.

json_schema compiles a schema to one regex; where that regex would pass its size budget (nested
objects with many optional properties multiply, each use of a `$ref` copies its subschema), the
schema is compiled here instead, to rules that share what the regex copies: every `$ref` target
is one rule, an object's optional properties a chain of rules linear in their number, and each
scalar (a string with its pattern, a number range, an enum of scalars) one terminal whose regex
is outlines-core's for that scalar. The rules read the rewritten schema as outlines-core does
(the first of properties, allOf, anyOf, oneOf, prefixItems, enum, const, $ref and type that a
node has decides it; properties in their order, the required ones present), so a schema means
the same on both paths; anything else is refused, naming the keyword.

Output: `JsonGrammar`, the rules (name -> alternatives, each a list of symbols) and the
terminals (name -> regex over one JSON token); json_grammar.tokens types the tokens,
json_grammar.cfg builds the matcher. Whitespace is compact (no whitespace between tokens).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from outlines_core.json_schema import build_regex_from_schema

from radixgen.grammar.cfg.terminal_regex import ByteDfa
from radixgen.grammar.json_grammar.regex_rules import RegexRules
from radixgen.grammar.json_grammar.tokens import starts_container
from radixgen.grammar.matcher import GrammarError
from radixgen.grammar.rewrite.keyed_objects import KEYED

ANY_DEPTH = 2  # outlines-core's nesting for a value with no constraints
# An object's n optional properties put ~n items in each of its ~n parser states: the LALR
# analysis (time and memory) grows with the sum of n * n over objects. The largest schema of the
# corpora that compiles sums ~20,000 (about a minute); one of 35,588 properties sums 9.5 million
# (minutes and 15 GB before it was stopped).
ITEM_BUDGET = 1_000_000
RULE_BUDGET = 50_000
SCALAR_TYPES = ("string", "number", "integer", "boolean", "null")
PUNCTUATION = {"{": r"\{", "}": r"\}", "[": r"\[", "]": r"\]", ",": ",", ":": ":"}
# what outlines-core reads, in its order: the first a node has decides it
_DECIDING = (
    "properties",
    "allOf",
    "anyOf",
    "oneOf",
    "prefixItems",
    "enum",
    "const",
    "$ref",
    "type",
)
_PLACEHOLDER = re.compile(r'"RGPH[0-9a-f]+x[0-9]+"')  # rewrite.rewriter's placeholder names, quoted
_STRUCTURAL = {
    "properties",
    "allOf",
    "anyOf",
    "oneOf",
    "prefixItems",
    "items",
    "additionalProperties",
}


# bytes a compact JSON token may start with, or a number continue with
_JSON_BYTES = frozenset(b'"-+.0123456789eEtfn{}[],:')


@dataclass
class JsonGrammar:
    rules: dict[str, list[list[str]]]  # rule name -> alternatives (lists of rule / terminal names)
    terminals: dict[
        str, "str | ByteDfa"
    ]  # terminal name -> regex (or DFA) of the JSON tokens it matches
    start: str = "start"
    tags: tuple[str, ...] = ()  # terminals that are literal tags around the JSON, not JSON tokens
    whitespace: str = (
        ""  # the regex of the whitespace in each gap between tokens (json_grammar.tokens)
    )

    def framed(self, opener: str, closer: str) -> "JsonGrammar":
        """The grammar of `opener`, an instance and `closer` (tool_calls' tags around the calls).
        The tags lex by maximal munch beside JSON tokens only if neither starts with a byte a
        JSON token starts or continues with, and neither is a prefix of the other."""
        for tag in (opener, closer):
            if (
                not tag
                or tag.encode()[0] in _JSON_BYTES
                or opener.startswith(closer)
                or closer.startswith(opener)
            ):
                raise GrammarError(
                    f"tool call tags {opener!r} / {closer!r} cannot frame a JSON grammar"
                )
        tags = {"TAG_OPEN": re.escape(opener), "TAG_CLOSE": re.escape(closer)}
        rules = {
            **self.rules,
            self.start: [["TAG_OPEN", *alt, "TAG_CLOSE"] for alt in self.rules[self.start]],
        }
        if self.whitespace:
            raise GrammarError("tool call tags frame compact JSON only")
        return JsonGrammar(
            rules, {**self.terminals, **tags}, self.start, (*self.tags, *tags.values())
        )


class SchemaGrammar:
    """One use: `build()` the grammar of a rewritten schema, with the placeholders its `const`s
    stand for (rewrite.rewriter) and `ref_target` to resolve its `$ref`s."""

    def __init__(
        self, root, placeholders: dict[str, str], ref_target, keyed_objects: dict | None = None
    ) -> None:
        """`keyed_objects`: the rewriter's records of its keyed-object carriers (placeholder ->
        (name regex, nonempty, maxProperties))."""
        self.root, self.placeholders, self.ref_target = root, placeholders, ref_target
        self.keyed_objects = keyed_objects or {}
        self.rules: dict[str, list[list[str]]] = {}
        self._terminal_names: dict[str, str] = {}  # regex -> terminal name
        self._ref_rules: dict[str, str] = {}
        self._scalar_regex: dict[int, str | None] = {}  # id(node) -> regex (None: not a scalar)
        self._any: dict[int, str] = {}
        self._values: dict[str, str] = {}  # a node's JSON text -> its symbol
        self._items = 0  # the parser items objects make (ITEM_BUDGET)
        self._dfas: dict[str, ByteDfa] = {}  # terminals given by a DFA
        self._colons: set[str] = set()  # terminals of a key's colon
        self._regex_rules = RegexRules(self)

    def build(self) -> JsonGrammar:
        self.rules["start"] = [[self.value(self.root, "$")]]
        terminals = {
            name: self._dfas.get(name, PUNCTUATION[":"] if name in self._colons else regex)
            for regex, name in self._terminal_names.items()
        }
        keep_productive(self.rules, terminals)
        return JsonGrammar(self.rules, terminals)

    # symbols -----------------------------------------------------------------------------
    def terminal(self, regex: str) -> str:
        name = self._terminal_names.get(regex)
        if name is None:
            name = self._terminal_names[regex] = f"T{len(self._terminal_names)}"
        return name

    def terminal_dfa(self, key: str, dfa: ByteDfa) -> str:
        """A terminal given by its DFA (json_grammar.regex_rules), named by `key`."""
        name = self.terminal("\x00dfa " + key)
        self._dfas[name] = dfa
        return name

    def colon(self, key: str) -> str:
        """The `:` after the key terminal `key`, a terminal of its own: the lexer starts a token
        among the terminals that can follow the one before it (json_grammar.tokens), so a value is
        lexed among its key's values only, not every value of the schema."""
        name = self.terminal("\x00colon " + key)
        self._colons.add(name)
        return name

    def punct(self, char: str) -> str:
        return self.terminal(PUNCTUATION[char])

    def empty(self) -> str:
        """The rule of the empty text."""
        if "e" not in self.rules:
            self.rules["e"] = [[]]
        return "e"

    def repeats(self, item: str, most: int | None) -> str:
        """The rule of 0..`most` (None: any number of) `item`s in a row."""
        if most is None:
            tail = self.rule([[]], "m")
            self.rules[tail] = [[], [item, tail]]
            return tail
        tail = self.empty()
        for _ in range(most):
            tail = self.rule([[], [item, tail]], "t")
        return tail

    def rule(self, alternatives: list[list[str]], hint: str = "r") -> str:
        if len(self.rules) >= RULE_BUDGET:
            raise GrammarError(
                f"json_schema is too large even as a grammar (more than {RULE_BUDGET:,} rules)"
            )
        name = f"{hint}{len(self.rules)}"
        self.rules[name] = [list(alt) for alt in dict.fromkeys(tuple(alt) for alt in alternatives)]
        return name

    # values ------------------------------------------------------------------------------
    def value(self, node, path: str) -> str:
        """The symbol of the JSON values `node` accepts (a terminal for a scalar, else a rule);
        one per node (the rewritten schema shares subschemas)."""
        key = (
            json.dumps(node) if isinstance(node, dict) else repr(node)
        )  # (copies share their rules)
        symbol = self._values.get(key)
        if symbol is None:
            symbol = self._values[key] = self._value(node, path)
        return symbol

    def _value(self, node, path: str) -> str:
        regex = self.scalar_regex(node, path)
        if regex is not None:
            return self.terminal(regex)
        if node is True or node == {}:
            return self.any_value(ANY_DEPTH)
        if not isinstance(node, dict):
            raise GrammarError(
                f"json_schema: unsupported subschema {json.dumps(node)[:80]} at {path}"
            )
        if KEYED in node:
            return self.keyed(node, path)
        deciding = next((k for k in _DECIDING if k in node), None)
        if deciding == "properties":
            return self.object(node, path)
        if deciding == "allOf":
            if len(node["allOf"]) != 1:
                raise GrammarError(
                    f"unsupported JSON Schema keyword 'allOf' at {path} (in a schema too large "
                    "for one regex, allOf keeps one member)"
                )
            return self.value(node["allOf"][0], f"{path}.allOf[0]")
        if deciding in ("anyOf", "oneOf"):
            return self.alternatives(node[deciding], f"{path}.{deciding}")
        if deciding == "prefixItems":
            return self.tuple_items(node["prefixItems"], path)
        if deciding in ("enum", "const"):
            values = node["enum"] if deciding == "enum" else [node["const"]]
            return self.rule([self.literal(v, path) for v in values])
        if deciding == "$ref":
            return self.ref(node["$ref"])
        if deciding == "type":
            types = node["type"] if isinstance(node["type"], list) else [node["type"]]
            scalars = [
                t for t in types if t in SCALAR_TYPES
            ]  # (one terminal: integer and number overlap)
            symbols = [self.terminal(self._types_regex(node, scalars, path))] if scalars else []
            symbols += [self.typed(node, t, path) for t in types if t not in SCALAR_TYPES]
            return symbols[0] if len(symbols) == 1 else self.rule([[s] for s in symbols])
        if node.get("depth") is not None or not set(node) & _STRUCTURAL:
            return self.any_value(node.get("depth", ANY_DEPTH))
        raise GrammarError(f"json_schema: unsupported subschema at {path} ({sorted(node)})")

    def ref(self, ref: str) -> str:
        name = self._ref_rules.get(ref)
        if name is None:
            name = self._ref_rules[ref] = f"d{len(self._ref_rules)}"
            self.rules[name] = []  # reserved: a reference cycle reaches it before it is written
            self.rules[name] = [[self.value(self.ref_target(self.root, ref), ref)]]
        return name

    def alternatives(self, options: list, path: str) -> str:
        """anyOf / oneOf: the scalar options are one terminal (their regexes' union: overlapping
        scalars are otherwise two parses of one token), each other option its own alternative."""
        scalars, others = [], []
        for i, option in enumerate(options):
            regex = self.scalar_regex(option, f"{path}[{i}]")
            if regex is not None:
                scalars.append(regex)
            else:
                others.append([self.value(option, f"{path}[{i}]")])
        if scalars:
            others.insert(0, [self.terminal(_union(scalars))])
        others = list(dict.fromkeys(symbol for [symbol] in others))  # (copies are one symbol)
        return others[0] if len(others) == 1 else self.rule([[symbol] for symbol in others])

    def typed(self, node: dict, kind: str, path: str) -> str:
        """The values of a container type (`object` or `array`) as outlines-core reads them."""
        if kind == "object":
            if node.get("maxProperties") == 0:
                return self.rule([[self.punct("{"), self.punct("}")]])
            extra = node.get("additionalProperties", True)
            depth = node.get("depth", ANY_DEPTH)
            values = (
                self.any_value(depth)
                if extra is True
                else self.value(extra, f"{path}.additionalProperties")
            )
            return self.dictionary(values, nonempty=(node.get("minProperties") or 0) > 0)
        if kind == "array":
            items = node.get("items")
            if items is None:
                return self.any_array(node.get("depth", ANY_DEPTH))
            if not isinstance(items, (dict, bool)):
                raise GrammarError(
                    f"unsupported JSON Schema keyword 'items' at {path} (an array of schemas)"
                )
            return self.array(
                self.value(items, f"{path}.items"), node.get("minItems", 0), node.get("maxItems")
            )
        raise GrammarError(f"json_schema: unsupported type {kind!r} at {path}")

    # containers --------------------------------------------------------------------------
    def object(self, node: dict, path: str) -> str:
        """`{` the properties in order, the required ones present, comma-separated `}`: rules
        first_i (none written yet) and next_i (some written) over properties i.., linear in
        their number."""
        props = list(node["properties"].items())
        required = set(node.get("required", []))
        self._items += len(props) ** 2
        if self._items > ITEM_BUDGET:
            raise GrammarError(
                "json_schema is too large even as a grammar (its objects' optional properties "
                f"make more than {ITEM_BUDGET:,} parser items: the sum over objects of the number "
                "of properties squared)"
            )
        keys = [self.terminal(re.escape(json.dumps(name, ensure_ascii=False))) for name, _ in props]
        pairs = [
            [key, self.colon(key), self.value(schema, f"{path}.properties.{name}")]
            for key, (name, schema) in zip(keys, props)
        ]
        first = later = self.empty()
        for i in range(len(props) - 1, -1, -1):
            optional = props[i][0] not in required
            first_i = [pairs[i] + [later]] + ([[first]] if optional else [])
            later_i = [[self.punct(",")] + pairs[i] + [later]] + ([[later]] if optional else [])
            first, later = self.rule(first_i, "f"), self.rule(later_i, "n")
        return self.rule([[self.punct("{"), first, self.punct("}")]], "o")

    def dictionary(
        self, values: str, nonempty: bool, names: str | None = None, most: int | None = None
    ) -> str:
        """`{` names (any string, or the JSON strings the regex `names` matches), each with a
        value of `values`, at most `most` of them `}` (names may repeat, as outlines-core writes
        it; the validators read the last)."""
        key = self.terminal(names if names is not None else self._outlines({"type": "string"}, "$"))
        pair = self.rule([[key, self.colon(key), values]], "p")
        return self.rule(
            [[self.punct("{")] + self.listed(pair, 1 if nonempty else 0, most) + [self.punct("}")]],
            "o",
        )

    def keyed(self, node: dict, path: str) -> str:
        """A keyed object (rewrite.keyed_objects' carrier): names from its name regex, values of its
        additionalProperties, as rewrite.keyed_objects writes its regex."""
        names, nonempty, most = self.keyed_objects[f'"{node[KEYED]}"']
        if (
            "additionalProperties" not in node
        ):  # the recursion was cut there (Unroll): the empty object
            if nonempty:
                raise GrammarError(
                    "recursive $ref without an exit: an object needing a property "
                    "recurses at every level"
                )
            return self.rule([[self.punct("{"), self.punct("}")]], "o")
        values = self.value(node["additionalProperties"], f"{path}.additionalProperties")
        return self.dictionary(values, nonempty, self._filled(names), most)

    def array(self, item: str, min_items: int, max_items: int | None) -> str:
        return self.rule(
            [[self.punct("[")] + self.listed(item, min_items, max_items) + [self.punct("]")]], "a"
        )

    def tuple_items(self, items: list, path: str) -> str:
        symbols = [self.punct("[")]
        for i, item in enumerate(items):
            symbols += ([self.punct(",")] if i else []) + [
                self.value(item, f"{path}.prefixItems[{i}]")
            ]
        return self.rule([symbols + [self.punct("]")]], "a")

    def listed(self, item: str, low: int, high: int | None) -> list[str]:
        """Symbols of `low`..`high` (None: any number) comma-separated `item`s."""
        if high is not None and high < low:
            raise GrammarError(f"json_schema: minItems {low} above maxItems {high}")
        if high == 0:
            return []
        more = self.rule([[self.punct(","), item]], "c")
        tail = self.repeats(more, None if high is None else high - max(low, 1))
        body = [item] + [more] * (max(low, 1) - 1) + [tail]
        return body if low > 0 else [self.rule([[], body], "l")]

    def any_value(self, depth: int) -> str:
        """Any JSON value, containers nested at most `depth` levels (outlines-core's `depth`)."""
        name = self._any.get(depth)
        if name is None:
            scalar = self.terminal(_union([self._outlines({"type": t}, "$") for t in SCALAR_TYPES]))
            if depth <= 0:
                return scalar
            inner = self.any_value(depth - 1)
            name = self._any[depth] = self.rule(
                [[scalar], [self.dictionary(inner, False)], [self.array(inner, 0, None)]], "v"
            )
        return name

    def any_array(self, depth: int) -> str:
        return self.array(self.any_value(max(depth - 1, 0)), 0, None)

    def literal(self, value, path: str) -> list[str]:
        """Symbols of one enum / const value's JSON text (a string const may be a placeholder)."""
        if isinstance(value, dict):
            symbols = [self.punct("{")]
            for i, (k, v) in enumerate(value.items()):
                key = self.terminal(_json_regex(k))
                symbols += ([self.punct(",")] if i else []) + [key, self.colon(key)]
                symbols += self.literal(v, path)
            return symbols + [self.punct("}")]
        if isinstance(value, list):
            symbols = [self.punct("[")]
            for i, v in enumerate(value):
                symbols += ([self.punct(",")] if i else []) + self.literal(v, path)
            return symbols + [self.punct("]")]
        regex = self._literal_regex(value)
        if starts_container(regex):  # a placeholder for a whole object or array
            return [self._regex_rules.symbol(regex, path)]
        return [self.terminal(regex)]

    # scalars -----------------------------------------------------------------------------
    def scalar_regex(self, node, path: str) -> str | None:
        """The regex of the one JSON token each value of `node` is, or None when a value may be
        an object or an array (or the node is not one outlines-core reads as a scalar)."""
        key = id(node)
        if key in self._scalar_regex:
            return self._scalar_regex[key]
        self._scalar_regex[key] = None  # (a reference cycle through scalars is not one)
        found = self._find_scalar(node, path)
        self._scalar_regex[key] = found
        return found

    def _find_scalar(self, node, path: str) -> str | None:
        if not isinstance(node, dict):
            return None
        deciding = next((k for k in _DECIDING if k in node), None)
        if deciding in ("anyOf", "oneOf"):
            found = [
                self.scalar_regex(o, f"{path}.{deciding}[{i}]")
                for i, o in enumerate(node[deciding])
            ]
            return _union(found) if found and None not in found else None
        if deciding == "allOf":
            return (
                self.scalar_regex(node["allOf"][0], f"{path}.allOf[0]")
                if len(node["allOf"]) == 1
                else None
            )
        if deciding in ("enum", "const"):
            values = node["enum"] if deciding == "enum" else [node["const"]]
            if not values or any(isinstance(v, (dict, list)) for v in values):
                return None
            found = [self._literal_regex(v) for v in values]
            return None if any(starts_container(r) for r in found) else _union(found)
        if deciding == "$ref":
            return self.scalar_regex(self.ref_target(self.root, node["$ref"]), node["$ref"])
        if deciding == "type":
            types = node["type"] if isinstance(node["type"], list) else [node["type"]]
            if not types or any(t not in SCALAR_TYPES for t in types):
                return None
            return self._types_regex(node, types, path)
        return None

    def _types_regex(self, node: dict, types: list[str], path: str) -> str:
        """The union of outlines-core's regexes of `node` as each of the scalar `types`."""
        return _union([self._outlines({**_scalar_part(node), "type": t}, path) for t in types])

    def _literal_regex(self, value) -> str:
        text = json.dumps(value, ensure_ascii=False)
        leaf = self.placeholders.get(text)
        return f"(?:{leaf})" if leaf is not None else _json_regex(value)

    def _outlines(self, node: dict, path: str) -> str:
        """outlines-core's regex of a scalar node, its placeholders written out."""
        try:
            regex = build_regex_from_schema(json.dumps(node), "", 1)
        except (ValueError, RuntimeError, TypeError) as exc:
            raise GrammarError(f"cannot compile json_schema at {path}: {exc}") from None
        return self._filled(regex)

    def _filled(self, regex: str) -> str:
        """`regex` with its placeholders written out."""
        return _PLACEHOLDER.sub(
            lambda m: f"(?:{self.placeholders.get(m.group(0), m.group(0))})", regex
        )


def keep_productive(rules: dict[str, list[list[str]]], terminals: dict[str, str]) -> None:
    """Drop the alternatives no finite text completes (a recursive `$ref` required at every
    level): a generation that entered one could never end. Refused when nothing is left."""
    done, changed = set(terminals), True
    while changed:
        changed = False
        for name, alternatives in rules.items():
            if name not in done and any(all(s in done for s in alt) for alt in alternatives):
                done.add(name)
                changed = True
    if "start" not in done:
        raise GrammarError(
            "json_schema: no finite instance (a recursive $ref without an exit: it is required "
            "at every level)"
        )
    for name in list(rules):
        if name in done:
            rules[name] = [alt for alt in rules[name] if all(s in done for s in alt)]
        else:
            del rules[name]


def _scalar_part(node: dict) -> dict:
    """The keywords of `node` outlines-core reads for a scalar type."""
    return {
        k: v
        for k, v in node.items()
        if k not in _STRUCTURAL and k not in ("type", "$ref", "$defs", "definitions")
    }


def _json_regex(value) -> str:
    return re.escape(json.dumps(value, ensure_ascii=False))


def _union(regexes: list[str]) -> str:
    unique = list(dict.fromkeys(regexes))
    return unique[0] if len(unique) == 1 else "(?:" + "|".join(f"(?:{r})" for r in unique) + ")"
