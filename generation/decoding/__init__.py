"""Constrained paraphrase decoding (ParaBank §2.3): a plain module, usable without Django.

    from generation.decoding import load_model, decode
    m = load_model("generation/demo/model")            # ModelFolderError if missing / not a checkpoint
    m = load_model("Qwen/Qwen2.5-0.5B-Instruct", prompt_template="paraphrase-chat")   # decoder-only: prompted
    [r] = decode(m, ["How often do earthquakes occur?"],
                 [{"positive": [["today"]], "negative": [["often"]], "bos_avoid": [["How"]]}], beam=5, nbest=2)
    decode(m, sources, options=DecodeOptions(beam=5, nbest=2, batch_size=64))   # the same options, as one value
    r.outputs   # [{"text", "tokens", "score", "satisfied"}]; r.unsatisfiable, r.reason

``score`` is the sum of the log-probabilities of the output tokens (EOS included) under the model, as the
search used them (after the model's own logits processors) - not length-normalised. Outputs are ordered
as the beam search ranks them (score / length ** length_penalty, Hugging Face's ``sequences_scores``), or, with
``keep_facts``, those that change fewest of the source's numbers and names first (each gains ``fact_changes``),
with ``avoid_copies`` the copies and near-copies of the reference and the outputs holding a non-word, then its
extensions, last (each gains ``avoided``) and the outputs the length limit ended or that loop dropped (a beam of
nothing else gives none: ``RAN_ON``), and with a ``backward`` model by forward plus backward NLL per token (each
gains ``backward_nll``), or by dissimilarity with ``rerank_dissimilar``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ..decode_options import DecodeOptions, DecodeOptionsError
from ..english import glued_forms, glued_to, runs_on
from ..words import words_of
from .backward import backward_nll
from .banned import build_negative_tables
from .batching import BatchChoice, default_batch_size
from .causal import prompt_batch
from .dba import beam_search
from .loading import LoadedModel, ModelFolderError, from_objects, load_model
from .positive import build_positive_tables
from .rerank import COPIES, RAN_ON, rerank_dissimilar, rerank_faithful, word_levenshtein
from .stop_check import DecodingStopped, StopCheck, rate_limited
from .vocab import PhraseError, encode_phrase

__all__ = [
    "load_model",
    "from_objects",
    "decode",
    "DecodeOptions",
    "DecodeOptionsError",
    "DecodeResult",
    "BatchChoice",
    "default_batch_size",
    "LoadedModel",
    "ModelFolderError",
    "ConstraintError",
    "DecodingStopped",
    "StopCheck",
    "rate_limited",
    "normalise_constraints",
    "violations",
    "word_levenshtein",
    "rerank_dissimilar",
    "rerank_faithful",
    "backward_nll",
]


class ConstraintError(ValueError):
    """A constraint value that is not in the expected format."""


@dataclass
class DecodeResult:
    source: str
    outputs: list[dict] = field(default_factory=list)
    unsatisfiable: bool = False
    reason: str | None = None
    # hypotheses the final check removed: 0 but for a banned word run on by a token the search does not follow
    # ("wi" + "thJulia": banned.py's docstring)
    safety_net_dropped: int = 0

    def to_json(self) -> dict:
        d = {"source": self.source, "outputs": self.outputs, "unsatisfiable": self.unsatisfiable}
        if self.reason:
            d["reason"] = self.reason
        return d


def _phrases(value, key) -> list[list[str]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConstraintError(f"{key!r} must be a list of phrases (lists of words)")
    out = []
    for ph in value:
        if isinstance(ph, str):
            ph = [ph]
        if not isinstance(ph, list) or not all(isinstance(w, str) for w in ph):
            raise ConstraintError(f"{key!r}: every phrase must be a list of words, got {ph!r}")
        words = words_of(" ".join(ph))
        if not words:
            raise ConstraintError(f"{key!r}: empty phrase {ph!r}")
        out.append(words)
    return out


def written_positives(c: dict | None) -> list[str]:
    """The positive phrases of a (valid) constraint value as written, punctuation kept, in the order of
    :func:`normalise_constraints`'s ``positive``: what the decoder spells (``vocab.encode_phrase``)."""
    phrases = (c or {}).get("positive") or []
    return [" ".join([ph] if isinstance(ph, str) else ph).strip() for ph in phrases]


