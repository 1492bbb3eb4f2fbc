"""Training the rewriter: :func:`train_with` runs a :class:`~.options.TrainConfig` in named stages (the
pairs, the tokenizer, the model and optimizer restored from the latest checkpoint, the loop, the export);
:func:`train` is the same with the options as keyword arguments.

One loop for every kind of run; what differs is small and named: the model a fresh run starts from (a new
Marian, or the ``--base-model``'s weights), its tokenizer (trained here, or the base's), and how pairs become
batches and a loss (:class:`_Feed`: source -> target for a seq2seq model, prompt + continuation for a
decoder-only one, :mod:`.causal`).

Written by hand rather than with ``Seq2SeqTrainer``: its checkpoints, resumption and batches differ from
these (atomic ``step-N`` checkpoints holding the RNG state, length-bucketed batches fixed by (seed, epoch)
so that a resumed run sees the batch an uninterrupted one would, a new peak lr honoured on resume)."""

from __future__ import annotations

import math
import random
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from generation.prompts import PromptTemplate
from jobs.params import fail

from .base_model import (
    ORIGIN_KEYS,
    BaseModel,
    base_of_checkpoint,
    check_resume,
    find_base_model,
    load_base_model,
    load_base_tokenizer,
    load_trained_weights,
    model_from_config,
    origin,
    run_template,
    trained_weights,
    wrap_with_lora,
)
from .causal import IGNORE, causal_loss, collate, encode_pairs, end_token_id, padded
from .checkpoints import (
    CHECKPOINTS,
    STATE_FILE,
    best_check,
    checkpoint_folder,
    latest_checkpoint,
    load_state,
    rng_state,
    save_checkpoint,
    set_rng_state,
    stopped_early,
    utc_now,
)
from .data import PairsFileError, read_pairs
from .export import export, marian_generation_config
from .options import TrainConfig, TrainOptionsError, build_config
from .record import training_record
from .tokenizer import keep_base_tokenizer, load_kept_tokenizer, prepare_tokenizer

Progress = Callable[[dict], None]


@dataclass
class TrainResult:
    out_dir: str
    step: int
    start_step: int
    final_loss: float | None
    valid_loss: float | None
    pairs: int
    parameters: int
    checkpoint: str | None
    exported: bool
    seconds: float
    history: list = field(default_factory=list)
    stopped_early: bool = False
    exported_step: int | None = None

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def train(pairs, out, *, config: dict | None = None, progress: Progress | None = None, **options: Any) -> TrainResult:
    """Train (or resume training) a rewriter on a ``sentence<TAB>paraphrase`` file: a Marian-style model from
    scratch (``config`` is its architecture: ``layers``, ``d_model``, ``ffn_dim``, ``heads``), or with
    ``base_model=`` (and ``prompt_template=``) a fine-tuned checkpoint; ``options`` are the other
    :class:`TrainConfig` fields. The final folder (``export``, default ``out``) is a Hugging Face folder:
    config, safetensors weights, tokenizer, ``paraforge_training.json``."""
    return train_with(TrainConfig(pairs, out, **(config or {}), **options), progress=progress)


def train_with(cfg: TrainConfig, progress: Progress | None = None) -> TrainResult:
    """Run ``cfg``: train up to ``cfg.steps`` (or ``stop_after`` new ones), then export once all are done.
    ``progress`` gets a dict after every step."""
    import torch

    t0 = time.time()
    # Everything that can refuse the run (settings: checked when cfg was made; the pairs file, the base model,
    # the checkpoint's origin, the new tokenizer) comes before --no-resume deletes the previous checkpoints
    # and tokenizer.
    out_dir = Path(cfg.out)
    pairs = _training_pairs(cfg)
    if cfg.threads:
        torch.set_num_threads(int(cfg.threads))
    ckpt = latest_checkpoint(out_dir) if (cfg.resume or cfg.export_only) else None
    if cfg.export_only and ckpt is None:
        raise FileNotFoundError(f"no checkpoint under {out_dir / CHECKPOINTS} to export")
    state = load_state(ckpt)
    base = check_resume(cfg, state.get("meta", {})) if state is not None else _fresh_base(cfg)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer, run_origin = _run_tokenizer(cfg, out_dir, pairs, state, base)
    run = _start_run(cfg, tokenizer, state, ckpt, pairs, run_origin, base)
    if not cfg.export_only and run.step < cfg.steps and not stopped_early(run.history, cfg.patience):
        _train_loop(cfg, run, progress, t0)
    exported = False
    dest = Path(cfg.export) if cfg.export else out_dir
    if cfg.export_only or run.step >= cfg.steps or stopped_early(run.history, cfg.patience):
        run.model.to("cpu")
        if cfg.export_best or cfg.patience:
            _load_best(cfg, run)
        own = run.meta.get("base_model") is not None  # a fine-tuned base keeps its generation settings
        generation_config = None if own else marian_generation_config(run.model.config)
        export(
            run.model,
            tokenizer,
            dest,
            half=cfg.fp16,
            info=training_record(cfg, run),
            generation_config=generation_config,
        )
        exported = True
    return TrainResult(
        out_dir=str(dest if exported else out_dir),
        step=run.step,
        start_step=run.start_step,
        final_loss=run.last_loss,
        valid_loss=run.valid_loss,
        pairs=len(pairs),
        parameters=run.n_params,
        checkpoint=run.ckpt_path,
        exported=exported,
        seconds=round(time.time() - t0, 1),
        history=run.history,
        stopped_early=stopped_early(run.history, cfg.patience),
        exported_step=run.exported_step if exported else None,
    )


