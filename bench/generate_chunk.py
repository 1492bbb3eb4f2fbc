"""A whole ``generate`` chunk's rate against the decoder's own rate on the same inputs (demo model by default).

A chunk reads its shard, tags every reference with spaCy, selects each system's constraints, decodes every
distinct (input, constraints) once and writes its candidate shard. Its rate can only approach the decoder's
when the CPU parts run while the decoder works: the chunk prepares the next window (tagging and selection)
in a background thread (``generation_job.pipeline.PREPARE_AHEAD``). This measures, in one run and on the same
references:

- ``decoder alone``: the chunk's own ``decode`` calls on inputs prepared beforehand (batches as the chunk
  makes them), timed alone;
- ``preparation alone``: tagging and selection of every window, timed alone;
- ``chunk, sequential`` (``PREPARE_AHEAD = 0``) and ``chunk, overlapped`` (the default): ``run_chunk``
  from reading the shard to writing it.

Each figure is references per second, the best of ``--repeat`` runs with the rows interleaved; the ratios
are against the decoder alone (goal on a GPU worker: the overlapped chunk >= 0.8). It also checks that both
chunk versions write the same shard. ``--window`` sets the references per window (the job's is 512, on
shards of up to 100,000 references: hundreds of windows; the first window's preparation is the only one
nothing overlaps, so a few windows per run keep that share near what a real shard has). Everything lives
in a throwaway folder (SQLite, local storage); nothing leaves the machine.

    .venv/bin/python bench/generate_chunk.py [--sentences 256] [--window 32] [--systems 17,28,32]
        [--beam 4] [--model DIR|tiny] [--max-length L] [--device cpu|cuda] [--dtype D] [--batch-size B]
        [--threads N] [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from demo_corpus import DEMO_MODEL, ROOT, corpus_import, demo_sentences, throwaway_django


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=256)
    parser.add_argument("--window", type=int, default=32, help="references per window (the job's: 512)")
    parser.add_argument("--systems", default="17,28,32")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument(
        "--model",
        default=str(DEMO_MODEL),
        help="a seq2seq folder or hub id (default: the demo model); 'tiny': the decoder tests' tiny random "
        "Marian (1+1 layers, d 32; the corpus's sentences of up to 100 characters), a decoder far faster than "
        "the CPU parts, as a GPU's is",
    )
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--dtype", default=None, help="float32, float16, bfloat16 (half precision: GPU only)")
    parser.add_argument("--batch-size", type=int, default=None, help="default: the device's (the job's default)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)

    var = throwaway_django("paraforge-bench-chunk-", PARAFORGE_INLINE_WITHOUT_WORKER="1")
    import torch

    from generation.decode_options import DecodeOptions
    from generation.decoding import decode
    from generation.generation_job import KIND, pipeline
    from generation.generation_job.kind import run_chunk
    from generation.generation_job.params import GenerateParams, generation_params
    from infra.shards import batched
    from jobs.execution import job_start

    if args.threads:
        torch.set_num_threads(args.threads)
    # (the tiny model's 128 positions: at most a piece per character, so 100 characters fit)
    sentences = demo_sentences(args.sentences, max_chars=100 if args.model == "tiny" else None)
    corpus_import(var, sentences, shard_size=len(sentences))
    from generation.models import Corpus

    corpus = Corpus.objects.get(name="bench")
    if args.model == "tiny":
        sys.path.insert(0, str(ROOT / "tests" / "generation"))
        from conftest import build_marian  # the decoder tests' tiny models

        args.model = str(build_marian(var / "tiny"))
        shown = "tiny (the decoder tests' random Marian, 1+1 layers, d 32)"
    else:
        shown = args.model
    decoding = DecodeOptions(
        beam=args.beam, max_length=args.max_length, batch_size=args.batch_size, device=args.device, dtype=args.dtype
    )
    params = generation_params(
        GenerateParams(corpus=corpus.pk, model=args.model, systems=args.systems.split(","), decode=decoding)
    )
    job = job_start(kind=KIND, params=params, enqueue=False)
    job.refresh_from_db()
    [chunk] = list(job.chunks.all())
    pipeline.WINDOW = args.window

    def noop(done: int, total: int) -> None:
        pass

    setup = pipeline.chunk_setup(job.params, False)
    records = list(pipeline.chunk_records(chunk))
    windows = [pipeline.prepare_window(w, setup) for w in batched(records, args.window)]  # (warms spaCy's caches)
    n_inputs = sum(len(w.unique) for w in windows)

    def sync() -> None:
        if setup.model.device.type == "cuda":
            torch.cuda.synchronize()

    def decoder_alone() -> float:
        batch = setup.options.batch_size
        sync()
        t = time.perf_counter()
        for w in windows:
            for k in range(0, len(w.unique), batch):
                part = w.unique[k : k + batch]
                decode(setup.model, [s for s, _ in part], [json.loads(c) for _, c in part], options=setup.options)
        sync()
        return time.perf_counter() - t

    def preparation_alone() -> float:
        t = time.perf_counter()
        for w in batched(records, args.window):
            pipeline.prepare_window(w, setup)
        return time.perf_counter() - t

    shards = {}

    def chunk_run(ahead: int) -> float:
        pipeline.PREPARE_AHEAD = ahead
        sync()
        t = time.perf_counter()
        result = run_chunk(job, chunk, noop)
        sync()
        shards[ahead] = result["sha256"]
        return time.perf_counter() - t

    chunk_run(1)  # warm-up: the model's first batches, the lean step's packed weights
    rows = {
        "decoder alone": decoder_alone,
        "preparation alone": preparation_alone,
        "chunk, sequential": lambda: chunk_run(0),
        "chunk, overlapped": lambda: chunk_run(1),
    }
    times: dict[str, list[float]] = {k: [] for k in rows}
    for _ in range(args.repeat):
        for label, fn in rows.items():
            times[label].append(fn())
    best = {k: min(v) for k, v in times.items()}
    n = len(records)
    print(
        f"model={shown} device={setup.model.device.type} dtype={setup.model.dtype}"
        f" torch_threads={torch.get_num_threads()} cpus={os.cpu_count()} load={os.getloadavg()[0]:.2f}"
        f"\nreferences={n} systems={args.systems} beam={args.beam} max_length={args.max_length}"
        f" window={args.window} windows={len(windows)}"
        f" distinct inputs={n_inputs} batch={setup.batch.size} ({setup.batch.rule}) best of {args.repeat}"
    )
    print(f"\n  {'row':22s} {'seconds':>8s} {'refs/s':>8s} {'rate / decoder alone':>21s}")
    for label, seconds in best.items():
        print(f"  {label:22s} {seconds:8.2f} {n / seconds:8.2f} {best['decoder alone'] / seconds:21.2f}")
    print(
        f"\npreparation alone / decoder alone (time): {best['preparation alone'] / best['decoder alone']:.2f}"
        f"; overlapped / sequential chunk (time): {best['chunk, overlapped'] / best['chunk, sequential']:.2f}"
        f"\nsame shard written by both chunk versions: {shards[0] == shards[1]}"
        f"\ngoal on a GPU worker: overlapped chunk >= 0.8 of the decoder alone"
        f" (here: {best['decoder alone'] / best['chunk, overlapped']:.2f})"
    )


if __name__ == "__main__":
    main()
