"""``manage.py paraphrase``: constrained decoding of an input file into JSON lines.

    python manage.py paraphrase --model DIR|ORG/NAME --input FILE --output OUT.jsonl [--constraints FILE.jsonl]
        [--beam K] [--nbest N] [--stop auto|beam|nbest] [--batch-size B] [--max-length L] [--length-penalty LP]
        [--device cpu|cuda] [--dtype float32|float16|bfloat16] [--int8]
        [--keep-facts] [--backward-model M2] [--rerank-dissimilar] [--system N --idf IDF.tsv [--seed S] [--ppdb FILE]]
        [--prompt-template paraphrase-chat|paraphrase-plain|FILE]

``FILE``: one input per line, ``source`` or ``source<TAB>reference``. ``--constraints``: one JSON object per
input line, as printed by ``manage.py constraints`` (``positive``, ``negative``, ``bos_avoid``; other keys
ignored); absent = unconstrained. ``--system N --idf IDF.tsv`` instead selects each line's constraints from
its reference (the source when there is none) with ParaBank system N. ``OUT.jsonl``: one object per input
line, in order::

    {"source": ..., "outputs": [{"text": ..., "tokens": [...], "score": <sum log-prob>, "satisfied": true}, ...],
     "unsatisfiable": false}

(``"reason"`` is added when ``unsatisfiable`` is true; then ``outputs`` is empty. ``--keep-facts``: the beam's
outputs that change fewest of the reference's numbers and names come first, each with its ``"fact_changes"``;
``generation.facts``. ``--backward-model M2``: the whole beam ordered by forward plus backward NLL per token, each
output with its ``"backward_nll"``, the source read back from it; M2 may be ``--model`` itself.)

``--diverse [--negative-sets 5] [--samples 30] [--top-k 10] [--ban-fraction X] [--ban-spread 0] [--clusters 8]
[--keep 5] [--backward-model M2] [--max-nll 3.5] [--seed N]``: ParaBank 2's mode instead of constrained beam search
(``generation.decoding.diverse``; ``--seed``, ``--max-length``, ``--batch-size`` (inputs decoded together),
``--device``, ``--dtype`` and, for a decoder-only ``--model``, ``--prompt-template`` apply too; a decoder-only
``--backward-model`` reads the source after the candidate's prompt: ``--model``'s template when it is the same
folder, else its own default). Each line's ``outputs`` are the kept paraphrases in rank order::

    {"source": ..., "outputs": [{"text": ..., "score": <NLL per token>, "rank": 1, "cluster": 3,
     "banned": ["budget", "Budget"]}, ...], "candidates": {"sampled": 150, "finished": ..., ...}}

The options are one ``generation.paraphrase_params.ParaphraseParams`` (the decoding ones a
``generation.decode_options.DecodeOptions``, ``--diverse``'s a ``DiverseOptions``), checked before anything is
read (``--dtype float16`` / ``bfloat16``: a GPU's only; ``--batch-size`` left out: 32 on the CPU, from the free
memory on a GPU). Every constraint line is checked before the model loads (errors name the line). Inputs
are decoded in blocks of ``16 x`` the batch size lines, each block's rows written as it finishes with a progress line on
stderr; ``OUT.jsonl`` appears (atomically) only once every line is decoded. Corpora too big for one
process go through ``manage.py generate`` (chunked, resumable Celery jobs).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from generation.decode_options import NOT_JOB_OPTIONS, DecodeOptionsError
from generation.model_source import ModelFolderError, model_folder
from generation.paraphrase_params import ParaphraseParams, from_options
from generation.prompts import (
    PromptTemplate,
    PromptTemplateError,
    check_chat_template,
    resolve as resolve_prompt,
)
from infra.textfiles import TextFileError, atomic_write, read_lines
from jobs.params import ParamsError, add_arguments, field_names


def _one_line(message: object) -> str:
    return " ".join(str(message).split())


def _text_lines(path: str) -> list[str]:
    """The file's lines (plain or gzipped, strict UTF-8: see infra/textfiles.py), endings stripped."""
    return [line.rstrip("\n") for _, line in read_lines(path, newline=None)]


