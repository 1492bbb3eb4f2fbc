"""The import graph of a package's modules, read from the source (every import, function bodies included), and
its cycles: for the tests that keep a package's modules importing each other one way (a function-level import
can hide a cycle from the interpreter, not from this)."""

from __future__ import annotations

import ast
from pathlib import Path


def module_name(path: Path, root: Path) -> str:
    """The dotted name of the module at ``path`` (a package's ``__init__.py`` is the package)."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(source: str, name: str, prefix: str, *, is_package: bool = False) -> set[str]:
    """Every name under ``prefix`` (``"scoring."``) that the module ``name`` (its ``source``) imports, at any
    depth of the file: modules, and ``module.name`` for each name imported from one (it may be a submodule)."""
    package = name if is_package else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            candidates = [target] + [f"{target}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        else:
            continue
        found.update(c for c in candidates if c.startswith(prefix) and c != name)
    return found


def import_graph(package_dir: Path, *, skip: tuple[str, ...] = ("migrations",)) -> dict[str, set[str]]:
    """Module -> the modules of the same top-level package it imports, for every module under ``package_dir``
    outside the folders named in ``skip``. A submodule's import of a package above it is not an edge: importing
    a name from a package runs its ``__init__``, which is under way (or done) whenever the submodule runs."""
    root = package_dir.parent
    files = [p for p in package_dir.rglob("*.py") if not set(skip) & set(p.relative_to(package_dir).parts)]
    modules = {module_name(p, root): p for p in files}
    prefix = package_dir.name + "."
    graph = {}
    for module, path in modules.items():
        imported = imports_of(path.read_text(encoding="utf-8"), module, prefix, is_package=path.name == "__init__.py")
        graph[module] = {t for t in imported if t in modules and not module.startswith(t + ".")}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as the path that closes it (``[a, b, a]``), or None when it has none."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None
