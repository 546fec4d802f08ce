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
            elif layer == "frontend_lang" and target == "runtime" and name != "radixgen.runtime.engine":
                violations.append(f"{path.relative_to(PACKAGE)} imports {name} (only the public Engine)")
    assert not violations, "\n".join(violations)


def test_checker_catches_a_violation(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from radixgen.runtime import engine\nimport torch\n")
    assert _imports(bad) == ["radixgen.runtime"]
