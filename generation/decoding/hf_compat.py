"""Every private ``transformers`` API the decoder relies on, in one place.

The decoder reproduces ``generate``'s beam search step by step, so it needs the generation config exactly
as ``generate`` prepares it and the logits processors exactly as ``generate`` builds them. Transformers
offers no public call for either: these wrappers are what to check (and adapt) when upgrading it.
"""

from __future__ import annotations

import copy

import torch


def generation_config_for(
    model, beam: int, max_length: int, length_penalty: float, early_stopping, device: torch.device
):
    """The model's ``GenerationConfig`` for a plain beam search of ``beam`` beams up to ``max_length`` tokens,
    its special-token tensors prepared as ``generate`` does (``_prepare_special_tokens``)."""
    gc = copy.deepcopy(model.generation_config)
    gc.num_beams = beam
    gc.max_length = max_length
    gc.max_new_tokens = None
    gc.min_length = 0
    gc.min_new_tokens = None
    gc.length_penalty = length_penalty
    gc.early_stopping = early_stopping
    gc.do_sample = False
    gc.num_return_sequences = 1
    for k in ("temperature", "top_k", "top_p"):
        if hasattr(gc, k):
            setattr(gc, k, None)
    model._prepare_special_tokens(gc, device=device)
    return gc


def logits_processors(model, generation_config, input_ids: torch.Tensor):
    """The ``LogitsProcessorList`` that ``generate`` applies with ``generation_config`` (forced EOS, bad
    words, ...), for a decoder that starts from one token. Older releases take no ``device`` or
    ``model_kwargs``."""
    try:
        return model._get_logits_processor(
            generation_config=generation_config,
            input_ids_seq_length=1,
            encoder_input_ids=input_ids,
            device=input_ids.device,
            model_kwargs={},
        )
    except TypeError:
        return model._get_logits_processor(
            generation_config=generation_config, input_ids_seq_length=1, encoder_input_ids=input_ids
        )


class _BanTokens:
    """In place, what ``NoBadWordsLogitsProcessor`` computes for single-token bad words: their scores -inf.
    The processor adds a [H, V] bias of zeros and -inf to a fresh [H, V] copy (three [H, V] passes and two
    allocations a step; x + 0.0 is x and x + -inf is -inf, so filling those columns is bit for bit the same)."""

    def __init__(self, ids: list[int]):
        self.ids = torch.tensor(sorted(ids), dtype=torch.long)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if self.ids.device != scores.device:
            self.ids = self.ids.to(scores.device)
        return scores.index_fill_(1, self.ids, float("-inf"))


class FastProcessors:
    """``generate``'s processors applied in order, the costly ones replaced by in-place equivalents (each
    replacement computes exactly what it replaces); anything else runs as ``generate`` runs it."""

    def __init__(self, processors):
        from transformers.generation.logits_process import NoBadWordsLogitsProcessor

        self.steps = []
        for p in processors:
            bias = getattr(p, "sequence_bias", None)
            if (
                type(p) is NoBadWordsLogitsProcessor
                and isinstance(bias, dict)
                and bias
                and all(len(k) == 1 and v == float("-inf") for k, v in bias.items())
            ):
                self.steps.append(_BanTokens([k[0] for k in bias]))
            else:
                self.steps.append(p)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        for p in self.steps:
            scores = p(input_ids, scores)
        return scores


def run_encoder(model, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """An encoder-decoder model's encoder output [B, S, d] (run once per call: every row of a sentence
    shares it)."""
    return model.get_encoder()(input_ids=input_ids, attention_mask=attention_mask, return_dict=True).last_hidden_state


def reorder_self_attention(cache, rows: torch.Tensor) -> None:
    """Reorder the decoder's key/value cache for the hypotheses' new ``rows``, leaving out an encoder-decoder
    cache's cross-attention half: a hypothesis' cross-attention keys and values are its sentence's encoder
    states, the same for every beam of the sentence, and the search only moves hypotheses within their
    sentence, so reordering them copied every layer's [H, heads, source length, d] tensors for no change."""
    sa = getattr(cache, "self_attention_cache", None)
    if sa is not None and hasattr(cache, "cross_attention_cache"):
        sa.reorder_cache(rows)
    else:
        cache.reorder_cache(rows)


def repeat_rows(cache, times: int) -> None:
    """Each row of the cache ``times`` times in a row (the first step ran once per sentence; each of its K
    beams gets a copy), both halves of an encoder-decoder cache (``DynamicCache`` halves, what ``generate``
    makes for these models)."""
    cache.batch_repeat_interleave(times)


def select_rows(cache, self_rows: torch.Tensor, cross_rows: torch.Tensor) -> None:
    """Keep only some hypotheses in the cache (a batch that shrinks as its sentences finish): the
    self-attention half takes ``self_rows`` (the beams' moves folded in), an encoder-decoder cache's
    cross-attention half ``cross_rows`` (each kept hypothesis' own row: the same values either way, but
    the very same tensors as without shrinking)."""
    sa = getattr(cache, "self_attention_cache", None)
    if sa is not None and hasattr(cache, "cross_attention_cache"):
        sa.reorder_cache(self_rows)
        cache.cross_attention_cache.reorder_cache(cross_rows)
    else:
        cache.reorder_cache(self_rows)


def pad_token_id(generation_config) -> int | None:
    """The pad token ``generate`` fills finished rows with (set by :func:`generation_config_for`)."""
    pad = generation_config._pad_token_tensor
    return None if pad is None else int(pad.item())


def eos_count(generation_config) -> int:
    """How many EOS tokens ``generate`` stops at (set by :func:`generation_config_for`): its beam search keeps
    max(2, 1 + this) x K candidates a step."""
    eos = generation_config._eos_token_tensor
    return 1 if eos is None else int(eos.numel())
