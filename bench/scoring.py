"""Claim: scoring a pair costs little beside the embedding; how long a 300-million-pair resource takes.

Scores the same pairs three times in one run, on ONE core (torch and tokenizers limited to one thread):
lexical features only (the baseline), lexical features + the all-MiniLM-L6-v2 cosine (the default
recipe), and those + the ``train_regressor --recipe v2`` families, each followed by a fitted
300-iteration HistGradientBoostingRegressor's predict; then the v2 features again with recipe v3's
estimator (the mean of the tuned ridge, the gradient boosting and the RBF-kernel SVR, fitted on 4,000 rows,
about ParaBank's judged candidates, so that the SVR keeps a campaign's number of support vectors); and
recipe v4's features (v3's plus those of the encoder's STS-tuned top two layers, run on the same pass
through the bottom four) with that estimator. Prints pairs/second/core of each, their ratios,
and the wall time of a 300M-pair resource on N single-core workers (N = 1, 8, 64).

Pairs: STS-B dev sentence pairs when the file exists (a realistic length mix), else seeded random
sentences. ``--paraphrases-per-reference K`` reuses each reference for K paraphrases, as a resource
does (ParaBank: one reference, many systems' outputs): each distinct text is embedded once per batch,
so the embedding cost per pair falls.

    .venv/bin/python bench/scoring.py                         # 800 pairs, ~1-2 minutes on 2 cores
    .venv/bin/python bench/scoring.py --pairs 2000 --paraphrases-per-reference 5

``--device`` (device mode, what a GPU worker's scoring job runs): the encoder on that device in ``--dtype``
(float16 by default on cuda, ``--encode-batch`` texts per forward pass, 1024 by default there), through the
job's code path (``embeddings.encoding_on``). Prints wall-clock pairs/s of one process for the embedding
features alone, the lexical features alone (the worker's CPU side) and both (the default recipe's features),
then the differences against CPU float32 -- the scores of every scoring so far -- on the first
``--check-pairs`` of the same pairs in the same run: each embedding feature's largest absolute difference, and
for stand-in regressors fitted on the float32 features (ridge, gradient boosting and histogram gradient
boosting, as ``train_regressor`` builds them) the largest and mean score difference (0-100), the pairs over one
point and the Spearman correlation of the two score lists.

    .venv/bin/python bench/scoring.py --device cuda --dtype float16 --pairs 50000 --paraphrases-per-reference 4
    .venv/bin/python bench/scoring.py --device cpu --dtype float32 --pairs 200   # the mode itself, on a CPU

``--cpu-workers N`` (with ``--device``): the features' runs compute the lexical rows on N lexical processes, as
a scoring job with ``cpu_workers`` N does (``lexical_processes.cpu_workers_on``). Without ``--device`` (workers mode,
what a GPU worker's host cores buy): the lexical features of the same pairs, in batches of 2048 (a GPU job's),
with 1 process and with N, interleaved, best of ``--repeat``; the matrices are checked to be equal; wall-clock
rates and their ratio, the lexical processes' CPU per pair (from /proc) and the scoring process's own CPU per
pair in the N run; then the rest of a GPU chunk's CPU work, timed here on one core: the encoder's tokenizer in
1024-text batches and the token alignment (``embeddings.pair_rows``, on unit vectors of the texts' real token
counts); and from these a PROJECTION (not a GPU measurement) of one GPU worker process's pairs/s with N lexical
processes, assuming the GPU's forward passes are not the bound.

    .venv/bin/python bench/scoring.py --cpu-workers 2 --pairs 16000 --paraphrases-per-reference 4 --repeat 5
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STSB_DEV = Path("/work/shared/data/stsb/sts-dev.csv")
RESOURCE_PAIRS = 300_000_000
WORKERS = (1, 8, 64)


def load_pairs(n: int, per_reference: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    sentences: list[tuple[str, str]] = []
    if STSB_DEV.is_file():
        for line in STSB_DEV.read_text(encoding="utf-8").splitlines():
            f = line.split("\t")
            if len(f) >= 7:
                sentences.append((f[5], f[6]))
    else:
        words = "the a of to and in is was for on that with as by at from it an be this are have".split()
        for _ in range(n):
            sentences.append(
                (
                    " ".join(rng.choices(words, k=rng.randint(5, 30))) + ".",
                    " ".join(rng.choices(words, k=rng.randint(5, 30))) + ".",
                )
            )
    pairs = []
    i = 0
    while len(pairs) < n:
        ref = sentences[i % len(sentences)][0]
        for k in range(per_reference):
            para = sentences[(i + k) % len(sentences)][1] if k else sentences[i % len(sentences)][1]
            pairs.append({"reference": ref, "paraphrase": para, "nll": rng.uniform(1, 20)})
        i += per_reference
    return pairs[:n]


WALL: dict[str, float] = {}


def timed(fn, *args, **kwargs) -> tuple[float, object]:
    """CPU seconds of the call (one thread, so CPU time = core time, whatever else shares the machine);
    its wall seconds go to WALL."""
    cpu, wall = time.process_time(), time.perf_counter()
    out = fn(*args, **kwargs)
    WALL[getattr(fn, "__name__", "?") + str(len(WALL))] = time.perf_counter() - wall
    return time.process_time() - cpu, out


def hours(seconds: float) -> str:
    return f"{seconds / 3600:,.1f} h" if seconds < 72 * 3600 else f"{seconds / 86400:,.1f} d"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=800)
    parser.add_argument(
        "--batch",
        type=int,
        default=None,
        help="pairs per predict batch, as the scoring job (default 256; 2048 with --device cuda)",
    )
    parser.add_argument("--paraphrases-per-reference", type=int, default=1, dest="per_reference")
    parser.add_argument(
        "--device", choices=("cpu", "cuda"), default=None, help="device mode: the encoder on this device (docstring)"
    )
    parser.add_argument(
        "--dtype",
        choices=("float32", "float16", "bfloat16"),
        default=None,
        help="device mode: the encoder's dtype (default float16 on cuda, float32 on cpu)",
    )
    parser.add_argument(
        "--encode-batch",
        type=int,
        default=None,
        dest="encode_batch",
        help="device mode: texts per forward pass (default 1024 on cuda, the features' 64 on cpu)",
    )
    parser.add_argument(
        "--check-pairs",
        type=int,
        default=800,
        dest="check_pairs",
        help="device mode: pairs compared with CPU float32 (default 800)",
    )
    parser.add_argument("--threads", type=int, default=1, help="device mode: torch's CPU threads (default 1)")
    parser.add_argument(
        "--encoder",
        default=None,
        help="device mode: the sentence encoder (scoring.similarity.embeddings.encoder_resolve: all-mpnet-base-v2, "
        "a folder; default the packaged MiniLM)",
    )
    parser.add_argument(
        "--cpu-workers",
        type=int,
        default=None,
        dest="cpu_workers",
        help="processes computing the lexical features (a job's cpu_workers); alone: workers mode (docstring)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="workers mode: interleaved runs, best kept (default 3)")
    args = parser.parse_args()
    if args.cpu_workers is not None and args.cpu_workers < 1:
        parser.error("--cpu-workers must be at least 1")
    if args.device is not None or args.dtype is not None or args.encode_batch is not None or args.encoder:
        return device_main(args)
    if args.cpu_workers is not None:
        return workers_main(args)
    args.batch = args.batch or 256

    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.path.insert(0, str(ROOT))
    import numpy as np
    import torch

    torch.set_num_threads(1)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")  # scoring.regressor's models
    import django

    django.setup()
    from sklearn.ensemble import HistGradientBoostingRegressor

    from scoring.regressor import (
        RECIPES,
        candidate_estimators,
    )  # the recipes' estimators exactly as train_regressor builds them
    from scoring.similarity.embeddings import encoder
    from scoring.similarity.features import LEXICAL_FEATURES, pair_features

    pairs = load_pairs(args.pairs, args.per_reference)
    load_s, _ = timed(encoder)
    pair_features(pairs[:32], with_embeddings=True)  # warm-up: first-call allocations

    def run(with_embeddings: bool, families=()):
        mats = []
        for start in range(0, len(pairs), args.batch):
            mats.append(
                pair_features(
                    pairs[start : start + args.batch], with_embeddings=with_embeddings, families=families
                ).matrix
            )
        return np.vstack(mats)

    lex_s, lex = timed(run, False)
    emb_s, emb = timed(run, True)
    v2_s, v2 = timed(run, True, RECIPES["v2"])
    v4_s, v4 = timed(run, True, RECIPES["v4"])
    y = np.nan_to_num(lex[:, LEXICAL_FEATURES.index("bleu")])  # any target: only predict time matters
    models = {}
    for name, X in (("lexical", lex), ("embedding", emb), ("v2", v2)):
        keep = ~np.isnan(X).any(axis=1)
        models[name] = HistGradientBoostingRegressor(max_iter=300, random_state=0).fit(X[keep], y[keep])
    lex_p, _ = timed(models["lexical"].predict, np.nan_to_num(lex))
    emb_p, _ = timed(models["embedding"].predict, np.nan_to_num(emb))
    v2_p, _ = timed(models["v2"].predict, np.nan_to_num(v2))

    def mean_of_three(X, recipe: str):
        keep = ~np.isnan(X).any(axis=1)
        rng = np.random.default_rng(0)
        rows = rng.integers(0, int(keep.sum()), 4000)  # a campaign-sized training set (jittered copies)
        X_fit = X[keep][rows] * (1 + 0.05 * rng.standard_normal((4000, X.shape[1])))
        y_fit = y[keep][rows] + rng.normal(0, 5, 4000)
        return candidate_estimators(4000, 0, recipe=recipe)["ridge_cv+gradient_boosting+svr"].fit(X_fit, y_fit)

    v3_model, v4_model = mean_of_three(v2, "v3"), mean_of_three(v4, "v4")
    v3_p, _ = timed(v3_model.predict, np.nan_to_num(v2))
    v4_p, _ = timed(v4_model.predict, np.nan_to_num(v4))
    n = len(pairs)
    rate_lex, rate_emb, rate_v2 = n / (lex_s + lex_p), n / (emb_s + emb_p), n / (v2_s + v2_p)
    rate_v3, rate_v4 = n / (v2_s + v3_p), n / (v4_s + v4_p)

    print(
        f"pairs: {n} ({'STS-B dev' if STSB_DEV.is_file() else 'random'} sentences, "
        f"{args.per_reference} paraphrase(s) per reference), batch {args.batch}, 1 thread; "
        f"encoder load {load_s:.1f} s (once per worker process)"
    )
    print(
        "times are CPU seconds of this one-thread process (= core seconds, robust to a busy machine); "
        f"wall seconds of the four runs: {sum(list(WALL.values())[1:5]):.1f}"
    )
    print(f"{'features':<22}{'pairs/s/core':>14}{'features s':>12}{'predict s':>11}")
    print(f"{'lexical (baseline)':<22}{rate_lex:>14,.0f}{lex_s:>12.2f}{lex_p:>11.3f}")
    print(f"{'lexical + embedding':<22}{rate_emb:>14,.0f}{emb_s:>12.2f}{emb_p:>11.3f}")
    print(f"{'+ recipe v2 families':<22}{rate_v2:>14,.0f}{v2_s:>12.2f}{v2_p:>11.3f}")
    print(f"{'  with v3 estimator':<22}{rate_v3:>14,.0f}{v2_s:>12.2f}{v3_p:>11.3f}")
    print(f"{'recipe v4 (+ sts head)':<22}{rate_v4:>14,.0f}{v4_s:>12.2f}{v4_p:>11.3f}")
    print(
        f"ratio embedding/baseline time per pair: {rate_lex / rate_emb:.1f}x slower "
        f"(throughput ratio {rate_emb / rate_lex:.3f})"
    )
    print(
        f"ratio recipe v2/embedding (the default) throughput: {rate_v2 / rate_emb:.3f} "
        f"({rate_emb / rate_v2:.2f}x the time per pair)"
    )
    print(
        f"ratio recipe v3/embedding (the default) throughput: {rate_v3 / rate_emb:.3f} "
        f"({rate_emb / rate_v3:.2f}x the time per pair; SVR support vectors: "
        f"{len(v3_model.named_estimators_['svr'][-1].support_)})"
    )
    print(
        f"ratio recipe v4/embedding (the default) throughput: {rate_v4 / rate_emb:.3f} "
        f"({rate_emb / rate_v4:.2f}x the time per pair; SVR support vectors: "
        f"{len(v4_model.named_estimators_['svr'][-1].support_)})"
    )
    print(f"\n{RESOURCE_PAIRS:,} pairs on N single-core workers (wall time, no I/O):")
    print(f"{'N':>4}{'lexical':>14}{'+ embedding':>16}")
    for workers in WORKERS:
        print(
            f"{workers:>4}{hours(RESOURCE_PAIRS / rate_lex / workers):>14}"
            f"{hours(RESOURCE_PAIRS / rate_emb / workers):>16}"
        )
    return 0


def device_main(args) -> int:
    """Device mode (module docstring): rates on ``--device`` in ``--dtype``, differences against CPU float32."""
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    sys.path.insert(0, str(ROOT))
    import numpy as np
    import torch

    torch.set_num_threads(args.threads)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")  # scoring.regressor's models
    import django

    django.setup()
    from scipy.stats import spearmanr

    from scoring.regressor import candidate_estimators
    from scoring.scored.device import DEFAULT_CUDA_DTYPE, DEFAULT_CUDA_ENCODE_BATCH
    from scoring.similarity.embeddings import (
        CPU_FLOAT32,
        EncoderPlacement,
        encoder,
        encoder_resolve,
        encoding_on,
        pair_similarities,
    )
    from scoring.similarity.features import EMBEDDING_FEATURES, pair_features
    from scoring.similarity.lexical_processes import cpu_workers_on, lexical_processes

    device = args.device or "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        print("--device cuda: torch sees no CUDA device here", file=sys.stderr)
        return 2
    on_cuda = device == "cuda"
    placement = EncoderPlacement(
        device=device,
        dtype=args.dtype or (DEFAULT_CUDA_DTYPE if on_cuda else "float32"),
        batch_size=args.encode_batch or (DEFAULT_CUDA_ENCODE_BATCH if on_cuda else None),
    )
    batch = args.batch or (2048 if on_cuda else 256)
    pairs = load_pairs(args.pairs, args.per_reference)
    check = pairs[: min(args.check_pairs, len(pairs))]

    def batches(items):
        return [items[i : i + batch] for i in range(0, len(items), batch)]

    def wall(fn):
        if on_cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        out = fn()
        if on_cuda:
            torch.cuda.synchronize()
        return time.perf_counter() - start, out

    chosen = encoder_resolve(args.encoder)  # (None: the packaged MiniLM)
    load_s, _ = wall(lambda: encoder(placement.device, placement.dtype, chosen))
    pair_similarities(
        [p["reference"] for p in pairs[:64]],
        [p["paraphrase"] for p in pairs[:64]],
        placement=placement,
        sentence_encoder=chosen,
    )

    def embeddings_only():
        for part in batches(pairs):
            pair_similarities(
                [p["reference"] for p in part],
                [p["paraphrase"] for p in part],
                placement=placement,
                sentence_encoder=chosen,
            )

    workers = args.cpu_workers or 1
    if workers > 1:
        lexical_processes(workers)  # started once, as by a worker's first batch: not timed

    def features(with_embeddings: bool):
        with encoding_on(placement), cpu_workers_on(workers):
            return np.vstack(
                [
                    pair_features(part, with_embeddings=with_embeddings, sentence_encoder=chosen).matrix
                    for part in batches(pairs)
                ]
            )

    emb_s, _ = wall(embeddings_only)
    lex_s, _ = wall(lambda: features(False))
    all_s, device_matrix = wall(lambda: features(True))

    with encoding_on(CPU_FLOAT32):  # the first pairs as every scoring so far: the reference to stay close to
        reference = pair_features(check, with_embeddings=True, sentence_encoder=chosen)
    X32, X = reference.matrix, device_matrix[: len(check)]
    keep = reference.keep
    names = reference.names
    n = len(pairs)
    card = torch.cuda.get_device_name() if on_cuda else f"CPU, {args.threads} torch thread(s)"
    print(
        f"device mode: {card}; torch {torch.__version__}; encoder {chosen.name} (weights sha256 {chosen.sha256[:12]}) "
        f"on {placement.device}/{placement.dtype}, "
        f"{placement.batch_size or 64} texts per forward pass, {batch} pairs per batch; {n} pairs "
        f"({'STS-B dev' if STSB_DEV.is_file() else 'random'} sentences, {args.per_reference} paraphrase(s) per "
        f"reference); encoder load {load_s:.1f} s; lexical features on {workers} process(es) (--cpu-workers)"
    )
    print("wall-clock rates of one process:")
    print(f"  embedding features alone (cosine, alignment)   {n / emb_s:>12,.0f} pairs/s")
    print(f"  lexical features alone (the CPU side, {workers:>2} proc.) {n / lex_s:>12,.0f} pairs/s")
    print(f"  lexical + embedding (the default recipe)       {n / all_s:>12,.0f} pairs/s")
    print(
        f"against CPU float32 on the first {len(check)} pairs ({int(keep.sum())} scored; when this run is "
        "CPU float32 itself, only float32 rounding of other padding, about 1e-7):"
    )
    for name in EMBEDDING_FEATURES:
        j = names.index(name)
        print(f"  {name:<10} max |difference| {np.abs(X[keep, j] - X32[keep, j]).max():.2e}")
    rows = np.flatnonzero(keep)
    cosine, align_f = X32[rows, names.index("cosine")], X32[rows, names.index("align_f")]
    target = np.clip(100 * (0.6 * cosine + 0.4 * align_f), 0, 100)  # a stand-in for human similarity
    for name, estimator in candidate_estimators(len(rows), 0).items():
        estimator.fit(X32[rows], target)
        a = np.clip(estimator.predict(X32[rows]), 0, 100)
        b = np.clip(estimator.predict(X[rows]), 0, 100)
        d = np.abs(a - b)
        rho = spearmanr(a, b)[0] if d.any() else 1.0
        print(
            f"  score, {name:<24} max |difference| {d.max():.3f}  mean {d.mean():.4f}  over 1 point "
            f"{int((d > 1).sum())}  Spearman {rho:.6f}"
        )
    return 0


def proc_cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of the running processes ``pids`` so far (Linux /proc)."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat(5))
    return total / os.sysconf("SC_CLK_TCK")


def workers_main(args) -> int:
    """Workers mode (module docstring): lexical features on 1 and N processes, the rest of a GPU chunk's CPU work
    on one core, and the projection from them."""
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"  # one core: numpy's small products in the alignment, as the job's one thread
    sys.path.insert(0, str(ROOT))
    import numpy as np

    from scoring.similarity.embeddings import encoder, pair_rows, subword_lengths
    from scoring.similarity.features import pair_features
    from scoring.similarity.lexical_processes import cpu_workers_on, lexical_processes

    n_workers = args.cpu_workers
    batch = args.batch or 2048
    pairs = load_pairs(args.pairs, args.per_reference)
    parts = [pairs[i : i + batch] for i in range(0, len(pairs), batch)]
    n = len(pairs)
    pair_features(pairs[:64], with_embeddings=False)  # warm-up: first-call allocations
    start = time.perf_counter()
    pool = lexical_processes(n_workers) if n_workers > 1 else None
    with cpu_workers_on(n_workers):
        pair_features(pairs[:64], with_embeddings=False)  # the processes' imports: once per worker process
    start_s = time.perf_counter() - start

    def run(workers: int) -> tuple[float, float, float, np.ndarray]:
        """Wall seconds, this process's CPU seconds, the lexical processes' CPU seconds, the matrix."""
        pids = pool.pids if pool is not None and workers > 1 else []
        wall, cpu, child = time.perf_counter(), time.process_time(), proc_cpu_seconds(pids)
        with cpu_workers_on(workers):
            matrix = np.vstack([pair_features(part, with_embeddings=False).matrix for part in parts])
        return (
            time.perf_counter() - wall,
            time.process_time() - cpu,
            proc_cpu_seconds(pids) - child,
            matrix,
        )

    runs: dict[int, list] = {1: [], n_workers: []}
    for _ in range(args.repeat):  # interleaved, so both see the same neighbours on a shared machine
        for workers in runs:
            runs[workers].append(run(workers))
    one, many = min(runs[1], key=lambda r: r[0]), min(runs[n_workers], key=lambda r: r[0])
    equal = all(np.array_equal(r[3], one[3], equal_nan=True) for rs in runs.values() for r in rs)

    # the rest of a GPU chunk's CPU work, in the scoring process, one core: tokenizing for the encoder and
    # the token alignment (the forward passes themselves are the GPU's)
    tokenizer = encoder().tokenizer
    max_len = encoder()[0].max_seq_length
    rng = np.random.default_rng(0)
    tok_s = align_s = 0.0
    for part in parts:
        refs, paras = [p["reference"] for p in part], [p["paraphrase"] for p in part]
        unique = sorted(dict.fromkeys([*refs, *paras]), key=len)
        cpu = time.process_time()
        for i in range(0, len(unique), 1024):
            tokenizer(unique[i : i + 1024], padding=True, truncation=True, max_length=max_len, return_tensors="pt")
        tok_s += time.process_time() - cpu
        counts = np.minimum(subword_lengths(unique), max_len - 2).clip(min=1)
        tokens = [rng.standard_normal((int(c), 384)).astype(np.float32) for c in counts]
        tokens = [t / np.linalg.norm(t, axis=1, keepdims=True) for t in tokens]
        sentences = rng.standard_normal((len(unique), 384)).astype(np.float32)
        sentences /= np.linalg.norm(sentences, axis=1, keepdims=True)
        index = {t: i for i, t in enumerate(unique)}
        cpu = time.process_time()
        pair_rows(sentences, tokens, index, refs, paras)
        align_s += time.process_time() - cpu

    rate_one, rate_many = n / one[0], n / many[0]
    lex_per_pair = many[2] / n  # a lexical process's CPU per pair
    main_lex_per_pair = many[1] / n  # the scoring process's own share with the processes: checks, dispatch
    main_per_pair = main_lex_per_pair + (tok_s + align_s) / n
    sequential_per_pair = one[1] / n + (tok_s + align_s) / n  # cpu_workers 1: all of it in one process
    print(
        f"workers mode: {n} pairs ({'STS-B dev' if STSB_DEV.is_file() else 'random'} sentences, "
        f"{args.per_reference} paraphrase(s) per reference), batches of {batch}, best of {args.repeat} interleaved "
        f"runs; {os.cpu_count()} CPU(s) here, load average {os.getloadavg()[0]:.2f} at the end; "
        f"{n_workers} lexical processes started in {start_s:.2f} s (once per worker process)"
    )
    print(f"matrices equal, value for value, every run: {equal}")
    print("lexical features, wall-clock pairs/s of the scoring process:")
    print(f"  1 process (cpu_workers 1, in the scoring process)   {rate_one:>10,.0f}")
    print(f"  {n_workers} lexical processes (cpu_workers {n_workers}){'':>19}{rate_many:>10,.0f}")
    print(f"ratio {n_workers} processes / 1: {rate_many / rate_one:.2f}")
    print("CPU per pair (one core each):")
    print(f"  a lexical process, lexical rows                      {1 / lex_per_pair:>10,.0f} pairs/s")
    print(f"  the scoring process, its share with {n_workers} processes{'':>9}{1 / main_lex_per_pair:>10,.0f} pairs/s")
    print(f"  the scoring process, encoder tokenization (1024/batch) {n / tok_s:>8,.0f} pairs/s")
    print(f"  the scoring process, token alignment (pair_rows)       {n / align_s:>8,.0f} pairs/s")
    print(f"  the scoring process, all of its CPU work on a GPU      {1 / main_per_pair:>8,.0f} pairs/s")
    print(
        "PROJECTION, not a GPU measurement (the GPU's passes and copies assumed not to be the bound): one GPU worker "
        "process with cpu_workers k makes min(k x a lexical process's rate, the scoring process's rate) pairs/s; "
        "busy cores = its rate x the CPU per pair of each part:"
    )
    print(f"  {'cpu_workers':<14}{'pairs/s':>10}{'busy cores':>12}{'processes':>11}")
    print(f"  {'1 (inline)':<14}{1 / sequential_per_pair:>10,.0f}{1.0:>12.1f}{1:>11}")
    for k in (2, 4, 8, 15):
        rate = min(k / lex_per_pair, 1 / main_per_pair)
        print(f"  {k:<14}{rate:>10,.0f}{rate * (lex_per_pair + main_per_pair):>12.1f}{k + 1:>11}")
    target = 50_000
    best = min(2 / lex_per_pair, 1 / main_per_pair)
    print(
        f"  {target:,} pairs/s per card: about {target * sequential_per_pair:.1f} cores of CPU work inline, "
        f"{target * (lex_per_pair + main_per_pair):.1f} with lexical processes, whatever the split; GPU worker "
        f"processes sharing the card: {math.ceil(target * sequential_per_pair)} with cpu_workers 1, "
        f"{math.ceil(target / best)} with cpu_workers 2 (one tops out at {1 / main_per_pair:,.0f} pairs/s, its own "
        "tokenizing and alignment)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
