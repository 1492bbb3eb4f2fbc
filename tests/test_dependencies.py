"""The map of the code is docs/explanation/architecture.md, and these tests read it: its table "Apps and what
each owns" says, row by row, which apps each app may import, so the page and the code cannot drift apart.

An import that an app's row does not allow fails, naming the file and the line: absolute imports at the top of a
module or inside a function alike (the way generation once reached annotation), relative ones resolved. A row
that allows an app its code no longer imports fails too (a map that says more than the code is wrong as well),
and so do an app without a row, a row that cannot be read, and a path, module or name that the page's tables
name and the repository lacks."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "explanation" / "architecture.md"
APPS_HEADING = "Apps and what each owns"
REPOSITORY_HEADING = "The repository"
RULES_HEADING = "Where each rule lives (one place each)"
# The apps: the top-level packages (config/, the project's settings and wiring, among them), tests/ aside.
APPS = tuple(sorted(path.parent.name for path in ROOT.glob("*/__init__.py") if path.parent.name != "tests"))
# What an app could import of this repository: the apps, the benches (bench/ imports every app, no app imports
# it) and the tests.
FIRST_PARTY = (*APPS, "bench", "tests")
# A "may import" cell: "no app", "any app", or app names in backticks separated by commas; "; why" may follow.
MAY_IMPORT = re.compile(r"(?P<apps>no app|any app|`[a-z_]+`(?:, `[a-z_]+`)*)(?:; (?P<why>\S.*))?")


@dataclasses.dataclass(frozen=True)
class AppRow:
    """One row of the apps table: the app, what it owns, and the other apps it may import (None: any)."""

    app: str
    owns: str
    may_import: frozenset[str] | None


def markdown_table(heading: str) -> list[dict[str, str]]:
    """The rows of the first table under ``## heading`` of the page, as {column: cell}."""
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    try:
        start = lines.index(f"## {heading}")
    except ValueError:
        pytest.fail(f"{PAGE.relative_to(ROOT)} has no section '## {heading}'")
    rows: list[list[str]] = []
    for line in lines[start + 1 :]:
        if line.startswith("## "):
            break
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif rows:
            break  # the table ended
    if len(rows) < 3:
        pytest.fail(f"{PAGE.relative_to(ROOT)}, '## {heading}': no table with a header and rows")
    header, body = rows[0], rows[2:]  # rows[1] is the |---| line
    for row in body:
        if len(row) != len(header):
            pytest.fail(f"'## {heading}': the row {row} has {len(row)} cells, the header {len(header)}")
    return [dict(zip(header, row)) for row in body]


def path_cell(cell: str) -> str:
    """``` `scoring/` ``` -> ``scoring``: a table's first column, one path in backticks."""
    match = re.fullmatch(r"`([^`]+)`", cell)
    if not match:
        pytest.fail(f"{PAGE.relative_to(ROOT)}: a path cell must be one path in backticks, not {cell!r}")
    return match.group(1).rstrip("/")


def may_import(app: str, cell: str) -> frozenset[str] | None:
    """The apps a "may import" cell allows (None for "any app"); a cell that does not read fails, saying why."""
    match = MAY_IMPORT.fullmatch(cell)
    if not match:
        pytest.fail(
            f"{PAGE.relative_to(ROOT)}, row {app!r}: cannot read the 'may import' cell {cell!r}: it must be "
            "'no app', 'any app' or app names in backticks separated by ', ' (e.g. '`api`, `jobs`'), "
            "optionally followed by '; ' and why"
        )
    apps = match.group("apps")
    if apps == "any app":
        return None
    names = frozenset(re.findall(r"`([a-z_]+)`", apps))
    unknown = sorted(names - set(FIRST_PARTY))
    if unknown:
        pytest.fail(f"row {app!r} allows {unknown}, which are not first-party packages ({', '.join(FIRST_PARTY)})")
    if app in names:
        pytest.fail(f"row {app!r} names itself under 'may import' (an app always imports its own modules)")
    return names


def apps_table() -> dict[str, AppRow]:
    rows = {}
    for cells in markdown_table(APPS_HEADING):
        missing = {"app", "owns", "may import"} - set(cells)
        if missing:
            pytest.fail(f"'## {APPS_HEADING}' has no column {sorted(missing)}; its columns: {list(cells)}")
        app = path_cell(cells["app"])
        rows[app] = AppRow(app, cells["owns"], may_import(app, cells["may import"]))
    return rows


def imported_modules(app: str, root: Path = ROOT) -> list[tuple[str, int, str]]:
    """(file, line, module) of every import of the app's modules, those inside functions included; a relative
    import as the absolute module it names (dots first when it climbs above its app)."""
    found = []
    for path in sorted((root / app).rglob("*.py")):
        file = str(path.relative_to(root))
        package = path.relative_to(root).parts[:-1]  # what a relative import starts from (an __init__'s folder too)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=file)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found += [(file, node.lineno, alias.name) for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                found.append((file, node.lineno, node.module or ""))
            elif isinstance(node, ast.ImportFrom) and node.level > len(package):
                found.append((file, node.lineno, "." * node.level + (node.module or "")))  # above its app
            elif isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1]
                found.append((file, node.lineno, ".".join((*base, node.module) if node.module else base)))
    return found


def first_party(module: str) -> str | None:
    """The first-party package a module belongs to, "<outside>" for a relative import above its app, else None."""
    if module.startswith("."):
        return "<outside>"
    top = module.split(".")[0]
    return top if top in FIRST_PARTY else None


