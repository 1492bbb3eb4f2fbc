"""Bidirectional-entailment release filter (Klemen & Robnik-Sikonja, seeds/004): a reference and a paraphrase
are kept only if each entails the other according to a local NLI model.

The paper's three decision boundaries: ``argmax`` (entailment is the most probable class) and the stricter
probability thresholds 0.75 and 0.90 on P(entailment); here any threshold in (0, 1] may be given. Both
directions must pass: premise=reference/hypothesis=paraphrase and premise=paraphrase/hypothesis=reference.

The model is a Hugging Face sequence-classification checkpoint folder, loaded offline (``local_files_only``);
the index of the entailment class is read from ``config.id2label``. It is loaded (and checked) before anything
of a release is written, and its folder and the SHA-256 of its weight files go into the manifest so that a
release says exactly which model filtered it.

The command line (``export_release --entailment-model DIR``) takes any folder: whoever runs it has the
server's shell. A folder typed into the admin's export form (and the job it starts) is taken only under the
allowed model roots (``PARAFORGE_MODEL_ROOTS``: absolute, or relative to a root), and anything else gets one
message whether or not it exists, so the form says nothing about the server's other folders.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from infra.model_roots import confined_paths, model_roots

ARGMAX = "argmax"
BATCH_SIZE = 32
_WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin")


class EntailmentModelError(ValueError):
    """An --entailment-model folder that cannot serve as an NLI model."""


def _weight_files(folder: Path) -> list[str]:
    """Names of a checkpoint folder's weight files (sharded checkpoints have several), sorted."""
    return sorted({p.name for pattern in _WEIGHT_PATTERNS for p in folder.glob(pattern) if p.is_file()})


