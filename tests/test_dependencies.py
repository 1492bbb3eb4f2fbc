"""Dependencies follow the data flow generation -> annotation -> scoring, with shared infrastructure
(infra/, jobs/) below all three: a module that imports against it fails here, naming the file and line."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOMAIN_APPS = ("generation", "annotation", "scoring", "frontend")


def _imports(app: str) -> list[tuple[str, int, str]]:
    """(file, line, imported module) of every absolute import in the app's modules, those inside functions
    included (the way generation used to reach annotation)."""
    found = []
    for path in sorted((ROOT / app).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found += [(str(path.relative_to(ROOT)), node.lineno, alias.name) for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.append((str(path.relative_to(ROOT)), node.lineno, node.module))
    return found


def _offending(app: str, forbidden: tuple[str, ...]) -> list[str]:
    return [
        f"{file}:{line}: imports {module}" for file, line, module in _imports(app) if module.split(".")[0] in forbidden
    ]


@pytest.mark.parametrize(
    "app, forbidden",
    [
        ("generation", ("annotation", "scoring", "frontend")),
        ("annotation", ("scoring", "frontend")),
        ("scoring", ("frontend",)),
        ("infra", ("jobs",) + DOMAIN_APPS),
        ("jobs", DOMAIN_APPS),
        ("limits", ("jobs",) + DOMAIN_APPS),
    ],
)
def test_no_import_against_the_data_flow(app, forbidden):
    assert _offending(app, forbidden) == []
