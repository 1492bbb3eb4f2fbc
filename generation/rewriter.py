"""The monolingual rewriter (SPEC §1 "Monolingual rewriter", ParaBank §6): train a small Marian-style
English->English seq2seq model on ``sentence<TAB>paraphrase`` pairs and save a Hugging Face folder
that the constrained decoder loads like any other checkpoint.

Plain functions, no Django: the ``train_rewriter`` management command is a thin wrapper.

* :func:`build_synthetic_pairs` — demo training data: public English sentences (STS-B, SICK) paired
  with a noised copy (PPDB synonym substitution, word drops, local swaps), both directions, seeded.
* :func:`read_pairs` — a ``sentence<TAB>paraphrase`` file (``.gz`` too), with line-numbered errors.
* :func:`train_tokenizer` — a SentencePiece unigram model wrapped as a ``MarianTokenizer``.
* :func:`train` — training with warm-up, label smoothing, clipping, length-bucketed batches,
  atomic checkpoints and automatic resumption; :func:`export` writes the final folder.
"""
from __future__ import annotations

import csv
import datetime as _dt
import gzip
import hashlib
import io
import json
import math
import os
import random
import re
import shlex
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

from .text_encoding import undecodable_byte

CHECKPOINTS = "checkpoints"
TOKENIZER_DIR = "tokenizer"
TRAINING_JSON = "paraforge_training.json"
STATE_FILE = "state.pt"

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


class PairsFileError(ValueError):
    """A pairs file that is missing or has a malformed line (the message names the line)."""


# --------------------------------------------------------------------------------------------------
# Reading pairs
# --------------------------------------------------------------------------------------------------

def _open_text(path: Path):
    # surrogateescape: see generation.text_encoding
    if str(path).endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", errors="surrogateescape", newline="")
    return open(path, encoding="utf-8", errors="surrogateescape", newline="")


def _check_utf8(path: Path, lineno: int, line: str) -> None:
    """A line read with ``surrogateescape`` holding an undecodable byte -> PairsFileError naming it."""
    where = undecodable_byte(line)
    if where is not None:
        raise PairsFileError(f"{path}:{lineno}: not UTF-8 text ({where})")


def iter_pairs(path) -> Iterator[tuple[int, str, str]]:
    """Yield ``(line_number, sentence, paraphrase)`` from a ``sentence<TAB>paraphrase`` file.

    Blank lines and lines starting with ``#`` are skipped; columns after the second (scores, system
    names) are ignored. A line with fewer than two columns, an empty side or bytes that are not UTF-8
    raises :class:`PairsFileError` naming the file and line number."""
    path = Path(path)
    if not path.is_file():
        raise PairsFileError(f"pairs file not found: {path}")
    try:
        with _open_text(path) as fh:
            for lineno, line in enumerate(fh, 1):
                line = line.rstrip("\r\n")
                if lineno == 1:
                    line = line.removeprefix("\ufeff")
                _check_utf8(path, lineno, line)
                if not line.strip() or line.startswith("#"):
                    continue
                cols = line.split("\t")
                if len(cols) < 2:
                    raise PairsFileError(
                        f"{path}:{lineno}: expected 'sentence<TAB>paraphrase', found no tab: {line[:80]!r}")
                src, tgt = cols[0].strip(), cols[1].strip()
                if not src or not tgt:
                    raise PairsFileError(f"{path}:{lineno}: empty sentence or paraphrase: {line[:80]!r}")
                yield lineno, src, tgt
    except (OSError, EOFError) as exc:
        raise PairsFileError(f"{path}: cannot read ({exc})") from exc


def read_pairs(path) -> list[tuple[str, str]]:
    pairs = [(s, t) for _, s, t in iter_pairs(path)]
    if not pairs:
        raise PairsFileError(f"{path}: no pairs")
    return pairs


def file_sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# --------------------------------------------------------------------------------------------------
# Synthetic demo pairs
# --------------------------------------------------------------------------------------------------

