"""The backward score: how well a model reads the input back from an output (ParaBank 2's backward model,
Hu et al. 2019). The diverse mode adds it to each candidate's score; beam search, given a backward model,
orders its beam by the sum (``generation.decoding.decode``). An output that drops or changes what its input
says makes the input harder to read back from it, which the forward score alone does not see.

No Django: the decoder's package.
"""

from __future__ import annotations

import torch

from .causal import left_padded_positions, takes_logits_to_keep, takes_position_ids
from .loading import LoadedModel

BACKWARD_BATCH = 64
# a decoder-only backward model's logits per forward, rows x columns: each column is the whole vocabulary (512 x
# 262k floats for Gemma 3 are 0.5 GiB), so a forward takes as many candidates as keep within it
CAUSAL_BACKWARD_LOGITS = 512


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
    left-padded (positions count from each row's first token, as the decoder's), so that every row's ``target``
    ends in the last column; the NLL per token of what follows the prompt. Candidates go shortest first, as
    many to a forward as keep its logits within :data:`CAUSAL_BACKWARD_LOGITS`: the LM head (262k words for
    Gemma 3, most of the work) runs on the target's columns alone, whatever the candidates' lengths."""
    from ..rewriter.causal import IGNORE, collate, encode_pairs, end_token_id

    tok, model, dev = backward.tokenizer, backward.model, backward.device
    end = end_token_id(backward.prompt, tok, backward.vocab.eos_ids)
    pad = tok.pad_token_id if tok.pad_token_id is not None else end
    examples = encode_pairs(backward.prompt, tok, end, [(c, target) for c in candidates], max_len=1 << 20)
    # the labelled tail of each row (the target and its end) and the column before it, whose logits predict it
    spans = [sum(y != IGNORE for y in labels) + 1 for _, labels in examples]
    order = sorted(range(len(examples)), key=lambda i: (len(examples[i][0]), i))
    kw_positions, kw_keep = takes_position_ids(model), takes_logits_to_keep(model)
    out = [0.0] * len(examples)
    k = 0
    while k < len(order):
        part, kept = [order[k]], spans[order[k]]
        for i in order[k + 1 :]:
            if (len(part) + 1) * max(kept, spans[i]) > CAUSAL_BACKWARD_LOGITS:
                break
            part.append(i)
            kept = max(kept, spans[i])
        k += len(part)
        ids, mask, labels = collate([examples[i] for i in part], pad, left=True)
        kw = {"logits_to_keep": kept} if kw_keep else {}
        if kw_positions:
            kw["position_ids"] = left_padded_positions(mask).to(dev)
        logits = model(input_ids=ids.to(dev), attention_mask=mask.to(dev), **kw).logits[:, -kept:-1]
        labels = labels[:, labels.shape[1] - kept + 1 :].to(dev)
        known = labels != IGNORE
        logp = torch.log_softmax(logits.float(), dim=-1).gather(2, labels.clamp(min=0)[:, :, None])[:, :, 0]
        for i, nll in zip(part, (-(logp * known).sum(1) / known.sum(1).clamp(min=1)).tolist()):
            out[i] = nll
    return out
