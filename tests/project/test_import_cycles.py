"""No import circles among agent_hooks modules: arrows only point down.

A circle means a reader cannot learn one module without the others. The
imports are read with ``ast`` from the source, not by importing anything:

* function-level (lazy) imports count. They are how the hook path keeps its
  imports cheap, and they are still a dependency a reader must follow; the
  circles this test was written against (runner <-> spool, cli/sessions <->
  cli/status, handlers registry <-> discovery/eligibility) all ran through one.
* imports under ``if TYPE_CHECKING:`` do not count: they never run, and only
  name types in annotations.
* ``importlib.import_module`` with a computed name (the spool's replayer, the
  checks' discovery) is not seen: those load plug-ins by name, and the module
  that names them is not imported back by them.
* a submodule's implicit import of its own package (``__init__``) is not
  counted; an explicit ``from agent_hooks.pkg import name`` is an arrow to the
  package (or to ``pkg.name`` when that is a module).
"""

from __future__ import annotations

import ast
from pathlib import Path

import agent_hooks

PACKAGE_DIR = Path(agent_hooks.__file__).resolve().parent


def _modules(package_dir: Path) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package ``__init__``), for every .py under ``package_dir``."""
    out = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts.pop()
        out[".".join(parts)] = (path, is_pkg)
    return out


def _is_type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def import_graph(package_dir: Path) -> dict[str, dict[str, int]]:
    """module -> {module it imports: line of the first such import}, within the package."""
    mods = _modules(package_dir)
    root = package_dir.name

    def known(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, dict[str, int]] = {m: {} for m in mods}
    for mod, (path, is_pkg) in mods.items():
        here = mod if is_pkg else mod.rpartition(".")[0]
        edges = graph[mod]

        def add(target: str | None, line: int, edges: dict[str, int] = edges, mod: str = mod) -> None:
            if target and target != mod:
                edges.setdefault(target, line)

        def walk(node: ast.AST) -> None:
            for child in ast.iter_child_nodes(node):
                if _is_type_checking(child):
                    for stmt in child.orelse:  # an `else:` under TYPE_CHECKING does run
                        walk_stmt(stmt)
                    continue
                walk_stmt(child)

        def walk_stmt(node: ast.AST, here: str = here) -> None:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == root or alias.name.startswith(root + "."):
                        add(known(alias.name), node.lineno)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = here
                    for _ in range(node.level - 1):
                        anchor = anchor.rpartition(".")[0]
                    base = f"{anchor}.{base}" if base else anchor
                if base == root or base.startswith(root + "."):
                    for alias in node.names:
                        sub = f"{base}.{alias.name}"
                        add(sub if sub in mods else known(base), node.lineno)
            else:
                walk(node)

        walk(ast.parse(path.read_text(encoding="utf-8"), str(path)))
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted, in name order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def describe(graph: dict[str, dict[str, int]], group: list[str], modules: dict[str, tuple[Path, bool]]) -> str:
    lines = [" <-> ".join(group)]
    for a in group:
        for b, line in sorted(graph[a].items()):
            if b in group:
                lines.append(f"    {modules[a][0].relative_to(PACKAGE_DIR.parent)}:{line} imports {b}")
    return "\n".join(lines)


def test_agent_hooks_has_no_import_circles() -> None:
    graph = import_graph(PACKAGE_DIR)
    assert len(graph) > 100 and "agent_hooks.runner" in graph  # it read the package, not an empty tree
    assert "agent_hooks.dispatch" in graph["agent_hooks.runner"]  # and it sees the arrows
    found = cycles(graph)
    mods = _modules(PACKAGE_DIR)
    assert not found, "import circles (move the shared piece into a module both import):\n" + "\n".join(
        describe(graph, group, mods) for group in found)


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "agent_hooks" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "agent_hooks"


def test_the_finder_sees_lazy_imports_and_skips_type_checking_ones(tmp_path: Path) -> None:
    """The finder itself, on a made-up package: a circle through a function-level import is one,
    an import under TYPE_CHECKING is not, and a relative import resolves to its module."""
    pkg = _write(tmp_path, {
        "__init__.py": "",
        "low.py": "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from agent_hooks.top import Thing\n",
        "top.py": "from agent_hooks import low\n",
        "a.py": "from .b import f\n",
        "b.py": "def f():\n    from agent_hooks.a import g\n",
        "sub/__init__.py": "",
        "sub/x.py": "from agent_hooks.sub import y\n",
        "sub/y.py": "import agent_hooks.low\n",
    })
    graph = import_graph(pkg)
    assert graph["agent_hooks.b"] == {"agent_hooks.a": 2} and graph["agent_hooks.a"] == {"agent_hooks.b": 1}
    assert graph["agent_hooks.low"] == {}
    assert graph["agent_hooks.sub.x"] == {"agent_hooks.sub.y": 1}
    assert cycles(graph) == [["agent_hooks.a", "agent_hooks.b"]]
