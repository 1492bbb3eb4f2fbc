"""The documentation cannot rot: the site builds with ``mkdocs build --strict`` without the network (a broken
link, anchor or page, or a generator of docs/hooks/reference.py that fails, fails the build), every environment
variable the code reads is on docs/reference/environment.md with the code's default, and README.md keeps its
two-command quick start."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENV_PAGE = ROOT / "docs" / "reference" / "environment.md"
# the product's code (tests and benches set variables for themselves; docs/hooks only for its build)
PRODUCT = (
    "config",
    "infra",
    "limits",
    "jobs",
    "generation",
    "annotation",
    "scoring",
    "frontend",
    "docker",
    "manage.py",
)
ENV_READERS = {"env_str", "env_int", "env_float", "env_bool", "env_list"}
NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")

# mkdocs runs in a child process whose sockets can reach nothing: a plugin, theme or hook that fetches
# anything fails the build instead of quietly depending on the network.
NO_NETWORK_MKDOCS = """
import socket, sys

def refuse(*args, **kwargs):
    raise OSError("tests/test_docs.py: the documentation build tried to use the network")

socket.socket.connect = socket.socket.connect_ex = refuse
socket.create_connection = socket.getaddrinfo = refuse
from mkdocs.__main__ import cli
sys.argv = ["mkdocs", *sys.argv[1:]]
cli()
"""


@pytest.mark.slow
def test_mkdocs_build_strict_offline(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PARAFORGE_"))}
    env.update(NO_MKDOCS_2_WARNING="1", PYTHONPATH=str(ROOT))
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            NO_NETWORK_MKDOCS,
            "build",
            "--strict",
            "--config-file",
            str(ROOT / "mkdocs.yml"),
            "--site-dir",
            str(tmp_path / "site"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}\n{result.stderr}"
    commands = (tmp_path / "site" / "reference" / "commands" / "index.html").read_text(encoding="utf-8")
    for generated in ("generate", "create_hit_batch", "export_release", "--sample-per-length", "crowd publish"):
        assert generated in commands, f"the generated command reference lacks {generated!r}"
    api = (tmp_path / "site" / "reference" / "http-api" / "index.html").read_text(encoding="utf-8")
    assert "/api/hits/{hit_id}/assignments/" in api


def _constant(node: ast.AST):
    """The value of a literal default, arithmetic on numbers included (``6 * 3600``); ``...`` when not one."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_constant(e) for e in node.elts]
        return ... if ... in items else items
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Add, ast.Sub)):
        left, right = _constant(node.left), _constant(node.right)
        if isinstance(left, (int, float)) and isinstance(right, (int, float)):
            return {ast.Mult: left * right, ast.Add: left + right, ast.Sub: left - right}[type(node.op)]
    return ...


def _environ(node: ast.AST) -> bool:
    """``os.environ`` or a name it goes by (``environ``, ``env = os.environ``)."""
    text = ast.unparse(node)
    return text.endswith("environ") or text == "env"


def variables_read() -> dict[str, list]:
    """Every environment variable the product's code reads by a literal name -> its literal defaults (``...``
    for none or one that is not a literal), with where it is read."""
    found: dict[str, list] = {}
    paths = [p for top in PRODUCT for p in ([ROOT / top] if top.endswith(".py") else (ROOT / top).rglob("*.py"))]
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            name, default = None, ...
            if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
                func = node.func
                if isinstance(func, ast.Name) and func.id in ENV_READERS:
                    name = node.args[0].value
                    default = _constant(node.args[1]) if len(node.args) > 1 else ...
                    if func.id == "env_str" and default == ...:
                        default = ""
                elif isinstance(func, ast.Attribute) and (
                    (func.attr in ("get", "setdefault") and _environ(func.value)) or func.attr == "getenv"
                ):
                    name = node.args[0].value
            elif (
                isinstance(node, ast.Subscript)
                and isinstance(node.ctx, ast.Load)
                and _environ(node.value)
                and isinstance(node.slice, ast.Constant)
            ):
                name = node.slice.value
            if isinstance(name, str) and NAME.match(name):
                found.setdefault(name, []).append((default, f"{path.relative_to(ROOT)}:{node.lineno}"))
    return found


def _rows(page: str, name: str) -> list[str]:
    return [line for line in page.splitlines() if line.startswith("|") and re.search(rf"`{name}`", line)]


