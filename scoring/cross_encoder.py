"""A cross-encoder similarity score, fine-tuned from the packaged all-MiniLM-L6-v2 weights, as ONE feature
of the similarity regressor (not the model: fine-tuned on ParaBank's few references alone it did worse
than the feature regressor).

* ``finetune``: a ``BertForSequenceClassification`` (one output) initialised from the packaged encoder's
  weights (its head seeded), trained on (reference, paraphrase, similarity 0-100) pairs with the
  sentence-transformers CrossEncoder's loss for STS (BCE with logits on similarity / 100), AdamW, linear
  warm-up and decay, on CPU, seeded. ``layers`` keeps only the first N transformer layers (cheaper to
  run: the throughput budget of ``score_resource``).
* ``CrossEncoderScorer``: the fine-tuned model's score (sigmoid x 100) of pairs, in length-sorted
  batches; its ``state`` (the weights as fp16 arrays, the configuration, the training settings) is what
  the regressor file stores, so a saved regressor carries its cross-encoder and needs no network.
"""
from __future__ import annotations

import copy
from typing import Any, Sequence

import numpy as np

from .embeddings import _offline, encoder_dir, encoder_id

MAX_LENGTH = 128


def _model_class():
    _offline()
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    from transformers import BertConfig, BertForSequenceClassification

    return BertConfig, BertForSequenceClassification


def _tokenizer():
    _offline()
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(encoder_dir()), local_files_only=True)


class CrossEncoderScorer:
    """A fine-tuned cross-encoder: ``scores(references, paraphrases)`` -> 0-100 per pair."""

    def __init__(self, model, settings: dict[str, Any]):
        self.model, self.settings = model.eval(), settings
        self.tokenizer = _tokenizer()

    def scores(self, references: Sequence[str], paraphrases: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        import torch

        n = len(references)
        out = np.zeros(n, dtype=np.float64)
        order = sorted(range(n), key=lambda i: len(references[i]) + len(paraphrases[i]))
        with torch.inference_mode():
            for start in range(0, n, batch_size):
                idx = order[start:start + batch_size]
                batch = self.tokenizer([references[i] for i in idx], [paraphrases[i] for i in idx], padding=True,
                                       truncation=True, max_length=MAX_LENGTH, return_tensors="pt")
                logits = self.model(**batch).logits[:, 0].float()
                out[idx] = (torch.sigmoid(logits) * 100.0).numpy()
        return out

    def state(self) -> dict[str, Any]:
        """What a regressor file keeps: fp16 weights, the BERT configuration, the training settings."""
        weights = {k: v.detach().to("cpu").half().numpy() for k, v in self.model.state_dict().items()}
        return {"config": self.model.config.to_dict(), "weights": weights, "settings": dict(self.settings)}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "CrossEncoderScorer":
        import torch

        BertConfig, BertForSequenceClassification = _model_class()
        config = BertConfig.from_dict(state["config"])
        model = BertForSequenceClassification(config)
        model.load_state_dict({k: torch.from_numpy(np.asarray(v, dtype=np.float32)) for k, v in state["weights"].items()})
        return cls(model, state["settings"])


def finetune(references: Sequence[str], paraphrases: Sequence[str], targets: Sequence[float], *, epochs: int = 3,
             seed: int = 0, batch_size: int = 16, learning_rate: float = 5e-5, layers: int | None = None,
             warmup: float = 0.1, log=None) -> CrossEncoderScorer:
    """Fine-tune a cross-encoder from the packaged encoder on (reference, paraphrase, 0-100) triples."""
    import torch

    BertConfig, BertForSequenceClassification = _model_class()
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = BertForSequenceClassification.from_pretrained(str(encoder_dir()), num_labels=1, local_files_only=True)
    if layers is not None and layers < model.config.num_hidden_layers:
        model.bert.encoder.layer = torch.nn.ModuleList(list(model.bert.encoder.layer)[:layers])
        model.config.num_hidden_layers = layers
    # the word-embedding matrix (30522 x 384, half the weights) stays as pre-trained: a dense AdamW update
    # of it every step would double the training time for no gain on a few thousand pairs
    model.bert.embeddings.word_embeddings.weight.requires_grad_(False)
    tokenizer = _tokenizer()
    y = torch.tensor(np.clip(np.asarray(targets, dtype=np.float64) / 100.0, 0.0, 1.0), dtype=torch.float32)
    n = len(references)
    steps = epochs * ((n + batch_size - 1) // batch_size)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=learning_rate, weight_decay=0.01)
    warm = max(1, int(warmup * steps))
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warm, max(0.0, (steps - s) / max(1, steps - warm))))
    loss_fn = torch.nn.BCEWithLogitsLoss()
    model.train()
    step = 0
    for epoch in range(epochs):
        perm = rng.permutation(n)
        for start in range(0, n, batch_size):
            idx = perm[start:start + batch_size].tolist()
            batch = tokenizer([references[i] for i in idx], [paraphrases[i] for i in idx], padding=True,
                              truncation=True, max_length=MAX_LENGTH, return_tensors="pt")
            loss = loss_fn(model(**batch).logits[:, 0], y[idx])
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            step += 1
            if log is not None and step % 50 == 0:
                log(f"cross-encoder epoch {epoch + 1}/{epochs} step {step}/{steps} loss {loss.item():.4f}")
    settings = {"init": encoder_id(), "epochs": epochs, "seed": seed, "batch_size": batch_size,
                "learning_rate": learning_rate, "layers": model.config.num_hidden_layers, "warmup": warmup,
                "loss": "BCE with logits on similarity/100", "frozen": "word embeddings", "max_length": MAX_LENGTH, "n_train": n}
    return CrossEncoderScorer(copy.deepcopy(model), settings)
