"""A diverse ``generate`` chunk's work (ParaBank 2's mode, ``generation.decoding.diverse``): what the kind's
``run_chunk`` calls for a job with ``diverse``.

Each reference is decoded by :func:`generation.decoding.diverse.diverse_decode` (its negative sets drawn from
the reference; the input is the reference, or a bitext's source; a decoder-only model continues the input's
prompt under the job's stored ``prompt_template``), several per batch (the job's
``batch_size``, else ``DiverseOptions.inputs_per_batch``'s rule: each is ``negative_sets x samples`` rows). Its kept
outputs become the record's candidates in rank order, rank r as system ``"r<r>"``
(``generation.constraints.systems.rank_system``), in the record format of ``generation.models.Resource`` with three keys
more::

    {"text": "...", "nll": 0.83,            # forward NLL per token under the model (EOS included)
     "systems": ["r2"],                    # the rank, one per candidate (the engine merges identical texts)
     "constraints": {"r2": {"positive": [], "negative": [["budget"], ["Budget"]], "bos_avoid": []}},
     "diverse_score": 1.41,                # the engine's score: nll, plus the backward NLL with a backward model
     "cluster": 3,                         # its k-medoids cluster (0, the reference's, never yields one)
     "banned": ["budget", "Budget"]}       # the negative set it was sampled under

``diverse_score``, not ``score``: a scored shard's ``score`` is the regressor's predicted similarity
(``scoring.scored.job``), written over whatever the candidate had. With a backward model ``nll`` is the score
less the backward NLL per token of the input given the candidate (``diverse.backward_nll`` of the kept
outputs, rounded as the score is), so that it means what a constraint system's ``nll`` means. The same seed
and device give the same records (each input's draws come from a hash of the seed and its text), so a chunk
that runs again writes the same shard.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from infra.shards import batched
from jobs.registry import ProgressFn

from ..constraints.systems import rank_system
from ..decode_options import CPU_DIVERSE_ROWS, CUDA_DIVERSE_INPUTS, DiverseOptions
from ..model_source import model_fingerprint
from ..nlp import load_pipeline
from .params import job_decode_options, job_diverse_options
from .pause import pause_between_batches
from .pipeline import BATCH_RULE, ChunkTally, job_backward, loaded_model

DEVICE_INPUTS_RULE = (
    f"inputs per batch follow the device: {CUDA_DIVERSE_INPUTS} on a GPU, on the CPU as many as fill "
    f"{CPU_DIVERSE_ROWS} rows (at least one), each negative_sets x samples rows (generation/decode_options.py)"
)
SCORE_DIGITS = 4  # (as the engine rounds its scores)


@dataclass
class DiverseSetup:
    """What every batch of a diverse chunk uses, loaded once per chunk: the models (``backward`` None without
    one; the forward model itself when it is the same folder), the options, the inputs per batch and the rule
    that chose them, spaCy's tokenizer (a reference's ``length``), the decoder's stop check (``should_stop``:
    ``.cancel.job_stop_check``; None: never)."""

    params: dict[str, Any]
    is_bitext: bool
    model: Any
    backward: Any
    options: DiverseOptions
    inputs_per_batch: int
    batch_rule: str
    nlp: Any
    should_stop: Callable[[], bool] | None = None


def diverse_setup(
    params: dict[str, Any], is_bitext: bool, should_stop: Callable[[], bool] | None = None
) -> DiverseSetup:
    decode = job_decode_options(params)
    options = job_diverse_options(params)
    model = loaded_model(params["model"], decode.device, decode.dtype, params.get("prompt_template"))
    if model_fingerprint(params["model"]) != params["model_sha256"]:
        raise RuntimeError(f"the weights in {params['model']!r} changed since the job started")
    decode.on_device(model.device.type)  # (half precision asked of a CPU: refused)
    backward = job_backward(params, model, decode.dtype)
    per_batch = options.inputs_per_batch(model.device.type)
    return DiverseSetup(
        params=params,
        is_bitext=is_bitext,
        model=model,
        backward=backward,
        options=options,
        inputs_per_batch=per_batch,
        batch_rule=BATCH_RULE if options.batch_size else DEVICE_INPUTS_RULE,
        nlp=load_pipeline(tagger=False),
        should_stop=should_stop,
    )


def candidate_entries(outputs: list[dict]) -> list[dict[str, Any]]:
    """A reference's kept outputs (rank order) as shard candidates (the module docstring's format): ``nll`` is
    the forward NLL, the diverse score less the backward model's part (``backward_nll``, computed once, by the
    sampler)."""
    out = []
    for o in outputs:
        b = o.get("backward_nll", 0.0)
        system = rank_system(o["rank"])
        negative = [[w] for w in o["banned"]]
        out.append(
            {
                "text": o["text"],
                "nll": round(o["score"] - b, SCORE_DIGITS),
                "systems": [system],
                "constraints": {system: {"positive": [], "negative": negative, "bos_avoid": []}},
                "diverse_score": o["score"],
                "cluster": o["cluster"],
                "banned": list(o["banned"]),
            }
        )
    return out


def diverse_records(
    records: Iterable[dict[str, Any]], setup: DiverseSetup, progress: ProgressFn, total: int, tally: ChunkTally
) -> Iterator[dict[str, Any]]:
    """A diverse chunk's resource records, batch by batch (``progress`` in references after each; the job's
    ``pause_per_batch`` after each); ``tally`` counts the outputs per rank, the references with fewer than
    ``keep`` (``fewer_than_keep``) and the engine's counts of what became of the samples."""
    from ..decoding.diverse import diverse_decode

    options, pause = setup.options, float(setup.params.get("pause_per_batch") or 0)
    for r in range(1, options.keep + 1):
        tally.per_system.setdefault(rank_system(r), {"outputs": 0})
    tally.diverse.setdefault("fewer_than_keep", 0)
    progress(0, total)
    for batch in batched(records, setup.inputs_per_batch):
        refs = [r["reference"] for r in batch]
        sources = [(r.get("source") or "") if setup.is_bitext else r["reference"] for r in batch]
        results = diverse_decode(
            setup.model, sources, refs, options=options, backward=setup.backward, should_stop=setup.should_stop
        )
        for record, doc, result in zip(batch, setup.nlp.pipe(refs), results):
            candidates = candidate_entries(result.outputs)
            for c in candidates:
                tally.per_system[c["systems"][0]]["outputs"] += 1
            for key, n in result.counts.items():
                tally.diverse[key] = tally.diverse.get(key, 0) + n
            tally.diverse["fewer_than_keep"] += len(candidates) < options.keep
            tally.references += 1
            tally.pairs += len(candidates)
            yield {
                "ref_index": record["i"],
                "reference": record["reference"],
                "source": record.get("source") or "",
                "length": sum(1 for t in doc if not t.is_space),
                "candidates": candidates,
                "no_constraints": [],
            }
        pause_between_batches(pause, progress, tally.references, max(total, tally.references))
        progress(tally.references, max(total, tally.references))
