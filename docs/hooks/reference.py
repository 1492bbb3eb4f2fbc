"""MkDocs hook: the reference pages that are generated from the code at build time, so that they cannot drift.

A page asks for a generated part with a marker line, ``<!-- paraforge:NAME -->``, which this hook replaces
with Markdown built from the code (``GENERATORS`` below):

* ``commands``: every management command of this repository's apps (not Django's or third parties'), from
  each command's own argparse parser (``create_parser``), and the ``python -m`` entry points;
* ``batch-settings``: the schema of ``Batch.settings`` (``annotation/batch_settings.py``);
* ``release-columns``: the columns of a release's files (``scoring/releases/columns.py``,
  ``scoring/releases/parquet.py``);
* ``http-api``: the paths and operations of the OpenAPI description (drf-spectacular's generator);
* ``systems``: the 37 constraint systems (``generation/constraints/systems.py``).

It sets up Django on ``config.settings.base`` with a throwaway ``PARAFORGE_VAR_DIR``: no database, broker or
network is touched, only modules are imported. A generator that fails stops the build (``mkdocs build --strict``
in ``tests/test_docs.py``).
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^<!-- paraforge:([a-z-]+) -->$", re.MULTILINE)
_SETUP_DONE = False


def _django() -> None:
    """Import Django on the settings that need no services (SQLite path, embedded broker: never opened)."""
    global _SETUP_DONE
    if _SETUP_DONE:
        return
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.base"
    if "PARAFORGE_VAR_DIR" not in os.environ:
        var = tempfile.mkdtemp(prefix="paraforge-docs-")
        atexit.register(shutil.rmtree, var, ignore_errors=True)
        os.environ["PARAFORGE_VAR_DIR"] = var
    import django

    django.setup()
    _SETUP_DONE = True


def _text(text: object) -> str:
    """Plain text for Markdown: one line, ``<`` and ``>`` escaped (``<TAB>`` is not an HTML tag)."""
    return " ".join(str(text).split()).replace("<", "&lt;").replace(">", "&gt;")


def _cell(text: object) -> str:
    """Text for a Markdown table cell: one line, pipes escaped."""
    return _text(text).replace("|", "\\|")


def _code(text: object) -> str:
    text = str(text)
    return f"`` {text} ``" if "`" in text else f"`{text}`"


# --- commands ----------------------------------------------------------------------------------------


def _django_common_actions() -> set[tuple[tuple[str, ...], str | None]]:
    """The options every Django command has (``--settings``, ``--verbosity``, ...), by flags and help text:
    a command's own option with a flag of the same name (``export_release --version``) has its own help."""
    from django.core.management.base import BaseCommand

    parser = BaseCommand().create_parser("manage.py", "x")
    return {(tuple(a.option_strings), a.help) for a in parser._actions}


def _strip_actions(parser: argparse.ArgumentParser, drop) -> None:
    for action in list(parser._actions):
        if drop(action):
            parser._remove_action(action)
            for group in [*parser._action_groups, *parser._mutually_exclusive_groups]:
                if action in group._group_actions:
                    group._group_actions.remove(action)


def _default(action: argparse.Action) -> str:
    default = action.default
    if (
        default is None
        or default is argparse.SUPPRESS
        or isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse._StoreConstAction))
    ):
        return ""
    if isinstance(default, Path):
        default = default.relative_to(ROOT) if default.is_absolute() and ROOT in default.parents else default
    return _code(default)


def _argument(action: argparse.Action) -> str:
    if not action.option_strings:
        if action.choices and not action.metavar:
            return _code("{" + ",".join(map(str, action.choices)) + "}")
        return _code(action.metavar or action.dest)
    if action.nargs == 0:
        return ", ".join(_code(o) for o in action.option_strings)
    metavar = action.metavar or action.dest.upper()
    if isinstance(metavar, tuple):
        metavar = " ".join(metavar)
    if action.choices:
        metavar = "{" + ",".join(map(str, action.choices)) + "}"
    if action.nargs in ("+", "*"):
        metavar += " ..."
    return ", ".join(_code(f"{o} {metavar}") for o in action.option_strings)


