"""The import graph of pingpong/: no module imports, however indirectly, one that imports it back.

Every import counts, at module level or inside a function (an import in a function that dodges a circle is still
the circle). The graph is read from the source with ast, nothing imported: relative imports are resolved against
the module's package, and `from pkg import name` is an edge to pkg.name when that is a module, to pkg otherwise.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path, package: str = "pingpong") -> dict[str, set[str]]:
    """Each module of `package` under root → the modules of `package` it imports (anywhere in its code)."""
    modules = {module_name(path, root): path for path in sorted((root / package).rglob("*.py"))}

    def known(name: str | None) -> str | None:
        """The module itself, or the nearest package above it that is one of ours (import a.b.c loads a.b.c)."""
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for name, path in modules.items():
        own_package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                edges.update(known(alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # from . import x, from ..a import b: relative to the module's own package
                    base_parts = own_package.split(".")[:len(own_package.split(".")) - node.level + 1]
                    base = ".".join(base_parts + ([node.module] if node.module else []))
                else:
                    base = node.module
                for alias in node.names:
                    submodule = f"{base}.{alias.name}"
                    edges.add(submodule if submodule in modules else known(base))
        graph[name] = {edge for edge in edges if edge and edge != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for successor in graph[todo.pop()] - seen:
            seen.add(successor)
            todo.append(successor)
    return seen


def test_pingpong_has_no_import_cycle_counting_imports_inside_functions():
    graph = import_graph(ROOT)
    assert len(graph) > 100 and "pingpong.harness.commands.cli" in graph  # the whole package was read
    found = cycles(graph)
    assert not found, "import cycles: " + "; ".join(" <-> ".join(cycle) for cycle in found)


def test_the_parser_is_imported_by_both_commands_that_need_it():
    """cli runs the commands and compare_alternate reads the run options as `run` does: both import the parser,
    which imports neither."""
    graph = import_graph(ROOT)
    for user in ("pingpong.harness.commands.cli", "pingpong.harness.commands.compare_alternate"):
        assert "pingpong.harness.commands.parser" in graph[user]
    assert not reachable(graph, "pingpong.harness.commands.parser") & {
        "pingpong.harness.commands.cli", "pingpong.harness.commands.compare_alternate"}


def test_the_orchestrator_loads_no_client_driver():
    """run_bench.py's process (pingpong.harness) reaches no module of pingpong.kit.driver: what both worlds need,
    such as library_versions, lives in a leaf both import (pingpong/versions.py)."""
    graph = import_graph(ROOT)
    assert graph["pingpong.versions"] == set()
    assert "pingpong.versions" in graph["pingpong.harness.settings.environment"]
    assert "pingpong.versions" in graph["pingpong.kit.driver.core"]
    for name in graph:
        if name.startswith("pingpong.harness"):
            loaded = {module for module in reachable(graph, name) if module.startswith("pingpong.kit.driver")}
            assert not loaded, f"{name} imports {sorted(loaded)}"


def test_the_graph_resolves_relative_imports_submodules_and_imports_inside_functions(tmp_path):
    """The reader itself, on a made-up package: each form of import is the edge it should be, and a circle closed
    only inside a function is a circle."""
    files = {
        "pkg/__init__.py": "",
        "pkg/a.py": "from . import b\nfrom .sub import c as renamed\n",
        "pkg/b.py": "import os\nfrom pkg.sub.c import VALUE\n",
        "pkg/sub/__init__.py": "from ..b import *\n",
        "pkg/sub/c.py": "VALUE = 1\n\ndef late():\n    from pkg import a\n    import pkg.sub\n",
        "pkg/d.py": "from pkg import missing_name, b\n",
    }
    for relative, text in files.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text)
    graph = import_graph(tmp_path, "pkg")
    assert graph == {
        "pkg": set(),
        "pkg.a": {"pkg.b", "pkg.sub.c"},
        "pkg.b": {"pkg.sub.c"},
        "pkg.sub": {"pkg.b"},
        "pkg.sub.c": {"pkg.a", "pkg.sub"},
        "pkg.d": {"pkg", "pkg.b"},
    }
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.sub", "pkg.sub.c"]]
    del graph["pkg.sub.c"]
    graph["pkg.sub.c"] = {"pkg"}
    assert cycles(graph) == []
