"""Where a rewritten schema puts the arrays and strings `UniqueGuard` keeps (`GuardSites`): the
guard tells places apart only by instance path, so a place it keeps must not be shared with a
value it should not keep (refused, or left to the counted regex)."""

from __future__ import annotations

from radixgen.grammar.matcher import GrammarError
from radixgen.grammar.rewrite.guarded import COUNTED
from radixgen.grammar.rewrite.outlines import NODE_BUDGET, ref_target
from radixgen.grammar.rewrite.state import RewriteState
from radixgen.grammar.rewrite.unique_keys import UNIQUE_KEY


class GuardSites:
    """Where arrays and strings can appear in a rewritten schema, as instance paths (property
    names, None for any key or index; references followed, none cyclic by now). `UniqueGuard`
    tells places apart only by path:
    - a unique array's path must not be shared with another array, whose items it would then
      wrongly keep unique (a bounded string item could leave no way out): refused;
    - a length-guarded string's path must not be shared with another string (of other bounds, a
      pattern, a literal), nor a counted array's with an array of other counts: there they keep
      their counted regex instead (`state.placeholders`, the COUNTED node's own counts)."""

    def __init__(self, root, state: RewriteState) -> None:
        self.root = root
        self.state = state
        self.guarded: list[tuple] = []  # (path, item kind) of unique arrays
        self.arrays: list[
            tuple
        ] = []  # (path, counts the guard keeps or None, the counted node or placeholder)
        self.lengths: list[tuple] = []  # (path, placeholder) of length-guarded strings
        self.strings: list[tuple] = []  # paths of other strings
        self.nodes = 0
        self._walking: set[str] = set()  # the references being walked (a cycle is refused)

    def guard_paths(self) -> tuple:
        """(path, kind) for UniqueGuard: kind "string" / "integer" (a unique array's items),
        ("bounded", item regex) (a unique array of strings that can run out of values), ("key",
        name, one of those string kinds) (a unique array of objects, by their property `name`),
        ("length", minLength, maxLength) (a string value) or ("items", maxItems) (an array's
        item count)."""
        self._walk(self.root, ())
        others = [
            p
            for p, _, where in self.arrays
            if not (
                isinstance(where, str)
                and where in self.state.unique_arrays
                or isinstance(where, dict)
                and UNIQUE_KEY in where
            )
        ]
        for guarded, kind in self.guarded:  # guarded arrays of another item kind count as others
            for other in others + [p for p, k in self.guarded if k != kind]:
                if _overlap(guarded, other):
                    shown = "$" + "".join("[*]" if p is None else f".{p}" for p in guarded)
                    raise GrammarError(
                        "unsupported JSON Schema keyword 'uniqueItems' at "
                        f"{shown}: another array of the schema can appear at the "
                        "same place (uniqueness over free strings or integers is "
                        "only enforced where no other array can be)"
                    )
        return tuple(dict.fromkeys(self.guarded + self._lengths() + self._counts()))

    def _lengths(self) -> list:
        bounds = {name: info[:2] for name, info in self.state.length_strings.items()}
        strings, lengths = (
            _PathIndex(),
            _PathIndex(),
        )  # (thousands of each in CloudFormation's largest)
        for path in set(self.strings):
            strings.add(path, None)
        for path, name in set(self.lengths):
            lengths.add(path, bounds[name])
        shared = {
            name
            for path, name in self.lengths
            if strings.overlapping(path) or lengths.overlapping(path) - {bounds[name]}
        }
        for name in shared:
            self.state.placeholders[name] = self.state.length_strings[name][2]
        return [
            (path, ("length", *bounds[name])) for path, name in self.lengths if name not in shared
        ]

    def _counts(self) -> list:
        counted = [
            (path, counts, where) for path, counts, where in self.arrays if counts is not None
        ]
        shared = {
            _identity(where)
            for path, counts, where in counted
            if any(_overlap(path, p) and c != counts for p, c, _ in self.arrays)
        }
        kept = []
        for path, counts, where in counted:
            if _identity(where) in shared:  # back to the counted regex
                if isinstance(where, dict):
                    if COUNTED in where:
                        where["maxItems"] = where.pop(COUNTED)
                else:
                    self.state.placeholders[where] = self.state.counted_arrays[where][1]
            else:
                kept.append((path, ("items", counts)))
        return kept

    def _walk(self, node, path: tuple) -> None:
        self.nodes += 1
        if self.nodes > NODE_BUDGET:
            raise GrammarError("json_schema expands to too large a grammar")
        if not isinstance(node, dict):
            return
        if "$ref" in node:
            ref = node["$ref"]
            if (
                ref in self._walking
            ):  # (references unrolled where they recurse, unless too large to be)
                raise GrammarError(
                    f"json_schema: the reference {ref!r} recurses, too deeply to be written out, "
                    "in a schema whose uniqueItems, maxLength or maxItems need a guard (the guard "
                    "tells places apart by their path, and a recursion has paths of every depth)"
                )
            self._walking.add(ref)
            self._walk(ref_target(self.root, ref), path)
            self._walking.discard(ref)
            return
        name = f'"{node["const"]}"' if isinstance(node.get("const"), str) else None
        if name in self.state.unique_arrays:
            self.guarded.append((path, self.state.unique_arrays[name]))
            counts = self.state.counted_arrays.get(name)
            self.arrays.append((path, None if counts is None else counts[0], name))
        elif UNIQUE_KEY in node:  # an array of objects kept unique by one property
            key, kind = node[
                UNIQUE_KEY
            ]  # (key: a name, or the path of two names into an object property)
            self.guarded.append((path, ("key", key if isinstance(key, str) else tuple(key), kind)))
        elif name in self.state.length_strings:
            self.lengths.append((path, name))
        elif name is not None and name not in self.state.keyed_objects:  # any other placeholder
            self.strings.append(path)
        for value in self.state.literal_arrays.get(name, ()):
            _literal_leaves(value, path, self.arrays, self.strings)
        if "const" in node and name is None:
            _literal_leaves(node["const"], path, self.arrays, self.strings)
        for value in node.get("enum", []):
            _literal_leaves(value, path, self.arrays, self.strings)
        types = node.get("type")
        types = types if isinstance(types, list) else [types]
        if "string" in types:
            self.strings.append(path)
        if "items" in node or "prefixItems" in node or "array" in types:
            self.arrays.append((path, node.get(COUNTED), node))
        for key, sub in node.get("properties", {}).items():
            self._walk(sub, path + (key,))
        for sub in node.get("allOf", []) + node.get("anyOf", []) + node.get("oneOf", []):
            self._walk(sub, path)
        for sub in node.get("prefixItems", []) + [
            node.get("items"),
            node.get("additionalProperties"),
        ]:
            self._walk(sub, path + (None,))


