"""The one decoder step interface (issue 49): what ``dba.beam_search`` and ``diverse.sample_batch`` call.

A search never calls the model itself. It asks :func:`decoder_step` for the step of its model, then

    step = decoder_step(loaded, input_ids, fast=options.fast_step, int8=options.int8)
    state = step.start(step.encode(input_ids, attention_mask), attention_mask, max_length)
    logits = state.step(first_tokens, 0)      # [B, V]: once per sentence (input)
    state.repeat(K)                           # K rows per sentence from here on
    while ...:
        logits = state.step(seqs[:, t], t)    # [B * K, V]
        ...                                   # the search picks tokens, moves and drops rows
        state.reorder(src_rows)               # or state.select(src_rows, kept_sentences)

Three steps implement it:

* :class:`fast_step.FastStep` (Marian, BART: the decoder's arithmetic as plain functional calls on a static
  key/value cache; the default on the CPU);
* :class:`HFSeq2SeqStep` (any other encoder-decoder, or the fast step turned off): the Hugging Face model's
  own forward with ``past_key_values``;
* :class:`causal.CausalDecoder` (decoder-only models: the prompt is the first step).

The contract (:class:`DecoderStep`, :class:`DecoderState`):

* ``encode(input_ids, attention_mask)``: the encoder's output [B, S, d] for the B sentences, or None for a
  decoder-only model (its prompt runs as the first step). ``start(encoder_hidden, attention_mask,
  max_length)``: a fresh state for one call, B rows, one per sentence. ``rows_leave_exactly``: whether
  rows may leave the batch (``select``) without changing a bit of the other rows' logits (a sampler drops
  its ended rows only then).
* The state owns every cache (self-attention keys and values, the cross-attention's, the encoder output,
  the masks): the caller holds only token ids. Rows are sentence-major: row r belongs to sentence
  r // (rows per sentence), and the search only moves a row within its sentence.
* ``step(tokens [rows] long, position int) -> logits [rows, V]`` (the model's raw logits, any float dtype:
  the caller takes the log-softmax in float32): the next token's scores after feeding ``tokens`` at
  ``position`` (0 for the first; a decoder-only state feeds its prompts there instead and ignores
  ``tokens``). Each call writes the tokens' keys and values into the state's cache.
* ``repeat(times)``: every row ``times`` times in a row (after the first step: a sentence's K beams or R
  samples share its first step).
* ``reorder(rows [rows'] long)``: row i continues from old row ``rows[i]`` (the beams' moves; the fast
  step also takes fewer rows here while every sentence keeps some).
* ``select(self_rows [rows'] long, kept_sentences [B'] long | None)``: keep only the rows ``self_rows``
  (moves folded in) of the sentences ``kept_sentences`` (positions in the current layout; None: every
  sentence keeps rows, only some of its rows leave).
* ``place_cross_rows(places [rows] | None, width)``: run the cross-attention as if every sentence still had
  ``width`` rows, row r at ``places[r]`` (fast_step; a no-op where the rows' products do not depend on the
  block, a ValueError where the step cannot).
* ``history(seqs [rows, L], cur_len) -> [rows, n]``: what ``generate``'s logits processors read: the
  tokens so far (a decoder-only model's: its prompt and continuation).

Who chooses: :func:`decoder_step`, the one rule for both callers (``DecodeOptions.fast_step``,
``PARAFORGE_FAST_STEP``, ``int8``; ``fast_step.default_on``).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch

from . import fast_step
from .causal import CausalDecoder
from .hf_compat import reorder_self_attention, repeat_rows, run_encoder, select_rows


@runtime_checkable
class DecoderState(Protocol):
    """One call's decoder state (the module's docstring: shapes, who owns the cache)."""

    def step(self, tokens: torch.Tensor, position: int) -> torch.Tensor: ...

    def repeat(self, times: int) -> None: ...

    def reorder(self, rows: torch.Tensor) -> None: ...

    def select(self, self_rows: torch.Tensor, kept_sentences: torch.Tensor | None) -> None: ...

    def place_cross_rows(self, places: torch.Tensor | None, width: int = 0) -> None: ...

    def history(self, seqs: torch.Tensor, cur_len: int) -> torch.Tensor: ...


@runtime_checkable
class DecoderStep(Protocol):
    """A model's step, made once per model (or per call); :meth:`start` makes one call's state."""

    @property
    def rows_leave_exactly(self) -> bool: ...

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor | None: ...

    def start(
        self, encoder_hidden: torch.Tensor | None, attention_mask: torch.Tensor, max_length: int
    ) -> DecoderState: ...


class HFSeq2SeqStep:
    """Hugging Face's own seq2seq decoder step: the model's forward with ``past_key_values`` (T5 and every
    encoder-decoder the fast step does not reproduce, or the fast step turned off)."""

    rows_leave_exactly = False  # (a matrix product's last bits depend on its row count: every row stays)

    def __init__(self, model):
        self.model = model

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return run_encoder(self.model, input_ids, attention_mask)

    def start(self, encoder_hidden: torch.Tensor, attention_mask: torch.Tensor, max_length: int) -> HFSeq2SeqState:
        return HFSeq2SeqState(self.model, encoder_hidden, attention_mask)


class HFSeq2SeqState:
    """One call's state of :class:`HFSeq2SeqStep`: the model's cache (``DynamicCache`` halves), the encoder
    output and its mask, one row per hypothesis (the encoder output repeated per row, as ``generate`` does)."""

    def __init__(self, model, encoder_hidden: torch.Tensor, attention_mask: torch.Tensor):
        from transformers.modeling_outputs import BaseModelOutput

        self.model = model
        self.enc = BaseModelOutput(last_hidden_state=encoder_hidden)
        self.mask = attention_mask
        self.cache = None
        self.sentences = encoder_hidden.shape[0]

    def step(self, tokens: torch.Tensor, position: int) -> torch.Tensor:
        kw = {} if self.cache is None else {"past_key_values": self.cache}
        out = self.model(
            encoder_outputs=self.enc,
            attention_mask=self.mask,
            decoder_input_ids=tokens[:, None],
            use_cache=True,
            return_dict=True,
            **kw,
        )
        self.cache = out.past_key_values
        return out.logits[:, -1, :]

    def repeat(self, times: int) -> None:
        repeat_rows(self.cache, times)
        self.enc.last_hidden_state = self.enc.last_hidden_state.repeat_interleave(times, dim=0)
        self.mask = self.mask.repeat_interleave(times, dim=0)

    def reorder(self, rows: torch.Tensor) -> None:
        """The self-attention half only (a row's cross-attention half is its sentence's, the same for every
        row of the sentence: ``hf_compat.reorder_self_attention``)."""
        reorder_self_attention(self.cache, rows)

    def select(self, self_rows: torch.Tensor, kept_sentences: torch.Tensor | None) -> None:
        """The cross-attention half, encoder output and mask take each kept row's own row (the very tensors
        of the full batch): every row of the kept sentences, or ``self_rows`` where all sentences stay."""
        if kept_sentences is None:
            cross = self_rows
        else:
            per = self.enc.last_hidden_state.shape[0] // self.sentences
            cross = (kept_sentences[:, None] * per + torch.arange(per, device=kept_sentences.device)).view(-1)
            self.sentences = len(kept_sentences)
        select_rows(self.cache, self_rows, cross)
        self.enc.last_hidden_state = self.enc.last_hidden_state.index_select(0, cross)
        self.mask = self.mask.index_select(0, cross)

    def place_cross_rows(self, places: torch.Tensor | None, width: int = 0) -> None:
        if places is not None:
            raise ValueError("Hugging Face's step runs the rows it has (rows_leave_exactly is False)")

    def history(self, seqs: torch.Tensor, cur_len: int) -> torch.Tensor:
        return seqs[:, :cur_len]


def decoder_step(loaded, input_ids: torch.Tensor, *, fast: bool | None = None, int8: bool = False) -> DecoderStep:
    """The step of ``loaded``'s model for a batch of ``input_ids`` (a decoder-only model's prompts: its
    step is made per batch). ``fast`` (``DecodeOptions.fast_step``): the fast step where the model is one it
    reproduces; None: ``fast_step.default_on`` (the CPU, or ``PARAFORGE_FAST_STEP``), or ``int8``. ``int8``
    without a fast step for the model raises ValueError."""
    model = loaded.model
    if fast is None:
        fast = fast_step.default_on(loaded.device) or int8
    step = fast_step.for_model(model, int8=int8) if fast else None
    if int8 and step is None:
        raise ValueError("int8 runs on the lean decoder step only: a Marian or BART model, fast_step not off")
    if loaded.causal:
        return CausalDecoder(model, input_ids)
    return step if step is not None else HFSeq2SeqStep(model)


def start_token(loaded, gen_cfg) -> int:
    """The token every row's first step feeds: the decoder start token of an encoder-decoder model, EOS for
    a decoder-only one (a placeholder column before the continuation: never fed, never returned)."""
    if loaded.causal:
        return loaded.vocab.eos_id
    start = gen_cfg.decoder_start_token_id
    if start is None:
        start = loaded.model.config.decoder_start_token_id
    if isinstance(start, (list, tuple)):
        start = start[0]
    return int(start)
