"""The layering table of ARCHITECTURE.md: imports only go down."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "radixgen"

# package -> radixgen packages it may import
ALLOWED = {
    "core": set(),
    "config": {"core"},
    "kernels": set(),
    "radix": {"core", "kernels"},
    "grammar": {"core", "kernels"},
    "speculative": {"core", "kernels", "radix", "grammar"},
    "runtime": {"core", "config", "kernels", "radix", "grammar", "speculative"},
    "frontend_lang": {"core", "runtime"},  # runtime: its public Engine only (checked below)
}


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return [n for n in names if n == "radixgen" or n.startswith("radixgen.")]


def _layer(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0].removesuffix(".py") if len(rel.parts) > 1 or rel.stem in ALLOWED else ""


def test_every_layer_exists():
    for name in ALLOWED:
        assert (PACKAGE / name).is_dir() or (PACKAGE / f"{name}.py").is_file(), name


def test_imports_only_go_down():
    violations = []
    for path in sorted(PACKAGE.rglob("*.py")):
        layer = _layer(path)
        if not layer:
            continue  # radixgen/__init__.py and __main__.py sit above every layer
        for name in _imports(path):
            parts = name.split(".")
            target = parts[1] if len(parts) > 1 else "radixgen"
            if target == layer:
                continue
            if target not in ALLOWED.get(layer, set()):
                violations.append(f"{path.relative_to(PACKAGE)} imports {name}")
            elif (
                layer == "frontend_lang"
                and target == "runtime"
                and name != "radixgen.runtime.engine"
            ):
                violations.append(
                    f"{path.relative_to(PACKAGE)} imports {name} (only the public Engine)"
                )
    assert not violations, "\n".join(violations)


# radixgen/grammar floors, bottom first: a module imports only from its own floor or those below
GRAMMAR_FLOORS = [
    {"matcher", "tokenizer_info", "bitmask"},
    {"automata"},
    {"regex"},
    {"unique"},
    {"index"},
    {"schema"},
    {"rewrite"},
    {"cfg"},
    {"json_grammar"},
    {"tool_calls", "json_schema"},
    {"compiler"},
]
GRAMMAR = PACKAGE / "grammar"


def _grammar_floor(name: str) -> int | None:
    """The floor of `radixgen.grammar.<name>...`; None for the package itself."""
    parts = name.split(".")
    if parts[:2] != ["radixgen", "grammar"] or len(parts) < 3 or parts[2] == "__init__":
        return None
    return next(i for i, floor in enumerate(GRAMMAR_FLOORS) if parts[2] in floor)


def test_every_grammar_module_has_a_floor():
    members = {p.stem for p in GRAMMAR.glob("*.py") if p.stem != "__init__"}
    members |= {p.name for p in GRAMMAR.iterdir() if (p / "__init__.py").is_file()}
    assert members == set().union(*GRAMMAR_FLOORS)


def test_grammar_subpackages_import_only_downwards():
    violations = []
    for path in sorted(GRAMMAR.rglob("*.py")):
        module = ".".join(("radixgen",) + path.relative_to(PACKAGE).with_suffix("").parts)
        floor = _grammar_floor(module)
        if floor is None:
            continue
        for name in _imports(path):
            target = _grammar_floor(name)
            if target is not None and target > floor:
                violations.append(f"{path.relative_to(PACKAGE)} imports {name}")
    assert not violations, "\n".join(violations)


def test_grammar_modules_use_absolute_imports():
    relative = [
        str(p.relative_to(PACKAGE))
        for p in GRAMMAR.rglob("*.py")
        if any(
            isinstance(n, ast.ImportFrom) and n.level for n in ast.walk(ast.parse(p.read_text()))
        )
    ]
    assert not relative, relative


def test_checker_catches_a_violation(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from radixgen.runtime import engine\nimport torch\n")
    assert _imports(bad) == ["radixgen.runtime"]
    assert _grammar_floor("radixgen.grammar.cfg.lexer") > _grammar_floor(
        "radixgen.grammar.regex.leaves"
    )