def _identity(where):
    """A counted array's key: its placeholder's name, or its node's identity."""
    return where if isinstance(where, str) else id(where)


class _PathIndex:
    """Instance paths (None: any key or index) with a value each, as a trie: the values of the
    paths that can name the same place as a given one, without comparing it with every path."""

    def __init__(self) -> None:
        self.root: dict = {}

    def add(self, path: tuple, value) -> None:
        node = self.root
        for part in path:
            node = node.setdefault(part, {})
        node.setdefault(_END, set()).add(value)

    def overlapping(self, path: tuple) -> set:
        nodes = [self.root]
        for part in path:
            found = []
            for node in nodes:
                if part is None:
                    found += [child for key, child in node.items() if key is not _END]
                else:
                    found += [
                        child for child in (node.get(part), node.get(None)) if child is not None
                    ]
            nodes = found
        return set().union(*(node.get(_END, ()) for node in nodes))


_END = ("end",)  # (a key no path part can be: parts are strings or None)


def _overlap(path: tuple, other: tuple) -> bool:
    """Whether two instance paths (None: any key or index) can name the same place."""
    return len(path) == len(other) and all(
        a is None or b is None or a == b for a, b in zip(path, other)
    )


def _literal_leaves(value, path: tuple, arrays: list, strings: list) -> None:
    """The arrays (path, None, value) and the paths of the strings inside a JSON value (an
    enum/const literal)."""
    if isinstance(value, list):
        arrays.append((path, None, value))
        for item in value:
            _literal_leaves(item, path + (None,), arrays, strings)
    elif isinstance(value, dict):
        for key, item in value.items():
            _literal_leaves(item, path + (key,), arrays, strings)
    elif isinstance(value, str):
        strings.append(path)