def read_inputs(path: str) -> tuple[list[str], list[str | None]]:
    sources, refs = [], []
    for line in _text_lines(path):
        src, _, ref = line.partition("\t")
        sources.append(src)
        refs.append(ref or None)
    return sources, refs


# Beams (inputs x beam) up to which the CPU decodes on one intra-op thread: a step's operations on so few rows
# take microseconds, and OpenMP's hand-offs between threads cost more (two sentences decoded in 0.3 s on one
# thread, 3-8 s on two, on a busy 2-core machine: issue 37; docs/performance.md "Command start-up").
ONE_THREAD_ROWS = 32
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def small_input_threads(n_inputs: int, beam: int, device: str) -> int | None:
    """1 (intra-op threads) for a small CPU decoding, else None (torch's default); None too when the user chose
    the threads (``OMP_NUM_THREADS`` and friends are theirs)."""
    if device != "cpu" or any(os.environ.get(v) for v in THREAD_VARIABLES):
        return None
    return 1 if n_inputs * beam <= ONE_THREAD_ROWS else None


BLOCK_BATCHES = 16  # batches per written block: progress and bounded memory, full batches on the device


def read_constraints(path: str, n_inputs: int) -> list[dict]:
    """One constraint object per input line, each checked now so that a bad line fails before decoding."""
    from generation.decoding import ConstraintError, normalise_constraints

    lines = _text_lines(path)
    if len(lines) != n_inputs:
        raise CommandError(
            f"{path}: {len(lines)} constraint lines for {n_inputs} input lines (one per input line needed)"
        )
    out = []
    for no, line in enumerate(lines, 1):
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CommandError(f"{path}: line {no}: malformed JSON ({exc.msg})") from None
        if not isinstance(value, dict):
            raise CommandError(f"{path}: line {no}: expected a JSON object")
        try:
            normalise_constraints(value)
        except ConstraintError as exc:
            raise CommandError(_one_line(f"{path}: line {no}: {exc}")) from None
        out.append(value)
    return out


def system_constraints(
    system_number: str, idf_path: str, seed: int = 0, ppdb_path: str | None = None
) -> Callable[[str, str | None], dict]:
    """``constraints_for_input(source, reference) -> dict`` for ParaBank system N (Tab. 3)."""
    from generation.constraints.idf import read_idf_tsv
    from generation.constraints.sets import select_constraints
    from generation.constraints.systems import UnknownSystem, get_system

    try:
        system = get_system(system_number)
    except UnknownSystem as exc:
        raise CommandError(_one_line(exc)) from None
    if system.kind == "ppdb" and not ppdb_path:
        raise CommandError(f"system {system.number} ({system.name}) needs --ppdb FILE")
    try:
        idf = read_idf_tsv(idf_path)
    except (OSError, ValueError) as exc:
        raise CommandError(_one_line(f"unreadable IDF file: {exc}")) from None
    ppdb = None
    if ppdb_path:
        from generation.constraints.ppdb import PpdbError, open_ppdb

        try:
            ppdb = open_ppdb(ppdb_path)
        except PpdbError as exc:
            raise CommandError(_one_line(exc)) from None

    def constraints_for_input(source: str, reference: str | None) -> dict:
        return select_constraints(system, reference or source, idf, seed=seed, ppdb=ppdb).to_json()

    return constraints_for_input


def model_check(model: str, template: PromptTemplate | None = None) -> None:
    """A ``--model`` that is not there, or a chat ``template`` for a model without one, said before torch and
    transformers load (issue 37: a lookup error costs no model library)."""
    try:
        check_chat_template(template, model_folder(model))
    except ModelFolderError as exc:
        raise CommandError(_one_line(exc)) from None
    except PromptTemplateError as exc:
        raise CommandError(_one_line(f"--prompt-template: {exc}")) from None


