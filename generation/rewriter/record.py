"""``paraforge_training.json``: how an exported rewriter was made (its commands, data, model, the settings
its weights were trained with, the loss history and which checkpoint was exported). ``run`` is the training
loop's run (its model, meta, history and step)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from .checkpoints import best_check, stopped_early, utc_now
from .data import file_sha256
from .export import transformers_version
from .options import TrainConfig


def training_record(cfg: TrainConfig, run) -> dict:
    """``paraforge_training.json``: how the model was made (commands, data, architecture, training)."""
    import torch

    meta, pairs = run.meta, run.pairs
    best = best_check(run.history)
    pairs_path = Path(cfg.pairs) if cfg.pairs else None
    data_path = pairs_path or (Path(meta["pairs_path"]) if meta.get("pairs_path") else None)
    command = cfg.command
    return {
        "made_by": "python manage.py train_rewriter",
        # a fine-tuned checkpoint and, for a decoder-only one, the prompt it learnt: paraphrase and generate
        # decode with it when no --prompt-template is given (generation.prompts.recorded_template)
        "base_model": meta.get("base_model"),
        "prompt_template": meta.get("prompt_template"),
        "command": (meta.get("commands") or [{}])[0].get("command") or command or shlex.join(sys.argv),
        "commands": meta.get("commands", []),
        "export_command": command or shlex.join(sys.argv),
        "data": {
            "pairs_path": str(data_path) if data_path else None,
            "pairs_sha256": file_sha256(data_path) if data_path and data_path.is_file() else None,
            "pairs": len(pairs) or meta.get("pairs"),
            "note": cfg.data_note or meta.get("data_note"),
        },
        "model": {**model_record(run), "weights_dtype": "float16" if cfg.fp16 else "float32"},
        "training": {
            "steps": run.step,
            **trained_with(cfg, meta),
            "clip": cfg.clip,
            "weight_decay": cfg.weight_decay,
            "final_loss": run.last_loss,
            "valid_loss": run.valid_loss,
            "checkpoint": run.ckpt_path,
            "exported_step": run.exported_step,
            "best_valid_loss": best["valid_loss"] if best else None,
            "stopped_early": stopped_early(run.history, cfg.patience),
            "history": run.history,
        },
        "exported_at": utc_now(),
        "versions": {"torch": torch.__version__, "transformers": transformers_version()},
    }


def trained_with(cfg: TrainConfig, meta: dict) -> dict:
    """The settings the weights were trained with: an ``--export-only`` command's own are its defaults, so the
    checkpoint's record (the last training command's) is what counts."""
    keys = ("batch_size", "lr", "warmup", "schedule", "label_smoothing", "seed")
    if cfg.export_only:
        return {k: meta.get(k, getattr(cfg, k)) for k in keys}
    return {k: getattr(cfg, k) for k in keys}


def model_record(run) -> dict:
    """The export's ``model`` record: a from-scratch Marian's architecture, or what the fine-tuned base is."""
    config = run.model_config
    if run.meta.get("base_model") is not None:
        return {
            "parameters": run.n_params,
            "trained_parameters": sum(p.numel() for p in run.model.parameters() if p.requires_grad),
            "lora": run.meta.get("lora"),
            "base_model": run.meta["base_model"],
            "model_type": config.model_type,
            "architectures": list(config.architectures or []),
            "decoder_only": bool(run.meta.get("causal")),
            "vocab_size": config.vocab_size,
        }
    return {
        "parameters": run.n_params,
        "vocab_size": config.vocab_size,
        "d_model": config.d_model,
        "encoder_layers": config.encoder_layers,
        "decoder_layers": config.decoder_layers,
        "ffn_dim": config.encoder_ffn_dim,
        "heads": config.encoder_attention_heads,
    }
