"""Provenance by name: a path on one machine means nothing elsewhere and tells strangers how that machine is laid
out. ``local_name`` turns a local path into a name (a Hugging Face cache snapshot into ``org/name@revision``, a
folder inside Paraforge into its path from the project root, anything else into its last component);
``without_local_paths`` applies it to every string of a JSON value. Releases (``scoring.releases.card``) and the
admin's pages (a campaign's model) name what they show this way."""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from django.conf import settings

_WINDOWS_ABSOLUTE = re.compile(r"^(?:[A-Za-z]:[\\/]|\\\\)")
_HUB_SNAPSHOT = re.compile(
    r"models--(?P<org>[^/\\]+?)--(?P<name>[^/\\]+)[/\\]snapshots[/\\](?P<revision>[0-9a-f]{7,64})"
)


def is_local_path(value: Any) -> bool:
    """A path that shows where things lie on the machine that wrote it: absolute (POSIX, Windows, ``~``,
    ``file://``) or leaving the project root (``..``). A path relative to the project root (where Paraforge's
    commands and workers run, ``generation/demo/model``) is the same on every installation, and stays."""
    if not isinstance(value, str):
        return False
    return (
        value.startswith(("/", "~", "file://"))
        or bool(_WINDOWS_ABSOLUTE.match(value))
        or ".." in PurePosixPath(value.replace("\\", "/")).parts
    )


def local_name(value: Any) -> Any:
    """A local path as a name that means the same elsewhere (see the module docstring); other values as they are."""
    if not is_local_path(value):
        return value
    text = value.removeprefix("file://")
    hub = _HUB_SNAPSHOT.search(text)
    if hub:
        return f"{hub['org']}/{hub['name']}@{hub['revision']}"
    if _WINDOWS_ABSOLUTE.match(text):
        return PureWindowsPath(text).name or "."
    base = Path(settings.BASE_DIR).resolve()
    try:
        return (base / Path(text).expanduser()).resolve().relative_to(base).as_posix()
    except (ValueError, OSError, RuntimeError):
        return PurePosixPath(text).name or "."


def without_local_paths(value: Any) -> Any:
    """``value`` (JSON) with every string that is a local path replaced by ``local_name``."""
    if isinstance(value, dict):
        return {k: without_local_paths(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_local_paths(v) for v in value]
    return local_name(value)