def test_the_reader_sees_imports_inside_functions_and_resolves_relative_ones(tmp_path):
    (tmp_path / "app" / "sub").mkdir(parents=True)
    (tmp_path / "app" / "sub" / "mod.py").write_text(
        "import os, scoring.models\nfrom . import sibling\nfrom ..top import name\n"
        "def f():\n    from generation.constraints import x\n    from ...outside import y\n"
    )
    assert imported_modules("app", tmp_path) == [
        ("app/sub/mod.py", 1, "os"),
        ("app/sub/mod.py", 1, "scoring.models"),
        ("app/sub/mod.py", 2, "app.sub"),
        ("app/sub/mod.py", 3, "app.top"),
        ("app/sub/mod.py", 5, "generation.constraints"),
        ("app/sub/mod.py", 6, "...outside"),
    ]
    assert [first_party(m) for _, _, m in imported_modules("app", tmp_path)] == [
        None,
        "scoring",
        None,
        None,
        "generation",
        "<outside>",
    ]


def test_every_app_has_a_readable_row():
    """Each app of the repository has its row, each row names an app that exists, and every cell reads."""
    rows = apps_table()  # fails on a cell it cannot read
    assert sorted(set(APPS) - set(rows)) == [], f"apps missing from '## {APPS_HEADING}'"
    assert sorted(set(rows) - set(APPS)) == [], f"rows of '## {APPS_HEADING}' that name no app"


@pytest.mark.parametrize("app", APPS)
def test_imports_follow_the_apps_table(app):
    """Every import of another app (or of bench/, or tests/) is one the app's row allows."""
    row = apps_table().get(app)
    if row is None:
        pytest.fail(f"{app}/ has no row in {PAGE.relative_to(ROOT)}, '## {APPS_HEADING}'")
    offending = [
        f"{file}:{line}: imports {module} ({app}/ may import {', '.join(sorted(row.may_import)) or 'no app'})"
        for file, line, module in imported_modules(app)
        if (other := first_party(module)) not in (None, app)
        and (row.may_import is not None and other not in row.may_import)
    ]
    assert not offending, f"imports against {PAGE.relative_to(ROOT)}:\n" + "\n".join(offending)


@pytest.mark.parametrize("app", APPS)
def test_the_apps_table_allows_no_import_the_code_does_not_make(app):
    """A row that allows more than its app imports is stale (as jobs/'s "infra" was): the map says what is."""
    row = apps_table().get(app)
    if row is None or row.may_import is None:
        return  # a missing row fails above; "any app" promises nothing
    used = {first_party(module) for _, _, module in imported_modules(app)}
    unused = sorted(row.may_import - used)
    assert not unused, f"{PAGE.relative_to(ROOT)}: the row of {app}/ allows {unused}, which {app}/ never imports"


def test_the_tables_name_paths_that_exist():
    """Every path of "The repository" and every app of "Apps" exists, every file or folder an app's "owns" cell
    names in backticks (``textfiles.py``, ``providers/``) exists in that app, and every top-level folder of the
    repository is in "The repository"."""
    repository = [path_cell(cells["path"]) for cells in markdown_table(REPOSITORY_HEADING)]
    missing = [path for path in repository if not (ROOT / path).exists()]
    missing += [f"{app}/" for app in apps_table() if not (ROOT / app).is_dir()]
    for row in apps_table().values():
        named = re.findall(r"`([\w./-]+(?:\.py|/))`", row.owns)
        missing += [
            f"{row.app}/{name} (named in {row.app}/'s row)" for name in named if not (ROOT / row.app / name).exists()
        ]
    assert not missing, f"{PAGE.relative_to(ROOT)} names paths that do not exist:\n" + "\n".join(missing)
    gitignore = (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    ignored = {line.strip("/") for line in gitignore if line.endswith("/") and "*" not in line}  # var/, site/
    folders = {path.name for path in ROOT.iterdir() if path.is_dir() and not path.name.startswith(".")} - ignored
    assert sorted(folders - set(repository)) == [], f"top-level folders missing from '## {REPOSITORY_HEADING}'"


def top_level_names(path: Path) -> set[str]:
    """The names a module defines or imports at its top level (what ``module.name`` can reach)."""
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for target in targets for n in ast.walk(target) if isinstance(n, ast.Name))
    return names


def missing_dotted_name(dotted: str) -> str | None:
    """Why ``app.module.name`` names nothing (None when it names a module, or a name at a module's top)."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:end])
        module = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
        if module.is_file():
            rest = parts[end:]
            if rest and rest[0] not in top_level_names(module):
                return f"{dotted}: {module.relative_to(ROOT)} defines no {rest[0]}"
            return None
    return f"{dotted}: no such module"


def test_the_rules_table_names_what_exists():
    """Every module or module-level name (``app.module.name``) and every file the "where" column names exists."""
    missing = []
    for cells in markdown_table(RULES_HEADING):
        for name in re.findall(r"`([^`]+)`", cells["where"]):
            if "/" in name:
                missing += [name] if not (ROOT / name).exists() else []
            elif name.split(".")[0] in APPS and "." in name:
                missing += [why] if (why := missing_dotted_name(name.removesuffix("()"))) else []
    assert not missing, f"{PAGE.relative_to(ROOT)}, '## {RULES_HEADING}', names what does not exist:\n" + "\n".join(
        missing
    )
