"""Prompt templates: how a decoder-only model is asked to paraphrase a reference.

A decoder-only model (Llama, Qwen, Mistral, Gemma, Phi, GPT-2, ...) continues a text; the decoder puts each
reference into a prompt and decodes the continuation under the constraints (the prompt never counts toward
one). ``--prompt-template`` takes a built-in name or a file:

* ``paraphrase-chat``: the model's own chat template (its tokenizer's ``chat_template``) around one user
  message, :data:`CHAT_INSTRUCTION` with the reference, and the assistant turn opened
  (``add_generation_prompt``); the model's end-of-turn tokens end the output;
* ``paraphrase-plain``: :data:`PLAIN_TEXT` for base models without a chat template; the output ends at
  EOS or at the first line break (a base model goes on writing after its paraphrase);
* a file: UTF-8 text with ``{source}`` where the reference goes, used as it is (any chat markup written
  out in it); the output ends at EOS or at the first line break.

Without ``--prompt-template`` a checkpoint folder is decoded with the template recorded in its
``paraforge_training.json`` (:func:`recorded_template`: a rewriter ``train_rewriter --base-model`` fine-tuned
on that prompt), else with ``paraphrase-chat`` where its tokenizer has a chat template, else
``paraphrase-plain``. :meth:`PromptTemplate.encode` is the one tokenization of prompts, for decoding and for
that fine-tuning alike (train and decode must see the same tokens).

A template travels as :class:`PromptTemplate` (its JSON is stored with a job and a resource, so a worker
needs no file and a release card can show it). This module imports neither torch nor Django.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from infra.textfiles import TextFileError, read_lines

SOURCE = "{source}"
CHAT_INSTRUCTION = (
    "Paraphrase the following sentence: say the same thing in other words. Reply with the paraphrase only.\n\n{source}"
)
PLAIN_TEXT = "Sentence: {source}\nParaphrase:"
BUILTINS = ("paraphrase-chat", "paraphrase-plain")
MAX_TEMPLATE_CHARS = 20_000
PROMPT_TEMPLATE_HELP = (
    "a decoder-only model's prompt: paraphrase-chat (its chat template), paraphrase-plain (base models) or a "
    "UTF-8 file with {source} where the reference goes; default: the template a train_rewriter --base-model "
    "export recorded, else paraphrase-chat where the model has a chat template, else paraphrase-plain"
)
TRAINING_JSON = "paraforge_training.json"  # train_rewriter's record beside an exported model


class PromptTemplateError(ValueError):
    """A prompt template that cannot be used (unknown name, unreadable file, no ``{source}``, no chat
    template in the tokenizer)."""


@dataclass(frozen=True)
class PromptTemplate:
    """``name``: the built-in's name or ``file:<file name>``; ``text``: the instruction (chat) or the whole
    prompt (plain), ``{source}`` standing for the reference; ``chat``: wrapped in the tokenizer's chat
    template; ``stop_at_newline``: a line break ends the output."""

    name: str
    text: str
    chat: bool = False
    stop_at_newline: bool = True

    def to_json(self) -> dict:
        return {"name": self.name, "text": self.text, "chat": self.chat, "stop_at_newline": self.stop_at_newline}

    @classmethod
    def from_json(cls, d: dict) -> PromptTemplate:
        """The template a job or a resource stored (checked as a file's text is)."""
        if not isinstance(d, dict) or not isinstance(d.get("name"), str) or not isinstance(d.get("text"), str):
            raise PromptTemplateError("a stored prompt template needs a name and a text")
        _check_text(d["text"], d["name"])
        return cls(d["name"], d["text"], bool(d.get("chat", False)), bool(d.get("stop_at_newline", True)))

    def render(self, tokenizer, source: str) -> str:
        """The prompt for ``source`` (for a chat template: the tokenizer's chat template, as text)."""
        body = self.text.replace(SOURCE, source)
        if not self.chat:
            return body
        if not getattr(tokenizer, "chat_template", None):
            raise no_chat_template(self.name)
        return tokenizer.apply_chat_template(
            [{"role": "user", "content": body}], tokenize=False, add_generation_prompt=True
        )

    def encode(self, tokenizer, sources: list[str], **kwargs):
        """The prompts of ``sources`` tokenized (``kwargs``: the tokenizer's, e.g. padding). A chat template's
        text carries its own special tokens (nothing is added); a plain one gets the tokenizer's usual ones (a
        BOS). Not truncated: cutting a prompt would cut its end, where the model is told to answer."""
        return self.tokenize(tokenizer, [self.render(tokenizer, s) for s in sources], **kwargs)

    def tokenize(self, tokenizer, texts: list[str], **kwargs):
        """Rendered prompt texts (or a prompt's text followed by its answer) tokenized as prompts are."""
        return tokenizer(texts, add_special_tokens=not self.chat, **kwargs)


def no_chat_template(name: str) -> PromptTemplateError:
    """The one error for a chat template asked of a model that has none (a base model such as Gemma 3 270M)."""
    return PromptTemplateError(
        f"{name}: the model's tokenizer has no chat template (a base model); use paraphrase-plain or a template file"
    )


def check_chat_template(template: PromptTemplate | None, folder: Path) -> None:
    """Refuse a chat template for a folder whose tokenizer has none, read from its files before the model loads:
    the refusal is one line, not a traceback after a slow load. A folder without its tokenizer's files (an
    adapter's) is left to the check at load (``decoding.loading.from_objects``)."""
    folder = Path(folder)
    if template is None or not template.chat or not (folder / "tokenizer_config.json").is_file():
        return
    if not folder_has_chat_template(folder):
        raise no_chat_template(template.name)


def _check_text(text: str, name: str) -> None:
    if SOURCE not in text:
        raise PromptTemplateError(f"prompt template {name!r} has no {SOURCE} (where the reference goes)")
    if len(text) > MAX_TEMPLATE_CHARS:
        raise PromptTemplateError(f"prompt template {name!r} is longer than {MAX_TEMPLATE_CHARS} characters")


def builtin(name: str) -> PromptTemplate:
    if name == "paraphrase-chat":
        return PromptTemplate(name, CHAT_INSTRUCTION, chat=True, stop_at_newline=False)
    if name == "paraphrase-plain":
        return PromptTemplate(name, PLAIN_TEXT, chat=False, stop_at_newline=True)
    raise PromptTemplateError(f"unknown prompt template {name!r} (built-ins: {', '.join(BUILTINS)}; or a file)")


def resolve(value: str | PromptTemplate | dict | None) -> PromptTemplate | None:
    """``--prompt-template``'s value as a template: a built-in's name, a file's path, a stored template's
    JSON, or None (the model's default: :func:`default_for`)."""
    if value is None or isinstance(value, PromptTemplate):
        return value
    if isinstance(value, dict):
        return PromptTemplate.from_json(value)
    if value in BUILTINS:
        return builtin(value)
    path = Path(value)
    if not path.is_file():
        raise PromptTemplateError(
            f"prompt template {value!r} is neither a built-in ({', '.join(BUILTINS)}) nor a readable file"
        )
    try:  # (the one way to read a user's file: a BOM dropped, a byte that is not UTF-8 named with its line)
        text = "".join(line for _, line in read_lines(path, name=value))
    except OSError as exc:
        raise PromptTemplateError(f"cannot read prompt template {value!r}: {exc}") from None
    except TextFileError as exc:  # (it names the file, the line and the byte)
        raise PromptTemplateError(f"cannot read prompt template {exc}") from None
    text = text.removesuffix("\n")
    _check_text(text, path.name)
    return PromptTemplate(f"file:{path.name}", text, chat=False, stop_at_newline=True)


def folder_has_chat_template(folder: Path) -> bool:
    """Whether a checkpoint folder's tokenizer brings a chat template (``chat_template.jinja``, or the key in
    ``tokenizer_config.json``), read without loading it: a job's settings are checked before any model loads."""
    if (folder / "chat_template.jinja").is_file() or (folder / "chat_template.json").is_file():
        return True
    try:
        config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and bool(config.get("chat_template"))


def recorded_template(folder: Path) -> PromptTemplate | None:
    """The template a fine-tuned rewriter was trained on (``prompt_template`` in the folder's
    ``paraforge_training.json``), None where it records none: decoding it with another prompt would ask it
    something it was not taught."""
    try:
        info = json.loads((Path(folder) / TRAINING_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    stored = info.get("prompt_template") if isinstance(info, dict) else None
    if stored is None:
        return None
    try:
        return PromptTemplate.from_json(stored)
    except PromptTemplateError as exc:
        raise PromptTemplateError(f"{TRAINING_JSON} in {str(folder)!r}: {exc}") from None


def for_folder(folder: Path, value: str | PromptTemplate | dict | None) -> PromptTemplate:
    """The template a decoder-only checkpoint folder is decoded with: ``value`` (:func:`resolve`), else the one
    it was fine-tuned on (:func:`recorded_template`), else its default (:func:`default_for`, read from the
    folder)."""
    template = (
        resolve(value)
        or recorded_template(folder)
        or builtin("paraphrase-chat" if folder_has_chat_template(folder) else "paraphrase-plain")
    )
    check_chat_template(template, folder)
    return template


def default_for(tokenizer) -> PromptTemplate:
    """A decoder-only model's template when none is named: its chat template where it has one, else plain."""
    return builtin("paraphrase-chat" if getattr(tokenizer, "chat_template", None) else "paraphrase-plain")
