"""A checkpoint to fine-tune as the rewriter (``train_rewriter --base-model``): found as every ``--model`` is
(:func:`generation.model_source.model_folder`: a local folder, or a hub id through the Hugging Face cache),
its kind read from its config (decoder-only or encoder-decoder), its weights and tokenizer read from that
folder only; and a checkpoint's model rebuilt from its saved config, without the base (a resumed or exported
run needs only its training folder).

A run's origin travels in its checkpoints' ``meta`` (:data:`ORIGIN_KEYS`): a resumed run must be the run that
was started, so :func:`check_resume` refuses a ``--base-model`` or ``--prompt-template`` that differs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from generation.model_source import (
    ModelFolderError,
    ModelKindError,
    ignore_sacremoses_warning,
    is_decoder_only,
    model_folder,
)
from generation.prompts import PromptTemplate, PromptTemplateError, for_folder, resolve
from jobs.params import fail

from .options import TrainConfig, TrainOptionsError

ORIGIN_KEYS = ("base_model", "base_folder", "causal", "prompt_template", "lora")


@dataclass(frozen=True)
class BaseModel:
    """``given``: as the person wrote it (recorded in the export); ``folder``: where its files are; ``causal``:
    decoder-only (trained on prompt + paraphrase) rather than encoder-decoder; ``model_type``: its config's."""

    given: str
    folder: Path
    causal: bool
    model_type: str


def _refuse(template: str, **values) -> TrainOptionsError:
    return fail(template, "base_model", error=TrainOptionsError, **values)


def find_base_model(value: str) -> BaseModel:
    """The checkpoint ``value`` names, its kind read from its ``config.json`` (TrainOptionsError: not there, not
    a Hugging Face checkpoint, neither kind)."""
    try:
        folder = model_folder(value)
    except ModelFolderError as exc:
        raise _refuse("{0}: {why}", why=exc) from None
    if not (folder / "config.json").is_file():
        raise _refuse("{0} {value!r} has no config.json (not a Hugging Face checkpoint)", value=value)
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(str(folder), local_files_only=True)
    except (OSError, ValueError, KeyError) as exc:
        raise _refuse("{0} {value!r}: unreadable config.json ({why})", value=value, why=exc) from None
    try:
        causal = is_decoder_only(config)
    except ModelKindError as exc:
        raise _refuse("{0} {value!r} is {why}", value=value, why=exc) from None
    return BaseModel(
        given=str(value),
        folder=folder,
        causal=causal,
        model_type=str(getattr(config, "model_type", "")),
    )


def load_base_model(base: BaseModel):
    """The base's weights in float32 (training keeps master weights in full precision), on the CPU."""
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM

    auto = AutoModelForCausalLM if base.causal else AutoModelForSeq2SeqLM
    try:
        return auto.from_pretrained(str(base.folder), local_files_only=True, dtype=torch.float32)
    except (OSError, ValueError) as exc:
        raise _refuse("{0} {value!r}: cannot load its weights ({why})", value=base.given, why=exc) from None


def load_base_tokenizer(folder: Path):
    from transformers import AutoTokenizer

    ignore_sacremoses_warning()
    try:
        return AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise _refuse("{0} {value!r}: cannot load its tokenizer ({why})", value=str(folder), why=exc) from None


def model_from_config(config_dict: dict, causal: bool):
    """An untrained model of a checkpoint's architecture (its weights are loaded next): the saved config's own
    class, so a Marian, a Llama or a GPT-2 run resumes without its base."""
    from transformers import CONFIG_MAPPING, AutoModelForCausalLM, AutoModelForSeq2SeqLM

    config = CONFIG_MAPPING[config_dict["model_type"]].from_dict(config_dict)
    return (AutoModelForCausalLM if causal else AutoModelForSeq2SeqLM).from_config(config)


def run_template(base: BaseModel, value: str | None, tokenizer) -> PromptTemplate | None:
    """The prompt a decoder-only base is trained on: ``value``, else the base's own default (the template it
    was itself fine-tuned on, its chat template, plain): ``prompts.for_folder``, the decoder's rule. None for
    an encoder-decoder base, which refuses a template. Rendered once here so that a chat template the
    tokenizer lacks is refused before anything is written."""
    if not base.causal:
        if value is not None:
            raise fail(
                "{0} is for a decoder-only {1}; {value!r} is an encoder-decoder ({kind}) model, which reads the "
                "sentence itself",
                "prompt_template",
                "base_model",
                error=TrainOptionsError,
                value=base.given,
                kind=base.model_type,
            )
        return None
    try:
        template = for_folder(base.folder, value)
        template.render(tokenizer, "x")
    except PromptTemplateError as exc:
        raise fail("{0}: {why}", "prompt_template", error=TrainOptionsError, why=exc) from None
    return template


