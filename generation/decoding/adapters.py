"""Low-rank adapters (LoRA, through peft) as a model source: a folder that ``train_rewriter --lora-rank R``
exported holds the adapter (``adapter_config.json``, ``adapter_model.safetensors``, a few MB), the tokenizer
and ``paraforge_training.json``, which names the base as it was given (a folder or a hub id, found as every
``--model`` is). The decoder loads the base and merges the adapter into it once, so that decoding costs what
the base costs; the merged weights decode as the unmerged adapter does (tested).

Why merged: the decoder's fast paths read the model's own modules (attention, the LM head); a merged model is
an ordinary checkpoint of the base's class, so every path serves it unchanged. What an adapter folder is and
which base it names are model facts the web's checks need too, without torch: ``generation.model_source``
(``is_adapter_folder``, ``adapter_base``)."""

from __future__ import annotations

from pathlib import Path


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
