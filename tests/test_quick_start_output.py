"""Issue 48, item 5: ``scripts/start`` printed a model's "Loading weights 0%" bar (transformers') among its
lines, and then only the admin's URL. Its environment now silences the bar, and it ends with every address a
user needs (``scripts/start --urls`` prints them alone), each one a page this server has."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.urls import resolve

ROOT = Path(__file__).resolve().parents[1]
START = ROOT / "scripts" / "start"
LOAD_THE_DEMO_MODEL = (
    "from transformers import AutoModelForSeq2SeqLM\nAutoModelForSeq2SeqLM.from_pretrained('generation/demo/model')\n"
)


def start_exports() -> dict[str, str]:
    """The ``export NAME=VALUE`` lines of scripts/start with a literal value (what its commands run with)."""
    return dict(re.findall(r"^export ([A-Z_]+)=([^$\s]+)$", START.read_text(), re.M))


def load_output(extra: dict[str, str]) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    env.update(HF_HUB_OFFLINE="1", **extra)
    done = subprocess.run(
        [sys.executable, "-c", LOAD_THE_DEMO_MODEL], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout + done.stderr


@pytest.mark.slow
def test_the_quick_start_loads_models_without_a_progress_bar():
    assert "Loading weights" in load_output({})  # what the quick start printed before
    assert "Loading weights" not in load_output(start_exports())


def test_the_quick_start_ends_with_every_address_a_user_needs():
    done = subprocess.run([str(START), "--urls"], env={**os.environ, "PORT": "8123"}, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    printed = done.stdout
    for path in ("/admin/", "/annotate/next/", "/research/campaigns/", "/api/schema/ui/", "/api/schema/"):
        assert f"http://127.0.0.1:8123{path}" in printed, path
        resolve(path)  # a page this server has
    assert "mkdocs serve -a 127.0.0.1:8001" in printed  # the documentation site, on a port of its own
    assert START.read_text().rstrip().splitlines()[-3:-1] == ["urls", 'echo "Logs: var/log/. Press Ctrl-C to stop."']