def _required(action: argparse.Action, parser: argparse.ArgumentParser) -> str:
    for group in parser._mutually_exclusive_groups:
        if action in group._group_actions:
            others = " / ".join(o.option_strings[0] for o in group._group_actions if o is not action)
            return ("one of it and " if group.required else "not with ") + _code(others)
    if not action.option_strings:
        return "yes" if action.nargs not in ("?", "*") else ""
    return "yes" if action.required else ""


def _parser_markdown(parser: argparse.ArgumentParser, level: int) -> list[str]:
    """A parser's usage, description and one table row per argument; sub-commands get their own heading."""
    _strip_actions(parser, lambda a: isinstance(a, argparse._HelpAction))
    lines = ["```text", parser.format_usage().strip(), "```", ""]
    if parser.description:
        lines += [_text(parser.description), ""]
    rows, subcommands = [], None
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            subcommands = action
            continue
        rows.append(
            f"| {_argument(action)} | {_required(action, parser)} | {_default(action)} | {_cell(action.help or '')} |"
        )
    if rows:
        lines += ["| argument | required | default | what |", "|---|---|---|---|", *rows, ""]
    if subcommands is not None:
        helps = {choice.dest: choice.help for choice in subcommands._choices_actions}
        for name, sub in subcommands.choices.items():
            lines += [f"{'#' * (level + 1)} `{parser.prog.removeprefix('manage.py ')} {name}`", ""]
            if helps.get(name):
                lines += [_cell(helps[name][:1].upper() + helps[name][1:]) + ".", ""]
            lines += _parser_markdown(sub, level + 1)
    return lines


def _own_commands() -> dict[str, str]:
    """name -> app of the management commands defined in this repository (not in site-packages)."""
    from django.core.management import get_commands

    own = {}
    for name, app in sorted(get_commands().items()):
        module = importlib.import_module(app)
        path = Path(module.__file__).resolve()
        if ROOT in path.parents and ".venv" not in path.relative_to(ROOT).parts:
            own[name] = app
    return own


class _Parsed(Exception):
    def __init__(self, parser: argparse.ArgumentParser):
        super().__init__(parser.prog)
        self.parser = parser


def _module_parser(module: str) -> argparse.ArgumentParser:
    """The parser a ``python -m module`` entry point builds in its ``main()``, caught at ``parse_args``."""

    def caught(self, *args, **kwargs):
        raise _Parsed(self)

    original = argparse.ArgumentParser.parse_args
    argparse.ArgumentParser.parse_args = caught
    try:
        importlib.import_module(module).main([])
    except _Parsed as parsed:
        return parsed.parser
    finally:
        argparse.ArgumentParser.parse_args = original
    raise RuntimeError(f"{module}.main() built no parser")


MODULE_ENTRY_POINTS = ("scoring.similarity.sts", "scoring.similarity.encoder_head")


def commands() -> str:
    _django()
    from django.core.management import load_command_class

    common = _django_common_actions()
    own = _own_commands()
    lines = ["| command | app | what |", "|---|---|---|"]
    for name, app in own.items():
        help_text = load_command_class(app, name).help or ""
        first = re.split(r"\.\s+(?=[A-Z])", help_text)[0].rstrip(".")
        lines.append(f"| [`{name}`](#{name}) | `{app}` | {_cell(first)} |")
    lines.append("")
    for name, app in own.items():
        parser = load_command_class(app, name).create_parser("manage.py", name)
        _strip_actions(parser, lambda a: (tuple(a.option_strings), a.help) in common)
        lines += [f"## {name}", "", f"Defined in `{app}/management/commands/{name}.py`.", ""]
        lines += _parser_markdown(parser, 2)
    lines += ["## Entry points run with `python -m`", ""]
    for module in MODULE_ENTRY_POINTS:
        parser = _module_parser(module)
        lines += [f"### `python -m {module}`", "", f"Defined in `{module.replace('.', '/')}.py` (`main()`).", ""]
        lines += _parser_markdown(parser, 3)
    return "\n".join(lines)


# --- batch settings ------------------------------------------------------------------------------------


