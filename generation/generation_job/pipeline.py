"""A ``generate`` chunk's work, window by window: what the kind's ``run_chunk`` calls.

A chunk tags its references with spaCy, selects each system's constraints (:mod:`generation.constraints.sets`;
on a GPU for the next window in a background thread while the current one decodes: :func:`prepared_ahead`),
decodes every distinct (input, constraints) once, and merges identical outputs per reference keeping which
systems produced them (candidates ordered by nll, then text). Outputs that are empty strings are dropped
(counted). The model is loaded once per process (:func:`loaded_model`) and checked against the weights hash
the plan recorded, so that every chunk (and a resumed job) decodes with the same weights.
"""

from __future__ import annotations

import contextlib
import json
import queue
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from infra.shards import batched, read_jsonl_gz
from jobs.models import JobChunk
from jobs.registry import ProgressFn

from ..constraints.constraint_job import load_idf_table
from ..constraints.ppdb import open_ppdb
from ..constraints.sets import resolve_systems, select_for_all_systems, tag_sentences
from ..decode_options import DecodeOptions
from ..model_source import model_fingerprint, model_folder
from ..models import IdfTable
from ..nlp import load_pipeline
from .params import job_decode_options
from .pause import pause_between_batches

WINDOW = 512  # references tagged, selected and decoded together inside a chunk

_MODEL_LOCK = threading.Lock()
_MODEL: dict[str, tuple[tuple[str, str | None, str | None, str], Any]] = {}  # role -> (key, model)
# Windows prepared (tagged, constraints selected) ahead of the one decoding, in a background thread: the
# bounded queue's size; 0: prepare each window only when it is its turn (the sequential version). None:
# 1 where the model is on a GPU, 0 on the CPU, where the decoder itself keeps the cores and the GIL busy
# (bench/generate_chunk.py measured the overlapped chunk slower there: bench/results/generate-chunk-*.txt).
PREPARE_AHEAD: int | None = None
# While a chunk overlaps, the interpreter hands the GIL over every this many seconds (Python's default:
# 0.005). Why: the decoding thread gives the GIL up whenever it waits for the GPU and must get it back as
# soon as the GPU is done; with 5 ms slices it could wait longer than a decoding step takes.
PREPARE_SWITCH_INTERVAL = 0.0002
BATCH_RULE = "given by the job's batch_size"
DEVICE_BATCH_RULE = (
    "follows the device: 32 on the CPU; on a GPU the largest power of two <= half the usable memory over "
    "one sentence's estimated bytes, at most 512 (generation/decoding/batching.py)"
)


def loaded_model(
    path: str,
    device: str | None,
    dtype: str | None = None,
    prompt_template: dict | None = None,
    *,
    role: str = "forward",
):
    """The decoder's model, loaded once per process (one model kept per ``role`` at a time: the diverse mode's
    ``backward`` one beside it); a decoder-only one with the job's ``prompt_template``."""
    from ..decoding import load_model  # (torch: loaded by the worker that decodes, not by the plan)

    key = (str(model_folder(path)), device, dtype, json.dumps(prompt_template, sort_keys=True))
    with _MODEL_LOCK:
        held = _MODEL.get(role)
        if held is None or held[0] != key:
            if device == "cuda":
                import torch

                if not torch.cuda.is_available():
                    raise RuntimeError("device 'cuda' was asked for but this worker has no CUDA device")
            _MODEL.pop(role, None)
            held = _MODEL[role] = (key, load_model(key[0], device=device, dtype=dtype, prompt_template=prompt_template))
        return held[1]


def release_model(role: str) -> None:
    """Let go of the model kept for ``role`` (a diverse job's backward model, once a chunk needs none): why, it
    would hold memory that a GPU's batch size is computed from."""
    with _MODEL_LOCK:
        _MODEL.pop(role, None)


def chunk_records(chunk: JobChunk) -> Iterator[dict[str, Any]]:
    if "references" in chunk.params:
        return iter(chunk.params["references"])
    return read_jsonl_gz(chunk.params["key"])


@dataclass
class ChunkSetup:
    """What every window of a chunk uses, loaded once per chunk in the worker's own thread (the only one that
    reads the database): the systems, IDF values, PPDB index, spaCy pipeline, model and decoding options
    (``batch_size`` resolved: the job's, or the device's rule, ``batch`` says which); ``should_stop``, the
    decoder's stop check (``.cancel.job_stop_check``: a cancel ends a batch within a step; None: never)."""

    params: dict[str, Any]
    is_bitext: bool
    systems: list
    idf: Any
    ppdb: Any
    nlp: Any
    model: Any
    options: DecodeOptions
    batch: Any  # decoding.BatchChoice
    should_stop: Callable[[], bool] | None = None
    backward: Any = None  # decoding.LoadedModel: the job's backward model, or None