def read_public_sentences(data_dir) -> list[str]:
    """Unique English sentences from STS-B train/dev and SICK under ``data_dir``, in first-seen order."""
    data_dir = Path(data_dir)
    seen: dict[str, None] = {}

    def add(s: str) -> None:
        s = " ".join(s.split())
        if 3 <= len(s) <= 300 and s not in seen:
            seen[s] = None

    for name in ("sts-train.csv", "sts-dev.csv"):
        p = data_dir / "stsb" / name
        if not p.is_file():
            continue
        with open(p, encoding="utf-8") as fh:
            for line in fh:
                cols = line.rstrip("\r\n").split("\t")
                if len(cols) >= 7:
                    add(cols[5])
                    add(cols[6])
    p = data_dir / "sick" / "SICK.txt"
    if p.is_file():
        with open(p, encoding="utf-8") as fh:
            reader = csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
            header = next(reader, [])
            ia, ib = header.index("sentence_A"), header.index("sentence_B")
            for cols in reader:
                if len(cols) > max(ia, ib):
                    add(cols[ia])
                    add(cols[ib])
    return list(seen)


_WORD = re.compile(r"^[A-Za-z]+$")
_STOP = frozenset("""a an the is are was were be been being am of to in on at by for with from and or
but not no it its this that these those there here he she they we you i his her their our your my me
him them us as do does did has have had""".split())


def load_ppdb_synonyms(path, max_per_word: int = 20, known: set[str] | None = None) -> dict[str, list[str]]:
    """``word<TAB>paraphrase`` lines -> {lowercase word: [alphabetic single-word synonyms]}; with
    ``known``, only synonyms in that word set (PPDB XXXL is noisy: foreign words, misspellings)."""
    syn: dict[str, list[str]] = {}
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            cols = line.rstrip("\r\n").split("\t")
            if len(cols) < 2:
                continue
            a, b = cols[0].strip().lower(), cols[1].strip().lower()
            if a == b or not _WORD.match(a) or not _WORD.match(b) or a in _STOP or b in _STOP:
                continue
            if known is not None and b not in known:
                continue
            lst = syn.setdefault(a, [])
            if len(lst) < max_per_word and b not in lst:
                lst.append(b)
    return syn


def noise_sentence(sentence: str, rng: random.Random, synonyms: dict[str, list[str]], *,
                   p_sub: float = 0.3, p_drop: float = 0.04, p_swap: float = 0.01) -> str:
    """A corrupted copy: PPDB synonym substitution (keeping capitalisation and trailing punctuation),
    occasional word drops and swaps of neighbouring words."""
    tokens = sentence.split()
    out: list[str] = []
    for i, tok in enumerate(tokens):
        m = re.match(r"^([A-Za-z]+)(\W*)$", tok)
        if m:
            word, tail = m.group(1), m.group(2)
            cands = synonyms.get(word.lower())
            if cands and rng.random() < p_sub:
                new = rng.choice(cands)
                if word[0].isupper():
                    new = new[0].upper() + new[1:]
                tok = new + tail
            elif len(tokens) > 4 and i > 0 and not tail and word.lower() not in _STOP \
                    and rng.random() < p_drop:
                continue
        out.append(tok)
    if len(out) > 3 and rng.random() < p_swap * len(out):  # at most one swap of neighbours
        i = rng.randrange(1, len(out) - 2)
        if _WORD.match(out[i]) and _WORD.match(out[i + 1]):
            out[i], out[i + 1] = out[i + 1], out[i]
    return " ".join(out)


