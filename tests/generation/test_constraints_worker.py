"""A Celery worker is set up for constraint selection at start-up, not by the selection code: the
selection tables are loaded before the pool forks, and each child takes everything loaded out of the
garbage collector's scans and raises its young-generation threshold (config/process_tuning.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

WORKER_START = """
import gc, json
import django
django.setup()
from celery.signals import worker_init, worker_process_init
from config.celery import app
import generation.selection.fast as fast
before = {"loaded": fast._TABLES_LOADED, "frozen": gc.get_freeze_count(), "young": gc.get_threshold()[0]}
worker_init.send(sender=None)  # (what Celery sends in the main process, then in each pool child)
worker_process_init.send(sender=None)
after = {"loaded": fast._TABLES_LOADED, "frozen": gc.get_freeze_count(), "young": gc.get_threshold()[0]}
print(json.dumps([before, after]))
"""


@pytest.mark.slow
def test_worker_start_up_loads_the_selection_tables_and_tunes_the_collector():
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="config.settings.test")
    run = subprocess.run([sys.executable, "-c", WORKER_START], cwd=ROOT, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    before, after = json.loads(run.stdout.strip().splitlines()[-1])
    assert before == {"loaded": False, "frozen": 0, "young": 700}  # importing selection tunes nothing
    assert after["loaded"] and after["frozen"] > 100_000 and after["young"] == 20_000
