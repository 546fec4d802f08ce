"""The frontend's modules import each other without cycles: every import counts, those under
TYPE_CHECKING and inside functions included."""

import ast
from pathlib import Path

import radixgen.frontend_lang as pkg

PKG_DIR = Path(pkg.__file__).parent
PREFIX = "radixgen.frontend_lang."


def _graph() -> dict[str, set[str]]:
    graph = {}
    for path in PKG_DIR.glob("*.py"):
        name = path.stem
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                if node.module.startswith(PREFIX):
                    deps.add(node.module[len(PREFIX) :].split(".")[0])
                elif node.module == "radixgen.frontend_lang":
                    deps.update(alias.name for alias in node.names)
            elif isinstance(node, ast.Import):
                deps.update(
                    a.name[len(PREFIX) :].split(".")[0]
                    for a in node.names
                    if a.name.startswith(PREFIX)
                )
        graph[name] = {d for d in deps if (PKG_DIR / f"{d}.py").exists() and d != name}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return path[path.index(dep) :] + [dep] if dep in path else [node, dep]
            if dep not in state and (found := visit(dep, path + [dep])):
                return found
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start, [start])):
            return found
    return None


def test_frontend_modules_have_no_import_cycle():
    graph = _graph()
    assert "state" in graph and "interpreter" in graph["state"]
    cycle = _cycle({k: v for k, v in graph.items() if k != "__init__"})
    assert cycle is None, " -> ".join(cycle)


def test_the_cycle_finder_finds_one():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