def backward_is_model(params: ParaphraseParams) -> bool:
    """Whether ``--backward-model`` names ``--model``'s own folder (then its weights are read the other way, loaded
    once); a folder that is not there is said here, before torch loads."""
    if not params.backward_model:
        return False
    try:
        return model_folder(params.backward_model) == model_folder(params.model)
    except ModelFolderError as exc:
        raise CommandError(_one_line(f"--backward-model: {exc}")) from None


def load_backward(params: ParaphraseParams, model, same: bool, dtype: str | None):
    """The ``--backward-model`` (None without one): the model itself read the other way (its template too), or
    another (a decoder-only one: its own prompt), on the model's device."""
    from generation.decoding import load_model

    try:
        if not params.backward_model or same:
            return model if same else None
        return load_model(params.backward_model, device=model.device.type, dtype=dtype)
    except (ModelFolderError, PromptTemplateError) as exc:
        raise CommandError(_one_line(f"--backward-model: {exc}")) from None
    except DecodeOptionsError as exc:
        raise CommandError(exc.option_message) from None


def write_diverse(command: BaseCommand, params: ParaphraseParams, template: PromptTemplate | None) -> None:
    """``--diverse``: ParaBank 2's ranked paraphrases of every input line into OUT.jsonl (atomically), one
    block of inputs at a time with a progress line (``generation.decoding.diverse``); a decoder-only
    ``--model`` samples continuations of its ``template``'s prompt (None: its default)."""
    options, diverse = params.decode, params.diverse_options  # (with --diverse, a DiverseOptions)
    same = backward_is_model(params)
    from generation.decoding import load_model  # torch, transformers: from here on
    from generation.decoding.diverse import diverse_decode

    try:
        sources, refs = read_inputs(params.input)
    except (OSError, TextFileError) as exc:
        raise CommandError(_one_line(f"cannot read --input: {exc}")) from None
    if options.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise CommandError("--device cuda: no CUDA device is available")
    try:
        model = load_model(params.model, device=options.device, dtype=options.dtype, prompt_template=template)
    except ModelFolderError as exc:
        raise CommandError(_one_line(exc)) from None
    except PromptTemplateError as exc:
        raise CommandError(_one_line(f"--prompt-template: {exc}")) from None
    except DecodeOptionsError as exc:
        raise CommandError(exc.option_message) from None
    backward = load_backward(params, model, same, options.dtype)
    block = BLOCK_BATCHES * diverse.inputs_per_batch(model.device.type)
    out, started, short = Path(params.output), time.monotonic(), 0
    with atomic_write(out, "w", encoding="utf-8") as fh:
        for k in range(0, len(sources), block):
            try:
                results = diverse_decode(
                    model, sources[k : k + block], refs[k : k + block], options=diverse, backward=backward
                )
            except DecodeOptionsError as exc:  # (refused before anything is written)
                raise CommandError(exc.option_message) from None
            for r in results:
                fh.write(json.dumps(r.to_json(), ensure_ascii=False) + "\n")
            short += sum(len(r.outputs) < diverse.keep for r in results)
            done = k + len(results)
            if done < len(sources):
                rate = done / max(time.monotonic() - started, 1e-9)
                command.stderr.write(f"{done}/{len(sources)} inputs decoded ({rate:.2f}/s)")
    command.stderr.write(f"{len(sources)} inputs decoded, {short} with fewer than {diverse.keep} outputs -> {out}")


