"""A small cross-encoder on the packaged encoder's bottom layers, trained on STS-B train (issue 32's candidate).

Why try it: a bi-encoder compares two sentence vectors made apart; a cross-encoder reads the pair together
(every token of the paraphrase attends to the reference's), which is what judges "same meaning" best on STS
tasks. A full six-layer cross-encoder would cost a pass over both texts joined, per pair, on top of ``base``'s
encoder pass (about 2.7x its time); this one is the **first three** layers of the packaged all-MiniLM-L6-v2 (its
word embeddings frozen and shared) and a linear output on the pair's mean-pooled token vectors, with a sigmoid:
a similarity in 0-1, at 0.8-0.9x the time of ``base``'s encoder pass (measured), inside issue 32's 2x budget.

Its settings (``TrainSettings``) were fixed before it was measured on ParaBank's judgments: 3 layers, STS-B
train in both orders, one epoch, AdamW 1e-4, batch 16, seed 0. It learns nothing from a campaign, so it needs no
cross-fitting. Measured (``bench/regressor_recipes.py --cross-encoder``): STS-B dev rho 0.846 alone (the
packaged encoder's cosine: 0.867), and as a feature beside ``base``'s no gain on ParaBank's judgments (nested
CV, docs/explanation/similarity-regressor.md), so no recipe uses it and no weights ship; the bench trains it
(6 CPU minutes) into its cache. Kept, tested, for the next candidate built on it.

    python -m bench.cross_encoder train --stsb ../shared/data/stsb/sts-train.csv --out cross3.safetensors
    python -m bench.cross_encoder evaluate ../shared/data/stsb/sts-dev.csv --model cross3.safetensors

STS-B's scores are CC BY-SA 4.0, so a file trained on them is too. Django-free; uses
``scoring.similarity.embeddings`` (the encoder, layer stepping) and ``scoring.similarity.encoder_head`` (its file
format), neither of which imports this module.
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from scoring.similarity.embeddings import encoder, run_layers
from scoring.similarity.encoder_head import head_info, save_head
from scoring.similarity.sts_files import sts_read

MAX_PAIR_TOKENS = 256  # both texts and the three special tokens; longer pairs are cut (the reference's end first)


@dataclasses.dataclass(frozen=True)
class TrainSettings:
    """How a cross-encoder is trained (fixed before it was measured); recorded in its file."""

    layers: int = 3
    epochs: int = 1
    lr: float = 1e-4
    batch_size: int = 16
    seed: int = 0
    both_orders: bool = True  # each STS pair once as (a, b) and once as (b, a): the score does not depend on order


class CrossEncoder:
    """The first ``layers`` layers of the packaged encoder and a linear output, on its frozen word embeddings."""

    def __init__(self, layers: int):
        import torch

        bert = encoder()[0].auto_model
        self.embeddings = bert.embeddings  # shared with the packaged encoder, never trained
        self.layers = copy.deepcopy(bert.encoder.layer[:layers])
        self.out = torch.nn.Linear(bert.config.hidden_size, 1)

    def parameters(self):
        return [*self.layers.parameters(), *self.out.parameters()]

    def state_dict(self) -> dict[str, Any]:
        return {
            **{f"layers.{k}": v for k, v in self.layers.state_dict().items()},
            **{f"out.{k}": v for k, v in self.out.state_dict().items()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.layers.load_state_dict({k[7:]: v.float() for k, v in state.items() if k.startswith("layers.")})
        self.out.load_state_dict({k[4:]: v.float() for k, v in state.items() if k.startswith("out.")})

    def train(self, mode: bool = True) -> CrossEncoder:
        self.layers.train(mode)
        self.out.train(mode)
        return self

    def forward(self, batch) -> Any:
        """Similarity in 0-1 of each tokenized pair (differentiable when grad is on)."""
        import torch

        with torch.no_grad():
            hidden = self.embeddings(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"])
        mask = batch["attention_mask"]
        hidden = run_layers(self.layers, hidden, mask)
        m = mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)
        return torch.sigmoid(self.out(pooled).squeeze(-1))


def tokenize_pairs(firsts: Sequence[str], seconds: Sequence[str]):
    """One padded batch of "[CLS] first [SEP] second [SEP]" with its segment ids."""
    tokenizer = encoder().tokenizer
    return tokenizer(
        list(firsts),
        list(seconds),
        padding=True,
        truncation="longest_first",
        max_length=MAX_PAIR_TOKENS,
        return_tensors="pt",
        return_token_type_ids=True,
    )


def train_cross_encoder(
    pairs: Sequence[tuple[str, str, float]], settings: TrainSettings = TrainSettings(), *, log=None
) -> CrossEncoder:
    """Fit on (sentence, sentence, score 0-100) pairs with a squared error against score / 100."""
    import torch

    torch.manual_seed(settings.seed)
    model = CrossEncoder(settings.layers).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.lr)
    examples = [(a, b, s) for a, b, s in pairs]
    if settings.both_orders:
        examples += [(b, a, s) for a, b, s in pairs]
    rng = np.random.default_rng(settings.seed)
    for epoch in range(settings.epochs):
        order = rng.permutation(len(examples))
        for start in range(0, len(order), settings.batch_size):
            chunk = [examples[i] for i in order[start : start + settings.batch_size]]
            batch = tokenize_pairs([a for a, _, _ in chunk], [b for _, b, _ in chunk])
            gold = torch.tensor([s / 100.0 for _, _, s in chunk], dtype=torch.float32)
            loss = torch.nn.functional.mse_loss(model.forward(batch), gold)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if log:
            log(f"epoch {epoch + 1}/{settings.epochs}: last batch loss {loss.item():.4f}")
    return model.train(False)


def save_cross_encoder(model: CrossEncoder, settings: TrainSettings, path: Path, *, source: str) -> None:
    """Float16 safetensors with the settings and the training file's sha256 as metadata: the STS head's format
    (``encoder_head.save_head``)."""
    save_head(model.state_dict(), dataclasses.asdict(settings), path, source=source)


def cross_encoder_info(path: Path) -> dict[str, Any]:
    """The file's provenance: name, sha256 and how it was trained (its metadata; ``encoder_head.head_info``)."""
    return head_info(path)


