"""What a training run is told: :class:`TrainConfig`, the checks that refuse settings that cannot work, and
the Marian model configuration (``DEFAULT_CONFIG`` with the run's overrides)."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_CONFIG = {
    "encoder_layers": 3,
    "decoder_layers": 3,
    "d_model": 256,
    "encoder_ffn_dim": 1024,
    "decoder_ffn_dim": 1024,
    "encoder_attention_heads": 4,
    "decoder_attention_heads": 4,
    "max_position_embeddings": 256,
    "dropout": 0.1,
    "attention_dropout": 0.0,
    "activation_dropout": 0.0,
    "activation_function": "swish",
    "scale_embedding": True,
}


@dataclass(frozen=True)
class TrainConfig:
    """One ``train_with`` run. ``steps`` is the total number of optimizer steps; a resumed run continues from
    the latest checkpoint in ``out_dir/checkpoints`` up to ``steps``. ``stop_after`` stops this invocation
    after that many new steps (with a checkpoint), as a kill would. ``export_only`` exports the latest
    checkpoint without training. ``architecture`` overrides ``DEFAULT_CONFIG`` (``layers``, ``heads`` and
    ``ffn_dim`` set both sides). ``command`` and ``data_note`` are recorded in the export."""

    pairs_path: str | os.PathLike | None
    out_dir: str | os.PathLike
    architecture: dict | None = None
    steps: int = 3000
    batch_size: int = 64
    lr: float = 7e-4
    warmup: int = 400
    schedule: str = "inverse_sqrt"
    weight_decay: float = 0.01
    label_smoothing: float = 0.1
    clip: float = 1.0
    vocab_size: int = 8000
    max_len: int = 128
    checkpoint_every: int = 200
    keep_checkpoints: int = 3
    valid_size: int = 200
    seed: int = 13
    threads: int | None = None
    resume: bool = True
    export_dir: str | os.PathLike | None = None
    export_only: bool = False
    half: bool = False
    command: str | None = None
    data_note: str | None = None
    stop_after: int | None = None
    device: str | None = None

    def check(self) -> None:
        """Refuse settings that cannot work (:class:`TrainOptionsError`), before the folder is touched."""
        check_train_options(
            self.out_dir,
            steps=self.steps,
            batch_size=self.batch_size,
            lr=self.lr,
            warmup=self.warmup,
            label_smoothing=self.label_smoothing,
            vocab_size=self.vocab_size,
            max_len=self.max_len,
            checkpoint_every=self.checkpoint_every,
            threads=self.threads,
            stop_after=self.stop_after,
            device=self.device,
        )


class TrainOptionsError(ValueError):
    """A training setting that cannot work (the message names the option, as the CLI spells it)."""


def check_train_options(
    out_dir,
    *,
    steps: int,
    batch_size: int,
    lr: float,
    warmup: int,
    label_smoothing: float,
    vocab_size: int,
    max_len: int,
    checkpoint_every: int,
    threads: int | None,
    stop_after: int | None,
    device: str | None,
) -> None:
    """Refuse settings that would crash mid-run or silently do nothing (``steps`` 0 exported an untrained
    model), before ``train`` touches the training folder."""

    def at_least(value, minimum: int, option: str) -> None:
        if value < minimum:
            raise TrainOptionsError(f"{option} must be at least {minimum}, not {value}")

    at_least(steps, 1, "--steps")
    at_least(batch_size, 1, "--batch-size")
    at_least(checkpoint_every, 1, "--checkpoint-every")
    at_least(max_len, 2, "--max-len")  # room for one subword and </s>
    at_least(vocab_size, 1, "--vocab-size")
    at_least(warmup, 0, "--warmup")
    if threads is not None:
        at_least(threads, 1, "--threads")
    if stop_after is not None:
        at_least(stop_after, 1, "--stop-after")
    if not (math.isfinite(lr) and lr > 0):
        raise TrainOptionsError(f"--lr must be a positive number, not {lr}")
    if not (math.isfinite(label_smoothing) and 0 <= label_smoothing < 1):
        raise TrainOptionsError(f"--label-smoothing must be in [0, 1), not {label_smoothing}")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise TrainOptionsError(f"--out {out} is a file, not a folder")
    if device is not None:
        check_device(device)


def check_device(device: str) -> None:
    """``cpu``, ``cuda`` or ``cuda:N`` that this machine has (torch's own error is a traceback later)."""
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError):
        raise TrainOptionsError(f"--device {device!r} is not a device (cpu, cuda, cuda:N)") from None
    if dev.type == "cpu":
        return
    if dev.type != "cuda":
        raise TrainOptionsError(f"--device {device!r}: only cpu and cuda are supported")
    if not torch.cuda.is_available():
        raise TrainOptionsError(f"--device {device!r}: no CUDA device is available")
    if dev.index is not None and dev.index >= torch.cuda.device_count():
        raise TrainOptionsError(f"--device {device!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")


def build_config(tokenizer, overrides: dict | None = None):
    from transformers import MarianConfig

    cfg = dict(DEFAULT_CONFIG)
    cfg.update({k: v for k, v in (overrides or {}).items() if v is not None})
    if "layers" in cfg:
        n = cfg.pop("layers")
        cfg["encoder_layers"] = cfg["decoder_layers"] = n
    if "heads" in cfg:
        h = cfg.pop("heads")
        cfg["encoder_attention_heads"] = cfg["decoder_attention_heads"] = h
    if "ffn_dim" in cfg:
        f = cfg.pop("ffn_dim")
        cfg["encoder_ffn_dim"] = cfg["decoder_ffn_dim"] = f
    pad = tokenizer.pad_token_id
    eos = tokenizer.eos_token_id
    vocab_size = len(tokenizer)
    return MarianConfig(
        vocab_size=vocab_size,
        decoder_vocab_size=vocab_size,
        pad_token_id=pad,
        eos_token_id=eos,
        decoder_start_token_id=pad,
        forced_eos_token_id=eos,
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
        is_encoder_decoder=True,
        **cfg,
    )