class Command(BaseCommand):
    help = "Decode every input line under its lexical constraints into OUT.jsonl."

    def add_arguments(self, parser) -> None:
        """The options are ParaphraseParams' fields, in its order, but --backward-model (a second model) sits
        before --max-nll, the threshold it scores for, and the decoder's process knobs (--int8,
        --rerank-dissimilar: a run's, never a job's) come last."""
        names = [n for n in field_names(ParaphraseParams) if n not in (*NOT_JOB_OPTIONS, "backward_model")]
        names.insert(names.index("max_nll"), "backward_model")
        for name in (*names, *NOT_JOB_OPTIONS):  # (one at a time: their order, not the class's)
            add_arguments(parser, ParaphraseParams, only=(name,))

    def handle(self, *args, **o) -> None:
        try:
            params = from_options(o)
        except ParamsError as exc:  # (ParaphraseParamsError, DecodeOptionsError: said as the options)
            raise CommandError(exc.option_message) from None
        try:  # (a template file that is not there is said before torch loads)
            template = resolve_prompt(params.prompt_template)
        except PromptTemplateError as exc:
            raise CommandError(_one_line(f"--prompt-template: {exc}")) from None
        if params.diverse:
            model_check(params.model, template)
            write_diverse(self, params, template)
            return
        try:
            sources, refs = read_inputs(params.input)
        except (OSError, TextFileError) as exc:
            raise CommandError(_one_line(f"cannot read --input: {exc}")) from None
        if params.constraints:
            try:
                cons = read_constraints(params.constraints, len(sources))
            except (OSError, TextFileError) as exc:
                raise CommandError(_one_line(f"cannot read --constraints: {exc}")) from None
        elif params.system:
            pick = system_constraints(params.system, params.idf, params.seed, params.ppdb)
            cons = [pick(s, r) for s, r in zip(sources, refs)]
        else:
            cons = [None] * len(sources)
        model_check(params.model, template)  # every input and constraint line checked first, then the model's place
        same = backward_is_model(params)
        from generation.decoding import decode, default_batch_size, load_model  # torch, transformers: from here on

        options = params.decode
        if options.device == "cuda":
            import torch

            if not torch.cuda.is_available():
                raise CommandError("--device cuda: no CUDA device is available")
        try:
            model = load_model(params.model, device=options.model_device, dtype=options.dtype, prompt_template=template)
            options = options.on_device(model.device.type)
        except ModelFolderError as exc:
            raise CommandError(_one_line(exc)) from None
        except PromptTemplateError as exc:
            raise CommandError(_one_line(f"--prompt-template: {exc}")) from None
        except DecodeOptionsError as exc:  # (half precision where the default device turned out a CPU)
            raise CommandError(exc.option_message) from None
        backward = load_backward(params, model, same, options.dtype)
        if options.int8:
            from generation.decoding import fast_step

            try:  # (the int8 weights are made now, once: the decoder's own checks, before any output)
                lean = fast_step.for_model(model.model, int8=True)
            except ValueError as exc:
                raise CommandError(_one_line(f"--int8: {exc}")) from None
            if lean is None:
                raise CommandError("--int8 needs a Marian or BART model (the lean decoder step)")
        threads = small_input_threads(len(sources), options.beam, model.device.type)
        if threads is not None:
            import torch

            torch.set_num_threads(threads)
        if options.batch_size is None:
            options = options.replace(batch_size=default_batch_size(model, options).size)
        out = Path(params.output)
        block = BLOCK_BATCHES * options.batch_size
        n_unsat, started = 0, time.monotonic()
        # interrupted or failed: no half-written file left beside OUT
        with atomic_write(out, "w", encoding="utf-8") as fh:
            for k in range(0, len(sources), block):
                results = decode(
                    model,
                    sources[k : k + block],
                    cons[k : k + block],
                    options=options,
                    references=refs[k : k + block],
                    backward=backward,
                )
                for r in results:
                    fh.write(json.dumps(r.to_json(), ensure_ascii=False) + "\n")
                n_unsat += sum(r.unsatisfiable for r in results)
                done = k + len(results)
                if done < len(sources):
                    rate = done / max(time.monotonic() - started, 1e-9)
                    self.stderr.write(f"{done}/{len(sources)} inputs decoded ({rate:.1f}/s)")
        self.stderr.write(f"{len(sources)} inputs decoded, {n_unsat} unsatisfiable -> {out}")