def build_synthetic_pairs(data_dir, out_path, *, seed: int = 13, copies: int = 2,
                          p_sub: float = 0.3, p_drop: float = 0.04, p_swap: float = 0.01,
                          ppdb_path=None) -> dict:
    """Write ``sentence<TAB>noised`` and ``noised<TAB>sentence`` pairs (``copies`` noised copies per
    sentence, identical copies dropped) for the public sentences under ``data_dir``; return a summary."""
    data_dir = Path(data_dir)
    ppdb_path = Path(ppdb_path or data_dir / "ppdb" / "ppdb-1.0-xxxl-lexical-synonym-pairs.tsv")
    sentences = read_public_sentences(data_dir)
    if not sentences:
        raise FileNotFoundError(f"no STS-B or SICK sentences under {data_dir}")
    if not ppdb_path.is_file():
        raise FileNotFoundError(f"PPDB synonym file not found: {ppdb_path}")
    counts: dict[str, int] = {}
    for sent in sentences:
        for w in re.findall(r"[A-Za-z]+", sent):
            counts[w.lower()] = counts.get(w.lower(), 0) + 1
    synonyms = load_ppdb_synonyms(ppdb_path, known={w for w, c in counts.items() if c >= 3})
    rng = random.Random(seed)
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    tmp = out_path.with_name(out_path.name + ".tmp")
    opener = (lambda p: io.TextIOWrapper(gzip.open(p, "wb"), encoding="utf-8")) \
        if str(out_path).endswith(".gz") else (lambda p: open(p, "w", encoding="utf-8"))
    with opener(tmp) as fh:
        for s in sentences:
            made: set[str] = set()
            for _ in range(copies):
                noised = noise_sentence(s, rng, synonyms, p_sub=p_sub, p_drop=p_drop, p_swap=p_swap)
                if noised in made:
                    continue
                made.add(noised)
                # identical copies are kept once: the model must also learn to copy
                fh.write(f"{s}\t{noised}\n")
                n += 1
                if noised != s:
                    fh.write(f"{noised}\t{s}\n")
                    n += 1
    os.replace(tmp, out_path)
    return {"sentences": len(sentences), "pairs": n, "out": str(out_path), "seed": seed,
            "copies": copies, "p_sub": p_sub, "p_drop": p_drop, "p_swap": p_swap,
            "ppdb_words": len(synonyms)}


# --------------------------------------------------------------------------------------------------
# Tokenizer
# --------------------------------------------------------------------------------------------------

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
            sentence_iterator=iter(sentences), model_prefix=prefix, model_type="unigram",
            vocab_size=max(vocab_size - 1, 8), hard_vocab_limit=False, character_coverage=1.0,
            eos_id=0, unk_id=1, bos_id=-1, pad_id=-1, input_sentence_size=2_000_000,
            shuffle_input_sentence=True, num_threads=1, minloglevel=2,
            normalization_rule_name="nmt_nfkc",
        )
        sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
        vocab = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
        vocab["<pad>"] = len(vocab)
        shutil.copy(prefix + ".model", out_dir / "source.spm")
        shutil.copy(prefix + ".model", out_dir / "target.spm")
    with open(out_dir / "vocab.json", "w", encoding="utf-8") as fh:
        json.dump(vocab, fh, ensure_ascii=False, indent=0)
    tok = MarianTokenizer(source_spm=str(out_dir / "source.spm"), target_spm=str(out_dir / "target.spm"),
                          vocab=str(out_dir / "vocab.json"), source_lang="en", target_lang="en",
                          model_max_length=512)
    tok.save_pretrained(str(out_dir))
    return tok


def load_tokenizer(path):
    import warnings

    from transformers import MarianTokenizer

    warnings.filterwarnings("ignore", message="Recommended: pip install sacremoses")

    return MarianTokenizer.from_pretrained(str(path), local_files_only=True)


# --------------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------------

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

    def as_dict(self) -> dict:
        return dict(self.__dict__)


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
        vocab_size=vocab_size, decoder_vocab_size=vocab_size, pad_token_id=pad, eos_token_id=eos,
        decoder_start_token_id=pad, forced_eos_token_id=eos, share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True, is_encoder_decoder=True, **cfg,
    )


def _latest_checkpoint(out_dir: Path) -> Path | None:
    root = out_dir / CHECKPOINTS
    if not root.is_dir():
        return None
    cands = sorted(p for p in root.iterdir()
                   if p.is_dir() and re.fullmatch(r"step-\d+", p.name) and (p / STATE_FILE).is_file())
    return cands[-1] if cands else None


def latest_checkpoint(out_dir) -> Path | None:
    return _latest_checkpoint(Path(out_dir))


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
        chunk = sorted(idx[w:w + window], key=lambda i: lengths[i])
        out.extend(chunk[b:b + batch_size] for b in range(0, len(chunk), batch_size))
    rng.shuffle(out)
    return out


