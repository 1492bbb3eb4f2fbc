"""An STS-tuned head on the packaged encoder: its top layers fine-tuned on STS-B train (recipe ``v4``).

Why a head and not a second encoder: the packaged all-MiniLM-L6-v2's cosine carries nearly all of the
regressor's accuracy, and on STS-B dev it stays at 0.867 whatever features surround it. Fine-tuning
the encoder on STS-B train raises its cosine to about 0.89, but on ParaBank's decoder outputs the
packaged encoder is as good, so both are wanted, and a fine-tuned copy beside the packaged one would
double the forward pass of ``score_resource``. Here only the top ``layers`` (2) of the six layers are
tuned: one pass through the shared bottom four feeds both the packaged top (the base features) and the
tuned top (the ``sts`` feature family), 8/6 of one pass.

The weights ship in the repository (``HEAD_PATH``, float16, about 7 MB; their provenance in the file's
metadata), made by

    python -m scoring.similarity.encoder_head train --stsb /work/shared/data/stsb/sts-train.csv --out HEAD_PATH

(``HeadTrainSettings()``: 2 layers, 1 epoch, AdamW 1e-4, batch 16, seed 0; cosine of the two mean-pooled
sentence vectors against gold / 5 with a squared error, as sentence-transformers' ``CosineSimilarityLoss``; about
5 CPU minutes). STS-B's scores are CC BY-SA 4.0, so the head is too. ``evaluate`` prints the head's and the
packaged encoder's cosine rho on an STS file. Django-free.

The head belongs to the packaged MiniLM (``encoder()`` with no ``sentence_encoder``): a regressor with another
encoder (issue 41, ``scoring.similarity.embeddings.encoder_resolve``) cannot take the ``sts`` family, and
``RegressorTrainOptions`` refuses recipe v4 with one.

Dependencies run one way: this module uses ``scoring.similarity.embeddings`` (the encoder, its pooling and layer
stepping) and ``scoring.similarity.sts_files`` (reading STS-B); ``embeddings`` takes a loaded head as an argument and
never imports this module.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import functools
import hashlib
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from api.numbers import cli_float, cli_int
from jobs.params import ParamsError, fail, finite, int_at_least
from scoring.similarity.embeddings import Head, encoder, encoder_id, mean_pooled, pair_cosines, pair_rows, run_layers
from scoring.similarity.sts_files import sts_read

HEAD_PATH = Path(__file__).resolve().parent / "encoder_heads" / "minilm-l6-stsb-top2.safetensors"


@functools.lru_cache(maxsize=4)
def head_info(path: Path = HEAD_PATH) -> dict[str, Any]:
    """The head's provenance (for a regressor's signature): file, sha256 and how it was trained."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        meta = dict(f.metadata() or {})
    info = json.loads(meta.get("paraforge", "{}"))
    return {"file": path.name, "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), **info}


@functools.lru_cache(maxsize=2)
def load_head(path: Path = HEAD_PATH) -> Head:
    """(index of the first tuned layer, the tuned layers as a module list, float32, eval mode)."""
    from safetensors.torch import load_file

    if not path.is_file():
        raise FileNotFoundError(f"the STS-tuned encoder head is missing: {path}")
    info = head_info(path)
    bert = encoder()[0].auto_model
    first = len(bert.encoder.layer) - int(info["layers"])
    layers = copy.deepcopy(bert.encoder.layer[first:])
    layers.load_state_dict({k: v.float() for k, v in load_file(str(path)).items()})
    return first, layers.eval()


def bottom_states(texts: Sequence[str], first: int, *, batch_size: int = 64) -> dict[str, Any]:
    """Each distinct text's hidden states entering layer ``first`` (the frozen bottom), computed once: every
    head trained or run on the same texts can share them."""
    import torch

    model = encoder()
    bert, tokenizer = model[0].auto_model, model.tokenizer
    order = sorted(set(texts), key=len)
    states = {}
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            batch = tokenizer(
                chunk, padding=True, truncation=True, max_length=model[0].max_seq_length, return_tensors="pt"
            )
            hidden = bert(**batch, output_hidden_states=True).hidden_states[first]
            for i, text in enumerate(chunk):
                states[text] = hidden[i, : int(batch["attention_mask"][i].sum())].clone()
    return states


def _cosines(layers, states: dict, pairs: Sequence[tuple[str, str]]):
    """Cosine of each pair's sentence vectors after ``layers`` (differentiable when grad is on)."""
    import torch

    def encode(texts):
        n = max(states[t].shape[0] for t in texts)
        hidden = torch.zeros(len(texts), n, states[texts[0]].shape[1])
        mask = torch.zeros(len(texts), n, dtype=torch.long)
        for i, t in enumerate(texts):
            hidden[i, : states[t].shape[0]] = states[t]
            mask[i, : states[t].shape[0]] = 1
        return mean_pooled(run_layers(layers, hidden, mask), mask)

    return (encode([a for a, _ in pairs]) * encode([b for _, b in pairs])).sum(1)


@dataclasses.dataclass(frozen=True)
class HeadTrainSettings:
    """How a head is trained (the shipped one: these defaults), checked when made and recorded in its file: the
    settings that travel together from the ``train`` command, a bench's campaign head or a test to ``train_head``."""

    layers: int = 2
    epochs: int = 1
    lr: float = 1e-4
    batch_size: int = 16
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("layers", "epochs"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise fail("{0} and {1} must be >= 1", "layers", "epochs")
        object.__setattr__(self, "batch_size", int_at_least("batch_size", self.batch_size, 1))
        object.__setattr__(self, "seed", int_at_least("seed", self.seed, 0))  # numpy's generator takes none below
        lr = finite("lr", self.lr)
        if lr < 0:
            raise fail("{0} must be >= 0, not {lr}", "lr", lr=lr)
        object.__setattr__(self, "lr", lr)

    def as_dict(self) -> dict[str, Any]:
        """The settings as a head's file records them (``save_head``) and the ``train`` command prints them."""
        return dataclasses.asdict(self)


def train_head(
    pairs: Sequence[tuple[str, str, float]],
    settings: HeadTrainSettings = HeadTrainSettings(),
    *,
    log: Callable[[str], None] | None = None,
    start_from: Any = None,
    states: dict[str, Any] | None = None,
) -> tuple[dict, dict[str, Any]]:
    """Fine-tune the packaged encoder's top ``settings.layers`` on (sentence, sentence, score 0-100) pairs; the
    bottom stays frozen (its states computed once, or given as ``states``, ``bottom_states``). ``start_from``:
    tuned layers to continue from (e.g. the shipped STS-B head's, ``load_head()[1]``) instead of the packaged
    ones. Returns (float32 state dict, training settings as recorded: ``settings.as_dict()``, loss, pairs)."""
    import torch

    layers = settings.layers
    torch.manual_seed(settings.seed)
    bert = encoder()[0].auto_model
    first = len(bert.encoder.layer) - layers
    if states is None:
        states = bottom_states([t for a, b, _ in pairs for t in (a, b)], first)
    if start_from is not None and len(start_from) != layers:
        raise ValueError(f"start_from has {len(start_from)} layers, not {layers}")
    top = copy.deepcopy(bert.encoder.layer[first:] if start_from is None else start_from).train()
    optimizer = torch.optim.AdamW(top.parameters(), lr=settings.lr)
    rng = np.random.default_rng(settings.seed)
    for epoch in range(settings.epochs):
        order = rng.permutation(len(pairs))
        for start in range(0, len(order), settings.batch_size):
            batch = [pairs[i] for i in order[start : start + settings.batch_size]]
            gold = torch.tensor([s / 100.0 for _, _, s in batch], dtype=torch.float32)
            loss = torch.nn.functional.mse_loss(_cosines(top, states, [(a, b) for a, b, _ in batch]), gold)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if log:
            log(f"epoch {epoch + 1}/{settings.epochs}: last batch loss {loss.item():.4f}")
    recorded = {**settings.as_dict(), "loss": "mse(cosine, score/100)", "n_pairs": len(pairs)}
    return {k: v.detach().clone() for k, v in top.state_dict().items()}, recorded


def head_layers(state: dict, layers: int) -> Any:
    """The module list of a trained ``state`` (``train_head``) on the packaged encoder, in eval mode."""
    bert = encoder()[0].auto_model
    top = copy.deepcopy(bert.encoder.layer[len(bert.encoder.layer) - layers :])
    top.load_state_dict({k: v.float() for k, v in state.items()})
    return top.eval()


def head_similarities(
    layers, states: dict[str, Any], references: Sequence[str], paraphrases: Sequence[str], *, batch_size: int = 64
) -> np.ndarray:
    """Per pair (n x 4) the cosine and the greedy alignment's precision, recall and F from ``layers`` run on the
    texts' shared ``bottom_states``: what ``pair_similarities(head=...)`` gives, without a second pass through
    the bottom."""
    import torch

    unique = list(dict.fromkeys([*references, *paraphrases]))
    sentences = np.zeros((len(unique), 384), dtype=np.float32)
    tokens: list[Any] = [None] * len(unique)
    order = sorted(range(len(unique)), key=lambda i: states[unique[i]].shape[0])
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            n = max(states[unique[i]].shape[0] for i in idx)
            hidden = torch.zeros(len(idx), n, states[unique[idx[0]]].shape[1])
            mask = torch.zeros(len(idx), n, dtype=torch.long)
            for row, i in enumerate(idx):
                hidden[row, : states[unique[i]].shape[0]] = states[unique[i]]
                mask[row, : states[unique[i]].shape[0]] = 1
            out = run_layers(layers, hidden, mask)
            sentences[idx] = mean_pooled(out, mask).numpy()
            unit = torch.nn.functional.normalize(out, dim=2).numpy()
            for row, i in enumerate(idx):
                length = int(mask[row].sum())
                inner = unit[row, 1 : length - 1]
                tokens[i] = inner if len(inner) else unit[row, :length]
    index = {t: i for i, t in enumerate(unique)}
    return pair_rows(sentences, tokens, index, references, paraphrases)


def save_head(state: dict, settings: dict[str, Any], path: Path, *, source: str) -> None:
    """Float16 safetensors with the settings and the training file's sha256 as metadata."""
    from safetensors.torch import save_file

    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {**settings, "encoder": encoder_id(), "trained_on": source}
    save_file(
        {k: v.half().contiguous() for k, v in state.items()},
        str(path),
        metadata={"paraforge": json.dumps(meta, sort_keys=True)},
    )


def head_cosines(pairs: Sequence[tuple[str, str]], path: Path = HEAD_PATH) -> np.ndarray:
    """The shipped head's cosine of each pair (for ``evaluate`` and tests)."""
    import torch

    first, layers = load_head(path)
    states = bottom_states([t for p in pairs for t in p], first)
    with torch.inference_mode():
        return (
            np.concatenate([_cosines(layers, states, pairs[s : s + 128]).numpy() for s in range(0, len(pairs), 128)])
            if pairs
            else np.zeros(0)
        )


def main(argv: Sequence[str] | None = None) -> int:
    from scipy.stats import spearmanr

    parser = argparse.ArgumentParser(
        prog="python -m scoring.similarity.encoder_head", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    tr = sub.add_parser("train", help="fine-tune the top layers on an STS-B file and write the head")
    tr.add_argument("--stsb", type=Path, required=True)
    tr.add_argument("--out", type=Path, default=HEAD_PATH)
    tr.add_argument("--layers", type=cli_int, default=2)
    tr.add_argument("--epochs", type=cli_int, default=1)
    tr.add_argument("--lr", type=cli_float, default=1e-4)
    tr.add_argument("--seed", type=cli_int, default=0)
    ev = sub.add_parser("evaluate", help="Spearman's rho of the head's cosine on an STS file")
    ev.add_argument("file", type=Path)
    ev.add_argument("--kind", choices=["stsb", "sick"], default="stsb")
    ev.add_argument("--head", type=Path, default=HEAD_PATH)
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    if args.command == "train":
        try:
            training = HeadTrainSettings(layers=args.layers, epochs=args.epochs, lr=args.lr, seed=args.seed)
        except ParamsError as exc:
            parser.error(exc.option_message)
        rows = sts_read(args.stsb, kind="stsb")
        started = time.process_time()
        state, settings = train_head(
            [(r.sentence1, r.sentence2, r.score) for r in rows],
            training,
            log=lambda m: print(m, file=sys.stderr, flush=True),
        )
        digest = hashlib.sha256(args.stsb.read_bytes()).hexdigest()
        save_head(state, settings, args.out, source=f"{args.stsb.name} sha256:{digest}")
        print(
            json.dumps(
                {
                    "head": str(args.out),
                    "pairs": len(rows),
                    **settings,
                    "cpu_seconds": round(time.process_time() - started),
                }
            )
        )
        return 0
    rows = sts_read(args.file, kind=args.kind)
    pairs = [(r.sentence1, r.sentence2) for r in rows]
    gold = [r.score for r in rows]
    print(
        json.dumps(
            {
                "file": args.file.name,
                "pairs": len(rows),
                "head_cosine_spearman": round(float(spearmanr(gold, head_cosines(pairs, args.head))[0]), 4),
                "encoder_cosine_spearman": round(
                    float(spearmanr(gold, pair_cosines([a for a, _ in pairs], [b for _, b in pairs]))[0]), 4
                ),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
