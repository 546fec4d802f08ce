"""Emit a Lark grammar from parsed GBNF rules (see radixgen.grammar.cfg.ebnf for the scheme)."""

from __future__ import annotations

import json
import re


def _cp_escape(c: str) -> str:
    return f"\\U{ord(c):08x}" if ord(c) > 0xFFFF else f"\\u{ord(c):04x}"


def _children(node: tuple) -> list[tuple]:
    if node[0] in ("alt", "seq"):
        return node[1]
    return [node[1]] if node[0] == "rep" else []


class LarkEmitter:
    def __init__(self, rules: dict[str, tuple]) -> None:
        self.rules = rules
        self._regular: dict[str, bool] = {}
        self.rule_names = self._lark_names()
        self.terminals: dict[str, str] = {}  # GBNF rule -> terminal definition line

    def _lark_names(self) -> dict[str, str]:
        names, used = {"root": "start"}, {"start"}
        for name in self.rules:
            if name == "root":
                continue
            base = "r_" + re.sub(r"[^a-z0-9_]", "_", name.lower())
            cand, k = base, 1
            while cand in used:
                cand, k = f"{base}_{k}", k + 1
            used.add(cand)
            names[name] = cand
        return names

    # ---- regularity and nullability ----
    def is_regular(self, name: str, path: frozenset = frozenset()) -> bool:
        """True if the rule reaches no recursion (it is then a regular language)."""
        if name in self._regular:
            return self._regular[name]
        if name in path:
            return False
        refs = self._refs(self.rules[name])
        ok = all(self.is_regular(r, path | {name}) for r in refs)
        if not path or not ok:
            self._regular[name] = ok
        return ok

    def _refs(self, node: tuple) -> set[str]:
        if node[0] == "ref":
            return {node[1]}
        return set().union(*(self._refs(c) for c in _children(node))) if _children(node) else set()

    def nullable(self, node: tuple) -> bool:
        kind = node[0]
        if kind == "lit":
            return node[1] == ""
        if kind in ("cls", "any"):
            return False
        if kind == "seq":
            return all(self.nullable(c) for c in node[1])
        if kind == "alt":
            return any(self.nullable(c) for c in node[1])
        if kind == "rep":
            return node[2] == 0 or self.nullable(node[1])
        return self.nullable(self.rules[node[1]])

    def non_empty(self, node: tuple) -> tuple | None:
        """A node for the non-empty part of the language (regular nodes only); None if empty."""
        if not self.nullable(node):
            return node
        kind = node[0]
        if kind == "ref":
            return self.non_empty(self.rules[node[1]])
        if kind == "alt":
            branches = [b for b in (self.non_empty(c) for c in node[1]) if b is not None]
            return ("alt", [("seq", [b]) for b in branches]) if branches else None
        if kind == "seq":
            if not node[1]:
                return None
            head, rest = node[1][0], ("seq", node[1][1:])
            first, later = self.non_empty(head), self.non_empty(rest)
            options = ([("seq", [first, rest])] if first else []) + ([later] if later else [])
            return ("alt", options) if options else None
        if kind == "rep":
            body = self.non_empty(node[1])
            if body is None or node[3] == 0:
                return None
            return ("seq", [body, ("rep", node[1], 0, None if node[3] is None else node[3] - 1)])
        return None

    # ---- regex for regular nodes ----
    def regex(self, node: tuple) -> str:
        kind = node[0]
        if kind == "lit":
            return "".join(
                c
                if c.isascii() and c.isalnum()
                else "\\" + c
                if 32 < ord(c) < 127 and c != "/"
                else _cp_escape(c)
                for c in node[1]
            )
        if kind == "any":
            return "(?s:.)"
        if kind == "cls":
            body = "".join(
                _cp_escape(a) if a == b else f"{_cp_escape(a)}-{_cp_escape(b)}" for a, b in node[2]
            )
            return f"[{'^' if node[1] else ''}{body}]"
        if kind == "seq":
            return "".join(f"(?:{self.regex(c)})" for c in node[1])
        if kind == "alt":
            return "(?:" + "|".join(self.regex(c) for c in node[1]) + ")"
        if kind == "rep":
            lo, hi = node[2], node[3]
            quant = {(0, None): "*", (1, None): "+", (0, 1): "?"}.get((lo, hi))
            quant = quant or (f"{{{lo},}}" if hi is None else f"{{{lo},{hi}}}")
            return f"(?:{self.regex(node[1])}){quant}"
        return self.regex(self.rules[node[1]])

    # ---- Lark text ----
    def terminal_ref(self, name: str) -> str:
        """A rule used as a terminal: `T_NAME` or `T_NAME?`, or "" when it only matches ""."""
        return self._terminal(name, "T_" + self.rule_names[name].upper(), self.rules[name])

    def _terminal(self, key: str, term: str, node: tuple) -> str:
        if key not in self.terminals:
            ne = self.non_empty(node)
            pattern = self.regex(ne).replace("/", "\\/") if ne is not None else None
            self.terminals[key] = f"{term}: /{pattern}/" if pattern is not None else ""
        if not self.terminals[key]:
            return ""
        return f"{term}?" if self.nullable(node) else term

    def _regular_node(self, node: tuple) -> bool:
        return all(self.is_regular(r) for r in self._refs(node))

    def _only_literals(self, node: tuple) -> bool:
        return node[0] == "lit" or (
            node[0] in ("alt", "seq") and all(map(self._only_literals, node[1]))
        )

    def _sequence(self, items: list[tuple]) -> str:
        """Maximal runs of regular items become one terminal each (so the lexer sees words,
        not characters); runs of plain literals stay Lark strings."""
        parts, run = [], []
        for item in items + [None]:
            if item is not None and self._regular_node(item):
                run.append(item)
                continue
            if run and all(map(self._only_literals, run)) or len(run) == 1 and run[0][0] == "ref":
                parts.extend(self.expansion(r) for r in run)
            elif run:
                key = "anon " + self.regex(("seq", run))
                parts.append(self._terminal(key, f"T_ANON_{len(self.terminals)}", ("seq", run)))
            run = []
            if item is not None:
                parts.append(self.expansion(item))
        return " ".join(p for p in parts if p)

    def expansion(self, node: tuple) -> str:
        kind = node[0]
        if kind == "lit":
            return json.dumps(node[1], ensure_ascii=False) if node[1] else ""
        if kind in ("cls", "any"):
            return "/" + self.regex(node).replace("/", "\\/") + "/"
        if kind == "ref":
            if self.is_regular(node[1]):
                return self.terminal_ref(node[1])
            return self.rule_names[node[1]]
        if kind == "seq":
            return self._sequence(node[1])
        if kind == "alt":
            parts = [self.expansion(c) for c in node[1]]
            full = [p for p in parts if p]
            if not full:
                return ""
            body = "(" + " | ".join(full) + ")"
            return body + "?" if len(full) < len(parts) else body
        return self._repetition(node)

    def _repetition(self, node: tuple) -> str:
        inner, lo, hi = self.expansion(node[1]), node[2], node[3]
        suffix = {(0, None): "*", (1, None): "+", (0, 1): "?"}.get((lo, hi))
        if not inner or hi == 0:
            return ""
        if suffix:
            return f"({inner}){suffix}"
        if hi is None:
            return f"({inner}) ~ {lo} ({inner})*"
        return f"(({inner}) ~ 1..{hi})?" if lo == 0 else f"({inner}) ~ {lo}..{hi}"

    def emit(self) -> str:
        lines = []
        for name, ast in self.rules.items():
            if name == "root" and self.is_regular(name):
                lines.append(f"start: {self.terminal_ref(name)}")
            elif not self.is_regular(name):
                lines.append(f"{self.rule_names[name]}: {self.expansion(ast)}")
        lines.extend(t for t in self.terminals.values() if t)
        return "\n".join(lines) + "\n"