def _load_best(cfg: TrainConfig, run: _Run) -> None:
    """Put the weights of the kept checkpoint of the lowest validation loss into the run's model (the export's)."""
    best = best_check(run.history)
    if best is None:
        raise FileNotFoundError(f"no validation loss was measured in {cfg.out}: export the latest checkpoint instead")
    folder = checkpoint_folder(cfg.out, best["step"])
    state = load_state(folder) if (folder / STATE_FILE).is_file() else None
    if state is None:
        raise FileNotFoundError(
            f"the checkpoint of the lowest validation loss (step {best['step']}, {best['valid_loss']}) is no longer "
            f"in {folder.parent}: export the latest checkpoint instead (leave out --export-best)"
        )
    load_trained_weights(run.model, state["model"])
    run.exported_step = best["step"]


def _training_pairs(cfg: TrainConfig) -> list[tuple[str, str]]:
    """The pairs to train on (none for ``export_only``)."""
    if cfg.export_only:
        return []
    if not cfg.pairs:
        raise PairsFileError("no pairs file given")
    return read_pairs(Path(cfg.pairs))


def _fresh_base(cfg: TrainConfig) -> BaseModel | None:
    """A new run's ``--base-model`` (None: from scratch), found before anything is written."""
    return find_base_model(cfg.base_model) if cfg.base_model else None


def _run_tokenizer(
    cfg: TrainConfig, out_dir: Path, pairs: list, state: dict | None, base: BaseModel | None
) -> tuple[Any, dict]:
    """The run's tokenizer and origin (``base_model.ORIGIN_KEYS``): a checkpointed fine-tuning run's from its
    training folder and checkpoint; a from-scratch run's as :func:`prepare_tokenizer` makes or finds it; a new
    fine-tuning run's from its base, with the prompt template checked against it before the base's tokenizer
    replaces the folder's."""
    meta = state.get("meta", {}) if state is not None else {}
    if state is not None and meta.get("base_model"):
        return load_kept_tokenizer(out_dir), {k: meta.get(k) for k in ORIGIN_KEYS}
    if base is None:
        tokenizer = prepare_tokenizer(
            out_dir,
            pairs,
            resuming=state is not None,
            export_only=cfg.export_only,
            resume=cfg.resume,
            vocab_size=cfg.vocab_size,
            seed=cfg.seed,
        )
        return tokenizer, origin(None, None)
    tokenizer = load_base_tokenizer(base.folder)
    template = run_template(base, cfg.prompt_template, tokenizer)
    keep_base_tokenizer(out_dir, tokenizer, resume=cfg.resume)
    return tokenizer, origin(base, template, cfg.lora)


@dataclass(frozen=True)
class _Feed:
    """How a run's pairs become examples (``encode``), batches (``collate``: input, mask, labels tensors) and
    a loss (``loss``): what differs between a seq2seq and a decoder-only model."""

    encode: Callable[[list], list]
    collate: Callable
    loss: Callable
    pad_id: int


