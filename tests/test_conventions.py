"""The house's conventions as tests (issue 49): what a reviewer used to check by eye.

- A module over 600 lines says why in its docstring (its length in lines, and the reason beside it).
- No function of the product or its benches takes more than 8 parameters: options that travel together are one
  dataclass (the allow-list below says why each exception stands).
- No app's modules import each other in a cycle, not even through a function-level import (every app: each
  top-level package of the repository but the tests).
- No function, class, method, property or import of the product is defined and never used (vulture, configured in
  pyproject.toml's ``[tool.vulture]``, whose short allow-list says why each name stands).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.import_graph import find_cycle, import_graph

ROOT = Path(__file__).resolve().parents[1]
APPS = tuple(sorted(p.parent.name for p in ROOT.glob("*/__init__.py") if p.parent.name != "tests"))
MAX_LINES = 600
MAX_PARAMETERS = 8
SAYS_ITS_LENGTH = re.compile(r"\b\d[\d,]*\s+lines\b", re.IGNORECASE)
# (file, function): why it may take more parameters
MANY_PARAMETERS = {
    ("jobs/params.py", "param"): "a field's metadata: each keyword-only argument is one optional fact of the field "
    "(help, where it is offered, how it is stored, its range), as dataclasses.field's own",
}


def product_files() -> list[Path]:
    """The tracked Python files of the product and its benches (not tests, not migrations)."""
    listed = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [
        ROOT / name
        for name in listed.stdout.split()
        if not name.startswith(("tests/", "docs/")) and "/migrations/" not in name and (ROOT / name).exists()
    ]


def test_a_module_over_600_lines_says_why():
    silent = []
    for path in product_files():
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > MAX_LINES and not SAYS_ITS_LENGTH.search(ast.get_docstring(ast.parse(text)) or ""):
            silent.append(f"{path.relative_to(ROOT)} ({text.count(chr(10))} lines)")
    assert not silent, f"over {MAX_LINES} lines with no word on why in the module's docstring: {silent}"


def test_no_function_takes_more_than_8_parameters():
    found = []
    for path in product_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args
                named = [
                    a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs) if a.arg not in ("self", "cls")
                ]
                key = (str(path.relative_to(ROOT)), node.name)
                if len(named) > MAX_PARAMETERS and key not in MANY_PARAMETERS:
                    found.append(f"{key[0]}:{node.lineno} {node.name}({len(named)})")
    assert not found, (
        f"more than {MAX_PARAMETERS} parameters (make the options travelling together one dataclass): {found}"
    )


def test_the_allow_list_names_functions_that_exist_and_need_it():
    for (name, function), why in MANY_PARAMETERS.items():
        tree = ast.parse((ROOT / name).read_text(encoding="utf-8"))
        nodes = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function]
        assert nodes and why, (name, function)
        args = nodes[0].args
        assert len(args.posonlyargs) + len(args.args) + len(args.kwonlyargs) > MAX_PARAMETERS, (name, function)


@pytest.mark.parametrize("app", APPS)
def test_an_apps_modules_import_each_other_one_way(app):
    graph = import_graph(ROOT / app)
    assert graph, app
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle)


def test_every_app_is_checked_for_cycles():
    assert {"annotation", "config", "generation", "jobs", "scoring"} <= set(APPS), APPS


# what vulture reports that is not dead code: variables and attributes, which Django's model fields, dataclass
# fields read through asdict/to_json and settings use by reflection (vulture cannot see it)
REFLECTIVE = re.compile(r": unused (variable|attribute) ")


def test_no_name_of_the_product_is_defined_and_never_used():
    result = subprocess.run([sys.executable, "-m", "vulture"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    dead = [line for line in result.stdout.splitlines() if line.strip() and not REFLECTIVE.search(line)]
    assert result.returncode in (0, 3), result.stderr  # 3: vulture found something (judged below)
    assert not dead, (
        "defined and never used (delete it, or allow it in pyproject.toml's [tool.vulture] with why):\n"
        + "\n".join(dead)
    )
