"""The linter and the formatter (ruff, configured in pyproject.toml) pass on the whole tree:
``ruff check .`` and ``ruff format --check .`` (run ``ruff format .`` to fix the second)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "command",
    [["check", "--no-cache", "--output-format", "concise", "."], ["format", "--check", "--no-cache", "."]],
    ids=["lint", "format"],
)
def test_ruff_passes(command):
    result = subprocess.run(
        [sys.executable, "-m", "ruff", *command], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, f"ruff {' '.join(command)} found problems:\n{result.stdout}{result.stderr}"
