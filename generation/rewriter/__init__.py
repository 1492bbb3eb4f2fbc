"""The monolingual rewriter (SPEC §1 "Monolingual rewriter", ParaBank §6): train a small Marian-style
English->English seq2seq model on ``sentence<TAB>paraphrase`` pairs, or fine-tune a ``base_model``
(a decoder-only model on prompt + paraphrase, or an encoder-decoder one), and save a Hugging Face folder
that the constrained decoder loads like any other checkpoint.

Plain functions, no Django: the ``train_rewriter`` management command is a thin wrapper.

* :mod:`.data` — :func:`read_pairs` (a ``sentence<TAB>paraphrase`` file, ``.gz`` too, with line-numbered
  errors) and :func:`build_synthetic_pairs` (demo training data: public English sentences from STS-B and
  SICK paired with a noised copy, PPDB synonym substitution, word drops, local swaps, both directions).
* :mod:`.tokenizer` — :func:`train_tokenizer`, a SentencePiece unigram model wrapped as a ``MarianTokenizer``.
* :mod:`.options` — :class:`TrainConfig`, the run's frozen parameters (the command's options are built from it,
  settings that cannot train are refused when it is made).
* :mod:`.training` — :func:`train_with` / :func:`train`: warm-up, label smoothing, clipping,
  length-bucketed batches, atomic checkpoints (:mod:`.checkpoints`) and automatic resumption.
* :mod:`.base_model` — a ``--base-model`` found, loaded, and checked against the checkpoints it resumes.
* :mod:`.causal` — a decoder-only model's examples (the decoder's own prompt, then the paraphrase and its
  end-of-turn token; the prompt's labels ignored), right-padded batches and the continuation's loss.
* :mod:`.export` — :func:`export` writes the final folder (``paraforge_training.json`` records the base and
  the prompt template: ``generation.prompts.recorded_template`` reads it back); :func:`load_rewriter`,
  :func:`rewrite`.
"""

from __future__ import annotations

from .checkpoints import CHECKPOINTS, STATE_FILE, latest_checkpoint
from .data import (
    PairsFileError,
    build_synthetic_pairs,
    file_sha256,
    iter_pairs,
    load_ppdb_synonyms,
    noise_sentence,
    read_pairs,
    read_public_sentences,
)
from .export import TRAINING_JSON, export, load_rewriter, rewrite
from .options import DEFAULT_CONFIG, TrainConfig, TrainOptionsError, build_config, check_device
from .tokenizer import TOKENIZER_DIR, load_tokenizer, train_tokenizer
from .training import TrainResult, train, train_with

__all__ = [
    "CHECKPOINTS",
    "DEFAULT_CONFIG",
    "STATE_FILE",
    "TOKENIZER_DIR",
    "TRAINING_JSON",
    "PairsFileError",
    "TrainConfig",
    "TrainOptionsError",
    "TrainResult",
    "build_config",
    "build_synthetic_pairs",
    "check_device",
    "export",
    "file_sha256",
    "iter_pairs",
    "latest_checkpoint",
    "load_ppdb_synonyms",
    "load_rewriter",
    "load_tokenizer",
    "noise_sentence",
    "read_pairs",
    "read_public_sentences",
    "rewrite",
    "train",
    "train_tokenizer",
    "train_with",
]
