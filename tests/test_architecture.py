"""The package's shape: wings import only downwards, no import circles, empty __init__ files.

Imports are read from the source (every ``import`` statement, including those inside functions and
under ``TYPE_CHECKING``): a circle or an upward arrow is one whether or not it runs at import time.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import hive_brain

PKG = Path(hive_brain.__file__).parent

# Lowest first. A module may import its own wing and any wing ranked strictly lower; wings that share
# a rank (the daemon and the agent integrations) may not import each other.
RANK = {
    "errors": 0,
    "config": 0.5,
    "store": 1,
    "rpc": 2,
    "embedding": 3,
    "index": 4,
    "memory": 5,
    "search": 6,
    "reader": 6.5,  # the server-or-local read policy; engine, agents and daemon use it
    "writer": 6.5,  # the server-or-local write policy; the write commands use it
    "engine": 7,
    "daemon": 8, "agents": 8,
    "cli": 9,
    "__main__": 10,
}


def _modules() -> dict[str, Path]:
    mods = {}
    for f in PKG.rglob("*.py"):
        rel = f.relative_to(PKG.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = f
    return mods


def _imports(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    is_pkg = path.name == "__init__.py"
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                prefix = ".".join(base[: len(base) - node.level + 1] + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            targets = [prefix] + [f"{prefix}.{a.name}" for a in node.names]
        for t in targets:
            while t and t not in mods:
                t = t.rpartition(".")[0]
            if t and t != name and not name.startswith(t + "."):
                found.add(t)
    return found


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {m: _imports(m, f, mods) for m, f in mods.items()}


def _wing(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_every_module_belongs_to_a_ranked_wing() -> None:
    unranked = sorted(m for m in _graph() if m != "hive_brain" and _wing(m) not in RANK)
    assert not unranked, f"modules outside the wings of docs/architecture.md: {unranked}"


def test_no_module_imports_a_higher_or_sideways_wing() -> None:
    bad = []
    for m, deps in _graph().items():
        if m == "hive_brain":
            continue
        for d in deps:
            a, b = _wing(m), _wing(d)
            if a != b and d != "hive_brain" and RANK[b] >= RANK[a]:
                bad.append(f"{m} -> {d}")
    assert not bad, "imports running up (or across) the wings:\n" + "\n".join(sorted(bad))


def test_no_import_circles() -> None:
    graph = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    assert not circles, f"import circles: {circles}"


def test_init_files_are_empty() -> None:
    # The prompt hook imports a handful of modules from several wings; a non-empty __init__ would make
    # it pay for whatever that file pulls in. The top package holds only its version.
    for init in PKG.rglob("__init__.py"):
        if init.parent == PKG:
            continue
        assert init.read_text(encoding="utf-8").strip() == "", f"{init.relative_to(PKG)} is not empty"


def test_the_check_sees_a_circle_and_an_upward_import(tmp_path: Path, monkeypatch) -> None:
    """The walk itself works: a fake package with a circle and an upward import is caught."""
    pkg = tmp_path / "hive_brain"
    (pkg / "store").mkdir(parents=True)
    (pkg / "search").mkdir()
    for f in ("__init__.py", "store/__init__.py", "search/__init__.py"):
        (pkg / f).write_text("")
    (pkg / "store" / "a.py").write_text("from ..search import b\n")
    (pkg / "search" / "b.py").write_text("def f():\n    from ..store import a\n")
    monkeypatch.setattr(sys.modules[__name__], "PKG", pkg)
    graph = _graph()
    assert "hive_brain.search.b" in graph["hive_brain.store.a"]
    assert "hive_brain.store.a" in graph["hive_brain.search.b"]
    try:
        test_no_module_imports_a_higher_or_sideways_wing()
    except AssertionError as e:
        assert "hive_brain.store.a -> hive_brain.search.b" in str(e)
    else:
        raise AssertionError("the upward import was not caught")