def normalise_constraints(c: dict | None) -> dict:
    """{"positive", "negative", "bos_avoid"} -> lists of word lists (words as ``\\w+`` runs); extra keys ignored."""
    c = c or {}
    if not isinstance(c, dict):
        raise ConstraintError("a constraint value must be a JSON object")
    return {k: _phrases(c.get(k), k) for k in ("positive", "negative", "bos_avoid")}


def _contains(seq: list[str], sub: list[str]) -> bool:
    n = len(sub)
    return any(seq[i : i + n] == sub for i in range(len(seq) - n + 1))


def _contains_banned(seq: list[str], sub: list[str]) -> bool:
    """``sub`` in ``seq`` word for word, its first word also glued after a function word and its last before
    one ("tothe" holds "the": ``english.glued_to``, the one rule); a single word also run on into no English
    word ("withJulia" holds "with": ``english.runs_on``)."""
    n = len(sub)
    if n == 1:  # the common case (every diverse ban, most systems'): one set of spellings, read once
        banned = sub[0]
        forms = glued_forms(banned)
        return any(word == banned or word in forms or runs_on(word, banned) for word in seq)
    return any(
        all(seq[i + j] == sub[j] or glued_to(seq[i + j], sub[j], before=j == 0, after=j == n - 1) for j in range(n))
        for i in range(len(seq) - n + 1)
    )


def banned_phrases(c: dict) -> list[list[str]]:
    """The negative phrases the search blocks: each as given, and with its first word glued after, and its last
    glued before, a common function word (``english.glued_forms``: "tothe", "theof" for "the"), so that the
    decoder does not write what :func:`violations` would then refuse."""
    out = list(c["negative"])
    for p in c["negative"]:
        out += [[g, *p[1:]] for g in sorted(glued_forms(p[0], after=len(p) == 1))]
        if len(p) > 1:
            out += [[*p[:-1], g] for g in sorted(glued_forms(p[-1], before=False))]
    return out


def violations(text: str, c: dict) -> list[str]:
    """Whole-word check of one output against normalised constraints (case-sensitive as given); a banned word
    glued to a function word, or a banned single word run on into no English word, counts as the banned word."""
    words = words_of(text)
    bad = [f"missing {' '.join(p)!r}" for p in c["positive"] if not _contains(words, p)]
    bad += [f"contains banned {' '.join(p)!r}" for p in c["negative"] if _contains_banned(words, p)]
    bad += [f"starts with {' '.join(p)!r}" for p in c["bos_avoid"] if words[: len(p)] == p]
    return bad


def _conflict(c: dict) -> str | None:
    for p in c["positive"]:
        for n in c["negative"]:
            if _contains(p, n):
                return f"required {' '.join(p)!r} contains banned {' '.join(n)!r}"
    return None


def _by_length(tok, sources: list[str], todo: list[int]) -> list[int]:
    """``todo`` ordered by source length in tokens, longest first (ties in input order). Why: a batch
    decodes until its last sentence is done and pads every source to its longest; sentences of similar
    lengths tend to finish together and need little padding. Results still come back in input order."""
    lengths = [len(ids) for ids in tok([sources[i] for i in todo], truncation=True)["input_ids"]]
    return [i for _, i in sorted(zip(lengths, todo), key=lambda x: -x[0])]