def _feed(cfg: TrainConfig, tokenizer, model, run_origin: dict) -> _Feed:
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    if not run_origin.get("causal"):
        return _Feed(partial(_encode, tokenizer, max_len=cfg.max_len), _collate, _loss, pad_id)
    # the decoder's own EOS rule (torch is imported by then: the model is built)
    from generation.decoding.loading import causal_eos_ids

    template = PromptTemplate.from_json(run_origin["prompt_template"])
    end_id = end_token_id(template, tokenizer, causal_eos_ids(model))
    return _Feed(partial(encode_pairs, template, tokenizer, end_id, max_len=cfg.max_len), collate, causal_loss, pad_id)


@dataclass
class _Run:
    """A run's model, optimizer and schedule, and what it has done so far (restored from a checkpoint)."""

    model: Any
    model_config: Any
    optimizer: Any
    scheduler: Any
    device: Any
    n_params: int
    meta: dict
    pairs: list
    feed: _Feed
    step: int = 0
    start_step: int = 0
    history: list = field(default_factory=list)
    last_loss: float | None = None
    valid_loss: float | None = None
    ckpt_path: str | None = None
    exported_step: int | None = None  # the step whose weights the export holds (the best one's, or the last)

    def payload(self, cfg: TrainConfig) -> dict:
        """What a checkpoint saves."""
        meta = self.meta
        pairs_path = Path(cfg.pairs) if cfg.pairs else None
        return {
            "step": self.step,
            "model": trained_weights(self.model),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "rng": rng_state(),
            "config": self.model_config.to_dict(),
            "generation_config": self.model.generation_config.to_dict(),
            "history": self.history,
            "last_loss": self.last_loss,
            "meta": {
                **meta,
                "pairs_path": str(pairs_path) if pairs_path else meta.get("pairs_path"),
                "pairs": len(self.pairs) or meta.get("pairs"),
                "data_note": cfg.data_note or meta.get("data_note"),
                "seed": cfg.seed,
                "batch_size": cfg.batch_size,
                "lr": cfg.lr,
                "warmup": cfg.warmup,
                "schedule": cfg.schedule,
                "label_smoothing": cfg.label_smoothing,
            },
        }


def _new_model(cfg: TrainConfig, tokenizer, state: dict | None, base: BaseModel | None, causal: bool):
    """The run's model before any checkpoint's weights: the checkpoint's architecture (its config's own
    class), else the base's weights, else a new seeded Marian model."""
    from transformers import GenerationConfig, MarianMTModel

    lora = (state or {}).get("meta", {}).get("lora") if state is not None else cfg.lora
    if lora:  # adapters: the base's weights underneath, the checkpoint's adapters loaded next
        base = base or base_of_checkpoint(state["meta"])
        return wrap_with_lora(load_base_model(base), lora)
    if state is not None:
        model = model_from_config(state["config"], causal)
        if state.get("generation_config"):
            model.generation_config = GenerationConfig.from_dict(state["generation_config"])
        return model
    if base is not None:
        return load_base_model(base)
    return MarianMTModel(build_config(tokenizer, cfg.architecture))


def _start_run(
    cfg: TrainConfig,
    tokenizer,
    state: dict | None,
    ckpt: Path | None,
    pairs: list,
    run_origin: dict,
    base: BaseModel | None,
) -> _Run:
    """A seeded new model (or the base's) with AdamW (no weight decay on biases and norms) and its schedule,
    restored from ``state`` when resuming: weights always; optimizer, schedule position and RNG unless only
    exporting (a re-run may change the peak lr: the schedule keeps its position and uses the new peak)."""
    import torch

    meta = {**state.get("meta", {})} if state is not None else {}
    meta.update(run_origin)
    torch.manual_seed(cfg.seed)
    random.seed(cfg.seed)
    model = _new_model(cfg, tokenizer, state, base, bool(run_origin.get("causal")))
    model_config = model.config
    dev = torch.device(cfg.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    n_params = sum(p.numel() for p in model.parameters())

    decay, no_decay = [], []
    for n, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (no_decay if p.ndim < 2 or "layer_norm" in n or "bias" in n else decay).append(p)
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=cfg.lr,
        betas=(0.9, 0.98),
        eps=1e-9,
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _lr_lambda(cfg.schedule, cfg.warmup, cfg.steps))
    run = _Run(
        model=model,
        model_config=model_config,
        optimizer=optimizer,
        scheduler=scheduler,
        device=dev,
        n_params=n_params,
        meta=meta,
        pairs=pairs,
        feed=_feed(cfg, tokenizer, model, run_origin),
    )
    if state is not None:
        load_trained_weights(model, state["model"])
        if not cfg.export_only:
            optimizer.load_state_dict(state["optimizer"])
            scheduler.load_state_dict(state["scheduler"])
            for g in optimizer.param_groups:
                g["initial_lr"] = cfg.lr
            scheduler.base_lrs = [cfg.lr for _ in optimizer.param_groups]
            scheduler.lr_lambdas = [_lr_lambda(cfg.schedule, cfg.warmup, cfg.steps) for _ in optimizer.param_groups]
        run.step = int(state["step"])
        run.history = list(state.get("history", []))
        if not cfg.export_only:
            set_rng_state(state.get("rng"))
    run.start_step = run.step
    run.last_loss = run.history[-1]["loss"] if run.history else None
    run.valid_loss = run.history[-1].get("valid_loss") if run.history else None
    run.ckpt_path = str(ckpt) if ckpt else None
    run.exported_step = run.step
    return run