def job_backward(params: dict[str, Any], model: Any, dtype: str | None) -> Any:
    """The job's backward model (None without one), its weights checked against the hash the job stored: the
    model itself read the other way when it is the same folder (loaded once), else loaded on the model's device."""
    path = params.get("backward_model")
    if path and model_fingerprint(path) != params.get("backward_model_sha256"):
        raise RuntimeError(f"the weights in {path!r} changed since the job started")
    backward = None
    if path and model_folder(path) == model_folder(params["model"]):
        backward = model
    elif path:
        backward = loaded_model(path, model.device.type, dtype, role="backward")
    if backward is None or backward is model:
        release_model("backward")
    return backward


def chunk_setup(params: dict[str, Any], is_bitext: bool, should_stop: Callable[[], bool] | None = None) -> ChunkSetup:
    from ..decoding import BatchChoice, default_batch_size

    options = job_decode_options(params)
    if not params.get("backward_model"):  # (a previous job's backward model freed before this model loads)
        release_model("backward")
    model = loaded_model(params["model"], options.device, options.dtype, params.get("prompt_template"))
    if model_fingerprint(params["model"]) != params["model_sha256"]:
        raise RuntimeError(f"the weights in {params['model']!r} changed since the job started")
    options = options.on_device(model.device.type)
    backward = job_backward(params, model, options.dtype)
    if options.batch_size is None:
        batch = default_batch_size(model, options)
        options = options.replace(batch_size=batch.size)
    else:
        batch = BatchChoice(options.batch_size, BATCH_RULE)
    ppdb = open_ppdb(params["ppdb"]) if params.get("ppdb") else None
    return ChunkSetup(
        params=params,
        is_bitext=is_bitext,
        systems=resolve_systems(params["systems"]),
        idf=load_idf_table(IdfTable.objects.get(pk=params["idf_table"])),
        ppdb=ppdb,
        nlp=load_pipeline(tagger=True),
        model=model,
        options=options,
        batch=batch,
        should_stop=should_stop,
        backward=backward,
    )


@dataclass
class PreparedWindow:
    """A window's CPU work before decoding: its output records (candidates still empty), per-system counts
    so far, and each distinct (input, constraints, reference) to decode once, in decoding order (``unique``;
    ``jobs``: (record position, system, constraints, index of its input in ``inputs``)). The reference is what
    ``keep_facts`` and ``rerank_dissimilar`` compare an output with: a bitext corpus's English reference, not its
    source in the other language ("Praze" is no form of "Prague"); empty where it is the input itself."""

    out_records: list[dict[str, Any]]
    counts: dict[str, dict[str, int]]
    jobs: list[tuple[int, str, dict, int]]
    inputs: dict[tuple[str, str, str], int]
    unique: list[tuple[str, str, str]]


def prepare_window(records: list[dict[str, Any]], setup: ChunkSetup) -> PreparedWindow:
    """Tag a window's references with spaCy and select every system's constraints (no database, no model:
    this runs in the background thread while the previous window decodes)."""
    numbers = [str(s.number) for s in setup.systems]
    tagged = tag_sentences([r["reference"] for r in records], nlp=setup.nlp)
    counts = {n: {"outputs": 0, "no_constraints": 0, "unsatisfiable": 0, "empty": 0} for n in numbers}
    out_records, jobs = [], []
    inputs: dict[tuple[str, str, str], int] = {}
    seed = setup.params["seed"]
    for pos, (record, sentence) in enumerate(zip(records, tagged)):
        out_records.append(
            {
                "ref_index": record["i"],
                "reference": record["reference"],
                "source": record.get("source") or "",
                "length": len(sentence.tokens),
                "candidates": [],
                "no_constraints": [],
            }
        )
        source = record.get("source") if setup.is_bitext else record["reference"]
        for selected in select_for_all_systems(sentence, setup.idf, seed=seed, ppdb=setup.ppdb, systems=setup.systems):
            system = str(selected.system)
            if not selected.is_constraint_set:
                out_records[-1]["no_constraints"].append(system)
                counts[system]["no_constraints"] += 1
                continue
            value = selected.to_json()
            cons = {k: value[k] for k in ("positive", "negative", "bos_avoid")}
            key = (source, json.dumps(cons, sort_keys=True), record["reference"] if setup.is_bitext else "")
            jobs.append((pos, system, cons, inputs.setdefault(key, len(inputs))))
    # Each distinct (input, constraints, reference) is decoded once, shortest inputs first (less padding per batch).
    unique = sorted(inputs, key=lambda k: (len(k[0]), inputs[k]))
    return PreparedWindow(out_records, counts, jobs, inputs, unique)