def test_variables_read_are_found():
    found = variables_read()
    for name in (
        "DJANGO_DEBUG",
        "LOG_LEVEL",
        "CELERY_TASK_TIME_LIMIT",
        "PROLIFIC_MAX_ATTEMPTS",
        "DJANGO_SECURE_HSTS_SECONDS",
        "PARAFORGE_FAST_STEP",
    ):
        assert name in found, f"the scan missed {name}"


def test_every_environment_variable_is_documented():
    page = ENV_PAGE.read_text(encoding="utf-8")
    missing = {
        name: [where for _, where in reads] for name, reads in sorted(variables_read().items()) if not _rows(page, name)
    }
    assert not missing, (
        f"read by the code but not in a table of {ENV_PAGE.relative_to(ROOT)} "
        f"(name in backticks in a table row): {missing}"
    )


def test_documented_defaults_are_the_code_defaults():
    page = ENV_PAGE.read_text(encoding="utf-8")
    wrong = []
    for name, reads in sorted(variables_read().items()):
        rows = " ".join(_rows(page, name))
        for default, where in reads:
            if default is ... or default == "" or default == []:
                continue
            if isinstance(default, bool):
                expected = ["on" if default else "off"]
            elif isinstance(default, list):
                expected = [f"`{item}`" for item in default]
            else:
                expected = [f"`{default}`"]
            if not all(e in rows for e in expected):
                wrong.append(f"{name} ({where}): the code's default is {default!r}, the page says: {rows}")
    assert not wrong, "\n".join(wrong)


def test_readme_quick_start_is_two_commands():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = re.search(r"^## Quick start\n(.*?)(?=^## )", readme, re.S | re.M)
    assert section, "README.md has no '## Quick start' section"
    blocks = re.findall(r"```bash\n(.*?)```", section.group(1), re.S)
    assert len(blocks) == 1, "the quick start is one bash block"
    commands = [line.split("#")[0].strip() for line in blocks[0].splitlines() if line.split("#")[0].strip()]
    assert commands == ["scripts/start", "scripts/test"]
    for script in commands:
        assert os.access(ROOT / script, os.X_OK), f"{script} is not an executable file"
    assert "mkdocs serve" in readme, "README.md says how to read the documentation"


def test_citation_and_licence():
    import yaml

    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software" and cff["license"] == "Apache-2.0"
    assert all(key in cff for key in ("message", "title", "authors"))
    parabank = [ref for ref in cff["references"] if "ParaBank" in ref["title"]]
    assert parabank and parabank[0]["year"] == 2019
    assert [a["family-names"] for a in parabank[0]["authors"]] == ["Hu", "Rudinger", "Post", "Van Durme"]
    assert "Apache License" in (ROOT / "LICENSE").read_text(encoding="utf-8").split("\n", 3)[1]


PERFORMANCE = ROOT / "docs" / "performance.md"
RESULTS = ROOT / "bench" / "results"
# a results file as the page names it: `decoding-cpu-quick-glued.txt` or `bench/results/decoding-cpu-quick-glued.txt`
RESULT_NAME = re.compile(r"`(?:bench/results/)?([A-Za-z0-9_.-]+\.txt)`")


def test_performance_page_is_a_page_and_cites_the_current_results():
    """Issue 49: docs/performance.md states each bench's current figure in under 300 lines; every results file it
    cites exists, and bench/results keeps only files that the page, the README or a bench script cites."""
    page = PERFORMANCE.read_text(encoding="utf-8")
    assert len(page.splitlines()) < 300, f"docs/performance.md has {len(page.splitlines())} lines (fewer than 300)"
    cited = set(RESULT_NAME.findall(page))
    assert cited, "docs/performance.md cites no bench/results file"
    missing = sorted(name for name in cited if not (RESULTS / name).is_file())
    assert not missing, f"docs/performance.md cites results files that do not exist: {missing}"
    elsewhere = (ROOT / "README.md").read_text(encoding="utf-8") + "".join(
        path.read_text(encoding="utf-8")
        for path in sorted((ROOT / "bench").iterdir())
        if path.is_file() and path.suffix in (".py", ".sh", ".md")
    )
    uncited = sorted(
        path.name
        for path in RESULTS.iterdir()
        if path.is_file() and path.name not in cited and path.name not in elsewhere
    )
    assert not uncited, f"bench/results keeps files no page, README or bench script cites (history: git): {uncited}"