def _history_line(run: _Run, scheduler, t0: float) -> dict:
    """One line of the loss history (every 50 steps and at every check, which adds its validation loss)."""
    return {
        "step": run.step,
        "loss": round(run.last_loss, 4),
        "lr": scheduler.get_last_lr()[0],
        "t": round(time.time() - t0, 1),
    }


def _split_valid(encoded: list, valid_size: int, seed: int) -> tuple[list, list]:
    """(validation, training) examples: a seeded shuffle, at most a tenth held out."""
    rng = random.Random(seed)
    order = list(range(len(encoded)))
    rng.shuffle(order)
    n_valid = min(valid_size, len(encoded) // 10)
    return [encoded[i] for i in order[:n_valid]], [encoded[i] for i in order[n_valid:]]


def _train_loop(cfg: TrainConfig, run: _Run, progress: Progress | None, t0: float) -> None:
    """Optimizer steps up to ``cfg.steps`` (or ``stop_after`` new ones): loss history every 50 steps, a
    validation loss and checkpoint every ``checkpoint_every`` and at the end, a checkpoint on Ctrl-C."""
    import torch

    out_dir = Path(cfg.out)
    model, optimizer, scheduler, dev, meta = run.model, run.optimizer, run.scheduler, run.device, run.meta
    feed = run.feed
    valid, train_set = _split_valid(feed.encode(run.pairs), cfg.valid_size, cfg.seed)
    if cfg.patience and not valid:
        raise fail(
            "{0} needs a validation loss: give at least 10 pairs (a tenth, at most {n}, is held out to measure it)",
            "patience",
            error=TrainOptionsError,
            n=cfg.valid_size,
        )
    lengths = [len(s) + len(t) for s, t in train_set]
    n_batches = len(_batches(lengths, cfg.batch_size, cfg.seed, 0))
    model.train()
    window: list[float] = []
    epoch_cache: dict[int, list[list[int]]] = {}
    t_start = time.time()
    stop_at = cfg.steps if cfg.stop_after is None else min(cfg.steps, run.step + cfg.stop_after)
    meta.setdefault("first_started_at", utc_now())
    this_command = cfg.command or shlex.join(sys.argv)
    meta["commands"] = list(meta.get("commands", [])) + [
        {"command": this_command, "from_step": run.step, "started_at": utc_now()}
    ]
    model.to(dev)
    for st in optimizer.state.values():
        for k, v in st.items():
            if torch.is_tensor(v) and k != "step":
                st[k] = v.to(dev)
    try:
        while run.step < stop_at:
            epoch, pos = divmod(run.step, n_batches)
            if epoch not in epoch_cache:
                epoch_cache.clear()
                epoch_cache[epoch] = _batches(lengths, cfg.batch_size, cfg.seed, epoch)
            batch = [train_set[i] for i in epoch_cache[epoch][pos]]
            src, att, lab = (x.to(dev) for x in feed.collate(batch, feed.pad_id))
            loss, _ = feed.loss(model, src, att, lab, cfg.label_smoothing)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip)
            optimizer.step()
            scheduler.step()
            run.step += 1
            step = run.step
            window.append(loss.item())
            if len(window) > 50:
                window.pop(0)
            run.last_loss = sum(window) / len(window)
            if step % 50 == 0 or step == stop_at:
                run.history.append(_history_line(run, scheduler, t0))
            if step % cfg.checkpoint_every == 0 or step == stop_at:
                vl = _evaluate(model, valid, feed, cfg.batch_size)
                run.valid_loss = vl
                if not run.history or run.history[-1]["step"] != step:  # a check between the 50-step lines
                    run.history.append(_history_line(run, scheduler, t0))
                run.history[-1]["valid_loss"] = round(vl, 4) if vl is not None else None
                best = best_check(run.history)
                run.ckpt_path = str(
                    save_checkpoint(
                        out_dir, step, run.payload(cfg), cfg.keep_checkpoints, protect=best["step"] if best else None
                    )
                )
                if stopped_early(run.history, cfg.patience):
                    stop_at = step
            if progress:
                el = time.time() - t_start
                rate = (step - run.start_step) / el if el > 0 else 0.0
                progress(
                    {
                        "step": step,
                        "total": cfg.steps,
                        "stop_at": stop_at,
                        "loss": window[-1],
                        "avg_loss": run.last_loss,
                        "lr": scheduler.get_last_lr()[0],
                        "steps_per_s": rate,
                        "eta_s": (stop_at - step) / rate if rate > 0 else None,
                        "grad_norm": float(gnorm),
                        "epoch": epoch,
                        "checkpoint": run.ckpt_path,
                        "valid_loss": run.valid_loss,
                    }
                )
    except KeyboardInterrupt:
        if run.step > run.start_step:
            run.ckpt_path = str(save_checkpoint(out_dir, run.step, run.payload(cfg), cfg.keep_checkpoints))
        raise


