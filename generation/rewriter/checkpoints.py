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


def save_checkpoint(out_dir: Path, step: int, payload: dict, keep: int) -> Path:
    """Write ``checkpoints/step-XXXXXXX`` atomically (a temporary folder renamed into place) and keep
    only the newest ``keep`` checkpoints."""
    import torch

    root = out_dir / CHECKPOINTS
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step-{step:07d}"
    with atomic_dir(final) as tmp:
        torch.save(payload, tmp / STATE_FILE)
        with open(tmp / "meta.json", "w") as fh:
            json.dump({"step": step, "loss": payload.get("last_loss"), "saved_at": utc_now()}, fh)
    if keep > 0:
        olds = sorted(p for p in root.iterdir() if p.is_dir() and re.fullmatch(r"step-\d+", p.name))
        for p in olds[:-keep]:
            shutil.rmtree(p, ignore_errors=True)
    return final


def utc_now() -> str:
    """Now, in UTC, as the checkpoints' and the training record's timestamps are written."""
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
