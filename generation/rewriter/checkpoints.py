"""Training checkpoints: ``checkpoints/step-XXXXXXX/state.pt`` (model, optimizer, schedule, RNG state and
history), written atomically, the newest few kept; a re-run resumes from the latest."""

from __future__ import annotations

import datetime as _dt
import json
import random
import re
import shutil
from pathlib import Path

from infra.textfiles import atomic_dir

CHECKPOINTS = "checkpoints"
STATE_FILE = "state.pt"


def latest_checkpoint(out_dir: str | Path) -> Path | None:
    """The newest complete checkpoint under ``out_dir`` (None without one): what a re-run resumes from."""
    root = Path(out_dir) / CHECKPOINTS
    if not root.is_dir():
        return None
    cands = sorted(
        p for p in root.iterdir() if p.is_dir() and re.fullmatch(r"step-\d+", p.name) and (p / STATE_FILE).is_file()
    )
    return cands[-1] if cands else None


def load_state(checkpoint: Path | None) -> dict | None:
    """A checkpoint's saved state (None without one), on the CPU."""
    import torch

    return torch.load(checkpoint / STATE_FILE, map_location="cpu", weights_only=False) if checkpoint else None


def rng_state() -> dict:
    """Python's and torch's RNG state, saved with a checkpoint so that a resumed run draws what an
    uninterrupted one would."""
    import torch

    return {"python": random.getstate(), "torch": torch.get_rng_state()}


def set_rng_state(state: dict | None) -> None:
    """Restore :func:`rng_state`'s state (nothing for a checkpoint saved without one)."""
    import torch

    if not state:
        return
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])


def save_checkpoint(out_dir: Path, step: int, payload: dict, keep: int, *, protect: int | None = None) -> Path:
    """Write ``checkpoints/step-XXXXXXX`` atomically (a temporary folder renamed into place) and keep
    only the newest ``keep`` checkpoints, and step ``protect``'s (the best so far) whatever its age."""
    import torch

    root = out_dir / CHECKPOINTS
    root.mkdir(parents=True, exist_ok=True)
    final = checkpoint_folder(out_dir, step)
    with atomic_dir(final) as tmp:
        torch.save(payload, tmp / STATE_FILE)
        with open(tmp / "meta.json", "w") as fh:
            json.dump({"step": step, "loss": payload.get("last_loss"), "saved_at": utc_now()}, fh)
    if keep > 0:
        olds = sorted(p for p in root.iterdir() if p.is_dir() and re.fullmatch(r"step-\d+", p.name))
        for p in olds[:-keep]:
            if protect is None or p != checkpoint_folder(out_dir, protect):
                shutil.rmtree(p, ignore_errors=True)
    return final


def utc_now() -> str:
    """Now, in UTC, as the checkpoints' and the training record's timestamps are written."""
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def checkpoint_folder(out_dir: str | Path, step: int) -> Path:
    """Where step ``step``'s checkpoint is (or would be) kept."""
    return Path(out_dir) / CHECKPOINTS / f"step-{step:07d}"


def best_check(history: list[dict]) -> dict | None:
    """The history entry of the lowest validation loss (the earliest of equals; None before any check): what
    ``--export-best`` and ``--patience`` export, as Hugging Face's ``load_best_model_at_end`` does."""
    checks = [h for h in history if h.get("valid_loss") is not None]
    return min(checks, key=lambda h: (h["valid_loss"], h["step"])) if checks else None


def checks_since_best(history: list[dict]) -> int:
    """How many validation checks came after the best one: early stopping ends a run when it reaches the
    patience. Computed from the history alone, so a resumed run stops where an uninterrupted one would."""
    best = best_check(history)
    if best is None:
        return 0
    return sum(1 for h in history if h.get("valid_loss") is not None and h["step"] > best["step"])


def stopped_early(history: list[dict], patience: int | None) -> bool:
    """Whether ``--patience`` has ended the run: the validation loss has not fallen for that many checks."""
    return bool(patience) and checks_since_best(history) >= patience
