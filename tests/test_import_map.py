"""The package's import map has no circle: between modules, and between the subpackages (algorithm layers)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "opid_rllib"


def _module_name(path: Path) -> str:
    parts = ["opid_rllib", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """module -> the opid_rllib modules it imports anywhere in its file (function bodies too)."""
    mods = {_module_name(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    anchor = anchor[:len(anchor) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            else:
                continue
            graph[mod] |= {t for t in targets if t in mods and t != mod}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _layer(mod: str) -> str:
    parts = mod.split(".")
    return ".".join(parts[:2])


def test_no_import_circle_between_modules():
    assert cycles(import_graph()) == []


def test_no_import_circle_between_subpackages():
    """A subpackage may use another only if that one never reaches back (e.g. eval/ -> sft/ -> eval/ was one)."""
    layers: dict[str, set[str]] = {}
    for mod, deps in import_graph().items():
        layers.setdefault(_layer(mod), set()).update(_layer(d) for d in deps if _layer(d) != _layer(mod))
    assert cycles(layers) == []


def test_the_walk_sees_a_circle_when_there_is_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    g = import_graph()
    assert "opid_rllib.analyzer.base" in g["opid_rllib.analyzer.hindsight"]
    assert "opid_rllib.analyzer.hindsight" in g["opid_rllib.analyzer.registry"]
