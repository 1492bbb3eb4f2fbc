"""The backward score: how well a model reads the input back from an output (ParaBank 2's backward model,
Hu et al. 2019). The diverse mode adds it to each candidate's score; beam search, given a backward model,
orders its beam by the sum (``generation.decoding.decode``). An output that drops or changes what its input
says makes the input harder to read back from it, which the forward score alone does not see.

No Django: the decoder's package.
"""

from __future__ import annotations

import torch

from .causal import takes_logits_to_keep
from .loading import LoadedModel

BACKWARD_BATCH = 64
# a decoder-only backward model's candidates per forward: its logits cover prompt and source ([rows, tokens,
# vocabulary]: 8 x 64 x 262k floats for Gemma 3 are 0.5 GiB), not the source alone as a seq2seq model's do
CAUSAL_BACKWARD_BATCH = 8


@torch.inference_mode()
def backward_nll(backward: LoadedModel, candidates: list[str], target: str) -> list[float]:
    """NLL per token (EOS included) of ``target`` given each candidate under the ``backward`` model,
    teacher-forced, in batches. A decoder-only model reads ``target`` as the continuation of the candidate's
    prompt (its template), ended by the token it ends a reply with: the sequence its fine-tuning learns
    (``generation.rewriter.causal.encode_pairs``)."""
    if backward.causal:
        return _causal_backward_nll(backward, candidates, target)
    tok, model, dev = backward.tokenizer, backward.model, backward.device
    out: list[float] = []
    for k in range(0, len(candidates), BACKWARD_BATCH):
        part = candidates[k : k + BACKWARD_BATCH]
        enc = tok(part, text_target=[target] * len(part), return_tensors="pt", padding=True, truncation=True)
        labels = enc["labels"].to(dev)
        pad = tok.pad_token_id
        mask = labels != pad if pad is not None else torch.ones_like(labels, dtype=torch.bool)
        logits = model(
            input_ids=enc["input_ids"].to(dev), attention_mask=enc["attention_mask"].to(dev), labels=labels
        ).logits
        logp = torch.log_softmax(logits.float(), dim=-1).gather(2, labels[:, :, None])[:, :, 0]
        nll = -(logp * mask).sum(1) / mask.sum(1).clamp(min=1)
        out += nll.tolist()
    return out


def _causal_backward_nll(backward: LoadedModel, candidates: list[str], target: str) -> list[float]:
    """:func:`backward_nll` for a decoder-only model: each candidate's prompt then ``target`` and the end token,
    right-padded; the NLL per token of what follows the prompt."""
    from ..rewriter.causal import IGNORE, collate, encode_pairs, end_token_id

    tok, model, dev = backward.tokenizer, backward.model, backward.device
    end = end_token_id(backward.prompt, tok, backward.vocab.eos_ids)
    pad = tok.pad_token_id if tok.pad_token_id is not None else end
    out: list[float] = []
    for k in range(0, len(candidates), CAUSAL_BACKWARD_BATCH):
        part = candidates[k : k + CAUSAL_BACKWARD_BATCH]
        examples = encode_pairs(backward.prompt, tok, end, [(c, target) for c in part], max_len=1 << 20)
        ids, mask, labels = collate(examples, pad)
        # position t's logits predict token t + 1: only the columns from the first labelled one on (the source
        # after the shortest candidate's prompt) need them, so the LM head (262k words for Gemma 3) runs there alone
        first = max(1, int((labels != IGNORE).any(0).nonzero()[0]))  # (nothing predicts the first token)
        kept = ids.shape[1] - first + 1
        kw = {"logits_to_keep": kept} if takes_logits_to_keep(model) else {}
        logits = model(input_ids=ids.to(dev), attention_mask=mask.to(dev), **kw).logits[:, -kept:-1]
        labels = labels[:, first:].to(dev)
        known = labels != IGNORE
        logp = torch.log_softmax(logits.float(), dim=-1).gather(2, labels.clamp(min=0)[:, :, None])[:, :, 0]
        out += (-(logp * known).sum(1) / known.sum(1).clamp(min=1)).tolist()
    return out