def batch_settings() -> str:
    _django()
    from annotation import batch_settings as bs

    def kind(key: str) -> str:
        if key in bs.INT_SETTINGS:
            lo, hi, unit = bs.INT_SETTINGS[key]
            return f"integer ({unit}), {lo} to {hi}" if hi is not None else f"integer ({unit}), at least {lo}"
        if key in bs.RATE_SETTINGS:
            return "number, 0 to 1"
        if key in ("reward_usd", "reward_per_session"):
            return "amount (number or decimal text), at least 0"
        if key in bs.TEXT_SETTINGS:
            return "text"
        if key in bs.LIST_SETTINGS:
            return "list of text, or comma-separated text"
        if key in bs.FLAG_SETTINGS:
            return "true or false"
        if key == "mode":
            return "one of " + ", ".join(_code(m) for m in bs.MODES)
        if key == "easl":
            return "object (below)"
        return "recorded, not checked"

    lines = ["| key | type and range | what |", "|---|---|---|"]
    lines += [f"| `{key}` | {kind(key)} | {_cell(what)} |" for key, what in bs.SCHEMA.items()]
    lines += ["", "The `easl` object's options (`easl_settings_clean`):", "", "| key | type and range |", "|---|---|"]
    for key, (lo, hi, unit) in bs.EASL_INT_SETTINGS.items():
        bound = f"{lo} to {hi}" if hi is not None else f"at least {lo}"
        lines.append(f"| `{key}` | integer ({unit}), {bound} |")
    for key, (lo, inclusive) in bs.EASL_FLOAT_SETTINGS.items():
        lines.append(f"| `{key}` | number, {'at least' if inclusive else 'more than'} {lo} |")
    return "\n".join(lines)


# --- release format ------------------------------------------------------------------------------------


def release_columns() -> str:
    _django()
    from scoring.releases import columns as releases, parquet as rp

    lines = []
    for title, tsv_name, parquet_name, columns, schema, meanings in (
        ("Pairs", "pairs.tsv.gz", rp.PAIRS_PARQUET, releases.PAIR_COLUMNS, rp.PAIRS_SCHEMA, rp.PAIR_MEANINGS),
        (
            "Judgments",
            releases.JUDGMENTS_FILE,
            rp.JUDGMENTS_PARQUET,
            releases.JUDGMENT_COLUMNS,
            rp.JUDGMENTS_SCHEMA,
            rp.JUDGMENT_MEANINGS,
        ),
    ):
        if list(columns) != list(schema.names):
            raise RuntimeError(f"{tsv_name} and {parquet_name} columns differ: {columns} / {schema.names}")
        lines += [
            f"### {title}: `{tsv_name}` / `{parquet_name}`",
            "",
            "| column | Parquet (Arrow) type | what |",
            "|---|---|---|",
        ]
        lines += [f"| `{f.name}` | `{f.type}` | {_cell(meanings.get(f.name, ''))} |" for f in schema]
        lines.append("")
    lines += [
        f"Release format name in `manifest.json`: `{releases.RELEASE_FORMAT}`; pairs formats: "
        + ", ".join(_code(f) for f in releases.FORMATS)
        + "."
    ]
    return "\n".join(lines)


# --- HTTP API --------------------------------------------------------------------------------------------


