"""The rewriter's Hugging Face folder: export a trained model (with its provenance in
``paraforge_training.json``), load one, rewrite with it."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from generation.model_source import ADAPTER_CONFIG
from generation.prompts import TRAINING_JSON


def transformers_version() -> str:
    import transformers

    return transformers.__version__


def marian_generation_config(cfg):
    """The from-scratch rewriter's ``generate`` settings (a fine-tuned base keeps its own)."""
    from transformers import GenerationConfig

    return GenerationConfig(
        decoder_start_token_id=cfg.decoder_start_token_id,
        pad_token_id=cfg.pad_token_id,
        eos_token_id=cfg.eos_token_id,
        forced_eos_token_id=cfg.eos_token_id,
        bad_words_ids=[[cfg.pad_token_id]],
        num_beams=4,
        max_length=128,
    )


def export(model, tokenizer, dest, *, half: bool = False, info: dict | None = None, generation_config=None) -> Path:
    """``save_pretrained`` (safetensors) + tokenizer + ``paraforge_training.json`` into ``dest``,
    written to a temporary sibling folder first and swapped in. ``generation_config``: replaces the model's
    (None: the model's own, e.g. a chat model's end-of-turn tokens)."""
    import torch

    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{dest.name}-", dir=dest.parent))
    model = model.eval()
    if half:
        model = model.to(torch.float16)
    if generation_config is not None:
        model.generation_config = generation_config
    model.save_pretrained(str(tmp), safe_serialization=True)
    if half:
        model.to(torch.float32)
    tokenizer.save_pretrained(str(tmp))
    if (tmp / ADAPTER_CONFIG).is_file():
        _name_the_base(tmp, (info or {}).get("base_model"))
    with open(tmp / TRAINING_JSON, "w", encoding="utf-8") as fh:
        json.dump(info or {}, fh, indent=2)
    # replace the exported files one by one: other files there (README.md, checkpoints/ when
    # exporting into the training folder) stay
    dest.mkdir(parents=True, exist_ok=True)
    for p in tmp.iterdir():
        os.chmod(p, 0o644)
        os.replace(p, dest / p.name)
    shutil.rmtree(tmp, ignore_errors=True)
    return dest


def _name_the_base(folder: Path, base: str | None) -> None:
    """An adapter export names its base as the run was given it ("gemma3-270m", a hub id, a .gguf file), not as
    peft saw it (the converted folder's absolute path on the machine that trained it), and leaves out peft's
    model-card template (a README naming that path, which would also replace a README kept in the export folder)."""
    (folder / "README.md").unlink(missing_ok=True)
    if base:
        config_path = folder / ADAPTER_CONFIG
        config = json.loads(config_path.read_text(encoding="utf-8"))
        config["base_model_name_or_path"] = base
        config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def load_rewriter(path):
    """(model, tokenizer) of a seq2seq rewriter from a saved folder, float32 on CPU, no network (a decoder-only
    one decodes through ``generation.decoding.load_model``, which puts each sentence in its prompt)."""
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    model = AutoModelForSeq2SeqLM.from_pretrained(str(path), local_files_only=True, dtype=torch.float32)
    return model.eval(), tok


def rewrite(
    model, tokenizer, sentences: list[str], *, num_beams: int = 4, max_new_tokens: int = 64, **kwargs
) -> list[str]:
    import torch

    enc = tokenizer(sentences, return_tensors="pt", padding=True)
    with torch.no_grad():
        out = model.generate(**enc, num_beams=num_beams, max_new_tokens=max_new_tokens, **kwargs)
    return tokenizer.batch_decode(out, skip_special_tokens=True)
