"""Small JSON Schema rules used by `schema_check`: oneOf disjointness, numeric bounds, types."""

from __future__ import annotations

import math

from .matcher import GrammarError

_PY_TYPES = {"string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
             "null": (type(None),), "array": (list,), "object": (dict,)}
_COUNTS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties")


def check_counts(node: dict, path: str) -> None:
    """Length/size keywords must be integers >= 0 (outlines-core reads others as absent)."""
    for key in _COUNTS:
        value = node.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise GrammarError(f"unsupported JSON Schema keyword {key!r} at {path}: "
                               f"{value!r} is not an integer >= 0")


def disjoint(options: list) -> bool:
    """True when no JSON value can match two of the (rewritten, ref-resolved) alternatives."""
    kinds = [_kinds(o) for o in options]
    if all(k is not None for k in kinds):
        sets = [set(k) | ({"number"} if "integer" in k else set()) for k in kinds]
        if all(not (sets[i] & sets[j]) for i in range(len(sets)) for j in range(i)):
            return True
    values = [_values(o) for o in options]
    if all(v is not None for v in values):
        flat = [x for v in values for x in v]
        return len(set(flat)) == len(flat)
    return _discriminated(options)


def _kinds(node):
    if not isinstance(node, dict):
        return None
    if "properties" in node:
        return ["object"]
    if "type" in node:
        return node["type"] if isinstance(node["type"], list) else [node["type"]]
    return None


def _values(node):
    if isinstance(node, dict) and "enum" in node and "properties" not in node:
        return [_value_key(v) for v in node["enum"]]
    return None


def _value_key(value) -> tuple:
    """Equal under JSON Schema equality: 1 and 1.0 are the same value, true is not 1."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return ("number", float(value))
    return (type(value).__name__, value)


def _discriminated(options: list) -> bool:
    """Objects that all require a property whose enum values differ between alternatives."""
    if not all(isinstance(o, dict) and "properties" in o for o in options):
        return False
    common = set.intersection(*(set(o.get("required", [])) for o in options))
    for key in sorted(common):
        values = [_values(o["properties"].get(key)) for o in options]
        if all(v is not None for v in values):
            flat = [x for v in values for x in v]
            if len(set(flat)) == len(flat):
                return True
    return False


def tightest(bounds: dict, incl: str, excl: str, pick, integer: bool):
    """(bound, exclusive) from minimum/exclusiveMinimum (or the maximum pair); integer bounds
    of integers are made inclusive."""
    cands = [(bounds[incl], False)] if incl in bounds else []
    if excl in bounds:
        cands.append((bounds[excl], True))
    if not cands:
        return None, False
    value, exclusive = pick(cands, key=lambda c: (c[0], c[1] if pick is max else not c[1]))
    if integer:
        up = pick is max
        value = (math.floor(value) + 1 if exclusive else math.ceil(value)) if up else \
            (math.ceil(value) - 1 if exclusive else math.floor(value))
        return int(value), False
    return int(value), exclusive


def is_type(value, t: str) -> bool:
    if t in ("integer", "number") and isinstance(value, bool):
        return False
    if t == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _PY_TYPES.get(t, ()))