def http_api() -> str:
    _django()
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    info = schema["info"]
    lines = [
        f"OpenAPI {schema['openapi']}, *{info['title']}* version {info['version']}.",
        "",
        _text(info.get("description", "")),
        "",
        "| method | path | what | who | answers |",
        "|---|---|---|---|---|",
    ]
    for path, operations in schema["paths"].items():
        for method, op in operations.items():
            who = (
                "a signed-in session (`cookieAuth`)"
                if any("cookieAuth" in s for s in op.get("security", []))
                else "no session needed"
            )
            lines.append(
                f"| {method.upper()} | `{path}` | {_cell(op.get('summary', ''))} | {who} | "
                f"{', '.join(op.get('responses', {}))} |"
            )
    lines.append("")
    for path, operations in schema["paths"].items():
        for method, op in operations.items():
            lines += [f"### {method.upper()} `{path}`", ""]
            if op.get("description"):
                lines += [_text(op["description"]), ""]
            params = op.get("parameters", [])
            if params:
                lines += ["| parameter | in | required | what |", "|---|---|---|---|"]
                lines += [
                    f"| `{p['name']}` | {p['in']} | {'yes' if p.get('required') else ''} | "
                    f"{_cell(p.get('description', ''))} |"
                    for p in params
                ]
                lines.append("")
            body = op.get("requestBody", {}).get("content", {})
            if body:
                lines += [
                    "Request body: "
                    + ", ".join(f"`{ctype}` ({_ref(content.get('schema', {}))})" for ctype, content in body.items()),
                    "",
                ]
            lines += ["| status | what |", "|---|---|"]
            for status, response in op.get("responses", {}).items():
                refs = ", ".join(
                    f"`{ctype}` {_ref(c.get('schema', {}))}".rstrip()
                    for ctype, c in response.get("content", {}).items()
                )
                lines.append(
                    f"| {status} | {_cell(response.get('description', ''))}{' (' + refs + ')' if refs else ''} |"
                )
            lines.append("")
    lines += [
        "## Schemas",
        "",
        "The request and response shapes the operations above name (`components.schemas` of the description).",
        "",
    ]
    for name, component in schema.get("components", {}).get("schemas", {}).items():
        lines += [f"### `{name}`", ""]
        if component.get("description") and not component.get("enum"):  # an enum's is its values again
            lines += [_text(component["description"]), ""]
        properties = component.get("properties", {})
        if properties:
            required = set(component.get("required", []))
            lines += ["| field | type | required | what |", "|---|---|---|---|"]
            lines += [
                f"| `{field}` | {_type(spec)} | {'yes' if field in required else ''} | "
                f"{_cell(spec.get('description', ''))} |"
                for field, spec in properties.items()
            ]
            lines.append("")
        elif component.get("enum"):
            lines += ["One of " + ", ".join(_code(v) for v in component["enum"]) + ".", ""]
        else:
            lines += [f"Type: {_type(component)}.", ""]
    return "\n".join(lines)


def _type(spec: dict) -> str:
    """A property's type in words: ``string``, ``integer (int64)``, ``list of `Judgment` ``, ``one of ...``."""
    if "$ref" in spec:
        return _ref(spec)
    if "allOf" in spec or "oneOf" in spec or "anyOf" in spec:
        parts = spec.get("allOf") or spec.get("oneOf") or spec.get("anyOf")
        return " or ".join(_type(p) for p in parts)
    kind = spec.get("type", "any")
    if kind == "array":
        kind = "list of " + _type(spec.get("items", {}))
    elif spec.get("format"):
        kind += f" ({spec['format']})"
    if spec.get("enum"):
        kind += ": " + ", ".join(_code(v) for v in spec["enum"] if v is not None)
    bounds = [
        f"{word} {spec[key]}"
        for key, word in (("minimum", ">="), ("maximum", "<="), ("maxLength", "length <="), ("maxItems", "items <="))
        if key in spec
    ]
    if bounds:
        kind += " (" + ", ".join(bounds) + ")"
    if spec.get("nullable"):
        kind += ", or null"
    return kind


def _ref(schema: dict) -> str:
    if "$ref" in schema:
        return "`" + schema["$ref"].rsplit("/", 1)[-1] + "`"
    if schema.get("type") == "array" and "$ref" in schema.get("items", {}):
        return "list of `" + schema["items"]["$ref"].rsplit("/", 1)[-1] + "`"
    return schema.get("type", "")


# --- the 37 systems ----------------------------------------------------------------------------------------


def systems() -> str:
    _django()
    from generation.constraints.systems import SYSTEMS

    lines = [
        "| No. | name | kind | Tab. 3 | selection | ranks / count | Lex | PPDB relation |",
        "|---:|---|---|---|---|---|---|---|",
    ]
    for s in SYSTEMS:
        which = ", ".join(map(str, s.ranks)) if s.ranks else (str(s.count) if s.count else "")
        lines.append(
            f"| {s.number} | {_cell(s.name)} | {s.kind} | {s.sign} | {s.selection or ''} | {which} | "
            f"{s.lex} | {s.ppdb_relation or ''} |"
        )
    return "\n".join(lines)


GENERATORS = {
    "commands": commands,
    "batch-settings": batch_settings,
    "release-columns": release_columns,
    "http-api": http_api,
    "systems": systems,
}


def on_page_markdown(markdown: str, page, config, files) -> str:
    def replace(match: re.Match) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise ValueError(f"{page.file.src_path}: unknown generated part {name!r} (known: {', '.join(GENERATORS)})")
        return GENERATORS[name]()

    return MARKER.sub(replace, markdown)