def weights_sha256(folder: Path) -> dict[str, str]:
    """SHA-256 of each weight file of a checkpoint folder, by file name."""
    digests = {}
    for name in _weight_files(folder):
        h = hashlib.sha256()
        with open(folder / name, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        digests[name] = h.hexdigest()
    return digests


def entailment_label_index(id2label: dict[Any, str]) -> int:
    """The class index whose label is "entailment" (any case); error if none."""
    found = [int(i) for i, label in (id2label or {}).items() if str(label).strip().lower() == "entailment"]
    if len(found) != 1:
        labels = ", ".join(f"{i}={label}" for i, label in sorted((id2label or {}).items(), key=lambda x: int(x[0])))
        raise EntailmentModelError(
            f"the model's config.id2label ({labels or 'empty'}) has no single 'entailment' label"
        )
    return found[0]


def entailment_model_folder(folder: str | Path, *, shown_as: str | None = None) -> Path:
    """The resolved folder if it looks like a checkpoint (a folder with config.json and weights), checked
    without loading anything: what a web request can afford before it hands the export to a worker.
    ``shown_as``: the name the messages give the folder (what a form's user typed, not the server's path)."""
    path = Path(folder).expanduser()
    name = folder if shown_as is None else shown_as
    if not path.is_dir():
        raise EntailmentModelError(f"--entailment-model {name}: no such folder")
    if not (path / "config.json").is_file():
        raise EntailmentModelError(
            f"--entailment-model {name}: no config.json (expected a Hugging Face "
            f"sequence-classification checkpoint folder)"
        )
    if not _weight_files(path):  # (listed, not hashed: a request cannot afford reading the weights)
        raise EntailmentModelError(f"--entailment-model {name}: no weight file (*.safetensors or pytorch_model*.bin)")
    return path.resolve()


def allowed_entailment_model(folder: str | Path) -> Path:
    """``folder`` (absolute, or relative to a model root) resolved, symbolic links and ``..`` included, if
    that lies under one of the model roots (``infra.model_roots``, the one rule of what a form may name); then
    checked like ``entailment_model_folder``. Anything
    outside the roots, existing or not, gets the same EntailmentModelError, which names neither the roots nor
    any other path of the server: only what the user typed and what they can do about it."""
    roots = model_roots()
    refused = EntailmentModelError(
        f"entailment model {str(folder)!r}: not an allowed model folder; give the name of a model folder "
        "installed in the server's model folders (PARAFORGE_MODEL_ROOTS), e.g. roberta-large-mnli, or ask the "
        "server's administrator which models are installed"
        if roots
        else "entailment models are not enabled on this server (no model folders: PARAFORGE_MODEL_ROOTS); "
        "ask its administrator, or export with manage.py export_release --entailment-model DIR"
    )
    inside = confined_paths(str(folder))  # (a NUL byte, a name too long, a symbolic link loop: none)
    if not inside:
        raise refused
    found = next((path for path in inside if path.is_dir()), inside[0])
    return entailment_model_folder(found, shown_as=str(folder))


class EntailmentJudge:
    """A loaded NLI model that says, in batches, whether pairs entail each other both ways."""

    def __init__(
        self,
        folder: str | Path,
        *,
        device: str | None = None,
        batch_size: int = BATCH_SIZE,
        shown_as: str | None = None,
    ):
        """``shown_as``: the folder's name in messages, for a folder a form's user typed: then neither the server's
        path nor the loader's own text (which repeats it) is told, only the kind of failure."""
        self.folder = entailment_model_folder(folder, shown_as=shown_as)
        name = folder if shown_as is None else shown_as
        self.weights = weights_sha256(self.folder)
        import torch  # heavy: only when an entailment filter is asked for
        from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

        try:
            config = AutoConfig.from_pretrained(self.folder, local_files_only=True)
        except Exception as exc:  # noqa: BLE001 - transformers raises several kinds for a bad folder
            detail = exc if shown_as is None else type(exc).__name__
            raise EntailmentModelError(f"--entailment-model {name}: cannot read its config ({detail})") from None
        self.entailment_index = entailment_label_index(config.id2label)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(self.folder, local_files_only=True)
            self.model = AutoModelForSequenceClassification.from_pretrained(self.folder, local_files_only=True)
        except Exception as exc:  # noqa: BLE001 - one clear message for any unloadable folder
            detail = exc if shown_as is None else type(exc).__name__
            raise EntailmentModelError(
                f"--entailment-model {name}: cannot load it as a sequence classifier ({detail})"
            ) from None
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.model.to(self.device).eval()
        self.batch_size = batch_size
        self._torch = torch

    def probabilities(self, premises: Sequence[str], hypotheses: Sequence[str]) -> list[list[float]]:
        """Softmax class probabilities of each (premise, hypothesis) pair, in batches."""
        torch = self._torch
        out: list[list[float]] = []
        for start in range(0, len(premises), self.batch_size):
            enc = self.tokenizer(
                list(premises[start : start + self.batch_size]),
                list(hypotheses[start : start + self.batch_size]),
                padding=True,
                truncation=True,
                return_tensors="pt",
            ).to(self.device)
            with torch.inference_mode():
                logits = self.model(**enc).logits.float()
            out.extend(torch.softmax(logits, dim=-1).cpu().tolist())
        return out

    def entailed(self, probs: list[float], rule: float | str) -> bool:
        e = probs[self.entailment_index]
        if rule == ARGMAX:
            return e >= max(probs)  # entailment is the most probable class (wins an exact tie)
        return e >= float(rule)

    def keep_both_ways(self, reference: str, paraphrases: Sequence[str], rule: float | str) -> list[bool]:
        """For each paraphrase: does it entail the reference AND does the reference entail it?"""
        if not paraphrases:
            return []
        n = len(paraphrases)
        probs = self.probabilities([reference] * n + list(paraphrases), list(paraphrases) + [reference] * n)
        return [self.entailed(probs[i], rule) and self.entailed(probs[n + i], rule) for i in range(n)]

    def manifest(self) -> dict[str, Any]:
        return {"folder": str(self.folder), "weights_sha256": self.weights}
