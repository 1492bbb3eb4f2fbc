"""Screenshots of the browser tests' pages for the README (``docs/screens/``): taken only when
``PARAFORGE_SCREENSHOTS`` names a folder, e.g. ``PARAFORGE_SCREENSHOTS=docs/screens scripts/test -m browser``."""

from __future__ import annotations

import os
from pathlib import Path


def shoot(page, name: str) -> None:
    """Save the page as ``<PARAFORGE_SCREENSHOTS>/<name>.png`` (the visible window), if asked to."""
    folder = os.environ.get("PARAFORGE_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"))
