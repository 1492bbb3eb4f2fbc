"""Low-rank adapters (LoRA, through peft) as a model source: a folder that ``train_rewriter --lora-rank R``
exported holds the adapter (``adapter_config.json``, ``adapter_model.safetensors``, a few MB), the tokenizer
and ``paraforge_training.json``, which names the base as it was given (a folder or a hub id, found as every
``--model`` is). The decoder loads the base and merges the adapter into it once, so that decoding costs what
the base costs; the merged weights decode as the unmerged adapter does (tested).

Why merged: the decoder's fast paths read the model's own modules (attention, the LM head); a merged model is
an ordinary checkpoint of the base's class, so every path serves it unchanged."""

from __future__ import annotations

import json
from pathlib import Path

from ..prompts import TRAINING_JSON

ADAPTER_CONFIG = "adapter_config.json"


class AdapterFolderError(ValueError):
    """An adapter folder whose base cannot be named or loaded."""


def is_adapter_folder(folder: Path) -> bool:
    """A peft adapter export (its ``adapter_config.json``) rather than a whole checkpoint."""
    return (Path(folder) / ADAPTER_CONFIG).is_file() and not (Path(folder) / "config.json").is_file()


def adapter_base(folder: Path) -> str:
    """The base the adapter was trained on, as the training run recorded it (``paraforge_training.json``'s
    ``base_model``), else peft's own record of it."""
    folder = Path(folder)
    for name, key in ((TRAINING_JSON, "base_model"), (ADAPTER_CONFIG, "base_model_name_or_path")):
        try:
            value = json.loads((folder / name).read_text(encoding="utf-8")).get(key)
        except (OSError, ValueError, AttributeError):
            continue
        if value:
            return str(value)
    raise AdapterFolderError(f"adapter folder {str(folder)!r} does not name its base model")


def merged_adapter_model(folder: Path, base_folder: Path, dtype=None):
    """The base in ``base_folder`` with the adapter in ``folder`` merged into its weights (a plain
    ``PreTrainedModel`` of the base's class), read from local files only."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(str(base_folder), local_files_only=True, dtype=dtype or torch.float32)
    return PeftModel.from_pretrained(base, str(folder), local_files_only=True).merge_and_unload()


def tokenizer_folder(folder: Path, base_folder: Path) -> Path:
    """Where an adapter folder's tokenizer is: its own (``train_rewriter`` saves one), else its base's (a shipped
    adapter leaves out the base's 33 MB tokenizer, which it never changes); a whole checkpoint's is its own."""
    return folder if (Path(folder) / "tokenizer_config.json").is_file() else base_folder
