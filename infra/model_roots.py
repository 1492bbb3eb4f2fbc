"""The folders a web form may name models (and their files) under: ``settings.PARAFORGE_MODEL_ROOTS``.

Why: the command line takes any path (whoever runs it has the server's shell), but a path typed on a web page
must not reach the server's other files, nor tell whether they exist. :func:`confined_path` resolves what was
typed (absolute, or relative to a root; symbolic links and ``..`` followed) and answers only when the result
lies under a root; the caller then refuses everything else with one message that names what was typed and
nothing of the server. The release's entailment model (``scoring.releases.entailment``) and the generate
form's models and PPDB file (``generation.web.forms``) are confined this way."""

from __future__ import annotations

import os
from pathlib import Path

from django.conf import settings


def model_roots() -> list[Path]:
    """The folders a form may name models under, resolved: ``settings.PARAFORGE_MODEL_ROOTS``, by default
    ``models/`` of the project and of ``PARAFORGE_VAR_DIR``."""
    return [Path(os.path.realpath(root)) for root in settings.PARAFORGE_MODEL_ROOTS]


def within_roots(path: Path, roots: list[Path]) -> bool:
    """Whether the resolved ``path`` is one of ``roots`` or lies under one."""
    return any(path == root or path.is_relative_to(root) for root in roots)


def confined_paths(typed: str) -> list[Path]:
    """What ``typed`` names under the model roots, resolved, in the roots' order (several when a relative path
    names something under more than one root); empty for a blank value, a path outside every root, and a
    value no path can be (a NUL byte, a name too long, a symbolic link loop)."""
    roots = model_roots()
    if not typed.strip() or not roots:
        return []
    try:
        given = Path(typed)
        candidates = [given] if given.is_absolute() else [root / given for root in roots]
        return [path for path in (Path(os.path.realpath(c)) for c in candidates) if within_roots(path, roots)]
    except (OSError, ValueError, RuntimeError):
        return []


def confined_path(typed: str, *, folder: bool) -> Path | None:
    """The existing folder (``folder``) or file ``typed`` names under the model roots (:func:`confined_paths`),
    or None: outside them, missing, or of the other kind."""
    for path in confined_paths(typed):
        try:
            if path.is_dir() if folder else path.is_file():
                return path
        except OSError:
            continue
    return None
