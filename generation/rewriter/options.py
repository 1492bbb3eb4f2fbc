"""What a training run is told: :class:`TrainConfig`, one frozen parameters class (``jobs.params``) from which
the ``train_rewriter`` command's options are built and whose ``__post_init__`` refuses settings that cannot
work, and the Marian model configuration (``DEFAULT_CONFIG`` with the run's overrides).

Two kinds of run: from scratch (a Marian model and a SentencePiece tokenizer made here), or fine-tuning a
``base_model`` (a decoder-only checkpoint prompted with ``prompt_template``, or an encoder-decoder one): the
base brings its architecture and tokenizer, so the from-scratch settings (:data:`FROM_SCRATCH_ONLY`) are
refused beside it.

Fields are named as the command spells its options (``out`` is ``--out``, ``fp16`` is ``--fp16``), so that a
setting is one line here. No torch at import: the device check imports it only when a device is named."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from generation.prompts import PROMPT_TEMPLATE_HELP, PromptTemplateError, resolve
from jobs.params import ParamsError, check_bounds, fail, finite, int_at_least, option_flag, param

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
FROM_SCRATCH_ONLY = (*ARCHITECTURE, "vocab_size")  # what a --base-model brings itself
DEFAULT_VOCAB_SIZE = 8000
DEFAULT_LR = 7e-4  # from scratch
DEFAULT_FINE_TUNE_LR = 5e-5  # a pretrained --base-model: a from-scratch peak would wreck what it knows
DEFAULT_LORA_LR = 2e-4  # adapters start at zero and are few: peft's usual peak, the base itself stays frozen


class TrainOptionsError(ParamsError):
    """A training setting that cannot work (``str()`` names it as a field, :attr:`option_message` as the
    command's option)."""


def _internal(**bounds: float) -> dict:
    """A field the code sets, not a person: neither an option nor a form field (``bounds``: its range)."""
    return param(cli=False, form=False, **bounds)


@dataclass(frozen=True)
class TrainConfig:
    """One ``train_with`` run. ``steps`` is the total number of optimizer steps; a resumed run continues from
    the latest checkpoint in ``out/checkpoints`` up to ``steps``. ``stop_after`` stops this invocation after
    that many new steps (with a checkpoint), as a kill would. ``export_only`` exports the latest checkpoint
    without training. ``patience`` stops early (the validation loss has not fallen for that many checks) and,
    as ``export_best`` does, exports the checkpoint of the lowest validation loss. ``layers``, ``d_model``,
    ``ffn_dim`` and ``heads`` override ``DEFAULT_CONFIG`` (:attr:`architecture`). ``base_model`` fine-tunes a
    checkpoint instead (with ``prompt_template`` for a decoder-only one). ``command`` and ``data_note`` are
    recorded in the export."""

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
    export_best: bool = field(
        default=False,
        metadata=param(
            help="export the kept checkpoint of the lowest validation loss instead of the latest (the one "
            "--patience stopped after is already chosen so)"
        ),
    )
    patience: int | None = field(
        default=None,
        metadata=param(
            minimum=1,
            maximum=1_000_000,
            help="early stopping: end the run once the validation loss (measured every --checkpoint-every steps) "
            "has not fallen for N checks in a row, and export the checkpoint where it was lowest (kept whatever "
            "--keep-checkpoints says)",
            metavar="N",
        ),
    )
    base_model: str | None = field(
        default=None,
        metadata=param(
            help="fine-tune this checkpoint (a local folder or a hub id, as --model takes it) instead of training "
            "a Marian model from scratch: a decoder-only (causal LM) one is trained on prompt + paraphrase, an "
            "encoder-decoder one on sentence -> paraphrase",
            metavar="MODEL",
        ),
    )
    prompt_template: str | None = field(
        default=None,
        metadata=param(
            help="with a decoder-only --base-model: the prompt each pair's sentence is put in, recorded in the "
            "export so that paraphrase and generate decode with it; " + PROMPT_TEMPLATE_HELP.split(": ", 1)[1],
            metavar="NAME_OR_FILE",
        ),
    )
    lora_rank: int = field(
        default=0,
        metadata=param(
            minimum=0,
            maximum=1024,
            help="with --base-model: train low-rank adapters (LoRA) of rank R on every linear layer instead of all "
            "the base's weights; the export is the adapter (a few MB), decoded on top of the base (default 0: "
            "fine-tune every weight)",
            metavar="R",
        ),
    )
    lora_alpha: float | None = field(
        default=None,
        metadata=param(minimum=0, maximum=10_000, help="with --lora-rank: the adapters' scaling alpha (default 2 x R)"),
    )
    lora_dropout: float = field(
        default=0.05,
        metadata=param(minimum=0, maximum=1, help="with --lora-rank: dropout on the adapters' input (default 0.05)"),
    )
    fp16: bool = field(default=False, metadata=param(help="export float16 weights (half the size)"))
    steps: int = field(
        default=3000, metadata=param(minimum=1, maximum=10_000_000, help="total optimizer steps (default 3000)")
    )
    stop_after: int | None = field(
        default=None,
        metadata=param(
            minimum=1, maximum=10_000_000, help="stop this run after N new steps (checkpointed); re-run to resume"
        ),
    )
    batch_size: int = field(default=64, metadata=param(minimum=1, maximum=4096))
    lr: float | None = field(
        default=None,
        metadata=param(
            minimum=0,
            maximum=1,
            help=f"peak learning rate (default {DEFAULT_LR:g}; {DEFAULT_FINE_TUNE_LR:g} with --base-model, "
            f"{DEFAULT_LORA_LR:g} with --lora-rank)",
        ),
    )
    warmup: int = field(default=400, metadata=param(minimum=0, maximum=10_000_000, help="linear warm-up steps"))
    schedule: str = field(default="inverse_sqrt", metadata=param(choices=SCHEDULES))
    label_smoothing: float = field(default=0.1, metadata=param(minimum=0, maximum=1))
    layers: int | None = field(
        default=None, metadata=param(minimum=1, maximum=64, help="encoder and decoder layers (default 3)")
    )
    d_model: int | None = field(default=None, metadata=param(minimum=1, maximum=8192, help="model width (default 256)"))
    ffn_dim: int | None = field(
        default=None, metadata=param(minimum=1, maximum=65_536, help="feed-forward width (default 4 x d-model)")
    )
    heads: int | None = field(default=None, metadata=param(minimum=1, maximum=128, help="attention heads (default 4)"))
    vocab_size: int | None = field(
        default=None,
        metadata=param(minimum=1, maximum=1_000_000, help=f"SentencePiece vocabulary (default {DEFAULT_VOCAB_SIZE})"),
    )
    max_len: int = field(
        default=128,
        metadata=param(
            minimum=2, maximum=4096, help="max subword tokens per side (a prompt is never cut, its continuation is)"
        ),
    )
    checkpoint_every: int = field(default=200, metadata=param(minimum=1, maximum=10_000_000))
    keep_checkpoints: int = field(default=3, metadata=param(minimum=0, maximum=1000))
    threads: int | None = field(default=None, metadata=param(minimum=1, maximum=1024, help="torch CPU threads"))
    seed: int = field(default=13, metadata=param(minimum=0, maximum=4_294_967_295))
    device: str | None = field(
        default=None, metadata=param(help="cpu, cuda, cuda:1 ... (default: cuda when available)")
    )
    no_resume: bool = field(
        default=False, metadata=param(help="start afresh (deletes --out/checkpoints and --out/tokenizer)")
    )
    data_note: str | None = field(default=None, metadata=param(help="free text recorded in paraforge_training.json"))
    weight_decay: float = field(default=0.01, metadata=_internal(minimum=0, maximum=10))
    clip: float = field(default=1.0, metadata=_internal(minimum=0, maximum=1000))
    valid_size: int = field(default=200, metadata=_internal(minimum=0, maximum=1_000_000))
    command: str | None = field(default=None, metadata=_internal())

    # The ranges (jobs.params: one check for the command and the class) are far past any recipe's (ParaBank's
    # rewriter: 6 layers, width 512, 32k subwords) yet refuse a typo's model that no 24 GiB machine could hold.

    def __post_init__(self) -> None:
        """Refuse settings that would crash mid-run or silently do nothing (``steps`` 0 exported an untrained
        model): when the object is made, before ``train_with`` touches the training folder."""
        if not self.out:
            raise fail("{0} is required", "out", error=TrainOptionsError)
        self._check_kind_of_run()
        if not self.base_model and self.vocab_size is None:
            self._set("vocab_size", DEFAULT_VOCAB_SIZE)
        for name, minimum in (("steps", 1), ("batch_size", 1), ("checkpoint_every", 1), ("warmup", 0)):
            self._set(name, int_at_least(name, getattr(self, name), minimum, error=TrainOptionsError))
        # max_len: room for one subword and </s>
        self._set("max_len", int_at_least("max_len", self.max_len, 2, error=TrainOptionsError))
        for name in ("threads", "stop_after", "patience", "vocab_size", *ARCHITECTURE):
            if getattr(self, name) is not None:
                self._set(name, int_at_least(name, getattr(self, name), 1, error=TrainOptionsError))
        self._check_lora()
        if self.lr is None:
            self._set(
                "lr", DEFAULT_LORA_LR if self.lora_rank else DEFAULT_FINE_TUNE_LR if self.base_model else DEFAULT_LR
            )
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
        check_bounds(self, error=TrainOptionsError)

    def _check_kind_of_run(self) -> None:
        """From scratch or fine-tuning: settings of the other kind are refused, not ignored (a --layers beside
        a --base-model would otherwise be silently dropped), and a template that cannot be read is said now."""
        if not self.base_model:
            if self.prompt_template is not None:
                raise fail(
                    "{0} needs {1} (a decoder-only model to fine-tune): the from-scratch Marian rewriter reads "
                    "the sentence itself, it has no prompt",
                    "prompt_template",
                    "base_model",
                    error=TrainOptionsError,
                )
            return
        given = [name for name in FROM_SCRATCH_ONLY if getattr(self, name) is not None]
        if given:
            raise TrainOptionsError(
                f"{', '.join(given)} set the from-scratch Marian rewriter; base_model brings its own "
                "architecture and tokenizer: leave them out",
                f"{', '.join(option_flag(n) for n in given)} set the from-scratch Marian rewriter; --base-model "
                "brings its own architecture and tokenizer: leave them out",
            )
        try:
            resolve(self.prompt_template)
        except PromptTemplateError as exc:
            raise TrainOptionsError(f"prompt_template: {exc}", f"--prompt-template: {exc}") from None

    def _check_lora(self) -> None:
        """Adapters train on a pretrained base only, and their alpha and dropout mean nothing without them."""
        rank = int_at_least("lora_rank", self.lora_rank, 0, error=TrainOptionsError)
        self._set("lora_rank", rank)
        if not rank:
            if self.lora_alpha is not None:
                raise fail("{0} needs {1}", "lora_alpha", "lora_rank", error=TrainOptionsError)
            return
        if not self.base_model:
            raise fail(
                "{0} trains adapters on a pretrained {1}; the from-scratch Marian rewriter has none",
                "lora_rank",
                "base_model",
                error=TrainOptionsError,
            )
        alpha = (
            2.0 * rank if self.lora_alpha is None else finite("lora_alpha", self.lora_alpha, error=TrainOptionsError)
        )
        if alpha <= 0:
            raise fail("{0} must be a positive number, not {value}", "lora_alpha", error=TrainOptionsError, value=alpha)
        self._set("lora_alpha", alpha)
        dropout = finite("lora_dropout", self.lora_dropout, error=TrainOptionsError)
        if not 0 <= dropout < 1:
            raise fail("{0} must be in [0, 1), not {value}", "lora_dropout", error=TrainOptionsError, value=dropout)

    @property
    def lora(self) -> dict | None:
        """The adapters' settings as a checkpoint records them (None: every weight is trained)."""
        if not self.lora_rank:
            return None
        return {"rank": self.lora_rank, "alpha": self.lora_alpha, "dropout": self.lora_dropout}

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
