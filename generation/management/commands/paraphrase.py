"""``manage.py paraphrase``: constrained decoding of an input file into JSON lines.

    python manage.py paraphrase --model DIR|ORG/NAME --input FILE --output OUT.jsonl [--constraints FILE.jsonl]
        [--beam K] [--nbest N] [--stop auto|beam|nbest] [--batch-size B] [--max-length L] [--length-penalty LP]
        [--device cpu|cuda] [--dtype float32|float16|bfloat16] [--int8]
        [--rerank-dissimilar] [--system N --idf IDF.tsv [--seed S] [--ppdb FILE]]

``FILE``: one input per line, ``source`` or ``source<TAB>reference``. ``--constraints``: one JSON object per
input line, as printed by ``manage.py constraints`` (``positive``, ``negative``, ``bos_avoid``; other keys
ignored); absent = unconstrained. ``--system N --idf IDF.tsv`` instead selects each line's constraints from
its reference (the source when there is none) with ParaBank system N. ``OUT.jsonl``: one object per input
line, in order::

    {"source": ..., "outputs": [{"text": ..., "tokens": [...], "score": <sum log-prob>, "satisfied": true}, ...],
     "unsatisfiable": false}

(``"reason"`` is added when ``unsatisfiable`` is true; then ``outputs`` is empty.)

The decoding options are one ``generation.decode_options.DecodeOptions``, checked before anything is read
(``--dtype float16`` / ``bfloat16``: a GPU's only; ``--batch-size`` left out: 32 on the CPU, from the free
memory on a GPU). Every constraint line is checked before the model loads (errors name the line). Inputs
are decoded in blocks of ``16 x`` the batch size lines, each block's rows written as it finishes with a progress line on
stderr; ``OUT.jsonl`` appears (atomically) only once every line is decoded. Corpora too big for one
process go through ``manage.py generate`` (chunked, resumable Celery jobs).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from generation.decode_options import DecodeOptions, DecodeOptionsError, add_arguments
from generation.model_source import MODEL_HELP
from infra.textfiles import TextFileError, atomic_write, read_lines


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
    from generation.constraints import select_constraints
    from generation.idf import read_idf_tsv
    from generation.systems import UnknownSystem, get_system

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
        from generation.ppdb import PpdbError, open_ppdb

        try:
            ppdb = open_ppdb(ppdb_path)
        except PpdbError as exc:
            raise CommandError(_one_line(exc)) from None

    def constraints_for_input(source: str, reference: str | None) -> dict:
        return select_constraints(system, reference or source, idf, seed=seed, ppdb=ppdb).to_json()

    return constraints_for_input


class Command(BaseCommand):
    help = "Decode every input line under its lexical constraints into OUT.jsonl."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--model", required=True, help=MODEL_HELP)
        parser.add_argument("--input", required=True, help="one input per line: source or source<TAB>reference")
        parser.add_argument("--output", required=True, help="JSON lines, one per input line")
        parser.add_argument("--constraints", help="JSON lines, one constraint object per input line")
        parser.add_argument("--system", help="ParaBank system number (1-37): select constraints from each reference")
        parser.add_argument("--idf", help="IDF table (token<TAB>idf) for --system")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--ppdb", help="PPDB 2.0 lexical file for systems 35-37")
        add_arguments(parser)
        parser.add_argument(
            "--int8",
            action="store_true",
            help="CPU, Marian/BART: the decoder's products on dynamic int8 weights (faster; outputs "
            "can differ from float32's)",
        )
        parser.add_argument(
            "--rerank-dissimilar",
            action="store_true",
            help="order each n-best list by word Levenshtein distance to the reference (ties: score)",
        )

    def handle(self, *args, **o) -> None:
        from generation.decoding import ModelFolderError, decode, default_batch_size, load_model

        try:
            options = DecodeOptions.from_values(o)
        except DecodeOptionsError as exc:
            raise CommandError(exc.option_message) from None
        if o["constraints"] and o["system"]:
            raise CommandError("give either --constraints or --system, not both")
        if o["system"] and not o["idf"]:
            raise CommandError("--system needs --idf IDF.tsv")
        try:
            sources, refs = read_inputs(o["input"])
        except (OSError, TextFileError) as exc:
            raise CommandError(_one_line(f"cannot read --input: {exc}")) from None
        if o["constraints"]:
            try:
                cons = read_constraints(o["constraints"], len(sources))
            except (OSError, TextFileError) as exc:
                raise CommandError(_one_line(f"cannot read --constraints: {exc}")) from None
        elif o["system"]:
            pick = system_constraints(o["system"], o["idf"], o["seed"], o["ppdb"])
            cons = [pick(s, r) for s, r in zip(sources, refs)]
        else:
            cons = [None] * len(sources)
        if options.device == "cuda":
            import torch

            if not torch.cuda.is_available():
                raise CommandError("--device cuda: no CUDA device is available")
        try:
            model = load_model(o["model"], device=options.model_device, dtype=options.dtype)
            options = options.on_device(model.device.type)
        except ModelFolderError as exc:
            raise CommandError(_one_line(exc)) from None
        except DecodeOptionsError as exc:  # (half precision where the default device turned out a CPU)
            raise CommandError(exc.option_message) from None
        if options.int8:
            from generation.decoding import fast_step

            try:  # (the int8 weights are made now, once: the decoder's own checks, before any output)
                lean = fast_step.for_model(model.model, int8=True)
            except ValueError as exc:
                raise CommandError(_one_line(f"--int8: {exc}")) from None
            if lean is None:
                raise CommandError("--int8 needs a Marian or BART model (the lean decoder step)")
        if options.batch_size is None:
            options = options.replace(batch_size=default_batch_size(model, options).size)
        out = Path(o["output"])
        block = BLOCK_BATCHES * options.batch_size
        n_unsat, started = 0, time.monotonic()
        # interrupted or failed: no half-written file left beside OUT
        with atomic_write(out, "w", encoding="utf-8") as fh:
            for k in range(0, len(sources), block):
                results = decode(
                    model, sources[k : k + block], cons[k : k + block], options=options, references=refs[k : k + block]
                )
                for r in results:
                    fh.write(json.dumps(r.to_json(), ensure_ascii=False) + "\n")
                n_unsat += sum(r.unsatisfiable for r in results)
                done = k + len(results)
                if done < len(sources):
                    rate = done / max(time.monotonic() - started, 1e-9)
                    self.stderr.write(f"{done}/{len(sources)} inputs decoded ({rate:.1f}/s)")
        self.stderr.write(f"{len(sources)} inputs decoded, {n_unsat} unsatisfiable -> {out}")