def _lr_lambda(schedule: str, warmup: int, total: int):
    warmup = max(int(warmup), 0)

    def f(step: int) -> float:
        s = step + 1
        w = min(1.0, s / warmup) if warmup else 1.0
        if schedule == "linear":
            if s <= warmup:
                return w
            return max(0.0, (total - s) / max(1, total - warmup))
        if schedule == "constant":
            return w
        # inverse square root after the warm-up
        return w if s <= max(warmup, 1) else math.sqrt(max(warmup, 1) / s)

    return f


def _encode(tokenizer, pairs, max_len):
    srcs = tokenizer([s for s, _ in pairs], truncation=True, max_length=max_len)["input_ids"]
    tgts = tokenizer(text_target=[t for _, t in pairs], truncation=True, max_length=max_len)["input_ids"]
    return list(zip(srcs, tgts))


def _batches(lengths: list[int], batch_size: int, seed: int, epoch: int) -> list[list[int]]:
    """Length-bucketed batches for one epoch: shuffle, sort within large windows by length, cut into
    batches, shuffle the batch order. Deterministic in (seed, epoch) so a resumed run sees the same
    batch at the same step."""
    rng = random.Random(seed * 1_000_003 + epoch)
    idx = list(range(len(lengths)))
    rng.shuffle(idx)
    window = batch_size * 50
    out: list[list[int]] = []
    for w in range(0, len(idx), window):
        chunk = sorted(idx[w : w + window], key=lambda i: lengths[i])
        out.extend(chunk[b : b + batch_size] for b in range(0, len(chunk), batch_size))
    rng.shuffle(out)
    return out


def _collate(examples, pad_id):
    """A seq2seq batch: sources right-padded with ``pad_id`` and masked, labels right-padded with IGNORE."""
    src = padded([s for s, _ in examples], pad_id)
    att = padded([[1] * len(s) for s, _ in examples], 0)
    lab = padded([t for _, t in examples], IGNORE)
    return src, att, lab


def _loss(model, src, att, lab, label_smoothing):
    import torch.nn.functional as F

    out = model(input_ids=src, attention_mask=att, labels=lab)  # labels -> shifted decoder inputs
    logits = out.logits.float()
    flat, y = logits.view(-1, logits.size(-1)), lab.view(-1)
    loss = F.cross_entropy(flat, y, ignore_index=IGNORE, label_smoothing=label_smoothing)
    return loss, out


def _evaluate(model, encoded, feed: _Feed, batch_size: int):
    """The mean loss per labelled token over ``encoded`` (no label smoothing, no dropout)."""
    import torch

    if not encoded:
        return None
    model.eval()
    tot, n = 0.0, 0
    with torch.no_grad():
        for b in range(0, len(encoded), batch_size):
            ex = encoded[b : b + batch_size]
            dev = next(model.parameters()).device
            src, att, lab = (x.to(dev) for x in feed.collate(ex, feed.pad_id))
            loss, _ = feed.loss(model, src, att, lab, 0.0)
            ntok = int((lab != IGNORE).sum())
            tot += float(loss) * ntok
            n += ntok
    model.train()
    return tot / max(n, 1)