@torch.no_grad()
def decode(
    loaded: LoadedModel,
    sources: list[str],
    constraints: list[dict | None] | None = None,
    *,
    options: DecodeOptions | None = None,
    references: list[str] | None = None,
    backward: LoadedModel | None = None,
    stats: dict | None = None,
    should_stop: StopCheck | None = None,
    **changes: Any,
) -> list[DecodeResult]:
    """Decode ``sources`` (one constraint value per source, None = unconstrained) as ``options`` say
    (:class:`DecodeOptions`; ``changes``: fields of it by name, ``decode(m, s, beam=4)``, on top of
    ``options`` or the defaults). Never returns an output violating its constraints. ``references``: what
    ``keep_facts`` and ``rerank_dissimilar`` measure against (default: the sources). ``backward``: a model that
    reads each source back from its outputs (the paraphraser itself, or one trained the other way), whose NLL
    per token each output gains as ``backward_nll`` and whose sum with the forward NLL per token orders the
    whole beam (``rerank.rerank_faithful``); with ``avoid_copies`` a source whose beam held nothing better than a
    copy is searched again with its first word avoided at the start (:func:`start_avoided`). ``stats["steps"]``, if
    given, grows by the decoder steps run over all batches (see ``dba.beam_search``). A ``batch_size`` of None
    follows the device (``batching.default_batch_size``). ``should_stop``: asked before every decoder step, True raises
    ``DecodingStopped`` (``stop_check``: a cancelled job's batch ends at once); None, the default: never."""
    options = options or DecodeOptions()
    if changes:
        options = options.replace(**changes)
    options = options.on_device(loaded.device.type)
    if options.dtype is not None and options.dtype != loaded.dtype:
        raise DecodeOptionsError(f"the options ask for dtype {options.dtype}, the model is in {loaded.dtype}")
    search = functools.partial(
        _search, loaded, options=options, backward=backward, stats=stats, should_stop=should_stop
    )
    refs = [references[i] if references and references[i] else s for i, s in enumerate(sources)]
    results = search(sources, constraints, references=refs)
    if options.avoid_copies:
        _retry_copies(search, results, sources, constraints or [None] * len(sources), refs, options)
    return results


def start_avoided(constraint: dict | None, reference: str) -> tuple[dict, str] | None:
    """(``constraint`` with the reference's first word also avoided at the start of the output, as written,
    lower-cased and capitalised: ParaBank's positional system 32; that word), or None when the reference has no
    word or the constraint already avoids it."""
    words = words_of(reference)
    if not words:
        return None
    c = normalise_constraints(constraint)
    forms = [[f] for f in dict.fromkeys((words[0], words[0].lower(), words[0].capitalize()))]
    more = [f for f in forms if f not in c["bos_avoid"]]
    return ({**c, "bos_avoid": [*c["bos_avoid"], *more]}, words[0]) if more else None


def _retry_copies(
    search: Callable[..., list[DecodeResult]],
    results: list[DecodeResult],
    sources: list[str],
    constraints: list[dict | None],
    refs: list[str],
    options: DecodeOptions,
) -> None:
    """``avoid_copies``' second search: a source whose whole beam held nothing better than a copy or near-copy
    (its first output one) is searched again with its reference's first word avoided at the start
    (:func:`start_avoided`), and the outputs of that search that are none of what ``avoid_copies`` puts back go
    first, each with ``"start_avoided"`` (the word). Why: a paraphraser asked for its input's rarest word (system
    29) or for nothing gives the input back where nothing else in the beam is more likely; a new opening is the
    cheapest way out of it, and only those sources pay for a second search."""
    again = [
        (i, found)
        for i, r in enumerate(results)
        if r.outputs
        and r.outputs[0].get("avoided") in COPIES
        and (found := start_avoided(constraints[i], refs[i])) is not None
    ]
    if not again:
        return
    redone = search(
        [sources[i] for i, _ in again], [found[0] for _, found in again], references=[refs[i] for i, _ in again]
    )
    for (i, (_, word)), r in zip(again, redone):
        fresh = [{**o, "start_avoided": word} for o in r.outputs if o.get("avoided") is None]
        if fresh:
            outs = (fresh + results[i].outputs)[: options.nbest]
            results[i].outputs = rerank_dissimilar(outs, refs[i]) if options.rerank_dissimilar else outs


