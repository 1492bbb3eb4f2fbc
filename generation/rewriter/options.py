"""What a training run is told: :class:`TrainConfig`, one frozen parameters class (``jobs.params``) from which
the ``train_rewriter`` command's options are built and whose ``__post_init__`` refuses settings that cannot
work, and the Marian model configuration (``DEFAULT_CONFIG`` with the run's overrides).

Fields are named as the command spells its options (``out`` is ``--out``, ``fp16`` is ``--fp16``), so that a
setting is one line here. No torch at import: the device check imports it only when a device is named."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from jobs.params import ParamsError, fail, finite, int_at_least, param

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
SCHEDULES = ("inverse_sqrt", "linear", "constant")
ARCHITECTURE = ("layers", "d_model", "ffn_dim", "heads")  # the fields that override DEFAULT_CONFIG


class TrainOptionsError(ParamsError):
    """A training setting that cannot work (``str()`` names it as a field, :attr:`option_message` as the
    command's option)."""


def _internal() -> dict:
    """A field the code sets, not a person: neither an option nor a form field."""
    return param(cli=False, form=False)


@dataclass(frozen=True)
class TrainConfig:
    """One ``train_with`` run. ``steps`` is the total number of optimizer steps; a resumed run continues from
    the latest checkpoint in ``out/checkpoints`` up to ``steps``. ``stop_after`` stops this invocation after
    that many new steps (with a checkpoint), as a kill would. ``export_only`` exports the latest checkpoint
    without training. ``layers``, ``d_model``, ``ffn_dim`` and ``heads`` override ``DEFAULT_CONFIG``
    (:attr:`architecture`). ``command`` and ``data_note`` are recorded in the export."""

    pairs: str | os.PathLike | None = field(
        default=None, metadata=param(help="sentence<TAB>paraphrase file (.tsv or .tsv.gz)")
    )
    out: str | os.PathLike | None = field(
        default=None, metadata=param(help="training folder: checkpoints/, tokenizer/ and the final export")
    )
    export: str | os.PathLike | None = field(
        default=None,
        metadata=param(help="write the final Hugging Face folder here instead of --out", metavar="EXPORT_DIR"),
    )
    export_only: bool = field(
        default=False, metadata=param(help="export the latest checkpoint in --out without training")
    )
    fp16: bool = field(default=False, metadata=param(help="export float16 weights (half the size)"))
    steps: int = field(default=3000, metadata=param(help="total optimizer steps (default 3000)"))
    stop_after: int | None = field(
        default=None, metadata=param(help="stop this run after N new steps (checkpointed); re-run to resume")
    )
    batch_size: int = field(default=64, metadata=param())
    lr: float = field(default=7e-4, metadata=param(help="peak learning rate"))
    warmup: int = field(default=400, metadata=param(help="linear warm-up steps"))
    schedule: str = field(default="inverse_sqrt", metadata=param(choices=SCHEDULES))
    label_smoothing: float = field(default=0.1, metadata=param())
    layers: int | None = field(default=None, metadata=param(help="encoder and decoder layers (default 3)"))
    d_model: int | None = field(default=None, metadata=param(help="model width (default 256)"))
    ffn_dim: int | None = field(default=None, metadata=param(help="feed-forward width (default 4 x d-model)"))
    heads: int | None = field(default=None, metadata=param(help="attention heads (default 4)"))
    vocab_size: int = field(default=8000, metadata=param(help="SentencePiece vocabulary"))
    max_len: int = field(default=128, metadata=param(help="max subword tokens per side"))
    checkpoint_every: int = field(default=200, metadata=param())
    keep_checkpoints: int = field(default=3, metadata=param())
    threads: int | None = field(default=None, metadata=param(help="torch CPU threads"))
    seed: int = field(default=13, metadata=param())
    device: str | None = field(
        default=None, metadata=param(help="cpu, cuda, cuda:1 ... (default: cuda when available)")
    )
    no_resume: bool = field(
        default=False, metadata=param(help="start afresh (deletes --out/checkpoints and --out/tokenizer)")
    )
    data_note: str | None = field(default=None, metadata=param(help="free text recorded in paraforge_training.json"))
    weight_decay: float = field(default=0.01, metadata=_internal())
    clip: float = field(default=1.0, metadata=_internal())
    valid_size: int = field(default=200, metadata=_internal())
    command: str | None = field(default=None, metadata=_internal())

    def __post_init__(self) -> None:
        """Refuse settings that would crash mid-run or silently do nothing (``steps`` 0 exported an untrained
        model): when the object is made, before ``train_with`` touches the training folder."""
        if not self.out:
            raise fail("{0} is required", "out", error=TrainOptionsError)
        for name, minimum in (("steps", 1), ("batch_size", 1), ("checkpoint_every", 1), ("warmup", 0)):
            self._set(name, int_at_least(name, getattr(self, name), minimum, error=TrainOptionsError))
        # max_len: room for one subword and </s>
        self._set("max_len", int_at_least("max_len", self.max_len, 2, error=TrainOptionsError))
        self._set("vocab_size", int_at_least("vocab_size", self.vocab_size, 1, error=TrainOptionsError))
        for name in ("threads", "stop_after", *ARCHITECTURE):
            if getattr(self, name) is not None:
                self._set(name, int_at_least(name, getattr(self, name), 1, error=TrainOptionsError))
        lr = finite("lr", self.lr, error=TrainOptionsError)
        if lr <= 0:
            raise fail("{0} must be a positive number, not {value}", "lr", error=TrainOptionsError, value=lr)
        smoothing = finite("label_smoothing", self.label_smoothing, error=TrainOptionsError)
        if not 0 <= smoothing < 1:
            raise fail(
                "{0} must be in [0, 1), not {value}", "label_smoothing", error=TrainOptionsError, value=smoothing
            )
        if self.schedule not in SCHEDULES:
            raise fail(
                "{0} must be one of {names}, not {value!r}",
                "schedule",
                error=TrainOptionsError,
                names=", ".join(SCHEDULES),
                value=self.schedule,
            )
        out = Path(self.out)
        if out.exists() and not out.is_dir():
            raise fail("{0} {value} is a file, not a folder", "out", error=TrainOptionsError, value=out)
        if self.device is not None:
            check_device(self.device)

    def _set(self, name: str, value) -> None:
        object.__setattr__(self, name, value)  # (frozen: a checked value replaces the given one once, here)

    @property
    def architecture(self) -> dict:
        """The overrides of ``DEFAULT_CONFIG`` (None: the default): ``ffn_dim`` defaults to 4 x ``d_model``
        when only the width is given, and ``heads`` to 1 when the default 4 does not divide it."""
        arch: dict = {"layers": self.layers, "d_model": self.d_model, "heads": self.heads}
        if self.ffn_dim:
            arch["ffn_dim"] = self.ffn_dim
        elif self.d_model:
            arch["ffn_dim"] = 4 * self.d_model
        if self.heads is None and self.d_model and self.d_model % 4:
            arch["heads"] = 1
        return arch

    @property
    def resume(self) -> bool:
        return not self.no_resume


def check_device(device: str) -> None:
    """``cpu``, ``cuda`` or ``cuda:N`` that this machine has (torch's own error is a traceback later)."""
    import torch

    def refuse(why: str) -> TrainOptionsError:
        return fail("{0} {value!r}" + why, "device", error=TrainOptionsError, value=device)

    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError):
        raise refuse(" is not a device (cpu, cuda, cuda:N)") from None
    if dev.type == "cpu":
        return
    if dev.type != "cuda":
        raise refuse(": only cpu and cuda are supported")
    if not torch.cuda.is_available():
        raise refuse(": no CUDA device is available")
    if dev.index is not None and dev.index >= torch.cuda.device_count():
        raise refuse(f": this machine has {torch.cuda.device_count()} CUDA device(s)")


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
