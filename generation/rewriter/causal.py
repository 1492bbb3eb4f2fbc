"""Fine-tuning a decoder-only model as the rewriter: each pair is one sequence, the prompt the decoder builds
for the sentence (:meth:`generation.prompts.PromptTemplate.encode`, the same call, so training and decoding
see the same tokens) followed by the paraphrase and the token the model ends a turn with; only that
continuation is learnt (:func:`labelled`: the prompt's labels are :data:`IGNORE`).

Batches are right-padded (:func:`collate`): each sequence starts at position 0, as the model's own default
positions assume, the padding is masked out of attention and carries no label. The loss
(:func:`causal_loss`) is next-token cross-entropy over the labelled positions only."""

from __future__ import annotations

from generation.prompts import PromptTemplate

IGNORE = -100  # a label that counts for nothing (torch's cross_entropy ``ignore_index``)
_PROBE = "PARAFORGE-REPLY-END-PROBE"


def end_token_id(template: PromptTemplate, tokenizer, eos_ids: tuple[int, ...]) -> int:
    """The token a training continuation ends with, one the decoder stops at (``eos_ids``:
    ``generation.decoding.loading.causal_eos_ids``, the model's EOS and end-of-turn tokens): under a chat
    template the first of them the template writes after an assistant's reply (Qwen's ``<|im_end|>``, Llama
    3's ``<|eot_id|>``), else the tokenizer's EOS where the decoder stops at it, else the model's first EOS."""
    if template.chat:
        try:
            text = tokenizer.apply_chat_template(
                [{"role": "user", "content": "x"}, {"role": "assistant", "content": _PROBE}], tokenize=False
            )
        except Exception:  # noqa: BLE001 - a model's own Jinja template may refuse any conversation shape
            text = ""
        tail = text.split(_PROBE, 1)[1] if _PROBE in text else ""
        found = sorted(
            (tail.find(tok), i) for i, tok in zip(eos_ids, tokenizer.convert_ids_to_tokens(list(eos_ids))) if tok
        )
        for at, i in found:
            if at >= 0:
                return i
    eos = tokenizer.eos_token_id
    return eos if eos in eos_ids else eos_ids[0]


def continuation_ids(
    template: PromptTemplate, tokenizer, prompt_text: str, prompt_ids: list[int], paraphrase: str
) -> list[int]:
    """The paraphrase's tokens as they follow the prompt. The prompt's text and the paraphrase are tokenized
    as one text (after a space unless the prompt ends in whitespace), so that a tokenizer marking a word's
    leading space (SentencePiece's ``▁``, byte-level BPE's ``Ġ``) marks the first word as the model would
    write it there; where that text's tokens do not begin with the prompt's own (a merge across the boundary,
    an EOS the tokenizer appends), the paraphrase is tokenized alone. Either way the sequence starts with
    exactly the decoder's prompt."""
    joiner = "" if prompt_text[-1:].isspace() else " "
    joint = template.tokenize(tokenizer, [prompt_text + joiner + paraphrase])["input_ids"][0]
    n = len(prompt_ids)
    if joint[:n] == prompt_ids and len(joint) > n and joint[-1] not in tokenizer.all_special_ids:
        return list(joint[n:])
    return list(tokenizer(joiner + paraphrase, add_special_tokens=False)["input_ids"])


def labelled(prompt_ids: list[int], continuation: list[int]) -> tuple[list[int], list[int]]:
    """``(input_ids, labels)``: the prompt then the continuation; the prompt's labels are :data:`IGNORE`
    (the model is not taught to write the prompt, nor its reference: only the paraphrase and its end)."""
    return list(prompt_ids) + list(continuation), [IGNORE] * len(prompt_ids) + list(continuation)


def encode_pairs(
    template: PromptTemplate, tokenizer, end_id: int, pairs: list[tuple[str, str]], max_len: int
) -> list[tuple[list[int], list[int]]]:
    """Each pair as ``(input_ids, labels)``; the continuation keeps at most ``max_len`` tokens, ``end_id``
    last (as the seq2seq path keeps ``</s>``); the prompt is never cut (the decoder does not cut it)."""
    sources = [s for s, _ in pairs]
    prompts = template.encode(tokenizer, sources)["input_ids"]
    out = []
    for (source, paraphrase), prompt in zip(pairs, prompts):
        text = template.render(tokenizer, source)
        body = continuation_ids(template, tokenizer, text, list(prompt), paraphrase)[: max(max_len - 1, 1)]
        out.append(labelled(prompt, [*body, end_id]))
    return out


def padded(rows: list[list[int]], value: int, *, left: bool = False):
    """``rows`` as one long tensor [len(rows), longest], each row from position 0 and ``value`` after it, or with
    ``left`` ``value`` before it and each row ending in the last column."""
    import torch

    width = max(len(r) for r in rows)
    out = torch.full((len(rows), width), value, dtype=torch.long)
    for i, row in enumerate(rows):
        start = width - len(row) if left else 0
        out[i, start : start + len(row)] = torch.tensor(row, dtype=torch.long)
    return out


def collate(examples: list[tuple[list[int], list[int]]], pad_id: int, *, left: bool = False):
    """Right-padded tensors ``(input_ids, attention_mask, labels)`` [B, T] (``left``: left-padded, every row
    ending in the last column: a backward model's rows, ``generation.decoding.backward``): padding is ``pad_id``
    (any token: masked out and never a label)."""
    ids = padded([x for x, _ in examples], pad_id, left=left)
    mask = padded([[1] * len(x) for x, _ in examples], 0, left=left)
    labels = padded([y for _, y in examples], IGNORE, left=left)
    return ids, mask, labels


def causal_loss(model, ids, mask, labels, label_smoothing: float):
    """Mean next-token cross-entropy over the labelled positions: position t's logits predict label t+1 (only
    those rows of the [B, T, V] logits are taken to float32)."""
    import torch.nn.functional as F

    out = model(input_ids=ids, attention_mask=mask)
    target = labels[:, 1:]
    keep = target.ne(IGNORE)
    logits = out.logits[:, :-1][keep].float()
    loss = F.cross_entropy(logits, target[keep], label_smoothing=label_smoothing)
    return loss, out
