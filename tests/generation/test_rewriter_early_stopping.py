"""Early stopping and the best checkpoint (``train_rewriter --patience`` / ``--export-best``): a run whose
validation loss stops falling ends and exports the weights of its lowest validation loss, kept whatever
``--keep-checkpoints`` says; a re-run does not train on; the export records the settings it was trained
with, not an ``--export-only`` command's defaults."""

from __future__ import annotations

import json
import shutil
from io import StringIO

import pytest
import torch
from django.core.management import CommandError, call_command

from generation import rewriter
from generation.rewriter.checkpoints import best_check, checks_since_best

from .test_rewriter import TINY, _made_up_pairs

# A constant peak this high makes the tiny model's validation loss wander after a few steps (seeded: the
# same run every time), so that patience has something to stop.
UNSTEADY = {**TINY, "lr": 0.2, "schedule": "constant"}


@pytest.fixture
def pairs_file(tmp_path):
    p = tmp_path / "pairs.tsv"
    p.write_text("".join(f"{a}\t{b}\n" for a, b in _made_up_pairs()), encoding="utf-8")
    return p


def _weights(folder) -> dict:
    model, _ = rewriter.load_rewriter(folder)
    return {k: v.clone() for k, v in model.state_dict().items()}


def _checkpoint_weights(run_dir, step) -> dict:
    state = torch.load(run_dir / "checkpoints" / f"step-{step:07d}" / "state.pt", weights_only=False)
    return state["model"]


def test_best_check_and_checks_since_best_read_the_history():
    history = [
        {"step": 50, "loss": 2.0},
        {"step": 100, "loss": 1.8, "valid_loss": 1.5},
        {"step": 150, "loss": 1.6, "valid_loss": 1.2},
        {"step": 200, "loss": 1.4, "valid_loss": 1.2},  # equal: the earlier one stays the best
        {"step": 250, "loss": 1.2, "valid_loss": 1.3},
    ]
    assert best_check(history)["step"] == 150
    assert checks_since_best(history) == 2
    assert best_check(history[:1]) is None and checks_since_best(history[:1]) == 0


def test_patience_stops_the_run_and_exports_the_best_checkpoint(tmp_path, pairs_file):
    out = tmp_path / "run"
    res = rewriter.train(pairs_file, out, steps=60, checkpoint_every=3, patience=2, keep_checkpoints=1, **UNSTEADY)
    assert res.stopped_early and res.exported and res.step < 60
    best = best_check(res.history)
    assert res.exported_step == best["step"] < res.step
    assert checks_since_best(res.history) == 2  # stopped at the second check without a better loss
    # the best checkpoint is kept beside the latest, although --keep-checkpoints is 1
    kept = sorted(p.name for p in (out / "checkpoints").iterdir() if not p.name.startswith("."))
    assert kept == [f"step-{best['step']:07d}", f"step-{res.step:07d}"]
    exported, saved = _weights(out), _checkpoint_weights(out, best["step"])
    assert all(torch.equal(exported[k], v) for k, v in saved.items())
    latest = _checkpoint_weights(out, res.step)
    assert any(not torch.equal(exported[k], v) for k, v in latest.items())
    info = json.loads((out / "paraforge_training.json").read_text())["training"]
    assert info["stopped_early"] is True and info["exported_step"] == best["step"]
    assert info["best_valid_loss"] == best["valid_loss"] and info["steps"] == res.step

    again = rewriter.train(pairs_file, out, steps=60, checkpoint_every=3, patience=2, keep_checkpoints=1, **UNSTEADY)
    assert again.step == res.step and again.start_step == res.step and again.stopped_early  # no step trained


def test_export_best_of_a_run_without_patience(tmp_path, pairs_file):
    out = tmp_path / "run"
    res = rewriter.train(pairs_file, out, steps=33, checkpoint_every=3, keep_checkpoints=1, **UNSTEADY)
    best = best_check(res.history)
    assert best["step"] != 33, "the seeded run's last check should not be its best"
    dest = tmp_path / "best"
    exported = rewriter.train(None, out, export_only=True, export_best=True, export=dest, **TINY)
    assert exported.exported_step == best["step"]
    weights = _weights(dest)
    assert all(torch.equal(weights[k], v) for k, v in _checkpoint_weights(out, best["step"]).items())


def test_export_best_says_when_the_best_checkpoint_is_gone(tmp_path, pairs_file):
    out = tmp_path / "run"
    res = rewriter.train(pairs_file, out, steps=33, checkpoint_every=3, keep_checkpoints=1, **UNSTEADY)
    # a run trained before the best was kept (or a folder pruned by hand)
    shutil.rmtree(out / "checkpoints" / f"step-{best_check(res.history)['step']:07d}")
    with pytest.raises(CommandError, match=r"lowest validation loss \(step \d+.*leave out --export-best"):
        call_command("train_rewriter", "--out", str(out), "--export-only", "--export-best", stdout=StringIO())


def test_export_only_records_the_training_settings_not_its_own_defaults(tmp_path, pairs_file):
    out = tmp_path / "run"
    rewriter.train(pairs_file, out, steps=4, checkpoint_every=2, **TINY)
    dest = tmp_path / "export"
    rewriter.train(None, out, export_only=True, export=dest)
    training = json.loads((dest / "paraforge_training.json").read_text())["training"]
    assert (training["lr"], training["batch_size"], training["warmup"], training["seed"]) == (3e-3, 16, 2, 3)


def test_patience_needs_a_validation_set(tmp_path):
    few = tmp_path / "few.tsv"
    few.write_text("".join(f"{a}\t{b}\n" for a, b in _made_up_pairs(n=8)), encoding="utf-8")
    with pytest.raises(CommandError, match="--patience needs a validation loss"):
        call_command(
            "train_rewriter", "--pairs", str(few), "--out", str(tmp_path / "run"), "--steps", "4",
            "--patience", "2", "--d-model", "32", "--layers", "1", "--ffn-dim", "64", "--heads", "2",
            "--vocab-size", "60", "--threads", "1", stdout=StringIO(),
        )  # fmt: skip
    with pytest.raises(CommandError, match="--patience must be at least 1"):
        call_command("train_rewriter", "--pairs", str(few), "--out", str(tmp_path / "r2"), "--patience", "0")