def _collate(examples, pad_id):
    import torch

    ms = max(len(s) for s, _ in examples)
    mt = max(len(t) for _, t in examples)
    src = torch.full((len(examples), ms), pad_id, dtype=torch.long)
    att = torch.zeros((len(examples), ms), dtype=torch.long)
    lab = torch.full((len(examples), mt), -100, dtype=torch.long)
    for i, (s, t) in enumerate(examples):
        src[i, :len(s)] = torch.tensor(s)
        att[i, :len(s)] = 1
        lab[i, :len(t)] = torch.tensor(t)
    return src, att, lab


def _loss(model, src, att, lab, label_smoothing):
    import torch.nn.functional as F

    out = model(input_ids=src, attention_mask=att, labels=lab)  # labels -> shifted decoder inputs
    logits = out.logits.float()
    flat, y = logits.view(-1, logits.size(-1)), lab.view(-1)
    loss = F.cross_entropy(flat, y, ignore_index=-100, label_smoothing=label_smoothing)
    return loss, out


def _rng_state():
    import torch

    return {"python": random.getstate(), "torch": torch.get_rng_state()}


def _set_rng_state(state):
    import torch

    if not state:
        return
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])


def _save_checkpoint(out_dir: Path, step: int, payload: dict, keep: int) -> Path:
    """Write ``checkpoints/step-XXXXXXX`` atomically (a temporary folder renamed into place) and keep
    only the newest ``keep`` checkpoints."""
    import torch

    root = out_dir / CHECKPOINTS
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step-{step:07d}"
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-step-{step:07d}-", dir=root))
    torch.save(payload, tmp / STATE_FILE)
    with open(tmp / "meta.json", "w") as fh:
        json.dump({"step": step, "loss": payload.get("last_loss"), "saved_at": _now()}, fh)
    if final.exists():
        shutil.rmtree(final)
    os.rename(tmp, final)
    if keep > 0:
        olds = sorted(p for p in root.iterdir() if p.is_dir() and re.fullmatch(r"step-\d+", p.name))
        for p in olds[:-keep]:
            shutil.rmtree(p, ignore_errors=True)
    return final


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _evaluate(model, encoded, pad_id, batch_size, label_smoothing):
    import torch

    if not encoded:
        return None
    model.eval()
    tot, n = 0.0, 0
    with torch.no_grad():
        for b in range(0, len(encoded), batch_size):
            ex = encoded[b:b + batch_size]
            dev = next(model.parameters()).device
            src, att, lab = (x.to(dev) for x in _collate(ex, pad_id))
            loss, _ = _loss(model, src, att, lab, 0.0)
            ntok = int((lab != -100).sum())
            tot += float(loss) * ntok
            n += ntok
    model.train()
    return tot / max(n, 1)


class TrainOptionsError(ValueError):
    """A training setting that cannot work (the message names the option, as the CLI spells it)."""


def check_train_options(out_dir, *, steps: int, batch_size: int, lr: float, warmup: int, label_smoothing: float,
                        vocab_size: int, max_len: int, checkpoint_every: int, threads: int | None,
                        stop_after: int | None, device: str | None) -> None:
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


def _train_tokenizer_checked(sentences: list[str], out_dir, *, vocab_size: int, seed: int):
    """train_tokenizer, with SentencePiece's "vocabulary too small" failure as a TrainOptionsError."""
    try:
        return train_tokenizer(sentences, out_dir, vocab_size=vocab_size, seed=seed)
    except RuntimeError as exc:
        found = re.search(r"smaller than required_chars\. \d+ vs (\d+)", str(exc))
        if not found:
            raise
        raise TrainOptionsError(f"--vocab-size {vocab_size} is too small for these pairs: their characters "
                                f"alone need at least {int(found.group(1)) + 1}") from None


