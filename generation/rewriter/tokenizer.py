"""The rewriter's tokenizer: a SentencePiece unigram model trained on the pairs, saved as a ``MarianTokenizer``
(from scratch), or a ``--base-model``'s own, kept in the training folder (fine-tuning)."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

from generation.model_source import ignore_sacremoses_warning
from infra.textfiles import atomic_dir
from jobs.params import fail

from .checkpoints import CHECKPOINTS
from .options import TrainOptionsError

TOKENIZER_DIR = "tokenizer"


def train_tokenizer(sentences: Iterable[str], out_dir, *, vocab_size: int = 8000, seed: int = 13):
    """Train a SentencePiece unigram model and save it as a ``MarianTokenizer`` (``source.spm`` =
    ``target.spm``, ``vocab.json`` with ``</s>``=0, ``<unk>``=1, pieces, ``<pad>`` last)."""
    import sentencepiece as spm
    from transformers import MarianTokenizer

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    sentences = list(sentences)
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "spm")
        if hasattr(spm, "set_random_generator_seed"):
            spm.set_random_generator_seed(seed)
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences),
            model_prefix=prefix,
            model_type="unigram",
            vocab_size=max(vocab_size - 1, 8),
            hard_vocab_limit=False,
            character_coverage=1.0,
            eos_id=0,
            unk_id=1,
            bos_id=-1,
            pad_id=-1,
            input_sentence_size=2_000_000,
            shuffle_input_sentence=True,
            num_threads=1,
            minloglevel=2,
            normalization_rule_name="nmt_nfkc",
        )
        sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
        vocab = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
        vocab["<pad>"] = len(vocab)
        shutil.copy(prefix + ".model", out_dir / "source.spm")
        shutil.copy(prefix + ".model", out_dir / "target.spm")
    with open(out_dir / "vocab.json", "w", encoding="utf-8") as fh:
        json.dump(vocab, fh, ensure_ascii=False, indent=0)
    tok = MarianTokenizer(
        source_spm=str(out_dir / "source.spm"),
        target_spm=str(out_dir / "target.spm"),
        vocab=str(out_dir / "vocab.json"),
        source_lang="en",
        target_lang="en",
        model_max_length=512,
    )
    tok.save_pretrained(str(out_dir))
    return tok


def load_tokenizer(path):
    from transformers import MarianTokenizer

    ignore_sacremoses_warning()

    return MarianTokenizer.from_pretrained(str(path), local_files_only=True)


def _train_tokenizer_checked(sentences: list[str], out_dir, *, vocab_size: int, seed: int):
    """train_tokenizer, with SentencePiece's "vocabulary too small" failure as a TrainOptionsError."""
    try:
        return train_tokenizer(sentences, out_dir, vocab_size=vocab_size, seed=seed)
    except RuntimeError as exc:
        found = re.search(r"smaller than required_chars\. \d+ vs (\d+)", str(exc))
        if not found:
            raise
        raise fail(
            "{0} {vocab_size} is too small for these pairs: their characters alone need at least {need}",
            "vocab_size",
            error=TrainOptionsError,
            vocab_size=vocab_size,
            need=int(found.group(1)) + 1,
        ) from None


def prepare_tokenizer(
    out_dir: Path,
    pairs: list[tuple[str, str]],
    *,
    resuming: bool,
    export_only: bool,
    resume: bool,
    vocab_size: int,
    seed: int,
):
    """The run's tokenizer: the training folder's own when resuming from a checkpoint, else a new one
    trained on both sides of ``pairs``. Only once the new one is trained does it replace the old one
    (and, with ``resume`` off, the old checkpoints are deleted): a refused run leaves the folder as it was."""
    tok_dir = out_dir / TOKENIZER_DIR
    if (tok_dir / "vocab.json").is_file() and resuming:
        return load_tokenizer(tok_dir)
    if export_only:
        raise FileNotFoundError(f"tokenizer missing in {tok_dir}")
    sents = list(dict.fromkeys([s for s, _ in pairs] + [t for _, t in pairs]))
    with atomic_dir(tok_dir) as new_tok:
        _train_tokenizer_checked(sents, new_tok, vocab_size=vocab_size, seed=seed)
        if not resume and (out_dir / CHECKPOINTS).exists():
            shutil.rmtree(out_dir / CHECKPOINTS)  # a new tokenizer makes old checkpoints meaningless
    return load_tokenizer(tok_dir)


def keep_base_tokenizer(out_dir: Path, tokenizer, *, resume: bool) -> None:
    """A fine-tuning run's tokenizer (its base's) saved in the training folder, so that resuming and exporting
    need only that folder. Like :func:`prepare_tokenizer`: the old one (and, with ``resume`` off, the old
    checkpoints) goes only once the new one is written."""
    with atomic_dir(out_dir / TOKENIZER_DIR) as new_tok:
        tokenizer.save_pretrained(str(new_tok))
        if not resume and (out_dir / CHECKPOINTS).exists():
            shutil.rmtree(out_dir / CHECKPOINTS)


def load_kept_tokenizer(out_dir: Path):
    """The tokenizer :func:`keep_base_tokenizer` saved (any kind: ``AutoTokenizer``)."""
    from transformers import AutoTokenizer

    ignore_sacremoses_warning()

    tok_dir = out_dir / TOKENIZER_DIR
    if not tok_dir.is_dir():
        raise FileNotFoundError(f"tokenizer missing in {tok_dir}")
    return AutoTokenizer.from_pretrained(str(tok_dir), local_files_only=True)