@functools.lru_cache(maxsize=2)
def load_cross_encoder(path: Path) -> CrossEncoder:
    """A saved cross-encoder (``save_cross_encoder``), float32, eval mode, loaded once per process."""
    from safetensors.torch import load_file

    if not path.is_file():
        raise FileNotFoundError(f"the cross-encoder is missing: {path}")
    model = CrossEncoder(int(cross_encoder_info(path)["layers"]))
    model.load_state_dict(load_file(str(path)))
    return model.train(False)


def cross_scores(
    references: Sequence[str], paraphrases: Sequence[str], *, model: CrossEncoder, batch_size: int = 64
) -> np.ndarray:
    """The cross-encoder's similarity (0-1) of each (reference, paraphrase) pair, in batches of similar length."""
    import torch

    if len(references) != len(paraphrases):
        raise ValueError(f"{len(references)} references for {len(paraphrases)} paraphrases")
    out = np.zeros(len(references), dtype=np.float64)
    order = sorted(range(len(references)), key=lambda i: len(references[i]) + len(paraphrases[i]))
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            batch = tokenize_pairs([references[i] for i in idx], [paraphrases[i] for i in idx])
            out[idx] = model.forward(batch).double().numpy()
    return out


def main(argv: Sequence[str] | None = None) -> int:
    from scipy.stats import spearmanr

    parser = argparse.ArgumentParser(prog="python -m bench.cross_encoder", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    tr = sub.add_parser("train", help="train the cross-encoder on an STS-B file and write it")
    tr.add_argument("--stsb", type=Path, required=True)
    tr.add_argument("--out", type=Path, required=True)
    ev = sub.add_parser("evaluate", help="Spearman's rho of the cross-encoder's score on an STS file")
    ev.add_argument("file", type=Path)
    ev.add_argument("--kind", choices=["stsb", "sick"], default="stsb")
    ev.add_argument("--model", type=Path, required=True)
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    if args.command == "train":
        rows = sts_read(args.stsb, kind="stsb")
        settings = TrainSettings()
        started = time.process_time()
        model = train_cross_encoder(
            [(r.sentence1, r.sentence2, r.score) for r in rows],
            settings,
            log=lambda m: print(m, file=sys.stderr, flush=True),
        )
        digest = hashlib.sha256(args.stsb.read_bytes()).hexdigest()
        save_cross_encoder(model, settings, args.out, source=f"{args.stsb.name} sha256:{digest}")
        print(
            json.dumps(
                {
                    "cross_encoder": str(args.out),
                    "pairs": len(rows),
                    **dataclasses.asdict(settings),
                    "cpu_seconds": round(time.process_time() - started),
                }
            )
        )
        return 0
    rows = sts_read(args.file, kind=args.kind)
    scores = cross_scores(
        [r.sentence1 for r in rows], [r.sentence2 for r in rows], model=load_cross_encoder(args.model)
    )
    rho = float(spearmanr([r.score for r in rows], scores)[0])
    print(json.dumps({"file": args.file.name, "pairs": len(rows), "cross_encoder_spearman": round(rho, 4)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