def origin(base: BaseModel | None, template: PromptTemplate | None, lora: dict | None = None) -> dict:
    """What a checkpoint records of where its run started (:data:`ORIGIN_KEYS`; ``lora``: the adapters'
    settings, None when every weight is trained)."""
    return {
        "base_model": base.given if base else None,
        "base_folder": str(base.folder.resolve()) if base else None,
        "causal": bool(base and base.causal),
        "prompt_template": template.to_json() if template else None,
        "lora": lora,
    }


def wrap_with_lora(model, lora: dict):
    """``model`` with rank-``lora["rank"]`` adapters on every linear layer (peft's ``all-linear``: attention
    and feed-forward, not the LM head), the base's own weights frozen."""
    from peft import LoraConfig, TaskType, get_peft_model

    config = LoraConfig(
        r=int(lora["rank"]),
        lora_alpha=float(lora["alpha"]),
        lora_dropout=float(lora["dropout"]),
        target_modules="all-linear",
        task_type=TaskType.CAUSAL_LM
        if is_decoder_only(model.config, [type(model).__name__])
        else TaskType.SEQ_2_SEQ_LM,
    )
    return get_peft_model(model, config)


def is_adapted(model) -> bool:
    """A model wrapped by :func:`wrap_with_lora`."""
    return hasattr(model, "peft_config")


def trained_weights(model) -> dict:
    """What a checkpoint keeps of the model: every weight, or the adapters' alone (the base stays frozen and is
    read again from its folder: an adapter run's checkpoint of a 270M-parameter base is megabytes, not a
    gigabyte)."""
    if is_adapted(model):
        from peft import get_peft_model_state_dict

        return get_peft_model_state_dict(model)
    return model.state_dict()


def load_trained_weights(model, weights: dict) -> None:
    """Put a checkpoint's :func:`trained_weights` back (a weight the model does not have is an error)."""
    if not is_adapted(model):
        model.load_state_dict(weights)
        return
    from peft import set_peft_model_state_dict

    result = set_peft_model_state_dict(model, weights)
    if result.unexpected_keys:
        raise ValueError(f"the checkpoint's adapters do not fit this model: {sorted(result.unexpected_keys)[:3]}")


def base_of_checkpoint(meta: dict) -> BaseModel:
    """The base a checkpointed adapter run was trained on, from the folder its checkpoint recorded (an
    ``--export-only`` of an adapter run needs the base's weights underneath)."""
    folder = meta.get("base_folder")
    if not folder or not Path(folder).is_dir():
        raise _refuse(
            "the checkpoint's adapters were trained on {saved!r} ({folder}), which is not there: give {0}",
            saved=meta.get("base_model"),
            folder=folder,
        )
    return find_base_model(folder)


def check_resume(cfg: TrainConfig, meta: dict) -> BaseModel | None:
    """Refuse to continue a checkpointed run as another one: a from-scratch run with ``--base-model``, a
    fine-tuned one without it (or with another base), or with another prompt template. ``--export-only``
    needs neither option (the checkpoint says what it is). Returns the base named (None: none named)."""
    saved = meta.get("base_model")
    if cfg.export_only and not cfg.base_model:
        return None
    where = f"--out {cfg.out}"
    again = "or --no-resume to start afresh (or another --out)"
    if saved is None:
        if cfg.base_model:
            raise TrainOptionsError(
                f"{where} holds checkpoints of a from-scratch Marian rewriter; leave out base_model to resume it, "
                f"{again}",
                f"{where} holds checkpoints of a from-scratch Marian rewriter; leave out --base-model to resume it, "
                f"{again}",
            )
        return None
    if not cfg.base_model:
        raise _refuse(
            "{where} holds checkpoints fine-tuned from {saved!r}: give {0} {saved} to resume them, " + again,
            where=where,
            saved=saved,
        )
    base = find_base_model(cfg.base_model)
    if str(base.folder.resolve()) != meta.get("base_folder"):
        raise _refuse(
            "{where} holds checkpoints fine-tuned from {saved!r} ({folder}), not from {value!r}: give {0} {saved} "
            "to resume them, " + again,
            where=where,
            saved=saved,
            folder=meta.get("base_folder"),
            value=cfg.base_model,
        )
    if cfg.lora != meta.get("lora"):
        raise _refuse(
            "{where} holds checkpoints trained with adapters {saved_lora}, not {given_lora}: give the same "
            "--lora-rank (and --lora-alpha, --lora-dropout) to resume them, " + again,
            where=where,
            saved_lora=meta.get("lora") or "none (every weight)",
            given_lora=cfg.lora or "none (every weight)",
        )
    stored = meta.get("prompt_template")
    if cfg.prompt_template is not None and stored is not None:
        try:
            given = resolve(cfg.prompt_template)
        except PromptTemplateError as exc:
            raise fail("{0}: {why}", "prompt_template", error=TrainOptionsError, why=exc) from None
        if given.to_json() != stored:
            raise fail(
                "{0} {value!r} is not the template {where}'s checkpoints were trained on ({name!r}): leave it out "
                "to resume them, " + again,
                "prompt_template",
                error=TrainOptionsError,
                value=cfg.prompt_template,
                where=where,
                name=stored.get("name"),
            )
    return base