def decode_window(
    window: PreparedWindow, setup: ChunkSetup, progress: ProgressFn
) -> tuple[list[dict[str, Any]], dict[str, dict[str, int]]]:
    """Decode a prepared window and merge its outputs into resource records (one per reference) and per-system
    counts. ``progress(decoded, to_decode)`` counts distinct (input, constraints) decodings, after each batch."""
    from ..decoding import decode

    unique, counts = window.unique, window.counts
    results: dict[int, Any] = {}
    batch, pause = setup.options.batch_size, float(setup.params.get("pause_per_batch") or 0)
    for k in range(0, len(unique), batch):
        part = unique[k : k + batch]
        decoded = decode(
            setup.model,
            [s for s, _, _ in part],
            [json.loads(c) for _, c, _ in part],
            references=[r or None for _, _, r in part],
            options=setup.options,
            backward=setup.backward,
            should_stop=setup.should_stop,
        )
        for key, result in zip(part, decoded):
            results[window.inputs[key]] = result
        pause_between_batches(pause, progress, min(k + batch, len(unique)), len(unique))
        progress(min(k + batch, len(unique)), len(unique))
    merged: list[dict[str, dict]] = [{} for _ in window.out_records]
    for pos, system, cons, index in window.jobs:
        result = results[index]
        if result.unsatisfiable:
            counts[system]["unsatisfiable"] += 1
            continue
        for output in result.outputs:
            text = output["text"]
            if not text.strip():
                counts[system]["empty"] += 1
                continue
            counts[system]["outputs"] += 1
            nll = -float(output["score"])
            entry = merged[pos].setdefault(text, {"text": text, "nll": nll, "systems": [], "constraints": {}})
            entry["nll"] = min(entry["nll"], nll)
            if system not in entry["systems"]:
                entry["systems"].append(system)
                entry["constraints"][system] = cons
    order = {str(s.number): i for i, s in enumerate(sorted(setup.systems, key=lambda s: s.number))}
    for record, entries in zip(window.out_records, merged):
        for entry in entries.values():
            entry["systems"].sort(key=order.__getitem__)
        record["candidates"] = sorted(entries.values(), key=lambda e: (e["nll"], e["text"]))
        record["no_constraints"].sort(key=order.__getitem__)
    return window.out_records, counts


_END = object()


def prepared_ahead(items: Iterator[Any], prepare: Callable[[Any], Any], ahead: int) -> Iterator[Any]:
    """``prepare(item)`` for each item, in order. With ``ahead`` > 0 a background thread prepares the next
    items while the caller works on the current one, at most ``ahead`` of them waiting in a bounded queue
    (and one more being prepared): why, a GPU decodes while the CPU tags and selects the next window
    instead of idling through it. An exception in the thread is raised here, at the item it failed on;
    closing this generator (the caller stopped: a cancelled job) stops the thread and waits for it."""
    if ahead <= 0:
        for item in items:
            yield prepare(item)
        return
    ready: queue.Queue = queue.Queue(maxsize=ahead)
    stop = threading.Event()

    def put(entry) -> bool:
        while not stop.is_set():
            try:
                ready.put(entry, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def work() -> None:
        try:
            for item in items:
                if stop.is_set() or not put((prepare(item), None)):
                    return
            put((_END, None))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread, raised there
            put((None, exc))

    thread = threading.Thread(target=work, name="generate-prepare", daemon=True)
    thread.start()
    try:
        while True:
            value, error = ready.get()
            if error is not None:
                raise error
            if value is _END:
                return
            yield value
    finally:
        stop.set()
        thread.join()


def prepare_ahead_for(device_type: str) -> int:
    """How many windows a chunk prepares ahead of the one decoding (``PREPARE_AHEAD``)."""
    if PREPARE_AHEAD is not None:
        return PREPARE_AHEAD
    return 1 if device_type == "cuda" else 0


@contextlib.contextmanager
def short_gil_slices(seconds: float) -> Iterator[None]:
    """``sys.setswitchinterval`` at most ``seconds`` inside the block, as it was after it."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(min(before, seconds))
    try:
        yield
    finally:
        sys.setswitchinterval(before)


@dataclass
class ChunkTally:
    """What a chunk's windows decoded so far: references, merged pairs, per-system counts (and the diverse
    mode's counts of its samples: ``generation.decoding.diverse.DiverseResult``'s, summed)."""

    references: int = 0
    pairs: int = 0
    per_system: dict[str, dict[str, int]] = field(default_factory=dict)
    diverse: dict[str, int] = field(default_factory=dict)


def decoded_windows(
    records: Iterable[dict[str, Any]],
    setup: ChunkSetup,
    progress: ProgressFn,
    total: int,
    tally: ChunkTally,
    ahead: int,
) -> Iterator[dict[str, Any]]:
    """A chunk's resource records, window by window (memory stays flat on a 100,000-reference shard), each
    window prepared ``ahead`` (:func:`prepared_ahead`) and decoded; ``tally`` counts them, ``progress``
    reports references. Outputs are those of the sequential version (each window's preparation is the same
    whenever it runs)."""
    progress(0, total)
    windows = prepared_ahead(batched(records, WINDOW), lambda w: prepare_window(w, setup), ahead)
    try:
        for window in windows:
            window_size = len(window.out_records)

            def window_progress(decoded: int, of: int, n=window_size) -> None:
                progress(tally.references + (n * decoded // of if of else 0), max(total, tally.references + n))

            out, window_counts = decode_window(window, setup, window_progress)
            for system, n in window_counts.items():
                row = tally.per_system.setdefault(system, dict.fromkeys(n, 0))
                for key, value in n.items():
                    row[key] += value
            tally.references += len(out)
            tally.pairs += sum(len(r["candidates"]) for r in out)
            yield from out
    finally:
        windows.close()