def _search(
    loaded: LoadedModel,
    sources: list[str],
    constraints: list[dict | None] | None,
    *,
    options: DecodeOptions,
    references: list[str],
    backward: LoadedModel | None,
    stats: dict | None,
    should_stop: StopCheck | None,
) -> list[DecodeResult]:
    """One search of ``sources`` as :func:`decode` describes it (``options`` already on the model's device;
    ``references``: one per source, what the outputs are measured against)."""
    batch_size = options.batch_size or default_batch_size(loaded, options).size
    # keep_facts, avoid_copies and a backward model choose among every finished hypothesis of the beam, not among
    # the n-best the search would stop at
    faithful = options.keep_facts or options.avoid_copies or backward is not None
    searched = options.replace(nbest=options.beam) if faithful else options
    if constraints is None:
        constraints = [None] * len(sources)
    if len(constraints) != len(sources):
        raise ValueError("one constraint value per source is needed")
    norm = [normalise_constraints(c) for c in constraints]
    results: list[DecodeResult | None] = [None] * len(sources)
    todo = []
    pos_ids = {}
    for i, (s, c) in enumerate(zip(sources, norm)):
        why = _conflict(c)
        if why is None:
            try:
                written = written_positives(constraints[i])
                pos_ids[i] = [
                    encode_phrase(loaded.tokenizer, loaded.vocab, p, w) for p, w in zip(c["positive"], written)
                ]
            except PhraseError as exc:
                why = str(exc)
        if why is not None:
            results[i] = DecodeResult(source=s, unsatisfiable=True, reason=why)
        else:
            todo.append(i)
    tok = loaded.tokenizer
    if len(todo) > batch_size:  # batches of sources of similar lengths (as CTranslate2 makes them)
        todo = _by_length(tok, sources, todo)
    # the EOS tokens that spell nothing (a line break that ends an output stays in its text)
    ending = {loaded.vocab.eos_id} | {i for i in loaded.vocab.eos_ids if not loaded.vocab.surfaces[i]}
    stopped = {loaded.vocab.eos_id, *loaded.vocab.eos_ids}  # an output that ends in none of these was cut off
    for k in range(0, len(todo), batch_size):
        idx = todo[k : k + batch_size]
        if loaded.causal:  # a decoder-only model continues each source's prompt (causal.py, generation/prompts.py)
            input_ids, am = prompt_batch(loaded, [sources[i] for i in idx])
        else:
            enc = tok([sources[i] for i in idx], return_tensors="pt", padding=True, truncation=True)
            input_ids = enc["input_ids"].to(loaded.device)
            am = enc["attention_mask"].to(loaded.device)
        pos = build_positive_tables([pos_ids[i] for i in idx], loaded.device)
        neg = build_negative_tables(
            loaded.vocab,
            [[(p, False) for p in banned_phrases(norm[i])] + [(p, True) for p in norm[i]["bos_avoid"]] for i in idx],
            loaded.device,
        )
        rows = beam_search(
            loaded, input_ids, am, options=searched, pos=pos, neg=neg, stats=stats, should_stop=should_stop
        )
        for i, hyps in zip(idx, rows):
            outs, dropped, cut_off = [], [], []
            for ids, raw, _normed in hyps:
                body = [t for t in ids if t not in ending]
                text = tok.decode(body, skip_special_tokens=True, clean_up_tokenization_spaces=False).strip()
                bad = violations(text, norm[i])
                if bad:  # safety net: the search gets here only for a run-on it does not follow
                    dropped.append(bad)
                    continue
                if not ids or ids[-1] not in stopped:  # the length limit ended it
                    cut_off.append(len(outs))
                outs.append({"text": text, "tokens": tok.convert_ids_to_tokens(body), "score": raw, "satisfied": True})
            ref = references[i]
            if faithful:
                outs = rerank_faithful(
                    outs,
                    ref,
                    keep_facts=options.keep_facts,
                    avoid_copies=options.avoid_copies,
                    cut_off=cut_off,
                    backward=None if backward is None else functools.partial(backward_nll, backward, target=sources[i]),
                )
            outs = outs[: options.nbest]
            if options.rerank_dissimilar:
                outs = rerank_dissimilar(outs, ref)
            r = DecodeResult(source=sources[i], outputs=outs, safety_net_dropped=len(dropped))
            if not outs:
                r.unsatisfiable = True
                if dropped:
                    r.reason = f"only violating hypotheses found: {dropped[0]}"
                elif hyps and options.avoid_copies:  # its whole beam dropped (rerank.DROPPED)
                    r.reason = RAN_ON
                else:
                    r.reason = "no hypothesis satisfying every constraint within max_length"
            results[i] = r
    return results
