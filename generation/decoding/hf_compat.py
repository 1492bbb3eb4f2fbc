"""Every private ``transformers`` API the decoder relies on, in one place.

The decoder reproduces ``generate``'s beam search step by step, so it needs the generation config exactly
as ``generate`` prepares it and the logits processors exactly as ``generate`` builds them. Transformers
offers no public call for either: these wrappers are what to check (and adapt) when upgrading it.
"""
from __future__ import annotations

import copy

import torch


def generation_config_for(model, beam: int, max_length: int, length_penalty: float, early_stopping,
                          device: torch.device):
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
        return model._get_logits_processor(generation_config=generation_config, input_ids_seq_length=1,
                                           encoder_input_ids=input_ids, device=input_ids.device,
                                           model_kwargs={})
    except TypeError:
        return model._get_logits_processor(generation_config=generation_config, input_ids_seq_length=1,
                                           encoder_input_ids=input_ids)


def pad_token_id(generation_config) -> int | None:
    """The pad token ``generate`` fills finished rows with (set by :func:`generation_config_for`)."""
    pad = generation_config._pad_token_tensor
    return None if pad is None else int(pad.item())
