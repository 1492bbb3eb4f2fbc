"""``manage.py help``, ``--help``, an argument error and a lookup error of the main commands import no numerical or
model library (issue 37: every command took 3.7 s, scipy.stats and sacrebleu loading with the apps, and a wrong
campaign name cost scikit-learn too). Each command runs in a fresh process, as from a shell; the process prints the
heavy modules left in ``sys.modules`` as it exits: bench/command_startup.py's probe and list of those modules, the
bench that times the same cases."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from bench.command_startup import loaded_by_probe, probe_source
from tests.conftest import ROOT, database_url_of_test_db

HELP = [
    ["help"],
    ["train_regressor", "--help"],
    ["score_resource", "--help"],
    ["export_release", "--help"],
    ["paraphrase", "--help"],
    ["generate", "--help"],
    ["score_pairs", "--help"],
    ["create_hit_batch", "--help"],
]
ARGUMENT_ERRORS = [
    ["train_regressor"],  # CAMPAIGN and --name missing
    ["train_regressor", "demo", "--name", "r", "--recipe", "nosuch"],
    ["score_resource", "demo"],  # --regressor missing
    ["paraphrase", "--input", "in.txt"],
    ["export_release", "demo", "--format", "nosuch"],
]


def run_probe(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-c", probe_source(), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    loaded = loaded_by_probe(done.stderr)
    assert loaded is not None, done.stderr[-2000:]
    return done.returncode, loaded, done.stdout + done.stderr


def environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update(DJANGO_SETTINGS_MODULE="config.settings.test", **extra)
    return env


def run_all(cases: list[list[str]], env: dict[str, str]) -> list[tuple[list[str], int, str, str]]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda args: run_probe(args, env), cases))
    return [(args, *result) for args, result in zip(cases, results)]


def test_help_and_argument_errors_import_no_numerical_or_model_library():
    results = run_all(HELP + ARGUMENT_ERRORS, environment())
    for args, code, loaded, output in results:
        expected = 0 if args in HELP else 2
        assert code == expected, (args, output[-1500:])
        assert loaded == "", f"manage.py {' '.join(args)} imported {loaded}"
    assert "Available subcommands" in results[0][3]
    assert "the following arguments are required" in results[len(HELP)][3]


@pytest.mark.django_db
def test_lookup_errors_import_no_numerical_or_model_library(tmp_path):
    """A wrong campaign, resource, regressor or model is said before anything heavy loads (the database is the
    test database: its tables, none of these names)."""
    env = environment(DATABASE_URL=database_url_of_test_db())
    inputs = tmp_path / "in.txt"
    inputs.write_text("A man is playing a guitar.\n")
    cases = [
        ["train_regressor", "nosuch", "--name", "r"],
        ["score_resource", "nosuch", "--regressor", "r"],
        ["export_release", "nosuch", "--out", str(tmp_path / "release")],
        ["score_pairs", "--regressor", "nosuch", "--input", "in.tsv", "--output", str(tmp_path / "out.tsv")],
        ["paraphrase", "--model", str(tmp_path / "no-model"), "--input", str(inputs), "--output", str(tmp_path / "o")],
    ]
    results = run_all(cases, env)
    for args, code, loaded, output in results:
        assert code == 1, (args, output[-1500:])
        assert loaded == "", f"manage.py {' '.join(args)} imported {loaded}"
    said = [output for *_, output in results]
    assert "no campaign named 'nosuch'" in said[0]
    assert "no resource named or numbered 'nosuch'" in said[1]
    assert "no regressor named 'nosuch'" in said[3]
    assert f"model folder '{tmp_path / 'no-model'}' does not exist" in said[4]