def train(pairs_path, out_dir, *, config: dict | None = None, steps: int = 3000, batch_size: int = 64,
          lr: float = 7e-4, warmup: int = 400, schedule: str = "inverse_sqrt", weight_decay: float = 0.01,
          label_smoothing: float = 0.1, clip: float = 1.0, vocab_size: int = 8000, max_len: int = 128,
          checkpoint_every: int = 200, keep_checkpoints: int = 3, valid_size: int = 200, seed: int = 13,
          threads: int | None = None, resume: bool = True, export_dir=None, export_only: bool = False,
          half: bool = False, progress: Callable[[dict], None] | None = None, command: str | None = None,
          data_note: str | None = None, stop_after: int | None = None, device: str | None = None) -> TrainResult:
    """Train (or resume training) a Marian-style rewriter on a ``sentence<TAB>paraphrase`` file.

    ``steps`` is the total number of optimizer steps; a resumed run continues from the latest
    checkpoint in ``out_dir/checkpoints`` up to ``steps``. ``stop_after`` stops this invocation after
    that many new steps (with a checkpoint), as a kill would. ``export_only`` exports the latest
    checkpoint without training. The final folder (``export_dir``, default ``out_dir``) is a Hugging
    Face folder: config, safetensors weights, tokenizer, ``paraforge_training.json``."""
    import torch
    from transformers import MarianMTModel

    t0 = time.time()
    # Everything that can refuse the run (settings, the pairs file, the new tokenizer) comes before
    # --no-resume deletes the previous checkpoints and tokenizer.
    check_train_options(out_dir, steps=steps, batch_size=batch_size, lr=lr, warmup=warmup,
                        label_smoothing=label_smoothing, vocab_size=vocab_size, max_len=max_len,
                        checkpoint_every=checkpoint_every, threads=threads, stop_after=stop_after, device=device)
    out_dir = Path(out_dir)
    pairs_path = Path(pairs_path) if pairs_path else None
    pairs: list[tuple[str, str]] = []
    if not export_only:
        if pairs_path is None:
            raise PairsFileError("no pairs file given")
        pairs = read_pairs(pairs_path)
    if threads:
        torch.set_num_threads(int(threads))
    out_dir.mkdir(parents=True, exist_ok=True)
    ckpt = _latest_checkpoint(out_dir) if (resume or export_only) else None
    if export_only and ckpt is None:
        raise FileNotFoundError(f"no checkpoint under {out_dir / CHECKPOINTS} to export")

    state = torch.load(ckpt / STATE_FILE, map_location="cpu", weights_only=False) if ckpt else None
    tok_dir = out_dir / TOKENIZER_DIR

    if (tok_dir / "vocab.json").is_file() and state is not None:
        tokenizer = load_tokenizer(tok_dir)
    else:
        if export_only:
            raise FileNotFoundError(f"tokenizer missing in {tok_dir}")
        sents = list(dict.fromkeys([s for s, _ in pairs] + [t for _, t in pairs]))
        new_tok = Path(tempfile.mkdtemp(prefix=".tmp-tokenizer-", dir=out_dir))
        try:
            _train_tokenizer_checked(sents, new_tok, vocab_size=vocab_size, seed=seed)
            if not resume and (out_dir / CHECKPOINTS).exists():
                shutil.rmtree(out_dir / CHECKPOINTS)
            if tok_dir.exists():
                shutil.rmtree(tok_dir)
            os.rename(new_tok, tok_dir)
        finally:
            shutil.rmtree(new_tok, ignore_errors=True)
        tokenizer = load_tokenizer(tok_dir)

    if state is not None:
        from transformers import MarianConfig
        model_config = MarianConfig.from_dict(state["config"])
        meta = state.get("meta", {})
    else:
        model_config = build_config(tokenizer, config)
        meta = {}
    torch.manual_seed(seed)
    random.seed(seed)
    model = MarianMTModel(model_config)
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    n_params = sum(p.numel() for p in model.parameters())

    decay, no_decay = [], []
    for n, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (no_decay if p.ndim < 2 or "layer_norm" in n or "bias" in n else decay).append(p)
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=lr, betas=(0.9, 0.98), eps=1e-9)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _lr_lambda(schedule, warmup, steps))
    step = 0
    history: list = []
    if state is not None:
        model.load_state_dict(state["model"])
        if not export_only:
            optimizer.load_state_dict(state["optimizer"])
            scheduler.load_state_dict(state["scheduler"])
            # a re-run may change the peak lr: keep the schedule position, use the new peak
            for g in optimizer.param_groups:
                g["initial_lr"] = lr
            scheduler.base_lrs = [lr for _ in optimizer.param_groups]
            scheduler.lr_lambdas = [_lr_lambda(schedule, warmup, steps) for _ in optimizer.param_groups]
        step = int(state["step"])
        history = list(state.get("history", []))
        if not export_only:
            _set_rng_state(state.get("rng"))
    start_step = step

    last_loss = history[-1]["loss"] if history else None
    valid_loss = history[-1].get("valid_loss") if history else None
    ckpt_path = str(ckpt) if ckpt else None

    def payload():
        return {"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "rng": _rng_state(), "config": model_config.to_dict(),
                "history": history, "last_loss": last_loss,
                "meta": {**meta, "pairs_path": str(pairs_path) if pairs_path else meta.get("pairs_path"),
                         "pairs": len(pairs) or meta.get("pairs"),
                         "data_note": data_note or meta.get("data_note"),
                         "seed": seed, "batch_size": batch_size, "lr": lr, "warmup": warmup,
                         "schedule": schedule, "label_smoothing": label_smoothing}}

    if not export_only and step < steps:
        encoded = _encode(tokenizer, pairs, max_len)
        rng = random.Random(seed)
        order = list(range(len(encoded)))
        rng.shuffle(order)
        n_valid = min(valid_size, len(encoded) // 10)
        valid = [encoded[i] for i in order[:n_valid]]
        train_set = [encoded[i] for i in order[n_valid:]]
        lengths = [len(s) + len(t) for s, t in train_set]
        pad_id = tokenizer.pad_token_id
        n_batches = len(_batches(lengths, batch_size, seed, 0))
        model.train()
        window: list[float] = []
        epoch_cache: dict[int, list[list[int]]] = {}
        t_start = time.time()
        stop_at = steps if stop_after is None else min(steps, step + stop_after)
        meta.setdefault("first_started_at", _now())
        this_command = command or shlex.join(sys.argv)
        meta["commands"] = list(meta.get("commands", [])) + [{"command": this_command, "from_step": step,
                                                              "started_at": _now()}]
        model.to(dev)
        for st in optimizer.state.values():
            for k, v in st.items():
                if torch.is_tensor(v) and k != "step":
                    st[k] = v.to(dev)
        try:
            while step < stop_at:
                epoch, pos = divmod(step, n_batches)
                if epoch not in epoch_cache:
                    epoch_cache.clear()
                    epoch_cache[epoch] = _batches(lengths, batch_size, seed, epoch)
                batch = [train_set[i] for i in epoch_cache[epoch][pos]]
                src, att, lab = (x.to(dev) for x in _collate(batch, pad_id))
                loss, _ = _loss(model, src, att, lab, label_smoothing)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
                optimizer.step()
                scheduler.step()
                step += 1
                window.append(loss.item())
                if len(window) > 50:
                    window.pop(0)
                last_loss = sum(window) / len(window)
                if step % 50 == 0 or step == stop_at:
                    history.append({"step": step, "loss": round(last_loss, 4),
                                    "lr": scheduler.get_last_lr()[0], "t": round(time.time() - t0, 1)})
                if step % checkpoint_every == 0 or step == stop_at:
                    vl = _evaluate(model, valid, pad_id, batch_size, 0.0)
                    valid_loss = vl
                    if history and history[-1]["step"] == step:
                        history[-1]["valid_loss"] = round(vl, 4) if vl is not None else None
                    ckpt_path = str(_save_checkpoint(out_dir, step, payload(), keep_checkpoints))
                if progress:
                    el = time.time() - t_start
                    rate = (step - start_step) / el if el > 0 else 0.0
                    progress({"step": step, "total": steps, "stop_at": stop_at, "loss": window[-1], "avg_loss": last_loss,
                              "lr": scheduler.get_last_lr()[0], "steps_per_s": rate,
                              "eta_s": (stop_at - step) / rate if rate > 0 else None,
                              "grad_norm": float(gnorm), "epoch": epoch, "checkpoint": ckpt_path,
                              "valid_loss": valid_loss})
        except KeyboardInterrupt:
            if step > start_step:
                ckpt_path = str(_save_checkpoint(out_dir, step, payload(), keep_checkpoints))
            raise

    exported = False
    dest = Path(export_dir) if export_dir else out_dir
    if export_only or step >= steps:
        model.to("cpu")
        data_path = pairs_path or (Path(meta["pairs_path"]) if meta.get("pairs_path") else None)
        export(model, tokenizer, dest, half=half, info={
            "made_by": "python manage.py train_rewriter",
            "command": (meta.get("commands") or [{}])[0].get("command") or command or shlex.join(sys.argv),
            "commands": meta.get("commands", []),
            "export_command": command or shlex.join(sys.argv),
            "data": {"pairs_path": str(data_path) if data_path else None,
                     "pairs_sha256": file_sha256(data_path) if data_path and data_path.is_file() else None,
                     "pairs": len(pairs) or meta.get("pairs"), "note": data_note or meta.get("data_note")},
            "model": {"parameters": n_params, "vocab_size": model_config.vocab_size,
                      "d_model": model_config.d_model, "encoder_layers": model_config.encoder_layers,
                      "decoder_layers": model_config.decoder_layers,
                      "ffn_dim": model_config.encoder_ffn_dim,
                      "heads": model_config.encoder_attention_heads,
                      "weights_dtype": "float16" if half else "float32"},
            "training": {"steps": step, "batch_size": batch_size, "lr": lr, "warmup": warmup,
                         "schedule": schedule, "label_smoothing": label_smoothing, "clip": clip,
                         "weight_decay": weight_decay, "seed": seed, "final_loss": last_loss,
                         "valid_loss": valid_loss, "checkpoint": ckpt_path, "history": history},
            "exported_at": _now(),
            "versions": {"torch": torch.__version__, "transformers": _tf_version()},
        })
        exported = True
    return TrainResult(out_dir=str(dest if exported else out_dir), step=step, start_step=start_step,
                       final_loss=last_loss, valid_loss=valid_loss, pairs=len(pairs), parameters=n_params,
                       checkpoint=ckpt_path, exported=exported, seconds=round(time.time() - t0, 1),
                       history=history)


def _tf_version() -> str:
    import transformers

    return transformers.__version__


def export(model, tokenizer, dest, *, half: bool = False, info: dict | None = None) -> Path:
    """``save_pretrained`` (safetensors) + tokenizer + ``paraforge_training.json`` into ``dest``,
    written to a temporary sibling folder first and swapped in."""
    import torch
    from transformers import GenerationConfig

    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{dest.name}-", dir=dest.parent))
    model = model.eval()
    if half:
        model = model.to(torch.float16)
    cfg = model.config
    model.generation_config = GenerationConfig(
        decoder_start_token_id=cfg.decoder_start_token_id, pad_token_id=cfg.pad_token_id,
        eos_token_id=cfg.eos_token_id, forced_eos_token_id=cfg.eos_token_id,
        bad_words_ids=[[cfg.pad_token_id]], num_beams=4, max_length=128)
    model.save_pretrained(str(tmp), safe_serialization=True)
    if half:
        model.to(torch.float32)
    tokenizer.save_pretrained(str(tmp))
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


def load_rewriter(path):
    """(model, tokenizer) from a saved folder, float32 on CPU, no network."""
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    model = AutoModelForSeq2SeqLM.from_pretrained(str(path), local_files_only=True, dtype=torch.float32)
    return model.eval(), tok


def rewrite(model, tokenizer, sentences: list[str], *, num_beams: int = 4, max_new_tokens: int = 64,
            **kwargs) -> list[str]:
    import torch

    enc = tokenizer(sentences, return_tensors="pt", padding=True)
    with torch.no_grad():
        out = model.generate(**enc, num_beams=num_beams, max_new_tokens=max_new_tokens, **kwargs)
    return tokenizer.batch_decode(out, skip_special_tokens=True)
