"""Decoder-only models (Llama, Qwen, Mistral, Gemma, Phi, GPT-2, ...) under the same beam search and DBA.

``dba.beam_search`` and ``diverse.sample_batch`` drive a model through one step interface (``step.py``:
``step(tokens, position) -> logits``, ``repeat(times)``, ``reorder(rows)``, ``select(rows, sentences)``, ...).
:class:`CausalState` offers it over the model's own forward (grouped-query attention, rotary or learned
positions, sliding windows: whatever the model family does, nothing re-implemented):

* the first step is the prompt pass: the B sentences' prompts, left-padded to one length, run once per
  sentence (not once per beam) with ``logits_to_keep=1``; its key/value cache is then copied K times
  (``repeat``), so a sentence's beams share the prompt's computation;
* every later step feeds one token per hypothesis with the attention mask so far (the prompt's padding
  zeros, then ones) and its position: ``generate``'s rule, position = cumulative mask - 1 (padding does not
  move a prompt's positions; each continuation token is one further);
* ``reorder``: the cache follows the beams' moves (``Cache.reorder_cache``; the mask and positions are a
  sentence's, the same for all its beams); ``select``: the rows of the sentences still searching.

The search sees only the continuation: its sequences start with a placeholder column (the model's EOS,
never returned) followed by the generated tokens, so positive constraints count only what the model wrote
and negative ones ban only there; a word of the prompt is neither. The logits processors of ``generate``
get what they get there: the prompt and the continuation (:meth:`CausalState.history`).
"""

from __future__ import annotations

import inspect

import torch


def prompt_batch(loaded, sources: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """The prompts of ``sources`` (``loaded.prompt``), tokenized as ``PromptTemplate.encode`` says (the rule
    fine-tuning uses too) and left-padded: (input_ids, attention_mask) [B, P]."""
    enc = loaded.prompt.encode(loaded.tokenizer, sources, return_tensors="pt", padding=True)
    return enc["input_ids"].to(loaded.device), enc["attention_mask"].to(loaded.device)


def takes_position_ids(model) -> bool:
    """Whether ``model``'s forward takes ``position_ids`` (every Hugging Face decoder-only family does; a model
    without them reads a left-padded row's positions from its mask itself or not at all)."""
    return "position_ids" in inspect.signature(model.forward).parameters


def left_padded_positions(attention_mask: torch.Tensor) -> torch.Tensor:
    """Each token's position in left-padded rows, ``generate``'s rule: cumulative mask - 1, padding 0 (padding
    does not move a row's positions)."""
    positions = attention_mask.long().cumsum(-1) - 1
    return positions.masked_fill_(attention_mask == 0, 0)


def takes_logits_to_keep(model) -> bool:
    """Whether ``model``'s forward computes its logits for the last positions only when asked (transformers'
    ``logits_to_keep``): a decoder-only model's LM head over its whole vocabulary is most of a step's work."""
    return "logits_to_keep" in inspect.signature(model.forward).parameters


class CausalDecoder:
    """A decoder-only model's step for one batch of prompts, made as ``fast_step.FastStep`` is made
    (``start`` gives the per-call state; there is no encoder output, so its first argument is unused)."""

    # each row's cache is its own (no cross-attention block shared by a sentence's rows): rows leave freely
    rows_leave_exactly = True

    def __init__(self, model, input_ids: torch.Tensor):
        self.model = model
        self.input_ids = input_ids
        self.takes_positions = takes_position_ids(model)
        self.takes_logits_to_keep = takes_logits_to_keep(model)

    def encode(self, _input_ids: torch.Tensor, _attention_mask: torch.Tensor) -> None:
        """No encoder: the prompts run as the first step."""
        return None

    def start(self, _encoder_hidden, attention_mask: torch.Tensor, max_length: int) -> CausalState:
        return CausalState(self, attention_mask, max_length)


class CausalState:
    """One search's decoder state: rows are hypotheses, sentence-major (B rows before ``repeat``)."""

    def __init__(self, dec: CausalDecoder, attention_mask: torch.Tensor, max_length: int):
        self.dec = dec
        self.prompt = dec.input_ids  # [rows, P]
        B, P = self.prompt.shape
        self.P = P
        # the mask for the whole search at once: the prompt's, then a one per generated token
        self.mask = torch.ones(B, P + max_length, dtype=attention_mask.dtype, device=attention_mask.device)
        self.mask[:, :P] = attention_mask
        self.positions = left_padded_positions(attention_mask)
        self.next_position = self.positions[:, -1:] + 1  # [rows, 1]
        self.cache = None
        self.generated = 0

    def _forward(self, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        kw = {"past_key_values": self.cache} if self.cache is not None else {}
        if self.dec.takes_positions:
            kw["position_ids"] = positions
        if self.dec.takes_logits_to_keep:
            kw["logits_to_keep"] = 1
        out = self.dec.model(input_ids=ids, attention_mask=mask, use_cache=True, return_dict=True, **kw)
        self.cache = out.past_key_values
        return out.logits[:, -1, :]

    def step(self, tokens: torch.Tensor, position: int) -> torch.Tensor:
        """Logits [rows, V] of the next token: at the first call the prompts' (``tokens`` is the search's
        placeholder column, not fed), after it one token per row appended."""
        if self.cache is None:
            return self._forward(self.prompt, self.mask[:, : self.P], self.positions)
        self.generated += 1
        mask = self.mask[:, : self.P + self.generated]
        logits = self._forward(tokens[:, None], mask, self.next_position)
        self.next_position = self.next_position + 1
        return logits

    def repeat(self, times: int) -> None:
        """Each sentence's row ``times`` times (its K beams share the prompt's cache)."""
        self.cache.batch_repeat_interleave(times)
        self.mask = self.mask.repeat_interleave(times, dim=0)
        self.next_position = self.next_position.repeat_interleave(times, dim=0)
        self.prompt = self.prompt.repeat_interleave(times, dim=0)

    def reorder(self, rows: torch.Tensor) -> None:
        """The cache for the hypotheses' new source ``rows`` (within their sentences: mask and positions
        stay)."""
        self.cache.reorder_cache(rows)

    def select(self, self_rows: torch.Tensor, _kept_sentences: torch.Tensor | None) -> None:
        """Keep the rows ``self_rows`` (the beams' moves folded in): those of the sentences still searching,
        or the rows still sampling."""
        self.cache.reorder_cache(self_rows)
        self.mask = self.mask.index_select(0, self_rows)
        self.next_position = self.next_position.index_select(0, self_rows)
        self.prompt = self.prompt.index_select(0, self_rows)

    def place_cross_rows(self, places: torch.Tensor | None, width: int = 0) -> None:
        """Nothing to place: no cross-attention, and a row's products are its own."""

    def history(self, seqs: torch.Tensor, cur_len: int) -> torch.Tensor:
        """What ``generate``'s logits processors read: each row's prompt and its continuation so far
        (``seqs`` [rows, L] with the placeholder column first)."""
        return torch.cat([self.prompt, seqs[:, 1:cur_len]], 1)
